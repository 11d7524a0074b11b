/*
 * schema/schema.h: the data model shared by sources, backfill and sinks.
 *
 * A table schema version describes the columns of one source table as sluice
 * writes them.  A change record is one row event (or a TRUNCATE) with its
 * position metadata.  Column values travel typed (struct sl_value): each
 * source converts its wire form (pgoutput text, COPY text, binlog row images)
 * into them, and each sink encodes them; no sink parses a source's format.
 * Values point into memory owned by whoever produced the change and are valid
 * only for the duration of the sink's write call.
 */
#ifndef SLUICE_SCHEMA_SCHEMA_H
#define SLUICE_SCHEMA_SCHEMA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <nettle/sha1.h>

struct sl_buf;  /* common/buf.h */

/* How a column is typed in the output (see doc/types.md), and the value
 * kinds (enum sl_value_kind) it accepts.  Every column also accepts SL_V_NULL
 * and SL_V_UNCHANGED; any other kind is an error for a sink.
 *
 *   type              value kind       notes
 *   SL_T_STRING       SL_V_STRING
 *   SL_T_BOOL         SL_V_BOOL
 *   SL_T_INT32        SL_V_INT         within int32 range
 *   SL_T_INT64        SL_V_INT
 *   SL_T_FLOAT        SL_V_FLOAT       NaN and infinities allowed
 *   SL_T_DOUBLE       SL_V_DOUBLE      NaN and infinities allowed
 *   SL_T_DECIMAL      SL_V_DECIMAL     scale = the column's scale, at most
 *                                      precision digits
 *   SL_T_BYTES        SL_V_BYTES
 *   SL_T_DATE         SL_V_DATE        within int32 range
 *   SL_T_TIME         SL_V_TIME
 *   SL_T_TIMESTAMP    SL_V_TIMESTAMP
 *   SL_T_TIMESTAMPTZ  SL_V_TIMESTAMP   already converted to UTC
 *   SL_T_UUID         SL_V_UUID
 *   SL_T_JSON         SL_V_JSON
 *   SL_T_UINT64       SL_V_UINT        MySQL BIGINT UNSIGNED: the full 0 .. 2^64-1
 */
enum sl_type {
	SL_T_STRING = 0,   /* text, varchar, char, and everything not listed below */
	SL_T_BOOL,         /* bool */
	SL_T_INT32,        /* int2, int4 */
	SL_T_INT64,        /* int8 */
	SL_T_FLOAT,        /* float4 */
	SL_T_DOUBLE,       /* float8 */
	SL_T_DECIMAL,      /* numeric(p,s) with 0 <= s <= p: Avro bytes/decimal */
	SL_T_BYTES,        /* bytea */
	SL_T_DATE,         /* date -> days since 1970-01-01 */
	SL_T_TIME,         /* time -> time-micros */
	SL_T_TIMESTAMP,    /* timestamp -> timestamp-micros, the value read as UTC */
	SL_T_TIMESTAMPTZ,  /* timestamptz -> timestamp-micros, converted to UTC */
	SL_T_UUID,         /* uuid -> string with logicalType uuid */
	SL_T_JSON,         /* json, jsonb -> string */
	SL_T_UINT64,       /* unsigned 64-bit (MySQL BIGINT UNSIGNED): a sink without an unsigned
			    * type writes it exactly, e.g. avro_dir as decimal(20,0) */
};

/* A typed value.  p/len point into memory owned by the producer of the change
 * (see the top of this file); kind says which other members mean anything. */
enum sl_value_kind {
	SL_V_NULL = 0,     /* SQL NULL */
	SL_V_UNCHANGED,    /* not sent by the source because it did not change (PostgreSQL's unchanged TOAST value) */
	SL_V_BOOL,         /* b */
	SL_V_INT,          /* i: signed 64-bit */
	SL_V_UINT,         /* u: unsigned 64-bit */
	SL_V_FLOAT,        /* f */
	SL_V_DOUBLE,       /* d */
	SL_V_DECIMAL,      /* p/len: the unscaled value's decimal digits, ASCII, no sign, no leading zeros ("0" for zero); neg; scale */
	SL_V_BYTES,        /* p/len */
	SL_V_STRING,       /* p/len: text (UTF-8 for PostgreSQL) */
	SL_V_JSON,         /* p/len: JSON text */
	SL_V_DATE,         /* i: days since 1970-01-01, proleptic Gregorian */
	SL_V_TIME,         /* i: microseconds since midnight */
	SL_V_TIMESTAMP,    /* i: microseconds since 1970-01-01 00:00:00 UTC */
	SL_V_UUID,         /* p: 16 bytes, len 16 */
};

struct sl_value {
	uint8_t kind;      /* enum sl_value_kind */
	bool neg;          /* SL_V_DECIMAL: negative (never set for zero by sluice's sources) */
	int16_t scale;     /* SL_V_DECIMAL: digits after the decimal point; sources set the column's
			    * scale (a sink pads a smaller one with zeros and refuses a larger one) */
	uint32_t len;      /* bytes at p */
	union { bool b; int64_t i; uint64_t u; float f; double d; const char *p; };
};

struct sl_column {
	char *name;          /* source column name (owned) */
	char *avro_name;     /* a valid, unique Avro field name: name itself when valid, else escaped (owned; see sl_table_finish) */
	enum sl_type type;
	int precision;       /* SL_T_DECIMAL only */
	int scale;           /* SL_T_DECIMAL only */
	uint32_t src_type;   /* the source's type id (PostgreSQL: type OID) */
	int32_t src_typmod;  /* the source's type modifier, -1 if none */
	char *type_name;     /* source type name as the catalog shows it, e.g. "numeric(10,2)" (owned, may be NULL) */
	bool is_key;         /* part of the primary key */
	/* Set by a source's catalog (not_null is false in tables read from a
	 * log's own descriptions, such as pgoutput's Relation messages): */
	bool not_null;       /* declared NOT NULL */
	bool in_identity;    /* named by the old row of an update or delete (PostgreSQL: in the replica
			      * identity, also as a Relation message flags it) */
	char *doc;           /* what the destination should know of the column, e.g. how it is masked
			      * (schema/mask.h); owned, NULL if nothing */
	/* The value that the rows the table had when the column was added read
	 * without any change having written it (PostgreSQL: attmissingval, the
	 * constant default of ADD COLUMN; MariaDB: the default of an instant
	 * ADD).  SL_V_NULL when there is none.  A later SET DEFAULT does not
	 * change it; a column dropped and added again has its own.  Its bytes
	 * (sl_value_has_bytes) are owned: set it with sl_column_set_missing. */
	struct sl_value missing;
};

/* ---- positions ----
 *
 * A position in a source's log.  It is opaque outside the source kind that
 * made it: that kind's struct sl_source_desc compares positions, derives the
 * CSN's position part and encodes them for the checkpoint.  It is a plain
 * value: copy it freely.  PostgreSQL uses w[0] (an LSN); a binlog source uses
 * both words (file sequence number, offset) and text (the GTID).
 */
#define SL_POS_TEXT_MAX 128

struct sl_position {
	uint64_t w[2];                  /* source-defined words */
	char text[SL_POS_TEXT_MAX];     /* source-defined, NUL-terminated, "" if unused */
};

/* The type of a source position field in source_metadata (see sl_source_desc). */
enum sl_meta_type {
	SL_META_STRING = 0,     /* Avro "string" */
	SL_META_LONG,           /* Avro "long" */
	SL_META_OPT_STRING,     /* Avro ["null", "string"], default null */
};

struct sl_meta_field {
	const char *name;
	enum sl_meta_type type;
};

/* One source position field's value: s/len for the string types (s NULL
 * for a null SL_META_OPT_STRING), i for SL_META_LONG. */
struct sl_meta_value {
	const char *s;
	size_t len;
	int64_t i;
};

#define SL_META_MAX 4       /* at most this many source position fields */
#define SL_META_BUF 256     /* text buffer for meta_values() */

/*
 * What a source kind tells the rest of sluice about its positions and its
 * records.  Each source kind has one static descriptor, and every table
 * version it makes points to it (sl_table.src), so a sink can write a record
 * without knowing which source produced it.
 */
struct sl_source_desc {
	const char *kind;                 /* "postgres", "mysql": the config's source type */
	const char *ns_field;             /* source_metadata's name for the namespace: "schema" | "database" */
	const char *read_method_cdc;      /* "postgresql-cdc-wal", "mysql-cdc-binlog" */
	const char *read_method_backfill; /* "postgresql-backfill", "mysql-backfill-fulldump" */
	/* <0, 0 or >0 as a is before, at or after b in the log. */
	int (*pos_compare)(const struct sl_position *a, const struct sl_position *b);
	/* The CSN's position part: a 64-bit number that orders transactions as
	 * their positions do (see sl_csn_format). */
	uint64_t (*pos_csn)(const struct sl_position *p);
	/* Text for the checkpoint and messages, and back.  encode returns 0, or
	 * -1 if out is too small; decode returns 0, or -1 if text is not a
	 * position of this kind. */
	int (*pos_encode)(const struct sl_position *p, char *out, size_t outlen);
	int (*pos_decode)(const char *text, struct sl_position *out);
	/* The source position fields of source_metadata, in record order, and
	 * their values for position p (text goes into buf, SL_META_BUF bytes). */
	int nmeta;
	const struct sl_meta_field *meta;
	void (*meta_values)(const struct sl_position *p, struct sl_meta_value *out, char *buf, size_t buflen);
};

struct sl_table {
	char *ns;            /* PostgreSQL schema, or MySQL database (owned) */
	char *name;          /* table name (owned) */
	char *object;        /* "<ns>_<name>", used in paths and the `object` field (owned) */
	int ncols;
	struct sl_column *cols;  /* owned array of ncols */
	int acols;           /* the room in cols (sl_table_add_column grows it by doubling) */
	char schema_key[17]; /* 16 lowercase hex digits: hash of the column list */
	uint32_t relid;      /* source relation id (PostgreSQL OID), 0 if unknown */
	/* The source's fingerprint of the rows the table spans beyond itself
	 * (PostgreSQL: its leaf partitions; 0 for a plain table).  When it
	 * changes, rows came or went without a change record (a partition was
	 * attached or detached), so the table is backfilled again. */
	uint64_t shape;
	/* The source's fingerprint of how the log lays out the table's rows
	 * where the log does not describe them itself (MySQL without
	 * binlog_row_metadata=FULL: column order, types, ENUM/SET strings,
	 * charsets, key); 0 when the log describes them.  When it differs from
	 * the one the checkpoint kept, the log's rows since the checkpoint may
	 * have another layout than today's, so the table is backfilled again. */
	uint64_t layout;
	unsigned src_flags;  /* source-defined (PostgreSQL: SL_PG_PARTITIONED) */
	/* Updates and deletes cannot name their row (PostgreSQL: no primary key
	 * and no replica identity, or REPLICA IDENTITY NOTHING). */
	bool no_row_identity;
	const struct sl_source_desc *src; /* the source kind that described it (static) */
	int64_t est_rows;    /* the source's estimate of its rows (PostgreSQL: reltuples), -1 unknown;
			      * for backfill progress only */
	/* The source's text for what its catalog knows of the columns beyond
	 * the names and types (PostgreSQL: their numbers, defaults and the
	 * table's file node; see sources/postgres/pg_rewrite.c), kept in the
	 * checkpoint and compared by sl_source_ops.columns_changed.  Owned;
	 * NULL when the source has none. */
	char *src_columns;
};

enum sl_op {
	SL_OP_INSERT = 0,
	SL_OP_UPDATE_INSERT,
	SL_OP_UPDATE_DELETE,
	SL_OP_DELETE,
	SL_OP_TRUNCATE,
};

/* The most digits a decimal value may have (PostgreSQL's numeric(1000,s)). */
#define SL_DECIMAL_MAX_DIGITS 1000

/* A value as a source's text protocol carries it, before conversion (pgoutput
 * tuples, COPY text): p/len hold the text for SL_TV_TEXT.  The text is
 * writable: a converter may decode a value in place when that only shrinks
 * it (PostgreSQL's hex bytea, see sources/postgres/pg_text.h), so that a
 * large value is never copied to be decoded. */
enum sl_text_kind { SL_TV_NULL = 0, SL_TV_UNCHANGED, SL_TV_TEXT };
struct sl_text_value { char *p; uint32_t len; uint8_t kind; };

/* True if a and b are the same value: the same kind and the same content
 * (floats compare by their bits, so NaN equals NaN and -0 differs from 0;
 * decimals by sign, scale and digits). */
bool sl_value_equal(const struct sl_value *a, const struct sl_value *b);

/* True when v's payload is v->len bytes at v->p (DECIMAL, BYTES, STRING,
 * JSON, UUID): what a copy of the value must carry along. */
static inline bool sl_value_has_bytes(const struct sl_value *v)
{
	return v->kind == SL_V_DECIMAL || v->kind == SL_V_BYTES || v->kind == SL_V_STRING ||
	       v->kind == SL_V_JSON || v->kind == SL_V_UUID;
}

/* Appends to b the canonical encoding of v that a backfill row's uuid is
 * derived from (see sl_change_set_uuid): the same value gives the same bytes
 * whatever source produced it, and the encoding is self-delimiting, so a
 * sequence of values is unambiguous.  It is the kind byte, then:
 *   SL_V_INT, SL_V_UINT, SL_V_DATE, SL_V_TIME, SL_V_TIMESTAMP:
 *                      8 bytes, big-endian (two's complement for signed)
 *   SL_V_FLOAT:        the 4 bytes of the IEEE 754 bits, big-endian
 *   SL_V_DOUBLE:       the 8 bytes of the IEEE 754 bits, big-endian
 *   SL_V_BOOL:         1 byte, 0 or 1
 *   SL_V_DECIMAL:      neg (1 byte, 0 or 1), scale (2 bytes, big-endian),
 *                      the digit count (4 bytes, big-endian), the digits
 *   SL_V_BYTES, SL_V_STRING, SL_V_JSON, SL_V_UUID:
 *                      the length (4 bytes, big-endian), the bytes
 *   SL_V_NULL, SL_V_UNCHANGED: nothing more.
 * Returns 0, or -1 if the buffer failed or the kind is unknown. */
int sl_value_key_bytes(struct sl_buf *b, const struct sl_value *v);

/* Appends to b the text of an SL_V_DECIMAL value: the digits with a "."
 * before the last scale digits, at least one digit before it, "-" first
 * when negative ("-0.05", "12", "3.10").  Returns 0, or -1 if b failed. */
int sl_value_decimal_text(struct sl_buf *b, const struct sl_value *v);

/* schema_key is an FNV-1a hash (sl_fnv1a, common/util.h). */

/* A fixed-width change sequence number: "<16 hex digits of position>-<10 digit sequence>". */
#define SL_CSN_LEN 27

struct sl_change {
	const struct sl_table *table;
	enum sl_op op;
	/* table->ncols values: the new row for INSERT / UPDATE-INSERT, the old row
	 * (or only its key columns, others SL_V_NULL) for DELETE / UPDATE-DELETE.
	 * NULL for TRUNCATE. */
	const struct sl_value *values;
	const char *read_method;       /* table->src's read_method_cdc or read_method_backfill */
	char csn[SL_CSN_LEN + 1];      /* see sl_change_set_csn() */
	/* The position of the change's transaction (backfill rows: the snapshot's
	 * position).  Its source_metadata fields come from table->src->meta_values. */
	const struct sl_position *pos;
	uint64_t csn_pos;              /* the CSN's position part, usually table->src->pos_csn(pos) */
	uint32_t seq;                  /* place in the transaction from 1; 0 for backfill rows */
	int64_t source_ts_us;          /* Unix microseconds: commit time, or snapshot time */
	int64_t read_ts_us;            /* Unix microseconds: when sluice read it */
	uint64_t tx_id;                /* source transaction id (xid), 0 for backfill */
	unsigned char uuid[16];        /* deterministic UUIDv5, see sl_change_set_uuid() */
};

/* Writes the CSN for a position part and sequence: 16 uppercase hex digits,
 * '-', 10 decimal digits.  Later changes get larger CSNs in plain string
 * order.  The position part is the source kind's pos_csn(): PostgreSQL's
 * commit LSN; a binlog source's file sequence number in the high 32 bits and
 * the offset of the transaction's first event in the low 32. */
void sl_csn_format(char out[static SL_CSN_LEN + 1], uint64_t position, uint32_t seq);
/* Turns csn, as sl_csn_format wrote it for (position, seq) with seq below
 * UINT32_MAX, into the CSN of (position, seq + 1): a carry through the
 * decimal digits, for the changes of a transaction, which follow each
 * other. */
void sl_csn_next_seq(char csn[static SL_CSN_LEN + 1]);
/* Sets c->csn_pos, c->seq and c->csn. */
void sl_change_set_csn(struct sl_change *c, uint64_t csn_pos, uint32_t seq);

/* Sets c->uuid to the UUIDv5 of stream, schema.table and CSN (plus, when
 * extra is not NULL, extra bytes such as a backfill row's key, because every
 * backfill row shares the snapshot's CSN). */
void sl_change_set_uuid(struct sl_change *c, const char *stream, const void *extra, size_t extra_len);

/* The part of the uuid's name that every record of one table of one stream
 * shares, hashed once: the SHA-1 state after the namespace and
 * "<stream>\0<schema>.<table>\0".  A writer keeps one per table version
 * and copies it for each record instead of hashing the prefix again. */
struct sl_uuid_prefix {
	const struct sl_table *table;  /* the version it was made for; NULL: unset */
	struct sha1_ctx h;
};
/* Makes u the prefix of stream and table t (which must outlive u). */
void sl_uuid_prefix_init(struct sl_uuid_prefix *u, const char *stream, const struct sl_table *t);
/* sl_change_set_uuid(c, stream, extra, extra_len) with u made for stream
 * and c->table: the same bytes, with the prefix not hashed again. */
void sl_change_set_uuid_from(struct sl_change *c, const struct sl_uuid_prefix *u, const void *extra,
			     size_t extra_len);

/* Returns the canonical text of an op: "INSERT", "UPDATE-INSERT", ... */
const char *sl_op_name(enum sl_op op);
/* The type's name in messages ("int64", "timestamptz"): no source's name for it. */
const char *sl_type_name(enum sl_type t);
/* A value kind's name in messages ("integer", "unchanged"). */
const char *sl_value_kind_name(unsigned kind);
/* Whether v, not null and not unchanged, has the kind a column of type t
 * takes (the table above).  Returns 0, or -1 with a message naming the
 * column: an unknown type, an unknown kind, or a kind that does not fit. */
int sl_value_check_kind(enum sl_type t, const struct sl_value *v, const char *column, char *err, size_t errlen);

/* Table schema lifecycle.  sl_table_new copies ns and name; columns are
 * added with sl_table_add_column (copies name and type_name), then
 * sl_table_finish derives avro names, the object name and the schema key.
 * The source maps its own type to type (with precision and scale for
 * SL_T_DECIMAL, ignored otherwise); src_type and src_typmod are the source's
 * type id and modifier as it reports them, and with the names and key flags
 * they make the schema key. */
struct sl_table *sl_table_new(const char *ns, const char *name);
/* The object name of ns.name: "<ns>_<name>", one-to-one and safe as a
 * folder name.  Common names stay as they are (public.order_items ->
 * public_order_items); '_' in the namespace is doubled (sales_q1.eu ->
 * sales__q1_eu), a leading '_' of the name is "%5F", and '%', '/' and
 * control characters are %XX.  Returns a malloc'd string, NULL when out of
 * memory. */
char *sl_object_name(const char *ns, const char *name);
int sl_table_add_column(struct sl_table *t, const char *name, enum sl_type type, int precision, int scale,
			uint32_t src_type, int32_t src_typmod, const char *type_name, bool is_key);
int sl_table_finish(struct sl_table *t);
void sl_table_free(struct sl_table *t);
/* True if at least one column is part of the primary key. */
/* Sets col's missing value to a copy of v (SL_V_NULL: none).  Returns 0,
 * or -1 when out of memory (col then has none).  The table's schema_key
 * covers missing values: call sl_table_finish after. */
int sl_column_set_missing(struct sl_column *col, const struct sl_value *v);

bool sl_table_has_key(const struct sl_table *t);
/* A copy of table version t (its columns, names, key, schema_key and source
 * descriptor), for a sink that encodes changes after write() returns; free
 * it with sl_table_free.  NULL when out of memory. */
struct sl_table *sl_table_copy(const struct sl_table *t);
/* True if both describe the same columns (names, types, modifiers, keys). */
bool sl_table_same_columns(const struct sl_table *a, const struct sl_table *b);

#endif
