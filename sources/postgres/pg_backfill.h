/*
 * sources/postgres/pg_backfill.h: reads a PostgreSQL table inside an exported
 * snapshot, streaming rows with COPY ... TO STDOUT (FORMAT binary) in bounded
 * memory (the source's snapshot_read).
 *
 * The caller hands in an open (non-replication) connection; backfill starts a
 * REPEATABLE READ transaction on it that imports the snapshot, so every table
 * is read as of the slot's consistent point.
 */
#ifndef SLUICE_SOURCES_POSTGRES_PG_BACKFILL_H
#define SLUICE_SOURCES_POSTGRES_PG_BACKFILL_H

#include <libpq-fe.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "schema/schema.h"
#include "sources/postgres/pg_text.h"
#include "sources/source.h"

/* BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY; SET TRANSACTION SNAPSHOT.
 * SL_OK or SL_EFAIL with err. */
int sl_pg_backfill_begin(PGconn *c, const char *snapshot, char *err, size_t errlen);

/* Streams every row of t to fn, converted to typed values (pg_binary.h; NaN
 * decimals are counted in st, which may be NULL).  *rows receives the count.
 * Returns SL_OK, SL_EFAIL with err (a value that does not convert names the
 * table, the column and the value), or the callback's -1 as SL_EFAIL (err
 * left to it). */
int sl_pg_backfill_table(PGconn *c, const struct sl_table *t, sl_row_fn fn, void *payload,
			 struct sl_pg_text_stats *st, uint64_t *rows, char *err, size_t errlen);

/* Reads the n tables (each in one piece, as sl_pg_backfill_table does) over
 * the nconns connections of one snapshot, several at once, and hands them
 * on one table after another in the order given (snapshot_read_tables in
 * sources/source.h).  On failure the connections may be left in the middle
 * of a COPY: the caller closes them. */
int sl_pg_backfill_tables(PGconn *const *conns, int nconns, const struct sl_table *const *tables, int n,
			  const struct sl_table_reads *o, sl_row_fn fn, void *payload, struct sl_pg_text_stats *st,
			  char *err, size_t errlen);

/* Takes ACCESS SHARE locks on the n tables in the transaction on c, as
 * pg_dump does: a table rewrite (ALTER TABLE ... TYPE, VACUUM FULL, CLUSTER,
 * TRUNCATE) is not MVCC-safe, and an older snapshot would see the rewritten
 * table empty; with the lock held, the rewrite waits until the transaction
 * ends.  Each lock waits at most timeout (a lock_timeout value); SL_EAGAIN
 * with err naming the table when another session holds a conflicting lock
 * that long (the transaction is then aborted), SL_EFAIL on other failures. */
#define SL_PG_BACKFILL_LOCK_TIMEOUT "60s"   /* a backfill from a snapshot */
#define SL_PG_CHUNK_LOCK_TIMEOUT "1s"       /* a chunk read while streaming: tried again soon */
int sl_pg_lock_tables(PGconn *c, const struct sl_table *const *tables, int n, const char *timeout, char *err,
		      size_t errlen);

/* Ends the snapshot transaction. */
void sl_pg_backfill_end(PGconn *c);

/* The rows of a binary COPY (pg_binary.h), converted and handed to fn.  The
 * same for one table's COPY, for its chunks, and for re-backfills. */
struct sl_pg_copy_rows {
	const struct sl_table *t;
	sl_row_fn fn;
	void *payload;
	struct sl_pg_text_stats *st;   /* may be NULL */
	struct sl_text_value *vals;    /* t->ncols */
	struct sl_value *typed;        /* t->ncols */
	bool *binary;                  /* t->ncols: sl_pg_bin_decodes of each column */
	struct sl_buf scratch;
	uint64_t rows;                 /* handed on so far */
};
/* SL_OK, or SL_EFAIL (out of memory, with err).  Free with
 * sl_pg_copy_rows_free (also after a failed init). */
int sl_pg_copy_rows_init(struct sl_pg_copy_rows *r, const struct sl_table *t, sl_row_fn fn, void *payload,
			 struct sl_pg_text_stats *st, char *err, size_t errlen);
void sl_pg_copy_rows_free(struct sl_pg_copy_rows *r);
/* The first message of a COPY (*header true) starts with the binary
 * header: moves *row and *len past it and clears *header.  SL_OK, or
 * SL_EFAIL with err if it is not one. */
int sl_pg_copy_skip_header(const struct sl_table *t, bool *header, char **row, int *len, char *err, size_t errlen);
/* One COPY message after the header (a tuple, or the trailer: nothing to
 * do): converts it in place and hands it to fn.  SL_OK; SL_EDATA for a
 * value that does not convert (err names the table, the row and the
 * column: it would fail again); SL_EFAIL otherwise (fn's -1: err is its). */
int sl_pg_copy_row(struct sl_pg_copy_rows *r, char *row, int len, char *err, size_t errlen);

/* Decodes one COPY text-format row in place (row is modified): splits at tabs,
 * turns \N into SL_TV_NULL and resolves backslash escapes; the other fields
 * are SL_TV_TEXT pointing into row.  Returns 0, or -1 if the row does not
 * have ncols fields. */
int sl_copy_text_row(char *row, size_t len, struct sl_text_value *vals, int ncols);

#endif
