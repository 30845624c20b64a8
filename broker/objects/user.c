/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Per-user accounting (user.h).
 */

#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include "broker/objects/user.h"
#include "util/macro.h"

void user_limits_init_session(struct user_limits *l)
{
	/* /usr/share/dbus-1/session.conf of dbus 1.14 */
	l->max[USER_SLOT_BYTES] = 1000000000;
	l->max[USER_SLOT_FDS] = 250000000;
	l->max[USER_SLOT_MATCHES] = 50000;
	l->max[USER_SLOT_NAMES] = 50000;
	l->max[USER_SLOT_CONNECTIONS] = 100000;
	user_limits_set_activations(l, 512);
}

void user_limits_init_system(struct user_limits *l)
{
	/* dbus-daemon's built-in defaults, which system.conf keeps */
	l->max[USER_SLOT_BYTES] = 133169152;
	l->max[USER_SLOT_FDS] = 64;
	l->max[USER_SLOT_MATCHES] = 512;
	l->max[USER_SLOT_NAMES] = 512;
	l->max[USER_SLOT_CONNECTIONS] = 256;
	user_limits_set_activations(l, 512);
}

void user_limits_set_activations(struct user_limits *l, uint64_t max_pending)
{
	l->max[USER_SLOT_ACTIVATIONS] = max_pending <= 64 ? max_pending :
					MAX(max_pending / 2, (uint64_t)64);
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
	assert((unsigned int)slot < _USER_SLOT_N);
	/* Written so that no addition can overflow. */
	if (c->used[slot] > c->max[slot] || amount > c->max[slot] - c->used[slot])
		return USER_E_QUOTA;
	c->used[slot] += amount;
	return 0;
}

void user_counters_uncharge(struct user_counters *c, enum user_slot slot, uint64_t amount)
{
	assert((unsigned int)slot < _USER_SLOT_N);
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
		/* An indexed user is alive: its last reference unindexes it. */
		assert(u->n_refs > 0 && u->registry == reg);
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
	if (u->counters.max[USER_SLOT_BYTES] > USER_BYTES_CAP)
		u->counters.max[USER_SLOT_BYTES] = USER_BYTES_CAP;
	hmap_init(&u->actors);
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
	if (user) {
		assert(user->n_refs > 0);
		user->n_refs++;
	}
	return user;
}

struct user *user_unref(struct user *user)
{
	if (!user)
		return NULL;
	assert(user->n_refs > 0);
	if (--user->n_refs > 0)
		return NULL;
	for (size_t i = 0; i < _USER_SLOT_N; i++)
		if (user->counters.used[i])
			abort(); /* every charge holds a reference */
	if (hmap_size(&user->actors))
		abort(); /* so does every actor */
	hmap_deinit(&user->actors);
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
	if (slot == USER_SLOT_BYTES) {
		user->registry->bytes_used += amount;
		if (user->registry->bytes_used > user->registry->bytes_peak)
			user->registry->bytes_peak = user->registry->bytes_used;
	}
	if (!charge->user) {
		assert(charge->amount == 0);
		charge->user = user_ref(user);
		charge->slot = slot;
	}
	charge->amount += amount;
	return 0;
}

void user_uncharge(struct user *user, enum user_slot slot, uint64_t amount)
{
	user_counters_uncharge(&user->counters, slot, amount);
	if (slot == USER_SLOT_BYTES) {
		/* Every user's BYTES are in the sum: it holds this amount too. */
		assert(user->registry->bytes_used >= amount);
		user->registry->bytes_used -= amount;
	}
}

void user_charge_release(struct user_charge *charge)
{
	if (!charge->user)
		return;
	user_uncharge(charge->user, charge->slot, charge->amount);
	charge->user = user_unref(charge->user);
	charge->amount = 0;
}

static uint64_t actor_hash(uint64_t key)
{
	return hash_bytes(&key, sizeof(key));
}

struct user_actor *user_find_actor(struct user *user, uint64_t key)
{
	hmap_for_each_hash(n, &user->actors, actor_hash(key)) {
		struct user_actor *a = container_of(n, struct user_actor, node);

		if (a->key == key)
			return a;
	}
	return NULL;
}

/*
 * May an actor holding @held, one of @n actors at @user (itself included),
 * add @amount? See the DOC in user.h; computed in 128 bits, so that no
 * product overflows.
 */
static bool user_fair_share(const struct user *user, uint64_t held, uint64_t amount, size_t n)
{
	const struct user_counters *c = &user->counters;
	uint64_t left = c->used[USER_SLOT_BYTES] < c->max[USER_SLOT_BYTES] ?
			c->max[USER_SLOT_BYTES] - c->used[USER_SLOT_BYTES] : 0;

	return ((unsigned __int128)held + amount) * (n + 1) <=
	       (unsigned __int128)left + held;
}

int user_actor_charge(struct user *user, uint64_t key, uint64_t bytes, uint64_t fds, bool fair,
		      struct user_actor **actorp)
{
	struct user_actor *a;
	int r;

	*actorp = NULL;
	if (!key)
		return 0;
	a = user_find_actor(user, key);
	assert(!a || (a->user == user && a->n_refs > 0));
	if (fair && !user_fair_share(user, a ? a->bytes : 0, bytes,
				     hmap_size(&user->actors) + !a))
		return USER_E_QUOTA;
	if (!a) {
		a = calloc(1, sizeof(*a));
		if (!a)
			return -ENOMEM;
		a->key = key;
		r = hmap_insert(&user->actors, &a->node, actor_hash(key));
		if (r < 0) {
			free(a);
			return r;
		}
		a->user = user_ref(user);
	}
	a->n_refs++;
	a->bytes += bytes;
	a->fds += fds;
	*actorp = a;
	return 0;
}

void user_actor_uncharge(struct user_actor *a, uint64_t bytes, uint64_t fds)
{
	struct user *user;

	if (!a)
		return;
	if (bytes > a->bytes || fds > a->fds || !a->n_refs)
		abort(); /* an accounting bug, never a client's doing */
	a->bytes -= bytes;
	a->fds -= fds;
	if (--a->n_refs)
		return;
	user = a->user;
	hmap_remove(&user->actors, &a->node);
	free(a);
	user_unref(user);
}
