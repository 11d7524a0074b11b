/*
 * agent/monitor.h: the operations layer of `sluice run`, wired to the
 * configuration and the sources: the metrics registry (ops/metrics.h),
 * /metrics, /healthz and /livez on metrics_listen, the alert webhook, one probe
 * thread per stream (on a connection of its own, through the source's probe
 * session and heartbeat calls), each stream's run file for `sluice status`
 * (agent/runstate.h), and systemd's notify protocol (ops/sdnotify.h).
 */
#ifndef SLUICE_AGENT_MONITOR_H
#define SLUICE_AGENT_MONITOR_H

#include <stdbool.h>
#include <stddef.h>

#include "agent/config.h"
#include "ops/metrics.h"

struct sl_monitor;

/* Starts the registry, the endpoint and the webhook for the streams of cfg
 * that run (names, n of them; each must outlive the monitor) into *out.  The
 * probes start with sl_monitor_probe_start().  0; SL_EPREREQ with err when
 * a configured metrics_listen cannot be bound (the agent must not run
 * without the endpoint it was told to serve); SL_EFAIL with err when out of
 * memory or the webhook cannot start. */
int sl_monitor_start(struct sl_monitor **out, struct sl_config *cfg, struct sl_stream_config *const *streams,
		     int n, char *err, size_t errlen);
/* Starts the probe thread of every stream, and under systemd (NOTIFY_SOCKET)
 * the watchdog thread: READY=1 once every stream has got past its start,
 * WATCHDOG=1 while the pipeline makes progress (ops/sdnotify.h). */
void sl_monitor_probe_start(struct sl_monitor *m);
/* The agent begins to stop: STOPPING=1 for systemd (once). */
void sl_monitor_stopping(struct sl_monitor *m);
/* The metrics of stream sc (NULL when m is NULL). */
struct sl_ops_stream *sl_monitor_stream(struct sl_monitor *m, const struct sl_stream_config *sc);
/* Writes the run file of stream sc now (after its run ended, say). */
void sl_monitor_write_run(struct sl_monitor *m, const struct sl_stream_config *sc);
/* One line of backfill progress for a terminal ("" when no stream
 * backfills): "backfill orders public.t: 12345/100000 rows (12%), ETA 40 s". */
void sl_monitor_progress(struct sl_monitor *m, char *out, size_t len);
/* Stops the probes (writing each run file a last time), the endpoint and
 * the webhook (which gets a few seconds to deliver what is queued), and
 * frees m.  NULL is ignored. */
void sl_monitor_stop(struct sl_monitor *m);

#endif
