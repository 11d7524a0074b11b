/*
 * sources/postgres/pg_conf.c: the keys of a [source.NAME] section of type
 * postgres (doc/configuration.md documents every row), in the order the
 * section's rules are checked.
 */
#include "sources/postgres/pg_internal.h"
#include "sources/source_conf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

#define SLOT_MAX_LEN 63          /* PostgreSQL NAMEDATALEN - 1 */

static const char *valid_slot_name(const char *s)
{
	size_t n = 0;

	for (; s[n]; n++)
		if (!((s[n] >= 'a' && s[n] <= 'z') || (s[n] >= '0' && s[n] <= '9') || s[n] == '_'))
			break;
	if (s[n] || n < 1 || n > SLOT_MAX_LEN)
		return "a replication slot name is 1-63 characters of a-z, 0-9 and _";
	return NULL;
}

static const char *valid_identifier(const char *s)
{
	if (strlen(s) > SLOT_MAX_LEN)
		return "must be at most 63 characters";
	return NULL;
}

/* No default in the table: it derives from the stream name
 * (sl_pg_stream_conf_check). */
const struct sl_keydesc sl_pg_stream_conf_keys[] = {
	{ .name = "slot", .type = SL_KT_STRING, .validate = valid_slot_name,
	  FIELD(struct sl_pg_stream_conf, slot) },
	{ .name = "publication", .type = SL_KT_STRING, .validate = valid_identifier,
	  FIELD(struct sl_pg_stream_conf, publication) },
};

/* Each stream has a slot, by default "sluice_" + the stream name,
 * lowercased, with '-' turned into '_'; and its publication the slot's
 * name by default. */
int sl_pg_stream_conf_check(void *conf, const struct sl_ini_section *sec, const char *stream, struct sl_keyerr *er)
{
	struct sl_pg_stream_conf *c = conf;
	size_t n = strlen("sluice_") + strlen(stream) + 1;

	if (!c->slot) {
		if (!(c->slot = malloc(n)))
			return sl_keyerr_oom(er);
		snprintf(c->slot, n, "sluice_%s", stream);
		for (char *p = c->slot; *p; p++) {
			if (*p == '-')
				*p = '_';
			else if (*p >= 'A' && *p <= 'Z')
				*p = (char)(*p - 'A' + 'a');
		}
		if (valid_slot_name(c->slot))
			return sl_keyerr_set(er, sec->line, "the default slot name \"%s\" of [%s] is not a valid "
					     "replication slot name (1-63 characters of a-z, 0-9 and _): set slot "
					     "explicitly", c->slot, sec->title);
	}
	if (!c->publication && !(c->publication = strdup(c->slot)))
		return sl_keyerr_oom(er);
	return 0;
}

_Static_assert(ARRAY_LEN(sl_pg_stream_conf_keys) == SL_PG_STREAM_NKEYS, "SL_PG_STREAM_NKEYS is the number of rows");
_Static_assert(ARRAY_LEN(sl_pg_keys) == SL_PG_NKEYS && SL_PG_NKEYS <= 64, "SL_PG_NKEYS is the number of rows, at most 64");
