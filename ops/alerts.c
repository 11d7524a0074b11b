/*
 * ops/alerts.c: alert conditions and their hysteresis (see alerts.h).
 */
#include "ops/alerts.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

/* fire_after overrides the policy where one sample is not enough: a single
 * failed connection is not yet an unreachable source. */
static const struct {
	struct sl_alert_def def;
	int fire_after;
} defs[SL_AL_COUNT] = {
	[SL_AL_LAG_WARNING] = { { "lag_warning", SL_ALERT_WARNING }, 0 },
	[SL_AL_LAG_CRITICAL] = { { "lag_critical", SL_ALERT_CRITICAL }, 0 },
	[SL_AL_RETAINED_WARNING] = { { "retained_wal_warning", SL_ALERT_WARNING }, 0 },
	[SL_AL_RETAINED_CRITICAL] = { { "retained_wal_critical", SL_ALERT_CRITICAL }, 0 },
	[SL_AL_WAL_GROWTH] = { { "retained_wal_growth", SL_ALERT_WARNING }, 0 },
	[SL_AL_WAL_UNRESERVED] = { { "wal_unreserved", SL_ALERT_CRITICAL }, 0 },
	[SL_AL_SLOT_LOST] = { { "slot_lost", SL_ALERT_CRITICAL }, 0 },
	[SL_AL_SLOT_MISSING] = { { "slot_missing", SL_ALERT_CRITICAL }, 0 },
	[SL_AL_SLOT_INACTIVE] = { { "slot_inactive", SL_ALERT_WARNING }, 0 },
	[SL_AL_FRESHNESS] = { { "freshness", SL_ALERT_WARNING }, 0 },
	[SL_AL_LOG_PURGE] = { { "log_purge_soon", SL_ALERT_CRITICAL }, 0 },
	[SL_AL_DEAD_LETTERS] = { { "dead_letters", SL_ALERT_WARNING }, 0 },
	[SL_AL_SOURCE_UNREACHABLE] = { { "source_unreachable", SL_ALERT_CRITICAL }, 2 },
	[SL_AL_STREAM_DOWN] = { { "stream_down", SL_ALERT_CRITICAL }, 0 },
};

const struct sl_alert_policy sl_alert_default_policy = { .fire_after = 1, .resolve_after = 3, .band_pct = 10 };

const struct sl_alert_def *sl_alert_def(enum sl_alert_id id)
{
	return id < SL_AL_COUNT ? &defs[id].def : NULL;
}

const char *sl_alert_severity_name(enum sl_alert_severity s)
{
	return s == SL_ALERT_CRITICAL ? "critical" : "warning";
}

int sl_alert_step(struct sl_alert *a, enum sl_alert_cond c, const struct sl_alert_policy *p, int64_t now_us)
{
	int fire_after = p->fire_after < 1 ? 1 : p->fire_after;
	int resolve_after = p->resolve_after < 1 ? 1 : p->resolve_after;

	switch (c) {
	case SL_COND_UNKNOWN:
		return 0;
	case SL_COND_BETWEEN:
		a->breach_run = a->clear_run = 0;
		return 0;
	case SL_COND_BREACH:
		a->clear_run = 0;
		if (a->breach_run < fire_after)
			a->breach_run++;
		if (!a->firing && a->breach_run >= fire_after) {
			a->firing = true;
			a->since_us = now_us;
			return 1;
		}
		return 0;
	case SL_COND_CLEAR:
		a->breach_run = 0;
		if (a->clear_run < resolve_after)
			a->clear_run++;
		if (a->firing && a->clear_run >= resolve_after) {
			a->firing = false;
			a->since_us = now_us;
			return -1;
		}
		return 0;
	}
	return 0;
}

enum sl_alert_cond sl_alert_threshold(int64_t v, uint64_t threshold, unsigned band_pct)
{
	uint64_t clear_below;

	if (v < 0 || threshold == 0)
		return SL_COND_UNKNOWN;
	if ((uint64_t)v >= threshold)
		return SL_COND_BREACH;
	if (band_pct > 100)
		band_pct = 100;
	clear_below = threshold / 100 * (100 - band_pct) + threshold % 100 * (100 - band_pct) / 100;
	return (uint64_t)v < clear_below ? SL_COND_CLEAR : SL_COND_BETWEEN;
}

/* "v <= threshold" (a time left that runs out): the mirror of
 * sl_alert_threshold, with the band above the threshold. */
static enum sl_alert_cond below(int64_t v, uint64_t threshold, unsigned band_pct)
{
	if (v < 0 || threshold == 0)
		return SL_COND_UNKNOWN;
	if ((uint64_t)v <= threshold)
		return SL_COND_BREACH;
	return (uint64_t)v > threshold + threshold / 100 * band_pct ? SL_COND_CLEAR : SL_COND_BETWEEN;
}

static enum sl_alert_cond flag(bool breach)
{
	return breach ? SL_COND_BREACH : SL_COND_CLEAR;
}

/* The texts of a sample: what breaches (msg) and, for a resolution, the
 * figure now and that it is back within bounds (ok). */
struct texts {
	char *msg, *ok;
	size_t len;
};

/* "FIGURE >= NAME LIMIT" and "FIGURE, back under NAME LIMIT". */
static void over(const struct texts *t, const char *figure, const char *name, uint64_t limit)
{
	snprintf(t->msg, t->len, "%s >= %s %" PRIu64, figure, name, limit);
	snprintf(t->ok, t->len, "%s, back under %s %" PRIu64, figure, name, limit);
}

static enum sl_alert_cond cond_bytes(enum sl_alert_id id, const struct sl_alert_inputs *in,
				     const struct sl_alert_limits *lim, unsigned band, const struct texts *t)
{
	bool lag = id == SL_AL_LAG_WARNING || id == SL_AL_LAG_CRITICAL;
	bool warn = id == SL_AL_LAG_WARNING || id == SL_AL_RETAINED_WARNING;
	uint64_t limit = lag ? (warn ? lim->lag_warn_bytes : lim->lag_critical_bytes) :
		(warn ? lim->retained_warn_bytes : lim->retained_critical_bytes);
	int64_t v = lag ? in->lag_bytes : in->retained_bytes;
	char fig[160];

	if (!in->probe_ok || !in->exists) {
		snprintf(t->ok, t->len, "the slot does not exist");
		return in->probe_ok ? SL_COND_CLEAR : SL_COND_UNKNOWN;
	}
	if (lag)
		snprintf(fig, sizeof fig, "lag %" PRId64 " bytes (the source's log head minus the confirmed position)", v);
	else
		snprintf(fig, sizeof fig, "the slot retains %" PRId64 " bytes of log", v);
	over(t, fig, lag ? (warn ? "lag_warn_bytes" : "lag_critical_bytes") :
	     (warn ? "retained_wal_warn_bytes" : "retained_wal_critical_bytes"), limit);
	return sl_alert_threshold(v, limit, band);
}

/* "NAME is WORD", the source's own words for the position holder's
 * state, or the common word when the source has none. */
static void hold_text(const struct sl_alert_inputs *in, char *out, size_t len)
{
	if (in->hold_word && in->hold_word[0] && in->hold_label)
		snprintf(out, len, "%s is %s", in->hold_label, in->hold_word);
	else
		snprintf(out, len, "the position is %s", sl_hold_name(in->hold));
}

/* The slot's own conditions: growth, its hold state, lost, missing, inactive. */
static enum sl_alert_cond cond_slot(enum sl_alert_id id, const struct sl_alert_inputs *in,
				    const struct sl_alert_limits *lim, unsigned band, const struct texts *t)
{
	bool slot = in->probe_ok && in->exists;
	char fig[160], hold[96];

	if (id != SL_AL_SLOT_MISSING && !slot) {
		snprintf(t->ok, t->len, "the slot does not exist");
		return in->probe_ok ? SL_COND_CLEAR : SL_COND_UNKNOWN;
	}
	hold_text(in, hold, sizeof hold);
	switch (id) {
	case SL_AL_WAL_GROWTH:
		if (!in->growth_known)
			return SL_COND_UNKNOWN;
		snprintf(fig, sizeof fig, "retained log grows by %.0f bytes per minute (now %" PRId64 " bytes)",
			 in->growth_bytes_per_min, in->retained_bytes);
		over(t, fig, "retained_wal_growth_warn_bytes", lim->growth_warn_bytes_per_min);
		return sl_alert_threshold(in->growth_bytes_per_min < 0 ? 0 : (int64_t)in->growth_bytes_per_min,
					  lim->growth_warn_bytes_per_min, band);
	case SL_AL_WAL_UNRESERVED:
		if (in->hold == SL_HOLD_UNKNOWN)
			return SL_COND_UNKNOWN;
		snprintf(t->msg, t->len, "%s: the server will remove log the slot still needs soon (at its next "
			 "checkpoint)", hold);
		snprintf(t->ok, t->len, "%s: the server keeps the log the slot needs", hold);
		return flag(in->hold == SL_HOLD_AT_RISK || in->hold == SL_HOLD_LOST);
	case SL_AL_SLOT_LOST:
		if (in->hold == SL_HOLD_UNKNOWN)
			return SL_COND_UNKNOWN;
		snprintf(t->msg, t->len, "the slot is lost (%s): changes after its position are gone; "
			 "re-backfill needed", hold);
		snprintf(t->ok, t->len, "%s", hold);
		return flag(in->hold == SL_HOLD_LOST);
	case SL_AL_SLOT_MISSING:
		if (!in->probe_ok)
			return SL_COND_UNKNOWN;
		snprintf(t->msg, t->len, "the slot does not exist, but the checkpoint has a position in it: "
			 "re-backfill needed");
		snprintf(t->ok, t->len, in->exists ? "the slot exists" : "the checkpoint has no position in a slot");
		return flag(in->expected && !in->exists);
	default:  /* SL_AL_SLOT_INACTIVE */
		snprintf(t->msg, t->len, "no reader has been attached to the slot for %" PRId64 " s "
			 "(slot_inactive_warn_seconds %" PRIu64 ")", in->inactive_s, lim->inactive_warn_s);
		snprintf(t->ok, t->len, "a reader is attached to the slot");
		return sl_alert_threshold(in->inactive_s, lim->inactive_warn_s, 0);
	}
}

/* The smaller of two ages, -1 standing for unknown. */
static int64_t min_age(int64_t a, int64_t b)
{
	if (a < 0)
		return b;
	return b >= 0 && b < a ? b : a;
}

/* Freshness, judged against the source's activity: once the stream has
 * caught up with the source (caught_up_s), nothing older than that is
 * missing, however old the last change is. */
static enum sl_alert_cond cond_freshness(const struct sl_alert_inputs *in, const struct sl_alert_limits *lim,
					 unsigned band, const struct texts *t)
{
	char fig[200];
	int64_t age;

	if (in->heartbeats) {
		age = min_age(in->freshness_s, in->caught_up_s);
		if (in->caught_up_s >= 0 && in->caught_up_s < in->freshness_s)
			snprintf(fig, sizeof fig, "the last durable change or heartbeat is %" PRId64 " s old (the stream "
				 "last caught up with the source %" PRId64 " s ago)", in->freshness_s, in->caught_up_s);
		else
			snprintf(fig, sizeof fig, "the last durable change or heartbeat is %" PRId64 " s old",
				 in->freshness_s);
	} else {
		age = in->stalled_s < 0 ? 0 : in->stalled_s;
		if (in->caught_up_s >= 0 && in->caught_up_s < age)
			age = in->caught_up_s;
		snprintf(fig, sizeof fig, "nothing new has been made durable for %" PRId64 " s while the source's log "
			 "is ahead (last durable change %" PRId64 " s old)", age, in->freshness_s);
	}
	over(t, fig, "freshness_warn_seconds", lim->freshness_warn_s);
	return sl_alert_threshold(age, lim->freshness_warn_s, band);
}

/* The condition of alert id for in, with its texts written into t. */
static enum sl_alert_cond condition(enum sl_alert_id id, const struct sl_alert_inputs *in,
				    const struct sl_alert_limits *lim, unsigned band, const struct texts *t)
{
	char fig[160];

	switch (id) {
	case SL_AL_LAG_WARNING:
	case SL_AL_LAG_CRITICAL:
	case SL_AL_RETAINED_WARNING:
	case SL_AL_RETAINED_CRITICAL:
		return cond_bytes(id, in, lim, band, t);
	case SL_AL_WAL_GROWTH:
	case SL_AL_WAL_UNRESERVED:
	case SL_AL_SLOT_LOST:
	case SL_AL_SLOT_MISSING:
	case SL_AL_SLOT_INACTIVE:
		return cond_slot(id, in, lim, band, t);
	case SL_AL_FRESHNESS:
		return cond_freshness(in, lim, band, t);
	case SL_AL_LOG_PURGE:
		if (!in->probe_ok)
			return SL_COND_UNKNOWN;
		snprintf(t->msg, t->len, "the oldest log file the stream still needs is purged in %" PRId64 " s "
			 "(log_purge_warn_seconds %" PRIu64 ")", in->time_to_purge_s, lim->purge_warn_s);
		if (in->time_to_purge_s >= 0)
			snprintf(t->ok, t->len, "the oldest log file the stream still needs is purged in %" PRId64 " s, "
				 "back over log_purge_warn_seconds %" PRIu64, in->time_to_purge_s, lim->purge_warn_s);
		return below(in->time_to_purge_s, lim->purge_warn_s, band);
	case SL_AL_DEAD_LETTERS:
		snprintf(t->msg, t->len, "%" PRIu64 " changes were set aside as dead letters", in->dead_letters);
		snprintf(t->ok, t->len, "no change was set aside as a dead letter");
		return flag(in->dead_letters > 0);
	case SL_AL_SOURCE_UNREACHABLE:
		snprintf(t->msg, t->len, "the probe cannot reach the source: %s", in->probe_error ? in->probe_error : "?");
		snprintf(t->ok, t->len, "the probe reaches the source");
		return flag(!in->probe_ok);
	case SL_AL_STREAM_DOWN:
		snprintf(t->msg, t->len, "the stream has been failing for %" PRId64 " s: %s", in->down_s,
			 in->down_error ? in->down_error : "?");
		snprintf(fig, sizeof fig, "the stream runs (failing for %" PRId64 " s)", in->down_s < 0 ? 0 : in->down_s);
		snprintf(t->ok, t->len, "%s", in->down_s > 0 ? fig : "the stream runs");
		return sl_alert_threshold(in->down_s, lim->down_warn_s, 0);
	case SL_AL_COUNT:
		break;
	}
	return SL_COND_UNKNOWN;
}

void sl_alerts_evaluate(struct sl_alert *alerts, const struct sl_alert_inputs *in, const struct sl_alert_limits *lim,
			const struct sl_alert_policy *pol, int64_t now_us, struct sl_alert_transition *out, int *n)
{
	*n = 0;
	for (int id = 0; id < SL_AL_COUNT; id++) {
		struct sl_alert *a = &alerts[id];
		struct sl_alert_policy p = *pol;
		char msg[sizeof a->message], ok[sizeof a->message];
		struct texts tx = { msg, ok, sizeof msg };
		enum sl_alert_cond c;
		int t;

		msg[0] = ok[0] = '\0';
		c = condition((enum sl_alert_id)id, in, lim, pol->band_pct, &tx);
		if (defs[id].fire_after > p.fire_after)
			p.fire_after = defs[id].fire_after;
		if (c == SL_COND_BREACH)
			snprintf(a->message, sizeof a->message, "%s", msg);
		t = sl_alert_step(a, c, &p, now_us);
		if (t < 0)  /* resolved: say what the figure is now, not what it was */
			snprintf(a->message, sizeof a->message, "%s", ok[0] ? ok : "the condition no longer holds");
		if (t != 0) {
			out[*n].id = (enum sl_alert_id)id;
			out[*n].firing = t > 0;
			out[*n].message = a->message;
			(*n)++;
		}
	}
}
