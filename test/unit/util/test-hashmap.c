/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * util/hashmap: insert, lookup, equal hashes, iteration, growth and shrink.
 */

#include <stdio.h>
#include "util/hashmap.h"
#include "util/macro.h"
#include "check.h"

struct item {
	struct hmap_node node;
	unsigned int key;
	bool linked;
};

static uint64_t key_hash(unsigned int k)
{
	/* Deliberately many equal hashes: exercises chains and hmap_next_hash. */
	return hash_bytes(&(unsigned int){ k % 1000 }, sizeof(unsigned int));
}

static struct item *find(struct hmap *m, unsigned int k)
{
	hmap_for_each_hash(n, m, key_hash(k)) {
		struct item *it = container_of(n, struct item, node);

		if (it->key == k)
			return it;
	}
	return NULL;
}

int main(void)
{
	enum { N = 20000 };
	static struct item items[N];
	struct hmap m = HMAP_INIT;
	size_t count = 0;

	CHECK(hash_str("abc") == hash_str("abc"));
	CHECK(hash_str("abc") != hash_str("abd"));
	CHECK(hash_bytes("", 0) == hash_str(""));
	CHECK(hash_combine(1, 2) != hash_combine(2, 1));
	CHECK(!hmap_first_hash(&m, 1));
	CHECK(!hmap_next(&m, NULL));

	for (unsigned int i = 0; i < N; i++) {
		items[i].key = i;
		CHECK_EQ(hmap_insert(&m, &items[i].node, key_hash(i)), 0);
		items[i].linked = true;
	}
	CHECK_EQ(hmap_size(&m), N);
	CHECK(m.n_buckets >= N / 2);
	for (unsigned int i = 0; i < N; i++)
		CHECK(find(&m, i) == &items[i]);
	CHECK(!find(&m, N + 1));
	for (struct hmap_node *n = hmap_next(&m, NULL); n; n = hmap_next(&m, n))
		count++;
	CHECK_EQ(count, N);

	/* Remove all but every 97th; the table shrinks. */
	for (unsigned int i = 0; i < N; i++) {
		if (i % 97 == 0)
			continue;
		hmap_remove(&m, &items[i].node);
		items[i].linked = false;
	}
	CHECK(m.n_buckets < N / 8);
	for (unsigned int i = 0; i < N; i++)
		CHECK((find(&m, i) != NULL) == items[i].linked);
	count = 0;
	for (struct hmap_node *n = hmap_next(&m, NULL); n; n = hmap_next(&m, n))
		count++;
	CHECK_EQ(count, hmap_size(&m));
	for (unsigned int i = 0; i < N; i += 97)
		hmap_remove(&m, &items[i].node);
	CHECK_EQ(hmap_size(&m), 0);
	CHECK(!m.buckets);
	hmap_deinit(&m);
	printf("hashmap: ok\n");
	return 0;
}
