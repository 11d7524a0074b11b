/*
 * sinks/avro_tree/merge.c: merge mode's per-batch folding (see merge.h).
 * The rules are those of the ClickHouse sink's merge mode (ch_sink.c,
 * doc/clickhouse.md): the last change of a key wins inside a batch, a
 * TRUNCATE clears what came before it, and unchanged values come from the
 * old key's row after a key change, else from the key's row in the batch.
 */
#include "sinks/avro_tree/merge.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "sinks/avro/avro_value.h"

static size_t align8(size_t n)
{
	return (n + 7) & ~(size_t)7;
}

int sl_mrow_key(const struct sl_table *t, const struct sl_value *vals, struct sl_buf *out, char *err,
		size_t errlen)
{
	for (int i = 0; i < t->ncols; i++) {
		if (!t->cols[i].is_key)
			continue;
		if (vals[i].kind == SL_V_NULL || vals[i].kind == SL_V_UNCHANGED) {
			snprintf(err, errlen, "table \"%s\": key column \"%s\" has no value in merge mode", t->object,
				 t->cols[i].name);
			return SL_EDATA;
		}
		if (sl_avro_put_value(out, &t->cols[i], &vals[i], err, errlen) < 0)
			return -1;
	}
	if (sl_buf_failed(out)) {
		snprintf(err, errlen, "table \"%s\": out of memory", t->object);
		return -1;
	}
	return 0;
}

/* Copies a change's metadata from c (NULL: from like) with ncols values
 * vals (NULL: none), key, fill key and hops (merge.h).  NULL when out of
 * memory. */
static struct sl_mrow *mrow_make(const struct sl_change *c, const struct sl_mrow *like, const struct sl_value *vals,
				 int ncols, const void *key, size_t keylen, const void *fill, size_t filllen,
				 const void *hops, size_t hopslen)
{
	size_t size = align8(sizeof(struct sl_mrow)) + (size_t)ncols * sizeof(struct sl_value) + keylen + filllen +
		      hopslen;
	struct sl_mrow *r;
	char *p;

	for (int i = 0; vals && i < ncols; i++)
		if (sl_value_has_bytes(&vals[i]))
			size += vals[i].len;
	if (!(r = malloc(size)))
		return NULL;
	if (like) {
		*r = *like;
	} else {
		memset(r, 0, sizeof *r);
		r->op = c->op;
		memcpy(r->csn, c->csn, sizeof r->csn);
		if (c->pos)
			r->pos = *c->pos;
		r->csn_pos = c->csn_pos;
		r->seq = c->seq;
		r->source_ts_us = c->source_ts_us;
		r->read_ts_us = c->read_ts_us;
		r->tx_id = c->tx_id;
		memcpy(r->uuid, c->uuid, 16);
		r->read_method = c->read_method;
		r->deleted = c->op == SL_OP_DELETE || c->op == SL_OP_UPDATE_DELETE || c->op == SL_OP_TRUNCATE;
	}
	r->size = size;
	r->ncols = vals ? ncols : 0;
	r->vals = vals ? (struct sl_value *)((char *)r + align8(sizeof(struct sl_mrow))) : NULL;
	p = (char *)r + align8(sizeof(struct sl_mrow)) + (size_t)ncols * sizeof(struct sl_value);
	for (int i = 0; vals && i < ncols; i++) {
		r->vals[i] = vals[i];
		if (sl_value_has_bytes(&vals[i])) {
			if (vals[i].len)
				memcpy(p, vals[i].p, vals[i].len);
			r->vals[i].p = p;
			p += vals[i].len;
		}
	}
	r->key = (unsigned char *)p;
	r->keylen = keylen;
	if (keylen)
		memcpy(p, key, keylen);
	p += keylen;
	r->fill = fill ? (unsigned char *)p : NULL;
	r->filllen = fill ? filllen : 0;
	if (fill && filllen)
		memcpy(p, fill, filllen);
	p += fill ? filllen : 0;
	r->hops = hopslen ? (unsigned char *)p : NULL;
	r->hopslen = hopslen;
	if (hopslen)
		memcpy(p, hops, hopslen);
	return r;
}

static const void *row_key(const void *arr, size_t i, size_t *len)
{
	const struct sl_mrow *r = ((struct sl_mrow *const *)arr)[i];

	*len = r->keylen;
	return r->key;
}

static ssize_t find(const struct sl_mbatch *b, const void *key, size_t len)
{
	return sl_keyslots_find(&b->index, key, len, row_key, b->rows);
}

/* Adds r, a key not held yet.  0 or -1 (r is then not taken). */
static int add(struct sl_mbatch *b, struct sl_mrow *r)
{
	if (sl_keyslots_reserve(&b->index, b->n) < 0)
		return -1;
	if (b->n == b->alloc) {
		size_t na = b->alloc ? b->alloc * 2 : 64;
		struct sl_mrow **nr = realloc(b->rows, na * sizeof *nr);
		if (!nr)
			return -1;
		b->rows = nr;
		b->alloc = na;
	}
	b->rows[b->n] = r;
	sl_keyslots_put(&b->index, r->key, r->keylen, b->n);
	b->n++;
	b->bytes += r->size;
	return 0;
}

/* Puts r as the row of its key: in place of row prev (>= 0), else added.
 * 0, or -1 when out of memory (r is then freed). */
static int put_at(struct sl_mbatch *b, ssize_t prev, struct sl_mrow *r)
{
	if (prev < 0) {
		if (add(b, r) < 0) {
			free(r);
			return -1;
		}
		return 0;
	}
	b->bytes += r->size;
	b->bytes -= b->rows[prev]->size;
	free(b->rows[prev]);
	b->rows[prev] = r;
	return 0;
}

static void moved_clear(struct sl_mbatch *b)
{
	b->moved_set = false;
	free(b->moved_row);
	b->moved_row = NULL;
}

void sl_mbatch_clear(struct sl_mbatch *b)
{
	for (size_t i = 0; i < b->n; i++)
		free(b->rows[i]);
	b->n = 0;
	sl_keyslots_clear(&b->index);
	free(b->trunc);
	b->trunc = NULL;
	b->bytes = 0;
	moved_clear(b);
}

void sl_mbatch_free(struct sl_mbatch *b)
{
	sl_mbatch_clear(b);
	free(b->rows);
	sl_keyslots_free(&b->index);
	sl_buf_free(&b->moved_key);
	memset(b, 0, sizeof *b);
}

/* Fills vals' unchanged values from src; *pending is set when src itself
 * still waits for some of them. */
static void fill_from(struct sl_mbatch *b, struct sl_value *vals, int ncols, const struct sl_mrow *src,
		      bool *pending)
{
	for (int i = 0; i < ncols && i < src->ncols; i++) {
		if (vals[i].kind != SL_V_UNCHANGED)
			continue;
		vals[i] = src->vals[i];
		if (vals[i].kind == SL_V_UNCHANGED)
			*pending = true;
		else
			b->filled++;
	}
}

/* The row of key in the prior batches of this flush (sl_mbatch_carry) that
 * can fill unchanged values, or NULL: none, deleted, or cleared by a
 * TRUNCATE of this batch. */
static const struct sl_mrow *prior_row(const struct sl_mbatch *b, const void *key, size_t len)
{
	ssize_t at;

	if (!b->prior || b->trunc || (at = find(b->prior, key, len)) < 0 || b->prior->rows[at]->deleted)
		return NULL;
	return b->prior->rows[at];
}

static int put_truncate(struct sl_mbatch *b, const struct sl_change *c)
{
	struct sl_mrow *r = mrow_make(c, NULL, NULL, 0, NULL, 0, NULL, 0, NULL, 0);

	if (!r)
		return -1;
	sl_mbatch_clear(b);  /* everything before it is gone */
	b->trunc = r;
	b->bytes = r->size;
	return 0;
}

/* Remembers c, an UPDATE-DELETE of key (held at prev, or -1), for the
 * UPDATE-INSERT that follows it.  0, or -1 when out of memory. */
static int set_moved(struct sl_mbatch *b, const struct sl_change *c, const struct sl_buf *key, ssize_t prev)
{
	if (b->moved_key.cap == 0)
		sl_buf_init(&b->moved_key, 0);  /* a zeroed batch */
	moved_clear(b);
	b->moved_set = true;
	b->moved_pos = c->csn_pos;
	b->moved_seq = c->seq;
	sl_buf_reset(&b->moved_key);
	sl_buf_append(&b->moved_key, key->data, key->len);
	if (sl_buf_failed(&b->moved_key))
		return -1;
	if (prev >= 0) {
		const struct sl_mrow *o = b->rows[prev];
		if (!(b->moved_row = mrow_make(NULL, o, o->vals, o->ncols, o->key, o->keylen, o->fill, o->filllen,
					       o->hops, o->hopslen)))
			return -1;
	}
	return 0;
}

int sl_mbatch_skip(struct sl_mbatch *b, const struct sl_change *c, char *err, size_t errlen)
{
	struct sl_buf key;
	int rc;

	moved_clear(b);
	if (c->op != SL_OP_UPDATE_DELETE || !c->values)
		return 0;
	sl_buf_init(&key, 0);
	/* (a key that cannot be encoded: its UPDATE-INSERT cannot be either) */
	rc = sl_mrow_key(c->table, c->values, &key, err, errlen) == 0 ? set_moved(b, c, &key, find(b, key.data, key.len))
								   : sl_buf_failed(&key) ? -1 : 0;
	if (rc < 0)
		snprintf(err, errlen, "table \"%s\": out of memory", c->table->object);
	sl_buf_free(&key);
	return rc;
}

int sl_mbatch_put(struct sl_mbatch *b, const struct sl_change *c, char *err, size_t errlen)
{
	const struct sl_table *t = c->table;
	struct sl_value *vals = NULL;
	struct sl_mrow *r = NULL;
	const struct sl_mrow *src = NULL;
	const void *fill = NULL;
	size_t filllen = 0;
	const char *fill_csn = c->csn;
	struct sl_buf key, hops;
	ssize_t prev;
	bool unchanged = false, moved_here = false;
	int rc = -1;

	if (c->op == SL_OP_TRUNCATE) {
		if (put_truncate(b, c) < 0)
			goto oom_nokey;
		return 0;
	}
	sl_buf_init(&key, 0);
	sl_buf_init(&hops, 0);
	if (!c->values) {
		snprintf(err, errlen, "table \"%s\": a %s change without its values", t->object, sl_op_name(c->op));
		goto out;
	}
	if ((rc = sl_mrow_key(t, c->values, &key, err, errlen)) < 0) {
		size_t n = strnlen(err, errlen);
		if (n + 1 < errlen)
			snprintf(err + n, errlen - n, " (the %s at %s)", sl_op_name(c->op), c->csn);
		goto out;
	}
	rc = -1;
	prev = find(b, key.data, key.len);
	if (!(vals = malloc(((size_t)t->ncols + 1) * sizeof *vals)))
		goto oom;
	memcpy(vals, c->values, (size_t)t->ncols * sizeof *vals);
	for (int i = 0; i < t->ncols; i++)
		unchanged |= vals[i].kind == SL_V_UNCHANGED;
	if (c->op == SL_OP_DELETE || c->op == SL_OP_UPDATE_DELETE) {
		for (int i = 0; i < t->ncols; i++)
			if (vals[i].kind == SL_V_UNCHANGED)
				vals[i].kind = SL_V_NULL;
		if (c->op == SL_OP_UPDATE_DELETE) {
			/* Keep the old key's row for the UPDATE-INSERT that follows. */
			if (set_moved(b, c, &key, prev) < 0)
				goto oom;
			moved_here = true;
		}
	} else if (unchanged) {
		bool pending = false;
		if (b->moved_set && b->moved_pos == c->csn_pos && b->moved_seq + 1 == c->seq) {
			if (b->moved_row && !b->moved_row->deleted)
				src = b->moved_row;
			else if (!b->moved_row && (src = prior_row(b, b->moved_key.data, b->moved_key.len)))
				;
			else {
				fill = b->moved_key.data;
				filllen = b->moved_key.len;
			}
		} else if (prev >= 0 && !b->rows[prev]->deleted) {
			src = b->rows[prev];
		} else if (prev < 0 && (src = prior_row(b, key.data, key.len))) {
			;
		} else {
			fill = key.data;
			filllen = key.len;
		}
		if (src) {
			fill_from(b, vals, t->ncols, src, &pending);
			if (pending && src->fill) {
				fill = src->fill;
				filllen = src->filllen;
				if (src->hopslen)
					sl_buf_append(&hops, src->hops, src->hopslen);
				/* The same key's earlier row: its move still applies.
				 * A key change (src the old key's row): this one, and
				 * src's key, moved into at src->fill_csn and out of
				 * now, is a hop. */
				if (src->keylen == key.len && !memcmp(src->key, key.data, key.len)) {
					if (src->fill_csn[0])
						fill_csn = src->fill_csn;
				} else if (src->fill_csn[0] && (src->filllen != src->keylen ||
								memcmp(src->fill, src->key, src->keylen) != 0)) {
					uint32_t kl = (uint32_t)src->keylen;
					sl_buf_append(&hops, &kl, sizeof kl);
					sl_buf_append(&hops, src->key, src->keylen);
					sl_buf_append(&hops, src->fill_csn, SL_CSN_LEN);
					sl_buf_append(&hops, c->csn, SL_CSN_LEN);
				}
				if (sl_buf_failed(&hops))
					goto oom;
			}
		}
	}
	if (!(r = mrow_make(c, NULL, vals, t->ncols, key.data, key.len, fill, filllen, hops.data, fill ? hops.len : 0)))
		goto oom;
	memcpy(r->fill_csn, fill_csn, sizeof r->fill_csn);
	if (put_at(b, prev, r) < 0)
		goto oom;
	rc = 0;
	goto out;
oom:
	snprintf(err, errlen, "table \"%s\": out of memory", t->object);
out:
	if (!moved_here)
		moved_clear(b);
	sl_buf_free(&key);
	sl_buf_free(&hops);
	free(vals);
	return rc;
oom_nokey:
	snprintf(err, errlen, "table \"%s\": out of memory", t->object);
	return -1;
}

/* Row r (of table version ft) in version tt's layout, see sl_mbatch_carry;
 * *skip is set when its key has no value in tt.  NULL when out of memory
 * or skipped. */
static struct sl_mrow *carry_row(const struct sl_mrow *r, const struct sl_table *ft, char *const *ftypes,
				 int nftypes, const struct sl_table *tt, char *const *ttypes, int nttypes, bool *skip)
{
	struct sl_value *vals = calloc((size_t)tt->ncols + 1, sizeof *vals);
	struct sl_mrow *out = NULL;
	struct sl_buf key;
	bool pending = false;
	char err[256];

	sl_buf_init(&key, 0);
	*skip = false;
	if (!vals)
		goto out;
	for (int j = 0; j < tt->ncols; j++) {
		vals[j].kind = SL_V_UNCHANGED;
		for (int i = 0; r->vals && i < r->ncols && i < ft->ncols; i++) {
			if (strcmp(ft->cols[i].name, tt->cols[j].name) != 0)
				continue;
			if (i < nftypes && j < nttypes && !strcmp(ftypes[i], ttypes[j]))
				vals[j] = r->vals[i];
			break;
		}
		pending |= vals[j].kind == SL_V_UNCHANGED;
	}
	if (sl_mrow_key(tt, vals, &key, err, sizeof err) != 0) {
		*skip = !sl_buf_failed(&key);  /* a key column without a value in tt */
		goto out;
	}
	if (pending && r->fill)
		out = mrow_make(NULL, r, vals, tt->ncols, key.data, key.len, r->fill, r->filllen, r->hops, r->hopslen);
	else
		out = mrow_make(NULL, r, vals, tt->ncols, key.data, key.len, pending ? key.data : NULL, key.len,
				NULL, 0);
out:
	sl_buf_free(&key);
	free(vals);
	return out;
}

int sl_mbatch_carry(struct sl_mbatch *to, const struct sl_mbatch *from, const struct sl_table *ft,
		    char *const *ftypes, int nftypes, const struct sl_table *tt, char *const *ttypes, int nttypes)
{
	if (from->trunc)
		sl_mbatch_clear(to);  /* older than the TRUNCATE: gone */
	for (size_t k = 0; k < from->n; k++) {
		bool skip;
		struct sl_mrow *r = carry_row(from->rows[k], ft, ftypes, nftypes, tt, ttypes, nttypes, &skip);

		if (!r) {
			if (skip)
				continue;
			return -1;
		}
		if (put_at(to, find(to, r->key, r->keylen), r) < 0)
			return -1;
	}
	return 0;
}

int sl_mbatch_replace(struct sl_mbatch *b, size_t i, const struct sl_value *vals)
{
	struct sl_mrow *o = b->rows[i];
	struct sl_mrow *r = mrow_make(NULL, o, vals, o->ncols, o->key, o->keylen, NULL, 0, NULL, 0);

	if (!r)
		return -1;
	b->bytes += r->size;
	b->bytes -= o->size;
	b->rows[i] = r;
	free(o);
	return 0;
}

static int cmp_csn(const void *a, const void *b)
{
	return strcmp((*(struct sl_mrow *const *)a)->csn, (*(struct sl_mrow *const *)b)->csn);
}

struct sl_mrow **sl_mbatch_sorted(const struct sl_mbatch *b, size_t *n)
{
	size_t total = b->n + (b->trunc ? 1 : 0), k = 0;
	struct sl_mrow **out = malloc((total ? total : 1) * sizeof *out);

	*n = 0;
	if (!out)
		return NULL;
	if (b->trunc)
		out[k++] = b->trunc;
	for (size_t i = 0; i < b->n; i++)
		out[k++] = b->rows[i];
	qsort(out, total, sizeof *out, cmp_csn);
	*n = total;
	return out;
}

void sl_mrow_change(const struct sl_mrow *r, const struct sl_table *t, struct sl_change *out)
{
	memset(out, 0, sizeof *out);
	out->table = t;
	out->op = r->op;
	out->values = r->vals;
	out->read_method = r->read_method;
	memcpy(out->csn, r->csn, sizeof out->csn);
	out->pos = &r->pos;
	out->csn_pos = r->csn_pos;
	out->seq = r->seq;
	out->source_ts_us = r->source_ts_us;
	out->read_ts_us = r->read_ts_us;
	out->tx_id = r->tx_id;
	memcpy(out->uuid, r->uuid, 16);
}
