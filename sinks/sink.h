/*
 * sinks/sink.h: the interface every destination implements.
 *
 * A sink is a table of function pointers plus an opaque context.  The agent
 * calls write() for each change in source order, and flush() at transaction
 * boundaries when flush_due() says so, when draining, and when caught up.
 * Nothing written is durable until flush() returns 0: only then may the agent
 * checkpoint and acknowledge the source position.  A sink never knows which
 * source produced a change beyond enum sl_source_kind.
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
	enum sl_source_kind source_kind;
};

struct sl_sink_ops {
	const char *type;
	/* Opens the sink.  *ctx receives the context, freed by close(). */
	int (*open)(void **ctx, const struct sl_dest_config *dc, const struct sl_sink_stream *st,
		    char *err, size_t errlen);
	/* Writes one change.  May write data out, but makes nothing durable. */
	int (*write)(void *ctx, const struct sl_change *c, char *err, size_t errlen);
	/* True when buffered data has reached a size or age limit and the agent
	 * should flush at the next transaction boundary.  now_ms is sl_mono_ms(). */
	bool (*flush_due)(void *ctx, int64_t now_ms);
	/* True when anything was written since the last flush. */
	bool (*pending)(void *ctx);
	/* Makes everything written so far durable. */
	int (*flush)(void *ctx, char *err, size_t errlen);
	/* Removes the output of an interrupted backfill of table t that used the
	 * snapshot at snapshot_pos, so that a redo leaves no duplicates visible:
	 * files holding only records with CSN (snapshot_pos, 0), the rows, or
	 * (snapshot_pos - 1, 0), the TRUNCATE marker that starts a re-backfill. */
	int (*discard_backfill)(void *ctx, const struct sl_table *t, uint64_t snapshot_pos,
				char *err, size_t errlen);
	/* Discards anything not flushed (no partial output stays visible) and frees ctx. */
	void (*close)(void *ctx);
};

/* The registry: returns the ops for a destination type, or NULL. */
const struct sl_sink_ops *sl_sink_lookup(const char *type);

#endif
