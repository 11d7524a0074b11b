/*
 * agent/masking.h: a stream's column rules (exclude_columns, mask_columns;
 * schema/mask.h) against its tables, for `sluice run` and `sluice check`.
 */
#ifndef SLUICE_AGENT_MASKING_H
#define SLUICE_AGENT_MASKING_H

#include <stdio.h>

#include "agent/config.h"
#include "common/buf.h"
#include "schema/mask.h"

/* Compiles the stream's rules: *out is NULL when it has none.  Returns 0,
 * or SL_EFAIL with a message in err.  Free *out with sl_mask_free(). */
int sl_stream_mask_new(const struct sl_stream_config *sc, struct sl_mask **out, char *err, size_t errlen);

/* Checks the rules m (not NULL) against the stream's tables.  A key column
 * that a rule excludes is SL_ECONFIG, naming the table and the column.
 * With out (`sluice check`), prints for each table the columns excluded and
 * masked, and a rule that matches no column of any table is SL_ECONFIG;
 * without (`sluice run`), such a rule is a warning in the log.  Returns 0,
 * or a negative enum sl_status with a message in err. */
int sl_stream_mask_tables(const struct sl_stream_config *sc, struct sl_mask *m, struct sl_table *const *tables,
			  int n, FILE *out, char *err, size_t errlen);

/* Appends to out what the rules m (NULL: none) do to table t, as a text
 * that changes when they do: "COLUMN:METHOD" for each column excluded or
 * masked, in column order, separated by ", ", then " (key KEYID)" when one
 * hashes (sl_mask_key_id); nothing when no rule touches t.  Returns 0, or
 * -1 (out of memory). */
int sl_stream_mask_rules(const struct sl_mask *m, const struct sl_table *t, struct sl_buf *out);

#endif
