/*
 * common/secret.c: ${NAME} expansion and secrets read from the environment
 * or from a file (see secret.h for the rules and for who owns what).
 *
 * Every buffer that held a value from the environment or from a password
 * file is wiped before it is freed, on the error paths too.
 */
#include "common/secret.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/buf.h"
#include "common/log.h"

void sl_secret_free(char *s)
{
	if (s) {
		explicit_bzero(s, strlen(s));
		free(s);
	}
}

static bool is_name_start(char c)
{
	return c == '_' || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z');
}

static bool is_name_char(char c)
{
	return is_name_start(c) || (c >= '0' && c <= '9');
}

int sl_env_expand(const char *in, const char *key, char **out, bool *expanded, char *err,
		  size_t errlen)
{
	struct sl_buf b;
	const char *p = in;
	char *var = NULL;
	int rc = -1;

	sl_buf_init(&b, 0);
	*expanded = false;
	while (*p) {
		const char *dollar = strchr(p, '$'), *name, *q, *v;

		if (!dollar) {
			sl_buf_puts(&b, p);
			break;
		}
		sl_buf_append(&b, p, (size_t)(dollar - p));
		if (dollar[1] == '$') {
			sl_buf_putc(&b, '$');
			p = dollar + 2;
			continue;
		}
		if (dollar[1] != '{') {
			snprintf(err, errlen, "stray \"$\" in the value of key \"%s\": write ${NAME} for "
				 "an environment variable or $$ for a literal $", key);
			goto out;
		}
		name = q = dollar + 2;
		if (is_name_start(*q))
			for (q++; is_name_char(*q); q++)
				;
		if (q == name || *q != '}') {
			snprintf(err, errlen, "bad variable reference in the value of key \"%s\": "
				 "expected ${NAME}, NAME made of A-Z, a-z, 0-9 and _", key);
			goto out;
		}
		free(var);
		if (!(var = strndup(name, (size_t)(q - name)))) {
			snprintf(err, errlen, "out of memory");
			goto out;
		}
		if (!(v = getenv(var))) {
			snprintf(err, errlen, "environment variable \"%s\" is not set (used by key \"%s\")",
				 var, key);
			goto out;
		}
		sl_buf_puts(&b, v);
		*expanded = true;
		p = q + 1;
	}
	sl_buf_append(&b, "", 0);  /* a NUL-terminated result, also when empty */
	if (sl_buf_failed(&b)) {
		snprintf(err, errlen, "out of memory");
		goto out;
	}
	*out = sl_buf_detach(&b);
	rc = 0;
out:
	free(var);
	if (b.data)
		explicit_bzero(b.data, b.alloc);
	sl_buf_free(&b);
	return rc;
}

int sl_secret_from_env(const char *key, const char *var, const char *shown, char **out, char *err,
		       size_t errlen)
{
	const char *v = getenv(var);

	if (!v) {
		snprintf(err, errlen, "environment variable \"%s\" named by %s is not set", shown, key);
		return -1;
	}
	if (!*v) {
		snprintf(err, errlen, "environment variable \"%s\" named by %s is empty", shown, key);
		return -1;
	}
	if (!(*out = strdup(v))) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	return 0;
}

int sl_secret_from_file(const char *key, const char *path, const char *shown, char **out,
			char *err, size_t errlen)
{
	char *data = NULL;
	size_t n = 0;
	struct stat stt;
	int fd, rc = -1;

	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);  /* a FIFO must not block */
	if (fd < 0) {
		snprintf(err, errlen, "cannot open %s \"%s\": %s", key, shown, sl_strerror(errno));
		goto out;
	}
	if (fstat(fd, &stt) < 0) {
		snprintf(err, errlen, "cannot stat %s \"%s\": %s", key, shown, sl_strerror(errno));
		goto out;
	}
	if (!S_ISREG(stt.st_mode)) {
		snprintf(err, errlen, "%s \"%s\" is not a regular file", key, shown);
		goto out;
	}
	if (stt.st_uid != geteuid()) {
		snprintf(err, errlen, "%s \"%s\" is owned by uid %u, not by the user sluice runs as "
			 "(uid %u)", key, shown, (unsigned)stt.st_uid, (unsigned)geteuid());
		goto out;
	}
	if (stt.st_mode & (S_IRWXG | S_IRWXO)) {
		snprintf(err, errlen, "%s \"%s\" has mode %04o, which gives group or others access; "
			 "it must be readable by its owner only: run chmod 600 \"%s\"", key, shown,
			 (unsigned)(stt.st_mode & 07777), shown);
		goto out;
	}
	if (!(data = malloc(SL_SECRET_FILE_MAX + 1))) {
		snprintf(err, errlen, "out of memory");
		goto out;
	}
	for (;;) {
		ssize_t r = read(fd, data + n, SL_SECRET_FILE_MAX + 1 - n);

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			snprintf(err, errlen, "cannot read %s \"%s\": %s", key, shown, sl_strerror(errno));
			goto out;
		}
		if (r == 0)
			break;
		n += (size_t)r;
		if (n > SL_SECRET_FILE_MAX) {
			snprintf(err, errlen, "%s \"%s\" is larger than %d bytes", key, shown,
				 SL_SECRET_FILE_MAX);
			goto out;
		}
	}
	if (n > 0 && data[n - 1] == '\n') {
		n--;
		if (n > 0 && data[n - 1] == '\r')
			n--;
	}
	data[n] = '\0';
	if (memchr(data, '\0', n)) {
		snprintf(err, errlen, "%s \"%s\" contains a NUL byte", key, shown);
		goto out;
	}
	if (n == 0) {
		snprintf(err, errlen, "%s \"%s\" is empty", key, shown);
		goto out;
	}
	if (!(*out = strdup(data))) {
		snprintf(err, errlen, "out of memory");
		goto out;
	}
	rc = 0;
out:
	if (data) {
		explicit_bzero(data, SL_SECRET_FILE_MAX + 1);
		free(data);
	}
	if (fd >= 0)
		close(fd);
	return rc;
}
