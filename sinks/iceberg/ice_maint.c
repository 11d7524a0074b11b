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
#include <unistd.h>

#include "common/buf.h"
#include "common/util.h"
#include "sinks/avro/ocf.h"
#include "sinks/iceberg/ice_meta.h"

#define MAX_LINES 200        /* problem lines printed */
#define HINT "/metadata/version-hint.text"

struct key {
	char *key;
	uint64_t size;
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

	if (++v->problems > MAX_LINES)
		return;
	fprintf(v->out, "problem: table \"%s/%s\": ", v->stream, v->object);
	va_start(ap, fmt);
	vfprintf(v->out, fmt, ap);
	va_end(ap);
	fputc('\n', v->out);
}

static int add_key(void *arg, const char *key, uint64_t size)
{
	struct vfy *v = arg;

	if (v->nkeys == v->cap) {
		size_t cap = v->cap ? 2 * v->cap : 256;
		struct key *k = realloc(v->keys, cap * sizeof *k);
		if (!k) {
			v->oom = true;
			return -1;
		}
		v->keys = k;
		v->cap = cap;
	}
	if (!(v->keys[v->nkeys].key = strdup(key))) {
		v->oom = true;
		return -1;
	}
	v->keys[v->nkeys].size = size;
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

/* The table's current metadata, parsed, into *meta; *mkey its key.
 * Returns 1, 0 when a problem was reported, or a negative status. */
static int load_meta(struct vfy *v, struct sl_buf *mkey, json_t **meta, char *err, size_t errlen)
{
	struct sl_buf b;
	json_error_t je;
	int64_t ver;
	int rc;

	*meta = NULL;
	sl_buf_init(&b, 0);
	sl_buf_printf(mkey, "%s/%s%s", v->stream, v->object, HINT);
	if (sl_buf_failed(mkey)) {
		v->oom = true;
		rc = SL_EFAIL;
		goto out;
	}
	if ((rc = v->store.ops->get(v->store.ctx, mkey->data, &b, err, errlen)) != 0)
		goto gone;
	while (b.len > 0 && (b.data[b.len - 1] == '\n' || b.data[b.len - 1] == ' '))
		b.len--;
	if (sl_buf_putc(&b, '\0') < 0 || sl_parse_i64(b.data, 1, INT32_MAX, &ver) < 0) {
		problem(v, "\"%s\" holds no version number", mkey->data);
		goto out;
	}
	sl_buf_reset(mkey);
	sl_buf_printf(mkey, "%s/%s/metadata/v%" PRId64 ".metadata.json", v->stream, v->object, ver);
	sl_buf_reset(&b);
	if (sl_buf_failed(mkey)) {
		v->oom = true;
		rc = SL_EFAIL;
		goto out;
	}
	if ((rc = v->store.ops->get(v->store.ctx, mkey->data, &b, err, errlen)) != 0)
		goto gone;
	if (!(*meta = json_loadb(b.data, b.len, 0, &je)) || !json_is_object(*meta) ||
	    !json_is_string(json_object_get(*meta, "location"))) {
		problem(v, "metadata file \"%s\" cannot be parsed: %s", mkey->data, *meta ? "no location" : je.text);
		json_decref(*meta);
		*meta = NULL;
		goto out;
	}
	rc = 1;
	goto out;
gone:
	if (rc == SL_STORE_NOT_FOUND) {
		problem(v, "\"%s\" is missing (version-hint.text names it)", mkey->data);
		rc = 0;
	}
out:
	sl_buf_free(&b);
	return rc;
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
	int rc;

	err[0] = '\0';
	if ((rc = store.ops->list(store.ctx, stream, add_key, &v, err, errlen)) < 0 || v.oom)
		goto fail;
	qsort(v.keys, v.nkeys, sizeof *v.keys, cmp_key);
	for (size_t i = 0; i < v.nkeys && rc == 0; i++) {
		char *k = v.keys[i].key, *obj = k + plen + 1;
		size_t len = strlen(k);
		/* "<stream>/<object>/metadata/version-hint.text", one level of object */
		if (len <= plen + 1 + hlen || strcmp(k + len - hlen, HINT) != 0 || memchr(obj, '/', len - hlen - plen - 1))
			continue;
		k[len - hlen] = '\0';
		v.object = obj;
		rc = verify_table(&v, err, errlen);
		k[len - hlen] = '/';
		if (v.oom)
			goto fail;
	}
	if (rc < 0)
		goto fail;
	if (v.problems > MAX_LINES)
		fprintf(out, "problem: ... and %" PRIu64 " more\n", v.problems - MAX_LINES);
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
	return rc;
}
