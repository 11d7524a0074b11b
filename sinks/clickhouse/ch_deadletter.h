/*
 * sinks/clickhouse/ch_deadletter.h: the dead-letter file of the ClickHouse
 * sink: one JSON line for each row ClickHouse refused as data, and for each
 * merge-mode change whose key does not encode (ch_dl_values_line), so that
 * the stream goes on and the row is kept for someone to look at.
 *
 *   {"time_us":1732990000000000,"stream":"s1","database":"replica",
 *    "table":"public_orders","code":27,"reason":"Code: 27, ...",
 *    "row":{"id":1,"note":"...","_csn":"000000001A2B3C4D-0000000001",...}}
 *
 * "row" holds the row as it was sent, decoded back from RowBinary: column
 * names as in ClickHouse; NULL as null; integers, days and microseconds as
 * JSON numbers; floats as numbers, or "NaN", "Infinity", "-Infinity"; decimals
 * as strings with exactly their scale ("12.50"); bytes as "\\x" and hex;
 * strings as JSON strings (a byte that is not UTF-8 becomes U+FFFD); uuids
 * as their text; _unchanged_columns as an array.
 *
 * The file is opened on the first dead letter (created with mode 0600: rows
 * may hold anything), written with O_APPEND, and fsynced before the flush
 * that wrote to it returns, so a row is never acknowledged before it is
 * either in ClickHouse or in this file.
 */
#ifndef SLUICE_SINKS_CLICKHOUSE_CH_DEADLETTER_H
#define SLUICE_SINKS_CLICKHOUSE_CH_DEADLETTER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"
#include "sinks/clickhouse/ch_layout.h"

/* Appends one line (with its "\n") for the RowBinary row at row/len, in the
 * layout's order (meta_only: the metadata columns only, see
 * ch_layout_put_row).  reason is ClickHouse's message (its first 1000
 * bytes are kept).  Returns 0, or -1 if the row does not decode or out
 * is out of memory. */
int ch_dl_line(struct sl_buf *out, const char *stream, const char *db, const struct ch_layout *l,
	       bool meta_only, const void *row, size_t len, int code, const char *reason, int64_t now_us);

/* Appends one line (with its "\n") for a change that could not be made a
 * row at all (merge mode: a key column without a value), from its source
 * values vals (l->nsrc of them, in source column order), its CSN and its
 * change type: "code" is 0, "csn" and "change_type" name the change, and
 * "row" holds the source columns by their ClickHouse names.  Returns 0, or
 * -1 if out is out of memory. */
int ch_dl_values_line(struct sl_buf *out, const char *stream, const char *db, const struct ch_layout *l,
		      const struct sl_value *vals, const char *csn, const char *change_type, const char *reason,
		      int64_t now_us);

/* Appends s (n bytes) as a JSON string. */
void ch_json_str(struct sl_buf *out, const char *s, size_t n);

/* Appends lines to the file at path (created 0600 if missing) and fsyncs
 * it.  Returns 0, or -1 with a message in err. */
int ch_dl_write(const char *path, const void *lines, size_t len, char *err, size_t errlen);

#endif
