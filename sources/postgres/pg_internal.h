/*
 * sources/postgres/pg_internal.h: the PostgreSQL source's own parts, shared
 * by the files of this folder only (the rest of sluice sees the source
 * through sources/source.h and sl_pg_source_ops): connections and catalog
 * queries (pg_catalog.c), the replication connection (pg_repl.c), the
 * snapshot reader (pg_backfill.c) and the pgoutput decoder (pgoutput.h).
 *
 * All functions return SL_OK, or a negative enum sl_status with a message in
 * err: SL_EPREREQ for missing prerequisites (wal_level, privileges), SL_ELOST
 * for a lost position, SL_EFAIL otherwise.  Messages never contain secrets.
 */
#ifndef SLUICE_SOURCES_POSTGRES_PG_INTERNAL_H
#define SLUICE_SOURCES_POSTGRES_PG_INTERNAL_H

#include <libpq-fe.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "common/buf.h"
#include "common/keytab.h"
#include "schema/schema.h"
#include "sources/postgres/pg_source.h"
#include "sources/postgres/pgoutput.h"
#include "sources/source.h"

/* The prefix of the stream's heartbeat messages (pg_logical_emit_message). */
#define SL_PG_HEARTBEAT_PREFIX "sluice.heartbeat"

/* The source's operations (pg_source.h) and its position descriptor (pg_source.c). */
extern const struct sl_source_desc sl_pg_desc;

#define SL_PG_NKEYS 12
extern const struct sl_keydesc sl_pg_keys[SL_PG_NKEYS];
/* The stream keys a postgres stream takes (struct sl_source_ops.stream_keys). */
extern const char *const sl_pg_stream_keys[];
/* Of those, the source's own (struct sl_pg_stream_conf), and their check. */
#define SL_PG_STREAM_NKEYS 2
extern const struct sl_keydesc sl_pg_stream_conf_keys[SL_PG_STREAM_NKEYS];
int sl_pg_stream_conf_check(void *conf, const struct sl_ini_section *sec, const char *stream, struct sl_keyerr *er);


/* Copies a libpq error (of res, or of the connection when res is NULL) into
 * err as "what: message", on one line, and classifies it: SL_EPREREQ for
 * what an operator must fix (insufficient privilege, SQLSTATE 42501; a
 * failed authentication, class 28, or its connection-time words), with a
 * hint; SL_EFAIL (worth a retry) otherwise.  sl_pg_err_status() gives the
 * status of the last call on this thread, for a failed sl_pg_connect(). */
int sl_pg_err(char *err, size_t errlen, const char *what, PGconn *c, PGresult *res);
int sl_pg_err_status(void);
/* True when res failed with SQLSTATE state. */
bool sl_pg_sqlstate_is(PGresult *res, const char *state);

/* Appends name quoted with PQescapeIdentifier, or "ns"."name" of t.
 * Return -1 when quoting fails (the connection's error says why) or b
 * failed: never an empty name in SQL. */
int sl_pg_append_ident(struct sl_buf *b, PGconn *c, const char *name);
int sl_pg_append_qualified(struct sl_buf *b, PGconn *c, const struct sl_table *t);

/* Opens a connection.  replication=true opens a logical replication
 * connection (replication=database).  Sessions use UTF8, ISO dates, UTC and
 * hex bytea output, which is the text format pg_text.h converts to typed
 * values.  Returns NULL with a message in err. */
PGconn *sl_pg_connect(const struct sl_source_config *cfg, bool replication, char *err, size_t errlen);

/* Checks wal_level = logical and that the user may replicate. */
int sl_pg_check_prereqs(PGconn *c, char *err, size_t errlen);

/* sl_table.src_flags: a partitioned table (its rows are its partitions'). */
#define SL_PG_PARTITIONED 0x1u
#define SL_PG_IDENTITY_FULL 0x2u   /* REPLICA IDENTITY FULL: the whole row names it */

/* Lists the tables whose "schema.table" matches one of include[] and none of
 * exclude[] (fnmatch globs; NULL-terminated arrays), with their columns and
 * keys from the catalog: the primary key, or else the replica identity's
 * unique index (REPLICA IDENTITY USING INDEX).  Ordinary and partitioned tables and
 * partitions are listed, except a partition whose ancestor is selected too
 * (its rows and changes are the ancestor's).  Each table's relid,
 * src_flags (SL_PG_PARTITIONED, SL_PG_IDENTITY_FULL), shape (its leaves) and no_row_identity are
 * set.  *out is a malloc'd array of *n tables that
 * the caller frees with sl_pg_tables_free(). */
int sl_pg_list_tables(PGconn *c, char *const *include, char *const *exclude,
		      struct sl_table ***out, int *n, char *err, size_t errlen);
void sl_pg_tables_free(struct sl_table **t, int n);
/* True if "ns.name" matches one of include[] and none of exclude[]. */
bool sl_pg_selects(char *const *include, char *const *exclude, const char *ns, const char *name);
/* The same selection; without describe, the tables have no columns (one
 * query in all: for noticing that the selection changed). */
int sl_pg_select_tables(PGconn *c, char *const *include, char *const *exclude, bool describe,
			struct sl_table ***out, int *n, char *err, size_t errlen);

/* Whether relid leaf is a leaf partition of the partitioned table root in
 * the catalog now: 1 or 0, with *shape set to root's shape (sl_table.shape:
 * the hash of its leaves' OIDs); or a failure (sl_pg_err). */
int sl_pg_leaf_of(PGconn *c, uint32_t root, uint32_t leaf, uint64_t *shape, char *err, size_t errlen);

/* The shape of partitioned table relid as the transaction's snapshot has
 * it (a backfill's: the partitions its rows come from); SL_OK or a failure. */
int sl_pg_snapshot_shape(PGconn *c, uint32_t relid, uint64_t *shape, char *err, size_t errlen);

/* Creates the publication for tables if missing, or adds tables missing from
 * an existing one.  SL_EPREREQ when the user may not. */
/* Whether publication pub (when it exists: *exists) can carry the n tables
 * as the stream needs them: it publishes inserts, updates and deletes, it
 * has publish_via_partition_root when a partitioned table is selected, and
 * it does not publish a selected partition through an ancestor.  SL_EPREREQ
 * with the statement to run when not; changes nothing. */
int sl_pg_publication_fit(PGconn *c, const char *pub, struct sl_table *const *tables, int n, bool *exists,
			  char *err, size_t errlen);
int sl_pg_ensure_publication(PGconn *c, const char *pub, struct sl_table *const *tables, int n,
			     char *err, size_t errlen);
/* missing[i] (n of them) receives whether publication pub does not publish
 * tables[i] (directly, through an ancestor, or FOR ALL TABLES / TABLES IN
 * SCHEMA); all are missing when pub does not exist (pg_privs.c). */
int sl_pg_publication_missing(PGconn *c, const char *pub, struct sl_table *const *tables, int n, bool *missing,
			      char *err, size_t errlen);
/* The words sluice writes as the comment of a publication it creates: what
 * tells sluice's own publications from the user's. */
#define SL_PG_PUB_COMMENT "created by sluice"
/* Whether the tables the stream followed are still in its publication
 * (pg_pubcheck.c): at start (!running) those of st->known_tables, while
 * running every one of the n.  A table that left the publication lost the
 * changes made since.  When sluice created the publication (or it is gone,
 * and sluice creates it again), readd[i] is set for such a table, which
 * sl_pg_ensure_publication adds again and the stream must backfill again
 * behind a marker; while running, that is SL_ERESTART.  In a publication
 * the user made, re-adding it would hide the gap: SL_EPREREQ names the
 * table, the ALTER PUBLICATION to run and the backfill to request. */
int sl_pg_publication_kept(PGconn *c, const struct sl_source_stream *st, struct sl_table *const *tables, int n,
			   bool running, bool *readd, char *err, size_t errlen);
/* SL_EPREREQ, naming the table and the publication, when publication pub
 * publishes one of the n tables with a column list or a row filter, which
 * the backfill cannot obey (pg_pubcheck.c). */
int sl_pg_publication_filters(PGconn *c, const char *pub, struct sl_table *const *tables, int n, char *err,
			      size_t errlen);

/* `sluice check`: whether the role can create the stream's publication
 * for tables, or add the ones it lacks (pg_privs.c).  Prints one line to
 * out (none when NULL: run asks the same); SL_EPREREQ with the statement the owner should run when it may not. */
int sl_pg_check_publication(PGconn *c, const struct sl_source_stream *st, struct sl_table *const *tables, int n,
			    FILE *out, char *err, size_t errlen);

struct sl_pg_slot_info {
	bool exists;
	bool active;
	bool logical;
	char plugin[64];
	char database[64];
	char wal_status[16];          /* reserved | extended | unreserved | lost | "" */
	uint64_t confirmed_flush_lsn; /* 0 if NULL */
	uint64_t restart_lsn;
	int64_t lag_bytes;            /* current WAL - confirmed_flush_lsn, -1 unknown */
	int64_t retained_bytes;       /* current WAL - restart_lsn, -1 unknown */
	int64_t safe_wal_size;        /* -1 if NULL */
	int active_pid;               /* the process reading it, 0 if none */
};
int sl_pg_slot_info(PGconn *c, const char *slot, struct sl_pg_slot_info *out, char *err, size_t errlen);
/* The server's clock_timestamp() in Unix microseconds: taken just before a
 * slot is created, it is the source time of that snapshot's backfill rows. */
int sl_pg_server_time_us(PGconn *c, int64_t *out, char *err, size_t errlen);
/* "{oid,oid,...}" of the n tables, for an oid[] parameter; -1 out of memory. */
int sl_pg_oid_array(struct sl_buf *b, struct sl_table *const *tables, int n);
/* Appends to grants ("; "-separated) the GRANT statements the role lacks
 * to read the n tables: USAGE on each schema, SELECT on each table. */
int sl_pg_read_grants(PGconn *c, struct sl_table *const *tables, int n, struct sl_buf *grants, char *err,
		      size_t errlen);
/* The server's wal_sender_timeout in milliseconds (0: disabled). */
int sl_pg_wal_sender_timeout_ms(PGconn *c, int64_t *out, char *err, size_t errlen);
/* pg_current_wal_lsn() */
int sl_pg_current_lsn(PGconn *c, uint64_t *out, char *err, size_t errlen);

/* The stream's slot against its checkpoint (pg_slot.c).  prepare(): makes
 * the plan (create a slot, adopt one, or resume), drops a slot left over
 * from an earlier request for a new one, and refuses, with the one command
 * that recovers (exit 4), a slot that cannot be resumed: missing, lost, or
 * confirmed beyond the checkpoint.  SL_EPREREQ for a slot that is not a
 * logical pgoutput slot of the stream's database. */
int sl_pg_slot_prepare(PGconn *c, const struct sl_source_config *cfg, const struct sl_source_stream *st,
		       const struct sl_source_resume *resume, struct sl_source_plan *plan, char *err, size_t errlen);
/* `sluice check`: the same judgement, changing nothing: a missing, lost,
 * foreign or (with no agent reading it) ahead slot gives the status and the
 * words prepare() gives.  *exists tells whether the slot exists. */
int sl_pg_slot_check(PGconn *c, const struct sl_source_config *cfg, const struct sl_source_stream *st,
		     const struct sl_source_resume *resume, bool *exists, char *err, size_t errlen);
/* The discard_position operation (sources/source.h). */
int sl_pg_discard_position(const struct sl_source_config *cfg, const struct sl_source_stream *st,
			   const struct sl_source_resume *resume, bool dry_run, bool *renew, FILE *out,
			   char *err, size_t errlen);

/* ---- chunks (pg_chunks.c) ---- */

/* The prefix of the logical decoding messages that carry backfill
 * watermarks (non-transactional, pg_logical_emit_message). */
#define SL_PG_WATERMARK_PREFIX "sluice.watermark"

/* A table's primary key columns in the key index's order: indexes into
 * t->cols. */
struct sl_pg_keys {
	uint32_t relid;
	int n;
	int *cols;
};
/* Reads the primary key's column order of t (a table with a key) from the
 * catalog on c; the table's own column order when the catalog no longer
 * agrees with t.  *out is freed with sl_pg_keys_free. */
int sl_pg_keys_lookup(PGconn *c, const struct sl_table *t, struct sl_pg_keys **out, char *err, size_t errlen);
void sl_pg_keys_free(struct sl_pg_keys *k);

/* Appends the select list of a query of t's rows with binary results: each
 * column quoted, or its text output where sl_pg_bin_decodes says it is not
 * read in binary (pg_binary.h). */
int sl_pg_append_select_list(struct sl_buf *b, PGconn *c, const struct sl_table *t);

/* snapshot_read_chunked over nconns connections that imported the
 * snapshot (conns[0] also plans). */
int sl_pg_read_chunked(PGconn *const *conns, int nconns, const struct sl_table *t, const struct sl_chunked_read *o,
		       sl_row_fn fn, void *payload, struct sl_pg_text_stats *st, uint64_t *rows,
		       char *err, size_t errlen);
/* read_chunk on connection c (idle, outside a transaction), with t's key
 * columns k. */
int sl_pg_read_chunk(PGconn *c, const struct sl_table *t, const struct sl_pg_keys *k, const char *after,
		     uint64_t limit, const struct sl_chunk_check *chk, sl_row_fn fn, void *payload,
		     struct sl_pg_text_stats *st, uint64_t *rows, char **last, char *err, size_t errlen);
/* pg_logical_emit_message(false, SL_PG_WATERMARK_PREFIX, text) on c;
 * *lsn receives the message's position. */
int sl_pg_emit_watermark(PGconn *c, const char *text, uint64_t *lsn, char *err, size_t errlen);

/* The replication stream. */
struct sl_pg_repl;

enum sl_pg_repl_kind {
	SL_PGR_TIMEOUT = 0,  /* nothing arrived within the timeout */
	SL_PGR_KEEPALIVE,    /* wal_end, reply_requested */
	SL_PGR_DATA,         /* pgo holds the decoded message */
	SL_PGR_END,          /* the server ended the stream */
};

struct sl_pg_repl_event {
	enum sl_pg_repl_kind kind;
	uint64_t wal_end;
	bool reply_requested;
	struct sl_pgo_event pgo;
};

/* Opens a replication connection with a pgoutput decoder (lookup may be NULL). */
struct sl_pg_repl *sl_pg_repl_open(const struct sl_source_config *cfg, sl_pgo_key_lookup lookup,
				   void *payload, char *err, size_t errlen);
void sl_pg_repl_close(struct sl_pg_repl *r);
struct sl_pgoutput *sl_pg_repl_decoder(struct sl_pg_repl *r);

/* Called about every SL_PG_TICK_MS while a slot is being created, with the
 * walsender's pid and how long it has waited; returns true to cancel. */
typedef bool (*sl_pg_slot_tick)(void *payload, int walsender_pid, int64_t waited_ms);
#define SL_PG_TICK_MS 200
#define SL_PG_CANCEL_WAIT_MS 5000   /* how long a cancelled command may take to end */

/* CREATE_REPLICATION_SLOT ... LOGICAL pgoutput EXPORT_SNAPSHOT, sent
 * asynchronously: it may wait for long (for every transaction open when it
 * started), so tick (may be NULL) is called between short polls and can
 * cancel it; a cancelled creation leaves no slot and returns SL_EFAIL.  The
 * exported snapshot (snapshot, at most 64 bytes) stays valid only until the
 * next command on this connection: import it elsewhere before
 * sl_pg_repl_start(). */
int sl_pg_repl_create_slot(struct sl_pg_repl *r, const char *slot, bool temporary, sl_pg_slot_tick tick,
			   void *payload, char *snapshot, size_t snaplen, uint64_t *consistent_lsn,
			   char *err, size_t errlen);

/* What a slot creation waits for (pg_wait.c): every 10 s (the first time
 * after 2 s) it logs the sessions that block the walsender, from
 * pg_stat_activity and pg_blocking_pids() on the catalog connection, and
 * reports them to the stream's hooks; the hooks' stop() cancels.  Use
 * sl_pg_slot_wait_tick as the tick of sl_pg_repl_create_slot() with the
 * struct as payload, and call sl_pg_slot_wait_end() after it. */
struct sl_pg_slot_wait {
	PGconn *meta;                    /* the catalog connection, idle meanwhile */
	const struct sl_source_stream *st;
	const char *slot;
	int64_t next_report_ms;          /* waited_ms of the next report */
	bool reported;
};
void sl_pg_slot_wait_init(struct sl_pg_slot_wait *w, PGconn *meta, const struct sl_source_stream *st,
			  const char *slot);
bool sl_pg_slot_wait_tick(void *payload, int walsender_pid, int64_t waited_ms);
void sl_pg_slot_wait_end(struct sl_pg_slot_wait *w);

/* What the first chunk of a table in a run waits for (pg_wait.c): the
 * transactions that were writing the table or a partition of it at its
 * first try, which may hold changes from before the table entered the
 * publication that the stream never sends.  Zeroed before use. */
struct sl_pg_writers {
	char *vx;                        /* text[] literal of their virtual transaction ids (NULL: none) */
	bool begun, done, reported;
	int64_t since_ms, next_check_ms, next_report_ms;
};
/* SL_OK once none of them holds a lock that writes t (at once when none
 * did); SL_EAGAIN while one does: logged after 2 s and then every 10 s,
 * reported to st's hooks; or a failure (err). */
int sl_pg_writers_wait(struct sl_pg_writers *w, PGconn *c, const struct sl_source_stream *st,
		       const struct sl_table *t, char *err, size_t errlen);
/* Frees w's list, and clears a wait it reported. */
void sl_pg_writers_end(struct sl_pg_writers *w, const struct sl_source_stream *st);

/* START_REPLICATION with proto_version 1, the publication and messages on. */
int sl_pg_repl_start(struct sl_pg_repl *r, const char *slot, const char *publication,
		     uint64_t start_lsn, char *err, size_t errlen);

/* Sets the silence limit (0: none, the default): sl_pg_repl_next() fails
 * when it waits and nothing at all (no data, no keepalive) arrived for
 * silence_ms, and status updates ask for a reply once a third of it passed
 * without a message. */
void sl_pg_repl_set_timeout(struct sl_pg_repl *r, int64_t silence_ms);

/* Waits up to timeout_ms for the next message and decodes it. */
int sl_pg_repl_next(struct sl_pg_repl *r, int timeout_ms, struct sl_pg_repl_event *ev,
		    char *err, size_t errlen);

/* Sends a standby status update: written up to write_lsn, durable (flushed
 * and applied) up to flush_lsn. */
int sl_pg_repl_send_status(struct sl_pg_repl *r, uint64_t write_lsn, uint64_t flush_lsn,
			   bool reply_requested, char *err, size_t errlen);

/* ---- recordings of the stream, for the replay tests ----
 *
 * A recording is the 8 bytes SL_PG_RECORDING_MAGIC, then every CopyData
 * frame the server sent ('w' XLogData and 'k' keepalive, headers included),
 * each as a big-endian u32 length and the frame's bytes.  The recorder
 * (tests/tools/pg_record.c) and the replay tests use these two calls only. */
#define SL_PG_RECORDING_MAGIC "SLPGREC1"

/* From now on, appends every frame sl_pg_repl_next() reads to out (not
 * owned; the caller closes it), after writing the magic. */
int sl_pg_repl_record(struct sl_pg_repl *r, FILE *out, char *err, size_t errlen);

/* Tests only: a stream that replays the recording at path instead of
 * connecting.  sl_pg_repl_start() then starts nothing, sl_pg_repl_next()
 * parses and decodes the recorded frames in order, exactly as it does a
 * server's, without waiting, and reports SL_PGR_END after the last one;
 * status updates go nowhere.  NULL with err when the file is unreadable or
 * not a recording. */
struct sl_pg_repl *sl_pg_repl_open_replay(const char *path, sl_pgo_key_lookup lookup, void *payload,
					  char *err, size_t errlen);

/* Tests only (pg_source.c): a source context for stream st that streams the
 * recording at path (sl_pg_repl_open_replay) through sl_pg_source_ops'
 * start, next and ack, with no server at all.  tables (borrowed, alive until
 * close) stand for the catalog: their key columns are the primary keys the
 * decoder's key lookup reports.  Free it with sl_pg_source_ops.close. */
int sl_pg_source_open_replay(void **ctx, const struct sl_source_stream *st, const char *path,
			     struct sl_table **tables, int ntables, char *err, size_t errlen);

/* Column identities (pg_rewrite.c): what a Relation message cannot tell.
 * sl_pg_idents_read sets src_columns of each of the n tables (one query).
 * sl_pg_columns_changed is not 0, with why, when the rows of a table whose
 * identities were was read differently now without a change record:
 * SL_COLS_REWRITTEN (the table rewritten by a type change or a volatile
 * default, a column dropped and added again; not a type change that only
 * widens, which keeps every value), or SL_COLS_MISSING when the
 * only such change is columns added with a constant default (their missing
 * values); 0 when nothing changed, or either text is NULL or not such a
 * text.
 * sl_pg_missing_read sets the missing value (sl_column.missing) of each
 * column of the n tables that has one (atthasmissing), by its name, and
 * finishes the tables again (their schema keys cover it). */
int sl_pg_idents_read(PGconn *c, struct sl_table **tabs, int n, char *err, size_t errlen);
int sl_pg_columns_changed(const char *was, const char *now, char *why, size_t whylen);
int sl_pg_missing_read(PGconn *c, struct sl_table **tabs, int n, char *err, size_t errlen);
/* Keeps in version t the missing value that prev (the version before it)
 * had for each column that the catalog no longer says (a table rewrite
 * such as VACUUM FULL clears attmissingval, but the rows of files written
 * before the column was added still read it), when the column's number is
 * the same in was and now (the column identities of prev and t), so that a
 * column dropped and added again keeps nothing.  Returns 0, or -1 out of
 * memory. */
int sl_pg_missing_keep(struct sl_table *t, const struct sl_table *prev, const char *was, const char *now);

#endif
