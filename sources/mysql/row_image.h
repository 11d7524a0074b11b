/*
 * sources/mysql/row_image.h: the row images of WRITE / UPDATE / DELETE_ROWS
 * events, decoded against their TABLE_MAP into typed values (struct
 * sl_value), and the map from MySQL column types to sluice output types.
 *
 * An image is: a null bitmap with one bit per column present in the image
 * ((present + 7) / 8 bytes, bit k for the k-th present column, least
 * significant bit first), then the value of each present, non-null column
 * in column order.  Columns missing from the columns-present bitmap
 * (binlog_row_image=MINIMAL or NOBLOB) come out as SL_V_UNCHANGED, so the
 * caller can refuse or handle a partial image.  Value formats, by type
 * (little-endian unless said otherwise):
 *
 *   TINY, SHORT, INT24, LONG, LONGLONG   1, 2, 3, 4, 8 bytes, two's complement
 *                                        or unsigned (the SIGNEDNESS metadata)
 *   YEAR        1 byte: 0 is year 0000, otherwise 1900 + the byte
 *   FLOAT, DOUBLE  IEEE 754, 4 / 8 bytes
 *   NEWDECIMAL  MySQL's packed decimal, big-endian: the integer digits then
 *               the fraction digits in groups of 9 (4 bytes each), a partial
 *               group taking 1-4 bytes for 1-2, 3-4, 5-6, 7-9 digits (the
 *               integer's partial group first, the fraction's last); the top
 *               bit of the first byte is inverted (set for positive), and a
 *               negative number has every byte inverted (one's complement)
 *   DATE        3 bytes: day (5 bits) | month (4) << 5 | year (15) << 9
 *   DATETIME2   5 bytes big-endian, minus 0x8000000000: (year * 13 + month)
 *               << 22 | day << 17 | hour << 12 | minute << 6 | second; then
 *               (fsp + 1) / 2 bytes of fraction, big-endian: hundredths
 *               (fsp 1-2), 1/10000 s (3-4) or microseconds (5-6)
 *   TIMESTAMP2  4 bytes big-endian Unix seconds, then the fraction as above
 *   TIME2       3 bytes big-endian minus 0x800000: sign, hour (10 bits) << 12
 *               | minute << 6 | second, then the fraction; for fsp 5-6 the
 *               6 bytes are one big-endian number minus 0x800000000000,
 *               (that << 24) + microseconds; a negative time's fraction
 *               counts down (MySQL's "binary sort" layout)
 *   TIMESTAMP, DATETIME, TIME (pre-5.6 formats): 4 bytes of Unix seconds;
 *               8 bytes YYYYMMDDhhmmss as a number; 3 bytes signed
 *               [-]HHMMSS as a number
 *   STRING (CHAR, BINARY)  a length of 1 byte (max length < 256) or 2, the
 *               bytes; trailing spaces (CHAR) or zero bytes (BINARY) are not
 *               in the binlog: BINARY values are padded back to their length
 *   VARCHAR, VAR_STRING    a length of 1 byte (max length < 256) or 2, bytes
 *   BLOB, TEXT, GEOMETRY, JSON   a length of pack_len bytes (1-4), bytes;
 *               GEOMETRY is a 4-byte SRID then WKB; JSON is MySQL's binary
 *               JSON (mysql_json.h) on MySQL, text on MariaDB (a LONGTEXT)
 *   ENUM        pack_len (1-2) bytes: the 1-based index, 0 for ''
 *   SET         pack_len (1-8) bytes: a bitmap of the members
 *   BIT         (nbits + 7) / 8 bytes, big-endian
 *
 * Values, the rules of doc/types-mysql.md: integers as SL_V_INT (BIGINT
 * UNSIGNED as SL_V_UINT), decimals as digits and scale, DATE as days,
 * DATETIME as microseconds read as UTC, TIMESTAMP as UTC microseconds,
 * TIME as signed microseconds (may exceed a day), text in UTF-8 (from the
 * column's charset, mysql_charset.h), binary strings as bytes, ENUM and SET
 * as their strings when the metadata (or the caller) gives them, else the
 * index / bitmap as a number, BIT(1) as a boolean and wider BITs as bytes,
 * JSON as text, GEOMETRY as its WKB bytes (the SRID is dropped).  Zero and
 * invalid dates (0000-00-00, 2024-00-10, 2024-02-30) become null, counted in
 * struct sl_mysql_row_stats, with a warning on the 1st, 2nd, 4th, 8th, ...
 *
 * Memory: the decoder's scratch buffers grow to the largest row seen and are
 * reused; after that decoding allocates nothing.  Decoded values point into
 * the event or the scratch buffers, valid until the next call.
 */
#ifndef SLUICE_SOURCES_MYSQL_ROW_IMAGE_H
#define SLUICE_SOURCES_MYSQL_ROW_IMAGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"
#include "schema/schema.h"
#include "sources/mysql/binlog_event.h"
#include "sources/mysql/mysql_charset.h"

/* Maps a column as a table map (or the catalog, filling the same struct)
 * describes it to an output type; sets precision and scale for
 * SL_T_DECIMAL, leaves them alone otherwise.
 *
 *   TINYINT, SMALLINT, MEDIUMINT (signed or not), INT   SL_T_INT32
 *   INT UNSIGNED, BIGINT                                SL_T_INT64
 *   BIGINT UNSIGNED                                     SL_T_UINT64
 *   (signedness unknown: INT as SL_T_INT64, BIGINT as SL_T_INT64)
 *   YEAR                                                SL_T_INT32
 *   DECIMAL(p,s)                                        SL_T_DECIMAL(p,s)
 *   FLOAT, DOUBLE                                       SL_T_FLOAT, SL_T_DOUBLE
 *   DATE                                                SL_T_DATE
 *   TIME                                                SL_T_TIME
 *   DATETIME                                            SL_T_TIMESTAMP
 *   TIMESTAMP                                           SL_T_TIMESTAMPTZ
 *   CHAR, VARCHAR, TEXT in a text charset (or unknown)  SL_T_STRING
 *   BINARY, VARBINARY, BLOB, unsupported charsets       SL_T_BYTES
 *   JSON (MySQL), or a MariaDB column with json set     SL_T_JSON
 *   ENUM, SET with their strings known                  SL_T_STRING
 *   ENUM without them                                   SL_T_INT32 (the index)
 *   SET without them                                    SL_T_INT64 (the bitmap;
 *                                                       SL_T_UINT64 for 64 members)
 *   BIT(1)                                              SL_T_BOOL
 *   BIT(2..64), GEOMETRY, VECTOR                        SL_T_BYTES
 *   MariaDB UUID (fbt from the catalog)                 SL_T_UUID
 *   MariaDB INET4, INET6 (fbt from the catalog)         SL_T_STRING
 *   anything else                                       SL_T_STRING */
enum sl_type sl_mysql_type_map(const struct sl_mysql_column *c, int *precision, int *scale);
/* The bytes of a MariaDB UUID, INET4 or INET6 value (16, 4, 16) in their
 * binary form (UUID: the 16 bytes in text order; INET: network order), as
 * a value: a UUID, or the address in text (inet_ntop's form, which is
 * MariaDB's).  The value's bytes are appended to scratch, and v->p holds
 * their offset there.  Returns 0, or -1 when scratch fails. */
int sl_mysql_fbt_value(uint8_t fbt, const unsigned char *mem, struct sl_buf *scratch, struct sl_value *v);
/* The binary form of an FBT value from MariaDB's text of it (what a
 * SELECT returns): 0, or -1 when the text is not one. */
int sl_mysql_fbt_parse(uint8_t fbt, const char *text, size_t len, unsigned char mem[16]);
/* The size of an FBT value: 16, 4 or 16 (0 for none). */
unsigned sl_mysql_fbt_len(uint8_t fbt);

/* The column's SQL type for messages and sl_column.type_name: "bigint
 * unsigned", "decimal(10,2)", "datetime(6)", "enum", ... into buf. */
const char *sl_mysql_type_name(const struct sl_mysql_column *c, char *buf, size_t len);

/* Counters of one decoder's owner; they start at zero and only grow. */
struct sl_mysql_row_stats {
	uint64_t zero_dates;     /* 0000-00-00 (and zero TIMESTAMPs) written as null */
	uint64_t invalid_dates;  /* dates with a zero part or a day the month lacks, written as null */
};

struct sl_mysql_rowdec {
	struct sl_buf scratch[2];        /* before image, after image */
	struct sl_mysql_conv conv;
	struct sl_mysql_row_stats stats;
	uint8_t *fix;                    /* per column: the value's p is an offset into scratch */
	uint32_t afix;
};

void sl_mysql_rowdec_init(struct sl_mysql_rowdec *d);
void sl_mysql_rowdec_free(struct sl_mysql_rowdec *d);

/* sl_mysql_rows_next's return for a value that does not fit its column
 * (an output type the binlog type cannot give, a number out of the output
 * type's range, an ENUM index past its values, text that does not convert,
 * unknown signedness): decoding the same event again would fail again. */
#define SL_MYSQL_EVALUE (-2)

/* Decodes the next row of rows (advancing rows->rows) against table map tm
 * into the output columns cols (tm->ncols - tm->nhidden of them, in table
 * order, e.g. a table version's cols; the hidden last columns are stepped
 * over): before gets the before image (UPDATE, DELETE),
 * after the after image (WRITE, UPDATE); the other is left alone.  Returns
 * 1 with a row, 0 when the event has no more rows, -1 for a malformed event
 * (err says what), SL_MYSQL_EVALUE (err names the table, the column and the
 * problem).  Values are valid until the next call. */
int sl_mysql_rows_next(struct sl_mysql_rowdec *d, struct sl_binlog_rows *rows, const struct sl_binlog_table_map *tm,
		       const struct sl_column *cols, struct sl_value *before, struct sl_value *after, char *err,
		       size_t errlen);

/* The number of rows in rows (from rows->rows to its end) without decoding
 * their values: each image is sized from table map tm alone, so it needs
 * no output columns, no catalog and no character set (the rows of a table
 * the stream does not select, which are only counted).  rows is not
 * advanced.  Returns 0 with *n, or -1 for a malformed event or a column
 * type that cannot be sized (err says which table). */
int sl_mysql_rows_count(const struct sl_binlog_rows *rows, const struct sl_binlog_table_map *tm, uint64_t *n,
			char *err, size_t errlen);

/* MySQL's packed decimal (see above) of precision p and scale s at bin
 * (size from sl_mysql_decimal_size; avail bytes there): the unscaled
 * value's digits, without leading zeros ("0" for zero), into digits (room
 * for 66 bytes), their count in *ndigits and the sign in *neg (never true
 * for zero).  Returns 0, or -1 for bytes that are not a decimal of that
 * precision (a group beyond its digits, too few bytes). */
int sl_mysql_decimal_bin(const unsigned char *bin, size_t avail, int p, int s, char *digits, size_t *ndigits,
			 bool *neg);
/* Bytes of a packed DECIMAL(p,s). */
size_t sl_mysql_decimal_size(int p, int s);

#endif
