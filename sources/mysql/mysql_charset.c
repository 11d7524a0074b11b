/*
 * sources/mysql/mysql_charset.c: collation ids to character sets, and text
 * in them to UTF-8 (see mysql_charset.h for what each charset gets).
 */
#include "sources/mysql/mysql_charset.h"

#include <errno.h>
#include <iconv.h>
#include <stdio.h>
#include <string.h>

enum {
	CS_ARMSCII8 = 0,
	CS_ASCII,
	CS_BIG5,
	CS_BINARY,
	CS_CP1250,
	CS_CP1251,
	CS_CP1256,
	CS_CP1257,
	CS_CP850,
	CS_CP852,
	CS_CP866,
	CS_CP932,
	CS_DEC8,
	CS_EUCJPMS,
	CS_EUCKR,
	CS_GB18030,
	CS_GB2312,
	CS_GBK,
	CS_GEOSTD8,
	CS_GREEK,
	CS_HEBREW,
	CS_HP8,
	CS_KEYBCS2,
	CS_KOI8R,
	CS_KOI8U,
	CS_LATIN1,
	CS_LATIN2,
	CS_LATIN5,
	CS_LATIN7,
	CS_MACCE,
	CS_MACROMAN,
	CS_SJIS,
	CS_SWE7,
	CS_TIS620,
	CS_UCS2,
	CS_UJIS,
	CS_UTF16,
	CS_UTF16LE,
	CS_UTF32,
	CS_UTF8MB3,
	CS_UTF8MB4,
	CS_COUNT
};

static const struct sl_mysql_charset charsets[CS_COUNT] = {
	[CS_ARMSCII8] = { "armscii8", "ARMSCII-8", SL_CS_ICONV, CS_ARMSCII8 },
	[CS_ASCII] = { "ascii", NULL, SL_CS_ASCII, CS_ASCII },
	[CS_BIG5] = { "big5", "BIG5", SL_CS_ICONV, CS_BIG5 },
	[CS_BINARY] = { "binary", NULL, SL_CS_BINARY, CS_BINARY },
	[CS_CP1250] = { "cp1250", "CP1250", SL_CS_ICONV, CS_CP1250 },
	[CS_CP1251] = { "cp1251", "CP1251", SL_CS_ICONV, CS_CP1251 },
	[CS_CP1256] = { "cp1256", "CP1256", SL_CS_ICONV, CS_CP1256 },
	[CS_CP1257] = { "cp1257", "CP1257", SL_CS_ICONV, CS_CP1257 },
	[CS_CP850] = { "cp850", "CP850", SL_CS_ICONV, CS_CP850 },
	[CS_CP852] = { "cp852", "CP852", SL_CS_ICONV, CS_CP852 },
	[CS_CP866] = { "cp866", "CP866", SL_CS_ICONV, CS_CP866 },
	[CS_CP932] = { "cp932", "CP932", SL_CS_ICONV, CS_CP932 },
	[CS_DEC8] = { "dec8", NULL, SL_CS_UNSUPPORTED, CS_DEC8 },
	[CS_EUCJPMS] = { "eucjpms", "EUC-JP-MS", SL_CS_ICONV, CS_EUCJPMS },
	[CS_EUCKR] = { "euckr", "EUC-KR", SL_CS_ICONV, CS_EUCKR },
	[CS_GB18030] = { "gb18030", "GB18030", SL_CS_ICONV, CS_GB18030 },
	[CS_GB2312] = { "gb2312", "GB2312", SL_CS_ICONV, CS_GB2312 },
	[CS_GBK] = { "gbk", "GBK", SL_CS_ICONV, CS_GBK },
	[CS_GEOSTD8] = { "geostd8", NULL, SL_CS_UNSUPPORTED, CS_GEOSTD8 },
	[CS_GREEK] = { "greek", "ISO-8859-7", SL_CS_ICONV, CS_GREEK },
	[CS_HEBREW] = { "hebrew", "ISO-8859-8", SL_CS_ICONV, CS_HEBREW },
	[CS_HP8] = { "hp8", NULL, SL_CS_UNSUPPORTED, CS_HP8 },
	[CS_KEYBCS2] = { "keybcs2", NULL, SL_CS_UNSUPPORTED, CS_KEYBCS2 },
	[CS_KOI8R] = { "koi8r", "KOI8-R", SL_CS_ICONV, CS_KOI8R },
	[CS_KOI8U] = { "koi8u", "KOI8-U", SL_CS_ICONV, CS_KOI8U },
	[CS_LATIN1] = { "latin1", NULL, SL_CS_LATIN1, CS_LATIN1 },
	[CS_LATIN2] = { "latin2", "ISO-8859-2", SL_CS_ICONV, CS_LATIN2 },
	[CS_LATIN5] = { "latin5", "ISO-8859-9", SL_CS_ICONV, CS_LATIN5 },
	[CS_LATIN7] = { "latin7", "ISO-8859-13", SL_CS_ICONV, CS_LATIN7 },
	[CS_MACCE] = { "macce", NULL, SL_CS_UNSUPPORTED, CS_MACCE },
	[CS_MACROMAN] = { "macroman", "MACINTOSH", SL_CS_ICONV, CS_MACROMAN },
	[CS_SJIS] = { "sjis", "SHIFT_JIS", SL_CS_ICONV, CS_SJIS },
	[CS_SWE7] = { "swe7", NULL, SL_CS_UNSUPPORTED, CS_SWE7 },
	[CS_TIS620] = { "tis620", "TIS-620", SL_CS_ICONV, CS_TIS620 },
	[CS_UCS2] = { "ucs2", "UCS-2BE", SL_CS_ICONV, CS_UCS2 },
	[CS_UJIS] = { "ujis", "EUC-JP", SL_CS_ICONV, CS_UJIS },
	[CS_UTF16] = { "utf16", "UTF-16BE", SL_CS_ICONV, CS_UTF16 },
	[CS_UTF16LE] = { "utf16le", "UTF-16LE", SL_CS_ICONV, CS_UTF16LE },
	[CS_UTF32] = { "utf32", "UTF-32BE", SL_CS_ICONV, CS_UTF32 },
	[CS_UTF8MB3] = { "utf8mb3", NULL, SL_CS_UTF8, CS_UTF8MB3 },
	[CS_UTF8MB4] = { "utf8mb4", NULL, SL_CS_UTF8, CS_UTF8MB4 },
};

_Static_assert(CS_COUNT == SL_MYSQL_CHARSETS, "SL_MYSQL_CHARSETS must count the charsets");

/* Collation id ranges (inclusive) and their charset, sorted. */
static const struct {
	uint16_t first, last;
	uint8_t cs;
} collations[] = {
	{ 1, 1, CS_BIG5 }, { 2, 2, CS_LATIN2 }, { 3, 3, CS_DEC8 }, { 4, 4, CS_CP850 },
	{ 5, 5, CS_LATIN1 }, { 6, 6, CS_HP8 }, { 7, 7, CS_KOI8R }, { 8, 8, CS_LATIN1 },
	{ 9, 9, CS_LATIN2 }, { 10, 10, CS_SWE7 }, { 11, 11, CS_ASCII }, { 12, 12, CS_UJIS },
	{ 13, 13, CS_SJIS }, { 14, 14, CS_CP1251 }, { 15, 15, CS_LATIN1 }, { 16, 16, CS_HEBREW },
	{ 18, 18, CS_TIS620 }, { 19, 19, CS_EUCKR }, { 20, 20, CS_LATIN7 }, { 21, 21, CS_LATIN2 },
	{ 22, 22, CS_KOI8U }, { 23, 23, CS_CP1251 }, { 24, 24, CS_GB2312 }, { 25, 25, CS_GREEK },
	{ 26, 26, CS_CP1250 }, { 27, 27, CS_LATIN2 }, { 28, 28, CS_GBK }, { 29, 29, CS_CP1257 },
	{ 30, 30, CS_LATIN5 }, { 31, 31, CS_LATIN1 }, { 32, 32, CS_ARMSCII8 }, { 33, 33, CS_UTF8MB3 },
	{ 34, 34, CS_CP1250 }, { 35, 35, CS_UCS2 }, { 36, 36, CS_CP866 }, { 37, 37, CS_KEYBCS2 },
	{ 38, 38, CS_MACCE }, { 39, 39, CS_MACROMAN }, { 40, 40, CS_CP852 }, { 41, 42, CS_LATIN7 },
	{ 43, 43, CS_MACCE }, { 44, 44, CS_CP1250 }, { 45, 46, CS_UTF8MB4 }, { 47, 49, CS_LATIN1 },
	{ 50, 52, CS_CP1251 }, { 53, 53, CS_MACROMAN }, { 54, 55, CS_UTF16 }, { 56, 56, CS_UTF16LE },
	{ 57, 57, CS_CP1256 }, { 58, 59, CS_CP1257 }, { 60, 61, CS_UTF32 }, { 62, 62, CS_UTF16LE },
	{ 63, 63, CS_BINARY }, { 64, 64, CS_ARMSCII8 }, { 65, 65, CS_ASCII }, { 66, 66, CS_CP1250 },
	{ 67, 67, CS_CP1256 }, { 68, 68, CS_CP866 }, { 69, 69, CS_DEC8 }, { 70, 70, CS_GREEK },
	{ 71, 71, CS_HEBREW }, { 72, 72, CS_HP8 }, { 73, 73, CS_KEYBCS2 }, { 74, 74, CS_KOI8R },
	{ 75, 75, CS_KOI8U }, { 76, 76, CS_UTF8MB3 }, { 77, 77, CS_LATIN2 }, { 78, 78, CS_LATIN5 },
	{ 79, 79, CS_LATIN7 }, { 80, 80, CS_CP850 }, { 81, 81, CS_CP852 }, { 82, 82, CS_SWE7 },
	{ 83, 83, CS_UTF8MB3 }, { 84, 84, CS_BIG5 }, { 85, 85, CS_EUCKR }, { 86, 86, CS_GB2312 },
	{ 87, 87, CS_GBK }, { 88, 88, CS_SJIS }, { 89, 89, CS_TIS620 }, { 90, 90, CS_UCS2 },
	{ 91, 91, CS_UJIS }, { 92, 93, CS_GEOSTD8 }, { 94, 94, CS_LATIN1 }, { 95, 96, CS_CP932 },
	{ 97, 98, CS_EUCJPMS }, { 99, 99, CS_CP1250 }, { 101, 124, CS_UTF16 }, { 128, 151, CS_UCS2 },
	{ 159, 159, CS_UCS2 }, { 160, 183, CS_UTF32 }, { 192, 215, CS_UTF8MB3 },
	{ 223, 223, CS_UTF8MB3 }, { 224, 247, CS_UTF8MB4 }, { 248, 250, CS_GB18030 },
	{ 255, 323, CS_UTF8MB4 }, { 576, 578, CS_UTF8MB3 }, { 608, 610, CS_UTF8MB4 },
	{ 640, 642, CS_UCS2 }, { 672, 674, CS_UTF16 }, { 736, 738, CS_UTF32 }, { 1025, 1025, CS_BIG5 },
	{ 1027, 1027, CS_DEC8 }, { 1028, 1028, CS_CP850 }, { 1030, 1030, CS_HP8 },
	{ 1031, 1031, CS_KOI8R }, { 1032, 1032, CS_LATIN1 }, { 1033, 1033, CS_LATIN2 },
	{ 1034, 1034, CS_SWE7 }, { 1035, 1035, CS_ASCII }, { 1036, 1036, CS_UJIS },
	{ 1037, 1037, CS_SJIS }, { 1040, 1040, CS_HEBREW }, { 1042, 1042, CS_TIS620 },
	{ 1043, 1043, CS_EUCKR }, { 1046, 1046, CS_KOI8U }, { 1048, 1048, CS_GB2312 },
	{ 1049, 1049, CS_GREEK }, { 1050, 1050, CS_CP1250 }, { 1052, 1052, CS_GBK },
	{ 1054, 1054, CS_LATIN5 }, { 1056, 1056, CS_ARMSCII8 }, { 1057, 1057, CS_UTF8MB3 },
	{ 1059, 1059, CS_UCS2 }, { 1060, 1060, CS_CP866 }, { 1061, 1061, CS_KEYBCS2 },
	{ 1062, 1062, CS_MACCE }, { 1063, 1063, CS_MACROMAN }, { 1064, 1064, CS_CP852 },
	{ 1065, 1065, CS_LATIN7 }, { 1067, 1067, CS_MACCE }, { 1069, 1070, CS_UTF8MB4 },
	{ 1071, 1071, CS_LATIN1 }, { 1074, 1075, CS_CP1251 }, { 1077, 1077, CS_MACROMAN },
	{ 1078, 1079, CS_UTF16 }, { 1080, 1080, CS_UTF16LE }, { 1081, 1081, CS_CP1256 },
	{ 1082, 1083, CS_CP1257 }, { 1084, 1085, CS_UTF32 }, { 1086, 1086, CS_UTF16LE },
	{ 1088, 1088, CS_ARMSCII8 }, { 1089, 1089, CS_ASCII }, { 1090, 1090, CS_CP1250 },
	{ 1091, 1091, CS_CP1256 }, { 1092, 1092, CS_CP866 }, { 1093, 1093, CS_DEC8 },
	{ 1094, 1094, CS_GREEK }, { 1095, 1095, CS_HEBREW }, { 1096, 1096, CS_HP8 },
	{ 1097, 1097, CS_KEYBCS2 }, { 1098, 1098, CS_KOI8R }, { 1099, 1099, CS_KOI8U },
	{ 1101, 1101, CS_LATIN2 }, { 1102, 1102, CS_LATIN5 }, { 1103, 1103, CS_LATIN7 },
	{ 1104, 1104, CS_CP850 }, { 1105, 1105, CS_CP852 }, { 1106, 1106, CS_SWE7 },
	{ 1107, 1107, CS_UTF8MB3 }, { 1108, 1108, CS_BIG5 }, { 1109, 1109, CS_EUCKR },
	{ 1110, 1110, CS_GB2312 }, { 1111, 1111, CS_GBK }, { 1112, 1112, CS_SJIS },
	{ 1113, 1113, CS_TIS620 }, { 1114, 1114, CS_UCS2 }, { 1115, 1115, CS_UJIS },
	{ 1116, 1117, CS_GEOSTD8 }, { 1119, 1120, CS_CP932 }, { 1121, 1122, CS_EUCJPMS },
	{ 1125, 1125, CS_UTF16 }, { 1147, 1147, CS_UTF16 }, { 1152, 1152, CS_UCS2 },
	{ 1174, 1174, CS_UCS2 }, { 1184, 1184, CS_UTF32 }, { 1206, 1206, CS_UTF32 },
	{ 1216, 1216, CS_UTF8MB3 }, { 1238, 1238, CS_UTF8MB3 }, { 1248, 1248, CS_UTF8MB4 },
	{ 1270, 1270, CS_UTF8MB4 }, { 2048, 2215, CS_UTF8MB3 }, { 2232, 2247, CS_UTF8MB3 },
	{ 2304, 2471, CS_UTF8MB4 }, { 2488, 2503, CS_UTF8MB4 }, { 2560, 2727, CS_UCS2 },
	{ 2744, 2759, CS_UCS2 }, { 2816, 2983, CS_UTF16 }, { 3000, 3015, CS_UTF16 },
	{ 3072, 3239, CS_UTF32 }, { 3256, 3271, CS_UTF32 },
};

const struct sl_mysql_charset *sl_mysql_charset_of_collation(uint32_t collation)
{
	size_t lo = 0, hi = sizeof collations / sizeof *collations;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (collations[mid].last < collation)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo < sizeof collations / sizeof *collations && collations[lo].first <= collation)
		return &charsets[collations[lo].cs];
	return NULL;
}

const struct sl_mysql_charset *sl_mysql_charset_by_name(const char *name)
{
	if (!strcmp(name, "utf8"))
		return &charsets[CS_UTF8MB3];
	for (size_t i = 0; i < CS_COUNT; i++)
		if (!strcmp(charsets[i].name, name))
			return &charsets[i];
	return NULL;
}

/* MySQL's latin1 from 0x80 to 0x9F (Windows-1252; the bytes it leaves
 * undefined are the C1 controls); 0xA0 to 0xFF are U+00A0 to U+00FF. */
static const uint16_t latin1_80_9f[32] = {
	0x20AC, 0x0081, 0x201A, 0x0192, 0x201E, 0x2026, 0x2020, 0x2021,
	0x02C6, 0x2030, 0x0160, 0x2039, 0x0152, 0x008D, 0x017D, 0x008F,
	0x0090, 0x2018, 0x2019, 0x201C, 0x201D, 0x2022, 0x2013, 0x2014,
	0x02DC, 0x2122, 0x0161, 0x203A, 0x0153, 0x009D, 0x017E, 0x0178,
};

void sl_mysql_conv_init(struct sl_mysql_conv *c)
{
	memset(c, 0, sizeof *c);
}

void sl_mysql_conv_free(struct sl_mysql_conv *c)
{
	for (size_t i = 0; i < SL_MYSQL_CHARSETS; i++)
		if (c->cd[i])
			iconv_close((iconv_t)c->cd[i]);
	memset(c, 0, sizeof *c);
}

bool sl_utf8_valid(const unsigned char *p, size_t len, size_t *bad)
{
	size_t i = 0;

	while (i < len) {
		unsigned char c = p[i];
		size_t n;
		uint32_t cp, min;

		if (c < 0x80) {
			i++;
			continue;
		}
		if (c >= 0xc2 && c <= 0xdf) {
			n = 2; cp = c & 0x1f; min = 0x80;
		} else if (c >= 0xe0 && c <= 0xef) {
			n = 3; cp = c & 0x0f; min = 0x800;
		} else if (c >= 0xf0 && c <= 0xf4) {
			n = 4; cp = c & 0x07; min = 0x10000;
		} else {
			goto fail;
		}
		if (len - i < n)
			goto fail;
		for (size_t k = 1; k < n; k++) {
			if ((p[i + k] & 0xc0) != 0x80)
				goto fail;
			cp = cp << 6 | (p[i + k] & 0x3f);
		}
		if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
			goto fail;
		i += n;
	}
	return true;
fail:
	if (bad)
		*bad = i;
	return false;
}

/* The length of the character of at most three bytes that begins at p[i]
 * (the characters utf8mb3 holds), or 0 when none does. */
static size_t mb3_char(const unsigned char *p, size_t len, size_t i)
{
	size_t n = p[i] < 0x80 ? 1 : p[i] >= 0xc2 && p[i] <= 0xdf ? 2 : p[i] >= 0xe0 && p[i] <= 0xef ? 3 : 0;

	return n && len - i >= n && sl_utf8_valid(p + i, n, NULL) ? n : 0;
}

int sl_mysql_binary_member(const char *p, size_t len, struct sl_buf *out, bool *copied)
{
	const unsigned char *u = (const unsigned char *)p;
	size_t i = 0, n;

	*copied = false;
	while (i < len && (n = mb3_char(u, len, i)))
		i += n;
	if (i == len)
		return 0;
	*copied = true;
	if (sl_buf_append(out, p, i) < 0)
		return -1;
	/* one '?' a byte, as MariaDB replaces them: the four bytes of a
	 * character past U+FFFF give four */
	while (i < len) {
		if ((n = mb3_char(u, len, i))) {
			if (sl_buf_append(out, p + i, n) < 0)
				return -1;
			i += n;
		} else {
			if (sl_buf_putc(out, '?') < 0)
				return -1;
			i++;
		}
	}
	return 0;
}

static void put_utf8(unsigned char *o, size_t *n, uint32_t cp)
{
	if (cp < 0x80) {
		o[(*n)++] = (unsigned char)cp;
	} else if (cp < 0x800) {
		o[(*n)++] = (unsigned char)(0xc0 | cp >> 6);
		o[(*n)++] = (unsigned char)(0x80 | (cp & 0x3f));
	} else {
		o[(*n)++] = (unsigned char)(0xe0 | cp >> 12);
		o[(*n)++] = (unsigned char)(0x80 | ((cp >> 6) & 0x3f));
		o[(*n)++] = (unsigned char)(0x80 | (cp & 0x3f));
	}
}

static int from_latin1(const unsigned char *p, size_t len, struct sl_buf *out, char *err, size_t errlen)
{
	unsigned char *o;
	size_t n = 0;

	/* At most 3 bytes of UTF-8 per byte (U+20AC). */
	if (sl_buf_reserve(out, 3 * len) < 0) {
		snprintf(err, errlen, "out of memory converting %zu bytes of latin1 text", len);
		return -1;
	}
	o = (unsigned char *)out->data + out->len;
	for (size_t i = 0; i < len; i++) {
		unsigned char c = p[i];
		if (c < 0x80)
			o[n++] = c;
		else if (c < 0xa0)
			put_utf8(o, &n, latin1_80_9f[c - 0x80]);
		else
			put_utf8(o, &n, c);
	}
	out->len += n;
	out->data[out->len] = '\0';
	return 0;
}

static int from_iconv(struct sl_mysql_conv *c, const struct sl_mysql_charset *cs, const char *p, size_t len,
		      struct sl_buf *out, char *err, size_t errlen)
{
	iconv_t cd = (iconv_t)c->cd[cs->index];
	char *in = (char *)(uintptr_t)p;
	size_t inleft = len, start = out->len;

	if (!cd) {
		cd = iconv_open("UTF-8", cs->iconv_name);
		if (cd == (iconv_t)-1) {
			snprintf(err, errlen, "cannot convert charset %s: iconv_open(\"%s\"): %s", cs->name,
				 cs->iconv_name, strerror(errno));
			return -1;
		}
		c->cd[cs->index] = cd;
	}
	iconv(cd, NULL, NULL, NULL, NULL);  /* initial shift state */
	/* A character is at least one byte and at most 4 bytes of UTF-8; grow
	 * if a conversion ever writes more. */
	if (sl_buf_reserve(out, 4 * len + 4) < 0)
		goto oom;
	for (;;) {
		char *o = out->data + out->len;
		size_t oleft = out->alloc - out->len - 1, before = oleft;
		size_t rc = iconv(cd, inleft ? &in : NULL, &inleft, &o, &oleft);
		out->len += before - oleft;
		if (rc != (size_t)-1)
			break;  /* all converted: the charsets used here keep no shift state */
		if (errno == E2BIG) {
			if (sl_buf_reserve(out, 4 * inleft + 16) < 0)
				goto oom;
			continue;
		}
		snprintf(err, errlen, "invalid %s text: byte 0x%02x at offset %zu %s", cs->name,
			 inleft ? (unsigned)(unsigned char)*in : 0u, len - inleft,
			 errno == EINVAL ? "starts an incomplete character" : "does not convert to UTF-8");
		out->len = start;
		out->data[start] = '\0';
		return -1;
	}
	out->data[out->len] = '\0';
	return 0;
oom:
	snprintf(err, errlen, "out of memory converting %zu bytes of %s text", len, cs->name);
	if (!sl_buf_failed(out)) {
		out->len = start;
		if (out->data)
			out->data[start] = '\0';
	}
	return -1;
}

int sl_mysql_to_utf8(struct sl_mysql_conv *c, const struct sl_mysql_charset *cs, const char *p, size_t len,
		     struct sl_buf *out, bool *copied, char *err, size_t errlen)
{
	size_t bad;

	*copied = false;
	if (!cs) {
		if (!sl_utf8_valid((const unsigned char *)p, len, &bad)) {
			snprintf(err, errlen, "text of an unknown charset is not UTF-8 (byte 0x%02x at offset %zu)",
				 (unsigned)(unsigned char)p[bad], bad);
			return -1;
		}
		return 0;
	}
	switch (cs->kind) {
	case SL_CS_UTF8:
		return 0;
	case SL_CS_ASCII:
		for (size_t i = 0; i < len; i++)
			if ((unsigned char)p[i] >= 0x80) {
				snprintf(err, errlen, "invalid ascii text: byte 0x%02x at offset %zu",
					 (unsigned)(unsigned char)p[i], i);
				return -1;
			}
		return 0;
	case SL_CS_LATIN1:
		*copied = true;
		return from_latin1((const unsigned char *)p, len, out, err, errlen);
	case SL_CS_ICONV:
		*copied = true;
		return from_iconv(c, cs, p, len, out, err, errlen);
	default:
		snprintf(err, errlen, "charset %s has no conversion to UTF-8", cs->name);
		return -1;
	}
}

int sl_mysql_foreign_member(const char *p, size_t len, bool utf8, struct sl_buf *out, bool *copied)
{
	const unsigned char *u = (const unsigned char *)p;
	size_t i = 0;

	*copied = false;
	while (i < len && u[i] < 0x80)
		i++;
	if (i == len)
		return 0;
	*copied = true;
	if (sl_buf_append(out, p, i) < 0)
		return -1;
	while (i < len) {
		if (u[i] < 0x80) {
			if (sl_buf_putc(out, (char)u[i++]) < 0)
				return -1;
			continue;
		}
		if (sl_buf_putc(out, '?') < 0)
			return -1;
		i++;
		/* a UTF-8 character's continuation bytes belong to its '?' */
		while (utf8 && i < len && (u[i] & 0xc0) == 0x80)
			i++;
	}
	return 0;
}
