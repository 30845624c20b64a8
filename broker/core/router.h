/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/**
 * DOC: Routing
 *
 * The router turns one message a peer sent into a DESTINATION SET and
 * delivers it. The message is stitched (SENDER set to the unique name of the
 * sending peer, unknown header fields dropped) exactly once; the same
 * stitched message, i.e. the same header buffer and the same body buffer, is
 * then queued to every destination peer, whatever its transport (peer.h): a
 * socket queues the buffers, the bus1 transport collects every native
 * destination of the message into one multicast SEND.
 *
 * Steps for a message from peer C:
 *  1. C is a monitor: disconnect (monitors may not send). C is not registered:
 *     a method that comes before Hello (driver_is_bootstrap()) goes to the
 *     driver, anything else is handled as dbus-daemon handles it (see
 *     router_dispatch_unregistered()).
 *  2. Stitch.
 *  3. Destination:
 *     - org.freedesktop.DBus: the driver (driver.c) handles it;
 *     - a unique or well-known name: resolve; unknown -> ServiceUnknown
 *       (auto-start allowed) or NameHasNoOwner (NO_AUTO_START) to the caller;
 *       a reply consumes the pending call it answers (reply.h); one that
 *       answers none is judged by the policy as not requested (dbus-daemon's
 *       session.conf lets it through, its system.conf does not); calls
 *       expecting a reply record a reply slot; fds only to a peer that
 *       negotiated them (else NotSupported);
 *     - none: a signal is broadcast to every peer with a matching rule
 *       (each once, match.h index); a method call gets UnknownMethod (Peer
 *       methods are answered by the bus, as libdbus does for dbus-daemon).
 *  4. Eavesdroppers (rules with eavesdrop=true) of unicast messages are added
 *     to the set, and monitors get a copy (monitor.c).
 *  5. Deliver: peer_queue() on each destination.
 * Whether a message may go from one peer to another is asked of policy.h.
 *
 * Over-quota destinations (see peer_queue()): a method call that cannot
 * be queued fails with LimitsExceeded to the caller; a reply, error or signal
 * that cannot be queued means the receiver stopped reading: it is
 * disconnected after the current dispatch (peer_overflow()).
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct bus;
struct peer;
struct match_message;
struct message;
struct name_event;

/*
 * Route one parsed message from @peer, the actor of everything it makes the
 * bus queue. Return 0 or negative errno (fatal).
 */
int router_dispatch(struct peer *peer, struct message *msg);

/*
 * A method call that waited for the activation of its destination: route it
 * now that the name has an owner (activation.h, ops->deliver).
 */
int router_resume_activated(struct peer *peer, struct message *msg);

/* @peer was closed: release its names, replies (NoReply to callers), rules. */
void router_peer_gone(struct peer *peer);

/*
 * Send a message made by the bus (driver reply, NameAcquired, ...) to one
 * connection, and to the monitors. Consumes nothing (takes its own ref).
 * An over-quota receiver is disconnected after the dispatch.
 */
void router_send_from_driver(struct bus *bus, struct peer *to, struct message *msg);

/* Broadcast a signal made by the bus (NameOwnerChanged) to matching rules and monitors. */
void router_broadcast_from_driver(struct bus *bus, struct message *msg);

/*
 * The same, to the matching receivers for which @may_know(receiver, @data)
 * is true only (InstanceRemoved: not to sandboxes that may not know the
 * instance). Monitors see it all the same.
 */
void router_broadcast_from_driver_to(struct bus *bus, struct message *msg,
				     bool (*may_know)(const struct peer *to, const void *data),
				     const void *data);

/* The name registry's event callback (NameOwnerChanged, NameAcquired, NameLost). */
void router_name_event(void *userdata, const struct name_event *event);

/* Describe @msg for the match index (arguments parsed lazily, once). */
void router_fill_match(struct match_message *mm, struct message *msg, struct peer *sender,
		       struct peer *recipient);

/* reply_owner_flush() callback: NoReply error to @caller for @serial (@callee disconnected). */
struct reply_owner;
void router_noreply(void *userdata, struct reply_owner *caller, struct reply_owner *callee,
		    uint32_t serial);

/* (Re-)arm the reply_timeout timer for the oldest pending call. */
void router_arm_reply_timer(struct bus *bus);

/* Keep the NAMES charge of @peer equal to the names it owns or waits for. */
void router_sync_name_charge(struct peer *peer);

/*
 * Error reply from the bus to @call (sent by @peer), if @call expects one.
 * @fmt may be NULL for an empty body. Return: 0 or negative errno.
 */
int router_send_error(struct peer *peer, struct message *call, const char *name,
		      const char *fmt, ...) __attribute__((format(printf, 4, 5)));
