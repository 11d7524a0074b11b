/*
 * sinks/avro/avro_read.h: reads the records of an Avro object container
 * file as avro-c generic values, for sluice's own readers (verify and
 * merge-mode compaction).  The framing and the codecs are ocf.c's reader
 * (avro-c 1.11 in Debian 12 reads no zstandard); avro-c decodes the
 * records of each decompressed block against the header's schema.
 */
#ifndef SLUICE_SINKS_AVRO_AVRO_READ_H
#define SLUICE_SINKS_AVRO_AVRO_READ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <avro.h>

#include "common/buf.h"

struct sl_avro_read;

/* Opens the container file at path and makes a generic value of its
 * schema.  Returns 0 and the reader in *out (free it with
 * sl_avro_read_close), or -1 with a message in err naming the file. */
int sl_avro_read_open(struct sl_avro_read **out, const char *path, char *err, size_t errlen);
/* Like sl_avro_read_open, but reads the container from f (taken over, as by
 * sl_ocf_reader_open_stream: closed by sl_avro_read_close, or here on a
 * failure); name stands for the file in messages. */
int sl_avro_read_open_stream(struct sl_avro_read **out, FILE *f, const char *name, char *err, size_t errlen);
/* The avro.schema of the header, as it holds it; owned by r. */
const struct sl_buf *sl_avro_read_schema(const struct sl_avro_read *r);
/* Reads the next record: returns 1 with it in *val (owned by r, overwritten
 * by the next call), 0 after the last one, or -1 with a message in err
 * naming the file (a damaged block, or a record avro-c cannot decode). */
int sl_avro_read_next(struct sl_avro_read *r, avro_value_t **val, char *err, size_t errlen);
/* Records read so far. */
uint64_t sl_avro_read_count(const struct sl_avro_read *r);
void sl_avro_read_close(struct sl_avro_read *r);

/* Appends the Avro binary encoding of v to b, through the memory writer w
 * (avro_writer_memory).  Returns 0, or -1 (out of memory, or avro-c). */
int sl_avro_value_bytes(avro_writer_t w, struct sl_buf *b, avro_value_t *v);

#endif
