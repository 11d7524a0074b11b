/* agent/checkpoint.c: the per-stream checkpoint file (JSON through jansson). */
#include "agent/checkpoint.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/buf.h"
#include "common/log.h"
#include "common/util.h"

#define CORRUPT_SUFFIX ".corrupt"

static const char *const state_names[] = { "pending", "running", "done", "skipped", "dropped" };
#define NSTATES ((int)(sizeof state_names / sizeof state_names[0]))

static const char *const method_names[] = { "snapshot", "watermark" };

const char *sl_bf_state_name(enum sl_bf_state s)
{
	return state_names[s];
}

const char *sl_bf_method_name(enum sl_bf_method m)
{
	return method_names[m];
}

int sl_ckpt_set_resume(struct sl_ckpt_table *e, const char *key)
{
	char *k = NULL;

	if (key && !(k = strdup(key)))
		return -1;
	free(e->resume_key);
	e->resume_key = k;
	return 0;
}

void sl_ckpt_free(struct sl_checkpoint *ck)
{
	for (int i = 0; i < ck->ntables; i++) {
		free(ck->tables[i].name);
		free(ck->tables[i].ns);
		free(ck->tables[i].table);
		free(ck->tables[i].resume_key);
		free(ck->tables[i].columns);
		free(ck->tables[i].mask);
		free(ck->tables[i].pend.key);
	}
	free(ck->tables);
	free(ck->path);
	memset(ck, 0, sizeof *ck);
}

const struct sl_ckpt_table *sl_ckpt_find(const struct sl_checkpoint *ck, const char *ns, const char *table)
{
	for (int i = 0; i < ck->ntables; i++)
		if (!strcmp(ck->tables[i].ns, ns) && !strcmp(ck->tables[i].table, table))
			return &ck->tables[i];
	return NULL;
}

struct sl_ckpt_table *sl_ckpt_table(struct sl_checkpoint *ck, const char *ns, const char *name)
{
	struct sl_buf b;
	struct sl_ckpt_table *nt;
	const struct sl_ckpt_table *found = sl_ckpt_find(ck, ns, name);
	char *full;

	if (found)
		return &ck->tables[found - ck->tables];
	sl_buf_init(&b, 0);
	sl_buf_printf(&b, "%s.%s", ns, name);
	full = sl_buf_detach(&b);
	if (!full)
		return NULL;
	nt = realloc(ck->tables, sizeof *nt * (size_t)(ck->ntables + 1));
	if (!nt) {
		free(full);
		return NULL;
	}
	ck->tables = nt;
	nt = &ck->tables[ck->ntables];
	memset(nt, 0, sizeof *nt);
	nt->name = full;
	nt->ns = strdup(ns);
	nt->table = strdup(name);
	if (!nt->ns || !nt->table) {
		free(nt->name);
		free(nt->ns);
		free(nt->table);
		return NULL;
	}
	ck->ntables++;
	return nt;
}

/* Reads position key of o (absent: *out zeroed, *present false). */
static int get_pos(const struct sl_source_desc *desc, json_t *o, const char *key, struct sl_position *out,
		   bool *present)
{
	json_t *v = json_object_get(o, key);

	memset(out, 0, sizeof *out);
	if (present)
		*present = v != NULL;
	if (!v)
		return 0;
	return json_is_string(v) ? desc->pos_decode(json_string_value(v), out) : -1;
}

/* Reads the optional string field key of t into *out (malloc'd; left NULL
 * when absent or null).  0, -1 when it is not a string, -2 when out of memory. */
static int opt_string(json_t *t, const char *key, char **out)
{
	json_t *v = json_object_get(t, key);

	if (!v || json_is_null(v))
		return 0;
	if (!json_is_string(v))
		return -1;
	return (*out = strdup(json_string_value(v))) ? 0 : -2;
}

/* Reads one entry of the checkpoint's "tables" (key: its name) into ck.
 * 0, -1 when it is corrupt, -2 when out of memory. */
static int load_table(struct sl_checkpoint *ck, const struct sl_source_desc *desc, const char *key, json_t *t,
		      const char *snap_key)
{
	struct sl_ckpt_table *e;
	const char *st = json_string_value(json_object_get(t, "backfill"));
	const char *tns = json_string_value(json_object_get(t, "schema"));
	const char *tname = json_string_value(json_object_get(t, "table"));
	const char *dot = strchr(key, '.');
	char nsbuf[256];
	json_t *v;
	int s, rc;

	if (!st)
		return -1;
	if (!tns || !tname) {
		/* Written before the parts were recorded: split at the first dot. */
		if (!dot || (size_t)(dot - key) >= sizeof nsbuf)
			return -1;
		snprintf(nsbuf, sizeof nsbuf, "%.*s", (int)(dot - key), key);
		tns = nsbuf;
		tname = dot + 1;
	}
	e = sl_ckpt_table(ck, tns, tname);
	if (!e)
		return -2;
	if (strcmp(e->name, key) != 0)
		return -1;
	for (s = 0; s < NSTATES && strcmp(state_names[s], st); s++)
		;
	if (s == NSTATES)
		return -1;
	e->state = (enum sl_bf_state)s;
	e->rows = (uint64_t)json_integer_value(json_object_get(t, "rows"));
	e->id = (uint64_t)json_integer_value(json_object_get(t, "id"));
	e->shape = (uint64_t)json_integer_value(json_object_get(t, "shape"));
	e->layout = (uint64_t)json_integer_value(json_object_get(t, "layout"));
	if (get_pos(desc, t, snap_key, &e->snapshot, NULL) < 0)
		return -1;
	v = json_object_get(t, "schema_key");
	snprintf(e->schema_key, sizeof e->schema_key, "%s", json_is_string(v) ? json_string_value(v) : "");
	v = json_object_get(t, "method");
	e->method = SL_BF_SNAPSHOT;
	if (v && json_is_string(v) && !strcmp(json_string_value(v), method_names[SL_BF_WATERMARK]))
		e->method = SL_BF_WATERMARK;
	else if (v && (!json_is_string(v) || strcmp(json_string_value(v), method_names[SL_BF_SNAPSHOT])))
		return -1;
	if ((rc = opt_string(t, "columns", &e->columns)) < 0 || (rc = opt_string(t, "mask", &e->mask)) < 0 ||
	    (rc = opt_string(t, "resume_key", &e->resume_key)) < 0)
		return rc;
	e->chunks = (uint64_t)json_integer_value(json_object_get(t, "chunks"));
	e->resumed = json_is_true(json_object_get(t, "resumed"));
	if (get_pos(desc, t, "since", &e->since, &e->has_since) < 0)
		return -1;
	if (!e->has_since && e->method == SL_BF_SNAPSHOT && !e->resumed &&
	    (e->state == SL_BF_RUNNING || e->state == SL_BF_DONE)) {
		/* written before "since" was: a snapshot backfill that never
		 * resumed read every row in its snapshot */
		e->since = e->snapshot;
		e->has_since = true;
	}
	e->marker_csn = (uint64_t)json_integer_value(json_object_get(t, "marker_csn"));
	e->marker_ts_us = json_integer_value(json_object_get(t, "marker_ts_us"));
	return 0;
}

/* Reads the checkpoint's "tables" object (NULL: none) into ck.  0, -1 when
 * it is corrupt, -2 when out of memory. */
static int load_tables(struct sl_checkpoint *ck, const struct sl_source_desc *desc, json_t *tabs,
		       const char *snap_key)
{
	const char *key;
	json_t *t;
	int rc;

	if (!tabs)
		return 0;
	if (!json_is_object(tabs))
		return -1;
	json_object_foreach(tabs, key, t)
		if ((rc = load_table(ck, desc, key, t, snap_key)) < 0)
			return rc;
	return 0;
}

int sl_ckpt_load(struct sl_checkpoint *ck, const struct sl_source_desc *desc, const char *state_dir,
		 const char *stream, char *err, size_t errlen)
{
	struct sl_buf b;
	char *text = NULL;
	json_t *root = NULL, *v;
	json_error_t jerr;
	json_int_t format;
	const char *pos_key, *snap_key;
	int rc;

	memset(ck, 0, sizeof *ck);
	ck->desc = desc;
	sl_buf_init(&b, 0);
	sl_buf_printf(&b, "%s/%s.checkpoint.json", state_dir, stream);
	ck->path = sl_buf_detach(&b);
	if (!ck->path) {
		snprintf(err, errlen, "out of memory");
		return SL_EFAIL;
	}
	rc = sl_read_file(ck->path, &text, NULL, err, errlen);
	if (rc == 1)
		return SL_OK;
	if (rc < 0) {
		size_t l = strlen(err);
		snprintf(err + l, errlen - l, " (the checkpoint of stream \"%s\"; check the permissions of state_dir "
			 "\"%s\")", stream, state_dir);
		return SL_ECONFIG;
	}
	root = json_loads(text, 0, &jerr);
	free(text);
	if (!root || !json_is_object(root)) {
		if (root)
			snprintf(jerr.text, sizeof jerr.text, "not a JSON object");
		snprintf(err, errlen, "checkpoint \"%s\" is corrupt (line %d: %s), so the position of stream \"%s\" "
			 "is unknown; the file was not changed", ck->path, root ? 1 : jerr.line, jerr.text, stream);
		json_decref(root);
		return SL_ELOST;
	}
	v = json_object_get(root, "format");
	format = v ? (json_is_integer(v) ? json_integer_value(v) : -1) : 1;
	if (format == 1) {
		/* sluice 0.1: PostgreSQL only, LSNs as "X/Y". */
		if (strcmp(desc->kind, "postgres") != 0) {
			snprintf(err, errlen, "checkpoint \"%s\" was written for a postgres source, but the stream's "
				 "source is %s; remove it to start the stream over", ck->path, desc->kind);
			json_decref(root);
			return SL_ECONFIG;
		}
		ck->has_position = json_is_true(json_object_get(root, "slot_created"));
		ck->reset = json_is_true(json_object_get(root, "reset_slot"));
		pos_key = "durable_lsn";
		snap_key = "snapshot_lsn";
	} else if (format == 2) {
		const char *kind = json_string_value(json_object_get(root, "source"));
		if (!kind)
			goto corrupt;
		if (strcmp(kind, desc->kind) != 0) {
			snprintf(err, errlen, "checkpoint \"%s\" was written for a %s source, but the stream's source "
				 "is %s; remove it to start the stream over", ck->path, kind, desc->kind);
			json_decref(root);
			return SL_ECONFIG;
		}
		ck->has_position = json_is_true(json_object_get(root, "has_position"));
		ck->reset = json_is_true(json_object_get(root, "reset"));
		pos_key = "durable";
		snap_key = "snapshot";
	} else {
		snprintf(err, errlen, "checkpoint \"%s\" has format %lld, which this sluice does not know "
			 "(written by a newer version?); it was not changed", ck->path, (long long)format);
		json_decref(root);
		return SL_ECONFIG;
	}
	ck->exists = true;
	v = json_object_get(root, "slot");
	snprintf(ck->slot, sizeof ck->slot, "%s", json_is_string(v) ? json_string_value(v) : "");
	ck->last_source_ts_us = json_integer_value(json_object_get(root, "last_source_ts_us"));
	ck->updated_us = json_integer_value(json_object_get(root, "updated_us"));
	if (get_pos(desc, root, pos_key, &ck->durable, NULL) < 0)
		goto corrupt;
	rc = load_tables(ck, desc, json_object_get(root, "tables"), snap_key);
	if (rc == -1)
		goto corrupt;
	if (rc < -1)
		goto oom;
	json_decref(root);
	return SL_OK;
corrupt:
	snprintf(err, errlen, "checkpoint \"%s\" is corrupt (unexpected content), so the position of stream \"%s\" "
		 "is unknown; the file was not changed", ck->path, stream);
	json_decref(root);
	return SL_ELOST;
oom:
	snprintf(err, errlen, "out of memory reading checkpoint \"%s\"", ck->path);
	json_decref(root);
	return SL_EFAIL;
}

int sl_ckpt_set_aside(const struct sl_checkpoint *ck, char *err, size_t errlen)
{
	struct sl_buf b;
	char *to;
	int rc = 0;

	sl_buf_init(&b, 0);
	sl_buf_printf(&b, "%s%s", ck->path, CORRUPT_SUFFIX);
	if (!(to = sl_buf_detach(&b))) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	if (rename(ck->path, to) < 0 || sl_fsync_dir_of(to, false) < 0) {
		snprintf(err, errlen, "could not rename checkpoint \"%s\" to \"%s\": %s", ck->path, to, sl_strerror(errno));
		rc = -1;
	}
	free(to);
	return rc;
}

/* Sets key of o to the encoded position p. */
static int set_pos(const struct sl_source_desc *desc, json_t *o, const char *key, const struct sl_position *p)
{
	char text[2 * SL_POS_TEXT_MAX + 64];

	if (desc->pos_encode(p, text, sizeof text) < 0)
		return -1;
	return json_object_set_new(o, key, json_string(text));
}

int sl_ckpt_save(struct sl_checkpoint *ck, char *err, size_t errlen)
{
	json_t *root = json_object(), *tabs = json_object();
	char *text;
	int rc;

	if (!root || !tabs)
		goto oom;
	ck->updated_us = sl_now_us();
	json_object_set_new(root, "format", json_integer(2));
	json_object_set_new(root, "source", json_string(ck->desc->kind));
	json_object_set_new(root, "slot", json_string(ck->slot));
	json_object_set_new(root, "has_position", json_boolean(ck->has_position));
	json_object_set_new(root, "reset", json_boolean(ck->reset));
	if (set_pos(ck->desc, root, "durable", &ck->durable) < 0)
		goto oom;
	json_object_set_new(root, "last_source_ts_us", json_integer(ck->last_source_ts_us));
	json_object_set_new(root, "updated_us", json_integer(ck->updated_us));
	for (int i = 0; i < ck->ntables; i++) {
		struct sl_ckpt_table *e = &ck->tables[i];
		json_t *t = json_object();
		if (!t)
			goto oom;
		json_object_set_new(t, "backfill", json_string(state_names[e->state]));
		json_object_set_new(t, "schema", json_string(e->ns));
		json_object_set_new(t, "table", json_string(e->table));
		if (set_pos(ck->desc, t, "snapshot", &e->snapshot) < 0) {
			json_decref(t);
			goto oom;
		}
		json_object_set_new(t, "rows", json_integer((json_int_t)e->rows));
		json_object_set_new(t, "id", json_integer((json_int_t)e->id));
		json_object_set_new(t, "shape", json_integer((json_int_t)e->shape));
		if (e->layout)
			json_object_set_new(t, "layout", json_integer((json_int_t)e->layout));
		json_object_set_new(t, "schema_key", json_string(e->schema_key));
		json_object_set_new(t, "method", json_string(method_names[e->method]));
		if (e->resume_key)
			json_object_set_new(t, "resume_key", json_string(e->resume_key));
		if (e->columns)
			json_object_set_new(t, "columns", json_string(e->columns));
		if (e->mask)
			json_object_set_new(t, "mask", json_string(e->mask));
		if (e->chunks)
			json_object_set_new(t, "chunks", json_integer((json_int_t)e->chunks));
		if (e->resumed)
			json_object_set_new(t, "resumed", json_true());
		if (e->has_since && set_pos(ck->desc, t, "since", &e->since) < 0) {
			json_decref(t);
			goto oom;
		}
		if (e->marker_csn) {
			json_object_set_new(t, "marker_csn", json_integer((json_int_t)e->marker_csn));
			json_object_set_new(t, "marker_ts_us", json_integer(e->marker_ts_us));
		}
		json_object_set_new(tabs, e->name, t);
	}
	json_object_set_new(root, "tables", tabs);
	tabs = NULL;
	text = json_dumps(root, JSON_INDENT(2) | JSON_SORT_KEYS);
	json_decref(root);
	if (!text)
		goto oom2;
	rc = sl_write_file_atomic(ck->path, text, strlen(text), err, errlen);
	atomic_fetch_add(&ck->saves, 1);
	free(text);
	if (rc == 0)
		ck->exists = true;
	return rc;
oom:
	json_decref(root);
	json_decref(tabs);
oom2:
	snprintf(err, errlen, "out of memory writing checkpoint \"%s\"", ck->path);
	return -1;
}
