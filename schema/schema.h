/*
 * schema/schema.h: the data model shared by sources, backfill and sinks.
 *
 * A table schema version describes the columns of one source table as sluice
 * writes them.  A change record is one row event (or a TRUNCATE) with its
 * position metadata.  Column values travel as text in PostgreSQL's output
 * format (what pgoutput and COPY ... TO STDOUT produce); sinks convert them to
 * their typed form.  Values point into memory owned by whoever produced the
 * change and are valid only for the duration of the sink's write call.
 */
#ifndef SLUICE_SCHEMA_SCHEMA_H
#define SLUICE_SCHEMA_SCHEMA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* How a column is typed in the output (see doc/types.md). */
enum sl_type {
	SL_T_STRING = 0,   /* text, varchar, char, and everything not listed below */
	SL_T_BOOL,         /* bool: text "t" / "f" */
	SL_T_INT32,        /* int2, int4 */
	SL_T_INT64,        /* int8 */
	SL_T_FLOAT,        /* float4: text may be "NaN", "Infinity", "-Infinity" */
	SL_T_DOUBLE,       /* float8 */
	SL_T_DECIMAL,      /* numeric(p,s) with 0 <= s <= p: Avro bytes/decimal */
	SL_T_BYTES,        /* bytea: text "\x0a0b..." (hex output format) */
	SL_T_DATE,         /* date: "2024-01-31", "0044-03-15 BC", "infinity" */
	SL_T_TIME,         /* time: "13:45:00.123456" -> time-micros */
	SL_T_TIMESTAMP,    /* timestamp: "2024-01-31 13:45:00.123456" -> timestamp-micros */
	SL_T_TIMESTAMPTZ,  /* timestamptz: "2024-01-31 13:45:00.123456+00" -> timestamp-micros */
	SL_T_UUID,         /* uuid -> string with logicalType uuid */
	SL_T_JSON,         /* json, jsonb -> string */
};

struct sl_column {
	char *name;          /* source column name (owned) */
	char *avro_name;     /* a valid, unique Avro field name derived from name (owned) */
	enum sl_type type;
	int precision;       /* SL_T_DECIMAL only */
	int scale;           /* SL_T_DECIMAL only */
	uint32_t type_oid;   /* source type (PostgreSQL type OID) */
	int32_t typmod;      /* source type modifier, -1 if none */
	char *type_name;     /* source type name as the catalog shows it, e.g. "numeric(10,2)" (owned, may be NULL) */
	bool is_key;         /* part of the primary key */
};

enum sl_source_kind { SL_SOURCE_POSTGRES = 0, SL_SOURCE_MYSQL };

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
	char schema_key[17]; /* 16 lowercase hex digits: hash of the column list */
	uint32_t relid;      /* source relation id (PostgreSQL OID), 0 if unknown */
	const struct sl_source_desc *src; /* the source kind that described it (static) */
};

enum sl_op {
	SL_OP_INSERT = 0,
	SL_OP_UPDATE_INSERT,
	SL_OP_UPDATE_DELETE,
	SL_OP_DELETE,
	SL_OP_TRUNCATE,
};

enum sl_value_kind {
	SL_V_NULL = 0,
	SL_V_TEXT,       /* p/len hold the value in the source's text output format */
	SL_V_UNCHANGED,  /* unchanged TOASTed value: not sent by the source */
};

struct sl_value {
	const char *p;
	uint32_t len;
	uint8_t kind;    /* enum sl_value_kind */
};

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
/* Sets c->csn_pos, c->seq and c->csn. */
void sl_change_set_csn(struct sl_change *c, uint64_t csn_pos, uint32_t seq);

/* Sets c->uuid to the UUIDv5 of stream, schema.table and CSN (plus, when
 * extra is not NULL, extra bytes such as a backfill row's key, because every
 * backfill row shares the snapshot's CSN). */
void sl_change_set_uuid(struct sl_change *c, const char *stream, const void *extra, size_t extra_len);

/* Returns the canonical text of an op: "INSERT", "UPDATE-INSERT", ... */
const char *sl_op_name(enum sl_op op);

/* Table schema lifecycle.  sl_table_new copies ns and name; columns are
 * added with sl_table_add_column (copies name and type_name), then
 * sl_table_finish derives avro names, the object name and the schema key. */
struct sl_table *sl_table_new(const char *ns, const char *name);
int sl_table_add_column(struct sl_table *t, const char *name, uint32_t type_oid, int32_t typmod,
			const char *type_name, bool is_key);
int sl_table_finish(struct sl_table *t);
void sl_table_free(struct sl_table *t);
/* True if at least one column is part of the primary key. */
bool sl_table_has_key(const struct sl_table *t);
/* True if both describe the same columns (names, types, modifiers, keys). */
bool sl_table_same_columns(const struct sl_table *a, const struct sl_table *b);

/* Maps a PostgreSQL type OID and typmod to an output type; sets precision and
 * scale for SL_T_DECIMAL. */
enum sl_type sl_pg_type_map(uint32_t oid, int32_t typmod, int *precision, int *scale);

#endif
