/*
 * sinks/avro/avro_schema.c: builds the Avro schema JSON of one table
 * version.  The field order here and the encoder's order in avro_enc.c must
 * agree; tests/unit/test_avro_enc.c checks them against avro-c.
 */
#include "sinks/avro/avro_schema.h"

#include "sinks/avro/avro_value.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

/* Length of the valid UTF-8 sequence at s (n bytes left), or 0 if invalid.
 * Rejects overlong forms, surrogates and code points past U+10FFFF. */
static size_t utf8_len(const unsigned char *s, size_t n)
{
	unsigned c = s[0];
	size_t len;
	uint32_t cp;

	if (c < 0x80)
		return 1;
	if (c >= 0xc2 && c <= 0xdf) {
		len = 2;
		cp = c & 0x1f;
	} else if (c >= 0xe0 && c <= 0xef) {
		len = 3;
		cp = c & 0x0f;
	} else if (c >= 0xf0 && c <= 0xf4) {
		len = 4;
		cp = c & 0x07;
	} else {
		return 0;
	}
	if (n < len)
		return 0;
	for (size_t k = 1; k < len; k++) {
		if ((s[k] & 0xc0) != 0x80)
			return 0;
		cp = cp << 6 | (s[k] & 0x3f);
	}
	if ((len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) || cp > 0x10ffff ||
	    (cp >= 0xd800 && cp <= 0xdfff))
		return 0;
	return len;
}

int sl_json_put_string(struct sl_buf *out, const char *s, size_t n)
{
	const unsigned char *u = (const unsigned char *)s;
	size_t i = 0;

	sl_buf_putc(out, '"');
	while (i < n) {
		unsigned char c = u[i];
		size_t run = i;

		/* Copy the longest stretch that needs no escaping in one go. */
		while (run < n && u[run] >= 0x20 && u[run] < 0x80 && u[run] != '"' && u[run] != '\\')
			run++;
		if (run > i) {
			sl_buf_append(out, s + i, run - i);
			i = run;
			continue;
		}
		if (c == '"' || c == '\\') {
			sl_buf_putc(out, '\\');
			sl_buf_putc(out, (char)c);
			i++;
		} else if (c < 0x20) {
			switch (c) {
			case '\n': sl_buf_puts(out, "\\n"); break;
			case '\r': sl_buf_puts(out, "\\r"); break;
			case '\t': sl_buf_puts(out, "\\t"); break;
			case '\b': sl_buf_puts(out, "\\b"); break;
			case '\f': sl_buf_puts(out, "\\f"); break;
			default: sl_buf_printf(out, "\\u%04x", c); break;
			}
			i++;
		} else {
			size_t l = utf8_len(u + i, n - i);
			if (l == 0) {
				sl_buf_puts(out, "\\ufffd");
				i++;
			} else {
				sl_buf_append(out, s + i, l);
				i += l;
			}
		}
	}
	return sl_buf_putc(out, '"');
}

int sl_avro_put_record_name(struct sl_buf *out, const char *object)
{
	size_t start = out->len;

	if (!((*object >= 'A' && *object <= 'Z') || (*object >= 'a' && *object <= 'z') || *object == '_'))
		sl_buf_putc(out, '_');
	for (const char *p = object; *p; p++) {
		char c = *p;
		bool ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
		sl_buf_putc(out, ok ? c : '_');
	}
	if (!sl_buf_failed(out) && (!strcmp(out->data + start, "source_metadata") ||
				    !strcmp(out->data + start, "payload")))
		sl_buf_putc(out, '_');
	return sl_buf_failed(out) ? -1 : 0;
}

/* Appends the Avro type T of a payload column (without the null union). */
static void put_column_type(struct sl_buf *out, const struct sl_column *c)
{
	switch (c->type) {
	case SL_T_STRING: sl_buf_puts(out, "\"string\""); break;
	case SL_T_BOOL: sl_buf_puts(out, "\"boolean\""); break;
	case SL_T_INT32: sl_buf_puts(out, "\"int\""); break;
	case SL_T_INT64: sl_buf_puts(out, "\"long\""); break;
	case SL_T_FLOAT: sl_buf_puts(out, "\"float\""); break;
	case SL_T_DOUBLE: sl_buf_puts(out, "\"double\""); break;
	case SL_T_DECIMAL:
		sl_buf_printf(out, "{\"type\":\"bytes\",\"logicalType\":\"decimal\",\"precision\":%d,\"scale\":%d}",
			      c->precision, c->scale);
		break;
	case SL_T_BYTES: sl_buf_puts(out, "\"bytes\""); break;
	case SL_T_DATE: sl_buf_puts(out, "{\"type\":\"int\",\"logicalType\":\"date\"}"); break;
	case SL_T_TIME: sl_buf_puts(out, "{\"type\":\"long\",\"logicalType\":\"time-micros\"}"); break;
	case SL_T_TIMESTAMP:
	case SL_T_TIMESTAMPTZ:
		sl_buf_puts(out, "{\"type\":\"long\",\"logicalType\":\"timestamp-micros\"}");
		break;
	case SL_T_UUID: sl_buf_puts(out, "{\"type\":\"string\",\"logicalType\":\"uuid\"}"); break;
	case SL_T_JSON: sl_buf_puts(out, "{\"type\":\"string\",\"sqlType\":\"JSON\"}"); break;
	case SL_T_UINT64:
		/* Avro has no unsigned long: every 64-bit unsigned value fits decimal(20,0). */
		sl_buf_puts(out, "{\"type\":\"bytes\",\"logicalType\":\"decimal\",\"precision\":20,\"scale\":0}");
		break;
	default: sl_buf_puts(out, "\"string\""); break;
	}
}

/* Appends n bytes as an Avro JSON bytes value: a string whose code points
 * 0-255 are the bytes (the Avro specification's rule for bytes defaults). */
static void put_json_bytes(struct sl_buf *out, const unsigned char *p, size_t n)
{
	sl_buf_putc(out, '"');
	for (size_t i = 0; i < n; i++) {
		if (p[i] >= 0x20 && p[i] < 0x7f && p[i] != '"' && p[i] != '\\')
			sl_buf_putc(out, (char)p[i]);
		else
			sl_buf_printf(out, "\\u%04x", p[i]);
	}
	sl_buf_putc(out, '"');
}

/* True when s (n bytes) is valid UTF-8, which a JSON string carries as is. */
static bool valid_utf8(const unsigned char *s, size_t n)
{
	for (size_t i = 0; i < n;) {
		size_t len = s[i] < 0x80 ? 1 : (s[i] & 0xe0) == 0xc0 ? 2 : (s[i] & 0xf0) == 0xe0 ? 3 :
			     (s[i] & 0xf8) == 0xf0 ? 4 : 0;
		if (!len || i + len > n)
			return false;
		for (size_t k = 1; k < len; k++)
			if ((s[i + k] & 0xc0) != 0x80)
				return false;
		i += len;
	}
	return true;
}

int sl_avro_default_json(struct sl_buf *out, const struct sl_column *c, const struct sl_value *v)
{
	unsigned char dec[SL_AVRO_DECIMAL_MAX_BYTES];
	char err[160];
	size_t n = 0;

	if (v->kind == SL_V_NULL || v->kind == SL_V_UNCHANGED ||
	    sl_value_check_kind(c->type, v, c->name, err, sizeof err) < 0)
		return 1;
	switch (v->kind) {
	case SL_V_FLOAT:
	case SL_V_DOUBLE:
		/* A JSON number holds no NaN nor infinity. */
		if (!isfinite(v->kind == SL_V_FLOAT ? (double)v->f : v->d))
			return 1;
		break;
	case SL_V_DECIMAL:
		if (sl_avro_decimal_of(v, c->name, c->precision, c->scale, dec, &n, err, sizeof err) < 0)
			return 1;
		put_json_bytes(out, dec, n);
		return sl_buf_failed(out) ? -1 : 0;
	case SL_V_UINT:
		/* decimal(20,0), as sl_avro_put_value writes it */
		dec[0] = 0;
		for (int i = 0; i < 8; i++)
			dec[1 + i] = (unsigned char)(v->u >> (56 - 8 * i));
		while (n < 8 && dec[n] == 0x00 && !(dec[n + 1] & 0x80))
			n++;
		put_json_bytes(out, dec + n, 9 - n);
		return sl_buf_failed(out) ? -1 : 0;
	case SL_V_BYTES:
		put_json_bytes(out, (const unsigned char *)v->p, v->len);
		return sl_buf_failed(out) ? -1 : 0;
	case SL_V_STRING:
	case SL_V_JSON:
		if (!valid_utf8((const unsigned char *)v->p, v->len))
			return 1;
		break;
	default:
		break;
	}
	/* the rest is the value's JSON: booleans, numbers, text, uuids */
	return sl_json_put_value(out, v);
}

bool sl_avro_carries_missing(const void *conf, const struct sl_column *c)
{
	struct sl_buf b;
	bool ok;

	(void)conf;
	sl_buf_init(&b, 0);
	ok = sl_avro_default_json(&b, c, &c->missing) == 0;
	sl_buf_free(&b);
	return ok;
}

static int schema_json(struct sl_buf *out, const struct sl_table *t, bool reader, char *err, size_t errlen);

int sl_avro_schema_json(struct sl_buf *out, const struct sl_table *t, char *err, size_t errlen)
{
	return schema_json(out, t, false, err, errlen);
}

int sl_avro_reader_schema_json(struct sl_buf *out, const struct sl_table *t, char *err, size_t errlen)
{
	return schema_json(out, t, true, err, errlen);
}

/* Appends payload column c's field type and default: ["null", T] and null,
 * or, in a reader schema for a column with a missing value, [T, "null"] and
 * the value (a union's default is of its first branch). */
static void put_field_type(struct sl_buf *out, const struct sl_column *c, bool reader)
{
	struct sl_buf def;

	sl_buf_init(&def, 0);
	if (reader && c->missing.kind != SL_V_NULL && sl_avro_default_json(&def, c, &c->missing) == 0) {
		sl_buf_puts(out, ",\"type\":[");
		put_column_type(out, c);
		sl_buf_puts(out, ",\"null\"],\"default\":");
		sl_buf_append(out, def.data, def.len);
	} else {
		sl_buf_puts(out, ",\"type\":[\"null\",");
		put_column_type(out, c);
		sl_buf_puts(out, "],\"default\":null");
	}
	if (sl_buf_failed(&def))
		out->failed = true;
	sl_buf_free(&def);
}

static int schema_json(struct sl_buf *out, const struct sl_table *t, bool reader, char *err, size_t errlen)
{
	const struct sl_source_desc *src = t->src;

	static const char head[] =
		"\",\"namespace\":\"sluice\",\"fields\":["
		"{\"name\":\"uuid\",\"type\":{\"type\":\"string\",\"logicalType\":\"uuid\"}},"
		"{\"name\":\"read_timestamp\",\"type\":{\"type\":\"long\",\"logicalType\":\"timestamp-micros\"}},"
		"{\"name\":\"source_timestamp\",\"type\":{\"type\":\"long\",\"logicalType\":\"timestamp-micros\"}},"
		"{\"name\":\"object\",\"type\":\"string\"},"
		"{\"name\":\"read_method\",\"type\":\"string\"},"
		"{\"name\":\"stream_name\",\"type\":\"string\"},"
		"{\"name\":\"schema_key\",\"type\":\"string\"},"
		"{\"name\":\"sort_keys\",\"type\":{\"type\":\"array\",\"items\":\"string\"}},"
		"{\"name\":\"source_metadata\",\"type\":{\"type\":\"record\",\"name\":\"source_metadata\",\"fields\":[";
	static const char meta_common[] =
		"\"type\":\"string\"},"
		"{\"name\":\"table\",\"type\":\"string\"},"
		"{\"name\":\"change_type\",\"type\":\"string\"},"
		"{\"name\":\"is_deleted\",\"type\":\"boolean\"},"
		"{\"name\":\"primary_keys\",\"type\":{\"type\":\"array\",\"items\":\"string\"}},"
		"{\"name\":\"change_sequence_number\",\"type\":\"string\"},"
		"{\"name\":\"tx_id\",\"type\":[\"null\",\"long\"],\"default\":null},"
		"{\"name\":\"unchanged_columns\",\"type\":{\"type\":\"array\",\"items\":\"string\"}}";
	sl_buf_puts(out, "{\"type\":\"record\",\"name\":\"");
	sl_avro_put_record_name(out, t->object);
	if (!src) {
		snprintf(err, errlen, "avro schema of \"%s\": the table has no source descriptor", t->object);
		return -1;
	}
	sl_buf_puts(out, head);
	sl_buf_puts(out, "{\"name\":");
	sl_json_put_string(out, src->ns_field, strlen(src->ns_field));
	sl_buf_putc(out, ',');
	sl_buf_puts(out, meta_common);
	for (int i = 0; i < src->nmeta; i++) {
		const struct sl_meta_field *m = &src->meta[i];
		sl_buf_puts(out, ",{\"name\":");
		sl_json_put_string(out, m->name, strlen(m->name));
		switch (m->type) {
		case SL_META_STRING: sl_buf_puts(out, ",\"type\":\"string\"}"); break;
		case SL_META_LONG: sl_buf_puts(out, ",\"type\":\"long\"}"); break;
		case SL_META_OPT_STRING: sl_buf_puts(out, ",\"type\":[\"null\",\"string\"],\"default\":null}"); break;
		}
	}
	sl_buf_puts(out, "]}},{\"name\":\"payload\",\"type\":{\"type\":\"record\",\"name\":\"payload\",\"fields\":[");
	for (int i = 0; i < t->ncols; i++) {
		const struct sl_column *c = &t->cols[i];
		if (i)
			sl_buf_putc(out, ',');
		sl_buf_puts(out, "{\"name\":");
		sl_json_put_string(out, c->avro_name, strlen(c->avro_name));
		put_field_type(out, c, reader);
		sl_buf_puts(out, ",\"sluice.column\":");
		sl_json_put_string(out, c->name, strlen(c->name));
		if (c->type_name) {
			sl_buf_puts(out, ",\"sluice.source_type\":");
			sl_json_put_string(out, c->type_name, strlen(c->type_name));
		}
		if (c->doc) {
			sl_buf_puts(out, ",\"doc\":");
			sl_json_put_string(out, c->doc, strlen(c->doc));
		}
		sl_buf_putc(out, '}');
	}
	sl_buf_puts(out, "]}}]}");
	if (sl_buf_failed(out)) {
		snprintf(err, errlen, "avro schema of \"%s\": out of memory", t->object);
		return -1;
	}
	return 0;
}

static void json_float(struct sl_buf *out, double d, int digits)
{
	if (isnan(d))
		sl_buf_puts(out, "\"NaN\"");
	else if (isinf(d))
		sl_buf_puts(out, d > 0 ? "\"Infinity\"" : "\"-Infinity\"");
	else
		sl_buf_printf(out, "%.*g", digits, d);
}

int sl_json_put_value(struct sl_buf *out, const struct sl_value *v)
{
	static const char hex[] = "0123456789abcdef";
	char u[36];

	switch (v->kind) {
	case SL_V_NULL:
	case SL_V_UNCHANGED:
		sl_buf_puts(out, "null");
		break;
	case SL_V_BOOL:
		sl_buf_puts(out, v->b ? "true" : "false");
		break;
	case SL_V_INT:
	case SL_V_DATE:
	case SL_V_TIME:
	case SL_V_TIMESTAMP:
		sl_buf_printf(out, "%" PRId64, v->i);
		break;
	case SL_V_UINT:
		sl_buf_printf(out, "%" PRIu64, v->u);
		break;
	case SL_V_FLOAT:
		json_float(out, v->f, 9);
		break;
	case SL_V_DOUBLE:
		json_float(out, v->d, 17);
		break;
	case SL_V_DECIMAL: {
		/* digits with the point placed by the scale */
		sl_buf_putc(out, '"');
		sl_value_decimal_text(out, v);
		sl_buf_putc(out, '"');
		break;
	}
	case SL_V_BYTES:
		sl_buf_puts(out, "\"\\\\x");
		for (uint32_t i = 0; i < v->len; i++) {
			unsigned char c = (unsigned char)v->p[i];
			char h[2] = { hex[c >> 4], hex[c & 0xf] };
			sl_buf_append(out, h, 2);
		}
		sl_buf_putc(out, '"');
		break;
	case SL_V_STRING:
	case SL_V_JSON:
		sl_json_put_string(out, v->p, v->len);
		break;
	case SL_V_UUID:
		sl_avro_uuid_text(u, (const unsigned char *)v->p);
		sl_json_put_string(out, u, sizeof u);
		break;
	default:
		sl_buf_puts(out, "null");
		break;
	}
	return sl_buf_failed(out) ? -1 : 0;
}
