/*
 * sinks/clickhouse/ch_rowbin.c: typed values to RowBinary and back (see
 * ch_rowbin.h).
 *
 * Decimals arrive as decimal digits and become the unscaled value's
 * two's-complement integer of 4, 8, 16 or 32 bytes here, exactly (never through
 * floating point); a decimal wider than the layout's Decimal (38 or 76 digits) is written as
 * its text with exactly the column's scale.  The decoder inverts both.
 */
#include "sinks/clickhouse/ch_rowbin.h"

#include <inttypes.h>
#include <stdio.h>

/* A 128-bit integer (the carries of the 256-bit arithmetic): GCC and Clang
 * have it on every 64-bit target. */
__extension__ typedef unsigned __int128 u128;

int ch_type_of_column(struct ch_type *out, const struct sl_column *col, bool nullable, enum ch_flavor fl)
{
	bool modern = fl == CH_MODERN;

	memset(out, 0, sizeof *out);
	out->nullable = nullable;
	out->sl = col->type;
	switch (col->type) {
	case SL_T_STRING:
	case SL_T_BYTES:
	case SL_T_JSON:
		out->ch = CH_STRING;
		return 0;
	case SL_T_UUID:
		out->ch = modern ? CH_UUID : CH_STRING;
		return 0;
	case SL_T_BOOL:
		out->ch = modern ? CH_BOOL : CH_UINT8;
		return 0;
	case SL_T_INT32:
		out->ch = CH_INT32;
		return 0;
	case SL_T_DATE:
		out->ch = modern ? CH_DATE32 : CH_INT32;
		return 0;
	case SL_T_TIMESTAMP:
		out->ch = modern ? CH_DATETIME64 : CH_INT64;
		return 0;
	case SL_T_TIMESTAMPTZ:
		out->ch = modern ? CH_DATETIME64_UTC : CH_INT64;
		return 0;
	case SL_T_INT64:
	case SL_T_TIME:
		out->ch = CH_INT64;
		return 0;
	case SL_T_UINT64:
		out->ch = CH_UINT64;
		return 0;
	case SL_T_FLOAT:
		out->ch = CH_FLOAT32;
		return 0;
	case SL_T_DOUBLE:
		out->ch = CH_FLOAT64;
		return 0;
	case SL_T_DECIMAL:
		if (col->precision < 1 || col->scale < 0 || col->scale > col->precision ||
		    col->precision > SL_DECIMAL_MAX_DIGITS)
			return -1;
		out->precision = col->precision;
		out->scale = col->scale;
		out->ch = col->precision <= (modern ? CH_DECIMAL256_MAX_PRECISION : CH_DECIMAL_MAX_PRECISION)
				  ? CH_DECIMAL : CH_STRING;
		return 0;
	}
	return -1;
}

int ch_type_sql(struct sl_buf *b, const struct ch_type *t)
{
	const char *base = "String";

	if (t->nullable)
		sl_buf_puts(b, "Nullable(");
	switch (t->ch) {
	case CH_UINT8: base = "UInt8"; break;
	case CH_INT32: base = "Int32"; break;
	case CH_INT64: base = "Int64"; break;
	case CH_UINT64: base = "UInt64"; break;
	case CH_FLOAT32: base = "Float32"; break;
	case CH_FLOAT64: base = "Float64"; break;
	case CH_DECIMAL: base = NULL; break;
	case CH_STRING: base = "String"; break;
	case CH_ARRAY_STRING: base = "Array(String)"; break;
	case CH_BOOL: base = "Bool"; break;
	case CH_DATE32: base = "Date32"; break;
	case CH_DATETIME64: base = "DateTime64(6)"; break;
	case CH_DATETIME64_UTC: base = "DateTime64(6, 'UTC')"; break;
	case CH_UUID: base = "UUID"; break;
	}
	if (base)
		sl_buf_puts(b, base);
	else
		sl_buf_printf(b, "Decimal(%d, %d)", t->precision, t->scale);
	if (t->nullable)
		sl_buf_putc(b, ')');
	return sl_buf_failed(b) ? -1 : 0;
}

void ch_uuid_text(char out[static 36], const unsigned char u[static 16])
{
	static const char hex[] = "0123456789abcdef";
	size_t o = 0;

	for (int i = 0; i < 16; i++) {
		if (i == 4 || i == 6 || i == 8 || i == 10)
			out[o++] = '-';
		out[o++] = hex[u[i] >> 4];
		out[o++] = hex[u[i] & 0xf];
	}
}

int ch_rb_put_uuid(struct sl_buf *b, const unsigned char u[static 16])
{
	unsigned char p[16];

	for (int i = 0; i < 8; i++) {
		p[i] = u[7 - i];
		p[8 + i] = u[15 - i];
	}
	return ch_rb_put_raw(b, p, sizeof p);
}

/* ------------------------------------------------------------------ */
/* encoding                                                             */

/* A decimal value's digits without leading zeros, and the zeros its scale
 * needs to reach the column's; checked against the column's precision.
 * Returns 0, or -1 with a message. */
static int decimal_digits(const struct ch_type *t, const struct sl_value *v, const char *name,
			  const char **digits, size_t *nd, size_t *pad, char *err, size_t errlen)
{
	const char *d = v->p;
	size_t n = v->len;

	if (v->scale < 0 || v->scale > t->scale) {
		snprintf(err, errlen, "column \"%s\": a decimal value of scale %d does not fit decimal(%d,%d)",
			 name, v->scale, t->precision, t->scale);
		return -1;
	}
	if (n == 0) {
		snprintf(err, errlen, "column \"%s\": a decimal value without digits", name);
		return -1;
	}
	for (size_t i = 0; i < n; i++) {
		if (d[i] < '0' || d[i] > '9') {
			snprintf(err, errlen, "column \"%s\": invalid decimal digits \"%.*s\"%s", name,
				 (int)(n > 64 ? 64 : n), d, n > 64 ? "..." : "");
			return -1;
		}
	}
	while (n > 1 && d[0] == '0') {
		d++;
		n--;
	}
	*pad = (n == 1 && d[0] == '0') ? 0 : (size_t)(t->scale - v->scale);
	if (n + *pad > (size_t)t->precision && !(n == 1 && d[0] == '0')) {
		snprintf(err, errlen, "column \"%s\": a decimal value of %zu digits does not fit decimal(%d,%d)",
			 name, n + *pad, t->precision, t->scale);
		return -1;
	}
	*digits = d;
	*nd = n;
	return 0;
}

/* A 256-bit two's-complement integer in four 64-bit limbs, least
 * significant first: wide enough for 76 digits (below 2^253). */
struct i256 {
	uint64_t w[4];
};

static void i256_muladd(struct i256 *x, unsigned mul, unsigned add)
{
	u128 carry = add;

	for (int i = 0; i < 4; i++) {
		u128 p = (u128)x->w[i] * mul + carry;
		x->w[i] = (uint64_t)p;
		carry = p >> 64;
	}
}

static void i256_negate(struct i256 *x)
{
	unsigned carry = 1;

	for (int i = 0; i < 4; i++) {
		x->w[i] = ~x->w[i] + carry;
		carry = carry && x->w[i] == 0;
	}
}

/* Divides x (not negative) by 10; returns the remainder. */
static unsigned i256_div10(struct i256 *x)
{
	u128 rem = 0;

	for (int i = 4; i-- > 0;) {
		u128 cur = rem << 64 | x->w[i];
		x->w[i] = (uint64_t)(cur / 10);
		rem = cur % 10;
	}
	return (unsigned)rem;
}

static bool i256_zero(const struct i256 *x)
{
	return !(x->w[0] | x->w[1] | x->w[2] | x->w[3]);
}

/* The unscaled value as Decimal32/64/128/256: a little-endian
 * two's-complement integer of ch_decimal_width() bytes. */
static int put_decimal_int(struct sl_buf *b, const struct ch_type *t, const char *d, size_t nd,
			   size_t pad, bool neg)
{
	unsigned char p[32];
	size_t width = ch_decimal_width(t->precision);
	struct i256 m = { { 0, 0, 0, 0 } };

	for (size_t i = 0; i < nd; i++)
		i256_muladd(&m, 10, (unsigned)(d[i] - '0'));
	for (size_t i = 0; i < pad; i++)
		i256_muladd(&m, 10, 0);
	if (neg)
		i256_negate(&m);
	for (size_t i = 0; i < width; i++)
		p[i] = (unsigned char)(m.w[i / 8] >> (8 * (i % 8)));
	return ch_rb_put_raw(b, p, width);
}

/* A decimal too wide for ClickHouse, as its text with exactly the column's
 * scale: "-123.4500", "0.05", "7" (scale 0).  Zero has no sign.  The unscaled
 * value's digits are d[0..nd) followed by pad zeros. */
static int put_decimal_text(struct sl_buf *b, const struct ch_type *t, const char *d, size_t nd,
			    size_t pad, bool neg)
{
	size_t total = nd + pad, scale = (size_t)t->scale, len, o = 0;
	bool minus = neg && !(nd == 1 && d[0] == '0');
	char *s;

	if (scale == 0)
		len = total;
	else if (total > scale)
		len = total + 1;
	else
		len = 2 + scale;  /* "0." and the scale's digits */
	len += minus ? 1 : 0;
	if (ch_rb_put_uleb(b, len) < 0 || sl_buf_reserve(b, len) < 0)
		return -1;
	s = b->data + b->len;
	if (minus)
		s[o++] = '-';
	if (scale > 0 && total <= scale) {
		s[o++] = '0';
		s[o++] = '.';
		for (size_t i = total; i < scale; i++)
			s[o++] = '0';
	}
	for (size_t i = 0; i < total; i++) {
		if (scale > 0 && total > scale && i == total - scale)
			s[o++] = '.';
		s[o++] = i < nd ? d[i] : '0';
	}
	b->len += o;
	b->data[b->len] = '\0';
	return o == len ? 0 : -1;
}

int ch_rb_put_value(struct sl_buf *b, const struct ch_type *t, const struct sl_value *v,
		    const char *name, char *err, size_t errlen)
{
	size_t start = b->len;
	int rc, clamped = 0;

	if (v->kind == SL_V_NULL || v->kind == SL_V_UNCHANGED) {
		if (!t->nullable) {
			snprintf(err, errlen, "column \"%s\": a %s value in a column that cannot be null "
				 "(a key column of a merge-mode table)", name, sl_value_kind_name(v->kind));
			return -1;
		}
		return ch_rb_put_u8(b, 1) < 0 ? -1 : 0;
	}
	if (sl_value_check_kind(t->sl, v, name, err, errlen) < 0)
		return -1;
	if (t->nullable && ch_rb_put_u8(b, 0) < 0)
		goto oom;
	switch (t->sl) {
	case SL_T_STRING:
	case SL_T_JSON:
	case SL_T_BYTES:
		rc = ch_rb_put_str(b, v->p, v->len);
		break;
	case SL_T_BOOL:
		rc = ch_rb_put_u8(b, v->b ? 1 : 0);
		break;
	case SL_T_DATE:
		if (t->ch == CH_DATE32 && (v->i < CH_DATE32_MIN || v->i > CH_DATE32_MAX)) {
			rc = ch_rb_put_u32(b, (uint32_t)(int32_t)(v->i < CH_DATE32_MIN ? CH_DATE32_MIN
										: CH_DATE32_MAX));
			clamped = 1;
			break;
		}
		/* fall through */
	case SL_T_INT32:
		if (v->i < INT32_MIN || v->i > INT32_MAX) {
			snprintf(err, errlen, "column \"%s\": %s value %" PRId64 " is out of range for %s",
				 name, sl_value_kind_name(v->kind), v->i, sl_type_name(t->sl));
			goto fail;
		}
		rc = ch_rb_put_u32(b, (uint32_t)(int32_t)v->i);
		break;
	case SL_T_INT64:
	case SL_T_TIME:
	case SL_T_TIMESTAMP:
	case SL_T_TIMESTAMPTZ:
		rc = ch_rb_put_i64(b, v->i);
		break;
	case SL_T_UINT64:
		rc = ch_rb_put_u64(b, v->u);
		break;
	case SL_T_FLOAT: {
		uint32_t u;
		memcpy(&u, &v->f, sizeof u);
		rc = ch_rb_put_u32(b, u);
		break;
	}
	case SL_T_DOUBLE: {
		uint64_t u;
		memcpy(&u, &v->d, sizeof u);
		rc = ch_rb_put_u64(b, u);
		break;
	}
	case SL_T_DECIMAL: {
		const char *d;
		size_t nd, pad;
		if (decimal_digits(t, v, name, &d, &nd, &pad, err, errlen) < 0)
			goto fail;
		rc = t->ch == CH_DECIMAL ? put_decimal_int(b, t, d, nd, pad, v->neg)
					 : put_decimal_text(b, t, d, nd, pad, v->neg);
		break;
	}
	case SL_T_UUID: {
		char s[37];
		if (v->len != 16) {
			snprintf(err, errlen, "column \"%s\": a uuid value of %" PRIu32 " bytes, not 16",
				 name, v->len);
			goto fail;
		}
		if (t->ch == CH_UUID) {
			rc = ch_rb_put_uuid(b, (const unsigned char *)v->p);
			break;
		}
		s[0] = 36;
		ch_uuid_text(s + 1, (const unsigned char *)v->p);
		rc = ch_rb_put_raw(b, s, sizeof s);
		break;
	}
	default:
		snprintf(err, errlen, "column \"%s\": unknown output type %d", name, (int)t->sl);
		goto fail;
	}
	if (rc < 0)
		goto oom;
	return clamped;
oom:
	snprintf(err, errlen, "column \"%s\": out of memory or over the buffer cap encoding a value", name);
fail:
	if (!sl_buf_failed(b)) {
		b->len = start;
		if (b->data)
			b->data[start] = '\0';
	}
	return -1;
}

/* ------------------------------------------------------------------ */
/* decoding                                                             */

static int need(const struct ch_rb_reader *r, size_t n)
{
	return (size_t)(r->end - r->p) >= n ? 0 : -1;
}

int ch_rb_get_u8(struct ch_rb_reader *r, unsigned *v)
{
	if (need(r, 1) < 0)
		return -1;
	*v = *r->p++;
	return 0;
}

static uint64_t le(const unsigned char *p, size_t n)
{
	uint64_t v = 0;

	for (size_t i = n; i-- > 0;)
		v = v << 8 | p[i];
	return v;
}

int ch_rb_get_u64(struct ch_rb_reader *r, uint64_t *v)
{
	if (need(r, 8) < 0)
		return -1;
	*v = le(r->p, 8);
	r->p += 8;
	return 0;
}

int ch_rb_get_uleb(struct ch_rb_reader *r, uint64_t *v)
{
	uint64_t x = 0;

	for (int shift = 0; shift < 64; shift += 7) {
		unsigned c;
		if (ch_rb_get_u8(r, &c) < 0)
			return -1;
		x |= (uint64_t)(c & 0x7f) << shift;
		if (!(c & 0x80)) {
			*v = x;
			return 0;
		}
	}
	return -1;
}

int ch_rb_get_uuid(struct ch_rb_reader *r, unsigned char u[static 16])
{
	if (need(r, 16) < 0)
		return -1;
	for (int i = 0; i < 8; i++) {
		u[i] = r->p[7 - i];
		u[8 + i] = r->p[15 - i];
	}
	r->p += 16;
	return 0;
}

int ch_rb_get_str(struct ch_rb_reader *r, const unsigned char **p, size_t *n)
{
	uint64_t len;

	if (ch_rb_get_uleb(r, &len) < 0 || len > (uint64_t)(r->end - r->p))
		return -1;
	*p = r->p;
	*n = (size_t)len;
	r->p += len;
	return 0;
}

static int hexval(unsigned char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* The 16 bytes of a uuid's canonical text. */
static int parse_uuid(const unsigned char *s, size_t n, unsigned char out[16])
{
	size_t o = 0;

	if (n != 36)
		return -1;
	for (size_t i = 0; i < 36;) {
		int hi, lo;
		if (i == 8 || i == 13 || i == 18 || i == 23) {
			if (s[i++] != '-')
				return -1;
			continue;
		}
		if ((hi = hexval(s[i])) < 0 || (lo = hexval(s[i + 1])) < 0)
			return -1;
		out[o++] = (unsigned char)(hi << 4 | lo);
		i += 2;
	}
	return 0;
}

/* Decimal text ("-123.4500") back to digits: exactly the column's scale. */
static int parse_decimal_text(const unsigned char *s, size_t n, int scale, struct sl_value *v, char *scratch)
{
	size_t i = 0, o = 0, frac = 0;
	bool point = false;

	v->neg = false;
	if (i < n && s[i] == '-') {
		v->neg = true;
		i++;
	}
	if (i >= n)
		return -1;
	for (; i < n; i++) {
		if (s[i] == '.' && !point && o > 0) {
			point = true;
			continue;
		}
		if (s[i] < '0' || s[i] > '9' || o >= SL_DECIMAL_MAX_DIGITS + 1)
			return -1;
		if (point)
			frac++;
		if (o == 0 || scratch[0] != '0')
			scratch[o++] = (char)s[i];
		else
			scratch[0] = (char)s[i];  /* drop a leading zero */
	}
	if (o == 0 || frac != (size_t)scale || (point && frac == 0))
		return -1;
	v->kind = SL_V_DECIMAL;
	v->scale = (int16_t)scale;
	v->p = scratch;
	v->len = (uint32_t)o;
	if (o == 1 && scratch[0] == '0')
		v->neg = false;
	return 0;
}

/* A Decimal32/64/128/256 integer back to digits. */
static int get_decimal_int(struct ch_rb_reader *r, const struct ch_type *t, struct sl_value *v, char *scratch)
{
	size_t width = ch_decimal_width(t->precision);
	char tmp[80];
	size_t n = 0;
	struct i256 m;
	bool neg;

	if (need(r, width) < 0)
		return -1;
	neg = (r->p[width - 1] & 0x80) != 0;
	for (size_t i = 0; i < 32; i++) {   /* sign-extended to 256 bits */
		uint64_t byte = i < width ? r->p[i] : neg ? 0xff : 0;
		if (i % 8 == 0)
			m.w[i / 8] = 0;
		m.w[i / 8] |= byte << (8 * (i % 8));
	}
	r->p += width;
	v->neg = neg;
	if (neg)
		i256_negate(&m);
	do {
		tmp[n++] = (char)('0' + i256_div10(&m));
	} while (!i256_zero(&m) && n < sizeof tmp);
	for (size_t i = 0; i < n; i++)
		scratch[i] = tmp[n - 1 - i];
	v->kind = SL_V_DECIMAL;
	v->scale = (int16_t)t->scale;
	v->p = scratch;
	v->len = (uint32_t)n;
	if (n == 1 && scratch[0] == '0')
		v->neg = false;
	return 0;
}

int ch_rb_get_value(struct ch_rb_reader *r, const struct ch_type *t, struct sl_value *v,
		    char scratch[static CH_RB_SCRATCH])
{
	const unsigned char *p;
	size_t n;
	uint64_t u;

	memset(v, 0, sizeof *v);
	if (t->nullable) {
		unsigned isnull;
		if (ch_rb_get_u8(r, &isnull) < 0 || isnull > 1)
			return -1;
		if (isnull) {
			v->kind = SL_V_NULL;
			return 0;
		}
	}
	switch (t->sl) {
	case SL_T_STRING:
	case SL_T_JSON:
	case SL_T_BYTES:
		if (ch_rb_get_str(r, &p, &n) < 0 || n > UINT32_MAX)
			return -1;
		v->kind = t->sl == SL_T_STRING ? SL_V_STRING : t->sl == SL_T_JSON ? SL_V_JSON : SL_V_BYTES;
		v->p = (const char *)p;
		v->len = (uint32_t)n;
		return 0;
	case SL_T_UUID:
		if (t->ch == CH_UUID) {
			if (ch_rb_get_uuid(r, (unsigned char *)scratch) < 0)
				return -1;
		} else if (ch_rb_get_str(r, &p, &n) < 0 || parse_uuid(p, n, (unsigned char *)scratch) < 0) {
			return -1;
		}
		v->kind = SL_V_UUID;
		v->p = scratch;
		v->len = 16;
		return 0;
	case SL_T_BOOL: {
		unsigned b;
		if (ch_rb_get_u8(r, &b) < 0 || b > 1)
			return -1;
		v->kind = SL_V_BOOL;
		v->b = b == 1;
		return 0;
	}
	case SL_T_INT32:
	case SL_T_DATE:
		if (need(r, 4) < 0)
			return -1;
		v->kind = t->sl == SL_T_DATE ? SL_V_DATE : SL_V_INT;
		v->i = (int32_t)(uint32_t)le(r->p, 4);
		r->p += 4;
		return 0;
	case SL_T_INT64:
	case SL_T_TIME:
	case SL_T_TIMESTAMP:
	case SL_T_TIMESTAMPTZ:
		if (ch_rb_get_u64(r, &u) < 0)
			return -1;
		v->kind = t->sl == SL_T_INT64 ? SL_V_INT : t->sl == SL_T_TIME ? SL_V_TIME : SL_V_TIMESTAMP;
		v->i = (int64_t)u;
		return 0;
	case SL_T_UINT64:
		if (ch_rb_get_u64(r, &u) < 0)
			return -1;
		v->kind = SL_V_UINT;
		v->u = u;
		return 0;
	case SL_T_FLOAT: {
		uint32_t b32;
		if (need(r, 4) < 0)
			return -1;
		b32 = (uint32_t)le(r->p, 4);
		r->p += 4;
		v->kind = SL_V_FLOAT;
		memcpy(&v->f, &b32, sizeof b32);
		return 0;
	}
	case SL_T_DOUBLE:
		if (ch_rb_get_u64(r, &u) < 0)
			return -1;
		v->kind = SL_V_DOUBLE;
		memcpy(&v->d, &u, sizeof u);
		return 0;
	case SL_T_DECIMAL:
		if (t->ch == CH_DECIMAL)
			return get_decimal_int(r, t, v, scratch);
		if (ch_rb_get_str(r, &p, &n) < 0)
			return -1;
		return parse_decimal_text(p, n, t->scale, v, scratch);
	}
	return -1;
}

int ch_rb_skip(struct ch_rb_reader *r, const struct ch_type *t)
{
	const unsigned char *p;
	size_t n, width;
	uint64_t count;

	if (t->nullable) {
		unsigned isnull;
		if (ch_rb_get_u8(r, &isnull) < 0 || isnull > 1)
			return -1;
		if (isnull)
			return 0;
	}
	switch (t->ch) {
	case CH_UINT8: case CH_BOOL: width = 1; break;
	case CH_INT32: case CH_FLOAT32: case CH_DATE32: width = 4; break;
	case CH_INT64: case CH_UINT64: case CH_FLOAT64: case CH_DATETIME64: case CH_DATETIME64_UTC: width = 8; break;
	case CH_UUID: width = 16; break;
	case CH_DECIMAL: width = ch_decimal_width(t->precision); break;
	case CH_STRING:
		return ch_rb_get_str(r, &p, &n);
	case CH_ARRAY_STRING:
		if (ch_rb_get_uleb(r, &count) < 0)
			return -1;
		for (uint64_t i = 0; i < count; i++)
			if (ch_rb_get_str(r, &p, &n) < 0)
				return -1;
		return 0;
	default:
		return -1;
	}
	if (need(r, width) < 0)
		return -1;
	r->p += width;
	return 0;
}
