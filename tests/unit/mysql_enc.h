/*
 * tests/unit/mysql_enc.h: a test-side encoder of binlog events, row values
 * and MySQL binary JSON, written from the documented formats and
 * independently of the decoder in sources/mysql/ (it shares none of its
 * code), so that the tests check the decoder against a second reading of
 * the formats.  Captured bytes from a real MariaDB 10.11
 * (tests/unit/data/mariadb-10.11/) check both readings against the server.
 *
 * Every function appends to a struct sl_buf and aborts the test program if
 * the buffer fails.
 */
#ifndef SLUICE_TESTS_UNIT_MYSQL_ENC_H
#define SLUICE_TESTS_UNIT_MYSQL_ENC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"

/* Little-endian integers of n bytes, big-endian ones, packed integers. */
void me_le(struct sl_buf *b, uint64_t v, int n);
void me_be(struct sl_buf *b, uint64_t v, int n);
void me_packed(struct sl_buf *b, uint64_t v);
void me_bytes(struct sl_buf *b, const void *p, size_t n);
/* A packed length, then the bytes. */
void me_lenstr(struct sl_buf *b, const char *s);

/* A whole event: the 19-byte header (event_size computed, log_pos = start +
 * size, or 0 when start is 0), the body, and a CRC-32 when crc. */
void me_event(struct sl_buf *out, uint8_t type, uint32_t timestamp, uint32_t server_id, uint64_t start,
	      uint16_t flags, const void *body, size_t len, bool crc);

/* The body of a FORMAT_DESCRIPTION: MariaDB 10.11's post-header table
 * (mariadb) or MySQL 8.0's, and the checksum algorithm byte; the event
 * itself then ends in a checksum (or 4 zero bytes without crc, as servers
 * write it). */
void me_fde_body(struct sl_buf *b, bool mariadb, uint8_t checksum_alg);
/* A complete FORMAT_DESCRIPTION event at position 4. */
void me_fde_event(struct sl_buf *out, bool mariadb, bool crc);

/* Row values, as a rows event image holds them. */
/* DECIMAL(p,s) of the text "-123.45" (at most s fraction digits). */
void me_decimal(struct sl_buf *b, const char *text, int p, int s);
void me_date(struct sl_buf *b, int y, int m, int d);
void me_datetime2(struct sl_buf *b, int y, int m, int d, int hh, int mi, int ss, uint32_t us, int fsp);
void me_timestamp2(struct sl_buf *b, uint32_t sec, uint32_t us, int fsp);
void me_time2(struct sl_buf *b, bool neg, int hh, int mi, int ss, uint32_t us, int fsp);

/* ---- MySQL binary JSON ---- */
struct me_json {
	uint8_t type;           /* the binary JSON type byte */
	struct sl_buf v;        /* the value's bytes (for inline types: the number, 2 or 4 bytes) */
};

struct me_json *mj_literal(int which);   /* 0 null, 1 true, 2 false */
struct me_json *mj_int(uint8_t type, uint64_t v);   /* 0x05..0x0a */
struct me_json *mj_double(double d);
struct me_json *mj_string(const char *s, size_t n);
struct me_json *mj_opaque(uint8_t mysql_type, const void *p, size_t n);
/* Takes ownership of the elements (and frees them). */
struct me_json *mj_array(bool large, int n, struct me_json **elems);
struct me_json *mj_object(bool large, int n, const char *const *keys, struct me_json **vals);
/* The document (type byte and value); frees j. */
void mj_doc(struct sl_buf *out, struct me_json *j);

#endif
