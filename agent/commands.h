/*
 * agent/commands.h: `sluice check`, `sluice verify`, `sluice status` and
 * `sluice backfill`
 * for one stream.  Each returns an enum sl_status with the message in err.
 */
#ifndef SLUICE_AGENT_COMMANDS_H
#define SLUICE_AGENT_COMMANDS_H

#include <stddef.h>

#include "agent/config.h"

/* `sluice check`: validates the stream's source and destination without
 * changing anything.  Prints one line per check to stdout. */
int sl_stream_check(struct sl_config *cfg, struct sl_stream_config *sc, char *err, size_t errlen);

/* `sluice verify`: reads the stream's output back through its sink and
 * checks it against the manifests, printing what it finds to stdout.
 * Returns SL_OK, SL_EVERIFY (common/util.h) when it found
 * problems, or another status with the message in err. */
int sl_stream_verify(struct sl_config *cfg, struct sl_stream_config *sc, char *err, size_t errlen);

/* `sluice compact`: folds the stream's merge-mode output (of table, a
 * "SCHEMA.TABLE", or of every table when NULL) into a new base per table
 * through its sink, printing a line per table to stdout.  SL_ECONFIG when
 * the stream is not in merge mode or its destination cannot compact. */
int sl_stream_compact(struct sl_config *cfg, struct sl_stream_config *sc, const char *table, char *err,
		      size_t errlen);

/* `sluice status`: sets the stream's status fields on the JSON object
 * out_json (a jansson json_t *): checkpoint, the source's position holder,
 * backfill state per table, and the alerts that fire. */
int sl_stream_status(struct sl_config *cfg, struct sl_stream_config *sc, void *out_json,
		     char *err, size_t errlen);

/* `sluice backfill`: marks tables (all, or the one named "schema.table") for a
 * new backfill on the next run; when the slot is gone, asks for a new one. */
int sl_stream_request_backfill(struct sl_config *cfg, struct sl_stream_config *sc, const char *table,
			       char *err, size_t errlen);

#endif
