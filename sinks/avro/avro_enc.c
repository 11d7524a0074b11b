/*
 * sinks/avro/avro_enc.c: direct Avro binary encoding of whole records.
 * The field order follows sl_avro_schema_json() exactly.
 */
#include "sinks/avro/avro_enc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sinks/avro/avro_schema.h"

/* A slice of e->pre, the pre-encoded constant parts of every record. */
struct span {
	size_t off, len;
};

struct sl_avro_enc {
	const struct sl_source_desc *src;
	char schema_key[17];
	int ncols;
	struct sl_buf schema;   /* schema JSON */
	struct sl_buf reader;   /* reader schema JSON (defaults for missing values) */
	struct sl_buf pre;      /* pre-encoded constant fields */
	struct span object;     /* object string */
	struct span stream_key; /* stream_name string, schema_key string */
	struct span ns_table;   /* schema (or database) string, table string */
	struct span pks;        /* primary_keys array */
	/* change_type string and is_deleted boolean, per op */
	struct span ops[SL_OP_TRUNCATE + 1];
	/* The position fields of source_metadata encoded for meta_pos: every
	 * row of a transaction or of a backfill has the same. */
	bool meta_ok;
	struct sl_position meta_pos;
	struct sl_buf meta;
};

struct sl_avro_enc *sl_avro_enc_new(const struct sl_table *t, const char *stream, char *err, size_t errlen)
{
	struct sl_avro_enc *e = calloc(1, sizeof *e);
	int nkeys = 0;

	if (!e) {
		snprintf(err, errlen, "avro encoder of \"%s\": out of memory", t->object);
		return NULL;
	}
	e->src = t->src;
	memcpy(e->schema_key, t->schema_key, sizeof e->schema_key);
	e->schema_key[16] = '\0';
	e->ncols = t->ncols;
	sl_buf_init(&e->schema, 0);
	sl_buf_init(&e->reader, 0);
	sl_buf_init(&e->pre, 0);
	sl_buf_init(&e->meta, 0);
	if (sl_avro_schema_json(&e->schema, t, err, errlen) < 0 ||
	    sl_avro_reader_schema_json(&e->reader, t, err, errlen) < 0)
		goto fail;

	e->object.off = e->pre.len;
	sl_avro_put_str(&e->pre, t->object);
	e->object.len = e->pre.len - e->object.off;

	e->stream_key.off = e->pre.len;
	sl_avro_put_str(&e->pre, stream);
	sl_avro_put_str(&e->pre, e->schema_key);
	e->stream_key.len = e->pre.len - e->stream_key.off;

	e->ns_table.off = e->pre.len;
	sl_avro_put_str(&e->pre, t->ns);
	sl_avro_put_str(&e->pre, t->name);
	e->ns_table.len = e->pre.len - e->ns_table.off;

	e->pks.off = e->pre.len;
	for (int i = 0; i < t->ncols; i++)
		nkeys += t->cols[i].is_key;
	if (nkeys > 0) {
		sl_avro_put_long(&e->pre, nkeys);
		for (int i = 0; i < t->ncols; i++)
			if (t->cols[i].is_key)
				sl_avro_put_str(&e->pre, t->cols[i].name);
	}
	sl_avro_put_long(&e->pre, 0);
	e->pks.len = e->pre.len - e->pks.off;

	for (int op = 0; op <= SL_OP_TRUNCATE; op++) {
		e->ops[op].off = e->pre.len;
		sl_avro_put_str(&e->pre, sl_op_name((enum sl_op)op));
		sl_avro_put_bool(&e->pre, op == SL_OP_DELETE || op == SL_OP_UPDATE_DELETE ||
					  op == SL_OP_TRUNCATE);
		e->ops[op].len = e->pre.len - e->ops[op].off;
	}
	if (sl_buf_failed(&e->pre)) {
		snprintf(err, errlen, "avro encoder of \"%s\": out of memory", t->object);
		goto fail;
	}
	return e;
fail:
	sl_avro_enc_free(e);
	return NULL;
}

void sl_avro_enc_free(struct sl_avro_enc *e)
{
	if (!e)
		return;
	sl_buf_free(&e->schema);
	sl_buf_free(&e->reader);
	sl_buf_free(&e->pre);
	sl_buf_free(&e->meta);
	free(e);
}

const char *sl_avro_enc_schema(const struct sl_avro_enc *e, size_t *len)
{
	*len = e->schema.len;
	return e->schema.data;
}

const char *sl_avro_enc_reader_schema(const struct sl_avro_enc *e, size_t *len)
{
	*len = e->reader.len;
	return e->reader.data;
}

const char *sl_avro_enc_schema_key(const struct sl_avro_enc *e)
{
	return e->schema_key;
}

static inline void put_span(struct sl_buf *out, const struct sl_avro_enc *e, struct span s)
{
	sl_avro_put_raw(out, e->pre.data + s.off, s.len);
}

/* The record uuid as a 36-character Avro string. */
static void put_uuid(struct sl_buf *out, const unsigned char u[16])
{
	char s[37];

	s[0] = 36 * 2;  /* zigzag length 36, one varint byte */
	sl_avro_uuid_text(s + 1, u);
	sl_avro_put_raw(out, s, sizeof s);
}

/* The source position fields of source_metadata, as src declares them. */
static void encode_meta(struct sl_buf *out, const struct sl_source_desc *src, const struct sl_position *pos)
{
	struct sl_meta_value v[SL_META_MAX];
	char buf[SL_META_BUF];

	memset(v, 0, sizeof v);
	src->meta_values(pos, v, buf, sizeof buf);
	for (int i = 0; i < src->nmeta && i < SL_META_MAX; i++) {
		switch (src->meta[i].type) {
		case SL_META_STRING:
			sl_avro_put_bytes(out, v[i].s ? v[i].s : "", v[i].s ? v[i].len : 0);
			break;
		case SL_META_LONG:
			sl_avro_put_long(out, v[i].i);
			break;
		case SL_META_OPT_STRING:
			if (v[i].s) {
				sl_avro_put_byte(out, 2);
				sl_avro_put_bytes(out, v[i].s, v[i].len);
			} else {
				sl_avro_put_byte(out, 0);
			}
			break;
		}
	}
}

static bool same_pos(const struct sl_position *a, const struct sl_position *b)
{
	return a->w[0] == b->w[0] && a->w[1] == b->w[1] && strcmp(a->text, b->text) == 0;
}

/* The position fields of pos, encoded again only when pos is not the one
 * encoded last (meta_values is a function of the position). */
static void put_meta(struct sl_avro_enc *e, struct sl_buf *out, const struct sl_position *pos)
{
	static const struct sl_position none;

	if (!pos)
		pos = &none;
	if (!e->meta_ok || !same_pos(pos, &e->meta_pos)) {
		sl_buf_reset(&e->meta);
		encode_meta(&e->meta, e->src, pos);
		e->meta_ok = !sl_buf_failed(&e->meta);
		if (!e->meta_ok) {
			encode_meta(out, e->src, pos);
			return;
		}
		e->meta_pos = *pos;
	}
	sl_avro_put_raw(out, e->meta.data, e->meta.len);
}

int sl_avro_enc_record(struct sl_avro_enc *e, struct sl_buf *out, const struct sl_change *c,
		       char *err, size_t errlen)
{
	const struct sl_table *t = c->table;
	size_t start = out->len;
	const char *csn = c->csn;
	/* A TRUNCATE has no row: every payload field is null. */
	const struct sl_value *values = c->op == SL_OP_TRUNCATE ? NULL : c->values;
	int nunch = 0;

	if ((unsigned)c->op > SL_OP_TRUNCATE) {
		snprintf(err, errlen, "table \"%s\": unknown change type %d", t->object, (int)c->op);
		return -1;
	}
	if (t->ncols != e->ncols || memcmp(t->schema_key, e->schema_key, 16) != 0) {
		snprintf(err, errlen, "table \"%s\": change has schema key %.16s, encoder was made for %s",
			 t->object, t->schema_key, e->schema_key);
		return -1;
	}
	/* Most records fit in this; the buffer still grows when they don't. */
	sl_buf_reserve(out, 512);

	put_uuid(out, c->uuid);
	sl_avro_put_long(out, c->read_ts_us);
	sl_avro_put_long(out, c->source_ts_us);
	put_span(out, e, e->object);
	sl_avro_put_str(out, c->read_method ? c->read_method : "");
	put_span(out, e, e->stream_key);
	/* sort_keys: the CSN's 16 hex digits and its 10-digit sequence. */
	sl_avro_put_long(out, 2);
	sl_avro_put_bytes(out, csn, 16);
	sl_avro_put_bytes(out, csn + 17, SL_CSN_LEN - 17);
	sl_avro_put_long(out, 0);

	/* source_metadata */
	put_span(out, e, e->ns_table);
	put_span(out, e, e->ops[c->op]);  /* change_type, is_deleted */
	put_span(out, e, e->pks);
	sl_avro_put_bytes(out, csn, SL_CSN_LEN);
	if (c->tx_id == 0) {
		sl_avro_put_byte(out, 0);
	} else {
		sl_avro_put_byte(out, 2);
		sl_avro_put_long(out, (int64_t)c->tx_id);
	}
	if (values) {
		for (int i = 0; i < t->ncols; i++)
			nunch += values[i].kind == SL_V_UNCHANGED;
	}
	if (nunch > 0) {
		sl_avro_put_long(out, nunch);
		for (int i = 0; i < t->ncols; i++)
			if (values[i].kind == SL_V_UNCHANGED)
				sl_avro_put_str(out, t->cols[i].name);
	}
	sl_avro_put_long(out, 0);
	put_meta(e, out, c->pos);

	/* payload */
	if (!values) {
		if (sl_buf_reserve(out, (size_t)t->ncols) == 0) {
			memset(out->data + out->len, 0, (size_t)t->ncols);
			out->len += (size_t)t->ncols;
			out->data[out->len] = '\0';
		}
	} else {
		for (int i = 0; i < t->ncols; i++) {
			if (sl_avro_put_value(out, &t->cols[i], &values[i], err, errlen) < 0)
				goto fail;
		}
	}
	if (sl_buf_failed(out)) {
		snprintf(err, errlen, "table \"%s\": out of memory or over the buffer cap encoding a record",
			 t->object);
		return -1;
	}
	return 0;
fail:
	if (!sl_buf_failed(out)) {
		out->len = start;
		out->data[start] = '\0';
	}
	return -1;
}
