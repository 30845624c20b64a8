/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * The insides of the driver, shared by its files (not an API):
 *
 *   driver.c        its own interface and method tables, properties,
 *                   introspection, dispatch; the reply helpers below; the
 *                   interfaces a feature adds (driver_add_interface())
 *   driver-dbus.c   the methods of org.freedesktop.DBus (and Monitoring,
 *                   Peer)
 *   driver-stats.c  org.freedesktop.DBus.Debug.Stats, the peaks it reports
 *   driver-bus1.c   org.freedesktop.DBus.Bus1: the native clients' methods,
 *                   added by the process (driver_bus1_interface)
 *   driver-containers.c  org.freedesktop.DBus.Containers1 (container.h),
 *                   added with --containers (driver_containers_interface)
 *
 * A method gets its call (struct driver_call: the caller, the message, a
 * reader at its arguments) and returns 0 (answered), DRIVER_E_ERROR_SET (an
 * error set with driver_fail(), which the dispatcher sends) or negative errno.
 */

#include <stdbool.h>
#include <stdint.h>
#include "dbus-compat/marshal.h"
#include "dbus-compat/message.h"

struct bus;
struct peer;

struct driver_call {
	struct bus *bus;
	struct peer *peer;
	struct message *msg;
	struct dc_reader reader;
	const char *err_name;
	char *err_text;
};

/* An interface of the driver: its methods, properties and introspection. */
struct driver_property {
	const char *name;
	const char *type;
	int (*get)(struct driver_call *c, struct dc_writer *w);
};

enum {
	METHOD_ANY_PATH = 1 << 0,	/* available at every object path */
	METHOD_PRIVILEGED = 1 << 1,	/* bus uid or root only */
	METHOD_BOOTSTRAP = 1 << 2,	/* called before Hello (driver_dispatch_bootstrap()) */
	METHOD_NO_CONTAINERS = 1 << 3,	/* not from a container (privileged ones neither) */
};

enum {
	IFACE_ANY_PATH = 1 << 0,	/* the interface exists at every path */
	IFACE_UNINTERESTING = 1 << 1,	/* not listed in the Interfaces property */
	/*
	 * Not dbus-daemon's: not introspected, no properties, and only called
	 * by its name (a call without interface never finds it).
	 */
	IFACE_HIDDEN = 1 << 2,
};

struct driver_method {
	const char *name;
	const char *in;
	const char *out;
	int (*fn)(struct driver_call *c);
	unsigned int flags;
};

struct driver_interface {
	const char *name;
	const struct driver_method *methods;
	const char *extra_xml;
	unsigned int flags;
	const struct driver_property *properties;
};

/* The positive code of the methods and their helpers. */
enum {
	_DRIVER_E_SUCCESS,
	/* An error for the caller is set (driver_fail()): the dispatcher sends it. */
	DRIVER_E_ERROR_SET,
};

/* Record an error for the caller; returns DRIVER_E_ERROR_SET. */
__attribute__((format(printf, 3, 4)))
int driver_fail(struct driver_call *c, const char *name, const char *fmt, ...);
/*
 * driver_fail() with LimitsExceeded: the call met a limit of the
 * configuration. Logged where dbus-daemon logs it, in its words: the error's
 * text, then " (@limit=@value)" unless @limit is NULL (the text names it
 * already), at warning; at most a burst of lines per window for the caller's
 * actor, as its refusals are (peer_refusal_log()).
 */
__attribute__((format(printf, 4, 5)))
int driver_fail_limit(struct driver_call *c, const char *limit, long long value,
		      const char *fmt, ...);

/* A reply to the call: started, then sealed and sent (unless none is expected). */
void driver_reply_init(struct driver_call *c, struct message_builder *b, const char *sig);
int driver_reply_send(struct driver_call *c, struct message_builder *b);
int driver_reply_empty(struct driver_call *c);
/*
 * The empty reply of AddMatch, RemoveMatch, UpdateActivationEnvironment,
 * BecomeMonitor and Peer.Ping: none if the call expects none, as
 * dbus-daemon's acknowledgements (every other reply is sent regardless).
 */
int driver_reply_ack(struct driver_call *c);
int driver_reply_u(struct driver_call *c, uint32_t v);
int driver_reply_s(struct driver_call *c, const char *s);
int driver_reply_b(struct driver_call *c, bool v);
/* One entry of an a{sv} reply. */
void driver_asv_u(struct dc_writer *w, const char *key, uint32_t v);
void driver_asv_t(struct dc_writer *w, const char *key, uint64_t v);
void driver_asv_b(struct dc_writer *w, const char *key, bool v);
void driver_asv_s(struct dc_writer *w, const char *key, const char *v);

/* The caller runs as the bus' user or root. */
bool driver_caller_is_privileged(const struct driver_call *c);
/* Read the single string argument every "s" method has: 0, or DRIVER_E_ERROR_SET. */
int driver_read_name(struct driver_call *c, const char **namep);
/*
 * Which connection does the "s" argument denote (bus_driver_get_conn_helper)?
 * Return: 0 with *selfp set for org.freedesktop.DBus or *connp for a peer,
 * DRIVER_E_ERROR_SET (NameHasNoOwner / InvalidArgs).
 */
int driver_lookup_conn(struct driver_call *c, const char *what, const char **namep,
		       struct peer **connp, bool *selfp);
/*
 * The entries of GetConnectionCredentials' a{sv} that describe @peer (not
 * its ProcessFD, not its container) to @w, inside the open array. Return 0
 * or negative errno.
 */
int driver_write_credentials(struct dc_writer *w, struct peer *peer);

/* Hello, for a socket client or a native one after its bootstrap. */
int driver_hello(struct peer *peer, struct message *msg);

/* The methods of the driver's own groups (driver-dbus.c, driver-stats.c). */
int driver_method_hello(struct driver_call *c);
int driver_method_request_name(struct driver_call *c);
int driver_method_release_name(struct driver_call *c);
int driver_method_start_service_by_name(struct driver_call *c);
int driver_method_update_activation_environment(struct driver_call *c);
int driver_method_name_has_owner(struct driver_call *c);
int driver_method_list_names(struct driver_call *c);
int driver_method_list_activatable_names(struct driver_call *c);
int driver_method_add_match(struct driver_call *c);
int driver_method_remove_match(struct driver_call *c);
int driver_method_get_name_owner(struct driver_call *c);
int driver_method_list_queued_owners(struct driver_call *c);
int driver_method_get_connection_unix_user(struct driver_call *c);
int driver_method_get_connection_unix_process_id(struct driver_call *c);
int driver_method_get_connection_credentials(struct driver_call *c);
int driver_method_get_adt_audit_session_data(struct driver_call *c);
int driver_method_get_connection_selinux_security_context(struct driver_call *c);
int driver_method_reload_config(struct driver_call *c);
int driver_method_get_id(struct driver_call *c);
int driver_method_become_monitor(struct driver_call *c);
int driver_method_get_machine_id(struct driver_call *c);
int driver_method_ping(struct driver_call *c);
int driver_method_get_stats(struct driver_call *c);
int driver_method_get_connection_stats(struct driver_call *c);
int driver_method_get_all_match_rules(struct driver_call *c);
int driver_method_list_connection_stats(struct driver_call *c);
int driver_method_get_user_stats(struct driver_call *c);
