/*
 * common/log.h: leveled logging to stderr, as text or as JSON lines.  The
 * macros skip formatting below the current level.  Messages are lowercase,
 * without a final full stop, say what failed first, and never contain
 * secrets.
 *
 * Every line is one line: a message's line breaks (libpq's ERROR, DETAIL
 * and HINT parts) become spaces.  A thread that works for a stream names it
 * once (sl_log_set_stream); each of its lines then names the stream: in
 * text as `stream "NAME": ` unless the message already does, in JSON as the
 * "stream" field.  The table being backfilled, and the SQLSTATE or errno of
 * the error that a message reports (sl_log_note_sqlstate, sl_strerror), go
 * into the JSON fields "table", "sqlstate" and "errno"; the destination a
 * line is about (sl_log_set_destination) into "destination".
 */
#ifndef SLUICE_COMMON_LOG_H
#define SLUICE_COMMON_LOG_H

#include <stdbool.h>

enum sl_log_level { SL_LOG_DEBUG = 0, SL_LOG_INFO, SL_LOG_WARN, SL_LOG_ERROR };
enum sl_log_format { SL_LOG_TEXT = 0, SL_LOG_JSON };

/* Process-wide settings besides the signal flags: written once by main. */
extern enum sl_log_level sl_log_min_level;
extern enum sl_log_format sl_log_format;

void sl_log_write(enum sl_log_level lvl, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* A status line kept at the bottom of a terminal (stderr): log lines are
 * written above it, and it is drawn again after each.  NULL or "" removes
 * it.  Only for a stderr that is a terminal (the caller checks isatty). */
void sl_log_status_line(const char *text);
/* Parses "debug", "info", "warn"/"warning", "error"; returns 0 or -1. */
int sl_log_level_parse(const char *s, enum sl_log_level *out);

/* The calling thread's context (NULL clears).  The stream's name is not
 * copied: it must outlive the thread's logging; the table's is. */
void sl_log_set_stream(const char *stream);
const char *sl_log_stream(void);
void sl_log_set_table(const char *table);
/* The destination a line is about (its profile's name, not copied; NULL
 * clears): the JSON field "destination". */
void sl_log_set_destination(const char *destination);

/* What the last error built on this thread came from, for the next line
 * that reports it: a SQLSTATE (clears the errno), or an errno (clears the
 * SQLSTATE).  sl_strerror() is strerror() that notes e. */
void sl_log_note_sqlstate(const char *sqlstate);
void sl_log_note_errno(int e);
const char *sl_strerror(int e);
void sl_log_clear_error(void);
/* Copies the calling thread's error notes out, and into another thread
 * (an error handed over from the writer thread). */
struct sl_log_error { char sqlstate[6]; int errnum; };
void sl_log_error_get(struct sl_log_error *out);
void sl_log_error_set(const struct sl_log_error *in);

#define sl_log(lvl, ...) \
	do { if ((lvl) >= sl_log_min_level) sl_log_write((lvl), __VA_ARGS__); } while (0)
#define sl_debug(...) sl_log(SL_LOG_DEBUG, __VA_ARGS__)
#define sl_info(...) sl_log(SL_LOG_INFO, __VA_ARGS__)
#define sl_warn(...) sl_log(SL_LOG_WARN, __VA_ARGS__)
#define sl_error(...) sl_log(SL_LOG_ERROR, __VA_ARGS__)

#endif
