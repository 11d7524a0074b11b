/*
 * ops/alerts.h: the alerts of a stream, and when they fire and resolve.
 *
 * Every alert is a small state machine with hysteresis: a sample either
 * breaches its condition, clears it (well below the threshold: a band under
 * it is neither), or says nothing (the figure is unknown).  An alert fires
 * after fire_after breaching samples in a row and resolves after
 * resolve_after clearing samples in a row, so a figure that hovers around a
 * threshold does not fire and resolve at every probe.  The probe
 * (ops/probe.c) evaluates them every probe interval (5 s by default) from
 * what the source reports and what the pipeline counts, so with fire_after
 * = 1 an alert fires at the first probe after its threshold is crossed.
 *
 * Nothing here does I/O: sl_alerts_evaluate() is a pure function of its
 * inputs and the previous states, and returns the transitions for the caller
 * to log, export and send.
 */
#ifndef SLUICE_OPS_ALERTS_H
#define SLUICE_OPS_ALERTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/util.h"

enum sl_alert_severity { SL_ALERT_WARNING = 0, SL_ALERT_CRITICAL };

/* Every alert a stream has; the names are the `alert` label of
 * sluice_alert_firing and doc/operations.md's runbook headings. */
enum sl_alert_id {
	SL_AL_LAG_WARNING = 0,      /* lag_bytes >= lag_warn_bytes */
	SL_AL_LAG_CRITICAL,         /* lag_bytes >= lag_critical_bytes */
	SL_AL_RETAINED_WARNING,     /* retained >= retained_wal_warn_bytes */
	SL_AL_RETAINED_CRITICAL,    /* retained >= retained_wal_critical_bytes */
	SL_AL_WAL_GROWTH,           /* retained grows faster than retained_wal_growth_warn_bytes per minute */
	SL_AL_WAL_UNRESERVED,       /* the server will remove WAL the slot needs at its next checkpoint */
	SL_AL_SLOT_LOST,            /* the position holder is lost (SL_HOLD_LOST) */
	SL_AL_SLOT_MISSING,         /* the checkpoint has a position, the server no slot */
	SL_AL_SLOT_INACTIVE,        /* no reader attached for slot_inactive_warn_seconds */
	SL_AL_FRESHNESS,            /* nothing new made durable for freshness_warn_seconds while the source writes */
	SL_AL_LOG_PURGE,            /* the oldest log file the stream needs is purged within log_purge_warn_seconds */
	SL_AL_DEAD_LETTERS,         /* a change was set aside as a dead letter */
	SL_AL_SOURCE_UNREACHABLE,   /* the probe cannot reach the source */
	SL_AL_STREAM_DOWN,          /* the stream fails and retries for stream_down_warn_seconds, or failed */
	SL_AL_COUNT
};

struct sl_alert_def {
	const char *name;
	enum sl_alert_severity severity;
};

/* The definition of alert id (a static table). */
const struct sl_alert_def *sl_alert_def(enum sl_alert_id id);
const char *sl_alert_severity_name(enum sl_alert_severity s);

/* What one sample says about an alert's condition. */
enum sl_alert_cond {
	SL_COND_UNKNOWN = 0,   /* no figure: the state and the runs stay as they are */
	SL_COND_BREACH,        /* the condition holds */
	SL_COND_BETWEEN,       /* in the hysteresis band: neither breach nor clear; both runs restart */
	SL_COND_CLEAR,         /* the condition clearly does not hold */
};

struct sl_alert {
	bool firing;
	int breach_run;        /* breaching samples in a row */
	int clear_run;         /* clearing samples in a row */
	int64_t since_us;      /* when it last fired (firing) or resolved; 0 never */
	char message[256];     /* the last breaching sample's description; once resolved, the
				* resolving sample's (the figure now, back within bounds) */
};

struct sl_alert_policy {
	int fire_after;        /* breaching samples in a row that fire it (>= 1) */
	int resolve_after;     /* clearing samples in a row that resolve it (>= 1) */
	unsigned band_pct;     /* a figure resolves only below threshold * (100 - band_pct) / 100 */
};

/* The policy of the probe: fire at the first breach, resolve after three
 * clear samples (15 s at the default interval), 10 % band. */
extern const struct sl_alert_policy sl_alert_default_policy;

/* One step of an alert: +1 when it fires now, -1 when it resolves now, 0
 * otherwise. */
int sl_alert_step(struct sl_alert *a, enum sl_alert_cond c, const struct sl_alert_policy *p, int64_t now_us);

/* The condition of "v >= threshold": UNKNOWN when v < 0 (unknown) or the
 * threshold is 0 (disabled), BREACH at or above it, CLEAR below the band
 * under it, BETWEEN in the band. */
enum sl_alert_cond sl_alert_threshold(int64_t v, uint64_t threshold, unsigned band_pct);

/* The configured thresholds of a stream; 0 disables the alert it sets. */
struct sl_alert_limits {
	uint64_t lag_warn_bytes, lag_critical_bytes;
	uint64_t retained_warn_bytes, retained_critical_bytes;
	uint64_t growth_warn_bytes_per_min;
	uint64_t freshness_warn_s;
	uint64_t inactive_warn_s;
	uint64_t purge_warn_s;
	uint64_t down_warn_s;
};

/* What one probe saw.  Figures that are unknown are -1. */
struct sl_alert_inputs {
	bool probe_ok;                 /* the source answered; with false, only source_unreachable,
					* freshness, dead letters and stream_down are evaluated */
	const char *probe_error;       /* with !probe_ok */
	bool exists;                   /* the position holder (slot) exists */
	bool expected;                 /* the checkpoint has a position, so it should exist */
	enum sl_hold hold;             /* what the server keeps for the position */
	const char *hold_word;         /* the source's own word for it, and the name of that word
					* (hold_label), for messages; either may be NULL */
	const char *hold_label;
	int64_t lag_bytes, retained_bytes;
	double growth_bytes_per_min;   /* with growth_known */
	bool growth_known;
	int64_t inactive_s;            /* how long no reader was attached; -1 active or unknown */
	int64_t time_to_purge_s;       /* -1 unknown or nothing to purge */
	int64_t freshness_s;           /* now - source time of the last durable change; -1 unknown */
	int64_t stalled_s;             /* how long the durable position has not moved while the
					* source log was ahead of it; -1 not stalled or unknown */
	int64_t caught_up_s;           /* how long the stream has been behind its source: since it last
					* had everything the source had sent durable, or since its run
					* began to stream; -1 unknown.  The freshness judged is the
					* smaller of freshness_s (or stalled_s) and this: a quiet
					* source makes nothing stale, and a run that starts after a
					* pause has freshness_warn_seconds to catch up */
	bool heartbeats;               /* heartbeats run: freshness is measured end to end */
	uint64_t dead_letters;
	int64_t down_s;                /* how long the stream has been failing (retrying) or
					* failed; -1 while it runs */
	const char *down_error;        /* its last error, with down_s >= 0 */
};

struct sl_alert_transition {
	enum sl_alert_id id;
	bool firing;                   /* fired (true) or resolved (false) */
	const char *message;           /* points into the alert's state */
};

/* Evaluates every alert of a stream (alerts[SL_AL_COUNT], updated in place)
 * against one probe's inputs.  The transitions (at most SL_AL_COUNT) go to
 * out, their count to *n. */
void sl_alerts_evaluate(struct sl_alert *alerts, const struct sl_alert_inputs *in, const struct sl_alert_limits *lim,
			const struct sl_alert_policy *pol, int64_t now_us, struct sl_alert_transition *out, int *n);

#endif
