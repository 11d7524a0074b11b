/*
 * tests/unit/test_ch_sink.c: the clickhouse sink against a local HTTP server
 * that plays a small ClickHouse (fake_http.c and the handler below) and
 * records every request.
 *
 * The exact requests of a batch (method, path and query string, headers
 * other than dates, body) are compared with recorded expectations in
 * tests/unit/golden/ch_*.http: the first write of a table (database and
 * table made, columns read), the inserts of an append-mode batch, and a
 * merge-mode batch with a key change, unchanged TOAST values filled from the
 * batch and from ClickHouse (the lookup, keys sent as an external table),
 * a TRUNCATE, and the DDL for a cluster (ON CLUSTER, Replicated engines).
 * A difference (or SLUICE_UPDATE_GOLDEN=1) writes what the sink sent beside
 * each file as .actual and fails: after a deliberate change, review the diff
 * and copy it over.
 *
 * Then, checked one by one: retries with backoff on 503, a refusal that no
 * retry helps, retries running out, a refused row isolated by halving and
 * written to the dead-letter file, gzip bodies, a column added and a column
 * dropped at the source, flush_due and a batch sent inside a transaction,
 * the interrupted-backfill DELETE, and `sluice check`.
 */
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cmocka.h>

#include "common/buf.h"
#include "common/util.h"
#include "sinks/clickhouse/ch_layout.h"
#include "sinks/clickhouse/ch_rowbin.h"
#include "sinks/clickhouse/ch_sql.h"
#include "sinks/clickhouse/clickhouse.h"
#include "tests/unit/avro_testlib.h"
#include "tests/unit/fake_http.h"

#define PASSWORD "pw-canary-3e81"

/* ------------------------------------------------------------------ */
/* a small ClickHouse                                                   */

struct fake_ch {
	struct fake_http *srv;
	bool db_exists, table_exists, view_exists, altered;
	uint64_t cluster_hosts;        /* the servers of any cluster asked for */
	uint64_t cluster_shards;       /* its shards */
	uint64_t cluster_local;        /* how many of its servers are this one */
	bool dist;                     /* the table is public_items_local, public_items a Distributed table */
	int dist_cols;                 /* the Distributed table's columns: 0 none, 1 describe, 2 describe_altered */
	struct sl_buf describe;        /* the table's columns, RowBinary */
	struct sl_buf describe_altered;
	bool dropped;                  /* a DROP COLUMN came: describe_dropped from then on */
	bool later_write;              /* a row of a later change wrote the column a version lacks */
	struct sl_buf describe_dropped;
	int fail_503;                  /* the next inserts answer 503 */
	bool fatal;                    /* inserts answer 404, Code: 60 */
	const char *refuse;            /* inserts whose body holds this answer Code: 27 */
	bool readonly;
	struct sl_buf lookup;          /* the answer to a lookup */
	struct sl_buf inserted;        /* bodies of the inserts answered 200 */
	int inserts;                   /* insert requests, answered anyhow */
	struct sl_buf last_insert_query;
	uint64_t floor;                /* the version of the table's last TRUNCATE */
	bool vmap_created;             /* the version map's table was made */
	struct sl_buf vmap;            /* the version map's steps (pos, shift: RowBinary) */
	struct sl_buf vsteps;          /* statements that added steps, one a line */
	struct sl_buf made;            /* the record of column types (describe's form), or empty: none */
	const char *table_engine;      /* NULL: ReplacingMergeTree */
	const char *version;           /* what SELECT version() answers; NULL: 18.16.1 */
	const char *view_engine;       /* NULL: View */
	bool by_key;                   /* lookups answer row_of[key] for each key asked */
	struct sl_buf row_of[16];
	int lookups;
};

static void put_u64(struct sl_buf *b, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		sl_buf_putc(b, (char)(v >> (8 * i)));
}

static void put_str(struct sl_buf *b, const char *s)
{
	ch_rb_put_str(b, s, strlen(s));
}

static bool starts(const char *s, const char *prefix)
{
	return strncmp(s, prefix, strlen(prefix)) == 0;
}

/* A table's columns (describe's RowBinary) as a Distributed table over it
 * lists them: the same, none in a sorting key. */
static void describe_dist(struct sl_buf *out, const struct sl_buf *local)
{
	struct ch_rb_reader r = { (const unsigned char *)local->data, (const unsigned char *)local->data + local->len };
	const unsigned char *name, *type;
	size_t nn, nt;
	unsigned key;

	while (r.p < r.end && ch_rb_get_str(&r, &name, &nn) == 0 && ch_rb_get_str(&r, &type, &nt) == 0 &&
	       ch_rb_get_u8(&r, &key) == 0) {
		ch_rb_put_str(out, (const char *)name, nn);
		ch_rb_put_str(out, (const char *)type, nt);
		sl_buf_putc(out, 0);
	}
}

static void handle(void *arg, const struct fake_http_req *rq, struct fake_http_resp *rs)
{
	struct fake_ch *ch = arg;
	char *q = fake_http_param(rq->target, "query");
	char *sql;

	if (q) {
		if (starts(q, "INSERT INTO")) {
			ch->inserts++;
			sl_buf_reset(&ch->last_insert_query);
			sl_buf_puts(&ch->last_insert_query, q);
			if (ch->fail_503 > 0) {
				ch->fail_503--;
				rs->status = 503;
				sl_buf_puts(&rs->body, "Service Unavailable\n");
			} else if (ch->fatal) {
				rs->status = 404;
				sl_buf_puts(&rs->body, "Code: 60, e.displayText() = DB::Exception: Table db.public_items "
					    "doesn't exist., e.what() = DB::Exception\n");
			} else if (ch->refuse && memmem(rq->body, rq->len, ch->refuse, strlen(ch->refuse))) {
				rs->status = 500;
				sl_buf_puts(&rs->body, "Code: 27, e.displayText() = DB::Exception: Cannot parse input: "
					    "(at row 1), e.what() = DB::Exception\n");
			} else {
				sl_buf_append(&ch->inserted, rq->body, rq->len);
			}
		} else if (strstr(q, "FROM " CH_KEYS_TABLE)) {
			ch->lookups++;
			if (ch->by_key) {
				/* the rows of the keys asked for (Int64 keys in the part's data) */
				const char *mark = "filename=\"" CH_KEYS_TABLE "\"\r\n\r\n";
				const unsigned char *d = memmem(rq->body, rq->len, mark, strlen(mark));
				const unsigned char *e;
				d += strlen(mark);
				e = memmem(d, rq->len - (size_t)(d - rq->body), "\r\n--", 4);
				for (; d + 8 <= e; d += 8) {
					uint64_t id = 0;
					for (int i = 7; i >= 0; i--)
						id = id << 8 | d[i];
					if (id < 16)
						sl_buf_append(&rs->body, ch->row_of[id].data, ch->row_of[id].len);
				}
			} else {
				sl_buf_append(&rs->body, ch->lookup.data, ch->lookup.len);
			}
		} else {
			rs->status = 400;
		}
		free(q);
		return;
	}
	sql = strndup((const char *)rq->body, rq->len);
	if (starts(sql, "SELECT count() FROM system.databases")) {
		put_u64(&rs->body, ch->db_exists);
	} else if (starts(sql, "SELECT count(), uniqExact(shard_num), toUInt64(sum(is_local)) FROM system.clusters "
			       "WHERE cluster = 'two shards' ")) {
		put_u64(&rs->body, ch->cluster_hosts);
		put_u64(&rs->body, ch->cluster_shards);
		put_u64(&rs->body, ch->cluster_local);
	} else if (starts(sql, "CREATE DATABASE")) {
		ch->db_exists = true;
	} else if (starts(sql, "SELECT name, engine FROM system.tables")) {
		if (ch->table_exists) {
			put_str(&rs->body, ch->dist ? "public_items_local" : "public_items");
			put_str(&rs->body, ch->table_engine ? ch->table_engine : "ReplacingMergeTree");
		}
		if (ch->table_exists && ch->dist) {
			put_str(&rs->body, "public_items");
			put_str(&rs->body, "Distributed");
		}
		if (ch->view_exists) {
			put_str(&rs->body, "public_items_current");
			put_str(&rs->body, ch->view_engine ? ch->view_engine : "View");
		}
	} else if (starts(sql, "CREATE TABLE IF NOT EXISTS `db`.`" CH_COLUMNS_TABLE "`")) {
		/* the record of column types */
	} else if (starts(sql, "SELECT `name`, `type`, toUInt8(0) FROM `db`.`" CH_COLUMNS_TABLE "`")) {
		if (ch->made.len)
			sl_buf_append(&rs->body, ch->made.data, ch->made.len);
		else {
			rs->status = 404;
			sl_buf_puts(&rs->body, "Code: 60, e.displayText() = DB::Exception: Table db._sluice_columns "
				    "doesn't exist., e.what() = DB::Exception\n");
		}
	} else if (starts(sql, "CREATE TABLE IF NOT EXISTS `db`.`" CH_VMAP_TABLE "`")) {
		ch->vmap_created = true;
	} else if (starts(sql, "SELECT `pos`, `shift` FROM `db`.`" CH_VMAP_TABLE "`")) {
		sl_buf_append(&rs->body, ch->vmap.data, ch->vmap.len);
	} else if (starts(sql, "INSERT INTO `db`.`" CH_VMAP_TABLE "`")) {
		sl_buf_append(&ch->vsteps, sql, strlen(sql));
		sl_buf_putc(&ch->vsteps, '\n');
	} else if (starts(sql, "CREATE TABLE") && strstr(sql, " ENGINE = Distributed(")) {
		ch->dist_cols = ch->altered ? 2 : 1;
	} else if (starts(sql, "DROP TABLE IF EXISTS `db`.`public_items` ")) {
		ch->dist_cols = 0;
	} else if (starts(sql, "SELECT name, type, toUInt8(is_in_sorting_key)") && ch->dist &&
		   strstr(sql, " AND table = 'public_items' ")) {
		/* the Distributed table: no sorting key */
		if (ch->dist_cols)
			describe_dist(&rs->body, ch->dist_cols == 2 ? &ch->describe_altered : &ch->describe);
	} else if (starts(sql, "CREATE TABLE")) {
		ch->table_exists = true;
	} else if (starts(sql, "CREATE VIEW")) {
		ch->view_exists = true;
	} else if (starts(sql, "DROP TABLE")) {
		ch->view_exists = false;
	} else if (starts(sql, "SELECT name, type, toUInt8(is_in_sorting_key)")) {
		const struct sl_buf *d = ch->dropped ? &ch->describe_dropped :
					 ch->altered ? &ch->describe_altered : &ch->describe;
		if (ch->table_exists)
			sl_buf_append(&rs->body, d->data, d->len);
	} else if (starts(sql, "ALTER TABLE") && strstr(sql, " ADD COLUMN ")) {
		ch->altered = true;
	} else if (starts(sql, "ALTER TABLE") && strstr(sql, " DROP COLUMN ")) {
		ch->dropped = true;
	} else if (starts(sql, "ALTER TABLE") && strstr(sql, " DELETE WHERE ")) {
		/* a mutation */
	} else if (starts(sql, "SELECT count() FROM system.mutations")) {
		put_u64(&rs->body, 0);
	} else if (starts(sql, "SELECT toUInt8(1) FROM `db`.`public_items` WHERE `_csn` > '")) {
		if (ch->later_write)
			sl_buf_putc(&rs->body, 1);
	} else if (starts(sql, "SELECT max(`_version`) FROM")) {
		put_u64(&rs->body, ch->floor);
	} else if (starts(sql, "INSERT INTO")) {
		/* tombstones, and the TRUNCATE's sentinel */
	} else if (starts(sql, "SELECT version()")) {
		sl_buf_puts(&rs->body, ch->version ? ch->version : "18.16.1");
		sl_buf_putc(&rs->body, '\n');
	} else if (starts(sql, "SELECT name, value FROM system.settings")) {
		put_str(&rs->body, "readonly");
		put_str(&rs->body, ch->readonly ? "1" : "0");
		put_str(&rs->body, "allow_ddl");
		put_str(&rs->body, "1");
	} else {
		rs->status = 400;
		sl_buf_puts(&rs->body, "Code: 62, e.displayText() = DB::Exception: Syntax error\n");
	}
	free(sql);
}

/* The columns ClickHouse lists for a table made from layout l, plus extra
 * (name, type) pairs at the end. */
static void describe_layout(struct sl_buf *out, const struct ch_layout *l, const char *const *extra)
{
	struct sl_buf ty;

	sl_buf_init(&ty, 0);
	for (int i = 0; i < l->ncols; i++) {
		sl_buf_reset(&ty);
		ch_type_sql(&ty, &l->cols[i].type);
		put_str(out, l->cols[i].name);
		put_str(out, ty.data);
		sl_buf_putc(out, l->cols[i].key ? 1 : 0);
	}
	for (; extra && extra[0]; extra += 2) {
		put_str(out, extra[0]);
		put_str(out, extra[1]);
		sl_buf_putc(out, 0);
	}
	sl_buf_free(&ty);
}

/* ------------------------------------------------------------------ */
/* fixture                                                              */

struct fx {
	struct fake_ch ch;
	struct sl_ch_conf conf;
	struct sl_table *t;          /* public.items: id bigint key, name text, note text, amount numeric(10,2) */
	void *sink;
	char *dir;
	char dl_path[512];
	const char *conf_path;       /* the configuration file the sink is told of, or NULL */
	char err[1024];
};

static const struct tl_col item_cols[] = {
	{ "id", T_INT8, -1, "bigint", true },
	{ "name", T_TEXT, -1, "text", false },
	{ "note", T_TEXT, -1, "text", false },
	{ "amount", T_NUMERIC, 0, "numeric(10,2)", false },
};

static struct sl_table *items_table(int ncols)
{
	struct tl_col cols[8];
	static const struct tl_col added = { "extra", T_INT4, -1, "integer", false };

	memcpy(cols, item_cols, sizeof item_cols);
	cols[3].typmod = numeric_typmod(10, 2);
	cols[4] = added;
	return tl_table("public", "items", cols, ncols);
}

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof *f);

	sl_buf_init(&f->ch.describe, 0);
	sl_buf_init(&f->ch.describe_altered, 0);
	sl_buf_init(&f->ch.describe_dropped, 0);
	sl_buf_init(&f->ch.lookup, 0);
	sl_buf_init(&f->ch.inserted, 0);
	sl_buf_init(&f->ch.last_insert_query, 0);
	sl_buf_init(&f->ch.vmap, 0);
	sl_buf_init(&f->ch.vsteps, 0);
	sl_buf_init(&f->ch.made, 0);
	f->ch.srv = fake_http_start(handle, &f->ch);
	f->dir = tl_mkdtemp("chsink");
	snprintf(f->dl_path, sizeof f->dl_path, "%s/dead.jsonl", f->dir);
	f->conf.url = (char *)fake_http_url(f->ch.srv);
	f->conf.database = (char *)"db";
	f->conf.user = (char *)"sluice";
	f->conf.password = (char *)PASSWORD;
	f->conf.batch_rows = 1000;
	f->conf.batch_bytes = 1 << 20;
	f->conf.batch_ms = 60000;
	f->conf.timeout = 5;
	f->conf.connect_timeout = 2;
	f->conf.retry_seconds = 5;
	f->conf.tls_verify = 1;
	f->conf.compression = SL_CH_GZIP_NONE;
	f->conf.dead_letter_path = f->dl_path;
	f->t = items_table(4);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;

	if (f->sink)
		sl_clickhouse_ops.close(f->sink);
	fake_http_stop(f->ch.srv);
	sl_buf_free(&f->ch.describe);
	sl_buf_free(&f->ch.describe_altered);
	sl_buf_free(&f->ch.describe_dropped);
	sl_buf_free(&f->ch.lookup);
	sl_buf_free(&f->ch.inserted);
	sl_buf_free(&f->ch.last_insert_query);
	sl_buf_free(&f->ch.vmap);
	sl_buf_free(&f->ch.vsteps);
	sl_buf_free(&f->ch.made);
	sl_table_free(f->t);
	tl_rm_rf(f->dir);
	free(f->dir);
	free(f);
	return 0;
}

/* Opens the sink in mode merge and lets the fake server describe the table
 * it will make, in layout fl. */
static void open_sink_as(struct fx *f, bool merge, enum ch_flavor fl)
{
	struct sl_sink_stream st = { .name = "s1", .mode = merge ? SL_WRITE_MERGE : SL_WRITE_APPEND,
				     .destination = "wh", .config_path = f->conf_path };
	struct ch_layout *l;

	assert_int_equal(ch_layout_new(&l, f->t, merge, fl, f->err, sizeof f->err), 0);
	sl_buf_reset(&f->ch.describe);
	describe_layout(&f->ch.describe, l, NULL);
	ch_layout_free(l);
	if (sl_clickhouse_ops.open(&f->sink, &f->conf, &st, f->err, sizeof f->err) != 0)
		fail_msg("open: %s", f->err);
}

static void open_sink(struct fx *f, bool merge)
{
	open_sink_as(f, merge, CH_LEGACY);
}

static void write_ok(struct fx *f, const struct sl_change *c)
{
	if (sl_clickhouse_ops.write(f->sink, c, f->err, sizeof f->err) != 0)
		fail_msg("write: %s", f->err);
}

static void flush_ok(struct fx *f, uint64_t want_mark)
{
	struct sl_position d;

	memset(&d, 0, sizeof d);
	if (sl_clickhouse_ops.flush(f->sink, &d, f->err, sizeof f->err) != 1)
		fail_msg("flush: %s", f->err);
	assert_int_equal(d.w[0], want_mark);
}

static void mark(struct fx *f, uint64_t lsn)
{
	struct sl_position p;

	memset(&p, 0, sizeof p);
	p.w[0] = lsn;
	sl_clickhouse_ops.mark(f->sink, &p);
}

static void golden(struct fx *f, const char *name)
{
	if (fake_http_golden(name, fake_http_transcript(f->ch.srv)) != 0)
		fail_msg("the requests differ from tests/unit/golden/%s", name);
	assert_null(strstr(fake_http_transcript(f->ch.srv), PASSWORD));
}

/* ------------------------------------------------------------------ */
/* exact requests                                                       */

static void test_append_batch(void **state)
{
	struct fx *f = *state;
	struct sl_value v1[4] = { tl_int(1), tl_str("apple"), tl_str("first"), tl_dec(false, "1250", 2) };
	struct sl_value v2[4] = { tl_int(1), tl_str("apple"), tl_unchanged(), tl_dec(true, "5", 1) };
	struct sl_value v3[4] = { tl_int(2), tl_null(), tl_null(), tl_null() };
	struct sl_change c;

	open_sink(f, false);
	assert_false(sl_clickhouse_ops.pending(f->sink));
	tl_change(&c, f->t, SL_OP_INSERT, v1, 0x16B374D848, 1, 1700000000000000);
	write_ok(f, &c);
	tl_change(&c, f->t, SL_OP_UPDATE_INSERT, v2, 0x16B374D848, 2, 1700000000000000);
	write_ok(f, &c);
	tl_change(&c, f->t, SL_OP_DELETE, v3, 0x16B374D900, 1, 1700000000500000);
	write_ok(f, &c);
	tl_change(&c, f->t, SL_OP_TRUNCATE, NULL, 0x16B374DA00, 1, 1700000001000000);
	write_ok(f, &c);
	assert_true(sl_clickhouse_ops.pending(f->sink));
	mark(f, 0x16B374DA10);
	flush_ok(f, 0x16B374DA10);
	assert_false(sl_clickhouse_ops.pending(f->sink));
	golden(f, "ch_append.http");

	/* nothing pending: the mark is durable at once, nothing is sent */
	fake_http_clear(f->ch.srv);
	mark(f, 0x16B374DB00);
	flush_ok(f, 0x16B374DB00);
	assert_int_equal(fake_http_count(f->ch.srv), 0);
}

/* Merge mode: one row per key and batch; unchanged values from the batch,
 * from the old key after a key change, and from ClickHouse. */
static void test_merge_batch(void **state)
{
	struct fx *f = *state;
	struct sl_change c;
	struct ch_layout *l;
	struct sl_ch_stats st;

	/* ClickHouse holds key 10 with note "from ClickHouse" */
	{
		struct sl_value row[4] = { tl_int(10), tl_str("ten"), tl_str("from ClickHouse"), tl_dec(false, "100", 2) };
		struct ch_rowmeta m;
		char metabuf[SL_META_BUF];
		assert_int_equal(ch_layout_new(&l, f->t, true, CH_LEGACY, f->err, sizeof f->err), 0);
		tl_change(&c, f->t, SL_OP_INSERT, row, 0x1000, 1, 1600000000000000);
		assert_int_equal(ch_rowmeta_of_change(&m, &c, NULL, metabuf, f->err, sizeof f->err), 0);
		assert_int_equal(ch_layout_put_row(&f->ch.lookup, l, &m, row, false, f->err, sizeof f->err), 0);
		ch_layout_free(l);
	}
	open_sink(f, true);
	struct sl_value a1[4] = { tl_int(3), tl_str("three"), tl_str("big toast"), tl_dec(false, "300", 2) };
	struct sl_value a2[4] = { tl_int(3), tl_str("three!"), tl_unchanged(), tl_dec(false, "301", 2) };
	struct sl_value a3[4] = { tl_int(3), tl_str("three!!"), tl_unchanged(), tl_dec(false, "302", 2) };
	struct sl_value k1[4] = { tl_int(10), tl_null(), tl_null(), tl_null() };                 /* UPDATE-DELETE 10 */
	struct sl_value k2[4] = { tl_int(11), tl_str("eleven"), tl_unchanged(), tl_dec(false, "1100", 2) };
	struct sl_value d1[4] = { tl_int(5), tl_null(), tl_null(), tl_null() };
	tl_change(&c, f->t, SL_OP_INSERT, a1, 0x2000, 1, 1700000000000000);
	write_ok(f, &c);
	tl_change(&c, f->t, SL_OP_UPDATE_INSERT, a2, 0x2000, 2, 1700000000000000);
	write_ok(f, &c);
	tl_change(&c, f->t, SL_OP_UPDATE_DELETE, k1, 0x2100, 1, 1700000000100000);
	write_ok(f, &c);
	tl_change(&c, f->t, SL_OP_UPDATE_INSERT, k2, 0x2100, 2, 1700000000100000);
	write_ok(f, &c);
	tl_change(&c, f->t, SL_OP_DELETE, d1, 0x2200, 1, 1700000000200000);
	write_ok(f, &c);
	tl_change(&c, f->t, SL_OP_UPDATE_INSERT, a3, 0x2300, 1, 1700000000300000);
	write_ok(f, &c);
	mark(f, 0x2310);
	flush_ok(f, 0x2310);
	sl_clickhouse_get_stats(f->sink, &st);
	assert_int_equal(st.lookups, 1);
	assert_int_equal(st.unchanged_filled, 3);   /* a2 and a3 from the batch, k2 from ClickHouse */
	assert_int_equal(st.unchanged_missing, 0);
	assert_int_equal(st.rows_inserted, 4);      /* keys 3, 10 (deleted), 11, 5 (deleted) */
	assert_non_null(memmem(f->ch.inserted.data, f->ch.inserted.len, "from ClickHouse", 15));
	assert_non_null(memmem(f->ch.inserted.data, f->ch.inserted.len, "big toast", 9));

	/* a TRUNCATE clears the table first; rows after it follow */
	fake_http_clear(f->ch.srv);
	struct sl_value n1[4] = { tl_int(3), tl_str("again"), tl_null(), tl_null() };
	tl_change(&c, f->t, SL_OP_INSERT, a1, 0x3000, 1, 1700000001000000);
	write_ok(f, &c);
	tl_change(&c, f->t, SL_OP_TRUNCATE, NULL, 0x3000, 2, 1700000001000000);
	write_ok(f, &c);
	tl_change(&c, f->t, SL_OP_INSERT, n1, 0x3000, 3, 1700000001000000);
	write_ok(f, &c);
	mark(f, 0x3010);
	flush_ok(f, 0x3010);
	sl_clickhouse_get_stats(f->sink, &st);
	assert_int_equal(st.rows_inserted, 5);
	golden(f, "ch_merge_truncate.http");  /* the second batch */

	/* a replay of a change older than the TRUNCATE does not bring it back */
	fake_http_clear(f->ch.srv);
	tl_change(&c, f->t, SL_OP_INSERT, a1, 0x2F00, 1, 1700000000900000);
	write_ok(f, &c);
	assert_false(sl_clickhouse_ops.pending(f->sink));
	mark(f, 0x3020);
	flush_ok(f, 0x3020);
	assert_int_equal(fake_http_count(f->ch.srv), 0);
	sl_clickhouse_get_stats(f->sink, &st);
	assert_int_equal(st.below_truncate, 1);
}

/* After a restart the floor comes from ClickHouse (the TRUNCATE's sentinel):
 * a replayed change older than it is skipped, a newer one is written. */
static void test_merge_floor_after_restart(void **state)
{
	struct fx *f = *state;
	struct sl_change c;
	struct sl_ch_stats st;
	struct sl_value v[4] = { tl_int(3), tl_str("x"), tl_null(), tl_null() };

	f->ch.db_exists = f->ch.table_exists = f->ch.view_exists = true;
	f->ch.floor = (UINT64_C(0x3000) << 8) | 2;
	open_sink(f, true);
	tl_change(&c, f->t, SL_OP_UPDATE_INSERT, v, 0x2FFF, 9, 1);
	write_ok(f, &c);
	assert_false(sl_clickhouse_ops.pending(f->sink));
	tl_change(&c, f->t, SL_OP_UPDATE_INSERT, v, 0x3000, 3, 1);
	write_ok(f, &c);
	assert_true(sl_clickhouse_ops.pending(f->sink));
	sl_clickhouse_get_stats(f->sink, &st);
	assert_int_equal(st.below_truncate, 1);
	assert_non_null(strstr(fake_http_transcript(f->ch.srv),
			       "SELECT max(`_version`) FROM `db`.`public_items` WHERE (`id`) = "
			       "(defaultValueOfArgumentType(`id`)) AND `_change_type` = 'TRUNCATE' FORMAT RowBinary"));
}

/* A replay after a re-backfill whose snapshot followed a column added at
 * the source: ClickHouse's table, made anew, has the column, and the
 * replayed changes of the older table version (a TRUNCATE too), all older
 * than the re-backfill's marker, are skipped instead of stopping the stream as a
 * dropped column would: in the run that wrote the marker (its floor is
 * known), and in a later run (the floor is read when the version does not
 * fit). */
static void test_old_version_below_truncate(void **state)
{
	struct fx *f = *state;
	struct sl_table *t2 = items_table(5);
	const char *extra[] = { "extra", "Nullable(Int32)", NULL };
	struct sl_value old[4] = { tl_int(3), tl_str("old"), tl_null(), tl_null() };
	struct sl_value now[5] = { tl_int(4), tl_str("now"), tl_null(), tl_null(), tl_int(7) };
	struct sl_change c;
	struct sl_ch_stats st;
	struct ch_layout *l;

	open_sink(f, true);
	assert_int_equal(ch_layout_new(&l, f->t, true, CH_LEGACY, f->err, sizeof f->err), 0);
	describe_layout(&f->ch.describe_altered, l, extra);
	ch_layout_free(l);
	f->ch.altered = true;   /* the table made from t2 has "extra" */
	tl_change(&c, t2, SL_OP_TRUNCATE, NULL, 0x500, 1, 1);
	write_ok(f, &c);
	tl_change(&c, t2, SL_OP_INSERT, now, 0x500, 2, 1);
	write_ok(f, &c);
	tl_change(&c, f->t, SL_OP_UPDATE_INSERT, old, 0x300, 1, 1);
	write_ok(f, &c);
	tl_change(&c, f->t, SL_OP_TRUNCATE, NULL, 0x300, 2, 1);
	write_ok(f, &c);
	mark(f, 0x510);
	flush_ok(f, 0x510);
	sl_clickhouse_get_stats(f->sink, &st);
	assert_int_equal(st.below_truncate, 2);
	assert_null(memmem(f->ch.inserted.data, f->ch.inserted.len, "old", 3));
	assert_non_null(memmem(f->ch.inserted.data, f->ch.inserted.len, "now", 3));

	/* a later run starts with the older version's changes */
	sl_clickhouse_ops.close(f->sink);
	f->sink = NULL;
	sl_buf_reset(&f->ch.inserted);
	fake_http_clear(f->ch.srv);
	assert_int_equal(ch_version(0x500, 1, 0, &f->ch.floor), 0);
	open_sink(f, true);
	tl_change(&c, f->t, SL_OP_TRUNCATE, NULL, 0x300, 1, 1);
	write_ok(f, &c);
	tl_change(&c, f->t, SL_OP_UPDATE_INSERT, old, 0x300, 2, 1);
	write_ok(f, &c);
	tl_change(&c, t2, SL_OP_UPDATE_INSERT, now, 0x600, 1, 1);
	write_ok(f, &c);
	mark(f, 0x610);
	flush_ok(f, 0x610);
	sl_clickhouse_get_stats(f->sink, &st);
	assert_int_equal(st.below_truncate, 2);
	assert_null(strstr(fake_http_transcript(f->ch.srv), "FINAL WHERE `_version` < "));   /* no tombstones */
	assert_null(memmem(f->ch.inserted.data, f->ch.inserted.len, "old", 3));
	assert_non_null(memmem(f->ch.inserted.data, f->ch.inserted.len, "now", 3));
	sl_table_free(t2);
}

/* A transaction of more than 255 changes, sent in parts, with a TRUNCATE
 * at its end: the TRUNCATE's version is above every change before it (the
 * tombstones reach the rows of the earlier parts), the step of the version
 * map reaches ClickHouse before the next position's rows, and a restarted
 * sink that reads the map back gives the next position the same versions. */
static void test_merge_long_transaction(void **state)
{
	struct fx *f = *state;
	struct sl_change c;
	char want[256];
	const char *tr, *step, *next;

	f->conf.batch_rows = 100;       /* parts of 200 rows */
	open_sink(f, true);
	for (int i = 1; i <= 300; i++) {
		struct sl_value v[4] = { tl_int(i), tl_str("x"), tl_null(), tl_null() };
		tl_change(&c, f->t, SL_OP_INSERT, v, 0x7000, (uint32_t)i, 1700000000000000);
		write_ok(f, &c);
	}
	assert_true(f->ch.inserts >= 1);   /* the first part went before the TRUNCATE */
	tl_change(&c, f->t, SL_OP_TRUNCATE, NULL, 0x7000, 301, 1700000000000000);
	write_ok(f, &c);
	/* the transaction ends: its step is part of the batch the checkpoint waits for */
	mark(f, 0x7010);
	assert_true(sl_clickhouse_ops.pending(f->sink));
	flush_ok(f, 0x7010);
	tr = fake_http_transcript(f->ch.srv);
	/* tombstones below (0x7000 << 8) + 301, the TRUNCATE's own version */
	snprintf(want, sizeof want, "`_version` < %llu", (unsigned long long)((UINT64_C(0x7000) << 8) + 301));
	assert_non_null(strstr(tr, want));
	/* the step: positions after 0x7000 move up by 301 - 255 */
	step = strstr(tr, "INSERT INTO `db`.`" CH_VMAP_TABLE "` (`object`, `pos`, `shift`) VALUES ('public_items', "
			  "28672, 46)");
	assert_non_null(step);
	/* the next transaction's rows, once, and no second step */
	struct sl_value n1[4] = { tl_int(1), tl_str("after"), tl_null(), tl_null() };
	fake_http_clear(f->ch.srv);
	tl_change(&c, f->t, SL_OP_INSERT, n1, 0x7100, 1, 1700000000100000);
	write_ok(f, &c);
	mark(f, 0x7110);
	flush_ok(f, 0x7110);
	tr = fake_http_transcript(f->ch.srv);
	assert_null(strstr(tr, CH_VMAP_TABLE));
	next = strstr(tr, "after");
	assert_non_null(next);

	/* restarted: the map and the TRUNCATE's sentinel are read back */
	sl_clickhouse_ops.close(f->sink);
	f->sink = NULL;
	fake_http_clear(f->ch.srv);
	sl_buf_reset(&f->ch.vmap);
	{
		uint64_t st[2] = { 0x7000, 46 };
		for (int k = 0; k < 2; k++)
			for (int i = 0; i < 8; i++)
				sl_buf_putc(&f->ch.vmap, (char)(st[k] >> (8 * i)));
	}
	f->ch.floor = (UINT64_C(0x7100) << 8) + 46 + 1;   /* as if a TRUNCATE were at 0x7100-1 */
	open_sink(f, true);
	tl_change(&c, f->t, SL_OP_INSERT, n1, 0x7000, 300, 1700000000000000);
	write_ok(f, &c);
	assert_false(sl_clickhouse_ops.pending(f->sink));   /* below the TRUNCATE */
	tl_change(&c, f->t, SL_OP_UPDATE_INSERT, n1, 0x7100, 2, 1700000000100000);
	write_ok(f, &c);
	assert_true(sl_clickhouse_ops.pending(f->sink));    /* (0x7100 << 8) + 46 + 2: above it */
}

static void test_merge_first_batch(void **state)
{
	struct fx *f = *state;
	struct sl_change c;
	struct ch_layout *l;

	{
		struct sl_value row[4] = { tl_int(10), tl_str("ten"), tl_str("from ClickHouse"), tl_dec(false, "100", 2) };
		struct ch_rowmeta m;
		char metabuf[SL_META_BUF];
		assert_int_equal(ch_layout_new(&l, f->t, true, CH_LEGACY, f->err, sizeof f->err), 0);
		tl_change(&c, f->t, SL_OP_INSERT, row, 0x1000, 1, 1600000000000000);
		assert_int_equal(ch_rowmeta_of_change(&m, &c, NULL, metabuf, f->err, sizeof f->err), 0);
		assert_int_equal(ch_layout_put_row(&f->ch.lookup, l, &m, row, false, f->err, sizeof f->err), 0);
		ch_layout_free(l);
	}
	open_sink(f, true);
	struct sl_value k1[4] = { tl_int(10), tl_null(), tl_null(), tl_null() };
	struct sl_value k2[4] = { tl_int(11), tl_str("eleven"), tl_unchanged(), tl_dec(false, "1100", 2) };
	tl_change(&c, f->t, SL_OP_UPDATE_DELETE, k1, 0x2100, 1, 1700000000100000);
	write_ok(f, &c);
	tl_change(&c, f->t, SL_OP_UPDATE_INSERT, k2, 0x2100, 2, 1700000000100000);
	write_ok(f, &c);
	mark(f, 0x2110);
	flush_ok(f, 0x2110);
	golden(f, "ch_merge.http");
}

/* The modern layout, chosen by a 26.x server: its DDL (written here by
 * hand from doc/clickhouse.md, "Layouts") and a merge batch in
 * ch_modern_merge.http: DateTime64, Date32 (a date past 2299 clamped), Bool,
 * UUID and Decimal in RowBinary.  Then a legacy table on the same server
 * keeps its Int64 timestamps. */
static const struct tl_col modern_cols[] = {
	{ "id", T_INT8, -1, "bigint", true },
	{ "at", T_TIMESTAMPTZ, -1, "timestamptz", false },
	{ "day", T_DATE, -1, "date", false },
	{ "ok", T_BOOL, -1, "boolean", false },
	{ "u", T_UUID, -1, "uuid", false },
	{ "amount", T_NUMERIC, 0, "numeric(12,2)", false },
};

static const char modern_ddl[] =
	"CREATE TABLE IF NOT EXISTS `db`.`public_items` (`id` Int64, `at` Nullable(DateTime64(6, 'UTC')), "
	"`day` Nullable(Date32), `ok` Nullable(Bool), `u` Nullable(UUID), `amount` Nullable(Decimal(12, 2)), "
	"`_uuid` UUID, `_source_timestamp` DateTime64(6, 'UTC'), `_read_timestamp` DateTime64(6, 'UTC'), "
	"`_change_type` String, `_csn` String, `_version` UInt64, `_is_deleted` UInt8, `_tx_id` UInt64, "
	"`_unchanged_columns` Array(String), `_lsn` String) "
	"ENGINE = ReplacingMergeTree(`_version`, `_is_deleted`) ORDER BY (`id`)";

static void test_modern_layout(void **state)
{
	static const unsigned char u[16] = { 0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77,
					     0x88, 0x99, 0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xff };
	struct fx *f = *state;
	struct tl_col cols[6];
	struct sl_change c;
	struct sl_ch_stats st;
	const char *tr;

	memcpy(cols, modern_cols, sizeof cols);
	cols[5].typmod = numeric_typmod(12, 2);
	sl_table_free(f->t);
	f->t = tl_table("public", "items", cols, 6);
	f->ch.version = "26.7.1.1";
	open_sink_as(f, true, CH_MODERN);
	{
		/* 2024-02-29 12:00:00.5 UTC; 2300-01-01 (past Date32: 2299-12-31) */
		struct sl_value v[6] = { tl_int(7), tl_ts(INT64_C(1709208000500000)), tl_date(120530), tl_bool(true),
					 tl_uuid(u), tl_dec(true, "123456", 2) };
		tl_change(&c, f->t, SL_OP_INSERT, v, 0x3000, 1, 1700000000000000);
		write_ok(f, &c);
	}
	mark(f, 0x3010);
	flush_ok(f, 0x3010);
	tr = fake_http_transcript(f->ch.srv);
	assert_non_null(strstr(tr, modern_ddl));
	assert_non_null(strstr(tr, "CREATE VIEW IF NOT EXISTS `db`.`public_items_current` AS SELECT * FROM "
				   "`db`.`public_items` FINAL WHERE `_is_deleted` = 0"));
	golden(f, "ch_modern_merge.http");
	sl_clickhouse_get_stats(f->sink, &st);
	assert_int_equal(st.date_clamps, 1);
	assert_true(f->ch.vmap_created);

	/* a legacy table on the same server: written as it is, nothing made */
	sl_clickhouse_ops.close(f->sink);
	f->sink = NULL;
	fake_http_clear(f->ch.srv);
	f->ch.table_exists = f->ch.view_exists = true;
	sl_buf_reset(&f->ch.inserted);
	open_sink_as(f, true, CH_LEGACY);
	{
		struct sl_value v[6] = { tl_int(8), tl_ts(1), tl_date(-1), tl_bool(false), tl_uuid(u), tl_null() };
		static const unsigned char want[] = {
			8, 0, 0, 0, 0, 0, 0, 0,                 /* id */
			0, 1, 0, 0, 0, 0, 0, 0, 0,              /* at: Nullable(Int64) 1 */
			0, 0xff, 0xff, 0xff, 0xff,              /* day: Nullable(Int32) -1 */
			0, 0,                                   /* ok: Nullable(UInt8) 0 */
			0, 36, '0', '0', '1', '1', '2', '2',    /* u: Nullable(String), the text */
		};
		tl_change(&c, f->t, SL_OP_INSERT, v, 0x3100, 1, 1700000000000000);
		write_ok(f, &c);
		mark(f, 0x3110);
		flush_ok(f, 0x3110);
		assert_null(strstr(fake_http_transcript(f->ch.srv), "CREATE TABLE IF NOT EXISTS `db`.`public_items`"));
		assert_true(f->ch.inserted.len > sizeof want);
		assert_memory_equal(f->ch.inserted.data, want, sizeof want);
	}
}

/* ------------------------------------------------------------------ */
/* failures                                                             */

static void write_rows(struct fx *f, int n, const char *bad_at)
{
	struct sl_change c;
	char names[16][16];

	for (int i = 0; i < n; i++) {
		snprintf(names[i], sizeof names[i], "%s%d", bad_at && i == 2 ? bad_at : "row", i);
		struct sl_value v[4] = { tl_int(i + 1), tl_str(names[i]), tl_null(), tl_dec(false, "1", 2) };
		tl_change(&c, f->t, SL_OP_INSERT, v, 0x5000 + (uint64_t)i * 0x100, 1, 1700000000000000);
		write_ok(f, &c);
	}
	mark(f, 0x5000 + (uint64_t)n * 0x100);
}

static void test_retry_on_503(void **state)
{
	struct fx *f = *state;
	struct sl_ch_stats st;

	open_sink(f, false);
	write_rows(f, 3, NULL);
	f->ch.fail_503 = 2;
	flush_ok(f, 0x5300);
	sl_clickhouse_get_stats(f->sink, &st);
	assert_int_equal(f->ch.inserts, 3);
	assert_int_equal(st.retries, 2);
	assert_int_equal(st.inserts, 1);
	assert_int_equal(st.rows_inserted, 3);
}

/* flush_start() hands the batch to the sender thread and returns; writes go
 * on into the next batch; flush_wait() returns the mark the batch had when
 * it left, after its insert. */
static void test_flush_in_two_steps(void **state)
{
	struct fx *f = *state;
	struct sl_ch_stats st;
	struct sl_position d;
	struct sl_change c;
	struct sl_value v[4] = { tl_int(9), tl_str("later"), tl_null(), tl_dec(false, "2", 2) };
	const char *order[] = { "row0", "row1", "row2", "later" };
	const char *at = NULL;

	open_sink(f, false);
	assert_int_equal(sl_clickhouse_ops.flush_wait(f->sink, &d, f->err, sizeof f->err), 0);  /* none in flight */
	write_rows(f, 3, NULL);   /* marked at 0x5300 */
	if (sl_clickhouse_ops.flush_start(f->sink, f->err, sizeof f->err) != 0)
		fail_msg("flush_start: %s", f->err);
	assert_false(sl_clickhouse_ops.pending(f->sink));
	assert_false(sl_clickhouse_ops.flush_due(f->sink, sl_mono_ms() + 100000));
	tl_change(&c, f->t, SL_OP_INSERT, v, 0x6000, 1, 1700000000000000);
	write_ok(f, &c);
	mark(f, 0x6100);
	assert_true(sl_clickhouse_ops.pending(f->sink));
	memset(&d, 0, sizeof d);
	if (sl_clickhouse_ops.flush_wait(f->sink, &d, f->err, sizeof f->err) != 1)
		fail_msg("flush_wait: %s", f->err);
	assert_int_equal(d.w[0], 0x5300);
	sl_clickhouse_get_stats(f->sink, &st);
	assert_int_equal(st.inserts, 1);
	assert_int_equal(st.rows_inserted, 3);
	assert_int_equal(sl_clickhouse_ops.flush_wait(f->sink, &d, f->err, sizeof f->err), 0);  /* collected */
	flush_ok(f, 0x6100);
	sl_clickhouse_get_stats(f->sink, &st);
	assert_int_equal(st.inserts, 2);
	assert_int_equal(st.rows_inserted, 4);
	/* the server got the rows in their order, each once */
	for (size_t i = 0; i < sizeof order / sizeof order[0]; i++) {
		const char *from = at ? at : f->ch.inserted.data;
		const char *e = f->ch.inserted.data + f->ch.inserted.len;
		at = memmem(from, (size_t)(e - from), order[i], strlen(order[i]));
		if (!at)
			fail_msg("%s is not in the inserts after the row before it", order[i]);
		assert_null(memmem(at + 1, (size_t)(e - at - 1), order[i], strlen(order[i])));
	}
}

/* A batch in flight that ClickHouse refuses: flush_wait() says why. */
static void test_flush_in_flight_fails(void **state)
{
	struct fx *f = *state;
	struct sl_position d;
	struct sl_change c;
	struct sl_value v[4] = { tl_int(9), tl_str("later"), tl_null(), tl_dec(false, "2", 2) };

	open_sink(f, false);
	write_rows(f, 2, NULL);
	f->ch.fatal = true;
	if (sl_clickhouse_ops.flush_start(f->sink, f->err, sizeof f->err) != 0)
		fail_msg("flush_start: %s", f->err);
	tl_change(&c, f->t, SL_OP_INSERT, v, 0x6000, 1, 1700000000000000);
	write_ok(f, &c);
	assert_int_equal(sl_clickhouse_ops.flush_wait(f->sink, &d, f->err, sizeof f->err), -1);
	assert_string_equal(f->err, "clickhouse: insert into \"db\".\"public_items\" failed: HTTP 404: Code: 60, "
			    "e.displayText() = DB::Exception: Table db.public_items doesn't exist., e.what() = "
			    "DB::Exception");
}

static void test_fatal_error(void **state)
{
	struct fx *f = *state;
	struct sl_position d;

	open_sink(f, false);
	write_rows(f, 3, NULL);
	f->ch.fatal = true;
	assert_int_equal(sl_clickhouse_ops.flush(f->sink, &d, f->err, sizeof f->err), -1);
	assert_string_equal(f->err, "clickhouse: insert into \"db\".\"public_items\" failed: HTTP 404: Code: 60, "
			    "e.displayText() = DB::Exception: Table db.public_items doesn't exist., e.what() = "
			    "DB::Exception");
	assert_int_equal(f->ch.inserts, 1);   /* no retry */
}

static void test_retries_run_out(void **state)
{
	struct fx *f = *state;
	struct sl_position d;
	time_t t0 = time(NULL);

	f->conf.retry_seconds = 1;
	open_sink(f, false);
	write_rows(f, 2, NULL);
	f->ch.fail_503 = 1000;
	assert_int_equal(sl_clickhouse_ops.flush(f->sink, &d, f->err, sizeof f->err), -1);
	assert_non_null(strstr(f->err, "clickhouse: insert into \"db\".\"public_items\" failed after "));
	assert_non_null(strstr(f->err, "attempts in 1 s: HTTP 503: Service Unavailable"));
	assert_true(f->ch.inserts >= 3);
	assert_true(time(NULL) - t0 <= 3);
}

static void test_connection_refused(void **state)
{
	struct fx *f = *state;
	struct sockaddr_in a;
	socklen_t alen = sizeof a;
	char url[64];
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	/* a port that is bound but does not listen: connections are refused */
	memset(&a, 0, sizeof a);
	a.sin_family = AF_INET;
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
	assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &alen), 0);
	snprintf(url, sizeof url, "http://127.0.0.1:%d", ntohs(a.sin_port));
	f->conf.url = url;
	f->conf.retry_seconds = 1;
	open_sink(f, false);
	struct sl_value v[4] = { tl_int(1), tl_str("x"), tl_null(), tl_null() };
	struct sl_change c;
	tl_change(&c, f->t, SL_OP_INSERT, v, 0x100, 1, 1);
	assert_int_equal(sl_clickhouse_ops.write(f->sink, &c, f->err, sizeof f->err), -1);
	assert_non_null(strstr(f->err, "clickhouse: reading the server's version failed after "));
	assert_non_null(strstr(f->err, "attempts in 1 s: "));
	assert_null(strstr(f->err, PASSWORD));
	close(fd);
}

static void test_dead_letter(void **state)
{
	struct fx *f = *state;
	struct sl_ch_stats st;
	unsigned char *text;
	size_t len;

	open_sink(f, false);
	write_rows(f, 5, "BAD");
	f->ch.refuse = "BAD";
	flush_ok(f, 0x5500);
	sl_clickhouse_get_stats(f->sink, &st);
	/* [0,5) refused; [0,2) in; [2,5) refused; [2,3) refused alone: dead; [3,5) in */
	assert_int_equal(f->ch.inserts, 5);
	assert_int_equal(st.dead_letters, 1);
	assert_int_equal(st.rows_inserted, 4);
	text = tl_read_file(f->dl_path, &len);
	assert_non_null(text);
	assert_non_null(strstr((char *)text, "\"stream\":\"s1\",\"database\":\"db\",\"table\":\"public_items\","
			       "\"code\":27,\"reason\":\"clickhouse: insert into \\\"db\\\".\\\"public_items\\\": "
			       "HTTP 500: Code: 27, e.displayText() = DB::Exception: Cannot parse input: (at row 1), "
			       "e.what() = DB::Exception\",\"row\":{\"id\":3,\"name\":\"BAD2\",\"note\":null,"
			       "\"amount\":\"0.01\","));
	assert_int_equal(strchr((char *)text, '\n') - (char *)text + 1, (long)len);  /* one line */
	free(text);
}

static void test_gzip(void **state)
{
	struct fx *f = *state;
	struct sl_change c;
	char note[3000];

	memset(note, 'n', sizeof note - 1);
	note[sizeof note - 1] = '\0';
	f->conf.compression = SL_CH_GZIP;
	open_sink(f, false);
	struct sl_value v[4] = { tl_int(1), tl_str("x"), tl_str(note), tl_null() };
	tl_change(&c, f->t, SL_OP_INSERT, v, 0x100, 1, 1);
	write_ok(f, &c);
	mark(f, 0x110);
	flush_ok(f, 0x110);
	assert_non_null(strstr(fake_http_transcript(f->ch.srv), "\nContent-Encoding: gzip\n"));
	/* what ClickHouse would read: inflate the body the server got */
	{
		z_stream z;
		unsigned char out[8192];
		memset(&z, 0, sizeof z);
		assert_int_equal(inflateInit2(&z, 15 + 16), Z_OK);
		z.next_in = (Bytef *)f->ch.inserted.data;
		z.avail_in = (uInt)f->ch.inserted.len;
		z.next_out = out;
		z.avail_out = sizeof out;
		assert_int_equal(inflate(&z, Z_FINISH), Z_STREAM_END);
		assert_true(f->ch.inserted.len < 400);
		assert_non_null(memmem(out, z.total_out, note, sizeof note - 1));
		inflateEnd(&z);
	}
}

/* err is the message of a schema change refused for table public.items of
 * stream s1 (SL_EPREREQ): what, then what to do. */
static void assert_refused(const char *err, const char *what)
{
	static const char todo[] = "; the stream stops here. To go on: when ClickHouse was changed, put its column "
				   "back; when the source was, drop \"db\".\"public_items\" in ClickHouse and run `sluice "
				   "backfill -c FILE --stream s1 --table public.items`; then start sluice again";
	size_t n = strlen(what);

	assert_int_equal(strncmp(err, what, n), 0);
	assert_string_equal(err + n, todo);
}

/* Opens a merge-mode sink whose table gets a column "extra" once altered,
 * writes key 1 (flushed with golden first when it is not NULL), then key 2
 * of t2 with the added column, and checks the requests of that batch
 * against golden added. */
static void added_column_batch(struct fx *f, struct sl_table *t2, const char *first, const char *added)
{
	const char *extra[] = { "extra", "Nullable(Int32)", NULL };
	struct sl_value v1[4] = { tl_int(1), tl_str("x"), tl_null(), tl_null() };
	struct sl_value v2[5] = { tl_int(2), tl_str("y"), tl_null(), tl_null(), tl_int(7) };
	struct ch_layout *l;
	struct sl_change c;

	open_sink(f, true);
	assert_int_equal(ch_layout_new(&l, f->t, true, CH_LEGACY, f->err, sizeof f->err), 0);
	describe_layout(&f->ch.describe_altered, l, extra);
	ch_layout_free(l);
	tl_change(&c, f->t, SL_OP_INSERT, v1, 0x100, 1, 1);
	write_ok(f, &c);
	if (first) {
		mark(f, 0x110);
		flush_ok(f, 0x110);
		golden(f, first);
	}
	fake_http_clear(f->ch.srv);
	tl_change(&c, t2, SL_OP_INSERT, v2, 0x200, 1, 1);
	write_ok(f, &c);
	mark(f, 0x210);
	flush_ok(f, 0x210);
	golden(f, added);
}

/* With cluster set, every statement that makes or alters something goes ON
 * CLUSTER and the tables are Replicated (ch_cluster_merge.http: the first
 * write of a merge-mode table; ch_cluster_add_column.http: a column added,
 * the view made again); reads and inserts stay as they are. */
static void test_cluster_requests(void **state)
{
	struct fx *f = *state;
	struct sl_table *t2 = items_table(5);

	f->conf.cluster = (char *)"two shards";
	f->conf.replica_path = (char *)"/clickhouse/tables/{shard}/{database}/{table}";
	added_column_batch(f, t2, "ch_cluster_merge.http", "ch_cluster_add_column.http");
	sl_table_free(t2);
}

/* With distributed, the local tables are <table>_local and the rows go
 * through the Distributed table <table>, made from the local table's
 * columns and sharded by their sorting key; each insert (and a TRUNCATE's
 * INSERT ... SELECT) waits until its rows are on their shards
 * (insert_distributed_sync=1).  ch_dist_merge.http: the first write of a
 * merge-mode table, a key change, a TOAST value filled through the
 * Distributed table; ch_dist_add_column.http: a column added, the
 * Distributed table and the view made again; ch_dist_truncate.http: a
 * TRUNCATE; ch_dist_append.http: an append-mode batch in the modern layout. */
static void test_distributed_requests(void **state)
{
	struct fx *f = *state;
	struct sl_table *t2 = items_table(5);
	struct sl_value v[5] = { tl_int(3), tl_str("z"), tl_unchanged(), tl_null(), tl_int(8) };
	struct sl_change c;

	f->conf.cluster = (char *)"two shards";
	f->conf.replica_path = (char *)"/clickhouse/tables/{shard}/{database}/{table}";
	f->conf.distributed = 1;
	f->ch.dist = true;
	added_column_batch(f, t2, "ch_dist_merge.http", "ch_dist_add_column.http");
	/* a TOAST value from ClickHouse, then a TRUNCATE */
	fake_http_clear(f->ch.srv);
	tl_change(&c, t2, SL_OP_UPDATE_INSERT, v, 0x300, 1, 1);
	write_ok(f, &c);
	mark(f, 0x310);
	flush_ok(f, 0x310);
	tl_change(&c, t2, SL_OP_TRUNCATE, NULL, 0x400, 1, 1);
	write_ok(f, &c);
	mark(f, 0x410);
	flush_ok(f, 0x410);
	golden(f, "ch_dist_truncate.http");
	sl_table_free(t2);
}

static void test_distributed_append(void **state)
{
	struct fx *f = *state;
	struct sl_value v1[4] = { tl_int(1), tl_str("apple"), tl_str("first"), tl_dec(false, "1250", 2) };
	struct sl_change c;

	f->conf.cluster = (char *)"two shards";
	f->conf.replica_path = (char *)"/clickhouse/tables/{shard}/{database}/{table}";
	f->conf.distributed = 1;
	f->ch.dist = true;
	f->ch.version = "26.7.2.1";
	open_sink_as(f, false, CH_MODERN);
	tl_change(&c, f->t, SL_OP_INSERT, v1, 0x16B374D848, 1, 1700000000000000);
	write_ok(f, &c);
	mark(f, 0x16B374DA10);
	flush_ok(f, 0x16B374DA10);
	golden(f, "ch_dist_append.http");
}

/* A column added at the source: ALTER TABLE ADD COLUMN.  Dropped ones, which
 * sluice made so: DROP COLUMN, and the view made again (merge mode). */
static void test_schema_changes(void **state)
{
	struct fx *f = *state;
	struct sl_table *t2 = items_table(5), *t3 = items_table(3);
	struct sl_change c;
	struct sl_value v3[3] = { tl_int(3), tl_str("z"), tl_null() };
	struct ch_layout *l;

	added_column_batch(f, t2, NULL, "ch_add_column.http");
	fake_http_clear(f->ch.srv);
	assert_int_equal(ch_layout_new(&l, t3, true, CH_LEGACY, f->err, sizeof f->err), 0);
	describe_layout(&f->ch.describe_dropped, l, NULL);
	ch_layout_free(l);
	tl_change(&c, t3, SL_OP_INSERT, v3, 0x300, 1, 1);
	write_ok(f, &c);
	mark(f, 0x310);
	flush_ok(f, 0x310);
	golden(f, "ch_drop_column.http");
	sl_table_free(t2);
	sl_table_free(t3);
}

/* Merge mode: a version without two columns that a row of a later change
 * wrote (an older version: a replay of earlier positions) keeps them, and
 * its insert names its columns; the newer version again needs no ALTER.
 * A later change wrote a column when its row holds a value there, or NULL
 * under a DEFAULT: the scan asks ClickHouse for both. */
static void test_older_version_keeps_column(void **state)
{
	struct fx *f = *state;
	struct sl_table *t2 = items_table(5), *t3 = items_table(3);
	struct sl_change c;
	struct sl_value v3[3] = { tl_int(3), tl_str("z"), tl_null() };
	const char *tr, *scan;

	added_column_batch(f, t2, NULL, "ch_add_column.http");
	fake_http_clear(f->ch.srv);
	f->ch.later_write = true;
	tl_change(&c, t3, SL_OP_INSERT, v3, 0x300, 1, 1);
	write_ok(f, &c);
	mark(f, 0x310);
	flush_ok(f, 0x310);
	tr = fake_http_transcript(f->ch.srv);
	scan = strstr(tr, "SELECT toUInt8(1) FROM `db`.`public_items` WHERE `_csn` > '0000000000000300-0000000001' "
		       "AND (`amount` IS NOT NULL OR (SELECT count() FROM system.columns WHERE database = 'db' AND "
		       "table = 'public_items' AND name = 'amount' AND default_expression != '') > 0) LIMIT 1 ");
	assert_non_null(scan);
	assert_non_null(strstr(scan, "AND (`extra` IS NOT NULL OR (SELECT count() FROM system.columns WHERE "));
	assert_null(strstr(tr, "DROP COLUMN"));
	assert_false(f->ch.dropped);
	assert_non_null(strstr(f->ch.last_insert_query.data, "INSERT INTO `db`.`public_items` (`id`, "));
	sl_table_free(t2);
	sl_table_free(t3);
}

/* A changed column type names the side that changed it: the source (the
 * layout sluice wrote this run, or its record in ClickHouse, still matches
 * ClickHouse) or ClickHouse (the record matches the source). */
static void test_retyped_which_side(void **state)
{
	struct fx *f = *state;
	struct tl_col cols[4];
	struct sl_table *retyped;
	struct ch_layout *l;
	struct sl_change c;
	struct sl_value v[4] = { tl_int(1), tl_str("x"), tl_null(), tl_null() };
	struct sl_value w[4] = { tl_int(1), tl_str("x"), tl_int(5), tl_null() };

	memcpy(cols, item_cols, sizeof cols);
	cols[3].typmod = numeric_typmod(10, 2);
	cols[2].oid = T_INT4;
	cols[2].type_name = "integer";
	retyped = tl_table("public", "items", cols, 4);

	/* sluice makes the table and records its columns */
	open_sink(f, true);
	tl_change(&c, f->t, SL_OP_INSERT, v, 0x100, 1, 1);
	write_ok(f, &c);
	assert_non_null(strstr(fake_http_transcript(f->ch.srv),
			       "INSERT INTO `db`.`_sluice_columns` (`object`, `name`, `type`) VALUES ('public_items', "
			       "'id', 'Int64'), ('public_items', 'name', 'Nullable(String)'), ('public_items', 'note', "
			       "'Nullable(String)')"));
	/* the source retypes "note": the layout of this run still matches ClickHouse */
	tl_change(&c, retyped, SL_OP_INSERT, w, 0x200, 1, 1);
	assert_int_equal(sl_clickhouse_ops.write(f->sink, &c, f->err, sizeof f->err), SL_EPREREQ);
	assert_refused(f->err, "table \"public_items\": column \"note\" changed at the source: ClickHouse has "
			    "Nullable(String), as sluice made it, and the source table now needs Nullable(Int32)");
	sl_clickhouse_ops.close(f->sink);
	f->sink = NULL;

	/* restarted, ClickHouse's "note" altered to Nullable(Int32), the source unchanged: the record says
	 * ClickHouse changed */
	sl_buf_reset(&f->ch.made);
	sl_buf_append(&f->ch.made, f->ch.describe.data, f->ch.describe.len);
	open_sink(f, true);
	assert_int_equal(ch_layout_new(&l, retyped, true, CH_LEGACY, f->err, sizeof f->err), 0);
	sl_buf_reset(&f->ch.describe);
	describe_layout(&f->ch.describe, l, NULL);
	ch_layout_free(l);
	tl_change(&c, f->t, SL_OP_INSERT, v, 0x300, 1, 1);
	assert_int_equal(sl_clickhouse_ops.write(f->sink, &c, f->err, sizeof f->err), SL_EPREREQ);
	assert_refused(f->err, "table \"public_items\": column \"note\" was changed in ClickHouse: sluice made "
			    "it Nullable(String), which the source table still needs, and ClickHouse now has "
			    "Nullable(Int32) (ALTER TABLE ... MODIFY COLUMN puts it back)");
	sl_clickhouse_ops.close(f->sink);
	f->sink = NULL;

	/* a table made before the record: neither side is blamed */
	sl_buf_reset(&f->ch.made);
	open_sink(f, true);
	sl_buf_reset(&f->ch.describe);
	assert_int_equal(ch_layout_new(&l, retyped, true, CH_LEGACY, f->err, sizeof f->err), 0);
	describe_layout(&f->ch.describe, l, NULL);
	ch_layout_free(l);
	assert_int_equal(sl_clickhouse_ops.write(f->sink, &c, f->err, sizeof f->err), SL_EPREREQ);
	assert_non_null(strstr(f->err, "sluice has no record of the type it made it with, so either side may have "
				       "changed"));
	sl_table_free(retyped);
}

/* A table sluice made and wrote (its columns are on record), gone from
 * ClickHouse: a change of the stream stops it (SL_EPREREQ, exit 3) with the
 * command that backfills the table; a re-backfill's marker makes it anew. */
static void test_table_dropped_by_hand(void **state)
{
	struct fx *f = *state;
	struct sl_change c;
	struct sl_value v[4] = { tl_int(1), tl_str("x"), tl_null(), tl_null() };
	char conf[600];

	/* ClickHouse has the record (what sluice made), not the table */
	open_sink(f, true);
	sl_buf_append(&f->ch.made, f->ch.describe.data, f->ch.describe.len);
	sl_clickhouse_ops.close(f->sink);
	f->sink = NULL;
	snprintf(conf, sizeof conf, "%s/my sluice.conf", f->dir);
	fclose(fopen(conf, "w"));
	f->conf_path = conf;
	f->ch.db_exists = true;
	open_sink(f, true);
	tl_change(&c, f->t, SL_OP_UPDATE_INSERT, v, 0x100, 1, 1);
	assert_int_equal(sl_clickhouse_ops.write(f->sink, &c, f->err, sizeof f->err), SL_EPREREQ);
	char want[1400];
	snprintf(want, sizeof want, "clickhouse: table \"db\".\"public_items\" (of \"public\".\"items\") is gone from "
		 "ClickHouse, but sluice made and wrote it before (dropped by hand?): the stream alone cannot bring "
		 "its rows back, so it stops here. Run `sluice backfill -c '%s' --stream s1 --table public.items` to "
		 "fill it again (the next run makes the table anew and backfills it), then start sluice again", conf);
	assert_string_equal(f->err, want);
	assert_false(f->ch.table_exists);
	sl_clickhouse_ops.close(f->sink);
	f->sink = NULL;

	/* the re-backfill: its marker first, then the rows */
	open_sink(f, true);
	tl_change(&c, f->t, SL_OP_TRUNCATE, NULL, 0x1FF, 0, 1);
	write_ok(f, &c);
	assert_true(f->ch.table_exists);
	tl_change(&c, f->t, SL_OP_INSERT, v, 0x200, 0, 1);
	write_ok(f, &c);

	/* a table sluice never made (no record) is made as before */
	sl_clickhouse_ops.close(f->sink);
	f->sink = NULL;
	sl_buf_reset(&f->ch.made);
	f->ch.table_exists = f->ch.view_exists = false;
	open_sink(f, true);
	tl_change(&c, f->t, SL_OP_UPDATE_INSERT, v, 0x300, 1, 1);
	write_ok(f, &c);
	assert_true(f->ch.table_exists);
}

static void test_flush_due_and_spill(void **state)
{
	struct fx *f = *state;
	struct sl_ch_stats st;
	struct timespec ts = { 0, 30 * 1000000L };

	f->conf.batch_rows = 3;
	f->conf.batch_ms = 20;
	open_sink(f, false);
	write_rows(f, 2, NULL);
	assert_false(sl_clickhouse_ops.flush_due(f->sink, sl_mono_ms()));
	nanosleep(&ts, NULL);
	assert_true(sl_clickhouse_ops.flush_due(f->sink, sl_mono_ms()));
	assert_int_equal(f->ch.inserts, 0);
	/* the third row reaches batch_rows: a flush is due (at the transaction's
	 * end); the sixth, twice batch_rows, is sent from write() (a large
	 * transaction) */
	struct sl_value v[4] = { tl_int(9), tl_str("x"), tl_null(), tl_null() };
	struct sl_change c;
	for (uint32_t i = 3; i <= 6; i++) {
		tl_change(&c, f->t, SL_OP_INSERT, v, 0x9000, i, 1);
		write_ok(f, &c);
		if (i < 6) {
			assert_int_equal(f->ch.inserts, 0);
			assert_true(sl_clickhouse_ops.flush_due(f->sink, sl_mono_ms()));
		}
	}
	assert_int_equal(f->ch.inserts, 1);
	assert_false(sl_clickhouse_ops.pending(f->sink));
	assert_false(sl_clickhouse_ops.flush_due(f->sink, sl_mono_ms() + 100000));
	sl_clickhouse_get_stats(f->sink, &st);
	assert_int_equal(st.spills, 1);
	assert_int_equal(st.rows_inserted, 6);
}

static void test_discard_backfill(void **state)
{
	struct fx *f = *state;

	open_sink(f, false);
	write_rows(f, 1, NULL);
	fake_http_clear(f->ch.srv);
	/* pending rows of the table are sent first, then deleted with the run */
	if (sl_clickhouse_ops.discard_backfill(f->sink, f->t, "0000000000004FFF-0000000000",
					       "0000000000005000-0000000000", f->err, sizeof f->err) != 0)
		fail_msg("discard: %s", f->err);
	golden(f, "ch_discard.http");
	sl_clickhouse_ops.close(f->sink);
	/* merge mode: nothing to do */
	f->sink = NULL;
	open_sink(f, true);
	fake_http_clear(f->ch.srv);
	assert_int_equal(sl_clickhouse_ops.discard_backfill(f->sink, f->t, "0000000000004FFF-0000000000",
							    "0000000000005000-0000000000", f->err, sizeof f->err), 0);
	assert_int_equal(fake_http_count(f->ch.srv), 0);
}

/* Large TOAST values: when the rows of a lookup do not fit in a response,
 * the lookup asks for fewer keys at a time, down to one. */
/* A new sink writes and flushes `UPDATE items SET id = 2 WHERE id = 1` at
 * position pos, note left unchanged; *st receives its counters. */
static void key_change_1_to_2(struct fx *f, uint64_t pos, struct sl_ch_stats *st)
{
	struct sl_change c;
	struct sl_value del[4] = { tl_int(1), tl_null(), tl_null(), tl_null() };
	struct sl_value ins[4] = { tl_int(2), tl_str("n"), tl_unchanged(), tl_null() };

	open_sink(f, true);
	tl_change(&c, f->t, SL_OP_UPDATE_DELETE, del, pos, 1, 1);
	write_ok(f, &c);
	tl_change(&c, f->t, SL_OP_UPDATE_INSERT, ins, pos, 2, 1);
	write_ok(f, &c);
	mark(f, pos + 0x10);
	flush_ok(f, pos + 0x10);
	sl_clickhouse_get_stats(f->sink, st);
}

/* A key change replayed after a crash that came once ClickHouse had its
 * rows: the old key's row is a tombstone by then, but the new key's row of
 * the same version has the unchanged values the first write filled in, and
 * the replay takes them from it instead of writing NULL over it. */
static void test_replayed_key_change_keeps_toast(void **state)
{
	struct fx *f = *state;
	struct ch_layout *l;
	struct sl_change c;
	struct sl_ch_stats st;
	struct ch_rowmeta m;
	char metabuf[SL_META_BUF], big[2000];
	struct sl_value del[4] = { tl_int(1), tl_null(), tl_null(), tl_null() };

	memset(big, 'T', sizeof big - 1);
	big[sizeof big - 1] = '\0';
	assert_int_equal(ch_layout_new(&l, f->t, true, CH_LEGACY, f->err, sizeof f->err), 0);
	/* ClickHouse: key 1's tombstone and key 2's full row, both of the first write */
	tl_change(&c, f->t, SL_OP_UPDATE_DELETE, del, 0x2100, 1, 1);
	assert_int_equal(ch_rowmeta_of_change(&m, &c, NULL, metabuf, f->err, sizeof f->err), 0);
	sl_buf_init(&f->ch.row_of[1], 0);
	assert_int_equal(ch_layout_put_row(&f->ch.row_of[1], l, &m, del, false, f->err, sizeof f->err), 0);
	struct sl_value full[4] = { tl_int(2), tl_str("n"), tl_str(big), tl_null() };
	tl_change(&c, f->t, SL_OP_UPDATE_INSERT, full, 0x2100, 2, 1);
	assert_int_equal(ch_rowmeta_of_change(&m, &c, NULL, metabuf, f->err, sizeof f->err), 0);
	sl_buf_init(&f->ch.row_of[2], 0);
	assert_int_equal(ch_layout_put_row(&f->ch.row_of[2], l, &m, full, false, f->err, sizeof f->err), 0);
	ch_layout_free(l);
	f->ch.by_key = true;
	/* the replay */
	key_change_1_to_2(f, 0x2100, &st);
	assert_int_equal(st.unchanged_missing, 0);
	assert_int_equal(st.unchanged_filled, 1);
	assert_int_equal(st.replays_kept, 1);
	assert_non_null(memmem(f->ch.inserted.data, f->ch.inserted.len, big, sizeof big - 1));

	/* a row of the new key at another version (an older row of that key) is no source */
	sl_clickhouse_ops.close(f->sink);
	f->sink = NULL;
	sl_buf_reset(&f->ch.inserted);
	key_change_1_to_2(f, 0x2200, &st);
	assert_int_equal(st.unchanged_missing, 1);
	assert_int_equal(st.replays_kept, 0);
	assert_null(memmem(f->ch.inserted.data, f->ch.inserted.len, big, sizeof big - 1));
	for (int k = 1; k <= 2; k++)
		sl_buf_free(&f->ch.row_of[k]);
}

static void test_lookup_split(void **state)
{
	struct fx *f = *state;
	struct ch_layout *l;
	struct sl_change c;
	struct sl_ch_stats st;
	char big[3][1000];

	assert_int_equal(ch_layout_new(&l, f->t, true, CH_LEGACY, f->err, sizeof f->err), 0);
	for (int k = 1; k <= 3; k++) {
		memset(big[k - 1], 'a' + k, sizeof big[k - 1] - 1);
		big[k - 1][sizeof big[k - 1] - 1] = '\0';
		struct sl_value row[4] = { tl_int(k), tl_str("n"), tl_str(big[k - 1]), tl_null() };
		struct ch_rowmeta m;
		char metabuf[SL_META_BUF];
		tl_change(&c, f->t, SL_OP_INSERT, row, 0x1000, (uint32_t)k, 1);
		assert_int_equal(ch_rowmeta_of_change(&m, &c, NULL, metabuf, f->err, sizeof f->err), 0);
		sl_buf_init(&f->ch.row_of[k], 0);
		assert_int_equal(ch_layout_put_row(&f->ch.row_of[k], l, &m, row, false, f->err, sizeof f->err), 0);
	}
	ch_layout_free(l);
	f->ch.by_key = true;
	f->conf.response_cap = 2 * f->ch.row_of[1].len - 10;   /* one row fits, two do not */
	open_sink(f, true);
	for (int k = 1; k <= 3; k++) {
		struct sl_value v[4] = { tl_int(k), tl_str("updated"), tl_unchanged(), tl_null() };
		tl_change(&c, f->t, SL_OP_UPDATE_INSERT, v, 0x2000, (uint32_t)k, 2);
		write_ok(f, &c);
	}
	mark(f, 0x2010);
	flush_ok(f, 0x2010);
	sl_clickhouse_get_stats(f->sink, &st);
	assert_int_equal(st.lookups, 3);
	assert_int_equal(st.unchanged_filled, 3);
	assert_int_equal(f->ch.lookups, 9 + 3);   /* 1000, 500, 250, ..., 7, 3 keys overflowed; then 1, 1, 1 */
	for (int k = 0; k < 3; k++)
		assert_non_null(memmem(f->ch.inserted.data, f->ch.inserted.len, big[k], sizeof big[k] - 1));
	for (int k = 1; k <= 3; k++)
		sl_buf_free(&f->ch.row_of[k]);
}

/* Names sluice did not make: a table of another engine, or a table where
 * the merge view would go. */
static void test_foreign_tables(void **state)
{
	struct fx *f = *state;
	struct sl_value v[4] = { tl_int(1), tl_str("x"), tl_null(), tl_null() };
	struct sl_change c;

	f->ch.db_exists = f->ch.table_exists = true;
	f->ch.table_engine = "MergeTree";
	open_sink(f, false);
	tl_change(&c, f->t, SL_OP_INSERT, v, 0x100, 1, 1);
	assert_int_equal(sl_clickhouse_ops.write(f->sink, &c, f->err, sizeof f->err), -1);
	assert_string_equal(f->err, "clickhouse: table \"public_items\" exists in database \"db\" with engine MergeTree, "
			    "so sluice did not make it (its tables are ReplacingMergeTree): write this stream to another "
			    "database");
	sl_clickhouse_ops.close(f->sink);
	f->sink = NULL;
	f->ch.table_engine = NULL;
	f->ch.view_exists = true;
	f->ch.view_engine = "ReplacingMergeTree";
	open_sink(f, true);
	assert_int_equal(sl_clickhouse_ops.write(f->sink, &c, f->err, sizeof f->err), -1);
	assert_string_equal(f->err, "clickhouse: the view of table \"public_items\" would be \"public_items_current\", "
			    "but database \"db\" has a table of that name (engine ReplacingMergeTree): rename it, or write "
			    "this stream to another database");
}

/* Merge mode encodes a change as it is written: a value its column cannot
 * take fails the write, naming the column, and leaves the batch as it was. */
static void test_merge_refused_value(void **state)
{
	struct fx *f = *state;
	struct sl_value ok[4] = { tl_int(1), tl_str("one"), tl_str("note"), tl_dec(false, "100", 2) };
	struct sl_value bad[4] = { tl_int(1), tl_str("one!"), tl_unchanged(), tl_dec(false, "1001", 3) };
	struct sl_change c;
	struct sl_ch_stats st;

	open_sink(f, true);
	tl_change(&c, f->t, SL_OP_INSERT, ok, 0x100, 1, 1);
	write_ok(f, &c);
	tl_change(&c, f->t, SL_OP_UPDATE_INSERT, bad, 0x200, 1, 1);
	assert_int_equal(sl_clickhouse_ops.write(f->sink, &c, f->err, sizeof f->err), -1);
	assert_non_null(strstr(f->err, "column \"amount\": a decimal value of scale 3 does not fit decimal(10,2)"));
	/* the key's row in the batch is still the INSERT */
	mark(f, 0x110);
	flush_ok(f, 0x110);
	sl_clickhouse_get_stats(f->sink, &st);
	assert_int_equal(st.rows_inserted, 1);
	assert_non_null(memmem(f->ch.inserted.data, f->ch.inserted.len, "note", 4));
	assert_null(memmem(f->ch.inserted.data, f->ch.inserted.len, "one!", 4));
}

/* Merge mode: a change whose key has no value (a NULL that the source's
 * checks let through) cannot be a row; it goes to the dead-letter file,
 * named by table and CSN, and the stream goes on. */
static void test_merge_null_key_dead_letter(void **state)
{
	struct fx *f = *state;
	struct sl_value one[4] = { tl_int(1), tl_str("one"), tl_null(), tl_null() };
	struct sl_value nokey[4] = { tl_null(), tl_str("gone"), tl_null(), tl_null() };
	struct sl_value two[4] = { tl_int(2), tl_str("two"), tl_null(), tl_null() };
	struct sl_change c;
	struct sl_ch_stats st;
	struct sl_buf want;
	unsigned char *text;
	size_t len;

	open_sink(f, true);
	tl_change(&c, f->t, SL_OP_INSERT, one, 0x100, 1, 1);
	write_ok(f, &c);
	tl_change(&c, f->t, SL_OP_DELETE, nokey, 0x200, 1, 1);
	write_ok(f, &c);
	sl_buf_init(&want, 0);
	sl_buf_printf(&want, "\"stream\":\"s1\",\"database\":\"db\",\"table\":\"public_items\",\"code\":0,"
		      "\"reason\":\"column \\\"id\\\": a null value in a column that cannot be null (a key column of "
		      "a merge-mode table)\",\"csn\":\"%s\",\"change_type\":\"DELETE\",\"row\":{\"id\":null,"
		      "\"name\":\"gone\",\"note\":null,\"amount\":null}}\n", c.csn);
	tl_change(&c, f->t, SL_OP_INSERT, two, 0x300, 1, 1);
	write_ok(f, &c);
	mark(f, 0x310);
	flush_ok(f, 0x310);
	sl_clickhouse_get_stats(f->sink, &st);
	assert_int_equal(st.rows_inserted, 2);
	assert_int_equal(st.dead_letters, 1);
	assert_int_equal(sl_clickhouse_ops.dead_letters(f->sink), 1);
	assert_null(memmem(f->ch.inserted.data, f->ch.inserted.len, "gone", 4));
	text = tl_read_file(f->dl_path, &len);
	assert_non_null(text);
	assert_false(sl_buf_failed(&want));
	assert_non_null(strstr((char *)text, want.data));
	assert_int_equal(strchr((char *)text, '\n') - (char *)text + 1, (long)len);  /* one line */
	free(text);
	sl_buf_free(&want);
}

/* sluice check's output (malloc'd), after checking that it returned rc. */
static char *run_check(struct fx *f, const struct sl_sink_stream *st, int rc)
{
	char *out = NULL;
	size_t outlen = 0;
	FILE *fp = open_memstream(&out, &outlen);

	assert_non_null(fp);
	assert_int_equal(sl_clickhouse_ops.check(&f->conf, st, fp, f->err, sizeof f->err), rc);
	fclose(fp);
	return out;
}

/* `sluice check` passes and says of cluster "two shards": "has <tail>". */
static void expect_cluster_line(struct fx *f, const struct sl_sink_stream *st, const char *tail)
{
	struct sl_buf want;
	char *out = run_check(f, st, 0);

	sl_buf_init(&want, 0);
	sl_buf_printf(&want, "\nstream s1: destination wh: cluster \"two shards\" has %s", tail);
	assert_non_null(strstr(out, want.data));
	sl_buf_free(&want);
	free(out);
}

static void test_check(void **state)
{
	struct fx *f = *state;
	struct sl_sink_stream st = { .name = "s1", .mode = SL_WRITE_MERGE, .destination = "wh" };
	char *out = run_check(f, &st, 0);
	char want[2048];

	snprintf(want, sizeof want,
		 "stream s1: destination wh: ClickHouse 18.16.1 answers at %s as user \"sluice\"\n"
		 "stream s1: destination wh: database \"db\" does not exist and will be created; user \"sluice\" may "
		 "create tables and insert (merge mode: ReplacingMergeTree(_version) tables and <table>_current views; "
		 "new tables in the legacy layout)\n"
		 "stream s1: destination wh: rows ClickHouse refuses go to \"%s\"\n", f->conf.url, f->dl_path);
	assert_string_equal(out, want);
	free(out);
	/* a 26.x server: the modern layout */
	f->ch.version = "26.7.2.1";
	out = run_check(f, &st, 0);
	assert_non_null(strstr(out, "(merge mode: ReplacingMergeTree(_version, _is_deleted) tables and "
				    "<table>_current views; new tables in the modern layout)\n"));
	free(out);
	f->ch.version = NULL;
	/* read-only: nothing was created */
	assert_null(strstr(fake_http_transcript(f->ch.srv), "CREATE"));
	assert_false(f->ch.db_exists);
	/* a read-only user is refused: the operator must act (exit 3) */
	f->ch.readonly = true;
	out = run_check(f, &st, SL_EPREREQ);
	free(out);
	assert_string_equal(f->err, "destination \"wh\": user \"sluice\" is read-only in ClickHouse (readonly is "
			    "set): sluice needs to insert and to create tables");
	/* a cluster: in system.clusters, or exit 3 */
	f->ch.readonly = false;
	f->conf.cluster = (char *)"two shards";
	f->conf.replica_path = (char *)"/clickhouse/tables/{shard}/{database}/{table}";
	f->ch.cluster_hosts = 4;
	f->ch.cluster_shards = 2;
	f->ch.cluster_local = 1;
	expect_cluster_line(f, &st, "4 servers in 2 shards: tables are made ON CLUSTER, Replicated, at "
			    "/clickhouse/tables/{shard}/{database}/{table}; rows go to this server's shard only "
			    "(distributed = false)\n");
	f->conf.distributed = 1;
	expect_cluster_line(f, &st, "4 servers in 2 shards: tables are made ON CLUSTER, Replicated, at "
			    "/clickhouse/tables/{shard}/{database}/{table}; rows go through Distributed tables to "
			    "every shard\n");
	f->ch.cluster_hosts = f->ch.cluster_shards = 1;
	f->conf.distributed = 0;
	expect_cluster_line(f, &st, "1 servers in 1 shard: tables are made ON CLUSTER, Replicated, at "
			    "/clickhouse/tables/{shard}/{database}/{table}\n");
	/* the server of url is not one of the cluster's: it would get no table */
	f->ch.cluster_local = 0;
	out = run_check(f, &st, SL_EPREREQ);
	free(out);
	assert_non_null(strstr(f->err, "destination \"wh\": the server at http://127.0.0.1:"));
	assert_non_null(strstr(f->err, " is not one of the 1 servers of cluster \"two shards\" (none of them is local "
				       "in its system.clusters): point url at one of them"));
	f->ch.cluster_hosts = 0;
	out = run_check(f, &st, SL_EPREREQ);
	free(out);
	assert_string_equal(f->err, "destination \"wh\": cluster \"two shards\" is not in the server's "
			    "remote_servers (system.clusters)");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_append_batch, setup, teardown),
		cmocka_unit_test_setup_teardown(test_merge_first_batch, setup, teardown),
		cmocka_unit_test_setup_teardown(test_modern_layout, setup, teardown),
		cmocka_unit_test_setup_teardown(test_merge_batch, setup, teardown),
		cmocka_unit_test_setup_teardown(test_merge_floor_after_restart, setup, teardown),
		cmocka_unit_test_setup_teardown(test_old_version_below_truncate, setup, teardown),
		cmocka_unit_test_setup_teardown(test_merge_long_transaction, setup, teardown),
		cmocka_unit_test_setup_teardown(test_retyped_which_side, setup, teardown),
		cmocka_unit_test_setup_teardown(test_distributed_requests, setup, teardown),
		cmocka_unit_test_setup_teardown(test_distributed_append, setup, teardown),
		cmocka_unit_test_setup_teardown(test_replayed_key_change_keeps_toast, setup, teardown),
		cmocka_unit_test_setup_teardown(test_table_dropped_by_hand, setup, teardown),
		cmocka_unit_test_setup_teardown(test_retry_on_503, setup, teardown),
		cmocka_unit_test_setup_teardown(test_fatal_error, setup, teardown),
		cmocka_unit_test_setup_teardown(test_retries_run_out, setup, teardown),
		cmocka_unit_test_setup_teardown(test_connection_refused, setup, teardown),
		cmocka_unit_test_setup_teardown(test_dead_letter, setup, teardown),
		cmocka_unit_test_setup_teardown(test_gzip, setup, teardown),
		cmocka_unit_test_setup_teardown(test_schema_changes, setup, teardown),
		cmocka_unit_test_setup_teardown(test_older_version_keeps_column, setup, teardown),
		cmocka_unit_test_setup_teardown(test_cluster_requests, setup, teardown),
		cmocka_unit_test_setup_teardown(test_flush_due_and_spill, setup, teardown),
		cmocka_unit_test_setup_teardown(test_discard_backfill, setup, teardown),
		cmocka_unit_test_setup_teardown(test_lookup_split, setup, teardown),
		cmocka_unit_test_setup_teardown(test_foreign_tables, setup, teardown),
		cmocka_unit_test_setup_teardown(test_merge_refused_value, setup, teardown),
		cmocka_unit_test_setup_teardown(test_merge_null_key_dead_letter, setup, teardown),
		cmocka_unit_test_setup_teardown(test_check, setup, teardown),
		cmocka_unit_test_setup_teardown(test_flush_in_two_steps, setup, teardown),
		cmocka_unit_test_setup_teardown(test_flush_in_flight_fails, setup, teardown),
	};

	return cmocka_run_group_tests_name("clickhouse sink", tests, NULL, NULL);
}
