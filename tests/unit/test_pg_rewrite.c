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

static void expect_kind(const char *now, int kind, const char *why_part)
{
	char why[512] = "";

	assert_int_equal(sl_pg_columns_changed(base, now, why, sizeof why), kind);
	if (!strstr(why, why_part))
		fail_msg("why \"%s\" does not hold \"%s\"", why, why_part);
}

static void expect_kind_from(const char *was, const char *now, int kind, const char *why_part)
{
	char why[512] = "";

	assert_int_equal(sl_pg_columns_changed(was, now, why, sizeof why), kind);
	if (!strstr(why, why_part))
		fail_msg("why \"%s\" does not hold \"%s\"", why, why_part);
}

static void expect_changed(const char *now, const char *why_part)
{
	expect_kind(now, SL_COLS_REWRITTEN, why_part);
}

static void expect_same(const char *now)
{
	char why[512] = "";

	assert_false(sl_pg_columns_changed(base, now, why, sizeof why));
}

static void test_constant_default(void **state)
{
	/* ADD COLUMN n int DEFAULT 7: a missing value, no rewrite */
	expect_kind("16390\n1 23 -1 0 0 2 id\n2 23 -1 0 0 1 a\n3 23 -1 1 1 1 n\n", SL_COLS_MISSING,
		    "column \"n\" was added with a default");
	/* two of them: still only missing values */
	expect_kind("16390\n1 23 -1 0 0 2 id\n2 23 -1 0 0 1 a\n3 23 -1 1 1 1 n\n4 25 -1 1 1 1 m\n",
		    SL_COLS_MISSING, "column \"n\" was added with a default");
	/* and a type change after it: the rewrite decides (a rewrite clears
	 * the missing values, but the text may come from before it) */
	expect_changed("16410\n1 23 -1 0 0 2 id\n2 25 -1 0 0 1 a\n3 23 -1 1 0 1 n\n",
		       "column \"a\" changed its type");
	expect_changed("16390\n1 23 -1 0 0 2 id\n2 23 -1 0 0 1 a\n3 23 -1 1 1 1 n\n9 23 -1 0 0 2 id\n",
		       "column \"id\" was dropped and added again");
	/* VACUUM FULL took n's missing value out of the catalog */
	expect_kind_from("16390\n1 23 -1 0 0 2 id\n3 23 -1 1 1 1 n\n", "16500\n1 23 -1 0 0 2 id\n3 23 -1 0 1 1 n\n",
			 SL_COLS_LOST, "column \"n\" lost its missing value in a table rewrite");
	/* and a constant default added in the same file node: a rewrite for
	 * every sink */
	expect_kind_from("16390\n1 23 -1 0 0 2 id\n3 23 -1 1 1 1 n\n",
			 "16390\n1 23 -1 0 0 2 id\n3 23 -1 0 1 1 n\n4 23 -1 1 1 1 m\n", SL_COLS_REWRITTEN,
			 "column \"n\" lost its missing value");
	/* a column dropped and added again, and a constant default added */
	expect_changed("16390\n1 23 -1 0 0 2 id\n3 23 -1 1 1 1 n\n4 23 -1 0 0 1 a\n",
		       "column \"a\" was dropped and added again");
	/* TRUNCATE (a new file node) and ADD COLUMN n int DEFAULT 7, in either
	 * order: n kept its missing value, so nothing rewrote the table since
	 * n was added (issue 17: taken for a volatile default) */
	expect_kind("16500\n1 23 -1 0 0 2 id\n2 23 -1 0 0 1 a\n3 23 -1 1 1 1 n\n", SL_COLS_MISSING,
		    "column \"n\" was added with a default, which the existing rows have");
	/* and a type change after them, which rewrote the table */
	expect_changed("16510\n1 23 -1 0 0 2 id\n2 25 -1 0 0 1 a\n3 23 -1 0 1 1 n\n",
		       "column \"a\" changed its type");
}

static void test_volatile_default(void **state)
{
	/* ADD COLUMN c timestamptz DEFAULT clock_timestamp(): a rewrite */
	expect_changed("16401\n1 23 -1 0 0 2 id\n2 23 -1 0 0 1 a\n3 1184 -1 0 1 1 c\n",
		       "column \"c\" was added with a volatile default, which rewrote the table");
	/* after a TRUNCATE and a constant default: the volatile one rewrote
	 * the table, which took the constant's missing value */
	expect_changed("16401\n1 23 -1 0 0 2 id\n2 23 -1 0 0 1 a\n3 23 -1 0 1 1 n\n4 1184 -1 0 1 1 c\n",
		       "column \"n\" was added with a volatile default");
}

static void test_type_rewrite(void **state)
{
	expect_changed("16402\n1 23 -1 0 0 2 id\n2 25 -1 0 0 1 a\n", "column \"a\" changed its type");
	/* varchar(10) -> varchar(20) rewrites nothing */
	expect_same("16390\n1 23 -1 0 0 2 id\n2 1043 24 0 0 1 a\n");
}

/* id int, v <type>: its text with file node node, v of type typid and
 * modifier typmod (a varchar's is its length + 4, a numeric's ((precision
 * << 16) | scale) + 4, -1 for no limit: as PostgreSQL 15's catalog has
 * them). */
static const char *typed(char *buf, size_t len, long node, long typid, long typmod)
{
	snprintf(buf, len, "%ld\n1 23 -1 0 0 2 id\n2 %ld %ld 0 0 1 v\n", node, typid, typmod);
	return buf;
}

/* The type of v changed from (typid, typmod) to (to_typid, to_typmod), with
 * a TRUNCATE (a new file node) too: SL_COLS_REWRITTEN or 0. */
static void expect_type_change(long typid, long typmod, long to_typid, long to_typmod, int kind)
{
	char was[128], now[128], why[512] = "";

	typed(was, sizeof was, 16390, typid, typmod);
	typed(now, sizeof now, 16500, to_typid, to_typmod);
	if (sl_pg_columns_changed(was, now, why, sizeof why) != kind)
		fail_msg("%ld(%ld) to %ld(%ld) after a TRUNCATE: not %d (why \"%s\")", typid, typmod, to_typid,
			 to_typmod, kind, why);
	if (kind && !strstr(why, "column \"v\" changed its type, which rewrote the table"))
		fail_msg("why \"%s\"", why);
}

/* A TRUNCATE and a type change that only widens, while the agent was
 * stopped: PostgreSQL 15 widens without a rewrite and keeps every value, so
 * the new file node (the TRUNCATE's, which the stream applies) does not make
 * it a rewrite.  Each case checked on PostgreSQL 15: no new file node
 * without the TRUNCATE, the values the same. */
static void test_widened_after_truncate(void **state)
{
	/* varchar(10) to varchar(20), to varchar, to text; varchar to text */
	expect_type_change(1043, 14, 1043, 24, 0);
	expect_type_change(1043, 14, 1043, -1, 0);
	expect_type_change(1043, 14, 25, -1, 0);
	expect_type_change(1043, -1, 25, -1, 0);
	/* varbit(10) to varbit(20), to varbit (its typmod is the length) */
	expect_type_change(1562, 10, 1562, 20, 0);
	expect_type_change(1562, 10, 1562, -1, 0);
	/* numeric(10,2) to numeric(14,2), to numeric; numeric(10,0) to (12,0) */
	expect_type_change(1700, (10 << 16 | 2) + 4, 1700, (14 << 16 | 2) + 4, 0);
	expect_type_change(1700, (10 << 16 | 2) + 4, 1700, -1, 0);
	expect_type_change(1700, (10 << 16) + 4, 1700, (12 << 16) + 4, 0);
	/* and a column added with a constant default along with it */
	expect_kind_from("16390\n1 23 -1 0 0 2 id\n2 1043 14 0 0 1 v\n",
			 "16500\n1 23 -1 0 0 2 id\n2 1043 24 0 0 1 v\n3 23 -1 1 1 1 n\n", SL_COLS_MISSING,
			 "column \"n\" was added with a default");
}

/* Its neighbours change values, or rewrite the table: still backfilled
 * after a TRUNCATE. */
static void test_not_widened(void **state)
{
	/* varchar(20) to varchar(10) (PostgreSQL rewrites it), varchar to
	 * varchar(10), text to varchar(10) */
	expect_type_change(1043, 24, 1043, 14, SL_COLS_REWRITTEN);
	expect_type_change(1043, -1, 1043, 14, SL_COLS_REWRITTEN);
	expect_type_change(25, -1, 1043, 14, SL_COLS_REWRITTEN);
	expect_type_change(1562, 20, 1562, 10, SL_COLS_REWRITTEN);
	/* numeric(10,2) to numeric(14,3) (values rescaled), to numeric(8,2);
	 * numeric to numeric(10,2) */
	expect_type_change(1700, (10 << 16 | 2) + 4, 1700, (14 << 16 | 3) + 4, SL_COLS_REWRITTEN);
	expect_type_change(1700, (10 << 16 | 2) + 4, 1700, (8 << 16 | 2) + 4, SL_COLS_REWRITTEN);
	expect_type_change(1700, -1, 1700, (10 << 16 | 2) + 4, SL_COLS_REWRITTEN);
	/* char(10) to char(20) pads every value; char(10) to text, varchar */
	expect_type_change(1042, 14, 1042, 24, SL_COLS_REWRITTEN);
	expect_type_change(1042, 14, 25, -1, SL_COLS_REWRITTEN);
	expect_type_change(1042, 14, 1043, -1, SL_COLS_REWRITTEN);
	/* int to bigint */
	expect_type_change(23, -1, 20, -1, SL_COLS_REWRITTEN);
	/* a widening, and another column's real type change */
	expect_kind_from("16390\n1 23 -1 0 0 2 id\n2 1043 14 0 0 1 v\n",
			 "16500\n1 20 -1 0 0 2 id\n2 1043 24 0 0 1 v\n", SL_COLS_REWRITTEN,
			 "column \"id\" changed its type");
	/* a widening, and a volatile default */
	expect_kind_from("16390\n1 23 -1 0 0 2 id\n2 1043 14 0 0 1 v\n",
			 "16500\n1 23 -1 0 0 2 id\n2 25 -1 0 0 1 v\n3 1184 -1 0 1 1 c\n", SL_COLS_REWRITTEN,
			 "column \"c\" was added with a volatile default");
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

/* A version whose catalog no longer has a column's missing value (VACUUM
 * FULL cleared it) keeps the one the version before had, as long as it is
 * the same column (the same number); a column dropped and added again
 * keeps nothing, and a column's own value is not replaced. */
static void test_missing_kept(void **state)
{
	const char was[] = "16390\n1 23 -1 0 0 2 id\n3 23 -1 1 1 1 n\n";
	struct sl_value seven = { .kind = SL_V_INT, .i = 7 }, eight = { .kind = SL_V_INT, .i = 8 };
	struct sl_table *prev = sl_table_new("public", "t"), *t = sl_table_new("public", "t");
	char key[17];

	(void)state;
	assert_non_null(prev);
	assert_non_null(t);
	for (struct sl_table *x = prev; x; x = x == prev ? t : NULL) {
		assert_int_equal(sl_table_add_column(x, "id", SL_T_INT32, 0, 0, 23, -1, NULL, true), 0);
		assert_int_equal(sl_table_add_column(x, "n", SL_T_INT32, 0, 0, 23, -1, NULL, false), 0);
		assert_int_equal(sl_table_finish(x), 0);
	}
	assert_int_equal(sl_column_set_missing(&prev->cols[1], &seven), 0);
	assert_int_equal(sl_table_finish(prev), 0);
	memcpy(key, t->schema_key, sizeof key);
	/* dropped and added again: nothing kept */
	assert_int_equal(sl_pg_missing_keep(t, prev, was, "16390\n1 23 -1 0 0 2 id\n4 23 -1 0 1 1 n\n"), 0);
	assert_int_equal(t->cols[1].missing.kind, SL_V_NULL);
	assert_string_equal(t->schema_key, key);
	/* rewritten: the same column keeps 7, and the version's key says so */
	assert_int_equal(sl_pg_missing_keep(t, prev, was, "16400\n1 23 -1 0 0 2 id\n3 23 -1 0 1 1 n\n"), 0);
	assert_int_equal(t->cols[1].missing.kind, SL_V_INT);
	assert_int_equal(t->cols[1].missing.i, 7);
	assert_string_equal(t->schema_key, prev->schema_key);
	/* its own value stays */
	assert_int_equal(sl_column_set_missing(&t->cols[1], &eight), 0);
	assert_int_equal(sl_pg_missing_keep(t, prev, was, was), 0);
	assert_int_equal(t->cols[1].missing.i, 8);
	sl_table_free(prev);
	sl_table_free(t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_constant_default),
		cmocka_unit_test(test_missing_kept),
		cmocka_unit_test(test_volatile_default),
		cmocka_unit_test(test_type_rewrite),
		cmocka_unit_test(test_widened_after_truncate),
		cmocka_unit_test(test_not_widened),
		cmocka_unit_test(test_dropped_and_added_again),
		cmocka_unit_test(test_renamed),
		cmocka_unit_test(test_no_change_of_rows),
		cmocka_unit_test(test_names_and_bad_text),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
