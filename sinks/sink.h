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
 * A sink also owns its configuration: its key table fills its own struct
 * from [destination.NAME], and its check() serves `sluice check`, so the
 * agent never looks inside either.  Adding a sink means one folder and one
 * line in sinks/registry.c; nothing in agent/ changes.
 *
 * Return codes: 0 success, -1 failure with a message in err, unless stated.
 */
#ifndef SLUICE_SINKS_SINK_H
#define SLUICE_SINKS_SINK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "common/keytab.h"
#include "schema/schema.h"

enum sl_write_mode { SL_WRITE_APPEND = 0, SL_WRITE_MERGE };

/* A destination connection profile, as parsed from [destination.NAME].  The
 * agent fills name and type, finds ops with sl_sink_lookup(type), and fills
 * conf, a struct of ops->conf_size bytes, through ops->keys from the rest of
 * the section.  All of it belongs to the configuration. */
struct sl_dest_config {
	char *name;                       /* profile name */
	char *type;                       /* "avro_dir", ... */
	const struct sl_sink_ops *ops;    /* the sink that implements type */
	void *conf;                       /* the sink's own configuration struct */
};

/* What a sink knows about the stream it serves. */
struct sl_sink_stream {
	const char *name;             /* stream name */
	enum sl_write_mode mode;
	enum sl_source_kind source_kind;
	const char *destination;      /* the destination profile's NAME, for messages; may be NULL */
};

/* ops->caps: what a sink supports beyond append mode. */
#define SL_SINK_CAP_MERGE 0x1u    /* write_mode = merge */

struct sl_sink_ops {
	const char *type;                 /* the destination type it implements */
	unsigned caps;                    /* SL_SINK_CAP_* */

	/* Its configuration: the keys of [destination.NAME] other than "type"
	 * (common/keytab.h), applied to a zeroed struct of conf_size bytes.  The
	 * rows' applies masks are 0: a sink's table is its own. */
	const struct sl_keydesc *keys;
	size_t nkeys;
	size_t conf_size;
	/* Optional: rules across keys, run once the table is applied.  sec is
	 * the section as read, to find the line to blame (sl_ini_find()).
	 * Returns 0, or -1 after sl_keyerr_set(er, line, ...). */
	int (*conf_check)(const void *conf, const struct sl_ini_section *sec, struct sl_keyerr *er);
	/* Optional: frees what conf holds beyond the table's fields (the agent
	 * then frees those with sl_keytab_free(), and conf itself). */
	void (*conf_free)(void *conf);

	/* Optional, for `sluice check`: checks, without changing anything, that
	 * the stream st could be written with conf; prints one line per check
	 * to out.  Returns 0, or a negative enum sl_status (common/util.h) with
	 * the message in err. */
	int (*check)(const void *conf, const struct sl_sink_stream *st, FILE *out, char *err,
		     size_t errlen);

	/* Opens the sink for stream st with its configuration conf (borrowed: it
	 * outlives the context).  *ctx receives the context, freed by close(). */
	int (*open)(void **ctx, const void *conf, const struct sl_sink_stream *st, char *err,
		    size_t errlen);
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

/* The registry (sinks/registry.c). */
/* Returns the ops for a destination type, or NULL. */
const struct sl_sink_ops *sl_sink_lookup(const char *type);
/* The number of sinks, and the i-th (NULL past the end): to go through all. */
size_t sl_sink_count(void);
const struct sl_sink_ops *sl_sink_at(size_t i);
/* Writes the known destination types into out, for messages: "avro_dir", or
 * "avro_dir, s3" once there are more. */
void sl_sink_types(char *out, size_t len);

#endif
