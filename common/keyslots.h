/*
 * common/keyslots.h: an open-addressing index from byte keys to the
 * positions of items in an array that its user keeps (in first-seen order,
 * of any type): the merge batch and the compaction mirror of the Avro tree,
 * and the ClickHouse sink's merge batch.  The index never sees an item; the
 * user tells how to read the key of the item at a position.
 */
#ifndef SLUICE_COMMON_KEYSLOTS_H
#define SLUICE_COMMON_KEYSLOTS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* The key of the item at position i of arr (its bytes, and *len). */
typedef const void *(*sl_key_of)(const void *arr, size_t i, size_t *len);

struct sl_keyslots {
	uint64_t *slots;        /* the key's hash << 32 | its position + 1; 0: empty */
	size_t nslots;          /* a power of two, or 0 */
	size_t min;             /* slots of the first table (0: 256) */
};

uint64_t sl_hash_bytes(const void *p, size_t n);

/* The position of the item whose key is key, or -1. */
ssize_t sl_keyslots_find(const struct sl_keyslots *k, const void *key, size_t len, sl_key_of key_of,
			 const void *arr);
/* Makes room for one more than the n items indexed (the index stays at
 * most half full).  0, or -1 out of memory (nothing changed). */
int sl_keyslots_reserve(struct sl_keyslots *k, size_t n);
/* Indexes position pos under key, which is not indexed yet (room was
 * reserved). */
void sl_keyslots_put(struct sl_keyslots *k, const void *key, size_t len, size_t pos);
/* Forgets every position; keeps the table. */
void sl_keyslots_clear(struct sl_keyslots *k);
void sl_keyslots_free(struct sl_keyslots *k);

#endif
