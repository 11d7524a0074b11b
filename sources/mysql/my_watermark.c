/*
 * sources/mysql/my_watermark.c: the MySQL / MariaDB source's backfill
 * while streaming: the watermark table, emit_watermark and read_chunk.
 */
#include "sources/mysql/my_internal.h"

#include <errno.h>
#include <inttypes.h>
#include <mysqld_error.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "common/buf.h"
#include "common/log.h"
#include "common/util.h"

/* ---- backfill while streaming ----
 *
 * Watermarks are rows of a small table of the operator's making
 * (watermark_table, default sluice.watermarks; doc/mysql.md has its DDL):
 * one row per stream, overwritten by each watermark (INSERT ... ON
 * DUPLICATE KEY UPDATE, in autocommit on a connection of its own), so the
 * table stays tiny and each watermark is a transaction of its own in the
 * binlog.  next() knows the table by name in its table maps and returns
 * the text of its rows' second column as SL_EV_WATERMARK after the
 * transaction; its rows are never changes, and the table is never one of
 * the stream's, whatever `tables` says.
 *
 * A chunk is read in a consistent snapshot of its own (the same snapshot
 * as the initial backfill's: START TRANSACTION WITH CONSISTENT SNAPSHOT and
 * MariaDB's binlog_snapshot_file/position, or MySQL's FLUSH TABLES WITH
 * READ LOCK for a moment), whose binlog position is exact: every
 * transaction before it in the binlog is in the snapshot, none after.  A
 * transaction is in the binlog before it is visible, so the stream may
 * have returned one that a snapshot taken just after misses; read_chunk
 * runs on the reading thread between transactions, so the source knows
 * where the last transaction it returned ends, and a snapshot whose
 * position is before that reads nothing (SL_EAGAIN).
 */

static const char wm_ddl[] =
	"CREATE TABLE %s (stream VARBINARY(255) NOT NULL PRIMARY KEY, watermark VARBINARY(1024) NOT NULL) "
	"ENGINE=InnoDB";

/* "`db`.`table`" of the watermark table into b. */
static const char *wm_qualified(struct sl_buf *b, const char *db, const char *table)
{
	sl_buf_reset(b);
	sl_my_append_qualified(b, db, table);
	return sl_buf_failed(b) ? "?" : b->data;
}

/* Whether emit_watermark can write the watermark table of cfg on c: it
 * exists with the columns (stream, watermark, ...), the user may INSERT
 * and UPDATE it (zero-row statements in a transaction rolled back: nothing
 * changes), and the binlog is not filtered for its database.  SL_EPREREQ
 * with what to run (*absent when the table does not exist). */
int my_wm_verify(MYSQL *c, const struct sl_source_config *cfg, const struct sl_source_stream *st, bool *absent,
		 char *err, size_t errlen)
{
	char db[256], table[256], what[700];
	struct sl_buf q, name, missing;
	MYSQL_RES *res = NULL;
	MYSQL_ROW row;
	const char *user = cfg->user ? cfg->user : "?";
	int rc = SL_OK, ncols = 0;
	bool names_ok = true;

	*absent = false;
	if (my_wm_name(sl_my_conf(cfg)->watermark_table, db, table) < 0) {
		snprintf(err, errlen, "source \"%s\": watermark_table = \"%s\" is not DATABASE.TABLE", cfg->name,
			 sl_my_conf(cfg)->watermark_table ? sl_my_conf(cfg)->watermark_table : "");
		return SL_ECONFIG;
	}
	sl_buf_init(&q, 0);
	sl_buf_init(&name, 0);
	sl_buf_init(&missing, 0);
	wm_qualified(&name, db, table);
	snprintf(what, sizeof what, "stream \"%s\": reading the columns of the watermark table %s", st->name, name.data);
	sl_buf_puts(&q, "SELECT COLUMN_NAME FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = ");
	sl_my_append_literal(&q, db);
	sl_buf_puts(&q, " AND TABLE_NAME = ");
	sl_my_append_literal(&q, table);
	sl_buf_puts(&q, " ORDER BY ORDINAL_POSITION");
	if (sl_buf_failed(&q) || sl_buf_failed(&name)) {
		snprintf(err, errlen, "out of memory");
		rc = SL_EFAIL;
		goto out;
	}
	if ((rc = sl_my_query(c, q.data, &res, err, errlen)) < 0)
		goto out;
	while (res && (row = mysql_fetch_row(res))) {
		if (ncols == 0 && (!row[0] || strcasecmp(row[0], "stream")))
			names_ok = false;
		if (ncols == 1 && (!row[0] || strcasecmp(row[0], "watermark")))
			names_ok = false;
		ncols++;
	}
	if (res)
		mysql_free_result(res);
	res = NULL;
	if (ncols == 0) {
		*absent = true;
		snprintf(err, errlen, "stream \"%s\": the watermark table %s (watermark_table of source \"%s\") is "
			 "missing, or user %s may not see it: backfill while streaming needs it. As an administrator "
			 "run: CREATE DATABASE IF NOT EXISTS `%s`; ", st->name, name.data, cfg->name, user, db);
		size_t l = strlen(err);
		snprintf(err + l, errlen - l, wm_ddl, name.data);
		l = strlen(err);
		snprintf(err + l, errlen - l, "; GRANT INSERT, UPDATE ON %s TO '%s'", name.data, user);
		rc = SL_EPREREQ;
		goto out;
	}
	if (!names_ok || ncols < 2) {
		snprintf(err, errlen, "stream \"%s\": the watermark table %s does not have the columns (stream, "
			 "watermark, ...) in that order; drop it and create it as: ", st->name, name.data);
		size_t l = strlen(err);
		snprintf(err + l, errlen - l, wm_ddl, name.data);
		rc = SL_EPREREQ;
		goto out;
	}
	/* the privileges, by statements that change no row */
	if ((rc = sl_my_exec(c, "START TRANSACTION", err, errlen)) < 0)
		goto out;
	for (int k = 0; k < 2; k++) {
		sl_buf_reset(&q);
		if (k == 0)
			sl_buf_printf(&q, "INSERT INTO %s (stream, watermark) SELECT 'x', 'x' FROM DUAL WHERE 1 = 0", name.data);
		else
			sl_buf_printf(&q, "UPDATE %s SET watermark = 'x' WHERE 1 = 0", name.data);
		if (sl_buf_failed(&q)) {
			snprintf(err, errlen, "out of memory");
			rc = SL_EFAIL;
			break;
		}
		if (mysql_real_query(c, q.data, q.len) != 0) {
			unsigned e = mysql_errno(c);
			if (e == ER_TABLEACCESS_DENIED_ERROR || e == ER_COLUMNACCESS_DENIED_ERROR || e == ER_DBACCESS_DENIED_ERROR) {
				sl_buf_printf(&missing, "%s%s", missing.len ? ", " : "", k == 0 ? "INSERT" : "UPDATE");
				continue;
			}
			snprintf(what, sizeof what, "stream \"%s\": trying the watermark table %s", st->name, name.data);
			rc = sl_my_err(err, errlen, what, c);
			break;
		}
		MYSQL_RES *r = mysql_store_result(c);
		if (r)
			mysql_free_result(r);
	}
	mysql_query(c, "ROLLBACK");
	if (rc < 0)
		goto out;
	if (missing.len) {
		snprintf(err, errlen, "stream \"%s\": user %s may not write the watermark table %s (backfill while "
			 "streaming writes its watermarks there); as an administrator run: GRANT %s ON %s TO '%s'",
			 st->name, user, name.data, missing.data, name.data, user);
		rc = SL_EPREREQ;
		goto out;
	}
	/* binlog filters: the table's rows must reach the binlog */
	if ((rc = sl_my_query(c, "SHOW MASTER STATUS", &res, err, errlen)) < 0)
		goto out;
	if (res && mysql_num_fields(res) >= 4 && (row = mysql_fetch_row(res))) {
		const char *doo = row[2] ? row[2] : "", *ign = row[3] ? row[3] : "";
		bool in_do = false, in_ign = false;
		for (int k = 0; k < 2; k++) {
			const char *p = k == 0 ? doo : ign;
			while (*p) {
				size_t n = strcspn(p, ",");
				if (n == strlen(db) && !strncmp(p, db, n))
					*(k == 0 ? &in_do : &in_ign) = true;
				p += n + (p[n] ? 1 : 0);
			}
		}
		if ((*doo && !in_do) || in_ign) {
			snprintf(err, errlen, "stream \"%s\": the server's binlog leaves out database `%s` of the watermark "
				 "table %s (binlog_do_db = \"%s\", binlog_ignore_db = \"%s\"), so watermarks would never "
				 "reach the stream: log that database, or set watermark_table to a table of a logged one",
				 st->name, db, name.data, doo, ign);
			rc = SL_EPREREQ;
		}
	}
	if (res)
		mysql_free_result(res);
	res = NULL;
out:
	if (res)
		mysql_free_result(res);
	sl_buf_free(&q);
	sl_buf_free(&name);
	sl_buf_free(&missing);
	return rc;
}

int my_watermark_ready(const struct sl_source_config *cfg, const struct sl_source_stream *st, char *err, size_t errlen)
{
	struct sl_my_server srv;
	bool absent;
	MYSQL *c = sl_my_connect(cfg, 30, &srv, err, errlen);
	int rc;

	if (!c)
		return sl_my_err_status();
	rc = my_wm_verify(c, cfg, st, &absent, err, errlen);
	mysql_close(c);
	return rc;
}

int my_emit_watermark(void *ctx, const char *text, struct sl_position *at, char *err, size_t errlen)
{
	struct my_src *s = ctx;
	struct sl_my_server srv;
	struct sl_buf q;
	int rc;

	memset(at, 0, sizeof *at);
	if (!s->wmc && !(s->wmc = sl_my_connect(s->cfg, 30, &srv, err, errlen)))
		return sl_my_err_status();
	sl_buf_init(&q, 0);
	sl_buf_puts(&q, "INSERT INTO ");
	sl_my_append_qualified(&q, s->wm_db, s->wm_table);
	sl_buf_puts(&q, " (stream, watermark) VALUES (");
	sl_my_append_literal(&q, s->st->name);
	sl_buf_puts(&q, ", ");
	sl_my_append_literal(&q, text);
	sl_buf_puts(&q, ") ON DUPLICATE KEY UPDATE watermark = VALUES(watermark)");
	if (sl_buf_failed(&q)) {
		sl_buf_free(&q);
		snprintf(err, errlen, "out of memory");
		return SL_EFAIL;
	}
	if (mysql_real_query(s->wmc, q.data, q.len) == 0) {
		sl_buf_free(&q);
		sl_buf_reset(&s->wm_emitted);
		if (sl_buf_puts(&s->wm_emitted, text) < 0) {
			snprintf(err, errlen, "out of memory");
			return SL_EFAIL;
		}
		return SL_OK;
	}
	sl_buf_free(&q);
	switch (mysql_errno(s->wmc)) {
	case ER_NO_SUCH_TABLE: case ER_BAD_DB_ERROR: case ER_BAD_FIELD_ERROR: case ER_TABLEACCESS_DENIED_ERROR:
	case ER_COLUMNACCESS_DENIED_ERROR: case ER_DBACCESS_DENIED_ERROR: {
		/* say what to run; a restart reads the table from a snapshot
		 * before streaming instead (the agent asks watermark_ready) */
		bool absent;
		rc = my_wm_verify(s->wmc, s->cfg, s->st, &absent, err, errlen);
		if (rc == SL_EPREREQ) {
			size_t l = strlen(err);
			snprintf(err + l, errlen - l, "; so the table being backfilled while streaming is read from a "
				 "snapshot before streaming");
			return SL_ERESTART;
		}
		if (rc == SL_OK) {
			rc = SL_EFAIL;
			snprintf(err, errlen, "stream \"%s\": could not write a watermark into \"%s\".\"%s\"", s->st->name,
				 s->wm_db, s->wm_table);
		}
		return rc;
	}
	default: {
		char what[600];
		snprintf(what, sizeof what, "stream \"%s\": writing a watermark into \"%s\".\"%s\"", s->st->name, s->wm_db,
			 s->wm_table);
		rc = sl_my_err(err, errlen, what, s->wmc);
		mysql_close(s->wmc);   /* a new connection next time */
		s->wmc = NULL;
		return rc;
	}
	}
}

/* The primary key's column names of mt in index order (read once per table). */
static int pk_order(struct my_src *s, const struct sl_my_table *mt, const struct pk_order **out, char *err,
		    size_t errlen)
{
	struct pk_order *np, *k;
	struct sl_buf q;
	MYSQL_RES *res = NULL;
	MYSQL_ROW row;
	int rc;

	for (int i = 0; i < s->npks; i++)
		if (!strcmp(s->pks[i].db, mt->db) && !strcmp(s->pks[i].name, mt->name)) {
			*out = &s->pks[i];
			return SL_OK;
		}
	sl_buf_init(&q, 0);
	sl_buf_puts(&q, "SELECT COLUMN_NAME FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = ");
	sl_my_append_literal(&q, mt->db);
	sl_buf_puts(&q, " AND TABLE_NAME = ");
	sl_my_append_literal(&q, mt->name);
	sl_buf_puts(&q, " AND INDEX_NAME = 'PRIMARY' ORDER BY SEQ_IN_INDEX");
	rc = sl_buf_failed(&q) ? SL_EFAIL : sl_my_query(s->meta, q.data, &res, err, errlen);
	sl_buf_free(&q);
	if (rc < 0)
		return rc;
	if (!(np = realloc(s->pks, sizeof *np * (size_t)(s->npks + 1))))
		goto oom;
	s->pks = np;
	k = &s->pks[s->npks];
	memset(k, 0, sizeof *k);
	if (!(k->db = strdup(mt->db)) || !(k->name = strdup(mt->name)) ||
	    !(k->cols = calloc(res ? mysql_num_rows(res) + 1 : 1, sizeof *k->cols))) {
		free(k->db);
		free(k->name);
		goto oom;
	}
	s->npks++;
	while (res && (row = mysql_fetch_row(res)))
		if (row[0] && (k->cols[k->n] = strdup(row[0])))
			k->n++;
	if (res)
		mysql_free_result(res);
	*out = k;
	return SL_OK;
oom:
	if (res)
		mysql_free_result(res);
	snprintf(err, errlen, "out of memory");
	return SL_EFAIL;
}

/* A chunk of t is read after the watermark emitted last (its low one): when
 * t's backfill holds its changes up to its first watermark, that is the
 * one (struct cover).  SL_OK or a failure. */
static int first_low(struct my_src *s, const struct sl_my_table *mt, char *err, size_t errlen)
{
	struct cover *c;
	int rc;

	if ((rc = my_cover_of(s, mt->db, mt->name, &c, err, errlen)) < 0)
		return rc;
	if (c->kind != SL_COVER_FIRST_WATERMARK || c->first || !s->wm_emitted.len)
		return SL_OK;
	if (!(c->first = strdup(s->wm_emitted.data))) {
		snprintf(err, errlen, "out of memory");
		return SL_EFAIL;
	}
	return SL_OK;
}

int my_read_chunk(void *ctx, const struct sl_table *t, const char *after, uint64_t limit,
		  const struct sl_chunk_check *chk, sl_row_fn fn, void *payload, uint64_t *rows, char **last, char *err,
		  size_t errlen)
{
	struct my_src *s = ctx;
	const struct sl_my_table *mt = my_known_table(s, t->ns, t->name);
	const struct pk_order *pk;
	struct sl_my_read_how how;
	struct sl_snapshot_info info;
	struct sl_buf tail, key;
	int *keys = NULL, nkeys, rc;

	(void)chk;  /* judged by position: see above */
	*rows = 0;
	*last = NULL;
	if (!mt || !sl_table_has_key(t)) {
		snprintf(err, errlen, "stream \"%s\": table \"%s\".\"%s\" %s", s->st->name, t->ns, t->name,
			 mt ? "has no primary key to read it in chunks" : "is not one of the stream's tables");
		return SL_EFAIL;
	}
	if ((rc = first_low(s, mt, err, errlen)) < 0 || (rc = pk_order(s, mt, &pk, err, errlen)) < 0)
		return rc;
	if (!(keys = calloc((size_t)t->ncols, sizeof *keys))) {
		snprintf(err, errlen, "out of memory");
		return SL_EFAIL;
	}
	nkeys = sl_my_key_columns(t, (const char *const *)pk->cols, pk->n, keys);
	sl_buf_init(&tail, 0);
	sl_buf_init(&key, 0);
	if (after) {
		sl_buf_puts(&tail, " WHERE ");
		if (sl_my_key_after(&tail, mt, keys, nkeys, after) < 0) {
			snprintf(err, errlen, "table \"%s\".\"%s\": the backfill's resume key \"%s\" is not one of its keys",
				 t->ns, t->name, after);
			rc = SL_EFAIL;
			goto out;
		}
	}
	sl_buf_puts(&tail, " ORDER BY ");
	for (int i = 0; i < nkeys; i++) {
		if (i)
			sl_buf_puts(&tail, ", ");
		sl_my_append_ident(&tail, mt->cols[keys[i]].name);
	}
	sl_buf_printf(&tail, " LIMIT %" PRIu64, limit);
	if (sl_buf_failed(&tail)) {
		snprintf(err, errlen, "out of memory");
		rc = SL_EFAIL;
		goto out;
	}
	if (!s->chunk && (rc = sl_my_snap_connect(&s->chunk, s->cfg, err, errlen)) < 0)
		goto out;
	if ((rc = sl_my_snap_begin(s->chunk, s->cfg, s->st, &s->srv, true, &info, err, errlen)) < 0)
		goto drop;
	if (s->has_returned && my_pos_compare(&info.pos, &s->returned) < 0) {
		/* a transaction the stream returned is not visible yet */
		char sf[SL_POS_TEXT_MAX], rf[SL_POS_TEXT_MAX];
		sl_my_pos_file(&info.pos, sf);
		sl_my_pos_file(&s->returned, rf);
		sl_debug("stream \"%s\": the snapshot for a chunk of %s.%s is at %s:%" PRIu64 ", before the end of the "
			 "last transaction returned (%s:%" PRIu64 "): read again", s->st->name, t->ns, t->name, sf,
			 info.pos.w[1], rf, s->returned.w[1]);
		rc = sl_my_snap_end(s->chunk, err, errlen) < 0 ? SL_EFAIL : SL_EAGAIN;
		if (rc == SL_EFAIL)
			goto drop;
		goto out;
	}
	how = (struct sl_my_read_how){ .tail = tail.data, .keys = keys, .nkeys = nkeys, .key = &key };
	rc = sl_my_snapshot_read_where(s->chunk, mt, t, &how, fn, payload, rows, &s->bf_stats, err, errlen);
	if (rc < 0) {
		sl_my_snap_rollback(s->chunk);
		if (rc == SL_EDATA || rc == SL_ESTALE)
			goto out;
		goto drop;
	}
	if ((rc = sl_my_snap_end(s->chunk, err, errlen)) < 0)
		goto drop;
	if (*rows > 0 && !(*last = sl_buf_detach(&key))) {
		snprintf(err, errlen, "out of memory");
		rc = SL_EFAIL;
	}
	goto out;
drop:
	sl_my_snapshot_close(s->chunk);   /* a new connection next time */
	s->chunk = NULL;
out:
	free(keys);
	sl_buf_free(&tail);
	sl_buf_free(&key);
	return rc;
}
