/*
 * sinks/avro_tree/merge.h: merge mode's per-batch folding for the Avro file
 * tree.  Between two flushes, each object (table) keeps only the latest
 * change of each primary key, copied (struct sl_mrow), plus its latest
 * TRUNCATE, which clears every row held before it.  Deletes are kept as
 * deleted rows (DELETE, UPDATE-DELETE): a file must carry them, so that a
 * reader drops the key.
 *
 * Unchanged TOAST values (SL_V_UNCHANGED, PostgreSQL): an UPDATE-INSERT
 * takes them from the row the UPDATE-DELETE just before it removed (a key
 * change: the old key's row), else from the key's row held in the batch.
 * When the batch has no such row, the row keeps SL_V_UNCHANGED and names in
 * `fill` the key whose row in the mirror (the files already published,
 * mirror.h) fills them when the batch is written.
 *
 * The key of a row is the Avro binary encoding of its key columns' payload
 * fields, one after another: the same bytes a reader of a published file
 * gets by re-encoding those fields (mirror.c), so keys compare across the
 * batch and the files.
 *
 * A batch is used by one thread.  Memory: one copy of each held row.
 */
#ifndef SLUICE_SINKS_AVRO_TREE_MERGE_H
#define SLUICE_SINKS_AVRO_TREE_MERGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"
#include "common/keyslots.h"
#include "schema/schema.h"

/* A held change: one allocation with its values, their bytes and its keys. */
struct sl_mrow {
	size_t size;                   /* bytes of the allocation */
	enum sl_op op;
	char csn[SL_CSN_LEN + 1];
	struct sl_position pos;
	uint64_t csn_pos;
	uint32_t seq;
	int64_t source_ts_us, read_ts_us;
	uint64_t tx_id;
	unsigned char uuid[16];
	const char *read_method;       /* static: the source descriptor's */
	int ncols;
	struct sl_value *vals;         /* ncols values; NULL for a TRUNCATE */
	unsigned char *key;            /* the key's bytes (see above) */
	size_t keylen;
	unsigned char *fill;           /* the key whose mirror row fills SL_V_UNCHANGED values, or NULL */
	size_t filllen;
	/* When fill names another key (a key change): the CSN of the change
	 * that moved the row to its key.  A writing of the row's own key in
	 * the mirror from this CSN up to the row's own (an earlier attempt at
	 * this batch, cut by a crash before the checkpoint moved) holds the
	 * values the later changes left unchanged, while the old key's row
	 * there is a tombstone by then (tree.c, put_row). */
	char fill_csn[SL_CSN_LEN + 1];
	/* The keys the row passed through between fill and its own key (key
	 * changes folded into one batch: A to B, then B to C), each with the
	 * CSNs it held the row from (the key change into it) and until (the
	 * one out of it, excluded): a writing of such a key in that range
	 * has the values too.  Each: uint32_t length, key bytes, two CSNs of
	 * SL_CSN_LEN bytes.  NULL when none. */
	unsigned char *hops;
	size_t hopslen;
	bool deleted;                  /* DELETE, UPDATE-DELETE */
};

struct sl_mbatch {
	struct sl_mrow **rows;         /* held rows, first-seen order */
	size_t n, alloc;
	struct sl_keyslots index;      /* rows by key */
	struct sl_mrow *trunc;         /* the batch's latest TRUNCATE, or NULL */
	uint64_t bytes;                /* held bytes */
	/* The UPDATE-DELETE just written: its UPDATE-INSERT comes next. */
	bool moved_set;
	uint64_t moved_pos;
	uint32_t moved_seq;
	struct sl_buf moved_key;
	struct sl_mrow *moved_row;     /* the old key's held row, or NULL */
	uint64_t filled;               /* unchanged values filled from the batch */
	/* Borrowed, or NULL: the rows of the earlier table versions' batches
	 * of this flush (sl_mbatch_carry), in the current version's layout.
	 * They are in files that wait for the flush, which the mirror does not
	 * list yet, so a key that the batch does not hold takes its unchanged
	 * values from there before it falls back to the mirror. */
	const struct sl_mbatch *prior;
};

/* Appends the key bytes of values (of table t) to out.  Returns 0, or
 * SL_EDATA (a key column without a value) or -1 with a message in err
 * naming the table and the column. */
int sl_mrow_key(const struct sl_table *t, const struct sl_value *vals, struct sl_buf *out, char *err,
		size_t errlen);

/* Folds change c into b.  c must be of a table with a key (TRUNCATE aside).
 * Returns 0, or SL_EDATA (a key column without a value: the change cannot be
 * a row, and b is as it was) or -1 with a message in err. */
int sl_mbatch_put(struct sl_mbatch *b, const struct sl_change *c, char *err, size_t errlen);

/* A change of c's table that the caller does not fold into b, since the
 * mirror holds it already (a replay of the log behind what a committed
 * snapshot holds).  An UPDATE-DELETE is remembered all the same: its
 * UPDATE-INSERT, next, is a key change, whose unchanged values come from
 * the old key's row (in the mirror), not from the new key's, which has
 * none.  Returns 0, or -1 when out of memory (err). */
int sl_mbatch_skip(struct sl_mbatch *b, const struct sl_change *c, char *err, size_t errlen);

/* The held rows and the TRUNCATE in CSN order, in a new array (free() it;
 * the rows stay b's).  *n receives the count.  NULL when out of memory and
 * the batch is not empty. */
struct sl_mrow **sl_mbatch_sorted(const struct sl_mbatch *b, size_t *n);

/* The change a held row stands for, for the encoder: t is the table version
 * the row was written with (or a copy of it).  out points into r. */
void sl_mrow_change(const struct sl_mrow *r, const struct sl_table *t, struct sl_change *out);

/* Replaces row i's values with vals (copied; unchanged values filled). */
int sl_mbatch_replace(struct sl_mbatch *b, size_t i, const struct sl_value *vals);

/* Folds the rows of from (held for table version ft, whose payload fields
 * have the Avro types ftypes[], the JSON of sl_mschema) into to, in table
 * version tt's layout (types ttypes[]): a column of tt takes the value of
 * from's column of the same name and type, others stay unchanged and are
 * filled from the mirror through the row's key.  A TRUNCATE in from
 * empties to first.  For the batch of a version that follows in the same
 * flush (its prior); 0, or -1 when out of memory. */
int sl_mbatch_carry(struct sl_mbatch *to, const struct sl_mbatch *from, const struct sl_table *ft,
		    char *const *ftypes, int nftypes, const struct sl_table *tt, char *const *ttypes, int nttypes);

/* Empties b (keeps its memory for the next batch); sl_mbatch_free frees it. */
void sl_mbatch_clear(struct sl_mbatch *b);
void sl_mbatch_free(struct sl_mbatch *b);

#endif
