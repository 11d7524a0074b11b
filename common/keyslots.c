/*
 * common/keyslots.c: an open-addressing index of byte keys (see keyslots.h).
 */
#include "common/keyslots.h"

#include <stdlib.h>
#include <string.h>

#include "common/util.h"

/* FNV-1a, with the high bits folded in (the index uses the low bits). */
uint64_t sl_hash_bytes(const void *p, size_t n)
{
	uint64_t h = sl_fnv1a(SL_FNV1A_BASIS, p, n);

	return h ^ (h >> 29);
}

/* A slot: the key's hash (low 32 bits) above its position + 1 (0: empty).
 * The hash picks the slot, tells most other keys apart without reading
 * them (an item the index does not hold is often far away in memory), and
 * lets the table grow without reading any key. */
static uint64_t slot_of(uint32_t hash, size_t pos)
{
	return (uint64_t)hash << 32 | (uint32_t)(pos + 1);
}

ssize_t sl_keyslots_find(const struct sl_keyslots *k, const void *key, size_t len, sl_key_of key_of,
			 const void *arr)
{
	size_t mask, i;
	uint32_t hash;

	if (!k->nslots)
		return -1;
	mask = k->nslots - 1;
	hash = (uint32_t)sl_hash_bytes(key, len);
	for (i = hash & mask; k->slots[i]; i = (i + 1) & mask) {
		size_t l, pos = (uint32_t)k->slots[i] - 1;
		const void *kk;
		if ((uint32_t)(k->slots[i] >> 32) != hash)
			continue;
		kk = key_of(arr, pos, &l);
		if (l == len && (len == 0 || memcmp(kk, key, len) == 0))
			return (ssize_t)pos;
	}
	return -1;
}

static void put(uint64_t *slots, size_t mask, uint64_t slot)
{
	size_t i = (uint32_t)(slot >> 32) & mask;

	while (slots[i])
		i = (i + 1) & mask;
	slots[i] = slot;
}

int sl_keyslots_reserve(struct sl_keyslots *k, size_t n)
{
	size_t ns;
	uint64_t *slots;

	if ((n + 1) * 2 <= k->nslots)
		return 0;
	ns = k->nslots ? k->nslots * 2 : k->min ? k->min : 256;
	while ((n + 1) * 2 > ns)
		ns *= 2;
	if (n + 1 > UINT32_MAX - 1 || !(slots = calloc(ns, sizeof *slots)))
		return -1;
	for (size_t i = 0; i < k->nslots; i++)
		if (k->slots[i])
			put(slots, ns - 1, k->slots[i]);
	free(k->slots);
	k->slots = slots;
	k->nslots = ns;
	return 0;
}

void sl_keyslots_put(struct sl_keyslots *k, const void *key, size_t len, size_t pos)
{
	put(k->slots, k->nslots - 1, slot_of((uint32_t)sl_hash_bytes(key, len), pos));
}

void sl_keyslots_clear(struct sl_keyslots *k)
{
	if (k->slots)
		memset(k->slots, 0, k->nslots * sizeof *k->slots);
}

void sl_keyslots_free(struct sl_keyslots *k)
{
	free(k->slots);
	k->slots = NULL;
	k->nslots = 0;
}
