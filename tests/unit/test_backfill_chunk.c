/*
 * tests/unit/test_backfill_chunk.c: the watermark window of a backfill
 * chunk (backfill/backfill_chunk.c): which changes the stream reads are
 * applied to the chunk's rows (those between the chunk's opening and its
 * high watermark, of its table), and how (inserts, updates with and without
 * unchanged columns, deletes, key changes, TRUNCATE), so that the rows the
 * chunk writes at its high watermark are the table's rows there.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "backfill/backfill_chunk.h"
#include "schema/schema.h"

/* t(id bigint primary key, v text, doc text) */
static struct sl_table *mk_table(const char *name, uint32_t relid)
{
	struct sl_table *t = sl_table_new("public", name);

	assert_non_null(t);
	assert_int_equal(sl_table_add_column(t, "id", SL_T_INT64, 0, 0, 20, -1, "bigint", true), 0);
	assert_int_equal(sl_table_add_column(t, "v", SL_T_STRING, 0, 0, 25, -1, "text", false), 0);
	assert_int_equal(sl_table_add_column(t, "doc", SL_T_STRING, 0, 0, 25, -1, "text", false), 0);
	assert_int_equal(sl_table_finish(t), 0);
	t->relid = relid;
	return t;
}

struct row {
	struct sl_value v[3];
};

static struct row mk_row(int64_t id, const char *v, const char *doc)
{
	struct row r;

	memset(&r, 0, sizeof r);
	r.v[0].kind = SL_V_INT;
	r.v[0].i = id;
	if (v) {
		r.v[1].kind = SL_V_STRING;
		r.v[1].p = v;
		r.v[1].len = (uint32_t)strlen(v);
	}
	if (doc == (const char *)-1) {
		r.v[2].kind = SL_V_UNCHANGED;
	} else if (doc) {
		r.v[2].kind = SL_V_STRING;
		r.v[2].p = doc;
		r.v[2].len = (uint32_t)strlen(doc);
	}
	return r;
}

#define UNCHANGED ((const char *)-1)

static struct sl_change mk_change(const struct sl_table *t, enum sl_op op, const struct row *r, uint64_t pos,
				  uint32_t seq)
{
	struct sl_change c;

	memset(&c, 0, sizeof c);
	c.table = t;
	c.op = op;
	c.values = r ? r->v : NULL;
	sl_change_set_csn(&c, pos, seq);
	return c;
}

/* "id=v/doc" of every row the chunk holds, in its order, into out. */
static const char *rows_text(const struct sl_bf_chunk *c, char *out, size_t len)
{
	const struct sl_value *v;
	size_t it = 0, n = 0;

	out[0] = '\0';
	while (sl_bf_chunk_next(c, &it, &v) && n < len) {
		n += (size_t)snprintf(out + n, len - n, "%s%lld=%.*s/%.*s", n ? " " : "", (long long)v[0].i,
				      v[1].kind == SL_V_STRING ? (int)v[1].len : 4,
				      v[1].kind == SL_V_STRING ? v[1].p : "null",
				      v[2].kind == SL_V_STRING ? (int)v[2].len : 4,
				      v[2].kind == SL_V_STRING ? v[2].p : "null");
	}
	return out;
}

struct fx {
	struct sl_table *t, *other;
	struct sl_bf_chunk *c;
	char buf[1024];
};

static int setup(void **state)
{
	static struct fx f;

	memset(&f, 0, sizeof f);
	f.t = mk_table("t", 16384);
	f.other = mk_table("u", 16390);
	f.c = sl_bf_chunk_new();
	assert_non_null(f.c);
	*state = &f;
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;

	sl_bf_chunk_free(f->c);
	sl_table_free(f->t);
	sl_table_free(f->other);
	return 0;
}

/* Opens a chunk holding ids 1, 2, 3 (v "a1".."a3", doc "d1".."d3"). */
static void open3(struct fx *f)
{
	static const char *v[] = { "a1", "a2", "a3" }, *d[] = { "d1", "d2", "d3" };

	assert_int_equal(sl_bf_chunk_open(f->c, f->t, "s:r:1:low", "s:r:1:high"), 0);
	for (int i = 0; i < 3; i++) {
		struct row r = mk_row(i + 1, v[i], d[i]);
		assert_int_equal(sl_bf_chunk_add(f->c, r.v), 0);
	}
}

static void test_rows_as_read(void **state)
{
	struct fx *f = *state;

	open3(f);
	assert_true(sl_bf_chunk_is_open(f->c));
	assert_int_equal(sl_bf_chunk_read_rows(f->c), 3);
	assert_string_equal(rows_text(f->c, f->buf, sizeof f->buf), "1=a1/d1 2=a2/d2 3=a3/d3");
	assert_int_equal(sl_bf_chunk_watermark(f->c, "s:r:1:low"), SL_BF_WM_LOW);
	assert_int_equal(sl_bf_chunk_watermark(f->c, "s:r:1:high"), SL_BF_WM_HIGH);
	assert_false(sl_bf_chunk_is_open(f->c));
	assert_string_equal(rows_text(f->c, f->buf, sizeof f->buf), "1=a1/d1 2=a2/d2 3=a3/d3");
}

/* A change inside the window replaces the key's row; the row as read is
 * not written. */
static void test_update_inside_window(void **state)
{
	struct fx *f = *state;
	struct row r = mk_row(2, "b2", "e2");
	struct sl_change ch = mk_change(f->t, SL_OP_UPDATE_INSERT, &r, 0x100, 1);

	open3(f);
	assert_int_equal(sl_bf_chunk_watermark(f->c, "s:r:1:low"), SL_BF_WM_LOW);
	assert_int_equal(sl_bf_chunk_change(f->c, &ch), 0);
	assert_int_equal(sl_bf_chunk_applied(f->c), 1);
	assert_string_equal(rows_text(f->c, f->buf, sizeof f->buf), "1=a1/d1 2=b2/e2 3=a3/d3");
}

/* Changes read after the window opened but before the low watermark count
 * too: the window opens before the low watermark is written. */
static void test_change_before_low_watermark(void **state)
{
	struct fx *f = *state;
	struct row r = mk_row(1, "b1", "e1");
	struct sl_change ch = mk_change(f->t, SL_OP_UPDATE_INSERT, &r, 0x100, 1);

	open3(f);
	assert_int_equal(sl_bf_chunk_change(f->c, &ch), 0);
	assert_string_equal(rows_text(f->c, f->buf, sizeof f->buf), "1=b1/e1 2=a2/d2 3=a3/d3");
}

/* Below the job's marker (sl_bf_chunk_set_floor) nothing is applied: a
 * lagging stream reads, after the chunk opened, a change committed before
 * the job started (MariaDB: the transaction at the marker's position P,
 * CSN (P, n) under the marker's (P + 1, 0)), whose record the marker
 * clears; the chunk, read after it, keeps the key's row (soak seed 4408:
 * rows lost).  At or above the floor, and inside the window, changes
 * apply; a floor of 0 is none. */
static void test_change_below_the_marker(void **state)
{
	struct fx *f = *state;
	struct row r = mk_row(2, "b2", "e2"), d = mk_row(3, NULL, NULL), q = mk_row(1, "c1", "f1");
	struct sl_change up = mk_change(f->t, SL_OP_UPDATE_INSERT, &r, 0x100, 7);
	struct sl_change del = mk_change(f->t, SL_OP_DELETE, &d, 0x100, 8);
	struct sl_change tr = mk_change(f->t, SL_OP_TRUNCATE, NULL, 0x100, 9);
	struct sl_change at = mk_change(f->t, SL_OP_UPDATE_INSERT, &q, 0x101, 1);

	open3(f);
	sl_bf_chunk_set_floor(f->c, 0x101);
	assert_int_equal(sl_bf_chunk_change(f->c, &up), 0);
	assert_int_equal(sl_bf_chunk_change(f->c, &del), 0);
	assert_int_equal(sl_bf_chunk_change(f->c, &tr), 0);
	assert_int_equal(sl_bf_chunk_watermark(f->c, "s:r:1:low"), SL_BF_WM_LOW);
	assert_int_equal(sl_bf_chunk_applied(f->c), 0);
	assert_string_equal(rows_text(f->c, f->buf, sizeof f->buf), "1=a1/d1 2=a2/d2 3=a3/d3");
	assert_int_equal(sl_bf_chunk_change(f->c, &at), 0);
	assert_int_equal(sl_bf_chunk_applied(f->c), 1);
	assert_string_equal(rows_text(f->c, f->buf, sizeof f->buf), "1=c1/f1 2=a2/d2 3=a3/d3");

	open3(f);   /* a new chunk: no floor until set */
	assert_int_equal(sl_bf_chunk_change(f->c, &up), 0);
	assert_int_equal(sl_bf_chunk_applied(f->c), 1);
	assert_string_equal(rows_text(f->c, f->buf, sizeof f->buf), "1=a1/d1 2=b2/e2 3=a3/d3");
}

/* Outside the window (before the chunk opens, after its high watermark,
 * after it was abandoned) nothing is applied. */
static void test_outside_window(void **state)
{
	struct fx *f = *state;
	struct row r = mk_row(2, "b2", "e2"), d = mk_row(3, NULL, NULL);
	struct sl_change up = mk_change(f->t, SL_OP_UPDATE_INSERT, &r, 0x100, 1);
	struct sl_change del = mk_change(f->t, SL_OP_DELETE, &d, 0x200, 1);

	/* before: the chunk of another run, closed */
	assert_int_equal(sl_bf_chunk_change(f->c, &up), 0);
	open3(f);
	assert_int_equal(sl_bf_chunk_watermark(f->c, "s:r:1:low"), SL_BF_WM_LOW);
	assert_int_equal(sl_bf_chunk_watermark(f->c, "s:r:1:high"), SL_BF_WM_HIGH);
	assert_int_equal(sl_bf_chunk_change(f->c, &up), 0);
	assert_int_equal(sl_bf_chunk_change(f->c, &del), 0);
	assert_int_equal(sl_bf_chunk_applied(f->c), 0);
	assert_string_equal(rows_text(f->c, f->buf, sizeof f->buf), "1=a1/d1 2=a2/d2 3=a3/d3");

	open3(f);
	sl_bf_chunk_abandon(f->c);
	assert_int_equal(sl_bf_chunk_change(f->c, &del), 0);
	assert_int_equal(sl_bf_chunk_rows(f->c), 3);
}

/* A delete inside the window drops the key; an insert of a key the chunk
 * does not hold leaves it out (the stream writes it). */
static void test_delete_and_insert(void **state)
{
	struct fx *f = *state;
	struct row d = mk_row(1, NULL, NULL), i9 = mk_row(9, "new", "n"), i1 = mk_row(1, "again", "x");
	struct sl_change del = mk_change(f->t, SL_OP_DELETE, &d, 0x100, 1);
	struct sl_change ins9 = mk_change(f->t, SL_OP_INSERT, &i9, 0x100, 2);
	struct sl_change ins1 = mk_change(f->t, SL_OP_INSERT, &i1, 0x200, 1);

	open3(f);
	assert_int_equal(sl_bf_chunk_change(f->c, &del), 0);
	assert_int_equal(sl_bf_chunk_change(f->c, &ins9), 0);
	assert_int_equal(sl_bf_chunk_change(f->c, &ins1), 0);
	assert_string_equal(rows_text(f->c, f->buf, sizeof f->buf), "2=a2/d2 3=a3/d3");
	assert_int_equal(sl_bf_chunk_rows(f->c), 2);
}

/* An update that leaves a column out (PostgreSQL's unchanged TOAST value)
 * keeps the chunk's value of it. */
static void test_unchanged_columns(void **state)
{
	struct fx *f = *state;
	struct row r = mk_row(3, "b3", UNCHANGED);
	struct sl_change ch = mk_change(f->t, SL_OP_UPDATE_INSERT, &r, 0x100, 1);

	open3(f);
	assert_int_equal(sl_bf_chunk_change(f->c, &ch), 0);
	assert_string_equal(rows_text(f->c, f->buf, sizeof f->buf), "1=a1/d1 2=a2/d2 3=b3/d3");
}

/* A key change: UPDATE-DELETE of the old key, UPDATE-INSERT of the new one
 * at the next sequence number: the row moves, unchanged columns with it. */
static void test_key_change(void **state)
{
	struct fx *f = *state;
	struct row old = mk_row(2, NULL, NULL), nw = mk_row(20, "b20", UNCHANGED);
	struct sl_change ud = mk_change(f->t, SL_OP_UPDATE_DELETE, &old, 0x300, 4);
	struct sl_change ui = mk_change(f->t, SL_OP_UPDATE_INSERT, &nw, 0x300, 5);

	open3(f);
	assert_int_equal(sl_bf_chunk_change(f->c, &ud), 0);
	assert_int_equal(sl_bf_chunk_change(f->c, &ui), 0);
	assert_string_equal(rows_text(f->c, f->buf, sizeof f->buf), "1=a1/d1 3=a3/d3 20=b20/d2");
	/* and back: the old key is held again */
	{
		struct row o2 = mk_row(20, NULL, NULL), n2 = mk_row(2, "b2", UNCHANGED);
		struct sl_change ud2 = mk_change(f->t, SL_OP_UPDATE_DELETE, &o2, 0x400, 1);
		struct sl_change ui2 = mk_change(f->t, SL_OP_UPDATE_INSERT, &n2, 0x400, 2);
		assert_int_equal(sl_bf_chunk_change(f->c, &ud2), 0);
		assert_int_equal(sl_bf_chunk_change(f->c, &ui2), 0);
		assert_string_equal(rows_text(f->c, f->buf, sizeof f->buf), "1=a1/d1 2=b2/d2 3=a3/d3");
	}
}

/* A key change of a key the chunk does not hold brings nothing in; an
 * UPDATE-INSERT that does not follow the UPDATE-DELETE is no key change. */
static void test_key_change_of_other_key(void **state)
{
	struct fx *f = *state;
	struct row old = mk_row(7, NULL, NULL), nw = mk_row(8, "x", "y");
	struct row old2 = mk_row(1, NULL, NULL), nw2 = mk_row(11, "z", "w");
	struct sl_change ud = mk_change(f->t, SL_OP_UPDATE_DELETE, &old, 0x300, 1);
	struct sl_change ui = mk_change(f->t, SL_OP_UPDATE_INSERT, &nw, 0x300, 2);
	struct sl_change ud2 = mk_change(f->t, SL_OP_UPDATE_DELETE, &old2, 0x400, 1);
	struct sl_change ui2 = mk_change(f->t, SL_OP_UPDATE_INSERT, &nw2, 0x400, 3);

	open3(f);
	assert_int_equal(sl_bf_chunk_change(f->c, &ud), 0);
	assert_int_equal(sl_bf_chunk_change(f->c, &ui), 0);
	assert_int_equal(sl_bf_chunk_change(f->c, &ud2), 0);
	assert_int_equal(sl_bf_chunk_change(f->c, &ui2), 0);
	assert_string_equal(rows_text(f->c, f->buf, sizeof f->buf), "2=a2/d2 3=a3/d3");
}

/* TRUNCATE empties the chunk; changes of other tables are not applied. */
static void test_truncate_and_other_tables(void **state)
{
	struct fx *f = *state;
	struct row r = mk_row(1, "zz", "zz");
	struct sl_change other = mk_change(f->other, SL_OP_UPDATE_INSERT, &r, 0x100, 1);
	struct sl_change tr = mk_change(f->t, SL_OP_TRUNCATE, NULL, 0x200, 1);

	open3(f);
	assert_int_equal(sl_bf_chunk_change(f->c, &other), 0);
	assert_int_equal(sl_bf_chunk_applied(f->c), 0);
	assert_int_equal(sl_bf_chunk_change(f->c, &tr), 0);
	assert_int_equal(sl_bf_chunk_rows(f->c), 0);
	assert_int_equal(sl_bf_chunk_applied(f->c), 3);
}

/* Another version of the same table (same relation id) is the same table. */
static void test_same_table_other_version(void **state)
{
	struct fx *f = *state;
	struct sl_table *t2 = mk_table("t", 16384);
	struct row r = mk_row(1, "v2", "d2");
	struct sl_change ch = mk_change(t2, SL_OP_UPDATE_INSERT, &r, 0x100, 1);

	open3(f);
	assert_int_equal(sl_bf_chunk_change(f->c, &ch), 0);
	assert_string_equal(rows_text(f->c, f->buf, sizeof f->buf), "1=v2/d2 2=a2/d2 3=a3/d3");
	sl_table_free(t2);
}

/* Watermarks: others are not this chunk's; a high one before the low one
 * means the chunk must be read again; a key left out spoils the chunk. */
static void test_watermarks_and_spoiling(void **state)
{
	struct fx *f = *state;
	struct row r = mk_row(0, "x", "y");
	struct sl_change ch;

	open3(f);
	assert_int_equal(sl_bf_chunk_watermark(f->c, "s:r:0:high"), SL_BF_WM_OTHER);
	assert_int_equal(sl_bf_chunk_watermark(f->c, "other:r:1:low"), SL_BF_WM_OTHER);
	assert_int_equal(sl_bf_chunk_watermark(f->c, "s:r:1:high"), SL_BF_WM_BAD);
	assert_false(sl_bf_chunk_is_open(f->c));

	open3(f);
	assert_false(sl_bf_chunk_spoiled(f->c));
	r.v[0].kind = SL_V_UNCHANGED;
	ch = mk_change(f->t, SL_OP_UPDATE_INSERT, &r, 0x100, 1);
	assert_int_equal(sl_bf_chunk_change(f->c, &ch), 0);
	assert_true(sl_bf_chunk_spoiled(f->c));
}

/* Many rows, many changes: the index grows and finds every key. */
static void test_many_rows(void **state)
{
	struct fx *f = *state;
	char v[32];

	assert_int_equal(sl_bf_chunk_open(f->c, f->t, "l", "h"), 0);
	for (int i = 0; i < 20000; i++) {
		struct row r;
		snprintf(v, sizeof v, "v%d", i);
		r = mk_row(i, v, "d");
		assert_int_equal(sl_bf_chunk_add(f->c, r.v), 0);
	}
	for (int i = 0; i < 20000; i += 2) {
		struct row r = mk_row(i, NULL, NULL);
		struct sl_change ch = mk_change(f->t, SL_OP_DELETE, &r, 0x100 + (uint64_t)i, 1);
		assert_int_equal(sl_bf_chunk_change(f->c, &ch), 0);
	}
	assert_int_equal(sl_bf_chunk_rows(f->c), 10000);
	assert_int_equal(sl_bf_chunk_applied(f->c), 10000);
	{
		const struct sl_value *vals;
		size_t it = 0;
		int64_t expect = 1;
		while (sl_bf_chunk_next(f->c, &it, &vals)) {
			assert_int_equal(vals[0].i, expect);
			snprintf(v, sizeof v, "v%lld", (long long)expect);
			assert_int_equal(vals[1].len, strlen(v));
			assert_memory_equal(vals[1].p, v, vals[1].len);
			expect += 2;
		}
		assert_int_equal(expect, 20001);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_rows_as_read, setup, teardown),
		cmocka_unit_test_setup_teardown(test_update_inside_window, setup, teardown),
		cmocka_unit_test_setup_teardown(test_change_before_low_watermark, setup, teardown),
		cmocka_unit_test_setup_teardown(test_outside_window, setup, teardown),
		cmocka_unit_test_setup_teardown(test_change_below_the_marker, setup, teardown),
		cmocka_unit_test_setup_teardown(test_delete_and_insert, setup, teardown),
		cmocka_unit_test_setup_teardown(test_unchanged_columns, setup, teardown),
		cmocka_unit_test_setup_teardown(test_key_change, setup, teardown),
		cmocka_unit_test_setup_teardown(test_key_change_of_other_key, setup, teardown),
		cmocka_unit_test_setup_teardown(test_truncate_and_other_tables, setup, teardown),
		cmocka_unit_test_setup_teardown(test_same_table_other_version, setup, teardown),
		cmocka_unit_test_setup_teardown(test_watermarks_and_spoiling, setup, teardown),
		cmocka_unit_test_setup_teardown(test_many_rows, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
