/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/**
 * DOC: The bus1 transport (native clients)
 *
 * struct native is the broker's bus1 peer (one per bus, NULL when /dev/bus1
 * does not exist). A native client bootstraps over its socket connection with
 * org.freedesktop.DBus.Bus1.Connect(h) before Hello (docs/native-protocol.md),
 * a driver method (driver.c) that calls native_attach(). From then on the
 * connection's D-Bus traffic is bus1 messages:
 *  - input: the bus1 peer's fd is one sd-event io source; every message is
 *    parsed and handed to peer_dispatch_incoming() of the connection it
 *    belongs to (known from the broker node it was sent to);
 *  - output: the connection's transport (struct peer_transport) is the
 *    native one, which collects all native destinations of the same message
 *    and sends them ONE multicast SEND (before the next message is queued,
 *    or at the end of the dispatch).
 * The connection's socket stays open: its end is the connection's end.
 *
 * Output to a native client is bounded like a socket's output queue, by what
 * the kernel says the client has not read (BUS1_CMD_HANDLE_QUERY); a closed
 * connection's unread messages are reclaimed (docs/native-protocol.md).
 *
 * The direct path (GetDirectHandle, also a driver method) is decided by
 * broker/policy/policy.c; this file only publishes the allowed uids to the callee
 * and hands the caller the callee's direct-node handle.
 */

#include <stdbool.h>
#include <stdint.h>

struct bus;
struct peer;
struct peer_transport;
struct message;
struct native;
struct native_conn;

/*
 * Open /dev/bus1 (or $BUS1_BROKER_DEVICE), attach to the bus' event loop
 * (bus_attach() first) and join the bus' transports (bus_add_transport()).
 * Without the device, *nativep is NULL and 0 is returned; nothing is logged
 * unless $BUS1_BROKER_DEVICE named it ("PATH not found: serving socket
 * clients only"). A device that exists but cannot be opened is a warning.
 * The process creates it, and frees it after the bus closed every peer.
 * Return: 0 or negative errno.
 */
int native_new(struct native **nativep, struct bus *bus);
struct native *native_free(struct native *native);
/* The bus1 transport of @bus, or NULL (sockets only). */
struct native *native_of_bus(struct bus *bus);

enum {
	_NATIVE_E_SUCCESS,
	NATIVE_E_NOT_BUS1,	/* the fd is not a /dev/bus1 peer */
	NATIVE_E_TRANSFER,	/* the kernel refused a handle transfer */
	NATIVE_E_NO_DIRECT,	/* no direct handle now (too many uids, the callee's queue full) */
};

/**
 * native_attach() - the bus1 side of a native client
 * @native:	the transport
 * @peer:	the socket connection bootstrapping (not registered yet)
 * @fd:		the client's /dev/bus1 fd, borrowed: the broker must not keep it
 *		(it would keep the client's peer alive and could act as it)
 * @handles:	output: the client's handles of the connection node (input
 *		goes there), the client node (output arrives there) and the
 *		direct node (direct calls arrive there), for Connect's reply
 * @ncp:	output; not yet the connection's transport: the caller
 *		queues the reply on the socket first, then installs
 *		native_conn_transport() with peer_set_output()
 *
 * Return: 0, NATIVE_E_NOT_BUS1, NATIVE_E_TRANSFER or negative errno.
 */
int native_attach(struct native *native, struct peer *peer, int fd,
		  uint64_t handles[static 3], struct native_conn **ncp);

/*
 * Release the nodes and handles (the client sees NODE_DESTROY) and free @nc,
 * which is not a peer's output yet (the peer frees its output itself).
 */
struct native_conn *native_conn_free(struct native_conn *nc);

/* The transport to install as the peer's output (peer_set_output()). */
struct peer_transport *native_conn_transport(struct native_conn *nc);

/* The native side of @peer, or NULL if it is a socket client. */
struct native_conn *native_conn_of(struct peer *peer);



/*
 * The direct path (docs/native-protocol.md): let callers of @uid call @nc
 * directly, and tell @nc so (a DirectPolicy signal through the broker, so in
 * the broker's order). Return: 0, NATIVE_E_NO_DIRECT if @nc has too many
 * allowed uids or cannot be told now (no direct handle), or negative errno.
 */
int native_conn_allow_direct(struct native_conn *nc, uint32_t uid);

/*
 * Send GetDirectHandle's @reply (from the driver) to @caller with the handle
 * of @callee's direct node, after everything routed before it. Return 0 or
 * negative errno (a failure to send closes @caller).
 */
int native_send_direct_handle(struct native_conn *caller, struct native_conn *callee,
			      struct message *reply);


/* ---------------------------------------------------------------- re-exec */

/**
 * struct native_conn_state - a native client's bus1 side, across a re-exec
 *
 * The handles stay valid: the broker's bus1 peer (its fd) survives the exec,
 * and with it every node, handle and queued message in the kernel.
 */
struct native_conn_state {
	uint64_t node;
	uint64_t client;
	uint64_t direct;
	uint64_t q_bytes;
	uint64_t q_fds;
	uint64_t q_msgs;
	uint64_t charged_bytes;
	uint64_t charged_fds;
	uint64_t refresh_msgs;
	uint64_t refresh_bytes;
	bool have_creds;
	const uint32_t *uids;	/* published direct callers */
	size_t n_uids;
};

struct state_reader;
struct state_writer;

#define NATIVE_STATE_VERSION 1u
#define NATIVE_CONN_STATE_VERSION 1u

/* Section STATE_TAG_NATIVE: the broker's bus1 peer fd (-1: no transport). */
void native_serialize(const struct native *native, struct state_writer *w);
bool native_state_read(struct state_reader *r, int *fdp);
/*
 * Section STATE_TAG_NATIVE_CONN in @peer's: its bus1 side, if it has one.
 * Read: *@presentp and, if so, @st with its uids allocated
 * (native_conn_state_deinit()).
 */
void native_conn_serialize(struct peer *peer, struct state_writer *w);
bool native_conn_state_read(struct state_reader *r, bool *presentp,
			    struct native_conn_state *st);
void native_conn_state_deinit(struct native_conn_state *st);
/* The transport around the bus1 peer fd @fd of the old program (owned from now on). */
int native_new_from_fd(struct native **nativep, struct bus *bus, int fd);
/*
 * @peer's output is the native client @st again. Return 0, -ENODEV (no
 * transport), -EINVAL (a duplicate or impossible state) or -ENOMEM.
 */
int native_conn_restore(struct native *native, struct peer *peer,
			const struct native_conn_state *st);
