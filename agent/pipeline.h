/*
 * agent/pipeline.h: the pipeline of one stream: read, queue, write, flush,
 * checkpoint, acknowledge.
 *
 *   reader thread (the stream's own)          writer thread (started here)
 *   ---------------------------------          ---------------------------------
 *   source next() / snapshot rows  --queue-->  sink write(), mark(), flush()
 *   source ack(durable)  <----- durable ------  checkpoint save
 *
 * The reader pushes events into a queue bounded in bytes (agent/queue.h) and
 * never calls the sink.  The writer owns the sink and, once the pipeline
 * runs, the checkpoint: it flushes at transaction boundaries when the sink
 * says a flush is due (or when asked), saves the checkpoint with the position
 * the sink reported durable, and publishes that position.  The reader
 * acknowledges only that position to the source, never a lower one than
 * before, and at least every status interval: also while the queue is full
 * and it waits for room (backpressure), so a sink that takes minutes per
 * flush never costs the source connection.
 *
 * Events keep their order: backfill rows, control events (a backfill table
 * starts or is done, a barrier) and changes are processed by the writer in
 * the order the reader pushed them.  Checkpoint changes that must follow
 * written data (a table's backfill is done) are control events for that
 * reason.
 *
 * Table versions: an event refers to a table version by pointer.  The reader
 * keeps every version alive until the writer is past the events that use it:
 * a version retired by the source travels with its SCHEMA event and is freed
 * by the writer there; the stream's own table list outlives the pipeline.
 *
 * Signals: *signals counts SIGTERM/SIGINT.  On 1 the reader drains (pushes a
 * barrier, waits for it to be flushed and checkpointed, acknowledges, and
 * returns SL_OK); on 2 or more every wait ends at once and nothing more is
 * flushed or acknowledged.
 *
 * Every function returns SL_OK or a negative enum sl_status with a message in
 * err; a failure of the writer (a failed flush) is reported by the reader's
 * next call.
 */
#ifndef SLUICE_AGENT_PIPELINE_H
#define SLUICE_AGENT_PIPELINE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "agent/checkpoint.h"
#include "schema/schema.h"
#include "sinks/sink.h"
#include "sources/source.h"

struct sl_pipe;
struct sl_ops_stream;

struct sl_pipe_config {
	const char *stream;                     /* stream name, for messages and uuids */
	const struct sl_source_desc *desc;      /* the source kind's positions */
	const struct sl_sink_ops *sink;
	void *sinkctx;                          /* owned by the caller; used by the writer only */
	struct sl_checkpoint *ck;               /* owned by the caller; the writer's while the pipe runs */
	size_t queue_bytes;                     /* 0: SL_QUEUE_DEFAULT_CAP */
	int64_t status_interval_ms;             /* ack at least this often (0: 10 s) */
	const atomic_int *signals;              /* 1: drain, 2+: cancel */
	struct sl_ops_stream *ops;              /* the stream's metrics (ops/metrics.h), or NULL */
	struct sl_mask *mask;                   /* the stream's column rules (schema/mask.h), or NULL;
						 * owned by the caller, used by the reader only */
	bool has_floor;                         /* floor is set: */
	struct sl_position floor;               /* the source's position when the run started: every
						 * record an earlier run wrote is below it
						 * (sl_pipe_marker_position) */
	char *err;                              /* the reader's error buffer: every reader-side */
	size_t errlen;                          /* call below writes its message here */
};

/* Starts the writer thread.  *out is freed by sl_pipe_stop(). */
int sl_pipe_start(struct sl_pipe **out, const struct sl_pipe_config *pc);

/*
 * Stops the pipeline.  With flush, everything pushed is written, flushed
 * and checkpointed first (a drain); without, nothing more is (a cancel or a
 * failure), and the writer finishes only the sink call under way, without
 * checkpointing it.  Returns the writer's status.  After a second signal,
 * when the writer does not stop within a few seconds (a sink blocked in a
 * flush), it is left running and *abandoned is set: the caller must then not
 * free the sink or the checkpoint, and should end the process.
 */
int sl_pipe_stop(struct sl_pipe *p, bool flush, bool *abandoned);

/* ---- the reader's side ----
 *
 * Column masking: with pc.mask, every table version and row the calls below
 * take is masked here, before it is queued: the writer, the sink, the
 * checkpoint and the dead-letter files only ever see the masked version
 * (schema/mask.h), which the reader makes once per table version and keeps
 * until the version is retired (sl_pipe_schema) or the pipeline stops.  A
 * table whose key column a rule excludes fails these calls with SL_ECONFIG. */

/* Pushes an event.  These may wait for room in the queue (calling the
 * keepalive callback meanwhile) and fail when the writer failed or on a
 * second signal. */
int sl_pipe_begin(struct sl_pipe *p, const struct sl_position *pos, int64_t ts_us, uint64_t tx_id);
int sl_pipe_change(struct sl_pipe *p, const struct sl_change *c);
int sl_pipe_commit(struct sl_pipe *p, const struct sl_position *pos, int64_t ts_us);
int sl_pipe_keepalive(struct sl_pipe *p, const struct sl_position *pos);
/* A keepalive that is one of the stream's heartbeats, written at ts_us: its
 * time becomes the source time of what is made durable with it (ts_us 0:
 * a plain keepalive). */
int sl_pipe_heartbeat(struct sl_pipe *p, const struct sl_position *pos, int64_t ts_us);
/* A new version of a table (logged when changed); retired, if not NULL, is
 * freed by the writer once every change before this event is written. */
int sl_pipe_schema(struct sl_pipe *p, const struct sl_table *t, bool changed, struct sl_table *retired);

/* Backfill of checkpoint table entry idx from a snapshot at info: the
 * writer discards an interrupted earlier run of that table (state running)
 * from the sink, marks it running at this snapshot and saves the checkpoint.
 * With marker, a TRUNCATE record at CSN (pos_csn - 1, 0) comes first.  With
 * resume, an interrupted run whose rows up to its resume key are durable is
 * kept instead (no discard, no marker): the rows pushed next are the rest
 * of the table, after that key, and the entry keeps its counts. */
int sl_pipe_backfill_start(struct sl_pipe *p, int idx, const struct sl_table *t,
			   const struct sl_snapshot_info *info, bool marker, bool resume);
/* Most tables in one group (sl_pipe_backfill_group). */
#define SL_PIPE_GROUP_MAX 256

/* The snapshot backfills of the n tables of checkpoint entries idx[] (at
 * most SL_PIPE_GROUP_MAX) follow, in that order, each pushed as above
 * (start, rows, done; none resuming): the writer marks every entry running
 * now, as sl_pipe_backfill_start would, with one checkpoint save for the
 * group, and their starts then save nothing.  A member's done flushes
 * nothing: the next whole flush makes it durable and marks it done, and
 * the group's last member is flushed and checkpointed done at once, with
 * every member before it.  So a group of small tables costs one flush and
 * a few checkpoint saves, not one of each per table, and a crash in the
 * middle leaves every member not yet durable running, redone by the next
 * run. */
int sl_pipe_backfill_group(struct sl_pipe *p, const int *idx, const struct sl_table *const *tables, int n,
			   const struct sl_snapshot_info *info, bool marker);
/* One snapshot row of t (values copied). */
int sl_pipe_backfill_row(struct sl_pipe *p, const struct sl_table *t, const struct sl_value *vals);
/* The table is complete: the writer flushes, marks it done with rows and
 * saves the checkpoint.  at (a backfill while streaming; NULL for a
 * snapshot's) replaces the entry's snapshot position: the rows were read
 * in snapshots up to there, so the backfill holds what the log had before
 * it, whatever the marker's earlier position (stream.c's hook_replaced
 * compares a DDL statement with it). */
int sl_pipe_backfill_done(struct sl_pipe *p, int idx, const struct sl_table *t, uint64_t rows,
			  const struct sl_position *at);

/* The backfill rows pushed next (sl_pipe_backfill_row) are a chunk's, at
 * pos (CSN (pos_csn(pos), 0)) with source time ts_us. */
int sl_pipe_backfill_at(struct sl_pipe *p, const struct sl_position *pos, int64_t ts_us);
/* Progress of the backfill of checkpoint table entry idx: every row with a
 * key up to key (a source's key text) was pushed, rows rows and chunks
 * chunks in all.  The writer checkpoints it with the flush that makes those
 * rows durable (and flushes at once when the sink says a flush is due). */
int sl_pipe_backfill_progress(struct sl_pipe *p, int idx, const char *key, uint64_t rows, uint64_t chunks);
/* A backfill in chunks while streaming (the watermark method) of checkpoint
 * table entry idx starts at pos (sl_pipe_marker_position; source time
 * ts_us): the writer marks it running (keeping its resume key with resume),
 * writes a re-backfill marker at CSN (pos_csn(pos) + 1, 0) with marker (after
 * every record at pos, backfill rows at pos included; its source time is
 * ts_us, or the one recorded for a marker of the table at that CSN before:
 * written again after a crash, it is the same record), then flushes and
 * saves the checkpoint.  An interrupted snapshot backfill of the table
 * with nothing durable is discarded from the sink first. */
int sl_pipe_job_start(struct sl_pipe *p, int idx, const struct sl_table *t, const struct sl_position *pos,
		      int64_t ts_us, bool marker, bool resume);
/* The re-backfill marker of the running job of checkpoint table entry idx
 * (started without one, sl_pipe_job_start), at pos, the position of the
 * low watermark of its first chunk read in this run (between
 * transactions): CSN (pos_csn(pos), 0), after every record before the
 * watermark, earlier runs' included, and before every change after it and
 * every chunk's rows; then flushed. */
int sl_pipe_job_marker(struct sl_pipe *p, int idx, const struct sl_table *t, const struct sl_position *pos,
		       int64_t ts_us);
/* The CSN position of a marker at pos: pos_csn(pos) + 1 (just after pos:
 * sl_pipe_job_start, a dropped table's), or pos_csn(pos) at a low watermark
 * (sl_pipe_job_marker).  Either thread. */
uint64_t sl_pipe_marker_csn(const struct sl_pipe *p, const struct sl_position *pos, bool at_low_watermark);
/* The columns of the table of checkpoint entry idx (sl_table.src_columns)
 * changed while streaming in a way that needs nothing more (a column added
 * with a constant default that the sink carries): the writer keeps them in
 * the entry, so that the next run does not find the change again. */
int sl_pipe_columns(struct sl_pipe *p, int idx, const char *columns);
/* Where a marker of a backfill while streaming stands: the reader's
 * position (the last transaction end or keepalive pushed, or else the
 * durable position), or the floor (pc.floor) when that is later: an
 * earlier run, killed before its checkpoint moved, may have written
 * records above the durable position, up to the floor, which the stream
 * does not write again (the changes of a table dropped since, or those a
 * backfill skips), and the marker must sort above them.  False when there
 * is no position. */
bool sl_pipe_marker_position(struct sl_pipe *p, struct sl_position *out);
/* True while the reader is inside a transaction. */
bool sl_pipe_in_tx(const struct sl_pipe *p);

/* Checkpoint table entry idx names a table the source no longer has (dropped,
 * or renamed): the writer writes a TRUNCATE marker for t (a version of it
 * without columns) at CSN (pos_csn(pos) + 1, 0), after every record the
 * table had (its backfill rows at pos included), marks the entry dropped
 * and saves the checkpoint. */
int sl_pipe_drop_marker(struct sl_pipe *p, int idx, const struct sl_table *t, const struct sl_position *pos);

/* Pushes a barrier and waits until the writer has flushed, checkpointed and
 * published everything before it.  Returns SL_OK, the writer's failure, or
 * SL_EFAIL on a second signal. */
int sl_pipe_sync(struct sl_pipe *p);

/* The last position the writer made durable and checkpointed; false when
 * none was published yet.  *seq (may be NULL) changes whenever it does. */
bool sl_pipe_durable(struct sl_pipe *p, struct sl_position *out, uint64_t *seq);

/* Runs the reader's streaming loop: the source's events into the queue,
 * acknowledging durable positions, until drained (first signal), caught up
 * (with until_caught_up: everything up to target is durable and
 * acknowledged), cancelled or failed.  The source must be started. */
struct sl_pipe_hooks {
	void *payload;
	/* Every event next() returns, before the pipeline handles it (it may
	 * push events of its own first: a chunk's rows at its high watermark). */
	int (*event)(void *payload, const struct sl_event *ev);
	/* Between transactions, before each next(): it may push events and use
	 * the source (read a chunk).  SL_ERESTART restarts the stream. */
	int (*idle)(void *payload);
	/* True while work remains that until_caught_up must wait for. */
	bool (*busy)(void *payload);
};

/* A table's version at the run's start (the source's catalog), which the
 * destination may lack: DDL that no change brings, since a log that
 * describes a table only with its next change (PostgreSQL's pgoutput)
 * says nothing of a column added or dropped with no change after it.  The
 * reader hands it to the sink (a SCHEMA event between transactions:
 * sl_sink_ops.version) once the stream passes the run's start position,
 * and not before: the log replayed from the checkpoint holds changes of
 * the older versions. */
enum sl_start_version {
	SL_SV_NONE = 0,      /* nothing to hand, unless the replayed log describes the table anew */
	SL_SV_DUE,           /* its columns differ from the checkpoint's: handed */
	SL_SV_SUPERSEDED,    /* described by the log after its columns changed again: never handed */
};
struct sl_pipe_start_version {
	const struct sl_table *table;   /* the catalog's version, read before start_at */
	int idx;                        /* its checkpoint entry, whose columns take table's once handed
					 * (-1: none) */
	enum sl_start_version state;    /* the reader's from sl_pipe_stream on */
};

struct sl_pipe_stream_opts {
	bool until_caught_up;
	struct sl_position target;              /* with until_caught_up */
	const struct sl_pipe_hooks *hooks;      /* may be NULL */
	/* The tables' versions at the run's start (nstart, none: 0) and the
	 * source's position just after they were read.  A table is handed
	 * when DUE, or when the log described it before start_at with another
	 * version (a replay from the checkpoint: the sink and a backfill
	 * while streaming would otherwise keep the older one), unless that
	 * description found the source's columns (sl_table.src_columns)
	 * changed since the start (DDL after it, whose versions its changes
	 * bring). */
	struct sl_pipe_start_version *start;
	int nstart;
	struct sl_position start_at;
};
int sl_pipe_stream(struct sl_pipe *p, const struct sl_source_ops *src, void *srcctx,
		   const struct sl_pipe_stream_opts *o);

/* Counters, any thread. */
struct sl_pipe_stats {
	uint64_t changes;          /* changes written */
	uint64_t backfill_rows;    /* backfill rows written */
	uint64_t flushes;
	size_t queue_bytes;        /* now */
	size_t queue_peak_bytes;
};
void sl_pipe_get_stats(struct sl_pipe *p, struct sl_pipe_stats *out);

#endif
