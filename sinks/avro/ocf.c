/*
 * sinks/avro/ocf.c: Avro object container file writer (see ocf.h).
 *
 * Memory per writer: the block buffer (about block_target plus one record)
 * and the small output buffer.  Per codec, shared by its writers: one
 * compressed-block buffer and, for deflate, one libdeflate compressor (about
 * 200 KiB at level 1, 650 KiB at levels 2-9).  A buffer that grew far past
 * the target for one huge record is released afterwards, so memory stays
 * bounded by the target, not by the largest row ever seen.
 */
#include "sinks/avro/ocf.h"

#include <errno.h>
#include <fcntl.h>
#include <libdeflate.h>
#include <snappy-c.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#include "common/util.h"
#include "sinks/avro/avro_value.h"

struct sl_ocf_codec {
	enum sl_codec codec;
	struct libdeflate_compressor *deflater;  /* deflate only */
	struct sl_buf scratch;                   /* the block being compressed */
};

struct sl_ocf_writer {
	int fd;                 /* the file, or -1 when writing through out_cb */
	struct sl_ocf_out out_cb;
	char *path;
	struct sl_ocf_codec *codec;  /* borrowed */
	size_t block_target;
	unsigned char sync[16];
	struct sl_buf block;    /* encoded records of the block being filled */
	uint64_t block_count;   /* records in block */
	struct sl_buf out;      /* bytes waiting for write(2) */
	uint64_t written;       /* bytes handed to the file or the output */
	uint64_t records;
};

/* Writes every iovec fully, retrying on EINTR and short writes.  The iovecs
 * are consumed.  Returns 0 or -1 (errno set). */
static int writev_all(int fd, struct iovec *iov, int n)
{
	while (n > 0) {
		ssize_t k = writev(fd, iov, n);
		if (k < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		while (n > 0 && (size_t)k >= iov->iov_len) {
			k -= (ssize_t)iov->iov_len;
			iov++;
			n--;
		}
		if (n > 0) {
			iov->iov_base = (char *)iov->iov_base + k;
			iov->iov_len -= (size_t)k;
		}
	}
	return 0;
}

/* Hands n iovecs to the file or the output callback.  Returns 0, or -1 with
 * a message in err.  The iovecs may be consumed. */
static int emit(struct sl_ocf_writer *w, struct iovec *iov, int n, char *err, size_t errlen)
{
	if (w->fd < 0)
		return w->out_cb.write(w->out_cb.arg, iov, n, err, errlen);
	if (writev_all(w->fd, iov, n) < 0) {
		snprintf(err, errlen, "could not write \"%s\": %s", w->path, sl_strerror(errno));
		return -1;
	}
	return 0;
}

/* 16 random bytes; getrandom() only fails on ancient kernels, where a mix of
 * clock, pid and address is still unique enough for a sync marker. */
static void random_sync(unsigned char sync[16])
{
	ssize_t k = getrandom(sync, 16, 0);

	if (k != 16) {
		struct timespec ts;
		uint64_t a, b;
		clock_gettime(CLOCK_REALTIME, &ts);
		a = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
		b = (uint64_t)getpid() << 32 ^ (uint64_t)(uintptr_t)sync;
		for (int i = 0; i < 8; i++) {
			sync[i] = (unsigned char)(a >> (8 * i));
			sync[8 + i] = (unsigned char)(b >> (8 * i));
		}
	}
}

static const char *codec_name(enum sl_codec c)
{
	switch (c) {
	case SL_CODEC_DEFLATE: return "deflate";
	case SL_CODEC_SNAPPY: return "snappy";
	case SL_CODEC_NULL: break;
	}
	return "null";
}

int sl_ocf_codec_new(struct sl_ocf_codec **out, enum sl_codec codec, int level,
		     char *err, size_t errlen)
{
	struct sl_ocf_codec *c;

	*out = NULL;
	if (codec != SL_CODEC_NULL && codec != SL_CODEC_DEFLATE && codec != SL_CODEC_SNAPPY) {
		snprintf(err, errlen, "unknown avro codec %d", (int)codec);
		return -1;
	}
	if (codec == SL_CODEC_DEFLATE && (level < 1 || level > 9)) {
		snprintf(err, errlen, "deflate level %d is not in 1-9", level);
		return -1;
	}
	c = calloc(1, sizeof *c);
	if (!c) {
		snprintf(err, errlen, "avro codec: out of memory");
		return -1;
	}
	c->codec = codec;
	sl_buf_init(&c->scratch, 0);
	if (codec == SL_CODEC_DEFLATE && !(c->deflater = libdeflate_alloc_compressor(level))) {
		snprintf(err, errlen, "avro codec: out of memory making a deflate compressor");
		free(c);
		return -1;
	}
	*out = c;
	return 0;
}

void sl_ocf_codec_free(struct sl_ocf_codec *c)
{
	if (!c)
		return;
	if (c->deflater)
		libdeflate_free_compressor(c->deflater);
	sl_buf_free(&c->scratch);
	free(c);
}

/* Makes a writer with its header in the output buffer (nothing written yet). */
static struct sl_ocf_writer *writer_new(const char *path, const char *schema_json, size_t schema_len,
					struct sl_ocf_codec *codec, size_t block_target, char *err,
					size_t errlen)
{
	struct sl_ocf_writer *w = calloc(1, sizeof *w);
	const char *cn = codec_name(codec->codec);

	if (!w || !(w->path = strdup(path))) {
		free(w);
		snprintf(err, errlen, "avro file \"%s\": out of memory", path);
		return NULL;
	}
	w->fd = -1;
	w->codec = codec;
	w->block_target = block_target ? block_target : SL_OCF_BLOCK_TARGET;
	sl_buf_init(&w->block, 0);
	sl_buf_init(&w->out, 0);
	random_sync(w->sync);

	sl_buf_append(&w->out, "Obj\x01", 4);
	sl_avro_put_long(&w->out, 2);
	sl_avro_put_str(&w->out, "avro.schema");
	sl_avro_put_bytes(&w->out, schema_json, schema_len);
	sl_avro_put_str(&w->out, "avro.codec");
	sl_avro_put_str(&w->out, cn);
	sl_avro_put_long(&w->out, 0);
	sl_buf_append(&w->out, w->sync, sizeof w->sync);
	if (sl_buf_failed(&w->out)) {
		snprintf(err, errlen, "avro file \"%s\": out of memory", path);
		sl_ocf_abort(w);
		return NULL;
	}
	return w;
}

int sl_ocf_open(struct sl_ocf_writer **out, const char *path, const char *schema_json,
		size_t schema_len, struct sl_ocf_codec *codec, size_t block_target,
		char *err, size_t errlen)
{
	struct sl_ocf_writer *w = writer_new(path, schema_json, schema_len, codec, block_target, err, errlen);

	*out = NULL;
	if (!w)
		return -1;
	w->fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	if (w->fd < 0) {
		snprintf(err, errlen, "could not create \"%s\": %s", path, sl_strerror(errno));
		sl_ocf_abort(w);
		return -1;
	}
	*out = w;
	return 0;
}

int sl_ocf_open_out(struct sl_ocf_writer **out, const struct sl_ocf_out *o, const char *name,
		    const char *schema_json, size_t schema_len, struct sl_ocf_codec *codec,
		    size_t block_target, char *err, size_t errlen)
{
	struct sl_ocf_writer *w = writer_new(name, schema_json, schema_len, codec, block_target, err, errlen);

	*out = w;
	if (!w)
		return -1;
	w->out_cb = *o;
	return 0;
}

struct sl_buf *sl_ocf_record_buf(struct sl_ocf_writer *w)
{
	return &w->block;
}

/* Sends the output buffer to the file. */
static int flush_out(struct sl_ocf_writer *w, char *err, size_t errlen)
{
	struct iovec iov = { w->out.data, w->out.len };

	if (w->out.len == 0)
		return 0;
	if (emit(w, &iov, 1, err, errlen) < 0)
		return -1;
	w->written += w->out.len;
	sl_buf_reset(&w->out);
	return 0;
}

/* Compresses the block into the codec's scratch buffer (or not, for codec
 * null), then writes any pending header bytes, the count, the size, the data
 * and the sync marker with one writev.  With no records pending it only
 * writes pending header bytes.  Returns 0, or -1 with a message in err. */
static int write_block(struct sl_ocf_writer *w, char *err, size_t errlen)
{
	const unsigned char *data = (const unsigned char *)w->block.data;
	size_t n = w->block.len, clen = n;
	const void *cdata = data;
	struct sl_ocf_codec *c = w->codec;

	if (w->block_count == 0)
		return flush_out(w, err, errlen);
	if (sl_buf_failed(&w->block)) {
		snprintf(err, errlen, "avro file \"%s\": block buffer out of memory", w->path);
		return -1;
	}
	if (c->codec == SL_CODEC_DEFLATE) {
		/* The bound makes the call unable to run out of room. */
		size_t bound = libdeflate_deflate_compress_bound(c->deflater, n);
		sl_buf_reset(&c->scratch);
		if (sl_buf_reserve(&c->scratch, bound) < 0)
			goto oom;
		clen = libdeflate_deflate_compress(c->deflater, data, n, c->scratch.data, bound);
		if (clen == 0) {
			snprintf(err, errlen, "avro file \"%s\": deflate failed on a block of %zu bytes",
				 w->path, n);
			return -1;
		}
		cdata = c->scratch.data;
	} else if (c->codec == SL_CODEC_SNAPPY) {
		size_t cap = snappy_max_compressed_length(n);
		sl_buf_reset(&c->scratch);
		if (sl_buf_reserve(&c->scratch, cap + 4) < 0)
			goto oom;
		clen = cap;
		if (snappy_compress((const char *)data, n, c->scratch.data, &clen) != SNAPPY_OK) {
			snprintf(err, errlen, "avro file \"%s\": snappy_compress failed", w->path);
			return -1;
		}
		/* The standard CRC-32 (as zlib's crc32), of the uncompressed data. */
		sl_put_u32((unsigned char *)c->scratch.data + clen, libdeflate_crc32(0, data, n));
		clen += 4;
		cdata = c->scratch.data;
	}
	/* Pending header bytes, count and size go out with the data and the
	 * sync marker in one writev, without copying the data. */
	sl_avro_put_long(&w->out, (int64_t)w->block_count);
	sl_avro_put_long(&w->out, (int64_t)clen);
	if (sl_buf_failed(&w->out))
		goto oom;
	{
		struct iovec iov[3] = {
			{ w->out.data, w->out.len },
			{ (void *)(uintptr_t)cdata, clen },
			{ w->sync, sizeof w->sync },
		};
		if (emit(w, iov, 3, err, errlen) < 0)
			return -1;
	}
	w->written += w->out.len + clen + sizeof w->sync;
	sl_buf_reset(&w->out);
	w->block_count = 0;
	sl_buf_reset(&w->block);
	/* Give back memory that one oversized record made the buffers grab. */
	if (w->block.alloc > 4 * w->block_target)
		sl_buf_free(&w->block);
	if (c->scratch.alloc > 4 * w->block_target)
		sl_buf_free(&c->scratch);
	return 0;
oom:
	snprintf(err, errlen, "avro file \"%s\": out of memory compressing a block of %zu bytes",
		 w->path, n);
	return -1;
}

int sl_ocf_record_done(struct sl_ocf_writer *w, char *err, size_t errlen)
{
	w->block_count++;
	w->records++;
	if (w->block.len >= w->block_target)
		return write_block(w, err, errlen);
	return 0;
}

int sl_ocf_append(struct sl_ocf_writer *w, const void *datum, size_t len, char *err, size_t errlen)
{
	if (sl_buf_append(&w->block, datum, len) < 0) {
		snprintf(err, errlen, "avro file \"%s\": out of memory", w->path);
		return -1;
	}
	return sl_ocf_record_done(w, err, errlen);
}

uint64_t sl_ocf_size(const struct sl_ocf_writer *w)
{
	return w->written + w->out.len + w->block.len;
}

uint64_t sl_ocf_count(const struct sl_ocf_writer *w)
{
	return w->records;
}

const char *sl_ocf_path(const struct sl_ocf_writer *w)
{
	return w->path;
}

static void free_writer(struct sl_ocf_writer *w)
{
	sl_buf_free(&w->block);
	sl_buf_free(&w->out);
	free(w->path);
	free(w);
}

int sl_ocf_close(struct sl_ocf_writer *w, bool sync, char *err, size_t errlen)
{
	int rc = 0;

	if (write_block(w, err, errlen) < 0)
		rc = -1;
	if (w->fd < 0) {
		free_writer(w);
		return rc;
	}
	if (rc == 0 && sync && fsync(w->fd) < 0) {
		snprintf(err, errlen, "could not fsync \"%s\": %s", w->path, sl_strerror(errno));
		rc = -1;
	}
	if (close(w->fd) < 0 && rc == 0) {
		snprintf(err, errlen, "could not close \"%s\": %s", w->path, sl_strerror(errno));
		rc = -1;
	}
	w->fd = -1;
	free_writer(w);
	return rc;
}

void sl_ocf_abort(struct sl_ocf_writer *w)
{
	if (!w)
		return;
	if (w->fd >= 0)
		close(w->fd);
	free_writer(w);
}
