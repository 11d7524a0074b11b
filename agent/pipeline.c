/*
 * agent/pipeline.c: the reader/writer pipeline of one stream (see
 * pipeline.h).
 *
 * Queue records are events: a struct qev header, then a position (BEGIN,
 * COMMIT, KEEPALIVE, BF_START) or the values of a row and their bytes
 * (CHANGE, BF_ROW).  The reader copies a change's values into the record, so
 * the source may reuse its buffers as soon as the push returns; the writer
 * hands the sink pointers into the record, valid until it pops it.
 *
 * Shared state (mu): the writer's failure and message, the durable position
 * it published (with a sequence number the reader polls without the lock),
 * and the last barrier it completed.  Everything else belongs to one thread:
 * the reader's positions and ack bookkeeping, the writer's transaction and
 * backfill state, the sink and (while the pipe runs) the checkpoint.
 */
#include "agent/pipeline.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "agent/queue.h"
#include "common/buf.h"
#include "common/log.h"
#include "common/util.h"
#include "ops/metrics.h"
#include "schema/mask.h"

#define DEFAULT_STATUS_INTERVAL_MS 10000
#define WAIT_SLICE_MS 1000         /* no wait lasts longer, so signals are seen at once */
#define WRITER_IDLE_MS 200         /* the writer looks at the clock this often when idle */
#define WRITER_STAMP_EVENTS 64     /* and stamps its progress after this many events when busy */
#define PUBLISH_EVERY 256          /* changes published at least this often inside a transaction */
#define STOP_GRACE_MS 5000         /* how long sl_pipe_stop waits for a writer to end */
#define COUNTERS_EVERY_MS 1000     /* the reader publishes the source's counters this often */
#define OPS_CACHE 16               /* table versions -> metrics tables, direct-mapped */
#define MASK_CACHE 64              /* table versions -> their masked versions, direct-mapped */

/* The bytes after a Q_SCHEMA event: the source's schema_key, NUL ended,
 * rounded up to the queue's 8-byte records. */
#define SCHEMA_KEY_SLOT 24

enum qkind {
	Q_BEGIN = 1, Q_CHANGE, Q_COMMIT, Q_KEEPALIVE, Q_SCHEMA,
	Q_BF_START, Q_BF_ROW, Q_BF_DONE, Q_BARRIER, Q_DROP,
	Q_BF_AT, Q_BF_PROGRESS, Q_JOB_START, Q_BF_GROUP, Q_COLUMNS,
};

struct qev {
	uint8_t kind;
	uint8_t op;                /* CHANGE, BF_ROW */
	uint8_t flag;              /* SCHEMA: changed; BF_START, JOB_START: 1 marker, 2 resume */
	uint8_t pad;
	int32_t n;                 /* CHANGE, BF_ROW: values (-1: none); BF_START, BF_DONE, BF_PROGRESS,
				    * JOB_START, COLUMNS: checkpoint index; BF_GROUP: members */
	uint32_t seq;              /* CHANGE */
	uint32_t pad2;
	const struct sl_table *table;
	struct sl_table *retired;  /* SCHEMA */
	uint64_t u;                /* CHANGE: csn_pos; BEGIN: tx_id; BF_DONE, BF_PROGRESS: rows; BARRIER: id */
	int64_t ts_us;             /* CHANGE, BF_ROW: read time; BEGIN, COMMIT: commit time; BF_START, BF_AT:
				    * snapshot time; BF_PROGRESS: chunks */
	/* BEGIN, COMMIT, KEEPALIVE, BF_START, DROP, BF_AT, JOB_START: a struct
	 * sl_position follows; CHANGE, BF_ROW: the values and their bytes;
	 * BF_PROGRESS: a NUL-terminated key text; COLUMNS: the NUL-terminated
	 * columns text; BF_GROUP: a struct
	 * sl_position, then n struct bf_member */
};

/* A member of a group of backfills (BF_GROUP). */
struct bf_member {
	const struct sl_table *table;
	int64_t idx;               /* checkpoint index */
};

/* A grouped table whose backfill is written and not yet durable: the
 * next whole flush makes it so, and it is checkpointed done then. */
struct bf_done {
	int idx;
	const struct sl_table *table;
	uint64_t rows;
};

_Static_assert(sizeof(struct qev) % 8 == 0, "qev keeps what follows it aligned");
_Static_assert(sizeof(struct sl_value) % 8 == 0, "values keep their bytes aligned");

struct sl_pipe {
	struct sl_pipe_config pc;
	struct sl_queue *q;
	pthread_t writer;
	bool started;
	int64_t interval_ms;

	/* shared */
	pthread_mutex_t mu;
	pthread_cond_t cv;                  /* CLOCK_MONOTONIC: a barrier done, a failure */
	bool failed;
	atomic_bool failed_flag;            /* failed, read without the lock by the reader's fast path */
	int fail_rc;
	char fail_err[SL_ERRLEN * 2];
	struct sl_log_error fail_note;      /* the SQLSTATE or errno behind fail_err */
	bool has_durable;
	struct sl_position durable;
	_Atomic uint64_t durable_seq;
	uint64_t barrier_done;
	atomic_bool abort;
	_Atomic uint64_t n_changes, n_backfill_rows, n_flushes;

	/* reader (its own cache lines: the threads write their fields apart) */
	_Alignas(64) const struct sl_source_ops *src;    /* while streaming: acks during waits */
	void *srcctx;
	bool r_in_tx;
	/* The last change pushed was an UPDATE-DELETE: its UPDATE-INSERT comes
	 * next, and a drain waits for it.  A flush between the two would leave
	 * the key change's first half in the destination, and the replay's
	 * second half could not take the values it left unchanged from the old
	 * key's row there, a tombstone by then (issue 17, seed 4840). */
	bool r_moving;
	bool w_ck_dirty;               /* entries changed what only a save keeps (versions the sink got) */
	bool r_has_pushed;
	struct sl_position r_pushed;        /* last COMMIT or KEEPALIVE pushed */
	uint64_t r_acked_seq;
	int64_t r_last_ack_ms;
	bool r_force_reply;                 /* the next ack asks for a reply */
	uint64_t r_barrier;
	int r_unpublished;
	int64_t r_counters_ms;              /* the source's counters last published */
	int64_t r_rt_off_us;                /* wall clock minus monotonic clock, taken with the
					     * counters: a change's read time is one clock read */
	bool r_start_done;                  /* the stream passed the run's start position: the tables'
					     * versions at the start were handed (sl_pipe_start_version) */
	/* column masking (pc.mask): each table version the reader was given,
	 * with its masked version (NULL when no rule touches it) */
	struct r_masked { const struct sl_table *src; char key[17]; struct sl_masked *pm; } *r_mk;
	int r_nmk, r_amk;
	int r_mk_cache[MASK_CACHE];         /* index + 1 into r_mk, 0: none */
	struct sl_masked **r_mk_stale;      /* versions changed in place: queued events may use them */
	int r_nstale;
	struct sl_value *r_mvals;           /* a masked row */
	int r_amvals;
	struct sl_buf r_mbytes;             /* the bytes of a masked row */

	/* writer */
	_Alignas(64) bool w_in_tx;
	bool w_flying;                      /* a flush started (sink flush_start) and not yet waited for */
	int64_t w_fly_mark_ts;              /* w_mark_ts when it started */
	int64_t w_fly_t0_us;                /* when it started (monotonic) */
	struct sl_position w_tx_pos;
	uint64_t w_dead_letters;       /* the sink's dead letters counted into the metrics so far */
	uint64_t w_date_clamps;        /* the sink's date clamps counted into the metrics so far */
	int64_t w_tx_ts;
	uint64_t w_tx_id;
	bool w_has_mark;
	struct sl_position w_mark;
	int64_t w_mark_ts;                  /* source time of the last committed transaction */
	int64_t w_last_ckpt_ms;
	struct sl_position w_bf_pos;
	int64_t w_bf_ts;
	uint64_t w_bf_csn;
	char w_bf_csn_text[SL_CSN_LEN + 1];  /* the CSN of every row of the backfill: (w_bf_csn, 0) */
	uint64_t w_bf_rows;                 /* rows of the table being backfilled so far */
	bool w_bf_hold;                     /* backfill rows since the last progress: flush only at the
					     * next progress (or when the table is done), so that what is
					     * durable ends where the checkpoint's resume key says */
	struct sl_buf w_key;
	bool *w_claimed;                    /* by checkpoint index: a member of the group under way
					     * (BF_GROUP), marked running with it, not yet done */
	int w_nclaimed;                     /* entries of w_claimed */
	int w_group_left;                   /* members of that group not yet done */
	struct bf_done *w_done;             /* grouped tables done, durable with the next flush */
	int w_ndone, w_adone;
	unsigned w_steps;                   /* events handled since the writer last stamped its progress */
	char w_err[SL_ERRLEN * 2];
	/* the writer's map from table versions to their metrics (pc.ops): a
	 * version's address is stable until a SCHEMA event retires it, which
	 * clears the map */
	struct { const struct sl_table *t; struct sl_ops_table *m; } w_ops[OPS_CACHE];
	/* and to the hashed prefix of their records' uuids, cleared likewise */
	struct sl_uuid_prefix w_uuid[OPS_CACHE];
	/* the CSN of the last change written, which the next one of its
	 * transaction follows */
	char w_csn[SL_CSN_LEN + 1];
	uint64_t w_csn_pos;
	uint32_t w_csn_seq;
};

static bool cancelled(const struct sl_pipe *p)
{
	return p->pc.signals && atomic_load(p->pc.signals) >= 2;
}

static bool draining(const struct sl_pipe *p)
{
	return p->pc.signals && atomic_load(p->pc.signals) >= 1;
}

static int pos_cmp(const struct sl_pipe *p, const struct sl_position *a, const struct sl_position *b)
{
	return p->pc.desc->pos_compare(a, b);
}

/* ------------------------------------------------------------------ */
/* writer                                                               */

/* Records the writer's failure (the first one wins) and wakes the reader. */
static void writer_fail(struct sl_pipe *p, int rc)
{
	pthread_mutex_lock(&p->mu);
	if (!p->failed) {
		p->failed = true;
		atomic_store(&p->failed_flag, true);
		p->fail_rc = rc;
		snprintf(p->fail_err, sizeof p->fail_err, "%s", p->w_err);
		sl_log_error_get(&p->fail_note);
	}
	pthread_cond_broadcast(&p->cv);
	pthread_mutex_unlock(&p->mu);
	sl_queue_close(p->q);
}

/* Every checkpoint write of the writer goes through here.  Once the stream
 * is aborted (stopped without a drain, or cancelled), it writes nothing: main
 * may have released the stream's lock, and a new run may own the checkpoint
 * by the time a writer that was left behind gets here. */
static int save_ckpt(struct sl_pipe *p)
{
	if (atomic_load(&p->abort))
		return SL_OK;
	if (sl_ckpt_save(p->pc.ck, p->w_err, sizeof p->w_err) < 0)
		return SL_EFAIL;
	p->w_last_ckpt_ms = sl_mono_ms();
	p->w_ck_dirty = false;
	return SL_OK;
}

static void publish_durable(struct sl_pipe *p, const struct sl_position *pos)
{
	pthread_mutex_lock(&p->mu);
	p->durable = *pos;
	p->has_durable = true;
	atomic_fetch_add(&p->durable_seq, 1);
	pthread_cond_broadcast(&p->cv);
	pthread_mutex_unlock(&p->mu);
}

/* What a sink's failure means for the stream: an operator error
 * (SL_EPREREQ: the destination refuses the credentials, its bucket does not
 * exist, its table cannot take a schema change) stops it with exit 3; anything else is a runtime failure, retried
 * from the checkpoint. */
static int sink_status(int rc)
{
	return rc == SL_EPREREQ ? SL_EPREREQ : SL_EFAIL;
}

/* A count the sink keeps since it was opened (now), added to the metric,
 * which counts since the agent started; *seen is what was added so far. */
static void count_sink(uint64_t now, uint64_t *seen, _Atomic uint64_t *metric)
{
	if (now > *seen)
		atomic_fetch_add(metric, now - *seen);
	*seen = now;
}

static void groups_done(struct sl_pipe *p);
static void groups_done_saved(struct sl_pipe *p);

/* After a flush returned rc (see sink.h) with *d: the checkpoint moves to
 * d, with mark_ts as its source time; with promote, backfill progress
 * written before the flush becomes durable too (a flush in flight carries
 * none: flush_routine() starts one only when there is none to carry). */
static int flushed(struct sl_pipe *p, int rc, const struct sl_position *d, int64_t mark_ts, int64_t dur_us,
		   bool promote)
{
	struct sl_checkpoint *ck = p->pc.ck;
	bool advanced = false;
	bool promoted = false;

	atomic_fetch_add(&p->n_flushes, 1);
	sl_debug("stream \"%s\": flushed in %" PRId64 " ms", p->pc.stream, dur_us / 1000);
	/* Backfill progress written before this flush is durable now. */
	for (int i = 0; promote && i < ck->ntables; i++) {
		struct sl_ckpt_table *e = &ck->tables[i];
		if (!e->pend.set)
			continue;
		free(e->resume_key);
		e->resume_key = e->pend.key;
		e->pend.key = NULL;
		e->rows = e->pend.rows;
		e->chunks = e->pend.chunks;
		e->pend.set = false;
		promoted = true;
	}
	/* So are the grouped tables done before it: one save for them all. */
	if (promote && p->w_ndone > 0) {
		groups_done(p);
		promoted = true;
	}
	if (rc == 1 && (!ck->has_position || pos_cmp(p, d, &ck->durable) > 0)) {
		ck->durable = *d;
		if (mark_ts)
			ck->last_source_ts_us = mark_ts;
		if (save_ckpt(p) < 0)
			return SL_EFAIL;
		publish_durable(p, d);
		advanced = true;
	} else if ((promoted || p->w_ck_dirty) && save_ckpt(p) < 0) {
		return SL_EFAIL;
	}
	if (promote)
		groups_done_saved(p);
	if (p->pc.ops) {
		/* promote: a whole flush (everything written is durable); else the
		 * flush in flight, whose batch was set aside when it started */
		sl_ops_changes_durable(p->pc.ops, promote);
		sl_ops_writer_step(p->pc.ops, sl_now_us());
		sl_ops_flushed(p->pc.ops, dur_us, advanced, advanced ? ck->last_source_ts_us : 0);
		if (p->pc.sink->dead_letters)
			count_sink(p->pc.sink->dead_letters(p->pc.sinkctx), &p->w_dead_letters,
				   &p->pc.ops->dead_letters);
		if (p->pc.sink->date_clamps)
			count_sink(p->pc.sink->date_clamps(p->pc.sinkctx), &p->w_date_clamps,
				   &p->pc.ops->date_clamps);
	}
	return SL_OK;
}

/* Waits for the flush in flight, if any, and checkpoints what it made durable. */
static int complete_flight(struct sl_pipe *p)
{
	struct sl_position d;
	int rc;

	if (!p->w_flying)
		return SL_OK;
	p->w_flying = false;
	rc = p->pc.sink->flush_wait(p->pc.sinkctx, &d, p->w_err, sizeof p->w_err);
	if (rc < 0)
		return sink_status(rc);
	if (atomic_load(&p->abort))
		return SL_OK;  /* stopping: a new run may own the checkpoint already */
	return flushed(p, rc, &d, p->w_fly_mark_ts, sl_mono_us() - p->w_fly_t0_us, false);
}

/* Flushes the sink (after the flush in flight); checkpoints and publishes
 * the position it reports when that is new. */
static int do_flush(struct sl_pipe *p)
{
	struct sl_position d;
	int64_t t0;
	int rc;

	if ((rc = complete_flight(p)) < 0)
		return rc;
	t0 = sl_mono_us();
	rc = p->pc.sink->flush(p->pc.sinkctx, &d, p->w_err, sizeof p->w_err);
	if (rc < 0)
		return sink_status(rc);
	if (atomic_load(&p->abort))
		return SL_OK;  /* stopping: a new run may own the checkpoint already */
	return flushed(p, rc, &d, p->w_mark_ts, sl_mono_us() - t0, true);
}

/* A flush due after a transaction: with a sink that flushes in two steps,
 * the batch is handed to the sink's thread and the writer goes on with the
 * next one, after the previous flush in flight was waited for; it is
 * checkpointed when it is waited for in turn.  A flush that carries
 * backfill progress is a whole one. */
static int flush_routine(struct sl_pipe *p)
{
	const struct sl_checkpoint *ck = p->pc.ck;
	int rc;

	if (!p->pc.sink->flush_start || p->w_bf_hold)
		return do_flush(p);
	for (int i = 0; i < ck->ntables; i++)
		if (ck->tables[i].pend.set)
			return do_flush(p);
	if ((rc = complete_flight(p)) < 0)
		return rc;
	if ((rc = p->pc.sink->flush_start(p->pc.sinkctx, p->w_err, sizeof p->w_err)) < 0)
		return sink_status(rc);
	if (p->pc.ops)
		sl_ops_changes_flight(p->pc.ops);
	p->w_flying = true;
	p->w_fly_mark_ts = p->w_mark_ts;
	p->w_fly_t0_us = sl_mono_us();
	return SL_OK;
}

static void mark(struct sl_pipe *p, const struct sl_position *pos)
{
	if (p->w_has_mark && pos_cmp(p, pos, &p->w_mark) <= 0)
		return;
	p->w_mark = *pos;
	p->w_has_mark = true;
	p->pc.sink->mark(p->pc.sinkctx, pos);
}

/* True when a keepalive mark is ahead of the checkpoint, nothing waits in
 * the sink, and the checkpoint is older than a status interval: a flush then
 * costs nothing but the checkpoint, and keeps an idle stream from holding
 * the source's log. */
static bool idle_advance_due(struct sl_pipe *p, int64_t now)
{
	const struct sl_checkpoint *ck = p->pc.ck;

	return !p->w_in_tx && !p->w_bf_hold && p->w_has_mark && !p->pc.sink->pending(p->pc.sinkctx) &&
	       (!ck->has_position || pos_cmp(p, &p->w_mark, &ck->durable) > 0) &&
	       now - p->w_last_ckpt_ms >= p->interval_ms;
}

/* The extra bytes of a backfill row's uuid: every row of a snapshot shares
 * its CSN, so the key makes the uuid unique and still deterministic
 * (sl_value_key_bytes: typed, self-delimiting).  A table without a key may
 * hold identical rows: the whole row and its place in the read (ordinal,
 * from 1) tell them apart. */
static void backfill_key(struct sl_buf *kb, const struct sl_table *t, const struct sl_value *vals, uint64_t ordinal)
{
	bool haskey = sl_table_has_key(t);

	sl_buf_reset(kb);
	for (int i = 0; i < t->ncols; i++)
		if (!haskey || t->cols[i].is_key)
			sl_value_key_bytes(kb, &vals[i]);
	if (!haskey) {
		unsigned char o[8];
		sl_put_u64(o, ordinal);
		sl_buf_append(kb, o, sizeof o);
	}
}

/* The metrics of table version t (NULL without pc.ops, or out of memory). */
static struct sl_ops_table *ops_table(struct sl_pipe *p, const struct sl_table *t)
{
	unsigned h = (unsigned)(((uintptr_t)t >> 4) % OPS_CACHE);

	if (p->w_ops[h].t == t)
		return p->w_ops[h].m;
	if (!p->pc.ops)
		return NULL;
	p->w_ops[h].t = t;
	p->w_ops[h].m = sl_ops_table(p->pc.ops, t->ns, t->name);
	return p->w_ops[h].m;
}

/* sl_change_set_csn(c, pos, seq), from the last change's CSN when c is the
 * next change of its transaction. */
static void set_csn(struct sl_pipe *p, struct sl_change *c, uint64_t pos, uint32_t seq)
{
	if (p->w_csn[0] && pos == p->w_csn_pos && seq > 0 && seq - 1 == p->w_csn_seq)
		sl_csn_next_seq(p->w_csn);
	else
		sl_csn_format(p->w_csn, pos, seq);
	p->w_csn_pos = pos;
	p->w_csn_seq = seq;
	c->csn_pos = pos;
	c->seq = seq;
	memcpy(c->csn, p->w_csn, sizeof c->csn);
}

/* Sets c->uuid (see sl_change_set_uuid), from the hashed prefix of
 * c->table's records. */
static void set_uuid(struct sl_pipe *p, struct sl_change *c, const void *extra, size_t extra_len)
{
	struct sl_uuid_prefix *u = &p->w_uuid[((uintptr_t)c->table >> 4) % OPS_CACHE];

	if (u->table != c->table)
		sl_uuid_prefix_init(u, p->pc.stream, c->table);
	sl_change_set_uuid_from(c, u, extra, extra_len);
}

static int write_change(struct sl_pipe *p, struct sl_change *c)
{
	int rc = p->pc.sink->write(p->pc.sinkctx, c, p->w_err, sizeof p->w_err);

	return rc < 0 ? sink_status(rc) : SL_OK;
}

/* The source_timestamp of a marker of entry e at CSN (csn_pos, 0): the one
 * of e's last marker when it had this CSN (the same marker written again,
 * after a crash before its checkpoint), else ts_us, recorded in e.  True
 * when e changed: the caller saves the checkpoint before the marker can
 * be durable, so that a replay finds it (doc/output.md, "Where a marker
 * sorts": a marker is the same record each time it is written). */
static bool marker_intent(struct sl_ckpt_table *e, uint64_t csn_pos, int64_t ts_us)
{
	if (e->marker_csn == csn_pos)
		return false;
	e->marker_csn = csn_pos;
	e->marker_ts_us = ts_us;
	return true;
}

/* Writes a TRUNCATE marker of t (checkpoint entry e) at CSN (e's
 * marker_csn, 0), with e's marker_ts_us (see marker_intent) (see
 * doc/output.md, "Where a marker sorts").  kind (NULL for a
 * re-backfill's) goes into the uuid, so that a dropped table's marker and
 * a later re-backfill's at the same CSN are two records. */
static int write_marker(struct sl_pipe *p, const struct sl_table *t, const struct sl_ckpt_table *e,
			const struct sl_position *pos, const char *kind)
{
	struct sl_change c;

	memset(&c, 0, sizeof c);
	c.table = t;
	c.op = SL_OP_TRUNCATE;
	c.read_method = p->pc.desc->read_method_backfill;
	c.pos = pos;
	sl_change_set_csn(&c, e->marker_csn, 0);
	c.source_ts_us = e->marker_ts_us;
	c.read_ts_us = sl_now_us();
	sl_change_set_uuid(&c, p->pc.stream, kind, kind ? strlen(kind) : 0);
	return write_change(p, &c);
}

/* Removes from the sink what a snapshot backfill of t at old wrote: its
 * marker at (old - 1, 0) and its rows at (old, 0). */
static int discard_snapshot_run(struct sl_pipe *p, const struct sl_table *t, const struct sl_position *old)
{
	char first[SL_CSN_LEN + 1], last[SL_CSN_LEN + 1];
	uint64_t csn = p->pc.desc->pos_csn(old);
	int rc;

	sl_csn_format(first, csn - 1, 0);
	sl_csn_format(last, csn, 0);
	if ((rc = complete_flight(p)) < 0)
		return rc;
	rc = p->pc.sink->discard_backfill(p->pc.sinkctx, t, first, last, p->w_err, sizeof p->w_err);
	return rc < 0 ? sink_status(rc) : SL_OK;
}

/* True when a snapshot at now leaves no CSN between the rows of one at old
 * and its own marker at (now - 1, 0): the source wrote nothing between. */
static bool same_position(struct sl_pipe *p, const struct sl_position *old, const struct sl_position *now)
{
	uint64_t a = p->pc.desc->pos_csn(old), b = p->pc.desc->pos_csn(now);

	return a != 0 && a <= b && b - a <= 1;
}

/* Marks entry e running by method at snapshot pos (the caller saves the
 * checkpoint): its progress is cleared, or kept (keep: a job that resumes
 * after its resume key, whose rows so far were read since an earlier
 * position), and so is what the writer had not flushed yet. */
static void bf_running(struct sl_ckpt_table *e, enum sl_bf_method method, const struct sl_position *pos, bool keep)
{
	e->state = SL_BF_RUNNING;
	e->method = method;
	e->snapshot = *pos;
	e->resumed = false;
	free(e->pend.key);
	memset(&e->pend, 0, sizeof e->pend);
	if (!keep) {
		e->rows = e->chunks = 0;
		sl_ckpt_set_resume(e, NULL);
	}
	if (!e->resume_key) {   /* nothing durable read before */
		e->since = *pos;
		e->has_since = true;
	}
}

/* Marks entry e running at snapshot pos for a new backfill of t (the
 * caller saves the checkpoint), with marker the marker's at (P - 1, 0) and
 * source time ts_us (marker_intent).  The output of an interrupted run of
 * it is discarded from the sink first, and so is a finished one's when the
 * source wrote nothing since (with marker): its rows, at this snapshot's
 * CSN, would sort above the new marker. */
static int bf_claim(struct sl_pipe *p, struct sl_ckpt_table *e, const struct sl_table *t,
		    const struct sl_position *pos, bool marker, int64_t ts_us)
{
	int rc;

	if (e->state == SL_BF_RUNNING || (marker && same_position(p, &e->snapshot, pos))) {
		char last[SL_CSN_LEN + 1];
		sl_csn_format(last, p->pc.desc->pos_csn(&e->snapshot), 0);
		sl_info("stream \"%s\": %s of %s (snapshot CSN %s)", p->pc.stream,
			e->state == SL_BF_RUNNING ? "redoing the interrupted backfill"
						  : "nothing was written since the last backfill: replacing the rows",
			e->name, last);
		if ((rc = discard_snapshot_run(p, t, &e->snapshot)) < 0)
			return rc;
	}
	bf_running(e, SL_BF_SNAPSHOT, pos, false);
	if (marker)
		marker_intent(e, p->pc.desc->pos_csn(pos) - 1, ts_us);
	return SL_OK;
}

/* The metrics of t as its backfill starts, or resumes (fresh false: the
 * rows of this run's earlier part stay counted). */
static void ops_bf_running(struct sl_pipe *p, const struct sl_table *t, bool fresh)
{
	struct sl_ops_table *m = ops_table(p, t);

	if (!m)
		return;
	if (fresh)
		atomic_store(&m->bf_run_rows, 0);
	atomic_store(&m->est_rows, t->est_rows);
	atomic_store(&m->bf_started_us, sl_now_us());
	atomic_store(&m->bf_state, SL_OPS_BF_RUNNING);
}

/* The writer's state for the rows of the table of ev (a BF_START) that
 * follow, counted from rows0. */
static void bf_begin(struct sl_pipe *p, const struct qev *ev, uint64_t rows0, bool fresh)
{
	const struct sl_position *pos = (const struct sl_position *)(ev + 1);

	p->w_bf_pos = *pos;
	p->w_bf_ts = ev->ts_us;
	p->w_bf_csn = p->pc.desc->pos_csn(pos);
	sl_csn_format(p->w_bf_csn_text, p->w_bf_csn, 0);
	p->w_bf_rows = rows0;
	p->w_bf_hold = true;
	ops_bf_running(p, ev->table, fresh);
}

/* True when entry idx is a member of the group under way (bf_group). */
static bool claimed(const struct sl_pipe *p, int idx)
{
	return idx >= 0 && idx < p->w_nclaimed && p->w_claimed[idx];
}

/* BF_START: a table's snapshot backfill starts.  A member of the group
 * under way was marked running with it (bf_group). */
static int bf_start(struct sl_pipe *p, struct qev *ev)
{
	struct sl_ckpt_table *e = &p->pc.ck->tables[ev->n];
	const struct sl_position *pos = (const struct sl_position *)(ev + 1);
	bool marker = ev->flag & 1, resume = (ev->flag & 2) && e->state == SL_BF_RUNNING && e->resume_key;
	int rc;

	if (resume) {
		/* The rows up to the resume key are durable (with the
		 * marker, if any): read the rest in this snapshot. */
		sl_info("stream \"%s\": resuming the interrupted backfill of %s after %" PRIu64 " rows "
			"(%" PRIu64 " chunks)", p->pc.stream, e->name, e->rows, e->chunks);
		e->method = SL_BF_SNAPSHOT;
		e->snapshot = *pos;
		e->resumed = true;   /* the rows read so far are from an earlier snapshot */
		free(e->pend.key);
		memset(&e->pend, 0, sizeof e->pend);
		if ((rc = save_ckpt(p)) < 0)
			return rc;
		bf_begin(p, ev, e->rows, false);
		return SL_OK;
	}
	if (!claimed(p, ev->n) &&
	    ((rc = bf_claim(p, e, ev->table, pos, marker, ev->ts_us)) < 0 || (rc = save_ckpt(p)) < 0))
		return rc;
	bf_begin(p, ev, 0, true);
	if (!marker)
		return SL_OK;
	/* The marker that starts a re-backfill: a TRUNCATE at CSN
	 * (P - 1, 0), after every change the snapshot at P holds and before
	 * its rows, so a reader that applies records in CSN order replaces
	 * the table's state with the snapshot (rows deleted while no change
	 * was followed, after a lost slot, go too).  bf_claim recorded it
	 * in the checkpoint saved above. */
	return write_marker(p, ev->table, e, &p->w_bf_pos, NULL);
}

/* BF_GROUP: the snapshot backfills of a group of tables follow, one after
 * another: each entry is marked running now, with one checkpoint save for
 * them all (before any of their rows is written), and they are marked done
 * together by the flush after the last one (bf_done). */
static int bf_group(struct sl_pipe *p, struct qev *ev)
{
	struct sl_checkpoint *ck = p->pc.ck;
	const struct sl_position *pos = (const struct sl_position *)(ev + 1);
	const char *members = (const char *)(pos + 1);
	int rc;

	if (p->w_nclaimed < ck->ntables) {
		bool *c = realloc(p->w_claimed, (size_t)ck->ntables * sizeof *c);
		if (!c) {
			snprintf(p->w_err, sizeof p->w_err, "stream \"%s\": out of memory", p->pc.stream);
			return SL_EFAIL;
		}
		memset(c + p->w_nclaimed, 0, (size_t)(ck->ntables - p->w_nclaimed) * sizeof *c);
		p->w_claimed = c;
		p->w_nclaimed = ck->ntables;
	}
	for (int i = 0; i < ev->n; i++) {
		struct bf_member mb;
		memcpy(&mb, members + (size_t)i * sizeof mb, sizeof mb);
		if ((rc = bf_claim(p, &ck->tables[mb.idx], mb.table, pos, ev->flag & 1, ev->ts_us)) < 0)
			return rc;
		p->w_claimed[mb.idx] = true;
	}
	p->w_group_left = ev->n;
	sl_debug("stream \"%s\": backfilling a group of %d tables", p->pc.stream, ev->n);
	return save_ckpt(p);
}

/* Marks entry e's backfill of t done with rows (the caller saves). */
static void bf_mark_done(struct sl_ckpt_table *e, const struct sl_table *t, uint64_t rows)
{
	e->state = SL_BF_DONE;
	e->rows = rows;
	sl_ckpt_set_resume(e, NULL);
	free(e->pend.key);
	memset(&e->pend, 0, sizeof e->pend);
	snprintf(e->schema_key, sizeof e->schema_key, "%s", t->schema_key);
}

static void ops_bf_done(struct sl_pipe *p, const struct sl_table *t)
{
	struct sl_ops_table *m = ops_table(p, t);

	if (m) {
		atomic_store(&m->bf_done_us, sl_now_us());
		atomic_store(&m->bf_state, SL_OPS_BF_DONE);
	}
}

/* A whole flush made the grouped tables done before it durable: marks
 * their entries done (the caller saves), then, once saved, their metrics. */
static void groups_done(struct sl_pipe *p)
{
	for (int i = 0; i < p->w_ndone; i++)
		bf_mark_done(&p->pc.ck->tables[p->w_done[i].idx], p->w_done[i].table, p->w_done[i].rows);
}

static void groups_done_saved(struct sl_pipe *p)
{
	for (int i = 0; i < p->w_ndone; i++)
		ops_bf_done(p, p->w_done[i].table);
	p->w_ndone = 0;
}

/* BF_DONE: a table's backfill is written.  A member of a group other than
 * its last waits for the flush that ends the group (or an earlier one);
 * any other table is flushed and checkpointed done now. */
static int bf_done(struct sl_pipe *p, struct qev *ev)
{
	struct sl_ckpt_table *e = &p->pc.ck->tables[ev->n];
	bool member = !(ev->flag & 1) && claimed(p, ev->n);
	int rc;

	p->w_bf_hold = false;
	if (member) {
		p->w_claimed[ev->n] = false;
		p->w_group_left--;
	}
	if (member && p->w_group_left > 0) {
		if (p->w_ndone == p->w_adone) {
			int na = p->w_adone ? 2 * p->w_adone : 64;
			struct bf_done *d = realloc(p->w_done, (size_t)na * sizeof *d);
			if (!d) {
				snprintf(p->w_err, sizeof p->w_err, "stream \"%s\": out of memory", p->pc.stream);
				return SL_EFAIL;
			}
			p->w_done = d;
			p->w_adone = na;
		}
		p->w_done[p->w_ndone++] = (struct bf_done){ .idx = ev->n, .table = ev->table, .rows = ev->u };
		free(e->pend.key);   /* its progress, if any, is superseded */
		memset(&e->pend, 0, sizeof e->pend);
		return SL_OK;
	}
	if ((rc = do_flush(p)) < 0)
		return rc;
	bf_mark_done(e, ev->table, ev->u);
	if (ev->flag & 1)   /* a backfill while streaming: complete as of this position */
		memcpy(&e->snapshot, ev + 1, sizeof e->snapshot);
	if ((rc = save_ckpt(p)) == SL_OK)
		ops_bf_done(p, ev->table);
	return rc;
}

/* Writes c, a change (or with backfill, a backfill row), and counts it. */
static int write_counted(struct sl_pipe *p, struct sl_change *c, bool backfill)
{
	struct sl_ops_table *m;
	int rc = write_change(p, c);

	if (rc < 0)
		return rc;
	atomic_fetch_add(backfill ? &p->n_backfill_rows : &p->n_changes, 1);
	if ((m = ops_table(p, c->table)) == NULL)
		return SL_OK;
	if (backfill)
		sl_ops_count_backfill_row(m);
	else
		sl_ops_count_change(m, c->op);
	return SL_OK;
}

/* A change of a transaction (Q_CHANGE): its record, at the transaction's
 * position and commit time. */
static int handle_change(struct sl_pipe *p, const struct qev *ev)
{
	struct sl_change c = {
		.table = ev->table,
		.op = (enum sl_op)ev->op,
		.values = ev->n >= 0 ? (const struct sl_value *)(ev + 1) : NULL,
		.read_method = p->pc.desc->read_method_cdc,
		.pos = &p->w_tx_pos,
		.source_ts_us = p->w_tx_ts,
		.read_ts_us = ev->ts_us,
		.tx_id = p->w_tx_id,
	};

	set_csn(p, &c, ev->u, ev->seq);
	set_uuid(p, &c, NULL, 0);
	return write_counted(p, &c, false);
}

/* A keepalive or heartbeat outside a transaction (Q_KEEPALIVE): the mark
 * moves, and an idle stream's checkpoint with it when one is due. */
static int handle_keepalive(struct sl_pipe *p, const struct qev *ev)
{
	struct sl_checkpoint *ck = p->pc.ck;
	const struct sl_position *pos = (const struct sl_position *)(ev + 1);

	if (p->w_in_tx)
		return SL_OK;
	/* Everything the source sent before this keepalive is durable:
	 * the stream has caught up with the source (freshness is judged
	 * against the source's activity from here). */
	if (p->pc.ops && !p->w_flying && !p->pc.sink->pending(p->pc.sinkctx))
		atomic_store(&p->pc.ops->caught_up_us, sl_now_us());
	if (ev->ts_us > 0) {
		/* a heartbeat: everything written before ts_us is before it */
		p->w_mark_ts = ev->ts_us;
		if (p->pc.ops)
			atomic_fetch_add(&p->pc.ops->heartbeats_seen, 1);
		/* At a position already durable, with nothing waiting in the
		 * sink (a binlog heartbeat on an idle stream: the position
		 * does not move), its time is durable now: no flush needed,
		 * and the checkpoint takes it at its next save. */
		if (ck->has_position && !p->pc.sink->pending(p->pc.sinkctx) && pos_cmp(p, pos, &ck->durable) <= 0 &&
		    (!p->w_has_mark || pos_cmp(p, &p->w_mark, &ck->durable) <= 0)) {
			if (ev->ts_us > ck->last_source_ts_us)
				ck->last_source_ts_us = ev->ts_us;
			if (p->pc.ops)
				sl_ops_heartbeat_durable(p->pc.ops, ev->ts_us);
		}
	}
	mark(p, pos);
	if (idle_advance_due(p, sl_mono_ms()))
		return do_flush(p);
	return SL_OK;
}

/* A table's new version (Q_SCHEMA): its layout goes into the checkpoint,
 * and the version it replaced is freed.  A version described between
 * transactions (DDL the log describes, with no change after it yet) goes to
 * the sink at once (sl_sink_ops.version), so that the destination shows the
 * new columns without waiting for the table's next change. */
static int handle_schema(struct sl_pipe *p, struct qev *ev)
{
	struct sl_checkpoint *ck = p->pc.ck;
	int rc;

	if (ev->flag)
		sl_info("stream \"%s\": table \"%s\".\"%s\" changed its columns (schema version %s)",
			p->pc.stream, ev->table->ns, ev->table->name, ev->table->schema_key);
	if (!p->w_in_tx && ev->table->ncols > 0 && p->pc.sink->version &&
	    (rc = p->pc.sink->version(p->pc.sinkctx, ev->table, p->w_err, sizeof p->w_err)) < 0)
		return rc;
	/* the layout from here on, and the source's version the sink has
	 * (a marker's column-less one aside), saved with the position that
	 * passes it: the next run hands the version at its start to the sink
	 * when it is another (DDL the log describes only with the table's
	 * next change, agent/stream.c) */
	for (int i = 0; i < ck->ntables; i++) {
		if (strcmp(ck->tables[i].ns, ev->table->ns) != 0 || strcmp(ck->tables[i].table, ev->table->name) != 0)
			continue;
		if (ev->table->layout)
			ck->tables[i].layout = ev->table->layout;
		if (ev->table->ncols > 0 && strcmp(ck->tables[i].schema_key, (const char *)(ev + 1)) != 0) {
			snprintf(ck->tables[i].schema_key, sizeof ck->tables[i].schema_key, "%s", (const char *)(ev + 1));
			p->w_ck_dirty = true;   /* saved after the flush that makes it durable */
		}
	}
	sl_table_free(ev->retired);
	ev->retired = NULL;
	memset(p->w_ops, 0, sizeof p->w_ops);  /* a freed version's address may come back */
	memset(p->w_uuid, 0, sizeof p->w_uuid);
	return SL_OK;
}

/* A backfill row (Q_BF_ROW): an INSERT at the chunk's or snapshot's
 * position, its uuid made unique by the row's key. */
static int handle_bf_row(struct sl_pipe *p, const struct qev *ev)
{
	struct sl_change c = {
		.table = ev->table,
		.op = SL_OP_INSERT,
		.values = (const struct sl_value *)(ev + 1),
		.read_method = p->pc.desc->read_method_backfill,
		.pos = &p->w_bf_pos,
		.csn_pos = p->w_bf_csn,  /* sl_change_set_csn(&c, p->w_bf_csn, 0), formatted once */
		.source_ts_us = p->w_bf_ts,
		.read_ts_us = ev->ts_us,
	};

	memcpy(c.csn, p->w_bf_csn_text, sizeof c.csn);
	backfill_key(&p->w_key, ev->table, c.values, ++p->w_bf_rows);
	set_uuid(p, &c, p->w_key.data, p->w_key.len);
	return write_counted(p, &c, true);
}

/* *slot takes a copy of the text that follows ev (the old one freed).
 * SL_OK, or SL_EFAIL out of memory (*slot unchanged). */
static int take_text(struct sl_pipe *p, const struct qev *ev, char **slot)
{
	char *text = strdup((const char *)(ev + 1));

	if (!text) {
		snprintf(p->w_err, sizeof p->w_err, "out of memory");
		return SL_EFAIL;
	}
	free(*slot);
	*slot = text;
	return SL_OK;
}

/* A backfill's progress (Q_BF_PROGRESS): durable with the next flush;
 * flushed now when one is due, so that a long backfill is checkpointed as
 * it goes. */
static int handle_bf_progress(struct sl_pipe *p, const struct qev *ev)
{
	struct sl_ckpt_table *e = &p->pc.ck->tables[ev->n];

	if (take_text(p, ev, &e->pend.key) < 0)
		return SL_EFAIL;
	e->pend.rows = ev->u;
	e->pend.chunks = (uint64_t)ev->ts_us;
	e->pend.set = true;
	if (e->method == SL_BF_WATERMARK)
		p->w_bf_hold = false;  /* a chunk's rows are written: changes follow */
	if (!p->w_in_tx && p->pc.sink->flush_due(p->pc.sinkctx, sl_mono_ms()))
		return do_flush(p);
	return SL_OK;
}

/* The columns of a table as the source knows them now (Q_COLUMNS), whose
 * change needs nothing more: the entry keeps them, saved after the next
 * flush (also one that moves no position), so that the next run does not
 * find the change again. */
static int handle_columns(struct sl_pipe *p, const struct qev *ev)
{
	p->w_ck_dirty = true;
	return take_text(p, ev, &p->pc.ck->tables[ev->n].columns);
}

/* Records a marker of entry e at CSN (csn_pos, 0) and time ts_us
 * (marker_intent), durable before the marker can be: what is written so
 * far is flushed first, so that the checkpoint saved holds nothing ahead
 * of the sink.  Nothing to do when e has that marker already. */
static int marker_saved(struct sl_pipe *p, struct sl_ckpt_table *e, uint64_t csn_pos, int64_t ts_us)
{
	int rc;

	if (e->marker_csn == csn_pos)
		return SL_OK;
	if ((rc = do_flush(p)) < 0)
		return rc;
	marker_intent(e, csn_pos, ts_us);
	return save_ckpt(p);
}

/* A backfill in chunks while streaming starts (Q_JOB_START), or resumes
 * after its resume key (flag 2); with a marker (flag 1) first.  Flag 4:
 * only the marker of a running job, at a low watermark's position (see
 * sl_pipe_job_marker). */
static int handle_job_start(struct sl_pipe *p, const struct qev *ev)
{
	struct sl_ckpt_table *e = &p->pc.ck->tables[ev->n];
	const struct sl_position *pos = (const struct sl_position *)(ev + 1);
	bool marker = ev->flag & 1, resume = ev->flag & 2;
	int rc;

	if (ev->flag & 4) {
		/* CSN (W, 0): after every record before the watermark W, before
		 * every change after it (at (W, 1) and up) and every chunk's
		 * rows (at a later high watermark's (H, 0)); its CSN and time
		 * durable first, as below */
		if ((rc = marker_saved(p, e, sl_pipe_marker_csn(p, pos, true), ev->ts_us)) < 0 ||
		    (rc = write_marker(p, ev->table, e, pos, NULL)) < 0)
			return rc;
		return do_flush(p);
	}

	/* The marker's CSN and time, durable before it can be, and nothing
	 * of this job yet (a job that counts as started never lacks its
	 * marker). */
	if (marker && (rc = marker_saved(p, e, sl_pipe_marker_csn(p, pos, false), ev->ts_us)) < 0)
		return rc;
	/* A snapshot backfill interrupted before any of it was durable:
	 * remove what it wrote, as a redo would. */
	if (e->state == SL_BF_RUNNING && e->method == SL_BF_SNAPSHOT && !e->resume_key &&
	    (rc = discard_snapshot_run(p, ev->table, &e->snapshot)) < 0)
		return rc;
	bf_running(e, SL_BF_WATERMARK, pos, resume);
	ops_bf_running(p, ev->table, !resume);
	/* What the source knows of the columns read now (a job started
	 * because they changed does not start again at the next run). */
	if (ev->table->src_columns) {
		char *cols = strdup(ev->table->src_columns);
		if (!cols) {
			snprintf(p->w_err, sizeof p->w_err, "out of memory");
			return SL_EFAIL;
		}
		free(e->columns);
		e->columns = cols;
	}
	/* The re-backfill marker, just after position P (the stream's, or
	 * the source's when the run started, whichever is later: see
	 * sl_pipe_job_start): CSN (P + 1, 0) sorts after every record written
	 * so far, by this run or an earlier one (changes before P, backfill
	 * rows at P or before) and before every chunk (read at later
	 * positions). */
	if (marker && (rc = write_marker(p, ev->table, e, pos, NULL)) < 0)
		return rc;
	/* Durable before the job counts as started: a request is
	 * forgotten only then, and a resumed job never lacks its marker. */
	if ((rc = do_flush(p)) < 0)
		return rc;
	return save_ckpt(p);
}

/* A table dropped (Q_DROP): its marker just after the source's position
 * (P + 1, 0), above every record the table had, its snapshot's rows at P
 * included; its time recorded first (pushed before the stream starts, when
 * the checkpoint holds nothing ahead of the sink); durable before the
 * table counts as dropped. */
static int handle_drop(struct sl_pipe *p, const struct qev *ev)
{
	struct sl_ckpt_table *e = &p->pc.ck->tables[ev->n];
	const struct sl_position *pos = (const struct sl_position *)(ev + 1);
	int rc;

	if (marker_intent(e, sl_pipe_marker_csn(p, pos, false), sl_now_us()) && (rc = save_ckpt(p)) < 0)
		return rc;
	if ((rc = write_marker(p, ev->table, e, pos, "dropped")) < 0 || (rc = do_flush(p)) < 0)
		return rc;
	e->state = SL_BF_DROPPED;
	return save_ckpt(p);
}

static int handle(struct sl_pipe *p, struct qev *ev)
{
	int rc;

	switch ((enum qkind)ev->kind) {
	case Q_BEGIN:
		p->w_in_tx = true;
		memcpy(&p->w_tx_pos, ev + 1, sizeof p->w_tx_pos);
		p->w_tx_ts = ev->ts_us;
		p->w_tx_id = ev->u;
		return SL_OK;
	case Q_CHANGE:
		return handle_change(p, ev);
	case Q_COMMIT:
		p->w_in_tx = false;
		p->w_mark_ts = ev->ts_us;
		mark(p, (const struct sl_position *)(ev + 1));
		if (p->pc.sink->flush_due(p->pc.sinkctx, sl_mono_ms()))
			return flush_routine(p);
		return SL_OK;
	case Q_KEEPALIVE:
		return handle_keepalive(p, ev);
	case Q_SCHEMA:
		return handle_schema(p, ev);
	case Q_BF_START:
		return bf_start(p, ev);
	case Q_BF_GROUP:
		return bf_group(p, ev);
	case Q_BF_ROW:
		return handle_bf_row(p, ev);
	case Q_BF_DONE:
		return bf_done(p, ev);
	case Q_BF_AT:
		/* The rows that follow are a chunk's, at its high watermark. */
		memcpy(&p->w_bf_pos, ev + 1, sizeof p->w_bf_pos);
		p->w_bf_ts = ev->ts_us;
		p->w_bf_csn = p->pc.desc->pos_csn(&p->w_bf_pos);
		sl_csn_format(p->w_bf_csn_text, p->w_bf_csn, 0);
		p->w_bf_hold = true;
		return SL_OK;
	case Q_BF_PROGRESS:
		return handle_bf_progress(p, ev);
	case Q_JOB_START:
		return handle_job_start(p, ev);
	case Q_COLUMNS:
		return handle_columns(p, ev);
	case Q_DROP:
		return handle_drop(p, ev);
	case Q_BARRIER:
		if ((rc = do_flush(p)) < 0)
			return rc;
		pthread_mutex_lock(&p->mu);
		p->barrier_done = ev->u;
		pthread_cond_broadcast(&p->cv);
		pthread_mutex_unlock(&p->mu);
		return SL_OK;
	}
	snprintf(p->w_err, sizeof p->w_err, "stream \"%s\": unknown pipeline event %u", p->pc.stream, ev->kind);
	return SL_EFAIL;
}

static void *writer_main(void *arg)
{
	struct sl_pipe *p = arg;

	sl_thread_name("sl-writer");
	sl_log_set_stream(p->pc.stream);
	for (;;) {
		struct qev *ev;
		size_t len;
		int rc;

		if (atomic_load(&p->abort))
			break;
		/* With a flush in flight, nothing to write is the moment to wait for it. */
		ev = sl_queue_peek(p->q, p->w_flying ? 0 : WRITER_IDLE_MS, &len);
		if (p->pc.ops && (!ev || ++p->w_steps >= WRITER_STAMP_EVENTS)) {
			p->w_steps = 0;
			sl_ops_writer_step(p->pc.ops, sl_now_us());
		}
		if (!ev) {
			int64_t now = sl_mono_ms();
			if (p->w_flying) {
				if ((rc = complete_flight(p)) < 0) {
					writer_fail(p, rc);
					break;
				}
				continue;
			}
			if (sl_queue_closed(p->q))
				break;
			/* Idle: a file that reached its age, or an idle stream's keepalive. */
			if (!p->w_in_tx && !p->w_bf_hold &&
			    (p->pc.sink->flush_due(p->pc.sinkctx, now) || idle_advance_due(p, now)) &&
			    (rc = do_flush(p)) < 0) {
				writer_fail(p, rc);
				break;
			}
			continue;
		}
		rc = handle(p, ev);
		sl_queue_pop(p->q);
		if (rc < 0) {
			writer_fail(p, rc);
			break;
		}
	}
	return NULL;
}

/* ------------------------------------------------------------------ */
/* reader                                                               */

/* The writer's failure, or a cancel, as the reader's error. */
static int reader_check(struct sl_pipe *p)
{
	int rc = SL_OK;

	if (cancelled(p)) {
		snprintf(p->pc.err, p->pc.errlen, "stream \"%s\": cancelled by a second signal; nothing "
			 "unflushed was acknowledged", p->pc.stream);
		return SL_EFAIL;
	}
	if (!atomic_load(&p->failed_flag))
		return SL_OK;   /* called for every row: no lock while all is well */
	pthread_mutex_lock(&p->mu);
	if (p->failed) {
		snprintf(p->pc.err, p->pc.errlen, "%s", p->fail_err);
		sl_log_error_set(&p->fail_note);
		rc = p->fail_rc;
	}
	pthread_mutex_unlock(&p->mu);
	return rc;
}

bool sl_pipe_durable(struct sl_pipe *p, struct sl_position *out, uint64_t *seq)
{
	bool has;

	pthread_mutex_lock(&p->mu);
	has = p->has_durable;
	if (has)
		*out = p->durable;
	if (seq)
		*seq = atomic_load(&p->durable_seq);
	pthread_mutex_unlock(&p->mu);
	return has;
}

/* Acknowledges the durable position to the source while streaming: when it
 * advanced, when force, or when a status interval passed.  An idle stream
 * (everything pushed is durable) asks for a reply. */
static int reader_ack_at(struct sl_pipe *p, bool force, int64_t now)
{
	struct sl_position d;
	uint64_t seq = atomic_load(&p->durable_seq);
	bool idle, reply;

	if (!p->src)
		return SL_OK;
	if (!force && seq == p->r_acked_seq && now - p->r_last_ack_ms < p->interval_ms)
		return SL_OK;
	if (!sl_pipe_durable(p, &d, &seq))
		return SL_OK;
	idle = !p->r_in_tx && (!p->r_has_pushed || pos_cmp(p, &d, &p->r_pushed) >= 0);
	reply = p->r_force_reply || (idle && now - p->r_last_ack_ms >= p->interval_ms);
	if (p->src->ack(p->srcctx, &d, reply, p->pc.err, p->pc.errlen) < 0)
		return SL_EFAIL;
	p->r_force_reply = false;
	p->r_acked_seq = seq;
	p->r_last_ack_ms = now;
	return SL_OK;
}

static int reader_ack(struct sl_pipe *p, bool force)
{
	return reader_ack_at(p, force, sl_mono_ms());
}

/* Room for an event of n bytes; waits (acknowledging meanwhile) while the
 * queue is full.  NULL with the error in pc.err. */
static struct qev *reserve(struct sl_pipe *p, size_t n)
{
	for (;;) {
		int slice = p->interval_ms < WAIT_SLICE_MS ? (int)p->interval_ms : WAIT_SLICE_MS;
		bool oom;
		struct qev *ev;

		if (reader_check(p) < 0)
			return NULL;
		ev = sl_queue_reserve(p->q, n, slice, &oom);
		if (ev) {
			memset(ev, 0, sizeof *ev);
			return ev;
		}
		if (oom) {
			snprintf(p->pc.err, p->pc.errlen, "stream \"%s\": out of memory queueing a change of %zu bytes",
				 p->pc.stream, n);
			return NULL;
		}
		if (sl_queue_closed(p->q)) {
			if (reader_check(p) == SL_OK)
				snprintf(p->pc.err, p->pc.errlen, "stream \"%s\": the pipeline was stopped", p->pc.stream);
			return NULL;
		}
		/* The queue is full: the writer is slow.  Keep the source alive. */
		if (reader_ack(p, false) < 0)
			return NULL;
	}
}

static int failed_rc(struct sl_pipe *p)
{
	int rc = reader_check(p);

	return rc < 0 ? rc : SL_EFAIL;
}

static void push_done(struct sl_pipe *p, size_t n, bool publish)
{
	sl_queue_commit(p->q, n);
	if (publish) {
		sl_queue_publish(p->q);
		p->r_unpublished = 0;
	} else if (++p->r_unpublished >= PUBLISH_EVERY) {
		/* Inside a transaction, whose changes the writer cannot make
		 * durable before its commit: visible now, but a sleeping writer
		 * is woken only per batch of bytes (or at the commit). */
		sl_queue_publish_lazy(p->q);
		p->r_unpublished = 0;
	}
}

static int push_pos(struct sl_pipe *p, enum qkind kind, const struct sl_position *pos, int64_t ts, uint64_t u)
{
	size_t n = sizeof(struct qev) + sizeof *pos;
	struct qev *ev = reserve(p, n);

	if (!ev)
		return failed_rc(p);
	ev->kind = (uint8_t)kind;
	ev->ts_us = ts;
	ev->u = u;
	memcpy(ev + 1, pos, sizeof *pos);
	push_done(p, n, kind != Q_BEGIN);
	return SL_OK;
}

/* ---------------------------------------------------------------------- */
/* column masking (the reader's side; see pipeline.h)                     */

static unsigned mask_slot(const struct sl_table *t)
{
	return (unsigned)(((uintptr_t)t >> 4) % MASK_CACHE);
}

/* Index of t's entry in r_mk, or -1. */
static int mask_find(struct sl_pipe *p, const struct sl_table *t)
{
	int i = p->r_mk_cache[mask_slot(t)] - 1;

	if (i >= 0 && i < p->r_nmk && p->r_mk[i].src == t)
		return i;
	for (i = 0; i < p->r_nmk; i++)
		if (p->r_mk[i].src == t) {
			p->r_mk_cache[mask_slot(t)] = i + 1;
			return i;
		}
	return -1;
}

/* Removes entry i (its masked version is the caller's now). */
static void mask_forget(struct sl_pipe *p, int i)
{
	p->r_mk[i] = p->r_mk[--p->r_nmk];
	memset(p->r_mk_cache, 0, sizeof p->r_mk_cache);
}

static int mask_oom(struct sl_pipe *p, const struct sl_table *t)
{
	snprintf(p->pc.err, p->pc.errlen, "stream \"%s\": out of memory masking the columns of \"%s\".\"%s\"",
		 p->pc.stream, t->ns, t->name);
	return SL_EFAIL;
}

/* The version of t that is queued: t itself, or its masked version.  A
 * version seen before keeps its masked version, unless it changed in place
 * (its schema_key): then the old one stays alive for what is queued. */
static int mask_table(struct sl_pipe *p, const struct sl_table *t, const struct sl_table **out)
{
	struct sl_masked *pm = NULL;
	int i, rc;

	*out = t;
	if (!p->pc.mask || !t)
		return SL_OK;
	if ((i = mask_find(p, t)) >= 0 && !memcmp(p->r_mk[i].key, t->schema_key, sizeof p->r_mk[i].key)) {
		if (p->r_mk[i].pm)
			*out = p->r_mk[i].pm->t;
		return SL_OK;
	}
	if ((rc = sl_mask_table(p->pc.mask, t, &pm, p->pc.err, p->pc.errlen)) < 0)
		return rc == SL_ECONFIG ? rc : mask_oom(p, t);
	if (i >= 0) {
		struct sl_masked **ns = realloc(p->r_mk_stale, sizeof *ns * (size_t)(p->r_nstale + 1));
		if (!ns) {
			sl_masked_free(pm, true);
			return mask_oom(p, t);
		}
		p->r_mk_stale = ns;
		p->r_mk_stale[p->r_nstale++] = p->r_mk[i].pm;
	} else {
		if (p->r_nmk == p->r_amk) {
			int na = p->r_amk ? p->r_amk * 2 : 16;
			struct r_masked *nm = realloc(p->r_mk, sizeof *nm * (size_t)na);
			if (!nm) {
				sl_masked_free(pm, true);
				return mask_oom(p, t);
			}
			p->r_mk = nm;
			p->r_amk = na;
		}
		i = p->r_nmk++;
		p->r_mk[i].src = t;
		p->r_mk_cache[mask_slot(t)] = i + 1;
	}
	memcpy(p->r_mk[i].key, t->schema_key, sizeof p->r_mk[i].key);
	p->r_mk[i].pm = pm;
	if (pm)
		*out = pm->t;
	return SL_OK;
}

/* A row of t as it is queued: *tout and *vout (the masked row, valid until
 * the next call, or vals itself). */
static int mask_row(struct sl_pipe *p, const struct sl_table *t, const struct sl_value *vals,
		    const struct sl_table **tout, const struct sl_value **vout)
{
	const struct sl_masked *pm;
	int rc;

	*vout = vals;
	if ((rc = mask_table(p, t, tout)) < 0 || *tout == t || !vals)
		return rc;
	pm = p->r_mk[mask_find(p, t)].pm;
	if (p->r_amvals < pm->t->ncols) {
		struct sl_value *nv = realloc(p->r_mvals, sizeof *nv * (size_t)pm->t->ncols);
		if (!nv)
			return mask_oom(p, t);
		p->r_mvals = nv;
		p->r_amvals = pm->t->ncols;
	}
	if (sl_mask_values(p->pc.mask, pm, vals, p->r_mvals, &p->r_mbytes) < 0) {
		snprintf(p->pc.err, p->pc.errlen, "stream \"%s\": could not mask a row of \"%s\".\"%s\" (out of "
			 "memory, or a value of an unknown kind)", p->pc.stream, t->ns, t->name);
		return SL_EFAIL;
	}
	*vout = p->r_mvals;
	return SL_OK;
}

/* sl_pipe_schema's retired version: what the writer is to free instead.
 * A masked version replaces it in every queued event, so the source's
 * version is freed here and the masked one travels instead. */
static struct sl_table *mask_retire(struct sl_pipe *p, struct sl_table *retired)
{
	struct sl_table *t;
	int i;

	if (!p->pc.mask || !retired || (i = mask_find(p, retired)) < 0)
		return retired;
	if (!p->r_mk[i].pm) {
		mask_forget(p, i);
		return retired;
	}
	t = p->r_mk[i].pm->t;
	sl_masked_free(p->r_mk[i].pm, false);
	mask_forget(p, i);
	sl_table_free(retired);
	return t;
}

/* Frees the masked versions, once the writer is gone. */
static void mask_free_all(struct sl_pipe *p)
{
	for (int i = 0; i < p->r_nmk; i++)
		sl_masked_free(p->r_mk[i].pm, true);
	for (int i = 0; i < p->r_nstale; i++)
		sl_masked_free(p->r_mk_stale[i], true);
	free(p->r_mk);
	free(p->r_mk_stale);
	free(p->r_mvals);
	sl_buf_free(&p->r_mbytes);
}

/* Pushes a row event: header, values, then their bytes. */
static int push_row(struct sl_pipe *p, enum qkind kind, const struct sl_table *t, enum sl_op op,
		    const struct sl_value *vals, uint64_t csn_pos, uint32_t seq, int64_t read_us)
{
	int nv, rc;
	size_t n = sizeof(struct qev), data = 0;
	struct sl_value *out;
	struct qev *ev;
	char *dst;

	if ((rc = mask_row(p, t, vals, &t, &vals)) < 0)
		return rc;
	nv = vals ? t->ncols : -1;
	for (int i = 0; i < nv; i++)
		if (sl_value_has_bytes(&vals[i]))
			data += vals[i].len;
	if (nv > 0)
		n += (size_t)nv * sizeof *vals;
	n += data;
	ev = reserve(p, n);
	if (!ev)
		return failed_rc(p);
	ev->kind = (uint8_t)kind;
	ev->op = (uint8_t)op;
	ev->n = nv;
	ev->seq = seq;
	ev->table = t;
	ev->u = csn_pos;
	ev->ts_us = read_us ? read_us : sl_now_us();
	out = (struct sl_value *)(ev + 1);
	dst = (char *)(out + (nv > 0 ? nv : 0));
	for (int i = 0; i < nv; i++) {
		out[i] = vals[i];
		if (sl_value_has_bytes(&vals[i])) {
			memcpy(dst, vals[i].p, vals[i].len);
			out[i].p = dst;
			dst += vals[i].len;
		}
	}
	push_done(p, n, false);
	return SL_OK;
}

int sl_pipe_begin(struct sl_pipe *p, const struct sl_position *pos, int64_t ts_us, uint64_t tx_id)
{
	p->r_in_tx = true;
	return push_pos(p, Q_BEGIN, pos, ts_us, tx_id);
}

int sl_pipe_change(struct sl_pipe *p, const struct sl_change *c)
{
	return push_row(p, Q_CHANGE, c->table, c->op, c->op == SL_OP_TRUNCATE ? NULL : c->values, c->csn_pos,
			c->seq, c->read_ts_us);
}

int sl_pipe_commit(struct sl_pipe *p, const struct sl_position *pos, int64_t ts_us)
{
	int rc = push_pos(p, Q_COMMIT, pos, ts_us, 0);

	p->r_in_tx = false;
	if (rc == SL_OK) {
		p->r_pushed = *pos;
		p->r_has_pushed = true;
	}
	return rc;
}

int sl_pipe_keepalive(struct sl_pipe *p, const struct sl_position *pos)
{
	return sl_pipe_heartbeat(p, pos, 0);
}

int sl_pipe_heartbeat(struct sl_pipe *p, const struct sl_position *pos, int64_t ts_us)
{
	bool behind = p->r_has_pushed && pos_cmp(p, pos, &p->r_pushed) <= 0;
	int rc;

	if (p->r_in_tx || (behind && ts_us <= 0))
		return SL_OK;
	/* A heartbeat at or before a position already pushed still carries its
	 * time: everything before it is before that later position too. */
	rc = push_pos(p, Q_KEEPALIVE, behind ? &p->r_pushed : pos, ts_us, 0);
	if (rc == SL_OK && !behind) {
		p->r_pushed = *pos;
		p->r_has_pushed = true;
	}
	return rc;
}

int sl_pipe_schema(struct sl_pipe *p, const struct sl_table *t, bool changed, struct sl_table *retired)
{
	/* the source's version (the column rules give the sink's its own key),
	 * for the checkpoint: handle_schema */
	char key[SCHEMA_KEY_SLOT];
	struct qev *ev;
	int rc;

	memset(key, 0, sizeof key);
	memcpy(key, t->schema_key, sizeof t->schema_key);
	if ((rc = mask_table(p, t, &t)) < 0) {
		sl_table_free(mask_retire(p, retired));
		return rc;
	}
	retired = mask_retire(p, retired);
	if (!(ev = reserve(p, sizeof *ev + sizeof key))) {
		sl_table_free(retired);  /* nothing can use it any more */
		return failed_rc(p);
	}
	ev->kind = Q_SCHEMA;
	ev->flag = changed;
	ev->table = t;
	ev->retired = retired;
	memcpy(ev + 1, key, sizeof key);
	push_done(p, sizeof *ev + sizeof key, true);
	return SL_OK;
}

int sl_pipe_backfill_start(struct sl_pipe *p, int idx, const struct sl_table *t,
			   const struct sl_snapshot_info *info, bool marker, bool resume)
{
	size_t n = sizeof(struct qev) + sizeof info->pos;
	struct qev *ev;
	int rc;

	if ((rc = mask_table(p, t, &t)) < 0)
		return rc;
	ev = reserve(p, n);

	if (!ev)
		return failed_rc(p);
	ev->kind = Q_BF_START;
	ev->n = idx;
	ev->flag = (uint8_t)((marker ? 1 : 0) | (resume ? 2 : 0));
	ev->table = t;
	ev->ts_us = info->ts_us;
	memcpy(ev + 1, &info->pos, sizeof info->pos);
	push_done(p, n, true);
	return SL_OK;
}

int sl_pipe_backfill_group(struct sl_pipe *p, const int *idx, const struct sl_table *const *tables, int n,
			   const struct sl_snapshot_info *info, bool marker)
{
	size_t len = sizeof(struct qev) + sizeof info->pos + (size_t)n * sizeof(struct bf_member);
	struct qev *ev;
	char *members;
	int rc;

	if (n <= 0 || n > SL_PIPE_GROUP_MAX) {
		snprintf(p->pc.err, p->pc.errlen, "stream \"%s\": a backfill group of %d tables", p->pc.stream, n);
		return SL_EFAIL;
	}
	if (!(ev = reserve(p, len)))
		return failed_rc(p);
	ev->kind = Q_BF_GROUP;
	ev->n = n;
	ev->flag = marker ? 1 : 0;
	ev->ts_us = info->ts_us;
	memcpy(ev + 1, &info->pos, sizeof info->pos);
	members = (char *)(ev + 1) + sizeof info->pos;
	for (int i = 0; i < n; i++) {
		struct bf_member mb = { .table = tables[i], .idx = idx[i] };
		if ((rc = mask_table(p, tables[i], &mb.table)) < 0)
			return rc;
		memcpy(members + (size_t)i * sizeof mb, &mb, sizeof mb);
	}
	push_done(p, len, true);
	return SL_OK;
}

int sl_pipe_drop_marker(struct sl_pipe *p, int idx, const struct sl_table *t, const struct sl_position *pos)
{
	size_t n = sizeof(struct qev) + sizeof *pos;
	struct qev *ev;
	int rc;

	if ((rc = mask_table(p, t, &t)) < 0)
		return rc;
	ev = reserve(p, n);

	if (!ev)
		return failed_rc(p);
	ev->kind = Q_DROP;
	ev->n = idx;
	ev->table = t;
	memcpy(ev + 1, pos, sizeof *pos);
	push_done(p, n, true);
	return SL_OK;
}

int sl_pipe_backfill_row(struct sl_pipe *p, const struct sl_table *t, const struct sl_value *vals)
{
	return push_row(p, Q_BF_ROW, t, SL_OP_INSERT, vals, 0, 0, 0);
}

int sl_pipe_backfill_at(struct sl_pipe *p, const struct sl_position *pos, int64_t ts_us)
{
	return push_pos(p, Q_BF_AT, pos, ts_us, 0);
}

int sl_pipe_backfill_progress(struct sl_pipe *p, int idx, const char *key, uint64_t rows, uint64_t chunks)
{
	size_t klen = strlen(key) + 1, n = sizeof(struct qev) + ((klen + 7) & ~(size_t)7);
	struct qev *ev = reserve(p, n);

	if (!ev)
		return failed_rc(p);
	ev->kind = Q_BF_PROGRESS;
	ev->n = idx;
	ev->u = rows;
	ev->ts_us = (int64_t)chunks;
	memcpy(ev + 1, key, klen);
	push_done(p, n, true);
	return SL_OK;
}

int sl_pipe_columns(struct sl_pipe *p, int idx, const char *columns)
{
	size_t len = strlen(columns) + 1, n = sizeof(struct qev) + ((len + 7) & ~(size_t)7);
	struct qev *ev = reserve(p, n);

	if (!ev)
		return failed_rc(p);
	ev->kind = Q_COLUMNS;
	ev->n = idx;
	memcpy(ev + 1, columns, len);
	push_done(p, n, true);
	return SL_OK;
}

/* Q_JOB_START of entry idx with flag (handle_job_start). */
static int push_job(struct sl_pipe *p, int idx, const struct sl_table *t, const struct sl_position *pos,
		    int64_t ts_us, uint8_t flag)
{
	size_t n = sizeof(struct qev) + sizeof *pos;
	struct qev *ev;
	int rc;

	if ((rc = mask_table(p, t, &t)) < 0)
		return rc;
	if (!(ev = reserve(p, n)))
		return failed_rc(p);
	ev->kind = Q_JOB_START;
	ev->n = idx;
	ev->flag = flag;
	ev->table = t;
	ev->ts_us = ts_us;
	memcpy(ev + 1, pos, sizeof *pos);
	push_done(p, n, true);
	return SL_OK;
}

int sl_pipe_job_start(struct sl_pipe *p, int idx, const struct sl_table *t, const struct sl_position *pos,
		      int64_t ts_us, bool marker, bool resume)
{
	return push_job(p, idx, t, pos, ts_us, (uint8_t)((marker ? 1 : 0) | (resume ? 2 : 0)));
}

int sl_pipe_job_marker(struct sl_pipe *p, int idx, const struct sl_table *t, const struct sl_position *pos,
		       int64_t ts_us)
{
	return push_job(p, idx, t, pos, ts_us, 4);
}

uint64_t sl_pipe_marker_csn(const struct sl_pipe *p, const struct sl_position *pos, bool at_low_watermark)
{
	return p->pc.desc->pos_csn(pos) + (at_low_watermark ? 0 : 1);
}

bool sl_pipe_marker_position(struct sl_pipe *p, struct sl_position *out)
{
	bool has = true;

	if (p->r_has_pushed)
		*out = p->r_pushed;
	else
		has = sl_pipe_durable(p, out, NULL);
	if (p->pc.has_floor && (!has || pos_cmp(p, out, &p->pc.floor) < 0)) {
		*out = p->pc.floor;
		has = true;
	}
	return has;
}

bool sl_pipe_in_tx(const struct sl_pipe *p)
{
	return p->r_in_tx;
}

int sl_pipe_backfill_done(struct sl_pipe *p, int idx, const struct sl_table *t, uint64_t rows,
			  const struct sl_position *at)
{
	size_t n = sizeof(struct qev) + (at ? sizeof *at : 0);
	struct qev *ev;
	int rc;

	if ((rc = mask_table(p, t, &t)) < 0)
		return rc;
	ev = reserve(p, n);

	if (!ev)
		return failed_rc(p);
	ev->kind = Q_BF_DONE;
	ev->n = idx;
	ev->u = rows;
	ev->flag = at ? 1 : 0;
	ev->table = t;
	if (at)
		memcpy(ev + 1, at, sizeof *at);
	push_done(p, n, true);
	return SL_OK;
}

int sl_pipe_sync(struct sl_pipe *p)
{
	struct qev *ev = reserve(p, sizeof(struct qev));
	uint64_t id = ++p->r_barrier;
	int rc = SL_OK;

	if (!ev)
		return failed_rc(p);
	ev->kind = Q_BARRIER;
	ev->u = id;
	push_done(p, sizeof *ev, true);
	for (;;) {
		int slice = p->interval_ms < WAIT_SLICE_MS ? (int)p->interval_ms : WAIT_SLICE_MS;
		struct timespec until = sl_mono_deadline(slice);
		bool done, failed;

		pthread_mutex_lock(&p->mu);
		if (p->barrier_done < id && !p->failed)
			pthread_cond_timedwait(&p->cv, &p->mu, &until);
		done = p->barrier_done >= id;
		failed = p->failed;
		pthread_mutex_unlock(&p->mu);
		if (done)
			break;
		if (failed || cancelled(p))
			return failed_rc(p);
		if ((rc = reader_ack(p, false)) < 0)
			return rc;
	}
	return reader_ack(p, false);
}

/* The source's counters, for metrics (reader); the queue is sampled when
 * the metrics are read (queue_sample). */
static void publish_counters(struct sl_pipe *p, const struct sl_source_ops *src, void *srcctx, int64_t now)
{
	p->r_counters_ms = now;
	if (!p->pc.ops)
		return;
	if (src->counters) {
		struct sl_source_counters sc;
		struct sl_ops_source_counts oc;
		src->counters(srcctx, &sc);
		oc.skipped = sc.skipped_changes;
		oc.clamps = sc.timestamp_clamps;
		oc.nan_nulls = sc.decimal_nan_nulls;
		sl_ops_source_counts(p->pc.ops, &oc);
	}
}

/* ---- the tables' versions at the run's start (sl_pipe_start_version) ---- */

/* The entry of o->start for table t (by name), or NULL. */
static struct sl_pipe_start_version *start_entry(const struct sl_pipe_stream_opts *o, const struct sl_table *t)
{
	for (int i = 0; i < o->nstart; i++) {
		const struct sl_table *v = o->start[i].table;
		if (!strcmp(v->ns, t->ns) && !strcmp(v->name, t->name))
			return &o->start[i];
	}
	return NULL;
}

/* The log described table t before the run's start position: another
 * version than the start's is handed again once the stream passes it (the
 * replayed description is older), unless the source's columns when the
 * description came differ from those at the start (DDL since, whose
 * versions the table's changes bring: the start's is stale). */
static void start_described(const struct sl_pipe_stream_opts *o, const struct sl_table *t)
{
	struct sl_pipe_start_version *v = start_entry(o, t);

	if (!v || v->state == SL_SV_SUPERSEDED)
		return;
	if (t->src_columns && v->table->src_columns && strcmp(t->src_columns, v->table->src_columns) != 0)
		v->state = SL_SV_SUPERSEDED;
	else if (strcmp(t->schema_key, v->table->schema_key) != 0)
		v->state = SL_SV_DUE;
}

/* True when ev, between transactions, is at or past the run's start
 * position: everything logged before it was read. */
static bool start_passed(const struct sl_pipe *p, const struct sl_pipe_stream_opts *o, const struct sl_event *ev)
{
	if (p->r_start_done || o->nstart == 0 || p->r_in_tx)
		return false;
	if (ev->kind != SL_EV_BEGIN && ev->kind != SL_EV_KEEPALIVE && ev->kind != SL_EV_WATERMARK &&
	    ev->kind != SL_EV_COMMIT)
		return false;
	return pos_cmp(p, &ev->pos, &o->start_at) >= 0;
}

/* The stream passed the run's start position: the versions due go to the
 * sink as SCHEMA events (and to the hooks first, as the source's would:
 * a backfill while streaming reads its chunks with them), each entry's
 * checkpoint columns with them.  Once. */
static int start_hand(struct sl_pipe *p, const struct sl_pipe_stream_opts *o)
{
	int rc = SL_OK;

	p->r_start_done = true;
	for (int i = 0; i < o->nstart && rc == SL_OK; i++) {
		const struct sl_pipe_start_version *v = &o->start[i];
		struct sl_event ev;
		if (v->state != SL_SV_DUE)
			continue;
		sl_info("stream \"%s\": table \"%s\".\"%s\": its columns at the run's start go to the destination "
			"(schema version %s): the log describes a table only with its next change", p->pc.stream,
			v->table->ns, v->table->name, v->table->schema_key);
		memset(&ev, 0, sizeof ev);
		ev.kind = SL_EV_SCHEMA;
		ev.table = v->table;
		if (o->hooks && o->hooks->event && (rc = o->hooks->event(o->hooks->payload, &ev)) < 0)
			break;
		if ((rc = sl_pipe_schema(p, v->table, false, NULL)) == SL_OK && v->idx >= 0 && v->table->src_columns)
			rc = sl_pipe_columns(p, v->idx, v->table->src_columns);
	}
	return rc;
}

int sl_pipe_stream(struct sl_pipe *p, const struct sl_source_ops *src, void *srcctx,
		   const struct sl_pipe_stream_opts *o)
{
	char *err = p->pc.err;
	size_t errlen = p->pc.errlen;
	struct sl_event ev;
	bool seen = false;
	struct sl_position last;   /* the last position where nothing is open */
	int rc;

	p->src = src;
	p->srcctx = srcctx;
	int64_t clock_us = sl_mono_us();
	bool clock_fresh = false;  /* clock_us was read after the last event came */

	p->r_last_ack_ms = clock_us / 1000;
	p->r_rt_off_us = sl_now_us() - clock_us;
	memset(&last, 0, sizeof last);
	if ((rc = reader_ack(p, true)) < 0)
		goto out;
	p->r_start_done = false;
	if (o->nstart > 0 && sl_pipe_durable(p, &last, NULL) && pos_cmp(p, &last, &o->start_at) >= 0 &&
	    (rc = start_hand(p, o)) < 0)
		goto out;   /* nothing before the start position is left to read */
	memset(&last, 0, sizeof last);
	for (;;) {
		int64_t now;
		int timeout;

		if ((rc = reader_check(p)) < 0)
			goto out;
		if (draining(p) && !p->r_moving) {
			sl_info("stream \"%s\": draining", p->pc.stream);
			if ((rc = sl_pipe_sync(p)) == SL_OK)
				rc = reader_ack(p, true);
			goto out;
		}
		if (!p->r_in_tx && o->hooks && o->hooks->idle && (rc = o->hooks->idle(o->hooks->payload)) < 0)
			goto out;
		if (o->until_caught_up && !p->r_in_tx && seen && pos_cmp(p, &last, &o->target) >= 0 &&
		    !(o->hooks && o->hooks->busy && o->hooks->busy(o->hooks->payload)) &&
		    !(src->has_pending && src->has_pending(srcctx))) {
			struct sl_position d;
			char text[2 * SL_POS_TEXT_MAX];
			if ((rc = sl_pipe_sync(p)) < 0 || (rc = reader_ack(p, true)) < 0)
				goto out;
			if (sl_pipe_durable(p, &d, NULL) && pos_cmp(p, &d, &o->target) >= 0) {
				if (p->pc.desc->pos_encode(&d, text, sizeof text) < 0)
					snprintf(text, sizeof text, "?");
				sl_info("stream \"%s\": caught up at %s", p->pc.stream, text);
				goto out;
			}
		}
		/* One clock read per event: a change read just now (the hot
		 * path: a backlog) gives its time to what follows it here. */
		if (!clock_fresh)
			clock_us = sl_mono_us();
		clock_fresh = false;
		now = clock_us / 1000;
		if ((rc = reader_ack_at(p, false, now)) < 0)
			goto out;
		if (now - p->r_counters_ms >= COUNTERS_EVERY_MS) {
			publish_counters(p, src, srcctx, now);
			p->r_rt_off_us = sl_now_us() - sl_mono_us();  /* follows a step of the wall clock */
		}
		timeout = (int)(p->r_last_ack_ms + p->interval_ms - now);
		if (timeout < 0)
			timeout = 0;
		if (timeout > (o->until_caught_up ? 500 : WAIT_SLICE_MS))
			timeout = o->until_caught_up ? 500 : WAIT_SLICE_MS;
		if ((rc = src->next(srcctx, timeout, &ev, err, errlen)) < 0)
			goto out;
		/* past the start position, before the event's hooks see it (a
		 * chunk closed at a watermark reads the start's version) */
		if (ev.kind != SL_EV_COMMIT && start_passed(p, o, &ev) && (rc = start_hand(p, o)) < 0)
			goto out;
		if (o->hooks && o->hooks->event && (rc = o->hooks->event(o->hooks->payload, &ev)) < 0)
			goto out;
		if (ev.kind != SL_EV_CHANGE)
			p->r_moving = false;
		switch (ev.kind) {
		case SL_EV_TIMEOUT:
			sl_queue_publish(p->q);
			if (o->until_caught_up) {
				/* Ask the server where it is: its keepalive ends the wait. */
				p->r_force_reply = true;
				if ((rc = reader_ack(p, true)) < 0)
					goto out;
			}
			break;
		case SL_EV_BEGIN:
			rc = sl_pipe_begin(p, &ev.pos, ev.ts_us, ev.tx_id);
			break;
		case SL_EV_CHANGE:
			clock_us = sl_mono_us();
			clock_fresh = true;
			ev.change.read_ts_us = clock_us + p->r_rt_off_us;
			rc = sl_pipe_change(p, &ev.change);
			p->r_moving = ev.change.op == SL_OP_UPDATE_DELETE;
			break;
		case SL_EV_COMMIT:
			rc = sl_pipe_commit(p, &ev.pos, ev.ts_us);
			last = ev.pos;
			seen = true;
			if (rc == SL_OK && start_passed(p, o, &ev))
				rc = start_hand(p, o);
			break;
		case SL_EV_SCHEMA:
			if (!p->r_start_done)
				start_described(o, ev.table);
			rc = sl_pipe_schema(p, ev.table, ev.changed, ev.retired);
			break;
		case SL_EV_KEEPALIVE:
			if (!p->r_in_tx) {
				rc = sl_pipe_heartbeat(p, &ev.pos, ev.heartbeat ? ev.ts_us : 0);
				if (!seen || pos_cmp(p, &ev.pos, &last) > 0)
					last = ev.pos;
				seen = true;
				sl_queue_publish(p->q);
			}
			if (rc == SL_OK && ev.reply_requested)
				rc = reader_ack(p, true);
			break;
		case SL_EV_WATERMARK:
			/* Between transactions: its position, like a keepalive's, is
			 * one where nothing before it is still to come. */
			if (!p->r_in_tx) {
				rc = sl_pipe_keepalive(p, &ev.pos);
				if (!seen || pos_cmp(p, &ev.pos, &last) > 0)
					last = ev.pos;
				seen = true;
			}
			break;
		case SL_EV_END:
			snprintf(err, errlen, "stream \"%s\": the server ended the replication stream", p->pc.stream);
			rc = SL_EFAIL;
			break;
		}
		if (rc < 0)
			goto out;
	}
out:
	sl_queue_publish(p->q);
	publish_counters(p, src, srcctx, sl_mono_ms());
	p->src = NULL;
	p->srcctx = NULL;
	return rc;
}

/* ------------------------------------------------------------------ */
/* lifecycle                                                            */

static void queue_sample(void *q, uint64_t *bytes, uint64_t *peak)
{
	*bytes = sl_queue_bytes(q);
	*peak = sl_queue_peak_bytes(q);
}

int sl_pipe_start(struct sl_pipe **out, const struct sl_pipe_config *pc)
{
	char *err = pc->err;
	size_t errlen = pc->errlen;
	struct sl_pipe *p = calloc(1, sizeof *p);
	pthread_condattr_t ca;

	*out = NULL;
	if (!p || !(p->q = sl_queue_new(pc->queue_bytes))) {
		free(p);
		snprintf(err, errlen, "stream \"%s\": out of memory", pc->stream);
		return SL_EFAIL;
	}
	p->pc = *pc;
	p->interval_ms = pc->status_interval_ms > 0 ? pc->status_interval_ms : DEFAULT_STATUS_INTERVAL_MS;
	pthread_mutex_init(&p->mu, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&p->cv, &ca);
	pthread_condattr_destroy(&ca);
	atomic_init(&p->durable_seq, 0);
	atomic_init(&p->abort, false);
	sl_buf_init(&p->w_key, 0);
	sl_buf_init(&p->r_mbytes, 0);
	p->w_last_ckpt_ms = sl_mono_ms();
	if (pc->ck->has_position) {
		p->durable = pc->ck->durable;
		p->has_durable = true;
	}
	if (pthread_create(&p->writer, NULL, writer_main, p) != 0) {
		snprintf(err, errlen, "stream \"%s\": could not start the writer thread: %s", pc->stream,
			 sl_strerror(errno));
		sl_queue_free(p->q);
		sl_buf_free(&p->w_key);
		pthread_cond_destroy(&p->cv);
		pthread_mutex_destroy(&p->mu);
		free(p);
		return SL_EFAIL;
	}
	p->started = true;
	if (pc->ops)
		sl_ops_queue_attach(pc->ops, p->q, queue_sample);
	*out = p;
	return SL_OK;
}

int sl_pipe_stop(struct sl_pipe *p, bool flush, bool *abandoned)
{
	char *err;
	size_t errlen;
	struct timespec until;
	int rc = SL_OK;
	size_t len;
	struct qev *ev;

	*abandoned = false;
	if (!p)
		return SL_OK;
	err = p->pc.err;
	errlen = p->pc.errlen;
	if (flush)
		rc = sl_pipe_sync(p);
	if (!flush || rc < 0)
		atomic_store(&p->abort, true);
	sl_queue_close(p->q);
	if (cancelled(p)) {
		/* A second signal: do not wait for a sink that may block for long. */
		clock_gettime(CLOCK_REALTIME, &until);
		until.tv_sec += STOP_GRACE_MS / 1000;
		if (p->started && pthread_timedjoin_np(p->writer, NULL, &until) != 0) {
			*abandoned = true;
			snprintf(err, errlen, "stream \"%s\": the sink did not stop within %d s", p->pc.stream,
				 STOP_GRACE_MS / 1000);
			return SL_EFAIL;
		}
	} else if (p->started) {
		/* Otherwise wait for the sink call under way: a retry must not start
		 * while the old writer still holds the sink or the checkpoint. */
		pthread_join(p->writer, NULL);
	}
	/* Table versions retired by events the writer never reached. */
	while ((ev = sl_queue_peek(p->q, 0, &len)) != NULL) {
		if (ev->kind == Q_SCHEMA)
			sl_table_free(ev->retired);
		sl_queue_pop(p->q);
	}
	if (rc == SL_OK && p->failed) {
		snprintf(err, errlen, "%s", p->fail_err);
		sl_log_error_set(&p->fail_note);
		rc = p->fail_rc;
	}
	if (p->pc.ops) {
		/* the writer has ended: what it wrote and no flush made durable is
		 * read again by the next run */
		sl_ops_queue_attach(p->pc.ops, NULL, NULL);
		sl_ops_changes_discard(p->pc.ops);
		atomic_store(&p->pc.ops->writer_progress_us, 0);
	}
	sl_queue_free(p->q);
	sl_buf_free(&p->w_key);
	free(p->w_claimed);
	free(p->w_done);
	mask_free_all(p);
	pthread_cond_destroy(&p->cv);
	pthread_mutex_destroy(&p->mu);
	free(p);
	return rc;
}

void sl_pipe_get_stats(struct sl_pipe *p, struct sl_pipe_stats *out)
{
	out->changes = atomic_load(&p->n_changes);
	out->backfill_rows = atomic_load(&p->n_backfill_rows);
	out->flushes = atomic_load(&p->n_flushes);
	out->queue_bytes = sl_queue_bytes(p->q);
	out->queue_peak_bytes = sl_queue_peak_bytes(p->q);
}
