/* common/buf.c: growable byte buffer with a hard cap and a sticky error flag. */
#include "common/buf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void sl_buf_init(struct sl_buf *b, size_t cap)
{
	b->data = NULL;
	b->len = 0;
	b->alloc = 0;
	b->cap = cap ? cap : SL_BUF_DEFAULT_CAP;
	b->failed = false;
}

void sl_buf_free(struct sl_buf *b)
{
	free(b->data);
	sl_buf_init(b, b->cap);
}

void sl_buf_reset(struct sl_buf *b)
{
	b->len = 0;
	b->failed = false;
	if (b->data)
		b->data[0] = '\0';
}

int sl_buf_reserve(struct sl_buf *b, size_t n)
{
	size_t need, na;
	char *p;

	if (b->failed)
		return -1;
	if (n > b->cap || b->len > b->cap - n) {
		b->failed = true;
		return -1;
	}
	need = b->len + n + 1;
	if (need <= b->alloc)
		return 0;
	na = b->alloc ? b->alloc : 64;
	while (na < need)
		na *= 2;
	p = realloc(b->data, na);
	if (!p) {
		b->failed = true;
		return -1;
	}
	b->data = p;
	b->alloc = na;
	return 0;
}

int sl_buf_append(struct sl_buf *b, const void *p, size_t n)
{
	if (sl_buf_reserve(b, n) < 0)
		return -1;
	if (n)
		memcpy(b->data + b->len, p, n);
	b->len += n;
	b->data[b->len] = '\0';
	return 0;
}

int sl_buf_putc(struct sl_buf *b, char c)
{
	return sl_buf_append(b, &c, 1);
}

int sl_buf_puts(struct sl_buf *b, const char *s)
{
	return sl_buf_append(b, s, strlen(s));
}

int sl_buf_vprintf(struct sl_buf *b, const char *fmt, va_list ap)
{
	va_list ap2;
	int n;

	if (b->failed)
		return -1;
	va_copy(ap2, ap);
	n = vsnprintf(NULL, 0, fmt, ap2);
	va_end(ap2);
	if (n < 0 || sl_buf_reserve(b, (size_t)n) < 0) {
		b->failed = true;
		return -1;
	}
	vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
	b->len += (size_t)n;
	return 0;
}

int sl_buf_printf(struct sl_buf *b, const char *fmt, ...)
{
	va_list ap;
	int rc;

	va_start(ap, fmt);
	rc = sl_buf_vprintf(b, fmt, ap);
	va_end(ap);
	return rc;
}

char *sl_buf_detach(struct sl_buf *b)
{
	char *p;

	if (b->failed) {
		sl_buf_free(b);
		return NULL;
	}
	if (!b->data && sl_buf_reserve(b, 0) < 0)
		return NULL;
	if (b->len == 0)
		b->data[0] = '\0';
	p = b->data;
	sl_buf_init(b, b->cap);
	return p;
}

int sl_buf_put_shell_word(struct sl_buf *b, const char *s)
{
	static const char safe[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_./:=@%+,-";

	if (*s && strspn(s, safe) == strlen(s))
		return sl_buf_puts(b, s);
	sl_buf_putc(b, '\'');
	for (; *s; s++) {
		if (*s == '\'')
			sl_buf_puts(b, "'\\''");
		else
			sl_buf_putc(b, *s);
	}
	return sl_buf_putc(b, '\'');
}

int sl_buf_put_backfill_command(struct sl_buf *b, const char *config_path, const char *stream, const char *ns,
				const char *table)
{
	struct sl_buf name;

	sl_buf_puts(b, "sluice backfill -c ");
	sl_buf_put_shell_word(b, config_path ? config_path : "FILE");
	sl_buf_puts(b, " --stream ");
	sl_buf_put_shell_word(b, stream);
	if (!ns || !table)
		return sl_buf_failed(b) ? -1 : 0;
	sl_buf_init(&name, 0);
	sl_buf_printf(&name, "%s.%s", ns, table);
	sl_buf_puts(b, " --table ");
	if (sl_buf_failed(&name))
		b->failed = true;
	else
		sl_buf_put_shell_word(b, name.data);
	sl_buf_free(&name);
	return sl_buf_failed(b) ? -1 : 0;
}
