/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/**
 * DOC: Peers
 *
 * A struct peer is one client of the bus, whatever carries its messages: its
 * credentials, its accounting user and charges, the policy rules that apply
 * to it, and its D-Bus state: its unique name and owned names (struct
 * name_owner), its match rules, the calls it must answer.
 *
 * Its messages travel over a transport (struct peer_transport): every peer
 * arrives through one (a socket connection, connection.h), which stays for
 * its whole life: when that ends, the peer ends. Its output may be taken
 * over by another transport (the bus1 transport of a native client,
 * native.h, after its bootstrap). Input reaches the peer from whichever
 * transport it arrives on: peer_dispatch_incoming() takes a message and its
 * fds to parse (the bus1 transport); peer_dispatch_parsed() one the
 * transport parsed itself (a socket connection, which must know how many
 * fds a message takes from its stream). Neither
 * the router nor the driver knows which transports a peer uses.
 *
 * Life cycle: created unauthenticated by its transport -> authenticated (its
 * identity is known: the policy rules are set up) -> registered (Hello: has
 * ":1.N") -> possibly a monitor -> closed. Until Hello it is incomplete, as
 * for dbus-daemon: it counts in IncompleteConnections (and against
 * max_incomplete_connections) and auth_timeout closes it. peer_close() tears the D-Bus state
 * down at once (names released with their signals, callers of pending calls
 * get NoReply) and hands the object to the bus, which frees it after the
 * current dispatch, so callers up the stack may still look at it (->closed).
 *
 * Two files: peer.c is the object (credentials, charges, attachments, its
 * log identity) and calls nothing above objects/; core/peer-dispatch.c is its
 * life and input (authenticated, registered, closed, dispatch), where it
 * meets the bus, the policy and the router.
 *
 * Return codes (util/error.h): negative errno is fatal; PEER_E_* are
 * conditions the caller handles.
 */

#include <assert.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include "broker/objects/log-limit.h"
#include "broker/objects/match.h"
#include "broker/objects/name.h"
#include "broker/objects/reply.h"
#include "broker/objects/user.h"
#include "dbus-compat/socket.h"
#include "util/list.h"

struct bus;
struct bus_client_policy;
struct message;
struct peer;
struct peer_transport;

/*
 * What a peer's transports hold of its output, not yet taken by the client
 * (GetConnectionStats): now, and the most they ever held.
 */
struct peer_output_stats {
	uint64_t bytes;
	uint64_t fds;
	uint64_t msgs;
	uint64_t peak_bytes;
	uint64_t peak_fds;
};

/**
 * struct peer_transport_ops - what a transport does for a peer
 * @queue:	queue @msg (stitched; take a reference) for the peer, which is
 *		not closed: 0, PEER_E_QUOTA (over the output limit, nothing
 *		queued), PEER_E_DEAD (cannot take it), or negative errno
 * @close:	the peer closes: stop its I/O and release what the transport
 *		holds for it, without calling back into the peer
 * @free:	free the transport (the peer is being freed)
 * @registered:	the peer said Hello: it is complete (auth_timeout no longer
 *		applies). May be NULL.
 * @output_stats: add what it holds of the peer's output to @st (sums, and
 *		the larger peaks). May be NULL.
 */
struct peer_transport_ops {
	int (*queue)(struct peer_transport *transport, struct message *msg);
	void (*close)(struct peer_transport *transport);
	void (*free)(struct peer_transport *transport);
	void (*registered)(struct peer_transport *transport);
	void (*output_stats)(struct peer_transport *transport, struct peer_output_stats *st);
};

/* Embedded in the transport's own object, which gets back with container_of(). */
struct peer_transport {
	const struct peer_transport_ops *ops;
};

/**
 * DOC: Attachments
 *
 * What a feature keeps per peer (an LSM's parsed label, the container
 * instance a peer connected through and its filter's view, the views that
 * learned of it, the instances it created) hangs on the peer as a struct
 * peer_attachment embedded in the feature's own object. The peer knows
 * none of them: it calls their ops at its own moments, the newest first,
 * and frees them with itself. The feature finds its object again with
 * peer_find_attachment() and container_of(). What an attachment must carry
 * across a re-exec is written and read by its feature, in its own section
 * of the state (container-state.c), not by the peer's.
 */
struct peer_attachment;

/**
 * struct peer_attachment_ops - what the peer asks of an attachment
 * @gone:	the peer closed; its D-Bus state is torn down already (its
 *		names released, their signals sent). May be NULL.
 * @free:	free the attachment (unlinked already): the peer is being freed,
 *		closed or not
 * @describe:	write what it adds to the peer's identity in log lines
 *		(peer_loginfo()), as key=value, to @buf. May be NULL.
 * @registered:	the peer said Hello and holds its unique name (its
 *		NameAcquired sent): 0 or negative errno. May be NULL.
 * @credentials: write what it adds to the peer's GetConnectionCredentials,
 *		as dict entries into the open a{sv} @w. May be NULL.
 */
struct dc_writer;
struct peer_attachment_ops {
	void (*gone)(struct peer_attachment *a);
	void (*free)(struct peer_attachment *a);
	void (*describe)(struct peer_attachment *a, char *buf, size_t size);
	int (*registered)(struct peer_attachment *a);
	void (*credentials)(struct peer_attachment *a, struct dc_writer *w);
};

struct peer_attachment {
	const struct peer_attachment_ops *ops;
	struct peer *peer;
	struct list_node peer_link;	/* in peer->attachments, newest first */
};

/*
 * The actor a peer's messages are charged for (user.h), when it is not the
 * peer alone: a group of peers that acts as one (the connections of a
 * container instance), embedded in the object that owns the group.
 */
struct peer_group {
	uint64_t id;			/* unique among groups, not 0 */
	struct log_limit refusal_log;	/* its members' refusals, as one actor's */
};

struct peer {
	struct bus *bus;
	struct list_node bus_link;	/* bus->peers */
	struct list_node monitor_link;	/* bus->monitors */
	struct list_node dead_link;	/* bus->dead_list once closed */
	struct list_node overflow_link;	/* bus->overflow_list */

	struct peer_transport *transport;	/* it arrived through; ends with it */
	struct peer_transport *output;	/* where its messages go: ->transport or a successor */

	/* credentials */
	struct socket_creds creds;	/* of its socket at accept: groups, label, pidfd */
	uid_t uid;			/* (uid_t)-1: unknown (TCP, ANONYMOUS) */
	pid_t pid;			/* 0: unknown */
	bool socket_identity;		/* uid is the socket peer's: its groups apply */
	struct user *user;		/* accounting */
	struct user_charge charges[_USER_SLOT_N];	/* what this peer holds */
	struct bus_client_policy *policy;	/* rules that apply to it, NULL: allow all */
	char *loginfo;			/* peer_loginfo(), once asked */
	struct list_node attachments;	/* struct peer_attachment, newest first */
	struct peer_group *group;	/* the group it acts with, or NULL: alone */

	/* D-Bus state */
	struct name_owner owner;	/* unique name + well-known names */
	struct match_owner matches;	/* AddMatch rules */
	struct reply_owner replies;	/* calls this peer must answer */

	bool authenticated;		/* identity known, policy set up */
	bool registered;		/* Hello done */
	bool monitor;			/* BecomeMonitor done */
	bool unix_fds;			/* may receive fds (NEGOTIATE_UNIX_FD) */
	bool anonymous;			/* authenticated with ANONYMOUS */
	bool closed;			/* peer_close() ran */
	bool overflow;			/* does not read: closed after this dispatch */
	bool input_paused;		/* too many answers unread: PEER_ANSWER_BACKLOG */
	bool restricted;		/* never privileged, whatever its uid (a sandbox's) */

	/* statistics (Debug.Stats); its transports keep their own (peer_output_stats()) */
	uint64_t n_incoming;
	uint64_t n_outgoing;		/* messages its transports took for it */
	uint64_t n_answer_bytes;	/* queued answers to its own messages (charged size) */
	size_t n_dispatching_bytes;	/* its message being routed now */
	size_t n_dispatching_fds;
	uint64_t peak_dispatching_bytes;
	uint64_t peak_dispatching_fds;
	struct refusal_counts refusals;	/* also counted for its user and the bus */
	struct log_limit refusal_log;	/* its refusals' lines, outside a group */

	uint32_t state_index;		/* its place in the state written (peer-state.h) */
};

enum {
	_PEER_E_SUCCESS,
	PEER_E_QUOTA,			/* over a limit: nothing done */
	PEER_E_DEAD,			/* closed, or about to be */
	PEER_E_REFUSED,			/* not let in: it is closed */
};

/**
 * peer_new() - a new, unauthenticated peer
 * @peerp:	output (linked into the bus)
 * @bus:	the bus
 * @transport:	the transport it arrives through; owned by the peer from now
 *		on (freed with it, also when this fails)
 * @creds:	its credentials, moved into the peer (also when this fails)
 *
 * Return: 0 or negative errno.
 */
int peer_new(struct peer **peerp, struct bus *bus, struct peer_transport *transport,
	     struct socket_creds *creds);

/* Free a closed peer and its transports (called by the bus after dispatch). */
struct peer *peer_free(struct peer *peer);

/**
 * peer_close() - disconnect and tear down the D-Bus state
 * @peer:	peer (closing twice is a no-op)
 * @reason:	logged (at info level) when not NULL
 */
void peer_close(struct peer *peer, const char *reason);

/**
 * peer_authenticated() - the transport proved who the peer is
 * @uid:	the identity it proved, if not the socket's ((uid_t)-1: the socket's)
 * @unix_fds:	it may receive fds
 * @anonymous:	it authenticated as nobody (ANONYMOUS)
 *
 * Sets up the policy rules that apply to it. Return: 0, PEER_E_REFUSED if
 * the policy does not let it connect, or an LSM mediates and it has no
 * label (it is closed), or negative errno.
 */
int peer_authenticated(struct peer *peer, uid_t uid, bool unix_fds, bool anonymous);

/**
 * peer_queue() - queue a message for this peer
 * @peer:	destination
 * @msg:	the message, already stitched (a reference is taken)
 *
 * Return: 0 if queued; PEER_E_QUOTA if the destination's output queue is
 * over its byte or fd limit (nothing queued; the caller decides between an
 * error to the sender and disconnecting the receiver); PEER_E_DEAD if the
 * destination is closed; negative errno.
 */
int peer_queue(struct peer *peer, struct message *msg);

/*
 * Hello: @peer is registered (the caller set its unique name), no longer
 * incomplete: its transport stops the auth_timeout.
 */
void peer_set_registered(struct peer *peer);

/* From now on, @peer's output goes to @output (owned by the peer). */
void peer_set_output(struct peer *peer, struct peer_transport *output);

/*
 * Parse @msg, which takes over the @n_fds fds in @fds (not the array), and
 * route it; consumes @msg. 0 when routed, the positive DC_E_* code of
 * message_parse() when the message was invalid and the peer is closed for
 * it, or -errno.
 */
int peer_dispatch_incoming(struct peer *peer, struct message *msg, const int *fds,
			   size_t n_fds);

/*
 * Route @msg, for which message_parse*() returned @parsed (> 0: invalid: the
 * peer is closed); consumes @msg. Return as peer_dispatch_incoming().
 */
int peer_dispatch_parsed(struct peer *peer, struct message *msg, int parsed);

/*
 * Charge / uncharge @amount of @slot to the peer's user, recorded in the
 * peer (returned in full when it is freed). charge: 0 or USER_E_QUOTA.
 */
int peer_charge(struct peer *peer, enum user_slot slot, uint64_t amount);
void peer_uncharge(struct peer *peer, enum user_slot slot, uint64_t amount);

/* Charge a queued message's bytes and fds, both or neither: 0 or USER_E_QUOTA. */
int peer_charge_message(struct peer *peer, uint64_t bytes, uint64_t n_fds);

/* Mark @peer to be disconnected because it does not read its output. */
void peer_overflow(struct peer *peer);

/* Count @what for @peer, its user and the bus (Debug.Stats). */
void peer_count_refusal(struct peer *peer, enum refusal what);

/*
 * The log lines of refusals are limited per actor, as its share is
 * (user.h): at most this many per window for one connection, or for a
 * container instance as a whole, whatever its connections do.
 */
#define PEER_REFUSAL_LOG_BURST 10
#define PEER_REFUSAL_LOG_WINDOW_USEC (5ULL * 1000 * 1000)
extern const struct ratelimit_rule peer_refusal_log_rule;

/* The log limit of @peer's actor: its group's, or its own. */
struct log_limit *peer_refusal_log(struct peer *peer);

/*
 * What one message queued for a peer costs: its bytes as the bus holds them
 * (the wire size and PEER_MESSAGE_OVERHEAD: the message and queue entry
 * objects, so that a flood of small errors is not counted at a quarter of
 * its weight), its fds, the actor it is charged for (user.h), and whether it
 * answers the peer itself (it counts in peer->n_answer_bytes).
 */
struct queue_charge {
	struct user_actor *actor;
	uint64_t bytes;
	uint64_t fds;
	bool answer;
};

/*
 * Answers (errors, replies, signals the bus queues for a peer while routing
 * that peer's own message) it has not read beyond this many bytes: the bus
 * stops reading its input (peer->input_paused) until they are down to half.
 * A client that sends and never reads makes no more of them, and costs the
 * bus no CPU, however long it keeps sending.
 */
#define PEER_ANSWER_BACKLOG (1024 * 1024)

/**
 * peer_charge_queued() - charge @msg, about to be queued for @peer
 * @peer:	the receiver, whose user pays
 * @msg:	the message
 * @qc:		the charge, for peer_uncharge_queued() when it leaves the queue
 *
 * The actor is the peer whose message the bus is routing (bus->dispatching),
 * if any. Its fair share (user.h) is enforced for a method call of another
 * peer, whose refusal is a LimitsExceeded to its caller. Not for replies,
 * errors and signals, whose refusal would disconnect a receiver that may be
 * reading (the actor's broadcasts to another, stuck connection of the same
 * user could have used the share up), nor for answers to the actor itself,
 * which PEER_ANSWER_BACKLOG bounds: they are charged and recorded only.
 *
 * Return: 0, PEER_E_QUOTA (over the user's quota or the actor's share:
 * nothing charged), or -ENOMEM.
 */
int peer_charge_queued(struct peer *peer, const struct message *msg, struct queue_charge *qc);
void peer_uncharge_queued(struct peer *peer, struct queue_charge *qc);

/*
 * Who the peer is, for logs and error texts, as dbus-daemon writes it:
 * uid=U pid=P comm="COMMAND LINE" label="LABEL" (what is known). Read once
 * and kept by the peer, as dbus-daemon keeps it: a denial that repeats
 * costs no /proc read. NULL on ENOMEM.
 */
const char *peer_loginfo(struct peer *peer);

/* The peer's pidfd (its ProcessFD, owned by the peer), or -1 if unknown. */
static inline int peer_get_pidfd(const struct peer *peer)
{
	return peer->creds.pidfd;
}

/*
 * The peer's messages come from process @pid (a native client's first bus1
 * message, stamped by the kernel): from now on pid and pidfd are that one's.
 */
void peer_set_pid(struct peer *peer, pid_t pid);

/* The unique name (":1.N"); only meaningful when registered. */
static inline const char *peer_name(const struct peer *peer)
{
	return peer->owner.unique_name;
}

/* @peer's attachment of a feature (the ops it attached with), or NULL. */
static inline struct peer_attachment *peer_find_attachment(const struct peer *peer,
							    const struct peer_attachment_ops *ops)
{
	struct peer_attachment *a;

	list_for_each_entry(a, &peer->attachments, peer_link)
		if (a->ops == ops)
			return a;
	return NULL;
}

/* Hang @a, embedded in a feature's object, on @peer (see Attachments): once per feature. */
static inline void peer_attach(struct peer *peer, struct peer_attachment *a,
			       const struct peer_attachment_ops *ops)
{
	assert(ops && ops->free && !peer_find_attachment(peer, ops));
	a->ops = ops;
	a->peer = peer;
	list_prepend(&peer->attachments, &a->peer_link);
}

/*
 * Ask every attachment of @peer, oldest first, once it holds its unique name
 * (driver.c's Hello): 0 or the first negative errno.
 */
int peer_attachments_registered(struct peer *peer);

/* Let every attachment add its entries to @peer's credentials (an open a{sv}). */
void peer_attachments_credentials(struct peer *peer, struct dc_writer *w);

/* Take @a off its peer, before its owner frees it. */
static inline void peer_detach(struct peer_attachment *a)
{
	list_unlink(&a->peer_link);
}

/* What @peer's transports hold of its output (Debug.Stats). */
void peer_output_stats(struct peer *peer, struct peer_output_stats *st);

/* Whether @peer may receive fds. */
static inline bool peer_can_receive_fds(const struct peer *peer)
{
	return peer->unix_fds;
}
