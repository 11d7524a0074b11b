/*
 * sources/mysql/mysql_json.h: MySQL's binary JSON (the storage and binlog
 * form of a JSON column) to JSON text.
 *
 * Format (MySQL sql-common/json_binary.cc; integers little-endian): a
 * document is a type byte and a value.
 *
 *   type  value
 *   0x00  small object   count u16, size u16 (bytes of the object, from
 *   0x01  large object   count), then count key entries (offset, length
 *                        u16), count value entries (type u8, offset or
 *                        inline value), the keys, the values.  Small uses
 *                        u16 offsets, large u32.  Offsets count from the
 *                        start of the object (its count field).
 *   0x02  small array    count, size, count value entries, the values
 *   0x03  large array
 *   0x04  literal        u8: 0 null, 1 true, 2 false
 *   0x05  int16    0x06  uint16    0x07  int32    0x08  uint32
 *   0x09  int64    0x0a  uint64    0x0b  double (IEEE 754)
 *   0x0c  string         length (7 bits a byte, least significant first,
 *                        high bit: more follows), UTF-8 bytes
 *   0x0f  opaque         a MySQL field type u8, length (as for strings),
 *                        data: DECIMAL (precision u8, scale u8, packed
 *                        decimal), DATE / DATETIME / TIMESTAMP / TIME (an
 *                        int64 of MySQL's packed temporal form), other
 *                        types' raw bytes
 * Literals, int16 and uint16 (and int32, uint32 in large containers) sit
 * inline in their value entry.  A zero-length document is JSON null (MySQL
 * reads it so).
 *
 * The text is the one MySQL prints for the value: objects as
 * {"k": v, "k2": v2} (keys in stored order), arrays as [v, v2], doubles as
 * MySQL writes them (the shortest form that reads back the same value;
 * fixed notation while the decimal point falls within 15 digits of the
 * first digit and 14 zeros after the point, "1.0" for integral values such
 * as 1e14 but "1e15" and "1e-16" beyond; exponents without '+'), decimals as plain numbers, dates and times as quoted strings with
 * six fraction digits ("2015-01-15 23:24:25.000000", "-12:30:00.000000",
 * dates "2015-01-15"), other opaque values as "base64:typeNN:<base64>".
 */
#ifndef SLUICE_SOURCES_MYSQL_MYSQL_JSON_H
#define SLUICE_SOURCES_MYSQL_MYSQL_JSON_H

#include <stddef.h>

#include "common/buf.h"

/* Nesting deeper than this is refused (MySQL stops at 100). */
#define SL_MYSQL_JSON_MAX_DEPTH 150

/* Appends the JSON text of the binary document p/len to out.  Returns 0, or
 * -1 with err saying what is malformed (out may then hold partial text). */
int sl_mysql_json_text(const unsigned char *p, size_t len, struct sl_buf *out, char *err, size_t errlen);

/* Appends d as MySQL prints a JSON double ("1.5", "100.0", "1e16",
 * "1.25e-20").  Returns 0, or -1 for NaN and infinities (JSON has none) or
 * when out failed. */
int sl_mysql_json_double(double d, struct sl_buf *out);

#endif
