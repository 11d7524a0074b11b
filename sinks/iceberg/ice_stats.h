/*
 * sinks/iceberg/ice_stats.h: the column statistics of a data file (or an
 * equality delete file) that its manifest entry carries, so that readers
 * can skip files (the Iceberg table specification, "Manifests": data_file
 * column_sizes 108, value_counts 109, null_value_counts 110,
 * nan_value_counts 137, lower_bounds 125, upper_bounds 128).
 *
 * They are taken from each record's Avro encoding as it is written (so a
 * value copied from a committed row counts as one encoded by the sink):
 * per field, the bytes its values take in the records (the union's branch
 * included; before the blocks' compression, which Avro applies to whole
 * blocks of records, not to columns), the values (nulls included) and the
 * nulls; for floats and doubles, the NaNs; and, for the types with an
 * order the specification defines and that sluice writes (boolean, int,
 * long, float, double, date, time, timestamp, timestamptz, decimal,
 * string, binary), the least and the greatest value.  A float's or a
 * double's bounds leave NaN out, and order -0.0 before +0.0 (IEEE 754
 * totalOrder, as the specification says); a file of NaNs and nulls only
 * has none.  A list gets nothing.
 *
 * Strings and binaries keep a prefix of at most ICE_BOUND_MAX bytes (a
 * string's cut at a UTF-8 character boundary): the lower bound is the least
 * prefix; the upper bound the greatest prefix, and when that prefix was cut
 * from a longer value, the prefix with its last character (string: to the
 * next code point) or byte (binary) incremented, dropping those that cannot
 * be (U+10FFFF, 0xff), or no upper bound.
 * Nothing is allocated per value, and a bound is compared as two words:
 * the statistics are taken for every record a file gets, on the writing
 * thread.
 */
#ifndef SLUICE_SINKS_ICEBERG_ICE_STATS_H
#define SLUICE_SINKS_ICEBERG_ICE_STATS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"
#include "sinks/iceberg/ice_meta.h"

/* The longest string or binary bound kept (the reference implementation's
 * default truncation length). */
#define ICE_BOUND_MAX 16

/* The statistics of one field of one file. */
struct ice_col_stats {
	int64_t values;                 /* records that have the field, nulls included */
	int64_t nulls;
	int64_t nans;                   /* float, double: NaN values */
	int64_t bytes;                  /* the bytes of its values' encoding */
	double lo_d, hi_d;              /* float, double */
	bool bounded;                   /* lo and hi hold a non-null value's bounds */
	bool hi_cut;                    /* hi is a prefix cut from a longer value */
	int64_t lo_i, hi_i;             /* boolean, int, long, date, time, timestamps */
	/* decimal (its fixed), string, binary: the bound's bytes (at most
	 * ICE_BOUND_MAX) as two big-endian words, zero-padded, a decimal's
	 * sign bit flipped: compared as numbers, then by length, they order
	 * as the bytes do (unsigned, a prefix first; a decimal's as signed) */
	uint64_t lo_k[2], hi_k[2];
	size_t lolen, hilen;
	int fixed;                      /* decimal: the fixed's size, once known */
};

/* Adds the record rec (len bytes: a data file record of s, or with keys an
 * equality delete record, its key fields) to st (s->nfields entries, zeroed
 * for a new file).  Returns 0, or -1 when rec does not decode as such a
 * record (st is then partly updated). */
int ice_stats_add(struct ice_col_stats *st, const struct ice_schema *s, bool keys, const unsigned char *rec,
		  size_t len);

/* Appends to b the six stats fields of a manifest's data_file (column
 * sizes, value counts, null counts, NaN counts, lower and upper bounds;
 * each a union branch and a map as an Avro array of key/value records) of
 * the fields of s that st counted (NaN counts: of the floats and doubles).
 * st NULL: all six null.  Returns 0, or -1 (out of memory). */
int ice_stats_encode(struct sl_buf *b, const struct ice_col_stats *st, const struct ice_schema *s);

/* The Avro schema text of those six fields, for the data_file record. */
#define ICE_STATS_AVRO_SCHEMA \
	"{\"name\":\"column_sizes\",\"type\":[\"null\",{\"type\":\"array\",\"items\":{\"type\":\"record\"," \
	"\"name\":\"k117_v118\",\"fields\":[{\"name\":\"key\",\"type\":\"int\",\"field-id\":117}," \
	"{\"name\":\"value\",\"type\":\"long\",\"field-id\":118}]},\"logicalType\":\"map\"}]," \
	"\"default\":null,\"field-id\":108}," \
	"{\"name\":\"value_counts\",\"type\":[\"null\",{\"type\":\"array\",\"items\":{\"type\":\"record\"," \
	"\"name\":\"k119_v120\",\"fields\":[{\"name\":\"key\",\"type\":\"int\",\"field-id\":119}," \
	"{\"name\":\"value\",\"type\":\"long\",\"field-id\":120}]},\"logicalType\":\"map\"}]," \
	"\"default\":null,\"field-id\":109}," \
	"{\"name\":\"null_value_counts\",\"type\":[\"null\",{\"type\":\"array\",\"items\":{\"type\":\"record\"," \
	"\"name\":\"k121_v122\",\"fields\":[{\"name\":\"key\",\"type\":\"int\",\"field-id\":121}," \
	"{\"name\":\"value\",\"type\":\"long\",\"field-id\":122}]},\"logicalType\":\"map\"}]," \
	"\"default\":null,\"field-id\":110}," \
	"{\"name\":\"nan_value_counts\",\"type\":[\"null\",{\"type\":\"array\",\"items\":{\"type\":\"record\"," \
	"\"name\":\"k138_v139\",\"fields\":[{\"name\":\"key\",\"type\":\"int\",\"field-id\":138}," \
	"{\"name\":\"value\",\"type\":\"long\",\"field-id\":139}]},\"logicalType\":\"map\"}]," \
	"\"default\":null,\"field-id\":137}," \
	"{\"name\":\"lower_bounds\",\"type\":[\"null\",{\"type\":\"array\",\"items\":{\"type\":\"record\"," \
	"\"name\":\"k126_v127\",\"fields\":[{\"name\":\"key\",\"type\":\"int\",\"field-id\":126}," \
	"{\"name\":\"value\",\"type\":\"bytes\",\"field-id\":127}]},\"logicalType\":\"map\"}]," \
	"\"default\":null,\"field-id\":125}," \
	"{\"name\":\"upper_bounds\",\"type\":[\"null\",{\"type\":\"array\",\"items\":{\"type\":\"record\"," \
	"\"name\":\"k129_v130\",\"fields\":[{\"name\":\"key\",\"type\":\"int\",\"field-id\":129}," \
	"{\"name\":\"value\",\"type\":\"bytes\",\"field-id\":130}]},\"logicalType\":\"map\"}]," \
	"\"default\":null,\"field-id\":128}"

#endif
