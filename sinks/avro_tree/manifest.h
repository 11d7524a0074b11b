/*
 * sinks/avro_tree/manifest.h: completeness manifests, the proof that a file
 * tree holds every change up to a position.
 *
 * After each flush that made data files durable, the tree writes one small
 * JSON document, "<stream>/_manifests/.<10-digit sequence>.json":
 *
 *   {"format": 1, "stream": "s1", "sequence": 7,
 *    "previous": "s1/_manifests/.0000000006.json",      (null for the first)
 *    "written_at": "2024-01-31T13:45:10.123456Z", "sluice": "0.1.0",
 *    "source": "postgres",
 *    "from": {"position": "0/16E5D88", "csn": "00000000016E5D88"},  (null for the first)
 *    "to":   {"position": "0/16E75D0", "csn": "00000000016E75D0"},
 *    "files": [{"path": "s1/public_orders/2024/01/31/13/45/<first>_<last>_<id>.avro",
 *               "object": "public_orders", "schema_key": "…", "records": 120,
 *               "bytes": 8120, "first_csn": "…", "last_csn": "…"}],
 *    "removed": ["s1/…/<name>.avro"]}
 *
 * "from" is the previous manifest's "to": consecutive manifests chain, so a
 * missing manifest, or a range that does not start where the last one ended,
 * shows.  "position" is the source's own text (as in the checkpoint) and
 * "csn" the CSN's 16-hex-digit position part, which orders positions as a
 * plain string.  "files" are the files that flush made durable; "removed"
 * the files of an interrupted backfill that were deleted (discard_backfill)
 * since the previous manifest, written before they are deleted.
 *
 * "<stream>/_manifests/.latest.json" ({"sequence": 7}) names the newest one,
 * so that a restart finds it without listing them all.  It is written after
 * the manifest, so it may lag one behind after a crash; readers look for
 * later sequence numbers too.
 *
 * The names start with '.', as every non-data file of the tree does: loaders
 * that follow Hadoop's convention skip them, and the layout contract allows
 * no other visible non-.avro file.
 */
#ifndef SLUICE_SINKS_AVRO_TREE_MANIFEST_H
#define SLUICE_SINKS_AVRO_TREE_MANIFEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"
#include "schema/schema.h"

#define SL_MANIFEST_FORMAT 1
#define SL_MANIFEST_DIR "_manifests"
#define SL_MANIFEST_LATEST ".latest.json"
/* The current-schema file of an object: "<stream>/<object>/.schema.avsc". */
#define SL_SCHEMA_FILE ".schema.avsc"

struct sl_manifest_file {
	char *path;                     /* key of the data file */
	char *object;
	char schema_key[17];
	uint64_t records;
	uint64_t bytes;
	char first_csn[SL_CSN_LEN + 1];
	char last_csn[SL_CSN_LEN + 1];
};

/* One end of a manifest's range; pos is NULL for "the stream's beginning". */
struct sl_manifest_pos {
	char *pos;                      /* the source's text for the position */
	char csn[17];                   /* 16 hex digits: the CSN position part */
};

struct sl_manifest {
	uint64_t sequence;              /* from 1 */
	char *stream;
	char *previous;                 /* key of the previous manifest, or NULL */
	char *source;                   /* source kind, or NULL */
	int64_t written_at_us;
	struct sl_manifest_pos from, to;
	struct sl_manifest_file *files;
	size_t nfiles, files_alloc;
	char **removed;
	size_t nremoved, removed_alloc;
};

/* Appends "<stream>/_manifests/.<seq>.json" to out. */
void sl_manifest_key(struct sl_buf *out, const char *stream, uint64_t seq);
/* True if base (a file name without folder) is a manifest's name; *seq
 * receives its sequence. */
bool sl_manifest_name(const char *base, uint64_t *seq);

/* Adds a file (strings copied).  Returns 0, or -1 when out of memory. */
int sl_manifest_add_file(struct sl_manifest *m, const struct sl_manifest_file *f);
/* Adds a removed key (copied).  Returns 0, or -1 when out of memory. */
int sl_manifest_add_removed(struct sl_manifest *m, const char *key);
/* Sets a position end: pos NULL clears it.  Returns 0, or -1 when out of memory. */
int sl_manifest_set_pos(struct sl_manifest_pos *p, const char *pos, const char *csn);

/* Appends m as JSON to out.  Returns 0, or -1 with a message in err. */
int sl_manifest_encode(const struct sl_manifest *m, struct sl_buf *out, char *err, size_t errlen);
/* Parses a manifest into m (zeroed first; free with sl_manifest_free).
 * Returns 0, or -1 with a message in err naming what is wrong. */
int sl_manifest_decode(struct sl_manifest *m, const char *json, size_t len, char *err, size_t errlen);
/* Frees what m holds and zeroes it. */
void sl_manifest_free(struct sl_manifest *m);

#endif
