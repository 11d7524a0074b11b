/*
 * tests/unit/fake_http.h: a tiny HTTP/1.1 server on a loopback port for the
 * unit tests of HTTP clients (the clickhouse sink).  It serves one
 * connection at a time, with keep-alive, from its own thread; every request
 * goes to the test's handler, which fills the response, and into a
 * transcript that a test compares with a recorded expectation.
 *
 * The transcript shows each request as it came, normalized so that it does
 * not depend on the run: the port in Host becomes PORT, "sluice/<version>"
 * in User-Agent becomes sluice/VERSION, and a multipart boundary becomes
 * BOUNDARY.  A body is shown as text when it is printable, else as a hex
 * dump (16 bytes a line, with an ASCII column); then the response status.
 * Request headers are kept in their order; none holds a date.
 */
#ifndef SLUICE_TESTS_FAKE_HTTP_H
#define SLUICE_TESTS_FAKE_HTTP_H

#include <stdbool.h>
#include <stddef.h>

#include "common/buf.h"

struct fake_http_req {
	char method[16];
	char *target;              /* "/?query=..." */
	char *headers;             /* "Name: value\r\n" lines, as received */
	unsigned char *body;       /* dechunked, not decompressed */
	size_t len;
};

struct fake_http_resp {
	int status;                /* default 200 */
	struct sl_buf body;        /* empty by default */
	bool close;                /* close the connection after the response */
};

/* Called for each request, on the server's thread, with the server's lock
 * held (the test reads shared state under fake_http_lock()). */
typedef void (*fake_http_handler)(void *arg, const struct fake_http_req *rq, struct fake_http_resp *rs);

struct fake_http;

/* Starts the server on 127.0.0.1 and a port the kernel picks.  Aborts the
 * test program when it cannot. */
struct fake_http *fake_http_start(fake_http_handler h, void *arg);
int fake_http_port(const struct fake_http *f);
/* "http://127.0.0.1:<port>" (static storage in f). */
const char *fake_http_url(const struct fake_http *f);
void fake_http_stop(struct fake_http *f);

void fake_http_lock(struct fake_http *f);
void fake_http_unlock(struct fake_http *f);

/* The transcript so far (see above), NUL-terminated; and its reset. */
const char *fake_http_transcript(struct fake_http *f);
void fake_http_clear(struct fake_http *f);
/* Requests served so far. */
int fake_http_count(struct fake_http *f);

/* The value of URL parameter name in target, decoded (malloc'd), or NULL. */
char *fake_http_param(const char *target, const char *name);
/* The value of header name (case-insensitive), malloc'd, or NULL. */
char *fake_http_header(const struct fake_http_req *rq, const char *name);

/* Compares text with the golden file tests/unit/golden/<name> under
 * $SLUICE_TOP_SRCDIR; with SLUICE_UPDATE_GOLDEN=1 in the environment it
 * writes the file instead.  Returns 0 when equal (or written); otherwise
 * prints the first differing line and returns -1. */
int fake_http_golden(const char *name, const char *text);

#endif
