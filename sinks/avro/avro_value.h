/*
 * sinks/avro/avro_value.h: Avro binary encoding of primitive values, and
 * of one typed column value (struct sl_value, schema/schema.h) as the
 * nullable union ["null", T] that every payload field uses.
 *
 * Everything appends to a struct sl_buf and allocates nothing besides what
 * the buffer itself grows by.  Values arrive typed: the sink never parses a
 * source's text.
 */
#ifndef SLUICE_SINKS_AVRO_AVRO_VALUE_H
#define SLUICE_SINKS_AVRO_AVRO_VALUE_H

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
};

/* A decimal has at most SL_DECIMAL_MAX_DIGITS (1000) digits; the unscaled
 * value of 1000 digits needs 416 bytes of two's complement. */
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

/* The 36 characters of a uuid's canonical text, 8-4-4-4-12 lowercase hex
 * (no NUL). */
void sl_avro_uuid_text(char out[static 36], const unsigned char u[static 16]);

/* Avro float and double: IEEE 754 bits, little-endian. */
int sl_avro_put_float(struct sl_buf *b, float f);
int sl_avro_put_double(struct sl_buf *b, double d);

/* The unscaled decimal value of ndigits ASCII digits followed by pad zeros,
 * negated if neg, as minimal big-endian two's complement in out; its length
 * in *outlen.  Returns 0, or -1 if a character is not a digit or there are
 * more than SL_DECIMAL_MAX_DIGITS digits (leading zeros not counted). */
int sl_avro_decimal_bytes(const char *digits, size_t ndigits, size_t pad, bool neg,
			  unsigned char out[static SL_AVRO_DECIMAL_MAX_BYTES], size_t *outlen);

/* The unscaled bytes (as sl_avro_decimal_bytes) of decimal value v for a
 * column `name` of type decimal(precision, scale), after checking that the
 * value's scale and digits fit it.  Returns 0, or -1 with a message in err
 * naming the column (shared by the Avro and Iceberg encoders). */
int sl_avro_decimal_of(const struct sl_value *v, const char *name, int precision, int scale,
		       unsigned char out[static SL_AVRO_DECIMAL_MAX_BYTES], size_t *outlen, char *err, size_t errlen);

/* Appends the Avro encoding of value v of column col as the union
 * ["null", T].  The value's kind must fit the column's type as the table in
 * schema/schema.h says: SL_V_NULL and SL_V_UNCHANGED give the null branch
 * (the caller lists unchanged columns in source_metadata.unchanged_columns);
 * a decimal with a smaller scale than the column's is padded with zeros.
 * A uuid is written as its canonical 36-character lowercase text.  Returns
 * 0, or -1 with a message in err naming the column (a kind that does not
 * fit the type, an integer or date out of range, a decimal with a larger
 * scale than the column's or more digits than its precision); on failure b
 * is left as it was on entry (unless b had already failed). */
int sl_avro_put_value(struct sl_buf *b, const struct sl_column *col, const struct sl_value *v,
		      char *err, size_t errlen);

#endif
