/*
 * sources/postgres/pg_text.c: PostgreSQL text values to typed values.
 *
 * The parsers accept exactly what PostgreSQL's output functions produce with
 * DateStyle ISO and bytea_output hex (the settings the sources use), and
 * reject everything else, so that a value never silently changes meaning.
 * Floating point text takes an exact fast path when it can (see
 * fast_decimal_float) and is otherwise parsed with strtof/strtod: sluice
 * never calls setlocale(), so the C locale's '.' is the decimal point.
 * Decimals never go through floating point: they stay decimal digits.
 */
#include "sources/postgres/pg_text.h"

#include <errno.h>
#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/util.h"

#define US_PER_SEC INT64_C(1000000)
#define US_PER_DAY (INT64_C(86400) * US_PER_SEC)
/* PostgreSQL's timestamps end in 294276 AD, about 107 million days; a year
 * has at most 9 digits here, so days stay far inside int64 before the
 * microsecond arithmetic, which is done in 128 bits. */

enum sl_type sl_pg_type_map(uint32_t oid, int32_t typmod, int *precision, int *scale)
{
	switch (oid) {
	case SL_PG_BOOL: return SL_T_BOOL;
	case SL_PG_INT2: case SL_PG_INT4: return SL_T_INT32;
	case SL_PG_INT8: return SL_T_INT64;
	case SL_PG_FLOAT4: return SL_T_FLOAT;
	case SL_PG_FLOAT8: return SL_T_DOUBLE;
	case SL_PG_BYTEA: return SL_T_BYTES;
	case SL_PG_DATE: return SL_T_DATE;
	case SL_PG_TIME: return SL_T_TIME;
	case SL_PG_TIMESTAMP: return SL_T_TIMESTAMP;
	case SL_PG_TIMESTAMPTZ: return SL_T_TIMESTAMPTZ;
	case SL_PG_UUID: return SL_T_UUID;
	case SL_PG_JSON: case SL_PG_JSONB: return SL_T_JSON;
	case SL_PG_NUMERIC:
		/* typmod = ((precision << 16) | (scale & 0x7ff)) + VARHDRSZ; PG15
		 * allows scales outside 0..precision, which Avro decimal cannot hold. */
		if (typmod >= 4) {
			int32_t t = typmod - 4;
			int p = (t >> 16) & 0xffff;
			int s = t & 0x7ff;
			if (s & 0x400)
				s -= 0x800; /* sign-extend the 11-bit scale */
			if (p >= 1 && s >= 0 && s <= p) {
				*precision = p;
				*scale = s;
				return SL_T_DECIMAL;
			}
		}
		return SL_T_STRING;
	case SL_PG_TEXT: case SL_PG_VARCHAR: case SL_PG_BPCHAR:
	default:
		return SL_T_STRING;
	}
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
	*days = sl_days_from_civil(y, m, d);
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

int sl_pg_parse_date(const char *p, size_t len, int32_t *days)
{
	int64_t y, dd;
	int m, d;
	size_t i = 0;
	bool bc;

	if (text_is(p, len, "infinity")) {
		*days = SL_PG_DATE_INFINITY;
		return 0;
	}
	if (text_is(p, len, "-infinity")) {
		*days = SL_PG_DATE_NEG_INFINITY;
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

int sl_pg_parse_time(const char *p, size_t len, int64_t *us)
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

int sl_pg_parse_timestamp(const char *p, size_t len, bool with_tz, int64_t *us)
{
	int64_t y, days, tod, off = 0;
	int m, d;
	size_t i = 0;
	bool bc;

	if (text_is(p, len, "infinity")) {
		*us = SL_PG_TS_INFINITY;
		return 0;
	}
	if (text_is(p, len, "-infinity")) {
		*us = SL_PG_TS_NEG_INFINITY;
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
	{
		__int128 v = (__int128)days * US_PER_DAY + tod - (__int128)off * US_PER_SEC;
		if (v > INT64_MAX) {
			*us = INT64_MAX;
			return 1;
		}
		if (v < INT64_MIN) {
			*us = INT64_MIN;
			return 1;
		}
		*us = (int64_t)v;
	}
	return 0;
}

int sl_pg_parse_decimal(const char *p, size_t len, int precision, int scale, char *digits,
			size_t *ndigits, bool *neg)
{
	size_t i = 0, int_start, int_end, frac_start = 0, frac_end = 0, nint, nfrac, n;
	bool minus = false;

	if (text_is(p, len, "NaN"))
		return 1;
	if (precision < 1 || precision > SL_DECIMAL_MAX_DIGITS || scale < 0 || scale > precision)
		return -1;
	if (i < len && (p[i] == '-' || p[i] == '+')) {
		minus = p[i] == '-';
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
	/* The unscaled value is the integer digits, the fraction digits and zeros
	 * up to the scale; without integer digits, the fraction's leading zeros
	 * are leading zeros of the value. */
	n = 0;
	if (nint > 0) {
		memcpy(digits, p + int_start, nint);
		n = nint;
	} else {
		while (frac_start < frac_end && p[frac_start] == '0')
			frac_start++;
		if (frac_start == frac_end) {
			digits[0] = '0';
			*ndigits = 1;
			*neg = false;
			return 0;
		}
	}
	memcpy(digits + n, p + frac_start, frac_end - frac_start);
	n += frac_end - frac_start;
	memset(digits + n, '0', (size_t)scale - nfrac);
	n += (size_t)scale - nfrac;
	*ndigits = n;
	*neg = minus;
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
	case SL_T_UINT64: return "unsigned bigint";
	}
	return "unknown";
}

int sl_pg_parse_uuid(const char *p, size_t len, unsigned char out[static 16])
{
	return sl_uuid_parse(p, len, out);
}

/* "\x0a0b" -> n bytes, decoded in place: byte k goes to p[k], which the
 * loop has read already (it reads p[2 + 2k] and p[3 + 2k]), so a value of
 * any size is decoded without a copy and takes half its text.  On invalid
 * text the bytes decoded so far are written back as hex (backwards, for the
 * same reason), so that the message can quote the text.  Returns 0 or -1. */
static int parse_bytea_hex(char *p, size_t len, size_t *n)
{
	static const char hex[] = "0123456789abcdef";
	unsigned char *dst = (unsigned char *)p;
	size_t k;

	if (len < 2 || p[0] != '\\' || p[1] != 'x' || (len - 2) % 2)
		return -1;
	*n = (len - 2) / 2;
	for (k = 0; k < *n; k++) {
		int hi = sl_hexval(p[2 + 2 * k]), lo = sl_hexval(p[3 + 2 * k]);
		if (hi < 0 || lo < 0)
			break;
		dst[k] = (unsigned char)(hi << 4 | lo);
	}
	if (k == *n)
		return 0;
	while (k-- > 0) {
		unsigned char b = dst[k];
		p[2 + 2 * k] = hex[b >> 4];
		p[3 + 2 * k] = hex[b & 15];
	}
	p[0] = '\\';
	p[1] = 'x';
	return -1;
}

size_t sl_pg_text_scratch(const struct sl_column *col, size_t len)
{
	switch (col->type) {
	case SL_T_DECIMAL:
		return len + (size_t)col->scale;
	case SL_T_UUID:
		return 16;
	default:
		return 0;
	}
}

void sl_pg_note_decimal_nan(const struct sl_column *col, struct sl_pg_text_stats *st)
{
	/* Not silent: warn on the 1st, 2nd, 4th, 8th, ... occurrence. */
	uint64_t nth = st ? ++st->decimal_nan_nulls : 1;

	if ((nth & (nth - 1)) == 0)
		sl_warn("column \"%s\" (numeric(%d,%d)): NaN cannot be a decimal and is written as null "
			"(%" PRIu64 " so far)", col->name, col->precision, col->scale, nth);
}

void sl_pg_note_ts_clamp(const struct sl_column *col, const char *shown, size_t len, struct sl_pg_text_stats *st)
{
	/* Past what 64-bit microseconds since 1970 hold: the last 30 years of
	 * PostgreSQL's range.  Not silent. */
	uint64_t nth = st ? ++st->timestamp_clamps : 1;

	if ((nth & (nth - 1)) == 0)
		sl_warn("column \"%s\": timestamp %.*s is beyond the last instant 64-bit microseconds since "
			"1970 can hold (294247-01-10 04:00:54.775807 UTC) and is written as that instant "
			"(%" PRIu64 " so far)", col->name, (int)(len > 64 ? 64 : len), shown, nth);
}

/* Converts the text p/len of column col into *o.  Bytes are decoded in place
 * in the text; uuids and decimal digits are written at s->data + s->len,
 * which the caller has reserved room for (see sl_pg_text_scratch), so s never
 * moves here.  Returns 0 or -1 (invalid text; the caller writes the
 * message). */
static int convert(const struct sl_column *col, char *p, size_t len, struct sl_value *o,
		   struct sl_buf *s, struct sl_pg_text_stats *st)
{
	char *dst = s->data + s->len;
	size_t n;

	switch (col->type) {
	case SL_T_STRING:
		*o = (struct sl_value){ .kind = SL_V_STRING, .len = (uint32_t)len, .p = p };
		return 0;
	case SL_T_JSON:
		*o = (struct sl_value){ .kind = SL_V_JSON, .len = (uint32_t)len, .p = p };
		return 0;
	case SL_T_BOOL:
		if (len != 1 || (p[0] != 't' && p[0] != 'f'))
			return -1;
		*o = (struct sl_value){ .kind = SL_V_BOOL, .b = p[0] == 't' };
		return 0;
	case SL_T_INT32:
	case SL_T_INT64: {
		int64_t iv;
		if (col->type == SL_T_INT32 ? parse_int(p, len, INT32_MIN, INT32_MAX, &iv)
					    : parse_int(p, len, INT64_MIN, INT64_MAX, &iv))
			return -1;
		*o = (struct sl_value){ .kind = SL_V_INT, .i = iv };
		return 0;
	}
	case SL_T_FLOAT:
	case SL_T_DOUBLE: {
		char tmp[64], *end;
		float ff;
		double dd;
		bool single = col->type == SL_T_FLOAT;
		if (fast_decimal_float(p, len, single, &dd, &ff) < 0) {
			if (copy_float_text(p, len, tmp, sizeof tmp) < 0)
				return -1;
			errno = 0;
			if (single) {
				ff = strtof(tmp, &end);
				if (*end || (errno == ERANGE && isinf(ff)))
					return -1;
			} else {
				dd = strtod(tmp, &end);
				if (*end || (errno == ERANGE && isinf(dd)))
					return -1;
			}
		}
		if (single)
			*o = (struct sl_value){ .kind = SL_V_FLOAT, .f = ff };
		else
			*o = (struct sl_value){ .kind = SL_V_DOUBLE, .d = dd };
		return 0;
	}
	case SL_T_DECIMAL: {
		bool neg;
		int rc = sl_pg_parse_decimal(p, len, col->precision, col->scale, dst, &n, &neg);
		if (rc < 0)
			return -1;
		if (rc == 1) {
			sl_pg_note_decimal_nan(col, st);
			*o = (struct sl_value){ .kind = SL_V_NULL };
			return 0;
		}
		*o = (struct sl_value){ .kind = SL_V_DECIMAL, .neg = neg, .scale = (int16_t)col->scale,
					.len = (uint32_t)n, .p = dst };
		break;
	}
	case SL_T_BYTES:
		if (parse_bytea_hex(p, len, &n) < 0)
			return -1;
		*o = (struct sl_value){ .kind = SL_V_BYTES, .len = (uint32_t)n, .p = p };
		return 0;
	case SL_T_UUID:
		if (sl_pg_parse_uuid(p, len, (unsigned char *)dst) < 0)
			return -1;
		n = 16;
		*o = (struct sl_value){ .kind = SL_V_UUID, .len = 16, .p = dst };
		break;
	case SL_T_DATE: {
		int32_t days;
		if (sl_pg_parse_date(p, len, &days) < 0)
			return -1;
		*o = (struct sl_value){ .kind = SL_V_DATE, .i = days };
		return 0;
	}
	case SL_T_TIME: {
		int64_t us;
		if (sl_pg_parse_time(p, len, &us) < 0)
			return -1;
		*o = (struct sl_value){ .kind = SL_V_TIME, .i = us };
		return 0;
	}
	case SL_T_TIMESTAMP:
	case SL_T_TIMESTAMPTZ: {
		int64_t us;
		int rc = sl_pg_parse_timestamp(p, len, col->type == SL_T_TIMESTAMPTZ, &us);
		if (rc < 0)
			return -1;
		if (rc == 1)
			sl_pg_note_ts_clamp(col, p, len, st);
		*o = (struct sl_value){ .kind = SL_V_TIMESTAMP, .i = us };
		return 0;
	}
	default:
		return -1;
	}
	/* The value took n bytes of scratch. */
	s->len += n;
	s->data[s->len] = '\0';
	return 0;
}

int sl_pg_text_column(const struct sl_column *col, char *p, size_t len, struct sl_value *o, struct sl_buf *scratch,
		      struct sl_pg_text_stats *st, char *err, size_t errlen)
{
	if (convert(col, p, len, o, scratch, st) == 0)
		return 0;
	if ((unsigned)col->type > SL_T_UINT64)
		snprintf(err, errlen, "column \"%s\": unknown output type %d", col->name, (int)col->type);
	else
		snprintf(err, errlen, "column \"%s\": invalid %s value \"%.*s\"%s", col->name, type_label(col->type),
			 (int)(len > 64 ? 64 : len), p, len > 64 ? "..." : "");
	return -1;
}

int sl_pg_text_row(const struct sl_table *t, struct sl_text_value *in, struct sl_value *out,
		   struct sl_buf *scratch, struct sl_pg_text_stats *st, char *err, size_t errlen)
{
	size_t need = 0;

	/* Reserve the whole row's scratch first: values point into it, so it
	 * must not move while the row is converted. */
	sl_buf_reset(scratch);
	for (int i = 0; i < t->ncols; i++)
		if (in[i].kind == SL_TV_TEXT)
			need += sl_pg_text_scratch(&t->cols[i], in[i].len);
	if (sl_buf_reserve(scratch, need) < 0) {
		snprintf(err, errlen, "table \"%s\".\"%s\": out of memory or over the buffer cap converting "
			 "a row (%zu bytes of decoded values)", t->ns, t->name, need);
		return -1;
	}
	for (int i = 0; i < t->ncols; i++) {
		const struct sl_column *col = &t->cols[i];
		char *p = in[i].p;
		size_t len = in[i].len;

		switch (in[i].kind) {
		case SL_TV_NULL:
			out[i] = (struct sl_value){ .kind = SL_V_NULL };
			continue;
		case SL_TV_UNCHANGED:
			out[i] = (struct sl_value){ .kind = SL_V_UNCHANGED };
			continue;
		case SL_TV_TEXT:
			if (sl_pg_text_column(col, p, len, &out[i], scratch, st, err, errlen) < 0)
				return -1;
			continue;
		default:
			snprintf(err, errlen, "column \"%s\": unknown text value kind %u", col->name, in[i].kind);
			return -1;
		}
	}
	return 0;
}
