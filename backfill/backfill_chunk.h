/*
 * backfill/backfill_chunk.h: one chunk of a backfill while streaming, with its
 * watermark window (the watermark method of Netflix's DBLog).
 *
 * A chunk is the rows of a range of a table's primary key, read in a
 * snapshot of their own while the stream goes on.  It is opened (the window
 * opens) before its low watermark is written and before its rows are read;
 * its high watermark is written after they are read.  Every change of the
 * table that the stream reads while the window is open, up to the high
 * watermark, may be newer than the chunk's row for its key, so it is
 * applied to the chunk's rows in the order the stream reads it:
 *
 *   INSERT, UPDATE-INSERT   a key the chunk holds takes the new row (columns
 *                           the change leaves unchanged keep the chunk's
 *                           values); a key it does not hold stays out
 *   UPDATE-DELETE           the key leaves the chunk; the UPDATE-INSERT at
 *                           the next sequence number of the same position
 *                           (a key change) brings the row in under its new
 *                           key, its unchanged columns from the old row
 *   DELETE                  the key leaves the chunk
 *   TRUNCATE                every row leaves the chunk
 *
 * At the high watermark the rows the chunk still holds are the table's
 * rows of that range at the high watermark's position, and are written
 * there (CSN = the watermark's position, sequence 0); the changes in the
 * window were written as they came.  DBLog drops a key changed in the
 * window instead of applying the change; the result is the same rows, but
 * applying also completes a row whose change left columns out (an
 * unchanged TOAST value) and carries a row across a key change.
 *
 * Changes read before the window opens, or after the high watermark, are
 * not applied.  A change whose key cannot be told (a key column left
 * unchanged) spoils the chunk: it must be read again.  Memory: the rows of
 * one chunk, plus the rows changes replace while the window is open;
 * sl_bf_chunk_open() frees them.
 */
#ifndef SLUICE_AGENT_BACKFILL_CHUNK_H
#define SLUICE_AGENT_BACKFILL_CHUNK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "schema/schema.h"

struct sl_bf_chunk;

/* What a watermark is to a chunk. */
enum sl_bf_wm {
	SL_BF_WM_OTHER = 0,  /* not this chunk's (another chunk, stream or run) */
	SL_BF_WM_LOW,        /* this chunk's low watermark */
	SL_BF_WM_HIGH,       /* this chunk's high watermark, after its low one: the window closes */
	SL_BF_WM_BAD,        /* this chunk's high watermark before its low one: read it again */
};

/* NULL when out of memory. */
struct sl_bf_chunk *sl_bf_chunk_new(void);
void sl_bf_chunk_free(struct sl_bf_chunk *c);

/* Forgets the previous chunk and opens one of table t (a table with a key;
 * borrowed until the next open) with the watermark texts low and high
 * (copied): the window is open from now on.  -1 when out of memory. */
int sl_bf_chunk_open(struct sl_bf_chunk *c, const struct sl_table *t, const char *low, const char *high);
/* Changes whose CSN position is below floor (the job's marker's; 0: none
 * known) are not applied: their records sort below the marker, which
 * clears them, and they were committed before the chunk was read (a stream
 * that lags behind the job's start: a replay from the checkpoint), so the
 * chunk holds their effect.  Set after sl_bf_chunk_open(). */
void sl_bf_chunk_set_floor(struct sl_bf_chunk *c, uint64_t floor);
/* Closes the chunk without its high watermark (abandoned): nothing more is
 * applied. */
void sl_bf_chunk_abandon(struct sl_bf_chunk *c);
/* True between open and the high watermark (or abandon). */
bool sl_bf_chunk_is_open(const struct sl_bf_chunk *c);
/* The table of the open chunk; it may be replaced by a new version of the
 * same table (a relation message), whose rows then must be read again. */
const struct sl_table *sl_bf_chunk_table(const struct sl_bf_chunk *c);

/* Adds a row read for the chunk (t's values, copied).  A key already held
 * is replaced.  -1 when out of memory. */
int sl_bf_chunk_add(struct sl_bf_chunk *c, const struct sl_value *vals);
/* A change the stream read: applied as above while the window is open and
 * the change is of the chunk's table (same relation id, or same names when
 * ids are unknown).  -1 when out of memory. */
int sl_bf_chunk_change(struct sl_bf_chunk *c, const struct sl_change *ch);
/* A watermark the stream read (see enum sl_bf_wm). */
enum sl_bf_wm sl_bf_chunk_watermark(struct sl_bf_chunk *c, const char *text);
/* True when a change could not be applied (its key is unknown): the
 * chunk's rows cannot be trusted and must be read again. */
bool sl_bf_chunk_spoiled(const struct sl_bf_chunk *c);

/* The rows the chunk holds, in the order they were added: start with *it =
 * 0; false at the end.  *vals is valid until the next open. */
bool sl_bf_chunk_next(const struct sl_bf_chunk *c, size_t *it, const struct sl_value **vals);
/* Rows held now; rows read (added); changes applied to held rows. */
size_t sl_bf_chunk_rows(const struct sl_bf_chunk *c);
uint64_t sl_bf_chunk_read_rows(const struct sl_bf_chunk *c);
uint64_t sl_bf_chunk_applied(const struct sl_bf_chunk *c);

#endif
