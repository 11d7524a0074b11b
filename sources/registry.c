/*
 * sources/registry.c: the sources this build knows, one line each, through
 * their public headers.  Adding a source means adding its folder and one
 * line here (sources/source_conf.c finds them by type).
 */
#include <stddef.h>

#include "sources/mysql/my_source.h"
#include "sources/postgres/pg_source.h"
#include "sources/source.h"

const struct sl_source_ops *const sl_sources[] = {
	&sl_pg_source_ops,
	&sl_my_source_ops,
	NULL,
};
