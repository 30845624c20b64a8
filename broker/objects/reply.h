/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/**
 * DOC: Expected-reply tracking
 *
 * When a method call without NO_REPLY_EXPECTED is routed from connection A
 * (serial S) to connection B, the caller records a slot (A, B, S). A
 * METHOD_RETURN or ERROR from B to A with REPLY_SERIAL S is allowed exactly
 * once and consumes the slot; any other reply is unexpected (dbus-daemon
 * rejects it with org.freedesktop.DBus.Error.AccessDenied and does not deliver
 * it).
 *
 * As in dbus-daemon (bus/connection.c, bus_connections_expect_reply):
 *  - a second slot with the same (A, B, S) while the first is outstanding is
 *    refused: REPLY_E_EXISTS (AccessDenied, "Message has the same reply serial
 *    as a currently-outstanding existing method call");
 *  - the number of outstanding slots of the CALLER A is limited
 *    (max_replies_per_connection: 128 built in / system bus, 50000 in the
 *    session.conf of dbus 1.14): REPLY_E_QUOTA (LimitsExceeded, "The maximum
 *    number of pending replies per connection has been reached").
 *  - B disconnects: every slot waiting on B yields a NoReply error to its
 *    caller (reply_owner_flush() enumerates them in the order they were
 *    created); A disconnects: its slots are dropped silently.
 *  - a slot older than the reply timeout expires with a NoReply error
 *    (reply_registry_expire()); timeout 0 disables expiry (dbus 1.14's
 *    default reply_timeout is -1, i.e. never).
 *
 * Lookups are O(1): slots are hashed by (A, B, S). The expiry list is ordered
 * by creation time (one timeout for all), so expiry is O(expired).
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "util/hashmap.h"
#include "util/list.h"

/* Positive codes of reply_registry_add() / reply_registry_consume(). */
enum {
	_REPLY_E_SUCCESS,
	REPLY_E_EXISTS,		/* same (caller, callee, serial) outstanding: AccessDenied */
	REPLY_E_QUOTA,		/* caller has max_replies slots: LimitsExceeded */
	REPLY_E_UNEXPECTED,	/* no such slot: a forged/duplicate reply, AccessDenied */
};

#define REPLY_DEFAULT_MAX_SESSION 50000
#define REPLY_DEFAULT_MAX_SYSTEM 128

struct reply_registry;

/* Per connection; embedded in the caller's connection object. */
struct reply_owner {
	struct reply_registry *registry;
	struct list_node calls;   /* slots where we are the caller A (waiting for a reply) */
	struct list_node pending; /* slots where we are the callee B (owing a reply) */
	size_t n_calls;
	size_t n_pending;
	uint64_t *pending_tally;  /* NULL, or also counts n_pending (its user's sum) */
	uint32_t state_index;     /* its place while the state is written */
};

struct reply_slot {
	struct hmap_node node;         /* registry->slots */
	struct list_node caller_link;  /* caller->calls */
	struct list_node callee_link;  /* callee->pending */
	struct list_node expire_link;  /* registry->expire, creation order */
	struct reply_owner *caller;
	struct reply_owner *callee;
	uint32_t serial;
	uint64_t deadline_usec;        /* 0: never */
};

struct reply_registry {
	struct hmap slots;
	struct list_node expire;
	size_t n_slots;
	size_t max_per_caller;   /* 0: unlimited */
	uint64_t timeout_usec;   /* 0: no expiry */
};

/* Called for each slot whose caller must get a NoReply error (the slot is freed). */
typedef void (*reply_noreply_fn)(void *userdata, struct reply_owner *caller,
				 struct reply_owner *callee, uint32_t serial);

/* @max_per_caller 0 = unlimited; @timeout_usec 0 = never expire. */
int reply_registry_new(struct reply_registry **regp, size_t max_per_caller,
		       uint64_t timeout_usec);
/* All owners must have been flushed. Returns NULL. */
struct reply_registry *reply_registry_free(struct reply_registry *reg);

void reply_owner_init(struct reply_owner *owner, struct reply_registry *reg);
/* Drops remaining slots WITHOUT callbacks (use reply_owner_flush() first). */
void reply_owner_deinit(struct reply_owner *owner);

/*
 * Record that @callee owes @caller a reply to serial @serial. @now_usec is the
 * monotonic time (for expiry). 0 (the new slot in *@slotp, unless NULL),
 * REPLY_E_EXISTS, REPLY_E_QUOTA or -ENOMEM.
 */
int reply_registry_add(struct reply_registry *reg, struct reply_owner *caller,
		       struct reply_owner *callee, uint32_t serial, uint64_t now_usec,
		       struct reply_slot **slotp);

/*
 * A slot a restore brings back (a state, a crash journal's record): its
 * deadline as it was (0: none), in its place among the others, no limit
 * checked. 0, -EEXIST or -ENOMEM.
 */
int reply_registry_add_restored(struct reply_registry *reg, struct reply_owner *caller,
				struct reply_owner *callee, uint32_t serial, uint64_t deadline_usec);

/* The slot (caller, callee, serial), or NULL. */
struct reply_slot *reply_registry_find(struct reply_registry *reg, struct reply_owner *caller,
				       struct reply_owner *callee, uint32_t serial);

/*
 * A reply from @sender to @receiver with reply_serial @serial: 0 if it was
 * expected (the slot is consumed), REPLY_E_UNEXPECTED otherwise.
 */
int reply_registry_consume(struct reply_registry *reg, struct reply_owner *receiver,
			   struct reply_owner *sender, uint32_t serial);

/* Free one slot (e.g. to undo reply_registry_add() when routing fails). */
void reply_slot_free(struct reply_slot *slot);

/*
 * Disconnect of @owner: for every slot where @owner is the callee, call @fn
 * (caller, @owner, serial) in creation order and free the slot; then free all slots
 * where @owner is the caller, silently. @fn may be NULL.
 */
void reply_owner_flush(struct reply_owner *owner, reply_noreply_fn fn, void *userdata);

/*
 * Expire every slot with deadline <= @now_usec: @fn(caller, callee, serial)
 * for each, oldest first. Returns the number expired.
 */
size_t reply_registry_expire(struct reply_registry *reg, uint64_t now_usec,
			     reply_noreply_fn fn, void *userdata);
/* Deadline of the oldest slot (for the event loop's timer), 0 if none. */
uint64_t reply_registry_next_deadline(const struct reply_registry *reg);

/*
 * Re-exec (state.h): every slot, section STATE_TAG_REPLY. The owners are
 * named by their place in @owners (every peer's, in the state's peer order);
 * per callee in the order of its pending slots, so that NoReply errors keep
 * their order, with their deadlines as they were (0: never). Restoring does
 * no quota check. Return (restore): 0, -EEXIST or -ENOMEM.
 */
struct state_reader;
struct state_writer;

#define REPLY_REGISTRY_STATE_VERSION 1u

struct reply_registry_state {
	struct reply_slot_state {
		uint32_t callee;	/* places in the owners */
		uint32_t caller;
		uint32_t serial;
		uint64_t deadline_usec;
	} *slots;
	size_t n_slots;
};

void reply_registry_serialize(const struct reply_registry *reg, struct state_writer *w,
			      struct reply_owner *const *owners, size_t n_owners);
/* @n_owners: how many the state has (a slot naming another is malformed). */
bool reply_registry_state_read(struct state_reader *r, struct reply_registry_state *st,
			       size_t n_owners);
void reply_registry_state_deinit(struct reply_registry_state *st);
int reply_registry_restore(struct reply_registry *reg, const struct reply_registry_state *st,
			   struct reply_owner *const *owners);
