/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * A peer's life and its input (peer.h): authenticated, registered, closed,
 * and the messages it sends, handed to the router. Here the peer meets the
 * bus, the policy and the router; peer.c, the object itself (its
 * credentials, charges and attachments), calls none of them.
 */

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "broker/core/bus.h"
#include "broker/core/bus-journal.h"
#include "broker/objects/log.h"
#include "broker/objects/peer.h"
#include "broker/policy/policy.h"
#include "broker/core/router.h"
#include "dbus-compat/message.h"

static void peer_attachments_gone(struct peer *peer)
{
	struct peer_attachment *a, *tmp;

	/* An op may detach and free its own attachment (no other). */
	list_for_each_entry_safe(a, tmp, &peer->attachments, peer_link)
		if (a->ops->gone)
			a->ops->gone(a);
}

void peer_close(struct peer *peer, const char *reason)
{
	struct bus *bus = peer->bus;

	if (peer->closed)
		return;
	peer->closed = true;

	if (reason)
		log_info("closing connection %s (uid %u pid %d): %s",
			 peer->registered ? peer_name(peer) : "(inactive)",
			 (unsigned)peer->uid, (int)peer->pid, reason);

	peer->transport->ops->close(peer->transport);
	/* A native client sees its connection node destroyed. */
	if (peer->output != peer->transport)
		peer->output->ops->close(peer->output);
	list_unlink(&peer->overflow_link);
	if (!peer->registered)
		bus_incomplete_done(bus);
	else
		bus_journal_gone(peer);

	/* D-Bus state: the router emits NameOwnerChanged, NoReply, ... */
	router_peer_gone(peer);
	/*
	 * Then the features, the newest first: a container's filtered
	 * connections forget it (after its NameOwnerChanged) and it them, then
	 * its instance may end (InstanceRemoved).
	 */
	peer_attachments_gone(peer);

	list_unlink(&peer->bus_link);
	list_append(&bus->dead_list, &peer->dead_link);
	bus_schedule_flush(bus);
}

void peer_set_registered(struct peer *peer)
{
	peer->registered = true;
	peer->bus->n_active++;
	bus_incomplete_done(peer->bus);
	if (peer->transport->ops->registered)
		peer->transport->ops->registered(peer->transport);
}

int peer_authenticated(struct peer *peer, uid_t uid, bool unix_fds, bool anonymous)
{
	const char *why = NULL;
	int r;

	peer->authenticated = true;
	peer->unix_fds = unix_fds;
	peer->anonymous = anonymous;
	if (uid != (uid_t)-1 && uid != peer->uid) {
		/*
		 * DBUS_COOKIE_SHA1: the identity is the one proven, not the
		 * socket's (a TCP peer has none). Nothing is charged to the peer
		 * before Hello: move it to its user.
		 */
		struct user *u = NULL;

		r = user_registry_ref_user(peer->bus->users, &u, uid);
		if (r < 0)
			return r;
		for (int i = 0; i < _USER_SLOT_N; i++)
			user_charge_release(&peer->charges[i]);
		user_unref(peer->user);
		peer->user = u;
		peer->replies.pending_tally = &u->n_pending_replies;
		peer->uid = uid;
		peer->socket_identity = false;
	}
	r = policy_check_connect_lsm(peer->bus, peer, &why);
	if (r < 0)
		return r;
	if (r == POLICY_E_REFUSED) {
		log_warn("Unable to set up new connection: %s", why);
		peer_close(peer, NULL);
		return PEER_E_REFUSED;
	}
	r = policy_setup_peer(peer);
	if (r < 0)
		return r;
	if (r == POLICY_E_REFUSED) {
		peer_close(peer, "the bus policy does not allow this user to connect");
		return PEER_E_REFUSED;
	}
	return 0;
}

int peer_dispatch_parsed(struct peer *peer, struct message *msg, int parsed)
{
	int r = parsed;

	if (r > 0) {
		log_info("disconnecting %s: invalid message: %s",
			 peer->registered ? peer_name(peer) : "(inactive)",
			 dc_invalid_to_string(r));
		peer_close(peer, NULL);
	} else if (r == 0) {
		size_t size = message_get_size(msg), n_fds_in = msg->n_fds;

		peer->n_incoming++;
		peer->bus->n_messages++;
		/* Debug.Stats: what the bus holds of its messages (IncomingBytes). */
		peer->n_dispatching_bytes += size;
		peer->n_dispatching_fds += n_fds_in;
		if (peer->n_dispatching_bytes > peer->peak_dispatching_bytes)
			peer->peak_dispatching_bytes = peer->n_dispatching_bytes;
		if (peer->n_dispatching_fds > peer->peak_dispatching_fds)
			peer->peak_dispatching_fds = peer->n_dispatching_fds;
		r = router_dispatch(peer, msg);
		peer->n_dispatching_bytes -= size;
		peer->n_dispatching_fds -= n_fds_in;
	}
	message_unref(msg);
	return r;
}

int peer_dispatch_incoming(struct peer *peer, struct message *msg, const int *fds,
			   size_t n_fds)
{
	/* The message owns the fds from here on, in all cases. */
	return peer_dispatch_parsed(peer, msg, message_parse(msg, fds, n_fds));
}

void peer_overflow(struct peer *peer)
{
	if (peer->overflow || peer->closed)
		return;
	peer_count_refusal(peer, REFUSAL_QUEUE_FULL);
	peer->overflow = true;
	list_append(&peer->bus->overflow_list, &peer->overflow_link);
	bus_schedule_flush(peer->bus);
}
