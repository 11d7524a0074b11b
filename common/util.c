/* common/util.c: clocks, LSN text, checked number parsing, durable file writes. */
#include "common/util.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"

int64_t sl_now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

void sl_thread_name(const char *name)
{
	char n[16];   /* the kernel keeps 15 bytes */

	snprintf(n, sizeof n, "%s", name);
	pthread_setname_np(pthread_self(), n);
}

int64_t sl_mono_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

int64_t sl_mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

bool sl_spin_until(bool (*ready)(void *), void *arg)
{
	for (int i = 0; i < SL_SPIN_ROUNDS; i++) {
		if (ready(arg))
			return true;
#if defined(__x86_64__) || defined(__i386__)
		__builtin_ia32_pause();
#elif defined(__aarch64__)
		__asm__ __volatile__("yield");
#endif
	}
	return ready(arg);
}

struct timespec sl_mono_deadline(int ms)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	ts.tv_sec += ms / 1000;
	ts.tv_nsec += (long)(ms % 1000) * 1000000L;
	if (ts.tv_nsec >= 1000000000L) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000L;
	}
	return ts;
}

void sl_lsn_format(uint64_t lsn, char out[static 18])
{
	snprintf(out, 18, "%" PRIX32 "/%" PRIX32, (uint32_t)(lsn >> 32), (uint32_t)lsn);
}

static int parse_hex32(const char *s, const char **end, uint32_t *out)
{
	uint64_t v = 0;
	int n = 0;

	for (; *s; s++, n++) {
		int d;
		if (*s >= '0' && *s <= '9')
			d = *s - '0';
		else if (*s >= 'a' && *s <= 'f')
			d = *s - 'a' + 10;
		else if (*s >= 'A' && *s <= 'F')
			d = *s - 'A' + 10;
		else
			break;
		v = v * 16 + (uint64_t)d;
		if (v > UINT32_MAX)
			return -1;
	}
	if (n == 0)
		return -1;
	*end = s;
	*out = (uint32_t)v;
	return 0;
}

int sl_lsn_parse(const char *s, uint64_t *out)
{
	uint32_t hi, lo;
	const char *e;

	if (!s || parse_hex32(s, &e, &hi) < 0 || *e != '/')
		return -1;
	if (parse_hex32(e + 1, &e, &lo) < 0 || *e)
		return -1;
	*out = (uint64_t)hi << 32 | lo;
	return 0;
}

int sl_parse_i64(const char *s, int64_t min, int64_t max, int64_t *out)
{
	char *end;
	long long v;

	if (!s || !*s)
		return -1;
	errno = 0;
	v = strtoll(s, &end, 10);
	if (errno || *end || v < min || v > max)
		return -1;
	*out = v;
	return 0;
}

int sl_parse_u64(const char *s, uint64_t max, uint64_t *out)
{
	char *end;
	unsigned long long v;

	if (!s || !*s || *s == '-' || *s == '+' || *s == ' ')
		return -1;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || *end || v > max)
		return -1;
	*out = v;
	return 0;
}

void *sl_grow(void *arr, size_t *alloc, size_t n, size_t elem, size_t first)
{
	size_t na;
	void *nv;

	if (n < *alloc)
		return arr;
	na = *alloc ? *alloc * 2 : first;
	if (na <= n || na > SIZE_MAX / elem || !(nv = realloc(arr, na * elem)))
		return NULL;
	*alloc = na;
	return nv;
}

int sl_fsync_dir_of(const char *path, bool is_dir)
{
	char dir[PATH_MAX];
	const char *slash;
	int fd, rc, saved;

	if (is_dir) {
		if (snprintf(dir, sizeof dir, "%s", path) >= (int)sizeof dir) {
			errno = ENAMETOOLONG;
			return -1;
		}
	} else {
		slash = strrchr(path, '/');
		if (!slash)
			snprintf(dir, sizeof dir, ".");
		else if (slash == path)
			snprintf(dir, sizeof dir, "/");
		else if ((size_t)(slash - path) >= sizeof dir) {
			errno = ENAMETOOLONG;
			return -1;
		} else
			snprintf(dir, sizeof dir, "%.*s", (int)(slash - path), path);
	}
	fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	rc = fsync(fd);
	saved = errno;
	close(fd);
	errno = saved;
	return rc;
}

uint64_t sl_fnv1a(uint64_t h, const void *p, size_t n)
{
	const unsigned char *s = p;

	for (size_t i = 0; i < n; i++) {
		h ^= s[i];
		h *= UINT64_C(0x100000001b3);
	}
	return h;
}

uint64_t sl_fd_share(uint64_t div, uint64_t min, uint64_t unlimited)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) < 0 || rl.rlim_cur == RLIM_INFINITY || (uint64_t)rl.rlim_cur > unlimited * div)
		return unlimited;
	return rl.rlim_cur > 96 ? (uint64_t)(rl.rlim_cur - 64) / div : min;
}

int sl_mkdir_p(const char *path)
{
	char tmp[PATH_MAX];
	size_t n = strlen(path);

	if (n == 0 || n >= sizeof tmp) {
		errno = ENAMETOOLONG;
		return -1;
	}
	memcpy(tmp, path, n + 1);
	for (char *p = tmp + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(tmp, 0755) < 0 && errno != EEXIST)
			return -1;
		*p = '/';
	}
	if (mkdir(tmp, 0755) < 0 && errno != EEXIST)
		return -1;
	return 0;
}

int sl_write_file_atomic(const char *path, const void *data, size_t len, char *err, size_t errlen)
{
	return sl_write_file_atomic_mode(path, data, len, 0600, err, errlen);
}

int sl_write_file_atomic_mode(const char *path, const void *data, size_t len, int mode, char *err,
			      size_t errlen)
{
	char tmp[PATH_MAX];
	const char *p = data;
	int fd;

	if (snprintf(tmp, sizeof tmp, "%s.tmp", path) >= (int)sizeof tmp) {
		snprintf(err, errlen, "path too long: %s", path);
		return -1;
	}
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, (mode_t)mode);
	if (fd < 0) {
		snprintf(err, errlen, "could not create \"%s\": %s", tmp, sl_strerror(errno));
		return -1;
	}
	while (len > 0) {
		ssize_t w = write(fd, p, len);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			snprintf(err, errlen, "could not write \"%s\": %s", tmp, sl_strerror(errno));
			goto fail;
		}
		p += w;
		len -= (size_t)w;
	}
	if (fsync(fd) < 0) {
		snprintf(err, errlen, "could not fsync \"%s\": %s", tmp, sl_strerror(errno));
		goto fail;
	}
	if (close(fd) < 0) {
		fd = -1;
		snprintf(err, errlen, "could not close \"%s\": %s", tmp, sl_strerror(errno));
		goto fail;
	}
	fd = -1;
	if (rename(tmp, path) < 0) {
		snprintf(err, errlen, "could not rename \"%s\" to \"%s\": %s", tmp, path, sl_strerror(errno));
		goto fail;
	}
	if (sl_fsync_dir_of(path, false) < 0) {
		snprintf(err, errlen, "could not fsync the directory of \"%s\": %s", path, sl_strerror(errno));
		return -1;
	}
	return 0;
fail:
	if (fd >= 0)
		close(fd);
	unlink(tmp);
	return -1;
}

int sl_read_file(const char *path, char **out, size_t *len, char *err, size_t errlen)
{
	FILE *f = fopen(path, "rb");
	char *data = NULL;
	size_t n = 0, alloc = 0;

	if (!f) {
		if (errno == ENOENT)
			return 1;
		snprintf(err, errlen, "could not open \"%s\": %s", path, sl_strerror(errno));
		return -1;
	}
	for (;;) {
		if (alloc - n < 4096) {
			char *p = realloc(data, alloc ? alloc * 2 : 8192);
			if (!p) {
				snprintf(err, errlen, "out of memory reading \"%s\"", path);
				free(data);
				fclose(f);
				return -1;
			}
			data = p;
			alloc = alloc ? alloc * 2 : 8192;
		}
		size_t r = fread(data + n, 1, alloc - n - 1, f);
		n += r;
		if (r == 0)
			break;
	}
	if (ferror(f)) {
		snprintf(err, errlen, "could not read \"%s\": %s", path, sl_strerror(errno));
		free(data);
		fclose(f);
		return -1;
	}
	fclose(f);
	data[n] = '\0';
	*out = data;
	if (len)
		*len = n;
	return 0;
}

int sl_hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

int sl_uuid_parse(const char *s, size_t len, unsigned char out[static 16])
{
	size_t i = 0;

	if (len != 36)
		return -1;
	for (int k = 0; k < 16; k++) {
		int hi, lo;
		if (i == 8 || i == 13 || i == 18 || i == 23) {
			if (s[i] != '-')
				return -1;
			i++;
		}
		hi = sl_hexval(s[i]);
		lo = sl_hexval(s[i + 1]);
		if (hi < 0 || lo < 0)
			return -1;
		out[k] = (unsigned char)(hi << 4 | lo);
		i += 2;
	}
	return 0;
}

int64_t sl_days_from_civil(int64_t y, int m, int d)
{
	int64_t era, yoe, doy, doe;

	/* Howard Hinnant's days_from_civil */
	y -= m <= 2;
	era = (y >= 0 ? y : y - 399) / 400;
	yoe = y - era * 400;
	doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;
	doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
	return era * 146097 + doe - 719468;
}

int sl_status_exit_code(int status)
{
	static const struct { int status, code; } table[] = {
		{ SL_OK, 0 },
		{ SL_EFAIL, 1 },
		{ SL_ECONFIG, 2 },
		{ SL_EPREREQ, 3 },
		{ SL_ELOST, 4 },
		{ SL_EDATA, 1 },
		{ SL_ERESTART, 1 },
		{ SL_EAGAIN, 1 },
		{ SL_EVERIFY, 1 },
		{ SL_ESTALE, 1 },
	};

	for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
		if (table[i].status == status)
			return table[i].code;
	return status > 0 ? 0 : 1;
}

const char *sl_hold_name(enum sl_hold h)
{
	switch (h) {
	case SL_HOLD_KEPT: return "kept";
	case SL_HOLD_AT_RISK: return "at_risk";
	case SL_HOLD_LOST: return "lost";
	case SL_HOLD_UNKNOWN: break;
	}
	return "unknown";
}

int sl_dead_letter_append(const char *who, const char *path, const void *lines, size_t len, char *err,
			  size_t errlen)
{
	const char *p = lines;
	int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
	int rc = -1;

	if (fd < 0) {
		snprintf(err, errlen, "%scould not open the dead-letter file \"%s\": %s", who, path,
			 sl_strerror(errno));
		return -1;
	}
	while (len > 0) {
		ssize_t n = write(fd, p, len);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			snprintf(err, errlen, "%scould not write the dead-letter file \"%s\": %s", who, path,
				 sl_strerror(errno));
			goto out;
		}
		p += n;
		len -= (size_t)n;
	}
	if (fsync(fd) < 0) {
		snprintf(err, errlen, "%scould not fsync the dead-letter file \"%s\": %s", who, path,
			 sl_strerror(errno));
		goto out;
	}
	rc = 0;
out:
	close(fd);
	return rc;
}
