/*
 * sinks/clickhouse/ch_deadletter.c: dead-letter lines (see ch_deadletter.h).
 */
#include "sinks/clickhouse/ch_deadletter.h"

#include "common/util.h"
#include "sinks/avro/avro_schema.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The length of the UTF-8 sequence at s (n bytes left), or 0 if it is not
 * one (overlong forms, surrogates and code points past U+10FFFF included). */
static size_t utf8_len(const unsigned char *s, size_t n)
{
	size_t len;
	uint32_t cp;

	if (s[0] < 0x80)
		return 1;
	if (s[0] >= 0xc2 && s[0] <= 0xdf)
		len = 2, cp = s[0] & 0x1f;
	else if (s[0] >= 0xe0 && s[0] <= 0xef)
		len = 3, cp = s[0] & 0x0f;
	else if (s[0] >= 0xf0 && s[0] <= 0xf4)
		len = 4, cp = s[0] & 0x07;
	else
		return 0;
	if (n < len)
		return 0;
	for (size_t i = 1; i < len; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		cp = cp << 6 | (s[i] & 0x3f);
	}
	if ((len == 3 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) ||
	    (len == 4 && (cp < 0x10000 || cp > 0x10ffff)))
		return 0;
	return len;
}

void ch_json_str(struct sl_buf *out, const char *s, size_t n)
{
	static const char hex[] = "0123456789abcdef";
	const unsigned char *p = (const unsigned char *)s;

	sl_buf_putc(out, '"');
	for (size_t i = 0; i < n;) {
		unsigned char c = p[i];
		size_t k;
		if (c == '"' || c == '\\') {
			sl_buf_putc(out, '\\');
			sl_buf_putc(out, (char)c);
			i++;
		} else if (c < 0x20) {
			char e[6] = { '\\', 'u', '0', '0', hex[c >> 4], hex[c & 0xf] };
			sl_buf_append(out, e, sizeof e);
			i++;
		} else if ((k = utf8_len(p + i, n - i)) > 0) {
			sl_buf_append(out, p + i, k);
			i += k;
		} else {
			sl_buf_puts(out, "\xef\xbf\xbd");  /* U+FFFD */
			i++;
		}
	}
	sl_buf_putc(out, '"');
}

/* A metadata column's value as JSON, read from r. */
static int json_meta(struct sl_buf *out, struct ch_rb_reader *r, const struct ch_col *c)
{
	const unsigned char *p;
	size_t n;
	uint64_t u, count;
	unsigned b;

	if (c->type.nullable) {
		if (ch_rb_get_u8(r, &b) < 0)
			return -1;
		if (b) {
			sl_buf_puts(out, "null");
			return 0;
		}
	}
	switch (c->type.ch) {
	case CH_STRING:
		if (ch_rb_get_str(r, &p, &n) < 0)
			return -1;
		ch_json_str(out, (const char *)p, n);
		return 0;
	case CH_UINT8:
		if (ch_rb_get_u8(r, &b) < 0)
			return -1;
		sl_buf_printf(out, "%u", b);
		return 0;
	case CH_UINT64:
		if (ch_rb_get_u64(r, &u) < 0)
			return -1;
		sl_buf_printf(out, "%" PRIu64, u);
		return 0;
	case CH_INT64:
	case CH_DATETIME64_UTC:   /* the same microseconds as the legacy Int64 */
		if (ch_rb_get_u64(r, &u) < 0)
			return -1;
		sl_buf_printf(out, "%" PRId64, (int64_t)u);
		return 0;
	case CH_UUID: {
		char text[36];
		unsigned char raw[16];
		if (ch_rb_get_uuid(r, raw) < 0)
			return -1;
		ch_uuid_text(text, raw);
		ch_json_str(out, text, sizeof text);
		return 0;
	}
	case CH_ARRAY_STRING:
		if (ch_rb_get_uleb(r, &count) < 0)
			return -1;
		sl_buf_putc(out, '[');
		for (uint64_t i = 0; i < count; i++) {
			if (ch_rb_get_str(r, &p, &n) < 0)
				return -1;
			if (i)
				sl_buf_putc(out, ',');
			ch_json_str(out, (const char *)p, n);
		}
		sl_buf_putc(out, ']');
		return 0;
	default:
		return -1;
	}
}

/* A line's fields up to "reason" (its first 1000 bytes) and the comma
 * after it. */
static void line_head(struct sl_buf *out, const char *stream, const char *db, const struct ch_layout *l, int code,
		      const char *reason, int64_t now_us)
{
	size_t rlen = strlen(reason);

	sl_buf_printf(out, "{\"time_us\":%" PRId64 ",\"stream\":", now_us);
	ch_json_str(out, stream, strlen(stream));
	sl_buf_puts(out, ",\"database\":");
	ch_json_str(out, db, strlen(db));
	sl_buf_puts(out, ",\"table\":");
	ch_json_str(out, l->object, strlen(l->object));
	sl_buf_printf(out, ",\"code\":%d,\"reason\":", code);
	ch_json_str(out, reason, rlen > 1000 ? 1000 : rlen);
	sl_buf_putc(out, ',');
}

int ch_dl_values_line(struct sl_buf *out, const char *stream, const char *db, const struct ch_layout *l,
		      const struct sl_value *vals, const char *csn, const char *change_type, const char *reason,
		      int64_t now_us)
{
	line_head(out, stream, db, l, 0, reason, now_us);
	sl_buf_puts(out, "\"csn\":");
	ch_json_str(out, csn, strlen(csn));
	sl_buf_puts(out, ",\"change_type\":");
	ch_json_str(out, change_type, strlen(change_type));
	sl_buf_puts(out, ",\"row\":{");
	for (int i = 0; i < l->nsrc; i++) {
		const struct ch_col *c = &l->cols[l->of_src[i]];
		if (i)
			sl_buf_putc(out, ',');
		ch_json_str(out, c->name, strlen(c->name));
		sl_buf_putc(out, ':');
		sl_json_put_value(out, &vals[i]);
	}
	sl_buf_puts(out, "}}\n");
	return sl_buf_failed(out) ? -1 : 0;
}

int ch_dl_line(struct sl_buf *out, const char *stream, const char *db, const struct ch_layout *l,
	       bool meta_only, const void *row, size_t len, int code, const char *reason, int64_t now_us)
{
	struct ch_rb_reader r = { .p = row, .end = (const unsigned char *)row + len };
	char *scratch = malloc(CH_RB_SCRATCH);
	size_t start = out->len;
	bool first = true;
	int rc = -1;

	if (!scratch)
		return -1;
	line_head(out, stream, db, l, code, reason, now_us);
	sl_buf_puts(out, "\"row\":{");
	for (int i = 0; i < l->ncols; i++) {
		const struct ch_col *c = &l->cols[i];
		if (meta_only && c->src >= 0)
			continue;
		if (!first)
			sl_buf_putc(out, ',');
		first = false;
		ch_json_str(out, c->name, strlen(c->name));
		sl_buf_putc(out, ':');
		if (c->src >= 0) {
			struct sl_value v;
			if (ch_rb_get_value(&r, &c->type, &v, scratch) < 0)
				goto out;
			sl_json_put_value(out, &v);
		} else if (json_meta(out, &r, c) < 0) {
			goto out;
		}
	}
	sl_buf_puts(out, "}}\n");
	rc = sl_buf_failed(out) || r.p != r.end ? -1 : 0;
out:
	if (rc < 0 && !sl_buf_failed(out)) {
		out->len = start;
		if (out->data)
			out->data[start] = '\0';
	}
	free(scratch);
	return rc;
}

int ch_dl_write(const char *path, const void *lines, size_t len, char *err, size_t errlen)
{
	return sl_dead_letter_append("clickhouse: ", path, lines, len, err, errlen);
}
