/*
 * tests/unit/test_mysql_rows.c: row images to typed values (sources/mysql/
 * row_image.c) and the type map: every column type with its edge values,
 * charsets, NULLs, partial images, UPDATE pairs, V1 and V2 events, zero and
 * invalid dates, values that do not fit their column.  Values are encoded
 * by the test-side encoder (mysql_enc.c).
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
#include "common/util.h"
#include "schema/schema.h"
#include "sources/mysql/binlog_event.h"
#include "sources/mysql/mysql_charset.h"
#include "sources/mysql/row_image.h"
#include "tests/unit/mysql_enc.h"

static struct sl_mysql_rowdec dec;
static struct sl_buf row;
static char err[512];

static int setup(void **state)
{
	(void)state;
	sl_mysql_rowdec_init(&dec);
	sl_buf_init(&row, 0);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	sl_mysql_rowdec_free(&dec);
	sl_buf_free(&row);
	return 0;
}

/* A table map column, as a parsed TABLE_MAP would give it. */
static struct sl_mysql_column mcol(uint8_t type)
{
	struct sl_mysql_column c;

	memset(&c, 0, sizeof c);
	c.type = c.real_type = type;
	c.is_unsigned = 0;
	c.geometry_type = -1;
	c.visible = -1;
	c.nullable = true;
	c.name.p = "c";
	c.name.len = 1;
	return c;
}

static struct sl_mysql_column mtext(uint8_t type, uint32_t collation, uint32_t max_len, uint8_t pack_len)
{
	struct sl_mysql_column c = mcol(type);

	c.collation = collation;
	c.charset = sl_mysql_charset_of_collation(collation);
	c.max_len = max_len;
	c.pack_len = pack_len;
	return c;
}

static struct sl_column ocol(enum sl_type t, int p, int s)
{
	struct sl_column c;

	memset(&c, 0, sizeof c);
	c.name = "c";
	c.type = t;
	c.precision = p;
	c.scale = s;
	return c;
}

/* Decodes a one-column WRITE row whose value bytes are in val. */
static int one(struct sl_mysql_column mc, struct sl_column oc, const struct sl_buf *val, struct sl_value *out)
{
	struct sl_binlog_table_map tm;
	struct sl_binlog_rows rows;
	static const unsigned char present = 0x01;
	int rc;

	memset(&tm, 0, sizeof tm);
	tm.table_id = 5;
	tm.db = "shop";
	tm.table = "t";
	tm.ncols = 1;
	tm.cols = &mc;
	sl_buf_reset(&row);
	me_le(&row, 0, 1);  /* null bitmap: not null */
	me_bytes(&row, val->data, val->len);
	memset(&rows, 0, sizeof rows);
	rows.op = SL_BL_ROWS_WRITE;
	rows.table_id = 5;
	rows.ncols = 1;
	rows.present = &present;
	rows.rows = (const unsigned char *)row.data;
	rows.end = rows.rows + row.len;
	err[0] = '\0';
	rc = sl_mysql_rows_next(&dec, &rows, &tm, &oc, NULL, out, err, sizeof err);
	if (rc == 1 && rows.rows != rows.end)
		fail_msg("the value left %td bytes unread", rows.end - rows.rows);
	return rc;
}

static struct sl_buf vb;

static const struct sl_buf *le_val(uint64_t v, int n)
{
	sl_buf_reset(&vb);
	me_le(&vb, v, n);
	return &vb;
}

#define OK(mc, oc, val, out) do { \
		if (one((mc), (oc), (val), (out)) != 1) \
			fail_msg("line %d: %s", __LINE__, err); \
	} while (0)

#define BAD(mc, oc, val, msg) do { \
		struct sl_value bad_; \
		int rc_ = one((mc), (oc), (val), &bad_); \
		if (rc_ != SL_MYSQL_EVALUE || !strstr(err, (msg))) \
			fail_msg("line %d: rc %d, \"%s\" lacks \"%s\"", __LINE__, rc_, err, (msg)); \
	} while (0)

static struct sl_mysql_column uns(struct sl_mysql_column c)
{
	c.is_unsigned = 1;
	return c;
}

static void check_int(uint8_t type, bool is_uns, int n, uint64_t raw, enum sl_type t, int64_t want)
{
	struct sl_mysql_column c = mcol(type);
	struct sl_value v;

	c.is_unsigned = is_uns;
	OK(c, ocol(t, 0, 0), le_val(raw, n), &v);
	assert_int_equal(v.kind, SL_V_INT);
	if (v.i != want)
		fail_msg("type %u raw 0x%llx: %lld, want %lld", type, (unsigned long long)raw, (long long)v.i,
			 (long long)want);
}

static void test_integers(void **state)
{
	struct sl_value v;
	int p = 0, s = 0;

	(void)state;
	sl_buf_init(&vb, 0);
	check_int(SL_MYSQL_TINY, false, 1, 0x80, SL_T_INT32, -128);
	check_int(SL_MYSQL_TINY, false, 1, 0x7f, SL_T_INT32, 127);
	check_int(SL_MYSQL_TINY, true, 1, 0xff, SL_T_INT32, 255);
	check_int(SL_MYSQL_TINY, true, 1, 0, SL_T_INT32, 0);
	check_int(SL_MYSQL_SHORT, false, 2, 0x8000, SL_T_INT32, -32768);
	check_int(SL_MYSQL_SHORT, false, 2, 0x7fff, SL_T_INT32, 32767);
	check_int(SL_MYSQL_SHORT, true, 2, 0xffff, SL_T_INT32, 65535);
	check_int(SL_MYSQL_INT24, false, 3, 0x800000, SL_T_INT32, -8388608);
	check_int(SL_MYSQL_INT24, false, 3, 0x7fffff, SL_T_INT32, 8388607);
	check_int(SL_MYSQL_INT24, false, 3, 0xffffff, SL_T_INT32, -1);
	check_int(SL_MYSQL_INT24, true, 3, 0xffffff, SL_T_INT32, 16777215);
	check_int(SL_MYSQL_LONG, false, 4, 0x80000000, SL_T_INT32, INT32_MIN);
	check_int(SL_MYSQL_LONG, false, 4, 0x7fffffff, SL_T_INT32, INT32_MAX);
	check_int(SL_MYSQL_LONG, true, 4, 0xffffffff, SL_T_INT64, 4294967295LL);
	check_int(SL_MYSQL_LONGLONG, false, 8, UINT64_C(0x8000000000000000), SL_T_INT64, INT64_MIN);
	check_int(SL_MYSQL_LONGLONG, false, 8, UINT64_C(0x7fffffffffffffff), SL_T_INT64, INT64_MAX);
	check_int(SL_MYSQL_LONGLONG, false, 8, UINT64_MAX, SL_T_INT64, -1);
	check_int(SL_MYSQL_YEAR, false, 1, 1, SL_T_INT32, 1901);
	check_int(SL_MYSQL_YEAR, false, 1, 255, SL_T_INT32, 2155);
	check_int(SL_MYSQL_YEAR, false, 1, 0, SL_T_INT32, 0);

	/* BIGINT UNSIGNED keeps every bit */
	OK(uns(mcol(SL_MYSQL_LONGLONG)), ocol(SL_T_UINT64, 0, 0), le_val(UINT64_MAX, 8), &v);
	assert_int_equal(v.kind, SL_V_UINT);
	assert_true(v.u == UINT64_C(18446744073709551615));
	OK(uns(mcol(SL_MYSQL_LONGLONG)), ocol(SL_T_UINT64, 0, 0), le_val(0, 8), &v);
	assert_true(v.kind == SL_V_UINT && v.u == 0);
	/* as text */
	OK(uns(mcol(SL_MYSQL_LONGLONG)), ocol(SL_T_STRING, 0, 0), le_val(UINT64_MAX, 8), &v);
	assert_int_equal(v.kind, SL_V_STRING);
	assert_int_equal(v.len, 20);
	assert_memory_equal(v.p, "18446744073709551615", 20);
	OK(mcol(SL_MYSQL_LONGLONG), ocol(SL_T_STRING, 0, 0), le_val(UINT64_C(0x8000000000000000), 8), &v);
	assert_memory_equal(v.p, "-9223372036854775808", 20);

	/* values that do not fit the output type */
	BAD(uns(mcol(SL_MYSQL_LONGLONG)), ocol(SL_T_INT64, 0, 0), le_val(UINT64_MAX, 8),
	    "value 18446744073709551615 is out of range for int64");
	BAD(mcol(SL_MYSQL_LONGLONG), ocol(SL_T_UINT64, 0, 0), le_val(UINT64_MAX, 8),
	    "value -1 is out of range for uint64");
	BAD(uns(mcol(SL_MYSQL_LONG)), ocol(SL_T_INT32, 0, 0), le_val(0xffffffff, 4),
	    "table \"shop\".\"t\" column \"c\" (int unsigned): value 4294967295 is out of range for int32");
	BAD(mcol(SL_MYSQL_LONG), ocol(SL_T_DATE, 0, 0), le_val(1, 4), "cannot be written as date");
	/* unknown signedness is refused, unless the column says unsigned 64-bit */
	{
		struct sl_mysql_column c = mcol(SL_MYSQL_TINY);
		c.is_unsigned = -1;
		BAD(c, ocol(SL_T_INT32, 0, 0), le_val(0xff, 1), "signedness unknown");
		c = mcol(SL_MYSQL_LONGLONG);
		c.is_unsigned = -1;
		OK(c, ocol(SL_T_UINT64, 0, 0), le_val(UINT64_MAX, 8), &v);
		assert_true(v.u == UINT64_MAX);
	}

	/* the type map */
	assert_int_equal(sl_mysql_type_map(&(struct sl_mysql_column){ .real_type = SL_MYSQL_TINY }, &p, &s), SL_T_INT32);
	assert_int_equal(sl_mysql_type_map(&(struct sl_mysql_column){ .real_type = SL_MYSQL_LONG, .is_unsigned = 0 }, &p, &s),
			 SL_T_INT32);
	assert_int_equal(sl_mysql_type_map(&(struct sl_mysql_column){ .real_type = SL_MYSQL_LONG, .is_unsigned = 1 }, &p, &s),
			 SL_T_INT64);
	assert_int_equal(sl_mysql_type_map(&(struct sl_mysql_column){ .real_type = SL_MYSQL_LONG, .is_unsigned = -1 }, &p, &s),
			 SL_T_INT64);
	assert_int_equal(sl_mysql_type_map(&(struct sl_mysql_column){ .real_type = SL_MYSQL_LONGLONG, .is_unsigned = 1 }, &p, &s),
			 SL_T_UINT64);
	assert_int_equal(sl_mysql_type_map(&(struct sl_mysql_column){ .real_type = SL_MYSQL_LONGLONG, .is_unsigned = 0 }, &p, &s),
			 SL_T_INT64);
	assert_int_equal(sl_mysql_type_map(&(struct sl_mysql_column){ .real_type = SL_MYSQL_YEAR }, &p, &s), SL_T_INT32);
	sl_buf_free(&vb);
}

static void check_decimal(const char *text, int prec, int scale, const char *digits, bool neg)
{
	struct sl_mysql_column c = mcol(SL_MYSQL_NEWDECIMAL);
	struct sl_value v;

	c.precision = (uint8_t)prec;
	c.scale = (uint8_t)scale;
	sl_buf_reset(&vb);
	me_decimal(&vb, text, prec, scale);
	assert_int_equal(vb.len, sl_mysql_decimal_size(prec, scale));
	OK(c, ocol(SL_T_DECIMAL, prec, scale), &vb, &v);
	assert_int_equal(v.kind, SL_V_DECIMAL);
	if (v.len != strlen(digits) || memcmp(v.p, digits, v.len) || v.neg != neg || v.scale != scale)
		fail_msg("%s as decimal(%d,%d): %s%.*s scale %d", text, prec, scale, v.neg ? "-" : "", (int)v.len, v.p,
			 v.scale);
}

static void check_decimal_text(const char *text, int prec, int scale, const char *want)
{
	struct sl_mysql_column c = mcol(SL_MYSQL_NEWDECIMAL);
	struct sl_value v;

	c.precision = (uint8_t)prec;
	c.scale = (uint8_t)scale;
	sl_buf_reset(&vb);
	me_decimal(&vb, text, prec, scale);
	OK(c, ocol(SL_T_STRING, 0, 0), &vb, &v);
	if (v.len != strlen(want) || memcmp(v.p, want, v.len))
		fail_msg("%s as text: %.*s, want %s", text, (int)v.len, v.p, want);
}

static void test_decimals(void **state)
{
	struct sl_mysql_column c = mcol(SL_MYSQL_NEWDECIMAL);
	int p = 0, s = 0;

	(void)state;
	sl_buf_init(&vb, 0);
	check_decimal("12345678901234567890123456789012345.123456789012345678901234567890", 65, 30,
		      "12345678901234567890123456789012345123456789012345678901234567890", false);
	check_decimal("-12345678901234567890123456789012345.123456789012345678901234567890", 65, 30,
		      "12345678901234567890123456789012345123456789012345678901234567890", true);
	check_decimal("99999999999999999999999999999999999.999999999999999999999999999999", 65, 30,
		      "99999999999999999999999999999999999999999999999999999999999999999", false);
	check_decimal("0", 65, 30, "0", false);
	check_decimal("-0", 65, 30, "0", false);
	check_decimal("0.000000000000000000000000000001", 65, 30, "1", false);
	check_decimal("-0.000000000000000000000000000001", 65, 30, "1", true);
	check_decimal("1234567890", 10, 0, "1234567890", false);
	check_decimal("-1234567890", 10, 0, "1234567890", true);
	check_decimal("9999999999", 10, 0, "9999999999", false);
	check_decimal("-12.34", 10, 2, "1234", true);
	check_decimal("0.05", 10, 2, "5", false);
	check_decimal("100", 10, 2, "10000", false);
	check_decimal("0.12345", 5, 5, "12345", false);
	check_decimal("-9", 1, 0, "9", true);
	check_decimal("123456789.987654321", 18, 9, "123456789987654321", false);
	check_decimal("1.5", 38, 37, "15000000000000000000000000000000000000", false);
	check_decimal_text("-12.34", 10, 2, "-12.34");
	check_decimal_text("0.05", 10, 2, "0.05");
	check_decimal_text("-0.000000000000000000000000000001", 65, 30, "-0.000000000000000000000000000001");
	check_decimal_text("1234567890", 10, 0, "1234567890");
	check_decimal_text("0", 10, 2, "0.00");

	/* bytes that are no decimal: a 9-digit group above 999999999 */
	c.precision = 10;
	c.scale = 0;
	sl_buf_reset(&vb);
	me_le(&vb, 0x80, 1);
	me_be(&vb, 1000000000, 4);
	BAD(c, ocol(SL_T_DECIMAL, 10, 0), &vb, "bytes that are not a decimal(10,0)");
	/* a partial group above its digits: 2 digits hold at most 99 */
	c.precision = 2;
	sl_buf_reset(&vb);
	me_le(&vb, 0x80 | 100, 1);
	BAD(c, ocol(SL_T_DECIMAL, 2, 0), &vb, "not a decimal");
	assert_int_equal(sl_mysql_decimal_size(65, 30), 30);
	assert_int_equal(sl_mysql_decimal_size(10, 0), 5);
	assert_int_equal(sl_mysql_decimal_size(10, 2), 5);
	c.precision = 10;
	c.scale = 2;
	assert_int_equal(sl_mysql_type_map(&c, &p, &s), SL_T_DECIMAL);
	assert_int_equal(p, 10);
	assert_int_equal(s, 2);
	sl_buf_free(&vb);
}

static void test_floats(void **state)
{
	struct sl_value v;
	float f = 1.5f;
	double d = -2.25;
	uint32_t fb;
	uint64_t db;

	(void)state;
	sl_buf_init(&vb, 0);
	memcpy(&fb, &f, 4);
	memcpy(&db, &d, 8);
	OK(mcol(SL_MYSQL_FLOAT), ocol(SL_T_FLOAT, 0, 0), le_val(fb, 4), &v);
	assert_true(v.kind == SL_V_FLOAT && v.f == 1.5f);
	OK(mcol(SL_MYSQL_FLOAT), ocol(SL_T_DOUBLE, 0, 0), le_val(fb, 4), &v);
	assert_true(v.kind == SL_V_DOUBLE && v.d == 1.5);
	OK(mcol(SL_MYSQL_DOUBLE), ocol(SL_T_DOUBLE, 0, 0), le_val(db, 8), &v);
	assert_true(v.kind == SL_V_DOUBLE && v.d == -2.25);
	d = 1e300;
	memcpy(&db, &d, 8);
	OK(mcol(SL_MYSQL_DOUBLE), ocol(SL_T_DOUBLE, 0, 0), le_val(db, 8), &v);
	assert_true(v.d == 1e300);
	BAD(mcol(SL_MYSQL_DOUBLE), ocol(SL_T_FLOAT, 0, 0), le_val(db, 8), "cannot be written as float");
	sl_buf_free(&vb);
}

static int64_t days(int y, int m, int d)
{
	return sl_days_from_civil(y, m, d);
}

static void check_date(int y, int m, int d, int64_t want_days)
{
	struct sl_value v;

	sl_buf_reset(&vb);
	me_date(&vb, y, m, d);
	OK(mcol(SL_MYSQL_DATE), ocol(SL_T_DATE, 0, 0), &vb, &v);
	assert_int_equal(v.kind, SL_V_DATE);
	assert_int_equal(v.i, want_days);
}

static void check_date_null(int y, int m, int d)
{
	struct sl_value v;

	sl_buf_reset(&vb);
	me_date(&vb, y, m, d);
	OK(mcol(SL_MYSQL_DATE), ocol(SL_T_DATE, 0, 0), &vb, &v);
	assert_int_equal(v.kind, SL_V_NULL);
}

static void test_dates(void **state)
{
	uint64_t zero0, inval0;

	(void)state;
	sl_buf_init(&vb, 0);
	assert_int_equal(days(1970, 1, 1), 0);
	assert_int_equal(days(2000, 3, 1), 11017);
	assert_int_equal(days(1969, 12, 31), -1);
	check_date(2024, 2, 29, 19782);
	check_date(1970, 1, 1, 0);
	check_date(1000, 1, 1, -354285);
	check_date(9999, 12, 31, 2932896);
	check_date(1, 1, 1, -719162);
	check_date(0, 1, 1, -719528);   /* year 0000 is 1 BC, astronomically */
	zero0 = dec.stats.zero_dates;
	inval0 = dec.stats.invalid_dates;
	check_date_null(0, 0, 0);
	assert_int_equal(dec.stats.zero_dates, zero0 + 1);
	check_date_null(2024, 2, 30);
	check_date_null(2023, 2, 29);
	check_date_null(2024, 0, 10);
	check_date_null(2024, 2, 0);
	check_date_null(2024, 13, 1);
	check_date_null(2024, 4, 31);
	assert_int_equal(dec.stats.invalid_dates, inval0 + 6);
	assert_int_equal(dec.stats.zero_dates, zero0 + 1);
	BAD(mcol(SL_MYSQL_DATE), ocol(SL_T_TIMESTAMP, 0, 0), le_val(0, 3), "cannot be written as timestamp");
	sl_buf_free(&vb);
}

static void check_dt2(int y, int m, int d, int hh, int mi, int ss, uint32_t us, int fsp, int64_t want)
{
	struct sl_mysql_column c = mcol(SL_MYSQL_DATETIME2);
	struct sl_value v;

	c.fsp = (uint8_t)fsp;
	sl_buf_reset(&vb);
	me_datetime2(&vb, y, m, d, hh, mi, ss, us, fsp);
	assert_int_equal(vb.len, 5 + (fsp + 1) / 2);
	OK(c, ocol(SL_T_TIMESTAMP, 0, 0), &vb, &v);
	if (want == INT64_MIN) {
		assert_int_equal(v.kind, SL_V_NULL);
		return;
	}
	assert_int_equal(v.kind, SL_V_TIMESTAMP);
	if (v.i != want)
		fail_msg("%04d-%02d-%02d %02d:%02d:%02d.%06u fsp %d: %lld, want %lld", y, m, d, hh, mi, ss, us, fsp,
			 (long long)v.i, (long long)want);
}

static void test_datetimes(void **state)
{
	const int64_t D = INT64_C(86400000000);
	struct sl_mysql_column c;
	struct sl_value v;

	(void)state;
	sl_buf_init(&vb, 0);
	check_dt2(2024, 2, 29, 13, 45, 56, 123456, 6, days(2024, 2, 29) * D + INT64_C(49556123456));
	check_dt2(9999, 12, 31, 23, 59, 59, 999999, 6, days(9999, 12, 31) * D + INT64_C(86399999999));
	check_dt2(1000, 1, 1, 0, 0, 0, 1, 6, days(1000, 1, 1) * D + 1);
	check_dt2(9999, 12, 31, 23, 59, 59, 0, 0, INT64_C(253402300799000000));
	check_dt2(1970, 1, 1, 0, 0, 0, 0, 0, 0);
	check_dt2(2024, 1, 2, 3, 4, 5, 678000, 3, INT64_C(1704164645678000));
	check_dt2(2024, 1, 2, 3, 4, 5, 500000, 1, INT64_C(1704164645500000));
	check_dt2(2024, 1, 2, 3, 4, 5, 123450, 5, INT64_C(1704164645123450));
	check_dt2(2024, 1, 2, 3, 4, 5, 120000, 2, INT64_C(1704164645120000));
	check_dt2(2024, 1, 2, 3, 4, 5, 123400, 4, INT64_C(1704164645123400));
	check_dt2(0, 0, 0, 0, 0, 0, 0, 6, INT64_MIN);     /* zero: null */
	check_dt2(2024, 2, 30, 0, 0, 0, 0, 0, INT64_MIN);  /* invalid: null */
	check_dt2(2024, 0, 10, 0, 0, 0, 0, 0, INT64_MIN);

	/* TIMESTAMP(3): Unix seconds and milliseconds; 0 is the zero timestamp */
	c = mcol(SL_MYSQL_TIMESTAMP2);
	c.fsp = 3;
	sl_buf_reset(&vb);
	me_timestamp2(&vb, 1704164645, 678000, 3);
	OK(c, ocol(SL_T_TIMESTAMPTZ, 0, 0), &vb, &v);
	assert_int_equal(v.kind, SL_V_TIMESTAMP);
	assert_int_equal(v.i, INT64_C(1704164645678000));
	sl_buf_reset(&vb);
	me_timestamp2(&vb, 1, 1000, 3);
	OK(c, ocol(SL_T_TIMESTAMPTZ, 0, 0), &vb, &v);
	assert_int_equal(v.i, 1001000);
	sl_buf_reset(&vb);
	me_timestamp2(&vb, UINT32_MAX, 999000, 3);
	OK(c, ocol(SL_T_TIMESTAMPTZ, 0, 0), &vb, &v);
	assert_int_equal(v.i, INT64_C(4294967295999000));
	sl_buf_reset(&vb);
	me_timestamp2(&vb, 0, 0, 3);
	OK(c, ocol(SL_T_TIMESTAMPTZ, 0, 0), &vb, &v);
	assert_int_equal(v.kind, SL_V_NULL);
	c.fsp = 0;
	sl_buf_reset(&vb);
	me_timestamp2(&vb, 1700000000, 0, 0);
	OK(c, ocol(SL_T_TIMESTAMPTZ, 0, 0), &vb, &v);
	assert_int_equal(v.i, INT64_C(1700000000000000));
	BAD(c, ocol(SL_T_TIMESTAMP, 0, 0), &vb, "cannot be written as timestamp");
	/* a fraction beyond a second */
	c.fsp = 6;
	sl_buf_reset(&vb);
	me_be(&vb, 5, 4);
	me_be(&vb, 1000000, 3);
	BAD(c, ocol(SL_T_TIMESTAMPTZ, 0, 0), &vb, "invalid fraction of a second");
	/* a time of day beyond 23:59:59 in a DATETIME */
	c = mcol(SL_MYSQL_DATETIME2);
	sl_buf_reset(&vb);
	me_datetime2(&vb, 2024, 1, 1, 24, 0, 0, 0, 0);
	BAD(c, ocol(SL_T_TIMESTAMP, 0, 0), &vb, "invalid time of day 24:00:00");

	/* the pre-5.6 formats */
	OK(mcol(SL_MYSQL_DATETIME), ocol(SL_T_TIMESTAMP, 0, 0), le_val(UINT64_C(20240229134556), 8), &v);
	assert_int_equal(v.i, days(2024, 2, 29) * D + INT64_C(49556000000));
	OK(mcol(SL_MYSQL_DATETIME), ocol(SL_T_TIMESTAMP, 0, 0), le_val(0, 8), &v);
	assert_int_equal(v.kind, SL_V_NULL);
	OK(mcol(SL_MYSQL_TIMESTAMP), ocol(SL_T_TIMESTAMPTZ, 0, 0), le_val(1700000000, 4), &v);
	assert_int_equal(v.i, INT64_C(1700000000000000));
	OK(mcol(SL_MYSQL_TIMESTAMP), ocol(SL_T_TIMESTAMPTZ, 0, 0), le_val(0, 4), &v);
	assert_int_equal(v.kind, SL_V_NULL);
	sl_buf_free(&vb);
}

static void check_time2(bool neg, int hh, int mi, int ss, uint32_t us, int fsp)
{
	struct sl_mysql_column c = mcol(SL_MYSQL_TIME2);
	struct sl_value v;
	int64_t want = ((int64_t)hh * 3600 + mi * 60 + ss) * 1000000 + us;

	c.fsp = (uint8_t)fsp;
	sl_buf_reset(&vb);
	me_time2(&vb, neg, hh, mi, ss, us, fsp);
	assert_int_equal(vb.len, 3 + (fsp + 1) / 2);
	OK(c, ocol(SL_T_TIME, 0, 0), &vb, &v);
	assert_int_equal(v.kind, SL_V_TIME);
	if (v.i != (neg ? -want : want))
		fail_msg("%s%02d:%02d:%02d.%06u fsp %d: %lld", neg ? "-" : "", hh, mi, ss, us, fsp, (long long)v.i);
}

static void test_times(void **state)
{
	struct sl_value v;

	(void)state;
	sl_buf_init(&vb, 0);
	for (int fsp = 0; fsp <= 6; fsp++) {
		/* the fraction the precision holds */
		uint32_t us = fsp == 0 ? 0 : fsp <= 2 ? 500000 : fsp <= 4 ? 123400 : 123456;
		check_time2(false, 0, 0, 0, 0, fsp);
		check_time2(false, 838, 59, 59, us, fsp);
		check_time2(true, 838, 59, 59, us, fsp);
		check_time2(false, 25, 0, 1, us, fsp);      /* more than a day */
		check_time2(true, 0, 0, 1, us, fsp);         /* -00:00:01.x */
		check_time2(true, 0, 0, 0, us, fsp);         /* -00:00:00.x */
		check_time2(true, 1, 2, 3, 0, fsp);
		check_time2(false, 12, 34, 56, us, fsp);
	}
	/* MySQL's own table for fsp 2: -00:00:01.10 is 7FFFFE.F6 */
	{
		struct sl_mysql_column c = mcol(SL_MYSQL_TIME2);
		c.fsp = 2;
		sl_buf_reset(&vb);
		me_bytes(&vb, "\x7f\xff\xfe\xf6", 4);
		OK(c, ocol(SL_T_TIME, 0, 0), &vb, &v);
		assert_int_equal(v.i, -1100000);
		sl_buf_reset(&vb);
		me_bytes(&vb, "\x7f\xff\xff\xff", 4);   /* -00:00:00.01 */
		OK(c, ocol(SL_T_TIME, 0, 0), &vb, &v);
		assert_int_equal(v.i, -10000);
		sl_buf_reset(&vb);
		me_bytes(&vb, "\x80\x00\x00\x00", 4);
		OK(c, ocol(SL_T_TIME, 0, 0), &vb, &v);
		assert_int_equal(v.i, 0);
	}
	/* pre-5.6 TIME: [-]HHMMSS as a 3-byte number */
	OK(mcol(SL_MYSQL_TIME), ocol(SL_T_TIME, 0, 0), le_val((uint64_t)-10203 & 0xffffff, 3), &v);
	assert_int_equal(v.i, -INT64_C(3723000000));
	OK(mcol(SL_MYSQL_TIME), ocol(SL_T_TIME, 0, 0), le_val(8385959, 3), &v);
	assert_int_equal(v.i, INT64_C(3020399000000));
	BAD(mcol(SL_MYSQL_TIME), ocol(SL_T_TIME, 0, 0), le_val(16000, 3), "invalid time 1:60:00");
	sl_buf_free(&vb);
}

/* A string value: its length in n bytes, then the bytes. */
static const struct sl_buf *str_val(const void *p, size_t len, int n)
{
	sl_buf_reset(&vb);
	me_le(&vb, len, n);
	me_bytes(&vb, p, len);
	return &vb;
}

#define UTF8MB4 45
#define LATIN1 8
#define BINARY 63

static void check_text(struct sl_mysql_column c, enum sl_type t, const void *in, size_t inlen, int n,
		       const void *want, size_t wantlen)
{
	struct sl_value v;

	OK(c, ocol(t, 0, 0), str_val(in, inlen, n), &v);
	assert_int_equal(v.kind, t == SL_T_BYTES ? SL_V_BYTES : t == SL_T_JSON ? SL_V_JSON : SL_V_STRING);
	if (v.len != wantlen || memcmp(v.p, want, wantlen))
		fail_msg("line: \"%.*s\" (%u bytes), want %zu bytes", (int)v.len, v.p, v.len, wantlen);
}

static void test_strings(void **state)
{
	struct sl_mysql_column c;
	int p = 0, s = 0;

	(void)state;
	sl_buf_init(&vb, 0);
	/* utf8mb4, with an emoji; VARCHAR(300) takes a 2-byte length */
	c = mtext(SL_MYSQL_VARCHAR, UTF8MB4, 1200, 0);
	check_text(c, SL_T_STRING, "h\xc3\xa9llo \xf0\x9f\x98\x80", 11, 2, "h\xc3\xa9llo \xf0\x9f\x98\x80", 11);
	c = mtext(SL_MYSQL_VARCHAR, UTF8MB4, 80, 0);
	check_text(c, SL_T_STRING, "abc", 3, 1, "abc", 3);
	check_text(c, SL_T_STRING, "", 0, 1, "", 0);
	/* latin1 (cp1252) to UTF-8 */
	c = mtext(SL_MYSQL_VARCHAR, LATIN1, 20, 0);
	check_text(c, SL_T_STRING, "caf\xe9", 4, 1, "caf\xc3\xa9", 5);
	check_text(c, SL_T_STRING, "\x80\x81\x9f\xa0\xff", 5, 1, "\xe2\x82\xac\xc2\x81\xc5\xb8\xc2\xa0\xc3\xbf", 11);
	c = mtext(SL_MYSQL_BLOB, 5, 0, 3);   /* MEDIUMTEXT latin1_german1_ci */
	check_text(c, SL_T_STRING, "na\xefve", 5, 3, "na\xc3\xafve", 6);
	/* binary: bytes as they are, BINARY(n) padded back with zeros */
	c = mtext(SL_MYSQL_VARCHAR, BINARY, 10, 0);
	check_text(c, SL_T_BYTES, "\xff\x00", 2, 1, "\xff\x00", 2);
	c = mtext(SL_MYSQL_STRING, BINARY, 4, 0);
	check_text(c, SL_T_BYTES, "\x01\x02\x03", 3, 1, "\x01\x02\x03\x00", 4);
	check_text(c, SL_T_BYTES, "", 0, 1, "\0\0\0\0", 4);
	check_text(c, SL_T_BYTES, "\x01\x02\x03\x04", 4, 1, "\x01\x02\x03\x04", 4);
	c = mtext(SL_MYSQL_BLOB, BINARY, 0, 4);
	check_text(c, SL_T_BYTES, "\x00\xff", 2, 4, "\x00\xff", 2);
	c = mtext(SL_MYSQL_BLOB, BINARY, 0, 1);
	check_text(c, SL_T_BYTES, "x", 1, 1, "x", 1);
	/* CHAR(100) utf8mb4: 400 bytes, so a 2-byte length; trailing spaces
	 * are not in the binlog and not added back */
	c = mtext(SL_MYSQL_STRING, UTF8MB4, 400, 0);
	check_text(c, SL_T_STRING, "wide", 4, 2, "wide", 4);
	/* a text column mapped to bytes (an unsupported charset) keeps its bytes */
	c = mtext(SL_MYSQL_STRING, 3, 10, 0);   /* dec8 */
	assert_int_equal(c.charset->kind, SL_CS_UNSUPPORTED);
	assert_int_equal(sl_mysql_type_map(&c, &p, &s), SL_T_BYTES);
	check_text(c, SL_T_BYTES, "ab\xe9", 3, 1, "ab\xe9", 3);
	BAD(c, ocol(SL_T_STRING, 0, 0), str_val("ab", 2, 1), "cannot be written as string");
	/* iconv charsets: cp1251, ucs2, utf16 (a surrogate pair), sjis */
	c = mtext(SL_MYSQL_VARCHAR, 51, 20, 0);  /* cp1251_general_ci */
	check_text(c, SL_T_STRING, "\xcf\xf0\xe8\xe2\xe5\xf2", 6, 1,
		   "\xd0\x9f\xd1\x80\xd0\xb8\xd0\xb2\xd0\xb5\xd1\x82", 12);
	c = mtext(SL_MYSQL_VARCHAR, 35, 20, 0);  /* ucs2_general_ci */
	check_text(c, SL_T_STRING, "\x00\xe9\x20\xac", 4, 1, "\xc3\xa9\xe2\x82\xac", 5);
	c = mtext(SL_MYSQL_VARCHAR, 54, 20, 0);  /* utf16_general_ci */
	check_text(c, SL_T_STRING, "\xd8\x3d\xde\x00", 4, 1, "\xf0\x9f\x98\x80", 4);
	c = mtext(SL_MYSQL_VARCHAR, 56, 20, 0);  /* utf16le_general_ci */
	check_text(c, SL_T_STRING, "A\x00", 2, 1, "A", 1);
	c = mtext(SL_MYSQL_VARCHAR, 60, 20, 0);  /* utf32_general_ci */
	check_text(c, SL_T_STRING, "\x00\x01\xf6\x00", 4, 1, "\xf0\x9f\x98\x80", 4);
	c = mtext(SL_MYSQL_VARCHAR, 13, 20, 0);  /* sjis_japanese_ci */
	check_text(c, SL_T_STRING, "\x93\xfa\x96\x7b", 4, 1, "\xe6\x97\xa5\xe6\x9c\xac", 6);
	BAD(c, ocol(SL_T_STRING, 0, 0), str_val("\x93", 1, 1), "invalid sjis text: byte 0x93 at offset 0");
	c = mtext(SL_MYSQL_VARCHAR, 35, 20, 0);  /* ucs2: an odd byte count */
	BAD(c, ocol(SL_T_STRING, 0, 0), str_val("\x00\xe9\x20", 3, 1), "invalid ucs2 text");
	/* ascii */
	c = mtext(SL_MYSQL_VARCHAR, 11, 20, 0);
	check_text(c, SL_T_STRING, "plain", 5, 1, "plain", 5);
	BAD(c, ocol(SL_T_STRING, 0, 0), str_val("\xe9", 1, 1), "invalid ascii text: byte 0xe9 at offset 0");
	/* unknown charset: taken as UTF-8, checked */
	c = mtext(SL_MYSQL_VARCHAR, 0, 20, 0);
	assert_null(c.charset);
	check_text(c, SL_T_STRING, "\xc3\xa9", 2, 1, "\xc3\xa9", 2);
	BAD(c, ocol(SL_T_STRING, 0, 0), str_val("caf\xe9", 4, 1), "not UTF-8 (byte 0xe9 at offset 3)");
	BAD(c, ocol(SL_T_STRING, 0, 0), str_val("\xed\xa0\x80", 3, 1), "not UTF-8");     /* a surrogate */
	BAD(c, ocol(SL_T_STRING, 0, 0), str_val("\xc0\xaf", 2, 1), "not UTF-8");         /* overlong */
	c = mtext(SL_MYSQL_STRING, 0, 4, 0);      /* unknown charset mapped to bytes: padded */
	check_text(c, SL_T_BYTES, "\x01", 1, 1, "\x01\0\0\0", 4);
	/* binary charset written as a string: refused */
	c = mtext(SL_MYSQL_BLOB, BINARY, 0, 2);
	BAD(c, ocol(SL_T_STRING, 0, 0), str_val("x", 1, 2), "(blob): cannot be written as string");
	/* MariaDB JSON (a LONGTEXT the catalog marks as JSON) */
	c = mtext(SL_MYSQL_BLOB, 46, 0, 4);  /* utf8mb4_bin */
	c.json = true;
	assert_int_equal(sl_mysql_type_map(&c, &p, &s), SL_T_JSON);
	check_text(c, SL_T_JSON, "{\"a\": 1}", 8, 4, "{\"a\": 1}", 8);
	/* the type map */
	c = mtext(SL_MYSQL_VARCHAR, BINARY, 10, 0);
	assert_int_equal(sl_mysql_type_map(&c, &p, &s), SL_T_BYTES);
	c = mtext(SL_MYSQL_BLOB, LATIN1, 0, 2);
	assert_int_equal(sl_mysql_type_map(&c, &p, &s), SL_T_STRING);
	c = mtext(SL_MYSQL_STRING, 0, 4, 0);
	assert_int_equal(sl_mysql_type_map(&c, &p, &s), SL_T_STRING);
	/* a length past the event */
	{
		struct sl_value v;
		c = mtext(SL_MYSQL_VARCHAR, UTF8MB4, 20, 0);
		sl_buf_reset(&vb);
		me_le(&vb, 10, 1);
		me_bytes(&vb, "abc", 3);
		assert_int_equal(one(c, ocol(SL_T_STRING, 0, 0), &vb, &v), -1);
		assert_non_null(strstr(err, "the image ends inside column \"c\" (varchar(20))"));
	}
	sl_buf_free(&vb);
}

static void test_enum_set_bit(void **state)
{
	static const struct sl_mysql_str ev[] = { { "small", 5 }, { "medium", 6 }, { "caf\xe9", 4 } };
	static const struct sl_mysql_str sv[] = { { "a", 1 }, { "b", 1 }, { "c", 1 }, { "d", 1 } };
	struct sl_mysql_column c;
	struct sl_value v;
	int p = 0, s = 0;

	(void)state;
	sl_buf_init(&vb, 0);
	c = mtext(SL_MYSQL_STRING, LATIN1, 0, 1);
	c.real_type = SL_MYSQL_ENUM;
	c.values = ev;
	c.nvalues = 3;
	assert_int_equal(sl_mysql_type_map(&c, &p, &s), SL_T_STRING);
	OK(c, ocol(SL_T_STRING, 0, 0), le_val(2, 1), &v);
	assert_int_equal(v.len, 6);
	assert_memory_equal(v.p, "medium", 6);
	OK(c, ocol(SL_T_STRING, 0, 0), le_val(3, 1), &v);
	assert_int_equal(v.len, 5);
	assert_memory_equal(v.p, "caf\xc3\xa9", 5);   /* a latin1 value in UTF-8 */
	OK(c, ocol(SL_T_STRING, 0, 0), le_val(0, 1), &v);
	assert_int_equal(v.kind, SL_V_STRING);
	assert_int_equal(v.len, 0);
	BAD(c, ocol(SL_T_STRING, 0, 0), le_val(4, 1), "index 4 past its 3 values");
	OK(c, ocol(SL_T_INT32, 0, 0), le_val(2, 1), &v);
	assert_int_equal(v.i, 2);
	c.pack_len = 2;
	OK(c, ocol(SL_T_STRING, 0, 0), le_val(1, 2), &v);
	assert_memory_equal(v.p, "small", 5);
	/* without the strings: the index */
	c.nvalues = 0;
	c.values = NULL;
	assert_int_equal(sl_mysql_type_map(&c, &p, &s), SL_T_INT32);
	OK(c, ocol(SL_T_INT32, 0, 0), le_val(2, 2), &v);
	assert_int_equal(v.i, 2);
	BAD(c, ocol(SL_T_STRING, 0, 0), le_val(2, 2), "strings are unknown");

	/* CHARACTER SET binary: UTF-8 up to U+FFFF kept, other bytes '?' */
	{
		static const struct sl_mysql_str bv[] = { { "caf\xc3\xa9", 5 }, { "\xe9", 1 }, { "A\xe2\x82" "B", 4 },
							  { "\xf0\x9f\x98\x80", 4 }, { "\xed\xa0\x80", 3 } };
		c = mtext(SL_MYSQL_STRING, BINARY, 0, 1);
		c.real_type = SL_MYSQL_ENUM;
		c.values = bv;
		c.nvalues = 5;
		assert_int_equal(sl_mysql_type_map(&c, &p, &s), SL_T_STRING);
		OK(c, ocol(SL_T_STRING, 0, 0), le_val(1, 1), &v);
		assert_int_equal(v.len, 5);
		assert_memory_equal(v.p, "caf\xc3\xa9", 5);
		OK(c, ocol(SL_T_STRING, 0, 0), le_val(2, 1), &v);
		assert_int_equal(v.len, 1);
		assert_memory_equal(v.p, "?", 1);
		OK(c, ocol(SL_T_STRING, 0, 0), le_val(3, 1), &v);
		assert_int_equal(v.len, 4);
		assert_memory_equal(v.p, "A??B", 4);
		OK(c, ocol(SL_T_STRING, 0, 0), le_val(4, 1), &v);   /* past utf8mb3: one '?' a byte */
		assert_int_equal(v.len, 4);
		assert_memory_equal(v.p, "????", 4);
		OK(c, ocol(SL_T_STRING, 0, 0), le_val(5, 1), &v);   /* a surrogate is not UTF-8 */
		assert_int_equal(v.len, 3);
		assert_memory_equal(v.p, "???", 3);
		c.real_type = SL_MYSQL_SET;
		OK(c, ocol(SL_T_STRING, 0, 0), le_val(0x7, 1), &v);
		assert_int_equal(v.len, 12);
		assert_memory_equal(v.p, "caf\xc3\xa9,?,A??B", 12);
	}

	c = mtext(SL_MYSQL_STRING, UTF8MB4, 0, 1);
	c.real_type = SL_MYSQL_SET;
	c.values = sv;
	c.nvalues = 4;
	OK(c, ocol(SL_T_STRING, 0, 0), le_val(0x5, 1), &v);
	assert_int_equal(v.len, 3);
	assert_memory_equal(v.p, "a,c", 3);
	OK(c, ocol(SL_T_STRING, 0, 0), le_val(0xf, 1), &v);
	assert_memory_equal(v.p, "a,b,c,d", 7);
	OK(c, ocol(SL_T_STRING, 0, 0), le_val(0, 1), &v);
	assert_int_equal(v.len, 0);
	BAD(c, ocol(SL_T_STRING, 0, 0), le_val(0x10, 1), "member bits 0x10 past its 4 values");
	c.nvalues = 0;
	c.values = NULL;
	assert_int_equal(sl_mysql_type_map(&c, &p, &s), SL_T_INT64);
	OK(c, ocol(SL_T_INT64, 0, 0), le_val(0xa, 1), &v);
	assert_int_equal(v.i, 0xa);
	c.pack_len = 8;
	assert_int_equal(sl_mysql_type_map(&c, &p, &s), SL_T_UINT64);
	OK(c, ocol(SL_T_UINT64, 0, 0), le_val(UINT64_MAX, 8), &v);
	assert_true(v.u == UINT64_MAX);

	c = mcol(SL_MYSQL_BIT);
	c.nbits = 1;
	assert_int_equal(sl_mysql_type_map(&c, &p, &s), SL_T_BOOL);
	OK(c, ocol(SL_T_BOOL, 0, 0), le_val(1, 1), &v);
	assert_true(v.kind == SL_V_BOOL && v.b);
	OK(c, ocol(SL_T_BOOL, 0, 0), le_val(0, 1), &v);
	assert_true(v.kind == SL_V_BOOL && !v.b);
	c.nbits = 64;
	assert_int_equal(sl_mysql_type_map(&c, &p, &s), SL_T_BYTES);
	OK(c, ocol(SL_T_BYTES, 0, 0), le_val(UINT64_MAX, 8), &v);
	assert_int_equal(v.len, 8);
	assert_memory_equal(v.p, "\xff\xff\xff\xff\xff\xff\xff\xff", 8);
	OK(c, ocol(SL_T_UINT64, 0, 0), le_val(UINT64_MAX, 8), &v);
	assert_true(v.u == UINT64_MAX);
	BAD(c, ocol(SL_T_BOOL, 0, 0), le_val(1, 8), "cannot be written as bool");
	c.nbits = 10;
	sl_buf_reset(&vb);
	me_be(&vb, 0x201, 2);
	OK(c, ocol(SL_T_BYTES, 0, 0), &vb, &v);
	assert_int_equal(v.len, 2);
	assert_memory_equal(v.p, "\x02\x01", 2);
	OK(c, ocol(SL_T_INT64, 0, 0), &vb, &v);
	assert_int_equal(v.i, 0x201);
	sl_buf_free(&vb);
}

static void test_json_geometry(void **state)
{
	static const char *keys[] = { "a", "b" };
	struct sl_mysql_column c;
	struct sl_value v;
	struct sl_buf doc;
	struct me_json *vals[2], *arr[2];
	int p = 0, s = 0;

	(void)state;
	sl_buf_init(&vb, 0);
	sl_buf_init(&doc, 0);
	arr[0] = mj_literal(1);
	arr[1] = mj_literal(0);
	vals[0] = mj_int(0x05, 1);
	vals[1] = mj_array(false, 2, arr);
	mj_doc(&doc, mj_object(false, 2, keys, vals));
	c = mcol(SL_MYSQL_JSON);
	c.pack_len = 4;
	assert_int_equal(sl_mysql_type_map(&c, &p, &s), SL_T_JSON);
	OK(c, ocol(SL_T_JSON, 0, 0), str_val(doc.data, doc.len, 4), &v);
	assert_int_equal(v.kind, SL_V_JSON);
	assert_int_equal(v.len, strlen("{\"a\": 1, \"b\": [true, null]}"));
	assert_memory_equal(v.p, "{\"a\": 1, \"b\": [true, null]}", v.len);
	OK(c, ocol(SL_T_JSON, 0, 0), str_val("", 0, 4), &v);
	assert_int_equal(v.len, 4);
	assert_memory_equal(v.p, "null", 4);
	BAD(c, ocol(SL_T_JSON, 0, 0), str_val("\x0c\x05" "ab", 4, 4), "malformed binary JSON");

	/* GEOMETRY: the WKB after the 4-byte SRID */
	c = mcol(SL_MYSQL_GEOMETRY);
	c.pack_len = 4;
	assert_int_equal(sl_mysql_type_map(&c, &p, &s), SL_T_BYTES);
	sl_buf_reset(&doc);
	me_le(&doc, 4326, 4);
	me_bytes(&doc, "\x01\x01\x00\x00\x00", 5);
	me_le(&doc, 0x3ff0000000000000, 8);
	me_le(&doc, 0x4000000000000000, 8);
	OK(c, ocol(SL_T_BYTES, 0, 0), str_val(doc.data, doc.len, 4), &v);
	assert_int_equal(v.len, 21);
	assert_memory_equal(v.p, doc.data + 4, 21);
	BAD(c, ocol(SL_T_BYTES, 0, 0), str_val("\0\0\0", 3, 4), "too short for the 4-byte SRID");
	sl_buf_free(&doc);
	sl_buf_free(&vb);
}

/* A table of three columns: id INT, name VARCHAR(20) utf8mb4, qty BIGINT
 * UNSIGNED. */
static void three(struct sl_mysql_column *mc, struct sl_column *oc, struct sl_binlog_table_map *tm)
{
	mc[0] = mcol(SL_MYSQL_LONG);
	mc[0].nullable = false;
	mc[1] = mtext(SL_MYSQL_VARCHAR, UTF8MB4, 80, 0);
	mc[2] = uns(mcol(SL_MYSQL_LONGLONG));
	oc[0] = ocol(SL_T_INT32, 0, 0);
	oc[1] = ocol(SL_T_STRING, 0, 0);
	oc[2] = ocol(SL_T_UINT64, 0, 0);
	memset(tm, 0, sizeof *tm);
	tm->table_id = 18;
	tm->db = "shop";
	tm->table = "t3";
	tm->ncols = 3;
	tm->cols = mc;
}

static void test_images(void **state)
{
	struct sl_mysql_column mc[3];
	struct sl_column oc[3];
	struct sl_binlog_table_map tm;
	struct sl_binlog_rows rows;
	struct sl_value before[3], after[3];
	static const unsigned char all = 0x07, key = 0x01, name = 0x02, ends = 0x05;

	(void)state;
	three(mc, oc, &tm);
	/* two WRITE rows in one event: (1, 'one', NULL), (2, NULL, 18446744073709551615) */
	sl_buf_reset(&row);
	me_le(&row, 0x04, 1); me_le(&row, 1, 4); me_le(&row, 3, 1); me_bytes(&row, "one", 3);
	me_le(&row, 0x02, 1); me_le(&row, 2, 4); me_le(&row, UINT64_MAX, 8);
	memset(&rows, 0, sizeof rows);
	rows.op = SL_BL_ROWS_WRITE;
	rows.table_id = 18;
	rows.ncols = 3;
	rows.present = &all;
	rows.rows = (const unsigned char *)row.data;
	rows.end = rows.rows + row.len;
	{
		/* counted without decoding, from the table map alone; a
		 * truncated event cannot be counted */
		uint64_t n = 0;
		struct sl_binlog_rows cut = rows;
		assert_int_equal(sl_mysql_rows_count(&rows, &tm, &n, err, sizeof err), 0);
		assert_int_equal(n, 2);
		assert_ptr_equal(rows.rows, row.data);
		cut.end--;
		assert_int_equal(sl_mysql_rows_count(&cut, &tm, &n, err, sizeof err), -1);
		assert_non_null(strstr(err, "\"shop\".\"t3\": row 2 cannot be sized"));
	}
	assert_int_equal(sl_mysql_rows_next(&dec, &rows, &tm, oc, before, after, err, sizeof err), 1);
	assert_int_equal(after[0].i, 1);
	assert_int_equal(after[1].kind, SL_V_STRING);
	assert_memory_equal(after[1].p, "one", 3);
	assert_int_equal(after[2].kind, SL_V_NULL);
	assert_int_equal(sl_mysql_rows_next(&dec, &rows, &tm, oc, before, after, err, sizeof err), 1);
	assert_int_equal(after[0].i, 2);
	assert_int_equal(after[1].kind, SL_V_NULL);
	assert_true(after[2].u == UINT64_MAX);
	assert_int_equal(sl_mysql_rows_next(&dec, &rows, &tm, oc, before, after, err, sizeof err), 0);

	/* UPDATE with minimal images: the key before, the changed column after */
	sl_buf_reset(&row);
	me_le(&row, 0x00, 1); me_le(&row, 7, 4);
	me_le(&row, 0x00, 1); me_le(&row, 5, 1); me_bytes(&row, "fresh", 5);
	rows.op = SL_BL_ROWS_UPDATE;
	rows.present = &key;
	rows.present_after = &name;
	rows.rows = (const unsigned char *)row.data;
	rows.end = rows.rows + row.len;
	{
		uint64_t n = 0;
		assert_int_equal(sl_mysql_rows_count(&rows, &tm, &n, err, sizeof err), 0);
		assert_int_equal(n, 1);
	}
	assert_int_equal(sl_mysql_rows_next(&dec, &rows, &tm, oc, before, after, err, sizeof err), 1);
	assert_int_equal(before[0].kind, SL_V_INT);
	assert_int_equal(before[0].i, 7);
	assert_int_equal(before[1].kind, SL_V_UNCHANGED);
	assert_int_equal(before[2].kind, SL_V_UNCHANGED);
	assert_int_equal(after[0].kind, SL_V_UNCHANGED);
	assert_int_equal(after[1].kind, SL_V_STRING);
	assert_memory_equal(after[1].p, "fresh", 5);
	assert_int_equal(after[2].kind, SL_V_UNCHANGED);
	assert_int_equal(sl_mysql_rows_next(&dec, &rows, &tm, oc, before, after, err, sizeof err), 0);

	/* UPDATE with full images, values in both scratch buffers (latin1) */
	mc[1] = mtext(SL_MYSQL_VARCHAR, LATIN1, 80, 0);
	sl_buf_reset(&row);
	me_le(&row, 0x04, 1); me_le(&row, 7, 4); me_le(&row, 3, 1); me_bytes(&row, "\xe0\xe9\xee", 3);
	me_le(&row, 0x00, 1); me_le(&row, 7, 4); me_le(&row, 1, 1); me_bytes(&row, "\xfc", 1); me_le(&row, 9, 8);
	rows.present = &all;
	rows.present_after = &all;
	rows.rows = (const unsigned char *)row.data;
	rows.end = rows.rows + row.len;
	assert_int_equal(sl_mysql_rows_next(&dec, &rows, &tm, oc, before, after, err, sizeof err), 1);
	assert_int_equal(before[1].len, 6);
	assert_memory_equal(before[1].p, "\xc3\xa0\xc3\xa9\xc3\xae", 6);
	assert_int_equal(before[2].kind, SL_V_NULL);
	assert_int_equal(after[1].len, 2);
	assert_memory_equal(after[1].p, "\xc3\xbc", 2);
	assert_int_equal(after[2].u, 9);

	/* DELETE with the ends present: the null bitmap covers present columns only */
	mc[1] = mtext(SL_MYSQL_VARCHAR, UTF8MB4, 80, 0);
	sl_buf_reset(&row);
	me_le(&row, 0x02, 1); me_le(&row, 3, 4);
	rows.op = SL_BL_ROWS_DELETE;
	rows.present = &ends;
	rows.present_after = NULL;
	rows.rows = (const unsigned char *)row.data;
	rows.end = rows.rows + row.len;
	assert_int_equal(sl_mysql_rows_next(&dec, &rows, &tm, oc, before, after, err, sizeof err), 1);
	assert_int_equal(before[0].i, 3);
	assert_int_equal(before[1].kind, SL_V_UNCHANGED);
	assert_int_equal(before[2].kind, SL_V_NULL);

	/* a row cut short, a table map that does not match */
	sl_buf_reset(&row);
	me_le(&row, 0x00, 1); me_le(&row, 3, 2);
	rows.rows = (const unsigned char *)row.data;
	rows.end = rows.rows + row.len;
	assert_int_equal(sl_mysql_rows_next(&dec, &rows, &tm, oc, before, after, err, sizeof err), -1);
	assert_non_null(strstr(err, "the image ends inside column \"c\" (int)"));
	rows.end = rows.rows;
	assert_int_equal(sl_mysql_rows_next(&dec, &rows, &tm, oc, before, after, err, sizeof err), 0);
	rows.end = rows.rows + row.len;
	rows.table_id = 19;
	assert_int_equal(sl_mysql_rows_next(&dec, &rows, &tm, oc, before, after, err, sizeof err), -1);
	assert_non_null(strstr(err, "does not match the table map"));
}

/* A map whose last columns are hidden (MariaDB's long unique hashes,
 * tm.nhidden): their values are stepped over, never decoded, and the
 * caller's arrays need no room for them. */
static void test_hidden_columns(void **state)
{
	struct sl_mysql_column mc[3];
	struct sl_column oc[3];
	struct sl_binlog_table_map tm;
	struct sl_binlog_rows rows;
	struct sl_value before[3], after[3];
	static const unsigned char all = 0x07;
	uint64_t n = 0;

	(void)state;
	three(mc, oc, &tm);
	mc[2] = mcol(SL_MYSQL_LONGLONG);
	mc[2].is_unsigned = -1;
	tm.nhidden = 1;
	/* UPDATE (1, 'one', hash 7) to (1, NULL, hash NULL); then a WRITE
	 * of (2, 'two', hash 8) */
	sl_buf_reset(&row);
	me_le(&row, 0x00, 1); me_le(&row, 1, 4); me_le(&row, 3, 1); me_bytes(&row, "one", 3); me_le(&row, 7, 8);
	me_le(&row, 0x06, 1); me_le(&row, 1, 4);
	memset(&rows, 0, sizeof rows);
	rows.op = SL_BL_ROWS_UPDATE;
	rows.table_id = 18;
	rows.ncols = 3;
	rows.present = rows.present_after = &all;
	rows.rows = (const unsigned char *)row.data;
	rows.end = rows.rows + row.len;
	assert_int_equal(sl_mysql_rows_count(&rows, &tm, &n, err, sizeof err), 0);
	assert_int_equal(n, 1);
	before[2] = after[2] = (struct sl_value){ .kind = SL_V_INT, .i = 42 };
	assert_int_equal(sl_mysql_rows_next(&dec, &rows, &tm, oc, before, after, err, sizeof err), 1);
	assert_int_equal(before[0].i, 1);
	assert_int_equal(before[1].kind, SL_V_STRING);
	assert_memory_equal(before[1].p, "one", 3);
	assert_int_equal(after[0].i, 1);
	assert_int_equal(after[1].kind, SL_V_NULL);
	assert_int_equal(before[2].i, 42);   /* never written */
	assert_int_equal(after[2].i, 42);
	assert_int_equal(sl_mysql_rows_next(&dec, &rows, &tm, oc, before, after, err, sizeof err), 0);

	sl_buf_reset(&row);
	me_le(&row, 0x00, 1); me_le(&row, 2, 4); me_le(&row, 3, 1); me_bytes(&row, "two", 3); me_le(&row, 8, 8);
	rows.op = SL_BL_ROWS_WRITE;
	rows.rows = (const unsigned char *)row.data;
	rows.end = rows.rows + row.len;
	assert_int_equal(sl_mysql_rows_next(&dec, &rows, &tm, oc, before, after, err, sizeof err), 1);
	assert_int_equal(after[0].i, 2);
	assert_memory_equal(after[1].p, "two", 3);
	assert_int_equal(after[2].i, 42);
	assert_int_equal(sl_mysql_rows_next(&dec, &rows, &tm, oc, before, after, err, sizeof err), 0);

	/* a hidden value cut short is a malformed event */
	rows.rows = (const unsigned char *)row.data;
	rows.end = rows.rows + row.len - 1;
	assert_int_equal(sl_mysql_rows_next(&dec, &rows, &tm, oc, before, after, err, sizeof err), -1);
	assert_non_null(strstr(err, "hidden column 3"));
}

/* A whole MySQL-style event: V2 WRITE and UPDATE through the framing. */
static void test_v2_events(void **state)
{
	struct sl_mysql_column mc[3];
	struct sl_column oc[3];
	struct sl_binlog_table_map tm;
	struct sl_binlog_reader r;
	struct sl_binlog_event ev;
	struct sl_binlog_rows rows;
	struct sl_value before[3], after[3];
	struct sl_buf fde, body, e;

	(void)state;
	three(mc, oc, &tm);
	sl_buf_init(&fde, 0);
	sl_buf_init(&body, 0);
	sl_buf_init(&e, 0);
	sl_binlog_reader_init(&r, SL_BL_CHECKSUM_OFF, "binlog.000001");
	me_fde_event(&fde, false, true);
	assert_int_equal(sl_binlog_decode(&r, (const unsigned char *)fde.data, fde.len, &ev, err, sizeof err), 0);
	/* V2 UPDATE: table id, flags, extra length 2 (none), 3 columns, two bitmaps */
	me_le(&body, 18, 6); me_le(&body, 1, 2); me_le(&body, 2, 2); me_packed(&body, 3);
	me_le(&body, 0x07, 1); me_le(&body, 0x07, 1);
	me_le(&body, 0x00, 1); me_le(&body, 1, 4); me_le(&body, 1, 1); me_bytes(&body, "a", 1); me_le(&body, 5, 8);
	me_le(&body, 0x00, 1); me_le(&body, 1, 4); me_le(&body, 1, 1); me_bytes(&body, "b", 1); me_le(&body, 6, 8);
	me_event(&e, SL_BL_UPDATE_ROWS_V2, 1700000000, 1, 500, 0, body.data, body.len, true);
	assert_int_equal(sl_binlog_decode(&r, (const unsigned char *)e.data, e.len, &ev, err, sizeof err), 0);
	assert_int_equal(sl_binlog_rows_parse(&r, &ev, &rows, err, sizeof err), 0);
	assert_int_equal(sl_mysql_rows_next(&dec, &rows, &tm, oc, before, after, err, sizeof err), 1);
	assert_memory_equal(before[1].p, "a", 1);
	assert_int_equal(before[2].u, 5);
	assert_memory_equal(after[1].p, "b", 1);
	assert_int_equal(after[2].u, 6);
	assert_int_equal(sl_mysql_rows_next(&dec, &rows, &tm, oc, before, after, err, sizeof err), 0);
	sl_buf_free(&fde);
	sl_buf_free(&body);
	sl_buf_free(&e);
}

/* Once the buffers have grown, decoding a row allocates nothing: the
 * scratch buffers keep their memory. */
static void test_no_allocation_per_row(void **state)
{
	struct sl_mysql_column mc[3];
	struct sl_column oc[3];
	struct sl_binlog_table_map tm;
	struct sl_binlog_rows rows;
	struct sl_value before[3], after[3];
	static const unsigned char all = 0x07;
	char *d0, *d1;

	(void)state;
	three(mc, oc, &tm);
	mc[1] = mtext(SL_MYSQL_VARCHAR, 51, 80, 0);  /* cp1251, through iconv */
	sl_buf_reset(&row);
	me_le(&row, 0x00, 1); me_le(&row, 1, 4); me_le(&row, 6, 1); me_bytes(&row, "\xcf\xf0\xe8\xe2\xe5\xf2", 6);
	me_le(&row, 1, 8);
	me_le(&row, 0x00, 1); me_le(&row, 1, 4); me_le(&row, 3, 1); me_bytes(&row, "\xcf\xf0\xe8", 3);
	me_le(&row, 2, 8);
	memset(&rows, 0, sizeof rows);
	rows.op = SL_BL_ROWS_UPDATE;
	rows.table_id = 18;
	rows.ncols = 3;
	rows.present = rows.present_after = &all;
	rows.rows = (const unsigned char *)row.data;
	rows.end = rows.rows + row.len;
	assert_int_equal(sl_mysql_rows_next(&dec, &rows, &tm, oc, before, after, err, sizeof err), 1);
	d0 = dec.scratch[0].data;
	d1 = dec.scratch[1].data;
	for (int i = 0; i < 10000; i++) {
		rows.rows = (const unsigned char *)row.data;
		assert_int_equal(sl_mysql_rows_next(&dec, &rows, &tm, oc, before, after, err, sizeof err), 1);
	}
	assert_ptr_equal(dec.scratch[0].data, d0);
	assert_ptr_equal(dec.scratch[1].data, d1);
	assert_int_equal(after[1].len, 6);
	assert_memory_equal(after[1].p, "\xd0\x9f\xd1\x80\xd0\xb8", 6);
}

static void test_type_names_and_charsets(void **state)
{
	struct sl_mysql_column c;
	char b[48];
	int p = 0, s = 0;

	(void)state;
	c = uns(mcol(SL_MYSQL_LONGLONG));
	assert_string_equal(sl_mysql_type_name(&c, b, sizeof b), "bigint unsigned");
	c = mcol(SL_MYSQL_NEWDECIMAL);
	c.precision = 65;
	c.scale = 30;
	assert_string_equal(sl_mysql_type_name(&c, b, sizeof b), "decimal(65,30)");
	c = mcol(SL_MYSQL_DATETIME2);
	c.fsp = 6;
	assert_string_equal(sl_mysql_type_name(&c, b, sizeof b), "datetime(6)");
	c.fsp = 0;
	assert_string_equal(sl_mysql_type_name(&c, b, sizeof b), "datetime");
	c = mtext(SL_MYSQL_BLOB, BINARY, 0, 3);
	assert_string_equal(sl_mysql_type_name(&c, b, sizeof b), "mediumblob");
	c = mtext(SL_MYSQL_BLOB, UTF8MB4, 0, 2);
	assert_string_equal(sl_mysql_type_name(&c, b, sizeof b), "text");
	c = mtext(SL_MYSQL_STRING, BINARY, 16, 0);
	assert_string_equal(sl_mysql_type_name(&c, b, sizeof b), "binary(16)");
	/* the rest of the type map */
	assert_int_equal(sl_mysql_type_map(&(struct sl_mysql_column){ .real_type = SL_MYSQL_FLOAT }, &p, &s), SL_T_FLOAT);
	assert_int_equal(sl_mysql_type_map(&(struct sl_mysql_column){ .real_type = SL_MYSQL_DOUBLE }, &p, &s), SL_T_DOUBLE);
	assert_int_equal(sl_mysql_type_map(&(struct sl_mysql_column){ .real_type = SL_MYSQL_DATE }, &p, &s), SL_T_DATE);
	assert_int_equal(sl_mysql_type_map(&(struct sl_mysql_column){ .real_type = SL_MYSQL_TIME2 }, &p, &s), SL_T_TIME);
	assert_int_equal(sl_mysql_type_map(&(struct sl_mysql_column){ .real_type = SL_MYSQL_DATETIME2 }, &p, &s),
			 SL_T_TIMESTAMP);
	assert_int_equal(sl_mysql_type_map(&(struct sl_mysql_column){ .real_type = SL_MYSQL_TIMESTAMP2 }, &p, &s),
			 SL_T_TIMESTAMPTZ);
	assert_int_equal(sl_mysql_type_map(&(struct sl_mysql_column){ .real_type = SL_MYSQL_TIMESTAMP }, &p, &s),
			 SL_T_TIMESTAMPTZ);
	assert_int_equal(sl_mysql_type_map(&(struct sl_mysql_column){ .real_type = SL_MYSQL_DATETIME }, &p, &s),
			 SL_T_TIMESTAMP);
	assert_int_equal(sl_mysql_type_map(&(struct sl_mysql_column){ .real_type = SL_MYSQL_TIME }, &p, &s), SL_T_TIME);
	assert_int_equal(sl_mysql_type_map(&(struct sl_mysql_column){ .real_type = SL_MYSQL_NULL }, &p, &s), SL_T_STRING);
	/* charsets by collation and name */
	assert_string_equal(sl_mysql_charset_of_collation(45)->name, "utf8mb4");
	assert_string_equal(sl_mysql_charset_of_collation(33)->name, "utf8mb3");
	assert_string_equal(sl_mysql_charset_of_collation(255)->name, "utf8mb4");   /* MySQL 8 0900_ai_ci */
	assert_string_equal(sl_mysql_charset_of_collation(323)->name, "utf8mb4");
	assert_string_equal(sl_mysql_charset_of_collation(2304)->name, "utf8mb4");  /* MariaDB uca1400 */
	assert_string_equal(sl_mysql_charset_of_collation(248)->name, "gb18030");
	assert_string_equal(sl_mysql_charset_of_collation(63)->name, "binary");
	assert_string_equal(sl_mysql_charset_of_collation(8)->name, "latin1");
	assert_string_equal(sl_mysql_charset_of_collation(94)->name, "latin1");
	assert_null(sl_mysql_charset_of_collation(0));
	assert_null(sl_mysql_charset_of_collation(17));
	assert_null(sl_mysql_charset_of_collation(5000));
	assert_string_equal(sl_mysql_charset_by_name("utf8")->name, "utf8mb3");
	assert_string_equal(sl_mysql_charset_by_name("latin1")->name, "latin1");
	assert_null(sl_mysql_charset_by_name("klingon"));
	assert_true(sl_utf8_valid((const unsigned char *)"\xf4\x8f\xbf\xbf", 4, NULL));
	assert_false(sl_utf8_valid((const unsigned char *)"\xf4\x90\x80\x80", 4, NULL));
	assert_false(sl_utf8_valid((const unsigned char *)"\xe2\x82", 2, NULL));
}

/* MariaDB's UUID, INET4, INET6: from the text a SELECT returns to the
 * binary form the binlog holds, and from that to the one value. */
static void test_fixed_binary_types(void **state)
{
	static const unsigned char u[16] = { 0x6c, 0xcd, 0x78, 0x0c, 0xba, 0xba, 0x10, 0x26,
					     0x95, 0x64, 0x5b, 0x8c, 0x65, 0x60, 0x24, 0xdb };
	static const struct { uint8_t fbt; const char *text; } addrs[] = {
		{ SL_MYSQL_FBT_INET4, "192.168.0.1" }, { SL_MYSQL_FBT_INET4, "0.0.0.0" },
		{ SL_MYSQL_FBT_INET6, "::1" }, { SL_MYSQL_FBT_INET6, "2001:db8::ff00:42:8329" },
		{ SL_MYSQL_FBT_INET6, "::ffff:1.2.3.4" }, { SL_MYSQL_FBT_INET6, "fe80::1:0:0:0" },
	};
	unsigned char mem[16];
	struct sl_buf sc;
	struct sl_value v;

	(void)state;
	sl_buf_init(&sc, 0);
	assert_int_equal(sl_mysql_fbt_parse(SL_MYSQL_FBT_UUID, "6ccd780c-baba-1026-9564-5b8c656024db", 36, mem), 0);
	assert_memory_equal(mem, u, 16);
	assert_int_equal(sl_mysql_fbt_value(SL_MYSQL_FBT_UUID, mem, &sc, &v), 0);
	assert_int_equal(v.kind, SL_V_UUID);
	assert_int_equal(v.len, 16);
	assert_memory_equal(sc.data + (uintptr_t)v.p, u, 16);
	assert_int_equal(sl_mysql_fbt_parse(SL_MYSQL_FBT_UUID, "6ccd780c", 8, mem), -1);
	for (size_t i = 0; i < sizeof addrs / sizeof addrs[0]; i++) {
		sl_buf_reset(&sc);
		assert_int_equal(sl_mysql_fbt_parse(addrs[i].fbt, addrs[i].text, strlen(addrs[i].text), mem), 0);
		assert_int_equal(sl_mysql_fbt_value(addrs[i].fbt, mem, &sc, &v), 0);
		assert_int_equal(v.kind, SL_V_STRING);
		assert_int_equal(v.len, strlen(addrs[i].text));
		assert_memory_equal(sc.data + (uintptr_t)v.p, addrs[i].text, v.len);
	}
	assert_int_equal(sl_mysql_fbt_parse(SL_MYSQL_FBT_INET4, "::1", 3, mem), -1);
	assert_int_equal(sl_mysql_fbt_len(SL_MYSQL_FBT_INET4), 4);
	assert_int_equal(sl_mysql_fbt_len(SL_MYSQL_FBT_UUID), 16);
	sl_buf_free(&sc);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_integers),
		cmocka_unit_test(test_fixed_binary_types),
		cmocka_unit_test(test_decimals),
		cmocka_unit_test(test_floats),
		cmocka_unit_test(test_dates),
		cmocka_unit_test(test_datetimes),
		cmocka_unit_test(test_times),
		cmocka_unit_test(test_strings),
		cmocka_unit_test(test_enum_set_bit),
		cmocka_unit_test(test_json_geometry),
		cmocka_unit_test(test_images),
		cmocka_unit_test(test_hidden_columns),
		cmocka_unit_test(test_v2_events),
		cmocka_unit_test(test_no_allocation_per_row),
		cmocka_unit_test(test_type_names_and_charsets),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
