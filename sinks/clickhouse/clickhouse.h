/*
 * sinks/clickhouse/clickhouse.h: the clickhouse sink, a ClickHouse database
 * reached over its HTTP interface (doc/clickhouse.md has the whole story:
 * tables, types, the version, batching, retries, dead letters, versions).
 *
 * One ClickHouse table per source table, named after the table's object name
 * (public.orders -> `public_orders`) in the configured database, created on
 * the first write of the table, with the payload columns typed as
 * doc/clickhouse.md says and the metadata columns _uuid, _source_timestamp,
 * _read_timestamp, _change_type, _csn, _version, _is_deleted, _tx_id,
 * _unchanged_columns and the source's position fields (_lsn for PostgreSQL).
 *
 *   append  ReplacingMergeTree ORDER BY (_csn, _uuid): one row per change;
 *           a change delivered twice (at-least-once) collapses into one row.
 *   merge   ReplacingMergeTree(_version) ORDER BY the primary key (in the
 *           modern layout ReplacingMergeTree(_version, _is_deleted)), and
 *           a view `<table>_current` (FINAL, deleted rows filtered out).
 *
 * The column types are those of the legacy layout (18.16's) or of the
 * modern one (23.x and later: DateTime64, Date32, Bool, UUID, Decimal256),
 * chosen by the key layout or the server's version() for the tables the
 * sink makes; a table that exists is written in the layout it has.
 *
 * With the key cluster, every statement that makes, alters or drops goes ON
 * CLUSTER and the engines are ReplicatedReplacingMergeTree (replica_path);
 * inserts and reads stay on the server of url, or with distributed go
 * through a Distributed table over the local tables of every shard.
 *
 * write() adds a change to a batch in memory: encoded at once as a RowBinary
 * row (append), or kept as the latest change of its key (merge: one row per
 * key and batch, unchanged TOAST values filled in at flush).  flush_due() is
 * true once the batch holds batch_rows rows, batch_bytes bytes, or its oldest
 * row is batch_seconds old.  flush() inserts every table's rows over HTTP and
 * returns only after each insert got a 2xx, retrying failed requests with
 * backoff for up to retry_seconds; it then reports the last mark.  A batch
 * that reaches its limits inside a transaction is sent from write() already
 * (memory stays bounded; a large transaction becomes visible in parts).
 * Rows that ClickHouse refuses as data are isolated by halving the insert and
 * written to the dead-letter file, one JSON line each.
 *
 * discard_backfill() deletes the rows of an interrupted backfill run by _csn
 * range in append mode (an ALTER TABLE ... DELETE, waited for), and does
 * nothing in merge mode, where rows written again converge.
 *
 * The sink never learns which source produced a change beyond what the
 * table version carries (its position fields); it includes nothing from
 * sources/.
 *
 * Setting SLUICE_FAULT_CH_KILL_AFTER_CREATE (tests) kills the process with
 * SIGKILL right after it creates a table.
 */
#ifndef SLUICE_SINKS_CLICKHOUSE_CLICKHOUSE_H
#define SLUICE_SINKS_CLICKHOUSE_CLICKHOUSE_H

#include <stdbool.h>
#include <stdint.h>

#include "sinks/sink.h"

enum sl_ch_compression { SL_CH_GZIP_AUTO = 0, SL_CH_GZIP, SL_CH_GZIP_NONE };
/* The types of the tables sluice makes (doc/clickhouse.md, "Layouts"):
 * auto picks modern for a server of 23.x or later, legacy before. */
enum sl_ch_layout { SL_CH_LAYOUT_AUTO = 0, SL_CH_LAYOUT_LEGACY, SL_CH_LAYOUT_MODERN };

/* The configuration of one clickhouse destination (doc/configuration.md).
 * Strings belong to it (the key table frees them); password is a secret. */
struct sl_ch_conf {
	char *url;                   /* http(s)://host[:port][/path]; required */
	char *database;              /* default "default" */
	char *user;                  /* default "default" */
	char *password;              /* password_env or password_file; NULL: none */
	uint64_t batch_rows;         /* default 100000 */
	uint64_t batch_bytes;        /* default 16MB */
	uint64_t batch_ms;           /* batch_seconds, in ms; default 500 */
	uint64_t timeout;            /* seconds per request; default 60 */
	uint64_t connect_timeout;    /* seconds; default 10 */
	uint64_t retry_seconds;      /* how long one flush retries; default 60 */
	char *ca_file;               /* NULL: the system's CA bundle */
	int tls_verify;              /* bool, default true */
	int compression;             /* enum sl_ch_compression, default auto */
	char *dead_letter_path;      /* NULL: <database>.<stream>.dead-letter.jsonl */
	int layout;                  /* enum sl_ch_layout, default auto: for tables it makes */
	char *cluster;               /* NULL: one server; else DDL ON CLUSTER, Replicated engines */
	char *replica_path;          /* the Replicated engines' path; default
				      * /clickhouse/tables/{shard}/{database}/{table} */
	int distributed;             /* bool, with cluster: local tables <table>_local, rows
				      * inserted into the Distributed table <table> */
	size_t response_cap;         /* not a key: the largest response read; 0 (always, from the
				      * file): 256 MiB.  Tests make it small. */
};

/* The sink's operations; sl_sink_lookup("clickhouse") returns this table. */
extern const struct sl_sink_ops sl_clickhouse_ops;

/* Counters since open(), for tests, benchmarks and (later) metrics. */
struct sl_ch_stats {
	uint64_t rows;               /* changes written */
	uint64_t rows_inserted;      /* rows sent in inserts that got a 2xx */
	uint64_t inserts;            /* insert requests that got a 2xx */
	uint64_t dead_letters;       /* rows written to the dead-letter file */
	uint64_t lookups;            /* requests reading current rows (unchanged TOAST values) */
	uint64_t unchanged_filled;   /* unchanged values filled in (batch or destination) */
	uint64_t unchanged_missing;  /* unchanged values no row could fill: written as NULL, listed */
	uint64_t replays_kept;       /* merge: replayed key changes filled from the new key's row of the same version */
	uint64_t spills;             /* batches sent from write() inside a transaction */
	uint64_t below_truncate;     /* merge: replayed changes older than the table's last TRUNCATE, skipped */
	uint64_t date_clamps;        /* dates outside Date32's range, clamped (modern layout) */
	uint64_t requests;           /* HTTP requests, retries included */
	uint64_t retries;
	uint64_t bytes_sent;         /* request bodies as sent */
	uint64_t bytes_raw;          /* request bodies before gzip */
};

void sl_clickhouse_get_stats(void *ctx, struct sl_ch_stats *out);

#endif
