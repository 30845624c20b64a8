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
 *   ACTIVATIONS   messages waiting for activations: half of
 *                 max_pending_service_starts, but at least 64 of them
 *                 (all of them if it is smaller), so that one uid never
 *                 fills the queue for all and one user sees dbus-daemon's
 *                 limit (the bus sets it, user_limits_set_activations())
 *
 * A charge over the limit fails with USER_E_QUOTA and changes nothing; the
 * caller maps it to org.freedesktop.DBus.Error.LimitsExceeded (or disconnects
 * the offender for queued bytes, as dbus-daemon does).
 *
 * Whatever a configuration says, a user's BYTES never exceed USER_BYTES_CAP:
 * the largest queue one connection may have (BUS_QUEUE_BYTES_CAP) and 1 MiB,
 * so one message of any size the bus takes still fits one actor's fair share,
 * and no uid can make the bus hold gigabytes (session.conf's 1000000000 per
 * connection would).
 *
 * Actors. Messages queued for a user's connections are charged to that user
 * (as a socket's receive queue is its reader's) and recorded, inside it, per
 * actor: the connection whose message is being routed, or its container
 * instance as a whole (a key, user_actor_key()). An actor's fair share of a
 * user's BYTES is what keeps the others able to reach that user: an actor
 * holding s may add x while
 *
 *	(s + x) * (n + 1) <= r + s
 *
 * where r is what the user has left and n the number of actors holding
 * anything there, this one included. With k actors taking all they may, each
 * ends at limit / 2k: together they never hold more than half of the user's
 * quota, however many connections a flooder opens, and a newcomer always
 * finds room.
 */

#include <assert.h>
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
	USER_SLOT_CONNECTIONS,
	USER_SLOT_ACTIVATIONS,
	_USER_SLOT_N,
};

/* Positive codes of the charges. */
enum {
	_USER_E_SUCCESS,
	USER_E_QUOTA,		/* over the limit (or the fair share): nothing charged */
};

struct user_limits {
	uint64_t max[_USER_SLOT_N];
};

void user_limits_init_session(struct user_limits *l);
void user_limits_init_system(struct user_limits *l);
/* ACTIVATIONS from max_pending_service_starts (see the table above). */
void user_limits_set_activations(struct user_limits *l, uint64_t max_pending);

/* A set of counters with limits (per user, or per connection if wanted). */
struct user_counters {
	uint64_t used[_USER_SLOT_N];
	uint64_t max[_USER_SLOT_N];
};

void user_counters_init(struct user_counters *c, const struct user_limits *limits);
/* 0 or USER_E_QUOTA (nothing charged). Overflow-safe. */
int user_counters_charge(struct user_counters *c, enum user_slot slot, uint64_t amount);
void user_counters_uncharge(struct user_counters *c, enum user_slot slot, uint64_t amount);

/*
 * What the bus refused or did not deliver, counted alike for a connection,
 * for its user and for the bus (Debug.Stats): cumulative, never lowered, so
 * that an operator sees who meets the limits and the policy without reading
 * the log (which rate-limits its lines of them).
 */
enum refusal {
	REFUSAL_LIMITS,		/* a message of it answered with LimitsExceeded */
	REFUSAL_POLICY,		/* a message of it answered with AccessDenied */
	REFUSAL_DROPPED,	/* a message for it not delivered, and nobody told */
	REFUSAL_QUEUE_FULL,	/* it was disconnected: its queue was full for a message */
	_REFUSAL_N,
};

struct refusal_counts {
	uint64_t n[_REFUSAL_N];
};

struct user_registry;

/*
 * Whatever a configuration sets, a user's BYTES limit is at most this: the
 * largest queue (BUS_QUEUE_BYTES_CAP, 256 MiB) and 1 MiB. A lone actor's
 * fair share is half of what is left, and one message of the protocol's
 * largest size (128 MiB, plus the SENDER the bus adds and its bookkeeping)
 * must fit it on an idle user, as dbus-daemon delivers it.
 */
#define USER_BYTES_CAP (257ULL * 1024 * 1024)

struct user {
	struct user_registry *registry;
	struct hmap_node node;
	unsigned long n_refs;
	uid_t uid;
	struct user_counters counters;
	struct hmap actors;		/* struct user_actor: who holds its BYTES/FDS */
	struct refusal_counts refusals;	/* of its connections, while it exists */
	/*
	 * Calls its connections must still answer (reply_owner.pending_tally):
	 * counted, not limited, as the bus bounds calls per connection
	 * (max_replies_per_connection), as dbus-daemon does.
	 */
	uint64_t n_pending_replies;
};

struct user_registry {
	struct hmap users;
	struct user_limits limits;
	uint64_t bytes_used;		/* BYTES of all users */
	uint64_t bytes_peak;		/* their most since user_registry_drained() said yes */
};

/*
 * Whether the users' BYTES fell to a quarter of their peak, and by 4 MiB or
 * more, since the last time this said so: the moment to give the freed
 * memory back to the system (malloc_trim()), which a heap fragmented by a
 * flood would otherwise keep.
 */
static inline bool user_registry_drained(struct user_registry *reg)
{
	assert(reg->bytes_peak >= reg->bytes_used);
	if (reg->bytes_peak - reg->bytes_used < 4 * 1024 * 1024 ||
	    reg->bytes_used > reg->bytes_peak / 4)
		return false;
	reg->bytes_peak = reg->bytes_used;
	return true;
}

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
/* Return @amount of @slot to @user (what user_charge() took). */
void user_uncharge(struct user *user, enum user_slot slot, uint64_t amount);
/* Return the whole charge (no-op on an unused one). */
void user_charge_release(struct user_charge *charge);

/**
 * struct user_actor - what one actor has queued at one user
 * @user:	the user (a reference)
 * @node:	in user->actors
 * @key:	user_actor_key() of the actor
 * @n_refs:	the deliveries that hold it
 * @bytes:	their bytes (as charged: with the bus's overhead)
 * @fds:	their fds
 */
struct user_actor {
	struct user *user;
	struct hmap_node node;
	uint64_t key;
	unsigned long n_refs;
	uint64_t bytes;
	uint64_t fds;
};

/*
 * The key of an actor: a container instance (@instance_id != 0) as a whole,
 * else the connection ":1.@unique_id". 0: no actor (the bus itself).
 */
static inline uint64_t user_actor_key(uint64_t unique_id, uint64_t instance_id)
{
	return instance_id ? (instance_id | (1ULL << 63)) : unique_id;
}

/**
 * user_actor_charge() - record @bytes and @fds queued at @user for actor @key
 * @user:	the receiving user
 * @key:	user_actor_key(); 0 records nothing (*@actorp = NULL)
 * @bytes:	bytes queued
 * @fds:	fds queued
 * @fair:	enforce the actor's fair share of @user's BYTES (see DOC)
 * @actorp:	the actor, with a reference for this charge
 *
 * Only the actor's part is recorded here: the user's counters are charged by
 * the caller (user_charge()), after this succeeded.
 *
 * Return: 0, USER_E_QUOTA (over the fair share: nothing recorded), -ENOMEM.
 */
int user_actor_charge(struct user *user, uint64_t key, uint64_t bytes, uint64_t fds, bool fair,
		      struct user_actor **actorp);

/* Undo one user_actor_charge() of @bytes and @fds; drops its reference. */
void user_actor_uncharge(struct user_actor *actor, uint64_t bytes, uint64_t fds);

/* The actor @key of @user, if it holds anything there. */
struct user_actor *user_find_actor(struct user *user, uint64_t key);
