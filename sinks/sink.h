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
 *                source.  A drain may fall inside a transaction (the part
 *                written comes again on the next run), but never between a
 *                key change's UPDATE-DELETE and its UPDATE-INSERT: the
 *                merge batches take the values the UPDATE-INSERT leaves
 *                unchanged from the old key's row, which the destination
 *                holds only as a tombstone once the first half is there.
 *
 * A network sink (ClickHouse) plugs in the same way: write() appends to a
 * batch, flush() sends it and returns on 2xx; while it waits, the reader
 * thread keeps reading into the bounded queue and keeps the source's
 * connection alive.  A sink never learns which source produced a change
 * beyond what the change's table version carries (its source descriptor:
 * position fields and names); positions are opaque to it.
 *
 * A sink also owns its configuration: its key table fills its own struct
 * from [destination.NAME], and its check() serves `sluice check`, so the
 * agent never looks inside either.  Adding a sink means one folder and one
 * line in sinks/registry.c; nothing in agent/ changes.
 *
 * Return codes: 0 success, -1 failure with a message in err, unless stated.
 * open(), write(), flush() and discard_backfill() may also return another
 * negative enum sl_status (common/util.h): SL_EPREREQ for a failure only an
 * operator can fix (the destination refuses the credentials, its bucket does
 * not exist, its table cannot take a schema change), which the agent does
 * not retry (exit 3).
 */
#ifndef SLUICE_SINKS_SINK_H
#define SLUICE_SINKS_SINK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "common/keytab.h"
#include "schema/schema.h"
#include "common/outage.h"

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
	const char *destination;      /* the destination profile's NAME, for messages; may be NULL */
	const char *state_dir;        /* the agent's state_dir, where a sink may spool; may be NULL */
	const char *config_path;      /* the configuration file, for commands in messages; may be NULL */
	struct sl_outage *outage;     /* where the sink reports failed and good attempts (common/outage.h);
				       * kept by the agent across the stream's restarts; may be NULL */
};

/* ops->caps: what a sink supports beyond append mode. */
#define SL_SINK_CAP_MERGE 0x1u    /* write_mode = merge */
#define SL_SINK_CAP_COMPACT_APPEND 0x2u  /* compact() also serves append mode */

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
	/* Optional, for `sluice verify`: reads back what the stream wrote with
	 * conf and checks it against its manifests, printing what it finds to
	 * out.  Returns 0 when everything checks, SL_EVERIFY
	 * (sinks/avro_tree/tree.h) when it found problems (printed to out), or
	 * another negative enum sl_status with the message in err when it
	 * could not finish. */
	int (*verify)(const void *conf, const struct sl_sink_stream *st, FILE *out, char *err,
		      size_t errlen);

	/* Optional, for `sluice compact` (merge mode; append mode too with
	 * SL_SINK_CAP_COMPACT_APPEND): folds the output of
	 * object (NULL: of every object) into a new base, printing a line per
	 * object to out; safe while an agent writes the stream.  Returns 0, or a
	 * negative enum sl_status with the message in err. */
	int (*compact)(const void *conf, const struct sl_sink_stream *st, const char *object, FILE *out, char *err,
		       size_t errlen);

	/* Opens the sink for stream st with its configuration conf (borrowed: it
	 * outlives the context).  *ctx receives the context, freed by close(). */
	int (*open)(void **ctx, const void *conf, const struct sl_sink_stream *st, char *err,
		    size_t errlen);
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
	/* Optional (both NULL: flush() only): a flush in two steps, so that the
	 * writer goes on while the sink sends.  flush_start() hands everything
	 * written so far, with the last mark, to the sink's own thread and
	 * returns at once; flush_wait() waits for that and returns what flush()
	 * would have returned for it (0 when nothing is in flight).  The agent
	 * alternates them, and calls flush_wait() before flush(),
	 * discard_backfill() and close().  Between the two, write() and mark()
	 * go on into a new batch; a write that needs what is in flight (a new
	 * table version) waits for it inside the sink. */
	int (*flush_start)(void *ctx, char *err, size_t errlen);
	int (*flush_wait)(void *ctx, struct sl_position *durable, char *err, size_t errlen);
	/* Discards what the sink holds of table t from an interrupted backfill
	 * run: records whose CSNs all lie in [csn_first, csn_last] (the run's
	 * re-backfill marker and its rows), flushed or not, so that a redo leaves
	 * no duplicate rows visible.  Output that also holds records outside the
	 * range may stay: records delivered again carry the same uuid. */
	int (*discard_backfill)(void *ctx, const struct sl_table *t, const char *csn_first,
				const char *csn_last, char *err, size_t errlen);
	/* Optional (NULL: never): true when the readers of a table version
	 * that this sink writes with conf read column c's missing value
	 * (sl_column.missing, not SL_V_NULL) exactly in the rows written before
	 * c was added: the Avro field's default in the reader schema, the
	 * ClickHouse column's DEFAULT.  A column added with a constant default
	 * then needs no backfill (sl_sink_carries_missing).  Called by the
	 * agent's threads, any time: it reads conf only. */
	bool (*carries_missing)(const void *conf, const struct sl_column *c);
	/* Optional (NULL: changes bring their versions): table t has a new
	 * version that no change may bring soon (the source's log described
	 * it anew: a column added, dropped, renamed or retyped by DDL that
	 * rewrote no row).  The sink makes its destination fit t with the next
	 * flush, as the first change of t would (a reader then sees the new
	 * columns at once).  A version the destination cannot take now is left
	 * for the changes that bring it, which report it.  Called between
	 * transactions only. */
	int (*version)(void *ctx, const struct sl_table *t, char *err, size_t errlen);
	/* Optional (NULL: none): the changes set aside as dead letters since
	 * open, because the destination refused them as data.  The writer
	 * reads it after each flush, for sluice_dead_letter_total and the
	 * dead_letters alert. */
	uint64_t (*dead_letters)(void *ctx);
	/* Optional (NULL: none): the values set to the nearest end of the
	 * destination type's range since open (ClickHouse's Date32 in the
	 * modern layout).  Read after each flush, for sluice_date_clamps_total. */
	uint64_t (*date_clamps)(void *ctx);
	/* Discards anything not flushed (no partial output stays visible) and frees ctx. */
	void (*close)(void *ctx);
};

/* The registry: the sinks of this build, NULL-terminated (sinks/registry.c). */
extern const struct sl_sink_ops *const sl_sinks[];
/* True when ops (with conf) carries the missing value of every column of
 * t that has one (ops->carries_missing), and t has one (sinks/lookup.c). */
bool sl_sink_carries_missing(const struct sl_sink_ops *ops, const void *conf, const struct sl_table *t);
/* Returns the ops for a destination type, or NULL (sinks/lookup.c). */
const struct sl_sink_ops *sl_sink_lookup(const char *type);
/* The number of sinks, and the i-th (NULL past the end): to go through all. */
size_t sl_sink_count(void);
const struct sl_sink_ops *sl_sink_at(size_t i);
/* Writes the known destination types into out, for messages: "avro_dir", or
 * "avro_dir, s3" once there are more. */
void sl_sink_types(char *out, size_t len);

#endif
