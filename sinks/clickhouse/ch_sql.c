/*
 * sinks/clickhouse/ch_sql.c: the SQL the ClickHouse sink sends, and the
 * reading of ClickHouse's errors (see ch_sql.h).
 *
 * Version notes, 18.16 against 23.x-25.x (each verified on 18.16.1; the
 * later forms are ClickHouse's documented behaviour):
 *  - ReplacingMergeTree takes one argument, the version column (an
 *    is_deleted argument came in 23.2), so deletions are a column that the
 *    view filters.  The modern layout (23.x and later) passes _is_deleted.
 *  - No DateTime64, no Date32, no Bool, no UUID layout we rely on: times are
 *    Int64 microseconds, dates Int32 days, booleans UInt8, uuids text (the
 *    legacy layout); the modern layout has them (ch_rowbin.h).
 *  - Nullable columns cannot be in a sorting key (allow_nullable_key came in
 *    20.x), so merge-mode key columns are not Nullable.
 *  - "ADD COLUMN IF NOT EXISTS" and "CREATE OR REPLACE VIEW" do not parse in
 *    18.16: the sink compares columns first and adds only missing ones, and
 *    drops and re-creates the view.
 *  - A view's "*" is expanded when the view is created (in every version).
 *  - Errors: 18.16 has no X-ClickHouse-Exception-Code header and answers a
 *    parse error with 500 and an unknown table with 404, so the exception
 *    code in the body decides.
 *  - The URL of a request may not exceed 16 KB in 18.16: an insert into a
 *    table with a very long column list leaves the list out.
 *  - FINAL with a WHERE on a column that is not in the sorting key: 18.16
 *    filters after collapsing (later versions only move conditions to
 *    PREWHERE with optimize_move_to_prewhere_if_final, off by default); the
 *    lookups here also read _version and _is_deleted and decide themselves.
 *  - ON CLUSTER (the key cluster) parses after the table's name in CREATE,
 *    DROP and ALTER in every version; {database} and {table} in a
 *    Replicated engine's path are filled in here, so that the path does not
 *    depend on which macros a release expands in engine arguments ({shard}
 *    and {replica} come from each server's configuration).
 *  - Distributed tables (distributed = true), verified on two 18.16 shards:
 *    cityHash64 takes no Decimal (so a decimal key is hashed as its text);
 *    ALTER ... ON CLUSTER of a table that is not replicated fails when the
 *    shards have internal_replication (so the Distributed table is dropped
 *    and made again); an insert is asynchronous unless
 *    insert_distributed_sync = 1 (23.x+: distributed_foreground_insert, the
 *    old name kept as an alias); FINAL, and an IN over an external table,
 *    work through a Distributed table (the external table goes to the
 *    shards with the query).
 */
#include "sinks/clickhouse/ch_sql.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Longest insert query put in the URL with its column list (the URL-encoded
 * form stays well below 18.16's 16 KB). */
#define INSERT_QUERY_MAX 4000

/* s quoted with q, backslash-escaped; with ascii, every byte past 0x7f
 * too (\xHH), so that no server reads the text as UTF-8. */
static int quote(struct sl_buf *b, const char *s, size_t n, char q, bool ascii)
{
	static const char hex[] = "0123456789ABCDEF";

	sl_buf_putc(b, q);
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		if (c == '\\' || c == (unsigned char)q) {
			sl_buf_putc(b, '\\');
			sl_buf_putc(b, (char)c);
		} else if (c < 0x20 || c == 0x7f || (ascii && c > 0x7f)) {
			char e[4] = { '\\', 'x', hex[c >> 4], hex[c & 0xf] };
			sl_buf_append(b, e, sizeof e);
		} else {
			sl_buf_putc(b, (char)c);
		}
	}
	sl_buf_putc(b, q);
	return sl_buf_failed(b) ? -1 : 0;
}

int ch_quote_ident(struct sl_buf *b, const char *name)
{
	return quote(b, name, strlen(name), '`', false);
}

int ch_quote_str(struct sl_buf *b, const char *s, size_t n)
{
	return quote(b, s, n, '\'', false);
}

int ch_qname(struct sl_buf *b, const char *db, const char *object, const char *suffix)
{
	size_t n = strlen(object), m = suffix ? strlen(suffix) : 0;
	char *full = malloc(n + m + 1);

	if (!full) {
		b->failed = true;
		return -1;
	}
	memcpy(full, object, n);
	if (m)
		memcpy(full + n, suffix, m);
	full[n + m] = '\0';
	ch_quote_ident(b, db);
	sl_buf_putc(b, '.');
	ch_quote_ident(b, full);
	free(full);
	return sl_buf_failed(b) ? -1 : 0;
}

/* The suffix of the local tables' names: CH_LOCAL_SUFFIX with distributed,
 * else none. */
static const char *local_suffix(const struct ch_ddl *d)
{
	return d && d->cluster && d->distributed ? CH_LOCAL_SUFFIX : NULL;
}

/* " ON CLUSTER `name`" when the DDL goes to a cluster. */
static void on_cluster(struct sl_buf *b, const struct ch_ddl *d)
{
	if (!d || !d->cluster)
		return;
	sl_buf_puts(b, " ON CLUSTER ");
	ch_quote_ident(b, d->cluster);
}

/* The engine `family` (a MergeTree name) with its arguments args (NULL:
 * none): on a cluster Replicated<family>('<path>', '{replica}'[, args]),
 * the path's {database} and {table} replaced here by db and table. */
static void engine(struct sl_buf *b, const struct ch_ddl *d, const char *db, const char *table,
		   const char *family, const char *args)
{
	struct sl_buf path;

	sl_buf_puts(b, " ENGINE = ");
	if (!d || !d->cluster) {
		sl_buf_puts(b, family);
		if (args)
			sl_buf_printf(b, "(%s)", args);
		return;
	}
	sl_buf_init(&path, 0);
	for (const char *p = d->replica_path; *p; p++) {
		if (!strncmp(p, "{database}", 10)) {
			sl_buf_puts(&path, db);
			p += 9;
		} else if (!strncmp(p, "{table}", 7)) {
			sl_buf_puts(&path, table);
			p += 6;
		} else {
			sl_buf_putc(&path, *p);
		}
	}
	if (sl_buf_failed(&path))
		b->failed = true;
	sl_buf_printf(b, "Replicated%s(", family);
	ch_quote_str(b, path.data ? path.data : "", path.len);
	sl_buf_puts(b, ", '{replica}'");
	if (args)
		sl_buf_printf(b, ", %s", args);
	sl_buf_putc(b, ')');
	sl_buf_free(&path);
}

/* A column's COMMENT (how sluice masks it: doc/clickhouse.md), if it has one. */
static void comment(struct sl_buf *b, const struct ch_col *c)
{
	if (!c->comment)
		return;
	sl_buf_puts(b, " COMMENT ");
	ch_quote_str(b, c->comment, strlen(c->comment));
}

int ch_sql_create_database(struct sl_buf *b, const struct ch_ddl *d, const char *db)
{
	sl_buf_puts(b, "CREATE DATABASE IF NOT EXISTS ");
	ch_quote_ident(b, db);
	on_cluster(b, d);
	return sl_buf_failed(b) ? -1 : 0;
}

char *ch_local_name(const struct ch_ddl *d, const char *object)
{
	struct sl_buf n;

	sl_buf_init(&n, 0);
	sl_buf_puts(&n, object);
	if (local_suffix(d))
		sl_buf_puts(&n, local_suffix(d));
	return sl_buf_detach(&n);
}

int ch_sql_create_table(struct sl_buf *b, const struct ch_ddl *d, const char *db, const struct ch_layout *l)
{
	bool first = true;
	char *name;

	if (!(name = ch_local_name(d, l->object))) {
		b->failed = true;
		return -1;
	}
	sl_buf_puts(b, "CREATE TABLE IF NOT EXISTS ");
	ch_qname(b, db, name, NULL);
	on_cluster(b, d);
	sl_buf_puts(b, " (");
	for (int i = 0; i < l->ncols; i++) {
		sl_buf_puts(b, i ? ", " : "");
		ch_quote_ident(b, l->cols[i].name);
		sl_buf_putc(b, ' ');
		ch_type_sql(b, &l->cols[i].type);
		comment(b, &l->cols[i]);
	}
	sl_buf_putc(b, ')');
	if (l->merge) {
		/* is_deleted (23.2 and later): FINAL and merges drop a deleted key's
		 * rows in the modern layout; the view filters in both */
		engine(b, d, db, name, "ReplacingMergeTree",
		       l->flavor == CH_MODERN ? "`_version`, `_is_deleted`" : "`_version`");
		sl_buf_puts(b, " ORDER BY (");
		for (int k = 0; k < l->nkeys; k++) {
			sl_buf_puts(b, first ? "" : ", ");
			first = false;
			ch_quote_ident(b, l->cols[l->keys[k]].name);
		}
		sl_buf_putc(b, ')');
	} else {
		engine(b, d, db, name, "ReplacingMergeTree", NULL);
		sl_buf_puts(b, " ORDER BY (`_csn`, `_uuid`)");
	}
	free(name);
	return sl_buf_failed(b) ? -1 : 0;
}

int ch_sql_create_distributed(struct sl_buf *b, const struct ch_ddl *d, const char *db, const char *object,
			      const struct ch_dest_col *cols, int ncols)
{
	bool first = true;
	char *name;

	if (!d || !d->cluster || !(name = ch_local_name(d, object))) {
		b->failed = true;
		return -1;
	}
	sl_buf_puts(b, "CREATE TABLE IF NOT EXISTS ");
	ch_qname(b, db, object, NULL);
	on_cluster(b, d);
	sl_buf_puts(b, " (");
	for (int i = 0; i < ncols; i++) {
		sl_buf_puts(b, i ? ", " : "");
		ch_quote_ident(b, cols[i].name);
		sl_buf_printf(b, " %s", cols[i].type);
	}
	/* The cluster, database and table as strings: any name parses so. */
	sl_buf_puts(b, ") ENGINE = Distributed(");
	ch_quote_str(b, d->cluster, strlen(d->cluster));
	sl_buf_puts(b, ", ");
	ch_quote_str(b, db, strlen(db));
	sl_buf_puts(b, ", ");
	ch_quote_str(b, name, strlen(name));
	/* The shard of a row: a hash of the local table's sorting key (the
	 * primary key in merge mode, _csn and _uuid in append mode), so that
	 * the rows ReplacingMergeTree collapses meet on one shard.  18.16's
	 * cityHash64 takes no Decimal: a decimal key is hashed as its text,
	 * which has all its scale's digits. */
	sl_buf_puts(b, ", cityHash64(");
	for (int i = 0; i < ncols; i++) {
		bool dec = strncmp(cols[i].type, "Decimal", 7) == 0;
		if (!cols[i].in_sorting_key)
			continue;
		sl_buf_puts(b, first ? "" : ", ");
		first = false;
		sl_buf_puts(b, dec ? "toString(" : "");
		ch_quote_ident(b, cols[i].name);
		sl_buf_puts(b, dec ? ")" : "");
	}
	sl_buf_puts(b, "))");
	free(name);
	return sl_buf_failed(b) ? -1 : 0;
}

int ch_sql_create_view(struct sl_buf *b, const struct ch_ddl *d, const char *db, const char *object)
{
	sl_buf_puts(b, "CREATE VIEW IF NOT EXISTS ");
	ch_qname(b, db, object, CH_VIEW_SUFFIX);
	on_cluster(b, d);
	sl_buf_puts(b, " AS SELECT * FROM ");
	ch_qname(b, db, object, NULL);
	sl_buf_puts(b, " FINAL WHERE `_is_deleted` = 0");
	return sl_buf_failed(b) ? -1 : 0;
}

static int drop(struct sl_buf *b, const struct ch_ddl *d, const char *db, const char *object, const char *suffix)
{
	/* DROP TABLE drops a view in every version; DROP VIEW is newer. */
	sl_buf_puts(b, "DROP TABLE IF EXISTS ");
	ch_qname(b, db, object, suffix);
	on_cluster(b, d);
	return sl_buf_failed(b) ? -1 : 0;
}

int ch_sql_drop_view(struct sl_buf *b, const struct ch_ddl *d, const char *db, const char *object)
{
	return drop(b, d, db, object, CH_VIEW_SUFFIX);
}

int ch_sql_drop_distributed(struct sl_buf *b, const struct ch_ddl *d, const char *db, const char *object)
{
	return drop(b, d, db, object, NULL);
}

int ch_sql_default(struct sl_buf *b, const struct ch_type *t, const struct sl_value *v)
{
	struct sl_buf text;
	bool micros = t->ch == CH_DATETIME64 || t->ch == CH_DATETIME64_UTC;
	int rc = 0;

	sl_buf_init(&text, 0);
	switch (v->kind) {
	case SL_V_BOOL:
		sl_buf_puts(&text, t->ch == CH_BOOL ? (v->b ? "true" : "false") : (v->b ? "1" : "0"));
		break;
	case SL_V_INT:
	case SL_V_DATE:
	case SL_V_TIME:
	case SL_V_TIMESTAMP:
		sl_buf_printf(&text, "%" PRId64, v->i);
		break;
	case SL_V_UINT:
		sl_buf_printf(&text, "%" PRIu64, v->u);
		break;
	case SL_V_DECIMAL:
		sl_value_decimal_text(&text, v);
		break;
	case SL_V_STRING:
	case SL_V_JSON:
	case SL_V_BYTES:
		sl_buf_append(&text, v->p, v->len);
		break;
	case SL_V_UUID: {
		char u[36];
		ch_uuid_text(u, (const unsigned char *)v->p);
		sl_buf_append(&text, u, sizeof u);
		break;
	}
	default:
		rc = 1;
		break;
	}
	if (t->ch == CH_FLOAT32 || t->ch == CH_FLOAT64 || t->ch == CH_DATE32 || t->ch == CH_ARRAY_STRING ||
	    (micros && v->kind != SL_V_TIMESTAMP))
		rc = 1;
	if (rc == 0) {
		sl_buf_puts(b, " DEFAULT CAST(");
		if (micros)
			sl_buf_puts(b, "fromUnixTimestamp64Micro(CAST(");
		/* ClickHouse 26 keeps the expression as text, in which a byte
		 * that is not UTF-8 would become U+FFFD. */
		quote(b, text.data ? text.data : "", text.len, '\'', true);
		if (micros)
			sl_buf_puts(b, " AS Int64))");
		sl_buf_puts(b, " AS ");
		ch_type_sql(b, t);
		sl_buf_putc(b, ')');
	}
	sl_buf_free(&text);
	if (sl_buf_failed(&text))
		b->failed = true;
	return sl_buf_failed(b) ? -1 : rc;
}

int ch_sql_add_columns(struct sl_buf *b, const struct ch_ddl *d, const char *db, const struct ch_layout *l,
		       const int *add, int nadd, const struct sl_table *tv)
{
	sl_buf_puts(b, "ALTER TABLE ");
	ch_qname(b, db, l->object, local_suffix(d));
	on_cluster(b, d);
	for (int i = 0; i < nadd; i++) {
		const struct ch_col *c = &l->cols[add[i]];
		sl_buf_puts(b, i ? ", ADD COLUMN " : " ADD COLUMN ");
		ch_quote_ident(b, c->name);
		sl_buf_putc(b, ' ');
		ch_type_sql(b, &c->type);
		if (tv && c->src >= 0 && c->src < tv->ncols && tv->cols[c->src].missing.kind != SL_V_NULL)
			(void)ch_sql_default(b, &c->type, &tv->cols[c->src].missing);
		comment(b, c);
	}
	return sl_buf_failed(b) ? -1 : 0;
}

int ch_sql_change_columns(struct sl_buf *b, const struct ch_ddl *d, const char *db, const struct ch_layout *l,
			  const struct ch_dest_col *dest, const struct ch_alter *a)
{
	sl_buf_puts(b, "ALTER TABLE ");
	ch_qname(b, db, l->object, local_suffix(d));
	on_cluster(b, d);
	for (int i = 0; i < a->nmodify; i++) {
		const struct ch_col *c = &l->cols[a->modify[i]];
		sl_buf_puts(b, i ? ", MODIFY COLUMN " : " MODIFY COLUMN ");
		ch_quote_ident(b, c->name);
		sl_buf_putc(b, ' ');
		ch_type_sql(b, &c->type);
	}
	for (int i = 0; i < a->ndrop; i++) {
		sl_buf_puts(b, i || a->nmodify ? ", DROP COLUMN " : " DROP COLUMN ");
		ch_quote_ident(b, dest[a->drop[i]].name);
	}
	return sl_buf_failed(b) ? -1 : 0;
}

/* Appends "FROM system.columns WHERE" the columns of table db.object. */
static void columns_of(struct sl_buf *b, const char *db, const char *object)
{
	sl_buf_puts(b, "FROM system.columns WHERE database = ");
	ch_quote_str(b, db, strlen(db));
	sl_buf_puts(b, " AND table = ");
	ch_quote_str(b, object, strlen(object));
}

int ch_sql_describe(struct sl_buf *b, const char *db, const char *object)
{
	sl_buf_puts(b, "SELECT name, type, toUInt8(is_in_sorting_key) ");
	columns_of(b, db, object);
	sl_buf_puts(b, " FORMAT RowBinary");
	return sl_buf_failed(b) ? -1 : 0;
}

int ch_sql_engines(struct sl_buf *b, const struct ch_ddl *d, const char *db, const char *object)
{
	sl_buf_puts(b, "SELECT name, engine FROM system.tables WHERE database = ");
	ch_quote_str(b, db, strlen(db));
	sl_buf_puts(b, " AND (name = ");
	ch_quote_str(b, object, strlen(object));
	sl_buf_puts(b, " OR name = concat(");
	ch_quote_str(b, object, strlen(object));
	sl_buf_puts(b, ", '" CH_VIEW_SUFFIX "')");
	if (local_suffix(d)) {
		sl_buf_puts(b, " OR name = concat(");
		ch_quote_str(b, object, strlen(object));
		sl_buf_printf(b, ", '%s')", local_suffix(d));
	}
	sl_buf_puts(b, ") FORMAT RowBinary");
	return sl_buf_failed(b) ? -1 : 0;
}

int ch_sql_database_exists(struct sl_buf *b, const char *db)
{
	sl_buf_puts(b, "SELECT count() FROM system.databases WHERE name = ");
	ch_quote_str(b, db, strlen(db));
	sl_buf_puts(b, " FORMAT RowBinary");
	return sl_buf_failed(b) ? -1 : 0;
}

int ch_sql_cluster_hosts(struct sl_buf *b, const char *cluster)
{
	sl_buf_puts(b, "SELECT count(), uniqExact(shard_num), toUInt64(sum(is_local)) FROM system.clusters WHERE "
		    "cluster = ");
	ch_quote_str(b, cluster, strlen(cluster));
	sl_buf_puts(b, " FORMAT RowBinary");
	return sl_buf_failed(b) ? -1 : 0;
}

int ch_sql_user_settings(struct sl_buf *b)
{
	sl_buf_puts(b, "SELECT name, value FROM system.settings WHERE name IN ('readonly', 'allow_ddl') "
		    "FORMAT RowBinary");
	return sl_buf_failed(b) ? -1 : 0;
}

int ch_sql_version(struct sl_buf *b)
{
	sl_buf_puts(b, "SELECT version() FORMAT TSV");
	return sl_buf_failed(b) ? -1 : 0;
}

int ch_flavor_of_version(const char *s, size_t n, enum ch_flavor *out)
{
	long major = 0;
	size_t i;

	for (i = 0; i < n && i < 6 && s[i] >= '0' && s[i] <= '9'; i++)
		major = major * 10 + (s[i] - '0');
	if (i == 0 || i >= n || s[i] != '.')
		return -1;
	*out = major >= 23 ? CH_MODERN : CH_LEGACY;
	return 0;
}

int ch_sql_insert(struct sl_buf *b, const char *db, const struct ch_layout *l, bool meta_only)
{
	size_t start = b->len;

	sl_buf_puts(b, "INSERT INTO ");
	ch_qname(b, db, l->object, NULL);
	sl_buf_putc(b, ' ');
	ch_layout_column_list(b, l, meta_only);
	if (!meta_only && !l->partial && b->len - start > INSERT_QUERY_MAX) {
		/* Too long for a URL: the rows follow the table's own order. */
		b->len = start;
		b->failed = false;
		sl_buf_puts(b, "INSERT INTO ");
		ch_qname(b, db, l->object, NULL);
	}
	sl_buf_puts(b, " FORMAT RowBinary");
	return sl_buf_failed(b) ? -1 : 0;
}

/* A literal of a metadata value, for the tombstones' SELECT. */
static void meta_literal(struct sl_buf *b, const struct ch_layout *l, const struct ch_col *c,
			 const struct ch_rowmeta *m)
{
	char u[36];
	int i;

	switch (c->meta) {
	case CH_M_UUID:
		ch_uuid_text(u, m->uuid);
		sl_buf_puts(b, c->type.ch == CH_UUID ? "toUUID(" : "");
		ch_quote_str(b, u, sizeof u);
		sl_buf_puts(b, c->type.ch == CH_UUID ? ")" : "");
		return;
	case CH_M_SOURCE_TS:
	case CH_M_READ_TS:
		/* a DateTime64 from microseconds: a cast would read seconds */
		sl_buf_printf(b, c->type.ch == CH_DATETIME64_UTC ? "fromUnixTimestamp64Micro(toInt64(%" PRId64
				 "), 'UTC')" : "toInt64(%" PRId64 ")",
			      c->meta == CH_M_SOURCE_TS ? m->source_ts_us : m->read_ts_us);
		return;
	case CH_M_CHANGE_TYPE:
		sl_buf_puts(b, "'TRUNCATE'");
		return;
	case CH_M_CSN:
		ch_quote_str(b, m->csn, SL_CSN_LEN);
		return;
	case CH_M_VERSION:
		sl_buf_printf(b, "toUInt64(%" PRIu64 ")", m->version);
		return;
	case CH_M_IS_DELETED:
		sl_buf_puts(b, "toUInt8(1)");
		return;
	case CH_M_TX_ID:
		sl_buf_printf(b, "toUInt64(%" PRIu64 ")", m->tx_id);
		return;
	case CH_M_UNCHANGED:
		sl_buf_puts(b, "CAST([] AS Array(String))");
		return;
	}
	i = c->meta - CH_M_POS;
	if (i < 0 || i >= m->nmeta)
		sl_buf_puts(b, c->type.ch == CH_INT64 ? "toInt64(0)" : c->type.nullable ? "NULL" : "''");
	else if (c->type.ch == CH_INT64)
		sl_buf_printf(b, "toInt64(%" PRId64 ")", m->meta[i].i);
	else if (!m->meta[i].s)
		sl_buf_puts(b, "NULL");
	else
		ch_quote_str(b, m->meta[i].s, m->meta[i].len);
	(void)l;
}

int ch_sql_tombstones(struct sl_buf *b, const char *db, const char *object, const char *const *keys,
		      int nkeys, const struct ch_layout *l, const struct ch_rowmeta *m)
{
	bool first = true;

	sl_buf_puts(b, "INSERT INTO ");
	ch_qname(b, db, object, NULL);
	sl_buf_puts(b, " (");
	for (int k = 0; k < nkeys; k++) {
		sl_buf_puts(b, first ? "" : ", ");
		first = false;
		ch_quote_ident(b, keys[k]);
	}
	for (int i = 0; i < l->ncols; i++) {
		if (l->cols[i].src >= 0)
			continue;
		sl_buf_puts(b, first ? "" : ", ");
		first = false;
		ch_quote_ident(b, l->cols[i].name);
	}
	sl_buf_puts(b, ") SELECT ");
	first = true;
	for (int k = 0; k < nkeys; k++) {
		sl_buf_puts(b, first ? "" : ", ");
		first = false;
		ch_quote_ident(b, keys[k]);
	}
	for (int i = 0; i < l->ncols; i++) {
		if (l->cols[i].src >= 0)
			continue;
		sl_buf_puts(b, first ? "" : ", ");
		first = false;
		meta_literal(b, l, &l->cols[i], m);
	}
	sl_buf_puts(b, " FROM ");
	ch_qname(b, db, object, NULL);
	/* A row whose latest version is at or after the TRUNCATE stays; should
	 * a server filter before collapsing, it only adds tombstones older than
	 * a key's latest version, which change nothing. */
	sl_buf_printf(b, " FINAL WHERE `_version` < %" PRIu64 " AND `_is_deleted` = 0", m->version);
	return sl_buf_failed(b) ? -1 : 0;
}

int ch_sql_truncate_sentinel(struct sl_buf *b, const char *db, const char *object, const struct ch_layout *l,
			     const struct ch_rowmeta *m)
{
	bool first = true;

	sl_buf_puts(b, "INSERT INTO ");
	ch_qname(b, db, object, NULL);
	sl_buf_puts(b, " ");
	ch_layout_column_list(b, l, true);
	sl_buf_puts(b, " SELECT ");
	for (int i = 0; i < l->ncols; i++) {
		if (l->cols[i].src >= 0)
			continue;
		sl_buf_puts(b, first ? "" : ", ");
		first = false;
		meta_literal(b, l, &l->cols[i], m);
	}
	return sl_buf_failed(b) ? -1 : 0;
}

/* sluice's own tables in the database (the version map, the record of
 * column types): made when missing, read by object. */
static int own_table_create(struct sl_buf *b, const struct ch_ddl *d, const char *db, const char *table,
			    const char *cols, const char *order)
{
	sl_buf_puts(b, "CREATE TABLE IF NOT EXISTS ");
	ch_qname(b, db, table, NULL);
	on_cluster(b, d);
	sl_buf_printf(b, " (%s)", cols);
	engine(b, d, db, table, "ReplacingMergeTree", NULL);
	sl_buf_printf(b, " ORDER BY (%s)", order);
	return sl_buf_failed(b) ? -1 : 0;
}

static int own_table_read(struct sl_buf *b, const char *db, const char *table, const char *select,
			  const char *object, const char *tail)
{
	sl_buf_printf(b, "SELECT %s FROM ", select);
	ch_qname(b, db, table, NULL);
	sl_buf_puts(b, " FINAL WHERE `object` = ");
	ch_quote_str(b, object, strlen(object));
	sl_buf_printf(b, "%s FORMAT RowBinary", tail);
	return sl_buf_failed(b) ? -1 : 0;
}

/* Starts a row of an insert into one of them: the statement before the
 * first row, and the row's object. */
static void own_table_row(struct sl_buf *b, const char *db, const char *table, const char *cols,
			  const char *object, bool first)
{
	if (first) {
		sl_buf_puts(b, "INSERT INTO ");
		ch_qname(b, db, table, NULL);
		sl_buf_printf(b, " (%s) VALUES (", cols);
	} else {
		sl_buf_puts(b, ", (");
	}
	ch_quote_str(b, object, strlen(object));
}

int ch_sql_vmap_create(struct sl_buf *b, const struct ch_ddl *d, const char *db)
{
	return own_table_create(b, d, db, CH_VMAP_TABLE, "`object` String, `pos` UInt64, `shift` UInt64",
				"`object`, `pos`");
}

int ch_sql_vmap_read(struct sl_buf *b, const char *db, const char *object)
{
	return own_table_read(b, db, CH_VMAP_TABLE, "`pos`, `shift`", object, " ORDER BY `pos`");
}

int ch_sql_vmap_insert(struct sl_buf *b, const char *db, const char *object, const struct ch_vstep *steps,
		       size_t n)
{
	for (size_t i = 0; i < n; i++) {
		own_table_row(b, db, CH_VMAP_TABLE, "`object`, `pos`, `shift`", object, i == 0);
		sl_buf_printf(b, ", %" PRIu64 ", %" PRIu64 ")", steps[i].pos, steps[i].shift);
	}
	return sl_buf_failed(b) ? -1 : 0;
}

int ch_sql_columns_create(struct sl_buf *b, const struct ch_ddl *d, const char *db)
{
	return own_table_create(b, d, db, CH_COLUMNS_TABLE, "`object` String, `name` String, `type` String",
				"`object`, `name`");
}

int ch_sql_columns_insert(struct sl_buf *b, const char *db, const struct ch_layout *l, const int *only, int n)
{
	struct sl_buf ty;

	sl_buf_init(&ty, 0);
	for (int k = 0; k < (only ? n : l->ncols); k++) {
		int i = only ? only[k] : k;
		sl_buf_reset(&ty);
		if (ch_type_sql(&ty, &l->cols[i].type) < 0)
			b->failed = true;
		own_table_row(b, db, CH_COLUMNS_TABLE, "`object`, `name`, `type`", l->object, k == 0);
		sl_buf_puts(b, ", ");
		ch_quote_str(b, l->cols[i].name, strlen(l->cols[i].name));
		sl_buf_puts(b, ", ");
		ch_quote_str(b, ty.data ? ty.data : "", ty.len);
		sl_buf_putc(b, ')');
	}
	sl_buf_free(&ty);
	return sl_buf_failed(b) ? -1 : 0;
}

int ch_sql_columns_read(struct sl_buf *b, const char *db, const char *object)
{
	return own_table_read(b, db, CH_COLUMNS_TABLE, "`name`, `type`, toUInt8(0)", object, "");
}

int ch_sql_later_write(struct sl_buf *b, const char *db, const char *object, const char *local, const char *column,
		       const char *csn)
{
	sl_buf_puts(b, "SELECT toUInt8(1) FROM ");
	ch_qname(b, db, object, NULL);
	sl_buf_puts(b, " WHERE `_csn` > ");
	ch_quote_str(b, csn, strlen(csn));
	sl_buf_puts(b, " AND (");
	ch_quote_ident(b, column);
	sl_buf_puts(b, " IS NOT NULL OR (SELECT count() ");
	columns_of(b, db, local);
	sl_buf_puts(b, " AND name = ");
	ch_quote_str(b, column, strlen(column));
	sl_buf_puts(b, " AND default_expression != '') > 0) LIMIT 1 FORMAT RowBinary");
	return sl_buf_failed(b) ? -1 : 0;
}

int ch_sql_truncate_floor(struct sl_buf *b, const char *db, const char *object, const char *const *keys,
			  int nkeys)
{
	sl_buf_puts(b, "SELECT max(`_version`) FROM ");
	ch_qname(b, db, object, NULL);
	sl_buf_puts(b, " WHERE (");
	for (int k = 0; k < nkeys; k++) {
		sl_buf_puts(b, k ? ", " : "");
		ch_quote_ident(b, keys[k]);
	}
	sl_buf_puts(b, ") = (");
	for (int k = 0; k < nkeys; k++) {
		sl_buf_puts(b, k ? ", " : "");
		sl_buf_puts(b, "defaultValueOfArgumentType(");
		ch_quote_ident(b, keys[k]);
		sl_buf_putc(b, ')');
	}
	/* a tuple of one is a plain value: (x) = (y) holds for any count */
	sl_buf_puts(b, ") AND `_change_type` = 'TRUNCATE' FORMAT RowBinary");
	return sl_buf_failed(b) ? -1 : 0;
}

/* A key column's type in an external table's structure: no commas (the
 * time zone of a DateTime64 only changes how it prints). */
static void structure_type(struct sl_buf *b, const struct ch_type *t)
{
	if (t->ch == CH_DECIMAL)
		sl_buf_printf(b, "Decimal%d(%d)", (int)ch_decimal_width(t->precision) * 8, t->scale);
	else if (t->ch == CH_DATETIME64_UTC)
		sl_buf_puts(b, "DateTime64(6)");
	else
		ch_type_sql(b, t);
}

int ch_sql_lookup(struct sl_buf *query, struct sl_buf *structure, const char *db, const struct ch_layout *l)
{
	/* The layout's columns, by name: the table may have more (a column an
	 * older table version lacks stays, doc/clickhouse.md). */
	sl_buf_puts(query, "SELECT ");
	for (int i = 0; i < l->ncols; i++) {
		sl_buf_puts(query, i ? ", " : "");
		ch_quote_ident(query, l->cols[i].name);
	}
	sl_buf_puts(query, " FROM ");
	ch_qname(query, db, l->object, NULL);
	sl_buf_puts(query, " FINAL WHERE (");
	for (int k = 0; k < l->nkeys; k++) {
		const struct ch_col *c = &l->cols[l->keys[k]];
		sl_buf_puts(query, k ? ", " : "");
		ch_quote_ident(query, c->name);
		sl_buf_printf(structure, "%sk%d ", k ? ", " : "", k);
		structure_type(structure, &c->type);
	}
	sl_buf_puts(query, ") IN (SELECT ");
	for (int k = 0; k < l->nkeys; k++)
		sl_buf_printf(query, "%sk%d", k ? ", " : "", k);
	sl_buf_puts(query, " FROM " CH_KEYS_TABLE ") FORMAT RowBinary");
	return sl_buf_failed(query) || sl_buf_failed(structure) ? -1 : 0;
}

int ch_sql_delete_csn_range(struct sl_buf *b, const struct ch_ddl *d, const char *db, const char *object,
			    const char *first, const char *last)
{
	sl_buf_puts(b, "ALTER TABLE ");
	ch_qname(b, db, object, local_suffix(d));
	on_cluster(b, d);
	sl_buf_puts(b, " DELETE WHERE `_csn` >= ");
	ch_quote_str(b, first, strlen(first));
	sl_buf_puts(b, " AND `_csn` <= ");
	ch_quote_str(b, last, strlen(last));
	return sl_buf_failed(b) ? -1 : 0;
}

int ch_sql_mutations_left(struct sl_buf *b, const struct ch_ddl *d, const char *db, const char *object)
{
	char *name;

	if (!(name = ch_local_name(d, object))) {
		b->failed = true;
		return -1;
	}
	sl_buf_puts(b, "SELECT count() FROM system.mutations WHERE database = ");
	ch_quote_str(b, db, strlen(db));
	sl_buf_puts(b, " AND table = ");
	ch_quote_str(b, name, strlen(name));
	sl_buf_puts(b, " AND is_done = 0 FORMAT RowBinary");
	free(name);
	return sl_buf_failed(b) ? -1 : 0;
}

/* ------------------------------------------------------------------ */
/* errors                                                               */

int ch_exception_code(const char *body, size_t len)
{
	size_t i = 0;
	int code = 0;

	while (i < len && (body[i] == ' ' || body[i] == '\n' || body[i] == '\r' || body[i] == '\t'))
		i++;
	if (len - i < 7 || memcmp(body + i, "Code: ", 6) != 0)
		return 0;
	for (i += 6; i < len && body[i] >= '0' && body[i] <= '9' && code < 100000; i++)
		code = code * 10 + (body[i] - '0');
	return code;
}

/* Exception codes (ClickHouse's src/Common/ErrorCodes.cpp) that say the data
 * did not parse or does not fit: a row at fault. */
static const int data_codes[] = {
	6,    /* CANNOT_PARSE_TEXT */
	26,   /* CANNOT_PARSE_QUOTED_STRING */
	27,   /* CANNOT_PARSE_INPUT_ASSERTION_FAILED */
	32,   /* ATTEMPT_TO_READ_AFTER_EOF */
	33,   /* CANNOT_READ_ALL_DATA */
	38,   /* CANNOT_PARSE_DATE */
	41,   /* CANNOT_PARSE_DATETIME */
	53,   /* TYPE_MISMATCH */
	69,   /* ARGUMENT_OUT_OF_BOUND */
	70,   /* CANNOT_CONVERT_TYPE */
	72,   /* CANNOT_PARSE_NUMBER */
	117,  /* INCORRECT_DATA */
	128,  /* TOO_LARGE_ARRAY_SIZE */
	131,  /* TOO_LARGE_STRING_SIZE */
	349,  /* CANNOT_INSERT_NULL_IN_ORDINARY_COLUMN */
	407,  /* DECIMAL_OVERFLOW */
};

/* Codes of a server that is busy, short of memory, restarting or between
 * replicas: another try later may pass. */
static const int retry_codes[] = {
	159,  /* TIMEOUT_EXCEEDED */
	202,  /* TOO_MANY_SIMULTANEOUS_QUERIES */
	203,  /* NO_FREE_CONNECTION */
	209,  /* SOCKET_TIMEOUT */
	210,  /* NETWORK_ERROR */
	241,  /* MEMORY_LIMIT_EXCEEDED */
	242,  /* TABLE_IS_READ_ONLY (a replica lost its coordinator) */
	252,  /* TOO_MANY_PARTS */
	319,  /* UNKNOWN_STATUS_OF_INSERT */
	425,  /* SYSTEM_ERROR */
	999,  /* KEEPER_EXCEPTION */
	1000, /* POCO_EXCEPTION (mostly network errors between servers) */
};

/* Codes that say the user may not log in or may not write: no retry helps
 * until the operator changes the credentials or the grants. */
static const int prereq_codes[] = {
	164,  /* READONLY */
	192,  /* UNKNOWN_USER */
	193,  /* WRONG_PASSWORD */
	497,  /* ACCESS_DENIED */
	516,  /* AUTHENTICATION_FAILED */
};

static bool in(const int *set, size_t n, int code)
{
	for (size_t i = 0; i < n; i++)
		if (set[i] == code)
			return true;
	return false;
}

enum ch_errclass ch_classify(long status, int code)
{
	if (code && in(data_codes, sizeof data_codes / sizeof *data_codes, code))
		return CH_ERR_DATA;
	if (code && in(retry_codes, sizeof retry_codes / sizeof *retry_codes, code))
		return CH_ERR_RETRY;
	if (code && in(prereq_codes, sizeof prereq_codes / sizeof *prereq_codes, code))
		return CH_ERR_PREREQ;
	/* Any other code (unknown database or table,
	 * syntax, settings) needs someone to act.  A code this list does not
	 * know is treated so too: the flush fails, and the agent retries the
	 * stream from its checkpoint with its own backoff. */
	if (code)
		return CH_ERR_FATAL;
	/* No exception code: a proxy, a load balancer, a server starting up. */
	if (status >= 500 || status == 408 || status == 429 || status == 0)
		return CH_ERR_RETRY;
	return CH_ERR_FATAL;
}
