/*
 * common/strmap.c: the chained hash map from strings (strmap.h).
 */
#include "common/strmap.h"

#include <stdlib.h>
#include <string.h>

#include "common/util.h"

static size_t slot(const char *key, size_t nb)
{
	return (size_t)sl_fnv1a(SL_FNV1A_BASIS, key, strlen(key)) & (nb - 1);
}

int sl_strmap_init(struct sl_strmap *m, size_t nb)
{
	if (!(m->b = calloc(nb, sizeof *m->b)))
		return -1;
	m->nb = nb;
	m->n = 0;
	return 0;
}

struct sl_strmap_node *sl_strmap_find(const struct sl_strmap *m, const char *key)
{
	struct sl_strmap_node *e;

	if (!m->nb)
		return NULL;
	for (e = m->b[slot(key, m->nb)]; e && strcmp(e->key, key); e = e->next)
		;
	return e;
}

/* Moves every node of m into twice as many buckets. */
static int grow(struct sl_strmap *m)
{
	size_t nb = m->nb * 2;
	struct sl_strmap_node **nt = calloc(nb, sizeof *nt);

	if (!nt)
		return -1;
	for (size_t i = 0; i < m->nb; i++) {
		struct sl_strmap_node *e, *next;
		for (e = m->b[i]; e; e = next) {
			size_t k = slot(e->key, nb);
			next = e->next;
			e->next = nt[k];
			nt[k] = e;
		}
	}
	free(m->b);
	m->b = nt;
	m->nb = nb;
	return 0;
}

int sl_strmap_add(struct sl_strmap *m, struct sl_strmap_node *node)
{
	size_t k;

	if (!m->nb && sl_strmap_init(m, 16) < 0)
		return -1;
	if (m->n >= m->nb && grow(m) < 0)
		return -1;
	k = slot(node->key, m->nb);
	node->next = m->b[k];
	m->b[k] = node;
	m->n++;
	return 0;
}

void sl_strmap_free(struct sl_strmap *m)
{
	free(m->b);
	m->b = NULL;
	m->nb = m->n = 0;
}
