/*
 * agent/stream.h: runs one stream: prepares the source (publication, slot),
 * backfills, then follows the replication stream into the sink, checkpointing
 * and acknowledging only what the sink made durable.
 */
#ifndef SLUICE_AGENT_STREAM_H
#define SLUICE_AGENT_STREAM_H

#include <stdatomic.h>
#include <stdbool.h>

#include "agent/config.h"

/* Signal state, set only by the handler in main.c: 1 = drain, 2+ = cancel.
 * A lock-free atomic, so the handler and every stream thread may use it. */
extern atomic_int sl_signal_count;

struct sl_run_opts {
	bool until_caught_up;
};

/* Runs a stream until it is drained, cancelled, caught up (with
 * until_caught_up) or fails.  Returns an enum sl_status; the message is in err. */
int sl_stream_run(struct sl_config *cfg, struct sl_stream_config *sc, const struct sl_run_opts *o,
		  char *err, size_t errlen);

/* `sluice check`: validates the stream's source and destination without
 * changing anything.  Prints one line per check to stdout. */
int sl_stream_check(struct sl_config *cfg, struct sl_stream_config *sc, char *err, size_t errlen);

/* `sluice status`: appends the stream's status as a JSON object to *out
 * (jansson json_t *), and reports whether any alert is firing. */
int sl_stream_status(struct sl_config *cfg, struct sl_stream_config *sc, void *out_json,
		     char *err, size_t errlen);

/* `sluice backfill`: marks tables (all, or the one named "schema.table") for a
 * new backfill on the next run. */
int sl_stream_request_backfill(struct sl_config *cfg, struct sl_stream_config *sc, const char *table,
			       char *err, size_t errlen);

#endif
