/*
 * sources/source_conf.h: the rows of [source.NAME] (doc/configuration.md)
 * that every source shares, for the key tables the sources own
 * (struct sl_source_ops.keys, common/keytab.h).
 *
 * A source's configuration struct begins with struct sl_source_config
 * (sources/source.h) as its member "base"; a source lists, in its own
 * table, the shared rows it has, through the macros below (so that every
 * source names, bounds and defaults them alike), then its own rows, with
 * applies SL_SOURCE_OWN.  The agent applies the table with SL_SOURCE_OWN as
 * the mask: every row applies, and a missing required row of the source's
 * own says "(required for type T)".  Strings belong to the struct: free
 * them with sl_keytab_free(ops->keys, ops->nkeys, conf); the password is
 * wiped.
 */
#ifndef SLUICE_SOURCES_SOURCE_CONF_H
#define SLUICE_SOURCES_SOURCE_CONF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/keytab.h"
#include "sources/source.h"

/* The applies bit of a row that is the source's own. */
#define SL_SOURCE_OWN 1u

/* Shared rows, for a source struct T whose member base is struct sl_source_config. */
#define SL_SOURCE_KEY_HOST(T) \
	{ .name = "host", .type = SL_KT_STRING, .def = "127.0.0.1", FIELD(T, base.host) }
#define SL_SOURCE_KEY_PORT(T, dflt) \
	{ .name = "port", .type = SL_KT_INT, .def = dflt, .min = 1, .max = 65535, FIELD(T, base.port) }
#define SL_SOURCE_KEY_USER(T) \
	{ .name = "user", .type = SL_KT_STRING, .flags = SL_KF_REQUIRED, FIELD(T, base.user) }
#define SL_SOURCE_KEY_PASSWORD_ENV(T) \
	{ .name = "password_env", .type = SL_KT_SECRET_ENV, .excludes = "password_file", FIELD(T, base.password) }
#define SL_SOURCE_KEY_PASSWORD_FILE(T) \
	{ .name = "password_file", .type = SL_KT_SECRET_FILE, .excludes = "password_env", FIELD(T, base.password) }
#define SL_SOURCE_KEY_SSLROOTCERT(T) \
	{ .name = "sslrootcert", .type = SL_KT_STRING, FIELD(T, base.sslrootcert) }
#define SL_SOURCE_KEY_CONNECT_TIMEOUT(T) \
	{ .name = "connect_timeout", .type = SL_KT_SECONDS, .def = "10", .min = 1, .max = 3600, \
	  FIELD(T, base.connect_timeout) }
#define SL_SOURCE_KEY_RECEIVE_TIMEOUT(T) \
	{ .name = "receive_timeout", .type = SL_KT_SECONDS, .def = "0", .min = 0, .max = 3600, \
	  FIELD(T, base.receive_timeout) }
#define SL_SOURCE_KEY_BACKFILL_CONNECTIONS(T) \
	{ .name = "backfill_connections", .type = SL_KT_INT, .def = "2", .min = 1, .max = 32, \
	  FIELD(T, base.backfill_connections) }
#define SL_SOURCE_KEY_BACKFILL_CHUNK_ROWS(T) \
	{ .name = "backfill_chunk_rows", .type = SL_KT_INT, .def = "10000", .min = 100, .max = 10000000, \
	  FIELD(T, base.backfill_chunk_rows) }

/* The number of sources, and the i-th (NULL past the end). */
size_t sl_source_count(void);
const struct sl_source_ops *sl_source_at(size_t i);
/* True when some source's key table has key. */
bool sl_source_has_key(const char *key);
/* True when some source's own stream keys (stream_conf_keys) have key. */
bool sl_source_has_stream_key(const char *key);
/* Writes the known source types into out, for messages: "postgres, mysql". */
void sl_source_types(char *out, size_t len, const char *sep);

#endif
