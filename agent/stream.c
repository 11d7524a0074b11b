/*
 * agent/stream.c: the pipeline of one stream.
 *
 *   prepare: checkpoint, prerequisites, tables, publication, slot checks
 *   backfill: tables not yet done, read in a snapshot aligned to a slot
 *   stream:   replication messages -> change records -> sink; at transaction
 *             boundaries flush when due, then checkpoint, then acknowledge
 *
 * Positions: written_lsn is the end LSN of the last transaction handed to the
 * sink completely; durable_lsn is what the sink has made durable and the
 * checkpoint records.  Only durable_lsn is ever sent as the flush position,
 * and it never goes backwards.
 */
#include "agent/stream.h"

#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "agent/checkpoint.h"
#include "backfill/pg_backfill.h"
#include "common/buf.h"
#include "common/log.h"
#include "common/util.h"
#include "sinks/sink.h"
#include "sources/postgres/pg_source.h"
#include "sources/postgres/pg_text.h"

atomic_int sl_signal_count;

#define STATUS_INTERVAL_MS 10000  /* at most; shorter when wal_sender_timeout is short */
#define CAUGHT_UP_POLL_MS 500

struct stream {
	struct sl_config *cfg;
	struct sl_stream_config *sc;
	const struct sl_run_opts *opts;
	const struct sl_sink_ops *sink;
	void *sinkctx;
	struct sl_sink_stream sinkst;
	PGconn *meta;
	struct sl_pg_repl *repl;
	struct sl_table **tables;
	int ntables;
	struct sl_checkpoint ck;
	/* positions */
	uint64_t written_lsn;
	uint64_t durable_lsn;
	uint64_t keepalive_lsn;
	uint64_t target_lsn;
	int64_t last_written_ts_us;
	bool in_tx;
	int64_t last_status_ms;
	int64_t status_interval_ms;   /* min(10 s, wal_sender_timeout / 3) */
	/* While streaming, the main thread holds mu except inside sink calls; the
	 * heartbeat thread takes it then, and sends status updates so that a sink
	 * that blocks (a slow disk, a stalled warehouse) cannot make the server
	 * drop the connection for wal_sender_timeout. */
	pthread_mutex_t mu;
	pthread_cond_t hb_cv;
	pthread_t hb;
	bool hb_started;
	bool hb_stop;
	int64_t fault_flush_delay_ms; /* test hook: SLUICE_FAULT_FLUSH_DELAY_MS */
	/* backfill row state */
	uint64_t bf_position;
	int64_t bf_ts_us;        /* server time just before the snapshot's slot was created */
	struct sl_buf keybuf;
	struct sl_value *bf_vals;   /* a row's typed values, bf_nvals allocated */
	int bf_nvals;
	struct sl_buf bf_scratch;   /* their decoded bytes, uuids and decimal digits */
	struct sl_pg_text_stats bf_text_stats;
	/* counters */
	uint64_t changes;
	uint64_t backfill_rows;
	char *err;
	size_t errlen;
};

static bool cancelled(void)
{
	return sl_signal_count >= 2;
}

static bool draining(void)
{
	return sl_signal_count >= 1;
}

/* The catalog's primary key for a table, for pgoutput's Relation messages. */
static bool key_lookup(void *payload, const char *ns, const char *name, int ncols, char *const *names, bool *is_key)
{
	struct stream *s = payload;

	for (int i = 0; i < s->ntables; i++) {
		const struct sl_table *t = s->tables[i];
		bool any = false;
		if (strcmp(t->ns, ns) || strcmp(t->name, name))
			continue;
		for (int c = 0; c < ncols; c++) {
			is_key[c] = false;
			for (int k = 0; k < t->ncols; k++)
				if (t->cols[k].is_key && !strcmp(t->cols[k].name, names[c]))
					is_key[c] = any = true;
		}
		return any;
	}
	return false;
}

static int save_ckpt(struct stream *s)
{
	return sl_ckpt_save(&s->ck, s->err, s->errlen) < 0 ? SL_EFAIL : SL_OK;
}

/* Sends a status update: written up to max(written, durable), flushed up to
 * durable.  Called with mu held, by the main thread or the heartbeat. */
static int send_status_to(struct stream *s, bool reply, char *err, size_t errlen)
{
	uint64_t w = s->written_lsn > s->durable_lsn ? s->written_lsn : s->durable_lsn;
	int rc = sl_pg_repl_send_status(s->repl, w, s->durable_lsn, reply, err, errlen);

	if (rc == SL_OK)
		s->last_status_ms = sl_mono_ms();
	return rc;
}

static int send_status(struct stream *s, bool reply)
{
	return send_status_to(s, reply, s->err, s->errlen);
}

/* Makes everything written durable, then records and acknowledges it. */
static int flush_and_ack(struct stream *s)
{
	uint64_t pos = s->written_lsn;

	if (s->sink->pending(s->sinkctx)) {
		int64_t t0 = sl_mono_ms();
		int frc;
		pthread_mutex_unlock(&s->mu);
		if (s->fault_flush_delay_ms > 0) {
			struct timespec ts = { s->fault_flush_delay_ms / 1000, (s->fault_flush_delay_ms % 1000) * 1000000 };
			nanosleep(&ts, NULL);
		}
		frc = s->sink->flush(s->sinkctx, s->err, s->errlen);
		pthread_mutex_lock(&s->mu);
		if (frc < 0)
			return SL_EFAIL;
		sl_debug("stream \"%s\": flushed in %" PRId64 " ms", s->sc->name, sl_mono_ms() - t0);
	}
	/* With nothing open and nothing buffered, the last keepalive's position
	 * is safe too: an idle stream must not hold WAL. */
	if (!s->in_tx && s->keepalive_lsn > pos)
		pos = s->keepalive_lsn;
	if (pos > s->durable_lsn) {
		s->ck.durable_lsn = pos;
		if (s->last_written_ts_us)
			s->ck.last_source_ts_us = s->last_written_ts_us;
		if (save_ckpt(s) < 0)
			return SL_EFAIL;
		s->durable_lsn = pos;
		return send_status(s, false);
	}
	return SL_OK;
}

static int write_change(struct stream *s, struct sl_change *c)
{
	int rc;

	c->read_ts_us = sl_now_us();
	sl_change_set_uuid(c, s->sc->name, NULL, 0);
	pthread_mutex_unlock(&s->mu);  /* a write may close and fsync a full file */
	rc = s->sink->write(s->sinkctx, c, s->err, s->errlen);
	pthread_mutex_lock(&s->mu);
	if (rc < 0)
		return SL_EFAIL;
	s->changes++;
	return SL_OK;
}

/* ---- backfill ---- */

/* A backfill record of t at position pos (sequence 0); the caller sets values and uuid. */
static void init_backfill_change(struct stream *s, struct sl_change *c, const struct sl_table *t,
				 enum sl_op op, uint64_t pos)
{
	memset(c, 0, sizeof *c);
	c->table = t;
	c->op = op;
	c->read_method = "postgresql-backfill";
	c->position = pos;
	sl_csn_format(c->csn, pos, 0);
	c->source_ts_us = s->bf_ts_us;
	c->read_ts_us = sl_now_us();
}

static int backfill_row(void *payload, const struct sl_table *t, const struct sl_text_value *text)
{
	struct stream *s = payload;
	struct sl_change c;
	bool haskey = false;

	if (draining()) {  /* a first or a second signal */
		snprintf(s->err, s->errlen, "backfill of \"%s\".\"%s\" interrupted by a signal", t->ns, t->name);
		return -1;
	}
	if (t->ncols > s->bf_nvals) {
		struct sl_value *nv = realloc(s->bf_vals, sizeof *nv * (size_t)t->ncols);
		if (!nv) {
			snprintf(s->err, s->errlen, "out of memory backfilling \"%s\".\"%s\"", t->ns, t->name);
			return -1;
		}
		s->bf_vals = nv;
		s->bf_nvals = t->ncols;
	}
	if (sl_pg_text_row(t, text, s->bf_vals, &s->bf_scratch, &s->bf_text_stats, s->err, s->errlen) < 0)
		return -1;
	init_backfill_change(s, &c, t, SL_OP_INSERT, s->bf_position);
	c.values = s->bf_vals;
	/* Every row of a snapshot shares its CSN; the key (or the whole row when
	 * there is no key) makes the uuid unique and still deterministic. */
	for (int pass = 0; pass < 2 && !haskey; pass++) {
		sl_buf_reset(&s->keybuf);
		for (int i = 0; i < t->ncols; i++) {
			if (pass == 0 && !t->cols[i].is_key)
				continue;
			haskey = true;
			sl_value_key_bytes(&s->keybuf, &s->bf_vals[i]);
		}
	}
	if (sl_buf_failed(&s->keybuf)) {
		snprintf(s->err, s->errlen, "out of memory deriving the uuid of a row of \"%s\".\"%s\"", t->ns, t->name);
		return -1;
	}
	sl_change_set_uuid(&c, s->sc->name, s->keybuf.data, s->keybuf.len);
	if (s->sink->write(s->sinkctx, &c, s->err, s->errlen) < 0)
		return -1;
	s->backfill_rows++;
	return 0;
}

static struct sl_table *find_table(struct stream *s, const char *full)
{
	for (int i = 0; i < s->ntables; i++) {
		size_t l = strlen(s->tables[i]->ns);
		if (!strncmp(full, s->tables[i]->ns, l) && full[l] == '.' && !strcmp(full + l + 1, s->tables[i]->name))
			return s->tables[i];
	}
	return NULL;
}

/* Writes the marker that starts a re-backfill of t: a TRUNCATE record with
 * read_method postgresql-backfill and CSN (pos - 1, 0), which sorts after
 * every change the snapshot at pos contains and before its rows.  A reader
 * that applies records in CSN order thus replaces the table's state with the
 * snapshot, dropping rows deleted while no change was followed (a lost slot). */
static int write_backfill_marker(struct stream *s, const struct sl_table *t, uint64_t pos)
{
	struct sl_change c;

	init_backfill_change(s, &c, t, SL_OP_TRUNCATE, pos - 1);
	sl_change_set_uuid(&c, s->sc->name, NULL, 0);
	return s->sink->write(s->sinkctx, &c, s->err, s->errlen) < 0 ? SL_EFAIL : SL_OK;
}

/* Backfills every table whose checkpoint state is not done, in the snapshot
 * exported at position pos.  With marker, each table's rows are preceded by
 * a re-backfill marker (everything but a brand-new stream's first backfill). */
static int run_backfill(struct stream *s, const char *snapshot, uint64_t pos, bool marker)
{
	PGconn *c;
	int rc;
	char lsn[18];

	sl_lsn_format(pos, lsn);
	c = sl_pg_connect(s->sc->source, false, s->err, s->errlen);
	if (!c)
		return SL_EFAIL;
	rc = sl_pg_backfill_begin(c, snapshot, s->err, s->errlen);
	if (rc < 0)
		goto out;
	s->bf_position = pos;
	for (int i = 0; i < s->ck.ntables; i++) {
		struct sl_ckpt_table *e = &s->ck.tables[i];
		struct sl_table *t;
		uint64_t rows = 0;
		int64_t t0;

		if (e->state == SL_BF_DONE || e->state == SL_BF_SKIPPED)
			continue;
		t = find_table(s, e->name);
		if (!t) {
			sl_warn("stream \"%s\": table %s is in the checkpoint but no longer selected; skipping its backfill",
				s->sc->name, e->name);
			continue;
		}
		if (e->state == SL_BF_RUNNING) {
			/* An interrupted run: remove its files before redoing the table. */
			char old[18];
			sl_lsn_format(e->snapshot_lsn, old);
			sl_info("stream \"%s\": redoing the interrupted backfill of %s (snapshot %s)",
				s->sc->name, e->name, old);
			if (s->sink->discard_backfill(s->sinkctx, t, e->snapshot_lsn, s->err, s->errlen) < 0) {
				rc = SL_EFAIL;
				goto out;
			}
		}
		e->state = SL_BF_RUNNING;
		e->snapshot_lsn = pos;
		e->rows = 0;
		if ((rc = save_ckpt(s)) < 0)
			goto out;
		sl_info("stream \"%s\": backfilling %s at %s", s->sc->name, e->name, lsn);
		t0 = sl_mono_ms();
		if (marker && (rc = write_backfill_marker(s, t, pos)) < 0)
			goto out;
		rc = sl_pg_backfill_table(c, t, backfill_row, s, &rows, s->err, s->errlen);
		if (rc < 0)
			goto out;
		if (s->sink->flush(s->sinkctx, s->err, s->errlen) < 0) {
			rc = SL_EFAIL;
			goto out;
		}
		e->state = SL_BF_DONE;
		e->rows = rows;
		snprintf(e->schema_key, sizeof e->schema_key, "%s", t->schema_key);
		if ((rc = save_ckpt(s)) < 0)
			goto out;
		sl_info("stream \"%s\": backfilled %s: %" PRIu64 " rows in %.1f s", s->sc->name, e->name, rows,
			(double)(sl_mono_ms() - t0) / 1000.0);
	}
	sl_pg_backfill_end(c);
	rc = SL_OK;
out:
	PQfinish(c);
	return rc;
}

static bool backfill_needed(struct stream *s)
{
	for (int i = 0; i < s->ck.ntables; i++)
		if ((s->ck.tables[i].state == SL_BF_PENDING || s->ck.tables[i].state == SL_BF_RUNNING) &&
		    find_table(s, s->ck.tables[i].name))
			return true;
	return false;
}

/* ---- prepare ---- */

/* Merge mode needs a primary key to merge on. */
static int check_merge_key(const struct sl_stream_config *sc, const struct sl_table *t, char *err, size_t errlen)
{
	if (sc->write_mode != SL_WRITE_MERGE || sl_table_has_key(t))
		return SL_OK;
	snprintf(err, errlen, "stream \"%s\": table \"%s\".\"%s\" has no primary key, so it can be replicated "
		 "in append mode only", sc->name, t->ns, t->name);
	return SL_EPREREQ;
}

static int prepare_tables(struct stream *s)
{
	int rc = sl_pg_list_tables(s->meta, s->sc->tables, s->sc->exclude_tables, &s->tables, &s->ntables,
				   s->err, s->errlen);
	struct sl_buf b;

	if (rc < 0)
		return rc;
	if (s->ntables == 0) {
		sl_buf_init(&b, 4096);
		for (char **g = s->sc->tables; *g; g++)
			sl_buf_printf(&b, "%s%s", g == s->sc->tables ? "" : ", ", *g);
		snprintf(s->err, s->errlen, "stream \"%s\": no table on source \"%s\" matches tables = %s",
			 s->sc->name, s->sc->source->name, b.data ? b.data : "");
		sl_buf_free(&b);
		return SL_ECONFIG;
	}
	for (int i = 0; i < s->ntables; i++) {
		struct sl_ckpt_table *e = sl_ckpt_table(&s->ck, s->tables[i]->ns, s->tables[i]->name);
		if (!e) {
			snprintf(s->err, s->errlen, "out of memory");
			return SL_EFAIL;
		}
		if (!s->sc->backfill && e->state == SL_BF_PENDING)
			e->state = SL_BF_SKIPPED;
		if ((rc = check_merge_key(s->sc, s->tables[i], s->err, s->errlen)) < 0)
			return rc;
	}
	return SL_OK;
}

/* Checks the slot against the checkpoint and decides where to start.
 * *create is set when a new slot must be created. */
static int check_slot(struct stream *s, bool *create)
{
	struct sl_pg_slot_info si;
	char a[18], b[18];
	int rc = sl_pg_slot_info(s->meta, s->sc->slot, &si, s->err, s->errlen);

	*create = false;
	if (rc < 0)
		return rc;
	if (!si.exists) {
		if (s->ck.exists && s->ck.slot_created && !s->ck.reset_slot) {
			sl_lsn_format(s->ck.durable_lsn, a);
			snprintf(s->err, s->errlen,
				 "stream \"%s\": replication slot \"%s\" does not exist on source \"%s\", but the checkpoint "
				 "\"%s\" says changes up to %s were already read from it; changes after that position may "
				 "be gone. sluice will not skip them silently. To recover, re-backfill every table with "
				 "`sluice backfill -c %s --stream %s` (a new slot is created on the next run)",
				 s->sc->name, s->sc->slot, s->sc->source->name, s->ck.path, a, s->cfg->path, s->sc->name);
			return SL_ELOST;
		}
		*create = true;
		return SL_OK;
	}
	if (!si.logical || strcmp(si.plugin, "pgoutput") != 0) {
		snprintf(s->err, s->errlen, "stream \"%s\": slot \"%s\" exists but is not a logical pgoutput slot (plugin \"%s\")",
			 s->sc->name, s->sc->slot, si.plugin);
		return SL_EPREREQ;
	}
	if (strcmp(si.database, s->sc->source->dbname) != 0) {
		snprintf(s->err, s->errlen, "stream \"%s\": slot \"%s\" belongs to database \"%s\", not \"%s\"",
			 s->sc->name, s->sc->slot, si.database, s->sc->source->dbname);
		return SL_EPREREQ;
	}
	if (!strcmp(si.wal_status, "lost")) {
		snprintf(s->err, s->errlen,
			 "stream \"%s\": replication slot \"%s\" is lost (wal_status = lost): the server removed WAL it "
			 "still needed, so changes are gone. Drop the slot (SELECT pg_drop_replication_slot('%s')) and "
			 "re-backfill with `sluice backfill -c %s --stream %s`",
			 s->sc->name, s->sc->slot, s->sc->slot, s->cfg->path, s->sc->name);
		return SL_ELOST;
	}
	if (si.active) {
		snprintf(s->err, s->errlen, "stream \"%s\": replication slot \"%s\" is in use by another process",
			 s->sc->name, s->sc->slot);
		return SL_EFAIL;
	}
	if (s->ck.reset_slot) {
		snprintf(s->err, s->errlen,
			 "stream \"%s\": a full re-backfill with a new slot was requested, but slot \"%s\" exists; "
			 "drop it first (SELECT pg_drop_replication_slot('%s'))", s->sc->name, s->sc->slot, s->sc->slot);
		return SL_EPREREQ;
	}
	if (s->ck.exists && s->ck.slot_created && si.confirmed_flush_lsn > s->ck.durable_lsn) {
		sl_lsn_format(si.confirmed_flush_lsn, a);
		sl_lsn_format(s->ck.durable_lsn, b);
		snprintf(s->err, s->errlen,
			 "stream \"%s\": slot \"%s\" has confirmed position %s, ahead of %s in checkpoint \"%s\": changes "
			 "between them were acknowledged by another reader or the checkpoint is stale. Re-backfill with "
			 "`sluice backfill -c %s --stream %s`, or restore the right checkpoint",
			 s->sc->name, s->sc->slot, a, b, s->ck.path, s->cfg->path, s->sc->name);
		return SL_ELOST;
	}
	if (!s->ck.slot_created || !s->ck.exists) {
		/* A slot made outside sluice (or before a crash that lost the first
		 * checkpoint): start at its position; backfill covers the rest. */
		s->ck.durable_lsn = si.confirmed_flush_lsn;
	}
	return SL_OK;
}

static int handle_data(struct stream *s, struct sl_pgo_event *pe)
{
	switch (pe->kind) {
	case SL_PGO_BEGIN:
		s->in_tx = true;
		return SL_OK;
	case SL_PGO_COMMIT:
		s->in_tx = false;
		if (pe->end_lsn > s->written_lsn)
			s->written_lsn = pe->end_lsn;
		s->last_written_ts_us = pe->commit_ts_us;
		if (s->sink->flush_due(s->sinkctx, sl_mono_ms()))
			return flush_and_ack(s);
		return SL_OK;
	case SL_PGO_RELATION:
		if (pe->schema_changed)
			sl_info("stream \"%s\": table \"%s\".\"%s\" changed its columns (schema version %s)",
				s->sc->name, pe->table->ns, pe->table->name, pe->table->schema_key);
		return SL_OK;
	case SL_PGO_CHANGE:
		if (pe->nchanges == 0) { /* TRUNCATE */
			struct sl_change c;
			while (sl_pgoutput_truncate_next(sl_pg_repl_decoder(s->repl), &c) == 1)
				if (write_change(s, &c) < 0)
					return SL_EFAIL;
			return SL_OK;
		}
		for (int i = 0; i < pe->nchanges; i++)
			if (write_change(s, &pe->changes[i]) < 0)
				return SL_EFAIL;
		return SL_OK;
	case SL_PGO_MESSAGE:
	case SL_PGO_NONE:
		return SL_OK;
	}
	return SL_OK;
}

static int stream_loop(struct stream *s)
{
	struct sl_pg_repl_event ev;
	int rc;

	for (;;) {
		int64_t now = sl_mono_ms();
		int timeout;

		if (cancelled()) {
			snprintf(s->err, s->errlen, "stream \"%s\": cancelled by a second signal; nothing unflushed was acknowledged",
				 s->sc->name);
			return SL_EFAIL;
		}
		if (draining()) {
			sl_info("stream \"%s\": draining", s->sc->name);
			return flush_and_ack(s);
		}
		if (s->opts->until_caught_up && !s->in_tx &&
		    (s->written_lsn >= s->target_lsn || s->keepalive_lsn >= s->target_lsn)) {
			if ((rc = flush_and_ack(s)) < 0)
				return rc;
			if (s->durable_lsn >= s->target_lsn) {
				char l[18];
				sl_lsn_format(s->durable_lsn, l);
				sl_info("stream \"%s\": caught up at %s", s->sc->name, l);
				return SL_OK;
			}
		}
		timeout = (int)(s->last_status_ms + s->status_interval_ms - now);
		if (timeout < 0)
			timeout = 0;
		if (s->opts->until_caught_up && timeout > CAUGHT_UP_POLL_MS)
			timeout = CAUGHT_UP_POLL_MS;
		if (timeout > 1000)
			timeout = 1000;
		rc = sl_pg_repl_next(s->repl, timeout, &ev, s->err, s->errlen);
		if (rc < 0)
			return rc;
		switch (ev.kind) {
		case SL_PGR_DATA:
			if ((rc = handle_data(s, &ev.pgo)) < 0)
				return rc;
			break;
		case SL_PGR_KEEPALIVE:
			if (ev.wal_end > s->keepalive_lsn)
				s->keepalive_lsn = ev.wal_end;
			if (ev.reply_requested) {
				if (!s->in_tx && !s->sink->pending(s->sinkctx) && (rc = flush_and_ack(s)) < 0)
					return rc;
				if ((rc = send_status(s, false)) < 0)
					return rc;
			}
			break;
		case SL_PGR_END:
			snprintf(s->err, s->errlen, "stream \"%s\": the server ended the replication stream", s->sc->name);
			return SL_EFAIL;
		case SL_PGR_TIMEOUT:
			if (s->opts->until_caught_up && (rc = send_status(s, true)) < 0)
				return rc;
			break;
		}
		now = sl_mono_ms();
		if (!s->in_tx && (s->sink->flush_due(s->sinkctx, now) ||
				  (!s->sink->pending(s->sinkctx) && s->keepalive_lsn > s->durable_lsn &&
				   now - s->last_status_ms >= s->status_interval_ms))) {
			if ((rc = flush_and_ack(s)) < 0)
				return rc;
		}
		/* Periodic status.  When idle, ask for a keepalive in reply: its
		 * wal_end is then acknowledged on the next round, so a quiet
		 * publication on a busy server does not hold WAL. */
		if (now - s->last_status_ms >= s->status_interval_ms &&
		    (rc = send_status(s, !s->in_tx && !s->sink->pending(s->sinkctx))) < 0)
			return rc;
	}
}

static void *heartbeat_main(void *arg)
{
	struct stream *s = arg;
	char err[SL_ERRLEN];

	pthread_mutex_lock(&s->mu);
	while (!s->hb_stop) {
		struct timespec until;
		clock_gettime(CLOCK_REALTIME, &until);
		until.tv_sec += 1;
		pthread_cond_timedwait(&s->hb_cv, &s->mu, &until);
		if (s->hb_stop)
			break;
		/* Here the main thread is inside a sink call (or between reads). */
		if (sl_mono_ms() - s->last_status_ms >= s->status_interval_ms &&
		    send_status_to(s, false, err, sizeof err) == SL_OK)
			sl_debug("stream \"%s\": sent a status update while the sink was busy", s->sc->name);
	}
	pthread_mutex_unlock(&s->mu);
	return NULL;
}

/* Runs the streaming loop with the heartbeat thread beside it. */
static int stream_with_heartbeat(struct stream *s)
{
	int rc;

	pthread_mutex_lock(&s->mu);
	s->hb_started = pthread_create(&s->hb, NULL, heartbeat_main, s) == 0;
	if (!s->hb_started)
		sl_warn("stream \"%s\": could not start the heartbeat thread; a blocked sink may "
			"time out the replication connection", s->sc->name);
	rc = stream_loop(s);
	s->hb_stop = true;
	pthread_cond_signal(&s->hb_cv);
	pthread_mutex_unlock(&s->mu);
	if (s->hb_started)
		pthread_join(s->hb, NULL);
	return rc;
}

/* The server's wal_sender_timeout decides how often status must be sent:
 * every third of it, at most every STATUS_INTERVAL_MS, at least every 200 ms. */
static void set_status_interval(struct stream *s)
{
	char err[SL_ERRLEN];
	int64_t ms;

	s->status_interval_ms = STATUS_INTERVAL_MS;
	if (sl_pg_wal_sender_timeout_ms(s->meta, &ms, err, sizeof err) < 0) {
		sl_warn("stream \"%s\": %s; sending status every %d ms", s->sc->name, err, STATUS_INTERVAL_MS);
		return;
	}
	if (ms > 0 && ms / 3 < STATUS_INTERVAL_MS)
		s->status_interval_ms = ms / 3 > 200 ? ms / 3 : 200;
}

/* Creates a slot that exports a snapshot, and takes the server's time just
 * before, as the source time of that snapshot's backfill rows. */
static int create_snapshot_slot(struct stream *s, struct sl_pg_repl *r, const char *name, bool temporary,
				char *snapshot, size_t snaplen, uint64_t *consistent)
{
	int rc = sl_pg_server_time_us(s->meta, &s->bf_ts_us, s->err, s->errlen);

	if (rc < 0)
		return rc;
	return sl_pg_repl_create_slot(r, name, temporary, snapshot, snaplen, consistent, s->err, s->errlen);
}

static void stream_free(struct stream *s)
{
	if (s->sinkctx)
		s->sink->close(s->sinkctx);
	sl_pg_repl_close(s->repl);
	if (s->meta)
		PQfinish(s->meta);
	sl_pg_tables_free(s->tables, s->ntables);
	sl_ckpt_free(&s->ck);
	sl_buf_free(&s->keybuf);
	sl_buf_free(&s->bf_scratch);
	free(s->bf_vals);
	pthread_cond_destroy(&s->hb_cv);
	pthread_mutex_destroy(&s->mu);
}

static int open_sink(struct stream *s)
{
	s->sink = sl_sink_lookup(s->sc->destination->type);
	if (!s->sink) {
		snprintf(s->err, s->errlen, "destination \"%s\": type %s is not supported yet",
			 s->sc->destination->name, s->sc->destination->type);
		return SL_ECONFIG;
	}
	if (s->sc->write_mode == SL_WRITE_MERGE) {
		snprintf(s->err, s->errlen, "stream \"%s\": write_mode = merge is not implemented yet for %s "
			 "destinations; use write_mode = append", s->sc->name, s->sc->destination->type);
		return SL_ECONFIG;
	}
	s->sinkst.name = s->sc->name;
	s->sinkst.mode = s->sc->write_mode;
	s->sinkst.source_kind = s->sc->source->kind;
	if (s->sink->open(&s->sinkctx, s->sc->destination, &s->sinkst, s->err, s->errlen) < 0) {
		s->sinkctx = NULL;
		return SL_EFAIL;
	}
	return SL_OK;
}

int sl_stream_run(struct sl_config *cfg, struct sl_stream_config *sc, const struct sl_run_opts *o,
		  char *err, size_t errlen)
{
	struct stream s;
	char snapshot[128], lsn[18];
	uint64_t consistent = 0;
	bool create = false, had_checkpoint;
	int rc;

	memset(&s, 0, sizeof s);
	s.cfg = cfg;
	s.sc = sc;
	s.opts = o;
	s.err = err;
	s.errlen = errlen;
	sl_buf_init(&s.keybuf, 0);
	sl_buf_init(&s.bf_scratch, 0);
	s.last_status_ms = sl_mono_ms();
	s.status_interval_ms = STATUS_INTERVAL_MS;
	pthread_mutex_init(&s.mu, NULL);
	pthread_cond_init(&s.hb_cv, NULL);
	{
		const char *f = getenv("SLUICE_FAULT_FLUSH_DELAY_MS");
		if (f && sl_parse_i64(f, 0, 3600000, &s.fault_flush_delay_ms) == 0 && s.fault_flush_delay_ms > 0)
			sl_warn("test hook SLUICE_FAULT_FLUSH_DELAY_MS: every flush is delayed by %" PRId64 " ms",
				s.fault_flush_delay_ms);
	}

	if (sc->source->kind != SL_SOURCE_POSTGRES) {
		snprintf(err, errlen, "stream \"%s\": source \"%s\" is a mysql source, which is not supported yet",
			 sc->name, sc->source->name);
		rc = SL_ECONFIG;
		goto out;
	}
	if (sl_mkdir_p(cfg->state_dir) < 0) {
		snprintf(err, errlen, "could not create state_dir \"%s\": %s", cfg->state_dir, strerror(errno));
		rc = SL_EFAIL;
		goto out;
	}
	if (sl_ckpt_load(&s.ck, cfg->state_dir, sc->name, err, errlen) < 0) {
		rc = SL_EFAIL;
		goto out;
	}
	if (s.ck.exists && s.ck.slot[0] && strcmp(s.ck.slot, sc->slot) != 0) {
		snprintf(err, errlen, "stream \"%s\": the checkpoint \"%s\" belongs to slot \"%s\", but the config names "
			 "slot \"%s\"", sc->name, s.ck.path, s.ck.slot, sc->slot);
		rc = SL_ECONFIG;
		goto out;
	}
	snprintf(s.ck.slot, sizeof s.ck.slot, "%s", sc->slot);
	had_checkpoint = s.ck.exists;
	if ((rc = open_sink(&s)) < 0)
		goto out;
	s.meta = sl_pg_connect(sc->source, false, err, errlen);
	if (!s.meta) {
		rc = SL_EFAIL;
		goto out;
	}
	if ((rc = sl_pg_check_prereqs(s.meta, err, errlen)) < 0)
		goto out;
	set_status_interval(&s);
	if ((rc = prepare_tables(&s)) < 0)
		goto out;
	if ((rc = sl_pg_ensure_publication(s.meta, sc->publication, s.tables, s.ntables, err, errlen)) < 0)
		goto out;
	if ((rc = check_slot(&s, &create)) < 0)
		goto out;
	if (o->until_caught_up && (rc = sl_pg_current_lsn(s.meta, &s.target_lsn, err, errlen)) < 0)
		goto out;

	s.repl = sl_pg_repl_open(sc->source, key_lookup, &s, err, errlen);
	if (!s.repl) {
		rc = SL_EFAIL;
		goto out;
	}
	if (create) {
		rc = create_snapshot_slot(&s, s.repl, sc->slot, false, snapshot, sizeof snapshot, &consistent);
		if (rc < 0)
			goto out;
		sl_lsn_format(consistent, lsn);
		sl_info("stream \"%s\": created replication slot \"%s\" at %s", sc->name, sc->slot, lsn);
		/* A new slot starts a new history: everything is backfilled again. */
		for (int i = 0; i < s.ck.ntables; i++)
			if (s.ck.tables[i].state == SL_BF_DONE)
				s.ck.tables[i].state = SL_BF_PENDING;
		if (!sc->backfill)
			for (int i = 0; i < s.ck.ntables; i++)
				if (s.ck.tables[i].state == SL_BF_PENDING)
					s.ck.tables[i].state = SL_BF_SKIPPED;
		s.ck.slot_created = true;
		s.ck.reset_slot = false;
		s.ck.durable_lsn = consistent;
	} else {
		s.ck.slot_created = true;
	}
	if ((rc = save_ckpt(&s)) < 0)
		goto out;
	s.durable_lsn = s.written_lsn = s.ck.durable_lsn;

	if (backfill_needed(&s)) {
		if (create) {
			rc = run_backfill(&s, snapshot, consistent, had_checkpoint);
		} else {
			/* The slot already exists: take a fresh snapshot from a temporary
			 * slot.  Rows read at its position P carry CSN (P, 0); the changes
			 * the main slot re-delivers from before P carry smaller CSNs, so
			 * "highest CSN wins" converges on the source's state. */
			struct sl_pg_repl *tmp = sl_pg_repl_open(sc->source, NULL, NULL, err, errlen);
			char tmpname[64];
			if (!tmp) {
				rc = SL_EFAIL;
				goto out;
			}
			snprintf(tmpname, sizeof tmpname, "%.40s_bf_%d", sc->slot, (int)getpid());
			rc = create_snapshot_slot(&s, tmp, tmpname, true, snapshot, sizeof snapshot, &consistent);
			if (rc == SL_OK)
				rc = run_backfill(&s, snapshot, consistent, true);
			sl_pg_repl_close(tmp);
		}
		if (rc < 0) {
			if (draining() && !cancelled()) {
				sl_info("stream \"%s\": backfill interrupted by a signal; it resumes on the next run", sc->name);
				rc = SL_OK;
			}
			goto out;
		}
	}

	if ((rc = sl_pg_repl_start(s.repl, sc->slot, sc->publication, s.durable_lsn, err, errlen)) < 0)
		goto out;
	sl_lsn_format(s.durable_lsn, lsn);
	sl_info("stream \"%s\": streaming from slot \"%s\" at %s", sc->name, sc->slot, lsn);
	rc = stream_with_heartbeat(&s);
	if (rc == SL_OK)
		sl_info("stream \"%s\": stopped after %" PRIu64 " changes and %" PRIu64 " backfill rows",
			sc->name, s.changes, s.backfill_rows);
out:
	stream_free(&s);
	return rc;
}

/* ---- check, status, backfill request ---- */

int sl_stream_check(struct sl_config *cfg, struct sl_stream_config *sc, char *err, size_t errlen)
{
	struct sl_table **tables = NULL;
	struct sl_pg_slot_info si;
	int ntables = 0, rc;
	PGconn *c = NULL;

	if (sc->source->kind != SL_SOURCE_POSTGRES) {
		snprintf(err, errlen, "stream \"%s\": mysql sources are not supported yet", sc->name);
		return SL_ECONFIG;
	}
	if (!sl_sink_lookup(sc->destination->type)) {
		snprintf(err, errlen, "destination \"%s\": type %s is not supported yet", sc->destination->name,
			 sc->destination->type);
		return SL_ECONFIG;
	}
	if (!strcmp(sc->destination->type, "avro_dir")) {
		/* The path, or the nearest folder above it that exists (where it
		 * would be created), must be writable.  Nothing is created. */
		char dir[4096];
		bool exists = access(sc->destination->path, F_OK) == 0;
		snprintf(dir, sizeof dir, "%s", sc->destination->path);
		while (access(dir, F_OK) != 0) {
			char *slash = strrchr(dir, '/');
			if (!slash) {
				snprintf(dir, sizeof dir, ".");
				break;
			}
			if (slash == dir) {
				dir[1] = '\0';
				break;
			}
			*slash = '\0';
		}
		if (access(dir, W_OK) != 0) {
			snprintf(err, errlen, "destination \"%s\": path \"%s\" is not writable (\"%s\": %s)",
				 sc->destination->name, sc->destination->path, dir, strerror(errno));
			return SL_EFAIL;
		}
		printf("stream %s: destination %s: path %s %s\n", sc->name, sc->destination->name,
		       sc->destination->path, exists ? "is writable" : "can be created");
	}
	c = sl_pg_connect(sc->source, false, err, errlen);
	if (!c)
		return SL_EFAIL;
	printf("stream %s: source %s: connected\n", sc->name, sc->source->name);
	if ((rc = sl_pg_check_prereqs(c, err, errlen)) < 0)
		goto out;
	printf("stream %s: source %s: wal_level = logical, role may replicate\n", sc->name, sc->source->name);
	if ((rc = sl_pg_list_tables(c, sc->tables, sc->exclude_tables, &tables, &ntables, err, errlen)) < 0)
		goto out;
	if (ntables == 0) {
		snprintf(err, errlen, "stream \"%s\": no table on source \"%s\" matches its tables setting", sc->name,
			 sc->source->name);
		rc = SL_ECONFIG;
		goto out;
	}
	for (int i = 0; i < ntables; i++) {
		bool may = false;
		if ((rc = sl_pg_can_select(c, tables[i], &may, err, errlen)) < 0)
			goto out;
		if (!may) {
			snprintf(err, errlen, "stream \"%s\": role \"%s\" may not SELECT from \"%s\".\"%s\" "
				 "(GRANT SELECT ON ... TO %s)", sc->name, PQuser(c), tables[i]->ns, tables[i]->name, PQuser(c));
			rc = SL_EPREREQ;
			goto out;
		}
		if ((rc = check_merge_key(sc, tables[i], err, errlen)) < 0)
			goto out;
		printf("stream %s: table %s.%s: %d columns%s\n", sc->name, tables[i]->ns, tables[i]->name,
		       tables[i]->ncols, sl_table_has_key(tables[i]) ? "" : ", no primary key (append mode only)");
	}
	if ((rc = sl_pg_slot_info(c, sc->slot, &si, err, errlen)) < 0)
		goto out;
	if (si.exists && !strcmp(si.wal_status, "lost")) {
		snprintf(err, errlen, "stream \"%s\": replication slot \"%s\" is lost", sc->name, sc->slot);
		rc = SL_ELOST;
		goto out;
	}
	printf("stream %s: slot %s: %s\n", sc->name, sc->slot, si.exists ? "exists" : "will be created");
	rc = SL_OK;
out:
	sl_pg_tables_free(tables, ntables);
	PQfinish(c);
	(void)cfg;
	return rc;
}

static void add_alert(json_t *alerts, const char *name, const char *severity, const char *text)
{
	json_t *a = json_object();
	json_object_set_new(a, "alert", json_string(name));
	json_object_set_new(a, "severity", json_string(severity));
	json_object_set_new(a, "message", json_string(text));
	json_array_append_new(alerts, a);
}

int sl_stream_status(struct sl_config *cfg, struct sl_stream_config *sc, void *out_json, char *err, size_t errlen)
{
	json_t *o = out_json, *tabs = json_object(), *alerts = json_array();
	struct sl_checkpoint ck;
	struct sl_pg_slot_info si;
	char lsn[18], msg[256];
	PGconn *c;

	if (sl_ckpt_load(&ck, cfg->state_dir, sc->name, err, errlen) < 0) {
		json_decref(tabs);
		json_decref(alerts);
		return SL_EFAIL;
	}
	json_object_set_new(o, "stream", json_string(sc->name));
	json_object_set_new(o, "source", json_string(sc->source->name));
	json_object_set_new(o, "destination", json_string(sc->destination->name));
	json_object_set_new(o, "slot", json_string(sc->slot));
	json_object_set_new(o, "checkpoint", ck.exists ? json_string(ck.path) : json_null());
	sl_lsn_format(ck.durable_lsn, lsn);
	json_object_set_new(o, "durable_lsn", ck.exists ? json_string(lsn) : json_null());
	json_object_set_new(o, "last_source_time_us", ck.last_source_ts_us ? json_integer(ck.last_source_ts_us) : json_null());
	for (int i = 0; i < ck.ntables; i++) {
		json_t *t = json_object();
		json_object_set_new(t, "backfill", json_string(sl_bf_state_name(ck.tables[i].state)));
		json_object_set_new(t, "rows", json_integer((json_int_t)ck.tables[i].rows));
		json_object_set_new(tabs, ck.tables[i].name, t);
	}
	json_object_set_new(o, "tables", tabs);
	c = sl_pg_connect(sc->source, false, err, errlen);
	if (!c) {
		json_object_set_new(o, "source_error", json_string(err));
		add_alert(alerts, "source_unreachable", "critical", err);
	} else if (sl_pg_slot_info(c, sc->slot, &si, err, errlen) == SL_OK) {
		json_t *slot = json_object();
		json_object_set_new(slot, "exists", json_boolean(si.exists));
		if (si.exists) {
			sl_lsn_format(si.confirmed_flush_lsn, lsn);
			json_object_set_new(slot, "confirmed_flush_lsn", json_string(lsn));
			sl_lsn_format(si.restart_lsn, lsn);
			json_object_set_new(slot, "restart_lsn", json_string(lsn));
			json_object_set_new(slot, "active", json_boolean(si.active));
			json_object_set_new(slot, "wal_status", json_string(si.wal_status));
			json_object_set_new(slot, "lag_bytes", json_integer(si.lag_bytes));
			json_object_set_new(slot, "retained_wal_bytes", json_integer(si.retained_bytes));
			json_object_set_new(slot, "safe_wal_size", si.safe_wal_size >= 0 ? json_integer(si.safe_wal_size) : json_null());
			if (!strcmp(si.wal_status, "lost"))
				add_alert(alerts, "slot_lost", "critical", "the replication slot is lost: re-backfill needed");
			if (sc->lag_critical_bytes && si.lag_bytes >= (int64_t)sc->lag_critical_bytes) {
				snprintf(msg, sizeof msg, "slot lag %" PRId64 " bytes >= lag_critical_bytes %" PRIu64,
					 si.lag_bytes, sc->lag_critical_bytes);
				add_alert(alerts, "lag", "critical", msg);
			} else if (sc->lag_warn_bytes && si.lag_bytes >= (int64_t)sc->lag_warn_bytes) {
				snprintf(msg, sizeof msg, "slot lag %" PRId64 " bytes >= lag_warn_bytes %" PRIu64,
					 si.lag_bytes, sc->lag_warn_bytes);
				add_alert(alerts, "lag", "warning", msg);
			}
			if (sc->retained_wal_warn_bytes && si.retained_bytes >= (int64_t)sc->retained_wal_warn_bytes) {
				snprintf(msg, sizeof msg, "slot retains %" PRId64 " bytes of WAL >= retained_wal_warn_bytes %" PRIu64,
					 si.retained_bytes, sc->retained_wal_warn_bytes);
				add_alert(alerts, "retained_wal", "warning", msg);
			}
		} else if (ck.exists && ck.slot_created) {
			add_alert(alerts, "slot_missing", "critical", "the replication slot is missing: re-backfill needed");
		}
		json_object_set_new(o, "slot_status", slot);
	} else {
		json_object_set_new(o, "source_error", json_string(err));
	}
	if (c)
		PQfinish(c);
	if (ck.exists && ck.last_source_ts_us && sc->freshness_warn_seconds) {
		int64_t age = (sl_now_us() - ck.last_source_ts_us) / 1000000;
		json_object_set_new(o, "freshness_seconds", json_integer(age));
	}
	json_object_set_new(o, "alerts", alerts);
	sl_ckpt_free(&ck);
	return SL_OK;
}

int sl_stream_request_backfill(struct sl_config *cfg, struct sl_stream_config *sc, const char *table,
			       char *err, size_t errlen)
{
	struct sl_checkpoint ck;
	struct sl_pg_slot_info si;
	PGconn *c;
	int rc = SL_OK, found = 0;

	if (sl_mkdir_p(cfg->state_dir) < 0) {
		snprintf(err, errlen, "could not create state_dir \"%s\": %s", cfg->state_dir, strerror(errno));
		return SL_EFAIL;
	}
	if (sl_ckpt_load(&ck, cfg->state_dir, sc->name, err, errlen) < 0)
		return SL_EFAIL;
	snprintf(ck.slot, sizeof ck.slot, "%s", sc->slot);
	c = sl_pg_connect(sc->source, false, err, errlen);
	if (!c) {
		rc = SL_EFAIL;
		goto out;
	}
	rc = sl_pg_slot_info(c, sc->slot, &si, err, errlen);
	PQfinish(c);
	if (rc < 0)
		goto out;
	if (!si.exists || !strcmp(si.wal_status, "lost")) {
		if (table) {
			snprintf(err, errlen, "stream \"%s\": slot \"%s\" is %s, so every table must be backfilled "
				 "again: run without --table", sc->name, sc->slot, si.exists ? "lost" : "missing");
			rc = SL_ECONFIG;
			goto out;
		}
		if (si.exists) {
			snprintf(err, errlen, "stream \"%s\": slot \"%s\" is lost; drop it first "
				 "(SELECT pg_drop_replication_slot('%s'))", sc->name, sc->slot, sc->slot);
			rc = SL_EPREREQ;
			goto out;
		}
		ck.reset_slot = ck.slot_created;
		ck.slot_created = false;
	}
	for (int i = 0; i < ck.ntables; i++) {
		if (table && strcmp(ck.tables[i].name, table) != 0)
			continue;
		found++;
		if (ck.tables[i].state != SL_BF_RUNNING)
			ck.tables[i].state = SL_BF_PENDING;
	}
	if (table && !found) {
		struct sl_ckpt_table *e;
		const char *dot = strchr(table, '.');
		char ns[256];
		if (!dot || (size_t)(dot - table) >= sizeof ns) {
			snprintf(err, errlen, "--table must be SCHEMA.TABLE, not \"%s\"", table);
			rc = SL_ECONFIG;
			goto out;
		}
		snprintf(ns, sizeof ns, "%.*s", (int)(dot - table), table);
		e = sl_ckpt_table(&ck, ns, dot + 1);
		if (!e) {
			snprintf(err, errlen, "out of memory");
			rc = SL_EFAIL;
			goto out;
		}
		e->state = SL_BF_PENDING;
	}
	if (sl_ckpt_save(&ck, err, errlen) < 0) {
		rc = SL_EFAIL;
		goto out;
	}
	printf("stream %s: %s marked for backfill on the next run\n", sc->name, table ? table : "every table");
out:
	sl_ckpt_free(&ck);
	return rc;
}
