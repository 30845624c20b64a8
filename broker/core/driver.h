/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/**
 * DOC: The bus driver, org.freedesktop.DBus
 *
 * Messages addressed to org.freedesktop.DBus are handled here. The methods
 * are a table (interface -> methods with name, input and output signature,
 * handler and flags), exactly as dbus-daemon 1.14 exposes them, so that
 * dispatch, signature checks, introspection and the error names come from
 * one place:
 *  - unknown interface: UnknownInterface; known interface, unknown member:
 *    UnknownMethod ("org.freedesktop.DBus does not understand message X");
 *  - wrong signature: InvalidArgs ("Call to X has wrong args (S, expected T)");
 *  - interfaces other than org.freedesktop.DBus, Introspectable and Peer
 *    (and the newer methods) exist only at /org/freedesktop/DBus: elsewhere
 *    they are unknown, or AccessDenied for a method of an any-path interface;
 *  - privileged methods (BecomeMonitor, UpdateActivationEnvironment, and
 *    AddMatch with eavesdrop=true) need the bus' uid or root: AccessDenied.
 * A call with NO_REPLY_EXPECTED gets neither reply nor error.
 *
 * org.freedesktop.DBus.Bus1 (the native clients' bootstrap and direct path,
 * docs/native-protocol.md) is in the same table, hidden: it is not
 * introspected and only found when a call names it.
 */

#include <stdbool.h>

struct bus;
struct driver_interface;
struct peer;
struct message;

/*
 * @iface is served by the driver of @bus from now on, after its own
 * (org.freedesktop.DBus and friends): added by whoever sets up the feature
 * behind it, so the driver names none. 0 or -ENOSPC.
 */
int driver_add_interface(struct bus *bus, const struct driver_interface *iface);

/* org.freedesktop.DBus.Bus1 (driver-bus1.c), for the native clients. */
extern const struct driver_interface driver_bus1_interface;
/* org.freedesktop.DBus.Containers1 (driver-containers.c), with --containers. */
extern const struct driver_interface driver_containers_interface;

/*
 * Whether @msg (from a connection that is not registered yet) calls a method
 * that comes before Hello: Hello itself, and the bus1 bootstrap
 * org.freedesktop.DBus.Bus1.Connect (docs/native-protocol.md).
 */
bool driver_is_bootstrap(const struct bus *bus, const struct message *msg);

/*
 * Whether that method is Hello (the bus1 bootstrap is the transport's: no
 * D-Bus message of the client's, no LSM is asked about it).
 */
bool driver_is_hello(const struct message *msg);

/* Handle such a call (unstitched). Return 0 or negative errno. */
int driver_dispatch_bootstrap(struct peer *peer, struct message *msg);

/* A stitched message to org.freedesktop.DBus. Return 0 or negative errno. */
int driver_dispatch(struct peer *peer, struct message *msg);

/*
 * A method call without destination: only org.freedesktop.DBus.Peer is
 * answered (libdbus' behaviour towards dbus-daemon); anything else gets
 * UnknownMethod.
 */
int driver_dispatch_peer(struct peer *peer, struct message *msg);

/*
 * The introspection XML of the driver object at @path (malloc()ed): of its
 * own interfaces and the @n_extra of @extra (those added to a bus).
 */
int driver_introspect_xml(char **xmlp, const char *path,
			  const struct driver_interface *const *extra, size_t n_extra);

