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

/* Session settings that fix the text format of every value we parse. */
#define SESSION_OPTIONS "-c datestyle=ISO,YMD -c intervalstyle=postgres -c timezone=UTC " \
			"-c extra_float_digits=3 -c bytea_output=hex"

void sl_pg_err(char *err, size_t errlen, const char *what, PGconn *c, PGresult *res)
{
	const char *m = res ? PQresultErrorMessage(res) : PQerrorMessage(c);
	int l = (int)strlen(m);

	while (l > 0 && (m[l - 1] == '\n' || m[l - 1] == ' '))
		l--;
	snprintf(err, errlen, "%s: %.*s", what, l, m);
}

PGconn *sl_pg_connect(const struct sl_source_config *cfg, bool replication, char *err, size_t errlen)
{
	const char *keys[16], *vals[16];
	char port[16], timeout[16];
	int n = 0;
	PGconn *c;

	snprintf(port, sizeof port, "%d", cfg->port);
	snprintf(timeout, sizeof timeout, "%d", cfg->connect_timeout > 0 ? cfg->connect_timeout : 10);
#define KV(k, v) do { const char *v_ = (v); if (v_) { keys[n] = (k); vals[n] = v_; n++; } } while (0)
	KV("host", cfg->host);
	KV("port", port);
	KV("user", cfg->user);
	KV("dbname", cfg->dbname);
	KV("password", cfg->password);
	KV("sslmode", cfg->sslmode);
	KV("sslrootcert", cfg->sslrootcert);
	KV("connect_timeout", timeout);
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
			 cfg->name, cfg->host, cfg->port, cfg->dbname ? cfg->dbname : "",
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

int sl_pg_check_prereqs(PGconn *c, char *err, size_t errlen)
{
	PGresult *res = PQexec(c, "SELECT current_setting('wal_level'), "
				  "(SELECT rolreplication OR rolsuper FROM pg_roles WHERE rolname = current_user)");
	int rc = SL_OK;

	if (PQresultStatus(res) != PGRES_TUPLES_OK) {
		sl_pg_err(err, errlen, "could not read wal_level", c, res);
		rc = SL_EFAIL;
	} else if (strcmp(PQgetvalue(res, 0, 0), "logical") != 0) {
		snprintf(err, errlen, "source prerequisite not met: wal_level is \"%s\", logical replication needs "
			 "wal_level = logical (set it in postgresql.conf and restart the server)",
			 PQgetvalue(res, 0, 0));
		rc = SL_EPREREQ;
	} else if (strcmp(PQgetvalue(res, 0, 1), "t") != 0) {
		snprintf(err, errlen, "source prerequisite not met: role \"%s\" lacks the REPLICATION attribute "
			 "(ALTER ROLE ... WITH REPLICATION)", PQuser(c));
		rc = SL_EPREREQ;
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

static int describe_table(PGconn *c, const char *oid, struct sl_table *t, char *err, size_t errlen)
{
	const char *params[1] = { oid };
	PGresult *res = PQexecParams(c,
		"SELECT a.attname, a.atttypid, a.atttypmod, format_type(a.atttypid, a.atttypmod), "
		"       coalesce(a.attnum = ANY(i.indkey), false) "
		"FROM pg_attribute a LEFT JOIN pg_index i ON i.indrelid = a.attrelid AND i.indisprimary "
		"WHERE a.attrelid = $1::oid AND a.attnum > 0 AND NOT a.attisdropped AND a.attgenerated = '' "
		"ORDER BY a.attnum", 1, NULL, params, NULL, NULL, 0);
	int rc = SL_OK;

	if (PQresultStatus(res) != PGRES_TUPLES_OK) {
		sl_pg_err(err, errlen, "could not read the columns of a table", c, res);
		rc = SL_EFAIL;
		goto out;
	}
	for (int i = 0; i < PQntuples(res); i++) {
		uint64_t typ;
		int64_t mod;
		int precision = 0, scale = 0;
		enum sl_type type;
		if (sl_parse_u64(PQgetvalue(res, i, 1), UINT32_MAX, &typ) < 0 ||
		    sl_parse_i64(PQgetvalue(res, i, 2), INT32_MIN, INT32_MAX, &mod) < 0)
			goto bad;
		type = sl_pg_type_map((uint32_t)typ, (int32_t)mod, &precision, &scale);
		if (sl_table_add_column(t, PQgetvalue(res, i, 0), type, precision, scale, (uint32_t)typ,
					(int32_t)mod, PQgetvalue(res, i, 3), !strcmp(PQgetvalue(res, i, 4), "t")) < 0)
			goto bad;
	}
	if (sl_table_finish(t) < 0) {
		snprintf(err, errlen, "out of memory describing \"%s\".\"%s\"", t->ns, t->name);
		rc = SL_EFAIL;
	}
	goto out;
bad:
	snprintf(err, errlen, "could not describe table \"%s\".\"%s\"", t->ns, t->name);
	rc = SL_EFAIL;
out:
	PQclear(res);
	return rc;
}

int sl_pg_list_tables(PGconn *c, char *const *include, char *const *exclude,
		      struct sl_table ***out, int *n, char *err, size_t errlen)
{
	PGresult *res = PQexec(c,
		"SELECT c.oid, n.nspname, c.relname FROM pg_class c "
		"JOIN pg_namespace n ON n.oid = c.relnamespace "
		"WHERE c.relkind IN ('r', 'p') AND NOT c.relispartition "
		"AND n.nspname NOT IN ('pg_catalog', 'information_schema') "
		"AND n.nspname NOT LIKE 'pg\\_toast%' AND n.nspname NOT LIKE 'pg\\_temp\\_%' "
		"ORDER BY n.nspname, c.relname");
	struct sl_table **tabs = NULL;
	struct sl_buf full;
	int cnt = 0, rc = SL_OK;

	sl_buf_init(&full, 0);
	*out = NULL;
	*n = 0;
	if (PQresultStatus(res) != PGRES_TUPLES_OK) {
		sl_pg_err(err, errlen, "could not list tables", c, res);
		rc = SL_EFAIL;
		goto out;
	}
	tabs = calloc((size_t)PQntuples(res) + 1, sizeof *tabs);
	if (!tabs) {
		snprintf(err, errlen, "out of memory listing tables");
		rc = SL_EFAIL;
		goto out;
	}
	for (int i = 0; i < PQntuples(res); i++) {
		const char *ns = PQgetvalue(res, i, 1), *name = PQgetvalue(res, i, 2);
		uint64_t oid;
		sl_buf_reset(&full);
		sl_buf_printf(&full, "%s.%s", ns, name);
		if (sl_buf_failed(&full) || !matches(include, full.data) || matches(exclude, full.data))
			continue;
		tabs[cnt] = sl_table_new(ns, name);
		if (!tabs[cnt] || sl_parse_u64(PQgetvalue(res, i, 0), UINT32_MAX, &oid) < 0) {
			snprintf(err, errlen, "out of memory listing tables");
			rc = SL_EFAIL;
			goto out;
		}
		tabs[cnt]->relid = (uint32_t)oid;
		cnt++;
		rc = describe_table(c, PQgetvalue(res, i, 0), tabs[cnt - 1], err, errlen);
		if (rc < 0)
			goto out;
	}
	*out = tabs;
	*n = cnt;
	tabs = NULL;
out:
	sl_pg_tables_free(tabs, cnt);
	sl_buf_free(&full);
	PQclear(res);
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

int sl_pg_ensure_publication(PGconn *c, const char *pub, struct sl_table *const *tables, int n,
			     char *err, size_t errlen)
{
	const char *params[1] = { pub };
	PGresult *res = NULL;
	struct sl_buf sql, missing;
	char *qpub = PQescapeIdentifier(c, pub, strlen(pub));
	int rc = SL_OK, nmissing = 0;
	bool exists;

	sl_buf_init(&sql, 0);
	sl_buf_init(&missing, 0);
	if (!qpub) {
		sl_pg_err(err, errlen, "could not quote the publication name", c, NULL);
		return SL_EFAIL;
	}
	res = PQexecParams(c, "SELECT count(*) FROM pg_publication WHERE pubname = $1", 1, NULL, params, NULL, NULL, 0);
	if (PQresultStatus(res) != PGRES_TUPLES_OK) {
		sl_pg_err(err, errlen, "could not look up the publication", c, res);
		rc = SL_EFAIL;
		goto out;
	}
	exists = strcmp(PQgetvalue(res, 0, 0), "0") != 0;
	PQclear(res);
	res = NULL;

	if (exists) {
		res = PQexecParams(c, "SELECT schemaname, tablename FROM pg_publication_tables WHERE pubname = $1",
				   1, NULL, params, NULL, NULL, 0);
		if (PQresultStatus(res) != PGRES_TUPLES_OK) {
			sl_pg_err(err, errlen, "could not list the tables of the publication", c, res);
			rc = SL_EFAIL;
			goto out;
		}
		for (int i = 0; i < n; i++) {
			bool found = false;
			for (int j = 0; j < PQntuples(res) && !found; j++)
				found = !strcmp(PQgetvalue(res, j, 0), tables[i]->ns) &&
					!strcmp(PQgetvalue(res, j, 1), tables[i]->name);
			if (found)
				continue;
			sl_buf_puts(&missing, nmissing++ ? ", " : "");
			if (sl_pg_append_qualified(&missing, c, tables[i]) < 0)
				goto quote_fail;
		}
		PQclear(res);
		res = NULL;
		if (nmissing == 0)
			goto out;
		sl_buf_printf(&sql, "ALTER PUBLICATION %s ADD TABLE %s", qpub, missing.data);
	} else {
		sl_buf_printf(&sql, "CREATE PUBLICATION %s FOR TABLE ", qpub);
		for (int i = 0; i < n; i++) {
			sl_buf_puts(&sql, i ? ", " : "");
			if (sl_pg_append_qualified(&sql, c, tables[i]) < 0)
				goto quote_fail;
		}
	}
	if (sl_buf_failed(&sql) || sl_buf_failed(&missing)) {
		snprintf(err, errlen, "out of memory building the publication statement");
		rc = SL_EFAIL;
		goto out;
	}
	res = PQexec(c, sql.data);
	if (PQresultStatus(res) != PGRES_COMMAND_OK) {
		char what[256];
		snprintf(what, sizeof what, "could not %s publication \"%s\"", exists ? "add tables to" : "create", pub);
		sl_pg_err(err, errlen, what, c, res);
		if (sl_pg_sqlstate_is(res, "42501")) {
			size_t l = strlen(err);
			snprintf(err + l, errlen - l, " (create it as its owner or a superuser: %s)", sql.data);
			rc = SL_EPREREQ;
		} else {
			rc = SL_EFAIL;
		}
		goto out;
	}
	sl_info("%s publication \"%s\"", exists ? "added missing tables to" : "created", pub);
	goto out;
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
		sl_pg_err(err, errlen, "could not read pg_replication_slots", c, res);
		rc = SL_EFAIL;
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
		sl_pg_err(err, errlen, "could not read the server's clock", c, res);
		rc = SL_EFAIL;
	}
	PQclear(res);
	return rc;
}

int sl_pg_can_select(PGconn *c, const struct sl_table *t, bool *ok, char *err, size_t errlen)
{
	char oid[16];
	const char *params[1] = { oid };
	PGresult *res;
	int rc = SL_OK;

	snprintf(oid, sizeof oid, "%u", t->relid);
	res = PQexecParams(c, "SELECT has_table_privilege($1::oid, 'SELECT')", 1, NULL, params, NULL, NULL, 0);
	if (PQresultStatus(res) != PGRES_TUPLES_OK) {
		sl_pg_err(err, errlen, "could not check SELECT privileges", c, res);
		rc = SL_EFAIL;
	} else {
		*ok = !strcmp(PQgetvalue(res, 0, 0), "t");
	}
	PQclear(res);
	return rc;
}

int sl_pg_wal_sender_timeout_ms(PGconn *c, int64_t *out, char *err, size_t errlen)
{
	PGresult *res = PQexec(c, "SELECT setting FROM pg_settings WHERE name = 'wal_sender_timeout'");
	int rc = SL_OK;

	if (PQresultStatus(res) != PGRES_TUPLES_OK || PQntuples(res) != 1 ||
	    sl_parse_i64(PQgetvalue(res, 0, 0), 0, INT32_MAX, out) < 0) {
		sl_pg_err(err, errlen, "could not read wal_sender_timeout", c, res);
		rc = SL_EFAIL;
	}
	PQclear(res);
	return rc;
}

int sl_pg_current_lsn(PGconn *c, uint64_t *out, char *err, size_t errlen)
{
	PGresult *res = PQexec(c, "SELECT pg_current_wal_lsn()");
	int rc = SL_OK;

	if (PQresultStatus(res) != PGRES_TUPLES_OK) {
		sl_pg_err(err, errlen, "could not read the current WAL position", c, res);
		rc = SL_EFAIL;
	} else if (sl_lsn_parse(PQgetvalue(res, 0, 0), out) < 0) {
		snprintf(err, errlen, "could not parse WAL position \"%s\"", PQgetvalue(res, 0, 0));
		rc = SL_EFAIL;
	}
	PQclear(res);
	return rc;
}

