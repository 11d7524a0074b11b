/*
 * sinks/registry.c: maps a destination type name to its sink operations.
 * Adding a sink means adding its folder and one line here.
 */
#include <string.h>

#include "sinks/avro_dir/avro_dir.h"
#include "sinks/sink.h"

static const struct sl_sink_ops *const sinks[] = {
	&sl_avro_dir_ops,
	/* "clickhouse": not implemented yet */
};

const struct sl_sink_ops *sl_sink_lookup(const char *type)
{
	if (!type)
		return NULL;
	for (size_t i = 0; i < sizeof sinks / sizeof sinks[0]; i++)
		if (!strcmp(sinks[i]->type, type))
			return sinks[i];
	return NULL;
}
