/*
 * sinks/s3/s3.h: the s3 sink: the Avro file tree of sinks/avro_tree/tree.h
 * (the same layout, manifests and schema files as avro_dir) in an S3 bucket,
 * under a prefix: the key of every object is exactly its avro_dir path below
 * the destination's path, with the prefix in front.
 *
 * How a data file gets there (the S3 store in s3.c):
 *   - it is built in a spool file (spool_dir, by default the agent's
 *     state_dir; an unlinked file, so nothing is left after a crash), and its
 *     SHA-256 is computed per part as it is written; memory stays at one Avro
 *     block per open file, whatever the file size;
 *   - when the file is finished (rotated by size or by a new schema version,
 *     or at a flush) and is larger than part_size, a multipart upload starts
 *     under its final key and every part is sent from the spool; the spool
 *     is then freed.  The final key names the file's last CSN, so no upload
 *     can start before the file is finished;
 *   - flush() makes it visible: CompleteMultipartUpload, or one PutObject
 *     for a file of at most part_size.  A 2xx answer is when the file is
 *     durable; only then does flush() go on to the manifest and report the
 *     position, which the agent then checkpoints and acknowledges;
 *   - a file never completed is never visible: a crash leaves at most an
 *     incomplete multipart upload, which the next open() aborts (those under
 *     <prefix><stream>/ with a data file's name: only sluice makes them).
 * Requests that fail on the way (5xx, time-outs, lost connections) are
 * retried with backoff as long as it takes, so a flush waits while the
 * server is down, and the pipeline's queue holds the source back meanwhile
 * (keepalives go on).  A refusal (403) or a missing bucket stops the stream
 * with exit code 3 (SL_EPREREQ) and a message saying which.
 *
 * check() proves the credentials and the bucket: it writes a small object
 * under <prefix><stream>/ and deletes it.  verify() reads the manifests and
 * files back (sl_tree_verify).
 */
#ifndef SLUICE_SINKS_S3_S3_H
#define SLUICE_SINKS_S3_S3_H

#include <stdbool.h>
#include <stdint.h>

#include "common/keytab.h"
#include "sinks/avro/ocf.h"
#include "sinks/avro_tree/store.h"
#include "sinks/sink.h"

#define SL_S3_MIN_PART ((uint64_t)5 << 20)      /* S3's smallest part but the last */
#define SL_S3_MAX_PARTS 10000

/* [destination.NAME] with type = s3 (doc/configuration.md).  Every string
 * belongs to it (the key table frees it; the secrets are wiped). */
struct sl_s3_conf {
	char *endpoint;              /* NULL: AWS for the region */
	char *bucket;                /* required */
	char *prefix;                /* NULL or "": the bucket's root */
	char *region;                /* default us-east-1 */
	bool path_style;             /* default false */
	char *access_key_id;         /* from access_key_id_env or _file: required */
	char *secret_access_key;     /* from secret_access_key_env or _file: required */
	char *session_token;         /* from session_token_env or _file: optional */
	char *ca_file;
	bool tls_verify;             /* default true */
	enum sl_codec codec;
	int compression_level;
	int compression_threads;     /* 0-64, default 1; 0: compress on the writer thread */
	uint64_t max_file_bytes;
	uint64_t max_file_seconds;
	uint64_t part_size;          /* default 16MB, at least 5MB */
	char *spool_dir;             /* NULL: the agent's state_dir */
	uint64_t compact_after_files; /* merge mode: automatic compaction, default 64, 0 off */
};

extern const struct sl_sink_ops sl_s3_ops;

/* true/false, yes/no, on/off: the choices of the boolean keys. */
extern const struct sl_keychoice sl_s3_booleans[];

/* The keys that say where a bucket is and how to reach it (endpoint,
 * bucket, prefix, region, path_style, the credentials, ca_file, tls_verify,
 * part_size, spool_dir), as rows of a key table for the struct T whose
 * member M (written with its dot, e.g. "s3.", or nothing for a struct
 * sl_s3_conf itself) is a struct sl_s3_conf.  BUCKET_FLAGS: bucket's flags
 * (SL_KF_REQUIRED, or 0 where another key may stand for it).  Another
 * destination that keeps its files in a bucket takes the same keys, so
 * they are written once. */
#define SL_S3_CONN_KEYS(T, M, BUCKET_FLAGS) \
	{ .name = "endpoint", .type = SL_KT_STRING, .flags = SL_KF_EMPTY_NULL, FIELD(T, M endpoint) }, \
	{ .name = "bucket", .type = SL_KT_STRING, .flags = (BUCKET_FLAGS), FIELD(T, M bucket) }, \
	{ .name = "prefix", .type = SL_KT_STRING, .flags = SL_KF_EMPTY_NULL, FIELD(T, M prefix) }, \
	{ .name = "region", .type = SL_KT_STRING, .def = "us-east-1", FIELD(T, M region) }, \
	{ .name = "path_style", .type = SL_KT_ENUM, .choices = sl_s3_booleans, .def = "false", \
	  FIELD(T, M path_style) }, \
	{ .name = "access_key_id_env", .type = SL_KT_SECRET_ENV, .excludes = "access_key_id_file", \
	  FIELD(T, M access_key_id) }, \
	{ .name = "access_key_id_file", .type = SL_KT_SECRET_FILE, .excludes = "access_key_id_env", \
	  FIELD(T, M access_key_id) }, \
	{ .name = "secret_access_key_env", .type = SL_KT_SECRET_ENV, .excludes = "secret_access_key_file", \
	  FIELD(T, M secret_access_key) }, \
	{ .name = "secret_access_key_file", .type = SL_KT_SECRET_FILE, .excludes = "secret_access_key_env", \
	  FIELD(T, M secret_access_key) }, \
	{ .name = "session_token_env", .type = SL_KT_SECRET_ENV, .excludes = "session_token_file", \
	  FIELD(T, M session_token) }, \
	{ .name = "session_token_file", .type = SL_KT_SECRET_FILE, .excludes = "session_token_env", \
	  FIELD(T, M session_token) }, \
	{ .name = "ca_file", .type = SL_KT_STRING, .flags = SL_KF_EMPTY_NULL, FIELD(T, M ca_file) }, \
	{ .name = "tls_verify", .type = SL_KT_ENUM, .choices = sl_s3_booleans, .def = "true", \
	  FIELD(T, M tls_verify) }, \
	{ .name = "part_size", .type = SL_KT_BYTES, .def = "16MB", .min = SL_S3_MIN_PART, \
	  .max = (uint64_t)5 << 30, FIELD(T, M part_size) }, \
	{ .name = "spool_dir", .type = SL_KT_STRING, .flags = SL_KF_EMPTY_NULL, FIELD(T, M spool_dir) }

/* The rules across the keys of SL_S3_CONN_KEYS (credentials given, an
 * http(s) endpoint, files of max_file_bytes in at most SL_S3_MAX_PARTS
 * parts); type names the destination type in messages.  0, or -1 with er
 * set. */
int sl_s3_conn_check(const struct sl_s3_conf *c, uint64_t max_file_bytes, const char *type,
		     const struct sl_ini_section *sec, struct sl_keyerr *er);

/* The S3 store (sinks/avro_tree/store.h) of conf's bucket and prefix, for
 * stream ss (its outage account and state_dir, the spool's default);
 * max_attempts as sl_s3_client_conf's (0: retry as long as it takes).
 * Closed with its ops->close.  Returns 0, or -1 with a message in err. */
int sl_s3_store(struct sl_store *out, const struct sl_s3_conf *c, const struct sl_sink_stream *ss,
		int max_attempts, char *err, size_t errlen);
/* Sets the store's max_attempts, e.g. 0 once a sink is open. */
void sl_s3_store_set_attempts(struct sl_store *store, int max_attempts);
/* "bucket/prefix/" of the store's keys ("bucket/" without a prefix), for
 * s3:// locations; owned by the store. */
const char *sl_s3_store_root(const struct sl_store *store);

#endif
