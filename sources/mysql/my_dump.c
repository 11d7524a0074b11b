/*
 * sources/mysql/my_dump.c: the binlog dump connection, as a replica holds
 * it (see my_internal.h).
 *
 * Protocol facts the MariaDB and MySQL documentation leave scattered:
 *
 * - Before the dump, the session must set @master_binlog_checksum to the
 *   server's binlog_checksum, or the server refuses to send events with
 *   checksums (error 1236, "Slave can not handle replication events with
 *   the checksum ..."). The value agreed on is read back: it says whether
 *   the events sent before the first FORMAT_DESCRIPTION (the fake ROTATE
 *   that names the file) end in 4 checksum bytes, which the format
 *   description then says for the rest.  MariaDB only sends its GTID events to a replica
 *   that set @mariadb_slave_capability = 4 (MARIA_SLAVE_CAPABILITY_GTID),
 *   and replaces them with dummy QUERY events otherwise.
 * - The dump thread writes with the session's net_write_timeout (60 s by
 *   default): a replica that stops reading for that long, once the
 *   sockets' buffers are full, loses its connection (error 2013 on its
 *   side).  sluice's reader stops reading while its queue is full, that is
 *   while the destination is down or slow, so the dump session sets a long
 *   one (DUMP_WRITE_TIMEOUT_S): the stream then waits for the destination
 *   with its connection kept, as a PostgreSQL stream keeps its slot's.
 * - @master_heartbeat_period (nanoseconds) makes the server send a
 *   HEARTBEAT event whenever it had nothing to send for that long, so a
 *   connection that stays silent for a few periods is dead.
 * - COM_REGISTER_SLAVE (server_id u32, report host, user and password each
 *   a length byte and the bytes, port u16, rank u32, master id u32) makes
 *   the replica visible in SHOW SLAVE HOSTS.  A server keeps one dump per
 *   server_id: a second connection with the same id makes the server end
 *   the first one (MariaDB: error 4052, ER_SLAVE_SAME_ID).
 * - COM_BINLOG_DUMP: position u32, flags u16 (1: BINLOG_DUMP_NON_BLOCK,
 *   an EOF packet at the server's head instead of waiting), server_id u32,
 *   the file name (the rest).  A MariaDB GTID start sets
 *   @slave_connect_state and sends an empty file name at position 4; the
 *   server then skips every event group the state already holds.
 * - COM_BINLOG_DUMP_GTID (MySQL, command 0x1e): flags u16 (4:
 *   BINLOG_THROUGH_GTID), server_id u32, name length u32, name, position
 *   u64, data length u32, the GTID set in its binary form.
 * - Each event arrives as a packet: a 0x00 byte and the event; an error
 *   packet (0xff) ends the stream with the server's error; 0xfe is EOF.
 *
 * The connection's reads go through libmariadb, which keeps a read-ahead
 * cache: a poll() on the socket does not see what the cache already holds,
 * so the cache is looked at first.  (With TLS, bytes the TLS library
 * buffered are not seen either: such an event waits for the next packet,
 * at most one heartbeat period.)
 */
#include "sources/mysql/my_internal.h"

#include <errno.h>
#include <ma_pvio.h>
#include <inttypes.h>
#include <poll.h>
#include <strings.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/util.h"

/* The dump session's net_write_timeout: how long the server waits for this
 * reader to take more bytes (see above). */
#define DUMP_WRITE_TIMEOUT_S 3600

struct sl_my_dump {
	MYSQL *c;
	int64_t silence_ms;
	int64_t last_rx_ms;
	uint8_t checksum;           /* enum sl_bl_checksum agreed for the events before the first FDE */
	FILE *record;
	/* replay */
	unsigned char *data;
	size_t len, off;
	unsigned char *ev;          /* the current replayed event (a copy, so tools see only its bytes) */
	size_t aev;
};

static void put_u16(unsigned char *p, uint16_t v)
{
	p[0] = (unsigned char)v;
	p[1] = (unsigned char)(v >> 8);
}

static void put_u32le(unsigned char *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (unsigned char)(v >> (8 * i));
}

static void put_u64le(unsigned char *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (unsigned char)(v >> (8 * i));
}

static int exec_fmt(MYSQL *c, char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 4, 5)));

static int exec_fmt(MYSQL *c, char *err, size_t errlen, const char *fmt, ...)
{
	char sql[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(sql, sizeof sql, fmt, ap);
	va_end(ap);
	return sl_my_exec(c, sql, err, errlen);
}

static int command(MYSQL *c, enum enum_server_command cmd, const unsigned char *arg, size_t len, bool skip_check)
{
	return c->methods->db_command(c, cmd, (const char *)arg, len, skip_check, NULL);
}

static int register_replica(MYSQL *c, const struct sl_my_dump_opts *o, char *err, size_t errlen)
{
	unsigned char b[4 + 1 + 60 + 1 + 1 + 2 + 4 + 4];
	size_t n = 0, hl = o->report_host ? strlen(o->report_host) : 0;

	if (hl > 60)
		hl = 60;
	put_u32le(b, o->server_id);
	n = 4;
	b[n++] = (unsigned char)hl;
	memcpy(b + n, o->report_host, hl);
	n += hl;
	b[n++] = 0;  /* user */
	b[n++] = 0;  /* password */
	put_u16(b + n, 0);
	n += 2;
	put_u32le(b + n, 0);
	n += 4;
	put_u32le(b + n, 0);
	n += 4;
	if (command(c, COM_REGISTER_SLAVE, b, n, false) != 0)
		return sl_my_err(err, errlen, "could not register as a replica (COM_REGISTER_SLAVE)", c);
	return SL_OK;
}

static int send_dump(MYSQL *c, const struct sl_my_server *srv, const struct sl_my_dump_opts *o, char *err,
		     size_t errlen)
{
	struct sl_buf b;
	unsigned char h[32];
	uint16_t flags = o->non_block ? 1 : 0;
	bool gtid = o->gtid && o->gtid[0];
	int rc = SL_OK;

	sl_buf_init(&b, 0);
	if (gtid && !srv->mariadb) {
		struct sl_mysql_gtid_set set;
		size_t fl = o->file ? strlen(o->file) : 0;
		struct sl_buf enc;
		sl_mysql_gtid_set_init(&set);
		sl_buf_init(&enc, 0);
		if (sl_mysql_gtid_set_parse(&set, o->gtid, strlen(o->gtid), err, errlen) < 0 ||
		    sl_mysql_gtid_set_encode(&set, &enc) < 0) {
			sl_mysql_gtid_set_free(&set);
			sl_buf_free(&enc);
			sl_buf_free(&b);
			return SL_EFAIL;
		}
		sl_mysql_gtid_set_free(&set);
		put_u16(h, (uint16_t)(flags | 4));
		put_u32le(h + 2, o->server_id);
		put_u32le(h + 6, 0);        /* no file name: the GTID set decides */
		put_u64le(h + 10, 4);
		put_u32le(h + 18, (uint32_t)enc.len);
		(void)fl;
		sl_buf_append(&b, h, 22);
		sl_buf_append(&b, enc.data, enc.len);
		sl_buf_free(&enc);
		if (sl_buf_failed(&b)) {
			snprintf(err, errlen, "out of memory");
			rc = SL_EFAIL;
		} else if (command(c, (enum enum_server_command)0x1e, (unsigned char *)b.data, b.len, true) != 0) {
			rc = sl_my_err(err, errlen, "COM_BINLOG_DUMP_GTID", c);
		}
		sl_buf_free(&b);
		return rc;
	}
	put_u32le(h, gtid ? 4 : (uint32_t)o->offset);
	put_u16(h + 4, flags);
	put_u32le(h + 6, o->server_id);
	sl_buf_append(&b, h, 10);
	if (!gtid && o->file)
		sl_buf_puts(&b, o->file);
	if (sl_buf_failed(&b)) {
		snprintf(err, errlen, "out of memory");
		rc = SL_EFAIL;
	} else if (command(c, COM_BINLOG_DUMP, (unsigned char *)b.data, b.len, true) != 0) {
		rc = sl_my_err(err, errlen, "COM_BINLOG_DUMP", c);
	}
	sl_buf_free(&b);
	return rc;
}

/* Reads back the checksum algorithm the session agreed on (NONE or CRC32;
 * a server without checksums leaves the variable NULL). */
static int agreed_checksum(struct sl_my_dump *d, char *err, size_t errlen)
{
	char v[64];
	bool found = false;
	int rc;

	if ((rc = sl_my_query_value(d->c, "SELECT @master_binlog_checksum", v, sizeof v, &found, err, errlen)) < 0)
		return rc;
	if (!found || strcasecmp(v, "NONE") == 0) {
		d->checksum = SL_BL_CHECKSUM_OFF;
	} else if (strcasecmp(v, "CRC32") == 0) {
		d->checksum = SL_BL_CHECKSUM_CRC32;
	} else {
		snprintf(err, errlen, "the server's binlog_checksum is \"%s\", which sluice does not know (NONE or CRC32)",
			 v);
		return SL_EPREREQ;
	}
	return SL_OK;
}

int sl_my_dump_open(struct sl_my_dump **out, const struct sl_source_config *cfg, const struct sl_my_server *srv,
		    const struct sl_my_dump_opts *o, int64_t silence_ms, char *err, size_t errlen)
{
	struct sl_my_dump *d = calloc(1, sizeof *d);
	struct sl_my_server s2;
	struct sl_buf q;
	int rc;

	*out = NULL;
	if (!d) {
		snprintf(err, errlen, "out of memory");
		return SL_EFAIL;
	}
	d->silence_ms = silence_ms;
	/* A blocking read inside a packet may not last beyond the silence limit. */
	if (!(d->c = sl_my_connect(cfg, silence_ms > 0 ? (int)((silence_ms + 999) / 1000) : 0, &s2, err, errlen))) {
		rc = sl_my_err_status();
		free(d);
		return rc;
	}
	if ((rc = exec_fmt(d->c, err, errlen, "SET @master_binlog_checksum = @@global.binlog_checksum, "
			   "@source_binlog_checksum = @@global.binlog_checksum")) < 0 ||
	    (rc = agreed_checksum(d, err, errlen)) < 0)
		goto fail;
	if (srv->mariadb && (rc = exec_fmt(d->c, err, errlen, "SET @mariadb_slave_capability = 4")) < 0)
		goto fail;
	if ((rc = exec_fmt(d->c, err, errlen, "SET SESSION net_write_timeout = %d", DUMP_WRITE_TIMEOUT_S)) < 0)
		goto fail;
	if (o->heartbeat_ms > 0 &&
	    (rc = exec_fmt(d->c, err, errlen, "SET @master_heartbeat_period = %" PRId64,
			   o->heartbeat_ms * INT64_C(1000000))) < 0)
		goto fail;
	if (srv->mariadb && o->gtid && o->gtid[0]) {
		sl_buf_init(&q, 0);
		sl_buf_puts(&q, "SET @slave_connect_state = ");
		sl_my_append_literal(&q, o->gtid);
		sl_buf_puts(&q, ", @slave_gtid_strict_mode = 0, @slave_gtid_ignore_duplicates = 0");
		rc = sl_buf_failed(&q) ? SL_EFAIL : sl_my_exec(d->c, q.data, err, errlen);
		sl_buf_free(&q);
		if (rc < 0)
			goto fail;
	}
	if ((rc = register_replica(d->c, o, err, errlen)) < 0)
		goto fail;
	if ((rc = send_dump(d->c, srv, o, err, errlen)) < 0)
		goto fail;
	d->last_rx_ms = sl_mono_ms();
	*out = d;
	return SL_OK;
fail:
	mysql_close(d->c);
	free(d);
	return rc;
}

void sl_my_dump_close(struct sl_my_dump *d)
{
	if (!d)
		return;
	if (d->c)
		mysql_close(d->c);
	free(d->data);
	free(d->ev);
	free(d);
}

enum sl_bl_checksum sl_my_dump_checksum(const struct sl_my_dump *d)
{
	return d ? (enum sl_bl_checksum)d->checksum : SL_BL_CHECKSUM_CRC32;
}

unsigned long sl_my_dump_thread(const struct sl_my_dump *d)
{
	return d->c ? mysql_thread_id(d->c) : 0;
}

/* True when libmariadb's read-ahead cache holds bytes not yet read. */
static bool buffered(MYSQL *c)
{
	MARIADB_PVIO *pv = c->net.pvio;

	return pv && pv->cache && pv->cache_pos < pv->cache + pv->cache_size;
}

static int replay_read(struct sl_my_dump *d, enum sl_my_read *what, const unsigned char **ev, size_t *len,
		       char *err, size_t errlen)
{
	uint32_t n;

	if (d->off >= d->len) {
		*what = SL_MY_EOF;
		return SL_OK;
	}
	if (d->len - d->off < 4 || (n = sl_get_u32(d->data + d->off)) > d->len - d->off - 4) {
		snprintf(err, errlen, "the recording is truncated at byte %zu", d->off);
		return SL_EFAIL;
	}
	if (n > d->aev) {
		unsigned char *ne = realloc(d->ev, n);
		if (!ne) {
			snprintf(err, errlen, "out of memory");
			return SL_EFAIL;
		}
		d->ev = ne;
		d->aev = n;
	}
	memcpy(d->ev, d->data + d->off + 4, n);
	d->off += 4 + n;
	*ev = d->ev;
	*len = n;
	*what = SL_MY_EVENT;
	return SL_OK;
}

int sl_my_dump_read(struct sl_my_dump *d, int timeout_ms, enum sl_my_read *what, const unsigned char **ev,
		    size_t *len, char *err, size_t errlen)
{
	unsigned long n;
	const unsigned char *p;

	*what = SL_MY_TIMEOUT;
	if (d->data)
		return replay_read(d, what, ev, len, err, errlen);
	if (!buffered(d->c)) {
		struct pollfd pfd = { .fd = (int)mysql_get_socket(d->c), .events = POLLIN };
		int r = poll(&pfd, 1, timeout_ms < 0 ? 0 : timeout_ms);
		if (r < 0 && errno != EINTR) {
			snprintf(err, errlen, "waiting for the binlog stream: %s", sl_strerror(errno));
			return SL_EFAIL;
		}
		if (r <= 0) {
			if (d->silence_ms > 0 && sl_mono_ms() - d->last_rx_ms >= d->silence_ms) {
				snprintf(err, errlen, "the server sent nothing, not even a heartbeat, for %" PRId64 " ms: the "
					 "connection is taken as dead", sl_mono_ms() - d->last_rx_ms);
				return SL_EFAIL;
			}
			return SL_OK;
		}
	}
	n = mysql_net_read_packet(d->c);
	if (n == packet_error || n == 0) {
		if (mysql_errno(d->c))
			return sl_my_err(err, errlen, "reading the binlog stream", d->c);
		snprintf(err, errlen, "reading the binlog stream: the connection was closed");
		return SL_EFAIL;
	}
	d->last_rx_ms = sl_mono_ms();
	p = d->c->net.read_pos;
	if (p[0] == 0xfe && n < 8) {
		*what = SL_MY_EOF;
		return SL_OK;
	}
	if (p[0] != 0x00) {
		snprintf(err, errlen, "reading the binlog stream: a packet that is no event (first byte 0x%02x)", p[0]);
		return SL_EFAIL;
	}
	*ev = p + 1;
	*len = n - 1;
	*what = SL_MY_EVENT;
	if (d->record) {
		unsigned char h[4];
		sl_put_u32(h, (uint32_t)(n - 1));
		if (fwrite(h, 1, 4, d->record) != 4 || fwrite(p + 1, 1, n - 1, d->record) != n - 1) {
			snprintf(err, errlen, "writing the recording: %s", sl_strerror(errno));
			return SL_EFAIL;
		}
	}
	return SL_OK;
}

int sl_my_dump_record(struct sl_my_dump *d, FILE *out, char *err, size_t errlen)
{
	if (fwrite(SL_MY_RECORDING_MAGIC, 1, 8, out) != 8) {
		snprintf(err, errlen, "writing the recording: %s", sl_strerror(errno));
		return SL_EFAIL;
	}
	d->record = out;
	return SL_OK;
}

int sl_my_dump_open_replay(struct sl_my_dump **out, const char *path, char *err, size_t errlen)
{
	struct sl_my_dump *d = calloc(1, sizeof *d);
	char *data;
	size_t len;

	*out = NULL;
	if (!d) {
		snprintf(err, errlen, "out of memory");
		return SL_EFAIL;
	}
	if (sl_read_file(path, &data, &len, err, errlen) != 0) {
		if (!err[0])
			snprintf(err, errlen, "%s: no such recording", path);
		free(d);
		return SL_EFAIL;
	}
	if (len < 8 || memcmp(data, SL_MY_RECORDING_MAGIC, 8) != 0) {
		snprintf(err, errlen, "%s is not a binlog recording", path);
		free(data);
		free(d);
		return SL_EFAIL;
	}
	d->data = (unsigned char *)data;
	d->len = len;
	d->off = 8;
	d->checksum = SL_BL_CHECKSUM_CRC32;  /* the recordings' servers had binlog_checksum=CRC32 */
	*out = d;
	return SL_OK;
}
