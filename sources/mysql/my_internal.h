/*
 * sources/mysql/my_internal.h: the MySQL / MariaDB source's own parts,
 * shared by the files of this folder only (the rest of sluice sees the
 * source through sources/source.h and sl_my_source_ops):
 *
 *   my_conn.c      connections, errors, queries, quoting, the server's
 *                  settings and privileges (check and run share them)
 *   my_catalog.c   the selected tables and their columns from
 *                  information_schema, as table versions, and the match of
 *                  a binlog TABLE_MAP against them
 *   my_ddl.c       which tables a DDL statement of the binlog touches
 *   my_dump.c      the binlog dump connection: COM_REGISTER_SLAVE,
 *                  COM_BINLOG_DUMP(_GTID), events with a timeout; and the
 *                  recordings of the replay tests
 *   my_backfill.c  snapshots and reading them as typed values
 *   my_source.c    the operations table, the context's life, snapshots
 *   my_pos.c       positions: order, CSN, text, metadata values
 *   my_tables.c    the stream's tables; check, probe, discard_position
 *   my_server_pos.c  a position against the server: lost, prepare
 *   my_stream.c    start, the event loop (next), groups, XA, ack
 *   my_maps.c      TABLE_MAP events: covered tables, new versions
 *   my_query.c     QUERY events: DDL, statements
 *   my_watermark.c backfill while streaming: watermarks, chunks
 *
 * Positions (struct sl_position): w[0] is the binlog file's sequence number
 * (the digits after its last '.'), w[1] the offset in it, and text holds
 * the file name, then a tab and a GTID when there is one.  A resume
 * position (the end of a transaction, a keepalive, a snapshot) carries the
 * GTID *state* there (MariaDB: the domain-server-seq list; MySQL: the
 * executed GTID set); a transaction's position (what its records carry)
 * carries that transaction's own GTID.
 *
 * All functions return SL_OK, or a negative enum sl_status with a message
 * in err: SL_EPREREQ for what an operator must fix (settings, privileges,
 * a failed login), SL_ELOST for a lost position, SL_ECONFIG for a
 * configuration mistake found at the server, SL_EDATA for data that cannot
 * be converted, SL_EFAIL otherwise.  Messages never contain secrets.
 */
#ifndef SLUICE_SOURCES_MYSQL_MY_INTERNAL_H
#define SLUICE_SOURCES_MYSQL_MY_INTERNAL_H

#include <mysql.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "common/buf.h"
#include "common/keytab.h"
#include "schema/schema.h"
#include "sources/mysql/binlog_event.h"
#include "sources/mysql/gtid.h"
#include "sources/mysql/my_source.h"
#include "sources/mysql/row_image.h"
#include "sources/source.h"

extern const struct sl_source_desc sl_my_desc;

#define SL_MY_NKEYS 12
extern const struct sl_keydesc sl_my_keys[SL_MY_NKEYS];


/* ---- positions (my_pos.c) ---- */

/* A position at offset in file with gtid ("" or NULL: none).  The GTID is
 * left out, with *dropped set (may be NULL), when it does not fit. */
struct sl_position sl_my_pos(const char *file, uint64_t offset, const char *gtid, bool *dropped);
/* The file name of p into out (SL_POS_TEXT_MAX bytes). */
void sl_my_pos_file(const struct sl_position *p, char *out);
/* The GTID part of p ("" when none); points into p. */
const char *sl_my_pos_gtid(const struct sl_position *p);
/* The sequence number of a binlog file name (the digits after its last
 * '.'); -1 when it has none. */
int64_t sl_my_file_seq(const char *file, size_t len);

/* ---- connections and queries (my_conn.c) ---- */

/* What the server is. */
struct sl_my_server {
	bool mariadb;
	unsigned long version;      /* mysql_get_server_version(): 101106 */
	char version_text[64];
	uint32_t server_id;         /* @@server_id */
};

/* Opens a connection with the profile's host, port, user, password and
 * TLS settings, connect_timeout and, when read_timeout_s > 0, that read
 * timeout.  The session reads everything as stored: character_set_results
 * binary (no conversion: text is converted by the source, from each
 * column's charset, exactly as the binlog's), time_zone +00:00 (TIMESTAMP
 * values in UTC), sql_mode without ANSI_QUOTES.  NULL with err: a failed
 * login or a refused connection for lack of privileges is SL_EPREREQ
 * (sl_my_err_status()). */
MYSQL *sl_my_connect(const struct sl_source_config *cfg, int read_timeout_s, struct sl_my_server *srv,
		     char *err, size_t errlen);
int sl_my_err_status(void);

/* Copies the connection's last error into err as "what: message (errno
 * N)" and classifies it: SL_EPREREQ for a failed login and missing
 * privileges (with a hint), SL_ELOST for error 1236 (the caller adds the
 * recovery), SL_EFAIL otherwise. */
int sl_my_err(char *err, size_t errlen, const char *what, MYSQL *c);
/* The same for a statement handle. */
int sl_my_stmt_err(char *err, size_t errlen, const char *what, MYSQL_STMT *st);

/* Runs a statement that returns no rows. */
int sl_my_exec(MYSQL *c, const char *sql, char *err, size_t errlen);
/* Runs a query and returns its whole result (*res, freed with
 * mysql_free_result); an empty result set is not an error. */
int sl_my_query(MYSQL *c, const char *sql, MYSQL_RES **res, char *err, size_t errlen);
/* sl_my_query of the text built in q, which it frees (out of memory
 * building it: SL_EFAIL). */
int sl_my_query_buf(MYSQL *c, struct sl_buf *q, MYSQL_RES **res, char *err, size_t errlen);
/* The first column of the first row as text into out ("" for NULL); *found
 * tells whether there was a row (may be NULL). */
int sl_my_query_value(MYSQL *c, const char *sql, char *out, size_t outlen, bool *found, char *err,
		      size_t errlen);

/* Appends name as a quoted identifier (backticks doubled), or `db`.`table`. */
int sl_my_append_ident(struct sl_buf *b, const char *name);
int sl_my_append_qualified(struct sl_buf *b, const char *db, const char *table);
/* Appends s as a quoted string literal ('' and \\ doubled). */
int sl_my_append_literal(struct sl_buf *b, const char *s);

/* Whether the user's SELECT privilege covers every table of database db, or
 * of every database when db is NULL: a global grant, or a grant on the
 * database.  information_schema shows a user only the tables it has some
 * privilege on, so without such a grant the tables it may not read are
 * invisible, not missing. */
int sl_my_select_covers(MYSQL *c, const char *db, bool *covers, char *err, size_t errlen);
/* The settings the source needs (log_bin, binlog_format=ROW,
 * binlog_row_image=FULL, a server_id other than the source's own, the
 * privileges REPLICATION SLAVE, BINLOG MONITOR / REPLICATION CLIENT and
 * SELECT): SL_EPREREQ with what to change; check and run share the words.
 * out (may be NULL) gets one line per check, and warnings (short binlog
 * retention, binlog_row_metadata not FULL). */
int sl_my_check_prereqs(MYSQL *c, const struct sl_my_server *srv, const struct sl_source_config *cfg,
			const struct sl_source_stream *st, FILE *out, char *err, size_t errlen);

/* One line of SHOW BINARY LOGS. */
struct sl_my_binlog_file {
	char name[SL_BL_FILE_MAX + 1];
	uint64_t size;
};
/* SHOW BINARY LOGS: *out (malloc'd, *n entries, oldest first). */
int sl_my_binlogs(MYSQL *c, struct sl_my_binlog_file **out, int *n, char *err, size_t errlen);
/* The server's head: SHOW MASTER STATUS (file, position) and its GTID
 * state (MariaDB @@gtid_binlog_pos, MySQL @@gtid_executed; "" when none). */
int sl_my_head(MYSQL *c, const struct sl_my_server *srv, struct sl_position *out, char *err, size_t errlen);
/* The binlog retention in seconds (binlog_expire_logs_seconds, or
 * expire_logs_days); 0: never expires. */
int sl_my_retention_s(MYSQL *c, int64_t *out, char *err, size_t errlen);

/* ---- the catalog (my_catalog.c) ---- */

/* One column as the catalog (or a table map) describes it: enough to build
 * the output column and to decode its binlog values and its backfill
 * values the same way. */
struct sl_my_col {
	char *name;
	struct sl_mysql_column mc;      /* type, real_type, decoded metadata, is_unsigned, charset,
					 * json, values (pointing into vstore), is_key */
	const struct sl_mysql_charset *values_cs;   /* the charset of the ENUM/SET strings in values */
	struct sl_mysql_str *vstore;    /* ENUM / SET strings (owned, each NUL-terminated) */
	uint32_t nvstore;
	bool generated;                 /* a generated column */
};

/* A selected table: its current version and its columns' descriptions. */
struct sl_my_table {
	char *db, *name;
	bool versioned;                 /* MariaDB WITH SYSTEM VERSIONING */
	int ncols;
	struct sl_my_col *cols;
	/* MariaDB: the long unique keys (UNIQUE on a BLOB/TEXT, a long VARCHAR,
	 * or USING HASH), each with a hidden DB_ROW_HASH_n column that a table
	 * map carries after cols and the catalog does not list */
	int nhash;
	struct sl_table *version;       /* built from cols (owned by the source until retired) */
	bool gone;                      /* streaming: dropped or renamed away, its rows ended by a
					 * marker; a table created under its name clears it */
	uint64_t start_layout;          /* the layout the catalog gave at the run's start (my_tables) */
	bool deferred;                  /* a DDL read below the run's start changed it: described by
					 * its next map, or from the catalog once the stream passes the
					 * start (my_hand_deferred) */
};

void sl_my_table_free(struct sl_my_table *t);
/* The fingerprint of t's columns as a binlog without names lays them out
 * (sl_table.layout): names, order, types and metadata, signedness,
 * collations, ENUM/SET strings, key.  Never 0. */
uint64_t sl_my_table_layout(const struct sl_my_table *t);
/* Builds t->version from t's columns (src = sl_my_desc). */
int sl_my_table_build(struct sl_my_table *t, char *err, size_t errlen);
/* A copy of a table version (for the caller of tables()). */
struct sl_table *sl_my_table_copy(const struct sl_table *t);

/* True if "db.name" matches one of include[] and none of exclude[]. */
bool sl_my_selects(char *const *include, char *const *exclude, const char *db, const char *name);
/* The selected base tables with their columns and primary keys (with
 * describe; without, names only).  only_db/only_table (may be NULL)
 * restrict the query to one table.  *out is a malloc'd array of *n. */
int sl_my_list_tables(MYSQL *c, bool mariadb, char *const *include, char *const *exclude, const char *only_db,
		      const char *only_table, bool describe, struct sl_my_table **out, int *n, char *err,
		      size_t errlen);
void sl_my_tables_free(struct sl_my_table *t, int n);
/* Whether table db.name exists (*exists), asked by opening it (SELECT ...
 * LIMIT 0), not of the catalog.  information_schema lists a database's
 * tables by their files, and a copying ALTER TABLE renames the table's
 * file away for a moment before it renames the new one in, so a listing
 * can miss a table that exists; opening it by name waits on the metadata
 * lock the ALTER holds then.  A table the server says is not there (or
 * that this user may not read) does not exist.  SL_OK or a failure. */
int sl_my_table_exists(MYSQL *c, const char *db, const char *name, bool *exists, char *err, size_t errlen);
/* sl_my_list_tables' arguments, and the tables the listing must have
 * unless they are gone. */
struct sl_my_list_how {
	bool mariadb;
	char *const *include, *const *exclude;
	const char *only_db, *only_table;
	bool describe;
	const struct sl_my_table *expect;   /* tables known to exist before (borrowed), nexpect */
	int nexpect;
	char *const *expect_names;          /* the same as "db.table", NULL-terminated, or NULL */
};
/* sl_my_list_tables, with the listing confirmed: an expected table that
 * the filters select and the listing lacks is opened by name
 * (sl_my_table_exists), and when it exists the listing is taken again;
 * so is a listing with a table without columns (describe).  A table is
 * left out only when it is gone: DROP and RENAME statements in the binlog
 * say so, a listing in the middle of a copying ALTER TABLE does not.
 * Returns as sl_my_list_tables, or SL_EFAIL when ten listings in a row
 * missed a table. */
int sl_my_list_confirmed(MYSQL *c, const struct sl_my_list_how *how, struct sl_my_table **out, int *n, char *err,
			 size_t errlen);

/* How a table map compares with a table's description. */
enum sl_my_match {
	SL_MY_MATCH = 0,     /* the same columns: decode with the table's version */
	SL_MY_PREFIX,        /* the map has fewer columns, and they are the table's first ones
			      * (a column was added since, and the catalog is ahead) */
	SL_MY_DIFFERENT,     /* the map does not describe the table */
};
enum sl_my_match sl_my_map_match(const struct sl_binlog_table_map *tm, const struct sl_my_table *t, char *why,
				 size_t whylen);
/* Completes a parsed table map from the table's description where the
 * binlog's metadata lacks it (names, signedness, charsets, ENUM and SET
 * strings, MariaDB's JSON, keys), for decoding; and sets its nhidden to the
 * table's hidden hash columns the map carries (sl_my_map_hidden). */
void sl_my_map_complete(struct sl_binlog_table_map *tm, const struct sl_my_table *t);
/* How many of tm's last columns are t's hidden long-unique hash columns:
 * t->nhash when the map has exactly that many columns beyond t's, each a
 * nullable BIGINT (UNSIGNED when the map says) and, when the map names
 * them, named DB_ROW_HASH_<n> and no column of t's; else 0. */
uint32_t sl_my_map_hidden(const struct sl_binlog_table_map *tm, const struct sl_my_table *t);
/* A table description from a table map with FULL metadata (names, keys),
 * with what the map lacks (MariaDB JSON) taken from like (may be NULL). */
int sl_my_table_from_map(struct sl_my_table *out, const struct sl_binlog_table_map *tm,
			 const struct sl_my_table *like, char *err, size_t errlen);

/* ---- DDL statements (my_ddl.c) ---- */

enum sl_my_stmt {
	SL_MY_STMT_OTHER = 0,     /* nothing the source must act on (GRANT, CREATE USER, ...) */
	SL_MY_STMT_TX,            /* BEGIN, COMMIT, ROLLBACK, SAVEPOINT, XA ... */
	SL_MY_STMT_TRUNCATE,      /* TRUNCATE [TABLE] t */
	SL_MY_STMT_TABLE_DDL,     /* CREATE / ALTER / DROP / RENAME TABLE, CREATE / DROP INDEX */
	SL_MY_STMT_DB_DDL,        /* CREATE / DROP / ALTER DATABASE */
	SL_MY_STMT_UNKNOWN_DDL,   /* a statement the source cannot read: every table is checked */
	SL_MY_STMT_DML,           /* INSERT / UPDATE / DELETE as a statement (not ROW format): the
				   * table it names, when it could be read: SL_MY_TOUCHES when it is
				   * the only one it changes, SL_MY_BINDS when the first of several */
};

/* What a DDL statement does to a name: changes the table it names (ALTER,
 * CREATE, an index), ends it (DROP, the old name of a RENAME), or gives it
 * rows the binlog has no row events for (the new name of a RENAME, which
 * names a table that existed before under another name; a partition
 * truncated, dropped or exchanged). */
enum sl_my_role { SL_MY_TOUCHES = 0, SL_MY_ENDS, SL_MY_BINDS };

/* How ALTER TABLE gave the table's existing rows values without row
 * events: ADD COLUMN with a DEFAULT other than NULL, a literal or not
 * (VOLATILE: an expression, or a function such as CURRENT_TIMESTAMP), or
 * NOT NULL, whose implicit default is the type's zero; MODIFY or CHANGE
 * to NOT NULL, which turns the column's NULLs into that zero; ADD of a
 * TIMESTAMP without NULL or DEFAULT, which is NOT NULL with a default
 * (CURRENT_TIMESTAMP for the table's first) when the server's
 * explicit_defaults_for_timestamp is OFF. */
enum sl_my_fill { SL_MY_FILL_NONE = 0, SL_MY_FILL_DEFAULT, SL_MY_FILL_VOLATILE, SL_MY_FILL_NOT_NULL,
		  SL_MY_FILL_TIMESTAMP,
		  SL_MY_FILL_RENAMED /* RENAME COLUMN a TO b, CHANGE a b: the rows hold a's values under b */ };

/* fill: see enum sl_my_fill; column is the first such column. */
struct sl_my_name {
	char db[256];
	char table[256];
	enum sl_my_role role;
	enum sl_my_fill fill;
	char column[256];
};

/* Classifies a statement of a QUERY event and lists the tables it names
 * (up to max, qualified with default_db when unqualified). */
enum sl_my_stmt sl_my_ddl_parse(const char *sql, size_t len, const char *default_db, struct sl_my_name *names,
				int max, int *n);

/* ---- the dump connection (my_dump.c) ---- */

struct sl_my_dump;

struct sl_my_dump_opts {
	uint32_t server_id;
	const char *report_host;     /* what SHOW SLAVE HOSTS shows for it */
	const char *file;            /* start file ("" with a GTID start) */
	uint64_t offset;
	const char *gtid;            /* non-empty: start after this GTID state */
	int64_t heartbeat_ms;        /* 0: none */
	bool non_block;              /* the server ends the stream at its head (EOF) */
};

/* Opens the dump connection (a connection of its own, registered as a
 * replica with opts' server_id) and starts the dump.  err on failure: the
 * server's refusal, classified by sl_my_err (1236: SL_ELOST). */
int sl_my_dump_open(struct sl_my_dump **out, const struct sl_source_config *cfg, const struct sl_my_server *srv,
		    const struct sl_my_dump_opts *o, int64_t silence_ms, char *err, size_t errlen);
void sl_my_dump_close(struct sl_my_dump *d);

enum sl_my_read { SL_MY_TIMEOUT = 0, SL_MY_EVENT, SL_MY_EOF };
/* Waits up to timeout_ms for the next event: *ev and *len (the event, after
 * the OK byte) stay valid until the next call.  Fails when the server sent
 * nothing at all for the silence limit (a dead connection), with the
 * server's error (1236: SL_ELOST; another replica with the same server_id:
 * SL_ECONFIG). */
int sl_my_dump_read(struct sl_my_dump *d, int timeout_ms, enum sl_my_read *what, const unsigned char **ev,
		    size_t *len, char *err, size_t errlen);
/* The checksum algorithm of the events the server sends before the first
 * FORMAT_DESCRIPTION (@master_binlog_checksum as the session agreed it). */
enum sl_bl_checksum sl_my_dump_checksum(const struct sl_my_dump *d);
/* The server's thread id of the dump connection (0 for a replay). */
unsigned long sl_my_dump_thread(const struct sl_my_dump *d);

/* Recordings for the replay tests: the 8 bytes SL_MY_RECORDING_MAGIC, then
 * every event read (each as a big-endian u32 length and the event's bytes,
 * checksum included). */
#define SL_MY_RECORDING_MAGIC "SLMYREC1"
int sl_my_dump_record(struct sl_my_dump *d, FILE *out, char *err, size_t errlen);
/* Tests only: a dump that replays a recording; SL_MY_EOF after the last event. */
int sl_my_dump_open_replay(struct sl_my_dump **out, const char *path, char *err, size_t errlen);

/* ---- backfill (my_backfill.c) ---- */

struct sl_my_snap;
/* Whether snapshots take their position under FLUSH TABLES WITH READ LOCK
 * (which needs RELOAD): on MySQL, or with SLUICE_MYSQL_SNAPSHOT=lock. */
bool sl_my_snapshot_locks(const struct sl_my_server *srv);
/* Opens a snapshot on a connection of its own: START TRANSACTION WITH
 * CONSISTENT SNAPSHOT and the binlog position it sees (MariaDB's
 * binlog_snapshot_file/position, no lock), or under FLUSH TABLES WITH READ
 * LOCK (MySQL, or when SLUICE_MYSQL_SNAPSHOT=lock), released at once. */
int sl_my_snapshot_open(struct sl_my_snap **out, const struct sl_source_config *cfg,
			const struct sl_source_stream *st, const struct sl_my_server *srv,
			struct sl_snapshot_info *info, char *err, size_t errlen);
/* The parts of sl_my_snapshot_open, for a connection that takes one
 * snapshot after another (backfill while streaming): a connection of its
 * own (closed with sl_my_snapshot_close); a snapshot on it with its binlog
 * position (quiet: no log line, and no GTID state in info->pos on
 * MariaDB); the snapshot's end. */
int sl_my_snap_connect(struct sl_my_snap **out, const struct sl_source_config *cfg, char *err, size_t errlen);
int sl_my_snap_begin(struct sl_my_snap *s, const struct sl_source_config *cfg, const struct sl_source_stream *st,
		     const struct sl_my_server *srv, bool quiet, struct sl_snapshot_info *info, char *err, size_t errlen);
int sl_my_snap_end(struct sl_my_snap *s, char *err, size_t errlen);
void sl_my_snap_rollback(struct sl_my_snap *s);
/* Reads every row of t (described by mt) in the snapshot, as typed values
 * equal to what the binlog decoder gives for the same values. */
int sl_my_snapshot_read(struct sl_my_snap *s, const struct sl_my_table *mt, const struct sl_table *t, sl_row_fn fn,
			void *payload, uint64_t *rows, struct sl_mysql_row_stats *stats, char *err, size_t errlen);
/* How sl_my_snapshot_read_where reads: tail (NULL: none) follows "SELECT
 * cols FROM db.t" (" WHERE ... ORDER BY ... LIMIT n"); with key, the key
 * text of the last row read (keys: the nkeys key columns, at most 64, in
 * the key's order; see my_backfill.c for the format).  SL_ESTALE (nothing
 * read, the server's message in err) when a column of mt, or the table,
 * no longer exists: it was renamed or dropped after mt was read. */
struct sl_my_read_how {
	const char *tail;
	const int *keys;
	int nkeys;
	struct sl_buf *key;
};
int sl_my_snapshot_read_where(struct sl_my_snap *s, const struct sl_my_table *mt, const struct sl_table *t,
			      const struct sl_my_read_how *how, sl_row_fn fn, void *payload, uint64_t *rows,
			      struct sl_mysql_row_stats *stats, char *err, size_t errlen);
void sl_my_snapshot_close(struct sl_my_snap *s);

/* The key columns of t (indexes into t->cols) in the order pk_order names
 * them (the primary key index's order, npk names), or in the table's
 * order when those are not t's key columns; out has room for t->ncols.
 * Returns their count. */
int sl_my_key_columns(const struct sl_table *t, const char *const *pk_order, int npk, int *out);
/* Appends the token of one key column's value to a key text: b as fetched
 * (bound as sl_my_snapshot_read binds it), en the column's "+ 0" (ENUM and
 * SET: the index or bitmap, bound as an unsigned LONGLONG; else NULL). */
void sl_my_key_token(struct sl_buf *out, const struct sl_my_col *col, const MYSQL_BIND *b, const MYSQL_BIND *en);
/* Appends the condition "key after the key text after" for the key
 * columns keys (of mt, nkeys) as SQL: (k1 > v1) OR (k1 = v1 AND k2 > v2)
 * OR ...  -1 when after is not a key text of those columns (or out of
 * memory). */
int sl_my_key_after(struct sl_buf *b, const struct sl_my_table *mt, const int *keys, int nkeys, const char *after);

/* Converts one value of the binary protocol (bind) for column mc into v,
 * by the binlog decoder's rules (exposed for tests).  scratch receives
 * converted text.  Returns 0, SL_MYSQL_EVALUE or -1. */
int sl_my_bind_value(const struct sl_my_col *col, const struct sl_column *out, const MYSQL_BIND *bind,
		     struct sl_buf *scratch, struct sl_mysql_conv *conv, struct sl_mysql_row_stats *stats,
		     const char *db, const char *table, struct sl_value *v, char *err, size_t errlen);

/* Whether every column of mt has an exact text form, so that
 * sl_my_snapshot_read reads the table with the text protocol (integers,
 * YEAR, DECIMAL, DATE, DATETIME, TIMESTAMP, strings, BLOBs, ENUM, SET,
 * JSON; not FLOAT, DOUBLE, TIME, BIT, GEOMETRY). */
bool sl_my_text_ok(const struct sl_my_table *mt);
/* Converts one value of the text protocol (p, len bytes; p NULL for SQL
 * NULL) for column col into v, equal to what sl_my_bind_value gives for the
 * same stored value (exposed for tests).  v may point into p, or hold an
 * offset into scratch (returns 1: the caller makes it a pointer once the
 * row is converted).  Returns 0, 1, SL_MYSQL_EVALUE or -1. */
int sl_my_text_value(const struct sl_my_col *col, const struct sl_column *out, const char *p, size_t len,
		     struct sl_buf *scratch, struct sl_mysql_conv *conv, struct sl_mysql_row_stats *stats,
		     const char *db, const char *table, struct sl_value *v, char *err, size_t errlen);

/* ---- the source's context (my_source.c) and its operations ---- */

#define MAX_MAPS 64                 /* table maps kept by table id */

struct tmap {
	uint64_t table_id;
	bool used;
	struct sl_binlog_table_map tm;
	struct sl_my_table *t;          /* the selected table, or NULL: skip its rows */
	unsigned char *raw;             /* the event body it was parsed from */
	size_t rawlen, araw;
	bool wm;                        /* the watermark table: its rows are watermarks */
	bool recheck;                   /* skipped for now (its backfill holds its rows): decide again */
	bool covered;                   /* with t: its backfill holds its rows, which are decoded only
					 * to number the changes after them (my_stream.c, covered_row) */
	struct sl_my_table *shadow;     /* owned: t, for covered rows laid out otherwise than the
					 * table's version (described from the map) */
};
/* Frees m's shadow (m->t pointed to it: NULL then). */
void my_map_drop_shadow(struct tmap *m);

/* A prepared XA transaction, held until XA COMMIT. */
struct xa_held {
	char xid[300];                  /* canonical text of the xid */
	FILE *events;                   /* its events: u32 length + bytes each */
	struct sl_position start;       /* resume position before its group */
	struct xa_held *next;
};

struct my_src {
	const struct sl_source_config *cfg;
	const struct sl_source_stream *st;
	MYSQL *meta;
	struct sl_my_server srv;
	struct sl_my_table *tables;     /* the selected tables (owned) */
	int ntables;
	bool replay;
	int64_t heartbeat_ms, silence_ms;
	bool cascades_said;             /* warn_cascades ran (once per source context) */
	char report_host[64];
	struct sl_mysql_row_stats bf_stats;

	/* streaming */
	struct sl_my_dump *dump;
	struct sl_binlog_reader rd;
	struct sl_binlog_event ev;
	char file[SL_BL_FILE_MAX + 1];  /* the current binlog file */
	uint64_t pos;                   /* the end of the last event read in it */
	struct sl_position floor;       /* where streaming started: end positions never go below */
	char done_file[SL_BL_FILE_MAX + 1];  /* "" or the done point of the start position */
	uint64_t done_off;
	bool gtid_mode;                 /* positions carry the GTID state */
	struct sl_mariadb_gtid_pos mstate;
	struct sl_mysql_gtid_set sstate;
	char state_text[SL_POS_TEXT_MAX];
	bool warned_gtid_dropped;

	/* the open event group */
	bool in_tx, standalone, begun, skip_tx, xa_prepare, truncating;
	bool ddl_end;           /* a DDL statement's event was returned: its group ends at the next call */
	uint64_t tx_start;              /* offset of its first event */
	char tx_gtid[128];
	bool tx_has_mgtid, tx_has_sgtid;
	struct sl_mariadb_gtid tx_mgtid;
	unsigned char tx_sid[16];
	uint64_t tx_gno;
	int64_t tx_ts_us;
	uint64_t tx_id;
	uint32_t seq;
	struct sl_position tx_pos;
	char tx_xid[300];

	/* table maps and rows */
	struct tmap maps[MAX_MAPS];
	struct tmap *rows_map;
	struct sl_binlog_rows rows;
	bool rows_pending;
	struct sl_mysql_rowdec dec;
	struct sl_value *before, *after;
	int avals;
	struct sl_change pend[2];
	int npend, ipend;
	struct sl_my_name trunc[16];
	int ntrunc, itrunc;

	/* XA */
	struct xa_held *held;           /* prepared, waiting for XA COMMIT */
	FILE *xa_out;                   /* the events of the XA group being prepared */
	FILE *xa_in;                    /* the held events being replayed at XA COMMIT */
	unsigned char *xbuf;
	size_t axbuf;

	/* keepalives */
	int64_t last_keepalive_ms;
	bool reply_wanted;
	struct sl_position last_reported;
	bool has_reported;
	uint64_t skipped;               /* changes of tables the stream does not select */
	uint64_t schema_events;

	/* backfill while streaming */
	char wm_db[256], wm_table[256]; /* the watermark table ("" none: watermark_table not valid) */
	MYSQL *wmc;                     /* emit_watermark's connection */
	struct sl_my_snap *chunk;       /* read_chunk's connection */
	struct sl_buf wm_text;          /* the watermark of the open group, then the one returned */
	struct sl_buf wm_emitted;       /* the last watermark emit_watermark wrote */
	bool wm_pending;                /* the open group wrote a watermark */
	bool wm_ready;                  /* a watermark to return at the next call */
	struct sl_position wm_pos;
	bool has_returned;              /* returned: a transaction was returned (COMMIT) */
	struct sl_position returned;    /* (file number, offset) where the last one returned ends */
	struct pk_order *pks;           /* primary key orders read for read_chunk */
	int npks;

	/* what the tables' backfills hold (sl_source_hooks.covered), asked once a run */
	struct cover *covers;
	int ncovers;
	bool names_logged;              /* binlog_row_metadata = FULL: the binlog names the columns */
	bool start_set;                 /* start_at is known */
	struct sl_position start_at;    /* the server's head just after my_tables read the catalog */
	int ndeferred;                  /* tables with deferred set */
	struct sl_table *orphan;        /* a version retired when the stream ended (freed at close) */
	char why[600];                  /* a SCHEMA event's rebackfill */
};

/* How far a followed table's backfill holds its changes.  With
 * SL_COVER_FIRST_WATERMARK, up to the low watermark of the table's first
 * chunk of this run (first; NULL until read_chunk reads one): watermarks of
 * an earlier run, or of another table's backfill that runs first, come
 * before the chunks that hold the table's changes. */
struct cover {
	char *db, *name;
	enum sl_cover kind;
	struct sl_position until;
	char *first;                    /* the text of that low watermark (owned) */
	bool passed;                    /* the stream read it */
};

/* The primary key's column order of a table, read for read_chunk. */
struct pk_order {
	char *db, *name;
	char **cols;
	int n;
};

/* Shared by the files of the source's operations (contracts at their
 * definitions). */

/* my_pos.c */
bool my_pos_done(const struct sl_position *p, char *file, size_t filelen, uint64_t *off);
void my_pos_set_done(struct sl_position *p, const char *file, uint64_t off);
int my_place_compare(const struct sl_position *a, const struct sl_position *b);
int my_pos_compare(const struct sl_position *a, const struct sl_position *b);
uint64_t my_pos_csn(const struct sl_position *p);
int my_pos_encode(const struct sl_position *p, char *out, size_t outlen);

/* my_source.c */
int my_wm_name(const char *v, char *db, char *table);
bool my_is_wm(const struct my_src *s, const char *db, const char *name);
bool my_selects(const struct my_src *s, const char *db, const char *name);
void my_drop_table(struct sl_my_table *t, int *n, const char *db, const char *name);

/* my_tables.c */
struct sl_my_table *my_known_table(struct my_src *s, const char *db, const char *name);
int my_tables(void *ctx, struct sl_table ***out, int *n, char *err, size_t errlen);
int my_tables_moved(struct my_src *s, char *err, size_t errlen);
int my_check(const struct sl_source_config *cfg, const struct sl_source_stream *st,
	     const struct sl_source_resume *resume, FILE *out, char *err, size_t errlen);
int my_probe(const struct sl_source_config *cfg, const struct sl_source_stream *st, struct sl_source_status *out,
	     char *err, size_t errlen);
int my_discard_position(const struct sl_source_config *cfg, const struct sl_source_stream *st,
			const struct sl_source_resume *resume, bool dry_run, bool *renew, FILE *out, char *err,
			size_t errlen);

/* my_server_pos.c */
int my_lost(const struct sl_source_stream *st, const struct sl_source_config *cfg,
	    const struct sl_source_resume *resume, const struct sl_position *p, const char *why, char *err,
	    size_t errlen);
int my_judge_position(MYSQL *c, const struct sl_my_server *srv, const struct sl_source_config *cfg,
		      const struct sl_source_stream *st, const struct sl_source_resume *resume,
		      const struct sl_position *p, char *err, size_t errlen);
int my_prepare(void *ctx, const struct sl_source_resume *resume, struct sl_source_plan *plan, char *err, size_t errlen);
int my_current_position(void *ctx, struct sl_position *out, char *err, size_t errlen);

/* my_stream.c */
int my_start(void *ctx, const struct sl_position *from, char *err, size_t errlen);
const char *my_here(const struct my_src *s, char *buf, size_t len);
struct tmap *my_map_by_id(struct my_src *s, uint64_t id);
int my_grow_vals(struct my_src *s, int n);
void my_start_group(struct my_src *s, uint64_t start);
bool my_end_group(struct my_src *s, struct sl_event *ev);
struct xa_held *my_take_held(struct my_src *s, const char *xid);
int my_next(void *ctx, int timeout_ms, struct sl_event *ev, char *err, size_t errlen);
int my_ack(void *ctx, const struct sl_position *durable, bool want_reply, char *err, size_t errlen);

/* my_maps.c */
void my_backfill_hint(const struct my_src *s, const struct sl_my_table *t, char *out, size_t outlen);
int my_covered(struct my_src *s, const struct sl_my_table *t, char *err, size_t errlen);
/* The cover of table db.name, asked of the agent at the first need: SL_OK
 * with *out, or a failure. */
int my_cover_of(struct my_src *s, const char *db, const char *name, struct cover **out, char *err, size_t errlen);
/* The stream read watermark text: a cover that ends there ends. */
void my_cover_watermark(struct my_src *s, const char *text);
int my_layout_unknown(struct my_src *s, const struct sl_my_table *t, const char *why, char *err, size_t errlen);
/* The maps of table t but keep (may be NULL) decide again at their next
 * TABLE_MAP event (their columns were completed from a description of t
 * that is stale now). */
void my_maps_forget(struct my_src *s, const struct sl_my_table *t, const struct sl_binlog_table_map *keep);
int my_redescribe(struct my_src *s, struct sl_my_table *t, const struct sl_binlog_table_map *tm,
		  uint64_t only_layout, struct sl_table **retired, char *err, size_t errlen);
int my_on_table_map(struct my_src *s, struct sl_event *ev, char *err, size_t errlen);

/* my_query.c */
int my_hand_deferred(struct my_src *s, struct sl_event *ev, char *err, size_t errlen);
bool my_has_pending(void *ctx);
int my_on_query(struct my_src *s, struct sl_event *ev, char *err, size_t errlen);

/* my_watermark.c */
int my_wm_verify(MYSQL *c, const struct sl_source_config *cfg, const struct sl_source_stream *st, bool *absent,
		 char *err, size_t errlen);
int my_watermark_ready(const struct sl_source_config *cfg, const struct sl_source_stream *st, char *err, size_t errlen);
int my_emit_watermark(void *ctx, const char *text, struct sl_position *at, char *err, size_t errlen);
int my_read_chunk(void *ctx, const struct sl_table *t, const char *after, uint64_t limit,
		  const struct sl_chunk_check *chk, sl_row_fn fn, void *payload, uint64_t *rows, char **last, char *err,
		  size_t errlen);

/* ---- tests ---- */

/* Tests only (my_source.c): a source context for stream st that streams
 * the recording at path through sl_my_source_ops' start, next and ack, with
 * no server.  tables (n, borrowed) stand for the catalog.  Free it with
 * sl_my_source_ops.close. */
int sl_my_source_open_replay(void **ctx, const struct sl_source_stream *st, const char *path,
			     struct sl_my_table *tables, int n, char *err, size_t errlen);

#endif
