/*
 * sources/mysql/my_conf.c: the keys of a [source.NAME] section of type
 * mysql (doc/configuration.md and doc/mysql.md document every row), in the
 * order the section's rules are checked.
 */
#include "sources/mysql/my_internal.h"
#include "sources/source_conf.h"

#define ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))
#define OWN SL_SOURCE_OWN

static const struct sl_keychoice ssl_modes[] = {
	{ "disabled", 0 }, { "preferred", 0 }, { "required", 0 }, { "verify_ca", 0 },
	{ "verify_identity", 0 }, { NULL, 0 },
};

const struct sl_keydesc sl_my_keys[] = {
	SL_SOURCE_KEY_HOST(struct sl_my_conf),
	SL_SOURCE_KEY_PORT(struct sl_my_conf, "3306"),
	SL_SOURCE_KEY_USER(struct sl_my_conf),
	SL_SOURCE_KEY_PASSWORD_ENV(struct sl_my_conf),
	SL_SOURCE_KEY_PASSWORD_FILE(struct sl_my_conf),
	SL_SOURCE_KEY_SSLROOTCERT(struct sl_my_conf),
	SL_SOURCE_KEY_CONNECT_TIMEOUT(struct sl_my_conf),
	SL_SOURCE_KEY_RECEIVE_TIMEOUT(struct sl_my_conf),
	SL_SOURCE_KEY_BACKFILL_CHUNK_ROWS(struct sl_my_conf),
	{ .name = "server_id", .type = SL_KT_INT, .applies = OWN, .flags = SL_KF_REQUIRED,
	  .min = 1, .max = UINT32_MAX, FIELD(struct sl_my_conf, server_id) },
	{ .name = "ssl_mode", .type = SL_KT_CHOICE, .applies = OWN, .choices = ssl_modes,
	  FIELD(struct sl_my_conf, ssl_mode) },
	{ .name = "watermark_table", .type = SL_KT_STRING, .applies = OWN, .def = "sluice.watermarks",
	  FIELD(struct sl_my_conf, watermark_table) },
};

_Static_assert(ARRAY_LEN(sl_my_keys) == SL_MY_NKEYS && SL_MY_NKEYS <= 64, "SL_MY_NKEYS is the number of rows, at most 64");
