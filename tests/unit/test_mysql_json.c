/*
 * tests/unit/test_mysql_json.c: MySQL binary JSON to text (sources/mysql/
 * mysql_json.c): every scalar type, small and large objects and arrays,
 * nesting, inline values, opaque values, MySQL's double format, malformed
 * documents and random mutations.  Documents are built by the test-side
 * encoder (mysql_enc.c).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common/buf.h"
#include "sources/mysql/mysql_json.h"
#include "tests/unit/mysql_enc.h"

static void check(struct me_json *j, const char *want)
{
	struct sl_buf doc, out;
	char err[256];

	sl_buf_init(&doc, 0);
	sl_buf_init(&out, 0);
	mj_doc(&doc, j);
	if (sl_mysql_json_text((const unsigned char *)doc.data, doc.len, &out, err, sizeof err) != 0)
		fail_msg("want %s: %s", want, err);
	if (out.len != strlen(want) || memcmp(out.data, want, out.len))
		fail_msg("got %.*s, want %s", (int)out.len, out.data, want);
	sl_buf_free(&doc);
	sl_buf_free(&out);
}

static void check_bad(const void *p, size_t n, const char *msg)
{
	struct sl_buf out;
	char err[256] = "";

	sl_buf_init(&out, 0);
	if (sl_mysql_json_text(p, n, &out, err, sizeof err) != -1 || !strstr(err, msg))
		fail_msg("\"%s\" lacks \"%s\"", err, msg);
	sl_buf_free(&out);
}

static void check_double(double d, const char *want)
{
	struct sl_buf out;

	sl_buf_init(&out, 0);
	assert_int_equal(sl_mysql_json_double(d, &out), 0);
	if (strcmp(out.data, want))
		fail_msg("%.17g: %s, want %s", d, out.data, want);
	sl_buf_free(&out);
	check(mj_double(d), want);
}

static void test_scalars(void **state)
{
	(void)state;
	check(mj_literal(0), "null");
	check(mj_literal(1), "true");
	check(mj_literal(2), "false");
	check(mj_int(0x05, 0x8000), "-32768");
	check(mj_int(0x05, 0x7fff), "32767");
	check(mj_int(0x06, 0xffff), "65535");
	check(mj_int(0x07, 0x80000000), "-2147483648");
	check(mj_int(0x08, 0xffffffff), "4294967295");
	check(mj_int(0x09, UINT64_C(0x8000000000000000)), "-9223372036854775808");
	check(mj_int(0x0a, UINT64_MAX), "18446744073709551615");
	check(mj_string("abc", 3), "\"abc\"");
	check(mj_string("", 0), "\"\"");
	check(mj_string("q\"b\\n\nt\tr\rb\bf\fc\x01\x1f/", 18), "\"q\\\"b\\\\n\\nt\\tr\\rb\\bf\\fc\\u0001\\u001f/\"");
	check(mj_string("\xc3\xa9\xf0\x9f\x98\x80", 6), "\"\xc3\xa9\xf0\x9f\x98\x80\"");
	{
		/* lengths of 2 and 3 variable-length bytes */
		char *s = malloc(20000), *want = malloc(20003);
		memset(s, 'x', 20000);
		want[0] = '"';
		memset(want + 1, 'x', 200);
		want[201] = '"';
		want[202] = '\0';
		check(mj_string(s, 200), want);
		memset(want + 1, 'x', 20000);
		want[20001] = '"';
		want[20002] = '\0';
		check(mj_string(s, 20000), want);
		free(s);
		free(want);
	}
}

static void test_doubles(void **state)
{
	(void)state;
	check_double(1.5, "1.5");
	check_double(-2.25, "-2.25");
	check_double(100, "100.0");
	check_double(0, "0.0");
	check_double(0.1, "0.1");
	check_double(123.456, "123.456");
	check_double(1e14, "100000000000000.0");
	check_double(1e15, "1e15");
	check_double(1e16, "1e16");
	check_double(3e20, "3e20");
	check_double(0.001, "0.001");
	check_double(1.25e-14, "0.0000000000000125");
	check_double(1e-15, "0.000000000000001");
	check_double(1e-16, "1e-16");
	check_double(-2.5e-20, "-2.5e-20");
	check_double(1.7976931348623157e308, "1.7976931348623157e308");
	check_double(5e-324, "5e-324");
	check_double(0.30000000000000004, "0.30000000000000004");
	check_double(1234567890123456.8, "1234567890123456.8");
	{
		struct sl_buf out;
		double inf = 1e308 * 10;
		sl_buf_init(&out, 0);
		assert_int_equal(sl_mysql_json_double(inf, &out), -1);
		sl_buf_free(&out);
	}
}

static void test_containers(void **state)
{
	(void)state;
	/* {"a": 1, "b": [true, null]} small, then the same large */
	for (int large = 0; large <= 1; large++) {
		static const char *k[] = { "a", "b" };
		struct me_json *arr[2] = { mj_literal(1), mj_literal(0) };
		struct me_json *v[2] = { mj_int(0x05, 1), NULL };
		v[1] = mj_array(large, 2, arr);
		check(mj_object(large, 2, k, v), "{\"a\": 1, \"b\": [true, null]}");
	}
	check(mj_object(false, 0, NULL, NULL), "{}");
	check(mj_array(true, 0, NULL), "[]");
	{
		/* every scalar in a small array; int32 is not inline there */
		struct me_json *e[9] = {
			mj_int(0x05, 0xffff), mj_int(0x06, 7), mj_int(0x07, 0xfffffffe), mj_int(0x08, 4000000000u),
			mj_int(0x09, 5), mj_int(0x0a, 6), mj_double(0.5), mj_string("s", 1), mj_literal(2),
		};
		check(mj_array(false, 9, e), "[-1, 7, -2, 4000000000, 5, 6, 0.5, \"s\", false]");
	}
	{
		/* and in a large one, where int32 and uint32 are inline */
		struct me_json *e[4] = { mj_int(0x07, 0x80000000), mj_int(0x08, 0xffffffff), mj_int(0x05, 3),
					 mj_string("\xe2\x82\xac", 3) };
		check(mj_array(true, 4, e), "[-2147483648, 4294967295, 3, \"\xe2\x82\xac\"]");
	}
	{
		/* nesting: objects in arrays in objects; keys kept in stored order */
		static const char *k1[] = { "id", "tags", "meta" }, *k2[] = { "x", "deep" }, *k3[] = { "z" };
		struct me_json *in3[1] = { mj_array(false, 0, NULL) };
		struct me_json *in2[2] = { mj_double(1e16), mj_object(true, 1, k3, in3) };
		struct me_json *tags[2] = { mj_string("a", 1), mj_string("b", 1) };
		struct me_json *top[3] = { mj_int(0x0a, 42), mj_array(false, 2, tags), mj_object(false, 2, k2, in2) };
		check(mj_object(false, 3, k1, top), "{\"id\": 42, \"tags\": [\"a\", \"b\"], \"meta\": {\"x\": 1e16, "
			"\"deep\": {\"z\": []}}}");
	}
	{
		/* a key with characters to escape */
		static const char *k[] = { "a\"b" };
		struct me_json *v[1] = { mj_literal(0) };
		check(mj_object(false, 1, k, v), "{\"a\\\"b\": null}");
	}
}

/* MySQL's packed temporal int64: ((ymd << 17 | hms) << 24) + microseconds. */
static uint64_t packed_dt(int y, int mo, int d, int h, int mi, int s, int us)
{
	uint64_t ymd = ((uint64_t)(y * 13 + mo) << 5) | (uint64_t)d;
	uint64_t hms = (uint64_t)h << 12 | (uint64_t)mi << 6 | (uint64_t)s;

	return ((ymd << 17 | hms) << 24) + (uint64_t)us;
}

static void test_opaque(void **state)
{
	struct sl_buf b;
	unsigned char le[8];
	uint64_t v;

	(void)state;
	sl_buf_init(&b, 0);
	me_le(&b, 10, 1);
	me_le(&b, 2, 1);
	me_decimal(&b, "-12.34", 10, 2);
	check(mj_opaque(246, b.data, b.len), "-12.34");
	sl_buf_reset(&b);
	me_le(&b, 5, 1);
	me_le(&b, 5, 1);
	me_decimal(&b, "0.05", 5, 5);
	check(mj_opaque(246, b.data, b.len), "0.05000");
	v = packed_dt(2015, 1, 15, 23, 24, 25, 0);
	for (int i = 0; i < 8; i++)
		le[i] = (unsigned char)(v >> (8 * i));
	check(mj_opaque(12, le, 8), "\"2015-01-15 23:24:25.000000\"");
	check(mj_opaque(7, le, 8), "\"2015-01-15 23:24:25.000000\"");
	v = packed_dt(2015, 1, 15, 0, 0, 0, 0);
	for (int i = 0; i < 8; i++)
		le[i] = (unsigned char)(v >> (8 * i));
	check(mj_opaque(10, le, 8), "\"2015-01-15\"");
	v = (uint64_t) - (int64_t)(((uint64_t)12 << 12 | 30 << 6) << 24 | 500000);
	for (int i = 0; i < 8; i++)
		le[i] = (unsigned char)(v >> (8 * i));
	check(mj_opaque(11, le, 8), "\"-12:30:00.500000\"");
	check(mj_opaque(252, "AB", 2), "\"base64:type252:QUI=\"");
	check(mj_opaque(16, "\x01", 1), "\"base64:type16:AQ==\"");
	check(mj_opaque(15, "abc", 3), "\"base64:type15:YWJj\"");
	/* an opaque decimal whose bytes are not a decimal */
	check_bad("\x0f\xf6\x03\x02\x01\xff", 6, "bad decimal");
	check_bad("\x0f\x0c\x03\x01\x02\x03", 6, "truncated temporal value");
	sl_buf_free(&b);
}

static void test_malformed(void **state)
{
	struct sl_buf out, doc;
	char err[256];

	(void)state;
	sl_buf_init(&out, 0);
	sl_buf_init(&doc, 0);
	/* the empty document is null */
	assert_int_equal(sl_mysql_json_text((const unsigned char *)"", 0, &out, err, sizeof err), 0);
	assert_string_equal(out.data, "null");
	check_bad("\x10", 1, "unknown value type");
	check_bad("\x04\x03", 2, "bad literal");
	check_bad("\x04", 1, "bad literal");
	check_bad("\x05\x01", 2, "truncated number");
	check_bad("\x0b\x00\x00", 3, "truncated double");
	check_bad("\x0b\x00\x00\x00\x00\x00\x00\xf0\x7f", 9, "not a number");
	check_bad("\x0c\x85", 2, "string beyond");
	check_bad("\x0c\xff\xff\xff\xff\xff\x01", 7, "string beyond");
	check_bad("\x00\x01\x00", 3, "truncated container header");
	check_bad("\x00\x01\x00\x40\x00", 5, "container size beyond its bytes");
	check_bad("\x02\x09\x00\x08\x00\x00\x00\x00\x00", 9, "too many elements");
	/* an array whose value offset points into its header */
	check_bad("\x02\x01\x00\x07\x00\x0c\x01\x00", 8, "value beyond its container");
	/* an object whose key runs past it */
	check_bad("\x00\x01\x00\x0c\x00\x0b\x00\x09\x00\x04\x00\x00\x61", 13, "key beyond the object");
	/* 200 nested arrays: refused, not a deep recursion */
	{
		struct me_json *j = mj_array(false, 0, NULL);
		for (int i = 0; i < 200; i++)
			j = mj_array(false, 1, &j);
		mj_doc(&doc, j);
		assert_int_equal(sl_mysql_json_text((const unsigned char *)doc.data, doc.len, &out, err, sizeof err), -1);
		assert_non_null(strstr(err, "nested too deep"));
	}
	sl_buf_free(&out);
	sl_buf_free(&doc);
}

/* Random mutations of valid documents: text or an error, never a crash or
 * an over-read (run under --enable-sanitizers to see that). */
static void test_mutations(void **state)
{
	static const char *k[] = { "alpha", "b", "gamma" };
	struct sl_buf docs[2], m, out;
	unsigned seed = 4242;
	char err[256];
	int ok = 0;

	(void)state;
	for (int large = 0; large <= 1; large++) {
		struct me_json *arr[4] = { mj_int(0x07, 5), mj_double(2.5), mj_string("xyz", 3), mj_literal(1) };
		struct me_json *v[3] = { mj_array(large, 4, arr), mj_opaque(246, "\x03\x01\x81\x05", 4), mj_int(0x0a, 9) };
		sl_buf_init(&docs[large], 0);
		mj_doc(&docs[large], mj_object(large, 3, k, v));
	}
	sl_buf_init(&m, 0);
	sl_buf_init(&out, 0);
	for (int iter = 0; iter < 100000; iter++) {
		const struct sl_buf *src = &docs[rand_r(&seed) % 2];
		int n = 1 + rand_r(&seed) % 4, rc;
		sl_buf_reset(&m);
		sl_buf_append(&m, src->data, src->len);
		for (int i = 0; i < n && m.len > 0; i++) {
			size_t at = (size_t)rand_r(&seed) % m.len;
			switch (rand_r(&seed) % 3) {
			case 0: m.data[at] = (char)rand_r(&seed); break;
			case 1: m.len = at; break;
			default: m.data[at] = (char)0xff; break;
			}
		}
		sl_buf_reset(&out);
		rc = sl_mysql_json_text((const unsigned char *)m.data, m.len, &out, err, sizeof err);
		assert_true(rc == 0 || rc == -1);
		ok += rc == 0;
	}
	assert_true(ok > 0);
	sl_buf_free(&docs[0]);
	sl_buf_free(&docs[1]);
	sl_buf_free(&m);
	sl_buf_free(&out);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_scalars),
		cmocka_unit_test(test_doubles),
		cmocka_unit_test(test_containers),
		cmocka_unit_test(test_opaque),
		cmocka_unit_test(test_malformed),
		cmocka_unit_test(test_mutations),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
