/*
 * sources/postgres/pg_backfill.c: snapshot-aligned table reads with COPY TO
 * STDOUT (FORMAT binary).
 *
 * Rows are binary COPY tuples (pg_binary.h), converted where libpq put
 * them: no copy, and memory stays at one row.  The key texts of chunked
 * reads (pg_chunks.c) are in COPY's text format: fields separated by tab,
 * NULL is \N, and backslash escapes \b \f \n \r \t \v \\, octal \ooo and
 * hex \xhh (sl_copy_text_row).
 */
#include "sources/postgres/pg_backfill.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/buf.h"
#include "common/log.h"
#include "common/util.h"
#include "sources/postgres/pg_binary.h"
#include "sources/postgres/pg_internal.h"
#include "sources/postgres/pg_text.h"

int sl_pg_backfill_begin(PGconn *c, const char *snapshot, char *err, size_t errlen)
{
	PGresult *res;
	char *lit;
	struct sl_buf sql;
	int rc = SL_EFAIL;

	res = PQexec(c, "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY");
	if (PQresultStatus(res) != PGRES_COMMAND_OK) {
		rc = sl_pg_err(err, errlen, "could not begin the backfill transaction", c, res);
		PQclear(res);
		return rc;
	}
	PQclear(res);
	lit = PQescapeLiteral(c, snapshot, strlen(snapshot));
	sl_buf_init(&sql, 0);
	sl_buf_printf(&sql, "SET TRANSACTION SNAPSHOT %s", lit ? lit : "''");
	PQfreemem(lit);
	res = PQexec(c, sql.data);
	sl_buf_free(&sql);
	if (PQresultStatus(res) != PGRES_COMMAND_OK) {
		sl_pg_err(err, errlen, "could not import the slot's snapshot", c, res);
		goto out;
	}
	rc = SL_OK;
out:
	PQclear(res);
	return rc;
}

/* The result of lock statement i of sl_pg_lock_tables (res, not OK): err
 * names table t. */
static int lock_failed(PGconn *c, PGresult *res, const struct sl_table *t, const char *timeout, char *err,
		       size_t errlen)
{
	char what[256];

	if (sl_pg_sqlstate_is(res, "55P03")) {
		snprintf(err, errlen, "could not lock table \"%s\".\"%s\" for the backfill within %s "
			 "(lock_timeout): another session holds a lock on it that conflicts with ACCESS SHARE "
			 "(ALTER TABLE, TRUNCATE, VACUUM FULL, CLUSTER, LOCK TABLE; see pg_locks); the backfill "
			 "is tried again", t->ns, t->name, timeout);
		return SL_EAGAIN;
	}
	snprintf(what, sizeof what, "could not lock table \"%s\".\"%s\" for the backfill", t->ns, t->name);
	return sl_pg_err(err, errlen, what, c, res);
}

int sl_pg_lock_tables(PGconn *c, const struct sl_table *const *tables, int n, const char *timeout, char *err,
		      size_t errlen)
{
	struct sl_buf sql;
	PGresult *res = NULL;
	char *lit = PQescapeLiteral(c, timeout, strlen(timeout));
	int rc = SL_EFAIL, i = -1;   /* the statement whose result comes next: -1 the SET */

	/* One round trip: the statements run one after another, each with its
	 * own result, and the first that fails ends them (so its place names
	 * the table). */
	sl_buf_init(&sql, 0);
	sl_buf_printf(&sql, "SET LOCAL lock_timeout = %s", lit ? lit : "0");
	for (int k = 0; k < n; k++) {
		const struct sl_table *t = tables[k];
		sl_buf_puts(&sql, t->src_flags & SL_PG_PARTITIONED ? "; LOCK TABLE " : "; LOCK TABLE ONLY ");
		if (sl_pg_append_qualified(&sql, c, t) < 0 || sl_buf_puts(&sql, " IN ACCESS SHARE MODE") < 0) {
			rc = sl_pg_err(err, errlen, "could not quote a table name for LOCK TABLE", c, NULL);
			goto out;
		}
	}
	sl_buf_puts(&sql, "; SET LOCAL lock_timeout = 0");
	if (!lit || sl_buf_failed(&sql)) {
		snprintf(err, errlen, "out of memory");
		goto out;
	}
	if (!PQsendQuery(c, sql.data)) {
		rc = sl_pg_err(err, errlen, "could not lock the tables for the backfill", c, NULL);
		goto out;
	}
	rc = SL_OK;
	for (; (res = PQgetResult(c)) != NULL; i++) {
		if (rc == SL_OK && PQresultStatus(res) != PGRES_COMMAND_OK) {
			if (i < 0 || i >= n)
				rc = sl_pg_err(err, errlen, "could not set lock_timeout for the backfill", c, res);
			else
				rc = lock_failed(c, res, tables[i], timeout, err, errlen);
		}
		PQclear(res);
	}
out:
	PQfreemem(lit);
	sl_buf_free(&sql);
	return rc;
}

void sl_pg_backfill_end(PGconn *c)
{
	PQclear(PQexec(c, "COMMIT"));
}

static int hexval(char ch)
{
	if (ch >= '0' && ch <= '9')
		return ch - '0';
	if (ch >= 'a' && ch <= 'f')
		return ch - 'a' + 10;
	if (ch >= 'A' && ch <= 'F')
		return ch - 'A' + 10;
	return -1;
}

int sl_copy_text_row(char *row, size_t len, struct sl_text_value *vals, int ncols)
{
	char *end = row + len, *in = row;
	int col = 0;

	if (len > 0 && end[-1] == '\n')
		end--;
	for (;;) {
		char *start = in, *out;
		if (col >= ncols)
			return -1;
		/* Most fields hold no backslash: they stay where they are,
		 * without a byte copied. */
		while (in < end && *in != '\t' && *in != '\\')
			in++;
		out = in;
		while (in < end && *in != '\t') {
			char ch = *in++;
			if (ch != '\\' || in >= end) {
				*out++ = ch;
				continue;
			}
			ch = *in++;
			switch (ch) {
			case 'b': *out++ = '\b'; break;
			case 'f': *out++ = '\f'; break;
			case 'n': *out++ = '\n'; break;
			case 'r': *out++ = '\r'; break;
			case 't': *out++ = '\t'; break;
			case 'v': *out++ = '\v'; break;
			case 'N':
				/* \N alone is NULL; anywhere else it is an 'N' */
				if (in - 2 == start && (in == end || *in == '\t')) {
					out = NULL;
					break;
				}
				*out++ = 'N';
				break;
			case 'x': {
				int v = 0, n = 0, h;
				while (n < 2 && in < end && (h = hexval(*in)) >= 0) {
					v = v * 16 + h;
					in++;
					n++;
				}
				*out++ = n ? (char)v : 'x';
				break;
			}
			default:
				if (ch >= '0' && ch <= '7') {
					int v = ch - '0', n = 1;
					while (n < 3 && in < end && *in >= '0' && *in <= '7') {
						v = v * 8 + (*in++ - '0');
						n++;
					}
					*out++ = (char)v;
				} else {
					*out++ = ch;
				}
			}
			if (!out)
				break;
		}
		if (out) {
			vals[col].kind = SL_TV_TEXT;
			vals[col].p = start;
			vals[col].len = (uint32_t)(out - start);
		} else {
			vals[col].kind = SL_TV_NULL;
			vals[col].p = NULL;
			vals[col].len = 0;
		}
		col++;
		if (in >= end)
			break;
		in++; /* the tab */
	}
	return col == ncols ? 0 : -1;
}

int sl_pg_copy_rows_init(struct sl_pg_copy_rows *r, const struct sl_table *t, sl_row_fn fn, void *payload,
			 struct sl_pg_text_stats *st, char *err, size_t errlen)
{
	size_t n = (size_t)(t->ncols ? t->ncols : 1);

	*r = (struct sl_pg_copy_rows){ .t = t, .fn = fn, .payload = payload, .st = st };
	sl_buf_init(&r->scratch, 0);
	r->vals = calloc(n, sizeof *r->vals);
	r->typed = calloc(n, sizeof *r->typed);
	r->binary = calloc(n, sizeof *r->binary);
	if (!r->vals || !r->typed || !r->binary) {
		snprintf(err, errlen, "out of memory preparing the backfill of \"%s\".\"%s\"", t->ns, t->name);
		return SL_EFAIL;
	}
	for (int i = 0; i < t->ncols; i++)
		r->binary[i] = sl_pg_bin_decodes(&t->cols[i]);
	return SL_OK;
}

void sl_pg_copy_rows_free(struct sl_pg_copy_rows *r)
{
	free(r->vals);
	free(r->typed);
	free(r->binary);
	sl_buf_free(&r->scratch);
	r->vals = NULL;
	r->typed = NULL;
	r->binary = NULL;
}

int sl_pg_copy_skip_header(const struct sl_table *t, bool *header, char **row, int *len, char *err, size_t errlen)
{
	size_t skip;

	if (!*header)
		return SL_OK;
	if (sl_pg_copy_binary_header(*row, (size_t)*len, &skip) < 0) {
		snprintf(err, errlen, "table \"%s\".\"%s\": the COPY's data does not start with a binary COPY header",
			 t->ns, t->name);
		return SL_EFAIL;
	}
	*header = false;
	*row += skip;
	*len -= (int)skip;
	return SL_OK;
}

int sl_pg_copy_row(struct sl_pg_copy_rows *r, char *row, int len, char *err, size_t errlen)
{
	const struct sl_table *t = r->t;
	int kind = sl_pg_copy_binary_tuple(row, (size_t)len, r->vals, t->ncols);

	if (kind == 0)
		return SL_OK;   /* the trailer */
	if (kind < 0) {
		snprintf(err, errlen, "table \"%s\".\"%s\": a COPY row is not a binary tuple of %d columns", t->ns,
			 t->name, t->ncols);
		return SL_EFAIL;
	}
	if (sl_pg_binary_row(t, r->binary, r->vals, r->typed, &r->scratch, r->st, err, errlen) < 0) {
		/* err names the column; name the table and the row too */
		char msg[SL_ERRLEN];
		snprintf(msg, sizeof msg, "%s", err);
		snprintf(err, errlen, "table \"%s\".\"%s\", backfill row %" PRIu64 ": %s", t->ns, t->name,
			 r->rows + 1, msg);
		return SL_EDATA;   /* would fail the same way again: not retried */
	}
	if (r->fn(r->payload, t, r->typed) < 0)
		return SL_EFAIL;
	r->rows++;
	return SL_OK;
}

/* Sends the COPY of every row of t on c (PQsendQuery: its rows are read by
 * backfill_recv). */
static int backfill_send(PGconn *c, const struct sl_table *t, char *err, size_t errlen)
{
	struct sl_buf sql;
	int rc = SL_EFAIL;

	sl_buf_init(&sql, 0);
	sl_buf_puts(&sql, "COPY (SELECT ");
	/* A partitioned table's rows are its partitions': no ONLY there.  An
	 * ordinary table's inheritance children are tables of their own. */
	if (sl_pg_append_select_list(&sql, c, t) < 0 ||
	    sl_buf_puts(&sql, t->src_flags & SL_PG_PARTITIONED ? " FROM " : " FROM ONLY ") < 0 ||
	    sl_pg_append_qualified(&sql, c, t) < 0 || sl_buf_puts(&sql, ") TO STDOUT (FORMAT binary)") < 0) {
		rc = sl_pg_err(err, errlen, "could not quote an identifier for the backfill query", c, NULL);
		goto out;
	}
	if (!PQsendQuery(c, sql.data)) {
		char what[256];
		snprintf(what, sizeof what, "could not read table \"%s\".\"%s\"", t->ns, t->name);
		sl_pg_err(err, errlen, what, c, NULL);
		goto out;
	}
	rc = SL_OK;
out:
	sl_buf_free(&sql);
	return rc;
}

/* Reads the rows of the COPY of t that backfill_send sent on c. */
static int backfill_recv(PGconn *c, const struct sl_table *t, sl_row_fn fn, void *payload,
			 struct sl_pg_text_stats *st, uint64_t *rows, char *err, size_t errlen)
{
	struct sl_pg_copy_rows rd;
	PGresult *res = NULL;
	char *buf = NULL;
	bool header = true;
	int rc, len;

	*rows = 0;
	if ((rc = sl_pg_copy_rows_init(&rd, t, fn, payload, st, err, errlen)) < 0)
		goto out;
	res = PQgetResult(c);
	if (PQresultStatus(res) != PGRES_COPY_OUT) {
		char what[256];
		snprintf(what, sizeof what, "could not read table \"%s\".\"%s\"", t->ns, t->name);
		rc = sl_pg_err(err, errlen, what, c, res);
		goto out;
	}
	PQclear(res);
	res = NULL;
	/* On failure the caller abandons the connection: no need to drain. */
	while ((len = PQgetCopyData(c, &buf, 0)) > 0) {
		char *row = buf;
		if ((rc = sl_pg_copy_skip_header(t, &header, &row, &len, err, errlen)) < 0 ||
		    (len > 0 && (rc = sl_pg_copy_row(&rd, row, len, err, errlen)) < 0))
			goto out;
		PQfreemem(buf);
		buf = NULL;
	}
	if (len == -2) {
		rc = sl_pg_err(err, errlen, "could not read the backfill rows", c, NULL);
		goto out;
	}
	res = PQgetResult(c);
	if (PQresultStatus(res) != PGRES_COMMAND_OK) {
		char what[256];
		snprintf(what, sizeof what, "could not read table \"%s\".\"%s\"", t->ns, t->name);
		rc = sl_pg_err(err, errlen, what, c, res);
		goto out;
	}
	PQclear(res);
	while ((res = PQgetResult(c)) != NULL)  /* the connection is free for the next COPY */
		PQclear(res);
	*rows = rd.rows;
	rc = SL_OK;
out:
	if (buf)
		PQfreemem(buf);
	PQclear(res);
	sl_pg_copy_rows_free(&rd);
	return rc;
}

int sl_pg_backfill_table(PGconn *c, const struct sl_table *t, sl_row_fn fn, void *payload,
			 struct sl_pg_text_stats *st, uint64_t *rows, char *err, size_t errlen)
{
	int rc;

	*rows = 0;
	if ((rc = backfill_send(c, t, err, errlen)) < 0)
		return rc;
	return backfill_recv(c, t, fn, payload, st, rows, err, errlen);
}

int sl_pg_backfill_tables(PGconn *const *conns, int nconns, const struct sl_table *const *tables, int n,
			  const struct sl_table_reads *o, sl_row_fn fn, void *payload, struct sl_pg_text_stats *st,
			  char *err, size_t errlen)
{
	int sent = 0, rc;

	/* Table i is read on connection i % nconns.  Before it is read, the
	 * COPYs of the next tables are sent on the other connections, whose
	 * tables before were read: the server works on them meanwhile, and
	 * their rows wait in the connection (the server stops sending while
	 * they are not read), so they are handed on one table after another
	 * with nothing held here. */
	for (int i = 0; i < n; i++) {
		uint64_t rows = 0;
		for (; sent < n && sent < i + nconns; sent++) {
			PGconn *c = conns[sent % nconns];
			sl_debug("table \"%s\".\"%s\": read on backfill connection %d (backend %d)",
				 tables[sent]->ns, tables[sent]->name, sent % nconns + 1, PQbackendPID(c));
			if ((rc = backfill_send(c, tables[sent], err, errlen)) < 0)
				return rc;
		}
		if (o->start && o->start(payload, i) < 0)
			return SL_EFAIL;
		if ((rc = backfill_recv(conns[i % nconns], tables[i], fn, payload, st, &rows, err, errlen)) < 0)
			return rc;  /* the caller abandons the connections, COPYs in flight with them */
		if (o->done && o->done(payload, i, rows) < 0)
			return SL_EFAIL;
	}
	return SL_OK;
}
