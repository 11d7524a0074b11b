/*
 * sinks/clickhouse/ch_layout.h: how one table version lies in a ClickHouse
 * table: its columns, their types and order, the metadata columns, the
 * sorting key, and how a change becomes a RowBinary row.  Also the merge
 * version (_version) derived from a change's CSN.
 *
 * A layout is made from a table version (ch_layout_new) with its columns in
 * creation order: the payload columns in source order, then the metadata
 * columns.  Once the destination table exists, ch_layout_match() puts the
 * columns in the destination's order (so that an insert may leave out its
 * column list) or says what differs.  A layout copies everything it needs:
 * it never points into the table version, which the agent frees when a
 * newer version replaces it.
 *
 * Column names (doc/clickhouse.md): a payload column keeps its source name,
 * except that a name starting with "_" gets one more "_" in front, so no
 * payload column can take the name of a metadata column (all of which are
 * "_" and a letter).  The mapping is one-to-one.
 */
#ifndef SLUICE_SINKS_CLICKHOUSE_CH_LAYOUT_H
#define SLUICE_SINKS_CLICKHOUSE_CH_LAYOUT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"
#include "schema/schema.h"
#include "sinks/clickhouse/ch_rowbin.h"

/* ---- the merge version ----
 *
 * _version = (position part << 8) + shift(position part) + sequence, for
 * position parts below 2^56 (doc/clickhouse.md, "The version"):
 *  - at one position, every sequence number (0 to 2^32 - 1) has its own
 *    version, in order;
 *  - each position owns 256 versions; a transaction whose sequence numbers
 *    pass 255 records a step in the version map, a table of
 *    (position, shift) pairs kept in ClickHouse: every later position is
 *    moved up by the versions it used beyond 255, so that its last change
 *    still comes before the next position's first;
 *  - shift(p) is the shift of the map's last step below p (0 without one):
 *    it never decreases, so a later change never gets a lower version;
 *  - append mode (where _version orders nothing) keeps the map-less form,
 *    position << 8 | min(sequence, 255);
 *  - a position part of 2^56 or more, or a version past 2^64, is refused.
 * The map-less form is what tables written before the map hold: every
 * version here is at least that one for the same change, so old rows are
 * never newer than new ones of later changes.
 */
#define CH_VERSION_SEQ_BITS 8
#define CH_VERSION_POS_LIMIT (UINT64_C(1) << (64 - CH_VERSION_SEQ_BITS))
#define CH_VERSION_ROOM 255u   /* sequences a position holds without a step */

/* The version of a change at position part pos with sequence seq, moved up
 * by shift.  Returns 0 with *out set, or -1 when pos is CH_VERSION_POS_LIMIT
 * or more or the version would pass 2^64 - 1. */
int ch_version(uint64_t pos, uint32_t seq, uint64_t shift, uint64_t *out);

/* The version map of one table: its steps by position, and the position
 * being written. */
struct ch_vstep {
	uint64_t pos;        /* positions after it ... */
	uint64_t shift;      /* ... are moved up by this much */
};
struct ch_vmap {
	struct ch_vstep *steps;        /* ascending pos */
	size_t n, cap;
	bool open;                     /* pos and top are set */
	bool closed;                   /* pos's step, if it needs one, is made */
	uint64_t pos;                  /* the position of the last change noted */
	uint32_t top;                  /* its highest sequence number */
};

/* The shift of positions at pos: that of the last step below pos. */
uint64_t ch_vmap_shift(const struct ch_vmap *m, uint64_t pos);

/* Adds a step (a step at the same position is replaced).  Returns 1 when
 * the map changed, 0 when it had that step already, -1 out of memory. */
int ch_vmap_add(struct ch_vmap *m, uint64_t pos, uint64_t shift);

/* Whether the position being written needs a step not made yet (its
 * sequences passed CH_VERSION_ROOM). */
bool ch_vmap_pending(const struct ch_vmap *m);

/* Makes the step of the position being written, if it needs one (at its
 * transaction's end), adds it and returns it in *step.  Returns 1 with a
 * step (it must reach ClickHouse before the checkpoint passes the
 * transaction, and before any row of a later position; a replay makes the
 * same step again, so one lost with a failed batch is recorded then), 0
 * without, -1 out of memory. */
int ch_vmap_close(struct ch_vmap *m, struct ch_vstep *step);

/* Notes a change at (pos, seq), before its version is taken.  At another
 * position than the last change noted, that one is closed first
 * (ch_vmap_close: same returns); a higher sequence at the same position
 * opens it again. */
int ch_vmap_note(struct ch_vmap *m, uint64_t pos, uint32_t seq, struct ch_vstep *step);

void ch_vmap_free(struct ch_vmap *m);

/* ---- metadata columns ---- */

enum ch_meta {
	CH_M_UUID = 0,          /* _uuid String: the record's uuid, canonical text (modern: UUID) */
	CH_M_SOURCE_TS,         /* _source_timestamp Int64: commit (or snapshot) time, µs
				 * (modern: DateTime64(6, 'UTC')) */
	CH_M_READ_TS,           /* _read_timestamp Int64: when sluice read it, µs (same) */
	CH_M_CHANGE_TYPE,       /* _change_type String: INSERT, UPDATE-INSERT, ... */
	CH_M_CSN,               /* _csn String: the change sequence number */
	CH_M_VERSION,           /* _version UInt64: ch_version() of the CSN */
	CH_M_IS_DELETED,        /* _is_deleted UInt8 */
	CH_M_TX_ID,             /* _tx_id UInt64 */
	CH_M_UNCHANGED,         /* _unchanged_columns Array(String) */
	CH_M_POS,               /* the source position fields: CH_M_POS + i */
};
#define CH_M_FIXED CH_M_POS   /* metadata columns besides the position fields */

/* The metadata column name of enum ch_meta m (m < CH_M_POS). */
const char *ch_meta_name(int m);

struct ch_col {
	char *name;             /* the ClickHouse column name (owned) */
	struct ch_type type;
	int src;                /* payload: the source column's index; -1 for metadata */
	int meta;               /* metadata: enum ch_meta (CH_M_POS + i); -1 for payload */
	bool key;               /* in the sorting key */
	char *comment;          /* the source column's doc (how it is masked), or NULL (owned) */
};

struct ch_layout {
	bool merge;             /* merge mode: key columns not Nullable, sorted by key */
	enum ch_flavor flavor;  /* legacy or modern types (doc/clickhouse.md, "Layouts") */
	int ncols;
	struct ch_col *cols;    /* creation order, or the destination's once matched */
	int nsrc;               /* the table version's columns (0 for a TRUNCATE marker's) */
	int *of_src;            /* source column i -> index in cols */
	int nkeys;
	int *keys;              /* the primary-key source columns (indexes into cols), in source order */
	int of_meta[CH_M_POS + SL_META_MAX];   /* metadata column -> index in cols */
	int nmeta_pos;          /* source position fields */
	const struct sl_source_desc *desc;     /* static */
	char schema_key[17];
	char *object;           /* the table's object name (owned) */
	bool partial;           /* the destination has columns besides these (kept): name them on insert */
	char **keep;            /* merge mode: destination columns this version lacks that stay (it is
				 * older than the change that added them: ch_layout_keep) (owned) */
	int nkeep;
};

/* Has ch_layout_match() keep destination column name, which l lacks (an
 * older table version than the change that added it: doc/clickhouse.md,
 * "Older table versions"), instead of asking to drop it.  Returns 0, or -1
 * when out of memory. */
int ch_layout_keep(struct ch_layout *l, const char *name);

/* The ClickHouse name of source column name: malloc'd, NULL when out of
 * memory. */
char *ch_column_name(const char *name);

/* Makes the layout of table version t for mode merge, with the types of
 * layout fl.  A merge-mode layout needs a primary key.  Returns 0 with *out
 * (free with ch_layout_free), or -1 with a message in err. */
int ch_layout_new(struct ch_layout **out, const struct sl_table *t, bool merge, enum ch_flavor fl, char *err,
		  size_t errlen);
void ch_layout_free(struct ch_layout *l);

/* A column of the destination table as system.columns lists it. */
struct ch_dest_col {
	char *name;
	char *type;
	bool in_sorting_key;
};

enum ch_match {
	CH_MATCH_SAME = 0,      /* the destination has l's columns (append mode: and columns kept): l now
				 * follows its order */
	CH_MATCH_ALTER,         /* the destination needs an ALTER TABLE (struct ch_alter says which) */
	CH_MATCH_CONFLICT,      /* anything else: the message says what */
};

/* What ch_layout_match() found to change in the destination's table. */
struct ch_alter {
	int *add;               /* payload columns to add (indexes into l->cols, none a key column) */
	int nadd;
	int *modify;            /* columns widened at the source (indexes into l->cols): MODIFY COLUMN */
	int nmodify;
	int *drop;              /* columns dropped or renamed at the source (indexes into dest): in merge
				 * mode to drop; in append mode kept, NULL in the rows written from now on
				 * (none of l->keep, which stay in either mode) */
	int ndrop;
};

void ch_alter_free(struct ch_alter *a);

/* Compares l with the destination's columns (in their order).  On SAME,
 * reorders l's columns to the destination's order (append mode: a column
 * dropped at the source is kept, and l->partial set: the inserts name their
 * columns).  On ALTER, *a lists the columns to add, to widen and (merge mode)
 * to drop.  wrote (nwrote columns, or NULL) are the columns as sluice last
 * made them: a column ClickHouse has and the version lacks is dropped (or
 * kept) only when sluice made it with ClickHouse's type, and a changed type
 * is widened only when ClickHouse's type is the one sluice made and the new
 * one holds every value of it (Int32 to Int64, Float32 to Float64, a Decimal
 * with more digits, not a key column).  On CONFLICT, err names the table (by
 * l->object), the column and the change: a column the destination has that
 * sluice did not make so, a changed type said to have changed at the source,
 * in ClickHouse or on both sides (without wrote: that either may have), a
 * changed key, or a table made for the other write mode.  *a is zeroed
 * first, and freed with ch_alter_free() by the caller.  Returns the enum, or
 * -1 when out of memory. */
int ch_layout_match(struct ch_layout *l, const struct ch_dest_col *dest, int ndest,
		    const struct ch_dest_col *wrote, int nwrote, struct ch_alter *a, char *err, size_t errlen);

/* Appends "(`a`, `b`, ...)" for the layout's columns in order, or for the
 * metadata columns only (meta_only). */
int ch_layout_column_list(struct sl_buf *b, const struct ch_layout *l, bool meta_only);

/* What a row carries besides its payload. */
struct ch_rowmeta {
	const unsigned char *uuid;      /* 16 bytes */
	int64_t source_ts_us;
	int64_t read_ts_us;
	uint64_t tx_id;
	uint64_t version;
	const char *csn;                /* SL_CSN_LEN characters */
	enum sl_op op;
	int nmeta;                      /* position fields (the layout's nmeta_pos) */
	struct sl_meta_value meta[SL_META_MAX];
};

/* Fills m from change c (its position fields' text goes into buf,
 * SL_META_BUF bytes, which must outlive m).  The version is taken from the
 * version map vm (merge mode), or without one (NULL: append mode).  Returns
 * 0, or -1 with a message when the version cannot be derived. */
int ch_rowmeta_of_change(struct ch_rowmeta *m, const struct sl_change *c, const struct ch_vmap *vm, char *buf,
			 char *err, size_t errlen);

/* Appends one row in the layout's column order: payload values vals
 * (l->nsrc of them; NULL writes every payload column as NULL), the
 * metadata from m.  SL_V_UNCHANGED values are written as NULL and listed in
 * _unchanged_columns.  With meta_only, only the metadata columns (in
 * ch_layout_column_list(meta_only) order).  Returns the number of values
 * clamped (dates outside Date32's range: 0 in the legacy layout), or -1
 * with a message in err; b is then left as it was. */
int ch_layout_put_row(struct sl_buf *b, const struct ch_layout *l, const struct ch_rowmeta *m,
		      const struct sl_value *vals, bool meta_only, char *err, size_t errlen);

#endif
