/* common/log.c: leveled logging to stderr with a UTC timestamp. */
#include "common/log.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/time.h>
#include <time.h>

enum sl_log_level sl_log_min_level = SL_LOG_INFO;

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

void sl_log_write(enum sl_log_level lvl, const char *fmt, ...)
{
	char line[4096], ts[32];
	struct timeval tv;
	struct tm tm;
	va_list ap;
	int n;

	gettimeofday(&tv, NULL);
	gmtime_r(&tv.tv_sec, &tm);
	strftime(ts, sizeof ts, "%Y-%m-%dT%H:%M:%S", &tm);
	n = snprintf(line, sizeof line, "%s.%03dZ sluice %s: ", ts, (int)(tv.tv_usec / 1000),
		     level_names[lvl]);
	va_start(ap, fmt);
	if (n > 0 && (size_t)n < sizeof line)
		vsnprintf(line + n, sizeof line - (size_t)n, fmt, ap);
	va_end(ap);
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
