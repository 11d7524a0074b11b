/*
 * tests/unit/test_source_keys.c: the stream keys a source owns
 * (sl_source_ops.stream_conf_keys, stream_conf_size, stream_conf_check):
 * every source's table against its stream_keys, and the PostgreSQL table
 * (slot, publication) applied to its own struct, with its defaults and
 * messages.  Sections are built by hand with sl_ini_add(), as the agent's
 * reader builds them; test_config.c checks the same keys through a whole
 * configuration file.
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
#include "sources/mysql/my_source.h"
#include "sources/postgres/pg_source.h"
#include "sources/source_conf.h"

struct fx {
	struct sl_ini_section sec;
	struct sl_keyerr er;
	char err[512];
	struct sl_pg_stream_conf conf;
};

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof *f);

	if (!f)
		return -1;
	f->sec.title = strdup("stream.Orders-EU");
	f->sec.line = 7;
	sl_keyerr_init(&f->er, "s.ini", f->err, sizeof f->err);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;
	const struct sl_source_ops *ops = &sl_pg_source_ops;

	sl_keytab_free(ops->stream_conf_keys, ops->stream_conf_nkeys, &f->conf);
	sl_ini_section_free(&f->sec);
	free(f);
	return 0;
}

static void add(struct fx *f, const char *key, const char *raw, int line)
{
	char *v = strdup(raw);

	assert_non_null(v);
	assert_int_equal(sl_ini_add(&f->sec, key, raw, v, false, line), 0);
}

/* The postgres stream conf of f's section, as the agent applies it:
 * the table, then the check with the stream's name. */
static int apply(struct fx *f, const char *stream)
{
	const struct sl_source_ops *ops = &sl_pg_source_ops;
	struct sl_keyapply how = { .type_name = ops->type, .typed = true };

	if (sl_keytab_apply(&f->er, ops->stream_conf_keys, ops->stream_conf_nkeys, &f->sec, &f->conf, &how) < 0)
		return -1;
	return ops->stream_conf_check(&f->conf, &f->sec, stream, &f->er);
}

/* Each source's own stream keys are among the stream keys it takes (the
 * agent refuses them in streams from other sources by that list), and the
 * registry knows them. */
static void test_every_source(void **state)
{
	(void)state;
	for (size_t i = 0; i < sl_source_count(); i++) {
		const struct sl_source_ops *ops = sl_source_at(i);
		assert_true((ops->stream_conf_nkeys == 0) == (ops->stream_conf_size == 0));
		for (size_t k = 0; k < ops->stream_conf_nkeys; k++) {
			const char *name = ops->stream_conf_keys[k].name;
			bool listed = false;
			for (const char *const *s = ops->stream_keys; s && *s; s++)
				listed = listed || !strcmp(*s, name);
			assert_true(listed);
			assert_true(sl_source_has_stream_key(name));
			assert_true(ops->stream_conf_keys[k].off + ops->stream_conf_keys[k].size <= ops->stream_conf_size);
		}
	}
	assert_false(sl_source_has_stream_key("tables"));
	assert_false(sl_source_has_stream_key("key_columns"));  /* the agent's row */
}

static void test_pg_table(void **state)
{
	const struct sl_source_ops *ops = &sl_pg_source_ops;

	(void)state;
	assert_int_equal(ops->stream_conf_nkeys, 2);
	assert_string_equal(ops->stream_conf_keys[0].name, "slot");
	assert_string_equal(ops->stream_conf_keys[1].name, "publication");
	assert_int_equal(ops->stream_conf_size, sizeof(struct sl_pg_stream_conf));
	assert_non_null(ops->stream_conf_check);
	/* MySQL streams have no keys of their source's own. */
	assert_int_equal(sl_my_source_ops.stream_conf_nkeys, 0);
	assert_null(sl_my_source_ops.stream_conf_keys);
	assert_null(sl_my_source_ops.stream_conf_check);
}

static void test_pg_defaults(void **state)
{
	struct fx *f = *state;

	assert_int_equal(apply(f, "Orders-EU"), 0);
	assert_string_equal(f->conf.slot, "sluice_orders_eu");
	assert_string_equal(f->conf.publication, "sluice_orders_eu");
}

static void test_pg_given(void **state)
{
	struct fx *f = *state;

	add(f, "publication", "pub_orders", 9);
	add(f, "slot", "custom_1", 8);
	assert_int_equal(apply(f, "Orders-EU"), 0);
	assert_string_equal(f->conf.slot, "custom_1");
	assert_string_equal(f->conf.publication, "pub_orders");
}

static void test_pg_slot_only(void **state)
{
	struct fx *f = *state;

	add(f, "slot", "custom_1", 8);
	assert_int_equal(apply(f, "Orders-EU"), 0);
	assert_string_equal(f->conf.publication, "custom_1");
}

static void test_pg_bad_values(void **state)
{
	struct fx *f = *state;

	add(f, "slot", "Sluice", 8);
	assert_int_equal(apply(f, "o"), -1);
	assert_int_equal(f->er.line, 8);
	assert_string_equal(f->err, "s.ini:8: bad value \"Sluice\" for key \"slot\": a replication slot name is "
			    "1-63 characters of a-z, 0-9 and _");
}

static void test_pg_bad_publication(void **state)
{
	struct fx *f = *state;
	char name[80];

	memset(name, 'p', 64);
	name[64] = '\0';
	add(f, "publication", name, 9);
	assert_int_equal(apply(f, "o"), -1);
	assert_int_equal(f->er.line, 9);
	assert_non_null(strstr(f->err, "must be at most 63 characters"));
}

static void test_pg_default_too_long(void **state)
{
	struct fx *f = *state;
	char name[80];

	memset(name, 'a', 60);
	name[60] = '\0';
	assert_int_equal(apply(f, name), -1);
	assert_int_equal(f->er.line, 7);
	assert_non_null(strstr(f->err, "s.ini:7: the default slot name \"sluice_aaaa"));
	assert_non_null(strstr(f->err, "\" of [stream.Orders-EU] is not a valid replication slot name (1-63 "
			       "characters of a-z, 0-9 and _): set slot explicitly"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_every_source),
		cmocka_unit_test(test_pg_table),
		cmocka_unit_test_setup_teardown(test_pg_defaults, setup, teardown),
		cmocka_unit_test_setup_teardown(test_pg_given, setup, teardown),
		cmocka_unit_test_setup_teardown(test_pg_slot_only, setup, teardown),
		cmocka_unit_test_setup_teardown(test_pg_bad_values, setup, teardown),
		cmocka_unit_test_setup_teardown(test_pg_bad_publication, setup, teardown),
		cmocka_unit_test_setup_teardown(test_pg_default_too_long, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
