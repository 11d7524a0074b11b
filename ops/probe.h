/*
 * ops/probe.h: the lag and retention probe of one stream.
 *
 * A thread of its own, on a connection of its own (the agent's hooks open
 * it through the source's interface), independent of the stream's reading
 * and writing threads: every interval (5 s) it samples the stream's position
 * holder (PostgreSQL: its row of pg_replication_slots; a binlog source: its
 * log files and their expiry), works out the growth of the retained log, the
 * freshness and how long the stream has been failing, evaluates the alerts
 * (ops/alerts.h), logs each transition, records it in the registry
 * (sluice_alert_firing, the history for `sluice status`) and queues it for
 * the webhook.  It also writes the stream's heartbeats when they are on.
 * Because neither a stalled sink nor a blocked replication loop can hold it
 * up, an alert fires at the first probe after its threshold is crossed.
 */
#ifndef SLUICE_OPS_PROBE_H
#define SLUICE_OPS_PROBE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ops/alerts.h"
#include "ops/metrics.h"
#include "ops/webhook.h"

#define SL_PROBE_INTERVAL_MS 5000
#define SL_PROBE_GROWTH_WINDOW_S 300   /* growth is measured over this much history */
#define SL_PROBE_GROWTH_MIN_S 60       /* and only once it spans this much */

/* What the agent gives the probe.  Each is called from the probe's thread only. */
struct sl_probe_hooks {
	void *payload;
	/* One sample of the position holder (out is zeroed with unknown figures
	 * at -1 first).  0, or -1 with out->error set (the hook closes what it
	 * opened; the next call connects again). */
	int (*sample)(void *payload, struct sl_ops_sample *out);
	/* Writes one heartbeat into the source's log (NULL: none).  0; 1 when
	 * the source does not permit it (why in err: heartbeats stop for this
	 * run); -1 on a failure worth another try. */
	int (*heartbeat)(void *payload, char *err, size_t errlen);
	/* After every cycle, and once more when the probe stops (NULL: none). */
	void (*tick)(void *payload);
	/* When the probe stops: close the connection (NULL: none). */
	void (*close)(void *payload);
};

struct sl_probe_config {
	int64_t interval_ms;               /* 0: SL_PROBE_INTERVAL_MS */
	int64_t heartbeat_ms;              /* 0: no heartbeats */
	struct sl_alert_limits limits;
	struct sl_alert_policy policy;     /* zeroed: sl_alert_default_policy */
	const char *host;                  /* for notifications */
};

struct sl_probe;

/* Starts the probe thread of stream os; wh (may be NULL) receives
 * notifications.  NULL with err when the thread cannot start. */
struct sl_probe *sl_probe_start(struct sl_ops_stream *os, const struct sl_probe_hooks *h,
				const struct sl_probe_config *c, struct sl_webhook *wh, char *err, size_t errlen);
/* Stops the thread (waiting at most a few seconds for a sample under way),
 * runs the last tick and frees p; true.  False when the thread is stuck in a
 * sample (an unresponsive source): it is left running and p is not freed,
 * so the caller must not free what the hooks use either (the process is
 * about to exit).  NULL is ignored (true). */
bool sl_probe_stop(struct sl_probe *p);

#endif
