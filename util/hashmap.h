/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/**
 * DOC: Intrusive hash map
 *
 * A chained hash table whose nodes (struct hmap_node) are embedded in the
 * objects they index. The map stores only the 64-bit hash of every node; the
 * caller compares keys while walking the chain of one hash with
 * hmap_for_each_hash(). Several nodes may carry equal keys (multimap).
 *
 * Hashes come from hash_bytes()/hash_str(), a SipHash-2-4 keyed with a
 * per-process random key, so clients choosing names cannot force collisions.
 *
 * The bucket array doubles when the load factor exceeds 1 and halves when it
 * falls below 1/8. A failed resize is not an error: the chains just get longer.
 * Only the very first insertion into an empty map can fail (-ENOMEM).
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct hmap_node {
	struct hmap_node *next;
	uint64_t hash;
};

struct hmap {
	struct hmap_node **buckets;
	size_t n_buckets; /* 0 or a power of two */
	size_t n_entries;
};

#define HMAP_INIT { NULL, 0, 0 }

void hmap_init(struct hmap *m);
/* Frees the bucket array; the nodes (if any) are not touched. */
void hmap_deinit(struct hmap *m);

/*
 * Make room for @n entries at once, for a caller that knows how many come
 * (a restore): no doubling and rehashing on the way there. A hint only: on
 * failure the map grows as it would have.
 */
void hmap_reserve(struct hmap *m, size_t n);

/* Link @n with @hash. Returns 0 or -ENOMEM (only if the map had no buckets). */
int hmap_insert(struct hmap *m, struct hmap_node *n, uint64_t hash);
/* Unlink @n, which must be linked in @m. */
void hmap_remove(struct hmap *m, struct hmap_node *n);

/* First node with @hash, or NULL; continue with hmap_next_hash(). */
struct hmap_node *hmap_first_hash(const struct hmap *m, uint64_t hash);
struct hmap_node *hmap_next_hash(const struct hmap_node *n);

#define hmap_for_each_hash(pos, m, h)                                          \
	for (struct hmap_node *pos = hmap_first_hash((m), (h)); pos;            \
	     pos = hmap_next_hash(pos))

/* Iterate all nodes in unspecified order; @n NULL starts. Do not modify. */
struct hmap_node *hmap_next(const struct hmap *m, const struct hmap_node *n);

static inline size_t hmap_size(const struct hmap *m)
{
	return m->n_entries;
}

uint64_t hash_bytes(const void *p, size_t n);
uint64_t hash_str(const char *s);
/* Mix two hashes into one (order-dependent). */
uint64_t hash_combine(uint64_t a, uint64_t b);
