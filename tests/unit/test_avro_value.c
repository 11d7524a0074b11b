/*
 * tests/unit/test_avro_value.c: typed values -> Avro binary, one value at a
 * time, and the checks that a value's kind fits its column.  Expected bytes
 * are worked out by hand from the Avro specification (zigzag varints,
 * little-endian IEEE floats, big-endian two's-complement decimals), or with
 * Python's arbitrary-precision integers for long decimals, or with a
 * test-local schoolbook conversion for random decimals.
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
#include "sinks/avro/avro_value.h"
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

/* Encodes v as column type and checks the bytes (branch byte included). */
static void check_bytes(enum sl_type type, int p, int s, struct sl_value v, const char *what,
			const unsigned char *want, size_t wantlen)
{
	struct sl_column c = mkcol(type, p, s);
	struct sl_buf b;
	char err[256] = "";

	sl_buf_init(&b, 0);
	if (sl_avro_put_value(&b, &c, &v, err, sizeof err) != 0)
		fail_msg("%s: unexpected error: %s", what, err);
	if (b.len != wantlen || memcmp(b.data, want, wantlen) != 0) {
		fprintf(stderr, "# %s: got", what);
		for (size_t i = 0; i < b.len; i++)
			fprintf(stderr, " %02x", (unsigned char)b.data[i]);
		fprintf(stderr, "\n");
		fail_msg("%s: wrong encoding", what);
	}
	sl_buf_free(&b);
}

#define CHECK(type, p, s, v, ...)                                                      \
	do {                                                                           \
		static const unsigned char w_[] = { __VA_ARGS__ };                     \
		check_bytes(type, p, s, v, #v, w_, sizeof w_);                         \
	} while (0)

/* Checks that v is refused for the column, with the column named and the
 * buffer kept; returns nothing, the message is left in err. */
static void check_bad_err(enum sl_type type, int p, int s, struct sl_value v, char *err, size_t errlen)
{
	struct sl_column c = mkcol(type, p, s);
	struct sl_buf b;

	sl_buf_init(&b, 0);
	sl_buf_puts(&b, "keep");
	if (sl_avro_put_value(&b, &c, &v, err, errlen) == 0)
		fail_msg("a value of kind %u was accepted for type %d", v.kind, (int)type);
	assert_int_equal(b.len, 4);
	assert_memory_equal(b.data, "keep", 5);
	assert_non_null(strstr(err, "column \"col_x\""));
	sl_buf_free(&b);
}

static void check_bad(enum sl_type type, int p, int s, struct sl_value v)
{
	char err[256];

	check_bad_err(type, p, s, v, err, sizeof err);
}

/* Expected encoding of a long value in branch 1: 0x02 then the varint. */
static void check_long(enum sl_type type, struct sl_value v, int64_t want)
{
	unsigned char w[12];
	size_t n;

	w[0] = 0x02;
	n = 1 + tl_zigzag(want, w + 1);
	check_bytes(type, 0, 0, v, "long", w, n);
}

static void test_null_unchanged(void **state)
{
	struct sl_column c = mkcol(SL_T_INT32, 0, 0);
	struct sl_value n = tl_null(), u = tl_unchanged();
	struct sl_buf b;
	char err[128];

	(void)state;
	sl_buf_init(&b, 0);
	assert_int_equal(sl_avro_put_value(&b, &c, &n, err, sizeof err), 0);
	assert_int_equal(sl_avro_put_value(&b, &c, &u, err, sizeof err), 0);
	assert_int_equal(b.len, 2);
	assert_int_equal(b.data[0], 0);
	assert_int_equal(b.data[1], 0);
	sl_buf_free(&b);
}

static void test_strings(void **state)
{
	static const unsigned char u[16] = { 0xa0, 0xee, 0xbc, 0x99, 0x9c, 0x0b, 0x4e, 0xf8,
					     0xbb, 0x6d, 0x6b, 0xb9, 0xbd, 0x38, 0x0a, 0x11 };

	(void)state;
	CHECK(SL_T_STRING, 0, 0, tl_str("h\xc3\xa9llo"), 0x02, 0x0c, 'h', 0xc3, 0xa9, 'l', 'l', 'o');
	CHECK(SL_T_STRING, 0, 0, tl_str(""), 0x02, 0x00);
	CHECK(SL_T_JSON, 0, 0, tl_json("{\"a\": 1}"), 0x02, 0x10, '{', '"', 'a', '"', ':', ' ', '1', '}');
	/* a uuid's 16 bytes are written as its canonical lowercase text */
	CHECK(SL_T_UUID, 0, 0, tl_uuid(u), 0x02, 0x48,
	      'a', '0', 'e', 'e', 'b', 'c', '9', '9', '-', '9', 'c', '0', 'b', '-', '4', 'e', 'f', '8',
	      '-', 'b', 'b', '6', 'd', '-', '6', 'b', 'b', '9', 'b', 'd', '3', '8', '0', 'a', '1', '1');
	CHECK(SL_T_UUID, 0, 0, tl_uuid((const unsigned char *)"\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0"), 0x02, 0x48,
	      '0', '0', '0', '0', '0', '0', '0', '0', '-', '0', '0', '0', '0', '-', '0', '0', '0', '0',
	      '-', '0', '0', '0', '0', '-', '0', '0', '0', '0', '0', '0', '0', '0', '0', '0', '0', '0');
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
		check_bytes(SL_T_STRING, 0, 0, tl_str(s), "64 z", w, sizeof w);
	}
}

static void test_bool_int(void **state)
{
	(void)state;
	CHECK(SL_T_BOOL, 0, 0, tl_bool(true), 0x02, 0x01);
	CHECK(SL_T_BOOL, 0, 0, tl_bool(false), 0x02, 0x00);

	CHECK(SL_T_INT32, 0, 0, tl_int(0), 0x02, 0x00);
	CHECK(SL_T_INT32, 0, 0, tl_int(-1), 0x02, 0x01);
	CHECK(SL_T_INT32, 0, 0, tl_int(1), 0x02, 0x02);
	CHECK(SL_T_INT32, 0, 0, tl_int(63), 0x02, 0x7e);
	CHECK(SL_T_INT32, 0, 0, tl_int(-64), 0x02, 0x7f);
	CHECK(SL_T_INT32, 0, 0, tl_int(64), 0x02, 0x80, 0x01);
	CHECK(SL_T_INT32, 0, 0, tl_int(123), 0x02, 0xf6, 0x01);
	CHECK(SL_T_INT32, 0, 0, tl_int(INT32_MAX), 0x02, 0xfe, 0xff, 0xff, 0xff, 0x0f);
	CHECK(SL_T_INT32, 0, 0, tl_int(INT32_MIN), 0x02, 0xff, 0xff, 0xff, 0xff, 0x0f);
	check_bad(SL_T_INT32, 0, 0, tl_int(INT64_C(2147483648)));
	check_bad(SL_T_INT32, 0, 0, tl_int(INT64_C(-2147483649)));
	check_bad(SL_T_INT32, 0, 0, tl_int(INT64_C(4294967298)));

	CHECK(SL_T_INT64, 0, 0, tl_int(INT64_MAX),
	      0x02, 0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01);
	CHECK(SL_T_INT64, 0, 0, tl_int(INT64_MIN),
	      0x02, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01);
	CHECK(SL_T_INT64, 0, 0, tl_int(INT64_C(4294967296)), 0x02, 0x80, 0x80, 0x80, 0x80, 0x20);
}

static void test_float_double(void **state)
{
	(void)state;
	/* float: IEEE 754 single, little-endian. 1.5 = 0x3fc00000. */
	CHECK(SL_T_FLOAT, 0, 0, tl_float(1.5f), 0x02, 0x00, 0x00, 0xc0, 0x3f);
	CHECK(SL_T_FLOAT, 0, 0, tl_float(-2.0f), 0x02, 0x00, 0x00, 0x00, 0xc0);
	CHECK(SL_T_FLOAT, 0, 0, tl_float(0.0f), 0x02, 0x00, 0x00, 0x00, 0x00);
	CHECK(SL_T_FLOAT, 0, 0, tl_float(-0.0f), 0x02, 0x00, 0x00, 0x00, 0x80);
	CHECK(SL_T_FLOAT, 0, 0, tl_float(NAN), 0x02, 0x00, 0x00, 0xc0, 0x7f);
	CHECK(SL_T_FLOAT, 0, 0, tl_float(INFINITY), 0x02, 0x00, 0x00, 0x80, 0x7f);
	CHECK(SL_T_FLOAT, 0, 0, tl_float(-INFINITY), 0x02, 0x00, 0x00, 0x80, 0xff);
	CHECK(SL_T_FLOAT, 0, 0, tl_float(1e10f), 0x02, 0xf9, 0x02, 0x15, 0x50);
	CHECK(SL_T_FLOAT, 0, 0, tl_float(FLT_MAX), 0x02, 0xff, 0xff, 0x7f, 0x7f);
	CHECK(SL_T_FLOAT, 0, 0, tl_float(1e-45f), 0x02, 0x01, 0x00, 0x00, 0x00);  /* denormal */
	/* double: 1.5 = 0x3ff8000000000000, -0.1 = 0xbfb999999999999a. */
	CHECK(SL_T_DOUBLE, 0, 0, tl_double(1.5), 0x02, 0, 0, 0, 0, 0, 0, 0xf8, 0x3f);
	CHECK(SL_T_DOUBLE, 0, 0, tl_double(-0.1), 0x02, 0x9a, 0x99, 0x99, 0x99, 0x99, 0x99, 0xb9, 0xbf);
	CHECK(SL_T_DOUBLE, 0, 0, tl_double(DBL_MAX), 0x02, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xef, 0x7f);
	CHECK(SL_T_DOUBLE, 0, 0, tl_double(NAN), 0x02, 0, 0, 0, 0, 0, 0, 0xf8, 0x7f);
	CHECK(SL_T_DOUBLE, 0, 0, tl_double(INFINITY), 0x02, 0, 0, 0, 0, 0, 0, 0xf0, 0x7f);
	CHECK(SL_T_DOUBLE, 0, 0, tl_double(-INFINITY), 0x02, 0, 0, 0, 0, 0, 0, 0xf0, 0xff);
	CHECK(SL_T_DOUBLE, 0, 0, tl_double(2.5e-3), 0x02, 0x7b, 0x14, 0xae, 0x47, 0xe1, 0x7a, 0x64, 0x3f);
	CHECK(SL_T_DOUBLE, 0, 0, tl_double(5e-324), 0x02, 0x01, 0, 0, 0, 0, 0, 0, 0);
}

static void test_decimal_small(void **state)
{
	(void)state;
	/* -12345 = 0x10000 - 0x3039 = 0xcfc7 */
	CHECK(SL_T_DECIMAL, 5, 2, tl_dec(true, "12345", 2), 0x02, 0x04, 0xcf, 0xc7);
	CHECK(SL_T_DECIMAL, 5, 2, tl_dec(false, "50", 2), 0x02, 0x02, 0x32);        /* 0.50 */
	CHECK(SL_T_DECIMAL, 5, 2, tl_dec(false, "10000", 2), 0x02, 0x04, 0x27, 0x10); /* 100.00 */
	CHECK(SL_T_DECIMAL, 5, 2, tl_dec(false, "0", 2), 0x02, 0x02, 0x00);
	CHECK(SL_T_DECIMAL, 5, 2, tl_dec(true, "0", 2), 0x02, 0x02, 0x00);         /* -0 is 0 */
	CHECK(SL_T_DECIMAL, 5, 2, tl_dec(false, "99999", 2), 0x02, 0x06, 0x01, 0x86, 0x9f);
	CHECK(SL_T_DECIMAL, 5, 2, tl_dec(false, "750", 2), 0x02, 0x04, 0x02, 0xee);
	CHECK(SL_T_DECIMAL, 3, 0, tl_dec(false, "127", 0), 0x02, 0x02, 0x7f);
	CHECK(SL_T_DECIMAL, 3, 0, tl_dec(false, "128", 0), 0x02, 0x04, 0x00, 0x80);
	CHECK(SL_T_DECIMAL, 3, 0, tl_dec(true, "128", 0), 0x02, 0x02, 0x80);
	CHECK(SL_T_DECIMAL, 3, 0, tl_dec(true, "129", 0), 0x02, 0x04, 0xff, 0x7f);
	CHECK(SL_T_DECIMAL, 3, 0, tl_dec(true, "1", 0), 0x02, 0x02, 0xff);
	CHECK(SL_T_DECIMAL, 3, 0, tl_dec(false, "255", 0), 0x02, 0x04, 0x00, 0xff);
	CHECK(SL_T_DECIMAL, 3, 0, tl_dec(true, "256", 0), 0x02, 0x04, 0xff, 0x00);
	/* -50500 = 0x1000000 - 0xc544 = 0xff3abc */
	CHECK(SL_T_DECIMAL, 10, 2, tl_dec(true, "50500", 2), 0x02, 0x06, 0xff, 0x3a, 0xbc);
	/* 18 digits, the largest the fast path takes: 999999999999999999 = 0x0de0b6b3a763ffff */
	CHECK(SL_T_DECIMAL, 18, 0, tl_dec(false, "999999999999999999", 0),
	      0x02, 0x10, 0x0d, 0xe0, 0xb6, 0xb3, 0xa7, 0x63, 0xff, 0xff);
	CHECK(SL_T_DECIMAL, 18, 0, tl_dec(true, "999999999999999999", 0),
	      0x02, 0x10, 0xf2, 0x1f, 0x49, 0x4c, 0x58, 0x9c, 0x00, 0x01);
	/* 19 digits (bignum path): 10^18 = 0x0de0b6b3a7640000 */
	CHECK(SL_T_DECIMAL, 19, 0, tl_dec(false, "1000000000000000000", 0),
	      0x02, 0x10, 0x0d, 0xe0, 0xb6, 0xb3, 0xa7, 0x64, 0x00, 0x00);
	CHECK(SL_T_DECIMAL, 19, 1, tl_dec(true, "1", 1), 0x02, 0x02, 0xff);
	CHECK(SL_T_DECIMAL, 1, 1, tl_dec(false, "5", 1), 0x02, 0x02, 0x05);
	/* leading zeros are tolerated and do not count against the precision */
	CHECK(SL_T_DECIMAL, 3, 0, tl_dec(false, "000127", 0), 0x02, 0x02, 0x7f);
}

/* A value with a smaller scale than the column's is padded with zeros; a
 * larger scale, too many digits, or something else than digits is refused. */
static void test_decimal_rescale(void **state)
{
	char err[256];

	(void)state;
	/* -505 at scale 0 in numeric(10,2): -50500 */
	CHECK(SL_T_DECIMAL, 10, 2, tl_dec(true, "505", 0), 0x02, 0x06, 0xff, 0x3a, 0xbc);
	CHECK(SL_T_DECIMAL, 10, 2, tl_dec(true, "5050", 1), 0x02, 0x06, 0xff, 0x3a, 0xbc);
	/* 0.5 at scale 1 in numeric(5,2): 50 */
	CHECK(SL_T_DECIMAL, 5, 2, tl_dec(false, "5", 1), 0x02, 0x02, 0x32);
	/* zero at any scale, even where padding would pass the precision */
	CHECK(SL_T_DECIMAL, 2, 2, tl_dec(false, "0", 0), 0x02, 0x02, 0x00);
	/* 10^17 padded with two zeros is 10^19, 20 digits: the bignum path; 0x8ac7230489e80000 */
	CHECK(SL_T_DECIMAL, 20, 2, tl_dec(false, "100000000000000000", 0),
	      0x02, 0x12, 0x00, 0x8a, 0xc7, 0x23, 0x04, 0x89, 0xe8, 0x00, 0x00);

	check_bad_err(SL_T_DECIMAL, 10, 2, tl_dec(false, "12345", 3), err, sizeof err);
	assert_string_equal(err, "column \"col_x\": a decimal value of scale 3 does not fit decimal(10,2)");
	check_bad_err(SL_T_DECIMAL, 5, 2, tl_dec(false, "1234", 0), err, sizeof err);
	assert_string_equal(err, "column \"col_x\": a decimal value of 6 digits does not fit decimal(5,2)");
	check_bad(SL_T_DECIMAL, 5, 2, tl_dec(false, "123456", 2));
	check_bad(SL_T_DECIMAL, 5, 2, tl_dec(false, "-1", 2));
	check_bad(SL_T_DECIMAL, 5, 2, tl_dec(false, "1.5", 2));
	check_bad(SL_T_DECIMAL, 5, 2, tl_dec(false, "", 2));
	check_bad(SL_T_DECIMAL, 5, 2, tl_dec(false, "12", -1));
	check_bad_err(SL_T_DECIMAL, 5, 2, tl_dec(false, "1x", 2), err, sizeof err);
	assert_string_equal(err, "column \"col_x\": invalid decimal digits \"1x\"");
}

static void test_decimal_large(void **state)
{
	(void)state;
	/* decimal(38,10): unscaled 123456789012345678901234567890123456 (Python int.to_bytes). */
	CHECK(SL_T_DECIMAL, 38, 10, tl_dec(false, "123456789012345678901234567890123456", 10),
	      0x02, 0x1e, 0x17, 0xc6, 0xe3, 0xbf, 0xd7, 0x0f, 0xde, 0xea, 0xec, 0x41, 0x71, 0x72,
	      0xdc, 0xba, 0xc0);
	/* -(10^38 - 1): the most negative decimal(38,10) value. */
	CHECK(SL_T_DECIMAL, 38, 10, tl_dec(true, "99999999999999999999999999999999999999", 10),
	      0x02, 0x20, 0xb4, 0xc4, 0xb3, 0x57, 0xa5, 0x79, 0x3b, 0x85, 0xf6, 0x75, 0xdd, 0xc0,
	      0x00, 0x00, 0x00, 0x01);
	CHECK(SL_T_DECIMAL, 38, 10, tl_dec(true, "1", 10), 0x02, 0x02, 0xff);
	check_bad(SL_T_DECIMAL, 38, 10, tl_dec(false, "123456789012345678901234567890123456789", 10));
	/* A 100-digit negative value, numeric(100,0): 42 bytes (Python int.to_bytes). */
	CHECK(SL_T_DECIMAL, 100, 0,
	      tl_dec(true, "3141592653589793238462643383279502884197169399375105820974944592307816406286208998628034825342117067", 0),
	      0x02, 0x54,
	      0xfa, 0x41, 0x35, 0x3f, 0x35, 0xd0, 0xe5, 0x8d, 0x18, 0x48, 0x7f, 0xe3, 0xe3, 0x25,
	      0xa6, 0x3a, 0xc1, 0x87, 0xf0, 0x27, 0x1a, 0x82, 0x16, 0xa4, 0x9b, 0x61, 0x5b, 0x81,
	      0x9d, 0x42, 0xb3, 0xc4, 0x65, 0xba, 0x24, 0x5e, 0xb5, 0xc8, 0x21, 0x10, 0x9b, 0x35);
}

static void test_decimal_1000(void **state)
{
	char digits[1002];
	unsigned char out[SL_AVRO_DECIMAL_MAX_BYTES];
	struct sl_column c = mkcol(SL_T_DECIMAL, 1000, 0);
	struct sl_value v;
	struct sl_buf b;
	char err[256];
	size_t n;

	(void)state;
	/* 10^1000 - 1: 3322 bits, so 416 bytes with a clear top bit
	 * (Python: (10**1000-1).to_bytes(416,'big') starts 03ce36c7, ends ffffffff). */
	memset(digits, '9', 1000);
	digits[1000] = '\0';
	assert_int_equal(sl_avro_decimal_bytes(digits, 1000, 0, false, out, &n), 0);
	assert_int_equal(n, 416);
	assert_memory_equal(out, "\x03\xce\x36\xc7", 4);
	assert_memory_equal(out + 412, "\xff\xff\xff\xff", 4);
	/* through the value encoder: branch, length 416 (zigzag 832 = 0xc0 0x06), bytes */
	sl_buf_init(&b, 0);
	v = tl_dec(false, digits, 0);
	assert_int_equal(sl_avro_put_value(&b, &c, &v, err, sizeof err), 0);
	assert_int_equal(b.len, 3 + 416);
	assert_memory_equal(b.data, "\x02\xc0\x06\x03\xce\x36\xc7", 7);
	/* -10^999: "1" followed by 999 zeros: 415 bytes, starting 9e941f35 and
	 * ending 00000000; the same as "1" padded by 999 zeros. */
	digits[0] = '1';
	memset(digits + 1, '0', 999);
	digits[1000] = '\0';
	assert_int_equal(sl_avro_decimal_bytes(digits, 1000, 0, true, out, &n), 0);
	assert_int_equal(n, 415);
	assert_memory_equal(out, "\x9e\x94\x1f\x35", 4);
	assert_memory_equal(out + 411, "\x00\x00\x00\x00", 4);
	assert_int_equal(sl_avro_decimal_bytes("1", 1, 999, true, out, &n), 0);
	assert_int_equal(n, 415);
	assert_memory_equal(out, "\x9e\x94\x1f\x35", 4);
	/* 1001 digits are refused, by the helper and for the column. */
	memset(digits, '1', 1001);
	digits[1001] = '\0';
	assert_int_equal(sl_avro_decimal_bytes(digits, 1001, 0, false, out, &n), -1);
	assert_int_equal(sl_avro_decimal_bytes(digits, 1000, 1, false, out, &n), -1);
	v = tl_dec(false, digits, 0);
	sl_buf_reset(&b);
	assert_int_equal(sl_avro_put_value(&b, &c, &v, err, sizeof err), -1);
	assert_int_equal(b.len, 0);
	sl_buf_free(&b);
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

/* Random digit strings of up to 1000 digits, both signs, with part of the
 * scale given as padding, against the reference. */
static void test_decimal_random(void **state)
{
	unsigned seed = 12345;
	char digits[1001];
	unsigned char got[SL_AVRO_DECIMAL_MAX_BYTES], want[520];

	(void)state;
	for (int iter = 0; iter < 3000; iter++) {
		size_t nd, wn, gn, pad;
		bool neg;
		seed = seed * 1103515245u + 12345u;
		nd = 1 + (iter < 2000 ? (seed >> 8) % 40 : (seed >> 8) % 1000);
		seed = seed * 1103515245u + 12345u;
		neg = (seed >> 16) & 1;
		pad = (seed >> 4) % (nd + 1) / 2;  /* zeros the value's scale lacks */
		for (size_t i = 0; i < nd; i++) {
			seed = seed * 1103515245u + 12345u;
			digits[i] = (char)('0' + (seed >> 16) % 10);
		}
		digits[0] = digits[0] == '0' ? '7' : digits[0];
		digits[nd] = '\0';
		wn = ref_decimal(digits, neg, want);
		/* the reference of the padded digits, when there is padding */
		assert_int_equal(sl_avro_decimal_bytes(digits, nd - pad, pad, neg, got, &gn), 0);
		if (pad > 0) {
			char padded[1001];
			memcpy(padded, digits, nd - pad);
			memset(padded + nd - pad, '0', pad);
			padded[nd] = '\0';
			wn = ref_decimal(padded, neg, want);
		}
		if (gn != wn || memcmp(got, want, wn) != 0)
			fail_msg("decimal %s%s (pad %zu) differs from the reference", neg ? "-" : "", digits, pad);
	}
}

static void test_date_time_ts(void **state)
{
	char err[256];

	(void)state;
	check_long(SL_T_DATE, tl_date(0), 0);
	check_long(SL_T_DATE, tl_date(19753), 19753);
	check_long(SL_T_DATE, tl_date(-735160), -735160);      /* 0044-03-15 BC */
	check_long(SL_T_DATE, tl_date(2932897), 2932897);      /* 10000-01-01 */
	check_long(SL_T_DATE, tl_date(INT32_MAX), INT32_MAX);
	check_long(SL_T_DATE, tl_date(INT32_MIN), INT32_MIN);
	check_bad_err(SL_T_DATE, 0, 0, tl_date(INT64_C(2147483648)), err, sizeof err);
	assert_string_equal(err, "column \"col_x\": date value 2147483648 is out of range for date");
	check_long(SL_T_TIME, tl_time(INT64_C(86400000000)), INT64_C(86400000000));  /* 24:00:00 */
	check_long(SL_T_TIME, tl_time(INT64_C(49500500000)), INT64_C(49500500000));
	check_long(SL_T_TIMESTAMP, tl_ts(INT64_C(1706708700123456)), INT64_C(1706708700123456));
	check_long(SL_T_TIMESTAMP, tl_ts(INT64_C(-62135596800000000)), INT64_C(-62135596800000000));
	check_long(SL_T_TIMESTAMPTZ, tl_ts(INT64_C(253402300799999999)), INT64_C(253402300799999999));
	check_long(SL_T_TIMESTAMPTZ, tl_ts(0), 0);
}

static void test_bytes(void **state)
{
	(void)state;
	CHECK(SL_T_BYTES, 0, 0, tl_bytes("\x0a\x0b\xff", 3), 0x02, 0x06, 0x0a, 0x0b, 0xff);
	CHECK(SL_T_BYTES, 0, 0, tl_bytes("", 0), 0x02, 0x00);
	CHECK(SL_T_BYTES, 0, 0, tl_bytes("\0\0", 2), 0x02, 0x04, 0x00, 0x00);
}

/* MySQL's BIGINT UNSIGNED: decimal(20,0) bytes, the same bytes the decimal
 * path gives for the same digits, up to 2^64-1 without a lost bit. */
static void test_uint64(void **state)
{
	const struct {
		uint64_t u;
		const char *digits;
	} cases[] = {
		{ 0, "0" }, { 1, "1" }, { 127, "127" }, { 128, "128" }, { 255, "255" },
		{ UINT64_C(9223372036854775807), "9223372036854775807" },
		{ UINT64_C(9223372036854775808), "9223372036854775808" },
		{ UINT64_C(18446744073709551615), "18446744073709551615" },
	};
	char err[256];

	(void)state;
	CHECK(SL_T_UINT64, 0, 0, ((struct sl_value){ .kind = SL_V_UINT, .u = 0 }), 0x02, 0x02, 0x00);
	CHECK(SL_T_UINT64, 0, 0, ((struct sl_value){ .kind = SL_V_UINT, .u = 128 }), 0x02, 0x04, 0x00, 0x80);
	CHECK(SL_T_UINT64, 0, 0, ((struct sl_value){ .kind = SL_V_UINT, .u = UINT64_MAX }), 0x02, 0x12,
	      0x00, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff);
	for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
		struct sl_column cu = mkcol(SL_T_UINT64, 0, 0), cd = mkcol(SL_T_DECIMAL, 20, 0);
		struct sl_value vu = { .kind = SL_V_UINT, .u = cases[i].u };
		struct sl_value vd = tl_dec(false, cases[i].digits, 0);
		struct sl_buf bu, bd;
		sl_buf_init(&bu, 0);
		sl_buf_init(&bd, 0);
		assert_int_equal(sl_avro_put_value(&bu, &cu, &vu, err, sizeof err), 0);
		assert_int_equal(sl_avro_put_value(&bd, &cd, &vd, err, sizeof err), 0);
		assert_int_equal(bu.len, bd.len);
		assert_memory_equal(bu.data, bd.data, bu.len);
		sl_buf_free(&bu);
		sl_buf_free(&bd);
	}
	check_bad_err(SL_T_UINT64, 0, 0, tl_int(1), err, sizeof err);
	assert_string_equal(err, "column \"col_x\": a value of kind integer does not fit type uint64");
}

/* Every type refuses every kind but its own, naming the column and leaving
 * the buffer as it was. */
static void test_kind_mismatch(void **state)
{
	static const unsigned char u[16] = { 1 };
	const struct {
		enum sl_type type;
		uint8_t kind;
	} fits[] = {
		{ SL_T_STRING, SL_V_STRING }, { SL_T_BOOL, SL_V_BOOL }, { SL_T_INT32, SL_V_INT },
		{ SL_T_INT64, SL_V_INT }, { SL_T_FLOAT, SL_V_FLOAT }, { SL_T_DOUBLE, SL_V_DOUBLE },
		{ SL_T_DECIMAL, SL_V_DECIMAL }, { SL_T_BYTES, SL_V_BYTES }, { SL_T_DATE, SL_V_DATE },
		{ SL_T_TIME, SL_V_TIME }, { SL_T_TIMESTAMP, SL_V_TIMESTAMP },
		{ SL_T_TIMESTAMPTZ, SL_V_TIMESTAMP }, { SL_T_UUID, SL_V_UUID }, { SL_T_JSON, SL_V_JSON },
		{ SL_T_UINT64, SL_V_UINT },
	};
	const struct sl_value values[] = {
		tl_bool(true), tl_int(1), { .kind = SL_V_UINT, .u = 1 }, tl_float(1), tl_double(1),
		tl_dec(false, "1", 0), tl_bytes("x", 1), tl_str("x"), tl_json("1"), tl_date(1),
		tl_time(1), tl_ts(1), tl_uuid(u),
	};
	char err[256];

	(void)state;
	for (size_t t = 0; t < sizeof fits / sizeof *fits; t++) {
		for (size_t k = 0; k < sizeof values / sizeof *values; k++) {
			struct sl_column c = mkcol(fits[t].type, 10, 0);
			struct sl_buf b;
			int rc;
			sl_buf_init(&b, 0);
			rc = sl_avro_put_value(&b, &c, &values[k], err, sizeof err);
			if (values[k].kind == fits[t].kind) {
				if (rc != 0)
					fail_msg("type %d refuses kind %u: %s", (int)fits[t].type, values[k].kind, err);
			} else {
				if (rc == 0)
					fail_msg("type %d accepts kind %u", (int)fits[t].type, values[k].kind);
				assert_int_equal(b.len, 0);
				assert_non_null(strstr(err, "column \"col_x\": a value of kind "));
				assert_non_null(strstr(err, " does not fit type "));
			}
			sl_buf_free(&b);
		}
	}
	check_bad_err(SL_T_DATE, 0, 0, tl_str("2024-01-31"), err, sizeof err);
	assert_string_equal(err, "column \"col_x\": a value of kind string does not fit type date");
	check_bad_err(SL_T_INT32, 0, 0, tl_dec(false, "1", 0), err, sizeof err);
	assert_string_equal(err, "column \"col_x\": a value of kind decimal does not fit type int32");
	check_bad_err(SL_T_STRING, 0, 0, (struct sl_value){ .kind = 99 }, err, sizeof err);
	assert_string_equal(err, "column \"col_x\": unknown value kind 99");
	check_bad_err(SL_T_UUID, 0, 0, tl_bytes("x", 1), err, sizeof err);
	check_bad_err(SL_T_UUID, 0, 0, (struct sl_value){ .kind = SL_V_UUID, .len = 15, .p = "0123456789abcde" },
		      err, sizeof err);
	assert_string_equal(err, "column \"col_x\": a uuid value of 15 bytes, not 16");
	check_bad_err((enum sl_type)77, 0, 0, tl_str("x"), err, sizeof err);
	assert_string_equal(err, "column \"col_x\": unknown output type 77");
}

static void test_not_nul_terminated(void **state)
{
	/* Values point into larger buffers: only len bytes count. */
	struct sl_value s = tl_str("abcdef"), d = tl_dec(false, "12345", 2);

	(void)state;
	s.len = 3;
	CHECK(SL_T_STRING, 0, 0, s, 0x02, 0x06, 'a', 'b', 'c');
	d.len = 2;  /* 0.12 */
	CHECK(SL_T_DECIMAL, 5, 2, d, 0x02, 0x02, 0x0c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_null_unchanged),
		cmocka_unit_test(test_strings),
		cmocka_unit_test(test_bool_int),
		cmocka_unit_test(test_float_double),
		cmocka_unit_test(test_decimal_small),
		cmocka_unit_test(test_decimal_rescale),
		cmocka_unit_test(test_decimal_large),
		cmocka_unit_test(test_decimal_1000),
		cmocka_unit_test(test_decimal_random),
		cmocka_unit_test(test_date_time_ts),
		cmocka_unit_test(test_bytes),
		cmocka_unit_test(test_uint64),
		cmocka_unit_test(test_kind_mismatch),
		cmocka_unit_test(test_not_nul_terminated),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
