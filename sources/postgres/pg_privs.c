/*
 * sources/postgres/pg_privs.c: whether the role can make the stream's
 * publication what `sluice run` needs, checked by `sluice check` without
 * changing anything.
 *
 * PostgreSQL's rules: CREATE PUBLICATION ... FOR TABLE needs the CREATE
 * privilege on the database and ownership of every table named;
 * ALTER PUBLICATION ... ADD TABLE needs ownership of the publication and of
 * every table added; a superuser may do both.  Ownership includes being a
 * member of the owning role (pg_has_role(owner, 'USAGE')).  When the role
 * may not, check fails with exit 3 and the statement that the owner (or a
 * superuser) should run, so that `sluice run` finds the publication ready.
 */
#include "sources/postgres/pg_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/buf.h"
#include "common/util.h"

struct pub_table {
	const struct sl_table *t;
	bool missing;   /* not published by the publication (directly, through a parent, or FOR ALL/SCHEMA) */
	bool owned;     /* the role owns it */
};

/* Fills tabs[i] for tables[i]; *exists, *pub_owned, *superuser, *may_create. */
static int read_state(PGconn *c, const char *pub, struct sl_table *const *tables, int n, struct pub_table *tabs,
		      bool *exists, bool *pub_owned, bool *superuser, bool *may_create, char *err, size_t errlen)
{
	struct sl_buf oids;
	const char *params[2];
	PGresult *res = NULL;
	int rc = SL_OK;

	sl_buf_init(&oids, 0);
	params[0] = pub;
	res = PQexecParams(c,
		"SELECT (SELECT rolsuper FROM pg_roles WHERE rolname = current_user), "
		"       has_database_privilege(current_database(), 'CREATE'), "
		"       (SELECT count(*) > 0 FROM pg_publication WHERE pubname = $1), "
		"       coalesce((SELECT pg_has_role(pubowner, 'USAGE') FROM pg_publication WHERE pubname = $1), false)",
		1, NULL, params, NULL, NULL, 0);
	if (PQresultStatus(res) != PGRES_TUPLES_OK || PQntuples(res) != 1) {
		rc = sl_pg_err(err, errlen, "could not check the publication privileges", c, res);
		goto out;
	}
	*superuser = !strcmp(PQgetvalue(res, 0, 0), "t");
	*may_create = !strcmp(PQgetvalue(res, 0, 1), "t");
	*exists = !strcmp(PQgetvalue(res, 0, 2), "t");
	*pub_owned = !strcmp(PQgetvalue(res, 0, 3), "t");
	PQclear(res);
	res = NULL;

	if (sl_pg_oid_array(&oids, tables, n) < 0) {
		snprintf(err, errlen, "out of memory");
		rc = SL_EFAIL;
		goto out;
	}
	params[1] = oids.data;
	res = PQexecParams(c,
		"SELECT t.oid, pg_has_role(c.relowner, 'USAGE'), "
		"       NOT (EXISTS (SELECT 1 FROM pg_publication_tables pt WHERE pt.pubname = $1 "
		"                    AND pt.schemaname = n.nspname AND pt.tablename = c.relname) "
		"            OR EXISTS (SELECT 1 FROM pg_publication p JOIN pg_publication_rel r ON r.prpubid = p.oid "
		"                       WHERE p.pubname = $1 AND (r.prrelid = t.oid OR r.prrelid IN "
		"                             (SELECT relid FROM pg_partition_ancestors(t.oid))))) "
		"FROM unnest($2::oid[]) AS t(oid) JOIN pg_class c ON c.oid = t.oid "
		"JOIN pg_namespace n ON n.oid = c.relnamespace", 2, NULL, params, NULL, NULL, 0);
	if (PQresultStatus(res) != PGRES_TUPLES_OK) {
		rc = sl_pg_err(err, errlen, "could not check the publication's tables", c, res);
		goto out;
	}
	for (int i = 0; i < n; i++) {
		tabs[i].t = tables[i];
		tabs[i].missing = true;
		tabs[i].owned = false;
	}
	for (int r = 0; r < PQntuples(res); r++) {
		uint64_t oid;
		if (sl_parse_u64(PQgetvalue(res, r, 0), UINT32_MAX, &oid) < 0)
			continue;
		for (int i = 0; i < n; i++) {
			if (tables[i]->relid != (uint32_t)oid)
				continue;
			tabs[i].owned = !strcmp(PQgetvalue(res, r, 1), "t");
			tabs[i].missing = !*exists || !strcmp(PQgetvalue(res, r, 2), "t");
		}
	}
out:
	PQclear(res);
	sl_buf_free(&oids);
	return rc;
}

int sl_pg_publication_missing(PGconn *c, const char *pub, struct sl_table *const *tables, int n, bool *missing,
			      char *err, size_t errlen)
{
	struct pub_table *tabs = calloc((size_t)(n > 0 ? n : 1), sizeof *tabs);
	bool exists, pub_owned, superuser, may_create;
	int rc;

	if (!tabs) {
		snprintf(err, errlen, "out of memory");
		return SL_EFAIL;
	}
	rc = read_state(c, pub, tables, n, tabs, &exists, &pub_owned, &superuser, &may_create, err, errlen);
	for (int i = 0; i < n && rc == SL_OK; i++)
		missing[i] = tabs[i].missing;
	free(tabs);
	return rc;
}

/* Appends the names of the tables that want (missing / not owned), "a.b, c.d". */
static void names(struct sl_buf *b, const struct pub_table *tabs, int n, bool only_missing, bool only_not_owned)
{
	int k = 0;

	for (int i = 0; i < n; i++) {
		if ((only_missing && !tabs[i].missing) || (only_not_owned && tabs[i].owned))
			continue;
		sl_buf_printf(b, "%s%s.%s", k++ ? ", " : "", tabs[i].t->ns, tabs[i].t->name);
	}
}

int sl_pg_check_publication(PGconn *c, const struct sl_source_stream *st, struct sl_table *const *tables, int n,
			    FILE *out, char *err, size_t errlen)
{
	struct pub_table *tabs = calloc((size_t)(n > 0 ? n : 1), sizeof *tabs);
	struct sl_buf sql, why, list;
	char *qpub = NULL;
	bool exists = false, pub_owned = false, superuser = false, may_create = false, ok = true;
	int rc, nmissing = 0, k = 0;

	sl_buf_init(&sql, 0);
	sl_buf_init(&why, 0);
	sl_buf_init(&list, 0);
	if (!tabs) {
		snprintf(err, errlen, "out of memory");
		rc = SL_EFAIL;
		goto out;
	}
	if ((rc = read_state(c, sl_pg_stream(st)->publication, tables, n, tabs, &exists, &pub_owned, &superuser, &may_create,
			     err, errlen)) < 0)
		goto out;
	for (int i = 0; i < n; i++)
		nmissing += tabs[i].missing;
	if (exists && nmissing == 0) {
		if (out)
			fprintf(out, "stream %s: publication %s: exists and publishes every table\n", st->name, sl_pg_stream(st)->publication);
		goto out;
	}
	if (!(qpub = PQescapeIdentifier(c, sl_pg_stream(st)->publication, strlen(sl_pg_stream(st)->publication)))) {
		rc = sl_pg_err(err, errlen, "could not quote the publication name", c, NULL);
		goto out;
	}
	sl_buf_printf(&sql, exists ? "ALTER PUBLICATION %s ADD TABLE " : "CREATE PUBLICATION %s FOR TABLE ", qpub);
	for (int i = 0; i < n; i++) {
		if (!tabs[i].missing)
			continue;
		sl_buf_puts(&sql, k++ ? ", " : "");
		if (sl_pg_append_qualified(&sql, c, tabs[i].t) < 0) {
			snprintf(err, errlen, "could not quote a table name for the publication");
			rc = SL_EFAIL;
			goto out;
		}
	}
	if (!superuser) {
		bool owns_all = true;
		for (int i = 0; i < n; i++)
			if (tabs[i].missing && !tabs[i].owned)
				owns_all = false;
		if (!exists && !may_create) {
			sl_buf_printf(&why, "it lacks the CREATE privilege on database \"%s\"", PQdb(c));
			ok = false;
		}
		if (exists && !pub_owned) {
			sl_buf_printf(&why, "it does not own the publication");
			ok = false;
		}
		if (!owns_all) {
			sl_buf_printf(&why, "%sit does not own ", ok ? "" : " and ");
			names(&why, tabs, n, true, true);
			ok = false;
		}
	}
	if (sl_buf_failed(&sql) || sl_buf_failed(&why)) {
		snprintf(err, errlen, "out of memory");
		rc = SL_EFAIL;
		goto out;
	}
	if (!ok) {
		snprintf(err, errlen, "stream \"%s\": role \"%s\" may not %s publication \"%s\" (%s), so the stream cannot "
			 "start; ask a superuser, or the owner of the tables%s, to run: %s", st->name, PQuser(c),
			 exists ? "add tables to" : "create", sl_pg_stream(st)->publication, why.data,
			 exists ? " and of the publication" : "", sql.data);
		rc = SL_EPREREQ;
		goto out;
	}
	names(&list, tabs, n, true, false);
	if (out && exists)
		fprintf(out, "stream %s: publication %s: exists; sluice run adds %s\n", st->name, sl_pg_stream(st)->publication,
			list.data ? list.data : "");
	else if (out)
		fprintf(out, "stream %s: publication %s: sluice run creates it\n", st->name, sl_pg_stream(st)->publication);
out:
	PQfreemem(qpub);
	free(tabs);
	sl_buf_free(&sql);
	sl_buf_free(&why);
	sl_buf_free(&list);
	return rc;
}
