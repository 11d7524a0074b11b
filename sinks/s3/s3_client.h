/*
 * sinks/s3/s3_client.h: the few S3 REST calls the s3 sink needs, over
 * libcurl, signed with libcurl's own AWS Signature Version 4
 * (CURLOPT_AWS_SIGV4): PutObject, GetObject, DeleteObject, ListObjectsV2,
 * and the multipart upload calls (Create, UploadPart, Complete, Abort,
 * ListMultipartUploads).  It works with AWS S3 and S3-compatible servers
 * (MinIO, GCS's XML API with HMAC keys, local test servers); path_style puts
 * the bucket in the path instead of the host name.
 *
 * Every request carries x-amz-content-sha256 with the SHA-256 of its body
 * (the caller's, for bodies read from a file; computed here for bodies in
 * memory), so the server checks the payload too, and curl signs that value.
 * libcurl 7.88 signs the path and the query exactly as given, so keys are
 * percent-encoded here (RFC 3986 unreserved characters and '/' stay) and
 * every query is built already in canonical form: keys sorted, values
 * encoded, "uploads=" for a key without a value.
 *
 * Failures are classified:
 *   - connection errors, time-outs, 5xx and 429: retried with exponential
 *     backoff (0.5 s doubling to 30 s, with jitter), logged each time, at most
 *     max_attempts times in all (0: as long as it takes; the sink's uploads
 *     retry so, which is its backpressure: the pipeline's queue holds the
 *     source back meanwhile);
 *   - 403 (access denied, a bad key or signature) and 404 NoSuchBucket:
 *     SL_EPREREQ, an operator error, not retried;
 *   - other answers: -1 with the server's code and message.
 * Messages name the bucket, the key and the call; never a secret: the
 * secret key and the session token live only in the client, are never
 * logged, and are wiped when it is freed.
 *
 * A client is used by one thread at a time; it keeps its connection open
 * between calls.
 */
#ifndef SLUICE_SINKS_S3_S3_CLIENT_H
#define SLUICE_SINKS_S3_S3_CLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/buf.h"
#include "common/outage.h"

/* sl_s3_get, sl_s3_get_to_fd: no such key; sl_s3_mpu_*: no such upload. */
#define SL_S3_NOT_FOUND 1
/* sl_s3_put_new: the key exists. */
#define SL_S3_EXISTS 2

struct sl_s3_client_conf {
	const char *endpoint;        /* "https://host[:port]"; NULL or "": AWS for region */
	const char *bucket;
	const char *region;          /* "us-east-1", or "auto" for servers that ignore it */
	bool path_style;             /* bucket in the path (MinIO, local servers) */
	const char *access_key_id;
	const char *secret_access_key;
	const char *session_token;   /* or NULL */
	const char *ca_file;         /* or NULL: the system's CAs */
	bool tls_verify;             /* peer and host name; on unless an operator turns it off */
	long connect_timeout_s;      /* 0: 10 s */
	long stall_timeout_s;        /* no byte moved for this long fails a request; 0: 60 s */
	int max_attempts;            /* 0: retry transient failures as long as it takes */
	const char *user_agent;      /* or NULL: "sluice/<version>" */
	struct sl_outage *outage;    /* told of each try that failed and each answer (borrowed), or NULL */
};

struct sl_s3;

/* Makes a client; copies everything in c.  Returns 0, or -1 with a message in err. */
int sl_s3_new(struct sl_s3 **out, const struct sl_s3_client_conf *c, char *err, size_t errlen);
void sl_s3_free(struct sl_s3 *s);
void sl_s3_set_max_attempts(struct sl_s3 *s, int max_attempts);
/* "bucket \"b\" at https://host": for messages. */
const char *sl_s3_describe(const struct sl_s3 *s);

/* Hex SHA-256 of len bytes (out: 65 bytes). */
void sl_s3_sha256_hex(const void *data, size_t len, char out[65]);

/* PutObject of a body in memory. */
int sl_s3_put(struct sl_s3 *s, const char *key, const void *data, size_t len, const char *content_type,
	      char *err, size_t errlen);
/* PutObject with If-None-Match: *: returns SL_S3_EXISTS when the server
 * answers 412 (the key exists; nothing written).  A server that ignores the
 * header writes the object and answers 2xx. */
int sl_s3_put_new(struct sl_s3 *s, const char *key, const void *data, size_t len, const char *content_type,
		  char *err, size_t errlen);
/* PutObject of len bytes of fd from offset off, whose SHA-256 is sha256 (hex). */
int sl_s3_put_fd(struct sl_s3 *s, const char *key, int fd, off_t off, uint64_t len, const char *sha256,
		 char *err, size_t errlen);
/* GetObject into out (appended, at most cap bytes, else an error).  Returns
 * 0, SL_S3_NOT_FOUND, or an error. */
int sl_s3_get(struct sl_s3 *s, const char *key, struct sl_buf *out, size_t cap, char *err, size_t errlen);
/* GetObject written to fd (from its current offset).  Returns 0,
 * SL_S3_NOT_FOUND, or an error. */
int sl_s3_get_to_fd(struct sl_s3 *s, const char *key, int fd, char *err, size_t errlen);
/* DeleteObject; a missing key is not an error. */
int sl_s3_delete(struct sl_s3 *s, const char *key, char *err, size_t errlen);

/* ListObjectsV2 of every key under prefix (all pages): fn(arg, key, size,
 * mtime_ms) for each, mtime_ms its LastModified in milliseconds since the
 * epoch (-1 when the answer has none that reads as ISO 8601 UTC); fn
 * returns 0 to go on or -1 to stop. */
typedef int (*sl_s3_list_fn)(void *arg, const char *key, uint64_t size, int64_t mtime_ms);
int sl_s3_list(struct sl_s3 *s, const char *prefix, sl_s3_list_fn fn, void *arg, char *err, size_t errlen);

/* Multipart uploads.  *upload_id and *etag are malloc'd. */
int sl_s3_mpu_create(struct sl_s3 *s, const char *key, char **upload_id, char *err, size_t errlen);
int sl_s3_mpu_part(struct sl_s3 *s, const char *key, const char *upload_id, int part, int fd, off_t off,
		   uint64_t len, const char *sha256, char **etag, char *err, size_t errlen);
int sl_s3_mpu_complete(struct sl_s3 *s, const char *key, const char *upload_id, char *const *etags,
		       int nparts, char *err, size_t errlen);
/* AbortMultipartUpload; an upload that no longer exists is not an error. */
int sl_s3_mpu_abort(struct sl_s3 *s, const char *key, const char *upload_id, char *err, size_t errlen);
/* ListMultipartUploads under prefix (all pages): fn(arg, key, upload_id,
 * initiated_ms), the last its Initiated in milliseconds since the epoch (-1
 * when the answer has none). */
typedef int (*sl_s3_upload_fn)(void *arg, const char *key, const char *upload_id, int64_t initiated_ms);
int sl_s3_mpu_list(struct sl_s3 *s, const char *prefix, sl_s3_upload_fn fn, void *arg, char *err,
		   size_t errlen);

/* An ISO 8601 UTC time as S3 writes it ("2024-01-31T13:45:00.123Z", the
 * fraction optional), n bytes, in milliseconds since the epoch; -1 when it
 * does not read as one. */
int64_t sl_s3_parse_time(const char *s, size_t n);

/* Appends s percent-encoded for an S3 path (slash true: '/' stays) or a
 * query value (slash false: '/' becomes %2F). */
void sl_s3_encode(struct sl_buf *out, const char *s, bool slash);

#endif
