/*
 * sinks/avro/ocf.h: an Avro object container file writer that writes the
 * framing itself, because avro-c re-serialises the schema it parsed and drops
 * logicalType, precision and scale from the header.  The file is:
 *
 *   "Obj" 0x01, metadata map {avro.schema: the schema JSON as given,
 *   avro.codec: "null" | "deflate" | "snappy" | "zstandard"}, a 16-byte
 *   random sync marker,
 *   then blocks: record count (long), byte size (long), data, sync marker.
 *
 * deflate is raw RFC 1951 data, made by libdeflate (whole-buffer compression
 * fits Avro blocks, and it is about twice as fast as zlib at the same level);
 * snappy is the snappy block followed by the big-endian CRC32 of the
 * uncompressed block, as the Avro specification requires; zstandard is one
 * zstd frame that records its content size, made by one ZSTD_CCtx per
 * compressing thread, reused for every block.  Records are appended already
 * encoded.
 *
 * The reader's half (sl_ocf_reader) reads such files back block by block
 * and decompresses every codec above itself: avro-c (1.11 in Debian 12) has
 * no zstandard, so the readers of sluice (verify, merge-mode compaction)
 * hand avro-c only decompressed blocks (avro_read.h).
 *
 * A writer writes either to a file it creates (sl_ocf_open) or through an
 * output callback (sl_ocf_open_out), which is how the sinks' file tree hands
 * the bytes to a storage backend (a local file, or an S3 spool).
 *
 * The compression state lives in a struct sl_ocf_codec that the writers of
 * one sink share, so memory per open file is only its block buffer.  Inline
 * (threads 0), compressing is synchronous: one compressor and one output
 * buffer serve any number of open files.  With compression threads, a full
 * block goes to a worker while the caller encodes the next; blocks are
 * written out in order by the caller's thread (the output callbacks run on
 * it as inline), at most 2 per thread are in flight, sl_ocf_close returns
 * only once every block of its file is written, and a failure of a block in
 * flight is returned, naming the file, by the next call on its writer.  A
 * codec and its writers must be used by one thread at a time (the workers
 * are the codec's own).
 */
#ifndef SLUICE_SINKS_AVRO_OCF_H
#define SLUICE_SINKS_AVRO_OCF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/uio.h>

#include "common/buf.h"

/* Avro block codecs: the avro.codec of a file. */
enum sl_codec { SL_CODEC_NULL = 0, SL_CODEC_DEFLATE, SL_CODEC_SNAPPY, SL_CODEC_ZSTANDARD };

/* The highest zstandard level (ZSTD_maxCLevel() of libzstd 1.5). */
#define SL_OCF_ZSTD_MAX_LEVEL 22

/* Default target size of a block's encoded (uncompressed) records. */
#define SL_OCF_BLOCK_TARGET ((size_t)64 * 1024)

struct sl_ocf_codec;
struct sl_ocf_writer;

/* The most compression threads a codec may have. */
#define SL_OCF_MAX_THREADS 64

/* The largest block a reader takes, compressed or not. */
#define SL_OCF_MAX_BLOCK ((size_t)1 << 30)

/* Checks level for codec: deflate 1-9, zstandard 1-SL_OCF_ZSTD_MAX_LEVEL,
 * anything for null and snappy.  Returns 0, or -1 with a message in err
 * ("compression_level 12 is not in 1-9 (deflate)"). */
int sl_ocf_check_level(enum sl_codec codec, int level, char *err, size_t errlen);

/* Makes the compression state for codec; level is the deflate level 1-9 or
 * the zstandard level 1-22 (ignored for the other codecs); threads the compression threads to start
 * (0: compress on the caller's thread; ignored for codec null, which has
 * nothing to compress).  Free it with sl_ocf_codec_free after every writer
 * using it is closed or aborted.  Returns 0 and the codec in *out, or -1 with
 * a message in err. */
int sl_ocf_codec_new(struct sl_ocf_codec **out, enum sl_codec codec, int level, int threads,
		     char *err, size_t errlen);
/* Stops the codec's threads and frees it. */
void sl_ocf_codec_free(struct sl_ocf_codec *c);
/* The compression threads the codec runs (0: inline). */
int sl_ocf_codec_threads(const struct sl_ocf_codec *c);

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
/* Counts the record just appended; writes the block out (or hands it to a
 * compression thread) when it reached the target size.  Returns 0, or -1
 * with a message in err: also when an earlier block of this file failed in
 * a compression thread or while being written out. */
int sl_ocf_record_done(struct sl_ocf_writer *w, char *err, size_t errlen);
/* Convenience: copies one encoded datum and calls sl_ocf_record_done. */
int sl_ocf_append(struct sl_ocf_writer *w, const void *datum, size_t len, char *err, size_t errlen);

/* Bytes written to the file so far plus the encoded (uncompressed) bytes of
 * the blocks in flight and of the block being filled: about an upper bound
 * on the size once they are written. */
uint64_t sl_ocf_size(const struct sl_ocf_writer *w);
/* Records appended so far. */
uint64_t sl_ocf_count(const struct sl_ocf_writer *w);
/* The path (or name) the writer was opened with. */
const char *sl_ocf_path(const struct sl_ocf_writer *w);

/* Writes the last block, waits until every block of the file in flight is
 * written and, if sync, fsyncs; closes the file and frees w (also on
 * failure).  Returns 0, or -1 with a message in err (the first failure of
 * any block of the file). */
int sl_ocf_close(struct sl_ocf_writer *w, bool sync, char *err, size_t errlen);
/* Closes the file without writing anything more and frees w; its blocks in
 * flight are dropped.  The caller removes the file. */
void sl_ocf_abort(struct sl_ocf_writer *w);

/* The reader's half: reads the avro.schema of the container file at path,
 * exactly as its header holds it (logicalType, precision and the sluice
 * properties kept), into out (reset first).  Returns 0, or -1 with a message
 * in err naming the file. */
int sl_ocf_read_schema(const char *path, struct sl_buf *out, char *err, size_t errlen);

struct sl_ocf_reader;

/* Opens the container file at path and reads its header.  Every codec of
 * enum sl_codec is read; any other is an error.  Returns 0 and the reader in
 * *out (free it with sl_ocf_reader_close), or -1 with a message in err
 * naming the file. */
int sl_ocf_reader_open(struct sl_ocf_reader **out, const char *path, char *err, size_t errlen);
/* Like sl_ocf_reader_open, but reads the container from f, a stream open for
 * reading at its start (fmemopen's over a buffer, or a file's), which the
 * reader takes over: sl_ocf_reader_close closes it, and so does a failure
 * here.  name stands for the file in messages. */
int sl_ocf_reader_open_stream(struct sl_ocf_reader **out, FILE *f, const char *name, char *err, size_t errlen);
/* The avro.schema of the header, as it holds it; owned by r. */
const struct sl_buf *sl_ocf_reader_schema(const struct sl_ocf_reader *r);
/* The file's codec. */
enum sl_codec sl_ocf_reader_codec(const struct sl_ocf_reader *r);
/* Reads the next block and decompresses it: returns 1 with its records'
 * count in *count and its encoded records in *data (*len bytes; owned by r,
 * valid until the next call), 0 at the end of the file, or -1 with a message
 * in err naming the file and the block (truncated, damaged, a bad sync
 * marker, a CRC-32 that does not match). */
int sl_ocf_reader_block(struct sl_ocf_reader *r, const void **data, size_t *len, uint64_t *count, char *err,
			size_t errlen);
void sl_ocf_reader_close(struct sl_ocf_reader *r);

#endif
