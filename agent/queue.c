/*
 * agent/queue.c: the bounded single-producer, single-consumer record queue
 * (see queue.h).
 *
 * Each chunk has an atomic published end (pub) and an atomic next pointer.
 * The producer appends records at its private write offset and stores pub to
 * publish them; when a record does not fit it publishes the chunk's last
 * records, then links a new chunk.  The consumer reads records below pub;
 * having read all of a chunk whose next is set, it frees it.  The mutex
 * guards only the byte count and the two waits: a consumer that finds
 * nothing sets consumer_waiting and sleeps, and the producer, having stored
 * pub, signals it only when that flag is set.  Both the flag and pub are
 * sequentially consistent, so either the producer sees the flag or the
 * consumer sees the new records: no wake-up is lost.  A lazy publish leaves
 * the sleeper asleep until SL_QUEUE_WAKE_BYTES have gathered (its timed
 * wait bounds the delay either way), and the consumer spins briefly before
 * it sleeps at all, so a busy stream costs a wake-up per batch of bytes,
 * not per publish.
 */
#include "agent/queue.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>

#include "common/util.h"

#define HDR 8  /* each record starts with its length, a uint64_t */

struct chunk {
	_Atomic size_t pub;             /* bytes published */
	struct chunk *_Atomic next;     /* set once the producer moved on */
	size_t size;                    /* bytes of data */
	size_t wpos;                    /* producer only: bytes written */
	_Alignas(8) unsigned char data[];
};

struct sl_queue {
	pthread_mutex_t mu;
	pthread_cond_t not_empty, not_full;
	size_t cap;
	size_t bytes;                   /* data bytes of every chunk, under mu */
	size_t peak;                    /* under mu */
	size_t wakes;                   /* under mu: signals to a sleeping consumer */
	int nchunks;                    /* under mu */
	bool producer_waiting;          /* under mu */
	atomic_bool consumer_waiting;
	atomic_bool closed;
	size_t unwoken;                 /* producer only: bytes published lazily to a sleeping consumer */
	struct chunk *spare;            /* one emptied SL_QUEUE_CHUNK chunk, under mu */
	/* producer */
	struct chunk *tail;
	size_t reserved;                /* bytes of the pending reservation (with header) */
	/* consumer */
	struct chunk *head;
	size_t rpos;
};

static size_t align8(size_t n)
{
	return (n + 7) & ~(size_t)7;
}

static struct chunk *chunk_new(size_t size)
{
	struct chunk *c = malloc(sizeof *c + size);

	if (!c)
		return NULL;
	atomic_init(&c->pub, 0);
	atomic_init(&c->next, NULL);
	c->size = size;
	c->wpos = 0;
	return c;
}

struct sl_queue *sl_queue_new(size_t cap)
{
	struct sl_queue *q = calloc(1, sizeof *q);
	pthread_condattr_t ca;

	if (!q)
		return NULL;
	q->cap = cap ? cap : SL_QUEUE_DEFAULT_CAP;
	if (q->cap < SL_QUEUE_CHUNK)
		q->cap = SL_QUEUE_CHUNK;
	q->tail = q->head = chunk_new(SL_QUEUE_CHUNK);
	if (!q->tail) {
		free(q);
		return NULL;
	}
	q->bytes = q->peak = SL_QUEUE_CHUNK;
	q->nchunks = 1;
	atomic_init(&q->consumer_waiting, false);
	atomic_init(&q->closed, false);
	pthread_mutex_init(&q->mu, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&q->not_empty, &ca);
	pthread_cond_init(&q->not_full, &ca);
	pthread_condattr_destroy(&ca);
	return q;
}

void sl_queue_free(struct sl_queue *q)
{
	struct chunk *c, *next;

	if (!q)
		return;
	for (c = q->head; c; c = next) {
		next = atomic_load(&c->next);
		free(c);
	}
	free(q->spare);
	pthread_cond_destroy(&q->not_empty);
	pthread_cond_destroy(&q->not_full);
	pthread_mutex_destroy(&q->mu);
	free(q);
}

/* Publishes the tail's records; wakes a sleeping consumer when wake is set,
 * or once SL_QUEUE_WAKE_BYTES were published lazily while it slept. */
static void publish(struct sl_queue *q, bool wake)
{
	struct chunk *t = q->tail;
	size_t pub = atomic_load(&t->pub);

	if (pub == t->wpos)
		return;
	atomic_store(&t->pub, t->wpos);
	if (!atomic_load(&q->consumer_waiting)) {
		q->unwoken = 0;  /* it runs, and sees the records before it sleeps */
		return;
	}
	q->unwoken += t->wpos - pub;
	if (!wake && q->unwoken < SL_QUEUE_WAKE_BYTES)
		return;
	q->unwoken = 0;
	pthread_mutex_lock(&q->mu);
	q->wakes++;
	pthread_cond_signal(&q->not_empty);
	pthread_mutex_unlock(&q->mu);
}

void sl_queue_publish(struct sl_queue *q)
{
	publish(q, true);
}

void sl_queue_publish_lazy(struct sl_queue *q)
{
	publish(q, false);
}

/* True once the consumer has something to read (or the queue is closed):
 * what its wait waits for. */
static bool readable(void *arg)
{
	struct sl_queue *q = arg;
	struct chunk *c = q->head;

	return q->rpos < atomic_load(&c->pub) || atomic_load(&c->next) || atomic_load(&q->closed);
}

void *sl_queue_reserve(struct sl_queue *q, size_t n, int timeout_ms, bool *oom)
{
	size_t need = HDR + align8(n), size;
	struct chunk *t = q->tail, *c = NULL;
	struct timespec until;
	bool waited = false;

	*oom = false;
	if (atomic_load(&q->closed))
		return NULL;
	if (t->size - t->wpos >= need) {
		q->reserved = need;
		return t->data + t->wpos + HDR;
	}
	/* A new chunk: publish this one's records first, so the consumer can
	 * drain while the producer waits for room. */
	sl_queue_publish(q);
	size = need > SL_QUEUE_CHUNK ? need : SL_QUEUE_CHUNK;
	pthread_mutex_lock(&q->mu);
	while (!atomic_load(&q->closed) && q->nchunks > 1 && q->bytes + size > q->cap) {
		if (!waited) {
			until = sl_mono_deadline(timeout_ms);
			waited = true;
		}
		q->producer_waiting = true;
		if (timeout_ms <= 0 || pthread_cond_timedwait(&q->not_full, &q->mu, &until) != 0) {
			q->producer_waiting = false;
			pthread_mutex_unlock(&q->mu);
			return NULL;
		}
		q->producer_waiting = false;
	}
	if (atomic_load(&q->closed)) {
		pthread_mutex_unlock(&q->mu);
		return NULL;
	}
	if (size == SL_QUEUE_CHUNK && q->spare) {
		c = q->spare;
		q->spare = NULL;
		atomic_init(&c->pub, 0);
		atomic_init(&c->next, NULL);
		c->wpos = 0;
	}
	q->bytes += size;
	q->nchunks++;
	if (q->bytes > q->peak)
		q->peak = q->bytes;
	pthread_mutex_unlock(&q->mu);
	if (!c && !(c = chunk_new(size))) {
		pthread_mutex_lock(&q->mu);
		q->bytes -= size;
		q->nchunks--;
		pthread_mutex_unlock(&q->mu);
		*oom = true;
		return NULL;
	}
	atomic_store(&t->next, c);
	q->tail = c;
	q->reserved = need;
	return c->data + HDR;
}

void sl_queue_commit(struct sl_queue *q, size_t n)
{
	struct chunk *t = q->tail;
	uint64_t len = n;
	size_t need = HDR + align8(n);

	if (need > q->reserved)
		need = q->reserved;  /* a caller bug; never write past the reservation */
	*(uint64_t *)(void *)(t->data + t->wpos) = len;
	t->wpos += need;
	q->reserved = 0;
}

void *sl_queue_peek(struct sl_queue *q, int timeout_ms, size_t *len)
{
	struct timespec until;
	bool waited = false;

	for (;;) {
		struct chunk *c = q->head, *next;

		if (q->rpos < atomic_load(&c->pub)) {
			*len = (size_t)*(uint64_t *)(void *)(c->data + q->rpos);
			return c->data + q->rpos + HDR;
		}
		next = atomic_load(&c->next);
		if (next) {
			/* Everything of c was published before next was set. */
			if (q->rpos < atomic_load(&c->pub))
				continue;
			q->head = next;
			q->rpos = 0;
			pthread_mutex_lock(&q->mu);
			q->bytes -= c->size;
			q->nchunks--;
			if (c->size == SL_QUEUE_CHUNK && !q->spare) {
				q->spare = c;
				c = NULL;
			}
			if (q->producer_waiting)
				pthread_cond_signal(&q->not_full);
			pthread_mutex_unlock(&q->mu);
			free(c);
			continue;
		}
		if (timeout_ms <= 0 || waited)
			return NULL;
		waited = true;
		/* A producer that is running publishes again soon: spin briefly
		 * before going to sleep. */
		if (sl_spin_until(readable, q))
			continue;
		until = sl_mono_deadline(timeout_ms);
		pthread_mutex_lock(&q->mu);
		atomic_store(&q->consumer_waiting, true);
		if (!readable(q))
			pthread_cond_timedwait(&q->not_empty, &q->mu, &until);
		atomic_store(&q->consumer_waiting, false);
		pthread_mutex_unlock(&q->mu);
	}
}

void sl_queue_pop(struct sl_queue *q)
{
	struct chunk *c = q->head;
	uint64_t len = *(uint64_t *)(void *)(c->data + q->rpos);

	q->rpos += HDR + align8((size_t)len);
}

void sl_queue_close(struct sl_queue *q)
{
	pthread_mutex_lock(&q->mu);
	atomic_store(&q->closed, true);
	pthread_cond_broadcast(&q->not_empty);
	pthread_cond_broadcast(&q->not_full);
	pthread_mutex_unlock(&q->mu);
}

bool sl_queue_closed(struct sl_queue *q)
{
	return atomic_load(&q->closed);
}

/* A statistic kept under the mutex, read by any thread. */
static size_t stat_locked(struct sl_queue *q, const size_t *field)
{
	size_t n;

	pthread_mutex_lock(&q->mu);
	n = *field;
	pthread_mutex_unlock(&q->mu);
	return n;
}

size_t sl_queue_bytes(struct sl_queue *q)
{
	return stat_locked(q, &q->bytes);
}

size_t sl_queue_peak_bytes(struct sl_queue *q)
{
	return stat_locked(q, &q->peak);
}

size_t sl_queue_wakes(struct sl_queue *q)
{
	return stat_locked(q, &q->wakes);
}
