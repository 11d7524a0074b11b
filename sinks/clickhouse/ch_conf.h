/*
 * sinks/clickhouse/ch_conf.h: the clickhouse destination's configuration:
 * its key table (doc/configuration.md, "type = clickhouse"), what the keys
 * mean for the HTTP client, and `sluice check`.  Internal to the sink.
 */
#ifndef SLUICE_SINKS_CLICKHOUSE_CH_CONF_H
#define SLUICE_SINKS_CLICKHOUSE_CH_CONF_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "sinks/clickhouse/ch_http.h"
#include "sinks/clickhouse/clickhouse.h"

/* The keys of [destination.NAME] with type = clickhouse. */
#define CH_CONF_NKEYS 19
extern const struct sl_keydesc ch_conf_keys[CH_CONF_NKEYS];

/* The default dead-letter file of a stream: "<database>.<stream>.dead-
 * letter.jsonl" in the working directory, "/" in the database name as "_".
 * malloc'd; NULL when out of memory. */
char *ch_default_dl_path(const char *db, const char *stream);

/* The HTTP client's settings for configuration c (strings borrowed from c),
 * retrying failed requests for retry_ms. */
void ch_http_conf_of(const struct sl_ch_conf *c, struct ch_http_conf *hc, int64_t retry_ms);

/* Rules across keys (struct sl_sink_ops.conf_check): distributed needs
 * cluster. */
int ch_conf_check(const void *conf, const struct sl_ini_section *sec, struct sl_keyerr *er);
/* `sluice check` (struct sl_sink_ops.check): read-only; one line per check. */
int ch_check(const void *conf, const struct sl_sink_stream *st, FILE *out, char *err, size_t errlen);

#endif
