/*
 * sources/postgres/pg_binary.h: PostgreSQL's binary format to typed values.
 *
 * The backfill reads tables with `COPY (SELECT ...) TO STDOUT (FORMAT
 * binary)`, and chunks while streaming with binary results: each value is
 * its type's send function's output (src/backend/utils/adt/), which for the
 * common types is cheaper to read than their text, and for bytea half its
 * size.  The columns whose type is decoded here (sl_pg_bin_decodes) are
 * selected as they are; every other column is selected as its type's text
 * output (sl_pg_bin_text_expr), which arrives as text's binary form (the
 * bytes themselves) and goes through the text decoders of pg_text.h
 * unchanged.  The typed values are those sl_pg_text_row makes of the same
 * value's text: the same clamps of infinite dates and timestamps, the same
 * NaN rule for decimals (pg_text.h).
 */
#ifndef SLUICE_SOURCES_POSTGRES_PG_BINARY_H
#define SLUICE_SOURCES_POSTGRES_PG_BINARY_H

#include <stdbool.h>
#include <stddef.h>

#include "common/buf.h"
#include "schema/schema.h"
#include "sources/postgres/pg_text.h"

/* True when column col's values are read in their binary form; false when
 * the query selects them as text.  A column qualifies when its type OID
 * (src_type: a domain has its own OID, and is read as text) is one decoded
 * here and its output type is the one sl_pg_type_map gives that OID. */
bool sl_pg_bin_decodes(const struct sl_column *col);

/* The header of a binary COPY's data ("PGCOPY\n\377\r\n\0", flags, header
 * extension), at the start of its first CopyData message: its length in
 * *skip.  Returns 0, or -1 if p does not start with a header this reads (one
 * with OIDs, or truncated). */
int sl_pg_copy_binary_header(const char *p, size_t len, size_t *skip);

/* Splits one binary COPY tuple (p, len bytes: exactly one tuple) into
 * ncols values pointing into p (SL_TV_TEXT, or SL_TV_NULL).  Returns 1 for
 * a tuple, 0 for the trailer (a field count of -1), -1 if the bytes are not
 * a tuple of ncols fields. */
int sl_pg_copy_binary_tuple(char *p, size_t len, struct sl_text_value *vals, int ncols);

/* Converts the ncols binary values of one row of t (as sl_pg_copy_binary_tuple
 * or PQgetvalue gives them: SL_TV_TEXT holds the value's binary form where
 * binary[i], sl_pg_bin_decodes of column i, else its text) into typed values.  Strings, bytes,
 * JSON and uuids point into in's bytes; decimal digits and the text of
 * oids and unconstrained numerics go into scratch, which is reset first.  st
 * may be NULL.  Returns 0, or -1 with a message in err naming the column. */
int sl_pg_binary_row(const struct sl_table *t, const bool *binary, struct sl_text_value *in, struct sl_value *out,
		     struct sl_buf *scratch, struct sl_pg_text_stats *st, char *err, size_t errlen);

/* One binary value of column col (sl_pg_bin_decodes) into *o; decimal
 * digits and texts are written at scratch->data + scratch->len, where
 * sl_pg_bin_scratch(col, p, len) bytes must have been reserved.  Returns 0
 * or -1 (not a value of the column's type and output type). */
int sl_pg_bin_value(const struct sl_column *col, const char *p, size_t len, struct sl_value *o,
		    struct sl_buf *scratch, struct sl_pg_text_stats *st);
size_t sl_pg_bin_scratch(const struct sl_column *col, const char *p, size_t len);

#endif
