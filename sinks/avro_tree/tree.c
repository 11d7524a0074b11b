/*
 * sinks/avro_tree/tree.c: the Avro file tree (see tree.h for the layout and
 * the durability rules, store.h for the storage).
 *
 * State: one struct obj per object (table) seen, found through a small hash
 * table, holding the encoder of its current table version and its open file.
 * Open files are also on a list in opening order, so the oldest one (for
 * flush_due) is at its head.  Finished files wait on the `done` list, stable
 * in the store, until flush() publishes them.  Memory is bounded by the
 * number of tables: per open file one block buffer, and a few strings per
 * finished file; the compressor and its output buffer, or the compression
 * threads and their few blocks in flight, are shared by all files (struct
 * sl_ocf_codec), and the bytes themselves are the store's.  Closing a file
 * (sl_ocf_close) waits for its blocks in flight, so a finished file is
 * complete before the store makes it stable.
 */
#include "sinks/avro_tree/tree.h"

#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "common/buf.h"
#include "common/log.h"
#include "common/strmap.h"
#include "common/util.h"
#include "sinks/avro/avro_enc.h"
#include "sinks/avro/avro_schema.h"
#include "sinks/avro_tree/manifest.h"
#include "sinks/avro_tree/merge.h"
#include "sinks/avro_tree/mirror.h"

struct sl_tree;

struct obj {
	struct sl_strmap_node node;    /* first: a node of the tree's map is an obj; node.key is object */
	struct sl_tree *tree;
	char *object;
	struct sl_avro_enc *enc;       /* current table version, NULL until first use */
	struct sl_ocf_writer *w;       /* open container, or NULL */
	struct sl_store_file *f;       /* where w's bytes go */
	uint64_t bytes;                /* bytes handed to f */
	char *dir;                     /* folder key of the open file */
	char first_csn[SL_CSN_LEN + 1];
	char last_csn[SL_CSN_LEN + 1];
	int64_t opened_ms;
	char schema_written[17];       /* schema key of the schema file written in this run, "" none */
	char schema_staged[17];        /* schema key of the one staged, durable at the flush's sync */
	bool touched;                  /* a file of it was published by the flush under way */
	/* merge mode */
	struct sl_mbatch batch;        /* the batch's last change of each key */
	struct sl_mbatch prior;        /* the rows of earlier versions' batches of this flush (batch.prior) */
	struct sl_table *mtab;         /* a copy of the table version enc was made for */
	struct sl_mschema cur;         /* enc's schema, parsed: the types unchanged values must have */
	uint64_t since_compact;        /* files published since the last compaction */
	struct obj *oprev, *onext;     /* open-file list, oldest first */
};

/* A finished file: complete and stable in the store, waiting for flush(). */
struct done_file {
	struct sl_store_file *f;
	char *key;                     /* the key it is to be published under */
	char *dir;
	char *object;
	char schema_key[17];
	char first_csn[SL_CSN_LEN + 1];
	char last_csn[SL_CSN_LEN + 1];
	uint64_t records, bytes;
	struct done_file *next;
};

struct sl_tree {
	struct sl_store store;
	struct sl_outage *outage;      /* conf->outage (borrowed), or NULL */
	char *stream;
	struct sl_ocf_codec *codec;    /* shared by every open file */
	uint64_t max_file_bytes;
	int64_t max_file_ms;
	struct sl_strmap objs;         /* objects by name */
	struct obj *last;              /* the object of the previous write */
	struct obj *open_head, *open_tail;   /* objects with an open file, oldest opened first */
	int nopen, max_open;           /* their number, and its bound (open_bound) */
	struct done_file *done, **done_tail;
	bool pending;
	bool version_due;              /* a version without changes waits for its schema file */
	bool has_mark;                 /* mark(): everything written is at or before mark */
	struct sl_position mark;
	const struct sl_source_desc *desc;  /* of the changes written: encodes positions */
	/* The manifest chain: the newest manifest written (seq 0: none yet). */
	uint64_t seq;
	char *last_key;
	struct sl_manifest_pos last_to;
	struct sl_avro_stats stats;
	/* merge mode */
	bool merge;
	uint64_t compact_after;
	char *state_dir;
	int64_t batch_ms;              /* when the oldest held change came, 0: none held */
	uint64_t unchanged_missing;    /* rows whose unchanged values nothing could fill */
	uint64_t dead_letters;         /* changes that could not be rows (merge_dead_letter) */
};

static uint32_t rand32(void)
{
	uint32_t r;

	if (getrandom(&r, sizeof r, 0) != (ssize_t)sizeof r) {
		struct timespec ts;
		clock_gettime(CLOCK_MONOTONIC, &ts);
		r = (uint32_t)ts.tv_nsec * 2654435761u ^ (uint32_t)getpid();
	}
	return r;
}

/* Finds the state of object name, or NULL. */
static struct obj *obj_find(const struct sl_tree *t, const char *name)
{
	return (struct obj *)sl_strmap_find(&t->objs, name);
}

/* Finds the state of object name, creating it if needed; NULL if out of memory. */
static struct obj *obj_get(struct sl_tree *t, const char *name)
{
	struct obj *o;

	if (t->last && !strcmp(t->last->object, name))
		return t->last;
	if ((o = obj_find(t, name)))
		return t->last = o;
	o = calloc(1, sizeof *o);
	if (!o || !(o->object = strdup(name))) {
		free(o);
		return NULL;
	}
	o->node.key = o->object;
	if (sl_strmap_add(&t->objs, &o->node) < 0) {
		free(o->object);
		free(o);
		return NULL;
	}
	o->tree = t;
	return t->last = o;
}

static void open_list_add(struct sl_tree *t, struct obj *o)
{
	o->onext = NULL;
	o->oprev = t->open_tail;
	if (t->open_tail)
		t->open_tail->onext = o;
	else
		t->open_head = o;
	t->open_tail = o;
	t->nopen++;
}

static void open_list_del(struct sl_tree *t, struct obj *o)
{
	if (o->oprev)
		o->oprev->onext = o->onext;
	else
		t->open_head = o->onext;
	if (o->onext)
		o->onext->oprev = o->oprev;
	else
		t->open_tail = o->oprev;
	o->oprev = o->onext = NULL;
	t->nopen--;
}

/* How many files one stream keeps open at once: half of what the process
 * may open (RLIMIT_NOFILE, which the agent raises to its hard limit at
 * start), less some for sockets, logs and the state directory.  A
 * transaction over more tables finishes the file opened first, early. */
static int open_bound(void)
{
	return (int)sl_fd_share(2, 16, INT_MAX);
}

/* The container writer's output: counts the bytes and hands them to the store. */
static int obj_out(void *arg, const struct iovec *iov, int iovcnt, char *err, size_t errlen)
{
	struct obj *o = arg;

	for (int i = 0; i < iovcnt; i++)
		o->bytes += iov[i].iov_len;
	return o->tree->store.ops->file_write(o->f, iov, iovcnt, err, errlen);
}

/* Opens a new file for o, whose first record is c. */
static int open_file(struct sl_tree *t, struct obj *o, const struct sl_change *c, char *err, size_t errlen)
{
	struct sl_buf p;
	struct tm tm;
	time_t secs;
	int64_t ts = c->source_ts_us;
	const char *schema;
	size_t schema_len;
	struct sl_ocf_out out = { obj_out, o };
	int rc;

	/* Floor division, so that times before 1970 land in the right second. */
	secs = (time_t)(ts >= 0 ? ts / 1000000 : -((-ts + 999999) / 1000000));
	if (!gmtime_r(&secs, &tm)) {
		snprintf(err, errlen, "table \"%s\": source time %lld is out of range", o->object,
			 (long long)ts);
		return -1;
	}
	sl_buf_init(&p, 0);
	sl_buf_printf(&p, "%s/%s/%04d/%02d/%02d/%02d/%02d", t->stream, o->object, tm.tm_year + 1900,
		      tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min);
	free(o->dir);
	o->dir = sl_buf_detach(&p);
	if (!o->dir) {
		snprintf(err, errlen, "table \"%s\": out of memory", o->object);
		return -1;
	}
	if ((rc = t->store.ops->file_new(t->store.ctx, o->dir, c->csn, &o->f, err, errlen)) < 0) {
		o->f = NULL;
		return rc;
	}
	o->bytes = 0;
	schema = sl_avro_enc_schema(o->enc, &schema_len);
	sl_buf_init(&p, 0);
	sl_buf_printf(&p, "%s/%s", o->dir, c->csn);
	if (sl_buf_failed(&p) ||
	    sl_ocf_open_out(&o->w, &out, p.data, schema, schema_len, t->codec, 0, err, errlen) < 0) {
		if (sl_buf_failed(&p))
			snprintf(err, errlen, "table \"%s\": out of memory", o->object);
		sl_buf_free(&p);
		t->store.ops->file_discard(t->store.ctx, o->f);
		o->f = NULL;
		o->w = NULL;
		return -1;
	}
	sl_buf_free(&p);
	memcpy(o->first_csn, c->csn, sizeof o->first_csn);
	memcpy(o->last_csn, c->csn, sizeof o->last_csn);
	o->opened_ms = sl_mono_ms();
	open_list_add(t, o);
	return 0;
}

static void free_done(struct done_file *d)
{
	free(d->key);
	free(d->dir);
	free(d->object);
	free(d);
}

/* "<dir>/<first>_<last>_<8 hex>.avro" into a fresh string, or NULL. */
static char *data_key(const char *dir, const char *first, const char *last)
{
	struct sl_buf k;

	sl_buf_init(&k, 0);
	sl_buf_printf(&k, "%s/%s_%s_%08x.avro", dir, first, last, rand32());
	return sl_buf_detach(&k);
}

/* Finishes o's open file: last block, then the store makes it stable; the
 * file then waits on the done list for flush() to publish it.  On failure
 * the file is discarded. */
static int finish_file(struct sl_tree *t, struct obj *o, char *err, size_t errlen)
{
	struct done_file *d = calloc(1, sizeof *d);
	uint64_t records = sl_ocf_count(o->w);
	int rc;

	open_list_del(t, o);
	rc = sl_ocf_close(o->w, true, err, errlen);
	o->w = NULL;
	if (rc == 0 && (!d || !(d->dir = strdup(o->dir)) || !(d->object = strdup(o->object)) ||
			!(d->key = data_key(o->dir, o->first_csn, o->last_csn)))) {
		snprintf(err, errlen, "table \"%s\": out of memory", o->object);
		rc = -1;
	}
	if (rc == 0)
		rc = t->store.ops->file_finish(t->store.ctx, o->f, d->key, err, errlen);
	if (rc < 0) {
		t->store.ops->file_discard(t->store.ctx, o->f);
		o->f = NULL;
		if (d)
			free_done(d);
		return rc;
	}
	d->f = o->f;
	o->f = NULL;
	d->records = records;
	d->bytes = o->bytes;
	snprintf(d->schema_key, sizeof d->schema_key, "%s", sl_avro_enc_schema_key(o->enc));
	memcpy(d->first_csn, o->first_csn, sizeof d->first_csn);
	memcpy(d->last_csn, o->last_csn, sizeof d->last_csn);
	*t->done_tail = d;
	t->done_tail = &d->next;
	return 0;
}

/* Drops o's open file, leaving nothing behind. */
static void drop_open_file(struct sl_tree *t, struct obj *o)
{
	open_list_del(t, o);
	sl_ocf_abort(o->w);
	o->w = NULL;
	t->store.ops->file_discard(t->store.ctx, o->f);
	o->f = NULL;
}

/* Publishes a finished file under its key, or, when that is taken, under
 * another "<dir>/<first>_<last>_<8 hex>.avro": never over an existing file.
 * *key receives the key (malloc'd).  Returns 0, or a negative status with a
 * message in err. */
static int publish(struct sl_tree *t, struct done_file *d, char **key, char *err, size_t errlen)
{
	for (int attempt = 0; attempt < 8; attempt++) {
		int rc;

		if (attempt > 0) {
			free(d->key);
			if (!(d->key = data_key(d->dir, d->first_csn, d->last_csn))) {
				snprintf(err, errlen, "table \"%s\": out of memory", d->object);
				return -1;
			}
		}
		rc = t->store.ops->file_publish(t->store.ctx, d->f, d->key, err, errlen);
		if (rc == SL_STORE_EXISTS)
			continue;
		if (rc < 0)
			return rc;
		d->f = NULL;
		*key = d->key;
		d->key = NULL;
		return 0;
	}
	snprintf(err, errlen, "could not find a free file name in %s", d->dir);
	return -1;
}

/* ---------------------------------------------------------------------- */
/* Manifests                                                              */

/* Writes manifest m (its sequence, previous and from are set here from the
 * chain) and the pointer to it; the chain then ends at m.  Returns 0, or a
 * negative status with a message in err. */
static int write_manifest(struct sl_tree *t, struct sl_manifest *m, char *err, size_t errlen)
{
	struct sl_buf key, body;
	char *prev = NULL;
	int rc = -1;

	sl_buf_init(&key, 0);
	sl_buf_init(&body, 0);
	m->sequence = t->seq + 1;
	m->written_at_us = sl_now_us();
	if (t->last_key && !(prev = strdup(t->last_key)))
		goto oom;
	free(m->previous);
	m->previous = prev;
	if (sl_manifest_set_pos(&m->from, t->last_to.pos, t->last_to.csn) < 0)
		goto oom;
	if (!m->stream && !(m->stream = strdup(t->stream)))
		goto oom;
	if (!m->source && t->desc && !(m->source = strdup(t->desc->kind)))
		goto oom;
	sl_manifest_key(&key, t->stream, m->sequence);
	if (sl_buf_failed(&key))
		goto oom;
	if (sl_manifest_encode(m, &body, err, errlen) < 0)
		goto out;
	if ((rc = t->store.ops->put(t->store.ctx, key.data, body.data, body.len, err, errlen)) < 0)
		goto out;
	/* The pointer to it: a restart finds the chain's end without a listing. */
	sl_buf_reset(&body);
	sl_buf_printf(&body, "{\"sequence\": %" PRIu64 "}\n", m->sequence);
	sl_buf_reset(&key);
	sl_buf_printf(&key, "%s/" SL_MANIFEST_DIR "/" SL_MANIFEST_LATEST, t->stream);
	if (sl_buf_failed(&key) || sl_buf_failed(&body))
		goto oom;
	if ((rc = t->store.ops->put(t->store.ctx, key.data, body.data, body.len, err, errlen)) < 0)
		goto out;
	free(t->last_key);
	t->last_key = NULL;
	sl_buf_reset(&key);
	sl_manifest_key(&key, t->stream, m->sequence);
	if (!(t->last_key = sl_buf_detach(&key)) ||
	    sl_manifest_set_pos(&t->last_to, m->to.pos, m->to.csn) < 0)
		goto oom;
	t->seq = m->sequence;
	sl_debug("stream \"%s\": manifest %" PRIu64 " lists %zu files", t->stream, m->sequence, m->nfiles);
	rc = 0;
	goto out;
oom:
	snprintf(err, errlen, "stream \"%s\": out of memory writing a manifest", t->stream);
	rc = -1;
out:
	sl_buf_free(&key);
	sl_buf_free(&body);
	return rc;
}

/* Reads manifest seq into m.  Returns 0, SL_STORE_NOT_FOUND, or an error. */
static int read_manifest(struct sl_tree *t, uint64_t seq, struct sl_manifest *m, char *err, size_t errlen)
{
	struct sl_buf key, body;
	char why[256];
	int rc;

	sl_buf_init(&key, 0);
	sl_buf_init(&body, 0);
	sl_manifest_key(&key, t->stream, seq);
	if (sl_buf_failed(&key)) {
		snprintf(err, errlen, "stream \"%s\": out of memory", t->stream);
		return -1;
	}
	rc = t->store.ops->get(t->store.ctx, key.data, &body, err, errlen);
	if (rc == 0 && sl_manifest_decode(m, body.data ? body.data : "", body.len, why, sizeof why) < 0) {
		snprintf(err, errlen, "manifest %s in %s cannot be read: %s; move it away to go on (sluice "
			 "verify then reports the gap)", key.data, t->store.ops->describe(t->store.ctx), why);
		rc = -1;
	}
	sl_buf_free(&key);
	sl_buf_free(&body);
	return rc;
}

struct max_seq {
	uint64_t seq;
};

static int note_manifest(void *arg, const char *key, uint64_t size, int64_t mtime_ms)
{
	struct max_seq *ms = arg;
	const char *base = strrchr(key, '/');
	uint64_t seq;

	(void)mtime_ms;
	(void)size;
	if (sl_manifest_name(base ? base + 1 : key, &seq) && seq > ms->seq)
		ms->seq = seq;
	return 0;
}

/* Finds the newest manifest: the pointer's, or the highest listed, and then
 * any written after it (the pointer lags one behind after a crash). */
static int load_chain(struct sl_tree *t, char *err, size_t errlen)
{
	struct sl_buf key, body;
	struct sl_manifest m;
	uint64_t seq = 0;
	bool from_list = false;
	int rc;

	sl_buf_init(&key, 0);
	sl_buf_init(&body, 0);
	sl_buf_printf(&key, "%s/" SL_MANIFEST_DIR "/" SL_MANIFEST_LATEST, t->stream);
	if (sl_buf_failed(&key)) {
		snprintf(err, errlen, "stream \"%s\": out of memory", t->stream);
		return -1;
	}
	rc = t->store.ops->get(t->store.ctx, key.data, &body, err, errlen);
	if (rc < 0)
		goto out;
	if (rc == 0) {
		json_t *j = json_loadb(body.data ? body.data : "", body.len, 0, NULL);
		json_t *v = json_object_get(j, "sequence");
		if (json_is_integer(v) && json_integer_value(v) > 0)
			seq = (uint64_t)json_integer_value(v);
		json_decref(j);
	}
list:
	if (seq == 0) {
		/* No pointer (or a stale one): the listing is the whole truth. */
		struct max_seq ms = { 0 };
		sl_buf_reset(&key);
		sl_buf_printf(&key, "%s/" SL_MANIFEST_DIR, t->stream);
		if ((rc = t->store.ops->list(t->store.ctx, key.data, note_manifest, &ms, err, errlen)) < 0)
			goto out;
		seq = ms.seq;
		from_list = true;
	}
	while (seq > 0) {
		memset(&m, 0, sizeof m);
		if ((rc = read_manifest(t, seq, &m, err, errlen)) < 0)
			goto out;
		if (rc == 0) {
			sl_buf_reset(&key);
			sl_manifest_key(&key, t->stream, seq);
			free(t->last_key);
			t->last_key = sl_buf_detach(&key);
			if (!t->last_key || sl_manifest_set_pos(&t->last_to, m.to.pos, m.to.csn) < 0) {
				sl_manifest_free(&m);
				snprintf(err, errlen, "stream \"%s\": out of memory", t->stream);
				rc = -1;
				goto out;
			}
			t->seq = seq;
		}
		sl_manifest_free(&m);
		if (rc == SL_STORE_NOT_FOUND && !from_list && t->seq == 0) {
			seq = 0;  /* the pointer names a manifest that is gone: list them */
			goto list;
		}
		/* The pointer may lag one behind a crash: look for a later one. */
		if (rc == SL_STORE_NOT_FOUND || from_list)
			break;
		seq++;
	}
	if (t->seq > 0)
		sl_debug("stream \"%s\": the newest manifest is %s", t->stream, t->last_key);
	rc = 0;
out:
	sl_buf_free(&key);
	sl_buf_free(&body);
	return rc < 0 ? rc : 0;
}

/* ---------------------------------------------------------------------- */
/* Merge mode                                                             */

/* True if row r's unchanged values moved between keys in the batch: it
 * takes them from another key's row (an UPDATE-INSERT after a key change),
 * or passed through other keys on its way back to its own (A to B, then B
 * to A: its fill key is its own, whose writing from the move back on, or
 * B's while B held the row, has them in a replay). */
static bool moved(const struct sl_mrow *r)
{
	return r->fill && (r->hopslen || r->filllen != r->keylen || memcmp(r->fill, r->key, r->keylen) != 0);
}

/* True if row r still has unchanged values to fill from the mirror. */
static bool needs_fill(const struct sl_mrow *r)
{
	if (!r->fill || !r->vals)
		return false;
	for (int i = 0; i < r->ncols; i++)
		if (r->vals[i].kind == SL_V_UNCHANGED)
			return true;
	return false;
}

/* Hop i of r's hops (merge.h) from offset *at: its key and CSN range;
 * false after the last. */
struct hop {
	const unsigned char *key;
	size_t keylen;
	char from[SL_CSN_LEN + 1], until[SL_CSN_LEN + 1];
};

static bool next_hop(const struct sl_mrow *r, size_t *at, struct hop *h)
{
	uint32_t kl;

	if (!r->hops || *at + sizeof kl > r->hopslen)
		return false;
	memcpy(&kl, r->hops + *at, sizeof kl);
	if (*at + sizeof kl + kl + 2 * SL_CSN_LEN > r->hopslen)
		return false;
	h->key = r->hops + *at + sizeof kl;
	h->keylen = kl;
	memcpy(h->from, h->key + kl, SL_CSN_LEN);
	h->from[SL_CSN_LEN] = '\0';
	memcpy(h->until, h->key + kl + SL_CSN_LEN, SL_CSN_LEN);
	h->until[SL_CSN_LEN] = '\0';
	*at += sizeof kl + kl + 2 * SL_CSN_LEN;
	return true;
}

/* The CSN of the key change that took moved row r off its fill key: the
 * start of its first hop, else its fill_csn (merge.h).  The fill key's
 * writings from then on are a tombstone or a new row of that key. */
static void moved_off(const struct sl_mrow *r, char out[SL_CSN_LEN + 1])
{
	struct hop h;
	size_t at = 0;

	memcpy(out, next_hop(r, &at, &h) ? h.from : r->fill_csn, SL_CSN_LEN + 1);
}

/* The keys a lookup wants: sorted, for bsearch, each once.  Each row that
 * needs a fill wants its fill key, a moved row with the bound moved_off()
 * (the earliest, when rows want one key with several); a moved row also
 * wants its own key and the keys it passed through, whose row of the same
 * CSN, if the mirror has one, is this very row as an earlier attempt wrote
 * it before a crash (see put_row). */
struct wkey {
	const unsigned char *p;
	size_t len;
	char below[SL_CSN_LEN + 1];    /* "": no bound */
};

struct want {
	struct wkey *keys;
	size_t n;
};

static int cmp_wkey(const void *a, const void *b)
{
	const struct wkey *x = a, *y = b;
	size_t n = x->len < y->len ? x->len : y->len;
	int c = memcmp(x->p, y->p, n);

	return c ? c : (x->len > y->len) - (x->len < y->len);
}

/* Folds the runs of one key in sorted keys[0..n) into their first, with
 * the earliest bound of the run; returns the count left. */
static size_t unique_keys(struct wkey *keys, size_t n)
{
	size_t k = 0;

	for (size_t i = 0; i < n; i++) {
		if (k > 0 && cmp_wkey(&keys[k - 1], &keys[i]) == 0) {
			struct wkey *u = &keys[k - 1];
			if (keys[i].below[0] && (!u->below[0] || strcmp(keys[i].below, u->below) < 0))
				memcpy(u->below, keys[i].below, sizeof u->below);
			continue;
		}
		keys[k++] = keys[i];
	}
	return k;
}

static bool wanted(void *arg, const void *key, size_t len, const char **below)
{
	const struct want *w = arg;
	struct wkey probe = { .p = key, .len = len };
	const struct wkey *k = bsearch(&probe, w->keys, w->n, sizeof *w->keys, cmp_wkey);

	if (k && k->below[0])
		*below = k->below;
	return k != NULL;
}

/* Reads the rows of the fill keys of rows[] from the object's mirror into m
 * (m stays empty when no row needs one). */
static int lookup(struct sl_tree *t, struct obj *o, struct sl_mrow **rows, size_t n, struct sl_mirror *m,
		  char *err, size_t errlen)
{
	struct want w = { NULL, 0 };
	int rc;

	for (size_t i = 0; i < n; i++) {
		struct hop h;
		size_t at = 0;
		if (!needs_fill(rows[i]))
			continue;
		w.n += moved(rows[i]) ? 2 : 1;
		while (next_hop(rows[i], &at, &h))
			w.n++;
	}
	if (w.n == 0)
		return 0;
	if (!(w.keys = malloc(w.n * sizeof *w.keys))) {
		snprintf(err, errlen, "table \"%s\": out of memory", o->object);
		return -1;
	}
	w.n = 0;
	for (size_t i = 0; i < n; i++) {
		struct hop h;
		size_t at = 0;
		if (!needs_fill(rows[i]))
			continue;
		w.keys[w.n] = (struct wkey){ .p = rows[i]->fill, .len = rows[i]->filllen };
		if (moved(rows[i])) {
			moved_off(rows[i], w.keys[w.n].below);
			w.keys[++w.n] = (struct wkey){ .p = rows[i]->key, .len = rows[i]->keylen };
		}
		w.n++;
		while (next_hop(rows[i], &at, &h))
			w.keys[w.n++] = (struct wkey){ .p = h.key, .len = h.keylen };
	}
	qsort(w.keys, w.n, sizeof *w.keys, cmp_wkey);
	w.n = unique_keys(w.keys, w.n);
	m->want = wanted;
	m->want_arg = &w;
	rc = sl_mirror_load(m, &t->store, t->stream, o->object, err, errlen);
	m->want = NULL;
	free(w.keys);
	return rc;
}

/* Encodes r with the payload fields in fill[i] (Avro binary of the whole
 * field, NULL: r's own value) into the open file. */
static int put_filled(struct obj *o, const struct sl_mrow *r, const unsigned char **fill, const size_t *flen,
		      char *err, size_t errlen)
{
	const struct sl_table *tab = o->mtab;
	struct sl_value *vals = malloc(((size_t)tab->ncols + 1) * sizeof *vals);
	size_t *off = malloc(((size_t)tab->ncols + 1) * sizeof *off);
	struct sl_buf rec, pl, out;
	struct sl_change c;
	int rc = -1;

	sl_buf_init(&rec, 0);
	sl_buf_init(&pl, 0);
	sl_buf_init(&out, 0);
	if (!vals || !off)
		goto oom;
	memcpy(vals, r->vals, (size_t)tab->ncols * sizeof *vals);
	for (int i = 0; i < tab->ncols; i++)
		if (fill[i])
			vals[i].kind = SL_V_NULL;  /* filled: not listed as unchanged */
	sl_mrow_change(r, tab, &c);
	c.values = vals;
	if (sl_avro_enc_record(o->enc, &rec, &c, err, errlen) < 0)
		goto out;
	for (int i = 0; i < tab->ncols; i++) {
		off[i] = pl.len;
		if (sl_avro_put_value(&pl, &tab->cols[i], &vals[i], err, errlen) < 0)
			goto out;
	}
	off[tab->ncols] = pl.len;
	if (sl_buf_failed(&rec) || sl_buf_failed(&pl) || pl.len > rec.len)
		goto oom;
	/* The record ends with its payload: its fields, one after another. */
	sl_buf_append(&out, rec.data, rec.len - pl.len);
	for (int i = 0; i < tab->ncols; i++) {
		if (fill[i])
			sl_buf_append(&out, fill[i], flen[i]);
		else
			sl_buf_append(&out, pl.data + off[i], off[i + 1] - off[i]);
	}
	if (sl_buf_failed(&out))
		goto oom;
	rc = sl_ocf_append(o->w, out.data, out.len, err, errlen);
	goto out;
oom:
	snprintf(err, errlen, "table \"%s\": out of memory", o->object);
out:
	free(vals);
	free(off);
	sl_buf_free(&rec);
	sl_buf_free(&pl);
	sl_buf_free(&out);
	return rc;
}

/* Writes r into o's open file, filling its unchanged values from m. */
static int put_row(struct sl_tree *t, struct obj *o, const struct sl_mrow *r, const struct sl_mirror *m,
		   const unsigned char **fill, size_t *flen, char *err, size_t errlen)
{
	const struct sl_mentry *e = NULL;
	struct sl_change c;
	int nfill = 0, missing = 0;

	if (needs_fill(r)) {
		/* A moved row's own key may already hold this very row, written by
		 * an attempt that reached the destination before a crash kept the
		 * checkpoint from moving: the old key's row is a tombstone by then,
		 * and the earlier writing has the values (CSNs are unique per
		 * change, so the same CSN is the same change).  It may also hold
		 * the key change itself, or a change after it, where the replay's
		 * batch folded a later change that left the values unchanged: any
		 * writing from the key change (fill_csn) up to this change has
		 * them, since every change of the key between left them as they
		 * were (else the batch would have them).  One before the key
		 * change is an older row of the key, one after this change a
		 * later state: neither. */
		const char *from = r->fill_csn[0] ? r->fill_csn : r->csn;
		if (moved(r) && (e = sl_mirror_find(m, r->key, r->keylen)) &&
		    (strcmp(e->csn, from) < 0 || strcmp(e->csn, r->csn) > 0))
			e = NULL;
		/* Likewise a key the row passed through on its way here, written
		 * while it held the row. */
		for (size_t at = 0; !e && moved(r);) {
			struct hop h;
			if (!next_hop(r, &at, &h))
				break;
			if ((e = sl_mirror_find(m, h.key, h.keylen)) &&
			    (strcmp(e->csn, h.from) < 0 || strcmp(e->csn, h.until) >= 0))
				e = NULL;
		}
		/* Else the row the key change took off the fill key, as it stood
		 * before: the mirror's writing of that key may be a later one, the
		 * key change's tombstone or a new row of the key, which an earlier
		 * attempt published while the file with this row never landed (a
		 * crash between the files of one flush). */
		if (!e) {
			char off[SL_CSN_LEN + 1] = "";
			if (moved(r))
				moved_off(r, off);
			e = off[0] ? sl_mirror_find_below(m, r->fill, r->filllen, off)
				   : sl_mirror_find(m, r->fill, r->filllen);
		}
		for (int i = 0; i < r->ncols; i++) {
			fill[i] = NULL;
			if (r->vals[i].kind != SL_V_UNCHANGED)
				continue;
			if (e && i < o->cur.nfields &&
			    sl_mirror_field(m, e, o->mtab->cols[i].name, o->cur.types[i], &fill[i], &flen[i]) == 0)
				nfill++;
			else
				missing++;
		}
		if (missing)
			t->unchanged_missing++;
		if (missing && (t->unchanged_missing & (t->unchanged_missing - 1)) == 0)
			sl_warn("stream \"%s\": table \"%s\": change %s left %d value%s unchanged, and neither the batch "
				"nor the files written before have the row to take them from: written as null and listed "
				"in unchanged_columns (%" PRIu64 " such rows so far)", t->stream, o->object, r->csn, missing,
				missing == 1 ? "" : "s", t->unchanged_missing);
		if (nfill)
			return put_filled(o, r, fill, flen, err, errlen);
	}
	sl_mrow_change(r, o->mtab, &c);
	if (sl_avro_enc_record(o->enc, sl_ocf_record_buf(o->w), &c, err, errlen) < 0)
		return -1;
	return sl_ocf_record_done(o->w, err, errlen);
}

/* Writes o's batch as files (in CSN order, rotated at max_file_bytes) that
 * wait on the done list; the caller empties it. */
static int emit_batch(struct sl_tree *t, struct obj *o, char *err, size_t errlen)
{
	struct sl_mirror m;
	struct sl_mrow **rows;
	const unsigned char **fill = NULL;
	size_t n, *flen = NULL;
	int rc = -1;

	if (o->batch.n == 0 && !o->batch.trunc)
		return 0;
	memset(&m, 0, sizeof m);
	if (!(rows = sl_mbatch_sorted(&o->batch, &n)) ||
	    !(fill = calloc((size_t)o->mtab->ncols + 1, sizeof *fill)) ||
	    !(flen = calloc((size_t)o->mtab->ncols + 1, sizeof *flen))) {
		snprintf(err, errlen, "table \"%s\": out of memory", o->object);
		goto out;
	}
	if (lookup(t, o, rows, n, &m, err, errlen) < 0)
		goto out;
	for (size_t i = 0; i < n; i++) {
		struct sl_change c;
		sl_mrow_change(rows[i], o->mtab, &c);
		if (!o->w && (rc = open_file(t, o, &c, err, errlen)) < 0)
			goto out;
		rc = -1;
		if (put_row(t, o, rows[i], &m, fill, flen, err, errlen) < 0)
			goto out;
		memcpy(o->last_csn, rows[i]->csn, sizeof o->last_csn);
		t->stats.records++;
		if (sl_ocf_size(o->w) >= t->max_file_bytes && (rc = finish_file(t, o, err, errlen)) < 0)
			goto out;
	}
	if (o->w && (rc = finish_file(t, o, err, errlen)) < 0)
		goto out;
	rc = 0;
out:
	if (rc < 0 && o->w)
		drop_open_file(t, o);
	sl_mirror_free(&m);
	free(rows);
	free(fill);
	free(flen);
	return rc;
}

/* Makes o's encoder and table copy those of tab. */
static int merge_version(struct sl_tree *t, struct obj *o, const struct sl_table *tab, char *err, size_t errlen)
{
	const char *schema;
	size_t len;
	char why[256];

	sl_avro_enc_free(o->enc);
	sl_table_free(o->mtab);
	sl_mschema_free(&o->cur);
	o->mtab = NULL;
	if (!(o->enc = sl_avro_enc_new(tab, t->stream, err, errlen)))
		return -1;
	if (!(o->mtab = sl_table_copy(tab))) {
		snprintf(err, errlen, "table \"%s\": out of memory", tab->object);
		return -1;
	}
	schema = sl_avro_enc_schema(o->enc, &len);
	if (sl_mschema_parse(&o->cur, schema, len, why, sizeof why) < 0) {
		snprintf(err, errlen, "table \"%s\": %s", tab->object, why);
		return -1;
	}
	return 0;
}

/* A merge-mode change whose key column has no value (a NULL the source's
 * checks let through) cannot be a row, for a reason of its own: it goes as
 * one JSON line (ch_deadletter.h's, "code" 0) to "<state_dir>/<stream>.
 * dead-letter.jsonl", fsynced before its position can be acknowledged, and
 * the stream goes on.  Without a state_dir, or when the file cannot be
 * written, the write fails with why. */
static int merge_dead_letter(struct sl_tree *t, const struct sl_change *c, const char *why, char *err,
			     size_t errlen)
{
	const struct sl_table *tab = c->table;
	struct sl_buf line, path;
	int rc = -1;

	if (!t->state_dir) {
		snprintf(err, errlen, "%s", why);
		return -1;
	}
	sl_buf_init(&line, 0);
	sl_buf_init(&path, 0);
	sl_buf_printf(&path, "%s/%s.dead-letter.jsonl", t->state_dir, t->stream);
	sl_buf_printf(&line, "{\"time_us\":%" PRId64 ",\"stream\":", sl_now_us());
	sl_json_put_string(&line, t->stream, strlen(t->stream));
	sl_buf_puts(&line, ",\"table\":");
	sl_json_put_string(&line, tab->object, strlen(tab->object));
	sl_buf_puts(&line, ",\"code\":0,\"reason\":");
	sl_json_put_string(&line, why, strlen(why));
	sl_buf_printf(&line, ",\"csn\":\"%s\",\"change_type\":\"%s\",\"row\":{", c->csn, sl_op_name(c->op));
	for (int i = 0; i < tab->ncols; i++) {
		if (i)
			sl_buf_putc(&line, ',');
		sl_json_put_string(&line, tab->cols[i].name, strlen(tab->cols[i].name));
		sl_buf_putc(&line, ':');
		sl_json_put_value(&line, &c->values[i]);
	}
	sl_buf_puts(&line, "}}\n");
	if (sl_buf_failed(&line) || sl_buf_failed(&path)) {
		snprintf(err, errlen, "table \"%s\": out of memory", tab->object);
		goto out;
	}
	if (sl_dead_letter_append("", path.data, line.data, line.len, err, errlen) < 0)
		goto out;
	t->dead_letters++;
	if ((t->dead_letters & (t->dead_letters - 1)) == 0)
		sl_warn("stream \"%s\": table \"%s\": the change at %s cannot be written; it went to the dead-letter "
			"file \"%s\" (%" PRIu64 " such so far): %s", t->stream, tab->object, c->csn, path.data,
			t->dead_letters, why);
	rc = 0;
out:
	sl_buf_free(&line);
	sl_buf_free(&path);
	return rc;
}

/* Makes o's version that of tab, after its batch was written to files that
 * wait for the flush.  Those rows go to o's prior batch, in tab's layout:
 * the mirror lists their files only once the flush publishes them, and a
 * change of this version that leaves a value unchanged takes it from there
 * (a column added, then an UPDATE of a row inserted earlier in the flush). */
static int new_version(struct sl_tree *t, struct obj *o, const struct sl_table *tab, char *err, size_t errlen)
{
	struct sl_table *ft = o->mtab;
	struct sl_mschema fs = o->cur;
	struct sl_mbatch np;
	int rc = -1;

	o->mtab = NULL;
	memset(&o->cur, 0, sizeof o->cur);
	memset(&np, 0, sizeof np);
	if (merge_version(t, o, tab, err, errlen) < 0)
		goto out;
	if (ft && (sl_mbatch_carry(&np, &o->prior, ft, fs.types, fs.nfields, o->mtab, o->cur.types,
				   o->cur.nfields) < 0 ||
		   sl_mbatch_carry(&np, &o->batch, ft, fs.types, fs.nfields, o->mtab, o->cur.types,
				   o->cur.nfields) < 0)) {
		snprintf(err, errlen, "table \"%s\": out of memory", tab->object);
		goto out;
	}
	sl_mbatch_free(&o->prior);
	o->prior = np;
	memset(&np, 0, sizeof np);
	sl_mbatch_clear(&o->batch);
	o->batch.prior = &o->prior;
	rc = 0;
out:
	sl_mbatch_free(&np);
	sl_table_free(ft);
	sl_mschema_free(&fs);
	return rc;
}

/* Forgets o's prior batch: its files are published, or dropped. */
static void drop_prior(struct obj *o)
{
	sl_mbatch_free(&o->prior);
	o->batch.prior = NULL;
}

/* True when o's encoder is that of tab's version. */
static bool same_version(const struct obj *o, const struct sl_table *tab)
{
	return o->enc && !strcmp(sl_avro_enc_schema_key(o->enc), tab->schema_key);
}

/* Makes o's version that of tab, unless it is already (write and version):
 * what the old one holds goes to a file first, the batch of a merge-mode
 * object (emit_batch, then new_version), the open file of an append-mode
 * one, whose next change starts a new file.  0, or negative with err. */
static int switch_version(struct sl_tree *t, struct obj *o, const struct sl_table *tab, char *err, size_t errlen)
{
	int rc;

	if (same_version(o, tab))
		return 0;
	if (t->merge) {
		if (o->enc && (rc = emit_batch(t, o, err, errlen)) < 0)
			return rc;
		return new_version(t, o, tab, err, errlen);
	}
	if (o->w && (rc = finish_file(t, o, err, errlen)) < 0)
		return rc;
	sl_avro_enc_free(o->enc);
	o->enc = sl_avro_enc_new(tab, t->stream, err, errlen);
	return o->enc ? 0 : -1;
}

static int merge_write(struct sl_tree *t, struct obj *o, const struct sl_change *c, char *err, size_t errlen)
{
	const struct sl_table *tab = c->table;
	int rc;

	if (c->op != SL_OP_TRUNCATE && !sl_table_has_key(tab)) {
		snprintf(err, errlen, "stream \"%s\": table \"%s\".\"%s\" has no primary key, so write_mode = merge "
			 "cannot mirror it in %s: name its key in the stream's key_columns (key_columns = %s.%s.COLUMN), "
			 "give it a primary key or a replica identity, or use write_mode = append", t->stream, tab->ns,
			 tab->name, t->store.ops->describe(t->store.ctx), tab->ns, tab->name);
		return SL_EPREREQ;
	}
	if ((rc = switch_version(t, o, tab, err, errlen)) < 0)
		return rc;
	if ((rc = sl_mbatch_put(&o->batch, c, err, errlen)) == SL_EDATA) {
		char why[512];
		snprintf(why, sizeof why, "%s", err);
		return merge_dead_letter(t, c, why, err, errlen);
	}
	if (rc < 0)
		return -1;
	if (!t->batch_ms)
		t->batch_ms = sl_mono_ms();
	t->pending = true;
	return 0;
}

/* The bytes all batches hold. */
static uint64_t batch_bytes(const struct sl_tree *t)
{
	uint64_t sum = 0;

	for (size_t i = 0; i < t->objs.nb; i++)
		for (struct obj *o = (struct obj *)t->objs.b[i]; o; o = (struct obj *)o->node.next)
			sum += o->batch.bytes;
	return sum;
}

/* Writes every batch into files waiting for publication. */
static int emit_all(struct sl_tree *t, char *err, size_t errlen)
{
	int rc;

	for (size_t i = 0; i < t->objs.nb; i++)
		for (struct obj *o = (struct obj *)t->objs.b[i]; o; o = (struct obj *)o->node.next) {
			if ((rc = emit_batch(t, o, err, errlen)) < 0)
				return rc;
			sl_mbatch_clear(&o->batch);
			drop_prior(o);
		}
	t->batch_ms = 0;
	return 0;
}

/* After a flush: compacts the objects that reached compact_after files,
 * unless another compaction (sluice compact) runs.  A failure is logged: the
 * files stay as they are and the next flush tries again. */
static void auto_compact(struct sl_tree *t)
{
	char err[SL_ERRLEN];
	int fd = -1;
	bool busy = false;

	if (!t->merge || !t->compact_after)
		return;
	for (size_t i = 0; i < t->objs.nb; i++) {
		for (struct obj *o = (struct obj *)t->objs.b[i]; o; o = (struct obj *)o->node.next) {
			struct sl_compact_result res;
			int64_t t0;

			if (o->since_compact < t->compact_after)
				continue;
			if (fd < 0 && !busy && sl_mirror_lock(t->state_dir, t->stream, false, &fd, &busy, err, sizeof err) < 0) {
				sl_warn("stream \"%s\": no automatic compaction: %s", t->stream, err);
				return;
			}
			if (busy) {
				sl_debug("stream \"%s\": another compaction runs; \"%s\" waits", t->stream, o->object);
				return;
			}
			t0 = sl_mono_ms();
			if (sl_mirror_compact(&t->store, t->codec, t->stream, o->object, 2, &res, err, sizeof err) < 0) {
				sl_warn("stream \"%s\": compacting \"%s\" failed (its files stay as they are): %s", t->stream,
					o->object, err);
				continue;
			}
			o->since_compact = 0;
			if (res.record[0])
				sl_info("stream \"%s\": compacted \"%s\": %zu files, %" PRIu64 " records into %zu base file%s, "
					"%" PRIu64 " rows, %" PRIu64 " bytes, in %" PRId64 " ms", t->stream, o->object,
					res.files_in, res.records_in, res.files_out, res.files_out == 1 ? "" : "s",
					res.rows_out, res.bytes_out, sl_mono_ms() - t0);
		}
	}
	sl_mirror_unlock(fd);
}

int sl_tree_compact_with(struct sl_store store, enum sl_codec codec, int level, int threads, const char *state_dir,
			 const char *stream, const char *object, FILE *out, char *err, size_t errlen)
{
	struct sl_tree_conf tc;

	memset(&tc, 0, sizeof tc);
	tc.codec = codec;
	tc.compression_level = level;
	tc.compression_threads = threads;
	tc.state_dir = state_dir;
	return sl_tree_compact(store, &tc, stream, object, out, err, errlen);
}

int sl_tree_compact(struct sl_store store, const struct sl_tree_conf *conf, const char *stream, const char *object,
		    FILE *out, char *err, size_t errlen)
{
	struct sl_ocf_codec *codec = NULL;
	char **objects = NULL;
	size_t nobjects = 0;
	int fd = -1, rc;
	bool busy;

	if ((rc = sl_mirror_lock(conf->state_dir, stream, true, &fd, &busy, err, errlen)) < 0)
		return rc;
	if ((rc = sl_ocf_codec_new(&codec, conf->codec, conf->compression_level, conf->compression_threads,
				     err, errlen)) < 0)
		goto out;
	if (object) {
		if (!(objects = calloc(1, sizeof *objects)) || !(objects[0] = strdup(object))) {
			snprintf(err, errlen, "out of memory");
			rc = -1;
			goto out;
		}
		nobjects = 1;
	} else if ((rc = sl_mirror_objects(&store, stream, &objects, &nobjects, err, errlen)) < 0) {
		goto out;
	}
	for (size_t i = 0; i < nobjects; i++) {
		struct sl_compact_result res;
		if ((rc = sl_mirror_compact(&store, codec, stream, objects[i], 1, &res, err, errlen)) < 0)
			goto out;
		if (res.record[0])
			fprintf(out, "stream %s: %s: %zu files, %" PRIu64 " records -> %zu base file%s, %" PRIu64
				" rows, %" PRIu64 " bytes (%s)\n", stream, objects[i], res.files_in, res.records_in,
				res.files_out, res.files_out == 1 ? "" : "s", res.rows_out, res.bytes_out, res.record);
		else
			fprintf(out, "stream %s: %s: no files to compact\n", stream, objects[i]);
	}
	if (nobjects == 0)
		fprintf(out, "stream %s: no files to compact in %s\n", stream, store.ops->describe(store.ctx));
	rc = 0;
out:
	sl_mirror_free_keys(objects, nobjects);
	sl_ocf_codec_free(codec);
	sl_mirror_unlock(fd);
	return rc;
}

/* ---------------------------------------------------------------------- */
/* The sink operations                                                    */

/* The store's cleanup of a crashed writer's leftovers, unless a `sluice
 * compact` at work holds the compaction lock: then they may be its own, and
 * the next start removes what is left of them. */
static int cleanup(struct sl_tree *t, char *err, size_t errlen)
{
	int lock, rc;
	bool busy;

	if (!t->store.ops->cleanup)
		return 0;
	if ((rc = sl_mirror_lock(t->state_dir, t->stream, false, &lock, &busy, err, errlen)) < 0)
		return rc;
	if (busy)
		sl_debug("stream \"%s\": a compaction runs: what a crashed run left is left for the next start",
			 t->stream);
	else
		rc = t->store.ops->cleanup(t->store.ctx, t->stream, err, errlen);
	sl_mirror_unlock(lock);
	return rc;
}

int sl_tree_open(struct sl_tree **out, struct sl_store store, const struct sl_tree_conf *conf,
		 const char *stream, char *err, size_t errlen)
{
	struct sl_tree *t;
	int rc = -1;

	*out = NULL;
	t = calloc(1, sizeof *t);
	if (!t) {
		snprintf(err, errlen, "stream \"%s\": out of memory", stream);
		store.ops->close(store.ctx);
		return -1;
	}
	t->store = store;
	t->max_file_bytes = conf->max_file_bytes ? conf->max_file_bytes : SL_TREE_DEFAULT_MAX_FILE_BYTES;
	t->max_file_ms = conf->max_file_seconds > INT64_MAX / 1000 ? INT64_MAX
								    : (int64_t)conf->max_file_seconds * 1000;
	t->done_tail = &t->done;
	t->max_open = open_bound();
	t->merge = conf->merge;
	t->outage = conf->outage;
	t->compact_after = conf->compact_after_files;
	if (conf->state_dir && !(t->state_dir = strdup(conf->state_dir))) {
		snprintf(err, errlen, "stream \"%s\": out of memory", stream);
		goto fail;
	}
	t->stream = strdup(stream);
	if (sl_strmap_init(&t->objs, 16) < 0 || !t->stream) {
		snprintf(err, errlen, "stream \"%s\": out of memory", stream);
		goto fail;
	}
	if (sl_ocf_codec_new(&t->codec, conf->codec, conf->compression_level, conf->compression_threads,
			     err, errlen) < 0)
		goto fail;
	if ((rc = cleanup(t, err, errlen)) < 0 || (rc = load_chain(t, err, errlen)) < 0)
		goto fail;
	*out = t;
	return 0;
fail:
	sl_tree_close(t);
	return rc < 0 ? rc : -1;
}

static int tree_write(void *ctx, const struct sl_change *c, char *err, size_t errlen)
{
	struct sl_tree *t = ctx;
	const struct sl_table *tab = c->table;
	struct obj *o = obj_get(t, tab->object);
	int rc;

	if (!o) {
		snprintf(err, errlen, "table \"%s\": out of memory", tab->object);
		return -1;
	}
	if (tab->src)
		t->desc = tab->src;
	if (t->merge)
		return merge_write(t, o, c, err, errlen);
	if ((rc = switch_version(t, o, tab, err, errlen)) < 0)
		return rc;
	if (!o->w && t->nopen >= t->max_open) {
		sl_debug("stream \"%s\": %d files open, the most it keeps: finishing the file of \"%s\" early",
			 t->stream, t->nopen, t->open_head->object);
		if ((rc = finish_file(t, t->open_head, err, errlen)) < 0)
			return rc;
	}
	if (!o->w && (rc = open_file(t, o, c, err, errlen)) < 0)
		return rc;
	if (sl_avro_enc_record(o->enc, sl_ocf_record_buf(o->w), c, err, errlen) < 0)
		return -1;
	if (sl_ocf_record_done(o->w, err, errlen) < 0)
		return -1;
	memcpy(o->last_csn, c->csn, sizeof o->last_csn);
	t->stats.records++;
	t->pending = true;
	if (sl_ocf_size(o->w) >= t->max_file_bytes)
		return finish_file(t, o, err, errlen);
	return 0;
}

int sl_tree_version(void *ctx, const struct sl_table *tab, char *err, size_t errlen)
{
	struct sl_tree *t = ctx;
	struct obj *o = obj_get(t, tab->object);
	int rc;

	if (!o) {
		snprintf(err, errlen, "table \"%s\": out of memory", tab->object);
		return -1;
	}
	if (same_version(o, tab))
		return 0;
	if (tab->src)
		t->desc = tab->src;
	/* as a change of the version would (switch_version) */
	if ((rc = switch_version(t, o, tab, err, errlen)) < 0)
		return rc;
	/* the next flush, due at once, writes its schema file (write_schemas) */
	o->touched = true;
	t->pending = true;
	t->version_due = true;
	return 0;
}

bool sl_tree_flush_due(void *ctx, int64_t now_ms)
{
	struct sl_tree *t = ctx;

	if (t->done || t->version_due)
		return true;  /* a file reached max_file_bytes or a schema change closed one */
	if (t->merge)
		return t->batch_ms && (now_ms - t->batch_ms >= t->max_file_ms || batch_bytes(t) >= t->max_file_bytes);
	return t->open_head && now_ms - t->open_head->opened_ms >= t->max_file_ms;
}

bool sl_tree_pending(void *ctx)
{
	return ((struct sl_tree *)ctx)->pending;
}

void sl_tree_mark(void *ctx, const struct sl_position *pos)
{
	struct sl_tree *t = ctx;

	t->mark = *pos;
	t->has_mark = true;
}

/* Writes "<stream>/<object>/.schema.avsc" for every object a file of which
 * this flush published, when its version differs from the one written last
 * in this run: staged, when the store can, for the flush's sync to make
 * durable with the data files (settle_schemas), else put at once. */
static int write_schemas(struct sl_tree *t, char *err, size_t errlen)
{
	struct sl_buf key;
	int rc = 0;

	sl_buf_init(&key, 0);
	for (size_t i = 0; i < t->objs.nb && rc == 0; i++) {
		for (struct obj *o = (struct obj *)t->objs.b[i]; o && rc == 0; o = (struct obj *)o->node.next) {
			const char *schema, *skey;
			size_t len;

			if (!o->touched || !o->enc)
				continue;
			o->touched = false;
			skey = sl_avro_enc_schema_key(o->enc);
			if (!strcmp(o->schema_written, skey))
				continue;
			schema = sl_avro_enc_reader_schema(o->enc, &len);
			sl_buf_reset(&key);
			sl_buf_printf(&key, "%s/%s/" SL_SCHEMA_FILE, t->stream, o->object);
			if (sl_buf_failed(&key)) {
				snprintf(err, errlen, "table \"%s\": out of memory", o->object);
				rc = -1;
				break;
			}
			if (t->store.ops->stage) {
				rc = t->store.ops->stage(t->store.ctx, key.data, schema, len, err, errlen);
				if (rc == 0)
					snprintf(o->schema_staged, sizeof o->schema_staged, "%s", skey);
				continue;
			}
			rc = t->store.ops->put(t->store.ctx, key.data, schema, len, err, errlen);
			if (rc == 0)
				snprintf(o->schema_written, sizeof o->schema_written, "%s", skey);
		}
	}
	sl_buf_free(&key);
	return rc;
}

/* After the flush's sync: the staged schema files are written if it worked
 * (sync_rc 0), else written again by the next flush of their objects. */
static void settle_schemas(struct sl_tree *t, int sync_rc)
{
	for (size_t i = 0; i < t->objs.nb; i++) {
		for (struct obj *o = (struct obj *)t->objs.b[i]; o; o = (struct obj *)o->node.next) {
			if (!o->schema_staged[0])
				continue;
			if (sync_rc == 0)
				memcpy(o->schema_written, o->schema_staged, sizeof o->schema_written);
			else
				o->touched = true;
			o->schema_staged[0] = '\0';
		}
	}
}

static int tree_flush(void *ctx, struct sl_position *durable, char *err, size_t errlen)
{
	struct sl_tree *t = ctx;
	struct sl_manifest m;
	int rc;

	memset(&m, 0, sizeof m);
	if (t->merge && (rc = emit_all(t, err, errlen)) < 0)
		return rc;
	while (t->open_head) {
		if ((rc = finish_file(t, t->open_head, err, errlen)) < 0)
			return rc;
	}
	while (t->done) {
		struct done_file *d = t->done;
		struct sl_manifest_file mf;
		struct obj *o;
		char *key = NULL;

		if ((rc = publish(t, d, &key, err, errlen)) < 0)
			goto out;
		memset(&mf, 0, sizeof mf);
		mf.path = key;
		mf.object = d->object;
		memcpy(mf.schema_key, d->schema_key, sizeof mf.schema_key);
		mf.records = d->records;
		mf.bytes = d->bytes;
		memcpy(mf.first_csn, d->first_csn, sizeof mf.first_csn);
		memcpy(mf.last_csn, d->last_csn, sizeof mf.last_csn);
		rc = sl_manifest_add_file(&m, &mf);
		free(key);
		if ((o = obj_find(t, d->object))) {
			o->touched = true;
			o->since_compact++;
		}
		t->done = d->next;
		if (!t->done)
			t->done_tail = &t->done;
		free_done(d);
		t->stats.files_closed++;
		if (rc < 0) {
			snprintf(err, errlen, "stream \"%s\": out of memory", t->stream);
			goto out;
		}
	}
	/* The schema files first, so that the sync makes them durable too. */
	rc = write_schemas(t, err, errlen);
	if (rc == 0 && t->store.ops->sync)
		rc = t->store.ops->sync(t->store.ctx, err, errlen);
	settle_schemas(t, rc);
	if (rc < 0)
		goto out;
	if (m.nfiles > 0) {
		char pos[SL_POS_TEXT_MAX * 2], csn[17];
		bool forward = false;

		if (t->has_mark && t->desc && t->desc->pos_encode(&t->mark, pos, sizeof pos) == 0) {
			snprintf(csn, sizeof csn, "%016" PRIX64, t->desc->pos_csn(&t->mark));
			forward = !t->last_to.pos || strcmp(csn, t->last_to.csn) >= 0;
		}
		if (forward) {
			rc = sl_manifest_set_pos(&m.to, pos, csn);
		} else {
			/* No position yet, or a replay after a crash of changes an
			 * earlier manifest already covers (it was written, the
			 * checkpoint was not): the range stays where it was, so
			 * that it never runs backwards. */
			rc = sl_manifest_set_pos(&m.to, t->last_to.pos, t->last_to.csn);
		}
		if (rc < 0) {
			snprintf(err, errlen, "stream \"%s\": out of memory", t->stream);
			goto out;
		}
		if ((rc = write_manifest(t, &m, err, errlen)) < 0)
			goto out;
	}
	t->pending = false;
	t->version_due = false;
	auto_compact(t);
	rc = 0;
	if (t->has_mark) {
		*durable = t->mark;
		rc = 1;
	}
out:
	sl_manifest_free(&m);
	return rc;
}

/* A write or flush that failed as a runtime failure (a full disk, an I/O
 * error, a folder gone) is an outage of the destination, when the store
 * reports none itself (conf->outage); a flush that worked ends it. */
int sl_tree_write(void *ctx, const struct sl_change *c, char *err, size_t errlen)
{
	struct sl_tree *t = ctx;
	int rc = tree_write(ctx, c, err, errlen);

	if (rc == SL_EFAIL)
		sl_outage_fail(t->outage, err);
	return rc;
}

int sl_tree_flush(void *ctx, struct sl_position *durable, char *err, size_t errlen)
{
	struct sl_tree *t = ctx;
	int rc = tree_flush(ctx, durable, err, errlen);

	if (rc == SL_EFAIL)
		sl_outage_fail(t->outage, err);
	else if (rc >= 0)
		sl_outage_ok(t->outage);
	return rc;
}

bool sl_tree_data_name(const char *base, char *first, char *last)
{
	size_t n = strlen(base);

	if (n != 2 * SL_CSN_LEN + 2 + 8 + 5 || base[SL_CSN_LEN] != '_' || base[2 * SL_CSN_LEN + 1] != '_' ||
	    strcmp(base + n - 5, ".avro") != 0)
		return false;
	for (size_t i = 2 * SL_CSN_LEN + 2; i < n - 5; i++)
		if (!strchr("0123456789abcdef", base[i]) || !base[i])
			return false;
	if (first) {
		memcpy(first, base, SL_CSN_LEN);
		first[SL_CSN_LEN] = '\0';
	}
	if (last) {
		memcpy(last, base + SL_CSN_LEN + 1, SL_CSN_LEN);
		last[SL_CSN_LEN] = '\0';
	}
	return true;
}

/* True if a file spanning first..last CSN holds only records with CSNs in
 * [a, b] (CSNs are fixed-width, so string order is CSN order). */
static bool backfill_span(const char *first, const char *last, const char *a, const char *b)
{
	return strcmp(first, a) >= 0 && strcmp(last, b) <= 0;
}

struct discard_scan {
	const char *a, *b;
	struct sl_manifest *m;
	bool oom;
};

static int note_discard(void *arg, const char *key, uint64_t size, int64_t mtime_ms)
{
	struct discard_scan *ds = arg;
	const char *base = strrchr(key, '/');
	char first[SL_CSN_LEN + 1], last[SL_CSN_LEN + 1];

	(void)mtime_ms;
	(void)size;
	if (!sl_tree_data_name(base ? base + 1 : key, first, last) || !backfill_span(first, last, ds->a, ds->b))
		return 0;
	if (sl_manifest_add_removed(ds->m, key) < 0) {
		ds->oom = true;
		return -1;
	}
	return 0;
}

int sl_tree_discard_backfill(void *ctx, const struct sl_table *tab, const char *csn_first,
			     const char *csn_last, char *err, size_t errlen)
{
	struct sl_tree *t = ctx;
	struct discard_scan ds = { csn_first, csn_last, NULL, false };
	struct done_file **dp;
	struct sl_manifest m;
	struct sl_buf prefix;
	struct obj *o;
	int rc;

	/* Unflushed files of that backfill: drop them. */
	o = obj_find(t, tab->object);
	if (o && o->w && backfill_span(o->first_csn, o->last_csn, csn_first, csn_last))
		drop_open_file(t, o);
	if (o)
		drop_prior(o);
	for (dp = &t->done; *dp;) {
		struct done_file *d = *dp;
		if (!strcmp(d->object, tab->object) && backfill_span(d->first_csn, d->last_csn, csn_first, csn_last)) {
			t->store.ops->file_discard(t->store.ctx, d->f);
			*dp = d->next;
			free_done(d);
		} else {
			dp = &d->next;
		}
	}
	t->done_tail = &t->done;
	while (*t->done_tail)
		t->done_tail = &(*t->done_tail)->next;

	/* Published ones: listed as removed in a manifest first, then removed. */
	memset(&m, 0, sizeof m);
	ds.m = &m;
	sl_buf_init(&prefix, 0);
	sl_buf_printf(&prefix, "%s/%s", t->stream, tab->object);
	if (sl_buf_failed(&prefix)) {
		snprintf(err, errlen, "table \"%s\": out of memory", tab->object);
		return -1;
	}
	rc = t->store.ops->list(t->store.ctx, prefix.data, note_discard, &ds, err, errlen);
	if (ds.oom)
		snprintf(err, errlen, "table \"%s\": out of memory", tab->object);
	if (rc < 0 || m.nremoved == 0)
		goto out;
	if ((rc = sl_manifest_set_pos(&m.to, t->last_to.pos, t->last_to.csn)) < 0) {
		snprintf(err, errlen, "table \"%s\": out of memory", tab->object);
		goto out;
	}
	if ((rc = write_manifest(t, &m, err, errlen)) < 0)
		goto out;
	for (size_t i = 0; i < m.nremoved && rc == 0; i++) {
		rc = t->store.ops->remove(t->store.ctx, m.removed[i], err, errlen);
		if (rc == 0)
			sl_debug("removed backfill file \"%s\"", m.removed[i]);
	}
	if (rc == 0)
		sl_info("stream \"%s\": removed %zu file%s of the interrupted backfill of \"%s\" from %s",
			t->stream, m.nremoved, m.nremoved == 1 ? "" : "s", tab->object,
			t->store.ops->describe(t->store.ctx));
out:
	sl_buf_free(&prefix);
	sl_manifest_free(&m);
	return rc < 0 ? rc : 0;
}

void sl_tree_close(void *ctx)
{
	struct sl_tree *t = ctx;

	if (!t)
		return;
	for (size_t i = 0; i < t->objs.nb; i++) {
		struct obj *o, *next;
		for (o = (struct obj *)t->objs.b[i]; o; o = next) {
			next = (struct obj *)o->node.next;
			if (o->w)
				drop_open_file(t, o);
			sl_avro_enc_free(o->enc);
			sl_mbatch_free(&o->batch);
			sl_mbatch_free(&o->prior);
			sl_table_free(o->mtab);
			sl_mschema_free(&o->cur);
			free(o->dir);
			free(o->object);
			free(o);
		}
	}
	while (t->done) {
		struct done_file *d = t->done;
		t->store.ops->file_discard(t->store.ctx, d->f);
		t->done = d->next;
		free_done(d);
	}
	if (t->store.ops)
		t->store.ops->close(t->store.ctx);
	sl_ocf_codec_free(t->codec);
	sl_strmap_free(&t->objs);
	free(t->stream);
	free(t->last_key);
	free(t->last_to.pos);
	free(t->state_dir);
	free(t);
}

uint64_t sl_tree_dead_letters(void *ctx)
{
	return ((const struct sl_tree *)ctx)->dead_letters;
}

void sl_tree_get_stats(void *ctx, struct sl_avro_stats *out)
{
	*out = ((struct sl_tree *)ctx)->stats;
}

const struct sl_keychoice sl_tree_codecs[] = {
	{ "null", SL_CODEC_NULL }, { "deflate", SL_CODEC_DEFLATE }, { "snappy", SL_CODEC_SNAPPY },
	{ "zstandard", SL_CODEC_ZSTANDARD },
	{ NULL, 0 },
};

int sl_tree_conf_check(enum sl_codec codec, int level, const struct sl_ini_section *sec, struct sl_keyerr *er)
{
	const struct sl_ini_entry *e;
	char why[128];

	if (sl_ocf_check_level(codec, level, why, sizeof why) == 0)
		return 0;
	e = sl_ini_find(sec, "compression_level");
	return sl_keyerr_set(er, e ? e->line : sec->line, "%s", why);
}
