/*
 * agent/lock.c: the per-stream lock file (see lock.h).
 */
#include "agent/lock.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include "common/buf.h"
#include "common/log.h"
#include "common/util.h"

static char *lock_path(const char *state_dir, const char *stream)
{
	struct sl_buf b;

	sl_buf_init(&b, 0);
	sl_buf_printf(&b, "%s/%s.lock", state_dir, stream);
	return sl_buf_detach(&b);
}

/* The pid in an open lock file's first line, or 0. */
static long read_pid(int fd)
{
	char text[32];
	ssize_t n = pread(fd, text, sizeof text - 1, 0);
	int64_t pid;
	char *nl;

	if (n <= 0)
		return 0;
	text[n] = '\0';
	if ((nl = strchr(text, '\n')))
		*nl = '\0';
	if (sl_parse_i64(text, 1, INT32_MAX, &pid) < 0)
		return 0;
	return (long)pid;
}

int sl_stream_lock_take(struct sl_stream_lock *lk, const char *state_dir, const char *stream,
			char *err, size_t errlen)
{
	char text[32];
	int fd = -1, n, rc;

	lk->fd = -1;
	lk->path = NULL;
	if (sl_mkdir_p(state_dir) < 0) {
		snprintf(err, errlen, "could not create state_dir \"%s\": %s", state_dir, sl_strerror(errno));
		return SL_EFAIL;
	}
	if (!(lk->path = lock_path(state_dir, stream))) {
		snprintf(err, errlen, "out of memory");
		return SL_EFAIL;
	}
	fd = open(lk->path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
	if (fd < 0) {
		snprintf(err, errlen, "stream \"%s\": could not open the lock file \"%s\": %s", stream, lk->path,
			 sl_strerror(errno));
		rc = SL_EFAIL;
		goto fail;
	}
	if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
		if (errno == EWOULDBLOCK) {
			long pid = read_pid(fd);
			if (pid > 0)
				snprintf(err, errlen, "stream \"%s\" is in use by another sluice (pid %ld), which holds "
					 "the lock \"%s\"", stream, pid, lk->path);
			else
				snprintf(err, errlen, "stream \"%s\" is in use by another sluice, which holds the lock "
					 "\"%s\"", stream, lk->path);
			rc = SL_ECONFIG;
		} else {
			snprintf(err, errlen, "stream \"%s\": could not lock \"%s\": %s", stream, lk->path,
				 sl_strerror(errno));
			rc = SL_EFAIL;
		}
		goto fail;
	}
	n = snprintf(text, sizeof text, "%ld\n", (long)getpid());
	if (ftruncate(fd, 0) < 0 || pwrite(fd, text, (size_t)n, 0) != n) {
		snprintf(err, errlen, "stream \"%s\": could not write the lock file \"%s\": %s", stream, lk->path,
			 sl_strerror(errno));
		rc = SL_EFAIL;
		goto fail;
	}
	lk->fd = fd;
	return SL_OK;
fail:
	if (fd >= 0)
		close(fd);
	free(lk->path);
	lk->path = NULL;
	return rc;
}

void sl_stream_lock_release(struct sl_stream_lock *lk)
{
	if (lk->fd >= 0)
		close(lk->fd);  /* releases the flock */
	lk->fd = -1;
	free(lk->path);
	lk->path = NULL;
}

long sl_stream_lock_holder(const char *state_dir, const char *stream)
{
	char *path = lock_path(state_dir, stream);
	long pid = 0;
	int fd;

	if (!path)
		return 0;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	free(path);
	if (fd < 0)
		return 0;
	pid = read_pid(fd);
	close(fd);
	if (pid > 0 && kill((pid_t)pid, 0) < 0 && errno == ESRCH)
		pid = 0;
	return pid;
}
