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

/* Whether sluice created publication pub (its comment says so), or pub does
 * not exist (sluice creates it). */
static int sluice_owns(PGconn *c, const char *pub, bool *owns, char *err, size_t errlen)
{
	const char *params[1] = { pub };
	PGresult *res = PQexecParams(c, "SELECT coalesce(obj_description(oid, 'pg_publication'), '') = '"
				     SL_PG_PUB_COMMENT "' FROM pg_publication WHERE pubname = $1",
				     1, NULL, params, NULL, NULL, 0);
	int rc = SL_OK;

	if (PQresultStatus(res) != PGRES_TUPLES_OK)
		rc = sl_pg_err(err, errlen, "could not read the comment of the publication", c, res);
	else
		*owns = PQntuples(res) == 0 || !strcmp(PQgetvalue(res, 0, 0), "t");
	PQclear(res);
	return rc;
}

static bool known(const struct sl_source_stream *st, const struct sl_table *t, struct sl_buf *full)
{
	sl_buf_reset(full);
	sl_buf_printf(full, "%s.%s", t->ns, t->name);
	for (char *const *k = st->known_tables; k && *k && !sl_buf_failed(full); k++)
		if (!strcmp(*k, full->data))
			return true;
	return false;
}

/* The message for table t, missing from the user's publication. */
static int left_user_publication(PGconn *c, const struct sl_source_stream *st, const struct sl_table *t,
				 char *err, size_t errlen)
{
	struct sl_buf add, bf;
	int rc = SL_EPREREQ;

	sl_buf_init(&add, 0);
	sl_buf_init(&bf, 0);
	sl_buf_printf(&add, "%s.%s", t->ns, t->name);   /* the --table argument, for now */
	sl_source_backfill_command(&bf, st);
	sl_buf_puts(&bf, " --table ");
	sl_buf_put_shell_word(&bf, add.data ? add.data : "");
	sl_buf_reset(&add);
	sl_buf_puts(&add, "ALTER PUBLICATION ");
	if (sl_pg_append_ident(&add, c, sl_pg_stream(st)->publication) < 0 || sl_buf_puts(&add, " ADD TABLE ") < 0 ||
	    sl_buf_puts(&add, t->src_flags & SL_PG_PARTITIONED ? "" : "ONLY ") < 0 ||
	    sl_pg_append_qualified(&add, c, t) < 0 || sl_buf_failed(&bf)) {
		snprintf(err, errlen, "out of memory");
		rc = SL_EFAIL;
		goto out;
	}
	snprintf(err, errlen, "stream \"%s\": table \"%s\".\"%s\" is no longer in publication \"%s\" (ALTER "
		 "PUBLICATION ... DROP TABLE or SET TABLE), so the changes made to it since are missing from the "
		 "stream: run %s, then %s to read it again (sluice does not add it back itself: that would hide "
		 "the gap)", st->name, t->ns, t->name, sl_pg_stream(st)->publication, add.data, bf.data);
out:
	sl_buf_free(&add);
	sl_buf_free(&bf);
	return rc;
}

int sl_pg_publication_kept(PGconn *c, const struct sl_source_stream *st, struct sl_table *const *tables, int n,
			   bool running, bool *readd, char *err, size_t errlen)
{
	bool *missing = calloc((size_t)(n > 0 ? n : 1), sizeof *missing), owns = false;
	struct sl_buf full;
	int rc;

	sl_buf_init(&full, 0);
	if (!missing) {
		snprintf(err, errlen, "out of memory");
		return SL_EFAIL;
	}
	if ((rc = sl_pg_publication_missing(c, sl_pg_stream(st)->publication, tables, n, missing, err, errlen)) < 0 ||
	    (rc = sluice_owns(c, sl_pg_stream(st)->publication, &owns, err, errlen)) < 0)
		goto out;
	for (int i = 0; i < n && rc == SL_OK; i++) {
		const struct sl_table *t = tables[i];
		if (readd)
			readd[i] = false;
		if (!missing[i] || (!running && !known(st, t, &full)))
			continue;
		if (!owns) {
			rc = left_user_publication(c, st, t, err, errlen);
		} else if (running) {
			snprintf(err, errlen, "stream \"%s\": table \"%s\".\"%s\" left publication \"%s\", which sluice "
				 "created: it is added again and backfilled again", st->name, t->ns, t->name,
				 sl_pg_stream(st)->publication);
			rc = SL_ERESTART;
		} else if (readd) {
			readd[i] = true;
		}
	}
out:
	free(missing);
	sl_buf_free(&full);
	return rc;
}
