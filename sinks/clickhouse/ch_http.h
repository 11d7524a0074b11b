/*
 * sinks/clickhouse/ch_http.h: the ClickHouse sink's HTTP client: one libcurl
 * easy handle per sink, reused for every request so that the connection is
 * kept alive, with its timeouts, TLS settings and credentials; gzip request
 * bodies; and retries with exponential backoff and jitter.
 *
 * Every request is a POST to the configured URL's path with the parameters
 * in its query string:
 *
 *   POST /?query=INSERT%20INTO%20...%20FORMAT%20RowBinary   body: the rows
 *   POST /?wait_end_of_query=1                              body: a statement
 *   POST /?query=SELECT...&sluice_keys_structure=...&sluice_keys_format=RowBinary
 *        multipart/form-data body: the external table sluice_keys
 *
 * Credentials go in an Authorization: Basic header (never in the URL, so
 * they appear in no log and no message); libcurl's verbose output is never
 * turned on.  curl_global_init() is called by ch_http_new(), which libcurl
 * 7.84 and later makes safe from several threads.
 */
#ifndef SLUICE_SINKS_CLICKHOUSE_CH_HTTP_H
#define SLUICE_SINKS_CLICKHOUSE_CH_HTTP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"
#include "common/util.h"
#include "common/outage.h"

struct ch_http_conf {
	const char *url;            /* http:// or https:// with host, optional port and path */
	const char *user;           /* NULL: no Authorization header */
	const char *password;       /* NULL: empty (borrowed; a secret) */
	const char *ca_file;        /* NULL: the system's CA bundle */
	bool verify;                /* verify the server's certificate and host name */
	long connect_timeout_ms;
	long timeout_ms;            /* a whole request */
	bool gzip;                  /* gzip request bodies of at least CH_GZIP_MIN bytes */
	int64_t retry_ms;           /* how long ch_http_run() keeps trying */
	int64_t backoff_min_ms;     /* first pause between tries (0: 100 ms) */
	int64_t backoff_max_ms;     /* longest pause (0: 5 s) */
	size_t response_cap;        /* largest response body (0: CH_RESP_CAP) */
	struct sl_outage *outage;   /* told of each try that failed and each answer (borrowed), or NULL */
};

/* Smaller bodies are sent as they are: gzip would not pay for itself. */
#define CH_GZIP_MIN 1024

struct ch_http;

/* Makes the client (nothing is sent yet).  The configuration's strings are
 * borrowed: they must outlive the client.  Returns 0 with *out (free with
 * ch_http_free()), or -1 with a message in err. */
int ch_http_new(struct ch_http **out, const struct ch_http_conf *c, char *err, size_t errlen);
void ch_http_free(struct ch_http *h);

/* One request. */
struct ch_req {
	const char *query;          /* the "query" URL parameter, or NULL (then body is the statement) */
	const char *params;         /* more URL parameters, already encoded ("a=1&b=2"), or NULL */
	const void *body;           /* the body: rows when query is set, else the statement text */
	size_t len;
	/* An external table sent as multipart/form-data instead of body (a
	 * lookup): its name, structure and RowBinary rows. */
	const char *ext_name;
	const char *ext_structure;
	const void *ext_data;
	size_t ext_len;
};

/* One response. */
struct ch_resp {
	long status;                /* HTTP status; 0 when none came */
	int code;                   /* ClickHouse's exception code, 0 if none */
	struct sl_buf body;         /* the response body; init with ch_resp_init, free with ch_resp_free */
	char error[256];            /* what failed when status is 0 */
	bool fatal;                 /* status 0 and no retry can help (a certificate refused, a bad URL) */
	bool overflow;              /* the body was larger than the cap (then fatal too) */
};

/* The largest response body read by default; a larger one fails the
 * request (and sets overflow). */
#define CH_RESP_CAP ((size_t)256 << 20)

void ch_resp_init(struct ch_resp *r);
void ch_resp_free(struct ch_resp *r);

/* Sends one request and reads its response into rs (reset first).  Returns
 * 0 when a response came, whatever its status, or -1 when none did
 * (connection refused, timed out, reset: rs->error). */
int ch_http_do(struct ch_http *h, const struct ch_req *rq, struct ch_resp *rs);

/* Result of ch_http_run(). */
enum ch_run {
	CH_RUN_OK = 0,          /* a 2xx */
	CH_RUN_DATA = 1,        /* the server refused the data (see ch_classify): err says why */
	CH_RUN_FAILED = -1,     /* no retry can help, or retries ran out: err says why */
	CH_RUN_REFUSED = SL_EPREREQ, /* the server refused the user (ch_classify: CH_ERR_PREREQ:
				      * credentials, grants, read-only): the operator's to mend,
				      * so the stream stops (exit 3) */
};

/* Sends rq until it succeeds: a failure to connect, a timeout, a 5xx or a
 * busy server (ch_classify: CH_ERR_RETRY) is tried again after a pause that
 * doubles from backoff_min_ms up to backoff_max_ms, each drawn at random
 * from its upper half, for at most retry_ms.  what names the request in
 * messages ("insert into `db`.`t`").  rs holds the last response.  Returns
 * an enum ch_run, with the message in err unless CH_RUN_OK. */
int ch_http_run(struct ch_http *h, const struct ch_req *rq, struct ch_resp *rs, const char *what,
		char *err, size_t errlen);


/* Requests sent and retries made, since ch_http_new(). */
struct ch_http_stats {
	uint64_t requests;
	uint64_t retries;
	uint64_t bytes_sent;        /* bodies as sent (compressed when gzipped) */
	uint64_t bytes_raw;         /* bodies before compression */
};
void ch_http_get_stats(const struct ch_http *h, struct ch_http_stats *out);

#endif
