/*
 * sinks/registry.c: maps a destination type name to its sink operations.
 * Adding a sink means adding its folder and one line in sinks[] below.
 */
#include <stdio.h>
#include <string.h>

#include "sinks/avro_dir/avro_dir.h"
#include "sinks/sink.h"

static const struct sl_sink_ops *const sinks[] = {
	&sl_avro_dir_ops,
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

size_t sl_sink_count(void)
{
	return sizeof sinks / sizeof sinks[0];
}

const struct sl_sink_ops *sl_sink_at(size_t i)
{
	return i < sl_sink_count() ? sinks[i] : NULL;
}

void sl_sink_types(char *out, size_t len)
{
	size_t n = 0;

	if (len == 0)
		return;
	out[0] = '\0';
	for (size_t i = 0; i < sl_sink_count() && n < len; i++) {
		snprintf(out + n, len - n, "%s%s", i ? ", " : "", sinks[i]->type);
		n += strlen(out + n);
	}
}
