/*
 * sources/postgres/pgoutput.c: pgoutput protocol v1 decoder.
 *
 * Message layouts (PostgreSQL docs, "Logical Replication Message Formats";
 * src/backend/replication/logical/proto.c writes them):
 *   B  final_lsn u64, commit_ts i64 (PG epoch), xid u32
 *   C  flags u8, commit_lsn u64, end_lsn u64, commit_ts i64
 *   O  origin_lsn u64, name cstring
 *   R  relid u32, namespace cstring ("" = pg_catalog), relname cstring,
 *      replident u8, ncols u16, per column: flags u8 (1 = key), name cstring,
 *      type oid u32, typmod i32
 *   Y  type oid u32, namespace cstring, name cstring
 *   I  relid u32, 'N' tuple
 *   U  relid u32, optional ('K' | 'O') tuple, 'N' tuple
 *   D  relid u32, ('K' | 'O') tuple
 *   T  nrels u32, options u8, relid u32 * nrels
 *   M  flags u8 (1 = transactional), lsn u64, prefix cstring, len u32, bytes
 *   tuple: ncols u16, per column kind u8: 'n' null, 'u' unchanged TOAST,
 *          't' text (len u32 + bytes), 'b' binary (len u32 + bytes)
 * Text values become typed values with sl_pg_text_row (pg_text.h).
 * R and Y messages carry XLogData start 0/0, so they never move positions.
 */
#include "sources/postgres/pgoutput.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/buf.h"
#include "common/util.h"
#include "sources/postgres/pg_internal.h"
#include "sources/postgres/pg_text.h"

struct relentry {
	uint32_t relid;
	struct sl_table *table;
	bool ignored;            /* the caller does not follow it (sl_pgoutput_ignore) */
	uint64_t drop_below;     /* its changes committed below it are dropped (sl_pgoutput_drop_below) */
};

struct sl_pgoutput {
	sl_pgo_key_lookup lookup;
	void *payload;
	struct relentry *rels;      /* current versions, unsorted (few tables) */
	int nrels, arels;
	/* A change's old and new tuples: as read (text pointing into the
	 * message), then typed; each typed tuple has its own scratch for the
	 * bytes, uuids and decimal digits it decodes. */
	struct sl_text_value *told, *tnew;
	struct sl_value *vold, *vnew;
	struct sl_buf sold, snew;
	struct sl_pg_text_stats text_stats;
	int avals;
	bool in_tx;
	uint64_t ignored_changes;
	uint64_t final_lsn;
	int64_t commit_ts_us;
	uint32_t xid;
	uint32_t seq;
	/* pending TRUNCATE */
	uint32_t *trunc_relids;
	uint32_t ntrunc, itrunc, atrunc;
};

struct reader {
	unsigned char *p, *end;       /* writable: bytea values are decoded in place */
	char *err;
	size_t errlen;
	bool bad;
};

static void rd_fail(struct reader *r, const char *what)
{
	if (!r->bad)
		snprintf(r->err, r->errlen, "malformed pgoutput message: truncated %s", what);
	r->bad = true;
}

/* The next n bytes of r (consumed; writable, as the message is), or NULL
 * once r is bad or short. */
static unsigned char *rd_take(struct reader *r, size_t n, const char *what)
{
	unsigned char *p = r->p;

	if (r->bad || (size_t)(r->end - r->p) < n) {
		rd_fail(r, what);
		return NULL;
	}
	r->p += n;
	return p;
}

static uint8_t rd_u8(struct reader *r, const char *what)
{
	const unsigned char *p = rd_take(r, 1, what);
	return p ? *p : 0;
}

static uint16_t rd_u16(struct reader *r, const char *what)
{
	const unsigned char *p = rd_take(r, 2, what);
	return p ? sl_get_u16(p) : 0;
}

static uint32_t rd_u32(struct reader *r, const char *what)
{
	const unsigned char *p = rd_take(r, 4, what);
	return p ? sl_get_u32(p) : 0;
}

static uint64_t rd_u64(struct reader *r, const char *what)
{
	const unsigned char *p = rd_take(r, 8, what);
	return p ? sl_get_u64(p) : 0;
}

static const char *rd_str(struct reader *r, const char *what)
{
	unsigned char *nul;
	const char *s;

	if (r->bad)
		return "";
	nul = memchr(r->p, '\0', (size_t)(r->end - r->p));
	if (!nul) {
		rd_fail(r, what);
		return "";
	}
	s = (const char *)r->p;
	r->p = nul + 1;
	return s;
}

/* A PostgreSQL timestamp (microseconds since 2000-01-01) in microseconds
 * since the Unix epoch; the few at the top of the range that have none
 * (PostgreSQL's 'infinity' among them) are INT64_MAX, where adding the
 * offset overflowed (found by tests/fuzz/fuzz_pgoutput). */
static int64_t unix_us(uint64_t pg_ts)
{
	int64_t t = (int64_t)pg_ts;

	return t > INT64_MAX - SL_PG_EPOCH_OFFSET_US ? INT64_MAX : t + SL_PG_EPOCH_OFFSET_US;
}

struct sl_pgoutput *sl_pgoutput_new(sl_pgo_key_lookup lookup, void *payload)
{
	struct sl_pgoutput *d = calloc(1, sizeof *d);

	if (!d)
		return NULL;
	d->lookup = lookup;
	d->payload = payload;
	sl_buf_init(&d->sold, 0);
	sl_buf_init(&d->snew, 0);
	return d;
}

void sl_pgoutput_free(struct sl_pgoutput *d)
{
	if (!d)
		return;
	for (int i = 0; i < d->nrels; i++)
		sl_table_free(d->rels[i].table);
	free(d->rels);
	free(d->told);
	free(d->tnew);
	free(d->vold);
	free(d->vnew);
	sl_buf_free(&d->sold);
	sl_buf_free(&d->snew);
	free(d->trunc_relids);
	free(d);
}

bool sl_pgoutput_in_tx(const struct sl_pgoutput *d)
{
	return d->in_tx;
}

static struct relentry *find_rel(const struct sl_pgoutput *d, uint32_t relid)
{
	for (int i = 0; i < d->nrels; i++)
		if (d->rels[i].relid == relid)
			return &d->rels[i];
	return NULL;
}

const struct sl_table *sl_pgoutput_table(const struct sl_pgoutput *d, uint32_t relid)
{
	struct relentry *e = find_rel(d, relid);
	return e ? e->table : NULL;
}

const struct sl_pg_text_stats *sl_pgoutput_text_stats(const struct sl_pgoutput *d)
{
	return &d->text_stats;
}

static int grow_vals(struct sl_pgoutput *d, int n)
{
	struct sl_text_value *ta, *tb;
	struct sl_value *a, *b;

	if (n <= d->avals)
		return 0;
	ta = realloc(d->told, sizeof *ta * (size_t)n);
	if (!ta)
		return -1;
	d->told = ta;
	tb = realloc(d->tnew, sizeof *tb * (size_t)n);
	if (!tb)
		return -1;
	d->tnew = tb;
	a = realloc(d->vold, sizeof *a * (size_t)n);
	if (!a)
		return -1;
	d->vold = a;
	b = realloc(d->vnew, sizeof *b * (size_t)n);
	if (!b)
		return -1;
	d->vnew = b;
	d->avals = n;
	return 0;
}

static int decode_relation(struct sl_pgoutput *d, struct reader *r, struct sl_pgo_event *ev)
{
	uint32_t relid = rd_u32(r, "relation id");
	const char *ns = rd_str(r, "namespace");
	const char *name = rd_str(r, "relation name");
	uint16_t ncols;
	struct sl_table *t;
	struct relentry *e;
	char **names = NULL;
	bool *keys = NULL;
	int rc = -1;

	rd_u8(r, "replica identity");
	ncols = rd_u16(r, "column count");
	if (r->bad)
		return -1;
	t = sl_table_new(*ns ? ns : "pg_catalog", name);
	if (!t)
		goto oom;
	t->relid = relid;
	t->src = &sl_pg_desc;
	for (int i = 0; i < ncols; i++) {
		uint8_t flags = rd_u8(r, "column flags");
		const char *cname = rd_str(r, "column name");
		uint32_t oid = rd_u32(r, "column type");
		int32_t typmod = (int32_t)rd_u32(r, "column type modifier");
		int precision = 0, scale = 0;
		enum sl_type type;
		if (r->bad)
			goto out;
		type = sl_pg_type_map(oid, typmod, &precision, &scale);
		if (sl_table_add_column(t, cname, type, precision, scale, oid, typmod, NULL, flags & 1) < 0)
			goto oom;
		t->cols[i].in_identity = flags & 1;
	}
	/* The catalog's primary key beats the replica identity flags, which mark
	 * every column under REPLICA IDENTITY FULL. */
	if (d->lookup && ncols > 0) {
		names = calloc(ncols, sizeof *names);
		keys = calloc(ncols, sizeof *keys);
		if (!names || !keys)
			goto oom;
		for (int i = 0; i < ncols; i++)
			names[i] = t->cols[i].name;
		if (d->lookup(d->payload, t->ns, t->name, ncols, names, keys))
			for (int i = 0; i < ncols; i++)
				t->cols[i].is_key = keys[i];
	}
	if (sl_table_finish(t) < 0)
		goto oom;
	if (grow_vals(d, ncols) < 0)
		goto oom;

	e = find_rel(d, relid);
	ev->kind = SL_PGO_RELATION;
	if (e && sl_table_same_columns(e->table, t)) {
		/* The same columns, but the replica identity may have changed
		 * (nothing downstream reads in_identity: it is the source's). */
		for (int i = 0; i < ncols; i++)
			e->table->cols[i].in_identity = t->cols[i].in_identity;
		sl_table_free(t);
		ev->table = e->table;
		ev->schema_changed = false;
		rc = 0;
		goto out;
	}
	if (e) {
		ev->retired = e->table;
		e->table = t;
		e->ignored = false;   /* a new version: the caller decides again */
		e->drop_below = 0;
		ev->schema_changed = true;
	} else {
		if (d->nrels == d->arels) {
			int na = d->arels ? d->arels * 2 : 16;
			struct relentry *nr = realloc(d->rels, sizeof *nr * (size_t)na);
			if (!nr)
				goto oom;
			d->rels = nr;
			d->arels = na;
		}
		d->rels[d->nrels] = (struct relentry){ .relid = relid, .table = t, .ignored = false, .drop_below = 0 };
		d->nrels++;
		ev->schema_changed = false;
	}
	ev->table = t;
	t = NULL;
	rc = 0;
	goto out;
oom:
	snprintf(r->err, r->errlen, "out of memory decoding a relation message");
out:
	if (rc < 0)
		sl_table_free(t);
	free(names);
	free(keys);
	return rc;
}

/* Reads a tuple into vals (ncols entries of the relation), as text that
 * points into the message. */
static int read_tuple(struct reader *r, const struct sl_table *t, struct sl_text_value *vals)
{
	uint16_t n = rd_u16(r, "tuple column count");

	if (r->bad)
		return -1;
	if (n != t->ncols) {
		snprintf(r->err, r->errlen,
			 "tuple for table \"%s\".\"%s\" has %u columns, its relation message had %d",
			 t->ns, t->name, n, t->ncols);
		return -1;
	}
	for (int i = 0; i < n; i++) {
		uint8_t kind = rd_u8(r, "tuple column kind");
		uint32_t len;
		switch (kind) {
		case 'n':
			vals[i].kind = SL_TV_NULL;
			vals[i].p = NULL;
			vals[i].len = 0;
			break;
		case 'u':
			vals[i].kind = SL_TV_UNCHANGED;
			vals[i].p = NULL;
			vals[i].len = 0;
			break;
		case 't':
			len = rd_u32(r, "column value length");
			if (!(vals[i].p = (char *)rd_take(r, len, "column value")))
				return -1;
			vals[i].kind = SL_TV_TEXT;
			vals[i].len = len;
			break;
		case 'b':
			snprintf(r->err, r->errlen,
				 "column \"%s\" of \"%s\".\"%s\" arrived in binary format, which sluice does not request",
				 t->cols[i].name, t->ns, t->name);
			return -1;
		default:
			if (!r->bad)
				snprintf(r->err, r->errlen, "malformed pgoutput message: unknown tuple column kind 0x%02x", kind);
			return -1;
		}
	}
	return r->bad ? -1 : 0;
}

void sl_pgoutput_ignore(struct sl_pgoutput *d, uint32_t relid)
{
	struct relentry *e = find_rel(d, relid);

	if (e)
		e->ignored = true;
}

void sl_pgoutput_drop_below(struct sl_pgoutput *d, uint32_t relid, uint64_t lsn)
{
	struct relentry *e = find_rel(d, relid);

	if (e)
		e->drop_below = lsn;
}

void sl_pgoutput_set_src_columns(struct sl_pgoutput *d, uint32_t relid, char *text)
{
	struct relentry *e = find_rel(d, relid);

	if (!e) {
		free(text);
		return;
	}
	free(e->table->src_columns);
	e->table->src_columns = text;
}

struct sl_table *sl_pgoutput_table_mut(struct sl_pgoutput *d, uint32_t relid)
{
	struct relentry *e = find_rel(d, relid);

	return e ? e->table : NULL;
}

void sl_pgoutput_set_src_flags(struct sl_pgoutput *d, uint32_t relid, unsigned flags)
{
	struct relentry *e = find_rel(d, relid);

	if (e)
		e->table->src_flags |= flags;
}

uint64_t sl_pgoutput_ignored(const struct sl_pgoutput *d)
{
	return d->ignored_changes;
}

/* e, relation relid's entry (NULL if unknown), when a change of it may
 * come here; else NULL with a message in r->err. */
static struct relentry *rel_for_change(const struct sl_pgoutput *d, struct reader *r, uint32_t relid,
				       struct relentry *e)
{
	if (!e && !r->bad)
		snprintf(r->err, r->errlen, "change for relation %" PRIu32 " that no relation message described", relid);
	if (e && !d->in_tx && !r->bad) {
		snprintf(r->err, r->errlen, "change outside a transaction for \"%s\".\"%s\"", e->table->ns, e->table->name);
		return NULL;
	}
	return e;
}

/* The relation of a change message, its id read from r: 0 with *out its
 * entry; 1 with ev->kind SL_PGO_NONE when the caller ignores it
 * (sl_pgoutput_ignore: skipped unread, counted); -1 with a message in
 * r->err (unknown, or outside a transaction). */
static int change_rel(struct sl_pgoutput *d, struct reader *r, struct sl_pgo_event *ev, struct relentry **out)
{
	uint32_t relid = rd_u32(r, "relation id");
	struct relentry *e;

	if (r->bad)
		return -1;
	e = find_rel(d, relid);
	if (e && e->ignored) {
		d->ignored_changes++;
		ev->kind = SL_PGO_NONE;
		return 1;
	}
	if (!(*out = rel_for_change(d, r, relid, e)))
		return -1;
	return 0;
}

/* Ends a change message of relation e, its changes filled: SL_PGO_CHANGE,
 * or SL_PGO_NONE when the caller drops e's changes of this transaction
 * (sl_pgoutput_drop_below), which took their sequence numbers all the same. */
static int change_done(const struct sl_pgoutput *d, const struct relentry *e, struct sl_pgo_event *ev)
{
	if (d->final_lsn < e->drop_below) {
		ev->kind = SL_PGO_NONE;
		ev->nchanges = 0;
		return 0;
	}
	ev->kind = SL_PGO_CHANGE;
	return 0;
}

static void fill_change(struct sl_pgoutput *d, struct sl_change *c, const struct sl_table *t,
			enum sl_op op, const struct sl_value *vals)
{
	memset(c, 0, sizeof *c);
	c->table = t;
	c->op = op;
	c->values = vals;
	c->read_method = sl_pg_desc.read_method_cdc;
	c->csn_pos = d->final_lsn;  /* the CSN text is the writer's */
	c->seq = ++d->seq;
	c->source_ts_us = d->commit_ts_us;
	c->tx_id = d->xid;
}

static bool value_equal(const struct sl_value *a, const struct sl_value *b)
{
	if (b->kind == SL_V_UNCHANGED || a->kind == SL_V_UNCHANGED)
		return true; /* an unchanged TOAST value did not change */
	return sl_value_equal(a, b);
}

/* Reads a tuple of t and converts it into typed values (see struct
 * sl_pgoutput: text, typed values, scratch).  Returns 0, -1 with err set
 * (malformed), or SL_PGO_EVALUE with err naming the table, the transaction's
 * commit LSN, the column and the value (it does not convert). */
static int read_typed_tuple(struct sl_pgoutput *d, struct reader *r, const struct sl_table *t,
			    struct sl_text_value *text, struct sl_value *vals, struct sl_buf *scratch)
{
	char msg[SL_ERRLEN], lsn[18];

	if (read_tuple(r, t, text) < 0)
		return -1;
	if (sl_pg_text_row(t, text, vals, scratch, &d->text_stats, msg, sizeof msg) == 0)
		return 0;
	sl_lsn_format(d->final_lsn, lsn);
	snprintf(r->err, r->errlen, "table \"%s\".\"%s\", transaction committed at LSN %s: %s",
		 t->ns, t->name, lsn, msg);
	return SL_PGO_EVALUE;
}

/* An insert ('I': a new row) or delete message ('D': the old row or its
 * key), after its type byte. */
static int decode_row(struct sl_pgoutput *d, struct reader *r, struct sl_pgo_event *ev, bool insert)
{
	struct relentry *e;
	struct sl_value *vals = insert ? d->vnew : d->vold;
	uint8_t k;
	int rc = change_rel(d, r, ev, &e);

	if (rc != 0)
		return rc < 0 ? -1 : 0;
	k = rd_u8(r, "tuple marker");
	if (insert ? k != 'N' : k != 'K' && k != 'O') {
		if (!r->bad)
			snprintf(r->err, r->errlen, "malformed pgoutput %s: expected %s", insert ? "insert" : "delete",
				 insert ? "'N'" : "'K' or 'O'");
		return -1;
	}
	if ((rc = read_typed_tuple(d, r, e->table, insert ? d->tnew : d->told, vals, insert ? &d->snew : &d->sold)) < 0)
		return rc;
	fill_change(d, &ev->changes[ev->nchanges++], e->table, insert ? SL_OP_INSERT : SL_OP_DELETE, vals);
	return change_done(d, e, ev);
}

/* An update message ('U'), after its type byte. */
static int decode_update(struct sl_pgoutput *d, struct reader *r, struct sl_pgo_event *ev)
{
	const struct sl_table *t;
	struct relentry *e;
	uint8_t k;
	int rc = change_rel(d, r, ev, &e);
	bool have_old = false, old_full = false, key_changed = false;

	if (rc != 0)
		return rc < 0 ? -1 : 0;
	t = e->table;
	k = rd_u8(r, "tuple marker");
	if (k == 'K' || k == 'O') {
		if ((rc = read_typed_tuple(d, r, t, d->told, d->vold, &d->sold)) < 0)
			return rc;
		have_old = true;
		old_full = k == 'O';
		k = rd_u8(r, "tuple marker");
	}
	if (k != 'N') {
		if (!r->bad)
			snprintf(r->err, r->errlen, "malformed pgoutput update: expected 'N'");
		return -1;
	}
	if ((rc = read_typed_tuple(d, r, t, d->tnew, d->vnew, &d->snew)) < 0)
		return rc;
	if (have_old) {
		for (int i = 0; i < t->ncols; i++) {
			/* Fill unchanged TOAST values from a full old row when we
			 * have one; the copy points into the old tuple's scratch
			 * or the message, both valid until the next call. */
			if (d->vnew[i].kind == SL_V_UNCHANGED && d->vold[i].kind != SL_V_UNCHANGED &&
			    d->vold[i].kind != SL_V_NULL)
				d->vnew[i] = d->vold[i];
			/* An old key ('K') holds the replica identity's columns
			 * only, the others null: a key column outside it
			 * (key_columns) is compared only in a full old row. */
			if (t->cols[i].is_key && (old_full || d->vold[i].kind != SL_V_NULL) &&
			    !value_equal(&d->vold[i], &d->vnew[i]))
				key_changed = true;
		}
	}
	/* A table without a key is identified by its whole row
	 * (REPLICA IDENTITY FULL): the old row goes out too, so an
	 * append-only reader can tell which of identical rows changed. */
	if (have_old && !sl_table_has_key(t))
		key_changed = true;
	if (key_changed)
		fill_change(d, &ev->changes[ev->nchanges++], t, SL_OP_UPDATE_DELETE, d->vold);
	fill_change(d, &ev->changes[ev->nchanges++], t, SL_OP_UPDATE_INSERT, d->vnew);
	return change_done(d, e, ev);
}

/* A truncate message ('T'), after its type byte. */
static int decode_truncate(struct sl_pgoutput *d, struct reader *r, struct sl_pgo_event *ev)
{
	uint32_t n = rd_u32(r, "truncate relation count");

	rd_u8(r, "truncate options");
	if (r->bad)
		return -1;
	if (n > (uint32_t)((r->end - r->p) / 4)) {
		rd_fail(r, "truncate relation list");
		return -1;
	}
	if (n > d->atrunc) {
		uint32_t *nr = realloc(d->trunc_relids, sizeof *nr * n);
		if (!nr) {
			snprintf(r->err, r->errlen, "out of memory decoding a truncate message");
			return -1;
		}
		d->trunc_relids = nr;
		d->atrunc = n;
	}
	for (uint32_t i = 0; i < n; i++) {
		d->trunc_relids[i] = rd_u32(r, "truncate relation id");
		if (!rel_for_change(d, r, d->trunc_relids[i], find_rel(d, d->trunc_relids[i])))
			return -1;
	}
	d->ntrunc = n;
	d->itrunc = 0;
	ev->kind = SL_PGO_CHANGE;
	ev->nchanges = 0;
	return 0;
}

int sl_pgoutput_decode(struct sl_pgoutput *d, unsigned char *msg, size_t len,
		       struct sl_pgo_event *ev, char *err, size_t errlen)
{
	struct reader r = { msg, msg + len, err, errlen, false };
	uint8_t type;

	memset(ev, 0, offsetof(struct sl_pgo_event, changes));
	ev->nchanges = 0;
	type = rd_u8(&r, "message type");
	if (r.bad)
		return -1;
	switch (type) {
	case 'B':
		d->final_lsn = rd_u64(&r, "begin final LSN");
		d->commit_ts_us = unix_us(rd_u64(&r, "begin timestamp"));
		d->xid = rd_u32(&r, "begin xid");
		if (r.bad)
			return -1;
		d->in_tx = true;
		d->seq = 0;
		ev->kind = SL_PGO_BEGIN;
		ev->final_lsn = d->final_lsn;
		ev->commit_ts_us = d->commit_ts_us;
		ev->xid = d->xid;
		return 0;
	case 'C':
		rd_u8(&r, "commit flags");
		ev->commit_lsn = rd_u64(&r, "commit LSN");
		ev->end_lsn = rd_u64(&r, "commit end LSN");
		ev->commit_ts_us = unix_us(rd_u64(&r, "commit timestamp"));
		if (r.bad)
			return -1;
		d->in_tx = false;
		ev->kind = SL_PGO_COMMIT;
		ev->final_lsn = d->final_lsn;
		ev->xid = d->xid;
		return 0;
	case 'O':
		rd_u64(&r, "origin LSN");
		rd_str(&r, "origin name");
		ev->kind = SL_PGO_NONE;
		return r.bad ? -1 : 0;
	case 'Y':
		rd_u32(&r, "type oid");
		rd_str(&r, "type namespace");
		rd_str(&r, "type name");
		ev->kind = SL_PGO_NONE;
		return r.bad ? -1 : 0;
	case 'R':
		ev->final_lsn = d->final_lsn;
		return decode_relation(d, &r, ev);
	case 'I':
		return decode_row(d, &r, ev, true);
	case 'U':
		return decode_update(d, &r, ev);
	case 'D':
		return decode_row(d, &r, ev, false);
	case 'T':
		return decode_truncate(d, &r, ev);
	case 'M': {
		uint8_t flags = rd_u8(&r, "message flags");
		uint32_t clen;
		ev->message_lsn = rd_u64(&r, "message LSN");
		ev->prefix = rd_str(&r, "message prefix");
		clen = rd_u32(&r, "message length");
		if (!(ev->content = (const char *)rd_take(&r, clen, "message content")))
			return -1;
		ev->content_len = clen;
		ev->transactional = flags & 1;
		ev->kind = SL_PGO_MESSAGE;
		return 0;
	}
	default:
		snprintf(err, errlen, "unsupported pgoutput message type '%c' (0x%02x)",
			 type >= 32 && type < 127 ? type : '?', type);
		return -1;
	}
}

int sl_pgoutput_truncate_next(struct sl_pgoutput *d, struct sl_change *out)
{
	struct relentry *e;

	while (d->itrunc < d->ntrunc) {
		e = find_rel(d, d->trunc_relids[d->itrunc++]);
		if (!e || e->ignored)
			continue;
		fill_change(d, out, e->table, SL_OP_TRUNCATE, NULL);
		if (d->final_lsn < e->drop_below)
			continue;   /* dropped, its sequence number taken */
		return 1;
	}
	d->ntrunc = d->itrunc = 0;
	return 0;
}
