/*
 * ops/http.c: /metrics and /healthz on libmicrohttpd (see http.h).
 */
#include "ops/http.h"

#include <microhttpd.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

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
	sl_buf_puts(&body, "not found: try /metrics or /healthz\n");
	return reply(conn, MHD_HTTP_NOT_FOUND, "text/plain; charset=utf-8", &body);
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

struct sl_http *sl_http_start(const char *listen, struct sl_ops *ops, char *err, size_t errlen)
{
	struct addrinfo hints, *ai = NULL;
	struct sl_http *h;
	char host[256], port[16];
	int64_t portno;
	unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD;
	int rc;

	if (split(listen, host, sizeof host, port, sizeof port) < 0 || sl_parse_i64(port, 1, 65535, &portno) < 0) {
		snprintf(err, errlen, "metrics_listen = %s is not HOST:PORT", listen);
		return NULL;
	}
	memset(&hints, 0, sizeof hints);
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
	if ((rc = getaddrinfo(host, port, &hints, &ai)) != 0) {
		snprintf(err, errlen, "metrics_listen = %s: cannot resolve \"%s\": %s", listen, host, gai_strerror(rc));
		return NULL;
	}
	if (!(h = calloc(1, sizeof *h))) {
		freeaddrinfo(ai);
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	h->ops = ops;
	if (ai->ai_family == AF_INET6)
		flags |= MHD_USE_IPv6;
	h->d = MHD_start_daemon(flags, (uint16_t)portno, NULL, NULL, handle, h,
				MHD_OPTION_SOCK_ADDR, ai->ai_addr,
				MHD_OPTION_CONNECTION_LIMIT, (unsigned)16,
				MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)10,
				MHD_OPTION_END);
	freeaddrinfo(ai);
	if (!h->d) {
		snprintf(err, errlen, "metrics_listen = %s: cannot listen there (address in use, or not an address of "
			 "this host); set metrics_listen to a free HOST:PORT, or empty to turn the endpoint off", listen);
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
