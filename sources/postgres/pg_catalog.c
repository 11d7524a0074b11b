/*
 * sources/postgres/pg_catalog.c: PostgreSQL connections and the catalog
 * queries of the PostgreSQL source: prerequisites, tables and keys, the
 * publication, the slot, server settings.
 */
#include "sources/postgres/pg_internal.h"

#include <errno.h>
#include <fnmatch.h>
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/buf.h"
#include "common/log.h"
#include "common/util.h"
#include "sources/postgres/pg_text.h"

/* TCP keepalives and a bound on unacknowledged data, so that no connection
 * (catalog queries, COPY, the replication stream) waits forever on a peer
 * that vanished without a FIN or RST: an idle dead peer is found after
 * about 15 + 3 x 5 s, unanswered data after 30 s (doc/operations.md). */
#define TCP_KEEPALIVES_IDLE "15"
#define TCP_KEEPALIVES_INTERVAL "5"
#define TCP_KEEPALIVES_COUNT "3"
#define TCP_USER_TIMEOUT_MS "30000"

/* Session settings that fix the text format of every value we parse. */
#define SESSION_OPTIONS "-c datestyle=ISO,YMD -c intervalstyle=postgres -c timezone=UTC " \
			"-c extra_float_digits=3 -c bytea_output=hex"

static _Thread_local int last_err_status = SL_EFAIL;

/* Connection-time failures come without a SQLSTATE: their words tell. */
static bool auth_failure(PGconn *c, const char *m)
{
	static const char *const words[] = {
		"password authentication failed", "no pg_hba.conf entry", "authentication failed",
		"does not exist",               /* role or database */
		"is not permitted to log in", "permission denied for database",
		"must be superuser or replication role", "must have the REPLICATION attribute",
		"no password supplied", "password is required",
	};

	if (!c || PQstatus(c) != CONNECTION_BAD)
		return false;
	if (PQconnectionNeedsPassword(c))
		return true;
	for (size_t i = 0; i < sizeof words / sizeof words[0]; i++)
		if (strstr(m, words[i]))
			return true;
	return false;
}

int sl_pg_err(char *err, size_t errlen, const char *what, PGconn *c, PGresult *res)
{
	const char *m = res ? PQresultErrorMessage(res) : PQerrorMessage(c);
	const char *state = res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;
	size_t n;
	int rc = SL_EFAIL;

	if (state && (!strcmp(state, "42501") || !strncmp(state, "28", 2)))
		rc = SL_EPREREQ;
	else if (!res && auth_failure(c, m))
		rc = SL_EPREREQ;
	snprintf(err, errlen, "%s: %s", what, m);
	/* libpq's words span lines (ERROR, DETAIL, HINT; one per host tried):
	 * one line, for logs that are read one line at a time */
	for (char *p = err; *p; p++)
		if (*p == '\n' || *p == '\r' || *p == '\t')
			*p = ' ';
	for (char *p = err; (p = strstr(p, "  "));)
		memmove(p, p + 1, strlen(p + 1) + 1);
	n = strlen(err);
	while (n > 0 && err[n - 1] == ' ')
		err[--n] = '\0';
	if (rc == SL_EPREREQ && n + 1 < errlen)
		snprintf(err + n, errlen - n, "%s", state && !strcmp(state, "42501")
			 ? " (a missing privilege is not retried: `sluice check` lists the GRANT statements the role needs)"
			 : " (a failed login is not retried: fix the role, its password or pg_hba.conf)");
	last_err_status = rc;
	sl_log_note_sqlstate(state);
	return rc;
}

int sl_pg_err_status(void)
{
	return last_err_status;
}

PGconn *sl_pg_connect(const struct sl_source_config *cfg, bool replication, char *err, size_t errlen)
{
	const char *keys[24], *vals[24];
	char port[16], timeout[16];
	int n = 0;
	PGconn *c;

	last_err_status = SL_EFAIL;
	snprintf(port, sizeof port, "%d", cfg->port);
	snprintf(timeout, sizeof timeout, "%d", cfg->connect_timeout > 0 ? cfg->connect_timeout : 10);
#define KV(k, v) do { const char *v_ = (v); if (v_) { keys[n] = (k); vals[n] = v_; n++; } } while (0)
	KV("host", cfg->host);
	KV("port", port);
	KV("user", cfg->user);
	KV("dbname", sl_pg_conf(cfg)->dbname);
	KV("password", cfg->password);
	KV("sslmode", sl_pg_conf(cfg)->sslmode);
	KV("sslrootcert", cfg->sslrootcert);
	KV("connect_timeout", timeout);
	KV("keepalives", "1");
	KV("keepalives_idle", TCP_KEEPALIVES_IDLE);
	KV("keepalives_interval", TCP_KEEPALIVES_INTERVAL);
	KV("keepalives_count", TCP_KEEPALIVES_COUNT);
	KV("tcp_user_timeout", TCP_USER_TIMEOUT_MS);
	KV("application_name", "sluice");
	KV("client_encoding", "UTF8");
	KV("options", SESSION_OPTIONS);
	if (replication)
		KV("replication", "database");
#undef KV
	keys[n] = vals[n] = NULL;
	c = PQconnectdbParams(keys, vals, 0);
	if (!c) {
		snprintf(err, errlen, "could not connect to source \"%s\": out of memory", cfg->name);
		return NULL;
	}
	if (PQstatus(c) != CONNECTION_OK) {
		char what[512];
		snprintf(what, sizeof what, "could not connect to source \"%s\" (%s:%d, database \"%s\"%s)",
			 cfg->name, cfg->host, cfg->port, sl_pg_conf(cfg)->dbname ? sl_pg_conf(cfg)->dbname : "",
			 replication ? ", replication" : "");
		sl_pg_err(err, errlen, what, c, NULL);
		PQfinish(c);
		return NULL;
	}
	return c;
}

bool sl_pg_sqlstate_is(PGresult *res, const char *state)
{
	const char *s = PQresultErrorField(res, PG_DIAG_SQLSTATE);
	return s && !strcmp(s, state);
}

/* The prerequisite a standby fails (SL_EPREREQ). */
static int standby_refused(PGconn *c, char *err, size_t errlen)
{
	snprintf(err, errlen, "source prerequisite not met: server %s:%s is a standby (recovery is in "
		 "progress), and PostgreSQL 15 cannot decode changes on a standby: point sluice at the "
		 "primary", PQhost(c), PQport(c));
	return SL_EPREREQ;
}

int sl_pg_check_prereqs(PGconn *c, char *err, size_t errlen)
{
	PGresult *res = PQexec(c, "SELECT current_setting('wal_level'), "
				  "(SELECT rolreplication OR rolsuper FROM pg_roles WHERE rolname = current_user), "
				  "pg_is_in_recovery()");
	int rc = SL_OK;

	if (PQresultStatus(res) != PGRES_TUPLES_OK) {
		rc = sl_pg_err(err, errlen, "could not read wal_level", c, res);
	} else if (strcmp(PQgetvalue(res, 0, 0), "logical") != 0) {
		snprintf(err, errlen, "source prerequisite not met: wal_level is \"%s\", logical replication needs "
			 "wal_level = logical (set it in postgresql.conf and restart the server)",
			 PQgetvalue(res, 0, 0));
		rc = SL_EPREREQ;
	} else if (strcmp(PQgetvalue(res, 0, 1), "t") != 0) {
		snprintf(err, errlen, "source prerequisite not met: role \"%s\" lacks the REPLICATION attribute "
			 "(ALTER ROLE ... WITH REPLICATION)", PQuser(c));
		rc = SL_EPREREQ;
	} else if (!strcmp(PQgetvalue(res, 0, 2), "t")) {
		rc = standby_refused(c, err, errlen);
	}
	PQclear(res);
	return rc;
}

void sl_pg_tables_free(struct sl_table **t, int n)
{
	if (!t)
		return;
	for (int i = 0; i < n; i++)
		sl_table_free(t[i]);
	free(t);
}

static bool matches(char *const *globs, const char *name)
{
	for (; globs && *globs; globs++)
		if (fnmatch(*globs, name, 0) == 0)
			return true;
	return false;
}

bool sl_pg_selects(char *const *include, char *const *exclude, const char *ns, const char *name)
{
	struct sl_buf full;
	bool yes;

	sl_buf_init(&full, 0);
	sl_buf_printf(&full, "%s.%s", ns, name);
	yes = !sl_buf_failed(&full) && matches(include, full.data) && !matches(exclude, full.data);
	sl_buf_free(&full);
	return yes;
}

/* Adds row i of describe_sql's result to t's columns. */
static int add_column(struct sl_table *t, PGresult *res, int i)
{
	uint64_t typ;
	int64_t mod;
	int precision = 0, scale = 0;
	enum sl_type type;

	if (sl_parse_u64(PQgetvalue(res, i, 1), UINT32_MAX, &typ) < 0 ||
	    sl_parse_i64(PQgetvalue(res, i, 2), INT32_MIN, INT32_MAX, &mod) < 0)
		return -1;
	type = sl_pg_type_map((uint32_t)typ, (int32_t)mod, &precision, &scale);
	if (sl_table_add_column(t, PQgetvalue(res, i, 0), type, precision, scale, (uint32_t)typ,
				(int32_t)mod, PQgetvalue(res, i, 3), !strcmp(PQgetvalue(res, i, 4), "t")) < 0)
		return -1;
	t->cols[t->ncols - 1].not_null = !strcmp(PQgetvalue(res, i, 5), "t");
	t->cols[t->ncols - 1].in_identity = !strcmp(PQgetvalue(res, i, 6), "t");
	return 0;
}

/* The columns of every table in $1 (an OID array), with their key and
 * replica identity membership, ordered by table then column: one query for
 * the whole selection, however many tables it holds. */
static const char describe_sql[] =
	"SELECT a.attname, a.atttypid, a.atttypmod, format_type(a.atttypid, a.atttypmod), "
	"       coalesce(a.attnum = ANY(i.indkey), false), a.attnotnull, "
	"       c.relreplident = 'f' OR coalesce(a.attnum = ANY(r.indkey), false), a.attrelid "
	"FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid "
	"LEFT JOIN pg_index i ON i.indrelid = a.attrelid AND i.indexrelid = ("
	"  SELECT x.indexrelid FROM pg_index x WHERE x.indrelid = a.attrelid "
	"  AND (x.indisprimary OR x.indisreplident) ORDER BY x.indisprimary DESC LIMIT 1) "
	"LEFT JOIN pg_index r ON r.indrelid = a.attrelid AND ((c.relreplident = 'd' AND r.indisprimary) "
	"  OR (c.relreplident = 'i' AND r.indisreplident)) "
	"WHERE a.attrelid = ANY($1::oid[]) AND a.attnum > 0 AND NOT a.attisdropped AND a.attgenerated = '' "
	"ORDER BY a.attrelid, a.attnum";

static int cmp_relid(const void *a, const void *b)
{
	uint32_t x = (*(struct sl_table *const *)a)->relid, y = (*(struct sl_table *const *)b)->relid;

	return x < y ? -1 : x > y;
}

/* Describes the n tables (their relid set) with one catalog query. */
static int describe_tables(PGconn *c, struct sl_table **tabs, int n, char *err, size_t errlen)
{
	struct sl_table **byoid = NULL;
	struct sl_buf oids;
	const char *params[1];
	PGresult *res = NULL;
	int rc = SL_OK, k = 0;

	sl_buf_init(&oids, 0);
	if (n == 0)
		goto out;
	if (!(byoid = malloc((size_t)n * sizeof *byoid)) || sl_pg_oid_array(&oids, tabs, n) < 0) {
		snprintf(err, errlen, "out of memory describing tables");
		rc = SL_EFAIL;
		goto out;
	}
	memcpy(byoid, tabs, (size_t)n * sizeof *byoid);
	qsort(byoid, (size_t)n, sizeof *byoid, cmp_relid);
	params[0] = oids.data;
	res = PQexecParams(c, describe_sql, 1, NULL, params, NULL, NULL, 0);
	if (PQresultStatus(res) != PGRES_TUPLES_OK) {
		rc = sl_pg_err(err, errlen, "could not read the columns of the tables", c, res);
		goto out;
	}
	for (int i = 0; i < PQntuples(res); i++) {
		uint64_t relid;
		if (sl_parse_u64(PQgetvalue(res, i, 7), UINT32_MAX, &relid) < 0)
			relid = 0;
		while (k < n && byoid[k]->relid < relid)
			k++;
		if (k == n || byoid[k]->relid != relid || add_column(byoid[k], res, i) < 0) {
			snprintf(err, errlen, "could not describe table \"%s\".\"%s\"", k < n ? byoid[k]->ns : "?",
				 k < n ? byoid[k]->name : "?");
			rc = SL_EFAIL;
			goto out;
		}
	}
	for (int i = 0; i < n; i++)
		if (sl_table_finish(tabs[i]) < 0) {
			snprintf(err, errlen, "out of memory describing \"%s\".\"%s\"", tabs[i]->ns, tabs[i]->name);
			rc = SL_EFAIL;
			goto out;
		}
out:
	free(byoid);
	sl_buf_free(&oids);
	PQclear(res);
	return rc;
}

/*
 * Every ordinary and partitioned table, with what selection needs: its
 * partition ancestors (for a partition), whether updates and deletes can
 * name a row (a replica identity: FULL, or the primary key or the chosen
 * index that DEFAULT or USING INDEX points to; for a partitioned table, every
 * leaf must have one), the leaves of a partitioned table, and the replica
 * identity setting.
 */
static const char list_sql[] =
	"SELECT c.oid, n.nspname, c.relname, c.relkind, c.relispartition, "
	"  CASE WHEN c.relispartition THEN (SELECT string_agg(a.relid::oid::text, ',') "
	"       FROM pg_partition_ancestors(c.oid) a WHERE a.relid::oid <> c.oid) END, "
	"  CASE WHEN c.relkind = 'p' THEN NOT EXISTS ("
	"       SELECT 1 FROM pg_partition_tree(c.oid) pt JOIN pg_class l ON l.oid = pt.relid "
	"       WHERE pt.isleaf AND NOT (l.relreplident = 'f' OR EXISTS (SELECT 1 FROM pg_index i "
	"         WHERE i.indrelid = l.oid AND ((l.relreplident = 'd' AND i.indisprimary) OR "
	"         (l.relreplident = 'i' AND i.indisreplident))))) "
	"  ELSE c.relreplident = 'f' OR EXISTS (SELECT 1 FROM pg_index i WHERE i.indrelid = c.oid "
	"       AND ((c.relreplident = 'd' AND i.indisprimary) OR (c.relreplident = 'i' AND i.indisreplident))) "
	"  END, "
	"  CASE WHEN c.relkind = 'p' THEN (SELECT string_agg(pt.relid::oid::text, ',' ORDER BY pt.relid::oid) "
	"       FROM pg_partition_tree(c.oid) pt WHERE pt.isleaf) END, "
	"  c.relreplident, "
	"  CASE WHEN c.relkind = 'p' THEN (SELECT sum(l.reltuples)::bigint FROM pg_partition_tree(c.oid) pt "
	"       JOIN pg_class l ON l.oid = pt.relid WHERE pt.isleaf HAVING min(l.reltuples) >= 0) "
	"  WHEN c.reltuples >= 0 THEN c.reltuples::bigint END, "
	"  c.relpersistence "
	"FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
	"WHERE c.relkind IN ('r', 'p') "
	"AND n.nspname NOT IN ('pg_catalog', 'information_schema') "
	"AND n.nspname NOT LIKE 'pg\\_toast%' AND n.nspname NOT LIKE 'pg\\_temp\\_%' "
	"ORDER BY n.nspname, c.relname";

/* True if the comma-separated OID list holds one of the n OIDs in oids. */
static bool list_has_any(const char *list, const uint32_t *oids, int n)
{
	while (list && *list) {
		uint64_t v = 0;
		for (; *list >= '0' && *list <= '9'; list++)
			v = v * 10 + (uint64_t)(*list - '0');
		for (int i = 0; i < n; i++)
			if (oids[i] == v)
				return true;
		if (*list == ',')
			list++;
		else
			break;
	}
	return false;
}

/* FNV-1a of a text: the shape of a partitioned table is its leaf OID list. */
static uint64_t text_hash(const char *s)
{
	uint64_t h = UINT64_C(0xcbf29ce484222325);

	for (; *s; s++) {
		h ^= (unsigned char)*s;
		h *= UINT64_C(0x100000001b3);
	}
	return h;
}

/* An unlogged (or temporary) table is not in the WAL: logical decoding never
 * sees its changes, and a publication refuses it.  A glob skips it, as it
 * skips views (logged when log is set); a tables entry that names it
 * exactly is SL_EPREREQ. */
static int not_in_wal(char *const *include, const char *full, PGresult *res, int row, bool log,
		      char *err, size_t errlen)
{
	const char *persistence = PQgetvalue(res, row, 10), *ns = PQgetvalue(res, row, 1);
	const char *name = PQgetvalue(res, row, 2);

	if (!strcmp(persistence, "p"))
		return SL_OK;
	for (char *const *e = include; e && *e; e++) {
		if (strpbrk(*e, "*?[\\") || strcmp(*e, full) != 0)
			continue;
		snprintf(err, errlen, "table \"%s\".\"%s\" is %s: its changes are not in the WAL, so logical "
			 "replication cannot stream them. Make it a logged table (ALTER TABLE %s.%s SET LOGGED) or take "
			 "it out of the stream's tables", ns, name, !strcmp(persistence, "u") ? "unlogged" : "temporary",
			 ns, name);
		return SL_EPREREQ;
	}
	if (log)
		sl_info("skipping table \"%s\".\"%s\": it is %s, so its changes are not in the WAL", ns, name,
			!strcmp(persistence, "u") ? "unlogged" : "temporary");
	return 1;
}

int sl_pg_leaf_of(PGconn *c, uint32_t root, uint32_t leaf, uint64_t *shape, char *err, size_t errlen)
{
	char r[16], l[16];
	const char *params[2] = { r, l };
	PGresult *res;
	int rc;

	snprintf(r, sizeof r, "%u", root);
	snprintf(l, sizeof l, "%u", leaf);
	res = PQexecParams(c, "SELECT EXISTS (SELECT 1 FROM pg_partition_tree($1::oid) WHERE isleaf AND relid = $2::oid), "
			   "(SELECT string_agg(relid::oid::text, ',' ORDER BY relid::oid) FROM pg_partition_tree($1::oid) "
			   "WHERE isleaf)", 2, NULL, params, NULL, NULL, 0);
	if (PQresultStatus(res) != PGRES_TUPLES_OK || PQntuples(res) != 1) {
		rc = sl_pg_err(err, errlen, "could not read the partitions of a partitioned table", c, res);
		goto out;
	}
	*shape = text_hash(PQgetvalue(res, 0, 1));
	rc = !strcmp(PQgetvalue(res, 0, 0), "t");
out:
	PQclear(res);
	return rc;
}

int sl_pg_snapshot_shape(PGconn *c, uint32_t relid, uint64_t *shape, char *err, size_t errlen)
{
	char oid[16];
	const char *params[1] = { oid };
	PGresult *res;
	int rc = SL_OK;

	/* pg_inherits read by the transaction's snapshot (pg_partition_tree
	 * reads the catalog as it is now) */
	snprintf(oid, sizeof oid, "%u", relid);
	res = PQexecParams(c, "WITH RECURSIVE d(relid) AS (SELECT inhrelid FROM pg_inherits WHERE inhparent = $1::oid "
			   "UNION ALL SELECT i.inhrelid FROM pg_inherits i JOIN d ON i.inhparent = d.relid) "
			   "SELECT string_agg(d.relid::oid::text, ',' ORDER BY d.relid::oid) FROM d "
			   "JOIN pg_class c ON c.oid = d.relid WHERE c.relkind <> 'p'", 1, NULL, params, NULL, NULL, 0);
	if (PQresultStatus(res) != PGRES_TUPLES_OK || PQntuples(res) != 1)
		rc = sl_pg_err(err, errlen, "could not read the partitions of a partitioned table", c, res);
	else
		*shape = text_hash(PQgetvalue(res, 0, 0));
	PQclear(res);
	return rc;
}

int sl_pg_list_tables(PGconn *c, char *const *include, char *const *exclude,
		      struct sl_table ***out, int *n, char *err, size_t errlen)
{
	return sl_pg_select_tables(c, include, exclude, true, out, n, err, errlen);
}

int sl_pg_select_tables(PGconn *c, char *const *include, char *const *exclude, bool describe,
			struct sl_table ***out, int *n, char *err, size_t errlen)
{
	PGresult *res = NULL;
	struct sl_table **tabs = NULL;
	uint32_t *sel = NULL;      /* OIDs of the rows the globs select */
	int *rows = NULL;
	struct sl_buf full;
	int cnt = 0, nsel = 0, rc = SL_OK;
	/* The list and the descriptions from one snapshot: a table dropped and
	 * created again (or renamed) between two queries would otherwise be
	 * listed by its old OID and described as a table without columns. */
	bool own_tx = describe && PQtransactionStatus(c) == PQTRANS_IDLE;

	sl_buf_init(&full, 0);
	*out = NULL;
	*n = 0;
	if (own_tx) {
		res = PQexec(c, "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY");
		if (PQresultStatus(res) != PGRES_COMMAND_OK) {
			own_tx = false;
			rc = sl_pg_err(err, errlen, "could not start the transaction that lists tables", c, res);
			goto out;
		}
		PQclear(res);
	}
	res = PQexec(c, list_sql);
	if (PQresultStatus(res) != PGRES_TUPLES_OK) {
		rc = sl_pg_err(err, errlen, "could not list tables", c, res);
		goto out;
	}
	tabs = calloc((size_t)PQntuples(res) + 1, sizeof *tabs);
	sel = calloc((size_t)PQntuples(res) + 1, sizeof *sel);
	rows = calloc((size_t)PQntuples(res) + 1, sizeof *rows);
	if (!tabs || !sel || !rows) {
		snprintf(err, errlen, "out of memory listing tables");
		rc = SL_EFAIL;
		goto out;
	}
	/* What the globs select. */
	for (int i = 0; i < PQntuples(res); i++) {
		uint64_t oid;
		sl_buf_reset(&full);
		sl_buf_printf(&full, "%s.%s", PQgetvalue(res, i, 1), PQgetvalue(res, i, 2));
		if (sl_buf_failed(&full) || !matches(include, full.data) || matches(exclude, full.data))
			continue;
		if ((rc = not_in_wal(include, full.data, res, i, describe, err, errlen)) != SL_OK) {
			if (rc < 0)
				goto out;
			rc = SL_OK;
			continue;
		}
		if (sl_parse_u64(PQgetvalue(res, i, 0), UINT32_MAX, &oid) < 0) {
			snprintf(err, errlen, "could not parse the OID of \"%s\"", full.data);
			rc = SL_EFAIL;
			goto out;
		}
		rows[nsel] = i;
		sel[nsel++] = (uint32_t)oid;
	}
	/* A partition whose ancestor is selected is part of that ancestor: its
	 * rows are backfilled, and its changes published, as the ancestor's. */
	for (int k = 0; k < nsel; k++) {
		int i = rows[k];
		const char *ns = PQgetvalue(res, i, 1), *name = PQgetvalue(res, i, 2);
		struct sl_table *t;
		if (!strcmp(PQgetvalue(res, i, 4), "t") && list_has_any(PQgetvalue(res, i, 5), sel, nsel))
			continue;
		t = tabs[cnt] = sl_table_new(ns, name);
		if (!t) {
			snprintf(err, errlen, "out of memory listing tables");
			rc = SL_EFAIL;
			goto out;
		}
		cnt++;
		t->relid = sel[k];
		t->no_row_identity = strcmp(PQgetvalue(res, i, 6), "t") != 0;
		if (!strcmp(PQgetvalue(res, i, 8), "f"))
			t->src_flags |= SL_PG_IDENTITY_FULL;
		if (!strcmp(PQgetvalue(res, i, 3), "p")) {
			t->src_flags |= SL_PG_PARTITIONED;
			t->shape = text_hash(PQgetvalue(res, i, 7));
		}
		if (PQgetisnull(res, i, 9) || sl_parse_i64(PQgetvalue(res, i, 9), 0, INT64_MAX, &t->est_rows) < 0)
			t->est_rows = -1;  /* never analyzed: unknown */
	}
	if (describe && ((rc = describe_tables(c, tabs, cnt, err, errlen)) < 0 ||
			 (rc = sl_pg_idents_read(c, tabs, cnt, err, errlen)) < 0 ||
			 (rc = sl_pg_missing_read(c, tabs, cnt, err, errlen)) < 0))
		goto out;
	*out = tabs;
	*n = cnt;
	tabs = NULL;
out:
	sl_pg_tables_free(tabs, cnt);
	free(sel);
	free(rows);
	sl_buf_free(&full);
	PQclear(res);
	if (own_tx)
		PQclear(PQexec(c, "COMMIT"));   /* read only: a failed one ends the same */
	return rc;
}

int sl_pg_append_ident(struct sl_buf *b, PGconn *c, const char *name)
{
	char *q = PQescapeIdentifier(c, name, strlen(name));
	int rc = q ? sl_buf_puts(b, q) : -1;

	PQfreemem(q);
	return rc;
}

int sl_pg_append_qualified(struct sl_buf *b, PGconn *c, const struct sl_table *t)
{
	if (sl_pg_append_ident(b, c, t->ns) < 0 || sl_buf_putc(b, '.') < 0)
		return -1;
	return sl_pg_append_ident(b, c, t->name);
}

/* True when t's name is among the rows (schemaname, tablename) of res. */
static bool listed(PGresult *res, const struct sl_table *t)
{
	for (int j = 0; j < PQntuples(res); j++)
		if (!strcmp(PQgetvalue(res, j, 0), t->ns) && !strcmp(PQgetvalue(res, j, 1), t->name))
			return true;
	return false;
}

/* For a partition t missing from the publication's table list: the name of
 * an ancestor that is listed instead (so t's changes are published as that
 * ancestor's), into out; false when none is. */
static bool published_through(PGconn *c, PGresult *pubtabs, const struct sl_table *t, char *out, size_t outlen)
{
	char oid[16];
	const char *params[1] = { oid };
	PGresult *res;
	bool found = false;

	snprintf(oid, sizeof oid, "%u", t->relid);
	res = PQexecParams(c, "SELECT n.nspname, c.relname FROM pg_partition_ancestors($1::oid) a "
			      "JOIN pg_class c ON c.oid = a.relid JOIN pg_namespace n ON n.oid = c.relnamespace "
			      "WHERE a.relid <> $1::oid", 1, NULL, params, NULL, NULL, 0);
	if (PQresultStatus(res) == PGRES_TUPLES_OK) {
		for (int i = 0; i < PQntuples(res) && !found; i++) {
			for (int j = 0; j < PQntuples(pubtabs) && !found; j++) {
				if (strcmp(PQgetvalue(res, i, 0), PQgetvalue(pubtabs, j, 0)) ||
				    strcmp(PQgetvalue(res, i, 1), PQgetvalue(pubtabs, j, 1)))
					continue;
				snprintf(out, outlen, "%s.%s", PQgetvalue(res, i, 0), PQgetvalue(res, i, 1));
				found = true;
			}
		}
	}
	PQclear(res);
	return found;
}

/* Appends t to a FOR TABLE / ADD TABLE list: ONLY for an ordinary table, so
 * that inheritance children it has are not published with it (a child the
 * stream selects is listed on its own); a partitioned table publishes its
 * partitions through itself (publish_via_partition_root). */
static int append_pub_table(struct sl_buf *b, PGconn *c, const struct sl_table *t, bool first)
{
	sl_buf_puts(b, first ? "" : ", ");
	if (!(t->src_flags & SL_PG_PARTITIONED))
		sl_buf_puts(b, "ONLY ");
	return sl_pg_append_qualified(b, c, t);
}

int sl_pg_publication_fit(PGconn *c, const char *pub, struct sl_table *const *tables, int n, bool *exists,
			  char *err, size_t errlen)
{
	const char *params[1] = { pub };
	PGresult *res;
	char *q;
	bool partitioned = false;
	int rc = SL_OK;

	*exists = false;
	for (int i = 0; i < n; i++)
		partitioned |= (tables[i]->src_flags & SL_PG_PARTITIONED) != 0;
	res = PQexecParams(c, "SELECT pubviaroot, pubinsert AND pubupdate AND pubdelete AND pubtruncate, "
			      "CASE WHEN NOT pubinsert THEN 'insert' WHEN NOT pubupdate THEN 'update' "
			      "     WHEN NOT pubdelete THEN 'delete' WHEN NOT pubtruncate THEN 'truncate' END "
			      "FROM pg_publication WHERE pubname = $1", 1, NULL, params, NULL, NULL, 0);
	if (PQresultStatus(res) != PGRES_TUPLES_OK) {
		rc = sl_pg_err(err, errlen, "could not look up the publication", c, res);
		PQclear(res);
		return rc;
	}
	if (PQntuples(res) != 1) {
		PQclear(res);
		return SL_OK;
	}
	*exists = true;
	if (!(q = PQescapeIdentifier(c, pub, strlen(pub)))) {
		rc = sl_pg_err(err, errlen, "could not quote the publication name", c, NULL);
	} else if (strcmp(PQgetvalue(res, 0, 1), "t") != 0) {
		snprintf(err, errlen, "publication \"%s\" does not publish %ss, so the stream would miss "
			 "them: ALTER PUBLICATION %s SET (publish = 'insert, update, delete, truncate'), or "
			 "give the stream a publication of its own (publication = ...)", pub,
			 PQgetvalue(res, 0, 2), q);
		rc = SL_EPREREQ;
	} else if (partitioned && strcmp(PQgetvalue(res, 0, 0), "t") != 0) {
		snprintf(err, errlen, "publication \"%s\" publishes the changes of partitions under the "
			 "partitions' own names (publish_via_partition_root = false), but the stream selects "
			 "a partitioned table, whose changes must arrive under its own name: run "
			 "ALTER PUBLICATION %s SET (publish_via_partition_root = true) if nothing else reads "
			 "the publication, or give the stream a publication of its own (publication = ...)",
			 pub, q);
		rc = SL_EPREREQ;
	}
	PQfreemem(q);
	PQclear(res);
	if (rc < 0)
		return rc;
	res = PQexecParams(c, "SELECT schemaname, tablename FROM pg_publication_tables WHERE pubname = $1",
			   1, NULL, params, NULL, NULL, 0);
	if (PQresultStatus(res) != PGRES_TUPLES_OK) {
		rc = sl_pg_err(err, errlen, "could not list the tables of the publication", c, res);
		PQclear(res);
		return rc;
	}
	for (int i = 0; i < n && rc == SL_OK; i++) {
		char via[300];
		if (listed(res, tables[i]) || !published_through(c, res, tables[i], via, sizeof via))
			continue;
		snprintf(err, errlen, "publication \"%s\" publishes the changes of partition \"%s\".\"%s\" as "
			 "changes of %s (publish_via_partition_root), but the stream selects the partition on its "
			 "own: select %s instead, or give the stream a publication of its own (publication = ...)",
			 pub, tables[i]->ns, tables[i]->name, via, via);
		rc = SL_EPREREQ;
	}
	PQclear(res);
	if (rc == SL_OK)
		rc = sl_pg_publication_filters(c, pub, tables, n, err, errlen);
	return rc;
}

/* Comments a publication sluice created as its own (SL_PG_PUB_COMMENT):
 * a table that leaves it is added again and backfilled again. */
static void mark_own_publication(PGconn *c, const char *qpub, const char *pub)
{
	struct sl_buf sql;
	PGresult *res;

	sl_buf_init(&sql, 0);
	sl_buf_printf(&sql, "COMMENT ON PUBLICATION %s IS '" SL_PG_PUB_COMMENT "'", qpub);
	res = PQexec(c, sl_buf_failed(&sql) ? "" : sql.data);
	if (PQresultStatus(res) != PGRES_COMMAND_OK)
		sl_warn("could not mark publication \"%s\" as sluice's own: %s", pub, PQresultErrorMessage(res));
	PQclear(res);
	sl_buf_free(&sql);
}

int sl_pg_ensure_publication(PGconn *c, const char *pub, struct sl_table *const *tables, int n,
			     char *err, size_t errlen)
{
	const char *params[1] = { pub };
	PGresult *res = NULL;
	struct sl_buf sql, missing;
	char *qpub = PQescapeIdentifier(c, pub, strlen(pub));
	int rc = SL_OK, nmissing = 0;
	bool exists = false;

	sl_buf_init(&sql, 0);
	sl_buf_init(&missing, 0);
	if (!qpub) {
		return sl_pg_err(err, errlen, "could not quote the publication name", c, NULL);
	}
	for (int attempt = 0; attempt < 2; attempt++) {
		if ((rc = sl_pg_publication_fit(c, pub, tables, n, &exists, err, errlen)) < 0)
			goto out;
		if (exists)
			break;
		sl_buf_reset(&sql);
		sl_buf_printf(&sql, "CREATE PUBLICATION %s FOR TABLE ", qpub);
		for (int i = 0; i < n; i++)
			if (append_pub_table(&sql, c, tables[i], i == 0) < 0)
				goto quote_fail;
		sl_buf_puts(&sql, " WITH (publish_via_partition_root = true)");
		if (sl_buf_failed(&sql))
			goto quote_fail;
		res = PQexec(c, sql.data);
		if (PQresultStatus(res) == PGRES_COMMAND_OK) {
			sl_info("created publication \"%s\"", pub);
			mark_own_publication(c, qpub, pub);
			goto out;
		}
		/* Another stream sharing the publication created it meanwhile:
		 * look again and add what is missing. */
		if (attempt == 0 && (sl_pg_sqlstate_is(res, "42710") || sl_pg_sqlstate_is(res, "23505"))) {
			PQclear(res);
			res = NULL;
			continue;
		}
		goto exec_fail;
	}
	res = PQexecParams(c, "SELECT schemaname, tablename FROM pg_publication_tables WHERE pubname = $1",
			   1, NULL, params, NULL, NULL, 0);
	if (PQresultStatus(res) != PGRES_TUPLES_OK) {
		rc = sl_pg_err(err, errlen, "could not list the tables of the publication", c, res);
		goto out;
	}
	for (int i = 0; i < n; i++)
		if (!listed(res, tables[i]) && append_pub_table(&missing, c, tables[i], nmissing++ == 0) < 0)
			goto quote_fail;
	PQclear(res);
	res = NULL;
	if (nmissing == 0)
		goto out;
	sl_buf_reset(&sql);
	sl_buf_printf(&sql, "ALTER PUBLICATION %s ADD TABLE %s", qpub, missing.data);
	if (sl_buf_failed(&sql) || sl_buf_failed(&missing))
		goto quote_fail;
	res = PQexec(c, sql.data);
	if (PQresultStatus(res) != PGRES_COMMAND_OK)
		goto exec_fail;
	sl_info("added missing tables to publication \"%s\"", pub);
	goto out;
exec_fail: {
		struct sl_buf what;
		sl_buf_init(&what, 0);
		sl_buf_printf(&what, "could not %s publication \"%s\"", exists ? "add tables to" : "create", pub);
		if (sl_pg_sqlstate_is(res, "42501"))
			sl_buf_printf(&what, " (as the owner of the tables%s, or a superuser, run: %s)",
				      exists ? " and of the publication" : "", sql.data);
		rc = sl_pg_err(err, errlen, sl_buf_failed(&what) ? "could not change the publication" : what.data,
			       c, res);
		sl_buf_free(&what);
		goto out;
	}
quote_fail:
	if (sl_buf_failed(&sql) || sl_buf_failed(&missing))
		snprintf(err, errlen, "out of memory building the publication statement");
	else
		sl_pg_err(err, errlen, "could not quote a table name for the publication", c, NULL);
	rc = SL_EFAIL;
out:
	PQclear(res);
	PQfreemem(qpub);
	sl_buf_free(&sql);
	sl_buf_free(&missing);
	return rc;
}

static int parse_lsn_or_zero(const char *s, uint64_t *out)
{
	if (!s || !*s) {
		*out = 0;
		return 0;
	}
	return sl_lsn_parse(s, out);
}

int sl_pg_slot_info(PGconn *c, const char *slot, struct sl_pg_slot_info *out, char *err, size_t errlen)
{
	const char *params[1] = { slot };
	PGresult *res = PQexecParams(c,
		"SELECT active, slot_type = 'logical', coalesce(plugin, ''), coalesce(database, ''), "
		"       coalesce(wal_status, ''), confirmed_flush_lsn, restart_lsn, "
		"       pg_wal_lsn_diff(pg_current_wal_lsn(), confirmed_flush_lsn)::bigint, "
		"       pg_wal_lsn_diff(pg_current_wal_lsn(), restart_lsn)::bigint, safe_wal_size, active_pid "
		"FROM pg_replication_slots WHERE slot_name = $1", 1, NULL, params, NULL, NULL, 0);
	int rc = SL_OK;
	int64_t v;

	memset(out, 0, sizeof *out);
	out->lag_bytes = out->retained_bytes = out->safe_wal_size = -1;
	if (PQresultStatus(res) != PGRES_TUPLES_OK) {
		rc = sl_pg_err(err, errlen, "could not read pg_replication_slots", c, res);
		goto out;
	}
	if (PQntuples(res) == 0)
		goto out;
	out->exists = true;
	out->active = !strcmp(PQgetvalue(res, 0, 0), "t");
	out->logical = !strcmp(PQgetvalue(res, 0, 1), "t");
	snprintf(out->plugin, sizeof out->plugin, "%s", PQgetvalue(res, 0, 2));
	snprintf(out->database, sizeof out->database, "%s", PQgetvalue(res, 0, 3));
	snprintf(out->wal_status, sizeof out->wal_status, "%s", PQgetvalue(res, 0, 4));
	if (parse_lsn_or_zero(PQgetvalue(res, 0, 5), &out->confirmed_flush_lsn) < 0 ||
	    parse_lsn_or_zero(PQgetvalue(res, 0, 6), &out->restart_lsn) < 0) {
		snprintf(err, errlen, "could not parse the positions of slot \"%s\"", slot);
		rc = SL_EFAIL;
		goto out;
	}
	if (!PQgetisnull(res, 0, 7) && sl_parse_i64(PQgetvalue(res, 0, 7), INT64_MIN, INT64_MAX, &v) == 0)
		out->lag_bytes = v;
	if (!PQgetisnull(res, 0, 8) && sl_parse_i64(PQgetvalue(res, 0, 8), INT64_MIN, INT64_MAX, &v) == 0)
		out->retained_bytes = v;
	if (!PQgetisnull(res, 0, 9) && sl_parse_i64(PQgetvalue(res, 0, 9), INT64_MIN, INT64_MAX, &v) == 0)
		out->safe_wal_size = v;
	if (!PQgetisnull(res, 0, 10) && sl_parse_i64(PQgetvalue(res, 0, 10), 0, INT32_MAX, &v) == 0)
		out->active_pid = (int)v;
out:
	PQclear(res);
	return rc;
}

int sl_pg_server_time_us(PGconn *c, int64_t *out, char *err, size_t errlen)
{
	PGresult *res = PQexec(c, "SELECT (extract(epoch FROM clock_timestamp()) * 1000000)::bigint");
	int rc = SL_OK;

	if (PQresultStatus(res) != PGRES_TUPLES_OK ||
	    sl_parse_i64(PQgetvalue(res, 0, 0), INT64_MIN, INT64_MAX, out) < 0) {
		rc = sl_pg_err(err, errlen, "could not read the server's clock", c, res);
	}
	PQclear(res);
	return rc;
}

int sl_pg_oid_array(struct sl_buf *b, struct sl_table *const *tables, int n)
{
	sl_buf_putc(b, '{');
	for (int i = 0; i < n; i++)
		sl_buf_printf(b, "%s%u", i ? "," : "", tables[i]->relid);
	sl_buf_putc(b, '}');
	return sl_buf_failed(b) ? -1 : 0;
}

int sl_pg_read_grants(PGconn *c, struct sl_table *const *tables, int n, struct sl_buf *grants, char *err,
		      size_t errlen)
{
	struct sl_buf oids;
	const char *params[1];
	PGresult *res = NULL;
	int rc = SL_OK;

	sl_buf_init(&oids, 0);
	if (sl_pg_oid_array(&oids, tables, n) < 0) {
		snprintf(err, errlen, "out of memory");
		rc = SL_EFAIL;
		goto out;
	}
	params[0] = oids.data;
	/* Schema USAGE first: without it SELECT on a table is of no use, and
	 * has_table_privilege() does not look at the schema. */
	res = PQexecParams(c, "SELECT n.nspname, c.relname, has_schema_privilege(n.oid, 'USAGE'), "
			      "       has_table_privilege(c.oid, 'SELECT') "
			      "FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
			      "WHERE c.oid = ANY($1::oid[]) ORDER BY n.nspname, c.relname", 1, NULL, params, NULL, NULL, 0);
	if (PQresultStatus(res) != PGRES_TUPLES_OK) {
		rc = sl_pg_err(err, errlen, "could not check the role's privileges on the tables", c, res);
		goto out;
	}
	for (int i = 0; i < PQntuples(res); i++) {
		const char *ns = PQgetvalue(res, i, 0);
		struct sl_table t = { .ns = (char *)ns, .name = PQgetvalue(res, i, 1) };
		if (strcmp(PQgetvalue(res, i, 2), "t") != 0) {
			/* once per schema: the rows come sorted by schema */
			if (i == 0 || strcmp(PQgetvalue(res, i - 1, 0), ns) != 0) {
				sl_buf_puts(grants, grants->len ? "; " : "");
				sl_buf_puts(grants, "GRANT USAGE ON SCHEMA ");
				if (sl_pg_append_ident(grants, c, ns) < 0)
					goto quote_fail;
				sl_buf_puts(grants, " TO ");
				if (sl_pg_append_ident(grants, c, PQuser(c)) < 0)
					goto quote_fail;
			}
		}
		if (strcmp(PQgetvalue(res, i, 3), "t") != 0) {
			sl_buf_puts(grants, grants->len ? "; " : "");
			sl_buf_puts(grants, "GRANT SELECT ON ");
			if (sl_pg_append_qualified(grants, c, &t) < 0)
				goto quote_fail;
			sl_buf_puts(grants, " TO ");
			if (sl_pg_append_ident(grants, c, PQuser(c)) < 0)
				goto quote_fail;
		}
	}
	if (sl_buf_failed(grants)) {
		snprintf(err, errlen, "out of memory");
		rc = SL_EFAIL;
	}
	goto out;
quote_fail:
	rc = sl_pg_err(err, errlen, "could not quote a name for a GRANT statement", c, NULL);
out:
	PQclear(res);
	sl_buf_free(&oids);
	return rc;
}

int sl_pg_wal_sender_timeout_ms(PGconn *c, int64_t *out, char *err, size_t errlen)
{
	PGresult *res = PQexec(c, "SELECT setting FROM pg_settings WHERE name = 'wal_sender_timeout'");
	int rc = SL_OK;

	if (PQresultStatus(res) != PGRES_TUPLES_OK || PQntuples(res) != 1 ||
	    sl_parse_i64(PQgetvalue(res, 0, 0), 0, INT32_MAX, out) < 0) {
		rc = sl_pg_err(err, errlen, "could not read wal_sender_timeout", c, res);
	}
	PQclear(res);
	return rc;
}

int sl_pg_current_lsn(PGconn *c, uint64_t *out, char *err, size_t errlen)
{
	/* a standby has no current WAL position to read (the function fails
	 * during recovery): it is refused as the prerequisites refuse it */
	PGresult *res = PQexec(c, "SELECT CASE WHEN pg_is_in_recovery() THEN NULL ELSE pg_current_wal_lsn() END");
	int rc = SL_OK;

	if (PQresultStatus(res) != PGRES_TUPLES_OK || PQntuples(res) != 1) {
		rc = sl_pg_err(err, errlen, "could not read the current WAL position", c, res);
	} else if (PQgetisnull(res, 0, 0)) {
		rc = standby_refused(c, err, errlen);
	} else if (sl_lsn_parse(PQgetvalue(res, 0, 0), out) < 0) {
		snprintf(err, errlen, "could not parse WAL position \"%s\"", PQgetvalue(res, 0, 0));
		rc = SL_EFAIL;
	}
	PQclear(res);
	return rc;
}

