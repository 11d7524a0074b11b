/*
 * sinks/registry.c: the sinks this build knows (sinks/registry.h lists
 * them); sinks/lookup.c finds them by type.  (A test build links its own
 * table instead: tests/tools/test_registry.c.)
 */
#include "sinks/registry.h"

const struct sl_sink_ops *const sl_sinks[] = {
	SL_PRODUCT_SINKS
	NULL,
};
