/*
 * tests/unit/test_avro_value.c: PostgreSQL text -> Avro binary, one value at a
 * time.  Expected bytes are worked out by hand from the Avro specification
 * (zigzag varints, little-endian IEEE floats, big-endian two's-complement
 * decimals), or with Python's arbitrary-precision integers for long decimals,
 * and dates are checked against an independent Julian-day-number formula.
 */
#include <float.h>
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
#include "sinks/avro_dir/avro_value.h"
#include "tests/unit/avro_testlib.h"

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

/* Encodes text as column type and checks the bytes (branch byte included). */
static void check_bytes(enum sl_type type, int p, int s, const char *text,
			const unsigned char *want, size_t wantlen)
{
	struct sl_column c = mkcol(type, p, s);
	struct sl_value v = tl_text(text);
	struct sl_buf b;
	char err[256] = "";

	sl_buf_init(&b, 0);
	if (sl_avro_put_value(&b, &c, &v, NULL, err, sizeof err) != 0)
		fail_msg("\"%s\": unexpected error: %s", text, err);
	if (b.len != wantlen || memcmp(b.data, want, wantlen) != 0) {
		fprintf(stderr, "# \"%s\": got", text);
		for (size_t i = 0; i < b.len; i++)
			fprintf(stderr, " %02x", (unsigned char)b.data[i]);
		fprintf(stderr, "\n");
		fail_msg("\"%s\": wrong encoding", text);
	}
	sl_buf_free(&b);
}

#define CHECK(type, p, s, text, ...)                                                   \
	do {                                                                           \
		static const unsigned char w_[] = { __VA_ARGS__ };                     \
		check_bytes(type, p, s, text, w_, sizeof w_);                          \
	} while (0)

/* Checks that text is rejected, with the column named and the buffer kept. */
static void check_bad(enum sl_type type, int p, int s, const char *text)
{
	struct sl_column c = mkcol(type, p, s);
	struct sl_value v = tl_text(text);
	struct sl_buf b;
	char err[256] = "";

	sl_buf_init(&b, 0);
	sl_buf_puts(&b, "keep");
	if (sl_avro_put_value(&b, &c, &v, NULL, err, sizeof err) == 0)
		fail_msg("\"%s\" was accepted for type %d", text, (int)type);
	assert_int_equal(b.len, 4);
	assert_memory_equal(b.data, "keep", 5);
	assert_non_null(strstr(err, "\"col_x\""));
	sl_buf_free(&b);
}

/* Expected encoding of a long value in branch 1: 0x02 then the varint. */
static void check_long(enum sl_type type, const char *text, int64_t want)
{
	unsigned char w[12];
	size_t n;

	w[0] = 0x02;
	n = 1 + tl_zigzag(want, w + 1);
	check_bytes(type, 0, 0, text, w, n);
}

static void test_null_unchanged(void **state)
{
	struct sl_column c = mkcol(SL_T_INT32, 0, 0);
	struct sl_value n = tl_null(), u = tl_unchanged();
	struct sl_buf b;
	char err[128];

	(void)state;
	sl_buf_init(&b, 0);
	assert_int_equal(sl_avro_put_value(&b, &c, &n, NULL, err, sizeof err), 0);
	assert_int_equal(sl_avro_put_value(&b, &c, &u, NULL, err, sizeof err), 0);
	assert_int_equal(b.len, 2);
	assert_int_equal(b.data[0], 0);
	assert_int_equal(b.data[1], 0);
	sl_buf_free(&b);
}

static void test_strings(void **state)
{
	(void)state;
	CHECK(SL_T_STRING, 0, 0, "h\xc3\xa9llo", 0x02, 0x0c, 'h', 0xc3, 0xa9, 'l', 'l', 'o');
	CHECK(SL_T_STRING, 0, 0, "", 0x02, 0x00);
	CHECK(SL_T_JSON, 0, 0, "{\"a\": 1}", 0x02, 0x10, '{', '"', 'a', '"', ':', ' ', '1', '}');
	CHECK(SL_T_UUID, 0, 0, "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11", 0x02, 0x48,
	      'a', '0', 'e', 'e', 'b', 'c', '9', '9', '-', '9', 'c', '0', 'b', '-', '4', 'e', 'f', '8',
	      '-', 'b', 'b', '6', 'd', '-', '6', 'b', 'b', '9', 'b', 'd', '3', '8', '0', 'a', '1', '1');
	/* 64 bytes need a two-byte length varint: 128 = 0x80 0x01. */
	{
		char s[65];
		unsigned char w[67];
		memset(s, 'z', 64);
		s[64] = '\0';
		w[0] = 0x02;
		w[1] = 0x80;
		w[2] = 0x01;
		memset(w + 3, 'z', 64);
		check_bytes(SL_T_STRING, 0, 0, s, w, sizeof w);
	}
}

static void test_bool_int(void **state)
{
	(void)state;
	CHECK(SL_T_BOOL, 0, 0, "t", 0x02, 0x01);
	CHECK(SL_T_BOOL, 0, 0, "f", 0x02, 0x00);
	check_bad(SL_T_BOOL, 0, 0, "true");
	check_bad(SL_T_BOOL, 0, 0, "");
	check_bad(SL_T_BOOL, 0, 0, "x");

	CHECK(SL_T_INT32, 0, 0, "0", 0x02, 0x00);
	CHECK(SL_T_INT32, 0, 0, "-1", 0x02, 0x01);
	CHECK(SL_T_INT32, 0, 0, "1", 0x02, 0x02);
	CHECK(SL_T_INT32, 0, 0, "63", 0x02, 0x7e);
	CHECK(SL_T_INT32, 0, 0, "-64", 0x02, 0x7f);
	CHECK(SL_T_INT32, 0, 0, "64", 0x02, 0x80, 0x01);
	CHECK(SL_T_INT32, 0, 0, "123", 0x02, 0xf6, 0x01);
	CHECK(SL_T_INT32, 0, 0, "2147483647", 0x02, 0xfe, 0xff, 0xff, 0xff, 0x0f);
	CHECK(SL_T_INT32, 0, 0, "-2147483648", 0x02, 0xff, 0xff, 0xff, 0xff, 0x0f);
	check_bad(SL_T_INT32, 0, 0, "2147483648");
	check_bad(SL_T_INT32, 0, 0, "-2147483649");
	check_bad(SL_T_INT32, 0, 0, "");
	check_bad(SL_T_INT32, 0, 0, "-");
	check_bad(SL_T_INT32, 0, 0, "12a");
	check_bad(SL_T_INT32, 0, 0, " 12");
	check_bad(SL_T_INT32, 0, 0, "1.0");

	CHECK(SL_T_INT64, 0, 0, "9223372036854775807",
	      0x02, 0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01);
	CHECK(SL_T_INT64, 0, 0, "-9223372036854775808",
	      0x02, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01);
	CHECK(SL_T_INT64, 0, 0, "4294967296", 0x02, 0x80, 0x80, 0x80, 0x80, 0x20);
	check_bad(SL_T_INT64, 0, 0, "9223372036854775808");
	check_bad(SL_T_INT64, 0, 0, "-9223372036854775809");
	check_bad(SL_T_INT64, 0, 0, "99999999999999999999999");
	/* 19 digits take the unchecked loop, 20 the checked one */
	check_bad(SL_T_INT64, 0, 0, "9999999999999999999");
	check_bad(SL_T_INT64, 0, 0, "-9999999999999999999");
	check_bad(SL_T_INT64, 0, 0, "18446744073709551616");
	check_bad(SL_T_INT64, 0, 0, "99999999999999999999");
	CHECK(SL_T_INT64, 0, 0, "00000000000000000001", 0x02, 0x02);
	check_bad(SL_T_INT64, 0, 0, "000000000000000000001");  /* over 20 digits */
	CHECK(SL_T_INT64, 0, 0, "-09223372036854775808",
	      0x02, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01);
	CHECK(SL_T_INT32, 0, 0, "00000000002147483647", 0x02, 0xfe, 0xff, 0xff, 0xff, 0x0f);
	check_bad(SL_T_INT32, 0, 0, "4294967298");
}

static void test_float_double(void **state)
{
	(void)state;
	/* float: IEEE 754 single, little-endian. 1.5 = 0x3fc00000. */
	CHECK(SL_T_FLOAT, 0, 0, "1.5", 0x02, 0x00, 0x00, 0xc0, 0x3f);
	CHECK(SL_T_FLOAT, 0, 0, "-2", 0x02, 0x00, 0x00, 0x00, 0xc0);
	CHECK(SL_T_FLOAT, 0, 0, "0", 0x02, 0x00, 0x00, 0x00, 0x00);
	CHECK(SL_T_FLOAT, 0, 0, "-0", 0x02, 0x00, 0x00, 0x00, 0x80);
	CHECK(SL_T_FLOAT, 0, 0, "NaN", 0x02, 0x00, 0x00, 0xc0, 0x7f);
	CHECK(SL_T_FLOAT, 0, 0, "Infinity", 0x02, 0x00, 0x00, 0x80, 0x7f);
	CHECK(SL_T_FLOAT, 0, 0, "-Infinity", 0x02, 0x00, 0x00, 0x80, 0xff);
	CHECK(SL_T_FLOAT, 0, 0, "1e+10", 0x02, 0xf9, 0x02, 0x15, 0x50);
	CHECK(SL_T_FLOAT, 0, 0, "3.4028235e+38", 0x02, 0xff, 0xff, 0x7f, 0x7f);
	CHECK(SL_T_FLOAT, 0, 0, "1e-45", 0x02, 0x01, 0x00, 0x00, 0x00);  /* denormal */
	check_bad(SL_T_FLOAT, 0, 0, "1e39");
	check_bad(SL_T_FLOAT, 0, 0, "1.5x");
	check_bad(SL_T_FLOAT, 0, 0, " 1.5");
	check_bad(SL_T_FLOAT, 0, 0, "");
	/* double: 1.5 = 0x3ff8000000000000, -0.1 = 0xbfb999999999999a. */
	CHECK(SL_T_DOUBLE, 0, 0, "1.5", 0x02, 0, 0, 0, 0, 0, 0, 0xf8, 0x3f);
	CHECK(SL_T_DOUBLE, 0, 0, "-0.1", 0x02, 0x9a, 0x99, 0x99, 0x99, 0x99, 0x99, 0xb9, 0xbf);
	CHECK(SL_T_DOUBLE, 0, 0, "1.7976931348623157e+308",
	      0x02, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xef, 0x7f);
	CHECK(SL_T_DOUBLE, 0, 0, "NaN", 0x02, 0, 0, 0, 0, 0, 0, 0xf8, 0x7f);
	CHECK(SL_T_DOUBLE, 0, 0, "Infinity", 0x02, 0, 0, 0, 0, 0, 0, 0xf0, 0x7f);
	CHECK(SL_T_DOUBLE, 0, 0, "-Infinity", 0x02, 0, 0, 0, 0, 0, 0, 0xf0, 0xff);
	CHECK(SL_T_DOUBLE, 0, 0, "2.5E-3", 0x02, 0x7b, 0x14, 0xae, 0x47, 0xe1, 0x7a, 0x64, 0x3f);
	check_bad(SL_T_DOUBLE, 0, 0, "1e400");
	check_bad(SL_T_DOUBLE, 0, 0, "abc");
	check_bad(SL_T_DOUBLE, 0, 0, "1,5");
}

/* Encodes text as double and as float and compares the bits with what libc's
 * correctly rounded strtod/strtof give (an independent parser). */
static void check_like_libc(const char *text)
{
	struct sl_column cd = mkcol(SL_T_DOUBLE, 0, 0), cf = mkcol(SL_T_FLOAT, 0, 0);
	struct sl_value v = tl_text(text);
	struct sl_buf b;
	char err[256];
	double d = strtod(text, NULL);
	float f = strtof(text, NULL);
	unsigned char want[9];

	sl_buf_init(&b, 0);
	want[0] = 2;
	if (!(fabs(d) > DBL_MAX)) {
		assert_int_equal(sl_avro_put_value(&b, &cd, &v, NULL, err, sizeof err), 0);
		memcpy(want + 1, &d, 8);  /* x86-64 and every Debian target here: little-endian */
		if (b.len != 9 || memcmp(b.data, want, 9) != 0)
			fail_msg("double %s differs from strtod", text);
	}
	sl_buf_reset(&b);
	if (!(fabsf(f) > FLT_MAX)) {
		assert_int_equal(sl_avro_put_value(&b, &cf, &v, NULL, err, sizeof err), 0);
		memcpy(want + 1, &f, 4);
		if (b.len != 5 || memcmp(b.data, want, 5) != 0)
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
 * since version 12). */
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
	/* -12345 = 0x10000 - 0x3039 = 0xcfc7 */
	CHECK(SL_T_DECIMAL, 5, 2, "-123.45", 0x02, 0x04, 0xcf, 0xc7);
	CHECK(SL_T_DECIMAL, 5, 2, "0.5", 0x02, 0x02, 0x32);          /* 50 */
	CHECK(SL_T_DECIMAL, 5, 2, "100", 0x02, 0x04, 0x27, 0x10);    /* 10000 */
	CHECK(SL_T_DECIMAL, 5, 2, "0", 0x02, 0x02, 0x00);
	CHECK(SL_T_DECIMAL, 5, 2, "-0.00", 0x02, 0x02, 0x00);
	CHECK(SL_T_DECIMAL, 5, 2, "999.99", 0x02, 0x06, 0x01, 0x86, 0x9f); /* 99999 */
	CHECK(SL_T_DECIMAL, 5, 2, "007.5", 0x02, 0x04, 0x02, 0xee);  /* 750, leading zeros */
	CHECK(SL_T_DECIMAL, 3, 0, "127", 0x02, 0x02, 0x7f);
	CHECK(SL_T_DECIMAL, 3, 0, "128", 0x02, 0x04, 0x00, 0x80);
	CHECK(SL_T_DECIMAL, 3, 0, "-128", 0x02, 0x02, 0x80);
	CHECK(SL_T_DECIMAL, 3, 0, "-129", 0x02, 0x04, 0xff, 0x7f);
	CHECK(SL_T_DECIMAL, 3, 0, "-1", 0x02, 0x02, 0xff);
	CHECK(SL_T_DECIMAL, 3, 0, "255", 0x02, 0x04, 0x00, 0xff);
	CHECK(SL_T_DECIMAL, 3, 0, "-256", 0x02, 0x04, 0xff, 0x00);
	/* -50500 = 0x1000000 - 0xc544 = 0xff3abc */
	CHECK(SL_T_DECIMAL, 10, 2, "-505.00", 0x02, 0x06, 0xff, 0x3a, 0xbc);
	CHECK(SL_T_DECIMAL, 10, 2, "-505", 0x02, 0x06, 0xff, 0x3a, 0xbc);
	/* 18 digits, the largest the fast path takes: 999999999999999999 = 0x0de0b6b3a763ffff */
	CHECK(SL_T_DECIMAL, 18, 0, "999999999999999999",
	      0x02, 0x10, 0x0d, 0xe0, 0xb6, 0xb3, 0xa7, 0x63, 0xff, 0xff);
	/* 19 digits (bignum path): 10^18 = 0x0de0b6b3a7640000 */
	CHECK(SL_T_DECIMAL, 19, 0, "1000000000000000000",
	      0x02, 0x10, 0x0d, 0xe0, 0xb6, 0xb3, 0xa7, 0x64, 0x00, 0x00);
	CHECK(SL_T_DECIMAL, 19, 1, "-0.1", 0x02, 0x02, 0xff);
	CHECK(SL_T_DECIMAL, 1, 1, "0.5", 0x02, 0x02, 0x05);

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
}

static void test_decimal_nan(void **state)
{
	struct sl_column c = mkcol(SL_T_DECIMAL, 10, 2);
	struct sl_value v = tl_text("NaN");
	struct sl_avro_stats st;
	struct sl_buf b;
	char err[128];

	(void)state;
	memset(&st, 0, sizeof st);
	sl_buf_init(&b, 0);
	assert_int_equal(sl_avro_put_value(&b, &c, &v, &st, err, sizeof err), 0);
	assert_int_equal(sl_avro_put_value(&b, &c, &v, &st, err, sizeof err), 0);
	assert_int_equal(b.len, 2);
	assert_int_equal(b.data[0], 0);  /* null branch */
	assert_int_equal(b.data[1], 0);
	assert_int_equal(st.decimal_nan_nulls, 2);
	/* Without a stats struct it still writes null. */
	assert_int_equal(sl_avro_put_value(&b, &c, &v, NULL, err, sizeof err), 0);
	assert_int_equal(b.len, 3);
	sl_buf_free(&b);
}

static void test_decimal_large(void **state)
{
	(void)state;
	/* decimal(38,10): unscaled 123456789012345678901234567890123456 (Python int.to_bytes). */
	CHECK(SL_T_DECIMAL, 38, 10, "12345678901234567890123456.7890123456",
	      0x02, 0x1e, 0x17, 0xc6, 0xe3, 0xbf, 0xd7, 0x0f, 0xde, 0xea, 0xec, 0x41, 0x71, 0x72,
	      0xdc, 0xba, 0xc0);
	/* -(10^38 - 1): the most negative decimal(38,10) value. */
	CHECK(SL_T_DECIMAL, 38, 10, "-9999999999999999999999999999.9999999999",
	      0x02, 0x20, 0xb4, 0xc4, 0xb3, 0x57, 0xa5, 0x79, 0x3b, 0x85, 0xf6, 0x75, 0xdd, 0xc0,
	      0x00, 0x00, 0x00, 0x01);
	CHECK(SL_T_DECIMAL, 38, 10, "-0.0000000001", 0x02, 0x02, 0xff);
	check_bad(SL_T_DECIMAL, 38, 10, "12345678901234567890123456789.0");  /* 29 + 10 > 38 */
	/* A 100-digit negative value, numeric(100,0): 42 bytes (Python int.to_bytes). */
	CHECK(SL_T_DECIMAL, 100, 0,
	      "-3141592653589793238462643383279502884197169399375105820974944592307816406286208998628034825342117067",
	      0x02, 0x54,
	      0xfa, 0x41, 0x35, 0x3f, 0x35, 0xd0, 0xe5, 0x8d, 0x18, 0x48, 0x7f, 0xe3, 0xe3, 0x25,
	      0xa6, 0x3a, 0xc1, 0x87, 0xf0, 0x27, 0x1a, 0x82, 0x16, 0xa4, 0x9b, 0x61, 0x5b, 0x81,
	      0x9d, 0x42, 0xb3, 0xc4, 0x65, 0xba, 0x24, 0x5e, 0xb5, 0xc8, 0x21, 0x10, 0x9b, 0x35);
}

static void test_decimal_1000(void **state)
{
	char text[1003];
	unsigned char out[SL_AVRO_DECIMAL_MAX_BYTES];
	size_t n;

	(void)state;
	/* 10^1000 - 1: 3322 bits, so 416 bytes with a clear top bit
	 * (Python: (10**1000-1).to_bytes(416,'big') starts 03ce36c7, ends ffffffff). */
	memset(text, '9', 1000);
	text[1000] = '\0';
	assert_int_equal(sl_avro_parse_decimal(text, 1000, 1000, 0, out, &n), 0);
	assert_int_equal(n, 416);
	assert_memory_equal(out, "\x03\xce\x36\xc7", 4);
	assert_memory_equal(out + 412, "\xff\xff\xff\xff", 4);
	/* -10^999 with scale 1000 digits: "-1" followed by 999 zeros: 415 bytes,
	 * starting 9e941f35 and ending 00000000. */
	text[0] = '-';
	text[1] = '1';
	memset(text + 2, '0', 999);
	text[1001] = '\0';
	assert_int_equal(sl_avro_parse_decimal(text, 1001, 1000, 0, out, &n), 0);
	assert_int_equal(n, 415);
	assert_memory_equal(out, "\x9e\x94\x1f\x35", 4);
	assert_memory_equal(out + 411, "\x00\x00\x00\x00", 4);
	/* 1001 digits do not fit numeric(1000,0). */
	memset(text, '1', 1001);
	text[1001] = '\0';
	assert_int_equal(sl_avro_parse_decimal(text, 1001, 1000, 0, out, &n), -1);
	/* numeric(1000,1000): "0." and 1000 digits. */
	text[0] = '0';
	text[1] = '.';
	memset(text + 2, '9', 1000);
	text[1002] = '\0';
	assert_int_equal(sl_avro_parse_decimal(text, 1002, 1000, 1000, out, &n), 0);
	assert_int_equal(n, 416);
	assert_memory_equal(out, "\x03\xce\x36\xc7", 4);
	/* Precision past 1000 is refused rather than overflowing. */
	assert_int_equal(sl_avro_parse_decimal("1", 1, 1001, 0, out, &n), -1);
}

/* Test-local reference: decimal digit string -> big-endian magnitude by
 * repeated division by 256 (schoolbook), then two's complement by
 * "invert and add one" over one extra byte, then the minimal form. */
static size_t ref_decimal(const char *digits, bool neg, unsigned char *out)
{
	size_t nd = strlen(digits), nb = 0;
	unsigned char num[1100], mag[500], be[501];
	size_t len;

	for (size_t i = 0; i < nd; i++)
		num[i] = (unsigned char)(digits[i] - '0');
	for (;;) {
		size_t i;
		unsigned rem = 0;
		bool zero = true;
		for (i = 0; i < nd; i++) {
			unsigned cur = rem * 10 + num[i];
			num[i] = (unsigned char)(cur / 256);
			rem = cur % 256;
			if (num[i])
				zero = false;
		}
		mag[nb++] = (unsigned char)rem;  /* little-endian */
		if (zero)
			break;
	}
	/* be = 0x00 followed by the magnitude, big-endian */
	be[0] = 0;
	for (size_t i = 0; i < nb; i++)
		be[1 + i] = mag[nb - 1 - i];
	len = nb + 1;
	if (neg) {
		int carry = 1;
		for (size_t i = len; i-- > 0;) {
			int v = (unsigned char)~be[i] + carry;
			be[i] = (unsigned char)v;
			carry = v >> 8;
		}
	}
	{
		size_t k = 0;
		while (len - k > 1 && ((be[k] == 0 && !(be[k + 1] & 0x80)) ||
				       (be[k] == 0xff && (be[k + 1] & 0x80))))
			k++;
		memcpy(out, be + k, len - k);
		return len - k;
	}
}

static void test_decimal_random(void **state)
{
	unsigned seed = 12345;
	char digits[1001], text[1010];
	unsigned char got[SL_AVRO_DECIMAL_MAX_BYTES], want[520];

	(void)state;
	for (int iter = 0; iter < 3000; iter++) {
		size_t nd, wn, gn, tl = 0;
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
		wn = ref_decimal(digits, neg, want);
		assert_int_equal(sl_avro_parse_decimal(text, tl, 1000, scale, got, &gn), 0);
		if (gn != wn || memcmp(got, want, wn) != 0)
			fail_msg("decimal %s (scale %d) differs from the reference", text, scale);
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
	check_long(SL_T_DATE, "1970-01-01", 0);
	check_long(SL_T_DATE, "2024-01-31", 19753);
	check_long(SL_T_DATE, "1969-12-31", -1);
	check_long(SL_T_DATE, "2000-02-29", 11016);
	check_long(SL_T_DATE, "0001-01-01", -719162);
	check_long(SL_T_DATE, "9999-12-31", 2932896);
	check_long(SL_T_DATE, "10000-01-01", 2932897);
	/* 44 BC is astronomical year -43: 292 days to 43 BC's new year, 43 more
	 * years with 11 leap days to 1 AD: 719162 + 292 + 15706 before 1970. */
	check_long(SL_T_DATE, "0044-03-15 BC", -735160);
	check_long(SL_T_DATE, "0001-12-31 BC", -719163);
	check_long(SL_T_DATE, "0005-02-29 BC", (int64_t)(jdn(-4, 2, 29) - 2440588));
	check_long(SL_T_DATE, "4713-01-01 BC", (int64_t)(jdn(-4712, 1, 1) - 2440588));
	check_long(SL_T_DATE, "5874897-12-31", (int64_t)5874897 * 365 + 5874897 / 4 - 5874897 / 100 +
		   5874897 / 400 - 719162 - 1);
	check_long(SL_T_DATE, "infinity", 2932896);
	check_long(SL_T_DATE, "-infinity", -719162);

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
				if (sl_avro_parse_date(text, (size_t)n, &days) != 0)
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
	check_long(SL_T_TIME, "00:00:00", 0);
	check_long(SL_T_TIME, "13:45:00", INT64_C(49500000000));
	check_long(SL_T_TIME, "13:45:00.5", INT64_C(49500500000));
	check_long(SL_T_TIME, "13:45:00.123456", INT64_C(49500123456));
	check_long(SL_T_TIME, "13:45:00.000001", INT64_C(49500000001));
	check_long(SL_T_TIME, "23:59:59.999999", INT64_C(86399999999));
	check_long(SL_T_TIME, "24:00:00", INT64_C(86400000000));
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
	check_long(SL_T_TIMESTAMP, "1970-01-01 00:00:00", 0);
	check_long(SL_T_TIMESTAMP, "2024-01-31 13:45:00", base);
	check_long(SL_T_TIMESTAMP, "2024-01-31 13:45:00.123456", base + 123456);
	check_long(SL_T_TIMESTAMP, "2024-01-31 13:45:00.5", base + 500000);
	check_long(SL_T_TIMESTAMP, "1969-12-31 23:59:59.5", -500000);
	check_long(SL_T_TIMESTAMP, "0044-03-15 10:00:00 BC", ides + INT64_C(36000000000));
	check_long(SL_T_TIMESTAMP, "0001-01-01 00:00:00", INT64_C(-62135596800000000));
	check_long(SL_T_TIMESTAMP, "10000-01-01 00:00:00", INT64_C(2932897) * 86400 * 1000000);
	check_long(SL_T_TIMESTAMP, "infinity", INT64_C(253402300799999999));
	check_long(SL_T_TIMESTAMP, "-infinity", INT64_C(-62135596800000000));
	check_bad(SL_T_TIMESTAMP, 0, 0, "2024-01-31 13:45:00+00");
	check_bad(SL_T_TIMESTAMP, 0, 0, "2024-01-31");
	check_bad(SL_T_TIMESTAMP, 0, 0, "2024-01-31T13:45:00");
	check_bad(SL_T_TIMESTAMP, 0, 0, "2024-02-30 13:45:00");
	check_bad(SL_T_TIMESTAMP, 0, 0, "2024-01-31 13:45:00.1234567");
	check_bad(SL_T_TIMESTAMP, 0, 0, "2024-01-31 13:45");

	check_long(SL_T_TIMESTAMPTZ, "2024-01-31 13:45:00+00", base);
	check_long(SL_T_TIMESTAMPTZ, "2024-01-31 13:45:00.123456+00", base + 123456);
	check_long(SL_T_TIMESTAMPTZ, "2024-01-31 13:45:00-08", base + INT64_C(8) * 3600 * 1000000);
	check_long(SL_T_TIMESTAMPTZ, "2024-01-31 13:45:00.25+05:30",
		   base - INT64_C(19800) * 1000000 + 250000);
	check_long(SL_T_TIMESTAMPTZ, "2024-01-31 13:45:00+05:30:15", base - INT64_C(19815) * 1000000);
	check_long(SL_T_TIMESTAMPTZ, "2024-01-31 13:45:00-00:53:28", base + INT64_C(3208) * 1000000);
	check_long(SL_T_TIMESTAMPTZ, "2024-01-01 00:30:00+01", INT64_C(1704065400) * 1000000);
	check_long(SL_T_TIMESTAMPTZ, "0044-03-15 10:00:00+00 BC", ides + INT64_C(36000000000));
	check_long(SL_T_TIMESTAMPTZ, "0044-03-15 10:00:00+00:53:28 BC",
		   ides + INT64_C(36000000000) - INT64_C(3208) * 1000000);
	check_long(SL_T_TIMESTAMPTZ, "infinity", INT64_C(253402300799999999));
	check_long(SL_T_TIMESTAMPTZ, "-infinity", INT64_C(-62135596800000000));
	check_bad(SL_T_TIMESTAMPTZ, 0, 0, "2024-01-31 13:45:00");
	check_bad(SL_T_TIMESTAMPTZ, 0, 0, "2024-01-31 13:45:00+5");
	check_bad(SL_T_TIMESTAMPTZ, 0, 0, "2024-01-31 13:45:00+05:3");
	check_bad(SL_T_TIMESTAMPTZ, 0, 0, "2024-01-31 13:45:00+05:60");
	check_bad(SL_T_TIMESTAMPTZ, 0, 0, "0044-03-15 10:00:00 BC+00");
	check_bad(SL_T_TIMESTAMPTZ, 0, 0, "2024-01-31 13:45:00Z");
}

static void test_bytes(void **state)
{
	(void)state;
	CHECK(SL_T_BYTES, 0, 0, "\\x0a0bff", 0x02, 0x06, 0x0a, 0x0b, 0xff);
	CHECK(SL_T_BYTES, 0, 0, "\\x", 0x02, 0x00);
	CHECK(SL_T_BYTES, 0, 0, "\\xABcd", 0x02, 0x04, 0xab, 0xcd);
	check_bad(SL_T_BYTES, 0, 0, "\\x0");
	check_bad(SL_T_BYTES, 0, 0, "\\xzz");
	check_bad(SL_T_BYTES, 0, 0, "abc");
	check_bad(SL_T_BYTES, 0, 0, "");
	check_bad(SL_T_BYTES, 0, 0, "\\000");  /* escape format is not accepted */
}

static void test_error_message(void **state)
{
	struct sl_column c = mkcol(SL_T_INT32, 0, 0);
	char text[101], err[512];
	struct sl_value v;
	struct sl_buf b;

	(void)state;
	for (int i = 0; i < 100; i++)
		text[i] = (char)('a' + i % 26);
	text[100] = '\0';
	v = tl_text(text);
	sl_buf_init(&b, 0);
	assert_int_equal(sl_avro_put_value(&b, &c, &v, NULL, err, sizeof err), -1);
	/* names the column, quotes at most 64 bytes of the value */
	assert_non_null(strstr(err, "column \"col_x\""));
	assert_non_null(strstr(err, "\"abcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuvwxyzabcdefghijkl\"..."));
	assert_null(strstr(err, "abcdefghijklm\""));
	assert_int_equal(b.len, 0);
	/* a short value is quoted whole */
	v = tl_text("12x");
	assert_int_equal(sl_avro_put_value(&b, &c, &v, NULL, err, sizeof err), -1);
	assert_string_equal(err, "column \"col_x\": invalid integer value \"12x\"");
	sl_buf_free(&b);
}

static void test_not_nul_terminated(void **state)
{
	/* Values point into larger buffers: only len bytes count. */
	static const char raw[] = "2024-01-31 13:45:00.5+00garbage";
	struct sl_column c = mkcol(SL_T_TIMESTAMPTZ, 0, 0);
	struct sl_column f = mkcol(SL_T_DOUBLE, 0, 0);
	struct sl_value v = { raw, 24, SL_V_TEXT };
	struct sl_value fv = { "1.5999", 3, SL_V_TEXT };
	struct sl_buf b;
	char err[256];
	unsigned char want[12];
	size_t n;

	(void)state;
	sl_buf_init(&b, 0);
	assert_int_equal(sl_avro_put_value(&b, &c, &v, NULL, err, sizeof err), 0);
	want[0] = 2;
	n = 1 + tl_zigzag(INT64_C(1706708700500000), want + 1);
	assert_int_equal(b.len, n);
	assert_memory_equal(b.data, want, n);
	sl_buf_reset(&b);
	assert_int_equal(sl_avro_put_value(&b, &f, &fv, NULL, err, sizeof err), 0);
	assert_memory_equal(b.data, "\x02\x00\x00\x00\x00\x00\x00\xf8\x3f", 9);
	sl_buf_free(&b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_null_unchanged),
		cmocka_unit_test(test_strings),
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
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
