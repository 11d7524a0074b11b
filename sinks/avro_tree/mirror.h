/*
 * sinks/avro_tree/mirror.h: the merge-mode mirror of one object (table), read
 * back from the files of the tree, and its compaction.
 *
 * In merge mode every flushed file holds at most one record per key (the
 * batch's last change, deletes as is_deleted = true, a TRUNCATE as a marker).
 * The table's current rows are the *mirror*: of the object's current files,
 * for each key the record with the highest CSN, without the deleted ones and
 * without those older than the latest TRUNCATE.
 *
 * The current files: every visible data file of the object, less the files
 * the newest compaction replaced.  A compaction writes
 *
 *   <stream>/<object>/<time folders>/<first>_<last>_<id>.avro   the new base (one file per
 *                                                      schema version; none if no row is left)
 *   <stream>/<object>/.compact-<10-digit n>.json       the record: a manifest (manifest.h)
 *                                                      whose "files" are the base and whose
 *                                                      "removed" are the files it replaces
 *   <stream>/<object>/.base.json                       {"sequence": n}: the newest record
 *
 * in that order, each durable before the next, and only then removes the
 * replaced files.  A reader (or a lookup) at any moment sees either the old
 * state (old base and files; the new base is then one more file whose records
 * all also are in them) or the new one (the old files ignored even while
 * they are still there), and the rule gives the same rows for both.  Files
 * a running agent publishes meanwhile are in no record's list: they stay
 * current.  Two compactions of a stream never run at once (a lock file in
 * the agent's state_dir, sl_mirror_lock), so n is never taken twice.
 *
 * A base keeps the latest TRUNCATE marker (records of later files may be
 * older than it) but no deleted row.
 */
#ifndef SLUICE_SINKS_AVRO_TREE_MIRROR_H
#define SLUICE_SINKS_AVRO_TREE_MIRROR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "common/keyslots.h"
#include "schema/schema.h"
#include "sinks/avro/ocf.h"
#include "sinks/avro_tree/store.h"

#define SL_MIRROR_BASE ".base.json"

/* A payload as a schema describes it: per field its column and its type. */
struct sl_mschema {
	char *json;                    /* the schema as the file header holds it */
	size_t len;
	int nfields;
	char **cols;                   /* source column names ("sluice.column") */
	char **types;                  /* each field's type, as compact JSON */
	char schema_key[17];           /* from the first record read with it */
};

/* The winning record of a key. */
struct sl_mentry {
	unsigned char *key;
	size_t keylen;
	char csn[SL_CSN_LEN + 1];
	bool deleted;
	int schema;                    /* index into the mirror's schemas */
	int64_t source_ts_us;
	unsigned char *rec;            /* the whole record, Avro binary */
	size_t reclen;
	size_t *foff;                  /* nfields + 1 offsets of the payload fields in rec */
	/* In a lookup whose want() gave the key a bound: an older live writing
	 * of the key below the bound, kept while this entry is not one
	 * (sl_mirror_find_below), or NULL. */
	struct sl_mentry *below;
};

struct sl_mirror {
	struct sl_mentry **e;          /* entries, in first-seen order */
	size_t n, alloc;
	struct sl_keyslots index;      /* entries by key */
	struct sl_mentry *trunc;       /* the latest TRUNCATE marker, or NULL */
	struct sl_mschema *schemas;
	int nschemas;
	/* Optional: only these keys are kept (a lookup); NULL keeps every key.
	 * *below, when want() sets it (else NULL): a CSN, below which the
	 * key's latest live writing is kept too (sl_mirror_find_below). */
	bool (*want)(void *arg, const void *key, size_t len, const char **below);
	void *want_arg;
	uint64_t records;              /* records read */
};

/* Parses a sluice record schema's payload fields into s (json copied).
 * Returns 0, or -1 with a message in err. */
int sl_mschema_parse(struct sl_mschema *s, const char *json, size_t len, char *err, size_t errlen);
void sl_mschema_free(struct sl_mschema *s);

/* The object's current files (see above): *keys (malloc'd array of
 * malloc'd keys, *n of them).  *removed, when not NULL, receives how many
 * visible files the newest compaction replaced.  Returns 0, or a negative
 * status with a message in err. */
int sl_mirror_current(struct sl_store *st, const char *stream, const char *object, char ***keys, size_t *n,
		      char *err, size_t errlen);
void sl_mirror_free_keys(char **keys, size_t n);

/* Folds the records of data file key (fetched from st) into m.  Returns 0,
 * SL_STORE_NOT_FOUND when the file is gone (a compaction removed it: list
 * again), or -1 with a message in err naming the file. */
int sl_mirror_read(struct sl_mirror *m, struct sl_store *st, const char *key, char *err, size_t errlen);
/* Folds every current file of the object, listing again when a file
 * disappears under it.  Returns 0 or an error. */
int sl_mirror_load(struct sl_mirror *m, struct sl_store *st, const char *stream, const char *object, char *err,
		   size_t errlen);
/* The live entry of key (not deleted, not older than the latest TRUNCATE), or NULL. */
const struct sl_mentry *sl_mirror_find(const struct sl_mirror *m, const void *key, size_t len);
/* The latest live writing of key (not deleted, not older than the latest
 * TRUNCATE) with a CSN below `below`, the bound want() gave the key, or
 * NULL: the row as it stood before the change at `below`, even when a later
 * writing of the key is there (a delete, or a new row of the key). */
const struct sl_mentry *sl_mirror_find_below(const struct sl_mirror *m, const void *key, size_t len,
					     const char *below);
/* The bytes of column col's payload field in e, when its type is type_json
 * (compact JSON): 0 with *p and *len set, or -1 when the entry's schema has no
 * such column of that type. */
int sl_mirror_field(const struct sl_mirror *m, const struct sl_mentry *e, const char *col, const char *type_json,
		    const unsigned char **p, size_t *len);
void sl_mirror_free(struct sl_mirror *m);

/* What one object's compaction did. */
struct sl_compact_result {
	size_t files_in;               /* current files folded */
	uint64_t records_in;
	size_t files_out;              /* base files written */
	uint64_t rows_out;             /* live rows in the base (plus the TRUNCATE marker, if any) */
	uint64_t bytes_out;
	char record[256];              /* the compaction record's key, "" when nothing was done */
};

/* Compacts object of stream on st with codec (see above); min_files: do
 * nothing when fewer current files (at least 1).  The caller holds the
 * stream's compaction lock.  Returns 0, or a negative status with a
 * message in err. */
int sl_mirror_compact(struct sl_store *st, struct sl_ocf_codec *codec, const char *stream, const char *object,
		      size_t min_files, struct sl_compact_result *res, char *err, size_t errlen);

/* Lists the objects of stream on st that have data files (malloc'd array
 * of malloc'd names).  Returns 0 or an error. */
int sl_mirror_objects(struct sl_store *st, const char *stream, char ***objects, size_t *n, char *err,
		      size_t errlen);

/* The stream's compaction lock: "<state_dir>/<stream>.compact.lock" (an
 * flock).  wait: block until it is free; else *fd = -1 when another holds
 * it.  Returns 0 (*fd the lock, or -1 when busy) or -1 with a message.
 * state_dir NULL: no lock (*fd = -1, 0). */
int sl_mirror_lock(const char *state_dir, const char *stream, bool wait, int *fd, bool *busy, char *err,
		   size_t errlen);
void sl_mirror_unlock(int fd);

#endif
