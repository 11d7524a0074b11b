/*
 * tests/unit/test_mysql_binlog.c: binlog event framing (sources/mysql/
 * binlog_event.c) on events built byte by byte by the test-side encoder
 * (mysql_enc.c): the common header, checksums, format description, rotate,
 * query, XID, GTIDs of both servers, GTID lists, heartbeats, annotate, XA,
 * incidents, events refused, table maps with every optional metadata field,
 * rows event headers V1 and V2.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common/buf.h"
#include "sources/mysql/binlog_event.h"
#include "sources/mysql/gtid.h"
#include "sources/mysql/mysql_charset.h"
#include "tests/unit/mysql_enc.h"

static struct sl_buf ev_buf;

static int setup(void **state)
{
	(void)state;
	sl_buf_init(&ev_buf, 0);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	sl_buf_free(&ev_buf);
	return 0;
}

/* A reader that has seen a MariaDB (or MySQL) format description. */
static void reader_with_fde(struct sl_binlog_reader *r, bool mariadb, bool crc)
{
	struct sl_buf b;
	struct sl_binlog_event ev;
	char err[256];

	sl_buf_init(&b, 0);
	sl_binlog_reader_init(r, crc ? SL_BL_CHECKSUM_CRC32 : SL_BL_CHECKSUM_OFF, "mb.000001");
	me_fde_event(&b, mariadb, crc);
	if (sl_binlog_decode(r, (const unsigned char *)b.data, b.len, &ev, err, sizeof err) != 0)
		fail_msg("format description: %s", err);
	sl_buf_free(&b);
}

/* Builds event (type, body) at position start and decodes it with r. */
static int decode(struct sl_binlog_reader *r, uint8_t type, uint64_t start, const struct sl_buf *body,
		  bool crc, struct sl_binlog_event *ev, char *err, size_t errlen)
{
	sl_buf_reset(&ev_buf);
	me_event(&ev_buf, type, 1700000123, 7, start, 0, body->data, body->len, crc);
	return sl_binlog_decode(r, (const unsigned char *)ev_buf.data, ev_buf.len, ev, err, errlen);
}

static void test_fde(void **state)
{
	struct sl_binlog_reader r;
	struct sl_binlog_event ev;
	struct sl_buf b;
	char err[256];

	(void)state;
	sl_buf_init(&b, 0);
	sl_binlog_reader_init(&r, SL_BL_CHECKSUM_OFF, NULL);
	me_fde_event(&b, true, true);
	assert_int_equal(sl_binlog_decode(&r, (const unsigned char *)b.data, b.len, &ev, err, sizeof err), 0);
	assert_int_equal(ev.kind, SL_BLK_FORMAT_DESCRIPTION);
	assert_int_equal(ev.h.type, 15);
	assert_int_equal(ev.h.timestamp, 1700000000);
	assert_int_equal(ev.h.server_id, 1);
	assert_int_equal(ev.h.event_size, b.len);
	assert_int_equal(ev.h.log_pos, 4 + b.len);
	assert_int_equal(ev.start, 4);
	assert_int_equal(ev.end, 4 + b.len);
	assert_int_equal(ev.u.fde.binlog_version, 4);
	assert_string_equal(ev.u.fde.server_version, "10.11.19-MariaDB-log");
	assert_int_equal(ev.u.fde.create_timestamp, 1700000000);
	assert_int_equal(ev.u.fde.header_len, 19);
	assert_int_equal(ev.u.fde.n_post_header, 171);
	assert_int_equal(ev.u.fde.post_header_len[SL_BL_QUERY - 1], 13);
	assert_int_equal(ev.u.fde.post_header_len[SL_BL_MARIADB_GTID - 1], 19);
	assert_int_equal(ev.u.fde.checksum_alg, SL_BL_CHECKSUM_CRC32);
	assert_true(ev.u.fde.mariadb);
	assert_true(r.have_fde);
	assert_int_equal(r.checksum, SL_BL_CHECKSUM_CRC32);
	assert_int_equal(ev.body_len, b.len - 19 - 4);

	/* MySQL 8.0 without checksums: the 4 trailing bytes are still there */
	sl_buf_reset(&b);
	sl_binlog_reader_init(&r, SL_BL_CHECKSUM_CRC32, NULL);
	me_fde_event(&b, false, false);
	assert_int_equal(sl_binlog_decode(&r, (const unsigned char *)b.data, b.len, &ev, err, sizeof err), 0);
	assert_string_equal(ev.u.fde.server_version, "8.0.36");
	assert_false(ev.u.fde.mariadb);
	assert_int_equal(ev.u.fde.n_post_header, 42);
	assert_int_equal(ev.u.fde.checksum_alg, SL_BL_CHECKSUM_OFF);
	assert_int_equal(r.checksum, SL_BL_CHECKSUM_OFF);
	assert_int_equal(ev.body_len, b.len - 19 - 4);

	/* a binlog version other than 4 */
	b.data[19] = 3;
	assert_int_equal(sl_binlog_decode(&r, (const unsigned char *)b.data, b.len, &ev, err, sizeof err), -1);
	assert_non_null(strstr(err, "binlog version is not 4"));
	sl_buf_free(&b);
}

static void test_rotate_and_artificial(void **state)
{
	struct sl_binlog_reader r;
	struct sl_binlog_event ev;
	struct sl_buf b;
	char err[256];

	(void)state;
	sl_buf_init(&b, 0);
	/* the replication stream's first event: artificial, before any format
	 * description, with a checksum because the connection asked for one */
	sl_binlog_reader_init(&r, SL_BL_CHECKSUM_CRC32, NULL);
	me_le(&b, 4, 8);
	me_bytes(&b, "mb.000002", 9);
	sl_buf_reset(&ev_buf);
	me_event(&ev_buf, SL_BL_ROTATE, 0, 1, 0, SL_BL_F_ARTIFICIAL, b.data, b.len, true);
	assert_int_equal(sl_binlog_decode(&r, (const unsigned char *)ev_buf.data, ev_buf.len, &ev, err, sizeof err), 0);
	assert_int_equal(ev.kind, SL_BLK_ROTATE);
	assert_int_equal(ev.h.flags, SL_BL_F_ARTIFICIAL);
	assert_int_equal(ev.h.log_pos, 0);
	assert_int_equal(ev.start, 0);
	assert_int_equal(ev.u.rotate.position, 4);
	assert_int_equal(ev.u.rotate.file_len, 9);
	assert_memory_equal(ev.u.rotate.file, "mb.000002", 9);
	assert_string_equal(r.file, "mb.000002");

	/* other events need a format description first */
	sl_buf_reset(&b);
	me_le(&b, 42, 8);
	assert_int_equal(decode(&r, SL_BL_XID, 100, &b, true, &ev, err, sizeof err), -1);
	assert_non_null(strstr(err, "no FORMAT_DESCRIPTION event came before it"));

	/* an empty or NUL-bearing file name is malformed */
	reader_with_fde(&r, true, false);
	sl_buf_reset(&b);
	me_le(&b, 4, 8);
	assert_int_equal(decode(&r, SL_BL_ROTATE, 500, &b, false, &ev, err, sizeof err), -1);
	assert_non_null(strstr(err, "bad file name"));
	me_bytes(&b, "a\0b", 3);
	assert_int_equal(decode(&r, SL_BL_ROTATE, 500, &b, false, &ev, err, sizeof err), -1);
	sl_buf_free(&b);
}

static void test_query_xid(void **state)
{
	struct sl_binlog_reader r;
	struct sl_binlog_event ev;
	struct sl_buf b;
	char err[256];
	static const unsigned char status[] = { 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x20, 0x00, 0xa0, 0x55 };
	const char *sql = "CREATE TABLE t (id INT PRIMARY KEY)";

	(void)state;
	reader_with_fde(&r, true, true);
	sl_buf_init(&b, 0);
	me_le(&b, 4242, 4);               /* thread id */
	me_le(&b, 3, 4);                  /* exec time */
	me_le(&b, 4, 1);                  /* db length */
	me_le(&b, 1050, 2);               /* error code */
	me_le(&b, sizeof status, 2);      /* status vars length */
	me_bytes(&b, status, sizeof status);
	me_bytes(&b, "shop", 5);          /* with its NUL */
	me_bytes(&b, sql, strlen(sql));
	assert_int_equal(decode(&r, SL_BL_QUERY, 1000, &b, true, &ev, err, sizeof err), 0);
	assert_int_equal(ev.kind, SL_BLK_QUERY);
	assert_int_equal(ev.u.query.thread_id, 4242);
	assert_int_equal(ev.u.query.exec_time, 3);
	assert_int_equal(ev.u.query.error_code, 1050);
	assert_int_equal(ev.u.query.status_vars_len, sizeof status);
	assert_memory_equal(ev.u.query.status_vars, status, sizeof status);
	assert_int_equal(ev.u.query.db_len, 4);
	assert_string_equal(ev.u.query.db, "shop");
	assert_int_equal(ev.u.query.sql_len, strlen(sql));
	assert_memory_equal(ev.u.query.sql, sql, strlen(sql));
	assert_int_equal(ev.start, 1000);

	/* status vars longer than the event */
	b.data[11] = 0x7f;
	assert_int_equal(decode(&r, SL_BL_QUERY, 1000, &b, true, &ev, err, sizeof err), -1);
	assert_non_null(strstr(err, "malformed QUERY event at mb.000001:1000: truncated"));
	/* BEGIN, without a database */
	sl_buf_reset(&b);
	me_le(&b, 1, 4); me_le(&b, 0, 4); me_le(&b, 0, 1); me_le(&b, 0, 2); me_le(&b, 0, 2);
	me_bytes(&b, "\0BEGIN", 6);
	assert_int_equal(decode(&r, SL_BL_QUERY, 1000, &b, true, &ev, err, sizeof err), 0);
	assert_int_equal(ev.u.query.db_len, 0);
	assert_int_equal(ev.u.query.sql_len, 5);
	assert_memory_equal(ev.u.query.sql, "BEGIN", 5);
	/* the database name must end in NUL */
	b.data[13] = 'x';
	assert_int_equal(decode(&r, SL_BL_QUERY, 1000, &b, true, &ev, err, sizeof err), -1);
	assert_non_null(strstr(err, "not NUL-terminated"));

	sl_buf_reset(&b);
	me_le(&b, UINT64_C(0x1122334455667788), 8);
	assert_int_equal(decode(&r, SL_BL_XID, 2000, &b, true, &ev, err, sizeof err), 0);
	assert_int_equal(ev.kind, SL_BLK_XID);
	assert_true(ev.u.xid == UINT64_C(0x1122334455667788));
	sl_buf_reset(&b);
	me_le(&b, 1, 7);
	assert_int_equal(decode(&r, SL_BL_XID, 2000, &b, true, &ev, err, sizeof err), -1);
	sl_buf_free(&b);
}

static void test_mariadb_gtid(void **state)
{
	/* MariaDB's documentation example: GTID 0-10124-9883, DDL, with CRC32 */
	static const unsigned char doc[] = {
		0xeb, 0xcc, 0x26, 0x5a, 0xa2, 0x8c, 0x27, 0x00, 0x00, 0x2a, 0x00, 0x00, 0x00, 0x17, 0x02, 0x00,
		0x00, 0x08, 0x00, 0x9b, 0x26, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x29,
		0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x8e, 0x66, 0x9a, 0x30,
	};
	struct sl_binlog_reader r;
	struct sl_binlog_event ev;
	struct sl_buf b;
	char err[256];

	(void)state;
	reader_with_fde(&r, true, true);
	assert_int_equal(sl_binlog_decode(&r, doc, sizeof doc, &ev, err, sizeof err), 0);
	assert_int_equal(ev.kind, SL_BLK_MARIADB_GTID);
	assert_int_equal(ev.u.mariadb_gtid.seq_no, 9883);
	assert_int_equal(ev.u.mariadb_gtid.domain_id, 0);
	assert_int_equal(ev.u.mariadb_gtid.server_id, 10124);
	assert_int_equal(ev.u.mariadb_gtid.flags, SL_MARIADB_FL_DDL | SL_MARIADB_FL_ALLOW_PARALLEL |
			 SL_MARIADB_FL_STANDALONE);
	assert_false(ev.u.mariadb_gtid.has_commit_id);
	assert_false(ev.u.mariadb_gtid.has_xid);
	assert_int_equal(ev.u.mariadb_gtid.flags_extra, 0);
	assert_int_equal(ev.end, 535);

	sl_buf_init(&b, 0);
	/* group commit id */
	me_le(&b, 20, 8); me_le(&b, 3, 4); me_le(&b, 0x0e, 1); me_le(&b, 777, 8);
	assert_int_equal(decode(&r, SL_BL_MARIADB_GTID, 300, &b, true, &ev, err, sizeof err), 0);
	assert_int_equal(ev.u.mariadb_gtid.seq_no, 20);
	assert_int_equal(ev.u.mariadb_gtid.domain_id, 3);
	assert_int_equal(ev.u.mariadb_gtid.server_id, 7);
	assert_true(ev.u.mariadb_gtid.has_commit_id);
	assert_int_equal(ev.u.mariadb_gtid.commit_id, 777);
	/* truncated commit id */
	b.len -= 2;
	assert_int_equal(decode(&r, SL_BL_MARIADB_GTID, 300, &b, true, &ev, err, sizeof err), -1);

	/* a prepared XA transaction with extra flags (multi-engine), as 10.11
	 * writes for XA PREPARE */
	sl_buf_reset(&b);
	me_le(&b, 26, 8); me_le(&b, 0, 4); me_le(&b, 0x4c, 1);
	me_le(&b, 1, 4); me_le(&b, 2, 1); me_le(&b, 1, 1); me_bytes(&b, "x1q", 3);
	me_le(&b, SL_MARIADB_FLX_MULTI_ENGINE, 1); me_le(&b, 2, 1);
	assert_int_equal(decode(&r, SL_BL_MARIADB_GTID, 300, &b, true, &ev, err, sizeof err), 0);
	assert_true(ev.u.mariadb_gtid.has_xid);
	assert_int_equal(ev.u.mariadb_gtid.flags & SL_MARIADB_FL_PREPARED_XA, SL_MARIADB_FL_PREPARED_XA);
	assert_int_equal(ev.u.mariadb_gtid.xid.format_id, 1);
	assert_int_equal(ev.u.mariadb_gtid.xid.gtrid_len, 2);
	assert_int_equal(ev.u.mariadb_gtid.xid.bqual_len, 1);
	assert_memory_equal(ev.u.mariadb_gtid.xid.data, "x1q", 3);
	assert_int_equal(ev.u.mariadb_gtid.flags_extra, SL_MARIADB_FLX_MULTI_ENGINE);
	assert_int_equal(ev.u.mariadb_gtid.extra_engines, 2);
	/* an xid that claims more bytes than there are */
	b.data[17] = 60;
	assert_int_equal(decode(&r, SL_BL_MARIADB_GTID, 300, &b, true, &ev, err, sizeof err), -1);
	b.data[17] = 65;
	assert_int_equal(decode(&r, SL_BL_MARIADB_GTID, 300, &b, true, &ev, err, sizeof err), -1);
	assert_non_null(strstr(err, "longer than 64"));

	/* COMMIT ALTER: padding, then flags_extra and the start-alter seq_no */
	sl_buf_reset(&b);
	me_le(&b, 40, 8); me_le(&b, 1, 4); me_le(&b, 0x29, 1); me_le(&b, 0, 6);
	me_le(&b, SL_MARIADB_FLX_COMMIT_ALTER, 1); me_le(&b, 39, 8);
	assert_int_equal(decode(&r, SL_BL_MARIADB_GTID, 300, &b, true, &ev, err, sizeof err), 0);
	assert_int_equal(ev.u.mariadb_gtid.flags_extra, SL_MARIADB_FLX_COMMIT_ALTER);
	assert_int_equal(ev.u.mariadb_gtid.sa_seq_no, 39);
	b.len -= 3;
	assert_int_equal(decode(&r, SL_BL_MARIADB_GTID, 300, &b, true, &ev, err, sizeof err), -1);
	assert_non_null(strstr(err, "truncated extra flags"));
	sl_buf_free(&b);
}

static void test_gtid_list(void **state)
{
	struct sl_binlog_reader r;
	struct sl_binlog_event ev;
	struct sl_mariadb_gtid g;
	struct sl_buf b;
	char err[256];

	(void)state;
	reader_with_fde(&r, true, true);
	sl_buf_init(&b, 0);
	me_le(&b, 2 | (UINT32_C(1) << 28), 4);
	me_le(&b, 0, 4); me_le(&b, 1, 4); me_le(&b, 23, 8);
	me_le(&b, 5, 4); me_le(&b, 9, 4); me_le(&b, UINT64_MAX, 8);
	assert_int_equal(decode(&r, SL_BL_MARIADB_GTID_LIST, 256, &b, true, &ev, err, sizeof err), 0);
	assert_int_equal(ev.kind, SL_BLK_MARIADB_GTID_LIST);
	assert_int_equal(ev.u.gtid_list.count, 2);
	assert_int_equal(ev.u.gtid_list.flags, 1);
	sl_binlog_gtid_list_get(&ev.u.gtid_list, 0, &g);
	assert_int_equal(g.domain, 0);
	assert_int_equal(g.server, 1);
	assert_int_equal(g.seq, 23);
	sl_binlog_gtid_list_get(&ev.u.gtid_list, 1, &g);
	assert_int_equal(g.domain, 5);
	assert_int_equal(g.server, 9);
	assert_true(g.seq == UINT64_MAX);
	b.data[0] = 3;  /* claims 3 entries */
	assert_int_equal(decode(&r, SL_BL_MARIADB_GTID_LIST, 256, &b, true, &ev, err, sizeof err), -1);
	sl_buf_free(&b);
}

static void test_mysql_gtid(void **state)
{
	static const unsigned char sid[16] = { 0x3e, 0x11, 0xfa, 0x47, 0x71, 0xca, 0x11, 0xe1,
					       0x9e, 0x33, 0xc8, 0x0a, 0xa9, 0x42, 0x95, 0x62 };
	struct sl_binlog_reader r;
	struct sl_binlog_event ev;
	struct sl_buf b;
	char err[256], u[37];

	(void)state;
	reader_with_fde(&r, false, true);
	sl_buf_init(&b, 0);
	/* 5.6 layout: flags, sid, gno */
	me_le(&b, 1, 1); me_bytes(&b, sid, 16); me_le(&b, 42, 8);
	assert_int_equal(decode(&r, SL_BL_GTID, 120, &b, true, &ev, err, sizeof err), 0);
	assert_int_equal(ev.kind, SL_BLK_MYSQL_GTID);
	assert_false(ev.u.mysql_gtid.anonymous);
	assert_int_equal(ev.u.mysql_gtid.flags, 1);
	sl_mysql_uuid_format(ev.u.mysql_gtid.sid, u);
	assert_string_equal(u, "3e11fa47-71ca-11e1-9e33-c80aa9429562");
	assert_int_equal(ev.u.mysql_gtid.gno, 42);
	assert_false(ev.u.mysql_gtid.has_logical_clock);
	/* 8.0: logical clock, commit timestamps (original differs), length */
	me_le(&b, 2, 1); me_le(&b, 10, 8); me_le(&b, 11, 8);
	me_le(&b, UINT64_C(1700000000123456) | (UINT64_C(1) << 55), 7);
	me_le(&b, UINT64_C(1700000000000001), 7);
	me_packed(&b, 70000);
	me_le(&b, 80036, 4);  /* server version, ignored */
	assert_int_equal(decode(&r, SL_BL_GTID, 120, &b, true, &ev, err, sizeof err), 0);
	assert_true(ev.u.mysql_gtid.has_logical_clock);
	assert_int_equal(ev.u.mysql_gtid.last_committed, 10);
	assert_int_equal(ev.u.mysql_gtid.sequence_number, 11);
	assert_true(ev.u.mysql_gtid.has_commit_ts);
	assert_true(ev.u.mysql_gtid.immediate_commit_ts == UINT64_C(1700000000123456));
	assert_true(ev.u.mysql_gtid.original_commit_ts == UINT64_C(1700000000000001));
	assert_true(ev.u.mysql_gtid.has_tx_length);
	assert_int_equal(ev.u.mysql_gtid.tx_length, 70000);
	/* the original timestamp is the immediate one when bit 55 is clear */
	sl_buf_reset(&b);
	me_le(&b, 0, 1); me_bytes(&b, sid, 16); me_le(&b, 43, 8);
	me_le(&b, 2, 1); me_le(&b, 0, 8); me_le(&b, 1, 8); me_le(&b, 99, 7);
	assert_int_equal(decode(&r, SL_BL_GTID, 120, &b, true, &ev, err, sizeof err), 0);
	assert_int_equal(ev.u.mysql_gtid.original_commit_ts, 99);
	assert_false(ev.u.mysql_gtid.has_tx_length);
	/* anonymous */
	sl_buf_reset(&b);
	me_le(&b, 0, 1); me_le(&b, 0, 16); me_le(&b, 0, 8);
	assert_int_equal(decode(&r, SL_BL_ANONYMOUS_GTID, 120, &b, true, &ev, err, sizeof err), 0);
	assert_true(ev.u.mysql_gtid.anonymous);
	/* a GTID with gno 0 is not valid */
	assert_int_equal(decode(&r, SL_BL_GTID, 120, &b, true, &ev, err, sizeof err), -1);
	assert_non_null(strstr(err, "out of range"));
	b.len = 20;
	assert_int_equal(decode(&r, SL_BL_GTID, 120, &b, true, &ev, err, sizeof err), -1);
	sl_buf_free(&b);
}

static void test_heartbeat_annotate_xa_incident(void **state)
{
	struct sl_binlog_reader r;
	struct sl_binlog_event ev;
	struct sl_buf b;
	char err[256];

	(void)state;
	reader_with_fde(&r, true, true);
	sl_buf_init(&b, 0);
	me_bytes(&b, "mb.000002", 9);
	assert_int_equal(decode(&r, SL_BL_HEARTBEAT, 340, &b, true, &ev, err, sizeof err), 0);
	assert_int_equal(ev.kind, SL_BLK_HEARTBEAT);
	assert_int_equal(ev.u.heartbeat.file_len, 9);
	assert_memory_equal(ev.u.heartbeat.file, "mb.000002", 9);
	assert_int_equal(ev.u.heartbeat.position, ev.h.log_pos);

	/* heartbeat v2: TLV fields */
	sl_buf_reset(&b);
	me_le(&b, 1, 1); me_lenstr(&b, "binlog.000007");
	me_le(&b, 2, 1); me_le(&b, 4, 1); me_packed(&b, 123456);  /* 0xfd + 3 bytes */
	me_le(&b, 0, 1);
	assert_int_equal(decode(&r, SL_BL_HEARTBEAT_V2, 0, &b, true, &ev, err, sizeof err), 0);
	assert_int_equal(ev.kind, SL_BLK_HEARTBEAT);
	assert_int_equal(ev.u.heartbeat.file_len, 13);
	assert_memory_equal(ev.u.heartbeat.file, "binlog.000007", 13);
	assert_int_equal(ev.u.heartbeat.position, 123456);
	b.data[1] = 100;
	assert_int_equal(decode(&r, SL_BL_HEARTBEAT_V2, 0, &b, true, &ev, err, sizeof err), -1);

	sl_buf_reset(&b);
	me_bytes(&b, "INSERT INTO t VALUES (1)", 24);
	assert_int_equal(decode(&r, SL_BL_MARIADB_ANNOTATE_ROWS, 400, &b, true, &ev, err, sizeof err), 0);
	assert_int_equal(ev.kind, SL_BLK_ANNOTATE);
	assert_int_equal(ev.u.annotate.len, 24);
	assert_memory_equal(ev.u.annotate.p, "INSERT INTO t VALUES (1)", 24);
	sl_buf_reset(&b);
	me_le(&b, 24, 1);
	me_bytes(&b, "INSERT INTO t VALUES (1)", 24);
	assert_int_equal(decode(&r, SL_BL_ROWS_QUERY, 400, &b, true, &ev, err, sizeof err), 0);
	assert_int_equal(ev.u.annotate.len, 24);
	assert_memory_equal(ev.u.annotate.p, "INSERT", 6);

	sl_buf_reset(&b);
	me_le(&b, 0, 1); me_le(&b, 1, 4); me_le(&b, 2, 4); me_le(&b, 0, 4); me_bytes(&b, "x1", 2);
	assert_int_equal(decode(&r, SL_BL_XA_PREPARE, 500, &b, true, &ev, err, sizeof err), 0);
	assert_int_equal(ev.kind, SL_BLK_XA_PREPARE);
	assert_false(ev.u.xa_prepare.one_phase);
	assert_int_equal(ev.u.xa_prepare.xid.format_id, 1);
	assert_int_equal(ev.u.xa_prepare.xid.gtrid_len, 2);
	assert_int_equal(ev.u.xa_prepare.xid.bqual_len, 0);
	assert_memory_equal(ev.u.xa_prepare.xid.data, "x1", 2);
	b.data[5] = 3;
	assert_int_equal(decode(&r, SL_BL_XA_PREPARE, 500, &b, true, &ev, err, sizeof err), -1);
	b.data[5] = (char)0xff;
	assert_int_equal(decode(&r, SL_BL_XA_PREPARE, 500, &b, true, &ev, err, sizeof err), -1);

	sl_buf_reset(&b);
	me_le(&b, 1, 2); me_le(&b, 9, 1); me_bytes(&b, "LOST_EVENTS", 9);
	assert_int_equal(decode(&r, SL_BL_INCIDENT, 600, &b, true, &ev, err, sizeof err), 0);
	assert_int_equal(ev.kind, SL_BLK_INCIDENT);
	assert_int_equal(ev.u.incident.incident, 1);
	assert_int_equal(ev.u.incident.message_len, 9);

	/* PREVIOUS_GTIDS: the body is a binary GTID set */
	{
		struct sl_mysql_gtid_set set;
		sl_mysql_gtid_set_init(&set);
		sl_buf_reset(&b);
		me_le(&b, 1, 8);
		me_bytes(&b, "\x3e\x11\xfa\x47\x71\xca\x11\xe1\x9e\x33\xc8\x0a\xa9\x42\x95\x62", 16);
		me_le(&b, 1, 8); me_le(&b, 1, 8); me_le(&b, 101, 8);
		assert_int_equal(decode(&r, SL_BL_PREVIOUS_GTIDS, 650, &b, true, &ev, err, sizeof err), 0);
		assert_int_equal(ev.kind, SL_BLK_PREVIOUS_GTIDS);
		assert_int_equal(sl_mysql_gtid_set_decode(&set, ev.body, ev.body_len, err, sizeof err), 0);
		assert_true(sl_mysql_gtid_set_contains(&set, (const unsigned char *)"\x3e\x11\xfa\x47\x71\xca\x11"
						       "\xe1\x9e\x33\xc8\x0a\xa9\x42\x95\x62", 100));
		sl_mysql_gtid_set_free(&set);
	}

	/* events a CDC reader does not need are framed and reported as other */
	sl_buf_reset(&b);
	me_le(&b, 2, 1); me_le(&b, 17, 8);
	assert_int_equal(decode(&r, SL_BL_INTVAR, 700, &b, true, &ev, err, sizeof err), 0);
	assert_int_equal(ev.kind, SL_BLK_OTHER);
	assert_int_equal(decode(&r, 200, 700, &b, true, &ev, err, sizeof err), 0);
	assert_int_equal(ev.kind, SL_BLK_OTHER);
	sl_buf_free(&b);
}

static void test_refused_events(void **state)
{
	static const struct {
		uint8_t type;
		const char *msg;
	} cases[] = {
		{ SL_BL_MARIADB_QUERY_COMPRESSED, "log_bin_compress=OFF" },
		{ 166, "log_bin_compress=OFF" },
		{ SL_BL_MARIADB_DELETE_ROWS_COMPRESSED_V1, "log_bin_compress=OFF" },
		{ SL_BL_TRANSACTION_PAYLOAD, "binlog_transaction_compression=OFF" },
		{ SL_BL_PARTIAL_UPDATE_ROWS, "binlog_row_value_options" },
		{ SL_BL_GTID_TAGGED, "tagged GTIDs" },
		{ SL_BL_WRITE_ROWS_V0, "pre-GA rows events" },
	};
	struct sl_binlog_reader r;
	struct sl_binlog_event ev;
	struct sl_buf b;
	char err[256];

	(void)state;
	reader_with_fde(&r, true, true);
	sl_buf_init(&b, 0);
	me_le(&b, 0, 16);
	for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
		assert_int_equal(decode(&r, cases[i].type, 900, &b, true, &ev, err, sizeof err), -1);
		if (!strstr(err, cases[i].msg) || !strstr(err, "mb.000001:900"))
			fail_msg("type %u: %s", cases[i].type, err);
	}
	sl_buf_free(&b);
}

static void test_checksums(void **state)
{
	struct sl_binlog_reader r;
	struct sl_binlog_event ev;
	struct sl_buf b;
	char err[256];

	(void)state;
	reader_with_fde(&r, true, true);
	sl_buf_init(&b, 0);
	me_le(&b, 77, 8);
	sl_buf_reset(&ev_buf);
	me_event(&ev_buf, SL_BL_XID, 1, 1, 1234, 0, b.data, b.len, true);
	assert_int_equal(sl_binlog_decode(&r, (const unsigned char *)ev_buf.data, ev_buf.len, &ev, err, sizeof err), 0);
	assert_int_equal(ev.body_len, 8);
	/* one flipped bit anywhere is a mismatch naming the position */
	for (size_t i = 0; i < ev_buf.len; i++) {
		if (i >= 9 && i < 13)
			continue;  /* the event size: a framing error, tested below */
		ev_buf.data[i] ^= 0x10;
		assert_int_equal(sl_binlog_decode(&r, (const unsigned char *)ev_buf.data, ev_buf.len, &ev, err,
						  sizeof err), -1);
		ev_buf.data[i] ^= 0x10;
		if (i == 4 || (i >= 13 && i < 17))
			continue;  /* the type renames the event; the end position moves it */
		if (!strstr(err, "binlog checksum mismatch in XID event at mb.000001:1234"))
			fail_msg("byte %zu: %s", i, err);
	}
	ev_buf.data[10] ^= 1;
	assert_int_equal(sl_binlog_decode(&r, (const unsigned char *)ev_buf.data, ev_buf.len, &ev, err, sizeof err), -1);
	assert_non_null(strstr(err, "event size differs"));
	ev_buf.data[10] ^= 1;
	/* without checksums the same bytes read as a longer body */
	reader_with_fde(&r, true, false);
	assert_int_equal(sl_binlog_decode(&r, (const unsigned char *)ev_buf.data, ev_buf.len, &ev, err, sizeof err), 0);
	assert_int_equal(ev.body_len, 12);
	/* a format description with a bad checksum */
	sl_buf_reset(&b);
	me_fde_event(&b, true, true);
	b.data[30] ^= 1;
	sl_binlog_reader_init(&r, SL_BL_CHECKSUM_OFF, NULL);
	assert_int_equal(sl_binlog_decode(&r, (const unsigned char *)b.data, b.len, &ev, err, sizeof err), -1);
	assert_non_null(strstr(err, "checksum mismatch in FORMAT_DESCRIPTION event at position 4"));
	/* an artificial event names itself so */
	sl_binlog_reader_init(&r, SL_BL_CHECKSUM_CRC32, "mb.000009");
	sl_buf_reset(&b);
	me_le(&b, 4, 8);
	me_bytes(&b, "mb.000010", 9);
	sl_buf_reset(&ev_buf);
	me_event(&ev_buf, SL_BL_ROTATE, 0, 1, 0, SL_BL_F_ARTIFICIAL, b.data, b.len, true);
	ev_buf.data[25] ^= 1;
	assert_int_equal(sl_binlog_decode(&r, (const unsigned char *)ev_buf.data, ev_buf.len, &ev, err, sizeof err), -1);
	assert_non_null(strstr(err, "checksum mismatch in ROTATE event at an artificial event in mb.000009"));
	/* shorter than a header */
	assert_int_equal(sl_binlog_decode(&r, (const unsigned char *)ev_buf.data, 18, &ev, err, sizeof err), -1);
	assert_non_null(strstr(err, "shorter than the 19-byte header"));
	sl_buf_free(&b);
}

/* The column types, metadata and options of the table map tests. */
static void build_table_map(struct sl_buf *b, bool with_optional)
{
	static const uint8_t types[] = {
		SL_MYSQL_LONG, SL_MYSQL_LONGLONG, SL_MYSQL_NEWDECIMAL, SL_MYSQL_VARCHAR, SL_MYSQL_STRING,
		SL_MYSQL_STRING, SL_MYSQL_STRING, SL_MYSQL_BLOB, SL_MYSQL_DATETIME2, SL_MYSQL_BIT,
		SL_MYSQL_GEOMETRY, SL_MYSQL_DOUBLE, SL_MYSQL_STRING, SL_MYSQL_JSON,
	};
	struct sl_buf meta, opt;

	sl_buf_init(&meta, 0);
	sl_buf_init(&opt, 0);
	me_le(b, 0x0000123456789aULL, 6);    /* table id */
	me_le(b, 1, 2);                       /* flags */
	me_le(b, 4, 1); me_bytes(b, "shop", 5);
	me_le(b, 6, 1); me_bytes(b, "orders", 7);
	me_packed(b, sizeof types);
	me_bytes(b, types, sizeof types);
	/* nothing for LONG, LONGLONG */
	me_le(&meta, 65, 1); me_le(&meta, 30, 1);                /* decimal(65,30) */
	me_le(&meta, 1200, 2);                                     /* varchar(300) utf8mb4 */
	me_le(&meta, 0xfe, 1); me_le(&meta, 40, 1);               /* char(10) utf8mb4 */
	/* char(100) utf8mb4: 400 bytes, bits 8-9 of the length in the real type */
	me_le(&meta, 0xfe ^ ((400 >> 4) & 0x30), 1); me_le(&meta, 400 & 0xff, 1);
	me_le(&meta, 0xf7, 1); me_le(&meta, 1, 1);                /* enum, 1 byte */
	me_le(&meta, 2, 1);                                        /* blob: 2 length bytes */
	me_le(&meta, 6, 1);                                        /* datetime(6) */
	me_le(&meta, 2, 1); me_le(&meta, 1, 1);                   /* bit(10) */
	me_le(&meta, 4, 1);                                        /* geometry */
	me_le(&meta, 8, 1);                                        /* double */
	me_le(&meta, 0xf8, 1); me_le(&meta, 1, 1);                /* set, 1 byte */
	me_le(&meta, 4, 1);                                        /* json */
	me_packed(b, meta.len);
	me_bytes(b, meta.data, meta.len);
	me_le(b, 0x3ffe, 2);                  /* every column nullable but the first */
	if (with_optional) {
		/* 1 signedness: numeric columns LONG, LONGLONG, NEWDECIMAL, DOUBLE */
		me_le(&opt, 1, 1); me_packed(&opt, 1); me_le(&opt, 0x40, 1);      /* LONGLONG unsigned */
		/* 2 default charset: utf8mb4_general_ci (45); character column 3
		 * (the blob, after varchar, char, char) is binary (63), column 5
		 * (geometry, a character column for MariaDB) binary too */
		{
			struct sl_buf v;
			sl_buf_init(&v, 0);
			me_packed(&v, 45); me_packed(&v, 3); me_packed(&v, 63); me_packed(&v, 4); me_packed(&v, 63);
			me_le(&opt, 2, 1); me_packed(&opt, v.len); me_bytes(&opt, v.data, v.len);
			sl_buf_reset(&v);
			/* 4 names */
			static const char *names[] = { "id", "big", "amount", "note", "code", "wide", "size", "data",
						       "at", "flags", "shape", "ratio", "tags", "doc" };
			for (size_t i = 0; i < 14; i++)
				me_lenstr(&v, names[i]);
			me_le(&opt, 4, 1); me_packed(&opt, v.len); me_bytes(&opt, v.data, v.len);
			sl_buf_reset(&v);
			/* 5 set values, 6 enum values */
			me_packed(&v, 3); me_lenstr(&v, "a"); me_lenstr(&v, "b"); me_lenstr(&v, "c");
			me_le(&opt, 5, 1); me_packed(&opt, v.len); me_bytes(&opt, v.data, v.len);
			sl_buf_reset(&v);
			me_packed(&v, 2); me_lenstr(&v, "small"); me_lenstr(&v, "caf\xe9");
			me_le(&opt, 6, 1); me_packed(&opt, v.len); me_bytes(&opt, v.data, v.len);
			sl_buf_reset(&v);
			/* 7 geometry type: POINT (1) */
			me_le(&opt, 7, 1); me_packed(&opt, 1); me_packed(&opt, 1);
			/* 9 primary key with prefix: id, then note's first 10 */
			me_packed(&v, 0); me_packed(&v, 0); me_packed(&v, 3); me_packed(&v, 10);
			me_le(&opt, 9, 1); me_packed(&opt, v.len); me_bytes(&opt, v.data, v.len);
			sl_buf_reset(&v);
			/* 10 enum/set default charset latin1 (8), pairs: none */
			me_le(&opt, 10, 1); me_packed(&opt, 1); me_packed(&opt, 8);
			/* 99: a field from a later server, skipped */
			me_le(&opt, 99, 1); me_packed(&opt, 3); me_bytes(&opt, "xyz", 3);
			/* 12 visibility: all visible but the last */
			me_le(&opt, 12, 1); me_packed(&opt, 2); me_le(&opt, 0xff, 1); me_le(&opt, 0xf8, 1);
			sl_buf_free(&v);
		}
		me_bytes(b, opt.data, opt.len);
	}
	sl_buf_free(&meta);
	sl_buf_free(&opt);
}

/* The SIGNEDNESS field has a bit for each number column, and which columns
 * those are differs: MariaDB counts YEAR (always flagged unsigned), MySQL
 * does not.  (id INT, y YEAR, u INT UNSIGNED, s TINYINT) with s = -1 once
 * came out as 255. */
static void signedness_after_year(bool mariadb, uint8_t bitmap)
{
	static const uint8_t types[] = { SL_MYSQL_LONG, SL_MYSQL_YEAR, SL_MYSQL_LONG, SL_MYSQL_TINY };
	struct sl_binlog_reader r;
	struct sl_binlog_event ev;
	struct sl_binlog_table_map tm;
	struct sl_buf b;
	char err[256];

	reader_with_fde(&r, mariadb, true);
	sl_buf_init(&b, 0);
	sl_binlog_table_map_init(&tm);
	me_le(&b, 77, 6);
	me_le(&b, 1, 2);
	me_le(&b, 1, 1); me_bytes(&b, "d", 2);
	me_le(&b, 1, 1); me_bytes(&b, "t", 2);
	me_packed(&b, sizeof types);
	me_bytes(&b, types, sizeof types);
	me_packed(&b, 0);                       /* no column metadata */
	me_le(&b, 0x0e, 1);
	me_le(&b, 1, 1); me_packed(&b, 1); me_le(&b, bitmap, 1);
	assert_int_equal(decode(&r, SL_BL_TABLE_MAP, 1000, &b, true, &ev, err, sizeof err), 0);
	if (sl_binlog_table_map_parse(&tm, &r, &ev, err, sizeof err) != 0)
		fail_msg("%s", err);
	assert_true(tm.has_signedness);
	assert_int_equal(tm.cols[0].is_unsigned, 0);
	assert_int_equal(tm.cols[2].is_unsigned, 1);
	assert_int_equal(tm.cols[3].is_unsigned, 0);
	sl_binlog_table_map_free(&tm);
	sl_buf_free(&b);
}

static void test_signedness_year(void **state)
{
	(void)state;
	signedness_after_year(true, 0x60);     /* id 0, y 1, u 1, s 0 */
	signedness_after_year(false, 0x40);    /* id 0, u 1, s 0 */
}

static void test_table_map(void **state)
{
	struct sl_binlog_reader r;
	struct sl_binlog_event ev;
	struct sl_binlog_table_map tm;
	struct sl_buf b;
	char err[256];

	(void)state;
	reader_with_fde(&r, true, true);
	sl_buf_init(&b, 0);
	sl_binlog_table_map_init(&tm);
	build_table_map(&b, true);
	assert_int_equal(decode(&r, SL_BL_TABLE_MAP, 1000, &b, true, &ev, err, sizeof err), 0);
	assert_int_equal(ev.kind, SL_BLK_TABLE_MAP);
	if (sl_binlog_table_map_parse(&tm, &r, &ev, err, sizeof err) != 0)
		fail_msg("%s", err);
	assert_true(tm.table_id == 0x0000123456789aULL);
	assert_int_equal(tm.flags, 1);
	assert_string_equal(tm.db, "shop");
	assert_string_equal(tm.table, "orders");
	assert_int_equal(tm.ncols, 14);
	assert_false(tm.cols[0].nullable);
	assert_true(tm.cols[1].nullable);
	assert_true(tm.has_signedness && tm.has_charsets && tm.has_names && tm.has_set_values &&
		    tm.has_enum_values && tm.has_geometry_types && tm.has_key && tm.has_enum_set_charsets &&
		    tm.has_visibility);
	/* signedness */
	assert_int_equal(tm.cols[0].is_unsigned, 0);
	assert_int_equal(tm.cols[1].is_unsigned, 1);
	assert_int_equal(tm.cols[2].is_unsigned, 0);
	assert_int_equal(tm.cols[11].is_unsigned, 0);
	assert_int_equal(tm.cols[3].is_unsigned, -1);
	/* metadata */
	assert_int_equal(tm.cols[2].precision, 65);
	assert_int_equal(tm.cols[2].scale, 30);
	assert_int_equal(tm.cols[3].max_len, 1200);
	assert_int_equal(tm.cols[4].real_type, SL_MYSQL_STRING);
	assert_int_equal(tm.cols[4].max_len, 40);
	assert_int_equal(tm.cols[5].real_type, SL_MYSQL_STRING);
	assert_int_equal(tm.cols[5].max_len, 400);
	assert_int_equal(tm.cols[6].real_type, SL_MYSQL_ENUM);
	assert_int_equal(tm.cols[6].pack_len, 1);
	assert_int_equal(tm.cols[7].pack_len, 2);
	assert_int_equal(tm.cols[8].fsp, 6);
	assert_int_equal(tm.cols[9].nbits, 10);
	assert_int_equal(tm.cols[10].pack_len, 4);
	assert_int_equal(tm.cols[11].pack_len, 8);
	assert_int_equal(tm.cols[12].real_type, SL_MYSQL_SET);
	assert_int_equal(tm.cols[13].pack_len, 4);
	/* charsets: character columns varchar, char, char, blob, geometry */
	assert_int_equal(tm.cols[3].collation, 45);
	assert_int_equal(tm.cols[4].collation, 45);
	assert_int_equal(tm.cols[5].collation, 45);
	assert_int_equal(tm.cols[7].collation, 63);
	assert_int_equal(tm.cols[10].collation, 63);
	assert_string_equal(tm.cols[3].charset->name, "utf8mb4");
	assert_int_equal(tm.cols[7].charset->kind, SL_CS_BINARY);
	assert_int_equal(tm.cols[0].collation, 0);
	assert_null(tm.cols[0].charset);
	/* enum and set: latin1 */
	assert_int_equal(tm.cols[6].collation, 8);
	assert_int_equal(tm.cols[12].collation, 8);
	assert_string_equal(tm.cols[6].charset->name, "latin1");
	/* names and values */
	assert_int_equal(tm.cols[0].name.len, 2);
	assert_string_equal(tm.cols[0].name.p, "id");
	assert_string_equal(tm.cols[13].name.p, "doc");
	assert_int_equal(tm.cols[6].nvalues, 2);
	assert_string_equal(tm.cols[6].values[0].p, "small");
	assert_int_equal(tm.cols[6].values[1].len, 4);
	assert_memory_equal(tm.cols[6].values[1].p, "caf\xe9", 4);
	assert_int_equal(tm.cols[12].nvalues, 3);
	assert_string_equal(tm.cols[12].values[2].p, "c");
	assert_int_equal(tm.cols[3].nvalues, 0);
	assert_null(tm.cols[3].values);
	/* geometry, key, visibility */
	assert_int_equal(tm.cols[10].geometry_type, 1);
	assert_int_equal(tm.cols[0].geometry_type, -1);
	assert_int_equal(tm.nkey, 2);
	assert_int_equal(tm.key[0], 0);
	assert_int_equal(tm.key[1], 3);
	assert_true(tm.cols[0].is_key);
	assert_true(tm.cols[3].is_key);
	assert_int_equal(tm.cols[3].key_prefix, 10);
	assert_false(tm.cols[1].is_key);
	assert_int_equal(tm.cols[12].visible, 1);
	assert_int_equal(tm.cols[13].visible, 0);

	/* the same map without optional metadata: nothing known */
	sl_buf_reset(&b);
	build_table_map(&b, false);
	assert_int_equal(decode(&r, SL_BL_TABLE_MAP, 1000, &b, true, &ev, err, sizeof err), 0);
	assert_int_equal(sl_binlog_table_map_parse(&tm, &r, &ev, err, sizeof err), 0);
	assert_false(tm.has_signedness || tm.has_charsets || tm.has_names || tm.has_key);
	assert_int_equal(tm.cols[1].is_unsigned, -1);
	assert_null(tm.cols[3].charset);
	assert_null(tm.cols[0].name.p);
	assert_int_equal(tm.cols[6].nvalues, 0);
	assert_int_equal(tm.nkey, 0);
	sl_binlog_table_map_free(&tm);
	sl_buf_free(&b);
}

/* Table map bodies that must be refused. */
static void test_table_map_malformed(void **state)
{
	struct sl_binlog_reader r;
	struct sl_binlog_event ev;
	struct sl_binlog_table_map tm;
	struct sl_buf b, good;
	char err[256];

	(void)state;
	reader_with_fde(&r, true, false);
	sl_buf_init(&b, 0);
	sl_buf_init(&good, 0);
	sl_binlog_table_map_init(&tm);
	build_table_map(&good, true);
	/* every truncation fails cleanly (or, cut inside the optional fields,
	 * may still be a valid shorter map) */
	for (size_t n = 0; n < good.len; n++) {
		sl_buf_reset(&b);
		me_bytes(&b, good.data, n);
		assert_int_equal(decode(&r, SL_BL_TABLE_MAP, 1000, &b, false, &ev, err, sizeof err), 0);
		(void)sl_binlog_table_map_parse(&tm, &r, &ev, err, sizeof err);
	}
	/* a column type that does not exist */
	sl_buf_reset(&b);
	me_bytes(&b, good.data, good.len);
	b.data[23] = (char)200;  /* the first column type */
	assert_int_equal(decode(&r, SL_BL_TABLE_MAP, 1000, &b, false, &ev, err, sizeof err), 0);
	assert_int_equal(sl_binlog_table_map_parse(&tm, &r, &ev, err, sizeof err), -1);
	assert_non_null(strstr(err, "column 1: unknown column type (type 200)"));
	assert_int_equal(tm.ncols, 0);
	/* decimal scale above precision */
	sl_buf_reset(&b);
	me_bytes(&b, good.data, good.len);
	b.data[39] = 66;  /* the decimal's scale, above its precision */
	assert_int_equal(decode(&r, SL_BL_TABLE_MAP, 1000, &b, false, &ev, err, sizeof err), 0);
	assert_int_equal(sl_binlog_table_map_parse(&tm, &r, &ev, err, sizeof err), -1);
	assert_non_null(strstr(err, "bad DECIMAL precision or scale"));
	sl_binlog_table_map_free(&tm);
	sl_buf_free(&b);
	sl_buf_free(&good);
}

static void test_rows_header(void **state)
{
	struct sl_binlog_reader r;
	struct sl_binlog_event ev;
	struct sl_binlog_rows rows;
	struct sl_buf b;
	char err[256];

	(void)state;
	reader_with_fde(&r, true, true);
	sl_buf_init(&b, 0);
	/* V1 write: table id, flags, 3 columns, columns 0 and 2 present, one row */
	me_le(&b, 18, 6); me_le(&b, 1, 2); me_packed(&b, 3); me_le(&b, 0x05, 1);
	me_le(&b, 0, 1); me_le(&b, 7, 4); me_le(&b, 8, 4);
	assert_int_equal(decode(&r, SL_BL_WRITE_ROWS_V1, 1000, &b, true, &ev, err, sizeof err), 0);
	assert_int_equal(ev.kind, SL_BLK_ROWS);
	assert_int_equal(sl_binlog_rows_parse(&r, &ev, &rows, err, sizeof err), 0);
	assert_int_equal(rows.version, 1);
	assert_int_equal(rows.op, SL_BL_ROWS_WRITE);
	assert_int_equal(rows.table_id, 18);
	assert_int_equal(rows.flags, SL_BL_ROWS_F_STMT_END);
	assert_int_equal(rows.ncols, 3);
	assert_int_equal(rows.present[0], 0x05);
	assert_null(rows.present_after);
	assert_int_equal(rows.end - rows.rows, 9);

	/* V2 update (MySQL): extra data, two bitmaps */
	reader_with_fde(&r, false, true);
	sl_buf_reset(&b);
	me_le(&b, 99, 6); me_le(&b, 0, 2); me_le(&b, 2 + 4, 2); me_le(&b, 1, 1); me_le(&b, 5, 2); me_le(&b, 6, 1);
	me_packed(&b, 9); me_le(&b, 0xff01, 2); me_le(&b, 0x0102, 2);
	assert_int_equal(decode(&r, SL_BL_UPDATE_ROWS_V2, 1000, &b, true, &ev, err, sizeof err), 0);
	assert_int_equal(sl_binlog_rows_parse(&r, &ev, &rows, err, sizeof err), 0);
	assert_int_equal(rows.version, 2);
	assert_int_equal(rows.op, SL_BL_ROWS_UPDATE);
	assert_int_equal(rows.table_id, 99);
	assert_int_equal(rows.extra_len, 4);
	assert_int_equal(rows.extra[0], 1);
	assert_int_equal(rows.ncols, 9);
	assert_int_equal(rows.present[0], 0x01);
	assert_int_equal(rows.present[1], 0xff);
	assert_int_equal(rows.present_after[0], 0x02);
	assert_int_equal(rows.present_after[1], 0x01);
	assert_ptr_equal(rows.rows, rows.end);
	/* V2 delete with an extra length below 2, and one past the event */
	sl_buf_reset(&b);
	me_le(&b, 99, 6); me_le(&b, 0, 2); me_le(&b, 1, 2); me_packed(&b, 1); me_le(&b, 1, 1);
	assert_int_equal(decode(&r, SL_BL_DELETE_ROWS_V2, 1000, &b, true, &ev, err, sizeof err), 0);
	assert_int_equal(sl_binlog_rows_parse(&r, &ev, &rows, err, sizeof err), -1);
	assert_non_null(strstr(err, "extra data length below 2"));
	b.data[8] = 50;
	assert_int_equal(decode(&r, SL_BL_DELETE_ROWS_V2, 1000, &b, true, &ev, err, sizeof err), 0);
	assert_int_equal(sl_binlog_rows_parse(&r, &ev, &rows, err, sizeof err), -1);
	/* a rows event without columns */
	sl_buf_reset(&b);
	me_le(&b, 99, 6); me_le(&b, 0, 2); me_le(&b, 2, 2); me_packed(&b, 0);
	assert_int_equal(decode(&r, SL_BL_DELETE_ROWS_V2, 1000, &b, true, &ev, err, sizeof err), 0);
	assert_int_equal(sl_binlog_rows_parse(&r, &ev, &rows, err, sizeof err), -1);
	assert_non_null(strstr(err, "bad column count"));
	sl_buf_free(&b);
}

static void test_packed_int(void **state)
{
	static const uint64_t vals[] = { 0, 250, 251, 65535, 65536, 16777215, 16777216, UINT64_MAX };
	struct sl_buf b;

	(void)state;
	sl_buf_init(&b, 0);
	for (size_t i = 0; i < sizeof vals / sizeof *vals; i++) {
		const unsigned char *p;
		uint64_t v;
		sl_buf_reset(&b);
		me_packed(&b, vals[i]);
		p = (const unsigned char *)b.data;
		assert_int_equal(sl_binlog_packed_int(&p, p + b.len, &v), 0);
		assert_true(v == vals[i]);
		assert_ptr_equal(p, (const unsigned char *)b.data + b.len);
		p = (const unsigned char *)b.data;
		assert_int_equal(sl_binlog_packed_int(&p, p + b.len - 1, &v), -1);
	}
	{
		static const unsigned char null_marker[] = { 251 }, bad[] = { 255 };
		const unsigned char *p = null_marker;
		uint64_t v;
		assert_int_equal(sl_binlog_packed_int(&p, p + 1, &v), -1);
		p = bad;
		assert_int_equal(sl_binlog_packed_int(&p, p + 1, &v), -1);
	}
	sl_buf_free(&b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_fde),
		cmocka_unit_test(test_rotate_and_artificial),
		cmocka_unit_test(test_query_xid),
		cmocka_unit_test(test_mariadb_gtid),
		cmocka_unit_test(test_gtid_list),
		cmocka_unit_test(test_mysql_gtid),
		cmocka_unit_test(test_heartbeat_annotate_xa_incident),
		cmocka_unit_test(test_refused_events),
		cmocka_unit_test(test_checksums),
		cmocka_unit_test(test_table_map),
		cmocka_unit_test(test_signedness_year),
		cmocka_unit_test(test_table_map_malformed),
		cmocka_unit_test(test_rows_header),
		cmocka_unit_test(test_packed_int),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
