/*
 * agent/config.h: the parsed configuration file (INI, see doc/configuration.md).
 *
 * sl_config_load() reads and validates a file.  Every problem is reported as
 * "FILE:LINE: message" (or "FILE: message" when no line applies).  Secrets are
 * resolved at load time (password_env, password_file) and never appear in an
 * error message.
 *
 * The agent owns [agent] and the stream keys; sources/source_conf.h owns the
 * [source.NAME] keys; each sink owns the keys of its [destination.NAME]
 * sections (sinks/sink.h), so a destination's settings are in
 * sl_dest_config.conf, a struct only its sink reads.  Everything in struct
 * sl_config belongs to it and is freed by sl_config_free().
 */
#ifndef SLUICE_AGENT_CONFIG_H
#define SLUICE_AGENT_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "common/log.h"
#include "sinks/sink.h"
#include "sources/source.h"

struct sl_stream_config {
	char *name;
	char *source_name;
	char *destination_name;
	struct sl_source_config *source;      /* resolved, points into sl_config */
	struct sl_dest_config *destination;   /* resolved, points into sl_config */
	char **tables;                        /* include globs "schema.table", NULL-terminated */
	char **exclude_tables;                /* exclude globs, NULL-terminated (may be empty) */
	char **key_columns;                   /* "schema.table.column" overrides of the tables' keys */
	bool backfill;                        /* backfill = auto (true) | none (false) */
	enum sl_write_mode write_mode;
	void *source_conf;                    /* the source's own stream keys (its stream_conf_size
					       * bytes, sl_source_ops.stream_conf_keys), or NULL */
	const char *slot;                     /* the source's "slot" key (in source_conf), or NULL */
	const char *publication;              /* the source's "publication" key (in source_conf), or NULL */
	uint64_t lag_warn_bytes;              /* default 256MB */
	uint64_t lag_critical_bytes;          /* default 2GB */
	uint64_t retained_wal_warn_bytes;     /* default 1GB */
	uint64_t freshness_warn_seconds;      /* default 300 */
	uint64_t retained_wal_critical_bytes; /* default 0 (off) */
	uint64_t retained_wal_growth_warn_bytes; /* per minute; default 64MB */
	uint64_t slot_inactive_warn_seconds;  /* default 120 */
	uint64_t log_purge_warn_seconds;      /* binlog sources; default 24h */
	uint64_t stream_down_warn_seconds;    /* default 60 */
	uint64_t heartbeat_interval;          /* seconds; 0 (default): no heartbeats */
	/* column selection and masking (schema/mask.h) */
	char **exclude_columns;               /* "schema.table.column" globs, NULL-terminated (may be empty) */
	char **mask_columns;                  /* "schema.table.column:method", NULL-terminated (may be empty) */
	char *mask_key;                       /* the hash method's key (mask_key_env / mask_key_file), or NULL */
	uint64_t status_interval_ms;          /* the source is told the durable position at least this
					       * often (postgres); default 1000 */
};

struct sl_config {
	char *path;                           /* as given (messages about the file) */
	char *abs_path;                       /* its absolute path (realpath): the recovery commands
					       * sluice prints work from any folder */
	/* [agent] */
	char *state_dir;                      /* default "./state" */
	enum sl_log_level log_level;          /* default info */
	enum sl_log_format log_format;        /* default text */
	char *metrics_listen;                 /* default "" (off: two agents on a host both start); "" disables */
	char *alert_webhook;                  /* NULL if unset */
	uint64_t queue_bytes;                 /* each stream's queue between reading and writing; default 8MB */
	uint64_t probe_interval;              /* seconds between lag probes; default 5 */
	uint64_t outage_log_interval;         /* seconds between "still unavailable" lines; default 60 */
	int nsources, ndestinations, nstreams;
	struct sl_source_config **sources;    /* each the source's own struct (sources/source_conf.h) */
	struct sl_dest_config *destinations;
	struct sl_stream_config *streams;
};

/* Loads and validates path.  Returns a config to free with sl_config_free(),
 * or NULL with the error in err ("FILE:LINE: message"). */
struct sl_config *sl_config_load(const char *path, char *err, size_t errlen);
/* Like sl_config_load, but reads the file from f, a stream open for reading
 * at its start (fmemopen's over a buffer, or a file's), and closes it (f
 * NULL: opening failed, errno says why).  path names the file in messages
 * and in cfg->path (cfg->abs_path is its realpath, or path itself when there
 * is no such file). */
struct sl_config *sl_config_load_stream(FILE *f, const char *path, char *err, size_t errlen);
void sl_config_free(struct sl_config *cfg);
/* Returns the stream called name, or NULL. */
struct sl_stream_config *sl_config_stream(struct sl_config *cfg, const char *name);

#endif
