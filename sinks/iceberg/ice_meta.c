/*
 * sinks/iceberg/ice_meta.c: Iceberg schemas, data file records, table
 * metadata, manifests and manifest lists (see ice_meta.h).
 */
#include "sinks/iceberg/ice_meta.h"

#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>

#include "common/util.h"
#include "sinks/avro/avro_read.h"
#include "sinks/avro/avro_schema.h"
#include "sinks/avro/avro_value.h"
#include "sinks/iceberg/ice_stats.h"
#include "sinks/iceberg/ice_widen.h"

/* The metadata columns, in record order, after the payload columns: the
 * names and types the clickhouse sink gives them in append mode. */
static const struct {
	const char *name;
	enum ice_kind kind;
} meta_cols[ICE_M_POS] = {
	[ICE_M_UUID] = { "_uuid", ICE_STRING },
	[ICE_M_SOURCE_TS] = { "_source_timestamp", ICE_LONG },
	[ICE_M_READ_TS] = { "_read_timestamp", ICE_LONG },
	[ICE_M_CHANGE_TYPE] = { "_change_type", ICE_STRING },
	[ICE_M_CSN] = { "_csn", ICE_STRING },
	[ICE_M_IS_DELETED] = { "_is_deleted", ICE_BOOLEAN },
	[ICE_M_TX_ID] = { "_tx_id", ICE_LONG },
	[ICE_M_UNCHANGED] = { "_unchanged_columns", ICE_LIST_STRING },
};

static const char *const kind_names[] = {
	[ICE_BOOLEAN] = "boolean", [ICE_INT] = "int", [ICE_LONG] = "long", [ICE_FLOAT] = "float",
	[ICE_DOUBLE] = "double", [ICE_DECIMAL] = "decimal", [ICE_DATE] = "date", [ICE_TIME] = "time",
	[ICE_TIMESTAMP] = "timestamp", [ICE_TIMESTAMPTZ] = "timestamptz", [ICE_STRING] = "string",
	[ICE_BINARY] = "binary", [ICE_LIST_STRING] = "list",
};

const char *ice_kind_text(enum ice_kind k, int precision, int scale, char *buf, size_t len)
{
	if (k == ICE_DECIMAL) {
		snprintf(buf, len, "decimal(%d, %d)", precision, scale);
		return buf;
	}
	return kind_names[k];
}

void ice_schema_free(struct ice_schema *s)
{
	if (!s)
		return;
	for (int i = 0; i < s->nfields; i++) {
		free(s->f[i].name);
		free(s->f[i].doc);
	}
	free(s->f);
	memset(s, 0, sizeof *s);
}

int ice_column_name(struct sl_buf *out, const char *name)
{
	if (name[0] == '_')
		sl_buf_putc(out, '_');
	return sl_buf_puts(out, name);
}

static void kind_of_column(struct ice_field *f, const struct sl_column *c)
{
	static const enum ice_kind kinds[] = {
		[SL_T_STRING] = ICE_STRING, [SL_T_BOOL] = ICE_BOOLEAN, [SL_T_INT32] = ICE_INT,
		[SL_T_INT64] = ICE_LONG, [SL_T_FLOAT] = ICE_FLOAT, [SL_T_DOUBLE] = ICE_DOUBLE,
		[SL_T_DECIMAL] = ICE_DECIMAL, [SL_T_BYTES] = ICE_BINARY, [SL_T_DATE] = ICE_DATE,
		[SL_T_TIME] = ICE_TIME, [SL_T_TIMESTAMP] = ICE_TIMESTAMP, [SL_T_TIMESTAMPTZ] = ICE_TIMESTAMPTZ,
		[SL_T_UUID] = ICE_STRING, [SL_T_JSON] = ICE_STRING, [SL_T_UINT64] = ICE_DECIMAL,
	};

	f->kind = (unsigned)c->type < sizeof kinds / sizeof kinds[0] ? kinds[c->type] : ICE_STRING;
	if (c->type == SL_T_UINT64) {
		f->precision = 20;
		f->scale = 0;
	} else if (c->type == SL_T_DECIMAL) {
		if (c->precision > ICE_DECIMAL_MAX_PRECISION || c->precision < 1) {
			f->kind = ICE_STRING;
		} else {
			f->precision = c->precision;
			f->scale = c->scale;
		}
	}
}

/* The kind, precision and scale of a type as the metadata JSON holds it;
 * -1 if sluice does not write that type. */
static int kind_of_json(const json_t *type, enum ice_kind *k, int *prec, int *scale)
{
	const char *s = json_string_value(type);
	int64_t p, sc;
	const char *comma;

	if (json_is_object(type)) {
		const char *t = json_string_value(json_object_get(type, "type"));
		const char *e = json_string_value(json_object_get(type, "element"));
		if (t && e && !strcmp(t, "list") && !strcmp(e, "string")) {
			*k = ICE_LIST_STRING;
			return 0;
		}
		return -1;
	}
	if (!s)
		return -1;
	for (size_t i = 0; i < sizeof kind_names / sizeof kind_names[0]; i++) {
		if (i != ICE_DECIMAL && i != ICE_LIST_STRING && !strcmp(s, kind_names[i])) {
			*k = (enum ice_kind)i;
			return 0;
		}
	}
	if (strncmp(s, "decimal(", 8) || !(comma = strchr(s, ',')))
		return -1;
	{
		char a[16], b[16];
		size_t na = (size_t)(comma - (s + 8)), nb = strlen(comma + 1);
		if (na >= sizeof a || nb < 1 || nb >= sizeof b || comma[nb] != ')')
			return -1;
		memcpy(a, s + 8, na);
		a[na] = '\0';
		memcpy(b, comma[1] == ' ' ? comma + 2 : comma + 1, nb - (comma[1] == ' ') - 1);
		b[nb - (comma[1] == ' ') - 1] = '\0';
		if (sl_parse_i64(a, 1, ICE_DECIMAL_MAX_PRECISION, &p) < 0 || sl_parse_i64(b, 0, p, &sc) < 0)
			return -1;
	}
	*k = ICE_DECIMAL;
	*prec = (int)p;
	*scale = (int)sc;
	return 0;
}

/* cur's field named name, or NULL. */
static const json_t *find_field(const json_t *cur, const char *name)
{
	const json_t *fields = json_object_get(cur, "fields");
	size_t i;
	json_t *f;

	json_array_foreach(fields, i, f) {
		const char *n = json_string_value(json_object_get(f, "name"));
		if (n && !strcmp(n, name))
			return f;
	}
	return NULL;
}

/* Whether field f of schema cur is one of its identifier fields (a merge
 * table's key). */
static bool key_field(const json_t *cur, const json_t *f)
{
	json_int_t id = json_integer_value(json_object_get(f, "id"));
	size_t i;
	json_t *k;

	json_array_foreach(json_object_get(cur, "identifier-field-ids"), i, k)
		if (json_integer_value(k) == id)
			return true;
	return false;
}

/* Gives f its id from cur (checking its type), or a new one. */
static int assign_id(struct ice_field *f, const struct sl_table *t, const json_t *cur, int *last, bool *changed,
		     char *err, size_t errlen)
{
	const json_t *old = cur ? find_field(cur, f->name) : NULL;
	enum ice_kind k;
	int p = 0, s = 0;
	bool known, widened;
	char b2[32];

	if (!old) {
		f->id = ++*last;
		if (f->kind == ICE_LIST_STRING)
			f->elem_id = ++*last;
		*changed = true;
		return 0;
	}
	known = kind_of_json(json_object_get(old, "type"), &k, &p, &s) == 0;
	widened = known && ice_widens(k, p, s, f->kind, f->precision, f->scale);
	if (!known || (!widened && (k != f->kind || (k == ICE_DECIMAL && (p != f->precision || s != f->scale)))) ||
	    json_is_true(json_object_get(old, "required")) != f->required) {
		json_t *ty = json_object_get(old, "type");
		snprintf(err, errlen, "table \"%s\".\"%s\": column \"%s\" changed from %s%s to %s%s: an Iceberg "
			 "table takes only added columns and widened types (int to long, float to double, a decimal's "
			 "precision raised), so the stream stops; to go on, remove the table's folder "
			 "(or point the destination at a new path) and backfill the table again (doc/iceberg.md)",
			 t->ns, t->name, f->name,
			 json_is_string(ty) ? json_string_value(ty) : "list",
			 json_is_true(json_object_get(old, "required")) ? " not null" : "",
			 ice_kind_text(f->kind, f->precision, f->scale, b2, sizeof b2), f->required ? " not null" : "");
		return SL_EPREREQ;
	}
	f->id = (int)json_integer_value(json_object_get(old, "id"));
	*changed |= widened;   /* the same id, the wider type (ice_widen.h) */
	if (k == ICE_LIST_STRING)
		f->elem_id = (int)json_integer_value(json_object_get(json_object_get(old, "type"), "element-id"));
	return 0;
}

/* Fills field n of s for source column i or metadata column m; merge: a
 * key column is a required key field. */
static int fill_field(struct ice_schema *s, int n, const struct sl_table *t, int i, int m, bool merge)
{
	struct ice_field *f = &s->f[n];
	struct sl_buf name;

	sl_buf_init(&name, 0);
	f->col = i;
	f->meta = m;
	if (i >= 0) {
		ice_column_name(&name, t->cols[i].name);
		kind_of_column(f, &t->cols[i]);
		f->key = merge && t->cols[i].is_key;
		f->required = f->key;
		if (t->cols[i].doc && !(f->doc = strdup(t->cols[i].doc))) {
			sl_buf_free(&name);
			return -1;
		}
	} else if (m < ICE_M_POS) {
		sl_buf_puts(&name, meta_cols[m].name);
		f->kind = meta_cols[m].kind;
		f->required = true;
	} else {
		const struct sl_meta_field *mf = &t->src->meta[m - ICE_M_POS];
		sl_buf_putc(&name, '_');
		sl_buf_puts(&name, mf->name);
		f->kind = mf->type == SL_META_LONG ? ICE_LONG : ICE_STRING;
		f->required = mf->type != SL_META_OPT_STRING;
	}
	if (sl_buf_failed(&name)) {
		sl_buf_free(&name);
		return -1;
	}
	f->name = sl_buf_detach(&name);
	return f->name ? 0 : -1;
}

/* Fills f from field jf of a schema JSON whose identifier-field-ids are
 * ids: its id, name, doc, type and nullability; no source column (col -1,
 * meta ICE_M_NONE).  Returns 0, or -1 when jf holds a type sluice does not
 * write or memory ran out (what f holds is then for ice_schema_free). */
static int field_of_json(struct ice_field *f, const json_t *jf, const json_t *ids)
{
	const char *name = json_string_value(json_object_get(jf, "name"));
	const char *doc = json_string_value(json_object_get(jf, "doc"));
	size_t k;
	json_t *id;

	f->id = (int)json_integer_value(json_object_get(jf, "id"));
	f->name = strdup(name ? name : "");
	f->doc = doc ? strdup(doc) : NULL;
	f->required = json_is_true(json_object_get(jf, "required"));
	f->col = -1;
	f->meta = ICE_M_NONE;
	f->elem_id = (int)json_integer_value(json_object_get(json_object_get(jf, "type"), "element-id"));
	if (!f->name || (doc && !f->doc) ||
	    kind_of_json(json_object_get(jf, "type"), &f->kind, &f->precision, &f->scale) < 0)
		return -1;
	json_array_foreach(ids, k, id)
		f->key |= json_integer_value(id) == f->id;
	return 0;
}

/* Whether field f of meta's current schema cur, which the table version
 * of a change at csn lacks, stays: a field no key and nullable, added by a
 * change after csn (the version is older than the one that added it: a
 * replay of earlier positions, not a drop). */
static bool kept_field(const json_t *meta, const json_t *cur, const json_t *f, const char *csn)
{
	const char *added;

	if (!meta || !csn || key_field(cur, f) || json_is_true(json_object_get(f, "required")))
		return false;
	added = ice_meta_field_csn(meta, (int)json_integer_value(json_object_get(f, "id")));
	return added && strcmp(added, csn) > 0;
}

/* Puts into out (room for them allocated) the fields of cur that t lacks
 * and that stay (kept_field), after the k payload fields of t's columns
 * and before the metadata fields that follow them up to out->nfields. */
static int keep_fields(struct ice_schema *out, int k, const json_t *meta, const json_t *cur, const char *csn)
{
	size_t i;
	json_t *f;

	json_array_foreach(json_object_get(cur, "fields"), i, f) {
		const char *name = json_string_value(json_object_get(f, "name"));
		bool found = false;
		for (int j = 0; j < out->nfields && !found; j++)
			found = name && !strcmp(out->f[j].name, name);
		if (found || !kept_field(meta, cur, f, csn))
			continue;
		memmove(&out->f[k + 1], &out->f[k], (size_t)(out->nfields - k) * sizeof *out->f);
		memset(&out->f[k], 0, sizeof out->f[k]);
		out->nfields++;
		if (field_of_json(&out->f[k++], f, NULL) < 0)
			return -1;
	}
	return 0;
}

/* ice_schema_of_table and ice_schema_of_version: meta (may be NULL) and
 * csn (NULL: none) decide which fields of cur that t lacks stay. */
static int schema_of(struct ice_schema *out, bool *changed, const struct sl_table *t, bool merge,
		     const json_t *cur, int last_column_id, const json_t *meta, const char *csn, char *err,
		     size_t errlen)
{
	int nmeta = t->src ? (t->src->nmeta > SL_META_MAX ? SL_META_MAX : t->src->nmeta) : 0;
	int n = t->ncols + ICE_M_POS + nmeta, k = 0, rc = -1;
	size_t i;
	json_t *f;

	memset(out, 0, sizeof *out);
	*changed = cur == NULL;
	if (!(out->f = calloc((size_t)n + json_array_size(json_object_get(cur, "fields")), sizeof *out->f)))
		goto oom;
	out->nfields = n;
	for (int c = 0; c < t->ncols; c++, k++)
		if (fill_field(out, k, t, c, ICE_M_NONE, merge) < 0)
			goto oom;
	for (int m = 0; m < ICE_M_POS + nmeta; m++, k++)
		if (fill_field(out, k, t, -1, m, merge) < 0)
			goto oom;
	if (keep_fields(out, t->ncols, meta, cur, csn) < 0)
		goto oom;
	n = out->nfields;
	/* a field of cur that t no longer has leaves the schema (its id is
	 * never given again), unless it is a key field (checked first: a key
	 * column dropped makes another column the key) */
	json_array_foreach(json_object_get(cur, "fields"), i, f) {
		const char *name = json_string_value(json_object_get(f, "name"));
		bool found = false;
		for (k = 0; k < n && !found; k++)
			found = name && !strcmp(out->f[k].name, name);
		if (found)
			continue;
		if (key_field(cur, f)) {
			snprintf(err, errlen, "table \"%s\".\"%s\": key column \"%s\" was dropped or renamed: the "
				 "equality deletes of a merge table name its key columns, so the stream stops; to go "
				 "on, remove the table's folder (or point the destination at a new path) and backfill "
				 "the table again (doc/iceberg.md)", t->ns, t->name, name ? name : "?");
			rc = SL_EPREREQ;
			goto fail;
		}
		*changed = true;
	}
	for (k = 0; k < n; k++)
		if ((rc = assign_id(&out->f[k], t, cur, &last_column_id, changed, err, errlen)) < 0)
			goto fail;
	out->last_column_id = last_column_id;
	out->id = cur ? (int)json_integer_value(json_object_get(cur, "schema-id")) + (*changed ? 1 : 0) : 0;
	if (*changed && csn)
		snprintf(out->csn, sizeof out->csn, "%s", csn);
	return 0;
oom:
	snprintf(err, errlen, "table \"%s\".\"%s\": out of memory", t->ns, t->name);
fail:
	ice_schema_free(out);
	return rc;
}

int ice_schema_of_table(struct ice_schema *out, bool *changed, const struct sl_table *t, bool merge,
			const json_t *cur, int last_column_id, char *err, size_t errlen)
{
	return schema_of(out, changed, t, merge, cur, last_column_id, NULL, NULL, err, errlen);
}

int ice_schema_of_version(struct ice_schema *out, bool *changed, const struct sl_table *t, bool merge,
			  const json_t *meta, const char *csn, char *err, size_t errlen)
{
	const json_t *cur = meta ? ice_meta_current_schema(meta) : NULL;
	int last = meta ? (int)json_integer_value(json_object_get(meta, "last-column-id")) : 0;

	return schema_of(out, changed, t, merge, cur, last, meta, csn, err, errlen);
}

int ice_schema_from_json(struct ice_schema *out, const json_t *js)
{
	const json_t *fields = json_object_get(js, "fields"), *ids = json_object_get(js, "identifier-field-ids");
	size_t i;
	json_t *jf;

	memset(out, 0, sizeof *out);
	out->id = (int)json_integer_value(json_object_get(js, "schema-id"));
	if (!(out->f = calloc(json_array_size(fields) + 1, sizeof *out->f)))
		return -1;
	json_array_foreach(fields, i, jf) {
		struct ice_field *f = &out->f[out->nfields++];
		if (field_of_json(f, jf, ids) < 0)
			goto fail;
		if (f->id > out->last_column_id)
			out->last_column_id = f->id;
		if (f->elem_id > out->last_column_id)
			out->last_column_id = f->elem_id;
	}
	return 0;
fail:
	ice_schema_free(out);
	return -1;
}

/* Whether name is '_' followed by the position field's name mf. */
static bool is_pos_name(const char *name, const struct sl_meta_field *mf)
{
	return name[0] == '_' && !strcmp(name + 1, mf->name);
}

int ice_schema_for_marker(struct ice_schema *out, const json_t *cur, const struct sl_source_desc *src)
{
	int nmeta = src ? (src->nmeta > SL_META_MAX ? SL_META_MAX : src->nmeta) : 0;

	if (ice_schema_from_json(out, cur) < 0)
		return -1;
	for (int i = 0; i < out->nfields; i++) {
		struct ice_field *f = &out->f[i];
		for (int m = 0; m < ICE_M_POS && f->meta == ICE_M_NONE; m++)
			if (!strcmp(f->name, meta_cols[m].name))
				f->meta = m;
		for (int m = 0; m < nmeta && f->meta == ICE_M_NONE; m++)
			if (is_pos_name(f->name, &src->meta[m]))
				f->meta = ICE_M_POS + m;
	}
	return 0;
}

json_t *ice_schema_json(const struct ice_schema *s)
{
	json_t *o = json_object(), *fields = json_array(), *ids = json_array();
	char buf[32];

	if (!o || !fields || !ids)
		goto fail;
	json_object_set_new(o, "type", json_string("struct"));
	json_object_set_new(o, "schema-id", json_integer(s->id));
	for (int i = 0; i < s->nfields; i++) {
		const struct ice_field *f = &s->f[i];
		json_t *jf = json_object(), *ty;
		if (f->kind == ICE_LIST_STRING)
			ty = json_pack("{s:s, s:i, s:s, s:b}", "type", "list", "element-id", f->elem_id, "element",
				       "string", "element-required", 1);
		else
			ty = json_string(ice_kind_text(f->kind, f->precision, f->scale, buf, sizeof buf));
		if (!jf || !ty || json_array_append_new(fields, jf) < 0) {
			json_decref(jf);
			json_decref(ty);
			goto fail;
		}
		json_object_set_new(jf, "id", json_integer(f->id));
		json_object_set_new(jf, "name", json_string(f->name));
		json_object_set_new(jf, "required", json_boolean(f->required));
		json_object_set_new(jf, "type", ty);
		if (f->doc)
			json_object_set_new(jf, "doc", json_string(f->doc));
		if (f->key && json_array_append_new(ids, json_integer(f->id)) < 0)
			goto fail;
	}
	json_object_set_new(o, "fields", fields);
	fields = NULL;
	if (json_array_size(ids) > 0 && json_object_set(o, "identifier-field-ids", ids) < 0)
		goto fail;
	json_decref(ids);
	return o;
fail:
	json_decref(o);
	json_decref(fields);
	json_decref(ids);
	return NULL;
}

/* ---- data files ---- */

/* The bytes of a decimal(p, s) as an Iceberg Avro fixed. */
int ice_decimal_size(int precision)
{
	int n = 1;
	/* the smallest n with 2^(8n-1) > 10^p */
	double lim = 1;
	for (int i = 0; i < precision; i++)
		lim *= 10;
	for (double v = 128; v <= lim; v *= 256)
		n++;
	return n;
}

static void avro_type(struct sl_buf *out, const struct ice_field *f)
{
	switch (f->kind) {
	case ICE_BOOLEAN: sl_buf_puts(out, "\"boolean\""); break;
	case ICE_INT: sl_buf_puts(out, "\"int\""); break;
	case ICE_LONG: sl_buf_puts(out, "\"long\""); break;
	case ICE_FLOAT: sl_buf_puts(out, "\"float\""); break;
	case ICE_DOUBLE: sl_buf_puts(out, "\"double\""); break;
	case ICE_DECIMAL:
		sl_buf_printf(out, "{\"type\":\"fixed\",\"name\":\"decimal_%d_%d\",\"size\":%d,"
			      "\"logicalType\":\"decimal\",\"precision\":%d,\"scale\":%d}", f->precision,
			      f->scale, ice_decimal_size(f->precision), f->precision, f->scale);
		break;
	case ICE_DATE: sl_buf_puts(out, "{\"type\":\"int\",\"logicalType\":\"date\"}"); break;
	case ICE_TIME: sl_buf_puts(out, "{\"type\":\"long\",\"logicalType\":\"time-micros\"}"); break;
	case ICE_TIMESTAMP:
	case ICE_TIMESTAMPTZ:
		sl_buf_printf(out, "{\"type\":\"long\",\"logicalType\":\"timestamp-micros\",\"adjust-to-utc\":%s}",
			      f->kind == ICE_TIMESTAMPTZ ? "true" : "false");
		break;
	case ICE_STRING: sl_buf_puts(out, "\"string\""); break;
	case ICE_BINARY: sl_buf_puts(out, "\"bytes\""); break;
	case ICE_LIST_STRING:
		sl_buf_printf(out, "{\"type\":\"array\",\"items\":\"string\",\"element-id\":%d}", f->elem_id);
		break;
	}
}

/* The Avro record schema of s's fields (keys_only: its key fields). */
static int avro_schema_of(struct sl_buf *out, const struct ice_schema *s, bool keys_only)
{
	bool fixed_seen[ICE_DECIMAL_MAX_PRECISION + 1][ICE_DECIMAL_MAX_PRECISION + 1] = { { false } };
	bool first = true;

	sl_buf_puts(out, "{\"type\":\"record\",\"name\":\"r\",\"fields\":[");
	for (int i = 0; i < s->nfields; i++) {
		const struct ice_field *f = &s->f[i];
		bool named = f->kind == ICE_DECIMAL && fixed_seen[f->precision][f->scale];
		if (keys_only && !f->key)
			continue;
		if (!first)
			sl_buf_putc(out, ',');
		first = false;
		sl_buf_puts(out, "{\"name\":");
		sl_json_put_string(out, f->name, strlen(f->name));
		sl_buf_puts(out, ",\"type\":");
		if (!f->required)
			sl_buf_puts(out, "[\"null\",");
		if (named)   /* an Avro fixed is named once, then referred to */
			sl_buf_printf(out, "\"decimal_%d_%d\"", f->precision, f->scale);
		else
			avro_type(out, f);
		if (f->kind == ICE_DECIMAL)
			fixed_seen[f->precision][f->scale] = true;
		if (!f->required)
			sl_buf_puts(out, "],\"default\":null");
		if (f->doc) {
			sl_buf_puts(out, ",\"doc\":");
			sl_json_put_string(out, f->doc, strlen(f->doc));
		}
		sl_buf_printf(out, ",\"field-id\":%d}", f->id);
	}
	return sl_buf_puts(out, "]}");
}

int ice_field_index(int *idx, const struct ice_schema *s, const char *avro, size_t len)
{
	json_t *js = json_loadb(avro, len, 0, NULL);
	const json_t *fields = json_object_get(js, "fields");
	size_t j;
	json_t *f;

	if (!json_is_array(fields)) {
		json_decref(js);
		return -1;
	}
	for (int i = 0; i < s->nfields; i++) {
		idx[i] = -1;
		json_array_foreach(fields, j, f)
			if (json_integer_value(json_object_get(f, "field-id")) == s->f[i].id && idx[i] < 0)
				idx[i] = (int)j;
	}
	json_decref(js);
	return 0;
}

int ice_data_avro_schema(struct sl_buf *out, const struct ice_schema *s)
{
	return avro_schema_of(out, s, false);
}

int ice_delete_avro_schema(struct sl_buf *out, const struct ice_schema *s)
{
	return avro_schema_of(out, s, true);
}

/* A decimal value as text ("-12.50"), for a numeric too wide for Iceberg. */
static int put_decimal_text(struct sl_buf *b, const struct sl_value *v)
{
	struct sl_buf t;
	size_t nd = v->len, sc = v->scale > 0 ? (size_t)v->scale : 0;
	int rc;

	sl_buf_init(&t, 0);
	if (v->neg)
		sl_buf_putc(&t, '-');
	if (nd <= sc) {
		sl_buf_puts(&t, "0.");
		for (size_t i = nd; i < sc; i++)
			sl_buf_putc(&t, '0');
		sl_buf_append(&t, v->p, nd);
	} else {
		sl_buf_append(&t, v->p, nd - sc);
		if (sc) {
			sl_buf_putc(&t, '.');
			sl_buf_append(&t, v->p + nd - sc, sc);
		}
	}
	rc = sl_buf_failed(&t) ? -1 : sl_avro_put_bytes(b, t.data ? t.data : "", t.len);
	sl_buf_free(&t);
	return rc;
}

/* A decimal value (or a uint64) as the fixed of f: big-endian two's
 * complement, sign-extended to the fixed's size. */
static int put_decimal_fixed(struct sl_buf *b, const struct ice_field *f, const struct sl_column *col,
			     const struct sl_value *v, char *err, size_t errlen)
{
	unsigned char dec[SL_AVRO_DECIMAL_MAX_BYTES], out[32];
	size_t n, size = (size_t)ice_decimal_size(f->precision);

	if (v->kind == SL_V_UINT) {
		n = 9;
		dec[0] = 0;
		for (int i = 0; i < 8; i++)
			dec[1 + i] = (unsigned char)(v->u >> (56 - 8 * i));
	} else if (sl_avro_decimal_of(v, col->name, f->precision, f->scale, dec, &n, err, errlen) < 0) {
		return -1;
	}
	while (n > size && (dec[0] == 0x00 || dec[0] == 0xff)) {
		memmove(dec, dec + 1, --n);
	}
	if (n > size) {
		snprintf(err, errlen, "column \"%s\": a decimal value does not fit decimal(%d,%d)", col->name,
			 f->precision, f->scale);
		return -1;
	}
	memset(out, (dec[0] & 0x80) ? 0xff : 0x00, size - n);
	memcpy(out + size - n, dec, n);
	return sl_avro_put_raw(b, out, size);
}

static int put_column(struct sl_buf *b, const struct ice_field *f, const struct sl_column *col,
		      const struct sl_value *v, char *err, size_t errlen)
{
	if (v->kind == SL_V_NULL || v->kind == SL_V_UNCHANGED)
		return sl_avro_put_byte(b, 0);
	switch (f->kind) {
	case ICE_DECIMAL:
		if (v->kind != SL_V_DECIMAL && v->kind != SL_V_UINT)
			break;
		if (sl_avro_put_byte(b, 2) < 0)
			return -1;
		return put_decimal_fixed(b, f, col, v, err, errlen);
	case ICE_STRING:
		if (v->kind != SL_V_DECIMAL)
			return sl_avro_put_value(b, col, v, err, errlen);
		if (sl_avro_put_byte(b, 2) < 0)
			return -1;
		return put_decimal_text(b, v);
	default:
		return sl_avro_put_value(b, col, v, err, errlen);
	}
	snprintf(err, errlen, "column \"%s\": a value of kind %u does not fit type %s", col->name, v->kind,
		 kind_names[f->kind]);
	return -1;
}

/* A value of a required field (a key in merge mode): its union encoding
 * without the branch.  A null is an error. */
static int put_required(struct sl_buf *b, const struct ice_field *f, const struct sl_column *col,
			const struct sl_value *v, char *err, size_t errlen)
{
	size_t start = b->len;

	if (put_column(b, f, col, v, err, errlen) < 0)
		return -1;
	if (b->len == start || (unsigned char)b->data[start] != 2) {
		b->len = start;
		snprintf(err, errlen, "column \"%s\": a key column without a value", col->name);
		return -1;
	}
	memmove(b->data + start, b->data + start + 1, b->len - start - 1);
	b->len--;
	b->data[b->len] = '\0';
	return 0;
}

/* The null of a payload field that the change has no value for (a
 * TRUNCATE; a field the change's table version lacks: a dropped table's
 * marker).  A required field (a key) cannot be null. */
static int put_null(struct sl_buf *b, const struct ice_field *f, char *err, size_t errlen)
{
	if (f->required) {
		snprintf(err, errlen, "column \"%s\": a key column without a value", f->name);
		return -1;
	}
	return sl_avro_put_byte(b, 0);
}

/* True if field i of s is an unchanged value of c that raw does not fill. */
static bool unchanged_at(const struct ice_schema *s, int i, const struct sl_change *c, const struct ice_raw *raw)
{
	return s->f[i].col >= 0 && c->values[s->f[i].col].kind == SL_V_UNCHANGED && !(raw && raw[i].p);
}

static int put_meta(struct sl_buf *b, const struct ice_schema *s, const struct ice_field *f,
		    const struct sl_change *c, const struct ice_raw *raw, const struct sl_meta_value *mv, int nmv)
{
	char u[36];

	switch (f->meta) {
	case ICE_M_UUID:
		sl_avro_uuid_text(u, c->uuid);
		return sl_avro_put_bytes(b, u, sizeof u);
	case ICE_M_SOURCE_TS:
		return sl_avro_put_long(b, c->source_ts_us);
	case ICE_M_READ_TS:
		return sl_avro_put_long(b, c->read_ts_us);
	case ICE_M_CHANGE_TYPE:
		return sl_avro_put_str(b, sl_op_name(c->op));
	case ICE_M_CSN:
		return sl_avro_put_bytes(b, c->csn, SL_CSN_LEN);
	case ICE_M_IS_DELETED:
		return sl_avro_put_bool(b, c->op == SL_OP_DELETE || c->op == SL_OP_UPDATE_DELETE ||
					   c->op == SL_OP_TRUNCATE);
	case ICE_M_TX_ID:
		return sl_avro_put_long(b, (int64_t)c->tx_id);
	case ICE_M_UNCHANGED: {
		int64_t n = 0;
		for (int i = 0; c->values && i < s->nfields; i++)
			n += unchanged_at(s, i, c, raw);
		if (n && sl_avro_put_long(b, n) < 0)
			return -1;
		for (int i = 0; n && i < s->nfields; i++)
			if (unchanged_at(s, i, c, raw) && sl_avro_put_str(b, s->f[i].name) < 0)
				return -1;
		return sl_avro_put_long(b, 0);
	}
	default: {
		int i = f->meta - ICE_M_POS;
		if (i >= nmv)   /* no position (a hand-made change) */
			return f->kind == ICE_LONG ? sl_avro_put_long(b, 0) :
			       f->required ? sl_avro_put_str(b, "") : sl_avro_put_byte(b, 0);
		if (f->kind == ICE_LONG)
			return sl_avro_put_long(b, mv[i].i);
		if (!f->required) {
			if (!mv[i].s)
				return sl_avro_put_byte(b, 0);
			if (sl_avro_put_byte(b, 2) < 0)
				return -1;
		}
		return sl_avro_put_bytes(b, mv[i].s ? mv[i].s : "", mv[i].s ? mv[i].len : 0);
	}
	}
}

int ice_encode_change(struct sl_buf *out, const struct ice_schema *s, const struct sl_change *c, char *err,
		      size_t errlen)
{
	return ice_encode_change_raw(out, s, c, NULL, err, errlen);
}

int ice_encode_change_raw(struct sl_buf *out, const struct ice_schema *s, const struct sl_change *c,
			  const struct ice_raw *raw, char *err, size_t errlen)
{
	const struct sl_table *t = c->table;
	struct sl_meta_value mv[SL_META_MAX];
	char mbuf[SL_META_BUF];
	size_t start = out->len;
	int nmv = 0;

	if (t->src && c->pos) {
		nmv = t->src->nmeta > SL_META_MAX ? SL_META_MAX : t->src->nmeta;
		t->src->meta_values(c->pos, mv, mbuf, sizeof mbuf);
	}
	for (int i = 0; i < s->nfields; i++) {
		const struct ice_field *f = &s->f[i];
		int rc;
		if (raw && raw[i].p)
			rc = sl_buf_append(out, raw[i].p, raw[i].len);
		else if (f->col >= 0 && c->values && c->op != SL_OP_TRUNCATE)
			rc = (f->required ? put_required : put_column)(out, f, &t->cols[f->col], &c->values[f->col],
								       err, errlen);
		else if (f->col >= 0 || f->meta == ICE_M_NONE)
			rc = put_null(out, f, err, errlen);
		else
			rc = put_meta(out, s, f, c, raw, mv, nmv);
		if (rc < 0) {
			if ((f->col < 0 && f->meta != ICE_M_NONE) || sl_buf_failed(out))
				snprintf(err, errlen, "table \"%s\".\"%s\": column \"%s\": out of memory encoding a "
					 "value", t->ns, t->name, f->name);
			goto fail;
		}
	}
	return 0;
fail:
	if (!sl_buf_failed(out)) {
		out->len = start;
		if (out->data)
			out->data[start] = '\0';
	}
	return -1;
}

int ice_encode_key(struct sl_buf *out, const struct ice_schema *s, const struct sl_change *c, char *err,
		   size_t errlen)
{
	size_t start = out->len;

	for (int i = 0; i < s->nfields; i++) {
		const struct ice_field *f = &s->f[i];
		if (!f->key)
			continue;
		if (!c->values || put_required(out, f, &c->table->cols[f->col], &c->values[f->col], err, errlen) < 0) {
			if (!c->values || sl_buf_failed(out))
				snprintf(err, errlen, "table \"%s\".\"%s\": column \"%s\": the key cannot be encoded",
					 c->table->ns, c->table->name, f->name);
			if (!sl_buf_failed(out)) {
				out->len = start;
				if (out->data)
					out->data[start] = '\0';
			}
			return -1;
		}
	}
	return 0;
}

/* ---- table metadata ---- */

/* The property of the CSN of the change schema id was made for. */
static void schema_csn_key(char *out, size_t len, int id)
{
	snprintf(out, len, "sluice.schema-csn.%d", id);
}

/* Records s->csn, when known, as the property sluice.schema-csn.<id>. */
static int set_schema_csn(json_t *meta, const struct ice_schema *s)
{
	json_t *props = json_object_get(meta, "properties");
	char key[48];

	if (!s->csn[0])
		return 0;
	if (!json_is_object(props)) {
		if (json_object_set_new(meta, "properties", json_object()) < 0)
			return -1;
		props = json_object_get(meta, "properties");
	}
	schema_csn_key(key, sizeof key, s->id);
	return json_object_set_new(props, key, json_string(s->csn));
}

json_t *ice_meta_new(const char *table_uuid, const char *location, const struct ice_schema *s, int64_t now_ms)
{
	json_t *schema = ice_schema_json(s);
	json_t *m;

	if (!schema)
		return NULL;
	m = json_pack("{s:i, s:s, s:s, s:I, s:I, s:i, s:[o], s:i, s:[{s:i, s:[]}], s:i, s:i, "
		      "s:[{s:i, s:[]}], s:i, s:{}, s:I, s:{}, s:[], s:[], s:[]}",
		      "format-version", 2, "table-uuid", table_uuid, "location", location,
		      "last-sequence-number", (json_int_t)0, "last-updated-ms", (json_int_t)now_ms,
		      "last-column-id", s->last_column_id, "schemas", schema, "current-schema-id", s->id,
		      "partition-specs", "spec-id", 0, "fields", "default-spec-id", 0,
		      "last-partition-id", 999, "sort-orders", "order-id", 0, "fields",
		      "default-sort-order-id", 0, "properties", "current-snapshot-id", (json_int_t)-1,
		      "refs", "snapshots", "snapshot-log", "metadata-log");
	if (m && set_schema_csn(m, s) < 0) {
		json_decref(m);
		return NULL;
	}
	return m;
}

const char *ice_meta_field_csn(const json_t *meta, int id)
{
	size_t i, k;
	json_t *sc, *f;
	char key[48];

	json_array_foreach(json_object_get(meta, "schemas"), i, sc) {
		json_array_foreach(json_object_get(sc, "fields"), k, f) {
			if (json_integer_value(json_object_get(f, "id")) != id)
				continue;
			schema_csn_key(key, sizeof key, (int)json_integer_value(json_object_get(sc, "schema-id")));
			return json_string_value(json_object_get(json_object_get(meta, "properties"), key));
		}
	}
	return NULL;
}

int ice_meta_add_schema(json_t *meta, const struct ice_schema *s)
{
	json_t *j = ice_schema_json(s);

	if (!j || json_array_append_new(json_object_get(meta, "schemas"), j) < 0)
		return -1;
	if (json_object_set_new(meta, "current-schema-id", json_integer(s->id)) < 0 ||
	    json_object_set_new(meta, "last-column-id", json_integer(s->last_column_id)) < 0 ||
	    set_schema_csn(meta, s) < 0)
		return -1;
	return 0;
}

/* The snapshot's operation (the spec's summary operation): append when it
 * only adds data files; overwrite when it also adds delete files or drops
 * earlier files; delete when it adds no data file. */
static const char *operation_of(const struct ice_snapshot *sn)
{
	if (sn->replace)
		return "replace";
	if (!sn->added_delete_files && !sn->truncate)
		return "append";
	return sn->added_files ? "overwrite" : "delete";
}

static json_t *summary_of(const struct ice_snapshot *sn)
{
	char n[5][24];
	json_t *o;

	snprintf(n[0], sizeof n[0], "%" PRId64, sn->added_files);
	snprintf(n[1], sizeof n[1], "%" PRId64, sn->added_records);
	snprintf(n[2], sizeof n[2], "%" PRId64, sn->added_size);
	snprintf(n[3], sizeof n[3], "%" PRId64, sn->added_delete_files);
	snprintf(n[4], sizeof n[4], "%" PRId64, sn->added_deletes);
	o = json_pack("{s:s, s:s, s:s, s:s, s:s}", "operation", operation_of(sn), "added-data-files", n[0],
		      "added-records", n[1], "added-files-size", n[2], "sluice.stream", sn->stream);
	if (o && sn->added_delete_files &&
	    (json_object_set_new(o, "added-delete-files", json_string(n[3])) < 0 ||
	     json_object_set_new(o, "added-equality-delete-files", json_string(n[3])) < 0 ||
	     json_object_set_new(o, "added-equality-deletes", json_string(n[4])) < 0)) {
		json_decref(o);
		return NULL;
	}
	if (o && sn->truncate && json_object_set_new(o, "sluice.truncate", json_string("true")) < 0) {
		json_decref(o);
		return NULL;
	}
	if (o && sn->position && sn->position[0] &&
	    json_object_set_new(o, "sluice.position", json_string(sn->position)) < 0) {
		json_decref(o);
		return NULL;
	}
	if (o && sn->last_csn && json_object_set_new(o, "sluice.last-csn", json_string(sn->last_csn)) < 0) {
		json_decref(o);
		return NULL;
	}
	return o;
}

int ice_meta_add_snapshot(json_t *meta, const struct ice_snapshot *sn, const char *prev_file, int64_t prev_ms)
{
	json_t *summary = summary_of(sn), *snap, *refs;

	if (!summary)
		return -1;
	snap = json_pack("{s:I, s:I, s:I, s:s, s:o, s:i}", "snapshot-id", (json_int_t)sn->id,
			 "sequence-number", (json_int_t)sn->sequence_number, "timestamp-ms",
			 (json_int_t)sn->timestamp_ms, "manifest-list", sn->manifest_list, "summary", summary,
			 "schema-id", sn->schema_id);
	if (!snap)
		return -1;
	if (sn->parent_id >= 0 && json_object_set_new(snap, "parent-snapshot-id", json_integer(sn->parent_id)) < 0)
		goto fail;
	if (json_array_append_new(json_object_get(meta, "snapshots"), snap) < 0)
		return -1;
	refs = json_pack("{s:{s:I, s:s}}", "main", "snapshot-id", (json_int_t)sn->id, "type", "branch");
	if (!refs || json_object_set_new(meta, "refs", refs) < 0 ||
	    json_object_set_new(meta, "current-snapshot-id", json_integer(sn->id)) < 0 ||
	    json_object_set_new(meta, "last-sequence-number", json_integer(sn->sequence_number)) < 0 ||
	    json_object_set_new(meta, "last-updated-ms", json_integer(sn->timestamp_ms)) < 0 ||
	    json_array_append_new(json_object_get(meta, "snapshot-log"),
				  json_pack("{s:I, s:I}", "timestamp-ms", (json_int_t)sn->timestamp_ms,
					    "snapshot-id", (json_int_t)sn->id)) < 0)
		return -1;
	if (prev_file && ice_meta_log_previous(meta, prev_file, prev_ms) < 0)
		return -1;
	return 0;
fail:
	json_decref(snap);
	return -1;
}

int ice_meta_log_previous(json_t *meta, const char *prev_file, int64_t prev_ms)
{
	return json_array_append_new(json_object_get(meta, "metadata-log"),
				     json_pack("{s:I, s:s}", "timestamp-ms", (json_int_t)prev_ms, "metadata-file",
					       prev_file));
}

bool ice_meta_deletes_old(const json_t *meta)
{
	const char *v = json_string_value(json_object_get(json_object_get(meta, "properties"),
							  ICE_PROP_DELETE_AFTER_COMMIT));

	return v ? strcasecmp(v, "true") == 0 : true;
}

int ice_meta_versions_kept(const json_t *meta)
{
	const char *v = json_string_value(json_object_get(json_object_get(meta, "properties"),
							  ICE_PROP_PREVIOUS_VERSIONS_MAX));
	int64_t n;

	if (!v || sl_parse_i64(v, INT64_MIN, INT64_MAX, &n) < 0)
		return ICE_PREVIOUS_VERSIONS_MAX;
	return n < 1 ? 1 : n > INT_MAX ? INT_MAX : (int)n;   /* Iceberg keeps one at least */
}

json_t *ice_meta_trim_log(json_t *meta)
{
	json_t *log = json_object_get(meta, "metadata-log"), *gone = json_array();
	size_t keep = (size_t)ice_meta_versions_kept(meta), n = json_array_size(log);
	bool del = ice_meta_deletes_old(meta);

	if (!gone)
		return NULL;
	for (; n > keep; n--) {
		const char *f = json_string_value(json_object_get(json_array_get(log, 0), "metadata-file"));
		if (del && f && json_array_append_new(gone, json_string(f)) < 0)
			goto fail;
		if (json_array_remove(log, 0) < 0)
			goto fail;
	}
	return gone;
fail:
	json_decref(gone);
	return NULL;
}

/* The element of meta's array arr whose id_key equals meta's cur_key. */
static const json_t *current_of(const json_t *meta, const char *arr, const char *cur_key, const char *id_key)
{
	json_int_t cur = json_integer_value(json_object_get(meta, cur_key));
	size_t i;
	json_t *e;

	json_array_foreach(json_object_get(meta, arr), i, e)
		if (json_integer_value(json_object_get(e, id_key)) == cur)
			return e;
	return NULL;
}

const json_t *ice_meta_current_snapshot(const json_t *meta)
{
	return current_of(meta, "snapshots", "current-snapshot-id", "snapshot-id");
}

const json_t *ice_meta_current_schema(const json_t *meta)
{
	return current_of(meta, "schemas", "current-schema-id", "schema-id");
}

const char *ice_snapshot_prop(const json_t *snap, const char *key)
{
	return json_string_value(json_object_get(json_object_get(snap, "summary"), key));
}

/* ---- manifests ---- */

#define MANIFEST_ENTRY_SCHEMA_HEAD \
	"{\"type\":\"record\",\"name\":\"manifest_entry\",\"fields\":[" \
	"{\"name\":\"status\",\"type\":\"int\",\"field-id\":0}," \
	"{\"name\":\"snapshot_id\",\"type\":[\"null\",\"long\"],\"default\":null,\"field-id\":1}," \
	"{\"name\":\"sequence_number\",\"type\":[\"null\",\"long\"],\"default\":null,\"field-id\":3}," \
	"{\"name\":\"file_sequence_number\",\"type\":[\"null\",\"long\"],\"default\":null,\"field-id\":4}," \
	"{\"name\":\"data_file\",\"type\":{\"type\":\"record\",\"name\":\"r2\",\"fields\":[" \
	"{\"name\":\"content\",\"type\":\"int\",\"field-id\":134}," \
	"{\"name\":\"file_path\",\"type\":\"string\",\"field-id\":100}," \
	"{\"name\":\"file_format\",\"type\":\"string\",\"field-id\":101}," \
	"{\"name\":\"partition\",\"type\":{\"type\":\"record\",\"name\":\"r102\",\"fields\":[]}," \
	"\"field-id\":102}," \
	"{\"name\":\"record_count\",\"type\":\"long\",\"field-id\":103}," \
	"{\"name\":\"file_size_in_bytes\",\"type\":\"long\",\"field-id\":104}," \
	ICE_STATS_AVRO_SCHEMA

/* The manifest entry of a data file; of an equality delete file, with
 * equality_ids (135, a list of int with element id 136). */
static const char manifest_entry_schema[] = MANIFEST_ENTRY_SCHEMA_HEAD "]},\"field-id\":2}]}";
static const char delete_entry_schema[] = MANIFEST_ENTRY_SCHEMA_HEAD
	",{\"name\":\"equality_ids\",\"type\":[\"null\",{\"type\":\"array\",\"items\":\"int\","
	"\"element-id\":136}],\"default\":null,\"field-id\":135}]},\"field-id\":2}]}";

static const char manifest_file_schema[] =
	"{\"type\":\"record\",\"name\":\"manifest_file\",\"fields\":["
	"{\"name\":\"manifest_path\",\"type\":\"string\",\"field-id\":500},"
	"{\"name\":\"manifest_length\",\"type\":\"long\",\"field-id\":501},"
	"{\"name\":\"partition_spec_id\",\"type\":\"int\",\"field-id\":502},"
	"{\"name\":\"content\",\"type\":\"int\",\"field-id\":517},"
	"{\"name\":\"sequence_number\",\"type\":\"long\",\"field-id\":515},"
	"{\"name\":\"min_sequence_number\",\"type\":\"long\",\"field-id\":516},"
	"{\"name\":\"added_snapshot_id\",\"type\":\"long\",\"field-id\":503},"
	"{\"name\":\"added_files_count\",\"type\":\"int\",\"field-id\":504},"
	"{\"name\":\"existing_files_count\",\"type\":\"int\",\"field-id\":505},"
	"{\"name\":\"deleted_files_count\",\"type\":\"int\",\"field-id\":506},"
	"{\"name\":\"added_rows_count\",\"type\":\"long\",\"field-id\":512},"
	"{\"name\":\"existing_rows_count\",\"type\":\"long\",\"field-id\":513},"
	"{\"name\":\"deleted_rows_count\",\"type\":\"long\",\"field-id\":514}"
	"]}";

/* Appends an Avro container file of one block: the header (magic, the
 * key-value metadata kv[0..2n), codec null, a random sync marker), then
 * count records whose encoding is data. */
static int put_container(struct sl_buf *out, const char *schema, const char *const *kv, int n, int64_t count,
			 const struct sl_buf *data)
{
	unsigned char sync[16];

	if (getrandom(sync, sizeof sync, 0) != (ssize_t)sizeof sync)
		for (size_t i = 0; i < sizeof sync; i++)
			sync[i] = (unsigned char)(sl_mono_us() >> (i % 8));
	sl_avro_put_raw(out, "Obj\x01", 4);
	sl_avro_put_long(out, n + 2);
	sl_avro_put_str(out, "avro.schema");
	sl_avro_put_str(out, schema);
	sl_avro_put_str(out, "avro.codec");
	sl_avro_put_str(out, "null");
	for (int i = 0; i < n; i++) {
		sl_avro_put_str(out, kv[2 * i]);
		sl_avro_put_str(out, kv[2 * i + 1]);
	}
	sl_avro_put_long(out, 0);
	sl_avro_put_raw(out, sync, sizeof sync);
	if (count > 0) {
		sl_avro_put_long(out, count);
		sl_avro_put_long(out, (int64_t)data->len);
		sl_avro_put_raw(out, data->data, data->len);
		sl_avro_put_raw(out, sync, sizeof sync);
	}
	return sl_buf_failed(out) ? -1 : 0;
}

int ice_manifest_encode(struct sl_buf *out, const struct ice_schema *s, int64_t snapshot_id, int64_t seq,
			int64_t file_seq, const struct ice_data_file *files, int nfiles)
{
	struct sl_buf recs;
	json_t *sj = ice_schema_json(s);
	char *schema_text = sj ? json_dumps(sj, JSON_COMPACT) : NULL;
	char sid[16];
	const char *kv[] = {
		"schema", schema_text, "schema-id", sid, "partition-spec", "[]", "partition-spec-id", "0",
		"format-version", "2", "content", nfiles > 0 && files[0].content != ICE_DATA ? "deletes" : "data",
	};
	bool deletes = nfiles > 0 && files[0].content != ICE_DATA;
	int nkeys = 0, rc = -1;

	sl_buf_init(&recs, 0);
	snprintf(sid, sizeof sid, "%d", s->id);
	if (!schema_text)
		goto out;
	for (int i = 0; i < s->nfields; i++)
		nkeys += s->f[i].key;
	for (int i = 0; i < nfiles; i++) {
		sl_avro_put_long(&recs, 1);                 /* status: ADDED */
		sl_avro_put_byte(&recs, 2);
		sl_avro_put_long(&recs, snapshot_id);
		sl_avro_put_byte(&recs, 2);
		sl_avro_put_long(&recs, seq);               /* sequence_number */
		if (file_seq >= 0) {                        /* file_sequence_number, or null */
			sl_avro_put_byte(&recs, 2);
			sl_avro_put_long(&recs, file_seq);
		} else {
			sl_avro_put_byte(&recs, 0);
		}
		sl_avro_put_long(&recs, files[i].content);
		sl_avro_put_str(&recs, files[i].path);
		sl_avro_put_str(&recs, "AVRO");
		sl_avro_put_long(&recs, files[i].records);  /* the partition record has no fields */
		sl_avro_put_long(&recs, files[i].size);
		ice_stats_encode(&recs, files[i].stats, s);
		if (!deletes)
			continue;
		sl_avro_put_byte(&recs, 2);                 /* equality_ids: the key fields */
		sl_avro_put_long(&recs, nkeys);
		for (int k = 0; k < s->nfields; k++)
			if (s->f[k].key)
				sl_avro_put_long(&recs, s->f[k].id);
		sl_avro_put_long(&recs, 0);
	}
	if (sl_buf_failed(&recs))
		goto out;
	rc = put_container(out, deletes ? delete_entry_schema : manifest_entry_schema, kv, (int)(sizeof kv / sizeof kv[0] / 2), nfiles, &recs);
out:
	free(schema_text);
	json_decref(sj);
	sl_buf_free(&recs);
	return rc;
}

int ice_manifest_list_encode(struct sl_buf *out, const struct ice_snapshot *sn,
			     const struct ice_manifest_file *mf, int n)
{
	struct sl_buf recs;
	char sid[24], pid[24], seq[24];
	const char *kv[] = {
		"snapshot-id", sid, "parent-snapshot-id", pid, "sequence-number", seq, "format-version", "2",
	};
	int rc;

	snprintf(sid, sizeof sid, "%" PRId64, sn->id);
	if (sn->parent_id >= 0)
		snprintf(pid, sizeof pid, "%" PRId64, sn->parent_id);
	else
		snprintf(pid, sizeof pid, "null");
	snprintf(seq, sizeof seq, "%" PRId64, sn->sequence_number);
	sl_buf_init(&recs, 0);
	for (int i = 0; i < n; i++) {
		sl_avro_put_str(&recs, mf[i].path);
		sl_avro_put_long(&recs, mf[i].length);
		sl_avro_put_long(&recs, 0);                 /* partition_spec_id */
		sl_avro_put_long(&recs, mf[i].deletes ? 1 : 0);  /* content: data, deletes */
		sl_avro_put_long(&recs, mf[i].sequence_number);
		sl_avro_put_long(&recs, mf[i].min_sequence_number);
		sl_avro_put_long(&recs, mf[i].snapshot_id);
		sl_avro_put_long(&recs, mf[i].added_files);
		sl_avro_put_long(&recs, 0);
		sl_avro_put_long(&recs, 0);
		sl_avro_put_long(&recs, mf[i].added_rows);
		sl_avro_put_long(&recs, 0);
		sl_avro_put_long(&recs, 0);
	}
	rc = sl_buf_failed(&recs) ? -1 :
	     put_container(out, manifest_file_schema, kv, (int)(sizeof kv / sizeof kv[0] / 2), n, &recs);
	sl_buf_free(&recs);
	return rc;
}

/* ---- reading manifests back (sluice verify, compaction) ---- */

/* Field name of record val as a long (an int or a long, or a union of null
 * and one of them: null reads as -1). */
static int read_long(avro_value_t *val, const char *name, int64_t *out)
{
	avro_value_t f, b;
	int32_t i;

	if (avro_value_get_by_name(val, name, &f, NULL) != 0)
		return -1;
	if (avro_value_get_type(&f) == AVRO_UNION) {
		if (avro_value_get_current_branch(&f, &b) != 0)
			return -1;
		f = b;
	}
	switch (avro_value_get_type(&f)) {
	case AVRO_NULL:
		*out = -1;
		return 0;
	case AVRO_INT32:
		if (avro_value_get_int(&f, &i) != 0)
			return -1;
		*out = i;
		return 0;
	case AVRO_INT64:
		return avro_value_get_long(&f, out) != 0 ? -1 : 0;
	default:
		return -1;
	}
}

/* Field name of record val as a string (malloc'd), or NULL. */
static char *read_string(avro_value_t *val, const char *name)
{
	avro_value_t f;
	const char *s = NULL;
	size_t len = 0;

	if (avro_value_get_by_name(val, name, &f, NULL) != 0 || avro_value_get_string(&f, &s, &len) != 0)
		return NULL;
	return strndup(s, len ? len - 1 : 0);  /* avro-c counts the final NUL */
}

/* Grows *arr (of size elements) to hold n + 1. */
static int grow(void **arr, int n, size_t size)
{
	void *p;

	if (n & (n - 1) && n > 0)
		return 0;
	if (!(p = realloc(*arr, (size_t)(n ? 2 * n : 1) * size)))
		return -1;
	*arr = p;
	return 0;
}

void ice_entries_free(struct ice_entry *e, int n)
{
	for (int i = 0; e && i < n; i++)
		free(e[i].path);
	free(e);
}

/* Reads every record of the Avro file at file into *out, an array of *n
 * elements of size bytes, each filled by fill (0, or -1: a required field
 * is missing) and freed by drop.  what and fields name the file's kind and
 * its required fields in messages. */
static int read_all(const char *file, const char *what, const char *fields, void **out, int *n, size_t size,
		    int (*fill)(avro_value_t *val, void *elem), void (*drop)(void *elem), char *err, size_t errlen)
{
	struct sl_avro_read *rd = NULL;
	avro_value_t *val;
	int got, rc = -1;

	*out = NULL;
	*n = 0;
	if (sl_avro_read_open(&rd, file, err, errlen) < 0)
		return -1;
	while ((got = sl_avro_read_next(rd, &val, err, errlen)) > 0) {
		void *e;
		if (grow(out, *n, size) < 0) {
			snprintf(err, errlen, "%s \"%s\": out of memory", what, file);
			goto out;
		}
		e = (char *)*out + (size_t)*n * size;
		memset(e, 0, size);
		if (fill(val, e) < 0) {
			snprintf(err, errlen, "%s \"%s\": entry %d lacks a field the specification requires (%s)", what,
				 file, *n + 1, fields);
			drop(e);
			goto out;
		}
		(*n)++;
	}
	rc = got < 0 ? -1 : 0;
out:
	sl_avro_read_close(rd);
	if (rc < 0) {
		for (int i = 0; i < *n; i++)
			drop((char *)*out + (size_t)i * size);
		free(*out);
		*out = NULL;
		*n = 0;
	}
	return rc;
}


static int fill_entry(avro_value_t *val, void *elem)
{
	struct ice_entry *e = elem;
	avro_value_t df;
	int64_t status, content;

	if (read_long(val, "status", &status) < 0 || avro_value_get_by_name(val, "data_file", &df, NULL) != 0 ||
	    read_long(&df, "content", &content) < 0 || read_long(&df, "record_count", &e->records) < 0 ||
	    read_long(&df, "file_size_in_bytes", &e->size) < 0 || read_long(val, "sequence_number", &e->seq) < 0 ||
	    !(e->path = read_string(&df, "file_path")))
		return -1;
	e->status = (int)status;
	e->content = (enum ice_content)content;
	return 0;
}

static void drop_entry(void *elem)
{
	free(((struct ice_entry *)elem)->path);
}

int ice_manifest_read(const char *file, struct ice_entry **out, int *n, char *err, size_t errlen)
{
	return read_all(file, "manifest", "status, content, file_path, record_count, file_size_in_bytes",
			(void **)out, n, sizeof **out, fill_entry, drop_entry, err, errlen);
}

static int fill_manifest(avro_value_t *val, void *elem)
{
	struct ice_manifest_file *m = elem;
	int64_t content, files;

	if (read_long(val, "manifest_length", &m->length) < 0 || read_long(val, "content", &content) < 0 ||
	    read_long(val, "sequence_number", &m->sequence_number) < 0 ||
	    read_long(val, "min_sequence_number", &m->min_sequence_number) < 0 ||
	    read_long(val, "added_snapshot_id", &m->snapshot_id) < 0 || read_long(val, "added_files_count", &files) < 0 ||
	    read_long(val, "added_rows_count", &m->added_rows) < 0 || !(m->path = read_string(val, "manifest_path")))
		return -1;
	m->deletes = content != 0;
	m->added_files = (int)files;
	return 0;
}

static void drop_manifest(void *elem)
{
	free(((struct ice_manifest_file *)elem)->path);
}

int ice_manifest_list_read(const char *file, struct ice_manifest_file **out, int *n, char *err, size_t errlen)
{
	return read_all(file, "manifest list", "manifest_path, manifest_length, content, sequence_number, "
			"min_sequence_number, added_snapshot_id, added_files_count, added_rows_count", (void **)out, n, sizeof **out,
			fill_manifest, drop_manifest, err, errlen);
}
