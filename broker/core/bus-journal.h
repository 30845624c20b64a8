/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/**
 * DOC: The bus's records in the crash journal
 *
 * What the bus appends to its crash journal (objects/journal.h) as it
 * changes, and how a new process applies the records to the bus restored
 * from the journal's snapshot. Each change is appended where it is made,
 * before its effect can reach a client:
 *
 *	Hello			JOURNAL_REC_HELLO: the peer's section (its
 *				socket, credentials, unique id)
 *	a registered peer closes JOURNAL_REC_GONE
 *	RequestName, ReleaseName JOURNAL_REC_NAME_*: the call as made; the
 *				registry is deterministic, so making it again
 *				on the same state gives the same queues
 *	AddMatch, RemoveMatch	JOURNAL_REC_MATCH_*: the rule as parsed
 *	a reply slot opens or closes (a call routed, its reply, an undo)
 *				JOURNAL_REC_REPLY_*
 *
 * Everything else asks for a new snapshot (bus_journal_changed()).
 *
 * Replaying (bus->replaying) sends nothing to anyone: the clients saw the
 * effects of what was journaled, or, if the crash came first, their
 * connections hold a mark (journal.h) and are closed.
 */

#include <stdbool.h>
#include <stdint.h>
#include "broker/objects/journal.h"

struct bus;
struct match_rule;
struct peer;
struct state_reader;

void bus_journal_hello(struct peer *peer);
void bus_journal_gone(struct peer *peer);
/* @type: JOURNAL_REC_NAME_REQUEST (with @flags) or _RELEASE. */
void bus_journal_name(struct peer *peer, uint32_t type, const char *name, uint32_t flags);
/* @type: JOURNAL_REC_MATCH_ADD or _REMOVE. */
void bus_journal_match(struct peer *peer, uint32_t type, const struct match_rule *rule);
/* @type: JOURNAL_REC_REPLY_ADD (with @deadline_usec) or _DONE. */
void bus_journal_reply(struct peer *caller, struct peer *callee, uint32_t type, uint32_t serial,
		       uint64_t deadline_usec);

/* A change without a record of its own: a snapshot before the next flush. */
static inline void bus_journal_changed(struct bus *bus);

/*
 * Before the bus writes to clients: whatever changed without a record
 * (the activation's state included) goes into a snapshot now.
 */
void bus_journal_sync(struct bus *bus);

/**
 * bus_journal_replay() - apply a record other than HELLO to the bus
 * @rec:	the record
 * @r:		a reader over its payload
 *
 * Return: 0, or -EBADMSG (it does not fit the bus: names a peer that is not
 * there, a rule that does not parse), or negative errno.
 */
int bus_journal_replay(struct bus *bus, const struct journal_record *rec, struct state_reader *r);

/*
 * Whether the payload of @rec (not a Hello) reads whole, as
 * bus_journal_replay() reads it, without a bus: the fuzzer's check.
 */
bool bus_journal_check(const struct journal_record *rec, struct state_reader *r);

/* The open peer with unique id @id, or NULL. */
struct peer *bus_find_peer_by_id(struct bus *bus, uint64_t id);

#include "broker/core/bus.h"

static inline void bus_journal_changed(struct bus *bus)
{
	journal_changed(bus->journal);
}
