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
	uint32_t src_type;   /* the source's type id (PostgreSQL: type OID) */
	int32_t src_typmod;  /* the source's type modifier, -1 if none */
	char *type_name;     /* source type name as the catalog shows it, e.g. "numeric(10,2)" (owned, may be NULL) */
	bool is_key;         /* part of the primary key */
};

struct sl_table {
	char *ns;            /* PostgreSQL schema, or MySQL database (owned) */
	char *name;          /* table name (owned) */
	char *object;        /* "<ns>_<name>", used in paths and the `object` field (owned) */
	int ncols;
	struct sl_column *cols;  /* owned array of ncols */
	char schema_key[17]; /* 16 lowercase hex digits: hash of the column list */
	uint32_t relid;      /* source relation id (PostgreSQL OID), 0 if unknown */
};

enum sl_source_kind { SL_SOURCE_POSTGRES = 0, SL_SOURCE_MYSQL };

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
	const char *read_method;       /* "postgresql-cdc-wal", "postgresql-backfill", ... */
	char csn[SL_CSN_LEN + 1];      /* see sl_csn_format() */
	uint64_t position;             /* PostgreSQL: commit LSN (backfill: snapshot LSN) */
	uint32_t seq;                  /* place in the transaction, 0 for backfill rows */
	int64_t source_ts_us;          /* Unix microseconds: commit time, or snapshot time */
	int64_t read_ts_us;            /* Unix microseconds: when sluice read it */
	uint64_t tx_id;                /* source transaction id (xid), 0 for backfill */
	unsigned char uuid[16];        /* deterministic UUIDv5, see sl_change_set_uuid() */
	/* MySQL only (later): binlog file, position and GTID. */
	const char *log_file;
	uint64_t log_position;
	const char *gtid;
};

/* Writes the CSN for a position and sequence: 16 uppercase hex digits, '-',
 * 10 decimal digits.  Later changes get larger CSNs in plain string order. */
void sl_csn_format(char out[static SL_CSN_LEN + 1], uint64_t position, uint32_t seq);

/* Sets c->uuid to the UUIDv5 of stream, schema.table and CSN (plus, when
 * extra is not NULL, extra bytes such as a backfill row's key, because every
 * backfill row shares the snapshot's CSN). */
void sl_change_set_uuid(struct sl_change *c, const char *stream, const void *extra, size_t extra_len);

/* Returns the canonical text of an op: "INSERT", "UPDATE-INSERT", ... */
const char *sl_op_name(enum sl_op op);

/* Table schema lifecycle.  sl_table_new copies ns and name; columns are
 * added with sl_table_add_column (copies name and type_name), then
 * sl_table_finish derives avro names, the object name and the schema key.
 * The source maps its own type to type (with precision and scale for
 * SL_T_DECIMAL, ignored otherwise); src_type and src_typmod are the source's
 * type id and modifier as it reports them, and with the names and key flags
 * they make the schema key. */
struct sl_table *sl_table_new(const char *ns, const char *name);
int sl_table_add_column(struct sl_table *t, const char *name, enum sl_type type, int precision, int scale,
			uint32_t src_type, int32_t src_typmod, const char *type_name, bool is_key);
int sl_table_finish(struct sl_table *t);
void sl_table_free(struct sl_table *t);
/* True if at least one column is part of the primary key. */
bool sl_table_has_key(const struct sl_table *t);
/* True if both describe the same columns (names, types, modifiers, keys). */
bool sl_table_same_columns(const struct sl_table *a, const struct sl_table *b);

#endif
