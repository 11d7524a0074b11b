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
#include "sinks/avro_tree/merge.h"
#include "sinks/avro_tree/mirror.h"
#include "sinks/avro_tree/tree.h"
#include "sinks/iceberg/ice_fill.h"
#include "sinks/iceberg/ice_maint.h"
#include "sinks/iceberg/ice_meta.h"
#include "sinks/iceberg/ice_stats.h"

/* A data or equality delete file being written through the store. */
struct ice_file {
	struct sl_ocf_writer *w;
	struct sl_store_file *sf;
	const struct sl_store *store;
	char *key;                        /* <stream>/<object>/data/<name>.avro */
	int64_t size;                     /* bytes written */
};

struct ice_tab {
	char *object;
	char *ns, *name;                  /* for messages */
	char *key;                        /* <stream>/<object>: the table's key in the store */
	char *dir;                        /* <root>/<key>: its location */
	json_t *meta;                     /* the table's metadata, with schemas not yet committed */
	int version;                      /* of the metadata file meta came from; 0: none */
	int64_t meta_ms;                  /* its last-updated-ms */
	char schema_key[17];              /* of the table version schema was made for */
	struct ice_schema schema;
	struct sl_buf avro_schema;
	char floor[SL_CSN_LEN + 1];       /* committed sluice.last-csn, "" none */
	char last_csn[SL_CSN_LEN + 1];    /* of the changes written since, "" none */
	char cleared[SL_CSN_LEN + 1];     /* merge mode: of the last TRUNCATE written, "" none (below_truncate) */
	uint64_t below;                   /* records skipped below it */
	struct ice_file *wf;              /* the data file being written */
	struct ice_col_stats *wstats;     /* of the data file being written (schema.nfields) */
	struct ice_data_file *files;      /* finished, not committed (paths owned) */
	int nfiles;
	int64_t bytes;
	/* merge mode */
	struct sl_mbatch batch;           /* the latest change of each key since the last commit */
	struct sl_table *mtab;            /* a copy of the table version the batch's changes are of */
	struct ice_file *df;              /* the equality delete file being written */
	struct ice_col_stats *dstats;     /* of the equality delete file being written */
	bool truncated;                   /* the snapshot to commit drops every earlier file */
	bool schema_due;                  /* meta's current schema is not published yet (ice_version) */
	uint64_t unfilled;                /* rows whose unchanged values nothing could fill */
	uint64_t since_compact;           /* commits since open or the last compaction */
};

struct ice_sink {
	const struct sl_iceberg_conf *conf;
	char *stream;
	struct sl_store store;            /* where the tables are (sl_ice_store_open) */
	char *root;                       /* the location of the store's root */
	struct sl_ocf_codec *codec;
	struct ice_tab *tabs;
	int ntabs;
	bool merge;                       /* write_mode = merge */
	const struct sl_source_desc *src;
	struct sl_position mark;
	bool has_mark;
	bool pending;
	bool version_due;                 /* a table version to publish: the next flush is due at once */
	int64_t first_ms;
	struct sl_outage *outage;         /* the stream's (borrowed), or NULL */
	char *state_dir;                  /* where the compaction lock lives, or NULL */
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

#define NOT_METADATA 2

/* Reads metadata file v<v>.metadata.json of t into *meta.  Returns 0,
 * SL_STORE_NOT_FOUND, NOT_METADATA (no JSON object; the message in err),
 * or -1 with a message in err. */
static int get_metadata(struct ice_sink *s, struct ice_tab *t, int v, json_t **meta, char *err, size_t errlen)
{
	struct sl_buf p, text;
	json_error_t je;
	int rc;

	*meta = NULL;
	sl_buf_init(&p, 0);
	sl_buf_init(&text, 0);
	sl_buf_printf(&p, "%s/metadata/v%d.metadata.json", t->key, v);
	if (sl_buf_failed(&p)) {
		snprintf(err, errlen, "iceberg table \"%s\": out of memory", t->dir);
		rc = -1;
	} else if ((rc = s->store.ops->get(s->store.ctx, p.data, &text, err, errlen)) == 0 &&
		   (!(*meta = json_loadb(text.data, text.len, 0, &je)) || !json_is_object(*meta))) {
		snprintf(err, errlen, "could not parse \"%s/metadata/v%d.metadata.json\": %s", t->dir, v,
			 *meta ? "not an object" : je.text);
		json_decref(*meta);
		*meta = NULL;
		rc = NOT_METADATA;
	}
	sl_buf_free(&p);
	sl_buf_free(&text);
	return rc;
}

/* Whether metadata meta's current snapshot was committed by stream. */
static bool ours(const json_t *meta, const char *stream)
{
	const json_t *snap = ice_meta_current_snapshot(meta);
	const char *by = snap ? ice_snapshot_prop(snap, "sluice.stream") : NULL;

	return by && !strcmp(by, stream);
}

/* Reads the metadata file that version-hint.text (its text in hint) names
 * into t->meta, its version into *v.  Returns 0, or -1 with a message in
 * err. */
static int read_hinted(struct ice_sink *s, struct ice_tab *t, struct sl_buf *hint, int64_t *v, char *err,
		       size_t errlen)
{
	int rc;

	while (hint->len > 0 && (hint->data[hint->len - 1] == '\n' || hint->data[hint->len - 1] == ' '))
		hint->data[--hint->len] = '\0';
	if (sl_buf_putc(hint, '\0') < 0) {
		snprintf(err, errlen, "iceberg table \"%s\": out of memory", t->dir);
		return -1;
	}
	if (sl_parse_i64(hint->data, 1, INT_MAX - 1, v) < 0) {
		snprintf(err, errlen, "\"%s/metadata/version-hint.text\" holds no version number", t->dir);
		return -1;
	}
	if ((rc = get_metadata(s, t, (int)*v, &t->meta, err, errlen)) != 0) {
		if (rc == SL_STORE_NOT_FOUND)
			snprintf(err, errlen, "\"%s/metadata/v%d.metadata.json\" is missing (version-hint.text names "
				 "it)", t->dir, (int)*v);
		return -1;
	}
	return 0;
}

/* Reads the table's current metadata into t: the metadata file that
 * version-hint.text names, or a later one of this stream's when there is
 * (a commit whose version-hint.text was not replaced yet: a crash right
 * after publishing the metadata file; also the table's first, v1, with no
 * version-hint.text yet).  A later one of another writer's is left for the
 * next commit to find taken.  None is not an error. */
static int load_table(struct ice_sink *s, struct ice_tab *t, char *err, size_t errlen)
{
	struct sl_buf p, hint;
	json_t *next;
	int64_t v;
	const json_t *snap;
	int rc = -1;

	sl_buf_init(&p, 0);
	sl_buf_init(&hint, 0);
	sl_buf_printf(&p, "%s/metadata/version-hint.text", t->key);
	if (sl_buf_failed(&p))
		goto oom;
	if ((rc = s->store.ops->get(s->store.ctx, p.data, &hint, err, errlen)) != 0) {
		if (rc != SL_STORE_NOT_FOUND) {
			rc = -1;
			goto out;
		}
		v = 0;   /* a new table, or a crash before its first version-hint.text */
	} else if ((rc = read_hinted(s, t, &hint, &v, err, errlen)) < 0) {
		goto out;
	}
	while (v < INT_MAX - 1 && (rc = get_metadata(s, t, (int)v + 1, &next, err, errlen)) == 0 &&
	       ours(next, s->stream)) {
		if (v == 0)
			sl_info("iceberg table \"%s\": metadata version 1 has no version-hint.text yet", t->dir);
		else
			sl_info("iceberg table \"%s\": metadata version %d follows the version %d of "
				"version-hint.text", t->dir, (int)v + 1, (int)v);
		json_decref(t->meta);
		t->meta = next;
		v++;
	}
	if (rc == 0)
		json_decref(next);   /* another writer's: the commit finds it taken */
	if (rc < 0)
		goto out;
	rc = 0;
	if (!t->meta)
		goto out;   /* no table yet */
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
	sl_buf_free(&p);
	sl_buf_free(&hint);
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
	sl_buf_printf(&p, "%s/%s", s->stream, st->object);
	t->key = sl_buf_detach(&p);
	sl_buf_printf(&p, "%s/%s/%s", s->root, s->stream, st->object);
	t->dir = sl_buf_detach(&p);
	t->object = strdup(st->object);
	t->ns = strdup(st->ns);
	t->name = strdup(st->name);
	s->ntabs++;
	if (!t->object || !t->ns || !t->name || !t->key || !t->dir)
		goto oom;
	if (load_table(s, t, err, errlen) < 0)
		return NULL;
	return t;
oom:
	snprintf(err, errlen, "table \"%s\".\"%s\": out of memory", st->ns, st->name);
	return NULL;
}

/* Drops f, written or not, with what it left in the store. */
static void drop_file(struct ice_file *f)
{
	if (!f)
		return;
	if (f->w)
		sl_ocf_abort(f->w);
	if (f->sf)
		f->store->ops->file_discard(f->store->ctx, f->sf);
	free(f->key);
	free(f);
}

/* Closes the file *fp (t's data file, or its equality delete file) and
 * publishes it in the store (durable at the store's next sync, or on
 * return), and adds it (its location, and its statistics, taken) to the
 * files to commit as content.  *fp is gone on return. */
static int finish_file(struct ice_sink *s, struct ice_tab *t, struct ice_file **fp, enum ice_content content,
		       char *err, size_t errlen)
{
	const struct sl_store_ops *ops = s->store.ops;
	struct ice_file *f = *fp;
	struct ice_data_file *df;
	struct sl_buf loc;
	int64_t n;
	int rc;

	if (!f)
		return 0;
	*fp = NULL;
	sl_buf_init(&loc, 0);
	n = (int64_t)sl_ocf_count(f->w);
	rc = sl_ocf_close(f->w, false, err, errlen);
	f->w = NULL;
	if (rc < 0 || ops->file_finish(s->store.ctx, f->sf, f->key, err, errlen) < 0)
		goto fail;
	if ((rc = ops->file_publish(s->store.ctx, f->sf, f->key, err, errlen)) != 0) {
		if (rc == SL_STORE_EXISTS)
			snprintf(err, errlen, "iceberg table \"%s\": \"%s\" exists already in %s", t->dir, f->key,
				 ops->describe(s->store.ctx));
		goto fail;
	}
	f->sf = NULL;
	sl_buf_printf(&loc, "%s/%s", s->root, f->key);
	if (sl_buf_failed(&loc) || !(df = realloc(t->files, (size_t)(t->nfiles + 1) * sizeof *df))) {
		snprintf(err, errlen, "iceberg table \"%s\": out of memory", t->dir);
		ops->remove(s->store.ctx, f->key, err, errlen);
		goto fail;
	}
	t->files = df;
	df[t->nfiles].path = sl_buf_detach(&loc);
	df[t->nfiles].content = content;
	df[t->nfiles].records = n;
	df[t->nfiles].size = f->size;
	df[t->nfiles].stats = content == ICE_DATA ? t->wstats : t->dstats;
	*(content == ICE_DATA ? &t->wstats : &t->dstats) = NULL;
	t->nfiles++;
	drop_file(f);
	return 0;
fail:
	sl_buf_free(&loc);
	drop_file(f);
	return -1;
}

static int commit_pending(struct ice_sink *s, struct ice_tab *t, char *err, size_t errlen);

/* Makes t's schema the one of table version st, for a change at csn: a
 * new schema in t->meta when columns were added, dropped or widened (a
 * column an older version lacks stays: ice_schema_of_version); a new
 * table's metadata when it has none.  The caller has committed what was
 * written with the old schema (commit_pending), so that each snapshot's
 * files share its manifest's schema. */
static int set_schema(struct ice_sink *s, struct ice_tab *t, const struct sl_table *st, const char *csn, char *err,
		      size_t errlen)
{
	struct ice_schema ns;
	bool changed;
	int rc;

	if ((rc = ice_schema_of_version(&ns, &changed, st, s->merge, t->meta, csn, err, errlen)) < 0)
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
	} else if (changed) {
		if (ice_meta_add_schema(t->meta, &ns) < 0)
			goto oom;
		sl_info("iceberg table \"%s\": schema %d adds, drops or widens columns of \"%s\".\"%s\"", t->dir, ns.id,
			st->ns, st->name);
	}
	for (int i = 0; i < ns.nfields; i++)
		if (ns.f[i].col < 0 && ns.f[i].meta == ICE_M_NONE)
			sl_info("iceberg table \"%s\": the change %s of \"%s\".\"%s\" is of an older version, without "
				"column \"%s\", which a later change added: the column stays, null in its rows", t->dir,
				csn, st->ns, st->name, ns.f[i].name);
	if (s->merge) {
		sl_table_free(t->mtab);
		if (!(t->mtab = sl_table_copy(st)))
			goto oom;
	}
	ice_schema_free(&t->schema);
	t->schema = ns;
	free(t->wstats);   /* sized for the old schema */
	free(t->dstats);
	t->wstats = t->dstats = NULL;
	memcpy(t->schema_key, st->schema_key, sizeof t->schema_key);
	sl_buf_reset(&t->avro_schema);
	if (ice_data_avro_schema(&t->avro_schema, &t->schema) < 0)
		goto oom;
	return 0;
oom:
	snprintf(err, errlen, "table \"%s\".\"%s\": out of memory", st->ns, st->name);
	ice_schema_free(&ns);
	return -1;
}

static int file_out(void *arg, const struct iovec *iov, int iovcnt, char *err, size_t errlen)
{
	struct ice_file *f = arg;

	for (int i = 0; i < iovcnt; i++)
		f->size += (int64_t)iov[i].iov_len;
	return f->store->ops->file_write(f->sf, iov, iovcnt, err, errlen);
}

/* Starts a new file of t's data folder in the store, named by the first
 * change's CSN (suffix: "" for a data file, "-deletes" for an equality
 * delete file), with Avro schema (len bytes), into *out. */
static int open_file(struct ice_sink *s, struct ice_tab *t, const char *csn, const char *suffix,
		     const char *schema, size_t len, struct ice_file **out, char *err, size_t errlen)
{
	struct ice_file *f = calloc(1, sizeof *f);
	struct sl_ocf_out o;
	struct sl_buf p;

	*out = NULL;
	sl_buf_init(&p, 0);
	sl_buf_printf(&p, "%s/data", t->key);
	if (!f || sl_buf_failed(&p))
		goto oom;
	f->store = &s->store;
	if (s->store.ops->file_new(s->store.ctx, p.data, csn, &f->sf, err, errlen) < 0)
		goto fail;
	sl_buf_printf(&p, "/%s-%08" PRIx32 "%s.avro", csn, (uint32_t)rand64(), suffix);
	if (!(f->key = sl_buf_detach(&p)))
		goto oom;
	o.write = file_out;
	o.arg = f;
	if (sl_ocf_open_out(&f->w, &o, f->key, schema, len, s->codec, 0, err, errlen) < 0) {
		f->w = NULL;
		goto fail;
	}
	*out = f;
	return 0;
oom:
	snprintf(err, errlen, "iceberg table \"%s\": out of memory", t->dir);
fail:
	sl_buf_free(&p);
	drop_file(f);
	return -1;
}

/* Appends change c to the file *fp (opened on first use with schema;
 * keys: only its key, as an equality delete; raw: values taken from
 * committed rows, or NULL). */
static int put_record(struct ice_sink *s, struct ice_tab *t, const struct sl_change *c, bool keys,
		      const struct ice_raw *raw, const struct sl_buf *schema, struct ice_file **fp, char *err,
		      size_t errlen)
{
	struct ice_col_stats **st = keys ? &t->dstats : &t->wstats;
	struct sl_buf *b;
	size_t start;
	int rc;

	if (!*st && !(*st = calloc((size_t)t->schema.nfields, sizeof **st))) {
		snprintf(err, errlen, "iceberg table \"%s\": out of memory", t->dir);
		return -1;
	}
	if (!*fp)   /* a new file: what a failed one counted goes */
		memset(*st, 0, (size_t)t->schema.nfields * sizeof **st);
	if (!*fp && open_file(s, t, c->csn, keys ? "-deletes" : "", schema->data, schema->len, fp, err,
			      errlen) < 0)
		goto failed;
	b = sl_ocf_record_buf((*fp)->w);
	start = b->len;
	rc = keys ? ice_encode_key(b, &t->schema, c, err, errlen) :
	     ice_encode_change_raw(b, &t->schema, c, raw, err, errlen);
	if (rc < 0)
		return -1;
	if (ice_stats_add(*st, &t->schema, keys, (const unsigned char *)b->data + start, b->len - start) < 0) {
		b->len = start;   /* the record goes, as an encoding error leaves it */
		snprintf(err, errlen, "iceberg table \"%s\": a record of \"%s\" does not decode for its column "
			 "statistics", t->dir, (*fp)->key);
		return -1;
	}
	if (sl_ocf_record_done((*fp)->w, err, errlen) < 0)
		goto failed;
	return 0;
failed:
	sl_outage_fail(s->outage, err);   /* the folder: a full disk, an I/O error */
	return -1;
}

/* The schema for the TRUNCATE marker c of a table dropped at the source
 * (or renamed away), whose table version has no columns (doc/output.md):
 * the marker is no schema change, so t keeps the schema it writes, or,
 * when it wrote nothing since it opened, takes the table's current one
 * (ice_schema_for_marker).  Returns 1, 0 when there is no table (nothing
 * to clear: the marker is not written), or -1. */
static int marker_schema(struct ice_tab *t, const struct sl_change *c, char *err, size_t errlen)
{
	if (t->schema.nfields > 0)
		return 1;
	if (!t->meta)
		return 0;
	if (ice_schema_for_marker(&t->schema, ice_meta_current_schema(t->meta), c->table->src) < 0 ||
	    ice_data_avro_schema(&t->avro_schema, &t->schema) < 0) {
		snprintf(err, errlen, "iceberg table \"%s\": could not read its current schema for the TRUNCATE "
			 "marker of \"%s\".\"%s\"", t->dir, c->table->ns, c->table->name);
		ice_schema_free(&t->schema);
		return -1;
	}
	return 1;
}

/* Merge mode: folds change c into t's batch. */
static int merge_write(struct ice_sink *s, struct ice_tab *t, const struct sl_change *c, char *err, size_t errlen)
{
	const struct sl_table *tab = c->table;

	if (c->op != SL_OP_TRUNCATE && !sl_table_has_key(tab)) {
		snprintf(err, errlen, "stream \"%s\": table \"%s\".\"%s\" has no primary key, so write_mode = merge "
			 "cannot keep its rows in the iceberg table \"%s\": name its key in the stream's key_columns "
			 "(key_columns = %s.%s.COLUMN), give it a primary key or a replica identity, or use "
			 "write_mode = append", s->stream, tab->ns, tab->name, t->dir, tab->ns, tab->name);
		return SL_EPREREQ;
	}
	return sl_mbatch_put(&t->batch, c, err, errlen);
}

/*
 * Merge mode: true when c sorts below the last TRUNCATE written to t (a
 * marker, or a TRUNCATE statement), or is that marker again.  A reader
 * that applies records in CSN order drops it (doc/output.md, "Where a
 * marker sorts"), but a merge table applies them in the order they come:
 * written after the TRUNCATE, it would stay.  The stream reads such
 * changes after a marker that stands above the run's start while it
 * replays the log from a checkpoint behind it: a backfill while streaming
 * queued behind another table's holds none of its table's changes until
 * its first chunk opens (issue 17, property seed 4203: the rows of a
 * partition detached since stayed in its root's table).
 */
static bool below_truncate(struct ice_sink *s, struct ice_tab *t, const struct sl_change *c)
{
	int cmp;

	if (!s->merge)
		return false;
	cmp = t->cleared[0] ? strcmp(c->csn, t->cleared) : 1;
	/* (the same marker again clears nothing more: the records written
	 * since are above it) */
	if (cmp < 0 || (cmp == 0 && c->op == SL_OP_TRUNCATE)) {
		if (t->below++ == 0)
			sl_info("iceberg table \"%s\": skipping the changes below its last TRUNCATE, at CSN %s, which "
				"the stream read after it (the first: the %s at CSN %s)", t->dir, t->cleared,
				sl_op_name(c->op), c->csn);
		return true;
	}
	if (c->op == SL_OP_TRUNCATE)
		memcpy(t->cleared, c->csn, sizeof t->cleared);
	return false;
}

static int ice_write(void *ctx, const struct sl_change *c, char *err, size_t errlen)
{
	struct ice_sink *s = ctx;
	struct ice_tab *t = find_tab(s, c->table, err, errlen);
	int rc;

	if (!t)
		return -1;
	/* a change from the log that a committed snapshot holds already (a
	 * flush in the middle of a transaction, at a drain, can leave an
	 * UPDATE-DELETE there without its UPDATE-INSERT: issue 17, seed 4840) */
	if (c->seq > 0 && t->floor[0] && strcmp(c->csn, t->floor) <= 0)
		return s->merge && c->op != SL_OP_TRUNCATE && sl_table_has_key(c->table) ?
		       sl_mbatch_skip(&t->batch, c, err, errlen) : 0;
	if (below_truncate(s, t, c))
		return 0;
	if (c->table->src)
		s->src = c->table->src;
	if (c->op == SL_OP_TRUNCATE && c->table->ncols == 0) {
		if ((rc = marker_schema(t, c, err, errlen)) <= 0)
			return rc;
	} else if (strcmp(t->schema_key, c->table->schema_key)) {
		if ((rc = commit_pending(s, t, err, errlen)) < 0 ||
		    (rc = set_schema(s, t, c->table, c->csn, err, errlen)) < 0)
			return rc;
	}
	if (s->merge) {
		if ((rc = merge_write(s, t, c, err, errlen)) < 0)
			return rc;
	} else if (put_record(s, t, c, false, NULL, &t->avro_schema, &t->wf, err, errlen) < 0) {
		return -1;
	}
	if (c->seq > 0)
		memcpy(t->last_csn, c->csn, sizeof t->last_csn);
	if (!s->pending)
		s->first_ms = sl_mono_ms();
	s->pending = true;
	return 0;
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
	if (s->version_due)
		return true;   /* a table version to publish (ice_version) */
	for (int i = 0; i < s->ntabs; i++)
		bytes += s->tabs[i].wf ? sl_ocf_size(s->tabs[i].wf->w) : s->tabs[i].batch.bytes;
	return bytes >= s->conf->max_file_bytes ||
	       (uint64_t)(now_ms - s->first_ms) >= s->conf->max_file_seconds * 1000;
}

static bool ice_pending(void *ctx)
{
	return ((struct ice_sink *)ctx)->pending;
}

static void free_manifests(struct ice_manifest_file *mf, int n)
{
	for (int k = 0; mf && k < n; k++)
		free(mf[k].path);
	free(mf);
}

/* The manifests of t's current snapshot, as its manifest list holds them
 * (since the last TRUNCATE, and after a compaction's replace snapshot, the
 * files it rewrote), read through the store; two free slots follow them.
 * *n receives the count.  Paths owned. */
static struct ice_manifest_file *manifests_of(struct ice_sink *s, struct ice_tab *t, int *n, char *err,
					      size_t errlen)
{
	struct ice_manifest_file *mf = NULL, *grown;

	if (ice_current_manifests(&s->store, s->stream, t->object, t->meta, &mf, n, err, errlen) < 0)
		return NULL;
	if (!(grown = realloc(mf, ((size_t)*n + 2) * sizeof *mf))) {
		free_manifests(mf, *n);
		snprintf(err, errlen, "iceberg table \"%s\": out of memory", t->dir);
		return NULL;
	}
	return grown;
}

/* Publishes the metadata JSON as v<N+1>.metadata.json (never replacing
 * one: the store's put_new), then version-hint.text.  Returns 0,
 * SL_STORE_EXISTS when another writer published that version first, or
 * -1.  *published: the metadata file is there (the commit stands, even
 * when replacing version-hint.text then failed: load_table finds it). */
static int publish_metadata(struct ice_sink *s, struct ice_tab *t, int version, bool *published, char *err,
			    size_t errlen)
{
	const struct sl_store_ops *ops = s->store.ops;
	char *text = json_dumps(t->meta, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
	struct sl_buf fin, hint;
	char num[16];
	int rc = -1;

	sl_buf_init(&fin, 0);
	sl_buf_init(&hint, 0);
	sl_buf_printf(&fin, "%s/metadata/v%d.metadata.json", t->key, version);
	sl_buf_printf(&hint, "%s/metadata/version-hint.text", t->key);
	if (!text || sl_buf_failed(&fin) || sl_buf_failed(&hint)) {
		snprintf(err, errlen, "iceberg table \"%s\": out of memory", t->dir);
		goto out;
	}
	if ((rc = ops->put_new(s->store.ctx, fin.data, text, strlen(text), err, errlen)) != 0) {
		if (rc == SL_STORE_EXISTS) {
			snprintf(err, errlen, "could not publish \"%s/metadata/v%d.metadata.json\": it exists "
				 "(another writer committed to the table); only one agent may write a table",
				 t->dir, version);
			rc = SL_STORE_EXISTS;
		}
		goto out;
	}
	*published = true;
	snprintf(num, sizeof num, "%d", version);
	rc = ops->put(s->store.ctx, hint.data, num, strlen(num), err, errlen);
out:
	free(text);
	sl_buf_free(&fin);
	sl_buf_free(&hint);
	return rc;
}

/* Writes the manifest <snapshot id>-m<k>.avro of t's files of content
 * (k 0: data, 1: equality deletes), when there are any, into mf[*nmf]. */
static int write_manifest(struct ice_sink *s, struct ice_tab *t, const struct ice_snapshot *sn,
			  enum ice_content content, struct ice_manifest_file *mf, int *nmf, char *err, size_t errlen)
{
	struct ice_data_file *f = malloc(((size_t)t->nfiles + 1) * sizeof *f);
	struct ice_manifest_file *m = &mf[*nmf];
	struct sl_buf path, key, enc;
	int n = 0, k = content == ICE_DATA ? 0 : 1, rc = -1;

	sl_buf_init(&path, 0);
	sl_buf_init(&key, 0);
	sl_buf_init(&enc, 0);
	if (!f)
		goto oom;
	memset(m, 0, sizeof *m);
	for (int i = 0; i < t->nfiles; i++) {
		if (t->files[i].content != content)
			continue;
		f[n++] = t->files[i];
		m->added_rows += t->files[i].records;
	}
	if (n == 0) {
		rc = 0;
		goto out;
	}
	sl_buf_printf(&path, "%s/metadata/%" PRId64 "-m%d.avro", t->dir, sn->id, k);
	sl_buf_printf(&key, "%s/metadata/%" PRId64 "-m%d.avro", t->key, sn->id, k);
	if (sl_buf_failed(&path) || sl_buf_failed(&key) ||
	    ice_manifest_encode(&enc, &t->schema, sn->id, sn->sequence_number, sn->sequence_number, f, n) < 0)
		goto oom;
	if (s->store.ops->put(s->store.ctx, key.data, enc.data, enc.len, err, errlen) < 0)
		goto out;
	m->path = sl_buf_detach(&path);
	m->deletes = content != ICE_DATA;
	m->length = (int64_t)enc.len;
	m->sequence_number = m->min_sequence_number = sn->sequence_number;
	m->snapshot_id = sn->id;
	m->added_files = n;
	(*nmf)++;
	rc = 0;
	goto out;
oom:
	snprintf(err, errlen, "iceberg table \"%s\": out of memory", t->dir);
out:
	free(f);
	sl_buf_free(&path);
	sl_buf_free(&key);
	sl_buf_free(&enc);
	return rc;
}

/* The snapshot that commits t's finished files. */
static void snapshot_of(struct ice_sink *s, struct ice_tab *t, const char *position, struct ice_snapshot *sn)
{
	const json_t *cur = ice_meta_current_snapshot(t->meta);

	sn->id = (int64_t)(rand64() >> 1);
	sn->parent_id = cur ? json_integer_value(json_object_get(cur, "snapshot-id")) : -1;
	sn->sequence_number = json_integer_value(json_object_get(t->meta, "last-sequence-number")) + 1;
	sn->timestamp_ms = sl_now_us() / 1000;
	sn->schema_id = t->schema.id;
	sn->stream = s->stream;
	sn->position = position;
	sn->last_csn = t->last_csn[0] ? t->last_csn : (t->floor[0] ? t->floor : NULL);
	sn->truncate = t->truncated;
	for (int i = 0; i < t->nfiles; i++) {
		if (t->files[i].content == ICE_DATA) {
			sn->added_files++;
			sn->added_records += t->files[i].records;
			sn->added_size += t->files[i].size;
		} else {
			sn->added_delete_files++;
			sn->added_deletes += t->files[i].records;
		}
	}
}

/* Commits t's finished files as one snapshot: its manifests and manifest
 * list (each durable when put returns), then the metadata file.  Returns 0,
 * SL_STORE_EXISTS when another writer published that version first (t->meta
 * is then spoilt: reload it), or a negative status. */
static int commit_once(struct ice_sink *s, struct ice_tab *t, const char *position, char *err, size_t errlen)
{
	struct ice_snapshot sn = { 0 };
	struct ice_manifest_file *mf = NULL;
	struct sl_buf lpath, lkey, enc, prev;
	json_t *gone = NULL;
	bool published = false;
	int nmf = 0, rc = -1;

	sl_buf_init(&lpath, 0);
	sl_buf_init(&lkey, 0);
	sl_buf_init(&enc, 0);
	sl_buf_init(&prev, 0);
	snapshot_of(s, t, position, &sn);
	sl_buf_printf(&lpath, "%s/metadata/snap-%" PRId64 ".avro", t->dir, sn.id);
	sl_buf_printf(&lkey, "%s/metadata/snap-%" PRId64 ".avro", t->key, sn.id);
	if (t->version > 0)
		sl_buf_printf(&prev, "%s/metadata/v%d.metadata.json", t->dir, t->version);
	sn.manifest_list = lpath.data;
	if (sl_buf_failed(&lpath) || sl_buf_failed(&lkey) || sl_buf_failed(&prev))
		goto oom;
	if (!(mf = manifests_of(s, t, &nmf, err, errlen)))
		goto out;
	if (t->truncated) {  /* the new snapshot drops every earlier file */
		for (; nmf > 0; nmf--)
			free(mf[nmf - 1].path);
	}
	if (write_manifest(s, t, &sn, ICE_DATA, mf, &nmf, err, errlen) < 0 ||
	    write_manifest(s, t, &sn, ICE_EQUALITY_DELETES, mf, &nmf, err, errlen) < 0)
		goto out;
	if (ice_manifest_list_encode(&enc, &sn, mf, nmf) < 0)
		goto oom;
	if ((rc = s->store.ops->put(s->store.ctx, lkey.data, enc.data, enc.len, err, errlen)) < 0)
		goto out;
	rc = -1;
	if (ice_meta_add_snapshot(t->meta, &sn, t->version > 0 ? prev.data : NULL, t->meta_ms) < 0 ||
	    !(gone = ice_meta_trim_log(t->meta)))
		goto oom;
	rc = publish_metadata(s, t, t->version + 1, &published, err, errlen);
	if (!published)
		goto out;
	t->version++;
	t->meta_ms = sn.timestamp_ms;
	if (sn.last_csn)
		memcpy(t->floor, sn.last_csn, sizeof t->floor);
	t->last_csn[0] = '\0';
	t->truncated = false;
	for (int i = 0; i < t->nfiles; i++) {
		free((char *)t->files[i].path);
		free(t->files[i].stats);
	}
	t->nfiles = 0;
	if (rc < 0)
		goto out;
	sl_debug("iceberg table \"%s\": committed snapshot %" PRId64 " (%" PRId64 " records, %" PRId64 " equality "
		 "deletes) as metadata version %d", t->dir, sn.id, sn.added_records, sn.added_deletes, t->version);
	ice_remove_metadata(&s->store, t->dir, t->key, gone);   /* version-hint.text names the new one */
	rc = 0;
	goto out;
oom:
	snprintf(err, errlen, "iceberg table \"%s\": out of memory", t->dir);
out:
	json_decref(gone);
	free_manifests(mf, nmf);
	sl_buf_free(&lpath);
	sl_buf_free(&lkey);
	sl_buf_free(&enc);
	sl_buf_free(&prev);
	return rc;
}

/* What a compaction of conf's tables does (ice_maint.h). */
static struct ice_compact_conf compact_conf(const struct sl_iceberg_conf *conf, const char *stream,
					    struct sl_ocf_codec *codec)
{
	struct ice_compact_conf cc = {
		.stream = stream, .codec = codec, .small_bytes = conf->compact_small_bytes, .min_files = 2,
		.retention_ms = (int64_t)conf->snapshot_retention * 1000, .keep = (int)conf->snapshot_keep,
		.grace_ms = (int64_t)conf->orphan_grace * 1000,
	};

	return cc;
}

/* Another writer committed version t->version + 1 first: reads the
 * table's newest metadata (load_table follows versions of this stream's,
 * as a compaction's), keeping the schema not committed yet.  Returns 0, 1
 * when the version taken is not this stream's (another agent), or -1. */
static int reload_table(struct ice_sink *s, struct ice_tab *t, char *err, size_t errlen)
{
	int version = t->version;

	json_decref(t->meta);
	t->meta = NULL;
	t->version = 0;
	if (load_table(s, t, err, errlen) < 0)
		return -1;
	if (t->version <= version)
		return 1;
	if (json_integer_value(json_object_get(t->meta, "current-schema-id")) != t->schema.id &&
	    ice_meta_add_schema(t->meta, &t->schema) < 0) {
		snprintf(err, errlen, "iceberg table \"%s\": out of memory", t->dir);
		return -1;
	}
	return 0;
}

/* Publishes t->meta, whose current schema no commit published yet (a
 * table version that no change brought: ice_version), as the next metadata
 * version, with no new snapshot: a schema is table metadata, and the
 * current snapshot (with its sluice.stream and sluice.last-csn) stays
 * current.  Returns as commit_once. */
static int commit_schema_once(struct ice_sink *s, struct ice_tab *t, const char *position, char *err,
			      size_t errlen)
{
	int64_t now_ms = sl_now_us() / 1000;
	struct sl_buf prev;
	json_t *gone = NULL;
	bool published = false;
	int rc = -1;

	(void)position;   /* the current snapshot's stays: the source position moves with the checkpoint */
	sl_buf_init(&prev, 0);
	sl_buf_printf(&prev, "%s/metadata/v%d.metadata.json", t->dir, t->version);
	if (now_ms < t->meta_ms)
		now_ms = t->meta_ms;
	if (sl_buf_failed(&prev) || ice_meta_log_previous(t->meta, prev.data, t->meta_ms) < 0 ||
	    json_object_set_new(t->meta, "last-updated-ms", json_integer(now_ms)) < 0 ||
	    !(gone = ice_meta_trim_log(t->meta))) {
		snprintf(err, errlen, "iceberg table \"%s\": out of memory", t->dir);
		goto out;
	}
	rc = publish_metadata(s, t, t->version + 1, &published, err, errlen);
	if (!published)
		goto out;
	t->version++;
	t->meta_ms = now_ms;
	if (rc < 0)
		goto out;
	sl_info("iceberg table \"%s\": schema %d published as metadata version %d, with no new snapshot (no change "
		"of \"%s\".\"%s\" came after its columns changed)", t->dir, t->schema.id, t->version, t->ns,
		t->name);
	ice_remove_metadata(&s->store, t->dir, t->key, gone);   /* version-hint.text names the new one */
	rc = 0;
out:
	json_decref(gone);
	sl_buf_free(&prev);
	return rc;
}

typedef int (*commit_fn)(struct ice_sink *s, struct ice_tab *t, const char *position, char *err, size_t errlen);

/* Commits t with once (commit_once: its finished files as one snapshot;
 * commit_schema_once: its new schema alone), on top of what a compaction
 * of the stream committed meanwhile; a version another writer took stops
 * it (SL_EPREREQ, the message naming the file). */
static int commit_table(struct ice_sink *s, struct ice_tab *t, commit_fn once, const char *position, char *err,
			size_t errlen)
{
	char taken[SL_ERRLEN];

	for (int tries = 0; tries < 20; tries++) {
		int rc = once(s, t, position, err, errlen);
		if (rc <= 0)
			return rc;
		snprintf(taken, sizeof taken, "%s", err);
		if ((rc = reload_table(s, t, err, errlen)) < 0)
			return -1;
		if (rc > 0) {
			snprintf(err, errlen, "%s", taken);
			return SL_EPREREQ;
		}
		sl_info("iceberg table \"%s\": a compaction committed version %d first; committing on top of it",
			t->dir, t->version);
	}
	return -1;
}

/* The TOAST rule for the rows of the batch (rows[0..n), in CSN order) that
 * wait for committed values: looks them up in t's current data files
 * (ice_fill.h).  *rawof (n entries) then gives a row's values taken, or
 * NULL, and *found whether its key's row was found; *want holds them. */
static int lookup_unchanged(struct ice_sink *s, struct ice_tab *t, struct sl_mrow **rows, size_t n, struct ice_want **want,
			    size_t *nwant, struct ice_raw ***rawof, bool **found, char *err, size_t errlen)
{
	struct ice_manifest_file *mf = NULL;
	const char **paths = NULL;
	int nmf = 0, np = 0, rc = -1;

	for (size_t i = 0; i < n; i++)
		*nwant += rows[i]->fill && !rows[i]->deleted;
	if (*nwant == 0)
		return 0;
	if (!(*want = calloc(*nwant, sizeof **want)) || !(*rawof = calloc(n, sizeof **rawof)) ||
	    !(*found = calloc(n, sizeof **found))) {
		*nwant = 0;
		goto oom;
	}
	for (size_t i = 0, k = 0; i < n; i++)
		if (rows[i]->fill && !rows[i]->deleted) {
			(*want)[k].row = rows[i];
			(*want)[k++].idx = i;
		}
	if (!(mf = manifests_of(s, t, &nmf, err, errlen)))
		goto out;
	if (!(paths = calloc((size_t)nmf + 1, sizeof *paths)))
		goto oom;
	for (int i = 0; i < nmf; i++)
		if (!mf[i].deletes)
			paths[np++] = mf[i].path;
	if (ice_fill_lookup(*want, *nwant, &t->schema, &s->store, s->root, paths, np, err, errlen) < 0) {
		size_t len = strlen(err);
		snprintf(err + len, errlen - len, " (iceberg table \"%s\": looking up unchanged values)", t->dir);
		goto out;
	}
	for (size_t k = 0; k < *nwant; k++) {
		(*rawof)[(*want)[k].idx] = (*want)[k].raw;
		(*found)[(*want)[k].idx] = (*want)[k].found;
	}
	rc = 0;
	goto out;
oom:
	snprintf(err, errlen, "iceberg table \"%s\": out of memory", t->dir);
out:
	free_manifests(mf, nmf);
	free(paths);
	return rc;
}

/* Merge mode: writes t's batch, in CSN order, as a data file of the rows
 * it leaves (each key's latest version) and an equality delete file of
 * every key it touched (which removes the key's rows of earlier snapshots;
 * none when the table has no earlier rows).  A TRUNCATE in the batch makes
 * the snapshot drop every earlier file. */
static int emit_batch(struct ice_sink *s, struct ice_tab *t, char *err, size_t errlen)
{
	struct sl_buf dschema;
	struct sl_mrow **rows;
	struct ice_want *want = NULL;
	struct ice_raw **rawof = NULL;
	bool *found = NULL;
	size_t n, nwant = 0;
	bool earlier;
	int rc = -1;

	if (t->batch.n == 0 && !t->batch.trunc)
		return 0;
	sl_buf_init(&dschema, 0);
	if (!(rows = sl_mbatch_sorted(&t->batch, &n)) || ice_delete_avro_schema(&dschema, &t->schema) < 0) {
		snprintf(err, errlen, "iceberg table \"%s\": out of memory", t->dir);
		goto out;
	}
	t->truncated |= t->batch.trunc != NULL;
	earlier = ice_meta_current_snapshot(t->meta) && !t->truncated;
	if (earlier && lookup_unchanged(s, t, rows, n, &want, &nwant, &rawof, &found, err, errlen) < 0)
		goto out;
	for (size_t i = 0; i < n; i++) {
		struct sl_change c;
		if (rows[i]->op == SL_OP_TRUNCATE)
			continue;
		sl_mrow_change(rows[i], t->mtab, &c);
		if (rows[i]->fill && !rows[i]->deleted && !(rawof && rawof[i] && found[i]) && ++t->unfilled &&
		    (t->unfilled & (t->unfilled - 1)) == 0)
			sl_warn("iceberg table \"%s\": change %s left values unchanged that the batch could not "
				"fill; they are null and named in _unchanged_columns (%" PRIu64 " such rows so far)",
				t->dir, c.csn, t->unfilled);
		if (!rows[i]->deleted && put_record(s, t, &c, false, rawof ? rawof[i] : NULL, &t->avro_schema,
						    &t->wf, err, errlen) < 0)
			goto out;
		if (earlier && put_record(s, t, &c, true, NULL, &dschema, &t->df, err, errlen) < 0)
			goto out;
	}
	if (finish_file(s, t, &t->df, ICE_EQUALITY_DELETES, err, errlen) < 0)
		goto out;
	sl_mbatch_clear(&t->batch);
	rc = 0;
out:
	ice_fill_free(want, nwant, &t->schema);
	free(want);
	free(rawof);
	free(found);
	free(rows);
	sl_buf_free(&dschema);
	return rc;
}

/* Finishes t's data file and commits what t holds, if anything: its
 * files as a snapshot (with the current schema), or else a schema that no
 * commit published yet, alone. */
static int commit_pending(struct ice_sink *s, struct ice_tab *t, char *err, size_t errlen)
{
	char position[SL_POS_TEXT_MAX * 2] = "";
	bool data;
	int rc;

	if (s->merge && emit_batch(s, t, err, errlen) < 0)
		return -1;
	if (finish_file(s, t, &t->wf, ICE_DATA, err, errlen) < 0)
		return -1;
	data = t->nfiles > 0 || t->truncated;
	if (!data && !(t->schema_due && t->version > 0))
		return 0;
	if (s->has_mark && s->src && s->src->pos_encode(&s->mark, position, sizeof position) < 0)
		position[0] = '\0';
	/* the data and delete files durable (published: s3), before any commit */
	if (t->nfiles > 0 && s->store.ops->sync && s->store.ops->sync(s->store.ctx, err, errlen) < 0)
		return -1;
	if ((rc = commit_table(s, t, data ? commit_once : commit_schema_once, position, err, errlen)) < 0)
		return rc;
	t->schema_due = false;
	t->since_compact += data;
	if (s->kill_after > 0 && ++s->commits >= s->kill_after)
		raise(SIGKILL);  /* test hook: a crash between the commit and the checkpoint */
	return 0;
}

/* Automatic compaction of t once compact_after_files commits were made
 * since open or its last compaction, unless a `sluice compact` holds the
 * lock.  A failure leaves the table as it was and is only logged. */
static void auto_compact(struct ice_sink *s, struct ice_tab *t)
{
	struct ice_compact_conf cc = compact_conf(s->conf, s->stream, s->codec);
	struct ice_compact_result res;
	char err[SL_ERRLEN];
	int fd = -1;
	bool busy = false;
	int64_t t0 = sl_mono_ms();

	if (!s->conf->compact_after_files || t->since_compact < s->conf->compact_after_files)
		return;
	if (sl_mirror_lock(s->state_dir, s->stream, false, &fd, &busy, err, sizeof err) < 0 || busy) {
		sl_debug("iceberg table \"%s\": no automatic compaction now: %s", t->dir,
			 busy ? "another compaction runs" : err);
		return;
	}
	if (ice_compact_table(&s->store, &cc, t->object, &res, err, sizeof err) < 0) {
		sl_warn("iceberg table \"%s\": automatic compaction failed (the table stays as it was): %s", t->dir, err);
	} else {
		t->since_compact = 0;
		if (res.done)
			sl_info("iceberg table \"%s\": compacted %d data files, %" PRId64 " records, %d equality deletes "
				"into %d, %" PRId64 " rows, in %" PRId64 " ms", t->dir, res.files_in, res.records_in,
				res.deletes_in, res.files_out, res.rows_out, sl_mono_ms() - t0);
		if (res.done && reload_table(s, t, err, sizeof err) < 0)
			sl_warn("iceberg table \"%s\": %s (the next commit reads it again)", t->dir, err);
	}
	sl_mirror_unlock(fd);
}

static int ice_flush(void *ctx, struct sl_position *durable, char *err, size_t errlen)
{
	struct ice_sink *s = ctx;

	for (int i = 0; i < s->ntabs; i++) {
		int rc = commit_pending(s, &s->tabs[i], err, errlen);
		if (rc < 0) {
			sl_outage_fail(s->outage, err);
			return rc;
		}
	}
	for (int i = 0; i < s->ntabs; i++)
		auto_compact(s, &s->tabs[i]);
	sl_outage_ok(s->outage);
	s->pending = false;
	s->version_due = false;
	if (!s->has_mark)
		return 0;
	*durable = s->mark;
	return 1;
}

/* sl_sink_ops.version: table version st, described between transactions
 * with no change of it after (DDL), becomes the Iceberg table's current
 * schema with the next flush, as its first change would make it
 * (what the old schema wrote is committed first, then set_schema); a flush with
 * no data files then publishes it alone (commit_schema_once).  Idempotent:
 * a version the table has already (handed again after a restart) makes no
 * schema.  A table sluice has not created yet is left to its first change,
 * and a version the table cannot take to the change that brings it, which
 * reports it. */
static int ice_version(void *ctx, const struct sl_table *st, char *err, size_t errlen)
{
	struct ice_sink *s = ctx;
	struct ice_tab *t = find_tab(s, st, err, errlen);
	json_int_t before;
	int rc;

	if (!t)
		return -1;
	if (!t->meta || !strcmp(t->schema_key, st->schema_key))
		return 0;
	if (st->src)
		s->src = st->src;
	/* what the old schema wrote, committed first, so that an SL_EPREREQ
	 * of set_schema is the version's, and before is read after a reload */
	if ((rc = commit_pending(s, t, err, errlen)) < 0)
		return rc;
	before = json_integer_value(json_object_get(t->meta, "current-schema-id"));
	if ((rc = set_schema(s, t, st, NULL, err, errlen)) == SL_EPREREQ) {
		sl_debug("iceberg table \"%s\": new version %s of \"%s\".\"%s\" left to its next change: %s", t->dir,
			 st->schema_key, st->ns, st->name, err);
		return 0;
	}
	if (rc < 0)
		return rc;
	if (json_integer_value(json_object_get(t->meta, "current-schema-id")) == before)
		return 0;   /* the table has these columns */
	t->schema_due = true;
	if (!s->pending)
		s->first_ms = sl_mono_ms();
	s->pending = s->version_due = true;
	return 0;
}

static int ice_discard_backfill(void *ctx, const struct sl_table *t, const char *csn_first, const char *csn_last,
				char *err, size_t errlen)
{
	struct ice_sink *s = ctx;

	(void)err;
	(void)errlen;
	/* Committed snapshots stay: rows delivered again carry the same _uuid
	 * (append).  In merge mode the redo's marker, which the agent writes
	 * after this call (a redo is always behind one), commits a snapshot
	 * that drops every earlier file: the committed rows of a key that the
	 * redo does not write again (deleted since) go with it. */
	if (s->merge)
		sl_info("iceberg: table \"%s\".\"%s\": the rows of the interrupted backfill (CSN %s to %s) that "
			"were committed stay until the redo's marker clears them", t->ns, t->name, csn_first,
			csn_last);
	else
		sl_info("iceberg: table \"%s\".\"%s\": the rows of the interrupted backfill (CSN %s to %s) that "
			"were committed stay; the redo writes them again with the same _uuid", t->ns, t->name,
			csn_first, csn_last);
	return 0;
}

static void free_tab(struct ice_sink *s, struct ice_tab *t)
{
	char err[256];

	drop_file(t->wf);
	drop_file(t->df);
	sl_mbatch_free(&t->batch);
	sl_table_free(t->mtab);
	for (int i = 0; i < t->nfiles; i++) {   /* published, never committed */
		const char *key = sl_ice_key_of(s->root, t->files[i].path);
		if (key && s->store.ops->remove(s->store.ctx, key, err, sizeof err) < 0)
			sl_warn("%s", err);
		free((char *)t->files[i].path);
		free(t->files[i].stats);
	}
	free(t->wstats);
	free(t->dstats);
	free(t->files);
	json_decref(t->meta);
	ice_schema_free(&t->schema);
	sl_buf_free(&t->avro_schema);
	free(t->object);
	free(t->ns);
	free(t->name);
	free(t->key);
	free(t->dir);
}

static void ice_close(void *ctx)
{
	struct ice_sink *s = ctx;

	if (!s)
		return;
	for (int i = 0; i < s->ntabs; i++)
		free_tab(s, &s->tabs[i]);
	free(s->tabs);
	if (s->codec)
		sl_ocf_codec_free(s->codec);
	if (s->store.ops)
		s->store.ops->close(s->store.ctx);
	free(s->stream);
	free(s->root);
	free(s->state_dir);
	free(s);
}

static int ice_open(void **ctx, const void *conf, const struct sl_sink_stream *st, char *err, size_t errlen)
{
	const struct sl_iceberg_conf *c = conf;
	struct ice_sink *s = calloc(1, sizeof *s);
	const char *k = getenv("SLUICE_FAULT_ICEBERG_KILL_AFTER_COMMIT");
	int64_t v;
	int rc = -1;

	*ctx = NULL;
	if (!s) {
		snprintf(err, errlen, "iceberg sink: out of memory");
		return -1;
	}
	s->conf = c;
	s->outage = st->outage;
	s->merge = st->mode == SL_WRITE_MERGE;
	if (st->state_dir && !(s->state_dir = strdup(st->state_dir))) {
		snprintf(err, errlen, "iceberg sink: out of memory");
		goto fail;
	}
	if (k && sl_parse_i64(k, 1, INT32_MAX, &v) == 0)
		s->kill_after = (long)v;
	if (!st->name || !*st->name || strchr(st->name, '/')) {
		snprintf(err, errlen, "stream name \"%s\" cannot name a folder", st->name ? st->name : "");
		goto fail;
	}
	/* S3 requests retry as long as it takes: a flush waits out an outage */
	if ((rc = sl_ice_store_open(c, st, 0, &s->store, &s->root, err, errlen)) < 0)
		goto fail;
	rc = -1;
	if (!(s->stream = strdup(st->name))) {
		snprintf(err, errlen, "iceberg sink: out of memory");
		goto fail;
	}
	if (sl_ocf_codec_new(&s->codec, c->codec, c->compression_level, c->compression_threads, err, errlen) < 0)
		goto fail;
	*ctx = s;
	return 0;
fail:
	ice_close(s);
	return rc;
}

/* `sluice check`: a bucket as s3 checks it (a small write and delete under
 * <prefix><stream>/); the warehouse folder, or the nearest folder above it
 * that exists, is writable (avro_dir's check of its path; creates
 * nothing). */
static int ice_check(const void *conf, const struct sl_sink_stream *st, FILE *out, char *err, size_t errlen)
{
	const struct sl_iceberg_conf *c = conf;
	struct sl_avro_dir_conf ad = { .path = c->path };

	if (c->s3.bucket)
		return sl_s3_ops.check(&c->s3, st, out, err, errlen);
	return sl_avro_dir_ops.check(&ad, st, out, err, errlen);
}

/* The tries per S3 request of `sluice verify` and `sluice compact`. */
#define MAINT_ATTEMPTS 3

/* `sluice verify`: the stream's tables read back (ice_maint.h). */
static int ice_verify_stream(const void *conf, const struct sl_sink_stream *st, FILE *out, char *err, size_t errlen)
{
	struct sl_store store;
	char *root;
	int rc;

	if (sl_ice_store_open(conf, st, MAINT_ATTEMPTS, &store, &root, err, errlen) < 0)
		return SL_EFAIL;
	rc = ice_verify(store, st->name, out, err, errlen);
	store.ops->close(store.ctx);
	free(root);
	return rc;
}

/* `sluice compact`: the stream's tables, holding its compaction lock (ice_maint.h). */
static int ice_compact_stream(const void *conf, const struct sl_sink_stream *st, const char *object, FILE *out,
			      char *err, size_t errlen)
{
	const struct sl_iceberg_conf *c = conf;
	struct ice_compact_conf cc = compact_conf(c, st->name, NULL);
	struct sl_store store = { 0 };
	char *root = NULL;
	int fd = -1, rc;
	bool busy;

	if ((rc = sl_mirror_lock(st->state_dir, st->name, true, &fd, &busy, err, errlen)) < 0)
		return rc;
	if ((rc = sl_ocf_codec_new(&cc.codec, c->codec, c->compression_level, c->compression_threads, err,
				   errlen)) < 0 ||
	    (rc = sl_ice_store_open(c, st, MAINT_ATTEMPTS, &store, &root, err, errlen)) < 0)
		goto out;
	rc = ice_compact(&store, &cc, object, out, err, errlen);
out:
	if (store.ops)
		store.ops->close(store.ctx);
	free(root);
	sl_ocf_codec_free(cc.codec);
	sl_mirror_unlock(fd);
	return rc;
}

static const struct sl_keydesc ice_keys[] = {
	{ .name = "path", .type = SL_KT_STRING, .excludes = "bucket", FIELD(struct sl_iceberg_conf, path) },
	SL_S3_CONN_KEYS(struct sl_iceberg_conf, s3., 0),
	SL_TREE_KEY_CODEC(struct sl_iceberg_conf),
	SL_TREE_KEY_COMPRESSION_LEVEL(struct sl_iceberg_conf),
	SL_TREE_KEY_COMPRESSION_THREADS(struct sl_iceberg_conf),
	SL_TREE_KEY_MAX_FILE_BYTES(struct sl_iceberg_conf, UINT64_MAX),
	SL_TREE_KEY_MAX_FILE_SECONDS(struct sl_iceberg_conf),
	{ .name = "compact_small_bytes", .type = SL_KT_BYTES, .def = "16MB", .min = 1,
	  .max = UINT64_MAX, FIELD(struct sl_iceberg_conf, compact_small_bytes) },
	SL_TREE_KEY_COMPACT_AFTER_FILES(struct sl_iceberg_conf),
	{ .name = "snapshot_retention", .type = SL_KT_SECONDS, .def = "86400", .min = 0, .max = 315360000,
	  FIELD(struct sl_iceberg_conf, snapshot_retention) },
	{ .name = "snapshot_keep", .type = SL_KT_INT, .def = "10", .min = 1, .max = 1000000,
	  FIELD(struct sl_iceberg_conf, snapshot_keep) },
	{ .name = "orphan_grace", .type = SL_KT_SECONDS, .def = "86400", .min = 0, .max = 315360000,
	  FIELD(struct sl_iceberg_conf, orphan_grace) },
};

/* Rules across keys: path, or bucket with the keys that reach it (s3's
 * rules). */
static int ice_conf_check(const void *conf, const struct sl_ini_section *sec, struct sl_keyerr *er)
{
	const struct sl_iceberg_conf *c = conf;
	const struct sl_ini_entry *e;

	if (sl_tree_conf_check(c->codec, c->compression_level, sec, er) < 0)
		return -1;
	if (c->path) {
		for (size_t i = 0; i < sizeof ice_keys / sizeof ice_keys[0]; i++) {
			if (ice_keys[i].off >= sizeof(struct sl_s3_conf) || !(e = sl_ini_find(sec, ice_keys[i].name)))
				continue;
			return sl_keyerr_set(er, e->line, "key \"%s\" is for a bucket, and [%s] has path: give "
					     "either path or bucket", ice_keys[i].name, sec->title);
		}
		return 0;
	}
	if (!c->s3.bucket)
		return sl_keyerr_set(er, sec->line, "[%s] needs path (a folder) or bucket (an S3 bucket) "
				     "(required for type iceberg)", sec->title);
	return sl_s3_conn_check(&c->s3, c->max_file_bytes, "iceberg", sec, er);
}

const struct sl_sink_ops sl_iceberg_ops = {
	.type = "iceberg",
	.caps = SL_SINK_CAP_MERGE | SL_SINK_CAP_COMPACT_APPEND,
	.keys = ice_keys,
	.nkeys = sizeof ice_keys / sizeof ice_keys[0],
	.conf_size = sizeof(struct sl_iceberg_conf),
	.conf_check = ice_conf_check,
	.check = ice_check,
	.verify = ice_verify_stream,
	.compact = ice_compact_stream,
	.open = ice_open,
	.write = ice_write,
	.mark = ice_mark,
	.flush_due = ice_flush_due,
	.pending = ice_pending,
	.flush = ice_flush,
	.discard_backfill = ice_discard_backfill,
	.version = ice_version,
	.close = ice_close,
};
