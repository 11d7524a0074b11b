/*
 * sinks/iceberg/ice_widen.h: the type changes an Iceberg table takes in
 * place, and the values of older data files read as the wider type.
 *
 * The specification lets a field's type be promoted without a new field
 * id: int to long, float to double, decimal(P, S) to decimal(P', S) with
 * P' > P.  A widened table gets a new schema with the same field id and
 * the wider type; the data files written before keep their Avro type
 * (int, float, a decimal's smaller fixed), and readers promote their
 * values.  sluice reads older files itself in two places, merge mode's
 * TOAST lookup (ice_fill.c) and compaction (ice_maint.c): both copy a
 * value into a record of the current schema, so they convert it here.
 */
#ifndef SLUICE_SINKS_ICEBERG_ICE_WIDEN_H
#define SLUICE_SINKS_ICEBERG_ICE_WIDEN_H

#include <stdbool.h>

#include <avro.h>

#include "common/buf.h"
#include "sinks/iceberg/ice_meta.h"

/* Whether a field of type from (precision fp, scale fs when a decimal) may
 * become type to (tp, ts) in place: int to long, float to double, or a
 * decimal's precision raised with its scale kept. */
bool ice_widens(enum ice_kind from, int fp, int fs, enum ice_kind to, int tp, int ts);

/* Appends to b the Avro encoding of v, a field's value read from a data
 * file (its ["null", T] union, or T for a required field), as field f of
 * the current schema: an int as a long, a float as a double, a decimal's
 * fixed sign-extended to f's size; any other value as it is.  Returns 0, or
 * -1 (out of memory, or avro-c). */
int ice_value_as(avro_writer_t w, struct sl_buf *b, avro_value_t *v, const struct ice_field *f);

#endif
