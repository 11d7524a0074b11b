/*
 * tests/unit/fake_http.c: the tests' loopback HTTP server (see fake_http.h).
 */
#include "tests/unit/fake_http.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

struct fake_http {
	int lfd;
	int stop[2];
	int port;
	char url[64];
	pthread_t thread;
	pthread_mutex_t mu;
	fake_http_handler handler;
	void *arg;
	struct sl_buf transcript;
	int count;
};

static void die(const char *what)
{
	fprintf(stderr, "fake_http: %s: %s\n", what, strerror(errno));
	abort();
}

/* Reads more bytes from fd into b; 0 on EOF or when asked to stop. */
static ssize_t fill(struct fake_http *f, int fd, struct sl_buf *b)
{
	char tmp[65536];
	struct pollfd p[2] = { { fd, POLLIN, 0 }, { f->stop[0], POLLIN, 0 } };
	ssize_t n;

	for (;;) {
		if (poll(p, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			return 0;
		}
		if (p[1].revents)
			return 0;
		n = read(fd, tmp, sizeof tmp);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return 0;
		sl_buf_append(b, tmp, (size_t)n);
		return n;
	}
}

static void write_all(int fd, const void *p, size_t n)
{
	const char *s = p;

	while (n > 0) {
		ssize_t w = write(fd, s, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return;
		s += w;
		n -= (size_t)w;
	}
}

static bool printable(const unsigned char *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if ((p[i] < 0x20 && p[i] != '\n' && p[i] != '\r' && p[i] != '\t') || p[i] == 0x7f)
			return false;
	return true;
}

/* Replaces every occurrence of from (n bytes) in b's text by to. */
static void replace_all(struct sl_buf *b, const char *from, const char *to)
{
	struct sl_buf out;
	size_t n = strlen(from), i = 0;

	if (!n)
		return;
	sl_buf_init(&out, 0);
	while (i < b->len) {
		if (i + n <= b->len && memcmp(b->data + i, from, n) == 0) {
			sl_buf_puts(&out, to);
			i += n;
		} else {
			sl_buf_putc(&out, b->data[i++]);
		}
	}
	sl_buf_free(b);
	*b = out;
}

static void record(struct fake_http *f, const struct fake_http_req *rq, const struct fake_http_resp *rs)
{
	struct sl_buf t, body;
	char port[16], *ctype;
	const char *bnd;

	/* A multipart boundary is random: make it BOUNDARY before the body is
	 * shown (a hex dump would hide it from the replacement below). */
	sl_buf_init(&body, 0);
	sl_buf_append(&body, rq->body, rq->len);
	ctype = fake_http_header(rq, "Content-Type");
	if (ctype && (bnd = strstr(ctype, "boundary=")) != NULL)
		replace_all(&body, bnd + 9, "BOUNDARY");
	sl_buf_init(&t, 0);
	sl_buf_printf(&t, "%s %s HTTP/1.1\n", rq->method, rq->target);
	for (const char *h = rq->headers; *h;) {
		const char *e = strstr(h, "\r\n");
		size_t n = e ? (size_t)(e - h) : strlen(h);
		sl_buf_append(&t, h, n);
		sl_buf_putc(&t, '\n');
		h += n + (e ? 2 : 0);
	}
	sl_buf_putc(&t, '\n');
	{
		const unsigned char *p = (const unsigned char *)body.data;
		size_t len = body.len;
		if (printable(p, len)) {
			sl_buf_append(&t, p, len);
			if (len && p[len - 1] != '\n')
				sl_buf_putc(&t, '\n');
		} else {
			for (size_t i = 0; i < len; i += 16) {
				sl_buf_printf(&t, "%04zx ", i);
				for (size_t k = i; k < i + 16; k++) {
					if (k < len)
						sl_buf_printf(&t, " %02x", p[k]);
					else
						sl_buf_puts(&t, "   ");
				}
				sl_buf_puts(&t, "  |");
				for (size_t k = i; k < i + 16 && k < len; k++)
					sl_buf_putc(&t, p[k] >= 0x20 && p[k] < 0x7f ? (char)p[k] : '.');
				sl_buf_puts(&t, "|\n");
			}
		}
	}
	sl_buf_free(&body);
	sl_buf_printf(&t, "-> %d (%zu bytes)\n\n", rs->status, rs->body.len);
	snprintf(port, sizeof port, ":%d", f->port);
	replace_all(&t, port, ":PORT");
	replace_all(&t, "sluice/" PACKAGE_VERSION, "sluice/VERSION");
	if (ctype && (bnd = strstr(ctype, "boundary=")) != NULL)
		replace_all(&t, bnd + 9, "BOUNDARY");
	free(ctype);
	sl_buf_append(&f->transcript, t.data, t.len);
	sl_buf_free(&t);
}

/* Serves one connection until the client closes it. */
static void serve(struct fake_http *f, int fd)
{
	struct sl_buf in;

	sl_buf_init(&in, 0);
	for (;;) {
		struct fake_http_req rq;
		struct fake_http_resp rs;
		char *end, *cl, *te;
		size_t hlen, blen = 0, need;
		bool chunked = false;
		while (!(in.len && (end = strstr(in.data, "\r\n\r\n"))))
			if (fill(f, fd, &in) <= 0)
				goto out;
		hlen = (size_t)(end - in.data) + 4;
		memset(&rq, 0, sizeof rq);
		{
			char *sp1 = strchr(in.data, ' '), *sp2 = sp1 ? strchr(sp1 + 1, ' ') : NULL;
			char *eol = strstr(in.data, "\r\n");
			if (!sp1 || !sp2 || sp2 > eol)
				goto out;
			snprintf(rq.method, sizeof rq.method, "%.*s", (int)(sp1 - in.data), in.data);
			rq.target = strndup(sp1 + 1, (size_t)(sp2 - sp1 - 1));
			rq.headers = strndup(eol + 2, (size_t)(end + 2 - (eol + 2)));
		}
		cl = fake_http_header(&rq, "Content-Length");
		te = fake_http_header(&rq, "Transfer-Encoding");
		if (cl)
			blen = strtoul(cl, NULL, 10);
		chunked = te && strcasecmp(te, "chunked") == 0;
		free(cl);
		free(te);
		if (chunked) {
			/* size line, data, CRLF ... 0 CRLF CRLF */
			struct sl_buf body;
			size_t pos = hlen;
			sl_buf_init(&body, 0);
			for (;;) {
				char *eol;
				size_t sz;
				while (!((eol = memmem(in.data + pos, in.len - pos, "\r\n", 2))))
					if (fill(f, fd, &in) <= 0)
						goto out;
				sz = strtoul(in.data + pos, NULL, 16);
				pos = (size_t)(eol - in.data) + 2;
				while (in.len < pos + sz + 2)
					if (fill(f, fd, &in) <= 0)
						goto out;
				sl_buf_append(&body, in.data + pos, sz);
				pos += sz + 2;
				if (sz == 0)
					break;
			}
			rq.body = (unsigned char *)body.data;
			rq.len = body.len;
			need = pos;
		} else {
			while (in.len < hlen + blen)
				if (fill(f, fd, &in) <= 0)
					goto out;
			rq.body = malloc(blen + 1);
			memcpy(rq.body, in.data + hlen, blen);
			rq.len = blen;
			need = hlen + blen;
		}
		memset(&rs, 0, sizeof rs);
		rs.status = 200;
		sl_buf_init(&rs.body, 0);
		pthread_mutex_lock(&f->mu);
		f->handler(f->arg, &rq, &rs);
		record(f, &rq, &rs);
		f->count++;
		pthread_mutex_unlock(&f->mu);
		{
			/* one write: two would meet Nagle and delayed ACKs (40 ms each) */
			struct sl_buf out;
			sl_buf_init(&out, 0);
			sl_buf_printf(&out, "HTTP/1.1 %d X\r\nContent-Length: %zu\r\n%s\r\n", rs.status, rs.body.len,
				      rs.close ? "Connection: close\r\n" : "");
			sl_buf_append(&out, rs.body.data, rs.body.len);
			write_all(fd, out.data, out.len);
			sl_buf_free(&out);
		}
		free(rq.target);
		free(rq.headers);
		free(rq.body);
		sl_buf_free(&rs.body);
		memmove(in.data, in.data + need, in.len - need);
		in.len -= need;
		in.data[in.len] = '\0';
		if (rs.close)
			break;
	}
out:
	sl_buf_free(&in);
	close(fd);
}

static void *run(void *arg)
{
	struct fake_http *f = arg;

	for (;;) {
		struct pollfd p[2] = { { f->lfd, POLLIN, 0 }, { f->stop[0], POLLIN, 0 } };
		int fd;
		if (poll(p, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		if (p[1].revents)
			break;
		fd = accept(f->lfd, NULL, NULL);
		if (fd >= 0)
			serve(f, fd);
	}
	return NULL;
}

struct fake_http *fake_http_start(fake_http_handler h, void *arg)
{
	struct fake_http *f = calloc(1, sizeof *f);
	struct sockaddr_in a;
	socklen_t alen = sizeof a;
	int one = 1;

	if (!f)
		die("calloc");
	f->handler = h;
	f->arg = arg;
	sl_buf_init(&f->transcript, 0);
	pthread_mutex_init(&f->mu, NULL);
	if ((f->lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0)
		die("socket");
	setsockopt(f->lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
	memset(&a, 0, sizeof a);
	a.sin_family = AF_INET;
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (bind(f->lfd, (struct sockaddr *)&a, sizeof a) < 0 || listen(f->lfd, 8) < 0 ||
	    getsockname(f->lfd, (struct sockaddr *)&a, &alen) < 0)
		die("bind");
	f->port = ntohs(a.sin_port);
	snprintf(f->url, sizeof f->url, "http://127.0.0.1:%d", f->port);
	if (pipe(f->stop) < 0)
		die("pipe");
	if (pthread_create(&f->thread, NULL, run, f) != 0)
		die("pthread_create");
	return f;
}

int fake_http_port(const struct fake_http *f)
{
	return f->port;
}

const char *fake_http_url(const struct fake_http *f)
{
	return f->url;
}

void fake_http_stop(struct fake_http *f)
{
	if (!f)
		return;
	write_all(f->stop[1], "x", 1);
	pthread_join(f->thread, NULL);
	close(f->lfd);
	close(f->stop[0]);
	close(f->stop[1]);
	sl_buf_free(&f->transcript);
	pthread_mutex_destroy(&f->mu);
	free(f);
}

void fake_http_lock(struct fake_http *f)
{
	pthread_mutex_lock(&f->mu);
}

void fake_http_unlock(struct fake_http *f)
{
	pthread_mutex_unlock(&f->mu);
}

const char *fake_http_transcript(struct fake_http *f)
{
	const char *s;

	pthread_mutex_lock(&f->mu);
	s = f->transcript.data ? f->transcript.data : "";
	pthread_mutex_unlock(&f->mu);
	return s;
}

void fake_http_clear(struct fake_http *f)
{
	pthread_mutex_lock(&f->mu);
	sl_buf_reset(&f->transcript);
	f->count = 0;
	pthread_mutex_unlock(&f->mu);
}

int fake_http_count(struct fake_http *f)
{
	int n;

	pthread_mutex_lock(&f->mu);
	n = f->count;
	pthread_mutex_unlock(&f->mu);
	return n;
}

static int hexval(int c)
{
	return isdigit(c) ? c - '0' : tolower(c) - 'a' + 10;
}

char *fake_http_param(const char *target, const char *name)
{
	const char *q = strchr(target, '?');
	size_t n = strlen(name);

	while (q) {
		const char *p = q + 1, *end = p + strcspn(p, "&");
		if ((size_t)(end - p) > n && !strncmp(p, name, n) && p[n] == '=') {
			struct sl_buf b;
			sl_buf_init(&b, 0);
			for (p += n + 1; p < end; p++) {
				if (*p == '%' && p + 2 < end + 1 && isxdigit((unsigned char)p[1]) &&
				    isxdigit((unsigned char)p[2])) {
					sl_buf_putc(&b, (char)(hexval(p[1]) * 16 + hexval(p[2])));
					p += 2;
				} else {
					sl_buf_putc(&b, *p == '+' ? ' ' : *p);
				}
			}
			sl_buf_putc(&b, '\0');
			return sl_buf_detach(&b);
		}
		q = *end ? end : NULL;
	}
	return NULL;
}

char *fake_http_header(const struct fake_http_req *rq, const char *name)
{
	size_t n = strlen(name);

	for (const char *h = rq->headers; h && *h;) {
		const char *e = strstr(h, "\r\n");
		size_t len = e ? (size_t)(e - h) : strlen(h);
		if (len > n && strncasecmp(h, name, n) == 0 && h[n] == ':') {
			const char *v = h + n + 1;
			while (*v == ' ')
				v++;
			return strndup(v, len - (size_t)(v - h));
		}
		h += len + (e ? 2 : 0);
	}
	return NULL;
}

/* Writes text to "<path>.actual" for review, and says so. */
static void golden_actual(const char *path, const char *text)
{
	char actual[4200];
	FILE *fp;

	snprintf(actual, sizeof actual, "%s.actual", path);
	fp = fopen(actual, "w");
	if (!fp || fputs(text, fp) < 0 || fclose(fp) != 0) {
		fprintf(stderr, "# could not write %s: %s\n", actual, strerror(errno));
		return;
	}
	fprintf(stderr, "# wrote what the code gives to %s: review it, and copy it over %s if it is right\n",
		actual, path);
}

int fake_http_golden(const char *name, const char *text)
{
	const char *top = getenv("SLUICE_TOP_SRCDIR");
	char path[4096];
	FILE *fp;
	struct sl_buf want;
	char tmp[4096];
	size_t n, line = 1;

	snprintf(path, sizeof path, "%s/tests/unit/golden/%s", top ? top : ".", name);
	if (getenv("SLUICE_UPDATE_GOLDEN")) {
		/* Never rewrites the reviewed file: what the code gives goes
		 * beside it for a person to review and copy, and the test fails. */
		golden_actual(path, text);
		return -1;
	}
	fp = fopen(path, "r");
	if (!fp) {
		fprintf(stderr, "# cannot read %s: %s (SLUICE_UPDATE_GOLDEN=1 writes what the code gives beside it, as .actual)\n", path, strerror(errno));
		return -1;
	}
	sl_buf_init(&want, 0);
	while ((n = fread(tmp, 1, sizeof tmp, fp)) > 0)
		sl_buf_append(&want, tmp, n);
	fclose(fp);
	sl_buf_putc(&want, '\0');
	if (strcmp(want.data, text) == 0) {
		sl_buf_free(&want);
		return 0;
	}
	for (size_t i = 0; want.data[i] || text[i]; i++) {
		if (want.data[i] != text[i]) {
			const char *a = want.data + i, *b = text + i;
			while (a > want.data && a[-1] != '\n')
				a--;
			while (b > text && b[-1] != '\n')
				b--;
			fprintf(stderr, "# %s differs at line %zu:\n#   want: %.*s\n#   got:  %.*s\n", name, line,
				(int)strcspn(a, "\n"), a, (int)strcspn(b, "\n"), b);
			break;
		}
		if (text[i] == '\n')
			line++;
	}
	sl_buf_free(&want);
	golden_actual(path, text);
	return -1;
}
