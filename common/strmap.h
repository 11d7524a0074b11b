/*
 * common/strmap.h: a chained hash map from strings, intrusive: the
 * caller's struct embeds a struct sl_strmap_node as its first member (so
 * that a node is the caller's struct), sets the node's key and keeps it (the
 * map only points to it).  The map owns its buckets only: the caller frees
 * its nodes, walking the buckets (b[0..nb), each a list through next), the
 * order in which it also reads them all.  Objects by name in the tree of Avro
 * files (sinks/avro_tree/tree.c), the keys of a listing in its verify.c, and
 * tables by name in the clickhouse sink.
 */
#ifndef SLUICE_COMMON_STRMAP_H
#define SLUICE_COMMON_STRMAP_H

#include <stddef.h>

struct sl_strmap_node {
	struct sl_strmap_node *next;
	const char *key;
};

struct sl_strmap {
	struct sl_strmap_node **b;   /* nb buckets (a power of two), or NULL before the first */
	size_t nb, n;
};

/* Gives the empty map m nb buckets (a power of two): 0, or -1 out of
 * memory.  Without it, the first sl_strmap_add gives it 16. */
int sl_strmap_init(struct sl_strmap *m, size_t nb);
/* The node with key in m, or NULL. */
struct sl_strmap_node *sl_strmap_find(const struct sl_strmap *m, const char *key);
/* Adds node, its key set and not in m yet, doubling the buckets when m has
 * as many nodes: 0, or -1 out of memory (node not added). */
int sl_strmap_add(struct sl_strmap *m, struct sl_strmap_node *node);
/* Frees m's buckets (not its nodes). */
void sl_strmap_free(struct sl_strmap *m);

#endif
