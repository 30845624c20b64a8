/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The peer protocol (peer-common.h) on GDBus: an exported object,
 * g_dbus_connection_signal_subscribe() (which installs match rules) and
 * asynchronous calls on a GMainLoop.
 */

#include <gio/gio.h>
#include "peer-common.h"

static struct peer P;
static GDBusConnection *conn;
static GMainLoop *loop;

static const char introspection_xml[] =
	"<node><interface name='" PEER_IFACE "'>"
	"<method name='Ping'><arg type='s' direction='in'/><arg type='s' direction='out'/>"
	"</method></interface></node>";

static void method_call(GDBusConnection *c, const gchar *sender, const gchar *path,
			const gchar *iface, const gchar *method, GVariant *params,
			GDBusMethodInvocation *inv, gpointer data)
{
	const gchar *from;
	char buf[512];

	g_variant_get(params, "(&s)", &from);
	peer_pong_text(&P, from, buf, sizeof(buf));
	P.n_pings_served++;
	g_dbus_method_invocation_return_value(inv, g_variant_new("(s)", buf));
}

static const GDBusInterfaceVTable vtable = { .method_call = method_call };

static void emit(const char *member)
{
	GError *error = NULL;

	if (!g_dbus_connection_emit_signal(conn, NULL, PEER_PATH, PEER_IFACE, member,
					   g_variant_new("(s)", P.me), &error))
		peer_fail(&P, error->message);
}

static void on_peer_signal(GDBusConnection *c, const gchar *sender, const gchar *path,
			   const gchar *iface, const gchar *member, GVariant *params,
			   gpointer data)
{
	const gchar *name;
	int i;

	if (!g_variant_is_of_type(params, G_VARIANT_TYPE("(s)")))
		return;
	g_variant_get(params, "(&s)", &name);
	i = peer_index(&P, name);
	if (i < 0)
		return;
	if (!strcmp(member, "Announce"))
		P.got_announce[i] = true;
	else if (!strcmp(member, "Done"))
		P.got_done[i] = true;
}

static void on_owner_changed(GDBusConnection *c, const gchar *sender, const gchar *path,
			     const gchar *iface, const gchar *member, GVariant *params,
			     gpointer data)
{
	const gchar *name, *old, *new;

	g_variant_get(params, "(&s&s&s)", &name, &old, &new);
	if (!strcmp(name, P.exiter) && *old && !*new)
		P.exiter_gone = true;
}

static void pong_done(GObject *src, GAsyncResult *res, gpointer data)
{
	int i = GPOINTER_TO_INT(data);
	GError *error = NULL;
	GVariant *v = g_dbus_connection_call_finish(conn, res, &error);
	const gchar *text;

	if (!v) {
		peer_log(&P, "Ping to %s failed: %s", P.others[i], error->message);
		exit(1);
	}
	g_variant_get(v, "(&s)", &text);
	peer_check_pong(&P, i, text);
	g_variant_unref(v);
}

static bool has_owner(const char *name)
{
	GError *error = NULL;
	GVariant *v;
	gboolean b;

	v = g_dbus_connection_call_sync(conn, "org.freedesktop.DBus", "/org/freedesktop/DBus",
					"org.freedesktop.DBus", "NameHasOwner",
					g_variant_new("(s)", name), G_VARIANT_TYPE("(b)"),
					G_DBUS_CALL_FLAGS_NONE, 5000, NULL, &error);
	if (!v)
		peer_fail(&P, error->message);
	g_variant_get(v, "(b)", &b);
	g_variant_unref(v);
	return b;
}

static gboolean tick(gpointer data)
{
	int i;

	peer_check_deadline(&P);
	if (!P.started && has_owner(P.others[0]) && has_owner(P.others[1])) {
		P.started = true;
		emit("Announce");
		for (i = 0; i < 2; i++)
			g_dbus_connection_call(conn, P.others[i], PEER_PATH, PEER_IFACE, "Ping",
					       g_variant_new("(s)", P.me), G_VARIANT_TYPE("(s)"),
					       G_DBUS_CALL_FLAGS_NONE, 10000, NULL, pong_done,
					       GINT_TO_POINTER(i));
	}
	if (peer_ready_for_done(&P)) {
		P.done_sent = true;
		emit("Done");
	}
	if (peer_finished(&P)) {
		g_dbus_connection_flush_sync(conn, NULL, NULL);
		g_main_loop_quit(loop);
		return G_SOURCE_REMOVE;
	}
	return G_SOURCE_CONTINUE;
}

int main(int argc, char **argv)
{
	GError *error = NULL;
	GDBusNodeInfo *info;
	GVariant *v;
	guint32 reply;

	peer_init(&P, "gdbus", argc, argv);
	conn = g_bus_get_sync(G_BUS_TYPE_SESSION, NULL, &error);
	if (!conn)
		peer_fail(&P, error->message);
	g_dbus_connection_set_exit_on_close(conn, FALSE);
	info = g_dbus_node_info_new_for_xml(introspection_xml, &error);
	if (!info ||
	    !g_dbus_connection_register_object(conn, PEER_PATH, info->interfaces[0], &vtable,
					       NULL, NULL, &error))
		peer_fail(&P, error->message);
	g_dbus_connection_signal_subscribe(conn, NULL, PEER_IFACE, NULL, NULL, NULL,
					   G_DBUS_SIGNAL_FLAGS_NONE, on_peer_signal, NULL, NULL);
	g_dbus_connection_signal_subscribe(conn, "org.freedesktop.DBus", "org.freedesktop.DBus",
					   "NameOwnerChanged", "/org/freedesktop/DBus", NULL,
					   G_DBUS_SIGNAL_FLAGS_NONE, on_owner_changed, NULL, NULL);
	/* The subscriptions' AddMatch calls are in flight: sync with a round trip. */
	v = g_dbus_connection_call_sync(conn, "org.freedesktop.DBus", "/org/freedesktop/DBus",
					"org.freedesktop.DBus", "RequestName",
					g_variant_new("(su)", P.me, 4), G_VARIANT_TYPE("(u)"),
					G_DBUS_CALL_FLAGS_NONE, 5000, NULL, &error);
	if (!v)
		peer_fail(&P, error->message);
	g_variant_get(v, "(u)", &reply);
	g_variant_unref(v);
	if (reply != 1)
		peer_fail(&P, "RequestName did not make us the owner");

	loop = g_main_loop_new(NULL, FALSE);
	g_timeout_add(50, tick, NULL);
	g_main_loop_run(loop);
	peer_log(&P, "ok (served %d pings)", P.n_pings_served);
	g_dbus_node_info_unref(info);
	return 0;
}
