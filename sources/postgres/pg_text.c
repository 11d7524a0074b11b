/*
 * sources/postgres/pg_text.c: PostgreSQL's types in sluice's model.
 */
#include "sources/postgres/pg_text.h"

enum sl_type sl_pg_type_map(uint32_t oid, int32_t typmod, int *precision, int *scale)
{
	switch (oid) {
	case SL_PG_BOOL: return SL_T_BOOL;
	case SL_PG_INT2: case SL_PG_INT4: return SL_T_INT32;
	case SL_PG_INT8: return SL_T_INT64;
	case SL_PG_FLOAT4: return SL_T_FLOAT;
	case SL_PG_FLOAT8: return SL_T_DOUBLE;
	case SL_PG_BYTEA: return SL_T_BYTES;
	case SL_PG_DATE: return SL_T_DATE;
	case SL_PG_TIME: return SL_T_TIME;
	case SL_PG_TIMESTAMP: return SL_T_TIMESTAMP;
	case SL_PG_TIMESTAMPTZ: return SL_T_TIMESTAMPTZ;
	case SL_PG_UUID: return SL_T_UUID;
	case SL_PG_JSON: case SL_PG_JSONB: return SL_T_JSON;
	case SL_PG_NUMERIC:
		/* typmod = ((precision << 16) | (scale & 0x7ff)) + VARHDRSZ; PG15
		 * allows scales outside 0..precision, which Avro decimal cannot hold. */
		if (typmod >= 4) {
			int32_t t = typmod - 4;
			int p = (t >> 16) & 0xffff;
			int s = t & 0x7ff;
			if (s & 0x400)
				s -= 0x800; /* sign-extend the 11-bit scale */
			if (p >= 1 && s >= 0 && s <= p) {
				*precision = p;
				*scale = s;
				return SL_T_DECIMAL;
			}
		}
		return SL_T_STRING;
	case SL_PG_TEXT: case SL_PG_VARCHAR: case SL_PG_BPCHAR:
	default:
		return SL_T_STRING;
	}
}
