/*
 * sinks/iceberg/ice_stats.c: the column statistics of a data file, taken
 * from its records' Avro encoding, and their manifest encoding (see
 * ice_stats.h).  Bounds are written in the specification's single-value
 * serialization (Appendix D): boolean one byte; int and date 4 bytes,
 * long, time and timestamps 8 bytes, little-endian; float 4 and double 8
 * bytes, IEEE 754 little-endian (as Avro has them); decimal the unscaled
 * value as big-endian two's complement in the fewest bytes; string its
 * UTF-8 bytes; binary as is.
 */
#include "sinks/iceberg/ice_stats.h"

#include <math.h>
#include <string.h>

#include "sinks/avro/avro_value.h"

/* A reader of one encoded record. */
struct rd {
	const unsigned char *p, *end;
};

static int get_long_loop(struct rd *r, int64_t *v)
{
	uint64_t z = 0;

	for (int sh = 0; r->p < r->end && sh < 64; sh += 7) {
		unsigned char c = *r->p++;
		z |= (uint64_t)(c & 0x7f) << sh;
		if (!(c & 0x80)) {
			*v = (int64_t)(z >> 1) ^ -(int64_t)(z & 1);
			return 0;
		}
	}
	return -1;
}

static inline int get_long(struct rd *r, int64_t *v)
{
	uint64_t z;

	if (r->p < r->end && !(*r->p & 0x80)) {   /* one byte: a union's branch, most lengths */
		z = *r->p++;
		*v = (int64_t)(z >> 1) ^ -(int64_t)(z & 1);
		return 0;
	}
	return get_long_loop(r, v);
}

static int get_raw(struct rd *r, size_t n, const unsigned char **p)
{
	if ((size_t)(r->end - r->p) < n)
		return -1;
	*p = r->p;
	r->p += n;
	return 0;
}

static void int_bound(struct ice_col_stats *st, int64_t v)
{
	if (!st->bounded || v < st->lo_i)
		st->lo_i = v;
	if (!st->bounded || v > st->hi_i)
		st->hi_i = v;
	st->bounded = true;
}

/* The IEEE 754 value of n (4: float, 8: double) little-endian bytes. */
static double get_ieee(const unsigned char *p, int n)
{
	uint64_t u = 0;

	for (int i = n - 1; i >= 0; i--)
		u = u << 8 | p[i];
	if (n == 4) {
		uint32_t w = (uint32_t)u;
		float f;
		memcpy(&f, &w, sizeof f);
		return f;
	} else {
		double d;
		memcpy(&d, &u, sizeof d);
		return d;
	}
}

/* Orders doubles that are not NaN, -0.0 before +0.0 (IEEE 754 totalOrder). */
static int cmp_ieee(double a, double b)
{
	if (a != b)
		return a < b ? -1 : 1;
	return (signbit(b) != 0) - (signbit(a) != 0);
}

/* Keeps a float or double v in the bounds, or counts it as a NaN. */
static void ieee_bound(struct ice_col_stats *st, double v)
{
	if (isnan(v)) {
		st->nans++;
		return;
	}
	if (!st->bounded || cmp_ieee(v, st->lo_d) < 0)
		st->lo_d = v;
	if (!st->bounded || cmp_ieee(v, st->hi_d) > 0)
		st->hi_d = v;
	st->bounded = true;
}

_Static_assert(ICE_BOUND_MAX == 16, "a bound's bytes are two 64-bit words");

static uint64_t get_be64(const unsigned char *p)
{
	return (uint64_t)p[0] << 56 | (uint64_t)p[1] << 48 | (uint64_t)p[2] << 40 | (uint64_t)p[3] << 32 |
	       (uint64_t)p[4] << 24 | (uint64_t)p[5] << 16 | (uint64_t)p[6] << 8 | p[7];
}

static void put_be64(unsigned char *p, uint64_t w)
{
	for (int i = 7; i >= 0; i--, w >>= 8)
		p[i] = (unsigned char)w;
}

/* The comparison key of bytes p (m <= ICE_BOUND_MAX; sign: a decimal's
 * two's complement) into k (see struct ice_col_stats). */
static void key_of(uint64_t k[2], const unsigned char *p, size_t m, bool sign)
{
	unsigned char b[ICE_BOUND_MAX] = { 0 };

	memcpy(b, p, m);
	if (sign && m > 0)
		b[0] ^= 0x80;
	k[0] = get_be64(b);
	k[1] = get_be64(b + 8);
}

/* The bytes of key k (m of them) into out. */
static void bytes_of(unsigned char *out, const uint64_t k[2], size_t m, bool sign)
{
	unsigned char b[ICE_BOUND_MAX];

	put_be64(b, k[0]);
	put_be64(b + 8, k[1]);
	if (sign)
		b[0] ^= 0x80;
	memcpy(out, b, m);
}

/* Orders keys a (la bytes) and b (lb bytes): zero-padded, equal words mean
 * equal bytes up to the shorter, so the shorter comes first. */
static int cmp_key(const uint64_t a[2], size_t la, const uint64_t b[2], size_t lb)
{
	if (a[0] != b[0])
		return a[0] < b[0] ? -1 : 1;
	if (a[1] != b[1])
		return a[1] < b[1] ? -1 : 1;
	return la < lb ? -1 : la > lb;
}

/* Keeps value p (n bytes) in the bounds: a prefix of at most ICE_BOUND_MAX
 * bytes, cut at a character boundary when utf8. */
static void bytes_bound(struct ice_col_stats *st, const unsigned char *p, size_t n, bool utf8, bool sign)
{
	size_t m = n < ICE_BOUND_MAX ? n : ICE_BOUND_MAX;
	uint64_t k[2];
	bool cut;
	int c;

	while (utf8 && m > 0 && m < n && (p[m] & 0xc0) == 0x80)
		m--;
	cut = m < n;
	key_of(k, p, m, sign);
	c = st->bounded ? cmp_key(k, m, st->hi_k, st->hilen) : 1;
	if (c > 0) {
		st->hi_k[0] = k[0];
		st->hi_k[1] = k[1];
		st->hilen = m;
		st->hi_cut = cut;
	} else if (c == 0) {
		st->hi_cut |= cut;
	}
	/* above hi (an increasing column: CSNs, most keys): above lo too */
	if (!st->bounded || (c <= 0 && cmp_key(k, m, st->lo_k, st->lolen) < 0)) {
		st->lo_k[0] = k[0];
		st->lo_k[1] = k[1];
		st->lolen = m;
	}
	st->bounded = true;
}

/* Skips a list<string> value: blocks of strings, ended by a count of 0. */
static int skip_list(struct rd *r)
{
	const unsigned char *p;
	int64_t cnt, len;

	for (;;) {
		if (get_long(r, &cnt) < 0)
			return -1;
		if (cnt == 0)
			return 0;
		if (cnt < 0 && get_long(r, &len) < 0)
			return -1;
		for (int64_t i = cnt < 0 ? -cnt : cnt; i > 0; i--)
			if (get_long(r, &len) < 0 || len < 0 || get_raw(r, (size_t)len, &p) < 0)
				return -1;
	}
}

/* Reads one non-null value of field f and keeps it in st. */
static int add_value(struct ice_col_stats *st, const struct ice_field *f, struct rd *r)
{
	const unsigned char *p;
	int64_t v;

	switch (f->kind) {
	case ICE_BOOLEAN:
		if (get_raw(r, 1, &p) < 0)
			return -1;
		int_bound(st, p[0] != 0);
		return 0;
	case ICE_INT: case ICE_LONG: case ICE_DATE: case ICE_TIME: case ICE_TIMESTAMP: case ICE_TIMESTAMPTZ:
		if (get_long(r, &v) < 0)
			return -1;
		int_bound(st, v);
		return 0;
	case ICE_FLOAT: case ICE_DOUBLE:
		if (get_raw(r, f->kind == ICE_FLOAT ? 4 : 8, &p) < 0)
			return -1;
		ieee_bound(st, get_ieee(p, f->kind == ICE_FLOAT ? 4 : 8));
		return 0;
	case ICE_DECIMAL:
		if (!st->fixed)
			st->fixed = ice_decimal_size(f->precision);
		v = st->fixed;
		if (v > ICE_BOUND_MAX || get_raw(r, (size_t)v, &p) < 0)
			return -1;
		bytes_bound(st, p, (size_t)v, false, true);
		return 0;
	case ICE_STRING: case ICE_BINARY:
		if (get_long(r, &v) < 0 || v < 0 || get_raw(r, (size_t)v, &p) < 0)
			return -1;
		bytes_bound(st, p, (size_t)v, f->kind == ICE_STRING, false);
		return 0;
	case ICE_LIST_STRING:
		return skip_list(r);
	}
	return -1;
}

int ice_stats_add(struct ice_col_stats *st, const struct ice_schema *s, bool keys, const unsigned char *rec,
		  size_t len)
{
	struct rd r = { rec, rec + len };

	for (int i = 0; i < s->nfields; i++) {
		const struct ice_field *f = &s->f[i];
		const unsigned char *start = r.p;
		int64_t branch = 1;
		if (keys && !f->key)
			continue;
		st[i].values++;
		if (!f->required && get_long(&r, &branch) < 0)
			return -1;
		if (branch == 0)
			st[i].nulls++;
		else if (branch != 1 || add_value(&st[i], f, &r) < 0)
			return -1;
		st[i].bytes += r.p - start;
	}
	return r.p == r.end ? 0 : -1;
}

/* The bytes a bound may take: a cut string's upper bound may grow by a
 * character's bytes. */
#define BOUND_BUF (ICE_BOUND_MAX + 4)

/* Increments the UTF-8 character p (n bytes) in place to the next code
 * point (past the surrogates); returns its new length, or 0 when it has
 * none (U+10FFFF, or p is not one whole character). */
static size_t next_char(unsigned char *p, size_t n)
{
	static const unsigned char lead[] = { 0x00, 0x00, 0xc0, 0xe0, 0xf0 };
	size_t want = p[0] < 0x80 ? 1 : p[0] < 0xc0 ? 0 : p[0] < 0xe0 ? 2 : p[0] < 0xf0 ? 3 : p[0] < 0xf8 ? 4 : 0;
	uint32_t cp;

	if (want != n)
		return 0;
	cp = n == 1 ? p[0] : p[0] & (0x7f >> n);
	for (size_t i = 1; i < n; i++)
		cp = (cp << 6) | (p[i] & 0x3f);
	cp = cp + 1 == 0xd800 ? 0xe000 : cp + 1;
	if (cp > 0x10ffff)
		return 0;
	n = cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4;
	if (n == 1) {
		p[0] = (unsigned char)cp;
		return 1;
	}
	for (size_t i = n - 1; i > 0; i--, cp >>= 6)
		p[i] = (unsigned char)(0x80 | (cp & 0x3f));
	p[0] = (unsigned char)(lead[n] | cp);
	return n;
}

/* The upper bound of a cut string or binary hi (n bytes) into out: the
 * prefix with its last character (string: the next code point) or byte
 * (binary) that can be incremented incremented, and what follows dropped.
 * Returns its length, or 0: none. */
static size_t cut_upper(unsigned char *out, const unsigned char *hi, size_t n, bool utf8)
{
	memcpy(out, hi, n);
	while (n > 0) {
		size_t k = n - 1, m;
		while (utf8 && k > 0 && (out[k] & 0xc0) == 0x80)
			k--;
		if (!utf8 && out[k] < 0xff) {
			out[k]++;
			return n;
		}
		if (utf8 && (m = next_char(out + k, n - k)) > 0)
			return k + m;
		n = k;
	}
	return 0;
}

/* Field f's bound (upper or lower) in the single-value serialization into
 * out; its length, or 0: none. */
static size_t bound_of(unsigned char *out, const struct ice_col_stats *st, const struct ice_field *f, bool upper)
{
	int64_t v = upper ? st->hi_i : st->lo_i;
	unsigned char b[ICE_BOUND_MAX];
	const unsigned char *p = b;
	size_t n = upper ? st->hilen : st->lolen, w = 8;

	if (!st->bounded)
		return 0;
	bytes_of(b, upper ? st->hi_k : st->lo_k, n, f->kind == ICE_DECIMAL);
	switch (f->kind) {
	case ICE_BOOLEAN:
		out[0] = (unsigned char)v;
		return 1;
	case ICE_INT: case ICE_DATE:
		w = 4;
		/* fall through */
	case ICE_LONG: case ICE_TIME: case ICE_TIMESTAMP: case ICE_TIMESTAMPTZ:
		for (size_t i = 0; i < w; i++)
			out[i] = (unsigned char)((uint64_t)v >> (8 * i));
		return w;
	case ICE_FLOAT: {
		float f32 = (float)(upper ? st->hi_d : st->lo_d);
		uint32_t u;
		memcpy(&u, &f32, sizeof u);
		for (size_t i = 0; i < 4; i++)
			out[i] = (unsigned char)(u >> (8 * i));
		return 4;
	}
	case ICE_DOUBLE: {
		double d = upper ? st->hi_d : st->lo_d;
		uint64_t u;
		memcpy(&u, &d, sizeof u);
		for (size_t i = 0; i < 8; i++)
			out[i] = (unsigned char)(u >> (8 * i));
		return 8;
	}
	case ICE_DECIMAL:
		while (n > 1 && ((p[0] == 0x00 && !(p[1] & 0x80)) || (p[0] == 0xff && (p[1] & 0x80)))) {
			p++;
			n--;
		}
		memcpy(out, p, n);
		return n;
	case ICE_STRING: case ICE_BINARY:
		if (upper && st->hi_cut)
			return cut_upper(out, p, n, f->kind == ICE_STRING);
		memcpy(out, p, n);
		return n;
	default:
		return 0;
	}
}

/* The six maps of a data_file's statistics, in the specification's order. */
enum ice_stat { STAT_SIZES, STAT_VALUES, STAT_NULLS, STAT_NANS, STAT_LOWER, STAT_UPPER };

/* Field i's entry of map which: 1 for a count; for a bound, its length
 * with its bytes in v; 0: none (not counted, a list, no NaN count of
 * another type than float and double, no bound). */
static size_t entry_of(unsigned char *v, const struct ice_col_stats *st, const struct ice_schema *s, int i,
		       enum ice_stat which)
{
	if (!st || st[i].values == 0 || s->f[i].kind == ICE_LIST_STRING)
		return 0;
	if (which == STAT_NANS)
		return s->f[i].kind == ICE_FLOAT || s->f[i].kind == ICE_DOUBLE;
	if (which != STAT_LOWER && which != STAT_UPPER)
		return 1;
	return bound_of(v, &st[i], &s->f[i], which == STAT_UPPER);
}

/* Field i's count in map which. */
static int64_t count_of(const struct ice_col_stats *st, enum ice_stat which)
{
	switch (which) {
	case STAT_SIZES:
		return st->bytes;
	case STAT_NULLS:
		return st->nulls;
	case STAT_NANS:
		return st->nans;
	default:
		return st->values;
	}
}

/* One map (map<int,long> of counts, map<int,binary> of bounds) as an
 * Avro array of key/value records, or null when it has no entry. */
static void put_map(struct sl_buf *b, const struct ice_col_stats *st, const struct ice_schema *s,
		    enum ice_stat which)
{
	unsigned char v[BOUND_BUF];
	int64_t n = 0;

	for (int i = 0; i < s->nfields; i++)
		n += entry_of(v, st, s, i, which) > 0;
	if (n == 0) {
		sl_avro_put_byte(b, 0);
		return;
	}
	sl_avro_put_byte(b, 2);
	sl_avro_put_long(b, n);
	for (int i = 0; i < s->nfields; i++) {
		size_t len = entry_of(v, st, s, i, which);
		if (len == 0)
			continue;
		sl_avro_put_long(b, s->f[i].id);
		if (which != STAT_LOWER && which != STAT_UPPER)
			sl_avro_put_long(b, count_of(&st[i], which));
		else
			sl_avro_put_bytes(b, v, len);
	}
	sl_avro_put_long(b, 0);
}

int ice_stats_encode(struct sl_buf *b, const struct ice_col_stats *st, const struct ice_schema *s)
{
	for (int m = STAT_SIZES; m <= STAT_UPPER; m++)
		put_map(b, st, s, (enum ice_stat)m);
	return sl_buf_failed(b) ? -1 : 0;
}
