/*
 * tests/unit/test_pipeline.c: the pipeline (agent/pipeline.c) and its queue
 * (agent/queue.c), driven by a fake source with binlog-shaped positions and a
 * fake sink (fake_source.c), without any server:
 *
 *   - the queue keeps order and content across chunks, passes a record
 *     larger than its cap, and stays within its cap;
 *   - nothing is acknowledged beyond what the sink reported durable;
 *   - a failed flush acknowledges nothing more, and a second run resumes
 *     from the checkpoint and delivers every change;
 *   - the same with a sink that flushes in two steps (flush_start, then
 *     flush_wait while the writer goes on);
 *   - SIGTERM drains (everything flushed, checkpointed and acknowledged);
 *     a second signal cancels at once, even while a flush blocks;
 *   - a 1,000,000-change transaction passes through a 1 MB queue;
 *   - a sink that takes 30 s per flush: memory stays under the queue cap and
 *     status updates keep going out;
 *   - the writer's metrics: changes per table and operation, flushes;
 *   - every TRUNCATE marker sorts strictly after the rows it ends.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <nettle/hmac.h>

#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "agent/checkpoint.h"
#include "agent/pipeline.h"
#include "agent/queue.h"
#include "common/util.h"
#include "ops/metrics.h"
#include "schema/mask.h"
#include "tests/unit/fake_source.h"

static void sleep_ms(int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };
	nanosleep(&ts, NULL);
}

/* ---- the queue ---- */

struct qtest {
	struct sl_queue *q;
	int n;
	size_t big;
	int bad;
};

static size_t rec_size(int i, size_t big)
{
	return i % 97 == 0 ? big : (size_t)(1 + (i * 7919) % 3000);
}

static void *consumer(void *arg)
{
	struct qtest *t = arg;

	for (int i = 0; i < t->n;) {
		size_t len;
		unsigned char *r = sl_queue_peek(t->q, 1000, &len);
		if (!r)
			continue;
		if (len != rec_size(i, t->big) || r[0] != (unsigned char)i || r[len - 1] != (unsigned char)(i * 3))
			t->bad++;
		sl_queue_pop(t->q);
		i++;
	}
	return NULL;
}

/* Queues record i (what consumer() checks), unpublished; returns its size. */
static size_t produce(struct qtest *t, int i)
{
	size_t len = rec_size(i, t->big);
	unsigned char *r;
	bool oom;

	while (!(r = sl_queue_reserve(t->q, len, 100, &oom)))
		assert_false(oom);
	memset(r, 0x5a, len);
	r[0] = (unsigned char)i;
	r[len - 1] = (unsigned char)(i * 3);
	sl_queue_commit(t->q, len);
	return len;
}

static void test_queue_order_and_cap(void **state)
{
	struct qtest t = { .n = 3000, .big = (size_t)3 << 20 };
	pthread_t th;
	(void)state;

	/* A cap of 1 MB: records of 3 MB must still pass, one at a time. */
	t.q = sl_queue_new((size_t)1 << 20);
	assert_non_null(t.q);
	assert_int_equal(pthread_create(&th, NULL, consumer, &t), 0);
	for (int i = 0; i < t.n; i++) {
		produce(&t, i);
		if (i % 10 == 0)
			sl_queue_publish(t.q);
	}
	sl_queue_publish(t.q);
	pthread_join(th, NULL);
	assert_int_equal(t.bad, 0);
	/* At most the cap, or one chunk plus the one big record. */
	assert_true(sl_queue_peak_bytes(t.q) <= SL_QUEUE_CHUNK + t.big + 8);
	sl_queue_close(t.q);
	{
		bool oom;
		assert_null(sl_queue_reserve(t.q, 10, 0, &oom));
		assert_false(oom);
		assert_true(sl_queue_closed(t.q));
	}
	sl_queue_free(t.q);
}

static void test_queue_full_times_out(void **state)
{
	struct sl_queue *q = sl_queue_new(SL_QUEUE_CHUNK * 2);
	int64_t t0;
	bool oom;
	int n = 0;
	(void)state;

	/* Nobody consumes: the producer fills the cap, then waits and gives up. */
	for (;;) {
		void *r = sl_queue_reserve(q, 60000, 200, &oom);
		if (!r)
			break;
		sl_queue_commit(q, 60000);
		n++;
		assert_true(n < 100);
	}
	assert_false(oom);
	assert_true(sl_queue_bytes(q) <= SL_QUEUE_CHUNK * 2);
	t0 = sl_mono_ms();
	assert_null(sl_queue_reserve(q, 60000, 300, &oom));
	assert_true(sl_mono_ms() - t0 >= 250);
	sl_queue_free(q);
}

/* Records published lazily one by one wake a sleeping consumer once per
 * SL_QUEUE_WAKE_BYTES, not once each; the consumer still gets them all, in
 * order, and a plain publish at the end wakes it for the rest. */
static void test_queue_lazy_wakes(void **state)
{
	struct qtest t = { .n = 400, .big = 1000 };
	size_t total = 0;
	pthread_t th;
	(void)state;

	t.q = sl_queue_new(0);
	assert_non_null(t.q);
	assert_int_equal(pthread_create(&th, NULL, consumer, &t), 0);
	for (int i = 0; i < t.n; i++) {
		total += produce(&t, i);
		sl_queue_publish_lazy(t.q);
		if (i % 20 == 0)
			sleep_ms(2);  /* the consumer drains and goes to sleep */
	}
	sl_queue_publish(t.q);
	pthread_join(th, NULL);
	assert_int_equal(t.bad, 0);
	assert_true(total > 3 * SL_QUEUE_WAKE_BYTES);
	assert_true(sl_queue_wakes(t.q) <= total / SL_QUEUE_WAKE_BYTES + 1);
	sl_queue_free(t.q);
}

/* ---- the pipeline ---- */

struct run {
	struct fake_world *w;
	char dir[64];
	atomic_int signals;
	bool until_caught_up;
	size_t queue_bytes;
	int rc;                 /* sl_pipe_stream */
	int stop_rc;            /* sl_pipe_stop */
	bool abandoned;
	int64_t stream_returned_ms;
	struct sl_pipe_stats stats;
	struct sl_ops_stream *ops;  /* metrics, or NULL */
	struct sl_mask *mask;       /* column rules, or NULL */
	bool two_step;              /* the sink flushes in two steps (fake_sink_two_step_ops) */
	char err[1024];
};

static void run_init(struct run *r, struct fake_world *w)
{
	memset(r, 0, sizeof *r);
	r->w = w;
	snprintf(r->dir, sizeof r->dir, "/tmp/sluice-pipe-XXXXXX");
	assert_non_null(mkdtemp(r->dir));
	atomic_init(&r->signals, 0);
	r->until_caught_up = true;
}

static void run_cleanup(struct run *r)
{
	char path[128];

	snprintf(path, sizeof path, "%s/s1.checkpoint.json", r->dir);
	unlink(path);
	rmdir(r->dir);
}

/* The pipe of stream "s1" of run r, into the fake sink (one step). */
static void pipe_config(struct sl_pipe_config *pc, struct run *r, struct sl_checkpoint *ck, void *sink)
{
	memset(pc, 0, sizeof *pc);
	pc->stream = "s1";
	pc->desc = &fake_desc;
	pc->sink = &fake_sink_ops;
	pc->sinkctx = sink;
	pc->ck = ck;
	pc->signals = &r->signals;
	pc->err = r->err;
	pc->errlen = sizeof r->err;
}

/* One run of the stream: load the checkpoint, start the pipe, stream, stop. */
static void *run_main(void *arg)
{
	struct run *r = arg;
	struct fake_world *w = r->w;
	struct sl_checkpoint ck;
	struct sl_pipe_config pc;
	struct sl_pipe_stream_opts o;
	struct sl_pipe *p = NULL;
	void *src, *sink;

	r->rc = r->stop_rc = SL_EFAIL;
	if (sl_ckpt_load(&ck, &fake_desc, r->dir, "s1", r->err, sizeof r->err) < 0)
		return NULL;
	if (!ck.has_position) {
		ck.has_position = true;
		ck.durable = fake_pos(1, 4);
		if (sl_ckpt_save(&ck, r->err, sizeof r->err) < 0)
			goto out;
	}
	src = fake_source_new(w);
	sink = fake_sink_new(w);
	pipe_config(&pc, r, &ck, sink);
	pc.sink = r->two_step ? &fake_sink_two_step_ops : &fake_sink_ops;
	pc.queue_bytes = r->queue_bytes;
	pc.status_interval_ms = w->status_interval_ms;
	pc.ops = r->ops;
	pc.mask = r->mask;
	if (sl_pipe_start(&p, &pc) < 0)
		goto out2;
	fake_source_ops.start(src, &ck.durable, r->err, sizeof r->err);
	memset(&o, 0, sizeof o);
	o.until_caught_up = r->until_caught_up;
	if (w->ntx != UINT64_MAX && w->ntx > 0)
		o.target = fake_tx_end(w, w->ntx - 1);
	r->rc = sl_pipe_stream(p, &fake_source_ops, src, &o);
	r->stream_returned_ms = sl_mono_ms();
	sl_pipe_get_stats(p, &r->stats);
	r->stop_rc = sl_pipe_stop(p, r->rc == SL_OK, &r->abandoned);
out2:
	if (!r->abandoned)
		fake_sink_ops.close(sink);
	fake_source_ops.close(src);
out:
	if (!r->abandoned)
		sl_ckpt_free(&ck);
	return NULL;
}

/* Every change of transactions [0, ntx) is durable in the sink at least
 * once, and duplicates are identical (same CSN, same uuid). */
static void assert_all_delivered(struct fake_world *w, uint64_t ntx)
{
	uint64_t want = ntx * w->changes_per_tx, distinct = 0;
	char **lines = calloc(w->ndurable_lines + 1, sizeof *lines);

	for (size_t i = 0; i < w->ndurable_lines; i++)
		lines[i] = w->durable_lines[i];
	qsort(lines, w->ndurable_lines, sizeof *lines,
	      (int (*)(const void *, const void *))(void *)strcmp);
	for (size_t i = 0; i < w->ndurable_lines; i++) {
		if (i > 0 && !strncmp(lines[i], lines[i - 1], SL_CSN_LEN)) {
			/* a repeat must be byte-identical */
			assert_string_equal(lines[i], lines[i - 1]);
			continue;
		}
		distinct++;
	}
	free(lines);
	assert_int_equal(distinct, want);
}

static void test_acks_only_durable(void **state)
{
	struct fake_world w;
	struct run r;
	struct sl_position end;
	(void)state;

	fake_world_init(&w, 500, 5);
	run_init(&r, &w);
	run_main(&r);
	assert_int_equal(r.rc, SL_OK);
	assert_int_equal(r.stop_rc, SL_OK);
	assert_int_equal(w.ack_violations, 0);
	assert_true(w.acks > 0);
	/* The last ack is the end of the last transaction. */
	end = fake_tx_end(&w, 499);
	assert_int_equal(fake_desc.pos_compare(&w.acked, &end), 0);
	assert_int_equal(fake_desc.pos_compare(&w.durable, &end), 0);
	assert_all_delivered(&w, 500);
	/* CSNs are built from binlog-shaped positions: file 1, offset 4. */
	{
		char **lines = w.durable_lines;
		bool found = false;
		for (size_t i = 0; i < w.ndurable_lines && !found; i++)
			found = !strncmp(lines[i], "0000000100000004-0000000001 I ", 30);
		assert_true(found);
	}
	assert_int_equal(r.stats.changes, 2500);
	run_cleanup(&r);
	fake_world_free(&w);
}

/* The second flush fails: only the first is acknowledged and checkpointed;
 * a second run starts from the checkpoint and delivers everything. */
static void failed_flush_resumes(bool two_step)
{
	struct fake_world w;
	struct run r;
	struct sl_position after_first;
	struct sl_checkpoint ck;
	char err[256];

	fake_world_init(&w, 1000, 5);
	w.fail_flush_at = 2;
	run_init(&r, &w);
	r.two_step = two_step;
	run_main(&r);
	assert_int_equal(r.rc, SL_EFAIL);
	assert_non_null(strstr(r.err, "fails as the test asked"));
	assert_int_equal(w.ack_violations, 0);
	/* Only the first flush became durable, and the checkpoint says so. */
	assert_true(w.has_durable);
	after_first = w.durable;
	assert_true(w.durable_records > 0 && w.durable_records < 5000);
	assert_int_equal(sl_ckpt_load(&ck, &fake_desc, r.dir, "s1", err, sizeof err), 0);
	assert_int_equal(fake_desc.pos_compare(&ck.durable, &after_first), 0);
	sl_ckpt_free(&ck);

	/* The retry starts from the checkpoint and delivers everything. */
	w.fail_flush_at = 0;
	r.err[0] = '\0';
	run_main(&r);
	assert_int_equal(r.rc, SL_OK);
	assert_int_equal(fake_desc.pos_compare(&w.start_pos, &after_first), 0);
	assert_int_equal(w.ack_violations, 0);
	assert_all_delivered(&w, 1000);
	run_cleanup(&r);
	fake_world_free(&w);
}

static void test_failed_flush_retries_from_checkpoint(void **state)
{
	(void)state;
	failed_flush_resumes(false);
}

/* A sink that flushes in two steps: the writer goes on while a batch is in
 * flight, and nothing is acknowledged or checkpointed before its
 * flush_wait(); a batch that fails in flight fails the run, which resumes
 * from the checkpoint and delivers everything. */
static void test_two_step_flush(void **state)
{
	struct fake_world w;
	struct run r;
	struct sl_position end;
	(void)state;

	fake_world_init(&w, 1000, 5);
	run_init(&r, &w);
	r.two_step = true;
	run_main(&r);
	assert_int_equal(r.rc, SL_OK);
	assert_int_equal(r.stop_rc, SL_OK);
	assert_int_equal(w.ack_violations, 0);
	end = fake_tx_end(&w, 999);
	assert_int_equal(fake_desc.pos_compare(&w.acked, &end), 0);
	assert_int_equal(fake_desc.pos_compare(&w.durable, &end), 0);
	assert_true(w.flush_starts >= 4);   /* one per 1,000 changes, but the last: the drain's whole flush */
	assert_true(w.flushes >= 5);
	assert_all_delivered(&w, 1000);
	run_cleanup(&r);
	fake_world_free(&w);
	failed_flush_resumes(true);
}

/* Waits until the fake sink has flushed at least n times (10 s at most). */
static void wait_flushes(struct fake_world *w, uint64_t n)
{
	for (int i = 0; i < 1000; i++) {
		uint64_t f;
		pthread_mutex_lock(&w->mu);
		f = w->flushes;
		pthread_mutex_unlock(&w->mu);
		if (f >= n)
			return;
		sleep_ms(10);
	}
	fail_msg("the sink was never flushed");
}

/* Waits (5 s at most) until the sink has begun n flushes. */
static void wait_flushes_entered(struct fake_world *w, uint64_t n)
{
	int64_t deadline = sl_mono_ms() + 5000;

	for (;;) {
		uint64_t k;
		pthread_mutex_lock(&w->mu);
		k = w->flushes_entered;
		pthread_mutex_unlock(&w->mu);
		if (k >= n)
			return;
		assert_true(sl_mono_ms() < deadline);
		sleep_ms(5);
	}
}

static void test_drain_on_signal(void **state)
{
	struct fake_world w;
	struct run r;
	pthread_t th;
	char acked_csn[SL_CSN_LEN + 1];
	uint64_t complete = 0;
	(void)state;

	fake_world_init(&w, UINT64_MAX, 3);
	run_init(&r, &w);
	r.until_caught_up = false;
	assert_int_equal(pthread_create(&th, NULL, run_main, &r), 0);
	wait_flushes(&w, 2);
	atomic_store(&r.signals, 1);
	pthread_join(th, NULL);
	assert_int_equal(r.rc, SL_OK);
	assert_int_equal(r.stop_rc, SL_OK);
	assert_int_equal(w.ack_violations, 0);
	/* Drained: everything pushed was flushed, and the last complete
	 * transaction was acknowledged. */
	assert_true(w.has_acked && w.has_durable);
	assert_int_equal(fake_desc.pos_compare(&w.acked, &w.durable), 0);
	/* Every transaction before the acknowledged position is durable whole
	 * (a transaction open when the signal came may be partly written: it is
	 * not acknowledged, and comes again identically on the next run). */
	sl_csn_format(acked_csn, fake_desc.pos_csn(&w.acked), 0);
	for (size_t i = 0; i < w.ndurable_lines; i++)
		if (strncmp(w.durable_lines[i], acked_csn, 16) < 0)
			complete++;
	assert_true(complete > 0);
	assert_int_equal(complete % 3, 0);
	run_cleanup(&r);
	fake_world_free(&w);
}

/* A SIGTERM that comes between a key change's UPDATE-DELETE and its
 * UPDATE-INSERT: the drain reads the UPDATE-INSERT first, so that no flush
 * holds the first half alone (issue 17, seed 4840: the replay's second
 * half could not fill the values it left unchanged). */
static void test_drain_keeps_a_key_change_whole(void **state)
{
	struct fake_world w;
	struct run r;
	pthread_t th;
	size_t halves = 0;
	(void)state;

	fake_world_init(&w, UINT64_MAX, 4);
	w.key_change_at = 2;
	run_init(&r, &w);
	r.until_caught_up = false;
	w.drain_after_move = &r.signals;
	assert_int_equal(pthread_create(&th, NULL, run_main, &r), 0);
	pthread_join(th, NULL);
	assert_int_equal(r.rc, SL_OK);
	assert_int_equal(r.stop_rc, SL_OK);
	assert_true(w.ndurable_lines > 0);
	/* every UPDATE-DELETE durable (seq 2) has its UPDATE-INSERT (seq 3) */
	for (size_t i = 0; i < w.ndurable_lines; i++) {
		char want[SL_CSN_LEN + 1];
		bool found = false;
		if (strncmp(w.durable_lines[i] + 17, "0000000002", 10) != 0)
			continue;
		halves++;
		snprintf(want, sizeof want, "%.17s0000000003", w.durable_lines[i]);
		for (size_t j = 0; j < w.ndurable_lines && !found; j++)
			found = strncmp(w.durable_lines[j], want, SL_CSN_LEN) == 0;
		if (!found)
			fail_msg("%s is durable without its UPDATE-INSERT", w.durable_lines[i]);
	}
	assert_true(halves >= 2);   /* the drain came in the second transaction */
	run_cleanup(&r);
	fake_world_free(&w);
}

static void test_cancel_on_second_signal(void **state)
{
	struct fake_world w;
	struct run r;
	pthread_t th;
	int64_t t0;
	(void)state;

	fake_world_init(&w, UINT64_MAX, 3);
	atomic_store(&w.flush_delay_ms, 3000);
	run_init(&r, &w);
	r.until_caught_up = false;
	assert_int_equal(pthread_create(&th, NULL, run_main, &r), 0);
	wait_flushes_entered(&w, 1);  /* the first flush is under way and blocks */
	pthread_mutex_lock(&w.mu);
	assert_int_equal(w.flushes, 0);
	pthread_mutex_unlock(&w.mu);
	atomic_store(&r.signals, 1);
	sleep_ms(200);
	t0 = sl_mono_ms();
	atomic_store(&r.signals, 2);
	pthread_join(th, NULL);
	/* The stream gave up at once, not after the flush. */
	assert_true(r.stream_returned_ms - t0 < 1500);
	assert_int_equal(r.rc, SL_EFAIL);
	assert_non_null(strstr(r.err, "cancelled"));
	assert_int_equal(w.ack_violations, 0);
	assert_false(r.abandoned);
	run_cleanup(&r);
	fake_world_free(&w);
}

/* Reads path whole into a malloc'd string (NULL when it cannot). */
static char *slurp(const char *path)
{
	FILE *f = fopen(path, "rb");
	char *s;
	long n;

	if (!f)
		return NULL;
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	rewind(f);
	s = calloc(1, (size_t)n + 1);
	if (s && fread(s, 1, (size_t)n, f) != (size_t)n) {
		free(s);
		s = NULL;
	}
	fclose(f);
	return s;
}

/* A writer still at work when the stream is stopped without a drain (abort)
 * never writes the checkpoint again: a new run may own it by then.  Here
 * the writer is inside the flush of a drop marker when the stop comes; it
 * used to record the table as dropped after the flush returned. */
static void test_no_checkpoint_after_abort(void **state)
{
	struct fake_world w;
	struct run r;
	struct sl_checkpoint ck;
	struct sl_pipe_config pc;
	struct sl_pipe *p = NULL;
	struct sl_position pos = fake_pos(1, 100);
	char path[128], *before, *after;
	void *sink;
	bool abandoned = false;
	(void)state;

	fake_world_init(&w, 0, 1);
	run_init(&r, &w);
	assert_int_equal(sl_ckpt_load(&ck, &fake_desc, r.dir, "s1", r.err, sizeof r.err), 0);
	ck.has_position = true;
	ck.durable = fake_pos(1, 4);
	assert_non_null(sl_ckpt_table(&ck, "shop", "orders"));
	assert_int_equal(sl_ckpt_save(&ck, r.err, sizeof r.err), 0);
	snprintf(path, sizeof path, "%s/s1.checkpoint.json", r.dir);

	sink = fake_sink_new(&w);
	memset(&pc, 0, sizeof pc);
	pc.stream = "s1";
	pc.desc = &fake_desc;
	pc.sink = &fake_sink_ops;
	pc.sinkctx = sink;
	pc.ck = &ck;
	pc.status_interval_ms = 1000;
	pc.signals = &r.signals;
	pc.err = r.err;
	pc.errlen = sizeof r.err;
	atomic_store(&w.flush_delay_ms, 1500);
	assert_int_equal(sl_pipe_start(&p, &pc), 0);
	assert_int_equal(sl_pipe_drop_marker(p, 0, w.table, &pos), 0);
	/* The marker is written, and its flush sleeps (the checkpoint holds
	 * the marker's time, saved before it was written). */
	wait_flushes_entered(&w, 1);
	before = slurp(path);
	assert_non_null(before);
	assert_non_null(strstr(before, "\"marker_csn\": 4294967397"));
	sl_pipe_stop(p, false, &abandoned);
	assert_false(abandoned);
	after = slurp(path);
	assert_non_null(after);
	assert_string_equal(after, before);
	free(before);
	free(after);
	fake_sink_ops.close(sink);
	sl_ckpt_free(&ck);
	run_cleanup(&r);
	fake_world_free(&w);
}

static void test_million_change_transaction(void **state)
{
	struct fake_world w;
	struct run r;
	(void)state;

	fake_world_init(&w, 1, 1000000);
	w.counts_only = true;
	w.value_bytes = 100;
	run_init(&r, &w);
	r.queue_bytes = (size_t)1 << 20;
	run_main(&r);
	assert_int_equal(r.rc, SL_OK);
	assert_int_equal(w.durable_records, 1000000);
	assert_int_equal(r.stats.changes, 1000000);
	/* 1,000,000 changes of ~200 bytes each went through 1 MB of queue. */
	print_message("queue peak %zu bytes for 1000000 changes\n", r.stats.queue_peak_bytes);
	assert_true(r.stats.queue_peak_bytes <= ((size_t)1 << 20) + SL_QUEUE_CHUNK);
	assert_int_equal(w.ack_violations, 0);
	run_cleanup(&r);
	fake_world_free(&w);
}

static void test_slow_sink_keeps_status_going(void **state)
{
	struct fake_world w;
	struct run r;
	pthread_t th;
	uint64_t acks_before, acks_after;
	const int flush_ms = 8000, window_ms = 5000;
	(void)state;

	fake_world_init(&w, UINT64_MAX, 3);
	w.status_interval_ms = 50;
	atomic_store(&w.flush_delay_ms, flush_ms);
	run_init(&r, &w);
	r.until_caught_up = false;
	r.queue_bytes = (size_t)2 << 20;
	assert_int_equal(pthread_create(&th, NULL, run_main, &r), 0);
	wait_flushes_entered(&w, 1);  /* the first flush started and blocks for 8 s */
	pthread_mutex_lock(&w.mu);
	acks_before = w.acks;
	pthread_mutex_unlock(&w.mu);
	sleep_ms(window_ms);          /* a measurement window, not a wait for a condition */
	pthread_mutex_lock(&w.mu);
	acks_after = w.acks;
	assert_int_equal(w.flushes, 0);  /* the flush was blocked all along */
	pthread_mutex_unlock(&w.mu);
	atomic_store(&w.flush_delay_ms, 0);
	wait_flushes(&w, 1);          /* the slow flush ends */
	atomic_store(&r.signals, 1);
	pthread_join(th, NULL);
	/* A status update every 50 ms while the sink was stuck. */
	print_message("%" PRIu64 " status updates during %d ms of a blocked flush; queue peak %zu bytes\n",
		      acks_after - acks_before, window_ms, r.stats.queue_peak_bytes);
	assert_true(acks_after - acks_before >= (uint64_t)window_ms / 50 * 7 / 10);
	assert_true(r.stats.queue_peak_bytes <= ((size_t)2 << 20) + SL_QUEUE_CHUNK);
	assert_int_equal(r.rc, SL_OK);
	assert_int_equal(w.ack_violations, 0);
	run_cleanup(&r);
	fake_world_free(&w);
}

/* The pipeline's writer counts every change it writes per table and
 * operation, times every flush, and records the durable position's source
 * time, without a lock on its path (ops/metrics.h). */
static void test_metrics_counts(void **state)
{
	struct fake_world w;
	struct run r;
	struct sl_ops *ops = sl_ops_new();
	struct sl_ops_table *t;
	(void)state;

	fake_world_init(&w, 300, 7);
	w.dead_every = 10;
	run_init(&r, &w);
	r.ops = sl_ops_stream_add(ops, "s1");
	run_main(&r);
	assert_int_equal(r.rc, SL_OK);
	assert_int_equal(r.stop_rc, SL_OK);
	t = atomic_load(&r.ops->tables);
	assert_non_null(t);
	assert_string_equal(t->name, "shop.orders");
	assert_null(atomic_load(&t->next));
	assert_int_equal(atomic_load(&t->changes[SL_OP_INSERT]), 300 * 7);
	assert_int_equal(atomic_load(&t->changes[SL_OP_DELETE]), 0);
	/* every flush the sink saw (the last one at stop), each in +Inf */
	assert_true(w.flushes > 0);
	assert_int_equal(atomic_load(&r.ops->flushes), w.flushes);
	assert_int_equal(atomic_load(&r.ops->flush_buckets[SL_OPS_FLUSH_BUCKETS - 1]), w.flushes);
	assert_true(atomic_load(&r.ops->durable_advanced_us) > 0);
	/* the sink's dead letters, read after each flush: every 10th change */
	assert_int_equal(atomic_load(&r.ops->dead_letters), 300 * 7 / 10);
	run_cleanup(&r);
	fake_world_free(&w);
	sl_ops_free(ops);
}

/* A binlog heartbeat repeats the stream's position (nothing new to read):
 * once that position is durable and nothing waits in the sink, the
 * heartbeat's time is durable at once, without a flush, so an idle stream
 * stays fresh (sluice_freshness_seconds). */
static void test_heartbeat_at_durable_position(void **state)
{
	struct fake_world w;
	struct run r;
	struct sl_ops *ops = sl_ops_new();
	pthread_t th;
	int64_t t_mid = 0, ts = 0;
	(void)state;

	fake_world_init(&w, 5, 200);   /* 1000 changes: the fake sink flushes at the last commit */
	w.idle_heartbeats = true;
	run_init(&r, &w);
	r.until_caught_up = false;
	r.ops = sl_ops_stream_add(ops, "s1");
	assert_int_equal(pthread_create(&th, NULL, run_main, &r), 0);
	for (int i = 0; i < 800 && atomic_load(&r.ops->heartbeats_seen) < 10; i++) {
		struct timespec d = { 0, 25 * 1000000L };
		if (!t_mid && atomic_load(&r.ops->heartbeats_seen) >= 5)
			t_mid = sl_now_us();
		nanosleep(&d, NULL);
	}
	ts = atomic_load(&r.ops->durable_source_ts_us);
	atomic_store(&r.signals, 1);
	pthread_join(th, NULL);
	assert_int_equal(r.rc, SL_OK);
	assert_int_equal(r.stop_rc, SL_OK);
	assert_true(atomic_load(&r.ops->heartbeats_seen) >= 10);
	/* every transaction is durable, and so is a heartbeat's time: the
	 * commits are from 2023, the heartbeats from now */
	{
		struct sl_position end = fake_tx_end(&w, 4);
		assert_int_equal(fake_desc.pos_compare(&w.durable, &end), 0);
	}
	assert_all_delivered(&w, 5);
	/* later heartbeats at the same position count too, not only the
	 * first one the idle flush took */
	assert_true(t_mid > 0);
	assert_true(ts >= t_mid);
	assert_true(ts <= sl_now_us());
	run_cleanup(&r);
	fake_world_free(&w);
	sl_ops_free(ops);
}

/* The CSN of the durable record at i, which must be a TRUNCATE (T) or a
 * row (I). */
static const char *durable_csn(const struct fake_world *w, size_t i, char op, char out[SL_CSN_LEN + 1])
{
	assert_true(i < w->ndurable_lines);
	assert_int_equal(w->durable_lines[i][SL_CSN_LEN + 1], op);
	memcpy(out, w->durable_lines[i], SL_CSN_LEN);
	out[SL_CSN_LEN] = '\0';
	return out;
}

/* Every marker sorts strictly after the records of the state it ends, here
 * the rows of a backfill at S with nothing after them (the stream still at
 * S): a re-backfill while streaming and a dropped table at (S + 1, 0); a
 * backfill from a snapshot at S again (marker at (S - 1, 0)) first removes
 * the rows at S from the sink. */
static void test_markers_sort_between(void **state)
{
	struct fake_world w;
	struct run r;
	struct sl_checkpoint ck;
	struct sl_pipe_config pc;
	struct sl_pipe *p = NULL;
	struct sl_snapshot_info info;
	struct sl_value vals[2];
	char row[SL_CSN_LEN + 1], m[SL_CSN_LEN + 1];
	bool abandoned;
	void *sink;
	(void)state;

	fake_world_init(&w, 0, 1);
	run_init(&r, &w);
	assert_int_equal(sl_ckpt_load(&ck, &fake_desc, r.dir, "s1", r.err, sizeof r.err), 0);
	info.pos = fake_pos(1, 4000);
	info.ts_us = 1;
	ck.has_position = true;
	ck.durable = info.pos;
	assert_non_null(sl_ckpt_table(&ck, "shop", "orders"));
	sink = fake_sink_new(&w);
	pipe_config(&pc, &r, &ck, sink);
	assert_int_equal(sl_pipe_start(&p, &pc), 0);
	memset(vals, 0, sizeof vals);
	vals[0].kind = SL_V_INT;
	vals[0].i = 1;
	vals[1].kind = SL_V_STRING;
	vals[1].p = "a";
	vals[1].len = 1;
	assert_int_equal(sl_pipe_backfill_start(p, 0, w.table, &info, false, false), 0);
	assert_int_equal(sl_pipe_backfill_row(p, w.table, vals), 0);
	assert_int_equal(sl_pipe_backfill_done(p, 0, w.table, 1, NULL), 0);
	assert_int_equal(sl_pipe_job_start(p, 0, w.table, &info.pos, 1, true, false), 0);
	assert_int_equal(sl_pipe_drop_marker(p, 0, w.table, &info.pos), 0);
	assert_int_equal(sl_pipe_sync(p), 0);
	assert_int_equal(w.discards, 0);
	assert_int_equal(sl_pipe_backfill_start(p, 0, w.table, &info, true, false), 0);
	assert_int_equal(sl_pipe_sync(p), 0);
	assert_int_equal(sl_pipe_stop(p, true, &abandoned), 0);
	fake_sink_ops.close(sink);

	assert_int_equal(w.ndurable_lines, 4);
	assert_string_equal(durable_csn(&w, 0, 'I', row), "0000000100000FA0-0000000000");
	assert_string_equal(durable_csn(&w, 1, 'T', m), "0000000100000FA1-0000000000");
	assert_true(strcmp(m, row) > 0);
	assert_string_equal(durable_csn(&w, 2, 'T', m), "0000000100000FA1-0000000000");
	assert_string_not_equal(w.durable_lines[1], w.durable_lines[2]);   /* two records: two uuids */
	assert_string_equal(durable_csn(&w, 3, 'T', m), "0000000100000F9F-0000000000");
	assert_int_equal(w.discards, 1);
	assert_string_equal(w.discard_first, m);
	assert_string_equal(w.discard_last, row);
	sl_ckpt_free(&ck);
	run_cleanup(&r);
	fake_world_free(&w);
}

/* A re-backfill marker written again at the same position, by a run that
 * follows one killed after the marker was durable but before its checkpoint
 * said so, is the same record: the same CSN, uuid and source time, though
 * the second run asks for another time (doc/output.md, "Where a marker
 * sorts"). */
static void test_marker_replayed_is_the_same(void **state)
{
	struct fake_world w;
	struct run r;
	struct sl_checkpoint ck;
	struct sl_pipe_config pc;
	struct sl_pipe *p = NULL;
	struct sl_position pos = fake_pos(1, 4000);
	char m[SL_CSN_LEN + 1];
	bool abandoned = false;
	void *sink;
	(void)state;

	fake_world_init(&w, 0, 1);
	run_init(&r, &w);
	for (int run = 0; run < 2; run++) {
		assert_int_equal(sl_ckpt_load(&ck, &fake_desc, r.dir, "s1", r.err, sizeof r.err), 0);
		if (run == 0) {
			ck.has_position = true;
			ck.durable = pos;
			assert_non_null(sl_ckpt_table(&ck, "shop", "orders"));
			assert_int_equal(sl_ckpt_save(&ck, r.err, sizeof r.err), 0);
		}
		assert_int_equal(ck.tables[0].state, SL_BF_PENDING);
		sink = fake_sink_new(&w);
		pipe_config(&pc, &r, &ck, sink);
		assert_int_equal(sl_pipe_start(&p, &pc), 0);
		if (run == 0) {
			/* killed in the flush that makes the marker durable: it
			 * completes, and nothing after it is checkpointed */
			atomic_store(&w.flush_delay_ms, 300);
			assert_int_equal(sl_pipe_job_start(p, 0, w.table, &pos, 111, true, false), 0);
			wait_flushes_entered(&w, 2);
			sl_pipe_stop(p, false, &abandoned);
			assert_false(abandoned);
			atomic_store(&w.flush_delay_ms, 0);
		} else {
			assert_int_equal(sl_pipe_job_start(p, 0, w.table, &pos, 222, true, false), 0);
			assert_int_equal(sl_pipe_sync(p), 0);
			assert_int_equal(sl_pipe_stop(p, true, &abandoned), 0);
		}
		fake_sink_ops.close(sink);
		sl_ckpt_free(&ck);
	}
	assert_int_equal(w.ndurable_lines, 2);
	assert_string_equal(durable_csn(&w, 0, 'T', m), "0000000100000FA1-0000000000");
	assert_non_null(strstr(w.durable_lines[0], " ts=111"));
	assert_string_equal(w.durable_lines[1], w.durable_lines[0]);
	run_cleanup(&r);
	fake_world_free(&w);
}

/* Column masking happens before the queue: the sink sees the masked table
 * (payload excluded, the key id hashed) and masked rows, and a replay after
 * a failed flush gives the same records (the same hash, the same uuid). */
static int cmp_hex(const void *a, const void *b)
{
	return strcmp((const char *)a, (const char *)b);
}

static void test_masked_changes(void **state)
{
	enum { NTX = 1000, PER = 2 };
	char *ex[] = { "shop.orders.payload", NULL }, *mk[] = { "shop.*.i?:hash", NULL };
	static char want[NTX * PER][65];
	struct hmac_sha256_ctx h;
	struct fake_world w;
	struct run r;
	char err[256];
	(void)state;

	/* HMAC-SHA-256 of each id's decimal text, by nettle directly */
	for (int i = 0; i < NTX * PER; i++) {
		uint8_t d[SHA256_DIGEST_SIZE];
		char text[32];
		snprintf(text, sizeof text, "%d", (i / PER) * 1000000 + i % PER + 1);  /* k from 1 */
		hmac_sha256_set_key(&h, 3, (const uint8_t *)"k3y");
		hmac_sha256_update(&h, strlen(text), (const uint8_t *)text);
		hmac_sha256_digest(&h, sizeof d, d);
		for (int b = 0; b < 32; b++)
			snprintf(want[i] + 2 * b, 3, "%02x", d[b]);
	}
	qsort(want, NTX * PER, sizeof want[0], cmp_hex);

	fake_world_init(&w, NTX, PER);
	w.fail_flush_at = 2;
	run_init(&r, &w);
	assert_int_equal(sl_mask_new(&r.mask, ex, mk, "k3y", err, sizeof err), 0);
	run_main(&r);
	assert_int_equal(r.rc, SL_EFAIL);
	w.fail_flush_at = 0;
	run_main(&r);
	assert_int_equal(r.rc, SL_OK);
	assert_all_delivered(&w, NTX);
	for (size_t i = 0; i < w.ndurable_lines; i++) {
		const char *line = w.durable_lines[i], *id = strstr(line, " id=");
		assert_non_null(id);
		assert_null(strstr(line, "payload"));
		assert_int_equal(strlen(id + 4), 64);
		assert_non_null(bsearch(id + 4, want, NTX * PER, sizeof want[0], cmp_hex));
	}
	sl_mask_free(r.mask);
	run_cleanup(&r);
	fake_world_free(&w);
}

/* A rule that excludes a key column fails the stream with SL_ECONFIG. */
static void test_masked_key_excluded(void **state)
{
	char *ex[] = { "shop.orders.id", NULL };
	struct fake_world w;
	struct run r;
	char err[256];
	(void)state;

	fake_world_init(&w, 5, 1);
	run_init(&r, &w);
	assert_int_equal(sl_mask_new(&r.mask, ex, NULL, NULL, err, sizeof err), 0);
	run_main(&r);
	assert_int_equal(r.rc, SL_ECONFIG);
	assert_non_null(strstr(r.err, "column \"id\" of table \"shop\".\"orders\" is part of the table's key"));
	assert_int_equal(w.ndurable_lines, 0);
	sl_mask_free(r.mask);
	run_cleanup(&r);
	fake_world_free(&w);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_metrics_counts),
		cmocka_unit_test(test_queue_order_and_cap),
		cmocka_unit_test(test_queue_full_times_out),
		cmocka_unit_test(test_queue_lazy_wakes),
		cmocka_unit_test(test_acks_only_durable),
		cmocka_unit_test(test_masked_changes),
		cmocka_unit_test(test_masked_key_excluded),
		cmocka_unit_test(test_failed_flush_retries_from_checkpoint),
		cmocka_unit_test(test_two_step_flush),
		cmocka_unit_test(test_drain_on_signal),
		cmocka_unit_test(test_drain_keeps_a_key_change_whole),
		cmocka_unit_test(test_cancel_on_second_signal),
		cmocka_unit_test(test_no_checkpoint_after_abort),
		cmocka_unit_test(test_million_change_transaction),
		cmocka_unit_test(test_slow_sink_keeps_status_going),
		cmocka_unit_test(test_heartbeat_at_durable_position),
		cmocka_unit_test(test_markers_sort_between),
		cmocka_unit_test(test_marker_replayed_is_the_same),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
