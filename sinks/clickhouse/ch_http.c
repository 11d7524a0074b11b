/*
 * sinks/clickhouse/ch_http.c: the ClickHouse sink's HTTP client (see
 * ch_http.h).
 */
#include "sinks/clickhouse/ch_http.h"

#include <curl/curl.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <time.h>
#include <zlib.h>

#include "common/log.h"
#include "common/util.h"
#include "sinks/clickhouse/ch_sql.h"


struct ch_http {
	CURL *curl;
	char *base;                 /* the URL up to the query string, ending in '/' */
	struct ch_http_conf c;
	struct curl_slist *hdr_plain, *hdr_gzip, *hdr_mime;
	z_stream z;
	bool z_ready;
	struct sl_buf gz;           /* the compressed body */
	struct sl_buf url;
	char errbuf[CURL_ERROR_SIZE];
	struct ch_resp *cur;        /* the response being read */
	size_t cap;                 /* the largest response body */
	struct ch_http_stats stats;
};

void ch_resp_init(struct ch_resp *r)
{
	memset(r, 0, sizeof *r);
	sl_buf_init(&r->body, CH_RESP_CAP);
}

void ch_resp_free(struct ch_resp *r)
{
	sl_buf_free(&r->body);
}

static size_t on_body(char *p, size_t size, size_t n, void *arg)
{
	struct ch_http *h = arg;

	if (h->cur->body.len + size * n > h->cap || sl_buf_append(&h->cur->body, p, size * n) < 0) {
		h->cur->overflow = true;
		return 0;  /* CURLE_WRITE_ERROR */
	}
	return size * n;
}

/* X-ClickHouse-Exception-Code (ClickHouse 19.x and later; 18.16 puts the
 * code only in the body). */
static size_t on_header(char *p, size_t size, size_t n, void *arg)
{
	struct ch_http *h = arg;
	static const char name[] = "X-ClickHouse-Exception-Code:";
	size_t len = size * n, k = sizeof name - 1;

	if (len > k && strncasecmp(p, name, k) == 0) {
		int code = 0;
		for (size_t i = k; i < len && code < 100000; i++) {
			if (p[i] >= '0' && p[i] <= '9')
				code = code * 10 + (p[i] - '0');
			else if (p[i] != ' ')
				break;
		}
		h->cur->code = code;
	}
	return len;
}

int ch_http_new(struct ch_http **out, const struct ch_http_conf *c, char *err, size_t errlen)
{
	struct ch_http *h;
	size_t n;

	*out = NULL;
	if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
		snprintf(err, errlen, "clickhouse: could not initialise libcurl");
		return -1;
	}
	h = calloc(1, sizeof *h);
	if (!h)
		goto oom;
	h->c = *c;
	if (h->c.backoff_min_ms <= 0)
		h->c.backoff_min_ms = 100;
	if (h->c.backoff_max_ms <= 0)
		h->c.backoff_max_ms = 5000;
	h->cap = c->response_cap ? c->response_cap : CH_RESP_CAP;
	sl_buf_init(&h->gz, 0);
	sl_buf_init(&h->url, 0);
	n = strlen(c->url);
	while (n > 0 && c->url[n - 1] == '/')
		n--;
	if (!(h->base = malloc(n + 2)))
		goto oom;
	memcpy(h->base, c->url, n);
	h->base[n] = '/';
	h->base[n + 1] = '\0';
	if (!(h->curl = curl_easy_init())) {
		snprintf(err, errlen, "clickhouse: could not make a libcurl handle");
		goto fail;
	}
	/* "Expect:" with no value: libcurl would otherwise wait for a
	 * "100 Continue" before sending a body over 1 MB. */
	h->hdr_plain = curl_slist_append(NULL, "Expect:");
	h->hdr_gzip = curl_slist_append(NULL, "Expect:");
	h->hdr_mime = curl_slist_append(NULL, "Expect:");
	/* A body is rows or a statement, never a form: without this libcurl
	 * would label it application/x-www-form-urlencoded. */
	if (h->hdr_plain)
		h->hdr_plain = curl_slist_append(h->hdr_plain, "Content-Type: application/octet-stream");
	if (h->hdr_gzip)
		h->hdr_gzip = curl_slist_append(h->hdr_gzip, "Content-Type: application/octet-stream");
	if (h->hdr_gzip)
		h->hdr_gzip = curl_slist_append(h->hdr_gzip, "Content-Encoding: gzip");
	if (!h->hdr_plain || !h->hdr_plain->next || !h->hdr_gzip || !h->hdr_gzip->next ||
	    !h->hdr_gzip->next->next || !h->hdr_mime)
		goto oom;
	curl_easy_setopt(h->curl, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(h->curl, CURLOPT_ERRORBUFFER, h->errbuf);
	curl_easy_setopt(h->curl, CURLOPT_USERAGENT, "sluice/" PACKAGE_VERSION);
	curl_easy_setopt(h->curl, CURLOPT_CONNECTTIMEOUT_MS, c->connect_timeout_ms);
	curl_easy_setopt(h->curl, CURLOPT_TIMEOUT_MS, c->timeout_ms);
	curl_easy_setopt(h->curl, CURLOPT_TCP_KEEPALIVE, 1L);
	curl_easy_setopt(h->curl, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(h->curl, CURLOPT_FOLLOWLOCATION, 0L);
	curl_easy_setopt(h->curl, CURLOPT_SSL_VERIFYPEER, c->verify ? 1L : 0L);
	curl_easy_setopt(h->curl, CURLOPT_SSL_VERIFYHOST, c->verify ? 2L : 0L);
	if (c->ca_file)
		curl_easy_setopt(h->curl, CURLOPT_CAINFO, c->ca_file);
	if (c->user) {
		curl_easy_setopt(h->curl, CURLOPT_HTTPAUTH, (long)CURLAUTH_BASIC);
		curl_easy_setopt(h->curl, CURLOPT_USERNAME, c->user);
		curl_easy_setopt(h->curl, CURLOPT_PASSWORD, c->password ? c->password : "");
	}
	curl_easy_setopt(h->curl, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(h->curl, CURLOPT_WRITEDATA, h);
	curl_easy_setopt(h->curl, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(h->curl, CURLOPT_HEADERDATA, h);
	if (c->gzip) {
		if (deflateInit2(&h->z, 1, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
			snprintf(err, errlen, "clickhouse: could not initialise zlib");
			goto fail;
		}
		h->z_ready = true;
	}
	*out = h;
	return 0;
oom:
	snprintf(err, errlen, "clickhouse: out of memory");
fail:
	ch_http_free(h);
	return -1;
}

void ch_http_free(struct ch_http *h)
{
	if (!h)
		return;
	if (h->curl)
		curl_easy_cleanup(h->curl);
	curl_slist_free_all(h->hdr_plain);
	curl_slist_free_all(h->hdr_gzip);
	curl_slist_free_all(h->hdr_mime);
	if (h->z_ready)
		deflateEnd(&h->z);
	sl_buf_free(&h->gz);
	sl_buf_free(&h->url);
	free(h->base);
	free(h);
}

/* Compresses len bytes at p into h->gz as one gzip member.  0 or -1. */
static int gzip_body(struct ch_http *h, const void *p, size_t len)
{
	uLong bound = deflateBound(&h->z, (uLong)len);
	int zrc;

	if (deflateReset(&h->z) != Z_OK)
		return -1;
	sl_buf_reset(&h->gz);
	if (sl_buf_reserve(&h->gz, (size_t)bound + 32) < 0)
		return -1;
	h->z.next_in = (Bytef *)(uintptr_t)p;
	h->z.avail_in = (uInt)len;
	h->z.next_out = (Bytef *)h->gz.data;
	h->z.avail_out = (uInt)(h->gz.alloc - 1);
	zrc = deflate(&h->z, Z_FINISH);
	if (zrc != Z_STREAM_END)
		return -1;
	h->gz.len = (size_t)(h->z.next_out - (Bytef *)h->gz.data);
	return 0;
}

/* libcurl errors that another try cannot mend: the server's certificate
 * refused, a TLS file that cannot be read, a URL or protocol libcurl
 * refuses.  Every other one (refused or reset connections, timeouts, name
 * resolution, a TLS handshake cut short) may be the server restarting. */
static bool curl_fatal(CURLcode cc)
{
	switch (cc) {
	case CURLE_PEER_FAILED_VERIFICATION:
	case CURLE_SSL_CACERT_BADFILE:
	case CURLE_SSL_CERTPROBLEM:
	case CURLE_SSL_CIPHER:
	case CURLE_SSL_ENGINE_NOTFOUND:
	case CURLE_SSL_ENGINE_SETFAILED:
	case CURLE_SSL_ISSUER_ERROR:
	case CURLE_SSL_PINNEDPUBKEYNOTMATCH:
	case CURLE_SSL_CRL_BADFILE:
	case CURLE_URL_MALFORMAT:
	case CURLE_UNSUPPORTED_PROTOCOL:
	case CURLE_NOT_BUILT_IN:
	case CURLE_OUT_OF_MEMORY:
		return true;
	default:
		return false;
	}
}

int ch_http_do(struct ch_http *h, const struct ch_req *rq, struct ch_resp *rs)
{
	curl_mime *mime = NULL;
	const void *body = rq->body;
	size_t len = rq->len;
	bool gz = false;
	CURLcode cc;
	int rc = -1;

	sl_buf_reset(&rs->body);
	rs->status = 0;
	rs->code = 0;
	rs->fatal = false;
	rs->overflow = false;
	rs->error[0] = '\0';
	h->errbuf[0] = '\0';
	h->cur = rs;

	sl_buf_reset(&h->url);
	sl_buf_puts(&h->url, h->base);
	sl_buf_putc(&h->url, '?');
	if (rq->params)
		sl_buf_puts(&h->url, rq->params);
	if (rq->query) {
		char *q = curl_easy_escape(h->curl, rq->query, (int)strlen(rq->query));
		if (!q) {
			snprintf(rs->error, sizeof rs->error, "out of memory");
			rs->fatal = true;
			goto out;
		}
		sl_buf_puts(&h->url, rq->params ? "&query=" : "query=");
		sl_buf_puts(&h->url, q);
		curl_free(q);
	}
	if (rq->ext_name) {
		char *s = curl_easy_escape(h->curl, rq->ext_structure, (int)strlen(rq->ext_structure));
		if (!s) {
			snprintf(rs->error, sizeof rs->error, "out of memory");
			rs->fatal = true;
			goto out;
		}
		sl_buf_printf(&h->url, "&%s_structure=%s&%s_format=RowBinary", rq->ext_name, s, rq->ext_name);
		curl_free(s);
	}
	if (sl_buf_failed(&h->url)) {
		snprintf(rs->error, sizeof rs->error, "out of memory");
		rs->fatal = true;
		goto out;
	}
	curl_easy_setopt(h->curl, CURLOPT_URL, h->url.data);
	if (rq->ext_name) {
		curl_mimepart *part;
		mime = curl_mime_init(h->curl);
		part = mime ? curl_mime_addpart(mime) : NULL;
		if (!part || curl_mime_name(part, rq->ext_name) != CURLE_OK ||
		    curl_mime_filename(part, rq->ext_name) != CURLE_OK ||
		    curl_mime_data(part, rq->ext_data, rq->ext_len) != CURLE_OK) {
			snprintf(rs->error, sizeof rs->error, "out of memory");
			rs->fatal = true;
			goto out;
		}
		curl_easy_setopt(h->curl, CURLOPT_MIMEPOST, mime);
		curl_easy_setopt(h->curl, CURLOPT_HTTPHEADER, h->hdr_mime);
		h->stats.bytes_raw += rq->ext_len;
		h->stats.bytes_sent += rq->ext_len;
	} else {
		if (h->z_ready && len >= CH_GZIP_MIN) {
			if (gzip_body(h, body, len) < 0) {
				snprintf(rs->error, sizeof rs->error, "could not compress the body");
				rs->fatal = true;
				goto out;
			}
			body = h->gz.data;
			len = h->gz.len;
			gz = true;
		}
		curl_easy_setopt(h->curl, CURLOPT_MIMEPOST, NULL);
		curl_easy_setopt(h->curl, CURLOPT_POST, 1L);
		curl_easy_setopt(h->curl, CURLOPT_POSTFIELDS, body ? body : "");
		curl_easy_setopt(h->curl, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
		curl_easy_setopt(h->curl, CURLOPT_HTTPHEADER, gz ? h->hdr_gzip : h->hdr_plain);
		h->stats.bytes_raw += rq->len;
		h->stats.bytes_sent += len;
	}
	h->stats.requests++;
	cc = curl_easy_perform(h->curl);
	if (cc != CURLE_OK) {
		if (rs->overflow)
			snprintf(rs->error, sizeof rs->error, "the response is larger than %zu bytes", h->cap);
		else
			snprintf(rs->error, sizeof rs->error, "%s", h->errbuf[0] ? h->errbuf : curl_easy_strerror(cc));
		rs->fatal = rs->overflow || curl_fatal(cc);
		goto out;
	}
	curl_easy_getinfo(h->curl, CURLINFO_RESPONSE_CODE, &rs->status);
	if (!rs->code && (rs->status < 200 || rs->status > 299))
		rs->code = ch_exception_code(rs->body.data ? rs->body.data : "", rs->body.len);
	rc = 0;
out:
	if (mime) {
		curl_easy_setopt(h->curl, CURLOPT_MIMEPOST, NULL);
		curl_mime_free(mime);
	}
	h->cur = NULL;
	return rc;
}

static uint32_t rand32(void)
{
	uint32_t r;

	if (getrandom(&r, sizeof r, GRND_NONBLOCK) != (ssize_t)sizeof r) {
		struct timespec ts;
		clock_gettime(CLOCK_MONOTONIC, &ts);
		r = (uint32_t)ts.tv_nsec * 2654435761u;
	}
	return r;
}

static void sleep_ms(int64_t ms)
{
	struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

/* The first line of an error body, at most 300 bytes, for messages. */
static void first_line(const struct ch_resp *rs, char *out, size_t len)
{
	size_t n = 0;
	const char *p = rs->body.data ? rs->body.data : "";

	while (n < rs->body.len && n < 300 && p[n] != '\n' && p[n] != '\r')
		n++;
	snprintf(out, len, "%.*s", (int)n, p);
}

int ch_http_run(struct ch_http *h, const struct ch_req *rq, struct ch_resp *rs, const char *what,
		char *err, size_t errlen)
{
	int64_t deadline = sl_mono_ms() + h->c.retry_ms;
	int64_t pause = h->c.backoff_min_ms;
	char why[400];

	for (unsigned attempt = 1;; attempt++) {
		enum ch_errclass cls;
		int64_t now, wait;

		if (ch_http_do(h, rq, rs) < 0) {
			cls = rs->fatal ? CH_ERR_FATAL : CH_ERR_RETRY;
			snprintf(why, sizeof why, "%s", rs->error);
		} else if (rs->status >= 200 && rs->status <= 299) {
			sl_outage_ok(h->c.outage);
			return CH_RUN_OK;
		} else {
			char line[320];
			first_line(rs, line, sizeof line);
			cls = ch_classify(rs->status, rs->code);
			snprintf(why, sizeof why, "HTTP %ld: %s", rs->status, line[0] ? line : "(no message)");
		}
		if (cls == CH_ERR_RETRY && h->c.outage) {
			char cause[800];
			snprintf(cause, sizeof cause, "clickhouse: %s: %s", what, why);
			sl_outage_fail(h->c.outage, cause);
		} else if (rs->status)
			sl_outage_ok(h->c.outage);   /* it answered */
		if (cls == CH_ERR_DATA) {
			snprintf(err, errlen, "clickhouse: %s: %s", what, why);
			return CH_RUN_DATA;
		}
		if (cls == CH_ERR_FATAL || cls == CH_ERR_PREREQ) {
			snprintf(err, errlen, "clickhouse: %s failed: %s", what, why);
			return cls == CH_ERR_PREREQ ? CH_RUN_REFUSED : CH_RUN_FAILED;
		}
		now = sl_mono_ms();
		if (now >= deadline) {
			snprintf(err, errlen, "clickhouse: %s failed after %u attempts in %" PRId64 " s: %s",
				 what, attempt, h->c.retry_ms / 1000, why);
			return CH_RUN_FAILED;
		}
		/* The upper half of the current pause, at random; never past the deadline. */
		wait = pause / 2 + (int64_t)(rand32() % (uint32_t)(pause / 2 + 1));
		if (wait > deadline - now)
			wait = deadline - now;
		/* With an outage account, it logs the outage; each try is a detail. */
		if (!h->c.outage && (attempt & (attempt - 1)) == 0)  /* the 1st, 2nd, 4th, 8th, ... */
			sl_warn("clickhouse: %s failed (%s); retrying in %" PRId64 " ms (attempt %u)", what, why,
				wait, attempt);
		else
			sl_debug("clickhouse: %s failed (%s); retrying in %" PRId64 " ms (attempt %u)", what, why,
				 wait, attempt);
		h->stats.retries++;
		sleep_ms(wait);
		pause = pause * 2 > h->c.backoff_max_ms ? h->c.backoff_max_ms : pause * 2;
	}
}

void ch_http_get_stats(const struct ch_http *h, struct ch_http_stats *out)
{
	*out = h->stats;
}
