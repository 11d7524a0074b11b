/*
 * tests/unit/test_config.c: unit tests for agent/config.c, with the key
 * tables it applies: its own, the sources' (sources/source_conf.c) and the
 * avro_dir sink's.  (The key-table engine on its own: test_keytab.c.)
 *
 * Each test writes a config file into a fresh mkdtemp directory and loads it.
 * Error tests compare the whole message, "FILE:LINE: ...", and every error
 * message is checked for the canary password, which the tests put in an
 * environment variable and in password files.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent/config.h"
#include "common/buf.h"
#include "common/util.h"
#include "sinks/avro_dir/avro_dir.h"
#include "sinks/clickhouse/clickhouse.h"
#include "sinks/iceberg/iceberg.h"
#include "sinks/s3/s3.h"
#include "sources/mysql/my_source.h"
#include "sources/postgres/pg_source.h"
#include "sources/source_conf.h"

#define CANARY "canary-Zq7-pw-3f9a"
#define MiB (UINT64_C(1) << 20)
#define GiB (UINT64_C(1) << 30)

struct fx {
	char dir[256];
	char path[512];        /* the config file */
	char err[SL_ERRLEN];
};

/* Lines 1-11; tests append from line 12 on. */
#define MINIMAL \
	"[source.shop]\n"          /* 1 */ \
	"type = postgres\n"        /* 2 */ \
	"user = sluice\n"          /* 3 */ \
	"dbname = shop\n"          /* 4 */ \
	"[destination.lake]\n"     /* 5 */ \
	"type = avro_dir\n"        /* 6 */ \
	"path = ./out\n"           /* 7 */ \
	"[stream.orders]\n"        /* 8 */ \
	"source = shop\n"          /* 9 */ \
	"destination = lake\n"     /* 10 */ \
	"tables = public.orders\n" /* 11 */

static int rm_entry(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)sb; (void)flag; (void)ftw;
	return remove(p);
}

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof *f);
	const char *tmp = getenv("TMPDIR");

	if (!f)
		return -1;
	snprintf(f->dir, sizeof f->dir, "%s/sluice-cfg-XXXXXX", tmp && *tmp ? tmp : "/tmp");
	if (!mkdtemp(f->dir)) {
		free(f);
		return -1;
	}
	snprintf(f->path, sizeof f->path, "%s/sluice.ini", f->dir);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;

	nftw(f->dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
	free(f);
	return 0;
}

/* Writes name in the fixture directory with content and mode; returns its
 * path in out. */
static void write_file(struct fx *f, const char *name, const char *content, mode_t mode,
		       char *out, size_t outlen)
{
	FILE *fp;

	snprintf(out, outlen, "%s/%s", f->dir, name);
	fp = fopen(out, "w");
	assert_non_null(fp);
	assert_int_equal(fwrite(content, 1, strlen(content), fp), strlen(content));
	assert_int_equal(fclose(fp), 0);
	assert_int_equal(chmod(out, mode), 0);
}

/* Loads ini again from memory (sl_config_load_stream, which
 * tests/fuzz/fuzz_config reads through): it must load as cfg, the
 * file's, did, or fail with the same message. */
static void same_from_memory(struct fx *f, const char *ini, const struct sl_config *cfg)
{
	char err[sizeof f->err] = "";
	struct sl_config *mem = sl_config_load_stream(fmemopen((void *)ini, strlen(ini), "r"), f->path, err,
						      sizeof err);

	if (cfg) {
		assert_non_null(mem);
		assert_int_equal(mem->nstreams, cfg->nstreams);
		assert_int_equal(mem->nsources, cfg->nsources);
		assert_int_equal(mem->ndestinations, cfg->ndestinations);
		assert_string_equal(mem->abs_path, cfg->abs_path);
	} else {
		assert_null(mem);
		assert_string_equal(err, f->err);
	}
	sl_config_free(mem);
}

static struct sl_config *load(struct fx *f, const char *ini)
{
	char p[600];
	struct sl_config *cfg;

	write_file(f, "sluice.ini", ini, 0644, p, sizeof p);
	f->err[0] = '\0';
	cfg = sl_config_load(f->path, f->err, sizeof f->err);
	assert_null(strstr(f->err, CANARY));
	same_from_memory(f, ini, cfg);
	return cfg;
}

/* Loads ini, which must succeed. */
#define LOAD_OK(f, ini) load_ok_((f), (ini), __FILE__, __LINE__)
static struct sl_config *load_ok_(struct fx *f, const char *ini, const char *file, int line)
{
	struct sl_config *cfg = load(f, ini);

	if (!cfg)
		fail_msg("%s:%d: unexpected error: %s", file, line, f->err);
	return cfg;
}

/* Loads ini, which must fail with exactly the config path followed by suffix. */
#define EXPECT_ERR(f, ini, suffix) expect_err_((f), (ini), (suffix), __FILE__, __LINE__)
static void expect_err_(struct fx *f, const char *ini, const char *suffix, const char *file,
			int line)
{
	struct sl_config *cfg = load(f, ini);
	char want[SL_ERRLEN * 2];

	if (cfg) {
		sl_config_free(cfg);
		fail_msg("%s:%d: loaded, expected the error%s", file, line, suffix);
	}
	snprintf(want, sizeof want, "%s%s", f->path, suffix);
	_assert_string_equal(f->err, want, file, line);
}

/* ---------------------------------------------------------------------- */

static void test_defaults(void **state)
{
	struct fx *f = *state;
	struct sl_config *cfg = LOAD_OK(f, MINIMAL);
	struct sl_source_config *s;
	struct sl_dest_config *d;
	const struct sl_avro_dir_conf *ad;
	struct sl_stream_config *st;

	assert_string_equal(cfg->path, f->path);
	assert_string_equal(cfg->state_dir, "./state");
	assert_int_equal(cfg->log_level, SL_LOG_INFO);
	assert_string_equal(cfg->metrics_listen, "");  /* off: two agents on one host both start */
	assert_null(cfg->alert_webhook);
	assert_int_equal(cfg->nsources, 1);
	assert_int_equal(cfg->ndestinations, 1);
	assert_int_equal(cfg->nstreams, 1);

	s = cfg->sources[0];
	assert_string_equal(s->name, "shop");
	assert_string_equal(s->ops->type, "postgres");
	assert_string_equal(s->host, "127.0.0.1");
	assert_int_equal(s->port, 5432);
	assert_string_equal(s->user, "sluice");
	assert_string_equal(sl_pg_conf(s)->dbname, "shop");
	assert_null(s->password);
	assert_null(sl_pg_conf(s)->sslmode);
	assert_null(s->sslrootcert);
	assert_int_equal(s->connect_timeout, 10);
	assert_int_equal(s->receive_timeout, 0);  /* automatic */

	d = &cfg->destinations[0];
	assert_string_equal(d->name, "lake");
	assert_string_equal(d->type, "avro_dir");
	assert_ptr_equal(d->ops, &sl_avro_dir_ops);
	ad = d->conf;
	assert_non_null(ad);
	assert_string_equal(ad->path, "./out");
	assert_int_equal(ad->codec, SL_CODEC_DEFLATE);
	assert_int_equal(ad->compression_level, 1);
	assert_int_equal(ad->max_file_bytes, 64 * MiB);
	assert_int_equal(ad->max_file_seconds, 60);

	st = &cfg->streams[0];
	assert_string_equal(st->name, "orders");
	assert_string_equal(st->source_name, "shop");
	assert_string_equal(st->destination_name, "lake");
	assert_ptr_equal(st->source, s);
	assert_ptr_equal(st->destination, d);
	assert_non_null(st->tables);
	assert_string_equal(st->tables[0], "public.orders");
	assert_null(st->tables[1]);
	assert_non_null(st->exclude_tables);
	assert_null(st->exclude_tables[0]);
	assert_true(st->backfill);
	assert_int_equal(st->write_mode, SL_WRITE_APPEND);
	assert_string_equal(st->slot, "sluice_orders");
	assert_string_equal(st->publication, "sluice_orders");
	assert_int_equal(st->lag_warn_bytes, 256 * MiB);
	assert_int_equal(st->lag_critical_bytes, 2 * GiB);
	assert_int_equal(st->retained_wal_warn_bytes, 1 * GiB);
	assert_int_equal(st->freshness_warn_seconds, 300);

	assert_ptr_equal(sl_config_stream(cfg, "orders"), st);
	assert_null(sl_config_stream(cfg, "nope"));
	sl_config_free(cfg);
}

/* The DESIGN example, comments included, plus MySQL.  (Its ClickHouse
 * destination is gone: no sink implements clickhouse yet, see
 * test_dest_types; nor merge mode, see test_merge_refused.) */
static void test_full(void **state)
{
	struct fx *f = *state;
	struct sl_config *cfg;
	struct sl_stream_config *st;
	const struct sl_avro_dir_conf *ad;

	setenv("SLUICE_TEST_PW", CANARY, 1);
	cfg = LOAD_OK(f,
		"; sluice example\n"
		"# another comment\n"
		"[agent]\n"
		"state_dir = ./state2              ; checkpoints and spill files\n"
		"log_level = warning\n"
		"metrics_listen = [::1]:9999  ; comment\n"
		"alert_webhook = https://hooks.example.com/x?a=1\n"
		"\n"
		"[source.shop]                    ; a connection profile for a source\n"
		"type = postgres                  ; postgres | mysql\n"
		"host = db.example.com\n"
		"port = 6432\n"
		"user = sluice\n"
		"dbname = shop                    ; postgres\n"
		"password_env = SLUICE_TEST_PW\n"
		"sslmode = verify-full\n"
		"sslrootcert = /etc/ssl/root.crt\n"
		"connect_timeout = 2m\n"
		"receive_timeout = 90\n"
		"; mysql: server_id = 4242, ssl_mode = ...\n"
		"[source.maria]\n"
		"type = mysql\n"
		"user = repl\n"
		"server_id = 4294967295\n"
		"ssl_mode = verify_identity\n"
		"[destination.lake]\n"
		"type = avro_dir\n"
		"path = ./out\n"
		"codec = snappy\n"
		"compression_level = 9\n"
		"max_file_bytes = 1 GiB\n"
		"max_file_seconds = 1h\n"
		"[destination.warehouse]\n"
		"type = avro_dir\n"
		"path = /data/warehouse\n"
		"codec = null\n"
		"[stream.orders]\n"
		"source = shop\n"
		"destination = lake\n"
		"tables = public.orders, public.customer*   ; include list; globs allowed\n"
		"exclude_tables = public.customer_tmp ,public.customer_old\n"
		"backfill = none\n"
		"write_mode = append\n"
		"slot = sluice_o\n"
		"publication = pub_orders\n"
		"lag_warn_bytes = 1KB\n"
		"lag_critical_bytes = 0\n"
		"retained_wal_warn_bytes = 3tb\n"
		"freshness_warn_seconds = 0\n"
		"[stream.binlog-1]\n"
		"source = maria\n"
		"destination = warehouse\n"
		"tables = shop.*\n");

	assert_string_equal(cfg->state_dir, "./state2");
	assert_int_equal(cfg->log_level, SL_LOG_WARN);
	assert_string_equal(cfg->metrics_listen, "[::1]:9999");
	assert_string_equal(cfg->alert_webhook, "https://hooks.example.com/x?a=1");

	assert_int_equal(cfg->nsources, 2);
	assert_string_equal(cfg->sources[0]->host, "db.example.com");
	assert_int_equal(cfg->sources[0]->port, 6432);
	assert_string_equal(cfg->sources[0]->password, CANARY);
	assert_string_equal(sl_pg_conf(cfg->sources[0])->sslmode, "verify-full");
	assert_string_equal(cfg->sources[0]->sslrootcert, "/etc/ssl/root.crt");
	assert_int_equal(cfg->sources[0]->connect_timeout, 120);
	assert_int_equal(cfg->sources[0]->receive_timeout, 90);
	assert_string_equal(cfg->sources[1]->name, "maria");
	assert_string_equal(cfg->sources[1]->ops->type, "mysql");
	assert_int_equal(cfg->sources[1]->port, 3306);
	assert_string_equal(cfg->sources[1]->host, "127.0.0.1");
	assert_int_equal(sl_my_conf(cfg->sources[1])->server_id, UINT32_MAX);
	assert_string_equal(sl_my_conf(cfg->sources[1])->ssl_mode, "verify_identity");

	ad = cfg->destinations[0].conf;
	assert_int_equal(ad->codec, SL_CODEC_SNAPPY);
	assert_int_equal(ad->compression_level, 9);
	assert_int_equal(ad->max_file_bytes, GiB);
	assert_int_equal(ad->max_file_seconds, 3600);
	ad = cfg->destinations[1].conf;
	assert_string_equal(cfg->destinations[1].name, "warehouse");
	assert_string_equal(cfg->destinations[1].type, "avro_dir");
	assert_string_equal(ad->path, "/data/warehouse");
	assert_int_equal(ad->codec, SL_CODEC_NULL);
	assert_int_equal(ad->compression_level, 1);
	assert_int_equal(ad->max_file_bytes, 64 * MiB);
	assert_int_equal(ad->max_file_seconds, 60);

	st = sl_config_stream(cfg, "orders");
	assert_non_null(st);
	assert_string_equal(st->tables[0], "public.orders");
	assert_string_equal(st->tables[1], "public.customer*");
	assert_null(st->tables[2]);
	assert_string_equal(st->exclude_tables[0], "public.customer_tmp");
	assert_string_equal(st->exclude_tables[1], "public.customer_old");
	assert_null(st->exclude_tables[2]);
	assert_false(st->backfill);
	assert_int_equal(st->write_mode, SL_WRITE_APPEND);
	assert_string_equal(st->slot, "sluice_o");
	assert_string_equal(st->publication, "pub_orders");
	assert_int_equal(st->lag_warn_bytes, 1024);
	assert_int_equal(st->lag_critical_bytes, 0);
	assert_int_equal(st->retained_wal_warn_bytes, 3 * GiB * 1024);
	assert_int_equal(st->freshness_warn_seconds, 0);

	st = sl_config_stream(cfg, "binlog-1");
	assert_non_null(st);
	assert_ptr_equal(st->source, cfg->sources[1]);
	assert_ptr_equal(st->destination, &cfg->destinations[1]);
	assert_null(st->slot);          /* MySQL streams have no slot */
	assert_null(st->publication);
	sl_config_free(cfg);
	unsetenv("SLUICE_TEST_PW");
}

/* Random mutations of a valid config (bytes changed, lines cut, stray
 * brackets, equals signs, quotes and control bytes): the loader either
 * loads it or fails with a message that starts with the file's path, and
 * never crashes, leaks (run under --enable-sanitizers) or prints a secret. */
static void test_mutations(void **state)
{
	static const char base[] =
		"[agent]\n"
		"state_dir = ./state\n"
		"log_level = info\n"
		"metrics_listen = 127.0.0.1:9187\n"
		"queue_bytes = 8MB\n"
		"[source.shop]\n"
		"type = postgres\n"
		"host = db.example.com\n"
		"port = 6432\n"
		"user = sluice\n"
		"dbname = shop\n"
		"password_env = SLUICE_TEST_PW\n"
		"connect_timeout = 2m\n"
		"[source.maria]\n"
		"type = mysql\n"
		"user = repl\n"
		"server_id = 4242\n"
		"[destination.lake]\n"
		"type = avro_dir\n"
		"path = ./out\n"
		"codec = deflate\n"
		"max_file_bytes = 64MB\n"
		"max_file_seconds = 60\n"
		"[destination.wh]\n"
		"type = clickhouse\n"
		"url = http://127.0.0.1:8123\n"
		"database = shop\n"
		"batch_rows = 1000\n"
		"batch_seconds = 0.5\n"
		"[stream.orders]\n"
		"source = shop\n"
		"destination = lake\n"
		"tables = public.orders, public.customer*\n"
		"exclude_tables = public.customer_tmp\n"
		"lag_warn_bytes = 1GB\n"
		"[stream.binlog]\n"
		"source = maria\n"
		"destination = wh\n"
		"tables = shop.*\n"
		"write_mode = merge\n";
	static const char stray[] = "[]=;#\"'\\ \t\n\r\x01\xff*.,-0123456789kMGs";
	struct fx *f = *state;
	unsigned seed = 4242;
	char text[sizeof base + 64];
	int loaded = 0, refused = 0;

	setenv("SLUICE_TEST_PW", CANARY, 1);
	for (int iter = 0; iter < 3000; iter++) {
		size_t n = sizeof base - 1;
		struct sl_config *cfg;
		memcpy(text, base, n);
		for (int k = 1 + (int)(rand_r(&seed) % 4); k > 0 && n > 0; k--) {
			size_t at = (size_t)rand_r(&seed) % n;
			switch (rand_r(&seed) % 4) {
			case 0: text[at] = (char)(1 + rand_r(&seed) % 255); break;          /* any byte but NUL */
			case 1: text[at] = stray[(size_t)rand_r(&seed) % (sizeof stray - 1)]; break;
			case 2: memmove(text + at, text + at + 1, n - at - 1); n--; break;   /* a byte out */
			default: n = at; break;                                              /* cut short */
			}
		}
		text[n] = '\0';
		cfg = load(f, text);   /* asserts that the canary is not in the message */
		if (cfg) {
			loaded++;
			sl_config_free(cfg);
			continue;
		}
		refused++;
		if (strncmp(f->err, f->path, strlen(f->path)) != 0)
			fail_msg("mutation %d: the message does not name the file: \"%s\"\n--- config ---\n%s", iter,
				 f->err, text);
	}
	unsetenv("SLUICE_TEST_PW");
	/* both outcomes happen, or the mutations test nothing */
	assert_true(loaded > 100);
	assert_true(refused > 100);
}

static void test_unknown_key(void **state)
{
	struct fx *f = *state;

	EXPECT_ERR(f, MINIMAL "colour = blue\n", ":12: unknown key \"colour\" in [stream.orders]");
	EXPECT_ERR(f, "[agent]\nHost = x\n", ":2: unknown key \"Host\" in [agent]");
	EXPECT_ERR(f, MINIMAL "[source.x]\npassword = " CANARY "\n",
		   ":13: unknown key \"password\" in [source.x]: put the password in an environment "
		   "variable or a file, and name it with password_env or password_file");
	EXPECT_ERR(f, "log_level = info\n" MINIMAL, ":1: key \"log_level\" outside of any section");
}

static void test_duplicate_key(void **state)
{
	struct fx *f = *state;

	EXPECT_ERR(f, MINIMAL "\n; again\ntables = public.x\n",
		   ":14: duplicate key \"tables\" in [stream.orders] (first on line 11)");
}

static void test_missing_required(void **state)
{
	struct fx *f = *state;

	EXPECT_ERR(f,
		   "[source.shop]\ntype = postgres\ndbname = shop\n"
		   "[destination.lake]\ntype = avro_dir\npath = ./out\n"
		   "[stream.orders]\nsource = shop\ndestination = lake\ntables = public.orders\n",
		   ":1: missing required key \"user\" in [source.shop]");
	EXPECT_ERR(f, MINIMAL "[source.db2]\ntype = postgres\nuser = u\n",
		   ":12: missing required key \"dbname\" in [source.db2] (required for type postgres)");
	EXPECT_ERR(f, MINIMAL "[source.m]\ntype = mysql\nuser = u\n",
		   ":12: missing required key \"server_id\" in [source.m] (required for type mysql)");
	EXPECT_ERR(f, MINIMAL "[source.m]\nuser = u\n",
		   ":12: missing required key \"type\" in [source.m]");
	EXPECT_ERR(f, MINIMAL "[destination.w]\ntype = avro_dir\n",
		   ":12: missing required key \"path\" in [destination.w] (required for type avro_dir)");
	EXPECT_ERR(f, MINIMAL "[destination.w]\npath = /x\n",
		   ":12: missing required key \"type\" in [destination.w]");
	EXPECT_ERR(f, MINIMAL "[stream.x]\nsource = shop\ndestination = lake\n",
		   ":12: missing required key \"tables\" in [stream.x]");
	EXPECT_ERR(f, MINIMAL "[stream.x]\n", ":12: missing required key \"source\" in [stream.x]");
	EXPECT_ERR(f, MINIMAL "[stream.x]\nsource = shop\n",
		   ":12: missing required key \"destination\" in [stream.x]");
	EXPECT_ERR(f, MINIMAL "[stream.x]\nsource = shop\ndestination = lake\ntables =\n",
		   ":15: bad value \"\" for key \"tables\": must not be empty");
	EXPECT_ERR(f, MINIMAL "[agent]\nstate_dir =\n",
		   ":13: bad value \"\" for key \"state_dir\": must not be empty");
}

static void test_bad_enum(void **state)
{
	struct fx *f = *state;

	EXPECT_ERR(f, "[agent]\nlog_level = loud\n" MINIMAL,
		   ":2: bad value \"loud\" for key \"log_level\": must be one of debug, info, warn, "
		   "warning, error");
	EXPECT_ERR(f, MINIMAL "codec = zstd\n",
		   ":12: unknown key \"codec\" in [stream.orders]");
	EXPECT_ERR(f, "[destination.d]\ntype = avro_dir\npath = /x\ncodec = zstd\n" MINIMAL,
		   ":4: bad value \"zstd\" for key \"codec\": must be one of null, deflate, snappy, "
		   "zstandard");
	EXPECT_ERR(f, "[source.s]\ntype = oracle\n" MINIMAL,
		   ":2: bad value \"oracle\" for key \"type\": must be one of postgres, mysql");
	EXPECT_ERR(f, MINIMAL "backfill = yes\n",
		   ":12: bad value \"yes\" for key \"backfill\": must be one of auto, none");
	EXPECT_ERR(f, MINIMAL "write_mode = Append\n",
		   ":12: bad value \"Append\" for key \"write_mode\": must be one of append, merge");
	EXPECT_ERR(f, "[source.s]\ntype = postgres\nuser = u\ndbname = d\nsslmode = verify_full\n"
		   MINIMAL,
		   ":5: bad value \"verify_full\" for key \"sslmode\": must be one of disable, allow, "
		   "prefer, require, verify-ca, verify-full");
}

static void test_integers(void **state)
{
	struct fx *f = *state;
	const char *src = "[source.s]\ntype = postgres\nuser = u\ndbname = d\n";  /* lines 1-4 */
	char ini[1024];

	snprintf(ini, sizeof ini, "%sport = 70000\n%s", src, MINIMAL);
	EXPECT_ERR(f, ini, ":5: bad value \"70000\" for key \"port\": must be from 1 to 65535");
	snprintf(ini, sizeof ini, "%sport = 0\n%s", src, MINIMAL);
	EXPECT_ERR(f, ini, ":5: bad value \"0\" for key \"port\": must be from 1 to 65535");
	snprintf(ini, sizeof ini, "%sport = -1\n%s", src, MINIMAL);
	EXPECT_ERR(f, ini, ":5: bad value \"-1\" for key \"port\": must be from 1 to 65535");
	snprintf(ini, sizeof ini, "%sport = 99999999999999999999999\n%s", src, MINIMAL);
	EXPECT_ERR(f, ini, ":5: bad value \"99999999999999999999999\" for key \"port\": must be "
		   "from 1 to 65535");
	snprintf(ini, sizeof ini, "%sport = 54x\n%s", src, MINIMAL);
	EXPECT_ERR(f, ini, ":5: bad value \"54x\" for key \"port\": not an integer");
	snprintf(ini, sizeof ini, "%sport = +5\n%s", src, MINIMAL);
	EXPECT_ERR(f, ini, ":5: bad value \"+5\" for key \"port\": not an integer");
	snprintf(ini, sizeof ini, "%sconnect_timeout = 3601\n%s", src, MINIMAL);
	EXPECT_ERR(f, ini, ":5: bad value \"3601\" for key \"connect_timeout\": must be from 1 to "
		   "3600 seconds");
	EXPECT_ERR(f, "[source.m]\ntype = mysql\nuser = u\nserver_id = 4294967296\n" MINIMAL,
		   ":4: bad value \"4294967296\" for key \"server_id\": must be from 1 to 4294967295");
	/* compression_level: the key's bounds are zstandard's, deflate's are checked after */
	EXPECT_ERR(f, "[destination.d]\ntype = avro_dir\npath = /x\ncompression_level = 23\n" MINIMAL,
		   ":4: bad value \"23\" for key \"compression_level\": must be from 1 to 22");
	EXPECT_ERR(f, "[destination.d]\ntype = avro_dir\npath = /x\ncompression_level = 10\n" MINIMAL,
		   ":4: compression_level 10 is not in 1-9 (deflate)");
}

static void test_byte_sizes(void **state)
{
	struct fx *f = *state;
	static const struct { const char *text; uint64_t want; } ok[] = {
		{ "4096", 4096 }, { "2kb", 2048 }, { "2 KiB", 2048 }, { "64MB", 64 * MiB },
		{ "64 mb", 64 * MiB }, { "1GiB", GiB }, { "2gb", 2 * GiB }, { "1TB", 1024 * GiB },
		{ "5000B", 5000 }, { "16777215TB", UINT64_C(16777215) << 40 },
	};
	static const char *const bad[] = { "12XB", "1.5GB", "GB", "-1", " 1", "1 G", "0x400", "1KB2" };
	char ini[1024];
	struct sl_config *cfg;

	for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
		snprintf(ini, sizeof ini, "%smax_file_bytes = %s\n%s",
			 "[destination.d]\ntype = avro_dir\npath = /x\n", ok[i].text, MINIMAL);
		cfg = LOAD_OK(f, ini);
		assert_int_equal(((struct sl_avro_dir_conf *)cfg->destinations[0].conf)->max_file_bytes,
				 ok[i].want);
		sl_config_free(cfg);
	}
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		snprintf(ini, sizeof ini, "%smax_file_bytes = ${B}\n%s",
			 "[destination.d]\ntype = avro_dir\npath = /x\n", MINIMAL);
		setenv("B", bad[i], 1);
		EXPECT_ERR(f, ini, ":4: bad value \"${B}\" for key \"max_file_bytes\": not a byte size "
			   "(a number of bytes, with an optional suffix KB, MB, GB, TB, KiB, MiB, GiB "
			   "or TiB)");
	}
	unsetenv("B");
	EXPECT_ERR(f, "[destination.d]\ntype = avro_dir\npath = /x\nmax_file_bytes = 12XB\n" MINIMAL,
		   ":4: bad value \"12XB\" for key \"max_file_bytes\": not a byte size (a number of "
		   "bytes, with an optional suffix KB, MB, GB, TB, KiB, MiB, GiB or TiB)");
	EXPECT_ERR(f, "[destination.d]\ntype = avro_dir\npath = /x\nmax_file_bytes = 1023\n" MINIMAL,
		   ":4: bad value \"1023\" for key \"max_file_bytes\": must be at least 1KB");
	EXPECT_ERR(f, MINIMAL "lag_warn_bytes = 16777216TB\n",
		   ":12: bad value \"16777216TB\" for key \"lag_warn_bytes\": too large (must be less "
		   "than 16EiB)");
	EXPECT_ERR(f, MINIMAL "lag_warn_bytes = 99999999999999999999\n",
		   ":12: bad value \"99999999999999999999\" for key \"lag_warn_bytes\": too large "
		   "(must be less than 16EiB)");
	EXPECT_ERR(f, MINIMAL "lag_warn_bytes = 2GB\nlag_critical_bytes = 1GB\n",
		   ":13: lag_critical_bytes is lower than lag_warn_bytes in [stream.orders]");
	cfg = LOAD_OK(f, MINIMAL "lag_warn_bytes = 2GB\nlag_critical_bytes = 0\n");
	sl_config_free(cfg);
}

static void test_durations(void **state)
{
	struct fx *f = *state;
	struct sl_config *cfg;

	cfg = LOAD_OK(f, MINIMAL "freshness_warn_seconds = 5m\n");
	assert_int_equal(cfg->streams[0].freshness_warn_seconds, 300);
	sl_config_free(cfg);
	cfg = LOAD_OK(f, MINIMAL "freshness_warn_seconds = 2 H\n");
	assert_int_equal(cfg->streams[0].freshness_warn_seconds, 7200);
	sl_config_free(cfg);
	cfg = LOAD_OK(f, MINIMAL "freshness_warn_seconds = 45s\n");
	assert_int_equal(cfg->streams[0].freshness_warn_seconds, 45);
	sl_config_free(cfg);
	EXPECT_ERR(f, MINIMAL "freshness_warn_seconds = 5 minutes\n",
		   ":12: bad value \"5 minutes\" for key \"freshness_warn_seconds\": not a duration "
		   "(seconds, or a number with the suffix s, m or h)");
	EXPECT_ERR(f, "[destination.d]\ntype = avro_dir\npath = /x\nmax_file_seconds = 25h\n" MINIMAL,
		   ":4: bad value \"25h\" for key \"max_file_seconds\": must be from 1 to 86400 seconds");
	EXPECT_ERR(f, "[destination.d]\ntype = avro_dir\npath = /x\nmax_file_seconds = 0\n" MINIMAL,
		   ":4: bad value \"0\" for key \"max_file_seconds\": must be from 1 to 86400 seconds");
	EXPECT_ERR(f, MINIMAL "freshness_warn_seconds = 18446744073709551615h\n",
		   ":12: bad value \"18446744073709551615h\" for key \"freshness_warn_seconds\": must "
		   "be from 0 to 31536000 seconds");
}

static void test_sections(void **state)
{
	struct fx *f = *state;
	char ini[1024], want[512];
	const char *name64 = "a123456789b123456789c123456789d123456789e123456789f123456789-_Z9";
	struct sl_config *cfg;

	EXPECT_ERR(f, MINIMAL "[sources.x]\n",
		   ":12: unknown section [sources.x] (expected [agent], [source.NAME], "
		   "[destination.NAME] or [stream.NAME])");
	EXPECT_ERR(f, "[agent.x]\n" MINIMAL,
		   ":1: unknown section [agent.x] (expected [agent], [source.NAME], "
		   "[destination.NAME] or [stream.NAME])");
	EXPECT_ERR(f, "[stream]\n" MINIMAL,
		   ":1: unknown section [stream] (expected [agent], [source.NAME], "
		   "[destination.NAME] or [stream.NAME])");
	EXPECT_ERR(f, "[source.]\n" MINIMAL,
		   ":1: bad section name [source.]: NAME must be 1-64 characters of A-Z, a-z, 0-9, _ "
		   "and -");
	EXPECT_ERR(f, "[source.a.b]\n" MINIMAL,
		   ":1: bad section name [source.a.b]: NAME must be 1-64 characters of A-Z, a-z, "
		   "0-9, _ and -");
	snprintf(ini, sizeof ini, "[stream.%sx]\n%s", name64, MINIMAL);
	snprintf(want, sizeof want, ":1: bad section name [stream.%sx]: NAME must be 1-64 "
		 "characters of A-Z, a-z, 0-9, _ and -", name64);
	EXPECT_ERR(f, ini, want);
	EXPECT_ERR(f, MINIMAL "[agent]\n[source.shop]\n",
		   ":13: section [source.shop] repeated (first on line 1)");
	EXPECT_ERR(f, MINIMAL "[agent] x\n", ":12: syntax error: text after the section header");
	EXPECT_ERR(f, MINIMAL "[agent\n", ":12: syntax error: section header without \"]\"");

	/* A 64-character name (longer than libinih's section buffer was), with
	 * blanks and a comment around it. */
	snprintf(ini, sizeof ini,
		 "[source.%s]\ntype = postgres\nuser = u\ndbname = d\n"
		 "[destination.%s]\ntype = avro_dir\npath = /x\n"
		 "  [ stream.%s ]  ; comment\nsource = %s\ndestination = %s\ntables = a.b\n"
		 "slot = s64\n",
		 name64, name64, name64, name64, name64);
	cfg = LOAD_OK(f, ini);
	assert_string_equal(cfg->sources[0]->name, name64);
	assert_string_equal(cfg->destinations[0].name, name64);
	assert_ptr_equal(sl_config_stream(cfg, name64)->source, cfg->sources[0]);
	sl_config_free(cfg);

	EXPECT_ERR(f, "[source.shop]\ntype = postgres\nuser = u\ndbname = d\n",
		   ": no [stream.NAME] section");
}

static void test_references(void **state)
{
	struct fx *f = *state;
	struct sl_config *cfg;

	EXPECT_ERR(f,
		   "[source.shop]\ntype = postgres\nuser = sluice\ndbname = shop\n"
		   "[destination.lake]\ntype = avro_dir\npath = ./out\n"
		   "[stream.orders]\nsource = nope\ndestination = lake\ntables = public.orders\n",
		   ":9: unknown source \"nope\" in [stream.orders] (there is no [source.nope] section)");
	EXPECT_ERR(f,
		   "[source.shop]\ntype = postgres\nuser = sluice\ndbname = shop\n"
		   "[destination.lake]\ntype = avro_dir\npath = ./out\n"
		   "[stream.orders]\nsource = shop\ndestination = lakes\ntables = public.orders\n",
		   ":10: unknown destination \"lakes\" in [stream.orders] (there is no "
		   "[destination.lakes] section)");
	/* Sections may come in any order. */
	cfg = LOAD_OK(f, "[stream.s]\nsource = a\ndestination = b\ntables = x.y\n"
		      "[destination.b]\ntype = avro_dir\npath = /x\n"
		      "[source.a]\ntype = postgres\nuser = u\ndbname = d\n");
	assert_ptr_equal(cfg->streams[0].source, cfg->sources[0]);
	sl_config_free(cfg);
}

static void test_not_applicable(void **state)
{
	struct fx *f = *state;

	EXPECT_ERR(f, "[source.s]\ntype = postgres\nuser = u\ndbname = d\nserver_id = 5\n" MINIMAL,
		   ":5: key \"server_id\" applies only to type mysql, not to postgres");
	EXPECT_ERR(f, "[source.s]\ntype = mysql\nuser = u\nserver_id = 5\ndbname = d\n" MINIMAL,
		   ":5: key \"dbname\" applies only to type postgres, not to mysql");
	/* A key of another sink's table. */
	EXPECT_ERR(f, "[destination.d]\ntype = avro_dir\npath = /x\nurl = http://h\n" MINIMAL,
		   ":4: key \"url\" applies only to type clickhouse, not to avro_dir");
	EXPECT_ERR(f, MINIMAL "[source.m]\ntype = mysql\nuser = u\nserver_id = 1\n"
		   "[stream.m]\nsource = m\ndestination = lake\ntables = a.b\nslot = s\n",
		   ":20: key \"slot\" applies only to streams from a postgres source, and source \"m\" "
		   "is mysql");
	EXPECT_ERR(f, MINIMAL "[source.m]\ntype = mysql\nuser = u\nserver_id = 1\n"
		   "[stream.m]\nsource = m\ndestination = lake\ntables = a.b\nkey_columns = a.b.c\n",
		   ":20: key \"key_columns\" applies only to streams from a postgres source, and source \"m\" "
		   "is mysql");
}

static void test_slots(void **state)
{
	struct fx *f = *state;
	struct sl_config *cfg;

	cfg = LOAD_OK(f, MINIMAL "[stream.my-stream_2]\nsource = shop\ndestination = lake\n"
		      "tables = a.b\n");
	assert_string_equal(cfg->streams[1].slot, "sluice_my_stream_2");
	assert_string_equal(cfg->streams[1].publication, "sluice_my_stream_2");
	sl_config_free(cfg);

	cfg = LOAD_OK(f, MINIMAL "[stream.o2]\nsource = shop\ndestination = lake\ntables = a.b\n"
		      "slot = custom_1\n");
	assert_string_equal(cfg->streams[1].slot, "custom_1");
	assert_string_equal(cfg->streams[1].publication, "custom_1");
	sl_config_free(cfg);

	EXPECT_ERR(f, MINIMAL "[stream.o2]\nsource = shop\ndestination = lake\ntables = a.b\n"
		   "slot = sluice_orders\n",
		   ":16: slot \"sluice_orders\" of [stream.o2] is already used by [stream.orders] "
		   "(line 8) on source \"shop\": each stream needs its own slot");
	/* "a-b" and "a_b" have the same default slot. */
	EXPECT_ERR(f, MINIMAL "[stream.a-b]\nsource = shop\ndestination = lake\ntables = a.b\n"
		   "[stream.a_b]\nsource = shop\ndestination = lake\ntables = a.b\n",
		   ":16: slot \"sluice_a_b\" of [stream.a_b] is already used by [stream.a-b] "
		   "(line 12) on source \"shop\": each stream needs its own slot");
	/* The same slot name on another source is fine. */
	cfg = LOAD_OK(f, MINIMAL "[source.shop2]\ntype = postgres\nuser = u\ndbname = d\n"
		      "[stream.o2]\nsource = shop2\ndestination = lake\ntables = a.b\n"
		      "slot = sluice_orders\n");
	sl_config_free(cfg);
	EXPECT_ERR(f, MINIMAL "slot = Sluice\n",
		   ":12: bad value \"Sluice\" for key \"slot\": a replication slot name is 1-63 "
		   "characters of a-z, 0-9 and _");
	/* Default slot names are lowercased; a name too long for a slot is refused. */
	cfg = LOAD_OK(f, MINIMAL "[stream.Orders-EU]\nsource = shop\ndestination = lake\ntables = a.b\n");
	assert_string_equal(cfg->streams[1].slot, "sluice_orders_eu");
	assert_string_equal(cfg->streams[1].publication, "sluice_orders_eu");
	sl_config_free(cfg);
	EXPECT_ERR(f, MINIMAL "[stream.a123456789a123456789a123456789a123456789a123456789a123456789]\n"
		   "source = shop\ndestination = lake\ntables = a.b\n",
		   ":12: the default slot name \"sluice_a123456789a123456789a123456789a123456789a123456789a123456789\" "
		   "of [stream.a123456789a123456789a123456789a123456789a123456789a123456789] is not a valid "
		   "replication slot name (1-63 characters of a-z, 0-9 and _): set slot explicitly");
}

static void test_lists(void **state)
{
	struct fx *f = *state;
	struct sl_config *cfg;

	cfg = LOAD_OK(f, MINIMAL "exclude_tables =   a.b ,c.*,\td.e  \n");
	assert_string_equal(cfg->streams[0].exclude_tables[0], "a.b");
	assert_string_equal(cfg->streams[0].exclude_tables[1], "c.*");
	assert_string_equal(cfg->streams[0].exclude_tables[2], "d.e");
	assert_null(cfg->streams[0].exclude_tables[3]);
	sl_config_free(cfg);
	EXPECT_ERR(f, MINIMAL "exclude_tables = a.b,,c.d\n",
		   ":12: bad value \"a.b,,c.d\" for key \"exclude_tables\": empty entry in the list");
	EXPECT_ERR(f, MINIMAL "exclude_tables = a.b,\n",
		   ":12: bad value \"a.b,\" for key \"exclude_tables\": empty entry in the list");
	EXPECT_ERR(f, MINIMAL "exclude_tables = a.b, orders\n",
		   ":12: bad value \"a.b, orders\" for key \"exclude_tables\": each entry must be "
		   "SCHEMA.TABLE (globs allowed, such as public.orders or shop.*) (\"orders\" is not)");
	EXPECT_ERR(f, MINIMAL "exclude_tables = public.\n",
		   ":12: bad value \"public.\" for key \"exclude_tables\": each entry must be "
		   "SCHEMA.TABLE (globs allowed, such as public.orders or shop.*) (\"public.\" is not)");
}

static void test_agent_values(void **state)
{
	struct fx *f = *state;
	struct sl_config *cfg;

	cfg = LOAD_OK(f, "[agent]\nmetrics_listen =\nalert_webhook =\n" MINIMAL);
	assert_string_equal(cfg->metrics_listen, "");
	assert_null(cfg->alert_webhook);
	sl_config_free(cfg);
	cfg = LOAD_OK(f, "[agent]\nmetrics_listen = 0.0.0.0:80\n" MINIMAL);
	assert_string_equal(cfg->metrics_listen, "0.0.0.0:80");
	sl_config_free(cfg);
	EXPECT_ERR(f, "[agent]\nmetrics_listen = localhost\n" MINIMAL,
		   ":2: bad value \"localhost\" for key \"metrics_listen\": must be HOST:PORT (such as "
		   "127.0.0.1:9187 or [::1]:9187), or empty to disable");
	EXPECT_ERR(f, "[agent]\nmetrics_listen = :9187\n" MINIMAL,
		   ":2: bad value \":9187\" for key \"metrics_listen\": must be HOST:PORT (such as "
		   "127.0.0.1:9187 or [::1]:9187), or empty to disable");
	EXPECT_ERR(f, "[agent]\nmetrics_listen = ::1:9187\n" MINIMAL,
		   ":2: bad value \"::1:9187\" for key \"metrics_listen\": must be HOST:PORT (such as "
		   "127.0.0.1:9187 or [::1]:9187), or empty to disable");
	EXPECT_ERR(f, "[agent]\nmetrics_listen = h:65536\n" MINIMAL,
		   ":2: bad value \"h:65536\" for key \"metrics_listen\": must be HOST:PORT (such as "
		   "127.0.0.1:9187 or [::1]:9187), or empty to disable");
	EXPECT_ERR(f, "[agent]\nalert_webhook = ftp://x\n" MINIMAL,
		   ":2: bad value \"ftp://x\" for key \"alert_webhook\": must be an http:// or "
		   "https:// URL");
	EXPECT_ERR(f, "[agent]\nalert_webhook = http://\n" MINIMAL,
		   ":2: bad value \"http://\" for key \"alert_webhook\": must be an http:// or "
		   "https:// URL with a host");
}

static void test_env(void **state)
{
	struct fx *f = *state;
	struct sl_config *cfg;

	setenv("SLUICE_TEST_HOST", "db.internal", 1);
	setenv("SLUICE_TEST_EMPTY", "", 1);
	unsetenv("SLUICE_TEST_UNSET");
	cfg = LOAD_OK(f, "[agent]\nstate_dir = /var/${SLUICE_TEST_HOST}/$${x}$$${SLUICE_TEST_EMPTY}\n"
		      "[source.shop]\ntype = postgres\nuser = u\ndbname = d\n"
		      "host = ${SLUICE_TEST_HOST}\n"
		      "[destination.lake]\ntype = avro_dir\npath = ./out\n"
		      "[stream.orders]\nsource = shop\ndestination = lake\ntables = public.orders\n");
	assert_string_equal(cfg->state_dir, "/var/db.internal/${x}$");
	assert_string_equal(cfg->sources[0]->host, "db.internal");
	sl_config_free(cfg);

	EXPECT_ERR(f, MINIMAL "[agent]\nstate_dir = /x/${SLUICE_TEST_UNSET}/y\n",
		   ":13: environment variable \"SLUICE_TEST_UNSET\" is not set (used by key "
		   "\"state_dir\")");
	EXPECT_ERR(f, MINIMAL "[agent]\nstate_dir = $HOME/x\n",
		   ":13: stray \"$\" in the value of key \"state_dir\": write ${NAME} for an "
		   "environment variable or $$ for a literal $");
	EXPECT_ERR(f, MINIMAL "[agent]\nstate_dir = ${HOME\n",
		   ":13: bad variable reference in the value of key \"state_dir\": expected ${NAME}, "
		   "NAME made of A-Z, a-z, 0-9 and _");
	EXPECT_ERR(f, MINIMAL "[agent]\nstate_dir = ${}\n",
		   ":13: bad variable reference in the value of key \"state_dir\": expected ${NAME}, "
		   "NAME made of A-Z, a-z, 0-9 and _");
	EXPECT_ERR(f, MINIMAL "[agent]\nstate_dir = ${SLUICE_TEST_EMPTY}\n",
		   ":13: bad value \"${SLUICE_TEST_EMPTY}\" for key \"state_dir\": must not be empty");
	unsetenv("SLUICE_TEST_HOST");
	unsetenv("SLUICE_TEST_EMPTY");
}

static void test_password_env(void **state)
{
	struct fx *f = *state;
	struct sl_config *cfg;
	const char *src = "[source.s]\ntype = postgres\nuser = u\ndbname = d\n";  /* lines 1-4 */
	char ini[1024];

	setenv("SLUICE_TEST_PW", CANARY, 1);
	unsetenv("SLUICE_TEST_NOPW");
	snprintf(ini, sizeof ini, "%spassword_env = SLUICE_TEST_PW\n%s", src, MINIMAL);
	cfg = LOAD_OK(f, ini);
	assert_string_equal(cfg->sources[0]->password, CANARY);
	assert_null(cfg->sources[1]->password);
	sl_config_free(cfg);

	snprintf(ini, sizeof ini, "%spassword_env = SLUICE_TEST_NOPW\n%s", src, MINIMAL);
	EXPECT_ERR(f, ini, ":5: environment variable \"SLUICE_TEST_NOPW\" named by password_env is "
		   "not set");
	setenv("SLUICE_TEST_NOPW", "", 1);
	EXPECT_ERR(f, ini, ":5: environment variable \"SLUICE_TEST_NOPW\" named by password_env is "
		   "empty");
	unsetenv("SLUICE_TEST_NOPW");
	snprintf(ini, sizeof ini, "%spassword_env = SLUICE_TEST_PW\npassword_file = /nonexistent\n%s",
		 src, MINIMAL);
	EXPECT_ERR(f, ini, ":6: password_env and password_file cannot both be set in [source.s] "
		   "(password_env on line 5)");
	snprintf(ini, sizeof ini, "%spassword_file = /nonexistent\npassword_env = SLUICE_TEST_PW\n%s",
		 src, MINIMAL);
	EXPECT_ERR(f, ini, ":6: password_file and password_env cannot both be set in [source.s] "
		   "(password_file on line 5)");
	/* avro_dir has no password; clickhouse has. */
	EXPECT_ERR(f, "[destination.d]\ntype = avro_dir\npath = /x\npassword_env = SLUICE_TEST_PW\n"
		   MINIMAL, ":4: key \"password_env\" applies only to type clickhouse, not to avro_dir");

	/* The canary, through ${NAME}, in a value that is refused, must not leak. */
	snprintf(ini, sizeof ini, "%spassword_env = ${SLUICE_TEST_PW}X\n%s", src, MINIMAL);
	EXPECT_ERR(f, ini, ":5: environment variable \"${SLUICE_TEST_PW}X\" named by password_env "
		   "is not set");
	snprintf(ini, sizeof ini, "%spassword_file = /nonexistent/${SLUICE_TEST_PW}\n%s", src,
		 MINIMAL);
	EXPECT_ERR(f, ini, ":5: cannot open password_file \"/nonexistent/${SLUICE_TEST_PW}\": No "
		   "such file or directory");
	setenv("SLUICE_TEST_SLOT", "canaryslot", 1);
	EXPECT_ERR(f, MINIMAL "slot = sluice_${SLUICE_TEST_SLOT}\n[stream.o2]\nsource = shop\n"
		   "destination = lake\ntables = a.b\nslot = sluice_${SLUICE_TEST_SLOT}\n",
		   ":17: slot \"sluice_${SLUICE_TEST_SLOT}\" of [stream.o2] is already used by "
		   "[stream.orders] (line 12) on source \"shop\": each stream needs its own slot");
	unsetenv("SLUICE_TEST_SLOT");
	snprintf(ini, sizeof ini, "%sport = ${SLUICE_TEST_PW}\n%s", src, MINIMAL);
	EXPECT_ERR(f, ini, ":5: bad value \"${SLUICE_TEST_PW}\" for key \"port\": not an integer");
	snprintf(ini, sizeof ini, "%sconnect_timeout = 1${SLUICE_TEST_PW}\n%s", src, MINIMAL);
	EXPECT_ERR(f, ini, ":5: bad value \"1${SLUICE_TEST_PW}\" for key \"connect_timeout\": not a "
		   "duration (seconds, or a number with the suffix s, m or h)");
	EXPECT_ERR(f, MINIMAL "exclude_tables = a.b, ${SLUICE_TEST_PW}\n",
		   ":12: bad value \"a.b, ${SLUICE_TEST_PW}\" for key \"exclude_tables\": each entry "
		   "must be SCHEMA.TABLE (globs allowed, such as public.orders or shop.*)");
	EXPECT_ERR(f, MINIMAL "[agent]\nlog_level = ${SLUICE_TEST_PW}\n",
		   ":13: bad value \"${SLUICE_TEST_PW}\" for key \"log_level\": must be one of debug, "
		   "info, warn, warning, error");
	unsetenv("SLUICE_TEST_PW");
}

static void test_password_file(void **state)
{
	struct fx *f = *state;
	struct sl_config *cfg;
	char pw[600], ini[2048], want[2048];

	write_file(f, "pw", CANARY "\n", 0644, pw, sizeof pw);
	/* (On a clickhouse destination before; sources have password_file too.) */
	snprintf(ini, sizeof ini, "[source.s]\ntype = postgres\nuser = u\ndbname = d\n"
		 "password_file = %s\n%s", pw, MINIMAL);
	snprintf(want, sizeof want, ":5: password_file \"%s\" has mode 0644, which gives group or "
		 "others access; it must be readable by its owner only: run chmod 600 \"%s\"", pw, pw);
	EXPECT_ERR(f, ini, want);
	assert_int_equal(chmod(pw, 0640), 0);
	snprintf(want, sizeof want, ":5: password_file \"%s\" has mode 0640, which gives group or "
		 "others access; it must be readable by its owner only: run chmod 600 \"%s\"", pw, pw);
	EXPECT_ERR(f, ini, want);

	assert_int_equal(chmod(pw, 0600), 0);
	cfg = LOAD_OK(f, ini);
	assert_string_equal(cfg->sources[0]->password, CANARY);  /* one newline stripped */
	sl_config_free(cfg);
	assert_int_equal(chmod(pw, 0400), 0);
	cfg = LOAD_OK(f, ini);
	assert_string_equal(cfg->sources[0]->password, CANARY);
	sl_config_free(cfg);

	/* Only one newline goes; no newline at all is fine too. */
	write_file(f, "pw", CANARY "\n\n", 0600, pw, sizeof pw);
	cfg = LOAD_OK(f, ini);
	assert_string_equal(cfg->sources[0]->password, CANARY "\n");
	sl_config_free(cfg);
	write_file(f, "pw", CANARY "\r\n", 0600, pw, sizeof pw);
	cfg = LOAD_OK(f, ini);
	assert_string_equal(cfg->sources[0]->password, CANARY);
	sl_config_free(cfg);
	write_file(f, "pw", CANARY, 0600, pw, sizeof pw);
	cfg = LOAD_OK(f, ini);
	assert_string_equal(cfg->sources[0]->password, CANARY);
	sl_config_free(cfg);

	write_file(f, "pw", "\n", 0600, pw, sizeof pw);
	snprintf(want, sizeof want, ":5: password_file \"%s\" is empty", pw);
	EXPECT_ERR(f, ini, want);

	if (geteuid() == 0) {  /* only root can give the file away */
		write_file(f, "pw", CANARY "\n", 0600, pw, sizeof pw);
		assert_int_equal(chown(pw, 12345, (gid_t)-1), 0);
		snprintf(want, sizeof want, ":5: password_file \"%s\" is owned by uid 12345, not by "
			 "the user sluice runs as (uid 0)", pw);
		EXPECT_ERR(f, ini, want);
	}

	snprintf(ini, sizeof ini, "[source.s]\ntype = postgres\nuser = u\ndbname = d\n"
		 "password_file = %s/missing\n%s", f->dir, MINIMAL);
	snprintf(want, sizeof want, ":5: cannot open password_file \"%s/missing\": No such file or "
		 "directory", f->dir);
	EXPECT_ERR(f, ini, want);
	snprintf(ini, sizeof ini, "[source.s]\ntype = postgres\nuser = u\ndbname = d\n"
		 "password_file = %s\n%s", f->dir, MINIMAL);
	assert_int_equal(chmod(f->dir, 0700), 0);
	snprintf(want, sizeof want, ":5: password_file \"%s\" is not a regular file", f->dir);
	EXPECT_ERR(f, ini, want);
}

/* Lines of any length (libinih, used before, refused more than 197
 * characters): nothing is split, cut or refused for its length. */
static void test_long_lines(void **state)
{
	struct fx *f = *state;
	const size_t big = 1 << 20;
	char line[2048], ini[4096];
	struct sl_buf b;
	struct sl_config *cfg;
	char *mb;
	int n;

	/* A tables list of 12 long names (over 200 characters) keeps all 12. */
	n = snprintf(line, sizeof line, "tables = ");
	for (int i = 0; i < 12; i++)
		n += snprintf(line + n, sizeof line - (size_t)n, "%sanalytics_%02d.customer_order_line_%02d",
			      i ? ", " : "", i, i);
	assert_true(n > 200);
	snprintf(ini, sizeof ini, "[source.shop]\ntype = postgres\nuser = sluice\ndbname = shop\n"
		 "[destination.lake]\ntype = avro_dir\npath = ./out\n"
		 "[stream.orders]\nsource = shop\ndestination = lake\n%s\n", line);
	cfg = LOAD_OK(f, ini);
	for (int i = 0; i < 12; i++) {
		char want[64];
		snprintf(want, sizeof want, "analytics_%02d.customer_order_line_%02d", i, i);
		assert_non_null(cfg->streams[0].tables[i]);
		assert_string_equal(cfg->streams[0].tables[i], want);
	}
	assert_null(cfg->streams[0].tables[12]);
	sl_config_free(cfg);

	/* Where the old limit was (197 characters) and past it, with CR LF: one
	 * entry, whole.  The next line is a line of its own (line 13). */
	n = snprintf(line, sizeof line, "exclude_tables = public.");
	memset(line + n, 'x', 400 - (size_t)n);
	line[400] = '\0';
	snprintf(ini, sizeof ini, MINIMAL "%s\r\n", line);
	cfg = LOAD_OK(f, ini);
	assert_int_equal(strlen(cfg->streams[0].exclude_tables[0]), 400 - 17);
	assert_null(cfg->streams[0].exclude_tables[1]);
	sl_config_free(cfg);
	snprintf(ini, sizeof ini, MINIMAL "%s\nlog_level = x\n", line);
	EXPECT_ERR(f, ini, ":13: unknown key \"log_level\" in [stream.orders]");
	/* Also as the last line, without a newline. */
	snprintf(ini, sizeof ini, MINIMAL "%s", line);
	cfg = LOAD_OK(f, ini);
	assert_int_equal(strlen(cfg->streams[0].exclude_tables[0]), 400 - 17);
	sl_config_free(cfg);
	/* A long comment line is a comment. */
	line[0] = ';';
	snprintf(ini, sizeof ini, "%s\n" MINIMAL, line);
	cfg = LOAD_OK(f, ini);
	assert_null(cfg->streams[0].exclude_tables[0]);
	sl_config_free(cfg);

	/* A 1 MB value, with CR LF and an inline comment after it. */
	assert_non_null(mb = malloc(big + 1));
	mb[0] = '/';
	memset(mb + 1, 'd', big - 1);
	mb[big] = '\0';
	sl_buf_init(&b, 0);
	sl_buf_printf(&b, "[agent]\r\nstate_dir = %s ; comment\r\nlog_level = debug\r\n%s", mb,
		      MINIMAL);
	assert_false(sl_buf_failed(&b));
	cfg = LOAD_OK(f, b.data);
	assert_int_equal(strlen(cfg->state_dir), big);
	assert_memory_equal(cfg->state_dir, mb, big);
	assert_int_equal(cfg->log_level, SL_LOG_DEBUG);
	sl_config_free(cfg);
	/* An error on the line after it names the right line. */
	sl_buf_reset(&b);
	sl_buf_printf(&b, "[agent]\nstate_dir = %s\nlog_level = loud\n%s", mb, MINIMAL);
	EXPECT_ERR(f, b.data, ":3: bad value \"loud\" for key \"log_level\": must be one of debug, "
		   "info, warn, warning, error");
	sl_buf_free(&b);
	free(mb);
}

static void test_syntax(void **state)
{
	struct fx *f = *state;
	struct sl_config *cfg;
	char ini[512];

	EXPECT_ERR(f, MINIMAL "this is not a key\n",
		   ":12: syntax error: expected \"[section]\", \"key = value\" or a comment");
	/* The first error wins: a later line is not even read. */
	EXPECT_ERR(f, MINIMAL "oops\ncolour = blue\n",
		   ":12: syntax error: expected \"[section]\", \"key = value\" or a comment");
	EXPECT_ERR(f, MINIMAL "= value\n",
		   ":12: syntax error: expected \"[section]\", \"key = value\" or a comment");
	/* An indented line is not a continuation: it is parsed on its own. */
	EXPECT_ERR(f, MINIMAL "exclude_tables = a.b,\n    c.d\n",
		   ":13: syntax error: expected \"[section]\", \"key = value\" or a comment");
	cfg = LOAD_OK(f, MINIMAL "    exclude_tables = a.b\n\t  backfill = none\n");
	assert_string_equal(cfg->streams[0].exclude_tables[0], "a.b");
	assert_false(cfg->streams[0].backfill);
	sl_config_free(cfg);
	/* Inline comments need whitespace before ';'; "#" starts comments only
	 * at the start of a line; "key: value" is accepted as well. */
	cfg = LOAD_OK(f, "[agent]\nstate_dir = /a;b#c ; comment\nlog_level: debug\n"
		      "  # indented comment\n" MINIMAL);
	assert_string_equal(cfg->state_dir, "/a;b#c");
	assert_int_equal(cfg->log_level, SL_LOG_DEBUG);
	sl_config_free(cfg);
	/* A byte order mark and CR LF line ends. */
	cfg = LOAD_OK(f, "\xEF\xBB\xBF[agent]\r\nlog_level = error\r\n" MINIMAL);
	assert_int_equal(cfg->log_level, SL_LOG_ERROR);
	sl_config_free(cfg);
	/* A NUL byte. */
	memcpy(ini, "[agent]\nlog_level = e\0rror\n", 27);
	{
		char want[700];
		FILE *fp = fopen(f->path, "w");

		assert_non_null(fp);
		fwrite(ini, 1, 27, fp);
		fputs(MINIMAL, fp);
		fclose(fp);
		cfg = sl_config_load(f->path, f->err, sizeof f->err);
		assert_null(cfg);
		snprintf(want, sizeof want, "%s:2: NUL byte in line", f->path);
		assert_string_equal(f->err, want);
	}
}

static void test_open_errors(void **state)
{
	struct fx *f = *state;
	char path[600], want[700];

	snprintf(path, sizeof path, "%s/missing.ini", f->dir);
	assert_null(sl_config_load(path, f->err, sizeof f->err));
	snprintf(want, sizeof want, "%s: cannot open: No such file or directory", path);
	assert_string_equal(f->err, want);
	assert_null(sl_config_load(f->dir, f->err, sizeof f->err));
	snprintf(want, sizeof want, "%s: cannot read: Is a directory", f->dir);
	assert_string_equal(f->err, want);
	/* A small error buffer truncates, and NULL is allowed. */
	assert_null(sl_config_load(path, f->err, 8));
	assert_int_equal(strlen(f->err), 7);
	assert_null(sl_config_load(path, NULL, 0));
	EXPECT_ERR(f, "", ": no [stream.NAME] section");
	sl_config_free(NULL);
}

/* The avro_dir keys come from the sink's own table (sl_avro_dir_ops.keys),
 * with their defaults and bounds, into its own struct. */
static void test_avro_dir_keys(void **state)
{
	struct fx *f = *state;
	const char *d = "[destination.d]\ntype = avro_dir\npath = /x\n";  /* lines 1-3 */
	const struct sl_avro_dir_conf *ad;
	struct sl_config *cfg;
	char ini[1024];

	assert_string_equal(sl_avro_dir_ops.type, "avro_dir");
	assert_int_equal(sl_avro_dir_ops.nkeys, 8);
	assert_int_equal(sl_avro_dir_ops.conf_size, sizeof(struct sl_avro_dir_conf));
	assert_int_equal(sl_avro_dir_ops.caps & SL_SINK_CAP_MERGE, SL_SINK_CAP_MERGE);

	/* Defaults; the type line may come after the keys. */
	cfg = LOAD_OK(f, "[destination.d]\npath = /x\ntype = avro_dir\n" MINIMAL);
	assert_ptr_equal(cfg->destinations[0].ops, &sl_avro_dir_ops);
	ad = cfg->destinations[0].conf;
	assert_string_equal(ad->path, "/x");
	assert_int_equal(ad->codec, SL_CODEC_DEFLATE);
	assert_int_equal(ad->compression_level, 1);
	assert_int_equal(ad->compression_threads, 1);
	assert_int_equal(ad->max_file_bytes, 64 * MiB);
	assert_int_equal(ad->max_file_seconds, 60);
	assert_int_equal(ad->compact_after_files, 64);
	assert_int_equal(ad->sync, SL_AVRO_DIR_FSYNC);
	sl_config_free(cfg);

	/* The bounds, inclusive. */
	snprintf(ini, sizeof ini, "%scodec = null\ncompression_level = 9\nmax_file_bytes = 1KB\n"
		 "max_file_seconds = 86400\ncompression_threads = 64\nsync = syncfs\n%s", d, MINIMAL);
	cfg = LOAD_OK(f, ini);
	ad = cfg->destinations[0].conf;
	assert_int_equal(ad->sync, SL_AVRO_DIR_SYNCFS);
	assert_int_equal(ad->codec, SL_CODEC_NULL);
	assert_int_equal(ad->compression_level, 9);
	assert_int_equal(ad->compression_threads, 64);
	assert_int_equal(ad->max_file_bytes, 1024);
	assert_int_equal(ad->max_file_seconds, 86400);
	sl_config_free(cfg);
	snprintf(ini, sizeof ini, "%scompression_level = 1\nmax_file_seconds = 1\n"
		 "max_file_bytes = 16777215TB\ncompression_threads = 0\n%s", d, MINIMAL);
	cfg = LOAD_OK(f, ini);
	ad = cfg->destinations[0].conf;
	assert_int_equal(ad->compression_level, 1);
	assert_int_equal(ad->compression_threads, 0);
	assert_int_equal(ad->max_file_seconds, 1);
	assert_int_equal(ad->max_file_bytes, UINT64_C(16777215) << 40);
	sl_config_free(cfg);

	snprintf(ini, sizeof ini, "%scompression_level = 0\n%s", d, MINIMAL);
	EXPECT_ERR(f, ini, ":4: bad value \"0\" for key \"compression_level\": must be from 1 to 22");
	snprintf(ini, sizeof ini, "%scodec = zstandard\ncompression_level = 22\n%s", d, MINIMAL);
	cfg = LOAD_OK(f, ini);
	ad = cfg->destinations[0].conf;
	assert_int_equal(ad->codec, SL_CODEC_ZSTANDARD);
	assert_int_equal(ad->compression_level, 22);
	sl_config_free(cfg);
	snprintf(ini, sizeof ini, "%scompression_threads = 65\n%s", d, MINIMAL);
	EXPECT_ERR(f, ini, ":4: bad value \"65\" for key \"compression_threads\": must be from 0 to 64");
	snprintf(ini, sizeof ini, "%smax_file_bytes = 1 KB\nmax_file_seconds = 86401\n%s", d, MINIMAL);
	EXPECT_ERR(f, ini, ":5: bad value \"86401\" for key \"max_file_seconds\": must be from 1 to "
		   "86400 seconds");
	snprintf(ini, sizeof ini, "%spath =\n%s", "[destination.d]\ntype = avro_dir\n", MINIMAL);
	EXPECT_ERR(f, ini, ":3: bad value \"\" for key \"path\": must not be empty");
	snprintf(ini, sizeof ini, "%spath = /y\n%s", d, MINIMAL);
	EXPECT_ERR(f, ini, ":4: duplicate key \"path\" in [destination.d] (first on line 3)");
}

/* A destination type no sink implements is refused where it is written,
 * with the list of types there are. */
static void test_dest_types(void **state)
{
	struct fx *f = *state;

	EXPECT_ERR(f, MINIMAL "[destination.w]\ntype = gcs\n",
		   ":13: bad value \"gcs\" for key \"type\": no sink implements this "
		   "destination type (supported: avro_dir, clickhouse, iceberg, s3)");
	EXPECT_ERR(f, "[destination.w]\n\ntype = Avro_Dir\n" MINIMAL,
		   ":3: bad value \"Avro_Dir\" for key \"type\": no sink implements this "
		   "destination type (supported: avro_dir, clickhouse, iceberg, s3)");
	EXPECT_ERR(f, "[destination.w]\ntype =\n" MINIMAL,
		   ":2: bad value \"\" for key \"type\": must not be empty");
	/* Quoted as written, not as expanded. */
	setenv("SLUICE_TEST_TYPE", "gcs", 1);
	EXPECT_ERR(f, "[destination.w]\ntype = ${SLUICE_TEST_TYPE}\n" MINIMAL,
		   ":2: bad value \"${SLUICE_TEST_TYPE}\" for key \"type\": no sink implements "
		   "this destination type (supported: avro_dir, clickhouse, iceberg, s3)");
	unsetenv("SLUICE_TEST_TYPE");
}

/* [destination.NAME] with type = clickhouse: its keys, defaults, bounds and
 * secrets; merge mode allowed. */
static void test_clickhouse_keys(void **state)
{
	struct fx *f = *state;
	struct sl_config *cfg;
	const struct sl_ch_conf *c;
	const char *wh = "[destination.wh]\ntype = clickhouse\n";   /* lines 12, 13 */
	char ini[2048];

	snprintf(ini, sizeof ini, MINIMAL "%surl = http://127.0.0.1:8123\n", wh);
	cfg = LOAD_OK(f, ini);
	assert_ptr_equal(cfg->destinations[1].ops, &sl_clickhouse_ops);
	c = cfg->destinations[1].conf;
	assert_string_equal(c->url, "http://127.0.0.1:8123");
	assert_string_equal(c->database, "default");
	assert_string_equal(c->user, "default");
	assert_null(c->password);
	assert_int_equal(c->batch_rows, 100000);
	assert_int_equal(c->batch_bytes, 16 << 20);
	assert_int_equal(c->batch_ms, 500);
	assert_int_equal(c->timeout, 60);
	assert_int_equal(c->connect_timeout, 10);
	assert_int_equal(c->retry_seconds, 60);
	assert_null(c->ca_file);
	assert_int_equal(c->tls_verify, 1);
	assert_int_equal(c->compression, SL_CH_GZIP_AUTO);
	assert_null(c->dead_letter_path);
	assert_null(c->cluster);
	assert_string_equal(c->replica_path, "/clickhouse/tables/{shard}/{database}/{table}");
	assert_int_equal(c->distributed, 0);
	sl_config_free(cfg);

	snprintf(ini, sizeof ini, MINIMAL "%surl = http://h\ncluster = main\nreplica_path = /ch/{database}.{table}\n",
		 wh);
	cfg = LOAD_OK(f, ini);
	c = cfg->destinations[1].conf;
	assert_string_equal(c->cluster, "main");
	assert_string_equal(c->replica_path, "/ch/{database}.{table}");
	sl_config_free(cfg);
	snprintf(ini, sizeof ini, MINIMAL "%surl = http://h\ncluster = main\ndistributed = true\n", wh);
	cfg = LOAD_OK(f, ini);
	c = cfg->destinations[1].conf;
	assert_int_equal(c->distributed, 1);
	sl_config_free(cfg);
	/* a Distributed table needs the cluster its local tables are made on */
	snprintf(ini, sizeof ini, MINIMAL "%surl = http://h\ndistributed = yes\n", wh);
	EXPECT_ERR(f, ini, ":15: distributed = true needs cluster (the Distributed table and the local tables it "
		   "reads are made ON CLUSTER)");
	snprintf(ini, sizeof ini, MINIMAL "%surl = http://h\ndistributed = false\n", wh);
	sl_config_free(LOAD_OK(f, ini));
	snprintf(ini, sizeof ini, MINIMAL "%surl = http://h\ncluster = main\nreplica_path = /ch/{shard}\n", wh);
	EXPECT_ERR(f, ini, ":16: bad value \"/ch/{shard}\" for key \"replica_path\": must contain {table} (each "
		   "table needs a path of its own)");

	setenv("SLUICE_TEST_CHPW", CANARY, 1);
	snprintf(ini, sizeof ini, MINIMAL "%surl = https://ch.example.com:8443/ch/\ndatabase = replica\n"
		 "user = writer\npassword_env = SLUICE_TEST_CHPW\nbatch_rows = 5000\nbatch_bytes = 4MB\n"
		 "batch_seconds = 250ms\ntimeout = 2m\nconnect_timeout = 3\nretry_seconds = 0\n"
		 "ca_file = /etc/ssl/ch.pem\ntls_verify = false\ncompression = gzip\n"
		 "dead_letter_path = /var/lib/sluice/dead.jsonl\n"
		 "[stream.m]\nsource = shop\ndestination = wh\ntables = a.b\nwrite_mode = merge\n", wh);
	cfg = LOAD_OK(f, ini);
	unsetenv("SLUICE_TEST_CHPW");
	c = cfg->destinations[1].conf;
	assert_string_equal(c->url, "https://ch.example.com:8443/ch/");
	assert_string_equal(c->database, "replica");
	assert_string_equal(c->user, "writer");
	assert_string_equal(c->password, CANARY);
	assert_int_equal(c->batch_rows, 5000);
	assert_int_equal(c->batch_bytes, 4 << 20);
	assert_int_equal(c->batch_ms, 250);
	assert_int_equal(c->timeout, 120);
	assert_int_equal(c->retry_seconds, 0);
	assert_string_equal(c->ca_file, "/etc/ssl/ch.pem");
	assert_int_equal(c->tls_verify, 0);
	assert_int_equal(c->compression, SL_CH_GZIP);
	assert_string_equal(c->dead_letter_path, "/var/lib/sluice/dead.jsonl");
	assert_int_equal(cfg->streams[1].write_mode, SL_WRITE_MERGE);
	sl_config_free(cfg);

	snprintf(ini, sizeof ini, MINIMAL "%s", wh);
	EXPECT_ERR(f, ini, ":12: missing required key \"url\" in [destination.wh] (required for type clickhouse)");
	snprintf(ini, sizeof ini, MINIMAL "%surl = ftp://h\n", wh);
	EXPECT_ERR(f, ini, ":14: bad value \"ftp://h\" for key \"url\": must be an http:// or https:// URL");
	snprintf(ini, sizeof ini, MINIMAL "%surl = http://u:secret@h:8123\n", wh);
	EXPECT_ERR(f, ini, ":14: bad value \"http://u:secret@h:8123\" for key \"url\": must not hold a user or "
		   "password (use user, and password_env or password_file)");
	snprintf(ini, sizeof ini, MINIMAL "%surl = http://h/?database=x\n", wh);
	EXPECT_ERR(f, ini, ":14: bad value \"http://h/?database=x\" for key \"url\": must not have a query "
		   "string or a fragment");
	snprintf(ini, sizeof ini, MINIMAL "%surl = http://h\nbatch_seconds = 0.001\n", wh);
	EXPECT_ERR(f, ini, ":15: bad value \"0.001\" for key \"batch_seconds\": must be from 0.01 to 3600 seconds");
	snprintf(ini, sizeof ini, MINIMAL "%surl = http://h\nbatch_rows = 2000000\n", wh);
	EXPECT_ERR(f, ini, ":15: bad value \"2000000\" for key \"batch_rows\": must be from 1 to 1000000");
	snprintf(ini, sizeof ini, MINIMAL "%surl = http://h\ncompression = zstd\n", wh);
	EXPECT_ERR(f, ini, ":15: bad value \"zstd\" for key \"compression\": must be one of auto, gzip, none");
	snprintf(ini, sizeof ini, MINIMAL "%surl = http://h\npassword = x\n", wh);
	EXPECT_ERR(f, ini, ":15: unknown key \"password\" in [destination.wh]: put the password in an environment "
		   "variable or a file, and name it with password_env or password_file");
	snprintf(ini, sizeof ini, MINIMAL "%surl = http://h\npath = /x\n", wh);
	EXPECT_ERR(f, ini, ":15: key \"path\" applies only to type avro_dir or iceberg, not to clickhouse");
}

/* write_mode = merge loads for avro_dir, which declares SL_SINK_CAP_MERGE
 * (a sink without it is refused on the write_mode line, agent/config.c). */
static void test_merge_refused(void **state)
{
	struct fx *f = *state;
	struct sl_config *cfg;

	cfg = LOAD_OK(f, MINIMAL "backfill = none\nwrite_mode = merge\n");
	assert_int_equal(cfg->streams[0].write_mode, SL_WRITE_MERGE);
	sl_config_free(cfg);
	cfg = LOAD_OK(f, MINIMAL "write_mode = append\n");
	assert_int_equal(cfg->streams[0].write_mode, SL_WRITE_APPEND);
	sl_config_free(cfg);
}

/* [destination.NAME] with type = s3: its keys, defaults, credentials from
 * the environment or from files (never quoted), and the rules across keys. */
#define S3_HEAD MINIMAL "[destination.b]\ntype = s3\nbucket = lake\n"  /* lines 12-14 */
static void test_s3_keys(void **state)
{
	struct fx *f = *state;
	struct sl_config *cfg;
	const struct sl_s3_conf *c;
	char ini[2048], want[2048], kf[600], sf[600];

	setenv("SLUICE_TEST_KEY_ID", "AKIDEXAMPLE", 1);
	setenv("SLUICE_TEST_SECRET", CANARY, 1);
	cfg = LOAD_OK(f, S3_HEAD "endpoint = http://127.0.0.1:9000\nprefix = cdc/x\npath_style = true\n"
		      "access_key_id_env = SLUICE_TEST_KEY_ID\nsecret_access_key_env = SLUICE_TEST_SECRET\n"
		      "part_size = 5MB\ncodec = snappy\nmax_file_seconds = 5\n");
	assert_int_equal(cfg->ndestinations, 2);
	assert_string_equal(cfg->destinations[1].type, "s3");
	assert_ptr_equal(cfg->destinations[1].ops, &sl_s3_ops);
	c = cfg->destinations[1].conf;
	assert_string_equal(c->endpoint, "http://127.0.0.1:9000");
	assert_string_equal(c->bucket, "lake");
	assert_string_equal(c->prefix, "cdc/x");
	assert_string_equal(c->region, "us-east-1");
	assert_true(c->path_style);
	assert_true(c->tls_verify);
	assert_null(c->session_token);
	assert_null(c->ca_file);
	assert_null(c->spool_dir);
	assert_string_equal(c->access_key_id, "AKIDEXAMPLE");
	assert_string_equal(c->secret_access_key, CANARY);
	assert_int_equal(c->part_size, 5 << 20);
	assert_int_equal(c->codec, SL_CODEC_SNAPPY);
	assert_int_equal(c->max_file_bytes, 64 << 20);
	assert_int_equal(c->max_file_seconds, 5);
	sl_config_free(cfg);
	/* defaults */
	cfg = LOAD_OK(f, S3_HEAD "access_key_id_env = SLUICE_TEST_KEY_ID\nsecret_access_key_env = SLUICE_TEST_SECRET\n");
	c = cfg->destinations[1].conf;
	assert_null(c->endpoint);
	assert_null(c->prefix);
	assert_false(c->path_style);
	assert_int_equal(c->part_size, 16 << 20);
	assert_int_equal(c->codec, SL_CODEC_DEFLATE);
	sl_config_free(cfg);
	cfg = LOAD_OK(f, S3_HEAD "access_key_id_env = SLUICE_TEST_KEY_ID\nsecret_access_key_env = SLUICE_TEST_SECRET\n"
		      "codec = zstandard\ncompression_level = 19\n");
	c = cfg->destinations[1].conf;
	assert_int_equal(c->codec, SL_CODEC_ZSTANDARD);
	assert_int_equal(c->compression_level, 19);
	sl_config_free(cfg);
	EXPECT_ERR(f, S3_HEAD "access_key_id_env = SLUICE_TEST_KEY_ID\nsecret_access_key_env = SLUICE_TEST_SECRET\n"
		   "compression_level = 12\n", ":17: compression_level 12 is not in 1-9 (deflate)");

	EXPECT_ERR(f, S3_HEAD "secret_access_key_env = SLUICE_TEST_SECRET\n",
		   ":12: [destination.b] needs access_key_id_env or access_key_id_file (required for type s3)");
	EXPECT_ERR(f, S3_HEAD "access_key_id_env = SLUICE_TEST_KEY_ID\n",
		   ":12: [destination.b] needs secret_access_key_env or secret_access_key_file (required for type s3)");
	EXPECT_ERR(f, MINIMAL "[destination.b]\ntype = s3\naccess_key_id_env = SLUICE_TEST_KEY_ID\n"
		   "secret_access_key_env = SLUICE_TEST_SECRET\n",
		   ":12: missing required key \"bucket\" in [destination.b] (required for type s3)");
	EXPECT_ERR(f, S3_HEAD "access_key_id_env = SLUICE_TEST_KEY_ID\nsecret_access_key_env = SLUICE_TEST_SECRET\n"
		   "part_size = 4MB\n", ":17: bad value \"4MB\" for key \"part_size\": must be from 5MB to 5GB");
	EXPECT_ERR(f, S3_HEAD "access_key_id_env = SLUICE_TEST_KEY_ID\nsecret_access_key_env = SLUICE_TEST_SECRET\n"
		   "path_style = maybe\n",
		   ":17: bad value \"maybe\" for key \"path_style\": must be one of true, false, yes, no, on, off");
	EXPECT_ERR(f, S3_HEAD "access_key_id_env = SLUICE_TEST_KEY_ID\nsecret_access_key_env = SLUICE_TEST_SECRET\n"
		   "endpoint = 127.0.0.1:9000\n",
		   ":17: bad value \"127.0.0.1:9000\" for key \"endpoint\": not an http:// or https:// URL");
	EXPECT_ERR(f, S3_HEAD "access_key_id_env = SLUICE_TEST_KEY_ID\nsecret_access_key_env = SLUICE_TEST_SECRET\n"
		   "max_file_bytes = 1TB\npart_size = 5MB\n",
		   ":18: max_file_bytes would need more than 10000 parts of part_size: raise part_size");
	EXPECT_ERR(f, S3_HEAD "access_key_id_env = SLUICE_TEST_KEY_ID\nsecret_access_key_env = SLUICE_TEST_SECRET\n"
		   "path = /x\n", ":17: key \"path\" applies only to type avro_dir or iceberg, not to s3");
	unsetenv("SLUICE_TEST_SECRET");
	EXPECT_ERR(f, S3_HEAD "access_key_id_env = SLUICE_TEST_KEY_ID\nsecret_access_key_env = SLUICE_TEST_SECRET\n",
		   ":16: environment variable \"SLUICE_TEST_SECRET\" named by secret_access_key_env is not set");

	/* from files: mode 0600 or less, and never quoted */
	write_file(f, "key_id", "AKIDFILE\n", 0600, kf, sizeof kf);
	write_file(f, "secret", CANARY "\n", 0644, sf, sizeof sf);
	snprintf(ini, sizeof ini, S3_HEAD "access_key_id_file = %s\nsecret_access_key_file = %s\n", kf, sf);
	snprintf(want, sizeof want, ":16: secret_access_key_file \"%s\" has mode 0644, which gives group or "
		 "others access; it must be readable by its owner only: run chmod 600 \"%s\"", sf, sf);
	EXPECT_ERR(f, ini, want);
	assert_int_equal(chmod(sf, 0600), 0);
	cfg = LOAD_OK(f, ini);
	c = cfg->destinations[1].conf;
	assert_string_equal(c->access_key_id, "AKIDFILE");
	assert_string_equal(c->secret_access_key, CANARY);
	sl_config_free(cfg);
	snprintf(ini, sizeof ini, S3_HEAD "access_key_id_file = %s\naccess_key_id_env = SLUICE_TEST_KEY_ID\n"
		 "secret_access_key_file = %s\n", kf, sf);
	EXPECT_ERR(f, ini, ":16: access_key_id_file and access_key_id_env cannot both be set in [destination.b] "
		   "(access_key_id_file on line 15)");
	unsetenv("SLUICE_TEST_KEY_ID");
}

/* type = iceberg: path, or bucket with the keys and rules of type = s3. */
#define ICE_HEAD MINIMAL "[destination.b]\ntype = iceberg\n"  /* lines 12-13 */
#define ICE_KEYS "access_key_id_env = SLUICE_TEST_KEY_ID\nsecret_access_key_env = SLUICE_TEST_SECRET\n"
static void test_iceberg_keys(void **state)
{
	struct fx *f = *state;
	struct sl_config *cfg;
	const struct sl_iceberg_conf *c;

	setenv("SLUICE_TEST_KEY_ID", "AKIDEXAMPLE", 1);
	setenv("SLUICE_TEST_SECRET", CANARY, 1);
	cfg = LOAD_OK(f, ICE_HEAD "bucket = lake\nprefix = wh\nendpoint = http://127.0.0.1:9000\npath_style = on\n"
		      ICE_KEYS "max_file_seconds = 5\n");
	c = cfg->destinations[1].conf;
	assert_null(c->path);
	assert_string_equal(c->s3.bucket, "lake");
	assert_string_equal(c->s3.prefix, "wh");
	assert_string_equal(c->s3.endpoint, "http://127.0.0.1:9000");
	assert_string_equal(c->s3.region, "us-east-1");
	assert_true(c->s3.path_style);
	assert_true(c->s3.tls_verify);
	assert_string_equal(c->s3.access_key_id, "AKIDEXAMPLE");
	assert_string_equal(c->s3.secret_access_key, CANARY);
	assert_int_equal(c->max_file_seconds, 5);
	sl_config_free(cfg);
	cfg = LOAD_OK(f, ICE_HEAD "path = /data/wh\n");
	c = cfg->destinations[1].conf;
	assert_string_equal(c->path, "/data/wh");
	assert_null(c->s3.bucket);
	assert_int_equal(c->compression_threads, 1);   /* as avro_dir's: blocks compressed beside the encoding */
	sl_config_free(cfg);
	cfg = LOAD_OK(f, ICE_HEAD "path = /data/wh\ncompression_threads = 0\n");
	assert_int_equal(((const struct sl_iceberg_conf *)cfg->destinations[1].conf)->compression_threads, 0);
	sl_config_free(cfg);
	EXPECT_ERR(f, ICE_HEAD "path = /x\ncompression_threads = 65\n",
		   ":15: bad value \"65\" for key \"compression_threads\": must be from 0 to 64");

	EXPECT_ERR(f, ICE_HEAD "codec = null\n",
		   ":12: [destination.b] needs path (a folder) or bucket (an S3 bucket) (required for type iceberg)");
	EXPECT_ERR(f, ICE_HEAD "path = /x\nbucket = lake\n",
		   ":15: path and bucket cannot both be set in [destination.b] (path on line 14)");
	EXPECT_ERR(f, ICE_HEAD "path = /x\nprefix = wh\n",
		   ":15: key \"prefix\" is for a bucket, and [destination.b] has path: give either path or bucket");
	EXPECT_ERR(f, ICE_HEAD "bucket = lake\nsecret_access_key_env = SLUICE_TEST_SECRET\n",
		   ":12: [destination.b] needs access_key_id_env or access_key_id_file (required for type iceberg)");
	EXPECT_ERR(f, ICE_HEAD "bucket = lake\n" ICE_KEYS "endpoint = 127.0.0.1:9000\n",
		   ":17: bad value \"127.0.0.1:9000\" for key \"endpoint\": not an http:// or https:// URL");
	unsetenv("SLUICE_TEST_KEY_ID");
	unsetenv("SLUICE_TEST_SECRET");
}

/* exclude_columns, mask_columns and the mask key (issue 25). */
/* Every source's key table: rows the engine can apply, shared rows that
 * fill the shared profile, the source's own rows inside its own struct, and
 * the shared defaults that differ by source. */
static void test_source_key_tables(void **state)
{
	static const char *const shared[] = { "host", "port", "user", "password_env", "password_file", "sslrootcert",
					      "connect_timeout", "receive_timeout", "backfill_connections",
					      "backfill_chunk_rows", NULL };
	(void)state;

	assert_int_equal(sl_source_count(), 2);
	assert_ptr_equal(sl_source_lookup("postgres"), &sl_pg_source_ops);
	assert_ptr_equal(sl_source_lookup("mysql"), &sl_my_source_ops);
	assert_null(sl_source_lookup("oracle"));
	for (size_t i = 0; i < sl_source_count(); i++) {
		const struct sl_source_ops *ops = sl_source_at(i);
		assert_non_null(ops->keys);
		assert_true(ops->nkeys > 0 && ops->nkeys <= 64);
		assert_true(ops->conf_size >= sizeof(struct sl_source_config));
		assert_false(sl_keytab_has(ops->keys, ops->nkeys, "type"));  /* the agent's */
		for (size_t k = 0; k < ops->nkeys; k++) {
			const struct sl_keydesc *d = &ops->keys[k];
			bool is_shared = false;
			assert_non_null(d->name);
			for (const char *const *n = shared; *n; n++)
				is_shared |= !strcmp(*n, d->name);
			/* shared rows fill the profile and are nobody's own; own rows lie past it */
			if (is_shared) {
				assert_int_equal(d->applies, 0);
				assert_true(d->off + d->size <= sizeof(struct sl_source_config));
			} else {
				assert_int_equal(d->applies, SL_SOURCE_OWN);
				assert_true(d->off >= sizeof(struct sl_source_config));
			}
			assert_true(d->off + d->size <= ops->conf_size);
			for (size_t j = 0; j < k; j++)
				assert_string_not_equal(ops->keys[j].name, d->name);
		}
	}
	assert_string_equal(sl_keytab_find(sl_pg_source_ops.keys, sl_pg_source_ops.nkeys, "port", 0)->def, "5432");
	assert_string_equal(sl_keytab_find(sl_my_source_ops.keys, sl_my_source_ops.nkeys, "port", 0)->def, "3306");
	assert_true(sl_keytab_has(sl_pg_source_ops.keys, sl_pg_source_ops.nkeys, "dbname"));
	assert_false(sl_keytab_has(sl_my_source_ops.keys, sl_my_source_ops.nkeys, "dbname"));
	assert_true(sl_keytab_has(sl_pg_source_ops.keys, sl_pg_source_ops.nkeys, "backfill_connections"));
	assert_false(sl_keytab_has(sl_my_source_ops.keys, sl_my_source_ops.nkeys, "backfill_connections"));
	assert_true(sl_keytab_has(sl_my_source_ops.keys, sl_my_source_ops.nkeys, "watermark_table"));
	/* the stream keys only some sources take */
	assert_string_equal(sl_pg_source_ops.stream_keys[0], "key_columns");
	assert_null(sl_my_source_ops.stream_keys);
}

static void test_masking_keys(void **state)
{
	struct fx *f = *state;
	struct sl_config *cfg;
	char ini[2048], kf[600];

	unsetenv("SLUICE_TEST_MASK");
	cfg = load(f, MINIMAL "mask_columns = public.orders.email:hash\nmask_key_env = SLUICE_TEST_MASK\n");
	/* unset variable: the error names the variable, not a value */
	assert_null(cfg);
	assert_non_null(strstr(f->err, "SLUICE_TEST_MASK"));
	setenv("SLUICE_TEST_MASK", CANARY, 1);
	cfg = LOAD_OK(f, MINIMAL "exclude_columns = public.orders.note, *.*.ssn\n"
		      "mask_columns = public.orders.email:hash, public.*.name:truncate(3), a.b.c:null, a.b.d:redact\n"
		      "mask_key_env = SLUICE_TEST_MASK\n");
	assert_string_equal(cfg->streams[0].exclude_columns[0], "public.orders.note");
	assert_string_equal(cfg->streams[0].exclude_columns[1], "*.*.ssn");
	assert_null(cfg->streams[0].exclude_columns[2]);
	assert_string_equal(cfg->streams[0].mask_columns[1], "public.*.name:truncate(3)");
	assert_string_equal(cfg->streams[0].mask_key, CANARY);
	sl_config_free(cfg);
	cfg = LOAD_OK(f, MINIMAL);
	assert_null(cfg->streams[0].exclude_columns[0]);
	assert_null(cfg->streams[0].mask_columns[0]);
	assert_null(cfg->streams[0].mask_key);
	sl_config_free(cfg);

	EXPECT_ERR(f, MINIMAL "exclude_columns = public.orders\n",
		   ":12: bad value \"public.orders\" for key \"exclude_columns\": each entry must be "
		   "SCHEMA.TABLE.COLUMN (globs allowed, such as public.users.email or shop.*.card_*) (\"public.orders\" is not)");
	EXPECT_ERR(f, MINIMAL "mask_columns = public.orders.email:sha1\n",
		   ":12: bad value \"public.orders.email:sha1\" for key \"mask_columns\": the method after "
		   "\":\" must be hash, null, redact or truncate(N) with N from 0 to 1000000 "
		   "(\"public.orders.email:sha1\" is not)");
	EXPECT_ERR(f, MINIMAL "mask_columns = public.orders.email:hash\n",
		   ":12: mask_columns in [stream.orders] hashes a column, and there is no mask key: set "
		   "mask_key_env or mask_key_file");
	EXPECT_ERR(f, MINIMAL "mask_columns = public.orders.email:null\nmask_key_env = SLUICE_TEST_MASK\n",
		   ":13: mask_key_env in [stream.orders] is set, and no mask_columns rule hashes");

	/* a key file must be mode 0600 or less, like every secret file */
	write_file(f, "mk", CANARY "\n", 0644, kf, sizeof kf);
	snprintf(ini, sizeof ini, MINIMAL "mask_columns = public.orders.email:hash\nmask_key_file = %s\n", kf);
	cfg = load(f, ini);
	assert_null(cfg);
	assert_non_null(strstr(f->err, ":13: mask_key_file"));
	assert_non_null(strstr(f->err, "0644"));
	assert_int_equal(chmod(kf, 0600), 0);
	cfg = LOAD_OK(f, ini);
	assert_string_equal(cfg->streams[0].mask_key, CANARY);
	sl_config_free(cfg);
	unsetenv("SLUICE_TEST_MASK");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_defaults, setup, teardown),
		cmocka_unit_test_setup_teardown(test_masking_keys, setup, teardown),
		cmocka_unit_test(test_source_key_tables),
		cmocka_unit_test_setup_teardown(test_full, setup, teardown),
		cmocka_unit_test_setup_teardown(test_unknown_key, setup, teardown),
		cmocka_unit_test_setup_teardown(test_duplicate_key, setup, teardown),
		cmocka_unit_test_setup_teardown(test_missing_required, setup, teardown),
		cmocka_unit_test_setup_teardown(test_bad_enum, setup, teardown),
		cmocka_unit_test_setup_teardown(test_integers, setup, teardown),
		cmocka_unit_test_setup_teardown(test_byte_sizes, setup, teardown),
		cmocka_unit_test_setup_teardown(test_durations, setup, teardown),
		cmocka_unit_test_setup_teardown(test_sections, setup, teardown),
		cmocka_unit_test_setup_teardown(test_references, setup, teardown),
		cmocka_unit_test_setup_teardown(test_not_applicable, setup, teardown),
		cmocka_unit_test_setup_teardown(test_slots, setup, teardown),
		cmocka_unit_test_setup_teardown(test_lists, setup, teardown),
		cmocka_unit_test_setup_teardown(test_agent_values, setup, teardown),
		cmocka_unit_test_setup_teardown(test_env, setup, teardown),
		cmocka_unit_test_setup_teardown(test_password_env, setup, teardown),
		cmocka_unit_test_setup_teardown(test_password_file, setup, teardown),
		cmocka_unit_test_setup_teardown(test_long_lines, setup, teardown),
		cmocka_unit_test_setup_teardown(test_syntax, setup, teardown),
		cmocka_unit_test_setup_teardown(test_open_errors, setup, teardown),
		cmocka_unit_test_setup_teardown(test_avro_dir_keys, setup, teardown),
		cmocka_unit_test_setup_teardown(test_dest_types, setup, teardown),
		cmocka_unit_test_setup_teardown(test_clickhouse_keys, setup, teardown),
		cmocka_unit_test_setup_teardown(test_s3_keys, setup, teardown),
		cmocka_unit_test_setup_teardown(test_iceberg_keys, setup, teardown),
		cmocka_unit_test_setup_teardown(test_merge_refused, setup, teardown),
		cmocka_unit_test_setup_teardown(test_mutations, setup, teardown),
	};

	return cmocka_run_group_tests_name("config", tests, NULL, NULL);
}
