/*
 * sinks/avro_dir/avro_enc.c: direct Avro binary encoding of whole records.
 * The field order follows sl_avro_schema_json() exactly.
 */
#include "sinks/avro_dir/avro_enc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sinks/avro_dir/avro_schema.h"

/* A slice of e->pre, the pre-encoded constant parts of every record. */
struct span {
	size_t off, len;
};

struct sl_avro_enc {
	enum sl_source_kind kind;
	char schema_key[17];
	int ncols;
	struct sl_avro_stats *stats;
	struct sl_buf schema;   /* schema JSON */
	struct sl_buf pre;      /* pre-encoded constant fields */
	struct span object;     /* object string */
	struct span stream_key; /* stream_name string, schema_key string */
	struct span ns_table;   /* schema (or database) string, table string */
	struct span pks;        /* primary_keys array */
};

static const char hexdig[] = "0123456789abcdef";
static const char hexup[] = "0123456789ABCDEF";

struct sl_avro_enc *sl_avro_enc_new(const struct sl_table *t, enum sl_source_kind kind,
				    const char *stream, struct sl_avro_stats *stats,
				    char *err, size_t errlen)
{
	struct sl_avro_enc *e = calloc(1, sizeof *e);
	int nkeys = 0;

	if (!e) {
		snprintf(err, errlen, "avro encoder of \"%s\": out of memory", t->object);
		return NULL;
	}
	e->kind = kind;
	memcpy(e->schema_key, t->schema_key, sizeof e->schema_key);
	e->schema_key[16] = '\0';
	e->ncols = t->ncols;
	e->stats = stats;
	sl_buf_init(&e->schema, 0);
	sl_buf_init(&e->pre, 0);
	if (sl_avro_schema_json(&e->schema, t, kind, err, errlen) < 0)
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
	sl_buf_free(&e->pre);
	free(e);
}

const char *sl_avro_enc_schema(const struct sl_avro_enc *e, size_t *len)
{
	*len = e->schema.len;
	return e->schema.data;
}

const char *sl_avro_enc_schema_key(const struct sl_avro_enc *e)
{
	return e->schema_key;
}

static inline void put_span(struct sl_buf *out, const struct sl_avro_enc *e, struct span s)
{
	sl_avro_put_raw(out, e->pre.data + s.off, s.len);
}

/* The uuid as a 36-character Avro string, 8-4-4-4-12 lowercase hex. */
static void put_uuid(struct sl_buf *out, const unsigned char u[16])
{
	char s[37];
	size_t n = 0;

	s[n++] = 36 * 2;  /* zigzag length 36, one varint byte */
	for (int i = 0; i < 16; i++) {
		if (i == 4 || i == 6 || i == 8 || i == 10)
			s[n++] = '-';
		s[n++] = hexdig[u[i] >> 4];
		s[n++] = hexdig[u[i] & 15];
	}
	sl_avro_put_raw(out, s, n);
}

/* Appends x in uppercase hex without leading zeros (at least one digit). */
static size_t hex32(char *dst, uint32_t x)
{
	char tmp[8];
	size_t n = 0, k = 0;

	do {
		tmp[n++] = hexup[x & 15];
		x >>= 4;
	} while (x);
	while (n)
		dst[k++] = tmp[--n];
	return k;
}

/* The LSN as an Avro string, formatted as PostgreSQL does ("16/B374D848"). */
static void put_lsn(struct sl_buf *out, uint64_t lsn)
{
	char s[18];
	size_t n = 1;

	n += hex32(s + n, (uint32_t)(lsn >> 32));
	s[n++] = '/';
	n += hex32(s + n, (uint32_t)lsn);
	s[0] = (char)((n - 1) * 2);
	sl_avro_put_raw(out, s, n);
}

int sl_avro_enc_record(struct sl_avro_enc *e, struct sl_buf *out, const struct sl_change *c,
		       char *err, size_t errlen)
{
	const struct sl_table *t = c->table;
	size_t start = out->len;
	const char *csn = c->csn;
	/* A TRUNCATE has no row: every payload field is null. */
	const struct sl_value *values = c->op == SL_OP_TRUNCATE ? NULL : c->values;
	const char *op;
	int nunch = 0;

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
	op = sl_op_name(c->op);
	sl_avro_put_str(out, op);
	sl_avro_put_bool(out, c->op == SL_OP_DELETE || c->op == SL_OP_UPDATE_DELETE ||
			      c->op == SL_OP_TRUNCATE);
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
	if (e->kind == SL_SOURCE_MYSQL) {
		sl_avro_put_str(out, c->log_file ? c->log_file : "");
		sl_avro_put_long(out, (int64_t)c->log_position);
		if (c->gtid) {
			sl_avro_put_byte(out, 2);
			sl_avro_put_str(out, c->gtid);
		} else {
			sl_avro_put_byte(out, 0);
		}
	} else {
		put_lsn(out, c->position);
	}

	/* payload */
	if (!values) {
		if (sl_buf_reserve(out, (size_t)t->ncols) == 0) {
			memset(out->data + out->len, 0, (size_t)t->ncols);
			out->len += (size_t)t->ncols;
			out->data[out->len] = '\0';
		}
	} else {
		for (int i = 0; i < t->ncols; i++) {
			if (sl_avro_put_value(out, &t->cols[i], &values[i], e->stats, err, errlen) < 0)
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
