/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The bus's records in the crash journal: see bus-journal.h.
 */

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include "broker/activation/activation.h"
#include "broker/core/bus-journal.h"
#include "broker/core/bus.h"
#include "broker/core/router.h"
#include "broker/objects/log.h"
#include "broker/objects/match.h"
#include "broker/objects/name.h"
#include "broker/objects/peer.h"
#include "broker/objects/reply.h"
#include "broker/objects/state.h"

/* A record of @type to fill, or NULL: no journal, or the bus replays one. */
static struct state_writer *record_begin(struct bus *bus, uint32_t type)
{
	if (!bus->journal || bus->replaying)
		return NULL;
	return journal_record_begin(bus->journal, type);
}

void bus_journal_hello(struct peer *peer)
{
	struct bus *bus = peer->bus;
	struct state_writer *w = record_begin(bus, JOURNAL_REC_HELLO);

	if (!w)
		return;
	if (bus->loop->serialize_peer(peer, w) < 0 && !w->error)
		w->error = -ENOMEM;
	journal_record_end(bus->journal);
}

void bus_journal_gone(struct peer *peer)
{
	struct bus *bus = peer->bus;
	struct state_writer *w = record_begin(bus, JOURNAL_REC_GONE);

	if (!w)
		return;
	state_put_u64(w, peer->owner.id);
	journal_record_end(bus->journal);
}

void bus_journal_name(struct peer *peer, uint32_t type, const char *name, uint32_t flags)
{
	struct bus *bus = peer->bus;
	struct state_writer *w = record_begin(bus, type);

	if (!w)
		return;
	state_put_u64(w, peer->owner.id);
	state_put_str(w, name);
	state_put_u32(w, flags);
	journal_record_end(bus->journal);
}

void bus_journal_match(struct peer *peer, uint32_t type, const struct match_rule *rule)
{
	struct bus *bus = peer->bus;
	struct state_writer *w;
	char text[4 * MATCH_RULE_MAX_LENGTH];

	if (!bus->journal || bus->replaying)
		return;
	if (match_rule_to_string(rule, text, sizeof(text)) < 0) {
		/* Cannot be written down: a snapshot carries it instead. */
		journal_changed(bus->journal);
		return;
	}
	w = journal_record_begin(bus->journal, type);
	state_put_u64(w, peer->owner.id);
	state_put_str(w, text);
	journal_record_end(bus->journal);
}

void bus_journal_reply(struct peer *caller, struct peer *callee, uint32_t type, uint32_t serial,
		       uint64_t deadline_usec)
{
	struct bus *bus = caller->bus;
	struct state_writer *w = record_begin(bus, type);

	if (!w)
		return;
	state_put_u64(w, caller->owner.id);
	state_put_u64(w, callee->owner.id);
	state_put_u32(w, serial);
	state_put_u64(w, deadline_usec);
	journal_record_end(bus->journal);
}

void bus_journal_sync(struct bus *bus)
{
	uint64_t n;
	int r;

	if (!bus->journal)
		return;
	n = activation_changes(bus->activation);
	if (n != bus->journal_activation) {
		bus->journal_activation = n;
		journal_changed(bus->journal);
	}
	r = journal_sync(bus->journal);
	if (r < 0)
		log_err("crash journal: cannot write a snapshot: %s; the bus no longer "
			"survives a crash", log_error(r));
}

struct peer *bus_find_peer_by_id(struct bus *bus, uint64_t id)
{
	char name[32];
	struct name_owner *o;
	struct peer *p;

	snprintf(name, sizeof(name), ":1.%" PRIu64, id);
	o = name_registry_find_unique(bus->names, name);
	if (o) {
		p = container_of(o, struct peer, owner);
		return p->closed ? NULL : p;
	}
	/* A monitor's unique name left the registry (monitor.c). */
	list_for_each_entry(p, &bus->monitors, monitor_link)
		if (p->owner.id == id && !p->closed)
			return p;
	return NULL;
}

static int replay_match(struct bus *bus, struct peer *p, uint32_t type, const char *text)
{
	struct match_rule *rule = NULL, *other;
	const char *reason = NULL;
	int r;

	r = match_rule_parse(&rule, text, &reason);
	if (r)
		return r < 0 ? r : -EBADMSG;
	if (type == JOURNAL_REC_MATCH_ADD) {
		/* As AddMatch charged it; the limits were met when it was made. */
		(void)peer_charge(p, USER_SLOT_MATCHES, 1);
		r = match_registry_add(bus->matches, &p->matches, rule);
		if (r < 0) {
			peer_uncharge(p, USER_SLOT_MATCHES, 1);
			match_rule_free(rule);
			return r;
		}
		bus->n_eavesdrop_rules += rule->eavesdrop;
		return 0;
	}
	/* RemoveMatch: the newest equal rule. */
	other = match_owner_find_newest(&p->matches, rule);
	match_rule_free(rule);
	if (!other)
		return -EBADMSG;
	if (other->eavesdrop && bus->n_eavesdrop_rules)
		bus->n_eavesdrop_rules--;
	match_registry_remove(other);
	peer_uncharge(p, USER_SLOT_MATCHES, 1);
	return 0;
}

static int replay_reply(struct bus *bus, uint32_t type, struct peer *caller, struct peer *callee,
			uint32_t serial, uint64_t deadline)
{
	struct reply_slot *slot;
	int r;

	if (type == JOURNAL_REC_REPLY_DONE) {
		slot = reply_registry_find(bus->replies, &caller->replies, &callee->replies, serial);
		/* Gone already (the caller's reply timed out, or it was undone): nothing to do. */
		if (slot)
			reply_slot_free(slot);
		return 0;
	}
	r = reply_registry_add_restored(bus->replies, &caller->replies, &callee->replies, serial,
					deadline);
	/* There already: a record the snapshot holds too. */
	return r == -EEXIST ? 0 : r;
}

int bus_journal_replay(struct bus *bus, const struct journal_record *rec, struct state_reader *r)
{
	uint64_t id = state_get_u64(r);
	struct peer *p = r->error ? NULL : bus_find_peer_by_id(bus, id);
	const char *str;
	uint32_t flags, reply;
	int ret;

	if (!p)
		return -EBADMSG;
	switch (rec->type) {
	case JOURNAL_REC_GONE:
		peer_close(p, NULL);
		return 0;
	case JOURNAL_REC_NAME_REQUEST:
	case JOURNAL_REC_NAME_RELEASE:
		str = state_get_str(r);
		flags = state_get_u32(r);
		if (r->error || !str)
			return -EBADMSG;
		if (rec->type == JOURNAL_REC_NAME_REQUEST)
			ret = name_registry_request(bus->names, &p->owner, str, flags, &reply);
		else
			ret = name_registry_release(bus->names, &p->owner, str, &reply);
		if (ret < 0)
			return ret;
		router_sync_name_charge(p);
		return 0;
	case JOURNAL_REC_MATCH_ADD:
	case JOURNAL_REC_MATCH_REMOVE:
		str = state_get_str(r);
		if (r->error || !str)
			return -EBADMSG;
		return replay_match(bus, p, rec->type, str);
	case JOURNAL_REC_REPLY_ADD:
	case JOURNAL_REC_REPLY_DONE: {
		struct peer *callee = bus_find_peer_by_id(bus, state_get_u64(r));
		uint32_t serial = state_get_u32(r);
		uint64_t deadline = state_get_u64(r);

		if (r->error || !callee)
			return -EBADMSG;
		return replay_reply(bus, rec->type, p, callee, serial, deadline);
	}
	default:
		return -EBADMSG;
	}
}

bool bus_journal_check(const struct journal_record *rec, struct state_reader *r)
{
	struct match_rule *rule = NULL;
	const char *str, *reason = NULL;
	bool ok;

	(void)state_get_u64(r);
	switch (rec->type) {
	case JOURNAL_REC_GONE:
		return !r->error;
	case JOURNAL_REC_NAME_REQUEST:
	case JOURNAL_REC_NAME_RELEASE:
		str = state_get_str(r);
		(void)state_get_u32(r);
		return !r->error && str;
	case JOURNAL_REC_MATCH_ADD:
	case JOURNAL_REC_MATCH_REMOVE:
		str = state_get_str(r);
		ok = !r->error && str && match_rule_parse(&rule, str, &reason) == 0;
		match_rule_free(rule);
		return ok;
	case JOURNAL_REC_REPLY_ADD:
	case JOURNAL_REC_REPLY_DONE:
		(void)state_get_u64(r);
		(void)state_get_u32(r);
		(void)state_get_u64(r);
		return !r->error;
	default:
		return false;
	}
}
