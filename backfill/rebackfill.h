/*
 * backfill/rebackfill.h: backfill while streaming (the watermark method of
 * Netflix's DBLog), and the requests that start it.
 *
 * A job re-reads one table (a table with a key) in chunks of its key while
 * the stream goes on.  Between transactions the stream's reader opens a
 * chunk's window (backfill/backfill_chunk.h), writes a low watermark into the
 * source's log, reads the next chunk_rows rows after the last key read in
 * a snapshot of their own, and writes a high watermark.  Every change the
 * stream reads meanwhile is applied to the chunk's rows; at the high
 * watermark the rows the chunk still holds are pushed at its position, and
 * then the chunk's last key as the job's progress, which the writer
 * checkpoints as the resume key once those rows are durable.  A job that
 * reads no row is done.  A restart resumes a job after its resume key.
 *
 * A job starts durably: the writer flushes and saves the checkpoint with
 * the table running (method "watermark") before any chunk is read.  Its
 * re-backfill marker (a TRUNCATE) comes at the low watermark of its first
 * chunk read in the run, at CSN (watermark, 0), unless a chunk of it is
 * durable already: the source may skip the table's changes before that
 * watermark (sl_source_hooks.covered), so only there does the marker end
 * every record of them that an earlier run wrote.
 *
 * Requests: `sluice backfill --table` while an agent runs the stream
 * writes "<state_dir>/<stream>.backfill-request.<time>.<pid>" (the table's
 * name and a newline, written atomically).  The running stream looks for
 * them every second between transactions; the next run takes them when it
 * starts.  A request file is removed only once its job has started
 * durably (the table running in the checkpoint).
 *
 * Threads: everything here runs on the stream's reader thread.
 */
#ifndef SLUICE_AGENT_REBACKFILL_H
#define SLUICE_AGENT_REBACKFILL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "agent/checkpoint.h"
#include "agent/pipeline.h"
#include "schema/schema.h"
#include "sources/source.h"

struct sl_rebackfill;

struct sl_rebackfill_config {
	const char *stream;
	const char *state_dir;                  /* for requests */
	const struct sl_source_ops *src;        /* with emit_watermark and read_chunk */
	void *srcctx;
	const struct sl_source_config *srccfg;  /* for src->watermark_ready */
	const struct sl_source_stream *sst;
	struct sl_pipe *pipe;
	const struct sl_checkpoint *ck;         /* table names only: the writer owns the rest */
	struct sl_table *const *tables;         /* the stream's table versions (outlive rb) */
	int ntables;
	uint64_t chunk_rows;                    /* 0: 10000 */
	bool backfill;                          /* the stream backfills (backfill = auto): a table whose
						 * rows a DDL changed is backfilled again */
	/* True when the sink carries the missing values of table version t
	 * (sl_sink_carries_missing): a column added with a constant default
	 * then needs no backfill.  NULL: never. */
	bool (*carries_missing)(const void *arg, const struct sl_table *t);
	const void *carries_arg;
	char *err;                              /* the reader's error buffer (the pipe's) */
	size_t errlen;
};

/* *out is freed by sl_rebackfill_free().  SL_EFAIL when out of memory. */
int sl_rebackfill_new(struct sl_rebackfill **out, const struct sl_rebackfill_config *c);
void sl_rebackfill_free(struct sl_rebackfill *rb);
/* True when the source can backfill t while streaming. */
bool sl_rebackfill_can(const struct sl_source_ops *src, const struct sl_table *t);
/* Queues a job for checkpoint entry idx (table t).  With resume, the entry
 * is running already (its marker is durable) and the job reads the rows
 * after the key text after (NULL: from the first), rows and chunks being
 * durable before; otherwise it starts anew, with a marker.  SL_EFAIL when
 * out of memory. */
int sl_rebackfill_add(struct sl_rebackfill *rb, int idx, const struct sl_table *t, bool resume, const char *after,
		      uint64_t rows, uint64_t chunks);
/* The hooks that drive the jobs from sl_pipe_stream(). */
void sl_rebackfill_hooks(struct sl_rebackfill *rb, struct sl_pipe_hooks *h);

/* ---- requests ---- */

/* Records a request to backfill table ("schema.table") of stream.  0, or -1
 * with err naming the file. */
int sl_bf_request_write(const char *state_dir, const char *stream, const char *table, char *err, size_t errlen);
/* The requests of stream waiting in state_dir: *paths and *tables (malloc'd
 * arrays of *n malloc'd strings; free with sl_bf_request_list_free).  A
 * file that cannot be read is logged and left alone.  0, or -1 when out of
 * memory or state_dir cannot be read. */
int sl_bf_request_list(const char *state_dir, const char *stream, char ***paths, char ***tables, int *n,
		       char *err, size_t errlen);
void sl_bf_request_list_free(char **paths, char **tables, int n);

#endif
