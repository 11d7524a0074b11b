/*
 * sources/mysql/mysql_json.c: MySQL binary JSON to JSON text (the format is
 * in mysql_json.h).  Every offset and length is checked against the bytes
 * of its container before it is followed, and nesting is bounded, so a
 * malformed document is an error, never an over-read or a deep recursion.
 */
#include "sources/mysql/mysql_json.h"

#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sources/mysql/binlog_event.h"
#include "sources/mysql/row_image.h"

enum {
	JB_SMALL_OBJECT = 0x00, JB_LARGE_OBJECT, JB_SMALL_ARRAY, JB_LARGE_ARRAY, JB_LITERAL,
	JB_INT16, JB_UINT16, JB_INT32, JB_UINT32, JB_INT64, JB_UINT64, JB_DOUBLE, JB_STRING,
	JB_OPAQUE = 0x0f,
};

struct jctx {
	struct sl_buf *out;
	char *err;
	size_t errlen;
};

static int jfail(struct jctx *j, const char *what)
{
	snprintf(j->err, j->errlen, "malformed binary JSON: %s", what);
	return -1;
}

static uint64_t le(const unsigned char *p, size_t n)
{
	uint64_t v = 0;

	for (size_t i = 0; i < n; i++)
		v |= (uint64_t)p[i] << (8 * i);
	return v;
}

/* The variable-length length of strings and opaque values: 7 bits a byte,
 * at most 5 bytes (32 bits).  Returns the bytes it took, 0 if malformed. */
static size_t varlen(const unsigned char *p, size_t avail, uint32_t *out)
{
	uint64_t v = 0;

	for (size_t i = 0; i < 5 && i < avail; i++) {
		v |= (uint64_t)(p[i] & 0x7f) << (7 * i);
		if (!(p[i] & 0x80)) {
			if (v > UINT32_MAX)
				return 0;
			*out = (uint32_t)v;
			return i + 1;
		}
	}
	return 0;
}

static void put_string(struct sl_buf *out, const unsigned char *s, size_t n)
{
	static const char hex[] = "0123456789abcdef";
	size_t run = 0;

	sl_buf_putc(out, '"');
	for (size_t i = 0; i < n; i++) {
		unsigned char c = s[i];
		const char *esc = NULL;
		char u[7];
		if (c >= 0x20 && c != '"' && c != '\\')
			continue;
		sl_buf_append(out, s + run, i - run);
		run = i + 1;
		switch (c) {
		case '"': esc = "\\\""; break;
		case '\\': esc = "\\\\"; break;
		case '\b': esc = "\\b"; break;
		case '\f': esc = "\\f"; break;
		case '\n': esc = "\\n"; break;
		case '\r': esc = "\\r"; break;
		case '\t': esc = "\\t"; break;
		default:
			u[0] = '\\'; u[1] = 'u'; u[2] = '0'; u[3] = '0';
			u[4] = hex[c >> 4]; u[5] = hex[c & 15]; u[6] = '\0';
			esc = u;
		}
		sl_buf_puts(out, esc);
	}
	sl_buf_append(out, s + run, n - run);
	sl_buf_putc(out, '"');
}

int sl_mysql_json_double(double d, struct sl_buf *out)
{
	char sci[40], digits[24], res[48];
	int prec, exp10, nd = 0, decpt, n = 0;
	bool neg;
	const char *e, *q;

	if (!isfinite(d))
		return -1;
	if (d == 0) {
		/* MySQL prints zero (and negative zero) as 0.0 and -0.0 */
		sl_buf_puts(out, signbit(d) ? "-0.0" : "0.0");
		return sl_buf_failed(out) ? -1 : 0;
	}
	/* The shortest digits that read back as the same double. */
	for (prec = 1; prec <= 17; prec++) {
		snprintf(sci, sizeof sci, "%.*e", prec - 1, d);
		if (strtod(sci, NULL) == d)
			break;
	}
	neg = sci[0] == '-';
	e = strchr(sci, 'e');
	exp10 = (int)strtol(e + 1, NULL, 10);  /* the C library's own output */
	for (q = sci + (neg ? 1 : 0); q < e; q++)
		if (*q >= '0' && *q <= '9')
			digits[nd++] = *q;
	while (nd > 1 && digits[nd - 1] == '0')
		nd--;
	digits[nd] = '\0';
	decpt = exp10 + 1;  /* d = 0.digits * 10^decpt */
	if (neg)
		res[n++] = '-';
	if (decpt >= -14 && (decpt <= 15 || nd > decpt)) {
		/* fixed notation, with ".0" on integral values */
		if (decpt <= 0) {
			res[n++] = '0';
			res[n++] = '.';
			for (int i = 0; i < -decpt; i++)
				res[n++] = '0';
			memcpy(res + n, digits, (size_t)nd);
			n += nd;
		} else if (decpt >= nd) {
			memcpy(res + n, digits, (size_t)nd);
			n += nd;
			for (int i = nd; i < decpt; i++)
				res[n++] = '0';
			res[n++] = '.';
			res[n++] = '0';
		} else {
			memcpy(res + n, digits, (size_t)decpt);
			n += decpt;
			res[n++] = '.';
			memcpy(res + n, digits + decpt, (size_t)(nd - decpt));
			n += nd - decpt;
		}
		res[n] = '\0';
	} else {
		res[n++] = digits[0];
		if (nd > 1) {
			res[n++] = '.';
			memcpy(res + n, digits + 1, (size_t)(nd - 1));
			n += nd - 1;
		}
		snprintf(res + n, sizeof res - (size_t)n, "e%d", exp10);
	}
	sl_buf_puts(out, res);
	return sl_buf_failed(out) ? -1 : 0;
}

static void put_base64(struct sl_buf *out, const unsigned char *p, size_t n)
{
	static const char tab[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

	for (size_t i = 0; i < n; i += 3) {
		uint32_t v = (uint32_t)p[i] << 16;
		size_t k = n - i;
		char q[4];
		if (k > 1)
			v |= (uint32_t)p[i + 1] << 8;
		if (k > 2)
			v |= p[i + 2];
		q[0] = tab[v >> 18 & 63];
		q[1] = tab[v >> 12 & 63];
		q[2] = k > 1 ? tab[v >> 6 & 63] : '=';
		q[3] = k > 2 ? tab[v & 63] : '=';
		sl_buf_append(out, q, 4);
	}
}

/* An opaque value: a MySQL type, then its data. */
static int put_opaque(struct jctx *j, uint8_t type, const unsigned char *p, size_t n)
{
	switch (type) {
	case SL_MYSQL_NEWDECIMAL: {
		char digits[72];
		size_t nd;
		bool neg;
		int prec, scale;
		if (n < 2)
			return jfail(j, "truncated decimal");
		prec = p[0];
		scale = p[1];
		if (prec < 1 || prec > 65 || scale > 38 || scale > prec ||
		    sl_mysql_decimal_bin(p + 2, n - 2, prec, scale, digits, &nd, &neg) < 0)
			return jfail(j, "bad decimal");
		if (neg)
			sl_buf_putc(j->out, '-');
		if ((int)nd <= scale) {
			sl_buf_putc(j->out, '0');
			if (scale > 0) {
				sl_buf_putc(j->out, '.');
				for (int i = (int)nd; i < scale; i++)
					sl_buf_putc(j->out, '0');
				sl_buf_append(j->out, digits, nd);
			}
		} else {
			sl_buf_append(j->out, digits, nd - (size_t)scale);
			if (scale > 0) {
				sl_buf_putc(j->out, '.');
				sl_buf_append(j->out, digits + nd - (size_t)scale, (size_t)scale);
			}
		}
		return 0;
	}
	case SL_MYSQL_DATE: case SL_MYSQL_DATETIME: case SL_MYSQL_TIMESTAMP: case SL_MYSQL_TIME: {
		int64_t v;
		uint64_t a, hms;
		unsigned frac;
		char t[64];
		if (n < 8)
			return jfail(j, "truncated temporal value");
		v = (int64_t)le(p, 8);
		a = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
		frac = (unsigned)(a & 0xffffff);
		hms = (a >> 24) & 0x1ffff;
		if (frac > 999999)
			return jfail(j, "bad fraction of a second");
		if (type == SL_MYSQL_TIME) {
			unsigned h = (unsigned)((a >> 24) >> 12) & 0x3ff, m = (unsigned)(hms >> 6) & 63, s = hms & 63;
			snprintf(t, sizeof t, "\"%s%02u:%02u:%02u.%06u\"", v < 0 ? "-" : "", h, m, s, frac);
		} else {
			uint64_t ymd = (a >> 24) >> 17, ym = ymd >> 5;
			unsigned day = ymd & 31, mon = (unsigned)(ym % 13), yr = (unsigned)(ym / 13);
			unsigned h = (unsigned)(hms >> 12), m = (unsigned)(hms >> 6) & 63, s = hms & 63;
			if (v < 0 || yr > 9999)
				return jfail(j, "bad date");
			if (type == SL_MYSQL_DATE)
				snprintf(t, sizeof t, "\"%04u-%02u-%02u\"", yr, mon, day);
			else
				snprintf(t, sizeof t, "\"%04u-%02u-%02u %02u:%02u:%02u.%06u\"", yr, mon, day, h, m, s, frac);
		}
		sl_buf_puts(j->out, t);
		return 0;
	}
	default:
		sl_buf_printf(j->out, "\"base64:type%u:", type);
		put_base64(j->out, p, n);
		sl_buf_putc(j->out, '"');
		return 0;
	}
}

static int put_value(struct jctx *j, uint8_t type, const unsigned char *p, size_t avail, int depth);

/* An object or array at p (avail bytes from its count field). */
static int put_container(struct jctx *j, bool object, bool large, const unsigned char *p, size_t avail, int depth)
{
	size_t osz = large ? 4 : 2, key_entry = osz + 2, val_entry = 1 + osz, count, size, header;

	if (depth > SL_MYSQL_JSON_MAX_DEPTH)
		return jfail(j, "nested too deep");
	if (avail < 2 * osz)
		return jfail(j, "truncated container header");
	count = (size_t)le(p, osz);
	size = (size_t)le(p + osz, osz);
	if (size > avail || size < 2 * osz)
		return jfail(j, "container size beyond its bytes");
	/* Checked in steps so the products cannot overflow. */
	if (count > size / val_entry)
		return jfail(j, "too many elements for the container's size");
	header = 2 * osz + count * val_entry + (object ? count * key_entry : 0);
	if (header > size)
		return jfail(j, "element entries beyond the container");
	sl_buf_putc(j->out, object ? '{' : '[');
	for (size_t i = 0; i < count; i++) {
		const unsigned char *ve = p + 2 * osz + (object ? count * key_entry : 0) + i * val_entry;
		uint8_t t = ve[0];
		bool inl;
		if (i > 0)
			sl_buf_puts(j->out, ", ");
		if (object) {
			const unsigned char *ke = p + 2 * osz + i * key_entry;
			size_t ko = (size_t)le(ke, osz), kl = (size_t)le(ke + osz, 2);
			if (ko < header || ko > size || kl > size - ko)
				return jfail(j, "key beyond the object");
			put_string(j->out, p + ko, kl);
			sl_buf_puts(j->out, ": ");
		}
		inl = t == JB_LITERAL || t == JB_INT16 || t == JB_UINT16 ||
		      (large && (t == JB_INT32 || t == JB_UINT32));
		if (inl) {
			if (put_value(j, t, ve + 1, osz, depth + 1) < 0)
				return -1;
		} else {
			size_t vo = (size_t)le(ve + 1, osz);
			if (vo < header || vo >= size)
				return jfail(j, "value beyond its container");
			if (put_value(j, t, p + vo, size - vo, depth + 1) < 0)
				return -1;
		}
	}
	sl_buf_putc(j->out, object ? '}' : ']');
	return 0;
}

static int put_value(struct jctx *j, uint8_t type, const unsigned char *p, size_t avail, int depth)
{
	static const size_t width[] = { [JB_INT16] = 2, [JB_UINT16] = 2, [JB_INT32] = 4, [JB_UINT32] = 4,
					[JB_INT64] = 8, [JB_UINT64] = 8, [JB_DOUBLE] = 8 };

	switch (type) {
	case JB_SMALL_OBJECT: return put_container(j, true, false, p, avail, depth);
	case JB_LARGE_OBJECT: return put_container(j, true, true, p, avail, depth);
	case JB_SMALL_ARRAY: return put_container(j, false, false, p, avail, depth);
	case JB_LARGE_ARRAY: return put_container(j, false, true, p, avail, depth);
	case JB_LITERAL:
		if (avail < 1 || p[0] > 2)
			return jfail(j, "bad literal");
		sl_buf_puts(j->out, p[0] == 0 ? "null" : p[0] == 1 ? "true" : "false");
		return 0;
	case JB_INT16: case JB_UINT16: case JB_INT32: case JB_UINT32: case JB_INT64: case JB_UINT64: {
		uint64_t v;
		if (avail < width[type])
			return jfail(j, "truncated number");
		v = le(p, width[type]);
		if (type == JB_INT16)
			sl_buf_printf(j->out, "%d", (int)(int16_t)v);
		else if (type == JB_INT32)
			sl_buf_printf(j->out, "%" PRId32, (int32_t)v);
		else if (type == JB_INT64)
			sl_buf_printf(j->out, "%" PRId64, (int64_t)v);
		else
			sl_buf_printf(j->out, "%" PRIu64, v);
		return 0;
	}
	case JB_DOUBLE: {
		double d;
		uint64_t bits;
		if (avail < 8)
			return jfail(j, "truncated double");
		bits = le(p, 8);
		memcpy(&d, &bits, 8);
		if (!isfinite(d))
			return jfail(j, "a double that is not a number");
		return sl_mysql_json_double(d, j->out) < 0 && !sl_buf_failed(j->out) ? jfail(j, "bad double") : 0;
	}
	case JB_STRING: {
		uint32_t n;
		size_t k = varlen(p, avail, &n);
		if (k == 0 || n > avail - k)
			return jfail(j, "string beyond its container");
		put_string(j->out, p + k, n);
		return 0;
	}
	case JB_OPAQUE: {
		uint32_t n;
		size_t k;
		if (avail < 1)
			return jfail(j, "truncated opaque value");
		k = varlen(p + 1, avail - 1, &n);
		if (k == 0 || n > avail - 1 - k)
			return jfail(j, "opaque value beyond its container");
		return put_opaque(j, p[0], p + 1 + k, n);
	}
	default:
		return jfail(j, "unknown value type");
	}
}

int sl_mysql_json_text(const unsigned char *p, size_t len, struct sl_buf *out, char *err, size_t errlen)
{
	struct jctx j = { out, err, errlen };

	if (len == 0) {
		sl_buf_puts(out, "null");
	} else if (put_value(&j, p[0], p + 1, len - 1, 0) < 0) {
		return -1;
	}
	if (sl_buf_failed(out)) {
		snprintf(err, errlen, "out of memory converting %zu bytes of binary JSON", len);
		return -1;
	}
	return 0;
}
