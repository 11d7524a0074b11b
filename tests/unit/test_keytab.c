/*
 * tests/unit/test_keytab.c: the key-table engine (common/keytab.c) and the
 * secret helpers (common/secret.c) on their own, on a small made-up table
 * for a made-up "widget" section, the way a future sink or source would use
 * them.  Sections are built by hand with sl_ini_add(), as the agent's reader
 * builds them.  Links libslcommon.a only.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/keytab.h"
#include "common/secret.h"
#include "common/util.h"

#define CANARY "canary-keytab-81c2"

enum widget_kind { W_ROUND = 0, W_SQUARE };
#define T_ROUND (1u << W_ROUND)
#define T_SQUARE (1u << W_SQUARE)

struct widget_conf {
	enum widget_kind kind;
	char *label;
	int radius;            /* round only */
	uint16_t side;         /* square only */
	char *finish;          /* a choice, stored as text */
	uint64_t budget;
	uint32_t ttl;
	uint64_t linger_ms;    /* a duration in milliseconds */
	char **tags;
	char *note;            /* empty means not set */
	char *token;           /* secret */
	bool shiny;
};

static const char *no_spaces(const char *s)
{
	return strchr(s, ' ') ? "must not contain spaces" : NULL;
}

static const struct sl_keychoice kinds[] = {
	{ "round", W_ROUND }, { "square", W_SQUARE }, { NULL, 0 },
};
static const struct sl_keychoice finishes[] = { { "matt", 0 }, { "gloss", 0 }, { NULL, 0 } };
static const struct sl_keychoice yes_no[] = { { "yes", 1 }, { "no", 0 }, { NULL, 0 } };
static const char *const kind_names[] = { "round", "square" };

static const struct sl_keydesc widget_keys[] = {
	{ .name = "kind", .type = SL_KT_ENUM, .flags = SL_KF_REQUIRED, .choices = kinds,
	  FIELD(struct widget_conf, kind) },
	{ .name = "label", .type = SL_KT_STRING, .flags = SL_KF_REQUIRED, .validate = no_spaces,
	  FIELD(struct widget_conf, label) },
	{ .name = "radius", .type = SL_KT_INT, .applies = T_ROUND, .flags = SL_KF_REQUIRED,
	  .min = 1, .max = 100, FIELD(struct widget_conf, radius) },
	{ .name = "side", .type = SL_KT_INT, .applies = T_SQUARE, .def = "10", .min = 1,
	  .max = 65535, FIELD(struct widget_conf, side) },
	{ .name = "finish", .type = SL_KT_CHOICE, .choices = finishes, .def = "matt",
	  FIELD(struct widget_conf, finish) },
	{ .name = "budget", .type = SL_KT_BYTES, .def = "1MB", .min = 1024, .max = UINT64_C(1) << 30,
	  FIELD(struct widget_conf, budget) },
	{ .name = "ttl", .type = SL_KT_SECONDS, .def = "5m", .min = 0, .max = 86400,
	  FIELD(struct widget_conf, ttl) },
	{ .name = "linger", .type = SL_KT_MSECONDS, .def = "0.25", .min = 10, .max = 3600 * 1000,
	  FIELD(struct widget_conf, linger_ms) },
	{ .name = "tags", .type = SL_KT_LIST, .flags = SL_KF_EMPTY_OK, .def = "",
	  .validate = no_spaces, FIELD(struct widget_conf, tags) },
	{ .name = "note", .type = SL_KT_STRING, .flags = SL_KF_EMPTY_NULL,
	  FIELD(struct widget_conf, note) },
	{ .name = "token_env", .type = SL_KT_SECRET_ENV, .excludes = "token_file",
	  FIELD(struct widget_conf, token) },
	{ .name = "token_file", .type = SL_KT_SECRET_FILE, .excludes = "token_env",
	  FIELD(struct widget_conf, token) },
	{ .name = "shiny", .type = SL_KT_ENUM, .choices = yes_no, .def = "no",
	  FIELD(struct widget_conf, shiny) },
};
#define NKEYS (sizeof widget_keys / sizeof widget_keys[0])

struct fx {
	struct sl_ini_section sec;
	struct widget_conf w;
	struct sl_keyerr er;
	char err[SL_ERRLEN];
};

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof *f);

	if (!f)
		return -1;
	f->sec.title = strdup("widget.w1");
	f->sec.line = 3;
	sl_keyerr_init(&f->er, "w.ini", f->err, sizeof f->err);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;

	sl_keytab_free(widget_keys, NKEYS, &f->w);
	sl_ini_section_free(&f->sec);
	free(f);
	return 0;
}

/* Adds "key = raw" on line, expanding ${NAME} as the agent's reader does. */
static void add(struct fx *f, const char *key, const char *raw, int line)
{
	char why[SL_ERRLEN], *v = NULL;
	bool expanded;

	if (sl_env_expand(raw, key, &v, &expanded, why, sizeof why) < 0)
		fail_msg("expand: %s", why);
	assert_int_equal(sl_ini_add(&f->sec, key, raw, v, expanded, line), 0);
}

/* Applies "kind" first, then the rest for the kind it gave. */
static int apply(struct fx *f)
{
	static const char *const skip[] = { "kind", NULL };
	struct sl_keyapply how = { .type_names = kind_names, .ntypes = 2, .skip = skip };
	const struct sl_ini_entry *e;

	if (sl_keytab_apply_one(&f->er, widget_keys, NKEYS, &f->sec, "kind", &f->w, &e) < 0)
		return -1;
	how.mask = 1u << f->w.kind;
	how.type_name = kind_names[f->w.kind];
	return sl_keytab_apply(&f->er, widget_keys, NKEYS, &f->sec, &f->w, &how);
}

static void expect_err(struct fx *f, const char *want)
{
	assert_int_equal(apply(f), -1);
	assert_true(f->er.failed);
	assert_string_equal(f->err, want);
	assert_null(strstr(f->err, CANARY));
}

/* ---------------------------------------------------------------------- */

static void test_defaults(void **state)
{
	struct fx *f = *state;

	add(f, "label", "w1", 4);
	add(f, "kind", "square", 5);  /* the type may come after other keys */
	assert_int_equal(apply(f), 0);
	assert_false(f->er.failed);
	assert_string_equal(f->err, "");
	assert_int_equal(f->w.kind, W_SQUARE);
	assert_string_equal(f->w.label, "w1");
	assert_int_equal(f->w.radius, 0);           /* not for squares: untouched */
	assert_int_equal(f->w.side, 10);
	assert_string_equal(f->w.finish, "matt");
	assert_int_equal(f->w.budget, 1 << 20);
	assert_int_equal(f->w.ttl, 300);
	assert_int_equal(f->w.linger_ms, 250);
	assert_non_null(f->w.tags);
	assert_null(f->w.tags[0]);
	assert_null(f->w.note);
	assert_null(f->w.token);
	assert_false(f->w.shiny);
}

static void test_values(void **state)
{
	struct fx *f = *state;

	setenv("SLUICE_TEST_TOKEN", CANARY, 1);
	add(f, "kind", "round", 4);
	add(f, "label", "w$$1", 5);
	add(f, "radius", "100", 6);
	add(f, "finish", "gloss", 7);
	add(f, "budget", "1 GiB", 8);
	add(f, "ttl", "2h", 9);
	add(f, "linger", "1.5 s", 9);
	add(f, "tags", " a ,b,\tc ", 10);
	add(f, "note", "hello world", 11);
	add(f, "token_env", "SLUICE_TEST_TOKEN", 12);
	add(f, "shiny", "yes", 13);
	assert_int_equal(apply(f), 0);
	unsetenv("SLUICE_TEST_TOKEN");
	assert_string_equal(f->w.label, "w$1");
	assert_int_equal(f->w.radius, 100);
	assert_int_equal(f->w.side, 0);
	assert_string_equal(f->w.finish, "gloss");
	assert_int_equal(f->w.budget, UINT64_C(1) << 30);
	assert_int_equal(f->w.ttl, 7200);
	assert_int_equal(f->w.linger_ms, 1500);
	assert_string_equal(f->w.tags[0], "a");
	assert_string_equal(f->w.tags[1], "b");
	assert_string_equal(f->w.tags[2], "c");
	assert_null(f->w.tags[3]);
	assert_string_equal(f->w.note, "hello world");
	assert_string_equal(f->w.token, CANARY);
	assert_true(f->w.shiny);

	/* sl_keytab_free() empties what the table owns. */
	sl_keytab_free(widget_keys, NKEYS, &f->w);
	assert_null(f->w.label);
	assert_null(f->w.finish);
	assert_null(f->w.tags);
	assert_null(f->w.note);
	assert_null(f->w.token);
	assert_int_equal(f->w.radius, 100);
}

static void test_required(void **state)
{
	struct fx *f = *state;

	expect_err(f, "w.ini:3: missing required key \"kind\" in [widget.w1]");
}

static void test_required_typed(void **state)
{
	struct fx *f = *state;

	add(f, "kind", "round", 4);
	add(f, "label", "x", 5);
	expect_err(f, "w.ini:3: missing required key \"radius\" in [widget.w1] (required for type "
		   "round)");
}

static void test_required_untyped(void **state)
{
	struct fx *f = *state;

	add(f, "kind", "square", 4);
	expect_err(f, "w.ini:3: missing required key \"label\" in [widget.w1]");
}

static void test_not_applicable(void **state)
{
	struct fx *f = *state;

	add(f, "kind", "square", 4);
	add(f, "label", "x", 5);
	add(f, "radius", "5", 6);
	expect_err(f, "w.ini:6: key \"radius\" applies only to type round, not to square");
}

static void test_unknown(void **state)
{
	struct fx *f = *state;

	add(f, "kind", "square", 4);
	add(f, "colour", "red", 5);
	expect_err(f, "w.ini:5: unknown key \"colour\" in [widget.w1]");
}

static int custom_unknown(struct sl_keyerr *er, const struct sl_ini_section *sec,
			  const struct sl_ini_entry *e, const char *types,
			  const struct sl_keyapply *how)
{
	return sl_keyerr_set(er, e->line, "%s: \"%s\" is for %s (%s)", sec->title, e->key,
			     *types ? types : "nobody", (const char *)how->arg);
}

static void test_custom_unknown(void **state)
{
	struct fx *f = *state;
	struct sl_keyapply how = {
		.mask = T_SQUARE, .type_names = kind_names, .ntypes = 2,
		.unknown = custom_unknown, .arg = "ctx",
	};

	add(f, "kind", "square", 4);
	add(f, "label", "x", 5);
	add(f, "radius", "5", 6);
	assert_int_equal(sl_keytab_apply(&f->er, widget_keys, NKEYS, &f->sec, &f->w, &how), -1);
	assert_string_equal(f->err, "w.ini:6: widget.w1: \"radius\" is for round (ctx)");
}

/* A table of a sink's kind: every row belongs to the one type. */
static void test_typed_table(void **state)
{
	struct fx *f = *state;
	static const char *const skip[] = { "kind", "radius", NULL };
	struct sl_keyapply how = { .type_name = "round", .typed = true, .skip = skip };

	add(f, "kind", "round", 4);
	assert_int_equal(sl_keytab_apply(&f->er, widget_keys, NKEYS, &f->sec, &f->w, &how), -1);
	assert_string_equal(f->err, "w.ini:3: missing required key \"label\" in [widget.w1] "
			    "(required for type round)");
}

/* Entries apply in file order: the first bad one is reported. */
static void test_file_order(void **state)
{
	struct fx *f = *state;

	add(f, "kind", "square", 4);
	add(f, "ttl", "2d", 5);
	add(f, "side", "0", 6);
	expect_err(f, "w.ini:5: bad value \"2d\" for key \"ttl\": not a duration (seconds, or a "
		   "number with the suffix s, m or h)");
}

static void test_bad_values(void **state)
{
	static const struct { const char *key, *raw, *why; } cases[] = {
		{ "side", "65536", "must be from 1 to 65535" },
		{ "side", "x", "not an integer" },
		{ "finish", "satin", "must be one of matt, gloss" },
		{ "budget", "1023", "must be from 1KB to 1GB" },
		{ "budget", "2GB", "must be from 1KB to 1GB" },
		{ "ttl", "86401", "must be from 0 to 86400 seconds" },
		{ "linger", "5ms", "must be from 0.01 to 3600 seconds" },
		{ "linger", "2h", "must be from 0.01 to 3600 seconds" },
		{ "linger", "0.0005", "not a duration (seconds with up to three decimals, or a number "
		  "with the suffix ms, s, m or h)" },
		{ "tags", "a,,b", "empty entry in the list" },
		{ "tags", "a, b c", "must not contain spaces (\"b c\" is not)" },
		{ "label", "a b", "must not contain spaces" },
		{ "label", "", "must not be empty" },
		{ "shiny", "maybe", "must be one of yes, no" },
	};

	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		void *st = NULL;
		struct fx *f;
		char want[512];

		assert_int_equal(setup(&st), 0);
		f = st;
		add(f, "kind", "square", 4);
		if (strcmp(cases[i].key, "label") != 0)
			add(f, "label", "x", 5);
		add(f, cases[i].key, cases[i].raw, 6);
		snprintf(want, sizeof want, "w.ini:6: bad value \"%s\" for key \"%s\": %s", cases[i].raw,
			 cases[i].key, cases[i].why);
		expect_err(f, want);
		teardown(&st);
	}
	(void)state;
}

/* Only the text as written is quoted, never what the environment gave. */
static void test_no_secret_in_messages(void **state)
{
	struct fx *f = *state;

	setenv("SLUICE_TEST_TOKEN", CANARY, 1);
	add(f, "kind", "square", 4);
	add(f, "label", "x", 5);
	add(f, "tags", "a, ${SLUICE_TEST_TOKEN} x", 6);
	expect_err(f, "w.ini:6: bad value \"a, ${SLUICE_TEST_TOKEN} x\" for key \"tags\": must not "
		   "contain spaces");
	unsetenv("SLUICE_TEST_TOKEN");
}

static void test_excludes(void **state)
{
	struct fx *f = *state;

	add(f, "kind", "square", 4);
	add(f, "label", "x", 5);
	add(f, "token_file", "/nonexistent", 6);
	add(f, "token_env", "X", 7);
	expect_err(f, "w.ini:7: token_file and token_env cannot both be set in [widget.w1] "
		   "(token_file on line 6)");
}

static void test_secret_errors(void **state)
{
	struct fx *f = *state;

	unsetenv("SLUICE_TEST_NOTOKEN");
	add(f, "kind", "square", 4);
	add(f, "label", "x", 5);
	add(f, "token_env", "SLUICE_TEST_NOTOKEN", 6);
	expect_err(f, "w.ini:6: environment variable \"SLUICE_TEST_NOTOKEN\" named by token_env is "
		   "not set");
}

static void test_errors(void **state)
{
	struct sl_keyerr er;
	char buf[16];

	(void)state;
	sl_keyerr_init(&er, "f.ini", buf, sizeof buf);
	assert_string_equal(buf, "");
	assert_int_equal(sl_keyerr_set(&er, 0, "first %d", 1), -1);
	assert_int_equal(sl_keyerr_set(&er, 9, "second"), -1);
	assert_string_equal(buf, "f.ini: first 1");  /* the first error wins */
	assert_int_equal(er.line, 0);
	sl_keyerr_init(&er, "f.ini", buf, sizeof buf);
	sl_keyerr_set(&er, 12, "a long message that is cut");
	assert_string_equal(buf, "f.ini:12: a lon");
	assert_int_equal(er.line, 12);
}

static void test_parsers(void **state)
{
	uint64_t v;
	char out[32], **list = NULL, *bad = NULL;
	const char *why = NULL;

	(void)state;
	assert_int_equal(sl_key_parse_bytes("64 mb", &v), 0);
	assert_int_equal(v, 64 << 20);
	assert_int_equal(sl_key_parse_bytes("1.5GB", &v), -1);
	assert_int_equal(sl_key_parse_bytes("16777216TB", &v), -2);
	assert_int_equal(sl_key_parse_duration("90", &v), 0);
	assert_int_equal(v, 90);
	assert_int_equal(sl_key_parse_duration("5M", &v), 0);
	assert_int_equal(v, 300);
	assert_int_equal(sl_key_parse_duration("5d", &v), -1);
	assert_int_equal(sl_key_parse_duration_ms("0.5", &v), 0);
	assert_int_equal(v, 500);
	assert_int_equal(sl_key_parse_duration_ms("0.125s", &v), 0);
	assert_int_equal(v, 125);
	assert_int_equal(sl_key_parse_duration_ms("250ms", &v), 0);
	assert_int_equal(v, 250);
	assert_int_equal(sl_key_parse_duration_ms("2", &v), 0);
	assert_int_equal(v, 2000);
	assert_int_equal(sl_key_parse_duration_ms("1.5M", &v), 0);
	assert_int_equal(v, 90000);
	assert_int_equal(sl_key_parse_duration_ms("1h", &v), 0);
	assert_int_equal(v, 3600000);
	assert_int_equal(sl_key_parse_duration_ms("1.5ms", &v), -1);
	assert_int_equal(sl_key_parse_duration_ms("0.0001", &v), -1);
	assert_int_equal(sl_key_parse_duration_ms(".5", &v), -1);
	assert_int_equal(sl_key_parse_duration_ms("1.", &v), -1);
	assert_int_equal(sl_key_parse_duration_ms("-1", &v), -1);
	assert_int_equal(sl_key_parse_duration_ms("5d", &v), -1);
	assert_int_equal(sl_key_parse_duration_ms("18446744073709551615", &v), -2);
	assert_int_equal(sl_key_parse_duration_ms("18446744073709551615ms", &v), 0);
	sl_key_format_bytes(out, sizeof out, 1024);
	assert_string_equal(out, "1KB");
	sl_key_format_bytes(out, sizeof out, UINT64_C(3) << 40);
	assert_string_equal(out, "3TB");
	sl_key_format_bytes(out, sizeof out, 1025);
	assert_string_equal(out, "1025");

	assert_int_equal(sl_key_parse_list("", NULL, &list, &why, &bad), 0);
	assert_null(list[0]);
	sl_key_free_list(list);
	assert_int_equal(sl_key_parse_list("x , y", no_spaces, &list, &why, &bad), 0);
	assert_string_equal(list[0], "x");
	assert_string_equal(list[1], "y");
	assert_null(list[2]);
	sl_key_free_list(list);
	assert_int_equal(sl_key_parse_list("x,", NULL, &list, &why, &bad), -1);
	/* Entries are checked as they are split: the bad entry before the empty one. */
	assert_int_equal(sl_key_parse_list("x, a b,,", no_spaces, &list, &why, &bad), -2);
	assert_string_equal(why, "must not contain spaces");
	assert_string_equal(bad, "a b");
	free(bad);
}

static void test_env_expand(void **state)
{
	char err[256], *out = NULL;
	bool expanded;

	(void)state;
	setenv("SLUICE_TEST_A", "aa", 1);
	setenv("SLUICE_TEST_EMPTY", "", 1);
	unsetenv("SLUICE_TEST_UNSET");
	assert_int_equal(sl_env_expand("x${SLUICE_TEST_A}$${y}$$${SLUICE_TEST_EMPTY}", "k", &out,
				       &expanded, err, sizeof err), 0);
	assert_string_equal(out, "xaa${y}$");
	assert_true(expanded);
	sl_secret_free(out);
	assert_int_equal(sl_env_expand("", "k", &out, &expanded, err, sizeof err), 0);
	assert_string_equal(out, "");
	assert_false(expanded);
	sl_secret_free(out);
	assert_int_equal(sl_env_expand("${SLUICE_TEST_UNSET}", "k", &out, &expanded, err,
				       sizeof err), -1);
	assert_string_equal(err, "environment variable \"SLUICE_TEST_UNSET\" is not set (used by key "
			    "\"k\")");
	assert_int_equal(sl_env_expand("$x", "k", &out, &expanded, err, sizeof err), -1);
	assert_string_equal(err, "stray \"$\" in the value of key \"k\": write ${NAME} for an "
			    "environment variable or $$ for a literal $");
	assert_int_equal(sl_env_expand("${1x}", "k", &out, &expanded, err, sizeof err), -1);
	assert_string_equal(err, "bad variable reference in the value of key \"k\": expected "
			    "${NAME}, NAME made of A-Z, a-z, 0-9 and _");
	unsetenv("SLUICE_TEST_A");
	unsetenv("SLUICE_TEST_EMPTY");
	sl_secret_free(NULL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_defaults, setup, teardown),
		cmocka_unit_test_setup_teardown(test_values, setup, teardown),
		cmocka_unit_test_setup_teardown(test_required, setup, teardown),
		cmocka_unit_test_setup_teardown(test_required_typed, setup, teardown),
		cmocka_unit_test_setup_teardown(test_required_untyped, setup, teardown),
		cmocka_unit_test_setup_teardown(test_not_applicable, setup, teardown),
		cmocka_unit_test_setup_teardown(test_unknown, setup, teardown),
		cmocka_unit_test_setup_teardown(test_custom_unknown, setup, teardown),
		cmocka_unit_test_setup_teardown(test_typed_table, setup, teardown),
		cmocka_unit_test_setup_teardown(test_file_order, setup, teardown),
		cmocka_unit_test(test_bad_values),
		cmocka_unit_test_setup_teardown(test_no_secret_in_messages, setup, teardown),
		cmocka_unit_test_setup_teardown(test_excludes, setup, teardown),
		cmocka_unit_test_setup_teardown(test_secret_errors, setup, teardown),
		cmocka_unit_test(test_errors),
		cmocka_unit_test(test_parsers),
		cmocka_unit_test(test_env_expand),
	};

	return cmocka_run_group_tests_name("keytab", tests, NULL, NULL);
}
