/*
 * ops/metrics.h: the running agent's figures, per stream and per table, as
 * the pipeline, the workers and the probe update them and as /metrics,
 * /healthz and the run-state file read them.
 *
 * Threads: one registry (struct sl_ops) serves every stream of the process.
 * Streams are added before any thread starts and live until sl_ops_free().
 * Counters and gauges are C11 atomics: the pipeline's writer counts a
 * table's changes in plain fields of its own (it is the only thread that
 * writes them), and moves them into the exported counter with a relaxed
 * load and store when a flush makes them durable, so the hot path costs no
 * lock and no locked instruction; readers (the HTTP thread) may see a
 * counter a flush late, never torn.  Liveness timestamps are atomics too:
 * /livez and the watchdog read them without any lock.
 * Tables are an append-only list: added under the stream's mutex, never
 * removed, read without a lock.  Text (the last error, the probe's sample,
 * the alerts) is under the stream's mutex.
 *
 * Nothing here knows a source or a sink: the agent translates what they
 * report into these structs.
 */
#ifndef SLUICE_OPS_METRICS_H
#define SLUICE_OPS_METRICS_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/util.h"

#include "ops/alerts.h"
#include "schema/schema.h"

struct sl_buf;

/* What a stream is doing, as `sluice status` and sluice_stream_state show it. */
enum sl_ops_state {
	SL_OPS_STARTING = 0,   /* preparing: checkpoint, source, slot */
	SL_OPS_BACKFILLING,
	SL_OPS_STREAMING,
	SL_OPS_RETRYING,       /* failed; waits for the next attempt */
	SL_OPS_STOPPED,        /* drained, caught up, or not running */
	SL_OPS_FAILED,         /* gave up: a failure that is not retried */
	SL_OPS_NSTATES
};
const char *sl_ops_state_name(enum sl_ops_state s);

#define SL_OPS_NOPS 5          /* enum sl_op values */
/* sluice_changes_total's op label for an enum sl_op: insert, update,
 * update_delete (the old row of a key change or of a keyless table),
 * delete, truncate. */
const char *sl_ops_op_label(enum sl_op op);

/* A table's backfill, as the progress line and status show it. */
enum sl_ops_bf { SL_OPS_BF_NONE = 0, SL_OPS_BF_PENDING, SL_OPS_BF_RUNNING, SL_OPS_BF_DONE };

struct sl_ops_table {
	char *name;                        /* "schema.table" (owned) */
	_Atomic uint64_t changes[SL_OPS_NOPS];  /* written and flushed */
	uint64_t w_pending[SL_OPS_NOPS];   /* the writer's own: written, not yet in a flush */
	uint64_t w_flight[SL_OPS_NOPS];    /* the writer's own: in the flush in flight */
	_Atomic uint64_t backfill_rows;    /* rows written by backfills in this process */
	_Atomic int64_t est_rows;          /* the source's estimate of its rows; -1 unknown */
	_Atomic int bf_state;              /* enum sl_ops_bf */
	_Atomic uint64_t bf_run_rows;      /* rows of the backfill under way (or the last one) */
	_Atomic int64_t bf_started_us;     /* when it started; 0 never */
	_Atomic int64_t bf_done_us;
	struct sl_ops_table *_Atomic next;
};

/* The flush duration histogram's upper bounds, in seconds (+Inf last). */
#define SL_OPS_FLUSH_BUCKETS 12
extern const double sl_ops_flush_bounds[SL_OPS_FLUSH_BUCKETS];

/* What the probe saw of the stream's position holder, source-agnostic. */
struct sl_ops_sample {
	bool ok;                           /* the source answered */
	char error[512];                   /* with !ok */
	bool exists, active;
	enum sl_hold hold;                 /* what the server keeps for the position */
	char hold_word[32];                /* the source's own word for it ("" unknown) */
	const char *hold_metric, *hold_label, *hold_help;  /* the source's gauge of hold_word
							    * (struct sl_source_ops), or NULL */
	int64_t lag_bytes, retained_bytes, safe_bytes;   /* -1 unknown */
	int64_t time_to_purge_s;           /* -1 unknown */
	int64_t at_us;                     /* when it was taken */
};

/* One alert transition, kept for status (the last SL_OPS_HISTORY). */
struct sl_ops_alert_event {
	int64_t at_us;
	enum sl_alert_id id;
	bool firing;
	char message[256];
};
#define SL_OPS_HISTORY 32

struct sl_ops_stream {
	char *name;                        /* owned */

	/* state and attempts (workers) */
	_Atomic int state;                 /* enum sl_ops_state */
	_Atomic int64_t state_since_us;
	_Atomic uint64_t attempts;         /* runs of the stream in this process */
	_Atomic uint64_t retries;          /* runs after a failure: sluice_reconnects_total */
	_Atomic int64_t failing_since_us;  /* first failure of the current run of failures; 0 none */
	_Atomic int64_t run_started_us;    /* when the current run started */
	_Atomic int64_t running_since_us;  /* when the current run began to backfill or stream; 0 while it
					    * does neither */
	_Atomic bool expect_position;      /* the checkpoint has a position: the slot should exist */

	/* pipeline */
	_Atomic uint64_t flushes;
	_Atomic uint64_t flush_buckets[SL_OPS_FLUSH_BUCKETS];  /* cumulative, as exported */
	_Atomic uint64_t flush_sum_us;
	_Atomic int64_t last_flush_us;     /* wall clock of the last flush */
	_Atomic int64_t durable_source_ts_us;  /* source time of the last durable change or heartbeat */
	_Atomic int64_t durable_advanced_us;   /* when the durable position last moved */
	_Atomic uint64_t queue_bytes, queue_peak_bytes;
	_Atomic uint64_t dead_letters;
	_Atomic uint64_t date_clamps;      /* values clamped by the sink (sl_sink_ops.date_clamps) */
	_Atomic uint64_t heartbeats_seen;  /* heartbeats that came back through the stream */
	_Atomic uint64_t changes_reread;   /* changes written whose flush never succeeded: read again */
	_Atomic int64_t caught_up_us;      /* when the writer last had everything the source had sent
					    * durable (an idle keepalive); 0 never */

	/* liveness (wall clock, stored by the thread itself, read without a lock) */
	_Atomic bool probe_on;             /* a probe thread runs for the stream */
	_Atomic int64_t probe_pass_us;     /* the end of the probe's last pass; 0 none yet */
	_Atomic int64_t writer_progress_us;    /* the writer's last step; 0 while no writer runs */

	/* the queue of the current run, sampled when read (sl_ops_queue_read) */
	pthread_mutex_t qmu;               /* held only for the sample: never across a wait */
	void *queue;
	void (*queue_sample)(void *queue, uint64_t *bytes, uint64_t *peak);

	/* the source's own counters: base (runs before this one) + current */
	_Atomic uint64_t skipped[2], clamps[2], nan_nulls[2];

	/* probe */
	_Atomic uint64_t probes, probe_errors, heartbeats_sent;
	_Atomic bool heartbeat_on;         /* heartbeats are configured and permitted */

	pthread_mutex_t mu;                /* guards everything below */
	char last_error[512];              /* the last failure of a run ("" none) */
	int64_t last_error_us;
	struct sl_ops_sample sample;       /* the last probe */
	bool has_sample;
	double growth_bytes_per_min;
	bool growth_known;
	char heartbeat_note[256];          /* why heartbeats are off, when configured */
	struct sl_alert alerts[SL_AL_COUNT];
	struct sl_ops_alert_event history[SL_OPS_HISTORY];
	int nhistory;                      /* events in history (newest last) */

	struct sl_ops_table *_Atomic tables;   /* append-only */
	struct sl_ops_stream *next;
};

struct sl_ops {
	struct sl_ops_stream *streams;     /* in the order added */
	int nstreams;
	_Atomic uint64_t webhook_sent, webhook_failed, webhook_dropped;
	int64_t started_us;
	int64_t live_probe_us;             /* /livez: a probe pass older than this is stuck */
	int64_t live_writer_us;            /* /livez: a writer step older than this is stuck */
};

/* /livez's limit for a writer: a flush that the destination holds up for
 * longer than this means a stuck writer. */
#define SL_OPS_WRITER_STUCK_S 120

/* A new empty registry; NULL when out of memory. */
struct sl_ops *sl_ops_new(void);
void sl_ops_free(struct sl_ops *ops);
/* Adds a stream (before any thread uses the registry).  NULL when out of memory. */
struct sl_ops_stream *sl_ops_stream_add(struct sl_ops *ops, const char *name);
struct sl_ops_stream *sl_ops_stream_find(struct sl_ops *ops, const char *name);

/* The table "ns.name" of a stream, added when new.  Any thread; NULL when
 * out of memory.  The pointer stays valid until sl_ops_free(). */
struct sl_ops_table *sl_ops_table(struct sl_ops_stream *s, const char *ns, const char *name);

static inline void sl_ops_count_backfill_row(struct sl_ops_table *t)
{
	atomic_store_explicit(&t->backfill_rows, atomic_load_explicit(&t->backfill_rows, memory_order_relaxed) + 1,
			      memory_order_relaxed);
	atomic_store_explicit(&t->bf_run_rows, atomic_load_explicit(&t->bf_run_rows, memory_order_relaxed) + 1,
			      memory_order_relaxed);
}

void sl_ops_set_state(struct sl_ops_stream *s, enum sl_ops_state st);
void sl_ops_set_state_at(struct sl_ops_stream *s, enum sl_ops_state st, int64_t now_us);
/* A run of the stream failed with err (it is retried when retrying). */
void sl_ops_failed(struct sl_ops_stream *s, const char *err, bool retrying);
void sl_ops_failed_at(struct sl_ops_stream *s, const char *err, bool retrying, int64_t now_us);
/* A run started (after a failure: a retry). */
void sl_ops_attempt(struct sl_ops_stream *s);
/* A run has gone well long enough that its failures are over. */
void sl_ops_recovered(struct sl_ops_stream *s);
/* A flush that took dur_us; durable says whether the durable position moved,
 * with the source time of the last change it covers (0 unknown). */
void sl_ops_flushed(struct sl_ops_stream *s, int64_t dur_us, bool durable, int64_t source_ts_us);
/* A heartbeat whose position is already durable (a binlog heartbeat at the
 * stream's position, nothing waiting in the sink): its source time is
 * durable at once, with no flush.  Only ever moves the time forward. */
void sl_ops_heartbeat_durable(struct sl_ops_stream *s, int64_t source_ts_us);

/* The source's counters of the current run (they start at 0 in every run),
 * and the end of a run: its counts go into the base. */
struct sl_ops_source_counts {
	uint64_t skipped, clamps, nan_nulls;
};
void sl_ops_source_counts(struct sl_ops_stream *s, const struct sl_ops_source_counts *c);
void sl_ops_source_run_end(struct sl_ops_stream *s);

/* The writer's step: stamps writer_progress_us (a relaxed store). */
static inline void sl_ops_writer_step(struct sl_ops_stream *s, int64_t now_us)
{
	atomic_store_explicit(&s->writer_progress_us, now_us, memory_order_relaxed);
}

/* Attaches the queue of a run (sample reads its bytes and peak under its own
 * lock), or detaches it (queue NULL: the bytes read 0 from then on, the peak
 * stays).  Any thread. */
void sl_ops_queue_attach(struct sl_ops_stream *s, void *queue,
			 void (*sample)(void *queue, uint64_t *bytes, uint64_t *peak));
/* The queue's bytes and peak now (the attached queue's, else the last seen). */
void sl_ops_queue_read(struct sl_ops_stream *s, uint64_t *bytes, uint64_t *peak);

/* Changes the writer wrote and has not yet seen flushed: counted into
 * sluice_changes_total only by sl_ops_changes_durable() (the writer only). */
static inline void sl_ops_count_change(struct sl_ops_table *t, enum sl_op op)
{
	t->w_pending[(unsigned)op < SL_OPS_NOPS ? (unsigned)op : 0]++;
}
/* A flush starts (the sink's first step): what was written so far is its batch. */
void sl_ops_changes_flight(struct sl_ops_stream *s);
/* A flush succeeded: with all, everything written is durable, else only the
 * batch of the flush in flight (sl_ops_changes_flight). */
void sl_ops_changes_durable(struct sl_ops_stream *s, bool all);
/* The run ends: what was written and not made durable is read again by the
 * next run (sluice_changes_reread_total). */
void sl_ops_changes_discard(struct sl_ops_stream *s);

/* A probe that has not passed for this long (seconds, for a probe_interval
 * of interval_s) is stuck, and so is an agent whose run file (rewritten
 * after every pass) is older: `sluice status` says "not responding". */
#define SL_OPS_STALE_S(interval_s) (2 * (interval_s) + 5)

/* Liveness, from timestamps only (no lock another thread may hold): every
 * stream's probe passed within probe_limit_us, and every writer that runs
 * stepped within writer_limit_us.  Appends one line per stream to why (may
 * be NULL).  true when alive. */
bool sl_ops_live(struct sl_ops *ops, int64_t now_us, int64_t probe_limit_us, int64_t writer_limit_us,
		 struct sl_buf *why);

/* A run that backfilled or streamed this long (seconds) ends an outage: the
 * next failure starts a new one (sl_ops_failed), and the probe ends the
 * run of failures (sl_ops_down_seconds). */
#define SL_OPS_HEALTHY_S 30
/* The stream_down clock (the probe): how long the stream has been failing
 * in its current outage, in seconds; down_warn_s for a stream that failed
 * for good; -1 while it runs (and, once it has run well for
 * SL_OPS_HEALTHY_S, the run of failures is over: failing_since_us = 0). */
int64_t sl_ops_down_seconds(struct sl_ops_stream *s, int64_t now_us, uint64_t down_warn_s);

/* Records an alert transition in the stream's history (mu held by caller). */
void sl_ops_history_add(struct sl_ops_stream *s, enum sl_alert_id id, bool firing, const char *message, int64_t at_us);

/* /livez: 200 while every thread of every stream makes progress (by
 * sl_ops_live() with the registry's live_* limits), whatever the source
 * does, else 503; body gets one line per stream.  Takes no lock. */
int sl_ops_livez(struct sl_ops *ops, struct sl_buf *body);

/* /healthz: 200 while every stream runs (starting, backfilling, streaming)
 * and no critical alert fires, else 503; body gets one line per stream. */
int sl_ops_health(struct sl_ops *ops, struct sl_buf *body);

/* Appends every metric in the Prometheus text exposition format (version
 * 0.0.4).  Returns the buffer's status (0 or -1). */
int sl_ops_render(struct sl_ops *ops, struct sl_buf *out);
/* Appends v escaped for a label value (\\, \" and \n). */
void sl_ops_escape_label(struct sl_buf *out, const char *v);

#endif
