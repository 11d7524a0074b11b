/*
 * sinks/iceberg/iceberg.h: the iceberg sink, Iceberg tables (format version
 * 2, path-based) in a local warehouse folder `path` or in an S3 bucket (the
 * s3 keys, under `prefix`), in append or merge mode; every file goes
 * through the store (sinks/avro_tree/store.h) of sl_ice_store_open:
 *
 *   <root>/<stream>/<object>/data/<first_csn>-<8 hex>.avro
 *   <root>/<stream>/<object>/metadata/v<N>.metadata.json, version-hint.text,
 *       snap-<snapshot id>.avro (manifest lists), <snapshot id>-m0.avro (manifests)
 *
 * Each flush commits one snapshot per table written to: its data files are
 * made durable (published, then the store's sync: fsynced in a folder, a
 * 2xx from S3), then its manifest and manifest list are put, then the new
 * metadata file is published with the store's put_new (never replacing
 * one: a second writer stops with SL_EPREREQ; on an S3 server that ignores
 * If-None-Match only the stream's lock keeps sluice the only writer), then
 * version-hint.text is replaced.  Only then does
 * flush() report the position durable.  The snapshot's summary carries
 * sluice.stream, sluice.position (the flush's mark) and sluice.last-csn (the
 * table's last change from the log); on restart a change from the log at or
 * before that CSN is skipped, so a crash between a commit and the
 * checkpoint leaves no duplicate rows.  doc/iceberg.md has the details.
 *
 * A table version that no change brought (sl_sink_ops.version: DDL with
 * no change after it) becomes the table's current schema with the next
 * flush, which publishes it in a metadata file of its own when there are
 * no files to commit: the current snapshot stays (a schema is table
 * metadata), and the version handed again after a crash finds the schema
 * there and commits nothing.
 *
 * Merge mode folds each table's changes by key between flushes (sl_mbatch,
 * sinks/avro_tree/merge.h) and commits, per flush, a data file of the rows
 * left and an equality delete file (<first_csn>-<8 hex>-deletes.avro,
 * manifest <snapshot id>-m1.avro) of every key touched, which removes the
 * keys' rows of earlier snapshots; a TRUNCATE commits a snapshot without
 * the earlier manifests (sluice.truncate).  Unchanged TOAST values come from
 * the batch or the committed data files (ice_fill.h, fetched from the
 * store).
 *
 * check() (sluice check) is avro_dir's check of path (writable, or
 * creatable), or s3's check of the bucket (a small object written and
 * deleted).
 *
 * Setting SLUICE_FAULT_ICEBERG_KILL_AFTER_COMMIT=N (tests) kills the process
 * with SIGKILL right after its N-th commit.
 */
#ifndef SLUICE_SINKS_ICEBERG_ICEBERG_H
#define SLUICE_SINKS_ICEBERG_ICEBERG_H

#include <stdint.h>

#include "sinks/avro/ocf.h"
#include "sinks/avro_tree/store.h"
#include "sinks/s3/s3.h"
#include "sinks/sink.h"

/* The configuration of one iceberg destination: a local warehouse folder
 * (path), or a bucket (the S3 keys of type s3, in s3).  Every string
 * belongs to it (the key table frees it). */
struct sl_iceberg_conf {
	struct sl_s3_conf s3;        /* s3.bucket set: the tables are in that bucket, under s3.prefix */
	char *path;                  /* or the warehouse folder */
	enum sl_codec codec;         /* of the data files, default deflate */
	int compression_level;       /* deflate level 1-9, default 1 */
	int compression_threads;     /* blocks compressed beside the encoding, default 1 (0: inline) */
	uint64_t max_file_bytes;     /* a flush is due past this many bytes written, default 64MB */
	uint64_t max_file_seconds;   /* or this long after the first write, default 60 */
	uint64_t compact_small_bytes; /* compaction, append mode: data files below this are rewritten, default 16MB */
	uint64_t compact_after_files; /* automatic compaction of a table after this many commits, default 64, 0 off */
	uint64_t snapshot_retention;  /* seconds: older snapshots expire when compacting, default 1 day */
	uint64_t snapshot_keep;       /* but the newest this many stay, default 10 */
	uint64_t orphan_grace;        /* seconds: unreferenced files older than this are removed, default 1 day */
};

/* Where an iceberg destination's tables live, for the sink and for the
 * maintenance that reads and rewrites them: the store (store.h) of conf (a
 * struct sl_iceberg_conf) whose keys are "<stream>/<object>/metadata/...",
 * "<stream>/<object>/data/...", and in *root (malloc'd) the location of the
 * store's root as the tables' metadata writes it: the warehouse folder's
 * absolute path (made if missing), or "s3://<bucket>" plus "/<prefix>" when
 * there is one.  A table's location is then "<root>/<stream>/<object>" and
 * the key of a location below it its tail after "<root>/" (sl_ice_key_of).
 * ss gives an S3 store its outage account and spool folder (state_dir), or
 * is NULL.  max_attempts: an S3 store's tries per request (0: as long as it
 * takes).  The store is closed with its ops->close.  Returns 0, or a
 * negative status with a message in err. */
int sl_ice_store_open(const void *conf, const struct sl_sink_stream *ss, int max_attempts, struct sl_store *out,
		      char **root, char *err, size_t errlen);

/* The store key of location (a table's file, as its metadata names it)
 * under root (sl_ice_store_open's): a pointer into location, or NULL when
 * location is not below root. */
const char *sl_ice_key_of(const char *root, const char *location);

extern const struct sl_sink_ops sl_iceberg_ops;

#endif
