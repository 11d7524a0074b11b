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

#include "sinks/avro/ocf.h"
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

#endif
