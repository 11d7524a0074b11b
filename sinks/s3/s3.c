/*
 * sinks/s3/s3.c: the s3 sink: the S3 store (sinks/avro_tree/store.h) under
 * the Avro file tree, its configuration keys, check() and verify().  See
 * s3.h for how a file travels from the spool to a visible object.
 *
 * A store file is an unlinked spool file plus the SHA-256 of each part,
 * computed as the bytes arrive (parts are part_size bytes, the last one
 * less), so no byte is read twice before it is sent.  A file larger than
 * part_size becomes a multipart upload when it is finished; its spool is
 * closed as soon as the last part is sent.
 */
#include "sinks/s3/s3.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <nettle/sha2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/buf.h"
#include "common/log.h"
#include "common/util.h"
#include "sinks/avro_tree/store.h"
#include "sinks/avro/avro_schema.h"
#include "sinks/avro_tree/tree.h"
#include "sinks/s3/s3_client.h"

#define DEFAULT_PART_SIZE ((uint64_t)16 << 20)
#define MAX_SMALL_OBJECT ((size_t)64 << 20)   /* manifests and schema files */
#define OPEN_ATTEMPTS 4                       /* about 7 s of retries before open() gives up */
#define CLEANUP_ATTEMPTS 2                    /* aborting an upload on the way out */

struct s3_store {
	struct sl_s3 *s3;
	char *prefix;                /* "" or "a/b/" */
	char *root;                  /* "<bucket>/<prefix>" */
	char *spool_dir;
	uint64_t part_size;
	char *desc;
};

struct sl_store_file {
	struct s3_store *st;
	int fd;                      /* the spool, or -1 once every part is sent */
	uint64_t size;               /* bytes written */
	struct sha256_ctx part;      /* the hash of the part being filled */
	char (*hashes)[65];          /* hex SHA-256 of each finished part */
	size_t nhashes, hashes_alloc;
	char *key;                   /* full key of the multipart upload, or NULL */
	char *upload_id;             /* its id, or NULL */
	char **etags;                /* one per part sent */
	int nparts;
	unsigned char *mem;          /* a small finished file's bytes (its spool closed), or NULL */
};

/* A finished file at most this large waits for its flush in memory rather
 * than in its spool file: a transaction over many tables then holds no file
 * descriptor per table until the flush. */
#define SPOOL_MEM_MAX (64 * 1024)

static uint32_t rand32(void)
{
	uint32_t r;

	if (getrandom(&r, sizeof r, 0) != (ssize_t)sizeof r)
		r = (uint32_t)sl_mono_ms() * 2654435761u ^ (uint32_t)getpid();
	return r;
}

/* prefix + key into a fresh string, or NULL. */
static char *full_key(const struct s3_store *st, const char *key)
{
	struct sl_buf b;

	sl_buf_init(&b, 0);
	sl_buf_printf(&b, "%s%s", st->prefix, key);
	return sl_buf_detach(&b);
}

/* An unlinked file in dir, open for reading and writing; -1 with errno. */
static int spool_open(const char *dir)
{
	char path[4096];
	int fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);

	if (fd >= 0 || (errno != EOPNOTSUPP && errno != EISDIR && errno != EINVAL))
		return fd;
	/* A file system without O_TMPFILE: make one and unlink it at once. */
	if (snprintf(path, sizeof path, "%s/.sluice-spool-XXXXXX", dir) >= (int)sizeof path) {
		errno = ENAMETOOLONG;
		return -1;
	}
	fd = mkostemp(path, O_CLOEXEC);
	if (fd >= 0)
		unlink(path);
	return fd;
}

static int add_hash(struct sl_store_file *f)
{
	uint8_t d[SHA256_DIGEST_SIZE];

	if (f->nhashes == f->hashes_alloc) {
		size_t na = f->hashes_alloc ? f->hashes_alloc * 2 : 8;
		char (*nh)[65] = realloc(f->hashes, na * sizeof *nh);
		if (!nh)
			return -1;
		f->hashes = nh;
		f->hashes_alloc = na;
	}
	sha256_digest(&f->part, sizeof d, d);  /* also starts the next part */
	for (int i = 0; i < SHA256_DIGEST_SIZE; i++)
		snprintf(f->hashes[f->nhashes] + 2 * i, 3, "%02x", d[i]);
	f->nhashes++;
	return 0;
}

static int s3_file_new(void *ctx, const char *dir, const char *first_csn, struct sl_store_file **out,
		       char *err, size_t errlen)
{
	struct s3_store *st = ctx;
	struct sl_store_file *f = calloc(1, sizeof *f);

	(void)first_csn;
	*out = NULL;
	if (!f) {
		snprintf(err, errlen, "s3 sink: out of memory");
		return -1;
	}
	f->st = st;
	f->fd = spool_open(st->spool_dir);
	if (f->fd < 0) {
		int e = errno;
		struct rlimit rl;
		snprintf(err, errlen, "could not make a spool file in \"%s\" for %s%s: %s", st->spool_dir, st->prefix,
			 dir, sl_strerror(e));
		/* A spool file per table written since the last flush: name the
		 * limit that a transaction over that many tables met. */
		if (e == EMFILE && getrlimit(RLIMIT_NOFILE, &rl) == 0 && strlen(err) + 1 < errlen)
			snprintf(err + strlen(err), errlen - strlen(err), " (the limit on open files is %llu; a "
				 "transaction over more tables needs a higher one: LimitNOFILE in the systemd unit, "
				 "or ulimit -n)", (unsigned long long)rl.rlim_cur);
		free(f);
		return -1;
	}
	sha256_init(&f->part);
	*out = f;
	return 0;
}

static int s3_file_write(void *file, const struct iovec *iov, int iovcnt, char *err, size_t errlen)
{
	struct sl_store_file *f = file;
	uint64_t ps = f->st->part_size;

	for (int i = 0; i < iovcnt; i++) {
		const char *p = iov[i].iov_base;
		size_t n = iov[i].iov_len;

		while (n > 0) {
			ssize_t k = write(f->fd, p, n);
			size_t done, h;

			if (k < 0 && errno == EINTR)
				continue;
			if (k < 0) {
				snprintf(err, errlen, "could not write the spool file in \"%s\": %s", f->st->spool_dir,
					 sl_strerror(errno));
				return -1;
			}
			/* Hash what was written, part by part. */
			for (done = 0; done < (size_t)k; done += h) {
				uint64_t room = ps - f->size % ps;
				h = (size_t)k - done < room ? (size_t)k - done : (size_t)room;
				sha256_update(&f->part, h, (const uint8_t *)p + done);
				f->size += h;
				if (f->size % ps == 0 && add_hash(f) < 0) {
					snprintf(err, errlen, "s3 sink: out of memory");
					return -1;
				}
			}
			p += k;
			n -= (size_t)k;
		}
	}
	return 0;
}

/* Aborts f's multipart upload, if any (a few attempts: the next open()
 * aborts what is left anyway). */
static void abort_upload(struct sl_store_file *f)
{
	char err[512];

	if (!f->upload_id)
		return;
	sl_s3_set_max_attempts(f->st->s3, CLEANUP_ATTEMPTS);
	if (sl_s3_mpu_abort(f->st->s3, f->key, f->upload_id, err, sizeof err) < 0)
		sl_warn("%s (the next start aborts it)", err);
	sl_s3_set_max_attempts(f->st->s3, 0);
	free(f->upload_id);
	f->upload_id = NULL;
}

static void free_file(struct sl_store_file *f)
{
	if (f->fd >= 0)
		close(f->fd);
	for (int i = 0; i < f->nparts; i++)
		free(f->etags[i]);
	free(f->etags);
	free(f->hashes);
	free(f->key);
	free(f->upload_id);
	free(f->mem);
	free(f);
}

/* Moves a small finished file from its spool into memory (see
 * SPOOL_MEM_MAX); a larger one keeps its spool. */
static int keep_small(struct sl_store_file *f, char *err, size_t errlen)
{
	uint64_t got = 0;

	if (f->size > SPOOL_MEM_MAX)
		return 0;
	if (!(f->mem = malloc(f->size ? f->size : 1))) {
		snprintf(err, errlen, "s3 sink: out of memory");
		return -1;
	}
	while (got < f->size) {
		ssize_t k = pread(f->fd, f->mem + got, f->size - got, (off_t)got);
		if (k <= 0) {
			snprintf(err, errlen, "could not read back a spool file: %s", k < 0 ? sl_strerror(errno)
				 : "it is shorter than what was written");
			free(f->mem);
			f->mem = NULL;
			return -1;
		}
		got += (uint64_t)k;
	}
	close(f->fd);
	f->fd = -1;
	return 0;
}

/* The file is complete: the hash of its last part; a file larger than one
 * part goes out as a multipart upload under key now, all but its completion. */
static int s3_file_finish(void *ctx, struct sl_store_file *f, const char *key, char *err, size_t errlen)
{
	struct s3_store *st = ctx;
	uint64_t ps = st->part_size;
	int nparts, rc;

	if ((f->size % ps != 0 || f->size == 0) && add_hash(f) < 0) {
		snprintf(err, errlen, "s3 sink: out of memory");
		return -1;
	}
	if (f->size <= ps)
		return keep_small(f, err, errlen);  /* one PutObject, at publish */
	nparts = (int)((f->size + ps - 1) / ps);
	if (nparts > SL_S3_MAX_PARTS) {
		snprintf(err, errlen, "%s%s: %" PRIu64 " bytes make %d parts of part_size, more than S3's %d: raise "
			 "part_size or lower max_file_bytes", st->prefix, key, f->size, nparts, SL_S3_MAX_PARTS);
		return -1;
	}
	if (!(f->key = full_key(st, key)) || !(f->etags = calloc((size_t)nparts, sizeof *f->etags))) {
		snprintf(err, errlen, "s3 sink: out of memory");
		return -1;
	}
	if ((rc = sl_s3_mpu_create(st->s3, f->key, &f->upload_id, err, errlen)) < 0)
		return rc;
	for (int i = 0; i < nparts; i++) {
		uint64_t off = (uint64_t)i * ps, len = f->size - off < ps ? f->size - off : ps;
		rc = sl_s3_mpu_part(st->s3, f->key, f->upload_id, i + 1, f->fd, (off_t)off, len, f->hashes[i],
				    &f->etags[i], err, errlen);
		if (rc < 0)
			return rc;
		f->nparts = i + 1;
	}
	close(f->fd);
	f->fd = -1;
	return 0;
}

static int s3_file_publish(void *ctx, struct sl_store_file *f, const char *key, char *err, size_t errlen)
{
	struct s3_store *st = ctx;
	char *k = full_key(st, key);
	int rc;

	if (!k) {
		snprintf(err, errlen, "s3 sink: out of memory");
		return -1;
	}
	if (f->upload_id && strcmp(k, f->key) != 0) {
		/* Uploaded under another name: cannot be (S3 never says "exists"). */
		snprintf(err, errlen, "%s: %s was uploaded as %s", st->desc, k, f->key);
		free(k);
		return -1;
	}
	if (f->upload_id)
		rc = sl_s3_mpu_complete(st->s3, k, f->upload_id, f->etags, f->nparts, err, errlen);
	else if (f->mem)
		rc = sl_s3_put(st->s3, k, f->mem, (size_t)f->size, "avro/binary", err, errlen);
	else
		rc = sl_s3_put_fd(st->s3, k, f->fd, 0, f->size, f->hashes[0], err, errlen);
	free(k);
	if (rc < 0)
		return rc;
	free(f->upload_id);
	f->upload_id = NULL;
	free_file(f);
	return 0;
}

static void s3_file_discard(void *ctx, struct sl_store_file *f)
{
	(void)ctx;
	if (!f)
		return;
	abort_upload(f);
	free_file(f);
}

static int s3_put(void *ctx, const char *key, const void *data, size_t len, char *err, size_t errlen)
{
	struct s3_store *st = ctx;
	char *k = full_key(st, key);
	int rc;

	if (!k) {
		snprintf(err, errlen, "s3 sink: out of memory");
		return -1;
	}
	rc = sl_s3_put(st->s3, k, data, len, "application/json", err, errlen);
	free(k);
	return rc;
}

/* put, only when key does not exist (If-None-Match: *).  A 412 whose object
 * holds exactly data is this put's own (an answer lost and the request sent
 * again), so it counts as written. */
static int s3_put_new(void *ctx, const char *key, const void *data, size_t len, char *err, size_t errlen)
{
	struct s3_store *st = ctx;
	char *k = full_key(st, key);
	struct sl_buf have;
	int rc;

	if (!k) {
		snprintf(err, errlen, "s3 sink: out of memory");
		return -1;
	}
	sl_buf_init(&have, 0);
	rc = sl_s3_put_new(st->s3, k, data, len, "application/json", err, errlen);
	if (rc == SL_S3_EXISTS) {
		rc = sl_s3_get(st->s3, k, &have, MAX_SMALL_OBJECT, err, errlen);
		if (rc == 0)
			rc = have.len == len && !memcmp(have.data, data, len) ? 0 : SL_STORE_EXISTS;
		else if (rc == SL_S3_NOT_FOUND)   /* removed since: taken all the same */
			rc = SL_STORE_EXISTS;
	}
	free(k);
	sl_buf_free(&have);
	return rc;
}

static int s3_get(void *ctx, const char *key, struct sl_buf *out, char *err, size_t errlen)
{
	struct s3_store *st = ctx;
	char *k = full_key(st, key);
	int rc;

	if (!k) {
		snprintf(err, errlen, "s3 sink: out of memory");
		return -1;
	}
	rc = sl_s3_get(st->s3, k, out, MAX_SMALL_OBJECT, err, errlen);
	free(k);
	return rc == SL_S3_NOT_FOUND ? SL_STORE_NOT_FOUND : rc;
}

struct list_arg {
	size_t strip;                /* strlen(prefix) */
	sl_store_list_fn fn;
	void *arg;
};

static int list_one(void *arg, const char *key, uint64_t size, int64_t mtime_ms)
{
	struct list_arg *la = arg;

	if (strlen(key) <= la->strip)
		return 0;
	return la->fn(la->arg, key + la->strip, size, mtime_ms);
}

static int s3_list(void *ctx, const char *prefix, sl_store_list_fn fn, void *arg, char *err, size_t errlen)
{
	struct s3_store *st = ctx;
	struct list_arg la = { strlen(st->prefix), fn, arg };
	struct sl_buf p;
	int rc;

	sl_buf_init(&p, 0);
	sl_buf_printf(&p, "%s%s/", st->prefix, prefix);
	if (sl_buf_failed(&p)) {
		snprintf(err, errlen, "s3 sink: out of memory");
		return -1;
	}
	err[0] = '\0';
	rc = sl_s3_list(st->s3, p.data, list_one, &la, err, errlen);
	if (rc < 0 && !err[0])
		snprintf(err, errlen, "%s: listing %s stopped", st->desc, p.data);
	sl_buf_free(&p);
	return rc;
}

static int s3_remove(void *ctx, const char *key, char *err, size_t errlen)
{
	struct s3_store *st = ctx;
	char *k = full_key(st, key);
	int rc;

	if (!k) {
		snprintf(err, errlen, "s3 sink: out of memory");
		return -1;
	}
	rc = sl_s3_delete(st->s3, k, err, errlen);
	free(k);
	return rc;
}

/* Downloads key into a file in the spool folder, for sluice verify. */
static int s3_fetch(void *ctx, const char *key, char **path, bool *temporary, char *err, size_t errlen)
{
	struct s3_store *st = ctx;
	struct sl_buf p;
	char *k = full_key(st, key);
	int fd, rc;

	*path = NULL;
	*temporary = true;
	sl_buf_init(&p, 0);
	sl_buf_printf(&p, "%s/.sluice-verify-XXXXXX", st->spool_dir);
	if (!k || sl_buf_failed(&p)) {
		free(k);
		sl_buf_free(&p);
		snprintf(err, errlen, "s3 sink: out of memory");
		return -1;
	}
	fd = mkostemp(p.data, O_CLOEXEC);
	if (fd < 0) {
		snprintf(err, errlen, "could not make a file in \"%s\" to read %s into: %s", st->spool_dir, k,
			 sl_strerror(errno));
		free(k);
		sl_buf_free(&p);
		return -1;
	}
	rc = sl_s3_get_to_fd(st->s3, k, fd, err, errlen);
	if (close(fd) < 0 && rc == 0) {
		snprintf(err, errlen, "could not write \"%s\": %s", p.data, sl_strerror(errno));
		rc = -1;
	}
	free(k);
	if (rc != 0) {
		unlink(p.data);
		sl_buf_free(&p);
		return rc == SL_S3_NOT_FOUND ? SL_STORE_NOT_FOUND : rc;
	}
	*path = sl_buf_detach(&p);
	return 0;
}

static const char *s3_describe(void *ctx)
{
	return ((struct s3_store *)ctx)->desc;
}

static void s3_close(void *ctx)
{
	struct s3_store *st = ctx;

	if (!st)
		return;
	sl_s3_free(st->s3);
	free(st->prefix);
	free(st->root);
	free(st->spool_dir);
	free(st->desc);
	free(st);
}

static int s3_cleanup(void *st, const char *stream, char *err, size_t errlen);
static int s3_abort_uploads(void *st, const char *prefix, int64_t min_age_ms, int *aborted, char *err,
			    size_t errlen);

static const struct sl_store_ops s3_store_ops = {
	.file_new = s3_file_new,
	.file_write = s3_file_write,
	.file_finish = s3_file_finish,
	.file_publish = s3_file_publish,
	.file_discard = s3_file_discard,
	.put = s3_put,
	.put_new = s3_put_new,
	.get = s3_get,
	.list = s3_list,
	.remove = s3_remove,
	.fetch = s3_fetch,
	.cleanup = s3_cleanup,
	.abort_uploads = s3_abort_uploads,
	.describe = s3_describe,
	.close = s3_close,
};

/* Makes the S3 store for conf; max_attempts as for the client. */
static int s3_store_new(struct s3_store **out, const struct sl_s3_conf *c, const struct sl_sink_stream *ss,
			int max_attempts, char *err, size_t errlen)
{
	struct s3_store *st = calloc(1, sizeof *st);
	struct sl_s3_client_conf cc;
	const char *p = c->prefix ? c->prefix : "";
	size_t n;
	struct sl_buf b;

	*out = NULL;
	if (!st) {
		snprintf(err, errlen, "s3 sink: out of memory");
		return -1;
	}
	memset(&cc, 0, sizeof cc);
	cc.endpoint = c->endpoint;
	cc.bucket = c->bucket;
	cc.region = c->region ? c->region : "us-east-1";
	cc.path_style = c->path_style;
	cc.access_key_id = c->access_key_id;
	cc.secret_access_key = c->secret_access_key;
	cc.session_token = c->session_token;
	cc.ca_file = c->ca_file;
	cc.tls_verify = c->tls_verify;
	cc.max_attempts = max_attempts;
	cc.outage = ss->outage;
	if (sl_s3_new(&st->s3, &cc, err, errlen) < 0) {
		free(st);
		return -1;
	}
	while (*p == '/')
		p++;
	n = strlen(p);
	while (n > 0 && p[n - 1] == '/')
		n--;
	sl_buf_init(&b, 0);
	if (n)
		sl_buf_printf(&b, "%.*s/", (int)n, p);
	else
		sl_buf_append(&b, "", 0);
	st->prefix = sl_buf_detach(&b);
	sl_buf_printf(&b, "%s%s%s%s", sl_s3_describe(st->s3), n ? " (prefix \"" : "", n ? st->prefix : "",
		      n ? "\")" : "");
	st->desc = sl_buf_detach(&b);
	sl_buf_printf(&b, "%s/%s", c->bucket, st->prefix ? st->prefix : "");
	st->root = sl_buf_detach(&b);
	st->spool_dir = strdup(c->spool_dir ? c->spool_dir : ss->state_dir ? ss->state_dir : ".");
	st->part_size = c->part_size ? c->part_size : DEFAULT_PART_SIZE;
	if (!st->prefix || !st->desc || !st->root || !st->spool_dir) {
		snprintf(err, errlen, "s3 sink: out of memory");
		s3_close(st);
		return -1;
	}
	*out = st;
	return 0;
}

int sl_s3_store(struct sl_store *out, const struct sl_s3_conf *c, const struct sl_sink_stream *ss,
		int max_attempts, char *err, size_t errlen)
{
	struct s3_store *st;
	int rc = s3_store_new(&st, c, ss, max_attempts, err, errlen);

	if (rc < 0)
		return rc;
	out->ops = &s3_store_ops;
	out->ctx = st;
	return 0;
}

void sl_s3_store_set_attempts(struct sl_store *store, int max_attempts)
{
	sl_s3_set_max_attempts(((struct s3_store *)store->ctx)->s3, max_attempts);
}

const char *sl_s3_store_root(const struct sl_store *store)
{
	return ((struct s3_store *)store->ctx)->root;
}

/* ---------------------------------------------------------------------- */
/* The sink                                                               */

struct stale {
	struct s3_store *st;
	size_t plen;                 /* strlen of <prefix><key prefix>/ */
	int64_t before_ms;           /* uploads begun before this (INT64_MAX: all) */
	char **keys, **ids;
	size_t n, alloc;
	int young;                   /* uploads kept: begun since before_ms, or when unknown */
	bool oom;
};

static int note_upload(void *arg, const char *key, const char *upload_id, int64_t initiated_ms)
{
	struct stale *sa = arg;
	size_t len = strlen(key);

	/* Only uploads sluice begins: an Avro data file under the prefix. */
	if (len <= sa->plen || len < 5 || strcmp(key + len - 5, ".avro") != 0)
		return 0;
	if (sa->before_ms != INT64_MAX && (initiated_ms < 0 || initiated_ms >= sa->before_ms)) {
		sa->young++;
		return 0;
	}
	if (sa->n == sa->alloc) {
		size_t na = sa->alloc ? sa->alloc * 2 : 16;
		char **nk = realloc(sa->keys, na * sizeof *nk), **ni;
		if (!nk) {
			sa->oom = true;
			return -1;
		}
		sa->keys = nk;
		ni = realloc(sa->ids, na * sizeof *ni);
		if (!ni) {
			sa->oom = true;
			return -1;
		}
		sa->ids = ni;
		sa->alloc = na;
	}
	sa->keys[sa->n] = strdup(key);
	sa->ids[sa->n] = strdup(upload_id);
	sa->n++;
	if (!sa->keys[sa->n - 1] || !sa->ids[sa->n - 1]) {
		sa->oom = true;
		return -1;
	}
	return 0;
}

/* Aborts the multipart uploads of data files under <prefix><what>/ begun
 * min_age_ms or more ago (0: all): a crashed run left them; they were never
 * completed, so their rows were never acknowledged.  *aborted: how many. */
static int abort_stale(struct s3_store *st, const char *what, int64_t min_age_ms, int *aborted, char *err,
		       size_t errlen)
{
	struct stale sa = { .st = st, .before_ms = min_age_ms > 0 ? sl_now_us() / 1000 - min_age_ms : INT64_MAX };
	struct sl_buf p;
	int rc;

	*aborted = 0;
	sl_buf_init(&p, 0);
	sl_buf_printf(&p, "%s%s/", st->prefix, what);
	if (sl_buf_failed(&p)) {
		snprintf(err, errlen, "s3 sink: out of memory");
		return -1;
	}
	sa.plen = p.len;
	err[0] = '\0';
	rc = sl_s3_mpu_list(st->s3, p.data, note_upload, &sa, err, errlen);
	if (sa.oom)
		snprintf(err, errlen, "s3 sink: out of memory");
	if (rc == -1 && strstr(err, ": HTTP 501")) {
		/* A server without ListMultipartUploads: nothing to abort that we
		 * can find; its own expiry of incomplete uploads has to do. */
		sl_warn("%s; incomplete uploads a crash left under %s cannot be found and aborted: set the bucket's "
			"rule for incomplete multipart uploads", err, p.data);
		rc = 0;
	}
	for (size_t i = 0; rc == 0 && i < sa.n; i++) {
		rc = sl_s3_mpu_abort(st->s3, sa.keys[i], sa.ids[i], err, errlen);
		if (rc == 0)
			sl_debug("aborted the incomplete upload of \"%s\"", sa.keys[i]);
	}
	if (rc == 0 && sa.n > 0)
		sl_info("stream \"%.*s\": aborted %zu incomplete upload%s under %s in %s", (int)strcspn(what, "/"), what,
			sa.n, sa.n == 1 ? "" : "s", p.data, st->desc);
	if (rc == 0 && sa.young > 0)
		sl_debug("kept %d incomplete upload%s under %s begun less than %" PRId64 " ms ago (or at a time the "
			 "server does not say)", sa.young, sa.young == 1 ? "" : "s", p.data, min_age_ms);
	if (rc == 0)
		*aborted = (int)sa.n;
	for (size_t i = 0; i < sa.n; i++) {
		free(sa.keys[i]);
		free(sa.ids[i]);
	}
	free(sa.keys);
	free(sa.ids);
	sl_buf_free(&p);
	return rc;
}

/* The stream's incomplete uploads, all of them: the stream's lock and the
 * compaction lock make them a crashed run's (store op cleanup). */
static int s3_cleanup(void *st, const char *stream, char *err, size_t errlen)
{
	int n;

	return abort_stale(st, stream, 0, &n, err, errlen);
}

/* Store op abort_uploads. */
static int s3_abort_uploads(void *st, const char *prefix, int64_t min_age_ms, int *aborted, char *err,
			    size_t errlen)
{
	return abort_stale(st, prefix, min_age_ms, aborted, err, errlen);
}

static int s3_open(void **ctx, const void *conf, const struct sl_sink_stream *ss, char *err, size_t errlen)
{
	const struct sl_s3_conf *c = conf;
	struct sl_tree_conf tc;
	struct sl_store store;
	struct s3_store *st;
	struct sl_tree *tree;
	int rc;

	*ctx = NULL;
	if (!ss->name || !*ss->name || strchr(ss->name, '/')) {
		snprintf(err, errlen, "stream name \"%s\" cannot name a key prefix", ss->name ? ss->name : "");
		return -1;
	}
	/* A few attempts while opening (this runs before the source is read,
	 * and a stream that cannot start is retried from the checkpoint);
	 * uploads then retry as long as it takes. */
	if ((rc = s3_store_new(&st, c, ss, OPEN_ATTEMPTS, err, errlen)) < 0)
		return rc;
	store.ops = &s3_store_ops;
	store.ctx = st;
	memset(&tc, 0, sizeof tc);
	tc.codec = c->codec;
	tc.compression_level = c->compression_level;
	tc.compression_threads = c->compression_threads;
	tc.max_file_bytes = c->max_file_bytes;
	tc.max_file_seconds = c->max_file_seconds;
	tc.merge = ss->mode == SL_WRITE_MERGE;
	tc.compact_after_files = c->compact_after_files;
	tc.state_dir = ss->state_dir;
	if ((rc = sl_tree_open(&tree, store, &tc, ss->name, err, errlen)) < 0)
		return rc;
	sl_s3_set_max_attempts(st->s3, 0);
	*ctx = tree;
	return 0;
}

/* `sluice check`: proves the credentials and the bucket with a small write
 * and delete under <prefix><stream>/. */
static int s3_check(const void *conf, const struct sl_sink_stream *ss, FILE *out, char *err, size_t errlen)
{
	const struct sl_s3_conf *c = conf;
	const char *dest = ss->destination ? ss->destination : "";
	struct s3_store *st;
	struct sl_buf k, body;
	struct stat sb;
	const char *spool = c->spool_dir ? c->spool_dir : ss->state_dir;
	int rc;

	if (c->spool_dir && (stat(c->spool_dir, &sb) < 0 || !S_ISDIR(sb.st_mode) || access(c->spool_dir, W_OK) < 0)) {
		snprintf(err, errlen, "destination \"%s\": spool_dir \"%s\" is not a writable folder", dest, c->spool_dir);
		return SL_ECONFIG;
	}
	if ((rc = s3_store_new(&st, c, ss, 3, err, errlen)) < 0)
		return SL_EFAIL;
	sl_buf_init(&k, 0);
	sl_buf_init(&body, 0);
	sl_buf_printf(&k, "%s%s/.sluice-check-%08x", st->prefix, ss->name, rand32());
	sl_buf_printf(&body, "written by sluice check for stream %s; deleted at once\n", ss->name);
	if (sl_buf_failed(&k) || sl_buf_failed(&body)) {
		snprintf(err, errlen, "s3 sink: out of memory");
		rc = SL_EFAIL;
		goto out;
	}
	if ((rc = sl_s3_put(st->s3, k.data, body.data, body.len, "text/plain", err, errlen)) < 0 ||
	    (rc = sl_s3_delete(st->s3, k.data, err, errlen)) < 0) {
		size_t l = strlen(err);
		snprintf(err + l, errlen - l, " (destination \"%s\")", dest);
		rc = rc == SL_EPREREQ ? SL_EPREREQ : SL_EFAIL;
		goto out;
	}
	fprintf(out, "stream %s: destination %s: %s: wrote and deleted %s%s%s\n", ss->name, dest, st->desc, k.data,
		spool ? "; spool in " : "", spool ? spool : "");
	rc = SL_OK;
out:
	sl_buf_free(&k);
	sl_buf_free(&body);
	s3_close(st);
	return rc;
}

static int s3_verify(const void *conf, const struct sl_sink_stream *ss, FILE *out, char *err, size_t errlen)
{
	const struct sl_s3_conf *c = conf;
	struct s3_store *st;
	struct sl_store store;
	int rc;

	if ((rc = s3_store_new(&st, c, ss, 3, err, errlen)) < 0)
		return SL_EFAIL;
	store.ops = &s3_store_ops;
	store.ctx = st;
	rc = sl_tree_verify(store, ss->name, out, err, errlen);
	s3_close(st);
	return rc;
}

/* `sluice compact` of an s3 destination. */
static int s3_compact(const void *conf, const struct sl_sink_stream *ss, const char *object, FILE *out, char *err,
		      size_t errlen)
{
	const struct sl_s3_conf *c = conf;
	struct s3_store *st;
	struct sl_store store;
	int rc;

	if ((rc = s3_store_new(&st, c, ss, 3, err, errlen)) < 0)
		return rc;
	store.ops = &s3_store_ops;
	store.ctx = st;
	rc = sl_tree_compact_with(store, c->codec, c->compression_level, c->compression_threads, ss->state_dir,
				  ss->name, object, out, err, errlen);
	s3_close(st);
	return rc;
}

int sl_s3_conn_check(const struct sl_s3_conf *c, uint64_t max_file_bytes, const char *type,
		     const struct sl_ini_section *sec, struct sl_keyerr *er)
{
	const struct sl_ini_entry *e;

	if (!c->access_key_id) {
		return sl_keyerr_set(er, sec->line, "[%s] needs access_key_id_env or access_key_id_file "
				     "(required for type %s)", sec->title, type);
	}
	if (!c->secret_access_key) {
		return sl_keyerr_set(er, sec->line, "[%s] needs secret_access_key_env or secret_access_key_file "
				     "(required for type %s)", sec->title, type);
	}
	if (c->endpoint && strncmp(c->endpoint, "http://", 7) != 0 && strncmp(c->endpoint, "https://", 8) != 0) {
		e = sl_ini_find(sec, "endpoint");
		return sl_keyerr_set(er, e ? e->line : sec->line, "bad value \"%s\" for key \"endpoint\": not an "
				     "http:// or https:// URL", e ? e->raw : "");
	}
	if (max_file_bytes / c->part_size + 1 > SL_S3_MAX_PARTS) {
		e = sl_ini_find(sec, "part_size");
		return sl_keyerr_set(er, e ? e->line : sec->line, "max_file_bytes would need more than %d parts of "
				     "part_size: raise part_size", SL_S3_MAX_PARTS);
	}
	return 0;
}

/* Rules across keys. */
static int s3_conf_check(const void *conf, const struct sl_ini_section *sec, struct sl_keyerr *er)
{
	const struct sl_s3_conf *c = conf;

	if (sl_tree_conf_check(c->codec, c->compression_level, sec, er) < 0)
		return -1;
	return sl_s3_conn_check(c, c->max_file_bytes, "s3", sec, er);
}

const struct sl_keychoice sl_s3_booleans[] = {
	{ "true", 1 }, { "false", 0 }, { "yes", 1 }, { "no", 0 }, { "on", 1 }, { "off", 0 },
	{ NULL, 0 },
};

/* The keys of [destination.NAME] with type = s3 (doc/configuration.md). */
static const struct sl_keydesc s3_keys[] = {
	SL_S3_CONN_KEYS(struct sl_s3_conf, , SL_KF_REQUIRED),
	SL_TREE_KEY_CODEC(struct sl_s3_conf),
	SL_TREE_KEY_COMPRESSION_LEVEL(struct sl_s3_conf),
	SL_TREE_KEY_COMPRESSION_THREADS(struct sl_s3_conf),
	SL_TREE_KEY_MAX_FILE_BYTES(struct sl_s3_conf, (uint64_t)5 << 40),
	SL_TREE_KEY_MAX_FILE_SECONDS(struct sl_s3_conf),
	SL_TREE_KEY_COMPACT_AFTER_FILES(struct sl_s3_conf),
};

/* SL_KT_ENUM stores through the field's size. */
_Static_assert(sizeof(enum sl_codec) == 4, "enum size");

const struct sl_sink_ops sl_s3_ops = {
	.type = "s3",
	.caps = SL_SINK_CAP_MERGE,
	.carries_missing = sl_avro_carries_missing,
	.keys = s3_keys,
	.nkeys = sizeof s3_keys / sizeof s3_keys[0],
	.conf_size = sizeof(struct sl_s3_conf),
	.conf_check = s3_conf_check,
	.check = s3_check,
	.verify = s3_verify,
	.compact = s3_compact,
	.open = s3_open,
	SL_TREE_SINK_OPS,
};
