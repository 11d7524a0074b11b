/*
 * tests/unit/fake_source.c: the test-only source and sink (see
 * fake_source.h).
 *
 * Positions: w[0] is the file number, w[1] the offset; text is unused.  The
 * CSN's position part is file << 32 | offset, as the MySQL source's will be.
 * Transaction tx of the script lives in file 1 + tx / tx_per_file; its
 * events are 100 bytes apart: BEGIN at offset 4 + 100 * (k * (changes + 2)),
 * where k is its place in the file, then one event per change, then COMMIT,
 * whose end is the position after it.
 */
#include "tests/unit/fake_source.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/buf.h"
#include "common/util.h"

#define EV_SIZE 100

static int pos_compare(const struct sl_position *a, const struct sl_position *b)
{
	if (a->w[0] != b->w[0])
		return a->w[0] < b->w[0] ? -1 : 1;
	if (a->w[1] != b->w[1])
		return a->w[1] < b->w[1] ? -1 : 1;
	return 0;
}

static uint64_t pos_csn(const struct sl_position *p)
{
	return p->w[0] << 32 | (p->w[1] & 0xffffffffu);
}

static int pos_encode(const struct sl_position *p, char *out, size_t outlen)
{
	int n = snprintf(out, outlen, "fake-bin.%06" PRIu64 ":%" PRIu64, p->w[0], p->w[1]);

	return n < 0 || (size_t)n >= outlen ? -1 : 0;
}

static int pos_decode(const char *text, struct sl_position *out)
{
	unsigned long long f, o;
	int used = 0;

	memset(out, 0, sizeof *out);
	if (sscanf(text, "fake-bin.%6llu:%llu%n", &f, &o, &used) != 2 || text[used])
		return -1;
	out->w[0] = f;
	out->w[1] = o;
	return 0;
}

static const struct sl_meta_field meta[] = {
	{ "log_file", SL_META_STRING },
	{ "log_position", SL_META_LONG },
	{ "gtid", SL_META_OPT_STRING },
};

static void meta_values(const struct sl_position *p, struct sl_meta_value *out, char *buf, size_t buflen)
{
	int n = snprintf(buf, buflen, "fake-bin.%06" PRIu64, p->w[0]);

	out[0].s = buf;
	out[0].len = n > 0 ? (size_t)n : 0;
	out[1].i = (int64_t)p->w[1];
	out[2].s = p->text[0] ? p->text : NULL;
	out[2].len = strlen(p->text);
}

const struct sl_source_desc fake_desc = {
	.kind = "fake",
	.ns_field = "database",
	.read_method_cdc = "fake-cdc",
	.read_method_backfill = "fake-backfill",
	.pos_compare = pos_compare,
	.pos_csn = pos_csn,
	.pos_encode = pos_encode,
	.pos_decode = pos_decode,
	.nmeta = 3,
	.meta = meta,
	.meta_values = meta_values,
};

struct sl_position fake_pos(uint32_t file, uint32_t offset)
{
	struct sl_position p;

	memset(&p, 0, sizeof p);
	p.w[0] = file;
	p.w[1] = offset;
	return p;
}

/* Position of event ev (0 = BEGIN, 1..changes = changes, changes + 1 =
 * COMMIT, changes + 2 = after it) of transaction tx. */
static struct sl_position tx_event(const struct fake_world *w, uint64_t tx, uint32_t ev)
{
	uint64_t k = tx % w->tx_per_file;

	return fake_pos((uint32_t)(1 + tx / w->tx_per_file),
			(uint32_t)(4 + EV_SIZE * (k * (w->changes_per_tx + 2) + ev)));
}

struct sl_position fake_tx_end(const struct fake_world *w, uint64_t tx)
{
	return tx_event(w, tx, w->changes_per_tx + 2);
}

void fake_world_init(struct fake_world *w, uint64_t ntx, uint32_t changes_per_tx)
{
	memset(w, 0, sizeof *w);
	pthread_mutex_init(&w->mu, NULL);
	w->ntx = ntx;
	w->changes_per_tx = changes_per_tx;
	w->tx_per_file = 50;
	w->value_bytes = 40;
	w->status_interval_ms = 200;
	w->table = sl_table_new("shop", "orders");
	sl_table_add_column(w->table, "id", SL_T_INT64, 0, 0, 1, -1, "bigint", true);
	sl_table_add_column(w->table, "payload", SL_T_STRING, 0, 0, 2, -1, "text", false);
	sl_table_finish(w->table);
	w->table->src = &fake_desc;
}

void fake_world_free(struct fake_world *w)
{
	for (size_t i = 0; i < w->ndurable_lines; i++)
		free(w->durable_lines[i]);
	free(w->durable_lines);
	sl_table_free(w->table);
	pthread_mutex_destroy(&w->mu);
}

/* ---- the source ---- */

struct fake_ctx {
	struct fake_world *w;
	char payload[4096];
	struct sl_value vals[2];
};

void *fake_source_new(struct fake_world *w)
{
	struct fake_ctx *c = calloc(1, sizeof *c);

	if (c)
		c->w = w;
	return c;
}

static void fs_close(void *ctx)
{
	free(ctx);
}

static int fs_start(void *ctx, const struct sl_position *from, char *err, size_t errlen)
{
	struct fake_ctx *c = ctx;
	struct fake_world *w = c->w;

	(void)err; (void)errlen;
	pthread_mutex_lock(&w->mu);
	w->start_pos = *from;
	w->started = true;
	/* Resume at a transaction boundary: skip what ends at or before from. */
	w->next_tx = 0;
	while (w->next_tx < w->ntx && pos_compare(&(struct sl_position){ 0 }, from) < 0) {
		struct sl_position end = fake_tx_end(w, w->next_tx);
		if (pos_compare(&end, from) > 0)
			break;
		w->next_tx++;
	}
	w->next_change = 0;
	w->commit_next = false;
	pthread_mutex_unlock(&w->mu);
	return SL_OK;
}

static int fs_next(void *ctx, int timeout_ms, struct sl_event *ev, char *err, size_t errlen)
{
	struct fake_ctx *c = ctx;
	struct fake_world *w = c->w;
	uint64_t tx;

	(void)err; (void)errlen;
	memset(ev, 0, offsetof(struct sl_event, change));
	pthread_mutex_lock(&w->mu);
	tx = w->next_tx;
	if (tx >= w->ntx) {
		bool hb = w->idle_heartbeats && w->ntx > 0 && w->ntx != UINT64_MAX;
		if (hb)
			w->heartbeats++;
		pthread_mutex_unlock(&w->mu);
		if (timeout_ms > 0) {
			struct timespec ts = { 0, (long)(timeout_ms > 50 ? 50 : timeout_ms) * 1000000L };
			nanosleep(&ts, NULL);
		}
		ev->kind = SL_EV_TIMEOUT;
		if (hb) {
			ev->kind = SL_EV_KEEPALIVE;
			ev->heartbeat = true;
			ev->ts_us = sl_now_us();
			ev->pos = fake_tx_end(w, w->ntx - 1);
		}
		return SL_OK;
	}
	if (w->next_change == 0 && !w->commit_next) {
		ev->kind = SL_EV_BEGIN;
		ev->pos = tx_event(w, tx, 0);
		ev->ts_us = 1700000000000000 + (int64_t)tx;
		ev->tx_id = tx + 1;
		w->next_change = 1;
		if (w->changes_per_tx == 0)
			w->commit_next = true;
	} else if (!w->commit_next) {
		uint32_t k = w->next_change;
		struct sl_change *ch = &ev->change;
		memset(ch, 0, sizeof *ch);
		ev->kind = SL_EV_CHANGE;
		memset(c->payload, 'a' + (int)(tx % 26), w->value_bytes);
		memset(c->vals, 0, sizeof c->vals);
		c->vals[0].kind = SL_V_INT;
		c->vals[0].i = (int64_t)(tx * 1000000 + k);
		c->vals[1].kind = SL_V_STRING;
		c->vals[1].p = c->payload;
		c->vals[1].len = w->value_bytes;
		ch->table = w->table;
		ch->op = SL_OP_INSERT;
		if (w->key_change_at && k == w->key_change_at) {
			ch->op = SL_OP_UPDATE_DELETE;
			if (w->drain_after_move && tx == 1)
				atomic_store(w->drain_after_move, 1);
		} else if (w->key_change_at && k == w->key_change_at + 1) {
			ch->op = SL_OP_UPDATE_INSERT;
		}
		ch->values = c->vals;
		{
			struct sl_position begin = tx_event(w, tx, 0);
			sl_change_set_csn(ch, pos_csn(&begin), k);
		}
		ch->source_ts_us = 1700000000000000 + (int64_t)tx;
		ch->tx_id = tx + 1;
		if (++w->next_change > w->changes_per_tx)
			w->commit_next = true;
	} else {
		ev->kind = SL_EV_COMMIT;
		ev->pos = fake_tx_end(w, tx);
		ev->ts_us = 1700000000000000 + (int64_t)tx;
		w->next_tx++;
		w->next_change = 0;
		w->commit_next = false;
	}
	pthread_mutex_unlock(&w->mu);
	return SL_OK;
}

static int fs_ack(void *ctx, const struct sl_position *durable, bool want_reply, char *err, size_t errlen)
{
	struct fake_ctx *c = ctx;
	struct fake_world *w = c->w;

	(void)err; (void)errlen;
	pthread_mutex_lock(&w->mu);
	w->acks++;
	if (want_reply)
		w->reply_requests++;
	/* Never beyond what the sink made durable, and never backwards.  The
	 * start position counts as durable: it came from the checkpoint. */
	if ((!w->has_durable || pos_compare(durable, &w->durable) > 0) &&
	    !(w->started && pos_compare(durable, &w->start_pos) <= 0))
		w->ack_violations++;
	if (w->has_acked && pos_compare(durable, &w->acked) < 0)
		w->ack_violations++;
	w->acked = *durable;
	w->has_acked = true;
	pthread_mutex_unlock(&w->mu);
	return SL_OK;
}

const struct sl_source_ops fake_source_ops = {
	.type = "fake",
	.desc = &fake_desc,
	.close = fs_close,
	.start = fs_start,
	.next = fs_next,
	.ack = fs_ack,
};

/* ---- the sink ---- */

struct fake_sink {
	struct fake_world *w;
	bool has_mark;
	struct sl_position mark;
	char **pending;
	size_t npending, apending;
	uint64_t pending_count;
	uint64_t written, dead;
	/* two-step flushes (fake_sink_two_step_ops): the batch in flight */
	bool flying;
	char **fly;
	size_t nfly, afly;
	uint64_t fly_count;
	bool fly_has_mark;
	struct sl_position fly_mark;
};

void *fake_sink_new(struct fake_world *w)
{
	struct fake_sink *s = calloc(1, sizeof *s);

	if (s) {
		s->w = w;
		w->sink = s;
	}
	return s;
}

static int fk_write(void *ctx, const struct sl_change *c, char *err, size_t errlen)
{
	struct fake_sink *s = ctx;
	struct fake_world *w = s->w;
	struct sl_buf b;

	(void)err; (void)errlen;
	if (w->dead_every && ++s->written % w->dead_every == 0)
		s->dead++;
	if (w->counts_only) {
		s->pending_count++;
		return 0;
	}
	sl_buf_init(&b, 0);
	sl_buf_printf(&b, "%s %s ", c->csn, c->op == SL_OP_TRUNCATE ? "T" : "I");
	for (int i = 0; i < 16; i++)
		sl_buf_printf(&b, "%02x", c->uuid[i]);
	if (c->op == SL_OP_TRUNCATE)   /* a marker: its time too, which a replay must keep */
		sl_buf_printf(&b, " ts=%" PRId64, c->source_ts_us);
	if (c->values && c->values[0].kind == SL_V_INT)
		sl_buf_printf(&b, " %" PRId64 " %.*s", c->values[0].i, (int)c->values[1].len, c->values[1].p);
	else if (c->values)  /* a masked table: each column by name, strings as they are */
		for (int i = 0; i < c->table->ncols; i++)
			sl_buf_printf(&b, " %s=%.*s", c->table->cols[i].name,
				      c->values[i].kind == SL_V_STRING ? (int)c->values[i].len : 1,
				      c->values[i].kind == SL_V_STRING ? c->values[i].p : "?");
	if (s->npending == s->apending) {
		s->apending = s->apending ? s->apending * 2 : 64;
		s->pending = realloc(s->pending, s->apending * sizeof *s->pending);
	}
	s->pending[s->npending++] = sl_buf_detach(&b);
	s->pending_count++;
	return 0;
}

static void fk_mark(void *ctx, const struct sl_position *pos)
{
	struct fake_sink *s = ctx;

	s->mark = *pos;
	s->has_mark = true;
}

static bool fk_flush_due(void *ctx, int64_t now_ms)
{
	(void)now_ms;
	return ((struct fake_sink *)ctx)->pending_count >= 1000;
}

static bool fk_pending(void *ctx)
{
	return ((struct fake_sink *)ctx)->pending_count > 0;
}

/* Makes lines [0, n) (count records) durable, with mark has_mark/m: the
 * Nth flush of the world, which may sleep first or fail as the test asks. */
static int make_durable(struct fake_sink *s, char **lines, size_t n, uint64_t count, bool has_mark,
			const struct sl_position *m, struct sl_position *durable, char *err, size_t errlen)
{
	struct fake_world *w = s->w;
	int delay = atomic_load(&w->flush_delay_ms), k;

	pthread_mutex_lock(&w->mu);
	w->flushes_entered++;
	pthread_mutex_unlock(&w->mu);
	if (delay > 0) {
		struct timespec ts = { delay / 1000, (long)(delay % 1000) * 1000000L };
		nanosleep(&ts, NULL);
	}
	pthread_mutex_lock(&w->mu);
	k = (int)++w->flushes;
	if (w->fail_flush_at && k == w->fail_flush_at) {
		pthread_mutex_unlock(&w->mu);
		snprintf(err, errlen, "fake sink: flush %d fails as the test asked", k);
		return -1;
	}
	w->durable_records += count;
	for (size_t i = 0; i < n; i++) {
		if (w->ndurable_lines == w->adurable_lines) {
			w->adurable_lines = w->adurable_lines ? w->adurable_lines * 2 : 256;
			w->durable_lines = realloc(w->durable_lines, w->adurable_lines * sizeof *w->durable_lines);
		}
		w->durable_lines[w->ndurable_lines++] = lines[i];
	}
	if (has_mark) {
		w->durable = *m;
		w->has_durable = true;
	}
	pthread_mutex_unlock(&w->mu);
	if (!has_mark)
		return 0;
	*durable = *m;
	return 1;
}

static int fk_flush(void *ctx, struct sl_position *durable, char *err, size_t errlen)
{
	struct fake_sink *s = ctx;
	int rc;

	if (s->flying) {
		snprintf(err, errlen, "fake sink: flush() while a flush is in flight (the agent must wait for it)");
		return -1;
	}
	rc = make_durable(s, s->pending, s->npending, s->pending_count, s->has_mark, &s->mark, durable, err, errlen);
	if (rc < 0)
		return rc;
	s->npending = 0;
	s->pending_count = 0;
	return rc;
}

/* The batch leaves: pending lines move to the flight, made durable only by
 * fk_flush_wait(). */
static int fk_flush_start(void *ctx, char *err, size_t errlen)
{
	struct fake_sink *s = ctx;
	char **tmp;
	size_t atmp;

	if (s->flying) {
		snprintf(err, errlen, "fake sink: flush_start() while a flush is in flight");
		return -1;
	}
	tmp = s->fly;
	atmp = s->afly;
	s->fly = s->pending;
	s->afly = s->apending;
	s->nfly = s->npending;
	s->pending = tmp;
	s->apending = atmp;
	s->npending = 0;
	s->fly_count = s->pending_count;
	s->pending_count = 0;
	s->fly_has_mark = s->has_mark;
	s->fly_mark = s->mark;
	s->flying = true;
	pthread_mutex_lock(&s->w->mu);
	s->w->flush_starts++;
	pthread_mutex_unlock(&s->w->mu);
	return 0;
}

static int fk_flush_wait(void *ctx, struct sl_position *durable, char *err, size_t errlen)
{
	struct fake_sink *s = ctx;
	int rc;

	if (!s->flying)
		return 0;
	s->flying = false;
	rc = make_durable(s, s->fly, s->nfly, s->fly_count, s->fly_has_mark, &s->fly_mark, durable, err, errlen);
	if (rc < 0) {
		for (size_t i = 0; i < s->nfly; i++)
			free(s->fly[i]);
	}
	s->nfly = 0;
	return rc;
}

static int fk_discard(void *ctx, const struct sl_table *t, const char *first, const char *last,
		      char *err, size_t errlen)
{
	struct fake_world *w = ((struct fake_sink *)ctx)->w;

	(void)t; (void)err; (void)errlen;
	snprintf(w->discard_first, sizeof w->discard_first, "%s", first);
	snprintf(w->discard_last, sizeof w->discard_last, "%s", last);
	w->discards++;
	return 0;
}

static void fk_close(void *ctx)
{
	struct fake_sink *s = ctx;

	if (!s)
		return;
	for (size_t i = 0; i < s->npending; i++)
		free(s->pending[i]);
	free(s->pending);
	for (size_t i = 0; i < s->nfly; i++)
		free(s->fly[i]);
	free(s->fly);
	free(s);
}

static uint64_t fk_dead_letters(void *ctx)
{
	return ((struct fake_sink *)ctx)->dead;
}

const struct sl_sink_ops fake_sink_ops = {
	.type = "fake",
	.write = fk_write,
	.mark = fk_mark,
	.flush_due = fk_flush_due,
	.pending = fk_pending,
	.flush = fk_flush,
	.discard_backfill = fk_discard,
	.dead_letters = fk_dead_letters,
	.close = fk_close,
};

const struct sl_sink_ops fake_sink_two_step_ops = {
	.type = "fake",
	.write = fk_write,
	.mark = fk_mark,
	.flush_due = fk_flush_due,
	.pending = fk_pending,
	.flush = fk_flush,
	.flush_start = fk_flush_start,
	.flush_wait = fk_flush_wait,
	.discard_backfill = fk_discard,
	.dead_letters = fk_dead_letters,
	.close = fk_close,
};
