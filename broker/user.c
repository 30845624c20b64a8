/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Per-user accounting (user.h).
 */

#include <errno.h>
#include <stdlib.h>
#include "broker/user.h"
#include "util/macro.h"

void user_limits_init_session(struct user_limits *l)
{
	/* /usr/share/dbus-1/session.conf of dbus 1.14 */
	l->max[USER_SLOT_BYTES] = 1000000000;
	l->max[USER_SLOT_FDS] = 250000000;
	l->max[USER_SLOT_MATCHES] = 50000;
	l->max[USER_SLOT_NAMES] = 50000;
	l->max[USER_SLOT_REPLIES] = 50000;
	l->max[USER_SLOT_CONNECTIONS] = 100000;
}

void user_limits_init_system(struct user_limits *l)
{
	/* dbus-daemon's built-in defaults, which system.conf keeps */
	l->max[USER_SLOT_BYTES] = 133169152;
	l->max[USER_SLOT_FDS] = 64;
	l->max[USER_SLOT_MATCHES] = 512;
	l->max[USER_SLOT_NAMES] = 512;
	l->max[USER_SLOT_REPLIES] = 128;
	l->max[USER_SLOT_CONNECTIONS] = 256;
}

void user_counters_init(struct user_counters *c, const struct user_limits *limits)
{
	for (size_t i = 0; i < _USER_SLOT_N; i++) {
		c->used[i] = 0;
		c->max[i] = limits->max[i];
	}
}

int user_counters_charge(struct user_counters *c, enum user_slot slot, uint64_t amount)
{
	/* Written so that no addition can overflow. */
	if (c->used[slot] > c->max[slot] || amount > c->max[slot] - c->used[slot])
		return USER_E_QUOTA;
	c->used[slot] += amount;
	return 0;
}

void user_counters_uncharge(struct user_counters *c, enum user_slot slot, uint64_t amount)
{
	if (amount > c->used[slot])
		abort(); /* an accounting bug, never a client's doing */
	c->used[slot] -= amount;
}

static uint64_t uid_hash(uid_t uid)
{
	uint64_t v = uid;

	return hash_bytes(&v, sizeof(v));
}

int user_registry_new(struct user_registry **regp, const struct user_limits *limits)
{
	struct user_registry *reg;

	reg = calloc(1, sizeof(*reg));
	if (!reg)
		return -ENOMEM;
	hmap_init(&reg->users);
	if (limits)
		reg->limits = *limits;
	else
		user_limits_init_session(&reg->limits);
	*regp = reg;
	return 0;
}

struct user_registry *user_registry_free(struct user_registry *reg)
{
	if (!reg)
		return NULL;
	if (hmap_size(&reg->users))
		abort(); /* users would point at a dead registry */
	hmap_deinit(&reg->users);
	free(reg);
	return NULL;
}

struct user *user_registry_find(struct user_registry *reg, uid_t uid)
{
	hmap_for_each_hash(n, &reg->users, uid_hash(uid)) {
		struct user *u = container_of(n, struct user, node);

		if (u->uid == uid)
			return u;
	}
	return NULL;
}

int user_registry_ref_user(struct user_registry *reg, struct user **userp, uid_t uid)
{
	struct user *u = user_registry_find(reg, uid);
	int r;

	if (u) {
		*userp = user_ref(u);
		return 0;
	}
	u = calloc(1, sizeof(*u));
	if (!u)
		return -ENOMEM;
	u->registry = reg;
	u->uid = uid;
	u->n_refs = 1;
	user_counters_init(&u->counters, &reg->limits);
	r = hmap_insert(&reg->users, &u->node, uid_hash(uid));
	if (r < 0) {
		free(u);
		return r;
	}
	*userp = u;
	return 0;
}

struct user *user_ref(struct user *user)
{
	if (user)
		user->n_refs++;
	return user;
}

struct user *user_unref(struct user *user)
{
	if (!user || --user->n_refs > 0)
		return NULL;
	for (size_t i = 0; i < _USER_SLOT_N; i++)
		if (user->counters.used[i])
			abort(); /* every charge holds a reference */
	hmap_remove(&user->registry->users, &user->node);
	free(user);
	return NULL;
}

int user_charge(struct user_charge *charge, struct user *user, enum user_slot slot,
		uint64_t amount)
{
	int r;

	if (charge->user && (charge->user != user || charge->slot != slot))
		return -EINVAL;
	if (charge->amount > UINT64_MAX - amount)
		return USER_E_QUOTA;
	r = user_counters_charge(&user->counters, slot, amount);
	if (r)
		return r;
	if (!charge->user) {
		charge->user = user_ref(user);
		charge->slot = slot;
	}
	charge->amount += amount;
	return 0;
}

void user_charge_release(struct user_charge *charge)
{
	if (!charge->user)
		return;
	user_counters_uncharge(&charge->user->counters, charge->slot, charge->amount);
	charge->user = user_unref(charge->user);
	charge->amount = 0;
}
