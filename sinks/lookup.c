/*
 * sinks/lookup.c: finds a sink by destination type in the registry
 * (sl_sinks[], sinks/registry.c); what a sink carries of a table version.
 */
#include <stdio.h>
#include <string.h>

#include "sinks/sink.h"

const struct sl_sink_ops *sl_sink_lookup(const char *type)
{
	if (!type)
		return NULL;
	for (size_t i = 0; sl_sinks[i]; i++)
		if (!strcmp(sl_sinks[i]->type, type))
			return sl_sinks[i];
	return NULL;
}

bool sl_sink_carries_missing(const struct sl_sink_ops *ops, const void *conf, const struct sl_table *t)
{
	bool any = false;

	for (int i = 0; i < t->ncols; i++) {
		if (t->cols[i].missing.kind == SL_V_NULL)
			continue;
		if (!ops->carries_missing || !ops->carries_missing(conf, &t->cols[i]))
			return false;
		any = true;
	}
	return any;
}

size_t sl_sink_count(void)
{
	size_t n = 0;

	while (sl_sinks[n])
		n++;
	return n;
}

const struct sl_sink_ops *sl_sink_at(size_t i)
{
	return i < sl_sink_count() ? sl_sinks[i] : NULL;
}

void sl_sink_types(char *out, size_t len)
{
	size_t n = 0;

	if (len == 0)
		return;
	out[0] = '\0';
	for (size_t i = 0; sl_sinks[i] && n < len; i++) {
		snprintf(out + n, len - n, "%s%s", i ? ", " : "", sl_sinks[i]->type);
		n += strlen(out + n);
	}
}
