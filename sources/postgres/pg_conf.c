/*
 * sources/postgres/pg_conf.c: the keys of a [source.NAME] section of type
 * postgres (doc/configuration.md documents every row), in the order the
 * section's rules are checked.
 */
#include "sources/postgres/pg_internal.h"
#include "sources/source_conf.h"

#define ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))
#define OWN SL_SOURCE_OWN

static const struct sl_keychoice sslmodes[] = {
	{ "disable", 0 }, { "allow", 0 }, { "prefer", 0 }, { "require", 0 },
	{ "verify-ca", 0 }, { "verify-full", 0 }, { NULL, 0 },
};

const struct sl_keydesc sl_pg_keys[] = {
	SL_SOURCE_KEY_HOST(struct sl_pg_conf),
	SL_SOURCE_KEY_PORT(struct sl_pg_conf, "5432"),
	SL_SOURCE_KEY_USER(struct sl_pg_conf),
	{ .name = "dbname", .type = SL_KT_STRING, .applies = OWN, .flags = SL_KF_REQUIRED,
	  FIELD(struct sl_pg_conf, dbname) },
	SL_SOURCE_KEY_PASSWORD_ENV(struct sl_pg_conf),
	SL_SOURCE_KEY_PASSWORD_FILE(struct sl_pg_conf),
	{ .name = "sslmode", .type = SL_KT_CHOICE, .applies = OWN, .choices = sslmodes,
	  FIELD(struct sl_pg_conf, sslmode) },
	SL_SOURCE_KEY_SSLROOTCERT(struct sl_pg_conf),
	SL_SOURCE_KEY_CONNECT_TIMEOUT(struct sl_pg_conf),
	SL_SOURCE_KEY_RECEIVE_TIMEOUT(struct sl_pg_conf),
	SL_SOURCE_KEY_BACKFILL_CONNECTIONS(struct sl_pg_conf),
	SL_SOURCE_KEY_BACKFILL_CHUNK_ROWS(struct sl_pg_conf),
};

/* MySQL/MariaDB key a table by its primary key (or unique NOT NULL key)
 * only: key_columns there would be read by nothing. */
const char *const sl_pg_stream_keys[] = { "key_columns", "slot", "publication", "status_interval", NULL };

_Static_assert(ARRAY_LEN(sl_pg_keys) == SL_PG_NKEYS && SL_PG_NKEYS <= 64, "SL_PG_NKEYS is the number of rows, at most 64");
