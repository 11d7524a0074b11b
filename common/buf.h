/*
 * common/buf.h: the one growable byte buffer used everywhere (SQL text, JSON,
 * Avro blocks, file names).  It has a hard size cap and a sticky error flag:
 * once an append fails (out of memory or over the cap) every later append is a
 * no-op and sl_buf_failed() reports it, so callers can append freely and check
 * once at the end.  The buffer always keeps a NUL after the data.
 */
#ifndef SLUICE_COMMON_BUF_H
#define SLUICE_COMMON_BUF_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SL_BUF_DEFAULT_CAP ((size_t)1 << 31) /* 2 GiB */

struct sl_buf {
	char *data;    /* owned; NUL-terminated when len > 0 or after any append */
	size_t len;
	size_t alloc;
	size_t cap;    /* hard limit on len */
	bool failed;   /* sticky: an append failed */
};

/* Initialises an empty buffer; cap 0 means SL_BUF_DEFAULT_CAP.  Allocates nothing. */
void sl_buf_init(struct sl_buf *b, size_t cap);
/* Frees the data and leaves the buffer empty and reusable. */
void sl_buf_free(struct sl_buf *b);
/* Empties the buffer, keeping its memory and clearing the error flag. */
void sl_buf_reset(struct sl_buf *b);
/* Makes room for n more bytes; returns 0, or -1 and sets the error flag. */
int sl_buf_reserve(struct sl_buf *b, size_t n);
int sl_buf_append(struct sl_buf *b, const void *p, size_t n);
int sl_buf_putc(struct sl_buf *b, char c);
int sl_buf_puts(struct sl_buf *b, const char *s);
int sl_buf_printf(struct sl_buf *b, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
int sl_buf_vprintf(struct sl_buf *b, const char *fmt, va_list ap)
	__attribute__((format(printf, 2, 0)));
/* Appends s as one word for a POSIX shell: as it is when it holds only
 * characters no shell treats specially, else in single quotes (a quote
 * inside written '\''), so that a command shown in a message can be pasted
 * and run as it is. */
int sl_buf_put_shell_word(struct sl_buf *b, const char *s);
/* Appends the command that backfills a stream again, for messages:
 * "sluice backfill -c FILE --stream NAME", and " --table NS.TABLE" when ns
 * and table are given, each word quoted for a shell (sl_buf_put_shell_word;
 * FILE when config_path is NULL).  Returns the buffer's status (0 or -1). */
int sl_buf_put_backfill_command(struct sl_buf *b, const char *config_path, const char *stream, const char *ns,
				const char *table);
/* Hands the data to the caller, who frees it with free(); the buffer is left
 * empty.  Returns NULL if the buffer failed (and frees its data). */
char *sl_buf_detach(struct sl_buf *b);
static inline bool sl_buf_failed(const struct sl_buf *b) { return b->failed; }

#endif
