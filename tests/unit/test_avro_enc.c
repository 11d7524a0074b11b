/*
 * tests/unit/test_avro_enc.c: the schema JSON and the direct record encoder.
 *
 * The schema is compared with a golden text written from the record layout
 * in DESIGN.md.  Records of typed values are checked for byte identity
 * against avro-c's generic value API, fed with the same values by hand, and
 * serialised with avro_value_write.  A last test prints the cost per
 * 16-column row of both.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <math.h>
#include <string.h>
#include <time.h>

#include <avro.h>
#include <cmocka.h>
#include <jansson.h>

#include "common/buf.h"
#include "sinks/avro/avro_enc.h"
#include "sinks/avro/avro_schema.h"
#include "tests/unit/avro_testlib.h"
#include "tests/unit/fake_source.h"

/* ---------- golden schema ---------- */

static void test_schema_golden_pg(void **state)
{
	static const struct tl_col cols[] = {
		{ "id", T_INT4, -1, "integer", true },
		{ "price", T_NUMERIC, 0, "numeric(10,2)", false },
	};
	static const char want[] =
		"{\"type\":\"record\",\"name\":\"public_t1\",\"namespace\":\"sluice\",\"fields\":["
		"{\"name\":\"uuid\",\"type\":{\"type\":\"string\",\"logicalType\":\"uuid\"}},"
		"{\"name\":\"read_timestamp\",\"type\":{\"type\":\"long\",\"logicalType\":\"timestamp-micros\"}},"
		"{\"name\":\"source_timestamp\",\"type\":{\"type\":\"long\",\"logicalType\":\"timestamp-micros\"}},"
		"{\"name\":\"object\",\"type\":\"string\"},"
		"{\"name\":\"read_method\",\"type\":\"string\"},"
		"{\"name\":\"stream_name\",\"type\":\"string\"},"
		"{\"name\":\"schema_key\",\"type\":\"string\"},"
		"{\"name\":\"sort_keys\",\"type\":{\"type\":\"array\",\"items\":\"string\"}},"
		"{\"name\":\"source_metadata\",\"type\":{\"type\":\"record\",\"name\":\"source_metadata\",\"fields\":["
		"{\"name\":\"schema\",\"type\":\"string\"},"
		"{\"name\":\"table\",\"type\":\"string\"},"
		"{\"name\":\"change_type\",\"type\":\"string\"},"
		"{\"name\":\"is_deleted\",\"type\":\"boolean\"},"
		"{\"name\":\"primary_keys\",\"type\":{\"type\":\"array\",\"items\":\"string\"}},"
		"{\"name\":\"change_sequence_number\",\"type\":\"string\"},"
		"{\"name\":\"tx_id\",\"type\":[\"null\",\"long\"],\"default\":null},"
		"{\"name\":\"unchanged_columns\",\"type\":{\"type\":\"array\",\"items\":\"string\"}},"
		"{\"name\":\"lsn\",\"type\":\"string\"}"
		"]}},"
		"{\"name\":\"payload\",\"type\":{\"type\":\"record\",\"name\":\"payload\",\"fields\":["
		"{\"name\":\"id\",\"type\":[\"null\",\"int\"],\"default\":null,\"sluice.column\":\"id\",\"sluice.source_type\":\"integer\"},"
		"{\"name\":\"price\",\"type\":[\"null\",{\"type\":\"bytes\",\"logicalType\":\"decimal\",\"precision\":10,\"scale\":2}],"
		"\"default\":null,\"sluice.column\":\"price\",\"sluice.source_type\":\"numeric(10,2)\"}"
		"]}}]}";
	struct tl_col c2[2];
	struct sl_table *t;
	struct sl_buf b;
	char err[256];

	(void)state;
	memcpy(c2, cols, sizeof c2);
	c2[1].typmod = numeric_typmod(10, 2);
	t = tl_table("public", "t1", c2, 2);
	sl_buf_init(&b, 0);
	assert_int_equal(sl_avro_schema_json(&b, t, err, sizeof err), 0);
	assert_string_equal(b.data, want);
	sl_buf_free(&b);
	sl_table_free(t);
}

static void test_schema_golden_mysql_and_types(void **state)
{
	static const struct tl_col cols[] = {
		{ "b", T_BOOL, -1, "boolean", true },
		{ "i8", T_INT8, -1, NULL, false },
		{ "f4", T_FLOAT4, -1, "real", false },
		{ "f8", T_FLOAT8, -1, "double precision", false },
		{ "by", T_BYTEA, -1, "bytea", false },
		{ "d", T_DATE, -1, "date", false },
		{ "t", T_TIME, -1, "time without time zone", false },
		{ "ts", T_TIMESTAMP, -1, "timestamp without time zone", false },
		{ "tz", T_TIMESTAMPTZ, -1, "timestamp with time zone", false },
		{ "u", T_UUID, -1, "uuid", false },
		{ "j", T_JSONB, -1, "jsonb", false },
		{ "n", T_NUMERIC, -1, "numeric", false },
	};
	static const char want_meta[] =
		"\"fields\":[{\"name\":\"database\",\"type\":\"string\"},"
		"{\"name\":\"table\",\"type\":\"string\"},"
		"{\"name\":\"change_type\",\"type\":\"string\"},"
		"{\"name\":\"is_deleted\",\"type\":\"boolean\"},"
		"{\"name\":\"primary_keys\",\"type\":{\"type\":\"array\",\"items\":\"string\"}},"
		"{\"name\":\"change_sequence_number\",\"type\":\"string\"},"
		"{\"name\":\"tx_id\",\"type\":[\"null\",\"long\"],\"default\":null},"
		"{\"name\":\"unchanged_columns\",\"type\":{\"type\":\"array\",\"items\":\"string\"}},"
		"{\"name\":\"log_file\",\"type\":\"string\"},"
		"{\"name\":\"log_position\",\"type\":\"long\"},"
		"{\"name\":\"gtid\",\"type\":[\"null\",\"string\"],\"default\":null}]}}";
	static const char *want_fields[] = {
		"{\"name\":\"b\",\"type\":[\"null\",\"boolean\"],\"default\":null,\"sluice.column\":\"b\",\"sluice.source_type\":\"boolean\"}",
		"{\"name\":\"i8\",\"type\":[\"null\",\"long\"],\"default\":null,\"sluice.column\":\"i8\"}",
		"{\"name\":\"f4\",\"type\":[\"null\",\"float\"],",
		"{\"name\":\"f8\",\"type\":[\"null\",\"double\"],",
		"{\"name\":\"by\",\"type\":[\"null\",\"bytes\"],",
		"{\"name\":\"d\",\"type\":[\"null\",{\"type\":\"int\",\"logicalType\":\"date\"}],",
		"{\"name\":\"t\",\"type\":[\"null\",{\"type\":\"long\",\"logicalType\":\"time-micros\"}],",
		"{\"name\":\"ts\",\"type\":[\"null\",{\"type\":\"long\",\"logicalType\":\"timestamp-micros\"}],",
		"{\"name\":\"tz\",\"type\":[\"null\",{\"type\":\"long\",\"logicalType\":\"timestamp-micros\"}],",
		"{\"name\":\"u\",\"type\":[\"null\",{\"type\":\"string\",\"logicalType\":\"uuid\"}],",
		"{\"name\":\"j\",\"type\":[\"null\",{\"type\":\"string\",\"sqlType\":\"JSON\"}],",
		"{\"name\":\"n\",\"type\":[\"null\",\"string\"],\"default\":null,\"sluice.column\":\"n\",\"sluice.source_type\":\"numeric\"}",
	};
	struct sl_table *t = tl_table("shop", "all", cols, (int)(sizeof cols / sizeof cols[0]));
	struct sl_buf b;
	char err[256];

	(void)state;
	/* A binlog-shaped source: its descriptor names the namespace field
	 * "database" and its position fields log_file, log_position, gtid. */
	t->src = &fake_desc;
	sl_buf_init(&b, 0);
	assert_int_equal(sl_avro_schema_json(&b, t, err, sizeof err), 0);
	assert_non_null(strstr(b.data, want_meta));
	for (size_t i = 0; i < sizeof want_fields / sizeof want_fields[0]; i++)
		if (!strstr(b.data, want_fields[i]))
			fail_msg("schema lacks %s", want_fields[i]);
	assert_non_null(strstr(b.data, "\"name\":\"shop_all\""));
	sl_buf_free(&b);
	sl_table_free(t);
}

/* An unsigned 64-bit column (MySQL BIGINT UNSIGNED) is decimal(20,0). */
static void test_schema_uint64(void **state)
{
	struct sl_table *t = sl_table_new("shop", "u");
	struct sl_buf b;
	char err[256];

	(void)state;
	assert_non_null(t);
	assert_int_equal(sl_table_add_column(t, "bu", SL_T_UINT64, 0, 0, 8, -1, "bigint(20) unsigned", true), 0);
	assert_int_equal(sl_table_finish(t), 0);
	t->src = &fake_desc;
	sl_buf_init(&b, 0);
	assert_int_equal(sl_avro_schema_json(&b, t, err, sizeof err), 0);
	assert_non_null(strstr(b.data, "{\"name\":\"bu\",\"type\":[\"null\",{\"type\":\"bytes\","
				       "\"logicalType\":\"decimal\",\"precision\":20,\"scale\":0}],"));
	sl_buf_free(&b);
	sl_table_free(t);
}

/* The reader schema (.schema.avsc): a column with a missing value is
 * [T, "null"] with the value, in T's Avro JSON encoding, as its default;
 * the writer schema keeps ["null", T] and null.  A value JSON cannot carry
 * exactly (NaN) leaves the field as it was. */
static void test_reader_schema_defaults(void **state)
{
	static const struct { const char *name; enum sl_type type; int p, s; struct sl_value v; const char *want; } c[] = {
		{ "i", SL_T_INT32, 0, 0, { .kind = SL_V_INT, .i = -7 },
		  "{\"name\":\"i\",\"type\":[\"int\",\"null\"],\"default\":-7," },
		{ "s", SL_T_STRING, 0, 0, { .kind = SL_V_STRING, .p = "it's \"q\" \\ \xc3\xa9", .len = 13 },
		  "{\"name\":\"s\",\"type\":[\"string\",\"null\"],\"default\":\"it's \\\"q\\\" \\\\ \xc3\xa9\"," },
		{ "d", SL_T_DECIMAL, 10, 2, { .kind = SL_V_DECIMAL, .neg = true, .scale = 2, .p = "1250", .len = 4 },
		  "\"precision\":10,\"scale\":2},\"null\"],\"default\":\"\\u00fb\\u001e\"," },
		{ "b", SL_T_BYTES, 0, 0, { .kind = SL_V_BYTES, .p = "\x00\xff" "A\"", .len = 4 },
		  "{\"name\":\"b\",\"type\":[\"bytes\",\"null\"],\"default\":\"\\u0000\\u00ffA\\u0022\"," },
		{ "ts", SL_T_TIMESTAMPTZ, 0, 0, { .kind = SL_V_TIMESTAMP, .i = 1700000000123456 },
		  "\"logicalType\":\"timestamp-micros\"},\"null\"],\"default\":1700000000123456," },
		{ "ok", SL_T_BOOL, 0, 0, { .kind = SL_V_BOOL, .b = true },
		  "{\"name\":\"ok\",\"type\":[\"boolean\",\"null\"],\"default\":true," },
		{ "f", SL_T_DOUBLE, 0, 0, { .kind = SL_V_DOUBLE, .d = NAN },
		  "{\"name\":\"f\",\"type\":[\"null\",\"double\"],\"default\":null," },
	};
	struct sl_table *t = sl_table_new("public", "m");
	struct sl_buf b, w;
	char err[256];
	int n = (int)(sizeof c / sizeof c[0]);

	(void)state;
	assert_non_null(t);
	for (int i = 0; i < n; i++) {
		assert_int_equal(sl_table_add_column(t, c[i].name, c[i].type, c[i].p, c[i].s, 0, -1, NULL, false), 0);
		assert_int_equal(sl_column_set_missing(&t->cols[i], &c[i].v), 0);
	}
	assert_int_equal(sl_table_finish(t), 0);
	t->src = &fake_desc;
	sl_buf_init(&b, 0);
	sl_buf_init(&w, 0);
	assert_int_equal(sl_avro_reader_schema_json(&b, t, err, sizeof err), 0);
	assert_int_equal(sl_avro_schema_json(&w, t, err, sizeof err), 0);
	for (int i = 0; i < n; i++)
		if (!strstr(b.data, c[i].want))
			fail_msg("column %s: %s not in %s", c[i].name, c[i].want, b.data);
	assert_null(strstr(w.data, "\"null\"],"));
	assert_null(strstr(w.data, "-7"));
	sl_buf_free(&b);
	sl_buf_free(&w);
	sl_table_free(t);
}

/* Names with quotes, backslashes, control characters and bad UTF-8 give
 * valid JSON that keeps the original name in "sluice.column". */
static void test_schema_escaping(void **state)
{
	static const char weird[] = "we\"ird\\na\x01me\n\xc3\xa9\x7f";
	const struct tl_col cols[] = {
		{ weird, T_TEXT, -1, "text", true },
		{ "bad\xff" "utf8", T_TEXT, -1, "te\"xt", false },
		{ "1st col", T_INT4, -1, "integer", false },
	};
	struct sl_table *t = tl_table("my schema", "source_metadata", cols, 3);
	struct sl_buf b;
	json_t *root, *fields, *payload, *pf;
	json_error_t jerr;
	char err[256];
	avro_schema_t as;

	(void)state;
	sl_buf_init(&b, 0);
	assert_int_equal(sl_avro_schema_json(&b, t, err, sizeof err), 0);
	root = json_loadb(b.data, b.len, 0, &jerr);
	if (!root)
		fail_msg("schema is not JSON: %s", jerr.text);
	/* "my schema_source_metadata" -> valid Avro name */
	assert_string_equal(json_string_value(json_object_get(root, "name")), "my_schema_source_metadata");
	fields = json_object_get(root, "fields");
	assert_int_equal(json_array_size(fields), 10);
	payload = json_object_get(json_object_get(json_array_get(fields, 9), "type"), "fields");
	assert_int_equal(json_array_size(payload), 3);
	pf = json_array_get(payload, 0);
	assert_string_equal(json_string_value(json_object_get(pf, "sluice.column")), weird);
	assert_string_equal(json_string_value(json_object_get(pf, "name")), t->cols[0].avro_name);
	pf = json_array_get(payload, 1);
	assert_string_equal(json_string_value(json_object_get(pf, "sluice.column")), "bad\xef\xbf\xbdutf8");
	assert_string_equal(json_string_value(json_object_get(pf, "sluice.source_type")), "te\"xt");
	pf = json_array_get(payload, 2);
	assert_string_equal(json_string_value(json_object_get(pf, "name")), "_31st_20col");
	json_decref(root);
	/* avro-c accepts it too */
	if (avro_schema_from_json_length(b.data, b.len, &as) != 0)
		fail_msg("avro-c rejects the schema: %s", avro_strerror());
	avro_schema_decref(as);
	sl_buf_free(&b);
	sl_table_free(t);

	/* An object named like a nested record gets a suffix. */
	t = tl_table("source", "metadata", cols + 2, 1);
	sl_buf_init(&b, 0);
	assert_int_equal(sl_avro_schema_json(&b, t, err, sizeof err), 0);
	assert_non_null(strstr(b.data, "{\"type\":\"record\",\"name\":\"source_metadata_\","));
	if (avro_schema_from_json_length(b.data, b.len, &as) != 0)
		fail_msg("avro-c rejects the schema: %s", avro_strerror());
	avro_schema_decref(as);
	sl_buf_free(&b);
	sl_table_free(t);
}

/* ---------- byte identity against avro-c ---------- */

struct ref {
	avro_schema_t schema;
	avro_value_iface_t *iface;
	avro_value_t rec;
};

static void ref_init(struct ref *r, const char *json, size_t len)
{
	if (avro_schema_from_json_length(json, len, &r->schema) != 0)
		fail_msg("avro-c: %s", avro_strerror());
	r->iface = avro_generic_class_from_schema(r->schema);
	assert_non_null(r->iface);
	assert_int_equal(avro_generic_value_new(r->iface, &r->rec), 0);
}

static void ref_free(struct ref *r)
{
	avro_value_decref(&r->rec);
	avro_value_iface_decref(r->iface);
	avro_schema_decref(r->schema);
}

static avro_value_t get(avro_value_t *rec, const char *name)
{
	avro_value_t f;

	if (avro_value_get_by_name(rec, name, &f, NULL) != 0)
		fail_msg("avro-c: no field %s: %s", name, avro_strerror());
	return f;
}

static void set_str(avro_value_t *rec, const char *name, const char *s)
{
	avro_value_t f = get(rec, name);
	assert_int_equal(avro_value_set_string(&f, s), 0);
}

static void set_long(avro_value_t *rec, const char *name, int64_t v)
{
	avro_value_t f = get(rec, name);
	assert_int_equal(avro_value_set_long(&f, v), 0);
}

static void set_str_array(avro_value_t *rec, const char *name, const char *const *items)
{
	avro_value_t f = get(rec, name), el;
	assert_int_equal(avro_value_reset(&f), 0);
	for (; items && *items; items++) {
		assert_int_equal(avro_value_append(&f, &el, NULL), 0);
		assert_int_equal(avro_value_set_string(&el, *items), 0);
	}
}

/* Payload field helpers: branch 0 (null) or branch 1 with a typed value. */
static avro_value_t pbranch(avro_value_t *payload, const char *name, int branch)
{
	avro_value_t f = get(payload, name), b;
	assert_int_equal(avro_value_set_branch(&f, branch, &b), 0);
	return b;
}

static void p_null(avro_value_t *p, const char *name)
{
	avro_value_t b = pbranch(p, name, 0);
	assert_int_equal(avro_value_set_null(&b), 0);
}

static void p_int(avro_value_t *p, const char *name, int32_t v)
{
	avro_value_t b = pbranch(p, name, 1);
	assert_int_equal(avro_value_set_int(&b, v), 0);
}

static void p_long(avro_value_t *p, const char *name, int64_t v)
{
	avro_value_t b = pbranch(p, name, 1);
	assert_int_equal(avro_value_set_long(&b, v), 0);
}

static void p_str(avro_value_t *p, const char *name, const char *s)
{
	avro_value_t b = pbranch(p, name, 1);
	assert_int_equal(avro_value_set_string(&b, s), 0);
}

static void p_bytes(avro_value_t *p, const char *name, const void *d, size_t n)
{
	avro_value_t b = pbranch(p, name, 1);
	assert_int_equal(avro_value_set_bytes(&b, (void *)(uintptr_t)d, n), 0);
}

static void p_bool(avro_value_t *p, const char *name, bool v)
{
	avro_value_t b = pbranch(p, name, 1);
	assert_int_equal(avro_value_set_boolean(&b, v), 0);
}

static void p_float(avro_value_t *p, const char *name, float v)
{
	avro_value_t b = pbranch(p, name, 1);
	assert_int_equal(avro_value_set_float(&b, v), 0);
}

static void p_double(avro_value_t *p, const char *name, double v)
{
	avro_value_t b = pbranch(p, name, 1);
	assert_int_equal(avro_value_set_double(&b, v), 0);
}

/* The metadata a test states by hand for one record. */
struct meta {
	const char *uuid;            /* 36 characters */
	int64_t read_ts, source_ts;
	const char *object, *read_method, *stream, *schema_key;
	const char *sort0, *sort1;
	const char *ns, *table, *change_type;
	bool is_deleted;
	const char *const *pks;      /* NULL-terminated */
	const char *csn;
	int64_t tx_id;               /* 0: null */
	const char *const *unchanged;
	const char *lsn;             /* postgres */
	const char *log_file;        /* mysql */
	int64_t log_position;
	const char *gtid;            /* NULL: null */
};

static void ref_meta(struct ref *r, const struct meta *m, bool mysql)
{
	avro_value_t sm = get(&r->rec, "source_metadata"), f, b;
	const char *sk[3] = { m->sort0, m->sort1, NULL };

	set_str(&r->rec, "uuid", m->uuid);
	set_long(&r->rec, "read_timestamp", m->read_ts);
	set_long(&r->rec, "source_timestamp", m->source_ts);
	set_str(&r->rec, "object", m->object);
	set_str(&r->rec, "read_method", m->read_method);
	set_str(&r->rec, "stream_name", m->stream);
	set_str(&r->rec, "schema_key", m->schema_key);
	set_str_array(&r->rec, "sort_keys", sk);
	set_str(&sm, mysql ? "database" : "schema", m->ns);
	set_str(&sm, "table", m->table);
	set_str(&sm, "change_type", m->change_type);
	f = get(&sm, "is_deleted");
	assert_int_equal(avro_value_set_boolean(&f, m->is_deleted), 0);
	set_str_array(&sm, "primary_keys", m->pks);
	set_str(&sm, "change_sequence_number", m->csn);
	f = get(&sm, "tx_id");
	if (m->tx_id) {
		assert_int_equal(avro_value_set_branch(&f, 1, &b), 0);
		assert_int_equal(avro_value_set_long(&b, m->tx_id), 0);
	} else {
		assert_int_equal(avro_value_set_branch(&f, 0, &b), 0);
		assert_int_equal(avro_value_set_null(&b), 0);
	}
	set_str_array(&sm, "unchanged_columns", m->unchanged);
	if (mysql) {
		set_str(&sm, "log_file", m->log_file);
		set_long(&sm, "log_position", m->log_position);
		f = get(&sm, "gtid");
		if (m->gtid) {
			assert_int_equal(avro_value_set_branch(&f, 1, &b), 0);
			assert_int_equal(avro_value_set_string(&b, m->gtid), 0);
		} else {
			assert_int_equal(avro_value_set_branch(&f, 0, &b), 0);
			assert_int_equal(avro_value_set_null(&b), 0);
		}
	} else {
		set_str(&sm, "lsn", m->lsn);
	}
}

/* Serialises r->rec with avro-c and compares it with the direct encoding. */
static void compare(struct ref *r, struct sl_avro_enc *e, const struct sl_change *c)
{
	struct sl_buf b;
	char err[256], *mem;
	size_t sz;
	avro_writer_t w;

	sl_buf_init(&b, 0);
	if (sl_avro_enc_record(e, &b, c, err, sizeof err) != 0)
		fail_msg("encode: %s", err);
	if (avro_value_sizeof(&r->rec, &sz) != 0)
		fail_msg("avro-c sizeof: %s", avro_strerror());
	mem = calloc(1, sz ? sz : 1);
	w = avro_writer_memory(mem, (int64_t)sz);
	if (avro_value_write(w, &r->rec) != 0)
		fail_msg("avro-c write: %s", avro_strerror());
	if (b.len != sz || memcmp(b.data, mem, sz) != 0) {
		size_t i = 0;
		while (i < sz && i < b.len && b.data[i] == mem[i])
			i++;
		fail_msg("%s record differs from avro-c: %zu vs %zu bytes, first difference at %zu",
			 sl_op_name(c->op), b.len, sz, i);
	}
	avro_writer_free(w);
	free(mem);
	sl_buf_free(&b);
}

static void uuid_text(const unsigned char u[16], char out[37])
{
	snprintf(out, 37, "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
		 u[0], u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12],
		 u[13], u[14], u[15]);
}

enum { C_ID, C_CODE, C_FLAG, C_SMALL, C_BIG, C_R, C_D, C_AMOUNT, C_HUGE, C_BLOB, C_DAY, C_TOD,
       C_TS, C_TSTZ, C_U, C_J, C_JS, C_NAME, C_ARR, C_WEIRD, C_FIRST, NCOLS };

static struct sl_table *full_table(void)
{
	const struct tl_col cols[NCOLS] = {
		{ "id", T_INT4, -1, "integer", true },
		{ "code", T_TEXT, -1, "text", true },
		{ "flag", T_BOOL, -1, "boolean", false },
		{ "small", T_INT2, -1, "smallint", false },
		{ "big", T_INT8, -1, "bigint", false },
		{ "r", T_FLOAT4, -1, "real", false },
		{ "d", T_FLOAT8, -1, "double precision", false },
		{ "amount", T_NUMERIC, numeric_typmod(10, 2), "numeric(10,2)", false },
		{ "huge", T_NUMERIC, numeric_typmod(38, 10), "numeric(38,10)", false },
		{ "blob", T_BYTEA, -1, "bytea", false },
		{ "day", T_DATE, -1, "date", false },
		{ "tod", T_TIME, -1, "time without time zone", false },
		{ "ts", T_TIMESTAMP, -1, "timestamp without time zone", false },
		{ "tstz", T_TIMESTAMPTZ, -1, "timestamp with time zone", false },
		{ "u", T_UUID, -1, "uuid", false },
		{ "j", T_JSONB, -1, "jsonb", false },
		{ "js", T_JSON, -1, "json", false },
		{ "name", T_VARCHAR, -1, "character varying(20)", false },
		{ "arr", 1009, -1, "text[]", false },
		{ "we\"ird\\name\n", T_TEXT, -1, "text", false },
		{ "1st col", T_TEXT, -1, "text", false },
	};
	return tl_table("public", "everything", cols, NCOLS);
}

static const unsigned char uuid_bytes[16] = {
	0xa0, 0xee, 0xbc, 0x99, 0x9c, 0x0b, 0x4e, 0xf8, 0xbb, 0x6d, 0x6b, 0xb9, 0xbd, 0x38, 0x0a, 0x11,
};

static const unsigned char huge_bytes[] = {
	0x17, 0xc6, 0xe3, 0xbf, 0xd7, 0x0f, 0xde, 0xea, 0xec, 0x41, 0x71, 0x72, 0xdc, 0xba, 0xc0,
};

static void test_identity_pg(void **state)
{
	struct sl_table *t = full_table();
	struct sl_avro_stats st;
	struct sl_avro_enc *e;
	struct ref r;
	struct sl_value v[NCOLS];
	struct sl_change c;
	struct meta m;
	avro_value_t p;
	char err[256], uu[37];
	const char *sj;
	size_t sjl;
	const char *pks[] = { "id", "code", NULL };
	const char *weird = t->cols[C_WEIRD].avro_name, *first = t->cols[C_FIRST].avro_name;
	/* position 0x16B374D8, seq 1 -> CSN "0000000016B374D8-0000000001", LSN "0/16B374D8" */
	const uint64_t pos = UINT64_C(0x16B374D8);
	const int64_t ts = INT64_C(1706708700000000);

	(void)state;
	memset(&st, 0, sizeof st);
	e = sl_avro_enc_new(t, "orders_stream", err, sizeof err);
	assert_non_null(e);
	sj = sl_avro_enc_schema(e, &sjl);
	ref_init(&r, sj, sjl);
	p = get(&r.rec, "payload");

	/* 1. INSERT with every type */
	v[C_ID] = tl_int(7);
	v[C_CODE] = tl_str("A-1");
	v[C_FLAG] = tl_bool(true);
	v[C_SMALL] = tl_int(-32768);
	v[C_BIG] = tl_int(INT64_C(-9000000000));
	v[C_R] = tl_float(1.5f);
	v[C_D] = tl_double(-0.1);
	v[C_AMOUNT] = tl_dec(true, "50500", 2);                              /* -505.00 */
	v[C_HUGE] = tl_dec(false, "123456789012345678901234567890123456", 10);
	v[C_BLOB] = tl_bytes("\x0a\x0b\xff", 3);
	v[C_DAY] = tl_date(19753);                                          /* 2024-01-31 */
	v[C_TOD] = tl_time(INT64_C(49500500000));                           /* 13:45:00.5 */
	v[C_TS] = tl_ts(INT64_C(1706708700123456));                         /* 2024-01-31 13:45:00.123456 */
	v[C_TSTZ] = tl_ts(INT64_C(1706737500000000));                       /* 2024-01-31 13:45:00-08 */
	v[C_U] = tl_uuid(uuid_bytes);
	v[C_J] = tl_json("{\"k\": [1, 2]}");
	v[C_JS] = tl_json("{\"x\":1}");
	v[C_NAME] = tl_str("h\xc3\xa9llo");
	v[C_ARR] = tl_str("{a,b,\"c d\"}");
	v[C_WEIRD] = tl_str("v");
	v[C_FIRST] = tl_str("");
	tl_change(&c, t, SL_OP_INSERT, v, pos, 1, ts);
	c.tx_id = 4242;
	uuid_text(c.uuid, uu);
	m = (struct meta){
		.uuid = uu, .read_ts = ts + 1500, .source_ts = ts, .object = "public_everything",
		.read_method = "postgresql-cdc-wal", .stream = "orders_stream", .schema_key = t->schema_key,
		.sort0 = "0000000016B374D8", .sort1 = "0000000001", .ns = "public", .table = "everything",
		.change_type = "INSERT", .is_deleted = false, .pks = pks,
		.csn = "0000000016B374D8-0000000001", .tx_id = 4242, .unchanged = NULL, .lsn = "0/16B374D8",
	};
	ref_meta(&r, &m, false);
	p_int(&p, "id", 7);
	p_str(&p, "code", "A-1");
	p_bool(&p, "flag", true);
	p_int(&p, "small", -32768);
	p_long(&p, "big", INT64_C(-9000000000));
	p_float(&p, "r", 1.5f);
	p_double(&p, "d", -0.1);
	p_bytes(&p, "amount", "\xff\x3a\xbc", 3);
	p_bytes(&p, "huge", huge_bytes, sizeof huge_bytes);
	p_bytes(&p, "blob", "\x0a\x0b\xff", 3);
	p_int(&p, "day", 19753);
	p_long(&p, "tod", INT64_C(49500500000));
	p_long(&p, "ts", INT64_C(1706708700123456));
	p_long(&p, "tstz", INT64_C(1706737500000000));
	p_str(&p, "u", "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11");
	p_str(&p, "j", "{\"k\": [1, 2]}");
	p_str(&p, "js", "{\"x\":1}");
	p_str(&p, "name", "h\xc3\xa9llo");
	p_str(&p, "arr", "{a,b,\"c d\"}");
	p_str(&p, weird, "v");
	p_str(&p, first, "");
	compare(&r, e, &c);

	/* 2. UPDATE-INSERT: nulls, two unchanged TOAST columns, a big xid and LSN */
	for (int i = C_FLAG; i < NCOLS; i++)
		v[i] = tl_null();
	v[C_BLOB] = tl_unchanged();
	v[C_J] = tl_unchanged();
	v[C_AMOUNT] = tl_dec(false, "50", 2);                               /* 0.50 */
	v[C_DAY] = tl_date(-735160);                                        /* 0044-03-15 BC */
	v[C_TS] = tl_ts(INT64_C(253402300799999999));                       /* infinity, clamped */
	v[C_TSTZ] = tl_ts(INT64_C(-62135596800000000));                     /* -infinity, clamped */
	v[C_TOD] = tl_time(INT64_C(86400000000));                           /* 24:00:00 */
	tl_change(&c, t, SL_OP_UPDATE_INSERT, v, UINT64_C(0xAB00000001), 42, ts + 1);
	c.tx_id = UINT64_C(1) << 40;
	uuid_text(c.uuid, uu);
	m.source_ts = ts + 1;
	m.read_ts = ts + 1501;
	m.sort0 = "000000AB00000001";
	m.sort1 = "0000000042";
	m.csn = "000000AB00000001-0000000042";
	m.lsn = "AB/1";
	m.change_type = "UPDATE-INSERT";
	m.tx_id = INT64_C(1) << 40;
	m.unchanged = (const char *const[]){ "blob", "j", NULL };
	ref_meta(&r, &m, false);
	for (int i = C_FLAG; i < NCOLS; i++)
		p_null(&p, t->cols[i].avro_name);
	p_bytes(&p, "amount", "\x32", 1);
	p_int(&p, "day", -735160);
	p_long(&p, "ts", INT64_C(253402300799999999));
	p_long(&p, "tstz", INT64_C(-62135596800000000));
	p_long(&p, "tod", INT64_C(86400000000));
	compare(&r, e, &c);

	/* 3. DELETE with only the key, no xid */
	for (int i = 0; i < NCOLS; i++)
		v[i] = tl_null();
	v[C_ID] = tl_int(-7);
	v[C_CODE] = tl_str("B");
	tl_change(&c, t, SL_OP_DELETE, v, pos, 3, ts);
	c.tx_id = 0;
	uuid_text(c.uuid, uu);
	m.uuid = uu;
	m.source_ts = ts;
	m.read_ts = ts + 1500;
	m.sort0 = "0000000016B374D8";
	m.sort1 = "0000000003";
	m.csn = "0000000016B374D8-0000000003";
	m.lsn = "0/16B374D8";
	m.change_type = "DELETE";
	m.is_deleted = true;
	m.tx_id = 0;
	m.unchanged = NULL;
	ref_meta(&r, &m, false);
	for (int i = 0; i < NCOLS; i++)
		p_null(&p, t->cols[i].avro_name);
	p_int(&p, "id", -7);
	p_str(&p, "code", "B");
	compare(&r, e, &c);

	/* 4. TRUNCATE: no values, every payload field null */
	tl_change(&c, t, SL_OP_TRUNCATE, NULL, pos, 4, ts);
	uuid_text(c.uuid, uu);
	m.sort1 = "0000000004";
	m.csn = "0000000016B374D8-0000000004";
	m.change_type = "TRUNCATE";
	m.tx_id = 4242;
	ref_meta(&r, &m, false);
	for (int i = 0; i < NCOLS; i++)
		p_null(&p, t->cols[i].avro_name);
	compare(&r, e, &c);

	/* 5. UPDATE-DELETE with one unchanged column, a decimal NaN (which the
	 * source hands over as null) and a decimal of a smaller scale than the
	 * column's (-505 at scale 0 is -505.00) */
	for (int i = 0; i < NCOLS; i++)
		v[i] = tl_null();
	v[C_ID] = tl_int(8);
	v[C_CODE] = tl_str("C");
	v[C_AMOUNT] = tl_dec(true, "505", 0);
	v[C_WEIRD] = tl_unchanged();
	tl_change(&c, t, SL_OP_UPDATE_DELETE, v, pos, 5, ts);
	uuid_text(c.uuid, uu);
	m.sort1 = "0000000005";
	m.csn = "0000000016B374D8-0000000005";
	m.change_type = "UPDATE-DELETE";
	m.unchanged = (const char *const[]){ "we\"ird\\name\n", NULL };
	ref_meta(&r, &m, false);
	for (int i = 0; i < NCOLS; i++)
		p_null(&p, t->cols[i].avro_name);
	p_int(&p, "id", 8);
	p_str(&p, "code", "C");
	p_bytes(&p, "amount", "\xff\x3a\xbc", 3);
	compare(&r, e, &c);
	assert_true(st.records == 0 && st.files_closed == 0);  /* the encoder counts nothing */

	/* 6. a backfill row: sequence 0, no xid */
	for (int i = 0; i < NCOLS; i++)
		v[i] = tl_null();
	v[C_ID] = tl_int(9);
	tl_change(&c, t, SL_OP_INSERT, v, pos, 0, ts);
	uuid_text(c.uuid, uu);
	m.read_method = "postgresql-backfill";
	m.sort1 = "0000000000";
	m.csn = "0000000016B374D8-0000000000";
	m.change_type = "INSERT";
	m.is_deleted = false;
	m.tx_id = 0;
	m.unchanged = NULL;
	ref_meta(&r, &m, false);
	for (int i = 0; i < NCOLS; i++)
		p_null(&p, t->cols[i].avro_name);
	p_int(&p, "id", 9);
	compare(&r, e, &c);

	ref_free(&r);
	sl_avro_enc_free(e);
	sl_table_free(t);
}

static void test_identity_mysql_nokey(void **state)
{
	const struct tl_col cols[] = {
		{ "note", T_TEXT, -1, "text", false },
		{ "n", T_INT8, -1, "bigint", false },
	};
	struct sl_table *t = tl_table("shop", "log", cols, 2);
	struct sl_avro_enc *e;
	struct ref r;
	struct sl_value v[2];
	struct sl_change c;
	struct sl_position pos = fake_pos(3, 4711);
	struct meta m;
	avro_value_t p;
	char err[256], uu[37];
	const char *sj;
	size_t sjl;

	(void)state;
	t->src = &fake_desc;   /* binlog-shaped positions (tests/unit/fake_source.c) */
	e = sl_avro_enc_new(t, "s", err, sizeof err);
	assert_non_null(e);
	sj = sl_avro_enc_schema(e, &sjl);
	ref_init(&r, sj, sjl);
	p = get(&r.rec, "payload");

	v[0] = tl_str("x");
	v[1] = tl_int(5);
	tl_change(&c, t, SL_OP_INSERT, v, 4711, 2, 0);
	c.read_method = "mysql-cdc-binlog";
	snprintf(pos.text, sizeof pos.text, "0-1-20");
	c.pos = &pos;
	uuid_text(c.uuid, uu);
	m = (struct meta){
		.uuid = uu, .read_ts = 1500, .source_ts = 0, .object = "shop_log",
		.read_method = "mysql-cdc-binlog", .stream = "s", .schema_key = t->schema_key,
		.sort0 = "0000000000001267", .sort1 = "0000000002", .ns = "shop", .table = "log",
		.change_type = "INSERT", .pks = NULL, .csn = "0000000000001267-0000000002",
		.tx_id = 4242, .log_file = "fake-bin.000003", .log_position = 4711, .gtid = "0-1-20",
	};
	ref_meta(&r, &m, true);
	p_str(&p, "note", "x");
	p_long(&p, "n", 5);
	compare(&r, e, &c);

	/* no GTID */
	pos.text[0] = '\0';
	m.gtid = NULL;
	ref_meta(&r, &m, true);
	compare(&r, e, &c);

	ref_free(&r);
	sl_avro_enc_free(e);
	sl_table_free(t);
}

static void test_enc_errors(void **state)
{
	struct sl_table *t = full_table(), *t2;
	const struct tl_col one[] = { { "id", T_INT4, -1, "integer", true } };
	struct sl_avro_enc *e;
	struct sl_value v[NCOLS];
	struct sl_change c;
	struct sl_buf b;
	char err[256];

	(void)state;
	e = sl_avro_enc_new(t, "s", err, sizeof err);
	assert_non_null(e);
	for (int i = 0; i < NCOLS; i++)
		v[i] = tl_null();
	v[C_DAY] = tl_str("2024-01-31");  /* a string where a date belongs */
	tl_change(&c, t, SL_OP_INSERT, v, 1, 1, 0);
	sl_buf_init(&b, 0);
	sl_buf_puts(&b, "prefix");
	assert_int_equal(sl_avro_enc_record(e, &b, &c, err, sizeof err), -1);
	assert_string_equal(err, "column \"day\": a value of kind string does not fit type date");
	assert_int_equal(b.len, 6);  /* left as it was */
	/* so is a value out of its type's range, after earlier fields were written */
	v[C_DAY] = tl_null();
	v[C_FLAG] = tl_bool(false);
	v[C_SMALL] = tl_int(INT64_C(3000000000));
	assert_int_equal(sl_avro_enc_record(e, &b, &c, err, sizeof err), -1);
	assert_string_equal(err, "column \"small\": integer value 3000000000 is out of range for int32");
	assert_int_equal(b.len, 6);
	v[C_SMALL] = tl_null();
	v[C_FLAG] = tl_null();
	/* a change of another table version is refused */
	t2 = tl_table("public", "everything", one, 1);
	v[0] = tl_int(1);
	tl_change(&c, t2, SL_OP_INSERT, v, 1, 1, 0);
	assert_int_equal(sl_avro_enc_record(e, &b, &c, err, sizeof err), -1);
	assert_non_null(strstr(err, "schema key"));
	assert_int_equal(b.len, 6);
	/* so is a change type outside the enum */
	for (int i = 0; i < NCOLS; i++)
		v[i] = tl_null();
	tl_change(&c, t, (enum sl_op)7, v, 1, 1, 0);
	assert_int_equal(sl_avro_enc_record(e, &b, &c, err, sizeof err), -1);
	assert_string_equal(err, "table \"public_everything\": unknown change type 7");
	assert_int_equal(b.len, 6);
	sl_buf_free(&b);
	sl_avro_enc_free(e);
	sl_table_free(t);
	sl_table_free(t2);
}

/* ---------- timing ---------- */

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void test_timing(void **state)
{
	const struct tl_col cols[16] = {
		{ "id", T_INT8, -1, "bigint", true },
		{ "customer", T_TEXT, -1, "text", false },
		{ "email", T_TEXT, -1, "text", false },
		{ "status", T_VARCHAR, -1, "character varying", false },
		{ "qty", T_INT4, -1, "integer", false },
		{ "region", T_INT4, -1, "integer", false },
		{ "weight", T_FLOAT8, -1, "double precision", false },
		{ "score", T_FLOAT8, -1, "double precision", false },
		{ "amount", T_NUMERIC, numeric_typmod(12, 2), "numeric(12,2)", false },
		{ "created", T_TIMESTAMPTZ, -1, "timestamp with time zone", false },
		{ "updated", T_TIMESTAMP, -1, "timestamp without time zone", false },
		{ "day", T_DATE, -1, "date", false },
		{ "paid", T_BOOL, -1, "boolean", false },
		{ "ref", T_UUID, -1, "uuid", false },
		{ "extra", T_JSONB, -1, "jsonb", false },
		{ "version", T_INT8, -1, "bigint", false },
	};
	const char *texts[16] = {
		"123456789", "Jane Q. Customer", "jane@example.com", "shipped", "3", "42", "1.25",
		"0.875", "1234.56", "2024-01-31 13:45:00.123456+00", "2024-01-31 13:45:00.5",
		"2024-01-31", "t", "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11", "{\"gift\": false}", "17",
	};
	const struct sl_value typed[16] = {
		tl_int(123456789), tl_str(texts[1]), tl_str(texts[2]), tl_str(texts[3]), tl_int(3),
		tl_int(42), tl_double(1.25), tl_double(0.875), tl_dec(false, "123456", 2),
		tl_ts(INT64_C(1706708700123456)), tl_ts(INT64_C(1706708700500000)), tl_date(19753),
		tl_bool(true), tl_uuid(uuid_bytes), tl_json(texts[14]), tl_int(17),
	};
	struct sl_table *t = tl_table("public", "orders", cols, 16);
	struct sl_value v[16];
	struct sl_change c;
	struct sl_avro_enc *e;
	struct sl_buf b;
	struct ref r;
	avro_value_t p;
	avro_writer_t w;
	char err[256], *mem;
	const char *sj;
	size_t sjl;
	const int n = 200000;
	double t0, direct, generic;
	const char *pks[] = { "id", NULL };
	struct meta m;

	(void)state;
	for (int i = 0; i < 16; i++)
		v[i] = typed[i];
	tl_change(&c, t, SL_OP_INSERT, v, UINT64_C(0x16B374D8), 1, INT64_C(1706708700000000));
	e = sl_avro_enc_new(t, "s", err, sizeof err);
	assert_non_null(e);
	sl_buf_init(&b, 0);
	t0 = now_s();
	for (int i = 0; i < n; i++) {
		if ((i & 255) == 0)
			sl_buf_reset(&b);
		c.seq = (uint32_t)i;
		if (sl_avro_enc_record(e, &b, &c, err, sizeof err) != 0)
			fail_msg("%s", err);
	}
	direct = (now_s() - t0) / n * 1e6;

	/* avro-c: the same typed values. */
	sj = sl_avro_enc_schema(e, &sjl);
	ref_init(&r, sj, sjl);
	p = get(&r.rec, "payload");
	mem = calloc(1, 1 << 20);
	w = avro_writer_memory(mem, 1 << 20);
	m = (struct meta){
		.uuid = "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11", .read_ts = 1, .source_ts = 2,
		.object = "public_orders", .read_method = "postgresql-cdc-wal", .stream = "s",
		.schema_key = t->schema_key, .sort0 = "0000000016B374D8", .sort1 = "0000000001",
		.ns = "public", .table = "orders", .change_type = "INSERT", .pks = pks,
		.csn = "0000000016B374D8-0000000001", .tx_id = 4242, .lsn = "0/16B374D8",
	};
	t0 = now_s();
	for (int i = 0; i < n; i++) {
		if ((i & 255) == 0)
			avro_writer_reset(w);
		ref_meta(&r, &m, false);
		p_long(&p, "id", 123456789);
		p_str(&p, "customer", texts[1]);
		p_str(&p, "email", texts[2]);
		p_str(&p, "status", texts[3]);
		p_int(&p, "qty", 3);
		p_int(&p, "region", 42);
		p_double(&p, "weight", 1.25);
		p_double(&p, "score", 0.875);
		p_bytes(&p, "amount", "\x01\xe2\x40", 3);
		p_long(&p, "created", INT64_C(1706708700123456));
		p_long(&p, "updated", INT64_C(1706708700500000));
		p_int(&p, "day", 19753);
		p_bool(&p, "paid", true);
		p_str(&p, "ref", texts[13]);
		p_str(&p, "extra", texts[14]);
		p_long(&p, "version", 17);
		if (avro_value_write(w, &r.rec) != 0)
			fail_msg("avro-c: %s", avro_strerror());
	}
	generic = (now_s() - t0) / n * 1e6;
	printf("# encoder timing, 16-column row of typed values: direct %.3f us/row, "
	       "avro-c generic %.3f us/row\n", direct, generic);
	avro_writer_free(w);
	free(mem);
	ref_free(&r);
	sl_buf_free(&b);
	sl_avro_enc_free(e);
	sl_table_free(t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_schema_golden_pg),
		cmocka_unit_test(test_schema_golden_mysql_and_types),
		cmocka_unit_test(test_schema_uint64),
		cmocka_unit_test(test_schema_escaping),
		cmocka_unit_test(test_reader_schema_defaults),
		cmocka_unit_test(test_identity_pg),
		cmocka_unit_test(test_identity_mysql_nokey),
		cmocka_unit_test(test_enc_errors),
		cmocka_unit_test(test_timing),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
