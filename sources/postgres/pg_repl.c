/*
 * sources/postgres/pg_repl.c: the logical replication connection: slot
 * creation with an exported snapshot, START_REPLICATION, reading XLogData
 * and keepalive messages, and standby status updates.
 *
 * Reading is two steps: next_frame() gets one CopyData frame (from libpq, or
 * from a recording in replay mode), and sl_pg_repl_next() parses it and hands
 * its pgoutput payload to the decoder.  A recording (SL_PG_RECORDING_MAGIC,
 * then each frame as a big-endian u32 length and its bytes) is written by
 * sl_pg_repl_record() and read back by sl_pg_repl_open_replay(), both below:
 * the replay tests (tests/unit/test_pg_replay.c) run the production parser,
 * decoder and pipeline over frames recorded from a real server.
 *
 * A silent peer: a network that drops packets without a trace gives no
 * error, only silence.  A live walsender always answers a status update
 * that asks for a reply, and sends keepalives on its own, so when nothing at
 * all arrived for the silence limit while we waited, sl_pg_repl_next() fails
 * the stream (the agent retries from its checkpoint).  Status updates ask
 * for a reply once a third of the limit passed in silence, so that a busy
 * walsender (decoding WAL it does not publish) still answers in time.
 */
#include "sources/postgres/pg_internal.h"

#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/buf.h"
#include "common/log.h"
#include "common/util.h"

/* ---- replication stream ---- */

struct sl_pg_repl {
	PGconn *conn;            /* NULL in replay mode */
	struct sl_pgoutput *dec;
	char *copybuf;           /* last PQgetCopyData buffer, freed on the next read */
	bool streaming;
	int batch;               /* messages read since the last wait for the socket */
	FILE *record;            /* every frame read is also appended here (not owned) */
	/* the silence rule (sl_pg_repl_set_timeout): 0 = none */
	int64_t silence_ms;
	int64_t last_rx_ms;      /* when the last frames arrived (or streaming started) */
	/* replay mode (tests only): the whole recording, and where the next frame is */
	char *replay;
	size_t replay_len, replay_off;
};

/* The walsender sends each message as it is decoded, so a busy stream arrives
 * as a trickle of small segments and reading it message by message costs a
 * poll() and a recv() per change.  When the last wait yielded fewer than this
 * many messages, sluice lets data gather for COALESCE_US before reading:
 * at most one millisecond of added latency, and far fewer system calls. */
#define COALESCE_BELOW 64
#define COALESCE_US 1000

struct sl_pg_repl *sl_pg_repl_open(const struct sl_source_config *cfg, sl_pgo_key_lookup lookup,
				   void *payload, char *err, size_t errlen)
{
	struct sl_pg_repl *r = calloc(1, sizeof *r);

	if (!r) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	r->conn = sl_pg_connect(cfg, true, err, errlen);
	r->dec = sl_pgoutput_new(lookup, payload);
	if (!r->conn || !r->dec) {
		if (r->conn && !r->dec)
			snprintf(err, errlen, "out of memory");
		sl_pg_repl_close(r);
		return NULL;
	}
	return r;
}

void sl_pg_repl_close(struct sl_pg_repl *r)
{
	if (!r)
		return;
	if (r->copybuf)
		PQfreemem(r->copybuf);
	if (r->conn) {
		if (r->streaming && PQputCopyEnd(r->conn, NULL) == 1)
			PQflush(r->conn);
		PQfinish(r->conn);
	}
	sl_pgoutput_free(r->dec);
	free(r->replay);
	free(r);
}

struct sl_pgoutput *sl_pg_repl_decoder(struct sl_pg_repl *r)
{
	return r->dec;
}

/* Asks the server to cancel the command under way on c.  0, or -1 with err. */
static int cancel_request(PGconn *c, char *err, size_t errlen)
{
	PGcancel *cn = PQgetCancel(c);
	char msg[256] = "";
	int ok;

	if (!cn) {
		snprintf(err, errlen, "could not cancel: no cancel handle for the connection");
		return -1;
	}
	ok = PQcancel(cn, msg, (int)sizeof msg);
	PQfreeCancel(cn);
	if (!ok) {
		snprintf(err, errlen, "could not cancel: %s", msg);
		return -1;
	}
	return 0;
}

/*
 * CREATE_REPLICATION_SLOT returns only once the slot's snapshot is
 * consistent: the walsender waits for every transaction that was running
 * when it started (wait event Lock/transactionid on each one's xid), however
 * long, and says nothing meanwhile.  So the command is sent asynchronously
 * and its socket polled in short slices; tick is called between slices and
 * may ask for a cancel, which the server answers with an error: the slot,
 * still ephemeral until the command succeeds, is dropped by the server.
 */
int sl_pg_repl_create_slot(struct sl_pg_repl *r, const char *slot, bool temporary, sl_pg_slot_tick tick,
			   void *payload, char *snapshot, size_t snaplen, uint64_t *consistent_lsn,
			   char *err, size_t errlen)
{
	struct sl_buf sql;
	PGresult *res = NULL, *extra;
	int64_t t0 = sl_mono_ms(), cancelled_at = 0;
	int rc = SL_OK;

	sl_buf_init(&sql, 0);
	/* Slot names are [a-z0-9_] (checked by the config), so quoting is plain. */
	sl_buf_printf(&sql, "CREATE_REPLICATION_SLOT \"%s\" %sLOGICAL pgoutput EXPORT_SNAPSHOT",
		      slot, temporary ? "TEMPORARY " : "");
	if (sl_buf_failed(&sql)) {
		snprintf(err, errlen, "out of memory");
		rc = SL_EFAIL;
		goto out;
	}
	if (!PQsendQuery(r->conn, sql.data)) {
		char what[160];
		snprintf(what, sizeof what, "could not create replication slot \"%s\"", slot);
		rc = sl_pg_err(err, errlen, what, r->conn, NULL);
		goto out;
	}
	for (;;) {
		struct pollfd pfd = { .fd = PQsocket(r->conn), .events = POLLIN };
		int pr;

		if (!PQconsumeInput(r->conn)) {
			char what[160];
			snprintf(what, sizeof what, "could not create replication slot \"%s\"", slot);
			rc = sl_pg_err(err, errlen, what, r->conn, NULL);
			goto out;
		}
		if (!PQisBusy(r->conn))
			break;
		if (cancelled_at && sl_mono_ms() - cancelled_at > SL_PG_CANCEL_WAIT_MS) {
			snprintf(err, errlen, "creating replication slot \"%s\" was cancelled, but the server did not "
				 "answer within %d s", slot, SL_PG_CANCEL_WAIT_MS / 1000);
			rc = SL_EFAIL;
			goto out;
		}
		if (!cancelled_at && tick && tick(payload, PQbackendPID(r->conn), sl_mono_ms() - t0)) {
			if (cancel_request(r->conn, err, errlen) < 0) {
				rc = SL_EFAIL;
				goto out;
			}
			cancelled_at = sl_mono_ms();
		}
		pr = poll(&pfd, 1, SL_PG_TICK_MS);
		if (pr < 0 && errno != EINTR) {
			snprintf(err, errlen, "poll on the replication connection failed: %s", sl_strerror(errno));
			rc = SL_EFAIL;
			goto out;
		}
	}
	res = PQgetResult(r->conn);
	while ((extra = PQgetResult(r->conn)))  /* the connection is idle again after the last one */
		PQclear(extra);
	if (PQresultStatus(res) != PGRES_TUPLES_OK || PQntuples(res) != 1 || PQnfields(res) < 4) {
		char what[160];
		if (cancelled_at && sl_pg_sqlstate_is(res, "57014")) {
			snprintf(err, errlen, "creating replication slot \"%s\" was cancelled; the server made no slot",
				 slot);
			rc = SL_EFAIL;
			goto out;
		}
		snprintf(what, sizeof what, "could not create replication slot \"%s\"", slot);
		sl_pg_err(err, errlen, what, r->conn, res);
		rc = sl_pg_sqlstate_is(res, "42501") ? SL_EPREREQ : SL_EFAIL;
		goto out;
	}
	if (sl_lsn_parse(PQgetvalue(res, 0, 1), consistent_lsn) < 0) {
		snprintf(err, errlen, "could not parse the consistent point \"%s\" of slot \"%s\"",
			 PQgetvalue(res, 0, 1), slot);
		rc = SL_EFAIL;
		goto out;
	}
	snprintf(snapshot, snaplen, "%s", PQgetvalue(res, 0, 2));
out:
	PQclear(res);
	sl_buf_free(&sql);
	return rc;
}

int sl_pg_repl_start(struct sl_pg_repl *r, const char *slot, const char *publication,
		     uint64_t start_lsn, char *err, size_t errlen)
{
	struct sl_buf sql;
	PGresult *res = NULL;
	char lsn[18];
	int rc = SL_OK;

	if (r->replay) {
		r->streaming = true;  /* the recording holds what the server sent from its start */
		return SL_OK;
	}
	sl_lsn_format(start_lsn, lsn);
	sl_buf_init(&sql, 0);
	/* publication_names is a string literal holding a list of identifiers:
	 * the name is quoted as an identifier (double quotes doubled), and that
	 * text as a literal (single quotes doubled; the replication grammar gives
	 * backslashes no meaning).  Slot names are [a-z0-9_] (the config checks). */
	sl_buf_printf(&sql, "START_REPLICATION SLOT \"%s\" LOGICAL %s (proto_version '1', "
		      "publication_names '\"", slot, lsn);
	for (const char *c = publication; *c; c++) {
		if (*c == '"' || *c == '\'')
			sl_buf_putc(&sql, *c);
		sl_buf_putc(&sql, *c);
	}
	sl_buf_puts(&sql, "\"', messages 'true')");
	if (sl_buf_failed(&sql)) {
		snprintf(err, errlen, "out of memory building START_REPLICATION");
		rc = SL_EFAIL;
		goto out;
	}
	res = PQexec(r->conn, sql.data);
	if (PQresultStatus(res) != PGRES_COPY_BOTH) {
		char what[160];
		snprintf(what, sizeof what, "could not start replication from slot \"%s\"", slot);
		rc = sl_pg_err(err, errlen, what, r->conn, res);
	} else {
		r->streaming = true;
		r->last_rx_ms = sl_mono_ms();
	}
out:
	PQclear(res);
	sl_buf_free(&sql);
	return rc;
}

/* A frame of the recording, or end (len 0 and *end) when it is used up. */
static int replay_frame(struct sl_pg_repl *r, unsigned char **m, int *len, bool *end,
			char *err, size_t errlen)
{
	unsigned char *p = (unsigned char *)r->replay + r->replay_off;
	size_t left = r->replay_len - r->replay_off;
	uint32_t n;

	if (left == 0) {
		r->streaming = false;
		*end = true;
		return SL_OK;
	}
	if (left < 4 || (n = sl_get_u32(p)) == 0 || n > INT32_MAX || left - 4 < n) {
		snprintf(err, errlen, "replication recording truncated or corrupt at byte %zu", r->replay_off);
		return SL_EFAIL;
	}
	*m = p + 4;
	*len = (int)n;
	r->replay_off += 4 + (size_t)n;
	return SL_OK;
}

/* Waits up to timeout_ms for the next CopyData frame of the stream: *len > 0
 * with *m pointing to it (ours to overwrite, valid until the next call: the
 * decoder decodes bytea values in place), *len == 0 when nothing
 * came, or *end when the server ended the stream. */
static int next_frame(struct sl_pg_repl *r, int timeout_ms, unsigned char **m, int *len, bool *end,
		      char *err, size_t errlen)
{
	*len = 0;
	*end = false;
	if (r->copybuf) {
		PQfreemem(r->copybuf);
		r->copybuf = NULL;
	}
	if (r->replay)
		return replay_frame(r, m, len, end, err, errlen);
	for (int attempt = 0; attempt < 2; attempt++) {
		int n = PQgetCopyData(r->conn, &r->copybuf, 1);
		if (n > 0) {
			/* The frames after a wait all came in its one read: the
			 * clock is read for the first of them only. */
			if (r->batch++ == 0)
				r->last_rx_ms = sl_mono_ms();
			*m = (unsigned char *)r->copybuf;
			*len = n;
			return SL_OK;
		}
		if (n == -1) {
			PGresult *res = PQgetResult(r->conn);
			r->streaming = false;
			if (res && PQresultStatus(res) != PGRES_COMMAND_OK) {
				int rc = sl_pg_err(err, errlen, "replication stream ended with an error", r->conn, res);
				PQclear(res);
				return rc;
			}
			PQclear(res);
			*end = true;
			return SL_OK;
		}
		if (n == -2) {
			return sl_pg_err(err, errlen, "could not read from the replication stream", r->conn, NULL);
		}
		if (attempt == 1 || timeout_ms == 0)
			return SL_OK;
		{
			struct pollfd pfd = { .fd = PQsocket(r->conn), .events = POLLIN };
			int pr = poll(&pfd, 1, timeout_ms);
			if (pr < 0 && errno != EINTR) {
				snprintf(err, errlen, "poll on the replication connection failed: %s", sl_strerror(errno));
				return SL_EFAIL;
			}
			if (pr == 0 && r->silence_ms > 0 && sl_mono_ms() - r->last_rx_ms >= r->silence_ms) {
				snprintf(err, errlen, "no message from the server on the replication connection for "
					 "%" PRId64 " s, not even a keepalive (receive_timeout): the connection is taken "
					 "as dead", (sl_mono_ms() - r->last_rx_ms) / 1000);
				return SL_EFAIL;
			}
			if (pr <= 0)
				return SL_OK; /* timeout or signal */
			if (r->batch < COALESCE_BELOW) {
				struct timespec ts = { 0, COALESCE_US * 1000 };
				nanosleep(&ts, NULL);
			}
			r->batch = 0;
			if (PQconsumeInput(r->conn) == 0) {
				return sl_pg_err(err, errlen, "could not read from the replication stream", r->conn, NULL);
			}
		}
	}
	return SL_OK;
}

int sl_pg_repl_next(struct sl_pg_repl *r, int timeout_ms, struct sl_pg_repl_event *ev,
		    char *err, size_t errlen)
{
	unsigned char *m = NULL;
	bool end;
	int len, rc;

	ev->kind = SL_PGR_TIMEOUT;
	if ((rc = next_frame(r, timeout_ms, &m, &len, &end, err, errlen)) < 0)
		return rc;
	if (end) {
		ev->kind = SL_PGR_END;
		return SL_OK;
	}
	if (len <= 0)
		return SL_OK;
	if (r->record) {
		unsigned char n[4];
		sl_put_u32(n, (uint32_t)len);
		if (fwrite(n, 1, 4, r->record) != 4 || fwrite(m, 1, (size_t)len, r->record) != (size_t)len) {
			snprintf(err, errlen, "could not write the replication recording: %s", sl_strerror(errno));
			return SL_EFAIL;
		}
	}
	switch (m[0]) {
	case 'k':
		if (len < 18) {
			snprintf(err, errlen, "malformed keepalive message (%d bytes)", len);
			return SL_EFAIL;
		}
		ev->kind = SL_PGR_KEEPALIVE;
		ev->wal_end = sl_get_u64(m + 1);
		ev->reply_requested = m[17] != 0;
		return SL_OK;
	case 'w':
		if (len < 25) {
			snprintf(err, errlen, "malformed XLogData message (%d bytes)", len);
			return SL_EFAIL;
		}
		ev->kind = SL_PGR_DATA;
		ev->wal_end = sl_get_u64(m + 9);
		switch (sl_pgoutput_decode(r->dec, m + 25, (size_t)len - 25, &ev->pgo, err, errlen)) {
		case 0:
			return SL_OK;
		case SL_PGO_EVALUE:
			return SL_EDATA;   /* would fail the same way again: not retried */
		default:
			return SL_EFAIL;
		}
	default:
		snprintf(err, errlen, "unexpected replication message type 0x%02x", m[0]);
		return SL_EFAIL;
	}
}

int sl_pg_repl_send_status(struct sl_pg_repl *r, uint64_t write_lsn, uint64_t flush_lsn,
			   bool reply_requested, char *err, size_t errlen)
{
	unsigned char msg[34];

	if (r->replay)
		return SL_OK;  /* nobody to tell */
	if (r->silence_ms > 0 && sl_mono_ms() - r->last_rx_ms >= r->silence_ms / 3)
		reply_requested = true;  /* a sign of life before the silence limit */
	msg[0] = 'r';
	sl_put_u64(msg + 1, write_lsn);
	sl_put_u64(msg + 9, flush_lsn);
	sl_put_u64(msg + 17, flush_lsn);
	sl_put_u64(msg + 25, (uint64_t)(sl_now_us() - SL_PG_EPOCH_OFFSET_US));
	msg[33] = reply_requested ? 1 : 0;
	if (PQputCopyData(r->conn, (const char *)msg, sizeof msg) != 1 || PQflush(r->conn) != 0) {
		return sl_pg_err(err, errlen, "could not send a standby status update", r->conn, NULL);
	}
	return SL_OK;
}

void sl_pg_repl_set_timeout(struct sl_pg_repl *r, int64_t silence_ms)
{
	r->silence_ms = silence_ms > 0 ? silence_ms : 0;
}

/* ---- recordings ---- */

int sl_pg_repl_record(struct sl_pg_repl *r, FILE *out, char *err, size_t errlen)
{
	if (fwrite(SL_PG_RECORDING_MAGIC, 1, 8, out) != 8) {
		snprintf(err, errlen, "could not write the replication recording: %s", sl_strerror(errno));
		return SL_EFAIL;
	}
	r->record = out;
	return SL_OK;
}

struct sl_pg_repl *sl_pg_repl_open_replay(const char *path, sl_pgo_key_lookup lookup, void *payload,
					  char *err, size_t errlen)
{
	struct sl_pg_repl *r = calloc(1, sizeof *r);
	char *data = NULL;
	size_t len = 0;

	if (!r || !(r->dec = sl_pgoutput_new(lookup, payload))) {
		snprintf(err, errlen, "out of memory");
		goto fail;
	}
	if (sl_read_file(path, &data, &len, err, errlen) < 0)
		goto fail;
	if (len < 8 || memcmp(data, SL_PG_RECORDING_MAGIC, 8) != 0) {
		snprintf(err, errlen, "\"%s\" is not a replication recording (it does not start with \"%s\")", path,
			 SL_PG_RECORDING_MAGIC);
		goto fail;
	}
	r->replay = data;
	r->replay_len = len;
	r->replay_off = 8;
	return r;
fail:
	free(data);
	sl_pg_repl_close(r);
	return NULL;
}
