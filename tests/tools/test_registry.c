/*
 * tests/tools/test_registry.c: the sink table of tests/tools/sluice_test:
 * the product's sinks plus the test-only ones (slow_sink.c).  Linked before
 * libslsinks.a, it takes the place of sinks/registry.c in that binary only.
 */
#include "sinks/avro_dir/avro_dir.h"
#include "sinks/clickhouse/clickhouse.h"
#include "sinks/sink.h"

extern struct sl_sink_ops sl_slow_sink_ops;

const struct sl_sink_ops *const sl_sinks[] = {
	&sl_avro_dir_ops,
	&sl_clickhouse_ops,
	&sl_slow_sink_ops,
	NULL,
};
