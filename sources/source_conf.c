/*
 * sources/source_conf.c: the key table of [source.NAME] sections (see
 * source_conf.h; doc/configuration.md documents every row).
 */
#include "sources/source_conf.h"

#include <stdint.h>

#define ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

#define T_PG SL_SOURCE_BIT(SL_SOURCE_POSTGRES)
#define T_MY SL_SOURCE_BIT(SL_SOURCE_MYSQL)

const char *const sl_source_kind_names[SL_SOURCE_NKINDS] = {
	[SL_SOURCE_POSTGRES] = "postgres",
	[SL_SOURCE_MYSQL] = "mysql",
};

static const struct sl_keychoice source_types[] = {
	{ "postgres", SL_SOURCE_POSTGRES }, { "mysql", SL_SOURCE_MYSQL }, { NULL, 0 },
};
static const struct sl_keychoice pg_sslmodes[] = {
	{ "disable", 0 }, { "allow", 0 }, { "prefer", 0 }, { "require", 0 },
	{ "verify-ca", 0 }, { "verify-full", 0 }, { NULL, 0 },
};
static const struct sl_keychoice my_ssl_modes[] = {
	{ "disabled", 0 }, { "preferred", 0 }, { "required", 0 }, { "verify_ca", 0 },
	{ "verify_identity", 0 }, { NULL, 0 },
};

const struct sl_keydesc sl_source_keys[] = {
	{ .name = "type", .type = SL_KT_ENUM, .flags = SL_KF_REQUIRED, .choices = source_types,
	  FIELD(struct sl_source_config, kind) },
	{ .name = "host", .type = SL_KT_STRING, .def = "127.0.0.1",
	  FIELD(struct sl_source_config, host) },
	{ .name = "port", .type = SL_KT_INT, .applies = T_PG, .def = "5432", .min = 1, .max = 65535,
	  FIELD(struct sl_source_config, port) },
	{ .name = "port", .type = SL_KT_INT, .applies = T_MY, .def = "3306", .min = 1, .max = 65535,
	  FIELD(struct sl_source_config, port) },
	{ .name = "user", .type = SL_KT_STRING, .flags = SL_KF_REQUIRED,
	  FIELD(struct sl_source_config, user) },
	{ .name = "dbname", .type = SL_KT_STRING, .applies = T_PG, .flags = SL_KF_REQUIRED,
	  FIELD(struct sl_source_config, dbname) },
	{ .name = "password_env", .type = SL_KT_SECRET_ENV, .excludes = "password_file",
	  FIELD(struct sl_source_config, password) },
	{ .name = "password_file", .type = SL_KT_SECRET_FILE, .excludes = "password_env",
	  FIELD(struct sl_source_config, password) },
	{ .name = "sslmode", .type = SL_KT_CHOICE, .applies = T_PG, .choices = pg_sslmodes,
	  FIELD(struct sl_source_config, sslmode) },
	{ .name = "sslrootcert", .type = SL_KT_STRING,
	  FIELD(struct sl_source_config, sslrootcert) },
	{ .name = "connect_timeout", .type = SL_KT_SECONDS, .def = "10", .min = 1, .max = 3600,
	  FIELD(struct sl_source_config, connect_timeout) },
	{ .name = "receive_timeout", .type = SL_KT_SECONDS, .def = "0", .min = 0, .max = 3600,
	  FIELD(struct sl_source_config, receive_timeout) },
	{ .name = "backfill_connections", .type = SL_KT_INT, .applies = T_PG, .def = "2", .min = 1, .max = 32,
	  FIELD(struct sl_source_config, backfill_connections) },
	{ .name = "backfill_chunk_rows", .type = SL_KT_INT, .applies = T_PG | T_MY, .def = "10000", .min = 100, .max = 10000000,
	  FIELD(struct sl_source_config, backfill_chunk_rows) },
	{ .name = "server_id", .type = SL_KT_INT, .applies = T_MY, .flags = SL_KF_REQUIRED,
	  .min = 1, .max = UINT32_MAX, FIELD(struct sl_source_config, server_id) },
	{ .name = "ssl_mode", .type = SL_KT_CHOICE, .applies = T_MY, .choices = my_ssl_modes,
	  FIELD(struct sl_source_config, ssl_mode) },
	{ .name = "watermark_table", .type = SL_KT_STRING, .applies = T_MY, .def = "sluice.watermarks",
	  FIELD(struct sl_source_config, watermark_table) },
};

const size_t sl_source_nkeys = ARRAY_LEN(sl_source_keys);

/* SL_KT_ENUM stores through the field's size; a kind must fit the mask. */
_Static_assert(sizeof(enum sl_source_kind) == 4, "enum size");
_Static_assert(SL_SOURCE_MYSQL < SL_SOURCE_NKINDS, "SL_SOURCE_NKINDS is too small");
_Static_assert(ARRAY_LEN(sl_source_keys) <= 64, "too many rows for sl_keytab_apply()");
