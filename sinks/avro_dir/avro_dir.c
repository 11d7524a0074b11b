/*
 * sinks/avro_dir/avro_dir.c: the avro_dir sink (see avro_dir.h for the
 * layout and the durability rules).
 *
 * State: one struct obj per object (table) seen, found through a small hash
 * table, holding the encoder of its current table version and its open file.
 * Open files are also on a list in opening order, so the oldest one (for
 * flush_due) is at its head.  Finished files wait on the `done` list, already
 * fsynced and closed, until flush() renames them.  Memory is bounded by the
 * number of tables: per open file one block buffer, and a few path strings
 * per finished file; the compressor and its output buffer are shared by all
 * files (struct sl_ocf_codec).
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
#include <time.h>
#include <unistd.h>

#include "common/buf.h"
#include "common/log.h"
#include "common/util.h"
#include "sinks/avro/avro_enc.h"
#include "sinks/avro/ocf.h"

#define DEFAULT_MAX_FILE_BYTES ((uint64_t)64 << 20)
/* A file being written is ".<CSN>_<8 hex>" TMP_SUFFIX (see is_temp_name). */
#define TMP_SUFFIX ".avro.tmp"

struct obj {
	char *object;
	struct sl_avro_enc *enc;       /* current table version, NULL until first use */
	struct sl_ocf_writer *w;       /* open file, or NULL */
	char *dir;                     /* final folder of the open file */
	char first_csn[SL_CSN_LEN + 1];
	char last_csn[SL_CSN_LEN + 1];
	int64_t opened_ms;
	struct obj *hnext;             /* hash chain */
	struct obj *oprev, *onext;     /* open-file list, oldest first */
};

/* A finished file: complete and fsynced, waiting for flush() to rename it. */
struct done_file {
	char *tmp_path;
	char *dir;
	char *object;
	char first_csn[SL_CSN_LEN + 1];
	char last_csn[SL_CSN_LEN + 1];
	struct done_file *next;
};

struct avro_dir {
	char *root;                    /* <path>/<stream> */
	char *stream;
	struct sl_ocf_codec *codec;    /* shared by every open file */
	uint64_t max_file_bytes;
	int64_t max_file_ms;
	struct obj **buckets;
	size_t nbuckets, nobjs;
	struct obj *last;              /* the object of the previous write */
	struct obj *open_head, *open_tail;
	struct done_file *done, **done_tail;
	bool pending;
	bool has_mark;                 /* mark(): everything written is at or before mark */
	struct sl_position mark;
	struct sl_avro_stats stats;
};

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

static uint64_t hash_str(const char *s)
{
	uint64_t h = UINT64_C(0xcbf29ce484222325);

	for (; *s; s++) {
		h ^= (unsigned char)*s;
		h *= UINT64_C(0x100000001b3);
	}
	return h;
}

/* Finds the state of object name, or NULL. */
static struct obj *obj_find(const struct avro_dir *ad, const char *name)
{
	struct obj *o = ad->buckets[hash_str(name) & (ad->nbuckets - 1)];

	while (o && strcmp(o->object, name))
		o = o->hnext;
	return o;
}

/* Finds the state of object name, creating it if needed; NULL if out of memory. */
static struct obj *obj_get(struct avro_dir *ad, const char *name)
{
	struct obj *o;
	size_t b;

	if (ad->last && !strcmp(ad->last->object, name))
		return ad->last;
	b = hash_str(name) & (ad->nbuckets - 1);
	for (o = ad->buckets[b]; o; o = o->hnext)
		if (!strcmp(o->object, name))
			return ad->last = o;
	if (ad->nobjs >= ad->nbuckets) {
		size_t nb = ad->nbuckets * 2;
		struct obj **nt = calloc(nb, sizeof *nt);
		if (!nt)
			return NULL;
		for (size_t i = 0; i < ad->nbuckets; i++) {
			struct obj *next;
			for (o = ad->buckets[i]; o; o = next) {
				size_t k = hash_str(o->object) & (nb - 1);
				next = o->hnext;
				o->hnext = nt[k];
				nt[k] = o;
			}
		}
		free(ad->buckets);
		ad->buckets = nt;
		ad->nbuckets = nb;
		b = hash_str(name) & (nb - 1);
	}
	o = calloc(1, sizeof *o);
	if (!o || !(o->object = strdup(name))) {
		free(o);
		return NULL;
	}
	o->hnext = ad->buckets[b];
	ad->buckets[b] = o;
	ad->nobjs++;
	return ad->last = o;
}

static void open_list_add(struct avro_dir *ad, struct obj *o)
{
	o->onext = NULL;
	o->oprev = ad->open_tail;
	if (ad->open_tail)
		ad->open_tail->onext = o;
	else
		ad->open_head = o;
	ad->open_tail = o;
}

static void open_list_del(struct avro_dir *ad, struct obj *o)
{
	if (o->oprev)
		o->oprev->onext = o->onext;
	else
		ad->open_head = o->onext;
	if (o->onext)
		o->onext->oprev = o->oprev;
	else
		ad->open_tail = o->oprev;
	o->oprev = o->onext = NULL;
}

/* mkdir -p that fsyncs the parent of every folder it creates, so that a new
 * folder survives a crash along with the files later put in it.  Returns 0,
 * or -1 with a message in err. */
static int mkdirs_durable(const char *path, char *err, size_t errlen)
{
	struct sl_buf b;
	int rc = -1;

	sl_buf_init(&b, 0);
	if (sl_buf_puts(&b, path) < 0) {
		snprintf(err, errlen, "could not create folder \"%s\": out of memory", path);
		goto out;
	}
	for (size_t i = 1; i <= b.len; i++) {
		char saved = b.data[i];
		if (saved != '/' && saved != '\0')
			continue;
		if (i > 0 && b.data[i - 1] == '/')
			continue;
		b.data[i] = '\0';
		if (mkdir(b.data, 0755) == 0) {
			if (sl_fsync_dir_of(b.data, false) < 0) {
				snprintf(err, errlen, "could not fsync the parent of \"%s\": %s", b.data,
					 strerror(errno));
				goto out;
			}
		} else if (errno != EEXIST) {
			snprintf(err, errlen, "could not create folder \"%s\": %s", b.data, strerror(errno));
			goto out;
		}
		b.data[i] = saved;
	}
	rc = 0;
out:
	sl_buf_free(&b);
	return rc;
}

/* Opens a new file for o, whose first record is c. */
static int open_file(struct avro_dir *ad, struct obj *o, const struct sl_change *c,
		     char *err, size_t errlen)
{
	struct sl_buf p;
	struct tm tm;
	time_t secs;
	int64_t ts = c->source_ts_us;
	const char *schema;
	size_t schema_len;
	int rc = -1;

	/* Floor division, so that times before 1970 land in the right second. */
	secs = (time_t)(ts >= 0 ? ts / 1000000 : -((-ts + 999999) / 1000000));
	if (!gmtime_r(&secs, &tm)) {
		snprintf(err, errlen, "table \"%s\": source time %lld is out of range", o->object,
			 (long long)ts);
		return -1;
	}
	sl_buf_init(&p, 0);
	sl_buf_printf(&p, "%s/%s/%04d/%02d/%02d/%02d/%02d", ad->root, o->object, tm.tm_year + 1900,
		      tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min);
	free(o->dir);
	o->dir = sl_buf_detach(&p);
	if (!o->dir) {
		snprintf(err, errlen, "table \"%s\": out of memory", o->object);
		return -1;
	}
	if (mkdirs_durable(o->dir, err, errlen) < 0)
		return -1;
	sl_buf_init(&p, 0);
	sl_buf_printf(&p, "%s/.%s_%08x" TMP_SUFFIX, o->dir, c->csn, rand32());
	if (sl_buf_failed(&p)) {
		snprintf(err, errlen, "table \"%s\": out of memory", o->object);
		goto out;
	}
	schema = sl_avro_enc_schema(o->enc, &schema_len);
	if (sl_ocf_open(&o->w, p.data, schema, schema_len, ad->codec, 0, err, errlen) < 0)
		goto out;
	memcpy(o->first_csn, c->csn, sizeof o->first_csn);
	memcpy(o->last_csn, c->csn, sizeof o->last_csn);
	o->opened_ms = sl_mono_ms();
	open_list_add(ad, o);
	rc = 0;
out:
	sl_buf_free(&p);
	return rc;
}

/* Finishes o's open file: last block, fsync, close; the file then waits on
 * the done list for flush() to rename it.  On failure the file is removed. */
static int finish_file(struct avro_dir *ad, struct obj *o, char *err, size_t errlen)
{
	struct done_file *d = calloc(1, sizeof *d);
	char *tmp = strdup(sl_ocf_path(o->w));
	int rc;

	open_list_del(ad, o);
	rc = sl_ocf_close(o->w, true, err, errlen);
	o->w = NULL;
	if (rc == 0 && (!d || !tmp || !(d->dir = strdup(o->dir)) || !(d->object = strdup(o->object)))) {
		snprintf(err, errlen, "table \"%s\": out of memory", o->object);
		rc = -1;
	}
	if (rc < 0) {
		if (tmp)
			unlink(tmp);
		free(tmp);
		if (d) {
			free(d->dir);
			free(d->object);
			free(d);
		}
		return -1;
	}
	d->tmp_path = tmp;
	memcpy(d->first_csn, o->first_csn, sizeof d->first_csn);
	memcpy(d->last_csn, o->last_csn, sizeof d->last_csn);
	*ad->done_tail = d;
	ad->done_tail = &d->next;
	return 0;
}

static void free_done(struct done_file *d)
{
	free(d->tmp_path);
	free(d->dir);
	free(d->object);
	free(d);
}

/* Renames a finished file to "<first>_<last>_<8 hex>.avro" without ever
 * replacing an existing file.  Returns 0, or -1 with a message in err. */
static int publish(struct done_file *d, char *err, size_t errlen)
{
	char path[4096];

	for (int attempt = 0; attempt < 8; attempt++) {
		int n = snprintf(path, sizeof path, "%s/%s_%s_%08x.avro", d->dir, d->first_csn,
				 d->last_csn, rand32());
		if (n < 0 || (size_t)n >= sizeof path) {
			snprintf(err, errlen, "file name in \"%s\" is too long", d->dir);
			return -1;
		}
		if (renameat2(AT_FDCWD, d->tmp_path, AT_FDCWD, path, RENAME_NOREPLACE) == 0)
			return 0;
		if (errno == EEXIST)
			continue;
		if (errno == EINVAL || errno == ENOSYS) {
			/* The file system lacks RENAME_NOREPLACE: check, then rename. */
			if (access(path, F_OK) == 0)
				continue;
			if (rename(d->tmp_path, path) == 0)
				return 0;
		}
		snprintf(err, errlen, "could not rename \"%s\" to \"%s\": %s", d->tmp_path, path,
			 strerror(errno));
		return -1;
	}
	snprintf(err, errlen, "could not find a free file name in \"%s\"", d->dir);
	return -1;
}

/* What sweep_tree removes: the regular files whose name match() accepts. */
struct sweep {
	bool (*match)(const char *name, const struct sweep *sw);
	const char *csn_a;   /* for match_backfill: the first CSN of the range */
	const char *csn_b;   /* ... and the last */
	const char *what;    /* names the files in the debug log */
	uint64_t removed;
};

/* True if a file spanning first..last CSN holds only records with CSNs in
 * [a, b] (CSNs are fixed-width, so string order is CSN order). */
static bool backfill_span(const char *first, const char *last, const char *a, const char *b)
{
	return strcmp(first, a) >= 0 && strcmp(last, b) <= 0;
}

/* Matches "<first>_<last>_..." file names of one backfill run. */
static bool match_backfill(const char *name, const struct sweep *sw)
{
	char first[SL_CSN_LEN + 1], last[SL_CSN_LEN + 1];

	if (strlen(name) < 2 * SL_CSN_LEN + 2 || name[SL_CSN_LEN] != '_' || name[2 * SL_CSN_LEN + 1] != '_')
		return false;
	memcpy(first, name, SL_CSN_LEN);
	first[SL_CSN_LEN] = '\0';
	memcpy(last, name + SL_CSN_LEN + 1, SL_CSN_LEN);
	last[SL_CSN_LEN] = '\0';
	return backfill_span(first, last, sw->csn_a, sw->csn_b);
}

static bool span_of(const char *p, size_t n, const char *set)
{
	for (size_t i = 0; i < n; i++)
		if (!p[i] || !strchr(set, p[i]))
			return false;
	return true;
}

/* True for exactly the names open_file gives files being written:
 * ".<16 uppercase hex>-<10 digits>_<8 lowercase hex>.avro.tmp". */
static bool is_temp_name(const char *name, const struct sweep *sw)
{
	(void)sw;
	return name[0] == '.' && span_of(name + 1, 16, "0123456789ABCDEF") && name[17] == '-' &&
	       span_of(name + 18, 10, "0123456789") && name[28] == '_' &&
	       span_of(name + 29, 8, "0123456789abcdef") && strcmp(name + 37, TMP_SUFFIX) == 0;
}

/* Walks the folder path (a buffer it appends to and restores) and the
 * folders below it without following symbolic links, unlinking the regular
 * files sw->match() accepts and counting them in sw->removed; fsyncs every
 * folder it removed something from.  A missing folder is not an error.
 * Returns 0, or -1 with a message in err. */
static int sweep_tree(struct sl_buf *path, struct sweep *sw, char *err, size_t errlen)
{
	DIR *dir = opendir(path->data);
	struct dirent *de;
	size_t base = path->len;
	bool removed = false;
	int rc = 0;

	if (!dir) {
		if (errno == ENOENT)
			return 0;
		snprintf(err, errlen, "could not open folder \"%s\": %s", path->data, strerror(errno));
		return -1;
	}
	while (rc == 0 && (errno = 0, de = readdir(dir)) != NULL) {
		unsigned char type = de->d_type;
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		path->len = base;
		sl_buf_putc(path, '/');
		if (sl_buf_puts(path, de->d_name) < 0) {
			snprintf(err, errlen, "out of memory walking \"%.*s\"", (int)base, path->data);
			rc = -1;
			break;
		}
		if (type == DT_UNKNOWN) {
			/* Some file systems leave d_type out. */
			struct stat sb;
			if (lstat(path->data, &sb) < 0) {
				snprintf(err, errlen, "could not stat \"%s\": %s", path->data, strerror(errno));
				rc = -1;
				break;
			}
			type = S_ISDIR(sb.st_mode) ? DT_DIR : S_ISREG(sb.st_mode) ? DT_REG : DT_LNK;
		}
		if (type == DT_DIR) {
			rc = sweep_tree(path, sw, err, errlen);
		} else if (type == DT_REG && sw->match(de->d_name, sw)) {
			if (unlink(path->data) < 0) {
				snprintf(err, errlen, "could not remove \"%s\": %s", path->data, strerror(errno));
				rc = -1;
			} else {
				sl_debug("removed %s \"%s\"", sw->what, path->data);
				sw->removed++;
				removed = true;
			}
		}
	}
	if (rc == 0 && errno != 0) {
		path->len = base;
		path->data[base] = '\0';
		snprintf(err, errlen, "could not read folder \"%s\": %s", path->data, strerror(errno));
		rc = -1;
	}
	closedir(dir);
	path->len = base;
	path->data[base] = '\0';
	if (removed && sl_fsync_dir_of(path->data, true) < 0 && rc == 0) {
		snprintf(err, errlen, "could not fsync folder \"%s\": %s", path->data, strerror(errno));
		rc = -1;
	}
	return rc;
}

/* Removes the temporary files a crashed run left under the stream's folder
 * (they are never complete: a finished file is renamed by flush() before its
 * rows are acknowledged, so the source sends those rows again).  Returns 0,
 * or -1 with a message in err. */
static int remove_leftovers(struct avro_dir *ad, char *err, size_t errlen)
{
	struct sweep sw = { .match = is_temp_name, .what = "leftover temporary file" };
	struct sl_buf path;
	int rc;

	sl_buf_init(&path, 0);
	if (sl_buf_puts(&path, ad->root) < 0) {
		snprintf(err, errlen, "avro_dir sink: out of memory");
		return -1;
	}
	rc = sweep_tree(&path, &sw, err, errlen);
	sl_buf_free(&path);
	if (sw.removed > 0)
		sl_info("stream \"%s\": removed %" PRIu64 " leftover temporary file%s under \"%s\"",
			ad->stream, sw.removed, sw.removed == 1 ? "" : "s", ad->root);
	return rc;
}

static int ad_open(void **ctx, const void *conf, const struct sl_sink_stream *st, char *err,
		   size_t errlen)
{
	const struct sl_avro_dir_conf *dc = conf;
	const char *dest = st->destination ? st->destination : "";
	struct avro_dir *ad;
	struct sl_buf b;

	*ctx = NULL;
	if (st->mode == SL_WRITE_MERGE) {
		snprintf(err, errlen, "avro_dir merge mode is not implemented yet");
		return -1;
	}
	if (!dc->path || !*dc->path) {
		snprintf(err, errlen, "destination \"%s\": path is not set", dest);
		return -1;
	}
	if (!st->name || !*st->name || strchr(st->name, '/') || !strcmp(st->name, ".") ||
	    !strcmp(st->name, "..")) {
		snprintf(err, errlen, "stream name \"%s\" cannot name a folder", st->name ? st->name : "");
		return -1;
	}
	if (dc->codec == SL_CODEC_DEFLATE && (dc->compression_level < 1 || dc->compression_level > 9)) {
		snprintf(err, errlen, "destination \"%s\": compression_level %d is not in 1-9",
			 dest, dc->compression_level);
		return -1;
	}
	ad = calloc(1, sizeof *ad);
	if (!ad)
		goto oom;
	ad->max_file_bytes = dc->max_file_bytes ? dc->max_file_bytes : DEFAULT_MAX_FILE_BYTES;
	ad->max_file_ms = dc->max_file_seconds > INT64_MAX / 1000 ? INT64_MAX
								   : (int64_t)dc->max_file_seconds * 1000;
	ad->done_tail = &ad->done;
	ad->nbuckets = 16;
	ad->buckets = calloc(ad->nbuckets, sizeof *ad->buckets);
	ad->stream = strdup(st->name);
	sl_buf_init(&b, 0);
	sl_buf_printf(&b, "%s/%s", dc->path, st->name);
	ad->root = sl_buf_detach(&b);
	if (!ad->buckets || !ad->stream || !ad->root)
		goto oom;
	if (sl_ocf_codec_new(&ad->codec, dc->codec, dc->compression_level, err, errlen) < 0)
		goto fail;
	if (mkdirs_durable(ad->root, err, errlen) < 0 || remove_leftovers(ad, err, errlen) < 0)
		goto fail;
	*ctx = ad;
	return 0;
oom:
	snprintf(err, errlen, "avro_dir sink: out of memory");
fail:
	if (ad) {
		sl_ocf_codec_free(ad->codec);
		free(ad->buckets);
		free(ad->stream);
		free(ad->root);
		free(ad);
	}
	return -1;
}

static int ad_write(void *ctx, const struct sl_change *c, char *err, size_t errlen)
{
	struct avro_dir *ad = ctx;
	const struct sl_table *t = c->table;
	struct obj *o = obj_get(ad, t->object);

	if (!o) {
		snprintf(err, errlen, "table \"%s\": out of memory", t->object);
		return -1;
	}
	if (!o->enc || strcmp(sl_avro_enc_schema_key(o->enc), t->schema_key) != 0) {
		/* A new table version starts a new file. */
		if (o->w && finish_file(ad, o, err, errlen) < 0)
			return -1;
		sl_avro_enc_free(o->enc);
		o->enc = sl_avro_enc_new(t, ad->stream, err, errlen);
		if (!o->enc)
			return -1;
	}
	if (!o->w && open_file(ad, o, c, err, errlen) < 0)
		return -1;
	if (sl_avro_enc_record(o->enc, sl_ocf_record_buf(o->w), c, err, errlen) < 0)
		return -1;
	if (sl_ocf_record_done(o->w, err, errlen) < 0)
		return -1;
	memcpy(o->last_csn, c->csn, sizeof o->last_csn);
	ad->stats.records++;
	ad->pending = true;
	if (sl_ocf_size(o->w) >= ad->max_file_bytes)
		return finish_file(ad, o, err, errlen);
	return 0;
}

static bool ad_flush_due(void *ctx, int64_t now_ms)
{
	struct avro_dir *ad = ctx;

	if (ad->done)
		return true;  /* a file reached max_file_bytes or a schema change closed one */
	return ad->open_head && now_ms - ad->open_head->opened_ms >= ad->max_file_ms;
}

static bool ad_pending(void *ctx)
{
	return ((struct avro_dir *)ctx)->pending;
}

static void ad_mark(void *ctx, const struct sl_position *pos)
{
	struct avro_dir *ad = ctx;

	ad->mark = *pos;
	ad->has_mark = true;
}

static int ad_flush(void *ctx, struct sl_position *durable, char *err, size_t errlen)
{
	struct avro_dir *ad = ctx;

	while (ad->open_head) {
		if (finish_file(ad, ad->open_head, err, errlen) < 0)
			return -1;
	}
	while (ad->done) {
		struct done_file *d = ad->done;
		if (publish(d, err, errlen) < 0)
			return -1;
		/* Consecutive files often share a folder: fsync it once for them. */
		if (!d->next || strcmp(d->next->dir, d->dir) != 0) {
			if (sl_fsync_dir_of(d->dir, true) < 0) {
				snprintf(err, errlen, "could not fsync folder \"%s\": %s", d->dir,
					 strerror(errno));
				return -1;
			}
		}
		ad->done = d->next;
		if (!ad->done)
			ad->done_tail = &ad->done;
		free_done(d);
		ad->stats.files_closed++;
	}
	ad->pending = false;
	if (!ad->has_mark)
		return 0;
	*durable = ad->mark;
	return 1;
}

static int ad_discard_backfill(void *ctx, const struct sl_table *t, const char *csn_first,
			       const char *csn_last, char *err, size_t errlen)
{
	struct avro_dir *ad = ctx;
	const char *marker = csn_first, *csn = csn_last;
	struct done_file **dp;
	struct obj *o;
	struct sl_buf path;
	struct sweep sw = { .match = match_backfill, .what = "backfill file" };
	int rc;

	/* Unflushed files of that backfill: drop them too. */
	o = obj_find(ad, t->object);
	if (o && o->w && backfill_span(o->first_csn, o->last_csn, marker, csn)) {
		char *tmp = strdup(sl_ocf_path(o->w));
		open_list_del(ad, o);
		sl_ocf_abort(o->w);
		o->w = NULL;
		if (tmp)
			unlink(tmp);
		free(tmp);
	}
	for (dp = &ad->done; *dp;) {
		struct done_file *d = *dp;
		if (!strcmp(d->object, t->object) && backfill_span(d->first_csn, d->last_csn, marker, csn)) {
			unlink(d->tmp_path);
			*dp = d->next;
			free_done(d);
		} else {
			dp = &d->next;
		}
	}
	ad->done_tail = &ad->done;
	while (*ad->done_tail)
		ad->done_tail = &(*ad->done_tail)->next;

	sl_buf_init(&path, 0);
	sl_buf_printf(&path, "%s/%s", ad->root, t->object);
	if (sl_buf_failed(&path)) {
		snprintf(err, errlen, "table \"%s\": out of memory", t->object);
		return -1;
	}
	sw.csn_a = marker;
	sw.csn_b = csn;
	rc = sweep_tree(&path, &sw, err, errlen);
	sl_buf_free(&path);
	return rc;
}

static void ad_close(void *ctx)
{
	struct avro_dir *ad = ctx;

	if (!ad)
		return;
	for (size_t i = 0; i < ad->nbuckets; i++) {
		struct obj *o, *next;
		for (o = ad->buckets[i]; o; o = next) {
			next = o->hnext;
			if (o->w) {
				char *tmp = strdup(sl_ocf_path(o->w));
				sl_ocf_abort(o->w);
				if (tmp && unlink(tmp) < 0)
					sl_warn("could not remove \"%s\": %s", tmp, strerror(errno));
				free(tmp);
			}
			sl_avro_enc_free(o->enc);
			free(o->dir);
			free(o->object);
			free(o);
		}
	}
	while (ad->done) {
		struct done_file *d = ad->done;
		if (unlink(d->tmp_path) < 0)
			sl_warn("could not remove \"%s\": %s", d->tmp_path, strerror(errno));
		ad->done = d->next;
		free_done(d);
	}
	sl_ocf_codec_free(ad->codec);
	free(ad->buckets);
	free(ad->stream);
	free(ad->root);
	free(ad);
}

void sl_avro_dir_get_stats(void *ctx, struct sl_avro_stats *out)
{
	*out = ((struct avro_dir *)ctx)->stats;
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
			 dest, dc->path, dir, strerror(errno));
		goto out;
	}
	fprintf(out, "stream %s: destination %s: path %s %s\n", st->name, dest, dc->path,
		exists ? "is writable" : "can be created");
	rc = SL_OK;
out:
	free(dir);
	return rc;
}

static const struct sl_keychoice codecs[] = {
	{ "null", SL_CODEC_NULL }, { "deflate", SL_CODEC_DEFLATE }, { "snappy", SL_CODEC_SNAPPY },
	{ NULL, 0 },
};

/* The keys of [destination.NAME] with type = avro_dir (doc/configuration.md). */
static const struct sl_keydesc ad_keys[] = {
	{ .name = "path", .type = SL_KT_STRING, .flags = SL_KF_REQUIRED,
	  FIELD(struct sl_avro_dir_conf, path) },
	{ .name = "codec", .type = SL_KT_ENUM, .choices = codecs, .def = "deflate",
	  FIELD(struct sl_avro_dir_conf, codec) },
	{ .name = "compression_level", .type = SL_KT_INT, .def = "1", .min = 1, .max = 9,
	  FIELD(struct sl_avro_dir_conf, compression_level) },
	{ .name = "max_file_bytes", .type = SL_KT_BYTES, .def = "64MB", .min = 1024,
	  .max = UINT64_MAX, FIELD(struct sl_avro_dir_conf, max_file_bytes) },
	{ .name = "max_file_seconds", .type = SL_KT_SECONDS, .def = "60", .min = 1, .max = 86400,
	  FIELD(struct sl_avro_dir_conf, max_file_seconds) },
};

/* SL_KT_ENUM stores through the field's size. */
_Static_assert(sizeof(enum sl_codec) == 4, "enum size");

const struct sl_sink_ops sl_avro_dir_ops = {
	.type = "avro_dir",
	.caps = 0,  /* no merge mode yet */
	.keys = ad_keys,
	.nkeys = sizeof ad_keys / sizeof ad_keys[0],
	.conf_size = sizeof(struct sl_avro_dir_conf),
	.check = ad_check,
	.open = ad_open,
	.write = ad_write,
	.mark = ad_mark,
	.flush_due = ad_flush_due,
	.pending = ad_pending,
	.flush = ad_flush,
	.discard_backfill = ad_discard_backfill,
	.close = ad_close,
};
