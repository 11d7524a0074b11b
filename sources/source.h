/*
 * sources/source.h: what every source shares: its connection profile.
 * The PostgreSQL source lives in sources/postgres/, MySQL comes later.
 */
#ifndef SLUICE_SOURCES_SOURCE_H
#define SLUICE_SOURCES_SOURCE_H

#include <stdint.h>

#include "schema/schema.h"

/* A source connection profile, as parsed from [source.NAME]. */
struct sl_source_config {
	char *name;              /* profile name */
	enum sl_source_kind kind;
	char *host;              /* default 127.0.0.1 */
	int port;                /* default 5432 (postgres) / 3306 (mysql) */
	char *user;
	char *dbname;            /* postgres */
	char *password;          /* resolved from password_env / password_file; NULL: libpq's .pgpass */
	char *sslmode;           /* postgres sslmode; NULL: libpq default */
	char *sslrootcert;
	int connect_timeout;     /* seconds, default 10 */
	uint32_t server_id;      /* mysql */
	char *ssl_mode;          /* mysql */
};

#endif
