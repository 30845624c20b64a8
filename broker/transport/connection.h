/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/**
 * DOC: Socket connections
 *
 * A struct connection is the socket transport of one peer (peer.h): a unix
 * or TCP socket (struct socket: wire I/O), the nonce of nonce-tcp, the SASL
 * server during authentication, the fds sent ahead of the messages that
 * take them, and the output queue. Every peer arrives through one; its
 * socket's end is the peer's end, also for a native client whose messages
 * travel over bus1.
 *
 * Life cycle: accepted -> authenticating (nonce, then SASL, bounded by
 * auth_timeout; peer_authenticated() when done) -> framing: every complete
 * message goes to peer_dispatch_parsed(). The peer owns the connection and
 * frees it (struct peer_transport).
 *
 * All connections make one transport of the bus (struct socket_transport,
 * bus.h's struct bus_transport), which the process creates: it accepts new
 * connections (socket_transport_accept()), keeps the list of connections
 * with output pending, flushed when the bus flushes its transports, and the
 * cache of queue entries.
 *
 * Output: every message is queued on the socket as a struct delivery that
 * references the (shared) message; the bus flushes dirty connections once
 * per loop iteration. Queued bytes and fds are charged to the peer (its
 * user's quota) and bounded by the bus' max_queued_bytes/fds.
 */

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <systemd/sd-event.h>
#include "broker/objects/peer.h"
#include "dbus-compat/address.h"
#include "dbus-compat/sasl.h"
#include "dbus-compat/socket.h"
#include "util/list.h"

struct bus;
struct delivery;
struct socket_transport;

struct connection {
	struct peer_transport transport;
	struct peer *peer;		/* owns the connection */
	struct socket_transport *sockets;	/* the transport of all connections */
	struct list_node flush_link;	/* sockets->flush_list while output is pending */

	struct socket *socket;
	sd_event_source *io;
	sd_event_source *auth_timer;
	uint64_t auth_since;		/* when auth_timer started counting (its log line) */
	sd_event_source *pending_fd_timer; /* fds held in an incomplete message */
	int *spare_fds;			/* fds sent beyond the UNIX_FDS of its messages, */
	size_t n_spare_fds;		/* for the next ones (connection.c) */
	uint32_t io_events;		/* events currently requested */
	bool input_left;		/* read budget spent before EAGAIN: re-arm */
	struct sasl_server *sasl;	/* until authenticated */

	/* nonce-tcp: the nonce the client must send before the SASL NUL byte */
	uint8_t nonce[ADDRESS_NONCE_LEN];
	uint8_t nonce_left;		/* bytes still expected */
	uint8_t nonce_diff;		/* OR of the differences seen so far */

	bool closed;			/* the peer closed it */
	bool eof;			/* the client closed its end */

	/* its output queue, for GetConnectionStats (peer_output_stats()) */
	size_t n_queued_bytes;		/* queued, not yet written */
	size_t n_queued_fds;
	size_t n_queued_msgs;
	uint64_t peak_queued_bytes;
	uint64_t peak_queued_fds;
};

/* The socket transport of @bus, registered with it (bus_add_transport()). 0 or -ENOMEM. */
int socket_transport_new(struct socket_transport **socketsp, struct bus *bus);
/* After the bus closed and freed every peer. Returns NULL. */
struct socket_transport *socket_transport_free(struct socket_transport *sockets);
/* The socket transport of @bus, or NULL. */
struct socket_transport *socket_transport_of(struct bus *bus);

/**
 * socket_transport_accept() - take over an accepted socket: a new peer
 * @fd:	the accepted socket (unix or TCP), owned by the connection from now on
 * @nonce:	nonce-tcp: the ADDRESS_NONCE_LEN bytes the client must send
 *		first (a wrong one closes the connection), or NULL
 *
 * Past max_incomplete_connections the socket is closed at once (the
 * listeners stop accepting at the limit; this is the fallback). The peer's
 * pidfd (its ProcessFD) is taken now, with its credentials
 * (socket_creds_query()); a TCP peer has no credentials: it is known by what
 * it authenticates as (DBUS_COOKIE_SHA1) or not at all (ANONYMOUS).
 *
 * @mechs:	the SASL_MECH_* offered: 0 for the bus' (<auth>), else a subset
 *		(a container's socket: EXTERNAL only)
 * @peerp:	output: the new peer, NULL if the socket was closed at once
 *		(may be NULL)
 *
 * Return: 0 or negative errno.
 */
int socket_transport_accept(struct socket_transport *sockets, int fd, const uint8_t *nonce,
			    unsigned int mechs, struct peer **peerp);

/* After connection_new_restored() and the rest of the peer: resume its I/O. */
void connection_restored(struct connection *conn);

/* The socket connection @peer arrived through, or NULL if it is another transport. */
struct connection *connection_of(struct peer *peer);

/*
 * Re-exec (state.h): what the socket holds for the peer (its input not
 * parsed yet, its output not written yet, with their fds) and the fds sent
 * ahead of their messages, section STATE_TAG_CONNECTION in its peer's. The
 * socket's own fd is the peer's to write (it comes first in the peer's
 * section: connection_get_fd()). The parsed form: byte strings point into
 * the reader, fd arrays are allocated; connection_new_restored() takes it.
 */
struct state_reader;
struct state_writer;

#define CONNECTION_STATE_VERSION 1u

struct connection_state {
	int fd;
	int *spare;
	size_t n_spare;
	struct socket_snapshot snap;
};

int connection_get_fd(const struct connection *conn);
/* Return 0 or -ENOMEM. */
int connection_serialize(struct connection *conn, struct state_writer *w);
bool connection_state_read(struct state_reader *r, struct connection_state *st);
void connection_state_deinit(struct connection_state *st);

/**
 * connection_new_restored() - a peer whose socket crossed a re-exec
 * @peerp:	output (linked into the bus, authenticated, not registered: the
 *		caller restores the rest of the peer)
 * @fd:		the client socket (owned from now on, also on failure)
 * @creds:	its credentials as they were (moved into the peer)
 * @snap:	what the socket held (its fds owned from now on)
 * @spare_fds, @n_spare: fds sent ahead of their messages (owned from now on)
 *
 * Return: 0 or negative errno.
 */
int connection_new_restored(struct peer **peerp, struct bus *bus, int fd,
			    struct socket_creds *creds, const struct socket_snapshot *snap,
			    const int *spare_fds, size_t n_spare);
