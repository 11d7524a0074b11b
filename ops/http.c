/*
 * ops/http.c: /metrics, /healthz and /livez on libmicrohttpd (see http.h).
 */
#include "ops/http.h"

#include <errno.h>
#include <microhttpd.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/buf.h"
#include "common/util.h"

struct sl_http {
	struct MHD_Daemon *d;
	struct sl_ops *ops;
};

static enum MHD_Result reply(struct MHD_Connection *conn, unsigned status, const char *type, struct sl_buf *body)
{
	struct MHD_Response *r;
	enum MHD_Result ret;
	size_t len = body->len;
	char *data = sl_buf_detach(body);

	if (!data) {
		static char oom[] = "out of memory\n";
		r = MHD_create_response_from_buffer(sizeof oom - 1, oom, MHD_RESPMEM_PERSISTENT);
		status = MHD_HTTP_INTERNAL_SERVER_ERROR;
	} else {
		r = MHD_create_response_from_buffer(len, data, MHD_RESPMEM_MUST_FREE);
	}
	if (!r) {
		free(data);
		return MHD_NO;
	}
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
	MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
	ret = MHD_queue_response(conn, status, r);
	MHD_destroy_response(r);
	return ret;
}

static enum MHD_Result handle(void *cls, struct MHD_Connection *conn, const char *url, const char *method,
			      const char *version, const char *upload, size_t *upload_size, void **con_cls)
{
	struct sl_http *h = cls;
	struct sl_buf body;
	bool head = !strcmp(method, MHD_HTTP_METHOD_HEAD);

	(void)version;
	(void)upload;
	(void)con_cls;
	sl_buf_init(&body, 0);
	if (*upload_size != 0) {
		*upload_size = 0;  /* a body is not read: answer at once */
	}
	if (strcmp(method, MHD_HTTP_METHOD_GET) != 0 && !head) {
		sl_buf_puts(&body, "only GET and HEAD\n");
		return reply(conn, MHD_HTTP_METHOD_NOT_ALLOWED, "text/plain; charset=utf-8", &body);
	}
	if (!strcmp(url, "/metrics")) {
		sl_ops_render(h->ops, &body);
		return reply(conn, MHD_HTTP_OK, "text/plain; version=0.0.4; charset=utf-8", &body);
	}
	if (!strcmp(url, "/healthz")) {
		int code = sl_ops_health(h->ops, &body);
		return reply(conn, (unsigned)code, "text/plain; charset=utf-8", &body);
	}
	if (!strcmp(url, "/livez")) {
		int code = sl_ops_livez(h->ops, &body);
		return reply(conn, (unsigned)code, "text/plain; charset=utf-8", &body);
	}
	sl_buf_puts(&body, "not found: try /metrics, /healthz or /livez\n");
	return reply(conn, MHD_HTTP_NOT_FOUND, "text/plain; charset=utf-8", &body);
}

/* listen(2), under a name that the parameter "listen" does not hide. */
static int listen_now(int fd)
{
	return listen(fd, 1);
}

/* Splits "HOST:PORT" / "[V6]:PORT" (validated by the config) into host and port. */
static int split(const char *listen, char *host, size_t hlen, char *port, size_t plen)
{
	const char *colon;

	if (listen[0] == '[') {
		const char *close = strchr(listen, ']');
		if (!close || close[1] != ':')
			return -1;
		snprintf(host, hlen, "%.*s", (int)(close - listen - 1), listen + 1);
		colon = close + 1;
	} else {
		colon = strrchr(listen, ':');
		if (!colon)
			return -1;
		snprintf(host, hlen, "%.*s", (int)(colon - listen), listen);
	}
	snprintf(port, plen, "%s", colon + 1);
	return 0;
}

/* The address of listen, resolved for a passive socket (freeaddrinfo).
 * 0, or -1 with err. */
static int resolve(const char *listen, struct addrinfo **ai, uint16_t *portno, char *err, size_t errlen)
{
	struct addrinfo hints;
	char host[256], port[16];
	int64_t pn;
	int rc;

	if (split(listen, host, sizeof host, port, sizeof port) < 0 || sl_parse_i64(port, 1, 65535, &pn) < 0) {
		snprintf(err, errlen, "metrics_listen = %s is not HOST:PORT", listen);
		return -1;
	}
	memset(&hints, 0, sizeof hints);
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
	if ((rc = getaddrinfo(host, port, &hints, ai)) != 0) {
		snprintf(err, errlen, "metrics_listen = %s: cannot resolve \"%s\": %s", listen, host, gai_strerror(rc));
		return -1;
	}
	*portno = (uint16_t)pn;
	return 0;
}

static void bind_error(const char *listen, const char *why, char *err, size_t errlen)
{
	snprintf(err, errlen, "metrics_listen = %s: cannot listen there (%s); set metrics_listen to a free "
		 "HOST:PORT, or empty to turn the endpoint off", listen, why);
}

int sl_http_check(const char *listen, char *err, size_t errlen)
{
	struct addrinfo *ai = NULL;
	uint16_t port;
	int fd, one = 1, rc = -1;

	if (resolve(listen, &ai, &port, err, errlen) < 0)
		return -1;
	/* as libmicrohttpd binds: SO_REUSEADDR, which still refuses a port
	 * another socket listens on */
	if ((fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0) {
		bind_error(listen, strerror(errno), err, errlen);
		goto out;
	}
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
	if (bind(fd, ai->ai_addr, ai->ai_addrlen) < 0 || listen_now(fd) < 0)
		bind_error(listen, strerror(errno), err, errlen);
	else
		rc = 0;
	close(fd);
out:
	freeaddrinfo(ai);
	return rc;
}

struct sl_http *sl_http_start(const char *listen, struct sl_ops *ops, char *err, size_t errlen)
{
	struct addrinfo *ai = NULL;
	struct sl_http *h;
	uint16_t portno;
	unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD;

	if (resolve(listen, &ai, &portno, err, errlen) < 0)
		return NULL;
	if (!(h = calloc(1, sizeof *h))) {
		freeaddrinfo(ai);
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	h->ops = ops;
	if (ai->ai_family == AF_INET6)
		flags |= MHD_USE_IPv6;
	h->d = MHD_start_daemon(flags, portno, NULL, NULL, handle, h,
				MHD_OPTION_SOCK_ADDR, ai->ai_addr,
				MHD_OPTION_CONNECTION_LIMIT, (unsigned)16,
				MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)10,
				MHD_OPTION_END);
	freeaddrinfo(ai);
	if (!h->d) {
		bind_error(listen, "address in use, or not an address of this host", err, errlen);
		free(h);
		return NULL;
	}
	return h;
}

void sl_http_stop(struct sl_http *h)
{
	if (!h)
		return;
	MHD_stop_daemon(h->d);
	free(h);
}
