/*
 * sinks/iceberg/ice_meta.h: the Iceberg side of the iceberg sink, written
 * from the Iceberg table specification (format version 2):
 *
 *   - a table version's Iceberg schema (struct ice_schema): the payload
 *     columns, then sluice's metadata columns, each with a field id that an
 *     existing schema keeps (a column is found by name) and a new column
 *     gets after the table's last-column-id; a dropped column leaves it,
 *     unless the table version is older than the change that added it;
 *   - the Avro schema of its data files (the field ids as "field-id"), and
 *     the Avro encoding of one change as a data file record;
 *   - the table metadata JSON (jansson): made for a new table, and changed
 *     by each commit (a new schema, a new snapshot);
 *   - manifests and manifest lists: Avro container files with the spec's
 *     schemas and field ids, one record block, codec null.
 */
#ifndef SLUICE_SINKS_ICEBERG_ICE_META_H
#define SLUICE_SINKS_ICEBERG_ICE_META_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"
#include "schema/schema.h"

/* Iceberg types sluice writes (a uuid is written as a string: see doc/iceberg.md). */
enum ice_kind {
	ICE_BOOLEAN = 0, ICE_INT, ICE_LONG, ICE_FLOAT, ICE_DOUBLE, ICE_DECIMAL, ICE_DATE, ICE_TIME,
	ICE_TIMESTAMP, ICE_TIMESTAMPTZ, ICE_STRING, ICE_BINARY,
	ICE_LIST_STRING,           /* list<string>, elements required */
};

/* The most digits an Iceberg decimal may have; a wider numeric is a string. */
#define ICE_DECIMAL_MAX_PRECISION 38

/* What a field holds: a source column, or one of sluice's metadata columns. */
enum ice_meta {
	ICE_M_NONE = -1,
	ICE_M_UUID = 0, ICE_M_SOURCE_TS, ICE_M_READ_TS, ICE_M_CHANGE_TYPE, ICE_M_CSN, ICE_M_IS_DELETED,
	ICE_M_TX_ID, ICE_M_UNCHANGED,
	ICE_M_POS,                 /* ICE_M_POS + i: the source's i-th position field */
};

struct ice_field {
	int id;
	int elem_id;               /* ICE_LIST_STRING: the element's field id */
	char *name;                /* owned */
	char *doc;                 /* the source column's doc (how it is masked), or NULL (owned) */
	enum ice_kind kind;
	int precision, scale;      /* ICE_DECIMAL */
	bool required;
	bool key;                  /* merge mode: a key column (required; in identifier-field-ids) */
	int col;                   /* the source column, or -1 */
	int meta;                  /* enum ice_meta, ICE_M_NONE for a source column */
};

struct ice_schema {
	int id;                    /* schema-id */
	int nfields;
	struct ice_field *f;       /* owned */
	int last_column_id;        /* the table's, after this schema's ids */
	/* The CSN of the change the schema was made for (a new schema of
	 * ice_schema_of_version), kept in the table's properties as
	 * sluice.schema-csn.<id>; "" unknown. */
	char csn[SL_CSN_LEN + 1];
};

void ice_schema_free(struct ice_schema *s);

/* The Iceberg schema of table version t.  merge: the key columns are
 * required fields, named by the schema's identifier-field-ids.  cur is the table's current schema
 * as its metadata holds it (a JSON object; NULL for a new table) and
 * last_column_id the metadata's last-column-id (0 for a new table).  A
 * column keeps the id of cur's field of the same name; a new column gets
 * the next id.  *changed says whether the result differs from cur (then its
 * id is cur's schema-id + 1).  A column widened (ice_widen.h) keeps its id
 * and takes the wider type.  A field of cur that t no longer has (a column
 * dropped, or renamed: the sink sees names only) leaves the schema, and its
 * id is never given again: a column added later under its name gets a new
 * one.  A field of cur that t has with another type, or a key field (in
 * cur's identifier-field-ids) that t no longer has, is an error naming the
 * table and the change: no retry mends it, so it returns SL_EPREREQ (exit 3).  Returns 0, or a negative
 * enum sl_status with a message in err. */
int ice_schema_of_table(struct ice_schema *out, bool *changed, const struct sl_table *t, bool merge,
			const json_t *cur, int last_column_id, char *err, size_t errlen);

/* ice_schema_of_table for a change at CSN csn (NULL: none known) in a
 * table whose metadata is meta (NULL for a new table), with one more rule
 * (doc/iceberg.md, "Older table versions"): a field of the current schema
 * that t lacks stays in the schema, with no source column (written null),
 * when the change that added it to the table (ice_meta_field_csn) comes
 * after csn and it is neither a key field nor required.  Such a t is an
 * older version of the table, from a replay of earlier positions (a
 * checkpoint behind what the table holds, a backfill redone at a later
 * snapshot), not a drop: the column comes back with the changes after the
 * one that added it, and would otherwise come back as a new field, its
 * values in the files written before invisible.  A new schema's csn is
 * csn.  Returns as ice_schema_of_table. */
int ice_schema_of_version(struct ice_schema *out, bool *changed, const struct sl_table *t, bool merge,
			  const json_t *meta, const char *csn, char *err, size_t errlen);

/* The CSN of the change that added field id to the table of metadata
 * meta: the property sluice.schema-csn.<schema-id> of the first schema that
 * holds the field, or NULL when unknown (a schema made without a CSN, or
 * by an older sluice).  Borrowed from meta. */
const char *ice_meta_field_csn(const json_t *meta, int id);

/* The schema as the metadata JSON js holds it (a compaction's rewrite):
 * fields, ids, types, doc, and the key from identifier-field-ids; no field
 * has a source column (col -1, meta ICE_M_NONE).  Returns 0, or -1 when js
 * holds a type sluice does not write or memory ran out. */
int ice_schema_from_json(struct ice_schema *out, const json_t *js);

/* The schema cur (the table's current one, as its metadata holds it), to
 * write a change of a table version without columns: the TRUNCATE marker
 * of a table dropped at the source, which leaves the schema as it is.  Its
 * metadata fields (found by name; src: the source's position fields, or
 * NULL) are written as such, its payload fields as null (col -1, meta
 * ICE_M_NONE).  Returns 0, or -1 as ice_schema_from_json. */
int ice_schema_for_marker(struct ice_schema *out, const json_t *cur, const struct sl_source_desc *src);

/* For each field of s, the place among the fields of a data file's records,
 * whose Avro schema (JSON text, as the file's header holds it) is avro, of
 * the field with the same field-id, or -1 when the file has none (a column
 * added after the file was written, or dropped and added again under its
 * name: a new field, whose values are not the old ones).  idx has
 * s->nfields entries.  Returns 0, or -1 when avro is no record schema or
 * memory ran out. */
int ice_field_index(int *idx, const struct ice_schema *s, const char *avro, size_t len);

/* The name a source column gets: a leading '_' is doubled.  Appends to out. */
int ice_column_name(struct sl_buf *out, const char *name);

/* The schema as the metadata JSON holds it; a new reference, NULL when out
 * of memory. */
json_t *ice_schema_json(const struct ice_schema *s);

/* Appends the Avro schema (JSON) of the data files of s to out. */
int ice_data_avro_schema(struct sl_buf *out, const struct ice_schema *s);

/* Appends the Avro record of change c (c->table is the version s was made
 * for) to out.  Returns 0, or -1 with a message in err; out is then as it
 * was. */
int ice_encode_change(struct sl_buf *out, const struct ice_schema *s, const struct sl_change *c, char *err,
		      size_t errlen);

/* A field's encoded bytes, taken from a committed record (ice_fill.h). */
struct ice_raw {
	unsigned char *p;              /* NULL: none */
	size_t len;
};

/* ice_encode_change, with raw[i] (when raw and raw[i].p) written as field
 * i's bytes instead of c's value; such a field is not listed in
 * _unchanged_columns. */
int ice_encode_change_raw(struct sl_buf *out, const struct ice_schema *s, const struct sl_change *c,
			  const struct ice_raw *raw, char *err, size_t errlen);

/* Appends the Avro schema (JSON) of the equality delete files of s to out:
 * its key fields.  Returns 0, or -1 (out of memory). */
int ice_delete_avro_schema(struct sl_buf *out, const struct ice_schema *s);

/* Appends the equality delete record of change c's key to out.  Returns 0,
 * or -1 with a message in err; out is then as it was. */
int ice_encode_key(struct sl_buf *out, const struct ice_schema *s, const struct sl_change *c, char *err,
		   size_t errlen);

/* ---- table metadata ---- */

/* A new table's metadata (no snapshot yet) with schema s (and its
 * sluice.schema-csn property, when s->csn is known); table_uuid is the
 * text form.  A new reference, NULL when out of memory. */
json_t *ice_meta_new(const char *table_uuid, const char *location, const struct ice_schema *s,
		     int64_t now_ms);

/* Adds schema s to meta and makes it current (with its sluice.schema-csn
 * property, when s->csn is known).  Returns 0, or -1 (out of memory). */
int ice_meta_add_schema(json_t *meta, const struct ice_schema *s);

/* A snapshot to commit. */
struct ice_snapshot {
	int64_t id;
	int64_t parent_id;              /* -1: none */
	int64_t sequence_number;
	int64_t timestamp_ms;
	const char *manifest_list;      /* its path */
	int schema_id;
	int64_t added_files, added_records, added_size;
	int64_t added_delete_files, added_deletes;  /* equality delete files and their records */
	bool truncate;                  /* drops every earlier file (sluice.truncate) */
	bool replace;                   /* a compaction: operation replace, the same rows in other files */
	const char *stream, *position;  /* sluice.stream, sluice.position */
	const char *last_csn;           /* sluice.last-csn: the table's last change CSN from the log, or NULL */
};

/* Adds snapshot sn to meta and makes it current (refs.main, snapshot-log);
 * prev_file is the metadata file meta was read from (metadata-log), or
 * NULL.  Returns 0, or -1 (out of memory). */
int ice_meta_add_snapshot(json_t *meta, const struct ice_snapshot *sn, const char *prev_file,
			  int64_t prev_ms);

/* Adds prev_file, the metadata file meta was read from (its
 * last-updated-ms prev_ms), to meta's metadata-log: for a commit that
 * changes the table's metadata only (a new schema), which keeps its
 * current snapshot.  Returns 0, or -1 (out of memory). */
int ice_meta_log_previous(json_t *meta, const char *prev_file, int64_t prev_ms);

/* Old metadata files, as Iceberg's table properties rule them (a table's
 * "properties" may set them, as an engine does; sluice's defaults stand
 * otherwise): metadata-log keeps the newest
 * write.metadata.previous-versions-max entries (at least 1; default
 * ICE_PREVIOUS_VERSIONS_MAX), and with
 * write.metadata.delete-after-commit.enabled (default true, where Iceberg's
 * is false: a table of sluice's commits once per flush) the files of the
 * entries dropped are deleted once the commit that dropped them is
 * published. */
#define ICE_PREVIOUS_VERSIONS_MAX 100
#define ICE_PROP_DELETE_AFTER_COMMIT "write.metadata.delete-after-commit.enabled"
#define ICE_PROP_PREVIOUS_VERSIONS_MAX "write.metadata.previous-versions-max"

/* Drops from meta's metadata-log all but its newest previous-versions-max
 * entries.  Returns a new array (the caller's) of the metadata-file
 * locations of those dropped that the table deletes after commit (empty:
 * none, or the property says not to), or NULL (out of memory). */
json_t *ice_meta_trim_log(json_t *meta);
/* Whether meta's table deletes its old metadata files (the property, or the
 * default), and the number of previous versions it keeps. */
bool ice_meta_deletes_old(const json_t *meta);
int ice_meta_versions_kept(const json_t *meta);

/* The current snapshot of meta (an object, borrowed), or NULL. */
const json_t *ice_meta_current_snapshot(const json_t *meta);
/* The current schema of meta (an object, borrowed), or NULL. */
const json_t *ice_meta_current_schema(const json_t *meta);
/* A snapshot summary's string property, or NULL. */
const char *ice_snapshot_prop(const json_t *snap, const char *key);

/* ---- manifests ---- */

/* What a manifest or file holds (content of a manifest entry's data_file). */
enum ice_content { ICE_DATA = 0, ICE_EQUALITY_DELETES = 2 };

struct ice_col_stats;

/* One data file (or delete file) of a manifest. */
struct ice_data_file {
	const char *path;
	enum ice_content content;
	int64_t records;
	int64_t size;
	struct ice_col_stats *stats;    /* per field of the manifest's schema (ice_stats.h), or NULL: none */
};

/* One manifest of a manifest list. */
struct ice_manifest_file {
	char *path;                     /* owned */
	bool deletes;                   /* a delete manifest (content 1) */
	int64_t length;
	int64_t sequence_number;        /* the snapshot's that added the manifest */
	int64_t min_sequence_number;    /* the least data sequence number of its files */
	int64_t snapshot_id;            /* added_snapshot_id */
	int added_files;
	int64_t added_rows;
};

/* Appends to out the manifest (an Avro container file) of the nfiles data
 * files snapshot snapshot_id adds, for table schema s (its JSON is in the
 * file's key-value metadata).  The files are all of one content: equality
 * delete files name s's key fields in equality_ids.  Each entry carries its
 * file's column statistics (ice_stats.h), data sequence number seq
 * (sequence_number) and file sequence number file_seq
 * (file_sequence_number; negative: null, which a reader replaces with the
 * manifest's sequence number in the manifest list, the committing
 * snapshot's). */
int ice_manifest_encode(struct sl_buf *out, const struct ice_schema *s, int64_t snapshot_id, int64_t seq,
			int64_t file_seq, const struct ice_data_file *files, int nfiles);

/* Appends to out the manifest list of snapshot sn: the n manifests mf. */
int ice_manifest_list_encode(struct sl_buf *out, const struct ice_snapshot *sn,
			     const struct ice_manifest_file *mf, int n);

/* The reader's half (sluice verify, compaction).  One entry of a manifest,
 * as read back. */
struct ice_entry {
	int status;                     /* 0 existing, 1 added, 2 deleted */
	enum ice_content content;
	char *path;                     /* its data_file's file_path (owned) */
	int64_t records, size;          /* record_count, file_size_in_bytes */
	int64_t seq;                    /* its data sequence number, -1: the manifest's */
};

/* Reads the entries of the manifest at file (a local file) into *out (*n
 * of them; free with ice_entries_free).  Returns 0, or -1 with a message in
 * err naming the file (unreadable, or an entry without a required field). */
int ice_manifest_read(const char *file, struct ice_entry **out, int *n, char *err, size_t errlen);
void ice_entries_free(struct ice_entry *e, int n);

/* Reads the manifest list at file (a local file) into *out (*n entries,
 * paths owned; free each path, then the array).  Returns 0, or -1 with a
 * message in err naming the file. */
int ice_manifest_list_read(const char *file, struct ice_manifest_file **out, int *n, char *err, size_t errlen);

/* The bytes of the Avro fixed of a decimal of precision digits (the
 * specification's table: the fewest bytes that hold 10^precision - 1). */
int ice_decimal_size(int precision);

/* The Iceberg type text of a field ("long", "decimal(10,2)"); for
 * ICE_LIST_STRING "list". */
const char *ice_kind_text(enum ice_kind k, int precision, int scale, char *buf, size_t len);

#endif
