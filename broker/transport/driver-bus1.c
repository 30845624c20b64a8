/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The driver's org.freedesktop.DBus.Bus1: the methods of native clients
 * (docs/native-protocol.md). See driver-internal.h.
 */

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "broker/activation/activation.h"
#include "broker/core/bus.h"
#include "broker/core/bus-journal.h"
#include "broker/objects/peer.h"
#include "broker/core/driver.h"
#include "broker/objects/log.h"
#include "broker/objects/match.h"
#include "broker/core/monitor.h"
#include "broker/objects/name.h"
#include "broker/transport/native.h"
#include "broker/policy/policy.h"
#include "broker/objects/reply.h"
#include "broker/core/router.h"
#include "broker/policy/selinux.h"
#include "conf/config.h"
#include "conf/policy.h"
#include "dbus-compat/marshal.h"
#include "dbus-compat/message.h"
#include "dbus-compat/native-protocol.h"
#include "dbus-compat/protocol.h"
#include "dbus-compat/signature.h"
#include "dbus-compat/socket.h"
#include "dbus-compat/validate.h"
#include "util/error.h"
#include "broker/core/driver-internal.h"

/* --------------------------------------------- org.freedesktop.DBus.Bus1 */

/*
 * The native clients' bootstrap (docs/native-protocol.md): Connect(h) with
 * the client's /dev/bus1 fd, before Hello. The reply (the client's handles
 * of its three nodes) goes out on the socket; everything after it over bus1.
 */
static int driver_method_bus1_connect(struct driver_call *c)
{
	_cleanup_message_ struct message *reply = NULL;
	struct peer *peer = c->peer;
	struct message *msg = c->msg;
	struct message_builder b;
	struct native *native = native_of_bus(c->bus);
	struct native_conn *nc;
	uint64_t handles[3];
	uint32_t index;
	int r;

	if (!native)
		return driver_fail(c, DC_ERROR_NOT_SUPPORTED,
				   "This bus has no bus1 transport (/dev/bus1 is absent)");
	if (peer->output != peer->transport || peer->registered)
		return driver_fail(c, DC_ERROR_FAILED,
				   "Connect must be the first call, and only one");
	if (strcmp(msg->signature, DC_BUS1_CONNECT_SIGNATURE))
		return driver_fail(c, DC_ERROR_INVALID_ARGS,
				   "Connect takes one unix fd (signature h)");
	if (dc_reader_read(&c->reader, "h", &index) || index >= msg->n_fds)
		return driver_fail(c, DC_ERROR_INVALID_ARGS,
				   "Connect needs its fd (negotiate NEGOTIATE_UNIX_FD)");

	r = native_attach(native, peer, msg->fds[index], handles, &nc);
	if (r < 0)
		return r;
	if (r == NATIVE_E_NOT_BUS1 || r == NATIVE_E_TRANSFER)
		return driver_fail(c, DC_ERROR_INVALID_ARGS, "%s",
				   r == NATIVE_E_NOT_BUS1 ? "Connect needs a /dev/bus1 fd" :
							    "bus1 handle transfer failed");
	/* The broker keeps no copy of the client's peer fd (native_attach()). */
	close(msg->fds[index]);
	msg->fds[index] = -1;

	message_builder_init_method_return(&b, msg, DC_BUS1_CONNECT_REPLY);
	b.sender = DC_SERVICE_DBUS;
	dc_writer_write(&b.body, DC_BUS1_CONNECT_REPLY, handles[0], handles[1], handles[2]);
	r = message_builder_seal(&b, bus_next_serial(c->bus), &reply);
	message_builder_deinit(&b);
	if (r == 0) {
		/* Still a socket connection here: the reply goes out on the socket. */
		r = peer_queue(peer, reply);
		if (r > 0) {
			peer_close(peer, "cannot queue the bus1 bootstrap reply");
			r = 0;
		} else if (r == 0) {
			peer_set_output(peer, native_conn_transport(nc));
			/* Its bus1 side is native.c's to write: a snapshot. */
			bus_journal_changed(c->bus);
			return 0;
		}
	}
	native_conn_free(nc);
	return r < 0 ? r : 0;
}

/*
 * GetDirectHandle(s name) -> (s unique_name), with the owner's direct-node
 * handle in the reply's bus1 handle list: the direct path between two
 * native clients, if the policy lets the callee enforce it (policy.h).
 */
static int driver_method_bus1_get_direct_handle(struct driver_call *c)
{
	_cleanup_message_ struct message *reply = NULL;
	struct native_conn *caller = native_conn_of(c->peer), *callee;
	struct peer *target;
	struct message_builder b;
	const char *name;
	int r;

	if (!caller)
		return driver_fail(c, DC_ERROR_NOT_SUPPORTED,
				   "Direct handles are for native (bus1) clients only");
	if (dc_reader_read(&c->reader, "s", &name) || !name)
		return driver_fail(c, DC_ERROR_INVALID_ARGS,
				   "GetDirectHandle takes one bus name (signature s)");
	target = bus_resolve(c->bus, name);
	if (!target)
		return driver_fail(c, DC_ERROR_NAME_HAS_NO_OWNER,
				   "Could not get owner of name '%s': no such name", name);
	callee = native_conn_of(target);
	if (!callee)
		return driver_fail(c, DC_ERROR_NOT_SUPPORTED,
				   "The owner of '%s' is not a native client", name);

	r = policy_check_direct(c->bus, c->peer, target);
	switch (r) {
	case POLICY_DIRECT_ALLOWED:
		break;
	case POLICY_DIRECT_DENIED:
		return driver_fail(c, DC_ERROR_ACCESS_DENIED,
				   "The policy does not allow calls to '%s'", name);
	case POLICY_DIRECT_OPAQUE:
		return driver_fail(c, DC_ERROR_NOT_SUPPORTED,
				   "The policy for '%s' looks at interfaces, members, paths, "
				   "errors, fds, groups or the console: no direct handle", name);
	case POLICY_DIRECT_FILTERED:
		return driver_fail(c, DC_ERROR_NOT_SUPPORTED,
				   "A container's filter decides on calls between you and '%s' "
				   "message by message: no direct handle", name);
	case POLICY_DIRECT_NO_REPLIES:
		return driver_fail(c, DC_ERROR_NOT_SUPPORTED,
				   "The policy does not allow replies from '%s': no direct "
				   "handle", name);
	default:
		if (r < 0)
			return r;
		/* policy_check_direct() answers with one of the above. */
		assert_not_reached();
	}
	r = native_conn_allow_direct(callee, (uint32_t)c->peer->uid);
	if (r < 0)
		return r;
	if (r == NATIVE_E_NO_DIRECT)
		return driver_fail(c, DC_ERROR_LIMITS_EXCEEDED, "No direct handle to '%s' now",
				   name);

	message_builder_init_method_return(&b, c->msg, "s");
	b.sender = DC_SERVICE_DBUS;
	dc_writer_write(&b.body, "s", peer_name(target));
	r = message_builder_seal(&b, bus_next_serial(c->bus), &reply);
	message_builder_deinit(&b);
	if (r)
		return r < 0 ? r : -EINVAL;
	/* Over bus1, since the reply carries a handle. */
	return native_send_direct_handle(caller, callee, reply);
}

static const struct driver_method bus1_methods[] = {
	{ DC_BUS1_METHOD_CONNECT, DC_BUS1_CONNECT_SIGNATURE, DC_BUS1_CONNECT_REPLY,
	  driver_method_bus1_connect, METHOD_ANY_PATH | METHOD_BOOTSTRAP },
	{ DC_BUS1_METHOD_GET_DIRECT_HANDLE, DC_BUS1_GET_DIRECT_HANDLE_SIGNATURE,
	  DC_BUS1_GET_DIRECT_HANDLE_REPLY, driver_method_bus1_get_direct_handle, METHOD_ANY_PATH },
	{}
};

const struct driver_interface driver_bus1_interface = {
	DC_INTERFACE_BUS1, bus1_methods, NULL,
	IFACE_ANY_PATH | IFACE_UNINTERESTING | IFACE_HIDDEN, NULL,
};
