/*
 * ops/sdnotify.c: systemd's notify protocol and the watchdog thread (see
 * sdnotify.h).
 */
#include "ops/sdnotify.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "common/buf.h"
#include "common/log.h"
#include "common/util.h"

#define WD_PERIOD_MS 1000      /* how often it looks, at most (READY is looked for this often) */

/* A quarter of the watchdog's interval, between 50 ms and WD_PERIOD_MS. */
static int period_ms(int64_t usec)
{
	int64_t ms = usec ? usec / 4000 : WD_PERIOD_MS;

	return ms < 50 ? 50 : ms > WD_PERIOD_MS ? WD_PERIOD_MS : (int)ms;
}

int sl_sd_notify(const char *state, char *err, size_t errlen)
{
	const char *path = getenv("NOTIFY_SOCKET");
	struct sockaddr_un sa;
	size_t len;
	socklen_t salen;
	int fd, rc = -1;

	if (!path || !*path)
		return 0;
	len = strlen(path);
	if ((path[0] != '/' && path[0] != '@') || len >= sizeof sa.sun_path) {
		snprintf(err, errlen, "NOTIFY_SOCKET=%s is not a unix socket path or an abstract \"@\" name", path);
		return -1;
	}
	memset(&sa, 0, sizeof sa);
	sa.sun_family = AF_UNIX;
	memcpy(sa.sun_path, path, len);
	if (path[0] == '@')
		sa.sun_path[0] = '\0';  /* the abstract namespace: the name is the bytes after the NUL */
	salen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len + (path[0] == '/' ? 1 : 0));
	if ((fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0)) < 0) {
		snprintf(err, errlen, "NOTIFY_SOCKET: socket: %s", strerror(errno));
		return -1;
	}
	if (sendto(fd, state, strlen(state), MSG_NOSIGNAL, (struct sockaddr *)&sa, salen) < 0)
		snprintf(err, errlen, "could not notify the service manager at NOTIFY_SOCKET=%s: %s", path,
			 strerror(errno));
	else
		rc = 1;
	close(fd);
	return rc;
}

int64_t sl_sd_watchdog_usec(void)
{
	const char *us = getenv("WATCHDOG_USEC"), *pid = getenv("WATCHDOG_PID");
	int64_t v, p;

	if (!us || sl_parse_i64(us, 1, INT64_MAX, &v) < 0)
		return 0;
	if (pid && (sl_parse_i64(pid, 1, INT64_MAX, &p) < 0 || p != (int64_t)getpid()))
		return 0;
	return v;
}

struct sl_watchdog {
	struct sl_ops *ops;
	int64_t probe_limit_us;
	int64_t usec;                      /* WATCHDOG_USEC; 0: READY and STOPPING only */
	pthread_t th;
	pthread_mutex_t mu;
	pthread_cond_t cv;                 /* CLOCK_MONOTONIC */
	bool stop, stopping_sent;
};

/* Every stream has got past its start. */
static bool streams_up(struct sl_ops *ops)
{
	for (struct sl_ops_stream *s = ops->streams; s; s = s->next)
		if (atomic_load(&s->attempts) == 0 || atomic_load(&s->state) == SL_OPS_STARTING)
			return false;
	return true;
}

static void send_state(const char *state)
{
	char err[256];

	if (sl_sd_notify(state, err, sizeof err) < 0)
		sl_warn("%s", err);
}

/* One look: READY once, then WATCHDOG=1 while the pipeline makes progress
 * (a change of verdict is logged once). */
static void look(struct sl_watchdog *w, bool *ready, bool *stuck)
{
	struct sl_buf why;
	bool live;

	if (!*ready) {
		if (!streams_up(w->ops))
			return;
		*ready = true;
		send_state("READY=1");
		sl_info("told the service manager: ready");
	}
	if (!w->usec)
		return;
	sl_buf_init(&why, 0);
	live = sl_ops_live(w->ops, sl_now_us(), w->probe_limit_us, w->usec, &why);
	if (live)
		send_state("WATCHDOG=1");
	if (!live && !*stuck)
		sl_warn("the pipeline makes no progress: no watchdog notification for the service manager: %s",
			why.data ? why.data : "");
	else if (live && *stuck)
		sl_info("the pipeline makes progress again: watchdog notifications resumed");
	*stuck = !live;
	sl_buf_free(&why);
}

static void *wd_main(void *arg)
{
	struct sl_watchdog *w = arg;
	bool ready = false, stuck = false;

	sl_thread_name("sl-watchdog");
	pthread_mutex_lock(&w->mu);
	while (!w->stop) {
		struct timespec until;

		pthread_mutex_unlock(&w->mu);
		look(w, &ready, &stuck);
		pthread_mutex_lock(&w->mu);
		until = sl_mono_deadline(period_ms(w->usec));
		while (!w->stop && pthread_cond_timedwait(&w->cv, &w->mu, &until) == 0)
			;
	}
	pthread_mutex_unlock(&w->mu);
	return NULL;
}

struct sl_watchdog *sl_watchdog_start(struct sl_ops *ops, int64_t probe_limit_us)
{
	const char *sock = getenv("NOTIFY_SOCKET");
	struct sl_watchdog *w;
	pthread_condattr_t ca;

	if (!sock || !*sock)
		return NULL;
	if (!(w = calloc(1, sizeof *w))) {
		sl_warn("out of memory: systemd is not notified");
		return NULL;
	}
	w->ops = ops;
	w->probe_limit_us = probe_limit_us;
	w->usec = sl_sd_watchdog_usec();
	pthread_mutex_init(&w->mu, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&w->cv, &ca);
	pthread_condattr_destroy(&ca);
	if (pthread_create(&w->th, NULL, wd_main, w) != 0) {
		sl_warn("could not start the watchdog thread: %s; systemd is not notified", strerror(errno));
		pthread_cond_destroy(&w->cv);
		pthread_mutex_destroy(&w->mu);
		free(w);
		return NULL;
	}
	if (w->usec)
		sl_info("systemd watchdog: notifying every %d ms while the pipeline makes progress",
			period_ms(w->usec));
	return w;
}

void sl_watchdog_stopping(struct sl_watchdog *w)
{
	bool send;

	if (!w)
		return;
	pthread_mutex_lock(&w->mu);
	send = !w->stopping_sent;
	w->stopping_sent = true;
	pthread_mutex_unlock(&w->mu);
	if (send)
		send_state("STOPPING=1");
}

void sl_watchdog_stop(struct sl_watchdog *w)
{
	if (!w)
		return;
	pthread_mutex_lock(&w->mu);
	w->stop = true;
	pthread_cond_broadcast(&w->cv);
	pthread_mutex_unlock(&w->mu);
	pthread_join(w->th, NULL);
	pthread_cond_destroy(&w->cv);
	pthread_mutex_destroy(&w->mu);
	free(w);
}
