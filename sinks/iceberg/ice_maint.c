/*
 * sinks/iceberg/ice_maint.c: `sluice verify` of the iceberg sink's tables,
 * through a store (see ice_maint.h).
 *
 * Every location in a table's metadata is an absolute path under the
 * table's `location`; a location maps to the store key
 * "<stream>/<object>/" plus what follows the table's location, so the
 * check does not depend on where the warehouse was when it was written.
 */
#include "sinks/iceberg/ice_maint.h"

#include <inttypes.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/buf.h"
#include "common/log.h"
#include "common/util.h"
#include "sinks/avro/avro_read.h"
#include "sinks/avro/ocf.h"
#include "sinks/iceberg/ice_meta.h"
#include "sinks/iceberg/ice_stats.h"
#include "sinks/iceberg/ice_widen.h"
#include "sinks/avro_tree/tree.h"

#define HINT "/metadata/version-hint.text"

struct key {
	char *key;
	uint64_t size;
	int64_t mtime_ms;            /* last modified (ms since the epoch), or -1: unknown */
	bool ref;                    /* named by the current snapshot */
};

struct vfy {
	struct sl_store store;
	const char *stream;
	FILE *out;
	struct key *keys;            /* the stream's keys, sorted */
	size_t nkeys, cap;
	bool oom;
	uint64_t problems;
	/* per table */
	const char *object;
	const char *location;
	/* totals */
	uint64_t tables, snapshots, files, delete_files, records;
};

static void problem(struct vfy *v, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void problem(struct vfy *v, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	sl_tree_report(v->out, &v->problems, "problem", v->stream, v->object, fmt, ap);
	va_end(ap);
}

static int add_key(void *arg, const char *key, uint64_t size, int64_t mtime_ms)
{
	struct vfy *v = arg;
	struct key *k = sl_grow(v->keys, &v->cap, v->nkeys, sizeof *k, 256);

	if (!k) {
		v->oom = true;
		return -1;
	}
	v->keys = k;
	if (!(v->keys[v->nkeys].key = strdup(key))) {
		v->oom = true;
		return -1;
	}
	v->keys[v->nkeys].size = size;
	v->keys[v->nkeys].mtime_ms = mtime_ms;
	v->keys[v->nkeys++].ref = false;
	return 0;
}

static int cmp_key(const void *a, const void *b)
{
	return strcmp(((const struct key *)a)->key, ((const struct key *)b)->key);
}

static struct key *find_key(struct vfy *v, const char *key)
{
	struct key k = { .key = (char *)key };

	return bsearch(&k, v->keys, v->nkeys, sizeof *v->keys, cmp_key);
}

/* The store key of path, a location in the table's metadata, into key
 * (reset first).  Returns 0, or -1 when path is not under the table's
 * location (a problem is reported) or out of memory (v->oom). */
static int key_of(struct vfy *v, const char *path, struct sl_buf *key)
{
	size_t len = strlen(v->location);

	if (strncmp(path, v->location, len) != 0 || path[len] != '/') {
		problem(v, "\"%s\" is not under the table's location \"%s\"", path, v->location);
		return -1;
	}
	sl_buf_reset(key);
	sl_buf_printf(key, "%s/%s%s", v->stream, v->object, path + len);
	if (sl_buf_failed(key)) {
		v->oom = true;
		return -1;
	}
	return 0;
}

/* A local file holding key's content (store fetch).  Returns 0,
 * SL_STORE_NOT_FOUND, or a negative status with the message in err. */
static int fetch(struct vfy *v, const char *key, char **path, bool *temporary, char *err, size_t errlen)
{
	*path = NULL;
	*temporary = false;
	return v->store.ops->fetch(v->store.ctx, key, path, temporary, err, errlen);
}

static void unfetch(char *path, bool temporary)
{
	if (path && temporary)
		unlink(path);
	free(path);
}

/* Counts the records of the container file at path, reading every block
 * (its sync markers and checksums checked).  Returns 0, or -1 with a
 * message in err. */
static int count_records(const char *path, uint64_t *n, char *err, size_t errlen)
{
	struct sl_ocf_reader *r = NULL;
	const void *data;
	size_t len;
	uint64_t count;
	int got;

	*n = 0;
	if (sl_ocf_reader_open(&r, path, err, errlen) < 0)
		return -1;
	while ((got = sl_ocf_reader_block(r, &data, &len, &count, err, errlen)) > 0)
		*n += count;
	sl_ocf_reader_close(r);
	return got < 0 ? -1 : 0;
}

/* A file the current snapshot names, from manifest mkey's entry e. */
static int check_file(struct vfy *v, const char *mkey, const struct ice_entry *e, char *err, size_t errlen)
{
	struct sl_buf key;
	struct key *k;
	char *local = NULL;
	bool tmp = false;
	uint64_t n;
	int rc = 0;

	sl_buf_init(&key, 0);
	if (key_of(v, e->path, &key) < 0)
		goto out;
	if (!(k = find_key(v, key.data))) {
		problem(v, "%s file \"%s\" is missing (manifest \"%s\" lists it)",
			e->content == ICE_DATA ? "data" : "delete", key.data, mkey);
		goto out;
	}
	k->ref = true;
	if (e->content == ICE_DATA) {
		v->files++;
		v->records += (uint64_t)e->records;
	} else {
		v->delete_files++;
	}
	if (k->size != (uint64_t)e->size) {
		problem(v, "file \"%s\" has %" PRIu64 " bytes, manifest \"%s\" says %" PRId64, key.data, k->size,
			mkey, e->size);
		goto out;
	}
	if ((rc = fetch(v, key.data, &local, &tmp, err, errlen)) != 0) {
		if (rc == SL_STORE_NOT_FOUND) {
			problem(v, "file \"%s\" is missing (manifest \"%s\" lists it)", key.data, mkey);
			rc = 0;
		}
		goto out;
	}
	if (count_records(local, &n, err, errlen) < 0)
		problem(v, "file \"%s\" cannot be read to its end: %s", key.data, err);
	else if (n != (uint64_t)e->records)
		problem(v, "file \"%s\" holds %" PRIu64 " records, manifest \"%s\" claims %" PRId64, key.data, n,
			mkey, e->records);
out:
	unfetch(local, tmp);
	sl_buf_free(&key);
	return rc < 0 ? rc : 0;
}

/* A small object of the table that something names (a manifest list, a
 * manifest): present, with the size it was named with (size < 0: any;
 * another size is a problem, but it is read all the same), fetched into
 * *local.  Returns 1 when it is there to read, 0 when a
 * problem was reported, or a negative status. */
static int named_object(struct vfy *v, const char *what, const char *path, int64_t size, const char *by,
			struct sl_buf *key, char **local, bool *tmp, char *err, size_t errlen)
{
	struct key *k;
	int rc;

	if (key_of(v, path, key) < 0)
		return 0;
	if (!(k = find_key(v, key->data))) {
		problem(v, "%s \"%s\" is missing (%s names it)", what, key->data, by);
		return 0;
	}
	k->ref = true;
	if (size >= 0 && k->size != (uint64_t)size)  /* reported, and read all the same */
		problem(v, "%s \"%s\" has %" PRIu64 " bytes, %s says %" PRId64, what, key->data, k->size, by, size);
	if ((rc = fetch(v, key->data, local, tmp, err, errlen)) == SL_STORE_NOT_FOUND)
		problem(v, "%s \"%s\" is missing (%s names it)", what, key->data, by);
	return rc < 0 ? rc : rc == 0;
}

/* The manifests of the manifest list at path (of the current snapshot),
 * and the files they name. */
static int check_manifest_list(struct vfy *v, const char *path, const char *by, char *err, size_t errlen)
{
	struct ice_manifest_file *mf = NULL;
	struct ice_entry *e = NULL;
	struct sl_buf lkey, mkey;
	char *local = NULL, why[512];
	bool tmp = false;
	int nmf = 0, ne = 0, rc;

	sl_buf_init(&lkey, 0);
	sl_buf_init(&mkey, 0);
	if ((rc = named_object(v, "manifest list", path, -1, by, &lkey, &local, &tmp, err, errlen)) <= 0)
		goto out;
	rc = 0;
	if (ice_manifest_list_read(local, &mf, &nmf, why, sizeof why) < 0) {
		problem(v, "manifest list \"%s\" cannot be read: %s", lkey.data, why);
		goto out;
	}
	for (int i = 0; i < nmf && rc == 0 && !v->oom; i++) {
		unfetch(local, tmp);
		local = NULL;
		if ((rc = named_object(v, "manifest", mf[i].path, mf[i].length, lkey.data, &mkey, &local, &tmp, err,
				       errlen)) <= 0)
			continue;
		rc = 0;
		if (ice_manifest_read(local, &e, &ne, why, sizeof why) < 0) {
			problem(v, "manifest \"%s\" cannot be read: %s", mkey.data, why);
			continue;
		}
		for (int j = 0; j < ne && rc == 0; j++)
			if (e[j].status != 2)
				rc = check_file(v, mkey.data, &e[j], err, errlen);
		ice_entries_free(e, ne);
	}
out:
	unfetch(local, tmp);
	for (int i = 0; i < nmf; i++)
		free(mf[i].path);
	free(mf);
	sl_buf_free(&lkey);
	sl_buf_free(&mkey);
	return rc < 0 ? rc : 0;
}

static int64_t snap_int(const json_t *sn, const char *name)
{
	return (int64_t)json_integer_value(json_object_get(sn, name));
}

static const char *snap_text(const json_t *sn, const char *prop)
{
	const char *p = ice_snapshot_prop(sn, prop);

	return p ? p : "(none)";
}

/* The snapshot of meta with id, or NULL; *older receives the newest one
 * of a sequence number below seq (NULL: none). */
static const json_t *find_snapshot(const json_t *snaps, int64_t id, int64_t seq, const json_t **older)
{
	const json_t *found = NULL;
	size_t i;
	json_t *sn;

	*older = NULL;
	json_array_foreach(snaps, i, sn) {
		int64_t s = snap_int(sn, "sequence-number");
		if (snap_int(sn, "snapshot-id") == id)
			found = sn;
		if (s < seq && (!*older || s > snap_int(*older, "sequence-number")))
			*older = sn;
	}
	return found;
}

/* The chain of snapshots from the current one back to the oldest the
 * metadata holds (mkey: the metadata file). */
static void check_chain(struct vfy *v, const char *mkey, const json_t *meta, const json_t *cur)
{
	const json_t *snaps = json_object_get(meta, "snapshots"), *sn = cur, *p, *older;
	size_t steps = 0;

	for (; sn && steps <= json_array_size(snaps); steps++, sn = p) {
		int64_t id = snap_int(sn, "snapshot-id"), seq = snap_int(sn, "sequence-number");
		const char *st = ice_snapshot_prop(sn, "sluice.stream"), *csn, *pcsn;
		v->snapshots++;
		if (st && strcmp(st, v->stream) != 0)
			problem(v, "%s: snapshot %" PRId64 " was committed by stream \"%s\"", mkey, id, st);
		if (!json_object_get(sn, "parent-snapshot-id"))
			return;
		p = find_snapshot(snaps, snap_int(sn, "parent-snapshot-id"), seq, &older);
		if (!p) {
			if (older)
				problem(v, "%s: snapshot %" PRId64 " (sequence number %" PRId64 ", position %s) names "
					"parent %" PRId64 ", which the metadata does not hold, while it holds snapshot %"
					PRId64 " (sequence number %" PRId64 ", position %s): a gap in the chain, the "
					"changes between the two positions are in no snapshot", mkey, id, seq,
					snap_text(sn, "sluice.position"), snap_int(sn, "parent-snapshot-id"),
					snap_int(older, "snapshot-id"), snap_int(older, "sequence-number"),
					snap_text(older, "sluice.position"));
			return;
		}
		if (snap_int(p, "sequence-number") != seq - 1)
			problem(v, "%s: snapshot %" PRId64 " has sequence number %" PRId64 ", its parent %" PRId64
				" %" PRId64 ": a gap in the chain", mkey, id, seq, snap_int(p, "snapshot-id"),
				snap_int(p, "sequence-number"));
		csn = ice_snapshot_prop(sn, "sluice.last-csn");
		pcsn = ice_snapshot_prop(p, "sluice.last-csn");
		if (csn && pcsn && strcmp(pcsn, csn) > 0)
			problem(v, "%s: snapshot %" PRId64 " ends at change %s, before its parent %" PRId64 " (%s): "
				"positions that go back", mkey, id, csn, snap_int(p, "snapshot-id"), pcsn);
	}
	if (sn)
		problem(v, "%s: the snapshots' parents form a cycle", mkey);
}

/* Reads the metadata file of version ver of stream/object (ver 0: the one
 * version-hint.text names; *ver receives it) into *meta, its key into
 * mkey.  Returns 0; SL_STORE_NOT_FOUND when the file is missing; 2 when it
 * cannot be parsed, or the hint holds no version (why says so); or a
 * negative status with the message in err. */
static int get_meta(struct sl_store *st, const char *stream, const char *object, int64_t *ver, json_t **meta,
		    struct sl_buf *mkey, char *why, size_t whylen, char *err, size_t errlen)
{
	struct sl_buf b;
	json_error_t je;
	int rc;

	*meta = NULL;
	sl_buf_init(&b, 0);
	sl_buf_reset(mkey);
	if (*ver <= 0) {
		sl_buf_printf(mkey, "%s/%s%s", stream, object, HINT);
		if (sl_buf_failed(mkey))
			goto oom;
		if ((rc = st->ops->get(st->ctx, mkey->data, &b, err, errlen)) != 0)
			goto out;
		while (b.len > 0 && (b.data[b.len - 1] == '\n' || b.data[b.len - 1] == ' '))
			b.len--;
		if (sl_buf_putc(&b, '\0') < 0 || sl_parse_i64(b.data, 1, INT32_MAX, ver) < 0) {
			snprintf(why, whylen, "\"%s\" holds no version number", mkey->data);
			rc = 2;
			goto out;
		}
		sl_buf_reset(&b);
		sl_buf_reset(mkey);
	}
	sl_buf_printf(mkey, "%s/%s/metadata/v%" PRId64 ".metadata.json", stream, object, *ver);
	if (sl_buf_failed(mkey))
		goto oom;
	if ((rc = st->ops->get(st->ctx, mkey->data, &b, err, errlen)) != 0)
		goto out;
	if (!(*meta = json_loadb(b.data, b.len, 0, &je)) || !json_is_object(*meta) ||
	    !json_is_string(json_object_get(*meta, "location"))) {
		snprintf(why, whylen, "metadata file \"%s\" cannot be parsed: %s", mkey->data,
			 *meta ? "no location" : je.text);
		json_decref(*meta);
		*meta = NULL;
		rc = 2;
	}
	goto out;
oom:
	snprintf(err, errlen, "out of memory");
	rc = SL_EFAIL;
out:
	sl_buf_free(&b);
	return rc;
}

/* The table's current metadata, parsed, into *meta; *mkey its key.
 * Returns 1, 0 when a problem was reported, or a negative status. */
static int load_meta(struct vfy *v, struct sl_buf *mkey, json_t **meta, char *err, size_t errlen)
{
	char why[512];
	int64_t ver = 0;
	int rc = get_meta(&v->store, v->stream, v->object, &ver, meta, mkey, why, sizeof why, err, errlen);

	if (rc == SL_STORE_NOT_FOUND)
		problem(v, "\"%s\" is missing (version-hint.text names it)", mkey->data);
	else if (rc == 2)
		problem(v, "%s", why);
	return rc < 0 ? rc : rc == 0;
}

/* Notes the files under the table's data/ that the current snapshot does
 * not name. */
static void note_unreferenced(struct vfy *v)
{
	struct sl_buf prefix;
	uint64_t n = 0;

	sl_buf_init(&prefix, 0);
	sl_buf_printf(&prefix, "%s/%s/data/", v->stream, v->object);
	if (sl_buf_failed(&prefix)) {
		v->oom = true;
		return;
	}
	for (size_t i = 0; i < v->nkeys; i++)
		n += !strncmp(v->keys[i].key, prefix.data, prefix.len) && !v->keys[i].ref;
	if (n)
		fprintf(v->out, "note: table \"%s/%s\": %" PRIu64 " files under data/ that the current snapshot does "
			"not name (left by commits that did not complete, dropped by a TRUNCATE or a compaction)\n",
			v->stream, v->object, n);
	sl_buf_free(&prefix);
}

static int verify_table(struct vfy *v, char *err, size_t errlen)
{
	struct sl_buf mkey;
	json_t *meta = NULL;
	const json_t *cur;
	int rc;

	sl_buf_init(&mkey, 0);
	v->tables++;
	if ((rc = load_meta(v, &mkey, &meta, err, errlen)) <= 0)
		goto out;
	rc = 0;
	v->location = json_string_value(json_object_get(meta, "location"));
	if (!(cur = ice_meta_current_snapshot(meta))) {
		if (json_integer_value(json_object_get(meta, "current-snapshot-id")) > 0)
			problem(v, "%s: the current snapshot %" PRId64 " is not among its snapshots", mkey.data,
				(int64_t)json_integer_value(json_object_get(meta, "current-snapshot-id")));
		goto out;
	}
	check_chain(v, mkey.data, meta, cur);
	if (!json_is_string(json_object_get(cur, "manifest-list"))) {
		problem(v, "%s: the current snapshot has no manifest-list", mkey.data);
		goto out;
	}
	rc = check_manifest_list(v, json_string_value(json_object_get(cur, "manifest-list")), mkey.data, err,
				 errlen);
	note_unreferenced(v);
out:
	v->location = NULL;
	json_decref(meta);
	sl_buf_free(&mkey);
	return rc;
}

int ice_verify(struct sl_store store, const char *stream, FILE *out, char *err, size_t errlen)
{
	struct vfy v = { .store = store, .stream = stream, .out = out };
	size_t plen = strlen(stream), hlen = strlen(HINT);
	struct sl_buf obj;
	int rc;

	err[0] = '\0';
	sl_buf_init(&obj, 0);
	if ((rc = store.ops->list(store.ctx, stream, add_key, &v, err, errlen)) < 0 || v.oom)
		goto fail;
	qsort(v.keys, v.nkeys, sizeof *v.keys, cmp_key);
	for (size_t i = 0; i < v.nkeys && rc == 0; i++) {
		const char *k = v.keys[i].key;
		size_t len = strlen(k);
		/* "<stream>/<object>/metadata/version-hint.text", one level of object */
		if (len <= plen + 1 + hlen || strcmp(k + len - hlen, HINT) != 0 ||
		    memchr(k + plen + 1, '/', len - hlen - plen - 1))
			continue;
		/* the object's name copied: the keys stay as sorted, for find_key's bsearch */
		sl_buf_reset(&obj);
		sl_buf_append(&obj, k + plen + 1, len - hlen - plen - 1);
		if (sl_buf_failed(&obj)) {
			v.oom = true;
			goto fail;
		}
		v.object = obj.data;
		rc = verify_table(&v, err, errlen);
		if (v.oom)
			goto fail;
	}
	if (rc < 0)
		goto fail;
	sl_tree_report_more(out, "problem", v.problems);
	fprintf(out, "stream %s: %" PRIu64 " tables, %" PRIu64 " snapshots, %" PRIu64 " data files, %" PRIu64
		" delete files, %" PRIu64 " records in %s: ", stream, v.tables, v.snapshots, v.files, v.delete_files,
		v.records, store.ops->describe(store.ctx));
	if (v.problems)
		fprintf(out, "PROBLEMS FOUND: %" PRIu64 "\n", v.problems);
	else
		fprintf(out, "complete, nothing missing\n");
	rc = v.problems ? SL_EVERIFY : SL_OK;
	goto out;
fail:
	if (v.oom)
		snprintf(err, errlen, "stream \"%s\": out of memory verifying", stream);
	if (rc >= 0)
		rc = SL_EFAIL;
out:
	for (size_t i = 0; i < v.nkeys; i++)
		free(v.keys[i].key);
	free(v.keys);
	sl_buf_free(&obj);
	return rc;
}

/* ---------------------------------------------------------------------- */
/* Compaction                                                             */

#define MAX_COMMIT_TRIES 20

/* A key of an equality delete, with its data sequence number. */
struct dkey {
	unsigned char *k;
	size_t len;
	int64_t seq;
};

/* A rewritten file being written: one per schema of the files read. */
struct outf {
	struct cpt *c;
	struct sl_ocf_writer *w;
	struct sl_store_file *file;
	struct ice_col_stats *stats;
	char *key;
	int64_t records;
	uint64_t size;
	struct ice_manifest_file mf;     /* its manifest, once written */
};

struct cpt {
	struct sl_store *st;
	const struct ice_compact_conf *cc;
	const char *object;
	json_t *meta;
	int64_t version;
	const char *location;            /* meta's */
	int64_t cur_seq;                 /* of the snapshot read */
	struct ice_manifest_file *mf;    /* its manifest list */
	int nmf;
	bool *cand;                      /* mf[i] is rewritten */
	struct ice_entry **ents;         /* mf[i]'s entries */
	int *nents;
	bool merge;
	struct ice_schema *schemas;
	struct sl_buf *avro;             /* their data files' Avro schemas */
	int nschemas;
	int cur;                         /* the current schema's index */
	struct dkey *dels;
	size_t ndels, cap;
	struct outf *out;                /* nschemas of them */
	int64_t new_id;
	avro_writer_t aw;
	struct sl_buf rec, key;
	struct ice_compact_result *res;
};

static int cmp_dkey(const void *a, const void *b)
{
	const struct dkey *x = a, *y = b;
	int c = memcmp(x->k, y->k, x->len < y->len ? x->len : y->len);

	return c ? c : (x->len > y->len) - (x->len < y->len);
}

static void free_list(struct ice_manifest_file *mf, int n)
{
	for (int i = 0; mf && i < n; i++)
		free(mf[i].path);
	free(mf);
}

int ice_current_manifests(struct sl_store *st, const char *stream, const char *object, const json_t *meta,
			  struct ice_manifest_file **mf, int *n, char *err, size_t errlen)
{
	const json_t *cur = ice_meta_current_snapshot(meta);
	const char *loc = json_string_value(json_object_get(meta, "location"));
	const char *path = cur ? json_string_value(json_object_get(cur, "manifest-list")) : NULL;
	struct sl_buf key;
	char *local = NULL;
	bool tmp = false;
	int rc;

	*mf = NULL;
	*n = 0;
	if (!cur)
		return 0;
	sl_buf_init(&key, 0);
	if (!path || !loc || strncmp(path, loc, strlen(loc)) != 0 || path[strlen(loc)] != '/') {
		snprintf(err, errlen, "table \"%s/%s\": the current snapshot's manifest list is not under its location",
			 stream, object);
		return -1;
	}
	sl_buf_printf(&key, "%s/%s%s", stream, object, path + strlen(loc));
	if (sl_buf_failed(&key))
		rc = -1;
	else if ((rc = st->ops->fetch(st->ctx, key.data, &local, &tmp, err, errlen)) == SL_STORE_NOT_FOUND)
		snprintf(err, errlen, "the manifest list \"%s\" is missing", key.data);
	if (rc == 0)
		rc = ice_manifest_list_read(local, mf, n, err, errlen);
	unfetch(local, tmp);
	sl_buf_free(&key);
	return rc != 0 ? -1 : 0;
}

/* A location of the table as a store key, appended to key (reset first). */
static int cpt_key(struct cpt *c, const char *path, struct sl_buf *key, char *err, size_t errlen)
{
	size_t len = strlen(c->location);

	sl_buf_reset(key);
	if (strncmp(path, c->location, len) != 0 || path[len] != '/') {
		snprintf(err, errlen, "table \"%s/%s\": \"%s\" is not under its location", c->cc->stream, c->object,
			 path);
		return -1;
	}
	sl_buf_printf(key, "%s/%s%s", c->cc->stream, c->object, path + len);
	return sl_buf_failed(key) ? -1 : 0;
}

/* Opens the records of the file at location path: *rd, fetched through
 * *local (unfetch it after closing *rd). */
static int cpt_open(struct cpt *c, const char *path, struct sl_avro_read **rd, char **local, bool *tmp, char *err,
		    size_t errlen)
{
	struct sl_buf key;
	int rc = -1;

	sl_buf_init(&key, 0);
	*local = NULL;
	*tmp = false;
	if (cpt_key(c, path, &key, err, errlen) < 0)
		goto out;
	if ((rc = c->st->ops->fetch(c->st->ctx, key.data, local, tmp, err, errlen)) == SL_STORE_NOT_FOUND)
		snprintf(err, errlen, "\"%s\" is missing", key.data);
	if (rc == 0)
		rc = sl_avro_read_open(rd, *local, err, errlen);
out:
	sl_buf_free(&key);
	return rc != 0 ? -1 : 0;
}

/* The field of the current schema with f's field id, or f. */
static const struct ice_field *cur_field(const struct cpt *c, const struct ice_field *f)
{
	for (int i = 0; i < c->schemas[c->cur].nfields; i++)
		if (c->schemas[c->cur].f[i].id == f->id)
			return &c->schemas[c->cur].f[i];
	return f;
}

/* The field of schema s with field id id, or NULL (a column added since s,
 * or dropped and added again under its name: a new field). */
static const struct ice_field *field_by_id(const struct ice_schema *s, int id)
{
	for (int i = 0; i < s->nfields; i++)
		if (s->f[i].id == id)
			return &s->f[i];
	return NULL;
}

/* The encoded key of record val (its key fields in schema order, each as
 * the current schema's type: a widened key) into c->key. */
static int record_key(struct cpt *c, const struct ice_schema *s, avro_value_t *val)
{
	sl_buf_reset(&c->key);
	for (int i = 0; i < s->nfields; i++) {
		avro_value_t f;
		if (!s->f[i].key)
			continue;
		if (avro_value_get_by_name(val, s->f[i].name, &f, NULL) != 0 ||
		    ice_value_as(c->aw, &c->key, &f, cur_field(c, &s->f[i])) < 0)
			return -1;
	}
	return 0;
}

/* Merge mode: the keys of every equality delete file of the snapshot read,
 * sorted, each with the greatest sequence number that deletes it. */
static int cpt_deletes(struct cpt *c, const struct ice_schema *cur, char *err, size_t errlen)
{
	for (int i = 0; i < c->nmf; i++) {
		for (int j = 0; c->mf[i].deletes && j < c->nents[i]; j++) {
			struct sl_avro_read *rd = NULL;
			avro_value_t *val;
			char *local;
			bool tmp;
			int got;
			if (c->ents[i][j].status == 2)
				continue;
			if (cpt_open(c, c->ents[i][j].path, &rd, &local, &tmp, err, errlen) < 0) {
				unfetch(local, tmp);
				return -1;
			}
			while ((got = sl_avro_read_next(rd, &val, err, errlen)) > 0) {
				struct dkey *d;
				if (c->ndels == c->cap) {
					size_t cap = c->cap ? 2 * c->cap : 1024;
					if (!(d = realloc(c->dels, cap * sizeof *d)))
						break;
					c->dels = d;
					c->cap = cap;
				}
				d = &c->dels[c->ndels];
				if (record_key(c, cur, val) < 0 || !(d->k = malloc(c->key.len + 1)))
					break;
				memcpy(d->k, c->key.data, c->key.len);
				d->len = c->key.len;
				d->seq = c->ents[i][j].seq >= 0 ? c->ents[i][j].seq : c->mf[i].sequence_number;
				c->ndels++;
				c->res->deletes_in++;
			}
			sl_avro_read_close(rd);
			unfetch(local, tmp);
			if (got != 0) {
				if (got > 0)
					snprintf(err, errlen, "table \"%s/%s\": out of memory", c->cc->stream, c->object);
				return -1;
			}
		}
	}
	qsort(c->dels, c->ndels, sizeof *c->dels, cmp_dkey);
	return 0;
}

/* Merge mode: whether a delete of a later sequence number than seq removes
 * the row of key c->key. */
static bool deleted(struct cpt *c, int64_t seq)
{
	struct dkey k = { .k = (unsigned char *)c->key.data, .len = c->key.len };
	size_t lo = 0, hi = c->ndels;

	while (lo < hi) {  /* the first of the key's deletes */
		size_t mid = lo + (hi - lo) / 2;
		if (cmp_dkey(&c->dels[mid], &k) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	for (; lo < c->ndels && cmp_dkey(&c->dels[lo], &k) == 0; lo++)
		if (c->dels[lo].seq > seq)
			return true;
	return false;
}

/* The store's write for a rewritten file's container bytes. */
static int out_write(void *arg, const struct iovec *iov, int iovcnt, char *err, size_t errlen)
{
	struct outf *o = arg;
	struct cpt *c = o->c;

	for (int i = 0; i < iovcnt; i++)
		o->size += iov[i].iov_len;
	return c->st->ops->file_write(o->file, iov, iovcnt, err, errlen);
}

/* Opens the rewritten file of schema k. */
static int out_open(struct cpt *c, int k, char *err, size_t errlen)
{
	struct outf *o = &c->out[k];
	struct sl_ocf_out oo = { .write = out_write, .arg = o };
	struct sl_buf dir;
	int rc;

	o->c = c;
	sl_buf_init(&dir, 0);
	sl_buf_printf(&dir, "%s/%s/data", c->cc->stream, c->object);
	if (!(o->stats = calloc((size_t)c->schemas[k].nfields + 1, sizeof *o->stats)) || sl_buf_failed(&dir)) {
		sl_buf_free(&dir);
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	rc = c->st->ops->file_new(c->st->ctx, dir.data, "compact", &o->file, err, errlen);
	sl_buf_free(&dir);
	if (rc < 0)
		return rc;
	return sl_ocf_open_out(&o->w, &oo, "compacted data file", c->avro[k].data, c->avro[k].len, c->cc->codec, 0,
			       err, errlen);
}

/* The schema of a data file, by its Avro schema (sluice writes each
 * schema's the same way), or -1. */
static int schema_of(struct cpt *c, const struct sl_buf *avro)
{
	for (int k = 0; k < c->nschemas; k++)
		if (avro->len == c->avro[k].len && !memcmp(avro->data, c->avro[k].data, avro->len))
			return k;
	return -1;
}

/* Appends to c->rec record val (of older schema old) as a record of schema
 * s: each field by its field id, converted to a type widened since
 * (ice_widen.h), a field the record lacks (a column added since) as null;
 * the record's fields that s lacks (columns dropped since) are left out. */
static int encode_as(struct cpt *c, const struct ice_schema *s, const struct ice_schema *old, avro_value_t *val)
{
	for (int i = 0; i < s->nfields; i++) {
		const struct ice_field *of = field_by_id(old, s->f[i].id);
		avro_value_t f;
		if (of && avro_value_get_by_name(val, of->name, &f, NULL) == 0) {
			if (ice_value_as(c->aw, &c->rec, &f, &s->f[i]) < 0)
				return -1;
		} else if (s->f[i].required || sl_buf_putc(&c->rec, 0) < 0) {  /* the union's null branch */
			return -1;
		}
	}
	return 0;
}

/* Copies the rows of data file e (of manifest m) that no later delete
 * removes into the rewritten file, in the current schema (an engine reads
 * a file with the schema of the snapshot that added it). */
static int rewrite_file(struct cpt *c, const struct ice_manifest_file *m, const struct ice_entry *e, char *err,
			size_t errlen)
{
	struct sl_avro_read *rd = NULL;
	avro_value_t *val;
	char *local;
	bool tmp;
	int64_t seq = e->seq >= 0 ? e->seq : m->sequence_number;
	int k, got = -1;

	if (cpt_open(c, e->path, &rd, &local, &tmp, err, errlen) < 0)
		goto out;
	if ((k = schema_of(c, sl_avro_read_schema(rd))) < 0) {
		snprintf(err, errlen, "data file \"%s\" has an Avro schema of none of the table's schemas", e->path);
		goto out;
	}
	if (!c->out[c->cur].w && out_open(c, c->cur, err, errlen) < 0)
		goto out;
	c->res->files_in++;
	while ((got = sl_avro_read_next(rd, &val, err, errlen)) > 0) {
		struct outf *o = &c->out[c->cur];
		c->res->records_in++;
		if (c->merge && (record_key(c, &c->schemas[k], val) < 0 || deleted(c, seq)))
			continue;
		sl_buf_reset(&c->rec);
		if ((k == c->cur ? sl_avro_value_bytes(c->aw, &c->rec, val) :
		     encode_as(c, &c->schemas[c->cur], &c->schemas[k], val)) < 0 ||
		    ice_stats_add(o->stats, &c->schemas[c->cur], false, (const unsigned char *)c->rec.data,
				  c->rec.len) < 0 ||
		    sl_ocf_append(o->w, c->rec.data, c->rec.len, err, errlen) < 0) {
			got = -1;
			if (!err[0])
				snprintf(err, errlen, "data file \"%s\": could not copy a record", e->path);
			break;
		}
		o->records++;
	}
out:
	if (rd)
		sl_avro_read_close(rd);
	unfetch(local, tmp);
	return got < 0 ? -1 : 0;
}

/* Closes and publishes the rewritten files, and writes a manifest of each.
 * Its entry's data sequence number is the snapshot read's: the equality
 * deletes committed after it still apply to its rows, and those up to it,
 * applied here, would not.  Its file sequence number is null, the
 * manifest's in the manifest list: the replace snapshot's, which
 * cpt_commit learns only when it commits (a retry on top of another
 * commit takes the next one). */
static int out_finish(struct cpt *c, char *err, size_t errlen)
{
	struct sl_buf key, enc;
	int rc = -1;

	sl_buf_init(&key, 0);
	sl_buf_init(&enc, 0);
	for (int k = 0; k < c->nschemas; k++) {
		struct outf *o = &c->out[k];
		if (!o->w)
			continue;
		rc = sl_ocf_close(o->w, false, err, errlen);
		o->w = NULL;
		sl_buf_reset(&key);
		sl_buf_printf(&key, "%s/%s/data/compact-%016" PRIx64 "-%d.avro", c->cc->stream, c->object,
			      (uint64_t)c->new_id, k);
		if (rc < 0 || sl_buf_failed(&key) ||
		    (rc = c->st->ops->file_finish(c->st->ctx, o->file, key.data, err, errlen)) < 0 ||
		    (rc = c->st->ops->file_publish(c->st->ctx, o->file, key.data, err, errlen)) != 0)
			goto fail;
		o->file = NULL;
		if (!(o->key = strdup(key.data)))
			goto oom;
		c->res->files_out++;
		c->res->rows_out += o->records;
	}
	if (c->st->ops->sync && (rc = c->st->ops->sync(c->st->ctx, err, errlen)) < 0)
		goto out;
	for (int k = 0; k < c->nschemas; k++) {
		struct outf *o = &c->out[k];
		struct ice_data_file df = { .content = ICE_DATA, .records = o->records, .size = (int64_t)o->size,
					    .stats = o->stats };
		if (!o->key)
			continue;
		sl_buf_reset(&key);
		sl_buf_reset(&enc);
		sl_buf_printf(&key, "%s%s", c->location, o->key + strlen(c->cc->stream) + strlen(c->object) + 1);
		if (sl_buf_failed(&key) || !(df.path = o->mf.path = strdup(key.data)))
			goto oom;
		sl_buf_reset(&key);
		sl_buf_printf(&key, "%s/%s/metadata/%" PRId64 "-c%d.avro", c->cc->stream, c->object, c->new_id, k);
		if (sl_buf_failed(&key) ||
		    ice_manifest_encode(&enc, &c->schemas[k], c->new_id, c->cur_seq, -1, &df, 1) < 0)
			goto oom;
		free(o->mf.path);
		o->mf.path = NULL;
		o->mf.length = (int64_t)enc.len;
		if ((rc = c->st->ops->put(c->st->ctx, key.data, enc.data, enc.len, err, errlen)) < 0)
			goto out;
		sl_buf_reset(&enc);
		sl_buf_printf(&enc, "%s%s", c->location, key.data + strlen(c->cc->stream) + strlen(c->object) + 1);
		if (sl_buf_failed(&enc) || !(o->mf.path = strdup(enc.data)))
			goto oom;
		o->mf.min_sequence_number = c->cur_seq;
		o->mf.snapshot_id = c->new_id;
		o->mf.added_files = 1;
		o->mf.added_rows = o->records;
	}
	rc = 0;
	goto out;
fail:
	if (rc > 0)
		snprintf(err, errlen, "\"%s\" exists already", key.data);
	rc = -1;
	goto out;
oom:
	snprintf(err, errlen, "table \"%s/%s\": out of memory", c->cc->stream, c->object);
	rc = -1;
out:
	sl_buf_free(&key);
	sl_buf_free(&enc);
	return rc;
}

/* Reads what the compaction of the table needs: its current metadata and
 * manifests, which of them are rewritten, and its schemas.  Returns 0 (and
 * nothing to do when no manifest is a candidate), or -1. */
static int cpt_load(struct cpt *c, char *err, size_t errlen)
{
	const json_t *cur, *schemas, *js;
	struct sl_buf mkey;
	char why[512];
	size_t i;
	int rc, ndata = 0, ndel = 0;

	sl_buf_init(&mkey, 0);
	c->version = 0;
	rc = get_meta(c->st, c->cc->stream, c->object, &c->version, &c->meta, &mkey, why, sizeof why, err, errlen);
	if (rc > 0)
		snprintf(err, errlen, "%s", rc == 2 ? why : "the current metadata file is missing");
	sl_buf_free(&mkey);
	if (rc != 0 || !(cur = ice_meta_current_snapshot(c->meta)))
		return rc != 0 ? -1 : 0;
	c->location = json_string_value(json_object_get(c->meta, "location"));
	c->cur_seq = snap_int(cur, "sequence-number");
	c->merge = json_array_size(json_object_get(ice_meta_current_schema(c->meta), "identifier-field-ids")) > 0;
	if (ice_current_manifests(c->st, c->cc->stream, c->object, c->meta, &c->mf, &c->nmf, err, errlen) < 0)
		return -1;
	if (!(c->cand = calloc((size_t)c->nmf + 1, sizeof *c->cand)) ||
	    !(c->ents = calloc((size_t)c->nmf + 1, sizeof *c->ents)) ||
	    !(c->nents = calloc((size_t)c->nmf + 1, sizeof *c->nents)))
		goto oom;
	for (int m = 0; m < c->nmf; m++) {
		char *local = NULL;
		bool tmp = false;
		if (cpt_key(c, c->mf[m].path, &c->key, err, errlen) < 0 ||
		    (rc = c->st->ops->fetch(c->st->ctx, c->key.data, &local, &tmp, err, errlen)) != 0) {
			if (rc == SL_STORE_NOT_FOUND)
				snprintf(err, errlen, "the manifest \"%s\" is missing", c->key.data);
			unfetch(local, tmp);
			return -1;
		}
		rc = ice_manifest_read(local, &c->ents[m], &c->nents[m], err, errlen);
		unfetch(local, tmp);
		if (rc < 0)
			return -1;
		c->cand[m] = c->merge || !c->mf[m].deletes;
		for (int j = 0; j < c->nents[m] && !c->merge; j++)
			if (c->ents[m][j].status != 2 && (uint64_t)c->ents[m][j].size >= c->cc->small_bytes)
				c->cand[m] = false;
		if (c->cand[m] && c->mf[m].deletes)
			ndel++;
		else if (c->cand[m])
			ndata += c->nents[m];
	}
	if (ndata < c->cc->min_files && !ndel) {
		memset(c->cand, 0, (size_t)c->nmf * sizeof *c->cand);
		return 0;
	}
	schemas = json_object_get(c->meta, "schemas");
	if (!(c->schemas = calloc(json_array_size(schemas) + 1, sizeof *c->schemas)) ||
	    !(c->avro = calloc(json_array_size(schemas) + 1, sizeof *c->avro)) ||
	    !(c->out = calloc(json_array_size(schemas) + 1, sizeof *c->out)))
		goto oom;
	json_array_foreach(schemas, i, js) {
		sl_buf_init(&c->avro[c->nschemas], 0);
		if (ice_schema_from_json(&c->schemas[c->nschemas], js) < 0) {
			snprintf(err, errlen, "table \"%s/%s\": schema %d holds a type sluice does not write",
				 c->cc->stream, c->object, (int)json_integer_value(json_object_get(js, "schema-id")));
			return -1;
		}
		if (ice_data_avro_schema(&c->avro[c->nschemas], &c->schemas[c->nschemas]) < 0)
			goto oom;
		if (c->schemas[c->nschemas].id == (int)json_integer_value(json_object_get(c->meta, "current-schema-id")))
			c->cur = c->nschemas;
		c->nschemas++;
	}
	return 0;
oom:
	snprintf(err, errlen, "table \"%s/%s\": out of memory", c->cc->stream, c->object);
	return -1;
}

int ice_remove_metadata(struct sl_store *st, const char *loc, const char *key, const json_t *gone)
{
	size_t i, len = strlen(loc);
	struct sl_buf k;
	char err[SL_ERRLEN];
	json_t *e;
	int n = 0;

	sl_buf_init(&k, 0);
	json_array_foreach(gone, i, e) {
		const char *f = json_string_value(e);
		if (!f || strncmp(f, loc, len) != 0 || strncmp(f + len, "/metadata/v", 11) != 0)
			continue;   /* not one of the table's metadata files: left alone */
		sl_buf_reset(&k);
		sl_buf_printf(&k, "%s%s", key, f + len);
		if (sl_buf_failed(&k))
			break;
		if (st->ops->remove(st->ctx, k.data, err, sizeof err) < 0)
			sl_warn("iceberg table \"%s\": could not remove the old metadata file \"%s\" (a compaction "
				"removes it later): %s", loc, f, err);
		else
			n++;
	}
	sl_buf_free(&k);
	return n;
}

/* Publishes meta as version ver without replacing a file (the store's
 * put_new, as the agent's commit), then version-hint.text.  Returns 0,
 * SL_STORE_EXISTS, or -1. */
static int publish(struct cpt *c, int64_t ver, char *err, size_t errlen)
{
	char *text = json_dumps(c->meta, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
	struct sl_buf key, num;
	int rc = -1;

	sl_buf_init(&key, 0);
	sl_buf_init(&num, 0);
	sl_buf_printf(&key, "%s/%s/metadata/v%" PRId64 ".metadata.json", c->cc->stream, c->object, ver);
	sl_buf_printf(&num, "%" PRId64, ver);
	if (!text || sl_buf_failed(&key) || sl_buf_failed(&num)) {
		snprintf(err, errlen, "table \"%s/%s\": out of memory", c->cc->stream, c->object);
		goto out;
	}
	if ((rc = c->st->ops->put_new(c->st->ctx, key.data, text, strlen(text), err, errlen)) != 0) {
		rc = rc == SL_STORE_EXISTS ? rc : -1;
		goto out;
	}
	sl_buf_reset(&key);
	sl_buf_printf(&key, "%s/%s%s", c->cc->stream, c->object, HINT);
	rc = sl_buf_failed(&key) ? -1 : c->st->ops->put(c->st->ctx, key.data, num.data, num.len, err, errlen);
out:
	free(text);
	sl_buf_free(&key);
	sl_buf_free(&num);
	return rc;
}

/* Another writer committed first: reads the newest metadata into c->meta
 * and its manifest list into *mf.  Returns 1 when the compaction still
 * applies on top of it, 0 when a TRUNCATE since made it moot, or -1. */
static int reload(struct cpt *c, struct ice_manifest_file **mf, int *nmf, char *err, size_t errlen)
{
	struct sl_buf mkey;
	char why[512];
	json_t *meta;
	const json_t *sn;
	size_t i;
	int rc;

	sl_buf_init(&mkey, 0);
	for (;;) {
		int64_t ver = c->version + 1;
		rc = get_meta(c->st, c->cc->stream, c->object, &ver, &meta, &mkey, why, sizeof why, err, errlen);
		if (rc == SL_STORE_NOT_FOUND)
			break;
		if (rc != 0) {
			if (rc == 2)
				snprintf(err, errlen, "%s", why);
			sl_buf_free(&mkey);
			return -1;
		}
		json_decref(c->meta);
		c->meta = meta;
		c->location = json_string_value(json_object_get(meta, "location"));
		c->version = ver;
	}
	sl_buf_free(&mkey);
	json_array_foreach(json_object_get(c->meta, "snapshots"), i, sn)
		if (snap_int(sn, "sequence-number") > c->cur_seq && ice_snapshot_prop(sn, "sluice.truncate"))
			return 0;
	free_list(*mf, *nmf);
	*mf = NULL;
	*nmf = 0;
	return ice_current_manifests(c->st, c->cc->stream, c->object, c->meta, mf, nmf, err, errlen) < 0 ? -1 : 1;
}

static int expire(struct cpt *c, int64_t now_ms, char *err, size_t errlen);
static int remove_orphans(struct cpt *c, int64_t now_ms, char *err, size_t errlen);
static int abort_uploads(struct cpt *c, char *err, size_t errlen);

/* Whether path is one of the manifests the compaction rewrote. */
static bool rewritten(const struct cpt *c, const char *path)
{
	for (int m = 0; m < c->nmf; m++)
		if (c->cand[m] && !strcmp(c->mf[m].path, path))
			return true;
	return false;
}

/* Commits the rewritten files as a replace snapshot on top of the current
 * one: its manifest list holds their manifests and every manifest of the
 * current snapshot that was not rewritten (also those an agent committed
 * meanwhile).  When another writer commits first, it reads that commit and
 * tries again on top of it. */
static int cpt_commit(struct cpt *c, char *err, size_t errlen)
{
	struct ice_manifest_file *cur_mf = NULL, *list = NULL;
	struct sl_buf lkey, lpath, enc, prev;
	json_t *gone;
	int ncur = 0, rc = -1;

	sl_buf_init(&lkey, 0);
	sl_buf_init(&lpath, 0);
	sl_buf_init(&enc, 0);
	sl_buf_init(&prev, 0);
	sl_buf_printf(&lkey, "%s/%s/metadata/snap-%" PRId64 ".avro", c->cc->stream, c->object, c->new_id);
	sl_buf_printf(&lpath, "%s/metadata/snap-%" PRId64 ".avro", c->location, c->new_id);
	if (!(list = calloc((size_t)c->nschemas + 1, sizeof *list)) || sl_buf_failed(&lkey) || sl_buf_failed(&lpath))
		goto oom;
	/* the snapshot read, first: its list without copying it */
	cur_mf = c->mf;
	ncur = c->nmf;
	for (int tries = 0; tries < MAX_COMMIT_TRIES; tries++) {
		const json_t *cur = ice_meta_current_snapshot(c->meta);
		struct ice_snapshot sn = {
			.id = c->new_id, .parent_id = snap_int(cur, "snapshot-id"),
			.sequence_number = (int64_t)json_integer_value(json_object_get(c->meta, "last-sequence-number")) + 1,
			.timestamp_ms = sl_now_us() / 1000, .manifest_list = lpath.data,
			.schema_id = (int)json_integer_value(json_object_get(c->meta, "current-schema-id")),
			.added_files = c->res->files_out, .added_records = c->res->rows_out, .replace = true,
			.stream = c->cc->stream, .position = ice_snapshot_prop(cur, "sluice.position"),
			.last_csn = ice_snapshot_prop(cur, "sluice.last-csn"),
		};
		struct ice_manifest_file *l;
		int n = 0;
		if (!(l = realloc(list, ((size_t)c->nschemas + (size_t)ncur + 1) * sizeof *list)))
			goto oom;
		list = l;
		for (int k = 0; k < c->nschemas; k++) {
			if (c->out[k].mf.path) {
				list[n] = c->out[k].mf;
				list[n++].sequence_number = sn.sequence_number;
			}
		}
		for (int m = 0; m < ncur; m++)
			if (!rewritten(c, cur_mf[m].path))
				list[n++] = cur_mf[m];
		sl_buf_reset(&enc);
		sl_buf_reset(&prev);
		sl_buf_printf(&prev, "%s/metadata/v%" PRId64 ".metadata.json", c->location, c->version);
		if (ice_manifest_list_encode(&enc, &sn, list, n) < 0 || sl_buf_failed(&prev))
			goto oom;
		if (c->st->ops->put(c->st->ctx, lkey.data, enc.data, enc.len, err, errlen) < 0)
			goto out;
		if (ice_meta_add_snapshot(c->meta, &sn, prev.data,
					  (int64_t)json_integer_value(json_object_get(c->meta, "last-updated-ms"))) < 0 ||
		    !(gone = ice_meta_trim_log(c->meta)))
			goto oom;
		json_decref(gone);   /* remove_orphans then sweeps what left the log */
		if ((rc = publish(c, c->version + 1, err, errlen)) != SL_STORE_EXISTS) {
			if (rc == 0)
				c->version++;
			c->res->done = rc == 0;
			goto out;
		}
		if (cur_mf == c->mf)
			cur_mf = NULL, ncur = 0;
		if ((rc = reload(c, &cur_mf, &ncur, err, errlen)) <= 0)
			goto out;
		rc = -1;
	}
	snprintf(err, errlen, "table \"%s/%s\": other commits came first %d times", c->cc->stream, c->object,
		 MAX_COMMIT_TRIES);
	goto out;
oom:
	snprintf(err, errlen, "table \"%s/%s\": out of memory", c->cc->stream, c->object);
	rc = -1;
out:
	if (cur_mf != c->mf)
		free_list(cur_mf, ncur);
	free(list);
	sl_buf_free(&lkey);
	sl_buf_free(&lpath);
	sl_buf_free(&enc);
	sl_buf_free(&prev);
	return rc;
}

static void cpt_free(struct cpt *c)
{
	for (int m = 0; c->ents && m < c->nmf; m++)
		ice_entries_free(c->ents[m], c->nents[m]);
	free(c->ents);
	free(c->nents);
	free(c->cand);
	free_list(c->mf, c->nmf);
	for (int k = 0; k < c->nschemas; k++) {
		ice_schema_free(&c->schemas[k]);
		sl_buf_free(&c->avro[k]);
		if (c->out[k].w)
			sl_ocf_abort(c->out[k].w);
		if (c->out[k].file)
			c->st->ops->file_discard(c->st->ctx, c->out[k].file);
		free(c->out[k].stats);
		free(c->out[k].key);
		free(c->out[k].mf.path);
	}
	free(c->schemas);
	free(c->avro);
	free(c->out);
	for (size_t i = 0; i < c->ndels; i++)
		free(c->dels[i].k);
	free(c->dels);
	if (c->aw)
		avro_writer_free(c->aw);
	sl_buf_free(&c->rec);
	sl_buf_free(&c->key);
	json_decref(c->meta);
}

int ice_compact_table(struct sl_store *st, const struct ice_compact_conf *cc, const char *object,
		      struct ice_compact_result *res, char *err, size_t errlen)
{
	struct cpt c = { .st = st, .cc = cc, .object = object, .res = res, .aw = avro_writer_memory(NULL, 0) };
	bool any = false;
	int rc = -1;

	memset(res, 0, sizeof *res);
	sl_buf_init(&c.rec, 0);
	sl_buf_init(&c.key, 0);
	err[0] = '\0';
	if (!c.aw) {
		snprintf(err, errlen, "out of memory");
		goto out;
	}
	if (cpt_load(&c, err, errlen) < 0)
		goto out;
	for (int m = 0; m < c.nmf; m++)
		any |= c.cand[m];
	if (!any)
		goto maintain;
	c.new_id = (int64_t)(sl_now_us() ^ ((uint64_t)getpid() << 40)) & INT64_MAX;
	for (int k = 0; c.merge && k < c.nschemas; k++)
		if (c.schemas[k].id == (int)json_integer_value(json_object_get(c.meta, "current-schema-id")) &&
		    cpt_deletes(&c, &c.schemas[k], err, errlen) < 0)
			goto out;
	for (int m = 0; m < c.nmf; m++)
		for (int j = 0; c.cand[m] && !c.mf[m].deletes && j < c.nents[m]; j++)
			if (c.ents[m][j].status != 2 && rewrite_file(&c, &c.mf[m], &c.ents[m][j], err, errlen) < 0)
				goto out;
	if (out_finish(&c, err, errlen) < 0 || cpt_commit(&c, err, errlen) < 0)
		goto out;
maintain:
	if (c.meta && ice_meta_current_snapshot(c.meta) &&
	    (expire(&c, sl_now_us() / 1000, err, errlen) < 0 || remove_orphans(&c, sl_now_us() / 1000, err, errlen) < 0))
		goto out;
	if (st->ops->abort_uploads && abort_uploads(&c, err, errlen) < 0)
		goto out;
	rc = 0;
out:
	if (rc < 0 && !strstr(err, object)) {
		char tmp[SL_ERRLEN];
		snprintf(tmp, sizeof tmp, "%s", err);
		snprintf(err, errlen, "compacting table \"%s/%s\": %s", cc->stream, object, tmp);
	}
	cpt_free(&c);
	return rc;
}

/* Collects an object that has a version-hint.text. */
static int add_object(void *arg, const char *key, uint64_t size, int64_t mtime_ms)
{
	struct vfy *v = arg;

	(void)size;
	return strlen(key) > strlen(HINT) && !strcmp(key + strlen(key) - strlen(HINT), HINT) ? add_key(v, key, 0, mtime_ms) : 0;
}

int ice_compact(struct sl_store *st, const struct ice_compact_conf *cc, const char *object, FILE *out, char *err,
		size_t errlen)
{
	struct vfy v = { .stream = cc->stream };
	size_t plen = strlen(cc->stream), hlen = strlen(HINT);
	int rc = 0;

	if (st->ops->list(st->ctx, cc->stream, add_object, &v, err, errlen) < 0 || v.oom) {
		if (v.oom)
			snprintf(err, errlen, "out of memory");
		rc = -1;
	}
	qsort(v.keys, v.nkeys, sizeof *v.keys, cmp_key);
	for (size_t i = 0; i < v.nkeys && rc == 0; i++) {
		struct ice_compact_result res;
		char *obj = v.keys[i].key + plen + 1;
		obj[strlen(obj) - hlen] = '\0';
		if (strchr(obj, '/') || (object && strcmp(obj, object)))
			continue;
		if ((rc = ice_compact_table(st, cc, obj, &res, err, errlen)) < 0)
			break;
		if (res.done)
			fprintf(out, "stream %s: %s: %d data files, %" PRId64 " records, %d equality deletes -> %d data "
				"file%s, %" PRId64 " rows", cc->stream, obj, res.files_in, res.records_in, res.deletes_in,
				res.files_out, res.files_out == 1 ? "" : "s", res.rows_out);
		else
			fprintf(out, "stream %s: %s: nothing to compact", cc->stream, obj);
		fprintf(out, "; %d snapshots expired; %d unreferenced files removed, %d kept (younger than orphan_grace); "
			"%d old metadata files removed", res.expired, res.orphans_removed, res.orphans_young,
			res.metadata_removed);
		if (st->ops->abort_uploads)
			fprintf(out, "; %d incomplete uploads aborted", res.uploads_aborted);
		fputc('\n', out);
	}
	for (size_t i = 0; i < v.nkeys; i++)
		free(v.keys[i].key);
	free(v.keys);
	return rc;
}

/* ---------------------------------------------------------------------- */
/* Snapshot expiry and orphan files                                       */

/* Whether snapshot sn of meta stays: the current one, one of the keep
 * newest, or one younger than retention_ms before now_ms. */
static bool stays(const json_t *meta, const json_t *sn, const struct ice_compact_conf *cc, int64_t now_ms)
{
	const json_t *o;
	size_t i, newer = 0;
	int64_t seq = snap_int(sn, "sequence-number");

	if (snap_int(sn, "snapshot-id") == (int64_t)json_integer_value(json_object_get(meta, "current-snapshot-id")) ||
	    snap_int(sn, "timestamp-ms") >= now_ms - cc->retention_ms)
		return true;
	json_array_foreach(json_object_get(meta, "snapshots"), i, o)
		newer += snap_int(o, "sequence-number") > seq;
	return newer < (size_t)cc->keep;
}

/* Drops from c->meta the snapshots that do not stay, and their snapshot-log
 * entries.  Returns how many it dropped, or -1 (out of memory). */
static int drop_snapshots(struct cpt *c, int64_t now_ms)
{
	json_t *snaps = json_object_get(c->meta, "snapshots"), *kept = json_array(), *log = json_array(), *e;
	json_t *old = json_deep_copy(c->meta);
	size_t i;
	int n = 0;

	if (!kept || !log || !old)
		goto fail;
	json_array_foreach(snaps, i, e) {
		if (stays(old, e, c->cc, now_ms)) {
			if (json_array_append(kept, e) < 0)
				goto fail;
		} else {
			n++;
		}
	}
	json_array_foreach(json_object_get(c->meta, "snapshot-log"), i, e) {
		size_t j;
		json_t *k;
		json_array_foreach(kept, j, k)
			if (snap_int(k, "snapshot-id") == snap_int(e, "snapshot-id"))
				break;
		if (j < json_array_size(kept) && json_array_append(log, e) < 0)
			goto fail;
	}
	if (json_object_set_new(c->meta, "snapshots", kept) < 0 || json_object_set_new(c->meta, "snapshot-log", log) < 0)
		goto fail_set;
	json_decref(old);
	return n;
fail:
	json_decref(kept);
	json_decref(log);
fail_set:
	json_decref(old);
	return -1;
}

/* Expires the snapshots of c's table that do not stay, in a metadata
 * version of its own, published create-only (on top of whatever another
 * writer committed meanwhile). */
static int expire(struct cpt *c, int64_t now_ms, char *err, size_t errlen)
{
	struct ice_manifest_file *mf = NULL;
	int nmf = 0, rc = -1;

	for (int tries = 0; tries < MAX_COMMIT_TRIES; tries++) {
		int n = drop_snapshots(c, now_ms);
		if (n < 0) {
			snprintf(err, errlen, "table \"%s/%s\": out of memory", c->cc->stream, c->object);
			goto out;
		}
		c->res->expired = n;
		if (n == 0) {
			rc = 0;
			goto out;
		}
		if ((rc = publish(c, c->version + 1, err, errlen)) != SL_STORE_EXISTS) {
			if (rc == 0)
				c->version++;
			goto out;
		}
		c->cur_seq = INT64_MAX;  /* no TRUNCATE makes an expiry moot */
		if ((rc = reload(c, &mf, &nmf, err, errlen)) < 0)
			goto out;
		rc = -1;
	}
	snprintf(err, errlen, "table \"%s/%s\": other commits came first %d times", c->cc->stream, c->object,
		 MAX_COMMIT_TRIES);
out:
	free_list(mf, nmf);
	return rc;
}

/* Marks in v (the table's keys) the manifest lists of the snapshots of
 * meta, the manifests they list and the files those name. */
static int mark_live(struct cpt *c, struct vfy *v, char *err, size_t errlen)
{
	size_t i;
	json_t *sn;

	json_array_foreach(json_object_get(c->meta, "snapshots"), i, sn) {
		const char *lp = json_string_value(json_object_get(sn, "manifest-list"));
		struct ice_manifest_file *mf = NULL;
		struct key *k;
		int nmf = 0;
		if (!lp || cpt_key(c, lp, &c->key, err, errlen) < 0)
			return -1;
		if ((k = find_key(v, c->key.data)) && k->ref)
			continue;   /* its list was read already */
		if (k)
			k->ref = true;
		{
			json_t *one = json_pack("{s:I, s:o}", "current-snapshot-id", (json_int_t)snap_int(sn, "snapshot-id"),
						"snapshots", json_pack("[O]", sn));
			int rc;
			if (!one)
				return -1;
			json_object_set(one, "location", json_object_get(c->meta, "location"));
			rc = ice_current_manifests(c->st, c->cc->stream, c->object, one, &mf, &nmf, err, errlen);
			json_decref(one);
			if (rc < 0)
				return -1;
		}
		for (int m = 0; m < nmf; m++) {
			struct ice_entry *e = NULL;
			char *local = NULL;
			bool tmp = false;
			int ne = 0, rc;
			if (cpt_key(c, mf[m].path, &c->key, err, errlen) < 0) {
				free_list(mf, nmf);
				return -1;
			}
			if (!(k = find_key(v, c->key.data)) || k->ref)
				continue;
			k->ref = true;
			if ((rc = c->st->ops->fetch(c->st->ctx, c->key.data, &local, &tmp, err, errlen)) == 0)
				rc = ice_manifest_read(local, &e, &ne, err, errlen);
			unfetch(local, tmp);
			for (int j = 0; rc == 0 && j < ne; j++)
				if (cpt_key(c, e[j].path, &c->key, err, errlen) == 0 && (k = find_key(v, c->key.data)))
					k->ref = true;
			ice_entries_free(e, ne);
			if (rc != 0) {
				free_list(mf, nmf);
				return -1;
			}
		}
		free_list(mf, nmf);
	}
	return 0;
}

/* Aborts the incomplete multipart uploads under the table's data/ begun
 * more than the grace period ago: a writer that crashed (agent or
 * compaction) left them, invisible but billed; a younger one may be a
 * running writer's. */
static int abort_uploads(struct cpt *c, char *err, size_t errlen)
{
	struct sl_buf prefix;
	int rc;

	sl_buf_init(&prefix, 0);
	sl_buf_printf(&prefix, "%s/%s/data", c->cc->stream, c->object);
	if (sl_buf_failed(&prefix)) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	rc = c->st->ops->abort_uploads(c->st->ctx, prefix.data, c->cc->grace_ms > 0 ? c->cc->grace_ms : 1,
				       &c->res->uploads_aborted, err, errlen);
	sl_buf_free(&prefix);
	return rc;
}

/* The version of the metadata file key names ("<table>/metadata/v<N>.metadata.json"), or -1. */
static int64_t metadata_version(const char *rest)
{
	const char *p = rest + 11;
	int64_t v = 0;

	if (strncmp(rest, "/metadata/v", 11) != 0 || *p < '0' || *p > '9')
		return -1;
	for (; *p >= '0' && *p <= '9' && v < INT64_MAX / 10; p++)
		v = v * 10 + (*p - '0');
	return strcmp(p, ".metadata.json") == 0 ? v : -1;
}

/* The oldest metadata version c's table keeps: the oldest its
 * metadata-log names.  Older ones are no reader's once their commit left
 * the log (ice_meta_trim_log).  -1 (keep them all) when the log is empty
 * or names a file that is not one of the table's versions. */
static int64_t oldest_kept(const struct cpt *c)
{
	int64_t oldest = -1;
	size_t i, len = strlen(c->location);
	json_t *e;

	json_array_foreach(json_object_get(c->meta, "metadata-log"), i, e) {
		const char *f = json_string_value(json_object_get(e, "metadata-file"));
		int64_t v = f && strncmp(f, c->location, len) == 0 ? metadata_version(f + len) : -1;
		if (v < 0)
			return -1;
		if (oldest < 0 || v < oldest)
			oldest = v;
	}
	return oldest < c->version ? oldest : -1;
}

/* Removes the files under the table's data/ and metadata/ (not the metadata
 * JSON files) that no snapshot of c->meta references and that are older
 * than the grace period; a younger one may belong to a commit under way.
 * With the table's write.metadata.delete-after-commit.enabled, also the
 * metadata files older than the oldest its metadata-log keeps (those a
 * commit dropped from it and a crash, or a failed remove, left). */
static int remove_orphans(struct cpt *c, int64_t now_ms, char *err, size_t errlen)
{
	struct vfy v = { .stream = c->cc->stream };
	struct sl_buf prefix;
	int64_t oldest = oldest_kept(c);
	int rc = -1;

	sl_buf_init(&prefix, 0);
	sl_buf_printf(&prefix, "%s/%s", c->cc->stream, c->object);
	if (sl_buf_failed(&prefix) || c->st->ops->list(c->st->ctx, prefix.data, add_key, &v, err, errlen) < 0 || v.oom)
		goto out;
	qsort(v.keys, v.nkeys, sizeof *v.keys, cmp_key);
	if (mark_live(c, &v, err, errlen) < 0)
		goto out;
	for (size_t i = 0; i < v.nkeys; i++) {
		const char *k = v.keys[i].key, *rest = k + prefix.len;
		size_t len = strlen(k);
		int64_t ver = metadata_version(rest);
		if (ver >= 0 && ver < oldest && ice_meta_deletes_old(c->meta)) {
			if (c->st->ops->remove(c->st->ctx, k, err, errlen) < 0)
				goto out;
			c->res->metadata_removed++;
			continue;
		}
		if (v.keys[i].ref || len < 5 || strcmp(k + len - 5, ".avro") != 0 ||
		    (strncmp(rest, "/data/", 6) != 0 && strncmp(rest, "/metadata/", 10) != 0))
			continue;
		if (v.keys[i].mtime_ms < 0 || now_ms - v.keys[i].mtime_ms < c->cc->grace_ms) {
			c->res->orphans_young++;   /* or no age to go by */
			continue;
		}
		if (c->st->ops->remove(c->st->ctx, k, err, errlen) < 0)
			goto out;
		c->res->orphans_removed++;
	}
	rc = 0;
out:
	if (v.oom)
		snprintf(err, errlen, "out of memory");
	for (size_t i = 0; i < v.nkeys; i++)
		free(v.keys[i].key);
	free(v.keys);
	sl_buf_free(&prefix);
	return rc;
}
