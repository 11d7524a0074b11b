/*
 * ops/sdnotify.h: systemd's notify protocol (sd_notify(3)), and the
 * watchdog thread that speaks it for `sluice run` under a unit with
 * Type=notify and WatchdogSec=.
 *
 * The protocol: the service manager sets NOTIFY_SOCKET to the address of a
 * unix datagram socket (a path, or "@name" for the abstract namespace), and
 * the service sends it datagrams of newline-separated assignments:
 * "READY=1" once it has started, "WATCHDOG=1" at least every WATCHDOG_USEC
 * microseconds (when WatchdogSec= is set; WATCHDOG_PID, when set, names the
 * process meant), "STOPPING=1" when it begins to shut down.  A service that
 * misses a WATCHDOG=1 is killed (SIGABRT) and, with Restart=, started again.
 * Without NOTIFY_SOCKET nothing is sent.
 *
 * The watchdog thread sends READY=1 once every stream has got past its
 * start (backfilling, streaming, or retrying after a failure: the agent is
 * up; a database outage is not systemd's business), then WATCHDOG=1 every
 * quarter of WATCHDOG_USEC while the pipeline makes progress: every probe
 * passed within its limit and every running writer stepped within
 * WATCHDOG_USEC (sl_ops_live).  A stuck writer therefore stops the pings,
 * not only a dead process.
 */
#ifndef SLUICE_OPS_SDNOTIFY_H
#define SLUICE_OPS_SDNOTIFY_H

#include <stddef.h>
#include <stdint.h>

#include "ops/metrics.h"

/* Sends state ("READY=1", ...) to $NOTIFY_SOCKET.  1 when sent, 0 when
 * NOTIFY_SOCKET is not set, -1 with err. */
int sl_sd_notify(const char *state, char *err, size_t errlen);

/* WATCHDOG_USEC when it is meant for this process (WATCHDOG_PID unset or
 * ours), else 0. */
int64_t sl_sd_watchdog_usec(void);

struct sl_watchdog;

/* Starts the thread for the streams of ops, when NOTIFY_SOCKET is set (NULL
 * otherwise, and when the thread cannot start: logged).  probe_limit_us: a
 * probe pass older than this is stuck. */
struct sl_watchdog *sl_watchdog_start(struct sl_ops *ops, int64_t probe_limit_us);
/* Sends STOPPING=1 (once; the pings go on while the streams drain). */
void sl_watchdog_stopping(struct sl_watchdog *w);
/* Stops the thread and frees w (NULL is ignored). */
void sl_watchdog_stop(struct sl_watchdog *w);

#endif
