/*
 * sinks/avro/avro_enc.h: the direct record encoder.  It appends one whole
 * record (a struct sl_change in the layout of avro_schema.h) in Avro binary to
 * a struct sl_buf, without going through avro-c's generic values and without
 * any heap allocation per row: everything that depends only on the table
 * version and the stream (object, schema key, names, the primary-key list) is
 * encoded once when the encoder is made.
 */
#ifndef SLUICE_SINKS_AVRO_AVRO_ENC_H
#define SLUICE_SINKS_AVRO_AVRO_ENC_H

#include <stddef.h>

#include "common/buf.h"
#include "schema/schema.h"
#include "sinks/avro/avro_value.h"

struct sl_avro_enc;

/* Makes the encoder for table version t (whose t->src describes its
 * source's position fields) for stream `stream`.  The encoder copies what it
 * needs: t and stream may be freed afterwards.  Returns the encoder (freed
 * with sl_avro_enc_free), or NULL with a message in err. */
struct sl_avro_enc *sl_avro_enc_new(const struct sl_table *t, const char *stream, char *err, size_t errlen);
void sl_avro_enc_free(struct sl_avro_enc *e);

/* The schema JSON (see avro_schema.h) the encoder writes; owned by e, valid
 * until sl_avro_enc_free.  *len receives its length. */
const char *sl_avro_enc_schema(const struct sl_avro_enc *e, size_t *len);
/* The reader schema JSON (sl_avro_reader_schema_json): the schema with
 * the columns' missing values as defaults, for .schema.avsc; owned by e,
 * valid as long as e. */
const char *sl_avro_enc_reader_schema(const struct sl_avro_enc *e, size_t *len);
/* The schema key of the table version the encoder was made for. */
const char *sl_avro_enc_schema_key(const struct sl_avro_enc *e);

/* Appends the record for change c to out.  c->table must be the table version
 * the encoder was made for (same schema key and column count), and c->op one
 * of enum sl_op, else it is an error.  For a TRUNCATE, and when c->values is NULL, every payload field is
 * null.  c->read_method NULL is written as "".  The source position fields
 * come from c->pos through t->src->meta_values.
 * Returns 0, or -1 with a message in err (a value that does not parse names
 * its column); on failure out is left as it was on entry. */
int sl_avro_enc_record(struct sl_avro_enc *e, struct sl_buf *out, const struct sl_change *c,
		       char *err, size_t errlen);

#endif
