/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Expected-reply tracking: one reply per slot, forged replies refused,
 * duplicates and the per-caller limit, disconnect of either side, expiry.
 */

#include <stdio.h>
#include "broker/objects/reply.h"
#include "check.h"

struct noreply {
	struct reply_owner *caller[16];
	struct reply_owner *callee[16];
	uint32_t serial[16];
	size_t n;
};

static void on_noreply(void *userdata, struct reply_owner *caller, struct reply_owner *callee,
		       uint32_t serial)
{
	struct noreply *nr = userdata;

	CHECK(nr->n < 16);
	nr->caller[nr->n] = caller;
	nr->callee[nr->n] = callee;
	nr->serial[nr->n] = serial;
	nr->n++;
}

static void test_basic(void)
{
	struct reply_registry *reg;
	struct reply_owner a, b, c;

	CHECK_EQ(reply_registry_new(&reg, 3, 0), 0);
	reply_owner_init(&a, reg);
	reply_owner_init(&b, reg);
	reply_owner_init(&c, reg);

	CHECK_EQ(reply_registry_add(reg, &a, &b, 7, 0, NULL), 0);
	CHECK_EQ(reply_registry_add(reg, &a, &b, 7, 0, NULL), REPLY_E_EXISTS);
	CHECK_EQ(reply_registry_add(reg, &a, &c, 7, 0, NULL), 0); /* other callee: fine */
	CHECK_EQ(reply_registry_add(reg, &b, &a, 7, 0, NULL), 0); /* other caller: fine */
	CHECK_EQ(a.n_calls, 2);
	CHECK_EQ(b.n_pending, 1);

	/* Forged replies: wrong sender, wrong serial, wrong receiver. */
	CHECK_EQ(reply_registry_consume(reg, &a, &c, 8), REPLY_E_UNEXPECTED);
	CHECK_EQ(reply_registry_consume(reg, &c, &b, 7), REPLY_E_UNEXPECTED);
	CHECK(reply_registry_find(reg, &a, &b, 7));
	CHECK(!reply_registry_find(reg, &b, &b, 7));
	/* The real reply passes once. */
	CHECK_EQ(reply_registry_consume(reg, &a, &b, 7), 0);
	CHECK_EQ(reply_registry_consume(reg, &a, &b, 7), REPLY_E_UNEXPECTED);
	CHECK_EQ(a.n_calls, 1);
	/* Serial may be reused once consumed. */
	CHECK_EQ(reply_registry_add(reg, &a, &b, 7, 0, NULL), 0);

	/* Limit per caller (3 here): the duplicate check comes first. */
	CHECK_EQ(reply_registry_add(reg, &a, &b, 8, 0, NULL), 0);
	CHECK_EQ(a.n_calls, 3);
	CHECK_EQ(reply_registry_add(reg, &a, &b, 8, 0, NULL), REPLY_E_EXISTS);
	CHECK_EQ(reply_registry_add(reg, &a, &b, 9, 0, NULL), REPLY_E_QUOTA);
	CHECK_EQ(reply_registry_add(reg, &c, &b, 9, 0, NULL), 0); /* others unaffected */

	reply_owner_flush(&a, NULL, NULL);
	reply_owner_flush(&b, NULL, NULL);
	reply_owner_flush(&c, NULL, NULL);
	CHECK_EQ(reg->n_slots, 0);
	reply_registry_free(reg);
}

static void test_disconnect(void)
{
	struct reply_registry *reg;
	struct reply_owner a, b, c;
	struct noreply nr = {};

	CHECK_EQ(reply_registry_new(&reg, 0, 0), 0);
	reply_owner_init(&a, reg);
	reply_owner_init(&b, reg);
	reply_owner_init(&c, reg);
	CHECK_EQ(reply_registry_add(reg, &a, &b, 1, 0, NULL), 0);
	CHECK_EQ(reply_registry_add(reg, &c, &b, 5, 0, NULL), 0);
	CHECK_EQ(reply_registry_add(reg, &a, &b, 2, 0, NULL), 0);
	CHECK_EQ(reply_registry_add(reg, &b, &a, 3, 0, NULL), 0); /* b waits on a */
	CHECK_EQ(reply_registry_add(reg, &a, &c, 4, 0, NULL), 0);

	/* b goes away: its callers get NoReply in call order; b's own calls
	 * are dropped silently. */
	reply_owner_flush(&b, on_noreply, &nr);
	CHECK_EQ(nr.n, 3);
	CHECK(nr.caller[0] == &a && nr.serial[0] == 1);
	CHECK(nr.caller[1] == &c && nr.serial[1] == 5);
	CHECK(nr.caller[2] == &a && nr.serial[2] == 2);
	CHECK(nr.callee[0] == &b && nr.callee[1] == &b && nr.callee[2] == &b);
	CHECK_EQ(b.n_calls + b.n_pending, 0);
	CHECK_EQ(a.n_pending, 0);
	CHECK_EQ(a.n_calls, 1);
	CHECK_EQ(reply_registry_consume(reg, &a, &b, 1), REPLY_E_UNEXPECTED);

	/* a goes away: c no longer may reply to it. */
	nr.n = 0;
	reply_owner_flush(&a, on_noreply, &nr);
	CHECK_EQ(nr.n, 0);
	CHECK_EQ(c.n_pending, 0);
	CHECK_EQ(reply_registry_consume(reg, &a, &c, 4), REPLY_E_UNEXPECTED);
	reply_owner_deinit(&c);
	CHECK_EQ(reg->n_slots, 0);
	reply_registry_free(reg);
}

static void test_expiry(void)
{
	struct reply_registry *reg;
	struct reply_owner a, b;
	struct noreply nr = {};

	CHECK_EQ(reply_registry_new(&reg, 0, 1000), 0);
	reply_owner_init(&a, reg);
	reply_owner_init(&b, reg);
	CHECK_EQ(reply_registry_next_deadline(reg), 0);
	CHECK_EQ(reply_registry_add(reg, &a, &b, 1, 100, NULL), 0);
	CHECK_EQ(reply_registry_add(reg, &a, &b, 2, 200, NULL), 0);
	CHECK_EQ(reply_registry_add(reg, &a, &b, 3, 300, NULL), 0);
	CHECK_EQ(reply_registry_next_deadline(reg), 1100);
	CHECK_EQ(reply_registry_expire(reg, 1099, on_noreply, &nr), 0);
	CHECK_EQ(reply_registry_consume(reg, &a, &b, 2), 0); /* answered in time */
	CHECK_EQ(reply_registry_expire(reg, 1300, on_noreply, &nr), 2);
	CHECK_EQ(nr.n, 2);
	CHECK(nr.serial[0] == 1 && nr.serial[1] == 3);
	/* Who owed it: what the crash journal closes the slot with. */
	CHECK(nr.caller[0] == &a && nr.callee[0] == &b && nr.callee[1] == &b);
	CHECK_EQ(reply_registry_consume(reg, &a, &b, 3), REPLY_E_UNEXPECTED);
	CHECK_EQ(reply_registry_next_deadline(reg), 0);
	reply_owner_deinit(&a);
	reply_owner_deinit(&b);
	reply_registry_free(reg);
}

static void test_many(void)
{
	enum { N = 64, S = 200 };
	static struct reply_owner o[N];
	struct reply_registry *reg;

	CHECK_EQ(reply_registry_new(&reg, REPLY_DEFAULT_MAX_SESSION, 0), 0);
	for (int i = 0; i < N; i++)
		reply_owner_init(&o[i], reg);
	for (uint32_t s = 1; s <= S; s++)
		for (int i = 0; i < N; i++)
			CHECK_EQ(reply_registry_add(reg, &o[i], &o[(i + s) % N], s, 0, NULL), 0);
	CHECK_EQ(reg->n_slots, N * S);
	for (uint32_t s = 1; s <= S; s += 2)
		for (int i = 0; i < N; i++)
			CHECK_EQ(reply_registry_consume(reg, &o[i], &o[(i + s) % N], s), 0);
	for (uint32_t s = 1; s <= S; s++)
		for (int i = 0; i < N; i++)
			CHECK_EQ(!!reply_registry_find(reg, &o[i], &o[(i + s) % N], s), s % 2 == 0);
	for (int i = 0; i < N; i++)
		reply_owner_flush(&o[i], NULL, NULL);
	CHECK_EQ(reg->n_slots, 0);
	reply_registry_free(reg);
}

int main(void)
{
	test_basic();
	test_disconnect();
	test_expiry();
	test_many();
	printf("reply: ok\n");
	return 0;
}
