/*
 * sources/source.h: the interface every source implements, and its
 * connection profile.
 *
 * A source is a table of functions (struct sl_source_ops) plus an opaque
 * context, one per stream.  The agent reaches a database only through it; it
 * never sees a connection, a protocol message or a position's insides.  The
 * PostgreSQL source (sources/postgres/) reads a logical replication slot with
 * pgoutput; a MySQL/MariaDB source reads the binlog as a replica.  How each
 * fits the calls below:
 *
 *   call               PostgreSQL                          MySQL / MariaDB binlog
 *   ----------------   ---------------------------------   ---------------------------------
 *   check              wal_level, REPLICATION, SELECT,     log_bin, binlog_format=ROW,
 *                      the slot                            binlog_row_image, grants, purge
 *   open / tables      a catalog connection; pg_class      a connection; information_schema
 *   prepare            ensure the publication; look up     look up the checkpoint's binlog
 *                      the slot against the checkpoint     file (or GTID) on the server
 *   snapshot(create)   CREATE_REPLICATION_SLOT ...         START TRANSACTION WITH CONSISTENT
 *                      EXPORT_SNAPSHOT (the stream's       SNAPSHOT; binlog_snapshot_file/pos
 *                      slot, aligned with the snapshot)    becomes the stream's position
 *   snapshot(!create)  the same with a TEMPORARY slot      the same (the stream keeps its own
 *                                                          position)
 *   snapshot_read      COPY (SELECT ...) TO STDOUT in the  SELECT in the snapshot's
 *                      imported snapshot                   transaction
 *   snapshot_read_     key-range (ctid-range without a     key ranges over several
 *   chunked            key) COPYs over several connections connections in the snapshot
 *                      that imported the snapshot
 *   snapshot_read_     one COPY per table, several tables  (none: one table after another)
 *   tables             at once over those connections
 *   emit_watermark     pg_logical_emit_message(false, ...) a row written into a small watermark
 *                      (nothing to create)                 table (`sluice check` verifies it)
 *   read_chunk         SELECT ... WHERE key > $after ORDER SELECT ... WHERE key > ? ORDER BY
 *                      BY key LIMIT n in a REPEATABLE READ key LIMIT n in a consistent
 *                      transaction of its own; misses:     snapshot of its own; misses: its
 *                      an xid seen() knows in progress     binlog_snapshot_position before the
 *                                                          end of what next() returned
 *   start              START_REPLICATION from the          COM_BINLOG_DUMP(_GTID) from the
 *                      durable LSN                         durable file/offset or GTID set
 *   next               XLogData / keepalive messages,      row events, XID, ROTATE, heartbeat
 *                      decoded by pgoutput.c               events
 *   ack                standby status update (flush LSN)   nothing to send: the binlog is not
 *                                                          held for replicas; the position is
 *                                                          only checkpointed
 *   probe              pg_replication_slots                SHOW BINARY LOGS, expiry settings
 *   heartbeat          pg_logical_emit_message(false, ...)  none: the server's own HEARTBEAT events
 *                                                          (log_heartbeats)
 *   discard_position   drop a slot that cannot be resumed  nothing to drop: report a purged
 *                      (lost, or ahead of the checkpoint)  binlog file or GTID as renewed
 *
 * Positions (struct sl_position in schema/schema.h) are opaque to the agent;
 * the source kind's struct sl_source_desc compares them, derives the CSN and
 * encodes them for the checkpoint.  PostgreSQL positions are LSNs; binlog
 * positions are (file sequence number, offset) with the GTID as text.
 *
 * The last four are optional (NULL when a source lacks them): without
 * snapshot_read_chunked a table is read with snapshot_read in one piece,
 * without snapshot_read_tables small tables are read one after another,
 * and without emit_watermark and read_chunk a table is backfilled again only
 * from a fresh snapshot before streaming (snapshot(!create)), never while
 * the stream runs (see "backfill in chunks" below).
 *
 * Threads: a source context is used by one thread at a time (the stream's
 * reading thread).  check and probe open their own connections.
 *
 * Return codes: SL_OK (0), or a negative enum sl_status with a message in
 * err that names the source, table or column concerned and never a secret:
 * SL_EPREREQ for a missing prerequisite (wal_level, grants, a missing key in
 * merge mode), SL_ELOST for a lost position (with the recovery step),
 * SL_ECONFIG for a configuration mistake found at the source (no table
 * matches), SL_EFAIL otherwise (retried from the checkpoint by the agent).
 */
#ifndef SLUICE_SOURCES_SOURCE_H
#define SLUICE_SOURCES_SOURCE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "common/util.h"
#include "schema/schema.h"

/* A source connection profile, as parsed from [source.NAME]: the part every
 * source has.  The agent reads "type", finds the source's ops with
 * sl_source_lookup(), allocates ops->conf_size bytes (the source's own
 * struct, whose first member is this one) and fills them through ops->keys.
 * The source reaches its own keys by casting cfg to its struct.  All of it
 * belongs to the configuration. */
struct sl_source_config {
	char *name;              /* profile name */
	const struct sl_source_ops *ops;  /* the source of "type" */
	char *host;              /* default 127.0.0.1 */
	int port;                /* the source's default port */
	char *user;
	char *password;          /* resolved from password_env / password_file; NULL: the client's own
				  * (libpq's .pgpass) */
	char *sslrootcert;
	int connect_timeout;     /* seconds, default 10 */
	int receive_timeout;     /* seconds a stream may stay silent before it is taken as dead;
				  * 0: the source's own rule (postgres: 2 x wal_sender_timeout, at least 30 s) */
	int backfill_connections;   /* connections a backfill snapshot is read over (0: 1) */
	int backfill_chunk_rows;    /* rows per backfill chunk (0: the source's default) */
};

/* A wait on the server that may last long and that sluice cannot shorten
 * by itself.  PostgreSQL: CREATE_REPLICATION_SLOT waits, silently, for every
 * transaction that was open when it started; MySQL: FLUSH TABLES WITH READ
 * LOCK waits for long queries.  Blockers are the server sessions it waits
 * for, as far as the server tells. */
struct sl_source_blocker {
	int64_t pid;                   /* server process (PostgreSQL backend pid, MySQL thread id) */
	int64_t xact_age_s;            /* how long its transaction has been open; -1 unknown */
	const char *state;             /* "idle in transaction", "active", ... ("" unknown) */
	const char *user;              /* ("" unknown) */
	const char *application;       /* ("" unknown) */
};

struct sl_source_wait {
	const char *action;            /* what waits: "creating replication slot \"sluice_s1\"" */
	int64_t waited_ms;             /* for how long so far */
	const char *detail;            /* one line, as logged: what it waits for, what ends it */
	int nblockers;
	const struct sl_source_blocker *blockers;
};

/* What the agent gives a source for such waits.  Every member may be NULL.
 * A source that waits polls stop() at least every few hundred milliseconds
 * and, when it returns true (the agent got a signal), cancels the
 * operation on the server, leaves nothing half made, and returns SL_EFAIL.
 * It logs what it waits for every 10 s, and reports it to waiting() each time
 * (the agent shows it in `sluice status`); waiting(NULL) when the wait ends,
 * however it ends, if it was reported. */
struct sl_source_hooks {
	void *payload;
	bool (*stop)(void *payload);
	void (*waiting)(void *payload, const struct sl_source_wait *w);
	/* While streaming (a source whose tables have no identity of their own,
	 * such as a binlog's): the name ns.table the stream follows was given
	 * rows without row events by the DDL at position at (RENAME TABLE ...
	 * TO it, a partition truncated, dropped or exchanged), or
	 * the DDL at ended it while a table of that name exists again (dropped
	 * and created again before the stream read the DROP); PostgreSQL: a
	 * change at at of the partitioned table ns.table came from a partition
	 * that is no longer one of its own.  Returns 0 when
	 * the table's backfill already comes after at (nothing to do: the
	 * stream reads the statement again after a restart); 1 when it does
	 * not, and then, with backfill, the agent has durably asked for the
	 * table to be backfilled again on the stream's next start, so the
	 * source ends the stream with SL_ERESTART; or a failure (err). */
	int (*replaced)(void *payload, const char *ns, const char *table, const struct sl_position *at, bool backfill,
			char *err, size_t errlen);
	/* While streaming: how far the backfill of ns.table (run or started
	 * before this stream started) holds the table's changes, so that the
	 * source may skip the table's events there, those it cannot read (a
	 * statement, a row image without every column, rows whose layout is
	 * unknown) included.  SL_COVER_NONE; SL_COVER_UNTIL with *until: every
	 * change committed before until is in it (a snapshot's rows);
	 * SL_COVER_FIRST_WATERMARK: a backfill while streaming with no chunk
	 * durable yet: every change the stream reads before the low watermark
	 * of the table's first chunk of this run (the watermark read_chunk
	 * reads the table after) is in the chunks to come; watermarks of an
	 * earlier run, or of another table's backfill, end nothing; or a
	 * failure (err). */
	int (*covered)(void *payload, const char *ns, const char *table, struct sl_position *until, char *err,
		       size_t errlen);
};

enum sl_cover { SL_COVER_NONE = 0, SL_COVER_UNTIL, SL_COVER_FIRST_WATERMARK };

/* What a source knows of the stream it serves. */
struct sl_source_stream {
	const char *name;              /* stream name */
	const char *config_path;       /* for recovery hints in messages */
	char *const *tables;           /* include globs "schema.table", NULL-terminated */
	char *const *exclude_tables;   /* exclude globs, NULL-terminated */
	char *const *key_columns;      /* "schema.table.column": the key of a table, replacing its
					* own (sl_source_apply_key_columns), NULL-terminated or NULL */
	bool merge;                    /* write_mode = merge: every table needs a key */
	const void *conf;              /* the source's own stream keys (sl_source_ops.stream_conf_keys),
					* NULL when it has none */
	const struct sl_source_hooks *hooks;  /* for long waits (open, tables, prepare, snapshot,
					       * start); NULL in check and probe */
	char *const *known_tables;     /* "schema.table" of every table the stream's checkpoint
					* has followed, NULL-terminated; NULL when none (check) */
	int backfill_connections;      /* connections a snapshot reads over (0: 1) */
	int backfill_chunk_rows;       /* rows per chunk (0: the source's default) */
	bool heartbeats;               /* heartbeats are configured: check says whether the
					* source permits them */
	int64_t heartbeat_ms;          /* heartbeat_interval in ms (0: off); a source whose log
					* brings its own heartbeats asks for them at least this often */
	long agent_pid;                /* check: the agent of this state_dir that runs the stream (the
					* holder of its lock), 0 when none */
	int64_t status_ms;             /* status_interval in ms (0: the source's default): how
					* soon a durable position is acknowledged, at the latest */
	const struct sl_position *durable;  /* probe: the checkpoint's durable position, NULL when none */
	int64_t durable_ts_us;         /* probe: the source time of the last durable change, 0 unknown */
};

/* The checkpoint's view of the stream's position, for prepare(). */
struct sl_source_resume {
	bool has_position;             /* the stream has had a log position (a slot was created) */
	bool reset;                    /* `sluice backfill` asked for a new position and a full backfill */
	struct sl_position durable;    /* everything before it is durable (valid with has_position) */
	const char *checkpoint_path;   /* for messages */
};

/* What prepare() decided. */
struct sl_source_plan {
	bool need_position;            /* there is no position to resume from: create one with
					* snapshot(create = true), and backfill every table */
	bool adopt;                    /* the checkpoint has no position, but the server keeps one
					* for the stream (a slot made outside sluice): start there */
	struct sl_position start;      /* with adopt */
	int64_t status_interval_ms;    /* how often ack() must at least be called (0: no need) */
	/* "schema.table" of tables whose changes the stream may have missed
	 * (PostgreSQL: a table that left the publication sluice created, added
	 * again): the agent backfills them again, behind a marker.  Owned by
	 * the source context, valid until close. */
	char *const *rebackfill;
	int nrebackfill;
};

/* A snapshot for backfill, aligned to a position: every change committed
 * before pos is in it and none after.  Rows read from it carry CSN
 * (pos_csn(pos), 0). */
struct sl_snapshot_info {
	struct sl_position pos;
	int64_t ts_us;                 /* source time just before the snapshot, Unix microseconds */
};

/* Called once per snapshot row; vals (t->ncols typed values) are valid during
 * the call.  Returns 0 to go on, or -1 to stop (the callback sets its own
 * error, which the source leaves alone). */
typedef int (*sl_row_fn)(void *payload, const struct sl_table *t, const struct sl_value *vals);

enum sl_event_kind {
	SL_EV_TIMEOUT = 0,   /* nothing arrived within the timeout */
	SL_EV_BEGIN,         /* a transaction starts: pos (its position, written into its records), ts_us, tx_id */
	SL_EV_CHANGE,        /* one change of the open transaction: change */
	SL_EV_COMMIT,        /* the transaction ends: pos is where to resume after it, what ack() takes */
	SL_EV_SCHEMA,        /* a table was described anew: table; changed when its columns differ */
	SL_EV_KEEPALIVE,     /* pos: nothing before it is still to come; reply_requested; a heartbeat
			      * of the stream's own (heartbeat) has ts_us, when it was written */
	SL_EV_END,           /* the server ended the stream */
	SL_EV_WATERMARK,     /* a watermark written by emit_watermark (any stream's, any run's):
			      * watermark (its text) and pos (where the log has it).  Always
			      * between transactions: every transaction committed before it in
			      * the log was returned before it, none after; pos, like a
			      * keepalive's, may be acknowledged once what came before is durable */
};

/* What sl_source_ops.columns_changed found. */
enum { SL_COLS_REWRITTEN = 1, SL_COLS_MISSING = 2, SL_COLS_LOST = 3 };

struct sl_event {
	enum sl_event_kind kind;
	struct sl_position pos;        /* BEGIN, COMMIT, KEEPALIVE */
	int64_t ts_us;                 /* BEGIN, COMMIT: commit time; heartbeat KEEPALIVE: when it was
					* written; Unix microseconds */
	uint64_t tx_id;                /* BEGIN */
	bool reply_requested;          /* KEEPALIVE: the server wants an ack() soon */
	const char *watermark;         /* WATERMARK: its text (NUL-terminated, valid until the next call) */
	bool heartbeat;                /* KEEPALIVE: one of the stream's heartbeats came back */
	/* SCHEMA: the new version.  When changed, retired is the version it
	 * replaces: ownership passes to the caller, who frees it with
	 * sl_table_free() once no change it read still uses it. */
	const struct sl_table *table;
	bool changed;
	struct sl_table *retired;
	/* SCHEMA: when not NULL, why the table's existing rows no longer read
	 * as the stream has them, though no change carries it (PostgreSQL: a
	 * column added with a default, a table rewritten by ALTER COLUMN ...
	 * TYPE, a column dropped and added again): the agent backfills the
	 * table again, behind a marker.  Valid until the next call. */
	const char *rebackfill;
	/* SCHEMA with rebackfill: only columns added with a constant default
	 * changed the rows, and the new version carries what they read
	 * (sl_column.missing): a sink with SL_SINK_CAP_MISSING needs no
	 * backfill. */
	bool rebackfill_missing;
	/* CHANGE: table, op, values, csn_pos, seq, source_ts_us and tx_id are
	 * set; csn (the text), pos, read_method, read_ts_us and uuid are the
	 * caller's.  The
	 * values are valid until the next call. */
	struct sl_change change;
};

/* ---- backfill in chunks ----
 *
 * Keys: a chunk reader orders a table by its primary key and hands the
 * agent the key of a row as a text of its own making (a "key text": the
 * source alone reads it back; the agent stores it in the checkpoint to
 * resume after it, and never looks inside).  Key texts are valid UTF-8
 * without NUL bytes.
 */

/* How snapshot_read_chunked reads a table in the snapshot. */
struct sl_chunked_read {
	const char *after;             /* a key text: read only the rows with a key after it;
					* NULL: every row */
	uint64_t chunk_rows;           /* about this many rows per chunk */
	/* Called at the end of each chunk, in key order: every row with a key
	 * up to upto (a key text, inclusive) was passed to fn and none after
	 * it, rows rows in all so far.  Never called for a table without a key
	 * (such a table is read in ranges of pages, which do not resume).
	 * Returns 0, or -1 to stop the read (its own error). */
	int (*progress)(void *payload, const char *upto, uint64_t rows);
};

/* How snapshot_read_tables hands on its tables: start(i) before the first
 * row of tables[i], done(i, rows) after its last.  Each returns 0, or -1
 * to stop the read (its own error). */
struct sl_table_reads {
	int (*start)(void *payload, int i);
	int (*done)(void *payload, int i, uint64_t rows);
};

/* What read_chunk tells of the transactions its snapshot holds.  A chunk's
 * rows must include every transaction that next() has already returned:
 * otherwise a change the stream wrote before the chunk opened would be
 * undone by the chunk's older row.  seen() says whether next() returned
 * the transaction tx_id; a source whose snapshot misses one of those (it
 * committed in the log but was not yet visible: PostgreSQL writes a commit
 * record before it makes the transaction visible) reads nothing and returns
 * SL_EAGAIN, and the agent tries again a moment later.  A source whose
 * snapshot names its own log position may judge by position instead (MySQL:
 * read_chunk runs on the reading thread between transactions, so the
 * source knows where the last transaction next() returned ends, and a
 * snapshot whose binlog position is before that misses it). */
struct sl_chunk_check {
	void *payload;
	bool (*seen)(void *payload, uint64_t tx_id);
	/* The transactions next() returned last (any order, may be NULL): a
	 * snapshot also misses one that is newer than every transaction it
	 * knows (PostgreSQL: at or after its xmax), which seen() cannot be
	 * asked about. */
	const uint64_t *recent;
	size_t nrecent;
};

/* The stream's position holder as the server sees it, for status and alerts. */
/* One figure of the source's own about its position holder, in its own
 * words (PostgreSQL: confirmed_flush_lsn, wal_status, ...): the agent shows
 * them as they are, in the object named after the source type of
 * `sluice status --json` (doc/operations.md), and reads none of them. */
struct sl_source_figure {
	const char *name;              /* a static string */
	bool is_text;
	char text[64];                 /* is_text: the value ("" unknown: null) */
	int64_t num;                   /* !is_text: the value (-1 unknown: null) */
};
#define SL_SOURCE_NFIGURES 8

struct sl_source_status {
	bool exists;                   /* the slot exists */
	bool active;                   /* a reader is attached */
	enum sl_hold hold;             /* what the server keeps for the position (common/util.h) */
	char hold_word[32];            /* the source's own word for it, for the metric ops->hold_metric
					* and for messages (PostgreSQL: wal_status); "" unknown */
	char confirmed[64];            /* the server's confirmed position, as text ("" unknown) */
	char restart[64];              /* the oldest position the server keeps for it */
	int64_t lag_bytes;             /* server head - confirmed; -1 unknown */
	int64_t retained_bytes;        /* server head - restart; -1 unknown */
	int64_t safe_bytes;            /* log the server may still write before it drops the position; -1 unknown */
	struct sl_source_figure figures[SL_SOURCE_NFIGURES];  /* the source's own (see above) */
	int nfigures;
	/* Binlog sources (the figures a PostgreSQL slot has not): valid with
	 * log_known.  Zeroed (as after a memset), they read as unknown. */
	bool log_known;
	int64_t log_files;             /* log files the server keeps */
	int64_t log_bytes;             /* their total size */
	int64_t oldest_needed_age_s;   /* age of the oldest file the stream still needs */
	int64_t time_to_purge_s;       /* until the server's expiry purges that file; -1 never or unknown */
	int64_t retention_s;           /* when the files expire (binlog_expire_logs_seconds); 0 never,
					* -1 unknown.  Without a slot, exists/active/hold describe the
					* stream's checkpoint position on the server, confirmed is that
					* position, restart the file it needs */
	char head[SL_POS_TEXT_MAX + 32]; /* the server's log head */
};

/* Counters a source keeps of what it skipped or adjusted, for metrics:
 * they start at 0 when the source is opened and only grow. */
struct sl_source_counters {
	uint64_t skipped_changes;      /* changes of tables the stream does not select */
	uint64_t timestamp_clamps;     /* timestamps beyond what the output holds, clamped */
	uint64_t decimal_nan_nulls;    /* NaN in decimal columns, written as null */
};

struct sl_ini_section;
struct sl_keyerr;
struct sl_keydesc;

struct sl_source_ops {
	const char *type;                       /* the config's source type: "postgres" */
	const struct sl_source_desc *desc;      /* positions and records of this kind */

	/* Its configuration, as a sink's (sinks/sink.h): the keys of
	 * [source.NAME] other than "type" (common/keytab.h), applied to a zeroed
	 * struct of conf_size bytes whose first member is struct
	 * sl_source_config (sources/source_conf.h has the rows every source
	 * shares).  Rows with applies SL_SOURCE_OWN are the source's own: a
	 * missing required one says "(required for type T)".  conf_check
	 * (optional) runs the rules across keys once the table is applied:
	 * 0, or -1 after sl_keyerr_set(er, line, ...). */
	const struct sl_keydesc *keys;
	size_t nkeys;
	size_t conf_size;
	int (*conf_check)(const void *conf, const struct sl_ini_section *sec, struct sl_keyerr *er);
	/* The keys of [stream.NAME] that only some sources have, which this
	 * one takes (NULL-terminated; NULL: none): the agent refuses them in a
	 * stream from any other source.  PostgreSQL: slot, publication,
	 * key_columns, status_interval (doc/configuration.md).  The rows of
	 * key_columns and status_interval, which fill generic fields of
	 * struct sl_source_stream, are the agent's; the others are the
	 * source's own stream conf, as its profile keys are: stream_conf_keys
	 * (stream_conf_nkeys rows) applied to a zeroed struct of
	 * stream_conf_size bytes, which the source reads as
	 * sl_source_stream.conf; stream_conf_check (optional) then fills
	 * defaults that derive from the stream's name (the part of sec's title
	 * after "stream.") and checks across keys: 0, or -1 after
	 * sl_keyerr_set(er, line, ...). */
	const char *const *stream_keys;
	const struct sl_keydesc *stream_conf_keys;
	size_t stream_conf_nkeys;
	size_t stream_conf_size;
	int (*stream_conf_check)(void *conf, const struct sl_ini_section *sec, const char *stream,
				 struct sl_keyerr *er);
	/* Optional (NULL: none): a gauge, 1 for each stream with the position
	 * holder's state in the source's own word (status.hold_word) as the
	 * label hold_label (PostgreSQL: sluice_slot_wal_status{wal_status=...});
	 * hold_help is its HELP text.  The label also names the word in alert
	 * messages. */
	const char *hold_metric, *hold_label, *hold_help;

	/* `sluice check`: every read-only probe run depends on (connection,
	 * log settings, privileges, tables, keys in merge mode, the position
	 * holder judged against the checkpoint's view in resume, as prepare()
	 * judges it), with the statuses and words run would give.  Prints one
	 * line per check to out.  Changes nothing. */
	int (*check)(const struct sl_source_config *cfg, const struct sl_source_stream *st,
		     const struct sl_source_resume *resume, FILE *out, char *err, size_t errlen);
	/* The position holder's state, on a connection of its own; works
	 * whether or not an agent runs the stream. */
	int (*probe)(const struct sl_source_config *cfg, const struct sl_source_stream *st,
		     struct sl_source_status *out, char *err, size_t errlen);
	/* `sluice backfill` of every table, on a connection of its own, while
	 * no agent runs the stream: checks the stream's position holder against
	 * the checkpoint's position (resume) as prepare() does.  When that
	 * position cannot be resumed (PostgreSQL: the slot is missing or lost,
	 * has confirmed beyond the checkpoint, or is left over from an earlier
	 * request for a new one), sets *renew and, unless dry_run, removes what
	 * is left of it on the server (drops the slot), printing one line per
	 * action to out: the next run then creates a new position and backfills
	 * every table, with no step by hand.  Otherwise *renew is false and
	 * nothing changes.  SL_EFAIL when another reader holds the position (an
	 * active slot); SL_EPREREQ when it is not the stream's to drop.  A MySQL
	 * source has nothing to remove: *renew when the binlog file or GTID set
	 * of the checkpoint was purged. */
	int (*discard_position)(const struct sl_source_config *cfg, const struct sl_source_stream *st,
				const struct sl_source_resume *resume, bool dry_run, bool *renew, FILE *out,
				char *err, size_t errlen);

	/* Opens the source for one stream (a catalog connection); *ctx is freed
	 * by close().  cfg and st must outlive ctx. */
	int (*open)(void **ctx, const struct sl_source_config *cfg, const struct sl_source_stream *st,
		    char *err, size_t errlen);
	/* Ends streaming, closes every connection and frees ctx (and the table
	 * versions it still owns). */
	void (*close)(void *ctx);

	/* The selected tables with their columns and keys: *out is a malloc'd
	 * array of *n table versions that the caller frees (sl_table_free() each,
	 * then free()).  SL_ECONFIG when nothing matches; SL_EPREREQ when merge
	 * mode meets a table without a key. */
	int (*tables)(void *ctx, struct sl_table ***out, int *n, char *err, size_t errlen);
	/* Makes the log position usable for the stream and checks the
	 * checkpoint's position against it: SL_ELOST when it cannot be resumed
	 * (the slot is missing or lost, or the server already confirmed beyond
	 * it), with the recovery step in err.  Fills *plan. */
	int (*prepare)(void *ctx, const struct sl_source_resume *resume, struct sl_source_plan *plan,
		       char *err, size_t errlen);
	/* The server's current log position (for --until-caught-up, and
	 * as the floor of the run's markers: every change an earlier run
	 * read is below it). */
	int (*current_position)(void *ctx, struct sl_position *out, char *err, size_t errlen);

	/* Takes a snapshot for backfill.  With create, the stream has no
	 * position yet: the snapshot creates it (the stream's slot), so the
	 * stream starts at info->pos.  Otherwise the snapshot is taken beside the
	 * stream's own position, which is at or before info->pos.  *snap is the
	 * source's handle, valid until snapshot_close().  With create, the
	 * snapshot must be read completely before start(). */
	int (*snapshot)(void *ctx, bool create, void **snap, struct sl_snapshot_info *info,
			char *err, size_t errlen);
	/* Reads every row of t in the snapshot, in typed values, calling fn for
	 * each; *rows receives the count.  A failing fn stops the read: -1 with
	 * err left to fn. */
	int (*snapshot_read)(void *ctx, void *snap, const struct sl_table *t, sl_row_fn fn, void *payload,
			     uint64_t *rows, char *err, size_t errlen);
	void (*snapshot_close)(void *ctx, void *snap);
	/* Optional.  Protects the n tables that the backfill reads from snap
	 * against changes the snapshot would not see (PostgreSQL: a table
	 * rewrite, which is not MVCC-safe, would leave the table empty to an
	 * older snapshot) until snapshot_close: an ACCESS SHARE lock on every
	 * connection that reads the snapshot, as pg_dump takes.  Called once,
	 * before the first read; SL_EFAIL naming the table when its lock
	 * cannot be had in time. */
	int (*snapshot_lock)(void *ctx, void *snap, const struct sl_table *const *tables, int n, char *err,
			     size_t errlen);
	/* Optional.  Reads the rows of t in the snapshot as snapshot_read does,
	 * in chunks of about o->chunk_rows rows over the snapshot's connections
	 * (st->backfill_connections), in key order chunk after chunk (rows
	 * within a chunk in any order), calling o->progress at the end of each
	 * chunk.  A table without a key is read in ranges of pages, in any
	 * order, and reports no progress. */
	int (*snapshot_read_chunked)(void *ctx, void *snap, const struct sl_table *t, const struct sl_chunked_read *o,
				     sl_row_fn fn, void *payload, uint64_t *rows, char *err, size_t errlen);

	/* Optional.  Reads the n tables (small ones: each in one piece, with
	 * no progress) in the snapshot as snapshot_read does, several at once
	 * over the snapshot's connections, and hands them on one table after
	 * another in the order given: o->start(i), tables[i]'s rows (fn),
	 * o->done(i, rows), for i = 0 .. n - 1.  Without it, each is read by
	 * snapshot_read or snapshot_read_chunked in turn.  On failure the
	 * snapshot is only good for snapshot_close. */
	int (*snapshot_read_tables)(void *ctx, void *snap, const struct sl_table *const *tables, int n,
				    const struct sl_table_reads *o, sl_row_fn fn, void *payload, char *err,
				    size_t errlen);

	/* Backfill while streaming (optional, both or neither).  emit_watermark
	 * writes text into the log, where next() returns it as SL_EV_WATERMARK
	 * (with the same text) at its place; *at receives that place when the
	 * source knows it (else zeroed).  read_chunk reads, in a consistent
	 * snapshot of its own taken now, at most limit rows of t (a table with a
	 * key) whose key comes after the key text after (NULL: from the first),
	 * in key order, calling fn for each; *rows receives the count and *last
	 * (malloc'd, the caller frees; NULL when no row) the key text of the
	 * last row.  SL_EAGAIN (nothing read) when the snapshot misses a
	 * transaction chk->seen() reports (see struct sl_chunk_check), or
	 * when DDL holds t (PostgreSQL: a lock that conflicts with ACCESS
	 * SHARE, taken before the chunk's snapshot, for a second at most).
	 * SL_ESTALE (nothing read, the reason in err) when t's columns, or t
	 * itself, were renamed or dropped after the stream's position: the
	 * stream's view of t is older than t, until its next description.
	 * emit_watermark returns SL_ERESTART when watermark_ready (below) would
	 * now say no: the stream restarts and reads the table from a snapshot. */
	int (*emit_watermark)(void *ctx, const char *text, struct sl_position *at, char *err, size_t errlen);
	int (*read_chunk)(void *ctx, const struct sl_table *t, const char *after, uint64_t limit,
			  const struct sl_chunk_check *chk, sl_row_fn fn, void *payload, uint64_t *rows,
			  char **last, char *err, size_t errlen);
	/* Optional, with emit_watermark: whether emit_watermark can write
	 * for stream st now, on a connection of its own (MySQL: the watermark
	 * table exists, has its columns, may be written by the user, and the
	 * binlog is not filtered for it).  SL_EPREREQ with what is missing and
	 * what to run; SL_OK; another failure when it cannot tell.  Without
	 * it, emit_watermark always can.  The agent asks before it backfills
	 * a table while streaming (and reads the table from a snapshot before
	 * streaming when the source cannot), and `sluice backfill --table`
	 * asks before it sends a request to a running agent. */
	int (*watermark_ready)(const struct sl_source_config *cfg, const struct sl_source_stream *st, char *err,
			       size_t errlen);

	/* Starts streaming from position from (everything before it is durable). */
	int (*start)(void *ctx, const struct sl_position *from, char *err, size_t errlen);
	/* Waits up to timeout_ms for the next event.  The event and everything
	 * it points to are valid until the next call. */
	int (*next)(void *ctx, int timeout_ms, struct sl_event *ev, char *err, size_t errlen);
	/* Optional: true while next() has events to give before the stream
	 * stops at a position it already reported (a table version due at the
	 * run's start position): a run that stops once caught up reads on. */
	bool (*has_pending)(void *ctx);
	/* Tells the server that everything before durable is durable (it never
	 * goes backwards), and keeps the connection alive.  want_reply asks the
	 * server for a keepalive in reply (an idle stream then learns a position
	 * it may acknowledge).  Cheap: the agent calls it at least every
	 * plan.status_interval_ms, also while the sink is slow. */
	int (*ack)(void *ctx, const struct sl_position *durable, bool want_reply, char *err, size_t errlen);

	/* ---- optional (NULL when a source has none) ---- */

	/* Not 0, with why, when the existing rows of a table changed without a
	 * change record between two of its versions' src_columns (was: what
	 * the checkpoint kept; now: the catalog's): SL_COLS_REWRITTEN for a
	 * table rewrite or a column dropped and added again, SL_COLS_MISSING
	 * when only columns added with a constant default changed them (the
	 * version carries the value as the columns' sl_column.missing), or
	 * SL_COLS_LOST when a table rewrite (VACUUM FULL) took a column's
	 * missing value out of the catalog, so that a new version can no
	 * longer carry it.  The agent then backfills the table again, behind a
	 * marker, unless only missing values changed it and the sink carries
	 * them (sl_sink_carries_missing); for SL_COLS_LOST, only when the sink
	 * carries missing values at all (its output relied on it). */
	int (*columns_changed)(const char *was, const char *now, char *why, size_t whylen);

	/* The agent's probe thread (ops/probe.c): a session of its own, kept
	 * open between samples, on a connection of its own.  probe_open
	 * connects; probe_sample fills out as probe() does; probe_close frees
	 * the session (also after a failed sample: the next sample opens a new
	 * one).  Without them the agent calls probe() at every sample. */
	int (*probe_open)(void **pctx, const struct sl_source_config *cfg, const struct sl_source_stream *st,
			  char *err, size_t errlen);
	int (*probe_sample)(void *pctx, struct sl_source_status *out, char *err, size_t errlen);
	void (*probe_close)(void *pctx);
	/* Writes a heartbeat into the source's log through the probe session
	 * (PostgreSQL: a non-transactional pg_logical_emit_message), which the
	 * stream reads back as an SL_EV_KEEPALIVE with heartbeat set and the
	 * time it was written, so that freshness is measured end to end and an
	 * idle stream on a busy server keeps acknowledging.  SL_EPREREQ when
	 * the role may not (err says what to grant); SL_EFAIL otherwise. */
	int (*heartbeat)(void *pctx, char *err, size_t errlen);
	/* The stream's counters (struct sl_source_counters), from the reading
	 * thread: cheap, called about once a second. */
	void (*counters)(void *ctx, struct sl_source_counters *out);
	/* The source's log brings heartbeats of its own, without heartbeat():
	 * a binlog server sends a HEARTBEAT event after each heartbeat period
	 * with nothing to send, and next() returns it (and the end of a
	 * transaction of tables the stream does not select) as an
	 * SL_EV_KEEPALIVE with heartbeat set and a time before which
	 * everything committed is behind its position.  Freshness is then
	 * measured end to end, always. */
	bool log_heartbeats;
};

/* The registry: the sources of this build, NULL-terminated (sources/
 * registry.c, one line per source). */
extern const struct sl_source_ops *const sl_sources[];
/* The ops for a source type ("postgres"), or NULL. */
const struct sl_source_ops *sl_source_lookup(const char *type);

/* ---- helpers every source kind shares (sources/source_util.c) ---- */

struct sl_buf;
/* Appends the command that recovers the stream after a lost position,
 * "sluice backfill -c FILE --stream NAME", with FILE and NAME quoted for a
 * shell when needed, so that a message can give it to be run as it is.
 * Returns the buffer's status (0 or -1). */
int sl_source_backfill_command(struct sl_buf *b, const struct sl_source_stream *st);
/* Adds a figure to out->figures (nothing when they are full): a text ("" is
 * null) or a number (-1 is null).  name is a static string. */
void sl_source_figure_text(struct sl_source_status *out, const char *name, const char *text);
void sl_source_figure_num(struct sl_source_status *out, const char *name, int64_t num);
/* The rule of `tables` that no database decides: an entry without glob
 * characters (*, ?, [ or \) names one table, and must match one of the n
 * tables selected on source (the source's name, for the message); a glob may
 * match none.  A table the stream followed before (st->known_tables) may be
 * gone: it was dropped, and its entry is no typo.  SL_ECONFIG naming the
 * first entry that matches nothing. */
/* Gives each of the n tables named in st->key_columns the key those
 * entries list, in place of its own (a table's key columns are the ones
 * named, in the table's column order).  An entry that names a table the
 * stream does not select, or a column the table does not have, is
 * SL_ECONFIG.  Tables it changes are finished again (new schema key). */
int sl_source_apply_key_columns(const struct sl_source_stream *st, struct sl_table **tables, int n, char *err,
				size_t errlen);
int sl_source_check_exact(const struct sl_source_stream *st, const char *source, struct sl_table *const *tables,
			  int n, char *err, size_t errlen);

#endif
