/*
 * sinks/clickhouse/ch_conf.c: the clickhouse destination's configuration
 * (see ch_conf.h): the key table and its validators, the HTTP client's
 * settings, the default dead-letter file, and `sluice check`.
 */
#include "sinks/clickhouse/ch_conf.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "common/buf.h"
#include "common/util.h"
#include "sinks/clickhouse/ch_rowbin.h"
#include "sinks/clickhouse/ch_sql.h"

/* The default dead-letter file: <database>.<stream>.dead-letter.jsonl in the
 * working directory, "/" in the database name replaced by "_". */
char *ch_default_dl_path(const char *db, const char *stream)
{
	struct sl_buf b;

	sl_buf_init(&b, 0);
	for (const char *p = db; *p; p++)
		sl_buf_putc(&b, *p == '/' ? '_' : *p);
	if (b.len && b.data[0] == '.')
		b.data[0] = '_';
	sl_buf_printf(&b, ".%s.dead-letter.jsonl", stream);
	return sl_buf_detach(&b);
}

/* Whether to gzip bodies: compression = auto gzips unless the server is on a
 * loopback address, where compressing costs more than it saves. */
static bool use_gzip(const struct sl_ch_conf *c)
{
	const char *host = strstr(c->url, "://");

	if (c->compression != SL_CH_GZIP_AUTO)
		return c->compression == SL_CH_GZIP;
	host = host ? host + 3 : c->url;
	return !(strncasecmp(host, "localhost", 9) == 0 || strncmp(host, "127.", 4) == 0 ||
		 strncmp(host, "[::1]", 5) == 0);
}

void ch_http_conf_of(const struct sl_ch_conf *c, struct ch_http_conf *hc, int64_t retry_ms)
{
	memset(hc, 0, sizeof *hc);
	hc->url = c->url;
	hc->user = c->user;
	hc->password = c->password;
	hc->ca_file = c->ca_file;
	hc->verify = c->tls_verify != 0;
	hc->connect_timeout_ms = (long)c->connect_timeout * 1000;
	hc->timeout_ms = (long)c->timeout * 1000;
	hc->gzip = use_gzip(c);
	hc->retry_ms = retry_ms;
	hc->response_cap = c->response_cap;
}

/* ------------------------------------------------------------------ */
/* sluice check                                                         */

/* One statement for check(): a single attempt, no URL setting (a user in
 * readonly mode may not change any); the result in c->resp. */
struct checker {
	struct ch_http *http;
	struct ch_resp resp;
	struct sl_buf sql;
};

static int check_sql(struct checker *c, const char *what, char *err, size_t errlen)
{
	struct ch_req rq = { .body = c->sql.data, .len = c->sql.len };

	if (sl_buf_failed(&c->sql)) {
		snprintf(err, errlen, "clickhouse: out of memory");
		return -1;
	}
	int rc = ch_http_run(c->http, &rq, &c->resp, what, err, errlen);

	return rc == CH_RUN_DATA ? -1 : rc;   /* SL_EPREREQ: credentials or grants, as run says */
}

/* The cluster of c is in the server's configuration (system.clusters), and
 * the server of url is one of its servers (the tables are made ON CLUSTER,
 * so a server outside it gets none): SL_OK with a line on out, SL_EPREREQ
 * when not, SL_EFAIL. */
static int check_cluster(struct checker *s, const struct sl_ch_conf *c, const struct sl_sink_stream *st, FILE *out,
			 char *err, size_t errlen)
{
	const char *dest = st->destination ? st->destination : "";
	struct ch_rb_reader r;
	uint64_t n = 0, shards = 0, local = 0;

	sl_buf_reset(&s->sql);
	ch_sql_cluster_hosts(&s->sql, c->cluster);
	if (check_sql(s, "looking for the cluster", err, errlen) < 0)
		return SL_EFAIL;
	r.p = (const unsigned char *)s->resp.body.data;
	r.end = r.p + s->resp.body.len;
	if (ch_rb_get_u64(&r, &n) < 0 || ch_rb_get_u64(&r, &shards) < 0 || ch_rb_get_u64(&r, &local) < 0) {
		snprintf(err, errlen, "destination \"%s\": could not read the cluster list ClickHouse sent", dest);
		return SL_EFAIL;
	}
	if (n == 0) {
		snprintf(err, errlen, "destination \"%s\": cluster \"%s\" is not in the server's remote_servers "
			 "(system.clusters)", dest, c->cluster);
		return SL_EPREREQ;
	}
	if (local == 0) {
		snprintf(err, errlen, "destination \"%s\": the server at %s is not one of the %" PRIu64 " servers of "
			 "cluster \"%s\" (none of them is local in its system.clusters): point url at one of them",
			 dest, c->url, n, c->cluster);
		return SL_EPREREQ;
	}
	fprintf(out, "stream %s: destination %s: cluster \"%s\" has %" PRIu64 " servers in %" PRIu64 " shard%s: "
		"tables are made ON CLUSTER, Replicated, at %s%s\n", st->name, dest, c->cluster, n, shards,
		shards == 1 ? "" : "s", c->replica_path,
		c->distributed ? "; rows go through Distributed tables to every shard" :
		shards > 1 ? "; rows go to this server's shard only (distributed = false)" : "");
	return SL_OK;
}

/* `sluice check`: the server answers, the user may write, the database
 * exists or may be created, the dead-letter file's folder is writable.
 * Read-only: nothing is created. */
int ch_check(const void *conf, const struct sl_sink_stream *st, FILE *out, char *err, size_t errlen)
{
	const struct sl_ch_conf *c = conf;
	const char *dest = st->destination ? st->destination : "";
	struct ch_http_conf hc;
	struct checker s;
	struct ch_rb_reader r;
	uint64_t ndb = 0;
	int readonly = 0, allow_ddl = 1, rc = SL_EFAIL, run;
	char *dl = NULL, *slash;
	char version[64];
	enum ch_flavor fl = CH_LEGACY;

	memset(&s, 0, sizeof s);
	ch_resp_init(&s.resp);
	sl_buf_init(&s.sql, 0);
	ch_http_conf_of(c, &hc, 0);
	if (ch_http_new(&s.http, &hc, err, errlen) < 0)
		goto out;
	sl_buf_reset(&s.sql);
	ch_sql_version(&s.sql);
	if ((run = check_sql(&s, "asking for the server's version", err, errlen)) < 0) {
		char why[SL_ERRLEN];
		rc = run;
		snprintf(why, sizeof why, "%s", err);
		snprintf(err, errlen, "destination \"%s\": ClickHouse at %s does not answer as user \"%s\": %s", dest,
			 c->url, c->user ? c->user : "default", why);
		goto out;
	}
	snprintf(version, sizeof version, "%.*s", (int)strcspn(s.resp.body.data ? s.resp.body.data : "", "\r\n"),
		 s.resp.body.data ? s.resp.body.data : "");
	fprintf(out, "stream %s: destination %s: ClickHouse %s answers at %s as user \"%s\"\n", st->name, dest,
		version, c->url, c->user ? c->user : "default");
	if (c->layout != SL_CH_LAYOUT_AUTO)
		fl = c->layout == SL_CH_LAYOUT_MODERN ? CH_MODERN : CH_LEGACY;
	else if (ch_flavor_of_version(version, strlen(version), &fl) < 0)
		fl = CH_LEGACY;

	sl_buf_reset(&s.sql);
	ch_sql_user_settings(&s.sql);
	if ((run = check_sql(&s, "reading the user's settings", err, errlen)) < 0) {
		rc = run;
		goto out;
	}
	r.p = (const unsigned char *)s.resp.body.data;
	r.end = r.p + s.resp.body.len;
	while (r.p < r.end) {
		const unsigned char *name, *value;
		size_t nn, nv;
		if (ch_rb_get_str(&r, &name, &nn) < 0 || ch_rb_get_str(&r, &value, &nv) < 0)
			break;
		if (nn == 8 && !memcmp(name, "readonly", 8))
			readonly = nv == 1 && value[0] == '0' ? 0 : 1;
		else if (nn == 9 && !memcmp(name, "allow_ddl", 9))
			allow_ddl = nv == 1 && value[0] == '0' ? 0 : 1;
	}
	if (readonly) {
		snprintf(err, errlen, "destination \"%s\": user \"%s\" is read-only in ClickHouse (readonly is set): "
			 "sluice needs to insert and to create tables", dest, c->user ? c->user : "default");
		rc = SL_EPREREQ;
		goto out;
	}
	sl_buf_reset(&s.sql);
	ch_sql_database_exists(&s.sql, c->database);
	if ((run = check_sql(&s, "looking for the database", err, errlen)) < 0) {
		rc = run;
		goto out;
	}
	r.p = (const unsigned char *)s.resp.body.data;
	r.end = r.p + s.resp.body.len;
	if (ch_rb_get_u64(&r, &ndb) < 0) {
		snprintf(err, errlen, "destination \"%s\": could not read the database list ClickHouse sent", dest);
		goto out;
	}
	if (!allow_ddl && ndb == 0) {
		snprintf(err, errlen, "destination \"%s\": database \"%s\" does not exist and user \"%s\" may not create "
			 "it (allow_ddl = 0)", dest, c->database, c->user ? c->user : "default");
		goto out;
	}
	if (!allow_ddl)
		fprintf(out, "stream %s: destination %s: database \"%s\" exists; user \"%s\" may not create tables "
			"(allow_ddl = 0), so every table must exist already as sluice makes it\n", st->name, dest,
			c->database, c->user ? c->user : "default");
	else
		fprintf(out, "stream %s: destination %s: database \"%s\" %s; user \"%s\" may create tables and insert "
			"(%s mode: %s%s; new tables in the %s layout)\n", st->name, dest, c->database,
			ndb ? "exists" : "does not exist and will be created", c->user ? c->user : "default",
			st->mode == SL_WRITE_MERGE ? "merge" : "append",
			st->mode != SL_WRITE_MERGE ? "ReplacingMergeTree tables ordered by _csn"
			: fl == CH_MODERN ? "ReplacingMergeTree(_version, _is_deleted) tables"
					  : "ReplacingMergeTree(_version) tables",
			st->mode == SL_WRITE_MERGE ? " and <table>_current views" : "",
			fl == CH_MODERN ? "modern" : "legacy");

	if (c->cluster && (rc = check_cluster(&s, c, st, out, err, errlen)) != SL_OK)
		goto out;
	rc = SL_EFAIL;

	dl = c->dead_letter_path ? strdup(c->dead_letter_path) : ch_default_dl_path(c->database, st->name);
	if (!dl) {
		snprintf(err, errlen, "clickhouse: out of memory");
		goto out;
	}
	slash = strrchr(dl, '/');
	if (slash == dl)
		slash[1] = '\0';
	else if (slash)
		*slash = '\0';
	if (access(slash ? dl : ".", W_OK) != 0) {
		snprintf(err, errlen, "destination \"%s\": the dead-letter file's folder \"%s\" is not writable: %s",
			 dest, slash ? dl : ".", strerror(errno));
		goto out;
	}
	free(dl);
	dl = c->dead_letter_path ? strdup(c->dead_letter_path) : ch_default_dl_path(c->database, st->name);
	fprintf(out, "stream %s: destination %s: rows ClickHouse refuses go to \"%s\"\n", st->name, dest,
		dl ? dl : "?");
	rc = SL_OK;
out:
	free(dl);
	ch_http_free(s.http);
	ch_resp_free(&s.resp);
	sl_buf_free(&s.sql);
	return rc;
}

/* ------------------------------------------------------------------ */
/* configuration                                                        */

/* http:// or https://, a host, no credentials, query or fragment. */
static const char *valid_url(const char *s)
{
	size_t n;
	const char *host, *end;

	if (strncasecmp(s, "http://", 7) == 0)
		n = 7;
	else if (strncasecmp(s, "https://", 8) == 0)
		n = 8;
	else
		return "must be an http:// or https:// URL";
	host = s + n;
	if (*host == '\0' || *host == '/' || *host == ':')
		return "must be an http:// or https:// URL with a host";
	end = host + strcspn(host, "/");
	if (memchr(host, '@', (size_t)(end - host)))
		return "must not hold a user or password (use user, and password_env or password_file)";
	if (strpbrk(s, "?#"))
		return "must not have a query string or a fragment";
	if (strpbrk(s, " \t\r\n"))
		return "a URL cannot contain spaces";
	return NULL;
}

static const char *valid_database(const char *s)
{
	return strlen(s) > 200 ? "must be at most 200 bytes" : NULL;
}

static const char *valid_cluster(const char *s)
{
	return !*s ? "must name a cluster of the servers' remote_servers" : strlen(s) > 200 ? "must be at most 200 bytes"
											   : NULL;
}

/* Each table needs a path of its own: {table} is put in by sluice. */
static const char *valid_replica_path(const char *s)
{
	if (!strstr(s, "{table}"))
		return "must contain {table} (each table needs a path of its own)";
	return strlen(s) > 1000 ? "must be at most 1000 bytes" : NULL;
}

static const struct sl_keychoice compressions[] = {
	{ "auto", SL_CH_GZIP_AUTO }, { "gzip", SL_CH_GZIP }, { "none", SL_CH_GZIP_NONE }, { NULL, 0 },
};

static const struct sl_keychoice layouts[] = {
	{ "auto", SL_CH_LAYOUT_AUTO }, { "legacy", SL_CH_LAYOUT_LEGACY }, { "modern", SL_CH_LAYOUT_MODERN },
	{ NULL, 0 },
};

static const struct sl_keychoice booleans[] = {
	{ "true", 1 }, { "false", 0 }, { "yes", 1 }, { "no", 0 }, { "on", 1 }, { "off", 0 }, { NULL, 0 },
};

/* The keys of [destination.NAME] with type = clickhouse (doc/configuration.md). */
const struct sl_keydesc ch_conf_keys[CH_CONF_NKEYS] = {
	{ .name = "url", .type = SL_KT_STRING, .flags = SL_KF_REQUIRED, .validate = valid_url,
	  FIELD(struct sl_ch_conf, url) },
	{ .name = "database", .type = SL_KT_STRING, .def = "default", .validate = valid_database,
	  FIELD(struct sl_ch_conf, database) },
	{ .name = "user", .type = SL_KT_STRING, .def = "default", FIELD(struct sl_ch_conf, user) },
	{ .name = "password_env", .type = SL_KT_SECRET_ENV, .excludes = "password_file",
	  FIELD(struct sl_ch_conf, password) },
	{ .name = "password_file", .type = SL_KT_SECRET_FILE, .excludes = "password_env",
	  FIELD(struct sl_ch_conf, password) },
	{ .name = "batch_rows", .type = SL_KT_INT, .def = "100000", .min = 1, .max = 1000000,
	  FIELD(struct sl_ch_conf, batch_rows) },
	{ .name = "batch_bytes", .type = SL_KT_BYTES, .def = "16MB", .min = 64 * 1024,
	  .max = (uint64_t)1 << 30, FIELD(struct sl_ch_conf, batch_bytes) },
	{ .name = "batch_seconds", .type = SL_KT_MSECONDS, .def = "0.5", .min = 10, .max = 3600 * 1000,
	  FIELD(struct sl_ch_conf, batch_ms) },
	{ .name = "timeout", .type = SL_KT_SECONDS, .def = "60", .min = 1, .max = 3600,
	  FIELD(struct sl_ch_conf, timeout) },
	{ .name = "connect_timeout", .type = SL_KT_SECONDS, .def = "10", .min = 1, .max = 600,
	  FIELD(struct sl_ch_conf, connect_timeout) },
	{ .name = "retry_seconds", .type = SL_KT_SECONDS, .def = "60", .min = 0, .max = 86400,
	  FIELD(struct sl_ch_conf, retry_seconds) },
	{ .name = "ca_file", .type = SL_KT_STRING, FIELD(struct sl_ch_conf, ca_file) },
	{ .name = "tls_verify", .type = SL_KT_ENUM, .choices = booleans, .def = "true",
	  FIELD(struct sl_ch_conf, tls_verify) },
	{ .name = "compression", .type = SL_KT_ENUM, .choices = compressions, .def = "auto",
	  FIELD(struct sl_ch_conf, compression) },
	{ .name = "dead_letter_path", .type = SL_KT_STRING, FIELD(struct sl_ch_conf, dead_letter_path) },
	{ .name = "layout", .type = SL_KT_ENUM, .choices = layouts, .def = "auto",
	  FIELD(struct sl_ch_conf, layout) },
	{ .name = "cluster", .type = SL_KT_STRING, .validate = valid_cluster, FIELD(struct sl_ch_conf, cluster) },
	{ .name = "replica_path", .type = SL_KT_STRING, .def = "/clickhouse/tables/{shard}/{database}/{table}",
	  .validate = valid_replica_path, FIELD(struct sl_ch_conf, replica_path) },
	{ .name = "distributed", .type = SL_KT_ENUM, .choices = booleans, .def = "false",
	  FIELD(struct sl_ch_conf, distributed) },
};

_Static_assert(sizeof ch_conf_keys / sizeof ch_conf_keys[0] == CH_CONF_NKEYS, "the key count");

int ch_conf_check(const void *conf, const struct sl_ini_section *sec, struct sl_keyerr *er)
{
	const struct sl_ch_conf *c = conf;
	const struct sl_ini_entry *e;

	if (!c->distributed || c->cluster)
		return 0;
	e = sl_ini_find(sec, "distributed");
	return sl_keyerr_set(er, e ? e->line : sec->line, "distributed = true needs cluster (the Distributed table "
			     "and the local tables it reads are made ON CLUSTER)");
}
