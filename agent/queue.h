/*
 * agent/queue.h: a queue of variable-size records, bounded in bytes, between
 * one producer thread (the stream's reader) and one consumer thread (its
 * writer).
 *
 * Records are written in place into chunks of memory (SL_QUEUE_CHUNK bytes,
 * or one record's size when larger) and read in place by the consumer, so a
 * record is copied once, by its producer.  The bound counts the chunks
 * allocated: the producer waits while a new chunk would take the total past
 * the cap, except that a queue holding nothing always takes one chunk, so a
 * single record larger than the cap still passes (alone).  One emptied chunk
 * is kept for reuse.
 *
 * The producer's writes become visible in order, at sl_queue_publish().
 * Waits use CLOCK_MONOTONIC and a timeout, so that neither side ever blocks
 * for longer than it asked: the reader must keep acknowledging its source
 * while the writer is slow.
 *
 * sl_queue_close() wakes both sides: the producer's reserve fails at once,
 * and the consumer still reads what was published, then gets nothing.
 */
#ifndef SLUICE_AGENT_QUEUE_H
#define SLUICE_AGENT_QUEUE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SL_QUEUE_CHUNK ((size_t)256 * 1024)
#define SL_QUEUE_DEFAULT_CAP ((size_t)8 << 20)
/* A lazy publish wakes a sleeping consumer once this many bytes gathered. */
#define SL_QUEUE_WAKE_BYTES ((size_t)128 * 1024)

struct sl_queue;

/* A queue bounded at cap bytes (0: SL_QUEUE_DEFAULT_CAP; at least one chunk).
 * NULL when out of memory. */
struct sl_queue *sl_queue_new(size_t cap);
/* Frees the queue and every record still in it; no thread may use it. */
void sl_queue_free(struct sl_queue *q);

/* Producer: room for a record of n bytes, 8-byte aligned.  Waits up to
 * timeout_ms for room (publishing what was written first, so the consumer can
 * drain).  Returns the record's memory, or NULL when the wait timed out or the
 * queue is closed (sl_queue_closed tells which) or out of memory (*oom set).
 * The record counts once sl_queue_commit() is called; reserving again
 * without committing reuses the same memory. */
void *sl_queue_reserve(struct sl_queue *q, size_t n, int timeout_ms, bool *oom);
/* Producer: the reserved record (n bytes, at most what was reserved) is done. */
void sl_queue_commit(struct sl_queue *q, size_t n);
/* Producer: makes every committed record visible to the consumer, and wakes
 * it if it sleeps. */
void sl_queue_publish(struct sl_queue *q);
/* Producer: makes every committed record visible to the consumer, but wakes
 * a sleeping consumer only once SL_QUEUE_WAKE_BYTES were published since it
 * went to sleep (a batch inside a transaction; sl_queue_publish at its end). */
void sl_queue_publish_lazy(struct sl_queue *q);

/* Consumer: the next published record, waiting up to timeout_ms (0: do not
 * wait).  *len receives its size.  NULL when nothing came.  The memory stays
 * valid until sl_queue_pop(). */
void *sl_queue_peek(struct sl_queue *q, int timeout_ms, size_t *len);
/* Consumer: done with the record peek returned. */
void sl_queue_pop(struct sl_queue *q);

/* Either side: wakes the other and makes every later reserve fail. */
void sl_queue_close(struct sl_queue *q);
bool sl_queue_closed(struct sl_queue *q);

/* Statistics, any thread: bytes held in chunks now, and the most ever held. */
size_t sl_queue_bytes(struct sl_queue *q);
size_t sl_queue_peak_bytes(struct sl_queue *q);
/* Statistics, any thread: how often a publish woke the sleeping consumer. */
size_t sl_queue_wakes(struct sl_queue *q);

#endif
