/*
 * tests/unit/test_core.c: unit tests for common/, schema/ (typed values and
 * their canonical key bytes included), the pgoutput decoder with its typed
 * values, the COPY text decoder and the checkpoint store.  pgoutput messages
 * are built here by a small encoder that follows the protocol documentation,
 * so the decoder is checked against the documented layout, not against itself.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <limits.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "agent/checkpoint.h"
#include "sources/postgres/pg_backfill.h"
#include "sources/postgres/pg_internal.h"
#include "common/buf.h"
#include "common/keyslots.h"
#include "common/util.h"
#include "schema/schema.h"
#include "sources/postgres/pgoutput.h"

/* ---- a pgoutput message writer for the tests ---- */
static void w8(struct sl_buf *b, uint8_t v) { sl_buf_append(b, &v, 1); }
static void w16(struct sl_buf *b, uint16_t v) { unsigned char p[2] = { v >> 8, v & 0xff }; sl_buf_append(b, p, 2); }
static void w32(struct sl_buf *b, uint32_t v) { unsigned char p[4]; sl_put_u32(p, v); sl_buf_append(b, p, 4); }
static void w64(struct sl_buf *b, uint64_t v) { unsigned char p[8]; sl_put_u64(p, v); sl_buf_append(b, p, 8); }
static void wstr(struct sl_buf *b, const char *s) { sl_buf_append(b, s, strlen(s) + 1); }
/* A tuple from an array of strings; NULL is 'n', "\x01" is 'u'. */
static void wtuple(struct sl_buf *b, int n, const char *const *vals)
{
	w16(b, (uint16_t)n);
	for (int i = 0; i < n; i++) {
		if (!vals[i]) {
			w8(b, 'n');
		} else if (!strcmp(vals[i], "\x01")) {
			w8(b, 'u');
		} else {
			w8(b, 't');
			w32(b, (uint32_t)strlen(vals[i]));
			sl_buf_append(b, vals[i], strlen(vals[i]));
		}
	}
}

static int decode(struct sl_pgoutput *d, struct sl_buf *b, struct sl_pgo_event *ev)
{
	char err[256] = "";
	int rc = sl_pgoutput_decode(d, (unsigned char *)b->data, b->len, ev, err, sizeof err);
	if (rc < 0)
		print_message("decode error: %s\n", err);
	return rc;
}

static void build_relation(struct sl_buf *b, uint32_t relid, const char *ns, const char *name)
{
	sl_buf_reset(b);
	w8(b, 'R');
	w32(b, relid);
	wstr(b, ns);
	wstr(b, name);
	w8(b, 'd');
	w16(b, 3);
	w8(b, 1); wstr(b, "id"); w32(b, 23); w32(b, (uint32_t)-1);
	w8(b, 0); wstr(b, "amount"); w32(b, 1700); w32(b, ((12 << 16) | 2) + 4);
	w8(b, 0); wstr(b, "note"); w32(b, 25); w32(b, (uint32_t)-1);
}

/* Begin and Commit messages whose timestamp is PostgreSQL's 'infinity'
 * (INT64_MAX; found by tests/fuzz/fuzz_pgoutput): moving it to the Unix
 * epoch overflowed; it stays the largest time there is. */
static void test_pgoutput_infinite_commit_time(void **state)
{
	struct sl_pgoutput *d = sl_pgoutput_new(NULL, NULL);
	struct sl_pgo_event ev;
	struct sl_buf b;

	(void)state;
	sl_buf_init(&b, 0);
	w8(&b, 'B');
	w64(&b, 0x16E75D0);
	w64(&b, (uint64_t)INT64_MAX);
	w32(&b, 777);
	assert_int_equal(decode(d, &b, &ev), 0);
	assert_int_equal(ev.kind, SL_PGO_BEGIN);
	assert_true(ev.commit_ts_us == INT64_MAX);
	sl_buf_reset(&b);
	w8(&b, 'C');
	w8(&b, 0);
	w64(&b, 0x16E75D0);
	w64(&b, 0x16E7600);
	w64(&b, (uint64_t)INT64_MAX - 1);
	assert_int_equal(decode(d, &b, &ev), 0);
	assert_int_equal(ev.kind, SL_PGO_COMMIT);
	assert_true(ev.commit_ts_us == INT64_MAX);
	/* the last one that has a Unix time */
	sl_buf_reset(&b);
	w8(&b, 'C');
	w8(&b, 0);
	w64(&b, 0x16E75D0);
	w64(&b, 0x16E7600);
	w64(&b, (uint64_t)(INT64_MAX - SL_PG_EPOCH_OFFSET_US));
	assert_int_equal(decode(d, &b, &ev), 0);
	assert_true(ev.commit_ts_us == INT64_MAX);
	sl_buf_free(&b);
	sl_pgoutput_free(d);
}

static void test_pgoutput_transaction(void **state)
{
	struct sl_pgoutput *d = sl_pgoutput_new(NULL, NULL);
	struct sl_pgo_event ev;
	struct sl_change c;
	struct sl_buf b;
	const char *row1[] = { "1", "10.50", "hello" };
	const char *key_old[] = { "1", NULL, NULL };
	const char *row2[] = { "2", "-3.25", "\x01" };
	(void)state;

	sl_buf_init(&b, 0);
	build_relation(&b, 16384, "public", "t");
	assert_int_equal(decode(d, &b, &ev), 0);
	assert_int_equal(ev.kind, SL_PGO_RELATION);
	assert_string_equal(ev.table->object, "public_t");
	assert_int_equal(ev.table->ncols, 3);
	assert_int_equal(ev.table->cols[1].type, SL_T_DECIMAL);
	assert_int_equal(ev.table->cols[1].precision, 12);
	assert_int_equal(ev.table->cols[1].scale, 2);
	assert_true(ev.table->cols[0].is_key);
	assert_false(ev.schema_changed);
	assert_int_equal(ev.table->cols[1].src_type, 1700);
	assert_int_equal(ev.table->cols[1].src_typmod, ((12 << 16) | 2) + 4);
	/* the schema key of this column list, as sluice has always computed it */
	assert_string_equal(ev.table->schema_key, "8e8fd44dd575fe00");

	sl_buf_reset(&b);
	w8(&b, 'B');
	w64(&b, 0x16E75D0);
	w64(&b, 1000000); /* 1 s after 2000-01-01 */
	w32(&b, 777);
	assert_int_equal(decode(d, &b, &ev), 0);
	assert_int_equal(ev.kind, SL_PGO_BEGIN);
	assert_int_equal(ev.xid, 777);
	assert_true(ev.commit_ts_us == INT64_C(946684801000000));

	sl_buf_reset(&b);
	w8(&b, 'I'); w32(&b, 16384); w8(&b, 'N'); wtuple(&b, 3, row1);
	assert_int_equal(decode(d, &b, &ev), 0);
	assert_int_equal(ev.kind, SL_PGO_CHANGE);
	assert_int_equal(ev.nchanges, 1);
	assert_int_equal(ev.changes[0].op, SL_OP_INSERT);
	assert_true(ev.changes[0].csn_pos == UINT64_C(0x16E75D0));  /* the LSN of the commit */
	assert_int_equal(ev.changes[0].seq, 1);
	assert_int_equal(ev.changes[0].tx_id, 777);
	/* typed values: 1, 10.50 (digits 1050 at scale 2), "hello" */
	assert_int_equal(ev.changes[0].values[0].kind, SL_V_INT);
	assert_true(ev.changes[0].values[0].i == 1);
	assert_int_equal(ev.changes[0].values[1].kind, SL_V_DECIMAL);
	assert_int_equal(ev.changes[0].values[1].len, 4);
	assert_memory_equal(ev.changes[0].values[1].p, "1050", 4);
	assert_int_equal(ev.changes[0].values[1].scale, 2);
	assert_false(ev.changes[0].values[1].neg);
	assert_int_equal(ev.changes[0].values[2].kind, SL_V_STRING);
	assert_int_equal(ev.changes[0].values[2].len, 5);
	assert_memory_equal(ev.changes[0].values[2].p, "hello", 5);
	assert_string_equal(ev.changes[0].read_method, "postgresql-cdc-wal");

	/* An update that changes the key: UPDATE-DELETE (old key), then UPDATE-INSERT. */
	sl_buf_reset(&b);
	w8(&b, 'U'); w32(&b, 16384); w8(&b, 'K'); wtuple(&b, 3, key_old); w8(&b, 'N'); wtuple(&b, 3, row2);
	assert_int_equal(decode(d, &b, &ev), 0);
	assert_int_equal(ev.nchanges, 2);
	assert_int_equal(ev.changes[0].op, SL_OP_UPDATE_DELETE);
	assert_true(ev.changes[0].csn_pos == UINT64_C(0x16E75D0));
	assert_int_equal(ev.changes[0].seq, 2);
	assert_int_equal(ev.changes[0].values[0].kind, SL_V_INT);
	assert_true(ev.changes[0].values[0].i == 1);
	assert_int_equal(ev.changes[0].values[1].kind, SL_V_NULL);
	assert_int_equal(ev.changes[1].op, SL_OP_UPDATE_INSERT);
	assert_true(ev.changes[1].csn_pos == UINT64_C(0x16E75D0));
	assert_int_equal(ev.changes[1].seq, 3);
	assert_true(ev.changes[1].values[0].i == 2);
	assert_int_equal(ev.changes[1].values[1].kind, SL_V_DECIMAL);
	assert_true(ev.changes[1].values[1].neg);
	assert_memory_equal(ev.changes[1].values[1].p, "325", 3);
	assert_int_equal(ev.changes[1].values[2].kind, SL_V_UNCHANGED);

	/* An update without an old tuple: one UPDATE-INSERT. */
	sl_buf_reset(&b);
	w8(&b, 'U'); w32(&b, 16384); w8(&b, 'N'); wtuple(&b, 3, row1);
	assert_int_equal(decode(d, &b, &ev), 0);
	assert_int_equal(ev.nchanges, 1);
	assert_int_equal(ev.changes[0].op, SL_OP_UPDATE_INSERT);

	sl_buf_reset(&b);
	w8(&b, 'D'); w32(&b, 16384); w8(&b, 'K'); wtuple(&b, 3, key_old);
	assert_int_equal(decode(d, &b, &ev), 0);
	assert_int_equal(ev.changes[0].op, SL_OP_DELETE);
	assert_true(ev.changes[0].csn_pos == UINT64_C(0x16E75D0));
	assert_int_equal(ev.changes[0].seq, 5);

	sl_buf_reset(&b);
	w8(&b, 'T'); w32(&b, 1); w8(&b, 0); w32(&b, 16384);
	assert_int_equal(decode(d, &b, &ev), 0);
	assert_int_equal(ev.kind, SL_PGO_CHANGE);
	assert_int_equal(ev.nchanges, 0);
	assert_int_equal(sl_pgoutput_truncate_next(d, &c), 1);
	assert_int_equal(c.op, SL_OP_TRUNCATE);
	assert_null(c.values);
	assert_true(c.csn_pos == UINT64_C(0x16E75D0));
	assert_int_equal(c.seq, 6);
	assert_int_equal(sl_pgoutput_truncate_next(d, &c), 0);

	sl_buf_reset(&b);
	w8(&b, 'C'); w8(&b, 0); w64(&b, 0x16E75D0); w64(&b, 0x16E7600); w64(&b, 2000000);
	assert_int_equal(decode(d, &b, &ev), 0);
	assert_int_equal(ev.kind, SL_PGO_COMMIT);
	assert_true(ev.end_lsn == 0x16E7600);
	assert_false(sl_pgoutput_in_tx(d));

	sl_buf_free(&b);
	sl_pgoutput_free(d);
}

/* Typed values in decoded changes: unchanged TOAST values filled from a full
 * old row (pointing into the old tuple's own memory), keys compared as
 * values, decimal NaN counted, and text that does not convert refused. */
static void test_pgoutput_typed(void **state)
{
	struct sl_pgoutput *d = sl_pgoutput_new(NULL, NULL);
	struct sl_pgo_event ev;
	struct sl_buf b;
	char err[256];
	const char *old_full[] = { "1", "-10.50", "hello" };
	const char *new_toast[] = { "1", "\x01", "\x01" };
	const char *old_key[] = { "1", NULL, NULL };
	const char *new_same_key[] = { "+1", "2", "x" };
	const char *new_other_key[] = { "2", "2", "x" };
	const char *nan_row[] = { "3", "NaN", "n" };
	const char *bad_row[] = { "x", "1", "n" };
	const struct sl_value *v;
	(void)state;

	sl_buf_init(&b, 0);
	build_relation(&b, 16384, "public", "t");
	assert_int_equal(decode(d, &b, &ev), 0);
	sl_buf_reset(&b);
	w8(&b, 'B'); w64(&b, 0x100); w64(&b, 1); w32(&b, 5);
	assert_int_equal(decode(d, &b, &ev), 0);

	/* REPLICA IDENTITY FULL: the old row is whole, the new one leaves two
	 * TOASTed columns out; they take the old row's values. */
	sl_buf_reset(&b);
	w8(&b, 'U'); w32(&b, 16384); w8(&b, 'O'); wtuple(&b, 3, old_full); w8(&b, 'N'); wtuple(&b, 3, new_toast);
	assert_int_equal(decode(d, &b, &ev), 0);
	assert_int_equal(ev.nchanges, 1);
	assert_int_equal(ev.changes[0].op, SL_OP_UPDATE_INSERT);
	v = ev.changes[0].values;
	assert_true(v[0].kind == SL_V_INT && v[0].i == 1);
	assert_int_equal(v[1].kind, SL_V_DECIMAL);
	assert_true(v[1].neg);
	assert_int_equal(v[1].len, 4);
	assert_memory_equal(v[1].p, "1050", 4);
	assert_int_equal(v[2].kind, SL_V_STRING);
	assert_int_equal(v[2].len, 5);
	assert_memory_equal(v[2].p, "hello", 5);

	/* The key is compared as a value: "+1" is 1, so no UPDATE-DELETE. */
	sl_buf_reset(&b);
	w8(&b, 'U'); w32(&b, 16384); w8(&b, 'K'); wtuple(&b, 3, old_key); w8(&b, 'N'); wtuple(&b, 3, new_same_key);
	assert_int_equal(decode(d, &b, &ev), 0);
	assert_int_equal(ev.nchanges, 1);
	assert_int_equal(ev.changes[0].op, SL_OP_UPDATE_INSERT);
	assert_memory_equal(ev.changes[0].values[1].p, "200", 3);  /* 2 at scale 2 */
	sl_buf_reset(&b);
	w8(&b, 'U'); w32(&b, 16384); w8(&b, 'K'); wtuple(&b, 3, old_key); w8(&b, 'N'); wtuple(&b, 3, new_other_key);
	assert_int_equal(decode(d, &b, &ev), 0);
	assert_int_equal(ev.nchanges, 2);
	assert_int_equal(ev.changes[0].op, SL_OP_UPDATE_DELETE);
	assert_true(ev.changes[0].values[0].i == 1);
	assert_true(ev.changes[1].values[0].i == 2);

	/* NaN in numeric(12,2) is null, and counted. */
	assert_true(sl_pgoutput_text_stats(d)->decimal_nan_nulls == 0);
	sl_buf_reset(&b);
	w8(&b, 'I'); w32(&b, 16384); w8(&b, 'N'); wtuple(&b, 3, nan_row);
	assert_int_equal(decode(d, &b, &ev), 0);
	assert_int_equal(ev.changes[0].values[1].kind, SL_V_NULL);
	assert_true(sl_pgoutput_text_stats(d)->decimal_nan_nulls == 1);

	/* Text that does not convert stops the decoding for good (not a
	 * retryable failure), naming the table, the LSN and the column. */
	sl_buf_reset(&b);
	w8(&b, 'I'); w32(&b, 16384); w8(&b, 'N'); wtuple(&b, 3, bad_row);
	assert_int_equal(sl_pgoutput_decode(d, (unsigned char *)b.data, b.len, &ev, err, sizeof err),
			 SL_PGO_EVALUE);
	assert_non_null(strstr(err, ": column \"id\": invalid integer value \"x\""));
	sl_buf_reset(&b);
	w8(&b, 'D'); w32(&b, 16384); w8(&b, 'O'); wtuple(&b, 3, bad_row);
	assert_int_equal(sl_pgoutput_decode(d, (unsigned char *)b.data, b.len, &ev, err, sizeof err),
			 SL_PGO_EVALUE);
	assert_non_null(strstr(err, ": column \"id\": invalid integer value \"x\""));

	sl_buf_free(&b);
	sl_pgoutput_free(d);
}

static void test_pgoutput_schema_change(void **state)
{
	struct sl_pgoutput *d = sl_pgoutput_new(NULL, NULL);
	struct sl_pgo_event ev;
	struct sl_buf b;
	char key1[17];
	(void)state;

	sl_buf_init(&b, 0);
	build_relation(&b, 5, "s", "t");
	assert_int_equal(decode(d, &b, &ev), 0);
	memcpy(key1, ev.table->schema_key, sizeof key1);
	/* The same relation again: no change. */
	assert_int_equal(decode(d, &b, &ev), 0);
	assert_false(ev.schema_changed);
	assert_string_equal(ev.table->schema_key, key1);
	/* One more column: a new version with another schema key. */
	sl_buf_reset(&b);
	w8(&b, 'R'); w32(&b, 5); wstr(&b, "s"); wstr(&b, "t"); w8(&b, 'd'); w16(&b, 1);
	w8(&b, 1); wstr(&b, "id"); w32(&b, 20); w32(&b, (uint32_t)-1);
	assert_int_equal(decode(d, &b, &ev), 0);
	assert_true(ev.schema_changed);
	assert_string_not_equal(ev.table->schema_key, key1);
	assert_int_equal(ev.table->cols[0].type, SL_T_INT64);
	/* The old version goes to the caller, who frees it once nothing uses it:
	 * the decoder keeps only current versions, so memory stays bounded. */
	assert_non_null(ev.retired);
	assert_string_equal(ev.retired->schema_key, key1);
	assert_true(ev.retired != ev.table);
	sl_table_free(ev.retired);
	/* The same new version again: nothing retired. */
	assert_int_equal(decode(d, &b, &ev), 0);
	assert_false(ev.schema_changed);
	assert_null(ev.retired);
	sl_buf_free(&b);
	sl_pgoutput_free(d);
}

static void begin_tx(struct sl_pgoutput *d, struct sl_buf *b, uint64_t final_lsn)
{
	struct sl_pgo_event ev;

	sl_buf_reset(b);
	w8(b, 'B'); w64(b, final_lsn); w64(b, 1000000); w32(b, 9);
	assert_int_equal(decode(d, b, &ev), 0);
}

/* Decodes a change message of b and checks its kind, and the sequence
 * number of its last change when it is kept (seq not 0). */
static void change_seq(struct sl_pgoutput *d, struct sl_buf *b, enum sl_pgo_kind kind, uint32_t seq)
{
	struct sl_pgo_event ev;

	assert_int_equal(decode(d, b, &ev), 0);
	assert_int_equal(ev.kind, kind);
	if (kind == SL_PGO_CHANGE)
		assert_int_equal(ev.changes[ev.nchanges - 1].seq, seq);
	else
		assert_int_equal(ev.nchanges, 0);
}

/* sl_pgoutput_drop_below: the marked relation's changes of transactions
 * committed below the mark are decoded (each takes its sequence number, so
 * that the changes kept keep theirs) and dropped, TRUNCATE included; at
 * or above it they are kept; the mark lasts while the version does, and a
 * Relation message under another name starts a version without it. */
static void test_pgoutput_drop_below(void **state)
{
	struct sl_pgoutput *d = sl_pgoutput_new(NULL, NULL);
	struct sl_pgo_event ev;
	struct sl_change c;
	struct sl_buf b;
	const char *row[] = { "1", "1.00", "x" };
	const char *key[] = { "1", NULL, NULL };
	const char *row2[] = { "2", "1.00", "x" };
	(void)state;

	sl_buf_init(&b, 0);
	build_relation(&b, 10, "public", "t");
	assert_int_equal(decode(d, &b, &ev), 0);
	build_relation(&b, 11, "public", "u");
	assert_int_equal(decode(d, &b, &ev), 0);
	sl_pgoutput_drop_below(d, 10, 0x2000);

	begin_tx(d, &b, 0x1FFF);
	sl_buf_reset(&b);
	w8(&b, 'I'); w32(&b, 10); w8(&b, 'N'); wtuple(&b, 3, row);
	change_seq(d, &b, SL_PGO_NONE, 0);                            /* seq 1, dropped */
	b.data[4] = 11;                                               /* the same insert into u */
	change_seq(d, &b, SL_PGO_CHANGE, 2);
	sl_buf_reset(&b);
	w8(&b, 'U'); w32(&b, 10); w8(&b, 'K'); wtuple(&b, 3, key); w8(&b, 'N'); wtuple(&b, 3, row2);
	change_seq(d, &b, SL_PGO_NONE, 0);                            /* seqs 3 and 4 */
	sl_buf_reset(&b);
	w8(&b, 'D'); w32(&b, 10); w8(&b, 'K'); wtuple(&b, 3, key);
	change_seq(d, &b, SL_PGO_NONE, 0);                            /* seq 5 */
	b.data[4] = 11;
	change_seq(d, &b, SL_PGO_CHANGE, 6);
	sl_buf_reset(&b);
	w8(&b, 'T'); w32(&b, 2); w8(&b, 0); w32(&b, 10); w32(&b, 11);
	assert_int_equal(decode(d, &b, &ev), 0);
	assert_int_equal(sl_pgoutput_truncate_next(d, &c), 1);       /* t's took seq 7 */
	assert_true(c.table == sl_pgoutput_table(d, 11));
	assert_int_equal(c.seq, 8);
	assert_int_equal(sl_pgoutput_truncate_next(d, &c), 0);

	begin_tx(d, &b, 0x2000);   /* committed at the mark: kept */
	sl_buf_reset(&b);
	w8(&b, 'I'); w32(&b, 10); w8(&b, 'N'); wtuple(&b, 3, row);
	change_seq(d, &b, SL_PGO_CHANGE, 1);

	/* Every change; kept by a Relation message of the same version... */
	sl_pgoutput_drop_below(d, 10, UINT64_MAX);
	build_relation(&b, 10, "public", "t");
	assert_int_equal(decode(d, &b, &ev), 0);
	begin_tx(d, &b, 0x9000);
	sl_buf_reset(&b);
	w8(&b, 'I'); w32(&b, 10); w8(&b, 'N'); wtuple(&b, 3, row);
	change_seq(d, &b, SL_PGO_NONE, 0);
	/* ...not by one of another name (a new version, decided on again) */
	build_relation(&b, 10, "public", "t2");
	assert_int_equal(decode(d, &b, &ev), 0);
	assert_true(ev.schema_changed);
	sl_table_free(ev.retired);
	sl_buf_reset(&b);
	w8(&b, 'I'); w32(&b, 10); w8(&b, 'N'); wtuple(&b, 3, row);
	change_seq(d, &b, SL_PGO_CHANGE, 2);
	sl_buf_free(&b);
	sl_pgoutput_free(d);
}

/* A value whose text does not convert is SL_PGO_EVALUE (not retried),
 * with a message naming the table, the commit LSN, the column and the
 * value. */
static void test_pgoutput_bad_value(void **state)
{
	struct sl_pgoutput *d = sl_pgoutput_new(NULL, NULL);
	struct sl_pgo_event ev;
	struct sl_buf b;
	char err[512] = "";
	const char *row[] = { "1", "10.505", "x" };   /* amount is numeric(12,2) */
	(void)state;

	sl_buf_init(&b, 0);
	build_relation(&b, 5, "shop", "orders");
	assert_int_equal(decode(d, &b, &ev), 0);
	sl_buf_reset(&b);
	w8(&b, 'B'); w64(&b, UINT64_C(0x16B374D8)); w64(&b, 1); w32(&b, 9);
	assert_int_equal(decode(d, &b, &ev), 0);
	sl_buf_reset(&b);
	w8(&b, 'I'); w32(&b, 5); w8(&b, 'N'); wtuple(&b, 3, row);
	assert_int_equal(sl_pgoutput_decode(d, (unsigned char *)b.data, b.len, &ev, err, sizeof err),
			 SL_PGO_EVALUE);
	assert_non_null(strstr(err, "table \"shop\".\"orders\""));
	assert_non_null(strstr(err, "LSN 0/16B374D8"));
	assert_non_null(strstr(err, "column \"amount\""));
	assert_non_null(strstr(err, "10.505"));
	sl_buf_free(&b);
	sl_pgoutput_free(d);
}

static void test_pgoutput_malformed(void **state)
{
	struct sl_pgoutput *d = sl_pgoutput_new(NULL, NULL);
	struct sl_pgo_event ev;
	struct sl_buf b;
	char err[256];
	(void)state;

	sl_buf_init(&b, 0);
	/* Every prefix of a valid relation message is rejected, none crashes. */
	build_relation(&b, 5, "s", "t");
	for (size_t n = 0; n < b.len; n++)
		assert_int_equal(sl_pgoutput_decode(d, (unsigned char *)b.data, n, &ev, err, sizeof err), -1);
	/* A change for an unknown relation. */
	sl_buf_reset(&b);
	w8(&b, 'B'); w64(&b, 1); w64(&b, 1); w32(&b, 1);
	assert_int_equal(decode(d, &b, &ev), 0);
	sl_buf_reset(&b);
	w8(&b, 'I'); w32(&b, 99); w8(&b, 'N'); w16(&b, 0);
	assert_int_equal(sl_pgoutput_decode(d, (unsigned char *)b.data, b.len, &ev, err, sizeof err), -1);
	assert_string_equal(err, "change for relation 99 that no relation message described");
	/* An unknown message type. */
	assert_int_equal(sl_pgoutput_decode(d, (unsigned char *)"Z", 1, &ev, err, sizeof err), -1);
	assert_string_equal(err, "unsupported pgoutput message type 'Z' (0x5a)");
	sl_buf_free(&b);
	sl_pgoutput_free(d);
}

/* Random mutations of valid messages: the decoder must return 0 or -1 and
 * never read out of bounds (run under --enable-sanitizers to see that). */
static void test_pgoutput_mutations(void **state)
{
	struct sl_buf msgs[6], m;
	const char *row[] = { "1", "2.50", "x" };
	unsigned seed = 12345;
	char err[256];
	int ok = 0;
	(void)state;

	for (int i = 0; i < 6; i++)
		sl_buf_init(&msgs[i], 0);
	sl_buf_init(&m, 0);
	build_relation(&msgs[0], 7, "public", "t");
	w8(&msgs[1], 'B'); w64(&msgs[1], 100); w64(&msgs[1], 1); w32(&msgs[1], 9);
	w8(&msgs[2], 'I'); w32(&msgs[2], 7); w8(&msgs[2], 'N'); wtuple(&msgs[2], 3, row);
	w8(&msgs[3], 'U'); w32(&msgs[3], 7); w8(&msgs[3], 'O'); wtuple(&msgs[3], 3, row);
	w8(&msgs[3], 'N'); wtuple(&msgs[3], 3, row);
	w8(&msgs[4], 'T'); w32(&msgs[4], 2); w8(&msgs[4], 0); w32(&msgs[4], 7); w32(&msgs[4], 7);
	w8(&msgs[5], 'M'); w8(&msgs[5], 1); w64(&msgs[5], 5); wstr(&msgs[5], "p"); w32(&msgs[5], 2);
	sl_buf_append(&msgs[5], "hi", 2);

	for (int iter = 0; iter < 200000; iter++) {
		struct sl_pgoutput *d = sl_pgoutput_new(NULL, NULL);
		struct sl_pgo_event ev;
		struct sl_change c;
		/* a relation and a begin first, so changes reach the tuple parser */
		assert_int_equal(decode(d, &msgs[0], &ev), 0);
		assert_int_equal(decode(d, &msgs[1], &ev), 0);
		const struct sl_buf *src = &msgs[rand_r(&seed) % 6];
		sl_buf_reset(&m);
		sl_buf_append(&m, src->data, src->len);
		int nmut = 1 + rand_r(&seed) % 4;
		for (int k = 0; k < nmut && m.len > 0; k++) {
			size_t at = (size_t)rand_r(&seed) % m.len;
			switch (rand_r(&seed) % 3) {
			case 0: m.data[at] = (char)rand_r(&seed); break;      /* flip a byte */
			case 1: m.len = at; break;                             /* truncate */
			default: m.data[at] = (char)0xff; break;               /* huge lengths */
			}
		}
		int rc = sl_pgoutput_decode(d, (unsigned char *)m.data, m.len, &ev, err, sizeof err);
		assert_true(rc == 0 || rc == -1 || rc == SL_PGO_EVALUE);
		if (rc == 0) {
			ok++;
			if (ev.kind == SL_PGO_CHANGE && ev.nchanges == 0)
				while (sl_pgoutput_truncate_next(d, &c) == 1)
					assert_int_equal(c.op, SL_OP_TRUNCATE);
			if (ev.kind == SL_PGO_RELATION)
				sl_table_free(ev.retired);  /* the caller's, once handed out */
		}
		sl_pgoutput_free(d);
	}
	assert_true(ok > 0);
	for (int i = 0; i < 6; i++)
		sl_buf_free(&msgs[i]);
	sl_buf_free(&m);
}

static void test_copy_text_row(void **state)
{
	char row[] = "1\t\\N\ta\\tb\\\\c\\nd\t\\x41\\101\t\t\\N\n";
	struct sl_text_value v[6];
	char bad[] = "1\t2\n";
	(void)state;

	assert_int_equal(sl_copy_text_row(row, strlen(row), v, 6), 0);
	assert_int_equal(v[0].kind, SL_TV_TEXT);
	assert_memory_equal(v[0].p, "1", 1);
	assert_int_equal(v[1].kind, SL_TV_NULL);
	assert_int_equal(v[2].len, 7);
	assert_memory_equal(v[2].p, "a\tb\\c\nd", 7);
	assert_int_equal(v[3].len, 2);
	assert_memory_equal(v[3].p, "AA", 2);
	assert_int_equal(v[4].kind, SL_TV_TEXT);
	assert_int_equal(v[4].len, 0);
	assert_int_equal(v[5].kind, SL_TV_NULL);
	assert_int_equal(sl_copy_text_row(bad, strlen(bad), v, 3), -1);
	/* \N after other bytes is an N; a backslash that ends the row is kept;
	 * a field without escapes before one with them */
	{
		char r2[] = "plain\tab\\Ncd\tx\\\n";
		assert_int_equal(sl_copy_text_row(r2, strlen(r2), v, 3), 0);
		assert_int_equal(v[0].len, 5);
		assert_memory_equal(v[0].p, "plain", 5);
		assert_int_equal(v[1].len, 5);
		assert_memory_equal(v[1].p, "abNcd", 5);
		assert_int_equal(v[2].len, 2);
		assert_memory_equal(v[2].p, "x\\", 2);
	}
}

static void test_csn_and_lsn(void **state)
{
	char csn[SL_CSN_LEN + 1], lsn[18];
	uint64_t v;
	(void)state;

	sl_csn_format(csn, 0x16E75D0, 1);
	assert_string_equal(csn, "00000000016E75D0-0000000001");
	sl_csn_format(csn, UINT64_MAX, UINT32_MAX);
	assert_string_equal(csn, "FFFFFFFFFFFFFFFF-4294967295");
	assert_int_equal(strlen(csn), SL_CSN_LEN);
	sl_lsn_format(UINT64_C(0x16B374D848), lsn);
	assert_string_equal(lsn, "16/B374D848");
	assert_int_equal(sl_lsn_parse("16/B374D848", &v), 0);
	assert_true(v == UINT64_C(0x16B374D848));
	assert_int_equal(sl_lsn_parse("0/0", &v), 0);
	assert_true(v == 0);
	assert_int_equal(sl_lsn_parse("16B374D848", &v), -1);
	assert_int_equal(sl_lsn_parse("1/", &v), -1);
	assert_int_equal(sl_lsn_parse("1/2x", &v), -1);
	assert_int_equal(sl_lsn_parse("100000000/0", &v), -1);
}

static void test_uuid_deterministic(void **state)
{
	struct sl_table *t = sl_table_new("public", "t");
	struct sl_change a, b;
	char s[37];
	(void)state;

	assert_non_null(t);
	assert_int_equal(sl_table_add_column(t, "id", SL_T_INT32, 0, 0, 23, -1, "integer", true), 0);
	assert_int_equal(sl_table_finish(t), 0);
	memset(&a, 0, sizeof a);
	a.table = t;
	sl_csn_format(a.csn, 0x10, 1);
	b = a;
	sl_change_set_uuid(&a, "s1", NULL, 0);
	sl_change_set_uuid(&b, "s1", NULL, 0);
	assert_memory_equal(a.uuid, b.uuid, 16);
	assert_int_equal(a.uuid[6] >> 4, 5);     /* version 5 */
	assert_int_equal(a.uuid[8] & 0xc0, 0x80); /* RFC 4122 variant */
	/* Expected values from Python's uuid.uuid5 (an independent implementation)
	 * with namespace 6b1e3c52-8f0d-4a3e-9c57-2d410b7e55c1. */
	static const unsigned char want1[16] = { 0xdb, 0x2f, 0xbc, 0xaa, 0x76, 0xf9, 0x5a, 0xfc,
						 0xa2, 0x59, 0x27, 0x5e, 0x5d, 0xbe, 0xdb, 0x78 };
	static const unsigned char want2[16] = { 0xb7, 0xa3, 0x70, 0x29, 0x18, 0x27, 0x52, 0xc4,
						 0xb2, 0x2e, 0xd8, 0x38, 0xe6, 0x5e, 0x08, 0x10 };
	assert_memory_equal(a.uuid, want1, 16);
	sl_csn_format(b.csn, 0x10, 0);
	sl_change_set_uuid(&b, "s1", "1:1", 3);
	assert_memory_equal(b.uuid, want2, 16);
	sl_csn_format(b.csn, 0x10, 1);
	sl_change_set_uuid(&b, "s2", NULL, 0);
	assert_memory_not_equal(a.uuid, b.uuid, 16);
	sl_change_set_uuid(&b, "s1", "1:1", 3);
	assert_memory_not_equal(a.uuid, b.uuid, 16);
	/* Names that fill the 512-byte buffer exactly (extra 472 bytes), one
	 * byte more (hashed in pieces), and far more: Python's values too. */
	{
		static const unsigned char want[3][16] = {
			{ 0x4b, 0x90, 0x07, 0xb6, 0x32, 0x31, 0x5c, 0xaf, 0x95, 0x71, 0x72, 0x1c, 0x25, 0x8d, 0x75, 0x8a },
			{ 0x06, 0x1d, 0x1c, 0xb4, 0x1b, 0xcf, 0x5a, 0xb8, 0x9a, 0x71, 0x19, 0x8c, 0xbc, 0xf2, 0x06, 0xf9 },
			{ 0x2e, 0x32, 0xe1, 0xc2, 0x24, 0x58, 0x5d, 0x4a, 0x9e, 0x9b, 0x26, 0x25, 0x2e, 0xf1, 0x44, 0x8a },
		};
		static const size_t lens[3] = { 472, 473, 1000 };
		char extra[1000];

		for (int i = 0; i < 1000; i++)
			extra[i] = (char)('a' + i % 26);
		sl_csn_format(b.csn, 0x10, 0);
		for (int k = 0; k < 3; k++) {
			sl_change_set_uuid(&b, "s1", extra, lens[k]);
			assert_memory_equal(b.uuid, want[k], 16);
		}
	}
	(void)s;
	sl_table_free(t);
}

/* Stepping a CSN to the next sequence number gives what formatting it
 * afresh gives, across every carry, up to the largest sequence number. */
static void test_csn_next_seq(void **state)
{
	static const uint32_t starts[] = { 0, 9, 99, 999999, 4294967290u };
	char step[SL_CSN_LEN + 1], fresh[SL_CSN_LEN + 1];
	(void)state;

	for (size_t k = 0; k < sizeof starts / sizeof starts[0]; k++) {
		uint32_t seq = starts[k];
		sl_csn_format(step, 0xABCDEF0123456789u, seq);
		for (int i = 0; i < 2000 && seq < UINT32_MAX; i++) {
			sl_csn_next_seq(step);
			seq++;
			sl_csn_format(fresh, 0xABCDEF0123456789u, seq);
			assert_string_equal(step, fresh);
		}
	}
	assert_string_equal(step, "ABCDEF0123456789-4294967295");
}

/* A uuid from a prefix hashed once (what the writer does for every record)
 * equals the one hashed whole, for several records of one table: Python's
 * uuid.uuid5 values, for a prefix shorter than a SHA-1 block and one that
 * spans two. */
static void test_uuid_prefix(void **state)
{
	static const unsigned char want_short[16] = { 0xdb, 0x2f, 0xbc, 0xaa, 0x76, 0xf9, 0x5a, 0xfc,
						      0xa2, 0x59, 0x27, 0x5e, 0x5d, 0xbe, 0xdb, 0x78 };
	static const unsigned char want_long[2][16] = {
		{ 0x74, 0xd6, 0xf4, 0xc1, 0xce, 0x8d, 0x54, 0xf3, 0xad, 0x9f, 0xe3, 0x0b, 0xcd, 0x44, 0x05, 0x96 },
		{ 0x39, 0x9c, 0x02, 0x9b, 0x59, 0xb4, 0x59, 0x59, 0x91, 0x3d, 0xbf, 0x48, 0x14, 0x63, 0xa3, 0xb4 },
	};
	char longname[101];
	struct sl_table *t = sl_table_new("public", "t"), *tl;
	struct sl_uuid_prefix u;
	struct sl_change c, whole;
	(void)state;

	memset(longname, 't', 100);
	longname[100] = '\0';
	tl = sl_table_new("public", longname);
	assert_non_null(t);
	assert_non_null(tl);
	memset(&c, 0, sizeof c);
	c.table = t;
	sl_uuid_prefix_init(&u, "s1", t);
	assert_ptr_equal(u.table, t);
	for (int k = 0; k < 2; k++) {   /* the prefix is reused, not used up */
		sl_csn_format(c.csn, 0x10, 1);
		sl_change_set_uuid_from(&c, &u, NULL, 0);
		assert_memory_equal(c.uuid, want_short, 16);
	}
	/* with extra bytes, as a backfill row's */
	sl_csn_format(c.csn, 0x10, 0);
	whole = c;
	sl_change_set_uuid_from(&c, &u, "1:1", 3);
	sl_change_set_uuid(&whole, "s1", "1:1", 3);
	assert_memory_equal(c.uuid, whole.uuid, 16);
	c.table = tl;
	sl_uuid_prefix_init(&u, "s1", tl);
	for (int k = 0; k < 2; k++) {
		sl_csn_format(c.csn, 0x10, (uint32_t)k + 1);
		sl_change_set_uuid_from(&c, &u, NULL, 0);
		assert_memory_equal(c.uuid, want_long[k], 16);
	}
	sl_table_free(tl);
	sl_table_free(t);
}

static void test_avro_names(void **state)
{
	struct sl_table *t = sl_table_new("we ird", "a\"b");
	(void)state;

	assert_int_equal(sl_table_add_column(t, "select", SL_T_STRING, 0, 0, 25, -1, NULL, false), 0);
	assert_int_equal(sl_table_add_column(t, "1st col", SL_T_STRING, 0, 0, 25, -1, NULL, false), 0);
	assert_int_equal(sl_table_add_column(t, "1st_col", SL_T_STRING, 0, 0, 25, -1, NULL, false), 0);
	assert_int_equal(sl_table_add_column(t, "a/b", SL_T_STRING, 0, 0, 25, -1, NULL, false), 0);
	assert_int_equal(sl_table_add_column(t, "café", SL_T_STRING, 0, 0, 25, -1, NULL, false), 0);
	assert_int_equal(sl_table_finish(t), 0);
	/* valid names are kept; the others are escaped byte by byte */
	assert_string_equal(t->cols[0].avro_name, "select");
	assert_string_equal(t->cols[1].avro_name, "_31st_20col");
	assert_string_equal(t->cols[2].avro_name, "_31st_5fcol");
	assert_string_equal(t->cols[3].avro_name, "a_2fb");
	assert_string_equal(t->cols[4].avro_name, "caf_c3_a9");
	assert_string_equal(t->object, "we ird_a\"b");
	assert_int_equal(strlen(t->schema_key), 16);
	sl_table_free(t);
}

/* A column keeps its field name for as long as it exists: dropping or
 * adding other columns, whose names clean up to the same text, moves
 * nothing. */
static void test_avro_names_stable(void **state)
{
	const char *sets[][3] = {
		{ "a-b", "a_b", "a b" },
		{ "a_b", "a b", NULL },
		{ "a b", "a-b", NULL },
		{ "a_b", NULL, NULL },
	};
	const char *want[][2] = { { "a-b", "a_2db" }, { "a_b", "a_b" }, { "a b", "a_20b" } };
	(void)state;

	for (size_t k = 0; k < sizeof sets / sizeof sets[0]; k++) {
		struct sl_table *t = sl_table_new("public", "t");
		int n = 0;
		for (; n < 3 && sets[k][n]; n++)
			assert_int_equal(sl_table_add_column(t, sets[k][n], SL_T_STRING, 0, 0, 25, -1, NULL, false), 0);
		assert_int_equal(sl_table_finish(t), 0);
		for (int i = 0; i < n; i++)
			for (size_t w = 0; w < sizeof want / sizeof want[0]; w++)
				if (!strcmp(t->cols[i].name, want[w][0]))
					assert_string_equal(t->cols[i].avro_name, want[w][1]);
		sl_table_free(t);
	}
	/* the contrived pair: an escaped name that another column holds as is */
	{
		struct sl_table *t = sl_table_new("public", "t");
		assert_int_equal(sl_table_add_column(t, "a-b", SL_T_STRING, 0, 0, 25, -1, NULL, false), 0);
		assert_int_equal(sl_table_add_column(t, "a_2db", SL_T_STRING, 0, 0, 25, -1, NULL, false), 0);
		assert_int_equal(sl_table_finish(t), 0);
		assert_string_equal(t->cols[1].avro_name, "a_2db");
		assert_string_equal(t->cols[0].avro_name, "a_2db_2");
		sl_table_free(t);
	}
}

/* The object name is one-to-one: pairs that used to meet now differ, and
 * common names stay as they are. */
static void test_object_names(void **state)
{
	const char *cases[][3] = {
		{ "public", "order_items", "public_order_items" },
		{ "sales_q1", "eu", "sales__q1_eu" },
		{ "sales", "q1_eu", "sales_q1_eu" },
		{ "a", "b_c", "a_b_c" },
		{ "a_b", "c", "a__b_c" },
		{ "a", "__c", "a_%5F_c" },
		{ "a_", "c", "a___c" },
		{ "we ird", "a\"b", "we ird_a\"b" },
		{ "x/y", "50%", "x%2Fy_50%25" },
		{ "s", "tab\tnl\n", "s_tab%09nl%0A" },
	};
	(void)state;

	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		char *o = sl_object_name(cases[i][0], cases[i][1]);
		assert_non_null(o);
		assert_string_equal(o, cases[i][2]);
		for (size_t j = 0; j < i; j++) {
			char *q = sl_object_name(cases[j][0], cases[j][1]);
			assert_string_not_equal(o, q);
			free(q);
		}
		free(o);
	}
}

/* The canonical key bytes of each value kind, written out by hand from the
 * layout documented in schema.h. */
static void test_value_key_bytes(void **state)
{
	static const unsigned char u[16] = { 0xa0, 0xee, 0xbc, 0x99, 0x9c, 0x0b, 0x4e, 0xf8,
					     0xbb, 0x6d, 0x6b, 0xb9, 0xbd, 0x38, 0x0a, 0x11 };
	const struct {
		struct sl_value v;
		const char *want;
		size_t n;
	} cases[] = {
		{ { .kind = SL_V_NULL }, "\x00", 1 },
		{ { .kind = SL_V_UNCHANGED }, "\x01", 1 },
		{ { .kind = SL_V_BOOL, .b = true }, "\x02\x01", 2 },
		{ { .kind = SL_V_BOOL, .b = false }, "\x02\x00", 2 },
		{ { .kind = SL_V_INT, .i = -2 }, "\x03\xff\xff\xff\xff\xff\xff\xff\xfe", 9 },
		{ { .kind = SL_V_INT, .i = INT64_C(0x0102030405060708) }, "\x03\x01\x02\x03\x04\x05\x06\x07\x08", 9 },
		{ { .kind = SL_V_UINT, .u = UINT64_MAX }, "\x04\xff\xff\xff\xff\xff\xff\xff\xff", 9 },
		{ { .kind = SL_V_FLOAT, .f = 1.5f }, "\x05\x3f\xc0\x00\x00", 5 },
		{ { .kind = SL_V_DOUBLE, .d = -0.1 }, "\x06\xbf\xb9\x99\x99\x99\x99\x99\x9a", 9 },
		{ { .kind = SL_V_DECIMAL, .neg = true, .scale = 2, .len = 4, .p = "1050" },
		  "\x07\x01\x00\x02\x00\x00\x00\x04" "1050", 12 },
		{ { .kind = SL_V_DECIMAL, .scale = 300, .len = 1, .p = "0" }, "\x07\x00\x01\x2c\x00\x00\x00\x01" "0", 9 },
		{ { .kind = SL_V_BYTES, .len = 3, .p = "a\0b" }, "\x08\x00\x00\x00\x03" "a\0b", 8 },
		{ { .kind = SL_V_STRING, .len = 0, .p = "" }, "\x09\x00\x00\x00\x00", 5 },
		{ { .kind = SL_V_STRING, .len = 2, .p = "h\xc3" }, "\x09\x00\x00\x00\x02h\xc3", 7 },
		{ { .kind = SL_V_JSON, .len = 2, .p = "{}" }, "\x0a\x00\x00\x00\x02{}", 7 },
		{ { .kind = SL_V_DATE, .i = 19753 }, "\x0b\x00\x00\x00\x00\x00\x00\x4d\x29", 9 },
		{ { .kind = SL_V_TIME, .i = INT64_C(86400000000) }, "\x0c\x00\x00\x00\x14\x1d\xd7\x60\x00", 9 },
		{ { .kind = SL_V_TIMESTAMP, .i = -1 }, "\x0d\xff\xff\xff\xff\xff\xff\xff\xff", 9 },
		{ { .kind = SL_V_UUID, .len = 16, .p = (const char *)u },
		  "\x0e\x00\x00\x00\x10\xa0\xee\xbc\x99\x9c\x0b\x4e\xf8\xbb\x6d\x6b\xb9\xbd\x38\x0a\x11", 21 },
	};
	struct sl_value a, c;
	struct sl_buf b, b2;
	(void)state;

	sl_buf_init(&b, 0);
	for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
		sl_buf_reset(&b);
		assert_int_equal(sl_value_key_bytes(&b, &cases[i].v), 0);
		if (b.len != cases[i].n || memcmp(b.data, cases[i].want, cases[i].n) != 0)
			fail_msg("case %zu (kind %u): wrong key bytes", i, cases[i].v.kind);
	}
	sl_buf_reset(&b);
	a = (struct sl_value){ .kind = 99 };
	assert_int_equal(sl_value_key_bytes(&b, &a), -1);
	/* length prefixes keep ("a", "bc") and ("ab", "c") apart */
	sl_buf_init(&b2, 0);
	a = (struct sl_value){ .kind = SL_V_STRING, .len = 1, .p = "a" };
	c = (struct sl_value){ .kind = SL_V_STRING, .len = 2, .p = "bc" };
	sl_value_key_bytes(&b, &a);
	sl_value_key_bytes(&b, &c);
	a.len = 2;
	a.p = "ab";
	c.len = 1;
	c.p = "c";
	sl_value_key_bytes(&b2, &a);
	sl_value_key_bytes(&b2, &c);
	assert_true(b.len == b2.len && memcmp(b.data, b2.data, b.len) != 0);
	sl_buf_free(&b);
	sl_buf_free(&b2);
}

static void test_value_equal(void **state)
{
	struct sl_value a, b;
	(void)state;

	a = (struct sl_value){ .kind = SL_V_DOUBLE, .d = NAN };
	b = a;
	assert_true(sl_value_equal(&a, &b));              /* NaN is itself, by its bits */
	a.d = 0.0;
	b.d = -0.0;
	assert_false(sl_value_equal(&a, &b));             /* and -0 is not 0 */
	a = (struct sl_value){ .kind = SL_V_INT, .i = 5 };
	b = (struct sl_value){ .kind = SL_V_DATE, .i = 5 };
	assert_false(sl_value_equal(&a, &b));             /* kinds differ */
	b.kind = SL_V_INT;
	assert_true(sl_value_equal(&a, &b));
	a = (struct sl_value){ .kind = SL_V_DECIMAL, .scale = 2, .len = 3, .p = "150" };
	b = a;
	assert_true(sl_value_equal(&a, &b));
	b.scale = 1;
	assert_false(sl_value_equal(&a, &b));
	b.scale = 2;
	b.neg = true;
	assert_false(sl_value_equal(&a, &b));
	a = (struct sl_value){ .kind = SL_V_STRING, .len = 2, .p = "ab" };
	b = (struct sl_value){ .kind = SL_V_STRING, .len = 2, .p = "abc" };
	assert_true(sl_value_equal(&a, &b));
	b.len = 3;
	assert_false(sl_value_equal(&a, &b));
	a = (struct sl_value){ .kind = SL_V_NULL };
	b = (struct sl_value){ .kind = SL_V_NULL };
	assert_true(sl_value_equal(&a, &b));
	b.kind = SL_V_UNCHANGED;
	assert_false(sl_value_equal(&a, &b));
}

/* Commands in messages can be pasted into a shell as they are. */
static void test_buf_shell_word(void **state)
{
	static const char *const cases[][2] = {
		{ "/etc/sluice/a-b_c.ini", "/etc/sluice/a-b_c.ini" },
		{ "my file.ini", "'my file.ini'" },
		{ "it's", "'it'\\''s'" },
		{ "$HOME/x;rm", "'$HOME/x;rm'" },
		{ "", "''" },
	};
	struct sl_buf b;
	(void)state;

	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		sl_buf_init(&b, 0);
		assert_int_equal(sl_buf_put_shell_word(&b, cases[i][0]), 0);
		assert_string_equal(b.data, cases[i][1]);
		sl_buf_free(&b);
	}
}

/* The recovery command that messages give, with a path that needs quoting. */
static void test_buf_backfill_command(void **state)
{
	struct sl_buf b;
	(void)state;

	sl_buf_init(&b, 0);
	assert_int_equal(sl_buf_put_backfill_command(&b, "/etc/my dir/it's.ini", "orders", "public", "line items"),
			 0);
	assert_string_equal(b.data, "sluice backfill -c '/etc/my dir/it'\\''s.ini' --stream orders --table "
			    "'public.line items'");
	sl_buf_reset(&b);
	assert_int_equal(sl_buf_put_backfill_command(&b, NULL, "a b", NULL, NULL), 0);
	assert_string_equal(b.data, "sluice backfill -c FILE --stream 'a b'");
	sl_buf_free(&b);
}

static void test_buf(void **state)
{
	struct sl_buf b;
	char *p;
	(void)state;

	sl_buf_init(&b, 8);
	assert_int_equal(sl_buf_puts(&b, "abcd"), 0);
	assert_int_equal(sl_buf_printf(&b, "%d", 123), 0);
	assert_string_equal(b.data, "abcd123");
	assert_int_equal(sl_buf_puts(&b, "xy"), -1); /* over the cap */
	assert_true(sl_buf_failed(&b));
	assert_int_equal(sl_buf_putc(&b, 'z'), -1); /* sticky */
	assert_null(sl_buf_detach(&b));
	sl_buf_init(&b, 0);
	sl_buf_puts(&b, "ok");
	p = sl_buf_detach(&b);
	assert_string_equal(p, "ok");
	free(p);
}

/* A failed PQescapeIdentifier (here: no connection) is an error, never an
 * empty name in the SQL; the buffer is left as it was. */
static void test_quote_failure(void **state)
{
	struct sl_buf b;
	struct sl_table *t = sl_table_new("public", "t");
	(void)state;

	sl_buf_init(&b, 0);
	sl_buf_puts(&b, "SELECT ");
	assert_int_equal(sl_pg_append_ident(&b, NULL, "x"), -1);
	assert_int_equal(sl_pg_append_qualified(&b, NULL, t), -1);
	assert_string_equal(b.data, "SELECT ");
	sl_buf_free(&b);
	sl_table_free(t);
}

static struct sl_position lsnpos(uint64_t lsn)
{
	struct sl_position p;

	memset(&p, 0, sizeof p);
	p.w[0] = lsn;
	return p;
}

static void test_checkpoint_roundtrip(void **state)
{
	char dir[] = "/tmp/sluice-ckpt-XXXXXX", err[512];
	struct sl_checkpoint ck, ck2;
	struct sl_ckpt_table *e;
	char path[600];
	FILE *f;
	(void)state;

	assert_non_null(mkdtemp(dir));
	assert_int_equal(sl_ckpt_load(&ck, &sl_pg_desc, dir, "s1", err, sizeof err), 0);
	assert_false(ck.exists);
	snprintf(ck.slot, sizeof ck.slot, "sluice_s1");
	ck.has_position = true;
	ck.durable = lsnpos(UINT64_C(0x1600000ABC));
	ck.last_source_ts_us = 1234567;
	e = sl_ckpt_table(&ck, "we.ird", "a\"b");
	e->state = SL_BF_RUNNING;
	e->method = SL_BF_WATERMARK;
	e->snapshot = lsnpos(0x42);
	e->since = lsnpos(0x40);
	e->has_since = true;
	e = sl_ckpt_table(&ck, "public", "t");
	e->state = SL_BF_DONE;
	e->rows = 1000000;
	e->layout = UINT64_C(0xfedcba9876543211);   /* above INT64_MAX: kept as its bits */
	e->snapshot = lsnpos(0x77);   /* a snapshot backfill saved without "since" ... */
	e = sl_ckpt_table(&ck, "public", "w");
	e->state = SL_BF_DONE;
	e->method = SL_BF_WATERMARK;  /* ... and one while streaming */
	e->snapshot = lsnpos(0x99);
	assert_int_equal(sl_ckpt_save(&ck, err, sizeof err), 0);

	assert_int_equal(sl_ckpt_load(&ck2, &sl_pg_desc, dir, "s1", err, sizeof err), 0);
	assert_true(ck2.exists);
	assert_string_equal(ck2.slot, "sluice_s1");
	assert_true(ck2.has_position);
	assert_false(ck2.reset);
	assert_true(ck2.durable.w[0] == UINT64_C(0x1600000ABC));
	assert_true(ck2.last_source_ts_us == 1234567);
	assert_int_equal(ck2.ntables, 3);
	e = sl_ckpt_table(&ck2, "we.ird", "a\"b");
	assert_int_equal(e->state, SL_BF_RUNNING);
	assert_true(e->snapshot.w[0] == 0x42);
	assert_true(e->has_since && e->since.w[0] == 0x40);
	e = sl_ckpt_table(&ck2, "public", "t");
	assert_int_equal(e->state, SL_BF_DONE);
	assert_true(e->rows == 1000000);
	assert_true(e->layout == UINT64_C(0xfedcba9876543211));
	/* its rows were all read in its snapshot: every change before it */
	assert_true(e->has_since && e->since.w[0] == 0x77);
	/* read in chunks from when, unknown: not after any position */
	assert_false(sl_ckpt_table(&ck2, "public", "w")->has_since);
	assert_true(sl_ckpt_table(&ck2, "we.ird", "a\"b")->layout == 0);
	assert_int_equal(ck2.ntables, 3);
	sl_ckpt_free(&ck2);

	/* The file names its format and its source kind, with LSNs as text. */
	{
		char *text = NULL;
		size_t len;
		assert_int_equal(sl_read_file(ck.path, &text, &len, err, sizeof err), 0);
		assert_non_null(strstr(text, "\"format\": 2"));
		assert_non_null(strstr(text, "\"source\": \"postgres\""));
		assert_non_null(strstr(text, "\"durable\": \"16/ABC\""));
		assert_non_null(strstr(text, "\"snapshot\": \"0/42\""));
		assert_non_null(strstr(text, "\"since\": \"0/40\""));
		free(text);
	}

	/* A corrupt file is an error, never a silent reset. */
	snprintf(path, sizeof path, "%s", ck.path);
	f = fopen(path, "w");
	fputs("{\"durable_lsn\": 12", f);
	fclose(f);
	assert_int_equal(sl_ckpt_load(&ck2, &sl_pg_desc, dir, "s1", err, sizeof err), SL_ELOST);
	assert_non_null(strstr(err, "is corrupt"));
	sl_ckpt_free(&ck2);
	/* Valid JSON of the wrong shape is corrupt too. */
	f = fopen(path, "w");
	fputs("[1, 2]", f);
	fclose(f);
	assert_int_equal(sl_ckpt_load(&ck2, &sl_pg_desc, dir, "s1", err, sizeof err), SL_ELOST);
	assert_non_null(strstr(err, "is corrupt (line 1: not a JSON object)"));
	/* Set aside, it leaves the stream without a checkpoint. */
	assert_int_equal(sl_ckpt_set_aside(&ck2, err, sizeof err), 0);
	sl_ckpt_free(&ck2);
	assert_int_equal(sl_ckpt_load(&ck2, &sl_pg_desc, dir, "s1", err, sizeof err), SL_OK);
	assert_false(ck2.exists);
	snprintf(path, sizeof path, "%s.corrupt", ck.path);
	sl_ckpt_free(&ck2);
	unlink(path);
	sl_ckpt_free(&ck);
	rmdir(dir);
}

/* A checkpoint exactly as sluice 0.1 wrote it still loads; the next save
 * writes format 2.  Another source kind, or an unknown format, is refused
 * with a message that says what to do. */
static void test_checkpoint_format1(void **state)
{
	char dir[] = "/tmp/sluice-ckpt-XXXXXX", err[512], path[600];
	struct sl_checkpoint ck;
	struct sl_ckpt_table *e;
	struct sl_source_desc other = sl_pg_desc;
	FILE *f;
	(void)state;

	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof path, "%s/s1.checkpoint.json", dir);
	f = fopen(path, "w");
	fputs("{\n  \"durable_lsn\": \"16/B374D848\",\n  \"format\": 1,\n  \"last_source_ts_us\": 1700000000000000,\n"
	      "  \"reset_slot\": false,\n  \"slot\": \"sluice_s1\",\n  \"slot_created\": true,\n"
	      "  \"tables\": {\n    \"public.orders\": {\n      \"backfill\": \"done\",\n      \"rows\": 42,\n"
	      "      \"schema_key\": \"0123456789abcdef\",\n      \"snapshot_lsn\": \"0/16B3748\"\n    }\n  },\n"
	      "  \"updated_us\": 1700000000000001\n}\n", f);
	fclose(f);
	assert_int_equal(sl_ckpt_load(&ck, &sl_pg_desc, dir, "s1", err, sizeof err), 0);
	assert_true(ck.exists);
	assert_true(ck.has_position);
	assert_false(ck.reset);
	assert_true(ck.durable.w[0] == UINT64_C(0x16B374D848));
	assert_string_equal(ck.slot, "sluice_s1");
	e = sl_ckpt_table(&ck, "public", "orders");
	assert_int_equal(e->state, SL_BF_DONE);
	assert_true(e->rows == 42);
	assert_true(e->snapshot.w[0] == UINT64_C(0x16B3748));
	assert_string_equal(e->schema_key, "0123456789abcdef");
	assert_true(e->has_since && e->since.w[0] == UINT64_C(0x16B3748));
	assert_int_equal(sl_ckpt_save(&ck, err, sizeof err), 0);
	sl_ckpt_free(&ck);
	assert_int_equal(sl_ckpt_load(&ck, &sl_pg_desc, dir, "s1", err, sizeof err), 0);
	assert_true(ck.durable.w[0] == UINT64_C(0x16B374D848));
	sl_ckpt_free(&ck);

	/* Written for postgres, read for another kind: refused, nothing changed. */
	other.kind = "mysql";
	assert_int_equal(sl_ckpt_load(&ck, &other, dir, "s1", err, sizeof err), SL_ECONFIG);
	assert_non_null(strstr(err, "was written for a postgres source, but the stream's source is mysql"));
	sl_ckpt_free(&ck);

	f = fopen(path, "w");
	fputs("{\"format\": 9, \"source\": \"postgres\"}", f);
	fclose(f);
	assert_int_equal(sl_ckpt_load(&ck, &sl_pg_desc, dir, "s1", err, sizeof err), SL_ECONFIG);
	assert_non_null(strstr(err, "has format 9"));
	sl_ckpt_free(&ck);
	unlink(path);
	rmdir(dir);
}

/* common/keyslots: every key found at its position, absent ones not,
 * across growth, a clear, and keys of any length (the empty one too). */
struct kitem { char key[16]; size_t len; };

static const void *kitem_key(const void *arr, size_t i, size_t *len)
{
	const struct kitem *it = &((const struct kitem *)arr)[i];

	*len = it->len;
	return it->key;
}

static void test_keyslots(void **state)
{
	enum { N = 5000 };
	static struct kitem items[N];
	struct sl_keyslots k = { .min = 4 };

	(void)state;
	for (int round = 0; round < 2; round++) {
		for (size_t i = 0; i < N; i++) {
			/* distinct keys of 2 to 9 bytes, and the empty one */
			items[i].len = i == 0 ? 0 : (size_t)snprintf(items[i].key, sizeof items[i].key, "%zu%c",
								     i * 7919, (char)('a' + i % 3));
			assert_int_equal(sl_keyslots_find(&k, items[i].key, items[i].len, kitem_key, items), -1);
			assert_int_equal(sl_keyslots_reserve(&k, i), 0);
			sl_keyslots_put(&k, items[i].key, items[i].len, i);
			assert_true(k.nslots >= (i + 1) * 2);
		}
		for (size_t i = 0; i < N; i++)
			assert_int_equal(sl_keyslots_find(&k, items[i].key, items[i].len, kitem_key, items), (ssize_t)i);
		assert_int_equal(sl_keyslots_find(&k, "nope", 4, kitem_key, items), -1);
		assert_int_equal(sl_keyslots_find(&k, items[5].key, items[5].len - 1, kitem_key, items), -1);
		sl_keyslots_clear(&k);
		assert_int_equal(sl_keyslots_find(&k, items[7].key, items[7].len, kitem_key, items), -1);
	}
	sl_keyslots_free(&k);
	assert_null(k.slots);
}

struct khash { uint32_t h; uint32_t i; };

static int khash_cmp(const void *a, const void *b)
{
	const struct khash *x = a, *y = b;

	return x->h < y->h ? -1 : x->h > y->h ? 1 : (x->i > y->i) - (x->i < y->i);
}

/* Two keys whose hashes agree in the 32 bits a slot keeps (found among
 * 300,000 keys: about 10 such pairs are expected) are still told apart by
 * their bytes. */
static void test_keyslots_hash_collision(void **state)
{
	enum { N = 300000 };
	struct khash *hs = malloc(N * sizeof *hs);
	static struct kitem items[2];
	struct sl_keyslots k = { 0 };
	char key[16];
	size_t a = 0, b = 0;

	(void)state;
	assert_non_null(hs);
	for (uint32_t i = 0; i < N; i++) {
		int n = snprintf(key, sizeof key, "k%u", i);
		hs[i].h = (uint32_t)sl_hash_bytes(key, (size_t)n);
		hs[i].i = i;
	}
	qsort(hs, N, sizeof *hs, khash_cmp);
	for (size_t i = 1; i < N && a == b; i++)
		if (hs[i].h == hs[i - 1].h) {
			a = hs[i - 1].i;
			b = hs[i].i;
		}
	free(hs);
	assert_true(a != b);
	items[0].len = (size_t)snprintf(items[0].key, sizeof items[0].key, "k%zu", a);
	items[1].len = (size_t)snprintf(items[1].key, sizeof items[1].key, "k%zu", b);
	assert_int_equal((uint32_t)sl_hash_bytes(items[0].key, items[0].len),
			 (uint32_t)sl_hash_bytes(items[1].key, items[1].len));
	assert_int_equal(sl_keyslots_reserve(&k, 0), 0);
	sl_keyslots_put(&k, items[0].key, items[0].len, 0);
	assert_int_equal(sl_keyslots_find(&k, items[1].key, items[1].len, kitem_key, items), -1);
	assert_int_equal(sl_keyslots_reserve(&k, 1), 0);
	sl_keyslots_put(&k, items[1].key, items[1].len, 1);
	assert_int_equal(sl_keyslots_find(&k, items[0].key, items[0].len, kitem_key, items), 0);
	assert_int_equal(sl_keyslots_find(&k, items[1].key, items[1].len, kitem_key, items), 1);
	sl_keyslots_free(&k);
}

/* Every status has its own value, and the exit codes are DESIGN.md's. */
static void test_status_exit_codes(void **state)
{
	const int all[] = { SL_OK, SL_EFAIL, SL_ECONFIG, SL_EPREREQ, SL_ELOST,
			    SL_EDATA, SL_ERESTART, SL_EAGAIN, SL_EVERIFY, SL_ESTALE };
	const int want[] = { 0, 1, 2, 3, 4, 1, 1, 1, 1, 1 };
	const size_t n = sizeof all / sizeof all[0];

	(void)state;
	for (size_t i = 0; i < n; i++) {
		for (size_t j = i + 1; j < n; j++)
			assert_int_not_equal(all[i], all[j]);
		assert_int_equal(sl_status_exit_code(all[i]), want[i]);
	}
	assert_int_equal(sl_status_exit_code(-99), 1);
}

/* sl_fd_share: a share of the open file limit less 64, with a floor at a
 * limit of 96 or less and a cap; the limit is restored after. */
static void test_fd_share(void **state)
{
	struct rlimit old, rl;
	static const struct {
		rlim_t soft;
		uint64_t quarter, half;       /* (4, 8, 1 << 28) and (2, 16, INT_MAX) */
	} cases[] = { { 256, 48, 96 }, { 1024, 240, 480 }, { 97, 8, 16 }, { 96, 8, 16 }, { 64, 8, 16 } };

	(void)state;
	assert_int_equal(getrlimit(RLIMIT_NOFILE, &old), 0);
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		if (old.rlim_max != RLIM_INFINITY && cases[i].soft > old.rlim_max)
			continue;
		rl = old;
		rl.rlim_cur = cases[i].soft;
		assert_int_equal(setrlimit(RLIMIT_NOFILE, &rl), 0);
		assert_int_equal(sl_fd_share(4, 8, (uint64_t)1 << 28), cases[i].quarter);
		assert_int_equal(sl_fd_share(2, 16, INT_MAX), cases[i].half);
	}
	assert_int_equal(setrlimit(RLIMIT_NOFILE, &old), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_status_exit_codes),
		cmocka_unit_test(test_fd_share),
		cmocka_unit_test(test_pgoutput_transaction),
		cmocka_unit_test(test_pgoutput_infinite_commit_time),
		cmocka_unit_test(test_pgoutput_typed),
		cmocka_unit_test(test_pgoutput_schema_change),
		cmocka_unit_test(test_pgoutput_drop_below),
		cmocka_unit_test(test_pgoutput_bad_value),
		cmocka_unit_test(test_pgoutput_malformed),
		cmocka_unit_test(test_pgoutput_mutations),
		cmocka_unit_test(test_copy_text_row),
		cmocka_unit_test(test_csn_and_lsn),
		cmocka_unit_test(test_uuid_deterministic),
		cmocka_unit_test(test_uuid_prefix),
		cmocka_unit_test(test_csn_next_seq),
		cmocka_unit_test(test_avro_names),
		cmocka_unit_test(test_avro_names_stable),
		cmocka_unit_test(test_object_names),
		cmocka_unit_test(test_value_key_bytes),
		cmocka_unit_test(test_value_equal),
		cmocka_unit_test(test_buf),
		cmocka_unit_test(test_buf_shell_word),
		cmocka_unit_test(test_buf_backfill_command),
		cmocka_unit_test(test_quote_failure),
		cmocka_unit_test(test_checkpoint_roundtrip),
		cmocka_unit_test(test_checkpoint_format1),
		cmocka_unit_test(test_keyslots),
		cmocka_unit_test(test_keyslots_hash_collision),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
