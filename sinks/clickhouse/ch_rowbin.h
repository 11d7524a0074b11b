/*
 * sinks/clickhouse/ch_rowbin.h: ClickHouse's RowBinary format for the column
 * types the ClickHouse sink uses, both ways: the encoder that builds insert
 * bodies, and next to it the decoder that reads rows back (the lookup of
 * unchanged TOAST values, dead-letter lines, and the round-trip tests).
 *
 * RowBinary is a row after row of values in the table's column order, each
 * little-endian and fixed-width, or length-prefixed:
 *
 *   UInt8, Int32, Int64, UInt64   1, 4, 8, 8 bytes, little-endian
 *   Float32, Float64              the IEEE 754 bits, little-endian
 *   Decimal(P,S)                  the unscaled value as a signed integer of
 *                                 4 (P <= 9), 8 (P <= 18), 16 (P <= 38) or
 *                                 32 (P <= 76) bytes
 *   String                        a LEB128 length, then the bytes
 *   Bool                          1 byte, 0 or 1
 *   Date32                        Int32 days since 1970-01-01
 *   DateTime64(6[, tz])           Int64 microseconds since the epoch (UTC)
 *   UUID                          two little-endian UInt64: the first holds
 *                                 the uuid's bytes 0-7 (its text's first 16
 *                                 hex digits), the second bytes 8-15
 *   Array(String)                 a LEB128 count, then each String
 *   Nullable(T)                   1 byte: 1 for NULL (nothing follows), 0 then T
 *
 * That layout is the same from ClickHouse 18.16 to 26.x; Bool, Date32,
 * DateTime64, UUID and Decimal256 are used only by the modern layout
 * (servers 23.x and later, doc/clickhouse.md, "Layouts").  Payload values
 * arrive typed (schema/schema.h); struct ch_type says which ClickHouse type
 * a column has and which sluice type it holds (doc/clickhouse.md, "Types").
 * Nothing here allocates besides what a struct sl_buf grows by.
 */
#ifndef SLUICE_SINKS_CLICKHOUSE_CH_ROWBIN_H
#define SLUICE_SINKS_CLICKHOUSE_CH_ROWBIN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "common/buf.h"
#include "schema/schema.h"

/* The ClickHouse column types the sink creates. */
enum ch_ctype {
	CH_UINT8 = 0,
	CH_INT32,
	CH_INT64,
	CH_UINT64,
	CH_FLOAT32,
	CH_FLOAT64,
	CH_DECIMAL,        /* Decimal(precision, scale), precision 1-38 */
	CH_STRING,
	CH_ARRAY_STRING,   /* Array(String) */
	/* the modern layout's */
	CH_BOOL,
	CH_DATE32,
	CH_DATETIME64,     /* DateTime64(6): no time zone (timestamp, DATETIME) */
	CH_DATETIME64_UTC, /* DateTime64(6, 'UTC') */
	CH_UUID,
};

/* The two layouts of the sink's tables (doc/clickhouse.md, "Layouts"):
 * legacy, ClickHouse 18.16's types, and modern, for 23.x and later. */
enum ch_flavor { CH_LEGACY = 0, CH_MODERN };

/* The widest Decimal of each layout: Decimal128 (18.16), Decimal256. */
#define CH_DECIMAL_MAX_PRECISION 38
#define CH_DECIMAL256_MAX_PRECISION 76

/* Date32's range, in days since 1970-01-01: 1900-01-01 to 2299-12-31.  A
 * date outside it is clamped to its nearer end (and counted). */
#define CH_DATE32_MIN (-25567)
#define CH_DATE32_MAX 120529

/* A column's type.  For a payload column, sl is the sluice type of the
 * source column, which decides the value kinds it accepts and how a value
 * reads back; scale is the source decimal's scale (SL_T_DECIMAL), also when
 * a decimal too wide for ClickHouse is held as its text in a String. */
struct ch_type {
	enum ch_ctype ch;
	bool nullable;
	int precision;        /* SL_T_DECIMAL: the source column's precision */
	int scale;            /* SL_T_DECIMAL: the source column's scale */
	enum sl_type sl;      /* payload columns: the source column's type */
};

/* Maps a source column's type to its ClickHouse type in layout fl
 * (doc/clickhouse.md): nullable for every payload column except a key
 * column of a merge-mode table (ClickHouse sorting keys cannot be
 * Nullable).  Returns 0, or -1 for a type it does not know. */
int ch_type_of_column(struct ch_type *out, const struct sl_column *col, bool nullable, enum ch_flavor fl);

/* The bytes of a Decimal(P, S) in RowBinary: 4, 8, 16 or 32. */
static inline size_t ch_decimal_width(int precision)
{
	return precision <= 9 ? 4 : precision <= 18 ? 8 : precision <= 38 ? 16 : 32;
}

/* Writes the type's SQL, as ClickHouse prints it in system.columns
 * ("Nullable(Decimal(12, 2))"), into b.  Returns 0, or -1 if b failed. */
int ch_type_sql(struct sl_buf *b, const struct ch_type *t);

/* ---- primitive encoders: each returns 0, or -1 when the buffer failed ---- */

static inline int ch_rb_put_raw(struct sl_buf *b, const void *p, size_t n)
{
	if (!b->failed && b->alloc - b->len > n && n <= b->cap - b->len) {
		memcpy(b->data + b->len, p, n);
		b->len += n;
		b->data[b->len] = '\0';
		return 0;
	}
	return sl_buf_append(b, p, n);
}

static inline int ch_rb_put_u8(struct sl_buf *b, unsigned v)
{
	unsigned char c = (unsigned char)v;

	return ch_rb_put_raw(b, &c, 1);
}

static inline int ch_rb_put_u32(struct sl_buf *b, uint32_t v)
{
	unsigned char p[4] = { (unsigned char)v, (unsigned char)(v >> 8), (unsigned char)(v >> 16),
			       (unsigned char)(v >> 24) };

	return ch_rb_put_raw(b, p, 4);
}

static inline int ch_rb_put_u64(struct sl_buf *b, uint64_t v)
{
	unsigned char p[8];

	for (int i = 0; i < 8; i++)
		p[i] = (unsigned char)(v >> (8 * i));
	return ch_rb_put_raw(b, p, 8);
}

static inline int ch_rb_put_i64(struct sl_buf *b, int64_t v)
{
	return ch_rb_put_u64(b, (uint64_t)v);
}

/* An unsigned LEB128 number: 7 bits a byte, least significant first. */
static inline int ch_rb_put_uleb(struct sl_buf *b, uint64_t v)
{
	unsigned char p[10];
	size_t n = 0;

	while (v > 0x7f) {
		p[n++] = (unsigned char)(v | 0x80);
		v >>= 7;
	}
	p[n++] = (unsigned char)v;
	return ch_rb_put_raw(b, p, n);
}

static inline int ch_rb_put_str(struct sl_buf *b, const void *p, size_t n)
{
	if (ch_rb_put_uleb(b, n) < 0)
		return -1;
	return ch_rb_put_raw(b, p, n);
}

/* The 36 characters of a uuid's canonical text, 8-4-4-4-12 lowercase hex
 * (no NUL). */
void ch_uuid_text(char out[static 36], const unsigned char u[static 16]);

/* A uuid (its 16 bytes in text order) as a UUID column holds it in
 * RowBinary: bytes 7..0, then 15..8. */
int ch_rb_put_uuid(struct sl_buf *b, const unsigned char u[static 16]);

/* Appends value v of a payload column of type t.  The value's kind must fit
 * the column's sluice type as schema/schema.h says; SL_V_NULL and
 * SL_V_UNCHANGED both write NULL (the caller lists unchanged columns), which
 * a column that is not nullable refuses.  A decimal with a smaller scale
 * than the column's is padded with zeros; a larger scale, or more digits
 * than the precision, is refused.  A uuid is written as its canonical text
 * (String) or as a UUID.  A date outside Date32's range, in a Date32
 * column, is clamped to the range's nearer end.  Returns 0, 1 when a value
 * was clamped, or -1 with a message in err naming column name; on failure b
 * is left as it was on entry (unless b had already failed). */
int ch_rb_put_value(struct sl_buf *b, const struct ch_type *t, const struct sl_value *v,
		    const char *name, char *err, size_t errlen);

/* ---- decoding ---- */

struct ch_rb_reader {
	const unsigned char *p;
	const unsigned char *end;
};

/* Room a decoded value may need besides the input: the digits of a decimal
 * (up to SL_DECIMAL_MAX_DIGITS), or the 16 bytes of a uuid. */
#define CH_RB_SCRATCH (SL_DECIMAL_MAX_DIGITS + 8)

/* Reads one value of a payload column of type t into *v: the kind the
 * column's sluice type takes (SL_V_NULL for NULL), so that encoding it again
 * gives the same bytes.  String-like values point into the reader's input;
 * decimal digits and uuid bytes into scratch.  Returns 0, or -1 if the
 * input is truncated or is not a value of that type. */
int ch_rb_get_value(struct ch_rb_reader *r, const struct ch_type *t, struct sl_value *v,
		    char scratch[static CH_RB_SCRATCH]);

/* Primitive readers: 0, or -1 when the input is truncated. */
int ch_rb_get_u8(struct ch_rb_reader *r, unsigned *v);
int ch_rb_get_u64(struct ch_rb_reader *r, uint64_t *v);
int ch_rb_get_uleb(struct ch_rb_reader *r, uint64_t *v);
/* A UUID column's value: its 16 bytes in text order (ch_rb_put_uuid). */
int ch_rb_get_uuid(struct ch_rb_reader *r, unsigned char u[static 16]);
/* A String: *p points into the input, *n bytes. */
int ch_rb_get_str(struct ch_rb_reader *r, const unsigned char **p, size_t *n);
/* Steps over one value of any column type t.  0, or -1. */
int ch_rb_skip(struct ch_rb_reader *r, const struct ch_type *t);

#endif
