/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/**
 * DOC: Routing
 *
 * The router turns one message a connection sent into a DESTINATION SET and
 * delivers it. The message is stitched (SENDER set to the unique name of the
 * sending connection, unknown header fields dropped) exactly once; the same
 * stitched message, i.e. the same header buffer and the same body buffer, is
 * then queued to every socket destination. A later bus1 transport adds its
 * node handles to the same set and sends them one multicast.
 *
 * Steps for a message from connection C:
 *  1. C is a monitor: disconnect (monitors may not send). C is not registered
 *     and this is not Hello to the driver: disconnect.
 *  2. Stitch.
 *  3. Destination:
 *     - org.freedesktop.DBus: the driver (driver.c) handles it;
 *     - a unique or well-known name: resolve; unknown -> ServiceUnknown
 *       (auto-start allowed) or NameHasNoOwner (NO_AUTO_START) to the caller;
 *       replies must match a pending call (reply.h) else AccessDenied to the
 *       sender; calls expecting a reply record a reply slot; fds only to a
 *       peer that negotiated them (else NotSupported);
 *     - none: a signal is broadcast to every connection with a matching rule
 *       (each once, match.h index); a method call gets UnknownMethod (Peer
 *       methods are answered by the bus, as libdbus does for dbus-daemon).
 *  4. Eavesdroppers (rules with eavesdrop=true) of unicast messages are added
 *     to the set, and monitors get a copy (monitor.c).
 *  5. Deliver: queue on each socket destination.
 *
 * Over-quota destinations (see connection_queue()): a method call that cannot
 * be queued fails with LimitsExceeded to the caller; a reply, error or signal
 * that cannot be queued means the receiver stopped reading: it is
 * disconnected after the current dispatch (connection_overflow()).
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct bus;
struct connection;
struct match_message;
struct message;
struct name_event;

/**
 * struct destset - the destinations of one message
 * @conns:	socket connections, each at most once
 * @n, @cap:	entries used / allocated
 * @inline_conns: storage for the common case (no allocation)
 */
#define DESTSET_INLINE 32
struct destset {
	struct connection **conns;
	size_t n;
	size_t cap;
	struct connection *inline_conns[DESTSET_INLINE];
};

void destset_init(struct destset *set);
void destset_deinit(struct destset *set);
int destset_add(struct destset *set, struct connection *conn);

/* Route one parsed message from @conn. Return 0 or negative errno (fatal). */
int router_dispatch(struct connection *conn, struct message *msg);

/*
 * A method call that waited for the activation of its destination: route it
 * now that the name has an owner (activation.h, ops->deliver).
 */
int router_resume_activated(struct connection *conn, struct message *msg);

/* @conn was closed: release its names, replies (NoReply to callers), rules. */
void router_connection_gone(struct connection *conn);

/*
 * Send a message made by the bus (driver reply, NameAcquired, ...) to one
 * connection, and to the monitors. Consumes nothing (takes its own ref).
 * An over-quota receiver is disconnected after the dispatch.
 */
void router_send_from_driver(struct bus *bus, struct connection *to, struct message *msg);

/* Broadcast a signal made by the bus (NameOwnerChanged) to matching rules and monitors. */
void router_broadcast_from_driver(struct bus *bus, struct message *msg);

/* The name registry's event callback (NameOwnerChanged, NameAcquired, NameLost). */
void router_name_event(void *userdata, const struct name_event *event);

/* Describe @msg for the match index (arguments parsed lazily, once). */
void router_fill_match(struct match_message *mm, struct message *msg, struct connection *sender,
		       struct connection *recipient);

/* reply_owner_flush() callback: NoReply error to @caller for @serial. */
struct reply_owner;
void router_noreply(void *userdata, struct reply_owner *caller, uint32_t serial);

/* (Re-)arm the reply_timeout timer for the oldest pending call. */
void router_arm_reply_timer(struct bus *bus);

/* Keep the NAMES charge of @conn equal to the names it owns or waits for. */
void router_sync_name_charge(struct connection *conn);

/*
 * Error reply from the bus to @call (sent by @conn), if @call expects one.
 * @fmt may be NULL for an empty body. Return: 0 or negative errno.
 */
int router_send_error(struct connection *conn, struct message *call, const char *name,
		      const char *fmt, ...) __attribute__((format(printf, 4, 5)));
