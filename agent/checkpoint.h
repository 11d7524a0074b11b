/*
 * agent/checkpoint.h: the per-stream checkpoint store.
 *
 * One JSON file per stream in state_dir ("<stream>.checkpoint.json"), written
 * atomically (temporary file, fsync, rename, fsync of the directory).  It
 * holds the durable source position (everything up to it is in the sink and
 * may be acknowledged), the backfill state of every table, and the table
 * schema versions seen.
 */
#ifndef SLUICE_AGENT_CHECKPOINT_H
#define SLUICE_AGENT_CHECKPOINT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "schema/schema.h"

enum sl_bf_state { SL_BF_PENDING = 0, SL_BF_RUNNING, SL_BF_DONE, SL_BF_SKIPPED };

struct sl_ckpt_table {
	char *name;               /* "schema.table" (owned) */
	enum sl_bf_state state;
	uint64_t snapshot_lsn;    /* the snapshot of the running or finished backfill */
	uint64_t rows;            /* rows written by the finished backfill */
	char schema_key[17];      /* last schema version written */
};

struct sl_checkpoint {
	char *path;               /* owned */
	bool exists;              /* loaded from disk (false: a new stream) */
	char slot[64];
	bool slot_created;        /* the stream has had its slot */
	bool reset_slot;          /* `sluice backfill` asked for a new slot and a full backfill */
	uint64_t durable_lsn;     /* everything before is durable in the sink */
	int64_t last_source_ts_us;/* source time of the last durable change (0 unknown) */
	int64_t updated_us;       /* when this checkpoint was written */
	int ntables;
	struct sl_ckpt_table *tables;
};

/* Loads "<state_dir>/<stream>.checkpoint.json".  A missing file gives an empty
 * checkpoint with exists = false.  Returns 0, or -1 with err (a corrupt file
 * is an error, never silently reset). */
int sl_ckpt_load(struct sl_checkpoint *ck, const char *state_dir, const char *stream, char *err, size_t errlen);
/* Writes the checkpoint atomically.  0 or -1 with err. */
int sl_ckpt_save(struct sl_checkpoint *ck, char *err, size_t errlen);
void sl_ckpt_free(struct sl_checkpoint *ck);
/* Finds or adds the entry for "schema.table" (new entries are PENDING).  NULL when out of memory. */
struct sl_ckpt_table *sl_ckpt_table(struct sl_checkpoint *ck, const char *ns, const char *name);
const char *sl_bf_state_name(enum sl_bf_state s);

#endif
