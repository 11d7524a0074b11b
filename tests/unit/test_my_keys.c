/*
 * tests/unit/test_my_keys.c: the key texts of the MySQL source's backfill
 * while streaming (sources/mysql/my_backfill.c): the token of each key
 * column's value as the binary protocol gives it, the key columns' order,
 * and the SQL condition "key after a key text" built from a key text,
 * with the malformed texts it refuses; and the zero position's round trip
 * through the checkpoint's text.  No server needed.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "common/buf.h"
#include "sources/mysql/my_internal.h"

static struct sl_my_col col_of(const char *name, uint8_t real_type, const char *charset, int8_t is_unsigned)
{
	struct sl_my_col c;

	memset(&c, 0, sizeof c);
	c.name = (char *)name;
	c.mc.type = real_type;
	c.mc.real_type = real_type;
	c.mc.is_unsigned = is_unsigned;
	c.mc.charset = charset ? sl_mysql_charset_by_name(charset) : NULL;
	return c;
}

/* The token of one value: b's buffer and length as the fetch leaves them. */
static const char *token(struct sl_buf *out, const struct sl_my_col *c, void *buf, unsigned long len, bool uns,
			 const uint64_t *en)
{
	MYSQL_BIND b, e;
	my_bool is_null = 0;

	memset(&b, 0, sizeof b);
	memset(&e, 0, sizeof e);
	b.buffer = buf;
	b.length = &len;
	b.is_null = &is_null;
	b.is_unsigned = uns;
	e.buffer = (void *)en;
	e.is_unsigned = true;
	sl_buf_reset(out);
	sl_my_key_token(out, c, &b, en ? &e : NULL);
	assert_false(sl_buf_failed(out));
	return out->data ? out->data : "";
}

static void test_tokens(void **state)
{
	struct sl_buf b;
	struct sl_my_col c;
	int64_t i;
	uint64_t u;
	float f;
	double d;
	MYSQL_TIME t;
	unsigned char bytes[] = { 0x00, 0x41, 0xe9, 0xff };
	unsigned char bits[] = { 0x01, 0x02 };
	uint64_t idx = 3;

	(void)state;
	sl_buf_init(&b, 0);
	c = col_of("k", SL_MYSQL_LONGLONG, NULL, 0);
	i = -42;
	assert_string_equal(token(&b, &c, &i, 8, false, NULL), "-42");
	c = col_of("k", SL_MYSQL_LONGLONG, NULL, 1);
	u = UINT64_MAX;
	assert_string_equal(token(&b, &c, &u, 8, true, NULL), "18446744073709551615");
	c = col_of("k", SL_MYSQL_NEWDECIMAL, NULL, 0);
	assert_string_equal(token(&b, &c, "-12.50", 6, false, NULL), "-12.50");
	c = col_of("k", SL_MYSQL_FLOAT, NULL, 0);
	f = 0.1f;   /* 0.100000001490116119384765625 exactly */
	assert_string_equal(token(&b, &c, &f, 4, false, NULL), "1.00000001490116119e-01");
	c = col_of("k", SL_MYSQL_DOUBLE, NULL, 0);
	d = -2.5;
	assert_string_equal(token(&b, &c, &d, 8, false, NULL), "-2.50000000000000000e+00");
	memset(&t, 0, sizeof t);
	t.year = 2024;
	t.month = 2;
	t.day = 29;
	t.hour = 23;
	t.minute = 5;
	t.second = 9;
	t.second_part = 12;
	c = col_of("k", SL_MYSQL_DATE, NULL, 0);
	assert_string_equal(token(&b, &c, &t, sizeof t, false, NULL), "2024-02-29");
	c = col_of("k", SL_MYSQL_DATETIME2, NULL, 0);
	assert_string_equal(token(&b, &c, &t, sizeof t, false, NULL), "2024-02-29 23:05:09.000012");
	c = col_of("k", SL_MYSQL_TIMESTAMP2, NULL, 0);
	assert_string_equal(token(&b, &c, &t, sizeof t, false, NULL), "2024-02-29 23:05:09.000012");
	memset(&t, 0, sizeof t);
	t.neg = 1;
	t.day = 34;       /* 34 days and 22 hours: 838 hours */
	t.hour = 22;
	t.minute = 59;
	t.second = 59;
	c = col_of("k", SL_MYSQL_TIME2, NULL, 0);
	assert_string_equal(token(&b, &c, &t, sizeof t, false, NULL), "-838:59:59.000000");
	c = col_of("k", SL_MYSQL_BIT, NULL, 0);
	assert_string_equal(token(&b, &c, bits, 2, false, NULL), "258");
	c = col_of("k", SL_MYSQL_ENUM, "utf8mb4", 0);
	assert_string_equal(token(&b, &c, "m", 1, false, &idx), "3");
	c = col_of("k", SL_MYSQL_VARCHAR, "latin1", 0);
	assert_string_equal(token(&b, &c, bytes, 4, false, NULL), "0041e9ff");
	assert_string_equal(token(&b, &c, bytes, 0, false, NULL), "");
	sl_buf_free(&b);
}

static void test_key_columns(void **state)
{
	struct sl_column cols[4];
	struct sl_table t;
	const char *pk[] = { "c", "a" };
	const char *other[] = { "b", "a" };
	int out[4];

	(void)state;
	memset(cols, 0, sizeof cols);
	memset(&t, 0, sizeof t);
	cols[0] = (struct sl_column){ .name = "a", .is_key = true };
	cols[1] = (struct sl_column){ .name = "b" };
	cols[2] = (struct sl_column){ .name = "c", .is_key = true };
	cols[3] = (struct sl_column){ .name = "d" };
	t.cols = cols;
	t.ncols = 4;
	/* the primary key index's order */
	assert_int_equal(sl_my_key_columns(&t, pk, 2, out), 2);
	assert_int_equal(out[0], 2);
	assert_int_equal(out[1], 0);
	/* names that are not the key (key_columns chose another): the table's order */
	assert_int_equal(sl_my_key_columns(&t, other, 2, out), 2);
	assert_int_equal(out[0], 0);
	assert_int_equal(out[1], 2);
	/* no primary key known */
	assert_int_equal(sl_my_key_columns(&t, NULL, 0, out), 2);
	assert_int_equal(out[0], 0);
	assert_int_equal(out[1], 2);
	/* part of it only */
	assert_int_equal(sl_my_key_columns(&t, pk, 1, out), 2);
	assert_int_equal(out[0], 0);
	assert_int_equal(out[1], 2);
}

static void test_key_after(void **state)
{
	struct sl_my_col cols[6];
	struct sl_my_table mt;
	struct sl_buf b;
	int one[] = { 0 }, all[] = { 0, 1, 2, 3, 4 }, str[] = { 5 };

	(void)state;
	cols[0] = col_of("id", SL_MYSQL_LONGLONG, NULL, 0);
	cols[1] = col_of("na`me", SL_MYSQL_VARCHAR, "latin1", 0);
	cols[2] = col_of("d", SL_MYSQL_DATETIME2, NULL, 0);
	cols[3] = col_of("e", SL_MYSQL_ENUM, "utf8mb4", 0);
	cols[4] = col_of("bin", SL_MYSQL_STRING, "binary", 0);
	cols[5] = col_of("u", SL_MYSQL_VARCHAR, "utf8mb3", 0);
	memset(&mt, 0, sizeof mt);
	mt.db = "db";
	mt.name = "t";
	mt.ncols = 6;
	mt.cols = cols;
	sl_buf_init(&b, 0);

	assert_int_equal(sl_my_key_after(&b, &mt, one, 1, "-7"), 0);
	assert_string_equal(b.data, "(`id` > -7)");

	sl_buf_reset(&b);
	assert_int_equal(sl_my_key_after(&b, &mt, all, 5, "5\t41e9\t2024-01-02 03:04:05.000006\t2\t00ff"), 0);
	assert_string_equal(b.data,
			    "(`id` > 5)"
			    " OR (`id` = 5 AND `na``me` > _latin1 X'41e9')"
			    " OR (`id` = 5 AND `na``me` = _latin1 X'41e9' AND `d` > '2024-01-02 03:04:05.000006')"
			    " OR (`id` = 5 AND `na``me` = _latin1 X'41e9' AND `d` = '2024-01-02 03:04:05.000006'"
			    " AND `e` > 2)"
			    " OR (`id` = 5 AND `na``me` = _latin1 X'41e9' AND `d` = '2024-01-02 03:04:05.000006'"
			    " AND `e` = 2 AND `bin` > X'00ff')");

	/* the empty string; utf8mb3 is introduced as _utf8 (every version knows it) */
	sl_buf_reset(&b);
	assert_int_equal(sl_my_key_after(&b, &mt, str, 1, ""), 0);
	assert_string_equal(b.data, "(`u` > _utf8 X'')");

	/* not key texts of these columns */
	static const char *const bad[] = {
		"5",                                  /* too few tokens */
		"5\t41\t2024-01-02\t2\t00\textra",    /* too many */
		"5 OR 1=1\t41\t2024-01-02\t2\t00",    /* not a number */
		"5\t4\t2024-01-02\t2\t00",            /* odd hex */
		"5\t41\t2024-01-02'\t2\t00",          /* a quote in a date */
		"5\t41\t2024-01-02\t-2\t00",          /* an enum index is not negative */
		"5\t4G\t2024-01-02\t2\t00",           /* not hex */
		"\t41\t2024-01-02\t2\t00",            /* an empty number */
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		sl_buf_reset(&b);
		assert_int_equal(sl_my_key_after(&b, &mt, all, 5, bad[i]), -1);
	}
	sl_buf_free(&b);
}

/* The zero position (a checkpoint's table before its snapshot is taken)
 * is written as "?:0" and must read back, or a checkpoint saved at that
 * moment (kill -9 just after the stream took its position) reads as
 * corrupt. */
static void test_zero_position(void **state)
{
	struct sl_position zero, p;
	char text[2 * SL_POS_TEXT_MAX];

	(void)state;
	memset(&zero, 0, sizeof zero);
	assert_int_equal(sl_my_desc.pos_encode(&zero, text, sizeof text), 0);
	assert_string_equal(text, "?:0");
	memset(&p, 0xff, sizeof p);
	assert_int_equal(sl_my_desc.pos_decode(text, &p), 0);
	assert_int_equal(sl_my_desc.pos_compare(&p, &zero), 0);
	assert_memory_equal(&p, &zero, sizeof p);
	assert_int_equal(sl_my_desc.pos_decode("?:1", &p), -1);
	assert_int_equal(sl_my_desc.pos_decode("mb.000002:120 0-1-5", &p), 0);
	assert_int_equal(p.w[0], 2);
	assert_int_equal(p.w[1], 120);
	assert_string_equal(sl_my_pos_gtid(&p), "0-1-5");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_zero_position),
		cmocka_unit_test(test_tokens),
		cmocka_unit_test(test_key_columns),
		cmocka_unit_test(test_key_after),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
