/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Per-user accounting: limits, charges returned exactly once, defaults.
 */

#include <errno.h>
#include <stdio.h>
#include "broker/user.h"
#include "check.h"

static void test_defaults(void)
{
	struct user_limits l;

	user_limits_init_session(&l);
	CHECK_EQ(l.max[USER_SLOT_BYTES], 1000000000);
	CHECK_EQ(l.max[USER_SLOT_FDS], 250000000);
	CHECK_EQ(l.max[USER_SLOT_MATCHES], 50000);
	CHECK_EQ(l.max[USER_SLOT_NAMES], 50000);
	CHECK_EQ(l.max[USER_SLOT_REPLIES], 50000);
	CHECK_EQ(l.max[USER_SLOT_CONNECTIONS], 100000);
	user_limits_init_system(&l);
	CHECK_EQ(l.max[USER_SLOT_BYTES], 133169152);
	CHECK_EQ(l.max[USER_SLOT_FDS], 64);
	CHECK_EQ(l.max[USER_SLOT_MATCHES], 512);
	CHECK_EQ(l.max[USER_SLOT_NAMES], 512);
	CHECK_EQ(l.max[USER_SLOT_REPLIES], 128);
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

int main(void)
{
	test_defaults();
	test_charges();
	test_counters();
	printf("user: ok\n");
	return 0;
}
