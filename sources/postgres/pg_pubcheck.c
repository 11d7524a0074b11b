/*
 * sources/postgres/pg_pubcheck.c: what a publication that the user made can
 * do to a stream, checked by `sluice check` and `sluice run` alike.
 *
 * A column list or a row filter (PostgreSQL 15: pg_publication_rel.prattrs,
 * prqual) narrows what pgoutput sends, but not what the backfill reads: the
 * output would hold rows and columns that CDC never updates.  sluice refuses
 * them rather than mirror half a table.
 */
#include "sources/postgres/pg_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/buf.h"
#include "common/util.h"

int sl_pg_publication_filters(PGconn *c, const char *pub, struct sl_table *const *tables, int n, char *err,
			      size_t errlen)
{
	struct sl_buf oids;
	const char *params[2];
	PGresult *res = NULL;
	char *q = NULL;
	int rc = SL_OK;

	if (PQserverVersion(c) < 150000)
		return SL_OK;   /* no column lists or row filters before 15 */
	sl_buf_init(&oids, 0);
	if (sl_pg_oid_array(&oids, tables, n) < 0) {
		snprintf(err, errlen, "out of memory");
		rc = SL_EFAIL;
		goto out;
	}
	params[0] = pub;
	params[1] = oids.data;
	res = PQexecParams(c, "SELECT n.nspname, c.relname, r.prattrs IS NOT NULL, r.prqual IS NOT NULL "
			      "FROM pg_publication p JOIN pg_publication_rel r ON r.prpubid = p.oid "
			      "JOIN pg_class c ON c.oid = r.prrelid JOIN pg_namespace n ON n.oid = c.relnamespace "
			      "WHERE p.pubname = $1 AND r.prrelid = ANY($2::oid[]) "
			      "AND (r.prattrs IS NOT NULL OR r.prqual IS NOT NULL) "
			      "ORDER BY n.nspname, c.relname LIMIT 1", 2, NULL, params, NULL, NULL, 0);
	if (PQresultStatus(res) != PGRES_TUPLES_OK) {
		rc = sl_pg_err(err, errlen, "could not read the column lists and row filters of the publication", c, res);
		goto out;
	}
	if (PQntuples(res) == 0)
		goto out;
	if (!(q = PQescapeIdentifier(c, pub, strlen(pub)))) {
		rc = sl_pg_err(err, errlen, "could not quote the publication name", c, NULL);
		goto out;
	}
	snprintf(err, errlen, "publication \"%s\" publishes table \"%s\".\"%s\" with a %s, which the backfill "
		 "cannot obey (it reads every row and column), so the output would mix rows and columns that CDC "
		 "never updates: publish the whole table (ALTER PUBLICATION %s SET TABLE ... without a column "
		 "list or WHERE), or give the stream a publication of its own (publication = ...)", pub,
		 PQgetvalue(res, 0, 0), PQgetvalue(res, 0, 1),
		 !strcmp(PQgetvalue(res, 0, 2), "t") && !strcmp(PQgetvalue(res, 0, 3), "t")
		 ? "column list and a row filter" : !strcmp(PQgetvalue(res, 0, 2), "t") ? "column list"
		 : "row filter (WHERE)", q);
	rc = SL_EPREREQ;
out:
	PQfreemem(q);
	PQclear(res);
	sl_buf_free(&oids);
	return rc;
}
