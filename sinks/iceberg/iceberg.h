/*
 * sinks/iceberg/iceberg.h: the iceberg sink, Iceberg tables (format version
 * 2, path-based) in a local warehouse folder `path`, in append or merge mode:
 *
 *   <path>/<stream>/<object>/data/<first_csn>-<8 hex>.avro
 *   <path>/<stream>/<object>/metadata/v<N>.metadata.json, version-hint.text,
 *       snap-<snapshot id>.avro (manifest lists), <snapshot id>-m0.avro (manifests)
 *
 * Each flush commits one snapshot per table written to: its data files are
 * fsynced, then its manifest and manifest list are written and fsynced, then
 * the new metadata file is published with link(2) (never replacing one: a
 * second writer fails), then version-hint.text is replaced.  Only then does
 * flush() report the position durable.  The snapshot's summary carries
 * sluice.stream, sluice.position (the flush's mark) and sluice.last-csn (the
 * table's last change from the log); on restart a change from the log at or
 * before that CSN is skipped, so a crash between a commit and the
 * checkpoint leaves no duplicate rows.  doc/iceberg.md has the details.
 *
 * Merge mode folds each table's changes by key between flushes (sl_mbatch,
 * sinks/avro_tree/merge.h) and commits, per flush, a data file of the rows
 * left and an equality delete file (<first_csn>-<8 hex>-deletes.avro,
 * manifest <snapshot id>-m1.avro) of every key touched, which removes the
 * keys' rows of earlier snapshots; a TRUNCATE commits a snapshot without
 * the earlier manifests (sluice.truncate).  Unchanged TOAST values come from
 * the batch or the committed data files (ice_fill.h).
 *
 * check() (sluice check) is avro_dir's check of path: writable, or creatable.
 *
 * Setting SLUICE_FAULT_ICEBERG_KILL_AFTER_COMMIT=N (tests) kills the process
 * with SIGKILL right after its N-th commit.
 */
#ifndef SLUICE_SINKS_ICEBERG_ICEBERG_H
#define SLUICE_SINKS_ICEBERG_ICEBERG_H

#include <stdint.h>

#include "sinks/avro/ocf.h"
#include "sinks/sink.h"

/* The configuration of one iceberg destination; path belongs to it. */
struct sl_iceberg_conf {
	char *path;                  /* the warehouse folder; required */
	enum sl_codec codec;         /* of the data files, default deflate */
	int compression_level;       /* deflate level 1-9, default 1 */
	uint64_t max_file_bytes;     /* a flush is due past this many bytes written, default 64MB */
	uint64_t max_file_seconds;   /* or this long after the first write, default 60 */
	uint64_t compact_small_bytes; /* compaction, append mode: data files below this are rewritten, default 16MB */
	uint64_t compact_after_files; /* automatic compaction of a table after this many commits, default 64, 0 off */
	uint64_t snapshot_retention;  /* seconds: older snapshots expire when compacting, default 1 day */
	uint64_t snapshot_keep;       /* but the newest this many stay, default 10 */
	uint64_t orphan_grace;        /* seconds: unreferenced files older than this are removed, default 1 day */
};

extern const struct sl_sink_ops sl_iceberg_ops;

#endif
