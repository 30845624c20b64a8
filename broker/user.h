/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/**
 * DOC: Per-user accounting
 *
 * One struct user per uid with at least one object charged to it, with a
 * counter and a limit per resource. Every charge is recorded in a struct
 * user_charge held by the object that caused it (a queued message, a name
 * ownership, a match rule, ...), so it is returned exactly once and with the
 * same amount, whatever happens to the object.
 *
 * Limits. dbus-daemon limits most resources per CONNECTION; the per-user
 * defaults below are the dbus-daemon figures (session.conf of dbus 1.14 for
 * user_limits_init_session(), dbus-daemon's built-in values, which system.conf
 * keeps, for user_limits_init_system()) so that a single-connection user sees
 * exactly dbus-daemon's behaviour. The caller may additionally keep
 * per-connection counters with the same struct user_counters helpers.
 *
 *   resource      session (session.conf)        system (built-in)
 *   BYTES         1000000000 max_incoming_bytes  133169152 (127 MiB)
 *   FDS           250000000 max_incoming_unix_fds 64
 *   MATCHES       50000 max_match_rules_per_conn 512
 *   NAMES         50000 max_names_per_connection 512
 *   REPLIES       50000 max_replies_per_conn     128
 *   CONNECTIONS   100000 max_connections_per_user 256
 *
 * A charge over the limit fails with USER_E_QUOTA and changes nothing; the
 * caller maps it to org.freedesktop.DBus.Error.LimitsExceeded (or disconnects
 * the offender for queued bytes, as dbus-daemon does).
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include "util/hashmap.h"

enum user_slot {
	USER_SLOT_BYTES,
	USER_SLOT_FDS,
	USER_SLOT_MATCHES,
	USER_SLOT_NAMES,
	USER_SLOT_REPLIES,
	USER_SLOT_CONNECTIONS,
	_USER_SLOT_N,
};

enum {
	USER_E_QUOTA = 1,
};

struct user_limits {
	uint64_t max[_USER_SLOT_N];
};

void user_limits_init_session(struct user_limits *l);
void user_limits_init_system(struct user_limits *l);

/* A set of counters with limits (per user, or per connection if wanted). */
struct user_counters {
	uint64_t used[_USER_SLOT_N];
	uint64_t max[_USER_SLOT_N];
};

void user_counters_init(struct user_counters *c, const struct user_limits *limits);
/* 0 or USER_E_QUOTA (nothing charged). Overflow-safe. */
int user_counters_charge(struct user_counters *c, enum user_slot slot, uint64_t amount);
void user_counters_uncharge(struct user_counters *c, enum user_slot slot, uint64_t amount);

struct user_registry;

struct user {
	struct user_registry *registry;
	struct hmap_node node;
	unsigned long n_refs;
	uid_t uid;
	struct user_counters counters;
};

struct user_registry {
	struct hmap users;
	struct user_limits limits;
};

/* @limits NULL: session defaults. */
int user_registry_new(struct user_registry **regp, const struct user_limits *limits);
/* All users must have been unreferenced. Returns NULL. */
struct user_registry *user_registry_free(struct user_registry *reg);

/* Find or create the user @uid and take a reference. 0 or -ENOMEM. */
int user_registry_ref_user(struct user_registry *reg, struct user **userp, uid_t uid);
/* The user @uid if it exists (no reference taken). */
struct user *user_registry_find(struct user_registry *reg, uid_t uid);
struct user *user_ref(struct user *user);
/* Drop a reference; the user is freed with its last one. Returns NULL. */
struct user *user_unref(struct user *user);

static inline uint64_t user_usage(const struct user *user, enum user_slot slot)
{
	return user->counters.used[slot];
}

/*
 * A charge taken from one user for one resource. Zero-initialize (or
 * USER_CHARGE_INIT) before use. The charge holds a reference on the user.
 */
struct user_charge {
	struct user *user;
	enum user_slot slot;
	uint64_t amount;
};

#define USER_CHARGE_INIT { NULL, 0, 0 }

/*
 * Charge @amount of @slot to @user, recorded in @charge (which must be unused
 * or of the same user and slot: then the amount adds up). 0 or USER_E_QUOTA.
 */
int user_charge(struct user_charge *charge, struct user *user, enum user_slot slot,
		uint64_t amount);
/* Return the whole charge (no-op on an unused one). */
void user_charge_release(struct user_charge *charge);
