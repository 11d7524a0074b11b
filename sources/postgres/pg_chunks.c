/*
 * sources/postgres/pg_chunks.c: reading a table in chunks.
 *
 * Two readers share the key helpers here:
 *
 * - In the exported snapshot of a slot (snapshot_read_chunked): the table
 *   is split into ranges of its primary key, planned from a TABLESAMPLE
 *   SYSTEM of its pages (in the snapshot, so the ranges cover every row of
 *   it), and each range is one `COPY (SELECT ... WHERE ROW(key) > ROW(a)
 *   AND ROW(key) <= ROW(b)) TO STDOUT (FORMAT binary)`.  The snapshot's connections each
 *   run one COPY at a time; one thread reads them all, without blocking
 *   (libpq's asynchronous COPY), so the server works on several ranges at
 *   once while this thread converts rows.  Ranges complete out of order,
 *   but their rows are handed on in range order: the rows of a range that
 *   comes after an incomplete one are held (as binary COPY tuples, at most 2 x
 *   connections ranges ahead) until it is complete.  Progress is reported
 *   at the end of each range, so every row up to it was handed on and none
 *   after it: what a resumed backfill may skip, exactly.  A table without
 *   a primary key is split into ranges of pages (`ctid >= '(a,0)' AND
 *   ctid < '(b,0)'`, a TID range scan), handed on as they come, which hold
 *   in one snapshot only and so report no progress.
 *
 * - While streaming (read_chunk): the next limit rows after a key, in key
 *   order, in a REPEATABLE READ transaction of its own on a connection of
 *   its own.  The transaction's first statement lists the transactions in
 *   progress in its snapshot (pg_snapshot_xip): PostgreSQL writes a commit
 *   record before it makes the transaction visible, so the stream can have
 *   returned a transaction that a snapshot taken just after still misses;
 *   such a chunk would undo that transaction's change, so it is not read
 *   (SL_EAGAIN) and the agent asks again a moment later.  Its results are
 *   binary, and the key columns' text follows the row's columns, for the
 *   last row's key text.
 *
 * Both select the columns as sl_pg_append_select_list does (pg_binary.h):
 * as they are where their binary form is decoded, else as their text
 * output; the rows go through the one reader of pg_backfill.h
 * (sl_pg_copy_rows).
 *
 * Key texts (sources/source.h): the key columns' text output in the primary
 * key's order, joined by tabs, with backslash, tab, newline and carriage
 * return escaped as COPY's text format does (so sl_copy_text_row reads them
 * back).  The key columns' order is the primary key index's, so that range
 * predicates and ORDER BY follow the index.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/buf.h"
#include "common/log.h"
#include "common/util.h"
#include "sources/postgres/pg_backfill.h"
#include "sources/postgres/pg_binary.h"
#include "sources/postgres/pg_internal.h"

#define SAMPLE_PAGES_PER_CHUNK 8    /* pages sampled for each planned chunk */
#define EST_ROWS_PER_PAGE 100       /* when the table was never analyzed */
#define POLL_MS 1000

/* ---- key columns ---- */

void sl_pg_keys_free(struct sl_pg_keys *k)
{
	if (!k)
		return;
	free(k->cols);
	free(k);
}

int sl_pg_keys_lookup(PGconn *c, const struct sl_table *t, struct sl_pg_keys **out, char *err, size_t errlen)
{
	char oid[16];
	const char *params[1] = { oid };
	PGresult *res;
	struct sl_pg_keys *k = calloc(1, sizeof *k);
	int nkey = 0, rc = SL_OK;

	*out = NULL;
	for (int i = 0; i < t->ncols; i++)
		nkey += t->cols[i].is_key;
	if (!k || !(k->cols = calloc((size_t)(nkey ? nkey : 1), sizeof *k->cols))) {
		sl_pg_keys_free(k);
		snprintf(err, errlen, "out of memory");
		return SL_EFAIL;
	}
	k->relid = t->relid;
	snprintf(oid, sizeof oid, "%u", t->relid);
	res = PQexecParams(c, "SELECT a.attname FROM pg_index i "
			      "CROSS JOIN LATERAL unnest(i.indkey) WITH ORDINALITY AS k(attnum, ord) "
			      "JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.attnum "
			      "WHERE i.indrelid = $1::oid AND i.indisprimary ORDER BY k.ord",
			   1, NULL, params, NULL, NULL, 0);
	if (PQresultStatus(res) != PGRES_TUPLES_OK) {
		char what[256];
		snprintf(what, sizeof what, "could not read the primary key of \"%s\".\"%s\"", t->ns, t->name);
		rc = sl_pg_err(err, errlen, what, c, res);
		goto out;
	}
	if (PQntuples(res) == nkey) {
		for (int r = 0; r < nkey; r++) {
			int found = -1;
			for (int i = 0; i < t->ncols && found < 0; i++)
				if (t->cols[i].is_key && !strcmp(t->cols[i].name, PQgetvalue(res, r, 0)))
					found = i;
			if (found < 0)
				break;
			k->cols[k->n++] = found;
		}
	}
	if (k->n != nkey) {
		/* The catalog changed under us: the table's own order is still a
		 * total order on the key, only a slower one. */
		k->n = 0;
		for (int i = 0; i < t->ncols; i++)
			if (t->cols[i].is_key)
				k->cols[k->n++] = i;
	}
out:
	PQclear(res);
	if (rc == SL_OK)
		*out = k;
	else
		sl_pg_keys_free(k);
	return rc;
}

/* Appends v (len bytes) escaped as in COPY's text format. */
static void key_text_append(struct sl_buf *b, const char *v, size_t len)
{
	for (size_t i = 0; i < len; i++) {
		switch (v[i]) {
		case '\\': sl_buf_puts(b, "\\\\"); break;
		case '\t': sl_buf_puts(b, "\\t"); break;
		case '\n': sl_buf_puts(b, "\\n"); break;
		case '\r': sl_buf_puts(b, "\\r"); break;
		default: sl_buf_putc(b, v[i]);
		}
	}
}

/* The key text of kv, the key columns' texts in the key's order. */
static int key_text_of(struct sl_buf *b, const struct sl_pg_keys *k, const struct sl_text_value *kv)
{
	sl_buf_reset(b);
	for (int i = 0; i < k->n; i++) {
		const struct sl_text_value *v = &kv[i];
		if (i)
			sl_buf_putc(b, '\t');
		if (v->kind != SL_TV_TEXT)
			return -1;   /* a primary key column is never null */
		key_text_append(b, v->p, v->len);
	}
	return sl_buf_failed(b) ? -1 : 0;
}

/* The key text split into k->n values (in place in *buf, a copy the caller
 * frees).  -1 when it is not a key text of k. */
static int key_text_split(const struct sl_pg_keys *k, const char *text, char **buf, struct sl_text_value *vals)
{
	size_t len = strlen(text);

	*buf = malloc(len + 1);
	if (!*buf)
		return -1;
	memcpy(*buf, text, len + 1);
	if (sl_copy_text_row(*buf, len, vals, k->n) < 0)
		return -1;
	for (int i = 0; i < k->n; i++)
		if (vals[i].kind != SL_TV_TEXT)
			return -1;
	return 0;
}

/* Appends "ROW(k1, k2)" with the key columns quoted. */
static int append_key_row(struct sl_buf *b, PGconn *c, const struct sl_table *t, const struct sl_pg_keys *k)
{
	sl_buf_puts(b, "ROW(");
	for (int i = 0; i < k->n; i++) {
		if (i)
			sl_buf_puts(b, ", ");
		if (sl_pg_append_ident(b, c, t->cols[k->cols[i]].name) < 0)
			return -1;
	}
	return sl_buf_putc(b, ')');
}

/* Appends "ROW('v1'::type1, ...)" for a key text. */
static int append_key_literal(struct sl_buf *b, PGconn *c, const struct sl_table *t, const struct sl_pg_keys *k,
			      const char *text)
{
	struct sl_text_value *vals = calloc((size_t)k->n, sizeof *vals);
	char *buf = NULL;
	int rc = -1;

	if (!vals || key_text_split(k, text, &buf, vals) < 0)
		goto out;
	sl_buf_puts(b, "ROW(");
	for (int i = 0; i < k->n; i++) {
		const struct sl_column *col = &t->cols[k->cols[i]];
		char *lit = PQescapeLiteral(c, vals[i].p, vals[i].len);
		if (!lit)
			goto out;
		sl_buf_printf(b, "%s%s::%s", i ? ", " : "", lit, col->type_name ? col->type_name : "text");
		PQfreemem(lit);
	}
	sl_buf_putc(b, ')');
	rc = sl_buf_failed(b) ? -1 : 0;
out:
	free(buf);
	free(vals);
	return rc;
}

/* The text output of column col, for a query with binary results: format's
 * %s calls the type's output function (a cast to text may not: bool's and
 * inet's casts write other text, bpchar's drops the padding), and the CASE
 * keeps NULL apart from an empty text (num_nulls: a composite whose fields
 * are all NULL is not itself NULL). */
static int append_text_expr(struct sl_buf *b, PGconn *c, const struct sl_column *col)
{
	sl_buf_puts(b, "CASE WHEN num_nulls(");
	if (sl_pg_append_ident(b, c, col->name) < 0)
		return -1;
	sl_buf_puts(b, ") = 0 THEN format('%s', ");
	if (sl_pg_append_ident(b, c, col->name) < 0)
		return -1;
	return sl_buf_puts(b, ") END");
}

/* A column read in binary, cast to the type t describes: a chunk read while
 * streaming may see a table that DDL changed since (ALTER COLUMN ... TYPE
 * bigint), and its binary form must be the one the decoder expects (the
 * cast to the column's own type is no work for the server). */
static int append_binary_expr(struct sl_buf *b, PGconn *c, const struct sl_column *col)
{
	if (sl_pg_append_ident(b, c, col->name) < 0)
		return -1;
	if (col->type_name)
		sl_buf_printf(b, "::%s", col->type_name);
	return sl_buf_failed(b) ? -1 : 0;
}

int sl_pg_append_select_list(struct sl_buf *b, PGconn *c, const struct sl_table *t)
{
	for (int i = 0; i < t->ncols; i++) {
		if (i)
			sl_buf_puts(b, ", ");
		if (sl_pg_bin_decodes(&t->cols[i]) ? append_binary_expr(b, c, &t->cols[i]) < 0
						   : append_text_expr(b, c, &t->cols[i]) < 0)
			return -1;
	}
	return 0;
}

/* " FROM [ONLY] ns.t": a partitioned table's rows are its partitions'. */
static int append_from(struct sl_buf *b, PGconn *c, const struct sl_table *t)
{
	sl_buf_puts(b, t->src_flags & SL_PG_PARTITIONED ? " FROM " : " FROM ONLY ");
	return sl_pg_append_qualified(b, c, t);
}

/* ---- planning in the snapshot ---- */

struct chunk {
	char *lo;          /* exclusive lower bound: key text, NULL from the start */
	char *hi;          /* inclusive upper bound: key text, NULL to the end */
	int64_t page_lo;   /* keyless: pages [page_lo, page_hi); page_hi -1: to the end */
	int64_t page_hi;
	bool done;
	struct sl_buf held; /* rows that came before the chunks ahead of it were complete */
	uint64_t nheld;
};

struct plan {
	struct chunk *c;
	int n;
};

static void plan_free(struct plan *p)
{
	for (int i = 0; i < p->n; i++) {
		free(p->c[i].lo);
		free(p->c[i].hi);
		sl_buf_free(&p->c[i].held);
	}
	free(p->c);
	memset(p, 0, sizeof *p);
}

static int plan_add(struct plan *p, const char *lo, const char *hi, int64_t page_lo, int64_t page_hi)
{
	struct chunk *nc = realloc(p->c, sizeof *nc * (size_t)(p->n + 1));

	if (!nc)
		return -1;
	p->c = nc;
	nc = &p->c[p->n];
	memset(nc, 0, sizeof *nc);
	nc->page_lo = page_lo;
	nc->page_hi = page_hi;
	sl_buf_init(&nc->held, 0);
	if ((lo && !(nc->lo = strdup(lo))) || (hi && !(nc->hi = strdup(hi)))) {
		free(nc->lo);
		return -1;
	}
	p->n++;
	return 0;
}

/* The table's pages (its leaves' for a partitioned table) and estimated rows. */
static int table_size(PGconn *c, const struct sl_table *t, int64_t *pages, double *rows, char *err, size_t errlen)
{
	char oid[16];
	const char *params[1] = { oid };
	PGresult *res;
	int rc = SL_OK;

	snprintf(oid, sizeof oid, "%u", t->relid);
	/* pg_partition_tree() lists nothing for a table that is neither
	 * partitioned nor a partition: the table itself is then the leaf. */
	res = PQexecParams(c, "SELECT (coalesce(sum(pg_relation_size(pt.relid)), 0) / "
			      "        current_setting('block_size')::bigint)::bigint, "
			      "       coalesce(sum(greatest(l.reltuples, 0)), 0)::float8 "
			      "FROM (SELECT relid FROM pg_partition_tree($1::oid) WHERE isleaf "
			      "      UNION SELECT $1::oid::regclass WHERE (SELECT relkind FROM pg_class "
			      "      WHERE oid = $1::oid) <> 'p') pt JOIN pg_class l ON l.oid = pt.relid",
			   1, NULL, params, NULL, NULL, 0);
	if (PQresultStatus(res) != PGRES_TUPLES_OK || PQntuples(res) != 1) {
		char what[256];
		snprintf(what, sizeof what, "could not read the size of \"%s\".\"%s\"", t->ns, t->name);
		rc = sl_pg_err(err, errlen, what, c, res);
	} else {
		*pages = strtoll(PQgetvalue(res, 0, 0), NULL, 10);
		*rows = strtod(PQgetvalue(res, 0, 1), NULL);
	}
	PQclear(res);
	return rc;
}

/* Key ranges of about chunk_rows rows after key text after, from a sample
 * of the table's pages taken in the snapshot. */
static int plan_keys(PGconn *c, const struct sl_table *t, const struct sl_pg_keys *k, const char *after,
		     uint64_t chunk_rows, struct plan *p, char *err, size_t errlen)
{
	struct sl_buf sql, key;
	struct sl_text_value *kv = calloc((size_t)(k->n ? k->n : 1), sizeof *kv);
	PGresult *res = NULL;
	int64_t pages;
	double rows, pct;
	int nchunks, rc;
	char *last = after ? strdup(after) : NULL;

	sl_buf_init(&sql, 0);
	sl_buf_init(&key, 0);
	if (!kv || (after && !last)) {
		snprintf(err, errlen, "out of memory");
		rc = SL_EFAIL;
		goto out;
	}
	if ((rc = table_size(c, t, &pages, &rows, err, errlen)) < 0)
		goto out;
	if (rows < 1)
		rows = (double)pages * EST_ROWS_PER_PAGE;
	nchunks = rows / (double)chunk_rows > 100000 ? 100000 : (int)ceil(rows / (double)chunk_rows);
	if (nchunks > 1 && pages > 0) {
		pct = 100.0 * SAMPLE_PAGES_PER_CHUNK * nchunks / (double)pages;
		if (pct > 100)
			pct = 100;
		sl_buf_puts(&sql, "SELECT ");
		for (int i = 0; i < k->n; i++) {
			if (i)
				sl_buf_puts(&sql, ", ");
			sl_pg_append_ident(&sql, c, t->cols[k->cols[i]].name);
		}
		append_from(&sql, c, t);
		sl_buf_printf(&sql, " TABLESAMPLE SYSTEM (%.6f) REPEATABLE (42)", pct);
		if (after) {
			sl_buf_puts(&sql, " WHERE ");
			append_key_row(&sql, c, t, k);
			sl_buf_puts(&sql, " > ");
			if (append_key_literal(&sql, c, t, k, after) < 0)
				goto quote_fail;
		}
		sl_buf_puts(&sql, " ORDER BY ");
		for (int i = 0; i < k->n; i++) {
			if (i)
				sl_buf_puts(&sql, ", ");
			sl_pg_append_ident(&sql, c, t->cols[k->cols[i]].name);
		}
		if (sl_buf_failed(&sql))
			goto quote_fail;
		res = PQexec(c, sql.data);
		if (PQresultStatus(res) != PGRES_TUPLES_OK) {
			char what[256];
			snprintf(what, sizeof what, "could not sample \"%s\".\"%s\" to plan its backfill", t->ns, t->name);
			rc = sl_pg_err(err, errlen, what, c, res);
			goto out;
		}
		/* Boundaries: every n/nchunks-th sampled key (the sample's own
		 * count corrects the estimate of the rows). */
		if (PQntuples(res) > 0) {
			double est = PQntuples(res) * 100.0 / pct;
			int want = est / (double)chunk_rows > nchunks * 4.0 ? nchunks * 4 : (int)ceil(est / (double)chunk_rows);
			int step = want > 1 ? PQntuples(res) / want : PQntuples(res) + 1;
			if (step < 1)
				step = 1;
			for (int r = step; r < PQntuples(res); r += step) {
				for (int i = 0; i < k->n; i++) {
					kv[i].kind = SL_TV_TEXT;
					kv[i].p = PQgetvalue(res, r, i);
					kv[i].len = (uint32_t)PQgetlength(res, r, i);
				}
				if (key_text_of(&key, k, kv) < 0)
					goto oom;
				if (last && !strcmp(last, key.data))
					continue;   /* the same key sampled twice */
				if (plan_add(p, last, key.data, 0, 0) < 0)
					goto oom;
				free(last);
				if (!(last = strdup(key.data)))
					goto oom;
			}
		}
	}
	if (plan_add(p, last, NULL, 0, 0) < 0)
		goto oom;
	rc = SL_OK;
	goto out;
quote_fail:
	rc = sl_pg_err(err, errlen, "could not quote an identifier or a key for the backfill query", c, NULL);
	goto out;
oom:
	snprintf(err, errlen, "out of memory planning the backfill of \"%s\".\"%s\"", t->ns, t->name);
	rc = SL_EFAIL;
out:
	PQclear(res);
	free(last);
	free(kv);
	sl_buf_free(&sql);
	sl_buf_free(&key);
	return rc;
}

/* Page ranges for a table without a key: about chunk_rows rows each. */
static int plan_pages(PGconn *c, const struct sl_table *t, uint64_t chunk_rows, struct plan *p, char *err,
		      size_t errlen)
{
	int64_t pages, per;
	double rows;
	int rc;

	if (t->src_flags & SL_PG_PARTITIONED)
		return plan_add(p, NULL, NULL, 0, -1) < 0 ? SL_EFAIL : SL_OK;  /* ctid is per partition */
	if ((rc = table_size(c, t, &pages, &rows, err, errlen)) < 0)
		return rc;
	if (rows < 1)
		rows = (double)pages * EST_ROWS_PER_PAGE;
	per = rows > 0 ? (int64_t)((double)pages * (double)chunk_rows / rows) : pages;
	if (per < 1)
		per = 1;
	for (int64_t lo = 0; lo + per < pages; lo += per)
		if (plan_add(p, NULL, NULL, lo, lo + per) < 0)
			goto oom;
	/* The last range is open: a row of the snapshot is never on a page
	 * added after it, but the size read above may be older than that. */
	if (plan_add(p, NULL, NULL, p->n ? p->c[p->n - 1].page_hi : 0, -1) < 0)
		goto oom;
	return SL_OK;
oom:
	snprintf(err, errlen, "out of memory planning the backfill of \"%s\".\"%s\"", t->ns, t->name);
	return SL_EFAIL;
}

/* The COPY of one chunk. */
static int chunk_sql(struct sl_buf *b, PGconn *c, const struct sl_table *t, const struct sl_pg_keys *k,
		     const struct chunk *ch)
{
	bool where = false;

	sl_buf_reset(b);
	sl_buf_puts(b, "COPY (SELECT ");
	if (sl_pg_append_select_list(b, c, t) < 0 || append_from(b, c, t) < 0)
		return -1;
	if (k && ch->lo) {
		sl_buf_puts(b, " WHERE ");
		where = true;
		if (append_key_row(b, c, t, k) < 0)
			return -1;
		sl_buf_puts(b, " > ");
		if (append_key_literal(b, c, t, k, ch->lo) < 0)
			return -1;
	}
	if (k && ch->hi) {
		sl_buf_puts(b, where ? " AND " : " WHERE ");
		if (append_key_row(b, c, t, k) < 0)
			return -1;
		sl_buf_puts(b, " <= ");
		if (append_key_literal(b, c, t, k, ch->hi) < 0)
			return -1;
	}
	if (!k && (ch->page_lo > 0 || ch->page_hi >= 0)) {
		sl_buf_printf(b, " WHERE ctid >= '(%" PRId64 ",0)'::tid", ch->page_lo);
		if (ch->page_hi >= 0)
			sl_buf_printf(b, " AND ctid < '(%" PRId64 ",0)'::tid", ch->page_hi);
	}
	sl_buf_puts(b, ") TO STDOUT (FORMAT binary)");
	return sl_buf_failed(b) ? -1 : 0;
}

/* ---- reading the chunks over the snapshot's connections ---- */

/* A row of chunk ch that arrived while a chunk before it was incomplete:
 * kept (its length, then its bytes) until that chunk is. */
static int hold_row(struct chunk *ch, const char *row, int len, char *err, size_t errlen)
{
	uint32_t n = (uint32_t)len;

	sl_buf_append(&ch->held, &n, sizeof n);
	sl_buf_append(&ch->held, row, (size_t)len);
	if (sl_buf_failed(&ch->held)) {
		snprintf(err, errlen, "out of memory holding the rows of a backfill chunk");
		return SL_EFAIL;
	}
	ch->nheld++;
	return SL_OK;
}

/* Hands on the rows ch held, in the order they came. */
static int release_rows(struct sl_pg_copy_rows *rd, struct chunk *ch, char *err, size_t errlen)
{
	size_t off = 0;
	int rc = SL_OK;

	while (rc == SL_OK && off + sizeof(uint32_t) <= ch->held.len) {
		uint32_t n;
		memcpy(&n, ch->held.data + off, sizeof n);
		off += sizeof n;
		rc = sl_pg_copy_row(rd, ch->held.data + off, (int)n, err, errlen);
		off += n;
	}
	sl_buf_free(&ch->held);
	sl_buf_init(&ch->held, 0);
	ch->nheld = 0;
	return rc;
}

/* Reads the end of a COPY on c: its command result. */
static int copy_end(PGconn *c, const struct sl_table *t, char *err, size_t errlen)
{
	PGresult *res = PQgetResult(c);
	int rc = SL_OK;

	if (PQresultStatus(res) != PGRES_COMMAND_OK) {
		char what[256];
		snprintf(what, sizeof what, "could not read table \"%s\".\"%s\"", t->ns, t->name);
		rc = sl_pg_err(err, errlen, what, c, res);
	}
	PQclear(res);
	while ((res = PQgetResult(c)) != NULL)
		PQclear(res);
	return rc;
}

/* One connection of a chunked read. */
struct conn_state {
	int busy;       /* chunk index + 1, 0 idle */
	bool copying;   /* its COPY started sending rows */
	bool header;    /* the binary COPY header is still to come */
};

/* A chunked read in progress. */
struct chunked {
	PGconn *const *conns;
	int nconns;
	const struct sl_table *t;
	const struct sl_chunked_read *o;
	struct sl_pg_keys *k;
	struct plan plan;
	struct sl_pg_copy_rows rd;
	struct sl_buf sql;
	struct conn_state *cs;
	struct pollfd *pfd;
	int next;     /* the next chunk to start */
	int prefix;   /* chunks [0, prefix) are complete */
	int active;   /* connections busy */
	int window;   /* chunks started at most this far after prefix */
};

/* Starts chunks on idle connections, at most window ahead of the first
 * incomplete one (whose rows go on at once; the others' wait, so that rows
 * go on in key order, chunk after chunk, and progress is exact). */
static int start_chunks(struct chunked *x, char *err, size_t errlen)
{
	for (int i = 0; i < x->nconns && x->next < x->plan.n && (!x->k || x->next < x->prefix + x->window); i++) {
		if (x->cs[i].busy)
			continue;
		if (chunk_sql(&x->sql, x->conns[i], x->t, x->k, &x->plan.c[x->next]) < 0)
			return sl_pg_err(err, errlen, "could not quote an identifier or a key for the backfill query",
					 x->conns[i], NULL);
		if (!PQsendQuery(x->conns[i], x->sql.data)) {
			char what[256];
			snprintf(what, sizeof what, "could not read table \"%s\".\"%s\"", x->t->ns, x->t->name);
			return sl_pg_err(err, errlen, what, x->conns[i], NULL);
		}
		x->cs[i] = (struct conn_state){ .busy = ++x->next, .header = true };
		x->active++;
	}
	return SL_OK;
}

/* The COPY on connection i started (its COPY_OUT result came): *moved. */
static int copy_started(struct chunked *x, int i, bool *moved, char *err, size_t errlen)
{
	PGconn *c = x->conns[i];
	PGresult *res;

	if (!PQconsumeInput(c))
		return sl_pg_err(err, errlen, "could not read the backfill rows", c, NULL);
	if (PQisBusy(c))
		return SL_OK;
	res = PQgetResult(c);
	if (PQresultStatus(res) != PGRES_COPY_OUT) {
		char what[256];
		int rc;
		snprintf(what, sizeof what, "could not read table \"%s\".\"%s\"", x->t->ns, x->t->name);
		rc = sl_pg_err(err, errlen, what, c, res);
		PQclear(res);
		return rc;
	}
	PQclear(res);
	x->cs[i].copying = true;
	*moved = true;
	return SL_OK;
}

/* The chunk on connection i is complete: report progress up to the first
 * incomplete chunk, handing on the rows the chunks up to it held. */
static int chunk_complete(struct chunked *x, int i, void *payload, char *err, size_t errlen)
{
	int rc;

	if ((rc = copy_end(x->conns[i], x->t, err, errlen)) < 0)
		return rc;
	x->plan.c[x->cs[i].busy - 1].done = true;
	x->cs[i] = (struct conn_state){ 0 };
	x->active--;
	while (x->prefix < x->plan.n && x->plan.c[x->prefix].done) {
		const char *hi = x->plan.c[x->prefix].hi;
		if (x->k && x->o->progress && hi && x->o->progress(payload, hi, x->rd.rows) < 0)
			return SL_EFAIL;
		x->prefix++;
		if (x->k && x->prefix < x->plan.n &&
		    (rc = release_rows(&x->rd, &x->plan.c[x->prefix], err, errlen)) < 0)
			return rc;
	}
	return SL_OK;
}

/* Takes a bounded number of the rows that arrived on connection i. */
static int take_rows(struct chunked *x, int i, void *payload, bool *moved, char *err, size_t errlen)
{
	int rc = SL_OK;

	for (int n = 0; x->cs[i].busy && x->cs[i].copying && n < 256; n++) {
		char *buf = NULL, *row;
		int len = PQgetCopyData(x->conns[i], &buf, 1);
		if (len == 0)
			break;
		*moved = true;
		if (len == -2)
			return sl_pg_err(err, errlen, "could not read the backfill rows", x->conns[i], NULL);
		if (len == -1) {
			if ((rc = chunk_complete(x, i, payload, err, errlen)) < 0)
				return rc;
			continue;
		}
		row = buf;
		rc = sl_pg_copy_skip_header(x->t, &x->cs[i].header, &row, &len, err, errlen);
		if (rc == SL_OK && len > 0) {
			if (!x->k || x->cs[i].busy - 1 == x->prefix)
				rc = sl_pg_copy_row(&x->rd, row, len, err, errlen);
			else
				rc = hold_row(&x->plan.c[x->cs[i].busy - 1], row, len, err, errlen);
		}
		PQfreemem(buf);
		if (rc < 0)
			return rc;
	}
	return SL_OK;
}

/* Waits until a busy connection has input, and reads it. */
static int wait_input(struct chunked *x, char *err, size_t errlen)
{
	int npoll = 0;

	for (int i = 0; i < x->nconns; i++)
		if (x->cs[i].busy)
			x->pfd[npoll++] = (struct pollfd){ .fd = PQsocket(x->conns[i]), .events = POLLIN };
	if (poll(x->pfd, (nfds_t)npoll, POLL_MS) < 0 && errno != EINTR) {
		snprintf(err, errlen, "poll failed while reading table \"%s\".\"%s\": %s", x->t->ns, x->t->name,
			 sl_strerror(errno));
		return SL_EFAIL;
	}
	for (int i = 0; i < x->nconns; i++)
		if (x->cs[i].busy && !PQconsumeInput(x->conns[i]))
			return sl_pg_err(err, errlen, "could not read the backfill rows", x->conns[i], NULL);
	return SL_OK;
}

/* Plans the chunks of x->t: key ranges, or page ranges without a key. */
static int plan_chunks(struct chunked *x, char *err, size_t errlen)
{
	uint64_t chunk_rows = x->o->chunk_rows ? x->o->chunk_rows : 10000;
	int rc;

	if (!sl_table_has_key(x->t))
		return plan_pages(x->conns[0], x->t, chunk_rows, &x->plan, err, errlen);
	if ((rc = sl_pg_keys_lookup(x->conns[0], x->t, &x->k, err, errlen)) < 0)
		return rc;
	return plan_keys(x->conns[0], x->t, x->k, x->o->after, chunk_rows, &x->plan, err, errlen);
}

int sl_pg_read_chunked(PGconn *const *conns, int nconns, const struct sl_table *t, const struct sl_chunked_read *o,
		       sl_row_fn fn, void *payload, struct sl_pg_text_stats *st, uint64_t *rows,
		       char *err, size_t errlen)
{
	struct chunked x = { .conns = conns, .nconns = nconns, .t = t, .o = o, .window = 2 * nconns };
	int rc;

	*rows = 0;
	sl_buf_init(&x.sql, 0);
	x.cs = calloc((size_t)nconns, sizeof *x.cs);
	x.pfd = calloc((size_t)nconns, sizeof *x.pfd);
	if ((rc = sl_pg_copy_rows_init(&x.rd, t, fn, payload, st, err, errlen)) < 0)
		goto out;
	if (!x.cs || !x.pfd) {
		snprintf(err, errlen, "out of memory");
		rc = SL_EFAIL;
		goto out;
	}
	if ((rc = plan_chunks(&x, err, errlen)) < 0)
		goto out;
	sl_debug("table \"%s\".\"%s\": %d chunks over %d connections", t->ns, t->name, x.plan.n, nconns);
	for (;;) {
		bool moved = false;
		if ((rc = start_chunks(&x, err, errlen)) < 0)
			goto out;
		if (x.active == 0)
			break;
		for (int i = 0; i < nconns; i++) {
			if (x.cs[i].busy && !x.cs[i].copying && (rc = copy_started(&x, i, &moved, err, errlen)) < 0)
				goto out;
			if ((rc = take_rows(&x, i, payload, &moved, err, errlen)) < 0)
				goto out;
		}
		if (!moved && (rc = wait_input(&x, err, errlen)) < 0)
			goto out;
	}
	*rows = x.rd.rows;
	rc = SL_OK;
out:
	/* On failure the caller abandons the snapshot's connections. */
	free(x.cs);
	free(x.pfd);
	sl_pg_copy_rows_free(&x.rd);
	sl_buf_free(&x.sql);
	plan_free(&x.plan);
	sl_pg_keys_free(x.k);
	return rc;
}

/* ---- a chunk while streaming ---- */

/* Whether the snapshot of the transaction open on c misses a transaction
 * the stream already returned (see the top of this file). */
static int snapshot_misses(PGconn *c, const struct sl_chunk_check *chk, bool *missed, char *err, size_t errlen)
{
	PGresult *res = PQexec(c, "SELECT x::text FROM pg_snapshot_xip(pg_current_snapshot()) AS x "
				  "UNION ALL SELECT 'xmax ' || pg_snapshot_xmax(pg_current_snapshot())::text");
	int rc = SL_OK;

	*missed = false;
	if (PQresultStatus(res) != PGRES_TUPLES_OK) {
		rc = sl_pg_err(err, errlen, "could not read the chunk's snapshot", c, res);
		goto out;
	}
	for (int i = 0; i < PQntuples(res) && chk && !*missed; i++) {
		const char *v = PQgetvalue(res, i, 0);
		bool xmax = !strncmp(v, "xmax ", 5);
		uint64_t x;
		if (sl_parse_u64(xmax ? v + 5 : v, UINT64_MAX, &x) < 0)
			continue;
		if (!xmax) {
			/* in progress in the snapshot; pgoutput's xids are the low 32 bits */
			*missed = chk->seen && chk->seen(chk->payload, (uint32_t)x);
			continue;
		}
		/* At or after xmax: not yet complete when the snapshot was
		 * taken (xids compare modulo 2^32). */
		for (size_t k = 0; k < chk->nrecent && !*missed; k++)
			*missed = (int32_t)((uint32_t)chk->recent[k] - (uint32_t)x) >= 0;
	}
out:
	PQclear(res);
	return rc;
}

/* The query of a chunk while streaming: the columns (pg_binary.h), then the
 * key columns' text (for the key text of the last row), of the limit rows
 * after the key in params (key_text_split's values, NUL-terminated), in key
 * order. */
static int chunk_query(struct sl_buf *sql, PGconn *c, const struct sl_table *t, const struct sl_pg_keys *k,
		       bool after, const char **params, Oid *types, struct sl_text_value *kv, uint64_t limit)
{
	sl_buf_puts(sql, "SELECT ");
	if (sl_pg_append_select_list(sql, c, t) < 0)
		return -1;
	for (int i = 0; i < k->n; i++) {
		sl_buf_puts(sql, ", ");
		if (append_text_expr(sql, c, &t->cols[k->cols[i]]) < 0)
			return -1;
	}
	if (append_from(sql, c, t) < 0)
		return -1;
	if (after) {
		sl_buf_puts(sql, " WHERE ");
		if (append_key_row(sql, c, t, k) < 0)
			return -1;
		sl_buf_puts(sql, " > ROW(");
		for (int i = 0; i < k->n; i++) {
			sl_buf_printf(sql, "%s$%d", i ? ", " : "", i + 1);
			params[i] = kv[i].p;   /* NUL-terminated: split in place */
			types[i] = t->cols[k->cols[i]].src_type;
		}
		sl_buf_putc(sql, ')');
	}
	sl_buf_puts(sql, " ORDER BY ");
	for (int i = 0; i < k->n; i++) {
		if (i)
			sl_buf_puts(sql, ", ");
		if (sl_pg_append_ident(sql, c, t->cols[k->cols[i]].name) < 0)
			return -1;
	}
	sl_buf_printf(sql, " LIMIT %" PRIu64, limit);
	return sl_buf_failed(sql) ? -1 : 0;
}

/* In the chunk's transaction, after its lock: SL_ESTALE when the table has
 * a column that t, the stream's description of it, lacks (added after the
 * stream's position, which no change of the table has described yet: a
 * Relation message of a change logged before the DDL, read after it, or
 * none since), so that the chunk is read again once the stream describes
 * the table as it is (issue 17, soak seed 4643: a column added with a
 * volatile default, then no change, was never read).  A column of t the
 * table lacks fails the chunk's query (undefined_column) instead. */
static int columns_stale(PGconn *c, const struct sl_table *t, char *err, size_t errlen)
{
	static const char sql[] = "SELECT attname FROM pg_attribute WHERE attrelid = $1::oid AND attnum > 0 "
				  "AND NOT attisdropped AND attgenerated = '' ORDER BY attnum";
	char oid[16];
	const char *params[1] = { oid };
	PGresult *res;
	int rc = SL_OK, i, r;

	snprintf(oid, sizeof oid, "%" PRIu32, t->relid);
	res = PQexecParams(c, sql, 1, NULL, params, NULL, NULL, 0);
	if (PQresultStatus(res) != PGRES_TUPLES_OK) {
		rc = sl_pg_err(err, errlen, "could not read the columns of a table to backfill", c, res);
		PQclear(res);
		return rc;
	}
	for (r = 0; r < PQntuples(res) && rc == SL_OK; r++) {
		const char *name = PQgetvalue(res, r, 0);
		for (i = 0; i < t->ncols && strcmp(t->cols[i].name, name) != 0; i++)
			;
		if (i == t->ncols) {
			snprintf(err, errlen, "table \"%s\".\"%s\" has a column \"%s\" that the stream has not read "
				 "a description of yet", t->ns, t->name, name);
			rc = SL_ESTALE;
		}
	}
	PQclear(res);
	return rc;
}

/* Begins the chunk's transaction on c, locks t and checks the snapshot
 * and the columns: SL_OK, SL_EAGAIN (try again soon), SL_ESTALE
 * (columns_stale) or SL_EFAIL, with *in_tx. */
static int chunk_begin(PGconn *c, const struct sl_table *t, const struct sl_chunk_check *chk, bool *in_tx,
		       char *err, size_t errlen)
{
	PGresult *res = PQexec(c, "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY");
	bool missed;
	int rc;

	if (PQresultStatus(res) != PGRES_COMMAND_OK) {
		rc = sl_pg_err(err, errlen, "could not begin a chunk's transaction", c, res);
		PQclear(res);
		return rc;
	}
	PQclear(res);
	*in_tx = true;
	/* The lock before the chunk's snapshot (LOCK TABLE takes none): a
	 * rewrite that commits in between would leave the table empty to it.
	 * DDL that holds the table: SL_EAGAIN, the chunk is tried again soon,
	 * and the stream goes on meanwhile. */
	if ((rc = sl_pg_lock_tables(c, &t, 1, SL_PG_CHUNK_LOCK_TIMEOUT, err, errlen)) < 0) {
		if (rc == SL_EAGAIN)
			sl_debug("%s", err);
		return rc;
	}
	if ((rc = snapshot_misses(c, chk, &missed, err, errlen)) < 0)
		return rc;
	if (missed)
		return SL_EAGAIN;
	return columns_stale(c, t, err, errlen);
}

/* Hands on the rows of a chunk's result (binary, the key texts after the
 * columns), and the last row's key text in key. */
static int chunk_rows(PGresult *res, const struct sl_table *t, const struct sl_pg_keys *k, struct sl_buf *key,
		      struct sl_text_value *kv, struct sl_pg_copy_rows *rd, char *err, size_t errlen)
{
	for (int r = 0; r < PQntuples(res); r++) {
		for (int i = 0; i < t->ncols + k->n; i++) {
			struct sl_text_value *v = i < t->ncols ? &rd->vals[i] : &kv[i - t->ncols];
			*v = PQgetisnull(res, r, i) ? (struct sl_text_value){ .kind = SL_TV_NULL }
						    : (struct sl_text_value){ .kind = SL_TV_TEXT,
									      .p = PQgetvalue(res, r, i),
									      .len = (uint32_t)PQgetlength(res, r, i) };
		}
		if (r == PQntuples(res) - 1 && key_text_of(key, k, kv) < 0) {
			snprintf(err, errlen, "out of memory");
			return SL_EFAIL;
		}
		if (sl_pg_binary_row(t, rd->binary, rd->vals, rd->typed, &rd->scratch, rd->st, err, errlen) < 0) {
			char msg[SL_ERRLEN];
			snprintf(msg, sizeof msg, "%s", err);
			snprintf(err, errlen, "table \"%s\".\"%s\", backfill chunk: %s", t->ns, t->name, msg);
			return SL_EDATA;
		}
		if (rd->fn(rd->payload, t, rd->typed) < 0)
			return SL_EFAIL;
		rd->rows++;
	}
	return SL_OK;
}

int sl_pg_read_chunk(PGconn *c, const struct sl_table *t, const struct sl_pg_keys *k, const char *after,
		     uint64_t limit, const struct sl_chunk_check *chk, sl_row_fn fn, void *payload,
		     struct sl_pg_text_stats *st, uint64_t *rows, char **last, char *err, size_t errlen)
{
	struct sl_buf sql, key;
	struct sl_pg_copy_rows rd;
	size_t nk = (size_t)(k->n ? k->n : 1);
	const char **params = calloc(nk, sizeof *params);
	Oid *types = calloc(nk, sizeof *types);
	struct sl_text_value *kv = calloc(nk, sizeof *kv);
	char *abuf = NULL;
	PGresult *res = NULL;
	bool in_tx = false;
	int rc;

	*rows = 0;
	*last = NULL;
	sl_buf_init(&sql, 0);
	sl_buf_init(&key, 0);
	if ((rc = sl_pg_copy_rows_init(&rd, t, fn, payload, st, err, errlen)) < 0)
		goto out;
	rc = SL_EFAIL;
	if (!params || !types || !kv) {
		snprintf(err, errlen, "out of memory");
		goto out;
	}
	if (after) {
		if (key_text_split(k, after, &abuf, kv) < 0) {
			snprintf(err, errlen, "table \"%s\".\"%s\": the backfill's resume key \"%s\" is not one of its "
				 "keys", t->ns, t->name, after);
			goto out;
		}
		/* Parameters are C strings: end each value where its separator
		 * (or the copy's final NUL) was, now that all are split. */
		for (int i = 0; i < k->n; i++)
			((char *)kv[i].p)[kv[i].len] = '\0';
	}
	if (chunk_query(&sql, c, t, k, after != NULL, params, types, kv, limit) < 0) {
		rc = sl_pg_err(err, errlen, "could not quote an identifier for the chunk query", c, NULL);
		goto out;
	}
	if ((rc = chunk_begin(c, t, chk, &in_tx, err, errlen)) < 0)
		goto out;
	res = PQexecParams(c, sql.data, after ? k->n : 0, types, params, NULL, NULL, 1);
	if (PQresultStatus(res) != PGRES_TUPLES_OK) {
		char what[256];
		snprintf(what, sizeof what, "could not read a chunk of \"%s\".\"%s\"", t->ns, t->name);
		rc = sl_pg_err(err, errlen, what, c, res);
		/* A column (or the table) renamed or dropped after the stream's
		 * position: the stream's view of the table is older than the
		 * table (undefined_column, undefined_table). */
		if (sl_pg_sqlstate_is(res, "42703") || sl_pg_sqlstate_is(res, "42P01"))
			rc = SL_ESTALE;
		goto out;
	}
	if ((rc = chunk_rows(res, t, k, &key, kv, &rd, err, errlen)) < 0)
		goto out;
	*rows = rd.rows;
	if (*rows > 0 && !(*last = sl_buf_detach(&key))) {
		snprintf(err, errlen, "out of memory");
		rc = SL_EFAIL;
		goto out;
	}
	PQclear(res);
	res = PQexec(c, "COMMIT");
	in_tx = false;
	rc = PQresultStatus(res) == PGRES_COMMAND_OK ? SL_OK
						     : sl_pg_err(err, errlen, "could not end a chunk's transaction", c, res);
out:
	PQclear(res);
	if (in_tx)
		PQclear(PQexec(c, "ROLLBACK"));
	if (rc < 0) {
		free(*last);
		*last = NULL;
	}
	free(abuf);
	free(params);
	free(types);
	free(kv);
	sl_pg_copy_rows_free(&rd);
	sl_buf_free(&sql);
	sl_buf_free(&key);
	return rc;
}

/* A non-transactional message is not flushed by itself (before
 * PostgreSQL 17 there is no flush argument), and the walsender sends only
 * flushed WAL: on a quiet server the watermark would wait for the WAL
 * writer (wal_writer_delay, 200 ms).  txid_current() gives the statement's
 * transaction an id, so its commit flushes the WAL up to it, with
 * synchronous_commit on for this transaction alone; the transaction
 * changes nothing, and pgoutput sends no empty transaction. */
int sl_pg_emit_watermark(PGconn *c, const char *text, uint64_t *lsn, char *err, size_t errlen)
{
	const char *params[1] = { text };
	PGresult *res = PQexecParams(c, "SELECT pg_logical_emit_message(false, '" SL_PG_WATERMARK_PREFIX "', $1)::text, "
				     "txid_current(), set_config('synchronous_commit', 'on', true)", 1, NULL, params, NULL, NULL, 0);
	int rc = SL_OK;

	*lsn = 0;
	if (PQresultStatus(res) != PGRES_TUPLES_OK || PQntuples(res) != 1) {
		rc = sl_pg_err(err, errlen, "could not write a backfill watermark (pg_logical_emit_message)", c, res);
	} else if (sl_lsn_parse(PQgetvalue(res, 0, 0), lsn) < 0) {
		snprintf(err, errlen, "pg_logical_emit_message returned \"%s\", not an LSN", PQgetvalue(res, 0, 0));
		rc = SL_EFAIL;
	}
	PQclear(res);
	return rc;
}
