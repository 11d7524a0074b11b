/*
 * sinks/avro_tree/manifest.c: manifests to JSON and back (see manifest.h),
 * with jansson.  Encoding and decoding sit side by side so that a round trip
 * proves they agree (tests/unit/test_avro_tree.c).
 */
#include "sinks/avro_tree/manifest.h"

#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/util.h"

void sl_manifest_key(struct sl_buf *out, const char *stream, uint64_t seq)
{
	sl_buf_printf(out, "%s/" SL_MANIFEST_DIR "/.%010" PRIu64 ".json", stream, seq);
}

bool sl_manifest_name(const char *base, uint64_t *seq)
{
	size_t n = strlen(base);
	uint64_t v = 0;

	if (n < 1 + 10 + 5 || base[0] != '.' || strcmp(base + n - 5, ".json") != 0)
		return false;
	for (size_t i = 1; i < n - 5; i++) {
		if (base[i] < '0' || base[i] > '9' || v > (UINT64_MAX - 9) / 10)
			return false;
		v = v * 10 + (uint64_t)(base[i] - '0');
	}
	*seq = v;
	return v > 0;
}

int sl_manifest_add_file(struct sl_manifest *m, const struct sl_manifest_file *f)
{
	struct sl_manifest_file *d;

	if (m->nfiles == m->files_alloc) {
		size_t na = m->files_alloc ? m->files_alloc * 2 : 8;
		struct sl_manifest_file *nf = realloc(m->files, na * sizeof *nf);
		if (!nf)
			return -1;
		m->files = nf;
		m->files_alloc = na;
	}
	d = &m->files[m->nfiles];
	*d = *f;
	d->path = strdup(f->path);
	d->object = strdup(f->object ? f->object : "");
	if (!d->path || !d->object) {
		free(d->path);
		free(d->object);
		return -1;
	}
	m->nfiles++;
	return 0;
}

int sl_manifest_add_removed(struct sl_manifest *m, const char *key)
{
	char **nr = sl_grow(m->removed, &m->removed_alloc, m->nremoved, sizeof *nr, 8);
	char *k;

	if (!nr)
		return -1;
	m->removed = nr;
	if (!(k = strdup(key)))
		return -1;
	m->removed[m->nremoved++] = k;
	return 0;
}

int sl_manifest_set_pos(struct sl_manifest_pos *p, const char *pos, const char *csn)
{
	char *np = NULL;

	if (pos && !(np = strdup(pos)))
		return -1;
	free(p->pos);
	p->pos = np;
	snprintf(p->csn, sizeof p->csn, "%s", pos && csn ? csn : "");
	return 0;
}

void sl_manifest_free(struct sl_manifest *m)
{
	for (size_t i = 0; i < m->nfiles; i++) {
		free(m->files[i].path);
		free(m->files[i].object);
	}
	free(m->files);
	for (size_t i = 0; i < m->nremoved; i++)
		free(m->removed[i]);
	free(m->removed);
	free(m->stream);
	free(m->previous);
	free(m->source);
	free(m->from.pos);
	free(m->to.pos);
	memset(m, 0, sizeof *m);
}

static json_t *pos_json(const struct sl_manifest_pos *p)
{
	if (!p->pos)
		return json_null();
	return json_pack("{s:s, s:s}", "position", p->pos, "csn", p->csn);
}

static void format_time(char out[64], int64_t us)
{
	time_t secs = (time_t)(us / 1000000);
	struct tm tm;

	if (us < 0 || !gmtime_r(&secs, &tm)) {
		snprintf(out, 64, "1970-01-01T00:00:00.000000Z");
		return;
	}
	snprintf(out, 64, "%04d-%02d-%02dT%02d:%02d:%02d.%06dZ", tm.tm_year + 1900, tm.tm_mon + 1,
		 tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, (int)(us % 1000000));
}

int sl_manifest_encode(const struct sl_manifest *m, struct sl_buf *out, char *err, size_t errlen)
{
	json_t *root = json_object(), *files = json_array(), *removed = json_array();
	char when[64];
	char *text = NULL;
	int rc = -1;

	if (!root || !files || !removed)
		goto oom;
	format_time(when, m->written_at_us);
	if (json_object_set_new(root, "format", json_integer(SL_MANIFEST_FORMAT)) ||
	    json_object_set_new(root, "stream", json_string(m->stream ? m->stream : "")) ||
	    json_object_set_new(root, "sequence", json_integer((json_int_t)m->sequence)) ||
	    json_object_set_new(root, "previous", m->previous ? json_string(m->previous) : json_null()) ||
	    json_object_set_new(root, "written_at", json_string(when)) ||
	    json_object_set_new(root, "sluice", json_string(PACKAGE_VERSION)) ||
	    json_object_set_new(root, "source", m->source ? json_string(m->source) : json_null()) ||
	    json_object_set_new(root, "from", pos_json(&m->from)) ||
	    json_object_set_new(root, "to", pos_json(&m->to)))
		goto oom;
	for (size_t i = 0; i < m->nfiles; i++) {
		const struct sl_manifest_file *f = &m->files[i];
		json_t *o = json_pack("{s:s, s:s, s:s, s:I, s:I, s:s, s:s}", "path", f->path, "object",
				      f->object, "schema_key", f->schema_key, "records", (json_int_t)f->records,
				      "bytes", (json_int_t)f->bytes, "first_csn", f->first_csn,
				      "last_csn", f->last_csn);
		if (!o || json_array_append_new(files, o))
			goto oom;
	}
	for (size_t i = 0; i < m->nremoved; i++)
		if (json_array_append_new(removed, json_string(m->removed[i])))
			goto oom;
	if (json_object_set(root, "files", files) || json_object_set(root, "removed", removed))
		goto oom;
	text = json_dumps(root, JSON_INDENT(1) | JSON_PRESERVE_ORDER);
	if (!text || sl_buf_puts(out, text) < 0 || sl_buf_putc(out, '\n') < 0)
		goto oom;
	rc = 0;
	goto out;
oom:
	snprintf(err, errlen, "manifest %" PRIu64 " of stream \"%s\": out of memory", m->sequence,
		 m->stream ? m->stream : "");
out:
	free(text);
	json_decref(files);
	json_decref(removed);
	json_decref(root);
	return rc;
}

/* Copies the string member key of o into *out (NULL when null and may_null). */
static int get_str(json_t *o, const char *key, bool may_null, char **out, char *err, size_t errlen)
{
	json_t *v = json_object_get(o, key);

	*out = NULL;
	if (may_null && (!v || json_is_null(v)))
		return 0;
	if (!json_is_string(v)) {
		snprintf(err, errlen, "\"%s\" is not a string", key);
		return -1;
	}
	if (!(*out = strdup(json_string_value(v)))) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	return 0;
}

static int get_fixed(json_t *o, const char *key, char *out, size_t width, char *err, size_t errlen)
{
	json_t *v = json_object_get(o, key);

	if (!json_is_string(v) || strlen(json_string_value(v)) != width) {
		snprintf(err, errlen, "\"%s\" is not a string of %zu characters", key, width);
		return -1;
	}
	memcpy(out, json_string_value(v), width + 1);
	return 0;
}

static int get_uint(json_t *o, const char *key, uint64_t *out, char *err, size_t errlen)
{
	json_t *v = json_object_get(o, key);

	if (!json_is_integer(v) || json_integer_value(v) < 0) {
		snprintf(err, errlen, "\"%s\" is not a whole number", key);
		return -1;
	}
	*out = (uint64_t)json_integer_value(v);
	return 0;
}

static int get_pos(json_t *o, const char *key, struct sl_manifest_pos *p, char *err, size_t errlen)
{
	json_t *v = json_object_get(o, key);

	if (!v || json_is_null(v))
		return 0;
	if (!json_is_object(v)) {
		snprintf(err, errlen, "\"%s\" is not an object", key);
		return -1;
	}
	if (get_str(v, "position", false, &p->pos, err, errlen) < 0 ||
	    get_fixed(v, "csn", p->csn, 16, err, errlen) < 0) {
		size_t l = strlen(err);
		snprintf(err + l, errlen - l, " in \"%s\"", key);
		return -1;
	}
	return 0;
}

int sl_manifest_decode(struct sl_manifest *m, const char *text, size_t len, char *err, size_t errlen)
{
	json_error_t je;
	json_t *root, *files, *removed, *v;
	uint64_t format = 0;
	size_t i;
	int rc = -1;

	memset(m, 0, sizeof *m);
	root = json_loadb(text, len, 0, &je);
	if (!root) {
		snprintf(err, errlen, "not JSON: %s (line %d)", je.text, je.line);
		return -1;
	}
	if (!json_is_object(root)) {
		snprintf(err, errlen, "not a JSON object");
		goto out;
	}
	if (get_uint(root, "format", &format, err, errlen) < 0)
		goto out;
	if (format != SL_MANIFEST_FORMAT) {
		snprintf(err, errlen, "format %" PRIu64 " is not %d", format, SL_MANIFEST_FORMAT);
		goto out;
	}
	if (get_uint(root, "sequence", &m->sequence, err, errlen) < 0 ||
	    get_str(root, "stream", false, &m->stream, err, errlen) < 0 ||
	    get_str(root, "previous", true, &m->previous, err, errlen) < 0 ||
	    get_str(root, "source", true, &m->source, err, errlen) < 0 ||
	    get_pos(root, "from", &m->from, err, errlen) < 0 || get_pos(root, "to", &m->to, err, errlen) < 0)
		goto out;
	files = json_object_get(root, "files");
	removed = json_object_get(root, "removed");
	if (!json_is_array(files) || !json_is_array(removed)) {
		snprintf(err, errlen, "\"files\" or \"removed\" is not an array");
		goto out;
	}
	json_array_foreach(files, i, v) {
		struct sl_manifest_file f;
		int r;

		memset(&f, 0, sizeof f);
		if (!json_is_object(v)) {
			snprintf(err, errlen, "files[%zu] is not an object", i);
			goto out;
		}
		if (get_str(v, "path", false, &f.path, err, errlen) < 0 ||
		    get_str(v, "object", false, &f.object, err, errlen) < 0 ||
		    get_fixed(v, "schema_key", f.schema_key, 16, err, errlen) < 0 ||
		    get_uint(v, "records", &f.records, err, errlen) < 0 ||
		    get_uint(v, "bytes", &f.bytes, err, errlen) < 0 ||
		    get_fixed(v, "first_csn", f.first_csn, SL_CSN_LEN, err, errlen) < 0 ||
		    get_fixed(v, "last_csn", f.last_csn, SL_CSN_LEN, err, errlen) < 0) {
			size_t l = strlen(err);
			snprintf(err + l, errlen - l, " in files[%zu]", i);
			free(f.path);
			free(f.object);
			goto out;
		}
		r = sl_manifest_add_file(m, &f);
		free(f.path);
		free(f.object);
		if (r < 0) {
			snprintf(err, errlen, "out of memory");
			goto out;
		}
	}
	json_array_foreach(removed, i, v) {
		if (!json_is_string(v)) {
			snprintf(err, errlen, "removed[%zu] is not a string", i);
			goto out;
		}
		if (sl_manifest_add_removed(m, json_string_value(v)) < 0) {
			snprintf(err, errlen, "out of memory");
			goto out;
		}
	}
	rc = 0;
out:
	json_decref(root);
	if (rc < 0)
		sl_manifest_free(m);
	return rc;
}
