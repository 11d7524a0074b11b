/*
 * agent/runstate.h: what a running agent tells `sluice status` beyond the
 * checkpoint: the long wait a stream is in, if any (a replication slot being
 * created waits for every transaction open when it started).
 *
 * The running agent writes "<state_dir>/<stream>.wait.json" (atomically) when
 * a wait is first reported and at every report after, and removes it when
 * the wait ends.  `sluice status` reads it, and ignores it when the agent
 * that wrote it is gone (a kill -9 leaves the file; the next run removes it).
 *
 *   {"pid": 4242, "action": "creating replication slot \"sluice_s1\"",
 *    "detail": "... has waited 12 s for ...", "since_us": ..., "updated_us": ...,
 *    "blocked_by": [{"pid": 77, "transaction_seconds": 40, "state": "idle in transaction",
 *                    "user": "app", "application": "psql"}]}
 */
#ifndef SLUICE_AGENT_RUNSTATE_H
#define SLUICE_AGENT_RUNSTATE_H

#include <stdbool.h>
#include <stddef.h>

#include "sources/source.h"

/* Writes the stream's wait file for w.  0, or -1 with err. */
int sl_runstate_wait_write(const char *state_dir, const char *stream, const struct sl_source_wait *w,
			   char *err, size_t errlen);
/* Removes the stream's wait file, if any. */
void sl_runstate_wait_clear(const char *state_dir, const char *stream);
/* The stream's wait as `status --json` shows it (a jansson json_t *, owned
 * by the caller): {"action", "waited_seconds", "detail", "blocked_by",
 * "agent_pid"}; NULL when no live agent reports a wait. */
void *sl_runstate_wait_read(const char *state_dir, const char *stream);

/*
 * The run file, "<state_dir>/<stream>.run.json": what only the running agent
 * knows, for `sluice status` (agent/monitor.c writes it after every probe,
 * atomically, and once more when the stream's run ends): the stream's state
 * (starting, backfilling, streaming, retrying, stopped, failed), its last
 * error with its time and the number of retries, the queue, the last flush,
 * heartbeats, the probe's last sample, the alerts that fire and their
 * history, and each table's counters and backfill progress.  Its "pid" says
 * which agent wrote it; status shows it as the agent's view only while that
 * process lives, and otherwise takes "state" from it only when it says how
 * the last run ended (stopped, failed).
 */
/* Writes text (a JSON document) as the stream's run file.  0, or -1 with err. */
int sl_runstate_run_write(const char *state_dir, const char *stream, const char *text, char *err, size_t errlen);
/* The stream's run file (a jansson json_t *, owned by the caller), or NULL
 * when there is none or it cannot be read; *alive tells whether the process
 * that wrote it still runs. */
void *sl_runstate_run_read(const char *state_dir, const char *stream, bool *alive);

#endif
