/*
 * sources/postgres/pgoutput.h: decoder for the pgoutput logical replication
 * protocol (version 1), turning XLogData payloads into change records.
 *
 * The decoder keeps the relation cache (OID -> table schema version).  A
 * Relation message that describes the same columns as the cached version
 * keeps that version; a different one creates a new version (a schema change)
 * and hands the old one to the caller in the event (retired): changes read
 * earlier may still point to it, so the caller frees it once they are
 * written.  Memory therefore stays bounded by the tables in use.
 *
 * Values in decoded changes are typed (the column text converted by
 * sl_pg_text_row); they point into the (writable) message buffer passed to
 * sl_pgoutput_decode() and into the decoder's own scratch buffers: they are
 * valid until the next call.
 */
#ifndef SLUICE_SOURCES_POSTGRES_PGOUTPUT_H
#define SLUICE_SOURCES_POSTGRES_PGOUTPUT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "schema/schema.h"
#include "sources/postgres/pg_text.h"

enum sl_pgo_kind {
	SL_PGO_NONE = 0,   /* nothing to report (e.g. a Type or Origin message) */
	SL_PGO_BEGIN,
	SL_PGO_COMMIT,
	SL_PGO_RELATION,   /* a relation was (re)described; schema_changed says if it changed */
	SL_PGO_CHANGE,     /* nchanges changes (an UPDATE with a key change gives 2; TRUNCATE one per table) */
	SL_PGO_MESSAGE,    /* a logical decoding message (pg_logical_emit_message) */
};

/* Looks up the primary-key columns of a table from the catalog, so that a
 * REPLICA IDENTITY FULL table (where pgoutput flags every column as key)
 * still reports its real key.  Returns true and sets is_key[] for ncols
 * columns named in names[]; false if the table's key is not known. */
typedef bool (*sl_pgo_key_lookup)(void *payload, const char *ns, const char *name, int ncols,
				  char *const *names, bool *is_key);

#define SL_PGO_MAX_CHANGES 2

struct sl_pgo_event {
	enum sl_pgo_kind kind;
	/* BEGIN */
	uint64_t final_lsn;      /* also kept for RELATION and CHANGE: the commit LSN of the open transaction */
	int64_t commit_ts_us;    /* Unix micros */
	uint32_t xid;
	/* COMMIT */
	uint64_t commit_lsn;
	uint64_t end_lsn;
	/* RELATION */
	const struct sl_table *table;  /* its columns' in_identity: the message's replica identity flags */
	bool schema_changed;     /* a different column list than the previous version */
	struct sl_table *retired; /* with schema_changed: the previous version, now the caller's to free */
	/* CHANGE: filled sl_change records (csn, csn_pos, seq, tx_id, source_ts, op,
	 * values, table, read_method set; pos, read_ts and uuid left to the caller).
	 * TRUNCATE events give one change per truncated table through
	 * sl_pgoutput_truncate_next(). */
	int nchanges;
	struct sl_change changes[SL_PGO_MAX_CHANGES];
	/* MESSAGE */
	const char *prefix;
	const char *content;
	uint32_t content_len;
	bool transactional;
	uint64_t message_lsn;    /* where it was written */
};

struct sl_pgoutput;

/* Creates a decoder.  lookup may be NULL.  Returns NULL when out of memory. */
struct sl_pgoutput *sl_pgoutput_new(sl_pgo_key_lookup lookup, void *payload);
void sl_pgoutput_free(struct sl_pgoutput *d);

/* sl_pgoutput_decode's return for a value whose text does not convert. */
#define SL_PGO_EVALUE (-2)

/* Decodes one pgoutput message (the XLogData payload, starting with the
 * message type byte).  Returns 0 with *ev filled, -1 with a message in err
 * (a malformed message, a change for a relation never described), or
 * SL_PGO_EVALUE when a value's text does not convert (sl_pg_text_row), with
 * err naming the table, the commit LSN, the column and the value.  msg is
 * writable and overwritten: bytea values are decoded in place (pg_text.h),
 * so that a large one is not copied; decode a message once. */
int sl_pgoutput_decode(struct sl_pgoutput *d, unsigned char *msg, size_t len,
		       struct sl_pgo_event *ev, char *err, size_t errlen);

/* For a TRUNCATE message the event has nchanges == 0 and this iterator hands
 * out one TRUNCATE change per relation: returns 1 with *out filled, 0 when done. */
int sl_pgoutput_truncate_next(struct sl_pgoutput *d, struct sl_change *out);

/* Adds flags (SL_PG_PARTITIONED: what the catalog knows and a Relation
 * message does not say) to relid's table. */
void sl_pgoutput_set_src_flags(struct sl_pgoutput *d, uint32_t relid, unsigned flags);


/* Marks relation relid (already described) as one the caller does not
 * follow: its changes are skipped unread (SL_PGO_NONE) and counted, and it is
 * left out of TRUNCATE events, until a Relation message describes it anew
 * (another name or other columns), which the caller decides on again. */
void sl_pgoutput_ignore(struct sl_pgoutput *d, uint32_t relid);
/* Changes skipped so far. */
uint64_t sl_pgoutput_ignored(const struct sl_pgoutput *d);
/* Marks relation relid (already described): its changes in transactions
 * that commit below lsn (UINT64_MAX: every one; 0: none) are decoded all
 * the same, each taking its sequence number in the transaction, and then
 * dropped (SL_PGO_NONE; left out of TRUNCATE events), until a Relation
 * message describes it anew (another name or other columns), which the
 * caller decides on again.  Decided once per Relation message, checked per
 * change by one comparison with the transaction's commit LSN. */
void sl_pgoutput_drop_below(struct sl_pgoutput *d, uint32_t relid, uint64_t lsn);
/* The current version of relation relid (the decoder's: the one its last
 * Relation event gave), for the source to complete from the catalog (its
 * columns' missing values); NULL when relid is unknown. */
struct sl_table *sl_pgoutput_table_mut(struct sl_pgoutput *d, uint32_t relid);
/* Gives text (malloc'd; the decoder owns it from here, also on failure) to
 * the current version of relation relid as its src_columns (see
 * schema/schema.h), replacing what it had; freed when relid is unknown. */
void sl_pgoutput_set_src_columns(struct sl_pgoutput *d, uint32_t relid, char *text);

/* True while a transaction is open (between BEGIN and COMMIT). */
bool sl_pgoutput_in_tx(const struct sl_pgoutput *d);

/* The decoder's counters of the text conversion (decimal NaNs written as
 * null), valid until sl_pgoutput_free. */
const struct sl_pg_text_stats *sl_pgoutput_text_stats(const struct sl_pgoutput *d);

/* The current version of a relation, or NULL. */
const struct sl_table *sl_pgoutput_table(const struct sl_pgoutput *d, uint32_t relid);

#endif
