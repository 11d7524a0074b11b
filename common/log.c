/* common/log.c: leveled logging to stderr, as text or JSON lines (log.h). */
#include "common/log.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/time.h>
#include <time.h>

enum sl_log_level sl_log_min_level = SL_LOG_INFO;
enum sl_log_format sl_log_format = SL_LOG_TEXT;

/* The terminal's status line (sl_log_status_line), and the lock that keeps
 * it and log lines from interleaving. */
static pthread_mutex_t status_mu = PTHREAD_MUTEX_INITIALIZER;
static char status_text[512];

void sl_log_status_line(const char *text)
{
	pthread_mutex_lock(&status_mu);
	if (status_text[0] || (text && *text))
		fputs("\r\033[K", stderr);
	snprintf(status_text, sizeof status_text, "%s", text ? text : "");
	if (status_text[0])
		fputs(status_text, stderr);
	fflush(stderr);
	pthread_mutex_unlock(&status_mu);
}

static const char *const level_names[] = { "debug", "info", "warning", "error" };

static _Thread_local const char *cur_stream;
static _Thread_local char cur_table_buf[256];
static _Thread_local const char *cur_table;
static _Thread_local struct sl_log_error cur_error;
static _Thread_local const char *cur_destination;

void sl_log_set_stream(const char *stream)
{
	cur_stream = stream;
}

const char *sl_log_stream(void)
{
	return cur_stream;
}

void sl_log_set_table(const char *table)
{
	cur_table = NULL;
	if (table) {
		snprintf(cur_table_buf, sizeof cur_table_buf, "%s", table);
		cur_table = cur_table_buf;
	}
}

void sl_log_set_destination(const char *destination)
{
	cur_destination = destination;
}

void sl_log_note_sqlstate(const char *sqlstate)
{
	snprintf(cur_error.sqlstate, sizeof cur_error.sqlstate, "%s", sqlstate ? sqlstate : "");
	cur_error.errnum = 0;
}

void sl_log_note_errno(int e)
{
	cur_error.sqlstate[0] = '\0';
	cur_error.errnum = e;
}

const char *sl_strerror(int e)
{
	sl_log_note_errno(e);
	return strerror(e);
}

void sl_log_clear_error(void)
{
	memset(&cur_error, 0, sizeof cur_error);
}

void sl_log_error_get(struct sl_log_error *out)
{
	*out = cur_error;
}

void sl_log_error_set(const struct sl_log_error *in)
{
	cur_error = *in;
}

/* Appends s to line (of size len, used *n) as the body of a JSON string:
 * quotes, backslashes and control characters escaped.  The message's bytes
 * are UTF-8 already (server messages, names); they pass as they are. */
static void put_json(char *line, size_t len, size_t *n, const char *s)
{
	for (; *s && *n + 7 < len; s++) {
		unsigned char c = (unsigned char)*s;
		if (c == '"' || c == '\\') {
			line[(*n)++] = '\\';
			line[(*n)++] = (char)c;
		} else if (c < 0x20) {
			*n += (size_t)snprintf(line + *n, len - *n, "\\u%04x", c);
		} else {
			line[(*n)++] = (char)c;
		}
	}
	line[*n] = '\0';
}

static void put_raw(char *line, size_t len, size_t *n, const char *s)
{
	int k = snprintf(line + *n, len - *n, "%s", s);

	if (k > 0)
		*n = *n + (size_t)k < len ? *n + (size_t)k : len - 1;
}

/* One line: the message's line breaks and tabs become single spaces. */
static void one_line(char *msg)
{
	char *w = msg;

	for (char *r = msg; *r; r++) {
		char c = *r == '\n' || *r == '\r' || *r == '\t' ? ' ' : *r;
		if (c == ' ' && (w == msg || w[-1] == ' ') && (*r == '\n' || *r == '\r' || *r == '\t'))
			continue;
		*w++ = c;
	}
	while (w > msg && w[-1] == ' ')
		w--;
	*w = '\0';
}

void sl_log_write(enum sl_log_level lvl, const char *fmt, ...)
{
	char msg[4096], line[8192], ts[32], tail[64];
	struct timeval tv;
	struct tm tm;
	va_list ap;
	size_t n = 0;

	gettimeofday(&tv, NULL);
	gmtime_r(&tv.tv_sec, &tm);
	strftime(ts, sizeof ts, "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(tail, sizeof tail, ".%03dZ", (int)(tv.tv_usec / 1000));
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	one_line(msg);
	if (sl_log_format == SL_LOG_JSON) {
		put_raw(line, sizeof line, &n, "{\"ts\":\"");
		put_raw(line, sizeof line, &n, ts);
		put_raw(line, sizeof line, &n, tail);
		put_raw(line, sizeof line, &n, "\",\"level\":\"");
		put_raw(line, sizeof line, &n, level_names[lvl]);
		if (cur_stream) {
			put_raw(line, sizeof line, &n, "\",\"stream\":\"");
			put_json(line, sizeof line, &n, cur_stream);
		}
		if (cur_table) {
			put_raw(line, sizeof line, &n, "\",\"table\":\"");
			put_json(line, sizeof line, &n, cur_table);
		}
		if (cur_destination) {
			put_raw(line, sizeof line, &n, "\",\"destination\":\"");
			put_json(line, sizeof line, &n, cur_destination);
		}
		put_raw(line, sizeof line, &n, "\",\"msg\":\"");
		put_json(line, sizeof line, &n, msg);
		put_raw(line, sizeof line, &n, "\"");
		if (lvl >= SL_LOG_WARN && cur_error.sqlstate[0]) {
			put_raw(line, sizeof line, &n, ",\"sqlstate\":\"");
			put_json(line, sizeof line, &n, cur_error.sqlstate);
			put_raw(line, sizeof line, &n, "\"");
		} else if (lvl >= SL_LOG_WARN && cur_error.errnum) {
			char e[32];
			snprintf(e, sizeof e, ",\"errno\":%d", cur_error.errnum);
			put_raw(line, sizeof line, &n, e);
		}
		put_raw(line, sizeof line, &n, "}");
	} else {
		char who[300] = "";
		if (cur_stream) {
			snprintf(who, sizeof who, "stream \"%s\"", cur_stream);
			if (strstr(msg, who))
				who[0] = '\0';   /* the message names it already */
			else
				snprintf(who, sizeof who, "stream \"%s\": ", cur_stream);
		}
		snprintf(line, sizeof line, "%s%s sluice %s: %s%s", ts, tail, level_names[lvl], who, msg);
	}
	pthread_mutex_lock(&status_mu);
	if (status_text[0])
		fprintf(stderr, "\r\033[K%s\n%s", line, status_text);
	else
		fprintf(stderr, "%s\n", line);
	pthread_mutex_unlock(&status_mu);
}

int sl_log_level_parse(const char *s, enum sl_log_level *out)
{
	if (!strcasecmp(s, "debug"))
		*out = SL_LOG_DEBUG;
	else if (!strcasecmp(s, "info"))
		*out = SL_LOG_INFO;
	else if (!strcasecmp(s, "warn") || !strcasecmp(s, "warning"))
		*out = SL_LOG_WARN;
	else if (!strcasecmp(s, "error"))
		*out = SL_LOG_ERROR;
	else
		return -1;
	return 0;
}
