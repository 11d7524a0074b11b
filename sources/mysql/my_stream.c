/*
 * sources/mysql/my_stream.c: the MySQL / MariaDB source's stream: start,
 * the event loop (next), rows, event groups, XA transactions, ack.
 *
 * A stream resumes from the checkpoint by GTID when it has a GTID state
 * (MariaDB @slave_connect_state; MySQL COM_BINLOG_DUMP_GTID), otherwise
 * from the file and offset: always at a transaction boundary.
 *
 * Transactions: an event group starts with a GTID event (or QUERY BEGIN)
 * and ends with XID, QUERY COMMIT / ROLLBACK, or, for a group flagged
 * standalone (DDL), after its statement.  BEGIN is reported with the first
 * change of a selected table; a group without one ends in a keepalive, so
 * the checkpoint moves on when the stream's tables are quiet.  XA
 * transactions are held until XA COMMIT: the prepared group's events wait
 * in a temporary file, and while one waits, end positions do not move past
 * its start (a restart reads it again).
 */
#include "sources/mysql/my_internal.h"

#include <errno.h>
#include <inttypes.h>
#include <mysqld_error.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "common/buf.h"
#include "common/log.h"
#include "common/util.h"

#define KEEPALIVE_EVERY_MS 200      /* keepalives for groups of other tables, at most this often */

/* ---- streaming ---- */

static void state_text_update(struct my_src *s)
{
	struct sl_buf b;

	sl_buf_init(&b, 0);
	if (s->srv.mariadb)
		sl_mariadb_gtid_pos_format(&s->mstate, &b);
	else
		sl_mysql_gtid_set_format(&s->sstate, &b);
	snprintf(s->state_text, sizeof s->state_text, "%s", sl_buf_failed(&b) || !b.data ? "" : b.data);
	if (!sl_buf_failed(&b) && b.len >= sizeof s->state_text) {
		s->state_text[0] = '\0';
		if (!s->warned_gtid_dropped) {
			s->warned_gtid_dropped = true;
			sl_warn("stream \"%s\": the GTID state is too long to keep (%zu bytes): the stream resumes by binlog "
				"file and offset", s->st->name, b.len);
		}
	}
	sl_buf_free(&b);
}

/* Whether a group starting at (file number seq, offset) lies before the
 * start position's done point: it was written before the restart. */
static bool before_done(const struct my_src *s, int64_t seq, uint64_t offset)
{
	int64_t dseq;

	if (!s->done_file[0])
		return false;
	dseq = sl_my_file_seq(s->done_file, strlen(s->done_file));
	return seq < dseq || (seq == dseq && offset < s->done_off);
}

/* The position after everything read so far, for resuming.  While a
 * prepared XA transaction is held, that is its group's start, so that a
 * restart reads it again; the point read to goes with it as the done
 * point, and the groups before that point are not written again. */
static struct sl_position resume_pos(struct my_src *s)
{
	struct sl_position p = sl_my_pos(s->file, s->pos, s->gtid_mode ? s->state_text : NULL, NULL);
	bool ahead = before_done(s, sl_my_file_seq(s->file, strlen(s->file)), s->pos), back = false;

	if (s->held) {
		struct xa_held *h = s->held;
		for (struct xa_held *x = s->held; x; x = x->next)
			if (my_pos_compare(&x->start, &h->start) < 0)
				h = x;
		if (my_pos_compare(&h->start, &p) < 0) {
			p = h->start;
			back = true;
		}
	}
	if (my_place_compare(&p, &s->floor) < 0) {
		/* a GTID resume restarts at a file's beginning: never report less than the start */
		char file[SL_POS_TEXT_MAX];
		sl_my_pos_file(&s->floor, file);
		p = sl_my_pos(file, s->floor.w[1], s->gtid_mode ? s->state_text : NULL, NULL);
	}
	if (ahead)
		my_pos_set_done(&p, s->done_file, s->done_off);  /* still reading again what was written */
	else if (back)
		my_pos_set_done(&p, s->file, s->pos);
	return p;
}

/* Another replica registered with the stream's server_id (SHOW SLAVE HOSTS,
 * when the user may run it): connecting would end that one's dump, and it
 * would end ours, over and over.  An entry that is this stream's own (an
 * agent killed a moment ago, whose connection the server has not dropped
 * yet) is no obstacle. */
static int server_id_free(struct my_src *s, char *err, size_t errlen)
{
	MYSQL_RES *res = NULL;
	MYSQL_ROW row;
	char e2[SL_ERRLEN];
	int rc = SL_OK;

	if (sl_my_query(s->meta, "SHOW SLAVE HOSTS", &res, e2, sizeof e2) < 0) {
		sl_debug("stream \"%s\": cannot list the server's replicas: %s", s->st->name, e2);
		return SL_OK;
	}
	while (res && (row = mysql_fetch_row(res)) && rc == SL_OK) {
		if (!row[0] || strtoul(row[0], NULL, 10) != sl_my_conf(s->cfg)->server_id)
			continue;
		if (row[1] && !strcmp(row[1], s->report_host))
			continue;
		snprintf(err, errlen, "stream \"%s\": another replica (\"%s\") is connected to source \"%s\" with "
			 "server_id = %" PRIu32 "; each stream needs a server_id of its own (two replicas with one "
			 "server_id end each other's connection)", s->st->name, row[1] ? row[1] : "", s->cfg->name,
			 sl_my_conf(s->cfg)->server_id);
		rc = SL_ECONFIG;
	}
	if (res)
		mysql_free_result(res);
	return rc;
}

int my_start(void *ctx, const struct sl_position *from, char *err, size_t errlen)
{
	struct my_src *s = ctx;
	struct sl_my_dump_opts o;
	const char *gtid = sl_my_pos_gtid(from);
	char file[SL_POS_TEXT_MAX];
	int rc;

	sl_my_pos_file(from, file);
	snprintf(s->file, sizeof s->file, "%s", file);
	s->pos = from->w[1];
	s->floor = *from;
	if (!my_pos_done(from, s->done_file, sizeof s->done_file, &s->done_off))
		s->done_file[0] = '\0';
	s->gtid_mode = *gtid != '\0';
	sl_mariadb_gtid_pos_clear(&s->mstate);
	sl_mysql_gtid_set_clear(&s->sstate);
	if (s->gtid_mode) {
		char why[256];
		rc = s->srv.mariadb ? sl_mariadb_gtid_pos_parse(&s->mstate, gtid, strlen(gtid), why, sizeof why)
				    : sl_mysql_gtid_set_parse(&s->sstate, gtid, strlen(gtid), why, sizeof why);
		if (rc < 0) {
			snprintf(err, errlen, "stream \"%s\": the checkpoint's GTID state \"%s\" is not valid: %s",
				 s->st->name, gtid, why);
			return SL_EFAIL;
		}
		state_text_update(s);
	}
	/* the dump's first events come before its FORMAT_DESCRIPTION, with the
	 * checksum the session agreed on */
	sl_binlog_reader_init(&s->rd, sl_my_dump_checksum(s->dump), s->file);
	if (s->replay)
		return SL_OK;
	if ((rc = server_id_free(s, err, errlen)) < 0)
		return rc;
	memset(&o, 0, sizeof o);
	o.server_id = sl_my_conf(s->cfg)->server_id;
	o.report_host = s->report_host;
	o.file = file;
	o.offset = from->w[1];
	o.gtid = s->gtid_mode ? gtid : NULL;
	o.heartbeat_ms = s->heartbeat_ms;
	sl_my_dump_close(s->dump);
	s->dump = NULL;
	rc = sl_my_dump_open(&s->dump, s->cfg, &s->srv, &o, s->silence_ms, err, errlen);
	if (rc == SL_OK)
		sl_binlog_reader_init(&s->rd, sl_my_dump_checksum(s->dump), s->file);
	if (rc == SL_ELOST) {
		char why[SL_ERRLEN];
		snprintf(why, sizeof why, "the server refused it (%s)", err);
		return my_lost(s->st, s->cfg, NULL, from, why, err, errlen);
	}
	return rc;
}

/* Where the current event is, for messages: "mb.000002:1234". */
const char *my_here(const struct my_src *s, char *buf, size_t len)
{
	snprintf(buf, len, "%s:%" PRIu64, s->file, s->ev.start ? s->ev.start : s->pos);
	return buf;
}

struct tmap *my_map_by_id(struct my_src *s, uint64_t id)
{
	for (int i = 0; i < MAX_MAPS; i++)
		if (s->maps[i].used && s->maps[i].table_id == id)
			return &s->maps[i];
	return NULL;
}

int my_grow_vals(struct my_src *s, int n)
{
	if (n <= s->avals)
		return 0;
	struct sl_value *b = realloc(s->before, sizeof *b * (size_t)n), *a;
	if (!b)
		return -1;
	s->before = b;
	if (!(a = realloc(s->after, sizeof *a * (size_t)n)))
		return -1;
	s->after = a;
	s->avals = n;
	return 0;
}

static bool key_equal(const struct sl_value *a, const struct sl_value *b)
{
	if (a->kind == SL_V_UNCHANGED || b->kind == SL_V_UNCHANGED)
		return true;
	return sl_value_equal(a, b);
}

static void fill(struct my_src *s, struct sl_change *c, const struct sl_table *t, enum sl_op op,
		 const struct sl_value *vals)
{
	memset(c, 0, sizeof *c);
	c->table = t;
	c->op = op;
	c->values = vals;
	c->read_method = sl_my_desc.read_method_cdc;
	c->csn_pos = my_pos_csn(&s->tx_pos);  /* the CSN text is the writer's */
	c->seq = ++s->seq;
	c->source_ts_us = s->tx_ts_us;
	c->tx_id = s->tx_id;
}

/* Decodes the next row of the pending rows event into changes.  Returns 1
 * with changes in pend, 0 when the event has no more rows, or a failure. */
static int next_row(struct my_src *s, char *err, size_t errlen)
{
	struct tmap *m = s->rows_map;
	const struct sl_table *t = m->t->version;
	char at[600];
	int rc;

	rc = sl_mysql_rows_next(&s->dec, &s->rows, &m->tm, t->cols, s->before, s->after, err, errlen);
	if (rc <= 0) {
		if (rc < 0) {
			size_t l = strlen(err);
			snprintf(err + l, errlen - l, " (at %s)", my_here(s, at, sizeof at));
			return rc == SL_MYSQL_EVALUE ? SL_EDATA : SL_EFAIL;
		}
		s->rows_pending = false;
		return 0;
	}
	s->npend = s->ipend = 0;
	switch (s->rows.op) {
	case SL_BL_ROWS_WRITE:
		for (int i = 0; i < t->ncols; i++) {
			if (s->after[i].kind == SL_V_UNCHANGED) {
				char hint[1200];
				my_backfill_hint(s, m->t, hint, sizeof hint);
				snprintf(err, errlen, "stream \"%s\": at %s, an insert into \"%s\".\"%s\" lacks column \"%s\" "
					 "(a session with binlog_row_image=MINIMAL or NOBLOB): its value is unknown. Set "
					 "binlog_row_image=FULL for every session, then run `%s`", s->st->name,
					 my_here(s, at, sizeof at), t->ns, t->name, t->cols[i].name, hint);
				return SL_EPREREQ;
			}
		}
		fill(s, &s->pend[s->npend++], t, SL_OP_INSERT, s->after);
		break;
	case SL_BL_ROWS_DELETE:
		for (int i = 0; i < t->ncols; i++)
			if (s->before[i].kind == SL_V_UNCHANGED)
				s->before[i].kind = SL_V_NULL;  /* a partial image: the key only */
		fill(s, &s->pend[s->npend++], t, SL_OP_DELETE, s->before);
		break;
	case SL_BL_ROWS_UPDATE: {
		bool key_changed = !sl_table_has_key(t);  /* a keyless row is named by its whole old row */
		for (int i = 0; i < t->ncols; i++) {
			if (s->after[i].kind == SL_V_UNCHANGED && s->before[i].kind != SL_V_UNCHANGED)
				s->after[i] = s->before[i];
			if (t->cols[i].is_key && !key_equal(&s->before[i], &s->after[i]))
				key_changed = true;
		}
		if (key_changed) {
			for (int i = 0; i < t->ncols; i++)
				if (s->before[i].kind == SL_V_UNCHANGED)
					s->before[i].kind = SL_V_NULL;
			fill(s, &s->pend[s->npend++], t, SL_OP_UPDATE_DELETE, s->before);
		}
		fill(s, &s->pend[s->npend++], t, SL_OP_UPDATE_INSERT, s->after);
		break;
	}
	}
	return 1;
}

/* BEGIN of the open group, once, before its first change. */
static bool begin_once(struct my_src *s, struct sl_event *ev)
{
	if (s->begun)
		return false;
	s->begun = true;
	s->tx_pos = sl_my_pos(s->file, s->tx_start, s->tx_gtid, NULL);
	ev->kind = SL_EV_BEGIN;
	ev->pos = s->tx_pos;
	ev->ts_us = s->tx_ts_us;
	ev->tx_id = s->tx_id;
	return true;
}

/* The next row of a rows event whose table's backfill holds it: decoded
 * for the sequence numbers its changes take, never returned.  A replay of
 * the transaction by a run that did not skip it (an earlier run, killed
 * after it wrote the transaction) numbers the changes after it the same,
 * so their records are the same records.  A row that does not decode ends
 * the event (as before, unnumbered).  Returns 1 with a row, 0 at the end. */
static int covered_row(struct my_src *s, char *err, size_t errlen)
{
	int rc = next_row(s, err, errlen);

	if (rc < 0) {
		sl_debug("stream \"%s\": a row its table's backfill holds is skipped undecoded: %s", s->st->name, err);
		s->rows_pending = false;
		s->skipped++;
		return 0;
	}
	s->skipped += rc > 0 ? (uint64_t)s->npend : 0;
	s->npend = s->ipend = 0;
	return rc;
}

static bool pending_change(struct my_src *s, struct sl_event *ev)
{
	if (s->ipend < s->npend) {
		ev->kind = SL_EV_CHANGE;
		ev->change = s->pend[s->ipend++];
		return true;
	}
	return false;
}

void my_start_group(struct my_src *s, uint64_t start)
{
	s->in_tx = true;
	s->standalone = false;
	s->begun = false;
	s->skip_tx = false;
	s->xa_prepare = false;
	s->tx_start = start;
	s->tx_gtid[0] = '\0';
	s->tx_has_mgtid = s->tx_has_sgtid = false;
	s->tx_ts_us = (int64_t)s->ev.h.timestamp * 1000000;
	s->tx_id = 0;
	s->seq = 0;
	s->tx_xid[0] = '\0';
}

static void xid_text(char *out, size_t outlen, const struct sl_binlog_xa_xid *x)
{
	size_t n = 0;

	n += (size_t)snprintf(out + n, outlen - n, "X'");
	for (uint32_t i = 0; i < x->gtrid_len && n + 3 < outlen; i++)
		n += (size_t)snprintf(out + n, outlen - n, "%02x", x->data[i]);
	n += (size_t)snprintf(out + n, outlen - n, "',X'");
	for (uint32_t i = 0; i < x->bqual_len && n + 3 < outlen; i++)
		n += (size_t)snprintf(out + n, outlen - n, "%02x", x->data[x->gtrid_len + i]);
	snprintf(out + n, outlen - n, "',%" PRIu32, x->format_id);
}

/* The watermark the last group wrote, as an event. */
static void take_watermark(struct my_src *s, struct sl_event *ev)
{
	ev->kind = SL_EV_WATERMARK;
	ev->watermark = s->wm_text.data;
	ev->pos = s->wm_pos;
	s->wm_ready = false;
}

/* The rows of the watermark table in the pending rows event: the text of
 * the last one written (its second column, by position: the binlog may not
 * name the columns) becomes the group's watermark.  Never changes. */
static int watermark_rows(struct my_src *s, struct tmap *m, char *err, size_t errlen)
{
	int n = (int)m->tm.ncols, rc;
	struct sl_column *cols;
	char at[600];

	if (n < 2) {
		sl_debug("stream \"%s\": at %s, the watermark table has %d columns: its rows are ignored", s->st->name,
			 my_here(s, at, sizeof at), n);
		return SL_OK;
	}
	if (!(cols = calloc((size_t)n, sizeof *cols)) || my_grow_vals(s, n) < 0) {
		free(cols);
		snprintf(err, errlen, "out of memory");
		return SL_EFAIL;
	}
	for (int i = 0; i < n; i++) {
		const struct sl_mysql_column *mc = &m->tm.cols[i];
		switch (mc->real_type) {
		case SL_MYSQL_VARCHAR: case SL_MYSQL_VAR_STRING: case SL_MYSQL_STRING: case SL_MYSQL_BLOB:
		case SL_MYSQL_TINY_BLOB: case SL_MYSQL_MEDIUM_BLOB: case SL_MYSQL_LONG_BLOB:
			cols[i].type = SL_T_BYTES;   /* the bytes, whatever the charset */
			break;
		default:
			cols[i].type = sl_mysql_type_map(mc, &cols[i].precision, &cols[i].scale);
		}
	}
	while ((rc = sl_mysql_rows_next(&s->dec, &s->rows, &m->tm, cols, s->before, s->after, err, errlen)) > 0) {
		const struct sl_value *v = &s->after[1];
		if (s->rows.op == SL_BL_ROWS_DELETE || (v->kind != SL_V_BYTES && v->kind != SL_V_STRING) ||
		    memchr(v->p, '\0', v->len))
			continue;
		sl_buf_reset(&s->wm_text);
		if (sl_buf_append(&s->wm_text, v->p, v->len) < 0) {
			free(cols);
			snprintf(err, errlen, "out of memory");
			return SL_EFAIL;
		}
		my_cover_watermark(s, s->wm_text.data);
		s->wm_pending = true;
	}
	free(cols);
	if (rc < 0) {
		sl_warn("stream \"%s\": at %s, a row of the watermark table \"%s\".\"%s\" could not be read (%s): it is "
			"ignored", s->st->name, my_here(s, at, sizeof at), s->wm_db, s->wm_table, err);
		err[0] = '\0';
	}
	return SL_OK;
}

/* Ends the open group: updates the GTID state and reports COMMIT (when the
 * group had changes), a watermark it wrote or, now and then, a keepalive;
 * a watermark after a COMMIT comes at the next call.  Returns true with ev
 * filled. */
bool my_end_group(struct my_src *s, struct sl_event *ev)
{
	bool reported = false;

	if (s->gtid_mode && !s->skip_tx) {
		if (s->tx_has_mgtid)
			sl_mariadb_gtid_pos_add(&s->mstate, &s->tx_mgtid, NULL, 0);
		else if (s->tx_has_sgtid)
			sl_mysql_gtid_set_add(&s->sstate, s->tx_sid, s->tx_gno, NULL, 0);
		if (s->tx_has_mgtid || s->tx_has_sgtid)
			state_text_update(s);
	}
	s->in_tx = false;
	if (s->wm_pending) {
		/* a watermark: after the group, before the next */
		s->wm_pending = false;
		s->wm_ready = true;
		s->wm_pos = resume_pos(s);
	}
	if (s->begun) {
		ev->kind = SL_EV_COMMIT;
		ev->pos = resume_pos(s);
		ev->ts_us = s->tx_ts_us;
		reported = true;
		s->returned = sl_my_pos(s->file, s->pos, NULL, NULL);
		s->has_returned = true;
	} else if (s->wm_ready) {
		take_watermark(s, ev);
		reported = true;
	} else if (sl_mono_ms() - s->last_keepalive_ms >= KEEPALIVE_EVERY_MS || s->reply_wanted) {
		/* A transaction of tables the stream does not select.  Whatever
		 * committed before it started is before it in the binlog, so its
		 * time serves as a heartbeat's: a busy server whose selected
		 * tables are quiet sends no heartbeat events, yet the stream is
		 * fresh. */
		ev->kind = SL_EV_KEEPALIVE;
		ev->pos = resume_pos(s);
		if (s->tx_ts_us > 0) {
			ev->heartbeat = true;
			ev->ts_us = s->tx_ts_us;
		}
		reported = true;
	}
	if (reported) {
		s->last_keepalive_ms = sl_mono_ms();
		s->reply_wanted = false;
		s->last_reported = ev->pos;
		s->has_reported = true;
	}
	s->begun = false;
	return reported;
}

/* Writes the current event to the held XA transaction's file. */
static int hold_event(struct my_src *s, char *err, size_t errlen)
{
	unsigned char h[4];
	const unsigned char *raw = s->ev.body - SL_BL_HEADER_LEN;

	sl_put_u32(h, s->ev.h.event_size);
	if (fwrite(h, 1, 4, s->xa_out) != 4 || fwrite(raw, 1, s->ev.h.event_size, s->xa_out) != s->ev.h.event_size) {
		snprintf(err, errlen, "stream \"%s\": could not hold an XA transaction's events: %s", s->st->name,
			 sl_strerror(errno));
		return SL_EFAIL;
	}
	return SL_OK;
}

/* The next held event of an XA transaction being committed: 1, 0 at the
 * end, or a failure. */
static int held_event(struct my_src *s, const unsigned char **p, size_t *len, char *err, size_t errlen)
{
	unsigned char h[4];
	uint32_t n;

	if (fread(h, 1, 4, s->xa_in) != 4)
		return 0;
	n = sl_get_u32(h);
	if (n > s->axbuf) {
		unsigned char *b = realloc(s->xbuf, n);
		if (!b) {
			snprintf(err, errlen, "out of memory");
			return SL_EFAIL;
		}
		s->xbuf = b;
		s->axbuf = n;
	}
	if (fread(s->xbuf, 1, n, s->xa_in) != n) {
		snprintf(err, errlen, "stream \"%s\": a held XA transaction's events are truncated", s->st->name);
		return SL_EFAIL;
	}
	*p = s->xbuf;
	*len = n;
	return 1;
}

struct xa_held *my_take_held(struct my_src *s, const char *xid)
{
	for (struct xa_held **pp = &s->held; *pp; pp = &(*pp)->next) {
		if (!strcasecmp((*pp)->xid, xid)) {
			struct xa_held *h = *pp;
			*pp = h->next;
			return h;
		}
	}
	return NULL;
}

/* Queues a TRUNCATE record of the followed table db.name, written at the
 * end of the statement being read. */
static bool group_done(struct my_src *s, bool xa_end)
{
	struct xa_held *h;

	if (!before_done(s, sl_my_file_seq(s->file, strlen(s->file)), s->ev.start))
		return false;
	if (xa_end && s->tx_xid[0] && (h = my_take_held(s, s->tx_xid))) {
		fclose(h->events);
		free(h);
	}
	return true;
}

/* Reads the next event into s->ev (from a held XA transaction first).
 * Returns 1 with an event, 0 on timeout, 2 at the end, or a failure. */
static int read_event(struct my_src *s, int timeout_ms, bool *held, char *err, size_t errlen)
{
	const unsigned char *p;
	size_t len;
	enum sl_my_read what;
	int rc;

	*held = false;
	if (s->xa_in) {
		if ((rc = held_event(s, &p, &len, err, errlen)) < 0)
			return rc;
		if (rc == 0) {
			fclose(s->xa_in);
			s->xa_in = NULL;
			return 3;   /* the held events are done */
		}
		*held = true;
	} else {
		if ((rc = sl_my_dump_read(s->dump, timeout_ms, &what, &p, &len, err, errlen)) < 0) {
			if (rc == SL_ELOST) {
				char why[SL_ERRLEN];
				struct sl_position at = sl_my_pos(s->file, s->pos, s->gtid_mode ? s->state_text : NULL, NULL);
				snprintf(why, sizeof why, "the server stopped the stream (%s)", err);
				return my_lost(s->st, s->cfg, NULL, &at, why, err, errlen);
			}
			if (rc == SL_ECONFIG) {
				size_t l = strlen(err);
				snprintf(err + l, errlen - l, ": another replica (or another sluice stream) connected with "
					 "server_id = %" PRIu32 "; each stream needs a server_id of its own", sl_my_conf(s->cfg)->server_id);
			}
			return rc;
		}
		if (what == SL_MY_TIMEOUT)
			return 0;
		if (what == SL_MY_EOF)
			return 2;
	}
	if (sl_binlog_decode(&s->rd, p, len, &s->ev, err, errlen) < 0) {
		size_t l = strlen(err);
		snprintf(err + l, errlen - l, " (binlog %s after offset %" PRIu64 ")", s->file, s->pos);
		return SL_EFAIL;
	}
	return 1;
}

/* The rows of the pending rows event, then the TRUNCATE records the
 * statement being read queued.  Returns 1 with ev filled, 0 when nothing
 * is pending, or a failure. */
static int drain_pending(struct my_src *s, struct sl_event *ev, char *err, size_t errlen)
{
	int rc;

	for (;;) {
		if (s->rows_pending && s->rows_map->covered) {
			covered_row(s, err, errlen);
			continue;
		}
		if (s->rows_pending) {
			if (!s->begun && begin_once(s, ev))
				return 1;
			if ((rc = next_row(s, err, errlen)) < 0)
				return rc;
			if (rc > 0 && pending_change(s, ev))
				return 1;
			continue;
		}
		if (s->truncating) {
			if (!s->begun && begin_once(s, ev))
				return 1;
			if (s->itrunc < s->ntrunc) {
				struct sl_my_table *t = my_known_table(s, s->trunc[s->itrunc].db, s->trunc[s->itrunc].table);
				s->itrunc++;
				if (t) {
					fill(s, &s->pend[0], t->version, SL_OP_TRUNCATE, NULL);
					ev->kind = SL_EV_CHANGE;
					ev->change = s->pend[0];
					return 1;
				}
				continue;
			}
			s->truncating = false;
			s->ntrunc = 0;
			if (s->in_tx && my_end_group(s, ev))
				return 1;
			continue;
		}
		return 0;
	}
}

/* Nothing came before the timeout: a keepalive that tells the pipeline
 * where the stream is, when it moved (or a reply is wanted), else a
 * timeout. */
static void quiet(struct my_src *s, struct sl_event *ev)
{
	if (!s->in_tx && !s->xa_in) {
		struct sl_position p = resume_pos(s);
		if (s->reply_wanted || !s->has_reported || my_pos_compare(&p, &s->last_reported) > 0) {
			ev->kind = SL_EV_KEEPALIVE;
			ev->pos = p;
			s->reply_wanted = false;
			s->last_reported = p;
			s->has_reported = true;
			s->last_keepalive_ms = sl_mono_ms();
			return;
		}
	}
	ev->kind = SL_EV_TIMEOUT;
}

static void on_rotate(struct my_src *s)
{
	const struct sl_binlog_rotate *r = &s->ev.u.rotate;

	if (r->file_len == 0 || r->file_len > SL_BL_FILE_MAX)
		return;
	if (strlen(s->file) != r->file_len || memcmp(s->file, r->file, r->file_len) != 0 || r->position > s->pos) {
		bool same = strlen(s->file) == r->file_len && !memcmp(s->file, r->file, r->file_len);
		memcpy(s->file, r->file, r->file_len);
		s->file[r->file_len] = '\0';
		if (!same || r->position > s->pos)
			s->pos = r->position;
	}
}

/* A MariaDB GTID event starts a group; an XA PREPARE group's events are
 * held until XA COMMIT. */
static int on_mariadb_gtid(struct my_src *s, char *err, size_t errlen)
{
	const struct sl_binlog_mariadb_gtid *g = &s->ev.u.mariadb_gtid;

	my_start_group(s, s->ev.start);
	s->standalone = (g->flags & SL_MARIADB_FL_STANDALONE) != 0;
	s->tx_has_mgtid = true;
	s->tx_mgtid = (struct sl_mariadb_gtid){ .domain = g->domain_id, .server = g->server_id, .seq = g->seq_no };
	snprintf(s->tx_gtid, sizeof s->tx_gtid, "%" PRIu32 "-%" PRIu32 "-%" PRIu64, g->domain_id, g->server_id,
		 g->seq_no);
	s->tx_id = g->seq_no;
	if (g->has_xid)
		xid_text(s->tx_xid, sizeof s->tx_xid, &g->xid);
	if (s->gtid_mode && sl_mariadb_gtid_pos_contains(&s->mstate, &s->tx_mgtid))
		s->skip_tx = true;
	if (!(g->flags & SL_MARIADB_FL_PREPARED_XA) && group_done(s, g->has_xid))
		s->skip_tx = true;
	if ((g->flags & SL_MARIADB_FL_PREPARED_XA) && !s->skip_tx) {
		/* XA PREPARE: hold the group's events until XA COMMIT */
		struct xa_held *h = calloc(1, sizeof *h);
		if (!h || !(h->events = tmpfile())) {
			free(h);
			snprintf(err, errlen, "stream \"%s\": could not hold an XA transaction: %s", s->st->name,
				 sl_strerror(errno));
			return SL_EFAIL;
		}
		snprintf(h->xid, sizeof h->xid, "%s", s->tx_xid);
		h->start = sl_my_pos(s->file, s->ev.start, s->gtid_mode ? s->state_text : NULL, NULL);
		h->next = s->held;
		s->held = h;
		s->xa_out = h->events;
		s->xa_prepare = true;
	}
	return SL_OK;
}

static void on_mysql_gtid(struct my_src *s)
{
	const struct sl_binlog_mysql_gtid *g = &s->ev.u.mysql_gtid;
	char u[37];

	my_start_group(s, s->ev.start);
	if (g->has_commit_ts && g->immediate_commit_ts)
		s->tx_ts_us = (int64_t)g->immediate_commit_ts;
	if (!g->anonymous) {
		s->tx_has_sgtid = true;
		memcpy(s->tx_sid, g->sid, 16);
		s->tx_gno = g->gno;
		s->tx_id = g->gno;
		sl_mysql_uuid_format(g->sid, u);
		snprintf(s->tx_gtid, sizeof s->tx_gtid, "%s:%" PRIu64, u, g->gno);
		if (s->gtid_mode && sl_mysql_gtid_set_contains(&s->sstate, g->sid, g->gno))
			s->skip_tx = true;
	}
	if (group_done(s, false))
		s->skip_tx = true;
	/* DDL follows without BEGIN: the group ends after it */
	s->standalone = true;
}

/* Returns 1 with ev filled (an XA PREPARE ended the group), 0. */
static int on_xa_prepare(struct my_src *s, struct sl_event *ev)
{
	if (s->xa_out) {
		fflush(s->xa_out);
		s->xa_out = NULL;
	} else if (!s->xa_prepare && s->ev.u.xa_prepare.one_phase) {
		/* XA COMMIT ... ONE PHASE: an ordinary commit */
	} else if (!s->xa_prepare && !s->skip_tx) {
		sl_warn("stream \"%s\": an XA PREPARE at %s without a GTID event: its changes are read at once",
			s->st->name, my_here(s, (char[600]){ 0 }, 600));
	}
	s->xa_prepare = false;
	return s->in_tx && my_end_group(s, ev) ? 1 : 0;
}

/* A rows event: the watermark table's, counted (a table the stream does
 * not select), or pending for next_row(). */
static int on_rows(struct my_src *s, char *err, size_t errlen)
{
	struct tmap *m;
	int rc;

	if (sl_binlog_rows_parse(&s->rd, &s->ev, &s->rows, err, errlen) < 0) {
		char at[600];
		size_t l = strlen(err);
		snprintf(err + l, errlen - l, " (at %s)", my_here(s, at, sizeof at));
		return SL_EFAIL;
	}
	m = my_map_by_id(s, s->rows.table_id);
	if (!m || !m->rawlen) {
		char at[600];
		snprintf(err, errlen, "stream \"%s\": at %s, a rows event for table id %" PRIu64 " without its "
			 "table map", s->st->name, my_here(s, at, sizeof at), s->rows.table_id);
		return SL_EFAIL;
	}
	if (m->wm) {
		if (!s->in_tx)
			my_start_group(s, s->ev.start);
		if ((rc = watermark_rows(s, m, err, errlen)) < 0)
			return rc;
		return SL_OK;
	}
	if (!m->t) {
		/* a table the stream does not select: its rows are counted, not decoded */
		uint64_t nrows;
		char why[300];
		if (sl_mysql_rows_count(&s->rows, &m->tm, &nrows, why, sizeof why) < 0) {
			sl_debug("stream \"%s\": %s; counted as one skipped change", s->st->name, why);
			nrows = 1;
		}
		s->skipped += nrows;
		return SL_OK;
	}
	if (!s->in_tx)
		my_start_group(s, s->ev.start);
	s->rows_map = m;
	s->rows_pending = true;
	return SL_OK;
}

/* Nothing else is coming for now: the server's position is ours.  The
 * server sends a heartbeat only after a heartbeat period with nothing to
 * send, so everything committed before it arrived is before that position:
 * it travels through the pipeline as a heartbeat with its arrival time, and
 * freshness is measured end to end on an idle stream (source.h,
 * log_heartbeats).  Returns 1 with ev filled, 0. */
static int on_heartbeat(struct my_src *s, struct sl_event *ev)
{
	if (!s->in_tx && !s->xa_in) {
		const struct sl_binlog_heartbeat *hb = &s->ev.u.heartbeat;
		if (hb->file_len == strlen(s->file) && !memcmp(hb->file, s->file, hb->file_len) &&
		    hb->position > s->pos && s->ev.h.log_pos > 0)
			s->pos = hb->position;
		ev->kind = SL_EV_KEEPALIVE;
		ev->heartbeat = true;
		ev->ts_us = sl_now_us();
		ev->pos = resume_pos(s);
		s->reply_wanted = false;
		s->last_reported = ev->pos;
		s->has_reported = true;
		s->last_keepalive_ms = sl_mono_ms();
		return 1;
	}
	return 0;
}

/* One event read (held: from a held XA transaction).  Returns 1 with ev
 * filled, 0 to read on, or a failure. */
static int on_event(struct my_src *s, bool held, struct sl_event *ev, char *err, size_t errlen)
{
	int rc;

	switch (s->ev.kind) {
	case SL_BLK_ROTATE:
		on_rotate(s);
		return 0;
	case SL_BLK_MARIADB_GTID:
		return on_mariadb_gtid(s, err, errlen);
	case SL_BLK_MYSQL_GTID:
		on_mysql_gtid(s);
		return 0;
	case SL_BLK_QUERY:
		if (s->skip_tx)
			return 0;
		if (!held && s->ev.u.query.sql_len >= 5 && !strncasecmp(s->ev.u.query.sql, "BEGIN", 5) && s->in_tx)
			s->standalone = false;  /* MySQL: GTID, then BEGIN ... XID */
		if (s->xa_out && s->ev.u.query.sql_len >= 6 && !strncasecmp(s->ev.u.query.sql, "XA END", 6))
			return 0;
		rc = my_on_query(s, ev, err, errlen);
		return rc < 0 ? rc : rc != 0;
	case SL_BLK_XID:
		return s->in_tx && my_end_group(s, ev) ? 1 : 0;
	case SL_BLK_XA_PREPARE:
		return on_xa_prepare(s, ev);
	case SL_BLK_TABLE_MAP:
		if (s->skip_tx)
			return 0;
		rc = my_on_table_map(s, ev, err, errlen);
		return rc < 0 ? rc : rc != 0;
	case SL_BLK_ROWS:
		return s->skip_tx ? 0 : on_rows(s, err, errlen);
	case SL_BLK_HEARTBEAT:
		return on_heartbeat(s, ev);
	case SL_BLK_INCIDENT: {
		char at[600];
		snprintf(err, errlen, "stream \"%s\": at %s, the server logged an incident (%u: %.*s): changes may be "
			 "missing from the binlog there. Run `sluice backfill` for the stream", s->st->name,
			 my_here(s, at, sizeof at), s->ev.u.incident.incident, (int)s->ev.u.incident.message_len,
			 s->ev.u.incident.message ? s->ev.u.incident.message : "");
		return SL_ELOST;
	}
	default:
		return 0;
	}
}

int my_next(void *ctx, int timeout_ms, struct sl_event *ev, char *err, size_t errlen)
{
	struct my_src *s = ctx;
	bool held;
	int rc;

	memset(ev, 0, offsetof(struct sl_event, change));
	if (pending_change(s, ev))
		return SL_OK;
	if (s->wm_ready) {
		take_watermark(s, ev);
		return SL_OK;
	}
	if (s->ddl_end) {
		/* a DDL statement's group ends after the event it gave, as it
		 * would have without one (my_on_query): its position is reported
		 * even when no event follows it */
		s->ddl_end = false;
		if (!s->truncating && s->in_tx && my_end_group(s, ev))
			return SL_OK;
	}
	for (;;) {
		if ((rc = drain_pending(s, ev, err, errlen)) != 0)
			return rc < 0 ? rc : SL_OK;
		if ((rc = my_hand_deferred(s, ev, err, errlen)) != 0)
			return rc < 0 ? rc : SL_OK;
		rc = read_event(s, timeout_ms, &held, err, errlen);
		timeout_ms = 0;
		if (rc < 0)
			return rc;
		if (rc == 3) {
			/* the held XA transaction was read: the XA COMMIT group ends */
			if (s->in_tx && my_end_group(s, ev))
				return SL_OK;
			continue;
		}
		if (rc == 2) {
			ev->kind = SL_EV_END;
			return SL_OK;
		}
		if (rc == 0) {
			quiet(s, ev);
			return SL_OK;
		}
		/* positions: the end of each real event, never backwards */
		if (!held && s->ev.end > 0 && s->ev.kind != SL_BLK_HEARTBEAT && !(s->ev.h.flags & SL_BL_F_ARTIFICIAL) &&
		    s->ev.end > s->pos && s->ev.kind != SL_BLK_ROTATE)
			s->pos = s->ev.end;
		if (s->xa_out && !held && s->ev.kind != SL_BLK_HEARTBEAT) {
			/* the group of a prepared XA transaction: held until XA COMMIT */
			if (s->ev.kind == SL_BLK_TABLE_MAP || s->ev.kind == SL_BLK_ROWS) {
				if ((rc = hold_event(s, err, errlen)) < 0)
					return rc;
				continue;
			}
		}
		if ((rc = on_event(s, held, ev, err, errlen)) != 0)
			return rc < 0 ? rc : SL_OK;
	}
}

int my_ack(void *ctx, const struct sl_position *durable, bool want_reply, char *err, size_t errlen)
{
	struct my_src *s = ctx;

	(void)durable;
	(void)err;
	(void)errlen;
	/* A binlog is not held for a replica: the checkpoint is all. */
	if (want_reply)
		s->reply_wanted = true;
	return SL_OK;
}
