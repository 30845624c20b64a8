/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Intrusive chained hash map and a keyed SipHash-2-4 (see hashmap.h).
 */

#include <endian.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include "util/hashmap.h"

#define HMAP_MIN_BUCKETS 8

static uint64_t hash_key[2];
static pthread_once_t hash_key_once = PTHREAD_ONCE_INIT;

static void hash_key_init(void)
{
	uint64_t k[2];

	/* A fixed fallback key is safe, merely predictable. */
	if (getrandom(k, sizeof(k), GRND_NONBLOCK) != (ssize_t)sizeof(k)) {
		k[0] = 0x736f6d6570736575ULL ^ (uint64_t)(uintptr_t)&k;
		k[1] = 0x646f72616e646f6dULL;
	}
	hash_key[0] = k[0];
	hash_key[1] = k[1];
}

static inline uint64_t rotl64(uint64_t x, int b)
{
	return (x << b) | (x >> (64 - b));
}

#define SIPROUND(v0, v1, v2, v3)                                               \
	do {                                                                   \
		v0 += v1; v1 = rotl64(v1, 13); v1 ^= v0; v0 = rotl64(v0, 32);  \
		v2 += v3; v3 = rotl64(v3, 16); v3 ^= v2;                        \
		v0 += v3; v3 = rotl64(v3, 21); v3 ^= v0;                        \
		v2 += v1; v1 = rotl64(v1, 17); v1 ^= v2; v2 = rotl64(v2, 32);  \
	} while (0)

static uint64_t siphash24(const void *data, size_t n, const uint64_t k[2])
{
	const uint8_t *p = data;
	uint64_t v0 = 0x736f6d6570736575ULL ^ k[0];
	uint64_t v1 = 0x646f72616e646f6dULL ^ k[1];
	uint64_t v2 = 0x6c7967656e657261ULL ^ k[0];
	uint64_t v3 = 0x7465646279746573ULL ^ k[1];
	uint64_t b = (uint64_t)n << 56;
	size_t i, tail = n & 7;

	for (i = 0; i + 8 <= n; i += 8) {
		uint64_t m;

		memcpy(&m, p + i, 8);
		m = le64toh(m);
		v3 ^= m;
		SIPROUND(v0, v1, v2, v3);
		SIPROUND(v0, v1, v2, v3);
		v0 ^= m;
	}
	for (size_t j = 0; j < tail; j++)
		b |= (uint64_t)p[i + j] << (8 * j);
	v3 ^= b;
	SIPROUND(v0, v1, v2, v3);
	SIPROUND(v0, v1, v2, v3);
	v0 ^= b;
	v2 ^= 0xff;
	SIPROUND(v0, v1, v2, v3);
	SIPROUND(v0, v1, v2, v3);
	SIPROUND(v0, v1, v2, v3);
	SIPROUND(v0, v1, v2, v3);
	return v0 ^ v1 ^ v2 ^ v3;
}

uint64_t hash_bytes(const void *p, size_t n)
{
	pthread_once(&hash_key_once, hash_key_init);
	return siphash24(p, n, hash_key);
}

uint64_t hash_str(const char *s)
{
	return hash_bytes(s, strlen(s));
}

uint64_t hash_combine(uint64_t a, uint64_t b)
{
	/* Not keyed: the inputs already are keyed hashes. */
	a ^= b + 0x9e3779b97f4a7c15ULL + (a << 6) + (a >> 2);
	a ^= a >> 31;
	a *= 0x7fb5d329728ea185ULL;
	a ^= a >> 27;
	return a;
}

void hmap_init(struct hmap *m)
{
	m->buckets = NULL;
	m->n_buckets = 0;
	m->n_entries = 0;
}

void hmap_deinit(struct hmap *m)
{
	free(m->buckets);
	hmap_init(m);
}

static inline size_t bucket_of(size_t n_buckets, uint64_t hash)
{
	/* Fold the high bits in: callers' hashes may be weak in low bits. */
	return (size_t)((hash ^ (hash >> 32)) & (n_buckets - 1));
}

static void hmap_resize(struct hmap *m, size_t n)
{
	struct hmap_node **b;

	b = calloc(n, sizeof(*b));
	if (!b)
		return; /* keep the old table; only the chains get longer */
	for (size_t i = 0; i < m->n_buckets; i++) {
		struct hmap_node *node = m->buckets[i], *next;

		for (; node; node = next) {
			size_t j = bucket_of(n, node->hash);

			next = node->next;
			node->next = b[j];
			b[j] = node;
		}
	}
	free(m->buckets);
	m->buckets = b;
	m->n_buckets = n;
}

void hmap_reserve(struct hmap *m, size_t n)
{
	size_t b = m->n_buckets ? m->n_buckets : HMAP_MIN_BUCKETS;

	/* The load factor hmap_insert() keeps: at most one entry per bucket. */
	while (b < n && b < (SIZE_MAX / 2) / sizeof(void *))
		b *= 2;
	if (b > m->n_buckets)
		hmap_resize(m, b);
}

int hmap_insert(struct hmap *m, struct hmap_node *n, uint64_t hash)
{
	size_t i;

	if (m->n_buckets == 0) {
		m->buckets = calloc(HMAP_MIN_BUCKETS, sizeof(*m->buckets));
		if (!m->buckets)
			return -ENOMEM;
		m->n_buckets = HMAP_MIN_BUCKETS;
	} else if (m->n_entries >= m->n_buckets && m->n_buckets < (SIZE_MAX / 2) / sizeof(void *)) {
		hmap_resize(m, m->n_buckets * 2);
	}
	n->hash = hash;
	i = bucket_of(m->n_buckets, hash);
	n->next = m->buckets[i];
	m->buckets[i] = n;
	m->n_entries++;
	return 0;
}

void hmap_remove(struct hmap *m, struct hmap_node *n)
{
	struct hmap_node **pp = &m->buckets[bucket_of(m->n_buckets, n->hash)];

	while (*pp != n)
		pp = &(*pp)->next;
	*pp = n->next;
	n->next = NULL;
	m->n_entries--;
	if (m->n_entries == 0) {
		hmap_deinit(m);
	} else if (m->n_buckets > HMAP_MIN_BUCKETS && m->n_entries < m->n_buckets / 8) {
		hmap_resize(m, m->n_buckets / 2);
	}
}

struct hmap_node *hmap_first_hash(const struct hmap *m, uint64_t hash)
{
	struct hmap_node *n;

	if (m->n_buckets == 0)
		return NULL;
	for (n = m->buckets[bucket_of(m->n_buckets, hash)]; n; n = n->next)
		if (n->hash == hash)
			return n;
	return NULL;
}

struct hmap_node *hmap_next_hash(const struct hmap_node *n)
{
	uint64_t hash = n->hash;

	for (n = n->next; n; n = n->next)
		if (n->hash == hash)
			return (struct hmap_node *)n;
	return NULL;
}

struct hmap_node *hmap_next(const struct hmap *m, const struct hmap_node *n)
{
	size_t i;

	if (n) {
		if (n->next)
			return n->next;
		i = bucket_of(m->n_buckets, n->hash) + 1;
	} else {
		i = 0;
	}
	for (; i < m->n_buckets; i++)
		if (m->buckets[i])
			return m->buckets[i];
	return NULL;
}
