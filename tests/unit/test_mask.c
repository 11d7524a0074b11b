/*
 * tests/unit/test_mask.c: column selection and masking (schema/mask.c):
 * the rules' syntax and glob matching, the masked table a destination sees,
 * each method on edge values (empty, NULL, unchanged, multibyte, binary,
 * truncate beyond the value), the bytes each value kind stands for, and the
 * hash against HMAC-SHA-256 computed here from its definition (RFC 2104)
 * over plain SHA-256, and against RFC 4231's test case 2.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>
#include <nettle/sha2.h>

#include "common/buf.h"
#include "common/util.h"
#include "schema/mask.h"
#include "schema/schema.h"

/* HMAC-SHA-256 by RFC 2104: H((K ^ opad) || H((K ^ ipad) || m)), K padded
 * to the 64-byte block (a longer key is hashed first), as hex. */
static void hmac_by_hand(const char *key, const void *msg, size_t len, char hex[65])
{
	uint8_t k[64] = { 0 }, pad[64], inner[32], out[32];
	struct sha256_ctx c;

	if (strlen(key) > 64) {
		sha256_init(&c);
		sha256_update(&c, strlen(key), (const uint8_t *)key);
		sha256_digest(&c, 32, k);
	} else {
		memcpy(k, key, strlen(key));
	}
	for (int i = 0; i < 64; i++)
		pad[i] = k[i] ^ 0x36;
	sha256_init(&c);
	sha256_update(&c, 64, pad);
	sha256_update(&c, len, msg);
	sha256_digest(&c, 32, inner);
	for (int i = 0; i < 64; i++)
		pad[i] = k[i] ^ 0x5c;
	sha256_init(&c);
	sha256_update(&c, 64, pad);
	sha256_update(&c, 32, inner);
	sha256_digest(&c, 32, out);
	for (int i = 0; i < 32; i++)
		snprintf(hex + 2 * i, 3, "%02x", out[i]);
}

static struct sl_mask *mk_mask(char **exclude, char **mask, const char *key)
{
	struct sl_mask *m = NULL;
	char err[256];

	assert_int_equal(sl_mask_new(&m, exclude, mask, key, err, sizeof err), 0);
	assert_non_null(m);
	return m;
}

static struct sl_value str(const char *s, size_t len)
{
	struct sl_value v = { .kind = SL_V_STRING, .len = (uint32_t)len, .p = s };

	return v;
}

/* public.users(id bigint key, email text, name text, photo bytea, born date) */
static struct sl_table *users(void)
{
	struct sl_table *t = sl_table_new("public", "users");

	assert_non_null(t);
	assert_int_equal(sl_table_add_column(t, "id", SL_T_INT64, 0, 0, 20, -1, "bigint", true), 0);
	assert_int_equal(sl_table_add_column(t, "email", SL_T_STRING, 0, 0, 25, -1, "text", false), 0);
	assert_int_equal(sl_table_add_column(t, "name", SL_T_STRING, 0, 0, 25, -1, "text", false), 0);
	assert_int_equal(sl_table_add_column(t, "photo", SL_T_BYTES, 0, 0, 17, -1, "bytea", false), 0);
	assert_int_equal(sl_table_add_column(t, "born", SL_T_DATE, 0, 0, 1082, -1, "date", false), 0);
	assert_int_equal(sl_table_finish(t), 0);
	return t;
}

static void test_rule_syntax(void **state)
{
	(void)state;
	assert_null(sl_mask_rule_check("public.users.email", false));
	assert_null(sl_mask_rule_check("*.*.card_*", false));
	assert_non_null(sl_mask_rule_check("public.users", false));
	assert_non_null(sl_mask_rule_check(".users.email", false));
	assert_non_null(sl_mask_rule_check("public..email", false));
	assert_non_null(sl_mask_rule_check("public.users.", false));
	assert_null(sl_mask_rule_check("public.users.email:hash", true));
	assert_null(sl_mask_rule_check("public.users.email:null", true));
	assert_null(sl_mask_rule_check("public.users.email:redact", true));
	assert_null(sl_mask_rule_check("public.users.email:truncate(0)", true));
	assert_null(sl_mask_rule_check("public.users.email:truncate(12)", true));
	assert_non_null(sl_mask_rule_check("public.users.email", true));
	assert_non_null(sl_mask_rule_check("public.users.email:md5", true));
	assert_non_null(sl_mask_rule_check("public.users.email:truncate()", true));
	assert_non_null(sl_mask_rule_check("public.users.email:truncate(-1)", true));
	assert_non_null(sl_mask_rule_check("public.users.email:truncate(3", true));
	assert_non_null(sl_mask_rule_check("public.users.email:truncate(2000000)", true));
	assert_non_null(sl_mask_rule_check("public.users:hash", true));
}

static void test_glob_matching(void **state)
{
	char *ex[] = { "pub*.us?rs.pho[a-z]o", "other.*.*", NULL };
	char *mk[] = { "*.users.e*:hash", "public.users.email:null", "*.*.name:truncate(3)", NULL };
	struct sl_mask *m = mk_mask(ex, mk, "k");
	uint32_t n = 99;

	(void)state;
	assert_int_equal(sl_mask_column(m, "public", "users", "photo", &n), SL_MASK_EXCLUDE);
	assert_int_equal(sl_mask_column(m, "other", "x", "email", &n), SL_MASK_EXCLUDE);  /* exclusion wins */
	assert_int_equal(sl_mask_column(m, "public", "users", "email", &n), SL_MASK_HASH); /* first mask rule */
	assert_int_equal(sl_mask_column(m, "shop", "users", "name", &n), SL_MASK_TRUNCATE);
	assert_int_equal(n, 3);
	assert_int_equal(sl_mask_column(m, "public", "users", "id", &n), SL_MASK_KEEP);
	assert_int_equal(sl_mask_column(m, "public", "user", "email", &n), SL_MASK_KEEP);
	assert_int_equal(sl_mask_column(m, "Public", "users", "photo", &n), SL_MASK_KEEP);  /* case matters */
	/* each part is matched on its own, so a name may hold a dot */
	assert_int_equal(sl_mask_column(m, "public.x", "users", "photo", &n), SL_MASK_EXCLUDE);
	assert_int_equal(sl_mask_column(m, "other", "a.b", "c.d", &n), SL_MASK_EXCLUDE);
	sl_mask_free(m);
}

static void test_hash_needs_key(void **state)
{
	char *mk[] = { "a.b.c:hash", NULL };
	struct sl_mask *m = (struct sl_mask *)1;
	char err[256];

	(void)state;
	assert_int_equal(sl_mask_new(&m, NULL, mk, NULL, err, sizeof err), -1);
	assert_non_null(strstr(err, "mask_key_env"));
	assert_int_equal(sl_mask_new(&m, NULL, NULL, "k", err, sizeof err), 0);
	assert_null(m);  /* no rule: no masking at all */
}

static void test_masked_table(void **state)
{
	char *ex[] = { "public.users.photo", NULL };
	char *mk[] = { "public.users.email:hash", "public.users.name:truncate(2)", "public.users.born:null",
		       "public.users.id:hash", NULL };
	struct sl_mask *m = mk_mask(ex, mk, "k");
	struct sl_table *t = users();
	struct sl_masked *pm = NULL;
	char err[256];

	(void)state;
	assert_int_equal(sl_mask_table(m, t, &pm, err, sizeof err), 0);
	assert_non_null(pm);
	assert_int_equal(pm->t->ncols, 4);
	assert_string_equal(pm->t->cols[0].name, "id");
	assert_true(pm->t->cols[0].is_key);
	assert_int_equal(pm->t->cols[0].type, SL_T_STRING);
	assert_string_equal(pm->t->cols[1].name, "email");
	assert_int_equal(pm->t->cols[1].type, SL_T_STRING);
	assert_non_null(strstr(pm->t->cols[1].doc, "hash"));
	assert_string_equal(pm->t->cols[2].name, "name");
	assert_non_null(strstr(pm->t->cols[2].doc, "truncate(2)"));
	assert_string_equal(pm->t->cols[3].name, "born");
	assert_int_equal(pm->from[3], 4);
	assert_string_equal(pm->t->object, "public_users");
	assert_string_not_equal(pm->t->schema_key, t->schema_key);
	for (int i = 0; i < sl_mask_nrules(m); i++)
		assert_true(sl_mask_rule_used(m, i));
	sl_masked_free(pm, true);
	sl_mask_free(m);
	sl_table_free(t);
}

static void test_no_rule_matches_table(void **state)
{
	char *ex[] = { "public.orders.note", NULL };
	struct sl_mask *m = mk_mask(ex, NULL, NULL);
	struct sl_table *t = users();
	struct sl_masked *pm = (struct sl_masked *)1;
	char err[256];

	(void)state;
	assert_int_equal(sl_mask_table(m, t, &pm, err, sizeof err), 0);
	assert_null(pm);
	assert_false(sl_mask_rule_used(m, 0));
	sl_mask_free(m);
	sl_table_free(t);
}

static void test_key_cannot_be_excluded(void **state)
{
	char *ex[] = { "public.users.i*", NULL };
	struct sl_mask *m = mk_mask(ex, NULL, NULL);
	struct sl_table *t = users();
	struct sl_masked *pm = NULL;
	char err[256];

	(void)state;
	assert_int_equal(sl_mask_table(m, t, &pm, err, sizeof err), SL_ECONFIG);
	assert_null(pm);
	assert_non_null(strstr(err, "\"id\""));
	assert_non_null(strstr(err, "\"public\".\"users\""));
	sl_mask_free(m);
	sl_table_free(t);
}

/* Only hash keeps keys apart: null, truncate and redact of a key column are
 * refused too. */
static void test_key_only_hashed(void **state)
{
	static const char *const methods[] = { "null", "truncate(1)", "redact" };
	struct sl_table *t = users();
	struct sl_masked *pm = NULL;
	char err[256], rule[64];

	(void)state;
	for (size_t i = 0; i < 3; i++) {
		char *mk[] = { rule, NULL };
		struct sl_mask *m;
		snprintf(rule, sizeof rule, "public.users.id:%s", methods[i]);
		m = mk_mask(NULL, mk, NULL);
		assert_int_equal(sl_mask_table(m, t, &pm, err, sizeof err), SL_ECONFIG);
		assert_null(pm);
		assert_non_null(strstr(err, "cannot be masked but by hash"));
		assert_non_null(strstr(err, rule));
		sl_mask_free(m);
	}
	sl_table_free(t);
}

/* Masks one row of users() with the rules and returns the masked table. */
static struct sl_masked *mask_row(struct sl_mask *m, struct sl_table *t, const struct sl_value *in,
				  struct sl_value *out, struct sl_buf *scratch)
{
	struct sl_masked *pm = NULL;
	char err[256];

	assert_int_equal(sl_mask_table(m, t, &pm, err, sizeof err), 0);
	assert_non_null(pm);
	assert_int_equal(sl_mask_values(m, pm, in, out, scratch), 0);
	return pm;
}

static void test_methods_edges(void **state)
{
	char *mk[] = { "*.*.email:hash", "*.*.name:truncate(2)", "*.*.photo:truncate(3)", "*.*.born:redact",
		       NULL };
	struct sl_mask *m = mk_mask(NULL, mk, "secret");
	struct sl_table *t = users();
	struct sl_value in[5], out[5];
	struct sl_buf scratch;
	struct sl_masked *pm;
	char hex[65];

	(void)state;
	sl_buf_init(&scratch, 0);
	/* empty string, multibyte characters, binary with a NUL, a date */
	in[0] = (struct sl_value){ .kind = SL_V_INT, .i = 7 };
	in[1] = str("", 0);
	in[2] = str("\xc3\xa9t\xc3\xa9", 5);               /* "été": 3 characters, 5 bytes */
	in[3] = (struct sl_value){ .kind = SL_V_BYTES, .len = 5, .p = "\x00\xff\x01\x02\x03" };
	in[4] = (struct sl_value){ .kind = SL_V_DATE, .i = 0 };
	pm = mask_row(m, t, in, out, &scratch);
	assert_int_equal(out[0].kind, SL_V_INT);
	assert_int_equal(out[0].i, 7);
	hmac_by_hand("secret", "", 0, hex);
	assert_int_equal(out[1].kind, SL_V_STRING);
	assert_int_equal(out[1].len, 64);
	assert_memory_equal(out[1].p, hex, 64);
	assert_int_equal(out[2].len, 3);                   /* "ét": 2 characters */
	assert_memory_equal(out[2].p, "\xc3\xa9t", 3);
	assert_int_equal(out[3].kind, SL_V_BYTES);
	assert_int_equal(out[3].len, 3);
	assert_memory_equal(out[3].p, "\x00\xff\x01", 3);
	assert_int_equal(out[4].kind, SL_V_STRING);
	assert_int_equal(out[4].len, strlen(SL_MASK_REDACTED));
	assert_memory_equal(out[4].p, SL_MASK_REDACTED, out[4].len);

	/* shorter than the truncation, NULL and unchanged stay as they are */
	in[1] = (struct sl_value){ .kind = SL_V_UNCHANGED };
	in[2] = str("a", 1);
	in[3] = (struct sl_value){ .kind = SL_V_BYTES, .len = 1, .p = "\x80" };
	in[4] = (struct sl_value){ .kind = SL_V_NULL };
	assert_int_equal(sl_mask_values(m, pm, in, out, &scratch), 0);
	assert_int_equal(out[1].kind, SL_V_UNCHANGED);
	assert_int_equal(out[2].len, 1);
	assert_memory_equal(out[2].p, "a", 1);
	assert_int_equal(out[3].len, 1);
	assert_int_equal(out[4].kind, SL_V_NULL);

	/* binary hashed as its raw bytes, a long multibyte string */
	in[1] = (struct sl_value){ .kind = SL_V_BYTES, .len = 4, .p = "\x00\x01\xfe\xff" };
	in[2] = str("\xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e", 9);  /* 3 characters of 3 bytes */
	assert_int_equal(sl_mask_values(m, pm, in, out, &scratch), 0);
	hmac_by_hand("secret", "\x00\x01\xfe\xff", 4, hex);
	assert_memory_equal(out[1].p, hex, 64);
	assert_int_equal(out[2].len, 6);
	sl_masked_free(pm, true);
	sl_buf_free(&scratch);
	sl_mask_free(m);
	sl_table_free(t);
}

/* RFC 4231 test case 2, and a key longer than a block, by hand. */
static void test_hmac_vectors(void **state)
{
	char *mk[] = { "*.*.email:hash", NULL };
	static const char long_key[] = "0123456789012345678901234567890123456789012345678901234567890123456789";
	struct sl_mask *m = mk_mask(NULL, mk, "Jefe");
	struct sl_table *t = users();
	struct sl_value in[5] = { 0 }, out[5];
	struct sl_buf scratch;
	struct sl_masked *pm;
	char hex[65];

	(void)state;
	sl_buf_init(&scratch, 0);
	in[1] = str("what do ya want for nothing?", 28);
	pm = mask_row(m, t, in, out, &scratch);
	assert_memory_equal(out[1].p, "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843", 64);
	hmac_by_hand("Jefe", "what do ya want for nothing?", 28, hex);
	assert_memory_equal(out[1].p, hex, 64);
	sl_masked_free(pm, true);
	sl_mask_free(m);

	m = mk_mask(NULL, mk, long_key);
	in[1] = str("x", 1);
	pm = mask_row(m, t, in, out, &scratch);
	hmac_by_hand(long_key, "x", 1, hex);
	assert_memory_equal(out[1].p, hex, 64);
	sl_masked_free(pm, true);
	sl_mask_free(m);
	sl_buf_free(&scratch);
	sl_table_free(t);
}

static void text_is(const struct sl_value *v, const char *want)
{
	struct sl_buf b;

	sl_buf_init(&b, 0);
	assert_int_equal(sl_mask_value_text(&b, v), 0);
	sl_buf_append(&b, "", 0);
	assert_string_equal(b.data, want);
	sl_buf_free(&b);
}

static void test_value_text(void **state)
{
	static const unsigned char u[16] = { 0x12, 0x34, 0x56, 0x78, 0x9a, 0xbc, 0xde, 0xf0,
					     0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef };
	(void)state;
	text_is(&(struct sl_value){ .kind = SL_V_BOOL, .b = true }, "true");
	text_is(&(struct sl_value){ .kind = SL_V_BOOL, .b = false }, "false");
	text_is(&(struct sl_value){ .kind = SL_V_INT, .i = INT64_MIN }, "-9223372036854775808");
	text_is(&(struct sl_value){ .kind = SL_V_UINT, .u = UINT64_MAX }, "18446744073709551615");
	text_is(&(struct sl_value){ .kind = SL_V_DOUBLE, .d = 0.1 }, "0.10000000000000001");
	text_is(&(struct sl_value){ .kind = SL_V_DOUBLE, .d = -1.0 / 0.0 }, "-Infinity");
	text_is(&(struct sl_value){ .kind = SL_V_FLOAT, .f = 1.5f }, "1.5");
	text_is(&(struct sl_value){ .kind = SL_V_DECIMAL, .neg = true, .scale = 2, .len = 1, .p = "5" }, "-0.05");
	text_is(&(struct sl_value){ .kind = SL_V_DECIMAL, .scale = 2, .len = 3, .p = "310" }, "3.10");
	text_is(&(struct sl_value){ .kind = SL_V_DECIMAL, .scale = 0, .len = 2, .p = "12" }, "12");
	text_is(&(struct sl_value){ .kind = SL_V_DATE, .i = 0 }, "1970-01-01");
	text_is(&(struct sl_value){ .kind = SL_V_DATE, .i = -1 }, "1969-12-31");
	text_is(&(struct sl_value){ .kind = SL_V_DATE, .i = sl_days_from_civil(2024, 2, 29) }, "2024-02-29");
	text_is(&(struct sl_value){ .kind = SL_V_DATE, .i = sl_days_from_civil(-44, 3, 15) }, "-0044-03-15");
	text_is(&(struct sl_value){ .kind = SL_V_TIME, .i = 3723000004 }, "01:02:03.000004");
	text_is(&(struct sl_value){ .kind = SL_V_TIMESTAMP, .i = -1 }, "1969-12-31T23:59:59.999999Z");
	text_is(&(struct sl_value){ .kind = SL_V_TIMESTAMP, .i = 951782400000000 + 1 },
		"2000-02-29T00:00:00.000001Z");
	text_is(&(struct sl_value){ .kind = SL_V_UUID, .len = 16, .p = (const char *)u },
		"12345678-9abc-def0-0123-456789abcdef");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_rule_syntax),
		cmocka_unit_test(test_glob_matching),
		cmocka_unit_test(test_hash_needs_key),
		cmocka_unit_test(test_masked_table),
		cmocka_unit_test(test_no_rule_matches_table),
		cmocka_unit_test(test_key_cannot_be_excluded),
		cmocka_unit_test(test_key_only_hashed),
		cmocka_unit_test(test_methods_edges),
		cmocka_unit_test(test_hmac_vectors),
		cmocka_unit_test(test_value_text),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
