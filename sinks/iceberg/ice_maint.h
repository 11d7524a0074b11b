/*
 * sinks/iceberg/ice_maint.h: maintenance of the iceberg sink's tables,
 * through a store (sinks/avro_tree/store.h), so that it serves a local
 * warehouse and a bucket alike.
 *
 * `sluice verify` (ice_verify) reads each table of a stream back, from its
 * version-hint.text, and reports, one line each:
 *
 *   - a metadata file, manifest list or manifest that is missing or that
 *     cannot be read, or whose size differs from what names it;
 *   - a file the current snapshot names (data or equality delete file) that
 *     is missing, whose size differs from its manifest entry, that cannot be
 *     read to its end, or whose record count differs from the entry's;
 *   - a gap in the chain of snapshots from the current one back to the
 *     oldest the metadata holds: a parent the metadata does not hold while
 *     older snapshots remain, a sequence number that does not follow its
 *     parent's, a sluice.last-csn below its parent's (positions that go
 *     back), or a snapshot of another stream.
 *
 * A snapshot's sluice.position is the last source position its flush
 * covers; its parent's is where it starts.  With every snapshot of the
 * chain present, the positions they cover leave no gap.  Files under data/
 * that the current snapshot does not name (a commit that did not complete,
 * files a TRUNCATE dropped) are noted, not counted as problems.
 */
#ifndef SLUICE_SINKS_ICEBERG_ICE_MAINT_H
#define SLUICE_SINKS_ICEBERG_ICE_MAINT_H

#include <stddef.h>
#include <stdio.h>

#include <stdbool.h>
#include <stdint.h>

#include "sinks/avro/ocf.h"
#include "sinks/avro_tree/store.h"
#include "sinks/iceberg/ice_meta.h"

/* `sluice verify` of stream's tables in store, printing what it finds to
 * out.  Returns 0 when everything checks, SL_EVERIFY when it found
 * problems (each printed), or another negative enum sl_status with the
 * message in err when it could not finish. */
int ice_verify(struct sl_store store, const char *stream, FILE *out, char *err, size_t errlen);

/* Reads the manifest list of meta's current snapshot (the table
 * stream/object, fetched from st) into *mf, *n entries (paths owned: free
 * each, then the array).  Returns 0 (*n 0: no snapshot), or -1 with a
 * message in err. */
int ice_current_manifests(struct sl_store *st, const char *stream, const char *object, const json_t *meta,
			  struct ice_manifest_file **mf, int *n, char *err, size_t errlen);

/* Removes from st the metadata files a commit of the table at location loc
 * (its key in st: key) dropped from its metadata-log (gone, from
 * ice_meta_trim_log), once that commit is published.  The commit stands
 * either way: a file that cannot be removed is warned about, and left to
 * the compaction's sweep.  Returns how many it removed. */
int ice_remove_metadata(struct sl_store *st, const char *loc, const char *key, const json_t *gone);

/* What a compaction does. */
struct ice_compact_conf {
	const char *stream;
	struct sl_ocf_codec *codec;      /* of the rewritten files (borrowed) */
	uint64_t small_bytes;            /* append mode: data files below this size are rewritten */
	int min_files;                   /* at least this many of them, or nothing is done */
	int64_t retention_ms;            /* snapshots older than this expire, */
	int keep;                        /* but the newest keep stay */
	int64_t grace_ms;                /* unreferenced files and incomplete uploads older than this are
					  * removed */
};

struct ice_compact_result {
	int files_in, files_out;         /* data files rewritten, and written */
	int64_t records_in, rows_out;
	int deletes_in;                  /* equality deletes applied (merge mode) */
	bool done;                       /* a replace snapshot was committed */
	int expired;                     /* snapshots expired */
	int orphans_removed, orphans_young;  /* unreferenced files removed, and kept for the grace period */
	int uploads_aborted;             /* incomplete multipart uploads aborted (a bucket) */
	int metadata_removed;            /* metadata files older than the metadata-log keeps, removed */
};

/* `sluice compact` of one table, stream/object in st (ice_maint.c has the
 * rules): in append mode rewrites the data manifests whose files are all
 * smaller than small_bytes, in merge mode every data file with the
 * equality deletes applied, into one file in the current schema (a
 * column added since a file was written is null in its rows), and commits a
 * replace snapshot with the create-only rule, on top of whatever an agent
 * committed meanwhile.  Then it expires the snapshots older than
 * retention_ms but the newest keep (a metadata version of its own, also
 * create-only), and removes the files under data/ and metadata/ that no
 * snapshot left references once they are older than grace_ms (by the
 * store's modification time: a folder's mtime, a bucket's LastModified), and
 * aborts the incomplete multipart uploads under data/ begun more than
 * grace_ms ago (a crash's).  Returns 0 (res says what it did), or -1 with a
 * message in err; a failed compaction leaves the table as it was (files it
 * wrote are orphans). */
int ice_compact_table(struct sl_store *st, const struct ice_compact_conf *cc, const char *object,
		      struct ice_compact_result *res, char *err, size_t errlen);

/* ice_compact_table for object (NULL: every table of cc->stream), a line
 * per table to out. */
int ice_compact(struct sl_store *st, const struct ice_compact_conf *cc, const char *object, FILE *out, char *err,
		size_t errlen);

#endif
