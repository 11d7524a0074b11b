/*
 * tests/unit/test_iceberg_meta.c: the Iceberg table metadata the iceberg
 * sink writes (sinks/iceberg/ice_meta.h), compared with
 * tests/unit/golden/iceberg_v1.metadata.json, written by hand from the
 * Iceberg table specification (format version 2); the field ids of an added
 * column; a dropped column, and one added again under its name, compared
 * with tests/unit/golden/iceberg_dropped.metadata.json (written by hand);
 * a dropped table's TRUNCATE marker; widening in place, compared with
 * tests/unit/golden/iceberg_widened.metadata.json (written by hand), and an
 * older file's values converted to the wider type (ice_widen.h); a column
 * an older table version lacks kept (ice_schema_of_version); the
 * changes a table refuses; the Avro schema of the data files;
 * merge mode's schema, equality delete file, delete manifest and manifest
 * list entry, compared with tests/unit/golden/iceberg_merge_deletes.json
 * (also written by hand from the specification), read back with avro-c;
 * a data file's column statistics in its manifest entry, compared with
 * tests/unit/golden/iceberg_manifest_stats.json (written by hand), and a
 * float's and a double's (NaN counts, bounds), encoded by hand, and the
 * order of the bounds over many records; the
 * readers of manifests and manifest lists against the writers, a
 * schema read back from its JSON, and the metadata-log trimmed as the
 * table properties on old metadata files say.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <jansson.h>

#include "common/buf.h"
#include "common/util.h"
#include "schema/schema.h"
#include "sinks/avro/avro_read.h"
#include "sinks/avro/avro_value.h"
#include "sinks/iceberg/ice_meta.h"
#include "sinks/iceberg/ice_stats.h"
#include "sinks/iceberg/ice_widen.h"

/* public.orders (id int4, amount numeric(10,2), _note text, at timestamptz),
 * with extra columns added after them. */
static struct sl_table *orders(int extra)
{
	struct sl_table *t = sl_table_new("public", "orders");

	assert_non_null(t);
	assert_int_equal(sl_table_add_column(t, "id", SL_T_INT32, 0, 0, 23, -1, "integer", true), 0);
	assert_int_equal(sl_table_add_column(t, "amount", SL_T_DECIMAL, 10, 2, 1700, -1, "numeric(10,2)", false), 0);
	assert_int_equal(sl_table_add_column(t, "_note", SL_T_STRING, 0, 0, 25, -1, "text", false), 0);
	assert_int_equal(sl_table_add_column(t, "at", SL_T_TIMESTAMPTZ, 0, 0, 1184, -1, "timestamptz", false), 0);
	if (extra > 0)
		assert_int_equal(sl_table_add_column(t, "u", SL_T_UUID, 0, 0, 2950, -1, "uuid", false), 0);
	if (extra > 1)
		assert_int_equal(sl_table_add_column(t, "big", SL_T_DECIMAL, 60, 3, 1700, -1, "numeric(60,3)",
						     false), 0);
	assert_int_equal(sl_table_finish(t), 0);
	return t;
}

static json_t *golden(const char *name)
{
	const char *top = getenv("SLUICE_TOP_SRCDIR");
	char path[4096];
	json_error_t je;
	json_t *j;

	snprintf(path, sizeof path, "%s/tests/unit/golden/%s", top ? top : ".", name);
	j = json_load_file(path, 0, &je);
	if (!j)
		fail_msg("%s: %s", path, je.text);
	return j;
}

static void test_metadata_golden(void **state)
{
	struct sl_table *t = orders(0);
	struct ice_schema s;
	bool changed;
	char err[256] = "";
	json_t *meta, *want;
	struct ice_snapshot sn = {
		.id = 3051729675574597004, .parent_id = -1, .sequence_number = 1,
		.timestamp_ms = 1700000001000,
		.manifest_list = "/warehouse/s/public_orders/metadata/snap-3051729675574597004.avro",
		.schema_id = 0, .added_files = 1, .added_records = 10, .added_size = 2048,
		.stream = "s", .position = "0/16B3748", .last_csn = "00000000016B3748-0000000003",
	};

	(void)state;
	assert_int_equal(ice_schema_of_table(&s, &changed, t, false, NULL, 0, err, sizeof err), 0);
	assert_true(changed);
	meta = ice_meta_new("9c12d441-03fe-4693-9a96-a0705ddf69c1", "/warehouse/s/public_orders", &s,
			    1700000000000);
	assert_non_null(meta);
	assert_int_equal(ice_meta_add_snapshot(meta, &sn, NULL, 0), 0);
	want = golden("iceberg_v1.metadata.json");
	if (!json_equal(meta, want)) {
		char *got = json_dumps(meta, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
		fail_msg("metadata differs from the golden file:\n%s", got);
	}
	assert_ptr_equal(ice_meta_current_snapshot(meta), json_array_get(json_object_get(meta, "snapshots"), 0));
	assert_string_equal(ice_snapshot_prop(ice_meta_current_snapshot(meta), "sluice.last-csn"),
			    "00000000016B3748-0000000003");
	json_decref(want);
	json_decref(meta);
	ice_schema_free(&s);
	sl_table_free(t);
}

/* A second snapshot: its parent, the metadata log, the sequence number. */
static void test_second_snapshot(void **state)
{
	json_t *meta = golden("iceberg_v1.metadata.json"), *snap;
	struct ice_snapshot sn = {
		.id = 77, .parent_id = 3051729675574597004, .sequence_number = 2, .timestamp_ms = 1700000002000,
		.manifest_list = "/l", .schema_id = 0, .added_files = 2, .added_records = 5, .added_size = 10,
		.stream = "s", .position = "0/16B3800", .last_csn = NULL,
	};

	(void)state;
	assert_int_equal(ice_meta_add_snapshot(meta, &sn, "/warehouse/s/public_orders/metadata/v1.metadata.json",
					       1700000001000), 0);
	snap = (json_t *)ice_meta_current_snapshot(meta);
	assert_int_equal(json_integer_value(json_object_get(snap, "snapshot-id")), 77);
	assert_int_equal(json_integer_value(json_object_get(snap, "parent-snapshot-id")), 3051729675574597004);
	assert_null(ice_snapshot_prop(snap, "sluice.last-csn"));
	assert_int_equal(json_integer_value(json_object_get(meta, "last-sequence-number")), 2);
	assert_int_equal(json_integer_value(json_object_get(json_object_get(json_object_get(meta, "refs"), "main"),
							    "snapshot-id")), 77);
	assert_int_equal(json_array_size(json_object_get(meta, "snapshot-log")), 2);
	assert_string_equal(json_string_value(json_object_get(json_array_get(json_object_get(meta, "metadata-log"), 0),
							      "metadata-file")),
			    "/warehouse/s/public_orders/metadata/v1.metadata.json");
	json_decref(meta);
}

/* Table version t again, after meta's current schema: no new schema, the
 * current one (schema-id id). */
static void assert_same_schema(const json_t *meta, const struct sl_table *t, int last, int id)
{
	struct ice_schema s;
	bool changed = true;
	char err[512] = "";

	if (ice_schema_of_table(&s, &changed, t, false, ice_meta_current_schema(meta), last, err, sizeof err) != 0)
		fail_msg("%s", err);
	assert_false(changed);
	assert_int_equal(s.id, id);
	ice_schema_free(&s);
}

/* Table version t after meta's current schema (last-column-id 13): a new
 * schema, *s, added to meta, which then equals want (NULL: not compared). */
static void new_schema(json_t *meta, const struct sl_table *t, struct ice_schema *s, const json_t *want)
{
	bool changed = false;
	char err[512] = "", *got;

	if (ice_schema_of_table(s, &changed, t, false, ice_meta_current_schema(meta), 13, err, sizeof err) != 0)
		fail_msg("%s", err);
	assert_true(changed);
	assert_int_equal(ice_meta_add_schema(meta, s), 0);
	got = json_dumps(meta, JSON_SORT_KEYS | JSON_INDENT(2));
	if (want && !json_equal(meta, want))
		fail_msg("metadata differs from the golden file:\n%s", got);
	free(got);
}

/* Added columns get the ids after last-column-id; the others keep theirs. */
static void test_added_columns(void **state)
{
	json_t *meta = golden("iceberg_v1.metadata.json");
	struct sl_table *t = orders(2);
	struct ice_schema s;
	bool changed = false;
	char err[256] = "";

	(void)state;
	assert_int_equal(ice_schema_of_table(&s, &changed, t, false, ice_meta_current_schema(meta), 13, err, sizeof err),
			 0);
	assert_true(changed);
	assert_int_equal(s.id, 1);
	assert_int_equal(s.last_column_id, 15);
	assert_string_equal(s.f[3].name, "at");
	assert_int_equal(s.f[3].id, 4);
	assert_string_equal(s.f[4].name, "u");
	assert_int_equal(s.f[4].id, 14);
	assert_int_equal(s.f[4].kind, ICE_STRING);     /* a uuid is its text */
	assert_string_equal(s.f[5].name, "big");
	assert_int_equal(s.f[5].id, 15);
	assert_int_equal(s.f[5].kind, ICE_STRING);     /* wider than decimal(38) */
	assert_string_equal(s.f[6].name, "_uuid");
	assert_int_equal(s.f[6].id, 5);
	assert_int_equal(s.f[13].elem_id, 13);
	assert_int_equal(ice_meta_add_schema(meta, &s), 0);
	assert_int_equal(json_integer_value(json_object_get(meta, "current-schema-id")), 1);
	assert_int_equal(json_integer_value(json_object_get(meta, "last-column-id")), 15);
	assert_int_equal(json_array_size(json_object_get(meta, "schemas")), 2);
	ice_schema_free(&s);
	sl_table_free(t);

	/* the same columns again: no new schema */
	t = orders(2);
	assert_same_schema(meta, t, 15, 1);
	sl_table_free(t);
	json_decref(meta);
}

/* A table version older than the one that added a column (a change at a
 * lower CSN, from a replay) keeps the column, with its id and no source
 * column; a version at a higher CSN, or one whose CSN is not known, drops
 * it.  The CSN of the change a schema was made for is the table's property
 * sluice.schema-csn.<id>. */
static void test_older_version_keeps_columns(void **state)
{
	json_t *meta = golden("iceberg_v1.metadata.json");
	struct sl_table *t = orders(1);
	struct ice_schema s;
	bool changed = false;
	char err[256] = "";
	const char *added = "0000000000000200-0000000000";

	(void)state;
	assert_int_equal(ice_schema_of_version(&s, &changed, t, false, meta, added, err, sizeof err), 0);
	assert_true(changed);
	assert_string_equal(s.csn, added);
	assert_int_equal(ice_meta_add_schema(meta, &s), 0);
	assert_string_equal(json_string_value(json_object_get(json_object_get(meta, "properties"),
							       "sluice.schema-csn.1")), added);
	assert_string_equal(ice_meta_field_csn(meta, 14), added);   /* u, added by schema 1 */
	assert_null(ice_meta_field_csn(meta, 1));                     /* id: schema 0, CSN not known */
	ice_schema_free(&s);
	sl_table_free(t);

	/* older: u stays, between the columns and the metadata fields */
	t = orders(0);
	assert_int_equal(ice_schema_of_version(&s, &changed, t, false, meta, "0000000000000100-0000000000", err,
					       sizeof err), 0);
	assert_false(changed);
	assert_int_equal(s.id, 1);
	assert_int_equal(s.nfields, 13);
	assert_string_equal(s.f[4].name, "u");
	assert_int_equal(s.f[4].id, 14);
	assert_int_equal(s.f[4].col, -1);
	assert_int_equal(s.f[4].meta, ICE_M_NONE);
	assert_false(s.f[4].required);
	assert_string_equal(s.csn, "");
	assert_string_equal(s.f[5].name, "_uuid");
	assert_int_equal(s.f[5].meta, ICE_M_UUID);
	ice_schema_free(&s);

	/* the same CSN, a later one, or none: dropped */
	for (int i = 0; i < 3; i++) {
		const char *csn[] = { added, "0000000000000300-0000000000", NULL };
		assert_int_equal(ice_schema_of_version(&s, &changed, t, false, meta, csn[i], err, sizeof err), 0);
		assert_true(changed);
		assert_int_equal(s.id, 2);
		assert_int_equal(s.nfields, 12);
		assert_string_equal(s.f[4].name, "_uuid");
		ice_schema_free(&s);
	}
	sl_table_free(t);
	json_decref(meta);
}

/* A changed type, and in merge mode a dropped key column, are refused,
 * naming table and column. */
static void test_refused_changes(void **state)
{
	json_t *meta = golden("iceberg_v1.metadata.json");
	struct sl_table *t = sl_table_new("public", "orders");
	struct ice_schema s;
	bool changed;
	char err[512] = "";

	(void)state;
	assert_int_equal(sl_table_add_column(t, "id", SL_T_STRING, 0, 0, 25, -1, "text", true), 0);
	assert_int_equal(sl_table_finish(t), 0);
	assert_int_equal(ice_schema_of_table(&s, &changed, t, false, ice_meta_current_schema(meta), 13, err,
					 sizeof err), SL_EPREREQ);
	assert_string_equal(err, "table \"public\".\"orders\": column \"id\" changed from int to string: an "
			    "Iceberg table takes only added columns and widened types (int to long, float to double, a "
			    "decimal's precision raised), so the stream stops; to go on, remove the table's folder "
			    "(or point the destination at a new path) and backfill the table again (doc/iceberg.md)");
	sl_table_free(t);
	/* narrowing, and a decimal's scale changed, are no widening */
	t = sl_table_new("public", "orders");
	assert_int_equal(sl_table_add_column(t, "id", SL_T_INT32, 0, 0, 23, -1, "integer", true), 0);
	assert_int_equal(sl_table_add_column(t, "amount", SL_T_DECIMAL, 14, 3, 1700, -1, "numeric(14,3)", false), 0);
	assert_int_equal(sl_table_finish(t), 0);
	assert_int_equal(ice_schema_of_table(&s, &changed, t, false, ice_meta_current_schema(meta), 13, err,
					 sizeof err), SL_EPREREQ);
	assert_non_null(strstr(err, "column \"amount\" changed from decimal(10, 2) to decimal(14, 3): "));
	assert_false(ice_widens(ICE_LONG, 0, 0, ICE_INT, 0, 0));
	assert_false(ice_widens(ICE_DOUBLE, 0, 0, ICE_FLOAT, 0, 0));
	assert_false(ice_widens(ICE_DECIMAL, 14, 2, ICE_DECIMAL, 10, 2));
	assert_false(ice_widens(ICE_INT, 0, 0, ICE_DOUBLE, 0, 0));
	assert_true(ice_widens(ICE_FLOAT, 0, 0, ICE_DOUBLE, 0, 0));
	sl_table_free(t);
	json_decref(meta);
	/* merge mode: a key column dropped (or renamed) */
	t = orders(0);
	assert_int_equal(ice_schema_of_table(&s, &changed, t, true, NULL, 0, err, sizeof err), 0);
	assert_non_null(meta = ice_meta_new("9c12d441-03fe-4693-9a96-a0705ddf69c1", "/w", &s, 1700000000000));
	ice_schema_free(&s);
	sl_table_free(t);
	t = sl_table_new("public", "orders");
	assert_int_equal(sl_table_add_column(t, "amount", SL_T_DECIMAL, 10, 2, 1700, -1, "numeric(10,2)", false), 0);
	assert_int_equal(sl_table_finish(t), 0);
	assert_int_equal(ice_schema_of_table(&s, &changed, t, true, ice_meta_current_schema(meta), 13, err,
					 sizeof err), SL_EPREREQ);
	assert_string_equal(err, "table \"public\".\"orders\": key column \"id\" was dropped or renamed: the "
			    "equality deletes of a merge table name its key columns, so the stream stops; to go on, "
			    "remove the table's folder (or point the destination at a new path) and backfill the "
			    "table again (doc/iceberg.md)");
	sl_table_free(t);
	json_decref(meta);
}

/* public.orders without amount; again: with amount added again, last. */
static struct sl_table *orders_dropped(bool again)
{
	struct sl_table *t = sl_table_new("public", "orders");

	assert_int_equal(sl_table_add_column(t, "id", SL_T_INT32, 0, 0, 23, -1, "integer", true), 0);
	assert_int_equal(sl_table_add_column(t, "_note", SL_T_STRING, 0, 0, 25, -1, "text", false), 0);
	assert_int_equal(sl_table_add_column(t, "at", SL_T_TIMESTAMPTZ, 0, 0, 1184, -1, "timestamptz", false), 0);
	if (again)
		assert_int_equal(sl_table_add_column(t, "amount", SL_T_DECIMAL, 10, 2, 1700, -1, "numeric(10,2)",
						     false), 0);
	assert_int_equal(sl_table_finish(t), 0);
	return t;
}

/* A dropped column leaves the schema (schema 1: the other fields keep
 * their ids, last-column-id unchanged); added again under its name, it is
 * a new field with the next id (schema 2): against
 * tests/unit/golden/iceberg_dropped.metadata.json, written by hand.  An
 * older data file's fields are found by id (ice_field_index): the new
 * "amount" is none of them. */
static void test_dropped_golden(void **state)
{
	json_t *meta = golden("iceberg_v1.metadata.json"), *want = golden("iceberg_dropped.metadata.json");
	struct sl_table *t = orders_dropped(false);
	struct ice_schema s, s0;
	struct sl_buf avro0;
	int idx[12];
	static const int want_idx[12] = { 0, 2, 3, -1, 4, 5, 6, 7, 8, 9, 10, 11 };

	(void)state;
	sl_buf_init(&avro0, 0);
	assert_int_equal(ice_schema_from_json(&s0, ice_meta_current_schema(meta)), 0);
	assert_int_equal(ice_data_avro_schema(&avro0, &s0), 0);
	new_schema(meta, t, &s, NULL);
	assert_int_equal(s.id, 1);
	assert_int_equal(s.last_column_id, 13);
	ice_schema_free(&s);
	assert_same_schema(meta, t, 13, 1);   /* the same columns again */
	sl_table_free(t);
	t = orders_dropped(true);
	new_schema(meta, t, &s, want);
	assert_int_equal(s.nfields, 12);
	assert_int_equal(ice_field_index(idx, &s, avro0.data, avro0.len), 0);
	assert_memory_equal(idx, want_idx, sizeof idx);
	assert_int_equal(ice_field_index(idx, &s, "[]", 2), -1);
	ice_schema_free(&s);
	ice_schema_free(&s0);
	sl_buf_free(&avro0);
	sl_table_free(t);
	json_decref(meta);
	json_decref(want);
}

/* A dropped table's TRUNCATE marker (a table version without columns) is
 * written with the table's current schema (ice_schema_for_marker): the
 * same record as a TRUNCATE of the table version that schema was made
 * for, its payload null. */
static void test_marker_schema(void **state)
{
	json_t *meta = golden("iceberg_v1.metadata.json");
	struct sl_table *t = orders(0), *gone = sl_table_new("public", "orders");
	struct ice_schema s, ms;
	struct sl_buf a, b;
	bool changed;
	char err[256] = "";
	struct sl_change c = { .table = t, .op = SL_OP_TRUNCATE, .source_ts_us = 5, .read_ts_us = 6 };

	(void)state;
	sl_buf_init(&a, 0);
	sl_buf_init(&b, 0);
	assert_int_equal(sl_table_finish(gone), 0);
	sl_csn_format(c.csn, 0x20, 0);
	memset(c.uuid, 0x42, sizeof c.uuid);
	assert_int_equal(ice_schema_of_table(&s, &changed, t, false, NULL, 0, err, sizeof err), 0);
	assert_int_equal(ice_schema_for_marker(&ms, ice_meta_current_schema(meta), NULL), 0);
	assert_int_equal(ms.nfields, s.nfields);
	for (int i = 0; i < ms.nfields; i++) {
		assert_int_equal(ms.f[i].id, s.f[i].id);
		assert_int_equal(ms.f[i].col, -1);
		assert_int_equal(ms.f[i].meta, s.f[i].meta);
	}
	if (ice_encode_change(&a, &s, &c, err, sizeof err) < 0)
		fail_msg("%s", err);
	c.table = gone;
	if (ice_encode_change(&b, &ms, &c, err, sizeof err) < 0)
		fail_msg("%s", err);
	assert_int_equal(a.len, b.len);
	assert_memory_equal(a.data, b.data, a.len);
	assert_memory_equal(b.data, "\0\0\0\0", 4);   /* id, amount, __note, at: null */
	sl_buf_free(&a);
	sl_buf_free(&b);
	ice_schema_free(&s);
	ice_schema_free(&ms);
	sl_table_free(t);
	sl_table_free(gone);
	json_decref(meta);
}

/* Widening in place: int to long and a decimal's precision raised make a
 * new schema with the same field ids and the wider types, against
 * tests/unit/golden/iceberg_widened.metadata.json (written by hand: the
 * first golden file with a schema 1 whose "id" is a long and "amount" a
 * decimal(14, 2), ids and last-column-id unchanged). */
static void test_widened_golden(void **state)
{
	json_t *meta = golden("iceberg_v1.metadata.json"), *want = golden("iceberg_widened.metadata.json");
	struct sl_table *t = sl_table_new("public", "orders");
	struct ice_schema s;

	(void)state;
	assert_int_equal(sl_table_add_column(t, "id", SL_T_INT64, 0, 0, 20, -1, "bigint", true), 0);
	assert_int_equal(sl_table_add_column(t, "amount", SL_T_DECIMAL, 14, 2, 1700, -1, "numeric(14,2)", false), 0);
	assert_int_equal(sl_table_add_column(t, "_note", SL_T_STRING, 0, 0, 25, -1, "text", false), 0);
	assert_int_equal(sl_table_add_column(t, "at", SL_T_TIMESTAMPTZ, 0, 0, 1184, -1, "timestamptz", false), 0);
	assert_int_equal(sl_table_finish(t), 0);
	new_schema(meta, t, &s, want);
	ice_schema_free(&s);
	assert_same_schema(meta, t, 13, 1);   /* the same types again */
	sl_table_free(t);
	json_decref(meta);
	json_decref(want);
}

/* A value of an older data file, of Avro schema json (set by set), as
 * field f: its bytes, compared with want (n bytes). */
static void check_value_as(const char *json, int branch, void (*set)(avro_value_t *), const struct ice_field *f,
			   const unsigned char *want, size_t n)
{
	avro_schema_t sc = NULL;
	avro_value_iface_t *cls;
	avro_value_t v, br;
	avro_writer_t w = avro_writer_memory(NULL, 0);
	struct sl_buf b;

	sl_buf_init(&b, 0);
	assert_int_equal(avro_schema_from_json_length(json, strlen(json), &sc), 0);
	assert_non_null(cls = avro_generic_class_from_schema(sc));
	assert_int_equal(avro_generic_value_new(cls, &v), 0);
	if (branch >= 0) {
		assert_int_equal(avro_value_set_branch(&v, branch, &br), 0);
		if (branch > 0)
			set(&br);
	} else {
		set(&v);
	}
	assert_int_equal(ice_value_as(w, &b, &v, f), 0);
	assert_int_equal(b.len, n);
	assert_memory_equal(b.data, want, n);
	sl_buf_free(&b);
	avro_value_decref(&v);
	avro_value_iface_decref(cls);
	avro_schema_decref(sc);
	avro_writer_free(w);
}

static void set_int(avro_value_t *v) { assert_int_equal(avro_value_set_int(v, -3), 0); }
static void set_float(avro_value_t *v) { assert_int_equal(avro_value_set_float(v, 1.5f), 0); }
static void set_fixed(avro_value_t *v)   /* -1.00 as decimal(3, 2): 2 bytes */
{
	unsigned char d[2] = { 0xff, 0x9c };
	assert_int_equal(avro_value_set_fixed(v, d, 2), 0);
}

/* ice_value_as: an older file's int as a long, float as a double, a
 * decimal's fixed sign-extended to the wider precision's size, in a union
 * or not; a null stays null, and a value of the field's own type is copied. */
static void test_widened_values(void **state)
{
	const struct ice_field lng = { .kind = ICE_LONG }, dbl = { .kind = ICE_DOUBLE },
			       dec = { .kind = ICE_DECIMAL, .precision = 14, .scale = 2 },
			       num = { .kind = ICE_INT };
	const char *fx = "{\"type\":\"fixed\",\"name\":\"d\",\"size\":2}";
	/* zigzag(-3) = 5; 1.5 as an IEEE 754 double, little-endian */
	const unsigned char l[] = { 5 }, ul[] = { 2, 5 }, d[] = { 2, 0, 0, 0, 0, 0, 0, 0xf8, 0x3f },
			    x[] = { 0xff, 0xff, 0xff, 0xff, 0xff, 0x9c }, nul[] = { 0 };

	(void)state;
	check_value_as("\"int\"", -1, set_int, &lng, l, sizeof l);
	check_value_as("[\"null\",\"int\"]", 1, set_int, &lng, ul, sizeof ul);
	check_value_as("[\"null\",\"int\"]", 0, NULL, &lng, nul, sizeof nul);
	check_value_as("[\"null\",\"float\"]", 1, set_float, &dbl, d, sizeof d);
	check_value_as(fx, -1, set_fixed, &dec, x, sizeof x);   /* decimal(14, 2): 6 bytes */
	check_value_as("\"int\"", -1, set_int, &num, l, sizeof l);
}

/* The data files' Avro schema: field ids, nullable payload, the decimal's
 * fixed size from the spec's table (decimal(10,2): 5 bytes). */
static void test_data_avro_schema(void **state)
{
	struct sl_table *t = orders(0);
	struct ice_schema s;
	struct sl_buf b;
	bool changed;
	char err[256] = "";

	(void)state;
	sl_buf_init(&b, 0);
	assert_int_equal(ice_schema_of_table(&s, &changed, t, false, NULL, 0, err, sizeof err), 0);
	assert_int_equal(ice_data_avro_schema(&b, &s), 0);
	assert_non_null(strstr(b.data, "{\"name\":\"id\",\"type\":[\"null\",\"int\"],\"default\":null,"
				       "\"field-id\":1}"));
	assert_non_null(strstr(b.data, "{\"name\":\"amount\",\"type\":[\"null\",{\"type\":\"fixed\","
				       "\"name\":\"decimal_10_2\",\"size\":5,\"logicalType\":\"decimal\","
				       "\"precision\":10,\"scale\":2}],\"default\":null,\"field-id\":2}"));
	assert_non_null(strstr(b.data, "\"logicalType\":\"timestamp-micros\",\"adjust-to-utc\":true}"));
	assert_non_null(strstr(b.data, "{\"name\":\"_csn\",\"type\":\"string\",\"field-id\":9}"));
	assert_non_null(strstr(b.data, "{\"type\":\"array\",\"items\":\"string\",\"element-id\":13}"));
	sl_buf_free(&b);
	ice_schema_free(&s);
	sl_table_free(t);
}

/* Value v as JSON: as avro-c writes it (a union's non-null branch as an
 * object named by its type), except bytes, as hex (avro-c's JSON cuts them
 * at a zero byte). */
static json_t *avro_json(avro_value_t *v)
{
	static const char hex[] = "0123456789abcdef";
	avro_value_t child;
	const char *name;
	const void *p;
	size_t n;
	json_t *o;
	int32_t i32;
	int64_t i64;
	int bo;

	switch (avro_value_get_type(v)) {
	case AVRO_NULL:
		return json_null();
	case AVRO_BOOLEAN:
		assert_int_equal(avro_value_get_boolean(v, &bo), 0);
		return json_boolean(bo);
	case AVRO_INT32:
		assert_int_equal(avro_value_get_int(v, &i32), 0);
		return json_integer(i32);
	case AVRO_INT64:
		assert_int_equal(avro_value_get_long(v, &i64), 0);
		return json_integer(i64);
	case AVRO_STRING:
		assert_int_equal(avro_value_get_string(v, (const char **)&p, &n), 0);
		return json_stringn(p, n - 1);
	case AVRO_BYTES: {
		struct sl_buf h;
		assert_int_equal(avro_value_get_bytes(v, &p, &n), 0);
		sl_buf_init(&h, 0);
		for (size_t k = 0; k < n; k++) {
			sl_buf_putc(&h, hex[((const unsigned char *)p)[k] >> 4]);
			sl_buf_putc(&h, hex[((const unsigned char *)p)[k] & 15]);
		}
		o = json_stringn(h.data ? h.data : "", h.len);
		sl_buf_free(&h);
		return o;
	}
	case AVRO_RECORD:
		o = json_object();
		assert_int_equal(avro_value_get_size(v, &n), 0);
		for (size_t k = 0; k < n; k++) {
			assert_int_equal(avro_value_get_by_index(v, k, &child, &name), 0);
			json_object_set_new(o, name, avro_json(&child));
		}
		return o;
	case AVRO_ARRAY:
		o = json_array();
		assert_int_equal(avro_value_get_size(v, &n), 0);
		for (size_t k = 0; k < n; k++) {
			assert_int_equal(avro_value_get_by_index(v, k, &child, NULL), 0);
			json_array_append_new(o, avro_json(&child));
		}
		return o;
	case AVRO_UNION:
		assert_int_equal(avro_value_get_current_branch(v, &child), 0);
		if (avro_value_get_type(&child) == AVRO_NULL)
			return json_null();
		o = json_object();
		json_object_set_new(o, avro_schema_type_name(avro_value_get_schema(&child)), avro_json(&child));
		return o;
	default:
		fail_msg("an Avro type the manifests do not use: %d", (int)avro_value_get_type(v));
		return NULL;
	}
}

/* The records of Avro container bytes b, as avro_json writes them. */
static json_t *avro_records(const struct sl_buf *b)
{
	char path[] = "/tmp/test_iceberg_meta.XXXXXX";
	int fd = mkstemp(path);
	struct sl_avro_read *rd = NULL;
	json_t *out = json_array();
	avro_value_t *val;
	char err[256] = "";
	int got;

	assert_true(fd >= 0);
	assert_int_equal(write(fd, b->data, b->len), (ssize_t)b->len);
	close(fd);
	assert_int_equal(sl_avro_read_open(&rd, path, err, sizeof err), 0);
	while ((got = sl_avro_read_next(rd, &val, err, sizeof err)) > 0)
		json_array_append_new(out, avro_json(val));
	assert_int_equal(got, 0);
	sl_avro_read_close(rd);
	unlink(path);
	return out;
}

static void assert_json_equal(const json_t *got, const json_t *want, const char *what)
{
	if (!json_equal(got, want)) {
		char *g = json_dumps(got, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
		fail_msg("%s differs from the golden file:\n%s", what, g);
	}
}

/* Merge mode: the key as identifier-field-ids; the equality delete file's
 * schema and record; the delete manifest; its manifest list entry. */
static void test_merge_deletes_golden(void **state)
{
	struct sl_table *t = orders(0);
	json_t *want = golden("iceberg_merge_deletes.json"), *sj, *got;
	struct ice_schema s;
	struct sl_buf b;
	bool changed;
	char err[256] = "";
	struct sl_value vals[4] = { { .kind = SL_V_INT, .i = 7 }, { .kind = SL_V_NULL }, { .kind = SL_V_NULL },
				    { .kind = SL_V_NULL } };
	struct sl_change c = { .table = t, .op = SL_OP_DELETE, .values = vals };
	struct ice_col_stats st[12] = { { 0 } };
	struct ice_data_file f = {
		.path = "/warehouse/s/public_orders/data/0000000001000000-0000000001-0badcafe-deletes.avro",
		.content = ICE_EQUALITY_DELETES, .records = 3, .size = 321, .stats = st,
	};
	struct ice_snapshot sn = {
		.id = 77, .parent_id = 3051729675574597004, .sequence_number = 2, .timestamp_ms = 1700000002000,
		.manifest_list = "/l", .schema_id = 0, .added_delete_files = 1, .added_deletes = 3, .stream = "s",
	};
	struct ice_manifest_file mf = {
		.path = "/warehouse/s/public_orders/metadata/77-m1.avro", .deletes = true, .length = 1234,
		.sequence_number = 2, .min_sequence_number = 2, .snapshot_id = 77, .added_files = 1, .added_rows = 3,
	};
	json_error_t je;

	(void)state;
	sl_buf_init(&b, 0);
	assert_int_equal(ice_schema_of_table(&s, &changed, t, true, NULL, 0, err, sizeof err), 0);
	sj = ice_schema_json(&s);
	assert_json_equal(json_object_get(sj, "identifier-field-ids"), json_object_get(want, "identifier-field-ids"),
			  "identifier-field-ids");
	assert_json_equal(json_array_get(json_object_get(sj, "fields"), 0), json_object_get(want, "id-field"),
			  "the key field");
	/* the equality delete file: its schema, and a key's record (zigzag 7) */
	assert_int_equal(ice_delete_avro_schema(&b, &s), 0);
	got = json_loads(b.data, 0, &je);
	assert_json_equal(got, json_object_get(want, "delete-file-avro-schema"), "the delete file's schema");
	json_decref(got);
	sl_buf_reset(&b);
	assert_int_equal(ice_encode_key(&b, &s, &c, err, sizeof err), 0);
	assert_int_equal(b.len, 1);
	assert_int_equal((unsigned char)b.data[0], 14);
	/* the statistics of the keys 7, -2, 40 */
	assert_int_equal(s.nfields, 12);
	for (int k = 0; k < 3; k++) {
		static const int64_t ids[] = { 7, -2, 40 };
		vals[0].i = ids[k];
		sl_buf_reset(&b);
		assert_int_equal(ice_encode_key(&b, &s, &c, err, sizeof err), 0);
		assert_int_equal(ice_stats_add(st, &s, true, (const unsigned char *)b.data, b.len), 0);
	}
	/* the delete manifest, read back */
	sl_buf_reset(&b);
	assert_int_equal(ice_manifest_encode(&b, &s, 77, 2, 2, &f, 1), 0);
	got = avro_records(&b);
	assert_json_equal(got, json_object_get(want, "manifest-entries"), "the delete manifest");
	json_decref(got);
	/* the manifest list's entry of it */
	sl_buf_reset(&b);
	assert_int_equal(ice_manifest_list_encode(&b, &sn, &mf, 1), 0);
	got = avro_records(&b);
	assert_json_equal(got, json_object_get(want, "manifest-list-entries"), "the manifest list");
	json_decref(got);
	json_decref(sj);
	json_decref(want);
	sl_buf_free(&b);
	ice_schema_free(&s);
	sl_table_free(t);
}

/* Writes b to a temporary file; returns its path (static buffer). */
static const char *temp_file(const struct sl_buf *b)
{
	static char path[] = "/tmp/test_iceberg_meta.XXXXXX";
	int fd;

	memcpy(path + strlen(path) - 6, "XXXXXX", 6);
	fd = mkstemp(path);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, b->data, b->len), (ssize_t)b->len);
	close(fd);
	return path;
}

/* The readers of manifests and manifest lists (verify, compaction) give back
 * what the writers wrote; a schema read back from its metadata JSON gives the
 * same JSON and the same data file Avro schema, which compaction matches
 * data files by. */
static void test_readers_round_trip(void **state)
{
	struct sl_table *t = orders(2);
	struct ice_schema s, r;
	struct sl_buf b, a1, a2;
	bool changed;
	char err[256] = "";
	struct ice_data_file f[2] = {
		{ .path = "/w/s/o/data/a.avro", .content = ICE_DATA, .records = 5, .size = 700 },
		{ .path = "/w/s/o/data/compact-1-0.avro", .content = ICE_DATA, .records = 12, .size = 4096 },
	};
	struct ice_snapshot sn = { .id = 9, .parent_id = 8, .sequence_number = 4, .timestamp_ms = 1, .manifest_list = "/l",
				   .stream = "s" };
	/* a compaction's manifest (it read sequence number 2, committed 4) and a delete manifest of 3 */
	struct ice_manifest_file mf[2] = {
		{ .path = "/w/s/o/metadata/9-c0.avro", .length = 321, .sequence_number = 4, .min_sequence_number = 2,
		  .snapshot_id = 9, .added_files = 2, .added_rows = 17 },
		{ .path = "/w/s/o/metadata/8-m1.avro", .deletes = true, .length = 99, .sequence_number = 3,
		  .min_sequence_number = 3, .snapshot_id = 8, .added_files = 1, .added_rows = 4 },
	};
	struct ice_entry *e;
	struct ice_manifest_file *got;
	json_t *j1, *j2, *recs, *want;
	const char *path;
	int n;

	(void)state;
	sl_buf_init(&b, 0);
	sl_buf_init(&a1, 0);
	sl_buf_init(&a2, 0);
	assert_int_equal(ice_schema_of_table(&s, &changed, t, true, NULL, 0, err, sizeof err), 0);
	j1 = ice_schema_json(&s);
	assert_int_equal(ice_schema_from_json(&r, j1), 0);
	j2 = ice_schema_json(&r);
	assert_true(json_equal(j1, j2));
	assert_int_equal(ice_data_avro_schema(&a1, &s), 0);
	assert_int_equal(ice_data_avro_schema(&a2, &r), 0);
	assert_int_equal(a1.len, a2.len);
	assert_memory_equal(a1.data, a2.data, a1.len);
	/* a manifest of two data files at sequence number 3 */
	assert_int_equal(ice_manifest_encode(&b, &s, 9, 3, 3, f, 2), 0);
	path = temp_file(&b);
	assert_int_equal(ice_manifest_read(path, &e, &n, err, sizeof err), 0);
	unlink(path);
	assert_int_equal(n, 2);
	for (int i = 0; i < 2; i++) {
		assert_int_equal(e[i].status, 1);
		assert_int_equal(e[i].content, ICE_DATA);
		assert_string_equal(e[i].path, f[i].path);
		assert_int_equal(e[i].records, f[i].records);
		assert_int_equal(e[i].size, f[i].size);
		assert_int_equal(e[i].seq, 3);
	}
	ice_entries_free(e, n);
	/* a compaction's manifest: the data sequence number of the snapshot it
	 * read (2), the file sequence number null (the manifest list's) */
	sl_buf_reset(&b);
	assert_int_equal(ice_manifest_encode(&b, &s, 9, 2, -1, f, 1), 0);
	recs = avro_records(&b);
	want = json_pack("{s:i}", "long", 2);
	assert_int_equal(json_array_size(recs), 1);
	assert_true(json_equal(json_object_get(json_array_get(recs, 0), "sequence_number"), want));
	assert_true(json_is_null(json_object_get(json_array_get(recs, 0), "file_sequence_number")));
	json_decref(want);
	json_decref(recs);
	path = temp_file(&b);
	assert_int_equal(ice_manifest_read(path, &e, &n, err, sizeof err), 0);
	unlink(path);
	assert_int_equal(n, 1);
	assert_int_equal(e[0].seq, 2);
	ice_entries_free(e, n);
	/* a manifest list of a data and a delete manifest */
	sl_buf_reset(&b);
	assert_int_equal(ice_manifest_list_encode(&b, &sn, mf, 2), 0);
	path = temp_file(&b);
	assert_int_equal(ice_manifest_list_read(path, &got, &n, err, sizeof err), 0);
	unlink(path);
	assert_int_equal(n, 2);
	for (int i = 0; i < 2; i++) {
		assert_string_equal(got[i].path, mf[i].path);
		assert_int_equal(got[i].deletes, mf[i].deletes);
		assert_int_equal(got[i].length, mf[i].length);
		assert_int_equal(got[i].sequence_number, mf[i].sequence_number);
		assert_int_equal(got[i].min_sequence_number, mf[i].min_sequence_number);
		assert_int_equal(got[i].snapshot_id, mf[i].snapshot_id);
		assert_int_equal(got[i].added_files, mf[i].added_files);
		assert_int_equal(got[i].added_rows, mf[i].added_rows);
		free(got[i].path);
	}
	free(got);
	json_decref(j1);
	json_decref(j2);
	sl_buf_free(&b);
	sl_buf_free(&a1);
	sl_buf_free(&a2);
	ice_schema_free(&s);
	ice_schema_free(&r);
	sl_table_free(t);
}

/* One change of public.orders for the statistics test. */
static void stats_change(struct sl_change *c, struct sl_value *vals, enum sl_op op, unsigned char u, int64_t ts,
			 uint32_t seq, uint64_t tx)
{
	c->op = op;
	c->values = vals;
	memset(c->uuid, u, sizeof c->uuid);
	c->source_ts_us = ts;
	c->read_ts_us = ts + 1000;
	c->tx_id = tx;
	sl_csn_format(c->csn, 0x10, seq);
}

/* A data file's column statistics in its manifest entry, compared with
 * tests/unit/golden/iceberg_manifest_stats.json (reasoned out by hand from
 * the specification), read back with avro-c. */
static void test_manifest_stats_golden(void **state)
{
	struct sl_table *t = orders(0);
	json_t *want = golden("iceberg_manifest_stats.json"), *got;
	struct ice_schema s;
	struct sl_buf b, rec;
	bool changed;
	char err[256] = "";
	const char note[] = "na\xc3\xafve caf\xc3\xa9 cr\xc3\xa8me";   /* 19 bytes */
	struct sl_value r1[4] = { { .kind = SL_V_INT, .i = 7 },
				  { .kind = SL_V_DECIMAL, .p = "1250", .len = 4, .scale = 2 },
				  { .kind = SL_V_STRING, .p = note, .len = sizeof note - 1 },
				  { .kind = SL_V_TIMESTAMP, .i = 1700000000000000 } };
	struct sl_value r2[4] = { { .kind = SL_V_INT, .i = -3 },
				  { .kind = SL_V_DECIMAL, .p = "5", .len = 1, .scale = 2, .neg = true },
				  { .kind = SL_V_STRING, .p = "apple", .len = 5 }, { .kind = SL_V_NULL } };
	struct sl_value r3[4] = { { .kind = SL_V_INT, .i = 42 }, { .kind = SL_V_NULL }, { .kind = SL_V_NULL },
				  { .kind = SL_V_NULL } };
	struct sl_change c = { .table = t };
	struct ice_col_stats st[12] = { { 0 } };
	struct ice_data_file f = {
		.path = "/warehouse/s/public_orders/data/0000000000000010-0000000001-0badcafe.avro",
		.content = ICE_DATA, .records = 3, .size = 900, .stats = st,
	};

	(void)state;
	sl_buf_init(&b, 0);
	sl_buf_init(&rec, 0);
	assert_int_equal(ice_schema_of_table(&s, &changed, t, false, NULL, 0, err, sizeof err), 0);
	assert_int_equal(s.nfields, 12);
	for (int k = 0; k < 3; k++) {
		stats_change(&c, k == 0 ? r1 : k == 1 ? r2 : r3, k == 2 ? SL_OP_DELETE : SL_OP_INSERT,
			     (unsigned char)(0x11 * (k + 1)), 1000 + k, (uint32_t)k + 1, k == 2 ? 6 : 5);
		sl_buf_reset(&rec);
		if (ice_encode_change(&rec, &s, &c, err, sizeof err) < 0)
			fail_msg("%s", err);
		assert_int_equal(ice_stats_add(st, &s, false, (const unsigned char *)rec.data, rec.len), 0);
	}
	assert_int_equal(ice_manifest_encode(&b, &s, 9, 4, 4, &f, 1), 0);
	got = avro_records(&b);
	assert_json_equal(got, json_object_get(want, "manifest-entries"), "the data manifest");
	/* a record cut short does not decode */
	assert_int_equal(ice_stats_add(st, &s, false, (const unsigned char *)rec.data, rec.len - 1), -1);
	json_decref(got);
	json_decref(want);
	sl_buf_free(&rec);
	sl_buf_free(&b);
	ice_schema_free(&s);
	sl_table_free(t);
}

/* Appends to b the Avro bytes (or string) of p, n bytes. */
static void put_avro_bytes(struct sl_buf *b, const void *p, size_t n)
{
	sl_buf_putc(b, (char)(2 * n));   /* zigzag of n < 64 */
	sl_buf_append(b, p, n);
}

/* The statistics of one record (binary b, string str, both required, ids
 * 1 and 2) as ice_stats_encode writes them: each field 1 value, 0 nulls,
 * then the lower and upper bound maps bounds (blen bytes). */
static void check_cut(const void *b, size_t bn, const void *str, size_t sn, const char *bounds, size_t blen)
{
	struct ice_field fl[2] = { { .id = 1, .name = "b", .kind = ICE_BINARY, .required = true, .col = -1 },
				   { .id = 2, .name = "s", .kind = ICE_STRING, .required = true, .col = -1 } };
	struct ice_schema s = { .nfields = 2, .f = fl, .last_column_id = 2 };
	struct ice_col_stats st[2];
	struct sl_buf rec, got, want;

	memset(st, 0, sizeof st);
	sl_buf_init(&rec, 0);
	sl_buf_init(&got, 0);
	sl_buf_init(&want, 0);
	put_avro_bytes(&rec, b, bn);
	put_avro_bytes(&rec, str, sn);
	assert_int_equal(ice_stats_add(st, &s, false, (const unsigned char *)rec.data, rec.len), 0);
	assert_int_equal(ice_stats_encode(&got, st, &s), 0);
	sl_buf_append(&want, "\x02\x04\x02", 3);                           /* column sizes: */
	sl_buf_putc(&want, (char)(2 * (1 + bn)));                          /* the length byte and */
	sl_buf_append(&want, "\x04", 1);
	sl_buf_putc(&want, (char)(2 * (1 + sn)));                          /* the bytes (< 64 in all) */
	sl_buf_append(&want, "\x00", 1);
	sl_buf_append(&want, "\x02\x04\x02\x02\x04\x02\x00", 7);             /* value counts 1, 1 */
	sl_buf_append(&want, "\x02\x04\x02\x00\x04\x00\x00", 7);             /* null counts 0, 0 */
	sl_buf_append(&want, "\x00", 1);                                   /* no NaN counts */
	sl_buf_append(&want, bounds, blen);
	assert_int_equal(got.len, want.len);
	assert_memory_equal(got.data, want.data, want.len);
	sl_buf_free(&rec);
	sl_buf_free(&got);
	sl_buf_free(&want);
}

#define FF16 "\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff"
#define FF15 "\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff"
#define DEL14 "\x7f\x7f\x7f\x7f\x7f\x7f\x7f\x7f\x7f\x7f\x7f\x7f\x7f\x7f"
#define DEL15 DEL14 "\x7f"
#define EACUTE7 "\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9"
#define MAXCP3 "\xf4\x8f\xbf\xbf\xf4\x8f\xbf\xbf\xf4\x8f\xbf\xbf"

/* The bounds of cut strings and binaries, encoded by hand: a binary cut
 * from 0xff bytes only has no upper bound, a cut binary 01 ff.. has 02; a
 * string's last character goes to the next code point: e-acute (U+00E9, c3
 * a9) to e-circumflex (U+00EA, c3 aa), DEL (U+007F) to U+0080 (c2 80, a
 * byte longer), U+10FFFF (f4 8f bf bf) has none and is dropped. */
static void test_cut_bounds(void **state)
{
	(void)state;
	/* 20 bytes ff; ten e-acute (20 bytes): lower 16 ff, eight e-acute;
	 * upper: no binary, seven e-acute and an e-circumflex */
	check_cut(FF16 "\xff\xff\xff\xff", 20, EACUTE7 "\xc3\xa9\xc3\xa9\xc3\xa9", 20,
		  "\x02\x04\x02\x20" FF16 "\x04\x20" EACUTE7 "\xc3\xa9\x00"
		  "\x02\x02\x04\x20" EACUTE7 "\xc3\xaa\x00", 4 + 16 + 2 + 16 + 1 + 4 + 16 + 1);
	/* 01 and 19 bytes ff; "a" and 16 DEL: upper 02; "a", 14 DEL, U+0080 */
	check_cut("\x01" FF16 "\xff\xff\xff", 20, "a" DEL15 "\x7f", 17,
		  "\x02\x04\x02\x20\x01" FF15 "\x04\x20" "a" DEL15 "\x00"
		  "\x02\x04\x02\x02\x02\x04\x22" "a" DEL14 "\xc2\x80\x00",
		  4 + 16 + 2 + 16 + 1 + 7 + 15 + 3);
	/* "xyz" (not cut); "a" and four U+10FFFF (17 bytes, cut to 13): upper "b" */
	check_cut("xyz", 3, "a" MAXCP3 "\xf4\x8f\xbf\xbf", 17,
		  "\x02\x04\x02\x06xyz\x04\x1a" "a" MAXCP3 "\x00"
		  "\x02\x04\x02\x06xyz\x04\x02" "b\x00", 9 + 13 + 1 + 11);
}

/* One required field (id 1) of kind kind (a decimal: of precision 4, a
 * 2-byte fixed) over the n records vals (lens[i] bytes each; a binary's
 * length byte added here): its lower and upper bound maps must be lo
 * (lolen bytes) and hi, each one entry.  Values and bounds below 64
 * bytes. */
static void check_order(enum ice_kind kind, const char *const *vals, const size_t *lens, int n, const char *lo,
			size_t lolen, const char *hi, size_t hilen)
{
	struct ice_field fl[1] = { { .id = 1, .name = "v", .kind = kind, .precision = 4, .required = true,
				     .col = -1 } };
	struct ice_schema s = { .nfields = 1, .f = fl, .last_column_id = 1 };
	struct ice_col_stats st[1];
	struct sl_buf rec, got, want;
	size_t bytes = 0;

	memset(st, 0, sizeof st);
	sl_buf_init(&rec, 0);
	sl_buf_init(&got, 0);
	sl_buf_init(&want, 0);
	for (int i = 0; i < n; i++) {
		sl_buf_reset(&rec);
		if (kind == ICE_DECIMAL)
			sl_buf_append(&rec, vals[i], lens[i]);
		else
			put_avro_bytes(&rec, vals[i], lens[i]);
		bytes += rec.len;
		assert_int_equal(ice_stats_add(st, &s, false, (const unsigned char *)rec.data, rec.len), 0);
	}
	assert_int_equal(ice_stats_encode(&got, st, &s), 0);
	sl_buf_append(&want, "\x02\x02\x02", 3);                           /* column sizes */
	sl_avro_put_long(&want, (int64_t)bytes);
	sl_buf_append(&want, "\x00\x02\x02\x02", 4);                       /* value counts */
	sl_avro_put_long(&want, n);
	sl_buf_append(&want, "\x00\x02\x02\x02\x00\x00\x00", 7);           /* nulls 0, no NaNs */
	sl_buf_append(&want, "\x02\x02\x02", 3);
	put_avro_bytes(&want, lo, lolen);
	sl_buf_append(&want, "\x00\x02\x02\x02", 4);
	put_avro_bytes(&want, hi, hilen);
	sl_buf_putc(&want, '\0');
	assert_int_equal(got.len, want.len);
	assert_memory_equal(got.data, want.data, want.len);
	sl_buf_free(&rec);
	sl_buf_free(&got);
	sl_buf_free(&want);
}

/* The order of the bounds over many records, each case reasoned out by
 * hand: bytes compare unsigned, a prefix first (trailing zero bytes
 * included); a difference past the eighth byte, or past the sixteenth (the
 * kept prefix, then cut: the upper bound's last byte incremented); a
 * decimal's fixed as signed two's complement. */
static void test_bound_order(void **state)
{
	static const char *const zeros[] = { "a\0", "a", "a\0\0" };
	static const size_t zeros_n[] = { 2, 1, 3 };
	static const char *const high[] = { "\x7f", "\x80", "\x00\xff", "\x80\x00" };
	static const size_t high_n[] = { 1, 1, 2, 2 };
	static const char *const late[] = { "0123456789abXdef", "0123456789abYdef", "0123456789abAdef",
					    "0123456789abXde" };
	static const size_t late_n[] = { 16, 16, 16, 15 };
	static const char *const cut[] = { "0123456789abcdefZ", "0123456789abcdef", "0123456789abcdefA" };
	static const size_t cut_n[] = { 17, 16, 17 };
	/* 1, -1, 256, -300, 0, 255 */
	static const char *const dec[] = { "\x00\x01", "\xff\xff", "\x01\x00", "\xfe\xd4", "\x00\x00",
					   "\x00\xff" };
	static const size_t dec_n[] = { 2, 2, 2, 2, 2, 2 };

	(void)state;
	check_order(ICE_BINARY, zeros, zeros_n, 3, "a", 1, "a\0\0", 3);
	check_order(ICE_STRING, zeros, zeros_n, 3, "a", 1, "a\0\0", 3);
	check_order(ICE_BINARY, high, high_n, 4, "\x00\xff", 2, "\x80\x00", 2);
	check_order(ICE_STRING, late, late_n, 4, "0123456789abAdef", 16, "0123456789abYdef", 16);
	check_order(ICE_BINARY, cut, cut_n, 3, "0123456789abcdef", 16, "0123456789abcdeg", 16);
	check_order(ICE_DECIMAL, dec, dec_n, 6, "\xfe\xd4", 2, "\x01\x00", 2);
}

/* Appends the Avro encoding of an optional float (f4) or double field's
 * value: null when bits is NULL, else the n little-endian bytes bits. */
static void put_opt(struct sl_buf *b, const char *bits, size_t n)
{
	sl_buf_putc(b, bits ? '\x02' : '\x00');
	if (bits)
		sl_buf_append(b, bits, n);
}

/* Floats and doubles: NaN counted apart and left out of the bounds, -0.0
 * before +0.0, infinities kept; a column of NaNs and nulls only has no
 * bounds.  Every byte written by hand from the specification: a float's
 * bound is its 4 IEEE 754 bytes little-endian, a double's 8. */
static void test_float_stats(void **state)
{
	struct ice_field fl[3] = { { .id = 1, .name = "f", .kind = ICE_FLOAT, .col = -1 },
				   { .id = 2, .name = "d", .kind = ICE_DOUBLE, .col = -1 },
				   { .id = 3, .name = "n", .kind = ICE_DOUBLE, .col = -1 } };
	struct ice_schema s = { .nfields = 3, .f = fl, .last_column_id = 3 };
	/* f: 1.5, NaN, -0.0, +0.0, null; d: -inf, 2.5, NaN, -0.0, +0.0; n: NaN, null, -NaN, NaN, null */
	static const char *const f[5] = { "\x00\x00\xc0\x3f", "\x00\x00\xc0\x7f", "\x00\x00\x00\x80",
					  "\x00\x00\x00\x00", NULL };
	static const char *const d[5] = { "\x00\x00\x00\x00\x00\x00\xf0\xff", "\x00\x00\x00\x00\x00\x00\x04\x40",
					  "\x00\x00\x00\x00\x00\x00\xf8\x7f", "\x00\x00\x00\x00\x00\x00\x00\x80",
					  "\x00\x00\x00\x00\x00\x00\x00\x00" };
	static const char *const n[5] = { "\x01\x00\x00\x00\x00\x00\xf8\x7f", NULL,
					  "\x00\x00\x00\x00\x00\x00\xf8\xff", "\x00\x00\x00\x00\x00\x00\xf8\x7f", NULL };
	static const char want[] =
		"\x02\x06" "\x02\x2a" "\x04\x5a" "\x06\x3a" "\x00"       /* sizes: 4x5+1, 5x9, 3x9+2 */
		"\x02\x06" "\x02\x0a" "\x04\x0a" "\x06\x0a" "\x00"       /* values: 5 each */
		"\x02\x06" "\x02\x02" "\x04\x00" "\x06\x04" "\x00"       /* nulls: 1, 0, 2 */
		"\x02\x06" "\x02\x02" "\x04\x02" "\x06\x06" "\x00"       /* NaNs: 1, 1, 3 */
		"\x02\x04" "\x02\x08\x00\x00\x00\x80"                   /* lower: f -0.0, */
		"\x04\x10\x00\x00\x00\x00\x00\x00\xf0\xff" "\x00"      /* d -inf; n none */
		"\x02\x04" "\x02\x08\x00\x00\xc0\x3f"                   /* upper: f 1.5, */
		"\x04\x10\x00\x00\x00\x00\x00\x00\x04\x40" "\x00";     /* d 2.5 */
	struct ice_col_stats st[3];
	struct sl_buf rec, got;

	(void)state;
	memset(st, 0, sizeof st);
	sl_buf_init(&rec, 0);
	sl_buf_init(&got, 0);
	for (int i = 0; i < 5; i++) {
		sl_buf_reset(&rec);
		put_opt(&rec, f[i], 4);
		put_opt(&rec, d[i], 8);
		put_opt(&rec, n[i], 8);
		assert_int_equal(ice_stats_add(st, &s, false, (const unsigned char *)rec.data, rec.len), 0);
	}
	assert_int_equal(ice_stats_encode(&got, st, &s), 0);
	if (got.len != sizeof want - 1 || memcmp(got.data, want, got.len) != 0) {
		for (size_t i = 0; i < got.len; i++)
			fprintf(stderr, "%02x%s", (unsigned char)got.data[i], i + 1 < got.len ? " " : "\n");
		fail_msg("the float statistics differ (got above, %zu bytes; want %zu)", got.len, sizeof want - 1);
	}
	sl_buf_free(&rec);
	sl_buf_free(&got);
}

/* A metadata-log of n entries, v1..vn of /t, in a metadata object with
 * properties props (a JSON object text, or NULL: none). */
static json_t *with_log(int n, const char *props)
{
	json_t *m = json_pack("{s:[]}", "metadata-log");

	assert_non_null(m);
	for (int i = 1; i <= n; i++) {
		char f[64];
		snprintf(f, sizeof f, "/t/metadata/v%d.metadata.json", i);
		assert_int_equal(json_array_append_new(json_object_get(m, "metadata-log"),
						       json_pack("{s:i, s:s}", "timestamp-ms", 1000 + i,
								 "metadata-file", f)), 0);
	}
	if (props)
		assert_int_equal(json_object_set_new(m, "properties", json_loads(props, 0, NULL)), 0);
	return m;
}

/* The metadata-log trimmed to the newest previous-versions-max entries
 * (sluice's default 100; at least 1), and the files of the entries dropped
 * to delete unless delete-after-commit.enabled says false. */
static void test_trim_metadata_log(void **state)
{
	static const struct {
		int n;
		const char *props;
		const char *log;        /* what stays, as "first..last" */
		const char *gone;       /* the files to delete, as JSON */
	} cases[] = {
		{ 100, NULL, "1..100", "[]" },
		{ 101, NULL, "2..101", "[\"/t/metadata/v1.metadata.json\"]" },
		{ 5, "{\"write.metadata.previous-versions-max\": \"3\"}", "3..5",
		  "[\"/t/metadata/v1.metadata.json\", \"/t/metadata/v2.metadata.json\"]" },
		{ 5, "{\"write.metadata.previous-versions-max\": \"3\", "
		     "\"write.metadata.delete-after-commit.enabled\": \"false\"}", "3..5", "[]" },
		{ 5, "{\"write.metadata.previous-versions-max\": \"2\", "
		     "\"write.metadata.delete-after-commit.enabled\": \"TRUE\"}", "4..5",
		  "[\"/t/metadata/v1.metadata.json\", \"/t/metadata/v2.metadata.json\", "
		  "\"/t/metadata/v3.metadata.json\"]" },
		{ 3, "{\"write.metadata.previous-versions-max\": \"0\"}", "3..3",
		  "[\"/t/metadata/v1.metadata.json\", \"/t/metadata/v2.metadata.json\"]" },
		{ 3, "{\"write.metadata.previous-versions-max\": \"many\"}", "1..3", "[]" },
		{ 0, "{\"write.metadata.previous-versions-max\": \"1\"}", "", "[]" },
	};

	(void)state;
	for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
		json_t *m = with_log(cases[i].n, cases[i].props), *gone = ice_meta_trim_log(m);
		json_t *want = json_loads(cases[i].gone, 0, NULL), *log = json_object_get(m, "metadata-log");
		char got[32] = "";
		assert_non_null(gone);
		assert_non_null(want);
		if (json_array_size(log))
			snprintf(got, sizeof got, "%d..%d",
				 (int)json_integer_value(json_object_get(json_array_get(log, 0), "timestamp-ms")) - 1000,
				 (int)json_integer_value(json_object_get(json_array_get(log, json_array_size(log) - 1),
									 "timestamp-ms")) - 1000);
		if (strcmp(got, cases[i].log) != 0 || !json_equal(gone, want))
			fail_msg("case %zu: log %s, want %s; gone %s, want %s", i, got, cases[i].log,
				 json_dumps(gone, JSON_COMPACT), cases[i].gone);
		json_decref(gone);
		json_decref(want);
		json_decref(m);
	}
}

/* A decimal that does not fit its column: the check sl_avro_decimal_of
 * shares with the Avro encoder, and its message. */
static void test_decimal_refused(void **state)
{
	struct sl_table *t = orders(0);
	struct ice_schema s;
	struct sl_buf b;
	bool changed;
	char err[256] = "";
	struct sl_value vals[4] = { { .kind = SL_V_INT, .i = 1 },
				    { .kind = SL_V_DECIMAL, .p = "1234", .len = 4, .scale = 3 },
				    { .kind = SL_V_NULL }, { .kind = SL_V_NULL } };
	struct sl_change c = { .table = t, .op = SL_OP_INSERT, .values = vals };

	(void)state;
	sl_buf_init(&b, 0);
	assert_int_equal(ice_schema_of_table(&s, &changed, t, false, NULL, 0, err, sizeof err), 0);
	assert_int_equal(ice_encode_change(&b, &s, &c, err, sizeof err), -1);
	assert_string_equal(err, "column \"amount\": a decimal value of scale 3 does not fit decimal(10,2)");
	assert_int_equal(b.len, 0);
	vals[1].p = "12345678901";
	vals[1].len = 11;
	vals[1].scale = 2;
	assert_int_equal(ice_encode_change(&b, &s, &c, err, sizeof err), -1);
	assert_string_equal(err, "column \"amount\": a decimal value of 11 digits does not fit decimal(10,2)");
	vals[1].p = "12345678";
	vals[1].len = 8;
	assert_int_equal(ice_encode_change(&b, &s, &c, err, sizeof err), 0);
	sl_buf_free(&b);
	ice_schema_free(&s);
	sl_table_free(t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_metadata_golden),
		cmocka_unit_test(test_widened_golden),
		cmocka_unit_test(test_widened_values),
		cmocka_unit_test(test_second_snapshot),
		cmocka_unit_test(test_added_columns),
		cmocka_unit_test(test_older_version_keeps_columns),
		cmocka_unit_test(test_refused_changes),
		cmocka_unit_test(test_dropped_golden),
		cmocka_unit_test(test_marker_schema),
		cmocka_unit_test(test_data_avro_schema),
		cmocka_unit_test(test_merge_deletes_golden),
		cmocka_unit_test(test_manifest_stats_golden),
		cmocka_unit_test(test_cut_bounds),
		cmocka_unit_test(test_bound_order),
		cmocka_unit_test(test_decimal_refused),
		cmocka_unit_test(test_trim_metadata_log),
		cmocka_unit_test(test_float_stats),
		cmocka_unit_test(test_readers_round_trip),
	};
	return cmocka_run_group_tests_name("iceberg_meta", tests, NULL, NULL);
}
