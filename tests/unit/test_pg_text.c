/*
 * tests/unit/test_pg_text.c: PostgreSQL text -> typed values (pg_text.c), and
 * the PostgreSQL type mapping.  Expected values are worked out by hand (days,
 * microseconds, the digits of decimals), floats are compared bit for bit with
 * libc's correctly rounded strtod/strtof, and dates are checked against an
 * independent Julian-day-number formula.
 */
#include <fcntl.h>
#include <float.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/buf.h"
#include "sources/postgres/pg_text.h"

/* ---- helpers ---- */

static struct sl_column mkcol(enum sl_type type, int p, int s)
{
	struct sl_column c;

	memset(&c, 0, sizeof c);
	c.name = (char *)"col_x";
	c.avro_name = (char *)"col_x";
	c.type = type;
	c.precision = p;
	c.scale = s;
	return c;
}

/* A one-column table around col (nothing to free). */
static struct sl_table one_col(struct sl_column *col)
{
	struct sl_table t;

	memset(&t, 0, sizeof t);
	t.ns = (char *)"public";
	t.name = (char *)"t";
	t.ncols = 1;
	t.cols = col;
	return t;
}

/* A writable copy of len bytes of s (and a NUL), as a source's text is:
 * sl_pg_text_row decodes bytea in place.  The copies go round a pool, big
 * enough that a test's last copies are still there when it checks them. */
static char *writable(const char *s, size_t len)
{
	static char pool[1 << 20];
	static size_t used;
	char *p;

	assert_true(len < sizeof pool / 4);
	if (len >= sizeof pool - used)
		used = 0;
	p = pool + used;
	memcpy(p, s, len);
	p[len] = '\0';
	used += len + 1;
	return p;
}

static struct sl_text_value tv(const char *s)
{
	return (struct sl_text_value){ writable(s, strlen(s)), (uint32_t)strlen(s), SL_TV_TEXT };
}

/* Converts the text in as a value of a column of type(p, s).  Returns what
 * sl_pg_text_row returns; *out points into scratch or in's text. */
static int conv_in(enum sl_type type, int p, int s, struct sl_text_value *in, struct sl_value *out,
		   struct sl_buf *scratch, struct sl_pg_text_stats *st, char *err, size_t errlen)
{
	struct sl_column c = mkcol(type, p, s);
	struct sl_table t = one_col(&c);

	return sl_pg_text_row(&t, in, out, scratch, st, err, errlen);
}

/* conv_in of a writable copy of len bytes of text. */
static int conv(enum sl_type type, int p, int s, const char *text, size_t len, struct sl_value *out,
		struct sl_buf *scratch, struct sl_pg_text_stats *st, char *err, size_t errlen)
{
	struct sl_text_value in = { writable(text, len), (uint32_t)len, SL_TV_TEXT };

	return conv_in(type, p, s, &in, out, scratch, st, err, errlen);
}

static void describe(const struct sl_value *v, char *out, size_t n)
{
	switch (v->kind) {
	case SL_V_BOOL: snprintf(out, n, "bool %d", v->b); break;
	case SL_V_INT: case SL_V_DATE: case SL_V_TIME: case SL_V_TIMESTAMP:
		snprintf(out, n, "kind %u, %lld", v->kind, (long long)v->i);
		break;
	case SL_V_FLOAT: snprintf(out, n, "float %.9g", (double)v->f); break;
	case SL_V_DOUBLE: snprintf(out, n, "double %.17g", v->d); break;
	case SL_V_DECIMAL:
		snprintf(out, n, "decimal %s%.*s scale %d", v->neg ? "-" : "", (int)v->len, v->p, v->scale);
		break;
	case SL_V_BYTES: case SL_V_STRING: case SL_V_JSON: case SL_V_UUID:
		snprintf(out, n, "kind %u, %u bytes", v->kind, v->len);
		break;
	default: snprintf(out, n, "kind %u", v->kind); break;
	}
}

/* Converts text and checks the value. */
static void check_val(enum sl_type type, int p, int s, const char *text, struct sl_value want)
{
	struct sl_value got;
	struct sl_buf b;
	char err[256] = "", g[200], w[200];

	sl_buf_init(&b, 0);
	if (conv(type, p, s, text, strlen(text), &got, &b, NULL, err, sizeof err) != 0)
		fail_msg("\"%s\": unexpected error: %s", text, err);
	if (!sl_value_equal(&got, &want)) {
		describe(&got, g, sizeof g);
		describe(&want, w, sizeof w);
		fail_msg("\"%s\": got %s, want %s", text, g, w);
	}
	sl_buf_free(&b);
}

static struct sl_value v_int(int64_t i) { return (struct sl_value){ .kind = SL_V_INT, .i = i }; }
static struct sl_value v_k(uint8_t kind, int64_t i) { return (struct sl_value){ .kind = kind, .i = i }; }
static struct sl_value v_bool(bool b) { return (struct sl_value){ .kind = SL_V_BOOL, .b = b }; }

static struct sl_value v_dec(bool neg, const char *digits, int scale)
{
	return (struct sl_value){ .kind = SL_V_DECIMAL, .neg = neg, .scale = (int16_t)scale,
				  .len = (uint32_t)strlen(digits), .p = digits };
}

static struct sl_value v_bytes(uint8_t kind, const void *p, size_t n)
{
	return (struct sl_value){ .kind = kind, .len = (uint32_t)n, .p = p };
}

#define CHECK_INT(type, text, want) check_val(type, 0, 0, text, v_int(want))
#define CHECK_DATE(text, want) check_val(SL_T_DATE, 0, 0, text, v_k(SL_V_DATE, want))
#define CHECK_TIME(text, want) check_val(SL_T_TIME, 0, 0, text, v_k(SL_V_TIME, want))
#define CHECK_TS(type, text, want) check_val(type, 0, 0, text, v_k(SL_V_TIMESTAMP, want))
#define CHECK_DEC(p, s, text, neg, digits) check_val(SL_T_DECIMAL, p, s, text, v_dec(neg, digits, s))

/* Checks that text is rejected, with the column named. */
static void check_bad(enum sl_type type, int p, int s, const char *text)
{
	struct sl_value got;
	struct sl_buf b;
	char err[256] = "";

	sl_buf_init(&b, 0);
	if (conv(type, p, s, text, strlen(text), &got, &b, NULL, err, sizeof err) == 0)
		fail_msg("\"%s\" was accepted for type %d", text, (int)type);
	assert_non_null(strstr(err, "\"col_x\""));
	sl_buf_free(&b);
}

/* The float bits of text converted as a float column. */
static void check_float_bits(const char *text, uint32_t want)
{
	struct sl_value got;
	struct sl_buf b;
	char err[256];
	uint32_t u;

	sl_buf_init(&b, 0);
	if (conv(SL_T_FLOAT, 0, 0, text, strlen(text), &got, &b, NULL, err, sizeof err) != 0)
		fail_msg("\"%s\": %s", text, err);
	assert_int_equal(got.kind, SL_V_FLOAT);
	memcpy(&u, &got.f, sizeof u);
	if (u != want)
		fail_msg("\"%s\": float bits %08x, want %08x", text, u, want);
	sl_buf_free(&b);
}

static void check_double_bits(const char *text, uint64_t want)
{
	struct sl_value got;
	struct sl_buf b;
	char err[256];
	uint64_t u;

	sl_buf_init(&b, 0);
	if (conv(SL_T_DOUBLE, 0, 0, text, strlen(text), &got, &b, NULL, err, sizeof err) != 0)
		fail_msg("\"%s\": %s", text, err);
	assert_int_equal(got.kind, SL_V_DOUBLE);
	memcpy(&u, &got.d, sizeof u);
	if (u != want)
		fail_msg("\"%s\": double bits %016llx, want %016llx", text, (unsigned long long)u,
			 (unsigned long long)want);
	sl_buf_free(&b);
}

/* ---- tests ---- */

static void test_type_map(void **state)
{
	int p = 0, s = 0;
	(void)state;

	assert_int_equal(sl_pg_type_map(1700, ((38 << 16) | 10) + 4, &p, &s), SL_T_DECIMAL);
	assert_int_equal(p, 38);
	assert_int_equal(s, 10);
	assert_int_equal(sl_pg_type_map(1700, -1, &p, &s), SL_T_STRING);
	/* numeric(3,-2) and numeric(2,5) cannot be Avro decimals */
	assert_int_equal(sl_pg_type_map(1700, ((3 << 16) | (0x7fe)) + 4, &p, &s), SL_T_STRING);
	assert_int_equal(sl_pg_type_map(1700, ((2 << 16) | 5) + 4, &p, &s), SL_T_STRING);
	assert_int_equal(sl_pg_type_map(1184, -1, &p, &s), SL_T_TIMESTAMPTZ);
	assert_int_equal(sl_pg_type_map(2950, -1, &p, &s), SL_T_UUID);
	assert_int_equal(sl_pg_type_map(3802, -1, &p, &s), SL_T_JSON);
	assert_int_equal(sl_pg_type_map(1007, -1, &p, &s), SL_T_STRING); /* int4[] */
	assert_int_equal(sl_pg_type_map(SL_PG_BOOL, -1, &p, &s), SL_T_BOOL);
	assert_int_equal(sl_pg_type_map(SL_PG_INT2, -1, &p, &s), SL_T_INT32);
	assert_int_equal(sl_pg_type_map(SL_PG_INT8, -1, &p, &s), SL_T_INT64);
	assert_int_equal(sl_pg_type_map(SL_PG_FLOAT4, -1, &p, &s), SL_T_FLOAT);
	assert_int_equal(sl_pg_type_map(SL_PG_BYTEA, -1, &p, &s), SL_T_BYTES);
	assert_int_equal(sl_pg_type_map(SL_PG_TIME, -1, &p, &s), SL_T_TIME);
	assert_int_equal(sl_pg_type_map(SL_PG_JSON, -1, &p, &s), SL_T_JSON);
	assert_int_equal(sl_pg_type_map(SL_PG_VARCHAR, 24, &p, &s), SL_T_STRING);
}

static void test_null_unchanged(void **state)
{
	struct sl_column c = mkcol(SL_T_INT32, 0, 0);
	struct sl_table t = one_col(&c);
	struct sl_text_value in = { NULL, 0, SL_TV_NULL };
	struct sl_value out;
	struct sl_buf b;
	char err[128];

	(void)state;
	sl_buf_init(&b, 0);
	assert_int_equal(sl_pg_text_row(&t, &in, &out, &b, NULL, err, sizeof err), 0);
	assert_int_equal(out.kind, SL_V_NULL);
	in.kind = SL_TV_UNCHANGED;
	assert_int_equal(sl_pg_text_row(&t, &in, &out, &b, NULL, err, sizeof err), 0);
	assert_int_equal(out.kind, SL_V_UNCHANGED);
	in.kind = 9;
	assert_int_equal(sl_pg_text_row(&t, &in, &out, &b, NULL, err, sizeof err), -1);
	assert_string_equal(err, "column \"col_x\": unknown text value kind 9");
	sl_buf_free(&b);
}

/* Strings and JSON point into the text: no copy. */
static void test_strings(void **state)
{
	struct sl_text_value s = tv("h\xc3\xa9llo"), j = tv("{\"a\": 1}"), arr = tv("{a,b,\"c d\"}");
	struct sl_value v;
	struct sl_buf b;
	char err[128];

	(void)state;
	sl_buf_init(&b, 0);
	assert_int_equal(conv_in(SL_T_STRING, 0, 0, &s, &v, &b, NULL, err, sizeof err), 0);
	assert_int_equal(v.kind, SL_V_STRING);
	assert_ptr_equal(v.p, s.p);
	assert_int_equal(v.len, 6);
	assert_int_equal(conv(SL_T_STRING, 0, 0, "", 0, &v, &b, NULL, err, sizeof err), 0);
	assert_int_equal(v.kind, SL_V_STRING);
	assert_int_equal(v.len, 0);
	assert_int_equal(conv_in(SL_T_JSON, 0, 0, &j, &v, &b, NULL, err, sizeof err), 0);
	assert_int_equal(v.kind, SL_V_JSON);
	assert_ptr_equal(v.p, j.p);
	assert_int_equal(v.len, 8);
	/* everything else, an array here, is its text */
	assert_int_equal(conv_in(SL_T_STRING, 0, 0, &arr, &v, &b, NULL, err, sizeof err), 0);
	assert_ptr_equal(v.p, arr.p);
	sl_buf_free(&b);
}

static void test_uuid(void **state)
{
	static const unsigned char want[16] = { 0xa0, 0xee, 0xbc, 0x99, 0x9c, 0x0b, 0x4e, 0xf8,
						0xbb, 0x6d, 0x6b, 0xb9, 0xbd, 0x38, 0x0a, 0x11 };
	unsigned char u[16];

	(void)state;
	check_val(SL_T_UUID, 0, 0, "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11", v_bytes(SL_V_UUID, want, 16));
	check_val(SL_T_UUID, 0, 0, "A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11", v_bytes(SL_V_UUID, want, 16));
	check_val(SL_T_UUID, 0, 0, "00000000-0000-0000-0000-000000000000",
		  v_bytes(SL_V_UUID, "\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0", 16));
	check_val(SL_T_UUID, 0, 0, "ffffffff-ffff-ffff-ffff-ffffffffffff",
		  v_bytes(SL_V_UUID, "\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff", 16));
	assert_int_equal(sl_pg_parse_uuid("a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11", 36, u), 0);
	assert_memory_equal(u, want, 16);
	check_bad(SL_T_UUID, 0, 0, "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a1");
	check_bad(SL_T_UUID, 0, 0, "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a111");
	check_bad(SL_T_UUID, 0, 0, "a0eebc999c0b4ef8bb6d6bb9bd380a11");
	check_bad(SL_T_UUID, 0, 0, "{a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11}");
	check_bad(SL_T_UUID, 0, 0, "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a1g");
	check_bad(SL_T_UUID, 0, 0, "a0eebc99-9c0b4-ef8-bb6d-6bb9bd380a11");
	check_bad(SL_T_UUID, 0, 0, "a0eebc99_9c0b_4ef8_bb6d_6bb9bd380a11");
	check_bad(SL_T_UUID, 0, 0, " a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a1");
	check_bad(SL_T_UUID, 0, 0, "");
}

static void test_bool_int(void **state)
{
	(void)state;
	check_val(SL_T_BOOL, 0, 0, "t", v_bool(true));
	check_val(SL_T_BOOL, 0, 0, "f", v_bool(false));
	check_bad(SL_T_BOOL, 0, 0, "true");
	check_bad(SL_T_BOOL, 0, 0, "");
	check_bad(SL_T_BOOL, 0, 0, "x");

	CHECK_INT(SL_T_INT32, "0", 0);
	CHECK_INT(SL_T_INT32, "-1", -1);
	CHECK_INT(SL_T_INT32, "1", 1);
	CHECK_INT(SL_T_INT32, "63", 63);
	CHECK_INT(SL_T_INT32, "-64", -64);
	CHECK_INT(SL_T_INT32, "64", 64);
	CHECK_INT(SL_T_INT32, "123", 123);
	CHECK_INT(SL_T_INT32, "+123", 123);
	CHECK_INT(SL_T_INT32, "2147483647", INT32_MAX);
	CHECK_INT(SL_T_INT32, "-2147483648", INT32_MIN);
	check_bad(SL_T_INT32, 0, 0, "2147483648");
	check_bad(SL_T_INT32, 0, 0, "-2147483649");
	check_bad(SL_T_INT32, 0, 0, "");
	check_bad(SL_T_INT32, 0, 0, "-");
	check_bad(SL_T_INT32, 0, 0, "12a");
	check_bad(SL_T_INT32, 0, 0, " 12");
	check_bad(SL_T_INT32, 0, 0, "1.0");

	CHECK_INT(SL_T_INT64, "9223372036854775807", INT64_MAX);
	CHECK_INT(SL_T_INT64, "-9223372036854775808", INT64_MIN);
	CHECK_INT(SL_T_INT64, "4294967296", INT64_C(4294967296));
	check_bad(SL_T_INT64, 0, 0, "9223372036854775808");
	check_bad(SL_T_INT64, 0, 0, "-9223372036854775809");
	check_bad(SL_T_INT64, 0, 0, "99999999999999999999999");
	/* 19 digits take the unchecked loop, 20 the checked one */
	check_bad(SL_T_INT64, 0, 0, "9999999999999999999");
	check_bad(SL_T_INT64, 0, 0, "-9999999999999999999");
	check_bad(SL_T_INT64, 0, 0, "18446744073709551616");
	check_bad(SL_T_INT64, 0, 0, "99999999999999999999");
	CHECK_INT(SL_T_INT64, "00000000000000000001", 1);
	check_bad(SL_T_INT64, 0, 0, "000000000000000000001");  /* over 20 digits */
	CHECK_INT(SL_T_INT64, "-09223372036854775808", INT64_MIN);
	CHECK_INT(SL_T_INT32, "00000000002147483647", INT32_MAX);
	check_bad(SL_T_INT32, 0, 0, "4294967298");
}

static void test_float_double(void **state)
{
	(void)state;
	/* float: IEEE 754 single. 1.5 = 0x3fc00000. */
	check_float_bits("1.5", 0x3fc00000);
	check_float_bits("-2", 0xc0000000);
	check_float_bits("0", 0x00000000);
	check_float_bits("-0", 0x80000000);
	check_float_bits("NaN", 0x7fc00000);
	check_float_bits("Infinity", 0x7f800000);
	check_float_bits("-Infinity", 0xff800000);
	check_float_bits("1e+10", 0x501502f9);
	check_float_bits("3.4028235e+38", 0x7f7fffff);
	check_float_bits("1e-45", 0x00000001);  /* denormal */
	check_bad(SL_T_FLOAT, 0, 0, "1e39");
	check_bad(SL_T_FLOAT, 0, 0, "1.5x");
	check_bad(SL_T_FLOAT, 0, 0, " 1.5");
	check_bad(SL_T_FLOAT, 0, 0, "");
	/* double: 1.5 = 0x3ff8000000000000, -0.1 = 0xbfb999999999999a. */
	check_double_bits("1.5", UINT64_C(0x3ff8000000000000));
	check_double_bits("-0.1", UINT64_C(0xbfb999999999999a));
	check_double_bits("1.7976931348623157e+308", UINT64_C(0x7fefffffffffffff));
	check_double_bits("NaN", UINT64_C(0x7ff8000000000000));
	check_double_bits("Infinity", UINT64_C(0x7ff0000000000000));
	check_double_bits("-Infinity", UINT64_C(0xfff0000000000000));
	check_double_bits("2.5E-3", UINT64_C(0x3f647ae147ae147b));
	check_bad(SL_T_DOUBLE, 0, 0, "1e400");
	check_bad(SL_T_DOUBLE, 0, 0, "abc");
	check_bad(SL_T_DOUBLE, 0, 0, "1,5");
}

/* Converts text as double and as float and compares the bits with what
 * libc's correctly rounded strtod/strtof give (an independent parser). */
static void check_like_libc(const char *text)
{
	struct sl_value v;
	struct sl_buf b;
	char err[256];
	double d = strtod(text, NULL);
	float f = strtof(text, NULL);

	sl_buf_init(&b, 0);
	if (!(fabs(d) > DBL_MAX)) {
		assert_int_equal(conv(SL_T_DOUBLE, 0, 0, text, strlen(text), &v, &b, NULL, err, sizeof err), 0);
		if (v.kind != SL_V_DOUBLE || memcmp(&v.d, &d, sizeof d) != 0)
			fail_msg("double %s differs from strtod", text);
	}
	if (!(fabsf(f) > FLT_MAX)) {
		assert_int_equal(conv(SL_T_FLOAT, 0, 0, text, strlen(text), &v, &b, NULL, err, sizeof err), 0);
		if (v.kind != SL_V_FLOAT || memcmp(&v.f, &f, sizeof f) != 0)
			fail_msg("float %s differs from strtof", text);
	}
	sl_buf_free(&b);
}

/* The edges of the exact fast path: 2^53 and 2^24 (the largest exact
 * mantissas), one more, 10^22 and 10^10 (the largest exact powers), one more,
 * and halfway cases that must round to even. */
static void test_float_edges(void **state)
{
	static const char *const texts[] = {
		"9007199254740992", "9007199254740993", "9007199254740994", "-9007199254740993",
		"900719925474099.3", "0.9007199254740993", "9007199254740993e-16",
		"16777216", "16777217", "16777218", "1677721.7", "-16777217",
		"1e22", "1e23", "1e-22", "1e-23", "1e10", "1e11", "1e-10", "1e-11", "3e22", "7e10",
		"123456789e13", "123456789e14", "1.5e-07", "4.35e+17", "2.5E-3", "1e+0", "1e-0",
		"8.589973e9", "1.00000005960464477539", "1.0000000596046447", "0.30000000000000004",
		"9999999999999999999", "99999999999999999999", "0", "-0", "0e5", "-0.0e-5",
		"0.000000000000000000001", "5e-324", "1.7976931348623157e+308",
	};

	(void)state;
	for (size_t i = 0; i < sizeof texts / sizeof *texts; i++)
		check_like_libc(texts[i]);
}

/* Random decimal texts with and without an exponent, and random doubles and
 * floats in the shortest text that reads back exactly (PostgreSQL's output
 * since version 12): the value must round-trip exactly. */
static void test_float_random(void **state)
{
	unsigned seed = 777;
	uint64_t x = UINT64_C(0x243F6A8885A308D3);
	char text[64];

	(void)state;
	for (int iter = 0; iter < 200000; iter++) {
		size_t n = 0;
		int nd, dotpos;

		seed = seed * 1103515245u + 12345u;
		nd = 1 + (int)((seed >> 8) % 19);
		seed = seed * 1103515245u + 12345u;
		dotpos = (int)((seed >> 8) % (unsigned)(nd + 1));
		if ((seed >> 20) & 1)
			text[n++] = '-';
		for (int i = 0; i < nd; i++) {
			if (i == dotpos && i > 0)
				text[n++] = '.';
			seed = seed * 1103515245u + 12345u;
			text[n++] = (char)('0' + (seed >> 16) % 10);
		}
		seed = seed * 1103515245u + 12345u;
		if ((seed >> 9) % 3 == 0)
			snprintf(text + n, sizeof text - n, "e%c%u", (seed >> 12) & 1 ? '-' : '+',
				 (seed >> 16) % 30);
		else
			text[n] = '\0';
		check_like_libc(text);
	}
	for (int iter = 0; iter < 100000; iter++) {
		double d;
		float f;
		uint32_t u;
		x ^= x >> 12;
		x ^= x << 25;
		x ^= x >> 27;
		memcpy(&d, &(uint64_t){ x * UINT64_C(2685821657736338717) }, sizeof d);
		u = (uint32_t)(x >> 32);
		memcpy(&f, &u, sizeof f);
		if (isfinite(d)) {
			/* shortest "%.*g" that reads back as d */
			for (int prec = 1; prec <= 17; prec++) {
				snprintf(text, sizeof text, "%.*g", prec, d);
				if (strtod(text, NULL) == d)
					break;
			}
			check_like_libc(text);
		}
		/* also everyday magnitudes, where the fast path applies most */
		snprintf(text, sizeof text, "%.*g", 1 + (int)(x % 17), (double)(x >> 11) / 9007199254740992.0 * 1000.0);
		check_like_libc(text);
		if (isfinite(f)) {
			for (int prec = 1; prec <= 9; prec++) {
				snprintf(text, sizeof text, "%.*g", prec, (double)f);
				if (strtof(text, NULL) == f)
					break;
			}
			check_like_libc(text);
		}
	}
}

static void test_decimal_small(void **state)
{
	(void)state;
	CHECK_DEC(5, 2, "-123.45", true, "12345");
	CHECK_DEC(5, 2, "0.5", false, "50");
	CHECK_DEC(5, 2, "100", false, "10000");
	CHECK_DEC(5, 2, "0", false, "0");
	CHECK_DEC(5, 2, "-0.00", false, "0");   /* zero is never negative */
	CHECK_DEC(5, 2, "0.05", false, "5");
	CHECK_DEC(5, 2, "+1.5", false, "150");
	CHECK_DEC(5, 2, ".5", false, "50");
	CHECK_DEC(5, 2, "5.", false, "500");
	CHECK_DEC(5, 2, "999.99", false, "99999");
	CHECK_DEC(5, 2, "007.5", false, "750");  /* leading zeros */
	CHECK_DEC(3, 0, "127", false, "127");
	CHECK_DEC(3, 0, "128", false, "128");
	CHECK_DEC(3, 0, "-128", true, "128");
	CHECK_DEC(3, 0, "-129", true, "129");
	CHECK_DEC(3, 0, "-1", true, "1");
	CHECK_DEC(3, 0, "255", false, "255");
	CHECK_DEC(3, 0, "-256", true, "256");
	CHECK_DEC(10, 2, "-505.00", true, "50500");
	CHECK_DEC(10, 2, "-505", true, "50500");
	CHECK_DEC(18, 0, "999999999999999999", false, "999999999999999999");
	CHECK_DEC(19, 0, "1000000000000000000", false, "1000000000000000000");
	CHECK_DEC(19, 1, "-0.1", true, "1");
	CHECK_DEC(1, 1, "0.5", false, "5");

	check_bad(SL_T_DECIMAL, 5, 2, "1.234");    /* more fraction digits than the scale */
	check_bad(SL_T_DECIMAL, 5, 2, "1234.5");   /* 4 + 2 digits > precision 5 */
	check_bad(SL_T_DECIMAL, 5, 2, "abc");
	check_bad(SL_T_DECIMAL, 5, 2, "");
	check_bad(SL_T_DECIMAL, 5, 2, "-");
	check_bad(SL_T_DECIMAL, 5, 2, ".");
	check_bad(SL_T_DECIMAL, 5, 2, "1.2.3");
	check_bad(SL_T_DECIMAL, 5, 2, "1e5");
	check_bad(SL_T_DECIMAL, 5, 2, "Infinity");
	check_bad(SL_T_DECIMAL, 5, 2, " 1");
	check_bad(SL_T_DECIMAL, 5, 2, "nan");
}

/* Runs fn with stderr going to a file; returns what was written (malloc'd). */
static char *capture_stderr(void (*fn)(void *), void *arg)
{
	char path[] = "/tmp/sluice-pgtext-XXXXXX";
	int fd = mkstemp(path), saved;
	char *out;
	off_t n;

	assert_true(fd >= 0);
	fflush(stderr);
	saved = dup(2);
	assert_true(saved >= 0);
	dup2(fd, 2);
	fn(arg);
	fflush(stderr);
	dup2(saved, 2);
	close(saved);
	n = lseek(fd, 0, SEEK_END);
	assert_true(n >= 0);
	out = calloc(1, (size_t)n + 1);
	assert_non_null(out);
	assert_int_equal(pread(fd, out, (size_t)n, 0), n);
	close(fd);
	unlink(path);
	return out;
}

struct nan_run {
	struct sl_pg_text_stats *st;
	int times;
};

static void convert_nans(void *arg)
{
	struct nan_run *r = arg;
	struct sl_value v;
	struct sl_buf b;
	char err[128];

	sl_buf_init(&b, 0);
	for (int i = 0; i < r->times; i++) {
		v.kind = SL_V_INT;
		assert_int_equal(conv(SL_T_DECIMAL, 10, 2, "NaN", 3, &v, &b, r->st, err, sizeof err), 0);
		assert_int_equal(v.kind, SL_V_NULL);
	}
	sl_buf_free(&b);
}

static size_t count(const char *hay, const char *needle)
{
	size_t n = 0;

	for (const char *p = hay; (p = strstr(p, needle)); p++)
		n++;
	return n;
}

/* NaN in a numeric(p,s) column becomes null, is counted, and is warned
 * about on the 1st, 2nd, 4th, 8th, ... occurrence, naming the column. */
static void test_decimal_nan(void **state)
{
	struct sl_pg_text_stats st;
	struct nan_run r = { &st, 9 };
	char *log;

	(void)state;
	memset(&st, 0, sizeof st);
	log = capture_stderr(convert_nans, &r);
	assert_int_equal(st.decimal_nan_nulls, 9);
	assert_int_equal(count(log, "warning: column \"col_x\" (numeric(10,2)): NaN cannot be a decimal"), 4);
	assert_non_null(strstr(log, "(1 so far)"));
	assert_non_null(strstr(log, "(2 so far)"));
	assert_non_null(strstr(log, "(4 so far)"));
	assert_non_null(strstr(log, "(8 so far)"));
	assert_null(strstr(log, "(3 so far)"));
	free(log);
	/* Without a stats struct it is still null (and warned about). */
	r.st = NULL;
	r.times = 1;
	log = capture_stderr(convert_nans, &r);
	assert_int_equal(count(log, "NaN cannot be a decimal"), 1);
	free(log);
}

static void test_decimal_large(void **state)
{
	(void)state;
	CHECK_DEC(38, 10, "12345678901234567890123456.7890123456", false, "123456789012345678901234567890123456");
	/* -(10^38 - 1): the most negative numeric(38,10) value. */
	CHECK_DEC(38, 10, "-9999999999999999999999999999.9999999999", true, "99999999999999999999999999999999999999");
	CHECK_DEC(38, 10, "-0.0000000001", true, "1");
	CHECK_DEC(38, 10, "1.5", false, "15000000000");
	check_bad(SL_T_DECIMAL, 38, 10, "12345678901234567890123456789.0");  /* 29 + 10 > 38 */
	CHECK_DEC(100, 0,
		  "-3141592653589793238462643383279502884197169399375105820974944592307816406286208998628034825342117067",
		  true,
		  "3141592653589793238462643383279502884197169399375105820974944592307816406286208998628034825342117067");
}

static void test_decimal_1000(void **state)
{
	char text[1003], want[1001], digits[2100];
	size_t n;
	bool neg;

	(void)state;
	/* 10^1000 - 1 */
	memset(text, '9', 1000);
	text[1000] = '\0';
	CHECK_DEC(1000, 0, text, false, text);
	/* -10^1000: "-1" followed by 999 zeros */
	text[0] = '-';
	text[1] = '1';
	memset(text + 2, '0', 999);
	text[1001] = '\0';
	CHECK_DEC(1000, 0, text, true, text + 1);
	/* 1001 digits do not fit numeric(1000,0). */
	memset(text, '1', 1001);
	text[1001] = '\0';
	check_bad(SL_T_DECIMAL, 1000, 0, text);
	/* numeric(1000,1000): "0." and 1000 digits. */
	text[0] = '0';
	text[1] = '.';
	memset(text + 2, '9', 1000);
	text[1002] = '\0';
	memset(want, '9', 1000);
	want[1000] = '\0';
	CHECK_DEC(1000, 1000, text, false, want);
	/* "1" in numeric(1000,999): 1 and 999 zeros of padding. */
	want[0] = '1';
	memset(want + 1, '0', 999);
	CHECK_DEC(1000, 999, "1", false, want);
	/* Precision past 1000 is refused rather than overflowing. */
	assert_int_equal(sl_pg_parse_decimal("1", 1, 1001, 0, digits, &n, &neg), -1);
	assert_int_equal(sl_pg_parse_decimal("NaN", 3, 10, 2, digits, &n, &neg), 1);
}

/* Random texts of up to 1000 digits, both signs, every scale: the digits
 * come back as written, with the sign. */
static void test_decimal_random(void **state)
{
	unsigned seed = 12345;
	char digits[1001], text[1010];

	(void)state;
	for (int iter = 0; iter < 3000; iter++) {
		size_t nd, tl = 0;
		int scale;
		bool neg;
		seed = seed * 1103515245u + 12345u;
		nd = 1 + (iter < 2000 ? (seed >> 8) % 40 : (seed >> 8) % 1000);
		seed = seed * 1103515245u + 12345u;
		neg = (seed >> 16) & 1;
		scale = (int)((seed >> 4) % (nd + 1));
		for (size_t i = 0; i < nd; i++) {
			seed = seed * 1103515245u + 12345u;
			digits[i] = (char)('0' + (seed >> 16) % 10);
		}
		digits[0] = digits[0] == '0' ? '7' : digits[0];
		digits[nd] = '\0';
		/* text = [-] int part "." fraction (scale digits) */
		if (neg)
			text[tl++] = '-';
		if (nd - (size_t)scale == 0)
			text[tl++] = '0';
		memcpy(text + tl, digits, nd - (size_t)scale);
		tl += nd - (size_t)scale;
		if (scale > 0) {
			text[tl++] = '.';
			memcpy(text + tl, digits + nd - scale, (size_t)scale);
			tl += (size_t)scale;
		}
		text[tl] = '\0';
		check_val(SL_T_DECIMAL, 1000, scale, text, v_dec(neg, digits, scale));
	}
}

/* Test-local reference: Fliegel & Van Flandern's Julian day number of a
 * proleptic Gregorian date (valid for astronomical years > -4800). */
static long jdn(long y, long m, long d)
{
	long a = (m - 14) / 12;
	return (1461 * (y + 4800 + a)) / 4 + (367 * (m - 2 - 12 * a)) / 12 -
	       (3 * ((y + 4900 + a) / 100)) / 4 + d - 32075;
}

static void test_date(void **state)
{
	int32_t days;
	static const int dm[] = { 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31 };

	(void)state;
	CHECK_DATE("1970-01-01", 0);
	CHECK_DATE("2024-01-31", 19753);
	CHECK_DATE("1969-12-31", -1);
	CHECK_DATE("2000-02-29", 11016);
	CHECK_DATE("0001-01-01", -719162);
	CHECK_DATE("9999-12-31", 2932896);
	CHECK_DATE("10000-01-01", 2932897);
	/* 44 BC is astronomical year -43: 292 days to 43 BC's new year, 43 more
	 * years with 11 leap days to 1 AD: 719162 + 292 + 15706 before 1970. */
	CHECK_DATE("0044-03-15 BC", -735160);
	CHECK_DATE("0001-12-31 BC", -719163);
	CHECK_DATE("0005-02-29 BC", (int64_t)(jdn(-4, 2, 29) - 2440588));
	CHECK_DATE("4713-01-01 BC", (int64_t)(jdn(-4712, 1, 1) - 2440588));
	CHECK_DATE("5874897-12-31", (int64_t)5874897 * 365 + 5874897 / 4 - 5874897 / 100 + 5874897 / 400 -
		   719162 - 1);
	CHECK_DATE("4714-11-24 BC", -2440588);  /* PostgreSQL's first date: Julian day 0 */
	CHECK_DATE("infinity", 2932896);
	CHECK_DATE("-infinity", -719162);
	assert_int_equal(SL_PG_DATE_INFINITY, 2932896);
	assert_int_equal(SL_PG_DATE_NEG_INFINITY, -719162);

	check_bad(SL_T_DATE, 0, 0, "2023-02-29");
	check_bad(SL_T_DATE, 0, 0, "1900-02-29");
	check_bad(SL_T_DATE, 0, 0, "2024-02-30");
	check_bad(SL_T_DATE, 0, 0, "2024-13-01");
	check_bad(SL_T_DATE, 0, 0, "2024-00-10");
	check_bad(SL_T_DATE, 0, 0, "2024-01-00");
	check_bad(SL_T_DATE, 0, 0, "2024-1-01");
	check_bad(SL_T_DATE, 0, 0, "0000-01-01");
	check_bad(SL_T_DATE, 0, 0, "2024-01-31 AD");
	check_bad(SL_T_DATE, 0, 0, "2024-01-31 BC ");
	check_bad(SL_T_DATE, 0, 0, "2024-01-31 13:00:00");
	check_bad(SL_T_DATE, 0, 0, "");
	check_bad(SL_T_DATE, 0, 0, "Infinity");

	/* Every day from 4713 BC to 12000 AD against the Julian day number. */
	for (long y = -4712; y <= 12000; y++) {
		char text[40];
		bool leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
		for (int m = 1; m <= 12; m++) {
			int last = dm[m - 1] + (m == 2 && leap);
			for (int d = 1; d <= last; d++) {
				int n = y <= 0 ? snprintf(text, sizeof text, "%04ld-%02d-%02d BC", 1 - y, m, d)
					       : snprintf(text, sizeof text, "%04ld-%02d-%02d", y, m, d);
				if (sl_pg_parse_date(text, (size_t)n, &days) != 0)
					fail_msg("%s rejected", text);
				if (days != jdn(y, m, d) - 2440588)
					fail_msg("%s: %d days, want %ld", text, days, jdn(y, m, d) - 2440588);
			}
		}
	}
}

static void test_time(void **state)
{
	(void)state;
	CHECK_TIME("00:00:00", 0);
	CHECK_TIME("13:45:00", INT64_C(49500000000));
	CHECK_TIME("13:45:00.5", INT64_C(49500500000));
	CHECK_TIME("13:45:00.123456", INT64_C(49500123456));
	CHECK_TIME("13:45:00.000001", INT64_C(49500000001));
	CHECK_TIME("23:59:59.999999", INT64_C(86399999999));
	CHECK_TIME("24:00:00", INT64_C(86400000000));
	check_bad(SL_T_TIME, 0, 0, "24:00:00.000001");
	check_bad(SL_T_TIME, 0, 0, "24:00:01");
	check_bad(SL_T_TIME, 0, 0, "25:00:00");
	check_bad(SL_T_TIME, 0, 0, "13:60:00");
	check_bad(SL_T_TIME, 0, 0, "13:45:60");
	check_bad(SL_T_TIME, 0, 0, "13:45");
	check_bad(SL_T_TIME, 0, 0, "1:45:00");
	check_bad(SL_T_TIME, 0, 0, "13:45:00.");
	check_bad(SL_T_TIME, 0, 0, "13:45:00.1234567");
	check_bad(SL_T_TIME, 0, 0, "13:45:00+00");
	check_bad(SL_T_TIME, 0, 0, "");
}

static void test_timestamp(void **state)
{
	/* 2024-01-31 13:45:00 UTC = 1706708700 s (19753 days * 86400 + 49500). */
	const int64_t base = INT64_C(1706708700000000);
	/* 44 BC-03-15 00:00 UTC: -735160 days. */
	const int64_t ides = INT64_C(-735160) * 86400 * 1000000;

	(void)state;
	CHECK_TS(SL_T_TIMESTAMP, "1970-01-01 00:00:00", 0);
	CHECK_TS(SL_T_TIMESTAMP, "2024-01-31 13:45:00", base);
	CHECK_TS(SL_T_TIMESTAMP, "2024-01-31 13:45:00.123456", base + 123456);
	CHECK_TS(SL_T_TIMESTAMP, "2024-01-31 13:45:00.5", base + 500000);
	CHECK_TS(SL_T_TIMESTAMP, "1969-12-31 23:59:59.5", -500000);
	CHECK_TS(SL_T_TIMESTAMP, "2024-01-31 24:00:00", base - INT64_C(49500000000) + INT64_C(86400000000));
	CHECK_TS(SL_T_TIMESTAMP, "0044-03-15 10:00:00 BC", ides + INT64_C(36000000000));
	CHECK_TS(SL_T_TIMESTAMP, "0001-01-01 00:00:00", INT64_C(-62135596800000000));
	CHECK_TS(SL_T_TIMESTAMP, "10000-01-01 00:00:00", INT64_C(2932897) * 86400 * 1000000);
	CHECK_TS(SL_T_TIMESTAMP, "infinity", INT64_C(253402300799999999));
	CHECK_TS(SL_T_TIMESTAMP, "-infinity", INT64_C(-62135596800000000));
	assert_true(SL_PG_TS_INFINITY == INT64_C(253402300799999999));
	assert_true(SL_PG_TS_NEG_INFINITY == INT64_C(-62135596800000000));
	check_bad(SL_T_TIMESTAMP, 0, 0, "2024-01-31 13:45:00+00");
	check_bad(SL_T_TIMESTAMP, 0, 0, "2024-01-31");
	check_bad(SL_T_TIMESTAMP, 0, 0, "2024-01-31T13:45:00");
	check_bad(SL_T_TIMESTAMP, 0, 0, "2024-02-30 13:45:00");
	check_bad(SL_T_TIMESTAMP, 0, 0, "2024-01-31 13:45:00.1234567");
	check_bad(SL_T_TIMESTAMP, 0, 0, "2024-01-31 13:45");
	check_bad(SL_T_TIMESTAMP, 0, 0, "Infinity");

	/* PostgreSQL's range: from 4714-11-24 BC (exact) to 294276-12-31, whose
	 * last 30 years are past int64 microseconds and clamp (counted). */
	CHECK_TS(SL_T_TIMESTAMP, "4714-11-24 00:00:00 BC", INT64_C(-210866803200000000));
	CHECK_TS(SL_T_TIMESTAMPTZ, "4714-11-24 00:00:00+00 BC", INT64_C(-210866803200000000));
	CHECK_TS(SL_T_TIMESTAMP, "294247-01-10 04:00:54.775807", INT64_MAX);
	{
		static const char *const past[] = {
			"294247-01-10 04:00:54.775808", "294276-12-31 23:59:59.999999",
		};
		struct sl_pg_text_stats st = { 0 };
		for (size_t k = 0; k < 2; k++) {
			int64_t us = 0;
			assert_int_equal(sl_pg_parse_timestamp(past[k], strlen(past[k]), false, &us), 1);
			assert_true(us == INT64_MAX);
		}
		for (size_t k = 0; k < 2; k++) {
			struct sl_value got;
			struct sl_buf b;
			char err[256];
			sl_buf_init(&b, 0);
			assert_int_equal(conv(SL_T_TIMESTAMPTZ, 0, 0, "294276-12-31 23:59:59.999999+00", 31, &got,
					      &b, &st, err, sizeof err), 0);
			assert_int_equal(got.kind, SL_V_TIMESTAMP);
			assert_true(got.i == INT64_MAX);
			sl_buf_free(&b);
		}
		assert_int_equal(st.timestamp_clamps, 2);
	}
	CHECK_TS(SL_T_TIMESTAMPTZ, "2024-01-31 13:45:00+00", base);
	CHECK_TS(SL_T_TIMESTAMPTZ, "2024-01-31 13:45:00.123456+00", base + 123456);
	CHECK_TS(SL_T_TIMESTAMPTZ, "2024-01-31 13:45:00-08", base + INT64_C(8) * 3600 * 1000000);
	CHECK_TS(SL_T_TIMESTAMPTZ, "2024-01-31 13:45:00.25+05:30", base - INT64_C(19800) * 1000000 + 250000);
	CHECK_TS(SL_T_TIMESTAMPTZ, "2024-01-31 13:45:00+05:30:15", base - INT64_C(19815) * 1000000);
	CHECK_TS(SL_T_TIMESTAMPTZ, "2024-01-31 13:45:00-00:53:28", base + INT64_C(3208) * 1000000);
	CHECK_TS(SL_T_TIMESTAMPTZ, "2024-01-01 00:30:00+01", INT64_C(1704065400) * 1000000);
	CHECK_TS(SL_T_TIMESTAMPTZ, "0044-03-15 10:00:00+00 BC", ides + INT64_C(36000000000));
	CHECK_TS(SL_T_TIMESTAMPTZ, "0044-03-15 10:00:00+00:53:28 BC",
		 ides + INT64_C(36000000000) - INT64_C(3208) * 1000000);
	CHECK_TS(SL_T_TIMESTAMPTZ, "10000-01-01 00:00:00+00", INT64_C(2932897) * 86400 * 1000000);
	CHECK_TS(SL_T_TIMESTAMPTZ, "infinity", INT64_C(253402300799999999));
	CHECK_TS(SL_T_TIMESTAMPTZ, "-infinity", INT64_C(-62135596800000000));
	check_bad(SL_T_TIMESTAMPTZ, 0, 0, "2024-01-31 13:45:00");
	check_bad(SL_T_TIMESTAMPTZ, 0, 0, "2024-01-31 13:45:00+5");
	check_bad(SL_T_TIMESTAMPTZ, 0, 0, "2024-01-31 13:45:00+05:3");
	check_bad(SL_T_TIMESTAMPTZ, 0, 0, "2024-01-31 13:45:00+05:60");
	check_bad(SL_T_TIMESTAMPTZ, 0, 0, "2024-01-31 13:45:00+05:30:60");
	check_bad(SL_T_TIMESTAMPTZ, 0, 0, "0044-03-15 10:00:00 BC+00");
	check_bad(SL_T_TIMESTAMPTZ, 0, 0, "2024-01-31 13:45:00Z");
}

static void test_bytes(void **state)
{
	(void)state;
	check_val(SL_T_BYTES, 0, 0, "\\x0a0bff", v_bytes(SL_V_BYTES, "\x0a\x0b\xff", 3));
	check_val(SL_T_BYTES, 0, 0, "\\x", v_bytes(SL_V_BYTES, "", 0));
	check_val(SL_T_BYTES, 0, 0, "\\xABcd", v_bytes(SL_V_BYTES, "\xab\xcd", 2));
	check_val(SL_T_BYTES, 0, 0, "\\x00", v_bytes(SL_V_BYTES, "\0", 1));
	check_bad(SL_T_BYTES, 0, 0, "\\x0");
	check_bad(SL_T_BYTES, 0, 0, "\\xzz");
	check_bad(SL_T_BYTES, 0, 0, "abc");
	check_bad(SL_T_BYTES, 0, 0, "");
	check_bad(SL_T_BYTES, 0, 0, "\\");
	check_bad(SL_T_BYTES, 0, 0, "\\000");  /* escape format is not accepted */
}

static void test_error_message(void **state)
{
	char text[101], err[512];
	struct sl_value v;
	struct sl_buf b;

	(void)state;
	for (int i = 0; i < 100; i++)
		text[i] = (char)('a' + i % 26);
	text[100] = '\0';
	sl_buf_init(&b, 0);
	assert_int_equal(conv(SL_T_INT32, 0, 0, text, 100, &v, &b, NULL, err, sizeof err), -1);
	/* names the column, quotes at most 64 bytes of the value */
	assert_non_null(strstr(err, "column \"col_x\""));
	assert_non_null(strstr(err, "\"abcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuvwxyzabcdefghijkl\"..."));
	assert_null(strstr(err, "abcdefghijklm\""));
	/* a short value is quoted whole */
	assert_int_equal(conv(SL_T_INT32, 0, 0, "12x", 3, &v, &b, NULL, err, sizeof err), -1);
	assert_string_equal(err, "column \"col_x\": invalid integer value \"12x\"");
	assert_int_equal(conv(SL_T_DATE, 0, 0, "2024-02-30", 10, &v, &b, NULL, err, sizeof err), -1);
	assert_string_equal(err, "column \"col_x\": invalid date value \"2024-02-30\"");
	assert_int_equal(conv(SL_T_DECIMAL, 10, 2, "12.345", 6, &v, &b, NULL, err, sizeof err), -1);
	assert_string_equal(err, "column \"col_x\": invalid numeric value \"12.345\"");
	assert_int_equal(conv((enum sl_type)77, 0, 0, "1", 1, &v, &b, NULL, err, sizeof err), -1);
	assert_string_equal(err, "column \"col_x\": unknown output type 77");
	sl_buf_free(&b);
}

static void test_not_nul_terminated(void **state)
{
	/* Values point into larger buffers: only len bytes count. */
	static const char raw[] = "2024-01-31 13:45:00.5+00garbage";
	struct sl_value v;
	struct sl_buf b;
	char err[256];

	(void)state;
	sl_buf_init(&b, 0);
	assert_int_equal(conv(SL_T_TIMESTAMPTZ, 0, 0, raw, 24, &v, &b, NULL, err, sizeof err), 0);
	assert_int_equal(v.kind, SL_V_TIMESTAMP);
	assert_true(v.i == INT64_C(1706708700500000));
	assert_int_equal(conv(SL_T_DOUBLE, 0, 0, "1.5999", 3, &v, &b, NULL, err, sizeof err), 0);
	assert_true(v.d == 1.5);
	assert_int_equal(conv(SL_T_DECIMAL, 5, 2, "1.5999", 3, &v, &b, NULL, err, sizeof err), 0);
	assert_int_equal(v.len, 3);
	assert_memory_equal(v.p, "150", 3);
	assert_int_equal(conv(SL_T_INT64, 0, 0, "123456", 2, &v, &b, NULL, err, sizeof err), 0);
	assert_true(v.i == 12);
	sl_buf_free(&b);
}

/* A whole row: every value that lives in scratch keeps its pointer valid
 * while later ones are decoded, from an empty scratch buffer on, and the next
 * row reuses the buffer. */
static void test_row(void **state)
{
	struct sl_column cols[8];
	struct sl_table t;
	struct sl_text_value in[8];
	struct sl_value out[8];
	struct sl_pg_text_stats st;
	struct sl_buf b;
	char err[256], big[4003], bigd[1003];
	unsigned char want[2000];

	(void)state;
	memset(&st, 0, sizeof st);
	cols[0] = mkcol(SL_T_INT64, 0, 0);
	cols[1] = mkcol(SL_T_BYTES, 0, 0);
	cols[2] = mkcol(SL_T_DECIMAL, 1000, 500);
	cols[3] = mkcol(SL_T_UUID, 0, 0);
	cols[4] = mkcol(SL_T_BYTES, 0, 0);
	cols[5] = mkcol(SL_T_STRING, 0, 0);
	cols[6] = mkcol(SL_T_DECIMAL, 10, 2);
	cols[7] = mkcol(SL_T_JSON, 0, 0);
	cols[1].name = (char *)"blob";
	cols[6].name = (char *)"amount";
	memset(&t, 0, sizeof t);
	t.ns = (char *)"public";
	t.name = (char *)"t";
	t.ncols = 8;
	t.cols = cols;
	/* 2000 bytes of bytea, 0x00..0xff repeated */
	big[0] = '\\';
	big[1] = 'x';
	for (int i = 0; i < 2000; i++) {
		want[i] = (unsigned char)i;
		snprintf(big + 2 + 2 * i, 3, "%02x", i & 0xff);
	}
	/* a decimal of 1 integer digit and 1 fraction digit, padded to scale 500 */
	in[0] = tv("42");
	in[1] = (struct sl_text_value){ big, 4002, SL_TV_TEXT };
	in[2] = tv("-3.5");
	in[3] = tv("a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11");
	in[4] = tv("\\xcafe");
	in[5] = (struct sl_text_value){ NULL, 0, SL_TV_NULL };
	in[6] = (struct sl_text_value){ NULL, 0, SL_TV_UNCHANGED };
	in[7] = tv("[1]");
	sl_buf_init(&b, 0);
	assert_int_equal(sl_pg_text_row(&t, in, out, &b, &st, err, sizeof err), 0);
	assert_true(out[0].kind == SL_V_INT && out[0].i == 42);
	assert_int_equal(out[1].kind, SL_V_BYTES);
	assert_int_equal(out[1].len, 2000);
	assert_memory_equal(out[1].p, want, 2000);
	assert_ptr_equal(out[1].p, big);  /* decoded in place: no copy of a large value */
	assert_int_equal(out[2].kind, SL_V_DECIMAL);
	assert_true(out[2].neg);
	assert_int_equal(out[2].scale, 500);
	assert_int_equal(out[2].len, 501);
	memset(bigd, '0', sizeof bigd);
	bigd[0] = '3';
	bigd[1] = '5';
	assert_memory_equal(out[2].p, bigd, 501);
	assert_int_equal(out[3].kind, SL_V_UUID);
	assert_memory_equal(out[3].p, "\xa0\xee\xbc\x99\x9c\x0b\x4e\xf8\xbb\x6d\x6b\xb9\xbd\x38\x0a\x11", 16);
	assert_int_equal(out[4].kind, SL_V_BYTES);
	assert_int_equal(out[4].len, 2);
	assert_memory_equal(out[4].p, "\xca\xfe", 2);
	assert_ptr_equal(out[4].p, in[4].p);
	assert_int_equal(out[5].kind, SL_V_NULL);
	assert_int_equal(out[6].kind, SL_V_UNCHANGED);
	assert_int_equal(out[7].kind, SL_V_JSON);
	assert_ptr_equal(out[7].p, in[7].p);
	/* every scratch value (decimal digits, uuid) lies inside the buffer */
	for (int i = 2; i <= 3; i++)
		assert_true(out[i].p >= b.data && out[i].p + out[i].len <= b.data + b.len);

	/* the next row starts from an empty scratch (a bytea's text, decoded in
	 * place, is not converted twice) */
	in[1] = tv("\\x01");
	in[4] = tv("\\xcafe");
	in[2] = tv("0");
	in[6] = tv("NaN");
	assert_int_equal(sl_pg_text_row(&t, in, out, &b, &st, err, sizeof err), 0);
	assert_int_equal(out[1].len, 1);
	assert_int_equal(out[2].len, 1);
	assert_memory_equal(out[2].p, "0", 1);
	assert_false(out[2].neg);
	assert_int_equal(out[6].kind, SL_V_NULL);
	assert_int_equal(st.decimal_nan_nulls, 1);
	assert_true(b.len == 1 + 16);

	/* a bad value names its column */
	in[1] = tv("\\x01");
	in[4] = tv("\\xcafe");
	in[6] = tv("1.234");
	assert_int_equal(sl_pg_text_row(&t, in, out, &b, &st, err, sizeof err), -1);
	assert_string_equal(err, "column \"amount\": invalid numeric value \"1.234\"");
	in[6] = tv("1");
	in[1] = tv("\\x1");
	assert_int_equal(sl_pg_text_row(&t, in, out, &b, &st, err, sizeof err), -1);
	assert_string_equal(err, "column \"blob\": invalid bytea value \"\\x1\"");
	/* a bad digit after good ones: the text is quoted as it came, not half decoded */
	in[1] = tv("\\x0A0bzz");
	assert_int_equal(sl_pg_text_row(&t, in, out, &b, &st, err, sizeof err), -1);
	assert_string_equal(err, "column \"blob\": invalid bytea value \"\\x0a0bzz\"");

	/* a scratch buffer with a cap too small for the row is an error, not an overflow */
	{
		struct sl_buf small;
		in[1] = tv("\\x01");
		in[2] = tv("-3.5");  /* 501 digits at scale 500 */
		sl_buf_init(&small, 100);
		assert_int_equal(sl_pg_text_row(&t, in, out, &small, &st, err, sizeof err), -1);
		assert_non_null(strstr(err, "table \"public\".\"t\": out of memory or over the buffer cap"));
		sl_buf_free(&small);
	}
	sl_buf_free(&b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_type_map),
		cmocka_unit_test(test_null_unchanged),
		cmocka_unit_test(test_strings),
		cmocka_unit_test(test_uuid),
		cmocka_unit_test(test_bool_int),
		cmocka_unit_test(test_float_double),
		cmocka_unit_test(test_float_edges),
		cmocka_unit_test(test_float_random),
		cmocka_unit_test(test_decimal_small),
		cmocka_unit_test(test_decimal_nan),
		cmocka_unit_test(test_decimal_large),
		cmocka_unit_test(test_decimal_1000),
		cmocka_unit_test(test_decimal_random),
		cmocka_unit_test(test_date),
		cmocka_unit_test(test_time),
		cmocka_unit_test(test_timestamp),
		cmocka_unit_test(test_bytes),
		cmocka_unit_test(test_error_message),
		cmocka_unit_test(test_not_nul_terminated),
		cmocka_unit_test(test_row),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
