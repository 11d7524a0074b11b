/*
 * sinks/avro_tree/tree.h: the file tree every Avro file destination writes
 * (avro_dir into a folder, s3 into a bucket), behind the sink interface:
 *
 *   <root>/<stream>/<object>/<YYYY>/<MM>/<DD>/<HH>/<mm>/<first_csn>_<last_csn>_<8 hex>.avro
 *   <root>/<stream>/<object>/.schema.avsc        the object's newest Avro schema
 *   <root>/<stream>/_manifests/.<sequence>.json  one per flush (manifest.h)
 *   <root>/<stream>/_manifests/.latest.json      the newest manifest's sequence
 *
 * The time folders are the UTC source time of the file's first record.  Each
 * object has at most one open file; a new table-schema version, or the file
 * reaching max_file_bytes, finishes it and starts another.  Finished files
 * wait, complete and stable in the store, until flush() publishes them: so
 * nothing becomes visible before the agent may acknowledge it, a visible file
 * is always complete, and close() without flush() leaves no visible output.
 *
 * flush() then writes the schema file of every object whose schema version
 * changed in this run, and a manifest listing the files it published, and
 * only then reports the last position given to mark().  flush_due() is true
 * when the oldest open file is max_file_seconds old, or when a finished file
 * waits to be published.  discard_backfill(first, last) drops unflushed files
 * of the table's object whose CSNs lie in [first, last], and removes the
 * published ones whose name's first and last CSN both do, after writing a
 * manifest that lists them as removed; files that also hold other records
 * are kept.
 *
 * In merge mode (conf->merge) write() folds the changes of each object into
 * a batch (merge.h: the last change of each key, deletes kept, a TRUNCATE
 * clearing what came before it), and flush() writes each batch as a file in
 * CSN order, after filling unchanged TOAST values that the batch could not
 * from the object's mirror (mirror.h); then it compacts objects that reached
 * compact_after_files, after the manifest, so the position it reports was
 * durable before.
 *
 * The store (store.h) does the storage: a tree owns its store and closes it.
 * A tree is used by one thread at a time (the stream's writer).
 */
#ifndef SLUICE_SINKS_AVRO_TREE_TREE_H
#define SLUICE_SINKS_AVRO_TREE_TREE_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "common/keytab.h"
#include "schema/schema.h"
#include "sinks/avro/avro_value.h"
#include "sinks/avro/ocf.h"
#include "sinks/avro_tree/store.h"
#include "common/outage.h"

#define SL_TREE_DEFAULT_MAX_FILE_BYTES ((uint64_t)64 << 20)

/* The keys every Avro file destination shares (doc/configuration.md). */
struct sl_tree_conf {
	enum sl_codec codec;
	int compression_level;       /* deflate 1-9 */
	int compression_threads;     /* threads compressing blocks, 0: the writer's own (ocf.h) */
	uint64_t max_file_bytes;     /* 0: SL_TREE_DEFAULT_MAX_FILE_BYTES */
	uint64_t max_file_seconds;
	/* Merge mode (mirror.h, merge.h): one record per key per flushed file. */
	bool merge;
	/* Merge mode: compact an object once this many of its files were
	 * published since the agent started or since its last compaction (0:
	 * never automatically). */
	uint64_t compact_after_files;
	/* Where the stream's compaction lock lives (the agent's state_dir);
	 * NULL: no lock. */
	const char *state_dir;
	/* Told of writes and flushes that failed as runtime failures, and of
	 * flushes that worked (common/outage.h): for a store whose own requests
	 * do not report to it (a folder).  Borrowed; NULL: none. */
	struct sl_outage *outage;
};

struct sl_tree;

/* Opens the tree of stream `stream` on store (taken over: closed by
 * sl_tree_close, or here on failure) and finds the newest manifest, so that
 * the chain goes on.  Returns 0 with the tree in *out, or a negative enum
 * sl_status with a message in err. */
int sl_tree_open(struct sl_tree **out, struct sl_store store, const struct sl_tree_conf *conf,
		 const char *stream, char *err, size_t errlen);

/* The sink operations (sinks/sink.h), with the tree as ctx. */
int sl_tree_write(void *ctx, const struct sl_change *c, char *err, size_t errlen);
void sl_tree_mark(void *ctx, const struct sl_position *pos);
bool sl_tree_flush_due(void *ctx, int64_t now_ms);
bool sl_tree_pending(void *ctx);
int sl_tree_flush(void *ctx, struct sl_position *durable, char *err, size_t errlen);
int sl_tree_discard_backfill(void *ctx, const struct sl_table *t, const char *csn_first,
			     const char *csn_last, char *err, size_t errlen);
void sl_tree_close(void *ctx);
/* Those operations of struct sl_sink_ops, for a destination whose open()
 * returns a tree (avro_dir, s3). */
#define SL_TREE_SINK_OPS \
	.write = sl_tree_write, .version = sl_tree_version, .dead_letters = sl_tree_dead_letters, .mark = sl_tree_mark, \
	.flush_due = sl_tree_flush_due, .pending = sl_tree_pending, .flush = sl_tree_flush, \
	.discard_backfill = sl_tree_discard_backfill, .close = sl_tree_close

/* `sluice compact`: folds the current files of object (NULL: of every
 * object) of stream on store (borrowed) into a new base each (mirror.h),
 * holding the stream's compaction lock in conf->state_dir, and prints one
 * line per object to out.  Safe while an agent writes the stream.  Returns
 * 0, or a negative enum sl_status with a message in err. */
int sl_tree_compact(struct sl_store store, const struct sl_tree_conf *conf, const char *stream, const char *object,
		    FILE *out, char *err, size_t errlen);
/* The same with the destination's codec, compression_level and
 * compression_threads and the agent's state_dir (a sink's compact()). */
int sl_tree_compact_with(struct sl_store store, enum sl_codec codec, int level, int threads, const char *state_dir,
			 const char *stream, const char *object, FILE *out, char *err, size_t errlen);

/* sl_sink_ops.version: the object's next schema file (.schema.avsc) is
 * table version tab's, written by the next flush even when no change of
 * it comes; the data files written so far keep their schemas. */
int sl_tree_version(void *ctx, const struct sl_table *tab, char *err, size_t errlen);

/* The changes set aside in the dead-letter file (merge mode: a key column
 * without a value), for the sink's dead_letters operation. */
uint64_t sl_tree_dead_letters(void *ctx);

/* Counters: records written, files published. */
void sl_tree_get_stats(void *ctx, struct sl_avro_stats *out);

/* True if base (a file name) is a data file's "<first>_<last>_<8 hex>.avro";
 * first and last (SL_CSN_LEN + 1 bytes each, may be NULL) receive its CSNs. */
bool sl_tree_data_name(const char *base, char *first, char *last);

/* The choices of the `codec` key of every Avro file destination (avro_dir,
 * s3, iceberg). */
extern const struct sl_keychoice sl_tree_codecs[];

/* The rows of the keys every Avro file destination shares (avro_dir, s3,
 * iceberg; doc/configuration.md), written once: T is the destination's
 * conf struct, with members of the keys' names.  max_file_bytes takes its
 * upper bound MAX (S3: an object's largest size). */
#define SL_TREE_KEY_CODEC(T) \
	{ .name = "codec", .type = SL_KT_ENUM, .choices = sl_tree_codecs, .def = "deflate", FIELD(T, codec) }
#define SL_TREE_KEY_COMPRESSION_LEVEL(T) \
	{ .name = "compression_level", .type = SL_KT_INT, .def = "1", .min = 1, .max = SL_OCF_ZSTD_MAX_LEVEL, \
	  FIELD(T, compression_level) }
#define SL_TREE_KEY_COMPRESSION_THREADS(T) \
	{ .name = "compression_threads", .type = SL_KT_INT, .def = "1", .min = 0, .max = SL_OCF_MAX_THREADS, \
	  FIELD(T, compression_threads) }
#define SL_TREE_KEY_MAX_FILE_BYTES(T, MAX) \
	{ .name = "max_file_bytes", .type = SL_KT_BYTES, .def = "64MB", .min = 1024, .max = (MAX), \
	  FIELD(T, max_file_bytes) }
#define SL_TREE_KEY_MAX_FILE_SECONDS(T) \
	{ .name = "max_file_seconds", .type = SL_KT_SECONDS, .def = "60", .min = 1, .max = 86400, \
	  FIELD(T, max_file_seconds) }
#define SL_TREE_KEY_COMPACT_AFTER_FILES(T) \
	{ .name = "compact_after_files", .type = SL_KT_INT, .def = "64", .min = 0, .max = 1000000, \
	  FIELD(T, compact_after_files) }

/* The config check every Avro file destination makes of its [destination]
 * section: compression_level fits its codec (sl_ocf_check_level).  Returns
 * 0, or -1 with the error in er naming the line. */
int sl_tree_conf_check(enum sl_codec codec, int level, const struct sl_ini_section *sec, struct sl_keyerr *er);

/* `sluice verify` (verify.c): reads stream's manifests and data files from
 * store (borrowed) and prints what it finds to out.  Returns 0 when
 * everything checks, SL_EVERIFY when it found problems (each printed), or
 * another negative enum sl_status with a message in err when it could not
 * finish. */

int sl_tree_verify(struct sl_store store, const char *stream, FILE *out, char *err, size_t errlen);

/* The lines verify prints (sl_tree_verify, and the iceberg sink's): "WORD: "
 * (word: "problem", "note"), then "table \"STREAM/OBJECT\": " when object is
 * not NULL, then the message, as one line of out; only the first
 * SL_TREE_REPORT_LINES of a kind, which *count counts (all of them).
 * sl_tree_report_more() then says how many were left out, if any.  out,
 * count, word and fmt are never NULL (nonnull: GCC's -Wformat-overflow then
 * knows, under UBSan's null checks too, that vfprintf gets a format). */
#define SL_TREE_REPORT_LINES 200
void sl_tree_report(FILE *out, uint64_t *count, const char *word, const char *stream, const char *object,
		    const char *fmt, va_list ap) __attribute__((format(printf, 6, 0), nonnull(1, 2, 3, 6)));
void sl_tree_report_more(FILE *out, const char *word, uint64_t count);

#endif
