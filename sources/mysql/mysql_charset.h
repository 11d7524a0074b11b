/*
 * sources/mysql/mysql_charset.h: MySQL / MariaDB character sets, from the
 * collation ids the binlog's table map carries (or a charset name from the
 * catalog), and the conversion of text in them to UTF-8.
 *
 * What happens to the text of each character set (doc/types-mysql.md):
 *   utf8mb4, utf8mb3 (utf8)   already UTF-8: passed through, not copied
 *   binary (collation 63)     not text: BINARY, BLOB and the like are bytes;
 *                             ENUM and SET members: sl_mysql_binary_member
 *   latin1                    MySQL's latin1 is Windows-1252, with the five
 *                             bytes cp1252 leaves undefined (81 8D 8F 90 9D)
 *                             mapped to the C1 controls U+0081 ...: a table
 *   ascii                     bytes 00-7F as they are; another byte is an error
 *   ucs2, utf16, utf16le, utf32, latin2, latin5, latin7, greek, hebrew,
 *   cp850, cp852, cp866, cp1250, cp1251, cp1256, cp1257, koi8r, koi8u,
 *   macroman, armscii8, tis620, big5, gbk, gb2312, gb18030, sjis, cp932,
 *   ujis, eucjpms, euckr      converted with glibc's iconv (the charset's
 *                             standard name: ucs2 is UCS-2BE, sjis
 *                             SHIFT_JIS, ...); bytes iconv cannot convert are
 *                             an error
 *   dec8, hp8, swe7, keybcs2, macce, geostd8
 *                             unsupported: sl_mysql_type_map (row_image.h)
 *                             types such columns as bytes, written as stored;
 *                             ENUM and SET members: sl_mysql_foreign_member
 * Unknown collation ids (0, or an id this table lacks) have no charset: the
 * row decoder then takes the bytes as UTF-8 and checks that they are.
 *
 * The collation table holds MariaDB 10.11's ids (information_schema
 * COLLATION_CHARACTER_SET_APPLICABILITY, including the uca1400 ranges) and
 * MySQL 8.0's own (76, 248-250 gb18030, 255-323 utf8mb4_0900_*).
 */
#ifndef SLUICE_SOURCES_MYSQL_MYSQL_CHARSET_H
#define SLUICE_SOURCES_MYSQL_MYSQL_CHARSET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"

#define SL_MYSQL_COLLATION_BINARY 63

enum sl_mysql_cs_kind {
	SL_CS_UTF8 = 1,        /* utf8mb3, utf8mb4 */
	SL_CS_BINARY,          /* bytes, not text */
	SL_CS_LATIN1,          /* MySQL's latin1 (cp1252): a table */
	SL_CS_ASCII,
	SL_CS_ICONV,           /* converted by iconv from iconv_name */
	SL_CS_UNSUPPORTED,     /* kept as bytes */
};

struct sl_mysql_charset {
	const char *name;        /* MySQL's name: "utf8mb4", "latin1", ... */
	const char *iconv_name;  /* SL_CS_ICONV: glibc's name */
	uint8_t kind;            /* enum sl_mysql_cs_kind */
	uint8_t index;           /* 0 .. SL_MYSQL_CHARSETS - 1 */
};

#define SL_MYSQL_CHARSETS 41

/* The charset of a collation id, or NULL if the id is unknown. */
const struct sl_mysql_charset *sl_mysql_charset_of_collation(uint32_t collation);
/* The charset of a name as information_schema shows it ("utf8" and
 * "utf8mb3" are the same), or NULL. */
const struct sl_mysql_charset *sl_mysql_charset_by_name(const char *name);

/* A converter: the iconv descriptors it opened, lazily, one per charset. */
struct sl_mysql_conv {
	void *cd[SL_MYSQL_CHARSETS];   /* iconv_t, NULL until opened */
};

void sl_mysql_conv_init(struct sl_mysql_conv *c);
void sl_mysql_conv_free(struct sl_mysql_conv *c);

/* Converts len bytes of text in charset cs (NULL: unknown) to UTF-8.
 * When the bytes are UTF-8 already (utf8mb3, utf8mb4, ascii, and unknown
 * charsets whose bytes are valid UTF-8) nothing is copied and *copied is
 * false; otherwise the UTF-8 text is appended to out and *copied is true.
 * Returns 0, or -1 with err saying what is wrong (invalid or unconvertible
 * bytes at an offset, an iconv that cannot be opened, out of memory, a
 * binary or unsupported charset, which has no text). */
int sl_mysql_to_utf8(struct sl_mysql_conv *c, const struct sl_mysql_charset *cs, const char *p, size_t len,
		     struct sl_buf *out, bool *copied, char *err, size_t errlen);

/* The text of an ENUM or SET member (or value) of the binary charset:
 * bytes, which an Avro string cannot hold when they are not UTF-8.
 * UTF-8 characters of up to three bytes (U+0000 ... U+FFFF but the
 * surrogates) are kept as they are; every other byte becomes '?', which is
 * what MariaDB's catalog (information_schema COLUMN_TYPE, SHOW CREATE TABLE,
 * utf8mb3) shows for the member.  When nothing is replaced nothing is
 * copied and *copied is false; otherwise the text is appended to out and
 * *copied is true.  So the backfill (the value's bytes), the binlog with
 * binlog_row_metadata=FULL (the member's bytes) and without it (the
 * catalog's string) give the same text.  Returns 0, or -1 when out ran
 * out of memory. */
int sl_mysql_binary_member(const char *p, size_t len, struct sl_buf *out, bool *copied);

/* The text of an ENUM or SET member in a charset sluice does not convert
 * (dec8, hp8, keybcs2, macce, geostd8: ASCII below 0x80): ASCII as it is,
 * and '?' for each other character, a byte of p/len or, with utf8, a UTF-8
 * character (the catalog's member, which the server converted).  So the
 * backfill and the binlog with binlog_row_metadata=FULL (the member's
 * bytes) and without it (the catalog's string) give the same text.  The
 * same contract as sl_mysql_binary_member otherwise. */
int sl_mysql_foreign_member(const char *p, size_t len, bool utf8, struct sl_buf *out, bool *copied);

/* True if p/len is valid UTF-8 (no overlong forms, surrogates or code points
 * past U+10FFFF).  *bad gets the offset of the first invalid byte. */
bool sl_utf8_valid(const unsigned char *p, size_t len, size_t *bad);

#endif
