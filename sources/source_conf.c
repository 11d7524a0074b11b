/*
 * sources/source_conf.c: going through the sources of the registry
 * (source_conf.h), for the agent's configuration reader.  The key tables
 * themselves belong to the sources (sources/postgres/pg_conf.c,
 * sources/mysql/my_conf.c).
 */
#include "sources/source_conf.h"

#include <stdio.h>
#include <string.h>

size_t sl_source_count(void)
{
	size_t n = 0;

	while (sl_sources[n])
		n++;
	return n;
}

const struct sl_source_ops *sl_source_at(size_t i)
{
	return i < sl_source_count() ? sl_sources[i] : NULL;
}

const struct sl_source_ops *sl_source_lookup(const char *type)
{
	for (size_t i = 0; sl_sources[i]; i++)
		if (!strcmp(sl_sources[i]->type, type))
			return sl_sources[i];
	return NULL;
}

bool sl_source_has_key(const char *key)
{
	for (size_t i = 0; sl_sources[i]; i++)
		if (sl_keytab_has(sl_sources[i]->keys, sl_sources[i]->nkeys, key))
			return true;
	return false;
}

bool sl_source_has_stream_key(const char *key)
{
	for (size_t i = 0; sl_sources[i]; i++)
		if (sl_keytab_has(sl_sources[i]->stream_conf_keys, sl_sources[i]->stream_conf_nkeys, key))
			return true;
	return false;
}

void sl_source_types(char *out, size_t len, const char *sep)
{
	size_t n = 0;

	out[0] = '\0';
	for (size_t i = 0; sl_sources[i] && n < len; i++) {
		snprintf(out + n, len - n, "%s%s", i ? sep : "", sl_sources[i]->type);
		n += strlen(out + n);
	}
}
