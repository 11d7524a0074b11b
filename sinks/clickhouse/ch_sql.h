/*
 * sinks/clickhouse/ch_sql.h: every SQL statement the ClickHouse sink sends,
 * the URL parameters it sets, and how it reads ClickHouse's errors.  This is
 * the one place that knows which ClickHouse versions do what: everything
 * here is accepted by 18.16 and by current releases (23.x-26.x), except the
 * modern layout's types and engine argument (23.x and later), and the
 * comments in ch_sql.c say why each choice was made (doc/clickhouse.md,
 * "Versions").
 *
 * Each builder appends to a struct sl_buf and returns 0, or -1 when the
 * buffer failed (out of memory): the caller checks once.  Identifiers are
 * always quoted (ch_quote_ident), string values always escaped
 * (ch_quote_str): table and column names come from the source's catalog and
 * may hold anything.
 */
#ifndef SLUICE_SINKS_CLICKHOUSE_CH_SQL_H
#define SLUICE_SINKS_CLICKHOUSE_CH_SQL_H

#include <stdbool.h>
#include <stddef.h>

#include "common/buf.h"
#include "sinks/clickhouse/ch_layout.h"

/* The view of a merge-mode table: `<table>_current`. */
#define CH_VIEW_SUFFIX "_current"
/* With distributed (doc/clickhouse.md, "Distributed tables"): the
 * ReplicatedReplacingMergeTree table on each server is `<table>_local`, and
 * `<table>` is the Distributed table over them. */
#define CH_LOCAL_SUFFIX "_local"
/* URL parameters of every insert into a Distributed table: the insert
 * returns once the rows are on their shards, not when they are queued on
 * the server that received them (the default), so that a checkpoint never
 * passes rows that a crash of that server would lose.  23.x and later call
 * it distributed_foreground_insert and keep this name as its alias (26.7
 * lists both in system.settings). */
#define CH_PARAMS_DIST_INSERT "insert_distributed_sync=1"
/* The external table (HTTP "external data") that carries the keys of a lookup. */
#define CH_KEYS_TABLE "sluice_keys"
/* The merge version map (ch_layout.h): one table per database.  A leading
 * '_' is never a data table's (an object's leading '_' is written %5F). */
#define CH_VMAP_TABLE "_sluice_version_map"
/* The column types sluice made each table with, one table per database. */
#define CH_COLUMNS_TABLE "_sluice_columns"
/* URL parameters of a request whose result is read: the whole result is
 * computed before the status line, so an error is an error status, never a
 * 200 with an exception at the end of a truncated body. */
#define CH_PARAMS_READ "wait_end_of_query=1"

/* `name`, with backslash escapes for "\", "`" and bytes below 0x20 or 0x7f
 * (ClickHouse reads \xHH in quoted identifiers; doubling a backtick only
 * works in some versions, the backslash in all). */
int ch_quote_ident(struct sl_buf *b, const char *name);
/* 'text', escaped the same way for "\" and "'". */
int ch_quote_str(struct sl_buf *b, const char *s, size_t n);
/* `db`.`object<suffix>` (suffix may be NULL). */
int ch_qname(struct sl_buf *b, const char *db, const char *object, const char *suffix);

/* ---- statements (sent as the body of a POST, except the inserts) ---- */

/* Where the DDL goes (doc/clickhouse.md, "Clusters"): with cluster set,
 * every statement that makes, alters or drops something gets ON CLUSTER
 * `cluster`, and the tables are Replicated*MergeTree with replica_path
 * ({database} and {table} put in by sluice, {shard} and the '{replica}'
 * argument left to the servers' macros).  NULL, or a NULL cluster: one
 * server, plain engines. */
struct ch_ddl {
	const char *cluster;
	const char *replica_path;
	bool distributed;          /* with cluster: the local tables are <table>_local, and
				    * <table> a Distributed table over them */
};

/* The name of the table that holds object's rows on each server: object,
 * or with d->distributed object_local.  Freed by the caller; NULL when out
 * of memory. */
char *ch_local_name(const struct ch_ddl *d, const char *object);

int ch_sql_create_database(struct sl_buf *b, const struct ch_ddl *d, const char *db);
/* CREATE TABLE IF NOT EXISTS with the layout's columns; ENGINE
 * ReplacingMergeTree(_version) ORDER BY the primary key (merge; the modern
 * layout's ReplacingMergeTree(_version, _is_deleted)), or
 * ReplacingMergeTree ORDER BY (_csn, _uuid) (append: a change delivered
 * twice collapses into one row).  With d->distributed the table is
 * `<object>_local`. */
int ch_sql_create_table(struct sl_buf *b, const struct ch_ddl *d, const char *db, const struct ch_layout *l);
/* With d->distributed: the Distributed table `<object>` ON CLUSTER over the
 * local tables `<object>_local`, with their columns cols (as
 * ch_sql_describe() lists them, in their order), sharded by cityHash64 of
 * the columns in the local table's sorting key (a decimal as its text:
 * 18.16 hashes no Decimal). */
int ch_sql_create_distributed(struct sl_buf *b, const struct ch_ddl *d, const char *db, const char *object,
			      const struct ch_dest_col *cols, int ncols);
/* Drops the Distributed table (to make it again with new columns: 18.16
 * runs no ALTER ON CLUSTER on a table that is not replicated). */
int ch_sql_drop_distributed(struct sl_buf *b, const struct ch_ddl *d, const char *db, const char *object);
/* CREATE VIEW IF NOT EXISTS `<object>_current` AS SELECT * FROM <table>
 * FINAL WHERE _is_deleted = 0. */
int ch_sql_create_view(struct sl_buf *b, const struct ch_ddl *d, const char *db, const char *object);
/* Drops the view (so it can be made again with the columns the table has
 * now: a view keeps the columns "*" meant when it was created). */
int ch_sql_drop_view(struct sl_buf *b, const struct ch_ddl *d, const char *db, const char *object);
/* ALTER TABLE ... ADD COLUMN for l->cols[add[i]], i < nadd (the local
 * tables with d->distributed).  A payload column whose source column in tv
 * (the table version l was made from; may be NULL) has a missing value gets
 * it as its DEFAULT (ch_sql_default), so that the rows of older parts read
 * it. */
int ch_sql_add_columns(struct sl_buf *b, const struct ch_ddl *d, const char *db, const struct ch_layout *l,
		       const int *add, int nadd, const struct sl_table *tv);
/* Appends " DEFAULT <expression>" with value v in a column of type t: the
 * value's text, quoted, CAST to t (the text form parses exactly for
 * integers, decimals, strings, bytes and uuids; timestamps in DateTime64
 * go through fromUnixTimestamp64Micro).  Returns 0, or 1 with nothing
 * appended when the column cannot carry v exactly (floats, whose text
 * 18.16 does not parse exactly; Date32, which clamps; a NULL). */
int ch_sql_default(struct sl_buf *b, const struct ch_type *t, const struct sl_value *v);

/* ALTER TABLE ... MODIFY COLUMN (to l's type) for the columns a->modify
 * lists, and DROP COLUMN for those a->drop lists (indexes into dest): the
 * local tables with d->distributed. */
int ch_sql_change_columns(struct sl_buf *b, const struct ch_ddl *d, const char *db, const struct ch_layout *l,
			  const struct ch_dest_col *dest, const struct ch_alter *a);

/* The columns of a table: name, type, is_in_sorting_key (RowBinary),
 * in the table's order. */
int ch_sql_describe(struct sl_buf *b, const char *db, const char *object);
/* name and engine of the table and of its view, and with d->distributed of
 * its local table, if they exist (RowBinary). */
int ch_sql_engines(struct sl_buf *b, const struct ch_ddl *d, const char *db, const char *object);
/* The databases called db: count() (RowBinary UInt64). */
int ch_sql_database_exists(struct sl_buf *b, const char *db);
/* The servers of cluster in the server's configuration, its shards, and
 * how many of them are this server: three UInt64 (RowBinary). */
int ch_sql_cluster_hosts(struct sl_buf *b, const char *cluster);
/* The user's readonly and allow_ddl settings: name, value (RowBinary). */
int ch_sql_user_settings(struct sl_buf *b);
/* The server's version, as text. */
int ch_sql_version(struct sl_buf *b);
/* The layout of the tables made on a server of version text s (n bytes,
 * "26.7.2.1\n"): modern from 23.x (ReplacingMergeTree's is_deleted came in
 * 23.2; Date32, Bool, Decimal256 and DateTime64 before), legacy before.
 * Returns 0 with *out, or -1 when s does not start with "<major>.". */
int ch_flavor_of_version(const char *s, size_t n, enum ch_flavor *out);

/* The query of an insert into the layout's table in RowBinary, for the
 * "query" URL parameter: with the column list (meta_only: the metadata
 * columns only), or without one when the list would make the URL too long
 * (the rows are then in the table's own order, see ch_layout_match). */
int ch_sql_insert(struct sl_buf *b, const char *db, const struct ch_layout *l, bool meta_only);

/* Tombstones for a TRUNCATE in merge mode: for every live key of the table
 * whose version is below m->version, a row with that key, _is_deleted = 1,
 * _change_type TRUNCATE and m's metadata; other columns take their
 * defaults.  keys names the sorting-key columns (nkeys of them); l gives the
 * metadata columns. */
int ch_sql_tombstones(struct sl_buf *b, const char *db, const char *object, const char *const *keys,
		      int nkeys, const struct ch_layout *l, const struct ch_rowmeta *m);

/* The TRUNCATE's sentinel: one more tombstone, at the key whose columns all
 * hold their type's default value (0, ''), which every TRUNCATE writes, so
 * that the latest TRUNCATE's version can be found through the primary key
 * even when the table was empty (ch_sql_truncate_floor).  Tombstoning that
 * key is right in any case: a row of it older than the TRUNCATE is gone. */
int ch_sql_truncate_sentinel(struct sl_buf *b, const char *db, const char *object, const struct ch_layout *l,
			     const struct ch_rowmeta *m);
/* The version map's table, if it does not exist yet. */
int ch_sql_vmap_create(struct sl_buf *b, const struct ch_ddl *d, const char *db);
/* The steps of object's version map, by position (RowBinary pos, shift). */
int ch_sql_vmap_read(struct sl_buf *b, const char *db, const char *object);
/* Adds steps (n of them) to object's version map. */
int ch_sql_vmap_insert(struct sl_buf *b, const char *db, const char *object, const struct ch_vstep *steps,
		       size_t n);

/* The record of column types, if it does not exist yet. */
int ch_sql_columns_create(struct sl_buf *b, const struct ch_ddl *d, const char *db);
/* Records the types of the layout's columns as sluice made them: every one, or
 * only[0..n) (indexes into l->cols). */
int ch_sql_columns_insert(struct sl_buf *b, const char *db, const struct ch_layout *l, const int *only, int n);
/* The recorded columns of object, in ch_sql_describe()'s form (name, type,
 * a UInt8 0). */
int ch_sql_columns_read(struct sl_buf *b, const char *db, const char *object);

/* One row (RowBinary UInt8 1), or none, of object whose change is after
 * csn (by _csn) and whose column a change wrote: it holds a value, or it is
 * NULL while the column (of the table local, on the server asked) has a
 * DEFAULT, which a row written without the column would read.  Whether a
 * table version of a change at csn that lacks column is older than the
 * change that added it (doc/clickhouse.md, "Older table versions"). */
int ch_sql_later_write(struct sl_buf *b, const char *db, const char *object, const char *local, const char *column,
		       const char *csn);

/* The version of the table's latest TRUNCATE, 0 if none (RowBinary UInt64). */
int ch_sql_truncate_floor(struct sl_buf *b, const char *db, const char *object, const char *const *keys,
			  int nkeys);

/* A lookup of the current rows of some keys: SELECT the layout's columns
 * FROM the table FINAL whose key is in the external table CH_KEYS_TABLE,
 * RowBinary, into query;
 * the external table's structure ("k0 Int64, k1 String") into structure.
 * Key columns of type Decimal(P,S) are described as DecimalNN(S), whose
 * name has no comma (the structure is a comma-separated list).  Returns 0,
 * or -1. */
int ch_sql_lookup(struct sl_buf *query, struct sl_buf *structure, const char *db, const struct ch_layout *l);

/* ALTER TABLE ... DELETE WHERE _csn BETWEEN first AND last (a mutation; of
 * the local tables with d->distributed). */
int ch_sql_delete_csn_range(struct sl_buf *b, const struct ch_ddl *d, const char *db, const char *object,
			    const char *first, const char *last);
/* The table's (or its local table's) unfinished mutations: count()
 * (RowBinary UInt64). */
int ch_sql_mutations_left(struct sl_buf *b, const struct ch_ddl *d, const char *db, const char *object);

/* ---- errors ---- */

/* How the sink treats a failed request. */
enum ch_errclass {
	CH_ERR_RETRY = 0,   /* worth another try after a pause: the server is busy, down or restarting */
	CH_ERR_DATA,        /* the rows are at fault: a smaller batch may pass, a single row never will */
	CH_ERR_FATAL,       /* no retry helps: a missing table, a syntax error */
	CH_ERR_PREREQ,      /* no retry helps, and the operator must act: credentials, grants,
			     * a read-only user (the stream stops with exit 3) */
};

/* ClickHouse's exception code in an error body ("Code: 60, e.displayText()
 * = ..." in 18.16, "Code: 60. DB::Exception: ..." later), or 0. */
int ch_exception_code(const char *body, size_t len);
/* The class of an HTTP response with status (not 2xx) and exception code
 * (0 when none was found).  18.16 answers a parse error with 500 and an
 * unknown table with 404, so the code decides first, the status after. */
enum ch_errclass ch_classify(long status, int code);

#endif
