/*
 * tests/unit/test_pg_rewrite.c: column identities (sources/postgres/
 * pg_rewrite.c): which DDL changes the existing rows of a table without a
 * change record, judged from two catalog texts.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "sources/postgres/pg_internal.h"

/* id int, a int: file node 16390 */
static const char base[] = "16390\n1 23 -1 0 0 2 id\n2 23 -1 0 0 1 a\n";

static void expect_changed(const char *now, const char *why_part)
{
	char why[512] = "";

	assert_true(sl_pg_columns_changed(base, now, why, sizeof why));
	if (!strstr(why, why_part))
		fail_msg("why \"%s\" does not hold \"%s\"", why, why_part);
}

static void expect_same(const char *now)
{
	char why[512] = "";

	assert_false(sl_pg_columns_changed(base, now, why, sizeof why));
}

static void test_constant_default(void **state)
{
	/* ADD COLUMN n int DEFAULT 7: a missing value, no rewrite */
	expect_changed("16390\n1 23 -1 0 0 2 id\n2 23 -1 0 0 1 a\n3 23 -1 1 1 1 n\n",
		       "column \"n\" was added with a default");
}

static void test_volatile_default(void **state)
{
	/* ADD COLUMN c timestamptz DEFAULT clock_timestamp(): a rewrite */
	expect_changed("16401\n1 23 -1 0 0 2 id\n2 23 -1 0 0 1 a\n3 1184 -1 0 1 1 c\n",
		       "column \"c\" was added with a volatile default, which rewrote the table");
}

static void test_type_rewrite(void **state)
{
	expect_changed("16402\n1 23 -1 0 0 2 id\n2 25 -1 0 0 1 a\n", "column \"a\" changed its type");
	/* varchar(10) -> varchar(20) rewrites nothing */
	expect_same("16390\n1 23 -1 0 0 2 id\n2 1043 24 0 0 1 a\n");
}

static void test_dropped_and_added_again(void **state)
{
	expect_changed("16390\n1 23 -1 0 0 2 id\n3 23 -1 0 0 1 a\n", "column \"a\" was dropped and added again");
}

static void test_renamed(void **state)
{
	/* RENAME COLUMN a TO b: the same attnum under a new name */
	expect_changed("16390\n1 23 -1 0 0 2 id\n2 23 -1 0 0 1 b\n", "column \"a\" was renamed to \"b\"");
	/* DROP COLUMN a; ADD COLUMN b: a new attnum, no value of a under it */
	expect_same("16390\n1 23 -1 0 0 2 id\n3 23 -1 0 0 1 b\n");
}

static void test_no_change_of_rows(void **state)
{
	/* ADD COLUMN without a default; then SET DEFAULT on it */
	expect_same("16390\n1 23 -1 0 0 2 id\n2 23 -1 0 0 1 a\n3 23 -1 0 0 1 n\n");
	expect_same("16390\n1 23 -1 0 0 2 id\n2 23 -1 0 0 1 a\n3 23 -1 0 1 1 n\n");
	/* DROP COLUMN; VACUUM FULL or TRUNCATE (a new file node only) */
	expect_same("16390\n1 23 -1 0 0 2 id\n");
	expect_same("16500\n1 23 -1 0 0 2 id\n2 23 -1 0 0 1 a\n");
}

static void test_names_and_bad_text(void **state)
{
	char why[512];
	/* a name with a space and a newline is read by its length */
	const char was[] = "1\n1 23 -1 0 0 4 a\nb \n";

	assert_false(sl_pg_columns_changed(was, was, why, sizeof why));
	assert_true(sl_pg_columns_changed(was, "1\n2 23 -1 0 0 4 a\nb \n", why, sizeof why));
	/* unknown or malformed: nothing is judged */
	assert_false(sl_pg_columns_changed(NULL, base, why, sizeof why));
	assert_false(sl_pg_columns_changed(base, NULL, why, sizeof why));
	assert_false(sl_pg_columns_changed(base, "16390\n1 23 -1 0 0 9 id\n", why, sizeof why));
	assert_false(sl_pg_columns_changed("no newline", base, why, sizeof why));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_constant_default),
		cmocka_unit_test(test_volatile_default),
		cmocka_unit_test(test_type_rewrite),
		cmocka_unit_test(test_dropped_and_added_again),
		cmocka_unit_test(test_renamed),
		cmocka_unit_test(test_no_change_of_rows),
		cmocka_unit_test(test_names_and_bad_text),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
