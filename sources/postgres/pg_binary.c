/*
 * sources/postgres/pg_binary.c: PostgreSQL binary values to typed values.
 *
 * The send functions' formats (src/backend/utils/adt/, PostgreSQL 15), all
 * in network byte order:
 *   bool: 1 byte, 0 or 1.  int2/int4/int8: two's complement.  oid: uint32.
 *   float4/float8: IEEE 754 bits.  text, varchar, bpchar (with its padding),
 *   name, json: the text's bytes.  jsonb: a version byte (1), then its text.
 *   bytea: the bytes.  uuid: the 16 bytes.
 *   date: int32 days since 2000-01-01; INT32_MIN and INT32_MAX are
 *   -infinity and infinity.  time: int64 microseconds since midnight.
 *   timestamp, timestamptz (UTC): int64 microseconds since 2000-01-01
 *   00:00:00; INT64_MIN and INT64_MAX are -infinity and infinity.
 *   numeric: int16 ndigits, int16 weight, uint16 sign (0x0000 positive,
 *   0x4000 negative, 0xC000 NaN, 0xD000 Infinity, 0xF000 -Infinity), uint16
 *   dscale (the digits shown after the point), then ndigits base-10000
 *   digits, the first worth 10000^weight.
 * A binary COPY (the COPY reference page, "Binary Format") starts with an
 * 11-byte signature, a 32-bit flags word (bit 16: OIDs included) and a
 * 32-bit header extension length; each tuple is a 16-bit field count and
 * per field a 32-bit length (-1: NULL) and the bytes; the trailer is a
 * field count of -1.  PostgreSQL sends the header in the same CopyData
 * message as the first tuple, and each tuple and the trailer in one
 * message of its own.
 */
#include "sources/postgres/pg_binary.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#define PG_EPOCH_DAYS INT32_C(10957)                          /* 2000-01-01 - 1970-01-01 */
#define PG_EPOCH_US (INT64_C(10957) * 86400 * 1000000)
#define PG_NAME 19
#define PG_OID 26
#define NUMERIC_POS 0x0000
#define NUMERIC_NEG 0x4000
#define NUMERIC_NAN 0xC000

static const char copy_signature[11] = { 'P', 'G', 'C', 'O', 'P', 'Y', '\n', '\377', '\r', '\n', '\0' };

static uint16_t get16(const char *p)
{
	const unsigned char *u = (const unsigned char *)p;

	return (uint16_t)(u[0] << 8 | u[1]);
}

static uint32_t get32(const char *p)
{
	const unsigned char *u = (const unsigned char *)p;

	return (uint32_t)u[0] << 24 | (uint32_t)u[1] << 16 | (uint32_t)u[2] << 8 | u[3];
}

static uint64_t get64(const char *p)
{
	return (uint64_t)get32(p) << 32 | get32(p + 4);
}

bool sl_pg_bin_decodes(const struct sl_column *col)
{
	int precision = 0, scale = 0;

	switch (col->src_type) {
	case PG_NAME:
	case PG_OID:
		return col->type == SL_T_STRING;
	case SL_PG_BOOL: case SL_PG_BYTEA: case SL_PG_INT8: case SL_PG_INT2: case SL_PG_INT4:
	case SL_PG_TEXT: case SL_PG_JSON: case SL_PG_FLOAT4: case SL_PG_FLOAT8: case SL_PG_BPCHAR:
	case SL_PG_VARCHAR: case SL_PG_DATE: case SL_PG_TIME: case SL_PG_TIMESTAMP: case SL_PG_TIMESTAMPTZ:
	case SL_PG_UUID: case SL_PG_JSONB:
		return col->type == sl_pg_type_map(col->src_type, col->src_typmod, &precision, &scale);
	case SL_PG_NUMERIC:
		if (col->type != sl_pg_type_map(col->src_type, col->src_typmod, &precision, &scale))
			return false;
		return col->type != SL_T_DECIMAL || (precision == col->precision && scale == col->scale);
	default:
		return false;
	}
}

int sl_pg_copy_binary_header(const char *p, size_t len, size_t *skip)
{
	uint32_t flags, ext;

	if (len < 19 || memcmp(p, copy_signature, sizeof copy_signature) != 0)
		return -1;
	flags = get32(p + 11);
	ext = get32(p + 15);
	if ((flags & 0xffff0000u) != 0 || ext > len - 19)
		return -1;  /* OIDs, or a critical flag this does not know */
	*skip = 19 + (size_t)ext;
	return 0;
}

int sl_pg_copy_binary_tuple(char *p, size_t len, struct sl_text_value *vals, int ncols)
{
	size_t off = 2;
	int16_t n;

	if (len < 2)
		return -1;
	n = (int16_t)get16(p);
	if (n == -1)
		return len == 2 ? 0 : -1;
	if (n != ncols)
		return -1;
	for (int i = 0; i < ncols; i++) {
		int32_t flen;
		if (len - off < 4)
			return -1;
		flen = (int32_t)get32(p + off);
		off += 4;
		if (flen == -1) {
			vals[i] = (struct sl_text_value){ .kind = SL_TV_NULL };
			continue;
		}
		if (flen < 0 || (size_t)flen > len - off)
			return -1;
		vals[i] = (struct sl_text_value){ .kind = SL_TV_TEXT, .p = p + off, .len = (uint32_t)flen };
		off += (size_t)flen;
	}
	return off == len ? 1 : -1;
}

/* ---- numeric ---- */

struct numeric {
	int ndigits, weight, dscale;
	uint16_t sign;
	const char *digits;   /* ndigits big-endian uint16, each 0-9999 */
};

static int numeric_read(const char *p, size_t len, struct numeric *n)
{
	if (len < 8)
		return -1;
	n->ndigits = (int16_t)get16(p);
	n->weight = (int16_t)get16(p + 2);
	n->sign = get16(p + 4);
	n->dscale = get16(p + 6);
	n->digits = p + 8;
	if (n->ndigits < 0 || len != 8 + 2 * (size_t)n->ndigits || n->dscale > 0x3fff)
		return -1;
	for (int i = 0; i < n->ndigits; i++)
		if (get16(n->digits + 2 * i) > 9999)
			return -1;
	return 0;
}

/* The decimal digit of n worth 10^e. */
static int numeric_digit(const struct numeric *n, int e)
{
	static const int pow10[4] = { 1, 10, 100, 1000 };
	int g = e >= 0 ? e / 4 : -((-e + 3) / 4);   /* the base-10000 group, floor(e / 4) */
	int i = n->weight - g;

	if (i < 0 || i >= n->ndigits)
		return 0;
	return get16(n->digits + 2 * i) / pow10[e - 4 * g] % 10;
}

/* The highest power of ten n's digits reach (at least 0). */
static int numeric_top(const struct numeric *n)
{
	return n->weight >= 0 ? 4 * n->weight + 3 : 0;
}

/* The decimal digits of n worth 10^hi down to 10^lo, written at out, a
 * base-10000 digit at a time. */
static void numeric_digits(const struct numeric *n, int hi, int lo, char *out)
{
	char grp[4] = { '0', '0', '0', '0' };
	int cur = hi + 1;   /* no group yet */

	for (int e = hi; e >= lo; e--) {
		int g = e >= 0 ? e / 4 : -((-e + 3) / 4);   /* floor(e / 4) */
		if (g != cur) {
			int i = n->weight - g;
			unsigned d = i >= 0 && i < n->ndigits ? get16(n->digits + 2 * i) : 0;
			grp[0] = (char)('0' + d / 1000);
			grp[1] = (char)('0' + d / 100 % 10);
			grp[2] = (char)('0' + d / 10 % 10);
			grp[3] = (char)('0' + d % 10);
			cur = g;
		}
		*out++ = grp[3 - (e - 4 * g)];
	}
}

/* n as numeric_out writes it, at dst.  Returns the length. */
static size_t numeric_text(const struct numeric *n, char *dst)
{
	size_t k = 0, lead = 0, nint = (size_t)numeric_top(n) + 1;

	switch (n->sign) {
	case NUMERIC_NAN: memcpy(dst, "NaN", 3); return 3;
	case 0xD000: memcpy(dst, "Infinity", 8); return 8;
	case 0xF000: memcpy(dst, "-Infinity", 9); return 9;
	case NUMERIC_NEG: dst[k++] = '-'; break;
	default: break;
	}
	numeric_digits(n, numeric_top(n), 0, dst + k);
	while (lead + 1 < nint && dst[k + lead] == '0')
		lead++;
	memmove(dst + k, dst + k + lead, nint - lead);
	k += nint - lead;
	if (n->dscale > 0) {
		dst[k++] = '.';
		numeric_digits(n, -1, -n->dscale, dst + k);
		k += (size_t)n->dscale;
	}
	return k;
}

/* n at column col's scale: its unscaled digits without leading zeros ("0"
 * for zero) at dst (room for precision + 4 bytes), as sl_pg_parse_decimal
 * gives them.  Returns the count, 0 for NaN, or -1 (infinite, more fraction
 * digits than the scale, or more digits than the precision). */
static int numeric_decimal(const struct numeric *n, const struct sl_column *col, char *dst, bool *neg)
{
	int low = 4 * (n->weight - n->ndigits + 1), top = numeric_top(n), k, lead = 0;

	if (n->sign == NUMERIC_NAN)
		return 0;
	if ((n->sign != NUMERIC_POS && n->sign != NUMERIC_NEG) || n->dscale > col->scale ||
	    col->precision > SL_DECIMAL_MAX_DIGITS)
		return -1;
	if (n->ndigits == 0) {
		/* zero, sent with weight 0: no integer digits to count (the
		 * room check below would refuse it in numeric(p, s) with s
		 * close to p) */
		*neg = false;
		dst[0] = '0';
		return 1;
	}
	for (int e = -col->scale - 1; e >= low; e--)
		if (numeric_digit(n, e) != 0)
			return -1;
	/* top + 1 digits hold at most 3 leading zeros: more than precision + 3
	 * is more integer digits than the precision leaves room for */
	k = top + 1 + col->scale;
	if (k > col->precision + 3)
		return -1;
	numeric_digits(n, top, -col->scale, dst);
	while (lead < k && dst[lead] == '0')
		lead++;
	if (lead == k) {
		*neg = false;
		dst[0] = '0';
		return 1;
	}
	if (k - lead > col->precision)
		return -1;
	memmove(dst, dst + lead, (size_t)(k - lead));
	*neg = n->sign == NUMERIC_NEG;
	return k - lead;
}

size_t sl_pg_bin_scratch(const struct sl_column *col, const char *p, size_t len)
{
	struct numeric n;

	if (col->src_type == PG_OID)
		return 10;
	if (col->src_type != SL_PG_NUMERIC)
		return 0;
	if (col->type == SL_T_DECIMAL)
		return (size_t)col->precision + 4;
	if (numeric_read(p, len, &n) < 0)
		return 0;
	return (size_t)numeric_top(&n) + 1 + (size_t)n.dscale + 2 + 9;
}

/* ---- values ---- */

static int bin_timestamp(const struct sl_column *col, const char *p, size_t len, struct sl_value *o,
			 struct sl_pg_text_stats *st)
{
	int64_t v;

	if (len != 8)
		return -1;
	v = (int64_t)get64(p);
	if (v == INT64_MIN) {
		v = SL_PG_TS_NEG_INFINITY;
	} else if (v == INT64_MAX) {
		v = SL_PG_TS_INFINITY;
	} else if (v > INT64_MAX - PG_EPOCH_US) {
		char shown[48];
		int n = snprintf(shown, sizeof shown, "(%" PRId64 " us after 2000-01-01)", v);
		sl_pg_note_ts_clamp(col, shown, (size_t)n, st);
		v = INT64_MAX;
	} else {
		v += PG_EPOCH_US;
	}
	*o = (struct sl_value){ .kind = SL_V_TIMESTAMP, .i = v };
	return 0;
}

static int bin_numeric(const struct sl_column *col, const char *p, size_t len, struct sl_value *o,
		       struct sl_buf *s, struct sl_pg_text_stats *st)
{
	char *dst = s->data + s->len;
	struct numeric n;
	bool neg = false;
	int k;

	if (numeric_read(p, len, &n) < 0)
		return -1;
	if (col->type == SL_T_STRING) {
		size_t tl = numeric_text(&n, dst);
		*o = (struct sl_value){ .kind = SL_V_STRING, .len = (uint32_t)tl, .p = dst };
		s->len += tl;
		return 0;
	}
	if ((k = numeric_decimal(&n, col, dst, &neg)) < 0)
		return -1;
	if (k == 0) {
		sl_pg_note_decimal_nan(col, st);
		*o = (struct sl_value){ .kind = SL_V_NULL };
		return 0;
	}
	*o = (struct sl_value){ .kind = SL_V_DECIMAL, .neg = neg, .scale = (int16_t)col->scale, .len = (uint32_t)k,
				.p = dst };
	s->len += (size_t)k;
	return 0;
}

static int bin_int(const char *p, size_t len, struct sl_value *o)
{
	int64_t v;

	switch (len) {
	case 2: v = (int16_t)get16(p); break;
	case 4: v = (int32_t)get32(p); break;
	case 8: v = (int64_t)get64(p); break;
	default: return -1;
	}
	*o = (struct sl_value){ .kind = SL_V_INT, .i = v };
	return 0;
}

/* IEEE 754 bits: float4 (single) or float8. */
static int bin_float(const char *p, size_t len, bool single, struct sl_value *o)
{
	uint32_t b32;
	uint64_t b64;

	if (len != (single ? 4u : 8u))
		return -1;
	*o = (struct sl_value){ .kind = single ? SL_V_FLOAT : SL_V_DOUBLE };
	if (single) {
		b32 = get32(p);
		memcpy(&o->f, &b32, sizeof o->f);
	} else {
		b64 = get64(p);
		memcpy(&o->d, &b64, sizeof o->d);
	}
	return 0;
}

int sl_pg_bin_value(const struct sl_column *col, const char *p, size_t len, struct sl_value *o,
		    struct sl_buf *s, struct sl_pg_text_stats *st)
{
	switch (col->src_type) {
	case SL_PG_BOOL:
		if (len != 1 || (p[0] != 0 && p[0] != 1))
			return -1;
		*o = (struct sl_value){ .kind = SL_V_BOOL, .b = p[0] == 1 };
		return 0;
	case SL_PG_INT2: return len == 2 ? bin_int(p, len, o) : -1;
	case SL_PG_INT4: return len == 4 ? bin_int(p, len, o) : -1;
	case SL_PG_INT8: return len == 8 ? bin_int(p, len, o) : -1;
	case PG_OID: {
		int n;
		if (len != 4)
			return -1;
		n = snprintf(s->data + s->len, 11, "%" PRIu32, get32(p));
		*o = (struct sl_value){ .kind = SL_V_STRING, .len = (uint32_t)n, .p = s->data + s->len };
		s->len += (size_t)n;
		return 0;
	}
	case SL_PG_FLOAT4:
	case SL_PG_FLOAT8:
		return bin_float(p, len, col->src_type == SL_PG_FLOAT4, o);
	case SL_PG_BYTEA:
		*o = (struct sl_value){ .kind = SL_V_BYTES, .len = (uint32_t)len, .p = (char *)p };
		return 0;
	case SL_PG_TEXT: case SL_PG_VARCHAR: case SL_PG_BPCHAR: case PG_NAME:
		*o = (struct sl_value){ .kind = SL_V_STRING, .len = (uint32_t)len, .p = (char *)p };
		return 0;
	case SL_PG_JSON:
		*o = (struct sl_value){ .kind = SL_V_JSON, .len = (uint32_t)len, .p = (char *)p };
		return 0;
	case SL_PG_JSONB:
		if (len < 1 || p[0] != 1)
			return -1;
		*o = (struct sl_value){ .kind = SL_V_JSON, .len = (uint32_t)(len - 1), .p = (char *)p + 1 };
		return 0;
	case SL_PG_UUID:
		if (len != 16)
			return -1;
		*o = (struct sl_value){ .kind = SL_V_UUID, .len = 16, .p = (char *)p };
		return 0;
	case SL_PG_DATE: {
		int32_t d;
		if (len != 4)
			return -1;
		d = (int32_t)get32(p);
		d = d == INT32_MIN ? SL_PG_DATE_NEG_INFINITY : d == INT32_MAX ? SL_PG_DATE_INFINITY : d + PG_EPOCH_DAYS;
		*o = (struct sl_value){ .kind = SL_V_DATE, .i = d };
		return 0;
	}
	case SL_PG_TIME:
		if (len != 8)
			return -1;
		*o = (struct sl_value){ .kind = SL_V_TIME, .i = (int64_t)get64(p) };
		return 0;
	case SL_PG_TIMESTAMP:
	case SL_PG_TIMESTAMPTZ:
		return bin_timestamp(col, p, len, o, st);
	case SL_PG_NUMERIC:
		return bin_numeric(col, p, len, o, s, st);
	default:
		return -1;
	}
}

int sl_pg_binary_row(const struct sl_table *t, const bool *binary, struct sl_text_value *in, struct sl_value *out,
		     struct sl_buf *scratch, struct sl_pg_text_stats *st, char *err, size_t errlen)
{
	size_t need = 0;

	/* The whole row's scratch first: values point into it. */
	sl_buf_reset(scratch);
	for (int i = 0; i < t->ncols; i++)
		if (in[i].kind == SL_TV_TEXT)
			need += binary[i] ? sl_pg_bin_scratch(&t->cols[i], in[i].p, in[i].len)
					  : sl_pg_text_scratch(&t->cols[i], in[i].len);
	if (sl_buf_reserve(scratch, need + 1) < 0) {
		snprintf(err, errlen, "table \"%s\".\"%s\": out of memory or over the buffer cap converting a row "
			 "(%zu bytes of decoded values)", t->ns, t->name, need);
		return -1;
	}
	for (int i = 0; i < t->ncols; i++) {
		const struct sl_column *col = &t->cols[i];

		if (in[i].kind == SL_TV_NULL) {
			out[i] = (struct sl_value){ .kind = SL_V_NULL };
		} else if (in[i].kind != SL_TV_TEXT) {
			snprintf(err, errlen, "column \"%s\": unknown value kind %u", col->name, in[i].kind);
			return -1;
		} else if (!binary[i]) {
			if (sl_pg_text_column(col, in[i].p, in[i].len, &out[i], scratch, st, err, errlen) < 0)
				return -1;
		} else if (sl_pg_bin_value(col, in[i].p, in[i].len, &out[i], scratch, st) < 0) {
			snprintf(err, errlen, "column \"%s\": invalid binary value of type OID %u (%" PRIu32 " bytes)",
				 col->name, col->src_type, in[i].len);
			return -1;
		}
	}
	return 0;
}
