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

#endif
