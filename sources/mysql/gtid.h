/*
 * sources/mysql/gtid.h: global transaction ids of MariaDB and MySQL, as the
 * binlog source keeps, resumes from and reports them.
 *
 * MariaDB.  A GTID is "domain-server-seq" (three unsigned decimals: 32, 32
 * and 64 bits), e.g. 0-1-20.  A *position* (@@gtid_slave_pos,
 * @@gtid_current_pos, what @slave_connect_state takes) holds the last GTID
 * applied in each replication domain, at most one per domain, written
 * comma-separated: "0-1-20,1-2-5".  Within a domain the sequence number
 * grows with each transaction, so the position contains every GTID of the
 * domain whose seq is at most the one it holds; the server id only says
 * which server wrote the transaction.
 *
 * MySQL.  A GTID is "uuid:gno" (the source server's UUID and a transaction
 * number from 1 to 2^63-1).  A *GTID set* (@@gtid_executed,
 * COM_BINLOG_DUMP_GTID's set) lists, per UUID, intervals of numbers:
 * "3e11fa47-71ca-11e1-9e33-c80aa9429562:1-5:7-9,4f...:1-3".  MySQL prints
 * it with a newline after each comma; parsing accepts any white space
 * around the items.  Tagged GTIDs of MySQL 8.4 ("uuid:tag:1-5") are not
 * supported: parsing them is an error that says so.
 *
 * Formatting is canonical: MariaDB positions sorted by domain; MySQL sets
 * with lowercase UUIDs in byte order and their intervals sorted, merged and
 * written "a-b" (or "a" for one number), with no white space.  So two equal
 * values format to the same text.
 *
 * Memory: each position or set owns its arrays (init/clear/free).  Adding a
 * GTID allocates only when an array must grow.  Functions that can fail
 * return 0, or -1 with a message in err (a parse error quoting at most 64
 * bytes of the text, or out of memory).  A failed call leaves the value as
 * it was, except a failed parse, which leaves it empty.
 */
#ifndef SLUICE_SOURCES_MYSQL_GTID_H
#define SLUICE_SOURCES_MYSQL_GTID_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"

/* How two positions or sets relate (sl_mariadb_gtid_pos_compare,
 * sl_mysql_gtid_set_compare). */
enum sl_gtid_order {
	SL_GTID_EQUAL = 0,
	SL_GTID_BEFORE,     /* a is contained in b and differs from it: b is later */
	SL_GTID_AFTER,      /* b is contained in a and differs from it: a is later */
	SL_GTID_DIVERGED,   /* each has a transaction the other lacks */
};

/* ---- MariaDB ---- */

struct sl_mariadb_gtid {
	uint32_t domain;
	uint32_t server;
	uint64_t seq;
};

struct sl_mariadb_gtid_pos {
	struct sl_mariadb_gtid *v;   /* sorted by domain, one per domain (owned) */
	size_t n, alloc;
};

/* Parses exactly one "domain-server-seq".  Returns 0 or -1 (err set). */
int sl_mariadb_gtid_parse(const char *s, size_t len, struct sl_mariadb_gtid *out, char *err, size_t errlen);

void sl_mariadb_gtid_pos_init(struct sl_mariadb_gtid_pos *p);
void sl_mariadb_gtid_pos_clear(struct sl_mariadb_gtid_pos *p);   /* empty, memory kept */
void sl_mariadb_gtid_pos_free(struct sl_mariadb_gtid_pos *p);    /* empty, memory freed */
/* Parses a comma-separated list (white space around items allowed; "" is
 * the empty position).  Two GTIDs of one domain are an error: a position
 * holds one per domain. */
int sl_mariadb_gtid_pos_parse(struct sl_mariadb_gtid_pos *p, const char *s, size_t len, char *err,
			      size_t errlen);
/* Appends the canonical text to out.  Returns 0, or -1 if out failed. */
int sl_mariadb_gtid_pos_format(const struct sl_mariadb_gtid_pos *p, struct sl_buf *out);
/* Records g as the last GTID of its domain (replacing the domain's entry,
 * whatever its seq: the binlog order is the truth). */
int sl_mariadb_gtid_pos_add(struct sl_mariadb_gtid_pos *p, const struct sl_mariadb_gtid *g, char *err,
			    size_t errlen);
/* The entry of a domain, or NULL. */
const struct sl_mariadb_gtid *sl_mariadb_gtid_pos_get(const struct sl_mariadb_gtid_pos *p, uint32_t domain);
/* True if the position covers g: its domain's entry has seq >= g->seq. */
bool sl_mariadb_gtid_pos_contains(const struct sl_mariadb_gtid_pos *p, const struct sl_mariadb_gtid *g);
/* Compares domain by domain by seq (a missing domain is before any seq). */
enum sl_gtid_order sl_mariadb_gtid_pos_compare(const struct sl_mariadb_gtid_pos *a,
					       const struct sl_mariadb_gtid_pos *b);

/* ---- MySQL ---- */

#define SL_MYSQL_GNO_MAX INT64_MAX   /* the largest transaction number MySQL uses */

struct sl_mysql_gtid_ival {
	uint64_t first, last;        /* inclusive, 1 <= first <= last <= SL_MYSQL_GNO_MAX */
};

struct sl_mysql_gtid_sid {
	unsigned char uuid[16];
	struct sl_mysql_gtid_ival *iv;   /* sorted, disjoint and not adjacent (owned) */
	size_t n, alloc;
};

struct sl_mysql_gtid_set {
	struct sl_mysql_gtid_sid *sids;  /* sorted by uuid bytes, none empty (owned) */
	size_t n, alloc;
};

/* "3e11fa47-71ca-11e1-9e33-c80aa9429562" (either case) <-> 16 bytes.
 * Formatting writes 36 lowercase characters and a NUL. */
int sl_mysql_uuid_parse(const char *s, size_t len, unsigned char out[static 16]);
void sl_mysql_uuid_format(const unsigned char uuid[static 16], char out[static 37]);

void sl_mysql_gtid_set_init(struct sl_mysql_gtid_set *s);
void sl_mysql_gtid_set_clear(struct sl_mysql_gtid_set *s);
void sl_mysql_gtid_set_free(struct sl_mysql_gtid_set *s);
/* Parses a GTID set ("" is the empty set).  Intervals may overlap or come
 * in any order, and a UUID may appear more than once: the result is their
 * union. */
int sl_mysql_gtid_set_parse(struct sl_mysql_gtid_set *s, const char *text, size_t len, char *err,
			    size_t errlen);
/* Appends the canonical text to out.  Returns 0, or -1 if out failed. */
int sl_mysql_gtid_set_format(const struct sl_mysql_gtid_set *s, struct sl_buf *out);
/* Adds one GTID, or the interval first..last, of uuid.  Numbers outside
 * 1..SL_MYSQL_GNO_MAX (or first > last) are an error. */
int sl_mysql_gtid_set_add(struct sl_mysql_gtid_set *s, const unsigned char uuid[static 16], uint64_t gno,
			  char *err, size_t errlen);
int sl_mysql_gtid_set_add_interval(struct sl_mysql_gtid_set *s, const unsigned char uuid[static 16],
				   uint64_t first, uint64_t last, char *err, size_t errlen);
/* The binary form of a GTID set that COM_BINLOG_DUMP_GTID sends and
 * PREVIOUS_GTIDS events carry (little-endian): n_sids u64, then per UUID
 * the 16 bytes, n_intervals u64 and per interval start u64 and end u64
 * (end exclusive).  Encoding appends to out (0, or -1 if out failed);
 * decoding replaces s (0, or -1 with err for bytes that are not a set, or
 * the tagged form of MySQL 8.4). */
int sl_mysql_gtid_set_encode(const struct sl_mysql_gtid_set *s, struct sl_buf *out);
int sl_mysql_gtid_set_decode(struct sl_mysql_gtid_set *s, const unsigned char *p, size_t len, char *err,
			     size_t errlen);
bool sl_mysql_gtid_set_contains(const struct sl_mysql_gtid_set *s, const unsigned char uuid[static 16],
				uint64_t gno);
/* True if every GTID of a is in b. */
bool sl_mysql_gtid_set_is_subset(const struct sl_mysql_gtid_set *a, const struct sl_mysql_gtid_set *b);
enum sl_gtid_order sl_mysql_gtid_set_compare(const struct sl_mysql_gtid_set *a,
					     const struct sl_mysql_gtid_set *b);

#endif
