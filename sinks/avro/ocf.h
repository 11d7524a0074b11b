/*
 * sinks/avro/ocf.h: an Avro object container file writer that writes the
 * framing itself, because avro-c re-serialises the schema it parsed and drops
 * logicalType, precision and scale from the header.  The file is:
 *
 *   "Obj" 0x01, metadata map {avro.schema: the schema JSON as given,
 *   avro.codec: "null" | "deflate" | "snappy"}, a 16-byte random sync marker,
 *   then blocks: record count (long), byte size (long), data, sync marker.
 *
 * deflate is raw RFC 1951 data, made by libdeflate (whole-buffer compression
 * fits Avro blocks, and it is about twice as fast as zlib at the same level);
 * snappy is the snappy block followed by the big-endian CRC32 of the
 * uncompressed block, as the Avro specification requires.  Records are
 * appended already encoded.
 *
 * A writer writes either to a file it creates (sl_ocf_open) or through an
 * output callback (sl_ocf_open_out), which is how the sinks' file tree hands
 * the bytes to a storage backend (a local file, or an S3 spool).
 *
 * The compression state lives in a struct sl_ocf_codec that the writers of
 * one sink share: compressing is synchronous, so one compressor and one
 * output buffer serve any number of open files, and memory per open file is
 * only its block buffer.  A codec and its writers must be used by one thread
 * at a time.
 */
#ifndef SLUICE_SINKS_AVRO_OCF_H
#define SLUICE_SINKS_AVRO_OCF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "common/buf.h"

/* Avro block codecs: the avro.codec of a file. */
enum sl_codec { SL_CODEC_NULL = 0, SL_CODEC_DEFLATE, SL_CODEC_SNAPPY };

/* Default target size of a block's encoded (uncompressed) records. */
#define SL_OCF_BLOCK_TARGET ((size_t)64 * 1024)

struct sl_ocf_codec;
struct sl_ocf_writer;

/* Makes the compression state for codec; level is the deflate level 1-9
 * (ignored for the other codecs).  Free it with sl_ocf_codec_free after every
 * writer using it is closed.  Returns 0 and the codec in *out, or -1 with a
 * message in err. */
int sl_ocf_codec_new(struct sl_ocf_codec **out, enum sl_codec codec, int level,
		     char *err, size_t errlen);
void sl_ocf_codec_free(struct sl_ocf_codec *c);

/* Creates path (it must not exist; mode 0644) and writes the header into the
 * writer's buffer.  schema_json (schema_len bytes) is copied into the header
 * as is.  codec is borrowed: it must outlive the writer.  block_target 0
 * means SL_OCF_BLOCK_TARGET.  Returns 0 and the writer in *out, or -1 with a
 * message in err naming the file. */
int sl_ocf_open(struct sl_ocf_writer **out, const char *path, const char *schema_json,
		size_t schema_len, struct sl_ocf_codec *codec, size_t block_target,
		char *err, size_t errlen);

/* Where a writer opened with sl_ocf_open_out sends its bytes: write() must
 * take all iovcnt buffers (in order) or fail with a message in err, -1. */
struct sl_ocf_out {
	int (*write)(void *arg, const struct iovec *iov, int iovcnt, char *err, size_t errlen);
	void *arg;
};

/* Like sl_ocf_open, but the container goes to out (copied) instead of a
 * file; name is only for messages (sl_ocf_path returns it).  Nothing is
 * written before the first block or sl_ocf_close.  sl_ocf_close's sync is
 * ignored: making the bytes durable is the output's business. */
int sl_ocf_open_out(struct sl_ocf_writer **out, const struct sl_ocf_out *o, const char *name,
		    const char *schema_json, size_t schema_len, struct sl_ocf_codec *codec,
		    size_t block_target, char *err, size_t errlen);

/* The buffer the next record is encoded into: append exactly one datum to it,
 * then call sl_ocf_record_done.  On an encoding error, leave the buffer as it
 * was (the encoders do) and do not call sl_ocf_record_done. */
struct sl_buf *sl_ocf_record_buf(struct sl_ocf_writer *w);
/* Counts the record just appended; writes the block out when it reached the
 * target size.  Returns 0, or -1 with a message in err. */
int sl_ocf_record_done(struct sl_ocf_writer *w, char *err, size_t errlen);
/* Convenience: copies one encoded datum and calls sl_ocf_record_done. */
int sl_ocf_append(struct sl_ocf_writer *w, const void *datum, size_t len, char *err, size_t errlen);

/* Bytes written to the file so far plus the encoded bytes of the block being
 * filled (an upper bound on the size after the next block is written). */
uint64_t sl_ocf_size(const struct sl_ocf_writer *w);
/* Records appended so far. */
uint64_t sl_ocf_count(const struct sl_ocf_writer *w);
/* The path (or name) the writer was opened with. */
const char *sl_ocf_path(const struct sl_ocf_writer *w);

/* Writes the last block and, if sync, fsyncs; closes the file and frees w
 * (also on failure).  Returns 0, or -1 with a message in err. */
int sl_ocf_close(struct sl_ocf_writer *w, bool sync, char *err, size_t errlen);
/* Closes the file without writing anything more and frees w; the caller
 * removes the file. */
void sl_ocf_abort(struct sl_ocf_writer *w);

#endif
