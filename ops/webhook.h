/*
 * ops/webhook.h: alert notifications POSTed as JSON to [agent] alert_webhook.
 *
 * A thread of its own sends them, one at a time, in order, from a bounded
 * queue: sl_webhook_send() only copies the event into the queue and never
 * waits, so a slow or unreachable receiver delays nothing else.  Each
 * notification is tried up to SL_WEBHOOK_TRIES times (timeout
 * SL_WEBHOOK_TIMEOUT_MS each, 1 s then 2 s apart); a full queue drops its
 * oldest notification.  Sent, failed and dropped notifications are counted
 * in the registry (sluice_webhook_*_total), and failures are logged.
 *
 * The payload (doc/operations.md, "Webhook payload") serves both kinds of
 * receiver: "text" is what Slack-style incoming webhooks show; "version",
 * "status", "alerts" (with "labels", "annotations", "startsAt", "endsAt")
 * and the group fields follow Alertmanager's webhook payload, version 4.
 */
#ifndef SLUICE_OPS_WEBHOOK_H
#define SLUICE_OPS_WEBHOOK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ops/alerts.h"
#include "ops/metrics.h"

#define SL_WEBHOOK_QUEUE 256
#define SL_WEBHOOK_TRIES 3
#define SL_WEBHOOK_TIMEOUT_MS 5000

struct sl_alert_event {
	const char *stream;
	enum sl_alert_id id;
	bool firing;                  /* fired, or resolved */
	const char *message;
	int64_t starts_us;            /* when it fired */
	int64_t ends_us;              /* when it resolved (0 while firing) */
	const char *host;             /* the agent's host name, for the receiver */
};

/* The JSON payload for ev (malloc'd, the caller frees it); NULL when out of
 * memory. */
char *sl_webhook_payload(const struct sl_alert_event *ev);

struct sl_webhook;

/* Starts the sender thread for url; counters go to ops.  NULL with err when
 * it cannot start. */
struct sl_webhook *sl_webhook_start(const char *url, struct sl_ops *ops, char *err, size_t errlen);
/* Queues ev (copied).  Never blocks on the network. */
void sl_webhook_send(struct sl_webhook *w, const struct sl_alert_event *ev);
/* Sends what is queued for at most grace_ms, then stops the thread and
 * frees w.  NULL is ignored. */
void sl_webhook_stop(struct sl_webhook *w, int grace_ms);

#endif
