/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Expected-reply tracking (reply.h).
 */

#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include "broker/objects/reply.h"
#include "broker/objects/state.h"
#include "util/macro.h"

static uint64_t slot_hash(const struct reply_owner *caller, const struct reply_owner *callee,
			  uint32_t serial)
{
	struct {
		const void *a;
		const void *b;
		uint32_t s;
	} key;

	/* Zeroed first so padding never feeds random bytes into the hash. */
	__builtin_memset(&key, 0, sizeof(key));
	key.a = caller;
	key.b = callee;
	key.s = serial;
	return hash_bytes(&key, sizeof(key));
}

int reply_registry_new(struct reply_registry **regp, size_t max_per_caller,
		       uint64_t timeout_usec)
{
	struct reply_registry *reg;

	reg = calloc(1, sizeof(*reg));
	if (!reg)
		return -ENOMEM;
	hmap_init(&reg->slots);
	list_init(&reg->expire);
	reg->max_per_caller = max_per_caller;
	reg->timeout_usec = timeout_usec;
	*regp = reg;
	return 0;
}

struct reply_registry *reply_registry_free(struct reply_registry *reg)
{
	if (!reg)
		return NULL;
	if (reg->n_slots)
		abort(); /* slots would point at dead owners */
	hmap_deinit(&reg->slots);
	free(reg);
	return NULL;
}

void reply_owner_init(struct reply_owner *owner, struct reply_registry *reg)
{
	owner->registry = reg;
	list_init(&owner->calls);
	list_init(&owner->pending);
	owner->n_calls = 0;
	owner->n_pending = 0;
	owner->pending_tally = NULL;
}

void reply_owner_deinit(struct reply_owner *owner)
{
	reply_owner_flush(owner, NULL, NULL);
}

struct reply_slot *reply_registry_find(struct reply_registry *reg, struct reply_owner *caller,
				       struct reply_owner *callee, uint32_t serial)
{
	hmap_for_each_hash(n, &reg->slots, slot_hash(caller, callee, serial)) {
		struct reply_slot *s = container_of(n, struct reply_slot, node);

		if (s->caller == caller && s->callee == callee && s->serial == serial)
			return s;
	}
	return NULL;
}

/* A new slot, indexed and linked to both owners (not to the expiry list). */
static struct reply_slot *slot_new(struct reply_registry *reg, struct reply_owner *caller,
				   struct reply_owner *callee, uint32_t serial,
				   uint64_t deadline_usec)
{
	struct reply_slot *s;

	s = calloc(1, sizeof(*s));
	if (!s)
		return NULL;
	if (hmap_insert(&reg->slots, &s->node, slot_hash(caller, callee, serial)) < 0) {
		free(s);
		return NULL;
	}
	s->caller = caller;
	s->callee = callee;
	s->serial = serial;
	s->deadline_usec = deadline_usec;
	list_append(&caller->calls, &s->caller_link);
	caller->n_calls++;
	list_append(&callee->pending, &s->callee_link);
	callee->n_pending++;
	if (callee->pending_tally)
		(*callee->pending_tally)++;
	list_init(&s->expire_link);
	reg->n_slots++;
	return s;
}

int reply_registry_add(struct reply_registry *reg, struct reply_owner *caller,
		       struct reply_owner *callee, uint32_t serial, uint64_t now_usec,
		       struct reply_slot **slotp)
{
	struct reply_slot *s;

	/* A slot is freed through its caller's registry: both must be this one. */
	assert(caller->registry == reg && callee->registry == reg);
	/* dbus-daemon checks the duplicate before the limit. */
	if (reply_registry_find(reg, caller, callee, serial))
		return REPLY_E_EXISTS;
	if (reg->max_per_caller && caller->n_calls >= reg->max_per_caller)
		return REPLY_E_QUOTA;

	s = slot_new(reg, caller, callee, serial,
		     reg->timeout_usec ? now_usec + reg->timeout_usec : 0);
	if (!s)
		return -ENOMEM;
	if (s->deadline_usec)
		list_append(&reg->expire, &s->expire_link);
	if (slotp)
		*slotp = s;
	return 0;
}

void reply_slot_free(struct reply_slot *s)
{
	struct reply_registry *reg = s->caller->registry;

	assert(list_node_is_linked(&s->caller_link) && list_node_is_linked(&s->callee_link));
	assert(s->caller->n_calls > 0 && s->callee->n_pending > 0 && reg->n_slots > 0);
	assert(!s->callee->pending_tally || *s->callee->pending_tally > 0);
	hmap_remove(&reg->slots, &s->node);
	list_unlink(&s->caller_link);
	s->caller->n_calls--;
	list_unlink(&s->callee_link);
	s->callee->n_pending--;
	if (s->callee->pending_tally)
		(*s->callee->pending_tally)--;
	list_unlink(&s->expire_link);
	reg->n_slots--;
	free(s);
}

int reply_registry_consume(struct reply_registry *reg, struct reply_owner *receiver,
			   struct reply_owner *sender, uint32_t serial)
{
	struct reply_slot *s = reply_registry_find(reg, receiver, sender, serial);

	if (!s)
		return REPLY_E_UNEXPECTED;
	reply_slot_free(s);
	return 0;
}

void reply_owner_flush(struct reply_owner *owner, reply_noreply_fn fn, void *userdata)
{
	while (!list_is_empty(&owner->pending)) {
		struct reply_slot *s = list_entry(owner->pending.next, struct reply_slot,
						  callee_link);
		struct reply_owner *caller = s->caller;
		uint32_t serial = s->serial;

		/* Free first: the callback may add slots for the caller. */
		reply_slot_free(s);
		if (fn && caller != owner)
			fn(userdata, caller, owner, serial);
	}
	while (!list_is_empty(&owner->calls))
		reply_slot_free(list_entry(owner->calls.next, struct reply_slot, caller_link));
	assert(owner->n_calls == 0 && owner->n_pending == 0);
}

size_t reply_registry_expire(struct reply_registry *reg, uint64_t now_usec,
			     reply_noreply_fn fn, void *userdata)
{
	size_t n = 0;

	while (!list_is_empty(&reg->expire)) {
		struct reply_slot *s = list_entry(reg->expire.next, struct reply_slot,
						  expire_link);
		struct reply_owner *caller = s->caller, *callee = s->callee;
		uint32_t serial = s->serial;

		/* Only slots that expire are on the list (0 would expire at once). */
		assert(s->deadline_usec);
		if (s->deadline_usec > now_usec)
			break;
		reply_slot_free(s);
		if (fn)
			fn(userdata, caller, callee, serial);
		n++;
	}
	return n;
}

uint64_t reply_registry_next_deadline(const struct reply_registry *reg)
{
	if (list_is_empty(&reg->expire))
		return 0;
	return list_entry(reg->expire.next, struct reply_slot, expire_link)->deadline_usec;
}

int reply_registry_add_restored(struct reply_registry *reg, struct reply_owner *caller,
				struct reply_owner *callee, uint32_t serial, uint64_t deadline_usec)
{
	struct reply_slot *s, *pos;
	struct list_node *at;

	assert(caller->registry == reg && callee->registry == reg);
	if (reply_registry_find(reg, caller, callee, serial))
		return -EEXIST;
	s = slot_new(reg, caller, callee, serial, deadline_usec);
	if (!s)
		return -ENOMEM;
	if (deadline_usec) {
		/* Expiry goes oldest first: keep the list sorted, from the tail. */
		at = &reg->expire;
		while (at->prev != &reg->expire) {
			pos = list_entry(at->prev, struct reply_slot, expire_link);
			if (pos->deadline_usec <= deadline_usec)
				break;
			at = at->prev;
		}
		list_insert_between(&s->expire_link, at->prev, at);
	}
	return 0;
}

void reply_registry_serialize(const struct reply_registry *reg, struct state_writer *w,
			      struct reply_owner *const *owners, size_t n_owners)
{
	state_put_section(w, STATE_TAG_REPLY, REPLY_REGISTRY_STATE_VERSION);
	state_put_u64(w, reg->n_slots);
	for (size_t i = 0; i < n_owners; i++)
		owners[i]->state_index = (uint32_t)i;
	for (size_t i = 0; i < n_owners; i++) {
		const struct reply_slot *s;

		list_for_each_entry(s, &owners[i]->pending, callee_link) {
			state_put_u32(w, (uint32_t)i);
			state_put_u32(w, s->caller->state_index);
			state_put_u32(w, s->serial);
			state_put_u64(w, s->deadline_usec);
		}
	}
}

bool reply_registry_state_read(struct state_reader *r, struct reply_registry_state *st,
			       size_t n_owners)
{
	uint32_t version;
	size_t n;

	*st = (struct reply_registry_state){};
	if (!state_section(r, STATE_TAG_REPLY, REPLY_REGISTRY_STATE_VERSION, &version))
		return false;
	n = state_get_count(r, 20);
	st->slots = calloc(n ? n : 1, sizeof(*st->slots));
	if (!st->slots) {
		r->error = true;
		return false;
	}
	st->n_slots = n;
	for (size_t i = 0; i < n && !r->error; i++) {
		struct reply_slot_state *s = &st->slots[i];

		s->callee = state_get_u32(r);
		s->caller = state_get_u32(r);
		s->serial = state_get_u32(r);
		s->deadline_usec = state_get_u64(r);
		if (s->callee >= n_owners || s->caller >= n_owners)
			r->error = true;
	}
	return !r->error;
}

void reply_registry_state_deinit(struct reply_registry_state *st)
{
	free(st->slots);
	*st = (struct reply_registry_state){};
}

int reply_registry_restore(struct reply_registry *reg, const struct reply_registry_state *st,
			   struct reply_owner *const *owners)
{
	for (size_t i = 0; i < st->n_slots; i++) {
		const struct reply_slot_state *s = &st->slots[i];
		int r;

		r = reply_registry_add_restored(reg, owners[s->caller], owners[s->callee],
						s->serial, s->deadline_usec);
		if (r < 0)
			return r;
	}
	return 0;
}
