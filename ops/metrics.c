/*
 * ops/metrics.c: the registry of the running agent's figures and its
 * Prometheus text exposition (see metrics.h and doc/operations.md, "Metrics").
 */
#include "ops/metrics.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/buf.h"
#include "common/util.h"

const double sl_ops_flush_bounds[SL_OPS_FLUSH_BUCKETS] = {
	0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 5, 30, 0 /* +Inf */
};

static const char *const state_names[SL_OPS_NSTATES] = {
	[SL_OPS_STARTING] = "starting", [SL_OPS_BACKFILLING] = "backfilling", [SL_OPS_STREAMING] = "streaming",
	[SL_OPS_RETRYING] = "retrying", [SL_OPS_STOPPED] = "stopped", [SL_OPS_FAILED] = "failed",
};

const char *sl_ops_state_name(enum sl_ops_state s)
{
	return (unsigned)s < SL_OPS_NSTATES ? state_names[s] : "unknown";
}

const char *sl_ops_op_label(enum sl_op op)
{
	switch (op) {
	case SL_OP_INSERT: return "insert";
	case SL_OP_UPDATE_INSERT: return "update";
	case SL_OP_UPDATE_DELETE: return "update_delete";
	case SL_OP_DELETE: return "delete";
	case SL_OP_TRUNCATE: return "truncate";
	}
	return "unknown";
}

struct sl_ops *sl_ops_new(void)
{
	struct sl_ops *ops = calloc(1, sizeof *ops);

	if (ops) {
		ops->started_us = sl_now_us();
		ops->live_probe_us = (int64_t)SL_OPS_STALE_S(5) * 1000000;
		ops->live_writer_us = (int64_t)SL_OPS_WRITER_STUCK_S * 1000000;
	}
	return ops;
}

void sl_ops_free(struct sl_ops *ops)
{
	struct sl_ops_stream *s, *ns;

	if (!ops)
		return;
	for (s = ops->streams; s; s = ns) {
		struct sl_ops_table *t = atomic_load(&s->tables), *nt;
		ns = s->next;
		for (; t; t = nt) {
			nt = atomic_load(&t->next);
			free(t->name);
			free(t);
		}
		pthread_mutex_destroy(&s->mu);
		pthread_mutex_destroy(&s->qmu);
		free(s->name);
		free(s);
	}
	free(ops);
}

struct sl_ops_stream *sl_ops_stream_add(struct sl_ops *ops, const char *name)
{
	struct sl_ops_stream *s = calloc(1, sizeof *s), **tail;

	if (!s || !(s->name = strdup(name))) {
		free(s);
		return NULL;
	}
	pthread_mutex_init(&s->mu, NULL);
	pthread_mutex_init(&s->qmu, NULL);
	atomic_store(&s->state, SL_OPS_STOPPED);
	atomic_store(&s->state_since_us, sl_now_us());
	for (tail = &ops->streams; *tail; tail = &(*tail)->next)
		;
	*tail = s;
	ops->nstreams++;
	return s;
}

struct sl_ops_stream *sl_ops_stream_find(struct sl_ops *ops, const char *name)
{
	for (struct sl_ops_stream *s = ops ? ops->streams : NULL; s; s = s->next)
		if (!strcmp(s->name, name))
			return s;
	return NULL;
}

struct sl_ops_table *sl_ops_table(struct sl_ops_stream *s, const char *ns, const char *name)
{
	struct sl_ops_table *t, *last = NULL;
	struct sl_buf b;

	sl_buf_init(&b, 0);
	sl_buf_printf(&b, "%s.%s", ns, name);
	if (sl_buf_failed(&b))
		return NULL;
	for (t = atomic_load(&s->tables); t; t = atomic_load(&t->next))
		if (!strcmp(t->name, b.data))
			goto out;
	pthread_mutex_lock(&s->mu);
	/* again, under the lock: another thread may have added it */
	for (t = atomic_load(&s->tables); t; last = t, t = atomic_load(&t->next))
		if (!strcmp(t->name, b.data))
			break;
	if (!t && (t = calloc(1, sizeof *t)) != NULL) {
		t->name = sl_buf_detach(&b);
		atomic_store(&t->est_rows, -1);
		if (last)
			atomic_store(&last->next, t);
		else
			atomic_store(&s->tables, t);
	}
	pthread_mutex_unlock(&s->mu);
out:
	sl_buf_free(&b);
	return t;
}

static bool running(enum sl_ops_state st)
{
	return st == SL_OPS_STARTING || st == SL_OPS_BACKFILLING || st == SL_OPS_STREAMING;
}

void sl_ops_set_state_at(struct sl_ops_stream *s, enum sl_ops_state st, int64_t now_us)
{
	bool works = st == SL_OPS_BACKFILLING || st == SL_OPS_STREAMING;
	int64_t zero = 0;

	if (atomic_exchange(&s->state, st) != (int)st)
		atomic_store(&s->state_since_us, now_us);
	if (works)
		atomic_compare_exchange_strong(&s->running_since_us, &zero, now_us);
	else
		atomic_store(&s->running_since_us, 0);
}

void sl_ops_set_state(struct sl_ops_stream *s, enum sl_ops_state st)
{
	sl_ops_set_state_at(s, st, sl_now_us());
}

void sl_ops_failed_at(struct sl_ops_stream *s, const char *err, bool retrying, int64_t now_us)
{
	int64_t ran = atomic_load(&s->running_since_us), zero = 0;

	pthread_mutex_lock(&s->mu);
	snprintf(s->last_error, sizeof s->last_error, "%s", err);
	s->last_error_us = now_us;
	pthread_mutex_unlock(&s->mu);
	/* A run that backfilled or streamed long enough ended the last outage:
	 * this failure starts a new one (its clock from now, not from the
	 * first failure before that healthy run). */
	if (ran > 0 && now_us - ran >= (int64_t)SL_OPS_HEALTHY_S * 1000000)
		atomic_store(&s->failing_since_us, now_us);
	else
		atomic_compare_exchange_strong(&s->failing_since_us, &zero, now_us);
	sl_ops_set_state_at(s, retrying ? SL_OPS_RETRYING : SL_OPS_FAILED, now_us);
}

void sl_ops_failed(struct sl_ops_stream *s, const char *err, bool retrying)
{
	sl_ops_failed_at(s, err, retrying, sl_now_us());
}

void sl_ops_attempt(struct sl_ops_stream *s)
{
	if (atomic_fetch_add(&s->attempts, 1) > 0 && atomic_load(&s->failing_since_us) != 0)
		atomic_fetch_add(&s->retries, 1);
	atomic_store(&s->run_started_us, sl_now_us());
	sl_ops_set_state(s, SL_OPS_STARTING);
}

void sl_ops_recovered(struct sl_ops_stream *s)
{
	atomic_store(&s->failing_since_us, 0);
}

int64_t sl_ops_down_seconds(struct sl_ops_stream *s, int64_t now_us, uint64_t down_warn_s)
{
	enum sl_ops_state st = (enum sl_ops_state)atomic_load(&s->state);
	int64_t failing = atomic_load(&s->failing_since_us), ran = atomic_load(&s->running_since_us);

	/* A run that has gone well for a while ends the run of failures. */
	if (ran > 0 && now_us - ran >= (int64_t)SL_OPS_HEALTHY_S * 1000000) {
		sl_ops_recovered(s);
		return -1;
	}
	if (st == SL_OPS_FAILED)
		return (int64_t)down_warn_s;
	if (failing > 0 && (st == SL_OPS_RETRYING || st == SL_OPS_STARTING))
		return (now_us - failing) / 1000000;
	return -1;
}

void sl_ops_flushed(struct sl_ops_stream *s, int64_t dur_us, bool durable, int64_t source_ts_us)
{
	double sec = (double)dur_us / 1e6;
	int64_t now = sl_now_us();

	for (int i = 0; i < SL_OPS_FLUSH_BUCKETS; i++)
		if (i == SL_OPS_FLUSH_BUCKETS - 1 || sec <= sl_ops_flush_bounds[i])
			atomic_fetch_add_explicit(&s->flush_buckets[i], 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&s->flush_sum_us, (uint64_t)(dur_us > 0 ? dur_us : 0), memory_order_relaxed);
	atomic_fetch_add_explicit(&s->flushes, 1, memory_order_relaxed);
	atomic_store(&s->last_flush_us, now);
	if (durable) {
		atomic_store(&s->durable_advanced_us, now);
		if (source_ts_us > 0)
			atomic_store(&s->durable_source_ts_us, source_ts_us);
	}
}

void sl_ops_heartbeat_durable(struct sl_ops_stream *s, int64_t source_ts_us)
{
	int64_t cur = atomic_load(&s->durable_source_ts_us);

	while (source_ts_us > cur && !atomic_compare_exchange_weak(&s->durable_source_ts_us, &cur, source_ts_us))
		;
}

void sl_ops_source_counts(struct sl_ops_stream *s, const struct sl_ops_source_counts *c)
{
	atomic_store(&s->skipped[1], c->skipped);
	atomic_store(&s->clamps[1], c->clamps);
	atomic_store(&s->nan_nulls[1], c->nan_nulls);
}

void sl_ops_source_run_end(struct sl_ops_stream *s)
{
	atomic_fetch_add(&s->skipped[0], atomic_exchange(&s->skipped[1], 0));
	atomic_fetch_add(&s->clamps[0], atomic_exchange(&s->clamps[1], 0));
	atomic_fetch_add(&s->nan_nulls[0], atomic_exchange(&s->nan_nulls[1], 0));
}

void sl_ops_queue_attach(struct sl_ops_stream *s, void *queue,
			 void (*sample)(void *queue, uint64_t *bytes, uint64_t *peak))
{
	uint64_t bytes, peak;

	pthread_mutex_lock(&s->qmu);
	if (!queue && s->queue) {
		s->queue_sample(s->queue, &bytes, &peak);
		atomic_store(&s->queue_peak_bytes, peak);
		atomic_store(&s->queue_bytes, 0);
	}
	s->queue = queue;
	s->queue_sample = sample;
	pthread_mutex_unlock(&s->qmu);
}

void sl_ops_queue_read(struct sl_ops_stream *s, uint64_t *bytes, uint64_t *peak)
{
	pthread_mutex_lock(&s->qmu);
	if (s->queue) {
		s->queue_sample(s->queue, bytes, peak);
		atomic_store(&s->queue_bytes, *bytes);
		atomic_store(&s->queue_peak_bytes, *peak);
	}
	pthread_mutex_unlock(&s->qmu);
	*bytes = atomic_load(&s->queue_bytes);
	*peak = atomic_load(&s->queue_peak_bytes);
}

#define EACH_TABLE(s, t) for (struct sl_ops_table *t = atomic_load(&(s)->tables); t; t = atomic_load(&t->next))

void sl_ops_changes_flight(struct sl_ops_stream *s)
{
	EACH_TABLE(s, t) for (int op = 0; op < SL_OPS_NOPS; op++) {
		t->w_flight[op] += t->w_pending[op];
		t->w_pending[op] = 0;
	}
}

void sl_ops_changes_durable(struct sl_ops_stream *s, bool all)
{
	EACH_TABLE(s, t) for (int op = 0; op < SL_OPS_NOPS; op++) {
		uint64_t n = t->w_flight[op] + (all ? t->w_pending[op] : 0);
		t->w_flight[op] = 0;
		if (all)
			t->w_pending[op] = 0;
		if (n)
			atomic_store_explicit(&t->changes[op], atomic_load_explicit(&t->changes[op],
						memory_order_relaxed) + n, memory_order_relaxed);
	}
}

void sl_ops_changes_discard(struct sl_ops_stream *s)
{
	uint64_t n = 0;

	EACH_TABLE(s, t) for (int op = 0; op < SL_OPS_NOPS; op++) {
		n += t->w_flight[op] + t->w_pending[op];
		t->w_flight[op] = t->w_pending[op] = 0;
	}
	if (n)
		atomic_fetch_add(&s->changes_reread, n);
}

bool sl_ops_live(struct sl_ops *ops, int64_t now_us, int64_t probe_limit_us, int64_t writer_limit_us,
		 struct sl_buf *why)
{
	bool live = true;

	for (struct sl_ops_stream *s = ops->streams; s; s = s->next) {
		int64_t pass = atomic_load(&s->probe_pass_us), w = atomic_load(&s->writer_progress_us);
		bool ok = true;

		if (why)
			sl_buf_printf(why, "stream %s:", s->name);
		if (atomic_load(&s->probe_on)) {
			int64_t age = now_us - (pass > 0 ? pass : ops->started_us);
			ok = age <= probe_limit_us;
			if (why && pass > 0)
				sl_buf_printf(why, " probe passed %" PRId64 " s ago", age / 1000000);
			else if (why)
				sl_buf_printf(why, " probe not passed yet (%" PRId64 " s)", age / 1000000);
		}
		if (w > 0) {
			bool wok = now_us - w <= writer_limit_us;
			if (why)
				sl_buf_printf(why, ", writer stepped %" PRId64 " s ago", (now_us - w) / 1000000);
			ok = ok && wok;
		}
		if (why)
			sl_buf_puts(why, ok ? "\n" : " [stuck]\n");
		live = live && ok;
	}
	return live;
}

void sl_ops_history_add(struct sl_ops_stream *s, enum sl_alert_id id, bool firing, const char *message, int64_t at_us)
{
	struct sl_ops_alert_event *e;

	if (s->nhistory == SL_OPS_HISTORY) {
		memmove(&s->history[0], &s->history[1], sizeof s->history[0] * (SL_OPS_HISTORY - 1));
		s->nhistory--;
	}
	e = &s->history[s->nhistory++];
	e->at_us = at_us;
	e->id = id;
	e->firing = firing;
	snprintf(e->message, sizeof e->message, "%s", message ? message : "");
}

int sl_ops_livez(struct sl_ops *ops, struct sl_buf *body)
{
	return sl_ops_live(ops, sl_now_us(), ops->live_probe_us, ops->live_writer_us, body) ? 200 : 503;
}

int sl_ops_health(struct sl_ops *ops, struct sl_buf *body)
{
	bool healthy = true;

	for (struct sl_ops_stream *s = ops->streams; s; s = s->next) {
		enum sl_ops_state st = (enum sl_ops_state)atomic_load(&s->state);
		bool ok = running(st);

		pthread_mutex_lock(&s->mu);
		sl_buf_printf(body, "stream %s: %s", s->name, sl_ops_state_name(st));
		if (!ok && s->last_error[0])
			sl_buf_printf(body, " (last error: %s)", s->last_error);
		for (int id = 0; id < SL_AL_COUNT; id++) {
			const struct sl_alert_def *d = sl_alert_def((enum sl_alert_id)id);
			if (!s->alerts[id].firing || d->severity != SL_ALERT_CRITICAL)
				continue;
			ok = false;
			sl_buf_printf(body, "; critical alert %s: %s", d->name, s->alerts[id].message);
		}
		pthread_mutex_unlock(&s->mu);
		sl_buf_puts(body, ok ? "\n" : " [unhealthy]\n");
		healthy = healthy && ok;
	}
	return healthy ? 200 : 503;
}

/* ---- exposition ---- */

void sl_ops_escape_label(struct sl_buf *out, const char *v)
{
	for (; *v; v++) {
		if (*v == '\\')
			sl_buf_puts(out, "\\\\");
		else if (*v == '"')
			sl_buf_puts(out, "\\\"");
		else if (*v == '\n')
			sl_buf_puts(out, "\\n");
		else
			sl_buf_putc(out, *v);
	}
}

static void family(struct sl_buf *b, const char *name, const char *type, const char *help)
{
	sl_buf_printf(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* name{stream="S"[,k="v"]...} value-text, pairs NULL-terminated. */
static void sample(struct sl_buf *b, const char *name, const char *stream, const char *const *pairs, const char *value)
{
	sl_buf_puts(b, name);
	if (stream || (pairs && pairs[0])) {
		bool first = true;
		sl_buf_putc(b, '{');
		if (stream) {
			sl_buf_puts(b, "stream=\"");
			sl_ops_escape_label(b, stream);
			sl_buf_putc(b, '"');
			first = false;
		}
		for (; pairs && pairs[0]; pairs += 2) {
			sl_buf_printf(b, "%s%s=\"", first ? "" : ",", pairs[0]);
			sl_ops_escape_label(b, pairs[1]);
			sl_buf_putc(b, '"');
			first = false;
		}
		sl_buf_putc(b, '}');
	}
	sl_buf_printf(b, " %s\n", value);
}

static void sample_u(struct sl_buf *b, const char *name, const char *stream, const char *const *pairs, uint64_t v)
{
	char t[32];

	snprintf(t, sizeof t, "%" PRIu64, v);
	sample(b, name, stream, pairs, t);
}

static void sample_i(struct sl_buf *b, const char *name, const char *stream, const char *const *pairs, int64_t v)
{
	char t[32];

	snprintf(t, sizeof t, "%" PRId64, v);
	sample(b, name, stream, pairs, t);
}

static void sample_d(struct sl_buf *b, const char *name, const char *stream, const char *const *pairs, double v)
{
	char t[48];

	snprintf(t, sizeof t, "%.6f", v);
	sample(b, name, stream, pairs, t);
}

#define EACH_STREAM(ops, s) for (struct sl_ops_stream *s = (ops)->streams; s; s = s->next)

/* A consistent copy of what the probe saw, under the stream's lock. */
struct probe_view {
	struct sl_ops_sample sample;
	bool has;
	double growth;
	bool growth_known;
	bool firing[SL_AL_COUNT];
};

static void probe_view(struct sl_ops_stream *s, struct probe_view *v)
{
	pthread_mutex_lock(&s->mu);
	v->sample = s->sample;
	v->has = s->has_sample && s->sample.ok;
	v->growth = s->growth_bytes_per_min;
	v->growth_known = s->growth_known;
	for (int i = 0; i < SL_AL_COUNT; i++)
		v->firing[i] = s->alerts[i].firing;
	pthread_mutex_unlock(&s->mu);
}

/* The probe's figures exported as they are: -1 (unknown) is left out. */
static int64_t get_lag(const struct probe_view *v) { return v->sample.lag_bytes; }
static int64_t get_retained(const struct probe_view *v) { return v->sample.retained_bytes; }
static int64_t get_safe(const struct probe_view *v) { return v->sample.safe_bytes; }
static int64_t get_active(const struct probe_view *v) { return v->sample.active; }
static int64_t get_ttp(const struct probe_view *v) { return v->sample.time_to_purge_s; }

static const struct slot_gauge {
	const char *name, *help;
	bool slot;                            /* only while the slot exists */
	int64_t (*get)(const struct probe_view *v);
} slot_gauges[] = {
	{ "sluice_source_lag_bytes", "The source's log head minus the position the stream confirmed to it "
	  "(PostgreSQL: the WAL head minus the slot's confirmed flush position).", true, get_lag },
	{ "sluice_slot_retained_wal_bytes", "Log the source keeps for the stream's position "
	  "(PostgreSQL: the WAL head minus the slot's restart position).", true, get_retained },
	{ "sluice_slot_safe_wal_bytes", "Log the server may still write before it removes what the slot needs "
	  "(PostgreSQL: safe_wal_size; absent without max_slot_wal_keep_size).", true, get_safe },
	{ "sluice_slot_active", "1 when a reader is attached to the slot.", true, get_active },
	{ "sluice_log_time_to_purge_seconds", "Time until the source purges the oldest log file the stream still "
	  "needs (binlog sources).", false, get_ttp },
};

/* The stream's state and its tables' counters and backfill progress. */
static void render_tables(struct sl_ops *ops, struct sl_buf *b)
{
	family(b, "sluice_stream_state", "gauge", "1 for the state the stream is in (starting, backfilling, streaming, "
	       "retrying, stopped, failed), 0 for the others.");
	EACH_STREAM(ops, s) {
		int st = atomic_load(&s->state);
		for (int k = 0; k < SL_OPS_NSTATES; k++) {
			const char *p[] = { "state", state_names[k], NULL };
			sample_u(b, "sluice_stream_state", s->name, p, st == k);
		}
	}
	family(b, "sluice_stream_up", "gauge", "1 while the stream runs (starting, backfilling or streaming).");
	EACH_STREAM(ops, s)
		sample_u(b, "sluice_stream_up", s->name, NULL, running((enum sl_ops_state)atomic_load(&s->state)));
	family(b, "sluice_changes_total", "counter", "Changes written to the destination and flushed, by table and "
	       "operation (update: the new row of an UPDATE; update_delete: the old row of a key change or of a keyless table).");
	EACH_STREAM(ops, s) EACH_TABLE(s, t) for (int op = 0; op < SL_OPS_NOPS; op++) {
		const char *p[] = { "table", t->name, "op", sl_ops_op_label((enum sl_op)op), NULL };
		sample_u(b, "sluice_changes_total", s->name, p, atomic_load_explicit(&t->changes[op], memory_order_relaxed));
	}
	family(b, "sluice_backfill_rows_total", "counter", "Backfill rows written to the destination, by table.");
	EACH_STREAM(ops, s) EACH_TABLE(s, t) {
		const char *p[] = { "table", t->name, NULL };
		sample_u(b, "sluice_backfill_rows_total", s->name, p, atomic_load_explicit(&t->backfill_rows, memory_order_relaxed));
	}
	family(b, "sluice_backfill_rows_estimated", "gauge", "The source's estimate of a table's rows when its "
	       "backfill started (PostgreSQL: pg_class.reltuples).");
	EACH_STREAM(ops, s) EACH_TABLE(s, t) {
		const char *p[] = { "table", t->name, NULL };
		int64_t est = atomic_load(&t->est_rows);
		if (atomic_load(&t->bf_state) != SL_OPS_BF_NONE && est >= 0)
			sample_i(b, "sluice_backfill_rows_estimated", s->name, p, est);
	}
	family(b, "sluice_backfill_progress_ratio", "gauge", "Rows of the table's backfill done over its estimate "
	       "(at most 0.99 until done, 1 when done).");
	EACH_STREAM(ops, s) EACH_TABLE(s, t) {
		const char *p[] = { "table", t->name, NULL };
		int bs = atomic_load(&t->bf_state);
		int64_t est = atomic_load(&t->est_rows);
		double r;
		if (bs == SL_OPS_BF_NONE)
			continue;
		if (bs == SL_OPS_BF_DONE)
			r = 1;
		else if (bs == SL_OPS_BF_PENDING || est <= 0)
			r = 0;
		else
			r = (double)atomic_load(&t->bf_run_rows) / (double)est;
		if (bs != SL_OPS_BF_DONE && r > 0.99)
			r = 0.99;
		sample_d(b, "sluice_backfill_progress_ratio", s->name, p, r);
	}
}

/* The sources' gauges of the position holder's state in their own words
 * (struct sl_source_ops.hold_metric): one family per metric name, in the
 * order the streams first name them. */
static void render_hold(struct sl_ops *ops, struct sl_buf *b, struct probe_view *views)
{
	for (int f = 0; f < ops->nstreams; f++) {
		const struct sl_ops_sample *first = &views[f].sample;
		bool named_before = false;
		int i = 0;

		if (!views[f].has || !first->hold_metric)
			continue;
		for (int k = 0; k < f && !named_before; k++)
			named_before = views[k].has && views[k].sample.hold_metric &&
				       !strcmp(views[k].sample.hold_metric, first->hold_metric);
		if (named_before)
			continue;
		family(b, first->hold_metric, "gauge", first->hold_help ? first->hold_help : "");
		EACH_STREAM(ops, s) {
			struct probe_view *v = &views[i++];
			const char *p[] = { v->sample.hold_label, v->sample.hold_word, NULL };
			if (v->has && v->sample.exists && v->sample.hold_word[0] && v->sample.hold_metric &&
			    !strcmp(v->sample.hold_metric, first->hold_metric) && v->sample.hold_label)
				sample_u(b, first->hold_metric, s->name, p, 1);
		}
	}
}

/* What the probe read of the stream's position holder (the slot). */
static void render_slot(struct sl_ops *ops, struct sl_buf *b, struct probe_view *views)
{
	int i;

	for (size_t k = 0; k < sizeof slot_gauges / sizeof slot_gauges[0]; k++) {
		const struct slot_gauge *g = &slot_gauges[k];
		family(b, g->name, "gauge", g->help);
		i = 0;
		EACH_STREAM(ops, s) {
			struct probe_view *v = &views[i++];
			int64_t x = v->has && (v->sample.exists || !g->slot) ? g->get(v) : -1;
			if (x >= 0)
				sample_i(b, g->name, s->name, NULL, x);
		}
	}
	family(b, "sluice_slot_retained_wal_growth_bytes_per_minute", "gauge", "How fast the retained log grows, "
	       "over the last five minutes of probes.");
	i = 0;
	EACH_STREAM(ops, s) {
		struct probe_view *v = &views[i++];
		if (v->has && v->growth_known)
			sample_d(b, "sluice_slot_retained_wal_growth_bytes_per_minute", s->name, NULL, v->growth);
	}
	render_hold(ops, b, views);
}

/* Freshness, flushes, the queue and the stream's counters. */
static void render_counters(struct sl_ops *ops, struct sl_buf *b)
{
	int64_t now = sl_now_us();

	family(b, "sluice_freshness_seconds", "gauge", "Now minus the source time of the last durable change (or "
	       "heartbeat, when heartbeats are on).");
	EACH_STREAM(ops, s) {
		int64_t ts = atomic_load(&s->durable_source_ts_us);
		if (ts > 0)
			sample_d(b, "sluice_freshness_seconds", s->name, NULL, (double)(now - ts) / 1e6);
	}
	family(b, "sluice_sink_flush_seconds", "histogram", "How long the destination takes to make a batch durable.");
	EACH_STREAM(ops, s) {
		char le[32];
		for (int k = 0; k < SL_OPS_FLUSH_BUCKETS; k++) {
			const char *p[] = { "le", le, NULL };
			if (k == SL_OPS_FLUSH_BUCKETS - 1)
				snprintf(le, sizeof le, "+Inf");
			else
				snprintf(le, sizeof le, "%g", sl_ops_flush_bounds[k]);
			sample_u(b, "sluice_sink_flush_seconds_bucket", s->name, p, atomic_load(&s->flush_buckets[k]));
		}
		sample_d(b, "sluice_sink_flush_seconds_sum", s->name, NULL, (double)atomic_load(&s->flush_sum_us) / 1e6);
		sample_u(b, "sluice_sink_flush_seconds_count", s->name, NULL, atomic_load(&s->flushes));
	}
	family(b, "sluice_last_flush_timestamp_seconds", "gauge", "Unix time of the destination's last flush.");
	EACH_STREAM(ops, s) {
		int64_t t = atomic_load(&s->last_flush_us);
		if (t > 0)
			sample_d(b, "sluice_last_flush_timestamp_seconds", s->name, NULL, (double)t / 1e6);
	}
	family(b, "sluice_queue_bytes", "gauge", "Bytes waiting in the queue between reading and writing.");
	EACH_STREAM(ops, s) {
		uint64_t qb, qp;
		sl_ops_queue_read(s, &qb, &qp);
		sample_u(b, "sluice_queue_bytes", s->name, NULL, qb);
	}
	family(b, "sluice_changes_reread_total", "counter", "Changes written to the destination whose flush did "
	       "not succeed (the run failed first): they are read and written again.");
	EACH_STREAM(ops, s)
		sample_u(b, "sluice_changes_reread_total", s->name, NULL, atomic_load(&s->changes_reread));
	family(b, "sluice_dead_letter_total", "counter", "Changes set aside as dead letters instead of written.");
	EACH_STREAM(ops, s)
		sample_u(b, "sluice_dead_letter_total", s->name, NULL, atomic_load(&s->dead_letters));
	family(b, "sluice_date_clamps_total", "counter", "Dates outside the destination type's range, written "
	       "as its nearer end.");
	EACH_STREAM(ops, s)
		sample_u(b, "sluice_date_clamps_total", s->name, NULL, atomic_load(&s->date_clamps));
	family(b, "sluice_reconnects_total", "counter", "Runs of the stream started again after a failure.");
	EACH_STREAM(ops, s)
		sample_u(b, "sluice_reconnects_total", s->name, NULL, atomic_load(&s->retries));
	family(b, "sluice_skipped_changes_total", "counter", "Changes of tables that the publication carries but "
	       "the stream does not select, skipped.");
	EACH_STREAM(ops, s)
		sample_u(b, "sluice_skipped_changes_total", s->name, NULL,
			 atomic_load(&s->skipped[0]) + atomic_load(&s->skipped[1]));
	family(b, "sluice_timestamp_clamps_total", "counter", "Timestamps past what 64-bit microseconds hold, "
	       "written as the last representable instant.");
	EACH_STREAM(ops, s)
		sample_u(b, "sluice_timestamp_clamps_total", s->name, NULL,
			 atomic_load(&s->clamps[0]) + atomic_load(&s->clamps[1]));
	family(b, "sluice_decimal_nan_nulls_total", "counter", "NaN in numeric(p,s) columns, written as null.");
	EACH_STREAM(ops, s)
		sample_u(b, "sluice_decimal_nan_nulls_total", s->name, NULL,
			 atomic_load(&s->nan_nulls[0]) + atomic_load(&s->nan_nulls[1]));
	family(b, "sluice_heartbeats_sent_total", "counter", "Heartbeats written into the source's log.");
	EACH_STREAM(ops, s)
		sample_u(b, "sluice_heartbeats_sent_total", s->name, NULL, atomic_load(&s->heartbeats_sent));
	family(b, "sluice_heartbeats_received_total", "counter", "Heartbeats that came back through the stream.");
	EACH_STREAM(ops, s)
		sample_u(b, "sluice_heartbeats_received_total", s->name, NULL, atomic_load(&s->heartbeats_seen));
	family(b, "sluice_probe_errors_total", "counter", "Probes of the source that failed.");
	EACH_STREAM(ops, s)
		sample_u(b, "sluice_probe_errors_total", s->name, NULL, atomic_load(&s->probe_errors));
}

static void render_streams(struct sl_ops *ops, struct sl_buf *b, struct probe_view *views)
{
	int i;

	render_tables(ops, b);
	render_slot(ops, b, views);
	render_counters(ops, b);
	family(b, "sluice_alert_firing", "gauge", "1 while the alert fires.");
	i = 0;
	EACH_STREAM(ops, s) {
		struct probe_view *v = &views[i++];
		for (int id = 0; id < SL_AL_COUNT; id++) {
			const char *p[] = { "alert", sl_alert_def((enum sl_alert_id)id)->name, NULL };
			sample_u(b, "sluice_alert_firing", s->name, p, v->firing[id]);
		}
	}
}

int sl_ops_render(struct sl_ops *ops, struct sl_buf *out)
{
	struct probe_view *views = calloc((size_t)(ops->nstreams > 0 ? ops->nstreams : 1), sizeof *views);
	int i = 0;

	if (!views)
		return -1;
	EACH_STREAM(ops, s)
		probe_view(s, &views[i++]);
	render_streams(ops, out, views);
	free(views);
	family(out, "sluice_webhook_sent_total", "counter", "Alert notifications the webhook accepted (2xx).");
	sample_u(out, "sluice_webhook_sent_total", NULL, NULL, atomic_load(&ops->webhook_sent));
	family(out, "sluice_webhook_failed_total", "counter", "Alert notifications given up after every retry.");
	sample_u(out, "sluice_webhook_failed_total", NULL, NULL, atomic_load(&ops->webhook_failed));
	family(out, "sluice_webhook_dropped_total", "counter", "Alert notifications dropped because the webhook's "
	       "queue was full.");
	sample_u(out, "sluice_webhook_dropped_total", NULL, NULL, atomic_load(&ops->webhook_dropped));
	return sl_buf_failed(out) ? -1 : 0;
}
