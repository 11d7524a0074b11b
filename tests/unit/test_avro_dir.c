/*
 * tests/unit/test_avro_dir.c: the avro_dir sink: layout and file names,
 * visibility only after flush, rotation by size, a new file per schema
 * version, close without flush, discard_backfill, the registry, merge mode,
 * bounded memory over a million-row transaction, and the removal at open of
 * the temporary files a killed run left behind; manifests (their chain across
 * flushes and restarts, what they list), the current-schema files, and
 * `sluice verify` on a good tree and on damaged ones; a folder that cannot
 * be written logged as an outage of the destination.
 */
#include <fcntl.h>
#include <malloc.h>
#include <regex.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <avro.h>
#include <cmocka.h>
#include <jansson.h>

#include "common/util.h"
#include "sinks/avro/avro_enc.h"
#include "sinks/avro_dir/avro_dir.h"
#include "sinks/avro_tree/manifest.h"
#include "sinks/avro_tree/merge.h"
#include "sinks/avro_tree/mirror.h"
#include "sinks/iceberg/iceberg.h"
#include "sinks/sink.h"
#include "tests/unit/avro_testlib.h"

/* 2024-01-31 13:45:10 UTC */
#define TS0 INT64_C(1706708710000000)

static char *g_dir;
static struct sl_table *g_orders, *g_customers, *g_orders_v2;
static int g_threads;  /* compression_threads of the sinks open_sink opens */

static int setup(void **state)
{
	const struct tl_col orders[] = {
		{ "id", T_INT4, -1, "integer", true },
		{ "amount", T_NUMERIC, numeric_typmod(10, 2), "numeric(10,2)", false },
	};
	const struct tl_col orders2[] = {
		{ "id", T_INT4, -1, "integer", true },
		{ "amount", T_NUMERIC, numeric_typmod(10, 2), "numeric(10,2)", false },
		{ "note", T_TEXT, -1, "text", false },
	};
	const struct tl_col customers[] = {
		{ "id", T_INT8, -1, "bigint", true },
		{ "name", T_TEXT, -1, "text", false },
	};

	(void)state;
	g_orders = tl_table("public", "orders", orders, 2);
	g_orders_v2 = tl_table("public", "orders", orders2, 3);
	g_customers = tl_table("public", "customers", customers, 2);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	sl_table_free(g_orders);
	sl_table_free(g_orders_v2);
	sl_table_free(g_customers);
	return 0;
}

/* The codec of the trees that open_merge_sink and write_good_tree write:
 * deflate unless a test says otherwise. */
static enum sl_codec g_codec;

static int per_test_setup(void **state)
{
	(void)state;
	g_codec = SL_CODEC_DEFLATE;
	g_dir = tl_mkdtemp("avrodir");
	return 0;
}

static int per_test_teardown(void **state)
{
	(void)state;
	tl_rm_rf(g_dir);
	free(g_dir);
	return 0;
}

static void *open_sink(enum sl_codec codec, uint64_t max_bytes, uint64_t max_secs)
{
	const struct sl_sink_ops *ops = sl_sink_lookup("avro_dir");
	struct sl_avro_dir_conf dc;
	struct sl_sink_stream st = { .name = "s1", .mode = SL_WRITE_APPEND, .destination = "lake" };
	char err[512];
	void *ctx;

	memset(&dc, 0, sizeof dc);
	dc.path = g_dir;
	dc.codec = codec;
	dc.compression_level = 1;
	dc.compression_threads = g_threads;
	dc.max_file_bytes = max_bytes;
	dc.max_file_seconds = max_secs;
	if (ops->open(&ctx, &dc, &st, err, sizeof err) != 0)
		fail_msg("open: %s", err);
	return ctx;
}

static void write_order(void *ctx, const struct sl_table *t, uint64_t pos, uint32_t seq, int id, int64_t ts)
{
	char amt[32];
	struct sl_value v[3];
	struct sl_change c;
	char err[512];

	/* amount id.(id % 100), as unscaled digits */
	snprintf(amt, sizeof amt, "%d", id * 100 + id % 100);
	v[0] = tl_int(id);
	v[1] = tl_dec(false, amt, 2);
	v[2] = tl_str("a note");
	tl_change(&c, t, SL_OP_INSERT, v, pos, seq, ts);
	if (sl_avro_dir_ops.write(ctx, &c, err, sizeof err) != 0)
		fail_msg("write: %s", err);
}

/* A backfill row (sequence 0) of orders: its uuid also covers the key, as
 * the pipeline's backfill rows' do. */
static void write_bf_order(void *ctx, uint64_t pos, int id)
{
	char amt[32], err[512];
	struct sl_value v[2];
	struct sl_change c;
	unsigned char key[4] = { (unsigned char)(id >> 24), (unsigned char)(id >> 16),
				 (unsigned char)(id >> 8), (unsigned char)id };

	snprintf(amt, sizeof amt, "%d", id * 100);
	v[0] = tl_int(id);
	v[1] = tl_dec(false, amt, 2);
	tl_change(&c, g_orders, SL_OP_INSERT, v, pos, 0, TS0);
	sl_change_set_uuid(&c, "s1", key, sizeof key);
	if (sl_avro_dir_ops.write(ctx, &c, err, sizeof err) != 0)
		fail_msg("write: %s", err);
}

static void write_customer(void *ctx, uint64_t pos, uint32_t seq, int64_t id, const char *name, int64_t ts)
{
	char err[512];
	struct sl_value v[2];
	struct sl_change c;

	v[0] = tl_int(id);
	v[1] = tl_str(name);
	tl_change(&c, g_customers, SL_OP_UPDATE_INSERT, v, pos, seq, ts);
	if (sl_avro_dir_ops.write(ctx, &c, err, sizeof err) != 0)
		fail_msg("write: %s", err);
}

static void flush(void *ctx)
{
	struct sl_position d;
	char err[512];

	if (sl_avro_dir_ops.flush(ctx, &d, err, sizeof err) < 0)
		fail_msg("flush: %s", err);
}

/* discard_backfill of the run whose snapshot has CSN position part pos:
 * its marker (pos - 1, 0) through its rows (pos, 0). */
static int discard(void *ctx, const struct sl_table *t, uint64_t pos, char *err, size_t errlen)
{
	char first[SL_CSN_LEN + 1], last[SL_CSN_LEN + 1];

	sl_csn_format(first, pos - 1, 0);
	sl_csn_format(last, pos, 0);
	return sl_avro_dir_ops.discard_backfill(ctx, t, first, last, err, errlen);
}

/* True for the tree's own metadata: manifests and schema files. */
static bool is_meta(const char *rel)
{
	const char *base = strrchr(rel, '/');

	base = base ? base + 1 : rel;
	return strstr(rel, "/_manifests/") != NULL || !strcmp(base, ".schema.avsc");
}

/* The data files (and temporary files) under the tree, sorted: like
 * tl_list_files, without the metadata. */
static char **list_files(const char *root, size_t *n)
{
	char **l = tl_list_files(root, n);
	size_t k = 0;

	for (size_t i = 0; i < *n; i++) {
		if (is_meta(l[i]))
			free(l[i]);
		else
			l[k++] = l[i];
	}
	*n = k;
	return l;
}

/* Counts the .avro files and the temporary files under the tree. */
static void count_files(size_t *visible, size_t *hidden)
{
	size_t n;
	char **l = list_files(g_dir, &n);

	*visible = *hidden = 0;
	for (size_t i = 0; i < n; i++) {
		const char *base = strrchr(l[i], '/');
		base = base ? base + 1 : l[i];
		if (base[0] == '.')
			(*hidden)++;
		else if (strlen(base) > 5 && !strcmp(base + strlen(base) - 5, ".avro"))
			(*visible)++;
		else
			fail_msg("unexpected file %s", l[i]);
	}
	tl_free_list(l, n);
}

/* read_file's walk: the CSNs of the first and last record, the payload's width. */
struct file_walk {
	int n;
	char *first, *last;
	int *payload_fields;
};

static void walk_record(void *arg, struct avro_value *val)
{
	struct file_walk *w = arg;
	avro_value_t sm, f, pl;
	const char *s;
	size_t sz;

	assert_int_equal(avro_value_get_by_name(val, "source_metadata", &sm, NULL), 0);
	assert_int_equal(avro_value_get_by_name(&sm, "change_sequence_number", &f, NULL), 0);
	assert_int_equal(avro_value_get_string(&f, &s, &sz), 0);
	if (w->n == 0)
		snprintf(w->first, 28, "%s", s);
	snprintf(w->last, 28, "%s", s);
	if (w->payload_fields) {
		assert_int_equal(avro_value_get_by_name(val, "payload", &pl, NULL), 0);
		assert_int_equal(avro_value_get_size(&pl, &sz), 0);
		*w->payload_fields = (int)sz;
	}
	w->n++;
}

/* Reads a file with avro-c; returns the record count, and the first and last
 * change_sequence_number in first/last (28 bytes each). */
static int read_file(const char *rel, char *first, char *last, int *payload_fields)
{
	struct file_walk w = { 0, first, last, payload_fields };
	char path[1024];

	snprintf(path, sizeof path, "%s/%s", g_dir, rel);
	if (tl_avro_c_each(path, walk_record, &w) < 0)
		fail_msg("avro-c cannot open %s: %s", path, avro_strerror());
	return w.n;
}

static void test_registry(void **state)
{
	(void)state;
	assert_ptr_equal(sl_sink_lookup("avro_dir"), &sl_avro_dir_ops);
	assert_string_equal(sl_avro_dir_ops.type, "avro_dir");
	assert_non_null(sl_sink_lookup("clickhouse"));
	assert_non_null(sl_sink_lookup("s3"));
	assert_null(sl_sink_lookup("nope"));
	assert_null(sl_sink_lookup(NULL));
}

/* Folds a change of g_customers (id, name) into b, or tells b it skips it
 * (sl_mbatch_skip). */
static void batch_put(struct sl_mbatch *b, bool skip, enum sl_op op, uint64_t pos, uint32_t seq, int64_t id,
		      struct sl_value name)
{
	struct sl_value v[2] = { tl_int(id), name };
	struct sl_change c;
	char err[512];
	int rc;

	tl_change(&c, g_customers, op, op == SL_OP_TRUNCATE ? NULL : v, pos, seq, TS0);
	rc = skip ? sl_mbatch_skip(b, &c, err, sizeof err) : sl_mbatch_put(b, &c, err, sizeof err);
	if (rc != 0)
		fail_msg("%s: %s", skip ? "skip" : "put", err);
}

/* The key of customer id in Avro binary, into key. */
static void customer_key(struct sl_buf *key, int64_t id)
{
	struct sl_value k = tl_int(id);
	char err[256];

	sl_buf_reset(key);
	assert_int_equal(sl_avro_put_value(key, &g_customers->cols[0], &k, err, sizeof err), 0);
}

/* A replayed key change whose UPDATE-DELETE a committed snapshot holds
 * already (sl_mbatch_skip): its UPDATE-INSERT waits for the old key's row
 * in the mirror, not for its own key's, which has none (issue 17, seed
 * 4840: the iceberg sink left the value null). */
static void test_merge_batch_skip(void **state)
{
	struct sl_mbatch b;
	struct sl_mrow **rows;
	struct sl_buf old;
	size_t n;

	(void)state;
	memset(&b, 0, sizeof b);
	sl_buf_init(&old, 0);
	customer_key(&old, 5);
	batch_put(&b, true, SL_OP_UPDATE_DELETE, 20, 1, 5, tl_null());
	batch_put(&b, false, SL_OP_UPDATE_INSERT, 20, 2, 105, tl_unchanged());
	/* a plain update after a skipped change of another kind: its own key */
	batch_put(&b, true, SL_OP_UPDATE_INSERT, 21, 1, 7, tl_unchanged());
	batch_put(&b, false, SL_OP_UPDATE_INSERT, 21, 2, 8, tl_unchanged());
	rows = sl_mbatch_sorted(&b, &n);
	assert_int_equal(n, 2);
	assert_int_equal(rows[0]->vals[1].kind, SL_V_UNCHANGED);   /* key 105 */
	assert_non_null(rows[0]->fill);
	assert_int_equal(rows[0]->filllen, old.len);
	assert_memory_equal(rows[0]->fill, old.data, old.len);      /* key 5's row */
	assert_non_null(rows[1]->fill);                              /* key 8 */
	assert_int_equal(rows[1]->filllen, rows[1]->keylen);
	assert_memory_equal(rows[1]->fill, rows[1]->key, rows[1]->keylen);
	free(rows);
	sl_buf_free(&old);
	sl_mbatch_free(&b);
}

static void mark_at(void *ctx, uint64_t lsn);

/* One change of g_customers (id, name) through the sink ops. */
static void put_customer_via(const struct sl_sink_ops *ops, void *ctx, enum sl_op op, uint64_t pos, uint32_t seq,
			     int64_t id, struct sl_value name)
{
	struct sl_value v[2] = { tl_int(id), name };
	struct sl_change c;
	char err[512];

	tl_change(&c, g_customers, op, v, pos, seq, TS0);
	if (ops->write(ctx, &c, err, sizeof err) != 0)
		fail_msg("write: %s", err);
}

/* ice_customer_name's search: the customer, and what its newest record says. */
struct customer_probe {
	int64_t id;
	char *out;
	size_t outlen;
	size_t *unchanged;
};

static void probe_customer(void *arg, struct avro_value *val)
{
	struct customer_probe *c = arg;
	avro_value_t f, br;
	int64_t k;
	const char *str;
	size_t sz;

	assert_int_equal(avro_value_get_by_name(val, "id", &f, NULL), 0);
	assert_int_equal(avro_value_get_long(&f, &k), 0);
	if (k != c->id)
		return;
	assert_int_equal(avro_value_get_by_name(val, "name", &f, NULL), 0);
	assert_int_equal(avro_value_get_current_branch(&f, &br), 0);
	if (avro_value_get_type(&br) == AVRO_NULL)
		snprintf(c->out, c->outlen, "(null)");
	else if (avro_value_get_string(&br, &str, &sz) == 0)
		snprintf(c->out, c->outlen, "%s", str);
	assert_int_equal(avro_value_get_by_name(val, "_unchanged_columns", &f, NULL), 0);
	assert_int_equal(avro_value_get_size(&f, c->unchanged), 0);
}

/* The name of customer id in the newest data file of the iceberg table
 * that has it, read with avro-c ("" when none has it; "(null)" for a null,
 * and then *unchanged is how many columns _unchanged_columns names). */
static void ice_customer_name(int64_t id, char *out, size_t outlen, size_t *unchanged)
{
	struct customer_probe c = { id, out, outlen, unchanged };
	char dir[1024], path[1200];
	char **files;
	size_t n;

	snprintf(out, outlen, "%s", "");
	snprintf(dir, sizeof dir, "%s/s1/public_customers/data", g_dir);
	files = tl_list_files(dir, &n);
	for (size_t i = 0; i < n; i++) {   /* named by CSN: the newest last */
		if (strstr(files[i], "-deletes.avro"))
			continue;
		snprintf(path, sizeof path, "%s/%s", dir, files[i]);
		if (tl_avro_c_each(path, probe_customer, &c) < 0)
			fail_msg("avro-c cannot open %s: %s", path, avro_strerror());
	}
	tl_free_list(files, n);
}

/* The iceberg sink, merge mode: a flush in the middle of a transaction (a
 * drain) commits a key change's UPDATE-DELETE without its UPDATE-INSERT;
 * the next run replays both, skips the UPDATE-DELETE (the table holds it)
 * and takes the value the UPDATE-INSERT left unchanged from the old key's
 * row.  Before, it looked for the new key's row, found none, and wrote a
 * null (issue 17, property seed 4840). */
static void test_iceberg_replayed_key_change_after_a_cut(void **state)
{
	const struct sl_sink_ops *ops = sl_sink_lookup("iceberg");
	struct sl_iceberg_conf ic;
	struct sl_sink_stream st = { .name = "s1", .mode = SL_WRITE_MERGE, .destination = "lake" };
	struct sl_position d, at;
	char err[512], name[64];
	size_t unchanged = 0;
	void *ctx;

	(void)state;
	assert_non_null(ops);
	memset(&ic, 0, sizeof ic);
	ic.path = g_dir;
	ic.codec = SL_CODEC_NULL;
	ic.compression_level = 1;
	ic.max_file_bytes = 64 << 20;
	ic.max_file_seconds = 60;
	ic.compact_small_bytes = 16 << 20;
	ic.snapshot_retention = 86400;
	ic.snapshot_keep = 10;
	ic.orphan_grace = 86400;
	memset(&at, 0, sizeof at);
	assert_int_equal(ops->open(&ctx, &ic, &st, err, sizeof err), 0);
	put_customer_via(ops, ctx, SL_OP_INSERT, 0x10, 1, 5, tl_str("a long value"));
	at.w[0] = 0x20;
	ops->mark(ctx, &at);
	assert_true(ops->flush(ctx, &d, err, sizeof err) >= 0);
	/* the transaction at 0x30 moves key 5 to 105; a drain cuts it after
	 * the UPDATE-DELETE (the position stays at the last commit) */
	put_customer_via(ops, ctx, SL_OP_UPDATE_DELETE, 0x30, 1, 5, tl_null());
	assert_true(ops->flush(ctx, &d, err, sizeof err) >= 0);
	ops->close(ctx);
	/* the next run replays the transaction */
	assert_int_equal(ops->open(&ctx, &ic, &st, err, sizeof err), 0);
	put_customer_via(ops, ctx, SL_OP_UPDATE_DELETE, 0x30, 1, 5, tl_null());
	put_customer_via(ops, ctx, SL_OP_UPDATE_INSERT, 0x30, 2, 105, tl_unchanged());
	at.w[0] = 0x40;
	ops->mark(ctx, &at);
	if (ops->flush(ctx, &d, err, sizeof err) < 0)
		fail_msg("flush: %s", err);
	ops->close(ctx);
	ice_customer_name(105, name, sizeof name, &unchanged);
	assert_string_equal(name, "a long value");
	assert_int_equal(unchanged, 0);
}

/* Merge mode's per-batch folding (merge.h): the last change of a key wins,
 * deletes stay as deleted rows, a TRUNCATE clears what came before it, and
 * an unchanged value comes from the key's row in the batch or, after a key
 * change, from the old key's row; else the row names the key to fill from. */
static void test_merge_batch_fold(void **state)
{
	struct sl_mbatch b;
	struct sl_mrow **rows;
	size_t n;

	(void)state;
	memset(&b, 0, sizeof b);
	batch_put(&b, false, SL_OP_INSERT, 10, 1, 1, tl_str("one"));
	batch_put(&b, false, SL_OP_UPDATE_INSERT, 10, 2, 1, tl_unchanged());
	/* key change 1 -> 2: the UPDATE-INSERT takes "one" from the old key's row */
	batch_put(&b, false, SL_OP_UPDATE_DELETE, 10, 3, 1, tl_null());
	batch_put(&b, false, SL_OP_UPDATE_INSERT, 10, 4, 2, tl_unchanged());
	/* key 3: nothing in the batch, so it waits for the mirror */
	batch_put(&b, false, SL_OP_UPDATE_INSERT, 11, 1, 3, tl_unchanged());
	rows = sl_mbatch_sorted(&b, &n);
	assert_int_equal(n, 3);
	assert_int_equal(rows[0]->op, SL_OP_UPDATE_DELETE);  /* key 1, deleted */
	assert_true(rows[0]->deleted);
	assert_int_equal(rows[1]->op, SL_OP_UPDATE_INSERT);  /* key 2 */
	assert_int_equal(rows[1]->vals[1].kind, SL_V_STRING);
	assert_memory_equal(rows[1]->vals[1].p, "one", 3);
	assert_null(rows[1]->fill);
	assert_int_equal(rows[2]->vals[1].kind, SL_V_UNCHANGED);  /* key 3 */
	assert_non_null(rows[2]->fill);
	assert_memory_equal(rows[2]->fill, rows[2]->key, rows[2]->keylen);
	free(rows);
	/* a TRUNCATE clears the batch and stays as its marker */
	batch_put(&b, false, SL_OP_TRUNCATE, 12, 1, 0, tl_null());
	batch_put(&b, false, SL_OP_INSERT, 12, 2, 4, tl_str("four"));
	rows = sl_mbatch_sorted(&b, &n);
	assert_int_equal(n, 2);
	assert_int_equal(rows[0]->op, SL_OP_TRUNCATE);
	assert_int_equal(rows[1]->op, SL_OP_INSERT);
	free(rows);
	sl_mbatch_free(&b);
}

static void *open_merge_sink(uint64_t compact_after)
{
	struct sl_avro_dir_conf dc;
	struct sl_sink_stream st = { .name = "s1", .mode = SL_WRITE_MERGE, .destination = "lake" };
	char err[512];
	void *ctx;

	st.state_dir = g_dir;
	memset(&dc, 0, sizeof dc);
	dc.path = g_dir;
	dc.codec = g_codec;
	dc.compression_level = 1;
	dc.max_file_bytes = 64 << 20;
	dc.max_file_seconds = 60;
	dc.compact_after_files = compact_after;
	if (sl_avro_dir_ops.open(&ctx, &dc, &st, err, sizeof err) != 0)
		fail_msg("open: %s", err);
	return ctx;
}

static void put_customer(void *ctx, enum sl_op op, uint64_t pos, uint32_t seq, int64_t id, struct sl_value name)
{
	put_customer_via(&sl_avro_dir_ops, ctx, op, pos, seq, id, name);
}

static size_t count_data_files(void)
{
	size_t n, vis = 0;
	char **l = tl_list_files(g_dir, &n);

	for (size_t i = 0; i < n; i++) {
		const char *b = strrchr(l[i], '/');
		vis += b && b[1] != '.' && strstr(b, ".avro");
	}
	tl_free_list(l, n);
	return vis;
}

/* A change whose key has no value cannot be merged: the error names the
 * table, the column and the change (its type and CSN). */
static void test_merge_batch_null_key(void **state)
{
	struct sl_mbatch b;
	struct sl_value v[2] = { tl_null(), tl_str("gone") };
	struct sl_change c;
	char err[512], want[256];

	(void)state;
	memset(&b, 0, sizeof b);
	tl_change(&c, g_customers, SL_OP_DELETE, v, 10, 1, TS0);
	assert_int_equal(sl_mbatch_put(&b, &c, err, sizeof err), SL_EDATA);
	snprintf(want, sizeof want, "table \"%s\": key column \"%s\" has no value in merge mode (the DELETE at %s)",
		 g_customers->object, g_customers->cols[0].name, c.csn);
	assert_string_equal(err, want);
	sl_mbatch_free(&b);
}

/* In the sink, such a change goes to the dead-letter file in state_dir,
 * named by table and CSN, and the stream goes on with the other rows. */
static void test_merge_null_key_dead_letter(void **state)
{
	struct sl_store store;
	struct sl_mirror m;
	struct sl_buf key, want, path;
	struct sl_value v[2] = { tl_null(), tl_str("gone") };
	struct sl_change c;
	unsigned char *text;
	size_t len;
	char err[512];
	void *ctx;

	(void)state;
	ctx = open_merge_sink(0);
	put_customer(ctx, SL_OP_INSERT, 10, 1, 1, tl_str("one"));
	tl_change(&c, g_customers, SL_OP_DELETE, v, 11, 1, TS0);
	if (sl_avro_dir_ops.write(ctx, &c, err, sizeof err) != 0)
		fail_msg("write: %s", err);
	put_customer(ctx, SL_OP_INSERT, 12, 1, 2, tl_str("two"));
	flush(ctx);
	assert_int_equal(sl_avro_dir_ops.dead_letters(ctx), 1);
	sl_avro_dir_ops.close(ctx);

	sl_buf_init(&want, 0);
	sl_buf_printf(&want, "\"stream\":\"s1\",\"table\":\"public_customers\",\"code\":0,\"reason\":\"table "
		      "\\\"public_customers\\\": key column \\\"id\\\" has no value in merge mode (the DELETE at %s)\","
		      "\"csn\":\"%s\",\"change_type\":\"DELETE\",\"row\":{\"id\":null,\"name\":\"gone\"}}\n", c.csn, c.csn);
	sl_buf_init(&path, 0);
	sl_buf_printf(&path, "%s/s1.dead-letter.jsonl", g_dir);
	assert_false(sl_buf_failed(&want) || sl_buf_failed(&path));
	text = tl_read_file(path.data, &len);
	assert_non_null(text);
	assert_non_null(strstr((char *)text, want.data));
	assert_int_equal(strchr((char *)text, '\n') - (char *)text + 1, (long)len);  /* one line */
	free(text);

	/* the mirror holds keys 1 and 2 */
	assert_int_equal(sl_avro_dir_store(&store, g_dir, err, sizeof err), 0);
	memset(&m, 0, sizeof m);
	assert_int_equal(sl_mirror_load(&m, &store, "s1", "public_customers", err, sizeof err), 0);
	sl_buf_init(&key, 0);
	for (int i = 1; i <= 2; i++) {
		customer_key(&key, i);
		assert_non_null(sl_mirror_find(&m, key.data, key.len));
	}
	sl_buf_free(&key);
	sl_buf_free(&want);
	sl_buf_free(&path);
	sl_mirror_free(&m);
	store.ops->close(store.ctx);
}

/* The codec of the tree's only data file. */
static enum sl_codec data_file_codec(void)
{
	struct sl_ocf_reader *r;
	enum sl_codec c = SL_CODEC_NULL;
	size_t n, found = 0;
	char **l = list_files(g_dir, &n), path[1024], err[512];

	for (size_t i = 0; i < n; i++) {
		if (!strstr(l[i], ".avro"))
			continue;
		snprintf(path, sizeof path, "%s/%s", g_dir, l[i]);
		if (sl_ocf_reader_open(&r, path, err, sizeof err) != 0)
			fail_msg("%s", err);
		c = sl_ocf_reader_codec(r);
		sl_ocf_reader_close(r);
		found++;
	}
	tl_free_list(l, n);
	assert_int_equal(found, 1);
	return c;
}

/* Three flushes, then compaction (by sluice compact and automatically): one
 * base with the current rows, the unchanged value filled from the files,
 * and verify passes. */
static void test_merge_compact(void **state)
{
	struct sl_avro_dir_conf dc;
	struct sl_sink_stream st = { .name = "s1", .mode = SL_WRITE_MERGE, .destination = "lake" };
	struct sl_store store;
	struct sl_mirror m;
	struct sl_buf key;
	const struct sl_mentry *e;
	const unsigned char *p;
	size_t len;
	char err[512];
	FILE *out;
	void *ctx;

	(void)state;
	st.state_dir = g_dir;
	ctx = open_merge_sink(3);
	for (int i = 1; i <= 5; i++)
		put_customer(ctx, SL_OP_INSERT, 10, (uint32_t)i, i, tl_str("first"));
	flush(ctx);
	put_customer(ctx, SL_OP_DELETE, 11, 1, 2, tl_null());
	put_customer(ctx, SL_OP_UPDATE_INSERT, 11, 2, 3, tl_str("third"));
	flush(ctx);
	assert_int_equal(count_data_files(), 2);
	/* key 4's name is unchanged and not in the batch: from the files */
	put_customer(ctx, SL_OP_UPDATE_INSERT, 12, 1, 4, tl_unchanged());
	flush(ctx);  /* the third file: compacted automatically */
	sl_avro_dir_ops.close(ctx);
	assert_int_equal(count_data_files(), 1);

	memset(&dc, 0, sizeof dc);
	dc.path = g_dir;
	dc.codec = g_codec;
	dc.compression_level = 1;
	out = tmpfile();
	assert_int_equal(sl_avro_dir_ops.compact(&dc, &st, "public_customers", out, err, sizeof err), 0);
	assert_int_equal(sl_avro_dir_ops.verify(&dc, &st, out, err, sizeof err), 0);
	fclose(out);
	assert_int_equal(count_data_files(), 1);
	assert_int_equal(data_file_codec(), g_codec);

	/* the mirror: keys 1, 3, 4, 5; 3 is "third", 4 kept "first" */
	assert_int_equal(sl_avro_dir_store(&store, g_dir, err, sizeof err), 0);
	memset(&m, 0, sizeof m);
	assert_int_equal(sl_mirror_load(&m, &store, "s1", "public_customers", err, sizeof err), 0);
	sl_buf_init(&key, 0);
	for (int i = 1; i <= 5; i++) {
		customer_key(&key, i);
		e = sl_mirror_find(&m, key.data, key.len);
		if (i == 2) {
			assert_null(e);
			continue;
		}
		assert_non_null(e);
		assert_int_equal(sl_mirror_field(&m, e, "name", "[\"null\",\"string\"]", &p, &len), 0);
		if (i == 3)
			assert_memory_equal(p + 2, "third", 5);
		else
			assert_memory_equal(p + 2, "first", 5);
	}
	sl_buf_free(&key);
	sl_mirror_free(&m);
	store.ops->close(store.ctx);
}

/* A lookup's bound: key 1 below the CSN in arg. */
static bool want_below(void *arg, const void *key, size_t len, const char **below)
{
	(void)key;
	(void)len;
	*below = arg;
	return true;
}

/* The name of the live writing of key 1 below bound, "" when none. */
static const char *name_below(struct sl_store *store, const char *bound, const char *probe_bound)
{
	static char out[64];
	struct sl_mirror m;
	struct sl_buf key;
	const struct sl_mentry *e;
	const unsigned char *p;
	size_t len;
	char err[512];

	memset(&m, 0, sizeof m);
	m.want = want_below;
	m.want_arg = (void *)bound;
	assert_int_equal(sl_mirror_load(&m, store, "s1", "public_customers", err, sizeof err), 0);
	sl_buf_init(&key, 0);
	customer_key(&key, 1);
	out[0] = '\0';
	if ((e = sl_mirror_find_below(&m, key.data, key.len, probe_bound))) {
		assert_int_equal(sl_mirror_field(&m, e, "name", "[\"null\",\"string\"]", &p, &len), 0);
		assert_true(len >= 2 && len - 2 < sizeof out);
		memcpy(out, p + 2, len - 2);   /* the union's branch, the length, the bytes */
		out[len - 2] = '\0';
	}
	sl_buf_free(&key);
	sl_mirror_free(&m);
	return out;
}

/* sl_mirror_find_below: key 1 is written "first", "second", deleted (a key
 * change's tombstone), then "new" (a new row of the key), one file each;
 * below each bound the lookup keeps the latest live writing, whatever the
 * key's latest writing is (a tombstone is skipped); a TRUNCATE hides what
 * is older than it. */
static void test_mirror_find_below(void **state)
{
	struct sl_store store;
	char b10[SL_CSN_LEN + 1], b11[SL_CSN_LEN + 1], b12[SL_CSN_LEN + 1], b13[SL_CSN_LEN + 1],
		b14[SL_CSN_LEN + 1], b16[SL_CSN_LEN + 1];
	char err[512];
	void *ctx;

	(void)state;
	ctx = open_merge_sink(0);
	put_customer(ctx, SL_OP_INSERT, 10, 1, 1, tl_str("first"));
	flush(ctx);
	put_customer(ctx, SL_OP_UPDATE_INSERT, 11, 1, 1, tl_str("second"));
	flush(ctx);
	put_customer(ctx, SL_OP_UPDATE_DELETE, 12, 1, 1, tl_null());
	flush(ctx);
	put_customer(ctx, SL_OP_INSERT, 13, 1, 1, tl_str("new"));
	flush(ctx);
	assert_int_equal(sl_avro_dir_store(&store, g_dir, err, sizeof err), 0);
	sl_csn_format(b10, 10, 1);
	sl_csn_format(b11, 11, 1);
	sl_csn_format(b12, 12, 1);
	sl_csn_format(b13, 13, 1);
	sl_csn_format(b14, 14, 1);
	sl_csn_format(b16, 16, 1);
	assert_string_equal(name_below(&store, b12, b12), "second");  /* under the tombstone and the new row */
	assert_string_equal(name_below(&store, b11, b11), "first");
	assert_string_equal(name_below(&store, b10, b10), "");        /* nothing below the first */
	assert_string_equal(name_below(&store, b14, b14), "new");     /* the latest itself */
	assert_string_equal(name_below(&store, b13, b13), "second");  /* a tombstone is no row */
	/* a TRUNCATE at 15: nothing older than it is the key's row */
	put_customer(ctx, SL_OP_TRUNCATE, 15, 1, 0, tl_null());
	flush(ctx);
	assert_string_equal(name_below(&store, b12, b12), "");
	assert_string_equal(name_below(&store, b16, b16), "");
	put_customer(ctx, SL_OP_INSERT, 16, 2, 1, tl_str("after"));
	flush(ctx);
	sl_avro_dir_ops.close(ctx);
	assert_string_equal(name_below(&store, b16, b16), "");
	sl_csn_format(b16, 16, 3);
	assert_string_equal(name_below(&store, b16, b16), "after");
	store.ops->close(store.ctx);
}

/* The same with zstandard files: merge-mode files, the mirror's reading of
 * them, the compacted base and verify (avro-c reads no zstandard: sluice's
 * reader decompresses the blocks). */
static void test_merge_compact_zstandard(void **state)
{
	g_codec = SL_CODEC_ZSTANDARD;
	test_merge_compact(state);
}

static void test_layout(void **state)
{
	void *ctx = open_sink(SL_CODEC_DEFLATE, 64 << 20, 60);
	size_t vis, hid, n;
	char **l, first[28], last[28];
	regex_t re;
	struct sl_avro_stats st;
	int64_t now;

	(void)state;
	assert_false(sl_avro_dir_ops.pending(ctx));
	now = sl_mono_ms();
	assert_false(sl_avro_dir_ops.flush_due(ctx, now));
	/* orders: first record at 13:45:10, then a later one at 14:02 (same file) */
	write_order(ctx, g_orders, 0x16B374D8, 1, 1, TS0);
	write_customer(ctx, 0x16B374D8, 2, 10, "ann", TS0 + 1);
	write_order(ctx, g_orders, 0x16B374D8, 3, 2, TS0 + INT64_C(1000000) * 1010);
	write_customer(ctx, 0x16B374D8, 4, 11, "bob", TS0 + 2);
	write_order(ctx, g_orders, 0x16B37500, 1, 3, TS0 + 3);
	assert_true(sl_avro_dir_ops.pending(ctx));
	/* nothing visible before flush, but the temporary files exist */
	count_files(&vis, &hid);
	assert_int_equal(vis, 0);
	assert_int_equal(hid, 2);
	/* age: not due now, due after max_file_seconds */
	assert_false(sl_avro_dir_ops.flush_due(ctx, sl_mono_ms()));
	assert_true(sl_avro_dir_ops.flush_due(ctx, sl_mono_ms() + 60 * 1000 + 1));

	flush(ctx);
	assert_false(sl_avro_dir_ops.pending(ctx));
	assert_false(sl_avro_dir_ops.flush_due(ctx, sl_mono_ms() + 3600 * 1000));
	count_files(&vis, &hid);
	assert_int_equal(vis, 2);
	assert_int_equal(hid, 0);

	l = list_files(g_dir, &n);
	assert_int_equal(n, 2);
	assert_int_equal(regcomp(&re, "^s1/public_customers/2024/01/31/13/45/"
				 "0000000016B374D8-0000000002_0000000016B374D8-0000000004_[0-9a-f]{8}\\.avro$",
				 REG_EXTENDED | REG_NOSUB), 0);
	if (regexec(&re, l[0], 0, NULL, 0) != 0)
		fail_msg("unexpected path %s", l[0]);
	regfree(&re);
	assert_int_equal(regcomp(&re, "^s1/public_orders/2024/01/31/13/45/"
				 "0000000016B374D8-0000000001_0000000016B37500-0000000001_[0-9a-f]{8}\\.avro$",
				 REG_EXTENDED | REG_NOSUB), 0);
	if (regexec(&re, l[1], 0, NULL, 0) != 0)
		fail_msg("unexpected path %s", l[1]);
	regfree(&re);
	assert_int_equal(read_file(l[0], first, last, NULL), 2);
	assert_int_equal(read_file(l[1], first, last, NULL), 3);
	assert_string_equal(first, "0000000016B374D8-0000000001");
	assert_string_equal(last, "0000000016B37500-0000000001");
	tl_free_list(l, n);

	sl_avro_dir_get_stats(ctx, &st);
	assert_int_equal(st.records, 5);
	assert_int_equal(st.files_closed, 2);

	/* the next flush period opens new files, in the folder of their own first record */
	write_order(ctx, g_orders, 0x16B38000, 1, 4, INT64_C(1704067199000000)); /* 2023-12-31 23:59:59 */
	flush(ctx);
	l = list_files(g_dir, &n);
	assert_int_equal(n, 3);
	assert_non_null(strstr(l[1], "s1/public_orders/2023/12/31/23/59/0000000016B38000-0000000001_"));
	tl_free_list(l, n);
	/* an empty flush is fine */
	flush(ctx);
	sl_avro_dir_ops.close(ctx);
	count_files(&vis, &hid);
	assert_int_equal(vis, 3);
	assert_int_equal(hid, 0);
}

static void test_rotation(void **state)
{
	void *ctx = open_sink(SL_CODEC_NULL, 4096, 60);
	size_t n, vis, hid;
	char **l, first[28], last[28], prev_last[28] = "";
	int total = 0;

	(void)state;
	for (int i = 1; i <= 300; i++)
		write_order(ctx, g_orders, 0x5000, (uint32_t)i, i, TS0 + i);
	/* rotated files are complete but still hidden until the flush */
	count_files(&vis, &hid);
	assert_int_equal(vis, 0);
	assert_true(hid > 1);
	assert_true(sl_avro_dir_ops.flush_due(ctx, sl_mono_ms()));
	flush(ctx);
	l = list_files(g_dir, &n);
	assert_true(n > 3);
	for (size_t i = 0; i < n; i++) {
		char want[128], path[1024];
		struct stat sb;
		int k = read_file(l[i], first, last, NULL);
		total += k;
		/* the name carries the first and last CSN of the records inside */
		snprintf(want, sizeof want, "%s_%s_", first, last);
		assert_non_null(strstr(l[i], want));
		/* CSN ranges follow on without gaps or overlaps */
		assert_true(strcmp(first, prev_last) > 0);
		memcpy(prev_last, last, sizeof prev_last);
		/* rotated once the size reached the limit: never far beyond it */
		snprintf(path, sizeof path, "%s/%s", g_dir, l[i]);
		assert_int_equal(stat(path, &sb), 0);
		assert_true(sb.st_size < 4096 + 200);
		if (i + 1 < n)
			assert_true(sb.st_size >= 4096);
	}
	assert_int_equal(total, 300);
	assert_string_equal(last, "0000000000005000-0000000300");
	tl_free_list(l, n);
	sl_avro_dir_ops.close(ctx);
}

static int run_verify(char **out);

/* With compression threads: two tables interleaved, rotated by size, the
 * blocks of several files in flight at once.  Before the flush nothing is
 * visible; after it every record is there, each table's files follow on
 * without gaps, no file is over the size limit by more than a record, and
 * verify (which reads every file with avro-c) finds the tree sound. */
static void test_threads_rotation(void **state)
{
	void *ctx;
	size_t n, vis, hid, vis0 = 0;
	char **l, first[28], last[28], prev[2][28] = { "", "" }, *text = NULL;
	int total[2] = { 0, 0 };

	(void)state;
	for (int threads = 1; threads <= 2; threads++) {
		g_threads = threads;
		ctx = open_sink(SL_CODEC_DEFLATE, 64 << 10, 3600);
		g_threads = 0;
		for (int i = 1; i <= 20000; i++) {
			uint64_t pos = 0x5000 + (uint64_t)threads * 0x1000;
			write_order(ctx, g_orders, pos, (uint32_t)(2 * i - 1), i, TS0);
			write_customer(ctx, pos, (uint32_t)(2 * i), i, "a customer with a longer name", TS0);
		}
		count_files(&vis, &hid);
		assert_int_equal(vis, vis0);
		assert_true(hid > 2);
		flush(ctx);
		sl_avro_dir_ops.close(ctx);
		count_files(&vis0, &hid);
		assert_int_equal(hid, 0);
	}
	l = list_files(g_dir, &n);
	assert_true(n > 4);
	for (size_t i = 0; i < n; i++) {
		char path[1024];
		struct stat sb;
		int t = strstr(l[i], "public_orders") ? 0 : 1;
		int k = read_file(l[i], first, last, NULL);
		total[t] += k;
		assert_true(strcmp(first, prev[t]) > 0);
		memcpy(prev[t], last, sizeof prev[t]);
		snprintf(path, sizeof path, "%s/%s", g_dir, l[i]);
		assert_int_equal(stat(path, &sb), 0);
		assert_true(sb.st_size < (64 << 10) + 200);
	}
	assert_int_equal(total[0], 40000);
	assert_int_equal(total[1], 40000);
	tl_free_list(l, n);
	assert_int_equal(run_verify(&text), 0);
	free(text);
}

/* A block that a compression thread compressed but that cannot be written
 * (the file size limit: EFBIG) fails the stream's next write or its flush,
 * naming the file, and nothing is published: no data file visible, no
 * manifest, so no position is reported durable. */
static void test_threads_failed_write_not_durable(void **state)
{
	struct rlimit old, lim;
	struct sl_position d;
	void (*oldsig)(int);
	char err[512] = "";
	int rc = 0, i;
	size_t n;
	char **l;
	void *ctx;

	(void)state;
	g_threads = 1;
	ctx = open_sink(SL_CODEC_DEFLATE, (uint64_t)1 << 40, 3600);
	g_threads = 0;
	assert_int_equal(getrlimit(RLIMIT_FSIZE, &old), 0);
	lim = old;
	lim.rlim_cur = 256 << 10;
	oldsig = signal(SIGXFSZ, SIG_IGN);
	assert_int_equal(setrlimit(RLIMIT_FSIZE, &lim), 0);
	for (i = 1; i <= 300000 && rc == 0; i++) {
		char amt[32];
		struct sl_value v[3];
		struct sl_change c;
		snprintf(amt, sizeof amt, "%d", i * 100 + i % 100);
		v[0] = tl_int(i);
		v[1] = tl_dec(false, amt, 2);
		v[2] = tl_str("a note that makes the rows a little longer");
		tl_change(&c, g_orders, SL_OP_INSERT, v, 0x7000, (uint32_t)i, TS0);
		rc = sl_avro_dir_ops.write(ctx, &c, err, sizeof err);
	}
	if (rc == 0)
		rc = sl_avro_dir_ops.flush(ctx, &d, err, sizeof err);
	assert_int_equal(setrlimit(RLIMIT_FSIZE, &old), 0);
	signal(SIGXFSZ, oldsig);
	printf("# failed at row %d: %s\n", i - 1, err);
	assert_true(rc < 0);
	assert_non_null(strstr(err, "File too large"));
	assert_non_null(strstr(err, "public_orders"));
	/* the stream fails and is retried: the sink is closed */
	sl_avro_dir_ops.close(ctx);
	l = tl_list_files(g_dir, &n);
	for (size_t k = 0; k < n; k++) {
		const char *base = strrchr(l[k], '/') ? strrchr(l[k], '/') + 1 : l[k];
		if (base[0] != '.' || strstr(l[k], "_manifests/"))
			fail_msg("%s is visible after a failed flush", l[k]);
	}
	tl_free_list(l, n);
}

static void test_schema_change(void **state)
{
	void *ctx = open_sink(SL_CODEC_SNAPPY, 64 << 20, 60);
	size_t n;
	char **l, first[28], last[28];
	int fields;

	(void)state;
	write_order(ctx, g_orders, 0x6000, 1, 1, TS0);
	write_order(ctx, g_orders, 0x6000, 2, 2, TS0);
	write_order(ctx, g_orders_v2, 0x6000, 3, 3, TS0);
	write_order(ctx, g_orders_v2, 0x6000, 4, 4, TS0);
	flush(ctx);
	l = list_files(g_dir, &n);
	assert_int_equal(n, 2);
	assert_int_equal(read_file(l[0], first, last, &fields), 2);
	assert_string_equal(first, "0000000000006000-0000000001");
	assert_int_equal(fields, 2);
	assert_int_equal(read_file(l[1], first, last, &fields), 2);
	assert_string_equal(first, "0000000000006000-0000000003");
	assert_int_equal(fields, 3);
	tl_free_list(l, n);
	/* back to the old version: another new file */
	write_order(ctx, g_orders, 0x6000, 5, 5, TS0);
	flush(ctx);
	l = list_files(g_dir, &n);
	assert_int_equal(n, 3);
	tl_free_list(l, n);
	sl_avro_dir_ops.close(ctx);
}

static void test_close_without_flush(void **state)
{
	void *ctx = open_sink(SL_CODEC_DEFLATE, 4096, 60);
	size_t vis, hid;

	(void)state;
	write_order(ctx, g_orders, 0x7000, 1, 1, TS0);
	flush(ctx);
	/* more rows, including rotated (finished) files, then close */
	for (int i = 2; i <= 400; i++)
		write_order(ctx, g_orders, 0x7000, (uint32_t)i, i, TS0);
	write_customer(ctx, 0x7000, 401, 1, "x", TS0);
	count_files(&vis, &hid);
	assert_int_equal(vis, 1);
	assert_true(hid >= 2);
	sl_avro_dir_ops.close(ctx);
	count_files(&vis, &hid);
	assert_int_equal(vis, 1);  /* only the flushed one */
	assert_int_equal(hid, 0);
}

/* flush() reports the last position given to mark(), and nothing before a
 * mark: that is the only position the agent acknowledges. */
static void test_flush_reports_mark(void **state)
{
	void *ctx = open_sink(SL_CODEC_NULL, 64 << 20, 60);
	struct sl_position a, b, d;
	char err[512];

	(void)state;
	memset(&a, 0, sizeof a);
	memset(&b, 0, sizeof b);
	a.w[0] = 0x100;
	b.w[0] = 0x200;
	write_order(ctx, g_orders, 0x90, 1, 1, TS0);
	assert_int_equal(sl_avro_dir_ops.flush(ctx, &d, err, sizeof err), 0);  /* no mark yet */
	write_order(ctx, g_orders, 0x100, 1, 2, TS0);
	sl_avro_dir_ops.mark(ctx, &a);
	write_order(ctx, g_orders, 0x200, 1, 3, TS0);
	sl_avro_dir_ops.mark(ctx, &b);
	memset(&d, 0, sizeof d);
	assert_int_equal(sl_avro_dir_ops.flush(ctx, &d, err, sizeof err), 1);
	assert_true(d.w[0] == 0x200);
	/* nothing new written: the same mark again */
	memset(&d, 0, sizeof d);
	assert_int_equal(sl_avro_dir_ops.flush(ctx, &d, err, sizeof err), 1);
	assert_true(d.w[0] == 0x200);
	sl_avro_dir_ops.close(ctx);
}

static void test_discard_backfill(void **state)
{
	void *ctx = open_sink(SL_CODEC_DEFLATE, 64 << 20, 60);
	const uint64_t snap = UINT64_C(0x16B374D8);
	size_t n;
	char **l, err[512];

	(void)state;
	/* backfill of orders and customers at snapshot snap (seq 0) */
	for (int i = 0; i < 5; i++)
		write_order(ctx, g_orders, snap, 0, i, TS0);
	write_customer(ctx, snap, 0, 1, "a", TS0);
	flush(ctx);
	for (int i = 5; i < 8; i++)
		write_order(ctx, g_orders, snap, 0, i, TS0 + INT64_C(3600000000));  /* another folder */
	flush(ctx);
	/* CDC rows after the snapshot, and a backfill from another snapshot */
	write_order(ctx, g_orders, snap + 1, 1, 100, TS0);
	flush(ctx);
	write_order(ctx, g_orders, snap - 8, 0, 200, TS0);
	flush(ctx);
	/* a re-backfill file: the marker at (snap - 1, 0), then rows at (snap, 0) */
	write_order(ctx, g_orders, snap - 1, 0, 300, TS0 + INT64_C(7200000000));
	write_order(ctx, g_orders, snap, 0, 301, TS0 + INT64_C(7200000000));
	flush(ctx);
	/* an unflushed file of the same backfill */
	write_order(ctx, g_orders, snap, 0, 9, TS0);
	l = list_files(g_dir, &n);
	assert_int_equal(n, 7);  /* 6 visible + 1 temporary */
	tl_free_list(l, n);

	assert_int_equal(discard(ctx, g_orders, snap, err, sizeof err), 0);
	flush(ctx);
	l = list_files(g_dir, &n);
	assert_int_equal(n, 3);
	/* customers' backfill, the CDC file, and the other snapshot's backfill remain */
	assert_non_null(strstr(l[0], "s1/public_customers/"));
	assert_non_null(strstr(l[1], "/0000000016B374D0-0000000000_0000000016B374D0-0000000000_"));
	assert_non_null(strstr(l[2], "/0000000016B374D9-0000000001_0000000016B374D9-0000000001_"));
	tl_free_list(l, n);
	/* a table never written: nothing to do */
	assert_int_equal(discard(ctx, g_orders_v2, 1, err, sizeof err), 0);
	sl_avro_dir_ops.close(ctx);
}

/* A million-row transaction: memory does not grow with it. */
static void test_bounded_memory(void **state)
{
	void *ctx = open_sink(SL_CODEC_DEFLATE, (uint64_t)1 << 40, 3600);
	size_t after_warmup = 0, at_end;
	struct sl_avro_stats st;

	(void)state;
	for (int i = 1; i <= 1000000; i++) {
		write_order(ctx, g_orders, 0x9000, (uint32_t)i, i, TS0);
		if (i == 20000)
			after_warmup = mallinfo2().uordblks;
	}
	at_end = mallinfo2().uordblks;
	printf("# heap in use after 20000 rows %zu bytes, after 1000000 rows %zu bytes\n",
	       after_warmup, at_end);
	assert_true(at_end < after_warmup + 256 * 1024);
	flush(ctx);
	sl_avro_dir_get_stats(ctx, &st);
	assert_int_equal(st.records, 1000000);
	assert_int_equal(st.files_closed, 1);
	sl_avro_dir_ops.close(ctx);
}

/* Creates g_dir/rel (and its folders) holding a few bytes. */
static void put_file(const char *rel)
{
	char path[1024];
	char *slash;
	FILE *f;

	snprintf(path, sizeof path, "%s/%s", g_dir, rel);
	slash = strrchr(path, '/');
	*slash = '\0';
	assert_int_equal(sl_mkdir_p(path), 0);
	*slash = '/';
	f = fopen(path, "w");
	assert_non_null(f);
	fputs("partial", f);
	assert_int_equal(fclose(f), 0);
}

static bool exists(const char *rel)
{
	char path[1024];
	struct stat sb;

	snprintf(path, sizeof path, "%s/%s", g_dir, rel);
	return lstat(path, &sb) == 0;
}

/* Sends stderr to a file of the test folder; returns the descriptor that
 * log_end() puts back. */
static int log_start(void)
{
	char path[1024];
	int saved, fd;

	snprintf(path, sizeof path, "%s/stderr.log", g_dir);
	fflush(stderr);
	saved = dup(2);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	assert_true(saved >= 0 && fd >= 0);
	dup2(fd, 2);
	close(fd);
	return saved;
}

/* Puts stderr back (saved, from log_start()); returns what was logged
 * meanwhile (malloc'd). */
static char *log_end(int saved)
{
	char path[1024], *log;
	size_t len;

	fflush(stderr);
	dup2(saved, 2);
	close(saved);
	snprintf(path, sizeof path, "%s/stderr.log", g_dir);
	log = (char *)tl_read_file(path, &len);
	assert_non_null(log);
	unlink(path);
	return log;
}

/* Opens the sink for stream s1 with stderr going to a file; returns the
 * context and what was logged (malloc'd) in *log. */
static void *open_sink_logged(char **log)
{
	int saved = log_start();
	void *ctx = open_sink(SL_CODEC_DEFLATE, 64 << 20, 60);

	*log = log_end(saved);
	return ctx;
}

/* Counts the lines of log that contain what. */
static int count_lines(const char *log, const char *what)
{
	int n = 0;

	for (const char *p = log; (p = strstr(p, what)) != NULL; p += strlen(what))
		n++;
	return n;
}

/* A folder that cannot be written (the object's folder is a file) is an
 * outage of the destination: logged once when a write or flush fails, and
 * once when a flush of a later run (the agent restarts the stream; the
 * account is the agent's) works again. */
static void test_outage_logged(void **state)
{
	const struct sl_sink_ops *ops = sl_sink_lookup("avro_dir");
	struct sl_avro_dir_conf dc;
	struct sl_sink_stream st = { .name = "s1", .mode = SL_WRITE_APPEND, .destination = "lake" };
	struct sl_outage o;
	struct sl_position d;
	struct sl_value v[3] = { tl_int(1), tl_dec(false, "100", 2), tl_str("n") };
	struct sl_change c;
	char path[1024], err[512], *log;
	int saved, fd, rc;
	void *ctx;

	(void)state;
	memset(&dc, 0, sizeof dc);
	dc.path = g_dir;
	dc.codec = SL_CODEC_NULL;
	dc.max_file_bytes = 64 << 20;
	dc.max_file_seconds = 60;
	sl_outage_init(&o, "lake", 0);
	st.outage = &o;
	saved = log_start();
	assert_int_equal(ops->open(&ctx, &dc, &st, err, sizeof err), 0);
	snprintf(path, sizeof path, "%s/s1/public_orders", g_dir);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);   /* a file where the folder goes */
	assert_true(fd >= 0);
	close(fd);
	tl_change(&c, g_orders, SL_OP_INSERT, v, 0x10, 1, TS0);
	rc = ops->write(ctx, &c, err, sizeof err);
	if (rc == 0) {
		mark_at(ctx, 0x20);
		rc = ops->flush(ctx, &d, err, sizeof err);
	}
	assert_int_equal(rc, SL_EFAIL);
	ops->close(ctx);
	unlink(path);
	assert_int_equal(ops->open(&ctx, &dc, &st, err, sizeof err), 0);   /* the stream's next attempt */
	write_order(ctx, g_orders, 0x10, 1, 1, TS0);
	mark_at(ctx, 0x20);
	assert_int_equal(ops->flush(ctx, &d, err, sizeof err), 1);
	ops->close(ctx);
	log = log_end(saved);
	assert_int_equal(count_lines(log, "sluice warning: destination \"lake\" unavailable: "), 1);
	assert_int_equal(count_lines(log, "still unavailable"), 0);   /* the interval is 60 s */
	assert_int_equal(count_lines(log, "sluice info: destination \"lake\" available again after 0 s\n"), 1);
	assert_true(strstr(log, "unavailable: ") < strstr(log, "available again"));
	free(log);
	sl_outage_destroy(&o);
}

/* A run killed with SIGKILL leaves open and finished-but-unflushed files as
 * hidden temporary files; the next open removes them all, and only them. */
static void test_leftovers_after_kill(void **state)
{
	size_t vis, hid;
	char *log, want[1200];
	int status;
	pid_t pid;
	void *ctx;

	(void)state;
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		void *c = open_sink(SL_CODEC_DEFLATE, 4096, 60);
		write_order(c, g_orders, 0x8000, 1, 1, TS0);
		flush(c);
		for (int i = 2; i <= 300; i++)  /* several rotated files, one still open */
			write_order(c, g_orders, 0x8000, (uint32_t)i, i, TS0 + INT64_C(7200000000));
		write_customer(c, 0x8000, 301, 1, "x", TS0);
		raise(SIGKILL);
		_exit(0);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
	count_files(&vis, &hid);
	assert_int_equal(vis, 1);
	assert_true(hid >= 3);

	ctx = open_sink_logged(&log);
	snprintf(want, sizeof want, "sluice info: stream \"s1\": removed %zu leftover temporary files under \"%s/s1\"\n",
		 hid, g_dir);
	if (!strstr(log, want))
		fail_msg("expected \"%s\" in the log, got \"%s\"", want, log);
	free(log);
	count_files(&vis, &hid);
	assert_int_equal(vis, 1);
	assert_int_equal(hid, 0);
	/* the sink works as usual afterwards */
	write_order(ctx, g_orders, 0x8001, 1, 1, TS0);
	flush(ctx);
	count_files(&vis, &hid);
	assert_int_equal(vis, 2);
	sl_avro_dir_ops.close(ctx);

	/* nothing left over: nothing logged */
	ctx = open_sink_logged(&log);
	assert_string_equal(log, "");
	free(log);
	sl_avro_dir_ops.close(ctx);
}

/* Only regular files named exactly like our temporary files, and only under
 * this stream's folder, are removed; links are neither removed nor followed. */
static void test_leftovers_only_ours(void **state)
{
	static const char *const ours[] = {
		"s1/.0000000016B374D8-0000000001_0badcafe.avro.tmp",
		"s1/public_orders/2024/01/31/13/45/.0000000016B374D8-0000000002_00000000.avro.tmp",
		"s1/public_orders/2024/01/31/13/45/.FFFFFFFFFFFFFFFF-4294967295_ffffffff.avro.tmp",
		"s1/public_customers/1999/12/31/23/59/.0000000000000000-0000000000_12345678.avro.tmp",
		"s1/public_orders/2024/01/31/13/45/.0000000016B374D8-0000000003_0badcafe.avro.tmp/"
		".0000000016B374D8-0000000004_0badcafe.avro.tmp",
	};
	static const char *const kept[] = {
		"s1/public_orders/2024/01/31/13/45/"
		"0000000016B374D8-0000000001_0000000016B374D8-0000000002_0badcafe.avro",
		"s1/public_orders/2024/01/31/13/45/.0000000016b374d8-0000000001_0badcafe.avro.tmp",
		"s1/public_orders/2024/01/31/13/45/.0000000016B374D8-0000000001_0BADCAFE.avro.tmp",
		"s1/public_orders/2024/01/31/13/45/.0000000016B374D8-0000000001_0badcafe.avro.tmp~",
		"s1/public_orders/2024/01/31/13/45/.0000000016B374D8-000000001_0badcafe.avro.tmp",
		"s1/public_orders/2024/01/31/13/45/0000000016B374D8-0000000001_0badcafe.avro.tmp",
		"s1/public_orders/2024/01/31/13/45/.0000000016B374D8-0000000001_0badcafe.avro",
		"s1/public_orders/2024/01/31/13/45/.x.avro.tmp",
		"s1/public_orders/notes.txt",
		"s10/.0000000016B374D8-0000000001_0badcafe.avro.tmp",
		"s2/public_orders/.0000000016B374D8-0000000001_0badcafe.avro.tmp",
		"outside/.0000000016B374D8-0000000001_0badcafe.avro.tmp",
		"outside/dir/.0000000016B374D8-0000000002_0badcafe.avro.tmp",
		".0000000016B374D8-0000000001_0badcafe.avro.tmp",
	};
	char target[1024], link[1024], *log, want[1200];
	void *ctx;

	(void)state;
	for (size_t i = 0; i < sizeof ours / sizeof *ours; i++)
		put_file(ours[i]);
	for (size_t i = 0; i < sizeof kept / sizeof *kept; i++)
		put_file(kept[i]);
	/* a link with our name to a file outside, and a link to a folder outside */
	snprintf(target, sizeof target, "%s/outside/.0000000016B374D8-0000000001_0badcafe.avro.tmp", g_dir);
	snprintf(link, sizeof link, "%s/s1/.0000000016B374D8-0000000009_0badcafe.avro.tmp", g_dir);
	assert_int_equal(symlink(target, link), 0);
	snprintf(target, sizeof target, "%s/outside/dir", g_dir);
	snprintf(link, sizeof link, "%s/s1/public_orders/linked", g_dir);
	assert_int_equal(symlink(target, link), 0);

	ctx = open_sink_logged(&log);
	snprintf(want, sizeof want, "stream \"s1\": removed %zu leftover temporary files under \"%s/s1\"\n",
		 sizeof ours / sizeof *ours, g_dir);
	if (!strstr(log, want))
		fail_msg("expected \"%s\" in the log, got \"%s\"", want, log);
	free(log);
	for (size_t i = 0; i < sizeof ours / sizeof *ours; i++)
		if (exists(ours[i]))
			fail_msg("%s was not removed", ours[i]);
	for (size_t i = 0; i < sizeof kept / sizeof *kept; i++)
		if (!exists(kept[i]))
			fail_msg("%s was removed", kept[i]);
	/* the folder named like a temporary file, and both links, remain */
	assert_true(exists("s1/public_orders/2024/01/31/13/45/.0000000016B374D8-0000000003_0badcafe.avro.tmp"));
	assert_true(exists("s1/.0000000016B374D8-0000000009_0badcafe.avro.tmp"));
	assert_true(exists("s1/public_orders/linked"));
	sl_avro_dir_ops.close(ctx);
}

static void test_bad_value(void **state)
{
	void *ctx = open_sink(SL_CODEC_NULL, 64 << 20, 60);
	struct sl_value v[2] = { tl_int(1), tl_dec(false, "12345", 3) };  /* 12.345 */
	struct sl_change c;
	char err[512];

	(void)state;
	tl_change(&c, g_orders, SL_OP_INSERT, v, 1, 1, TS0);
	assert_int_equal(sl_avro_dir_ops.write(ctx, &c, err, sizeof err), -1);
	assert_string_equal(err, "column \"amount\": a decimal value of scale 3 does not fit decimal(10,2)");
	sl_avro_dir_ops.close(ctx);
}

/* Reads g_dir/rel as JSON (the test fails if it cannot). */
static json_t *read_json(const char *rel)
{
	char path[1024];
	json_error_t je;
	json_t *j;

	snprintf(path, sizeof path, "%s/%s", g_dir, rel);
	j = json_load_file(path, 0, &je);
	if (!j)
		fail_msg("%s: %s", rel, je.text);
	return j;
}

static const char *jstr(json_t *o, const char *key)
{
	json_t *v = json_object_get(o, key);
	return json_is_string(v) ? json_string_value(v) : NULL;
}

static long long jint(json_t *o, const char *key)
{
	json_t *v = json_object_get(o, key);
	if (!json_is_integer(v))
		fail_msg("\"%s\" is not an integer", key);
	return (long long)json_integer_value(v);
}

static void mark_at(void *ctx, uint64_t lsn)
{
	struct sl_position p;

	memset(&p, 0, sizeof p);
	p.w[0] = lsn;
	sl_avro_dir_ops.mark(ctx, &p);
}

/* Checks that manifest file entry f describes the data file it names as it
 * is: size, record count, first and last CSN, object. */
static void check_listed(json_t *f, const char *object)
{
	char path[1024], first[28], last[28];
	struct stat sb;
	const char *rel = jstr(f, "path");

	assert_non_null(rel);
	snprintf(path, sizeof path, "%s/%s", g_dir, rel);
	assert_int_equal(stat(path, &sb), 0);
	assert_int_equal(jint(f, "bytes"), (long long)sb.st_size);
	assert_int_equal(jint(f, "records"), read_file(rel, first, last, NULL));
	assert_string_equal(jstr(f, "first_csn"), first);
	assert_string_equal(jstr(f, "last_csn"), last);
	assert_string_equal(jstr(f, "object"), object);
	assert_int_equal(strlen(jstr(f, "schema_key")), 16);
}

/* Runs the sink's verify into a buffer; returns its status, *out the text. */
static int run_verify(char **out)
{
	struct sl_avro_dir_conf dc;
	struct sl_sink_stream st = { .name = "s1", .mode = SL_WRITE_APPEND, .destination = "lake" };
	char err[512] = "";
	size_t len = 0;
	FILE *f = open_memstream(out, &len);
	int rc;

	memset(&dc, 0, sizeof dc);
	dc.path = g_dir;
	rc = sl_avro_dir_ops.verify(&dc, &st, f, err, sizeof err);
	fclose(f);
	if (rc != 0 && rc != SL_EVERIFY)
		fail_msg("verify failed: %s", err);
	return rc;
}

/* Each flush that publishes files writes the next manifest of the chain:
 * it lists exactly those files as they are, starts where the previous one
 * ended and ends at the flushed mark; a restart goes on with the chain, also
 * without .latest.json.  Each object gets its schema file. */
static void test_manifests(void **state)
{
	void *ctx = open_sink(SL_CODEC_DEFLATE, 64 << 20, 60);
	json_t *m, *files, *f;
	size_t n;
	char **l, *text, want[64];
	struct sl_avro_enc *enc;
	unsigned char *schema;
	size_t slen, elen;
	const char *es;
	char err[256];

	(void)state;
	write_order(ctx, g_orders, 0x16B374D8, 1, 1, TS0);
	write_customer(ctx, 0x16B374D8, 2, 10, "ann", TS0);
	write_order(ctx, g_orders, 0x16B374D8, 3, 2, TS0);
	mark_at(ctx, 0x16B37500);
	flush(ctx);
	m = read_json("s1/_manifests/.0000000001.json");
	assert_int_equal(jint(m, "format"), 1);
	assert_int_equal(jint(m, "sequence"), 1);
	assert_string_equal(jstr(m, "stream"), "s1");
	assert_string_equal(jstr(m, "source"), "postgres");
	assert_true(json_is_null(json_object_get(m, "previous")));
	assert_true(json_is_null(json_object_get(m, "from")));
	assert_string_equal(jstr(json_object_get(m, "to"), "position"), "0/16B37500");
	assert_string_equal(jstr(json_object_get(m, "to"), "csn"), "0000000016B37500");
	files = json_object_get(m, "files");
	assert_int_equal(json_array_size(files), 2);
	/* in publishing order: the orders file was opened first */
	check_listed(json_array_get(files, 0), "public_orders");
	check_listed(json_array_get(files, 1), "public_customers");
	assert_int_equal(jint(json_array_get(files, 0), "records"), 2);
	assert_int_equal(json_array_size(json_object_get(m, "removed")), 0);
	json_decref(m);
	m = read_json("s1/_manifests/.latest.json");
	assert_int_equal(jint(m, "sequence"), 1);
	json_decref(m);
	/* the schema file holds the encoder's schema, as the file header does */
	enc = sl_avro_enc_new(g_orders, "s1", err, sizeof err);
	assert_non_null(enc);
	es = sl_avro_enc_schema(enc, &elen);
	snprintf(want, sizeof want, "%s/s1/public_orders/.schema.avsc", g_dir);
	schema = tl_read_file(want, &slen);
	assert_non_null(schema);
	assert_int_equal(slen, elen);
	assert_memory_equal(schema, es, elen);
	free(schema);
	sl_avro_enc_free(enc);

	/* a second flush chains on; an empty flush writes no manifest */
	write_order(ctx, g_orders, 0x16B38000, 1, 3, TS0);
	mark_at(ctx, 0x16B38100);
	flush(ctx);
	mark_at(ctx, 0x16B38200);
	flush(ctx);
	m = read_json("s1/_manifests/.0000000002.json");
	assert_string_equal(jstr(m, "previous"), "s1/_manifests/.0000000001.json");
	assert_string_equal(jstr(json_object_get(m, "from"), "position"), "0/16B37500");
	assert_string_equal(jstr(json_object_get(m, "to"), "position"), "0/16B38100");
	assert_int_equal(json_array_size(json_object_get(m, "files")), 1);
	check_listed(json_array_get(json_object_get(m, "files"), 0), "public_orders");
	json_decref(m);
	sl_avro_dir_ops.close(ctx);

	/* a restart goes on from the newest manifest ... */
	ctx = open_sink(SL_CODEC_DEFLATE, 64 << 20, 60);
	write_order(ctx, g_orders, 0x16B39000, 1, 4, TS0);
	mark_at(ctx, 0x16B39100);
	flush(ctx);
	sl_avro_dir_ops.close(ctx);
	m = read_json("s1/_manifests/.0000000003.json");
	assert_string_equal(jstr(m, "previous"), "s1/_manifests/.0000000002.json");
	assert_string_equal(jstr(json_object_get(m, "from"), "position"), "0/16B38100");
	json_decref(m);
	/* ... and finds it by listing when the pointer is gone or lags */
	snprintf(want, sizeof want, "%s/s1/_manifests/.latest.json", g_dir);
	assert_int_equal(unlink(want), 0);
	ctx = open_sink(SL_CODEC_DEFLATE, 64 << 20, 60);
	write_order(ctx, g_orders, 0x16B3A000, 1, 5, TS0);
	mark_at(ctx, 0x16B3A100);
	flush(ctx);
	sl_avro_dir_ops.close(ctx);
	assert_int_equal(sl_write_file_atomic(want, "{\"sequence\": 2}\n", 16, err, sizeof err), 0);
	ctx = open_sink(SL_CODEC_DEFLATE, 64 << 20, 60);
	write_order(ctx, g_orders, 0x16B3B000, 1, 6, TS0);
	mark_at(ctx, 0x16B3B100);
	flush(ctx);
	sl_avro_dir_ops.close(ctx);
	m = read_json("s1/_manifests/.0000000005.json");
	assert_string_equal(jstr(m, "previous"), "s1/_manifests/.0000000004.json");
	assert_string_equal(jstr(json_object_get(m, "from"), "position"), "0/16B3A100");
	json_decref(m);

	/* every data file is listed by exactly one manifest */
	l = list_files(g_dir, &n);
	assert_int_equal(n, 6);
	for (size_t i = 0; i < n; i++) {
		int found = 0;
		for (int k = 1; k <= 5; k++) {
			char rel[64];
			size_t j;
			snprintf(rel, sizeof rel, "s1/_manifests/.%010d.json", k);
			m = read_json(rel);
			json_array_foreach(json_object_get(m, "files"), j, f)
				found += !strcmp(jstr(f, "path"), l[i]);
			json_decref(m);
		}
		if (found != 1)
			fail_msg("%s is listed %d times", l[i], found);
	}
	tl_free_list(l, n);
	assert_int_equal(run_verify(&text), 0);
	if (!strstr(text, "stream s1: 5 manifests, 6 files, 7 records in folder"))
		fail_msg("verify said: %s", text);
	free(text);
}

/* Round trip of the manifest codec, and names. */
static void test_manifest_codec(void **state)
{
	struct sl_manifest m, back;
	struct sl_manifest_file f;
	struct sl_buf b;
	char err[256];
	uint64_t seq;

	(void)state;
	memset(&m, 0, sizeof m);
	memset(&f, 0, sizeof f);
	m.sequence = 42;
	m.stream = strdup("s\"1");
	m.previous = strdup("s\"1/_manifests/.0000000041.json");
	m.source = strdup("postgres");
	assert_int_equal(sl_manifest_set_pos(&m.from, "0/10", "0000000000000010"), 0);
	assert_int_equal(sl_manifest_set_pos(&m.to, "0/20", "0000000000000020"), 0);
	f.path = "s\"1/o/2024/01/31/13/45/x.avro";
	f.object = "o";
	snprintf(f.schema_key, sizeof f.schema_key, "0123456789abcdef");
	f.records = 7;
	f.bytes = 1234;
	sl_csn_format(f.first_csn, 0x10, 1);
	sl_csn_format(f.last_csn, 0x20, 3);
	assert_int_equal(sl_manifest_add_file(&m, &f), 0);
	assert_int_equal(sl_manifest_add_removed(&m, "s\"1/o/old.avro"), 0);
	sl_buf_init(&b, 0);
	assert_int_equal(sl_manifest_encode(&m, &b, err, sizeof err), 0);
	assert_int_equal(sl_manifest_decode(&back, b.data, b.len, err, sizeof err), 0);
	assert_int_equal(back.sequence, 42);
	assert_string_equal(back.stream, "s\"1");
	assert_string_equal(back.previous, m.previous);
	assert_string_equal(back.from.pos, "0/10");
	assert_string_equal(back.to.csn, "0000000000000020");
	assert_int_equal(back.nfiles, 1);
	assert_string_equal(back.files[0].path, f.path);
	assert_int_equal(back.files[0].records, 7);
	assert_int_equal(back.files[0].bytes, 1234);
	assert_string_equal(back.files[0].first_csn, f.first_csn);
	assert_string_equal(back.files[0].last_csn, f.last_csn);
	assert_int_equal(back.nremoved, 1);
	assert_string_equal(back.removed[0], "s\"1/o/old.avro");
	sl_manifest_free(&back);
	/* what decode refuses */
	assert_int_equal(sl_manifest_decode(&back, "{", 1, err, sizeof err), -1);
	assert_int_equal(sl_manifest_decode(&back, "{\"format\": 2}", 13, err, sizeof err), -1);
	assert_string_equal(err, "format 2 is not 1");
	{
		/* a member of the wrong kind is named, with where it is */
		static const struct { const char *from, *to, *why; } bad[] = {
			{ "\"files\": [", "\"files\": [7, ", "files[0] is not an object" },
			{ "\"records\": 7", "\"records\": -7", "\"records\" is not a whole number in files[0]" },
			{ "\"from\": {", "\"from\": 5, \"x\": {", "\"from\" is not an object" },
		};
		for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
			const char *at = strstr(b.data, bad[k].from);
			struct sl_buf t;
			assert_non_null(at);
			sl_buf_init(&t, 0);
			sl_buf_append(&t, b.data, (size_t)(at - b.data));
			sl_buf_puts(&t, bad[k].to);
			sl_buf_puts(&t, at + strlen(bad[k].from));
			snprintf(err, sizeof err, "stale");
			assert_int_equal(sl_manifest_decode(&back, t.data, t.len, err, sizeof err), -1);
			assert_string_equal(err, bad[k].why);
			sl_buf_free(&t);
		}
	}
	sl_buf_free(&b);
	sl_manifest_free(&m);
	assert_true(sl_manifest_name(".0000000042.json", &seq));
	assert_int_equal(seq, 42);
	assert_false(sl_manifest_name(".latest.json", &seq));
	assert_false(sl_manifest_name("0000000042.json", &seq));
	assert_false(sl_manifest_name(".0000000000.json", &seq));
}

/* Four flushes of orders and customers; returns nothing, leaves the tree. */
static void write_good_tree(void)
{
	void *ctx = open_sink(g_codec, 64 << 20, 60);

	for (int k = 0; k < 4; k++) {
		for (int i = 0; i < 10; i++)
			write_order(ctx, g_orders, 0x1000 + (uint64_t)k * 0x100, (uint32_t)i + 1, k * 10 + i, TS0);
		write_customer(ctx, 0x1000 + (uint64_t)k * 0x100, 11, k, "c", TS0);
		mark_at(ctx, 0x1000 + (uint64_t)k * 0x100 + 0x80);
		flush(ctx);
	}
	sl_avro_dir_ops.close(ctx);
}

/* The n-th data file (sorted) of the tree, as a full path. */
static void nth_file(size_t i, char *path, size_t len)
{
	size_t n;
	char **l = list_files(g_dir, &n);

	assert_true(i < n);
	snprintf(path, len, "%s/%s", g_dir, l[i]);
	tl_free_list(l, n);
}

static void expect_verify(const char *want)
{
	char *text;

	assert_int_equal(run_verify(&text), SL_EVERIFY);
	if (!strstr(text, want))
		fail_msg("expected \"%s\" in:\n%s", want, text);
	if (!strstr(text, "PROBLEMS FOUND"))
		fail_msg("no summary in:\n%s", text);
	free(text);
}

static void test_verify_deleted_file(void **state)
{
	char path[1024];

	(void)state;
	write_good_tree();
	nth_file(3, path, sizeof path);
	assert_int_equal(unlink(path), 0);
	expect_verify(" is missing (listed by manifest ");
}

static void test_verify_truncated_file(void **state)
{
	char path[1024];
	struct stat sb;

	(void)state;
	write_good_tree();
	nth_file(2, path, sizeof path);
	assert_int_equal(stat(path, &sb), 0);
	assert_int_equal(truncate(path, sb.st_size - 20), 0);
	expect_verify(" bytes, its manifest says ");
}

/* The same size, damaged content: the reader cannot read it to its end. */
/* Overwrites 10 bytes of the third data file, 30 bytes before its end. */
static void damage_third_file(void)
{
	char path[1024];
	struct stat sb;
	FILE *f;

	nth_file(2, path, sizeof path);
	assert_int_equal(stat(path, &sb), 0);
	f = fopen(path, "r+");
	assert_non_null(f);
	fseek(f, sb.st_size - 30, SEEK_SET);
	fputs("\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff", f);
	fclose(f);
}

static void test_verify_damaged_file(void **state)
{
	(void)state;
	write_good_tree();
	damage_third_file();
	expect_verify(" cannot be read to its end");
}

/* A good zstandard tree verifies; a damaged zstandard frame is found. */
static void test_verify_zstandard(void **state)
{
	char *text;

	(void)state;
	g_codec = SL_CODEC_ZSTANDARD;
	write_good_tree();
	assert_int_equal(run_verify(&text), 0);
	if (!strstr(text, "stream s1: 4 manifests, 8 files, 44 records in folder"))
		fail_msg("verify said: %s", text);
	free(text);
	damage_third_file();
	expect_verify(" cannot be read to its end (truncated or damaged after record 0): \"");
	expect_verify(": block 1: bad zstandard data: ");
}

static void test_verify_deleted_manifest(void **state)
{
	char path[1024];

	(void)state;
	write_good_tree();
	snprintf(path, sizeof path, "%s/s1/_manifests/.0000000002.json", g_dir);
	assert_int_equal(unlink(path), 0);
	expect_verify("manifest 2 is missing");
	expect_verify("positions from 0/1080 to 0/1180 are in no manifest");
	expect_verify(" is in no manifest");
}

static void test_verify_deleted_last_manifest(void **state)
{
	char path[1024];

	(void)state;
	write_good_tree();
	snprintf(path, sizeof path, "%s/s1/_manifests/.0000000004.json", g_dir);
	assert_int_equal(unlink(path), 0);
	expect_verify("manifest 4, which s1/_manifests/.latest.json names as the newest, is missing");
}

static void test_verify_count_mismatch(void **state)
{
	char path[1024], err[256];
	json_t *m, *f;
	char *text;

	(void)state;
	write_good_tree();
	snprintf(path, sizeof path, "%s/s1/_manifests/.0000000003.json", g_dir);
	m = read_json("s1/_manifests/.0000000003.json");
	f = json_array_get(json_object_get(m, "files"), 0);
	json_object_set_new(f, "records", json_integer(json_integer_value(json_object_get(f, "records")) + 1));
	text = json_dumps(m, 0);
	assert_int_equal(sl_write_file_atomic(path, text, strlen(text), err, sizeof err), 0);
	free(text);
	json_decref(m);
	expect_verify(" records, its manifest says ");
}

/* The same change written again after a restart: present twice. */
static void test_verify_duplicates(void **state)
{
	void *ctx;

	(void)state;
	write_good_tree();
	ctx = open_sink(SL_CODEC_DEFLATE, 64 << 20, 60);
	write_order(ctx, g_orders, 0x1300, 5, 35, TS0);
	mark_at(ctx, 0x1400);
	flush(ctx);
	sl_avro_dir_ops.close(ctx);
	expect_verify(" is also in ");
}

/* discard_backfill lists what it removes in a manifest first; verify then
 * expects those files gone. */
static void test_discard_manifest(void **state)
{
	void *ctx = open_sink(SL_CODEC_DEFLATE, 64 << 20, 60);
	const uint64_t snap = UINT64_C(0x16B374D8);
	char err[512], *text;
	json_t *m;

	(void)state;
	for (int i = 0; i < 5; i++)
		write_bf_order(ctx, snap, i);
	mark_at(ctx, snap);
	flush(ctx);
	assert_int_equal(discard(ctx, g_orders, snap, err, sizeof err), 0);
	m = read_json("s1/_manifests/.0000000002.json");
	assert_int_equal(json_array_size(json_object_get(m, "files")), 0);
	assert_int_equal(json_array_size(json_object_get(m, "removed")), 1);
	/* an empty range: from = to = where the chain was */
	assert_string_equal(jstr(json_object_get(m, "from"), "position"), "0/16B374D8");
	assert_string_equal(jstr(json_object_get(m, "to"), "position"), "0/16B374D8");
	json_decref(m);
	for (int i = 0; i < 5; i++)
		write_bf_order(ctx, snap, i);
	mark_at(ctx, snap + 1);
	flush(ctx);
	sl_avro_dir_ops.close(ctx);
	if (run_verify(&text) != 0)
		fail_msg("verify: %s", text);
	free(text);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_registry, per_test_setup, per_test_teardown),
		cmocka_unit_test_setup_teardown(test_merge_batch_fold, per_test_setup, per_test_teardown),
		cmocka_unit_test_setup_teardown(test_merge_batch_skip, per_test_setup, per_test_teardown),
		cmocka_unit_test_setup_teardown(test_iceberg_replayed_key_change_after_a_cut, per_test_setup, per_test_teardown),
		cmocka_unit_test_setup_teardown(test_merge_batch_null_key, per_test_setup, per_test_teardown),
		cmocka_unit_test_setup_teardown(test_mirror_find_below, per_test_setup, per_test_teardown),
		cmocka_unit_test_setup_teardown(test_merge_null_key_dead_letter, per_test_setup, per_test_teardown),
		cmocka_unit_test_setup_teardown(test_merge_compact, per_test_setup, per_test_teardown),
		cmocka_unit_test_setup_teardown(test_merge_compact_zstandard, per_test_setup, per_test_teardown),
		cmocka_unit_test_setup_teardown(test_layout, per_test_setup, per_test_teardown),
		cmocka_unit_test_setup_teardown(test_rotation, per_test_setup, per_test_teardown),
		cmocka_unit_test_setup_teardown(test_threads_rotation, per_test_setup, per_test_teardown),
		cmocka_unit_test_setup_teardown(test_threads_failed_write_not_durable, per_test_setup,
						per_test_teardown),
		cmocka_unit_test_setup_teardown(test_schema_change, per_test_setup, per_test_teardown),
		cmocka_unit_test_setup_teardown(test_close_without_flush, per_test_setup, per_test_teardown),
		cmocka_unit_test_setup_teardown(test_flush_reports_mark, per_test_setup, per_test_teardown),
		cmocka_unit_test_setup_teardown(test_discard_backfill, per_test_setup, per_test_teardown),
		cmocka_unit_test_setup_teardown(test_bounded_memory, per_test_setup, per_test_teardown),
		cmocka_unit_test_setup_teardown(test_leftovers_after_kill, per_test_setup, per_test_teardown),
		cmocka_unit_test_setup_teardown(test_leftovers_only_ours, per_test_setup, per_test_teardown),
		cmocka_unit_test_setup_teardown(test_bad_value, per_test_setup, per_test_teardown),
		cmocka_unit_test_setup_teardown(test_manifests, per_test_setup, per_test_teardown),
		cmocka_unit_test(test_manifest_codec),
		cmocka_unit_test_setup_teardown(test_verify_deleted_file, per_test_setup, per_test_teardown),
		cmocka_unit_test_setup_teardown(test_verify_truncated_file, per_test_setup, per_test_teardown),
		cmocka_unit_test_setup_teardown(test_verify_damaged_file, per_test_setup, per_test_teardown),
		cmocka_unit_test_setup_teardown(test_verify_zstandard, per_test_setup, per_test_teardown),
		cmocka_unit_test_setup_teardown(test_verify_deleted_manifest, per_test_setup, per_test_teardown),
		cmocka_unit_test_setup_teardown(test_verify_deleted_last_manifest, per_test_setup, per_test_teardown),
		cmocka_unit_test_setup_teardown(test_verify_count_mismatch, per_test_setup, per_test_teardown),
		cmocka_unit_test_setup_teardown(test_verify_duplicates, per_test_setup, per_test_teardown),
		cmocka_unit_test_setup_teardown(test_discard_manifest, per_test_setup, per_test_teardown),
		cmocka_unit_test_setup_teardown(test_outage_logged, per_test_setup, per_test_teardown),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
