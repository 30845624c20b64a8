/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/**
 * DOC: Names of the native (bus1) protocol
 *
 * The names and signatures of the org.freedesktop.DBus.Bus1 interface: the
 * bootstrap of a native client (Connect, sent on the bus socket before Hello),
 * the direct path (GetDirectHandle, the DirectPolicy signal and the
 * DirectRevoked error a callee answers with) and the layout of the replies.
 * The broker (broker/transport/native.c, broker/core/driver.c), libbus1-client (client/) and
 * the native tests (test/native/) use these macros, never the literals. What
 * the calls do is defined in docs/native-protocol.md.
 *
 * The bus name and object path are the driver's: DC_SERVICE_DBUS and
 * DC_PATH_DBUS of protocol.h. Header-only; nothing to link.
 */

/* The interface of the driver's native methods and of the broker's signals to native clients. */
#define DC_INTERFACE_BUS1		"org.freedesktop.DBus.Bus1"

/*
 * Connect(h fd) -> (t bus_handle, t client_node, t direct_node): the client's
 * /dev/bus1 fd, as a unix fd, on the socket before Hello. A broker without
 * the direct path replies "tt" (no direct_node).
 */
#define DC_BUS1_METHOD_CONNECT		"Connect"
#define DC_BUS1_CONNECT_SIGNATURE	"h"
#define DC_BUS1_CONNECT_REPLY		"ttt"
#define DC_BUS1_CONNECT_REPLY_OLD	"tt"

/*
 * GetDirectHandle(s name) -> (s unique_name), sent as a bus1 message; the
 * reply's bus1 handle list carries the owner's direct-node handle.
 */
#define DC_BUS1_METHOD_GET_DIRECT_HANDLE	"GetDirectHandle"
#define DC_BUS1_GET_DIRECT_HANDLE_SIGNATURE	"s"
#define DC_BUS1_GET_DIRECT_HANDLE_REPLY		"s"

/*
 * Signal DirectPolicy(au uids), from the broker to a native client's client
 * node: the uids whose method calls it may take directly; empty revokes every
 * direct handle to it.
 */
#define DC_BUS1_SIGNAL_DIRECT_POLICY		"DirectPolicy"
#define DC_BUS1_DIRECT_POLICY_SIGNATURE		"au"

/*
 * A callee's answer to a direct call after an empty DirectPolicy: the caller
 * forgets the handle and asks the broker again. (bus1-client.h, installed
 * without this header, repeats it as B1C_ERROR_DIRECT_REVOKED.)
 */
#define DC_BUS1_ERROR_DIRECT_REVOKED	"org.freedesktop.DBus.Bus1.Error.DirectRevoked"

/*
 * The entry of the bus1 handle list that carries the protocol's handle: the
 * owner's direct node in the GetDirectHandle reply, the caller's own direct
 * node (the way back for the reply) in a direct call.
 */
#define DC_BUS1_HANDLE_INDEX	0
