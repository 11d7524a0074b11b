/*
 * sinks/avro_dir/avro_value.h: Avro binary encoding of primitive values, and
 * the conversion of one column value from PostgreSQL's text output format
 * (see enum sl_type in schema/schema.h) to its Avro binary encoding as the
 * nullable union ["null", T] that every payload field uses.
 *
 * Everything appends to a struct sl_buf and allocates nothing besides what
 * the buffer itself grows by.  The text parsers are exposed so that other
 * sinks and tests can use the same rules (BC years, infinity clamping, time
 * zone offsets).
 */
#ifndef SLUICE_SINKS_AVRO_DIR_AVRO_VALUE_H
#define SLUICE_SINKS_AVRO_DIR_AVRO_VALUE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "common/buf.h"
#include "schema/schema.h"

/* Counters a caller may read at any time.  They start at zero and only grow;
 * whoever owns the struct passes it to the encoder and to the sink. */
struct sl_avro_stats {
	uint64_t records;           /* records encoded and written */
	uint64_t files_closed;      /* container files completed and made visible */
	/* DECIMAL values "NaN": an Avro decimal cannot hold NaN, so the value is
	 * written as the union's null branch and counted here. */
	uint64_t decimal_nan_nulls;
};

/* Clamping of PostgreSQL's infinite dates and timestamps: Avro readers such as
 * Python's datetime only hold years 1-9999, so "infinity" becomes the last
 * representable instant and "-infinity" the first. */
#define SL_AVRO_DATE_INFINITY      INT32_C(2932896)                /* 9999-12-31 */
#define SL_AVRO_DATE_NEG_INFINITY  INT32_C(-719162)                /* 0001-01-01 */
#define SL_AVRO_TS_INFINITY        INT64_C(253402300799999999)     /* 9999-12-31 23:59:59.999999 */
#define SL_AVRO_TS_NEG_INFINITY    INT64_C(-62135596800000000)     /* 0001-01-01 00:00:00 */

/* numeric(p,s) allows p <= 1000; the unscaled value of 1000 digits needs 416
 * bytes of two's complement. */
#define SL_AVRO_DECIMAL_MAX_DIGITS 1000
#define SL_AVRO_DECIMAL_MAX_BYTES  420

/* ---- primitive encoders: each returns 0, or -1 when the buffer failed ---- */

/* Appends n raw bytes.  The inline fast path, taken when the buffer has room,
 * keeps the per-field cost of the record encoder down to a memcpy. */
static inline int sl_avro_put_raw(struct sl_buf *b, const void *p, size_t n)
{
	if (!b->failed && b->alloc - b->len > n && n <= b->cap - b->len) {
		memcpy(b->data + b->len, p, n);
		b->len += n;
		b->data[b->len] = '\0';
		return 0;
	}
	return sl_buf_append(b, p, n);
}

static inline int sl_avro_put_byte(struct sl_buf *b, unsigned char c)
{
	return sl_avro_put_raw(b, &c, 1);
}

/* Avro int and long: zigzag, then a little-endian base-128 varint. */
static inline int sl_avro_put_long(struct sl_buf *b, int64_t v)
{
	uint64_t z = ((uint64_t)v << 1) ^ (0 - ((uint64_t)v >> 63));
	unsigned char p[10];
	size_t n = 0;

	while (z > 0x7f) {
		p[n++] = (unsigned char)(z | 0x80);
		z >>= 7;
	}
	p[n++] = (unsigned char)z;
	return sl_avro_put_raw(b, p, n);
}

/* Avro bytes and string: the length as a long, then the bytes. */
static inline int sl_avro_put_bytes(struct sl_buf *b, const void *p, size_t n)
{
	if (sl_avro_put_long(b, (int64_t)n) < 0)
		return -1;
	return sl_avro_put_raw(b, p, n);
}

static inline int sl_avro_put_str(struct sl_buf *b, const char *s)
{
	return sl_avro_put_bytes(b, s, strlen(s));
}

static inline int sl_avro_put_bool(struct sl_buf *b, bool v)
{
	return sl_avro_put_byte(b, v ? 1 : 0);
}

/* Avro float and double: IEEE 754 bits, little-endian. */
int sl_avro_put_float(struct sl_buf *b, float f);
int sl_avro_put_double(struct sl_buf *b, double d);

/* ---- text parsers: each returns 0, or -1 if the text is not valid ---- */

/* "2024-01-31", "0044-03-15 BC" (year N BC is astronomical year 1-N), years
 * past 9999, "infinity" / "-infinity" (clamped, see above) -> days since
 * 1970-01-01 in the proleptic Gregorian calendar. */
int sl_avro_parse_date(const char *p, size_t len, int32_t *days);
/* "13:45:00", "13:45:00.5", "24:00:00" -> microseconds since midnight. */
int sl_avro_parse_time(const char *p, size_t len, int64_t *us);
/* "2024-01-31 13:45:00[.ffffff][ BC]" -> microseconds since the Unix epoch,
 * taken as UTC.  With with_tz, an offset follows the time ("+00", "-08",
 * "+05:30", "+05:30:15"; " BC" comes after it) and the result is converted to
 * UTC.  "infinity" / "-infinity" are clamped, see above. */
int sl_avro_parse_timestamp(const char *p, size_t len, bool with_tz, int64_t *us);
/* numeric text ("-123.45", "0.5", "100") of a numeric(precision, scale)
 * column -> the unscaled value as minimal big-endian two's complement in out,
 * its length in *outlen.  Returns 0, 1 for "NaN" (nothing written), or -1 if
 * the text is not a number, has more than scale fraction digits or more than
 * precision digits, or precision exceeds SL_AVRO_DECIMAL_MAX_DIGITS. */
int sl_avro_parse_decimal(const char *p, size_t len, int precision, int scale,
			  unsigned char out[static SL_AVRO_DECIMAL_MAX_BYTES], size_t *outlen);

/* Appends the Avro encoding of value v of column col as the union
 * ["null", T]: SL_V_NULL and SL_V_UNCHANGED give the null branch (the caller
 * lists unchanged columns in source_metadata.unchanged_columns), a decimal
 * "NaN" gives the null branch and increments st->decimal_nan_nulls (st may be
 * NULL).  Returns 0, or -1 with a message in err naming the column and quoting
 * at most 64 bytes of the value; on failure b is left as it was on entry
 * (unless b had already failed). */
int sl_avro_put_value(struct sl_buf *b, const struct sl_column *col, const struct sl_value *v,
		      struct sl_avro_stats *st, char *err, size_t errlen);

#endif
