/*
 * sinks/iceberg/ice_fill.c: unchanged TOAST values from a table's committed
 * data files (see ice_fill.h).
 */
#include "sinks/iceberg/ice_fill.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sinks/avro/avro_read.h"
#include "sinks/iceberg/iceberg.h"
#include "sinks/iceberg/ice_widen.h"

static int cmp_key(const void *ka, size_t la, const void *kb, size_t lb)
{
	int c = memcmp(ka, kb, la < lb ? la : lb);

	return c ? c : (la > lb) - (la < lb);
}

static int cmp_want(const void *a, const void *b)
{
	const struct sl_mrow *x = ((const struct ice_want *)a)->row, *y = ((const struct ice_want *)b)->row;

	return cmp_key(x->fill, x->filllen, y->fill, y->filllen);
}

/* The want of key, or NULL. */
static struct ice_want *find_want(struct ice_want *want, size_t n, const void *key, size_t len)
{
	size_t lo = 0, hi = n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = cmp_key(key, len, want[mid].row->fill, want[mid].row->filllen);
		if (c == 0)
			return &want[mid];
		if (c < 0)
			hi = mid;
		else
			lo = mid + 1;
	}
	return NULL;
}

/* The key of record val, as sl_mrow_key writes it, into key; idx: where
 * the record has each field of s (ice_field_index). */
static int record_key(avro_writer_t w, avro_value_t *val, const struct ice_schema *s, const int *idx,
		      struct sl_buf *key)
{
	sl_buf_reset(key);
	for (int i = 0; i < s->nfields; i++) {
		avro_value_t f;
		if (!s->f[i].key)
			continue;
		if (idx[i] < 0 || avro_value_get_by_index(val, (size_t)idx[i], &f, NULL) != 0)
			return -1;
		if (avro_value_get_type(&f) != AVRO_UNION && sl_buf_putc(key, 2) < 0)
			return -1;
		if (ice_value_as(w, key, &f, &s->f[i]) < 0)   /* a key widened since the file */
			return -1;
	}
	return 0;
}

/* Takes w's unchanged values from record val (idx: where it has each field
 * of s). */
static int take_values(avro_writer_t aw, avro_value_t *val, const struct ice_schema *s, const int *idx,
		       struct ice_want *w)
{
	for (int i = 0; i < s->nfields; i++) {
		const struct ice_field *f = &s->f[i];
		struct sl_buf b;
		avro_value_t v;
		if (f->col < 0 || f->col >= w->row->ncols || w->row->vals[f->col].kind != SL_V_UNCHANGED ||
		    idx[i] < 0 || avro_value_get_by_index(val, (size_t)idx[i], &v, NULL) != 0)
			continue;  /* a field the record's file does not have stays unchanged */
		sl_buf_init(&b, 0);
		if (ice_value_as(aw, &b, &v, f) < 0) {   /* an older file's int as a long, ... */
			sl_buf_free(&b);
			return -1;
		}
		w->raw[i].len = b.len;
		w->raw[i].p = (unsigned char *)sl_buf_detach(&b);
		if (!w->raw[i].p)
			return -1;
	}
	w->found = true;
	return 0;
}

/* What a lookup shares while it reads files. */
struct scan {
	struct ice_want *want;
	size_t n, left;                /* wants, and those not found yet */
	const struct ice_schema *s;
	const struct sl_store *store;  /* where the files are */
	const char *root;              /* and the location of its root */
	avro_writer_t aw;
	struct sl_buf key;
	const char *path;              /* the file being read (its location) */
	int *idx;                      /* s->nfields: where a data file's records have each field of s */
};

/* Calls fn for each record of the Avro file at location while wants are
 * left (a file of the store, fetched); data: a data file, whose fields
 * sc->idx maps to those of sc->s by their field ids. */
static int each_record(struct scan *sc, const char *location, bool data,
		       int (*fn)(struct scan *, avro_value_t *, char *, size_t), char *err, size_t errlen)
{
	struct sl_avro_read *rd = NULL;
	const char *key = sl_ice_key_of(sc->root, location);
	avro_value_t *val;
	char *local = NULL;
	bool temporary = false;
	int got = 0, rc = -1;

	if (!key) {
		snprintf(err, errlen, "\"%s\" is not a file of %s", location, sc->store->ops->describe(sc->store->ctx));
		return -1;
	}
	if ((rc = sc->store->ops->fetch(sc->store->ctx, key, &local, &temporary, err, errlen)) != 0) {
		if (rc == SL_STORE_NOT_FOUND)
			snprintf(err, errlen, "\"%s\" is missing", location);
		return -1;
	}
	rc = -1;
	if (sl_avro_read_open(&rd, local, err, errlen) < 0)
		goto out;
	if (data && ice_field_index(sc->idx, sc->s, sl_avro_read_schema(rd)->data,
				    sl_avro_read_schema(rd)->len) < 0) {
		snprintf(err, errlen, "\"%s\": a data file whose Avro schema is no record with field ids", location);
		goto out;
	}
	while (sc->left > 0 && (got = sl_avro_read_next(rd, &val, err, errlen)) > 0) {
		sc->path = location;
		if (fn(sc, val, err, errlen) < 0)
			goto out;
	}
	rc = sc->left > 0 && got < 0 ? -1 : 0;
out:
	sl_avro_read_close(rd);
	if (temporary)
		unlink(local);
	free(local);
	return rc;
}

/* A record of a data file: the values of the wants of its key. */
static int data_record(struct scan *sc, avro_value_t *val, char *err, size_t errlen)
{
	struct ice_want *w;

	if (record_key(sc->aw, val, sc->s, sc->idx, &sc->key) < 0) {
		snprintf(err, errlen, "\"%s\": a record without the key fields", sc->path);
		return -1;
	}
	if (!(w = find_want(sc->want, sc->n, sc->key.data, sc->key.len)) || w->found)
		return 0;
	/* every want of this key (rows of the batch filled from one row) */
	while (w > sc->want && !cmp_key(w[-1].row->fill, w[-1].row->filllen, sc->key.data, sc->key.len))
		w--;
	for (; w < sc->want + sc->n && !cmp_key(w->row->fill, w->row->filllen, sc->key.data, sc->key.len); w++) {
		if (take_values(sc->aw, val, sc->s, sc->idx, w) < 0) {
			snprintf(err, errlen, "\"%s\": out of memory", sc->path);
			return -1;
		}
		sc->left--;
	}
	return 0;
}

/* An entry of a data manifest: its data file, scanned. */
static int manifest_entry(struct scan *sc, avro_value_t *val, char *err, size_t errlen)
{
	avro_value_t df, fp;
	const char *path = NULL;
	size_t len = 0;
	char *copy;
	int rc;

	if (avro_value_get_by_name(val, "data_file", &df, NULL) != 0 ||
	    avro_value_get_by_name(&df, "file_path", &fp, NULL) != 0 ||
	    avro_value_get_string(&fp, &path, &len) != 0 || !(copy = strndup(path, len))) {
		snprintf(err, errlen, "manifest \"%s\": an entry without a file_path", sc->path);
		return -1;
	}
	rc = each_record(sc, copy, true, data_record, err, errlen);
	free(copy);
	return rc;
}

int ice_fill_lookup(struct ice_want *want, size_t n, const struct ice_schema *s, const struct sl_store *store,
		    const char *root, const char *const *mpaths, int nm, char *err, size_t errlen)
{
	struct scan sc = { .want = want, .n = n, .left = n, .s = s, .store = store, .root = root,
			   .aw = avro_writer_memory(NULL, 0) };
	int rc = -1;

	sl_buf_init(&sc.key, 0);
	if (!sc.aw || !(sc.idx = calloc((size_t)s->nfields + 1, sizeof *sc.idx))) {
		snprintf(err, errlen, "out of memory");
		goto out;
	}
	for (size_t i = 0; i < n; i++) {
		want[i].found = false;
		if (!(want[i].raw = calloc((size_t)s->nfields + 1, sizeof *want[i].raw))) {
			snprintf(err, errlen, "out of memory");
			goto out;
		}
	}
	qsort(want, n, sizeof *want, cmp_want);
	for (int m = nm - 1; m >= 0 && sc.left > 0; m--)
		if (each_record(&sc, mpaths[m], false, manifest_entry, err, errlen) < 0)
			goto out;
	rc = 0;
out:
	if (sc.aw)
		avro_writer_free(sc.aw);
	free(sc.idx);
	sl_buf_free(&sc.key);
	return rc;
}

void ice_fill_free(struct ice_want *want, size_t n, const struct ice_schema *s)
{
	for (size_t i = 0; i < n; i++) {
		for (int k = 0; want[i].raw && k < s->nfields; k++)
			free(want[i].raw[k].p);
		free(want[i].raw);
		want[i].raw = NULL;
	}
}
