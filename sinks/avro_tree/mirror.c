/*
 * sinks/avro_tree/mirror.c: merge mode's mirror of an object, read back from
 * the tree's files with avro-c, and its compaction (see mirror.h).
 *
 * A record is kept as its Avro binary (avro-c re-encodes each field of the
 * value it read, which gives back the bytes sluice's encoder wrote), with
 * the offsets of its payload fields, so that a compaction copies records as
 * they are and a lookup copies single fields.  Memory: one copy of each
 * winning record, i.e. about the size of the table's live rows for a
 * compaction, and of the looked-up keys' rows for a lookup.
 */
#include "sinks/avro_tree/mirror.h"

#include <avro.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "common/buf.h"
#include "common/log.h"
#include "common/util.h"
#include "sinks/avro/avro_read.h"
#include "sinks/avro_tree/manifest.h"
#include "sinks/avro_tree/tree.h"

#define LIST_ATTEMPTS 5   /* a lookup lists again when a compaction removed a file under it */

/* ---------------------------------------------------------------------- */
/* Schemas                                                                */

void sl_mschema_free(struct sl_mschema *s)
{
	for (int i = 0; i < s->nfields; i++) {
		free(s->cols[i]);
		free(s->types[i]);
	}
	free(s->cols);
	free(s->types);
	free(s->json);
	memset(s, 0, sizeof *s);
}

int sl_mschema_parse(struct sl_mschema *s, const char *json, size_t len, char *err, size_t errlen)
{
	json_t *root = json_loadb(json, len, 0, NULL), *fields, *f, *payload = NULL;
	size_t i;
	int rc = -1;

	memset(s, 0, sizeof *s);
	fields = json_object_get(root, "fields");
	json_array_foreach(fields, i, f) {
		const char *name = json_string_value(json_object_get(f, "name"));
		if (name && !strcmp(name, "payload"))
			payload = json_object_get(json_object_get(f, "type"), "fields");
	}
	if (!json_is_array(payload)) {
		snprintf(err, errlen, "the schema is not a sluice record schema (no payload record)");
		goto out;
	}
	s->nfields = (int)json_array_size(payload);
	s->cols = calloc((size_t)s->nfields + 1, sizeof *s->cols);
	s->types = calloc((size_t)s->nfields + 1, sizeof *s->types);
	if (!(s->json = malloc(len + 1)) || !s->cols || !s->types)
		goto oom;
	memcpy(s->json, json, len);
	s->json[len] = '\0';
	s->len = len;
	json_array_foreach(payload, i, f) {
		const char *col = json_string_value(json_object_get(f, "sluice.column"));
		if (!col)
			col = json_string_value(json_object_get(f, "name"));
		if (!col || !(s->cols[i] = strdup(col)) ||
		    !(s->types[i] = json_dumps(json_object_get(f, "type"), JSON_COMPACT | JSON_SORT_KEYS)))
			goto oom;
	}
	rc = 0;
	goto out;
oom:
	snprintf(err, errlen, "out of memory reading a schema");
out:
	if (rc < 0) {
		int n = s->nfields;
		s->nfields = s->cols && s->types ? n : 0;
		sl_mschema_free(s);
	}
	json_decref(root);
	return rc;
}

/* ---------------------------------------------------------------------- */
/* The map of winners                                                     */

static const void *entry_key(const void *arr, size_t i, size_t *len)
{
	const struct sl_mentry *e = ((struct sl_mentry *const *)arr)[i];

	*len = e->keylen;
	return e->key;
}

static ssize_t find(const struct sl_mirror *m, const void *key, size_t len)
{
	return sl_keyslots_find(&m->index, key, len, entry_key, m->e);
}

static void entry_free(struct sl_mentry *e)
{
	if (e)
		free(e->below);
	free(e);
}

/* True when e is a live writing below CSN below. */
static bool live_below(const struct sl_mentry *e, const char *below)
{
	return !e->deleted && strcmp(e->csn, below) < 0;
}

/* Keeps c, a writing of w's key older than w, as w->below when the bound
 * below asks for one and c is the latest live writing below it yet (w
 * itself, when it is one, makes any older c useless).  Takes c. */
static void keep_below(struct sl_mentry *w, struct sl_mentry *c, const char *below)
{
	if (!below || !live_below(c, below) || live_below(w, below) ||
	    (w->below && strcmp(w->below->csn, c->csn) >= 0)) {
		entry_free(c);
		return;
	}
	entry_free(w->below);
	w->below = c;
}

/* Puts e in the map when it is newer than the key's entry (with the bound
 * below of a lookup, see keep_below); takes e. */
static int put_entry(struct sl_mirror *m, struct sl_mentry *e, const char *below)
{
	ssize_t at = find(m, e->key, e->keylen);

	if (at >= 0) {
		struct sl_mentry *w = m->e[at];
		if (strcmp(e->csn, w->csn) > 0) {
			e->below = w->below;
			w->below = NULL;
			m->e[at] = e;
			keep_below(e, w, below);
		} else {
			keep_below(w, e, below);
		}
		return 0;
	}
	if (m->index.min == 0)
		m->index.min = 1024;
	if (sl_keyslots_reserve(&m->index, m->n) < 0)
		goto oom;
	if (m->n == m->alloc) {
		size_t na = m->alloc ? m->alloc * 2 : 256;
		struct sl_mentry **ne = realloc(m->e, na * sizeof *ne);
		if (!ne)
			goto oom;
		m->e = ne;
		m->alloc = na;
	}
	m->e[m->n] = e;
	sl_keyslots_put(&m->index, e->key, e->keylen, m->n);
	m->n++;
	return 0;
oom:
	entry_free(e);
	return -1;
}

void sl_mirror_free(struct sl_mirror *m)
{
	for (size_t i = 0; i < m->n; i++)
		entry_free(m->e[i]);
	free(m->e);
	sl_keyslots_free(&m->index);
	entry_free(m->trunc);
	for (int i = 0; i < m->nschemas; i++)
		sl_mschema_free(&m->schemas[i]);
	free(m->schemas);
	memset(m, 0, sizeof *m);
}

const struct sl_mentry *sl_mirror_find(const struct sl_mirror *m, const void *key, size_t len)
{
	ssize_t at = find(m, key, len);

	if (at < 0 || m->e[at]->deleted || (m->trunc && strcmp(m->e[at]->csn, m->trunc->csn) < 0))
		return NULL;
	return m->e[at];
}

const struct sl_mentry *sl_mirror_find_below(const struct sl_mirror *m, const void *key, size_t len,
					     const char *below)
{
	ssize_t at = find(m, key, len);
	const struct sl_mentry *e;

	if (at < 0)
		return NULL;
	e = live_below(m->e[at], below) ? m->e[at] : m->e[at]->below;
	if (!e || !live_below(e, below) || (m->trunc && strcmp(e->csn, m->trunc->csn) < 0))
		return NULL;
	return e;
}

int sl_mirror_field(const struct sl_mirror *m, const struct sl_mentry *e, const char *col, const char *type_json,
		    const unsigned char **p, size_t *len)
{
	const struct sl_mschema *s = &m->schemas[e->schema];

	for (int i = 0; i < s->nfields; i++) {
		if (strcmp(s->cols[i], col) != 0)
			continue;
		if (strcmp(s->types[i], type_json) != 0)
			return -1;
		*p = e->rec + e->foff[i];
		*len = e->foff[i + 1] - e->foff[i];
		return 0;
	}
	return -1;
}

/* ---------------------------------------------------------------------- */
/* Reading a file                                                         */

/* The schema index of json, added when new; -1 on failure. */
static int schema_index(struct sl_mirror *m, const char *json, size_t len, char *err, size_t errlen)
{
	struct sl_mschema *ns;

	for (int i = 0; i < m->nschemas; i++)
		if (m->schemas[i].len == len && !memcmp(m->schemas[i].json, json, len))
			return i;
	if (!(ns = realloc(m->schemas, ((size_t)m->nschemas + 1) * sizeof *ns))) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	m->schemas = ns;
	if (sl_mschema_parse(&m->schemas[m->nschemas], json, len, err, errlen) < 0)
		return -1;
	return m->nschemas++;
}

/* Appends the Avro binary of v to b. */
static const char *str_of(avro_value_t *rec, const char *name, size_t *len)
{
	avro_value_t f;
	const char *s = NULL;
	size_t n = 0;

	if (avro_value_get_by_name(rec, name, &f, NULL) != 0 || avro_value_get_string(&f, &s, &n) != 0)
		return NULL;
	*len = n ? n - 1 : 0;
	return s;
}

struct reading {
	struct sl_mirror *m;
	int schema;
	int *keyfields;                /* payload field indexes of the key, from the first record */
	int nkeys;
	bool keys_known;
	struct sl_buf rec, key;
	size_t *foff;
	avro_writer_t w;
};

/* The payload fields of the key, from a record's primary_keys. */
static int key_fields(struct reading *r, avro_value_t *sm, char *err, size_t errlen)
{
	const struct sl_mschema *s = &r->m->schemas[r->schema];
	avro_value_t pk, el;
	size_t n = 0;

	if (avro_value_get_by_name(sm, "primary_keys", &pk, NULL) != 0 || avro_value_get_size(&pk, &n) != 0)
		return -1;
	if (!(r->keyfields = calloc(n + 1, sizeof *r->keyfields))) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	for (size_t i = 0; i < n; i++) {
		const char *name;
		size_t len;
		int k = -1;
		if (avro_value_get_by_index(&pk, i, &el, NULL) != 0 || avro_value_get_string(&el, &name, &len) != 0)
			return -1;
		for (int f = 0; f < s->nfields && k < 0; f++)
			if (!strcmp(s->cols[f], name))
				k = f;
		if (k < 0) {
			snprintf(err, errlen, "primary key column \"%s\" is not in the payload", name);
			return -1;
		}
		r->keyfields[r->nkeys++] = k;
	}
	r->keys_known = true;
	return 0;
}

/* Folds one record read into m. */
static int fold_record(struct reading *r, avro_value_t *val, char *err, size_t errlen)
{
	struct sl_mirror *m = r->m;
	const struct sl_mschema *s = &m->schemas[r->schema];
	avro_value_t sm, payload, f, ts;
	const char *csn, *op, *below = NULL;
	size_t csnlen, oplen, nfields = 0;
	int64_t source_ts = 0;
	bool trunc;
	struct sl_mentry *e;
	size_t size;
	char *p;

	if (avro_value_get_by_name(val, "source_metadata", &sm, NULL) != 0 ||
	    !(csn = str_of(&sm, "change_sequence_number", &csnlen)) || csnlen != SL_CSN_LEN ||
	    !(op = str_of(&sm, "change_type", &oplen)) ||
	    avro_value_get_by_name(val, "payload", &payload, NULL) != 0) {
		snprintf(err, errlen, "record %" PRIu64 " is not a sluice record", m->records);
		return -1;
	}
	if (avro_value_get_by_name(val, "source_timestamp", &ts, NULL) == 0)
		avro_value_get_long(&ts, &source_ts);
	trunc = oplen == 8 && !memcmp(op, "TRUNCATE", 8);
	if (!s->schema_key[0]) {
		size_t kl;
		const char *sk = str_of(val, "schema_key", &kl);
		if (sk)
			snprintf(((struct sl_mschema *)s)->schema_key, 17, "%.*s", (int)kl, sk);
	}
	if (!trunc && !r->keys_known && key_fields(r, &sm, err, errlen) < 0) {
		if (!err[0])
			snprintf(err, errlen, "record %" PRIu64 " has no readable primary_keys", m->records);
		return -1;
	}
	/* The key first: a lookup skips the other keys early. */
	sl_buf_reset(&r->key);
	for (int k = 0; !trunc && k < r->nkeys; k++) {
		if (avro_value_get_by_index(&payload, (size_t)r->keyfields[k], &f, NULL) != 0 ||
		    sl_avro_value_bytes(r->w, &r->key, &f) < 0)
			goto bad;
	}
	if (!trunc && r->nkeys == 0) {
		snprintf(err, errlen, "record %" PRIu64 " has no primary key: not merge-mode output", m->records);
		return -1;
	}
	if (!trunc && m->want && !m->want(m->want_arg, r->key.data, r->key.len, &below))
		return 0;
	/* The whole record, field by field, noting where the payload's are. */
	sl_buf_reset(&r->rec);
	avro_value_get_size(val, &nfields);
	for (size_t i = 0; i < nfields; i++) {
		const char *name;
		if (avro_value_get_by_index(val, i, &f, &name) != 0)
			goto bad;
		if (strcmp(name, "payload") != 0) {
			if (sl_avro_value_bytes(r->w, &r->rec, &f) < 0)
				goto bad;
			continue;
		}
		for (int k = 0; k < s->nfields; k++) {
			avro_value_t pf;
			r->foff[k] = r->rec.len;
			if (avro_value_get_by_index(&payload, (size_t)k, &pf, NULL) != 0 ||
			    sl_avro_value_bytes(r->w, &r->rec, &pf) < 0)
				goto bad;
		}
		r->foff[s->nfields] = r->rec.len;
	}
	size = sizeof *e + ((size_t)s->nfields + 1) * sizeof(size_t) + r->key.len + r->rec.len;
	if (!(e = malloc(size)))
		goto oom;
	memset(e, 0, sizeof *e);
	e->foff = (size_t *)(e + 1);
	memcpy(e->foff, r->foff, ((size_t)s->nfields + 1) * sizeof(size_t));
	p = (char *)(e->foff + s->nfields + 1);
	e->key = (unsigned char *)p;
	e->keylen = r->key.len;
	if (r->key.len)
		memcpy(p, r->key.data, r->key.len);
	p += r->key.len;
	e->rec = (unsigned char *)p;
	e->reclen = r->rec.len;
	memcpy(p, r->rec.data, r->rec.len);
	memcpy(e->csn, csn, SL_CSN_LEN);
	e->csn[SL_CSN_LEN] = '\0';
	e->schema = r->schema;
	e->source_ts_us = source_ts;
	e->deleted = trunc || (oplen == 6 && !memcmp(op, "DELETE", 6)) ||
		     (oplen == 13 && !memcmp(op, "UPDATE-DELETE", 13));
	if (trunc) {
		if (m->trunc && strcmp(m->trunc->csn, e->csn) >= 0) {
			entry_free(e);
		} else {
			entry_free(m->trunc);
			m->trunc = e;
		}
		return 0;
	}
	if (put_entry(m, e, below) < 0)
		goto oom;
	return 0;
bad:
	snprintf(err, errlen, "record %" PRIu64 " cannot be re-encoded: %s", m->records, avro_strerror());
	return -1;
oom:
	snprintf(err, errlen, "out of memory");
	return -1;
}

/* Folds the container file at path into m. */
static int fold_path(struct sl_mirror *m, const char *path, char *err, size_t errlen)
{
	struct reading r;
	struct sl_avro_read *rd = NULL;
	const struct sl_buf *schema;
	avro_value_t *val;
	int rc = -1, got;

	memset(&r, 0, sizeof r);
	r.m = m;
	sl_buf_init(&r.rec, 0);
	sl_buf_init(&r.key, 0);
	err[0] = '\0';
	if (sl_avro_read_open(&rd, path, err, errlen) < 0)
		goto out;
	schema = sl_avro_read_schema(rd);
	if ((r.schema = schema_index(m, schema->data, schema->len, err, errlen)) < 0)
		goto out;
	if (!(r.foff = calloc((size_t)m->schemas[r.schema].nfields + 1, sizeof *r.foff)) ||
	    !(r.w = avro_writer_memory(NULL, 0))) {
		snprintf(err, errlen, "out of memory");
		goto out;
	}
	while ((got = sl_avro_read_next(rd, &val, err, errlen)) > 0) {
		m->records++;
		if (fold_record(&r, val, err, errlen) < 0)
			goto out;
	}
	if (got < 0)
		goto out;
	rc = 0;
out:
	sl_avro_read_close(rd);
	if (r.w)
		avro_writer_free(r.w);
	free(r.foff);
	free(r.keyfields);
	sl_buf_free(&r.rec);
	sl_buf_free(&r.key);
	return rc;
}

int sl_mirror_read(struct sl_mirror *m, struct sl_store *st, const char *key, char *err, size_t errlen)
{
	char *path = NULL, why[512];
	bool temporary = false;
	int rc;

	rc = st->ops->fetch(st->ctx, key, &path, &temporary, err, errlen);
	if (rc != 0)
		return rc;
	rc = fold_path(m, path, why, sizeof why);
	if (rc < 0)
		snprintf(err, errlen, "merge mode: %s in %s: %s", key, st->ops->describe(st->ctx), why);
	if (temporary)
		unlink(path);
	free(path);
	return rc;
}

/* ---------------------------------------------------------------------- */
/* Current files                                                          */

struct listing {
	char **data;
	size_t n, alloc;
	uint64_t max_record;           /* highest .compact-N.json seen */
	bool oom;
};

static bool record_name(const char *base, uint64_t *n)
{
	size_t len = strlen(base);
	uint64_t v = 0;

	if (len != 9 + 10 + 5 || strncmp(base, ".compact-", 9) != 0 || strcmp(base + len - 5, ".json") != 0)
		return false;
	for (size_t i = 9; i < 19; i++) {
		if (base[i] < '0' || base[i] > '9')
			return false;
		v = v * 10 + (uint64_t)(base[i] - '0');
	}
	*n = v;
	return true;
}

/* Appends key, which the listing then owns (NULL: out of memory). */
static int listing_push(struct listing *l, char *key)
{
	if (key && l->n == l->alloc) {
		size_t na = l->alloc ? l->alloc * 2 : 64;
		char **nd = realloc(l->data, na * sizeof *nd);
		if (nd) {
			l->data = nd;
			l->alloc = na;
		}
	}
	if (!key || l->n == l->alloc) {
		free(key);
		l->oom = true;
		return -1;
	}
	l->data[l->n++] = key;
	return 0;
}

static int note_file(void *arg, const char *key, uint64_t size, int64_t mtime_ms)
{
	struct listing *l = arg;
	const char *base = strrchr(key, '/');
	uint64_t n;

	(void)mtime_ms;
	(void)size;
	base = base ? base + 1 : key;
	if (record_name(base, &n)) {
		if (n > l->max_record)
			l->max_record = n;
		return 0;
	}
	if (!sl_tree_data_name(base, NULL, NULL))
		return 0;
	return listing_push(l, strdup(key));
}

void sl_mirror_free_keys(char **keys, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(keys[i]);
	free(keys);
}

/* Reads the newest compaction record (.base.json's) into rec; rec stays
 * zeroed when there is none.  Returns 0 or an error. */
static int read_record(struct sl_store *st, const char *stream, const char *object, struct sl_manifest *rec,
		       char *err, size_t errlen)
{
	struct sl_buf key, body;
	char why[256];
	uint64_t seq = 0;
	int rc;

	memset(rec, 0, sizeof *rec);
	sl_buf_init(&key, 0);
	sl_buf_init(&body, 0);
	sl_buf_printf(&key, "%s/%s/" SL_MIRROR_BASE, stream, object);
	rc = sl_buf_failed(&key) ? -1 : st->ops->get(st->ctx, key.data, &body, err, errlen);
	if (rc == 0) {
		json_t *j = json_loadb(body.data ? body.data : "", body.len, 0, NULL);
		json_t *v = json_object_get(j, "sequence");
		if (json_is_integer(v) && json_integer_value(v) > 0)
			seq = (uint64_t)json_integer_value(v);
		json_decref(j);
	}
	if (rc == SL_STORE_NOT_FOUND || (rc == 0 && seq == 0)) {
		rc = 0;
		goto out;
	}
	if (rc < 0)
		goto out;
	sl_buf_reset(&key);
	sl_buf_reset(&body);
	sl_buf_printf(&key, "%s/%s/.compact-%010" PRIu64 ".json", stream, object, seq);
	if ((rc = st->ops->get(st->ctx, key.data, &body, err, errlen)) != 0) {
		if (rc == SL_STORE_NOT_FOUND)
			snprintf(err, errlen, "%s names compaction record %s, which is missing", SL_MIRROR_BASE, key.data);
		rc = -1;
		goto out;
	}
	if (sl_manifest_decode(rec, body.data ? body.data : "", body.len, why, sizeof why) < 0) {
		snprintf(err, errlen, "compaction record %s cannot be read: %s", key.data, why);
		rc = -1;
	}
out:
	sl_buf_free(&key);
	sl_buf_free(&body);
	return rc;
}

static bool replaced(const struct sl_manifest *rec, const char *key)
{
	for (size_t i = 0; i < rec->nremoved; i++)
		if (!strcmp(rec->removed[i], key))
			return true;
	return false;
}

/* The current files, and the highest record number listed.  left, unless
 * NULL, gets the files that the newest record replaced and that are still
 * there (a compaction stopped before it deleted them); the caller frees
 * both listings' keys. */
static int current(struct sl_store *st, const char *stream, const char *object, struct listing *l,
		   struct listing *left, char *err, size_t errlen)
{
	struct sl_manifest rec;
	struct sl_buf prefix;
	size_t k = 0;
	int rc;

	memset(l, 0, sizeof *l);
	if (left)
		memset(left, 0, sizeof *left);
	sl_buf_init(&prefix, 0);
	sl_buf_printf(&prefix, "%s/%s", stream, object);
	if (sl_buf_failed(&prefix)) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	/* The record first: a file it replaces may then be listed or not. */
	if ((rc = read_record(st, stream, object, &rec, err, errlen)) < 0)
		goto out;
	rc = st->ops->list(st->ctx, prefix.data, note_file, l, err, errlen);
	if (l->oom)
		snprintf(err, errlen, "out of memory");
	if (rc < 0 || l->oom) {
		rc = -1;
		goto out;
	}
	for (size_t i = 0; i < l->n; i++) {
		if (!replaced(&rec, l->data[i]))
			l->data[k++] = l->data[i];
		else if (!left)
			free(l->data[i]);
		else if (listing_push(left, l->data[i]) < 0)
			rc = -1;
	}
	l->n = k;
	if (rc < 0)
		snprintf(err, errlen, "out of memory");
out:
	sl_manifest_free(&rec);
	sl_buf_free(&prefix);
	if (rc < 0) {
		sl_mirror_free_keys(l->data, l->n);
		memset(l, 0, sizeof *l);
		if (left) {
			sl_mirror_free_keys(left->data, left->n);
			memset(left, 0, sizeof *left);
		}
	}
	return rc;
}

int sl_mirror_current(struct sl_store *st, const char *stream, const char *object, char ***keys, size_t *n,
		      char *err, size_t errlen)
{
	struct listing l;
	int rc = current(st, stream, object, &l, NULL, err, errlen);

	*keys = l.data;
	*n = l.n;
	return rc;
}

int sl_mirror_load(struct sl_mirror *m, struct sl_store *st, const char *stream, const char *object, char *err,
		   size_t errlen)
{
	for (int attempt = 0; attempt < LIST_ATTEMPTS; attempt++) {
		struct listing l;
		int rc = 0;

		if (current(st, stream, object, &l, NULL, err, errlen) < 0)
			return -1;
		for (size_t i = 0; i < l.n && rc == 0; i++)
			rc = sl_mirror_read(m, st, l.data[i], err, errlen);
		sl_mirror_free_keys(l.data, l.n);
		if (rc != SL_STORE_NOT_FOUND)
			return rc;
		/* A compaction replaced it meanwhile: what was read stays valid
		 * (the base holds the same records), so read the new state too. */
	}
	snprintf(err, errlen, "merge mode: the files of \"%s\" kept changing while they were read", object);
	return -1;
}

/* ---------------------------------------------------------------------- */
/* Compaction                                                             */

static uint32_t rand32(void)
{
	uint32_t r;

	if (getrandom(&r, sizeof r, 0) != (ssize_t)sizeof r)
		r = (uint32_t)time(NULL) * 2654435761u ^ (uint32_t)getpid();
	return r;
}

static int cmp_entry(const void *a, const void *b)
{
	return strcmp((*(struct sl_mentry *const *)a)->csn, (*(struct sl_mentry *const *)b)->csn);
}

struct out_file {
	struct sl_store *st;
	struct sl_store_file *f;
	uint64_t bytes;
};

static int out_write(void *arg, const struct iovec *iov, int iovcnt, char *err, size_t errlen)
{
	struct out_file *o = arg;

	for (int i = 0; i < iovcnt; i++)
		o->bytes += iov[i].iov_len;
	return o->st->ops->file_write(o->f, iov, iovcnt, err, errlen);
}

/* Writes rows (sorted, all of schema s) as one published data file and adds
 * it to rec. */
static int write_base(struct sl_store *st, struct sl_ocf_codec *codec, const char *stream, const char *object,
		      const struct sl_mschema *s, struct sl_mentry **rows, size_t n, struct sl_manifest *rec,
		      uint64_t *bytes, char *err, size_t errlen)
{
	struct out_file o = { st, NULL, 0 };
	struct sl_ocf_out out = { out_write, &o };
	struct sl_ocf_writer *w = NULL;
	struct sl_manifest_file mf;
	struct sl_buf dir, key;
	int64_t ts = rows[0]->source_ts_us;
	time_t secs = (time_t)(ts >= 0 ? ts / 1000000 : -((-ts + 999999) / 1000000));
	struct tm tm;
	int rc = -1;

	sl_buf_init(&dir, 0);
	sl_buf_init(&key, 0);
	if (!gmtime_r(&secs, &tm))
		memset(&tm, 0, sizeof tm);
	sl_buf_printf(&dir, "%s/%s/%04d/%02d/%02d/%02d/%02d", stream, object, tm.tm_year + 1900, tm.tm_mon + 1,
		      tm.tm_mday, tm.tm_hour, tm.tm_min);
	if (sl_buf_failed(&dir))
		goto oom;
	if ((rc = st->ops->file_new(st->ctx, dir.data, rows[0]->csn, &o.f, err, errlen)) < 0) {
		o.f = NULL;
		goto out;
	}
	rc = -1;
	if (sl_ocf_open_out(&w, &out, dir.data, s->json, s->len, codec, 0, err, errlen) < 0)
		goto out;
	for (size_t i = 0; i < n; i++)
		if (sl_ocf_append(w, rows[i]->rec, rows[i]->reclen, err, errlen) < 0)
			goto out;
	rc = sl_ocf_close(w, true, err, errlen);
	w = NULL;
	if (rc < 0)
		goto out;
	for (int attempt = 0; attempt < 8; attempt++) {
		sl_buf_reset(&key);
		sl_buf_printf(&key, "%s/%s_%s_%08x.avro", dir.data, rows[0]->csn, rows[n - 1]->csn, rand32());
		if (sl_buf_failed(&key))
			goto oom;
		if (attempt == 0 && (rc = st->ops->file_finish(st->ctx, o.f, key.data, err, errlen)) < 0)
			goto out;
		rc = st->ops->file_publish(st->ctx, o.f, key.data, err, errlen);
		if (rc != SL_STORE_EXISTS)
			break;
	}
	if (rc != 0) {
		if (rc > 0)
			snprintf(err, errlen, "could not find a free file name in %s", dir.data);
		rc = rc < 0 ? rc : -1;
		goto out;
	}
	o.f = NULL;
	memset(&mf, 0, sizeof mf);
	mf.path = key.data;
	mf.object = (char *)object;
	snprintf(mf.schema_key, sizeof mf.schema_key, "%s", s->schema_key);
	mf.records = n;
	mf.bytes = o.bytes;
	memcpy(mf.first_csn, rows[0]->csn, sizeof mf.first_csn);
	memcpy(mf.last_csn, rows[n - 1]->csn, sizeof mf.last_csn);
	*bytes += o.bytes;
	if (sl_manifest_add_file(rec, &mf) < 0)
		goto oom;
	rc = 0;
	goto out;
oom:
	snprintf(err, errlen, "out of memory");
	rc = -1;
out:
	if (w)
		sl_ocf_abort(w);
	if (o.f)
		st->ops->file_discard(st->ctx, o.f);
	sl_buf_free(&dir);
	sl_buf_free(&key);
	return rc;
}

/* The rows a base keeps: live ones at or above the TRUNCATE, and the
 * TRUNCATE itself, in CSN order.  NULL when out of memory. */
static struct sl_mentry **base_rows(const struct sl_mirror *m, size_t *n)
{
	struct sl_mentry **rows = malloc((m->n + 2) * sizeof *rows);
	size_t k = 0;

	*n = 0;
	if (!rows)
		return NULL;
	if (m->trunc)
		rows[k++] = m->trunc;
	for (size_t i = 0; i < m->n; i++)
		if (sl_mirror_find(m, m->e[i]->key, m->e[i]->keylen) == m->e[i])
			rows[k++] = m->e[i];
	qsort(rows, k, sizeof *rows, cmp_entry);
	*n = k;
	return rows;
}

/* Puts the record and then the pointer to it. */
static int put_record(struct sl_store *st, const char *stream, const char *object, struct sl_manifest *rec,
		      char *out_key, size_t out_len, char *err, size_t errlen)
{
	struct sl_buf key, body;
	int rc = -1;

	sl_buf_init(&key, 0);
	sl_buf_init(&body, 0);
	sl_buf_printf(&key, "%s/%s/.compact-%010" PRIu64 ".json", stream, object, rec->sequence);
	if (sl_buf_failed(&key) || sl_manifest_encode(rec, &body, err, errlen) < 0)
		goto out;
	if ((rc = st->ops->put(st->ctx, key.data, body.data, body.len, err, errlen)) < 0)
		goto out;
	snprintf(out_key, out_len, "%s", key.data);
	sl_buf_reset(&key);
	sl_buf_reset(&body);
	sl_buf_printf(&key, "%s/%s/" SL_MIRROR_BASE, stream, object);
	sl_buf_printf(&body, "{\"sequence\": %" PRIu64 "}\n", rec->sequence);
	rc = sl_buf_failed(&key) || sl_buf_failed(&body) ? -1
							 : st->ops->put(st->ctx, key.data, body.data, body.len, err, errlen);
out:
	if (rc < 0 && !err[0])
		snprintf(err, errlen, "out of memory");
	sl_buf_free(&key);
	sl_buf_free(&body);
	return rc;
}

int sl_mirror_compact(struct sl_store *st, struct sl_ocf_codec *codec, const char *stream, const char *object,
		      size_t min_files, struct sl_compact_result *res, char *err, size_t errlen)
{
	struct sl_mirror m;
	struct sl_manifest rec;
	struct listing l, left;
	struct sl_mentry **rows = NULL;
	size_t nrows = 0;
	int rc;

	memset(res, 0, sizeof *res);
	memset(&m, 0, sizeof m);
	memset(&rec, 0, sizeof rec);
	err[0] = '\0';
	if ((rc = current(st, stream, object, &l, &left, err, errlen)) < 0)
		return rc;
	if (l.n < (min_files ? min_files : 1)) {
		rc = 0;
		goto out;
	}
	/* The lock keeps other compactions out, so these files stay. */
	for (size_t i = 0; i < l.n; i++) {
		if ((rc = sl_mirror_read(&m, st, l.data[i], err, errlen)) != 0) {
			if (rc == SL_STORE_NOT_FOUND)
				snprintf(err, errlen, "merge mode: %s disappeared while it was compacted", l.data[i]);
			rc = -1;
			goto out;
		}
	}
	res->files_in = l.n;
	res->records_in = m.records;
	if (!(rows = base_rows(&m, &nrows)))
		goto oom;
	rec.sequence = l.max_record + 1;
	if (!(rec.stream = strdup(stream)))
		goto oom;
	/* One base file per schema version (schema key), each in CSN order.
	 * Files of one version may carry different schema texts (backfill rows
	 * also name the source types): the first one read is used. */
	for (int s = 0; s < m.nschemas; s++) {
		struct sl_mentry **part;
		size_t k = 0;
		bool seen = false;
		for (int e = 0; e < s && !seen; e++)
			seen = !strcmp(m.schemas[e].schema_key, m.schemas[s].schema_key);
		if (seen)
			continue;
		if (!(part = malloc((nrows ? nrows : 1) * sizeof *part)))
			goto oom;
		for (size_t i = 0; i < nrows; i++)
			if (!strcmp(m.schemas[rows[i]->schema].schema_key, m.schemas[s].schema_key))
				part[k++] = rows[i];
		rc = k ? write_base(st, codec, stream, object, &m.schemas[s], part, k, &rec, &res->bytes_out, err,
				    errlen) : 0;
		free(part);
		if (rc < 0)
			goto out;
		res->files_out += k > 0;
		res->rows_out += k;
	}
	if (st->ops->sync && (rc = st->ops->sync(st->ctx, err, errlen)) < 0)
		goto out;
	/* The new record replaces the previous record's files that are still
	 * there too (a compaction stopped before it deleted them): once
	 * .base.json moves, nothing else would hide them, and their records,
	 * older than the deletions that the base no longer holds, would
	 * count again. */
	for (size_t i = 0; i < l.n + left.n; i++)
		if (sl_manifest_add_removed(&rec, i < l.n ? l.data[i] : left.data[i - l.n]) < 0)
			goto oom;
	rec.written_at_us = sl_now_us();
	if ((rc = put_record(st, stream, object, &rec, res->record, sizeof res->record, err, errlen)) < 0)
		goto out;
	/* Only now may the replaced files go: the record and the base are durable. */
	for (size_t i = 0; i < l.n + left.n && rc == 0; i++)
		rc = st->ops->remove(st->ctx, i < l.n ? l.data[i] : left.data[i - l.n], err, errlen);
	if (rc == 0 && st->ops->sync)
		rc = st->ops->sync(st->ctx, err, errlen);
	goto out;
oom:
	snprintf(err, errlen, "merge mode: compacting \"%s\": out of memory", object);
	rc = -1;
out:
	free(rows);
	sl_manifest_free(&rec);
	sl_mirror_free(&m);
	sl_mirror_free_keys(l.data, l.n);
	sl_mirror_free_keys(left.data, left.n);
	return rc;
}

/* ---------------------------------------------------------------------- */
/* Objects and the lock                                                   */

struct objects {
	const char *stream;
	char **names;
	size_t n, alloc;
	bool oom;
};

static int note_object(void *arg, const char *key, uint64_t size, int64_t mtime_ms)
{
	struct objects *o = arg;
	size_t sl = strlen(o->stream);
	const char *rest, *slash, *base = strrchr(key, '/');

	(void)mtime_ms;
	(void)size;
	if (strncmp(key, o->stream, sl) != 0 || key[sl] != '/' || !sl_tree_data_name(base ? base + 1 : key, NULL, NULL))
		return 0;
	rest = key + sl + 1;
	if (!(slash = strchr(rest, '/')) || !strncmp(rest, SL_MANIFEST_DIR "/", sizeof SL_MANIFEST_DIR))
		return 0;
	for (size_t i = 0; i < o->n; i++)
		if (strlen(o->names[i]) == (size_t)(slash - rest) && !strncmp(o->names[i], rest, (size_t)(slash - rest)))
			return 0;
	if (o->n == o->alloc) {
		size_t na = o->alloc ? o->alloc * 2 : 16;
		char **nn = realloc(o->names, na * sizeof *nn);
		if (!nn)
			goto oom;
		o->names = nn;
		o->alloc = na;
	}
	if (!(o->names[o->n] = strndup(rest, (size_t)(slash - rest))))
		goto oom;
	o->n++;
	return 0;
oom:
	o->oom = true;
	return -1;
}

int sl_mirror_objects(struct sl_store *st, const char *stream, char ***objects, size_t *n, char *err,
		      size_t errlen)
{
	struct objects o = { stream, NULL, 0, 0, false };
	int rc = st->ops->list(st->ctx, stream, note_object, &o, err, errlen);

	if (o.oom) {
		snprintf(err, errlen, "out of memory");
		rc = -1;
	}
	if (rc < 0) {
		sl_mirror_free_keys(o.names, o.n);
		o.names = NULL;
		o.n = 0;
	}
	*objects = o.names;
	*n = o.n;
	return rc;
}

int sl_mirror_lock(const char *state_dir, const char *stream, bool wait, int *fd, bool *busy, char *err,
		   size_t errlen)
{
	struct sl_buf p;
	int f;

	*fd = -1;
	*busy = false;
	if (!state_dir)
		return 0;
	sl_buf_init(&p, 0);
	sl_buf_printf(&p, "%s/%s.compact.lock", state_dir, stream);
	if (sl_buf_failed(&p)) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	f = open(p.data, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (f < 0) {
		snprintf(err, errlen, "compaction lock \"%s\": %s", p.data, sl_strerror(errno));
		sl_buf_free(&p);
		return -1;
	}
	while (flock(f, LOCK_EX | (wait ? 0 : LOCK_NB)) < 0) {
		if (errno == EINTR)
			continue;
		if (errno == EWOULDBLOCK && !wait) {
			*busy = true;
			close(f);
			sl_buf_free(&p);
			return 0;
		}
		snprintf(err, errlen, "compaction lock \"%s\": %s", p.data, sl_strerror(errno));
		close(f);
		sl_buf_free(&p);
		return -1;
	}
	sl_buf_free(&p);
	*fd = f;
	return 0;
}

void sl_mirror_unlock(int fd)
{
	if (fd >= 0)
		close(fd);
}
