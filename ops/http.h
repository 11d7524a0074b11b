/*
 * ops/http.h: the agent's HTTP endpoint ([agent] metrics_listen):
 *
 *   GET /metrics   the registry in Prometheus text format 0.0.4
 *   GET /healthz   readiness: 200 while every stream runs and no critical
 *                  alert fires, else 503 with one line per stream saying why
 *   GET /livez     liveness: 200 while every stream's probe and writer make
 *                  progress, whatever the source does; else 503
 *
 * Read-only: any other path is 404, any other method 405.  libmicrohttpd
 * serves it from a thread of its own, so a scrape never touches a stream's
 * threads beyond reading their atomics (and each stream's mutex for the
 * probe's last sample, held for a copy, and the queue's, for its size;
 * neither is ever held across a wait).  /livez reads atomics only, so it
 * answers even while every other thread is stuck.
 */
#ifndef SLUICE_OPS_HTTP_H
#define SLUICE_OPS_HTTP_H

#include <stddef.h>

#include "ops/metrics.h"

struct sl_http;

/* Listens on listen ("HOST:PORT" or "[IPV6]:PORT"; HOST may be a name).
 * NULL with err when the address does not resolve or cannot be bound. */
struct sl_http *sl_http_start(const char *listen, struct sl_ops *ops, char *err, size_t errlen);
/* Binds listen as sl_http_start() would, and closes it again: 0 when the
 * endpoint can start, else -1 with err (`sluice check`). */
int sl_http_check(const char *listen, char *err, size_t errlen);
/* Stops serving and frees h (NULL is ignored). */
void sl_http_stop(struct sl_http *h);

#endif
