/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/**
 * DOC: Socket connections
 *
 * A struct connection is one client on a unix socket: a struct socket (wire
 * I/O), the SASL server during authentication, and then the D-Bus state of
 * the peer: its unique name and owned names (struct name_owner), its match
 * rules, its pending method calls, its accounting user.
 *
 * Life cycle: accepted -> authenticating (SASL, bounded by auth_timeout) ->
 * authenticated (framing; the first message must be Hello, anything else
 * disconnects, as dbus-daemon does) -> registered (has ":1.N") -> possibly a
 * monitor -> closed. connection_close() tears the D-Bus state down at once
 * (names released with their signals, callers of pending calls get NoReply)
 * and hands the object to the bus, which frees it after the current
 * dispatch, so callers up the stack may still look at it (->closed is set).
 *
 * Output: every message is queued on the socket as a struct delivery that
 * references the (shared) message; the bus flushes dirty connections once per
 * loop iteration. Queued bytes and fds are charged to the receiving
 * connection's limits (see connection_queue()).
 */

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <systemd/sd-event.h>
#include "broker/match.h"
#include "broker/name.h"
#include "broker/reply.h"
#include "broker/user.h"
#include "dbus-compat/address.h"
#include "dbus-compat/sasl.h"
#include "dbus-compat/socket.h"
#include "util/list.h"

struct bus;
struct bus_client_policy;
struct message;

struct connection {
	struct bus *bus;
	struct list_node bus_link;	/* bus->connections */
	struct list_node flush_link;	/* bus->flush_list while output is pending */
	struct list_node monitor_link;	/* bus->monitors */
	struct list_node dead_link;	/* bus->dead_list once closed */

	struct socket *socket;
	struct native_conn *native;	/* bus1 transport after the bootstrap (native.h) */
	sd_event_source *io;
	sd_event_source *auth_timer;
	sd_event_source *pending_fd_timer; /* fds held in an incomplete message */
	int *spare_fds;			/* fds sent beyond the UNIX_FDS of its messages, */
	size_t n_spare_fds;		/* for the next ones (connection.c) */
	uint32_t io_events;		/* events currently requested */
	struct sasl_server sasl;

	/* credentials */
	uid_t uid;			/* (uid_t)-1: unknown (TCP, ANONYMOUS) */
	pid_t pid;			/* 0: unknown */
	bool socket_identity;		/* uid is the socket peer's: its groups apply */
	/* nonce-tcp: the nonce the client must send before the SASL NUL byte */
	uint8_t nonce[ADDRESS_NONCE_LEN];
	uint8_t nonce_left;		/* bytes still expected */
	uint8_t nonce_diff;		/* OR of the differences seen so far */
	struct user *user;		/* accounting */
	struct user_charge charges[_USER_SLOT_N];	/* what this connection holds */
	struct bus_client_policy *policy;	/* rules that apply to it, NULL: allow all */

	/* D-Bus state */
	struct name_owner owner;	/* unique name + well-known names */
	struct match_owner matches;	/* AddMatch rules */
	struct reply_owner replies;	/* calls this connection must answer */
	unsigned int n_names;		/* well-known names owned or queued for */

	bool authenticated;		/* SASL done, framing on */
	bool registered;		/* Hello done */
	bool monitor;			/* BecomeMonitor done */
	bool unix_fds;			/* NEGOTIATE_UNIX_FD agreed */
	bool anonymous;			/* authenticated with ANONYMOUS */
	bool closed;			/* connection_close() ran */
	bool eof;			/* peer closed its end */
	bool overflow;			/* output quota exceeded: closed after this dispatch */
	struct list_node overflow_link;	/* bus->overflow_list */

	/* accounting of the output queue */
	size_t n_queued_bytes;
	size_t n_queued_fds;

	/* statistics */
	uint64_t n_incoming;
	uint64_t n_outgoing;
	uint64_t peak_queued_bytes;
	uint64_t peak_queued_fds;
	size_t n_queued_msgs;		/* deliveries in the output queue */
	size_t n_dispatching_bytes;	/* its message being routed now */
	size_t n_dispatching_fds;
	uint64_t peak_dispatching_bytes;
	uint64_t peak_dispatching_fds;
	unsigned int peak_names;	/* unique name + names owned or queued for */
	unsigned int peak_matches;
};

/**
 * connection_new() - take over an accepted socket
 * @connp:	output (linked into the bus)
 * @bus:	the bus
 * @fd:	the accepted socket (unix or TCP), owned by the connection from now on
 * @nonce:	nonce-tcp: the ADDRESS_NONCE_LEN bytes the client must send
 *		first (a wrong one closes the connection), or NULL
 *
 * The peer's pidfd (its ProcessFD) is taken now, with its credentials
 * (socket_creds_query()); a TCP peer has no credentials: it is known by what
 * it authenticates as (DBUS_COOKIE_SHA1) or not at all (ANONYMOUS).
 *
 * Return: 0 or negative errno.
 */
int connection_new(struct connection **connp, struct bus *bus, int fd, const uint8_t *nonce);

/* The peer's pidfd (owned by the connection), or -1 if unknown. */
int connection_get_pidfd(const struct connection *conn);

/*
 * A native (bus1) connection's first message was stamped by the kernel with
 * @pid: from now on the connection's process is that one (pid and pidfd).
 */
void connection_set_native_pid(struct connection *conn, pid_t pid);

/* Free a closed connection (called by the bus after dispatch). */
struct connection *connection_free(struct connection *conn);

/**
 * connection_close() - disconnect and tear down the D-Bus state
 * @conn:	connection (closing twice is a no-op)
 * @reason:	logged (at info level) when not NULL
 */
void connection_close(struct connection *conn, const char *reason);

/**
 * connection_queue() - queue a message for this connection
 * @conn:	destination
 * @msg:	the message, already stitched (a reference is taken)
 *
 * Return: 0 if queued; CONNECTION_E_QUOTA if the destination's output queue
 * is over its byte or fd limit (nothing queued; the caller decides between an
 * error to the sender and disconnecting the receiver); CONNECTION_E_DEAD if
 * the destination is closed; negative errno.
 */
int connection_queue(struct connection *conn, struct message *msg);

enum {
	_CONNECTION_E_SUCCESS,
	CONNECTION_E_QUOTA,
	CONNECTION_E_DEAD,
};

/* Bytes of queue entries (struct delivery) in use and kept for reuse, over all connections. */
void connection_pool_stats(size_t *used_bytes, size_t *cached_bytes);

/* Write out queued output (called by the bus' flush source). */
void connection_flush(struct connection *conn);

/* The unique name (":1.N"); only meaningful when registered. */
static inline const char *connection_name(const struct connection *conn)
{
	return conn->owner.unique_name;
}

/* Whether @conn may receive fds (negotiated during SASL). */
static inline bool connection_can_receive_fds(const struct connection *conn)
{
	return conn->unix_fds;
}

/* Next serial for a message the bus sends (bus-wide counter, never 0). */
uint32_t bus_next_serial(struct bus *bus);

/*
 * Charge / uncharge @amount of @slot to the connection's user, recorded in the
 * connection (returned in full when it is freed). charge: 0 or USER_E_QUOTA.
 */
int connection_charge(struct connection *conn, enum user_slot slot, uint64_t amount);
void connection_uncharge(struct connection *conn, enum user_slot slot, uint64_t amount);
/*
 * Parse @msg, which takes over the @n_fds fds in @fds (not the array), and
 * route it; consumes @msg. 0 when routed, 1 when the message was invalid and
 * the connection is closed for it, or -errno.
 */
int connection_dispatch_incoming(struct connection *conn, struct message *msg, const int *fds,
				 size_t n_fds);

/* Charge a queued message's bytes and fds, both or neither: 0 or USER_E_QUOTA. */
int connection_charge_message(struct connection *conn, uint64_t bytes, uint64_t n_fds);

/*
 * (Re)build the connection's client policy from bus->policy. Return 0, 1 if
 * the policy does not let it connect at all, or -ENOMEM.
 */
int connection_setup_policy(struct connection *conn);

/* Mark @conn to be disconnected because it does not read its output. */
void connection_overflow(struct connection *conn);
