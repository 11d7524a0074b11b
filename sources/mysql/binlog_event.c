/*
 * sources/mysql/binlog_event.c: binlog event framing and the events a CDC
 * reader needs (the formats are in binlog_event.h).  Every read goes
 * through a bounds-checked reader: a malformed event is an error, never an
 * over-read.
 */
#include "sources/mysql/binlog_event.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "sources/mysql/gtid.h"
#include "sources/mysql/mysql_charset.h"

/* A little-endian reader over [p, end).  Reads past the end set bad and
 * return zeros, so a parser can read a whole structure and check once. */
struct rd {
	const unsigned char *p, *end;
	bool bad;
};

static bool rd_need(struct rd *r, size_t n)
{
	if (r->bad || (size_t)(r->end - r->p) < n) {
		r->bad = true;
		return false;
	}
	return true;
}

static uint64_t rd_le(struct rd *r, size_t n)
{
	uint64_t v = 0;

	if (!rd_need(r, n))
		return 0;
	for (size_t i = 0; i < n; i++)
		v |= (uint64_t)r->p[i] << (8 * i);
	r->p += n;
	return v;
}

static uint8_t rd_u8(struct rd *r) { return (uint8_t)rd_le(r, 1); }
static uint16_t rd_u16(struct rd *r) { return (uint16_t)rd_le(r, 2); }
static uint32_t rd_u32(struct rd *r) { return (uint32_t)rd_le(r, 4); }
static uint64_t rd_u64(struct rd *r) { return rd_le(r, 8); }

static const unsigned char *rd_bytes(struct rd *r, size_t n)
{
	const unsigned char *p = r->p;

	if (!rd_need(r, n))
		return NULL;
	r->p += n;
	return p;
}

static size_t rd_left(const struct rd *r)
{
	return r->bad ? 0 : (size_t)(r->end - r->p);
}

int sl_binlog_packed_int(const unsigned char **p, const unsigned char *end, uint64_t *out)
{
	struct rd r = { *p, end, false };
	uint8_t b = rd_u8(&r);

	if (r.bad || b == 251 || b == 255)
		return -1;
	if (b < 251)
		*out = b;
	else if (b == 252)
		*out = rd_le(&r, 2);
	else if (b == 253)
		*out = rd_le(&r, 3);
	else
		*out = rd_le(&r, 8);
	if (r.bad)
		return -1;
	*p = r.p;
	return 0;
}

static uint64_t rd_packed(struct rd *r)
{
	uint64_t v = 0;

	if (r->bad || sl_binlog_packed_int(&r->p, r->end, &v) < 0) {
		r->bad = true;
		return 0;
	}
	return v;
}

const char *sl_binlog_type_name(uint8_t type, char buf[static 16])
{
	switch (type) {
	case SL_BL_START_V3: return "START_V3";
	case SL_BL_QUERY: return "QUERY";
	case SL_BL_STOP: return "STOP";
	case SL_BL_ROTATE: return "ROTATE";
	case SL_BL_INTVAR: return "INTVAR";
	case SL_BL_RAND: return "RAND";
	case SL_BL_USER_VAR: return "USER_VAR";
	case SL_BL_FORMAT_DESCRIPTION: return "FORMAT_DESCRIPTION";
	case SL_BL_XID: return "XID";
	case SL_BL_TABLE_MAP: return "TABLE_MAP";
	case SL_BL_WRITE_ROWS_V0: return "WRITE_ROWS_V0";
	case SL_BL_UPDATE_ROWS_V0: return "UPDATE_ROWS_V0";
	case SL_BL_DELETE_ROWS_V0: return "DELETE_ROWS_V0";
	case SL_BL_WRITE_ROWS_V1: return "WRITE_ROWS_V1";
	case SL_BL_UPDATE_ROWS_V1: return "UPDATE_ROWS_V1";
	case SL_BL_DELETE_ROWS_V1: return "DELETE_ROWS_V1";
	case SL_BL_INCIDENT: return "INCIDENT";
	case SL_BL_HEARTBEAT: return "HEARTBEAT";
	case SL_BL_IGNORABLE: return "IGNORABLE";
	case SL_BL_ROWS_QUERY: return "ROWS_QUERY";
	case SL_BL_WRITE_ROWS_V2: return "WRITE_ROWS_V2";
	case SL_BL_UPDATE_ROWS_V2: return "UPDATE_ROWS_V2";
	case SL_BL_DELETE_ROWS_V2: return "DELETE_ROWS_V2";
	case SL_BL_GTID: return "GTID";
	case SL_BL_ANONYMOUS_GTID: return "ANONYMOUS_GTID";
	case SL_BL_PREVIOUS_GTIDS: return "PREVIOUS_GTIDS";
	case SL_BL_XA_PREPARE: return "XA_PREPARE";
	case SL_BL_PARTIAL_UPDATE_ROWS: return "PARTIAL_UPDATE_ROWS";
	case SL_BL_TRANSACTION_PAYLOAD: return "TRANSACTION_PAYLOAD";
	case SL_BL_HEARTBEAT_V2: return "HEARTBEAT_V2";
	case SL_BL_GTID_TAGGED: return "GTID_TAGGED";
	case SL_BL_MARIADB_ANNOTATE_ROWS: return "ANNOTATE_ROWS";
	case SL_BL_MARIADB_BINLOG_CHECKPOINT: return "BINLOG_CHECKPOINT";
	case SL_BL_MARIADB_GTID: return "MARIADB_GTID";
	case SL_BL_MARIADB_GTID_LIST: return "GTID_LIST";
	case SL_BL_MARIADB_START_ENCRYPTION: return "START_ENCRYPTION";
	case SL_BL_MARIADB_QUERY_COMPRESSED: return "QUERY_COMPRESSED";
	default:
		if (type >= SL_BL_MARIADB_WRITE_ROWS_COMPRESSED_V0 && type <= SL_BL_MARIADB_DELETE_ROWS_COMPRESSED_V1)
			return "ROWS_COMPRESSED";
		snprintf(buf, 16, "type %u", type);
		return buf;
	}
}

void sl_binlog_reader_init(struct sl_binlog_reader *r, enum sl_bl_checksum checksum, const char *file)
{
	memset(r, 0, sizeof *r);
	r->checksum = checksum == SL_BL_CHECKSUM_CRC32 ? SL_BL_CHECKSUM_CRC32 : SL_BL_CHECKSUM_OFF;
	if (file)
		snprintf(r->file, sizeof r->file, "%s", file);
}

/* "mb.000002:1234", "position 1234", or "an artificial event": where an
 * event is, for messages. */
static const char *where(const struct sl_binlog_reader *r, const struct sl_binlog_event *ev, char *buf,
			 size_t len)
{
	if (ev->h.log_pos == 0)
		snprintf(buf, len, "an artificial event%s%s", r->file[0] ? " in " : "", r->file);
	else if (r->file[0])
		snprintf(buf, len, "%s:%" PRIu64, r->file, ev->start);
	else
		snprintf(buf, len, "position %" PRIu64, ev->start);
	return buf;
}

static int fail(const struct sl_binlog_reader *r, const struct sl_binlog_event *ev, char *err, size_t errlen,
		const char *what)
{
	char w[SL_BL_FILE_MAX + 64], tb[16];

	snprintf(err, errlen, "malformed %s event at %s: %s", sl_binlog_type_name(ev->h.type, tb),
		 where(r, ev, w, sizeof w), what);
	return -1;
}

/* The post-header length the format gives event type t (0 if unknown). */
static unsigned post_header_len(const struct sl_binlog_reader *r, uint8_t t)
{
	if (!r->have_fde || t == 0 || t > r->fde.n_post_header)
		return 0;
	return r->fde.post_header_len[t - 1];
}

/* Whether a server version writes the checksum algorithm into its format
 * description: MySQL from 5.6.1, MariaDB from 5.3. */
static bool version_has_checksum(const char *v, bool mariadb)
{
	unsigned long part[3] = { 0, 0, 0 };
	const char *p = v;

	for (int i = 0; i < 3; i++) {
		if (*p < '0' || *p > '9')
			return false;
		while (*p >= '0' && *p <= '9') {
			if (part[i] < 100000)
				part[i] = part[i] * 10 + (unsigned long)(*p - '0');
			p++;
		}
		if (i < 2) {
			if (*p != '.')
				return false;
			p++;
		}
	}
	if (mariadb)
		return part[0] > 5 || (part[0] == 5 && part[1] >= 3);
	return part[0] > 5 || (part[0] == 5 && (part[1] > 6 || (part[1] == 6 && part[2] >= 1)));
}

/* Parses a FORMAT_DESCRIPTION from its whole event bytes (the checksum
 * algorithm is needed before the checksum can be checked). */
static int parse_fde(const unsigned char *buf, size_t len, struct sl_binlog_fde *f, const char **why)
{
	struct rd r = { buf + SL_BL_HEADER_LEN, buf + len, false };
	const unsigned char *sv;
	size_t rest;

	memset(f, 0, sizeof *f);
	f->binlog_version = rd_u16(&r);
	sv = rd_bytes(&r, 50);
	f->create_timestamp = rd_u32(&r);
	f->header_len = rd_u8(&r);
	if (r.bad) {
		*why = "truncated";
		return -1;
	}
	memcpy(f->server_version, sv, 50);
	f->server_version[50] = '\0';
	f->mariadb = strstr(f->server_version, "MariaDB") != NULL;
	if (f->binlog_version != 4) {
		*why = "binlog version is not 4 (MySQL 5.0 or later is needed)";
		return -1;
	}
	if (f->header_len != SL_BL_HEADER_LEN) {
		*why = "common header length is not 19";
		return -1;
	}
	rest = rd_left(&r);
	if (version_has_checksum(f->server_version, f->mariadb)) {
		if (rest < 5) {
			*why = "truncated checksum algorithm";
			return -1;
		}
		f->checksum_alg = buf[len - 5];
		rest -= 5;
		if (f->checksum_alg != SL_BL_CHECKSUM_OFF && f->checksum_alg != SL_BL_CHECKSUM_CRC32) {
			*why = "unknown checksum algorithm";
			return -1;
		}
	} else {
		f->checksum_alg = SL_BL_CHECKSUM_OFF;
	}
	if (rest > sizeof f->post_header_len)
		rest = sizeof f->post_header_len;
	f->n_post_header = (uint16_t)rest;
	memcpy(f->post_header_len, r.p, rest);
	return 0;
}

/* Event types whose changes this decoder cannot read, and why. */
static const char *unsupported(uint8_t t)
{
	if (t >= SL_BL_WRITE_ROWS_V0 && t <= SL_BL_DELETE_ROWS_V0)
		return "pre-GA rows events (MySQL 5.1.0-5.1.15) are not supported";
	if (t == SL_BL_MARIADB_QUERY_COMPRESSED ||
	    (t >= SL_BL_MARIADB_WRITE_ROWS_COMPRESSED_V0 && t <= SL_BL_MARIADB_DELETE_ROWS_COMPRESSED_V1))
		return "compressed events are not supported (set log_bin_compress=OFF on the server)";
	if (t == SL_BL_TRANSACTION_PAYLOAD)
		return "compressed transactions are not supported (set binlog_transaction_compression=OFF)";
	if (t == SL_BL_PARTIAL_UPDATE_ROWS)
		return "partial JSON updates are not supported (set binlog_row_value_options='')";
	if (t == SL_BL_GTID_TAGGED)
		return "tagged GTIDs are not supported";
	return NULL;
}

static int decode_query(const struct sl_binlog_reader *r, struct sl_binlog_event *ev, char *err, size_t errlen)
{
	struct rd b = { ev->body, ev->body + ev->body_len, false };
	struct sl_binlog_query *q = &ev->u.query;
	unsigned ph = post_header_len(r, SL_BL_QUERY);
	uint8_t db_len;
	const unsigned char *db;

	if (ph < 13)
		return fail(r, ev, err, errlen, "the format gives QUERY a post-header shorter than 13 bytes");
	q->thread_id = rd_u32(&b);
	q->exec_time = rd_u32(&b);
	db_len = rd_u8(&b);
	q->error_code = rd_u16(&b);
	q->status_vars_len = rd_u16(&b);
	rd_bytes(&b, ph - 13);
	q->status_vars = rd_bytes(&b, q->status_vars_len);
	db = rd_bytes(&b, (size_t)db_len + 1);
	if (b.bad)
		return fail(r, ev, err, errlen, "truncated");
	if (db[db_len] != '\0')
		return fail(r, ev, err, errlen, "the database name is not NUL-terminated");
	q->db = (const char *)db;
	q->db_len = db_len;
	q->sql = (const char *)b.p;
	q->sql_len = rd_left(&b);
	ev->kind = SL_BLK_QUERY;
	return 0;
}

static int decode_mariadb_gtid(const struct sl_binlog_reader *r, struct sl_binlog_event *ev, char *err,
			       size_t errlen)
{
	struct rd b = { ev->body, ev->body + ev->body_len, false };
	struct sl_binlog_mariadb_gtid *g = &ev->u.mariadb_gtid;

	memset(g, 0, sizeof *g);
	g->seq_no = rd_u64(&b);
	g->domain_id = rd_u32(&b);
	g->server_id = ev->h.server_id;
	g->flags = rd_u8(&b);
	if (g->flags & SL_MARIADB_FL_GROUP_COMMIT_ID) {
		g->has_commit_id = true;
		g->commit_id = rd_u64(&b);
	} else if (g->flags & (SL_MARIADB_FL_PREPARED_XA | SL_MARIADB_FL_COMPLETED_XA)) {
		g->has_xid = true;
		g->xid.format_id = rd_u32(&b);
		g->xid.gtrid_len = rd_u8(&b);
		g->xid.bqual_len = rd_u8(&b);
		if (g->xid.gtrid_len > 64 || g->xid.bqual_len > 64)
			return fail(r, ev, err, errlen, "XA xid longer than 64 bytes");
		g->xid.data = rd_bytes(&b, g->xid.gtrid_len + g->xid.bqual_len);
	} else {
		rd_bytes(&b, 6);  /* zero padding to the 19-byte post-header */
	}
	if (b.bad)
		return fail(r, ev, err, errlen, "truncated");
	if (rd_left(&b) > 0) {
		g->flags_extra = rd_u8(&b);
		if (g->flags_extra & SL_MARIADB_FLX_MULTI_ENGINE)
			g->extra_engines = rd_u8(&b);
		if (g->flags_extra & (SL_MARIADB_FLX_COMMIT_ALTER | SL_MARIADB_FLX_ROLLBACK_ALTER))
			g->sa_seq_no = rd_u64(&b);
		if (b.bad)
			return fail(r, ev, err, errlen, "truncated extra flags");
	}
	ev->kind = SL_BLK_MARIADB_GTID;
	return 0;
}

static int decode_mysql_gtid(const struct sl_binlog_reader *r, struct sl_binlog_event *ev, char *err,
			     size_t errlen)
{
	struct rd b = { ev->body, ev->body + ev->body_len, false };
	struct sl_binlog_mysql_gtid *g = &ev->u.mysql_gtid;
	const unsigned char *sid;

	memset(g, 0, sizeof *g);
	g->anonymous = ev->h.type == SL_BL_ANONYMOUS_GTID;
	g->flags = rd_u8(&b);
	sid = rd_bytes(&b, 16);
	g->gno = rd_u64(&b);
	if (b.bad)
		return fail(r, ev, err, errlen, "truncated");
	memcpy(g->sid, sid, 16);
	if (!g->anonymous && (g->gno < 1 || g->gno > SL_MYSQL_GNO_MAX))
		return fail(r, ev, err, errlen, "transaction number out of range");
	if (rd_left(&b) > 0 && b.p[0] == 2) {
		rd_u8(&b);
		g->last_committed = (int64_t)rd_u64(&b);
		g->sequence_number = (int64_t)rd_u64(&b);
		if (b.bad)
			return fail(r, ev, err, errlen, "truncated logical clock");
		g->has_logical_clock = true;
		if (rd_left(&b) >= 7) {
			g->immediate_commit_ts = rd_le(&b, 7);
			if (g->immediate_commit_ts & (UINT64_C(1) << 55)) {
				g->immediate_commit_ts &= ~(UINT64_C(1) << 55);
				g->original_commit_ts = rd_le(&b, 7);
			} else {
				g->original_commit_ts = g->immediate_commit_ts;
			}
			if (b.bad)
				return fail(r, ev, err, errlen, "truncated commit timestamps");
			g->has_commit_ts = true;
			if (rd_left(&b) > 0) {
				g->tx_length = rd_packed(&b);
				if (b.bad)
					return fail(r, ev, err, errlen, "truncated transaction length");
				g->has_tx_length = true;
			}
			/* server versions follow: not needed */
		}
	}
	ev->kind = SL_BLK_MYSQL_GTID;
	return 0;
}

static int decode_heartbeat_v2(const struct sl_binlog_reader *r, struct sl_binlog_event *ev, char *err,
			       size_t errlen)
{
	struct rd b = { ev->body, ev->body + ev->body_len, false };
	struct sl_binlog_heartbeat *h = &ev->u.heartbeat;

	memset(h, 0, sizeof *h);
	while (rd_left(&b) > 0) {
		uint8_t t = rd_u8(&b);
		uint64_t n;
		const unsigned char *v;
		if (t == 0)
			continue;  /* end of the header fields */
		n = rd_packed(&b);
		if (b.bad || n > rd_left(&b))
			return fail(r, ev, err, errlen, "truncated field");
		v = rd_bytes(&b, (size_t)n);
		if (t == 1) {
			h->file = (const char *)v;
			h->file_len = (size_t)n;
		} else if (t == 2) {
			const unsigned char *q = v;
			if (sl_binlog_packed_int(&q, v + n, &h->position) < 0)
				return fail(r, ev, err, errlen, "bad position field");
		}
	}
	ev->kind = SL_BLK_HEARTBEAT;
	return 0;
}

/* The body of events with a fixed layout. */
static int decode_body(struct sl_binlog_reader *r, struct sl_binlog_event *ev, char *err, size_t errlen)
{
	struct rd b = { ev->body, ev->body + ev->body_len, false };
	unsigned ph = post_header_len(r, ev->h.type);

	switch (ev->h.type) {
	case SL_BL_ROTATE:
		/* Before any format description the post-header is v4's 8 bytes. */
		if (!r->have_fde)
			ph = 8;
		if (ph < 8)
			return fail(r, ev, err, errlen, "the format gives ROTATE no position");
		ev->u.rotate.position = rd_u64(&b);
		rd_bytes(&b, ph - 8);
		if (b.bad)
			return fail(r, ev, err, errlen, "truncated");
		ev->u.rotate.file = (const char *)b.p;
		ev->u.rotate.file_len = rd_left(&b);
		if (ev->u.rotate.file_len == 0 || ev->u.rotate.file_len > SL_BL_FILE_MAX ||
		    memchr(b.p, '\0', ev->u.rotate.file_len))
			return fail(r, ev, err, errlen, "bad file name");
		memcpy(r->file, b.p, ev->u.rotate.file_len);
		r->file[ev->u.rotate.file_len] = '\0';
		ev->kind = SL_BLK_ROTATE;
		return 0;
	case SL_BL_QUERY:
		return decode_query(r, ev, err, errlen);
	case SL_BL_XID:
		rd_bytes(&b, ph);
		ev->u.xid = rd_u64(&b);
		if (b.bad)
			return fail(r, ev, err, errlen, "truncated");
		ev->kind = SL_BLK_XID;
		return 0;
	case SL_BL_TABLE_MAP:
		ev->kind = SL_BLK_TABLE_MAP;
		return 0;
	case SL_BL_WRITE_ROWS_V1: case SL_BL_UPDATE_ROWS_V1: case SL_BL_DELETE_ROWS_V1:
	case SL_BL_WRITE_ROWS_V2: case SL_BL_UPDATE_ROWS_V2: case SL_BL_DELETE_ROWS_V2:
		ev->kind = SL_BLK_ROWS;
		return 0;
	case SL_BL_MARIADB_GTID:
		return decode_mariadb_gtid(r, ev, err, errlen);
	case SL_BL_MARIADB_GTID_LIST: {
		uint32_t v = rd_u32(&b);
		struct sl_binlog_gtid_list *l = &ev->u.gtid_list;
		l->count = v & 0x0fffffff;
		l->flags = (uint8_t)(v >> 28);
		l->entries = rd_bytes(&b, (size_t)l->count * 16);
		if (b.bad)
			return fail(r, ev, err, errlen, "truncated");
		ev->kind = SL_BLK_MARIADB_GTID_LIST;
		return 0;
	}
	case SL_BL_GTID:
	case SL_BL_ANONYMOUS_GTID:
		return decode_mysql_gtid(r, ev, err, errlen);
	case SL_BL_HEARTBEAT:
		rd_bytes(&b, ph);
		if (b.bad)
			return fail(r, ev, err, errlen, "truncated");
		ev->u.heartbeat.file = (const char *)b.p;
		ev->u.heartbeat.file_len = rd_left(&b);
		ev->u.heartbeat.position = ev->h.log_pos;
		ev->kind = SL_BLK_HEARTBEAT;
		return 0;
	case SL_BL_HEARTBEAT_V2:
		return decode_heartbeat_v2(r, ev, err, errlen);
	case SL_BL_MARIADB_ANNOTATE_ROWS:
	case SL_BL_ROWS_QUERY:
		rd_bytes(&b, ph);
		if (ev->h.type == SL_BL_ROWS_QUERY)
			rd_u8(&b);  /* a length byte, capped at 255: the text runs to the end */
		if (b.bad)
			return fail(r, ev, err, errlen, "truncated");
		ev->u.annotate.p = (const char *)b.p;
		ev->u.annotate.len = rd_left(&b);
		ev->kind = SL_BLK_ANNOTATE;
		return 0;
	case SL_BL_XA_PREPARE: {
		struct sl_binlog_xa_prepare *x = &ev->u.xa_prepare;
		rd_bytes(&b, ph);
		x->one_phase = rd_u8(&b) != 0;
		x->xid.format_id = rd_u32(&b);
		x->xid.gtrid_len = rd_u32(&b);
		x->xid.bqual_len = rd_u32(&b);
		if (!b.bad && (x->xid.gtrid_len > 64 || x->xid.bqual_len > 64))
			return fail(r, ev, err, errlen, "XA xid longer than 64 bytes");
		x->xid.data = rd_bytes(&b, (size_t)x->xid.gtrid_len + x->xid.bqual_len);
		if (b.bad)
			return fail(r, ev, err, errlen, "truncated");
		ev->kind = SL_BLK_XA_PREPARE;
		return 0;
	}
	case SL_BL_INCIDENT: {
		struct sl_binlog_incident *in = &ev->u.incident;
		in->incident = rd_u16(&b);
		rd_bytes(&b, ph > 2 ? ph - 2 : 0);
		in->message_len = rd_u8(&b);
		in->message = (const char *)rd_bytes(&b, in->message_len);
		if (b.bad)
			return fail(r, ev, err, errlen, "truncated");
		ev->kind = SL_BLK_INCIDENT;
		return 0;
	}
	case SL_BL_PREVIOUS_GTIDS:
		ev->kind = SL_BLK_PREVIOUS_GTIDS;
		return 0;
	default:
		ev->kind = SL_BLK_OTHER;
		return 0;
	}
}

int sl_binlog_decode(struct sl_binlog_reader *r, const unsigned char *buf, size_t len, struct sl_binlog_event *ev,
		     char *err, size_t errlen)
{
	struct rd h = { buf, buf + len, false };
	struct sl_binlog_fde fde;
	uint8_t alg = r->checksum;
	bool trailer = alg == SL_BL_CHECKSUM_CRC32;  /* 4 checksum bytes end the event */
	const char *why;
	char tb[16], w[SL_BL_FILE_MAX + 64];

	memset(ev, 0, sizeof *ev);
	if (len < SL_BL_HEADER_LEN) {
		snprintf(err, errlen, "malformed binlog event: %zu bytes, shorter than the 19-byte header", len);
		return -1;
	}
	ev->h.timestamp = rd_u32(&h);
	ev->h.type = rd_u8(&h);
	ev->h.server_id = rd_u32(&h);
	ev->h.event_size = rd_u32(&h);
	ev->h.log_pos = rd_u32(&h);
	ev->h.flags = rd_u16(&h);
	if (ev->h.log_pos != 0 && ev->h.log_pos >= ev->h.event_size) {
		ev->end = ev->h.log_pos;
		ev->start = ev->h.log_pos - ev->h.event_size;
	}
	if (ev->h.event_size != len)
		return fail(r, ev, err, errlen, "the header's event size differs from the event's length");

	if (ev->h.type == SL_BL_FORMAT_DESCRIPTION) {
		if (parse_fde(buf, len, &fde, &why) < 0)
			return fail(r, ev, err, errlen, why);
		alg = fde.checksum_alg;
		/* A format description of a checksum-aware server always ends in
		 * 4 checksum bytes, which mean something only with CRC32. */
		trailer = version_has_checksum(fde.server_version, fde.mariadb);
	} else if (!r->have_fde && ev->h.type != SL_BL_ROTATE && ev->h.type != SL_BL_HEARTBEAT &&
		   ev->h.type != SL_BL_HEARTBEAT_V2) {
		return fail(r, ev, err, errlen, "no FORMAT_DESCRIPTION event came before it");
	}

	ev->body = buf + SL_BL_HEADER_LEN;
	ev->body_len = len - SL_BL_HEADER_LEN;
	if (trailer) {
		if (ev->body_len < SL_BL_CHECKSUM_LEN)
			return fail(r, ev, err, errlen, "too short for its checksum");
		ev->body_len -= SL_BL_CHECKSUM_LEN;
		if (alg == SL_BL_CHECKSUM_CRC32) {
			uint32_t stored = (uint32_t)buf[len - 4] | (uint32_t)buf[len - 3] << 8 |
					  (uint32_t)buf[len - 2] << 16 | (uint32_t)buf[len - 1] << 24;
			uint32_t computed = (uint32_t)crc32(0L, buf, (uInt)(len - 4));
			if (stored != computed) {
				snprintf(err, errlen, "binlog checksum mismatch in %s event at %s (stored 0x%08" PRIx32
					 ", computed 0x%08" PRIx32 "): the event is corrupt",
					 sl_binlog_type_name(ev->h.type, tb), where(r, ev, w, sizeof w), stored, computed);
				return -1;
			}
		}
	}

	why = unsupported(ev->h.type);
	if (why) {
		snprintf(err, errlen, "cannot read %s event at %s: %s", sl_binlog_type_name(ev->h.type, tb),
			 where(r, ev, w, sizeof w), why);
		return -1;
	}
	if (ev->h.type == SL_BL_FORMAT_DESCRIPTION) {
		ev->u.fde = fde;
		ev->kind = SL_BLK_FORMAT_DESCRIPTION;
		r->fde = fde;
		r->have_fde = true;
		r->checksum = fde.checksum_alg;
		r->events++;
		return 0;
	}
	if (decode_body(r, ev, err, errlen) < 0)
		return -1;
	r->events++;
	return 0;
}

void sl_binlog_gtid_list_get(const struct sl_binlog_gtid_list *l, uint32_t i, struct sl_mariadb_gtid *out)
{
	struct rd b = { l->entries + (size_t)i * 16, l->entries + (size_t)i * 16 + 16, false };

	out->domain = rd_u32(&b);
	out->server = rd_u32(&b);
	out->seq = rd_u64(&b);
}

/* ---- TABLE_MAP ---- */

void sl_binlog_table_map_init(struct sl_binlog_table_map *tm)
{
	memset(tm, 0, sizeof *tm);
}

void sl_binlog_table_map_free(struct sl_binlog_table_map *tm)
{
	free(tm->col_store);
	free(tm->text);
	free(tm->strs);
	free(tm->keys);
	memset(tm, 0, sizeof *tm);
}

/* The columns that have a bit in the SIGNEDNESS field.  MySQL counts the
 * number types by their binlog type (is_numeric_type in its log_event.cc).
 * MariaDB counts every column whose Field reports a signedness in its
 * Binlog_type_info, that is every Field_num: YEAR (a Field_tiny, always
 * flagged unsigned) and the pre-5.0 DECIMAL as well; BIT reports none.  A
 * column counted on one side and not the other shifts the flags of every
 * later number column. */
static bool is_numeric(uint8_t t, bool mariadb)
{
	if (mariadb && (t == SL_MYSQL_YEAR || t == SL_MYSQL_DECIMAL))
		return true;
	return t == SL_MYSQL_TINY || t == SL_MYSQL_SHORT || t == SL_MYSQL_INT24 || t == SL_MYSQL_LONG ||
	       t == SL_MYSQL_LONGLONG || t == SL_MYSQL_NEWDECIMAL || t == SL_MYSQL_FLOAT || t == SL_MYSQL_DOUBLE;
}

static bool is_character(uint8_t t, bool mariadb)
{
	return t == SL_MYSQL_STRING || t == SL_MYSQL_VAR_STRING || t == SL_MYSQL_VARCHAR || t == SL_MYSQL_BLOB ||
	       (mariadb && t == SL_MYSQL_GEOMETRY);
}

static bool is_enum_set(uint8_t t)
{
	return t == SL_MYSQL_ENUM || t == SL_MYSQL_SET;
}

/* Reads column c's metadata from m and checks it.  Returns NULL or why not. */
static const char *read_column_meta(struct sl_mysql_column *c, struct rd *m)
{
	uint8_t b0, b1;

	c->real_type = c->type;
	switch (c->type) {
	case SL_MYSQL_STRING:
		/* byte 0: the real type, with bits 4-5 inverted holding bits 8-9 of
		 * the length when it exceeds 255; byte 1: the length's low byte. */
		b0 = rd_u8(m);
		b1 = rd_u8(m);
		c->meta = (uint16_t)(b0 << 8 | b1);
		if ((b0 & 0x30) != 0x30) {
			c->max_len = (uint32_t)b1 | (uint32_t)((b0 & 0x30) ^ 0x30) << 4;
			c->real_type = b0 | 0x30;
		} else {
			c->max_len = b1;
			c->real_type = b0;
		}
		if (c->real_type == SL_MYSQL_ENUM || c->real_type == SL_MYSQL_SET) {
			c->pack_len = b1;
			c->max_len = 0;
			if (c->real_type == SL_MYSQL_ENUM ? (b1 < 1 || b1 > 2) : (b1 < 1 || b1 > 8))
				return "bad ENUM/SET size";
		} else if (c->real_type != SL_MYSQL_STRING) {
			return "unknown real type of a STRING column";
		}
		return NULL;
	case SL_MYSQL_VARCHAR:
	case SL_MYSQL_VAR_STRING:
		c->meta = rd_u16(m);
		c->max_len = c->meta;
		return NULL;
	case SL_MYSQL_BIT:
		b0 = rd_u8(m);  /* bits beyond whole bytes */
		b1 = rd_u8(m);  /* whole bytes */
		c->meta = (uint16_t)(b1 << 8 | b0);
		if (b0 > 7 || b1 > 8 || (unsigned)b1 * 8 + b0 > 64 || (unsigned)b1 * 8 + b0 == 0)
			return "bad BIT size";
		c->nbits = (uint8_t)(b1 * 8 + b0);
		return NULL;
	case SL_MYSQL_NEWDECIMAL:
		c->precision = rd_u8(m);
		c->scale = rd_u8(m);
		c->meta = (uint16_t)(c->precision << 8 | c->scale);
		if (c->precision < 1 || c->precision > 65 || c->scale > 38 || c->scale > c->precision)
			return "bad DECIMAL precision or scale";
		return NULL;
	case SL_MYSQL_FLOAT:
	case SL_MYSQL_DOUBLE:
		c->pack_len = rd_u8(m);
		c->meta = c->pack_len;
		if (c->pack_len != (c->type == SL_MYSQL_FLOAT ? 4 : 8))
			return "bad FLOAT/DOUBLE size";
		return NULL;
	case SL_MYSQL_BLOB:
	case SL_MYSQL_GEOMETRY:
	case SL_MYSQL_JSON:
	case SL_MYSQL_VECTOR:
		c->pack_len = rd_u8(m);
		c->meta = c->pack_len;
		if (c->pack_len < 1 || c->pack_len > 4)
			return "bad length size";
		return NULL;
	case SL_MYSQL_TIME2:
	case SL_MYSQL_DATETIME2:
	case SL_MYSQL_TIMESTAMP2:
		c->fsp = rd_u8(m);
		c->meta = c->fsp;
		if (c->fsp > 6)
			return "fractional seconds beyond 6 digits";
		return NULL;
	case SL_MYSQL_DECIMAL: case SL_MYSQL_TINY: case SL_MYSQL_SHORT: case SL_MYSQL_LONG:
	case SL_MYSQL_NULL: case SL_MYSQL_TIMESTAMP: case SL_MYSQL_LONGLONG: case SL_MYSQL_INT24:
	case SL_MYSQL_DATE: case SL_MYSQL_TIME: case SL_MYSQL_DATETIME: case SL_MYSQL_YEAR:
	case SL_MYSQL_NEWDATE:
		return NULL;
	default:
		return "unknown column type";
	}
}

/* Applies a DEFAULT_CHARSET (or ENUM_AND_SET_DEFAULT_CHARSET) field to the
 * columns that include() selects. */
static const char *apply_default_charset(struct sl_binlog_table_map *tm, struct rd *v, bool mariadb, bool enum_set)
{
	uint64_t def = rd_packed(v);
	uint32_t k = 0;

	if (v->bad)
		return "truncated default charset";
	for (uint32_t i = 0; i < tm->ncols; i++) {
		struct sl_mysql_column *c = &tm->cols[i];
		if (enum_set ? is_enum_set(c->real_type) : is_character(c->real_type, mariadb)) {
			c->collation = (uint32_t)def;
			k++;
		}
	}
	while (rd_left(v) > 0) {
		uint64_t idx = rd_packed(v), coll = rd_packed(v);
		uint32_t n = 0;
		if (v->bad || idx >= k)
			return "bad charset pair";
		for (uint32_t i = 0; i < tm->ncols; i++) {
			struct sl_mysql_column *c = &tm->cols[i];
			if (enum_set ? is_enum_set(c->real_type) : is_character(c->real_type, mariadb)) {
				if (n++ == idx) {
					c->collation = (uint32_t)coll;
					break;
				}
			}
		}
	}
	return NULL;
}

static const char *apply_column_charsets(struct sl_binlog_table_map *tm, struct rd *v, bool mariadb, bool enum_set)
{
	for (uint32_t i = 0; i < tm->ncols; i++) {
		struct sl_mysql_column *c = &tm->cols[i];
		if (enum_set ? is_enum_set(c->real_type) : is_character(c->real_type, mariadb)) {
			c->collation = (uint32_t)rd_packed(v);
			if (v->bad)
				return "too few column charsets";
		}
	}
	return rd_left(v) ? "too many column charsets" : NULL;
}

/* Copies n bytes into the text store as a NUL-terminated string; returns
 * its offset. */
static size_t put_text(struct sl_binlog_table_map *tm, size_t *used, const unsigned char *p, size_t n)
{
	size_t at = *used;

	memcpy(tm->text + at, p, n);
	tm->text[at + n] = '\0';
	*used += n + 1;
	return at;
}

static const char *read_names(struct sl_binlog_table_map *tm, struct rd *v, size_t *used)
{
	for (uint32_t i = 0; i < tm->ncols; i++) {
		uint64_t n = rd_packed(v);
		const unsigned char *p;
		if (v->bad || n > rd_left(v))
			return "truncated column names";
		p = rd_bytes(v, (size_t)n);
		tm->cols[i].name.p = (const char *)(uintptr_t)put_text(tm, used, p, (size_t)n);
		tm->cols[i].name.len = (uint32_t)n;
	}
	if (rd_left(v))
		return "more column names than columns";
	tm->has_names = true;
	return NULL;
}

/* SET_STR_VALUE / ENUM_STR_VALUE: the strings of every such column.  The
 * values pointers hold indexes into strs until the parse ends. */
static const char *read_values(struct sl_binlog_table_map *tm, struct rd *v, uint8_t type, size_t *used,
			       size_t *nstrs)
{
	for (uint32_t i = 0; i < tm->ncols; i++) {
		struct sl_mysql_column *c = &tm->cols[i];
		uint64_t count;
		if (c->real_type != type)
			continue;
		count = rd_packed(v);
		if (v->bad || count > rd_left(v) || count > 65535)
			return "bad value count";
		c->values = (const struct sl_mysql_str *)(uintptr_t)*nstrs;
		c->nvalues = (uint32_t)count;
		for (uint64_t k = 0; k < count; k++) {
			uint64_t n = rd_packed(v);
			const unsigned char *p;
			if (v->bad || n > rd_left(v))
				return "truncated values";
			p = rd_bytes(v, (size_t)n);
			/* strs has room: every string took at least one byte of the event */
			tm->strs[*nstrs].p = (const char *)(uintptr_t)put_text(tm, used, p, (size_t)n);
			tm->strs[*nstrs].len = (uint32_t)n;
			(*nstrs)++;
		}
	}
	if (rd_left(v))
		return "values for more columns than the table has";
	return NULL;
}

static const char *add_key(struct sl_binlog_table_map *tm, uint64_t col, uint64_t prefix)
{
	if (col >= tm->ncols)
		return "key column out of range";
	if (tm->nkey == tm->akeys) {
		size_t n = tm->akeys ? tm->akeys * 2 : 8;
		uint32_t *k = realloc(tm->keys, n * sizeof *k);
		if (!k)
			return "out of memory";
		tm->keys = k;
		tm->akeys = n;
	}
	tm->keys[tm->nkey++] = (uint32_t)col;
	tm->cols[col].is_key = true;
	tm->cols[col].key_prefix = (uint32_t)prefix;
	return NULL;
}

static const char *read_bitmap_msb(struct sl_binlog_table_map *tm, struct rd *v, bool signedness, bool mariadb)
{
	uint32_t bit = 0;

	for (uint32_t i = 0; i < tm->ncols; i++) {
		struct sl_mysql_column *c = &tm->cols[i];
		bool set;
		if (signedness && !is_numeric(c->real_type, mariadb))
			continue;
		if (bit / 8 >= rd_left(v))
			return "bitmap too short";
		set = (v->p[bit / 8] >> (7 - bit % 8)) & 1;
		bit++;
		if (signedness)
			c->is_unsigned = set;
		else
			c->visible = set;
	}
	return NULL;
}

static const char *read_optional(struct sl_binlog_table_map *tm, struct rd *b, bool mariadb, size_t *used,
				 size_t *nstrs)
{
	while (rd_left(b) > 0) {
		uint8_t type = rd_u8(b);
		uint64_t n = rd_packed(b);
		struct rd v;
		const char *why = NULL;

		if (b->bad || n > rd_left(b))
			return "truncated optional metadata";
		v.p = rd_bytes(b, (size_t)n);
		v.end = v.p + n;
		v.bad = false;
		switch (type) {
		case 1:
			why = read_bitmap_msb(tm, &v, true, mariadb);
			tm->has_signedness = !why;
			break;
		case 2:
			why = apply_default_charset(tm, &v, mariadb, false);
			tm->has_charsets = !why;
			break;
		case 3:
			why = apply_column_charsets(tm, &v, mariadb, false);
			tm->has_charsets = !why;
			break;
		case 4:
			why = read_names(tm, &v, used);
			break;
		case 5:
			why = read_values(tm, &v, SL_MYSQL_SET, used, nstrs);
			tm->has_set_values = !why;
			break;
		case 6:
			why = read_values(tm, &v, SL_MYSQL_ENUM, used, nstrs);
			tm->has_enum_values = !why;
			break;
		case 7:
			for (uint32_t i = 0; i < tm->ncols && !why; i++)
				if (tm->cols[i].real_type == SL_MYSQL_GEOMETRY) {
					tm->cols[i].geometry_type = (int64_t)(rd_packed(&v) & INT64_MAX);
					if (v.bad)
						why = "too few geometry types";
				}
			tm->has_geometry_types = !why;
			break;
		case 8:
			while (!why && rd_left(&v) > 0) {
				uint64_t col = rd_packed(&v);
				why = v.bad ? "truncated key" : add_key(tm, col, 0);
			}
			tm->has_key = !why;
			break;
		case 9:
			while (!why && rd_left(&v) > 0) {
				uint64_t col = rd_packed(&v), prefix = rd_packed(&v);
				why = v.bad ? "truncated key" : add_key(tm, col, prefix);
			}
			tm->has_key = !why;
			break;
		case 10:
			why = apply_default_charset(tm, &v, mariadb, true);
			tm->has_enum_set_charsets = !why;
			break;
		case 11:
			why = apply_column_charsets(tm, &v, mariadb, true);
			tm->has_enum_set_charsets = !why;
			break;
		case 12:
			why = read_bitmap_msb(tm, &v, false, mariadb);
			tm->has_visibility = !why;
			break;
		default:
			break;  /* a later server's field: skipped */
		}
		if (why)
			return why;
	}
	return NULL;
}

int sl_binlog_table_map_parse(struct sl_binlog_table_map *tm, const struct sl_binlog_reader *r,
			      const struct sl_binlog_event *ev, char *err, size_t errlen)
{
	struct rd b = { ev->body, ev->body + ev->body_len, false }, m;
	unsigned ph = post_header_len(r, SL_BL_TABLE_MAP);
	const unsigned char *types, *nulls, *db, *tb;
	uint8_t db_len, tb_len;
	uint64_t ncols, meta_len;
	size_t used = 0, nstrs = 0;
	const char *why = "truncated";
	bool mariadb = r->fde.mariadb;

	tm->ncols = 0;
	tm->nkey = 0;
	tm->nhidden = 0;
	tm->db = tm->table = "";
	tm->has_signedness = tm->has_charsets = tm->has_enum_set_charsets = tm->has_names = false;
	tm->has_enum_values = tm->has_set_values = tm->has_geometry_types = tm->has_key = false;
	tm->has_visibility = false;
	tm->table_id = rd_le(&b, ph == 6 ? 4 : 6);
	tm->flags = rd_u16(&b);
	db_len = rd_u8(&b);
	db = rd_bytes(&b, (size_t)db_len + 1);
	tb_len = rd_u8(&b);
	tb = rd_bytes(&b, (size_t)tb_len + 1);
	ncols = rd_packed(&b);
	if (b.bad)
		goto bad;
	if (db[db_len] != '\0' || tb[tb_len] != '\0') {
		why = "names are not NUL-terminated";
		goto bad;
	}
	if (ncols == 0 || ncols > 4096 || ncols > rd_left(&b)) {
		why = "bad column count";
		goto bad;
	}
	types = rd_bytes(&b, (size_t)ncols);
	meta_len = rd_packed(&b);
	if (b.bad || meta_len > rd_left(&b))
		goto bad;
	m.p = rd_bytes(&b, (size_t)meta_len);
	m.end = m.p + meta_len;
	m.bad = false;
	nulls = rd_bytes(&b, (size_t)(ncols + 7) / 8);
	if (b.bad)
		goto bad;

	/* Storage: the text of every name and value comes from the event, plus a
	 * NUL each; there are fewer strings than event bytes. */
	if (tm->acols < ncols) {
		struct sl_mysql_column *c = realloc(tm->col_store, (size_t)ncols * sizeof *c);
		if (!c)
			goto oom;
		tm->col_store = c;
		tm->acols = (uint32_t)ncols;
	}
	if (tm->text_alloc < 2 * ev->body_len + 2) {
		char *t = realloc(tm->text, 2 * ev->body_len + 2);
		if (!t)
			goto oom;
		tm->text = t;
		tm->text_alloc = 2 * ev->body_len + 2;
	}
	if (tm->astrs < ev->body_len) {
		struct sl_mysql_str *s = realloc(tm->strs, ev->body_len * sizeof *s);
		if (!s)
			goto oom;
		tm->strs = s;
		tm->astrs = ev->body_len;
	}
	tm->cols = tm->col_store;
	tm->ncols = (uint32_t)ncols;
	{
		size_t dbo = put_text(tm, &used, db, db_len), tbo = put_text(tm, &used, tb, tb_len);
		tm->db = tm->text + dbo;
		tm->table = tm->text + tbo;
	}
	for (uint32_t i = 0; i < tm->ncols; i++) {
		struct sl_mysql_column *c = &tm->cols[i];
		memset(c, 0, sizeof *c);
		c->type = types[i];
		c->is_unsigned = -1;
		c->geometry_type = -1;
		c->visible = -1;
		c->nullable = (nulls[i / 8] >> (i % 8)) & 1;
		why = read_column_meta(c, &m);
		if (m.bad)
			why = "truncated column metadata";
		if (why) {
			char w[96];
			snprintf(w, sizeof w, "column %u: %s (type %u)", i + 1, why, c->type);
			fail(r, ev, err, errlen, w);
			goto clear;
		}
	}
	if (rd_left(&m)) {
		why = "column metadata longer than the columns need";
		goto bad;
	}
	why = read_optional(tm, &b, mariadb, &used, &nstrs);
	if (why)
		goto bad;
	/* Offsets become pointers now that the storage is final. */
	for (uint32_t i = 0; i < tm->ncols; i++) {
		struct sl_mysql_column *c = &tm->cols[i];
		/* A name's offset is never 0: the database name comes first. */
		if (c->name.p)
			c->name.p = tm->text + (uintptr_t)c->name.p;
		if (c->nvalues)
			c->values = tm->strs + (uintptr_t)c->values;
		else
			c->values = NULL;
		c->charset = c->collation ? sl_mysql_charset_of_collation(c->collation) : NULL;
	}
	for (size_t k = 0; k < nstrs; k++)
		tm->strs[k].p = tm->text + (uintptr_t)tm->strs[k].p;
	tm->key = tm->keys;
	return 0;

oom:
	why = "out of memory";
bad:
	fail(r, ev, err, errlen, why);
clear:
	tm->ncols = 0;
	tm->nkey = 0;
	return -1;
}

int sl_binlog_rows_parse(const struct sl_binlog_reader *r, const struct sl_binlog_event *ev,
			 struct sl_binlog_rows *out, char *err, size_t errlen)
{
	struct rd b = { ev->body, ev->body + ev->body_len, false };
	uint8_t t = ev->h.type;
	unsigned ph = post_header_len(r, t);
	uint64_t ncols;
	size_t nb;

	memset(out, 0, sizeof *out);
	if (t >= SL_BL_WRITE_ROWS_V1 && t <= SL_BL_DELETE_ROWS_V1) {
		out->version = 1;
		out->op = (enum sl_bl_rows_op)(t - SL_BL_WRITE_ROWS_V1);
	} else if (t >= SL_BL_WRITE_ROWS_V2 && t <= SL_BL_DELETE_ROWS_V2) {
		out->version = 2;
		out->op = (enum sl_bl_rows_op)(t - SL_BL_WRITE_ROWS_V2);
	} else {
		return fail(r, ev, err, errlen, "not a rows event");
	}
	out->table_id = rd_le(&b, ph == 6 ? 4 : 6);
	out->flags = rd_u16(&b);
	if (out->version == 2) {
		uint16_t extra = rd_u16(&b);
		if (!b.bad && extra < 2)
			return fail(r, ev, err, errlen, "extra data length below 2");
		out->extra_len = extra >= 2 ? extra - 2u : 0;
		out->extra = rd_bytes(&b, out->extra_len);
	}
	ncols = rd_packed(&b);
	if (b.bad)
		return fail(r, ev, err, errlen, "truncated");
	if (ncols == 0 || ncols > 4096)
		return fail(r, ev, err, errlen, "bad column count");
	out->ncols = (uint32_t)ncols;
	nb = (out->ncols + 7) / 8;
	out->present = rd_bytes(&b, nb);
	out->present_after = out->op == SL_BL_ROWS_UPDATE ? rd_bytes(&b, nb) : NULL;
	if (b.bad)
		return fail(r, ev, err, errlen, "truncated column bitmaps");
	out->rows = b.p;
	out->end = b.end;
	return 0;
}
