/*
 * sources/postgres/pg_text.h: PostgreSQL's text output format to typed values.
 *
 * pgoutput tuples and COPY ... TO STDOUT carry every column as the text its
 * type's output function writes.  This is where that text becomes a struct
 * sl_value (schema/schema.h), by the rules of doc/types.md: the sessions use
 * DateStyle ISO, TimeZone UTC and bytea_output hex (see sl_pg_connect), and
 * anything else that is not exactly what PostgreSQL writes is rejected, so a
 * value never silently changes meaning.  It also maps PostgreSQL types to
 * output types.
 *
 * Nothing here allocates, except the scratch buffer of sl_pg_text_row, which
 * grows to the largest row's uuids and decimal digits and is then reused:
 * bytes, the one type whose values can be large, are decoded in place.
 */
#ifndef SLUICE_SOURCES_POSTGRES_PG_TEXT_H
#define SLUICE_SOURCES_POSTGRES_PG_TEXT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"
#include "schema/schema.h"

/* PostgreSQL built-in type OIDs (src/include/catalog/pg_type.dat). */
enum sl_pg_oid {
	SL_PG_BOOL = 16, SL_PG_BYTEA = 17, SL_PG_INT8 = 20, SL_PG_INT2 = 21, SL_PG_INT4 = 23,
	SL_PG_TEXT = 25, SL_PG_JSON = 114, SL_PG_FLOAT4 = 700, SL_PG_FLOAT8 = 701,
	SL_PG_BPCHAR = 1042, SL_PG_VARCHAR = 1043, SL_PG_DATE = 1082, SL_PG_TIME = 1083,
	SL_PG_TIMESTAMP = 1114, SL_PG_TIMESTAMPTZ = 1184, SL_PG_NUMERIC = 1700,
	SL_PG_UUID = 2950, SL_PG_JSONB = 3802,
};

/* Maps a PostgreSQL type OID and typmod to an output type; sets precision and
 * scale for SL_T_DECIMAL (numeric(p,s) with 0 <= s <= p), leaves them alone
 * otherwise. */
enum sl_type sl_pg_type_map(uint32_t oid, int32_t typmod, int *precision, int *scale);

/* Clamping of PostgreSQL's infinite dates and timestamps: Avro readers such as
 * Python's datetime only hold years 1-9999, so "infinity" becomes the last
 * representable instant and "-infinity" the first. */
#define SL_PG_DATE_INFINITY      INT32_C(2932896)                /* 9999-12-31 */
#define SL_PG_DATE_NEG_INFINITY  INT32_C(-719162)                /* 0001-01-01 */
#define SL_PG_TS_INFINITY        INT64_C(253402300799999999)     /* 9999-12-31 23:59:59.999999 */
#define SL_PG_TS_NEG_INFINITY    INT64_C(-62135596800000000)     /* 0001-01-01 00:00:00 */

/* Counters of one converter's owner.  They start at zero and only grow. */
struct sl_pg_text_stats {
	/* "NaN" in a numeric(p,s) column: a decimal cannot hold NaN, so the value
	 * becomes SL_V_NULL, counted here, with a warning on the 1st, 2nd, 4th,
	 * 8th, ... occurrence. */
	uint64_t decimal_nan_nulls;
	/* Timestamps past 294247-01-10 04:00:54.775807 UTC (the end of 64-bit
	 * microseconds since 1970; PostgreSQL goes on to 294276): written as that
	 * instant, counted here, warned like NaNs. */
	uint64_t timestamp_clamps;
};

/* Converts the ncols text values of one row of t into typed values.  Strings
 * and JSON point into the text.  Bytes (hex bytea, 2 text bytes a byte) are
 * decoded in place, in the text, and point there: the text of a bytea value
 * is overwritten, and cannot be converted twice.  Uuids and decimal digits
 * go into scratch, which is reset first (so out stays valid until scratch is
 * next used or freed, and as long as the text).  st may be NULL.  Returns 0,
 * or -1 with a message in err naming the column and quoting at most 64 bytes
 * of the value (out is then partly filled and not to be used; an invalid
 * bytea's text is left as it came). */
int sl_pg_text_row(const struct sl_table *t, struct sl_text_value *in, struct sl_value *out,
		   struct sl_buf *scratch, struct sl_pg_text_stats *st, char *err, size_t errlen);

/* One column's text, converted as sl_pg_text_row does, into *o; the room in
 * scratch that it may take (sl_pg_text_scratch(col, len) bytes) must have
 * been reserved, so scratch never moves.  Returns 0, or -1 with the message
 * in err as sl_pg_text_row writes it. */
int sl_pg_text_column(const struct sl_column *col, char *p, size_t len, struct sl_value *o, struct sl_buf *scratch,
		      struct sl_pg_text_stats *st, char *err, size_t errlen);
/* The most scratch bytes a value text of len bytes can take in column col. */
size_t sl_pg_text_scratch(const struct sl_column *col, size_t len);
/* Counts (in st, which may be NULL) and warns, on the 1st, 2nd, 4th, ...
 * occurrence, a NaN written as null to a decimal column, and a timestamp
 * clamped to the last instant int64 microseconds hold (shown: len bytes
 * that name the value in the warning). */
void sl_pg_note_decimal_nan(const struct sl_column *col, struct sl_pg_text_stats *st);
void sl_pg_note_ts_clamp(const struct sl_column *col, const char *shown, size_t len, struct sl_pg_text_stats *st);

/* ---- the parsers: each returns 0, or -1 if the text is not valid ---- */

/* "2024-01-31", "0044-03-15 BC" (year N BC is astronomical year 1-N), years
 * past 9999, "infinity" / "-infinity" (clamped, see above) -> days since
 * 1970-01-01 in the proleptic Gregorian calendar. */
int sl_pg_parse_date(const char *p, size_t len, int32_t *days);
/* "13:45:00", "13:45:00.5", "24:00:00" -> microseconds since midnight. */
int sl_pg_parse_time(const char *p, size_t len, int64_t *us);
/* "2024-01-31 13:45:00[.ffffff][ BC]" -> microseconds since the Unix epoch,
 * taken as UTC.  With with_tz, an offset follows the time ("+00", "-08",
 * "+05:30", "+05:30:15"; " BC" comes after it) and the result is converted to
 * UTC.  "infinity" / "-infinity" are clamped, see above.  Returns 1 (with
 * *us = INT64_MAX) for an instant past what int64 microseconds hold, which
 * PostgreSQL's last 30 years are. */
int sl_pg_parse_timestamp(const char *p, size_t len, bool with_tz, int64_t *us);
/* numeric text ("-123.45", "0.5", "100") of a numeric(precision, scale)
 * column -> the unscaled value's digits at the column's scale, without
 * leading zeros ("0" for zero), written to digits (room for len + scale
 * bytes), their count in *ndigits, the sign in *neg (never true for zero).
 * Returns 0, 1 for "NaN" (nothing written), or -1 if the text is not a
 * number, has more than scale fraction digits or more than precision digits,
 * or precision exceeds SL_DECIMAL_MAX_DIGITS. */
int sl_pg_parse_decimal(const char *p, size_t len, int precision, int scale, char *digits,
			size_t *ndigits, bool *neg);
/* "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11" (either case) -> 16 bytes. */
int sl_pg_parse_uuid(const char *p, size_t len, unsigned char out[static 16]);

#endif
