/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/**
 * DOC: The bus1 transport (native clients)
 *
 * struct native is the broker's bus1 peer (one per bus, NULL when /dev/bus1
 * does not exist). A native client bootstraps over its socket connection with
 * org.freedesktop.DBus.Bus1.Connect(h) before Hello (docs/native-protocol.md);
 * from then on the connection has a struct native_conn and its D-Bus traffic
 * is bus1 messages:
 *  - input: the bus1 peer's fd is one sd-event io source; every message is
 *    parsed and handed to router_dispatch() with the connection it belongs to
 *    (known from the broker node it was sent to);
 *  - output: connection_queue() hands messages for a native connection to
 *    native_conn_queue(), which collects all native destinations of the same
 *    message and sends them ONE multicast SEND (before the next message is
 *    routed, or at the end of the dispatch).
 *
 * Wiring (the connection and router call these; test/native/wire-broker.py
 * applies exactly these edits and is idempotent):
 *  - bus_run(): native_new(&bus->native, bus) after the event loop exists;
 *    bus_free(): native_free(bus->native);
 *  - router_dispatch(): before the "first message must be Hello" check,
 *    if (native_is_connect(msg))
 *            return native_connect(bus->native, conn, msg, &conn->native);
 *  - connection_queue(): if (conn->native) return native_conn_queue(conn->native, msg);
 *  - connection_close(): conn->native = native_conn_free(conn->native);
 *  - bus_apply_config(), after a new policy: native_rules_update(
 *    &bus->native_rules, config) and native_policy_changed(bus->native);
 *    bus_free(): native_rules_free(bus->native_rules);
 *  - router_dispatch(), driver calls after the policy check: if
 *    native_is_get_direct_handle(m), native_get_direct_handle() with the
 *    router's send/receive policy check as the callback (the direct path).
 *
 * Output to a native client is bounded like a socket's output queue, by what
 * the kernel says the client has not read (BUS1_CMD_HANDLE_QUERY); a closed
 * connection's unread messages are reclaimed (docs/native-protocol.md).
 */

#include <stdbool.h>
#include <stdint.h>

struct bus;
struct bus_config;
struct connection;
struct message;
struct native;
struct native_conn;
struct native_rules;

#define NATIVE_INTERFACE "org.freedesktop.DBus.Bus1"

/*
 * Open /dev/bus1 (or $BUS1_BROKER_DEVICE) and attach to the bus' event loop.
 * Without the device, *nativep is NULL and 0 is returned; nothing is logged
 * unless $BUS1_BROKER_DEVICE named it ("PATH not found: serving socket
 * clients only"). A device that exists but cannot be opened is a warning.
 * Return: 0 or negative errno.
 */
int native_new(struct native **nativep, struct bus *bus);
struct native *native_free(struct native *native);

/* Whether @msg is the bootstrap call (org.freedesktop.DBus.Bus1.Connect). */
bool native_is_connect(const struct message *msg);

/*
 * Handle the bootstrap call @msg from the socket connection @conn (which is
 * not registered yet). @native may be NULL (no /dev/bus1): NotSupported.
 * @ncp is &conn->native: on success the reply is queued on the socket and
 * *@ncp set (non-NULL *@ncp: a second Connect, refused).
 * Return: 0 or negative errno (fatal).
 */
int native_connect(struct native *native, struct connection *conn, struct message *msg,
		   struct native_conn **ncp);

/*
 * Queue @msg (stitched) for the native connection @nc: the same return codes
 * as connection_queue() (0, CONNECTION_E_DEAD, negative errno).
 */
int native_conn_queue(struct native_conn *nc, struct message *msg);

/* Send what is still collected (also done by a defer source after dispatch). */
void native_flush(struct native *native);

/* Release the connection's nodes and handles (the client sees NODE_DESTROY). */
struct native_conn *native_conn_free(struct native_conn *nc);

/*
 * The direct path (docs/native-protocol.md): org.freedesktop.DBus.Bus1.
 * GetDirectHandle(s name) -> (s unique_name) + the owner's direct-node handle
 * in the reply's bus1 handle list. @policy says whether @from may send
 * @probe to @to (1 yes, 0 no, negative errno; @requested_reply: @probe is a
 * reply @to waits for). The router calls it for driver calls that
 * native_is_get_direct_handle() recognizes.
 * Return: 0 or negative errno (fatal).
 */
typedef int (*native_policy_fn)(struct connection *from, struct connection *to,
				struct message *probe, bool requested_reply);
bool native_is_get_direct_handle(const struct message *msg);
int native_get_direct_handle(struct native *native, struct connection *conn, struct message *msg,
			     native_policy_fn policy);

/*
 * The part of the policy the direct path needs (bus->native_rules): the
 * send/receive rules a callee could not evaluate itself (interface, member,
 * path, error, fds, group or console). Called on every (re)load of the
 * configuration, also before the transport exists. On -ENOMEM *@rulesp is
 * NULL: no direct handles while a policy is set.
 */
int native_rules_update(struct native_rules **rulesp, const struct bus_config *config);
struct native_rules *native_rules_free(struct native_rules *rules);

/*
 * The policy was reloaded: revoke every direct handle handed out (the
 * callees get an empty DirectPolicy; callers ask the broker again). @native
 * may be NULL.
 */
void native_policy_changed(struct native *native);

/* Kernel-stamped credentials of the last message received from @nc (0 if none yet). */
int native_conn_get_creds(const struct native_conn *nc, uint32_t *uid, uint32_t *gid,
			  uint32_t *pid);
