/*
 * backfill/backfill.h: backfill orchestration: which tables of a stream need a
 * backfill, and reading them from a source snapshot into the pipeline.
 *
 * The source reads (sl_source_ops.snapshot_read) and converts its rows; the
 * pipeline's writer writes them, discards an interrupted earlier run of the
 * same table, and checkpoints each table when it is complete (see
 * agent/pipeline.h).  Nothing here touches the checkpoint once the pipeline
 * runs: the plan is made before.
 */
#ifndef SLUICE_AGENT_BACKFILL_H
#define SLUICE_AGENT_BACKFILL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>

#include "agent/checkpoint.h"
#include "agent/pipeline.h"
#include "schema/schema.h"
#include "sources/source.h"

/* One table to backfill: its checkpoint entry and its table version. */
struct sl_backfill_item {
	int idx;                        /* index into the checkpoint's tables */
	const struct sl_table *table;
	char *after;                    /* an interrupted snapshot backfill's resume key: the rows up to
					 * it are durable (owned; NULL: read from the start) */
	uint64_t rows0, chunks0;        /* rows and chunks durable before (with after) */
	bool running;                   /* the entry is running (interrupted) */
	enum sl_bf_method method;       /* how it was being read */
};

struct sl_backfill_plan {
	struct sl_backfill_item *items; /* owned; free with sl_backfill_plan_free */
	int n;
};

/* The tables of ck that are pending or running and still selected (in
 * tables[]), in checkpoint order.  A running one was interrupted: it
 * resumes after its resume key when it has one (a snapshot backfill read
 * in chunks with some of them durable), else it is redone.  Returns 0, or
 * -1 when out of memory. */
int sl_backfill_plan(struct sl_backfill_plan *plan, const struct sl_checkpoint *ck,
		     struct sl_table *const *tables, int ntables, const char *stream);
void sl_backfill_plan_free(struct sl_backfill_plan *plan);

/* Reads every table of plan from snapshot snap (at info) into the pipe,
 * in chunks of chunk_rows over the snapshot's connections when the source
 * reads in chunks (each chunk's end checkpointed as its rows become
 * durable), else in one piece.  Consecutive small tables form groups (one
 * flush and checkpoint save each: sl_pipe_backfill_group), whose members
 * are read several at once over the snapshot's connections when the source
 * can (snapshot_read_tables), and pushed in order.  With marker, each table's rows are preceded
 * by a re-backfill marker (not when it resumes).  On
 * a first signal the read stops: SL_EFAIL with err saying so, and
 * *interrupted set.  The checkpoint (ck) is only read, for table names.
 * Once every row is read, before waiting for the last rows to become
 * durable, the snapshot is closed and *snap set to NULL: its locks and its
 * transaction (which holds MariaDB's metadata locks) must not make an
 * application's DDL wait while the destination is slow or down. */
int sl_backfill_run(const struct sl_backfill_plan *plan, const struct sl_source_ops *src, void *srcctx,
		    void **snap, const struct sl_snapshot_info *info, bool marker, uint64_t chunk_rows,
		    struct sl_pipe *pipe, const struct sl_checkpoint *ck, const char *stream, const atomic_int *signals,
		    bool *interrupted, char *err, size_t errlen);

#endif
