/*
 * sources/postgres/pg_source.h: the PostgreSQL source, as the registry
 * (sources/registry.c) sees it: its operations, configuration included.
 */
#ifndef SLUICE_SOURCES_POSTGRES_PG_SOURCE_H
#define SLUICE_SOURCES_POSTGRES_PG_SOURCE_H

#include <stdint.h>

#include "sources/source.h"

extern const struct sl_source_ops sl_pg_source_ops;

/* [source.NAME] of a postgres source (pg_conf.c): the shared profile, then
 * its own keys. */
struct sl_pg_conf {
	struct sl_source_config base;
	char *dbname;
	char *sslmode;           /* libpq's sslmode; NULL: libpq's default */
};

/* The source's own struct of a profile of this type (cfg->ops is its ops). */
static inline const struct sl_pg_conf *sl_pg_conf(const struct sl_source_config *cfg)
{
	return (const struct sl_pg_conf *)cfg;
}

/* The source's own keys of a [stream.NAME] from a postgres source
 * (sl_source_ops.stream_conf_keys): both always set once the stream conf
 * check ran. */
struct sl_pg_stream_conf {
	char *slot;              /* default "sluice_<stream>", lowercased, '-' as '_' */
	char *publication;       /* default: the slot's name */
};

/* The postgres stream keys of the stream st serves (st->conf). */
static inline const struct sl_pg_stream_conf *sl_pg_stream(const struct sl_source_stream *st)
{
	return (const struct sl_pg_stream_conf *)st->conf;
}

#endif
