/*
 * sinks/clickhouse/ch_sink.c: the clickhouse sink (see clickhouse.h and
 * doc/clickhouse.md).
 *
 * State: one struct chtab per table seen, found through a small hash table,
 * holding the layout of its current table version and its part of the
 * batch.  In append mode that part is RowBinary rows, encoded as they come
 * (and metadata-only rows for TRUNCATE records).  In merge mode it is the
 * latest change of each key (struct held), in the order the keys were first
 * seen, plus the latest TRUNCATE.  A change whose values are all known is
 * kept as its RowBinary row, encoded as it comes; one that waits for
 * unchanged TOAST values from ClickHouse keeps its values and metadata,
 * copied, and is encoded at send time, once they were filled in.  Tables
 * with something to send are on a list.  Memory is bounded by batch_bytes
 * (the agent flushes once it is reached, and write() sends the batch itself
 * inside a transaction that grows beyond it) and by the number of tables.
 *
 * Unchanged TOAST values (merge mode): an UPDATE that leaves a large value
 * out (SL_V_UNCHANGED) takes it from the key's row held in the batch; after
 * a key change, from the row the UPDATE-DELETE just before it removed;
 * otherwise it is marked to be filled from ClickHouse: at send time one
 * lookup per table and up to LOOKUP_KEYS keys (SELECT ... FINAL, keys sent
 * as an external table) reads the current rows, before the batch's own rows
 * are inserted.  A value no row can fill is written as NULL and listed in
 * _unchanged_columns, with a warning.  A replay (after a crash, of changes
 * ClickHouse has) may find the key the values were first read from deleted
 * by a key change: so a row that waits keeps every key its values passed
 * through, each with the _version range in which that key's row holds them
 * (struct fsrc), and takes them from any of those rows ClickHouse has.
 */
#include "sinks/clickhouse/clickhouse.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "common/buf.h"
#include "common/keyslots.h"
#include "common/log.h"
#include "common/strmap.h"
#include "common/util.h"
#include "sinks/clickhouse/ch_conf.h"
#include "sinks/clickhouse/ch_deadletter.h"
#include "sinks/clickhouse/ch_http.h"
#include "sinks/clickhouse/ch_layout.h"
#include "sinks/clickhouse/ch_rowbin.h"
#include "sinks/clickhouse/ch_sql.h"

#define LOOKUP_KEYS 1000            /* keys per lookup request (halved while their rows overflow a response) */
#define LOOKUP_KEEP_BYTES (16u << 20) /* a response buffer larger than this is freed after a lookup */
#define DEAD_LETTERS_MAX 1000       /* rows refused in one flush before the flush fails */
#define MUTATION_WAIT_MS 30000      /* how long discard_backfill waits for its DELETE */

/* ------------------------------------------------------------------ */
/* rows                                                                 */

/* Rows in RowBinary with the offset of each. */
struct rowbuf {
	struct sl_buf b;
	size_t *off;
	size_t n, alloc;
};

static void rowbuf_init(struct rowbuf *r)
{
	memset(r, 0, sizeof *r);
	sl_buf_init(&r->b, 0);
}

static void rowbuf_reset(struct rowbuf *r)
{
	sl_buf_reset(&r->b);
	r->n = 0;
}

static void rowbuf_free(struct rowbuf *r)
{
	sl_buf_free(&r->b);
	free(r->off);
	memset(r, 0, sizeof *r);
}

/* Notes that a row starts at the buffer's current end.  0 or -1. */
static int rowbuf_mark(struct rowbuf *r)
{
	if (r->n == r->alloc) {
		size_t na = r->alloc ? r->alloc * 2 : 256;
		size_t *no = realloc(r->off, na * sizeof *no);
		if (!no)
			return -1;
		r->off = no;
		r->alloc = na;
	}
	r->off[r->n++] = r->b.len;
	return 0;
}

static size_t rowbuf_end(const struct rowbuf *r, size_t i)
{
	return i + 1 < r->n ? r->off[i + 1] : r->b.len;
}

/* A change kept in merge mode, in one allocation, in one of two forms:
 *  - encoded (row set): its row in RowBinary, ready to send;
 *  - pending (m set): its metadata and values, copied, for a change that
 *    waits for unchanged values from ClickHouse (fill: the key whose row
 *    has them); also the batch's TRUNCATE, and a lookup's keys and rows.
 * The encoded form takes about half the memory, so a batch of batch_bytes
 * holds about twice the rows, and the row is encoded once. */
struct held {
	size_t size;                   /* bytes of the allocation */
	unsigned char *key;            /* RowBinary of the key columns */
	unsigned char *row;            /* encoded: the row, rowlen bytes; else NULL */
	struct ch_rowmeta *m;          /* pending: the metadata (pointers into the allocation); else NULL */
	struct sl_value *vals;         /* pending: the layout's nsrc values, or NULL for none */
	unsigned char *fill;           /* pending: where SL_V_UNCHANGED values are (struct fsrc entries), or NULL */
	uint32_t keylen, rowlen, filllen;
	bool deleted;                  /* DELETE, UPDATE-DELETE */
};

static size_t align8(size_t n)
{
	return (n + 7) & ~(size_t)7;
}

static bool op_deletes(enum sl_op op)
{
	return op == SL_OP_DELETE || op == SL_OP_UPDATE_DELETE;
}

/* Where a pending row's unchanged values are: a list of entries, each
 * [u64 lo][u64 hi][u32 keylen][key bytes], unaligned: the live row of that
 * key in ClickHouse has them when its _version is in [lo, hi).  In the
 * order the values moved: the key they were first read from; after a key
 * change, each key they passed through, until its UPDATE-DELETE; the row's
 * own key last, from its UPDATE-INSERT on.  The ranges keep out the rows
 * that are not this chain's: a key inserted again after its row moved away,
 * or an older row of the key moved into. */
#define FSRC_HEAD 20
#define FSRC_ANY UINT64_MAX

struct fsrc {
	uint64_t lo, hi;
	const unsigned char *key;
	uint32_t keylen;
};

/* Reads the entry at p (before end) into e: its size, or 0 at the end. */
static size_t fsrc_get(const unsigned char *p, const unsigned char *end, struct fsrc *e)
{
	if (p >= end || (size_t)(end - p) < FSRC_HEAD)
		return 0;
	memcpy(&e->lo, p, 8);
	memcpy(&e->hi, p + 8, 8);
	memcpy(&e->keylen, p + 16, 4);
	if ((size_t)(end - p) - FSRC_HEAD < e->keylen)
		return 0;
	e->key = p + FSRC_HEAD;
	return FSRC_HEAD + e->keylen;
}

/* Appends an entry to b. */
static void fsrc_put(struct sl_buf *b, uint64_t lo, uint64_t hi, const void *key, size_t keylen)
{
	uint32_t len = (uint32_t)keylen;

	sl_buf_append(b, &lo, 8);
	sl_buf_append(b, &hi, 8);
	sl_buf_append(b, &len, 4);
	sl_buf_append(b, key, keylen);
}

/* The next entry of h's sources into e, from offset *at (0 first): false
 * at the end. */
static bool fsrc_next(const struct held *h, size_t *at, struct fsrc *e)
{
	size_t n;

	if (!h->fill || (n = fsrc_get(h->fill + *at, h->fill + h->filllen, e)) == 0)
		return false;
	*at += n;
	return true;
}

/* A row in the pending form: metadata m, nsrc values (NULL: none), key and
 * the sources of its unchanged values (fill, struct fsrc entries), copied.
 * NULL when out of memory. */
static struct held *held_make(const struct ch_rowmeta *m, const struct sl_value *vals, int nsrc,
			      const void *key, size_t keylen, const void *fill, size_t filllen)
{
	size_t size = align8(sizeof(struct held)) + align8(sizeof(struct ch_rowmeta)) +
		      (size_t)nsrc * sizeof(struct sl_value) + 16 + SL_CSN_LEN + 1 + keylen + filllen;
	struct held *h;
	char *p;

	for (int i = 0; vals && i < nsrc; i++)
		if (sl_value_has_bytes(&vals[i]))
			size += vals[i].len;
	for (int i = 0; i < m->nmeta; i++)
		if (m->meta[i].s)
			size += m->meta[i].len;
	h = malloc(size);
	if (!h)
		return NULL;
	memset(h, 0, sizeof *h);
	h->size = size;
	h->m = (struct ch_rowmeta *)((char *)h + align8(sizeof(struct held)));
	*h->m = *m;
	h->vals = vals ? (struct sl_value *)((char *)h->m + align8(sizeof(struct ch_rowmeta))) : NULL;
	p = (char *)h->m + align8(sizeof(struct ch_rowmeta)) + (size_t)nsrc * sizeof(struct sl_value);
	for (int i = 0; vals && i < nsrc; i++) {
		h->vals[i] = vals[i];
		if (sl_value_has_bytes(&vals[i])) {
			if (vals[i].len)
				memcpy(p, vals[i].p, vals[i].len);
			h->vals[i].p = p;
			p += vals[i].len;
		}
	}
	memcpy(p, m->uuid, 16);
	h->m->uuid = (unsigned char *)p;
	p += 16;
	memcpy(p, m->csn, SL_CSN_LEN);
	p[SL_CSN_LEN] = '\0';
	h->m->csn = p;
	p += SL_CSN_LEN + 1;
	for (int i = 0; i < m->nmeta; i++) {
		if (!m->meta[i].s)
			continue;
		memcpy(p, m->meta[i].s, m->meta[i].len);
		h->m->meta[i].s = p;
		p += m->meta[i].len;
	}
	h->key = (unsigned char *)p;
	h->keylen = (uint32_t)keylen;
	if (keylen)
		memcpy(p, key, keylen);
	p += keylen;
	if (fill) {
		h->fill = (unsigned char *)p;
		h->filllen = (uint32_t)filllen;
		memcpy(p, fill, filllen);
	}
	h->deleted = op_deletes(m->op);
	return h;
}

/* A row in the encoded form: key and row, copied.  NULL when out of memory. */
static struct held *held_encoded(const void *key, size_t keylen, const void *row, size_t rowlen, bool deleted)
{
	size_t size = align8(sizeof(struct held)) + keylen + rowlen;
	struct held *h = malloc(size);

	if (!h)
		return NULL;
	memset(h, 0, sizeof *h);
	h->size = size;
	h->key = (unsigned char *)h + align8(sizeof(struct held));
	h->keylen = (uint32_t)keylen;
	memcpy(h->key, key, keylen);
	h->row = h->key + keylen;
	h->rowlen = (uint32_t)rowlen;
	memcpy(h->row, row, rowlen);
	h->deleted = deleted;
	return h;
}

/* A copy of h (nsrc: the layout's values).  NULL when out of memory. */
static struct held *held_dup(const struct held *h, int nsrc)
{
	struct held *c = h->row ? held_encoded(h->key, h->keylen, h->row, h->rowlen, h->deleted)
				: held_make(h->m, h->vals, h->vals ? nsrc : 0, h->key, h->keylen, h->fill, h->filllen);

	if (c)
		c->deleted = h->deleted;
	return c;
}

/* Rows by key: the rows in first-seen order, and their index. */
struct keymap {
	struct held **rows;
	size_t n, alloc;
	struct sl_keyslots index;
};

static const void *held_key(const void *arr, size_t i, size_t *len)
{
	const struct held *h = ((struct held *const *)arr)[i];

	*len = h->keylen;
	return h->key;
}

static void keymap_clear(struct keymap *k)
{
	for (size_t i = 0; i < k->n; i++)
		free(k->rows[i]);
	k->n = 0;
	sl_keyslots_clear(&k->index);
}

static void keymap_free(struct keymap *k)
{
	keymap_clear(k);
	free(k->rows);
	sl_keyslots_free(&k->index);
	memset(k, 0, sizeof *k);
}

/* The index of key's row, or -1. */
static ssize_t keymap_find(const struct keymap *k, const void *key, size_t len)
{
	return sl_keyslots_find(&k->index, key, len, held_key, k->rows);
}

/* Adds h, a key not in the map yet.  0 or -1 (h is then not taken). */
static int keymap_add(struct keymap *k, struct held *h)
{
	if (k->index.min == 0)
		k->index.min = 1024;
	if (sl_keyslots_reserve(&k->index, k->n) < 0)
		return -1;
	if (k->n == k->alloc) {
		size_t na = k->alloc ? k->alloc * 2 : 256;
		struct held **nr = realloc(k->rows, na * sizeof *nr);
		if (!nr)
			return -1;
		k->rows = nr;
		k->alloc = na;
	}
	k->rows[k->n] = h;
	sl_keyslots_put(&k->index, h->key, h->keylen, k->n);
	k->n++;
	return 0;
}

/* A table's rows of one batch. */
struct part {
	struct rowbuf rows;            /* append mode: whole rows */
	struct rowbuf mrows;           /* append mode: metadata-only rows: TRUNCATE records */
	struct keymap keys;            /* merge mode: the latest change of each key */
	struct held *trunc;            /* merge mode: the batch's latest TRUNCATE, or NULL */
	struct sl_buf vsteps;          /* merge mode: version map steps to record first (struct ch_vstep) */
};

static void part_init(struct part *p)
{
	memset(p, 0, sizeof *p);
	rowbuf_init(&p->rows);
	rowbuf_init(&p->mrows);
	sl_buf_init(&p->vsteps, 0);
}

static void part_clear(struct part *p)
{
	rowbuf_reset(&p->rows);
	rowbuf_reset(&p->mrows);
	keymap_clear(&p->keys);
	free(p->trunc);
	p->trunc = NULL;
	sl_buf_reset(&p->vsteps);
}

static void part_free(struct part *p)
{
	rowbuf_free(&p->rows);
	rowbuf_free(&p->mrows);
	keymap_free(&p->keys);
	free(p->trunc);
	p->trunc = NULL;
	sl_buf_free(&p->vsteps);
}

/* ------------------------------------------------------------------ */
/* state                                                                */

struct chtab {
	struct sl_strmap_node node;    /* first: a node of the sink's map is a chtab; node.key is object */
	char *object;
	char *local;                   /* the table of its rows on each server: object, or with
				        * distributed object_local (object is the Distributed table) */
	struct ch_layout *lay;         /* the current table version's, NULL until its first write */
	bool exists;                   /* ClickHouse has the table (false: only markers came, for none) */
	char **keynames;               /* the table's sorting-key columns in ClickHouse (merge: the key) */
	int nkeynames;
	struct part cur;               /* its rows of the batch being written */
	struct part fly;               /* its rows of the batch in flight (flush_start) */
	struct chtab *fnext;           /* tables of the batch in flight */
	uint64_t floor;                /* the version of the latest TRUNCATE written: older changes are gone */
	struct ch_vmap vmap;           /* merge mode: its version map (ch_layout.h) */
	bool vmap_read;                /* the map's steps were read from ClickHouse */
	bool vlisted;                  /* on the sink's vlong list */
	struct chtab *vnext;
	/* bookkeeping */
	uint64_t pend_rows, pend_bytes;
	bool on_list;
	struct chtab *pnext;           /* tables with something to send */
};

struct chsink {
	const struct sl_ch_conf *conf;
	struct ch_ddl ddl;             /* the cluster of conf, for the DDL (strings borrowed from conf) */
	const char *ins_params;        /* URL parameters of a row insert (NULL: none) */
	const char *sql_ins_params;    /* of a statement that inserts (INSERT ... SELECT) */
	char *stream;
	char *config_path;             /* absolute when it could be resolved; NULL: not known */
	char *dl_path;
	bool merge;
	struct ch_http *http;
	struct ch_resp resp;
	struct sl_buf sql, sql2, key, key2, lkeys;
	struct sl_buf row;             /* merge mode: the row write() encodes */
	struct sl_value *srcvals;      /* merge mode: values read back from an encoded row (held_values) */
	char *scratch;                 /* their decimals' text, CH_RB_SCRATCH a column */
	int srcvals_cols;              /* columns srcvals and scratch have room for */
	struct sl_value *wvals;        /* merge mode: a change's values as write() keeps them */
	int wvals_n;
	struct rowbuf enc;             /* merge mode: rows encoded at send time */
	struct sl_strmap tabs;         /* chtabs by object */
	struct chtab *last;
	struct chtab *pending;         /* tables with something to send */
	uint64_t pend_rows, pend_bytes;
	uint64_t spill_rows, spill_bytes;  /* a transaction this large is sent from write() */
	int64_t first_ms;              /* when the batch's oldest row was written; 0: empty */
	bool db_ready;
	struct chtab *vlong;           /* tables whose position being written needs a step (ch_mark) */
	bool mark_oom;                 /* mark() ran out of memory: the next flush fails */
	bool columns_ready;            /* the record of column types exists */
	bool kill_after_create;        /* test hook SLUICE_FAULT_CH_KILL_AFTER_CREATE */
	bool has_mark;
	struct sl_position mark;
	/* The UPDATE-DELETE just written, for the UPDATE-INSERT of a key change. */
	struct {
		bool set;
		struct chtab *tab;
		uint64_t pos;
		uint32_t seq;
		uint64_t version;          /* its _version */
		struct held *row;          /* the old key's row in the batch before it, or NULL */
		struct sl_buf key;         /* the old key */
	} moved;
	struct sl_buf fsrc;            /* write_merge(): the sources of a pending row's values */
	struct sl_buf dl;              /* dead-letter lines not yet in the file */
	uint64_t dl_in_flush;
	uint64_t missing_logged;
	char metabuf[SL_META_BUF];
	struct sl_ch_stats stats;
	_Atomic uint64_t w_filled;     /* stats.unchanged_filled counted by write() (the sender counts its own) */
	_Atomic uint64_t w_dead;       /* stats.dead_letters counted by write() (key_dead_letter) */
	_Atomic uint64_t w_clamps;     /* stats.date_clamps, counted by either thread */
	enum ch_flavor flavor;         /* the layout of tables this sink makes (set with db_ready) */
	/* The batch in flight (flush_start() to flush_wait()): the sender
	 * thread owns it and, while it runs, the connection, the statement,
	 * response and lookup buffers, the dead letters and the stats it
	 * counts; write() goes on into each table's cur.  The writer waits for
	 * it (wait_flight()) before it uses any of those itself. */
	struct {
		pthread_t thread;
		bool started;
		pthread_mutex_t mu;
		pthread_cond_t cv;
		enum { FLY_IDLE, FLY_RUNNING, FLY_DONE } state;
		bool stop;
		int rc;
		char err[SL_ERRLEN * 2];
		struct chtab *tabs;        /* by fnext */
		bool has_mark;
		struct sl_position mark;
	} fly;
};

/* ------------------------------------------------------------------ */
/* tables                                                               */

static struct chtab *tab_find(const struct chsink *s, const char *object)
{
	return (struct chtab *)sl_strmap_find(&s->tabs, object);
}

static struct chtab *tab_get(struct chsink *s, const char *object)
{
	struct chtab *t;

	if (s->last && !strcmp(s->last->object, object))
		return s->last;
	if ((t = tab_find(s, object)) != NULL)
		return s->last = t;
	t = calloc(1, sizeof *t);
	if (!t || !(t->object = strdup(object)) || !(t->local = ch_local_name(&s->ddl, object)))
		goto fail;
	t->node.key = t->object;
	if (sl_strmap_add(&s->tabs, &t->node) < 0)
		goto fail;
	part_init(&t->cur);
	part_init(&t->fly);
	return s->last = t;
fail:
	if (t) {
		free(t->object);
		free(t->local);
	}
	free(t);
	return NULL;
}

static void free_keynames(struct chtab *t)
{
	for (int i = 0; i < t->nkeynames; i++)
		free(t->keynames[i]);
	free(t->keynames);
	t->keynames = NULL;
	t->nkeynames = 0;
}

static void tab_free(struct chtab *t)
{
	ch_layout_free(t->lay);
	ch_vmap_free(&t->vmap);
	free_keynames(t);
	part_free(&t->cur);
	part_free(&t->fly);
	free(t->object);
	free(t->local);
	free(t);
}

/* Accounts for rows and bytes added to (or, negative, taken from) t's batch. */
static void account(struct chsink *s, struct chtab *t, int64_t rows, int64_t bytes)
{
	t->pend_rows = (uint64_t)((int64_t)t->pend_rows + rows);
	t->pend_bytes = (uint64_t)((int64_t)t->pend_bytes + bytes);
	s->pend_rows = (uint64_t)((int64_t)s->pend_rows + rows);
	s->pend_bytes = (uint64_t)((int64_t)s->pend_bytes + bytes);
	if (!t->on_list && t->pend_rows > 0) {
		t->on_list = true;
		t->pnext = s->pending;
		s->pending = t;
	}
	if (s->pend_rows > 0 && !s->first_ms)
		s->first_ms = sl_mono_ms();
}

static void moved_clear(struct chsink *s)
{
	free(s->moved.row);
	s->moved.row = NULL;
	s->moved.set = false;
	s->moved.tab = NULL;
}

/* ------------------------------------------------------------------ */
/* requests                                                             */

/* Runs the statement in s->sql (with retries) with URL parameters params
 * (may be NULL); its result is in s->resp.  Returns 0, or -1 or SL_EPREREQ
 * (ch_http_run()) with a message in err (a refusal as data is a failure
 * here: statements carry no rows). */
static int run_sql_params(struct chsink *s, const char *params, const char *what, char *err, size_t errlen)
{
	struct ch_req rq = { .params = params };
	int rc;

	if (sl_buf_failed(&s->sql)) {
		snprintf(err, errlen, "clickhouse: out of memory building a statement");
		return -1;
	}
	rq.body = s->sql.data;
	rq.len = s->sql.len;
	rc = ch_http_run(s->http, &rq, &s->resp, what, err, errlen);
	return rc == CH_RUN_DATA ? -1 : rc;
}

static int run_sql(struct chsink *s, const char *what, char *err, size_t errlen)
{
	return run_sql_params(s, CH_PARAMS_READ, what, err, errlen);
}

/* Encodes one row of t (ch_layout_put_row) and counts the dates it clamped
 * (the first one logged).  Returns 0, or -1 with a message in err. */
static int put_row(struct chsink *s, struct sl_buf *b, const struct ch_layout *l, const struct ch_rowmeta *m,
		   const struct sl_value *vals, bool meta_only, char *err, size_t errlen)
{
	int rc = ch_layout_put_row(b, l, m, vals, meta_only, err, errlen);

	if (rc > 0 && atomic_fetch_add_explicit(&s->w_clamps, (uint64_t)rc, memory_order_relaxed) == 0)
		sl_warn("clickhouse: table \"%s\": a date outside Date32's range (1900-01-01 to 2299-12-31) was "
			"clamped to its nearer end (counted in sluice_date_clamps_total)", l->object);
	return rc < 0 ? -1 : 0;
}

/* The destination's columns of a table (describe result in s->resp). */
static int parse_describe(struct chsink *s, struct ch_dest_col **out, int *n, char *err, size_t errlen)
{
	struct ch_rb_reader r = { (const unsigned char *)s->resp.body.data,
				  (const unsigned char *)s->resp.body.data + s->resp.body.len };
	struct ch_dest_col *cols = NULL;
	int count = 0, alloc = 0;

	*out = NULL;
	*n = 0;
	while (r.p < r.end) {
		const unsigned char *name, *type;
		size_t nn, nt;
		unsigned key;
		if (ch_rb_get_str(&r, &name, &nn) < 0 || ch_rb_get_str(&r, &type, &nt) < 0 ||
		    ch_rb_get_u8(&r, &key) < 0)
			goto bad;
		if (count == alloc) {
			int na = alloc ? alloc * 2 : 32;
			struct ch_dest_col *nc = realloc(cols, (size_t)na * sizeof *nc);
			if (!nc)
				goto oom;
			cols = nc;
			alloc = na;
		}
		cols[count].name = strndup((const char *)name, nn);
		cols[count].type = strndup((const char *)type, nt);
		cols[count].in_sorting_key = key != 0;
		count++;
		if (!cols[count - 1].name || !cols[count - 1].type)
			goto oom;
	}
	*out = cols;
	*n = count;
	return 0;
bad:
	snprintf(err, errlen, "clickhouse: could not read the column list ClickHouse sent");
	goto fail;
oom:
	snprintf(err, errlen, "clickhouse: out of memory");
fail:
	for (int i = 0; i < count; i++) {
		free(cols[i].name);
		free(cols[i].type);
	}
	free(cols);
	return -1;
}

static void free_dest(struct ch_dest_col *cols, int n)
{
	for (int i = 0; i < n; i++) {
		free(cols[i].name);
		free(cols[i].type);
	}
	free(cols);
}

static int describe(struct chsink *s, const char *object, struct ch_dest_col **cols, int *n, char *err,
		    size_t errlen)
{
	int rc;

	sl_buf_reset(&s->sql);
	ch_sql_describe(&s->sql, s->conf->database, object);
	if ((rc = run_sql(s, "reading a table's columns", err, errlen)) < 0)
		return rc;
	return parse_describe(s, cols, n, err, errlen);
}

/* Whether name (n bytes) is object with suffix. */
static bool named(const unsigned char *name, size_t n, const char *object, const char *suffix)
{
	size_t k = strlen(object), m = strlen(suffix);

	return n == k + m && memcmp(name, object, k) == 0 && memcmp(name + k, suffix, m) == 0;
}

/* Checks the engines of the table, of its view, and with distributed of its
 * Distributed table, when they exist: *table_exists (the table of t->local)
 * and *view_exists tell.  A name taken by something sluice did not make is
 * an error. */
static int check_engines(struct chsink *s, const struct chtab *t, bool *table_exists, bool *view_exists,
			 char *err, size_t errlen)
{
	const char *object = t->object;
	struct ch_rb_reader r;
	int rc;

	*table_exists = *view_exists = false;
	sl_buf_reset(&s->sql);
	ch_sql_engines(&s->sql, &s->ddl, s->conf->database, object);
	if ((rc = run_sql(s, "reading table engines", err, errlen)) < 0)
		return rc;
	r.p = (const unsigned char *)s->resp.body.data;
	r.end = r.p + s->resp.body.len;
	while (r.p < r.end) {
		static const char want[] = "ReplacingMergeTree";
		const unsigned char *name, *engine;
		size_t nn, ne, k = sizeof want - 1;
		if (ch_rb_get_str(&r, &name, &nn) < 0 || ch_rb_get_str(&r, &engine, &ne) < 0) {
			snprintf(err, errlen, "clickhouse: could not read the table list ClickHouse sent");
			return -1;
		}
		if (named(name, nn, object, CH_VIEW_SUFFIX)) {
			if (ne != 4 || memcmp(engine, "View", 4) != 0) {
				snprintf(err, errlen, "clickhouse: the view of table \"%s\" would be \"%s%s\", but "
					 "database \"%s\" has a table of that name (engine %.*s): rename it, or "
					 "write this stream to another database", object, object, CH_VIEW_SUFFIX,
					 s->conf->database, (int)ne, (const char *)engine);
				return -1;
			}
			*view_exists = true;
		} else if (s->ddl.distributed && named(name, nn, object, "")) {
			if (ne != 11 || memcmp(engine, "Distributed", 11) != 0) {
				snprintf(err, errlen, "clickhouse: table \"%s\" exists in database \"%s\" with engine "
					 "%.*s, where distributed = true makes a Distributed table over \"%s\": write "
					 "this stream to another database (a table made without distributed keeps "
					 "its layout)", object, s->conf->database, (int)ne, (const char *)engine,
					 t->local);
				return -1;
			}
		} else {
			if (ne < k || memcmp(engine + ne - k, want, k) != 0) {
				snprintf(err, errlen, "clickhouse: table \"%s\" exists in database \"%s\" with engine "
					 "%.*s, so sluice did not make it (its tables are ReplacingMergeTree): "
					 "write this stream to another database", t->local, s->conf->database,
					 (int)ne, (const char *)engine);
				return -1;
			}
			*table_exists = true;
		}
	}
	return 0;
}

/* The layout of the tables this sink makes: the key's, or with layout =
 * auto the server's version's (ch_flavor_of_version). */
static int choose_flavor(struct chsink *s, char *err, size_t errlen)
{
	const char *v;
	int rc;

	if (s->conf->layout != SL_CH_LAYOUT_AUTO) {
		s->flavor = s->conf->layout == SL_CH_LAYOUT_MODERN ? CH_MODERN : CH_LEGACY;
		return 0;
	}
	sl_buf_reset(&s->sql);
	ch_sql_version(&s->sql);
	if ((rc = run_sql(s, "reading the server's version", err, errlen)) < 0)
		return rc;
	v = s->resp.body.data ? s->resp.body.data : "";
	if (ch_flavor_of_version(v, s->resp.body.len, &s->flavor) < 0) {
		snprintf(err, errlen, "clickhouse: could not read the server's version in \"%.*s\"",
			 (int)(s->resp.body.len > 40 ? 40 : s->resp.body.len), v);
		return -1;
	}
	sl_info("clickhouse: server version %.*s: tables sluice makes get the %s layout", (int)strcspn(v, "\r\n"),
		v, s->flavor == CH_MODERN ? "modern" : "legacy");
	return 0;
}

/* The layout of an existing table: modern when its _source_timestamp is a
 * DateTime64, else legacy (a table keeps the types it was made with). */
static enum ch_flavor table_flavor(const struct ch_dest_col *cols, int n)
{
	for (int i = 0; i < n; i++)
		if (!strcmp(cols[i].name, ch_meta_name(CH_M_SOURCE_TS)))
			return strncmp(cols[i].type, "DateTime64", 10) == 0 ? CH_MODERN : CH_LEGACY;
	return CH_LEGACY;
}

static int ensure_database(struct chsink *s, char *err, size_t errlen)
{
	uint64_t n = 0;
	struct ch_rb_reader r;
	int rc;

	if (s->db_ready)
		return 0;
	if ((rc = choose_flavor(s, err, errlen)) < 0)
		return rc;
	sl_buf_reset(&s->sql);
	ch_sql_database_exists(&s->sql, s->conf->database);
	if ((rc = run_sql(s, "looking for the database", err, errlen)) < 0)
		return rc;
	r.p = (const unsigned char *)s->resp.body.data;
	r.end = r.p + s->resp.body.len;
	if (ch_rb_get_u64(&r, &n) < 0) {
		snprintf(err, errlen, "clickhouse: could not read the database list ClickHouse sent");
		return -1;
	}
	if (n == 0) {
		sl_buf_reset(&s->sql);
		ch_sql_create_database(&s->sql, &s->ddl, s->conf->database);
		if ((rc = run_sql(s, "creating the database", err, errlen)) < 0)
			return rc;
		sl_info("clickhouse: created database \"%s\"", s->conf->database);
	}
	if (s->merge) {
		sl_buf_reset(&s->sql);
		ch_sql_vmap_create(&s->sql, &s->ddl, s->conf->database);
		if ((rc = run_sql(s, "creating the version map", err, errlen)) < 0)
			return rc;
	}
	s->db_ready = true;
	return 0;
}

/* Keeps the names of the destination's sorting-key columns. */
static int keep_keynames(struct chtab *t, const struct ch_dest_col *cols, int n)
{
	free_keynames(t);
	t->keynames = calloc((size_t)n + 1, sizeof *t->keynames);
	if (!t->keynames)
		return -1;
	for (int i = 0; i < n; i++)
		if (cols[i].in_sorting_key && !(t->keynames[t->nkeynames++] = strdup(cols[i].name)))
			return -1;
	return 0;
}

/* Merge mode: the version of the table's latest TRUNCATE (its sentinel),
 * the first time the table is written in this run.  Changes older than it,
 * which a replay can bring after it (a re-backfill's marker is followed by
 * the changes since the checkpoint), must not come back. */
static int read_floor(struct chsink *s, struct chtab *t, char *err, size_t errlen)
{
	struct ch_rb_reader r;
	uint64_t v = 0;
	int rc;

	if (!s->merge || t->floor || t->nkeynames == 0)
		return 0;
	sl_buf_reset(&s->sql);
	ch_sql_truncate_floor(&s->sql, s->conf->database, t->object, (const char *const *)t->keynames,
			      t->nkeynames);
	if ((rc = run_sql(s, "reading the table's last TRUNCATE", err, errlen)) < 0)
		return rc;
	r.p = (const unsigned char *)s->resp.body.data;
	r.end = r.p + s->resp.body.len;
	if (ch_rb_get_u64(&r, &v) < 0) {
		snprintf(err, errlen, "clickhouse: could not read the version ClickHouse sent");
		return -1;
	}
	t->floor = v;
	return 0;
}

/* Reads the table's version map (merge mode), once. */
static int read_vmap(struct chsink *s, struct chtab *t, char *err, size_t errlen)
{
	struct ch_rb_reader r;
	int rc;

	if (!s->merge || t->vmap_read)
		return 0;
	sl_buf_reset(&s->sql);
	ch_sql_vmap_read(&s->sql, s->conf->database, t->object);
	if ((rc = run_sql(s, "reading the table's version map", err, errlen)) < 0)
		return rc;
	r.p = (const unsigned char *)s->resp.body.data;
	r.end = r.p + s->resp.body.len;
	while (r.p < r.end) {
		uint64_t pos, shift;
		if (ch_rb_get_u64(&r, &pos) < 0 || ch_rb_get_u64(&r, &shift) < 0) {
			snprintf(err, errlen, "clickhouse: could not read the version map ClickHouse sent");
			return -1;
		}
		if (ch_vmap_add(&t->vmap, pos, shift) < 0) {
			snprintf(err, errlen, "clickhouse: out of memory");
			return -1;
		}
	}
	t->vmap_read = true;
	return 0;
}

static int create_view(struct chsink *s, const char *object, bool drop_first, char *err, size_t errlen)
{
	if (drop_first) {
		int rc;
		sl_buf_reset(&s->sql);
		ch_sql_drop_view(&s->sql, &s->ddl, s->conf->database, object);
		if ((rc = run_sql(s, "dropping a view to make it again", err, errlen)) < 0)
			return rc;
	}
	sl_buf_reset(&s->sql);
	ch_sql_create_view(&s->sql, &s->ddl, s->conf->database, object);
	return run_sql(s, "creating a view", err, errlen);
}

static int send_table(struct chsink *s, struct chtab *t, struct part *pt, bool acct, char *err, size_t errlen);
static int wait_flight(struct chsink *s, char *err, size_t errlen);

/* Records the columns of layout l as sluice made them (it created the
 * table or added columns), for the messages of later conflicts: every
 * column, or only[0..n) (indexes into l->cols). */
static int record_columns(struct chsink *s, const struct ch_layout *l, const int *only, int n, char *err,
			  size_t errlen)
{
	if (!s->columns_ready) {
		int rc;
		sl_buf_reset(&s->sql);
		ch_sql_columns_create(&s->sql, &s->ddl, s->conf->database);
		if ((rc = run_sql(s, "creating the record of column types", err, errlen)) < 0)
			return rc;
		s->columns_ready = true;
	}
	sl_buf_reset(&s->sql);
	ch_sql_columns_insert(&s->sql, s->conf->database, l, only, n);
	return run_sql(s, "recording column types", err, errlen);
}

/* The columns as sluice last made table t: the record in ClickHouse
 * (every table it created, column it added, widened or kept, at the first
 * write of each table in a run), or else its layout of this run; none
 * (*n = 0) for a table made before the record when it cannot be read.
 * Returns -1 only out of memory. */
static int made_columns(struct chsink *s, struct chtab *t, struct ch_dest_col **out, int *n)
{
	char e[SL_ERRLEN];
	struct ch_dest_col *cols;

	*out = NULL;
	*n = 0;
	sl_buf_reset(&s->sql);
	ch_sql_columns_read(&s->sql, s->conf->database, t->object);
	if (run_sql(s, "reading the record of column types", e, sizeof e) < 0 ||
	    parse_describe(s, out, n, e, sizeof e) < 0)
		sl_debug("clickhouse: table \"%s\": no record of its column types: %s", t->object, e);
	if (*n > 0 || !t->lay || t->lay->nsrc == 0)
		return 0;
	if (!(cols = calloc((size_t)t->lay->ncols, sizeof *cols)))
		return -1;
	for (int i = 0; i < t->lay->ncols; i++) {
		struct sl_buf ty;
		sl_buf_init(&ty, 0);
		ch_type_sql(&ty, &t->lay->cols[i].type);
		cols[i].name = strdup(t->lay->cols[i].name);
		cols[i].type = sl_buf_failed(&ty) ? NULL : strdup(ty.data);
		sl_buf_free(&ty);
		if (!cols[i].name || !cols[i].type) {
			free_dest(cols, i + 1);
			return -1;
		}
	}
	*out = cols;
	*n = t->lay->ncols;
	return 0;
}

/* A table ClickHouse lacks, which sluice made and wrote before (its columns
 * are on record): dropped by hand.  The stream alone cannot bring its rows
 * back, so it stops (SL_EPREREQ: exit 3, never retried) with the command
 * that fills it again.  Returns 0 when sluice never made it. */
static int table_gone(struct chsink *s, struct chtab *t, const struct sl_table *tv, char *err, size_t errlen)
{
	struct ch_dest_col *was = NULL;
	struct sl_buf cmd;
	char e[SL_ERRLEN];
	int nwas = 0;

	sl_buf_reset(&s->sql);
	ch_sql_columns_read(&s->sql, s->conf->database, t->object);
	if (run_sql(s, "reading the record of column types", e, sizeof e) < 0 ||
	    parse_describe(s, &was, &nwas, e, sizeof e) < 0)
		return 0;   /* no record: a table made before it, or never */
	free_dest(was, nwas);
	if (nwas == 0)
		return 0;
	sl_buf_init(&cmd, 0);
	sl_buf_put_backfill_command(&cmd, s->config_path, s->stream, tv->ns, tv->name);
	snprintf(err, errlen, "clickhouse: table \"%s\".\"%s\" (of \"%s\".\"%s\") is gone from ClickHouse, but "
		 "sluice made and wrote it before (dropped by hand?): the stream alone cannot bring its rows back, "
		 "so it stops here. Run `%s` to fill it again (the next run makes the table anew and backfills "
		 "it), then start sluice again", s->conf->database, t->object, tv->ns, tv->name,
		 sl_buf_failed(&cmd) ? "sluice backfill" : cmd.data);
	sl_buf_free(&cmd);
	return SL_EPREREQ;
}

/* A schema change ClickHouse's table cannot take (err says which column and
 * how, ch_layout_match()): no retry can mend it, so the stream stops
 * (SL_EPREREQ: exit 3) with what to do added to err.  Returns SL_EPREREQ. */
static int change_refused(struct chsink *s, const struct chtab *t, const struct sl_table *tv, char *err,
			  size_t errlen)
{
	size_t n = strlen(err);
	struct sl_buf cmd;

	sl_buf_init(&cmd, 0);
	sl_buf_put_backfill_command(&cmd, s->config_path, s->stream, tv->ns, tv->name);
	snprintf(err + n, errlen - n, "; the stream stops here. To go on: when ClickHouse was changed, put its "
		 "column back; when the source was, drop \"%s\".\"%s\" in ClickHouse and run `%s`; then start "
		 "sluice again", s->conf->database, t->object, sl_buf_failed(&cmd) ? "sluice backfill" : cmd.data);
	sl_buf_free(&cmd);
	return SL_EPREREQ;
}

/* With distributed: makes the Distributed table of t, ON CLUSTER, when it is
 * missing, or again when its columns (names and types, in order) are not
 * those of the local table (columns were added; 18.16 runs no ALTER ON
 * CLUSTER on a table that is not replicated, so it is dropped and made
 * anew).  *remade tells that it was made.  Without distributed: nothing. */
static int sync_distributed(struct chsink *s, struct chtab *t, bool *remade, char *err, size_t errlen)
{
	struct ch_dest_col *loc = NULL, *dist = NULL;
	int nloc = 0, ndist = 0, rc;
	bool same;

	*remade = false;
	if (!s->ddl.distributed)
		return 0;
	if ((rc = describe(s, t->local, &loc, &nloc, err, errlen)) < 0 ||
	    (rc = describe(s, t->object, &dist, &ndist, err, errlen)) < 0)
		goto out;
	same = ndist == nloc;
	for (int i = 0; same && i < nloc; i++)
		same = !strcmp(loc[i].name, dist[i].name) && !strcmp(loc[i].type, dist[i].type);
	if (same)
		goto out;
	if (ndist > 0) {
		sl_buf_reset(&s->sql);
		ch_sql_drop_distributed(&s->sql, &s->ddl, s->conf->database, t->object);
		if ((rc = run_sql(s, "dropping a Distributed table to make it again", err, errlen)) < 0)
			goto out;
	}
	sl_buf_reset(&s->sql);
	ch_sql_create_distributed(&s->sql, &s->ddl, s->conf->database, t->object, loc, nloc);
	if ((rc = run_sql(s, "creating a Distributed table", err, errlen)) < 0)
		goto out;
	sl_info("clickhouse: %s Distributed table \"%s\".\"%s\" over \"%s\" of cluster \"%s\"",
		ndist > 0 ? "made again the" : "created", s->conf->database, t->object, t->local, s->ddl.cluster);
	*remade = true;
out:
	free_dest(loc, nloc);
	free_dest(dist, ndist);
	return rc;
}

/* Runs the ALTER TABLE that match a asks of t (layout l, destination
 * columns dest): columns added, widened, and in merge mode dropped; then
 * the Distributed table and the view are made again (they keep the
 * columns they were made with).  Append mode keeps a dropped column. */
static int alter_table(struct chsink *s, struct chtab *t, const struct sl_table *tv, const struct ch_layout *l,
		       const struct ch_dest_col *dest, const struct ch_alter *a, char *err, size_t errlen)
{
	struct ch_alter change = *a;
	bool remade;
	int rc;

	if (a->nadd > 0) {
		/* on record first: a crash after the ALTER must not leave a column
		 * sluice made without a record (dropping it later needs one) */
		if ((rc = record_columns(s, l, a->add, a->nadd, err, errlen)) < 0)
			return rc;
		sl_buf_reset(&s->sql);
		ch_sql_add_columns(&s->sql, &s->ddl, s->conf->database, l, a->add, a->nadd, tv);
		if ((rc = run_sql(s, "adding columns", err, errlen)) < 0)
			return rc;
		for (int i = 0; i < a->nadd; i++)
			sl_info("clickhouse: table \"%s\".\"%s\": added column \"%s\"", s->conf->database, t->object,
				l->cols[a->add[i]].name);
	}
	if (!l->merge)
		change.ndrop = 0;
	if (change.nmodify > 0 || change.ndrop > 0) {
		sl_buf_reset(&s->sql);
		ch_sql_change_columns(&s->sql, &s->ddl, s->conf->database, l, dest, &change);
		if ((rc = run_sql(s, "changing columns", err, errlen)) < 0)
			return rc;
		for (int i = 0; i < change.nmodify; i++)
			sl_info("clickhouse: table \"%s\".\"%s\": column \"%s\" widened at the source: modified it to "
				"the wider type", s->conf->database, t->object, l->cols[change.modify[i]].name);
		for (int i = 0; i < change.ndrop; i++)
			sl_info("clickhouse: table \"%s\".\"%s\": column \"%s\" dropped (or renamed) at the source: "
				"dropped it", s->conf->database, t->object, dest[change.drop[i]].name);
	}
	if ((rc = sync_distributed(s, t, &remade, err, errlen)) < 0 ||
	    (s->merge && (rc = create_view(s, t->object, true, err, errlen)) < 0))
		return rc;
	return 0;
}

/* Merge mode: of the columns match a asks to drop (ClickHouse's columns
 * dest), those that stay because tv, the version of the change at csn, is
 * older than the change that added them (doc/clickhouse.md, "Older table
 * versions"): a nullable column, no key, that a row of a later change (by
 * _csn) wrote.  A value says so, and so does a NULL under a DEFAULT (a row
 * written without the column reads the DEFAULT): dropped and added again,
 * such a column would read the DEFAULT in that row.  They go to l->keep.
 * Returns how many, or -1. */
static int keep_older(struct chsink *s, struct chtab *t, const struct sl_table *tv, struct ch_layout *l,
		      const struct ch_dest_col *dest, const struct ch_alter *a, const char *csn, char *err,
		      size_t errlen)
{
	int n = 0, rc;

	for (int i = 0; i < a->ndrop; i++) {
		const struct ch_dest_col *dc = &dest[a->drop[i]];
		if (dc->in_sorting_key || strncmp(dc->type, "Nullable(", 9) != 0)
			continue;
		sl_buf_reset(&s->sql);
		ch_sql_later_write(&s->sql, s->conf->database, t->object, t->local, dc->name, csn);
		if ((rc = run_sql(s, "reading whether a later change wrote a column", err, errlen)) < 0)
			return rc;
		if (s->resp.body.len == 0)
			continue;
		if (ch_layout_keep(l, dc->name) < 0) {
			snprintf(err, errlen, "clickhouse: out of memory");
			return -1;
		}
		sl_info("clickhouse: table \"%s\".\"%s\": the change %s of \"%s\".\"%s\" is of an older version, "
			"without column \"%s\", which a later change wrote: the column stays, NULL (or its DEFAULT) in "
			"its row", s->conf->database, t->object, csn, tv->ns, tv->name, dc->name);
		n++;
	}
	return n;
}

/* Makes ClickHouse's table fit table version tv, the first time a change of
 * that version comes: creates the database, the table (and in merge mode its
 * view), or adds the columns the version added; anything else is an error
 * that names the table and the change.  Rows of the previous version are
 * sent first.  A column-less version (the TRUNCATE marker of a dropped
 * table) changes nothing: it needs only the table's key, if the table
 * exists. */
static int prepare_version(struct chsink *s, struct chtab *t, const struct sl_table *tv, const char *csn,
			   bool refill, char *err, size_t errlen)
{
	struct ch_layout *l = NULL;
	struct ch_dest_col *dest = NULL, *was = NULL;
	struct ch_alter al = { 0 };
	int ndest = 0, nwas = 0, rc, m;
	bool exists, view, made, remade = false;
	char e[SL_ERRLEN];

	if (t->lay && !strcmp(t->lay->schema_key, tv->schema_key))
		return 0;
	if ((rc = wait_flight(s, err, errlen)) < 0)   /* its rows use the layout and the connection */
		return rc;
	if (t->pend_rows > 0 && (rc = send_table(s, t, &t->cur, true, err, errlen)) < 0)
		return rc;
	if ((rc = ensure_database(s, err, errlen)) < 0 || (rc = check_engines(s, t, &exists, &view, err, errlen)) < 0)
		goto out;
	/* an existing table keeps its layout, whatever the server's version */
	if (exists && (rc = describe(s, t->local, &dest, &ndest, err, errlen)) < 0)
		goto out;
	rc = -1;   /* until a step says otherwise */
	if (ch_layout_new(&l, tv, s->merge, exists ? table_flavor(dest, ndest) : s->flavor, err, errlen) < 0)
		goto out;
	if (tv->ncols == 0) {
		/* A marker only: for a table ClickHouse lacks there is nothing to clear. */
		t->exists = exists;
		if (exists && (keep_keynames(t, dest, ndest) < 0 ||
			       (rc = sync_distributed(s, t, &remade, err, errlen)) < 0 ||
			       (rc = read_floor(s, t, err, errlen)) < 0 || (rc = read_vmap(s, t, err, errlen)) < 0))
			goto out;
		rc = 0;
		goto done;
	}
	if (!exists) {
		if (!refill && (rc = table_gone(s, t, tv, err, errlen)) != 0)
			goto out;
		/* on record first, as in alter_table(): a crash right after the
		 * CREATE must not leave a table sluice made without a record (a
		 * column dropped at the source is dropped by the record) */
		if ((rc = record_columns(s, l, NULL, 0, err, errlen)) < 0)
			goto out;
		sl_buf_reset(&s->sql);
		ch_sql_create_table(&s->sql, &s->ddl, s->conf->database, l);
		if ((rc = run_sql(s, "creating a table", err, errlen)) < 0)
			goto out;
		if (s->kill_after_create)
			raise(SIGKILL);  /* test hook: a crash right after the CREATE */
		sl_info("clickhouse: created table \"%s\".\"%s\" for \"%s\".\"%s\" (%s mode)", s->conf->database,
			t->object, tv->ns, tv->name, s->merge ? "merge" : "append");
	}
	if ((rc = sync_distributed(s, t, &remade, err, errlen)) < 0)
		goto out;
	if (s->merge && (!view || !exists || remade) && (rc = create_view(s, t->object, view && remade, err, errlen)) < 0)
		goto out;
	made = exists && !t->lay;   /* recorded once a run (a table made now was before its CREATE) */
	for (int pass = 0;; pass++) {
		if (!(pass == 0 && exists && dest)) {    /* read above */
			free_dest(dest, ndest);
			dest = NULL;
			if ((rc = describe(s, t->local, &dest, &ndest, err, errlen)) < 0)
				goto out;
		}
		ch_alter_free(&al);
		rc = -1;
		m = ch_layout_match(l, dest, ndest, NULL, 0, &al, err, errlen);
		if (m == CH_MATCH_CONFLICT) {
			/* dropped columns and changed types: compare with the columns as sluice made them */
			if (!was && made_columns(s, t, &was, &nwas) < 0)
				goto out;
			if (nwas > 0) {
				ch_alter_free(&al);
				m = ch_layout_match(l, dest, ndest, was, nwas, &al, err, errlen);
			}
		}
		if (m == CH_MATCH_CONFLICT) {
			/* its changes may all be older than the table's last TRUNCATE
			 * (write() then skips them): the floor, if not read yet */
			if (s->merge && !t->floor && keep_keynames(t, dest, ndest) == 0)
				(void)read_floor(s, t, e, sizeof e);
			rc = change_refused(s, t, tv, err, errlen);
			goto out;
		}
		if (m == CH_MATCH_ALTER && s->merge && al.ndrop > 0 && csn && pass == 0) {
			if ((rc = keep_older(s, t, tv, l, dest, &al, csn, err, errlen)) < 0)
				goto out;
			if (rc > 0) {
				ch_alter_free(&al);
				m = ch_layout_match(l, dest, ndest, nwas > 0 ? was : NULL, nwas, &al, err, errlen);
				rc = -1;
			}
		}
		if (m < 0)
			goto out;
		if (m == CH_MATCH_SAME)
			break;
		if (pass > 0) {
			snprintf(err, errlen, "clickhouse: table \"%s\": the columns altered did not change", t->object);
			goto out;
		}
		if ((rc = alter_table(s, t, tv, l, dest, &al, err, errlen)) < 0)
			goto out;
		made = true;
	}
	for (int i = 0; i < al.ndrop; i++)
		sl_info("clickhouse: table \"%s\".\"%s\": column \"%s\" is no longer in the source table "
			"(dropped or renamed): kept, NULL in the rows written from now on", s->conf->database,
			t->object, dest[al.drop[i]].name);
	if (made && (rc = record_columns(s, l, NULL, 0, err, errlen)) < 0)
		goto out;
	if (keep_keynames(t, dest, ndest) < 0) {
		snprintf(err, errlen, "clickhouse: out of memory");
		rc = -1;
		goto out;
	}
	if ((rc = read_floor(s, t, err, errlen)) < 0 || (rc = read_vmap(s, t, err, errlen)) < 0)
		goto out;
	t->exists = true;
	rc = 0;
done:
	ch_layout_free(t->lay);
	t->lay = l;
	l = NULL;
out:
	ch_layout_free(l);
	free_dest(dest, ndest);
	free_dest(was, nwas);
	ch_alter_free(&al);
	return rc;
}

/* ------------------------------------------------------------------ */
/* sending                                                              */

static int dead_letter(struct chsink *s, struct chtab *t, const struct rowbuf *rb, size_t i, bool meta_only,
		       const char *why, char *err, size_t errlen)
{
	int code = s->resp.code;

	if (++s->dl_in_flush > DEAD_LETTERS_MAX) {
		snprintf(err, errlen, "clickhouse: table \"%s\": ClickHouse refused more than %d rows in one flush "
			 "(was the table changed by hand?); the last: %s", t->object, DEAD_LETTERS_MAX, why);
		return -1;
	}
	if (ch_dl_line(&s->dl, s->stream, s->conf->database, t->lay, meta_only, rb->b.data + rb->off[i],
		       rowbuf_end(rb, i) - rb->off[i], code, why, sl_now_us()) < 0) {
		snprintf(err, errlen, "clickhouse: table \"%s\": could not write a refused row as a dead letter "
			 "(%s)", t->object, why);
		return -1;
	}
	s->stats.dead_letters++;
	if ((s->stats.dead_letters & (s->stats.dead_letters - 1)) == 0)
		sl_warn("clickhouse: table \"%s\": ClickHouse refused a row; it went to the dead-letter file \"%s\" "
			"(%" PRIu64 " so far): %s", t->object, s->dl_path, s->stats.dead_letters, why);
	return 0;
}

/* Inserts rows [lo, hi) of rb.  A refusal as data splits the range in two
 * until the refused rows stand alone; each goes to the dead-letter file. */
static int insert_range(struct chsink *s, struct chtab *t, const struct rowbuf *rb, bool meta_only, size_t lo,
			size_t hi, const char *query, const char *what, char *err, size_t errlen)
{
	struct ch_req rq = { .query = query, .params = s->ins_params };
	int rc;

	rq.body = rb->b.data + rb->off[lo];
	rq.len = rowbuf_end(rb, hi - 1) - rb->off[lo];
	rc = ch_http_run(s->http, &rq, &s->resp, what, err, errlen);
	if (rc == CH_RUN_OK) {
		s->stats.inserts++;
		s->stats.rows_inserted += hi - lo;
		return 0;
	}
	if (rc < 0)
		return rc;   /* -1, or SL_EPREREQ: the user refused */
	if (hi - lo == 1) {
		char why[512];
		snprintf(why, sizeof why, "%s", err);
		return dead_letter(s, t, rb, lo, meta_only, why, err, errlen);
	}
	if ((rc = insert_range(s, t, rb, meta_only, lo, lo + (hi - lo) / 2, query, what, err, errlen)) < 0)
		return rc;
	return insert_range(s, t, rb, meta_only, lo + (hi - lo) / 2, hi, query, what, err, errlen);
}

static int insert_rows(struct chsink *s, struct chtab *t, const struct rowbuf *rb, bool meta_only, char *err,
		       size_t errlen)
{
	char what[300];

	if (rb->n == 0)
		return 0;
	sl_buf_reset(&s->sql2);
	ch_sql_insert(&s->sql2, s->conf->database, t->lay, meta_only);
	if (sl_buf_failed(&s->sql2)) {
		snprintf(err, errlen, "clickhouse: out of memory");
		return -1;
	}
	snprintf(what, sizeof what, "insert into \"%s\".\"%s\"", s->conf->database, t->object);
	return insert_range(s, t, rb, meta_only, 0, rb->n, s->sql2.data, what, err, errlen);
}

/* Reads one RowBinary row of layout l from r: its payload values into vals
 * (the layout's nsrc; a decimal's text in scratch, CH_RB_SCRATCH a column),
 * and where each metadata column's value starts into meta_at (indexed by
 * enum ch_meta; NULL for a column the layout does not have).  0, or -1 when
 * the row does not read. */
static int read_row(struct ch_rb_reader *r, const struct ch_layout *l, struct sl_value *vals, char *scratch,
		    const unsigned char *meta_at[CH_M_POS + SL_META_MAX])
{
	for (int m = 0; m < CH_M_POS + SL_META_MAX; m++)
		meta_at[m] = NULL;
	for (int i = 0; i < l->ncols; i++) {
		const struct ch_col *c = &l->cols[i];
		if (c->src < 0)
			meta_at[c->meta] = r->p;
		if ((c->src >= 0 ? ch_rb_get_value(r, &c->type, &vals[c->src], scratch + (size_t)i * CH_RB_SCRATCH)
				 : ch_rb_skip(r, &c->type)) < 0)
			return -1;
	}
	return 0;
}

/* Merge mode: replaces row i of part pt by a copy with values vals and fill
 * key; acct: pt is the batch being written, whose size is accounted. */
static int held_replace(struct chsink *s, struct chtab *t, struct part *pt, size_t i, const struct sl_value *vals,
			const void *fill, size_t filllen, bool acct)
{
	struct held *o = pt->keys.rows[i];
	struct held *h = held_make(o->m, vals, t->lay->nsrc, o->key, o->keylen, fill, filllen);

	if (!h)
		return -1;
	h->deleted = o->deleted;
	if (acct)
		account(s, t, 0, (int64_t)h->size - (int64_t)o->size);
	pt->keys.rows[i] = h;
	free(o);
	return 0;
}

/* Adds key (len bytes) to the keys to look up, once. */
static int ask_key(struct keymap *asked, const struct ch_rowmeta *m, const void *key, size_t len)
{
	struct held *probe;

	if (keymap_find(asked, key, len) >= 0)
		return 0;
	probe = held_make(m, NULL, 0, key, len, NULL, 0);
	if (!probe || keymap_add(asked, probe) < 0) {
		free(probe);
		return -1;
	}
	return 0;
}

/* Reads the live rows of a lookup's response into found (by key, with
 * their _version in m->version). */
static int lookup_read(struct chsink *s, const struct ch_layout *l, struct sl_value *vals, char *scratch,
		       struct keymap *found, const char *what, char *err, size_t errlen)
{
	static const unsigned char no_uuid[16];
	static const char no_csn[SL_CSN_LEN + 1] = "0000000000000000-0000000000";
	struct ch_rb_reader r = { (const unsigned char *)s->resp.body.data,
				  (const unsigned char *)s->resp.body.data + s->resp.body.len };

	while (r.p < r.end) {
		struct ch_rowmeta m = { 0 };
		const unsigned char *meta_at[CH_M_POS + SL_META_MAX];
		struct ch_rb_reader d;
		unsigned deleted = 0;
		struct held *h;
		int bad = read_row(&r, l, vals, scratch, meta_at);
		if (bad == 0 && meta_at[CH_M_IS_DELETED]) {
			d.p = meta_at[CH_M_IS_DELETED];
			d.end = r.end;
			bad = ch_rb_get_u8(&d, &deleted);
		}
		if (bad == 0 && meta_at[CH_M_VERSION]) {
			d.p = meta_at[CH_M_VERSION];
			d.end = r.end;
			bad = ch_rb_get_u64(&d, &m.version);
		}
		if (bad < 0) {
			snprintf(err, errlen, "clickhouse: %s: could not read the rows ClickHouse sent", what);
			return -1;
		}
		if (deleted)
			continue;
		sl_buf_reset(&s->key2);
		for (int k = 0; k < l->nkeys; k++) {
			const struct ch_col *c = &l->cols[l->keys[k]];
			if (ch_rb_put_value(&s->key2, &c->type, &vals[c->src], c->name, err, errlen) < 0)
				return -1;
		}
		m.uuid = no_uuid;
		m.csn = no_csn;
		m.op = SL_OP_INSERT;
		h = held_make(&m, vals, l->nsrc, s->key2.data, s->key2.len, NULL, 0);
		if (!h)
			goto oom;
		if (keymap_find(found, h->key, h->keylen) >= 0) {
			free(h);
		} else if (keymap_add(found, h) < 0) {
			free(h);
			goto oom;
		}
	}
	return 0;
oom:
	snprintf(err, errlen, "clickhouse: out of memory");
	return -1;
}

/* Fills row i of pt from the rows found.  Its unchanged values come from
 * the latest of its sources that ClickHouse holds in the source's version
 * range: the key they were first read from; or, in a replay of changes
 * ClickHouse has (after a key change, that key's row is a tombstone by
 * then), a key they moved to, whose row has the values the first write
 * filled in. */
static int fill_row(struct chsink *s, struct chtab *t, struct part *pt, size_t i, const struct keymap *found,
		    struct sl_value *vals, bool acct)
{
	const struct ch_layout *l = t->lay;
	const struct held *h = pt->keys.rows[i];
	ssize_t f = -1;
	int missing = 0, n = 0, which = -1;
	struct fsrc e;

	for (size_t at = 0; fsrc_next(h, &at, &e); n++) {
		ssize_t r = keymap_find(found, e.key, e.keylen);
		if (r >= 0 && found->rows[r]->m->version >= e.lo && found->rows[r]->m->version < e.hi) {
			f = r;
			which = n;
		}
	}
	if (which > 0)
		s->stats.replays_kept++;
	memcpy(vals, h->vals, (size_t)l->nsrc * sizeof *vals);
	for (int c = 0; c < l->nsrc; c++) {
		if (vals[c].kind != SL_V_UNCHANGED)
			continue;
		if (f >= 0) {
			vals[c] = found->rows[f]->vals[c];
			s->stats.unchanged_filled++;
		} else {
			missing++;
			s->stats.unchanged_missing++;
		}
	}
	if (missing)
		s->missing_logged++;
	if (missing && (s->missing_logged & (s->missing_logged - 1)) == 0)
		sl_warn("clickhouse: table \"%s\": change %s left %d value%s unchanged, and neither the batch "
			"nor ClickHouse has the row to take them from: written as NULL and listed in "
			"_unchanged_columns (%" PRIu64 " such rows so far)", t->object, h->m->csn, missing,
			missing == 1 ? "" : "s", s->missing_logged);
	return held_replace(s, t, pt, i, vals, NULL, 0, acct);
}

/* Merge mode: fills the unchanged values the batch could not, from the rows
 * ClickHouse holds now (before this batch is inserted). */
static int lookup_fill(struct chsink *s, struct chtab *t, struct part *pt, bool acct, char *err, size_t errlen)
{
	const struct ch_layout *l = t->lay;
	struct keymap found = { 0 }, asked = { 0 };
	struct sl_value *vals = NULL;
	char *scratch = NULL;
	char what[300];
	int rc = -1;

	if (!(vals = calloc((size_t)l->ncols + 1, sizeof *vals)) ||
	    !(scratch = malloc((size_t)(l->ncols + 1) * CH_RB_SCRATCH)))
		goto oom;
	snprintf(what, sizeof what, "reading rows of \"%s\".\"%s\" for unchanged values", s->conf->database,
		 t->object);
	/* The distinct keys of the rows' sources, LOOKUP_KEYS at a time; fewer
	 * when the rows of a request do not fit in a response (large TOAST
	 * values). */
	for (size_t i = 0; i < pt->keys.n; i++) {
		const struct held *h = pt->keys.rows[i];
		struct fsrc e;
		for (size_t at = 0; fsrc_next(h, &at, &e);)
			if (ask_key(&asked, h->m, e.key, e.keylen) < 0)
				goto oom;
	}
	for (size_t next = 0, per = LOOKUP_KEYS; next < asked.n;) {
		struct ch_req rq = { .params = CH_PARAMS_READ, .ext_name = CH_KEYS_TABLE };
		size_t nkeys = asked.n - next < per ? asked.n - next : per;
		int run;

		sl_buf_reset(&s->lkeys);
		for (size_t k = 0; k < nkeys; k++)
			sl_buf_append(&s->lkeys, asked.rows[next + k]->key, asked.rows[next + k]->keylen);
		sl_buf_reset(&s->sql);
		sl_buf_reset(&s->sql2);
		if (ch_sql_lookup(&s->sql, &s->sql2, s->conf->database, l) < 0 || sl_buf_failed(&s->lkeys))
			goto oom;
		rq.query = s->sql.data;
		rq.ext_structure = s->sql2.data;
		rq.ext_data = s->lkeys.data;
		rq.ext_len = s->lkeys.len;
		run = ch_http_run(s->http, &rq, &s->resp, what, err, errlen);
		if (run != CH_RUN_OK && s->resp.overflow && per > 1) {
			per /= 2;
			sl_debug("clickhouse: %s: the rows of %zu keys do not fit in a response; asking for %zu at a time",
				 what, nkeys, per);
			continue;
		}
		if (run != CH_RUN_OK) {
			rc = run < 0 ? run : -1;
			goto out;
		}
		next += nkeys;
		s->stats.lookups++;
		if (lookup_read(s, l, vals, scratch, &found, what, err, errlen) < 0)
			goto out;
	}
	for (size_t i = 0; i < pt->keys.n; i++)
		if (pt->keys.rows[i]->fill && fill_row(s, t, pt, i, &found, vals, acct) < 0)
			goto oom;
	rc = 0;
	goto out;
oom:
	snprintf(err, errlen, "clickhouse: table \"%s\": out of memory", t->object);
out:
	keymap_free(&found);
	keymap_free(&asked);
	free(vals);
	free(scratch);
	/* Large TOAST values can make a response big: do not keep its memory. */
	if (s->resp.body.alloc > LOOKUP_KEEP_BYTES)
		sl_buf_free(&s->resp.body);
	return rc;
}

/* Sends part pt of table t; acct: pt is the batch being written (flush()),
 * whose rows leave its accounting; else a batch in flight, accounted for
 * when it left (flush_start()). */
static int send_table(struct chsink *s, struct chtab *t, struct part *pt, bool acct, char *err, size_t errlen)
{
	bool fill = false;
	int rc;

	if (acct && t->pend_rows == 0)
		return 0;
	if (!s->merge) {
		if ((rc = insert_rows(s, t, &pt->rows, false, err, errlen)) < 0 ||
		    (rc = insert_rows(s, t, &pt->mrows, true, err, errlen)) < 0)
			return rc;
		rowbuf_reset(&pt->rows);
		rowbuf_reset(&pt->mrows);
		goto done;
	}
	if (pt->vsteps.len > 0) {
		sl_buf_reset(&s->sql);
		ch_sql_vmap_insert(&s->sql, s->conf->database, t->object, (const struct ch_vstep *)pt->vsteps.data,
				   pt->vsteps.len / sizeof(struct ch_vstep));
		if ((rc = run_sql(s, "recording a version map step", err, errlen)) < 0)
			return rc;
		sl_buf_reset(&pt->vsteps);
	}
	if (pt->trunc) {
		char what[300];
		const char *const *keys = (const char *const *)t->keynames;
		sl_buf_reset(&s->sql);
		ch_sql_tombstones(&s->sql, s->conf->database, t->object, keys, t->nkeynames, t->lay, pt->trunc->m);
		snprintf(what, sizeof what, "clearing \"%s\".\"%s\" for a TRUNCATE", s->conf->database, t->object);
		if ((rc = run_sql_params(s, s->sql_ins_params, what, err, errlen)) < 0)
			return rc;
		sl_buf_reset(&s->sql);
		ch_sql_truncate_sentinel(&s->sql, s->conf->database, t->object, t->lay, pt->trunc->m);
		if ((rc = run_sql_params(s, s->sql_ins_params, what, err, errlen)) < 0)
			return rc;
		free(pt->trunc);
		pt->trunc = NULL;
	}
	for (size_t i = 0; i < pt->keys.n && !fill; i++)
		fill = pt->keys.rows[i]->fill != NULL;
	if (fill && (rc = lookup_fill(s, t, pt, acct, err, errlen)) < 0)
		return rc;
	rowbuf_reset(&s->enc);
	for (size_t i = 0; i < pt->keys.n; i++) {
		const struct held *h = pt->keys.rows[i];
		if (rowbuf_mark(&s->enc) < 0 ||
		    (h->row ? ch_rb_put_raw(&s->enc.b, h->row, h->rowlen)
			    : put_row(s, &s->enc.b, t->lay, h->m, h->vals, false, err, errlen)) < 0) {
			if (!err[0] || sl_buf_failed(&s->enc.b))
				snprintf(err, errlen, "clickhouse: table \"%s\": out of memory", t->object);
			return -1;
		}
	}
	if ((rc = insert_rows(s, t, &s->enc, false, err, errlen)) < 0)
		return rc;
	keymap_clear(&pt->keys);
done:
	if (acct)
		account(s, t, -(int64_t)t->pend_rows, -(int64_t)t->pend_bytes);
	return 0;
}

static void log_sent(struct chsink *s, int64_t t0)
{
	sl_debug("clickhouse: batch sent in %" PRId64 " ms; so far %" PRIu64 " rows inserted in %" PRIu64
		 " inserts, %" PRIu64 " lookups, %" PRIu64 " unchanged values filled, %" PRIu64 " missing, %"
		 PRIu64 " dead letters", sl_mono_ms() - t0, s->stats.rows_inserted, s->stats.inserts,
		 s->stats.lookups, s->stats.unchanged_filled + atomic_load_explicit(&s->w_filled, memory_order_relaxed),
		 s->stats.unchanged_missing, s->stats.dead_letters);
}

/* After a batch was sent (any: it had rows, since t0): its dead letters
 * go to their file, and a debug line says how it went. */
static int batch_sent(struct chsink *s, bool any, int64_t t0, char *err, size_t errlen)
{
	if (s->dl.len > 0) {
		if (ch_dl_write(s->dl_path, s->dl.data, s->dl.len, err, errlen) < 0)
			return -1;
		sl_buf_reset(&s->dl);
	}
	s->dl_in_flush = 0;
	if (any)
		log_sent(s, t0);
	return 0;
}

/* Sends every table's part of the batch, then the dead letters. */
static int send_all(struct chsink *s, char *err, size_t errlen)
{
	struct chtab *t;
	int64_t t0 = sl_mono_ms();
	bool any = s->pending != NULL;

	while ((t = s->pending) != NULL) {
		int rc = send_table(s, t, &t->cur, true, err, errlen);
		if (rc < 0)
			return rc;
		s->pending = t->pnext;
		t->pnext = NULL;
		t->on_list = false;
	}
	s->first_ms = 0;
	return batch_sent(s, any, t0, err, errlen);
}

/* ------------------------------------------------------------------ */
/* writing                                                              */

/* The key of a merge-mode row: its key columns in RowBinary. */
static int row_key(struct chsink *s, const struct ch_layout *l, const struct sl_value *vals, struct sl_buf *out,
		   char *err, size_t errlen)
{
	sl_buf_reset(out);
	for (int k = 0; k < l->nkeys; k++) {
		const struct ch_col *c = &l->cols[l->keys[k]];
		if (ch_rb_put_value(out, &c->type, &vals[c->src], c->name, err, errlen) < 0)
			return -1;
	}
	(void)s;
	return 0;
}

/* A merge-mode change whose key does not encode (a key column without a
 * value: a NULL that the source's checks let through) cannot be a row, for
 * a reason of its own: it goes to the dead-letter file at once (written and
 * fsynced by the writer, so before its position is acknowledged), named by
 * table and CSN, and the stream goes on.  -1 only when that fails. */
static int key_dead_letter(struct chsink *s, struct chtab *t, const struct sl_change *c, const char *why,
			   char *err, size_t errlen)
{
	struct sl_buf line;
	uint64_t n;
	int rc = -1;

	sl_buf_init(&line, 0);
	if (ch_dl_values_line(&line, s->stream, s->conf->database, t->lay, c->values, c->csn, sl_op_name(c->op),
			      why, sl_now_us()) < 0) {
		snprintf(err, errlen, "clickhouse: table \"%s\": out of memory", t->object);
		goto out;
	}
	if (ch_dl_write(s->dl_path, line.data, line.len, err, errlen) < 0)
		goto out;
	n = atomic_fetch_add_explicit(&s->w_dead, 1, memory_order_relaxed) + 1;
	if ((n & (n - 1)) == 0)
		sl_warn("clickhouse: table \"%s\": the change at %s has no usable key, so it cannot be written; it went "
			"to the dead-letter file \"%s\" (%" PRIu64 " such so far): %s", t->object, c->csn, s->dl_path,
			n, why);
	rc = 0;
out:
	sl_buf_free(&line);
	return rc;
}

static int write_append(struct chsink *s, struct chtab *t, const struct sl_change *c, const struct ch_rowmeta *m,
			char *err, size_t errlen)
{
	bool marker = c->op == SL_OP_TRUNCATE;
	struct rowbuf *rb = marker ? &t->cur.mrows : &t->cur.rows;
	size_t before = rb->b.len;

	if (rowbuf_mark(rb) < 0)
		goto oom;
	if (put_row(s, &rb->b, t->lay, m, marker ? NULL : c->values, marker, err, errlen) < 0) {
		rb->n--;
		return -1;
	}
	account(s, t, 1, (int64_t)(rb->b.len - before));
	return 0;
oom:
	snprintf(err, errlen, "clickhouse: table \"%s\": out of memory", t->object);
	return -1;
}

/* The values of held row h (layout l): a pending row's own, or an encoded
 * row's read back (valid until the next call, and while h lives).  NULL
 * with a message when out of memory or the row does not read. */
static const struct sl_value *held_values(struct chsink *s, const struct ch_layout *l, const struct held *h,
					  char *err, size_t errlen)
{
	struct ch_rb_reader r;
	const unsigned char *meta_at[CH_M_POS + SL_META_MAX];

	if (!h->row)
		return h->vals;
	if (s->srcvals_cols < l->ncols + 1) {
		struct sl_value *v = realloc(s->srcvals, ((size_t)l->ncols + 1) * sizeof *v);
		char *sc = v ? realloc(s->scratch, ((size_t)l->ncols + 1) * CH_RB_SCRATCH) : NULL;
		if (v)
			s->srcvals = v;
		if (!sc) {
			snprintf(err, errlen, "clickhouse: table \"%s\": out of memory", l->object);
			return NULL;
		}
		s->scratch = sc;
		s->srcvals_cols = l->ncols + 1;
	}
	r.p = h->row;
	r.end = h->row + h->rowlen;
	if (read_row(&r, l, s->srcvals, s->scratch, meta_at) < 0)
		goto bad;
	if (meta_at[CH_M_UNCHANGED]) {
		/* Values the row left unknown (written as NULL, named in
		 * _unchanged_columns, in column order) stay unknown. */
		uint64_t n;
		int from = 0;
		r.p = meta_at[CH_M_UNCHANGED];
		if (ch_rb_get_uleb(&r, &n) < 0)
			goto bad;
		for (uint64_t k = 0; k < n; k++) {
			const unsigned char *name;
			size_t len;
			if (ch_rb_get_str(&r, &name, &len) < 0)
				goto bad;
			for (; from < l->nsrc; from++) {
				const char *cn = l->cols[l->of_src[from]].name;
				if (strlen(cn) == len && !memcmp(cn, name, len))
					break;
			}
			if (from == l->nsrc)
				goto bad;
			s->srcvals[from++].kind = SL_V_UNCHANGED;
		}
	}
	return s->srcvals;
bad:
	snprintf(err, errlen, "clickhouse: table \"%s\": a row of the batch does not read back", l->object);
	return NULL;
}

/* Merge mode: whether change c is older than the table's last TRUNCATE
 * written (its floor), by the version it would have. */
static bool below_floor(const struct chsink *s, const struct chtab *t, const struct sl_change *c)
{
	uint64_t v;

	return s->merge && t->floor &&
	       ch_version(c->csn_pos, c->seq, ch_vmap_shift(&t->vmap, c->csn_pos), &v) == 0 && v < t->floor;
}

/* Skips change c, older than a TRUNCATE already written: a replay of a
 * change the TRUNCATE erased (CSN order says it is gone).  Returns 0. */
static int skip_old(struct chsink *s, struct chtab *t, const struct sl_change *c)
{
	if (s->stats.below_truncate++ == 0)
		sl_info("clickhouse: table \"%s\": skipping changes older than its last TRUNCATE (the first: %s), "
			"which a replay brings again", t->object, c->csn);
	moved_clear(s);
	return 0;
}

/* Copies the sources of src (a pending row of the batch) into s->fsrc for a
 * change that takes its values: the last entry, src's own key, is then
 * valid up to version hi: the UPDATE-DELETE's when the values move on to
 * another key (moved), else this change's (+1: its key holds them there
 * too; an entry valid at any version stays so). */
static void fsrc_inherit(struct chsink *s, const struct held *src, uint64_t hi, bool moved)
{
	size_t at = 0, last = 0;
	struct fsrc e;

	for (size_t here = 0; fsrc_next(src, &at, &e); here = at)
		last = here;
	if (!at)
		return;
	sl_buf_append(&s->fsrc, src->fill, src->filllen);
	if (sl_buf_failed(&s->fsrc) || !fsrc_get(src->fill + last, src->fill + src->filllen, &e) ||
	    e.keylen != src->keylen || memcmp(e.key, src->key, e.keylen) != 0)
		return;
	if (moved || (e.hi != FSRC_ANY && e.hi < hi))
		memcpy(s->fsrc.data + s->fsrc.len - src->filllen + last + 8, &hi, 8);
}

static int write_merge(struct chsink *s, struct chtab *t, const struct sl_change *c, const struct ch_rowmeta *m,
		       char *err, size_t errlen)
{
	const struct ch_layout *l = t->lay;
	struct sl_value *vals = NULL;
	const void *fill = NULL;
	size_t filllen = 0;
	struct held *h = NULL, *src = NULL;
	ssize_t prev;
	bool unchanged = false, moved_here = false;
	int rc = -1;

	if (m->version < t->floor)
		return skip_old(s, t, c);
	if (c->op == SL_OP_TRUNCATE) {
		/* Everything before it in the batch is cleared by it. */
		int64_t bytes = 0;
		for (size_t i = 0; i < t->cur.keys.n; i++)
			bytes += (int64_t)t->cur.keys.rows[i]->size;
		account(s, t, -(int64_t)t->cur.keys.n - (t->cur.trunc ? 1 : 0),
			-bytes - (t->cur.trunc ? (int64_t)t->cur.trunc->size : 0));
		keymap_clear(&t->cur.keys);
		free(t->cur.trunc);
		if (!(t->cur.trunc = held_make(m, NULL, 0, NULL, 0, NULL, 0)))
			goto oom;
		t->floor = m->version;
		account(s, t, 1, (int64_t)t->cur.trunc->size);
		moved_clear(s);
		return 0;
	}
	if (row_key(s, l, c->values, &s->key, err, errlen) < 0) {
		if (sl_buf_failed(&s->key))
			goto oom;
		char why[512];
		snprintf(why, sizeof why, "%s", err);
		rc = key_dead_letter(s, t, c, why, err, errlen);
		goto out;
	}
	if (sl_buf_failed(&s->key))
		goto oom;
	prev = keymap_find(&t->cur.keys, s->key.data, s->key.len);
	if (s->wvals_n < l->nsrc + 1) {
		struct sl_value *v = realloc(s->wvals, ((size_t)l->nsrc + 1) * sizeof *v);
		if (!v)
			goto oom;
		s->wvals = v;
		s->wvals_n = l->nsrc + 1;
	}
	vals = s->wvals;
	memcpy(vals, c->values, (size_t)l->nsrc * sizeof *vals);
	for (int i = 0; i < l->nsrc; i++)
		unchanged |= vals[i].kind == SL_V_UNCHANGED;

	if (c->op == SL_OP_DELETE || c->op == SL_OP_UPDATE_DELETE) {
		for (int i = 0; i < l->nsrc; i++)
			if (vals[i].kind == SL_V_UNCHANGED)
				vals[i].kind = SL_V_NULL;
		if (c->op == SL_OP_UPDATE_DELETE) {
			/* Keep the old key's row for the UPDATE-INSERT that follows. */
			moved_clear(s);
			s->moved.set = true;
			s->moved.tab = t;
			s->moved.pos = c->csn_pos;
			s->moved.seq = c->seq;
			s->moved.version = m->version;
			sl_buf_reset(&s->moved.key);
			sl_buf_append(&s->moved.key, s->key.data, s->key.len);
			if (prev >= 0) {
				if (!(s->moved.row = held_dup(t->cur.keys.rows[prev], l->nsrc)))
					goto oom;
			}
			if (sl_buf_failed(&s->moved.key))
				goto oom;
			moved_here = true;
		}
	} else if (unchanged) {
		/* Where the unchanged values come from: the old key's row after a
		 * key change, the key's row in the batch, or ClickHouse (the rows
		 * of the sources built in s->fsrc, read at send time). */
		bool after_move = s->moved.set && s->moved.tab == t && s->moved.pos == c->csn_pos &&
				  s->moved.seq + 1 == c->seq;
		sl_buf_reset(&s->fsrc);
		if (after_move) {
			if (s->moved.row && !s->moved.row->deleted)
				src = s->moved.row;
			else
				fsrc_put(&s->fsrc, 0, s->moved.version, s->moved.key.data, s->moved.key.len);
		} else if (prev >= 0 && !t->cur.keys.rows[prev]->deleted) {
			src = t->cur.keys.rows[prev];
		} else {
			fsrc_put(&s->fsrc, 0, FSRC_ANY, s->key.data, s->key.len);
		}
		if (src) {
			bool pending = false;
			const struct sl_value *sv = held_values(s, l, src, err, errlen);
			if (!sv)
				goto out;
			for (int i = 0; i < l->nsrc; i++) {
				if (vals[i].kind != SL_V_UNCHANGED)
					continue;
				vals[i] = sv[i];
				if (vals[i].kind == SL_V_UNCHANGED)
					pending = true;
				else
					atomic_fetch_add_explicit(&s->w_filled, 1, memory_order_relaxed);
			}
			if (pending && src->fill)
				fsrc_inherit(s, src, after_move ? s->moved.version : m->version + 1, after_move);
		}
		if (after_move && s->fsrc.len)
			fsrc_put(&s->fsrc, m->version, m->version + 1, s->key.data, s->key.len);
		if (sl_buf_failed(&s->fsrc))
			goto oom;
		if (s->fsrc.len) {
			fill = s->fsrc.data;
			filllen = s->fsrc.len;
		}
	}
	if (fill) {
		h = held_make(m, vals, l->nsrc, s->key.data, s->key.len, fill, filllen);
	} else {
		sl_buf_reset(&s->row);
		if (put_row(s, &s->row, l, m, vals, false, err, errlen) < 0) {
			if (sl_buf_failed(&s->row))
				goto oom;
			goto out;      /* a value the column cannot take: err says which */
		}
		h = held_encoded(s->key.data, s->key.len, s->row.data, s->row.len, op_deletes(c->op));
	}
	if (!h)
		goto oom;
	if (prev >= 0) {
		struct held *o = t->cur.keys.rows[prev];
		account(s, t, 0, (int64_t)h->size - (int64_t)o->size);
		t->cur.keys.rows[prev] = h;
		free(o);
	} else {
		if (keymap_add(&t->cur.keys, h) < 0)
			goto oom;
		account(s, t, 1, (int64_t)h->size);
	}
	h = NULL;
	rc = 0;
	goto out;
oom:
	snprintf(err, errlen, "clickhouse: table \"%s\": out of memory", t->object);
out:
	if (!moved_here)
		moved_clear(s);
	free(h);
	return rc;
}

/* ------------------------------------------------------------------ */
/* the batch in flight                                                  */

/* Sends the batch in flight (the sender thread). */
static int send_flight(struct chsink *s, char *err, size_t errlen)
{
	struct chtab *t;
	int64_t t0 = sl_mono_ms();
	bool any = s->fly.tabs != NULL;

	while ((t = s->fly.tabs) != NULL) {
		int rc = send_table(s, t, &t->fly, false, err, errlen);
		if (rc < 0)
			return rc;
		part_clear(&t->fly);
		s->fly.tabs = t->fnext;
		t->fnext = NULL;
	}
	return batch_sent(s, any, t0, err, errlen);
}

static void *sender_main(void *arg)
{
	struct chsink *s = arg;
	char err[SL_ERRLEN * 2];

	sl_thread_name("sl-ch-send");
	sl_log_set_stream(s->stream);
	pthread_mutex_lock(&s->fly.mu);
	for (;;) {
		int rc;
		while (s->fly.state != FLY_RUNNING && !s->fly.stop)
			pthread_cond_wait(&s->fly.cv, &s->fly.mu);
		if (s->fly.stop)
			break;
		pthread_mutex_unlock(&s->fly.mu);
		err[0] = '\0';
		rc = send_flight(s, err, sizeof err);
		pthread_mutex_lock(&s->fly.mu);
		s->fly.rc = rc;
		snprintf(s->fly.err, sizeof s->fly.err, "%s", err);
		s->fly.state = FLY_DONE;
		pthread_cond_broadcast(&s->fly.cv);
	}
	pthread_mutex_unlock(&s->fly.mu);
	return NULL;
}

/* Waits until no batch is in flight; its status (-1, SL_EPREREQ) with its
 * error when it failed (the result stays for flush_wait()). */
static int wait_flight(struct chsink *s, char *err, size_t errlen)
{
	int rc = 0;

	if (!s->fly.started)
		return 0;
	pthread_mutex_lock(&s->fly.mu);
	while (s->fly.state == FLY_RUNNING)
		pthread_cond_wait(&s->fly.cv, &s->fly.mu);
	if (s->fly.state == FLY_DONE && s->fly.rc < 0) {
		snprintf(err, errlen, "%s", s->fly.err);
		rc = s->fly.rc;
	}
	pthread_mutex_unlock(&s->fly.mu);
	return rc;
}

static int ch_flush_start(void *ctx, char *err, size_t errlen)
{
	struct chsink *s = ctx;
	struct chtab *t;

	if (s->mark_oom) {
		snprintf(err, errlen, "clickhouse: out of memory recording a version map step");
		return -1;
	}
	if (!s->fly.started) {
		int e = pthread_create(&s->fly.thread, NULL, sender_main, s);
		if (e != 0) {
			snprintf(err, errlen, "clickhouse: could not start the sender thread: %s", sl_strerror(e));
			return -1;
		}
		s->fly.started = true;
	}
	pthread_mutex_lock(&s->fly.mu);
	if (s->fly.state != FLY_IDLE) {
		pthread_mutex_unlock(&s->fly.mu);
		snprintf(err, errlen, "clickhouse: a flush started while another was in flight");
		return -1;
	}
	/* The batch leaves: each table's rows move to its part in flight. */
	while ((t = s->pending) != NULL) {
		struct part tmp = t->fly;
		t->fly = t->cur;
		t->cur = tmp;
		account(s, t, -(int64_t)t->pend_rows, -(int64_t)t->pend_bytes);
		s->pending = t->pnext;
		t->pnext = NULL;
		t->on_list = false;
		t->fnext = s->fly.tabs;
		s->fly.tabs = t;
	}
	s->first_ms = 0;
	s->fly.has_mark = s->has_mark;
	s->fly.mark = s->mark;
	s->fly.state = FLY_RUNNING;
	pthread_cond_broadcast(&s->fly.cv);
	pthread_mutex_unlock(&s->fly.mu);
	return 0;
}

static int ch_flush_wait(void *ctx, struct sl_position *durable, char *err, size_t errlen)
{
	struct chsink *s = ctx;
	int rc;

	if (!s->fly.started)
		return 0;
	pthread_mutex_lock(&s->fly.mu);
	while (s->fly.state == FLY_RUNNING)
		pthread_cond_wait(&s->fly.cv, &s->fly.mu);
	if (s->fly.state == FLY_IDLE) {
		pthread_mutex_unlock(&s->fly.mu);
		return 0;
	}
	s->fly.state = FLY_IDLE;
	rc = s->fly.rc;
	if (rc < 0)
		snprintf(err, errlen, "%s", s->fly.err);
	pthread_mutex_unlock(&s->fly.mu);
	if (rc < 0)
		return rc;
	if (!s->fly.has_mark)
		return 0;
	*durable = s->fly.mark;
	return 1;
}

/* Queues a step of t's version map, to be recorded before t's rows of the
 * batch; it counts as a row, so that the batch is sent before the
 * checkpoint passes its transaction. */
static int queue_step(struct chsink *s, struct chtab *t, const struct ch_vstep *st)
{
	if (sl_buf_append(&t->cur.vsteps, st, sizeof *st) < 0)
		return -1;
	account(s, t, 1, (int64_t)sizeof *st);
	sl_debug("clickhouse: table \"%s\": versions after position %016" PRIX64 " move up by %" PRIu64, t->object,
		 st->pos, st->shift);
	return 0;
}

static int ch_write(void *ctx, const struct sl_change *c, char *err, size_t errlen)
{
	struct chsink *s = ctx;
	const struct sl_table *tv = c->table;
	struct chtab *t = tab_get(s, tv->object);
	struct ch_rowmeta m;
	int rc;

	if (!t) {
		snprintf(err, errlen, "clickhouse: table \"%s\": out of memory", tv->object);
		return -1;
	}
	/* A replay of changes older than a TRUNCATE written (a re-backfill's
	 * marker) may bring an older version of the table, which ClickHouse's
	 * table, made anew after it, does not fit: they are skipped before it
	 * is compared (the floor is read when it does not fit). */
	if (t->lay && strcmp(t->lay->schema_key, tv->schema_key) != 0 && below_floor(s, t, c))
		return skip_old(s, t, c);
	/* A TRUNCATE (a re-backfill's marker too) or a backfill row may make a
	 * table anew that sluice wrote before: what follows fills it. */
	rc = prepare_version(s, t, tv, c->csn, c->op == SL_OP_TRUNCATE || c->seq == 0, err, errlen);
	if (rc == SL_EPREREQ && below_floor(s, t, c))
		return skip_old(s, t, c);
	if (rc < 0)
		return rc;
	if (!t->exists) {
		moved_clear(s);
		return 0;  /* a marker for a table ClickHouse never had */
	}
	if (c->op != SL_OP_TRUNCATE && (!c->values || tv->ncols != t->lay->nsrc)) {
		snprintf(err, errlen, "clickhouse: table \"%s\": a %s change without its values", tv->object,
			 sl_op_name(c->op));
		return -1;
	}
	if (s->merge) {
		/* a long transaction moves the versions of later positions up */
		struct ch_vstep st;
		int r = ch_vmap_note(&t->vmap, c->csn_pos, c->seq, &st);
		if (r < 0 || (r > 0 && queue_step(s, t, &st) < 0)) {
			snprintf(err, errlen, "clickhouse: table \"%s\": out of memory", tv->object);
			return -1;
		}
		if (ch_vmap_pending(&t->vmap) && !t->vlisted) {
			t->vlisted = true;
			t->vnext = s->vlong;
			s->vlong = t;
		}
	}
	if (ch_rowmeta_of_change(&m, c, s->merge ? &t->vmap : NULL, s->metabuf, err, errlen) < 0)
		return -1;
	rc = s->merge ? write_merge(s, t, c, &m, err, errlen) : write_append(s, t, c, &m, err, errlen);
	if (rc < 0)
		return rc;
	s->stats.rows++;
	/* A transaction far beyond the batch's limits: send it in parts (never
	 * between an UPDATE-DELETE and its UPDATE-INSERT).  The limits
	 * themselves make a flush due at the next transaction end (the agent
	 * then sends while the writer goes on); a spill is sent here, with the
	 * writer waiting, so it waits for twice the limits (for rows, at most
	 * 1,000,000 unless batch_rows is more: one insert stays one block). */
	if (!s->moved.set && (s->pend_rows >= s->spill_rows || s->pend_bytes >= s->spill_bytes)) {
		s->stats.spills++;
		if ((rc = wait_flight(s, err, errlen)) < 0)
			return rc;
		return send_all(s, err, errlen);
	}
	return 0;
}

static void ch_mark(void *ctx, const struct sl_position *pos)
{
	struct chsink *s = ctx;
	struct chtab *t;

	/* a transaction ended: the steps of its long positions */
	while ((t = s->vlong) != NULL) {
		struct ch_vstep st;
		s->vlong = t->vnext;
		t->vnext = NULL;
		t->vlisted = false;
		int r = ch_vmap_close(&t->vmap, &st);
		if (r < 0 || (r > 0 && queue_step(s, t, &st) < 0))
			s->mark_oom = true;
	}
	s->mark = *pos;
	s->has_mark = true;
}

static bool ch_flush_due(void *ctx, int64_t now_ms)
{
	struct chsink *s = ctx;

	if (s->pend_rows == 0)
		return false;
	return s->pend_rows >= s->conf->batch_rows || s->pend_bytes >= s->conf->batch_bytes ||
	       now_ms - s->first_ms >= (int64_t)s->conf->batch_ms;
}

static bool ch_pending(void *ctx)
{
	return ((struct chsink *)ctx)->pend_rows > 0;
}

static int ch_flush(void *ctx, struct sl_position *durable, char *err, size_t errlen)
{
	struct chsink *s = ctx;
	int rc;

	if (s->mark_oom) {
		snprintf(err, errlen, "clickhouse: out of memory recording a version map step");
		return -1;
	}
	if ((rc = wait_flight(s, err, errlen)) < 0)
		return rc;
	if (s->fly.started) {
		pthread_mutex_lock(&s->fly.mu);
		s->fly.state = FLY_IDLE;   /* this flush's mark covers the batch that was in flight */
		pthread_mutex_unlock(&s->fly.mu);
	}
	if ((rc = send_all(s, err, errlen)) < 0)
		return rc;
	if (!s->has_mark)
		return 0;
	*durable = s->mark;
	return 1;
}

/* sl_sink_ops.version: ClickHouse's table fits version tv now, as for its
 * first change (prepare_version).  A version the table cannot take (a
 * change of type it refuses) is left to the change that brings it, which
 * reports it with its position. */
static int ch_sink_version(void *ctx, const struct sl_table *tv, char *err, size_t errlen)
{
	struct chsink *s = ctx;
	struct chtab *t = tab_get(s, tv->object);
	int rc;

	if (!t) {
		snprintf(err, errlen, "clickhouse: table \"%s\": out of memory", tv->object);
		return -1;
	}
	rc = prepare_version(s, t, tv, NULL, false, err, errlen);
	if (rc == SL_EPREREQ) {
		sl_debug("clickhouse: table \"%s\": new version %s left to its next change: %s", tv->object,
			 tv->schema_key, err);
		return 0;
	}
	return rc < 0 ? rc : 0;
}

static int ch_discard_backfill(void *ctx, const struct sl_table *tv, const char *csn_first, const char *csn_last,
			       char *err, size_t errlen)
{
	struct chsink *s = ctx;
	struct chtab *t;
	bool exists, view;
	char what[300];
	int64_t deadline;
	int rc;

	if (s->merge)
		return 0;  /* the redo writes every row again: newer versions win */
	if ((rc = wait_flight(s, err, errlen)) < 0)
		return rc;
	t = tab_find(s, tv->object);
	if (t && t->pend_rows > 0 && (rc = send_table(s, t, &t->cur, true, err, errlen)) < 0)
		return rc;
	if (!t && !(t = tab_get(s, tv->object))) {
		snprintf(err, errlen, "clickhouse: table \"%s\": out of memory", tv->object);
		return -1;
	}
	if ((rc = ensure_database(s, err, errlen)) < 0 || (rc = check_engines(s, t, &exists, &view, err, errlen)) < 0)
		return rc;
	if (!exists)
		return 0;
	sl_buf_reset(&s->sql);
	ch_sql_delete_csn_range(&s->sql, &s->ddl, s->conf->database, tv->object, csn_first, csn_last);
	snprintf(what, sizeof what, "deleting an interrupted backfill from \"%s\".\"%s\"", s->conf->database,
		 tv->object);
	if ((rc = run_sql(s, what, err, errlen)) < 0)
		return rc;
	deadline = sl_mono_ms() + MUTATION_WAIT_MS;
	for (;;) {
		struct ch_rb_reader r;
		uint64_t left = 0;
		struct timespec ts = { 0, 100 * 1000000L };
		sl_buf_reset(&s->sql);
		ch_sql_mutations_left(&s->sql, &s->ddl, s->conf->database, tv->object);
		if ((rc = run_sql(s, "waiting for a mutation", err, errlen)) < 0)
			return rc;
		r.p = (const unsigned char *)s->resp.body.data;
		r.end = r.p + s->resp.body.len;
		if (ch_rb_get_u64(&r, &left) < 0 || left == 0)
			break;
		if (sl_mono_ms() > deadline) {
			sl_warn("clickhouse: %s: the DELETE is still running after %d s; going on (the rows it removes "
				"are older than any the backfill writes)", what, MUTATION_WAIT_MS / 1000);
			break;
		}
		nanosleep(&ts, NULL);
	}
	sl_info("clickhouse: removed the rows of an interrupted backfill (%s to %s) from \"%s\".\"%s\"", csn_first,
		csn_last, s->conf->database, tv->object);
	return 0;
}

static void ch_close(void *ctx)
{
	struct chsink *s = ctx;

	if (!s)
		return;
	if (s->fly.started) {
		/* A batch in flight is sent to its end (its rows are not
		 * checkpointed: they come again, which both modes absorb). */
		pthread_mutex_lock(&s->fly.mu);
		s->fly.stop = true;
		while (s->fly.state == FLY_RUNNING)
			pthread_cond_wait(&s->fly.cv, &s->fly.mu);
		pthread_cond_broadcast(&s->fly.cv);
		pthread_mutex_unlock(&s->fly.mu);
		pthread_join(s->fly.thread, NULL);
	}
	pthread_mutex_destroy(&s->fly.mu);
	pthread_cond_destroy(&s->fly.cv);
	for (size_t i = 0; i < s->tabs.nb; i++) {
		struct sl_strmap_node *e, *next;
		for (e = s->tabs.b[i]; e; e = next) {
			next = e->next;
			tab_free((struct chtab *)e);
		}
	}
	sl_strmap_free(&s->tabs);
	moved_clear(s);
	sl_buf_free(&s->moved.key);
	sl_buf_free(&s->fsrc);
	ch_http_free(s->http);
	ch_resp_free(&s->resp);
	sl_buf_free(&s->sql);
	sl_buf_free(&s->sql2);
	sl_buf_free(&s->key);
	sl_buf_free(&s->key2);
	sl_buf_free(&s->row);
	free(s->srcvals);
	free(s->wvals);
	free(s->scratch);
	sl_buf_free(&s->lkeys);
	sl_buf_free(&s->dl);
	rowbuf_free(&s->enc);
	free(s->stream);
	free(s->config_path);
	free(s->dl_path);
	free(s);
}

static int ch_open(void **ctx, const void *conf, const struct sl_sink_stream *st, char *err, size_t errlen)
{
	const struct sl_ch_conf *c = conf;
	struct ch_http_conf hc;
	struct chsink *s;

	*ctx = NULL;
	if (!c->url || !c->database || !c->batch_rows || !c->batch_bytes) {
		snprintf(err, errlen, "destination \"%s\": url, database or a batch limit is not set",
			 st->destination ? st->destination : "");
		return -1;
	}
	s = calloc(1, sizeof *s);
	if (!s)
		goto oom;
	s->conf = c;
	s->ddl.cluster = c->cluster;
	s->ddl.replica_path = c->replica_path;
	s->ddl.distributed = c->cluster && c->distributed;
	/* rows go to a Distributed table: an insert returns once they are on
	 * their shards (CH_PARAMS_DIST_INSERT) */
	s->ins_params = s->ddl.distributed ? CH_PARAMS_DIST_INSERT : NULL;
	s->sql_ins_params = s->ddl.distributed ? CH_PARAMS_READ "&" CH_PARAMS_DIST_INSERT : CH_PARAMS_READ;
	s->merge = st->mode == SL_WRITE_MERGE;
	s->kill_after_create = getenv("SLUICE_FAULT_CH_KILL_AFTER_CREATE") != NULL;
	s->spill_rows = 2 * (uint64_t)c->batch_rows < 1000000 ? 2 * (uint64_t)c->batch_rows : 1000000;
	if (s->spill_rows < c->batch_rows)
		s->spill_rows = c->batch_rows;
	s->spill_bytes = 2 * (uint64_t)c->batch_bytes;
	ch_resp_init(&s->resp);
	sl_buf_init(&s->sql, 0);
	sl_buf_init(&s->sql2, 0);
	sl_buf_init(&s->key, 0);
	sl_buf_init(&s->key2, 0);
	sl_buf_init(&s->row, 0);
	sl_buf_init(&s->lkeys, 0);
	pthread_mutex_init(&s->fly.mu, NULL);
	pthread_cond_init(&s->fly.cv, NULL);
	sl_buf_init(&s->dl, 0);
	sl_buf_init(&s->moved.key, 0);
	sl_buf_init(&s->fsrc, 0);
	rowbuf_init(&s->enc);
	s->stream = strdup(st->name ? st->name : "");
	if (st->config_path && !(s->config_path = realpath(st->config_path, NULL)))
		s->config_path = strdup(st->config_path);
	s->dl_path = c->dead_letter_path ? strdup(c->dead_letter_path) :
					   ch_default_dl_path(c->database, s->stream ? s->stream : "");
	if (sl_strmap_init(&s->tabs, 16) < 0 || !s->stream || !s->dl_path)
		goto oom;
	ch_http_conf_of(c, &hc, (int64_t)c->retry_seconds * 1000);
	hc.outage = st->outage;
	if (ch_http_new(&s->http, &hc, err, errlen) < 0)
		goto fail;
	*ctx = s;
	return 0;
oom:
	snprintf(err, errlen, "clickhouse sink: out of memory");
fail:
	ch_close(s);
	return -1;
}

void sl_clickhouse_get_stats(void *ctx, struct sl_ch_stats *out)
{
	struct chsink *s = ctx;
	struct ch_http_stats hs;

	*out = s->stats;
	out->unchanged_filled += atomic_load(&s->w_filled);
	out->dead_letters += atomic_load(&s->w_dead);
	out->date_clamps = atomic_load(&s->w_clamps);
	ch_http_get_stats(s->http, &hs);
	out->requests = hs.requests;
	out->retries = hs.retries;
	out->bytes_sent = hs.bytes_sent;
	out->bytes_raw = hs.bytes_raw;
}

static uint64_t ch_dead_letters(void *ctx)
{
	struct chsink *s = ctx;

	return s->stats.dead_letters + atomic_load(&s->w_dead);
}

static uint64_t ch_date_clamps(void *ctx)
{
	struct chsink *s = ctx;

	return atomic_load(&s->w_clamps);
}

/* sl_sink_ops.carries_missing: the column's DEFAULT (ch_sql_default) in
 * the layouts its tables may have (both with layout = auto). */
static bool ch_carries_missing(const void *conf, const struct sl_column *c)
{
	const struct sl_ch_conf *cf = conf;
	struct sl_buf b;
	bool ok = true;

	sl_buf_init(&b, 0);
	for (int fl = CH_LEGACY; fl <= CH_MODERN && ok; fl++) {
		struct ch_type t;
		if ((fl == CH_LEGACY && cf->layout == SL_CH_LAYOUT_MODERN) ||
		    (fl == CH_MODERN && cf->layout == SL_CH_LAYOUT_LEGACY))
			continue;
		ok = ch_type_of_column(&t, c, true, (enum ch_flavor)fl) == 0 && ch_sql_default(&b, &t, &c->missing) == 0;
	}
	sl_buf_free(&b);
	return ok;
}

const struct sl_sink_ops sl_clickhouse_ops = {
	.type = "clickhouse",
	.caps = SL_SINK_CAP_MERGE,
	.keys = ch_conf_keys,
	.nkeys = CH_CONF_NKEYS,
	.conf_size = sizeof(struct sl_ch_conf),
	.conf_check = ch_conf_check,
	.check = ch_check,
	.open = ch_open,
	.write = ch_write,
	.version = ch_sink_version,
	.mark = ch_mark,
	.flush_due = ch_flush_due,
	.pending = ch_pending,
	.flush = ch_flush,
	.flush_start = ch_flush_start,
	.flush_wait = ch_flush_wait,
	.discard_backfill = ch_discard_backfill,
	.dead_letters = ch_dead_letters,
	.date_clamps = ch_date_clamps,
	.carries_missing = ch_carries_missing,
	.close = ch_close,
};
