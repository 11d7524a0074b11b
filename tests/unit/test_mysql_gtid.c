/*
 * tests/unit/test_mysql_gtid.c: MariaDB GTID positions and MySQL GTID sets
 * (sources/mysql/gtid.c): parse, format, add, contains, compare.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common/buf.h"
#include "sources/mysql/gtid.h"

static char *fmt_pos(const struct sl_mariadb_gtid_pos *p)
{
	struct sl_buf b;

	sl_buf_init(&b, 0);
	assert_int_equal(sl_mariadb_gtid_pos_format(p, &b), 0);
	sl_buf_putc(&b, '\0');
	return sl_buf_detach(&b);
}

static void check_pos_roundtrip(const char *in, const char *want)
{
	struct sl_mariadb_gtid_pos p;
	char err[256], *s;

	sl_mariadb_gtid_pos_init(&p);
	if (sl_mariadb_gtid_pos_parse(&p, in, strlen(in), err, sizeof err) != 0)
		fail_msg("\"%s\" does not parse: %s", in, err);
	s = fmt_pos(&p);
	assert_string_equal(s, want);
	free(s);
	sl_mariadb_gtid_pos_free(&p);
}

static void check_pos_bad(const char *in, const char *msg)
{
	struct sl_mariadb_gtid_pos p;
	char err[256] = "";

	sl_mariadb_gtid_pos_init(&p);
	if (sl_mariadb_gtid_pos_parse(&p, in, strlen(in), err, sizeof err) != -1)
		fail_msg("\"%s\" parses", in);
	assert_int_equal(p.n, 0);
	if (!strstr(err, msg))
		fail_msg("\"%s\": message \"%s\" lacks \"%s\"", in, err, msg);
	sl_mariadb_gtid_pos_free(&p);
}

static void test_mariadb_parse_format(void **state)
{
	struct sl_mariadb_gtid g;
	char err[256];

	(void)state;
	assert_int_equal(sl_mariadb_gtid_parse("0-1-20", 6, &g, err, sizeof err), 0);
	assert_int_equal(g.domain, 0);
	assert_int_equal(g.server, 1);
	assert_int_equal(g.seq, 20);
	assert_int_equal(sl_mariadb_gtid_parse("4294967295-4294967295-18446744073709551615", 42, &g, err,
					       sizeof err), 0);
	assert_int_equal(g.domain, UINT32_MAX);
	assert_int_equal(g.server, UINT32_MAX);
	assert_true(g.seq == UINT64_MAX);

	check_pos_roundtrip("0-1-20", "0-1-20");
	check_pos_roundtrip("", "");
	check_pos_roundtrip("  ", "");
	check_pos_roundtrip("1-2-5,0-1-20", "0-1-20,1-2-5");          /* sorted by domain */
	check_pos_roundtrip(" 0-1-20 ,\n 1-2-5 ", "0-1-20,1-2-5");
	check_pos_roundtrip("10-1-1,2-1-1,7-3-9", "2-1-1,7-3-9,10-1-1");

	check_pos_bad("0-1", "invalid MariaDB GTID");
	check_pos_bad("0-1-20,", "invalid MariaDB GTID");
	check_pos_bad(",0-1-20", "invalid MariaDB GTID");
	check_pos_bad("0-1-x", "invalid MariaDB GTID");
	check_pos_bad("0-1-2-3", "invalid MariaDB GTID");
	check_pos_bad("-1-1-2", "invalid MariaDB GTID");
	check_pos_bad("0-+1-2", "invalid MariaDB GTID");
	check_pos_bad("4294967296-1-2", "invalid MariaDB GTID");
	check_pos_bad("0-1-18446744073709551616", "invalid MariaDB GTID");
	check_pos_bad("0-1-20,0-2-21", "two GTIDs of domain 0");
}

static void test_mariadb_add_contains_compare(void **state)
{
	struct sl_mariadb_gtid_pos a, b;
	struct sl_mariadb_gtid g;
	char err[256], *s;

	(void)state;
	sl_mariadb_gtid_pos_init(&a);
	sl_mariadb_gtid_pos_init(&b);
	for (uint64_t seq = 1; seq <= 100; seq++) {
		g = (struct sl_mariadb_gtid){ .domain = (uint32_t)(seq % 3), .server = 1, .seq = seq };
		assert_int_equal(sl_mariadb_gtid_pos_add(&a, &g, err, sizeof err), 0);
	}
	s = fmt_pos(&a);
	assert_string_equal(s, "0-1-99,1-1-100,2-1-98");
	free(s);
	/* a later GTID of a domain replaces the entry, whoever wrote it */
	g = (struct sl_mariadb_gtid){ .domain = 1, .server = 7, .seq = 101 };
	assert_int_equal(sl_mariadb_gtid_pos_add(&a, &g, err, sizeof err), 0);
	assert_int_equal(sl_mariadb_gtid_pos_get(&a, 1)->server, 7);
	assert_null(sl_mariadb_gtid_pos_get(&a, 3));

	assert_true(sl_mariadb_gtid_pos_contains(&a, &(struct sl_mariadb_gtid){ 0, 5, 99 }));
	assert_true(sl_mariadb_gtid_pos_contains(&a, &(struct sl_mariadb_gtid){ 0, 1, 1 }));
	assert_false(sl_mariadb_gtid_pos_contains(&a, &(struct sl_mariadb_gtid){ 0, 1, 100 }));
	assert_false(sl_mariadb_gtid_pos_contains(&a, &(struct sl_mariadb_gtid){ 9, 1, 1 }));

	assert_int_equal(sl_mariadb_gtid_pos_parse(&b, "2-1-98,0-1-99,1-7-101", strlen("2-1-98,0-1-99,1-7-101"), err, sizeof err), 0);
	assert_int_equal(sl_mariadb_gtid_pos_compare(&a, &b), SL_GTID_EQUAL);
	assert_int_equal(sl_mariadb_gtid_pos_parse(&b, "0-1-99,1-7-101", strlen("0-1-99,1-7-101"), err, sizeof err), 0);
	assert_int_equal(sl_mariadb_gtid_pos_compare(&a, &b), SL_GTID_AFTER);
	assert_int_equal(sl_mariadb_gtid_pos_compare(&b, &a), SL_GTID_BEFORE);
	assert_int_equal(sl_mariadb_gtid_pos_parse(&b, "0-1-100,1-7-101,2-1-98", strlen("0-1-100,1-7-101,2-1-98"), err, sizeof err), 0);
	assert_int_equal(sl_mariadb_gtid_pos_compare(&a, &b), SL_GTID_BEFORE);
	assert_int_equal(sl_mariadb_gtid_pos_parse(&b, "0-1-100,1-7-100,2-1-98", strlen("0-1-100,1-7-100,2-1-98"), err, sizeof err), 0);
	assert_int_equal(sl_mariadb_gtid_pos_compare(&a, &b), SL_GTID_DIVERGED);
	assert_int_equal(sl_mariadb_gtid_pos_parse(&b, "0-1-1,5-1-1", strlen("0-1-1,5-1-1"), err, sizeof err), 0);
	assert_int_equal(sl_mariadb_gtid_pos_compare(&a, &b), SL_GTID_DIVERGED);
	sl_mariadb_gtid_pos_clear(&b);
	assert_int_equal(sl_mariadb_gtid_pos_compare(&a, &b), SL_GTID_AFTER);
	assert_int_equal(sl_mariadb_gtid_pos_compare(&b, &b), SL_GTID_EQUAL);
	sl_mariadb_gtid_pos_free(&a);
	sl_mariadb_gtid_pos_free(&b);
}

#define U1 "3e11fa47-71ca-11e1-9e33-c80aa9429562"
#define U2 "4f6a2b10-0000-11e1-8000-00000000ffff"

static char *fmt_set(const struct sl_mysql_gtid_set *s)
{
	struct sl_buf b;

	sl_buf_init(&b, 0);
	assert_int_equal(sl_mysql_gtid_set_format(s, &b), 0);
	sl_buf_putc(&b, '\0');
	return sl_buf_detach(&b);
}

static void check_set_roundtrip(const char *in, const char *want)
{
	struct sl_mysql_gtid_set s;
	char err[256], *t;

	sl_mysql_gtid_set_init(&s);
	if (sl_mysql_gtid_set_parse(&s, in, strlen(in), err, sizeof err) != 0)
		fail_msg("\"%s\" does not parse: %s", in, err);
	t = fmt_set(&s);
	if (strcmp(t, want))
		fail_msg("\"%s\" formats as \"%s\", want \"%s\"", in, t, want);
	free(t);
	sl_mysql_gtid_set_free(&s);
}

static void check_set_bad(const char *in, const char *msg)
{
	struct sl_mysql_gtid_set s;
	char err[256] = "";

	sl_mysql_gtid_set_init(&s);
	if (sl_mysql_gtid_set_parse(&s, in, strlen(in), err, sizeof err) != -1)
		fail_msg("\"%s\" parses", in);
	assert_int_equal(s.n, 0);
	if (!strstr(err, msg))
		fail_msg("\"%s\": message \"%s\" lacks \"%s\"", in, err, msg);
	sl_mysql_gtid_set_free(&s);
}

static void test_mysql_uuid(void **state)
{
	unsigned char u[16];
	char out[37];

	(void)state;
	assert_int_equal(sl_mysql_uuid_parse("3E11FA47-71CA-11E1-9E33-C80AA9429562", 36, u), 0);
	assert_int_equal(u[0], 0x3e);
	assert_int_equal(u[15], 0x62);
	sl_mysql_uuid_format(u, out);
	assert_string_equal(out, U1);
	assert_int_equal(sl_mysql_uuid_parse("3e11fa4771ca11e19e33c80aa9429562", 32, u), -1);
	assert_int_equal(sl_mysql_uuid_parse("3e11fa47-71ca-11e1-9e33-c80aa942956g", 36, u), -1);
	assert_int_equal(sl_mysql_uuid_parse("3e11fa47_71ca-11e1-9e33-c80aa9429562", 36, u), -1);
}

static void test_mysql_set_parse_format(void **state)
{
	(void)state;
	check_set_roundtrip("", "");
	check_set_roundtrip(U1 ":1-5", U1 ":1-5");
	check_set_roundtrip(U1 ":7", U1 ":7");
	check_set_roundtrip(U1 ":1-5:7-9," U2 ":1-3", U1 ":1-5:7-9," U2 ":1-3");
	/* MySQL's own output: a newline after each comma, upper case accepted */
	check_set_roundtrip(U2 ":1-3,\n3E11FA47-71CA-11E1-9E33-C80AA9429562:1-5", U1 ":1-5," U2 ":1-3");
	/* overlapping, adjacent, unordered and repeated items are merged */
	check_set_roundtrip(U1 ":7-9:1-5:6", U1 ":1-9");
	check_set_roundtrip(U1 ":1-5:3-4:10-12:11:13", U1 ":1-5:10-13");
	check_set_roundtrip(U1 ":10," U1 ":1-3:9", U1 ":1-3:9-10");
	check_set_roundtrip(U1 ":1-9223372036854775807", U1 ":1-9223372036854775807");

	check_set_bad(U1, "invalid GTID set item");
	check_set_bad(U1 ":", "invalid GTID interval");
	check_set_bad(U1 ":0", "invalid GTID interval 0-0");
	check_set_bad(U1 ":5-3", "invalid GTID interval 5-3");
	check_set_bad(U1 ":1-9223372036854775808", "invalid GTID interval");
	check_set_bad(U1 ":1-x", "invalid GTID interval");
	check_set_bad(U1 ":1,", "invalid GTID set item");
	check_set_bad(U1 ":1::2", "invalid GTID interval");
	check_set_bad(U1 ":tag:1-5", "tagged GTIDs are not supported");
	check_set_bad("3e11fa47-71ca-11e1-9e33-c80aa942956:1", "invalid GTID set item");
}

static void test_mysql_set_add_contains_compare(void **state)
{
	struct sl_mysql_gtid_set a, b;
	unsigned char u1[16], u2[16];
	char err[256], *s;

	(void)state;
	assert_int_equal(sl_mysql_uuid_parse(U1, 36, u1), 0);
	assert_int_equal(sl_mysql_uuid_parse(U2, 36, u2), 0);
	sl_mysql_gtid_set_init(&a);
	sl_mysql_gtid_set_init(&b);
	/* one transaction at a time, as a binlog reader adds them */
	for (uint64_t g = 1; g <= 1000; g++)
		if (g % 100 != 0)
			assert_int_equal(sl_mysql_gtid_set_add(&a, u1, g, err, sizeof err), 0);
	assert_int_equal(sl_mysql_gtid_set_add(&a, u2, 3, err, sizeof err), 0);
	s = fmt_set(&a);
	assert_string_equal(s, U1 ":1-99:101-199:201-299:301-399:401-499:501-599:601-699:701-799:801-899:901-999,"
			    U2 ":3");
	free(s);
	/* filling the gaps merges the intervals */
	for (uint64_t g = 100; g <= 900; g += 100)
		assert_int_equal(sl_mysql_gtid_set_add(&a, u1, g, err, sizeof err), 0);
	s = fmt_set(&a);
	assert_string_equal(s, U1 ":1-999," U2 ":3");
	free(s);
	assert_int_equal(sl_mysql_gtid_set_add(&a, u1, 0, err, sizeof err), -1);
	assert_non_null(strstr(err, "invalid GTID interval 0-0"));
	assert_int_equal(sl_mysql_gtid_set_add_interval(&a, u2, 5, 4, err, sizeof err), -1);

	assert_true(sl_mysql_gtid_set_contains(&a, u1, 1));
	assert_true(sl_mysql_gtid_set_contains(&a, u1, 999));
	assert_false(sl_mysql_gtid_set_contains(&a, u1, 1000));
	assert_true(sl_mysql_gtid_set_contains(&a, u2, 3));
	assert_false(sl_mysql_gtid_set_contains(&a, u2, 2));
	assert_false(sl_mysql_gtid_set_contains(&a, u2, 4));

	assert_int_equal(sl_mysql_gtid_set_parse(&b, U2 ":3," U1 ":1-999", strlen(U2 ":3," U1 ":1-999"), err, sizeof err), 0);
	assert_int_equal(sl_mysql_gtid_set_compare(&a, &b), SL_GTID_EQUAL);
	assert_int_equal(sl_mysql_gtid_set_parse(&b, U1 ":1-1000," U2 ":3", strlen(U1 ":1-1000," U2 ":3"), err, sizeof err), 0);
	assert_int_equal(sl_mysql_gtid_set_compare(&a, &b), SL_GTID_BEFORE);
	assert_int_equal(sl_mysql_gtid_set_compare(&b, &a), SL_GTID_AFTER);
	assert_true(sl_mysql_gtid_set_is_subset(&a, &b));
	assert_false(sl_mysql_gtid_set_is_subset(&b, &a));
	assert_int_equal(sl_mysql_gtid_set_parse(&b, U1 ":1-1000", strlen(U1 ":1-1000"), err, sizeof err), 0);
	assert_int_equal(sl_mysql_gtid_set_compare(&a, &b), SL_GTID_DIVERGED);
	assert_int_equal(sl_mysql_gtid_set_parse(&b, U1 ":1-500:502-999," U2 ":3", strlen(U1 ":1-500:502-999," U2 ":3"), err, sizeof err), 0);
	assert_int_equal(sl_mysql_gtid_set_compare(&a, &b), SL_GTID_AFTER);
	sl_mysql_gtid_set_clear(&b);
	assert_int_equal(sl_mysql_gtid_set_compare(&a, &b), SL_GTID_AFTER);
	assert_int_equal(sl_mysql_gtid_set_compare(&b, &b), SL_GTID_EQUAL);
	/* a cleared set is reused */
	assert_int_equal(sl_mysql_gtid_set_add(&b, u2, 9, err, sizeof err), 0);
	s = fmt_set(&b);
	assert_string_equal(s, U2 ":9");
	free(s);
	sl_mysql_gtid_set_free(&a);
	sl_mysql_gtid_set_free(&b);
}

static void test_mysql_set_binary(void **state)
{
	static const char text[] = U1 ":1-5:7," U2 ":3-9223372036854775807";
	struct sl_mysql_gtid_set a, b;
	struct sl_buf bin;
	char err[256], *t;

	(void)state;
	sl_mysql_gtid_set_init(&a);
	sl_mysql_gtid_set_init(&b);
	sl_buf_init(&bin, 0);
	assert_int_equal(sl_mysql_gtid_set_parse(&a, text, strlen(text), err, sizeof err), 0);
	assert_int_equal(sl_mysql_gtid_set_encode(&a, &bin), 0);
	/* n_sids, then uuid, n_intervals, [start, end) pairs */
	assert_int_equal(bin.len, 8 + (16 + 8 + 2 * 16) + (16 + 8 + 16));
	assert_int_equal((unsigned char)bin.data[0], 2);
	assert_int_equal((unsigned char)bin.data[8], 0x3e);
	assert_int_equal((unsigned char)bin.data[24], 2);          /* two intervals */
	assert_int_equal((unsigned char)bin.data[32], 1);          /* 1 */
	assert_int_equal((unsigned char)bin.data[40], 6);          /* up to 6, exclusive */
	assert_int_equal((unsigned char)bin.data[48], 7);
	assert_int_equal((unsigned char)bin.data[56], 8);
	assert_int_equal((unsigned char)bin.data[bin.len - 1], 0x80); /* 2^63 */
	assert_int_equal(sl_mysql_gtid_set_decode(&b, (const unsigned char *)bin.data, bin.len, err, sizeof err), 0);
	assert_int_equal(sl_mysql_gtid_set_compare(&a, &b), SL_GTID_EQUAL);
	t = fmt_set(&b);
	assert_string_equal(t, text);
	free(t);
	/* every truncation fails and leaves the set empty */
	for (size_t n = 0; n < bin.len; n++) {
		assert_int_equal(sl_mysql_gtid_set_decode(&b, (const unsigned char *)bin.data, n, err, sizeof err), -1);
		assert_int_equal(b.n, 0);
	}
	/* an interval that ends before it starts; trailing bytes; the tagged form */
	bin.data[40] = 1;
	assert_int_equal(sl_mysql_gtid_set_decode(&b, (const unsigned char *)bin.data, bin.len, err, sizeof err), -1);
	assert_non_null(strstr(err, "bad interval 1-1"));
	bin.data[40] = 6;
	sl_buf_append(&bin, "x", 1);
	assert_int_equal(sl_mysql_gtid_set_decode(&b, (const unsigned char *)bin.data, bin.len, err, sizeof err), -1);
	assert_non_null(strstr(err, "1 bytes after the set"));
	bin.data[7] = 1;
	assert_int_equal(sl_mysql_gtid_set_decode(&b, (const unsigned char *)bin.data, bin.len, err, sizeof err), -1);
	assert_non_null(strstr(err, "tagged format"));
	/* the empty set */
	sl_buf_reset(&bin);
	sl_mysql_gtid_set_clear(&a);
	assert_int_equal(sl_mysql_gtid_set_encode(&a, &bin), 0);
	assert_int_equal(bin.len, 8);
	assert_int_equal(sl_mysql_gtid_set_decode(&b, (const unsigned char *)bin.data, bin.len, err, sizeof err), 0);
	assert_int_equal(b.n, 0);
	sl_buf_free(&bin);
	sl_mysql_gtid_set_free(&a);
	sl_mysql_gtid_set_free(&b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_mariadb_parse_format),
		cmocka_unit_test(test_mariadb_add_contains_compare),
		cmocka_unit_test(test_mysql_uuid),
		cmocka_unit_test(test_mysql_set_parse_format),
		cmocka_unit_test(test_mysql_set_add_contains_compare),
		cmocka_unit_test(test_mysql_set_binary),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
