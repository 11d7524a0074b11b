/*
 * sources/postgres/pg_source.c: the PostgreSQL source behind struct
 * sl_source_ops (sources/source.h): positions are LSNs, the stream's position
 * holder is a logical replication slot, backfill reads COPY in a snapshot
 * exported by a slot, and streaming reads pgoutput.
 *
 * Positions: w[0] is the LSN; the CSN's position part is the LSN itself.  A
 * transaction's records carry its commit LSN (pgoutput's final_lsn) and its
 * end is the commit's end LSN, which is what ack() confirms.  The
 * checkpoint holds LSNs as PostgreSQL prints them ("16/B374D848").
 */
#include "sources/postgres/pg_internal.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/buf.h"
#include "common/log.h"
#include "common/util.h"
#include "sources/postgres/pg_backfill.h"

#define STATUS_INTERVAL_MS 1000   /* status_interval's default: at most; shorter when
                                   * wal_sender_timeout is short */
/* How often a streaming source looks at the catalog for tables that came,
 * went, were re-created or renamed, or partitions attached or detached
 * (most of which the replication stream does not show). */
#define CATALOG_CHECK_MS 15000
#define MIN_SILENCE_MS 30000      /* the automatic receive timeout is at least this */
#define DEFAULT_WST_MS 60000      /* wal_sender_timeout when it cannot be read */

/* ---- positions ---- */

static int pg_pos_compare(const struct sl_position *a, const struct sl_position *b)
{
	return a->w[0] < b->w[0] ? -1 : a->w[0] > b->w[0];
}

static uint64_t pg_pos_csn(const struct sl_position *p)
{
	return p->w[0];
}

static int pg_pos_encode(const struct sl_position *p, char *out, size_t outlen)
{
	if (outlen < 18)
		return -1;
	sl_lsn_format(p->w[0], out);
	return 0;
}

static int pg_pos_decode(const char *text, struct sl_position *out)
{
	memset(out, 0, sizeof *out);
	return sl_lsn_parse(text, &out->w[0]);
}

/* Appends x in uppercase hex without leading zeros. */
static size_t hex32(char *dst, uint32_t x)
{
	static const char hexup[] = "0123456789ABCDEF";
	char tmp[8];
	size_t n = 0, k = 0;

	do {
		tmp[n++] = hexup[x & 15];
		x >>= 4;
	} while (x);
	while (n)
		dst[k++] = tmp[--n];
	return k;
}

static const struct sl_meta_field pg_meta[] = {
	{ "lsn", SL_META_STRING },
};

/* The LSN as PostgreSQL prints it, for every record: hand-rolled, not snprintf. */
static void pg_meta_values(const struct sl_position *p, struct sl_meta_value *out, char *buf, size_t buflen)
{
	size_t n = 0;

	if (buflen >= 18) {
		n = hex32(buf, (uint32_t)(p->w[0] >> 32));
		buf[n++] = '/';
		n += hex32(buf + n, (uint32_t)p->w[0]);
	}
	out[0].s = buf;
	out[0].len = n;
}

const struct sl_source_desc sl_pg_desc = {
	.kind = "postgres",
	.ns_field = "schema",
	.read_method_cdc = "postgresql-cdc-wal",
	.read_method_backfill = "postgresql-backfill",
	.pos_compare = pg_pos_compare,
	.pos_csn = pg_pos_csn,
	.pos_encode = pg_pos_encode,
	.pos_decode = pg_pos_decode,
	.nmeta = 1,
	.meta = pg_meta,
	.meta_values = pg_meta_values,
};

static struct sl_position lsn_pos(uint64_t lsn)
{
	struct sl_position p;

	memset(&p, 0, sizeof p);
	p.w[0] = lsn;
	return p;
}

/* ---- the context ---- */

struct pg_src {
	const struct sl_source_config *cfg;
	const struct sl_source_stream *st;
	PGconn *meta;                   /* catalog connection */
	struct sl_pg_repl *repl;        /* the stream's replication connection */
	struct sl_table **tables;       /* the caller's table list (borrowed) */
	int ntables;
	int64_t status_interval_ms;
	int64_t silence_ms;             /* the stream fails after this long without a message */
	struct sl_pg_text_stats bf_stats;  /* values converted by backfill reads */
	/* streaming: the decoded message and the changes it still holds */
	struct sl_pg_repl_event rev;
	int next_change;                /* index into rev.pgo.changes of the next change to hand out */
	bool truncating;                /* rev holds a TRUNCATE: hand out its tables */
	int64_t last_catalog_ms;        /* the last catalog check */
	uint32_t via_root;              /* the last message was the Relation message of this selected
					 * partitioned table (0: not), see leaf_check */
	struct sl_buf wm;               /* the text of the last watermark handed out */
	char **src_columns;             /* per table: its src_columns at its last Relation message
					 * (owned; NULL: the catalog's at the start, in tables) */
	char why[SL_ERRLEN];            /* SL_EV_SCHEMA's rebackfill */
	/* per table: up to where its snapshot backfill holds its changes
	 * (sl_source_hooks.covered, asked at its first Relation message or
	 * chunk of the run, cover_ask; a 0 LSN: nothing), or NULL before any
	 * is asked */
	uint64_t *covered_until;
	/* per table (with covered_until): its backfill while streaming holds
	 * its changes up to the low watermark of its first chunk of the run
	 * (SL_COVER_FIRST_WATERMARK), not read yet (pg_read_chunk) */
	bool *cover_first;
	uint64_t wm_emitted;            /* the LSN of the last watermark emitted */
	/* backfill while streaming */
	PGconn *chunkc;                 /* read_chunk's connection, opened at its first call */
	struct sl_pg_keys **keys;       /* key column orders read so far */
	int nkeys;
	char **readd;                   /* plan.rebackfill: tables added back to the publication */
	int nreadd;
	struct sl_pg_writers *writers;  /* per table: what its first chunk of the run waits for
					 * (writers_wait; NULL before any chunk) */
};

struct pg_snap {
	PGconn **conns;                 /* the importing transactions (nconns) */
	int nconns;
	struct sl_pg_repl *tmp;         /* the temporary slot's connection, or NULL */
};

/* The catalog's primary key for a table, for pgoutput's Relation messages
 * (under REPLICA IDENTITY FULL pgoutput flags every column). */
static bool key_lookup(void *payload, const char *ns, const char *name, int ncols, char *const *names, bool *is_key)
{
	struct pg_src *s = payload;

	for (int i = 0; i < s->ntables; i++) {
		const struct sl_table *t = s->tables[i];
		if (strcmp(t->ns, ns) || strcmp(t->name, name))
			continue;
		for (int c = 0; c < ncols; c++) {
			is_key[c] = false;
			for (int k = 0; k < t->ncols; k++)
				if (t->cols[k].is_key && !strcmp(t->cols[k].name, names[c]))
					is_key[c] = true;
		}
		/* A table the catalog knows has the catalog's key, none included:
		 * REPLICA IDENTITY FULL flags every column, which is no key. */
		return true;
	}
	return false;
}

static int pg_open(void **ctx, const struct sl_source_config *cfg, const struct sl_source_stream *st,
		   char *err, size_t errlen)
{
	struct pg_src *s = calloc(1, sizeof *s);

	*ctx = NULL;
	if (!s) {
		snprintf(err, errlen, "out of memory");
		return SL_EFAIL;
	}
	s->cfg = cfg;
	s->st = st;
	s->status_interval_ms = STATUS_INTERVAL_MS;
	sl_buf_init(&s->wm, 0);
	s->meta = sl_pg_connect(cfg, false, err, errlen);
	if (!s->meta) {
		free(s);
		return sl_pg_err_status();
	}
	*ctx = s;
	return SL_OK;
}

int sl_pg_source_open_replay(void **ctx, const struct sl_source_stream *st, const char *path,
			     struct sl_table **tables, int ntables, char *err, size_t errlen)
{
	struct pg_src *s = calloc(1, sizeof *s);

	*ctx = NULL;
	if (!s) {
		snprintf(err, errlen, "out of memory");
		return SL_EFAIL;
	}
	s->st = st;
	s->tables = tables;
	s->ntables = ntables;
	s->status_interval_ms = STATUS_INTERVAL_MS;
	sl_buf_init(&s->wm, 0);
	if (!(s->repl = sl_pg_repl_open_replay(path, key_lookup, s, err, errlen))) {
		free(s);
		return SL_EFAIL;
	}
	*ctx = s;
	return SL_OK;
}

static void pg_close(void *ctx)
{
	struct pg_src *s = ctx;

	if (!s)
		return;
	if (s->repl && sl_pgoutput_ignored(sl_pg_repl_decoder(s->repl)) > 0)
		sl_info("stream \"%s\": skipped %" PRIu64 " changes of tables that the publication carries but the "
			"stream does not select", s->st->name, sl_pgoutput_ignored(sl_pg_repl_decoder(s->repl)));
	sl_pg_repl_close(s->repl);
	if (s->meta)
		PQfinish(s->meta);
	if (s->chunkc)
		PQfinish(s->chunkc);
	for (int i = 0; i < s->nkeys; i++)
		sl_pg_keys_free(s->keys[i]);
	free(s->keys);
	for (int i = 0; i < s->nreadd; i++)
		free(s->readd[i]);
	free(s->readd);
	sl_buf_free(&s->wm);
	for (int i = 0; s->src_columns && i < s->ntables; i++)
		free(s->src_columns[i]);
	free(s->src_columns);
	free(s->covered_until);
	free(s->cover_first);
	for (int i = 0; s->writers && i < s->ntables; i++)
		sl_pg_writers_end(&s->writers[i], s->st);
	free(s->writers);
	free(s);
}

/* Appends the names of t's columns that are key columns (key) or in its
 * replica identity (!key), comma-separated. */
static void put_columns(struct sl_buf *b, const struct sl_table *t, bool key)
{
	bool first = true;

	for (int i = 0; i < t->ncols; i++) {
		if (key ? !t->cols[i].is_key : !t->cols[i].in_identity)
			continue;
		sl_buf_printf(b, "%s%s", first ? "" : ", ", t->cols[i].name);
		first = false;
	}
}

/* A key must be one: no key column may hold NULL (key_columns can name a
 * nullable one; the catalog's keys never are), and the old row of an update
 * or delete must carry it, that is the replica identity must hold every key
 * column (or be FULL).  Otherwise a DELETE names no key, and a key change
 * is not seen (REPLICA IDENTITY USING INDEX on an index other than the
 * primary key, or key_columns outside the identity). */
static int check_key(const struct sl_source_stream *st, const struct sl_table *t, char *err, size_t errlen)
{
	struct sl_buf key, ident;
	int rc = SL_OK;

	for (int i = 0; i < t->ncols; i++) {
		if (t->cols[i].is_key && !t->cols[i].not_null) {
			snprintf(err, errlen, "stream \"%s\": key column \"%s\" of table \"%s\".\"%s\" (key_columns) is "
				 "nullable, and a key cannot be NULL. Fix one of: ALTER TABLE %s.%s ALTER COLUMN %s SET "
				 "NOT NULL; or name unique NOT NULL columns in key_columns", st->name, t->cols[i].name,
				 t->ns, t->name, t->ns, t->name, t->cols[i].name);
			return SL_EPREREQ;
		}
	}
	for (int i = 0; i < t->ncols; i++)
		if (t->cols[i].is_key && !t->cols[i].in_identity)
			rc = SL_EPREREQ;
	if (rc == SL_OK)
		return SL_OK;
	sl_buf_init(&key, 0);
	sl_buf_init(&ident, 0);
	put_columns(&key, t, true);
	put_columns(&ident, t, false);
	snprintf(err, errlen, "stream \"%s\": table \"%s\".\"%s\" is keyed by (%s), but its replica identity is (%s): "
		 "a DELETE would not name the row's key, nor an UPDATE show that the key changed. Fix one of: "
		 "ALTER TABLE %s.%s REPLICA IDENTITY DEFAULT (its primary key) or REPLICA IDENTITY FULL; or key it "
		 "by its replica identity (key_columns = %s.%s.COLUMN for each of its columns)", st->name, t->ns,
		 t->name, key.data ? key.data : "", ident.data ? ident.data : "", t->ns, t->name, t->ns, t->name);
	sl_buf_free(&key);
	sl_buf_free(&ident);
	return rc;
}

/* A table whose updates and deletes cannot name their row must not go into
 * a publication that publishes them: the application's UPDATE and DELETE on
 * it would fail from then on ("cannot update table ... because it does not
 * have a replica identity and publishes updates").  sluice never makes an
 * application statement fail, so it refuses the table and says how to fix
 * it.  Merge mode needs a key to merge on (REPLICA IDENTITY FULL is none:
 * identical rows would merge into one), and every key must be one
 * (check_key). */
static int check_table(const struct sl_source_stream *st, const struct sl_table *t, char *err, size_t errlen)
{
	if (t->no_row_identity) {
		snprintf(err, errlen, "stream \"%s\": table \"%s\".\"%s\" has no replica identity (no primary key, "
			 "or REPLICA IDENTITY NOTHING%s): published for logical replication, the application's UPDATE "
			 "and DELETE on it would fail. Fix one of: add a primary key; run ALTER TABLE %s.%s REPLICA "
			 "IDENTITY FULL; or leave it out of the stream (exclude_tables = %s.%s)", st->name, t->ns,
			 t->name, t->src_flags & SL_PG_PARTITIONED ? ", on a partition" : "", t->ns, t->name,
			 t->ns, t->name);
		return SL_EPREREQ;
	}
	if (sl_table_has_key(t))
		return check_key(st, t, err, errlen);
	if (!st->merge)
		return SL_OK;
	snprintf(err, errlen, "stream \"%s\": table \"%s\".\"%s\" has no unique NOT NULL key, so write_mode = merge "
		 "cannot mirror it (REPLICA IDENTITY FULL keys no row: identical rows would become one). Fix one of: "
		 "add a primary key; name unique NOT NULL columns in the stream's key_columns (key_columns = "
		 "%s.%s.COLUMN, ...); or use write_mode = append", st->name, t->ns, t->name, t->ns, t->name);
	return SL_EPREREQ;
}

/* Lists the stream's tables; SL_ECONFIG when nothing matches. */
static int list_tables(PGconn *c, const struct sl_source_config *cfg, const struct sl_source_stream *st,
		       struct sl_table ***out, int *n, char *err, size_t errlen)
{
	int rc = sl_pg_list_tables(c, st->tables, st->exclude_tables, out, n, err, errlen);
	struct sl_buf b;

	if (rc < 0)
		return rc;
	for (int i = 0; i < *n; i++)
		(*out)[i]->src = &sl_pg_desc;
	if ((rc = sl_source_check_exact(st, cfg->name, *out, *n, err, errlen)) < 0 ||
	    (rc = sl_source_apply_key_columns(st, *out, *n, err, errlen)) < 0)
		goto fail;
	if (*n > 0)
		return SL_OK;
	rc = SL_ECONFIG;
	sl_buf_init(&b, 4096);
	for (char *const *g = st->tables; *g; g++)
		sl_buf_printf(&b, "%s%s", g == st->tables ? "" : ", ", *g);
	snprintf(err, errlen, "stream \"%s\": no table on source \"%s\" matches tables = %s", st->name, cfg->name,
		 b.data ? b.data : "");
	sl_buf_free(&b);
fail:
	sl_pg_tables_free(*out, *n);
	*out = NULL;
	*n = 0;
	return rc;
}

/* What run needs of the selected tables, checked before it touches
 * anything, by check and run alike: the role may read each (USAGE on its
 * schema, SELECT on it: SL_EPREREQ with every GRANT missing), and each is
 * fit for the stream (check_table). */
static int check_tables(PGconn *c, const struct sl_source_stream *st, struct sl_table *const *tables, int n,
			char *err, size_t errlen)
{
	struct sl_buf grants;
	int rc;

	sl_buf_init(&grants, 0);
	if ((rc = sl_pg_read_grants(c, tables, n, &grants, err, errlen)) == SL_OK && grants.len > 0) {
		snprintf(err, errlen, "stream \"%s\": role \"%s\" may not read every selected table; as the owner of the "
			 "tables (or a superuser) run: %s", st->name, PQuser(c), grants.data);
		rc = SL_EPREREQ;
	}
	sl_buf_free(&grants);
	for (int i = 0; i < n && rc == SL_OK; i++)
		rc = check_table(st, tables[i], err, errlen);
	return rc;
}

static int pg_tables(void *ctx, struct sl_table ***out, int *n, char *err, size_t errlen)
{
	struct pg_src *s = ctx;
	int rc = list_tables(s->meta, s->cfg, s->st, out, n, err, errlen);

	if (rc < 0)
		return rc;
	if ((rc = check_tables(s->meta, s->st, *out, *n, err, errlen)) < 0) {
		sl_pg_tables_free(*out, *n);
		*out = NULL;
		*n = 0;
		return rc;
	}
	s->tables = *out;
	s->ntables = *n;
	return SL_OK;
}

/* How often status is sent: every status_interval (the durable position is
 * acknowledged at the latest that long after it moved, so the slot's lag
 * stays near write rate x (flush interval + status_interval)), and at least
 * every third of the server's wal_sender_timeout; never more often than
 * every 200 ms.
 * It also sets the receive timeout: receive_timeout when configured, else
 * twice wal_sender_timeout and at least MIN_SILENCE_MS (a live walsender
 * answers every status update that asks for a reply, and pings on its own
 * after half its timeout).  Status goes out at least every third of the
 * receive timeout too, so an idle stream hears from the server in time. */
static void set_status_interval(struct pg_src *s)
{
	char err[SL_ERRLEN];
	int64_t ms, wst = DEFAULT_WST_MS;

	s->status_interval_ms = s->st->status_ms > 0 ? s->st->status_ms : STATUS_INTERVAL_MS;
	if (sl_pg_wal_sender_timeout_ms(s->meta, &ms, err, sizeof err) < 0) {
		sl_warn("stream \"%s\": %s; sending status every %" PRId64 " ms", s->st->name, err,
			s->status_interval_ms);
	} else {
		wst = ms;
		if (ms > 0 && ms / 3 < s->status_interval_ms)
			s->status_interval_ms = ms / 3;
	}
	if (s->cfg->receive_timeout > 0)
		s->silence_ms = (int64_t)s->cfg->receive_timeout * 1000;
	else
		s->silence_ms = 2 * wst > MIN_SILENCE_MS ? 2 * wst : MIN_SILENCE_MS;
	if (s->silence_ms / 3 < s->status_interval_ms)
		s->status_interval_ms = s->silence_ms / 3;
	if (s->status_interval_ms < 200)
		s->status_interval_ms = 200;
	sl_debug("stream \"%s\": status every %" PRId64 " ms, receive timeout %" PRId64 " ms", s->st->name,
		 s->status_interval_ms, s->silence_ms);
}

/* The tables the stream followed that left the publication sluice created:
 * sl_pg_ensure_publication adds them again, and plan->rebackfill has the
 * agent backfill them again; SL_EPREREQ for the user's publication. */
static int readd_plan(struct pg_src *s, struct sl_source_plan *plan, char *err, size_t errlen)
{
	bool *readd = calloc((size_t)(s->ntables > 0 ? s->ntables : 1), sizeof *readd);
	int rc;

	for (int i = 0; i < s->nreadd; i++)   /* an earlier prepare's */
		free(s->readd[i]);
	free(s->readd);
	s->nreadd = 0;
	if (!readd || !(s->readd = calloc((size_t)s->ntables + 1, sizeof *s->readd))) {
		free(readd);
		snprintf(err, errlen, "out of memory");
		return SL_EFAIL;
	}
	rc = sl_pg_publication_kept(s->meta, s->st, s->tables, s->ntables, false, readd, err, errlen);
	for (int i = 0; i < s->ntables && rc == SL_OK; i++) {
		struct sl_buf full;
		if (!readd[i])
			continue;
		sl_buf_init(&full, 0);
		sl_buf_printf(&full, "%s.%s", s->tables[i]->ns, s->tables[i]->name);
		if (!(s->readd[s->nreadd] = sl_buf_detach(&full))) {
			snprintf(err, errlen, "out of memory");
			rc = SL_EFAIL;
			break;
		}
		sl_warn("stream \"%s\": table \"%s\".\"%s\" left publication \"%s\", which sluice created: its "
			"changes since are missing, so it is added again and backfilled again", s->st->name,
			s->tables[i]->ns, s->tables[i]->name, sl_pg_stream(s->st)->publication);
		s->nreadd++;
	}
	plan->rebackfill = s->readd;
	plan->nrebackfill = s->nreadd;
	free(readd);
	return rc;
}

static int pg_prepare(void *ctx, const struct sl_source_resume *resume, struct sl_source_plan *plan,
		      char *err, size_t errlen)
{
	struct pg_src *s = ctx;
	const struct sl_source_stream *st = s->st;
	int rc;

	memset(plan, 0, sizeof *plan);
	if ((rc = sl_pg_check_prereqs(s->meta, err, errlen)) < 0)
		return rc;
	set_status_interval(s);
	plan->status_interval_ms = s->status_interval_ms;
	/* What check says of the publication, run says in the same words,
	 * before it tries to create or change it. */
	if ((resume->has_position && (rc = readd_plan(s, plan, err, errlen)) < 0) ||
	    (rc = sl_pg_check_publication(s->meta, st, s->tables, s->ntables, NULL, err, errlen)) < 0 ||
	    (rc = sl_pg_ensure_publication(s->meta, sl_pg_stream(st)->publication, s->tables, s->ntables, err, errlen)) < 0)
		return rc;
	/* The slot against the checkpoint (pg_slot.c). */
	return sl_pg_slot_prepare(s->meta, s->cfg, st, resume, plan, err, errlen);
}

static int pg_current_position(void *ctx, struct sl_position *out, char *err, size_t errlen)
{
	struct pg_src *s = ctx;
	uint64_t lsn;
	int rc = sl_pg_current_lsn(s->meta, &lsn, err, errlen);

	if (rc == SL_OK)
		*out = lsn_pos(lsn);
	return rc;
}

static int pg_snapshot(void *ctx, bool create, void **out, struct sl_snapshot_info *info, char *err, size_t errlen)
{
	struct pg_src *s = ctx;
	struct pg_snap *snap = calloc(1, sizeof *snap);
	struct sl_pg_repl *r;
	struct sl_pg_slot_wait wait;
	char name[128], tmpname[64];
	uint64_t consistent;
	int rc, nconns;

	*out = NULL;
	memset(info, 0, sizeof *info);
	if (!snap) {
		snprintf(err, errlen, "out of memory");
		return SL_EFAIL;
	}
	/* The server's time just before the slot: the source time of the rows. */
	if ((rc = sl_pg_server_time_us(s->meta, &info->ts_us, err, errlen)) < 0)
		goto fail;
	if (create) {
		/* The stream's own slot; its connection streams later. */
		if (!s->repl && !(s->repl = sl_pg_repl_open(s->cfg, key_lookup, s, err, errlen))) {
			rc = sl_pg_err_status();
			goto fail;
		}
		r = s->repl;
		sl_pg_slot_wait_init(&wait, s->meta, s->st, sl_pg_stream(s->st)->slot);
		rc = sl_pg_repl_create_slot(r, sl_pg_stream(s->st)->slot, false, sl_pg_slot_wait_tick, &wait, name, sizeof name,
					    &consistent, err, errlen);
		sl_pg_slot_wait_end(&wait);
	} else {
		/* The stream's slot exists: a fresh snapshot from a temporary slot.
		 * Rows read at its position P carry CSN (P, 0); the changes the
		 * stream's slot delivers again from before P carry smaller CSNs, so
		 * "highest CSN wins" converges on the source's state. */
		if (!(snap->tmp = sl_pg_repl_open(s->cfg, NULL, NULL, err, errlen))) {
			rc = sl_pg_err_status();
			goto fail;
		}
		snprintf(tmpname, sizeof tmpname, "%.40s_bf_%d", sl_pg_stream(s->st)->slot, (int)getpid());
		sl_pg_slot_wait_init(&wait, s->meta, s->st, tmpname);
		rc = sl_pg_repl_create_slot(snap->tmp, tmpname, true, sl_pg_slot_wait_tick, &wait, name, sizeof name,
					    &consistent, err, errlen);
		sl_pg_slot_wait_end(&wait);
	}
	if (rc < 0)
		goto fail;
	info->pos = lsn_pos(consistent);
	/* Import the snapshot at once, on every connection that reads it: it
	 * dies at the next command on the connection that exported it. */
	nconns = s->st->backfill_connections > 0 ? s->st->backfill_connections : 1;
	if (!(snap->conns = calloc((size_t)nconns, sizeof *snap->conns))) {
		snprintf(err, errlen, "out of memory");
		rc = SL_EFAIL;
		goto fail;
	}
	for (snap->nconns = 0; snap->nconns < nconns; snap->nconns++) {
		PGconn *c = sl_pg_connect(s->cfg, false, err, errlen);
		if (!c) {
			rc = sl_pg_err_status();
			goto fail;
		}
		snap->conns[snap->nconns] = c;
		if ((rc = sl_pg_backfill_begin(c, name, err, errlen)) < 0) {
			snap->nconns++;
			goto fail;
		}
	}
	*out = snap;
	return SL_OK;
fail:
	for (int i = 0; i < snap->nconns; i++)
		PQfinish(snap->conns[i]);
	free(snap->conns);
	sl_pg_repl_close(snap->tmp);
	free(snap);
	return rc;
}

static int pg_snapshot_read(void *ctx, void *snap, const struct sl_table *t, sl_row_fn fn, void *payload,
			    uint64_t *rows, char *err, size_t errlen)
{
	struct pg_src *s = ctx;
	struct pg_snap *sn = snap;

	return sl_pg_backfill_table(sn->conns[0], t, fn, payload, &s->bf_stats, rows, err, errlen);
}

static int pg_snapshot_read_chunked(void *ctx, void *snap, const struct sl_table *t, const struct sl_chunked_read *o,
				    sl_row_fn fn, void *payload, uint64_t *rows, char *err, size_t errlen)
{
	struct pg_src *s = ctx;
	struct pg_snap *sn = snap;

	return sl_pg_read_chunked(sn->conns, sn->nconns, t, o, fn, payload, &s->bf_stats, rows, err, errlen);
}

static int pg_snapshot_read_tables(void *ctx, void *snap, const struct sl_table *const *tables, int n,
				   const struct sl_table_reads *o, sl_row_fn fn, void *payload, char *err, size_t errlen)
{
	struct pg_src *s = ctx;
	struct pg_snap *sn = snap;

	return sl_pg_backfill_tables(sn->conns, sn->nconns, tables, n, o, fn, payload, &s->bf_stats, err, errlen);
}

static int pg_snapshot_lock(void *ctx, void *snap, const struct sl_table *const *tables, int n, char *err,
			    size_t errlen)
{
	struct pg_snap *sn = snap;
	int rc = SL_OK;

	(void)ctx;
	/* Every connection holds every lock: one that asked for a lock only
	 * when it reads would queue behind a waiting ALTER TABLE, which waits
	 * for another connection of the same backfill. */
	for (int i = 0; i < sn->nconns && rc == SL_OK; i++)
		rc = sl_pg_lock_tables(sn->conns[i], tables, n, SL_PG_BACKFILL_LOCK_TIMEOUT, err, errlen);
	/* A partition attached or detached after the tables were listed and
	 * before the snapshot: the rows read are not those of the partitions
	 * the stream records (struct sl_table.shape), and a change of them
	 * later would go unseen.  The stream starts again, listing them anew. */
	for (int i = 0; i < n && rc == SL_OK; i++) {
		uint64_t shape;
		if (!(tables[i]->src_flags & SL_PG_PARTITIONED))
			continue;
		if ((rc = sl_pg_snapshot_shape(sn->conns[0], tables[i]->relid, &shape, err, errlen)) == SL_OK &&
		    shape != tables[i]->shape) {
			snprintf(err, errlen, "the partitions of \"%s\".\"%s\" changed between the listing of the tables "
				 "and the backfill's snapshot", tables[i]->ns, tables[i]->name);
			rc = SL_ERESTART;
		}
	}
	return rc == SL_EAGAIN ? SL_EFAIL : rc;  /* the snapshot's transaction is aborted */
}

static void pg_snapshot_close(void *ctx, void *snap)
{
	struct pg_snap *sn = snap;

	(void)ctx;
	if (!sn)
		return;
	for (int i = 0; i < sn->nconns; i++) {
		/* A connection left in the middle of a COPY (a failed read) is
		 * closed as it is: its transaction ends with it. */
		if (PQtransactionStatus(sn->conns[i]) == PQTRANS_INTRANS)
			sl_pg_backfill_end(sn->conns[i]);
		PQfinish(sn->conns[i]);
	}
	free(sn->conns);
	sl_pg_repl_close(sn->tmp);
	free(sn);
}

/* ---- backfill while streaming ---- */

static int pg_emit_watermark(void *ctx, const char *text, struct sl_position *at, char *err, size_t errlen)
{
	struct pg_src *s = ctx;
	uint64_t lsn;
	int rc = sl_pg_emit_watermark(s->meta, text, &lsn, err, errlen);

	if (rc == SL_OK) {
		*at = lsn_pos(lsn);
		s->wm_emitted = lsn;
	}
	return rc;
}

/* t's key columns in the primary key's order (read once per table). */
static int table_keys(struct pg_src *s, const struct sl_table *t, const struct sl_pg_keys **out, char *err,
		      size_t errlen)
{
	struct sl_pg_keys *k, **nk;
	int rc;

	for (int i = 0; i < s->nkeys; i++)
		if (s->keys[i]->relid == t->relid) {
			*out = s->keys[i];
			return SL_OK;
		}
	if ((rc = sl_pg_keys_lookup(s->meta, t, &k, err, errlen)) < 0)
		return rc;
	if (!(nk = realloc(s->keys, sizeof *nk * (size_t)(s->nkeys + 1)))) {
		sl_pg_keys_free(k);
		snprintf(err, errlen, "out of memory");
		return SL_EFAIL;
	}
	s->keys = nk;
	s->keys[s->nkeys++] = k;
	*out = k;
	return SL_OK;
}

/* How far the backfill of table i holds its changes, asked of the agent
 * once in the run (sl_source_hooks.covered) into s->covered_until[i] and
 * s->cover_first[i].  SL_OK or a failure (err). */
static int cover_ask(struct pg_src *s, int i, char *err, size_t errlen)
{
	struct sl_position until;
	int rc;

	if (!s->covered_until) {
		s->covered_until = calloc((size_t)s->ntables, sizeof *s->covered_until);
		s->cover_first = calloc((size_t)s->ntables, sizeof *s->cover_first);
		if (!s->covered_until || !s->cover_first) {
			free(s->covered_until);
			free(s->cover_first);
			s->covered_until = NULL;
			s->cover_first = NULL;
			snprintf(err, errlen, "out of memory");
			return SL_EFAIL;
		}
		for (int k = 0; k < s->ntables; k++)
			s->covered_until[k] = UINT64_MAX;   /* not asked yet */
	}
	if (s->covered_until[i] != UINT64_MAX)
		return SL_OK;
	rc = s->st->hooks->covered(s->st->hooks->payload, s->tables[i]->ns, s->tables[i]->name, &until, err, errlen);
	if (rc < 0)
		return rc;
	s->covered_until[i] = rc == SL_COVER_UNTIL ? until.w[0] : 0;
	s->cover_first[i] = rc == SL_COVER_FIRST_WATERMARK;
	return SL_OK;
}

/* The index of the selected table with relid in s->tables, or -1. */
static int table_index(const struct pg_src *s, uint32_t relid)
{
	for (int i = 0; i < s->ntables; i++)
		if (s->tables[i]->relid == relid)
			return i;
	return -1;
}

/* A chunk of table t is read after the watermark emitted last, its low
 * one.  When t's backfill holds its changes up to the low watermark of its
 * first chunk of the run (SL_COVER_FIRST_WATERMARK), the decoder drops
 * those committed before it, TRUNCATEs included: the chunk reads their
 * rows, and the marker at that watermark clears what the stream wrote of
 * them before the chunk opened.  Applied to the chunk, a change the stream
 * replays from before the watermark (the run before was killed with no
 * chunk durable) would remove rows the chunk read after it: a TRUNCATE or
 * a delete whose later insert is itself not in the chunk (issue 17, seed
 * 329).  A chunk read again (SL_EAGAIN, SL_ESTALE) moves it to its own low
 * watermark, until one is read (*first: t's index then, else -1).  SL_OK
 * or a failure (err). */
static int cover_first_chunk(struct pg_src *s, int *first, const struct sl_table *t, char *err, size_t errlen)
{
	int i = table_index(s, t->relid), rc;

	*first = -1;
	if (i < 0 || !s->st->hooks || !s->st->hooks->covered || !s->wm_emitted)
		return SL_OK;
	if ((rc = cover_ask(s, i, err, errlen)) < 0 || !s->cover_first[i])
		return rc;
	s->covered_until[i] = s->wm_emitted;
	sl_pgoutput_drop_below(sl_pg_repl_decoder(s->repl), t->relid, s->wm_emitted);
	*first = i;
	return SL_OK;
}

/* The first chunk of t in the run waits for the transactions that were
 * writing t then (pg_wait.c): SL_OK, SL_EAGAIN while it waits, or a
 * failure (err). */
static int writers_wait(struct pg_src *s, const struct sl_table *t, char *err, size_t errlen)
{
	int i = table_index(s, t->relid);

	if (i < 0)
		return SL_OK;
	if (!s->writers && !(s->writers = calloc((size_t)s->ntables, sizeof *s->writers))) {
		snprintf(err, errlen, "out of memory");
		return SL_EFAIL;
	}
	return sl_pg_writers_wait(&s->writers[i], s->meta, s->st, t, err, errlen);
}

static int pg_read_chunk(void *ctx, const struct sl_table *t, const char *after, uint64_t limit,
			 const struct sl_chunk_check *chk, sl_row_fn fn, void *payload, uint64_t *rows,
			 char **last, char *err, size_t errlen)
{
	struct pg_src *s = ctx;
	const struct sl_pg_keys *k;
	int first, rc;

	*rows = 0;
	*last = NULL;
	if (!sl_table_has_key(t)) {
		snprintf(err, errlen, "table \"%s\".\"%s\" has no primary key to read it in chunks", t->ns, t->name);
		return SL_EFAIL;
	}
	if ((rc = table_keys(s, t, &k, err, errlen)) < 0 || (rc = writers_wait(s, t, err, errlen)) < 0 ||
	    (rc = cover_first_chunk(s, &first, t, err, errlen)) < 0)
		return rc;
	if (!s->chunkc && !(s->chunkc = sl_pg_connect(s->cfg, false, err, errlen)))
		return sl_pg_err_status();
	rc = sl_pg_read_chunk(s->chunkc, t, k, after, limit, chk, fn, payload, &s->bf_stats, rows, last, err, errlen);
	if (rc == SL_OK && first >= 0)
		s->cover_first[first] = false;
	if (rc < 0 && rc != SL_EAGAIN && rc != SL_EDATA && PQstatus(s->chunkc) != CONNECTION_OK) {
		PQfinish(s->chunkc);   /* a new one next time */
		s->chunkc = NULL;
	}
	return rc;
}

static int pg_start(void *ctx, const struct sl_position *from, char *err, size_t errlen)
{
	struct pg_src *s = ctx;

	if (!s->repl && !(s->repl = sl_pg_repl_open(s->cfg, key_lookup, s, err, errlen)))
		return sl_pg_err_status();
	s->last_catalog_ms = sl_mono_ms();
	sl_pg_repl_set_timeout(s->repl, s->silence_ms);
	return sl_pg_repl_start(s->repl, sl_pg_stream(s->st)->slot, sl_pg_stream(s->st)->publication, from->w[0], err, errlen);
}

/* Hands out the next change of the decoded message held in s->rev, if any. */
static bool pending_change(struct pg_src *s, struct sl_event *ev)
{
	struct sl_pgo_event *pe = &s->rev.pgo;

	if (s->truncating) {
		if (sl_pgoutput_truncate_next(sl_pg_repl_decoder(s->repl), &ev->change) == 1) {
			ev->kind = SL_EV_CHANGE;
			return true;
		}
		s->truncating = false;
		return false;
	}
	if (s->next_change < pe->nchanges) {
		ev->change = pe->changes[s->next_change++];
		ev->kind = SL_EV_CHANGE;
		return true;
	}
	return false;
}

/* At a Relation message of a followed table: the decoder drops its
 * changes that its backfill holds (sl_pgoutput_drop_below), as far as
 * cover_ask found.  A snapshot backfill at P holds every change committed
 * before P; the stream reads them again when it resumes from a position
 * before P (a backfill redone after a crash takes a new snapshot, while the
 * slot stays where the interrupted one began).  Covered by a snapshot, a
 * change's record would sort below the marker before the snapshot's rows,
 * which clears it; written, it would also be the row that later changes of
 * the batch take unchanged TOAST values from, though the snapshot's row of
 * the key is newer. */
static int on_relation_covered(struct pg_src *s, uint32_t relid, char *err, size_t errlen)
{
	int i = table_index(s, relid), rc;

	if (i < 0 || !s->st->hooks || !s->st->hooks->covered) {
		sl_pgoutput_drop_below(sl_pg_repl_decoder(s->repl), relid, 0);
		return SL_OK;
	}
	if ((rc = cover_ask(s, i, err, errlen)) < 0)
		return rc;
	sl_pgoutput_drop_below(sl_pg_repl_decoder(s->repl), relid, s->covered_until[i]);
	return SL_OK;
}

/* The selected table with relid, or NULL. */
static const struct sl_table *selected(const struct pg_src *s, uint32_t relid)
{
	int i = table_index(s, relid);

	return i < 0 ? NULL : s->tables[i];
}

/* SL_ERESTART, with err saying why, when the catalog's selection differs
 * from the stream's tables (by OID, name, partitions and identity). */
static int catalog_check(struct pg_src *s, char *err, size_t errlen)
{
	struct sl_table **now = NULL;
	int n = 0, rc = sl_pg_select_tables(s->meta, s->st->tables, s->st->exclude_tables, false, &now, &n,
					    err, errlen);

	if (rc < 0)
		return rc;
	for (int i = 0; i < n && rc == SL_OK; i++) {
		const struct sl_table *t = now[i], *k = selected(s, t->relid);
		if (!k || strcmp(k->ns, t->ns) || strcmp(k->name, t->name)) {
			snprintf(err, errlen, "stream \"%s\": table \"%s\".\"%s\" is new, was created again or "
				 "renamed", s->st->name, t->ns, t->name);
			rc = SL_ERESTART;
		} else if (k->shape != t->shape) {
			snprintf(err, errlen, "stream \"%s\": the partitions of \"%s\".\"%s\" changed", s->st->name,
				 t->ns, t->name);
			rc = SL_ERESTART;
		} else if (k->no_row_identity != t->no_row_identity) {
			snprintf(err, errlen, "stream \"%s\": the replica identity of \"%s\".\"%s\" changed",
				 s->st->name, t->ns, t->name);
			rc = SL_ERESTART;
		}
	}
	if (rc == SL_OK && n != s->ntables) {
		snprintf(err, errlen, "stream \"%s\": a selected table was dropped or renamed", s->st->name);
		rc = SL_ERESTART;
	}
	sl_pg_tables_free(now, n);
	if (rc == SL_OK)
		rc = sl_pg_publication_kept(s->meta, s->st, s->tables, s->ntables, true, NULL, err, errlen);
	return rc;
}

/* A Relation message flags the replica identity's columns (every column
 * under FULL).  When it no longer holds the table's key (ALTER TABLE ...
 * REPLICA IDENTITY USING INDEX on another index, while streaming), the
 * deletes and key changes that follow cannot name their rows: SL_EPREREQ,
 * before any of them is written (check_key refuses the same at start). */
static int identity_holds_key(const struct pg_src *s, const struct sl_table *t, char *err, size_t errlen)
{
	bool full = true, holds = true;
	struct sl_buf key;

	for (int i = 0; i < t->ncols; i++) {
		full &= t->cols[i].in_identity;
		holds &= !t->cols[i].is_key || t->cols[i].in_identity;
	}
	if (full || holds)
		return 0;
	sl_buf_init(&key, 0);
	put_columns(&key, t, true);
	snprintf(err, errlen, "stream \"%s\": the replica identity of table \"%s\".\"%s\" no longer holds its key "
		 "(%s): its deletes and key changes from here on cannot name their rows. Run ALTER TABLE %s.%s "
		 "REPLICA IDENTITY DEFAULT (or FULL); the changes made in between cannot be mirrored exactly: leave "
		 "the table out (exclude_tables) until the stream is past them, then select it again, which "
		 "backfills it", s->st->name, t->ns, t->name, key.data ? key.data : "", t->ns, t->name);
	sl_buf_free(&key);
	return SL_EPREREQ;
}

/* The type name (format_type) of a column of type oid and typmod into
 * *name (NULL: none): from a column of the same type in known or prev,
 * else asked of the catalog.  SL_OK, or a negative status with err. */
static int type_name_of(struct pg_src *s, uint32_t oid, int32_t typmod, const struct sl_table *known,
			const struct sl_table *prev, char **name, char *err, size_t errlen)
{
	const struct sl_table *from[2] = { known, prev };
	const char *found = NULL;
	char o[16], m[16];
	const char *params[2] = { o, m };
	PGresult *res = NULL;
	int rc = SL_OK;

	*name = NULL;
	for (int k = 0; k < 2 && !found; k++)
		for (int i = 0; from[k] && i < from[k]->ncols && !found; i++) {
			const struct sl_column *c = &from[k]->cols[i];
			if (c->type_name && c->src_type == oid && c->src_typmod == typmod)
				found = c->type_name;
		}
	if (!found) {
		snprintf(o, sizeof o, "%" PRIu32, oid);
		snprintf(m, sizeof m, "%" PRId32, typmod);
		res = PQexecParams(s->meta, "SELECT format_type($1::oid, $2::int)", 2, NULL, params, NULL, NULL, 0);
		if (PQresultStatus(res) != PGRES_TUPLES_OK || PQntuples(res) != 1)
			rc = sl_pg_err(err, errlen, "could not read the name of a column's type", s->meta, res);
		else if (!PQgetisnull(res, 0, 0))
			found = PQgetvalue(res, 0, 0);
	}
	if (rc == SL_OK && found && !(*name = strdup(found))) {
		snprintf(err, errlen, "out of memory");
		rc = SL_EFAIL;
	}
	PQclear(res);
	return rc;
}

/* A Relation message gives each column's type as an OID and modifier: t's
 * columns take the catalog's names of their types (sluice.source_type in
 * the Avro schema), as the description read from the catalog at the start
 * (known) has them.  SL_OK, or a negative status with err. */
static int name_types(struct pg_src *s, struct sl_table *t, const struct sl_table *known,
		      const struct sl_table *prev, char *err, size_t errlen)
{
	for (int i = 0; i < t->ncols; i++) {
		struct sl_column *c = &t->cols[i];
		int rc;
		if (!c->type_name &&
		    (rc = type_name_of(s, c->src_type, c->src_typmod, known, prev, &c->type_name, err, errlen)) < 0)
			return rc;
	}
	return SL_OK;
}

/* At a Relation message of table relid: SL_COLS_REWRITTEN or
 * SL_COLS_MISSING (sl_pg_columns_changed), with s->why saying why, when
 * the catalog's column identities (pg_rewrite.c) say that its existing rows
 * changed without a change record since its last Relation message (or the
 * start); 0 when they did not, or the stream does not select it.  The
 * message's version (t, the decoder's) gets its columns' missing values. */
static int columns_check(struct pg_src *s, uint32_t relid, struct sl_table *t, const struct sl_table *prev, char *err,
			 size_t errlen)
{
	struct sl_table now, *p = &now;
	const char *was;
	int i = table_index(s, relid), rc;

	if (i < 0 || !s->meta)
		return 0;
	if (!s->src_columns && !(s->src_columns = calloc((size_t)s->ntables, sizeof *s->src_columns))) {
		snprintf(err, errlen, "out of memory");
		return SL_EFAIL;
	}
	memset(&now, 0, sizeof now);
	now.relid = relid;
	if ((t && (rc = name_types(s, t, s->tables[i], prev, err, errlen)) < 0) ||
	    (rc = sl_pg_idents_read(s->meta, &p, 1, err, errlen)) < 0 ||
	    (t && (rc = sl_pg_missing_read(s->meta, &t, 1, err, errlen)) < 0))
		return rc;
	was = s->src_columns[i] ? s->src_columns[i] : s->tables[i]->src_columns;
	if (t && sl_pg_missing_keep(t, prev ? prev : s->tables[i], was, now.src_columns) < 0) {
		free(now.src_columns);
		snprintf(err, errlen, "out of memory");
		return SL_EFAIL;
	}
	rc = sl_pg_columns_changed(was, now.src_columns, s->why, sizeof s->why);
	if (rc == SL_COLS_LOST && t)
		rc = 0;   /* kept from the version before (sl_pg_missing_keep) */
	if (now.src_columns) {
		/* The version the Relation message made carries them too, so
		 * that a backfill of it records them (Q_JOB_START). */
		free(s->src_columns[i]);
		s->src_columns[i] = now.src_columns;
		sl_pgoutput_set_src_columns(sl_pg_repl_decoder(s->repl), relid, strdup(now.src_columns));
	}
	return rc;
}

/* A Relation message of a selected table under a name other than the one
 * the stream took from the catalog at its start: SL_ERESTART when the
 * catalog changed since (a rename to take in), else 1.  Then the message's
 * name is the table's name before a rename that the catalog had already
 * made when the stream started (the stream resumed from a position before
 * the rename): the table was taken in under its new name then, as a new
 * table to backfill (agent/stream.c), and its changes logged before the
 * rename are dropped (the backfill's chunks, read after the rename, hold
 * their effect); restarting would meet the same message again, forever. */
static int renamed_relation(struct pg_src *s, const struct sl_table *known, const struct sl_table *t, char *err,
			    size_t errlen)
{
	int rc = s->meta ? catalog_check(s, err, errlen) : SL_ERESTART;

	if (rc == SL_ERESTART)
		snprintf(err, errlen, "stream \"%s\": table \"%s\".\"%s\" was renamed to \"%s\".\"%s\"",
			 s->st->name, known->ns, known->name, t->ns, t->name);
	if (rc != SL_OK)
		return rc;
	/* Decoded all the same, then dropped: a change keeps the sequence
	 * number it had when a run before the crash wrote them. */
	sl_pgoutput_drop_below(sl_pg_repl_decoder(s->repl), t->relid, UINT64_MAX);
	sl_info("stream \"%s\": skipping the changes of \"%s\".\"%s\" logged before it was renamed from \"%s\".\"%s\": "
		"its backfill as a new table reads its rows", s->st->name, known->ns, known->name, t->ns, t->name);
	return 1;
}

/* A Relation message of a table the stream does not know under a name it
 * selects, the catalog selecting what the stream does: SL_OK to leave it
 * unread, 1 when the table is gone from the catalog (dropped since: the
 * stream resumed from a position before the drop).  Such a table was
 * followed by the runs before the drop, so its changes are decoded all the
 * same and then dropped (sl_pgoutput_drop_below): each change of the transaction
 * keeps the sequence number, CSN and uuid that a run before a crash wrote
 * it with (left unread, the next changes took their numbers). */
static int dropped_relation(struct pg_src *s, const struct sl_table *t, char *err, size_t errlen)
{
	char oid[16];
	const char *params[1] = { oid };
	PGresult *res;
	int rc;

	snprintf(oid, sizeof oid, "%u", t->relid);
	res = PQexecParams(s->meta, "SELECT 1 FROM pg_class WHERE oid = $1::oid", 1, NULL, params, NULL, NULL, 0);
	if (PQresultStatus(res) != PGRES_TUPLES_OK) {
		snprintf(err, errlen, "stream \"%s\": could not look up table \"%s\".\"%s\" in the catalog: %s",
			 s->st->name, t->ns, t->name, PQerrorMessage(s->meta));
		rc = sl_pg_err_status();
		goto out;
	}
	rc = PQntuples(res) == 0;
	if (rc == 1) {
		sl_pgoutput_drop_below(sl_pg_repl_decoder(s->repl), t->relid, UINT64_MAX);
		sl_info("stream \"%s\": skipping the changes of \"%s\".\"%s\" (OID %u), a table dropped since they "
			"were logged", s->st->name, t->ns, t->name, t->relid);
	}
out:
	PQclear(res);
	return rc;
}

/* A Relation message: 0 to follow the relation, 1 when the stream does not
 * select it (its changes are skipped; a publication shared with other
 * streams, FOR ALL TABLES, or inheritance children bring such tables) or
 * names a selected table by its name before a rename the stream took in at
 * its start (renamed_relation), or SL_ERESTART when it is a selected table
 * the stream does not know yet (new, created again, or renamed), which only
 * a restart backfills, or SL_EPREREQ when its replica identity lost its key
 * (identity_holds_key). */
static int on_relation(struct pg_src *s, const struct sl_table *t, char *err, size_t errlen)
{
	const struct sl_table *known = selected(s, t->relid);

	/* A partitioned table is read without ONLY (a backfill while streaming
	 * reads it by this version): the catalog knows, the message does not. */
	if (known)
		sl_pgoutput_set_src_flags(sl_pg_repl_decoder(s->repl), t->relid, known->src_flags & SL_PG_PARTITIONED);
	if (known && !strcmp(known->ns, t->ns) && !strcmp(known->name, t->name))
		return identity_holds_key(s, t, err, errlen);
	if (known)
		return renamed_relation(s, known, t, err, errlen);
	if (s->meta && sl_pg_selects(s->st->tables, s->st->exclude_tables, t->ns, t->name)) {
		/* Its name is selected, but it may well be covered by a selected
		 * ancestor (a partition): only a catalog that selects differently
		 * from the stream's tables is a reason to restart. */
		int rc = catalog_check(s, err, errlen);
		if (rc == SL_OK)
			rc = dropped_relation(s, t, err, errlen);
		if (rc != SL_OK)
			return rc;
	}
	sl_pgoutput_ignore(sl_pg_repl_decoder(s->repl), t->relid);
	sl_info("stream \"%s\": skipping the changes of \"%s\".\"%s\": its publication carries it, but the "
		"stream does not select it", s->st->name, t->ns, t->name);
	return 1;
}

/*
 * pgoutput describes a change of a partition published through its root
 * (publish_via_partition_root) with the root's Relation message and then
 * the leaf's, back to back, before the leaf's first change in a session
 * (and again after an invalidation).  So the stream learns which leaf the
 * root's next changes come from.  When that leaf is not a leaf of the
 * selected root in today's catalog, the root's partitions changed after the
 * change was logged: the partition was attached and detached again (or
 * dropped) while sluice was stopped or between two looks at the catalog,
 * which the root's shape, the same again, cannot show.  The root's output
 * would then keep the rows those changes write, though the partition is no
 * longer part of the root, and the partition, when the stream follows it as
 * a table of its own now, would lack them.  So the root and that table are
 * backfilled again behind a marker (sl_source_hooks.replaced: its marker
 * sorts after the source's position at the next start, above every change
 * of the partition): SL_ERESTART once the agent has durably asked for it,
 * SL_OK when their backfills already come after position at.  A leaf of the root today while the root's shape
 * differs from the stream's is a partition attached since the stream
 * started: SL_ERESTART, as a catalog check would, without waiting for the
 * next one.
 */
static int leaf_check(struct pg_src *s, const struct sl_table *root, const struct sl_table *leaf, uint64_t at,
		      char *err, size_t errlen)
{
	struct sl_position pos = lsn_pos(at);
	const struct sl_table *own = selected(s, leaf->relid);   /* the partition, a table of its own now */
	char lsn[24];
	uint64_t shape;
	int again = 0, rc = sl_pg_leaf_of(s->meta, root->relid, leaf->relid, &shape, err, errlen);

	if (rc < 0)
		return rc;
	if (rc == 1) {
		if (shape == root->shape)
			return SL_OK;
		snprintf(err, errlen, "stream \"%s\": the partitions of \"%s\".\"%s\" changed", s->st->name, root->ns,
			 root->name);
		return SL_ERESTART;
	}
	if (!s->st->hooks || !s->st->hooks->replaced) {
		snprintf(err, errlen, "stream \"%s\": changes of \"%s\".\"%s\" came from partition \"%s\".\"%s\", which "
			 "is no longer one of its partitions; run `sluice backfill -c %s --stream %s --table %s.%s`",
			 s->st->name, root->ns, root->name, leaf->ns, leaf->name,
			 s->st->config_path ? s->st->config_path : "FILE", s->st->name, root->ns, root->name);
		return SL_EPREREQ;
	}
	if ((rc = s->st->hooks->replaced(s->st->hooks->payload, root->ns, root->name, &pos, true, err, errlen)) < 0 ||
	    (own && (again = s->st->hooks->replaced(s->st->hooks->payload, own->ns, own->name, &pos, true, err,
						     errlen)) < 0))
		return rc < 0 ? rc : again;
	if (rc == 0 && again == 0)
		return SL_OK;
	sl_lsn_format(at, lsn);
	if (rc)
		sl_warn("stream \"%s\": changes of \"%s\".\"%s\" at %s came from partition \"%s\".\"%s\", which is no "
			"longer one of its partitions (attached and detached again since): backfilling \"%s\".\"%s\" again",
			s->st->name, root->ns, root->name, lsn, leaf->ns, leaf->name, root->ns, root->name);
	if (again)
		sl_warn("stream \"%s\": table \"%s\".\"%s\" was a partition of \"%s\".\"%s\" at %s, so its changes there "
			"came under the partitioned table's name: backfilling \"%s\".\"%s\" again", s->st->name, own->ns,
			own->name, root->ns, root->name, lsn, own->ns, own->name);
	snprintf(err, errlen, "stream \"%s\": partition \"%s\".\"%s\" of \"%s\".\"%s\" was detached: %s backfilled again",
		 s->st->name, leaf->ns, leaf->name, root->ns, root->name, rc && again ? "both tables are" : "it is");
	return SL_ERESTART;
}

/* At a Relation message (pe): leaf_check's answer when it is a leaf's
 * after a selected partitioned root's, else SL_OK; notes a selected root's
 * message for the next one. */
static int relation_pair(struct pg_src *s, const struct sl_pgo_event *pe, char *err, size_t errlen)
{
	const struct sl_table *root = s->via_root ? selected(s, s->via_root) : NULL;
	const struct sl_table *t = selected(s, pe->table->relid);

	s->via_root = 0;
	if (root && pe->table->relid != root->relid && s->meta)
		return leaf_check(s, root, pe->table, pe->final_lsn, err, errlen);
	if (t && (t->src_flags & SL_PG_PARTITIONED) && !strcmp(t->ns, pe->table->ns) &&
	    !strcmp(t->name, pe->table->name))
		s->via_root = t->relid;
	return SL_OK;
}

/* Heartbeats (pg_probe_heartbeat below) are non-transactional logical
 * messages with prefix SL_PG_HEARTBEAT_PREFIX and content "<slot>
 * <unix-us>": each slot of the database decodes every one, so a stream takes
 * only its own.  The walsender sends a non-transactional message as soon as
 * it decodes it, between transactions: every transaction that committed
 * before it was sent before it, so its LSN is a position the stream may
 * acknowledge, like a keepalive's, and its time is the source time that
 * everything before it was written by. */
static bool heartbeat_event(struct pg_src *s, const struct sl_pgo_event *pe, struct sl_event *ev)
{
	size_t slen = strlen(sl_pg_stream(s->st)->slot ? sl_pg_stream(s->st)->slot : "");
	char num[24];
	int64_t us;

	if (pe->transactional || !pe->prefix || strcmp(pe->prefix, SL_PG_HEARTBEAT_PREFIX) != 0 || !slen ||
	    pe->content_len <= slen + 1 || pe->content_len - slen - 1 >= sizeof num ||
	    memcmp(pe->content, sl_pg_stream(s->st)->slot, slen) != 0 || pe->content[slen] != ' ')
		return false;
	memcpy(num, pe->content + slen + 1, pe->content_len - slen - 1);
	num[pe->content_len - slen - 1] = '\0';
	if (sl_parse_i64(num, 1, INT64_MAX, &us) < 0)
		return false;
	ev->kind = SL_EV_KEEPALIVE;
	ev->pos = lsn_pos(pe->message_lsn);
	ev->ts_us = us;
	ev->heartbeat = true;
	return true;
}

static int pg_next(void *ctx, int timeout_ms, struct sl_event *ev, char *err, size_t errlen)
{
	struct pg_src *s = ctx;
	struct sl_pgo_event *pe = &s->rev.pgo;
	int rc;

	memset(ev, 0, offsetof(struct sl_event, change));
	if (pending_change(s, ev))
		return SL_OK;
	if (s->meta && !sl_pgoutput_in_tx(sl_pg_repl_decoder(s->repl)) &&
	    sl_mono_ms() - s->last_catalog_ms >= CATALOG_CHECK_MS) {
		s->last_catalog_ms = sl_mono_ms();
		if ((rc = catalog_check(s, err, errlen)) != SL_OK)
			return rc;
	}
	for (;;) {
		s->next_change = 0;
		pe->nchanges = 0;
		if ((rc = sl_pg_repl_next(s->repl, timeout_ms, &s->rev, err, errlen)) < 0)
			return rc;
		switch (s->rev.kind) {
		case SL_PGR_TIMEOUT:
			ev->kind = SL_EV_TIMEOUT;
			return SL_OK;
		case SL_PGR_END:
			ev->kind = SL_EV_END;
			return SL_OK;
		case SL_PGR_KEEPALIVE:
			ev->kind = SL_EV_KEEPALIVE;
			ev->pos = lsn_pos(s->rev.wal_end);
			ev->reply_requested = s->rev.reply_requested;
			return SL_OK;
		case SL_PGR_DATA:
			break;
		}
		if (pe->kind != SL_PGO_RELATION && pe->kind != SL_PGO_NONE)
			s->via_root = 0;   /* Type messages may come between the two Relation messages */
		switch (pe->kind) {
		case SL_PGO_BEGIN:
			ev->kind = SL_EV_BEGIN;
			ev->pos = lsn_pos(pe->final_lsn);
			ev->ts_us = pe->commit_ts_us;
			ev->tx_id = pe->xid;
			return SL_OK;
		case SL_PGO_COMMIT:
			ev->kind = SL_EV_COMMIT;
			ev->pos = lsn_pos(pe->end_lsn);
			ev->ts_us = pe->commit_ts_us;
			return SL_OK;
		case SL_PGO_RELATION:
			if ((rc = relation_pair(s, pe, err, errlen)) != SL_OK ||
			    (rc = on_relation(s, pe->table, err, errlen)) != 0) {
				sl_table_free(pe->retired);  /* no change of it goes on */
				if (rc < 0)
					return rc;
				break;
			}
			if ((rc = on_relation_covered(s, pe->table->relid, err, errlen)) < 0 ||
			    (rc = columns_check(s, pe->table->relid,
						sl_pgoutput_table_mut(sl_pg_repl_decoder(s->repl), pe->table->relid),
						pe->retired, err, errlen)) < 0) {
				sl_table_free(pe->retired);
				return rc;
			}
			ev->kind = SL_EV_SCHEMA;
			ev->table = pe->table;
			ev->changed = pe->schema_changed;
			ev->retired = pe->retired;
			ev->rebackfill = rc > 0 ? s->why : NULL;
			ev->rebackfill_missing = rc == SL_COLS_MISSING;
			return SL_OK;
		case SL_PGO_CHANGE:
			s->truncating = pe->nchanges == 0;
			if (pending_change(s, ev))
				return SL_OK;
			break;  /* a TRUNCATE of no relation we know */
		case SL_PGO_MESSAGE:
			if (heartbeat_event(s, pe, ev))
				return SL_OK;
			/* A backfill watermark (of any stream): a non-transactional
			 * message, sent as the server decodes it, between
			 * transactions. */
			if (!pe->transactional && !strcmp(pe->prefix, SL_PG_WATERMARK_PREFIX)) {
				sl_buf_reset(&s->wm);
				sl_buf_append(&s->wm, pe->content, pe->content_len);
				if (sl_buf_failed(&s->wm)) {
					snprintf(err, errlen, "out of memory reading a watermark");
					return SL_EFAIL;
				}
				ev->kind = SL_EV_WATERMARK;
				ev->watermark = s->wm.data ? s->wm.data : "";
				ev->pos = lsn_pos(pe->message_lsn);
				return SL_OK;
			}
			break;
		case SL_PGO_NONE:
			break;
		}
		/* Nothing to report: read what else is already here, without waiting. */
		timeout_ms = 0;
	}
}

static int pg_ack(void *ctx, const struct sl_position *durable, bool want_reply, char *err, size_t errlen)
{
	struct pg_src *s = ctx;

	if (!s->repl)
		return SL_OK;
	return sl_pg_repl_send_status(s->repl, durable->w[0], durable->w[0], want_reply, err, errlen);
}

/* ---- check and probe: connections of their own ---- */

struct pg_probe {
	const struct sl_source_config *cfg;
	const struct sl_source_stream *st;
	PGconn *c;
	bool hb_checked;                /* heartbeats were found permitted */
};

static int heartbeat_permitted(struct pg_probe *p, char *err, size_t errlen);

static int pg_check(const struct sl_source_config *cfg, const struct sl_source_stream *st,
		    const struct sl_source_resume *resume, FILE *out, char *err, size_t errlen)
{
	struct sl_table **tables = NULL;
	bool slot_exists = false, pub_exists = false;
	int ntables = 0, rc;
	PGconn *c = sl_pg_connect(cfg, false, err, errlen);

	if (!c)
		return sl_pg_err_status();
	fprintf(out, "stream %s: source %s: connected\n", st->name, cfg->name);
	if ((rc = sl_pg_check_prereqs(c, err, errlen)) < 0)
		goto out;
	fprintf(out, "stream %s: source %s: wal_level = logical, role may replicate\n", st->name, cfg->name);
	if ((rc = list_tables(c, cfg, st, &tables, &ntables, err, errlen)) < 0)
		goto out;
	if ((rc = check_tables(c, st, tables, ntables, err, errlen)) < 0)
		goto out;
	for (int i = 0; i < ntables; i++) {
		fprintf(out, "stream %s: table %s.%s: %d columns%s\n", st->name, tables[i]->ns, tables[i]->name,
			tables[i]->ncols, sl_table_has_key(tables[i]) ? "" : ", no primary key (append mode only)");
	}
	if ((rc = sl_pg_publication_fit(c, sl_pg_stream(st)->publication, tables, ntables, &pub_exists, err, errlen)) < 0 ||
	    (resume && resume->has_position &&
	     (rc = sl_pg_publication_kept(c, st, tables, ntables, false, NULL, err, errlen)) < 0) ||
	    (rc = sl_pg_check_publication(c, st, tables, ntables, out, err, errlen)) < 0)
		goto out;
	if ((rc = sl_pg_slot_check(c, cfg, st, resume, &slot_exists, err, errlen)) < 0)
		goto out;
	fprintf(out, "stream %s: slot %s: %s\n", st->name, sl_pg_stream(st)->slot, slot_exists ? "exists" : "will be created");
	if (st->heartbeats) {
		/* Optional: without them the agent runs all the same, so no failure. */
		struct pg_probe hp = { .cfg = cfg, .st = st, .c = c };
		char why[SL_ERRLEN];
		int hrc = heartbeat_permitted(&hp, why, sizeof why);
		if (hrc == SL_OK)
			fprintf(out, "stream %s: heartbeats: permitted\n", st->name);
		else
			fprintf(out, "stream %s: heartbeats: the agent will run without them: %s\n", st->name, why);
	}
	rc = SL_OK;
out:
	sl_pg_tables_free(tables, ntables);
	PQfinish(c);
	return rc;
}

static int slot_status(PGconn *c, const char *slot, struct sl_source_status *out, char *err, size_t errlen);

static int pg_probe(const struct sl_source_config *cfg, const struct sl_source_stream *st,
		    struct sl_source_status *out, char *err, size_t errlen)
{
	PGconn *c = sl_pg_connect(cfg, false, err, errlen);
	int rc;

	memset(out, 0, sizeof *out);
	out->lag_bytes = out->retained_bytes = out->safe_bytes = -1;
	if (!c)
		return sl_pg_err_status();
	rc = slot_status(c, sl_pg_stream(st)->slot, out, err, errlen);
	PQfinish(c);
	return rc;
}

/* ---- the probe thread's session and heartbeats ---- */

static int pg_probe_open(void **pctx, const struct sl_source_config *cfg, const struct sl_source_stream *st,
			 char *err, size_t errlen)
{
	struct pg_probe *p = calloc(1, sizeof *p);

	*pctx = NULL;
	if (!p) {
		snprintf(err, errlen, "out of memory");
		return SL_EFAIL;
	}
	p->cfg = cfg;
	p->st = st;
	if (!(p->c = sl_pg_connect(cfg, false, err, errlen))) {
		free(p);
		return SL_EFAIL;
	}
	*pctx = p;
	return SL_OK;
}

static void pg_probe_close(void *pctx)
{
	struct pg_probe *p = pctx;

	if (!p)
		return;
	if (p->c)
		PQfinish(p->c);
	free(p);
}

/* What a slot's wal_status says of the WAL it needs: reserved and extended
 * keep it; unreserved will lose it at the next checkpoint
 * (max_slot_wal_keep_size exceeded); lost has lost it. */
static enum sl_hold hold_of(const char *wal_status)
{
	if (!strcmp(wal_status, "reserved") || !strcmp(wal_status, "extended"))
		return SL_HOLD_KEPT;
	if (!strcmp(wal_status, "unreserved"))
		return SL_HOLD_AT_RISK;
	if (!strcmp(wal_status, "lost"))
		return SL_HOLD_LOST;
	return SL_HOLD_UNKNOWN;
}

/* The slot's row as struct sl_source_status. */
static int slot_status(PGconn *c, const char *slot, struct sl_source_status *out, char *err, size_t errlen)
{
	struct sl_pg_slot_info si;
	int rc;

	memset(out, 0, sizeof *out);
	out->lag_bytes = out->retained_bytes = out->safe_bytes = -1;
	if ((rc = sl_pg_slot_info(c, slot, &si, err, errlen)) < 0)
		return rc;
	out->exists = si.exists;
	if (!si.exists)
		return SL_OK;
	out->active = si.active;
	out->hold = hold_of(si.wal_status);
	snprintf(out->hold_word, sizeof out->hold_word, "%s", si.wal_status);
	if (si.confirmed_flush_lsn)  /* NULL while the slot is being created */
		sl_lsn_format(si.confirmed_flush_lsn, out->confirmed);
	if (si.restart_lsn)          /* NULL once the slot is lost */
		sl_lsn_format(si.restart_lsn, out->restart);
	out->lag_bytes = si.lag_bytes;
	out->retained_bytes = si.retained_bytes;
	out->safe_bytes = si.safe_wal_size;
	sl_source_figure_text(out, "confirmed_flush_lsn", out->confirmed);
	sl_source_figure_text(out, "restart_lsn", out->restart);
	sl_source_figure_text(out, "wal_status", si.wal_status);
	sl_source_figure_num(out, "safe_wal_size", si.safe_wal_size);
	return SL_OK;
}

static int pg_probe_sample(void *pctx, struct sl_source_status *out, char *err, size_t errlen)
{
	struct pg_probe *p = pctx;

	return slot_status(p->c, sl_pg_stream(p->st)->slot, out, err, errlen);
}

/* Whether the role may write heartbeats: a standby cannot write at all, and
 * pg_logical_emit_message must be executable by the role. */
static int heartbeat_permitted(struct pg_probe *p, char *err, size_t errlen)
{
	PGresult *res = PQexec(p->c, "SELECT pg_is_in_recovery(), "
				     "has_function_privilege('pg_logical_emit_message(boolean, text, text)', 'EXECUTE')");
	int rc = SL_OK;

	if (PQresultStatus(res) != PGRES_TUPLES_OK || PQntuples(res) != 1) {
		sl_pg_err(err, errlen, "could not check whether heartbeats may be written", p->c, res);
		rc = SL_EFAIL;
	} else if (!strcmp(PQgetvalue(res, 0, 0), "t")) {
		snprintf(err, errlen, "source \"%s\" is a standby (in recovery), where pg_logical_emit_message cannot "
			 "write; set heartbeat_interval = 0 for stream \"%s\"", p->cfg->name, p->st->name);
		rc = SL_EPREREQ;
	} else if (strcmp(PQgetvalue(res, 0, 1), "t") != 0) {
		snprintf(err, errlen, "role \"%s\" may not execute pg_logical_emit_message on source \"%s\": run GRANT "
			 "EXECUTE ON FUNCTION pg_logical_emit_message(boolean, text, text) TO %s, or set "
			 "heartbeat_interval = 0 for stream \"%s\"", PQuser(p->c), p->cfg->name, PQuser(p->c), p->st->name);
		rc = SL_EPREREQ;
	}
	PQclear(res);
	return rc;
}

static int pg_heartbeat(void *pctx, char *err, size_t errlen)
{
	struct pg_probe *p = pctx;
	struct sl_buf content;
	const char *params[1];
	PGresult *res;
	int rc = SL_OK;

	if (!p->hb_checked) {
		if ((rc = heartbeat_permitted(p, err, errlen)) < 0)
			return rc;
		p->hb_checked = true;
	}
	sl_buf_init(&content, 0);
	sl_buf_printf(&content, "%s %" PRId64, sl_pg_stream(p->st)->slot, sl_now_us());
	if (sl_buf_failed(&content)) {
		snprintf(err, errlen, "out of memory");
		return SL_EFAIL;
	}
	params[0] = content.data;
	res = PQexecParams(p->c, "SELECT pg_logical_emit_message(false, '" SL_PG_HEARTBEAT_PREFIX "', $1)", 1, NULL,
			   params, NULL, NULL, 0);
	if (PQresultStatus(res) != PGRES_TUPLES_OK) {
		sl_pg_err(err, errlen, "could not write a heartbeat (pg_logical_emit_message)", p->c, res);
		rc = sl_pg_sqlstate_is(res, "42501") ? SL_EPREREQ : SL_EFAIL;
	}
	PQclear(res);
	sl_buf_free(&content);
	return rc;
}

static void pg_counters(void *ctx, struct sl_source_counters *out)
{
	struct pg_src *s = ctx;

	memset(out, 0, sizeof *out);
	out->timestamp_clamps = s->bf_stats.timestamp_clamps;
	out->decimal_nan_nulls = s->bf_stats.decimal_nan_nulls;
	if (s->repl) {
		const struct sl_pg_text_stats *ts = sl_pgoutput_text_stats(sl_pg_repl_decoder(s->repl));
		out->skipped_changes = sl_pgoutput_ignored(sl_pg_repl_decoder(s->repl));
		out->timestamp_clamps += ts->timestamp_clamps;
		out->decimal_nan_nulls += ts->decimal_nan_nulls;
	}
}

const struct sl_source_ops sl_pg_source_ops = {
	.type = "postgres",
	.desc = &sl_pg_desc,
	.keys = sl_pg_keys,
	.nkeys = SL_PG_NKEYS,
	.conf_size = sizeof(struct sl_pg_conf),
	.stream_keys = sl_pg_stream_keys,
	.stream_conf_keys = sl_pg_stream_conf_keys,
	.stream_conf_nkeys = SL_PG_STREAM_NKEYS,
	.stream_conf_size = sizeof(struct sl_pg_stream_conf),
	.stream_conf_check = sl_pg_stream_conf_check,
	.hold_metric = "sluice_slot_wal_status",
	.hold_label = "wal_status",
	.hold_help = "1 with the slot's wal_status (reserved, extended, unreserved, lost) as a label.",
	.check = pg_check,
	.probe = pg_probe,
	.discard_position = sl_pg_discard_position,
	.open = pg_open,
	.close = pg_close,
	.tables = pg_tables,
	.prepare = pg_prepare,
	.current_position = pg_current_position,
	.snapshot = pg_snapshot,
	.snapshot_read = pg_snapshot_read,
	.snapshot_close = pg_snapshot_close,
	.snapshot_lock = pg_snapshot_lock,
	.snapshot_read_chunked = pg_snapshot_read_chunked,
	.snapshot_read_tables = pg_snapshot_read_tables,
	.emit_watermark = pg_emit_watermark,
	.read_chunk = pg_read_chunk,
	.start = pg_start,
	.next = pg_next,
	.ack = pg_ack,
	.probe_open = pg_probe_open,
	.probe_sample = pg_probe_sample,
	.probe_close = pg_probe_close,
	.heartbeat = pg_heartbeat,
	.counters = pg_counters,
	.columns_changed = sl_pg_columns_changed,
};
