/*
 * agent/monitor.c: the operations layer of `sluice run` (see monitor.h).
 */
#include "agent/monitor.h"

#include <inttypes.h>
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent/checkpoint.h"
#include "agent/runstate.h"
#include "agent/stream.h"
#include "common/log.h"
#include "common/util.h"
#include "ops/http.h"
#include "ops/probe.h"
#include "ops/sdnotify.h"
#include "ops/webhook.h"

/* One stream's probe: its source, its session, its metrics. */
struct mon_stream {
	struct sl_monitor *m;
	struct sl_stream_config *sc;
	const struct sl_source_ops *src;
	struct sl_source_stream sst;
	struct sl_ops_stream *os;
	void *session;                 /* the source's probe session, or NULL */
	struct sl_probe *probe;
	pthread_mutex_t write_mu;      /* the probe and the worker both write the run file */
};

struct sl_monitor {
	struct sl_config *cfg;
	struct sl_ops *ops;
	struct sl_http *http;
	struct sl_webhook *wh;
	struct sl_watchdog *wd;            /* under systemd (NOTIFY_SOCKET), or NULL */
	struct mon_stream *streams;
	int n;
	char host[256];
};

/* ---- the probe's hooks ---- */

static void to_sample(const struct sl_source_ops *src, const struct sl_source_status *si, struct sl_ops_sample *out)
{
	out->exists = si->exists;
	out->active = si->active;
	out->hold = si->hold;
	snprintf(out->hold_word, sizeof out->hold_word, "%s", si->hold_word);
	out->hold_metric = src->hold_metric;
	out->hold_label = src->hold_label;
	out->hold_help = src->hold_help;
	out->lag_bytes = si->lag_bytes;
	out->retained_bytes = si->retained_bytes;
	out->safe_bytes = si->safe_bytes;
	out->time_to_purge_s = si->log_known ? si->time_to_purge_s : -1;
}

static int hook_sample(void *payload, struct sl_ops_sample *out)
{
	struct mon_stream *ms = payload;
	struct sl_source_status si;
	char err[SL_ERRLEN];
	int rc;

	memset(&si, 0, sizeof si);
	if (ms->src->probe_open && ms->src->probe_sample) {
		if (!ms->session &&
		    ms->src->probe_open(&ms->session, ms->sc->source, &ms->sst, err, sizeof err) < 0) {
			ms->session = NULL;
			snprintf(out->error, sizeof out->error, "%s", err);
			return -1;
		}
		rc = ms->src->probe_sample(ms->session, &si, err, sizeof err);
		if (rc < 0) {
			ms->src->probe_close(ms->session);
			ms->session = NULL;
		}
	} else {
		/* A source without a probe session (a binlog source) measures
		 * from the stream's durable position: the checkpoint's, which
		 * the writer replaces atomically. */
		struct sl_checkpoint ck;
		struct sl_source_stream sst = ms->sst;
		memset(&ck, 0, sizeof ck);
		if (sl_ckpt_load(&ck, ms->src->desc, ms->m->cfg->state_dir, ms->sc->name, err, sizeof err) == 0 &&
		    ck.exists && ck.has_position && !ck.reset) {
			sst.durable = &ck.durable;
			sst.durable_ts_us = ck.last_source_ts_us;
		}
		rc = ms->src->probe(ms->sc->source, &sst, &si, err, sizeof err);
		sl_ckpt_free(&ck);
		/* The server holds nothing for a binlog reader, so the probe
		 * cannot see one: the reader is this agent's stream, attached
		 * while it backfills or streams (slot_inactive then means what
		 * it means for a slot: no reader for that long). */
		if (rc == 0 && si.exists) {
			int st = atomic_load(&ms->os->state);
			si.active = st == SL_OPS_STREAMING || st == SL_OPS_BACKFILLING;
		}
	}
	if (rc < 0) {
		snprintf(out->error, sizeof out->error, "%s", err);
		return -1;
	}
	to_sample(ms->src, &si, out);
	return 0;
}

static int hook_heartbeat(void *payload, char *err, size_t errlen)
{
	struct mon_stream *ms = payload;
	int rc;

	if (!ms->session)
		return -1;  /* the next sample connects again */
	rc = ms->src->heartbeat(ms->session, err, errlen);
	if (rc == SL_EPREREQ)
		return 1;
	return rc < 0 ? -1 : 0;
}

static void hook_tick(void *payload)
{
	struct mon_stream *ms = payload;

	sl_monitor_write_run(ms->m, ms->sc);
}

static void hook_close(void *payload)
{
	struct mon_stream *ms = payload;

	if (ms->session)
		ms->src->probe_close(ms->session);
	ms->session = NULL;
}

/* ---- the run file ---- */

static json_t *opt_int(int64_t v)
{
	return v >= 0 ? json_integer((json_int_t)v) : json_null();
}

static json_t *opt_str(const char *s)
{
	return s && *s ? json_string(s) : json_null();
}

static const char *bf_name(int st)
{
	switch (st) {
	case SL_OPS_BF_PENDING: return "pending";
	case SL_OPS_BF_RUNNING: return "running";
	case SL_OPS_BF_DONE: return "done";
	}
	return "none";
}

static json_t *run_json(struct sl_monitor *m, struct mon_stream *ms)
{
	struct sl_ops_stream *os = ms->os;
	int64_t now = sl_now_us(), ts = atomic_load(&os->durable_source_ts_us);
	json_t *o = json_object(), *tabs = json_object(), *firing = json_array(), *hist = json_array(), *probe, *hb;
	uint64_t qbytes, qpeak;

	json_object_set_new(o, "pid", json_integer((json_int_t)getpid()));
	json_object_set_new(o, "updated_us", json_integer(now));
	json_object_set_new(o, "agent_started_us", json_integer(m->ops->started_us));
	json_object_set_new(o, "state", json_string(sl_ops_state_name((enum sl_ops_state)atomic_load(&os->state))));
	json_object_set_new(o, "state_since_us", json_integer(atomic_load(&os->state_since_us)));
	json_object_set_new(o, "attempts", json_integer((json_int_t)atomic_load(&os->attempts)));
	json_object_set_new(o, "retries", json_integer((json_int_t)atomic_load(&os->retries)));
	json_object_set_new(o, "failing_since_us", opt_int(atomic_load(&os->failing_since_us) ?: -1));
	sl_ops_queue_read(os, &qbytes, &qpeak);
	json_object_set_new(o, "queue_bytes", json_integer((json_int_t)qbytes));
	json_object_set_new(o, "queue_peak_bytes", json_integer((json_int_t)qpeak));
	json_object_set_new(o, "changes_reread", json_integer((json_int_t)atomic_load(&os->changes_reread)));
	json_object_set_new(o, "probe_interval_seconds", json_integer((json_int_t)m->cfg->probe_interval));
	json_object_set_new(o, "probe_pass_us", opt_int(atomic_load(&os->probe_pass_us) ?: -1));
	json_object_set_new(o, "writer_progress_us", opt_int(atomic_load(&os->writer_progress_us) ?: -1));
	json_object_set_new(o, "flushes", json_integer((json_int_t)atomic_load(&os->flushes)));
	json_object_set_new(o, "last_flush_us", opt_int(atomic_load(&os->last_flush_us) ?: -1));
	json_object_set_new(o, "durable_source_time_us", opt_int(ts ?: -1));
	json_object_set_new(o, "freshness_seconds", ts > 0 ? json_integer((now - ts) / 1000000) : json_null());
	json_object_set_new(o, "dead_letters", json_integer((json_int_t)atomic_load(&os->dead_letters)));
	json_object_set_new(o, "skipped_changes",
			    json_integer((json_int_t)(atomic_load(&os->skipped[0]) + atomic_load(&os->skipped[1]))));
	hb = json_object();
	json_object_set_new(hb, "interval_seconds", json_integer((json_int_t)ms->sc->heartbeat_interval));
	/* "sluice" writes them (heartbeat_interval); "server": the source's log brings its own */
	json_object_set_new(hb, "from", json_string(ms->src && ms->src->log_heartbeats ? "server" : "sluice"));
	json_object_set_new(hb, "on", json_boolean(atomic_load(&os->heartbeat_on)));
	json_object_set_new(hb, "sent", json_integer((json_int_t)atomic_load(&os->heartbeats_sent)));
	json_object_set_new(hb, "received", json_integer((json_int_t)atomic_load(&os->heartbeats_seen)));
	pthread_mutex_lock(&os->mu);
	json_object_set_new(hb, "note", opt_str(os->heartbeat_note));
	json_object_set_new(o, "last_error", os->last_error[0] ?
			    json_pack("{s:s, s:I}", "message", os->last_error, "at_us", (json_int_t)os->last_error_us) :
			    json_null());
	probe = json_object();
	json_object_set_new(probe, "at_us", os->has_sample ? json_integer(os->sample.at_us) : json_null());
	json_object_set_new(probe, "ok", json_boolean(os->has_sample && os->sample.ok));
	json_object_set_new(probe, "error", os->has_sample && !os->sample.ok ? json_string(os->sample.error) : json_null());
	json_object_set_new(probe, "growth_bytes_per_minute", os->growth_known ? json_real(os->growth_bytes_per_min) :
			    json_null());
	for (int id = 0; id < SL_AL_COUNT; id++) {
		const struct sl_alert_def *d = sl_alert_def((enum sl_alert_id)id);
		if (!os->alerts[id].firing)
			continue;
		json_array_append_new(firing, json_pack("{s:s, s:s, s:I, s:s}", "alert", d->name, "severity",
							sl_alert_severity_name(d->severity), "since_us",
							(json_int_t)os->alerts[id].since_us, "message",
							os->alerts[id].message));
	}
	for (int i = 0; i < os->nhistory; i++) {
		const struct sl_ops_alert_event *e = &os->history[i];
		json_array_append_new(hist, json_pack("{s:I, s:s, s:s, s:s}", "at_us", (json_int_t)e->at_us, "alert",
						      sl_alert_def(e->id)->name, "status", e->firing ? "firing" : "resolved",
						      "message", e->message));
	}
	pthread_mutex_unlock(&os->mu);
	json_object_set_new(o, "heartbeats", hb);
	json_object_set_new(o, "probe", probe);
	json_object_set_new(o, "alerts_firing", firing);
	json_object_set_new(o, "alert_history", hist);
	for (struct sl_ops_table *t = atomic_load(&os->tables); t; t = atomic_load(&t->next)) {
		json_t *ch = json_object(), *tj = json_object();
		int bs = atomic_load(&t->bf_state);
		for (int op = 0; op < SL_OPS_NOPS; op++)
			json_object_set_new(ch, sl_ops_op_label((enum sl_op)op),
					    json_integer((json_int_t)atomic_load(&t->changes[op])));
		json_object_set_new(tj, "changes", ch);
		if (bs != SL_OPS_BF_NONE)
			json_object_set_new(tj, "backfill", json_pack("{s:s, s:I, s:o, s:o, s:o}", "state", bf_name(bs),
				"rows", (json_int_t)atomic_load(&t->bf_run_rows), "estimated_rows",
				opt_int(atomic_load(&t->est_rows)), "started_us", opt_int(atomic_load(&t->bf_started_us) ?: -1),
				"done_us", opt_int(atomic_load(&t->bf_done_us) ?: -1)));
		json_object_set_new(tabs, t->name, tj);
	}
	json_object_set_new(o, "tables", tabs);
	return o;
}

static struct mon_stream *find(struct sl_monitor *m, const struct sl_stream_config *sc)
{
	for (int i = 0; m && i < m->n; i++)
		if (m->streams[i].sc == sc)
			return &m->streams[i];
	return NULL;
}

void sl_monitor_write_run(struct sl_monitor *m, const struct sl_stream_config *sc)
{
	struct mon_stream *ms = find(m, sc);
	char err[SL_ERRLEN], *text;
	json_t *j;

	if (!ms)
		return;
	pthread_mutex_lock(&ms->write_mu);
	j = run_json(m, ms);
	text = j ? json_dumps(j, JSON_INDENT(1) | JSON_SORT_KEYS) : NULL;
	if (text && sl_runstate_run_write(m->cfg->state_dir, sc->name, text, err, sizeof err) < 0)
		sl_debug("stream \"%s\": could not write the run file for sluice status: %s", sc->name, err);
	pthread_mutex_unlock(&ms->write_mu);
	free(text);
	json_decref(j);
}

/* ---- start, stop ---- */

int sl_monitor_start(struct sl_monitor **out, struct sl_config *cfg, struct sl_stream_config *const *streams,
		     int n, char *err, size_t errlen)
{
	struct sl_monitor *m = calloc(1, sizeof *m);

	*out = NULL;
	if (!m || !(m->ops = sl_ops_new()) || !(m->streams = calloc((size_t)(n > 0 ? n : 1), sizeof *m->streams))) {
		if (m)
			sl_ops_free(m->ops);
		free(m);
		snprintf(err, errlen, "out of memory");
		return SL_EFAIL;
	}
	m->cfg = cfg;
	m->ops->live_probe_us = (int64_t)SL_OPS_STALE_S((int64_t)cfg->probe_interval) * 1000000;
	if (gethostname(m->host, sizeof m->host - 1) < 0)
		m->host[0] = '\0';
	for (int i = 0; i < n; i++) {
		struct mon_stream *ms = &m->streams[i];
		char e2[SL_ERRLEN];
		ms->m = m;
		ms->sc = streams[i];
		pthread_mutex_init(&ms->write_mu, NULL);
		ms->src = sl_stream_source(ms->sc, e2, sizeof e2);
		sl_stream_source_view(cfg, ms->sc, &ms->sst);
		if (!(ms->os = sl_ops_stream_add(m->ops, ms->sc->name))) {
			sl_monitor_stop(m);
			snprintf(err, errlen, "out of memory");
			return SL_EFAIL;
		}
		m->n++;
	}
	if (cfg->alert_webhook && !(m->wh = sl_webhook_start(cfg->alert_webhook, m->ops, err, errlen))) {
		sl_monitor_stop(m);
		return SL_EFAIL;
	}
	/* A monitoring system that was told to scrape an address must not see
	 * an agent that runs without it: a configured endpoint that cannot
	 * listen stops the agent (exit 3, as `sluice check` says too). */
	if (cfg->metrics_listen && *cfg->metrics_listen) {
		char e2[SL_ERRLEN];
		if (!(m->http = sl_http_start(cfg->metrics_listen, m->ops, e2, sizeof e2))) {
			snprintf(err, errlen, "%s: %s", cfg->path, e2);
			sl_monitor_stop(m);
			return SL_EPREREQ;
		}
		sl_info("serving /metrics, /healthz and /livez on %s", cfg->metrics_listen);
	}
	*out = m;
	return SL_OK;
}

void sl_monitor_probe_start(struct sl_monitor *m)
{
	for (int i = 0; m && i < m->n; i++) {
		struct mon_stream *ms = &m->streams[i];
		struct sl_probe_hooks h = {
			.payload = ms, .sample = hook_sample, .tick = hook_tick, .close = hook_close,
		};
		struct sl_probe_config pc;
		char err[SL_ERRLEN];

		if (!ms->src)
			continue;
		memset(&pc, 0, sizeof pc);
		pc.interval_ms = (int64_t)m->cfg->probe_interval * 1000;
		pc.heartbeat_ms = (int64_t)ms->sc->heartbeat_interval * 1000;
		pc.host = m->host;
		pc.limits.lag_warn_bytes = ms->sc->lag_warn_bytes;
		pc.limits.lag_critical_bytes = ms->sc->lag_critical_bytes;
		pc.limits.retained_warn_bytes = ms->sc->retained_wal_warn_bytes;
		pc.limits.retained_critical_bytes = ms->sc->retained_wal_critical_bytes;
		pc.limits.growth_warn_bytes_per_min = ms->sc->retained_wal_growth_warn_bytes;
		pc.limits.freshness_warn_s = ms->sc->freshness_warn_seconds;
		pc.limits.inactive_warn_s = ms->sc->slot_inactive_warn_seconds;
		pc.limits.purge_warn_s = ms->sc->log_purge_warn_seconds;
		pc.limits.down_warn_s = ms->sc->stream_down_warn_seconds;
		if (ms->src->log_heartbeats) {
			/* the server's own heartbeats come through the stream: nothing to write */
			atomic_store(&ms->os->heartbeat_on, true);
		} else if (pc.heartbeat_ms > 0) {
			if (ms->src->heartbeat && ms->src->probe_open) {
				h.heartbeat = hook_heartbeat;
				atomic_store(&ms->os->heartbeat_on, true);
			} else {
				snprintf(ms->os->heartbeat_note, sizeof ms->os->heartbeat_note,
					 "source type %s has no heartbeats", ms->src->type);
			}
		}
		if (!(ms->probe = sl_probe_start(ms->os, &h, &pc, m->wh, err, sizeof err)))
			sl_warn("%s; alerts for this stream are not evaluated", err);
	}
	if (m)
		m->wd = sl_watchdog_start(m->ops, m->ops->live_probe_us);
}

void sl_monitor_stopping(struct sl_monitor *m)
{
	if (m)
		sl_watchdog_stopping(m->wd);
}

struct sl_ops_stream *sl_monitor_stream(struct sl_monitor *m, const struct sl_stream_config *sc)
{
	struct mon_stream *ms = find(m, sc);

	return ms ? ms->os : NULL;
}

void sl_monitor_progress(struct sl_monitor *m, char *out, size_t len)
{
	int64_t now = sl_now_us();

	out[0] = '\0';
	for (int i = 0; m && i < m->n; i++) {
		struct sl_ops_stream *os = m->streams[i].os;
		for (struct sl_ops_table *t = atomic_load(&os->tables); t; t = atomic_load(&t->next)) {
			uint64_t rows = atomic_load(&t->bf_run_rows);
			int64_t est = atomic_load(&t->est_rows), t0 = atomic_load(&t->bf_started_us);
			size_t l = strlen(out);
			if (atomic_load(&t->bf_state) != SL_OPS_BF_RUNNING || l + 1 >= len)
				continue;
			if (est > 0 && rows > 0 && now > t0) {
				double rate = (double)rows / ((double)(now - t0) / 1e6);
				int64_t left = (int64_t)rows < est ? (int64_t)((double)(est - (int64_t)rows) / rate) : 0;
				int pct = (int)((double)rows * 100 / (double)est);
				snprintf(out + l, len - l, "%sbackfill %s %s: %" PRIu64 "/%" PRId64 " rows (%d%%), ETA %" PRId64
					 " s", l ? "; " : "", os->name, t->name, rows, est, pct > 99 ? 99 : pct, left);
			} else {
				snprintf(out + l, len - l, "%sbackfill %s %s: %" PRIu64 " rows", l ? "; " : "", os->name,
					 t->name, rows);
			}
		}
	}
}

void sl_monitor_stop(struct sl_monitor *m)
{
	bool stuck = false;

	if (!m)
		return;
	sl_watchdog_stopping(m->wd);
	sl_watchdog_stop(m->wd);
	for (int i = 0; i < m->n; i++)
		stuck |= !sl_probe_stop(m->streams[i].probe);
	sl_http_stop(m->http);
	sl_webhook_stop(m->wh, 3000);
	if (stuck)
		return;  /* a probe still uses the registry: the process ends soon */
	for (int i = 0; i < m->n; i++)
		pthread_mutex_destroy(&m->streams[i].write_mu);
	free(m->streams);
	sl_ops_free(m->ops);
	free(m);
}
