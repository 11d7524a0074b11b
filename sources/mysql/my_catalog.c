/*
 * sources/mysql/my_catalog.c: the stream's tables as information_schema
 * describes them, turned into the same column descriptions (struct
 * sl_mysql_column) a binlog TABLE_MAP gives, so that one mapping
 * (sl_mysql_type_map) types both the backfill and the stream; and the
 * comparison of a TABLE_MAP with a table's description.
 *
 * The catalog describes a table as it is now; a table map describes it as
 * it was when the rows were written.  With binlog_row_metadata=FULL the map
 * carries names, signedness, charsets, ENUM/SET strings and the primary
 * key itself; otherwise the source completes it from the catalog, and a map
 * whose column types disagree with the catalog is a schema change the
 * catalog no longer shows (sl_my_map_match).
 */
#include "sources/mysql/my_internal.h"

#include <ctype.h>
#include <fnmatch.h>
#include <mysqld_error.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/log.h"
#include "common/util.h"

static char *xstrndup(const char *s, size_t n)
{
	char *d = malloc(n + 1);

	if (d) {
		memcpy(d, s, n);
		d[n] = '\0';
	}
	return d;
}

static void col_free(struct sl_my_col *c)
{
	free(c->name);
	for (uint32_t i = 0; i < c->nvstore; i++)
		free((char *)c->vstore[i].p);
	free(c->vstore);
}

void sl_my_table_free(struct sl_my_table *t)
{
	if (!t)
		return;
	for (int i = 0; i < t->ncols; i++)
		col_free(&t->cols[i]);
	free(t->cols);
	free(t->db);
	free(t->name);
	sl_table_free(t->version);
	memset(t, 0, sizeof *t);
}

void sl_my_tables_free(struct sl_my_table *t, int n)
{
	for (int i = 0; i < n; i++)
		sl_my_table_free(&t[i]);
	free(t);
}

bool sl_my_selects(char *const *include, char *const *exclude, const char *db, const char *name)
{
	char full[600];
	bool in = false;

	snprintf(full, sizeof full, "%s.%s", db, name);
	for (char *const *g = include; g && *g && !in; g++)
		in = fnmatch(*g, full, 0) == 0;
	for (char *const *g = exclude; in && g && *g; g++)
		in = fnmatch(*g, full, 0) != 0;
	return in;
}

/* The output column's type detail for the schema key: the output type and
 * what the column's SQL type adds to it. */
static int32_t typmod_of(const struct sl_mysql_column *mc, enum sl_type t)
{
	int32_t d = 0;

	switch (mc->real_type) {
	case SL_MYSQL_NEWDECIMAL: d = mc->precision << 8 | mc->scale; break;
	case SL_MYSQL_TIME2: case SL_MYSQL_DATETIME2: case SL_MYSQL_TIMESTAMP2: d = mc->fsp; break;
	case SL_MYSQL_BIT: d = mc->nbits; break;
	case SL_MYSQL_STRING: case SL_MYSQL_VARCHAR: case SL_MYSQL_VAR_STRING:
		d = mc->charset && mc->charset->kind == SL_CS_BINARY ? (int32_t)(mc->max_len & 0xffff) : 0;
		break;
	default: break;
	}
	return (int32_t)t << 24 | (d & 0xffffff);
}

uint64_t sl_my_table_layout(const struct sl_my_table *t)
{
	uint64_t h = UINT64_C(0xcbf29ce484222325);

	for (int i = 0; i < t->ncols; i++) {
		const struct sl_my_col *c = &t->cols[i];
		const struct sl_mysql_column *m = &c->mc;
		uint32_t f[] = { m->type, m->real_type, m->max_len, m->pack_len, m->precision, m->scale, m->fsp,
				 m->nbits, (uint32_t)(m->is_unsigned + 1), m->collation, m->json, m->fbt, m->is_key,
				 m->key_prefix, m->nvalues };
		h = sl_fnv1a(h, c->name, strlen(c->name) + 1);
		h = sl_fnv1a(h, f, sizeof f);
		for (uint32_t k = 0; k < m->nvalues; k++) {
			h = sl_fnv1a(h, &m->values[k].len, sizeof m->values[k].len);
			h = sl_fnv1a(h, m->values[k].p, m->values[k].len);
		}
	}
	return h | 1;   /* never 0: "described by the log" */
}

int sl_my_table_build(struct sl_my_table *t, char *err, size_t errlen)
{
	struct sl_table *v = sl_table_new(t->db, t->name);
	char tn[64];

	if (!v)
		goto oom;
	for (int i = 0; i < t->ncols; i++) {
		const struct sl_my_col *c = &t->cols[i];
		int p = 0, s = 0;
		enum sl_type ty = sl_mysql_type_map(&c->mc, &p, &s);
		if (sl_table_add_column(v, c->name, ty, p, s, c->mc.real_type, typmod_of(&c->mc, ty),
					sl_mysql_type_name(&c->mc, tn, sizeof tn), c->mc.is_key) < 0)
			goto oom;
	}
	if (sl_table_finish(v) < 0)
		goto oom;
	v->src = &sl_my_desc;
	v->layout = sl_my_table_layout(t);
	sl_table_free(t->version);
	t->version = v;
	return SL_OK;
oom:
	sl_table_free(v);
	snprintf(err, errlen, "out of memory describing \"%s\".\"%s\"", t->db, t->name);
	return SL_EFAIL;
}

struct sl_table *sl_my_table_copy(const struct sl_table *t)
{
	struct sl_table *v = sl_table_new(t->ns, t->name);

	if (!v)
		return NULL;
	for (int i = 0; i < t->ncols; i++) {
		const struct sl_column *c = &t->cols[i];
		if (sl_table_add_column(v, c->name, c->type, c->precision, c->scale, c->src_type, c->src_typmod,
					c->type_name, c->is_key) < 0) {
			sl_table_free(v);
			return NULL;
		}
	}
	if (sl_table_finish(v) < 0) {
		sl_table_free(v);
		return NULL;
	}
	v->src = t->src;
	v->relid = t->relid;
	v->layout = t->layout;
	return v;
}

/* ---- catalog rows to column descriptions ---- */

/* The character that COLUMN_TYPE's escape \e stands for (the server
 * writes a member's backslash, newline, carriage return, NUL and ^Z so). */
static char unescaped(char e)
{
	switch (e) {
	case '0': return '\0';
	case 'n': return '\n';
	case 'r': return '\r';
	case 't': return '\t';
	case 'b': return '\b';
	case 'Z': return '\032';
	default: return e;
	}
}

/* Parses the quoted list of an enum('a','b''c') / set(...) COLUMN_TYPE;
 * foreign: the column's charset is one sluice does not convert, whose
 * members are written as sl_mysql_foreign_member gives them. */
static int parse_values(struct sl_my_col *c, const char *ct, bool foreign)
{
	const char *p = strchr(ct, '(');
	uint32_t n = 0, a = 0;

	if (!p)
		return 0;
	p++;
	while (*p == '\'') {
		struct sl_buf b;
		p++;
		sl_buf_init(&b, 0);
		sl_buf_append(&b, "", 0);
		for (;;) {
			if (!*p)
				break;
			if (*p == '\'' && p[1] == '\'') {
				sl_buf_putc(&b, '\'');
				p += 2;
			} else if (*p == '\\' && p[1]) {
				sl_buf_putc(&b, unescaped(p[1]));
				p += 2;
			} else if (*p == '\'') {
				p++;
				break;
			} else {
				sl_buf_putc(&b, *p++);
			}
		}
		if (foreign && !sl_buf_failed(&b)) {
			struct sl_buf f;
			bool copied;
			sl_buf_init(&f, 0);
			if (sl_mysql_foreign_member(b.data, b.len, true, &f, &copied) < 0) {
				sl_buf_free(&f);
				sl_buf_free(&b);
				return -1;
			}
			if (copied) {
				sl_buf_free(&b);
				b = f;
			} else {
				sl_buf_free(&f);
			}
		}
		if (n == a) {
			uint32_t na = a ? a * 2 : 8;
			struct sl_mysql_str *nv = realloc(c->vstore, sizeof *nv * na);
			if (!nv) {
				sl_buf_free(&b);
				return -1;
			}
			c->vstore = nv;
			a = na;
		}
		c->vstore[n].len = (uint32_t)b.len;
		if (!(c->vstore[n].p = sl_buf_detach(&b)))
			return -1;
		c->nvstore = ++n;
		if (*p == ',')
			p++;
	}
	c->mc.values = c->vstore;
	c->mc.nvalues = n;
	return 0;
}

static bool has_word(const char *s, const char *w)
{
	return strstr(s, w) != NULL;
}

/* Fills c->mc from one information_schema.COLUMNS row. */
static int describe_column(struct sl_my_col *c, const char *data_type, const char *column_type, const char *charset,
			   const char *octets, const char *nprec, const char *nscale, const char *dtprec,
			   const char *key, const char *nullable, const char *extra)
{
	struct sl_mysql_column *m = &c->mc;
	uint32_t oct = octets ? (uint32_t)strtoul(octets, NULL, 10) : 0;

	memset(m, 0, sizeof *m);
	m->is_unsigned = has_word(column_type, "unsigned") ? 1 : 0;
	m->geometry_type = -1;
	m->visible = -1;
	m->nullable = nullable && !strcmp(nullable, "YES");
	m->is_key = key && !strcmp(key, "PRI");
	m->charset = charset ? sl_mysql_charset_by_name(charset) : sl_mysql_charset_of_collation(SL_MYSQL_COLLATION_BINARY);
	c->values_cs = m->charset;
	c->generated = extra && (has_word(extra, "GENERATED") || has_word(extra, "VIRTUAL") ||
				 has_word(extra, "PERSISTENT") || has_word(extra, "STORED"));
#define T(x) (!strcmp(data_type, (x)))
	if (T("tinyint")) m->type = SL_MYSQL_TINY;
	else if (T("smallint")) m->type = SL_MYSQL_SHORT;
	else if (T("mediumint")) m->type = SL_MYSQL_INT24;
	else if (T("int") || T("integer")) m->type = SL_MYSQL_LONG;
	else if (T("bigint")) m->type = SL_MYSQL_LONGLONG;
	else if (T("decimal") || T("numeric")) {
		m->type = SL_MYSQL_NEWDECIMAL;
		m->precision = (uint8_t)(nprec ? atoi(nprec) : 10);
		m->scale = (uint8_t)(nscale ? atoi(nscale) : 0);
	} else if (T("float")) {
		m->type = SL_MYSQL_FLOAT;
		m->pack_len = 4;
	} else if (T("double") || T("real") || T("double precision")) {
		m->type = SL_MYSQL_DOUBLE;
		m->pack_len = 8;
	} else if (T("bit")) {
		m->type = SL_MYSQL_BIT;
		m->nbits = (uint8_t)(nprec ? atoi(nprec) : 1);
	} else if (T("date")) m->type = SL_MYSQL_DATE;
	else if (T("datetime")) { m->type = SL_MYSQL_DATETIME2; m->fsp = (uint8_t)(dtprec ? atoi(dtprec) : 0); }
	else if (T("timestamp")) { m->type = SL_MYSQL_TIMESTAMP2; m->fsp = (uint8_t)(dtprec ? atoi(dtprec) : 0); }
	else if (T("time")) { m->type = SL_MYSQL_TIME2; m->fsp = (uint8_t)(dtprec ? atoi(dtprec) : 0); }
	else if (T("year")) m->type = SL_MYSQL_YEAR;
	else if (T("char") || T("binary")) { m->type = SL_MYSQL_STRING; m->max_len = oct; }
	else if (T("varchar") || T("varbinary")) { m->type = SL_MYSQL_VARCHAR; m->max_len = oct; }
	else if (T("tinytext") || T("tinyblob")) { m->type = SL_MYSQL_BLOB; m->pack_len = 1; }
	else if (T("text") || T("blob")) { m->type = SL_MYSQL_BLOB; m->pack_len = 2; }
	else if (T("mediumtext") || T("mediumblob")) { m->type = SL_MYSQL_BLOB; m->pack_len = 3; }
	else if (T("longtext") || T("longblob")) { m->type = SL_MYSQL_BLOB; m->pack_len = 4; }
	else if (T("json")) { m->type = SL_MYSQL_JSON; m->pack_len = 4; }
	else if (T("enum") || T("set")) {
		m->type = SL_MYSQL_STRING;
		m->real_type = T("enum") ? SL_MYSQL_ENUM : SL_MYSQL_SET;
		if (parse_values(c, column_type, m->charset && m->charset->kind == SL_CS_UNSUPPORTED) < 0)
			return -1;
		if (m->real_type == SL_MYSQL_ENUM)
			m->pack_len = m->nvalues < 256 ? 1 : 2;
		else
			m->pack_len = (uint8_t)((m->nvalues + 7) / 8 > 4 ? 8 : (m->nvalues + 7) / 8);
		/* the catalog's strings are UTF-8, whatever the column's
		 * charset; those of a binary column are its bytes with '?' for
		 * what is not UTF-8, and stay binary so that the decoder treats
		 * them as it treats the binlog's (sl_mysql_binary_member) */
		if (!m->charset || m->charset->kind != SL_CS_BINARY)
			c->values_cs = sl_mysql_charset_by_name("utf8mb4");
	} else if (T("geometry") || T("point") || T("linestring") || T("polygon") || T("multipoint") ||
		   T("multilinestring") || T("multipolygon") || T("geometrycollection")) {
		m->type = SL_MYSQL_GEOMETRY;
		m->pack_len = 4;
		m->charset = sl_mysql_charset_of_collation(SL_MYSQL_COLLATION_BINARY);
	} else if (T("vector")) {
		m->type = SL_MYSQL_VECTOR;
		m->pack_len = 4;
	} else if (T("uuid") || T("inet6") || T("inet4")) {
		/* MariaDB's fixed binary types: BINARY(16), BINARY(4) in the binlog */
		m->type = SL_MYSQL_STRING;
		m->fbt = T("uuid") ? SL_MYSQL_FBT_UUID : T("inet6") ? SL_MYSQL_FBT_INET6 : SL_MYSQL_FBT_INET4;
		m->max_len = sl_mysql_fbt_len(m->fbt);
		m->charset = sl_mysql_charset_of_collation(SL_MYSQL_COLLATION_BINARY);
	} else {
		/* a type the binlog writes as a string (a later server's) */
		m->type = SL_MYSQL_STRING;
		m->max_len = oct;
	}
#undef T
	if (!m->real_type)
		m->real_type = m->type;
	return 0;
}

static int add_table(struct sl_my_table **t, int *n, int *a, const char *db, const char *name, bool versioned)
{
	if (*n == *a) {
		int na = *a ? *a * 2 : 16;
		struct sl_my_table *nt = realloc(*t, sizeof *nt * (size_t)na);
		if (!nt)
			return -1;
		*t = nt;
		*a = na;
	}
	memset(&(*t)[*n], 0, sizeof **t);
	if (!((*t)[*n].db = strdup(db)) || !((*t)[*n].name = strdup(name))) {
		free((*t)[*n].db);
		return -1;
	}
	(*t)[*n].versioned = versioned;
	(*n)++;
	return 0;
}

static int cmp_table(const void *a, const void *b)
{
	const struct sl_my_table *x = a, *y = b;
	int c = strcmp(x->db, y->db);

	return c ? c : strcmp(x->name, y->name);
}

static struct sl_my_table *find(struct sl_my_table *t, int n, const char *db, const char *name)
{
	struct sl_my_table key = { .db = (char *)db, .name = (char *)name };

	return bsearch(&key, t, (size_t)n, sizeof *t, cmp_table);
}

static int add_col(struct sl_my_table *t, const char *name)
{
	struct sl_my_col *nc = realloc(t->cols, sizeof *nc * (size_t)(t->ncols + 1));

	if (!nc)
		return -1;
	t->cols = nc;
	memset(&nc[t->ncols], 0, sizeof *nc);
	if (!(nc[t->ncols].name = strdup(name)))
		return -1;
	t->ncols++;
	return 0;
}

static void where_tables(struct sl_buf *q, const char *only_db, const char *only_table)
{
	sl_buf_puts(q, " WHERE TABLE_SCHEMA NOT IN ('mysql', 'information_schema', 'performance_schema', 'sys')");
	if (only_db) {
		sl_buf_puts(q, " AND TABLE_SCHEMA = ");
		sl_my_append_literal(q, only_db);
	}
	if (only_table) {
		sl_buf_puts(q, " AND TABLE_NAME = ");
		sl_my_append_literal(q, only_table);
	}
}

/* MariaDB's JSON is a LONGTEXT with the column check json_valid(`c`). */
static int mark_json(MYSQL *c, struct sl_my_table *t, int n, const char *only_db, const char *only_table,
		     char *err, size_t errlen)
{
	struct sl_buf q;
	MYSQL_RES *res = NULL;
	MYSQL_ROW row;
	int rc;

	sl_buf_init(&q, 0);
	sl_buf_puts(&q, "SELECT CONSTRAINT_SCHEMA, TABLE_NAME, CHECK_CLAUSE FROM information_schema.CHECK_CONSTRAINTS "
		    "WHERE CHECK_CLAUSE LIKE 'json_valid(%'");
	if (only_db) {
		sl_buf_puts(&q, " AND CONSTRAINT_SCHEMA = ");
		sl_my_append_literal(&q, only_db);
	}
	if (only_table) {
		sl_buf_puts(&q, " AND TABLE_NAME = ");
		sl_my_append_literal(&q, only_table);
	}
	if ((rc = sl_my_query_buf(c, &q, &res, err, errlen)) < 0)
		return rc;
	while (res && (row = mysql_fetch_row(res))) {
		struct sl_my_table *tb;
		const char *cl = row[2], *a, *e;
		if (!row[0] || !row[1] || !cl || !(tb = find(t, n, row[0], row[1])))
			continue;
		/* json_valid(`name`) with backticks doubled inside */
		a = strchr(cl, '`');
		e = a ? strrchr(cl, '`') : NULL;
		if (!a || e <= a || strcmp(e, "`)") != 0)
			continue;
		for (int i = 0; i < tb->ncols; i++) {
			const char *p = a + 1, *s = tb->cols[i].name;
			while (p < e && *s) {
				if (*p == '`' && p[1] == '`')
					p++;
				if (*p != *s)
					break;
				p++;
				s++;
			}
			if (p == e && !*s && tb->cols[i].mc.real_type == SL_MYSQL_BLOB)
				tb->cols[i].mc.json = true;
		}
	}
	if (res)
		mysql_free_result(res);
	return SL_OK;
}

/* MariaDB's long unique keys (a UNIQUE on a BLOB/TEXT or a long VARCHAR,
 * or UNIQUE ... USING HASH), counted into each table's nhash: each has a
 * hidden DB_ROW_HASH_n column that the binlog carries and
 * information_schema.COLUMNS does not list.  STATISTICS shows them as
 * INDEX_TYPE HASH, as it shows a MEMORY table's own hash indexes, which
 * have no such column (MEMORY has no long unique). */
static int count_long_unique(MYSQL *c, struct sl_my_table *t, int n, const char *only_db, const char *only_table,
			     char *err, size_t errlen)
{
	struct sl_buf q;
	MYSQL_RES *res = NULL;
	MYSQL_ROW row;
	int rc;

	sl_buf_init(&q, 0);
	sl_buf_puts(&q, "SELECT TABLE_SCHEMA, TABLE_NAME, COUNT(DISTINCT INDEX_NAME) FROM information_schema.STATISTICS");
	where_tables(&q, only_db, only_table);
	sl_buf_puts(&q, " AND INDEX_TYPE = 'HASH' AND NON_UNIQUE = 0 AND (TABLE_SCHEMA, TABLE_NAME) NOT IN "
		    "(SELECT TABLE_SCHEMA, TABLE_NAME FROM information_schema.TABLES");
	where_tables(&q, only_db, only_table);
	sl_buf_puts(&q, " AND ENGINE = 'MEMORY') GROUP BY TABLE_SCHEMA, TABLE_NAME");
	if ((rc = sl_my_query_buf(c, &q, &res, err, errlen)) < 0)
		return rc;
	while (res && (row = mysql_fetch_row(res))) {
		struct sl_my_table *tb;
		if (row[0] && row[1] && row[2] && (tb = find(t, n, row[0], row[1])))
			tb->nhash = atoi(row[2]);
	}
	if (res)
		mysql_free_result(res);
	return SL_OK;
}

int sl_my_list_tables(MYSQL *c, bool mariadb, char *const *include, char *const *exclude, const char *only_db,
		      const char *only_table, bool describe, struct sl_my_table **out, int *n, char *err,
		      size_t errlen)
{
	struct sl_my_table *t = NULL;
	struct sl_buf q;
	MYSQL_RES *res = NULL;
	MYSQL_ROW row;
	int nt = 0, at = 0, rc;

	*out = NULL;
	*n = 0;
	sl_buf_init(&q, 0);
	sl_buf_puts(&q, "SELECT TABLE_SCHEMA, TABLE_NAME, TABLE_TYPE FROM information_schema.TABLES");
	where_tables(&q, only_db, only_table);
	sl_buf_puts(&q, " AND TABLE_TYPE IN ('BASE TABLE', 'SYSTEM VERSIONED')");
	if (sl_buf_failed(&q))
		goto oom;
	if ((rc = sl_my_query(c, q.data, &res, err, errlen)) < 0)
		goto fail;
	while (res && (row = mysql_fetch_row(res))) {
		if (!row[0] || !row[1] || !sl_my_selects(include, exclude, row[0], row[1]))
			continue;
		if (add_table(&t, &nt, &at, row[0], row[1], row[2] && !strcmp(row[2], "SYSTEM VERSIONED")) < 0)
			goto oom;
	}
	if (res)
		mysql_free_result(res);
	res = NULL;
	if (nt > 1)
		qsort(t, (size_t)nt, sizeof *t, cmp_table);
	if (describe && nt > 0) {
		sl_buf_reset(&q);
		sl_buf_puts(&q, "SELECT TABLE_SCHEMA, TABLE_NAME, COLUMN_NAME, DATA_TYPE, COLUMN_TYPE, CHARACTER_SET_NAME, "
			    "CHARACTER_OCTET_LENGTH, NUMERIC_PRECISION, NUMERIC_SCALE, DATETIME_PRECISION, COLUMN_KEY, "
			    "IS_NULLABLE, EXTRA FROM information_schema.COLUMNS");
		where_tables(&q, only_db, only_table);
		sl_buf_puts(&q, " ORDER BY TABLE_SCHEMA, TABLE_NAME, ORDINAL_POSITION");
		if (sl_buf_failed(&q))
			goto oom;
		if ((rc = sl_my_query(c, q.data, &res, err, errlen)) < 0)
			goto fail;
		while (res && (row = mysql_fetch_row(res))) {
			struct sl_my_table *tb;
			if (!row[0] || !row[1] || !row[2] || !row[3] || !row[4] || !(tb = find(t, nt, row[0], row[1])))
				continue;
			if (add_col(tb, row[2]) < 0 ||
			    describe_column(&tb->cols[tb->ncols - 1], row[3], row[4], row[5], row[6], row[7], row[8],
					    row[9], row[10], row[11], row[12]) < 0)
				goto oom;
		}
		mysql_free_result(res);
		res = NULL;
		if (mariadb && (rc = mark_json(c, t, nt, only_db, only_table, err, errlen)) < 0)
			goto fail;
		if (mariadb && (rc = count_long_unique(c, t, nt, only_db, only_table, err, errlen)) < 0)
			goto fail;
		for (int i = 0; i < nt; i++)
			if ((rc = sl_my_table_build(&t[i], err, errlen)) < 0)
				goto fail;
	}
	sl_buf_free(&q);
	*out = t;
	*n = nt;
	return SL_OK;
oom:
	snprintf(err, errlen, "out of memory listing tables");
	rc = SL_EFAIL;
fail:
	if (res)
		mysql_free_result(res);
	sl_buf_free(&q);
	sl_my_tables_free(t, nt);
	return rc;
}

int sl_my_table_exists(MYSQL *c, const char *db, const char *name, bool *exists, char *err, size_t errlen)
{
	struct sl_buf q;
	MYSQL_RES *res;
	char what[600];
	int rc = SL_OK;

	*exists = false;
	sl_buf_init(&q, 0);
	sl_buf_puts(&q, "SELECT 1 FROM ");
	sl_my_append_qualified(&q, db, name);
	sl_buf_puts(&q, " LIMIT 0");
	if (sl_buf_failed(&q)) {
		snprintf(err, errlen, "out of memory");
		rc = SL_EFAIL;
		goto out;
	}
	if (mysql_real_query(c, q.data, q.len) != 0) {
		unsigned e = mysql_errno(c);
		if (e == ER_NO_SUCH_TABLE || e == ER_BAD_DB_ERROR || e == ER_TABLEACCESS_DENIED_ERROR)
			goto out;   /* gone (or, for this user, never there) */
		snprintf(what, sizeof what, "opening table \"%s\".\"%s\"", db, name);
		rc = sl_my_err(err, errlen, what, c);
		goto out;
	}
	if ((res = mysql_store_result(c)))
		mysql_free_result(res);
	*exists = true;
out:
	sl_buf_free(&q);
	return rc;
}

/* Whether table db.name, expected by how, is missing from the listing t
 * (n, sorted) though it exists (*missed): opened by name when the
 * listing's filters select it and the listing lacks it.  SL_OK or a
 * failure. */
static int missed_one(MYSQL *c, const struct sl_my_list_how *how, const struct sl_my_table *t, int n,
		      const char *db, const char *name, bool *missed, char *err, size_t errlen)
{
	int rc;

	*missed = false;
	if ((how->only_db && strcmp(db, how->only_db)) || (how->only_table && strcmp(name, how->only_table)) ||
	    !sl_my_selects(how->include, how->exclude, db, name) || find((struct sl_my_table *)t, n, db, name))
		return SL_OK;
	if ((rc = sl_my_table_exists(c, db, name, missed, err, errlen)) < 0)
		return rc;
	if (*missed)
		sl_debug("table \"%s\".\"%s\" exists, but the catalog did not list it (an ALTER TABLE was copying "
			 "it): listing again", db, name);
	return SL_OK;
}

/* Whether the listing t (n, sorted) lacks a table of how's that exists, or,
 * with describe, lists one without its columns (*missed); such a table is
 * opened by name first, which waits for the running ALTER TABLE.  SL_OK
 * or a failure. */
static int listing_missed(MYSQL *c, const struct sl_my_list_how *how, const struct sl_my_table *t, int n,
			  bool *missed, char *err, size_t errlen)
{
	char db[256];
	bool exists;
	int rc = SL_OK;

	*missed = false;
	for (int i = 0; i < how->nexpect && !*missed && rc == SL_OK; i++)
		rc = missed_one(c, how, t, n, how->expect[i].db, how->expect[i].name, missed, err, errlen);
	for (char *const *e = how->expect_names; e && *e && !*missed && rc == SL_OK; e++) {
		const char *dot = strchr(*e, '.');
		if (!dot || (size_t)(dot - *e) >= sizeof db)
			continue;
		snprintf(db, sizeof db, "%.*s", (int)(dot - *e), *e);
		rc = missed_one(c, how, t, n, db, dot + 1, missed, err, errlen);
	}
	for (int i = 0; i < n && how->describe && !*missed && rc == SL_OK; i++) {
		if (t[i].ncols > 0)
			continue;
		if ((rc = sl_my_table_exists(c, t[i].db, t[i].name, &exists, err, errlen)) < 0)
			break;
		sl_debug("table \"%s\".\"%s\" was listed without its columns (an ALTER TABLE was copying it): listing "
			 "again", t[i].db, t[i].name);
		*missed = true;
	}
	return rc;
}

int sl_my_list_confirmed(MYSQL *c, const struct sl_my_list_how *how, struct sl_my_table **out, int *n, char *err,
			 size_t errlen)
{
	bool missed = false;
	int rc;

	for (int attempt = 0; attempt < 10; attempt++) {
		if ((rc = sl_my_list_tables(c, how->mariadb, how->include, how->exclude, how->only_db, how->only_table,
					    how->describe, out, n, err, errlen)) < 0)
			return rc;
		if ((rc = listing_missed(c, how, *out, *n, &missed, err, errlen)) < 0 || missed) {
			sl_my_tables_free(*out, *n);
			*out = NULL;
			*n = 0;
			if (rc < 0)
				return rc;
			continue;
		}
		return SL_OK;
	}
	snprintf(err, errlen, "the catalog (information_schema) did not list a table that exists, 10 times in a row "
		 "(ALTER TABLE statements copying it one after another)");
	return SL_EFAIL;
}

/* ---- table maps against descriptions ---- */

static bool numeric(uint8_t rt)
{
	return rt == SL_MYSQL_TINY || rt == SL_MYSQL_SHORT || rt == SL_MYSQL_INT24 || rt == SL_MYSQL_LONG ||
	       rt == SL_MYSQL_LONGLONG || rt == SL_MYSQL_NEWDECIMAL || rt == SL_MYSQL_FLOAT || rt == SL_MYSQL_DOUBLE;
}

/* Completes one map column from a description (see sl_my_map_complete). */
static void complete(struct sl_mysql_column *m, const struct sl_binlog_table_map *tm, const struct sl_my_col *c)
{
	if (!m->name.p) {
		m->name.p = c->name;
		m->name.len = (uint32_t)strlen(c->name);
	}
	if (m->is_unsigned < 0 && numeric(m->real_type))
		m->is_unsigned = c->mc.is_unsigned;
	if (m->real_type == SL_MYSQL_ENUM || m->real_type == SL_MYSQL_SET) {
		if (!m->nvalues && c->mc.nvalues) {
			m->values = c->mc.values;
			m->nvalues = c->mc.nvalues;
			m->charset = c->values_cs;
		}
	} else if (!m->charset) {
		m->charset = c->mc.charset;
	}
	if (c->mc.json && m->real_type == SL_MYSQL_BLOB)
		m->json = true;
	if (c->mc.fbt && m->real_type == SL_MYSQL_STRING && m->max_len == c->mc.max_len)
		m->fbt = c->mc.fbt;
	if (!tm->has_key)
		m->is_key = c->mc.is_key;
}

/* Whether map column m has the form of a long unique key's hidden hash:
 * a nullable BIGINT, UNSIGNED unless the map does not say, and when the map
 * names its columns, named DB_ROW_HASH_<n> and no column of t's (may be
 * NULL): MariaDB numbers it past a user column of that name.  Nothing in
 * the map marks it hidden (no visibility metadata). */
static bool hash_shaped(const struct sl_binlog_table_map *tm, const struct sl_mysql_column *m,
			const struct sl_my_table *t)
{
	static const char pre[] = "DB_ROW_HASH_";
	const size_t np = sizeof pre - 1;

	if (m->real_type != SL_MYSQL_LONGLONG || !m->nullable || m->is_unsigned == 0)
		return false;
	if (!tm->has_names)
		return true;
	if (!m->name.p || m->name.len <= np || memcmp(m->name.p, pre, np) != 0)
		return false;
	for (uint32_t k = (uint32_t)np; k < m->name.len; k++)
		if (!isdigit((unsigned char)m->name.p[k]))
			return false;
	for (int i = 0; t && i < t->ncols; i++)
		if (strlen(t->cols[i].name) == m->name.len && !strncasecmp(t->cols[i].name, m->name.p, m->name.len))
			return false;
	return true;
}

uint32_t sl_my_map_hidden(const struct sl_binlog_table_map *tm, const struct sl_my_table *t)
{
	if (t->nhash <= 0 || tm->ncols != (uint32_t)t->ncols + (uint32_t)t->nhash)
		return 0;
	for (uint32_t i = (uint32_t)t->ncols; i < tm->ncols; i++)
		if (!hash_shaped(tm, &tm->cols[i], t))
			return 0;
	return (uint32_t)t->nhash;
}

void sl_my_map_complete(struct sl_binlog_table_map *tm, const struct sl_my_table *t)
{
	for (uint32_t i = 0; i < tm->ncols && (int)i < t->ncols; i++)
		complete(&tm->cols[i], tm, &t->cols[i]);
	tm->nhidden = sl_my_map_hidden(tm, t);
}

enum sl_my_match sl_my_map_match(const struct sl_binlog_table_map *tm, const struct sl_my_table *t, char *why,
				 size_t whylen)
{
	/* the hidden hash columns are not the table's: the rows decoder
	 * drops them (sl_my_map_complete) */
	uint32_t n = tm->ncols - sl_my_map_hidden(tm, t);

	why[0] = '\0';
	if (n > (uint32_t)t->ncols) {
		snprintf(why, whylen, "the binlog has %u columns, the catalog %d", n, t->ncols);
		return SL_MY_DIFFERENT;
	}
	for (uint32_t i = 0; i < n; i++) {
		struct sl_mysql_column m = tm->cols[i];
		const struct sl_my_col *c = &t->cols[i];
		int p1 = 0, s1 = 0, p2 = 0, s2 = 0;
		enum sl_type a, b;
		complete(&m, tm, c);
		a = sl_mysql_type_map(&m, &p1, &s1);
		b = sl_mysql_type_map(&c->mc, &p2, &s2);
		if (a != b || p1 != p2 || s1 != s2 || m.real_type != c->mc.real_type) {
			char t1[48], t2[48];
			snprintf(why, whylen, "column %u is %s in the binlog but \"%s\" %s in the catalog", i + 1,
				 sl_mysql_type_name(&m, t1, sizeof t1), c->name, sl_mysql_type_name(&c->mc, t2, sizeof t2));
			return SL_MY_DIFFERENT;
		}
		if (tm->has_names && (m.name.len != strlen(c->name) || memcmp(m.name.p, c->name, m.name.len))) {
			snprintf(why, whylen, "column %u is \"%.*s\" in the binlog but \"%s\" in the catalog", i + 1,
				 (int)m.name.len, m.name.p, c->name);
			return SL_MY_DIFFERENT;
		}
		if (tm->has_key && m.is_key != c->mc.is_key) {
			snprintf(why, whylen, "the primary key differs (column \"%s\")", c->name);
			return SL_MY_DIFFERENT;
		}
	}
	if (n < (uint32_t)t->ncols) {
		snprintf(why, whylen, "the binlog has %u columns, the catalog %d", n, t->ncols);
		return SL_MY_PREFIX;
	}
	return SL_MY_MATCH;
}

int sl_my_table_from_map(struct sl_my_table *out, const struct sl_binlog_table_map *tm,
			 const struct sl_my_table *like, char *err, size_t errlen)
{
	uint32_t keep = tm->ncols;

	memset(out, 0, sizeof *out);
	if (!(out->db = strdup(tm->db)) || !(out->name = strdup(tm->table)))
		goto oom;
	/* the last columns named as hidden hashes are not the table's: how
	 * many long unique keys the table had then, the catalog may no longer
	 * say */
	while (tm->has_names && keep > 0 && hash_shaped(tm, &tm->cols[keep - 1], like))
		keep--;
	out->nhash = (int)(tm->ncols - keep);
	for (uint32_t i = 0; i < keep; i++) {
		const struct sl_mysql_column *m = &tm->cols[i];
		struct sl_my_col *c;
		char *nm;
		if (m->name.p)
			nm = xstrndup(m->name.p, m->name.len);
		else if (like && (int)i < like->ncols)
			nm = strdup(like->cols[i].name);
		else {
			char tmp[32];
			snprintf(tmp, sizeof tmp, "col%u", i + 1);
			nm = strdup(tmp);
		}
		if (!nm || add_col(out, nm) < 0) {
			free(nm);
			goto oom;
		}
		free(nm);
		c = &out->cols[out->ncols - 1];
		c->mc = *m;
		c->mc.name.p = c->name;
		c->mc.name.len = (uint32_t)strlen(c->name);
		c->values_cs = m->charset;
		c->mc.values = NULL;
		c->mc.nvalues = 0;
		if (m->nvalues) {
			if (!(c->vstore = calloc(m->nvalues, sizeof *c->vstore)))
				goto oom;
			for (uint32_t k = 0; k < m->nvalues; k++) {
				if (!(c->vstore[k].p = xstrndup(m->values[k].p, m->values[k].len)))
					goto oom;
				c->vstore[k].len = m->values[k].len;
				c->nvstore = k + 1;
			}
			c->mc.values = c->vstore;
			c->mc.nvalues = m->nvalues;
		}
		if (like) {
			for (int k = 0; k < like->ncols; k++) {
				if (strcmp(like->cols[k].name, c->name) != 0)
					continue;
				if (like->cols[k].mc.json && c->mc.real_type == SL_MYSQL_BLOB)
					c->mc.json = true;
				if (like->cols[k].mc.fbt && c->mc.real_type == SL_MYSQL_STRING &&
				    c->mc.max_len == like->cols[k].mc.max_len)
					c->mc.fbt = like->cols[k].mc.fbt;
				if (!tm->has_key)
					c->mc.is_key = like->cols[k].mc.is_key;
				if (c->mc.is_unsigned < 0)
					c->mc.is_unsigned = like->cols[k].mc.is_unsigned;
				if (!c->mc.charset)
					c->mc.charset = like->cols[k].mc.charset;
			}
		}
	}
	return sl_my_table_build(out, err, errlen);
oom:
	snprintf(err, errlen, "out of memory describing \"%s\".\"%s\"", tm->db, tm->table);
	sl_my_table_free(out);
	return SL_EFAIL;
}
