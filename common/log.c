/* common/log.c: leveled logging to stderr with a UTC timestamp. */
#include "common/log.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/time.h>
#include <time.h>

enum sl_log_level sl_log_min_level = SL_LOG_INFO;

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
	fprintf(stderr, "%s\n", line);
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
