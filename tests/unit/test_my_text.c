/*
 * tests/unit/test_my_text.c: the MySQL snapshot's text-protocol values
 * (sources/mysql/my_backfill.c, sl_my_text_value): each fast-path parser at
 * its edges (integers at their type's limits, signed and unsigned; decimals
 * with many digits, leading zeros and negative zero; dates, datetimes and
 * timestamps with every number of fractional digits, zero and invalid
 * dates), the texts it refuses, and the same value as the binary protocol
 * gives it (sl_my_bind_value).  No server needed.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common/buf.h"
#include "sources/mysql/my_internal.h"

struct fx {
	struct sl_my_col col;
	struct sl_column out;
	struct sl_buf scratch;
	struct sl_mysql_conv conv;
	struct sl_mysql_row_stats stats;
	char err[512];
};

static void setup_col(struct fx *f, uint8_t real_type, enum sl_type out, int8_t is_unsigned, uint8_t scale)
{
	memset(&f->col, 0, sizeof f->col);
	memset(&f->out, 0, sizeof f->out);
	f->col.name = (char *)"c";
	f->col.mc.type = real_type;
	f->col.mc.real_type = real_type;
	f->col.mc.is_unsigned = is_unsigned;
	f->col.mc.precision = 65;
	f->col.mc.scale = scale;
	f->col.mc.charset = sl_mysql_charset_by_name("utf8mb4");
	f->out.type = out;
	f->out.scale = scale;
	sl_buf_reset(&f->scratch);
	f->err[0] = '\0';
}

/* sl_my_text_value of text (NULL: SQL NULL), with an offset into scratch
 * made a pointer; its return code. */
static int text(struct fx *f, const char *p, struct sl_value *v)
{
	int r = sl_my_text_value(&f->col, &f->out, p, p ? strlen(p) : 0, &f->scratch, &f->conv, &f->stats, "db", "t", v,
				 f->err, sizeof f->err);

	if (r == 1)
		v->p = f->scratch.data + (uintptr_t)v->p;
	return r;
}

static void assert_int(struct fx *f, const char *p, int64_t want)
{
	struct sl_value v;

	assert_int_equal(text(f, p, &v), 0);
	assert_int_equal(v.kind, SL_V_INT);
	assert_true(v.i == want);
}

static void assert_refused(struct fx *f, const char *p, const char *why)
{
	struct sl_value v;

	assert_int_equal(text(f, p, &v), SL_MYSQL_EVALUE);
	assert_non_null(strstr(f->err, why));
	assert_non_null(strstr(f->err, "\"c\""));
}

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof *f);

	sl_buf_init(&f->scratch, 0);
	sl_mysql_conv_init(&f->conv);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;

	sl_buf_free(&f->scratch);
	sl_mysql_conv_free(&f->conv);
	free(f);
	return 0;
}

static void test_ints(void **state)
{
	struct fx *f = *state;
	struct sl_value v;

	setup_col(f, SL_MYSQL_LONGLONG, SL_T_INT64, 0, 0);
	assert_int(f, "0", 0);
	assert_int(f, "-0", 0);
	assert_int(f, "9223372036854775807", INT64_MAX);
	assert_int(f, "-9223372036854775808", INT64_MIN);
	assert_int(f, "-1", -1);
	assert_int(f, "000123", 123);
	assert_refused(f, "9223372036854775808", "out of range for int64");
	assert_refused(f, "-9223372036854775809", "out of range for int64");
	assert_refused(f, "18446744073709551616", "is not an integer");
	assert_refused(f, "", "is not an integer");
	assert_refused(f, "-", "is not an integer");
	assert_refused(f, "12a", "is not an integer");
	assert_refused(f, " 1", "is not an integer");
	assert_refused(f, "+1", "is not an integer");

	setup_col(f, SL_MYSQL_LONG, SL_T_INT32, 0, 0);
	assert_int(f, "2147483647", INT32_MAX);
	assert_int(f, "-2147483648", INT32_MIN);
	assert_refused(f, "2147483648", "out of range for int32");
	assert_refused(f, "-2147483649", "out of range for int32");

	/* BIGINT UNSIGNED: all of uint64; "-0" is zero, not negative */
	setup_col(f, SL_MYSQL_LONGLONG, SL_T_UINT64, 1, 0);
	assert_int_equal(text(f, "18446744073709551615", &v), 0);
	assert_int_equal(v.kind, SL_V_UINT);
	assert_true(v.u == UINT64_MAX);
	assert_int_equal(text(f, "-0", &v), 0);
	assert_true(v.kind == SL_V_UINT && v.u == 0);
	assert_refused(f, "-1", "negative value for uint64");

	/* INT UNSIGNED as int64, YEAR */
	setup_col(f, SL_MYSQL_LONG, SL_T_INT64, 1, 0);
	assert_int(f, "4294967295", UINT32_MAX);
	setup_col(f, SL_MYSQL_YEAR, SL_T_INT32, 1, 0);
	assert_int(f, "2155", 2155);
	assert_int(f, "0000", 0);

	assert_int_equal(text(f, NULL, &v), 0);
	assert_int_equal(v.kind, SL_V_NULL);
}

static void assert_decimal(struct fx *f, const char *p, bool neg, const char *digits)
{
	struct sl_value v;

	assert_int_equal(text(f, p, &v), 1);
	assert_int_equal(v.kind, SL_V_DECIMAL);
	assert_int_equal(v.neg, neg);
	assert_int_equal(v.scale, f->col.mc.scale);
	assert_int_equal(v.len, strlen(digits));
	assert_memory_equal(v.p, digits, v.len);
}

static void test_decimals(void **state)
{
	struct fx *f = *state;

	setup_col(f, SL_MYSQL_NEWDECIMAL, SL_T_DECIMAL, 0, 2);
	assert_decimal(f, "12.50", false, "1250");
	assert_decimal(f, "-12.50", true, "1250");
	assert_decimal(f, "0.01", false, "1");
	assert_decimal(f, "-0.01", true, "1");
	assert_decimal(f, "0.00", false, "0");
	assert_decimal(f, "-0.00", false, "0");   /* negative zero: zero */
	assert_decimal(f, "0012.5", false, "1250");
	assert_decimal(f, "7", false, "700");
	assert_refused(f, "1.234", "is not a decimal(65,2)");
	assert_refused(f, "1.2.3", "is not a decimal");
	assert_refused(f, "1e5", "is not a decimal");

	/* DECIMAL(65,30): the most digits MySQL allows */
	setup_col(f, SL_MYSQL_NEWDECIMAL, SL_T_DECIMAL, 0, 30);
	assert_decimal(f, "-99999999999999999999999999999999999.999999999999999999999999999999", true,
		       "99999999999999999999999999999999999999999999999999999999999999999");
	assert_decimal(f, "0.000000000000000000000000000001", false, "1");

	/* DECIMAL(10,0) */
	setup_col(f, SL_MYSQL_NEWDECIMAL, SL_T_DECIMAL, 0, 0);
	assert_decimal(f, "-9999999999", true, "9999999999");
	assert_decimal(f, "0", false, "0");
	assert_refused(f, "1.0", "is not a decimal");
}

static void assert_time(struct fx *f, const char *p, uint8_t kind, int64_t want)
{
	struct sl_value v;

	assert_int_equal(text(f, p, &v), 0);
	assert_int_equal(v.kind, kind);
	assert_true(v.i == want);
}

static void test_dates(void **state)
{
	struct fx *f = *state;
	struct sl_value v;
	const int64_t day = INT64_C(86400000000);

	setup_col(f, SL_MYSQL_DATE, SL_T_DATE, -1, 0);
	assert_time(f, "1970-01-01", SL_V_DATE, 0);
	assert_time(f, "1000-01-01", SL_V_DATE, -354285);
	assert_time(f, "9999-12-31", SL_V_DATE, 2932896);
	assert_time(f, "0001-01-01", SL_V_DATE, -719162);
	assert_time(f, "2024-02-29", SL_V_DATE, 19782);
	f->stats = (struct sl_mysql_row_stats){ 0 };
	assert_int_equal(text(f, "0000-00-00", &v), 0);
	assert_int_equal(v.kind, SL_V_NULL);
	assert_int_equal(f->stats.zero_dates, 1);
	assert_int_equal(text(f, "2023-02-29", &v), 0);   /* ALLOW_INVALID_DATES */
	assert_int_equal(v.kind, SL_V_NULL);
	assert_int_equal(text(f, "2023-00-10", &v), 0);
	assert_int_equal(v.kind, SL_V_NULL);
	assert_int_equal(f->stats.invalid_dates, 2);
	assert_refused(f, "2024-1-01", "is not a date or time");
	assert_refused(f, "2024-01-01 00:00:00", "is not a date or time");
	assert_refused(f, "20240101", "is not a date or time");

	setup_col(f, SL_MYSQL_DATETIME2, SL_T_TIMESTAMP, -1, 0);
	assert_time(f, "1970-01-01 00:00:00", SL_V_TIMESTAMP, 0);
	assert_time(f, "1970-01-02 00:00:01.5", SL_V_TIMESTAMP, day + 1500000);
	assert_time(f, "1970-01-01 00:00:00.000001", SL_V_TIMESTAMP, 1);
	assert_time(f, "1970-01-01 00:00:00.12", SL_V_TIMESTAMP, 120000);
	assert_time(f, "1969-12-31 23:59:59.999999", SL_V_TIMESTAMP, -1);
	assert_time(f, "9999-12-31 23:59:59.999999", SL_V_TIMESTAMP, 2932897 * day - 1);
	assert_int_equal(text(f, "0000-00-00 00:00:00", &v), 0);
	assert_int_equal(v.kind, SL_V_NULL);
	assert_refused(f, "1970-01-01 00:00:00.", "is not a date or time");
	assert_refused(f, "1970-01-01 00:00:00.1234567", "is not a date or time");
	assert_refused(f, "1970-01-01 24:00:00", "is not a date or time");
	assert_refused(f, "1970-01-01T00:00:00", "is not a date or time");
	assert_refused(f, "1970-01-01", "is not a date or time");

	/* TIMESTAMP (in UTC, the session's zone): a zero one is null */
	setup_col(f, SL_MYSQL_TIMESTAMP2, SL_T_TIMESTAMP, -1, 0);
	assert_time(f, "2038-01-19 03:14:07.999999", SL_V_TIMESTAMP, INT64_C(2147483647999999));
	assert_int_equal(text(f, "0000-00-00 00:00:00.000000", &v), 0);
	assert_int_equal(v.kind, SL_V_NULL);
}

/* The text and the binary protocol give the same value. */
static void test_same_as_binary(void **state)
{
	struct fx *f = *state;
	struct sl_value a, b;
	MYSQL_BIND bind;
	MYSQL_TIME t = { .year = 2024, .month = 7, .day = 1, .hour = 12, .minute = 34, .second = 56,
			 .second_part = 789000 };
	uint64_t u = (uint64_t)INT64_C(-42);
	unsigned long len = 0;
	my_bool is_null = 0;
	char dec[] = "-00123.40";

	memset(&bind, 0, sizeof bind);
	bind.is_null = &is_null;
	bind.length = &len;

	setup_col(f, SL_MYSQL_LONGLONG, SL_T_INT64, 0, 0);
	bind.buffer = &u;
	assert_int_equal(sl_my_bind_value(&f->col, &f->out, &bind, &f->scratch, &f->conv, &f->stats, "db", "t", &b,
					  f->err, sizeof f->err), 0);
	assert_int_equal(text(f, "-42", &a), 0);
	assert_true(sl_value_equal(&a, &b));

	setup_col(f, SL_MYSQL_DATETIME2, SL_T_TIMESTAMP, -1, 0);
	bind.buffer = &t;
	assert_int_equal(sl_my_bind_value(&f->col, &f->out, &bind, &f->scratch, &f->conv, &f->stats, "db", "t", &b,
					  f->err, sizeof f->err), 0);
	assert_int_equal(text(f, "2024-07-01 12:34:56.789", &a), 0);
	assert_true(sl_value_equal(&a, &b));

	setup_col(f, SL_MYSQL_NEWDECIMAL, SL_T_DECIMAL, 0, 3);
	bind.buffer = dec;
	len = strlen(dec);
	assert_int_equal(sl_my_bind_value(&f->col, &f->out, &bind, &f->scratch, &f->conv, &f->stats, "db", "t", &b,
					  f->err, sizeof f->err), 1);
	b.p = f->scratch.data + (uintptr_t)b.p;
	assert_int_equal(text(f, "-123.400", &a), 1);
	assert_true(sl_value_equal(&a, &b));
}

static void test_strings_and_choice(void **state)
{
	struct fx *f = *state;
	struct sl_value v;
	struct sl_my_col cols[2];
	struct sl_my_table mt = { .db = (char *)"db", .name = (char *)"t", .ncols = 2, .cols = cols };

	/* UTF-8 text and bytes are the connection's bytes, not a copy */
	setup_col(f, SL_MYSQL_VARCHAR, SL_T_STRING, -1, 0);
	{
		const char *s = "h\xc3\xa9llo";
		assert_int_equal(sl_my_text_value(&f->col, &f->out, s, strlen(s), &f->scratch, &f->conv, &f->stats, "db",
						  "t", &v, f->err, sizeof f->err), 0);
		assert_ptr_equal(v.p, s);
		assert_int_equal(v.len, 6);
		assert_int_equal(v.kind, SL_V_STRING);
	}

	/* FLOAT, DOUBLE, TIME, BIT, GEOMETRY: the binary protocol */
	memset(cols, 0, sizeof cols);
	cols[0].mc.real_type = SL_MYSQL_LONGLONG;
	cols[1].mc.real_type = SL_MYSQL_BLOB;
	assert_true(sl_my_text_ok(&mt));
	cols[1].mc.real_type = SL_MYSQL_JSON;
	assert_true(sl_my_text_ok(&mt));
	static const uint8_t binary_only[] = { SL_MYSQL_FLOAT, SL_MYSQL_DOUBLE, SL_MYSQL_TIME2, SL_MYSQL_BIT,
					       SL_MYSQL_GEOMETRY };
	for (size_t i = 0; i < sizeof binary_only; i++) {
		cols[1].mc.real_type = binary_only[i];
		assert_false(sl_my_text_ok(&mt));
		setup_col(f, binary_only[i], SL_T_DOUBLE, -1, 0);
		assert_refused(f, "1", "has no exact text form");
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_ints, setup, teardown),
		cmocka_unit_test_setup_teardown(test_decimals, setup, teardown),
		cmocka_unit_test_setup_teardown(test_dates, setup, teardown),
		cmocka_unit_test_setup_teardown(test_same_as_binary, setup, teardown),
		cmocka_unit_test_setup_teardown(test_strings_and_choice, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
