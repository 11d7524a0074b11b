/*
 * sources/postgres/pg_rewrite.c: what a Relation message cannot tell.
 *
 * pgoutput describes a table by its column names and types only.  Some DDL
 * changes the values of rows that no change record will ever carry:
 * - ADD COLUMN with a constant default: PostgreSQL (since 11) keeps it as the
 *   column's "missing" value (pg_attribute.atthasmissing, attmissingval)
 *   and writes no row;
 * - ADD COLUMN with a volatile default (clock_timestamp(), random()), and
 *   ALTER COLUMN ... TYPE (USING ...): the table is rewritten (a new file
 *   node), again without a change record (but a type change that only
 *   widens, such as varchar(10) to varchar(20), keeps every value, even
 *   with a new file node from a TRUNCATE);
 * - DROP COLUMN x then ADD COLUMN x: the same name, but a new column (a new
 *   attnum), whose values are not the old ones;
 * - RENAME COLUMN x TO y: the same column (the same attnum) under a new
 *   name, whose values the existing rows hold without a change record that
 *   carries them under it.
 *
 * So the source keeps, per table, a text of its own ("column identities",
 * sl_table.src_columns): the table's file node, then per column its number,
 * type, modifier, whether it has a missing value and whether it has a
 * default.  sl_pg_columns_changed compares two of them.  The agent keeps
 * the text in the checkpoint, to compare it with the catalog's at the next
 * start; the stream compares the catalog's at each Relation message with
 * the text it had for the table, to notice it while streaming.
 *
 * Text: "<relfilenode>\n", then per column, in attnum order,
 * "<attnum> <atttypid> <atttypmod> <hasmissing 0|1> <hasdefault 0|1>
 * <bytes of name> <name>\n".
 */
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/util.h"
#include "sources/postgres/pg_internal.h"

/* One query for the tables of $1 (an OID array): relid, text. */
static const char idents_sql[] =
	"SELECT c.oid, c.relfilenode::text || E'\\n' || coalesce(string_agg(format('%s %s %s %s %s %s %s', "
	"  a.attnum, a.atttypid, a.atttypmod, a.atthasmissing::int, (d.oid IS NOT NULL)::int, "
	"  octet_length(a.attname::text), a.attname), E'\\n' ORDER BY a.attnum) || E'\\n', '') "
	"FROM pg_class c LEFT JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 "
	"  AND NOT a.attisdropped AND a.attgenerated = '' "
	"LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum "
	"WHERE c.oid = ANY($1::oid[]) GROUP BY c.oid, c.relfilenode";

/* Runs sql with $1 the OID array of the n tables (n > 0), into *res (the
 * caller's to PQclear, also on failure).  Returns SL_OK, or a negative
 * status with a message in err that names what the query reads. */
static int query_tables(PGconn *c, const char *sql, struct sl_table **tabs, int n, const char *what, PGresult **res,
			char *err, size_t errlen)
{
	struct sl_buf oids;
	const char *params[1];
	char msg[96];
	int rc = SL_OK;

	*res = NULL;
	sl_buf_init(&oids, 0);
	if (sl_pg_oid_array(&oids, tabs, n) < 0) {
		snprintf(err, errlen, "out of memory reading %s", what);
		rc = SL_EFAIL;
		goto out;
	}
	params[0] = oids.data;
	*res = PQexecParams(c, sql, 1, NULL, params, NULL, NULL, 0);
	if (PQresultStatus(*res) != PGRES_TUPLES_OK) {
		snprintf(msg, sizeof msg, "could not read the %s of the tables", what);
		rc = sl_pg_err(err, errlen, msg, c, *res);
	}
out:
	sl_buf_free(&oids);
	return rc;
}

int sl_pg_idents_read(PGconn *c, struct sl_table **tabs, int n, char *err, size_t errlen)
{
	PGresult *res = NULL;
	int rc = SL_OK;

	if (n == 0 || (rc = query_tables(c, idents_sql, tabs, n, "column identities", &res, err, errlen)) < 0)
		goto out;
	for (int i = 0; i < PQntuples(res) && rc == SL_OK; i++) {
		uint64_t relid;
		if (sl_parse_u64(PQgetvalue(res, i, 0), UINT32_MAX, &relid) < 0)
			continue;
		for (int k = 0; k < n && rc == SL_OK; k++) {
			if (tabs[k]->relid != relid)
				continue;
			free(tabs[k]->src_columns);
			if (!(tabs[k]->src_columns = strdup(PQgetvalue(res, i, 1)))) {
				snprintf(err, errlen, "out of memory reading column identities");
				rc = SL_EFAIL;
			}
		}
	}
out:
	PQclear(res);
	return rc;
}

struct ident_col {
	long attnum, typid, typmod;
	bool missing, has_default;
	const char *name;               /* into the text, namelen bytes */
	size_t namelen;
};

struct idents {
	const char *filenode;           /* into the text, up to the first newline */
	size_t filenode_len;
	struct ident_col *cols;         /* owned */
	int ncols;
};

/* Parses one number and the space after it; false when there is none. */
static bool num(const char **p, long *out)
{
	char *end;

	*out = strtol(*p, &end, 10);
	if (end == *p || *end != ' ')
		return false;
	*p = end + 1;
	return true;
}

/* Parses text into id (see the top of this file).  False when it is not
 * such a text or memory ran out: the caller then knows nothing. */
static bool parse(const char *text, struct idents *id)
{
	const char *p = strchr(text, '\n');
	long missing, def, len;

	memset(id, 0, sizeof *id);
	if (!p)
		return false;
	id->filenode = text;
	id->filenode_len = (size_t)(p - text);
	p++;
	while (*p) {
		struct ident_col *nc = realloc(id->cols, sizeof *nc * (size_t)(id->ncols + 1)), *col;
		if (!nc)
			return false;
		id->cols = nc;
		col = &nc[id->ncols];
		if (!num(&p, &col->attnum) || !num(&p, &col->typid) || !num(&p, &col->typmod) || !num(&p, &missing) ||
		    !num(&p, &def) || !num(&p, &len) || len < 0 || strlen(p) < (size_t)len + 1 || p[len] != '\n')
			return false;
		col->missing = missing != 0;
		col->has_default = def != 0;
		col->name = p;
		col->namelen = (size_t)len;
		p += len + 1;
		id->ncols++;
	}
	return true;
}

static const struct ident_col *find_col(const struct idents *id, const struct ident_col *like)
{
	for (int i = 0; i < id->ncols; i++)
		if (id->cols[i].namelen == like->namelen && !memcmp(id->cols[i].name, like->name, like->namelen))
			return &id->cols[i];
	return NULL;
}

static const struct ident_col *find_attnum(const struct idents *id, long attnum)
{
	for (int i = 0; i < id->ncols; i++)
		if (id->cols[i].attnum == attnum)
			return &id->cols[i];
	return NULL;
}

/* Type OIDs (pg_type.h) of the types whose widening keeps every value. */
enum { TYPID_TEXT = 25, TYPID_VARCHAR = 1043, TYPID_VARBIT = 1562, TYPID_NUMERIC = 1700 };

/* Whether changing column o's type to c's keeps every value as it was:
 * PostgreSQL 15 does these without a rewrite (ALTER TABLE ... SET DATA
 * TYPE: a varchar or varbit length limit raised or removed, a numeric's
 * precision raised with the same scale or its limit removed, varchar to
 * text), and a rewrite that comes with them (a TRUNCATE, VACUUM FULL)
 * changes no value either.  The typmod is -1 for no limit; a varchar's is
 * its length + 4, a varbit's its length, both growing with the limit; a
 * numeric's ((precision << 16) | (scale & 0x7ff)) + 4.  Not bpchar: a
 * char(n) pads its values to n, so its length changes them. */
static bool widened(const struct ident_col *o, const struct ident_col *c)
{
	if (o->typid == TYPID_VARCHAR && c->typid == TYPID_TEXT)
		return true;
	if (o->typid != c->typid)
		return false;
	if (c->typmod < 0)
		return c->typid == TYPID_VARCHAR || c->typid == TYPID_VARBIT || c->typid == TYPID_NUMERIC;
	if (o->typmod < 0)
		return false;   /* a limit added: values may be cut or rounded */
	if (c->typid == TYPID_VARCHAR || c->typid == TYPID_VARBIT)
		return c->typmod >= o->typmod;
	if (c->typid == TYPID_NUMERIC && o->typmod >= 4 && c->typmod >= 4)
		return ((o->typmod - 4) & 0x7ff) == ((c->typmod - 4) & 0x7ff) &&
		       ((c->typmod - 4) >> 16) >= ((o->typmod - 4) >> 16);
	return false;
}

int sl_pg_columns_changed(const char *was, const char *now, char *why, size_t whylen)
{
	struct idents w, n;
	int changed = 0;
	bool rewritten;

	memset(&w, 0, sizeof w);
	memset(&n, 0, sizeof n);
	if (!was || !now || !parse(was, &w) || !parse(now, &n)) {
		free(w.cols);
		free(n.cols);
		return 0;
	}
	/* A new file node is a rewrite, or a TRUNCATE (or SET TABLESPACE),
	 * which rewrites no row: the log holds the TRUNCATE, which the stream
	 * applies.  A rewrite takes every missing value out of the catalog,
	 * so a column added with a constant default that still has its
	 * missing value was not rewritten since it was added: only a column
	 * without one (a volatile default) says the new file node rewrote it;
	 * nor does a type change that only widens (varchar(10) to varchar(20),
	 * after a TRUNCATE) change any value, whatever the file node says. */
	rewritten = w.filenode_len != n.filenode_len || memcmp(w.filenode, n.filenode, n.filenode_len) != 0;
	/* A column added with a constant default is the mildest change (its
	 * missing value says what the existing rows read), and a missing value
	 * that a rewrite took out of the catalog matters only to a sink that
	 * carried it: any other change found decides, and both together are a
	 * rewrite for every sink. */
	for (int i = 0; i < n.ncols && changed != SL_COLS_REWRITTEN; i++) {
		const struct ident_col *c = &n.cols[i], *o = find_col(&w, c), *r = NULL;
		int l = (int)c->namelen;
		if (!o)
			r = find_attnum(&w, c->attnum);
		if (o && o->attnum != c->attnum)
			snprintf(why, whylen, "column \"%.*s\" was dropped and added again: it is a new column, whose "
				 "values are not the old ones", l, c->name);
		else if (r)
			snprintf(why, whylen, "column \"%.*s\" was renamed to \"%.*s\": the existing rows hold its "
				 "values under the new name without a change", (int)r->namelen, r->name, l, c->name);
		else if (!o && c->has_default && !c->missing && rewritten)
			snprintf(why, whylen, "column \"%.*s\" was added with a volatile default, which rewrote the "
				 "table", l, c->name);
		else if (o && (o->typid != c->typid || o->typmod != c->typmod) && rewritten && !widened(o, c))
			snprintf(why, whylen, "column \"%.*s\" changed its type, which rewrote the table", l, c->name);
		else if (o && o->missing && !c->missing && o->attnum == c->attnum && changed != SL_COLS_LOST) {
			snprintf(why, whylen, "column \"%.*s\" lost its missing value in a table rewrite (VACUUM FULL, "
				 "CLUSTER): the value that the rows written before it was added read is no longer known", l,
				 c->name);
			/* with a constant default added too, every sink needs the backfill */
			changed = changed == SL_COLS_MISSING ? SL_COLS_REWRITTEN : SL_COLS_LOST;
			continue;
		} else if (!o && c->missing && changed != SL_COLS_MISSING) {
			if (changed == SL_COLS_LOST) {
				changed = SL_COLS_REWRITTEN;   /* the why of the lost value */
				continue;
			}
			snprintf(why, whylen, "column \"%.*s\" was added with a default, which the existing rows have "
				 "without a change", l, c->name);
			changed = SL_COLS_MISSING;
			continue;
		} else
			continue;
		changed = SL_COLS_REWRITTEN;
	}
	free(w.cols);
	free(n.cols);
	return changed;
}

int sl_pg_missing_keep(struct sl_table *t, const struct sl_table *prev, const char *was, const char *now)
{
	struct idents w, n;
	bool kept = false;
	int rc = 0;

	memset(&w, 0, sizeof w);
	memset(&n, 0, sizeof n);
	if (!prev || !was || !now || !parse(was, &w) || !parse(now, &n))
		goto out;
	for (int i = 0; i < t->ncols && rc == 0; i++) {
		struct sl_column *c = &t->cols[i];
		struct ident_col like = { .name = c->name, .namelen = strlen(c->name) };
		const struct ident_col *o = find_col(&w, &like), *x = find_col(&n, &like);
		if (c->missing.kind != SL_V_NULL || !o || !x || o->attnum != x->attnum)
			continue;   /* its own, or not the same column */
		for (int k = 0; k < prev->ncols && rc == 0; k++) {
			if (strcmp(prev->cols[k].name, c->name) != 0 || prev->cols[k].missing.kind == SL_V_NULL)
				continue;
			rc = sl_column_set_missing(c, &prev->cols[k].missing);
			kept = true;
		}
	}
	if (rc == 0 && kept)
		rc = sl_table_finish(t);
out:
	free(w.cols);
	free(n.cols);
	return rc;
}

/* The missing values of the tables of $1 (an OID array): relid, column
 * name, the value's text (the one element of attmissingval, an array of the
 * column's type, whose text form an array of text takes apart). */
static const char missing_sql[] =
	"SELECT a.attrelid, a.attname, (a.attmissingval::text::text[])[1] FROM pg_attribute a "
	"WHERE a.attrelid = ANY($1::oid[]) AND a.attnum > 0 AND NOT a.attisdropped AND a.atthasmissing";

/* Converts text (len bytes, copied: a bytea is decoded in place) into the
 * missing value of col. */
static int set_missing(struct sl_table *t, struct sl_column *col, const char *text, size_t len, char *err,
		       size_t errlen)
{
	struct sl_buf scratch, copy;
	struct sl_value v;
	int rc = SL_OK;

	sl_buf_init(&scratch, 0);
	sl_buf_init(&copy, 0);
	sl_buf_append(&copy, text, len);
	sl_buf_reserve(&scratch, sl_pg_text_scratch(col, len));
	if (sl_buf_failed(&copy) || sl_buf_failed(&scratch)) {
		snprintf(err, errlen, "out of memory reading the default of column \"%s\"", col->name);
		rc = SL_EFAIL;
	} else if (sl_pg_text_column(col, copy.data ? copy.data : (char *)"", len, &v, &scratch, NULL, err,
				     errlen) < 0) {
		sl_warn("table \"%s\".\"%s\": the value the existing rows have in column \"%s\" cannot be read (%s): "
			"no destination carries it, so the table is backfilled again", t->ns, t->name, col->name, err);
	} else if (sl_column_set_missing(col, &v) < 0) {
		snprintf(err, errlen, "out of memory reading the default of column \"%s\"", col->name);
		rc = SL_EFAIL;
	}
	sl_buf_free(&copy);
	sl_buf_free(&scratch);
	return rc;
}

int sl_pg_missing_read(PGconn *c, struct sl_table **tabs, int n, char *err, size_t errlen)
{
	PGresult *res = NULL;
	int rc = SL_OK;

	if (n == 0 || (rc = query_tables(c, missing_sql, tabs, n, "missing values of the columns", &res, err,
					 errlen)) < 0)
		goto out;
	for (int k = 0; k < n && rc == SL_OK; k++) {
		bool any = false;
		for (int i = 0; i < PQntuples(res) && rc == SL_OK; i++) {
			uint64_t relid;
			if (PQgetisnull(res, i, 2) || sl_parse_u64(PQgetvalue(res, i, 0), UINT32_MAX, &relid) < 0 ||
			    relid != tabs[k]->relid)
				continue;
			for (int j = 0; j < tabs[k]->ncols && rc == SL_OK; j++) {
				if (strcmp(tabs[k]->cols[j].name, PQgetvalue(res, i, 1)) != 0)
					continue;
				rc = set_missing(tabs[k], &tabs[k]->cols[j], PQgetvalue(res, i, 2),
						 (size_t)PQgetlength(res, i, 2), err, errlen);
				any = true;
			}
		}
		if (rc == SL_OK && any && sl_table_finish(tabs[k]) < 0) {
			snprintf(err, errlen, "out of memory reading column defaults");
			rc = SL_EFAIL;
		}
	}
out:
	PQclear(res);
	return rc;
}
