/*
 * tests/tools/slow_sink.c: a test-only sink, "slow_avro_dir": avro_dir with
 * every flush delayed by flush_delay, to show that a slow destination does
 * not cost the source connection and that nothing is acknowledged early.
 *
 * It exists only in tests/tools/sluice_test, a build of sluice whose sink
 * registry (tests/tools/test_registry.c) adds it; the product binary has no
 * such code.  Its keys are avro_dir's plus flush_delay (a duration) and
 * flush_block_file (a path: while that file exists, every flush with
 * something to write waits, as a destination that is down would).
 */
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/keytab.h"
#include "common/log.h"
#include "sinks/avro_dir/avro_dir.h"
#include "sinks/sink.h"

struct slow_conf {
	struct sl_avro_dir_conf ad;     /* first: avro_dir's key rows apply as they are */
	uint64_t flush_delay_s;
	char *flush_block_file;
};

#define MAX_KEYS 16
static struct sl_keydesc slow_keys[MAX_KEYS];

/* The delay is per sink type, not per context: the tests run one stream. */
static uint64_t delay_s;
static const char *block_file;

static int slow_open(void **ctx, const void *conf, const struct sl_sink_stream *st, char *err, size_t errlen)
{
	const struct slow_conf *c = conf;

	delay_s = c->flush_delay_s;
	block_file = c->flush_block_file;
	sl_warn("test sink slow_avro_dir: every flush is delayed by %" PRIu64 " s", c->flush_delay_s);
	return sl_avro_dir_ops.open(ctx, &c->ad, st, err, errlen);
}

static int slow_flush(void *ctx, struct sl_position *durable, char *err, size_t errlen)
{
	if (delay_s > 0 && sl_avro_dir_ops.pending(ctx)) {
		struct timespec ts = { (time_t)delay_s, 0 };
		sl_info("test sink slow_avro_dir: a flush waits %" PRIu64 " s", delay_s);   /* tests wait for it */
		nanosleep(&ts, NULL);
	}
	while (block_file && sl_avro_dir_ops.pending(ctx) && access(block_file, F_OK) == 0) {
		struct timespec ts = { 0, 100 * 1000 * 1000 };
		nanosleep(&ts, NULL);
	}
	return sl_avro_dir_ops.flush(ctx, durable, err, errlen);
}

static int slow_check(const void *conf, const struct sl_sink_stream *st, FILE *out, char *err, size_t errlen)
{
	const struct slow_conf *c = conf;

	return sl_avro_dir_ops.check ? sl_avro_dir_ops.check(&c->ad, st, out, err, errlen) : 0;
}

struct sl_sink_ops sl_slow_sink_ops = {
	.type = "slow_avro_dir",
	.keys = slow_keys,
	.conf_size = sizeof(struct slow_conf),
};

/* avro_dir's rows (its conf is at offset 0 of ours), then flush_delay. */
__attribute__((constructor)) static void slow_init(void)
{
	size_t n = sl_avro_dir_ops.nkeys;

	if (n + 2 > MAX_KEYS)
		return;
	memcpy(slow_keys, sl_avro_dir_ops.keys, n * sizeof *slow_keys);
	slow_keys[n] = (struct sl_keydesc){ .name = "flush_delay", .type = SL_KT_SECONDS, .def = "0",
					    .min = 0, .max = 3600, FIELD(struct slow_conf, flush_delay_s) };
	slow_keys[n + 1] = (struct sl_keydesc){ .name = "flush_block_file", .type = SL_KT_STRING,
						.flags = SL_KF_EMPTY_NULL, FIELD(struct slow_conf, flush_block_file) };
	sl_slow_sink_ops.nkeys = n + 2;
	sl_slow_sink_ops.caps = sl_avro_dir_ops.caps;
	sl_slow_sink_ops.conf_check = sl_avro_dir_ops.conf_check;
	sl_slow_sink_ops.conf_free = sl_avro_dir_ops.conf_free;
	sl_slow_sink_ops.check = slow_check;
	sl_slow_sink_ops.open = slow_open;
	sl_slow_sink_ops.write = sl_avro_dir_ops.write;
	sl_slow_sink_ops.mark = sl_avro_dir_ops.mark;
	sl_slow_sink_ops.flush_due = sl_avro_dir_ops.flush_due;
	sl_slow_sink_ops.pending = sl_avro_dir_ops.pending;
	sl_slow_sink_ops.flush = slow_flush;
	sl_slow_sink_ops.discard_backfill = sl_avro_dir_ops.discard_backfill;
	sl_slow_sink_ops.close = sl_avro_dir_ops.close;
}
