/*
 * sources/postgres/pg_text.h: PostgreSQL's types in sluice's model: the
 * built-in type OIDs sluice knows, and their mapping to output types.
 */
#ifndef SLUICE_SOURCES_POSTGRES_PG_TEXT_H
#define SLUICE_SOURCES_POSTGRES_PG_TEXT_H

#include <stdint.h>

#include "schema/schema.h"

/* PostgreSQL built-in type OIDs (src/include/catalog/pg_type.dat). */
enum sl_pg_oid {
	SL_PG_BOOL = 16, SL_PG_BYTEA = 17, SL_PG_INT8 = 20, SL_PG_INT2 = 21, SL_PG_INT4 = 23,
	SL_PG_TEXT = 25, SL_PG_JSON = 114, SL_PG_FLOAT4 = 700, SL_PG_FLOAT8 = 701,
	SL_PG_BPCHAR = 1042, SL_PG_VARCHAR = 1043, SL_PG_DATE = 1082, SL_PG_TIME = 1083,
	SL_PG_TIMESTAMP = 1114, SL_PG_TIMESTAMPTZ = 1184, SL_PG_NUMERIC = 1700,
	SL_PG_UUID = 2950, SL_PG_JSONB = 3802,
};

/* Maps a PostgreSQL type OID and typmod to an output type; sets precision and
 * scale for SL_T_DECIMAL (numeric(p,s) with 0 <= s <= p), leaves them alone
 * otherwise. */
enum sl_type sl_pg_type_map(uint32_t oid, int32_t typmod, int *precision, int *scale);

#endif
