/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/**
 * DOC: Peers across a re-exec
 *
 * Section STATE_TAG_PEER of the state (state.h): every peer of the bus, in
 * the bus' order (accept order), each its own record, then the sections of
 * what it holds, each written and read by its owner:
 *
 *	the peer's record (here): the fd of the socket it arrived through,
 *	    its flags, credentials, unique id and statistics
 *	STATE_TAG_CONNECTION	its socket's input and output (connection.h)
 *	STATE_TAG_MATCHES	its match rules (match.h)
 *	STATE_TAG_OWNER		its names and queue places (name.h)
 *	STATE_TAG_NATIVE_CONN	its bus1 side, if it has one (native.h)
 *
 * Writing gives each peer its place (peer->state_index), by which the
 * reply and activation sections name peers. Reading builds an array of
 * struct peer_state; peer_restore() makes each a peer again, authenticated
 * and, if it was, registered with everything it held, without a message to
 * anyone; peer_restored() resumes its I/O once every section is restored.
 */

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include "broker/transport/connection.h"
#include "broker/objects/match.h"
#include "broker/objects/name.h"
#include "broker/transport/native.h"

struct bus;
struct peer;
struct state_reader;
struct state_writer;

#define PEER_STATE_VERSION 2u

/* Bits of a peer's flags in the state. */
enum {
	PEER_STATE_REGISTERED = 1 << 0,
	PEER_STATE_MONITOR = 1 << 1,
	PEER_STATE_UNIX_FDS = 1 << 2,
	PEER_STATE_ANONYMOUS = 1 << 3,
	PEER_STATE_SOCKET_IDENTITY = 1 << 4,
	PEER_STATE_HAVE_CREDS = 1 << 5,
	PEER_STATE_GROUPS_UNKNOWN = 1 << 6,	/* SO_PEERGROUPS failed at accept */
	/*
	 * Its pidfd is its socket's SO_PEERPIDFD, taken from the socket again
	 * at restore; the crash journal does not carry it (peer-state.c).
	 */
	PEER_STATE_PIDFD_OF_SOCKET = 1 << 7,
};

struct peer_state {
	uint32_t flags;			/* PEER_STATE_* (peer-state.c) */
	pid_t creds_pid;
	uid_t creds_uid;
	gid_t creds_gid;
	gid_t *groups;
	size_t n_groups;
	const char *label;
	int pidfd;
	uid_t uid;
	pid_t pid;
	uint64_t id;
	uint64_t n_incoming;
	uint64_t n_outgoing;
	uint64_t peak_queued_bytes;
	uint64_t peak_queued_fds;
	uint64_t peak_dispatching_bytes;
	uint64_t peak_dispatching_fds;
	uint32_t peak_names;
	uint32_t peak_matches;
	struct refusal_counts refusals;	/* version 2 */

	struct connection_state conn;
	struct match_owner_state matches;
	struct name_owner_state names;
	bool native;
	struct native_conn_state nstate;
};

/*
 * Return 0, -EINVAL (a peer without a socket connection) or -ENOMEM. A crash
 * snapshot (w->crash) leaves out the peers before Hello (their place is
 * UINT32_MAX).
 */
int peer_serialize_all(struct bus *bus, struct state_writer *w);
/* One peer's record, as in the section (the crash journal's Hello record). */
int peer_serialize(struct peer *p, struct state_writer *w);
/* One peer's record of section version @version; check r->error after. */
void peer_state_read(struct state_reader *r, struct peer_state *p, size_t n_names,
		     uint32_t version);
void peer_state_deinit(struct peer_state *p);
/*
 * An allocated array of *@np (never NULL when it returns true). @n_names:
 * in the name registry's section (the owners' names refer to it).
 */
bool peer_state_read_all(struct state_reader *r, struct peer_state **statesp, size_t *np,
			 size_t n_names);
void peer_state_free_all(struct peer_state *states, size_t n);
/*
 * The place of @peer (a void * for activation.h) in the state being written,
 * or UINT32_MAX for one not written (closed, or before Hello in a crash
 * snapshot).
 */
uint32_t peer_state_index(const void *peer);

/**
 * peer_restore() - a peer of the state again
 * @st:		its parsed state; its fds are owned by the peer from now on
 *		(also on failure), the arrays stay @st's
 *
 * Return: 0 or negative errno (the peer, if created, is linked into the bus).
 */
int peer_restore(struct bus *bus, const struct peer_state *st, struct peer **peerp);
/* Every section restored: resume the peer's I/O. */
void peer_restored(struct peer *peer);
