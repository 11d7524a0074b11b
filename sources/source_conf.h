/*
 * sources/source_conf.h: the keys of a [source.NAME] section (doc/
 * configuration.md), as a key table (common/keytab.h) that fills a struct
 * sl_source_config (sources/source.h).
 *
 * Rows that apply to one kind of source only carry the bit
 * SL_SOURCE_BIT(kind) in their applies mask: the agent applies the "type"
 * row first (sl_keytab_apply_one()), then the whole table with
 * SL_SOURCE_BIT(kind) as the mask.  Strings in the struct belong to it: free
 * them with sl_keytab_free(sl_source_keys, sl_source_nkeys, conf); the
 * password is wiped.
 */
#ifndef SLUICE_SOURCES_SOURCE_CONF_H
#define SLUICE_SOURCES_SOURCE_CONF_H

#include <stddef.h>

#include "common/keytab.h"
#include "sources/source.h"

/* The number of source kinds (enum sl_source_kind), and the applies bit of one. */
#define SL_SOURCE_NKINDS 2
#define SL_SOURCE_BIT(kind) (1u << (kind))

/* The rows of [source.NAME], "type" included. */
extern const struct sl_keydesc sl_source_keys[];
extern const size_t sl_source_nkeys;

/* What the configuration calls each kind ("postgres", "mysql"), indexed by
 * enum sl_source_kind: the type names for messages. */
extern const char *const sl_source_kind_names[SL_SOURCE_NKINDS];

#endif
