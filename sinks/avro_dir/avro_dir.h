/*
 * sinks/avro_dir/avro_dir.h: the avro_dir sink, Avro object container files in
 * a directory tree: the file tree of sinks/avro_tree/tree.h (layout,
 * rotation, manifests, schema files) kept in the folder `path`:
 *
 *   <path>/<stream>/<object>/<YYYY>/<MM>/<DD>/<HH>/<mm>/<first_csn>_<last_csn>_<8 hex>.avro
 *   <path>/<stream>/<object>/.schema.avsc
 *   <path>/<stream>/_manifests/.<sequence>.json, .latest.json
 *
 * A file is written as ".<first_csn>_<8 hex>.avro.tmp" in its final folder.
 * Finished files are fsynced at once but renamed to their final name only by
 * flush(), which also fsyncs their folders: so nothing becomes visible before
 * the agent may acknowledge it, a visible file is always complete, and
 * close() without flush() leaves no visible output behind.
 *
 * open() removes every temporary file (a name of exactly that pattern, or
 * ".put-<8 hex>.tmp") that a crashed run left anywhere under <path>/<stream>/,
 * logs how many at info level, and fsyncs the folders it removed them from.
 * Such a file holds rows that were never acknowledged, so the source sends
 * them again.  Only one agent may write a stream's folder at a time.
 *
 * In merge mode (write_mode = merge) the tree writes one record per key per
 * flushed file and compacts (sinks/avro_tree/mirror.h); compact() serves
 * `sluice compact`.
 *
 * Its configuration, [destination.NAME] with type = avro_dir, fills a struct
 * sl_avro_dir_conf through the sink's key table (sl_avro_dir_ops.keys; doc/
 * configuration.md lists the keys).  check() verifies that path, or the
 * nearest folder above it that exists, is writable, and creates nothing.
 * verify() reads the stream's manifests and files back (sl_tree_verify).
 */
#ifndef SLUICE_SINKS_AVRO_DIR_AVRO_DIR_H
#define SLUICE_SINKS_AVRO_DIR_AVRO_DIR_H

#include <stdint.h>

#include "sinks/avro/avro_value.h"
#include "sinks/avro/ocf.h"
#include "sinks/avro_tree/tree.h"
#include "sinks/sink.h"

/* sync: each file and folder fsynced once per flush, or, for a flush of
 * more than SL_AVRO_DIR_SYNCFS_MIN files, syncfs() of the whole file system
 * once per phase (doc/operations.md, "Scale"). */
enum sl_avro_dir_sync { SL_AVRO_DIR_FSYNC = 0, SL_AVRO_DIR_SYNCFS = 1 };
#define SL_AVRO_DIR_SYNCFS_MIN 8

/* The configuration of one avro_dir destination.  path belongs to it (the
 * key table frees it). */
struct sl_avro_dir_conf {
	char *path;                  /* root of the file tree; required */
	enum sl_codec codec;         /* default deflate */
	int compression_level;       /* deflate level 1-9, default 1 */
	int compression_threads;     /* 0-64, default 1; 0: compress on the writer thread */
	uint64_t max_file_bytes;     /* at least 1KB, default 64MB; 0 in a hand-made conf: 64MB */
	uint64_t max_file_seconds;   /* 1-86400, default 60 */
	uint64_t compact_after_files; /* merge mode: automatic compaction, default 64, 0 off */
	enum sl_avro_dir_sync sync;  /* how a flush of many files makes them durable, default fsync */
};

/* The sink's operations; sl_sink_lookup("avro_dir") returns this table. */
extern const struct sl_sink_ops sl_avro_dir_ops;

/* Copies the sink's counters (records written, files closed, i.e. made
 * visible, and decimal NaNs written as null) into *out.  ctx is the context
 * sl_avro_dir_ops.open returned. */
void sl_avro_dir_get_stats(void *ctx, struct sl_avro_stats *out);

/* The folder store of path (store.h), closed with its ops->close: for
 * reading a tree back (tests).  Returns 0, or -1 with a message in err. */
int sl_avro_dir_store(struct sl_store *out, const char *path, char *err, size_t errlen);

#endif
