/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The peer protocol (peer-common.h) on libdbus, with a plain
 * dbus_connection_read_write_dispatch() loop.
 */

#include <dbus/dbus.h>
#include "peer-common.h"

static struct peer P;
static DBusConnection *conn;

static void emit(const char *member)
{
	DBusMessage *m = dbus_message_new_signal(PEER_PATH, PEER_IFACE, member);
	const char *me = P.me;

	if (!m || !dbus_message_append_args(m, DBUS_TYPE_STRING, &me, DBUS_TYPE_INVALID) ||
	    !dbus_connection_send(conn, m, NULL))
		peer_fail(&P, "cannot emit signal");
	dbus_message_unref(m);
}

static bool has_owner(const char *name)
{
	DBusMessage *m, *r;
	DBusError err = DBUS_ERROR_INIT;
	dbus_bool_t v = FALSE;

	m = dbus_message_new_method_call(DBUS_SERVICE_DBUS, DBUS_PATH_DBUS, DBUS_INTERFACE_DBUS,
					 "NameHasOwner");
	dbus_message_append_args(m, DBUS_TYPE_STRING, &name, DBUS_TYPE_INVALID);
	r = dbus_connection_send_with_reply_and_block(conn, m, 5000, &err);
	dbus_message_unref(m);
	if (!r || !dbus_message_get_args(r, &err, DBUS_TYPE_BOOLEAN, &v, DBUS_TYPE_INVALID))
		peer_fail(&P, err.message ? err.message : "NameHasOwner failed");
	dbus_message_unref(r);
	return v;
}

static void pong_done(DBusPendingCall *pending, void *data)
{
	int i = (int)(long)data;
	DBusMessage *r = dbus_pending_call_steal_reply(pending);
	DBusError err = DBUS_ERROR_INIT;
	const char *text = NULL;

	if (!r)
		peer_fail(&P, "no Ping reply");
	if (dbus_set_error_from_message(&err, r)) {
		peer_log(&P, "Ping to %s failed: %s: %s", P.others[i], err.name, err.message);
		exit(1);
	}
	if (!dbus_message_get_args(r, &err, DBUS_TYPE_STRING, &text, DBUS_TYPE_INVALID))
		peer_fail(&P, "bad Ping reply signature");
	peer_check_pong(&P, i, text);
	dbus_message_unref(r);
	dbus_pending_call_unref(pending);
}

static void send_ping(int i)
{
	DBusMessage *m = dbus_message_new_method_call(P.others[i], PEER_PATH, PEER_IFACE, "Ping");
	DBusPendingCall *pending = NULL;
	const char *me = P.me;

	dbus_message_append_args(m, DBUS_TYPE_STRING, &me, DBUS_TYPE_INVALID);
	if (!dbus_connection_send_with_reply(conn, m, &pending, 10000) || !pending)
		peer_fail(&P, "cannot send Ping");
	dbus_pending_call_set_notify(pending, pong_done, (void *)(long)i, NULL);
	dbus_message_unref(m);
}

static DBusHandlerResult filter(DBusConnection *c, DBusMessage *m, void *data)
{
	DBusError err = DBUS_ERROR_INIT;
	const char *a = NULL, *old = NULL, *new = NULL;

	if (dbus_message_is_method_call(m, PEER_IFACE, "Ping")) {
		char buf[512];
		const char *text = buf;
		DBusMessage *r;

		if (!dbus_message_get_args(m, &err, DBUS_TYPE_STRING, &a, DBUS_TYPE_INVALID))
			peer_fail(&P, "bad Ping call");
		peer_pong_text(&P, a, buf, sizeof(buf));
		r = dbus_message_new_method_return(m);
		dbus_message_append_args(r, DBUS_TYPE_STRING, &text, DBUS_TYPE_INVALID);
		dbus_connection_send(c, r, NULL);
		dbus_message_unref(r);
		P.n_pings_served++;
		return DBUS_HANDLER_RESULT_HANDLED;
	}
	if (dbus_message_is_signal(m, PEER_IFACE, "Announce") ||
	    dbus_message_is_signal(m, PEER_IFACE, "Done")) {
		int i;

		if (!dbus_message_get_args(m, &err, DBUS_TYPE_STRING, &a, DBUS_TYPE_INVALID))
			peer_fail(&P, "bad signal");
		i = peer_index(&P, a);
		if (i >= 0) {
			if (!strcmp(dbus_message_get_member(m), "Announce"))
				P.got_announce[i] = true;
			else
				P.got_done[i] = true;
		}
		return DBUS_HANDLER_RESULT_HANDLED;
	}
	if (dbus_message_is_signal(m, DBUS_INTERFACE_DBUS, "NameOwnerChanged")) {
		if (dbus_message_get_args(m, &err, DBUS_TYPE_STRING, &a, DBUS_TYPE_STRING, &old,
					  DBUS_TYPE_STRING, &new, DBUS_TYPE_INVALID) &&
		    !strcmp(a, P.exiter) && *old && !*new)
			P.exiter_gone = true;
		return DBUS_HANDLER_RESULT_HANDLED;
	}
	return DBUS_HANDLER_RESULT_NOT_YET_HANDLED;
}

int main(int argc, char **argv)
{
	DBusError err = DBUS_ERROR_INIT;
	int r;

	peer_init(&P, "libdbus", argc, argv);
	conn = dbus_bus_get(DBUS_BUS_SESSION, &err);
	if (!conn)
		peer_fail(&P, err.message);
	dbus_connection_set_exit_on_disconnect(conn, FALSE);
	dbus_connection_add_filter(conn, filter, NULL, NULL);
	dbus_bus_add_match(conn, "type='signal',interface='" PEER_IFACE "'", &err);
	if (dbus_error_is_set(&err))
		peer_fail(&P, err.message);
	dbus_bus_add_match(conn, "type='signal',sender='org.freedesktop.DBus',"
			   "member='NameOwnerChanged'", &err);
	if (dbus_error_is_set(&err))
		peer_fail(&P, err.message);
	r = dbus_bus_request_name(conn, P.me, DBUS_NAME_FLAG_DO_NOT_QUEUE, &err);
	if (r != DBUS_REQUEST_NAME_REPLY_PRIMARY_OWNER)
		peer_fail(&P, "RequestName did not make us the owner");

	while (dbus_connection_read_write_dispatch(conn, 50)) {
		peer_check_deadline(&P);
		if (!P.started && has_owner(P.others[0]) && has_owner(P.others[1])) {
			P.started = true;
			emit("Announce");
			send_ping(0);
			send_ping(1);
		}
		if (peer_ready_for_done(&P)) {
			P.done_sent = true;
			emit("Done");
		}
		if (peer_finished(&P)) {
			dbus_connection_flush(conn);
			peer_log(&P, "ok (served %d pings)", P.n_pings_served);
			return 0;
		}
	}
	peer_fail(&P, "disconnected");
	return 1;
}
