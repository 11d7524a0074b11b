/*
 * sinks/avro_dir/avro_dir.c: the avro_dir sink: the Avro file tree
 * (sinks/avro_tree/tree.h) kept in a local folder.  This file is the folder
 * store (sinks/avro_tree/store.h) and the sink's configuration; the tree
 * does the rest.
 *
 * A data file is written as "<folder>/.<first_csn>_<8 hex>.avro.tmp" in its
 * final folder, fsynced when finished, and renamed to its final name (never
 * over an existing file) when published; the folders renamed into are
 * fsynced before the flush reports anything durable.  Small files
 * (manifests, schema files) are written as "<folder>/.put-<8 hex>.tmp",
 * fsynced, renamed over the old one and their folder fsynced.  Every folder
 * the store creates has its parent fsynced, so that it survives a crash
 * along with what is put in it.
 *
 * A flush that makes many new files durable (a group of small tables: a
 * data file and a schema file each, in new folders) does it in phases, so
 * that each file and each folder is fsynced once per flush, and after every
 * write of the flush: finishing a data file only starts its write-back
 * (sync_file_range); the first publish fsyncs every finished file, then
 * renames; a staged schema file is written, then fsynced and renamed by
 * sync(); sync() then fsyncs each folder renamed into or created in since
 * the last one, once, deepest first.  On ext4 the first fsync then commits
 * the journal for all of them and the later ones mostly find their changes
 * committed.  Nothing is renamed before it is fsynced, and sync() returns
 * only when every file and every folder entry leading to it is durable, so
 * the checkpoint never gets ahead of the files.  A flush of one file does
 * what it did before: fsync, rename, fsync of the folder.  The debug log
 * has one line per sync: "flushed N files, M fsyncs (F folders)".
 */
#include "sinks/avro_dir/avro_dir.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "common/buf.h"
#include "common/log.h"
#include "common/util.h"
#include "sinks/avro/avro_schema.h"
#include "sinks/avro_tree/tree.h"

/* A data file being written is ".<CSN>_<8 hex>" TMP_SUFFIX (see is_temp_name). */
#define TMP_SUFFIX ".avro.tmp"

/* A growable array of pointers (each owned by whoever put it there). */
struct ptrs {
	void **v;
	size_t n, alloc;
};

struct dir_store {
	char *path;                    /* the destination's path */
	char *desc;                    /* "folder \"<path>\"" */
	struct ptrs sync_dirs;         /* char *: folders renamed into, or created in, since the last sync() */
	struct ptrs unsynced;          /* struct sl_store_file *: finished, not yet fsynced (not owned) */
	size_t unsynced_max;           /* more are fsynced (and closed) at once: unsynced_bound() */
	struct ptrs staged;            /* struct sl_store_file *: staged small files (owned) */
	size_t staged_closed;          /* the first staged files, fsynced and closed early
					* (shed_descriptors): the others are open */
	size_t synced_files;           /* files made durable since the last sync() */
	size_t fsyncs;                 /* of files and folders since the last sync() */
	size_t syncfs;                 /* syncfs() calls since the last sync() */
	bool use_syncfs;               /* sync = syncfs */
	bool synced_until;             /* a syncfs() just covered what is being settled */
};

static int note_sync(struct dir_store *ds, char *dir);
static int fsync_unsynced(struct dir_store *ds, char *err, size_t errlen);
static int fsync_close(struct dir_store *counted, struct sl_store_file *f, char *err, size_t errlen);
static char *folder_of(const char *path);

struct sl_store_file {
	int fd;                        /* -1 once fsynced and closed */
	char *tmp_path;
	char *dir_path;                /* its folder; a staged file's final path */
};

/* Appends p to a; -1 when out of memory. */
static int ptrs_push(struct ptrs *a, void *p)
{
	void **nv = sl_grow(a->v, &a->alloc, a->n, sizeof *nv, 16);

	if (!nv)
		return -1;
	a->v = nv;
	a->v[a->n++] = p;
	return 0;
}

/* Removes p from a, if it is there. */
static void ptrs_del(struct ptrs *a, const void *p)
{
	for (size_t i = 0; i < a->n; i++) {
		if (a->v[i] == p) {
			memmove(&a->v[i], &a->v[i + 1], (a->n - i - 1) * sizeof *a->v);
			a->n--;
			return;
		}
	}
}

static uint32_t rand32(void)
{
	uint32_t r;

	if (getrandom(&r, sizeof r, 0) != (ssize_t)sizeof r) {
		struct timespec ts;
		clock_gettime(CLOCK_MONOTONIC, &ts);
		r = (uint32_t)ts.tv_nsec * 2654435761u ^ (uint32_t)getpid();
	}
	return r;
}

/* Folder path was just created: its parent is fsynced now without ds, else
 * at ds's next sync().  0, or -1 with a message in err. */
static int parent_durable(struct dir_store *ds, const char *path, char *err, size_t errlen)
{
	char *parent;

	if (!ds) {
		if (sl_fsync_dir_of(path, false) < 0) {
			snprintf(err, errlen, "could not fsync the parent of \"%s\": %s", path, sl_strerror(errno));
			return -1;
		}
		return 0;
	}
	if (!(parent = folder_of(path)) || note_sync(ds, parent) < 0) {
		snprintf(err, errlen, "could not create folder \"%s\": out of memory", path);
		return -1;
	}
	return 0;
}

/* mkdir -p that fsyncs the parent of every folder it creates, so that a new
 * folder survives a crash along with the files later put in it: at once
 * without ds, else at ds's next sync() (note_sync).  The deepest folder is
 * tried first: it mostly exists (one call), and a new table's folders are
 * made from the deepest one that exists down, without a call for each
 * folder above it.  Returns 0, or -1 with a message in err. */
static int mkdirs_durable(struct dir_store *ds, const char *path, char *err, size_t errlen)
{
	char *parent;
	int rc;

	if (mkdir(path, 0755) == 0)
		return parent_durable(ds, path, err, errlen);
	if (errno == EEXIST)
		return 0;
	if (errno != ENOENT)
		goto fail;
	if (!(parent = folder_of(path))) {
		snprintf(err, errlen, "could not create folder \"%s\": out of memory", path);
		return -1;
	}
	if (!*parent || !strcmp(parent, path)) {  /* nothing left to create: ENOENT stands */
		free(parent);
		errno = ENOENT;
		goto fail;
	}
	rc = mkdirs_durable(ds, parent, err, errlen);
	free(parent);
	if (rc < 0)
		return rc;
	if (mkdir(path, 0755) == 0)
		return parent_durable(ds, path, err, errlen);
	if (errno == EEXIST)
		return 0;
fail:
	snprintf(err, errlen, "could not create folder \"%s\": %s", path, sl_strerror(errno));
	return -1;
}

static bool span_of(const char *p, size_t n, const char *set)
{
	for (size_t i = 0; i < n; i++)
		if (!p[i] || !strchr(set, p[i]))
			return false;
	return true;
}

/* "<path>/<key>" into a fresh buffer; NULL when out of memory. */
static char *full_path(const struct dir_store *ds, const char *key)
{
	struct sl_buf b;

	sl_buf_init(&b, 0);
	sl_buf_printf(&b, "%s/%s", ds->path, key);
	return sl_buf_detach(&b);
}

/* The folder part of path (malloc'd), or NULL. */
static char *folder_of(const char *path)
{
	const char *slash = strrchr(path, '/');

	return slash ? strndup(path, (size_t)(slash - path)) : strdup(".");
}

/* True for exactly the names data files get while they are written:
 * ".<16 uppercase hex>-<10 digits>_<8 lowercase hex>.avro.tmp", and small
 * files while they are put: ".put-<8 lowercase hex>.tmp". */
static bool is_temp_name(const char *name)
{
	if (!strncmp(name, ".put-", 5))
		return span_of(name + 5, 8, "0123456789abcdef") && !strcmp(name + 13, ".tmp");
	return name[0] == '.' && span_of(name + 1, 16, "0123456789ABCDEF") && name[17] == '-' &&
	       span_of(name + 18, 10, "0123456789") && name[28] == '_' &&
	       span_of(name + 29, 8, "0123456789abcdef") && strcmp(name + 37, TMP_SUFFIX) == 0;
}

/* Writes every iovec fully, retrying on EINTR and short writes.  Returns 0
 * or -1 (errno set). */
static int writev_all(int fd, const struct iovec *iov_in, int n)
{
	struct iovec iov[8];
	struct iovec *p = iov;

	if (n > 8) {
		for (int i = 0; i < n; i++)
			if (writev_all(fd, &iov_in[i], 1) < 0)
				return -1;
		return 0;
	}
	memcpy(iov, iov_in, (size_t)n * sizeof *iov);
	while (n > 0) {
		ssize_t k = writev(fd, p, n);
		if (k < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		while (n > 0 && (size_t)k >= p->iov_len) {
			k -= (ssize_t)p->iov_len;
			p++;
			n--;
		}
		if (n > 0) {
			p->iov_base = (char *)p->iov_base + k;
			p->iov_len -= (size_t)k;
		}
	}
	return 0;
}

/* What walk_tree does with each regular file. */
struct walk {
	/* Called with the file's path and name; returns 0 to go on, 1 to
	 * unlink the file, -1 to stop (with a message in err). */
	int (*visit)(struct walk *w, const char *path, const char *name, const struct stat *sb,
		     char *err, size_t errlen);
	void *arg;
	const char *what;    /* names removed files in the debug log */
	uint64_t removed;
};

/* Walks the folder path (a buffer it appends to and restores) and the
 * folders below it without following symbolic links; fsyncs every folder it
 * removed something from.  A missing folder is not an error.  Returns 0, or
 * -1 with a message in err. */
static int walk_tree(struct sl_buf *path, struct walk *w, char *err, size_t errlen)
{
	DIR *dir = opendir(path->data);
	struct dirent *de;
	size_t base = path->len;
	bool removed = false;
	int rc = 0;

	if (!dir) {
		if (errno == ENOENT || errno == ENOTDIR)
			return 0;
		snprintf(err, errlen, "could not open folder \"%s\": %s", path->data, sl_strerror(errno));
		return -1;
	}
	while (rc == 0 && (errno = 0, de = readdir(dir)) != NULL) {
		struct stat sb;
		int v;

		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		path->len = base;
		sl_buf_putc(path, '/');
		if (sl_buf_puts(path, de->d_name) < 0) {
			snprintf(err, errlen, "out of memory walking \"%.*s\"", (int)base, path->data);
			rc = -1;
			break;
		}
		if (lstat(path->data, &sb) < 0) {
			if (errno == ENOENT)
				continue;
			snprintf(err, errlen, "could not stat \"%s\": %s", path->data, sl_strerror(errno));
			rc = -1;
			break;
		}
		if (S_ISDIR(sb.st_mode)) {
			rc = walk_tree(path, w, err, errlen);
			continue;
		}
		if (!S_ISREG(sb.st_mode))
			continue;
		v = w->visit(w, path->data, de->d_name, &sb, err, errlen);
		if (v < 0) {
			rc = -1;
		} else if (v == 1) {
			if (unlink(path->data) < 0) {
				snprintf(err, errlen, "could not remove \"%s\": %s", path->data, sl_strerror(errno));
				rc = -1;
			} else {
				sl_debug("removed %s \"%s\"", w->what, path->data);
				w->removed++;
				removed = true;
			}
		}
	}
	if (rc == 0 && errno != 0) {
		path->len = base;
		path->data[base] = '\0';
		snprintf(err, errlen, "could not read folder \"%s\": %s", path->data, sl_strerror(errno));
		rc = -1;
	}
	closedir(dir);
	path->len = base;
	path->data[base] = '\0';
	if (removed && sl_fsync_dir_of(path->data, true) < 0 && rc == 0) {
		snprintf(err, errlen, "could not fsync folder \"%s\": %s", path->data, sl_strerror(errno));
		rc = -1;
	}
	return rc;
}

static int visit_leftover(struct walk *w, const char *path, const char *name, const struct stat *sb,
			  char *err, size_t errlen)
{
	(void)w;
	(void)path;
	(void)sb;
	(void)err;
	(void)errlen;
	return is_temp_name(name) ? 1 : 0;
}

/* Removes the temporary files a crashed run left under the stream's folder
 * (they are never complete, or never acknowledged: the source sends their
 * rows again).  Returns 0, or -1 with a message in err. */
static int remove_leftovers(const char *root, const char *stream, char *err, size_t errlen)
{
	struct walk w = { .visit = visit_leftover, .what = "leftover temporary file" };
	struct sl_buf path;
	int rc;

	sl_buf_init(&path, 0);
	if (sl_buf_puts(&path, root) < 0) {
		snprintf(err, errlen, "avro_dir sink: out of memory");
		return -1;
	}
	rc = walk_tree(&path, &w, err, errlen);
	sl_buf_free(&path);
	if (w.removed > 0)
		sl_info("stream \"%s\": removed %" PRIu64 " leftover temporary file%s under \"%s\"",
			stream, w.removed, w.removed == 1 ? "" : "s", root);
	return rc;
}

/* ---------------------------------------------------------------------- */
/* The folder store                                                       */

static int ds_file_new(void *st, const char *dir, const char *first_csn, struct sl_store_file **out,
		       char *err, size_t errlen)
{
	struct dir_store *ds = st;
	struct sl_store_file *f = calloc(1, sizeof *f);
	struct sl_buf p;

	*out = NULL;
	if (!f || !(f->dir_path = full_path(ds, dir))) {
		free(f);
		snprintf(err, errlen, "avro_dir sink: out of memory");
		return -1;
	}
	f->fd = -1;
	if (mkdirs_durable(ds, f->dir_path, err, errlen) < 0)
		goto fail;
	sl_buf_init(&p, 0);
	sl_buf_printf(&p, "%s/.%s_%08x" TMP_SUFFIX, f->dir_path, first_csn, rand32());
	if (!(f->tmp_path = sl_buf_detach(&p))) {
		snprintf(err, errlen, "avro_dir sink: out of memory");
		goto fail;
	}
	f->fd = open(f->tmp_path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	if (f->fd < 0) {
		snprintf(err, errlen, "could not create \"%s\": %s", f->tmp_path, sl_strerror(errno));
		goto fail;
	}
	*out = f;
	return 0;
fail:
	free(f->tmp_path);
	free(f->dir_path);
	free(f);
	return -1;
}

static int ds_file_write(void *file, const struct iovec *iov, int iovcnt, char *err, size_t errlen)
{
	struct sl_store_file *f = file;

	if (writev_all(f->fd, iov, iovcnt) < 0) {
		snprintf(err, errlen, "could not write \"%s\": %s", f->tmp_path, sl_strerror(errno));
		return -1;
	}
	return 0;
}

/* Each finished or staged file waiting for the flush holds a descriptor: a
 * flush over more tables than the open file limit allows makes them
 * durable (and closes them) in batches of ds->unsynced_max.  A staged file
 * is still renamed at sync() only.  0, or -1 with a message in err. */
static int shed_descriptors(struct dir_store *ds, char *err, size_t errlen)
{
	if (ds->unsynced.n + (ds->staged.n - ds->staged_closed) < ds->unsynced_max)
		return 0;
	if (fsync_unsynced(ds, err, errlen) < 0)
		return -1;
	for (; ds->staged_closed < ds->staged.n; ds->staged_closed++) {
		struct sl_store_file *f = ds->staged.v[ds->staged_closed];
		if (f->fd >= 0 && fsync_close(ds, f, err, errlen) < 0)
			return -1;
	}
	return 0;
}

/* Every byte of f is written: its write-back starts now, and its fsync waits
 * for the first publish or sync() (fsync_unsynced), after the flush's other
 * files were written too. */
static int ds_file_finish(void *st, struct sl_store_file *f, const char *key, char *err, size_t errlen)
{
	struct dir_store *ds = st;

	(void)key;
	if (ptrs_push(&ds->unsynced, f) < 0) {
		snprintf(err, errlen, "avro_dir sink: out of memory");
		return -1;
	}
	/* Only a hint: an error shows again at the fsync. */
	(void)sync_file_range(f->fd, 0, 0, SYNC_FILE_RANGE_WRITE);
	return shed_descriptors(ds, err, errlen);
}

/* With sync = syncfs and more than SL_AVRO_DIR_SYNCFS_MIN files or folders
 * to make durable (n), one syncfs() of the file system that holds fd (or
 * the destination's path when fd is -1) does it for them all, and sets
 * ds->synced_until so that fsync_close and sync() skip theirs.  It also
 * waits for every other process's dirty data on that file system.  0, or -1
 * with a message in err. */
static int syncfs_of(struct dir_store *ds, size_t n, int fd, char *err, size_t errlen)
{
	int own = -1, rc = 0;

	ds->synced_until = false;
	if (!ds->use_syncfs || n <= SL_AVRO_DIR_SYNCFS_MIN)
		return 0;
	if (fd < 0 && (fd = own = open(ds->path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0) {
		snprintf(err, errlen, "could not open folder \"%s\": %s", ds->path, sl_strerror(errno));
		return -1;
	}
	ds->syncfs++;
	if (syncfs(fd) < 0) {
		snprintf(err, errlen, "could not syncfs %s: %s", ds->desc, sl_strerror(errno));
		rc = -1;
	} else {
		ds->synced_until = true;
	}
	if (own >= 0)
		close(own);
	return rc;
}

/* fsyncs and closes f, counted in counted's figures unless NULL (no fsync
 * right after counted's syncfs).  0, or -1 with a message in err (f->fd
 * stays open when the fsync failed). */
static int fsync_close(struct dir_store *counted, struct sl_store_file *f, char *err, size_t errlen)
{
	bool done = counted && counted->synced_until;

	if (counted && !done)
		counted->fsyncs++;
	if (!done && fsync(f->fd) < 0) {
		snprintf(err, errlen, "could not fsync \"%s\": %s", f->tmp_path, sl_strerror(errno));
		return -1;
	}
	if (counted)
		counted->synced_files++;
	if (close(f->fd) < 0) {
		f->fd = -1;
		snprintf(err, errlen, "could not close \"%s\": %s", f->tmp_path, sl_strerror(errno));
		return -1;
	}
	f->fd = -1;
	return 0;
}

/* fsyncs and closes every finished file that is not yet, each once, in the
 * order they were finished.  0, or -1 with a message in err (the files not
 * fsynced stay on the list). */
static int fsync_unsynced(struct dir_store *ds, char *err, size_t errlen)
{
	size_t i;
	int rc = 0;

	if (syncfs_of(ds, ds->unsynced.n, ds->unsynced.n ? ((struct sl_store_file *)ds->unsynced.v[0])->fd : -1,
		      err, errlen) < 0)
		return -1;
	for (i = 0; i < ds->unsynced.n && rc == 0; i++)
		rc = fsync_close(ds, ds->unsynced.v[i], err, errlen);
	if (rc < 0 && ((struct sl_store_file *)ds->unsynced.v[i - 1])->fd >= 0)
		i--;
	if (i > 0)   /* the list may be empty, with no array yet */
		memmove(ds->unsynced.v, ds->unsynced.v + i, (ds->unsynced.n - i) * sizeof *ds->unsynced.v);
	ds->unsynced.n -= i;
	ds->synced_until = false;
	return rc;
}

static void free_file(struct sl_store_file *f)
{
	free(f->tmp_path);
	free(f->dir_path);
	free(f);
}

/* Remembers dir (taken over) for the next sync(), once: many files share a
 * folder (and many new folders a parent), which is then fsynced once. */
static int note_sync(struct dir_store *ds, char *dir)
{
	for (size_t i = ds->sync_dirs.n; i-- > 0;) {
		if (!strcmp(ds->sync_dirs.v[i], dir)) {
			free(dir);
			return 0;
		}
	}
	if (ptrs_push(&ds->sync_dirs, dir) < 0) {
		free(dir);
		return -1;
	}
	return 0;
}

/* Renames from to to unless to exists: 0, SL_STORE_EXISTS, or -1 with a
 * message in err. */
static int rename_noreplace(const char *from, const char *to, char *err, size_t errlen)
{
	int e;

	if (renameat2(AT_FDCWD, from, AT_FDCWD, to, RENAME_NOREPLACE) == 0)
		return 0;
	e = errno;
	if (e == EEXIST)
		return SL_STORE_EXISTS;
	/* A file system without RENAME_NOREPLACE: link never replaces. */
	if (e == EINVAL || e == ENOSYS) {
		if (link(from, to) == 0) {
			unlink(from);
			return 0;
		}
		e = errno;
		if (e == EEXIST)
			return SL_STORE_EXISTS;
	}
	snprintf(err, errlen, "could not rename \"%s\" to \"%s\": %s", from, to, sl_strerror(e));
	return -1;
}

static int ds_file_publish(void *st, struct sl_store_file *f, const char *key, char *err, size_t errlen)
{
	struct dir_store *ds = st;
	char *path = full_path(ds, key), *dir;
	int rc;

	if (!path) {
		snprintf(err, errlen, "avro_dir sink: out of memory");
		return -1;
	}
	/* Never renamed before its content is durable. */
	if (f->fd >= 0 && fsync_unsynced(ds, err, errlen) < 0) {
		free(path);
		return -1;
	}
	if ((rc = rename_noreplace(f->tmp_path, path, err, errlen)) != 0) {
		free(path);
		return rc;
	}
	dir = folder_of(path);
	free(path);
	if (!dir || note_sync(ds, dir) < 0) {
		snprintf(err, errlen, "avro_dir sink: out of memory");
		return -1;
	}
	free_file(f);
	return 0;
}

static void ds_file_discard(void *st, struct sl_store_file *f)
{
	struct dir_store *ds = st;

	if (!f)
		return;
	ptrs_del(&ds->unsynced, f);
	if (f->fd >= 0)
		close(f->fd);
	if (unlink(f->tmp_path) < 0 && errno != ENOENT)
		sl_warn("could not remove \"%s\": %s", f->tmp_path, sl_strerror(errno));
	free_file(f);
}

static size_t depth_of(const char *path)
{
	size_t n = 0;

	for (; *path; path++)
		n += *path == '/';
	return n;
}

/* Deepest first: a folder's entries before the entry naming it. */
static int deeper_first(const void *a, const void *b)
{
	size_t da = depth_of(*(char *const *)a), db = depth_of(*(char *const *)b);

	return da < db ? 1 : da > db ? -1 : strcmp(*(char *const *)a, *(char *const *)b);
}

/* fsyncs and renames every staged file, in the order staged; drops them all,
 * also on failure (they were never durable).  0, or -1 with a message in
 * err. */
static int settle_staged(struct dir_store *ds, char *err, size_t errlen)
{
	int rc = syncfs_of(ds, ds->staged.n, ds->staged.n ? ((struct sl_store_file *)ds->staged.v[0])->fd : -1,
			   err, errlen);

	for (size_t i = 0; i < ds->staged.n; i++) {
		struct sl_store_file *f = ds->staged.v[i];
		char *dir;

		if (rc == 0 && (f->fd < 0 || fsync_close(ds, f, err, errlen) == 0)) {
			if (rename(f->tmp_path, f->dir_path) < 0) {
				snprintf(err, errlen, "could not rename \"%s\" to \"%s\": %s", f->tmp_path,
					 f->dir_path, sl_strerror(errno));
				rc = -1;
			} else if (!(dir = folder_of(f->dir_path)) || note_sync(ds, dir) < 0) {
				snprintf(err, errlen, "avro_dir sink: out of memory");
				rc = -1;
			}
		} else {
			rc = -1;
		}
		if (f->fd >= 0)
			close(f->fd);
		if (rc < 0 && unlink(f->tmp_path) < 0 && errno != ENOENT)
			sl_warn("could not remove \"%s\": %s", f->tmp_path, sl_strerror(errno));
		free_file(f);
	}
	ds->staged.n = 0;
	ds->staged_closed = 0;
	ds->synced_until = false;
	return rc;
}

static int ds_sync(void *st, char *err, size_t errlen)
{
	struct dir_store *ds = st;
	size_t nfolders;
	int rc = fsync_unsynced(ds, err, errlen);

	if (settle_staged(ds, err, errlen) < 0)
		rc = -1;
	nfolders = ds->sync_dirs.n;
	if (nfolders > 1)
		qsort(ds->sync_dirs.v, nfolders, sizeof *ds->sync_dirs.v, deeper_first);
	if (rc == 0 && syncfs_of(ds, nfolders, -1, err, errlen) < 0)
		rc = -1;
	for (size_t i = 0; i < nfolders; i++) {
		const char *dir = ds->sync_dirs.v[i];

		if (rc == 0 && !ds->synced_until && (ds->fsyncs++, sl_fsync_dir_of(dir, true) < 0)) {
			snprintf(err, errlen, "could not fsync folder \"%s\": %s", dir, sl_strerror(errno));
			rc = -1;
		}
		free(ds->sync_dirs.v[i]);
	}
	ds->sync_dirs.n = 0;
	if (rc == 0 && ds->syncfs > 0)
		sl_debug("%s: flushed %zu files, %zu fsyncs, %zu syncfs (%zu folders)", ds->desc,
			 ds->synced_files, ds->fsyncs, ds->syncfs, nfolders);
	else if (rc == 0 && ds->fsyncs > 0)
		sl_debug("%s: flushed %zu files, %zu fsyncs (%zu folders)", ds->desc, ds->synced_files,
			 ds->fsyncs, nfolders);
	ds->synced_until = false;
	ds->synced_files = 0;
	ds->fsyncs = 0;
	ds->syncfs = 0;
	return rc;
}

/* Writes a small file for key as "<folder>/.put-<8 hex>.tmp" (the folder
 * made by mkdirs_durable with defer), not fsynced: *out receives it, open,
 * with its final path as dir_path.  0, or -1 with a message in err. */
static int small_file_new(struct dir_store *ds, struct dir_store *defer, const char *key, const void *data,
			  size_t len, struct sl_store_file **out, char *err, size_t errlen)
{
	struct sl_store_file *f = calloc(1, sizeof *f);
	struct iovec iov = { .iov_base = (void *)data, .iov_len = len };
	char *dir = NULL;
	struct sl_buf b;
	int rc = -1;

	*out = NULL;
	if (f)
		f->fd = -1;
	if (!f || !(f->dir_path = full_path(ds, key)) || !(dir = folder_of(f->dir_path)))
		goto oom;
	if (mkdirs_durable(defer, dir, err, errlen) < 0)
		goto out;
	sl_buf_init(&b, 0);
	sl_buf_printf(&b, "%s/.put-%08x.tmp", dir, rand32());
	if (!(f->tmp_path = sl_buf_detach(&b)))
		goto oom;
	f->fd = open(f->tmp_path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	if (f->fd < 0) {
		snprintf(err, errlen, "could not create \"%s\": %s", f->tmp_path, sl_strerror(errno));
		goto out;
	}
	if (writev_all(f->fd, &iov, 1) < 0) {
		snprintf(err, errlen, "could not write \"%s\": %s", f->tmp_path, sl_strerror(errno));
		goto out;
	}
	*out = f;
	f = NULL;
	rc = 0;
	goto out;
oom:
	snprintf(err, errlen, "avro_dir sink: out of memory");
out:
	if (f) {
		if (f->fd >= 0) {
			close(f->fd);
			unlink(f->tmp_path);
		}
		free_file(f);
	}
	free(dir);
	return rc;
}

/* Writes a small file for key durably: fsynced under a temporary name,
 * renamed (noreplace: never over an existing key, SL_STORE_EXISTS), its
 * folder fsynced.  0, SL_STORE_EXISTS, or -1 with a message in err. */
static int put_small(struct dir_store *ds, const char *key, const void *data, size_t len, bool noreplace,
		     char *err, size_t errlen)
{
	struct sl_store_file *f;
	int rc = -1;

	if (small_file_new(ds, NULL, key, data, len, &f, err, errlen) < 0)
		return -1;
	if (fsync_close(NULL, f, err, errlen) < 0)
		goto out;
	if (noreplace) {
		if ((rc = rename_noreplace(f->tmp_path, f->dir_path, err, errlen)) != 0)
			goto out;
	} else if (rename(f->tmp_path, f->dir_path) < 0) {
		snprintf(err, errlen, "could not rename \"%s\" to \"%s\": %s", f->tmp_path, f->dir_path,
			 sl_strerror(errno));
		goto out;
	}
	rc = 0;
	if (sl_fsync_dir_of(f->dir_path, false) < 0) {
		snprintf(err, errlen, "could not fsync the folder of \"%s\": %s", f->dir_path, sl_strerror(errno));
		rc = -1;
	}
	free_file(f);
	return rc;
out:
	if (f->fd >= 0)
		close(f->fd);
	unlink(f->tmp_path);
	free_file(f);
	return rc;
}

static int ds_put(void *st, const char *key, const void *data, size_t len, char *err, size_t errlen)
{
	return put_small(st, key, data, len, false, err, errlen);
}

/* put, but never replacing key: a rename that fails when it exists. */
static int ds_put_new(void *st, const char *key, const void *data, size_t len, char *err, size_t errlen)
{
	return put_small(st, key, data, len, true, err, errlen);
}

/* put, durable (and visible) only at the next sync(): settle_staged. */
static int ds_stage(void *st, const char *key, const void *data, size_t len, char *err, size_t errlen)
{
	struct dir_store *ds = st;
	struct sl_store_file *f;

	if (small_file_new(ds, ds, key, data, len, &f, err, errlen) < 0)
		return -1;
	if (ptrs_push(&ds->staged, f) < 0) {
		close(f->fd);
		unlink(f->tmp_path);
		free_file(f);
		snprintf(err, errlen, "avro_dir sink: out of memory");
		return -1;
	}
	/* Only a hint: an error shows again at the fsync. */
	(void)sync_file_range(f->fd, 0, 0, SYNC_FILE_RANGE_WRITE);
	return shed_descriptors(ds, err, errlen);
}

static int ds_get(void *st, const char *key, struct sl_buf *out, char *err, size_t errlen)
{
	struct dir_store *ds = st;
	char *path = full_path(ds, key), *data = NULL;
	size_t len = 0;
	int rc;

	if (!path) {
		snprintf(err, errlen, "avro_dir sink: out of memory");
		return -1;
	}
	rc = sl_read_file(path, &data, &len, err, errlen);
	free(path);
	if (rc == 1)
		return SL_STORE_NOT_FOUND;
	if (rc < 0)
		return -1;
	rc = sl_buf_append(out, data, len) < 0 ? -1 : 0;
	if (rc < 0)
		snprintf(err, errlen, "avro_dir sink: out of memory");
	free(data);
	return rc;
}

struct list_walk {
	size_t root_len;                /* strlen(path) + 1: where a key starts */
	sl_store_list_fn fn;
	void *arg;
};

static int visit_list(struct walk *w, const char *path, const char *name, const struct stat *sb,
		      char *err, size_t errlen)
{
	struct list_walk *lw = w->arg;

	if (is_temp_name(name))
		return 0;
	if (lw->fn(lw->arg, path + lw->root_len, (uint64_t)sb->st_size,
		   (int64_t)sb->st_mtim.tv_sec * 1000 + sb->st_mtim.tv_nsec / 1000000) < 0) {
		if (!err[0])
			snprintf(err, errlen, "listing stopped at \"%s\"", path);
		return -1;
	}
	return 0;
}

static int ds_list(void *st, const char *prefix, sl_store_list_fn fn, void *arg, char *err, size_t errlen)
{
	struct dir_store *ds = st;
	struct list_walk lw = { strlen(ds->path) + 1, fn, arg };
	struct walk w = { .visit = visit_list, .arg = &lw, .what = "" };
	struct sl_buf path;
	int rc;

	err[0] = '\0';
	sl_buf_init(&path, 0);
	sl_buf_printf(&path, "%s/%s", ds->path, prefix);
	if (sl_buf_failed(&path)) {
		snprintf(err, errlen, "avro_dir sink: out of memory");
		return -1;
	}
	rc = walk_tree(&path, &w, err, errlen);
	sl_buf_free(&path);
	return rc;
}

static int ds_remove(void *st, const char *key, char *err, size_t errlen)
{
	struct dir_store *ds = st;
	char *path = full_path(ds, key);
	int rc = 0;

	if (!path) {
		snprintf(err, errlen, "avro_dir sink: out of memory");
		return -1;
	}
	if (unlink(path) < 0) {
		if (errno != ENOENT) {
			snprintf(err, errlen, "could not remove \"%s\": %s", path, sl_strerror(errno));
			rc = -1;
		}
	} else if (sl_fsync_dir_of(path, false) < 0) {
		snprintf(err, errlen, "could not fsync the folder of \"%s\": %s", path, sl_strerror(errno));
		rc = -1;
	}
	free(path);
	return rc;
}

static int ds_fetch(void *st, const char *key, char **path, bool *temporary, char *err, size_t errlen)
{
	struct dir_store *ds = st;

	*temporary = false;
	if (!(*path = full_path(ds, key))) {
		snprintf(err, errlen, "avro_dir sink: out of memory");
		return -1;
	}
	if (access(*path, R_OK) != 0) {
		int e = errno;
		if (e == ENOENT) {
			free(*path);
			*path = NULL;
			return SL_STORE_NOT_FOUND;
		}
		snprintf(err, errlen, "cannot read \"%s\": %s", *path, sl_strerror(e));
		free(*path);
		*path = NULL;
		return -1;
	}
	return 0;
}

/* The stream's leftover temporary files (store op cleanup). */
static int ds_cleanup(void *st, const char *stream, char *err, size_t errlen)
{
	struct dir_store *ds = st;
	struct sl_buf root;
	int rc;

	sl_buf_init(&root, 0);
	sl_buf_printf(&root, "%s/%s", ds->path, stream);
	if (sl_buf_failed(&root)) {
		snprintf(err, errlen, "avro_dir sink: out of memory");
		return -1;
	}
	rc = remove_leftovers(root.data, stream, err, errlen);
	sl_buf_free(&root);
	return rc;
}

static const char *ds_describe(void *st)
{
	return ((struct dir_store *)st)->desc;
}

static void ds_close(void *st)
{
	struct dir_store *ds = st;

	if (!ds)
		return;
	for (size_t i = 0; i < ds->sync_dirs.n; i++)
		free(ds->sync_dirs.v[i]);
	free(ds->sync_dirs.v);
	for (size_t i = 0; i < ds->staged.n; i++)
		ds_file_discard(ds, ds->staged.v[i]);
	free(ds->staged.v);
	free(ds->unsynced.v);
	free(ds->desc);
	free(ds->path);
	free(ds);
}

static const struct sl_store_ops dir_store_ops = {
	.file_new = ds_file_new,
	.file_write = ds_file_write,
	.file_finish = ds_file_finish,
	.file_publish = ds_file_publish,
	.file_discard = ds_file_discard,
	.sync = ds_sync,
	.stage = ds_stage,
	.put = ds_put,
	.put_new = ds_put_new,
	.get = ds_get,
	.list = ds_list,
	.remove = ds_remove,
	.fetch = ds_fetch,
	.cleanup = ds_cleanup,
	.describe = ds_describe,
	.close = ds_close,
};

/* How many finished files wait, open, for the flush's fsync: a quarter of
 * what the process may open (the tree keeps half open for writing; see
 * open_bound in sinks/avro_tree/tree.c), at least 8. */
static size_t unsynced_bound(void)
{
	return (size_t)sl_fd_share(4, 8, (uint64_t)1 << 28);
}

/* Makes the folder store for path (the destination's path). */
static int dir_store_new(struct sl_store *out, const char *path, char *err, size_t errlen)
{
	struct dir_store *ds = calloc(1, sizeof *ds);
	struct sl_buf b;

	sl_buf_init(&b, 0);
	sl_buf_printf(&b, "folder \"%s\"", path);
	if (!ds || !(ds->path = strdup(path)) || !(ds->desc = sl_buf_detach(&b))) {
		sl_buf_free(&b);
		ds_close(ds);
		snprintf(err, errlen, "avro_dir sink: out of memory");
		return -1;
	}
	ds->unsynced_max = unsynced_bound();
	out->ops = &dir_store_ops;
	out->ctx = ds;
	return 0;
}

/* A folder store's sync setting (enum sl_avro_dir_sync). */
static void dir_store_set_sync(struct sl_store *store, enum sl_avro_dir_sync sync)
{
	((struct dir_store *)store->ctx)->use_syncfs = sync == SL_AVRO_DIR_SYNCFS;
}

int sl_avro_dir_store(struct sl_store *out, const char *path, char *err, size_t errlen)
{
	return dir_store_new(out, path, err, errlen);
}

/* ---------------------------------------------------------------------- */
/* The sink                                                               */

static int ad_open(void **ctx, const void *conf, const struct sl_sink_stream *st, char *err,
		   size_t errlen)
{
	const struct sl_avro_dir_conf *dc = conf;
	const char *dest = st->destination ? st->destination : "";
	struct sl_tree_conf tc;
	struct sl_store store;
	struct sl_tree *tree;
	struct sl_buf b;
	char *root, why[128];
	int rc;

	*ctx = NULL;
	if (!dc->path || !*dc->path) {
		snprintf(err, errlen, "destination \"%s\": path is not set", dest);
		return -1;
	}
	if (!st->name || !*st->name || strchr(st->name, '/') || !strcmp(st->name, ".") ||
	    !strcmp(st->name, "..")) {
		snprintf(err, errlen, "stream name \"%s\" cannot name a folder", st->name ? st->name : "");
		return -1;
	}
	if (sl_ocf_check_level(dc->codec, dc->compression_level, why, sizeof why) < 0) {
		snprintf(err, errlen, "destination \"%s\": %s", dest, why);
		return -1;
	}
	sl_buf_init(&b, 0);
	sl_buf_printf(&b, "%s/%s", dc->path, st->name);
	if (!(root = sl_buf_detach(&b))) {
		snprintf(err, errlen, "avro_dir sink: out of memory");
		return -1;
	}
	rc = mkdirs_durable(NULL, root, err, errlen) < 0 ? -1 : 0;
	free(root);
	if (rc < 0 || dir_store_new(&store, dc->path, err, errlen) < 0) {
		sl_outage_fail(st->outage, err);   /* the folder cannot be made or opened: retried */
		return -1;
	}
	dir_store_set_sync(&store, dc->sync);
	memset(&tc, 0, sizeof tc);
	tc.codec = dc->codec;
	tc.compression_level = dc->compression_level;
	tc.compression_threads = dc->compression_threads;
	tc.max_file_bytes = dc->max_file_bytes;
	tc.max_file_seconds = dc->max_file_seconds;
	tc.merge = st->mode == SL_WRITE_MERGE;
	tc.compact_after_files = dc->compact_after_files;
	tc.state_dir = st->state_dir;
	tc.outage = st->outage;
	if ((rc = sl_tree_open(&tree, store, &tc, st->name, err, errlen)) < 0) {
		if (rc == SL_EFAIL)
			sl_outage_fail(st->outage, err);
		return rc;
	}
	*ctx = tree;
	return 0;
}

void sl_avro_dir_get_stats(void *ctx, struct sl_avro_stats *out)
{
	sl_tree_get_stats(ctx, out);
}

/* `sluice verify` of an avro_dir destination. */
static int ad_verify(const void *conf, const struct sl_sink_stream *st, FILE *out, char *err, size_t errlen)
{
	const struct sl_avro_dir_conf *dc = conf;
	struct sl_store store;
	int rc;

	if (dir_store_new(&store, dc->path, err, errlen) < 0)
		return SL_EFAIL;
	rc = sl_tree_verify(store, st->name, out, err, errlen);
	store.ops->close(store.ctx);
	return rc;
}

/* `sluice compact` of an avro_dir destination. */
static int ad_compact(const void *conf, const struct sl_sink_stream *st, const char *object, FILE *out, char *err,
		      size_t errlen)
{
	const struct sl_avro_dir_conf *dc = conf;
	struct sl_store store;
	int rc;

	if (dir_store_new(&store, dc->path, err, errlen) < 0)
		return SL_EFAIL;
	rc = sl_tree_compact_with(store, dc->codec, dc->compression_level, dc->compression_threads, st->state_dir,
				  st->name, object, out, err, errlen);
	store.ops->close(store.ctx);
	return rc;
}

/* `sluice check`: the path, or the nearest folder above it that exists
 * (where open() would create it), must be writable.  Nothing is created. */
static int ad_check(const void *conf, const struct sl_sink_stream *st, FILE *out, char *err,
		    size_t errlen)
{
	const struct sl_avro_dir_conf *dc = conf;
	const char *dest = st->destination ? st->destination : "";
	bool exists = access(dc->path, F_OK) == 0;
	char *dir = strdup(dc->path);
	int rc = SL_EFAIL;

	if (!dir) {
		snprintf(err, errlen, "avro_dir sink: out of memory");
		goto out;
	}
	while (access(dir, F_OK) != 0) {
		char *slash = strrchr(dir, '/');

		if (!slash) {
			free(dir);
			if (!(dir = strdup("."))) {
				snprintf(err, errlen, "avro_dir sink: out of memory");
				goto out;
			}
			break;
		}
		if (slash == dir) {
			dir[1] = '\0';
			break;
		}
		*slash = '\0';
	}
	if (access(dir, W_OK) != 0) {
		snprintf(err, errlen, "destination \"%s\": path \"%s\" is not writable (\"%s\": %s)",
			 dest, dc->path, dir, sl_strerror(errno));
		goto out;
	}
	fprintf(out, "stream %s: destination %s: path %s %s\n", st->name, dest, dc->path,
		exists ? "is writable" : "can be created");
	rc = SL_OK;
out:
	free(dir);
	return rc;
}

static const struct sl_keychoice ad_syncs[] = {
	{ "fsync", SL_AVRO_DIR_FSYNC }, { "syncfs", SL_AVRO_DIR_SYNCFS }, { NULL, 0 },
};

/* The keys of [destination.NAME] with type = avro_dir (doc/configuration.md). */
static const struct sl_keydesc ad_keys[] = {
	{ .name = "path", .type = SL_KT_STRING, .flags = SL_KF_REQUIRED,
	  FIELD(struct sl_avro_dir_conf, path) },
	SL_TREE_KEY_CODEC(struct sl_avro_dir_conf),
	SL_TREE_KEY_COMPRESSION_LEVEL(struct sl_avro_dir_conf),
	SL_TREE_KEY_COMPRESSION_THREADS(struct sl_avro_dir_conf),
	SL_TREE_KEY_MAX_FILE_BYTES(struct sl_avro_dir_conf, UINT64_MAX),
	SL_TREE_KEY_MAX_FILE_SECONDS(struct sl_avro_dir_conf),
	SL_TREE_KEY_COMPACT_AFTER_FILES(struct sl_avro_dir_conf),
	{ .name = "sync", .type = SL_KT_ENUM, .choices = ad_syncs, .def = "fsync",
	  FIELD(struct sl_avro_dir_conf, sync) },
};

static int ad_conf_check(const void *conf, const struct sl_ini_section *sec, struct sl_keyerr *er)
{
	const struct sl_avro_dir_conf *dc = conf;

	return sl_tree_conf_check(dc->codec, dc->compression_level, sec, er);
}

/* SL_KT_ENUM stores through the field's size. */
_Static_assert(sizeof(enum sl_codec) == 4, "enum size");
_Static_assert(sizeof(enum sl_avro_dir_sync) == 4, "enum size");

const struct sl_sink_ops sl_avro_dir_ops = {
	.type = "avro_dir",
	.caps = SL_SINK_CAP_MERGE,
	.carries_missing = sl_avro_carries_missing,
	.keys = ad_keys,
	.nkeys = sizeof ad_keys / sizeof ad_keys[0],
	.conf_size = sizeof(struct sl_avro_dir_conf),
	.conf_check = ad_conf_check,
	.check = ad_check,
	.verify = ad_verify,
	.compact = ad_compact,
	.open = ad_open,
	SL_TREE_SINK_OPS,
};
