/*
 * tests/unit/test_s3.c: the exact requests the S3 client sends, against a
 * tiny local HTTP server (libmicrohttpd) that records each request and
 * answers from a script: method, path, query, every header but the date and
 * the signature, and the body.  The expected requests are written from the
 * S3 API reference (PutObject, the multipart calls, the list calls); the
 * SHA-256 values are those `sha256sum` gives for the same bytes.  Also: which
 * answers are retried (5xx, with backoff), which are operator errors (403,
 * a missing bucket: SL_EPREREQ, no retry), and that no secret reaches a
 * message.  And the s3 sink over the same server: a large file goes out as a
 * multipart upload, published only by flush().
 */
#include <arpa/inet.h>
#include <fcntl.h>
#include <inttypes.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <regex.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/buf.h"
#include "common/util.h"
#include "sinks/s3/s3.h"
#include "sinks/s3/s3_client.h"
#include "sinks/sink.h"
#include "tests/unit/avro_testlib.h"

#define SECRET "unit-secret-7f3a-never-printed"
#define EMPTY_SHA "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
#define MAX_REQ 256

struct answer {
	unsigned status;
	const char *body;
	const char *etag;
};

/* What the server saw and what it will answer; guarded by mu. */
static struct {
	pthread_mutex_t mu;
	struct MHD_Daemon *d;
	unsigned port;
	char *reqs[MAX_REQ];
	int nreq;
	struct answer script[64];
	int nscript, next;
} g = { .mu = PTHREAD_MUTEX_INITIALIZER };

struct reqstate {
	struct sl_buf uri, body;
	bool started;
};

static void *uri_log(void *cls, const char *uri, struct MHD_Connection *c)
{
	struct reqstate *st = calloc(1, sizeof *st);

	(void)cls;
	(void)c;
	sl_buf_init(&st->uri, 0);
	sl_buf_init(&st->body, 0);
	sl_buf_puts(&st->uri, uri);
	return st;
}

struct hdr {
	char *line;
};

static int cmp_line(const void *a, const void *b)
{
	return strcmp(((const struct hdr *)a)->line, ((const struct hdr *)b)->line);
}

struct hdrs {
	struct hdr h[32];
	int n;
};

/* Collects one header as "name: value" with the name lowercased, and with
 * what changes from run to run (date, signature, port) replaced. */
static enum MHD_Result collect(void *cls, enum MHD_ValueKind kind, const char *key, const char *value)
{
	struct hdrs *hs = cls;
	struct sl_buf b;
	regex_t re;
	regmatch_t m[4];

	(void)kind;
	if (hs->n >= 32)
		return MHD_YES;
	sl_buf_init(&b, 0);
	for (const char *k = key; *k; k++)
		sl_buf_putc(&b, (char)(*k >= 'A' && *k <= 'Z' ? *k + 32 : *k));
	if (!strcmp(b.data, "x-amz-date")) {
		assert_int_equal(strlen(value), 16);  /* 20240131T134510Z */
		sl_buf_free(&b);
		return MHD_YES;
	}
	sl_buf_puts(&b, ": ");
	if (!strcasecmp(key, "authorization")) {
		assert_int_equal(regcomp(&re, "^(AWS4-HMAC-SHA256 Credential=[^/]+/)[0-9]{8}(/.*, Signature=)[0-9a-f]{64}$",
					 REG_EXTENDED), 0);
		if (regexec(&re, value, 3, m, 0) != 0)
			fail_msg("authorization header \"%s\"", value);
		sl_buf_append(&b, value + m[1].rm_so, (size_t)(m[1].rm_eo - m[1].rm_so));
		sl_buf_puts(&b, "DATE");
		sl_buf_append(&b, value + m[2].rm_so, (size_t)(m[2].rm_eo - m[2].rm_so));
		sl_buf_puts(&b, "SIG");
		regfree(&re);
	} else if (!strcasecmp(key, "host")) {
		sl_buf_puts(&b, "127.0.0.1:PORT");
	} else {
		sl_buf_puts(&b, value);
	}
	hs->h[hs->n++].line = sl_buf_detach(&b);
	return MHD_YES;
}

static enum MHD_Result handler(void *cls, struct MHD_Connection *c, const char *url, const char *method,
			       const char *version, const char *upload_data, size_t *upload_size, void **con_cls)
{
	struct reqstate *st = *con_cls;
	struct MHD_Response *r;
	struct answer a = { 200, "", NULL };
	struct hdrs hs = { .n = 0 };
	struct sl_buf t;
	enum MHD_Result ret;

	(void)cls;
	(void)url;
	(void)version;
	if (!st->started) {
		st->started = true;
		return MHD_YES;
	}
	if (*upload_size) {
		sl_buf_append(&st->body, upload_data, *upload_size);
		*upload_size = 0;
		return MHD_YES;
	}
	MHD_get_connection_values(c, MHD_HEADER_KIND, collect, &hs);
	qsort(hs.h, (size_t)hs.n, sizeof hs.h[0], cmp_line);
	sl_buf_init(&t, 0);
	sl_buf_printf(&t, "%s %s\n", method, st->uri.data);
	for (int i = 0; i < hs.n; i++) {
		sl_buf_printf(&t, "%s\n", hs.h[i].line);
		free(hs.h[i].line);
	}
	/* The body: as it is when short and text, else its size and SHA-256. */
	if (st->body.len <= 4096) {
		sl_buf_printf(&t, "\n%s", st->body.data ? st->body.data : "");
	} else {
		char sha[65];
		sl_s3_sha256_hex(st->body.data, st->body.len, sha);
		sl_buf_printf(&t, "\n<%zu bytes, sha256 %s>", st->body.len, sha);
	}
	pthread_mutex_lock(&g.mu);
	if (g.nreq < MAX_REQ)
		g.reqs[g.nreq++] = sl_buf_detach(&t);
	else
		sl_buf_free(&t);
	if (g.next < g.nscript)
		a = g.script[g.next++];
	pthread_mutex_unlock(&g.mu);
	r = MHD_create_response_from_buffer(strlen(a.body), (void *)(uintptr_t)a.body, MHD_RESPMEM_MUST_COPY);
	if (a.etag)
		MHD_add_response_header(r, "ETag", a.etag);
	if (*a.body)
		MHD_add_response_header(r, "Content-Type", "application/xml");
	ret = MHD_queue_response(c, a.status, r);
	MHD_destroy_response(r);
	return ret;
}

static void completed(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode toe)
{
	struct reqstate *st = *con_cls;

	(void)cls;
	(void)c;
	(void)toe;
	if (st) {
		sl_buf_free(&st->uri);
		sl_buf_free(&st->body);
		free(st);
		*con_cls = NULL;
	}
}

static int setup(void **state)
{
	const union MHD_DaemonInfo *info;
	struct sockaddr_in sa;

	(void)state;
	memset(&sa, 0, sizeof sa);
	sa.sin_family = AF_INET;
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	sa.sin_port = 0;
	g.d = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG, 0, NULL, NULL, handler, NULL,
			       MHD_OPTION_URI_LOG_CALLBACK, uri_log, NULL, MHD_OPTION_NOTIFY_COMPLETED, completed,
			       NULL, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&sa, MHD_OPTION_END);
	assert_non_null(g.d);
	info = MHD_get_daemon_info(g.d, MHD_DAEMON_INFO_BIND_PORT);
	assert_non_null(info);
	g.port = info->port;
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	MHD_stop_daemon(g.d);
	return 0;
}

static void reset(void)
{
	pthread_mutex_lock(&g.mu);
	for (int i = 0; i < g.nreq; i++)
		free(g.reqs[i]);
	g.nreq = g.nscript = g.next = 0;
	pthread_mutex_unlock(&g.mu);
}

static int per_test(void **state)
{
	(void)state;
	reset();
	return 0;
}

static void answer(unsigned status, const char *body, const char *etag)
{
	g.script[g.nscript++] = (struct answer){ status, body, etag };
}

static struct sl_s3 *client(int max_attempts)
{
	struct sl_s3_client_conf c;
	struct sl_s3 *s;
	char ep[64], err[512];

	snprintf(ep, sizeof ep, "http://127.0.0.1:%u", g.port);
	memset(&c, 0, sizeof c);
	c.endpoint = ep;
	c.bucket = "lake";
	c.region = "us-east-1";
	c.path_style = true;
	c.access_key_id = "AKIDTEST";
	c.secret_access_key = SECRET;
	c.tls_verify = true;
	c.max_attempts = max_attempts;
	c.user_agent = "sluice-test";
	if (sl_s3_new(&s, &c, err, sizeof err) != 0)
		fail_msg("client: %s", err);
	return s;
}

/* The i-th request must be exactly want. */
static void expect_req(int i, const char *want)
{
	pthread_mutex_lock(&g.mu);
	if (i >= g.nreq) {
		pthread_mutex_unlock(&g.mu);
		fail_msg("request %d was not sent (%d were)", i, g.nreq);
	}
	if (strcmp(g.reqs[i], want) != 0) {
		char *got = strdup(g.reqs[i]);
		pthread_mutex_unlock(&g.mu);
		fail_msg("request %d:\n--- got ---\n%s\n--- want ---\n%s", i, got, want);
	}
	pthread_mutex_unlock(&g.mu);
}

static void expect_nreq(int n)
{
	assert_int_equal(g.nreq, n);
}

#define AUTH(signed) "authorization: AWS4-HMAC-SHA256 Credential=AKIDTEST/DATE/us-east-1/s3/aws4_request, " \
	"SignedHeaders=" signed ", Signature=SIG\n"

static void test_put(void **state)
{
	struct sl_s3 *s = client(0);
	char err[512];

	(void)state;
	answer(200, "", "\"x\"");
	assert_int_equal(sl_s3_put(s, "cdc/a b/x+y.json", "hello\n", 6, "application/json", err, sizeof err), 0);
	expect_nreq(1);
	expect_req(0, "PUT /lake/cdc/a%20b/x%2By.json\n"
		      "accept: */*\n"
		      AUTH("content-type;host;x-amz-content-sha256;x-amz-date")
		      "content-length: 6\n"
		      "content-type: application/json\n"
		      "expect: 100-continue\n"
		      "host: 127.0.0.1:PORT\n"
		      "user-agent: sluice-test\n"
		      "x-amz-content-sha256: 5891b5b522d5df086d0ff0b110fbd9d21bb4fc7163af34d08286a2e846f6be03\n"
		      "\nhello\n");
	sl_s3_free(s);

	/* Temporary credentials: the session token is sent, and signed. */
	{
		struct sl_s3_client_conf c;
		char ep[64];

		reset();
		snprintf(ep, sizeof ep, "http://127.0.0.1:%u", g.port);
		memset(&c, 0, sizeof c);
		c.endpoint = ep;
		c.bucket = "lake";
		c.region = "eu-west-1";
		c.path_style = true;
		c.access_key_id = "ASIATEST";
		c.secret_access_key = SECRET;
		c.session_token = "tok+en/1";
		c.tls_verify = true;
		c.user_agent = "sluice-test";
		assert_int_equal(sl_s3_new(&s, &c, err, sizeof err), 0);
		answer(200, "", NULL);
		assert_int_equal(sl_s3_delete(s, "k", err, sizeof err), 0);
		expect_req(0, "DELETE /lake/k\n"
			      "accept: */*\n"
			      "authorization: AWS4-HMAC-SHA256 Credential=ASIATEST/DATE/eu-west-1/s3/aws4_request, "
			      "SignedHeaders=host;x-amz-content-sha256;x-amz-date;x-amz-security-token, Signature=SIG\n"
			      "host: 127.0.0.1:PORT\n"
			      "user-agent: sluice-test\n"
			      "x-amz-content-sha256: " EMPTY_SHA "\n"
			      "x-amz-security-token: tok+en/1\n"
			      "\n");
		sl_s3_free(s);
	}
}

/* A file of 5 MiB of 'a' and 1 MiB of 'b'. */
static int parts_file(void)
{
	char *buf = malloc(6 << 20);
	char path[] = "/tmp/sluice-s3-parts-XXXXXX";
	int fd = mkstemp(path);

	assert_true(fd >= 0 && buf);
	unlink(path);
	memset(buf, 'a', 5 << 20);
	memset(buf + (5 << 20), 'b', 1 << 20);
	assert_int_equal(write(fd, buf, 6 << 20), 6 << 20);
	free(buf);
	return fd;
}

static void test_multipart(void **state)
{
	struct sl_s3 *s = client(0);
	char err[512], *id = NULL, *etags[2] = { NULL, NULL };
	int fd = parts_file();

	(void)state;
	answer(200, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<InitiateMultipartUploadResult><Bucket>lake</Bucket>"
		    "<Key>cdc/big.avro</Key><UploadId>up/1+2</UploadId></InitiateMultipartUploadResult>", NULL);
	answer(200, "", "\"etag-1\"");
	answer(200, "", "\"etag-2\"");
	answer(200, "<CompleteMultipartUploadResult><Key>cdc/big.avro</Key><ETag>\"e-2\"</ETag>"
		    "</CompleteMultipartUploadResult>", NULL);
	answer(204, "", NULL);
	assert_int_equal(sl_s3_mpu_create(s, "cdc/big.avro", &id, err, sizeof err), 0);
	assert_string_equal(id, "up/1+2");
	assert_int_equal(sl_s3_mpu_part(s, "cdc/big.avro", id, 1, fd, 0, 5 << 20,
					"a29968fad2e782aa9f2040a35f05adb97ed8979eb1f572c8c8ea78637e275f3c", &etags[0], err,
					sizeof err), 0);
	assert_int_equal(sl_s3_mpu_part(s, "cdc/big.avro", id, 2, fd, 5 << 20, 1 << 20,
					"e56ec8dc1862be6c09c53620cbc0f00f639de2a51c882745fbbc4e144714b3c2", &etags[1], err,
					sizeof err), 0);
	assert_string_equal(etags[0], "\"etag-1\"");
	assert_string_equal(etags[1], "\"etag-2\"");
	assert_int_equal(sl_s3_mpu_complete(s, "cdc/big.avro", id, etags, 2, err, sizeof err), 0);
	assert_int_equal(sl_s3_mpu_abort(s, "cdc/big.avro", id, err, sizeof err), 0);
	expect_nreq(5);
	expect_req(0, "POST /lake/cdc/big.avro?uploads=\n"
		      "accept: */*\n"
		      AUTH("content-type;host;x-amz-content-sha256;x-amz-date")
		      "content-length: 0\n"
		      "content-type: avro/binary\n"
		      "host: 127.0.0.1:PORT\n"
		      "user-agent: sluice-test\n"
		      "x-amz-content-sha256: " EMPTY_SHA "\n"
		      "\n");
	expect_req(1, "PUT /lake/cdc/big.avro?partNumber=1&uploadId=up%2F1%2B2\n"
		      "accept: */*\n"
		      AUTH("host;x-amz-content-sha256;x-amz-date")
		      "content-length: 5242880\n"
		      "expect: 100-continue\n"
		      "host: 127.0.0.1:PORT\n"
		      "user-agent: sluice-test\n"
		      "x-amz-content-sha256: a29968fad2e782aa9f2040a35f05adb97ed8979eb1f572c8c8ea78637e275f3c\n"
		      "\n<5242880 bytes, sha256 a29968fad2e782aa9f2040a35f05adb97ed8979eb1f572c8c8ea78637e275f3c>");
	expect_req(2, "PUT /lake/cdc/big.avro?partNumber=2&uploadId=up%2F1%2B2\n"
		      "accept: */*\n"
		      AUTH("host;x-amz-content-sha256;x-amz-date")
		      "content-length: 1048576\n"
		      "expect: 100-continue\n"
		      "host: 127.0.0.1:PORT\n"
		      "user-agent: sluice-test\n"
		      "x-amz-content-sha256: e56ec8dc1862be6c09c53620cbc0f00f639de2a51c882745fbbc4e144714b3c2\n"
		      "\n<1048576 bytes, sha256 e56ec8dc1862be6c09c53620cbc0f00f639de2a51c882745fbbc4e144714b3c2>");
	expect_req(3, "POST /lake/cdc/big.avro?uploadId=up%2F1%2B2\n"
		      "accept: */*\n"
		      AUTH("content-type;host;x-amz-content-sha256;x-amz-date")
		      "content-length: 219\n"
		      "content-type: application/xml\n"
		      "host: 127.0.0.1:PORT\n"
		      "user-agent: sluice-test\n"
		      "x-amz-content-sha256: 492b3c0897880033a556f711ef51e36bdfa77af085b6fe43d6371e8c8bf255b5\n"
		      "\n<CompleteMultipartUpload xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\"><Part><PartNumber>1"
		      "</PartNumber><ETag>\"etag-1\"</ETag></Part><Part><PartNumber>2</PartNumber><ETag>\"etag-2\""
		      "</ETag></Part></CompleteMultipartUpload>");
	expect_req(4, "DELETE /lake/cdc/big.avro?uploadId=up%2F1%2B2\n"
		      "accept: */*\n"
		      AUTH("host;x-amz-content-sha256;x-amz-date")
		      "host: 127.0.0.1:PORT\n"
		      "user-agent: sluice-test\n"
		      "x-amz-content-sha256: " EMPTY_SHA "\n"
		      "\n");
	free(id);
	free(etags[0]);
	free(etags[1]);
	close(fd);
	sl_s3_free(s);
}

struct seen {
	char text[4096];
};

static int note_upload(void *arg, const char *key, const char *id, int64_t initiated_ms)
{
	struct seen *se = arg;
	size_t l = strlen(se->text);

	snprintf(se->text + l, sizeof se->text - l, "%s %s %" PRId64 "|", key, id, initiated_ms);
	return 0;
}

static int note_object(void *arg, const char *key, uint64_t size, int64_t mtime_ms)
{
	struct seen *se = arg;
	size_t l = strlen(se->text);

	snprintf(se->text + l, sizeof se->text - l, "%s %llu %" PRId64 "|", key, (unsigned long long)size, mtime_ms);
	return 0;
}

/* The list calls: canonical queries (sorted, encoded), every page, XML
 * entities decoded. */
static void test_lists(void **state)
{
	struct sl_s3 *s = client(0);
	struct seen se = { "" };
	char err[512];

	(void)state;
	answer(200, "<ListMultipartUploadsResult><IsTruncated>true</IsTruncated><NextKeyMarker>cdc/k&amp;1"
		    "</NextKeyMarker><NextUploadIdMarker>u1</NextUploadIdMarker><Upload><Key>cdc/k&amp;1</Key>"
		    "<UploadId>u1</UploadId><Initiated>2024-01-31T13:45:10.250Z</Initiated></Upload>"
		    "</ListMultipartUploadsResult>", NULL);
	answer(200, "<ListMultipartUploadsResult><IsTruncated>false</IsTruncated><Upload><Key>cdc/&lt;2&gt;"
		    "</Key><UploadId>u2</UploadId></Upload></ListMultipartUploadsResult>", NULL);
	assert_int_equal(sl_s3_mpu_list(s, "cdc/", note_upload, &se, err, sizeof err), 0);
	/* 2024-01-31T13:45:10.250Z is 1706708710250 ms; no Initiated: -1 */
	assert_string_equal(se.text, "cdc/k&1 u1 1706708710250|cdc/<2> u2 -1|");
	expect_req(0, "GET /lake/?prefix=cdc%2F&uploads=\n"
		      "accept: */*\n"
		      AUTH("host;x-amz-content-sha256;x-amz-date")
		      "host: 127.0.0.1:PORT\n"
		      "user-agent: sluice-test\n"
		      "x-amz-content-sha256: " EMPTY_SHA "\n"
		      "\n");
	expect_req(1, "GET /lake/?key-marker=cdc%2Fk%261&prefix=cdc%2F&upload-id-marker=u1&uploads=\n"
		      "accept: */*\n"
		      AUTH("host;x-amz-content-sha256;x-amz-date")
		      "host: 127.0.0.1:PORT\n"
		      "user-agent: sluice-test\n"
		      "x-amz-content-sha256: " EMPTY_SHA "\n"
		      "\n");
	reset();
	se.text[0] = '\0';
	answer(200, "<ListBucketResult><IsTruncated>true</IsTruncated><NextContinuationToken>tok/1=</NextContinuationToken>"
		    "<Contents><Key>cdc/a.avro</Key><LastModified>2024-01-31T13:45:10Z</LastModified><Size>10</Size>"
		    "</Contents><Contents><Key>cdc/b&amp;c.avro</Key><LastModified>1970-01-01T00:00:01.5Z</LastModified>"
		    "<Size>20</Size></Contents></ListBucketResult>", NULL);
	answer(200, "<ListBucketResult><IsTruncated>false</IsTruncated><Contents><Key>cdc/d.avro</Key>"
		    "<Size>30</Size></Contents></ListBucketResult>", NULL);
	assert_int_equal(sl_s3_list(s, "cdc/", note_object, &se, err, sizeof err), 0);
	assert_string_equal(se.text, "cdc/a.avro 10 1706708710000|cdc/b&c.avro 20 1500|cdc/d.avro 30 -1|");
	expect_nreq(2);
	expect_req(0, "GET /lake/?list-type=2&prefix=cdc%2F\n"
		      "accept: */*\n"
		      AUTH("host;x-amz-content-sha256;x-amz-date")
		      "host: 127.0.0.1:PORT\n"
		      "user-agent: sluice-test\n"
		      "x-amz-content-sha256: " EMPTY_SHA "\n"
		      "\n");
	expect_req(1, "GET /lake/?continuation-token=tok%2F1%3D&list-type=2&prefix=cdc%2F\n"
		      "accept: */*\n"
		      AUTH("host;x-amz-content-sha256;x-amz-date")
		      "host: 127.0.0.1:PORT\n"
		      "user-agent: sluice-test\n"
		      "x-amz-content-sha256: " EMPTY_SHA "\n"
		      "\n");
	sl_s3_free(s);
}

/* 5xx is retried (the same request again), 403 and a missing bucket are not. */
static void test_errors(void **state)
{
	struct sl_s3 *s = client(0);
	struct sl_buf b;
	char err[1024];

	(void)state;
	answer(503, "<Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message></Error>", NULL);
	answer(500, "<Error><Code>InternalError</Code><Message>oops</Message></Error>", NULL);
	answer(200, "", NULL);
	assert_int_equal(sl_s3_put(s, "k", "x", 1, NULL, err, sizeof err), 0);
	expect_nreq(3);
	pthread_mutex_lock(&g.mu);
	assert_string_equal(g.reqs[0], g.reqs[1]);
	assert_string_equal(g.reqs[1], g.reqs[2]);
	pthread_mutex_unlock(&g.mu);

	reset();
	answer(403, "<Error><Code>AccessDenied</Code><Message>Access Denied</Message></Error>", NULL);
	assert_int_equal(sl_s3_put(s, "cdc/k", "x", 1, NULL, err, sizeof err), SL_EPREREQ);
	expect_nreq(1);
	{
		char want[512];
		snprintf(want, sizeof want, "bucket \"lake\" at http://127.0.0.1:%u: PutObject cdc/k: access refused "
			 "(HTTP 403 AccessDenied: Access Denied); check the access key (it may lack a permission), "
			 "the secret and the bucket's policy", g.port);
		assert_string_equal(err, want);
	}
	assert_null(strstr(err, SECRET));

	reset();
	answer(404, "<Error><Code>NoSuchBucket</Code><Message>The specified bucket does not exist</Message></Error>", NULL);
	assert_int_equal(sl_s3_mpu_list(s, "cdc/", note_upload, &(struct seen){ "" }, err, sizeof err), SL_EPREREQ);
	assert_non_null(strstr(err, ": ListMultipartUploads : the bucket does not exist (HTTP 404 NoSuchBucket: "));
	expect_nreq(1);

	reset();
	answer(404, "<Error><Code>NoSuchKey</Code><Message>no</Message></Error>", NULL);
	sl_buf_init(&b, 0);
	assert_int_equal(sl_s3_get(s, "cdc/none", &b, 1024, err, sizeof err), SL_S3_NOT_FOUND);
	sl_buf_free(&b);

	/* With a bound on attempts, a server that keeps failing is given up. */
	reset();
	sl_s3_set_max_attempts(s, 2);
	answer(500, "", NULL);
	answer(502, "", NULL);
	assert_int_equal(sl_s3_delete(s, "cdc/k", err, sizeof err), -1);
	assert_non_null(strstr(err, "DeleteObject cdc/k failed: HTTP 502 (gave up retrying)"));
	expect_nreq(2);
	sl_s3_free(s);
}

/* The s3 sink's configuration for the test server (ep receives its
 * endpoint), prefix "/cdc/", codec null, 5 MB parts spooled in dir. */
static void sink_conf(struct sl_s3_conf *c, char *ep, size_t eplen, char *dir)
{
	snprintf(ep, eplen, "http://127.0.0.1:%u", g.port);
	memset(c, 0, sizeof *c);
	c->endpoint = ep;
	c->bucket = "lake";
	c->prefix = "/cdc/";
	c->region = "us-east-1";
	c->path_style = true;
	c->access_key_id = "AKIDTEST";
	c->secret_access_key = SECRET;
	c->tls_verify = true;
	c->codec = SL_CODEC_NULL;
	c->compression_level = 1;
	c->max_file_bytes = 64 << 20;
	c->max_file_seconds = 60;
	c->part_size = 5 << 20;
	c->spool_dir = dir;
}

/* The headers of a bodiless request of the sink's client (its own user agent). */
#define SINK_EMPTY_REQ "accept: */*\n" AUTH("host;x-amz-content-sha256;x-amz-date") \
	"host: 127.0.0.1:PORT\n" "user-agent: sluice/" PACKAGE_VERSION "\n" "x-amz-content-sha256: " EMPTY_SHA "\n\n"

/* S3's times (ISO 8601, UTC), and what does not read as one. */
static void test_parse_time(void **state)
{
	static const struct {
		const char *text;
		int64_t ms;
	} cases[] = {
		{ "1970-01-01T00:00:00Z", 0 },
		{ "1970-01-01T00:00:00.001Z", 1 },
		{ "2024-01-31T13:45:10.250Z", 1706708710250 },
		{ "2024-02-29T23:59:59.999999Z", 1709251199999 },
		{ "2000-03-01T00:00:00.000Z", 951868800000 },
		{ "2024-01-31T13:45:10", -1 },          /* no zone */
		{ "2024-01-31T13:45:10+01:00", -1 },
		{ "2024-13-01T00:00:00Z", -1 },
		{ "2024-01-31 13:45:10Z", -1 },
		{ "Wed, 31 Jan 2024 13:45:10 GMT", -1 },
		{ "", -1 },
	};

	(void)state;
	for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
		if (sl_s3_parse_time(cases[i].text, strlen(cases[i].text)) != cases[i].ms)
			fail_msg("\"%s\": %" PRId64 ", want %" PRId64, cases[i].text,
				 sl_s3_parse_time(cases[i].text, strlen(cases[i].text)), cases[i].ms);
}

/* An S3 time text for now - ago_s seconds. */
static void iso_ago(char *out, size_t len, int64_t ago_s)
{
	time_t t = time(NULL) - (time_t)ago_s;
	struct tm tm;

	gmtime_r(&t, &tm);
	strftime(out, len, "%Y-%m-%dT%H:%M:%S.000Z", &tm);
}

/* The store's abort_uploads: one list of the prefix's uploads, then an
 * abort of each data file's upload begun before the age, and of none other
 * (a young one, one without Initiated, one that is not a data file). */
static void test_abort_uploads(void **state)
{
	struct sl_s3_conf c;
	struct sl_sink_stream ss = { .name = "s1", .mode = SL_WRITE_APPEND, .destination = "lake" };
	struct sl_store store;
	struct sl_buf list;
	char ep[64], err[1024], old[40], young[40], *dir = tl_mkdtemp("s3spool");
	int aborted = -1;

	(void)state;
	sink_conf(&c, ep, sizeof ep, dir);
	iso_ago(old, sizeof old, 7200);
	iso_ago(young, sizeof young, 60);
	sl_buf_init(&list, 0);
	sl_buf_printf(&list, "<ListMultipartUploadsResult><IsTruncated>false</IsTruncated>"
		      "<Upload><Key>cdc/s1/t/data/a.avro</Key><UploadId>OLD</UploadId><Initiated>%s</Initiated></Upload>"
		      "<Upload><Key>cdc/s1/t/data/b.avro</Key><UploadId>YOUNG</UploadId><Initiated>%s</Initiated></Upload>"
		      "<Upload><Key>cdc/s1/t/data/c.avro</Key><UploadId>NOTIME</UploadId></Upload>"
		      "<Upload><Key>cdc/s1/t/data/d.txt</Key><UploadId>OTHER</UploadId><Initiated>%s</Initiated></Upload>"
		      "</ListMultipartUploadsResult>", old, young, old);
	assert_false(sl_buf_failed(&list));
	answer(200, list.data, NULL);
	answer(204, "", NULL);
	assert_int_equal(sl_s3_store(&store, &c, &ss, 1, err, sizeof err), 0);
	assert_non_null(store.ops->abort_uploads);
	if (store.ops->abort_uploads(store.ctx, "s1/t/data", 3600 * 1000, &aborted, err, sizeof err) != 0)
		fail_msg("abort_uploads: %s", err);
	assert_int_equal(aborted, 1);
	expect_nreq(2);
	expect_req(0, "GET /lake/?prefix=cdc%2Fs1%2Ft%2Fdata%2F&uploads=\n" SINK_EMPTY_REQ);
	expect_req(1, "DELETE /lake/cdc/s1/t/data/a.avro?uploadId=OLD\n" SINK_EMPTY_REQ);
	store.ops->close(store.ctx);
	sl_buf_free(&list);
	tl_rm_rf(dir);
	free(dir);
}

/* The sink over the same server: the file goes out as a multipart upload
 * when it is finished, and becomes visible (Complete) only in flush(),
 * followed by the schema file and the manifest. */
static void test_sink_multipart(void **state)
{
	const struct tl_col cols[] = { { "id", T_INT4, -1, "integer", true }, { "v", T_TEXT, -1, "text", false } };
	struct sl_table *t = tl_table("public", "big", cols, 2);
	struct sl_s3_conf c;
	struct sl_sink_stream st = { .name = "s1", .mode = SL_WRITE_APPEND, .destination = "lake" };
	char ep[64], err[1024], *dir = tl_mkdtemp("s3spool"), *v = malloc(2000);
	struct sl_position pos;
	void *ctx;
	regex_t re;
	int n;
	static const char *const want[] = {
		"^GET /lake/\\?prefix=cdc%2Fs1%2F&uploads=$",
		"^GET /lake/cdc/s1/_manifests/\\.latest\\.json$",
		"^GET /lake/\\?list-type=2&prefix=cdc%2Fs1%2F_manifests%2F$",
		"POST /lake/cdc/s1/public_big/2024/01/31/13/45/0000000000001000-0000000001_0000000000001000-0000003000_[0-9a-f]{8}\\.avro\\?uploads=",
		"PUT /lake/cdc/s1/public_big/2024/01/31/13/45/[^?]*\\?partNumber=1&uploadId=U1",
		"PUT /lake/cdc/s1/public_big/2024/01/31/13/45/[^?]*\\?partNumber=2&uploadId=U1",
		"POST /lake/cdc/s1/public_big/2024/01/31/13/45/[^?]*\\?uploadId=U1",
		"PUT /lake/cdc/s1/public_big/\\.schema\\.avsc",
		"PUT /lake/cdc/s1/_manifests/\\.0000000001\\.json",
		"PUT /lake/cdc/s1/_manifests/\\.latest\\.json",
	};

	(void)state;
	sink_conf(&c, ep, sizeof ep, dir);
	answer(200, "<ListMultipartUploadsResult><IsTruncated>false</IsTruncated></ListMultipartUploadsResult>", NULL);
	answer(404, "<Error><Code>NoSuchKey</Code></Error>", NULL);
	answer(200, "<ListBucketResult><IsTruncated>false</IsTruncated></ListBucketResult>", NULL);
	answer(200, "<InitiateMultipartUploadResult><UploadId>U1</UploadId></InitiateMultipartUploadResult>", NULL);
	answer(200, "", "\"p1\"");
	answer(200, "", "\"p2\"");
	answer(200, "<CompleteMultipartUploadResult/>", NULL);
	if (sl_s3_ops.open(&ctx, &c, &st, err, sizeof err) != 0) {
		for (int i = 0; i < g.nreq; i++)
			fprintf(stderr, "request %d: %.*s\n", i, (int)strcspn(g.reqs[i], "\n"), g.reqs[i]);
		fail_msg("open: %s", err);
	}
	memset(v, 'x', 1999);
	v[1999] = '\0';
	for (int i = 1; i <= 3000; i++) {  /* about 6 MB: two parts */
		struct sl_value vals[2] = { tl_int(i), tl_str(v) };
		struct sl_change ch;
		tl_change(&ch, t, SL_OP_INSERT, vals, 0x1000, (uint32_t)i, INT64_C(1706708710000000));
		assert_int_equal(sl_s3_ops.write(ctx, &ch, err, sizeof err), 0);
	}
	expect_nreq(3);  /* nothing sent while the file is written */
	memset(&pos, 0, sizeof pos);
	pos.w[0] = 0x2000;
	sl_s3_ops.mark(ctx, &pos);
	assert_int_equal(sl_s3_ops.flush(ctx, &pos, err, sizeof err), 1);
	n = g.nreq;
	assert_int_equal(n, (int)(sizeof want / sizeof *want));
	for (int i = 0; i < n; i++) {
		char line[1024];
		const char *nl = strchr(g.reqs[i], '\n');
		snprintf(line, sizeof line, "%.*s", (int)(nl - g.reqs[i]), g.reqs[i]);
		assert_int_equal(regcomp(&re, want[i], REG_EXTENDED | REG_NOSUB), 0);
		if (regexec(&re, line, 0, NULL, 0) != 0)
			fail_msg("request %d is \"%s\", want /%s/", i, line, want[i]);
		regfree(&re);
	}
	/* The manifest lists the file with its size as sent. */
	assert_non_null(strstr(g.reqs[8], "\"records\": 3000"));
	assert_non_null(strstr(g.reqs[6], "<Part><PartNumber>1</PartNumber><ETag>\"p1\"</ETag></Part><Part>"
				   "<PartNumber>2</PartNumber><ETag>\"p2\"</ETag></Part>"));
	sl_s3_ops.close(ctx);
	sl_table_free(t);
	free(v);
	tl_rm_rf(dir);
	free(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup(test_put, per_test),
		cmocka_unit_test_setup(test_multipart, per_test),
		cmocka_unit_test_setup(test_lists, per_test),
		cmocka_unit_test_setup(test_errors, per_test),
		cmocka_unit_test_setup(test_sink_multipart, per_test),
		cmocka_unit_test_setup(test_parse_time, per_test),
		cmocka_unit_test_setup(test_abort_uploads, per_test),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
