/*
 * bench/s3_put: uploads files with sluice's own S3 client (sinks/s3/
 * s3_client.c), one PutObject each, or a multipart upload in parts of
 * PART_BYTES above that size, as the s3 destination does; sequentially, as
 * curl does in bench/s3_upload.py.  It compares the client alone with curl
 * alone, on the same files, with nothing else running.
 *
 *   bench/s3_put ENDPOINT BUCKET REGION PREFIX PART_BYTES FILE...
 *
 * The access key and secret come from S3_KEY_ID and S3_SECRET.  Prints the
 * bytes and the wall time; exits non-zero if an upload fails.
 */
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/buf.h"
#include "sinks/s3/s3_client.h"

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* The SHA-256 of len bytes of fd at off, as the destination sends it. */
static int sha_of(int fd, off_t off, uint64_t len, char out[65])
{
	void *p;

	if (len == 0) {
		sl_s3_sha256_hex("", 0, out);
		return 0;
	}
	p = mmap(NULL, len + (off % 4096), PROT_READ, MAP_PRIVATE, fd, off - off % 4096);
	if (p == MAP_FAILED)
		return -1;
	sl_s3_sha256_hex((char *)p + off % 4096, len, out);
	munmap(p, len + (off % 4096));
	return 0;
}

static int upload(struct sl_s3 *s3, const char *key, int fd, uint64_t size, uint64_t part, char *err,
		  size_t errlen)
{
	char sha[65], *id = NULL, **etags = NULL;
	int n = 0, rc;

	if (size <= part) {
		if (sha_of(fd, 0, size, sha) < 0) {
			snprintf(err, errlen, "mmap failed");
			return -1;
		}
		return sl_s3_put_fd(s3, key, fd, 0, size, sha, err, errlen);
	}
	if ((rc = sl_s3_mpu_create(s3, key, &id, err, errlen)) < 0)
		return rc;
	for (uint64_t off = 0; off < size; off += part) {
		uint64_t len = size - off < part ? size - off : part;
		char **e = realloc(etags, (size_t)(n + 1) * sizeof *e);

		if (!e || sha_of(fd, (off_t)off, len, sha) < 0) {
			snprintf(err, errlen, "out of memory or mmap failed");
			rc = -1;
			goto out;
		}
		etags = e;
		etags[n] = NULL;
		if ((rc = sl_s3_mpu_part(s3, key, id, n + 1, fd, (off_t)off, len, sha, &etags[n], err, errlen)) < 0)
			goto out;
		n++;
	}
	rc = sl_s3_mpu_complete(s3, key, id, etags, n, err, errlen);
out:
	for (int i = 0; i < n; i++)
		free(etags[i]);
	free(etags);
	free(id);
	return rc;
}

int main(int argc, char **argv)
{
	struct sl_s3_client_conf c = { 0 };
	struct sl_s3 *s3;
	char err[512];
	uint64_t total = 0, part;
	double t0;

	if (argc < 7 || !getenv("S3_KEY_ID") || !getenv("S3_SECRET")) {
		fprintf(stderr, "usage: S3_KEY_ID=.. S3_SECRET=.. bench/s3_put ENDPOINT BUCKET REGION PREFIX "
			"PART_BYTES FILE...\n");
		return 2;
	}
	c.endpoint = argv[1];
	c.bucket = argv[2];
	c.region = argv[3];
	c.path_style = true;
	c.access_key_id = getenv("S3_KEY_ID");
	c.secret_access_key = getenv("S3_SECRET");
	c.tls_verify = true;
	c.max_attempts = 1;
	part = strtoull(argv[5], NULL, 10);
	if (sl_s3_new(&s3, &c, err, sizeof err) < 0) {
		fprintf(stderr, "s3_put: %s\n", err);
		return 1;
	}
	t0 = now_s();
	for (int i = 6; i < argc; i++) {
		struct stat st;
		struct sl_buf key;
		const char *base = strrchr(argv[i], '/');
		int fd = open(argv[i], O_RDONLY | O_CLOEXEC), rc;

		if (fd < 0 || fstat(fd, &st) < 0) {
			fprintf(stderr, "s3_put: %s: cannot open\n", argv[i]);
			return 1;
		}
		sl_buf_init(&key, 0);
		sl_buf_printf(&key, "%s%s", argv[4], base ? base + 1 : argv[i]);
		rc = upload(s3, key.data, fd, (uint64_t)st.st_size, part, err, sizeof err);
		close(fd);
		sl_buf_free(&key);
		if (rc < 0) {
			fprintf(stderr, "s3_put: %s: %s\n", argv[i], err);
			return 1;
		}
		total += (uint64_t)st.st_size;
	}
	printf("s3_put: %" PRIu64 " bytes in %d files, %.3f s\n", total, argc - 6, now_s() - t0);
	sl_s3_free(s3);
	return 0;
}
