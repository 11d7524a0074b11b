/*
 * ops/probe.c: the probe thread of one stream (see probe.h).
 */
#include "ops/probe.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/log.h"
#include "common/util.h"

#define GROWTH_SAMPLES 128
#define STOP_WAIT_MS 3000

struct sl_probe {
	struct sl_ops_stream *os;
	struct sl_probe_hooks h;
	struct sl_probe_config c;
	struct sl_webhook *wh;
	pthread_t th;
	pthread_mutex_t mu;
	pthread_cond_t cv;                 /* CLOCK_MONOTONIC */
	bool stop;
	bool done;                         /* the thread has ended */
	/* the thread's own */
	int64_t inactive_since_us;         /* 0: active (or unknown) */
	struct { int64_t t_us, v; } hist[GROWTH_SAMPLES];
	int nhist, hhist;
	char host[256];
};

static void growth_add(struct sl_probe *p, int64_t t_us, int64_t v)
{
	if (p->nhist == GROWTH_SAMPLES) {
		p->hhist = (p->hhist + 1) % GROWTH_SAMPLES;
		p->nhist--;
	}
	p->hist[(p->hhist + p->nhist) % GROWTH_SAMPLES].t_us = t_us;
	p->hist[(p->hhist + p->nhist) % GROWTH_SAMPLES].v = v;
	p->nhist++;
	/* keep the window: drop what is older than it */
	while (p->nhist > 2 && t_us - p->hist[p->hhist].t_us > (int64_t)SL_PROBE_GROWTH_WINDOW_S * 1000000) {
		p->hhist = (p->hhist + 1) % GROWTH_SAMPLES;
		p->nhist--;
	}
}

/* Bytes per minute over the window; false until it spans SL_PROBE_GROWTH_MIN_S. */
static bool growth(const struct sl_probe *p, double *out)
{
	int64_t t0, t1, v0, v1;

	if (p->nhist < 2)
		return false;
	t0 = p->hist[p->hhist].t_us;
	v0 = p->hist[p->hhist].v;
	t1 = p->hist[(p->hhist + p->nhist - 1) % GROWTH_SAMPLES].t_us;
	v1 = p->hist[(p->hhist + p->nhist - 1) % GROWTH_SAMPLES].v;
	if (t1 - t0 < (int64_t)SL_PROBE_GROWTH_MIN_S * 1000000)
		return false;
	*out = (double)(v1 - v0) * 60e6 / (double)(t1 - t0);
	return true;
}

static void notify(struct sl_probe *p, const struct sl_alert_transition *t, int64_t now_us, int64_t fired_us)
{
	const struct sl_alert_def *d = sl_alert_def(t->id);
	struct sl_alert_event ev = {
		.stream = p->os->name, .id = t->id, .firing = t->firing, .message = t->message,
		.starts_us = t->firing ? now_us : fired_us, .ends_us = t->firing ? 0 : now_us, .host = p->host,
	};

	if (t->firing)
		sl_warn("stream \"%s\": alert %s (%s) fires: %s", p->os->name, d->name,
			sl_alert_severity_name(d->severity), t->message);
	else
		sl_info("stream \"%s\": alert %s resolved", p->os->name, d->name);
	sl_webhook_send(p->wh, &ev);
}

/* One cycle: sample, figures, alerts. */
static void cycle(struct sl_probe *p)
{
	struct sl_ops_stream *os = p->os;
	struct sl_ops_sample smp;
	struct sl_alert_inputs in;
	struct sl_alert_transition tr[SL_AL_COUNT];
	int64_t fired_at[SL_AL_COUNT];
	int64_t now = sl_now_us(), ts, adv, caught;
	enum sl_ops_state st = (enum sl_ops_state)atomic_load(&os->state);
	int64_t since = atomic_load(&os->state_since_us);
	double g = 0;
	bool gk = false;
	int n;

	memset(&smp, 0, sizeof smp);
	smp.lag_bytes = smp.retained_bytes = smp.safe_bytes = smp.time_to_purge_s = -1;
	smp.ok = p->h.sample(p->h.payload, &smp) == 0;
	smp.at_us = now;
	atomic_fetch_add(&os->probes, 1);
	if (!smp.ok)
		atomic_fetch_add(&os->probe_errors, 1);

	memset(&in, 0, sizeof in);
	in.probe_ok = smp.ok;
	in.probe_error = smp.error;
	in.exists = smp.exists;
	in.expected = atomic_load(&os->expect_position);
	in.hold = smp.hold;
	in.hold_word = smp.hold_word;
	in.hold_label = smp.hold_label;
	in.lag_bytes = smp.lag_bytes;
	in.retained_bytes = smp.retained_bytes;
	in.time_to_purge_s = smp.time_to_purge_s;
	if (smp.ok && smp.exists && smp.retained_bytes >= 0) {
		growth_add(p, now, smp.retained_bytes);
		gk = growth(p, &g);
	} else if (smp.ok) {
		p->nhist = 0;
	}
	in.growth_known = gk;
	in.growth_bytes_per_min = g;
	in.inactive_s = -1;
	if (smp.ok && smp.exists) {
		if (smp.active) {
			p->inactive_since_us = 0;
			in.inactive_s = 0;
		} else {
			if (!p->inactive_since_us)
				p->inactive_since_us = now;
			in.inactive_s = (now - p->inactive_since_us) / 1000000;
		}
	}
	/* Freshness is judged while the stream streams: a backfill, a start or
	 * a retry delays changes by design (stream_down covers a failing one). */
	ts = atomic_load(&os->durable_source_ts_us);
	in.freshness_s = ts > 0 ? (now - ts) / 1000000 : -1;
	in.heartbeats = atomic_load(&os->heartbeat_on);
	in.stalled_s = -1;
	in.caught_up_s = -1;
	if (st == SL_OPS_STREAMING) {
		adv = atomic_load(&os->durable_advanced_us);
		if (adv < since)
			adv = since;
		if (smp.ok && smp.lag_bytes > 0)
			in.stalled_s = (now - adv) / 1000000;
		/* How long the stream has been behind its source: since it last
		 * caught up (nothing the source had sent then is missing from the
		 * destination), or since this run began to stream (a run that
		 * starts after a pause or an outage has its freshness_warn_seconds
		 * to catch up before an old last change counts against it). */
		caught = atomic_load(&os->caught_up_us);
		if (caught < since)
			caught = since;
		in.caught_up_s = (now - caught) / 1000000;
	} else {
		in.heartbeats = false;
		in.freshness_s = -1;
	}
	in.dead_letters = atomic_load(&os->dead_letters);
	/* Failing: from the first failure of the current outage, while the
	 * stream is not running well (a stream that streams for a few seconds
	 * between failures keeps its outage; one that ran well for
	 * SL_OPS_HEALTHY_S starts a new one at its next failure). */
	in.down_s = sl_ops_down_seconds(os, now, p->c.limits.down_warn_s);
	if (in.down_s < 0)
		in.down_s = 0;

	pthread_mutex_lock(&os->mu);
	in.down_error = os->last_error;
	os->sample = smp;
	os->has_sample = true;
	os->growth_bytes_per_min = g;
	os->growth_known = gk;
	for (int i = 0; i < SL_AL_COUNT; i++)
		fired_at[i] = os->alerts[i].since_us;
	sl_alerts_evaluate(os->alerts, &in, &p->c.limits, &p->c.policy, now, tr, &n);
	for (int i = 0; i < n; i++)
		sl_ops_history_add(os, tr[i].id, tr[i].firing, tr[i].message, now);
	pthread_mutex_unlock(&os->mu);
	/* The messages point into os->alerts, which only this thread writes. */
	for (int i = 0; i < n; i++)
		notify(p, &tr[i], now, fired_at[tr[i].id]);
}

static void heartbeat(struct sl_probe *p)
{
	char err[256];
	int rc;

	if (!p->h.heartbeat || !atomic_load(&p->os->heartbeat_on))
		return;
	rc = p->h.heartbeat(p->h.payload, err, sizeof err);
	if (rc == 0) {
		atomic_fetch_add(&p->os->heartbeats_sent, 1);
	} else if (rc > 0) {
		atomic_store(&p->os->heartbeat_on, false);
		pthread_mutex_lock(&p->os->mu);
		snprintf(p->os->heartbeat_note, sizeof p->os->heartbeat_note, "%s", err);
		pthread_mutex_unlock(&p->os->mu);
		sl_warn("stream \"%s\": heartbeats are off for this run: %s", p->os->name, err);
	} else {
		sl_debug("stream \"%s\": heartbeat failed: %s", p->os->name, err);
	}
}

static void *probe_main(void *arg)
{
	struct sl_probe *p = arg;
	int64_t next_probe = sl_mono_ms(), next_hb = next_probe;

	sl_thread_name("sl-probe");
	sl_log_set_stream(p->os->name);  /* every line of this thread is about its stream */
	pthread_mutex_lock(&p->mu);
	while (!p->stop) {
		int64_t now = sl_mono_ms(), wake;
		struct timespec until;

		pthread_mutex_unlock(&p->mu);
		if (now >= next_probe) {
			cycle(p);
			atomic_store(&p->os->probe_pass_us, sl_now_us());
			if (p->h.tick)
				p->h.tick(p->h.payload);
			next_probe = now + p->c.interval_ms;
		}
		if (p->c.heartbeat_ms > 0 && now >= next_hb) {
			heartbeat(p);
			next_hb = now + p->c.heartbeat_ms;
		}
		pthread_mutex_lock(&p->mu);
		wake = next_probe;
		if (p->c.heartbeat_ms > 0 && next_hb < wake)
			wake = next_hb;
		now = sl_mono_ms();
		if (!p->stop && wake > now) {
			until = sl_mono_deadline((int)(wake - now));
			pthread_cond_timedwait(&p->cv, &p->mu, &until);
		}
	}
	p->done = true;
	pthread_cond_broadcast(&p->cv);
	pthread_mutex_unlock(&p->mu);
	return NULL;
}

struct sl_probe *sl_probe_start(struct sl_ops_stream *os, const struct sl_probe_hooks *h,
				const struct sl_probe_config *c, struct sl_webhook *wh, char *err, size_t errlen)
{
	struct sl_probe *p = calloc(1, sizeof *p);
	pthread_condattr_t ca;

	if (!p) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	p->os = os;
	p->h = *h;
	p->c = *c;
	p->wh = wh;
	if (p->c.interval_ms <= 0)
		p->c.interval_ms = SL_PROBE_INTERVAL_MS;
	if (p->c.policy.fire_after == 0 && p->c.policy.resolve_after == 0)
		p->c.policy = sl_alert_default_policy;
	snprintf(p->host, sizeof p->host, "%s", c->host ? c->host : "");
	pthread_mutex_init(&p->mu, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&p->cv, &ca);
	pthread_condattr_destroy(&ca);
	atomic_store(&os->probe_on, true);
	if (pthread_create(&p->th, NULL, probe_main, p) != 0) {
		atomic_store(&os->probe_on, false);
		snprintf(err, errlen, "stream \"%s\": could not start the probe thread: %s", os->name, strerror(errno));
		pthread_cond_destroy(&p->cv);
		pthread_mutex_destroy(&p->mu);
		free(p);
		return NULL;
	}
	return p;
}

bool sl_probe_stop(struct sl_probe *p)
{
	struct timespec until = sl_mono_deadline(STOP_WAIT_MS);
	bool done;

	if (!p)
		return true;
	pthread_mutex_lock(&p->mu);
	p->stop = true;
	pthread_cond_broadcast(&p->cv);
	while (!p->done && pthread_cond_timedwait(&p->cv, &p->mu, &until) == 0)
		;
	done = p->done;
	pthread_mutex_unlock(&p->mu);
	if (!done) {
		/* A sample stuck on an unresponsive source: its connection's own
		 * timeouts end it; the process is about to exit, so leave it. */
		pthread_detach(p->th);
		return false;
	}
	pthread_join(p->th, NULL);
	if (p->h.tick)
		p->h.tick(p->h.payload);
	if (p->h.close)
		p->h.close(p->h.payload);
	pthread_cond_destroy(&p->cv);
	pthread_mutex_destroy(&p->mu);
	free(p);
	return true;
}
