/*
 * sinks/avro/ocf.c: Avro object container file writer, and its reader (see
 * ocf.h).  The reader holds the block as stored and the block decompressed,
 * each bounded by SL_OCF_MAX_BLOCK, and a decompressor made on first use.
 *
 * Memory per writer: the block buffer (about block_target plus one record)
 * and the small output buffer.  Per codec, shared by its writers: inline,
 * one compressed-block buffer and, for deflate, one libdeflate compressor
 * (about 200 KiB at level 1, 650 KiB at levels 2-9), for zstandard one
 * ZSTD_CCtx (about 300 KiB at level 1, 650 KiB at 3, for 64 KiB blocks;
 * more for larger blocks and levels); with compression
 * threads, one compressor per thread and, per job slot (OCF_JOBS_PER_THREAD
 * per thread), an input and an output block buffer.  A buffer that grew far
 * past the target for one huge record is released afterwards, so memory
 * stays bounded by the target, not by the largest row ever seen.
 *
 * Compression threads.  The codec's owner (the one thread that uses the
 * codec and its writers) hands a full block to a free slot of the codec's
 * ring of jobs by swapping buffers with it, and goes on encoding the next
 * block.  Workers take queued slots in ring order and compress them,
 * touching nothing but the slot's buffers; the slot's state changes under
 * the codec's mutex.  Either side signals the other only when it is asleep
 * (a worker counted idle, the owner waiting for the head), so a running
 * thread is never woken, and the owner wakes a worker once per
 * OCF_WAKE_QUEUED blocks, or when it waits itself.  Only the owner writes blocks out, and only from the
 * head of the ring: slots are filled in the order blocks fill up, so every
 * file gets its blocks in order, and the output callbacks run on the owner's
 * thread as they do inline.  The owner writes out done slots whenever it
 * hands over a block, and waits for the head when every slot is in flight:
 * at most njobs blocks are in flight.  sl_ocf_close waits until every slot
 * of its writer is written before it writes the last block and syncs, so a
 * closed file holds all its records.  A failure in a slot (compressing, or
 * writing it out) is kept in its writer and returned, naming the file, by
 * that writer's next call, at the latest its sl_ocf_close.
 */
#include "sinks/avro/ocf.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <libdeflate.h>
#include <pthread.h>
#include <signal.h>
#include <snappy-c.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>
#include <zstd.h>

#include "common/log.h"
#include "common/util.h"
#include "sinks/avro/avro_value.h"

/* Job slots per compression thread: one being compressed, the others queued
 * behind it, so that a worker never waits for the owner to write a block
 * out.  A sleeping worker is woken once OCF_WAKE_QUEUED blocks are queued
 * (or when the owner has to wait for one), not for every block: one wake-up
 * per batch of blocks. */
#define OCF_JOBS_PER_THREAD 4
#define OCF_WAKE_QUEUED 2

enum job_state { JOB_FREE, JOB_QUEUED, JOB_BUSY, JOB_DONE };

/* A block handed to the workers. */
struct ocf_job {
	struct sl_ocf_writer *w;  /* owner only; NULL once its writer was aborted */
	struct sl_buf in;         /* the block's encoded records */
	uint64_t count;           /* records in it */
	size_t release;           /* free the buffers when they grew past this */
	/* Written by the worker that took the job, read by the owner once done. */
	struct sl_buf out;        /* the compressed block */
	size_t clen;
	bool failed;
	char err[160];            /* why, not naming the file */
	enum job_state state;     /* under the codec's mutex */
};

/* One thread's compressor: deflate's or zstandard's, made once and reused
 * for every block. */
struct ocf_cmp {
	struct libdeflate_compressor *deflater;  /* deflate only */
	ZSTD_CCtx *zstd;                         /* zstandard only */
};

struct ocf_worker {
	struct sl_ocf_codec *c;
	struct ocf_cmp cmp;
	pthread_t thread;
	bool started;
};

struct sl_ocf_codec {
	enum sl_codec codec;
	struct ocf_cmp cmp;                      /* inline only */
	struct sl_buf scratch;                   /* inline: the block being compressed */
	/* Compression threads (nworkers 0: compress inline). */
	int nworkers;
	struct ocf_worker *workers;
	struct ocf_job *jobs;
	unsigned njobs;
	unsigned head;            /* owner only: the oldest slot in flight */
	unsigned inflight;        /* owner only: slots in flight from head on */
	pthread_mutex_t mu;
	pthread_cond_t work;      /* a job was queued, or stop */
	pthread_cond_t done;      /* a job is done */
	/* Under mu: */
	unsigned next;            /* the oldest queued slot */
	unsigned queued;          /* queued slots from next on */
	int idle;                 /* workers asleep on work: signalled only when there are any */
	bool owner_waiting;       /* the owner asleep on done: signalled only then */
	bool stop;
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
	/* With compression threads: */
	unsigned jobs;          /* slots of this writer in flight */
	uint64_t job_bytes;     /* their uncompressed bytes */
	bool failed;            /* a slot failed: err says why */
	char err[512];
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
	case SL_CODEC_ZSTANDARD: return "zstandard";
	case SL_CODEC_NULL: break;
	}
	return "null";
}

/* Makes the compressor of codec at level into m (zeroed first).  Returns 0,
 * or -1 with a message in err. */
static int cmp_init(struct ocf_cmp *m, enum sl_codec codec, int level, char *err, size_t errlen)
{
	memset(m, 0, sizeof *m);
	if (codec == SL_CODEC_DEFLATE && !(m->deflater = libdeflate_alloc_compressor(level))) {
		snprintf(err, errlen, "avro codec: out of memory making a deflate compressor");
		return -1;
	}
	if (codec == SL_CODEC_ZSTANDARD) {
		size_t r;
		if (!(m->zstd = ZSTD_createCCtx())) {
			snprintf(err, errlen, "avro codec: out of memory making a zstandard compressor");
			return -1;
		}
		r = ZSTD_CCtx_setParameter(m->zstd, ZSTD_c_compressionLevel, level);
		if (ZSTD_isError(r)) {
			snprintf(err, errlen, "avro codec: zstandard level %d: %s", level, ZSTD_getErrorName(r));
			ZSTD_freeCCtx(m->zstd);
			m->zstd = NULL;
			return -1;
		}
	}
	return 0;
}

static void cmp_free(struct ocf_cmp *m)
{
	if (m->deflater)
		libdeflate_free_compressor(m->deflater);
	ZSTD_freeCCtx(m->zstd);
	memset(m, 0, sizeof *m);
}

/* Compresses the n bytes at data with codec (and m's compressor) into out
 * (reset first), *clen bytes: raw deflate, one zstandard frame, or the
 * snappy block and the big-endian CRC-32 of the uncompressed data.  Safe on
 * any thread for its own m and out.  Returns 0, or -1 with a message in err
 * that does not name the file. */
static int compress_block(enum sl_codec codec, struct ocf_cmp *m, const void *data, size_t n,
			  struct sl_buf *out, size_t *clen, char *err, size_t errlen)
{
	sl_buf_reset(out);
	if (codec == SL_CODEC_DEFLATE) {
		/* The bound makes the call unable to run out of room. */
		size_t bound = libdeflate_deflate_compress_bound(m->deflater, n);
		if (sl_buf_reserve(out, bound) < 0)
			goto oom;
		*clen = libdeflate_deflate_compress(m->deflater, data, n, out->data, bound);
		if (*clen == 0) {
			snprintf(err, errlen, "deflate failed on a block of %zu bytes", n);
			return -1;
		}
		return 0;
	}
	if (codec == SL_CODEC_ZSTANDARD) {
		/* The frame records the content size: readers size their buffer by it. */
		size_t bound = ZSTD_compressBound(n);
		if (sl_buf_reserve(out, bound) < 0)
			goto oom;
		*clen = ZSTD_compress2(m->zstd, out->data, bound, data, n);
		if (ZSTD_isError(*clen)) {
			snprintf(err, errlen, "zstandard failed on a block of %zu bytes: %s", n,
				 ZSTD_getErrorName(*clen));
			return -1;
		}
		return 0;
	}
	size_t cap = snappy_max_compressed_length(n);
	if (sl_buf_reserve(out, cap + 4) < 0)
		goto oom;
	*clen = cap;
	if (snappy_compress(data, n, out->data, clen) != SNAPPY_OK) {
		snprintf(err, errlen, "snappy_compress failed on a block of %zu bytes", n);
		return -1;
	}
	/* The standard CRC-32 (as zlib's crc32), of the uncompressed data. */
	sl_put_u32((unsigned char *)out->data + *clen, libdeflate_crc32(0, data, n));
	*clen += 4;
	return 0;
oom:
	snprintf(err, errlen, "out of memory compressing a block of %zu bytes", n);
	return -1;
}

static void *worker_main(void *arg)
{
	struct ocf_worker *wk = arg;
	struct sl_ocf_codec *c = wk->c;

	sl_thread_name("sl-compress");
	pthread_mutex_lock(&c->mu);
	for (;;) {
		struct ocf_job *j;

		while (!c->stop && c->queued == 0) {
			c->idle++;
			pthread_cond_wait(&c->work, &c->mu);
			c->idle--;
		}
		if (c->stop)
			break;
		j = &c->jobs[c->next];
		c->next = (c->next + 1) % c->njobs;
		c->queued--;
		j->state = JOB_BUSY;
		pthread_mutex_unlock(&c->mu);
		j->failed = compress_block(c->codec, &wk->cmp, j->in.data, j->in.len, &j->out, &j->clen,
					   j->err, sizeof j->err) < 0;
		pthread_mutex_lock(&c->mu);
		j->state = JOB_DONE;
		if (c->owner_waiting)
			pthread_cond_signal(&c->done);
	}
	pthread_mutex_unlock(&c->mu);
	return NULL;
}

/* Stops and joins the workers and frees what they and the slots hold. */
static void workers_free(struct sl_ocf_codec *c)
{
	if (!c->workers)
		return;
	pthread_mutex_lock(&c->mu);
	c->stop = true;
	pthread_cond_broadcast(&c->work);
	pthread_mutex_unlock(&c->mu);
	for (int i = 0; i < c->nworkers; i++) {
		if (c->workers[i].started)
			pthread_join(c->workers[i].thread, NULL);
		cmp_free(&c->workers[i].cmp);
	}
	for (unsigned i = 0; i < c->njobs; i++) {
		sl_buf_free(&c->jobs[i].in);
		sl_buf_free(&c->jobs[i].out);
	}
	free(c->jobs);
	free(c->workers);
	c->workers = NULL;
	pthread_cond_destroy(&c->done);
	pthread_cond_destroy(&c->work);
	pthread_mutex_destroy(&c->mu);
}

/* Starts n workers for c.  Returns 0, or -1 with a message in err. */
static int workers_start(struct sl_ocf_codec *c, int n, int level, char *err, size_t errlen)
{
	sigset_t all, old;
	int rc = 0;

	c->njobs = (unsigned)n * OCF_JOBS_PER_THREAD;
	c->workers = calloc((size_t)n, sizeof *c->workers);
	c->jobs = calloc(c->njobs, sizeof *c->jobs);
	if (!c->workers || !c->jobs) {
		free(c->workers);
		free(c->jobs);
		c->workers = NULL;
		snprintf(err, errlen, "avro codec: out of memory");
		return -1;
	}
	c->nworkers = n;
	pthread_mutex_init(&c->mu, NULL);
	pthread_cond_init(&c->work, NULL);
	pthread_cond_init(&c->done, NULL);
	for (unsigned i = 0; i < c->njobs; i++) {
		sl_buf_init(&c->jobs[i].in, 0);
		sl_buf_init(&c->jobs[i].out, 0);
	}
	for (int i = 0; i < n; i++) {
		c->workers[i].c = c;
		if (cmp_init(&c->workers[i].cmp, c->codec, level, err, errlen) < 0) {
			workers_free(c);
			return -1;
		}
	}
	/* Signals are the main thread's business (it waits for them). */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	for (int i = 0; i < n && rc == 0; i++) {
		rc = pthread_create(&c->workers[i].thread, NULL, worker_main, &c->workers[i]);
		c->workers[i].started = rc == 0;
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc != 0) {
		snprintf(err, errlen, "avro codec: could not start a compression thread: %s", sl_strerror(rc));
		workers_free(c);
		return -1;
	}
	return 0;
}

int sl_ocf_check_level(enum sl_codec codec, int level, char *err, size_t errlen)
{
	if (codec == SL_CODEC_DEFLATE && (level < 1 || level > 9)) {
		snprintf(err, errlen, "compression_level %d is not in 1-9 (deflate)", level);
		return -1;
	}
	if (codec == SL_CODEC_ZSTANDARD && (level < 1 || level > SL_OCF_ZSTD_MAX_LEVEL)) {
		snprintf(err, errlen, "compression_level %d is not in 1-%d (zstandard)", level, SL_OCF_ZSTD_MAX_LEVEL);
		return -1;
	}
	return 0;
}

int sl_ocf_codec_new(struct sl_ocf_codec **out, enum sl_codec codec, int level, int threads,
		     char *err, size_t errlen)
{
	struct sl_ocf_codec *c;

	*out = NULL;
	if (codec != SL_CODEC_NULL && codec != SL_CODEC_DEFLATE && codec != SL_CODEC_SNAPPY &&
	    codec != SL_CODEC_ZSTANDARD) {
		snprintf(err, errlen, "unknown avro codec %d", (int)codec);
		return -1;
	}
	if (sl_ocf_check_level(codec, level, err, errlen) < 0)
		return -1;
	if (threads < 0 || threads > SL_OCF_MAX_THREADS) {
		snprintf(err, errlen, "compression threads %d is not in 0-%d", threads, SL_OCF_MAX_THREADS);
		return -1;
	}
	c = calloc(1, sizeof *c);
	if (!c) {
		snprintf(err, errlen, "avro codec: out of memory");
		return -1;
	}
	c->codec = codec;
	sl_buf_init(&c->scratch, 0);
	if (cmp_init(&c->cmp, codec, level, err, errlen) < 0) {
		free(c);
		return -1;
	}
	/* codec null has nothing to compress: its blocks are written inline. */
	if (codec != SL_CODEC_NULL && threads > 0 && workers_start(c, threads, level, err, errlen) < 0) {
		sl_ocf_codec_free(c);
		return -1;
	}
	*out = c;
	return 0;
}

void sl_ocf_codec_free(struct sl_ocf_codec *c)
{
	if (!c)
		return;
	workers_free(c);
	cmp_free(&c->cmp);
	sl_buf_free(&c->scratch);
	free(c);
}

int sl_ocf_codec_threads(const struct sl_ocf_codec *c)
{
	return c->workers ? c->nworkers : 0;
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

/* Writes any pending header bytes, a block's count and size, its clen bytes
 * of (compressed) data and the sync marker with one writev, without copying
 * the data.  Returns 0, or -1 with a message in err. */
static int emit_block(struct sl_ocf_writer *w, uint64_t count, const void *cdata, size_t clen,
		      char *err, size_t errlen)
{
	sl_avro_put_long(&w->out, (int64_t)count);
	sl_avro_put_long(&w->out, (int64_t)clen);
	if (sl_buf_failed(&w->out)) {
		snprintf(err, errlen, "avro file \"%s\": out of memory", w->path);
		return -1;
	}
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
	return 0;
}

/* A failure kept in w by a job: into err. */
static int failed(struct sl_ocf_writer *w, char *err, size_t errlen)
{
	snprintf(err, errlen, "%s", w->err);
	return -1;
}

/* Writes out the head slot of the ring if it is done; with wait, waits for
 * it first.  A failure goes into the slot's writer.  Returns true if a slot
 * was taken off the ring. */
static bool reap(struct sl_ocf_codec *c, bool wait)
{
	struct ocf_job *j;
	struct sl_ocf_writer *w;
	bool done;

	if (c->inflight == 0)
		return false;
	j = &c->jobs[c->head];
	pthread_mutex_lock(&c->mu);
	if (wait && j->state != JOB_DONE && c->idle > 0 && c->queued > 0)
		pthread_cond_broadcast(&c->work);  /* queued below OCF_WAKE_QUEUED, and waited for now */
	while (wait && j->state != JOB_DONE) {
		c->owner_waiting = true;
		pthread_cond_wait(&c->done, &c->mu);
		c->owner_waiting = false;
	}
	done = j->state == JOB_DONE;
	pthread_mutex_unlock(&c->mu);
	if (!done)
		return false;
	/* The worker is done with j: it is the owner's until queued again. */
	if ((w = j->w) != NULL) {
		w->jobs--;
		w->job_bytes -= j->in.len;
		/* Once one block of a file failed, the file is lost: its later
		 * blocks are dropped. */
		if (!w->failed && j->failed) {
			snprintf(w->err, sizeof w->err, "avro file \"%s\": %s", w->path, j->err);
			w->failed = true;
		} else if (!w->failed &&
			   emit_block(w, j->count, j->out.data, j->clen, w->err, sizeof w->err) < 0) {
			w->failed = true;
		}
	}
	j->w = NULL;
	j->state = JOB_FREE;
	if (j->in.alloc > j->release)
		sl_buf_free(&j->in);
	if (j->out.alloc > j->release)
		sl_buf_free(&j->out);
	c->head = (c->head + 1) % c->njobs;
	c->inflight--;
	return true;
}

/* Hands w's block to a free slot of the ring (waiting for the head when none
 * is free), after writing out the slots that are done.  Returns 0, or -1
 * with a message in err when one of w's earlier blocks failed. */
static int submit(struct sl_ocf_writer *w, char *err, size_t errlen)
{
	struct sl_ocf_codec *c = w->codec;
	struct ocf_job *j;
	struct sl_buf tmp;

	while (reap(c, false))
		;
	while (c->inflight == c->njobs)
		reap(c, true);
	if (w->failed)
		return failed(w, err, errlen);
	j = &c->jobs[(c->head + c->inflight) % c->njobs];
	/* The slot's (empty) buffer becomes the writer's next block buffer. */
	tmp = j->in;
	j->in = w->block;
	w->block = tmp;
	sl_buf_reset(&w->block);
	j->count = w->block_count;
	j->release = 4 * w->block_target;
	j->w = w;
	j->failed = false;
	w->jobs++;
	w->job_bytes += j->in.len;
	w->block_count = 0;
	c->inflight++;
	pthread_mutex_lock(&c->mu);
	j->state = JOB_QUEUED;
	c->queued++;
	if (c->idle > 0 && c->queued >= OCF_WAKE_QUEUED)
		pthread_cond_signal(&c->work);
	pthread_mutex_unlock(&c->mu);
	return 0;
}

/* Compresses the block on this thread into the codec's scratch buffer (or
 * not, for codec null) and writes it out. */
static int write_block_inline(struct sl_ocf_writer *w, char *err, size_t errlen)
{
	struct sl_ocf_codec *c = w->codec;
	const void *cdata = w->block.data;
	size_t clen = w->block.len;
	char msg[160];

	if (c->codec != SL_CODEC_NULL) {
		if (compress_block(c->codec, &c->cmp, w->block.data, w->block.len, &c->scratch, &clen,
				   msg, sizeof msg) < 0) {
			snprintf(err, errlen, "avro file \"%s\": %s", w->path, msg);
			return -1;
		}
		cdata = c->scratch.data;
	}
	if (emit_block(w, w->block_count, cdata, clen, err, errlen) < 0)
		return -1;
	w->block_count = 0;
	sl_buf_reset(&w->block);
	/* Give back memory that one oversized record made the buffers grab. */
	if (w->block.alloc > 4 * w->block_target)
		sl_buf_free(&w->block);
	if (c->scratch.alloc > 4 * w->block_target)
		sl_buf_free(&c->scratch);
	return 0;
}

/* Writes the block being filled: compressed by a worker when the codec has
 * workers, else here.  Does nothing when it holds no records.  Returns 0, or
 * -1 with a message in err. */
static int write_block(struct sl_ocf_writer *w, char *err, size_t errlen)
{
	if (w->failed)
		return failed(w, err, errlen);
	if (w->block_count == 0)
		return 0;
	if (sl_buf_failed(&w->block)) {
		snprintf(err, errlen, "avro file \"%s\": block buffer out of memory", w->path);
		return -1;
	}
	if (w->codec->workers)
		return submit(w, err, errlen);
	return write_block_inline(w, err, errlen);
}

int sl_ocf_record_done(struct sl_ocf_writer *w, char *err, size_t errlen)
{
	if (w->failed)
		return failed(w, err, errlen);
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
	return w->written + w->out.len + w->job_bytes + w->block.len;
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

	/* The last block, then everything of w still in flight, then any
	 * header bytes not written yet (a file without records). */
	if (write_block(w, err, errlen) < 0)
		rc = -1;
	while (w->jobs > 0)
		reap(w->codec, true);
	if (rc == 0 && w->failed)
		rc = failed(w, err, errlen);
	if (rc == 0)
		rc = flush_out(w, err, errlen);
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
	struct sl_ocf_codec *c;

	if (!w)
		return;
	/* Its slots in flight are dropped when they come to the head. */
	c = w->codec;
	for (unsigned i = 0; w->jobs > 0 && i < c->inflight; i++) {
		struct ocf_job *j = &c->jobs[(c->head + i) % c->njobs];
		if (j->w == w) {
			j->w = NULL;
			w->jobs--;
		}
	}
	if (w->fd >= 0)
		close(w->fd);
	free_writer(w);
}

/* ---------------------------------------------------------------------- */
/* Reading a container file back                                          */

/* Reads one zigzag varint long from f.  0, or -1 at the end or when bad. */
static int read_long(FILE *f, int64_t *out)
{
	uint64_t v = 0;

	for (int shift = 0; shift < 64; shift += 7) {
		int c = getc(f);
		if (c == EOF)
			return -1;
		v |= (uint64_t)(c & 0x7f) << shift;
		if (!(c & 0x80)) {
			*out = (int64_t)(v >> 1) ^ -(int64_t)(v & 1);
			return 0;
		}
	}
	return -1;
}

/* The first piece read_n reads; later ones are as large as what it read. */
#define READ_STEP ((size_t)64 * 1024)

/* Appends n bytes of f to b, then a NUL (not counted).  The buffer grows
 * with what was read, so a damaged length (up to SL_OCF_MAX_BLOCK) asks for
 * no more memory than about twice what the file holds.  Returns 0, or -1
 * when the file ends first or out of memory (sl_buf_failed(b)). */
static int read_n(FILE *f, struct sl_buf *b, size_t n)
{
	do {
		size_t step = b->len > READ_STEP ? b->len : READ_STEP;
		if (step > n)
			step = n;
		if (sl_buf_reserve(b, step) < 0 || (step && fread(b->data + b->len, 1, step, f) != step))
			return -1;
		b->len += step;
		n -= step;
	} while (n > 0);
	b->data[b->len] = '\0';
	return 0;
}

/* Reads a length-prefixed byte string of at most max bytes into b (reset first). */
static int read_bytes(FILE *f, struct sl_buf *b, int64_t max)
{
	int64_t n;

	sl_buf_reset(b);
	if (read_long(f, &n) < 0 || n < 0 || n > max)
		return -1;
	return read_n(f, b, (size_t)n);
}

struct sl_ocf_reader {
	FILE *f;
	char *path;
	enum sl_codec codec;
	unsigned char sync[16];
	struct sl_buf schema;   /* avro.schema, as the header holds it */
	struct sl_buf raw;      /* the block as stored */
	struct sl_buf dec;      /* the block decompressed */
	struct libdeflate_decompressor *inflater;
	ZSTD_DCtx *zstd;
	uint64_t blocks;
};

/* Codec names as avro.codec spells them; the rest are not read. */
static int codec_of(const struct sl_buf *name, enum sl_codec *out)
{
	static const enum sl_codec all[] = { SL_CODEC_NULL, SL_CODEC_DEFLATE, SL_CODEC_SNAPPY, SL_CODEC_ZSTANDARD };

	for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
		if (!strcmp(name->data ? name->data : "", codec_name(all[i]))) {
			*out = all[i];
			return 0;
		}
	}
	return -1;
}

/* Reads the header: the metadata map and the sync marker. */
static int read_header(struct sl_ocf_reader *r, char *err, size_t errlen)
{
	unsigned char magic[4];
	struct sl_buf k, v;
	bool have_schema = false;
	int rc = -1;

	sl_buf_init(&k, 0);
	sl_buf_init(&v, 0);
	r->codec = SL_CODEC_NULL;  /* no avro.codec means null */
	if (fread(magic, 1, 4, r->f) != 4 || memcmp(magic, "Obj\x01", 4) != 0)
		goto bad;
	for (;;) {
		int64_t count, size;
		if (read_long(r->f, &count) < 0)
			goto bad;
		if (count == 0)
			break;
		if (count == INT64_MIN)
			goto bad;  /* its negation does not exist */
		if (count < 0) {
			count = -count;
			if (read_long(r->f, &size) < 0)
				goto bad;
		}
		for (int64_t i = 0; i < count; i++) {
			if (read_bytes(r->f, &k, 1 << 20) < 0 || read_bytes(r->f, &v, (int64_t)1 << 30) < 0)
				goto bad;
			if (!strcmp(k.data, "avro.schema")) {
				sl_buf_reset(&r->schema);
				sl_buf_append(&r->schema, v.data, v.len);
				have_schema = true;
			} else if (!strcmp(k.data, "avro.codec") && codec_of(&v, &r->codec) < 0) {
				snprintf(err, errlen, "\"%s\": its codec \"%.40s\" cannot be read (null, deflate, "
					 "snappy and zstandard can)", r->path, v.data ? v.data : "");
				goto out;
			}
		}
	}
	if (fread(r->sync, 1, 16, r->f) != 16)
		goto bad;
	if (!have_schema) {
		snprintf(err, errlen, "\"%s\": its header has no avro.schema", r->path);
		goto out;
	}
	if (sl_buf_failed(&r->schema)) {
		snprintf(err, errlen, "\"%s\": out of memory", r->path);
		goto out;
	}
	rc = 0;
	goto out;
bad:
	snprintf(err, errlen, "\"%s\": not an Avro object container file, or its header is damaged", r->path);
out:
	sl_buf_free(&k);
	sl_buf_free(&v);
	return rc;
}

int sl_ocf_reader_open(struct sl_ocf_reader **out, const char *path, char *err, size_t errlen)
{
	FILE *f = fopen(path, "rb");

	if (!f) {
		*out = NULL;
		snprintf(err, errlen, "\"%s\": %s", path, sl_strerror(errno));
		return -1;
	}
	return sl_ocf_reader_open_stream(out, f, path, err, errlen);
}

int sl_ocf_reader_open_stream(struct sl_ocf_reader **out, FILE *f, const char *name, char *err, size_t errlen)
{
	struct sl_ocf_reader *r = calloc(1, sizeof *r);

	*out = NULL;
	if (!r || !(r->path = strdup(name))) {
		free(r);
		fclose(f);
		snprintf(err, errlen, "\"%s\": out of memory", name);
		return -1;
	}
	r->f = f;
	sl_buf_init(&r->schema, 0);
	sl_buf_init(&r->raw, SL_OCF_MAX_BLOCK);
	sl_buf_init(&r->dec, SL_OCF_MAX_BLOCK);
	if (read_header(r, err, errlen) < 0) {
		sl_ocf_reader_close(r);
		return -1;
	}
	*out = r;
	return 0;
}

const struct sl_buf *sl_ocf_reader_schema(const struct sl_ocf_reader *r)
{
	return &r->schema;
}

enum sl_codec sl_ocf_reader_codec(const struct sl_ocf_reader *r)
{
	return r->codec;
}

void sl_ocf_reader_close(struct sl_ocf_reader *r)
{
	if (!r)
		return;
	if (r->f)
		fclose(r->f);
	if (r->inflater)
		libdeflate_free_decompressor(r->inflater);
	ZSTD_freeDCtx(r->zstd);
	sl_buf_free(&r->schema);
	sl_buf_free(&r->raw);
	sl_buf_free(&r->dec);
	free(r->path);
	free(r);
}

/* Inflates raw deflate data of unknown size into r->dec, doubling the room
 * until it fits.  Returns 0, or -1 with a message in err (not naming the file). */
static int inflate_block(struct sl_ocf_reader *r, char *err, size_t errlen)
{
	size_t room = r->raw.len * 4 > SL_OCF_BLOCK_TARGET ? r->raw.len * 4 : SL_OCF_BLOCK_TARGET;

	if (!r->inflater && !(r->inflater = libdeflate_alloc_decompressor()))
		goto oom;
	for (;;) {
		size_t got;
		enum libdeflate_result res;
		if (room > SL_OCF_MAX_BLOCK)
			room = SL_OCF_MAX_BLOCK;
		if (sl_buf_reserve(&r->dec, room) < 0)
			goto oom;
		res = libdeflate_deflate_decompress(r->inflater, r->raw.data, r->raw.len, r->dec.data, room, &got);
		if (res == LIBDEFLATE_SUCCESS) {
			r->dec.len = got;
			return 0;
		}
		if (res != LIBDEFLATE_INSUFFICIENT_SPACE || room == SL_OCF_MAX_BLOCK) {
			snprintf(err, errlen, "bad deflate data");
			return -1;
		}
		room *= 2;
	}
oom:
	snprintf(err, errlen, "out of memory");
	return -1;
}

/* Decompresses the zstandard frames of r->raw into r->dec (sized by the
 * first frame's content size when it records one).  Returns 0, or -1 with a
 * message in err. */
static int unzstd_block(struct sl_ocf_reader *r, char *err, size_t errlen)
{
	ZSTD_inBuffer in = { r->raw.data, r->raw.len, 0 };
	unsigned long long want = ZSTD_getFrameContentSize(r->raw.data, r->raw.len);

	if (!r->zstd && !(r->zstd = ZSTD_createDCtx()))
		goto oom;
	ZSTD_DCtx_reset(r->zstd, ZSTD_reset_session_only);
	if (want == ZSTD_CONTENTSIZE_ERROR || want == ZSTD_CONTENTSIZE_UNKNOWN || want > SL_OCF_MAX_BLOCK)
		want = SL_OCF_BLOCK_TARGET;
	if (sl_buf_reserve(&r->dec, (size_t)want + 1) < 0)
		goto oom;
	/* Until the input is used up and its last frame is complete; a frame
	 * may hold output back until there is room for it. */
	for (;;) {
		ZSTD_outBuffer o = { r->dec.data, r->dec.alloc - 1, r->dec.len };  /* alloc > len */
		size_t left = ZSTD_decompressStream(r->zstd, &o, &in);
		if (ZSTD_isError(left)) {
			snprintf(err, errlen, "bad zstandard data: %s", ZSTD_getErrorName(left));
			return -1;
		}
		r->dec.len = o.pos;
		if (left == 0 && in.pos == in.size)
			return 0;
		if (o.pos < o.size && in.pos == in.size) {
			snprintf(err, errlen, "bad zstandard data: the frame is cut short");
			return -1;
		}
		if (o.pos == o.size && sl_buf_reserve(&r->dec, r->dec.len) < 0)
			goto oom;
	}
oom:
	snprintf(err, errlen, "out of memory (or a block of more than %zu bytes)", SL_OCF_MAX_BLOCK);
	return -1;
}

/* Uncompresses a snappy block and checks the CRC-32 that follows it. */
static int unsnappy_block(struct sl_ocf_reader *r, char *err, size_t errlen)
{
	size_t n;

	if (r->raw.len < 4 || snappy_uncompressed_length(r->raw.data, r->raw.len - 4, &n) != SNAPPY_OK ||
	    n > SL_OCF_MAX_BLOCK) {
		snprintf(err, errlen, "bad snappy data");
		return -1;
	}
	if (sl_buf_reserve(&r->dec, n + 1) < 0) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	if (snappy_uncompress(r->raw.data, r->raw.len - 4, r->dec.data, &n) != SNAPPY_OK) {
		snprintf(err, errlen, "bad snappy data");
		return -1;
	}
	r->dec.len = n;
	if (libdeflate_crc32(0, r->dec.data, n) != sl_get_u32((unsigned char *)r->raw.data + r->raw.len - 4)) {
		snprintf(err, errlen, "the snappy block's CRC-32 does not match its data");
		return -1;
	}
	return 0;
}

int sl_ocf_reader_block(struct sl_ocf_reader *r, const void **data, size_t *len, uint64_t *count, char *err,
			size_t errlen)
{
	int64_t n, size;
	unsigned char sync[16];
	char why[160];
	int c = getc(r->f), rc;

	if (c == EOF) {
		if (ferror(r->f))
			goto io;
		return 0;
	}
	ungetc(c, r->f);
	if (read_long(r->f, &n) < 0 || read_long(r->f, &size) < 0 || n < 0 || size < 0 ||
	    (uint64_t)size > SL_OCF_MAX_BLOCK)
		goto damaged;
	sl_buf_reset(&r->raw);
	if (read_n(r->f, &r->raw, (size_t)size) < 0) {
		if (!sl_buf_failed(&r->raw))
			goto damaged;
		snprintf(err, errlen, "\"%s\": out of memory", r->path);
		return -1;
	}
	if (fread(sync, 1, 16, r->f) != 16 || memcmp(sync, r->sync, 16) != 0)
		goto damaged;
	sl_buf_reset(&r->dec);
	switch (r->codec) {
	case SL_CODEC_DEFLATE: rc = inflate_block(r, why, sizeof why); break;
	case SL_CODEC_SNAPPY: rc = unsnappy_block(r, why, sizeof why); break;
	case SL_CODEC_ZSTANDARD: rc = unzstd_block(r, why, sizeof why); break;
	case SL_CODEC_NULL:
	default: rc = 0; break;
	}
	if (rc < 0) {
		snprintf(err, errlen, "\"%s\": block %" PRIu64 ": %s", r->path, r->blocks + 1, why);
		return -1;
	}
	*data = r->codec == SL_CODEC_NULL ? r->raw.data : r->dec.data;
	*len = r->codec == SL_CODEC_NULL ? r->raw.len : r->dec.len;
	*count = (uint64_t)n;
	r->blocks++;
	return 1;
damaged:
	if (ferror(r->f))
		goto io;
	snprintf(err, errlen, "\"%s\": block %" PRIu64 " is truncated or damaged", r->path, r->blocks + 1);
	return -1;
io:
	snprintf(err, errlen, "could not read \"%s\": %s", r->path, sl_strerror(errno));
	return -1;
}

int sl_ocf_read_schema(const char *path, struct sl_buf *out, char *err, size_t errlen)
{
	struct sl_ocf_reader *r;
	int rc = 0;

	if (sl_ocf_reader_open(&r, path, err, errlen) < 0)
		return -1;
	sl_buf_reset(out);
	if (sl_buf_append(out, r->schema.data, r->schema.len) < 0) {
		snprintf(err, errlen, "\"%s\": out of memory", path);
		rc = -1;
	}
	sl_ocf_reader_close(r);
	return rc;
}
