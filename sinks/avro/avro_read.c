/*
 * sinks/avro/avro_read.c: the records of a container file as avro-c values
 * (see avro_read.h).  Memory: the ocf reader's two block buffers, and the
 * one value its records are decoded into in turn.
 */
#include "sinks/avro/avro_read.h"

#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sinks/avro/ocf.h"

struct sl_avro_read {
	struct sl_ocf_reader *ocf;
	char *path;
	avro_schema_t schema;
	avro_value_iface_t *iface;
	avro_value_t val;
	bool have_val;
	avro_reader_t mem;   /* over the current block */
	uint64_t left;       /* its records not read yet */
	uint64_t records;
};

/* Makes r's value and memory reader from the schema of the header that
 * r->ocf read; on success hands r to *out, else frees it. */
static int finish_open(struct sl_avro_read **out, struct sl_avro_read *r, char *err, size_t errlen)
{
	const struct sl_buf *js = sl_ocf_reader_schema(r->ocf);

	if (avro_schema_from_json_length(js->data, js->len, &r->schema) != 0) {
		r->schema = NULL;
		snprintf(err, errlen, "\"%s\": its schema cannot be parsed: %s", r->path, avro_strerror());
		goto fail;
	}
	if (!(r->iface = avro_generic_class_from_schema(r->schema)) || avro_generic_value_new(r->iface, &r->val) != 0) {
		snprintf(err, errlen, "\"%s\": its schema cannot be used: %s", r->path, avro_strerror());
		goto fail;
	}
	r->have_val = true;
	if (!(r->mem = avro_reader_memory("", 0))) {
		snprintf(err, errlen, "\"%s\": out of memory", r->path);
		goto fail;
	}
	*out = r;
	return 0;
fail:
	sl_avro_read_close(r);
	return -1;
}

/* A reader for name with nothing open yet, or NULL (out of memory, said in err). */
static struct sl_avro_read *new_read(const char *name, char *err, size_t errlen)
{
	struct sl_avro_read *r = calloc(1, sizeof *r);

	if (!r || !(r->path = strdup(name))) {
		free(r);
		snprintf(err, errlen, "\"%s\": out of memory", name);
		return NULL;
	}
	return r;
}

int sl_avro_read_open(struct sl_avro_read **out, const char *path, char *err, size_t errlen)
{
	struct sl_avro_read *r = new_read(path, err, errlen);

	*out = NULL;
	if (!r)
		return -1;
	if (sl_ocf_reader_open(&r->ocf, path, err, errlen) < 0) {
		sl_avro_read_close(r);
		return -1;
	}
	return finish_open(out, r, err, errlen);
}

int sl_avro_read_open_stream(struct sl_avro_read **out, FILE *f, const char *name, char *err, size_t errlen)
{
	struct sl_avro_read *r = new_read(name, err, errlen);

	*out = NULL;
	if (!r) {
		fclose(f);
		return -1;
	}
	if (sl_ocf_reader_open_stream(&r->ocf, f, name, err, errlen) < 0) {
		sl_avro_read_close(r);
		return -1;
	}
	return finish_open(out, r, err, errlen);
}

const struct sl_buf *sl_avro_read_schema(const struct sl_avro_read *r)
{
	return sl_ocf_reader_schema(r->ocf);
}

int sl_avro_read_next(struct sl_avro_read *r, avro_value_t **val, char *err, size_t errlen)
{
	while (r->left == 0) {
		const void *data;
		size_t len;
		int rc = sl_ocf_reader_block(r->ocf, &data, &len, &r->left, err, errlen);
		if (rc <= 0)
			return rc;
		avro_reader_memory_set_source(r->mem, data, (int64_t)len);
	}
	avro_value_reset(&r->val);
	if (avro_value_read(r->mem, &r->val) != 0) {
		snprintf(err, errlen, "\"%s\": record %" PRIu64 " cannot be decoded: %s", r->path, r->records + 1,
			 avro_strerror());
		return -1;
	}
	r->left--;
	r->records++;
	*val = &r->val;
	return 1;
}

uint64_t sl_avro_read_count(const struct sl_avro_read *r)
{
	return r->records;
}

void sl_avro_read_close(struct sl_avro_read *r)
{
	if (!r)
		return;
	if (r->mem)
		avro_reader_free(r->mem);
	if (r->have_val)
		avro_value_decref(&r->val);
	if (r->iface)
		avro_value_iface_decref(r->iface);
	if (r->schema)
		avro_schema_decref(r->schema);
	sl_ocf_reader_close(r->ocf);
	free(r->path);
	free(r);
}

int sl_avro_value_bytes(avro_writer_t w, struct sl_buf *b, avro_value_t *v)
{
	size_t size = 0;

	if (avro_value_sizeof(v, &size) != 0 || sl_buf_reserve(b, size + 1) < 0)
		return -1;
	avro_writer_memory_set_dest(w, b->data + b->len, (int64_t)size);
	if (avro_value_write(w, v) != 0)
		return -1;
	b->len += size;
	return 0;
}
