/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * 10,000 well-known names and 10,000 match rules, owned by one client and
 * dropped at once when it closes its socket. A subscriber to
 * NameOwnerChanged must see one signal for every name (and one for the
 * unique name), a bystander's calls are answered while the bus tears it all
 * down, and afterwards the bus counts none of those names and rules.
 *
 *   test-names-matches BUS_BINARY CONFIG   (STRESS_NAMES=N, default 10000)
 */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "stress-common.h"

#define BATCH 500

static int n_items;

/* Pipelined driver calls with one string argument, @pre N @post, read the replies. */
static void pipelined(struct rc *c, const char *member, const char *pre, const char *post,
		      bool with_flags, struct rc *drain)
{
	for (int base = 0; base < n_items; base += BATCH) {
		uint32_t last = 0;
		int n = base + BATCH < n_items ? BATCH : n_items - base;
		int replies = 0;

		for (int i = 0; i < n; i++) {
			DBusMessage *m = driver_call_new(member);
			char arg[160];
			const char *a = arg;
			uint32_t flags = 4;	/* DO_NOT_QUEUE */

			snprintf(arg, sizeof(arg), "%s%d%s", pre, base + i, post);
			if (with_flags)
				dbus_message_append_args(m, DBUS_TYPE_STRING, &a, DBUS_TYPE_UINT32,
							 &flags, DBUS_TYPE_INVALID);
			else
				dbus_message_append_args(m, DBUS_TYPE_STRING, &a,
							 DBUS_TYPE_INVALID);
			last = rc_send(c, m, NULL, 0);
			CHECK(last, "send %s", member);
			dbus_message_unref(m);
		}
		while (replies < n) {
			DBusMessage *m = rc_recv(c, 10000);

			CHECK(m, "%s: %d of %d replies", member, replies, n);
			if (dbus_message_get_reply_serial(m) >= last - (uint32_t)n + 1 &&
			    dbus_message_get_reply_serial(m) <= last) {
				CHECK(!msg_error(m), "%s: %s", member, msg_error(m));
				if (with_flags) {
					uint32_t code = 0;

					dbus_message_get_args(m, NULL, DBUS_TYPE_UINT32, &code,
							      DBUS_TYPE_INVALID);
					CHECK(code == 1, "RequestName returned %u", code);
				}
				replies++;
			}
			dbus_message_unref(m);
		}
		/* Keep the subscriber's queue short. */
		while (rc_fill(drain, 0) > 0)
			;
	}
}

/* Take the subscriber's messages; count NameOwnerChanged that drop an owner of @prefix. */
static int count_gone(struct rc *sub, const char *owner)
{
	DBusMessage *m;
	int n = 0;

	while ((m = rc_take(sub))) {
		const char *name, *old, *nw;

		if (dbus_message_is_signal(m, DRIVER, "NameOwnerChanged") &&
		    dbus_message_get_args(m, NULL, DBUS_TYPE_STRING, &name, DBUS_TYPE_STRING, &old,
					  DBUS_TYPE_STRING, &nw, DBUS_TYPE_INVALID) &&
		    !strcmp(old, owner) && !nw[0])
			n++;
		dbus_message_unref(m);
	}
	return n;
}

int main(int argc, char **argv)
{
	const char *env = getenv("STRESS_NAMES");
	struct sbus bus;
	struct rc owner, sub, by;
	struct lat lat = {};
	char owner_name[64];
	long names0, rules0;
	uint64_t t0, t_names, t_rules, t_drop = 0;
	int gone = 0;
	DBusMessage *r;

	n_items = env ? atoi(env) : 10000;
	sbus_start(&bus, argc > 1 ? argv[1] : NULL, argc > 2 ? argv[2] : NULL, 0);
	rc_open(&by, &bus, false);
	rc_open(&sub, &bus, false);
	r = rc_driver_call(&sub, "AddMatch",
			   "type='signal',sender='" DRIVER "',member='NameOwnerChanged'");
	CHECK(!msg_error(r), "AddMatch: %s", msg_error(r));
	dbus_message_unref(r);
	names0 = rc_bus_stat(&by, "BusNames");
	rules0 = rc_bus_stat(&by, "MatchRules");

	rc_open(&owner, &bus, false);
	snprintf(owner_name, sizeof(owner_name), "%s", owner.name);
	t0 = now_usec();
	pipelined(&owner, "RequestName", "org.bus1.Stress.Name", "", true, &sub);
	t_names = now_usec() - t0;
	t0 = now_usec();
	pipelined(&owner, "AddMatch", "type='signal',interface='org.bus1.Stress',member='M",
		  "',arg0='x'", false, &sub);
	t_rules = now_usec() - t0;
	CHECK(rc_bus_stat(&by, "BusNames") >= names0 + n_items, "BusNames %ld",
	      rc_bus_stat(&by, "BusNames"));
	CHECK(rc_bus_stat(&by, "MatchRules") == rules0 + n_items, "MatchRules %ld",
	      rc_bus_stat(&by, "MatchRules"));
	/* Drop what the subscriber got so far (the acquisitions). */
	while (rc_fill(&sub, 50) > 0)
		;
	count_gone(&sub, owner_name);

	/* The owner goes; everything it had is dropped at once. */
	t0 = now_usec();
	rc_close(&owner);
	while (gone < n_items + 1) {
		CHECK(now_usec() - t0 < 30000000, "NameOwnerChanged for %d of %d names in 30 s",
		      gone, n_items + 1);
		lat_add(&lat, rc_ping(&by));
		rc_fill(&sub, 5);
		while (rc_fill(&sub, 0) > 0)
			;
		gone += count_gone(&sub, owner_name);
		if (gone >= n_items + 1 && !t_drop)
			t_drop = now_usec() - t0;
	}
	/* No more than one each. */
	rc_fill(&sub, 200);
	gone += count_gone(&sub, owner_name);

	printf("%d names and %d match rules on one connection\n", n_items, n_items);
	printf("  RequestName x %d, pipelined          %8.1f ms\n", n_items, t_names / 1000.0);
	printf("  AddMatch x %d, pipelined             %8.1f ms\n", n_items, t_rules / 1000.0);
	printf("  close -> last NameOwnerChanged seen  %8.1f ms\n", t_drop / 1000.0);
	lat_print("bystander GetId during the drop", &lat);
	printf("  bus VmHWM %ld KiB\n", proc_status_kb(bus.pid, "VmHWM"));
	CHECK(gone == n_items + 1, "%d NameOwnerChanged for %d names + the unique name", gone,
	      n_items);
	CHECK(rc_bus_stat(&by, "BusNames") == names0, "BusNames %ld, was %ld",
	      rc_bus_stat(&by, "BusNames"), names0);
	CHECK(rc_bus_stat(&by, "MatchRules") == rules0, "MatchRules %ld, was %ld",
	      rc_bus_stat(&by, "MatchRules"), rules0);
	rc_close(&sub);
	rc_close(&by);
	sbus_stop(&bus);
	lat_free(&lat);
	printf("ok\n");
	return 0;
}
