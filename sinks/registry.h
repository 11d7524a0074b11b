/*
 * sinks/registry.h: the product's sinks, as one list that sinks/registry.c
 * (the product's table) and tests/tools/test_registry.c (the same table plus
 * test-only sinks) both expand, so the two can never drift apart.  Adding a
 * sink means adding its folder, its header below and one line to the list.
 */
#ifndef SLUICE_SINKS_REGISTRY_H
#define SLUICE_SINKS_REGISTRY_H

#include "sinks/avro_dir/avro_dir.h"
#include "sinks/clickhouse/clickhouse.h"
#include "sinks/iceberg/iceberg.h"
#include "sinks/s3/s3.h"
#include "sinks/sink.h"

/* The entries of a sink table, each followed by a comma. */
#define SL_PRODUCT_SINKS \
	&sl_avro_dir_ops, \
	&sl_clickhouse_ops, \
	&sl_iceberg_ops, \
	&sl_s3_ops,

#endif
