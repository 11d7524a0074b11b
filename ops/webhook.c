/*
 * ops/webhook.c: the alert webhook's sender thread (see webhook.h).
 */
#include "ops/webhook.h"

#include <curl/curl.h>
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/buf.h"
#include "common/log.h"
#include "common/util.h"

struct sl_webhook {
	char *url;
	struct sl_ops *ops;
	pthread_t th;
	pthread_mutex_t mu;
	pthread_cond_t cv;                 /* CLOCK_MONOTONIC */
	char *q[SL_WEBHOOK_QUEUE];         /* payloads, a ring */
	int head, n;
	bool stopping;
	int64_t deadline_ms;               /* with stopping: give up sending at this time */
};

/* RFC 3339 in UTC with microseconds; Alertmanager's zero time for 0. */
static void rfc3339(char *out, size_t len, int64_t us)
{
	time_t s;
	struct tm tm;
	char day[48];

	if (us <= 0) {
		snprintf(out, len, "0001-01-01T00:00:00Z");
		return;
	}
	s = (time_t)(us / 1000000);
	gmtime_r(&s, &tm);
	strftime(day, sizeof day, "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(out, len, "%s.%06dZ", day, (int)(us % 1000000));
}

char *sl_webhook_payload(const struct sl_alert_event *ev)
{
	const struct sl_alert_def *d = sl_alert_def(ev->id);
	const char *status = ev->firing ? "firing" : "resolved";
	char starts[64], ends[64], *text = NULL, *out = NULL;
	struct sl_buf t, key;
	json_t *labels, *root;

	rfc3339(starts, sizeof starts, ev->starts_us);
	rfc3339(ends, sizeof ends, ev->firing ? 0 : ev->ends_us);
	sl_buf_init(&t, 0);
	sl_buf_init(&key, 0);
	sl_buf_printf(&t, "[%s] sluice stream %s: %s %s (%s)%s%s", ev->firing ? "FIRING" : "RESOLVED", ev->stream,
		      d->name, ev->firing ? "fires" : "resolved", sl_alert_severity_name(d->severity),
		      ev->message && *ev->message ? ": " : "", ev->message ? ev->message : "");
	sl_buf_printf(&key, "{}:{alertname=\"%s\", stream=\"%s\"}", d->name, ev->stream);
	if (sl_buf_failed(&t) || sl_buf_failed(&key))
		goto out;
	labels = json_pack("{s:s, s:s, s:s, s:s, s:s}", "alertname", d->name, "stream", ev->stream, "severity",
			   sl_alert_severity_name(d->severity), "service", "sluice", "instance",
			   ev->host ? ev->host : "");
	root = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:i, s:o, s:O, s:{s:s, s:s}, s:{s:s}, s:s, "
			 "s:[{s:s, s:O, s:{s:s, s:s}, s:s, s:s, s:s}]}",
			 "text", t.data, "version", "4", "status", status, "receiver", "sluice", "groupKey", key.data,
			 "externalURL", "", "truncatedAlerts", 0, "groupLabels",
			 json_pack("{s:s, s:s}", "alertname", d->name, "stream", ev->stream),
			 "commonLabels", labels,
			 "commonAnnotations", "summary", t.data, "description", ev->message ? ev->message : "",
			 "sluice", "message", ev->message ? ev->message : "",
			 "generatorURL", "",
			 "alerts", "status", status, "labels", labels, "annotations", "summary", t.data,
			 "description", ev->message ? ev->message : "", "startsAt", starts, "endsAt", ends,
			 "generatorURL", "");
	json_decref(labels);
	if (root)
		out = json_dumps(root, JSON_COMPACT);
	json_decref(root);
out:
	free(text);
	sl_buf_free(&t);
	sl_buf_free(&key);
	return out;
}

static size_t discard(char *p, size_t size, size_t n, void *ud)
{
	(void)p;
	(void)ud;
	return size * n;
}

/* One POST; 0 on a 2xx, else -1 with why. */
static int post(struct sl_webhook *w, const char *body, char *why, size_t whylen)
{
	char errbuf[CURL_ERROR_SIZE] = "";
	struct curl_slist *h = NULL;
	CURL *c = curl_easy_init();
	long code = 0;
	CURLcode rc;

	if (!c) {
		snprintf(why, whylen, "out of memory");
		return -1;
	}
	h = curl_slist_append(h, "Content-Type: application/json");
	curl_easy_setopt(c, CURLOPT_URL, w->url);
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
	curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
	curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, (long)strlen(body));
	curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, (long)SL_WEBHOOK_TIMEOUT_MS);
	curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, (long)SL_WEBHOOK_TIMEOUT_MS);
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(c, CURLOPT_ERRORBUFFER, errbuf);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, discard);
	curl_easy_setopt(c, CURLOPT_USERAGENT, "sluice/" PACKAGE_VERSION);
	curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
	rc = curl_easy_perform(c);
	if (rc == CURLE_OK)
		curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
	curl_slist_free_all(h);
	curl_easy_cleanup(c);
	if (rc != CURLE_OK) {
		snprintf(why, whylen, "%s", errbuf[0] ? errbuf : curl_easy_strerror(rc));
		return -1;
	}
	if (code < 200 || code > 299) {
		snprintf(why, whylen, "HTTP status %ld", code);
		return -1;
	}
	return 0;
}

/* Waits ms, or less when stopping passes the deadline.  mu held. */
static void wait_ms(struct sl_webhook *w, int ms)
{
	struct timespec until = sl_mono_deadline(ms);

	pthread_cond_timedwait(&w->cv, &w->mu, &until);
}

static void *sender_main(void *arg)
{
	struct sl_webhook *w = arg;

	sl_thread_name("sl-webhook");
	pthread_mutex_lock(&w->mu);
	for (;;) {
		char *body, why[CURL_ERROR_SIZE + 64];
		int tries = 0, rc = -1;

		while (w->n == 0 && !w->stopping)
			wait_ms(w, 1000);
		if (w->n == 0 || (w->stopping && sl_mono_ms() >= w->deadline_ms))
			break;
		body = w->q[w->head];
		w->q[w->head] = NULL;
		w->head = (w->head + 1) % SL_WEBHOOK_QUEUE;
		w->n--;
		while (tries < SL_WEBHOOK_TRIES) {
			pthread_mutex_unlock(&w->mu);
			rc = post(w, body, why, sizeof why);
			pthread_mutex_lock(&w->mu);
			if (rc == 0 || ++tries >= SL_WEBHOOK_TRIES)
				break;
			if (w->stopping && sl_mono_ms() >= w->deadline_ms)
				break;
			wait_ms(w, 1000 << (tries - 1));
		}
		if (rc == 0) {
			atomic_fetch_add(&w->ops->webhook_sent, 1);
		} else {
			atomic_fetch_add(&w->ops->webhook_failed, 1);
			sl_warn("alert_webhook: could not deliver an alert notification after %d tries: %s", tries, why);
		}
		free(body);
	}
	pthread_mutex_unlock(&w->mu);
	return NULL;
}

struct sl_webhook *sl_webhook_start(const char *url, struct sl_ops *ops, char *err, size_t errlen)
{
	struct sl_webhook *w = calloc(1, sizeof *w);
	pthread_condattr_t ca;

	if (!w || !(w->url = strdup(url))) {
		free(w);
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	/* Before any thread of ours uses libcurl: its global setup is not
	 * thread-safe in every build (it is reference-counted, so other users
	 * of libcurl in the process are not disturbed). */
	if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
		snprintf(err, errlen, "could not initialise libcurl for alert_webhook");
		free(w->url);
		free(w);
		return NULL;
	}
	w->ops = ops;
	pthread_mutex_init(&w->mu, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&w->cv, &ca);
	pthread_condattr_destroy(&ca);
	if (pthread_create(&w->th, NULL, sender_main, w) != 0) {
		snprintf(err, errlen, "could not start the webhook thread: %s", strerror(errno));
		curl_global_cleanup();
		pthread_cond_destroy(&w->cv);
		pthread_mutex_destroy(&w->mu);
		free(w->url);
		free(w);
		return NULL;
	}
	return w;
}

void sl_webhook_send(struct sl_webhook *w, const struct sl_alert_event *ev)
{
	char *body;

	if (!w)
		return;
	if (!(body = sl_webhook_payload(ev))) {
		atomic_fetch_add(&w->ops->webhook_dropped, 1);
		return;
	}
	pthread_mutex_lock(&w->mu);
	if (w->n == SL_WEBHOOK_QUEUE) {
		free(w->q[w->head]);
		w->q[w->head] = NULL;
		w->head = (w->head + 1) % SL_WEBHOOK_QUEUE;
		w->n--;
		atomic_fetch_add(&w->ops->webhook_dropped, 1);
	}
	w->q[(w->head + w->n) % SL_WEBHOOK_QUEUE] = body;
	w->n++;
	pthread_cond_broadcast(&w->cv);
	pthread_mutex_unlock(&w->mu);
}

void sl_webhook_stop(struct sl_webhook *w, int grace_ms)
{
	if (!w)
		return;
	pthread_mutex_lock(&w->mu);
	w->stopping = true;
	w->deadline_ms = sl_mono_ms() + grace_ms;
	pthread_cond_broadcast(&w->cv);
	pthread_mutex_unlock(&w->mu);
	pthread_join(w->th, NULL);
	for (int i = 0; i < SL_WEBHOOK_QUEUE; i++)
		free(w->q[i]);
	pthread_cond_destroy(&w->cv);
	pthread_mutex_destroy(&w->mu);
	free(w->url);
	free(w);
	curl_global_cleanup();
}
