/*
 * sinks/registry.c: the sinks this build knows.  Adding a sink means adding
 * its folder and one line below; sinks/lookup.c finds them by type.  (A test
 * build links its own table instead: tests/tools/test_registry.c.)
 */
#include "sinks/avro_dir/avro_dir.h"
#include "sinks/clickhouse/clickhouse.h"
#include "sinks/s3/s3.h"
#include "sinks/sink.h"

const struct sl_sink_ops *const sl_sinks[] = {
	&sl_avro_dir_ops,
	&sl_clickhouse_ops,
	&sl_s3_ops,
	NULL,
};
