/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The driver's org.freedesktop.DBus.Debug.Stats. See driver-internal.h.
 */

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "broker/activation/activation.h"
#include "broker/core/bus.h"
#include "broker/objects/peer.h"
#include "broker/core/driver.h"
#include "broker/objects/log.h"
#include "broker/objects/match.h"
#include "broker/core/monitor.h"
#include "broker/objects/name.h"
#include "broker/policy/policy.h"
#include "broker/objects/reply.h"
#include "broker/core/router.h"
#include "broker/objects/user.h"
#include "conf/config.h"
#include "conf/policy.h"
#include "dbus-compat/marshal.h"
#include "dbus-compat/message.h"
#include "dbus-compat/native-protocol.h"
#include "dbus-compat/protocol.h"
#include "dbus-compat/signature.h"
#include "dbus-compat/socket.h"
#include "dbus-compat/validate.h"
#include "broker/core/driver-internal.h"

/* ----------------------------------------------------------------- Stats */

/*
 * org.freedesktop.DBus.Debug.Stats reports the keys of dbus-daemon 1.14
 * (bus/stats.c), with its meanings:
 *  - BusNames: entries in name queues, every connection's unique name
 *    included (a connection owning two names and queued for a third counts
 *    4); monitors have none. MatchRules: AddMatch rules, monitors' filters
 *    included. Peak*: the highest value seen; Peak*PerConnection: the most
 *    one connection ever had.
 *  - ActiveConnections: connections after Hello, monitors included;
 *    IncompleteConnections: before it.
 *  - Serial: how many times the method was called before (one counter for
 *    GetStats, one for GetConnectionStats).
 *  - ListMemPool{Used,Cached,Allocated}Bytes: dbus-daemon's pool of list
 *    nodes; here the pool of output queue entries (struct delivery): bytes
 *    in use, kept for reuse, and both.
 * GetConnectionStats: Outgoing* is the output queue (messages, bytes, fds
 * queued and not yet written, with peaks; for a native client, what its
 * socket holds plus what it has not read of its bus1 queue, as the broker
 * last learnt it from the kernel); Incoming* is what the bus holds
 * of the connection's messages. The broker routes each message as soon as
 * it is read, so IncomingMessages is 0 and Incoming{Bytes,FDs} count the
 * message being routed (the caller's own call, for itself); once queued, a
 * message counts against its receivers' Outgoing* only (dbus-daemon also
 * keeps charging its sender until it is written).
 *
 * bus1-broker's own additions, for an operator who needs the accounting of
 * user.h without a core dump (issue 41); dbus-daemon's keys and methods stay
 * as they are:
 *  - GetConnectionStats adds UnixUserID and ProcessID (when known),
 *    AnswerBytes (answers to its own messages it has not read, what
 *    PEER_ANSWER_BACKLOG bounds), InputPaused (that bound reached: its input
 *    is not read), PendingReplies (calls it must answer) and
 *    ActivationMessages (its messages waiting for an activation).
 *  - ListConnectionStats(start, max): the same for the connections with a
 *    unique name (monitors have none) whose N of ":1.N" is >= start, by
 *    increasing N, at most max (0 or more than STATS_PAGE_MAX: that many),
 *    and the N to ask for next (0: no more). A page costs O(log n + max)
 *    whatever the number n of connections: the name registry keeps the
 *    unique names by id (name_registry_list_uniques()); a bus with 10,000
 *    connections is read in 40 calls, between which the other clients are
 *    served. Serial is GetConnectionStats' count, not raised.
 *  - GetUserStats: per uid, what is used of every quota and its limit, how
 *    many actors hold its queued bytes and the largest share, and the quota
 *    closest to its limit. O(users + actors).
 *  - What the bus refused (user.h, enum refusal), cumulative uint64 counts:
 *    RefusedLimits, RefusedPolicy (messages answered with LimitsExceeded,
 *    AccessDenied) and DroppedMessages (messages for it not delivered) per
 *    connection, the same per uid (of its connections while the uid has
 *    any) and for the bus; QueueFullDisconnects (connections closed for a
 *    full queue) per uid and for the bus; LogLinesSuppressed (log lines of
 *    refusals and of container filters left out by their rate limit,
 *    log-limit.h) for the bus. The log is rate-limited; these are not.
 */

/*
 * The most entries one ListConnectionStats call returns (see above): a page
 * of 256 is about 160 KiB and 1 ms of the bus's CPU (test-stats-paging.c, a
 * debug build on a loaded machine), well below the 5 ms another client may
 * wait for it.
 */
#define STATS_PAGE_MAX 256

static uint32_t conn_bus_names(const struct peer *peer)
{
	return (uint32_t)peer->owner.n_ownerships + (peer->owner.registry ? 1 : 0);
}

/* The counts of enum refusal (@disconnects: QueueFullDisconnects too). */
static void write_refusals(struct dc_writer *w, const struct refusal_counts *rc,
			   bool disconnects)
{
	driver_asv_t(w, "RefusedLimits", rc->n[REFUSAL_LIMITS]);
	driver_asv_t(w, "RefusedPolicy", rc->n[REFUSAL_POLICY]);
	driver_asv_t(w, "DroppedMessages", rc->n[REFUSAL_DROPPED]);
	if (disconnects)
		driver_asv_t(w, "QueueFullDisconnects", rc->n[REFUSAL_QUEUE_FULL]);
}

int driver_method_get_stats(struct driver_call *c)
{
	struct bus *bus = c->bus;
	struct bus_transport_stats st;
	struct message_builder b;
	struct dc_writer *w;

	bus_transport_stats(bus, &st);
	driver_reply_init(c, &b, "a{sv}");
	w = &b.body;
	dc_writer_open(w, 'a', NULL);
	driver_asv_u(w, "Serial", bus->stats_serial++);
	driver_asv_u(w, "ListMemPoolUsedBytes", (uint32_t)st.queue_used_bytes);
	driver_asv_u(w, "ListMemPoolCachedBytes", (uint32_t)st.queue_cached_bytes);
	driver_asv_u(w, "ListMemPoolAllocatedBytes",
	      (uint32_t)(st.queue_used_bytes + st.queue_cached_bytes));
	driver_asv_u(w, "ActiveConnections", bus->n_active);
	driver_asv_u(w, "IncompleteConnections", bus->n_incomplete);
	driver_asv_u(w, "MatchRules", (uint32_t)bus->match_peaks.n_rules);
	driver_asv_u(w, "PeakMatchRules", bus->match_peaks.peak_rules);
	driver_asv_u(w, "PeakMatchRulesPerConnection", bus->match_peaks.peak_rules_per_owner);
	driver_asv_u(w, "BusNames", (uint32_t)(bus->names->n_ownerships +
					hmap_size(&bus->names->uniques)));
	driver_asv_u(w, "PeakBusNames", bus->names->peak_names);
	driver_asv_u(w, "PeakBusNamesPerConnection", bus->names->peak_names_per_owner);
	/* bus1-broker's own keys. */
	write_refusals(w, &bus->refusals, true);
	driver_asv_t(w, "LogLinesSuppressed", bus->log_limits.n_suppressed);
	dc_writer_close(w);
	return driver_reply_send(c, &b);
}

static uint32_t clamp_u32(uint64_t v)
{
	return v > UINT32_MAX ? UINT32_MAX : (uint32_t)v;
}

/* GetConnectionStats' entries for @peer, dbus-daemon's then ours, inside the open array. */
static void write_conn_stats(struct bus *bus, struct dc_writer *w, struct peer *peer)
{
	struct peer_output_stats out;

	driver_asv_u(w, "Serial", bus->conn_stats_serial);
	driver_asv_u(w, "MatchRules", (uint32_t)peer->matches.n_rules);
	driver_asv_u(w, "PeakMatchRules", peer->matches.peak_rules);
	driver_asv_u(w, "BusNames", conn_bus_names(peer));
	driver_asv_u(w, "PeakBusNames", peer->owner.peak_names);
	driver_asv_s(w, "UniqueName", peer_name(peer));
	driver_asv_u(w, "IncomingMessages", 0);
	driver_asv_u(w, "IncomingBytes", (uint32_t)peer->n_dispatching_bytes);
	driver_asv_u(w, "IncomingFDs", (uint32_t)peer->n_dispatching_fds);
	driver_asv_u(w, "PeakIncomingBytes", (uint32_t)peer->peak_dispatching_bytes);
	driver_asv_u(w, "PeakIncomingFDs", (uint32_t)peer->peak_dispatching_fds);
	/* What its transports hold (a native client's: its socket's and its bus1 queue). */
	peer_output_stats(peer, &out);
	driver_asv_u(w, "OutgoingMessages", (uint32_t)out.msgs);
	driver_asv_u(w, "OutgoingBytes", (uint32_t)out.bytes);
	driver_asv_u(w, "OutgoingFDs", (uint32_t)out.fds);
	driver_asv_u(w, "PeakOutgoingBytes", (uint32_t)out.peak_bytes);
	driver_asv_u(w, "PeakOutgoingFDs", (uint32_t)out.peak_fds);

	/* bus1-broker's own keys. */
	if (peer->uid != (uid_t)-1)
		driver_asv_u(w, "UnixUserID", (uint32_t)peer->uid);
	if (peer->pid > 0)
		driver_asv_u(w, "ProcessID", (uint32_t)peer->pid);
	driver_asv_u(w, "AnswerBytes", clamp_u32(peer->n_answer_bytes));
	driver_asv_b(w, "InputPaused", peer->input_paused);
	driver_asv_u(w, "PendingReplies", clamp_u32(peer->replies.n_pending));
	driver_asv_u(w, "ActivationMessages",
		     clamp_u32(peer->charges[USER_SLOT_ACTIVATIONS].amount));
	/* It is disconnected once its queue is full: no count of its own. */
	write_refusals(w, &peer->refusals, false);
}

int driver_method_get_connection_stats(struct driver_call *c)
{
	struct peer *peer = NULL;
	bool self = false;
	struct message_builder b;
	struct dc_writer *w;
	const char *name;
	int r;

	r = driver_lookup_conn(c, "statistics", &name, &peer, &self);
	if (r)
		return r;
	if (self)
		return driver_fail(c, DC_ERROR_INVALID_ARGS,
				   "GetConnectionStats is not meaningful for the message bus "
				   "\"%s\" itself", name);
	driver_reply_init(c, &b, "a{sv}");
	w = &b.body;
	dc_writer_open(w, 'a', NULL);
	write_conn_stats(c->bus, w, peer);
	c->bus->conn_stats_serial++;
	dc_writer_close(w);
	return driver_reply_send(c, &b);
}

int driver_method_list_connection_stats(struct driver_call *c)
{
	struct name_owner *owners[STATS_PAGE_MAX];
	struct message_builder b;
	struct dc_writer *w;
	uint32_t start, max;
	uint64_t next;
	size_t n;

	if (dc_reader_read(&c->reader, "uu", &start, &max))
		return driver_fail(c, DC_ERROR_INVALID_ARGS, "Invalid arguments");
	if (!max || max > STATS_PAGE_MAX)
		max = STATS_PAGE_MAX;
	n = name_registry_list_uniques(c->bus->names, start, owners, max, &next);
	driver_reply_init(c, &b, "ua(sa{sv})");
	w = &b.body;
	/* "u" as the arguments: a bus past :1.4294967295 cannot be paged beyond it. */
	dc_writer_write(w, "u", clamp_u32(next));
	dc_writer_open(w, 'a', NULL);
	for (size_t i = 0; i < n; i++) {
		struct peer *peer = container_of(owners[i], struct peer, owner);

		dc_writer_open(w, '(', NULL);
		dc_writer_write(w, "s", peer_name(peer));
		dc_writer_open(w, 'a', NULL);
		write_conn_stats(c->bus, w, peer);
		dc_writer_close(w);
		dc_writer_close(w);
	}
	dc_writer_close(w);
	return driver_reply_send(c, &b);
}

static const char *const user_slot_names[_USER_SLOT_N][2] = {
	[USER_SLOT_BYTES] = { "Bytes", "MaxBytes" },
	[USER_SLOT_FDS] = { "FDs", "MaxFDs" },
	[USER_SLOT_MATCHES] = { "MatchRules", "MaxMatchRules" },
	[USER_SLOT_NAMES] = { "BusNames", "MaxBusNames" },
	[USER_SLOT_CONNECTIONS] = { "Connections", "MaxConnections" },
	[USER_SLOT_ACTIVATIONS] = { "ActivationMessages", "MaxActivationMessages" },
};

/*
 * Whether @used of @max is a larger part than @used2 of @max2, exactly (a
 * limit lowered by a reload may be below what is used; a limit of 0 counts
 * as full as soon as anything is used).
 */
static bool quota_above(uint64_t used, uint64_t max, uint64_t used2, uint64_t max2)
{
	return (unsigned __int128)used * max2 > (unsigned __int128)used2 * max;
}

static void write_user_stats(struct dc_writer *w, const struct bus *bus, const struct user *user)
{
	const struct user_counters *uc = &user->counters;
	uint64_t largest = 0, percent;
	unsigned int closest = 0;
	struct hmap_node *n;

	for (unsigned int i = 0; i < _USER_SLOT_N; i++) {
		driver_asv_t(w, user_slot_names[i][0], uc->used[i]);
		driver_asv_t(w, user_slot_names[i][1], uc->max[i]);
		if (quota_above(uc->used[i], uc->max[i], uc->used[closest], uc->max[closest]))
			closest = i;
	}
	for (n = hmap_next(&user->actors, NULL); n; n = hmap_next(&user->actors, n)) {
		const struct user_actor *a = container_of(n, struct user_actor, node);

		largest = MAX(largest, a->bytes);
	}
	/* Counted, bounded per connection: no part of a quota of the user. */
	driver_asv_t(w, "PendingReplies", user->n_pending_replies);
	driver_asv_t(w, "MaxPendingReplies", (uint64_t)bus->limits.max_replies_per_connection);
	driver_asv_u(w, "Actors", (uint32_t)hmap_size(&user->actors));
	driver_asv_t(w, "LargestActorBytes", largest);
	percent = uc->max[closest] ?
		  (uint64_t)((unsigned __int128)uc->used[closest] * 100 / uc->max[closest]) :
		  (uc->used[closest] ? 100 : 0);
	driver_asv_s(w, "ClosestQuota", user_slot_names[closest][0]);
	driver_asv_u(w, "ClosestQuotaPercent", clamp_u32(percent));
	write_refusals(w, &user->refusals, true);
}

int driver_method_get_user_stats(struct driver_call *c)
{
	struct hmap *users = &c->bus->users->users;
	struct message_builder b;
	struct dc_writer *w;
	struct hmap_node *n;

	driver_reply_init(c, &b, "a(ua{sv})");
	w = &b.body;
	dc_writer_open(w, 'a', NULL);
	for (n = hmap_next(users, NULL); n; n = hmap_next(users, n)) {
		const struct user *user = container_of(n, struct user, node);

		dc_writer_open(w, '(', NULL);
		dc_writer_write(w, "u", (uint32_t)user->uid);
		dc_writer_open(w, 'a', NULL);
		write_user_stats(w, c->bus, user);
		dc_writer_close(w);
		dc_writer_close(w);
	}
	dc_writer_close(w);
	return driver_reply_send(c, &b);
}

int driver_method_get_all_match_rules(struct driver_call *c)
{
	struct message_builder b;
	struct dc_writer *w;
	struct peer *peer;
	char buf[MATCH_RULE_MAX_LENGTH * 4];

	driver_reply_init(c, &b, "a{sas}");
	w = &b.body;
	dc_writer_open(w, 'a', NULL);
	list_for_each_entry(peer, &c->bus->peers, bus_link) {
		struct match_rule *rule;

		if (!peer->registered || peer->closed)
			continue;
		dc_writer_open(w, '{', NULL);
		dc_writer_write(w, "s", peer_name(peer));
		dc_writer_open(w, 'a', NULL);
		list_for_each_entry(rule, &peer->matches.rules, owner_link) {
			if (match_rule_to_string(rule, buf, sizeof(buf)) >= 0)
				dc_writer_write(w, "s", buf);
		}
		dc_writer_close(w);
		dc_writer_close(w);
	}
	dc_writer_close(w);
	return driver_reply_send(c, &b);
}

