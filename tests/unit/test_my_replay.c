/*
 * tests/unit/test_my_replay.c: replays a binlog stream recorded from a real
 * MariaDB 10.11 (tests/replay/mysql/workload.rec, made by record.py there)
 * through the MySQL source and the real pipeline, without a server:
 *
 *   recorded events -> my_dump.c (replay) -> event decoder -> my_stream.c
 *   next() (transactions, table maps, rows, XA, TRUNCATE) -> pipeline -> a
 *   test sink that prints every record
 *
 * The printed text must equal tests/replay/mysql/expected.txt, reviewed by
 * hand against record.py's WORKLOAD; on a difference the test writes what
 * it got to my_replay.actual.txt and shows the first differing line.  The
 * other tests check facts of the workload directly: each table's keys after
 * the workload as the server reported them (workload.final), the XA
 * transaction written at its XA COMMIT and the rolled-back one nowhere, the
 * table the stream does not select, TRUNCATE, the added column's new
 * schema version, the zero date written as null.
 *
 * The catalog stand-in (workload.tables) names the tables only: with
 * binlog_row_metadata=FULL the table maps describe them.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <inttypes.h>
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
#include "sources/mysql/my_internal.h"

#define MAX_T 16

struct keys { char table[128]; int64_t *k; size_t n, a; };

struct replay {
	struct sl_buf out, pending;
	bool has_mark;
	struct sl_position mark;
	char seen[MAX_T][200];
	int nseen;
	struct keys keys[MAX_T];
	int nkeys;
	char last_op_table[128];
	uint64_t last_pos;
	uint32_t last_seq;
	bool last_was_ud;
	int64_t xa6_pos, xa7_pos;
	bool saw8, saw_unsel, saw_trunc, date4_null;
	int alt_versions;
	char dir[64];
	char err[1024];
	int rc, stop_rc;
};

static const char *top(void)
{
	const char *d = getenv("SLUICE_TOP_SRCDIR");
	return d && *d ? d : ".";
}

static char *path_of(const char *name)
{
	struct sl_buf b;

	sl_buf_init(&b, 0);
	sl_buf_printf(&b, "%s/tests/replay/mysql/%s", top(), name);
	return sl_buf_detach(&b);
}

static void put_value(struct sl_buf *b, const struct sl_value *v)
{
	switch ((enum sl_value_kind)v->kind) {
	case SL_V_NULL: sl_buf_puts(b, "null"); return;
	case SL_V_UNCHANGED: sl_buf_puts(b, "unchanged"); return;
	case SL_V_BOOL: sl_buf_printf(b, "bool %d", v->b); return;
	case SL_V_INT: sl_buf_printf(b, "int %" PRId64, v->i); return;
	case SL_V_UINT: sl_buf_printf(b, "uint %" PRIu64, v->u); return;
	case SL_V_FLOAT: sl_buf_printf(b, "float %.9g", (double)v->f); return;
	case SL_V_DOUBLE: sl_buf_printf(b, "double %.17g", v->d); return;
	case SL_V_DECIMAL:
		sl_buf_printf(b, "decimal %s%.*s scale %d", v->neg ? "-" : "", (int)v->len, v->p, v->scale);
		return;
	case SL_V_DATE: sl_buf_printf(b, "date %" PRId64, v->i); return;
	case SL_V_TIME: sl_buf_printf(b, "time %" PRId64, v->i); return;
	case SL_V_TIMESTAMP: sl_buf_printf(b, "timestamp %" PRId64, v->i); return;
	case SL_V_BYTES: case SL_V_UUID:
		sl_buf_printf(b, "bytes[%" PRIu32 "] ", v->len);
		for (uint32_t i = 0; i < v->len && i < 24; i++)
			sl_buf_printf(b, "%02x", (unsigned char)v->p[i]);
		if (v->len > 24)
			sl_buf_puts(b, "...");
		return;
	case SL_V_STRING: case SL_V_JSON:
		sl_buf_printf(b, "%s[%" PRIu32 "] \"", v->kind == SL_V_JSON ? "json" : "string", v->len);
		for (uint32_t i = 0; i < v->len && i < 60; i++) {
			unsigned char c = (unsigned char)v->p[i];
			if (c < 0x20 || c == '"' || c == '\\')
				sl_buf_printf(b, "\\x%02x", c);
			else
				sl_buf_putc(b, (char)c);
		}
		sl_buf_puts(b, v->len > 60 ? "...\"" : "\"");
		return;
	}
}

static struct keys *keys_of(struct replay *rp, const char *t)
{
	for (int i = 0; i < rp->nkeys; i++)
		if (!strcmp(rp->keys[i].table, t))
			return &rp->keys[i];
	assert_true(rp->nkeys < MAX_T);
	snprintf(rp->keys[rp->nkeys].table, sizeof rp->keys[0].table, "%s", t);
	return &rp->keys[rp->nkeys++];
}

static void key_add(struct keys *k, int64_t v)
{
	if (k->n == k->a) {
		k->a = k->a ? k->a * 2 : 32;
		assert_non_null(k->k = realloc(k->k, sizeof *k->k * k->a));
	}
	k->k[k->n++] = v;
}

static bool key_has(const struct keys *k, int64_t v)
{
	for (size_t i = 0; i < k->n; i++)
		if (k->k[i] == v)
			return true;
	return false;
}

static void key_del(struct keys *k, int64_t v)
{
	for (size_t i = 0; i < k->n; i++) {
		if (k->k[i] == v) {
			k->k[i] = k->k[--k->n];
			return;
		}
	}
	fail_msg("%s: delete of key %" PRId64 " that is not there", k->table, v);
}

static int rs_write(void *ctx, const struct sl_change *c, char *err, size_t errlen)
{
	struct replay *rp = ctx;
	const struct sl_table *t = c->table;
	struct sl_meta_value meta[SL_META_MAX];
	char metabuf[SL_META_BUF], name[128], id[200];
	struct sl_buf *b = &rp->pending;
	struct keys *k;
	int i;

	(void)err;
	(void)errlen;
	snprintf(name, sizeof name, "%s.%s", t->ns, t->name);
	snprintf(id, sizeof id, "%s %s", name, t->schema_key);
	for (i = 0; i < rp->nseen && strcmp(rp->seen[i], id); i++)
		;
	if (i == rp->nseen) {
		assert_true(rp->nseen < MAX_T);
		snprintf(rp->seen[rp->nseen++], sizeof rp->seen[0], "%s", id);
		if (!strcmp(name, "rp.alt"))
			rp->alt_versions++;
		sl_buf_printf(b, "TABLE %s (", name);
		for (int c2 = 0; c2 < t->ncols; c2++)
			sl_buf_printf(b, "%s%s %s%s", c2 ? ", " : "", t->cols[c2].name,
				      t->cols[c2].type_name ? t->cols[c2].type_name : "?", t->cols[c2].is_key ? " key" : "");
		sl_buf_puts(b, ")\n");
	}
	t->src->meta_values(c->pos, meta, metabuf, sizeof metabuf);
	sl_buf_printf(b, "%s %s %s %.*s:%" PRId64 " gtid %.*s tx %" PRIu64 "\n", c->csn, sl_op_name(c->op), name,
		      (int)meta[0].len, meta[0].s, meta[1].i, (int)meta[2].len, meta[2].s ? meta[2].s : "", c->tx_id);
	for (int c2 = 0; c2 < t->ncols && c->values; c2++) {
		sl_buf_printf(b, "  %s = ", t->cols[c2].name);
		put_value(b, &c->values[c2]);
		sl_buf_putc(b, '\n');
	}
	/* the facts */
	k = keys_of(rp, name);
	if (c->op == SL_OP_TRUNCATE) {
		k->n = 0;
		rp->saw_trunc = true;
	} else {
		int64_t key = c->values[0].kind == SL_V_INT ? c->values[0].i : -1;
		if (c->op == SL_OP_INSERT)
			key_add(k, key);
		else if (c->op == SL_OP_DELETE || c->op == SL_OP_UPDATE_DELETE)
			key_del(k, key);
		else if (c->op == SL_OP_UPDATE_INSERT && ((rp->last_was_ud && rp->last_pos == c->csn_pos &&
							    rp->last_seq + 1 == c->seq) || !key_has(k, key)))
			key_add(k, key);  /* a key change, a keyless row, or a row from before the recording */
		if (!strcmp(name, "rp.kv") && key == 6)
			rp->xa6_pos = (int64_t)c->csn_pos;
		if (!strcmp(name, "rp.kv") && key == 7)
			rp->xa7_pos = (int64_t)c->csn_pos;
		if (!strcmp(name, "rp.kv") && key == 8)
			rp->saw8 = true;
		if (!strcmp(name, "rp.types_t") && key == 4 && c->values[8].kind == SL_V_NULL &&
		    c->values[9].kind == SL_V_NULL)
			rp->date4_null = true;
	}
	if (!strcmp(name, "rp.unsel"))
		rp->saw_unsel = true;
	rp->last_was_ud = c->op == SL_OP_UPDATE_DELETE;
	rp->last_pos = c->csn_pos;
	rp->last_seq = c->seq;
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
	(void)ctx;
	(void)now_ms;
	return false;
}

static bool rs_pending(void *ctx)
{
	return ((struct replay *)ctx)->pending.len > 0;
}

static int rs_flush(void *ctx, struct sl_position *durable, char *err, size_t errlen)
{
	struct replay *rp = ctx;

	(void)err;
	(void)errlen;
	if (rp->pending.len)
		sl_buf_append(&rp->out, rp->pending.data, rp->pending.len);
	sl_buf_reset(&rp->pending);
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

static const struct sl_sink_ops sink_ops = {
	.type = "replay_text", .write = rs_write, .mark = rs_mark, .flush_due = rs_flush_due,
	.pending = rs_pending, .flush = rs_flush, .discard_backfill = rs_discard, .close = rs_close,
};

static int group_setup(void **state)
{
	struct replay *rp = calloc(1, sizeof *rp);
	struct sl_my_table tables[MAX_T];
	int ntables = 0;
	struct sl_source_stream st;
	struct sl_checkpoint ck;
	struct sl_pipe_config pc;
	struct sl_pipe_stream_opts o;
	struct sl_pipe *p = NULL;
	atomic_int signals;
	bool abandoned = false;
	void *src = NULL;
	char *rec = path_of("workload.rec"), *tp = path_of("workload.tables"), *ep = path_of("workload.end");
	char *text, *line, *save = NULL;
	size_t len;

	assert_non_null(rp);
	sl_log_min_level = SL_LOG_ERROR;
	sl_buf_init(&rp->out, 0);
	sl_buf_init(&rp->pending, 0);
	memset(tables, 0, sizeof tables);
	assert_int_equal(sl_read_file(tp, &text, &len, rp->err, sizeof rp->err), 0);
	for (line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char *tab = strchr(line, '\t');
		assert_non_null(tab);
		*tab = '\0';
		tables[ntables].db = strdup(line);
		tables[ntables].name = strdup(tab + 1);
		assert_int_equal(sl_my_table_build(&tables[ntables], rp->err, sizeof rp->err), 0);
		ntables++;
	}
	free(text);
	snprintf(rp->dir, sizeof rp->dir, "/tmp/sluice-myreplay-XXXXXX");
	assert_non_null(mkdtemp(rp->dir));
	assert_int_equal(sl_ckpt_load(&ck, &sl_my_desc, rp->dir, "replay", rp->err, sizeof rp->err), 0);
	ck.has_position = true;
	memset(&st, 0, sizeof st);
	st.name = "replay";
	if (sl_my_source_open_replay(&src, &st, rec, tables, ntables, rp->err, sizeof rp->err) < 0)
		fail_msg("%s", rp->err);
	atomic_init(&signals, 0);
	memset(&pc, 0, sizeof pc);
	pc.stream = "replay";
	pc.desc = &sl_my_desc;
	pc.sink = &sink_ops;
	pc.sinkctx = rp;
	pc.ck = &ck;
	pc.signals = &signals;
	pc.err = rp->err;
	pc.errlen = sizeof rp->err;
	assert_int_equal(sl_my_desc.pos_decode("mb.000001:4", &ck.durable), 0);
	assert_int_equal(sl_pipe_start(&p, &pc), SL_OK);
	assert_int_equal(sl_my_source_ops.start(src, &ck.durable, rp->err, sizeof rp->err), SL_OK);
	memset(&o, 0, sizeof o);
	o.until_caught_up = true;
	assert_int_equal(sl_read_file(ep, &text, &len, rp->err, sizeof rp->err), 0);
	text[strcspn(text, "\n")] = '\0';
	assert_int_equal(sl_my_desc.pos_decode(text, &o.target), 0);
	free(text);
	rp->rc = sl_pipe_stream(p, &sl_my_source_ops, src, &o);
	if (rp->rc != SL_OK)
		fail_msg("stream: %s", rp->err);
	rp->stop_rc = sl_pipe_stop(p, true, &abandoned);
	assert_int_equal(rp->stop_rc, SL_OK);
	assert_true(sl_my_desc.pos_compare(&ck.durable, &o.target) >= 0);
	sl_my_source_ops.close(src);
	for (int i = 0; i < ntables; i++)
		sl_my_table_free(&tables[i]);
	sl_ckpt_free(&ck);
	free(rec);
	free(tp);
	free(ep);
	*state = rp;
	return 0;
}

static int group_teardown(void **state)
{
	struct replay *rp = *state;
	char cmd[128];

	snprintf(cmd, sizeof cmd, "rm -rf '%s'", rp->dir);
	if (system(cmd) != 0)
		fprintf(stderr, "could not remove %s\n", rp->dir);
	for (int i = 0; i < rp->nkeys; i++)
		free(rp->keys[i].k);
	sl_buf_free(&rp->out);
	sl_buf_free(&rp->pending);
	free(rp);
	return 0;
}

/* The layout fingerprint (sl_table.layout) tells apart what a binlog
 * without column names cannot: the same types in another order, ENUM
 * strings reordered, another collation. */
static void test_layout(void **state)
{
	struct sl_mysql_str xy[] = { { "x", 1 }, { "y", 1 } }, yx[] = { { "y", 1 }, { "x", 1 } };
	struct sl_my_col a[2], b[2];
	struct sl_my_table ta, tb;
	uint64_t base;
	(void)state;

	memset(a, 0, sizeof a);
	a[0].name = "id";
	a[0].mc.type = a[0].mc.real_type = 3;  /* LONG */
	a[0].mc.is_key = true;
	a[1].name = "e";
	a[1].mc.type = 254;                     /* STRING: an ENUM */
	a[1].mc.real_type = 247;
	a[1].mc.collation = 45;                 /* utf8mb4_general_ci */
	a[1].mc.nvalues = 2;
	a[1].mc.values = xy;
	memset(&ta, 0, sizeof ta);
	ta.db = "d";
	ta.name = "t";
	ta.ncols = 2;
	ta.cols = a;
	tb = ta;
	tb.cols = b;
	memcpy(b, a, sizeof b);
	base = sl_my_table_layout(&ta);
	assert_true(base != 0);
	assert_true(sl_my_table_layout(&tb) == base);
	b[1].mc.values = yx;
	assert_true(sl_my_table_layout(&tb) != base);
	memcpy(b, a, sizeof b);
	b[1].mc.collation = 8;                  /* latin1_swedish_ci */
	assert_true(sl_my_table_layout(&tb) != base);
	b[0] = a[1];                            /* the same columns in another order */
	b[1] = a[0];
	assert_true(sl_my_table_layout(&tb) != base);
	memcpy(b, a, sizeof b);
	b[1].name = "f";
	assert_true(sl_my_table_layout(&tb) != base);
}

static void test_expected(void **state)
{
	struct replay *rp = *state;
	char *path = path_of("expected.txt"), *want = NULL;
	size_t len = 0, l = 1;
	const char *a, *b;
	int r = sl_read_file(path, &want, &len, rp->err, sizeof rp->err);
	FILE *f = fopen("my_replay.actual.txt", "w");

	if (f) {
		fwrite(rp->out.data ? rp->out.data : "", 1, rp->out.len, f);
		fclose(f);
	}
	free(path);
	if (r != 0)
		fail_msg("no expected.txt (%s); review my_replay.actual.txt and copy it there", rp->err);
	for (a = want, b = rp->out.data ? rp->out.data : ""; *a && *a == *b; a++, b++)
		if (*a == '\n')
			l++;
	if (*a || *b)
		fail_msg("line %zu differs: want \"%.80s\", got \"%.80s\" (see my_replay.actual.txt)", l, a, b);
	free(want);
}

static int cmp64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	return x < y ? -1 : x > y;
}

static void test_final_keys(void **state)
{
	struct replay *rp = *state;
	char *path = path_of("workload.final"), *text, *line, *save = NULL;
	size_t len;
	int tables = 0;

	assert_int_equal(sl_read_file(path, &text, &len, rp->err, sizeof rp->err), 0);
	for (line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char *f[4] = { line };
		struct sl_buf got;
		struct keys *k;
		for (int i = 1; i < 4; i++) {
			assert_non_null(f[i] = strchr(f[i - 1], '\t'));
			*f[i]++ = '\0';
		}
		char name[128];
		snprintf(name, sizeof name, "%s.%s", f[0], f[1]);
		k = keys_of(rp, name);
		qsort(k->k, k->n, sizeof *k->k, cmp64);
		sl_buf_init(&got, 0);
		sl_buf_puts(&got, "");
		for (size_t i = 0; i < k->n; i++)
			sl_buf_printf(&got, "%s%" PRId64, i ? "," : "", k->k[i]);
		assert_int_equal(k->n, strtoul(f[2], NULL, 10));
		assert_string_equal(got.data, f[3]);
		sl_buf_free(&got);
		tables++;
	}
	assert_int_equal(tables, 5);
	free(text);
	free(path);
}

static void test_facts(void **state)
{
	struct replay *rp = *state;

	/* the XA transaction is written at its XA COMMIT, after the one committed between */
	assert_true(rp->xa6_pos > 0 && rp->xa7_pos > 0);
	assert_true(rp->xa6_pos > rp->xa7_pos);
	assert_false(rp->saw8);        /* XA ROLLBACK: nothing */
	assert_false(rp->saw_unsel);   /* not selected */
	assert_true(rp->saw_trunc);
	assert_int_equal(rp->alt_versions, 2);  /* a column added mid-stream */
	assert_true(rp->date4_null);   /* zero and invalid dates: null */
}

/* Every position a checkpoint holds reads back as it was written, the
 * empty one (a table whose backfill was skipped has no snapshot) too. */
static void test_position_text(void **state)
{
	const struct sl_position in[] = {
		{ { 0 }, "" },
		sl_my_pos("mb.000001", 4, NULL, NULL),
		sl_my_pos("mb.000003", 1234, "0-1-20", NULL),
		sl_my_pos("mysql-bin.999999", UINT32_MAX, "3E11FA47-71CA-11E1-9E33-C80AA9429562:1-5", NULL),
	};
	char text[256];

	(void)state;
	for (size_t i = 0; i < sizeof in / sizeof in[0]; i++) {
		struct sl_position out;

		assert_int_equal(sl_my_desc.pos_encode(&in[i], text, sizeof text), 0);
		assert_int_equal(sl_my_desc.pos_decode(text, &out), 0);
		assert_int_equal(sl_my_desc.pos_compare(&in[i], &out), 0);
		assert_string_equal(in[i].text, out.text);
	}
	assert_int_equal(sl_my_desc.pos_decode("?:1", &(struct sl_position){ 0 }), -1);
	assert_int_equal(sl_my_desc.pos_decode("mb.000001", &(struct sl_position){ 0 }), -1);
}

/* A resume position held back at a prepared XA transaction carries the
 * point read to: it survives the checkpoint's text, orders after the same
 * place without it, and leaves the file and GTID as they were. */
static void test_position_done_point(void **state)
{
	struct sl_position a, b;
	char text[SL_POS_TEXT_MAX * 2], file[SL_POS_TEXT_MAX];

	(void)state;
	assert_int_equal(sl_my_desc.pos_decode("mb.000001:1000 0-1-4 +mb.000002:2222", &a), 0);
	assert_int_equal(sl_my_desc.pos_encode(&a, text, sizeof text), 0);
	assert_string_equal(text, "mb.000001:1000 0-1-4 +mb.000002:2222");
	sl_my_pos_file(&a, file);
	assert_string_equal(file, "mb.000001");
	assert_string_equal(sl_my_pos_gtid(&a), "0-1-4");
	assert_int_equal(a.w[1], 1000);
	assert_int_equal(sl_my_desc.pos_decode("mb.000001:1000 0-1-4", &b), 0);
	assert_true(sl_my_desc.pos_compare(&a, &b) > 0);
	assert_true(sl_my_desc.pos_compare(&b, &a) < 0);
	assert_int_equal(sl_my_desc.pos_decode("mb.000001:1000 0-1-4 +mb.000001:3000", &b), 0);
	assert_true(sl_my_desc.pos_compare(&a, &b) > 0);
	assert_int_equal(sl_my_desc.pos_decode("mb.000001:1001", &b), 0);
	assert_true(sl_my_desc.pos_compare(&a, &b) < 0);
	/* without a GTID */
	assert_int_equal(sl_my_desc.pos_decode("mb.000003:4 +mb.000003:99", &a), 0);
	assert_int_equal(sl_my_desc.pos_encode(&a, text, sizeof text), 0);
	assert_string_equal(text, "mb.000003:4 +mb.000003:99");
	assert_string_equal(sl_my_pos_gtid(&a), "");
	assert_int_equal(sl_my_desc.pos_decode("mb.000003:4 +nofile", &a), -1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_position_done_point),
		cmocka_unit_test(test_layout),
		cmocka_unit_test(test_expected),
		cmocka_unit_test(test_final_keys),
		cmocka_unit_test(test_facts),
		cmocka_unit_test(test_position_text),
	};
	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
