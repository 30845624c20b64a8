/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The peer protocol (peer-common.h) on sd-bus: an object vtable,
 * sd_bus_match_signal() and sd_bus_call_method_async(), driven by
 * sd_bus_process()/sd_bus_wait().
 */

#include <systemd/sd-bus.h>
#include "peer-common.h"

static struct peer P;
static sd_bus *bus;

static int method_ping(sd_bus_message *m, void *userdata, sd_bus_error *error)
{
	const char *from;
	char buf[512];
	int r;

	r = sd_bus_message_read(m, "s", &from);
	if (r < 0)
		return r;
	peer_pong_text(&P, from, buf, sizeof(buf));
	P.n_pings_served++;
	return sd_bus_reply_method_return(m, "s", buf);
}

static const sd_bus_vtable vtable[] = {
	SD_BUS_VTABLE_START(0),
	SD_BUS_METHOD("Ping", "s", "s", method_ping, SD_BUS_VTABLE_UNPRIVILEGED),
	SD_BUS_VTABLE_END
};

static int on_peer_signal(sd_bus_message *m, void *userdata, sd_bus_error *error)
{
	const char *name;
	int i;

	if (sd_bus_message_read(m, "s", &name) < 0)
		return 0;
	i = peer_index(&P, name);
	if (i < 0)
		return 0;
	if (sd_bus_message_is_signal(m, PEER_IFACE, "Announce"))
		P.got_announce[i] = true;
	else if (sd_bus_message_is_signal(m, PEER_IFACE, "Done"))
		P.got_done[i] = true;
	return 0;
}

static int on_owner_changed(sd_bus_message *m, void *userdata, sd_bus_error *error)
{
	const char *name, *old, *new;

	if (sd_bus_message_read(m, "sss", &name, &old, &new) < 0)
		return 0;
	if (!strcmp(name, P.exiter) && *old && !*new)
		P.exiter_gone = true;
	return 0;
}

static int pong_done(sd_bus_message *m, void *userdata, sd_bus_error *ret_error)
{
	int i = (int)(long)userdata;
	const sd_bus_error *e = sd_bus_message_get_error(m);
	const char *text;

	if (e) {
		peer_log(&P, "Ping to %s failed: %s: %s", P.others[i], e->name, e->message);
		exit(1);
	}
	if (sd_bus_message_read(m, "s", &text) < 0)
		peer_fail(&P, "bad Ping reply");
	peer_check_pong(&P, i, text);
	return 0;
}

static bool has_owner(const char *name)
{
	sd_bus_error error = SD_BUS_ERROR_NULL;
	sd_bus_message *reply = NULL;
	int b = 0;

	if (sd_bus_call_method(bus, "org.freedesktop.DBus", "/org/freedesktop/DBus",
			       "org.freedesktop.DBus", "NameHasOwner", &error, &reply, "s",
			       name) < 0)
		peer_fail(&P, error.message);
	if (sd_bus_message_read(reply, "b", &b) < 0)
		peer_fail(&P, "bad NameHasOwner reply");
	sd_bus_message_unref(reply);
	return b;
}

static void emit(const char *member)
{
	if (sd_bus_emit_signal(bus, PEER_PATH, PEER_IFACE, member, "s", P.me) < 0)
		peer_fail(&P, "cannot emit signal");
}

int main(int argc, char **argv)
{
	int i, r;

	peer_init(&P, "sd-bus", argc, argv);
	r = sd_bus_open_user(&bus);
	if (r < 0)
		peer_fail(&P, "cannot connect");
	r = sd_bus_add_object_vtable(bus, NULL, PEER_PATH, PEER_IFACE, vtable, NULL);
	if (r < 0)
		peer_fail(&P, "cannot export object");
	r = sd_bus_match_signal(bus, NULL, NULL, NULL, PEER_IFACE, NULL, on_peer_signal, NULL);
	if (r < 0)
		peer_fail(&P, "AddMatch failed");
	r = sd_bus_match_signal(bus, NULL, "org.freedesktop.DBus", "/org/freedesktop/DBus",
				"org.freedesktop.DBus", "NameOwnerChanged", on_owner_changed, NULL);
	if (r < 0)
		peer_fail(&P, "AddMatch failed");
	r = sd_bus_request_name(bus, P.me, 0);
	if (r < 0)
		peer_fail(&P, "RequestName failed");

	for (;;) {
		peer_check_deadline(&P);
		if (!P.started && has_owner(P.others[0]) && has_owner(P.others[1])) {
			P.started = true;
			emit("Announce");
			for (i = 0; i < 2; i++) {
				r = sd_bus_call_method_async(bus, NULL, P.others[i], PEER_PATH,
							     PEER_IFACE, "Ping", pong_done,
							     (void *)(long)i, "s", P.me);
				if (r < 0)
					peer_fail(&P, "cannot call Ping");
			}
		}
		if (peer_ready_for_done(&P)) {
			P.done_sent = true;
			emit("Done");
		}
		if (peer_finished(&P)) {
			sd_bus_flush(bus);
			peer_log(&P, "ok (served %d pings)", P.n_pings_served);
			sd_bus_flush_close_unref(bus);
			return 0;
		}
		r = sd_bus_process(bus, NULL);
		if (r < 0)
			peer_fail(&P, "connection failed");
		if (r > 0)
			continue;
		r = sd_bus_wait(bus, 50000);
		if (r < 0)
			peer_fail(&P, "wait failed");
	}
}
