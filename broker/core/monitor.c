/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Monitors (BecomeMonitor): filters and capture. See monitor.h.
 */

#include <errno.h>
#include <stdlib.h>
#include "broker/core/bus.h"
#include "broker/core/bus-journal.h"
#include "broker/objects/peer.h"
#include "broker/objects/log.h"
#include "broker/objects/match.h"
#include "broker/core/monitor.h"
#include "broker/objects/name.h"
#include "broker/core/router.h"
#include "dbus-compat/message.h"

int monitor_become(struct peer *peer, struct match_rule **rules, size_t n_rules)
{
	struct bus *bus = peer->bus;
	struct match_rule *rule;
	size_t i;
	int r;

	/* Not a record of its own: the next snapshot has it a monitor. */
	bus_journal_changed(bus);
	list_for_each_entry(rule, &peer->matches.rules, owner_link)
		if (rule->eavesdrop && bus->n_eavesdrop_rules)
			bus->n_eavesdrop_rules--;
	match_owner_deinit(&peer->matches);
	peer_uncharge(peer, USER_SLOT_MATCHES, peer->charges[USER_SLOT_MATCHES].amount);
	match_owner_init(&peer->matches, &peer->owner);

	for (i = 0; i < n_rules; i++) {
		match_rule_set_eavesdrop(rules[i], true);
		r = match_registry_add(bus->monitor_matches, &peer->matches, rules[i]);
		if (r < 0) {
			/* Rules added so far belong to the registry; free the rest. */
			for (size_t j = i; j < n_rules; j++)
				rules[j] = match_rule_free(rules[j]);
			peer_close(peer, "out of memory becoming a monitor");
			return 0;
		}
		rules[i] = NULL;
	}

	/*
	 * Others see the monitor's names go away, and the monitor gets NameLost
	 * for each (busctl monitor waits for its unique name's): the unique
	 * name first, then the others oldest first, as dbus-daemon orders them
	 * here (a disconnect is the other way round). Only then is it a monitor.
	 */
	if (peer->owner.registry)
		name_registry_remove_unique_first(bus->names, &peer->owner);
	router_sync_name_charge(peer);
	reply_owner_flush(&peer->replies, router_noreply, bus);
	/* Still an active connection (dbus-daemon's count and limit). */
	peer->monitor = true;
	/* As dbus-daemon logs it. */
	log_info("Connection %s (%s) became a monitor.", peer_name(peer),
		 peer_loginfo(peer) ? peer_loginfo(peer) : "");

	list_append(&bus->monitors, &peer->monitor_link);
	return 0;
}

void monitor_capture_all(struct bus *bus, struct message *msg, struct peer *sender,
			 struct peer *recipient)
{
	struct match_message mm;
	struct list_node result;
	struct match_owner *o;

	router_fill_match(&mm, msg, sender, recipient);
	/* Monitors see everything: no recipient is excluded. */
	mm.recipient = NULL;
	match_registry_match(bus->monitor_matches, &mm, &result);
	list_for_each_entry(o, &result, result_link) {
		struct peer *c = container_of(o, struct peer, matches);
		int r;

		if (c->closed || c->overflow || !c->monitor)
			continue;
		/* A monitor that cannot take fds does not get such messages. */
		if (msg->n_fds && !c->unix_fds)
			continue;
		r = peer_queue(c, msg);
		if (r == PEER_E_QUOTA)
			peer_overflow(c);
	}
}
