/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Per-user accounting: limits, charges returned exactly once, defaults,
 * actors' fair shares, the BYTES cap, the drain signal.
 */

#include <errno.h>
#include <stdio.h>
#include "broker/objects/user.h"
#include "check.h"

static void test_defaults(void)
{
	struct user_limits l;

	user_limits_init_session(&l);
	CHECK_EQ(l.max[USER_SLOT_BYTES], 1000000000);
	CHECK_EQ(l.max[USER_SLOT_FDS], 250000000);
	CHECK_EQ(l.max[USER_SLOT_MATCHES], 50000);
	CHECK_EQ(l.max[USER_SLOT_NAMES], 50000);
	CHECK_EQ(l.max[USER_SLOT_CONNECTIONS], 100000);
	user_limits_init_system(&l);
	CHECK_EQ(l.max[USER_SLOT_BYTES], 133169152);
	CHECK_EQ(l.max[USER_SLOT_FDS], 64);
	CHECK_EQ(l.max[USER_SLOT_MATCHES], 512);
	CHECK_EQ(l.max[USER_SLOT_NAMES], 512);
	CHECK_EQ(l.max[USER_SLOT_CONNECTIONS], 256);
}

static void test_charges(void)
{
	struct user_registry *reg;
	struct user_limits l;
	struct user *u, *u2, *v;
	struct user_charge c1 = USER_CHARGE_INIT, c2 = USER_CHARGE_INIT, c3 = USER_CHARGE_INIT;

	user_limits_init_system(&l);
	l.max[USER_SLOT_NAMES] = 3;
	CHECK_EQ(user_registry_new(&reg, &l), 0);
	CHECK_EQ(user_registry_ref_user(reg, &u, 1000), 0);
	CHECK_EQ(user_registry_ref_user(reg, &u2, 1000), 0);
	CHECK(u == u2);
	CHECK_EQ(user_registry_ref_user(reg, &v, 0), 0);
	CHECK(u != v);
	CHECK(user_registry_find(reg, 1000) == u);
	CHECK(!user_registry_find(reg, 1001));
	user_unref(u2);

	CHECK_EQ(user_charge(&c1, u, USER_SLOT_NAMES, 2), 0);
	CHECK_EQ(user_charge(&c2, u, USER_SLOT_NAMES, 2), USER_E_QUOTA);
	CHECK_EQ(c2.amount, 0);
	CHECK(!c2.user);
	CHECK_EQ(user_charge(&c2, u, USER_SLOT_NAMES, 1), 0);
	CHECK_EQ(user_usage(u, USER_SLOT_NAMES), 3);
	CHECK_EQ(user_charge(&c3, v, USER_SLOT_NAMES, 3), 0); /* per user */
	/* Charges add up in one record; mixing slots is refused. */
	CHECK_EQ(user_charge(&c2, u, USER_SLOT_FDS, 1), -EINVAL);
	user_charge_release(&c1);
	CHECK_EQ(user_usage(u, USER_SLOT_NAMES), 1);
	CHECK_EQ(user_charge(&c2, u, USER_SLOT_NAMES, 2), 0);
	CHECK_EQ(c2.amount, 3);
	CHECK_EQ(user_charge(&c1, u, USER_SLOT_NAMES, 1), USER_E_QUOTA);
	/* Overflow-safe. */
	CHECK_EQ(user_charge(&c1, u, USER_SLOT_BYTES, UINT64_MAX), USER_E_QUOTA);
	CHECK_EQ(user_charge(&c1, u, USER_SLOT_BYTES, 133169152), 0);
	CHECK_EQ(user_charge(&c1, u, USER_SLOT_BYTES, 1), USER_E_QUOTA);
	user_charge_release(&c1);
	user_charge_release(&c1); /* harmless */
	CHECK_EQ(user_usage(u, USER_SLOT_BYTES), 0);

	/* The charge keeps the user alive after its owner's reference goes. */
	user_unref(u);
	CHECK(user_registry_find(reg, 1000) == u);
	user_charge_release(&c2);
	CHECK(!user_registry_find(reg, 1000));
	user_charge_release(&c3);
	user_unref(v);
	CHECK(!user_registry_find(reg, 0));
	user_registry_free(reg);
}

static void test_counters(void)
{
	struct user_counters c;
	struct user_limits l;

	user_limits_init_session(&l);
	user_counters_init(&c, &l);
	CHECK_EQ(user_counters_charge(&c, USER_SLOT_MATCHES, 50000), 0);
	CHECK_EQ(user_counters_charge(&c, USER_SLOT_MATCHES, 1), USER_E_QUOTA);
	user_counters_uncharge(&c, USER_SLOT_MATCHES, 1);
	CHECK_EQ(user_counters_charge(&c, USER_SLOT_MATCHES, 1), 0);
	CHECK_EQ(c.used[USER_SLOT_MATCHES], 50000);
}

/* Charge @bytes for actor @key as the broker does: the share first, then the user. */
static int charge_as(struct user *u, uint64_t key, uint64_t bytes, struct user_charge *c,
		     struct user_actor **a)
{
	int r = user_actor_charge(u, key, bytes, 0, true, a);

	if (r)
		return r;
	r = user_charge(c, u, USER_SLOT_BYTES, bytes);
	if (r)
		user_actor_uncharge(*a, bytes, 0);
	return r;
}

static void test_actors(void)
{
	struct user_charge c[16] = {};
	struct user_actor *a[16], *b;
	struct user_registry *reg;
	struct user_limits l;
	struct user *u;
	uint64_t total = 0;

	/* The session's 1 GB is capped. */
	CHECK_EQ(user_registry_new(&reg, NULL), 0);
	CHECK_EQ(user_registry_ref_user(reg, &u, 1000), 0);
	CHECK_EQ(u->counters.max[USER_SLOT_BYTES], USER_BYTES_CAP);
	user_unref(u);
	user_registry_free(reg);

	user_limits_init_system(&l);
	l.max[USER_SLOT_BYTES] = 1000;
	CHECK_EQ(user_registry_new(&reg, &l), 0);
	CHECK_EQ(user_registry_ref_user(reg, &u, 1000), 0);

	/* Alone, an actor may take half of what is left, no more. */
	CHECK_EQ(charge_as(u, 1, 500, &c[0], &a[0]), 0);
	CHECK_EQ(charge_as(u, 1, 1, &c[0], &b), USER_E_QUOTA);
	CHECK(a[0] && a[0]->bytes == 500 && a[0]->n_refs == 1);
	/* A newcomer finds room: (0 + x) * 3 <= 500. */
	CHECK_EQ(charge_as(u, 2, 167, &c[1], &a[1]), USER_E_QUOTA);
	CHECK_EQ(charge_as(u, 2, 166, &c[1], &a[1]), 0);
	CHECK_EQ(hmap_size(&u->actors), 2);
	user_actor_uncharge(a[1], 166, 0);
	user_charge_release(&c[1]);
	CHECK_EQ(hmap_size(&u->actors), 1);
	user_actor_uncharge(a[0], 500, 0);
	user_charge_release(&c[0]);
	CHECK(!user_find_actor(u, 1));

	/* Twelve actors taking 1 at a time, all they may: together no more than half. */
	for (bool more = true; more;) {
		more = false;
		for (int i = 0; i < 12; i++) {
			if (charge_as(u, 100 + i, 1, &c[i], &b))
				continue;
			more = true;
			total++;
		}
	}
	CHECK(total <= 500, "12 actors took %llu of 1000", (unsigned long long)total);
	CHECK(total >= 400, "12 actors took only %llu of 1000", (unsigned long long)total);
	/* And a thirteenth still gets in. */
	CHECK_EQ(charge_as(u, 200, 10, &c[12], &a[12]), 0);
	/* The bus itself (key 0) records nothing and is not shared out. */
	CHECK_EQ(user_actor_charge(u, 0, 400, 0, true, &b), 0);
	CHECK(!b);

	user_actor_uncharge(a[12], 10, 0);
	user_charge_release(&c[12]);
	for (int i = 0; i < 12; i++) {
		struct user_actor *x = user_find_actor(u, 100 + i);
		uint64_t n = x ? x->bytes : 0;

		CHECK_EQ(x ? x->n_refs : n, n);
		while (x && x->n_refs > 1)
			user_actor_uncharge(x, 1, 0);
		if (x)
			user_actor_uncharge(x, 1, 0);
		user_charge_release(&c[i]);
	}
	CHECK_EQ(hmap_size(&u->actors), 0);
	CHECK_EQ(u->counters.used[USER_SLOT_BYTES], 0);
	user_unref(u);
	user_registry_free(reg);
}

static void test_drained(void)
{
	struct user_charge c = USER_CHARGE_INIT;
	struct user_registry *reg;
	struct user *u;

	CHECK_EQ(user_registry_new(&reg, NULL), 0);
	CHECK_EQ(user_registry_ref_user(reg, &u, 1000), 0);
	CHECK_EQ(user_charge(&c, u, USER_SLOT_BYTES, 64 << 20), 0);
	CHECK(!user_registry_drained(reg));
	user_uncharge(u, USER_SLOT_BYTES, 32 << 20);
	c.amount -= 32 << 20;
	CHECK(!user_registry_drained(reg));	/* half of the peak is left */
	user_uncharge(u, USER_SLOT_BYTES, 24 << 20);
	c.amount -= 24 << 20;
	CHECK(user_registry_drained(reg));	/* 8 of 64 MiB */
	CHECK(!user_registry_drained(reg));	/* said once */
	user_charge_release(&c);
	CHECK(user_registry_drained(reg));	/* 0 of 8 MiB: 8 MiB more to give back */
	CHECK_EQ(reg->bytes_used, 0);
	user_unref(u);
	user_registry_free(reg);
}

int main(void)
{
	test_defaults();
	test_charges();
	test_counters();
	test_actors();
	test_drained();
	printf("user: ok\n");
	return 0;
}
