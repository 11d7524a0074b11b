/*
 * sources/mysql/binlog_event.h: the MySQL / MariaDB binary log, event by
 * event: framing, checksums, and the events a change-data-capture reader
 * needs (format description, rotate, query, XID, table map, rows, GTIDs,
 * heartbeat, annotate).  Row images are decoded by row_image.h.
 *
 * Wire format.  Every integer is little-endian unless said otherwise.  An
 * event is a 19-byte common header, a fixed-size post-header whose length
 * per event type the FORMAT_DESCRIPTION event announces, a variable body,
 * and, when the format description says CRC32, a 4-byte CRC-32 (zlib's
 * crc32, little-endian) of everything before it:
 *
 *   header   timestamp u32 (Unix seconds), type u8, server_id u32,
 *            event_size u32 (all of it: header, body and checksum),
 *            log_pos u32 (where the next event starts in the binlog file; 0
 *            for artificial events such as the replication stream's first
 *            ROTATE), flags u16 (0x20: artificial)
 *
 * A binlog *file* starts with the 4 bytes fe 62 69 6e ("\xfebin") and then
 * holds the events back to back; a replication stream (COM_BINLOG_DUMP)
 * sends the same events, each behind a 0x00 OK byte that the client
 * library strips.  Events of interest, by type number:
 *
 *   15 FORMAT_DESCRIPTION  binlog_version u16 (4), server_version char[50]
 *                          (NUL-padded), create_timestamp u32,
 *                          header_length u8 (19), post_header_len u8[n]
 *                          (entry i for event type i+1), then for servers
 *                          that know checksums (MySQL >= 5.6.1, MariaDB
 *                          >= 5.3) checksum_alg u8 (0 off, 1 CRC32) and 4
 *                          checksum bytes, present whatever the algorithm.
 *    4 ROTATE              position u64, next file name (the rest, no NUL)
 *    2 QUERY               thread_id u32, exec_time u32, db_len u8,
 *                          error_code u16, status_vars_len u16 (the post-
 *                          header, 13 bytes); status variables (skipped:
 *                          status_vars_len bytes), db name, NUL, SQL text
 *                          (the rest): BEGIN, COMMIT, DDL, XA COMMIT, ...
 *   16 XID                 xid u64: the commit of an XA-capable transaction
 *   19 TABLE_MAP           see struct sl_binlog_table_map below
 *   23-25 / 30-32          WRITE / UPDATE / DELETE_ROWS, V1 (MariaDB's) and
 *                          V2 (MySQL's); see struct sl_binlog_rows
 *  162 MariaDB GTID        seq_no u64, domain_id u32, flags u8, then
 *                          commit_id u64 if flags & 2 (group commit), else
 *                          the XA xid if flags & (64 | 128) (format_id u32,
 *                          gtrid_len u8, bqual_len u8, the bytes), else 6
 *                          zero bytes; then, when bytes remain, flags_extra
 *                          u8, extra_engines u8 if flags_extra & 1, and
 *                          sa_seq_no u64 if flags_extra & (4 | 8).  The
 *                          server id is the header's.
 *  163 MariaDB GTID_LIST   count u32 (low 28 bits; the top 4 are flags),
 *                          then count times domain u32, server u32, seq u64
 *   33 / 34 MySQL GTID /   flags u8, sid (the server UUID) 16 bytes, gno u64;
 *      ANONYMOUS_GTID      since 5.7: lt_type u8 (2), last_committed u64,
 *                          sequence_number u64; since 8.0.1:
 *                          immediate_commit_timestamp (7 bytes, microseconds;
 *                          bit 55 set: original_commit_timestamp, 7 bytes,
 *                          follows), transaction length (packed integer),
 *                          server versions (ignored)
 *   27 HEARTBEAT           the current binlog file name (the rest); the
 *                          header's log_pos is the position in it
 *   41 HEARTBEAT_V2        TLV fields: 1 file name, 2 position (packed), 0 end
 *  160 MariaDB ANNOTATE_ROWS / 29 MySQL ROWS_QUERY: the SQL text of the row
 *                          events that follow (ROWS_QUERY: a length byte first)
 *   38 XA_PREPARE          one_phase u8, format_id u32, gtrid_len u32,
 *                          bqual_len u32, the bytes
 *   26 INCIDENT            incident u16, message length u8, message
 *   35 PREVIOUS_GTIDS      MySQL: the GTID set executed before this binlog
 *                          file, in the binary form of gtid.h
 *
 * Events a reader cannot skip without losing changes and that this decoder
 * does not read are refused with an error that names them: MariaDB's
 * compressed events (log_bin_compress: 165-171), MySQL's compressed
 * transactions (40, binlog_transaction_compression), partial JSON updates
 * (39, binlog_row_value_options=PARTIAL_JSON), tagged GTIDs (42), pre-GA
 * rows events (20-22) and binlog versions before 4.  Every other event is
 * framed, checked and reported as SL_BLK_OTHER.
 *
 * Nothing here allocates except the table map's own storage, which grows to
 * the largest table map seen and is then reused.  Decoded events point into
 * the caller's buffer.
 *
 * Return values: 0, or -1 with a message in err naming the event type and,
 * when known, its position ("mb.000002:1234").
 */
#ifndef SLUICE_SOURCES_MYSQL_BINLOG_EVENT_H
#define SLUICE_SOURCES_MYSQL_BINLOG_EVENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SL_BL_HEADER_LEN 19
#define SL_BL_CHECKSUM_LEN 4
#define SL_BL_FILE_MAGIC "\xfe" "bin"   /* the first 4 bytes of a binlog file */
#define SL_BL_FILE_MAX 511              /* longest binlog file name kept */

/* Log_event_type: the event types this decoder names. */
enum sl_bl_type {
	SL_BL_START_V3 = 1, SL_BL_QUERY = 2, SL_BL_STOP = 3, SL_BL_ROTATE = 4, SL_BL_INTVAR = 5,
	SL_BL_RAND = 13, SL_BL_USER_VAR = 14, SL_BL_FORMAT_DESCRIPTION = 15, SL_BL_XID = 16,
	SL_BL_TABLE_MAP = 19,
	SL_BL_WRITE_ROWS_V0 = 20, SL_BL_UPDATE_ROWS_V0 = 21, SL_BL_DELETE_ROWS_V0 = 22,
	SL_BL_WRITE_ROWS_V1 = 23, SL_BL_UPDATE_ROWS_V1 = 24, SL_BL_DELETE_ROWS_V1 = 25,
	SL_BL_INCIDENT = 26, SL_BL_HEARTBEAT = 27, SL_BL_IGNORABLE = 28, SL_BL_ROWS_QUERY = 29,
	SL_BL_WRITE_ROWS_V2 = 30, SL_BL_UPDATE_ROWS_V2 = 31, SL_BL_DELETE_ROWS_V2 = 32,
	SL_BL_GTID = 33, SL_BL_ANONYMOUS_GTID = 34, SL_BL_PREVIOUS_GTIDS = 35,
	SL_BL_XA_PREPARE = 38, SL_BL_PARTIAL_UPDATE_ROWS = 39, SL_BL_TRANSACTION_PAYLOAD = 40,
	SL_BL_HEARTBEAT_V2 = 41, SL_BL_GTID_TAGGED = 42,
	SL_BL_MARIADB_ANNOTATE_ROWS = 160, SL_BL_MARIADB_BINLOG_CHECKPOINT = 161,
	SL_BL_MARIADB_GTID = 162, SL_BL_MARIADB_GTID_LIST = 163, SL_BL_MARIADB_START_ENCRYPTION = 164,
	SL_BL_MARIADB_QUERY_COMPRESSED = 165,
	SL_BL_MARIADB_WRITE_ROWS_COMPRESSED_V0 = 166, SL_BL_MARIADB_DELETE_ROWS_COMPRESSED_V1 = 171,
};

/* Header flags. */
#define SL_BL_F_ARTIFICIAL 0x20

/* Checksum algorithms (the format description's checksum_alg). */
enum sl_bl_checksum { SL_BL_CHECKSUM_OFF = 0, SL_BL_CHECKSUM_CRC32 = 1, SL_BL_CHECKSUM_UNDEF = 255 };

/* What sl_binlog_decode found. */
enum sl_bl_kind {
	SL_BLK_OTHER = 0,            /* framed and checked; nothing a reader needs (STOP, INTVAR, ...) */
	SL_BLK_FORMAT_DESCRIPTION,
	SL_BLK_ROTATE,
	SL_BLK_QUERY,
	SL_BLK_XID,
	SL_BLK_TABLE_MAP,            /* body for sl_binlog_table_map_parse */
	SL_BLK_ROWS,                 /* body for sl_binlog_rows_parse */
	SL_BLK_MARIADB_GTID,
	SL_BLK_MARIADB_GTID_LIST,
	SL_BLK_MYSQL_GTID,           /* GTID and ANONYMOUS_GTID */
	SL_BLK_HEARTBEAT,            /* HEARTBEAT and HEARTBEAT_V2 */
	SL_BLK_ANNOTATE,             /* MariaDB ANNOTATE_ROWS, MySQL ROWS_QUERY */
	SL_BLK_XA_PREPARE,
	SL_BLK_INCIDENT,
	SL_BLK_PREVIOUS_GTIDS,       /* MySQL: body is a binary GTID set (sl_mysql_gtid_set_decode) */
};

struct sl_binlog_header {
	uint32_t timestamp;
	uint8_t type;
	uint32_t server_id;
	uint32_t event_size;
	uint32_t log_pos;
	uint16_t flags;
};

struct sl_binlog_fde {
	uint16_t binlog_version;
	char server_version[51];        /* NUL-terminated */
	uint32_t create_timestamp;
	uint8_t header_len;
	uint16_t n_post_header;         /* entries in post_header_len */
	uint8_t post_header_len[256];   /* [type - 1] */
	uint8_t checksum_alg;           /* enum sl_bl_checksum */
	bool mariadb;                   /* server_version names MariaDB */
};

struct sl_binlog_rotate {
	uint64_t position;
	const char *file;               /* not NUL-terminated */
	size_t file_len;
};

struct sl_binlog_query {
	uint32_t thread_id;
	uint32_t exec_time;
	uint16_t error_code;
	const unsigned char *status_vars;
	size_t status_vars_len;
	const char *db;                 /* NUL-terminated in the event */
	size_t db_len;
	const char *sql;                /* not NUL-terminated */
	size_t sql_len;
};

/* MariaDB GTID flags. */
#define SL_MARIADB_FL_STANDALONE      0x01   /* no terminating COMMIT/XID: DDL and the like */
#define SL_MARIADB_FL_GROUP_COMMIT_ID 0x02
#define SL_MARIADB_FL_TRANSACTIONAL   0x04
#define SL_MARIADB_FL_ALLOW_PARALLEL  0x08
#define SL_MARIADB_FL_WAITED          0x10
#define SL_MARIADB_FL_DDL             0x20
#define SL_MARIADB_FL_PREPARED_XA     0x40   /* the group ends with XA PREPARE (XA_PREPARE event) */
#define SL_MARIADB_FL_COMPLETED_XA    0x80   /* XA COMMIT / XA ROLLBACK of a prepared XA transaction */
#define SL_MARIADB_FLX_MULTI_ENGINE   0x01
#define SL_MARIADB_FLX_START_ALTER    0x02
#define SL_MARIADB_FLX_COMMIT_ALTER   0x04
#define SL_MARIADB_FLX_ROLLBACK_ALTER 0x08

/* An XA transaction id: format_id and gtrid + bqual bytes. */
struct sl_binlog_xa_xid {
	uint32_t format_id;
	uint32_t gtrid_len, bqual_len;
	const unsigned char *data;      /* gtrid_len + bqual_len bytes */
};

struct sl_binlog_mariadb_gtid {
	uint64_t seq_no;
	uint32_t domain_id;
	uint32_t server_id;             /* from the header */
	uint8_t flags;
	bool has_commit_id;
	uint64_t commit_id;
	bool has_xid;                   /* flags has PREPARED_XA or COMPLETED_XA */
	struct sl_binlog_xa_xid xid;
	uint8_t flags_extra;
	uint8_t extra_engines;
	uint64_t sa_seq_no;             /* with COMMIT_ALTER / ROLLBACK_ALTER */
};

struct sl_binlog_gtid_list {
	uint32_t count;
	uint8_t flags;                  /* the count's top 4 bits */
	const unsigned char *entries;   /* count * 16 bytes; see sl_binlog_gtid_list_get */
};

struct sl_binlog_mysql_gtid {
	bool anonymous;                 /* ANONYMOUS_GTID: no sid/gno (gtid_mode=OFF) */
	uint8_t flags;                  /* 1: may have changes logged with SBR */
	unsigned char sid[16];
	uint64_t gno;
	bool has_logical_clock;
	int64_t last_committed;
	int64_t sequence_number;
	bool has_commit_ts;
	uint64_t immediate_commit_ts;   /* microseconds since the epoch */
	uint64_t original_commit_ts;
	bool has_tx_length;
	uint64_t tx_length;
};

struct sl_binlog_heartbeat {
	const char *file;               /* not NUL-terminated */
	size_t file_len;
	uint64_t position;
};

struct sl_binlog_text {
	const char *p;                  /* not NUL-terminated */
	size_t len;
};

struct sl_binlog_xa_prepare {
	bool one_phase;
	struct sl_binlog_xa_xid xid;
};

struct sl_binlog_incident {
	uint16_t incident;
	const char *message;
	size_t message_len;
};

struct sl_binlog_event {
	struct sl_binlog_header h;
	enum sl_bl_kind kind;
	/* Where the event starts (log_pos - event_size) and ends (log_pos);
	 * both 0 for artificial events. */
	uint64_t start, end;
	/* Everything after the common header: post-header and body, without the
	 * checksum. */
	const unsigned char *body;
	size_t body_len;
	union {
		struct sl_binlog_fde fde;
		struct sl_binlog_rotate rotate;
		struct sl_binlog_query query;
		uint64_t xid;
		struct sl_binlog_mariadb_gtid mariadb_gtid;
		struct sl_binlog_gtid_list gtid_list;
		struct sl_binlog_mysql_gtid mysql_gtid;
		struct sl_binlog_heartbeat heartbeat;
		struct sl_binlog_text annotate;
		struct sl_binlog_xa_prepare xa_prepare;
		struct sl_binlog_incident incident;
	} u;
};

/* The state a stream of events needs: the format description in force, the
 * checksum algorithm of the next event, and the current file name (for
 * positions in messages). */
struct sl_binlog_reader {
	struct sl_binlog_fde fde;
	bool have_fde;
	uint8_t checksum;               /* enum sl_bl_checksum of the events that follow */
	char file[SL_BL_FILE_MAX + 1];  /* "" until a ROTATE names it */
	uint64_t events;                /* events decoded */
};

/* Starts a reader.  checksum is what the stream uses before its first
 * FORMAT_DESCRIPTION: the replication stream's artificial ROTATE comes
 * first and carries a checksum when the connection set
 * @master_binlog_checksum (pass SL_BL_CHECKSUM_CRC32 then); a binlog file
 * starts with its format description (pass SL_BL_CHECKSUM_OFF).  file may
 * be NULL. */
void sl_binlog_reader_init(struct sl_binlog_reader *r, enum sl_bl_checksum checksum, const char *file);

/* Decodes one whole event (buf, len: exactly event_size bytes, as a
 * replication packet after its OK byte or a slice of a binlog file).
 * Verifies and strips the checksum, checks the framing, fills ev (which
 * points into buf) and updates the reader: a FORMAT_DESCRIPTION sets the
 * format and checksum for what follows, a ROTATE the file name.  A
 * checksum mismatch is an error naming the event's position. */
int sl_binlog_decode(struct sl_binlog_reader *r, const unsigned char *buf, size_t len, struct sl_binlog_event *ev,
		     char *err, size_t errlen);

/* Entry i (< count) of a GTID_LIST event. */
struct sl_mariadb_gtid;
void sl_binlog_gtid_list_get(const struct sl_binlog_gtid_list *l, uint32_t i, struct sl_mariadb_gtid *out);

/* Reads a packed ("length-encoded") integer at *p (< end): 1 byte < 251,
 * or 252 + 2 bytes, 253 + 3 bytes, 254 + 8 bytes.  251 (NULL) and
 * truncation are errors.  Returns 0 and advances *p, or -1. */
int sl_binlog_packed_int(const unsigned char **p, const unsigned char *end, uint64_t *out);

/* ---- TABLE_MAP ----
 *
 *   post-header  table_id (6 bytes; 4 if the format gives TABLE_MAP a 6-byte
 *                post-header), flags u16
 *   body         db_len u8, db, NUL, table_len u8, table, NUL,
 *                column_count (packed), column types (u8 each),
 *                metadata_len (packed), metadata (per type, below),
 *                null bitmap ((column_count + 7) / 8 bytes, bit i set:
 *                column i is nullable), then optional metadata fields,
 *                each type u8, length (packed), value.
 *
 * Column metadata: NEWDECIMAL 2 bytes (precision, scale); VARCHAR and
 * VAR_STRING 2 bytes (max length in bytes, u16); STRING 2 bytes, the real
 * type and the max length packed together (see sl_mysql_column); BIT 2
 * bytes (bits % 8, bytes); FLOAT, DOUBLE 1 byte (size); BLOB, GEOMETRY,
 * JSON 1 byte (bytes of the length prefix, 1-4); TIME2, DATETIME2,
 * TIMESTAMP2 1 byte (fractional second digits, 0-6); others none.
 *
 * Optional metadata (binlog_row_metadata=MINIMAL gives 1, 2 or 3, 7, 10 or
 * 11; FULL adds 4, 5, 6, 8 or 9; MySQL 8.0.23+ 12):
 *   1 SIGNEDNESS            a bitmap, most significant bit first, one bit
 *                           per numeric column (TINY, SHORT, INT24, LONG,
 *                           LONGLONG, NEWDECIMAL, FLOAT, DOUBLE): unsigned
 *   2 DEFAULT_CHARSET       the default collation (packed), then pairs
 *                           (character column number, collation) for the
 *                           columns that differ
 *   3 COLUMN_CHARSET        one collation per character column
 *   4 COLUMN_NAME           per column: length (packed), name
 *   5 SET_STR_VALUE         per SET column: count (packed), then per value
 *   6 ENUM_STR_VALUE        length (packed) and bytes; likewise for ENUM
 *   7 GEOMETRY_TYPE         per GEOMETRY column: the type (packed)
 *   8 SIMPLE_PRIMARY_KEY    the key's column numbers (packed each)
 *   9 PRIMARY_KEY_WITH_PREFIX  pairs (column number, prefix length; 0: all)
 *  10 ENUM_AND_SET_DEFAULT_CHARSET, 11 ENUM_AND_SET_COLUMN_CHARSET: as 2
 *                           and 3, over the ENUM and SET columns
 *  12 COLUMN_VISIBILITY     a bitmap, most significant bit first: visible
 * Character columns are STRING (not ENUM or SET), VAR_STRING, VARCHAR and
 * BLOB, and for MariaDB also GEOMETRY.  Unknown fields are skipped.
 */

/* MySQL field types as the binlog writes them (enum_field_types). */
enum sl_mysql_type {
	SL_MYSQL_DECIMAL = 0, SL_MYSQL_TINY = 1, SL_MYSQL_SHORT = 2, SL_MYSQL_LONG = 3,
	SL_MYSQL_FLOAT = 4, SL_MYSQL_DOUBLE = 5, SL_MYSQL_NULL = 6, SL_MYSQL_TIMESTAMP = 7,
	SL_MYSQL_LONGLONG = 8, SL_MYSQL_INT24 = 9, SL_MYSQL_DATE = 10, SL_MYSQL_TIME = 11,
	SL_MYSQL_DATETIME = 12, SL_MYSQL_YEAR = 13, SL_MYSQL_NEWDATE = 14, SL_MYSQL_VARCHAR = 15,
	SL_MYSQL_BIT = 16, SL_MYSQL_TIMESTAMP2 = 17, SL_MYSQL_DATETIME2 = 18, SL_MYSQL_TIME2 = 19,
	SL_MYSQL_VECTOR = 242, SL_MYSQL_JSON = 245, SL_MYSQL_NEWDECIMAL = 246, SL_MYSQL_ENUM = 247,
	SL_MYSQL_SET = 248, SL_MYSQL_TINY_BLOB = 249, SL_MYSQL_MEDIUM_BLOB = 250,
	SL_MYSQL_LONG_BLOB = 251, SL_MYSQL_BLOB = 252, SL_MYSQL_VAR_STRING = 253,
	SL_MYSQL_STRING = 254, SL_MYSQL_GEOMETRY = 255,
};

/* A counted string inside a table map's storage. */
struct sl_mysql_str {
	const char *p;
	uint32_t len;
};

struct sl_mysql_charset;   /* mysql_charset.h */

/* One column as a TABLE_MAP describes it, with what the optional metadata
 * adds.  The row decoder needs type, real_type and the decoded metadata;
 * the rest is known only with binlog_row_metadata, and a caller may fill it
 * from the catalog instead (collation, is_unsigned, values, json). */
/* MariaDB's fixed binary types, which the binlog describes as BINARY(n). */
enum sl_mysql_fbt { SL_MYSQL_FBT_NONE = 0, SL_MYSQL_FBT_UUID, SL_MYSQL_FBT_INET4, SL_MYSQL_FBT_INET6 };

struct sl_mysql_column {
	uint8_t type;           /* enum sl_mysql_type as written in the map */
	uint8_t real_type;      /* STRING: STRING, ENUM or SET; otherwise type */
	uint16_t meta;          /* the raw metadata (byte 0 in the low bits) */
	/* Decoded metadata, by type:
	 *   STRING, VARCHAR, VAR_STRING: max_len (bytes; a length prefix of 1
	 *       byte when < 256, else 2)
	 *   ENUM, SET: pack_len (ENUM 1-2, SET 1-8 bytes)
	 *   BLOB, GEOMETRY, JSON, VECTOR: pack_len (bytes of the length, 1-4)
	 *   FLOAT, DOUBLE: pack_len (4, 8)
	 *   NEWDECIMAL: precision (1-65), scale (0-38, <= precision)
	 *   TIME2, DATETIME2, TIMESTAMP2: fsp (0-6)
	 *   BIT: nbits (1-64) */
	uint32_t max_len;
	uint8_t pack_len;
	uint8_t precision, scale;
	uint8_t fsp;
	uint8_t nbits;
	bool nullable;
	int8_t is_unsigned;     /* numeric columns: 1 unsigned, 0 signed, -1 unknown */
	uint32_t collation;     /* character, ENUM and SET columns: collation id, 0 unknown */
	const struct sl_mysql_charset *charset;  /* of collation; NULL unknown (mysql_charset.h) */
	bool json;              /* MariaDB JSON (a LONGTEXT): set by the caller from the catalog */
	uint8_t fbt;            /* enum sl_mysql_fbt: MariaDB UUID, INET4, INET6 (a BINARY(16/4/16) in
				 * the binlog): set by the caller from the catalog */
	struct sl_mysql_str name;        /* p NULL: unknown */
	uint32_t nvalues;                /* ENUM / SET strings known (0: unknown) */
	const struct sl_mysql_str *values;
	int64_t geometry_type;           /* -1 unknown */
	bool is_key;
	uint32_t key_prefix;             /* 0: the whole column */
	int8_t visible;                  /* 1, 0, -1 unknown */
};

struct sl_binlog_table_map {
	uint64_t table_id;
	uint16_t flags;
	const char *db;                  /* NUL-terminated (storage) */
	const char *table;
	uint32_t ncols;
	struct sl_mysql_column *cols;
	bool has_signedness, has_charsets, has_enum_set_charsets, has_names, has_enum_values,
	     has_set_values, has_geometry_types, has_key, has_visibility;
	uint32_t nkey;                   /* key column numbers, in key order */
	const uint32_t *key;
	/* The last nhidden columns are read and dropped by the row decoder
	 * (MariaDB's hidden DB_ROW_HASH_n of long unique keys, which the
	 * catalog does not list): set by the caller, 0 after a parse. */
	uint32_t nhidden;
	/* Storage, reused by the next parse: */
	struct sl_mysql_column *col_store;
	uint32_t acols;
	char *text;                      /* db, table, names and values, NUL-terminated each */
	size_t text_alloc;
	struct sl_mysql_str *strs;
	size_t astrs;
	uint32_t *keys;
	size_t akeys;
};

void sl_binlog_table_map_init(struct sl_binlog_table_map *tm);
void sl_binlog_table_map_free(struct sl_binlog_table_map *tm);
/* Parses the TABLE_MAP event ev (kind SL_BLK_TABLE_MAP) into tm, replacing
 * what it held; pointers in tm stay valid until its next parse or free.
 * Returns 0, or -1 with err (tm is then empty). */
int sl_binlog_table_map_parse(struct sl_binlog_table_map *tm, const struct sl_binlog_reader *r,
			      const struct sl_binlog_event *ev, char *err, size_t errlen);

/* ---- rows events ----
 *
 *   post-header  table_id (6 bytes, or 4), flags u16 (1: end of statement);
 *                V2 adds extra_len u16 (counting itself) and extra_len - 2
 *                bytes of extra data (NDB info, partition ids: skipped)
 *   body         column_count (packed), the columns-present bitmap
 *                ((column_count + 7) / 8 bytes, bit i for column i), for
 *                UPDATE a second one for the after image, then the rows:
 *                each an image (UPDATE: the before image, then the after
 *                image), read by row_image.h.
 */
enum sl_bl_rows_op { SL_BL_ROWS_WRITE = 0, SL_BL_ROWS_UPDATE, SL_BL_ROWS_DELETE };

#define SL_BL_ROWS_F_STMT_END 0x0001

struct sl_binlog_rows {
	enum sl_bl_rows_op op;
	int version;                      /* 1 or 2 */
	uint64_t table_id;
	uint16_t flags;
	const unsigned char *extra;       /* V2 extra data */
	size_t extra_len;
	uint32_t ncols;
	const unsigned char *present;     /* columns in the (before) image */
	const unsigned char *present_after; /* UPDATE: columns in the after image */
	const unsigned char *rows, *end;  /* the row images */
};

/* Parses the header of a rows event (kind SL_BLK_ROWS); rows then points at
 * the first image.  Returns 0 or -1 (err). */
int sl_binlog_rows_parse(const struct sl_binlog_reader *r, const struct sl_binlog_event *ev,
			 struct sl_binlog_rows *out, char *err, size_t errlen);

/* The event type's name for messages ("WRITE_ROWS_V1", "type 200"): buf
 * holds the fallback text. */
const char *sl_binlog_type_name(uint8_t type, char buf[static 16]);

#endif
