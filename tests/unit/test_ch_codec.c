/*
 * tests/unit/test_ch_codec.c: the ClickHouse sink's pure parts, without a
 * server: the merge version derived from CSNs (edge positions of PostgreSQL
 * and MySQL, backfill rows, re-backfill markers, long transactions, and a
 * randomized check against the CSN's own order); the RowBinary encoding of
 * every typed value, byte for byte, and its decoding back; table layouts,
 * the SQL they make, and how they are matched with an existing table;
 * identifier quoting; the reading and classing of ClickHouse's errors; dead
 * letter lines.
 *
 * Expected bytes are worked out by hand from ClickHouse's RowBinary format
 * (little-endian integers and IEEE floats, LEB128 lengths, a null flag
 * before a Nullable value, Decimal as its unscaled integer), or with
 * Python's integers for 128-bit decimals.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common/buf.h"
#include "sinks/clickhouse/ch_deadletter.h"
#include "sinks/clickhouse/ch_layout.h"
#include "sinks/clickhouse/ch_rowbin.h"
#include "sinks/clickhouse/ch_sql.h"
#include "tests/unit/avro_testlib.h"
#include "tests/unit/fake_source.h"

/* ------------------------------------------------------------------ */
/* the version                                                          */

/* The map-less version: append mode's, and what tables written before the
 * version map hold (position << 8 | min(sequence, 255)). */
static uint64_t old_ver(uint64_t pos, uint32_t seq)
{
	return pos << 8 | (seq < 255 ? seq : 255);
}

/* A stream of changes through one table's version map, in CSN order: each
 * change is noted, then gets its version; the steps it records are kept
 * as the sink sends them to ClickHouse. */
struct vstream {
	struct ch_vmap map;
	struct ch_vstep rec[64];
	int nrec;
};

static uint64_t vs_change(struct vstream *vs, uint64_t pos, uint32_t seq)
{
	struct ch_vstep st;
	uint64_t v = 0;
	int r = ch_vmap_note(&vs->map, pos, seq, &st);

	assert_true(r >= 0);
	if (r > 0 && vs->nrec < 64)
		vs->rec[vs->nrec++] = st;
	if (ch_version(pos, seq, ch_vmap_shift(&vs->map, pos), &v) != 0)
		fail_msg("version of %llx-%u refused", (unsigned long long)pos, seq);
	/* never below the map-less version of the same change */
	assert_true(v >= old_ver(pos, seq));
	return v;
}

/* Changes (pos[i], seq[i]) in CSN order have strictly increasing versions. */
static void check_stream(const uint64_t *pos, const uint32_t *seq, int n)
{
	struct vstream vs = { 0 };
	uint64_t prev = 0;

	for (int i = 0; i < n; i++) {
		uint64_t v = vs_change(&vs, pos[i], seq[i]);
		if (i > 0 && v <= prev)
			fail_msg("%llx-%u: version %llu is not above the previous change's %llu", (unsigned long long)pos[i],
				 seq[i], (unsigned long long)v, (unsigned long long)prev);
		prev = v;
	}
	ch_vmap_free(&vs.map);
}

#define STREAM(...)                                                                                     \
	do {                                                                                            \
		const struct { uint64_t p; uint32_t s; } ch_[] = { __VA_ARGS__ };                      \
		uint64_t p_[sizeof ch_ / sizeof ch_[0]];                                                \
		uint32_t s_[sizeof ch_ / sizeof ch_[0]];                                                \
		for (size_t i_ = 0; i_ < sizeof ch_ / sizeof ch_[0]; i_++)                              \
			p_[i_] = ch_[i_].p, s_[i_] = ch_[i_].s;                                         \
		check_stream(p_, s_, (int)(sizeof ch_ / sizeof ch_[0]));                                \
	} while (0)

static void test_version_basics(void **state)
{
	uint64_t v = 42;

	(void)state;
	assert_int_equal(ch_version(0x16B374D848, 1, 0, &v), 0);
	assert_int_equal(v, (UINT64_C(0x16B374D848) << 8) | 1);
	assert_int_equal(ch_version(0, 0, 0, &v), 0);
	assert_int_equal(v, 0);
	assert_int_equal(ch_version(0x100, 300, 7, &v), 0);
	assert_int_equal(v, (UINT64_C(0x100) << 8) + 307);
	/* the last positions that fit, with a sequence that just fits */
	assert_int_equal(ch_version(CH_VERSION_POS_LIMIT - 1, 255, 0, &v), 0);
	assert_int_equal(v, UINT64_MAX);
	assert_int_equal(ch_version(CH_VERSION_POS_LIMIT - 2, 511, 0, &v), 0);
	assert_int_equal(v, UINT64_MAX);
	/* and what does not: refused, never wrapped */
	v = 42;
	assert_int_equal(ch_version(CH_VERSION_POS_LIMIT, 0, 0, &v), -1);
	assert_int_equal(ch_version(UINT64_MAX, 0, 0, &v), -1);  /* a marker at position 0 - 1 */
	assert_int_equal(ch_version(CH_VERSION_POS_LIMIT - 1, 256, 0, &v), -1);
	assert_int_equal(ch_version(1, 0, UINT64_MAX - 255, &v), -1);
	assert_int_equal(ch_version(1, UINT32_MAX, UINT64_MAX - 256 - UINT32_MAX + 1, &v), -1);
	assert_int_equal(v, 42);
	/* a map without steps is the map-less version up to sequence 255 */
	struct vstream vs = { 0 };
	assert_int_equal(vs_change(&vs, 0x5000, 0), old_ver(0x5000, 0));
	assert_int_equal(vs_change(&vs, 0x5000, 254), old_ver(0x5000, 254));
	assert_int_equal(vs_change(&vs, 0x5000, 255), old_ver(0x5000, 255));
	assert_int_equal(vs_change(&vs, 0x5001, 1), old_ver(0x5001, 1));
	assert_int_equal(vs.nrec, 0);
	ch_vmap_free(&vs.map);
}

/* A marker written while streaming at P (a re-backfill, a dropped table)
 * is at (P + 1, 0): after the backfill rows at P (a stream that read
 * nothing since its snapshot) and every change at P, however long its
 * transaction, and before the chunks at later positions. */
static void test_version_streaming_marker(void **state)
{
	const uint64_t p = 0x15678A8;
	const struct sl_position s = fake_pos(12, 8192), h = fake_pos(12, 8192 + 19);
	const uint64_t ps = fake_desc.pos_csn(&s), ph = fake_desc.pos_csn(&h);

	(void)state;
	STREAM({ p, 0 }, { p + 1, 0 }, { p + 8, 0 });
	STREAM({ p, 0 }, { p, UINT32_MAX }, { p + 1, 0 }, { p + 8, 0 });
	STREAM({ ps, 0 }, { ps + 1, 0 }, { ph, 0 });
	STREAM({ ps, 0 }, { ps, UINT32_MAX }, { ps + 1, 0 }, { ph, 0 });
}

/* Inside one transaction every sequence number has its own version, and
 * the transaction's last change comes before the next one's first, even
 * at the next position. */
static void test_version_long_transaction(void **state)
{
	(void)state;
	STREAM({ 0x5000, 0 }, { 0x5000, 1 }, { 0x5000, 254 }, { 0x5000, 255 }, { 0x5000, 256 }, { 0x5000, 257 },
	       { 0x5000, 1u << 20 }, { 0x5000, (1u << 20) + 1 }, { 0x5000, UINT32_MAX - 1 }, { 0x5000, UINT32_MAX },
	       { 0x5001, 0 }, { 0x5001, 1 }, { 0x5002, 300 }, { 0x5003, 1 });
	/* the case of the issue: a TRUNCATE after a million changes */
	STREAM({ 0x16B374D848, 1 }, { 0x16B374D848, 999999 }, { 0x16B374D848, 1000000 },
	       { 0x16B374D848, 1000001 }, { 0x16B374D850, 1 });
	/* two long transactions in a row, at adjacent positions */
	STREAM({ 0x100, 70000 }, { 0x101, 1 }, { 0x101, 70000 }, { 0x102, 1 }, { 0x102, 255 }, { 0x103, 0 });

	/* the step: the next positions move up by what the long one used beyond 255 */
	struct vstream vs = { 0 };
	vs_change(&vs, 0x5000, 1);
	vs_change(&vs, 0x5000, 1000);
	assert_int_equal(vs.nrec, 0);
	assert_int_equal(vs_change(&vs, 0x5001, 1), (UINT64_C(0x5001) << 8) + 745 + 1);
	assert_int_equal(vs.nrec, 1);
	assert_int_equal(vs.rec[0].pos, 0x5000);
	assert_int_equal(vs.rec[0].shift, 745);
	/* a transaction within its 256 versions adds no step */
	vs_change(&vs, 0x5001, 255);
	assert_int_equal(vs_change(&vs, 0x5002, 1), (UINT64_C(0x5002) << 8) + 745 + 1);
	assert_int_equal(vs.nrec, 1);
	/* the step is made at the transaction's end (close), once */
	vs_change(&vs, 0x5002, 255);
	vs_change(&vs, 0x5002, 256);
	{
		struct ch_vstep st;
		assert_true(ch_vmap_pending(&vs.map));
		assert_int_equal(ch_vmap_close(&vs.map, &st), 1);
		assert_int_equal(st.pos, 0x5002);
		assert_int_equal(st.shift, 746);
		assert_false(ch_vmap_pending(&vs.map));
		assert_int_equal(ch_vmap_close(&vs.map, &st), 0);
		/* the next position needs no other */
		assert_int_equal(ch_vmap_note(&vs.map, 0x5003, 1, &st), 0);
		assert_int_equal(ch_version(0x5003, 1, ch_vmap_shift(&vs.map, 0x5003), &st.shift), 0);
		assert_int_equal(st.shift, (UINT64_C(0x5003) << 8) + 746 + 1);
	}
	/* shifts add up */
	vs_change(&vs, 0x5003, 300);
	assert_int_equal(vs_change(&vs, 0x6000, 0), (UINT64_C(0x6000) << 8) + 746 + 45);
	assert_int_equal(vs.nrec, 2);
	assert_int_equal(vs.rec[1].shift, 791);
	ch_vmap_free(&vs.map);
}

/* PostgreSQL: the LSN's low 32-bit word wraps into the high one. */
static void test_version_lsn_wraparound(void **state)
{
	(void)state;
	STREAM({ 0x00000001FFFFFFF8, 1 }, { 0x0000000200000010, 1 });
	/* a long transaction just before the wrap, a short one just after */
	STREAM({ 0x00000001FFFFFFF8, UINT32_MAX }, { 0x0000000200000000, 1 });
	STREAM({ 0x000000FFFFFFFFF0, 300 }, { 0x0000010000000008, 0 });
	/* an LSN of a cluster that wrote 16 PiB of WAL still fits */
	STREAM({ UINT64_C(0x0040000000000000), 7 }, { UINT64_C(0x0040000000000040), 2 });
}

/* MySQL: file number << 32 | offset; a new file starts at offset 4. */
static void test_version_binlog_rollover(void **state)
{
	struct sl_position a = fake_pos(5, 0xFFFFFF00u), b = fake_pos(6, 4), c = fake_pos(6, 5);
	uint64_t pa = fake_desc.pos_csn(&a), pb = fake_desc.pos_csn(&b), pc = fake_desc.pos_csn(&c);

	(void)state;
	STREAM({ pa, 1000 }, { pb, 1 });
	STREAM({ pa, 1 }, { pb, UINT32_MAX }, { pc, 0 });
	/* a file number far beyond what servers reach (2^24 files) */
	a = fake_pos(0xFFFFFF, 1);
	b = fake_pos(0xFFFFFF, 2);
	pa = fake_desc.pos_csn(&a);
	pb = fake_desc.pos_csn(&b);
	STREAM({ pa, 5 }, { pa, 1u << 20 }, { pb, 1 });
}

/* Backfill rows (sequence 0) at the snapshot position P come before the
 * changes of a transaction committed at P itself (a binlog snapshot's
 * position is the next transaction's start); the re-backfill marker at
 * P - 1 comes before both and after everything earlier. */
static void test_version_backfill_and_marker(void **state)
{
	uint64_t p = 0x16B374D848;

	(void)state;
	STREAM({ p - 2, UINT32_MAX }, { p - 1, 0 }, { p, 0 }, { p, 1 }, { p, 5000 }, { p + 8, 1 });
	struct sl_position s = fake_pos(12, 8192);
	uint64_t ps = fake_desc.pos_csn(&s);
	STREAM({ ps - 1, 0 }, { ps, 0 }, { ps, 1 }, { ps, 300 }, { ps + 1, 1 });
}

/* Tables written before the map (position << 8 | min(sequence, 255)): a
 * change's version never falls below the map-less version of any earlier
 * change, whatever the map holds (vs_change checks v >= old_ver). */
static void test_version_old_rows(void **state)
{
	struct vstream vs = { 0 };

	(void)state;
	/* an old table's long transaction at 0x5000 shared one version from 255 on */
	assert_true(vs_change(&vs, 0x5000, 256) > old_ver(0x5000, 255));
	assert_true(vs_change(&vs, 0x5000, 300) > old_ver(0x5000, 299));
	assert_true(vs_change(&vs, 0x5001, 0) > old_ver(0x5000, UINT32_MAX));
	ch_vmap_free(&vs.map);
}

/* A random stream of transactions (positions close together or far apart,
 * short and long transactions, backfill rows and markers): versions rise
 * strictly in CSN order (the CSN text is the reference), and a replay from
 * any transaction with the map as ClickHouse holds it (the steps recorded
 * so far, as a restarted sink reads them) gives every change the version it
 * had. */
static void test_version_matches_csn_order(void **state)
{
	enum { NTX = 4000 };
	static uint64_t pos[NTX];
	static uint32_t top[NTX];
	static uint64_t first[NTX], last[NTX];
	uint64_t x = 0x9E3779B97F4A7C15u, p = 0x1FFFFF000;
	struct vstream vs = { 0 };
	char prev_csn[SL_CSN_LEN + 1] = "", csn[SL_CSN_LEN + 1];
	uint64_t prev_v = 0;

	(void)state;
	for (int i = 0; i < NTX; i++) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		switch (x % 4) {
		case 0: p += 1; break;
		case 1: p += 8 + (x >> 40) % 64; break;
		case 2: p += (x >> 20) % 100000; break;
		default: p = (p | 0xFFFFFFFFu) + 1 + (x >> 50) % 2 * 4; break;  /* a new file, or the low word wraps */
		}
		pos[i] = p;
		top[i] = (x >> 8) % 5 == 0 ? (uint32_t)((x >> 30) % 3000000) : (uint32_t)((x >> 30) % 300);
	}
	for (int i = 0; i < NTX; i++) {
		/* the first, a sample in between, and the last change of each transaction */
		uint32_t seqs[3] = { 0, top[i] / 2, top[i] };
		for (int k = 0; k < 3; k++) {
			if (k > 0 && seqs[k] == seqs[k - 1])
				continue;
			uint64_t v = vs_change(&vs, pos[i], seqs[k]);
			sl_csn_format(csn, pos[i], seqs[k]);
			if (prev_csn[0] && !(strcmp(prev_csn, csn) < 0 && prev_v < v))
				fail_msg("%s after %s: version %llu after %llu", csn, prev_csn, (unsigned long long)v,
					 (unsigned long long)prev_v);
			memcpy(prev_csn, csn, sizeof csn);
			prev_v = v;
			if (k == 0)
				first[i] = v;
			last[i] = v;
		}
	}
	/* replays from a few starting transactions */
	for (int from = 0; from < NTX; from += 397) {
		struct ch_vmap m = { 0 };
		struct ch_vstep st;
		for (size_t k = 0; k < vs.map.n; k++)
			assert_int_equal(ch_vmap_add(&m, vs.map.steps[k].pos, vs.map.steps[k].shift), 1);
		for (int i = from; i < NTX; i++) {
			uint32_t seqs[2] = { 0, top[i] };
			for (int k = 0; k < 2; k++) {
				uint64_t v = 0;
				assert_true(ch_vmap_note(&m, pos[i], seqs[k], &st) >= 0);
				assert_int_equal(ch_version(pos[i], seqs[k], ch_vmap_shift(&m, pos[i]), &v), 0);
				assert_int_equal(v, k ? last[i] : first[i]);
			}
		}
		assert_int_equal(m.n, vs.map.n);
		ch_vmap_free(&m);
	}
	ch_vmap_free(&vs.map);
}

/* ------------------------------------------------------------------ */
/* RowBinary                                                            */

static struct sl_column mkcol(enum sl_type type, int p, int s)
{
	struct sl_column c;

	memset(&c, 0, sizeof c);
	c.name = (char *)"col_x";
	c.type = type;
	c.precision = p;
	c.scale = s;
	return c;
}

static void dump(const char *what, const struct sl_buf *b)
{
	fprintf(stderr, "# %s: got", what);
	for (size_t i = 0; i < b->len; i++)
		fprintf(stderr, " %02x", (unsigned char)b->data[i]);
	fprintf(stderr, "\n");
}

/* Encodes v into a column of sluice type `type` (nullable unless key) in
 * layout fl and checks the bytes and the return code (1: clamped); then
 * decodes them and checks the value comes back (or, clamped, that value). */
static void check_rb_fl(enum sl_type type, int p, int s, bool nullable, enum ch_flavor fl, int want_rc,
			struct sl_value v, const struct sl_value *clamped, const char *what,
			const unsigned char *want, size_t wantlen)
{
	struct sl_column col = mkcol(type, p, s);
	struct ch_type t;
	struct sl_buf b;
	struct sl_value back;
	char err[256] = "", scratch[CH_RB_SCRATCH];

	assert_int_equal(ch_type_of_column(&t, &col, nullable, fl), 0);
	sl_buf_init(&b, 0);
	if (ch_rb_put_value(&b, &t, &v, "col_x", err, sizeof err) != want_rc)
		fail_msg("%s: unexpected return: %s", what, err);
	if (b.len != wantlen || memcmp(b.data, want, wantlen) != 0) {
		dump(what, &b);
		fail_msg("%s: wrong encoding", what);
	}
	struct ch_rb_reader r = { (const unsigned char *)b.data, (const unsigned char *)b.data + b.len };
	if (ch_rb_get_value(&r, &t, &back, scratch) != 0 || r.p != r.end)
		fail_msg("%s: does not decode", what);
	if (v.kind == SL_V_UNCHANGED)
		v.kind = SL_V_NULL;
	if (clamped)
		v = *clamped;
	if (!sl_value_equal(&v, &back))
		fail_msg("%s: decodes to another value (kind %u)", what, back.kind);
	/* and it can be stepped over */
	r.p = (const unsigned char *)b.data;
	assert_int_equal(ch_rb_skip(&r, &t), 0);
	assert_ptr_equal(r.p, r.end);
	sl_buf_free(&b);
}

#define RB(type, p, s, nullable, v, ...)                                                 \
	do {                                                                             \
		static const unsigned char w_[] = { __VA_ARGS__ };                       \
		check_rb_fl(type, p, s, nullable, CH_LEGACY, 0, v, NULL, #v, w_, sizeof w_); \
	} while (0)

/* The same in the modern layout. */
#define RBM(type, p, s, nullable, v, ...)                                                \
	do {                                                                             \
		static const unsigned char w_[] = { __VA_ARGS__ };                       \
		check_rb_fl(type, p, s, nullable, CH_MODERN, 0, v, NULL, #v, w_, sizeof w_); \
	} while (0)

static struct sl_value tl_float_bits(uint32_t bits)
{
	float f;

	memcpy(&f, &bits, sizeof f);
	return tl_float(f);
}

static struct sl_value tl_double_bits(uint64_t bits)
{
	double d;

	memcpy(&d, &bits, sizeof d);
	return tl_double(d);
}

/* The modern layout's types (ch_rowbin.h): the expected bytes were worked
 * out by hand (decimals with Python's int.to_bytes, independently). */
static void test_rb_modern(void **state)
{
	static const unsigned char u[16] = { 0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77,
					     0x88, 0x99, 0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xff };
	struct ch_type t;
	struct sl_column col;

	(void)state;
	/* DateTime64(6): the same Int64 microseconds */
	RBM(SL_T_TIMESTAMPTZ, 0, 0, true, tl_ts(INT64_C(1709208000500000)),
	    0x00, 0x20, 0x91, 0xb7, 0xff, 0x83, 0x12, 0x06, 0x00);
	RBM(SL_T_TIMESTAMP, 0, 0, false, tl_ts(-1), 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff);
	/* Date32: Int32 days, its ends kept, beyond them clamped (return 1) */
	RBM(SL_T_DATE, 0, 0, true, tl_date(-25567), 0x00, 0x21, 0x9c, 0xff, 0xff);
	RBM(SL_T_DATE, 0, 0, true, tl_date(120529), 0x00, 0xd1, 0xd6, 0x01, 0x00);
	{
		static const unsigned char lo[] = { 0x00, 0x21, 0x9c, 0xff, 0xff };
		static const unsigned char hi[] = { 0xd1, 0xd6, 0x01, 0x00 };
		struct sl_value min = tl_date(-25567), max = tl_date(120529);
		check_rb_fl(SL_T_DATE, 0, 0, true, CH_MODERN, 1, tl_date(-719162), &min, "0001-01-01", lo, sizeof lo);
		check_rb_fl(SL_T_DATE, 0, 0, false, CH_MODERN, 1, tl_date(2932896), &max, "9999-12-31", hi, sizeof hi);
		check_rb_fl(SL_T_DATE, 0, 0, true, CH_MODERN, 1, tl_date(-25568), &min, "1899-12-31", lo, sizeof lo);
	}
	/* Bool: one byte */
	RBM(SL_T_BOOL, 0, 0, true, tl_bool(true), 0x00, 0x01);
	RBM(SL_T_BOOL, 0, 0, false, tl_bool(false), 0x00);
	/* UUID 00112233-4455-6677-8899-aabbccddeeff: two little-endian halves */
	RBM(SL_T_UUID, 0, 0, true, tl_uuid(u), 0x00, 0x77, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11, 0x00,
	    0xff, 0xee, 0xdd, 0xcc, 0xbb, 0xaa, 0x99, 0x88);
	/* Decimal at each width's widest value, negative, and the first of the next */
	RBM(SL_T_DECIMAL, 9, 0, false, tl_dec(true, "999999999", 0), 0x01, 0x36, 0x65, 0xc4);
	RBM(SL_T_DECIMAL, 10, 0, false, tl_dec(true, "1000000000", 0), 0x00, 0x36, 0x65, 0xc4, 0xff, 0xff, 0xff, 0xff);
	RBM(SL_T_DECIMAL, 18, 2, false, tl_dec(true, "999999999999999999", 2),
	    0x01, 0x00, 0x9c, 0x58, 0x4c, 0x49, 0x1f, 0xf2);
	RBM(SL_T_DECIMAL, 19, 0, false, tl_dec(true, "1000000000000000000", 0),
	    0x00, 0x00, 0x9c, 0x58, 0x4c, 0x49, 0x1f, 0xf2, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff);
	RBM(SL_T_DECIMAL, 38, 10, false, tl_dec(true, "99999999999999999999999999999999999999", 10),
	    0x01, 0x00, 0x00, 0x00, 0xc0, 0xdd, 0x75, 0xf6, 0x85, 0x3b, 0x79, 0xa5, 0x57, 0xb3, 0xc4, 0xb4);
	RBM(SL_T_DECIMAL, 39, 0, false, tl_dec(true, "100000000000000000000000000000000000000", 0),
	    0x00, 0x00, 0x00, 0x00, 0xc0, 0xdd, 0x75, 0xf6, 0x85, 0x3b, 0x79, 0xa5, 0x57, 0xb3, 0xc4, 0xb4,
	    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff);
	RBM(SL_T_DECIMAL, 76, 20, true,
	    tl_dec(true, "9999999999999999999999999999999999999999999999999999999999999999999999999999", 20),
	    0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xf0, 0x6a, 0x8e, 0x0e, 0x5a, 0x8a, 0x88,
	    0x86, 0xd6, 0x9a, 0x17, 0x54, 0x4b, 0x9b, 0xf8, 0x4a, 0xea, 0x66, 0xee, 0x58, 0x33, 0xe4, 0xe9);
	RBM(SL_T_DECIMAL, 76, 0, false, tl_dec(false, "7", 0), 0x07, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
	    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0);
	/* the types' SQL; wider than 76 digits is a String in both layouts */
	col = mkcol(SL_T_DECIMAL, 76, 2);
	assert_int_equal(ch_type_of_column(&t, &col, false, CH_MODERN), 0);
	assert_int_equal(t.ch, CH_DECIMAL);
	assert_int_equal(ch_type_of_column(&t, &col, false, CH_LEGACY), 0);
	assert_int_equal(t.ch, CH_STRING);
	col = mkcol(SL_T_DECIMAL, 77, 2);
	assert_int_equal(ch_type_of_column(&t, &col, false, CH_MODERN), 0);
	assert_int_equal(t.ch, CH_STRING);
	{
		static const struct { enum sl_type sl; const char *sql; } sqls[] = {
			{ SL_T_TIMESTAMPTZ, "Nullable(DateTime64(6, 'UTC'))" }, { SL_T_TIMESTAMP, "Nullable(DateTime64(6))" },
			{ SL_T_DATE, "Nullable(Date32)" }, { SL_T_BOOL, "Nullable(Bool)" }, { SL_T_UUID, "Nullable(UUID)" },
			{ SL_T_JSON, "Nullable(String)" }, { SL_T_TIME, "Nullable(Int64)" },
		};
		for (size_t i = 0; i < sizeof sqls / sizeof *sqls; i++) {
			struct sl_buf b;
			col = mkcol(sqls[i].sl, 0, 0);
			sl_buf_init(&b, 0);
			assert_int_equal(ch_type_of_column(&t, &col, true, CH_MODERN), 0);
			assert_int_equal(ch_type_sql(&b, &t), 0);
			assert_string_equal(b.data, sqls[i].sql);
			sl_buf_free(&b);
		}
	}
}

/* The layout a server's version() picks. */
static void test_flavor_of_version(void **state)
{
	static const struct { const char *v; int rc; enum ch_flavor fl; } cases[] = {
		{ "18.16.1\n", 0, CH_LEGACY }, { "22.8.5.29", 0, CH_LEGACY }, { "23.2.1.2537\n", 0, CH_MODERN },
		{ "26.7.2.1\n", 0, CH_MODERN }, { "100.1", 0, CH_MODERN }, { "23", -1, CH_LEGACY },
		{ "", -1, CH_LEGACY }, { "v23.1", -1, CH_LEGACY }, { "Code: 516. DB::Exception", -1, CH_LEGACY },
	};

	(void)state;
	for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
		enum ch_flavor fl = CH_LEGACY;
		assert_int_equal(ch_flavor_of_version(cases[i].v, strlen(cases[i].v), &fl), cases[i].rc);
		assert_int_equal(fl, cases[i].fl);
	}
}

static void test_rb_scalars(void **state)
{
	(void)state;
	RB(SL_T_INT32, 0, 0, true, tl_int(42), 0x00, 0x2a, 0x00, 0x00, 0x00);
	RB(SL_T_INT32, 0, 0, true, tl_int(INT32_MIN), 0x00, 0x00, 0x00, 0x00, 0x80);
	RB(SL_T_INT32, 0, 0, false, tl_int(-1), 0xff, 0xff, 0xff, 0xff);
	RB(SL_T_INT64, 0, 0, true, tl_int(INT64_MIN), 0x00, 0, 0, 0, 0, 0, 0, 0, 0x80);
	RB(SL_T_INT64, 0, 0, true, tl_int(1234567890123), 0x00, 0xcb, 0x04, 0xfb, 0x71, 0x1f, 0x01, 0, 0);
	/* MySQL BIGINT UNSIGNED: UInt64, the full range */
	RB(SL_T_UINT64, 0, 0, true, ((struct sl_value){ .kind = SL_V_UINT, .u = UINT64_MAX }),
	   0x00, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff);
	RB(SL_T_UINT64, 0, 0, false, ((struct sl_value){ .kind = SL_V_UINT, .u = 0x8000000000000001 }),
	   0x01, 0, 0, 0, 0, 0, 0, 0x80);
	RB(SL_T_BOOL, 0, 0, true, tl_bool(true), 0x00, 0x01);
	RB(SL_T_BOOL, 0, 0, true, tl_bool(false), 0x00, 0x00);
	/* floats: the bits, NaN payloads and negative zero included */
	RB(SL_T_FLOAT, 0, 0, true, tl_float(1.5f), 0x00, 0x00, 0x00, 0xc0, 0x3f);
	RB(SL_T_FLOAT, 0, 0, true, tl_float_bits(0x7fc00000), 0x00, 0x00, 0x00, 0xc0, 0x7f);
	RB(SL_T_FLOAT, 0, 0, true, tl_float_bits(0xffc00001), 0x00, 0x01, 0x00, 0xc0, 0xff);
	RB(SL_T_FLOAT, 0, 0, true, tl_float(-INFINITY), 0x00, 0x00, 0x00, 0x80, 0xff);
	RB(SL_T_FLOAT, 0, 0, true, tl_float(-0.0f), 0x00, 0x00, 0x00, 0x00, 0x80);
	RB(SL_T_DOUBLE, 0, 0, true, tl_double(INFINITY), 0x00, 0, 0, 0, 0, 0, 0, 0xf0, 0x7f);
	RB(SL_T_DOUBLE, 0, 0, true, tl_double_bits(0x7ff8000000000001), 0x00, 0x01, 0, 0, 0, 0, 0, 0xf8, 0x7f);
	RB(SL_T_DOUBLE, 0, 0, true, tl_double(2.718281828459045), 0x00, 0x69, 0x57, 0x14, 0x8b, 0x0a, 0xbf, 0x05, 0x40);
	/* dates as Int32 days, times and timestamps as Int64 microseconds */
	RB(SL_T_DATE, 0, 0, true, tl_date(-719162), 0x00, 0xc6, 0x06, 0xf5, 0xff);
	RB(SL_T_DATE, 0, 0, true, tl_date(2146764528), 0x00, 0xf0, 0x06, 0xf5, 0x7f);
	RB(SL_T_TIME, 0, 0, true, tl_time(86400000000), 0x00, 0x00, 0x60, 0xd7, 0x1d, 0x14, 0x00, 0x00, 0x00);
	RB(SL_T_TIMESTAMP, 0, 0, true, tl_ts(-62135596800000000), 0x00, 0x00, 0x40, 0xd4, 0x00, 0x01, 0x40, 0x23, 0xff);
	RB(SL_T_TIMESTAMPTZ, 0, 0, true, tl_ts(INT64_MAX), 0x00, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f);
	/* null, and unchanged (written as null; the row lists it) */
	RB(SL_T_INT64, 0, 0, true, tl_null(), 0x01);
	RB(SL_T_STRING, 0, 0, true, tl_unchanged(), 0x01);
}

static void test_rb_strings(void **state)
{
	static const unsigned char raw[] = { 0x00, 0xff, 0x0a, 0x22 };
	static const unsigned char u[16] = { 0xa0, 0xee, 0xbc, 0x99, 0x9c, 0x0b, 0x4e, 0xf8,
					     0xbb, 0x6d, 0x6b, 0xb9, 0xbd, 0x38, 0x0a, 0x11 };
	char long_text[200];

	(void)state;
	RB(SL_T_STRING, 0, 0, true, tl_str(""), 0x00, 0x00);
	/* unicode: the UTF-8 bytes as they are */
	RB(SL_T_STRING, 0, 0, true, tl_str("h\xc3\xa9 \xe2\x9c\x93"), 0x00, 0x07, 'h', 0xc3, 0xa9, ' ', 0xe2, 0x9c,
	   0x93);
	RB(SL_T_STRING, 0, 0, false, tl_str("k"), 0x01, 'k');
	RB(SL_T_JSON, 0, 0, true, tl_json("{\"a\":1}"), 0x00, 0x07, '{', '"', 'a', '"', ':', '1', '}');
	RB(SL_T_BYTES, 0, 0, true, tl_bytes(raw, sizeof raw), 0x00, 0x04, 0x00, 0xff, 0x0a, 0x22);
	RB(SL_T_UUID, 0, 0, true, tl_uuid(u), 0x00, 36, 'a', '0', 'e', 'e', 'b', 'c', '9', '9', '-', '9', 'c', '0',
	   'b', '-', '4', 'e', 'f', '8', '-', 'b', 'b', '6', 'd', '-', '6', 'b', 'b', '9', 'b', 'd', '3', '8', '0', 'a',
	   '1', '1');
	/* a length of 128 or more takes two LEB128 bytes */
	memset(long_text, 'x', sizeof long_text - 1);
	long_text[sizeof long_text - 1] = '\0';
	{
		struct sl_column col = mkcol(SL_T_STRING, 0, 0);
		struct ch_type t;
		struct sl_buf b;
		char err[128];
		struct sl_value v = tl_str(long_text);
		sl_buf_init(&b, 0);
		assert_int_equal(ch_type_of_column(&t, &col, true, CH_LEGACY), 0);
		assert_int_equal(ch_rb_put_value(&b, &t, &v, "c", err, sizeof err), 0);
		assert_int_equal(b.len, 1 + 2 + 199);
		assert_int_equal((unsigned char)b.data[1], 0xc7);
		assert_int_equal((unsigned char)b.data[2], 0x01);
		sl_buf_free(&b);
	}
}

static void test_rb_decimals(void **state)
{
	(void)state;
	/* Decimal(5,2) is a Decimal32, (12,2) a Decimal64, (38,10) a Decimal128 */
	RB(SL_T_DECIMAL, 5, 2, true, tl_dec(false, "12345", 2), 0x00, 0x39, 0x30, 0x00, 0x00);
	RB(SL_T_DECIMAL, 12, 2, true, tl_dec(true, "123450", 2), 0x00, 0xc6, 0x1d, 0xfe, 0xff, 0xff, 0xff, 0xff, 0xff);
	RB(SL_T_DECIMAL, 12, 2, true, tl_dec(false, "0", 2), 0x00, 0, 0, 0, 0, 0, 0, 0, 0);
	RB(SL_T_DECIMAL, 18, 0, false, tl_dec(false, "999999999999999999", 0), 0xff, 0xff, 0x63, 0xa7, 0xb3, 0xb6,
	   0xe0, 0x0d);
	/* 10^38 - 1 and its negative: 0x4B3B4CA85A86C47A098A223FFFFFFFFF */
	RB(SL_T_DECIMAL, 38, 10, true, tl_dec(false, "99999999999999999999999999999999999999", 10), 0x00, 0xff,
	   0xff, 0xff, 0xff, 0x3f, 0x22, 0x8a, 0x09, 0x7a, 0xc4, 0x86, 0x5a, 0xa8, 0x4c, 0x3b, 0x4b);
	RB(SL_T_DECIMAL, 38, 10, true, tl_dec(true, "99999999999999999999999999999999999999", 10), 0x00, 0x01, 0x00,
	   0x00, 0x00, 0xc0, 0xdd, 0x75, 0xf6, 0x85, 0x3b, 0x79, 0xa5, 0x57, 0xb3, 0xc4, 0xb4);
	RB(SL_T_DECIMAL, 19, 4, true, tl_dec(true, "1", 4), 0x00, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
	   0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff);
	/* wider than 38 digits: the text, with exactly the scale's digits */
	RB(SL_T_DECIMAL, 40, 5, true, tl_dec(true, "1234567890123456789012345678901234567890", 5), 0x00, 42, '-', '1',
	   '2', '3', '4', '5', '6', '7', '8', '9', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9', '0', '1', '2', '3',
	   '4', '5', '6', '7', '8', '9', '0', '1', '2', '3', '4', '5', '.', '6', '7', '8', '9', '0');
	RB(SL_T_DECIMAL, 40, 5, true, tl_dec(false, "1", 5), 0x00, 7, '0', '.', '0', '0', '0', '0', '1');
	RB(SL_T_DECIMAL, 40, 5, true, tl_dec(false, "0", 5), 0x00, 7, '0', '.', '0', '0', '0', '0', '0');
	RB(SL_T_DECIMAL, 40, 5, true, tl_dec(false, "123456", 5), 0x00, 7, '1', '.', '2', '3', '4', '5', '6');
	RB(SL_T_DECIMAL, 60, 0, true, tl_dec(true, "7", 0), 0x00, 2, '-', '7');
}

/* A smaller scale than the column's is padded; the value decodes with the
 * column's scale. */
static void test_rb_decimal_padding(void **state)
{
	struct sl_column col = mkcol(SL_T_DECIMAL, 12, 2);
	struct ch_type t;
	struct sl_buf b;
	struct sl_value v = tl_dec(false, "125", 1), back;
	char err[128], scratch[CH_RB_SCRATCH];
	static const unsigned char want[] = { 0x00, 0xe2, 0x04, 0, 0, 0, 0, 0, 0 };

	(void)state;
	sl_buf_init(&b, 0);
	assert_int_equal(ch_type_of_column(&t, &col, true, CH_LEGACY), 0);
	assert_int_equal(ch_rb_put_value(&b, &t, &v, "c", err, sizeof err), 0);
	assert_int_equal(b.len, sizeof want);
	assert_memory_equal(b.data, want, sizeof want);
	struct ch_rb_reader r = { (const unsigned char *)b.data, (const unsigned char *)b.data + b.len };
	assert_int_equal(ch_rb_get_value(&r, &t, &back, scratch), 0);
	assert_int_equal(back.scale, 2);
	assert_int_equal(back.len, 4);
	assert_memory_equal(back.p, "1250", 4);
	/* leading zeros in the input are not digits of the value */
	sl_buf_reset(&b);
	v = tl_dec(false, "000000000000012", 2);
	assert_int_equal(ch_rb_put_value(&b, &t, &v, "c", err, sizeof err), 0);
	sl_buf_free(&b);
}

/* Refusals name the column and leave the buffer as it was. */
static void check_refused(enum sl_type type, int p, int s, bool nullable, struct sl_value v, const char *needle)
{
	struct sl_column col = mkcol(type, p, s);
	struct ch_type t;
	struct sl_buf b;
	char err[256] = "";

	assert_int_equal(ch_type_of_column(&t, &col, nullable, CH_LEGACY), 0);
	sl_buf_init(&b, 0);
	sl_buf_puts(&b, "keep");
	if (ch_rb_put_value(&b, &t, &v, "col_x", err, sizeof err) == 0)
		fail_msg("a value of kind %u was accepted for type %d", v.kind, (int)type);
	assert_int_equal(b.len, 4);
	assert_memory_equal(b.data, "keep", 5);
	assert_non_null(strstr(err, "column \"col_x\""));
	if (!strstr(err, needle))
		fail_msg("message \"%s\" lacks \"%s\"", err, needle);
	sl_buf_free(&b);
}

static void test_rb_refused(void **state)
{
	(void)state;
	check_refused(SL_T_INT32, 0, 0, true, tl_int((int64_t)INT32_MAX + 1), "out of range");
	check_refused(SL_T_DATE, 0, 0, true, tl_date((int64_t)INT32_MIN - 1), "out of range");
	check_refused(SL_T_INT64, 0, 0, true, tl_str("1"), "does not fit type int64");
	check_refused(SL_T_UINT64, 0, 0, true, tl_int(1), "does not fit type uint64");
	check_refused(SL_T_DECIMAL, 5, 2, true, tl_dec(false, "123456", 2), "6 digits does not fit decimal(5,2)");
	check_refused(SL_T_DECIMAL, 5, 2, true, tl_dec(false, "1", 3), "scale 3 does not fit");
	check_refused(SL_T_DECIMAL, 40, 2, true, tl_dec(false, "12a", 2), "invalid decimal digits");
	check_refused(SL_T_INT32, 0, 0, false, tl_null(), "cannot be null");
	struct sl_value u = tl_str("0123456789abcdef0");
	u.kind = SL_V_UUID;
	check_refused(SL_T_UUID, 0, 0, true, u, "not 16");
}

/* Bytes that are not a value of the column's type do not decode. */
static void test_rb_bad_input(void **state)
{
	struct sl_column col = mkcol(SL_T_UUID, 0, 0);
	struct ch_type t;
	struct sl_value v;
	char scratch[CH_RB_SCRATCH];
	static const unsigned char not_uuid[] = { 0x00, 3, 'a', 'b', 'c' };
	static const unsigned char truncated[] = { 0x00, 9, 'a' };
	static const unsigned char bad_flag[] = { 0x02 };
	struct ch_rb_reader r;

	(void)state;
	assert_int_equal(ch_type_of_column(&t, &col, true, CH_LEGACY), 0);
	r = (struct ch_rb_reader){ not_uuid, not_uuid + sizeof not_uuid };
	assert_int_equal(ch_rb_get_value(&r, &t, &v, scratch), -1);
	r = (struct ch_rb_reader){ truncated, truncated + sizeof truncated };
	assert_int_equal(ch_rb_get_value(&r, &t, &v, scratch), -1);
	r = (struct ch_rb_reader){ bad_flag, bad_flag + sizeof bad_flag };
	assert_int_equal(ch_rb_get_value(&r, &t, &v, scratch), -1);
	col = mkcol(SL_T_DECIMAL, 40, 2);
	assert_int_equal(ch_type_of_column(&t, &col, false, CH_LEGACY), 0);
	static const unsigned char good[] = { 4, '1', '.', '2', '3' };
	static const unsigned char wrong_scale[] = { 5, '1', '.', '2', '3', '4' };
	static const unsigned char no_digits[] = { 2, '-', '.' };
	r = (struct ch_rb_reader){ good, good + 3 };  /* cut short */
	assert_int_equal(ch_rb_get_value(&r, &t, &v, scratch), -1);
	r = (struct ch_rb_reader){ good, good + sizeof good };
	assert_int_equal(ch_rb_get_value(&r, &t, &v, scratch), 0);
	assert_int_equal(v.len, 3);
	assert_memory_equal(v.p, "123", 3);
	r = (struct ch_rb_reader){ wrong_scale, wrong_scale + sizeof wrong_scale };
	assert_int_equal(ch_rb_get_value(&r, &t, &v, scratch), -1);
	r = (struct ch_rb_reader){ no_digits, no_digits + sizeof no_digits };
	assert_int_equal(ch_rb_get_value(&r, &t, &v, scratch), -1);
}

/* Random decimals of every width: encode, decode, equal. */
static void test_rb_decimal_roundtrip(void **state)
{
	uint64_t x = 88172645463325252u;
	char digits[SL_DECIMAL_MAX_DIGITS + 1], scratch[CH_RB_SCRATCH], err[256];

	(void)state;
	for (int i = 0; i < 20000; i++) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		int p = (int)(x % 60) + 1, s = (int)((x >> 8) % (uint64_t)(p + 1)), n = (int)((x >> 16) % (uint64_t)p) + 1;
		for (int k = 0; k < n; k++) {
			x ^= x << 13, x ^= x >> 7, x ^= x << 17;
			digits[k] = (char)('0' + x % 10);
		}
		if (digits[0] == '0')
			digits[0] = '1';
		if (n == 1 && x % 7 == 0)
			digits[0] = '0';
		digits[n] = '\0';
		struct sl_value v = tl_dec((x >> 30) % 2 && digits[0] != '0', digits, s), back;
		struct sl_column col = mkcol(SL_T_DECIMAL, p, s);
		struct ch_type t;
		struct sl_buf b;
		sl_buf_init(&b, 0);
		assert_int_equal(ch_type_of_column(&t, &col, (x >> 40) % 2, CH_LEGACY), 0);
		if (ch_rb_put_value(&b, &t, &v, "c", err, sizeof err) != 0)
			fail_msg("decimal(%d,%d) %s: %s", p, s, digits, err);
		struct ch_rb_reader r = { (const unsigned char *)b.data, (const unsigned char *)b.data + b.len };
		if (ch_rb_get_value(&r, &t, &back, scratch) != 0 || r.p != r.end || !sl_value_equal(&v, &back))
			fail_msg("decimal(%d,%d) %s%s does not come back", p, s, v.neg ? "-" : "", digits);
		sl_buf_free(&b);
	}
}

/* ------------------------------------------------------------------ */
/* layouts and SQL                                                      */

static const struct tl_col every_type[] = {
	{ "id", T_INT8, -1, "bigint", true },
	{ "c_int4", T_INT4, -1, "integer", false },
	{ "c_num", T_NUMERIC, 0, "numeric(12,2)", false },
	{ "c_wide", T_NUMERIC, 0, "numeric(60,4)", false },
	{ "c_f4", T_FLOAT4, -1, "real", false },
	{ "c_f8", T_FLOAT8, -1, "double precision", false },
	{ "c_bool", T_BOOL, -1, "boolean", false },
	{ "c_text", T_TEXT, -1, "text", false },
	{ "c_bytea", T_BYTEA, -1, "bytea", false },
	{ "c_date", T_DATE, -1, "date", false },
	{ "c_time", T_TIME, -1, "time", false },
	{ "c_ts", T_TIMESTAMP, -1, "timestamp", false },
	{ "c_tstz", T_TIMESTAMPTZ, -1, "timestamptz", false },
	{ "c_uuid", T_UUID, -1, "uuid", false },
	{ "c_json", T_JSONB, -1, "jsonb", false },
	{ "_version", T_TEXT, -1, "text", false },
	{ "we`ird \\ name", T_INT4, -1, "integer", false },
};

static struct sl_table *every_type_table(void)
{
	struct tl_col cols[sizeof every_type / sizeof every_type[0]];

	memcpy(cols, every_type, sizeof cols);
	cols[2].typmod = numeric_typmod(12, 2);
	cols[3].typmod = numeric_typmod(60, 4);
	return tl_table("public", "every_type", cols, (int)(sizeof cols / sizeof cols[0]));
}

static void test_column_names(void **state)
{
	char *a = ch_column_name("_version"), *b = ch_column_name("__x"), *c = ch_column_name("plain");

	(void)state;
	assert_string_equal(a, "__version");
	assert_string_equal(b, "___x");
	assert_string_equal(c, "plain");
	free(a);
	free(b);
	free(c);
}

static void test_quote(void **state)
{
	struct sl_buf b;

	(void)state;
	sl_buf_init(&b, 0);
	ch_quote_ident(&b, "a`b\\c\x01\x7f\xc3\xa9;DROP TABLE t");
	assert_string_equal(b.data, "`a\\`b\\\\c\\x01\\x7F\xc3\xa9;DROP TABLE t`");
	sl_buf_reset(&b);
	ch_quote_str(&b, "it's \\ `fine`\n", 14);
	assert_string_equal(b.data, "'it\\'s \\\\ `fine`\\x0A'");
	sl_buf_reset(&b);
	ch_qname(&b, "re`plica", "public_orders", CH_VIEW_SUFFIX);
	assert_string_equal(b.data, "`re\\`plica`.`public_orders_current`");
	sl_buf_free(&b);
}

static const char create_append[] =
	"CREATE TABLE IF NOT EXISTS `replica`.`public_every__type` (`id` Nullable(Int64), `c_int4` Nullable(Int32), "
	"`c_num` Nullable(Decimal(12, 2)), `c_wide` Nullable(String), `c_f4` Nullable(Float32), "
	"`c_f8` Nullable(Float64), `c_bool` Nullable(UInt8), `c_text` Nullable(String), `c_bytea` Nullable(String), "
	"`c_date` Nullable(Int32), `c_time` Nullable(Int64), `c_ts` Nullable(Int64), `c_tstz` Nullable(Int64), "
	"`c_uuid` Nullable(String), `c_json` Nullable(String), `__version` Nullable(String), "
	"`we\\`ird \\\\ name` Nullable(Int32), `_uuid` String, `_source_timestamp` Int64, `_read_timestamp` Int64, "
	"`_change_type` String, `_csn` String, `_version` UInt64, `_is_deleted` UInt8, `_tx_id` UInt64, "
	"`_unchanged_columns` Array(String), `_lsn` String) ENGINE = ReplacingMergeTree ORDER BY (`_csn`, `_uuid`)";

static void test_layout_create(void **state)
{
	struct sl_table *t = every_type_table();
	struct ch_layout *l;
	struct sl_buf b;
	char err[256];
	const char *merge_tail = "`_lsn` String) ENGINE = ReplacingMergeTree(`_version`) ORDER BY (`id`)";

	(void)state;
	sl_buf_init(&b, 0);
	/* the object name decides the table name: public.every_type */
	assert_int_equal(ch_layout_new(&l, t, false, CH_LEGACY, err, sizeof err), 0);
	free(l->object);
	l->object = strdup("public_every__type");
	assert_int_equal(ch_sql_create_table(&b, NULL, "replica", l), 0);
	assert_string_equal(b.data, create_append);
	assert_int_equal(l->nkeys, 0);
	ch_layout_free(l);

	assert_int_equal(ch_layout_new(&l, t, true, CH_LEGACY, err, sizeof err), 0);
	sl_buf_reset(&b);
	assert_int_equal(ch_sql_create_table(&b, NULL, "replica", l), 0);
	assert_non_null(strstr(b.data, "(`id` Int64, `c_int4` Nullable(Int32)"));
	assert_string_equal(b.data + b.len - strlen(merge_tail), merge_tail);
	assert_int_equal(l->nkeys, 1);
	sl_buf_reset(&b);
	ch_sql_create_view(&b, NULL, "replica", l->object);
	assert_string_equal(b.data, "CREATE VIEW IF NOT EXISTS `replica`.`public_every_type_current` AS SELECT * "
			    "FROM `replica`.`public_every_type` FINAL WHERE `_is_deleted` = 0");
	{
		struct sl_buf q, st;
		sl_buf_init(&q, 0);
		sl_buf_init(&st, 0);
		assert_int_equal(ch_sql_lookup(&q, &st, "replica", l), 0);
		/* the layout's columns by name, in its order (the table may have
		 * more: a column kept for a later version) */
		assert_string_equal(q.data, "SELECT `id`, `c_int4`, `c_num`, `c_wide`, `c_f4`, `c_f8`, `c_bool`, "
				    "`c_text`, `c_bytea`, `c_date`, `c_time`, `c_ts`, `c_tstz`, `c_uuid`, `c_json`, "
				    "`__version`, `we\\`ird \\\\ name`, `_uuid`, `_source_timestamp`, "
				    "`_read_timestamp`, `_change_type`, `_csn`, `_version`, `_is_deleted`, `_tx_id`, "
				    "`_unchanged_columns`, `_lsn` FROM `replica`.`public_every_type` FINAL WHERE (`id`) IN "
				    "(SELECT k0 FROM sluice_keys) FORMAT RowBinary");
		assert_string_equal(st.data, "k0 Int64");
		sl_buf_free(&q);
		sl_buf_free(&st);
	}
	ch_layout_free(l);
	sl_table_free(t);
	sl_buf_free(&b);
}

/* The metadata columns of a CREATE TABLE, in each layout. */
static const char meta_legacy[] =
	"`_uuid` String, `_source_timestamp` Int64, `_read_timestamp` Int64, `_change_type` String, "
	"`_csn` String, `_version` UInt64, `_is_deleted` UInt8, `_tx_id` UInt64, "
	"`_unchanged_columns` Array(String), `_lsn` String)";
static const char meta_modern[] =
	"`_uuid` UUID, `_source_timestamp` DateTime64(6, 'UTC'), `_read_timestamp` DateTime64(6, 'UTC'), "
	"`_change_type` String, `_csn` String, `_version` UInt64, `_is_deleted` UInt8, `_tx_id` UInt64, "
	"`_unchanged_columns` Array(String), `_lsn` String)";

/* A merge-mode layout needs a primary key: the sink's own check. */
/* The CREATE TABLE of t (merge or append, layout fl) for d in db is head,
 * meta (the metadata columns), tail. */
static void expect_create(const struct ch_ddl *d, const char *db, struct sl_table *t, bool merge, enum ch_flavor fl,
			  const char *head, const char *meta, const char *tail)
{
	struct ch_layout *l;
	struct sl_buf b, want;
	char err[256];

	sl_buf_init(&b, 0);
	sl_buf_init(&want, 0);
	assert_int_equal(ch_layout_new(&l, t, merge, fl, err, sizeof err), 0);
	assert_int_equal(ch_sql_create_table(&b, d, db, l), 0);
	sl_buf_puts(&want, head);
	sl_buf_puts(&want, meta);
	sl_buf_puts(&want, tail);
	assert_string_equal(b.data, want.data);
	ch_layout_free(l);
	sl_buf_free(&b);
	sl_buf_free(&want);
}

/* DDL for a cluster (doc/clickhouse.md, "Clusters"): every statement that
 * makes, alters or drops gets ON CLUSTER with the quoted name, the engines
 * are Replicated with the path's {database} and {table} filled in (and
 * quoted as a string), {shard} and '{replica}' left to the servers; in both
 * layouts, merge and append, and sluice's own tables.  Without a cluster
 * (NULL, or a NULL name) the text is the one-server text. */
static void test_cluster_ddl(void **state)
{
	static const struct tl_col cols[] = {
		{ "id", T_INT4, -1, "integer", true }, { "at", T_TIMESTAMPTZ, -1, "timestamptz", false },
	};
	const struct ch_ddl cl = { .cluster = "main`s", .replica_path = "/ch/{shard}/{database}/{table}/x{table}" };
	const struct ch_ddl none = { .cluster = NULL, .replica_path = "/ch/{shard}/{database}/{table}" };
	struct sl_table *t = tl_table("public", "t", cols, 2);
	struct ch_layout *l;
	struct sl_buf b;
	char err[256];
	int add[1] = { 1 };

	(void)state;
	sl_buf_init(&b, 0);
	/* CREATE TABLE: legacy and modern, merge and append, with and without a cluster */
	expect_create(&cl, "d'b", t, true, CH_LEGACY, "CREATE TABLE IF NOT EXISTS `d'b`.`public_t` ON CLUSTER `main\\`s` "
		      "(`id` Int32, `at` Nullable(Int64), ", meta_legacy, " ENGINE = ReplicatedReplacingMergeTree("
		      "'/ch/{shard}/d\\'b/public_t/xpublic_t', '{replica}', `_version`) ORDER BY (`id`)");
	expect_create(&none, "d'b", t, true, CH_LEGACY, "CREATE TABLE IF NOT EXISTS `d'b`.`public_t` (`id` Int32, "
		      "`at` Nullable(Int64), ", meta_legacy, " ENGINE = ReplacingMergeTree(`_version`) ORDER BY (`id`)");
	expect_create(&cl, "db", t, true, CH_MODERN, "CREATE TABLE IF NOT EXISTS `db`.`public_t` ON CLUSTER `main\\`s` "
		      "(`id` Int32, `at` Nullable(DateTime64(6, 'UTC')), ", meta_modern, " ENGINE = "
		      "ReplicatedReplacingMergeTree('/ch/{shard}/db/public_t/xpublic_t', '{replica}', `_version`, "
		      "`_is_deleted`) ORDER BY (`id`)");
	expect_create(&cl, "db", t, false, CH_MODERN, "CREATE TABLE IF NOT EXISTS `db`.`public_t` ON CLUSTER "
		      "`main\\`s` (`id` Nullable(Int32), `at` Nullable(DateTime64(6, 'UTC')), ", meta_modern,
		      " ENGINE = ReplicatedReplacingMergeTree('/ch/{shard}/db/public_t/xpublic_t', '{replica}') "
		      "ORDER BY (`_csn`, `_uuid`)");
	expect_create(&cl, "db", t, false, CH_LEGACY, "CREATE TABLE IF NOT EXISTS `db`.`public_t` ON CLUSTER "
		      "`main\\`s` (`id` Nullable(Int32), `at` Nullable(Int64), ", meta_legacy, " ENGINE = "
		      "ReplicatedReplacingMergeTree('/ch/{shard}/db/public_t/xpublic_t', '{replica}') "
		      "ORDER BY (`_csn`, `_uuid`)");

	/* the view, a column added */
	assert_int_equal(ch_layout_new(&l, t, true, CH_LEGACY, err, sizeof err), 0);
	assert_int_equal(ch_sql_create_view(&b, &cl, "db", l->object), 0);
	assert_string_equal(b.data, "CREATE VIEW IF NOT EXISTS `db`.`public_t_current` ON CLUSTER `main\\`s` AS "
			    "SELECT * FROM `db`.`public_t` FINAL WHERE `_is_deleted` = 0");
	sl_buf_reset(&b);
	assert_int_equal(ch_sql_drop_view(&b, &cl, "db", l->object), 0);
	assert_string_equal(b.data, "DROP TABLE IF EXISTS `db`.`public_t_current` ON CLUSTER `main\\`s`");
	sl_buf_reset(&b);
	assert_int_equal(ch_sql_add_columns(&b, &cl, "db", l, add, 1, NULL), 0);
	assert_string_equal(b.data, "ALTER TABLE `db`.`public_t` ON CLUSTER `main\\`s` ADD COLUMN `at` "
			    "Nullable(Int64)");
	ch_layout_free(l);

	/* the database, sluice's own tables, the interrupted backfill's DELETE */
	sl_buf_reset(&b);
	assert_int_equal(ch_sql_create_database(&b, &cl, "db"), 0);
	assert_string_equal(b.data, "CREATE DATABASE IF NOT EXISTS `db` ON CLUSTER `main\\`s`");
	sl_buf_reset(&b);
	assert_int_equal(ch_sql_create_database(&b, NULL, "db"), 0);
	assert_string_equal(b.data, "CREATE DATABASE IF NOT EXISTS `db`");
	sl_buf_reset(&b);
	assert_int_equal(ch_sql_vmap_create(&b, &cl, "db"), 0);
	assert_string_equal(b.data, "CREATE TABLE IF NOT EXISTS `db`.`_sluice_version_map` ON CLUSTER `main\\`s` "
			    "(`object` String, `pos` UInt64, `shift` UInt64) ENGINE = ReplicatedReplacingMergeTree("
			    "'/ch/{shard}/db/_sluice_version_map/x_sluice_version_map', '{replica}') "
			    "ORDER BY (`object`, `pos`)");
	sl_buf_reset(&b);
	assert_int_equal(ch_sql_columns_create(&b, &cl, "db"), 0);
	assert_string_equal(b.data, "CREATE TABLE IF NOT EXISTS `db`.`_sluice_columns` ON CLUSTER `main\\`s` "
			    "(`object` String, `name` String, `type` String) ENGINE = ReplicatedReplacingMergeTree("
			    "'/ch/{shard}/db/_sluice_columns/x_sluice_columns', '{replica}') ORDER BY (`object`, `name`)");
	sl_buf_reset(&b);
	assert_int_equal(ch_sql_columns_create(&b, &none, "db"), 0);
	assert_string_equal(b.data, "CREATE TABLE IF NOT EXISTS `db`.`_sluice_columns` (`object` String, "
			    "`name` String, `type` String) ENGINE = ReplacingMergeTree ORDER BY (`object`, `name`)");
	sl_buf_reset(&b);
	assert_int_equal(ch_sql_delete_csn_range(&b, &cl, "db", "public_t", "A", "B"), 0);
	assert_string_equal(b.data, "ALTER TABLE `db`.`public_t` ON CLUSTER `main\\`s` DELETE WHERE `_csn` >= 'A' "
			    "AND `_csn` <= 'B'");
	sl_table_free(t);
	sl_buf_free(&b);
}

/* The columns ClickHouse lists for a table made from layout l: name, type,
 * in_sorting_key.  Freed with free_cols(). */
static struct ch_dest_col *cols_of(const struct ch_layout *l)
{
	struct ch_dest_col *c = calloc((size_t)l->ncols, sizeof *c);

	for (int i = 0; i < l->ncols; i++) {
		struct sl_buf ty;
		sl_buf_init(&ty, 0);
		ch_type_sql(&ty, &l->cols[i].type);
		c[i].name = strdup(l->cols[i].name);
		c[i].type = sl_buf_detach(&ty);
		c[i].in_sorting_key = l->cols[i].key;
	}
	return c;
}

static void free_cols(struct ch_dest_col *c, int n)
{
	for (int i = 0; i < n; i++) {
		free(c[i].name);
		free(c[i].type);
	}
	free(c);
}

/* The Distributed table of t (merge or append, layout fl) for d in db:
 * over the columns a table made from the layout has. */
static void expect_distributed(const struct ch_ddl *d, struct sl_table *t, bool merge, enum ch_flavor fl,
			       const char *want)
{
	struct ch_layout *l;
	struct ch_dest_col *c;
	struct sl_buf b;
	char err[256];

	sl_buf_init(&b, 0);
	assert_int_equal(ch_layout_new(&l, t, merge, fl, err, sizeof err), 0);
	c = cols_of(l);
	assert_int_equal(ch_sql_create_distributed(&b, d, "d'b", l->object, c, l->ncols), 0);
	assert_string_equal(b.data, want);
	free_cols(c, l->ncols);
	ch_layout_free(l);
	sl_buf_free(&b);
}

/* distributed = true (doc/clickhouse.md, "Distributed tables"): the local
 * tables are <table>_local (their replica path too), and <table> is a
 * Distributed table with the local table's columns, sharded by cityHash64
 * of its sorting key (the primary key in merge mode, _uuid and _csn in
 * append mode, in column order; a decimal as text), in both layouts; the
 * DDL and the mutations that concern rows go to the local tables, reads
 * and inserts name <table>. */
static void test_distributed_ddl(void **state)
{
	static const struct tl_col cols[] = {
		{ "id", T_INT4, -1, "integer", true }, { "at", T_TIMESTAMPTZ, -1, "timestamptz", false },
		{ "k", T_NUMERIC, 0, "numeric(8,2)", true },
	};
	const struct ch_ddl dist = { .cluster = "main`s", .replica_path = "/ch/{shard}/{database}/{table}",
				     .distributed = true };
	const struct ch_ddl nodist = { .cluster = "main`s", .replica_path = "/ch/{shard}/{database}/{table}" };
	struct tl_col c3[3];
	struct sl_table *t;
	struct ch_layout *l;
	struct sl_buf b;
	char err[256], *name;
	int add[1] = { 1 };

	(void)state;
	memcpy(c3, cols, sizeof c3);
	c3[2].typmod = numeric_typmod(8, 2);
	t = tl_table("public", "t", c3, 3);
	sl_buf_init(&b, 0);
	expect_create(&dist, "d'b", t, true, CH_LEGACY, "CREATE TABLE IF NOT EXISTS `d'b`.`public_t_local` ON CLUSTER "
		      "`main\\`s` (`id` Int32, `at` Nullable(Int64), `k` Decimal(8, 2), ", meta_legacy,
		      " ENGINE = ReplicatedReplacingMergeTree('/ch/{shard}/d\\'b/public_t_local', '{replica}', "
		      "`_version`) ORDER BY (`id`, `k`)");
	expect_create(&dist, "db", t, false, CH_MODERN, "CREATE TABLE IF NOT EXISTS `db`.`public_t_local` ON CLUSTER "
		      "`main\\`s` (`id` Nullable(Int32), `at` Nullable(DateTime64(6, 'UTC')), `k` Nullable(Decimal(8, 2)), ",
		      meta_modern, " ENGINE = ReplicatedReplacingMergeTree('/ch/{shard}/db/public_t_local', '{replica}') "
		      "ORDER BY (`_csn`, `_uuid`)");
	expect_distributed(&dist, t, true, CH_LEGACY, "CREATE TABLE IF NOT EXISTS `d'b`.`public_t` ON CLUSTER "
			   "`main\\`s` (`id` Int32, `at` Nullable(Int64), `k` Decimal(8, 2), `_uuid` String, "
			   "`_source_timestamp` Int64, `_read_timestamp` Int64, `_change_type` String, `_csn` String, "
			   "`_version` UInt64, `_is_deleted` UInt8, `_tx_id` UInt64, `_unchanged_columns` Array(String), "
			   "`_lsn` String) ENGINE = Distributed('main`s', 'd\\'b', 'public_t_local', "
			   "cityHash64(`id`, toString(`k`)))");
	expect_distributed(&dist, t, true, CH_MODERN, "CREATE TABLE IF NOT EXISTS `d'b`.`public_t` ON CLUSTER "
			   "`main\\`s` (`id` Int32, `at` Nullable(DateTime64(6, 'UTC')), `k` Decimal(8, 2), `_uuid` UUID, "
			   "`_source_timestamp` DateTime64(6, 'UTC'), `_read_timestamp` DateTime64(6, 'UTC'), "
			   "`_change_type` String, `_csn` String, `_version` UInt64, `_is_deleted` UInt8, `_tx_id` UInt64, "
			   "`_unchanged_columns` Array(String), `_lsn` String) ENGINE = Distributed('main`s', 'd\\'b', "
			   "'public_t_local', cityHash64(`id`, toString(`k`)))");
	expect_distributed(&dist, t, false, CH_LEGACY, "CREATE TABLE IF NOT EXISTS `d'b`.`public_t` ON CLUSTER "
			   "`main\\`s` (`id` Nullable(Int32), `at` Nullable(Int64), `k` Nullable(Decimal(8, 2)), "
			   "`_uuid` String, `_source_timestamp` Int64, `_read_timestamp` Int64, `_change_type` String, "
			   "`_csn` String, `_version` UInt64, `_is_deleted` UInt8, `_tx_id` UInt64, "
			   "`_unchanged_columns` Array(String), `_lsn` String) ENGINE = Distributed('main`s', 'd\\'b', "
			   "'public_t_local', cityHash64(`_uuid`, `_csn`))");

	/* what names the local table, and what does not */
	assert_int_equal(ch_layout_new(&l, t, true, CH_LEGACY, err, sizeof err), 0);
	assert_int_equal(ch_sql_add_columns(&b, &dist, "db", l, add, 1, NULL), 0);
	assert_string_equal(b.data, "ALTER TABLE `db`.`public_t_local` ON CLUSTER `main\\`s` ADD COLUMN `at` "
			    "Nullable(Int64)");
	ch_layout_free(l);
	sl_buf_reset(&b);
	assert_int_equal(ch_sql_drop_distributed(&b, &dist, "db", "public_t"), 0);
	assert_string_equal(b.data, "DROP TABLE IF EXISTS `db`.`public_t` ON CLUSTER `main\\`s`");
	sl_buf_reset(&b);
	assert_int_equal(ch_sql_create_view(&b, &dist, "db", "public_t"), 0);
	assert_string_equal(b.data, "CREATE VIEW IF NOT EXISTS `db`.`public_t_current` ON CLUSTER `main\\`s` AS "
			    "SELECT * FROM `db`.`public_t` FINAL WHERE `_is_deleted` = 0");
	sl_buf_reset(&b);
	assert_int_equal(ch_sql_engines(&b, &dist, "db", "public_t"), 0);
	assert_string_equal(b.data, "SELECT name, engine FROM system.tables WHERE database = 'db' AND (name = "
			    "'public_t' OR name = concat('public_t', '_current') OR name = concat('public_t', '_local')) "
			    "FORMAT RowBinary");
	sl_buf_reset(&b);
	assert_int_equal(ch_sql_engines(&b, &nodist, "db", "public_t"), 0);
	assert_string_equal(b.data, "SELECT name, engine FROM system.tables WHERE database = 'db' AND (name = "
			    "'public_t' OR name = concat('public_t', '_current')) FORMAT RowBinary");
	sl_buf_reset(&b);
	assert_int_equal(ch_sql_delete_csn_range(&b, &dist, "db", "public_t", "A", "B"), 0);
	assert_string_equal(b.data, "ALTER TABLE `db`.`public_t_local` ON CLUSTER `main\\`s` DELETE WHERE "
			    "`_csn` >= 'A' AND `_csn` <= 'B'");
	sl_buf_reset(&b);
	assert_int_equal(ch_sql_mutations_left(&b, &dist, "db", "public_t"), 0);
	assert_string_equal(b.data, "SELECT count() FROM system.mutations WHERE database = 'db' AND table = "
			    "'public_t_local' AND is_done = 0 FORMAT RowBinary");
	sl_buf_reset(&b);
	assert_int_equal(ch_sql_mutations_left(&b, NULL, "db", "public_t"), 0);
	assert_string_equal(b.data, "SELECT count() FROM system.mutations WHERE database = 'db' AND table = "
			    "'public_t' AND is_done = 0 FORMAT RowBinary");
	/* without cluster, distributed changes nothing */
	name = ch_local_name(&(struct ch_ddl){ .distributed = true }, "public_t");
	assert_string_equal(name, "public_t");
	free(name);
	name = ch_local_name(&dist, "public_t");
	assert_string_equal(name, "public_t_local");
	free(name);
	sl_table_free(t);
	sl_buf_free(&b);
}

static void test_layout_keyless_merge(void **state)
{
	static const struct tl_col cols[] = { { "a", T_INT4, -1, "integer", false } };
	struct sl_table *t = tl_table("public", "nokey", cols, 1);
	struct ch_layout *l;
	char err[256];

	(void)state;
	assert_int_equal(ch_layout_new(&l, t, true, CH_LEGACY, err, sizeof err), -1);
	assert_string_equal(err, "table \"public\".\"nokey\" has no primary key: write_mode = merge needs one "
			    "(use write_mode = append for it)");
	assert_int_equal(ch_layout_new(&l, t, false, CH_LEGACY, err, sizeof err), 0);
	ch_layout_free(l);
	sl_table_free(t);
}

/* The destination's columns as ClickHouse would list them for layout l. */
static struct ch_dest_col *dest_of(const struct ch_layout *l, int *n)
{
	struct ch_dest_col *d = calloc((size_t)l->ncols, sizeof *d);
	struct sl_buf b;

	sl_buf_init(&b, 0);
	for (int i = 0; i < l->ncols; i++) {
		sl_buf_reset(&b);
		ch_type_sql(&b, &l->cols[i].type);
		d[i].name = strdup(l->cols[i].name);
		d[i].type = strdup(b.data);
		d[i].in_sorting_key = l->cols[i].key;
	}
	sl_buf_free(&b);
	*n = l->ncols;
	return d;
}

static void free_dest(struct ch_dest_col *d, int n)
{
	for (int i = 0; i < n; i++) {
		free(d[i].name);
		free(d[i].type);
	}
	free(d);
}

static void test_layout_match(void **state)
{
	static const struct tl_col v1[] = {
		{ "id", T_INT8, -1, "bigint", true }, { "a", T_TEXT, -1, "text", false },
	};
	static const struct tl_col v2[] = {
		{ "id", T_INT8, -1, "bigint", true }, { "a", T_TEXT, -1, "text", false },
		{ "b", T_INT4, -1, "integer", false },
	};
	static const struct tl_col dropped[] = { { "id", T_INT8, -1, "bigint", true } };
	static const struct tl_col retyped[] = {
		{ "id", T_INT8, -1, "bigint", true }, { "a", T_INT4, -1, "integer", false },
	};
	static const struct tl_col rekeyed[] = {
		{ "id", T_INT8, -1, "bigint", true }, { "a", T_TEXT, -1, "text", false },
		{ "k2", T_INT4, -1, "integer", true },
	};
	struct sl_table *t1 = tl_table("public", "t", v1, 2), *t2 = tl_table("public", "t", v2, 3);
	struct sl_table *t3 = tl_table("public", "t", dropped, 1), *t4 = tl_table("public", "t", retyped, 2);
	struct sl_table *t5 = tl_table("public", "t", rekeyed, 3);
	struct ch_layout *l1, *l;
	struct ch_dest_col *d;
	int nd;
	struct ch_alter al;
	char err[512];
	struct sl_buf b;

	(void)state;
	sl_buf_init(&b, 0);
	assert_int_equal(ch_layout_new(&l1, t1, true, CH_LEGACY, err, sizeof err), 0);
	d = dest_of(l1, &nd);
	/* the same version: same */
	assert_int_equal(ch_layout_match(l1, d, nd, NULL, 0, &al, err, sizeof err), CH_MATCH_SAME);
	ch_alter_free(&al);
	/* a column added at the source: ALTER TABLE ADD COLUMN, then the table's order */
	assert_int_equal(ch_layout_new(&l, t2, true, CH_LEGACY, err, sizeof err), 0);
	assert_int_equal(ch_layout_match(l, d, nd, NULL, 0, &al, err, sizeof err), CH_MATCH_ALTER);
	assert_int_equal(al.nadd, 1);
	assert_int_equal(al.nmodify + al.ndrop, 0);
	ch_sql_add_columns(&b, NULL, "db", l, al.add, al.nadd, NULL);
	assert_string_equal(b.data, "ALTER TABLE `db`.`public_t` ADD COLUMN `b` Nullable(Int32)");
	ch_alter_free(&al);
	{
		/* once added (at the end), the layout takes that order */
		struct ch_dest_col *d2 = calloc((size_t)nd + 1, sizeof *d2);
		for (int i = 0; i < nd; i++)
			d2[i] = d[i];
		d2[nd].name = (char *)"b";
		d2[nd].type = (char *)"Nullable(Int32)";
		assert_int_equal(ch_layout_match(l, d2, nd + 1, NULL, 0, &al, err, sizeof err), CH_MATCH_SAME);
		ch_alter_free(&al);
		assert_string_equal(l->cols[nd].name, "b");
		assert_int_equal(l->of_src[2], nd);
		assert_string_equal(l->cols[l->keys[0]].name, "id");
		free(d2);
	}
	ch_layout_free(l);
	/* a dropped column */
	assert_int_equal(ch_layout_new(&l, t3, true, CH_LEGACY, err, sizeof err), 0);
	assert_int_equal(ch_layout_match(l, d, nd, NULL, 0, &al, err, sizeof err), CH_MATCH_CONFLICT);
	ch_alter_free(&al);
	assert_string_equal(err, "table \"public_t\": column \"a\" is in ClickHouse but no longer in the source "
			    "table (dropped or renamed at the source), and sluice has no record of making it, so it "
			    "leaves it alone");
	/* made by sluice so (d): merge mode drops it */
	assert_int_equal(ch_layout_match(l, d, nd, d, nd, &al, err, sizeof err), CH_MATCH_ALTER);
	assert_int_equal(al.ndrop, 1);
	assert_int_equal(al.nadd + al.nmodify, 0);
	assert_string_equal(d[al.drop[0]].name, "a");
	sl_buf_reset(&b);
	ch_sql_change_columns(&b, NULL, "db", l, d, &al);
	assert_string_equal(b.data, "ALTER TABLE `db`.`public_t` DROP COLUMN `a`");
	ch_alter_free(&al);
	{
		/* ClickHouse's "a" is not the type sluice made: left alone, the stream stops */
		struct ch_dest_col *d2 = calloc((size_t)nd, sizeof *d2);
		for (int i = 0; i < nd; i++) {
			d2[i] = d[i];
			if (!strcmp(d2[i].name, "a"))
				d2[i].type = (char *)"Nullable(Int64)";
		}
		assert_int_equal(ch_layout_match(l, d2, nd, d, nd, &al, err, sizeof err), CH_MATCH_CONFLICT);
		ch_alter_free(&al);
		assert_string_equal(err, "table \"public_t\": column \"a\" is in ClickHouse but no longer in the "
				    "source table (dropped or renamed at the source), and it was changed in ClickHouse: "
				    "sluice made it Nullable(String), and ClickHouse now has Nullable(Int64)");
		free(d2);
	}
	ch_layout_free(l);
	{
		/* append mode keeps it: the inserts name their columns, and leave it NULL */
		struct ch_layout *la1, *la;
		struct ch_dest_col *da;
		int nda;
		assert_int_equal(ch_layout_new(&la1, t1, false, CH_LEGACY, err, sizeof err), 0);
		da = dest_of(la1, &nda);
		assert_int_equal(ch_layout_new(&la, t3, false, CH_LEGACY, err, sizeof err), 0);
		assert_int_equal(ch_layout_match(la, da, nda, da, nda, &al, err, sizeof err), CH_MATCH_SAME);
		assert_int_equal(al.ndrop, 1);
		assert_true(la->partial);
		assert_int_equal(la->ncols, nda - 1);
		assert_int_equal(la->of_src[0], 0);
		sl_buf_reset(&b);
		ch_sql_insert(&b, "db", la, false);
		assert_null(strstr(b.data, "`a`"));
		assert_non_null(strstr(b.data, "INSERT INTO `db`.`public_t` (`id`, `_uuid`"));
		ch_alter_free(&al);
		ch_layout_free(la);
		ch_layout_free(la1);
		free_dest(da, nda);
	}
	/* a changed type, and which side changed it: sluice made "a" String (d) */
	assert_int_equal(ch_layout_new(&l, t4, true, CH_LEGACY, err, sizeof err), 0);
	assert_int_equal(ch_layout_match(l, d, nd, d, nd, &al, err, sizeof err), CH_MATCH_CONFLICT);
	ch_alter_free(&al);
	assert_string_equal(err, "table \"public_t\": column \"a\" changed at the source: ClickHouse has "
			    "Nullable(String), as sluice made it, and the source table now needs Nullable(Int32)");
	assert_int_equal(ch_layout_match(l, d, nd, NULL, 0, &al, err, sizeof err), CH_MATCH_CONFLICT);
	ch_alter_free(&al);
	assert_string_equal(err, "table \"public_t\": column \"a\" has type Nullable(String) in ClickHouse, and "
			    "the source table needs Nullable(Int32); sluice has no record of the type it made it "
			    "with, so either side may have changed");
	{
		/* the source still has "a" text; ClickHouse's "a" was altered to Nullable(Int64) */
		struct ch_dest_col *d2 = calloc((size_t)nd, sizeof *d2);
		for (int i = 0; i < nd; i++) {
			d2[i] = d[i];
			if (!strcmp(d2[i].name, "a"))
				d2[i].type = (char *)"Nullable(Int64)";
		}
		ch_layout_free(l);
		assert_int_equal(ch_layout_new(&l, t1, true, CH_LEGACY, err, sizeof err), 0);
		assert_int_equal(ch_layout_match(l, d2, nd, d, nd, &al, err, sizeof err), CH_MATCH_CONFLICT);
		ch_alter_free(&al);
		assert_string_equal(err, "table \"public_t\": column \"a\" was changed in ClickHouse: sluice made it "
				    "Nullable(String), which the source table still needs, and ClickHouse now has "
				    "Nullable(Int64) (ALTER TABLE ... MODIFY COLUMN puts it back)");
		/* and the source changed it too */
		ch_layout_free(l);
		assert_int_equal(ch_layout_new(&l, t4, true, CH_LEGACY, err, sizeof err), 0);
		assert_int_equal(ch_layout_match(l, d2, nd, d, nd, &al, err, sizeof err), CH_MATCH_CONFLICT);
		assert_string_equal(err, "table \"public_t\": column \"a\" changed on both sides: sluice made it "
				    "Nullable(String), ClickHouse now has Nullable(Int64), and the source table needs "
				    "Nullable(Int32)");
		free(d2);
	}
	ch_layout_free(l);
	{
		/* widened at the source (Int32 to Int64, as sluice made it): MODIFY COLUMN; not made so: refused */
		static const struct tl_col narrow[] = {
			{ "id", T_INT8, -1, "bigint", true }, { "a", T_INT4, -1, "integer", false },
		};
		static const struct tl_col wide[] = {
			{ "id", T_INT8, -1, "bigint", true }, { "a", T_INT8, -1, "bigint", false },
		};
		struct sl_table *tn = tl_table("public", "t", narrow, 2), *tw = tl_table("public", "t", wide, 2);
		struct ch_layout *ln;
		struct ch_dest_col *dn;
		int ndn;
		assert_int_equal(ch_layout_new(&ln, tn, true, CH_LEGACY, err, sizeof err), 0);
		dn = dest_of(ln, &ndn);
		assert_int_equal(ch_layout_new(&l, tw, true, CH_LEGACY, err, sizeof err), 0);
		assert_int_equal(ch_layout_match(l, dn, ndn, dn, ndn, &al, err, sizeof err), CH_MATCH_ALTER);
		assert_int_equal(al.nmodify, 1);
		assert_int_equal(al.nadd + al.ndrop, 0);
		sl_buf_reset(&b);
		ch_sql_change_columns(&b, NULL, "db", l, dn, &al);
		assert_string_equal(b.data, "ALTER TABLE `db`.`public_t` MODIFY COLUMN `a` Nullable(Int64)");
		ch_alter_free(&al);
		assert_int_equal(ch_layout_match(l, dn, ndn, NULL, 0, &al, err, sizeof err), CH_MATCH_CONFLICT);
		/* narrowed: refused, with which side changed */
		ch_layout_free(l);
		assert_int_equal(ch_layout_new(&l, tn, true, CH_LEGACY, err, sizeof err), 0);
		{
			struct ch_dest_col *dw;
			int ndw;
			struct ch_layout *lw;
			assert_int_equal(ch_layout_new(&lw, tw, true, CH_LEGACY, err, sizeof err), 0);
			dw = dest_of(lw, &ndw);
			assert_int_equal(ch_layout_match(l, dw, ndw, dw, ndw, &al, err, sizeof err), CH_MATCH_CONFLICT);
			assert_string_equal(err, "table \"public_t\": column \"a\" changed at the source: ClickHouse has "
					    "Nullable(Int64), as sluice made it, and the source table now needs Nullable(Int32)");
			free_dest(dw, ndw);
			ch_layout_free(lw);
		}
		free_dest(dn, ndn);
		ch_layout_free(ln);
		sl_table_free(tn);
		sl_table_free(tw);
	}
	ch_layout_free(l);
	/* a new key column */
	assert_int_equal(ch_layout_new(&l, t5, true, CH_LEGACY, err, sizeof err), 0);
	assert_int_equal(ch_layout_match(l, d, nd, NULL, 0, &al, err, sizeof err), CH_MATCH_CONFLICT);
	assert_non_null(strstr(err, "the primary key changed at the source (new key column \"k2\")"));
	ch_layout_free(l);
	/* a table made by an append-mode stream */
	assert_int_equal(ch_layout_new(&l, t1, false, CH_LEGACY, err, sizeof err), 0);
	assert_int_equal(ch_layout_match(l, d, nd, NULL, 0, &al, err, sizeof err), CH_MATCH_CONFLICT);
	assert_non_null(strstr(err, "the table was made for write_mode = merge"));
	ch_layout_free(l);
	free_dest(d, nd);
	ch_layout_free(l1);
	sl_table_free(t1);
	sl_table_free(t2);
	sl_table_free(t3);
	sl_table_free(t4);
	sl_table_free(t5);
	sl_buf_free(&b);
}

static uint64_t le64(const unsigned char *p)
{
	uint64_t v = 0;

	for (int i = 7; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

/* One whole row: payload in the table's order, then the metadata. */
static void test_layout_row(void **state)
{
	static const struct tl_col cols[] = {
		{ "id", T_INT4, -1, "integer", true }, { "big", T_TEXT, -1, "text", false },
	};
	struct sl_table *t = tl_table("public", "t", cols, 2);
	struct ch_layout *l;
	struct sl_value v[2] = { tl_int(7), tl_unchanged() };
	struct sl_change c;
	struct ch_rowmeta m;
	struct sl_buf b;
	char err[256], metabuf[SL_META_BUF];
	static const unsigned char want_head[] = {
		0x07, 0, 0, 0,          /* id Int32 (a merge key) */
		0x01,                   /* big: unchanged, written as NULL */
		36,                     /* _uuid */
	};

	(void)state;
	sl_buf_init(&b, 0);
	assert_int_equal(ch_layout_new(&l, t, true, CH_LEGACY, err, sizeof err), 0);
	tl_change(&c, t, SL_OP_UPDATE_INSERT, v, 0x16B374D848, 3, 1700000000000000);
	assert_int_equal(ch_rowmeta_of_change(&m, &c, NULL, metabuf, err, sizeof err), 0);
	assert_int_equal(m.version, (UINT64_C(0x16B374D848) << 8) | 3);
	assert_int_equal(ch_layout_put_row(&b, l, &m, v, false, err, sizeof err), 0);
	assert_memory_equal(b.data, want_head, sizeof want_head);
	size_t o = sizeof want_head + 36;
	/* _source_timestamp, _read_timestamp: Int64 little-endian */
	assert_int_equal(le64((const unsigned char *)b.data + o), 1700000000000000);
	assert_int_equal(le64((const unsigned char *)b.data + o + 8), 1700000000001500);
	o += 16;
	assert_int_equal(b.data[o], 13);
	assert_memory_equal(b.data + o + 1, "UPDATE-INSERT", 13);
	o += 14;
	assert_int_equal(b.data[o], 27);
	assert_memory_equal(b.data + o + 1, "00000016B374D848-0000000003", 27);
	o += 28;
	assert_int_equal(le64((const unsigned char *)b.data + o), m.version);
	o += 8;
	assert_int_equal(b.data[o], 0);         /* _is_deleted */
	o += 1 + 8;                             /* _tx_id */
	assert_int_equal(b.data[o], 1);         /* _unchanged_columns: one name */
	assert_int_equal(b.data[o + 1], 3);
	assert_memory_equal(b.data + o + 2, "big", 3);
	o += 5;
	assert_int_equal(b.data[o], 11);        /* _lsn */
	assert_memory_equal(b.data + o + 1, "16/B374D848", 11);
	assert_int_equal(o + 12, b.len);

	/* a TRUNCATE: the metadata columns only, in their list's order */
	sl_buf_reset(&b);
	ch_layout_column_list(&b, l, true);
	assert_string_equal(b.data, "(`_uuid`, `_source_timestamp`, `_read_timestamp`, `_change_type`, `_csn`, "
			    "`_version`, `_is_deleted`, `_tx_id`, `_unchanged_columns`, `_lsn`)");
	/* a key that is NULL cannot be written in merge mode */
	v[0] = tl_null();
	sl_buf_reset(&b);
	assert_int_equal(ch_layout_put_row(&b, l, &m, v, false, err, sizeof err), -1);
	assert_non_null(strstr(err, "column \"id\": a null value in a column that cannot be null"));
	assert_int_equal(b.len, 0);
	ch_layout_free(l);
	sl_table_free(t);
	sl_buf_free(&b);
}

/* A position beyond the version's range stops the stream with a message. */
static void test_rowmeta_refuses_far_positions(void **state)
{
	static const struct tl_col cols[] = { { "id", T_INT4, -1, "integer", true } };
	struct sl_table *t = tl_table("public", "t", cols, 1);
	struct sl_value v[1] = { tl_int(1) };
	struct sl_change c;
	struct ch_rowmeta m;
	char err[512], metabuf[SL_META_BUF];

	(void)state;
	tl_change(&c, t, SL_OP_INSERT, v, UINT64_C(0x0100000000000000), 1, 1);
	assert_int_equal(ch_rowmeta_of_change(&m, &c, NULL, metabuf, err, sizeof err), -1);
	assert_string_equal(err, "table \"public\".\"t\": change 0100000000000000-0000000001: its position part "
			    "0100000000000000 is beyond the 56 bits the merge version keeps for positions (see "
			    "doc/clickhouse.md, \"The version\")");
	sl_table_free(t);
}

/* The tombstones of a TRUNCATE at 0x1000-2 (tx 77) of table t's merge
 * layout fl, keyed by its first two columns, into b; the record's uuid text
 * into u. */
static void truncate_tombstones(struct sl_buf *b, struct sl_table *t, enum ch_flavor fl, char u[static 37],
				struct ch_layout **l)
{
	const char *keys[] = { t->cols[0].name, t->cols[1].name };
	struct sl_change c;
	struct ch_rowmeta m;
	char err[256], metabuf[SL_META_BUF];

	assert_int_equal(ch_layout_new(l, t, true, fl, err, sizeof err), 0);
	tl_change(&c, t, SL_OP_TRUNCATE, NULL, 0x1000, 2, 1700000000000000);
	c.tx_id = 77;
	assert_int_equal(ch_rowmeta_of_change(&m, &c, NULL, metabuf, err, sizeof err), 0);
	assert_int_equal(ch_sql_tombstones(b, "db", "public_t", keys, 2, *l, &m), 0);
	ch_uuid_text(u, c.uuid);
	u[36] = '\0';
}

static void test_tombstones_sql(void **state)
{
	static const struct tl_col cols[] = {
		{ "k1", T_INT4, -1, "integer", true }, { "k 2", T_TEXT, -1, "text", true },
		{ "v", T_TEXT, -1, "text", false },
	};
	struct sl_table *t = tl_table("public", "t", cols, 3);
	struct ch_layout *l;
	struct sl_buf b;
	char want[2048], u[37];

	(void)state;
	sl_buf_init(&b, 0);
	truncate_tombstones(&b, t, CH_LEGACY, u, &l);
	snprintf(want, sizeof want,
		 "INSERT INTO `db`.`public_t` (`k1`, `k 2`, `_uuid`, `_source_timestamp`, `_read_timestamp`, "
		 "`_change_type`, `_csn`, `_version`, `_is_deleted`, `_tx_id`, `_unchanged_columns`, `_lsn`) "
		 "SELECT `k1`, `k 2`, '%s', toInt64(1700000000000000), toInt64(1700000000001500), 'TRUNCATE', "
		 "'0000000000001000-0000000002', toUInt64(1048578), toUInt8(1), toUInt64(77), "
		 "CAST([] AS Array(String)), '0/1000' FROM `db`.`public_t` FINAL WHERE `_version` < 1048578 "
		 "AND `_is_deleted` = 0", u);
	assert_string_equal(b.data, want);
	sl_buf_reset(&b);
	ch_sql_delete_csn_range(&b, NULL, "db", "public_t", "0000000000000FFF-0000000000",
				"0000000000001000-0000000000");
	assert_string_equal(b.data, "ALTER TABLE `db`.`public_t` DELETE WHERE `_csn` >= '0000000000000FFF-0000000000' "
			    "AND `_csn` <= '0000000000001000-0000000000'");
	ch_layout_free(l);
	sl_table_free(t);
	sl_buf_free(&b);
}

/* The modern layout's tombstones: a UUID and DateTime64 metadata written as
 * such (a cast of an integer to DateTime64 would read seconds); the lookup's
 * external table describes a DateTime64 and a Decimal256 key without commas. */
static void test_modern_sql(void **state)
{
	static const struct tl_col cols[] = {
		{ "at", T_TIMESTAMPTZ, -1, "timestamptz", true }, { "n", T_NUMERIC, 0, "numeric(50,3)", true },
		{ "v", T_TEXT, -1, "text", false },
	};
	struct tl_col cs[3];
	struct sl_table *t;
	struct ch_layout *l;
	struct sl_buf b, q, st;
	char want[2048], u[37];

	(void)state;
	memcpy(cs, cols, sizeof cs);
	cs[1].typmod = numeric_typmod(50, 3);
	t = tl_table("public", "t", cs, 3);
	sl_buf_init(&b, 0);
	sl_buf_init(&q, 0);
	sl_buf_init(&st, 0);
	truncate_tombstones(&b, t, CH_MODERN, u, &l);
	snprintf(want, sizeof want,
		 "INSERT INTO `db`.`public_t` (`at`, `n`, `_uuid`, `_source_timestamp`, `_read_timestamp`, "
		 "`_change_type`, `_csn`, `_version`, `_is_deleted`, `_tx_id`, `_unchanged_columns`, `_lsn`) "
		 "SELECT `at`, `n`, toUUID('%s'), fromUnixTimestamp64Micro(toInt64(1700000000000000), 'UTC'), "
		 "fromUnixTimestamp64Micro(toInt64(1700000000001500), 'UTC'), 'TRUNCATE', "
		 "'0000000000001000-0000000002', toUInt64(1048578), toUInt8(1), toUInt64(77), "
		 "CAST([] AS Array(String)), '0/1000' FROM `db`.`public_t` FINAL WHERE `_version` < 1048578 "
		 "AND `_is_deleted` = 0", u);
	assert_string_equal(b.data, want);
	assert_int_equal(ch_sql_lookup(&q, &st, "db", l), 0);
	assert_string_equal(st.data, "k0 DateTime64(6), k1 Decimal256(3)");
	ch_layout_free(l);
	sl_table_free(t);
	sl_buf_free(&b);
	sl_buf_free(&q);
	sl_buf_free(&st);
}

/* An insert into a table with a very long column list leaves the list out
 * (18.16 refuses URLs over 16 KB): the rows follow the table's order. */
static void test_insert_query_length(void **state)
{
	struct tl_col cols[200];
	char names[200][64];
	struct sl_table *t;
	struct ch_layout *l;
	struct sl_buf b;
	char err[256];

	(void)state;
	for (int i = 0; i < 200; i++) {
		snprintf(names[i], sizeof names[i], "a_rather_long_column_name_number_%03d", i);
		cols[i] = (struct tl_col){ names[i], T_INT4, -1, "integer", i == 0 };
	}
	sl_buf_init(&b, 0);
	t = tl_table("public", "wide", cols, 3);
	assert_int_equal(ch_layout_new(&l, t, false, CH_LEGACY, err, sizeof err), 0);
	assert_int_equal(ch_sql_insert(&b, "db", l, false), 0);
	assert_string_equal(b.data, "INSERT INTO `db`.`public_wide` (`a_rather_long_column_name_number_000`, "
			    "`a_rather_long_column_name_number_001`, `a_rather_long_column_name_number_002`, `_uuid`, "
			    "`_source_timestamp`, `_read_timestamp`, `_change_type`, `_csn`, `_version`, "
			    "`_is_deleted`, `_tx_id`, `_unchanged_columns`, `_lsn`) FORMAT RowBinary");
	ch_layout_free(l);
	sl_table_free(t);
	t = tl_table("public", "wide", cols, 200);
	assert_int_equal(ch_layout_new(&l, t, false, CH_LEGACY, err, sizeof err), 0);
	sl_buf_reset(&b);
	assert_int_equal(ch_sql_insert(&b, "db", l, false), 0);
	assert_string_equal(b.data, "INSERT INTO `db`.`public_wide` FORMAT RowBinary");
	sl_buf_reset(&b);
	assert_int_equal(ch_sql_insert(&b, "db", l, true), 0);
	assert_non_null(strstr(b.data, "(`_uuid`,"));
	ch_layout_free(l);
	sl_table_free(t);
	sl_buf_free(&b);
}

static void test_errors(void **state)
{
	static const char e18[] = "Code: 27, e.displayText() = DB::Exception: Cannot parse input, e.what() = DB::Exception\n";
	static const char e24[] = "Code: 60. DB::Exception: Table replica.x does not exist. (UNKNOWN_TABLE) (version 24.3.1.1)";

	(void)state;
	assert_int_equal(ch_exception_code(e18, strlen(e18)), 27);
	assert_int_equal(ch_exception_code(e24, strlen(e24)), 60);
	assert_int_equal(ch_exception_code("\nCode: 241", 10), 241);
	assert_int_equal(ch_exception_code("Bad Gateway", 11), 0);
	/* 18.16 says 500 for a parse error: the code decides */
	assert_int_equal(ch_classify(500, 27), CH_ERR_DATA);
	assert_int_equal(ch_classify(500, 33), CH_ERR_DATA);
	assert_int_equal(ch_classify(404, 60), CH_ERR_FATAL);
	assert_int_equal(ch_classify(404, 81), CH_ERR_FATAL);
	assert_int_equal(ch_classify(401, 193), CH_ERR_PREREQ);
	assert_int_equal(ch_classify(516, 516), CH_ERR_PREREQ);
	assert_int_equal(ch_classify(500, 164), CH_ERR_PREREQ);
	assert_int_equal(ch_classify(403, 497), CH_ERR_PREREQ);
	assert_int_equal(ch_classify(403, 192), CH_ERR_PREREQ);
	assert_int_equal(ch_classify(500, 241), CH_ERR_RETRY);
	assert_int_equal(ch_classify(500, 252), CH_ERR_RETRY);
	assert_int_equal(ch_classify(503, 0), CH_ERR_RETRY);
	assert_int_equal(ch_classify(502, 0), CH_ERR_RETRY);
	assert_int_equal(ch_classify(429, 0), CH_ERR_RETRY);
	assert_int_equal(ch_classify(400, 0), CH_ERR_FATAL);
	assert_int_equal(ch_classify(403, 0), CH_ERR_FATAL);
	assert_int_equal(ch_classify(500, 62), CH_ERR_FATAL);
}

/* A dead-letter line decodes the row it was given. */
static void test_dead_letter_line(void **state)
{
	static const struct tl_col cols[] = {
		{ "id", T_INT4, -1, "integer", true }, { "t", T_TEXT, -1, "text", false },
		{ "n", T_NUMERIC, 0, "numeric(6,2)", false }, { "f", T_FLOAT8, -1, "double precision", false },
		{ "b", T_BYTEA, -1, "bytea", false },
	};
	struct tl_col c2[5];
	struct sl_table *t;
	struct ch_layout *l;
	struct sl_value v[5];
	static const unsigned char raw[] = { 0x00, 0xab };
	struct sl_change c;
	struct ch_rowmeta m;
	struct sl_buf row, out;
	char err[256], metabuf[SL_META_BUF], u[37];

	(void)state;
	memcpy(c2, cols, sizeof c2);
	c2[2].typmod = numeric_typmod(6, 2);
	t = tl_table("public", "t", c2, 5);
	v[0] = tl_int(5);
	v[1] = tl_str("q\"\n\xff");
	v[2] = tl_dec(true, "5", 2);
	v[3] = tl_double(NAN);
	v[4] = tl_bytes(raw, 2);
	sl_buf_init(&row, 0);
	sl_buf_init(&out, 0);
	assert_int_equal(ch_layout_new(&l, t, false, CH_LEGACY, err, sizeof err), 0);
	tl_change(&c, t, SL_OP_INSERT, v, 0x2000, 1, 1700000000000000);
	assert_int_equal(ch_rowmeta_of_change(&m, &c, NULL, metabuf, err, sizeof err), 0);
	assert_int_equal(ch_layout_put_row(&row, l, &m, v, false, err, sizeof err), 0);
	assert_int_equal(ch_dl_line(&out, "s1", "db", l, false, row.data, row.len, 27, "Code: 27, bad", 99), 0);
	ch_uuid_text(u, c.uuid);
	u[36] = '\0';
	char want[2048];
	snprintf(want, sizeof want,
		 "{\"time_us\":99,\"stream\":\"s1\",\"database\":\"db\",\"table\":\"public_t\",\"code\":27,"
		 "\"reason\":\"Code: 27, bad\",\"row\":{\"id\":5,\"t\":\"q\\\"\\n\\ufffd\",\"n\":\"-0.05\","
		 "\"f\":\"NaN\",\"b\":\"\\\\x00ab\",\"_uuid\":\"%s\",\"_source_timestamp\":1700000000000000,"
		 "\"_read_timestamp\":1700000000001500,\"_change_type\":\"INSERT\",\"_csn\":\"0000000000002000-0000000001\","
		 "\"_version\":2097153,\"_is_deleted\":0,\"_tx_id\":4242,\"_unchanged_columns\":[],\"_lsn\":\"0/2000\"}}\n",
		 u);
	assert_string_equal(out.data, want);
	/* a row cut short does not decode, and adds nothing */
	sl_buf_reset(&out);
	assert_int_equal(ch_dl_line(&out, "s1", "db", l, false, row.data, row.len - 1, 27, "x", 1), -1);
	assert_int_equal(out.len, 0);
	ch_layout_free(l);
	sl_table_free(t);
	sl_buf_free(&row);
	sl_buf_free(&out);
}

/* A column's DEFAULT for a missing value: the value's text, quoted (quotes,
 * backslashes and every byte past 0x7f escaped), CAST to the column's
 * type; timestamps in DateTime64 through fromUnixTimestamp64Micro; nothing
 * for the types that cannot carry a value exactly. */
static void test_column_default(void **state)
{
	static const struct {
		struct ch_type t;
		struct sl_value v;
		int rc;
		const char *want;
	} c[] = {
		{ { CH_INT32, true, 0, 0, SL_T_INT32 }, { .kind = SL_V_INT, .i = -7 }, 0,
		  " DEFAULT CAST('-7' AS Nullable(Int32))" },
		{ { CH_STRING, true, 0, 0, SL_T_STRING }, { .kind = SL_V_STRING, .p = "it's \\ \xc3\xa9", .len = 9 }, 0,
		  " DEFAULT CAST('it\\'s \\\\ \\xC3\\xA9' AS Nullable(String))" },
		{ { CH_STRING, true, 0, 0, SL_T_BYTES }, { .kind = SL_V_BYTES, .p = "\x00\xff", .len = 2 }, 0,
		  " DEFAULT CAST('\\x00\\xFF' AS Nullable(String))" },
		{ { CH_DECIMAL, true, 8, 3, SL_T_DECIMAL },
		  { .kind = SL_V_DECIMAL, .neg = true, .scale = 3, .p = "12500", .len = 5 }, 0,
		  " DEFAULT CAST('-12.500' AS Nullable(Decimal(8, 3)))" },
		{ { CH_INT64, true, 0, 0, SL_T_TIMESTAMPTZ }, { .kind = SL_V_TIMESTAMP, .i = 1709202896789000 }, 0,
		  " DEFAULT CAST('1709202896789000' AS Nullable(Int64))" },
		{ { CH_DATETIME64_UTC, true, 0, 0, SL_T_TIMESTAMPTZ }, { .kind = SL_V_TIMESTAMP, .i = -1 }, 0,
		  " DEFAULT CAST(fromUnixTimestamp64Micro(CAST('-1' AS Int64)) AS Nullable(DateTime64(6, 'UTC')))" },
		{ { CH_BOOL, true, 0, 0, SL_T_BOOL }, { .kind = SL_V_BOOL, .b = true }, 0,
		  " DEFAULT CAST('true' AS Nullable(Bool))" },
		{ { CH_UINT8, true, 0, 0, SL_T_BOOL }, { .kind = SL_V_BOOL, .b = false }, 0,
		  " DEFAULT CAST('0' AS Nullable(UInt8))" },
		{ { CH_FLOAT64, true, 0, 0, SL_T_DOUBLE }, { .kind = SL_V_DOUBLE, .d = 1.1 }, 1, "" },
		{ { CH_DATE32, true, 0, 0, SL_T_DATE }, { .kind = SL_V_DATE, .i = 19782 }, 1, "" },
		{ { CH_INT32, true, 0, 0, SL_T_INT32 }, { .kind = SL_V_NULL }, 1, "" },
	};
	struct sl_buf b;

	(void)state;
	sl_buf_init(&b, 0);
	for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
		sl_buf_reset(&b);
		assert_int_equal(ch_sql_default(&b, &c[i].t, &c[i].v), c[i].rc);
		if (strcmp(b.data ? b.data : "", c[i].want) != 0)
			fail_msg("case %zu: \"%s\", not \"%s\"", i, b.data ? b.data : "", c[i].want);
	}
	sl_buf_free(&b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_version_basics),
		cmocka_unit_test(test_version_lsn_wraparound),
		cmocka_unit_test(test_version_binlog_rollover),
		cmocka_unit_test(test_version_backfill_and_marker),
		cmocka_unit_test(test_version_streaming_marker),
		cmocka_unit_test(test_version_long_transaction),
		cmocka_unit_test(test_version_old_rows),
		cmocka_unit_test(test_version_matches_csn_order),
		cmocka_unit_test(test_rb_scalars),
		cmocka_unit_test(test_rb_modern),
		cmocka_unit_test(test_flavor_of_version),
		cmocka_unit_test(test_modern_sql),
		cmocka_unit_test(test_rb_strings),
		cmocka_unit_test(test_rb_decimals),
		cmocka_unit_test(test_rb_decimal_padding),
		cmocka_unit_test(test_rb_refused),
		cmocka_unit_test(test_rb_bad_input),
		cmocka_unit_test(test_rb_decimal_roundtrip),
		cmocka_unit_test(test_column_names),
		cmocka_unit_test(test_quote),
		cmocka_unit_test(test_layout_create),
		cmocka_unit_test(test_cluster_ddl),
		cmocka_unit_test(test_distributed_ddl),
		cmocka_unit_test(test_layout_keyless_merge),
		cmocka_unit_test(test_layout_match),
		cmocka_unit_test(test_layout_row),
		cmocka_unit_test(test_rowmeta_refuses_far_positions),
		cmocka_unit_test(test_tombstones_sql),
		cmocka_unit_test(test_insert_query_length),
		cmocka_unit_test(test_errors),
		cmocka_unit_test(test_dead_letter_line),
		cmocka_unit_test(test_column_default),
	};

	return cmocka_run_group_tests_name("clickhouse codec", tests, NULL, NULL);
}
