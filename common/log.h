/*
 * common/log.h: leveled logging to stderr.  The macros skip formatting below
 * the current level.  Messages are lowercase, without a final full stop, say
 * what failed first, and never contain secrets.
 */
#ifndef SLUICE_COMMON_LOG_H
#define SLUICE_COMMON_LOG_H

enum sl_log_level { SL_LOG_DEBUG = 0, SL_LOG_INFO, SL_LOG_WARN, SL_LOG_ERROR };

/* The one process-wide setting besides the signal flags: written once by main. */
extern enum sl_log_level sl_log_min_level;

void sl_log_write(enum sl_log_level lvl, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* A status line kept at the bottom of a terminal (stderr): log lines are
 * written above it, and it is drawn again after each.  NULL or "" removes
 * it.  Only for a stderr that is a terminal (the caller checks isatty). */
void sl_log_status_line(const char *text);
/* Parses "debug", "info", "warn"/"warning", "error"; returns 0 or -1. */
int sl_log_level_parse(const char *s, enum sl_log_level *out);

#define sl_log(lvl, ...) \
	do { if ((lvl) >= sl_log_min_level) sl_log_write((lvl), __VA_ARGS__); } while (0)
#define sl_debug(...) sl_log(SL_LOG_DEBUG, __VA_ARGS__)
#define sl_info(...) sl_log(SL_LOG_INFO, __VA_ARGS__)
#define sl_warn(...) sl_log(SL_LOG_WARN, __VA_ARGS__)
#define sl_error(...) sl_log(SL_LOG_ERROR, __VA_ARGS__)

#endif
