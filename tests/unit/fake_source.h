/*
 * tests/unit/fake_source.h: a test-only source and sink for the pipeline's
 * unit tests, without any server.
 *
 * The fake source behaves like a binlog reader: positions are (file number,
 * offset), as MySQL's are, so the agent is exercised with positions that are
 * not PostgreSQL LSNs.  It plays a script of transactions over one table,
 * resumes from the position start() gets by skipping whole transactions
 * that end at or before it, rotates to a new file every few transactions,
 * and records every ack().
 *
 * The fake sink keeps the records it was given: written ones as pending,
 * moved to durable by a successful flush.  It can be told to block in a
 * flush, to fail the Nth flush, and to keep only counts (for million-row
 * transactions).  Every ack the source receives is checked against what the
 * sink holds durable at that moment.
 */
#ifndef SLUICE_TESTS_FAKE_SOURCE_H
#define SLUICE_TESTS_FAKE_SOURCE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "schema/schema.h"
#include "sinks/sink.h"
#include "sources/source.h"

extern const struct sl_source_desc fake_desc;
extern const struct sl_source_ops fake_source_ops;
extern const struct sl_sink_ops fake_sink_ops;
/* The same sink with flush_start()/flush_wait(): a batch becomes durable
 * only when it is waited for. */
extern const struct sl_sink_ops fake_sink_two_step_ops;

/* Makes a fake position. */
struct sl_position fake_pos(uint32_t file, uint32_t offset);

struct fake_sink;

/* The script and the recordings, shared by the source, the sink and the test. */
struct fake_world {
	pthread_mutex_t mu;
	/* script */
	uint64_t ntx;                 /* transactions (UINT64_MAX: endless) */
	uint32_t changes_per_tx;
	uint32_t tx_per_file;         /* rotate after this many transactions */
	uint32_t value_bytes;         /* size of the text column */
	struct sl_table *table;       /* id (key), payload */
	bool idle_heartbeats;         /* after the script: heartbeats at its end, as a binlog
				       * server sends them (the position does not move) */
	uint64_t heartbeats;          /* heartbeats returned */
	uint32_t key_change_at;       /* change k of each transaction is an UPDATE-DELETE, k + 1 its
				       * UPDATE-INSERT (0: every change is an INSERT) */
	atomic_int *drain_after_move; /* set to 1 as the first UPDATE-DELETE of the second transaction
				       * is returned: a SIGTERM between the two halves (NULL: none) */
	/* source state */
	uint64_t next_tx;             /* the next transaction to play */
	uint32_t next_change;         /* within it; 0: BEGIN next */
	bool commit_next;
	struct sl_position start_pos;
	bool started;
	int64_t status_interval_ms;
	/* ack recordings */
	uint64_t acks;
	bool has_acked;
	struct sl_position acked;     /* highest */
	uint64_t ack_violations;      /* acks beyond the sink's durable position, or going back */
	uint64_t reply_requests;
	/* sink */
	struct fake_sink *sink;
	atomic_int flush_delay_ms;    /* each flush sleeps this long (0: none) */
	int fail_flush_at;            /* the Nth flush fails (0: never) */
	bool counts_only;             /* keep no records, only counts */
	uint32_t dead_every;          /* every Nth change written counts as a dead letter (0: none) */
	uint64_t flushes;
	uint64_t flushes_entered;     /* flushes begun (before their delay) */
	uint64_t flush_starts;        /* two-step flushes started (fake_sink_two_step_ops) */
	bool has_durable;
	struct sl_position durable;   /* what the sink reported durable last */
	uint64_t durable_records;     /* records made durable (counts) */
	uint64_t pending_records;
	/* the last discard_backfill's CSN range ("" when none) */
	char discard_first[SL_CSN_LEN + 1], discard_last[SL_CSN_LEN + 1];
	uint64_t discards;
	/* records made durable, when not counts_only: "CSN uuid-hex id" lines */
	char **durable_lines;
	size_t ndurable_lines, adurable_lines;
};

void fake_world_init(struct fake_world *w, uint64_t ntx, uint32_t changes_per_tx);
/* Contexts for fake_source_ops and fake_sink_ops over w (their close() frees them). */
void *fake_source_new(struct fake_world *w);
void *fake_sink_new(struct fake_world *w);
void fake_world_free(struct fake_world *w);
/* The position at the end of transaction tx (0-based). */
struct sl_position fake_tx_end(const struct fake_world *w, uint64_t tx);

#endif
