/*
 * sinks/s3/s3_client.c: S3 REST calls over libcurl with its built-in SigV4
 * (see s3_client.h for what is signed, retried and reported).
 *
 * One request is one struct req run by request(): the URL from the key and a
 * canonical query, the body from memory or from a file through
 * CURLOPT_READFUNCTION (pread, so a retry starts the body over at no cost),
 * the response body into a buffer or a file, the ETag header kept.  XML
 * answers are small and regular, so a tag scanner reads them (xml_*); no
 * XML library is needed.
 */
#include "sinks/s3/s3_client.h"

#include <curl/curl.h>
#include <errno.h>
#include <inttypes.h>
#include <nettle/sha2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#include "common/secret.h"
#include "common/util.h"

#define MAX_ERROR_BODY (64 * 1024)
#define MAX_LIST_BODY (16 * 1024 * 1024)
#define BACKOFF_FIRST_MS 500
#define BACKOFF_MAX_MS 30000
#define UPLOAD_BUFFER_BYTES (512L * 1024)  /* CURLOPT_UPLOAD_BUFFERSIZE (libcurl: 64 KB) */

struct sl_s3 {
	CURL *curl;
	char *base;          /* "https://host[:port]/bucket" (path style) or "https://bucket.host[:port]" */
	char *bucket;
	char *desc;          /* "bucket \"b\" at https://host" */
	char *sigv4;         /* "aws:amz:<region>:s3" */
	char *access_key_id;
	char *secret;        /* wiped on free */
	char *token_header;  /* "x-amz-security-token: ...", wiped on free; or NULL */
	char *user_agent;
	char *ca_file;
	bool tls_verify;
	long connect_timeout_s, stall_timeout_s;
	int max_attempts;
	struct sl_outage *outage;   /* borrowed, or NULL */
};

/* ---------------------------------------------------------------------- */
/* Helpers                                                                */

void sl_s3_sha256_hex(const void *data, size_t len, char out[65])
{
	struct sha256_ctx c;
	uint8_t d[SHA256_DIGEST_SIZE];

	sha256_init(&c);
	sha256_update(&c, len, data);
	sha256_digest(&c, sizeof d, d);
	for (int i = 0; i < SHA256_DIGEST_SIZE; i++)
		snprintf(out + 2 * i, 3, "%02x", d[i]);
}

void sl_s3_encode(struct sl_buf *out, const char *s, bool slash)
{
	static const char hex[] = "0123456789ABCDEF";

	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		unsigned char c = *p;
		if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
		    c == '_' || c == '.' || c == '~' || (slash && c == '/')) {
			sl_buf_putc(out, (char)c);
		} else {
			char e[3] = { '%', hex[c >> 4], hex[c & 15] };
			sl_buf_append(out, e, 3);
		}
	}
}

/* Finds the next <tag>...</tag> in [*p, end); *val and *len receive the raw
 * content and *p moves past the closing tag.  Returns false if none. */
static bool xml_next(const char **p, const char *end, const char *tag, const char **val, size_t *len)
{
	char open[64], close[64];
	size_t lo = (size_t)snprintf(open, sizeof open, "<%s>", tag);
	size_t lc = (size_t)snprintf(close, sizeof close, "</%s>", tag);
	const char *a = *p, *b;

	for (;;) {
		a = memmem(a, (size_t)(end - a), open, lo);
		if (!a)
			return false;
		a += lo;
		b = memmem(a, (size_t)(end - a), close, lc);
		if (!b)
			return false;
		*val = a;
		*len = (size_t)(b - a);
		*p = b + lc;
		return true;
	}
}

/* Appends the XML text [s, s+n) to out with its entities decoded. */
static void xml_text(struct sl_buf *out, const char *s, size_t n)
{
	static const struct { const char *ent; char c; } ents[] = {
		{ "&amp;", '&' }, { "&lt;", '<' }, { "&gt;", '>' }, { "&quot;", '"' }, { "&apos;", '\'' },
	};

	for (size_t i = 0; i < n;) {
		bool done = false;
		if (s[i] == '&') {
			for (size_t k = 0; k < sizeof ents / sizeof ents[0] && !done; k++) {
				size_t l = strlen(ents[k].ent);
				if (i + l <= n && !memcmp(s + i, ents[k].ent, l)) {
					sl_buf_putc(out, ents[k].c);
					i += l;
					done = true;
				}
			}
			if (!done && i + 2 < n && s[i + 1] == '#') {
				const char *semi = memchr(s + i, ';', n - i);
				if (semi) {
					char num[16];
					size_t nl = (size_t)(semi - (s + i + 2));
					unsigned long cp;
					if (nl > 0 && nl < sizeof num) {
						memcpy(num, s + i + 2, nl);
						num[nl] = '\0';
						cp = num[0] == 'x' ? strtoul(num + 1, NULL, 16) : strtoul(num, NULL, 10);
						if (cp < 0x80) {
							sl_buf_putc(out, (char)cp);
						} else if (cp < 0x800) {
							sl_buf_putc(out, (char)(0xC0 | (cp >> 6)));
							sl_buf_putc(out, (char)(0x80 | (cp & 0x3F)));
						} else if (cp < 0x10000) {
							sl_buf_putc(out, (char)(0xE0 | (cp >> 12)));
							sl_buf_putc(out, (char)(0x80 | ((cp >> 6) & 0x3F)));
							sl_buf_putc(out, (char)(0x80 | (cp & 0x3F)));
						} else {
							sl_buf_putc(out, (char)(0xF0 | (cp >> 18)));
							sl_buf_putc(out, (char)(0x80 | ((cp >> 12) & 0x3F)));
							sl_buf_putc(out, (char)(0x80 | ((cp >> 6) & 0x3F)));
							sl_buf_putc(out, (char)(0x80 | (cp & 0x3F)));
						}
						i = (size_t)(semi - s) + 1;
						done = true;
					}
				}
			}
		}
		if (!done)
			sl_buf_putc(out, s[i++]);
	}
}

/* The decoded content of the first <tag> in [p, p+len) into out (reset
 * first); false if there is none, or out of memory. */
static bool xml_child(const char *p, size_t len, const char *tag, struct sl_buf *out)
{
	const char *v;
	size_t n;

	sl_buf_reset(out);
	if (!p || !xml_next(&p, p + len, tag, &v, &n))
		return false;
	xml_text(out, v, n);
	sl_buf_append(out, "", 0);
	return !sl_buf_failed(out);
}

/* xml_child of the whole body. */
static bool xml_get(const struct sl_buf *body, const char *tag, struct sl_buf *out)
{
	return xml_child(body->data, body->len, tag, out);
}

static void xml_escape(struct sl_buf *out, const char *s)
{
	for (; *s; s++) {
		switch (*s) {
		case '&': sl_buf_puts(out, "&amp;"); break;
		case '<': sl_buf_puts(out, "&lt;"); break;
		case '>': sl_buf_puts(out, "&gt;"); break;
		default: sl_buf_putc(out, *s);
		}
	}
}

static uint32_t rand32(void)
{
	uint32_t r;

	if (getrandom(&r, sizeof r, 0) != (ssize_t)sizeof r)
		r = (uint32_t)sl_mono_ms() * 2654435761u;
	return r;
}

/* ---------------------------------------------------------------------- */
/* The client                                                             */

int sl_s3_new(struct sl_s3 **out, const struct sl_s3_client_conf *c, char *err, size_t errlen)
{
	struct sl_s3 *s = calloc(1, sizeof *s);
	struct sl_buf b;
	const char *ep = c->endpoint && *c->endpoint ? c->endpoint : NULL;
	char awsep[256];
	const char *scheme_end, *host;
	size_t n;

	*out = NULL;
	if (!s)
		goto oom;
	if (!c->bucket || !*c->bucket || !c->region || !*c->region) {
		snprintf(err, errlen, "s3: bucket and region are required");
		free(s);
		return -1;
	}
	if (!ep) {
		snprintf(awsep, sizeof awsep, "https://s3.%s.amazonaws.com", c->region);
		ep = awsep;
	}
	scheme_end = strstr(ep, "://");
	if (!scheme_end || (strncmp(ep, "http://", 7) != 0 && strncmp(ep, "https://", 8) != 0)) {
		snprintf(err, errlen, "s3: endpoint \"%s\" is not an http:// or https:// URL", ep);
		free(s);
		return -1;
	}
	host = scheme_end + 3;
	n = strlen(host);
	while (n > 0 && host[n - 1] == '/')
		n--;
	sl_buf_init(&b, 0);
	if (c->path_style) {
		sl_buf_printf(&b, "%.*s%.*s/", (int)(host - ep), ep, (int)n, host);
		sl_s3_encode(&b, c->bucket, false);
	} else {
		sl_buf_printf(&b, "%.*s%s.%.*s", (int)(host - ep), ep, c->bucket, (int)n, host);
	}
	if (!(s->base = sl_buf_detach(&b)))
		goto oom;
	sl_buf_printf(&b, "bucket \"%s\" at %.*s%.*s", c->bucket, (int)(host - ep), ep, (int)n, host);
	if (!(s->desc = sl_buf_detach(&b)))
		goto oom;
	sl_buf_printf(&b, "aws:amz:%s:s3", c->region);
	if (!(s->sigv4 = sl_buf_detach(&b)))
		goto oom;
	sl_buf_printf(&b, "%s", c->user_agent ? c->user_agent : "sluice/" PACKAGE_VERSION);
	if (!(s->user_agent = sl_buf_detach(&b)))
		goto oom;
	if (!(s->bucket = strdup(c->bucket)) || !(s->access_key_id = strdup(c->access_key_id ? c->access_key_id : "")) ||
	    !(s->secret = strdup(c->secret_access_key ? c->secret_access_key : "")))
		goto oom;
	if (c->session_token && *c->session_token) {
		sl_buf_printf(&b, "x-amz-security-token: %s", c->session_token);
		if (!(s->token_header = sl_buf_detach(&b)))
			goto oom;
	}
	if (c->ca_file && !(s->ca_file = strdup(c->ca_file)))
		goto oom;
	s->tls_verify = c->tls_verify;
	s->connect_timeout_s = c->connect_timeout_s > 0 ? c->connect_timeout_s : 10;
	s->stall_timeout_s = c->stall_timeout_s > 0 ? c->stall_timeout_s : 60;
	s->max_attempts = c->max_attempts;
	s->outage = c->outage;
	if (!(s->curl = curl_easy_init())) {
		snprintf(err, errlen, "s3: could not start libcurl");
		sl_s3_free(s);
		return -1;
	}
	*out = s;
	return 0;
oom:
	snprintf(err, errlen, "s3: out of memory");
	sl_s3_free(s);
	return -1;
}

void sl_s3_free(struct sl_s3 *s)
{
	if (!s)
		return;
	if (s->curl)
		curl_easy_cleanup(s->curl);
	sl_secret_free(s->secret);
	sl_secret_free(s->token_header);
	free(s->base);
	free(s->bucket);
	free(s->desc);
	free(s->sigv4);
	free(s->access_key_id);
	free(s->user_agent);
	free(s->ca_file);
	free(s);
}

void sl_s3_set_max_attempts(struct sl_s3 *s, int max_attempts)
{
	s->max_attempts = max_attempts;
}

const char *sl_s3_describe(const struct sl_s3 *s)
{
	return s->desc;
}

/* ---------------------------------------------------------------------- */
/* One request                                                            */

struct req {
	const char *call;            /* "PutObject", for messages */
	const char *method;
	const char *key;             /* or NULL: the bucket */
	const char *query;           /* canonical query, or NULL */
	const void *body;            /* body in memory (body_len bytes), or */
	size_t body_len;
	int fd;                      /* body from fd (>= 0), fd_len bytes from fd_off */
	off_t fd_off;
	uint64_t fd_len;
	const char *sha256;          /* hex SHA-256 of the body; NULL: of body/body_len */
	const char *content_type;
	bool if_none_match;          /* PutObject only if the key does not exist */
	struct sl_buf *resp;         /* response body (capped at resp_cap), or NULL */
	size_t resp_cap;
	int out_fd;                  /* or the response body to this fd when >= 0 */
	bool want_etag;
	/* results */
	long status;
	char *etag;                  /* malloc'd, quotes kept */
	/* state */
	uint64_t sent;
	struct sl_buf errbody;       /* a non-2xx body, for the message */
	bool write_failed;
	int write_errno;
};

static size_t read_cb(char *buf, size_t size, size_t nmemb, void *arg)
{
	struct req *r = arg;
	size_t want = size * nmemb;
	uint64_t left = r->fd_len - r->sent;
	ssize_t k;

	if (want > left)
		want = (size_t)left;
	if (want == 0)
		return 0;
	do {
		k = pread(r->fd, buf, want, r->fd_off + (off_t)r->sent);
	} while (k < 0 && errno == EINTR);
	if (k <= 0)
		return CURL_READFUNC_ABORT;
	r->sent += (uint64_t)k;
	return (size_t)k;
}

static int seek_cb(void *arg, curl_off_t offset, int origin)
{
	struct req *r = arg;

	if (origin != SEEK_SET || offset < 0 || (uint64_t)offset > r->fd_len)
		return CURL_SEEKFUNC_CANTSEEK;
	r->sent = (uint64_t)offset;
	return CURL_SEEKFUNC_OK;
}

static size_t write_cb(char *data, size_t size, size_t nmemb, void *arg)
{
	struct req *r = arg;
	size_t n = size * nmemb;

	if (r->status < 200 || r->status >= 300) {
		if (r->errbody.len + n <= MAX_ERROR_BODY)
			sl_buf_append(&r->errbody, data, n);
		return n;
	}
	if (r->out_fd >= 0) {
		size_t done = 0;
		while (done < n) {
			ssize_t k = write(r->out_fd, data + done, n - done);
			if (k < 0 && errno == EINTR)
				continue;
			if (k < 0) {
				r->write_failed = true;
				r->write_errno = errno;
				return 0;
			}
			done += (size_t)k;
		}
		return n;
	}
	if (r->resp) {
		if (r->resp->len + n > r->resp_cap || sl_buf_append(r->resp, data, n) < 0) {
			r->write_failed = true;
			r->write_errno = ENOMEM;
			return 0;
		}
	}
	return n;
}

static size_t header_cb(char *data, size_t size, size_t nmemb, void *arg)
{
	struct req *r = arg;
	size_t n = size * nmemb;

	/* The status line comes first: the body callback needs it. */
	if (n > 9 && !strncmp(data, "HTTP/", 5)) {
		const char *sp = memchr(data, ' ', n);
		if (sp)
			r->status = strtol(sp + 1, NULL, 10);
		if (r->resp && r->status >= 200 && r->status < 300)
			sl_buf_reset(r->resp);
		sl_buf_reset(&r->errbody);
	} else if (r->want_etag && n > 5 && !strncasecmp(data, "etag:", 5)) {
		const char *v = data + 5;
		size_t l = n - 5;
		while (l > 0 && (*v == ' ' || *v == '\t')) {
			v++;
			l--;
		}
		while (l > 0 && (v[l - 1] == '\r' || v[l - 1] == '\n' || v[l - 1] == ' '))
			l--;
		free(r->etag);
		r->etag = strndup(v, l);
	}
	return n;
}

/* The body of a PUT from memory. */
static size_t read_mem_cb(char *buf, size_t size, size_t nmemb, void *arg)
{
	struct req *r = arg;
	size_t want = size * nmemb, left = r->body_len - (size_t)r->sent;

	if (want > left)
		want = left;
	memcpy(buf, (const char *)r->body + r->sent, want);
	r->sent += want;
	return want;
}

static int seek_mem_cb(void *arg, curl_off_t offset, int origin)
{
	struct req *r = arg;

	if (origin != SEEK_SET || offset < 0 || (size_t)offset > r->body_len)
		return CURL_SEEKFUNC_CANTSEEK;
	r->sent = (uint64_t)offset;
	return CURL_SEEKFUNC_OK;
}

/* Whether a failed attempt may succeed if tried again. */
static bool transient_curl(CURLcode c)
{
	switch (c) {
	case CURLE_COULDNT_CONNECT:
	case CURLE_COULDNT_RESOLVE_HOST:
	case CURLE_OPERATION_TIMEDOUT:
	case CURLE_SEND_ERROR:
	case CURLE_RECV_ERROR:
	case CURLE_GOT_NOTHING:
	case CURLE_PARTIAL_FILE:
	case CURLE_SSL_CONNECT_ERROR:
	case CURLE_HTTP2:
	case CURLE_HTTP2_STREAM:
	case CURLE_SEND_FAIL_REWIND:
		return true;
	default:
		return false;
	}
}

static bool transient_status(long st)
{
	return st >= 500 || st == 429 || st == 408;
}

/* One attempt.  Returns the CURLcode; r->status is set. */
static CURLcode attempt(struct sl_s3 *s, struct req *r, struct curl_slist **hdrs, char *errbuf)
{
	CURL *c = s->curl;
	struct sl_buf url, h;
	char sha[65];
	CURLcode rc;

	curl_easy_reset(c);
	r->status = 0;
	r->sent = 0;
	r->write_failed = false;
	free(r->etag);
	r->etag = NULL;
	sl_buf_reset(&r->errbody);
	if (r->resp)
		sl_buf_reset(r->resp);
	sl_buf_init(&url, 0);
	sl_buf_init(&h, 0);
	sl_buf_puts(&url, s->base);
	sl_buf_putc(&url, '/');
	if (r->key)
		sl_s3_encode(&url, r->key, true);
	if (r->query)
		sl_buf_printf(&url, "?%s", r->query);
	if (!r->sha256) {
		sl_s3_sha256_hex(r->body ? r->body : "", r->body ? r->body_len : 0, sha);
		r->sha256 = sha;
	}
	*hdrs = NULL;
	sl_buf_printf(&h, "x-amz-content-sha256: %s", r->sha256);
	*hdrs = curl_slist_append(*hdrs, h.data ? h.data : "");
	if (r->content_type) {
		sl_buf_reset(&h);
		sl_buf_printf(&h, "Content-Type: %s", r->content_type);
		*hdrs = curl_slist_append(*hdrs, h.data ? h.data : "");
	}
	if (s->token_header)
		*hdrs = curl_slist_append(*hdrs, s->token_header);
	if (r->if_none_match)
		*hdrs = curl_slist_append(*hdrs, "If-None-Match: *");
	sl_buf_free(&h);
	if (r->sha256 == sha)
		r->sha256 = NULL;
	if (sl_buf_failed(&url) || !*hdrs) {
		sl_buf_free(&url);
		snprintf(errbuf, CURL_ERROR_SIZE, "out of memory");
		return CURLE_OUT_OF_MEMORY;
	}
	curl_easy_setopt(c, CURLOPT_URL, url.data);
	curl_easy_setopt(c, CURLOPT_ERRORBUFFER, errbuf);
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(c, CURLOPT_USERAGENT, s->user_agent);
	curl_easy_setopt(c, CURLOPT_AWS_SIGV4, s->sigv4);
	curl_easy_setopt(c, CURLOPT_USERNAME, s->access_key_id);
	curl_easy_setopt(c, CURLOPT_PASSWORD, s->secret);
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, *hdrs);
	curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, s->connect_timeout_s);
	curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, 1L);
	curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, s->stall_timeout_s);
	curl_easy_setopt(c, CURLOPT_SSL_VERIFYPEER, s->tls_verify ? 1L : 0L);
	curl_easy_setopt(c, CURLOPT_SSL_VERIFYHOST, s->tls_verify ? 2L : 0L);
	if (s->ca_file)
		curl_easy_setopt(c, CURLOPT_CAINFO, s->ca_file);
	curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, header_cb);
	curl_easy_setopt(c, CURLOPT_HEADERDATA, r);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, write_cb);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, r);
	if (!strcmp(r->method, "PUT")) {
		curl_easy_setopt(c, CURLOPT_UPLOAD, 1L);
		/* larger reads of the body: fewer callbacks and writes per MB */
		curl_easy_setopt(c, CURLOPT_UPLOAD_BUFFERSIZE, UPLOAD_BUFFER_BYTES);
		if (r->fd >= 0) {
			curl_easy_setopt(c, CURLOPT_READFUNCTION, read_cb);
			curl_easy_setopt(c, CURLOPT_READDATA, r);
			curl_easy_setopt(c, CURLOPT_SEEKFUNCTION, seek_cb);
			curl_easy_setopt(c, CURLOPT_SEEKDATA, r);
			curl_easy_setopt(c, CURLOPT_INFILESIZE_LARGE, (curl_off_t)r->fd_len);
		} else {
			curl_easy_setopt(c, CURLOPT_READFUNCTION, read_mem_cb);
			curl_easy_setopt(c, CURLOPT_READDATA, r);
			curl_easy_setopt(c, CURLOPT_SEEKFUNCTION, seek_mem_cb);
			curl_easy_setopt(c, CURLOPT_SEEKDATA, r);
			curl_easy_setopt(c, CURLOPT_INFILESIZE_LARGE, (curl_off_t)r->body_len);
		}
	} else if (!strcmp(r->method, "POST")) {
		curl_easy_setopt(c, CURLOPT_POST, 1L);
		curl_easy_setopt(c, CURLOPT_POSTFIELDS, r->body ? (const char *)r->body : "");
		curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)(r->body ? r->body_len : 0));
	} else if (!strcmp(r->method, "HEAD")) {
		curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
	} else if (strcmp(r->method, "GET") != 0) {
		curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, r->method);
	}
	errbuf[0] = '\0';
	rc = curl_easy_perform(c);
	sl_buf_free(&url);
	return rc;
}

/* The server's error code and message from an S3 error body ("AccessDenied:
 * Access Denied"), or the status line's meaning. */
static void describe_error(struct req *r, char *out, size_t len)
{
	struct sl_buf code, msg;

	sl_buf_init(&code, 0);
	sl_buf_init(&msg, 0);
	if (xml_get(&r->errbody, "Code", &code)) {
		xml_get(&r->errbody, "Message", &msg);
		snprintf(out, len, "HTTP %ld %s%s%s", r->status, code.data, msg.data && *msg.data ? ": " : "",
			 msg.data ? msg.data : "");
	} else {
		snprintf(out, len, "HTTP %ld", r->status);
	}
	sl_buf_free(&code);
	sl_buf_free(&msg);
}

/* The S3 error code of a failed answer into out ("" if none). */
static void error_code(struct req *r, char *out, size_t len)
{
	struct sl_buf code;

	sl_buf_init(&code, 0);
	snprintf(out, len, "%s", xml_get(&r->errbody, "Code", &code) ? code.data : "");
	sl_buf_free(&code);
}

/* Runs r, retrying transient failures.  Returns 0 on 2xx; SL_S3_NOT_FOUND
 * on 404 NoSuchKey / NoSuchUpload when not_found_ok; SL_EPREREQ for 403 and
 * a missing bucket; -1 otherwise, with the message in err. */
static int request(struct sl_s3 *s, struct req *r, bool not_found_ok, char *err, size_t errlen)
{
	char errbuf[CURL_ERROR_SIZE], why[512], code[64];
	int delay_ms = BACKOFF_FIRST_MS, rc = -1;
	const char *what = r->key ? r->key : "";

	sl_buf_init(&r->errbody, 0);
	r->etag = NULL;
	for (int n = 1;; n++) {
		struct curl_slist *hdrs = NULL;
		CURLcode cc;
		bool again;
		int wait;

		cc = attempt(s, r, &hdrs, errbuf);
		curl_slist_free_all(hdrs);
		if (cc == CURLE_OK && r->status >= 200 && r->status < 300) {
			sl_outage_ok(s->outage);
			rc = 0;
			break;
		}
		if (cc != CURLE_OK) {
			if (r->write_failed)
				snprintf(why, sizeof why, "could not keep the answer: %s", sl_strerror(r->write_errno));
			else
				snprintf(why, sizeof why, "%s", errbuf[0] ? errbuf : curl_easy_strerror(cc));
			again = transient_curl(cc) && !r->write_failed;
		} else {
			describe_error(r, why, sizeof why);
			error_code(r, code, sizeof code);
			if (r->status == 404 && !strcmp(code, "NoSuchBucket")) {
				snprintf(err, errlen, "%s: %s %s: the bucket does not exist (%s); create it, or fix "
					 "bucket, endpoint or region", s->desc, r->call, what, why);
				rc = SL_EPREREQ;
				break;
			}
			if (r->status == 404 && not_found_ok) {
				rc = SL_S3_NOT_FOUND;
				break;
			}
			if (r->status == 412 && r->if_none_match) {
				rc = SL_S3_EXISTS;
				break;
			}
			if (r->status == 403 || r->status == 401) {
				snprintf(err, errlen, "%s: %s %s: access refused (%s); check the access key (%s), the "
					 "secret and the bucket's policy", s->desc, r->call, what, why,
					 !strcmp(code, "InvalidAccessKeyId") ? "it is unknown to the server" :
					 !strcmp(code, "SignatureDoesNotMatch") ? "the secret does not match it" :
					 "it may lack a permission");
				rc = SL_EPREREQ;
				break;
			}
			if (r->status == 301 || r->status == 307 || (r->status == 400 && !strcmp(code, "AuthorizationHeaderMalformed"))) {
				snprintf(err, errlen, "%s: %s %s: %s; the bucket is in another region than \"%s\"",
					 s->desc, r->call, what, why, strchr(s->sigv4 + 8, ':') ? s->sigv4 + 8 : "");
				rc = SL_EPREREQ;
				break;
			}
			/* 409 ConditionalRequestConflict: another conditional write
			 * of the key was under way; AWS says to try again. */
			again = transient_status(r->status) || (r->status == 409 && r->if_none_match);
		}
		if (again && s->outage) {
			char cause[800];
			snprintf(cause, sizeof cause, "%s: %s %s: %s", s->desc, r->call, what, why);
			sl_outage_fail(s->outage, cause);
		} else if (cc == CURLE_OK) {
			sl_outage_ok(s->outage);   /* it answered */
		}
		if (!again || (s->max_attempts > 0 && n >= s->max_attempts)) {
			snprintf(err, errlen, "%s: %s %s failed: %s%s", s->desc, r->call, what, why,
				 again ? " (gave up retrying)" : "");
			rc = -1;
			break;
		}
		/* Exponential backoff with jitter: between half and all of the delay. */
		wait = delay_ms / 2 + (int)(rand32() % (uint32_t)(delay_ms / 2 + 1));
		/* With an outage account, it logs the outage; each try is a detail. */
		sl_log(s->outage ? SL_LOG_DEBUG : SL_LOG_WARN, "%s: %s %s failed (attempt %d): %s; retrying in %d.%d s",
		       s->desc, r->call, what, n, why, wait / 1000, wait % 1000 / 100);
		{
			struct timespec ts = { wait / 1000, (long)(wait % 1000) * 1000000L };
			while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
				;
		}
		delay_ms = delay_ms * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : delay_ms * 2;
		if (r->out_fd >= 0 && (ftruncate(r->out_fd, 0) < 0 || lseek(r->out_fd, 0, SEEK_SET) < 0)) {
			snprintf(err, errlen, "%s: %s %s: could not start the download over: %s", s->desc, r->call,
				 what, sl_strerror(errno));
			rc = -1;
			break;
		}
	}
	sl_buf_free(&r->errbody);
	if (rc != 0) {
		free(r->etag);
		r->etag = NULL;
	}
	return rc;
}

static void req_init(struct req *r, const char *call, const char *method, const char *key)
{
	memset(r, 0, sizeof *r);
	r->call = call;
	r->method = method;
	r->key = key;
	r->fd = -1;
	r->out_fd = -1;
}

/* ---------------------------------------------------------------------- */
/* Calls                                                                  */

/* PutObject of a body in memory; if_none_match: only when key does not exist. */
static int put_mem(struct sl_s3 *s, const char *key, const void *data, size_t len, const char *content_type,
		   bool if_none_match, char *err, size_t errlen)
{
	struct req r;
	int rc;

	req_init(&r, "PutObject", "PUT", key);
	r.body = data;
	r.body_len = len;
	r.content_type = content_type;
	r.if_none_match = if_none_match;
	rc = request(s, &r, false, err, errlen);
	free(r.etag);
	return rc;
}

int sl_s3_put(struct sl_s3 *s, const char *key, const void *data, size_t len, const char *content_type,
	      char *err, size_t errlen)
{
	return put_mem(s, key, data, len, content_type, false, err, errlen);
}

int sl_s3_put_new(struct sl_s3 *s, const char *key, const void *data, size_t len, const char *content_type,
		  char *err, size_t errlen)
{
	return put_mem(s, key, data, len, content_type, true, err, errlen);
}

int sl_s3_put_fd(struct sl_s3 *s, const char *key, int fd, off_t off, uint64_t len, const char *sha256,
		 char *err, size_t errlen)
{
	struct req r;
	int rc;

	req_init(&r, "PutObject", "PUT", key);
	r.fd = fd;
	r.fd_off = off;
	r.fd_len = len;
	r.sha256 = sha256;
	r.content_type = "avro/binary";
	rc = request(s, &r, false, err, errlen);
	free(r.etag);
	return rc;
}

int sl_s3_get(struct sl_s3 *s, const char *key, struct sl_buf *out, size_t cap, char *err, size_t errlen)
{
	struct req r;
	struct sl_buf body;
	int rc;

	req_init(&r, "GetObject", "GET", key);
	sl_buf_init(&body, 0);
	r.resp = &body;
	r.resp_cap = cap;
	rc = request(s, &r, true, err, errlen);
	if (rc == 0 && sl_buf_append(out, body.data ? body.data : "", body.len) < 0) {
		snprintf(err, errlen, "%s: GetObject %s: out of memory", s->desc, key);
		rc = -1;
	}
	sl_buf_free(&body);
	return rc;
}

int sl_s3_get_to_fd(struct sl_s3 *s, const char *key, int fd, char *err, size_t errlen)
{
	struct req r;

	req_init(&r, "GetObject", "GET", key);
	r.out_fd = fd;
	return request(s, &r, true, err, errlen);
}

int sl_s3_delete(struct sl_s3 *s, const char *key, char *err, size_t errlen)
{
	struct req r;
	int rc;

	req_init(&r, "DeleteObject", "DELETE", key);
	rc = request(s, &r, true, err, errlen);
	return rc == SL_S3_NOT_FOUND ? 0 : rc;
}

/* Reads n digits of s at *i into *v; false when one is not a digit. */
static bool digits(const char *s, size_t n, size_t *i, size_t count, int *v)
{
	*v = 0;
	for (size_t k = 0; k < count; k++, (*i)++) {
		if (*i >= n || s[*i] < '0' || s[*i] > '9')
			return false;
		*v = *v * 10 + (s[*i] - '0');
	}
	return true;
}

int64_t sl_s3_parse_time(const char *s, size_t n)
{
	static const char sep[] = "--T::";
	int f[6], ms = 0;
	size_t i = 0;

	for (int k = 0; k < 6; k++) {
		if (!digits(s, n, &i, k == 0 ? 4 : 2, &f[k]))
			return -1;
		if (k < 5 && (i >= n || s[i++] != sep[k]))
			return -1;
	}
	if (i < n && s[i] == '.') {
		int scale = 100;
		for (i++; i < n && s[i] >= '0' && s[i] <= '9'; i++, scale /= 10)
			ms += (s[i] - '0') * scale;
	}
	if (i + 1 != n || s[i] != 'Z' || f[1] < 1 || f[1] > 12 || f[2] < 1 || f[2] > 31 || f[3] > 23 || f[4] > 59 ||
	    f[5] > 60)
		return -1;
	return ((sl_days_from_civil(f[0], f[1], f[2]) * 24 + f[3]) * 60 + f[4]) * 60000 + (int64_t)f[5] * 1000 + ms;
}

/* The time in element v (n bytes)'s child tag, in ms since the epoch, or -1. */
static int64_t xml_time(const char *v, size_t n, const char *tag)
{
	const char *cp = v, *tv;
	size_t tn;

	return xml_next(&cp, v + n, tag, &tv, &tn) ? sl_s3_parse_time(tv, tn) : -1;
}

/* A paged listing (ListObjectsV2, ListMultipartUploads): page after page,
 * query writes the page's query from the markers (empty for the first),
 * item takes each <tag> element of the page (its content v, n; <0 stops,
 * err set), and next reads a truncated page's markers for the one after
 * (false when it has none: missing names them).  text is the items'
 * scratch. */
struct lister {
	struct sl_s3 *s;
	const char *op, *tag, *missing;
	struct sl_buf mark[2], text[2];
	void (*query)(struct lister *l, struct sl_buf *q, const char *prefix);
	int (*item)(struct lister *l, const char *v, size_t n, char *err, size_t errlen);
	bool (*next)(struct lister *l, const struct sl_buf *body);
};

/* Runs listing l over prefix to its last page: 0, or -1 with err set. */
static int list_pages(struct lister *l, const char *prefix, char *err, size_t errlen)
{
	struct sl_buf q, body, trunc;
	int rc = 0;

	sl_buf_init(&q, 0);
	sl_buf_init(&body, 0);
	sl_buf_init(&trunc, 0);
	for (int i = 0; i < 2; i++) {
		sl_buf_init(&l->mark[i], 0);
		sl_buf_init(&l->text[i], 0);
	}
	for (;;) {
		struct req r;
		const char *p, *end, *v;
		size_t n;

		sl_buf_reset(&q);
		l->query(l, &q, prefix);
		if (sl_buf_failed(&q)) {
			snprintf(err, errlen, "%s: out of memory", l->s->desc);
			rc = -1;
			break;
		}
		req_init(&r, l->op, "GET", NULL);
		r.query = q.data;
		r.resp = &body;
		r.resp_cap = MAX_LIST_BODY;
		if ((rc = request(l->s, &r, false, err, errlen)) < 0)
			break;
		p = body.data ? body.data : "";
		end = p + body.len;
		while (rc == 0 && xml_next(&p, end, l->tag, &v, &n))
			rc = l->item(l, v, n, err, errlen) < 0 ? -1 : 0;
		if (rc < 0)
			break;
		if (!xml_get(&body, "IsTruncated", &trunc) || strcmp(trunc.data, "true") != 0)
			break;
		if (!l->next(l, &body)) {
			snprintf(err, errlen, "%s: %s %s: a truncated answer without %s", l->s->desc, l->op, prefix,
				 l->missing);
			rc = -1;
			break;
		}
	}
	sl_buf_free(&q);
	sl_buf_free(&body);
	sl_buf_free(&trunc);
	for (int i = 0; i < 2; i++) {
		sl_buf_free(&l->mark[i]);
		sl_buf_free(&l->text[i]);
	}
	return rc;
}

/* Appends "name=VALUE" (VALUE encoded), or nothing when mark is empty. */
static void put_mark(struct sl_buf *q, const char *name, const struct sl_buf *mark)
{
	if (!mark->len)
		return;
	sl_buf_puts(q, name);
	sl_s3_encode(q, mark->data, false);
}

struct object_lister {
	struct lister l;   /* first: the callbacks' l is one of these */
	sl_s3_list_fn fn;
	void *arg;
};

static void objects_query(struct lister *l, struct sl_buf *q, const char *prefix)
{
	put_mark(q, "continuation-token=", &l->mark[0]);
	if (l->mark[0].len)
		sl_buf_putc(q, '&');
	sl_buf_puts(q, "list-type=2&prefix=");
	sl_s3_encode(q, prefix, false);
}

static int objects_item(struct lister *l, const char *v, size_t n, char *err, size_t errlen)
{
	struct object_lister *o = (struct object_lister *)l;
	uint64_t sz = 0;

	if (!xml_child(v, n, "Key", &l->text[0])) {
		if (!sl_buf_failed(&l->text[0]))
			return 0;
		snprintf(err, errlen, "%s: out of memory", l->s->desc);
		return -1;
	}
	if (xml_child(v, n, "Size", &l->text[1]) && sl_parse_u64(l->text[1].data, UINT64_MAX, &sz) < 0)
		sz = 0;
	return o->fn(o->arg, l->text[0].data, sz, xml_time(v, n, "LastModified"));
}

static bool objects_next(struct lister *l, const struct sl_buf *body)
{
	if (!xml_get(body, "NextContinuationToken", &l->mark[0]))
		return false;
	l->mark[0].len = strlen(l->mark[0].data);
	return true;
}

int sl_s3_list(struct sl_s3 *s, const char *prefix, sl_s3_list_fn fn, void *arg, char *err, size_t errlen)
{
	struct object_lister o = {
		.l = { .s = s, .op = "ListObjectsV2", .tag = "Contents", .missing = "a continuation token",
		       .query = objects_query, .item = objects_item, .next = objects_next },
		.fn = fn,
		.arg = arg,
	};

	return list_pages(&o.l, prefix, err, errlen);
}

int sl_s3_mpu_create(struct sl_s3 *s, const char *key, char **upload_id, char *err, size_t errlen)
{
	struct req r;
	struct sl_buf body, id;
	int rc;

	*upload_id = NULL;
	sl_buf_init(&body, 0);
	sl_buf_init(&id, 0);
	req_init(&r, "CreateMultipartUpload", "POST", key);
	r.query = "uploads=";
	r.content_type = "avro/binary";
	r.resp = &body;
	r.resp_cap = MAX_ERROR_BODY;
	rc = request(s, &r, false, err, errlen);
	if (rc == 0) {
		if (!xml_get(&body, "UploadId", &id) || !*id.data) {
			snprintf(err, errlen, "%s: CreateMultipartUpload %s: no UploadId in the answer", s->desc, key);
			rc = -1;
		} else if (!(*upload_id = strdup(id.data))) {
			snprintf(err, errlen, "%s: out of memory", s->desc);
			rc = -1;
		}
	}
	sl_buf_free(&body);
	sl_buf_free(&id);
	return rc;
}

/* "partNumber=N&uploadId=ID" (sorted, encoded) into q. */
static void upload_query(struct sl_buf *q, int part, const char *upload_id)
{
	if (part > 0)
		sl_buf_printf(q, "partNumber=%d&", part);
	sl_buf_puts(q, "uploadId=");
	sl_s3_encode(q, upload_id, false);
}

int sl_s3_mpu_part(struct sl_s3 *s, const char *key, const char *upload_id, int part, int fd, off_t off,
		   uint64_t len, const char *sha256, char **etag, char *err, size_t errlen)
{
	struct req r;
	struct sl_buf q;
	int rc;

	*etag = NULL;
	sl_buf_init(&q, 0);
	upload_query(&q, part, upload_id);
	if (sl_buf_failed(&q)) {
		snprintf(err, errlen, "%s: out of memory", s->desc);
		return -1;
	}
	req_init(&r, "UploadPart", "PUT", key);
	r.query = q.data;
	r.fd = fd;
	r.fd_off = off;
	r.fd_len = len;
	r.sha256 = sha256;
	r.want_etag = true;
	rc = request(s, &r, false, err, errlen);
	if (rc == 0 && !r.etag) {
		snprintf(err, errlen, "%s: UploadPart %s part %d: no ETag in the answer", s->desc, key, part);
		rc = -1;
	}
	if (rc == 0)
		*etag = r.etag;
	else
		free(r.etag);
	sl_buf_free(&q);
	return rc;
}

int sl_s3_mpu_complete(struct sl_s3 *s, const char *key, const char *upload_id, char *const *etags,
		       int nparts, char *err, size_t errlen)
{
	struct req r;
	struct sl_buf q, body, resp, code;
	int rc;

	sl_buf_init(&q, 0);
	sl_buf_init(&body, 0);
	sl_buf_init(&resp, 0);
	sl_buf_init(&code, 0);
	upload_query(&q, 0, upload_id);
	sl_buf_puts(&body, "<CompleteMultipartUpload xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">");
	for (int i = 0; i < nparts; i++) {
		sl_buf_printf(&body, "<Part><PartNumber>%d</PartNumber><ETag>", i + 1);
		xml_escape(&body, etags[i]);
		sl_buf_puts(&body, "</ETag></Part>");
	}
	sl_buf_puts(&body, "</CompleteMultipartUpload>");
	if (sl_buf_failed(&q) || sl_buf_failed(&body)) {
		snprintf(err, errlen, "%s: out of memory", s->desc);
		rc = -1;
		goto out;
	}
	req_init(&r, "CompleteMultipartUpload", "POST", key);
	r.query = q.data;
	r.body = body.data;
	r.body_len = body.len;
	r.content_type = "application/xml";
	r.resp = &resp;
	r.resp_cap = MAX_ERROR_BODY;
	rc = request(s, &r, false, err, errlen);
	/* S3 may answer 200 with an error in the body. */
	if (rc == 0 && xml_get(&resp, "Code", &code)) {
		snprintf(err, errlen, "%s: CompleteMultipartUpload %s failed: %s", s->desc, key, code.data);
		rc = -1;
	}
out:
	sl_buf_free(&q);
	sl_buf_free(&body);
	sl_buf_free(&resp);
	sl_buf_free(&code);
	return rc;
}

int sl_s3_mpu_abort(struct sl_s3 *s, const char *key, const char *upload_id, char *err, size_t errlen)
{
	struct req r;
	struct sl_buf q;
	int rc;

	sl_buf_init(&q, 0);
	upload_query(&q, 0, upload_id);
	if (sl_buf_failed(&q)) {
		snprintf(err, errlen, "%s: out of memory", s->desc);
		return -1;
	}
	req_init(&r, "AbortMultipartUpload", "DELETE", key);
	r.query = q.data;
	rc = request(s, &r, true, err, errlen);
	sl_buf_free(&q);
	return rc == SL_S3_NOT_FOUND ? 0 : rc;
}

struct upload_lister {
	struct lister l;   /* first: the callbacks' l is one of these */
	sl_s3_upload_fn fn;
	void *arg;
};

static void uploads_query(struct lister *l, struct sl_buf *q, const char *prefix)
{
	put_mark(q, "key-marker=", &l->mark[0]);
	if (l->mark[0].len)
		sl_buf_putc(q, '&');
	sl_buf_puts(q, "prefix=");
	sl_s3_encode(q, prefix, false);
	put_mark(q, "&upload-id-marker=", &l->mark[1]);
	sl_buf_puts(q, "&uploads=");
}

static int uploads_item(struct lister *l, const char *v, size_t n, char *err, size_t errlen)
{
	struct upload_lister *u = (struct upload_lister *)l;

	if (!xml_child(v, n, "Key", &l->text[0]) || !xml_child(v, n, "UploadId", &l->text[1])) {
		if (!sl_buf_failed(&l->text[0]) && !sl_buf_failed(&l->text[1]))
			return 0;
		snprintf(err, errlen, "%s: out of memory", l->s->desc);
		return -1;
	}
	return u->fn(u->arg, l->text[0].data, l->text[1].data, xml_time(v, n, "Initiated"));
}

static bool uploads_next(struct lister *l, const struct sl_buf *body)
{
	if (!xml_get(body, "NextKeyMarker", &l->mark[0]) || !xml_get(body, "NextUploadIdMarker", &l->mark[1]))
		return false;
	l->mark[0].len = strlen(l->mark[0].data);
	l->mark[1].len = strlen(l->mark[1].data);
	return true;
}

int sl_s3_mpu_list(struct sl_s3 *s, const char *prefix, sl_s3_upload_fn fn, void *arg, char *err, size_t errlen)
{
	struct upload_lister u = {
		.l = { .s = s, .op = "ListMultipartUploads", .tag = "Upload", .missing = "markers",
		       .query = uploads_query, .item = uploads_item, .next = uploads_next },
		.fn = fn,
		.arg = arg,
	};

	return list_pages(&u.l, prefix, err, errlen);
}
