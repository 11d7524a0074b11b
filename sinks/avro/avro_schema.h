/*
 * sinks/avro/avro_schema.h: the Avro schema (JSON text) of the records
 * sluice writes for one table version: Datastream's event layout with the
 * table's columns as the nullable fields of `payload`.  The same text goes,
 * byte for byte, into each container file's avro.schema header, so the
 * logical types (decimal, date, time-micros, timestamp-micros, uuid) reach
 * every reader.
 */
#ifndef SLUICE_SINKS_AVRO_AVRO_SCHEMA_H
#define SLUICE_SINKS_AVRO_AVRO_SCHEMA_H

#include "common/buf.h"
#include "schema/schema.h"

/* Appends the schema JSON for table t (a finished table version) to out;
 * t->src names the namespace field and the source position fields of
 * source_metadata.  The record name is t->object made a valid
 * Avro name (anything outside [A-Za-z0-9_] becomes '_', a leading digit gets a
 * '_' prefix, and the names of the nested records "source_metadata" and
 * "payload" get a '_' suffix), in namespace "sluice".  Each payload field
 * carries "sluice.column" (the original column name) and, when the column has
 * a type name, "sluice.source_type".  Every string is JSON escaped; bytes
 * that are not valid UTF-8 become U+FFFD.  Returns 0, or -1 with a message in
 * err (out of memory; out is then failed). */
int sl_avro_schema_json(struct sl_buf *out, const struct sl_table *t, char *err, size_t errlen);

/* The reader schema of t: the same text, except that each payload field of
 * a column with a missing value (sl_column.missing: what the rows written
 * before the column was added read) is [T, "null"] with that value as its
 * default (sl_avro_default_json), so that a reader that resolves older
 * files to it fills their records with it.  The files keep ["null", T]: a
 * reader union takes either order.  Returns as sl_avro_schema_json. */
int sl_avro_reader_schema_json(struct sl_buf *out, const struct sl_table *t, char *err, size_t errlen);

/* Appends v, a value of column c, in the Avro JSON encoding of c's Avro
 * type (a field default): numbers for ints, longs, dates, times and
 * timestamps; a number for a float or double; a string of code points 0-255
 * for bytes and decimals (the two's-complement bytes); a string for text and
 * uuids.  Returns 0, 1 when JSON cannot carry it exactly (NULL, NaN or an
 * infinity, text that is not valid UTF-8, a decimal that does not fit the
 * column: out is then unchanged), or -1 if the buffer failed. */
int sl_avro_default_json(struct sl_buf *out, const struct sl_column *c, const struct sl_value *v);

/* sl_sink_ops.carries_missing of the Avro sinks (conf unused): true when
 * sl_avro_default_json carries c's missing value. */
bool sl_avro_carries_missing(const void *conf, const struct sl_column *c);

/* Appends s (n bytes) to out as a quoted JSON string, escaping quotes,
 * backslashes and control characters and replacing invalid UTF-8 with
 * U+FFFD.  Returns 0, or -1 if the buffer failed. */
int sl_json_put_string(struct sl_buf *out, const char *s, size_t n);

/* Appends v to out as JSON, as the dead-letter files write a row's values:
 * NULL (and an unchanged value) as null; integers, days and microseconds as
 * numbers; floats as numbers, or "NaN", "Infinity", "-Infinity"; decimals as
 * strings with exactly their scale ("12.50"); bytes as "\\x" and hex;
 * strings and JSON as JSON strings; uuids as their text.  Returns 0, or -1
 * if the buffer failed. */
int sl_json_put_value(struct sl_buf *out, const struct sl_value *v);

/* Appends t->object as an Avro name (see sl_avro_schema_json) to out.
 * Returns 0, or -1 if the buffer failed. */
int sl_avro_put_record_name(struct sl_buf *out, const char *object);

#endif
