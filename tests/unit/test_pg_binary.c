/*
 * tests/unit/test_pg_binary.c: PostgreSQL binary values -> typed values
 * (pg_binary.c).  The byte strings are written from the formats of the
 * PostgreSQL documentation and source (COPY's "Binary Format"; the send
 * functions: dates as days and timestamps as microseconds since
 * 2000-01-01, numerics as base-10000 digits), and the expected values
 * worked out by hand: 2000-01-01 is day 10,957 after 1970-01-01, and
 * 946,684,800,000,000 microseconds after it.
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
#include "sources/postgres/pg_binary.h"

static struct sl_column col_of(uint32_t oid, int32_t typmod)
{
	struct sl_column c;

	memset(&c, 0, sizeof c);
	c.name = (char *)"col_x";
	c.avro_name = (char *)"col_x";
	c.src_type = oid;
	c.src_typmod = typmod;
	c.type = sl_pg_type_map(oid, typmod, &c.precision, &c.scale);
	return c;
}

/* Converts len bytes of column col, binary, through sl_pg_binary_row. */
static int conv(struct sl_column *col, const void *bytes, size_t len, struct sl_value *out, struct sl_buf *scratch,
		struct sl_pg_text_stats *st)
{
	static char copy[4096];
	struct sl_table t;
	struct sl_text_value in = { .p = copy, .len = (uint32_t)len, .kind = SL_TV_TEXT };
	bool binary = sl_pg_bin_decodes(col);
	char err[256];

	memset(&t, 0, sizeof t);
	t.ns = (char *)"public";
	t.name = (char *)"t";
	t.ncols = 1;
	t.cols = col;
	assert_true(len <= sizeof copy);
	memcpy(copy, bytes, len);
	return sl_pg_binary_row(&t, &binary, &in, out, scratch, st, err, sizeof err);
}

static void be(unsigned char *p, uint64_t v, int n)
{
	for (int i = n - 1; i >= 0; i--, v >>= 8)
		p[i] = (unsigned char)v;
}

/* The integer of a value of type oid whose binary form is v, n bytes. */
static int64_t temporal(uint32_t oid, uint64_t v, int n, struct sl_pg_text_stats *st)
{
	struct sl_column c = col_of(oid, -1);
	struct sl_value o;
	struct sl_buf b;
	unsigned char p[8];

	sl_buf_init(&b, 0);
	be(p, v, n);
	assert_int_equal(conv(&c, p, (size_t)n, &o, &b, st), 0);
	sl_buf_free(&b);
	return o.i;
}

static int64_t int_of(uint32_t oid, uint64_t v, int n)
{
	return temporal(oid, v, n, NULL);
}

static void test_integers(void **state)
{
	(void)state;
	assert_int_equal(int_of(SL_PG_INT2, 0x8000, 2), -32768);
	assert_int_equal(int_of(SL_PG_INT2, 0x7fff, 2), 32767);
	assert_int_equal(int_of(SL_PG_INT4, 0x80000000u, 4), INT32_MIN);
	assert_int_equal(int_of(SL_PG_INT4, 0xffffffffu, 4), -1);
	assert_true(int_of(SL_PG_INT8, UINT64_C(0x8000000000000000), 8) == INT64_MIN);
	assert_true(int_of(SL_PG_INT8, UINT64_C(0x7fffffffffffffff), 8) == INT64_MAX);
}

static void test_wrong_sizes(void **state)
{
	struct sl_column i4 = col_of(SL_PG_INT4, -1), b = col_of(SL_PG_BOOL, -1), u = col_of(SL_PG_UUID, -1);
	struct sl_column jb = col_of(SL_PG_JSONB, -1);
	struct sl_value o;
	struct sl_buf s;

	(void)state;
	sl_buf_init(&s, 0);
	assert_int_equal(conv(&i4, "\0\0\0\0\0", 5, &o, &s, NULL), -1);
	assert_int_equal(conv(&b, "\2", 1, &o, &s, NULL), -1);
	assert_int_equal(conv(&u, "0123456789abcde", 15, &o, &s, NULL), -1);
	assert_int_equal(conv(&jb, "\2{}", 3, &o, &s, NULL), -1);   /* jsonb version 2 does not exist */
	sl_buf_free(&s);
}

static void test_bool_float(void **state)
{
	struct sl_column b = col_of(SL_PG_BOOL, -1), f4 = col_of(SL_PG_FLOAT4, -1), f8 = col_of(SL_PG_FLOAT8, -1);
	struct sl_value o;
	struct sl_buf s;
	unsigned char p[8];

	(void)state;
	sl_buf_init(&s, 0);
	assert_int_equal(conv(&b, "\1", 1, &o, &s, NULL), 0);
	assert_int_equal(o.kind, SL_V_BOOL);
	assert_true(o.b);
	assert_int_equal(conv(&b, "\0", 1, &o, &s, NULL), 0);
	assert_false(o.b);
	be(p, 0x7f7fffff, 4);    /* the largest float4 */
	assert_int_equal(conv(&f4, p, 4, &o, &s, NULL), 0);
	assert_int_equal(o.kind, SL_V_FLOAT);
	assert_true(o.f == 3.40282347e+38f);
	be(p, 0x80000000u, 4);   /* -0 */
	assert_int_equal(conv(&f4, p, 4, &o, &s, NULL), 0);
	assert_true(o.f == 0 && signbit(o.f));
	be(p, UINT64_C(0x7ff8000000000000), 8);
	assert_int_equal(conv(&f8, p, 8, &o, &s, NULL), 0);
	assert_int_equal(o.kind, SL_V_DOUBLE);
	assert_true(isnan(o.d));
	be(p, UINT64_C(0xfff0000000000000), 8);
	assert_int_equal(conv(&f8, p, 8, &o, &s, NULL), 0);
	assert_true(isinf(o.d) && o.d < 0);
	be(p, UINT64_C(0x3ff0000000000001), 8);  /* 1 + 2^-52 */
	assert_int_equal(conv(&f8, p, 8, &o, &s, NULL), 0);
	assert_true(o.d == 1.0000000000000002);
	be(p, 1, 8);   /* the smallest subnormal */
	assert_int_equal(conv(&f8, p, 8, &o, &s, NULL), 0);
	assert_true(o.d == 4.9406564584124654e-324);
	sl_buf_free(&s);
}

static void test_strings_bytes(void **state)
{
	struct sl_column t = col_of(SL_PG_TEXT, -1), bp = col_of(SL_PG_BPCHAR, 9), nm = col_of(19, -1);
	struct sl_column by = col_of(SL_PG_BYTEA, -1), js = col_of(SL_PG_JSON, -1), jb = col_of(SL_PG_JSONB, -1);
	struct sl_column oid = col_of(26, -1), u = col_of(SL_PG_UUID, -1);
	static const unsigned char uuid[16] = { 0xa0, 0xee, 0xbc, 0x99, 0x9c, 0x0b, 0x4e, 0xf8,
						0xbb, 0x6d, 0x6b, 0xb9, 0xbd, 0x38, 0x0a, 0x11 };
	struct sl_value o;
	struct sl_buf s;

	(void)state;
	sl_buf_init(&s, 0);
	assert_int_equal(conv(&t, "caf\xc3\xa9", 5, &o, &s, NULL), 0);
	assert_int_equal(o.kind, SL_V_STRING);
	assert_memory_equal(o.p, "caf\xc3\xa9", 5);
	assert_int_equal(conv(&t, "", 0, &o, &s, NULL), 0);   /* '' is not NULL */
	assert_int_equal(o.kind, SL_V_STRING);
	assert_int_equal(o.len, 0);
	assert_int_equal(conv(&bp, "ab   ", 5, &o, &s, NULL), 0);   /* char(5) keeps its padding */
	assert_int_equal(o.len, 5);
	assert_int_equal(conv(&nm, "pg_class", 8, &o, &s, NULL), 0);
	assert_memory_equal(o.p, "pg_class", 8);
	assert_int_equal(conv(&by, "\0\xff\0", 3, &o, &s, NULL), 0);
	assert_int_equal(o.kind, SL_V_BYTES);
	assert_int_equal(o.len, 3);
	assert_memory_equal(o.p, "\0\xff\0", 3);
	assert_int_equal(conv(&js, "{\"a\": 1}", 8, &o, &s, NULL), 0);
	assert_int_equal(o.kind, SL_V_JSON);
	assert_int_equal(o.len, 8);
	assert_int_equal(conv(&jb, "\1{\"a\": 1}", 9, &o, &s, NULL), 0);
	assert_int_equal(o.kind, SL_V_JSON);
	assert_int_equal(o.len, 8);
	assert_memory_equal(o.p, "{\"a\": 1}", 8);
	assert_int_equal(conv(&oid, "\xff\xff\xff\xff", 4, &o, &s, NULL), 0);
	assert_int_equal(o.kind, SL_V_STRING);
	assert_int_equal(o.len, 10);
	assert_memory_equal(o.p, "4294967295", 10);
	assert_int_equal(conv(&u, uuid, 16, &o, &s, NULL), 0);
	assert_int_equal(o.kind, SL_V_UUID);
	assert_memory_equal(o.p, uuid, 16);
	sl_buf_free(&s);
}

static void test_dates(void **state)
{
	(void)state;
	assert_int_equal(temporal(SL_PG_DATE, 0, 4, NULL), 10957);                       /* 2000-01-01 */
	assert_int_equal(temporal(SL_PG_DATE, (uint32_t)-1, 4, NULL), 10956);            /* 1999-12-31 */
	assert_int_equal(temporal(SL_PG_DATE, (uint32_t)-10957, 4, NULL), 0);            /* 1970-01-01 */
	assert_int_equal(temporal(SL_PG_DATE, (uint32_t)-36524, 4, NULL), -25567);       /* 1900-01-01 */
	assert_int_equal(temporal(SL_PG_DATE, (uint32_t)-730119, 4, NULL), -719162);     /* 0001-01-01 */
	assert_int_equal(temporal(SL_PG_DATE, (uint32_t)-730120, 4, NULL), -719163);     /* 0001-12-31 BC */
	assert_int_equal(temporal(SL_PG_DATE, 2921939, 4, NULL), 2932896);               /* 9999-12-31 */
	assert_int_equal(temporal(SL_PG_DATE, 2921940, 4, NULL), 2932897);               /* 10000-01-01 */
	/* -infinity and infinity: clamped to 0001-01-01 and 9999-12-31 */
	assert_int_equal(temporal(SL_PG_DATE, 0x80000000u, 4, NULL), SL_PG_DATE_NEG_INFINITY);
	assert_int_equal(temporal(SL_PG_DATE, 0x7fffffffu, 4, NULL), SL_PG_DATE_INFINITY);
}

static void test_times(void **state)
{
	struct sl_pg_text_stats st = { 0 };
	const int64_t epoch = INT64_C(946684800000000);

	(void)state;
	assert_true(temporal(SL_PG_TIME, 0, 8, NULL) == 0);
	assert_true(temporal(SL_PG_TIME, UINT64_C(86400000000), 8, NULL) == INT64_C(86400000000));  /* 24:00:00 */
	assert_true(temporal(SL_PG_TIMESTAMP, 0, 8, NULL) == epoch);
	assert_true(temporal(SL_PG_TIMESTAMPTZ, 1, 8, NULL) == epoch + 1);
	/* 1900-01-01 00:00:00: 36,524 days before 2000 */
	assert_true(temporal(SL_PG_TIMESTAMP, (uint64_t)(INT64_C(-36524) * 86400000000), 8, NULL) ==
		    INT64_C(-2208988800000000));
	/* 4713-11-24 BC, PostgreSQL's first day: Julian day 0, 2,451,545 days before 2000 */
	assert_true(temporal(SL_PG_TIMESTAMP, (uint64_t)(INT64_C(-2451545) * 86400000000), 8, NULL) ==
		    INT64_C(-2451545) * 86400000000 + epoch);
	assert_true(temporal(SL_PG_TIMESTAMP, UINT64_C(0x8000000000000000), 8, NULL) == SL_PG_TS_NEG_INFINITY);
	assert_true(temporal(SL_PG_TIMESTAMPTZ, UINT64_C(0x7fffffffffffffff), 8, NULL) == SL_PG_TS_INFINITY);
	/* The last instant int64 microseconds since 1970 hold, and one after */
	assert_true(temporal(SL_PG_TIMESTAMP, (uint64_t)(INT64_MAX - epoch), 8, &st) == INT64_MAX);
	assert_int_equal(st.timestamp_clamps, 0);
	assert_true(temporal(SL_PG_TIMESTAMP, (uint64_t)(INT64_MAX - epoch + 1), 8, &st) == INT64_MAX);
	assert_int_equal(st.timestamp_clamps, 1);
}

/* A numeric's binary form: ndigits, weight, sign, dscale, then digits. */
static size_t numeric(unsigned char *p, int weight, uint16_t sign, int dscale, int ndigits, const int *digits)
{
	be(p, (uint16_t)ndigits, 2);
	be(p + 2, (uint16_t)weight, 2);
	be(p + 4, sign, 2);
	be(p + 6, (uint16_t)dscale, 2);
	for (int i = 0; i < ndigits; i++)
		be(p + 8 + 2 * i, (uint16_t)digits[i], 2);
	return 8 + 2 * (size_t)ndigits;
}

/* numeric(precision, scale)'s typmod */
static int32_t nmod(int precision, int scale)
{
	return ((precision << 16) | (scale & 0x7ff)) + 4;
}

/* A numeric of typmod (binary form p, len) converts to kind (SL_V_DECIMAL:
 * the unscaled digits text at the column's scale, sign neg; SL_V_STRING:
 * the text). */
static void expect_numeric(int32_t typmod, const unsigned char *p, size_t len, int kind, const char *text, bool neg)
{
	struct sl_column c = col_of(SL_PG_NUMERIC, typmod);
	struct sl_value o;
	struct sl_buf s;

	sl_buf_init(&s, 0);
	assert_int_equal(c.type, kind == SL_V_DECIMAL ? SL_T_DECIMAL : SL_T_STRING);
	assert_true(sl_pg_bin_decodes(&c));
	assert_int_equal(conv(&c, p, len, &o, &s, NULL), 0);
	assert_int_equal(o.kind, kind);
	if (kind == SL_V_DECIMAL) {
		assert_int_equal(o.scale, c.scale);
		assert_int_equal(o.neg, neg);
	}
	assert_int_equal(o.len, strlen(text));
	assert_memory_equal(o.p, text, strlen(text));
	sl_buf_free(&s);
}

static void expect_decimal(int precision, int scale, const unsigned char *p, size_t len, const char *digits,
			   bool neg)
{
	expect_numeric(nmod(precision, scale), p, len, SL_V_DECIMAL, digits, neg);
}

static void test_decimal(void **state)
{
	unsigned char p[64];
	struct sl_column c = col_of(SL_PG_NUMERIC, nmod(5, 2));
	struct sl_pg_text_stats st = { 0 };
	struct sl_value o;
	struct sl_buf s;
	size_t n;

	(void)state;
	sl_buf_init(&s, 0);
	n = numeric(p, 0, 0x0000, 2, 2, (const int[]){ 123, 4500 });            /* 123.45 */
	expect_decimal(5, 2, p, n, "12345", false);
	n = numeric(p, -1, 0x4000, 2, 1, (const int[]){ 500 });                  /* -0.05 */
	expect_decimal(5, 2, p, n, "5", true);
	n = numeric(p, 0, 0x0000, 2, 0, NULL);                                   /* 0.00 */
	expect_decimal(5, 2, p, n, "0", false);
	n = numeric(p, 0, 0x0000, 1, 0, NULL);                                   /* 0.0 in numeric(1,1) */
	expect_decimal(1, 1, p, n, "0", false);
	n = numeric(p, 0, 0x0000, 1000, 0, NULL);                                /* 0 in numeric(1000,1000) */
	expect_decimal(1000, 1000, p, n, "0", false);
	n = numeric(p, 0, 0x4000, 2, 1, (const int[]){ 999 });                   /* -999.00 */
	expect_decimal(5, 2, p, n, "99900", true);
	n = numeric(p, 1, 0x0000, 0, 2, (const int[]){ 1, 2345 });               /* 12345 in numeric(5,0) */
	expect_decimal(5, 0, p, n, "12345", false);
	n = numeric(p, 0, 0x0000, 5, 2, (const int[]){ 1, 2345 });               /* 1.23450 */
	assert_int_equal(conv(&c, p, n, &o, &s, NULL), -1);                      /* 5 fraction digits in (5,2) */
	n = numeric(p, 1, 0x0000, 2, 3, (const int[]){ 1, 2345, 6000 });         /* 12345.60: 7 digits */
	assert_int_equal(conv(&c, p, n, &o, &s, NULL), -1);
	n = numeric(p, 0, 0xD000, 0, 0, NULL);                                   /* Infinity */
	assert_int_equal(conv(&c, p, n, &o, &s, NULL), -1);
	n = numeric(p, 0, 0xC000, 0, 0, NULL);                                   /* NaN: null, counted */
	assert_int_equal(conv(&c, p, n, &o, &s, &st), 0);
	assert_int_equal(o.kind, SL_V_NULL);
	assert_int_equal(st.decimal_nan_nulls, 1);
	n = numeric(p, 0, 0x0000, 2, 2, (const int[]){ 1, 10000 });              /* a digit over 9999 */
	assert_int_equal(conv(&c, p, n, &o, &s, NULL), -1);
	n = numeric(p, 100, 0x0000, 0, 1, (const int[]){ 1 });                   /* 10^400 in numeric(5,2) */
	assert_int_equal(conv(&c, p, n, &o, &s, NULL), -1);
	n = numeric(p, 0, 0x0000, 0, 1, (const int[]){ 999 });                   /* 999 in (5,2): 5 digits */
	expect_decimal(5, 2, p, n, "99900", false);
	n = numeric(p, 0, 0x0000, 0, 1, (const int[]){ 1000 });                  /* 1000 in (5,2): 6 digits */
	assert_int_equal(conv(&c, p, n, &o, &s, NULL), -1);
	sl_buf_free(&s);
}

static void expect_numeric_text(const unsigned char *p, size_t len, int32_t typmod, const char *text)
{
	expect_numeric(typmod, p, len, SL_V_STRING, text, false);
}

static void test_numeric_text(void **state)
{
	unsigned char p[64];
	char big[1001];

	(void)state;
	expect_numeric_text(p, numeric(p, 0, 0xC000, 0, 0, NULL), -1, "NaN");
	expect_numeric_text(p, numeric(p, 0, 0xD000, 0, 0, NULL), -1, "Infinity");
	expect_numeric_text(p, numeric(p, 0, 0xF000, 0, 0, NULL), -1, "-Infinity");
	expect_numeric_text(p, numeric(p, 0, 0x0000, 0, 0, NULL), -1, "0");
	expect_numeric_text(p, numeric(p, 0, 0x0000, 3, 0, NULL), -1, "0.000");
	expect_numeric_text(p, numeric(p, 0, 0x4000, 1, 2, (const int[]){ 12, 5000 }), -1, "-12.5");
	expect_numeric_text(p, numeric(p, -2, 0x0000, 6, 1, (const int[]){ 100 }), -1, "0.000001");
	expect_numeric_text(p, numeric(p, 2, 0x0000, 0, 1, (const int[]){ 7 }), -1, "700000000");
	/* 10^999: one digit, 1000, worth 10000^249 */
	memset(big, '0', sizeof big);
	big[0] = '1';
	big[1000] = '\0';
	expect_numeric_text(p, numeric(p, 249, 0x0000, 0, 1, (const int[]){ 1000 }), -1, big);
	/* numeric(3,-2) (PostgreSQL 15): 12300, a string as the text path has it */
	expect_numeric_text(p, numeric(p, 1, 0x0000, 0, 2, (const int[]){ 1, 2300 }), nmod(3, -2), "12300");
	/* numeric(2,4) (scale over precision): 0.0012 */
	expect_numeric_text(p, numeric(p, -1, 0x0000, 4, 1, (const int[]){ 12 }), nmod(2, 4), "0.0012");
}

static void test_decodes(void **state)
{
	struct sl_column c = col_of(SL_PG_INT4, -1), dom = col_of(16385, -1), arr = col_of(1007, -1);

	(void)state;
	assert_true(sl_pg_bin_decodes(&c));
	assert_false(sl_pg_bin_decodes(&dom));   /* a domain's own OID: read as text */
	assert_false(sl_pg_bin_decodes(&arr));   /* int4[] */
	c.type = SL_T_STRING;                     /* not the type the OID maps to */
	assert_false(sl_pg_bin_decodes(&c));
}

static void test_copy_framing(void **state)
{
	static const char header[] = "PGCOPY\n\377\r\n\0\0\0\0\0\0\0\0\3xyz";
	char tuple[] = "\0\2\0\0\0\2hi\377\377\377\377";
	struct sl_text_value v[2];
	size_t skip;

	(void)state;
	assert_int_equal(sl_pg_copy_binary_header(header, sizeof header - 1, &skip), 0);
	assert_int_equal(skip, 22);
	assert_int_equal(sl_pg_copy_binary_header(header, 18, &skip), -1);
	assert_int_equal(sl_pg_copy_binary_header("PGCOPY\n\377\r\n\0\0\1\0\0\0\0\0\0", 19, &skip), -1);  /* OIDs */
	assert_int_equal(sl_pg_copy_binary_tuple(tuple, sizeof tuple - 1, v, 2), 1);
	assert_int_equal(v[0].kind, SL_TV_TEXT);
	assert_int_equal(v[0].len, 2);
	assert_memory_equal(v[0].p, "hi", 2);
	assert_int_equal(v[1].kind, SL_TV_NULL);
	assert_int_equal(sl_pg_copy_binary_tuple(tuple, sizeof tuple - 2, v, 2), -1);   /* truncated */
	assert_int_equal(sl_pg_copy_binary_tuple(tuple, sizeof tuple - 1, v, 3), -1);   /* other count */
	assert_int_equal(sl_pg_copy_binary_tuple((char *)"\377\377", 2, v, 2), 0);      /* the trailer */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_integers),
		cmocka_unit_test(test_wrong_sizes),
		cmocka_unit_test(test_bool_float),
		cmocka_unit_test(test_strings_bytes),
		cmocka_unit_test(test_dates),
		cmocka_unit_test(test_times),
		cmocka_unit_test(test_decimal),
		cmocka_unit_test(test_numeric_text),
		cmocka_unit_test(test_decodes),
		cmocka_unit_test(test_copy_framing),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
