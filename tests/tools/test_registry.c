/*
 * tests/tools/test_registry.c: the sink table of tests/tools/sluice_test:
 * the product's sinks (sinks/registry.h) plus the test-only ones
 * (slow_sink.c).  Linked before libslsinks.a, it takes the place of
 * sinks/registry.c in that binary only.
 */
#include "sinks/registry.h"

extern struct sl_sink_ops sl_slow_sink_ops;

const struct sl_sink_ops *const sl_sinks[] = {
	SL_PRODUCT_SINKS
	&sl_slow_sink_ops,
	NULL,
};
