/*
 * sinks/iceberg/ice_fill.h: merge mode's TOAST rule for the iceberg sink.
 *
 * An update from PostgreSQL may leave a TOASTed value unchanged (the source
 * does not send it, SL_V_UNCHANGED): the row takes the value the key's
 * current row has.  The batch (sinks/avro_tree/merge.h) fills what it can;
 * a row it cannot fill names in its `fill` key the row to take them from,
 * and that row is in the table's committed data files.  In merge mode each
 * data file holds at most one row per key and each snapshot adds at most
 * one data file per schema, so the current row of a key is the record of
 * the newest current data file that has the key (the equality deletes of
 * later snapshots remove the key only where a later file has it again, or
 * where the source deleted it, and a deleted row sends no update).
 *
 * Keys compare as sl_mrow_key writes them (each key column's Avro union
 * encoding); a data file's required key field is its value without the
 * branch, so the branch is added.  The values taken are the records' field
 * bytes (their Avro union encoding), written into the new row as they are,
 * or converted when the column was widened since the file was written (an
 * int as a long, a float as a double, a decimal's fixed sign-extended:
 * ice_widen.h); a key compares in the current type likewise.  A data
 * file's fields are found by their field ids, not their names: a column
 * dropped and added again under its name is a new field, and an older
 * file has no value for it.
 */
#ifndef SLUICE_SINKS_ICEBERG_ICE_FILL_H
#define SLUICE_SINKS_ICEBERG_ICE_FILL_H

#include <stdbool.h>
#include <stddef.h>

#include "sinks/avro_tree/merge.h"
#include "sinks/avro_tree/store.h"
#include "sinks/iceberg/ice_meta.h"

/* A held row whose unchanged values wait for the committed data. */
struct ice_want {
	const struct sl_mrow *row;     /* borrowed: the batch's */
	size_t idx;                    /* the caller's, e.g. the row's place */
	struct ice_raw *raw;           /* s->nfields entries: the committed values found (owned) */
	bool found;
};

/* Looks the n rows of want up in the data files that the data manifests
 * mpaths[0..nm) list, newest last (they are read newest first), and fills
 * each row's raw entries for the fields of s whose value is unchanged.
 * The manifests and data files are read from store, whose root has the
 * location root (sl_ice_store_open).
 * want is sorted by fill key on return.  Returns 0, or -1 with a message
 * in err naming the file. */
int ice_fill_lookup(struct ice_want *want, size_t n, const struct ice_schema *s, const struct sl_store *store,
		    const char *root, const char *const *mpaths, int nm, char *err, size_t errlen);

/* Frees what ice_fill_lookup stored in the n wants. */
void ice_fill_free(struct ice_want *want, size_t n, const struct ice_schema *s);

#endif
