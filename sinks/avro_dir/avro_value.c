/*
 * sinks/avro_dir/avro_value.c: PostgreSQL text values to Avro binary.
 *
 * The parsers accept exactly what PostgreSQL's output functions produce with
 * DateStyle ISO and bytea_output hex (the settings the sources use), and
 * reject everything else, so that a value never silently changes meaning.
 * Floating point text takes an exact fast path when it can (see
 * fast_decimal_float) and is otherwise parsed with strtof/strtod: sluice
 * never calls setlocale(), so the C locale's '.' is the decimal point.
 * Decimals never go through floating point: their digits are an integer.
 */
#include "sinks/avro_dir/avro_value.h"

#include "common/log.h"

#include <errno.h>
#include <inttypes.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#define US_PER_SEC INT64_C(1000000)
#define US_PER_DAY (INT64_C(86400) * US_PER_SEC)
/* Keeps days * US_PER_DAY well inside int64 (PostgreSQL's own limit is
 * 294276 AD, about 106 million days). */
#define MAX_TS_DAYS INT64_C(106000000)

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

static inline bool is_digit(char c)
{
	return c >= '0' && c <= '9';
}

static bool text_is(const char *p, size_t len, const char *lit)
{
	size_t n = strlen(lit);

	return len == n && memcmp(p, lit, n) == 0;
}

/* Reads exactly n digits at p[*i]; returns 0 or -1. */
static int digits_n(const char *p, size_t len, size_t *i, int n, int *out)
{
	int v = 0;

	if (len - *i < (size_t)n)
		return -1;
	for (int k = 0; k < n; k++) {
		char c = p[*i + (size_t)k];
		if (!is_digit(c))
			return -1;
		v = v * 10 + (c - '0');
	}
	*i += (size_t)n;
	*out = v;
	return 0;
}

/* Days from 1970-01-01 to y-m-d of the proleptic Gregorian calendar, with
 * astronomical years (1 BC is 0).  Howard Hinnant's days_from_civil. */
static int64_t days_from_civil(int64_t y, int m, int d)
{
	int64_t era, yoe, doy, doe;

	y -= m <= 2;
	era = (y >= 0 ? y : y - 399) / 400;
	yoe = y - era * 400;
	doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;
	doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
	return era * 146097 + doe - 719468;
}

static bool is_leap(int64_t y)
{
	return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
}

static int days_in_month(int64_t y, int m)
{
	static const int dm[12] = { 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31 };

	return m == 2 && is_leap(y) ? 29 : dm[m - 1];
}

/* Parses "Y...Y-MM-DD" at p[*i] (year of 1 to 9 digits, as written, before
 * any BC adjustment).  Returns 0 or -1. */
static int parse_ymd(const char *p, size_t len, size_t *i, int64_t *y, int *m, int *d)
{
	int64_t yy = 0;
	int nd = 0;

	while (*i < len && is_digit(p[*i])) {
		if (++nd > 9)
			return -1;
		yy = yy * 10 + (p[*i] - '0');
		(*i)++;
	}
	if (nd == 0 || *i >= len || p[*i] != '-')
		return -1;
	(*i)++;
	if (digits_n(p, len, i, 2, m) < 0 || *i >= len || p[*i] != '-')
		return -1;
	(*i)++;
	if (digits_n(p, len, i, 2, d) < 0)
		return -1;
	*y = yy;
	return 0;
}

/* Turns the written year into the astronomical year and validates the date;
 * returns days since the epoch through *days, 0 or -1. */
static int ymd_days(int64_t y, int m, int d, bool bc, int64_t *days)
{
	if (y == 0)
		return -1;  /* PostgreSQL has no year 0 */
	if (bc)
		y = 1 - y;
	if (m < 1 || m > 12 || d < 1 || d > days_in_month(y, m))
		return -1;
	*days = days_from_civil(y, m, d);
	return 0;
}

/* True if p[*i..] is " BC"; advances past it. */
static bool eat_bc(const char *p, size_t len, size_t *i)
{
	if (len - *i >= 3 && memcmp(p + *i, " BC", 3) == 0) {
		*i += 3;
		return true;
	}
	return false;
}

int sl_avro_parse_date(const char *p, size_t len, int32_t *days)
{
	int64_t y, dd;
	int m, d;
	size_t i = 0;
	bool bc;

	if (text_is(p, len, "infinity")) {
		*days = SL_AVRO_DATE_INFINITY;
		return 0;
	}
	if (text_is(p, len, "-infinity")) {
		*days = SL_AVRO_DATE_NEG_INFINITY;
		return 0;
	}
	if (parse_ymd(p, len, &i, &y, &m, &d) < 0)
		return -1;
	bc = eat_bc(p, len, &i);
	if (i != len || ymd_days(y, m, d, bc, &dd) < 0)
		return -1;
	if (dd < INT32_MIN || dd > INT32_MAX)
		return -1;
	*days = (int32_t)dd;
	return 0;
}

/* Parses "HH:MM:SS[.f{1,6}]" at p[*i]; 24:00:00 is allowed (end of day). */
static int parse_hms(const char *p, size_t len, size_t *i, int64_t *us)
{
	int h, mi, s, nf = 0;
	int64_t frac = 0;

	if (digits_n(p, len, i, 2, &h) < 0 || *i >= len || p[*i] != ':')
		return -1;
	(*i)++;
	if (digits_n(p, len, i, 2, &mi) < 0 || *i >= len || p[*i] != ':')
		return -1;
	(*i)++;
	if (digits_n(p, len, i, 2, &s) < 0)
		return -1;
	if (*i < len && p[*i] == '.') {
		(*i)++;
		while (*i < len && is_digit(p[*i])) {
			if (++nf > 6)
				return -1;
			frac = frac * 10 + (p[*i] - '0');
			(*i)++;
		}
		if (nf == 0)
			return -1;
		for (int k = nf; k < 6; k++)
			frac *= 10;
	}
	if (h > 24 || mi > 59 || s > 59)
		return -1;
	if (h == 24 && (mi || s || frac))
		return -1;
	*us = ((int64_t)h * 3600 + mi * 60 + s) * US_PER_SEC + frac;
	return 0;
}

int sl_avro_parse_time(const char *p, size_t len, int64_t *us)
{
	size_t i = 0;

	if (parse_hms(p, len, &i, us) < 0 || i != len)
		return -1;
	return 0;
}

/* Parses a UTC offset "+HH", "+HH:MM" or "+HH:MM:SS" into seconds east of UTC. */
static int parse_offset(const char *p, size_t len, size_t *i, int64_t *secs)
{
	int sign, h, m = 0, s = 0;

	if (*i >= len || (p[*i] != '+' && p[*i] != '-'))
		return -1;
	sign = p[*i] == '-' ? -1 : 1;
	(*i)++;
	if (digits_n(p, len, i, 2, &h) < 0)
		return -1;
	if (*i < len && p[*i] == ':') {
		(*i)++;
		if (digits_n(p, len, i, 2, &m) < 0)
			return -1;
		if (*i < len && p[*i] == ':') {
			(*i)++;
			if (digits_n(p, len, i, 2, &s) < 0)
				return -1;
		}
	}
	if (m > 59 || s > 59)
		return -1;
	*secs = sign * ((int64_t)h * 3600 + m * 60 + s);
	return 0;
}

int sl_avro_parse_timestamp(const char *p, size_t len, bool with_tz, int64_t *us)
{
	int64_t y, days, tod, off = 0;
	int m, d;
	size_t i = 0;
	bool bc;

	if (text_is(p, len, "infinity")) {
		*us = SL_AVRO_TS_INFINITY;
		return 0;
	}
	if (text_is(p, len, "-infinity")) {
		*us = SL_AVRO_TS_NEG_INFINITY;
		return 0;
	}
	if (parse_ymd(p, len, &i, &y, &m, &d) < 0 || i >= len || p[i] != ' ')
		return -1;
	i++;
	if (parse_hms(p, len, &i, &tod) < 0)
		return -1;
	if (with_tz && parse_offset(p, len, &i, &off) < 0)
		return -1;
	bc = eat_bc(p, len, &i);
	if (i != len || ymd_days(y, m, d, bc, &days) < 0)
		return -1;
	if (days > MAX_TS_DAYS || days < -MAX_TS_DAYS)
		return -1;
	*us = days * US_PER_DAY + tod - off * US_PER_SEC;
	return 0;
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

int sl_avro_parse_decimal(const char *p, size_t len, int precision, int scale,
			  unsigned char out[static SL_AVRO_DECIMAL_MAX_BYTES], size_t *outlen)
{
	size_t i = 0, int_start, int_end, frac_start = 0, frac_end = 0, nint, nfrac;
	bool neg = false;
	/* Magnitude as little-endian 32-bit limbs: 1000 digits need 104. */
	uint32_t limb[108];
	size_t nlimb = 0;
	uint64_t chunk = 0, chunk_mul = 1;
	int ndig_total;

	if (text_is(p, len, "NaN"))
		return 1;
	if (precision < 1 || precision > SL_AVRO_DECIMAL_MAX_DIGITS || scale < 0 || scale > precision)
		return -1;
	if (i < len && (p[i] == '-' || p[i] == '+')) {
		neg = p[i] == '-';
		i++;
	}
	int_start = i;
	while (i < len && is_digit(p[i]))
		i++;
	int_end = i;
	if (i < len && p[i] == '.') {
		i++;
		frac_start = i;
		while (i < len && is_digit(p[i]))
			i++;
		frac_end = i;
	}
	if (i != len || (int_end == int_start && frac_end == frac_start))
		return -1;
	nfrac = frac_end - frac_start;
	if (nfrac > (size_t)scale)
		return -1;
	while (int_start < int_end && p[int_start] == '0')
		int_start++;
	nint = int_end - int_start;
	if (nint + (size_t)scale > (size_t)precision)
		return -1;
	ndig_total = (int)nint + scale;

	if (ndig_total <= 18) {
		/* Fast path: the unscaled value fits in 63 bits. */
		uint64_t v = 0;
		unsigned char mag[8];
		for (size_t k = int_start; k < int_end; k++)
			v = v * 10 + (uint64_t)(p[k] - '0');
		for (size_t k = frac_start; k < frac_end; k++)
			v = v * 10 + (uint64_t)(p[k] - '0');
		for (size_t k = nfrac; k < (size_t)scale; k++)
			v *= 10;
		for (int k = 0; k < 8; k++)
			mag[k] = (unsigned char)(v >> (56 - 8 * k));
		*outlen = twos_complement(mag, 8, neg, out);
		return 0;
	}

	/* Small bignum: magnitude = magnitude * 10^k + chunk, 9 digits at a time. */
	for (size_t k = int_start; k < int_end; k++)
		feed_digit(limb, &nlimb, &chunk, &chunk_mul, p[k] - '0');
	for (size_t k = frac_start; k < frac_end; k++)
		feed_digit(limb, &nlimb, &chunk, &chunk_mul, p[k] - '0');
	for (size_t k = nfrac; k < (size_t)scale; k++)
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

/* Clinger's fast path for "[-]digits[.digits][e[+-]digits]", the forms
 * PostgreSQL's float output takes.  When the digits form an integer M that
 * the format holds exactly (M <= 2^53 for double, 2^24 for float) and the
 * power of ten P (the exponent minus the number of fraction digits) has
 * |P| <= 22 (10 for float), 10^|P| is exact as well (5^22 < 2^53,
 * 5^10 < 2^24), so one IEEE multiplication or division rounds M * 10^P
 * correctly, giving exactly what strtod/strtof give.  That needs arithmetic
 * in the format's own precision (FLT_EVAL_METHOD 0, as on x86-64 and
 * aarch64); elsewhere, and for any other text, it returns -1 and the caller
 * uses strtod/strtof.  Returns 0 with the value in *dout or *fout. */
static int fast_decimal_float(const char *p, size_t len, bool single, double *dout, float *fout)
{
#if defined(FLT_EVAL_METHOD) && FLT_EVAL_METHOD == 0
	static const double p10[] = { 1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11,
				      1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22 };
	static const float p10f[] = { 1e0f, 1e1f, 1e2f, 1e3f, 1e4f, 1e5f, 1e6f, 1e7f, 1e8f, 1e9f, 1e10f };
	size_t i = 0;
	uint64_t m = 0;
	int nd = 0, k = 0, e = 0, pw;
	bool neg = false, dot = false;

	if (len > 0 && p[0] == '-') {
		neg = true;
		i++;
	}
	for (; i < len; i++) {
		char c = p[i];
		if (is_digit(c)) {
			if (++nd > 19)
				return -1;  /* M might not fit in 64 bits */
			m = m * 10 + (uint64_t)(c - '0');
			k += dot;
		} else if (c == '.' && !dot) {
			dot = true;
		} else {
			break;
		}
	}
	if (nd == 0)
		return -1;
	if (i < len) {
		bool eneg = false;
		int ne = 0;
		if (p[i] != 'e' && p[i] != 'E')
			return -1;
		i++;
		if (i < len && (p[i] == '+' || p[i] == '-')) {
			eneg = p[i] == '-';
			i++;
		}
		for (; i < len; i++) {
			if (!is_digit(p[i]) || ++ne > 4)
				return -1;
			e = e * 10 + (p[i] - '0');
		}
		if (ne == 0)
			return -1;
		if (eneg)
			e = -e;
	}
	pw = e - k;
	if (single) {
		float f;
		if (m > (UINT64_C(1) << 24) || pw < -10 || pw > 10)
			return -1;
		f = (float)m;
		f = pw < 0 ? f / p10f[-pw] : f * p10f[pw];
		*fout = neg ? -f : f;
	} else {
		double d;
		if (m > (UINT64_C(1) << 53) || pw < -22 || pw > 22)
			return -1;
		d = (double)m;
		d = pw < 0 ? d / p10[-pw] : d * p10[pw];
		*dout = neg ? -d : d;
	}
	return 0;
#else
	(void)p;
	(void)len;
	(void)single;
	(void)dout;
	(void)fout;
	return -1;
#endif
}

/* Parses an optionally signed decimal integer in [min, max]; 0 or -1.
 * Up to 19 digits cannot overflow 64 bits, so only longer texts (leading
 * zeros) pay for an overflow check per digit. */
static int parse_int(const char *p, size_t len, int64_t min, int64_t max, int64_t *out)
{
	size_t i = 0;
	bool neg = false;
	uint64_t v = 0, lim;

	if (len > 0 && (p[0] == '-' || p[0] == '+')) {
		neg = p[0] == '-';
		i++;
	}
	if (i == len || len - i > 20)
		return -1;
	lim = neg ? (uint64_t)0 - (uint64_t)min : (uint64_t)max;
	if (len - i <= 19) {
		for (; i < len; i++) {
			if (!is_digit(p[i]))
				return -1;
			v = v * 10 + (uint64_t)(p[i] - '0');
		}
		if (v > lim)
			return -1;
	} else {
		for (; i < len; i++) {
			if (!is_digit(p[i]))
				return -1;
			if (v > (lim - (uint64_t)(p[i] - '0')) / 10)
				return -1;
			v = v * 10 + (uint64_t)(p[i] - '0');
		}
	}
	*out = neg ? (int64_t)(0 - v) : (int64_t)v;
	return 0;
}

/* strtod/strtof need a NUL-terminated copy; 64 characters is plenty for any
 * float text PostgreSQL writes. */
static int copy_float_text(const char *p, size_t len, char *tmp, size_t tmplen)
{
	if (len == 0 || len >= tmplen)
		return -1;
	if (!(is_digit(p[0]) || p[0] == '-' || p[0] == '+' || p[0] == '.' || p[0] == 'N' ||
	      p[0] == 'I' || p[0] == 'n' || p[0] == 'i'))
		return -1;  /* strtod would skip leading white space */
	memcpy(tmp, p, len);
	tmp[len] = '\0';
	return 0;
}

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* "\x0a0b" -> Avro bytes, decoded straight into b. */
static int put_bytea_hex(struct sl_buf *b, const char *p, size_t len)
{
	size_t n;
	unsigned char *dst;

	if (len < 2 || p[0] != '\\' || p[1] != 'x' || (len - 2) % 2)
		return -1;
	n = (len - 2) / 2;
	if (sl_avro_put_long(b, (int64_t)n) < 0 || sl_buf_reserve(b, n) < 0)
		return -1;
	dst = (unsigned char *)b->data + b->len;
	for (size_t k = 0; k < n; k++) {
		int hi = hexval(p[2 + 2 * k]), lo = hexval(p[3 + 2 * k]);
		if (hi < 0 || lo < 0)
			return -1;
		dst[k] = (unsigned char)(hi << 4 | lo);
	}
	b->len += n;
	b->data[b->len] = '\0';
	return 0;
}

static const char *type_label(enum sl_type t)
{
	switch (t) {
	case SL_T_STRING: return "string";
	case SL_T_BOOL: return "boolean";
	case SL_T_INT32: return "integer";
	case SL_T_INT64: return "bigint";
	case SL_T_FLOAT: return "real";
	case SL_T_DOUBLE: return "double precision";
	case SL_T_DECIMAL: return "numeric";
	case SL_T_BYTES: return "bytea";
	case SL_T_DATE: return "date";
	case SL_T_TIME: return "time";
	case SL_T_TIMESTAMP: return "timestamp";
	case SL_T_TIMESTAMPTZ: return "timestamptz";
	case SL_T_UUID: return "uuid";
	case SL_T_JSON: return "json";
	}
	return "unknown";
}

int sl_avro_put_value(struct sl_buf *b, const struct sl_column *col, const struct sl_value *v,
		      struct sl_avro_stats *st, char *err, size_t errlen)
{
	size_t start = b->len;
	const char *p = v->p;
	size_t len = v->len;
	int rc = 0;

	if (v->kind != SL_V_TEXT) {
		if (v->kind != SL_V_NULL && v->kind != SL_V_UNCHANGED) {
			snprintf(err, errlen, "column \"%s\": unknown value kind %u", col->name, v->kind);
			return -1;
		}
		if (sl_avro_put_byte(b, 0) < 0)
			goto oom;
		return 0;
	}
	if (col->type == SL_T_DECIMAL) {
		/* Decided before the branch byte: NaN becomes the null branch. */
		unsigned char dec[SL_AVRO_DECIMAL_MAX_BYTES];
		size_t n;
		rc = sl_avro_parse_decimal(p, len, col->precision, col->scale, dec, &n);
		if (rc < 0)
			goto bad;
		if (rc == 1) {
			/* Not silent: warn on the 1st, 2nd, 4th, 8th, ... occurrence. */
			uint64_t nth = st ? ++st->decimal_nan_nulls : 1;
			if ((nth & (nth - 1)) == 0)
				sl_warn("column \"%s\" (numeric(%d,%d)): NaN cannot be an Avro decimal and is "
					"written as null (%" PRIu64 " so far)", col->name, col->precision,
					col->scale, nth);
			if (sl_avro_put_byte(b, 0) < 0)
				goto oom;
			return 0;
		}
		if (sl_avro_put_byte(b, 2) < 0 || sl_avro_put_bytes(b, dec, n) < 0)
			goto oom;
		return 0;
	}
	if (sl_avro_put_byte(b, 2) < 0)  /* branch 1, zigzag-encoded */
		goto oom;
	switch (col->type) {
	case SL_T_STRING:
	case SL_T_JSON:
	case SL_T_UUID:
		rc = sl_avro_put_bytes(b, p, len);
		break;
	case SL_T_BOOL:
		if (len == 1 && (p[0] == 't' || p[0] == 'f'))
			rc = sl_avro_put_bool(b, p[0] == 't');
		else
			goto bad;
		break;
	case SL_T_INT32:
	case SL_T_INT64: {
		int64_t iv;
		if (col->type == SL_T_INT32 ? parse_int(p, len, INT32_MIN, INT32_MAX, &iv)
					    : parse_int(p, len, INT64_MIN, INT64_MAX, &iv))
			goto bad;
		rc = sl_avro_put_long(b, iv);
		break;
	}
	case SL_T_FLOAT:
	case SL_T_DOUBLE: {
		char tmp[64], *end;
		float ff;
		double dd;
		if (fast_decimal_float(p, len, col->type == SL_T_FLOAT, &dd, &ff) == 0) {
			rc = col->type == SL_T_FLOAT ? sl_avro_put_float(b, ff) : sl_avro_put_double(b, dd);
			break;
		}
		if (copy_float_text(p, len, tmp, sizeof tmp) < 0)
			goto bad;
		errno = 0;
		if (col->type == SL_T_FLOAT) {
			float f = strtof(tmp, &end);
			if (*end || (errno == ERANGE && isinf(f)))
				goto bad;
			rc = sl_avro_put_float(b, f);
		} else {
			double d = strtod(tmp, &end);
			if (*end || (errno == ERANGE && isinf(d)))
				goto bad;
			rc = sl_avro_put_double(b, d);
		}
		break;
	}
	case SL_T_BYTES:
		if (put_bytea_hex(b, p, len) < 0) {
			if (sl_buf_failed(b))
				goto oom;
			goto bad;
		}
		break;
	case SL_T_DATE: {
		int32_t days;
		if (sl_avro_parse_date(p, len, &days) < 0)
			goto bad;
		rc = sl_avro_put_long(b, days);
		break;
	}
	case SL_T_TIME: {
		int64_t us;
		if (sl_avro_parse_time(p, len, &us) < 0)
			goto bad;
		rc = sl_avro_put_long(b, us);
		break;
	}
	case SL_T_TIMESTAMP:
	case SL_T_TIMESTAMPTZ: {
		int64_t us;
		if (sl_avro_parse_timestamp(p, len, col->type == SL_T_TIMESTAMPTZ, &us) < 0)
			goto bad;
		rc = sl_avro_put_long(b, us);
		break;
	}
	case SL_T_DECIMAL:
		break;  /* handled above */
	default:
		snprintf(err, errlen, "column \"%s\": unknown output type %d", col->name, (int)col->type);
		goto fail;
	}
	if (rc < 0)
		goto oom;
	return 0;

bad:
	snprintf(err, errlen, "column \"%s\": invalid %s value \"%.*s\"%s", col->name,
		 type_label(col->type), (int)(len > 64 ? 64 : len), p, len > 64 ? "..." : "");
	goto fail;
oom:
	snprintf(err, errlen, "column \"%s\": out of memory or over the buffer cap encoding a value of %zu bytes",
		 col->name, len);
fail:
	if (!sl_buf_failed(b)) {
		b->len = start;
		if (b->data)
			b->data[start] = '\0';
	}
	return -1;
}
