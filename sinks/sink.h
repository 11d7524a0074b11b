/*
 * sinks/sink.h: the interface every destination implements.
 *
 * A sink is a table of function pointers plus an opaque context, one per
 * stream, used by one thread (the stream's writer; the reader thread that
 * talks to the source never waits on a sink, see agent/pipeline.h).  The
 * agent calls:
 *
 *   write()      for each change, in source order.  It may send or write data
 *                out, but makes nothing durable the agent could rely on.  The
 *                change, its table version and its values are valid only
 *                during the call: a sink that needs them later copies what it
 *                needs.
 *   mark()       at every transaction end, and at keepalive positions between
 *                transactions: everything written so far is at or before pos.
 *   flush()      at a transaction boundary when flush_due() says so, when the
 *                stream drains, when a backfill table is done, and when caught
 *                up.  It makes everything written durable (files fsynced and
 *                renamed, an HTTP 2xx) and reports the last mark it covers.
 *                Only that position is checkpointed and acknowledged to the
 *                source.
 *
 * A network sink (ClickHouse) plugs in the same way: write() appends to a
 * batch, flush() sends it and returns on 2xx; while it waits, the reader
 * thread keeps reading into the bounded queue and keeps the source's
 * connection alive.  A sink never learns which source produced a change
 * beyond what the change's table version carries (its source descriptor:
 * position fields and names); positions are opaque to it.
 *
 * Return codes: 0 success, -1 failure with a message in err.
 */
#ifndef SLUICE_SINKS_SINK_H
#define SLUICE_SINKS_SINK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "schema/schema.h"

enum sl_codec { SL_CODEC_NULL = 0, SL_CODEC_DEFLATE, SL_CODEC_SNAPPY };
enum sl_write_mode { SL_WRITE_APPEND = 0, SL_WRITE_MERGE };

/* A destination connection profile, as parsed from [destination.NAME]. */
struct sl_dest_config {
	char *name;               /* profile name */
	char *type;               /* "avro_dir" | "clickhouse" */
	/* avro_dir */
	char *path;
	enum sl_codec codec;      /* default deflate */
	int compression_level;    /* deflate 1-9, default 1 */
	uint64_t max_file_bytes;  /* default 64 MiB */
	uint64_t max_file_seconds;/* default 60 */
	/* clickhouse (later) */
	char *url;
	char *database;
	char *user;
	char *password;           /* resolved secret, never printed */
};

/* What a sink knows about the stream it serves. */
struct sl_sink_stream {
	const char *name;             /* stream name */
	enum sl_write_mode mode;
};

struct sl_sink_ops {
	const char *type;
	/* Opens the sink.  *ctx receives the context, freed by close(). */
	int (*open)(void **ctx, const struct sl_dest_config *dc, const struct sl_sink_stream *st,
		    char *err, size_t errlen);
	/* Writes one change (see above). */
	int (*write)(void *ctx, const struct sl_change *c, char *err, size_t errlen);
	/* Everything written so far is at or before pos (copied). */
	void (*mark)(void *ctx, const struct sl_position *pos);
	/* True when buffered data has reached a size or age limit and the agent
	 * should flush at the next transaction boundary.  now_ms is sl_mono_ms(). */
	bool (*flush_due)(void *ctx, int64_t now_ms);
	/* True when anything was written since the last flush. */
	bool (*pending)(void *ctx);
	/* Makes everything written so far durable.  Returns 1 with *durable set
	 * to the last mark (everything before it is now durable), 0 when no mark
	 * was given since open (nothing to report), or -1 with a message in err;
	 * after a failure the agent stops and restarts from its checkpoint. */
	int (*flush)(void *ctx, struct sl_position *durable, char *err, size_t errlen);
	/* Discards what the sink holds of table t from an interrupted backfill
	 * run: records whose CSNs all lie in [csn_first, csn_last] (the run's
	 * re-backfill marker and its rows), flushed or not, so that a redo leaves
	 * no duplicate rows visible.  Output that also holds records outside the
	 * range may stay: records delivered again carry the same uuid. */
	int (*discard_backfill)(void *ctx, const struct sl_table *t, const char *csn_first,
				const char *csn_last, char *err, size_t errlen);
	/* Discards anything not flushed (no partial output stays visible) and frees ctx. */
	void (*close)(void *ctx);
};

/* The registry: returns the ops for a destination type, or NULL. */
const struct sl_sink_ops *sl_sink_lookup(const char *type);

#endif
