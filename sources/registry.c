/*
 * sources/registry.c: maps a source kind to its operations.  Adding a
 * source means adding its folder and one line here.
 */
#include <stddef.h>

#include "sources/mysql/my_internal.h"
#include "sources/postgres/pg_internal.h"
#include "sources/source.h"

const struct sl_source_ops *sl_source_lookup(enum sl_source_kind kind)
{
	switch (kind) {
	case SL_SOURCE_POSTGRES:
		return &sl_pg_source_ops;
	case SL_SOURCE_MYSQL:
		return &sl_my_source_ops;
	}
	return NULL;
}
