/*
 * tests/unit/mysql_enc.c: the test-side binlog encoder (see mysql_enc.h).
 * Written from the format descriptions: MySQL's decimal2bin,
 * TIME/DATETIME packing and json_binary serialisation, MariaDB's event
 * layouts.  It deliberately shares no code with sources/mysql/.
 */
#include "tests/unit/mysql_enc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

static void ok(struct sl_buf *b)
{
	if (sl_buf_failed(b)) {
		fprintf(stderr, "mysql_enc: buffer failed\n");
		abort();
	}
}

void me_le(struct sl_buf *b, uint64_t v, int n)
{
	for (int i = 0; i < n; i++)
		sl_buf_putc(b, i < 8 ? (char)(v >> (8 * i)) : 0);  /* wider: zero bytes */
	ok(b);
}

void me_be(struct sl_buf *b, uint64_t v, int n)
{
	for (int i = n - 1; i >= 0; i--)
		sl_buf_putc(b, i < 8 ? (char)(v >> (8 * i)) : 0);
	ok(b);
}

void me_packed(struct sl_buf *b, uint64_t v)
{
	if (v < 251) {
		me_le(b, v, 1);
	} else if (v < 65536) {
		me_le(b, 252, 1);
		me_le(b, v, 2);
	} else if (v < 16777216) {
		me_le(b, 253, 1);
		me_le(b, v, 3);
	} else {
		me_le(b, 254, 1);
		me_le(b, v, 8);
	}
}

void me_bytes(struct sl_buf *b, const void *p, size_t n)
{
	sl_buf_append(b, p, n);
	ok(b);
}

void me_lenstr(struct sl_buf *b, const char *s)
{
	me_packed(b, strlen(s));
	me_bytes(b, s, strlen(s));
}

void me_event(struct sl_buf *out, uint8_t type, uint32_t timestamp, uint32_t server_id, uint64_t start,
	      uint16_t flags, const void *body, size_t len, bool crc)
{
	size_t at = out->len;
	uint32_t size = (uint32_t)(19 + len + (crc ? 4 : 0));

	me_le(out, timestamp, 4);
	me_le(out, type, 1);
	me_le(out, server_id, 4);
	me_le(out, size, 4);
	me_le(out, start ? start + size : 0, 4);
	me_le(out, flags, 2);
	me_bytes(out, body, len);
	if (crc)
		me_le(out, crc32(0L, (const unsigned char *)out->data + at, (uInt)(19 + len)), 4);
}

/* MariaDB 10.11.19's post-header lengths, event types 1 to 171, as its
 * format description carries them. */
static const uint8_t mariadb_ph[171] = {
	56, 13, 0, 8, 0, 18, 0, 4, 4, 4, 4, 18, 0, 0, 228, 0, 4, 26, 8, 0, 0, 0, 8, 8, 8, 2, 0, 0, 0,
	10, 10, 10, 0, 0, 0, 0, 0, 0, 10, 10, 10,
	[159] = 0, [160] = 4, [161] = 19, [162] = 4, [163] = 0, [164] = 13, [165] = 8, [166] = 8, [167] = 8,
	[168] = 10, [169] = 10, [170] = 10,
};

void me_fde_body(struct sl_buf *b, bool mariadb, uint8_t checksum_alg)
{
	char ver[50] = { 0 };
	uint8_t mysql_ph[42] = { 0 };

	me_le(b, 4, 2);
	snprintf(ver, sizeof ver, "%s", mariadb ? "10.11.19-MariaDB-log" : "8.0.36");
	me_bytes(b, ver, 50);
	me_le(b, 1700000000, 4);
	me_le(b, 19, 1);
	if (mariadb) {
		me_bytes(b, mariadb_ph, sizeof mariadb_ph);
	} else {
		/* MySQL 8.0: QUERY 13, ROTATE 8, FDE 57 + 42, TABLE_MAP 8, rows
		 * V1 8, V2 10, INCIDENT 2, GTID and ANONYMOUS_GTID 42. */
		mysql_ph[1] = 13; mysql_ph[3] = 8; mysql_ph[14] = 57 + 42; mysql_ph[18] = 8;
		mysql_ph[22] = mysql_ph[23] = mysql_ph[24] = 8; mysql_ph[25] = 2;
		mysql_ph[29] = mysql_ph[30] = mysql_ph[31] = 10; mysql_ph[32] = mysql_ph[33] = 42;
		me_bytes(b, mysql_ph, sizeof mysql_ph);
	}
	me_le(b, checksum_alg, 1);
}

void me_fde_event(struct sl_buf *out, bool mariadb, bool crc)
{
	struct sl_buf body;

	sl_buf_init(&body, 0);
	me_fde_body(&body, mariadb, crc ? 1 : 0);
	if (crc) {
		me_event(out, 15, 1700000000, 1, 4, 0, body.data, body.len, true);
	} else {
		/* Without CRC32 the four checksum bytes are still there. */
		me_le(&body, 0, 4);
		me_event(out, 15, 1700000000, 1, 4, 0, body.data, body.len, false);
	}
	sl_buf_free(&body);
}

/* ---- values ---- */

static const int dig2bytes[10] = { 0, 1, 1, 2, 2, 3, 3, 4, 4, 4 };

/* Appends the decimal group of the digits d[0..n) big-endian in nb bytes. */
static void group(unsigned char *out, size_t *o, const char *d, int n, int nb)
{
	uint32_t v = 0;

	for (int i = 0; i < n; i++)
		v = v * 10 + (uint32_t)(d[i] - '0');
	for (int i = nb - 1; i >= 0; i--)
		out[(*o)++] = (unsigned char)(v >> (8 * i));
}

void me_decimal(struct sl_buf *b, const char *text, int p, int s)
{
	char ip[80], fp[48];
	const char *dot, *t = text;
	bool neg = false;
	int intg = p - s, nint, nfrac;
	unsigned char out[64];
	size_t o = 0;

	if (*t == '-') {
		neg = true;
		t++;
	}
	dot = strchr(t, '.');
	nint = dot ? (int)(dot - t) : (int)strlen(t);
	while (nint > 0 && *t == '0') {  /* "0.5" in DECIMAL(5,5) has no integer digits */
		t++;
		nint--;
	}
	nfrac = dot ? (int)strlen(dot + 1) : 0;
	/* the integer digits right-aligned in intg digits, the fraction
	 * left-aligned in s digits */
	memset(ip, '0', (size_t)intg);
	memcpy(ip + intg - nint, t, (size_t)nint);
	memset(fp, '0', (size_t)s);
	if (nfrac)
		memcpy(fp, dot + 1, (size_t)nfrac);
	/* integer: the partial group first, then groups of 9 */
	if (intg % 9)
		group(out, &o, ip, intg % 9, dig2bytes[intg % 9]);
	for (int k = intg % 9; k < intg; k += 9)
		group(out, &o, ip + k, 9, 4);
	/* fraction: groups of 9, then the partial group */
	for (int k = 0; k + 9 <= s; k += 9)
		group(out, &o, fp + k, 9, 4);
	if (s % 9)
		group(out, &o, fp + s - s % 9, s % 9, dig2bytes[s % 9]);
	if (neg)
		for (size_t i = 0; i < o; i++)
			out[i] = (unsigned char)~out[i];
	out[0] ^= 0x80;
	me_bytes(b, out, o);
}

void me_date(struct sl_buf *b, int y, int m, int d)
{
	me_le(b, (uint64_t)(d | m << 5 | y << 9), 3);
}

/* The fraction of a temporal2 value in (fsp + 1) / 2 bytes. */
static void frac(struct sl_buf *b, uint32_t us, int fsp)
{
	switch ((fsp + 1) / 2) {
	case 1: me_be(b, us / 10000, 1); break;
	case 2: me_be(b, us / 100, 2); break;
	case 3: me_be(b, us, 3); break;
	default: break;
	}
}

void me_datetime2(struct sl_buf *b, int y, int m, int d, int hh, int mi, int ss, uint32_t us, int fsp)
{
	uint64_t ym = (uint64_t)y * 13 + (uint64_t)m;
	uint64_t v = (ym << 22 | (uint64_t)d << 17 | (uint64_t)hh << 12 | (uint64_t)mi << 6 | (uint64_t)ss) +
		     UINT64_C(0x8000000000);

	me_be(b, v, 5);
	frac(b, us, fsp);
}

void me_timestamp2(struct sl_buf *b, uint32_t sec, uint32_t us, int fsp)
{
	me_be(b, sec, 4);
	frac(b, us, fsp);
}

void me_time2(struct sl_buf *b, bool neg, int hh, int mi, int ss, uint32_t us, int fsp)
{
	/* MySQL's packed time: (hh << 12 | mi << 6 | ss) << 24 | microseconds,
	 * negated for negative times, then stored with an offset. */
	int64_t hms = (int64_t)hh << 12 | mi << 6 | ss;
	int64_t packed = (hms << 24) + us;
	int64_t ip, fr;

	if (neg)
		packed = -packed;
	switch (fsp) {
	case 0:
		me_be(b, (uint64_t)((packed >> 24) + 0x800000), 3);
		break;
	case 1: case 2: case 3: case 4: {
		int64_t unit = fsp <= 2 ? 10000 : 100, nb = fsp <= 2 ? 1 : 2;
		/* MySQL stores the integer part shifted down (packed >> 24, which
		 * rounds towards minus infinity) and the remainder of the packed
		 * value (C's %, negative for negative times) in the fraction's
		 * units, cut to its bytes: -1.5 s is -2 and 0x100 - 50. */
		ip = packed >> 24;
		fr = (packed % (INT64_C(1) << 24)) / unit;
		me_be(b, (uint64_t)(ip + 0x800000), 3);
		me_be(b, (uint64_t)fr & (nb == 1 ? 0xff : 0xffff), (int)nb);
		break;
	}
	default:
		me_be(b, (uint64_t)(packed + INT64_C(0x800000000000)), 6);
	}
}

/* ---- binary JSON ---- */

static struct me_json *mj_new(uint8_t type)
{
	struct me_json *j = calloc(1, sizeof *j);

	if (!j)
		abort();
	j->type = type;
	sl_buf_init(&j->v, 0);
	return j;
}

static void mj_free(struct me_json *j)
{
	sl_buf_free(&j->v);
	free(j);
}

struct me_json *mj_literal(int which)
{
	struct me_json *j = mj_new(0x04);

	me_le(&j->v, (uint64_t)which, 1);
	return j;
}

struct me_json *mj_int(uint8_t type, uint64_t v)
{
	static const int width[] = { [5] = 2, [6] = 2, [7] = 4, [8] = 4, [9] = 8, [10] = 8 };
	struct me_json *j = mj_new(type);

	me_le(&j->v, v, width[type]);
	return j;
}

struct me_json *mj_double(double d)
{
	struct me_json *j = mj_new(0x0b);
	uint64_t bits;

	memcpy(&bits, &d, 8);
	me_le(&j->v, bits, 8);
	return j;
}

static void mj_varlen(struct sl_buf *b, size_t n)
{
	do {
		unsigned char c = n & 0x7f;
		n >>= 7;
		if (n)
			c |= 0x80;
		me_bytes(b, &c, 1);
	} while (n);
}

struct me_json *mj_string(const char *s, size_t n)
{
	struct me_json *j = mj_new(0x0c);

	mj_varlen(&j->v, n);
	me_bytes(&j->v, s, n);
	return j;
}

struct me_json *mj_opaque(uint8_t mysql_type, const void *p, size_t n)
{
	struct me_json *j = mj_new(0x0f);

	me_le(&j->v, mysql_type, 1);
	mj_varlen(&j->v, n);
	me_bytes(&j->v, p, n);
	return j;
}

static bool inlined(uint8_t t, bool large)
{
	return t == 0x04 || t == 0x05 || t == 0x06 || (large && (t == 0x07 || t == 0x08));
}

static struct me_json *container(bool object, bool large, int n, const char *const *keys, struct me_json **vals)
{
	struct me_json *j = mj_new((uint8_t)((object ? 0 : 2) + (large ? 1 : 0)));
	int os = large ? 4 : 2;
	size_t header = (size_t)(2 * os + n * (1 + os) + (object ? n * (2 + os) : 0));
	size_t total = header;
	struct sl_buf body;
	size_t *voff = calloc((size_t)n + 1, sizeof *voff), *koff = calloc((size_t)n + 1, sizeof *koff);

	if (!voff || !koff)
		abort();
	/* Layout: header, keys, values (those not inline). */
	sl_buf_init(&body, 0);
	for (int i = 0; object && i < n; i++) {
		koff[i] = total + body.len;
		me_bytes(&body, keys[i], strlen(keys[i]));
	}
	for (int i = 0; i < n; i++) {
		if (inlined(vals[i]->type, large))
			continue;
		voff[i] = total + body.len;
		me_bytes(&body, vals[i]->v.data, vals[i]->v.len);
	}
	total += body.len;
	me_le(&j->v, (uint64_t)n, os);
	me_le(&j->v, total, os);
	for (int i = 0; object && i < n; i++) {
		me_le(&j->v, koff[i], os);
		me_le(&j->v, strlen(keys[i]), 2);
	}
	for (int i = 0; i < n; i++) {
		me_le(&j->v, vals[i]->type, 1);
		if (inlined(vals[i]->type, large)) {
			uint64_t x = 0;
			for (size_t k = 0; k < vals[i]->v.len; k++)
				x |= (uint64_t)(unsigned char)vals[i]->v.data[k] << (8 * k);
			me_le(&j->v, x, os);
		} else {
			me_le(&j->v, voff[i], os);
		}
	}
	me_bytes(&j->v, body.data, body.len);
	sl_buf_free(&body);
	for (int i = 0; i < n; i++)
		mj_free(vals[i]);
	free(voff);
	free(koff);
	return j;
}

struct me_json *mj_array(bool large, int n, struct me_json **elems)
{
	return container(false, large, n, NULL, elems);
}

struct me_json *mj_object(bool large, int n, const char *const *keys, struct me_json **vals)
{
	return container(true, large, n, keys, vals);
}

void mj_doc(struct sl_buf *out, struct me_json *j)
{
	me_le(out, j->type, 1);
	me_bytes(out, j->v.data, j->v.len);
	mj_free(j);
}
