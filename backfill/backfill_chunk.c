/*
 * backfill/backfill_chunk.c: one chunk of a backfill while streaming (see
 * backfill_chunk.h).
 *
 * Rows and their bytes live in an arena of blocks that never move, so a
 * row's values may point into it; a change that replaces a row allocates
 * anew and the old copy stays until the next open.  Keys are found through
 * an open-addressing table of row indexes, hashed (FNV-1a) over the key
 * columns' canonical bytes (sl_value_key_bytes), which are the same for a
 * value read by a chunk and the same value in a change.
 */
#include "backfill/backfill_chunk.h"

#include <stdlib.h>
#include <string.h>

#include "common/buf.h"
#include "common/util.h"

#define BLOCK_BYTES ((size_t)64 * 1024)

struct block {
	struct block *next;
	size_t used, size;
	_Alignas(16) unsigned char data[];
};

struct crow {
	struct sl_value *vals;
	const unsigned char *key;
	uint32_t keylen;
	uint64_t hash;
	bool live;
};

struct sl_bf_chunk {
	const struct sl_table *t;
	char *low, *high;
	bool open;           /* the window is open */
	bool low_seen;
	uint64_t floor;                 /* sl_bf_chunk_set_floor */
	bool spoiled;
	struct block *blocks;
	struct crow *rows;
	size_t nrows, arows;
	int32_t *index;      /* row index + 1, 0 empty; size nindex (a power of two) */
	size_t nindex;
	uint64_t read_rows, applied;
	struct sl_buf key;
	/* the last UPDATE-DELETE of a held row: a key change's old row */
	bool moved;
	uint64_t moved_pos;
	uint32_t moved_seq;
	struct sl_value *moved_vals;
};

struct sl_bf_chunk *sl_bf_chunk_new(void)
{
	struct sl_bf_chunk *c = calloc(1, sizeof *c);

	if (c)
		sl_buf_init(&c->key, 0);
	return c;
}

static void reset(struct sl_bf_chunk *c)
{
	while (c->blocks) {
		struct block *b = c->blocks;
		c->blocks = b->next;
		free(b);
	}
	free(c->low);
	free(c->high);
	c->low = c->high = NULL;
	c->nrows = 0;
	if (c->index)
		memset(c->index, 0, sizeof *c->index * c->nindex);
	c->read_rows = c->applied = 0;
	c->open = c->low_seen = c->spoiled = c->moved = false;
	c->floor = 0;
	c->moved_vals = NULL;
	c->t = NULL;
}

void sl_bf_chunk_free(struct sl_bf_chunk *c)
{
	if (!c)
		return;
	reset(c);
	free(c->rows);
	free(c->index);
	sl_buf_free(&c->key);
	free(c);
}

static void *arena(struct sl_bf_chunk *c, size_t n)
{
	struct block *b = c->blocks;

	n = (n + 15) & ~(size_t)15;
	if (!b || b->size - b->used < n) {
		size_t size = n > BLOCK_BYTES ? n : BLOCK_BYTES;
		if (!(b = malloc(sizeof *b + size)))
			return NULL;
		b->size = size;
		b->used = 0;
		b->next = c->blocks;
		c->blocks = b;
	}
	b->used += n;
	return b->data + b->used - n;
}

int sl_bf_chunk_open(struct sl_bf_chunk *c, const struct sl_table *t, const char *low, const char *high)
{
	reset(c);
	c->t = t;
	c->low = strdup(low);
	c->high = strdup(high);
	if (!c->low || !c->high)
		return -1;
	c->open = true;
	return 0;
}

void sl_bf_chunk_set_floor(struct sl_bf_chunk *c, uint64_t floor)
{
	c->floor = floor;
}

void sl_bf_chunk_abandon(struct sl_bf_chunk *c)
{
	c->open = false;
}

bool sl_bf_chunk_is_open(const struct sl_bf_chunk *c)
{
	return c->open;
}

const struct sl_table *sl_bf_chunk_table(const struct sl_bf_chunk *c)
{
	return c->t;
}

bool sl_bf_chunk_spoiled(const struct sl_bf_chunk *c)
{
	return c->spoiled;
}

/* The key bytes of vals into c->key and their hash; -1 when a key column is
 * unchanged (not sent) or the buffer failed. */
static int key_of(struct sl_bf_chunk *c, const struct sl_value *vals, uint64_t *hash)
{
	sl_buf_reset(&c->key);
	for (int i = 0; i < c->t->ncols; i++) {
		if (!c->t->cols[i].is_key)
			continue;
		if (vals[i].kind == SL_V_UNCHANGED || sl_value_key_bytes(&c->key, &vals[i]) < 0)
			return -1;
	}
	if (sl_buf_failed(&c->key))
		return -1;
	*hash = sl_fnv1a(SL_FNV1A_BASIS, c->key.data, c->key.len);
	return 0;
}

/* The row with the key in c->key (live or not), or -1. */
static long find(const struct sl_bf_chunk *c, uint64_t hash)
{
	if (!c->nindex)
		return -1;
	for (size_t i = hash & (c->nindex - 1);; i = (i + 1) & (c->nindex - 1)) {
		int32_t r = c->index[i];
		if (r == 0)
			return -1;
		const struct crow *row = &c->rows[r - 1];
		if (row->hash == hash && row->keylen == c->key.len && !memcmp(row->key, c->key.data, c->key.len))
			return r - 1;
	}
}

static void index_put(struct sl_bf_chunk *c, size_t r)
{
	for (size_t i = c->rows[r].hash & (c->nindex - 1);; i = (i + 1) & (c->nindex - 1))
		if (c->index[i] == 0) {
			c->index[i] = (int32_t)(r + 1);
			return;
		}
}

/* A copy of the row vals in the arena; columns unchanged in vals take
 * old's values (when old is not NULL). */
static struct sl_value *copy_row(struct sl_bf_chunk *c, const struct sl_value *vals, const struct sl_value *old)
{
	int n = c->t->ncols;
	struct sl_value *out = arena(c, sizeof *out * (size_t)(n ? n : 1));

	if (!out)
		return NULL;
	for (int i = 0; i < n; i++) {
		const struct sl_value *v = &vals[i];
		if (v->kind == SL_V_UNCHANGED && old) {
			out[i] = old[i];   /* already in the arena */
			continue;
		}
		out[i] = *v;
		if (sl_value_has_bytes(v)) {
			char *p = arena(c, v->len ? v->len : 1);
			if (!p)
				return NULL;
			memcpy(p, v->p, v->len);
			out[i].p = p;
		}
	}
	return out;
}

/* Adds a new row with key c->key (hash) and values vals (copied, with
 * unchanged columns from old). */
static int add_row(struct sl_bf_chunk *c, uint64_t hash, const struct sl_value *vals, const struct sl_value *old)
{
	struct crow *row;
	unsigned char *key;

	if (c->nrows + 1 > c->arows) {
		size_t na = c->arows ? c->arows * 2 : 256;
		struct crow *nr = realloc(c->rows, sizeof *nr * na);
		if (!nr)
			return -1;
		c->rows = nr;
		c->arows = na;
	}
	if ((c->nrows + 1) * 2 > c->nindex) {
		size_t ni = c->nindex ? c->nindex * 2 : 512;
		int32_t *nx = calloc(ni, sizeof *nx);
		if (!nx)
			return -1;
		free(c->index);
		c->index = nx;
		c->nindex = ni;
		for (size_t r = 0; r < c->nrows; r++)
			index_put(c, r);
	}
	if (!(key = arena(c, c->key.len ? c->key.len : 1)))
		return -1;
	memcpy(key, c->key.data, c->key.len);
	row = &c->rows[c->nrows];
	row->key = key;
	row->keylen = (uint32_t)c->key.len;
	row->hash = hash;
	row->live = true;
	if (!(row->vals = copy_row(c, vals, old)))
		return -1;
	index_put(c, c->nrows++);
	return 0;
}

int sl_bf_chunk_add(struct sl_bf_chunk *c, const struct sl_value *vals)
{
	uint64_t h;
	long r;

	if (!c->t || key_of(c, vals, &h) < 0)
		return -1;
	c->read_rows++;
	if ((r = find(c, h)) >= 0) {
		struct sl_value *nv = copy_row(c, vals, NULL);
		if (!nv)
			return -1;
		c->rows[r].vals = nv;
		c->rows[r].live = true;
		return 0;
	}
	return add_row(c, h, vals, NULL);
}

static bool same_table(const struct sl_table *a, const struct sl_table *b)
{
	if (a == b)
		return true;
	if (a->relid && b->relid)
		return a->relid == b->relid;
	return !strcmp(a->ns, b->ns) && !strcmp(a->name, b->name);
}

int sl_bf_chunk_change(struct sl_bf_chunk *c, const struct sl_change *ch)
{
	bool moved;
	uint64_t h;
	long r;

	if (!c->open || !ch->table || !same_table(c->t, ch->table) || ch->csn_pos < c->floor)
		return 0;
	moved = c->moved;
	c->moved = false;
	if (ch->op == SL_OP_TRUNCATE) {
		for (size_t i = 0; i < c->nrows; i++)
			if (c->rows[i].live) {
				c->rows[i].live = false;
				c->applied++;
			}
		return 0;
	}
	if (ch->table->ncols != c->t->ncols || !ch->values || key_of(c, ch->values, &h) < 0) {
		c->spoiled = true;
		return 0;
	}
	r = find(c, h);
	switch (ch->op) {
	case SL_OP_INSERT:
	case SL_OP_UPDATE_INSERT:
		if (ch->op == SL_OP_UPDATE_INSERT && moved && c->moved_pos == ch->csn_pos && c->moved_seq + 1 == ch->seq) {
			/* A key change of a held row: it comes in under its new key,
			 * with the columns the change left out from the old row. */
			if (r >= 0) {
				struct sl_value *nv = copy_row(c, ch->values, c->moved_vals);
				if (!nv)
					return -1;
				c->rows[r].vals = nv;
				c->rows[r].live = true;
			} else if (add_row(c, h, ch->values, c->moved_vals) < 0) {
				return -1;
			}
			c->applied++;
		} else if (r >= 0 && c->rows[r].live) {
			struct sl_value *nv = copy_row(c, ch->values, c->rows[r].vals);
			if (!nv)
				return -1;
			c->rows[r].vals = nv;
			c->applied++;
		}
		return 0;
	case SL_OP_UPDATE_DELETE:
	case SL_OP_DELETE:
		if (r >= 0 && c->rows[r].live) {
			c->rows[r].live = false;
			c->applied++;
			if (ch->op == SL_OP_UPDATE_DELETE) {
				c->moved = true;
				c->moved_pos = ch->csn_pos;
				c->moved_seq = ch->seq;
				c->moved_vals = c->rows[r].vals;
			}
		}
		return 0;
	case SL_OP_TRUNCATE:
		break;
	}
	return 0;
}

enum sl_bf_wm sl_bf_chunk_watermark(struct sl_bf_chunk *c, const char *text)
{
	if (!c->open || !text)
		return SL_BF_WM_OTHER;
	if (c->low && !strcmp(text, c->low)) {
		c->low_seen = true;
		return SL_BF_WM_LOW;
	}
	if (c->high && !strcmp(text, c->high)) {
		c->open = false;
		return c->low_seen ? SL_BF_WM_HIGH : SL_BF_WM_BAD;
	}
	return SL_BF_WM_OTHER;
}

bool sl_bf_chunk_next(const struct sl_bf_chunk *c, size_t *it, const struct sl_value **vals)
{
	while (*it < c->nrows) {
		const struct crow *r = &c->rows[(*it)++];
		if (r->live) {
			*vals = r->vals;
			return true;
		}
	}
	return false;
}

size_t sl_bf_chunk_rows(const struct sl_bf_chunk *c)
{
	size_t n = 0;

	for (size_t i = 0; i < c->nrows; i++)
		n += c->rows[i].live;
	return n;
}

uint64_t sl_bf_chunk_read_rows(const struct sl_bf_chunk *c)
{
	return c->read_rows;
}

uint64_t sl_bf_chunk_applied(const struct sl_bf_chunk *c)
{
	return c->applied;
}
