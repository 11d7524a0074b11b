/*
 * agent/stream.h: runs one stream: prepares the source (tables, log
 * position) and the sink, backfills, then follows the source's log into the
 * sink through the pipeline, checkpointing and acknowledging only what the
 * sink made durable.
 */
#ifndef SLUICE_AGENT_STREAM_H
#define SLUICE_AGENT_STREAM_H

#include <stdatomic.h>
#include <stdbool.h>

#include "agent/config.h"
#include "sources/source.h"

struct sl_checkpoint;

/* Signal state, set only by the handler in main.c: 1 = drain, 2+ = cancel.
 * A lock-free atomic, so the handler and every stream thread may use it. */
extern atomic_int sl_signal_count;

struct sl_ops_stream;
struct sl_outage;

struct sl_run_opts {
	bool until_caught_up;
	struct sl_ops_stream *ops;     /* the stream's metrics (ops/metrics.h), or NULL */
	struct sl_outage *outage;      /* the destination's outages (common/outage.h), kept across
					* the stream's attempts, or NULL */
};

/* Runs a stream until it is drained, cancelled, caught up (with
 * until_caught_up) or fails.  Returns an enum sl_status; the message is in err. */
int sl_stream_run(struct sl_config *cfg, struct sl_stream_config *sc, const struct sl_run_opts *o,
		  char *err, size_t errlen);

/* The source operations of the stream's source, or NULL (SL_ECONFIG) with a
 * message in err when that kind is not built. */
const struct sl_source_ops *sl_stream_source(const struct sl_stream_config *sc, char *err, size_t errlen);
/* Appends to err, after a failed sl_ckpt_load() that returned rc, how to
 * recover: for a corrupt checkpoint (SL_ELOST) at path, the backfill command
 * that sets it aside and starts the stream over. */
void sl_stream_ckpt_hint(const struct sl_source_stream *sst, const char *path, int rc, char *err, size_t errlen);
/* SL_ECONFIG when the checkpoint ck belongs to another slot than the
 * stream's config names; 0 otherwise. */
int sl_stream_ckpt_slot(const struct sl_checkpoint *ck, const struct sl_stream_config *sc, char *err, size_t errlen);
/* What the source knows of the stream (pointers into cfg and sc). */
void sl_stream_source_view(const struct sl_config *cfg, const struct sl_stream_config *sc,
			   struct sl_source_stream *out);

#endif
