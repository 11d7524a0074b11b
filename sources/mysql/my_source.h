/*
 * sources/mysql/my_source.h: the MySQL/MariaDB binlog source, as the
 * registry (sources/registry.c) sees it: its operations, configuration
 * included.
 */
#ifndef SLUICE_SOURCES_MYSQL_MY_SOURCE_H
#define SLUICE_SOURCES_MYSQL_MY_SOURCE_H

#include <stdint.h>

#include "sources/source.h"

extern const struct sl_source_ops sl_my_source_ops;

/* [source.NAME] of a mysql source (my_conf.c): the shared profile, then its
 * own keys. */
struct sl_my_conf {
	struct sl_source_config base;
	uint32_t server_id;
	char *ssl_mode;
	char *watermark_table;   /* "db.table" that backfill while streaming writes its
				  * watermarks into (default sluice.watermarks) */
};

/* The source's own struct of a profile of this type (cfg->ops is its ops). */
static inline const struct sl_my_conf *sl_my_conf(const struct sl_source_config *cfg)
{
	return (const struct sl_my_conf *)cfg;
}

#endif
