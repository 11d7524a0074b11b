/*
 * sinks/iceberg/iceberg.c: the iceberg sink (see iceberg.h).
 */
#include "sinks/iceberg/iceberg.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/buf.h"
#include "common/log.h"
#include "common/util.h"
#include "sinks/avro/avro_value.h"
#include "sinks/avro_dir/avro_dir.h"
#include "sinks/avro_tree/tree.h"
#include "sinks/iceberg/ice_meta.h"

struct ice_tab {
	char *object;
	char *ns, *name;                  /* for messages */
	char *dir;                        /* <path>/<stream>/<object> */
	json_t *meta;                     /* the table's metadata, with schemas not yet committed */
	int version;                      /* of the metadata file meta came from; 0: none */
	int64_t meta_ms;                  /* its last-updated-ms */
	char schema_key[17];              /* of the table version schema was made for */
	struct ice_schema schema;
	struct sl_buf avro_schema;
	char floor[SL_CSN_LEN + 1];       /* committed sluice.last-csn, "" none */
	char last_csn[SL_CSN_LEN + 1];    /* of the changes written since, "" none */
	struct sl_ocf_writer *w;          /* the data file being written */
	char *wpath;
	struct ice_data_file *files;      /* finished, not committed (paths owned) */
	int nfiles;
	int64_t bytes;
};

struct ice_sink {
	const struct sl_iceberg_conf *conf;
	char *stream;
	char *root;                       /* <path>/<stream>, absolute */
	struct sl_ocf_codec *codec;
	struct ice_tab *tabs;
	int ntabs;
	const struct sl_source_desc *src;
	struct sl_position mark;
	bool has_mark;
	bool pending;
	int64_t first_ms;
	struct sl_outage *outage;         /* the stream's (borrowed), or NULL */
	uint64_t bytes;
	long kill_after, commits;
};

static uint64_t rand64(void)
{
	uint64_t r;

	if (getrandom(&r, sizeof r, 0) != (ssize_t)sizeof r)
		r = (uint64_t)sl_mono_us() * 6364136223846793005u ^ (uint64_t)getpid();
	return r;
}

/* Reads the table's current metadata (version-hint.text, then that
 * metadata file) into t; none is not an error. */
static int load_table(struct ice_tab *t, char *err, size_t errlen)
{
	struct sl_buf p;
	char *hint = NULL, *text = NULL;
	size_t len;
	int64_t v;
	json_error_t je;
	const json_t *snap;
	int rc = -1;

	sl_buf_init(&p, 0);
	sl_buf_printf(&p, "%s/metadata/version-hint.text", t->dir);
	if (sl_buf_failed(&p))
		goto oom;
	if (access(p.data, F_OK) != 0) {
		rc = 0;
		goto out;
	}
	if (sl_read_file(p.data, &hint, &len, err, errlen) < 0)
		goto out;
	while (len > 0 && (hint[len - 1] == '\n' || hint[len - 1] == ' '))
		hint[--len] = '\0';
	if (sl_parse_i64(hint, 1, INT_MAX, &v) < 0) {
		snprintf(err, errlen, "\"%s\" holds no version number", p.data);
		goto out;
	}
	sl_buf_reset(&p);
	sl_buf_printf(&p, "%s/metadata/v%d.metadata.json", t->dir, (int)v);
	if (sl_buf_failed(&p))
		goto oom;
	if (sl_read_file(p.data, &text, &len, err, errlen) < 0)
		goto out;
	if (!(t->meta = json_loadb(text, len, 0, &je)) || !json_is_object(t->meta)) {
		snprintf(err, errlen, "could not parse \"%s\": %s", p.data, je.text);
		goto out;
	}
	t->version = (int)v;
	t->meta_ms = json_integer_value(json_object_get(t->meta, "last-updated-ms"));
	if ((snap = ice_meta_current_snapshot(t->meta)) && ice_snapshot_prop(snap, "sluice.last-csn"))
		snprintf(t->floor, sizeof t->floor, "%s", ice_snapshot_prop(snap, "sluice.last-csn"));
	sl_info("iceberg table \"%s\": at metadata version %d, last change from the log %s", t->dir, t->version,
		t->floor[0] ? t->floor : "none");
	rc = 0;
	goto out;
oom:
	snprintf(err, errlen, "iceberg table \"%s\": out of memory", t->dir);
out:
	free(hint);
	free(text);
	sl_buf_free(&p);
	return rc;
}

static struct ice_tab *find_tab(struct ice_sink *s, const struct sl_table *st, char *err, size_t errlen)
{
	struct ice_tab *t, *tabs;
	struct sl_buf p;

	for (int i = 0; i < s->ntabs; i++)
		if (!strcmp(s->tabs[i].object, st->object))
			return &s->tabs[i];
	if (!(tabs = realloc(s->tabs, (size_t)(s->ntabs + 1) * sizeof *tabs)))
		goto oom;
	s->tabs = tabs;
	t = &tabs[s->ntabs];
	memset(t, 0, sizeof *t);
	sl_buf_init(&t->avro_schema, 0);
	sl_buf_init(&p, 0);
	sl_buf_printf(&p, "%s/%s", s->root, st->object);
	t->object = strdup(st->object);
	t->ns = strdup(st->ns);
	t->name = strdup(st->name);
	t->dir = sl_buf_detach(&p);
	s->ntabs++;
	if (!t->object || !t->ns || !t->name || !t->dir)
		goto oom;
	if (load_table(t, err, errlen) < 0)
		return NULL;
	return t;
oom:
	snprintf(err, errlen, "table \"%s\".\"%s\": out of memory", st->ns, st->name);
	return NULL;
}

/* Closes t's data file (fsynced) and adds it to the files to commit. */
static int finish_file(struct ice_tab *t, char *err, size_t errlen)
{
	struct ice_data_file *f;
	struct stat sb;
	int64_t n;

	if (!t->w)
		return 0;
	n = (int64_t)sl_ocf_count(t->w);
	if (sl_ocf_close(t->w, true, err, errlen) < 0) {
		t->w = NULL;
		return -1;
	}
	t->w = NULL;
	if (stat(t->wpath, &sb) < 0) {
		snprintf(err, errlen, "could not stat \"%s\": %s", t->wpath, sl_strerror(errno));
		return -1;
	}
	if (!(f = realloc(t->files, (size_t)(t->nfiles + 1) * sizeof *f))) {
		snprintf(err, errlen, "iceberg table \"%s\": out of memory", t->dir);
		return -1;
	}
	t->files = f;
	f[t->nfiles].path = t->wpath;
	f[t->nfiles].records = n;
	f[t->nfiles].size = sb.st_size;
	t->nfiles++;
	t->wpath = NULL;
	return 0;
}

static int commit_pending(struct ice_sink *s, struct ice_tab *t, char *err, size_t errlen);

/* Makes t's schema the one of table version st: a new schema in t->meta
 * when columns were added; a new table's metadata when it has none.  What
 * was written with the old schema is committed first, so that each
 * snapshot's files share its manifest's schema. */
static int set_schema(struct ice_sink *s, struct ice_tab *t, const struct sl_table *st, char *err, size_t errlen)
{
	const json_t *cur = t->meta ? ice_meta_current_schema(t->meta) : NULL;
	int last = t->meta ? (int)json_integer_value(json_object_get(t->meta, "last-column-id")) : 0;
	struct ice_schema ns;
	bool changed;
	int rc;

	if (commit_pending(s, t, err, errlen) < 0)
		return -1;
	if ((rc = ice_schema_of_table(&ns, &changed, st, cur, last, err, errlen)) < 0)
		return rc;   /* SL_EPREREQ: a change the table cannot take */
	if (!t->meta) {
		char u[36 + 1];
		unsigned char b[16];
		uint64_t r0 = rand64(), r1 = rand64();
		memcpy(b, &r0, 8);
		memcpy(b + 8, &r1, 8);
		b[6] = (unsigned char)((b[6] & 0x0f) | 0x40);
		b[8] = (unsigned char)((b[8] & 0x3f) | 0x80);
		sl_avro_uuid_text(u, b);
		u[36] = '\0';
		t->meta = ice_meta_new(u, t->dir, &ns, sl_now_us() / 1000);
		if (!t->meta)
			goto oom;
		if (sl_mkdir_p(t->dir) < 0) {
			snprintf(err, errlen, "could not create \"%s\": %s", t->dir, sl_strerror(errno));
			goto fail;
		}
	} else if (changed) {
		if (ice_meta_add_schema(t->meta, &ns) < 0)
			goto oom;
		sl_info("iceberg table \"%s\": schema %d adds columns of \"%s\".\"%s\"", t->dir, ns.id, st->ns,
			st->name);
	}
	ice_schema_free(&t->schema);
	t->schema = ns;
	memcpy(t->schema_key, st->schema_key, sizeof t->schema_key);
	sl_buf_reset(&t->avro_schema);
	if (ice_data_avro_schema(&t->avro_schema, &t->schema) < 0)
		goto oom;
	return 0;
oom:
	snprintf(err, errlen, "table \"%s\".\"%s\": out of memory", st->ns, st->name);
fail:
	ice_schema_free(&ns);
	return -1;
}

static int open_file(struct ice_sink *s, struct ice_tab *t, const struct sl_change *c, char *err, size_t errlen)
{
	struct sl_buf p;

	sl_buf_init(&p, 0);
	sl_buf_printf(&p, "%s/data", t->dir);
	if (sl_buf_failed(&p) || (sl_mkdir_p(p.data) < 0 && errno != EEXIST)) {
		snprintf(err, errlen, "could not create \"%s/data\": %s", t->dir, sl_strerror(errno));
		sl_buf_free(&p);
		return -1;
	}
	sl_buf_printf(&p, "/%s-%08" PRIx32 ".avro", c->csn, (uint32_t)rand64());
	if (sl_buf_failed(&p)) {
		sl_buf_free(&p);
		snprintf(err, errlen, "iceberg table \"%s\": out of memory", t->dir);
		return -1;
	}
	t->wpath = sl_buf_detach(&p);
	if (sl_ocf_open(&t->w, t->wpath, t->avro_schema.data, t->avro_schema.len, s->codec, 0, err, errlen) < 0) {
		free(t->wpath);
		t->wpath = NULL;
		t->w = NULL;
		return -1;
	}
	return 0;
}

static int ice_write(void *ctx, const struct sl_change *c, char *err, size_t errlen)
{
	struct ice_sink *s = ctx;
	struct ice_tab *t = find_tab(s, c->table, err, errlen);
	struct sl_buf *b;
	int rc;

	if (!t)
		return -1;
	/* a change from the log that a committed snapshot holds already */
	if (c->seq > 0 && t->floor[0] && strcmp(c->csn, t->floor) <= 0)
		return 0;
	if (c->table->src)
		s->src = c->table->src;
	if (strcmp(t->schema_key, c->table->schema_key) && (rc = set_schema(s, t, c->table, err, errlen)) < 0)
		return rc;
	if (!t->w && open_file(s, t, c, err, errlen) < 0)
		goto failed;
	b = sl_ocf_record_buf(t->w);
	if (ice_encode_change(b, &t->schema, c, err, errlen) < 0)
		return -1;
	if (sl_ocf_record_done(t->w, err, errlen) < 0)
		goto failed;
	if (c->seq > 0)
		memcpy(t->last_csn, c->csn, sizeof t->last_csn);
	if (!s->pending)
		s->first_ms = sl_mono_ms();
	s->pending = true;
	return 0;
failed:
	sl_outage_fail(s->outage, err);   /* the folder: a full disk, an I/O error */
	return -1;
}

static void ice_mark(void *ctx, const struct sl_position *pos)
{
	struct ice_sink *s = ctx;

	s->mark = *pos;
	s->has_mark = true;
}

static bool ice_flush_due(void *ctx, int64_t now_ms)
{
	struct ice_sink *s = ctx;
	uint64_t bytes = 0;

	if (!s->pending)
		return false;
	for (int i = 0; i < s->ntabs; i++)
		if (s->tabs[i].w)
			bytes += sl_ocf_size(s->tabs[i].w);
	return bytes >= s->conf->max_file_bytes ||
	       (uint64_t)(now_ms - s->first_ms) >= s->conf->max_file_seconds * 1000;
}

static bool ice_pending(void *ctx)
{
	return ((struct ice_sink *)ctx)->pending;
}

/* The manifests of every snapshot of t->meta (each snapshot adds one), then
 * the new one in the last slot; *n receives the count.  Paths owned. */
static struct ice_manifest_file *manifests_of(struct ice_tab *t, int *n, char *err, size_t errlen)
{
	const json_t *snaps = json_object_get(t->meta, "snapshots");
	struct ice_manifest_file *mf = calloc(json_array_size(snaps) + 1, sizeof *mf);
	size_t i;
	json_t *sn;

	*n = 0;
	if (!mf)
		goto oom;
	json_array_foreach(snaps, i, sn) {
		struct ice_manifest_file *m = &mf[*n];
		struct sl_buf p;
		struct stat sb;
		const char *af = ice_snapshot_prop(sn, "added-data-files"), *ar = ice_snapshot_prop(sn, "added-records");
		int64_t files = 0, rows = 0;
		m->snapshot_id = json_integer_value(json_object_get(sn, "snapshot-id"));
		m->sequence_number = json_integer_value(json_object_get(sn, "sequence-number"));
		sl_buf_init(&p, 0);
		sl_buf_printf(&p, "%s/metadata/%" PRId64 "-m0.avro", t->dir, m->snapshot_id);
		if (!(m->path = sl_buf_detach(&p)))
			goto oom;
		(*n)++;
		if (stat(m->path, &sb) < 0) {
			snprintf(err, errlen, "could not stat the manifest \"%s\": %s", m->path, sl_strerror(errno));
			goto fail;
		}
		if (!af || !ar || sl_parse_i64(af, 0, INT32_MAX, &files) < 0 || sl_parse_i64(ar, 0, INT64_MAX, &rows) < 0) {
			snprintf(err, errlen, "iceberg table \"%s\": snapshot %" PRId64 " has no added-data-files or "
				 "added-records", t->dir, m->snapshot_id);
			goto fail;
		}
		m->length = sb.st_size;
		m->added_files = (int)files;
		m->added_rows = rows;
	}
	return mf;
oom:
	snprintf(err, errlen, "iceberg table \"%s\": out of memory", t->dir);
fail:
	for (int k = 0; mf && k < *n; k++)
		free(mf[k].path);
	free(mf);
	return NULL;
}

/* Publishes the metadata JSON as v<N+1>.metadata.json (never replacing a
 * file), then version-hint.text. */
static int publish_metadata(struct ice_tab *t, int version, char *err, size_t errlen)
{
	char *text = json_dumps(t->meta, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
	struct sl_buf tmp, fin, hint;
	char num[16];
	int rc = -1;

	sl_buf_init(&tmp, 0);
	sl_buf_init(&fin, 0);
	sl_buf_init(&hint, 0);
	sl_buf_printf(&tmp, "%s/metadata/.v%d.metadata.json.%08" PRIx32 ".tmp", t->dir, version, (uint32_t)rand64());
	sl_buf_printf(&fin, "%s/metadata/v%d.metadata.json", t->dir, version);
	sl_buf_printf(&hint, "%s/metadata/version-hint.text", t->dir);
	if (!text || sl_buf_failed(&tmp) || sl_buf_failed(&fin) || sl_buf_failed(&hint)) {
		snprintf(err, errlen, "iceberg table \"%s\": out of memory", t->dir);
		goto out;
	}
	if (sl_write_file_atomic_mode(tmp.data, text, strlen(text), 0644, err, errlen) < 0)
		goto out;
	if (link(tmp.data, fin.data) < 0) {
		snprintf(err, errlen, "could not publish \"%s\": %s%s", fin.data, sl_strerror(errno),
			 errno == EEXIST ? " (another writer committed to the table)" : "");
		unlink(tmp.data);
		goto out;
	}
	unlink(tmp.data);
	if (sl_fsync_dir_of(fin.data, false) < 0) {
		snprintf(err, errlen, "could not fsync the folder of \"%s\": %s", fin.data, sl_strerror(errno));
		goto out;
	}
	snprintf(num, sizeof num, "%d", version);
	rc = sl_write_file_atomic_mode(hint.data, num, strlen(num), 0644, err, errlen);
out:
	free(text);
	sl_buf_free(&tmp);
	sl_buf_free(&fin);
	sl_buf_free(&hint);
	return rc;
}

/* Commits t's finished data files as one snapshot. */
static int commit_table(struct ice_sink *s, struct ice_tab *t, const char *position, char *err, size_t errlen)
{
	struct ice_snapshot sn = { 0 };
	const json_t *cur = ice_meta_current_snapshot(t->meta);
	struct ice_manifest_file *mf = NULL;
	struct sl_buf mpath, lpath, enc, prev;
	int nmf = 0, rc = -1;

	sl_buf_init(&mpath, 0);
	sl_buf_init(&lpath, 0);
	sl_buf_init(&enc, 0);
	sl_buf_init(&prev, 0);
	sn.id = (int64_t)(rand64() >> 1);
	sn.parent_id = cur ? json_integer_value(json_object_get(cur, "snapshot-id")) : -1;
	sn.sequence_number = json_integer_value(json_object_get(t->meta, "last-sequence-number")) + 1;
	sn.timestamp_ms = sl_now_us() / 1000;
	sn.schema_id = t->schema.id;
	sn.stream = s->stream;
	sn.position = position;
	sn.last_csn = t->last_csn[0] ? t->last_csn : (t->floor[0] ? t->floor : NULL);
	for (int i = 0; i < t->nfiles; i++) {
		sn.added_records += t->files[i].records;
		sn.added_size += t->files[i].size;
	}
	sn.added_files = t->nfiles;
	sl_buf_printf(&mpath, "%s/metadata/%" PRId64 "-m0.avro", t->dir, sn.id);
	sl_buf_printf(&lpath, "%s/metadata/snap-%" PRId64 ".avro", t->dir, sn.id);
	if (t->version > 0)
		sl_buf_printf(&prev, "%s/metadata/v%d.metadata.json", t->dir, t->version);
	sn.manifest_list = lpath.data;
	if (sl_buf_failed(&mpath) || sl_buf_failed(&lpath) || sl_buf_failed(&prev))
		goto oom;
	{
		struct sl_buf md;
		sl_buf_init(&md, 0);
		sl_buf_printf(&md, "%s/metadata", t->dir);
		if (sl_buf_failed(&md) || (sl_mkdir_p(md.data) < 0 && errno != EEXIST)) {
			snprintf(err, errlen, "could not create \"%s/metadata\": %s", t->dir, sl_strerror(errno));
			sl_buf_free(&md);
			goto out;
		}
		sl_buf_free(&md);
	}
	if (ice_manifest_encode(&enc, &t->schema, sn.id, sn.sequence_number, t->files, t->nfiles) < 0)
		goto oom;
	if (sl_write_file_atomic_mode(mpath.data, enc.data, enc.len, 0644, err, errlen) < 0)
		goto out;
	if (!(mf = manifests_of(t, &nmf, err, errlen)))
		goto out;
	mf[nmf].path = strdup(mpath.data);
	mf[nmf].length = (int64_t)enc.len;
	mf[nmf].sequence_number = sn.sequence_number;
	mf[nmf].snapshot_id = sn.id;
	mf[nmf].added_files = t->nfiles;
	mf[nmf].added_rows = sn.added_records;
	nmf++;
	sl_buf_reset(&enc);
	if (!mf[nmf - 1].path || ice_manifest_list_encode(&enc, &sn, mf, nmf) < 0)
		goto oom;
	if (sl_write_file_atomic_mode(lpath.data, enc.data, enc.len, 0644, err, errlen) < 0)
		goto out;
	/* a new table: its folders' entries, up to the warehouse folder */
	if (t->version == 0 && (sl_fsync_dir_of(t->dir, true) < 0 || sl_fsync_dir_of(t->dir, false) < 0 ||
				sl_fsync_dir_of(s->root, false) < 0)) {
		snprintf(err, errlen, "could not fsync the folders of \"%s\": %s", t->dir, sl_strerror(errno));
		goto out;
	}
	if (ice_meta_add_snapshot(t->meta, &sn, t->version > 0 ? prev.data : NULL, t->meta_ms) < 0)
		goto oom;
	if (publish_metadata(t, t->version + 1, err, errlen) < 0)
		goto out;
	t->version++;
	t->meta_ms = sn.timestamp_ms;
	if (sn.last_csn)
		memcpy(t->floor, sn.last_csn, sizeof t->floor);
	t->last_csn[0] = '\0';
	for (int i = 0; i < t->nfiles; i++)
		free((char *)t->files[i].path);
	t->nfiles = 0;
	sl_debug("iceberg table \"%s\": committed snapshot %" PRId64 " (%" PRId64 " records) as metadata version %d",
		 t->dir, sn.id, sn.added_records, t->version);
	rc = 0;
	goto out;
oom:
	snprintf(err, errlen, "iceberg table \"%s\": out of memory", t->dir);
out:
	for (int k = 0; mf && k < nmf; k++)
		free(mf[k].path);
	free(mf);
	sl_buf_free(&mpath);
	sl_buf_free(&lpath);
	sl_buf_free(&enc);
	sl_buf_free(&prev);
	return rc;
}

/* Finishes t's data file and commits what t holds, if anything. */
static int commit_pending(struct ice_sink *s, struct ice_tab *t, char *err, size_t errlen)
{
	char position[SL_POS_TEXT_MAX * 2] = "";

	if (finish_file(t, err, errlen) < 0)
		return -1;
	if (t->nfiles == 0)
		return 0;
	if (s->has_mark && s->src && s->src->pos_encode(&s->mark, position, sizeof position) < 0)
		position[0] = '\0';
	if (sl_fsync_dir_of(t->files[0].path, false) < 0) {
		snprintf(err, errlen, "could not fsync the folder of \"%s\": %s", t->files[0].path,
			 sl_strerror(errno));
		return -1;
	}
	if (commit_table(s, t, position, err, errlen) < 0)
		return -1;
	if (s->kill_after > 0 && ++s->commits >= s->kill_after)
		raise(SIGKILL);  /* test hook: a crash between the commit and the checkpoint */
	return 0;
}

static int ice_flush(void *ctx, struct sl_position *durable, char *err, size_t errlen)
{
	struct ice_sink *s = ctx;

	for (int i = 0; i < s->ntabs; i++) {
		if (commit_pending(s, &s->tabs[i], err, errlen) < 0) {
			sl_outage_fail(s->outage, err);
			return -1;
		}
	}
	sl_outage_ok(s->outage);
	s->pending = false;
	if (!s->has_mark)
		return 0;
	*durable = s->mark;
	return 1;
}

static int ice_discard_backfill(void *ctx, const struct sl_table *t, const char *csn_first, const char *csn_last,
				char *err, size_t errlen)
{
	(void)ctx;
	(void)err;
	(void)errlen;
	/* Committed snapshots stay: rows delivered again carry the same _uuid. */
	sl_info("iceberg: table \"%s\".\"%s\": the rows of the interrupted backfill (CSN %s to %s) that were "
		"committed stay; the redo writes them again with the same _uuid", t->ns, t->name, csn_first,
		csn_last);
	return 0;
}

static void free_tab(struct ice_tab *t)
{
	if (t->w) {
		sl_ocf_abort(t->w);
		unlink(t->wpath);
	}
	free(t->wpath);
	for (int i = 0; i < t->nfiles; i++) {
		unlink(t->files[i].path);
		free((char *)t->files[i].path);
	}
	free(t->files);
	json_decref(t->meta);
	ice_schema_free(&t->schema);
	sl_buf_free(&t->avro_schema);
	free(t->object);
	free(t->ns);
	free(t->name);
	free(t->dir);
}

static void ice_close(void *ctx)
{
	struct ice_sink *s = ctx;

	if (!s)
		return;
	for (int i = 0; i < s->ntabs; i++)
		free_tab(&s->tabs[i]);
	free(s->tabs);
	if (s->codec)
		sl_ocf_codec_free(s->codec);
	free(s->stream);
	free(s->root);
	free(s);
}

static int ice_open(void **ctx, const void *conf, const struct sl_sink_stream *st, char *err, size_t errlen)
{
	const struct sl_iceberg_conf *c = conf;
	struct ice_sink *s = calloc(1, sizeof *s);
	char *abs = NULL;
	const char *k = getenv("SLUICE_FAULT_ICEBERG_KILL_AFTER_COMMIT");
	struct sl_buf p;
	int64_t v;

	*ctx = NULL;
	sl_buf_init(&p, 0);
	if (!s)
		goto oom;
	s->conf = c;
	s->outage = st->outage;
	if (k && sl_parse_i64(k, 1, INT32_MAX, &v) == 0)
		s->kill_after = (long)v;
	if (sl_mkdir_p(c->path) < 0 && errno != EEXIST) {
		snprintf(err, errlen, "could not create \"%s\": %s", c->path, sl_strerror(errno));
		goto fail;
	}
	if (!(abs = realpath(c->path, NULL))) {
		snprintf(err, errlen, "could not resolve \"%s\": %s", c->path, sl_strerror(errno));
		goto fail;
	}
	sl_buf_printf(&p, "%s/%s", abs, st->name);
	if (!(s->root = sl_buf_detach(&p)) || !(s->stream = strdup(st->name)))
		goto oom;
	if (sl_ocf_codec_new(&s->codec, c->codec, c->compression_level, 0, err, errlen) < 0)
		goto fail;
	free(abs);
	*ctx = s;
	return 0;
oom:
	snprintf(err, errlen, "iceberg sink: out of memory");
fail:
	free(abs);
	sl_buf_free(&p);
	ice_close(s);
	return -1;
}

/* `sluice check`: the warehouse folder, or the nearest folder above it that
 * exists, is writable (avro_dir's check of its path; creates nothing). */
static int ice_check(const void *conf, const struct sl_sink_stream *st, FILE *out, char *err, size_t errlen)
{
	struct sl_avro_dir_conf ad = { .path = ((const struct sl_iceberg_conf *)conf)->path };

	return sl_avro_dir_ops.check(&ad, st, out, err, errlen);
}

static const struct sl_keydesc ice_keys[] = {
	{ .name = "path", .type = SL_KT_STRING, .flags = SL_KF_REQUIRED,
	  FIELD(struct sl_iceberg_conf, path) },
	{ .name = "codec", .type = SL_KT_ENUM, .choices = sl_tree_codecs, .def = "deflate",
	  FIELD(struct sl_iceberg_conf, codec) },
	{ .name = "compression_level", .type = SL_KT_INT, .def = "1", .min = 1,
	  .max = SL_OCF_ZSTD_MAX_LEVEL, FIELD(struct sl_iceberg_conf, compression_level) },
	{ .name = "max_file_bytes", .type = SL_KT_BYTES, .def = "64MB", .min = 1024,
	  .max = UINT64_MAX, FIELD(struct sl_iceberg_conf, max_file_bytes) },
	{ .name = "max_file_seconds", .type = SL_KT_SECONDS, .def = "60", .min = 1, .max = 86400,
	  FIELD(struct sl_iceberg_conf, max_file_seconds) },
};

static int ice_conf_check(const void *conf, const struct sl_ini_section *sec, struct sl_keyerr *er)
{
	const struct sl_iceberg_conf *c = conf;

	return sl_tree_conf_check(c->codec, c->compression_level, sec, er);
}

const struct sl_sink_ops sl_iceberg_ops = {
	.type = "iceberg",
	.caps = 0,
	.keys = ice_keys,
	.nkeys = sizeof ice_keys / sizeof ice_keys[0],
	.conf_size = sizeof(struct sl_iceberg_conf),
	.conf_check = ice_conf_check,
	.check = ice_check,
	.open = ice_open,
	.write = ice_write,
	.mark = ice_mark,
	.flush_due = ice_flush_due,
	.pending = ice_pending,
	.flush = ice_flush,
	.discard_backfill = ice_discard_backfill,
	.close = ice_close,
};
