/*
 * agent/checkpoint.h: the per-stream checkpoint store.
 *
 * One JSON file per stream in state_dir ("<stream>.checkpoint.json"), written
 * atomically (temporary file, fsync, rename, fsync of the directory).  It
 * holds the durable source position (everything up to it is in the sink and
 * may be acknowledged), the backfill state of every table, and the table
 * schema versions seen.  Positions are stored as their source kind encodes
 * them (struct sl_source_desc), with the kind named in the file:
 *
 *   {"format": 2, "source": "postgres", "slot": "sluice_s1",
 *    "has_position": true, "reset": false, "durable": "0/16B3748",
 *    "last_source_ts_us": ..., "updated_us": ...,
 *    "tables": {"public.t": {"backfill": "done", "snapshot": "0/16B3700",
 *                            "rows": 10, "schema_key": "...", "id": 16385,
 *                            "shape": 0, "method": "snapshot", "layout": ...,
 *                            "columns": "16390\n1 23 -1 0 0 2 id\n",
 *                            "mask": "email:hash, ssn:exclude (key 0a1b2c3d4e5f6a7b)",
 *                            "marker_csn": 23803649, "marker_ts_us": ...},
 *               "public.u": {"backfill": "running", "method": "watermark",
 *                            "resume_key": "42", "chunks": 3, "rows": 30000,
 *                            ...}}}
 *
 * A running backfill read in chunks keeps, in resume_key, the key of the
 * last row of the longest run of its chunks from the start whose rows are
 * durable (a source's key text, see sources/source.h); the next run reads
 * only the rows after it.  "method" says how the table is (or was last)
 * read: "snapshot" (in a snapshot taken before streaming) or "watermark"
 * (in chunks while streaming).
 *
 * Format 1 (sluice 0.1, PostgreSQL only: "durable_lsn", "slot_created",
 * "reset_slot", "snapshot_lsn") still loads, for a postgres source; the next
 * save writes format 2.
 */
#ifndef SLUICE_AGENT_CHECKPOINT_H
#define SLUICE_AGENT_CHECKPOINT_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "schema/schema.h"

/* A table's backfill state.  DROPPED: the table is gone from the source (or
 * renamed); its object got a TRUNCATE marker and nothing more is written. */
enum sl_bf_state { SL_BF_PENDING = 0, SL_BF_RUNNING, SL_BF_DONE, SL_BF_SKIPPED, SL_BF_DROPPED };

/* How a table is backfilled: in a snapshot before streaming (every row at
 * the snapshot's position), or in chunks while streaming (the watermark
 * method, each chunk's rows at its high watermark). */
enum sl_bf_method { SL_BF_SNAPSHOT = 0, SL_BF_WATERMARK };

struct sl_ckpt_table {
	char *name;               /* "schema.table" (owned): the key in the file and in messages */
	char *ns, *table;         /* the two parts (owned) */
	enum sl_bf_state state;
	struct sl_position snapshot; /* the snapshot of the running or finished backfill */
	uint64_t id;              /* the source's identity of the table (PostgreSQL OID); 0 unknown */
	uint64_t shape;           /* sl_table.shape when last backfilled */
	uint64_t layout;          /* sl_table.layout as of the durable position (0: none) */
	char *columns;            /* sl_table.src_columns at the last start (owned; NULL unknown) */
	char *mask;               /* what the column rules did to it at the last start
				   * (sl_stream_mask_rules; "" none; owned; NULL unknown) */
	uint64_t rows;            /* rows written by the finished backfill (running: durable so far) */
	char schema_key[17];      /* the source's version the sink last got (a backfill's, or the log's) */
	enum sl_bf_method method; /* how the running or last backfill reads the table */
	char *resume_key;         /* running: rows up to this key (a source's key text) are durable;
				   * NULL: none yet (owned) */
	uint64_t chunks;          /* running: chunks durable so far */
	bool resumed;             /* a snapshot backfill resumed after an interruption: the rows
				   * before the resume key are from an earlier snapshot, so the
				   * snapshot does not hold every change before it */
	struct sl_position since; /* the running or finished backfill read every row it wrote
				   * after this position (its first snapshot, or its job's start
				   * while streaming, kept when it resumes), so they hold every
				   * change before it */
	bool has_since;           /* false: unknown (a checkpoint written before it was kept) */
	uint64_t marker_csn;      /* the CSN position of the table's last TRUNCATE marker (0: none) */
	int64_t marker_ts_us;     /* its source_timestamp: a marker written again at the same CSN
				   * (a replay after a crash) takes it, so that it is the same
				   * record (saved before the marker can be durable) */
	/* The writer's, never saved: progress written to the sink but not yet
	 * flushed; the next flush makes it durable and moves it above. */
	struct {
		bool set;
		char *key;        /* owned */
		uint64_t rows, chunks;
	} pend;
};

struct sl_checkpoint {
	char *path;               /* owned */
	const struct sl_source_desc *desc; /* the source kind whose positions these are */
	bool exists;              /* loaded from disk (false: a new stream) */
	char slot[64];            /* postgres: the slot it belongs to ("" otherwise) */
	bool has_position;        /* the stream has had a log position (its slot was created) */
	bool reset;               /* `sluice backfill` asked for a new position and a full backfill */
	struct sl_position durable; /* everything before is durable in the sink (with has_position) */
	int64_t last_source_ts_us;/* source time of the last durable change (0 unknown) */
	int64_t updated_us;       /* when this checkpoint was written */
	int ntables;
	struct sl_ckpt_table *tables;
	_Atomic uint64_t saves;   /* how often sl_ckpt_save wrote the file (or tried to) since the
				   * load: another thread that read the file can tell whether it
				   * changed since, without reading it again */
};

/* Loads "<state_dir>/<stream>.checkpoint.json" for a stream whose source
 * kind is desc.  A missing file gives an empty checkpoint with exists =
 * false.  Returns 0, or a negative enum sl_status with err; none of them is
 * worth retrying, and the file is never changed or silently reset:
 *   SL_ELOST    the file is corrupt: the stream's position is unknown (the
 *               caller adds how to recover: sl_ckpt_set_aside(), or restore it)
 *   SL_ECONFIG  the file cannot be read (permissions), was written for
 *               another source kind, or has a format this sluice does not know
 *   SL_EFAIL    out of memory */
int sl_ckpt_load(struct sl_checkpoint *ck, const struct sl_source_desc *desc, const char *state_dir,
		 const char *stream, char *err, size_t errlen);
/* Renames the checkpoint file of ck (loaded or not) to "<path>.corrupt"
 * (replacing an older one), so that the stream starts without one.  0, or
 * -1 with err. */
int sl_ckpt_set_aside(const struct sl_checkpoint *ck, char *err, size_t errlen);
/* Writes the checkpoint atomically.  0 or -1 with err. */
int sl_ckpt_save(struct sl_checkpoint *ck, char *err, size_t errlen);
void sl_ckpt_free(struct sl_checkpoint *ck);
/* Finds or adds the entry for "schema.table" (new entries are PENDING).  NULL when out of memory. */
struct sl_ckpt_table *sl_ckpt_table(struct sl_checkpoint *ck, const char *ns, const char *name);
/* The entry for ns.table, or NULL when the checkpoint has none. */
const struct sl_ckpt_table *sl_ckpt_find(const struct sl_checkpoint *ck, const char *ns, const char *table);
const char *sl_bf_state_name(enum sl_bf_state s);
const char *sl_bf_method_name(enum sl_bf_method m);
/* Sets e's durable resume key (copied; NULL clears it).  -1 when out of memory. */
int sl_ckpt_set_resume(struct sl_ckpt_table *e, const char *key);

#endif
