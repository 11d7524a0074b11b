/*
 * tests/unit/test_pg_replay.c: replays a pgoutput stream recorded from a
 * real PostgreSQL 15 (tests/replay/workload.rec, made by
 * tests/replay/record.py) through the PostgreSQL source and the real
 * pipeline, without a server:
 *
 *   recorded CopyData frames -> sl_pg_repl_next (frame parsing) -> pgoutput
 *   decoder -> pg_source next() -> agent/pipeline.c -> a test sink
 *
 * The sink prints every record it is given in a stable text form (table
 * versions, op, table, CSN, xid, commit time, every value typed and printed
 * exactly, unchanged columns), and that text must equal
 * tests/replay/expected.txt, which was reviewed by hand against the workload.
 * On a difference the test writes what it got to pg_replay.actual.txt in the
 * current directory and shows the first differing line; when a change is
 * intended, review that file and copy it over expected.txt.
 *
 * Since a comparison with a file the code wrote could only show that the
 * code agrees with itself, the other tests check facts of the workload
 * (record.py's WORKLOAD) directly: the records per table and operation, the
 * final rows and keys of every table as the server reported them after the
 * workload (workload.final), a key change as UPDATE-DELETE then
 * UPDATE-INSERT, the unchanged TOAST column, REPLICA IDENTITY FULL, the
 * TRUNCATE records, ALTER TABLE mid-stream, transactions and a few type
 * rules of doc/types.md.
 *
 * SLUICE_TOP_SRCDIR (set by make check) locates tests/replay.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <inttypes.h>
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent/checkpoint.h"
#include "agent/pipeline.h"
#include "common/buf.h"
#include "common/log.h"
#include "common/util.h"
#include "sources/postgres/pg_internal.h"

#define MAX_TABLES 32

/* ---- one record as the sink saw it ---- */

struct rrec {
	enum sl_op op;
	char table[128];         /* "ns.name" */
	char csn[SL_CSN_LEN + 1];
	uint64_t csn_pos;
	uint32_t seq;
	int ncols;
	char **cols;             /* column names */
	char **vals;             /* values as printed ("int 30", "null", "unchanged", ...) */
	char *row;               /* all values, for a table without a key */
};

struct replay {
	char dir[64];            /* the checkpoint's temporary directory */
	struct sl_buf out;       /* durable records as text */
	struct sl_buf pending;   /* written since the last flush */
	struct rrec *recs;       /* durable records */
	size_t nrecs, arecs, npending_recs;
	bool has_mark;
	struct sl_position mark;
	char seen[MAX_TABLES][160];  /* "ns.name schema_key" of the table versions printed last */
	int nseen;
	/* the catalog stand-in and the server's final state (record.py) */
	struct sl_table *tables[MAX_TABLES];
	int ntables;
	char final[MAX_TABLES][3][4096];   /* "ns.name", row count, keys */
	int nfinal;
	int rc, stop_rc;
	uint64_t target;
	char err[1024];
};

static const char *top_srcdir(void)
{
	const char *d = getenv("SLUICE_TOP_SRCDIR");
	return d && *d ? d : ".";
}

static char *replay_path(const char *name)
{
	struct sl_buf b;

	sl_buf_init(&b, 0);
	sl_buf_printf(&b, "%s/tests/replay/%s", top_srcdir(), name);
	return sl_buf_detach(&b);
}

/* ---- printing values exactly ---- */

static const char *type_name(enum sl_type t)
{
	static const char *const names[] = {
		[SL_T_STRING] = "string", [SL_T_BOOL] = "bool", [SL_T_INT32] = "int32",
		[SL_T_INT64] = "int64", [SL_T_FLOAT] = "float", [SL_T_DOUBLE] = "double",
		[SL_T_DECIMAL] = "decimal", [SL_T_BYTES] = "bytes", [SL_T_DATE] = "date",
		[SL_T_TIME] = "time", [SL_T_TIMESTAMP] = "timestamp", [SL_T_TIMESTAMPTZ] = "timestamptz",
		[SL_T_UUID] = "uuid", [SL_T_JSON] = "json",
	};
	return (unsigned)t < sizeof names / sizeof names[0] && names[t] ? names[t] : "?";
}

/* The proleptic Gregorian date of a day number (0 = 1970-01-01); years are
 * astronomical (0 is 1 BC).  Eras of 400 years, each 146097 days. */
static void civil_date(int64_t days, int64_t *y, int *m, int *d)
{
	int64_t z = days + 719468;           /* days since 0000-03-01 */
	int64_t era = (z >= 0 ? z : z - 146096) / 146097;
	int64_t doe = z - era * 146097;      /* [0, 146096] */
	int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
	int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
	int64_t mp = (5 * doy + 2) / 153;    /* March = 0 */

	*d = (int)(doy - (153 * mp + 2) / 5 + 1);
	*m = (int)(mp < 10 ? mp + 3 : mp - 9);
	*y = yoe + era * 400 + (*m <= 2);
}

static void put_date(struct sl_buf *b, int64_t days)
{
	int64_t y;
	int m, d;

	civil_date(days, &y, &m, &d);
	sl_buf_printf(b, "%s%04" PRId64 "-%02d-%02d", y < 0 ? "-" : "", y < 0 ? -y : y, m, d);
}

static void put_time(struct sl_buf *b, int64_t us)
{
	sl_buf_printf(b, "%02" PRId64 ":%02" PRId64 ":%02" PRId64 ".%06" PRId64, us / 3600000000,
		      us / 60000000 % 60, us / 1000000 % 60, us % 1000000);
}

static void put_timestamp(struct sl_buf *b, int64_t us)
{
	int64_t days = us / 86400000000, rest = us % 86400000000;

	if (rest < 0) {
		rest += 86400000000;
		days--;
	}
	put_date(b, days);
	sl_buf_putc(b, 'T');
	put_time(b, rest);
	sl_buf_putc(b, 'Z');
}

static uint64_t fnv1a(const char *p, size_t n)
{
	uint64_t h = 0xcbf29ce484222325u;

	for (size_t i = 0; i < n; i++)
		h = (h ^ (unsigned char)p[i]) * 0x100000001b3u;
	return h;
}

/* Text in double quotes, with \", \\ and C escapes for control bytes;
 * longer than 100 bytes: the first 48 and a hash of all. */
static void put_text(struct sl_buf *b, const char *p, size_t n)
{
	size_t show = n > 100 ? 48 : n;

	sl_buf_putc(b, '"');
	for (size_t i = 0; i < show; i++) {
		unsigned char c = (unsigned char)p[i];
		if (c == '"' || c == '\\')
			sl_buf_printf(b, "\\%c", c);
		else if (c == '\n')
			sl_buf_puts(b, "\\n");
		else if (c == '\t')
			sl_buf_puts(b, "\\t");
		else if (c < 0x20 || c == 0x7f)
			sl_buf_printf(b, "\\x%02x", c);
		else
			sl_buf_putc(b, (char)c);
	}
	sl_buf_putc(b, '"');
	if (show < n)
		sl_buf_printf(b, "... fnv1a64 %016" PRIx64, fnv1a(p, n));
}

static void put_value(struct sl_buf *b, const struct sl_value *v)
{
	switch ((enum sl_value_kind)v->kind) {
	case SL_V_NULL: sl_buf_puts(b, "null"); return;
	case SL_V_UNCHANGED: sl_buf_puts(b, "unchanged"); return;
	case SL_V_BOOL: sl_buf_puts(b, v->b ? "bool true" : "bool false"); return;
	case SL_V_INT: sl_buf_printf(b, "int %" PRId64, v->i); return;
	case SL_V_UINT: sl_buf_printf(b, "uint %" PRIu64, v->u); return;
	case SL_V_FLOAT: {
		uint32_t bits;
		memcpy(&bits, &v->f, 4);
		sl_buf_printf(b, "float %.9g [%08" PRIx32 "]", (double)v->f, bits);
		return;
	}
	case SL_V_DOUBLE: {
		uint64_t bits;
		memcpy(&bits, &v->d, 8);
		sl_buf_printf(b, "double %.17g [%016" PRIx64 "]", v->d, bits);
		return;
	}
	case SL_V_DECIMAL: {
		/* digits with the point scale places from the right */
		int nd = (int)v->len, sc = v->scale;
		sl_buf_printf(b, "decimal %s", v->neg ? "-" : "");
		if (nd <= sc) {
			sl_buf_puts(b, "0.");
			for (int i = nd; i < sc; i++)
				sl_buf_putc(b, '0');
			sl_buf_append(b, v->p, (size_t)nd);
		} else {
			sl_buf_append(b, v->p, (size_t)(nd - sc));
			if (sc > 0) {
				sl_buf_putc(b, '.');
				sl_buf_append(b, v->p + nd - sc, (size_t)sc);
			}
		}
		return;
	}
	case SL_V_BYTES:
		sl_buf_printf(b, "bytes[%" PRIu32 "]%s", v->len, v->len ? " " : "");
		for (uint32_t i = 0; i < v->len && i < 32; i++)
			sl_buf_printf(b, "%02x", (unsigned char)v->p[i]);
		if (v->len > 32)
			sl_buf_printf(b, "... fnv1a64 %016" PRIx64, fnv1a(v->p, v->len));
		return;
	case SL_V_STRING:
	case SL_V_JSON:
		sl_buf_printf(b, "%s[%" PRIu32 "] ", v->kind == SL_V_JSON ? "json" : "string", v->len);
		put_text(b, v->p, v->len);
		return;
	case SL_V_DATE:
		sl_buf_printf(b, "date %" PRId64 " (", v->i);
		put_date(b, v->i);
		sl_buf_putc(b, ')');
		return;
	case SL_V_TIME:
		sl_buf_printf(b, "time %" PRId64 " (", v->i);
		put_time(b, v->i);
		sl_buf_putc(b, ')');
		return;
	case SL_V_TIMESTAMP:
		sl_buf_printf(b, "timestamp %" PRId64 " (", v->i);
		put_timestamp(b, v->i);
		sl_buf_putc(b, ')');
		return;
	case SL_V_UUID: {
		const unsigned char *u = (const unsigned char *)v->p;
		sl_buf_puts(b, "uuid ");
		for (int i = 0; i < 16 && v->len == 16; i++)
			sl_buf_printf(b, "%s%02x", i == 4 || i == 6 || i == 8 || i == 10 ? "-" : "", u[i]);
		return;
	}
	}
	sl_buf_printf(b, "kind %u?", v->kind);
}

/* ---- the test sink ---- */

static char *xstrdup(const char *s)
{
	char *d = strdup(s);
	assert_non_null(d);
	return d;
}

/* Prints a table version the first time a record uses it. */
static void put_table_version(struct replay *rp, struct sl_buf *b, const struct sl_table *t)
{
	char id[160];
	int i;

	snprintf(id, sizeof id, "%s.%s %s", t->ns, t->name, t->schema_key);
	for (i = 0; i < rp->nseen; i++) {
		size_t l = strlen(t->ns) + 1 + strlen(t->name) + 1;
		if (!strncmp(rp->seen[i], id, l)) {
			if (!strcmp(rp->seen[i], id))
				return;
			break;
		}
	}
	assert_true(i < MAX_TABLES);
	if (i == rp->nseen)
		rp->nseen++;
	snprintf(rp->seen[i], sizeof rp->seen[i], "%s", id);
	sl_buf_printf(b, "TABLE %s.%s (", t->ns, t->name);
	for (int c = 0; c < t->ncols; c++) {
		const struct sl_column *col = &t->cols[c];
		sl_buf_printf(b, "%s%s %s", c ? ", " : "", col->name, type_name(col->type));
		if (col->type == SL_T_DECIMAL)
			sl_buf_printf(b, "(%d,%d)", col->precision, col->scale);
		sl_buf_printf(b, " oid %" PRIu32, col->src_type);
		if (col->src_typmod >= 0)
			sl_buf_printf(b, "/%" PRId32, col->src_typmod);
		if (col->is_key)
			sl_buf_puts(b, " key");
	}
	sl_buf_puts(b, ")\n");
}

static int rs_write(void *ctx, const struct sl_change *c, char *err, size_t errlen)
{
	struct replay *rp = ctx;
	const struct sl_table *t = c->table;
	struct sl_meta_value meta[SL_META_MAX];
	char metabuf[SL_META_BUF];
	struct sl_buf *b = &rp->pending, row, v;
	struct rrec *r;
	int any_unchanged = 0;

	(void)err; (void)errlen;
	put_table_version(rp, b, t);
	t->src->meta_values(c->pos, meta, metabuf, sizeof metabuf);
	sl_buf_printf(b, "%s %s %s.%s xid %" PRIu64 " lsn %.*s at ", c->csn, sl_op_name(c->op), t->ns, t->name,
		      c->tx_id, (int)meta[0].len, meta[0].s);
	put_timestamp(b, c->source_ts_us);
	if (c->values)
		for (int i = 0; i < t->ncols; i++)
			if (c->values[i].kind == SL_V_UNCHANGED)
				sl_buf_printf(b, "%s%s", any_unchanged++ ? "," : " unchanged ", t->cols[i].name);
	sl_buf_putc(b, '\n');

	if (rp->nrecs + rp->npending_recs == rp->arecs) {
		rp->arecs = rp->arecs ? rp->arecs * 2 : 64;
		rp->recs = realloc(rp->recs, rp->arecs * sizeof *rp->recs);
		assert_non_null(rp->recs);
	}
	r = &rp->recs[rp->nrecs + rp->npending_recs++];
	memset(r, 0, sizeof *r);
	r->op = c->op;
	snprintf(r->table, sizeof r->table, "%s.%s", t->ns, t->name);
	memcpy(r->csn, c->csn, sizeof r->csn);
	r->csn_pos = c->csn_pos;
	r->seq = c->seq;
	sl_buf_init(&row, 0);
	if (c->values) {
		r->ncols = t->ncols;
		r->cols = calloc((size_t)t->ncols, sizeof *r->cols);
		r->vals = calloc((size_t)t->ncols, sizeof *r->vals);
		assert_true(r->cols && r->vals);
		for (int i = 0; i < t->ncols; i++) {
			sl_buf_init(&v, 0);
			put_value(&v, &c->values[i]);
			sl_buf_printf(b, "  %s = %s\n", t->cols[i].name, v.data);
			sl_buf_printf(&row, "%s|", v.data);
			r->cols[i] = xstrdup(t->cols[i].name);
			r->vals[i] = sl_buf_detach(&v);
		}
	}
	r->row = row.data ? sl_buf_detach(&row) : xstrdup("");
	sl_buf_free(&row);
	return sl_buf_failed(b) ? -1 : 0;
}

static void rs_mark(void *ctx, const struct sl_position *pos)
{
	struct replay *rp = ctx;

	rp->mark = *pos;
	rp->has_mark = true;
}

static bool rs_flush_due(void *ctx, int64_t now_ms)
{
	(void)ctx; (void)now_ms;
	return false;
}

static bool rs_pending(void *ctx)
{
	return ((struct replay *)ctx)->npending_recs > 0;
}

static int rs_flush(void *ctx, struct sl_position *durable, char *err, size_t errlen)
{
	struct replay *rp = ctx;

	(void)err; (void)errlen;
	if (rp->pending.len)
		sl_buf_append(&rp->out, rp->pending.data, rp->pending.len);
	sl_buf_reset(&rp->pending);
	rp->nrecs += rp->npending_recs;
	rp->npending_recs = 0;
	if (!rp->has_mark)
		return 0;
	*durable = rp->mark;
	return 1;
}

static int rs_discard(void *ctx, const struct sl_table *t, const char *first, const char *last, char *err,
		      size_t errlen)
{
	(void)ctx; (void)t; (void)first; (void)last; (void)err; (void)errlen;
	return 0;
}

static void rs_close(void *ctx)
{
	(void)ctx;
}

static const struct sl_sink_ops replay_sink_ops = {
	.type = "replay_text",
	.write = rs_write,
	.mark = rs_mark,
	.flush_due = rs_flush_due,
	.pending = rs_pending,
	.flush = rs_flush,
	.discard_backfill = rs_discard,
	.close = rs_close,
};

/* ---- the recording's side files ---- */

/* Cuts the next field off *p at sep (or the end): NULL when *p is used up. */
static char *cut(char **p, char sep)
{
	char *s = *p, *e;

	if (!s || !*s)
		return NULL;
	if ((e = strchr(s, sep))) {
		*e = '\0';
		*p = e + 1;
	} else {
		*p = s + strlen(s);
	}
	return s;
}

/* workload.tables: "ns<TAB>name<TAB>key,cols" -> tables holding their key columns */
static void load_tables(struct replay *rp)
{
	char *path = replay_path("workload.tables"), *text, *rest, *line;
	size_t len;

	assert_int_equal(sl_read_file(path, &text, &len, rp->err, sizeof rp->err), 0);
	for (rest = text; (line = cut(&rest, '\n'));) {
		char *f[3] = { line, NULL, NULL }, *k;
		struct sl_table *t;
		assert_non_null(f[1] = strchr(f[0], '\t'));
		*f[1]++ = '\0';
		assert_non_null(f[2] = strchr(f[1], '\t'));
		*f[2]++ = '\0';
		assert_true(rp->ntables < MAX_TABLES);
		assert_non_null(t = sl_table_new(f[0], f[1]));
		while ((k = cut(&f[2], ',')))
			assert_int_equal(sl_table_add_column(t, k, SL_T_STRING, 0, 0, 0, -1, NULL, true), 0);
		assert_int_equal(sl_table_finish(t), 0);
		rp->tables[rp->ntables++] = t;
	}
	free(text);
	free(path);
}

/* The tables' OIDs, from the Relation messages of the recording: the
 * source follows a relation by OID, and workload.tables names tables only. */
static void load_relids(struct replay *rp, const char *rec)
{
	size_t len, off = 8;
	char *data;

	assert_int_equal(sl_read_file(rec, &data, &len, rp->err, sizeof rp->err), 0);
	while (off + 4 <= len) {
		const unsigned char *f = (const unsigned char *)data + off + 4;
		uint32_t n = sl_get_u32((const unsigned char *)data + off);
		if (f[0] == 'w' && n > 30 && f[25] == 'R') {
			uint32_t relid = sl_get_u32(f + 26);
			const char *ns = (const char *)f + 30;
			const char *name = ns + strlen(ns) + 1;
			for (int i = 0; i < rp->ntables; i++)
				if (!strcmp(rp->tables[i]->ns, *ns ? ns : "pg_catalog") &&
				    !strcmp(rp->tables[i]->name, name))
					rp->tables[i]->relid = relid;
		}
		off += 4 + n;
	}
	free(data);
}

/* workload.final: "ns<TAB>name<TAB>rows<TAB>keys" */
static void load_final(struct replay *rp)
{
	char *path = replay_path("workload.final"), *text, *rest, *line;
	size_t len;

	assert_int_equal(sl_read_file(path, &text, &len, rp->err, sizeof rp->err), 0);
	for (rest = text; (line = cut(&rest, '\n'));) {
		char *f[4] = { line, NULL, NULL, NULL };
		for (int i = 1; i < 4; i++) {
			assert_non_null(f[i] = strchr(f[i - 1], '\t'));
			*f[i]++ = '\0';
		}
		assert_true(rp->nfinal < MAX_TABLES);
		snprintf(rp->final[rp->nfinal][0], sizeof rp->final[0][0], "%s.%s", f[0], f[1]);
		snprintf(rp->final[rp->nfinal][1], sizeof rp->final[0][1], "%s", f[2]);
		snprintf(rp->final[rp->nfinal][2], sizeof rp->final[0][2], "%s", f[3]);
		rp->nfinal++;
	}
	free(text);
	free(path);
}

/* The highest WAL end any frame of the recording reports, read here on its
 * own (not through pg_repl.c): where the replay is caught up. */
static uint64_t recording_end(const char *path)
{
	char *data, err[256];
	size_t len, off = 8;
	uint64_t end = 0;

	assert_int_equal(sl_read_file(path, &data, &len, err, sizeof err), 0);
	assert_true(len > 8 && !memcmp(data, SL_PG_RECORDING_MAGIC, 8));
	while (off + 4 <= len) {
		const unsigned char *f = (const unsigned char *)data + off + 4;
		uint32_t n = sl_get_u32((const unsigned char *)data + off);
		uint64_t e = 0;
		assert_true(off + 4 + n <= len);
		if (f[0] == 'k' && n >= 18)
			e = sl_get_u64(f + 1);
		else if (f[0] == 'w' && n >= 25)
			e = sl_get_u64(f + 9);
		if (e > end)
			end = e;
		off += 4 + n;
	}
	assert_int_equal(off, len);
	free(data);
	return end;
}

/* ---- the replay ---- */

static char replay_slot[] = "rec_slot", replay_pub[] = "rec_pub";
static const struct sl_pg_stream_conf replay_stream_conf = { .slot = replay_slot, .publication = replay_pub };

static int group_setup(void **state)
{
	struct replay *rp = calloc(1, sizeof *rp);
	struct sl_source_stream st;
	struct sl_checkpoint ck;
	struct sl_pipe_config pc;
	struct sl_pipe_stream_opts o;
	struct sl_pipe *p = NULL;
	atomic_int signals;
	bool abandoned = false;
	void *src = NULL;
	char *rec = replay_path("workload.rec");

	assert_non_null(rp);
	sl_log_min_level = SL_LOG_ERROR;
	sl_buf_init(&rp->out, 0);
	sl_buf_init(&rp->pending, 0);
	load_tables(rp);
	load_relids(rp, rec);
	load_final(rp);
	rp->target = recording_end(rec);
	snprintf(rp->dir, sizeof rp->dir, "/tmp/sluice-replay-XXXXXX");
	assert_non_null(mkdtemp(rp->dir));
	assert_int_equal(sl_ckpt_load(&ck, &sl_pg_desc, rp->dir, "replay", rp->err, sizeof rp->err), 0);
	ck.has_position = true;
	memset(&ck.durable, 0, sizeof ck.durable);

	memset(&st, 0, sizeof st);
	st.name = "replay";
	st.conf = &replay_stream_conf;
	if (sl_pg_source_open_replay(&src, &st, rec, rp->tables, rp->ntables, rp->err, sizeof rp->err) < 0)
		fail_msg("%s", rp->err);
	atomic_init(&signals, 0);
	memset(&pc, 0, sizeof pc);
	pc.stream = "replay";
	pc.desc = &sl_pg_desc;
	pc.sink = &replay_sink_ops;
	pc.sinkctx = rp;
	pc.ck = &ck;
	pc.signals = &signals;
	pc.err = rp->err;
	pc.errlen = sizeof rp->err;
	assert_int_equal(sl_pipe_start(&p, &pc), SL_OK);
	assert_int_equal(sl_pg_source_ops.start(src, &ck.durable, rp->err, sizeof rp->err), SL_OK);
	memset(&o, 0, sizeof o);
	o.until_caught_up = true;
	o.target.w[0] = rp->target;
	rp->rc = sl_pipe_stream(p, &sl_pg_source_ops, src, &o);
	rp->stop_rc = sl_pipe_stop(p, rp->rc == SL_OK, &abandoned);
	assert_false(abandoned);
	/* The checkpoint holds the end of the recording. */
	assert_int_equal(rp->rc, SL_OK);
	assert_int_equal(rp->stop_rc, SL_OK);
	assert_int_equal(ck.durable.w[0], rp->target);
	sl_pg_source_ops.close(src);
	sl_ckpt_free(&ck);
	{
		struct sl_buf path;
		sl_buf_init(&path, 0);
		sl_buf_printf(&path, "%s/replay.checkpoint.json", rp->dir);
		unlink(path.data);
		sl_buf_free(&path);
		rmdir(rp->dir);
	}
	free(rec);
	*state = rp;
	return 0;
}

static int group_teardown(void **state)
{
	struct replay *rp = *state;

	if (!rp)
		return 0;
	for (size_t i = 0; i < rp->nrecs + rp->npending_recs; i++) {
		for (int c = 0; c < rp->recs[i].ncols; c++) {
			free(rp->recs[i].cols[c]);
			free(rp->recs[i].vals[c]);
		}
		free(rp->recs[i].cols);
		free(rp->recs[i].vals);
		free(rp->recs[i].row);
	}
	free(rp->recs);
	for (int i = 0; i < rp->ntables; i++)
		sl_table_free(rp->tables[i]);
	sl_buf_free(&rp->out);
	sl_buf_free(&rp->pending);
	free(rp);
	return 0;
}

/* ---- looking records up ---- */

static const char *val(const struct rrec *r, const char *col)
{
	for (int i = 0; i < r->ncols; i++)
		if (!strcmp(r->cols[i], col))
			return r->vals[i];
	return NULL;
}

/* The i-th record (from 0) of table with op whose column col prints as v (any when col is NULL). */
static const struct rrec *find(const struct replay *rp, const char *table, enum sl_op op, const char *col,
			       const char *v, int nth)
{
	for (size_t i = 0; i < rp->nrecs; i++) {
		const struct rrec *r = &rp->recs[i];
		const char *x;
		if (strcmp(r->table, table) || r->op != op)
			continue;
		if (col && (!(x = val(r, col)) || strcmp(x, v)))
			continue;
		if (nth-- == 0)
			return r;
	}
	return NULL;
}

static const struct rrec *must_find(const struct replay *rp, const char *table, enum sl_op op, const char *col,
				    const char *v)
{
	const struct rrec *r = find(rp, table, op, col, v, 0);

	if (!r)
		fail_msg("no %s record of %s with %s = %s", sl_op_name(op), table, col ? col : "-", v ? v : "-");
	return r;
}

/* The record right after r in the output. */
static const struct rrec *next_rec(const struct replay *rp, const struct rrec *r)
{
	size_t i = (size_t)(r - rp->recs) + 1;
	return i < rp->nrecs ? &rp->recs[i] : NULL;
}

static size_t count(const struct replay *rp, const char *table, enum sl_op op)
{
	size_t n = 0;

	for (size_t i = 0; i < rp->nrecs; i++)
		n += !strcmp(rp->recs[i].table, table) && rp->recs[i].op == op;
	return n;
}

/* ---- the tests ---- */

/* The whole output equals the reviewed expected.txt. */
static void test_expected_output(void **state)
{
	struct replay *rp = *state;
	char *path = replay_path("expected.txt"), *want = NULL, err[256];
	const char *got = rp->out.data ? rp->out.data : "";
	size_t len = 0;
	FILE *f;

	if (sl_read_file(path, &want, &len, err, sizeof err) == 0 && len == rp->out.len && !memcmp(want, got, len)) {
		free(want);
		free(path);
		return;
	}
	if ((f = fopen("pg_replay.actual.txt", "w"))) {
		fwrite(got, 1, rp->out.len, f);
		fclose(f);
	}
	if (want) {
		/* the first line that differs */
		int line = 1;
		size_t i = 0, ls = 0;
		while (i < len && i < rp->out.len && want[i] == got[i]) {
			if (want[i] == '\n') {
				line++;
				ls = i + 1;
			}
			i++;
		}
		print_error("output differs from %s at line %d:\n  expected: %.*s\n  got:      %.*s\n", path, line,
			    (int)strcspn(want + ls, "\n"), want + ls, (int)strcspn(got + ls, "\n"), got + ls);
	} else {
		print_error("%s: %s\n", path, err);
	}
	print_error("the whole output is in pg_replay.actual.txt (beside the test); review it against the "
		    "workload and copy it over tests/replay/expected.txt if the change is intended\n");
	free(want);
	free(path);
	fail();
}

/* Records per table and operation, as the workload made them. */
static void test_records_per_table(void **state)
{
	struct replay *rp = *state;
	static const struct { const char *table; size_t n[5]; } want[] = {
		/*                       INSERT  U-INSERT  U-DELETE  DELETE  TRUNCATE */
		{ "public.kv",          { 26,     3,        1,        2,      0 } },
		{ "public.full_t",      { 2,      3,        1,        1,      0 } },
		{ "public.toasty",      { 1,      4,        1,        0,      0 } },
		{ "public.types_t",     { 6,      1,        0,        1,      0 } },
		{ "public.alt",         { 5,      2,        0,        0,      0 } },
		{ "public.trunc_a",     { 3,      0,        0,        0,      1 } },
		{ "public.trunc_b",     { 3,      0,        0,        0,      2 } },
		{ "sales.order items",  { 2,      0,        0,        0,      0 } },
	};
	static const enum sl_op ops[5] = { SL_OP_INSERT, SL_OP_UPDATE_INSERT, SL_OP_UPDATE_DELETE, SL_OP_DELETE,
					   SL_OP_TRUNCATE };

	for (size_t t = 0; t < sizeof want / sizeof want[0]; t++)
		for (int o = 0; o < 5; o++) {
			size_t n = count(rp, want[t].table, ops[o]);
			if (n != want[t].n[o])
				fail_msg("%s: %zu %s records, the workload made %zu", want[t].table, n,
					 sl_op_name(ops[o]), want[t].n[o]);
		}
	/* nothing of the table outside the publication, nothing rolled back */
	for (size_t i = 0; i < rp->nrecs; i++)
		assert_string_not_equal(rp->recs[i].table, "public.unpub");
	assert_null(find(rp, "public.kv", SL_OP_INSERT, "id", "int 4", 0));
	assert_null(find(rp, "public.kv", SL_OP_INSERT, "id", "int 6", 0));
	/* nor the row written before the slot */
	assert_null(find(rp, "public.kv", SL_OP_INSERT, "id", "int 100", 0));
}

/* Replaying the records gives every table the row count and keys the
 * server reported after the workload (workload.final). */
static void test_final_state_matches_server(void **state)
{
	struct replay *rp = *state;

	for (int t = 0; t < rp->nfinal; t++) {
		const char *table = rp->final[t][0];
		const char *key = NULL;
		struct sl_buf keys;
		char **rows = NULL;
		size_t nrows = 0;
		int64_t *ks;
		size_t nk = 0;

		for (int i = 0; i < rp->ntables; i++) {
			char name[160];
			snprintf(name, sizeof name, "%s.%s", rp->tables[i]->ns, rp->tables[i]->name);
			if (!strcmp(name, table) && rp->tables[i]->ncols > 0)
				key = rp->tables[i]->cols[0].name;
		}
		/* the rows as a multiset: by key, or by the whole row without one */
		for (size_t i = 0; i < rp->nrecs; i++) {
			const struct rrec *r = &rp->recs[i];
			const char *id;
			if (strcmp(r->table, table))
				continue;
			if (r->op == SL_OP_TRUNCATE) {
				for (size_t j = 0; j < nrows; j++)
					free(rows[j]);
				nrows = 0;
				continue;
			}
			id = key ? val(r, key) : r->row;
			assert_non_null(id);
			if (r->op == SL_OP_INSERT || r->op == SL_OP_UPDATE_INSERT) {
				size_t j;
				for (j = 0; key && j < nrows && strcmp(rows[j], id); j++)
					;
				if (key && j < nrows)
					continue;  /* an update of a row present */
				rows = realloc(rows, (nrows + 1) * sizeof *rows);
				rows[nrows++] = xstrdup(id);
			} else {
				size_t j;
				for (j = 0; j < nrows && strcmp(rows[j], id); j++)
					;
				if (j == nrows)
					fail_msg("%s: %s of a row never seen: %s", table, sl_op_name(r->op), id);
				free(rows[j]);
				rows[j] = rows[--nrows];
			}
		}
		if ((size_t)strtoull(rp->final[t][1], NULL, 10) != nrows)
			fail_msg("%s: %zu rows after the replay, the server had %s", table, nrows, rp->final[t][1]);
		if (key) {
			ks = calloc(nrows + 1, sizeof *ks);
			for (size_t j = 0; j < nrows; j++) {
				assert_int_equal(strncmp(rows[j], "int ", 4), 0);
				ks[nk++] = strtoll(rows[j] + 4, NULL, 10);
			}
			for (size_t a = 1; a < nk; a++)     /* sort */
				for (size_t b = a; b > 0 && ks[b - 1] > ks[b]; b--) {
					int64_t x = ks[b];
					ks[b] = ks[b - 1];
					ks[b - 1] = x;
				}
			sl_buf_init(&keys, 0);
			sl_buf_puts(&keys, "");
			for (size_t j = 0; j < nk; j++)
				sl_buf_printf(&keys, "%s%" PRId64, j ? "," : "", ks[j]);
			if (strcmp(keys.data, rp->final[t][2]))
				fail_msg("%s: keys %s after the replay, the server had %s", table, keys.data, rp->final[t][2]);
			sl_buf_free(&keys);
			free(ks);
		}
		for (size_t j = 0; j < nrows; j++)
			free(rows[j]);
		free(rows);
	}
	assert_int_equal(rp->nfinal, 9);
}

/* UPDATE kv SET id = 30 WHERE id = 3: the old key, then the new row, in
 * the same transaction at consecutive sequence numbers. */
static void test_key_change(void **state)
{
	struct replay *rp = *state;
	const struct rrec *del = must_find(rp, "public.kv", SL_OP_UPDATE_DELETE, "id", "int 3");
	const struct rrec *ins = next_rec(rp, del);

	/* default replica identity: the old tuple holds the key only */
	assert_string_equal(val(del, "v"), "null");
	assert_string_equal(val(del, "n"), "null");
	assert_non_null(ins);
	assert_int_equal(ins->op, SL_OP_UPDATE_INSERT);
	assert_string_equal(ins->table, "public.kv");
	assert_string_equal(val(ins, "id"), "int 30");
	assert_string_equal(val(ins, "v"), "null");
	assert_string_equal(val(ins, "n"), "int 3");
	assert_int_equal(ins->csn_pos, del->csn_pos);
	assert_int_equal(ins->seq, del->seq + 1);
	/* an update that keeps the key gives UPDATE-INSERT alone */
	assert_non_null(must_find(rp, "public.kv", SL_OP_UPDATE_INSERT, "v", "string[3] \"uno\""));
	assert_null(find(rp, "public.kv", SL_OP_UPDATE_DELETE, "id", "int 1", 0));
}

/* toasty.big is stored out of line; updates that leave it alone send it as
 * unchanged, which is not NULL. */
static void test_toast_unchanged(void **state)
{
	struct replay *rp = *state;
	const struct rrec *ins = must_find(rp, "public.toasty", SL_OP_INSERT, "id", "int 1");
	const struct rrec *u1 = must_find(rp, "public.toasty", SL_OP_UPDATE_INSERT, "small", "int 2");
	const struct rrec *u3 = must_find(rp, "public.toasty", SL_OP_UPDATE_INSERT, "small", "int 3");

	assert_int_equal(strncmp(val(ins, "big"), "string[3040] \"0123456789abcdef", 30), 0);
	assert_string_equal(val(u1, "id"), "int 1");
	assert_string_equal(val(u1, "big"), "unchanged");
	/* the key change keeps it unchanged too (UPDATE-DELETE of id 1 first) */
	assert_int_equal(next_rec(rp, must_find(rp, "public.toasty", SL_OP_UPDATE_DELETE, "id", "int 1"))->op,
			 SL_OP_UPDATE_INSERT);
	assert_string_equal(val(find(rp, "public.toasty", SL_OP_UPDATE_INSERT, "id", "int 2", 0), "big"), "unchanged");
	/* a new value arrives whole; set to NULL it is null, not unchanged */
	assert_int_equal(strncmp(val(find(rp, "public.toasty", SL_OP_UPDATE_INSERT, "id", "int 2", 1), "big"),
				 "string[3200] \"fedcba9876543210", 30), 0);
	assert_string_equal(val(u3, "big"), "null");
}

/* REPLICA IDENTITY FULL: old rows in full; the key is the catalog's, so an
 * update that keeps it is one UPDATE-INSERT. */
static void test_replica_identity_full(void **state)
{
	struct replay *rp = *state;
	const struct rrec *d = must_find(rp, "public.full_t", SL_OP_DELETE, "id", "int 1");
	const struct rrec *ud = must_find(rp, "public.full_t", SL_OP_UPDATE_DELETE, "id", "int 2");
	const struct rrec *ui = next_rec(rp, ud);

	assert_string_equal(val(d, "a"), "string[1] \"a\"");
	assert_string_equal(val(d, "b"), "int 11");
	assert_string_equal(val(ud, "a"), "string[1] \"b\"");
	assert_string_equal(val(ud, "b"), "null");
	assert_int_equal(ui->op, SL_OP_UPDATE_INSERT);
	assert_string_equal(val(ui, "id"), "int 3");
	assert_non_null(must_find(rp, "public.full_t", SL_OP_UPDATE_INSERT, "b", "int 11"));
	assert_int_equal(count(rp, "public.full_t", SL_OP_UPDATE_DELETE), 1);
}

/* TRUNCATE trunc_a, trunc_b: one record per table, in one transaction;
 * then TRUNCATE trunc_b RESTART IDENTITY. */
static void test_truncate(void **state)
{
	struct replay *rp = *state;
	const struct rrec *a = must_find(rp, "public.trunc_a", SL_OP_TRUNCATE, NULL, NULL);
	const struct rrec *b = next_rec(rp, a);
	const struct rrec *b2 = find(rp, "public.trunc_b", SL_OP_TRUNCATE, NULL, NULL, 1);

	assert_int_equal(a->ncols, 0);
	assert_non_null(b);
	assert_int_equal(b->op, SL_OP_TRUNCATE);
	assert_string_equal(b->table, "public.trunc_b");
	assert_int_equal(b->csn_pos, a->csn_pos);
	assert_int_equal(a->seq, 1);
	assert_int_equal(b->seq, 2);
	assert_non_null(b2);
	assert_true(b2->csn_pos > b->csn_pos);
	assert_int_equal(b2->seq, 1);
	/* the rows inserted in between came after the first and before the second */
	assert_true(must_find(rp, "public.trunc_b", SL_OP_INSERT, "id", "int 5") > b);
}

/* ALTER TABLE mid-stream: each record carries the columns of its time. */
static void test_alter_table(void **state)
{
	struct replay *rp = *state;
	const struct rrec *r1 = must_find(rp, "public.alt", SL_OP_INSERT, "id", "int 1");
	const struct rrec *r2 = must_find(rp, "public.alt", SL_OP_INSERT, "id", "int 2");
	const struct rrec *r3 = must_find(rp, "public.alt", SL_OP_INSERT, "id", "int 3");
	const struct rrec *u3 = must_find(rp, "public.alt", SL_OP_UPDATE_INSERT, "id", "int 3");
	const struct rrec *r4 = must_find(rp, "public.alt", SL_OP_INSERT, "id", "int 4");
	const struct rrec *r5 = must_find(rp, "public.alt", SL_OP_INSERT, "id", "int 5");

	assert_int_equal(r1->ncols, 2);                       /* id, a */
	assert_int_equal(r2->ncols, 3);                       /* id, a, b */
	assert_string_equal(val(r2, "b"), "int 20");
	assert_string_equal(val(must_find(rp, "public.alt", SL_OP_UPDATE_INSERT, "id", "int 1"), "b"), "int 10");
	assert_int_equal(r3->ncols, 2);                       /* id, b: a dropped */
	assert_null(val(r3, "a"));
	assert_string_equal(val(u3, "b"), "int 31");           /* now bigint */
	/* a column added inside a transaction: same transaction, two shapes */
	assert_int_equal(r4->csn_pos, r5->csn_pos);
	assert_int_equal(r4->ncols, 2);
	assert_int_equal(r5->ncols, 3);
	assert_string_equal(val(r5, "c"), "string[2] \"c5\"");
	/* and the output names each version of the table as it appears */
	{
		const char *t = rp->out.data, *p = t;
		int versions = 0;
		while ((p = strstr(p, "TABLE public.alt (")) != NULL) {
			versions++;
			p++;
		}
		assert_int_equal(versions, 5);   /* (id,a) (id,a,b) (id,b) (id,b bigint) (id,b,c) */
	}
}

/* Transactions: the multi-table one in order at one position; the
 * subtransaction rolled back inside a committed one; twenty rows. */
static void test_transactions(void **state)
{
	struct replay *rp = *state;
	const struct rrec *r = must_find(rp, "public.kv", SL_OP_INSERT, "id", "int 8");
	static const char *const tables[] = { "public.kv", "public.full_t", "public.trunc_b", "public.kv",
					      "sales.order items" };
	static const enum sl_op ops[] = { SL_OP_INSERT, SL_OP_UPDATE_INSERT, SL_OP_INSERT, SL_OP_DELETE, SL_OP_INSERT };
	const struct rrec *k5 = must_find(rp, "public.kv", SL_OP_INSERT, "id", "int 5");
	const struct rrec *k7 = next_rec(rp, k5);
	const struct rrec *b = must_find(rp, "public.kv", SL_OP_INSERT, "id", "int 1000");

	for (int i = 0; i < 5; i++, r = next_rec(rp, r)) {
		assert_non_null(r);
		assert_string_equal(r->table, tables[i]);
		assert_int_equal(r->op, ops[i]);
		assert_int_equal(r->seq, (uint32_t)i + 1);
	}
	assert_true(r == NULL || r->seq == 1);   /* and nothing else in it */
	assert_string_equal(val(k7, "id"), "int 7");
	assert_int_equal(k7->csn_pos, k5->csn_pos);
	assert_int_equal(k7->seq, 2);
	for (int i = 0; i < 20; i++, b = next_rec(rp, b)) {
		char want[32];
		snprintf(want, sizeof want, "int %d", 1000 + i);
		assert_string_equal(val(b, "id"), want);
		assert_int_equal(b->seq, (uint32_t)i + 1);
	}
}

/* A few rules of doc/types.md, checked on the values the workload wrote. */
static void test_type_rules(void **state)
{
	struct replay *rp = *state;
	const struct rrec *r2 = must_find(rp, "public.types_t", SL_OP_INSERT, "id", "int 2");
	const struct rrec *r3 = must_find(rp, "public.types_t", SL_OP_INSERT, "id", "int 3");
	const struct rrec *r6 = must_find(rp, "public.types_t", SL_OP_INSERT, "id", "int 6");

	/* NaN in numeric(p,s) is null; plain numeric keeps it as text */
	assert_string_equal(val(r6, "c_num"), "null");
	assert_string_equal(val(r6, "c_numfree"), "string[3] \"NaN\"");
	/* infinities clamp to 9999-12-31 / 0001-01-01 */
	assert_string_equal(val(r3, "c_date"), "date 2932896 (9999-12-31)");
	assert_string_equal(val(r3, "c_ts"), "timestamp 253402300799999999 (9999-12-31T23:59:59.999999Z)");
	assert_string_equal(val(r2, "c_tstz"), "timestamp -62135596800000000 (0001-01-01T00:00:00.000000Z)");
	/* 44 BC is astronomical year -43; 24:00:00 is a whole day */
	assert_string_equal(val(r2, "c_date"), "date -735160 (-0043-03-15)");
	assert_string_equal(val(r3, "c_time"), "time 86400000000 (24:00:00.000000)");
	/* a time zone offset is applied: 13:45 at +02 is 11:45 UTC */
	assert_string_equal(val(must_find(rp, "public.types_t", SL_OP_INSERT, "id", "int 1"), "c_tstz"),
			    "timestamp 1709207100123456 (2024-02-29T11:45:00.123456Z)");
	/* enums, arrays, ranges and domains are PostgreSQL's text */
	assert_string_equal(val(r2, "c_enum"), "string[3] \"sad\"");
	assert_string_equal(val(r3, "c_range"), "string[4] \"(,6)\"");
	/* the deleted row 5 came back with its key only */
	assert_string_equal(val(must_find(rp, "public.types_t", SL_OP_DELETE, "id", "int 5"), "c_text"), "null");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_expected_output),
		cmocka_unit_test(test_records_per_table),
		cmocka_unit_test(test_final_state_matches_server),
		cmocka_unit_test(test_key_change),
		cmocka_unit_test(test_toast_unchanged),
		cmocka_unit_test(test_replica_identity_full),
		cmocka_unit_test(test_truncate),
		cmocka_unit_test(test_alter_table),
		cmocka_unit_test(test_transactions),
		cmocka_unit_test(test_type_rules),
	};

	return cmocka_run_group_tests_name("pg_replay", tests, group_setup, group_teardown);
}
