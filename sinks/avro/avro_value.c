/*
 * sinks/avro/avro_value.c: typed values to Avro binary.
 *
 * Values arrive typed (schema/schema.h); this only checks that a value's kind
 * fits its column's type and encodes it.  Decimals arrive as decimal digits
 * and become the unscaled value's big-endian two's complement here, exactly
 * (never through floating point).
 */
#include "sinks/avro/avro_value.h"

#include <inttypes.h>
#include <stdio.h>

int sl_avro_put_float(struct sl_buf *b, float f)
{
	uint32_t u;
	unsigned char p[4];

	memcpy(&u, &f, sizeof u);
	for (int i = 0; i < 4; i++)
		p[i] = (unsigned char)(u >> (8 * i));
	return sl_avro_put_raw(b, p, sizeof p);
}

int sl_avro_put_double(struct sl_buf *b, double d)
{
	uint64_t u;
	unsigned char p[8];

	memcpy(&u, &d, sizeof u);
	for (int i = 0; i < 8; i++)
		p[i] = (unsigned char)(u >> (8 * i));
	return sl_avro_put_raw(b, p, sizeof p);
}

/* Minimal big-endian two's complement of a magnitude (big-endian, n bytes,
 * may have leading zeros) with a sign.  out must hold n + 1 bytes. */
static size_t twos_complement(const unsigned char *mag, size_t n, bool neg, unsigned char *out)
{
	size_t len, k;
	unsigned carry;

	while (n > 0 && mag[0] == 0) {
		mag++;
		n--;
	}
	if (n == 0) {
		out[0] = 0;
		return 1;
	}
	out[0] = 0;
	memcpy(out + 1, mag, n);
	len = n + 1;
	if (neg) {
		carry = 1;
		for (k = len; k-- > 0;) {
			unsigned v = (unsigned)(unsigned char)~out[k] + carry;
			out[k] = (unsigned char)v;
			carry = v >> 8;
		}
	}
	/* Drop sign-extension bytes the next byte already implies. */
	k = 0;
	while (len - k > 1 && ((out[k] == 0xff && (out[k + 1] & 0x80)) ||
			       (out[k] == 0x00 && !(out[k + 1] & 0x80))))
		k++;
	if (k)
		memmove(out, out + k, len - k);
	return len - k;
}

/* limbs (little-endian 32-bit words, *nl of them) = limbs * mul + add. */
static void mul_add(uint32_t *l, size_t *nl, uint32_t mul, uint32_t add)
{
	uint64_t carry = add;

	for (size_t k = 0; k < *nl; k++) {
		uint64_t v = (uint64_t)l[k] * mul + carry;
		l[k] = (uint32_t)v;
		carry = v >> 32;
	}
	if (carry)
		l[(*nl)++] = (uint32_t)carry;
}

/* Adds one decimal digit, folding nine at a time into the limbs. */
static void feed_digit(uint32_t *l, size_t *nl, uint64_t *chunk, uint64_t *chunk_mul, int dg)
{
	*chunk = *chunk * 10 + (uint64_t)dg;
	*chunk_mul *= 10;
	if (*chunk_mul == UINT64_C(1000000000)) {
		mul_add(l, nl, (uint32_t)*chunk_mul, (uint32_t)*chunk);
		*chunk = 0;
		*chunk_mul = 1;
	}
}

int sl_avro_decimal_bytes(const char *digits, size_t ndigits, size_t pad, bool neg,
			  unsigned char out[static SL_AVRO_DECIMAL_MAX_BYTES], size_t *outlen)
{
	/* Magnitude as little-endian 32-bit limbs: 1000 digits need 104. */
	uint32_t limb[108];
	size_t nlimb = 0;
	uint64_t chunk = 0, chunk_mul = 1;

	if (ndigits == 0)
		return -1;
	while (ndigits > 1 && digits[0] == '0') {
		digits++;
		ndigits--;
	}
	if (ndigits == 1 && digits[0] == '0')
		pad = 0;  /* zero at any scale */
	if (ndigits + pad > SL_DECIMAL_MAX_DIGITS)
		return -1;

	if (ndigits + pad <= 18) {
		/* Fast path: the unscaled value fits in 63 bits. */
		uint64_t v = 0;
		int64_t x;
		unsigned char be[8];
		size_t k = 0;
		for (size_t i = 0; i < ndigits; i++) {
			unsigned dg = (unsigned)(unsigned char)digits[i] - '0';
			if (dg > 9)
				return -1;
			v = v * 10 + dg;
		}
		for (size_t i = 0; i < pad; i++)
			v *= 10;
		x = neg ? -(int64_t)v : (int64_t)v;
		for (int i = 0; i < 8; i++)
			be[i] = (unsigned char)((uint64_t)x >> (56 - 8 * i));
		/* Drop sign-extension bytes the next byte already implies. */
		while (k < 7 && ((be[k] == 0x00 && !(be[k + 1] & 0x80)) ||
				 (be[k] == 0xff && (be[k + 1] & 0x80))))
			k++;
		memcpy(out, be + k, 8 - k);
		*outlen = 8 - k;
		return 0;
	}

	/* Small bignum: magnitude = magnitude * 10^k + chunk, 9 digits at a time. */
	for (size_t i = 0; i < ndigits; i++) {
		unsigned dg = (unsigned)(unsigned char)digits[i] - '0';
		if (dg > 9)
			return -1;
		feed_digit(limb, &nlimb, &chunk, &chunk_mul, (int)dg);
	}
	for (size_t i = 0; i < pad; i++)
		feed_digit(limb, &nlimb, &chunk, &chunk_mul, 0);
	if (chunk_mul > 1)
		mul_add(limb, &nlimb, (uint32_t)chunk_mul, (uint32_t)chunk);
	{
		unsigned char mag[sizeof limb];
		size_t nb = nlimb * 4, z = 0;

		for (size_t k = 0; k < nlimb; k++) {
			uint32_t w = limb[nlimb - 1 - k];
			mag[4 * k] = (unsigned char)(w >> 24);
			mag[4 * k + 1] = (unsigned char)(w >> 16);
			mag[4 * k + 2] = (unsigned char)(w >> 8);
			mag[4 * k + 3] = (unsigned char)w;
		}
		while (z < nb && mag[z] == 0)
			z++;
		if (nb - z + 1 > SL_AVRO_DECIMAL_MAX_BYTES)
			return -1;  /* cannot happen for <= 1000 digits */
		*outlen = twos_complement(mag + z, nb - z, neg, out);
	}
	return 0;
}

/* "00" to "ff": the two lowercase hex digits of every byte value. */
static const char hexpairs[513] =
	"000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f"
	"202122232425262728292a2b2c2d2e2f303132333435363738393a3b3c3d3e3f"
	"404142434445464748494a4b4c4d4e4f505152535455565758595a5b5c5d5e5f"
	"606162636465666768696a6b6c6d6e6f707172737475767778797a7b7c7d7e7f"
	"808182838485868788898a8b8c8d8e8f909192939495969798999a9b9c9d9e9f"
	"a0a1a2a3a4a5a6a7a8a9aaabacadaeafb0b1b2b3b4b5b6b7b8b9babbbcbdbebf"
	"c0c1c2c3c4c5c6c7c8c9cacbcccdcecfd0d1d2d3d4d5d6d7d8d9dadbdcdddedf"
	"e0e1e2e3e4e5e6e7e8e9eaebecedeeeff0f1f2f3f4f5f6f7f8f9fafbfcfdfeff";

void sl_avro_uuid_text(char out[static 36], const unsigned char u[static 16])
{
	char *d = out;

	/* A table lookup per byte, unrolled: every record has a uuid. */
#define PAIR(i) (memcpy(d, hexpairs + 2 * u[i], 2), d += 2)
	PAIR(0); PAIR(1); PAIR(2); PAIR(3);
	*d++ = '-';
	PAIR(4); PAIR(5);
	*d++ = '-';
	PAIR(6); PAIR(7);
	*d++ = '-';
	PAIR(8); PAIR(9);
	*d++ = '-';
	PAIR(10); PAIR(11); PAIR(12); PAIR(13); PAIR(14); PAIR(15);
#undef PAIR
}

/* Branch 1 of the union, then the uuid as an Avro string of 36 characters. */
static int put_branch_uuid(struct sl_buf *b, const unsigned char *u)
{
	char s[38];

	s[0] = 2;       /* branch 1, zigzag */
	s[1] = 36 * 2;  /* zigzag length 36 */
	sl_avro_uuid_text(s + 2, u);
	return sl_avro_put_raw(b, s, sizeof s);
}

/* Branch 1 of the union, then a long: one append. */
static inline int put_branch_long(struct sl_buf *b, int64_t v)
{
	uint64_t z = ((uint64_t)v << 1) ^ (0 - ((uint64_t)v >> 63));
	unsigned char p[11];
	size_t n = 1;

	p[0] = 2;
	while (z > 0x7f) {
		p[n++] = (unsigned char)(z | 0x80);
		z >>= 7;
	}
	p[n++] = (unsigned char)z;
	return sl_avro_put_raw(b, p, n);
}

/* Branch 1 of the union, then bytes or a string. */
static inline int put_branch_bytes(struct sl_buf *b, const void *p, size_t n)
{
	/* the branch, then the length as a long */
	if (put_branch_long(b, (int64_t)n) < 0)
		return -1;
	return sl_avro_put_raw(b, p, n);
}

int sl_avro_decimal_of(const struct sl_value *v, const char *name, int precision, int scale,
		       unsigned char out[static SL_AVRO_DECIMAL_MAX_BYTES], size_t *outlen, char *err, size_t errlen)
{
	size_t nd = v->len, pad;
	const char *d = v->p;

	if (v->scale < 0 || v->scale > scale) {
		snprintf(err, errlen, "column \"%s\": a decimal value of scale %d does not fit decimal(%d,%d)", name,
			 v->scale, precision, scale);
		return -1;
	}
	pad = (size_t)(scale - v->scale);
	while (nd > 1 && d[0] == '0') {
		d++;
		nd--;
	}
	if (nd + pad > (size_t)precision && !(nd == 1 && d[0] == '0')) {
		snprintf(err, errlen, "column \"%s\": a decimal value of %zu digits does not fit decimal(%d,%d)", name,
			 nd + pad, precision, scale);
		return -1;
	}
	if (sl_avro_decimal_bytes(d, nd, pad, v->neg, out, outlen) < 0) {
		snprintf(err, errlen, "column \"%s\": invalid decimal digits \"%.*s\"%s", name,
			 (int)(nd > 64 ? 64 : nd), d, nd > 64 ? "..." : "");
		return -1;
	}
	return 0;
}

int sl_avro_put_value(struct sl_buf *b, const struct sl_column *col, const struct sl_value *v,
		      char *err, size_t errlen)
{
	size_t start = b->len;
	int rc;

	if (v->kind == SL_V_NULL || v->kind == SL_V_UNCHANGED) {
		if (sl_avro_put_byte(b, 0) < 0)
			goto oom;
		return 0;
	}
	if (sl_value_check_kind(col->type, v, col->name, err, errlen) < 0)
		return -1;
	switch (col->type) {
	case SL_T_STRING:
	case SL_T_JSON:
	case SL_T_BYTES:
		rc = put_branch_bytes(b, v->p, v->len);
		break;
	case SL_T_BOOL: {
		unsigned char p[2] = { 2, v->b ? 1 : 0 };
		rc = sl_avro_put_raw(b, p, 2);
		break;
	}
	case SL_T_INT32:
	case SL_T_DATE:  /* both an Avro int */
		if (v->i < INT32_MIN || v->i > INT32_MAX)
			goto range;
		rc = put_branch_long(b, v->i);
		break;
	case SL_T_INT64:
	case SL_T_TIME:
	case SL_T_TIMESTAMP:
	case SL_T_TIMESTAMPTZ:
		rc = put_branch_long(b, v->i);
		break;
	case SL_T_FLOAT:
		rc = sl_avro_put_byte(b, 2) < 0 ? -1 : sl_avro_put_float(b, v->f);
		break;
	case SL_T_DOUBLE:
		rc = sl_avro_put_byte(b, 2) < 0 ? -1 : sl_avro_put_double(b, v->d);
		break;
	case SL_T_DECIMAL: {
		unsigned char dec[SL_AVRO_DECIMAL_MAX_BYTES];
		size_t n;
		if (sl_avro_decimal_of(v, col->name, col->precision, col->scale, dec, &n, err, errlen) < 0)
			return -1;
		rc = put_branch_bytes(b, dec, n);
		break;
	}
	case SL_T_UINT64: {
		/* decimal(20,0): the value big-endian, with a leading zero byte
		 * when its top bit is set (two's complement, minimal length). */
		unsigned char be[9];
		size_t k = 0;
		be[0] = 0;
		for (int i = 0; i < 8; i++)
			be[1 + i] = (unsigned char)(v->u >> (56 - 8 * i));
		while (k < 8 && be[k] == 0x00 && !(be[k + 1] & 0x80))
			k++;
		rc = put_branch_bytes(b, be + k, 9 - k);
		break;
	}
	case SL_T_UUID:
		if (v->len != 16) {
			snprintf(err, errlen, "column \"%s\": a uuid value of %" PRIu32 " bytes, not 16",
				 col->name, v->len);
			return -1;
		}
		rc = put_branch_uuid(b, (const unsigned char *)v->p);
		break;
	default:
		snprintf(err, errlen, "column \"%s\": unknown output type %d", col->name, (int)col->type);
		return -1;
	}
	if (rc < 0)
		goto oom;
	return 0;

range:
	snprintf(err, errlen, "column \"%s\": %s value %" PRId64 " is out of range for %s", col->name,
		 sl_value_kind_name(v->kind), v->i, sl_type_name(col->type));
	return -1;
oom:
	snprintf(err, errlen, "column \"%s\": out of memory or over the buffer cap encoding a value",
		 col->name);
	if (!sl_buf_failed(b)) {
		b->len = start;
		if (b->data)
			b->data[start] = '\0';
	}
	return -1;
}
