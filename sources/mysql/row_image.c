/*
 * sources/mysql/row_image.c: row images to typed values (the formats and
 * the rules are in row_image.h and doc/types-mysql.md).
 *
 * Each value is read through a bounds-checked reader; a value that would
 * run past the event is a malformed event (-1), a value that is well formed
 * but does not fit its output column is SL_MYSQL_EVALUE.  Text converted to
 * UTF-8, decimal digits, JSON text and padded binary strings go to the
 * image's scratch buffer; while an image is decoded they are recorded as
 * offsets, and turned into pointers once the image is complete (the buffer
 * may move while it grows).
 */
#include "sources/mysql/row_image.h"

#include <arpa/inet.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/util.h"
#include "sources/mysql/mysql_json.h"

#define US_PER_SEC INT64_C(1000000)
#define US_PER_DAY (INT64_C(86400) * US_PER_SEC)

static const uint32_t pow10_9[10] = { 1, 10, 100, 1000, 10000, 100000, 1000000, 10000000, 100000000,
				      1000000000 };
/* Bytes of a partial group of 0-9 decimal digits. */
static const uint8_t dig2bytes[10] = { 0, 1, 1, 2, 2, 3, 3, 4, 4, 4 };

/* ---- type map ---- */

enum sl_type sl_mysql_type_map(const struct sl_mysql_column *c, int *precision, int *scale)
{
	switch (c->real_type) {
	case SL_MYSQL_TINY: case SL_MYSQL_SHORT: case SL_MYSQL_INT24: case SL_MYSQL_YEAR:
		return SL_T_INT32;
	case SL_MYSQL_LONG:
		return c->is_unsigned == 0 ? SL_T_INT32 : SL_T_INT64;
	case SL_MYSQL_LONGLONG:
		return c->is_unsigned == 1 ? SL_T_UINT64 : SL_T_INT64;
	case SL_MYSQL_NEWDECIMAL:
		*precision = c->precision;
		*scale = c->scale;
		return SL_T_DECIMAL;
	case SL_MYSQL_FLOAT: return SL_T_FLOAT;
	case SL_MYSQL_DOUBLE: return SL_T_DOUBLE;
	case SL_MYSQL_DATE: case SL_MYSQL_NEWDATE: return SL_T_DATE;
	case SL_MYSQL_TIME: case SL_MYSQL_TIME2: return SL_T_TIME;
	case SL_MYSQL_DATETIME: case SL_MYSQL_DATETIME2: return SL_T_TIMESTAMP;
	case SL_MYSQL_TIMESTAMP: case SL_MYSQL_TIMESTAMP2: return SL_T_TIMESTAMPTZ;
	case SL_MYSQL_STRING: case SL_MYSQL_VARCHAR: case SL_MYSQL_VAR_STRING: case SL_MYSQL_BLOB:
		if (c->fbt && c->real_type == SL_MYSQL_STRING)
			return c->fbt == SL_MYSQL_FBT_UUID ? SL_T_UUID : SL_T_STRING;
		if (c->charset && (c->charset->kind == SL_CS_BINARY || c->charset->kind == SL_CS_UNSUPPORTED))
			return SL_T_BYTES;
		return c->json ? SL_T_JSON : SL_T_STRING;
	case SL_MYSQL_JSON: return SL_T_JSON;
	case SL_MYSQL_ENUM:
		return c->nvalues ? SL_T_STRING : SL_T_INT32;
	case SL_MYSQL_SET:
		if (c->nvalues)
			return SL_T_STRING;
		return c->pack_len == 8 ? SL_T_UINT64 : SL_T_INT64;
	case SL_MYSQL_BIT:
		return c->nbits == 1 ? SL_T_BOOL : SL_T_BYTES;
	case SL_MYSQL_GEOMETRY: case SL_MYSQL_VECTOR:
		return SL_T_BYTES;
	default:
		return SL_T_STRING;
	}
}

const char *sl_mysql_type_name(const struct sl_mysql_column *c, char *buf, size_t len)
{
	const char *u = c->is_unsigned == 1 ? " unsigned" : "";
	bool text = !(c->charset && c->charset->kind == SL_CS_BINARY);

	switch (c->real_type) {
	case SL_MYSQL_TINY: snprintf(buf, len, "tinyint%s", u); break;
	case SL_MYSQL_SHORT: snprintf(buf, len, "smallint%s", u); break;
	case SL_MYSQL_INT24: snprintf(buf, len, "mediumint%s", u); break;
	case SL_MYSQL_LONG: snprintf(buf, len, "int%s", u); break;
	case SL_MYSQL_LONGLONG: snprintf(buf, len, "bigint%s", u); break;
	case SL_MYSQL_YEAR: snprintf(buf, len, "year"); break;
	case SL_MYSQL_NEWDECIMAL: snprintf(buf, len, "decimal(%u,%u)%s", c->precision, c->scale, u); break;
	case SL_MYSQL_DECIMAL: snprintf(buf, len, "decimal (pre-5.0)"); break;
	case SL_MYSQL_FLOAT: snprintf(buf, len, "float%s", u); break;
	case SL_MYSQL_DOUBLE: snprintf(buf, len, "double%s", u); break;
	case SL_MYSQL_DATE: case SL_MYSQL_NEWDATE: snprintf(buf, len, "date"); break;
	case SL_MYSQL_TIME: snprintf(buf, len, "time"); break;
	case SL_MYSQL_DATETIME: snprintf(buf, len, "datetime"); break;
	case SL_MYSQL_TIMESTAMP: snprintf(buf, len, "timestamp"); break;
	case SL_MYSQL_TIME2: snprintf(buf, len, c->fsp ? "time(%u)" : "time", c->fsp); break;
	case SL_MYSQL_DATETIME2: snprintf(buf, len, c->fsp ? "datetime(%u)" : "datetime", c->fsp); break;
	case SL_MYSQL_TIMESTAMP2: snprintf(buf, len, c->fsp ? "timestamp(%u)" : "timestamp", c->fsp); break;
	case SL_MYSQL_STRING:
		if (c->fbt)
			snprintf(buf, len, "%s", c->fbt == SL_MYSQL_FBT_UUID ? "uuid" : c->fbt == SL_MYSQL_FBT_INET4 ? "inet4"
				 : "inet6");
		else
			snprintf(buf, len, "%s(%u)", text ? "char" : "binary", c->max_len);
		break;
	case SL_MYSQL_VARCHAR: case SL_MYSQL_VAR_STRING:
		snprintf(buf, len, "%s(%u)", text ? "varchar" : "varbinary", c->max_len);
		break;
	case SL_MYSQL_BLOB: {
		static const char *const sz[] = { "tiny", "", "medium", "long" };
		snprintf(buf, len, "%s%s", c->json ? "json" : c->pack_len >= 1 && c->pack_len <= 4 ? sz[c->pack_len - 1] : "",
			 c->json ? "" : text ? "text" : "blob");
		break;
	}
	case SL_MYSQL_JSON: snprintf(buf, len, "json"); break;
	case SL_MYSQL_ENUM: snprintf(buf, len, "enum"); break;
	case SL_MYSQL_SET: snprintf(buf, len, "set"); break;
	case SL_MYSQL_BIT: snprintf(buf, len, "bit(%u)", c->nbits); break;
	case SL_MYSQL_GEOMETRY: snprintf(buf, len, "geometry"); break;
	case SL_MYSQL_VECTOR: snprintf(buf, len, "vector"); break;
	case SL_MYSQL_NULL: snprintf(buf, len, "null"); break;
	default: snprintf(buf, len, "type %u", c->real_type); break;
	}
	return buf;
}

/* ---- numbers and dates ---- */

size_t sl_mysql_decimal_size(int p, int s)
{
	int intg = p - s;

	return (size_t)(intg / 9) * 4 + dig2bytes[intg % 9] + (size_t)(s / 9) * 4 + dig2bytes[s % 9];
}

static uint32_t be_n(const unsigned char *p, size_t n)
{
	uint32_t v = 0;

	for (size_t i = 0; i < n; i++)
		v = v << 8 | p[i];
	return v;
}

/* Appends v as exactly n digits (v < 10^n). */
static void put_digits(char *out, size_t *len, uint32_t v, int n)
{
	for (int i = n - 1; i >= 0; i--) {
		out[*len + (size_t)i] = (char)('0' + v % 10);
		v /= 10;
	}
	*len += (size_t)n;
}

int sl_mysql_decimal_bin(const unsigned char *bin, size_t avail, int p, int s, char *digits, size_t *ndigits,
			 bool *neg)
{
	unsigned char b[64];
	size_t size, pos = 0, n = 0, lead = 0;
	int intg, intg0, intg0x, frac0, frac0x;
	unsigned char mask;
	char tmp[112];

	if (p < 1 || p > 65 || s < 0 || s > 38 || s > p)
		return -1;
	size = sl_mysql_decimal_size(p, s);
	if (avail < size || size > sizeof b)
		return -1;
	memcpy(b, bin, size);
	/* Positive numbers have the top bit set; negative ones are the
	 * one's complement of the positive form. */
	mask = (b[0] & 0x80) ? 0x00 : 0xff;
	b[0] ^= 0x80;
	for (size_t i = 0; i < size; i++)
		b[i] ^= mask;
	intg = p - s;
	intg0 = intg / 9;
	intg0x = intg % 9;
	frac0 = s / 9;
	frac0x = s % 9;
	if (intg0x) {
		uint32_t v = be_n(b + pos, dig2bytes[intg0x]);
		if (v >= pow10_9[intg0x])
			return -1;
		put_digits(tmp, &n, v, intg0x);
		pos += dig2bytes[intg0x];
	}
	for (int i = 0; i < intg0 + frac0; i++) {
		uint32_t v = be_n(b + pos, 4);
		if (v > 999999999)
			return -1;
		put_digits(tmp, &n, v, 9);
		pos += 4;
	}
	if (frac0x) {
		uint32_t v = be_n(b + pos, dig2bytes[frac0x]);
		if (v >= pow10_9[frac0x])
			return -1;
		put_digits(tmp, &n, v, frac0x);
	}
	while (lead < n && tmp[lead] == '0')
		lead++;
	if (lead == n) {
		digits[0] = '0';
		*ndigits = 1;
		*neg = false;
		return 0;
	}
	memcpy(digits, tmp + lead, n - lead);
	*ndigits = n - lead;
	*neg = mask != 0;
	return 0;
}

static int days_in_month(int64_t y, int m)
{
	static const int dm[12] = { 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31 };
	bool leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;

	return m == 2 && leap ? 29 : dm[m - 1];
}

/* ---- the decoder ---- */

void sl_mysql_rowdec_init(struct sl_mysql_rowdec *d)
{
	memset(d, 0, sizeof *d);
	sl_buf_init(&d->scratch[0], 0);
	sl_buf_init(&d->scratch[1], 0);
	sl_mysql_conv_init(&d->conv);
}

void sl_mysql_rowdec_free(struct sl_mysql_rowdec *d)
{
	sl_buf_free(&d->scratch[0]);
	sl_buf_free(&d->scratch[1]);
	sl_mysql_conv_free(&d->conv);
	free(d->fix);
	memset(d, 0, sizeof *d);
}

/* What one value's decoding needs. */
struct vctx {
	struct sl_mysql_rowdec *d;
	const struct sl_binlog_table_map *tm;
	const struct sl_mysql_column *mc;
	const struct sl_column *col;
	struct sl_buf *s;
	struct sl_value *out;
	uint32_t i;
	char *err;
	size_t errlen;
};

static int verr(struct vctx *v, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The column's name for messages: the output column's, else the table map's. */
static const char *col_name(const struct vctx *v)
{
	if (v->col->name)
		return v->col->name;
	return v->mc->name.p ? v->mc->name.p : "?";
}

/* A value error: names the table and the column. */
static int verr(struct vctx *v, const char *fmt, ...)
{
	char what[256], tn[48];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(what, sizeof what, fmt, ap);
	va_end(ap);
	snprintf(v->err, v->errlen, "table \"%s\".\"%s\" column \"%s\" (%s): %s", v->tm->db, v->tm->table,
		 col_name(v), sl_mysql_type_name(v->mc, tn, sizeof tn), what);
	return SL_MYSQL_EVALUE;
}

static int mismatch(struct vctx *v)
{
	return verr(v, "cannot be written as %s", sl_type_name(v->col->type));
}

/* A malformed image: the event lacks bytes the column needs. */
static int truncated(struct vctx *v)
{
	char tn[48];

	snprintf(v->err, v->errlen, "malformed rows event for table \"%s\".\"%s\": the image ends inside column \"%s\" (%s)",
		 v->tm->db, v->tm->table, col_name(v), sl_mysql_type_name(v->mc, tn, sizeof tn));
	return -1;
}

/* Sets the value to bytes that will sit at offset off of the scratch. */
static void set_scratch(struct vctx *v, uint8_t kind, size_t off, size_t len)
{
	*v->out = (struct sl_value){ .kind = kind, .len = (uint32_t)len, .p = (const char *)(uintptr_t)off };
	v->d->fix[v->i] = 1;
}

static void set_direct(struct vctx *v, uint8_t kind, const void *p, size_t len)
{
	*v->out = (struct sl_value){ .kind = kind, .len = (uint32_t)len, .p = (const char *)p };
}

static int oom(struct vctx *v)
{
	snprintf(v->err, v->errlen, "table \"%s\".\"%s\" column \"%s\": out of memory or over the buffer cap",
		 v->tm->db, v->tm->table, col_name(v));
	return -1;
}

/* An integer, signed or not, to the column's output type. */
static int put_int(struct vctx *v, bool is_unsigned, int64_t sv, uint64_t uv)
{
	switch (v->col->type) {
	case SL_T_INT32:
		if (is_unsigned ? uv > INT32_MAX : (sv < INT32_MIN || sv > INT32_MAX))
			break;
		*v->out = (struct sl_value){ .kind = SL_V_INT, .i = is_unsigned ? (int64_t)uv : sv };
		return 0;
	case SL_T_INT64:
		if (is_unsigned && uv > INT64_MAX)
			break;
		*v->out = (struct sl_value){ .kind = SL_V_INT, .i = is_unsigned ? (int64_t)uv : sv };
		return 0;
	case SL_T_UINT64:
		if (!is_unsigned && sv < 0)
			break;
		*v->out = (struct sl_value){ .kind = SL_V_UINT, .u = is_unsigned ? uv : (uint64_t)sv };
		return 0;
	case SL_T_STRING: {
		size_t off = v->s->len;
		if (is_unsigned)
			sl_buf_printf(v->s, "%" PRIu64, uv);
		else
			sl_buf_printf(v->s, "%" PRId64, sv);
		if (sl_buf_failed(v->s))
			return oom(v);
		set_scratch(v, SL_V_STRING, off, v->s->len - off);
		return 0;
	}
	default:
		return mismatch(v);
	}
	if (is_unsigned)
		return verr(v, "value %" PRIu64 " is out of range for %s", uv, sl_type_name(v->col->type));
	return verr(v, "value %" PRId64 " is out of range for %s", sv, sl_type_name(v->col->type));
}

/* A zero or invalid date: null, counted, warned on the 1st, 2nd, 4th, ... */
static int bad_date(struct vctx *v, bool zero, int64_t y, int m, int d)
{
	uint64_t nth = zero ? ++v->d->stats.zero_dates : ++v->d->stats.invalid_dates;

	if ((nth & (nth - 1)) == 0)
		sl_warn("table \"%s\".\"%s\" column \"%s\": %s date %04" PRId64 "-%02d-%02d written as null "
			"(%" PRIu64 " so far)", v->tm->db, v->tm->table, col_name(v), zero ? "zero" : "invalid",
			y, m, d, nth);
	*v->out = (struct sl_value){ .kind = SL_V_NULL };
	return 0;
}

/* A date y-m-d (the DATE, DATETIME checks): 1 if valid with *days set, 0
 * after writing null for a zero or invalid date. */
static int check_date(struct vctx *v, int64_t y, int m, int d, int64_t *days)
{
	if (y == 0 && m == 0 && d == 0) {
		bad_date(v, true, y, m, d);
		return 0;
	}
	if (m < 1 || m > 12 || d < 1 || d > days_in_month(y, m)) {
		bad_date(v, false, y, m, d);
		return 0;
	}
	*days = sl_days_from_civil(y, m, d);
	return 1;
}

static int put_date(struct vctx *v, int64_t y, int m, int d)
{
	int64_t days;

	if (v->col->type != SL_T_DATE)
		return mismatch(v);
	if (check_date(v, y, m, d, &days))
		*v->out = (struct sl_value){ .kind = SL_V_DATE, .i = days };
	return 0;
}

static int put_datetime(struct vctx *v, int64_t y, int m, int d, int hh, int mi, int ss, uint32_t us)
{
	int64_t days;

	if (v->col->type != SL_T_TIMESTAMP)
		return mismatch(v);
	if (hh > 23 || mi > 59 || ss > 59 || us > 999999)
		return verr(v, "invalid time of day %02d:%02d:%02d.%06" PRIu32, hh, mi, ss, us);
	if (check_date(v, y, m, d, &days))
		*v->out = (struct sl_value){ .kind = SL_V_TIMESTAMP,
					     .i = days * US_PER_DAY + ((int64_t)hh * 3600 + mi * 60 + ss) * US_PER_SEC + us };
	return 0;
}

static int put_time(struct vctx *v, bool negative, int64_t hh, int mi, int ss, uint32_t us)
{
	int64_t t;

	if (v->col->type != SL_T_TIME)
		return mismatch(v);
	if (mi > 59 || ss > 59 || us > 999999)
		return verr(v, "invalid time %s%" PRId64 ":%02d:%02d.%06" PRIu32, negative ? "-" : "", hh, mi, ss, us);
	t = (hh * 3600 + mi * 60 + ss) * US_PER_SEC + us;
	*v->out = (struct sl_value){ .kind = SL_V_TIME, .i = negative ? -t : t };
	return 0;
}

/* The fraction of a temporal2 value: (fsp + 1) / 2 big-endian bytes, in
 * microseconds (signed for TIME2's negative layout is handled by the caller). */
static uint32_t frac_us(const unsigned char *p, int fsp)
{
	switch ((fsp + 1) / 2) {
	case 1: return be_n(p, 1) * 10000;
	case 2: return be_n(p, 2) * 100;
	case 3: return be_n(p, 3);
	default: return 0;
	}
}

/* Appends text in charset cs to the scratch, converted to UTF-8. */
static int append_text(struct vctx *v, const struct sl_mysql_charset *cs, const char *p, size_t n)
{
	bool copied;
	char why[200];

	if (cs && cs->kind == SL_CS_BINARY) {
		/* ENUM(...) CHARACTER SET binary: the member's bytes, as the
		 * backfill writes the value (sl_mysql_binary_member) */
		if (sl_mysql_binary_member(p, n, v->s, &copied) < 0)
			return oom(v);
	} else if (cs && cs->kind == SL_CS_UNSUPPORTED) {
		/* a member's bytes in dec8 or the like (FULL metadata): as
		 * the backfill writes the value (sl_mysql_foreign_member) */
		if (sl_mysql_foreign_member(p, n, false, v->s, &copied) < 0)
			return oom(v);
	} else if (sl_mysql_to_utf8(&v->d->conv, cs, p, n, v->s, &copied, why, sizeof why) < 0) {
		if (sl_buf_failed(v->s))
			return oom(v);
		return verr(v, "%s", why);
	}
	if (!copied && sl_buf_append(v->s, p, n) < 0)
		return oom(v);
	return 0;
}

unsigned sl_mysql_fbt_len(uint8_t fbt)
{
	return fbt == SL_MYSQL_FBT_INET4 ? 4 : fbt ? 16 : 0;
}

int sl_mysql_fbt_value(uint8_t fbt, const unsigned char *mem, struct sl_buf *scratch, struct sl_value *v)
{
	size_t off = scratch->len;
	char text[INET6_ADDRSTRLEN];

	if (fbt == SL_MYSQL_FBT_UUID) {
		if (sl_buf_append(scratch, mem, 16) < 0)
			return -1;
		*v = (struct sl_value){ .kind = SL_V_UUID, .len = 16, .p = (const char *)(uintptr_t)off };
		return 0;
	}
	if (!inet_ntop(fbt == SL_MYSQL_FBT_INET4 ? AF_INET : AF_INET6, mem, text, sizeof text))
		return -1;
	if (sl_buf_puts(scratch, text) < 0)
		return -1;
	*v = (struct sl_value){ .kind = SL_V_STRING, .len = (uint32_t)strlen(text), .p = (const char *)(uintptr_t)off };
	return 0;
}

int sl_mysql_fbt_parse(uint8_t fbt, const char *text, size_t len, unsigned char mem[16])
{
	char t[INET6_ADDRSTRLEN + 1];

	if (fbt == SL_MYSQL_FBT_UUID)
		return sl_uuid_parse(text, len, mem);
	if (len >= sizeof t)
		return -1;
	memcpy(t, text, len);
	t[len] = '\0';
	return inet_pton(fbt == SL_MYSQL_FBT_INET4 ? AF_INET : AF_INET6, t, mem) == 1 ? 0 : -1;
}

/* A MariaDB UUID, INET4 or INET6 from the binlog: its binary form (a UUID
 * in text order, whatever order MariaDB keeps it in the table: the test
 * matrix checks this against the server), less the trailing zero bytes
 * the binlog drops, as of a BINARY(n). */
static int put_fbt(struct vctx *v, const unsigned char *p, size_t n)
{
	unsigned char mem[16] = { 0 };
	size_t want = sl_mysql_fbt_len(v->mc->fbt), off = v->s->len;

	if (n > want || (v->col->type != (v->mc->fbt == SL_MYSQL_FBT_UUID ? SL_T_UUID : SL_T_STRING)))
		return mismatch(v);
	memcpy(mem, p, n);
	if (sl_mysql_fbt_value(v->mc->fbt, mem, v->s, v->out) < 0)
		return sl_buf_failed(v->s) ? oom(v) : verr(v, "not an address");
	set_scratch(v, v->out->kind, off, v->out->len);
	return 0;
}

/* Text or bytes of a string column. */
static int put_text(struct vctx *v, const unsigned char *p, size_t n)
{
	const struct sl_mysql_charset *cs = v->mc->charset;
	size_t off = v->s->len;
	bool copied;
	char why[200];

	switch (v->col->type) {
	case SL_T_BYTES:
		/* BINARY(n) loses its trailing zero bytes in the binlog; a
		 * SELECT returns them, so they are put back. */
		if (v->mc->real_type == SL_MYSQL_STRING && n < v->mc->max_len &&
		    (cs ? cs->kind == SL_CS_BINARY : true)) {
			if (sl_buf_append(v->s, p, n) < 0 || sl_buf_reserve(v->s, v->mc->max_len - n) < 0)
				return oom(v);
			memset(v->s->data + v->s->len, 0, v->mc->max_len - n);
			v->s->len += v->mc->max_len - n;
			v->s->data[v->s->len] = '\0';
			set_scratch(v, SL_V_BYTES, off, v->mc->max_len);
			return 0;
		}
		set_direct(v, SL_V_BYTES, p, n);
		return 0;
	case SL_T_STRING:
	case SL_T_JSON:
		if (cs && (cs->kind == SL_CS_BINARY || cs->kind == SL_CS_UNSUPPORTED))
			return mismatch(v);
		if (sl_mysql_to_utf8(&v->d->conv, cs, (const char *)p, n, v->s, &copied, why, sizeof why) < 0) {
			if (sl_buf_failed(v->s))
				return oom(v);
			return verr(v, "%s", why);
		}
		if (copied)
			set_scratch(v, v->col->type == SL_T_JSON ? SL_V_JSON : SL_V_STRING, off, v->s->len - off);
		else
			set_direct(v, v->col->type == SL_T_JSON ? SL_V_JSON : SL_V_STRING, p, n);
		return 0;
	default:
		return mismatch(v);
	}
}

/* Reads a length of n bytes (little-endian) then that many bytes. */
static int read_counted(struct vctx *v, const unsigned char **p, const unsigned char *end, size_t n,
			const unsigned char **data, size_t *len)
{
	uint64_t l = 0;

	if ((size_t)(end - *p) < n)
		return truncated(v);
	for (size_t i = 0; i < n; i++)
		l |= (uint64_t)(*p)[i] << (8 * i);
	*p += n;
	if (l > (uint64_t)(end - *p))
		return truncated(v);
	*data = *p;
	*len = (size_t)l;
	*p += l;
	return 0;
}

static int need(struct vctx *v, const unsigned char *p, const unsigned char *end, size_t n)
{
	return (size_t)(end - p) < n ? truncated(v) : 0;
}

static uint64_t le_n(const unsigned char *p, size_t n)
{
	uint64_t x = 0;

	for (size_t i = 0; i < n; i++)
		x |= (uint64_t)p[i] << (8 * i);
	return x;
}

static int put_enum(struct vctx *v, uint64_t idx)
{
	const struct sl_mysql_column *mc = v->mc;
	size_t off = v->s->len;

	switch (v->col->type) {
	case SL_T_STRING:
		if (!mc->nvalues)
			return verr(v, "the ENUM's strings are unknown (binlog_row_metadata=FULL gives them)");
		if (idx > mc->nvalues)
			return verr(v, "index %" PRIu64 " past its %" PRIu32 " values", idx, mc->nvalues);
		if (idx == 0) {  /* '' (the value of an invalid ENUM insert) */
			set_direct(v, SL_V_STRING, "", 0);
			return 0;
		}
		{
			int rc = append_text(v, mc->charset, mc->values[idx - 1].p, mc->values[idx - 1].len);
			if (rc < 0)
				return rc;
		}
		set_scratch(v, SL_V_STRING, off, v->s->len - off);
		return 0;
	case SL_T_INT32: case SL_T_INT64: case SL_T_UINT64:
		return put_int(v, true, 0, idx);
	default:
		return mismatch(v);
	}
}

static int put_set(struct vctx *v, uint64_t bits)
{
	const struct sl_mysql_column *mc = v->mc;
	size_t off = v->s->len;
	bool first = true;

	switch (v->col->type) {
	case SL_T_STRING:
		if (!mc->nvalues)
			return verr(v, "the SET's strings are unknown (binlog_row_metadata=FULL gives them)");
		if (mc->nvalues < 64 && (bits >> mc->nvalues) != 0)
			return verr(v, "member bits 0x%" PRIx64 " past its %" PRIu32 " values", bits, mc->nvalues);
		for (uint32_t k = 0; k < mc->nvalues && k < 64; k++) {
			int rc;
			if (!(bits >> k & 1))
				continue;
			if (!first && sl_buf_putc(v->s, ',') < 0)
				return oom(v);
			first = false;
			rc = append_text(v, mc->charset, mc->values[k].p, mc->values[k].len);
			if (rc < 0)
				return rc;
		}
		set_scratch(v, SL_V_STRING, off, v->s->len - off);
		return 0;
	case SL_T_INT64: case SL_T_UINT64: case SL_T_INT32:
		return put_int(v, true, 0, bits);
	default:
		return mismatch(v);
	}
}

/* Decodes the value of column v->i at *p, advancing *p. */
static int decode_int(struct vctx *v, const unsigned char **p, const unsigned char *end)
{
	const struct sl_mysql_column *mc = v->mc;
	const unsigned char *q = *p;
	int rc;
	size_t n = mc->real_type == SL_MYSQL_TINY ? 1 : mc->real_type == SL_MYSQL_SHORT ? 2 :
		   mc->real_type == SL_MYSQL_INT24 ? 3 : mc->real_type == SL_MYSQL_LONG ? 4 : 8;
	uint64_t u;
	int64_t s;
	bool uns = mc->is_unsigned == 1 || (mc->is_unsigned < 0 && v->col->type == SL_T_UINT64);
	if ((rc = need(v, q, end, n)) < 0)
		return rc;
	u = le_n(q, n);
	*p = q + n;
	if (mc->is_unsigned < 0 && v->col->type != SL_T_UINT64)
		return verr(v, "signedness unknown (binlog_row_metadata=MINIMAL or FULL gives it, or the "
			    "catalog)");
	/* sign-extend from n bytes */
	s = n == 8 ? (int64_t)u : (int64_t)(u ^ (UINT64_C(1) << (8 * n - 1))) - (INT64_C(1) << (8 * n - 1));
	return put_int(v, uns, s, u);
}

static int decode_float(struct vctx *v, const unsigned char **p, const unsigned char *end)
{
	const unsigned char *q = *p;
	int rc;
	uint32_t bits;
	float f;
	if ((rc = need(v, q, end, 4)) < 0)
		return rc;
	bits = (uint32_t)le_n(q, 4);
	*p = q + 4;
	memcpy(&f, &bits, 4);
	if (v->col->type == SL_T_FLOAT)
		*v->out = (struct sl_value){ .kind = SL_V_FLOAT, .f = f };
	else if (v->col->type == SL_T_DOUBLE)
		*v->out = (struct sl_value){ .kind = SL_V_DOUBLE, .d = f };
	else
		return mismatch(v);
	return 0;
}

static int decode_double(struct vctx *v, const unsigned char **p, const unsigned char *end)
{
	const unsigned char *q = *p;
	int rc;
	uint64_t bits;
	double dd;
	if ((rc = need(v, q, end, 8)) < 0)
		return rc;
	bits = le_n(q, 8);
	*p = q + 8;
	memcpy(&dd, &bits, 8);
	if (v->col->type != SL_T_DOUBLE)
		return mismatch(v);
	*v->out = (struct sl_value){ .kind = SL_V_DOUBLE, .d = dd };
	return 0;
}

static int decode_decimal(struct vctx *v, const unsigned char **p, const unsigned char *end)
{
	const struct sl_mysql_column *mc = v->mc;
	const unsigned char *q = *p;
	int rc;
	size_t n = sl_mysql_decimal_size(mc->precision, mc->scale), nd, off = v->s->len;
	char digits[72];
	bool neg;
	if ((rc = need(v, q, end, n)) < 0)
		return rc;
	*p = q + n;
	if (sl_mysql_decimal_bin(q, n, mc->precision, mc->scale, digits, &nd, &neg) < 0)
		return verr(v, "bytes that are not a decimal(%u,%u)", mc->precision, mc->scale);
	if (v->col->type == SL_T_DECIMAL) {
		if (sl_buf_append(v->s, digits, nd) < 0)
			return oom(v);
		set_scratch(v, SL_V_DECIMAL, off, nd);
		v->out->neg = neg;
		v->out->scale = mc->scale;
		return 0;
	}
	if (v->col->type != SL_T_STRING)
		return mismatch(v);
	/* the decimal's text, e.g. -0.05 */
	if (neg)
		sl_buf_putc(v->s, '-');
	if (nd <= mc->scale) {
		sl_buf_putc(v->s, '0');
		if (mc->scale) {
			sl_buf_putc(v->s, '.');
			for (size_t k = nd; k < mc->scale; k++)
				sl_buf_putc(v->s, '0');
			sl_buf_append(v->s, digits, nd);
		}
	} else {
		sl_buf_append(v->s, digits, nd - mc->scale);
		if (mc->scale) {
			sl_buf_putc(v->s, '.');
			sl_buf_append(v->s, digits + nd - mc->scale, mc->scale);
		}
	}
	if (sl_buf_failed(v->s))
		return oom(v);
	set_scratch(v, SL_V_STRING, off, v->s->len - off);
	return 0;
}

static int decode_datetime2(struct vctx *v, const unsigned char **p, const unsigned char *end)
{
	const struct sl_mysql_column *mc = v->mc;
	const unsigned char *q = *p;
	int rc;
	size_t n = 5 + (mc->fsp + 1u) / 2;
	int64_t ip;
	uint64_t ymd, hms, ym;
	if ((rc = need(v, q, end, n)) < 0)
		return rc;
	*p = q + n;
	ip = (int64_t)((uint64_t)be_n(q, 1) << 32 | be_n(q + 1, 4)) - INT64_C(0x8000000000);
	if (ip < 0)
		return verr(v, "a negative datetime");
	ymd = (uint64_t)ip >> 17;
	hms = (uint64_t)ip & 0x1ffff;
	ym = ymd >> 5;
	return put_datetime(v, (int64_t)(ym / 13), (int)(ym % 13), (int)(ymd & 31), (int)(hms >> 12),
			    (int)(hms >> 6 & 63), (int)(hms & 63), frac_us(q + 5, mc->fsp));
}

static int decode_timestamp2(struct vctx *v, const unsigned char **p, const unsigned char *end)
{
	const struct sl_mysql_column *mc = v->mc;
	const unsigned char *q = *p;
	int rc;
	size_t n = 4 + (mc->fsp + 1u) / 2;
	uint32_t sec, us;
	if ((rc = need(v, q, end, n)) < 0)
		return rc;
	*p = q + n;
	sec = be_n(q, 4);
	us = frac_us(q + 4, mc->fsp);
	if (v->col->type != SL_T_TIMESTAMPTZ)
		return mismatch(v);
	if (us > 999999)
		return verr(v, "invalid fraction of a second %" PRIu32, us);
	if (sec == 0)
		return bad_date(v, true, 0, 0, 0);
	*v->out = (struct sl_value){ .kind = SL_V_TIMESTAMP, .i = (int64_t)sec * US_PER_SEC + us };
	return 0;
}

static int decode_time2(struct vctx *v, const unsigned char **p, const unsigned char *end)
{
	const struct sl_mysql_column *mc = v->mc;
	const unsigned char *q = *p;
	int rc;
	size_t n = 3 + (mc->fsp + 1u) / 2;
	int64_t packed, ip, frac;
	uint64_t a, hms;
	if ((rc = need(v, q, end, n)) < 0)
		return rc;
	*p = q + n;
	switch (mc->fsp) {
	case 1: case 2: case 3: case 4: {
		bool one = mc->fsp <= 2;
		ip = (int64_t)be_n(q, 3) - 0x800000;
		frac = (int64_t)be_n(q + 3, one ? 1 : 2);
		/* a negative time's fraction counts down from the next second */
		if (ip < 0 && frac) {
			ip++;
			frac -= one ? 0x100 : 0x10000;
		}
		packed = ip * (INT64_C(1) << 24) + frac * (one ? 10000 : 100);
		break;
	}
	case 5: case 6:
		packed = (int64_t)((uint64_t)be_n(q, 2) << 32 | be_n(q + 2, 4)) - INT64_C(0x800000000000);
		break;
	default:
		packed = ((int64_t)be_n(q, 3) - 0x800000) * (INT64_C(1) << 24);
	}
	a = packed < 0 ? (uint64_t)0 - (uint64_t)packed : (uint64_t)packed;
	hms = a >> 24;
	return put_time(v, packed < 0, (int64_t)(hms >> 12 & 0x3ff), (int)(hms >> 6 & 63), (int)(hms & 63),
			(uint32_t)(a & 0xffffff));
}

static int decode_timestamp(struct vctx *v, const unsigned char **p, const unsigned char *end)
{
	const unsigned char *q = *p;
	int rc;
	uint32_t sec;
	if ((rc = need(v, q, end, 4)) < 0)
		return rc;
	sec = (uint32_t)le_n(q, 4);
	*p = q + 4;
	if (v->col->type != SL_T_TIMESTAMPTZ)
		return mismatch(v);
	if (sec == 0)
		return bad_date(v, true, 0, 0, 0);
	*v->out = (struct sl_value){ .kind = SL_V_TIMESTAMP, .i = (int64_t)sec * US_PER_SEC };
	return 0;
}

static int decode_datetime(struct vctx *v, const unsigned char **p, const unsigned char *end)
{
	const unsigned char *q = *p;
	int rc;
	uint64_t x, dpart, tpart;
	if ((rc = need(v, q, end, 8)) < 0)
		return rc;
	x = le_n(q, 8);
	*p = q + 8;
	dpart = x / 1000000;
	tpart = x % 1000000;
	return put_datetime(v, (int64_t)(dpart / 10000), (int)(dpart / 100 % 100), (int)(dpart % 100),
			    (int)(tpart / 10000), (int)(tpart / 100 % 100), (int)(tpart % 100), 0);
}

static int decode_time(struct vctx *v, const unsigned char **p, const unsigned char *end)
{
	const unsigned char *q = *p;
	int rc;
	int64_t x;
	uint64_t a;
	if ((rc = need(v, q, end, 3)) < 0)
		return rc;
	x = (int64_t)(le_n(q, 3) ^ 0x800000) - 0x800000;
	*p = q + 3;
	a = x < 0 ? (uint64_t)-x : (uint64_t)x;
	return put_time(v, x < 0, (int64_t)(a / 10000), (int)(a / 100 % 100), (int)(a % 100), 0);
}

static int decode_json(struct vctx *v, const unsigned char **p, const unsigned char *end)
{
	const struct sl_mysql_column *mc = v->mc;
	const unsigned char *data;
	size_t len;
	int rc;
	size_t off = v->s->len;
	char why[200];
	if ((rc = read_counted(v, p, end, mc->pack_len, &data, &len)) < 0)
		return rc;
	if (v->col->type != SL_T_JSON && v->col->type != SL_T_STRING)
		return mismatch(v);
	if (sl_mysql_json_text(data, len, v->s, why, sizeof why) < 0) {
		if (sl_buf_failed(v->s))
			return oom(v);
		return verr(v, "%s", why);
	}
	set_scratch(v, v->col->type == SL_T_JSON ? SL_V_JSON : SL_V_STRING, off, v->s->len - off);
	return 0;
}

static int decode_bit(struct vctx *v, const unsigned char **p, const unsigned char *end)
{
	const struct sl_mysql_column *mc = v->mc;
	const unsigned char *q = *p;
	int rc;
	size_t n = (mc->nbits + 7u) / 8;
	uint64_t x = 0;
	if ((rc = need(v, q, end, n)) < 0)
		return rc;
	*p = q + n;
	for (size_t k = 0; k < n; k++)
		x = x << 8 | q[k];
	switch (v->col->type) {
	case SL_T_BOOL:
		if (mc->nbits != 1)
			return mismatch(v);
		*v->out = (struct sl_value){ .kind = SL_V_BOOL, .b = x != 0 };
		return 0;
	case SL_T_BYTES:
		set_direct(v, SL_V_BYTES, q, n);
		return 0;
	case SL_T_INT64: case SL_T_UINT64:
		return put_int(v, true, 0, x);
	default:
		return mismatch(v);
	}
}

static int decode_value(struct vctx *v, const unsigned char **p, const unsigned char *end)
{
	const struct sl_mysql_column *mc = v->mc;
	const unsigned char *q = *p, *data;
	size_t len;
	int rc;

	switch (mc->real_type) {
	case SL_MYSQL_TINY: case SL_MYSQL_SHORT: case SL_MYSQL_INT24: case SL_MYSQL_LONG: case SL_MYSQL_LONGLONG:
		return decode_int(v, p, end);
	case SL_MYSQL_YEAR:
		if ((rc = need(v, q, end, 1)) < 0)
			return rc;
		*p = q + 1;
		return put_int(v, false, q[0] ? 1900 + q[0] : 0, 0);
	case SL_MYSQL_FLOAT:
		return decode_float(v, p, end);
	case SL_MYSQL_DOUBLE:
		return decode_double(v, p, end);
	case SL_MYSQL_NEWDECIMAL:
		return decode_decimal(v, p, end);
	case SL_MYSQL_DATE: case SL_MYSQL_NEWDATE: {
		uint32_t x;
		if ((rc = need(v, q, end, 3)) < 0)
			return rc;
		x = (uint32_t)le_n(q, 3);
		*p = q + 3;
		return put_date(v, x >> 9, (int)(x >> 5 & 15), (int)(x & 31));
	}
	case SL_MYSQL_DATETIME2:
		return decode_datetime2(v, p, end);
	case SL_MYSQL_TIMESTAMP2:
		return decode_timestamp2(v, p, end);
	case SL_MYSQL_TIME2:
		return decode_time2(v, p, end);
	case SL_MYSQL_TIMESTAMP:
		return decode_timestamp(v, p, end);
	case SL_MYSQL_DATETIME:
		return decode_datetime(v, p, end);
	case SL_MYSQL_TIME:
		return decode_time(v, p, end);
	case SL_MYSQL_STRING: case SL_MYSQL_VARCHAR: case SL_MYSQL_VAR_STRING:
		if ((rc = read_counted(v, p, end, mc->max_len < 256 ? 1 : 2, &data, &len)) < 0)
			return rc;
		if (mc->fbt && mc->real_type == SL_MYSQL_STRING)
			return put_fbt(v, data, len);
		return put_text(v, data, len);
	case SL_MYSQL_BLOB:
		if ((rc = read_counted(v, p, end, mc->pack_len, &data, &len)) < 0)
			return rc;
		return put_text(v, data, len);
	case SL_MYSQL_JSON:
		return decode_json(v, p, end);
	case SL_MYSQL_GEOMETRY:
		if ((rc = read_counted(v, p, end, mc->pack_len, &data, &len)) < 0)
			return rc;
		if (v->col->type != SL_T_BYTES)
			return mismatch(v);
		if (len < 4)
			return verr(v, "%zu bytes, too short for the 4-byte SRID", len);
		set_direct(v, SL_V_BYTES, data + 4, len - 4);  /* the WKB, without the SRID */
		return 0;
	case SL_MYSQL_VECTOR:
		if ((rc = read_counted(v, p, end, mc->pack_len, &data, &len)) < 0)
			return rc;
		if (v->col->type != SL_T_BYTES)
			return mismatch(v);
		set_direct(v, SL_V_BYTES, data, len);
		return 0;
	case SL_MYSQL_ENUM:
		if ((rc = need(v, q, end, mc->pack_len)) < 0)
			return rc;
		*p = q + mc->pack_len;
		return put_enum(v, le_n(q, mc->pack_len));
	case SL_MYSQL_SET:
		if ((rc = need(v, q, end, mc->pack_len)) < 0)
			return rc;
		*p = q + mc->pack_len;
		return put_set(v, le_n(q, mc->pack_len));
	case SL_MYSQL_BIT:
		return decode_bit(v, p, end);
	case SL_MYSQL_NULL:
		*v->out = (struct sl_value){ .kind = SL_V_NULL };
		return 0;
	default:
		return verr(v, "cannot decode this type (%u)", mc->real_type);
	}
}

static bool bit_set(const unsigned char *bm, uint32_t i)
{
	return bm[i / 8] >> (i % 8) & 1;
}

/* Decodes one image at *p into out, its scratch values in scratch[which]. */
static int value_size(const struct sl_mysql_column *mc, const unsigned char *p, const unsigned char *end, size_t *n);

static int decode_image(struct sl_mysql_rowdec *d, const struct sl_binlog_table_map *tm, const struct sl_column *cols,
			const unsigned char *present, const unsigned char **p, const unsigned char *end,
			struct sl_value *out, int which, char *err, size_t errlen)
{
	struct sl_buf *s = &d->scratch[which];
	uint32_t npresent = 0, k = 0;
	/* the columns the caller has: the map's but its hidden last ones */
	uint32_t nout = tm->ncols - (tm->nhidden < tm->ncols ? tm->nhidden : tm->ncols);
	const unsigned char *nulls;

	sl_buf_reset(s);
	memset(d->fix, 0, tm->ncols);
	for (uint32_t i = 0; i < tm->ncols; i++)
		npresent += bit_set(present, i);
	if ((size_t)(end - *p) < (npresent + 7) / 8) {
		snprintf(err, errlen, "malformed rows event for table \"%s\".\"%s\": an image ends in its null bitmap",
			 tm->db, tm->table);
		return -1;
	}
	nulls = *p;
	*p += (npresent + 7) / 8;
	for (uint32_t i = 0; i < tm->ncols; i++) {
		int rc;
		if (!bit_set(present, i)) {
			if (i < nout)
				out[i] = (struct sl_value){ .kind = SL_V_UNCHANGED };
			continue;
		}
		if (bit_set(nulls, k++)) {
			if (i < nout)
				out[i] = (struct sl_value){ .kind = SL_V_NULL };
			continue;
		}
		if (i >= nout) {
			/* a hidden column: its bytes are stepped over, never
			 * decoded (its signedness may be unknown) */
			size_t n = 0;
			if (value_size(&tm->cols[i], *p, end, &n) < 0) {
				snprintf(err, errlen, "malformed rows event for table \"%s\".\"%s\": hidden column %" PRIu32
					 " runs past the event", tm->db, tm->table, i + 1);
				return -1;
			}
			*p += n;
			continue;
		}
		struct vctx v = { d, tm, &tm->cols[i], &cols[i], s, &out[i], i, err, errlen };
		rc = decode_value(&v, p, end);
		if (rc < 0)
			return rc;
	}
	for (uint32_t i = 0; i < nout; i++)
		if (d->fix[i])
			out[i].p = s->data + (uintptr_t)out[i].p;
	return 0;
}

/* The bytes a value of column mc takes at p, as decode_value reads them
 * (keep the two in step): 0 with *n, or -1 when it runs past end or the
 * type is one decode_value cannot read either. */
static int value_size(const struct sl_mysql_column *mc, const unsigned char *p, const unsigned char *end, size_t *n)
{
	size_t prefix = 0;

	switch (mc->real_type) {
	case SL_MYSQL_TINY: case SL_MYSQL_YEAR: *n = 1; break;
	case SL_MYSQL_SHORT: *n = 2; break;
	case SL_MYSQL_INT24: case SL_MYSQL_DATE: case SL_MYSQL_NEWDATE: case SL_MYSQL_TIME: *n = 3; break;
	case SL_MYSQL_LONG: case SL_MYSQL_FLOAT: case SL_MYSQL_TIMESTAMP: *n = 4; break;
	case SL_MYSQL_LONGLONG: case SL_MYSQL_DOUBLE: case SL_MYSQL_DATETIME: *n = 8; break;
	case SL_MYSQL_NEWDECIMAL: *n = sl_mysql_decimal_size(mc->precision, mc->scale); break;
	case SL_MYSQL_DATETIME2: *n = 5 + (mc->fsp + 1u) / 2; break;
	case SL_MYSQL_TIMESTAMP2: *n = 4 + (mc->fsp + 1u) / 2; break;
	case SL_MYSQL_TIME2: *n = 3 + (mc->fsp + 1u) / 2; break;
	case SL_MYSQL_ENUM: case SL_MYSQL_SET: *n = mc->pack_len; break;
	case SL_MYSQL_BIT: *n = (mc->nbits + 7u) / 8; break;
	case SL_MYSQL_NULL: *n = 0; break;
	case SL_MYSQL_STRING: case SL_MYSQL_VARCHAR: case SL_MYSQL_VAR_STRING:
		prefix = mc->max_len < 256 ? 1 : 2;
		break;
	case SL_MYSQL_BLOB: case SL_MYSQL_JSON: case SL_MYSQL_GEOMETRY: case SL_MYSQL_VECTOR:
		prefix = mc->pack_len;
		break;
	default:
		return -1;
	}
	if (prefix) {
		if ((size_t)(end - p) < prefix)
			return -1;
		*n = prefix + (size_t)le_n(p, prefix);
		if (*n < prefix)
			return -1;
	}
	return (size_t)(end - p) < *n ? -1 : 0;
}

/* Steps over one image at *p, as decode_image reads it. */
static int skip_image(const struct sl_binlog_table_map *tm, const unsigned char *present, const unsigned char **p,
		      const unsigned char *end)
{
	uint32_t npresent = 0, k = 0;
	const unsigned char *nulls = *p;

	for (uint32_t i = 0; i < tm->ncols; i++)
		npresent += bit_set(present, i);
	if ((size_t)(end - *p) < (npresent + 7) / 8)
		return -1;
	*p += (npresent + 7) / 8;
	for (uint32_t i = 0; i < tm->ncols; i++) {
		size_t n = 0;
		if (!bit_set(present, i) || bit_set(nulls, k++))
			continue;
		if (value_size(&tm->cols[i], *p, end, &n) < 0)
			return -1;
		*p += n;
	}
	return 0;
}

int sl_mysql_rows_count(const struct sl_binlog_rows *rows, const struct sl_binlog_table_map *tm, uint64_t *n,
			char *err, size_t errlen)
{
	const unsigned char *p = rows->rows, *start;

	*n = 0;
	if (rows->table_id != tm->table_id || rows->ncols != tm->ncols) {
		snprintf(err, errlen, "rows event for table id %" PRIu64 " with %" PRIu32 " columns does not match the "
			 "table map of \"%s\".\"%s\" (table id %" PRIu64 ", %" PRIu32 " columns)", rows->table_id,
			 rows->ncols, tm->db, tm->table, tm->table_id, tm->ncols);
		return -1;
	}
	while (p < rows->end) {
		start = p;
		if ((rows->op != SL_BL_ROWS_WRITE && skip_image(tm, rows->present, &p, rows->end) < 0) ||
		    (rows->op != SL_BL_ROWS_DELETE &&
		     skip_image(tm, rows->op == SL_BL_ROWS_UPDATE ? rows->present_after : rows->present, &p,
				rows->end) < 0) ||
		    p == start) {
			snprintf(err, errlen, "malformed rows event for table \"%s\".\"%s\": row %" PRIu64 " cannot be "
				 "sized", tm->db, tm->table, *n + 1);
			return -1;
		}
		(*n)++;
	}
	return 0;
}

int sl_mysql_rows_next(struct sl_mysql_rowdec *d, struct sl_binlog_rows *rows, const struct sl_binlog_table_map *tm,
		       const struct sl_column *cols, struct sl_value *before, struct sl_value *after, char *err,
		       size_t errlen)
{
	const unsigned char *p = rows->rows;
	int rc;

	if (p >= rows->end)
		return 0;
	if (rows->table_id != tm->table_id || rows->ncols != tm->ncols) {
		snprintf(err, errlen, "rows event for table id %" PRIu64 " with %" PRIu32 " columns does not match the "
			 "table map of \"%s\".\"%s\" (table id %" PRIu64 ", %" PRIu32 " columns)", rows->table_id,
			 rows->ncols, tm->db, tm->table, tm->table_id, tm->ncols);
		return -1;
	}
	if (d->afix < tm->ncols) {
		uint8_t *f = realloc(d->fix, tm->ncols);
		if (!f) {
			snprintf(err, errlen, "out of memory");
			return -1;
		}
		d->fix = f;
		d->afix = tm->ncols;
	}
	if (rows->op != SL_BL_ROWS_WRITE) {
		rc = decode_image(d, tm, cols, rows->present, &p, rows->end, before, 0, err, errlen);
		if (rc < 0)
			return rc;
	}
	if (rows->op != SL_BL_ROWS_DELETE) {
		rc = decode_image(d, tm, cols, rows->op == SL_BL_ROWS_UPDATE ? rows->present_after : rows->present, &p,
				  rows->end, after, 1, err, errlen);
		if (rc < 0)
			return rc;
	}
	if (p == rows->rows) {
		/* Images without columns take no bytes: the rows could not be
		 * told apart, and no server writes them. */
		snprintf(err, errlen, "malformed rows event for table \"%s\".\"%s\": a row without columns",
			 tm->db, tm->table);
		return -1;
	}
	rows->rows = p;
	return 1;
}
