/*
 * sinks/avro_tree/store.h: where a file tree of Avro containers is kept.  The
 * file tree (tree.h) decides what to write (layout, rotation, manifests,
 * schema files); a store decides how bytes become durable and visible in one
 * kind of storage: a local folder (avro_dir) or an S3 bucket (s3).
 *
 * Keys are '/'-separated paths relative to the destination's root (avro_dir's
 * path, s3's prefix): "<stream>/<object>/2024/01/31/13/45/<name>.avro",
 * "<stream>/_manifests/.0000000001.json".  A store never interprets them.
 *
 * A data file goes through file_new, file_write (any number of times),
 * file_finish and file_publish; file_discard drops it at any point before
 * file_publish has succeeded, leaving nothing visible.  Only file_publish
 * makes a file visible, and it does so atomically: a reader sees the whole
 * file under its final key, or nothing.
 *
 * Return codes: 0 success; a negative enum sl_status (common/util.h) with a
 * message in err: SL_EPREREQ for what an operator must fix (access refused,
 * a bucket that does not exist), SL_EFAIL (-1) for the rest.  The message
 * names the store, the key or file, and never a secret.
 */
#ifndef SLUICE_SINKS_AVRO_TREE_STORE_H
#define SLUICE_SINKS_AVRO_TREE_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "common/buf.h"

/* file_publish, put_new: the key is taken; the caller picks another name. */
#define SL_STORE_EXISTS 1
/* get: no such key. */
#define SL_STORE_NOT_FOUND 1

struct sl_store_file;  /* a file being written: the store's own */

/* list(): called for each key under the prefix, in no particular order,
 * with its size and its last modification in milliseconds since the epoch
 * (a folder's mtime, a bucket's LastModified; -1 when the store has none);
 * returns 0 to go on, or -1 to stop (list() then returns -1; the callback
 * sets the message). */
typedef int (*sl_store_list_fn)(void *arg, const char *key, uint64_t size, int64_t mtime_ms);

struct sl_store_ops {
	/* Starts a data file that will be published in folder dir (a key
	 * without the trailing '/'); first_csn is its first record's CSN, for
	 * a temporary name.  *out receives the file. */
	int (*file_new)(void *st, const char *dir, const char *first_csn, struct sl_store_file **out,
			char *err, size_t errlen);
	/* Appends bytes to the file (the signature of struct sl_ocf_out's
	 * write, with the file as arg). */
	int (*file_write)(void *file, const struct iovec *iov, int iovcnt, char *err, size_t errlen);
	/* Every byte is written: makes the content stable where the store can
	 * without publishing it (avro_dir: nothing yet, its fsync waits for
	 * the first file_publish or sync(), so that the files of a flush are
	 * all written before any is fsynced; s3: the parts of a multipart
	 * upload).  key is the key file_publish will most likely be given (it
	 * differs only after SL_STORE_EXISTS).  The file stays the store's
	 * until file_publish or file_discard. */
	int (*file_finish)(void *st, struct sl_store_file *f, const char *key, char *err, size_t errlen);
	/* Makes the finished file visible under key, atomically, and durable
	 * once sync() returns.  Returns SL_STORE_EXISTS, leaving the file as
	 * it was, when key exists already (a store that cannot tell may
	 * replace it).  On success f is freed. */
	int (*file_publish)(void *st, struct sl_store_file *f, const char *key, char *err, size_t errlen);
	/* Drops the file and whatever it left behind, and frees it. */
	void (*file_discard)(void *st, struct sl_store_file *f);
	/* Makes everything published or staged so far durable (avro_dir:
	 * fsyncs the files not yet fsynced, renames the staged ones, then
	 * fsyncs each folder renamed into or created in once).  Optional. */
	int (*sync)(void *st, char *err, size_t errlen);
	/* Writes a small whole object as put does, but it replaces the
	 * previous one (atomically) and is durable only when the next sync()
	 * returns 0: many of them then cost one sync (avro_dir).  A failed
	 * sync() drops what it did not rename.  Optional: the tree uses put
	 * without it. */
	int (*stage)(void *st, const char *key, const void *data, size_t len, char *err, size_t errlen);

	/* Writes a small whole object (a manifest, a schema), replacing any
	 * previous one atomically, durable on return. */
	int (*put)(void *st, const char *key, const void *data, size_t len, char *err, size_t errlen);
	/* Writes a small whole object as put does, but only when key does not
	 * exist yet: returns SL_STORE_EXISTS, leaving the object there as it
	 * was, when it does (avro_dir: a rename that never replaces; s3: a PUT
	 * with If-None-Match: *, answered 412; an answer lost on the way and
	 * retried finds its own object, which counts as written).  A server
	 * that ignores the condition replaces the object: the caller's lock
	 * must then keep it the only writer.  Durable on return.  Optional. */
	int (*put_new)(void *st, const char *key, const void *data, size_t len, char *err, size_t errlen);
	/* Reads a small whole object into out (appended).  Returns 0,
	 * SL_STORE_NOT_FOUND, or an error. */
	int (*get)(void *st, const char *key, struct sl_buf *out, char *err, size_t errlen);
	/* Calls fn for every key under prefix/ (at any depth), with its size
	 * and age.  The store's own temporary files are left out. */
	int (*list)(void *st, const char *prefix, sl_store_list_fn fn, void *arg, char *err, size_t errlen);
	/* Removes key; a key that does not exist is not an error. */
	int (*remove)(void *st, const char *key, char *err, size_t errlen);
	/* For reading a data file back (sluice verify): a local file holding
	 * key's content.  *path (malloc'd) receives its name; *temporary is
	 * true when the caller must unlink it after use.  Returns 0,
	 * SL_STORE_NOT_FOUND, or an error. */
	int (*fetch)(void *st, const char *key, char **path, bool *temporary, char *err, size_t errlen);
	/* Removes what a writer of stream that crashed left behind (temporary
	 * files, incomplete multipart uploads); nothing of it was ever
	 * acknowledged.  sl_tree_open calls it, holding the compaction lock,
	 * so that the files of a `sluice compact` at work are not taken for
	 * leftovers.  Optional. */
	int (*cleanup)(void *st, const char *stream, char *err, size_t errlen);
	/* Aborts the incomplete multipart uploads of data files (".avro")
	 * under prefix/ begun min_age_ms or more ago (0: every one; one whose
	 * start the server does not say is then kept), for a writer that runs
	 * beside others (iceberg: a crash's leftovers, found by compaction).
	 * *aborted receives how many it aborted.  A server without
	 * ListMultipartUploads is warned about, not an error.  Optional (a
	 * store without uploads). */
	int (*abort_uploads)(void *st, const char *prefix, int64_t min_age_ms, int *aborted, char *err,
			     size_t errlen);
	/* What the store is, for messages: "folder \"/data/lake\"", "bucket \"lake\"". */
	const char *(*describe)(void *st);
	/* Frees the store. */
	void (*close)(void *st);
};

/* A store: its operations and its context. */
struct sl_store {
	const struct sl_store_ops *ops;
	void *ctx;
};

#endif
