/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * lsm-native ADDRESS - a native (libbus1-client, /dev/bus1) client of the LSM
 * matrix (apparmor_matrix.py), run under the label of its case. It answers
 * the commands of lsm_peer.py, one a line on stdin, each with one JSON line
 * on stdout ({"result": ...}), after {"ready": UNIQUE-NAME} (Hello refused
 * with AccessDenied: {"ready": null, "refused": ERROR} and it exits):
 *
 *   own NAME                     "reply:CODE" or the error name
 *   call DEST PATH IFACE MEMBER  "reply", the error name, or "timeout"
 *   match RULE                   AddMatch: "reply" or the error name
 *   emit PATH IFACE MEMBER       a broadcast signal: "sent"
 *   direct                       use the direct path from now on: "reply"
 *                                or "unavailable"
 *   seen                         the calls and matched signals received since
 *                                the last "seen", each [type, path, interface,
 *                                member] (every call is answered with an
 *                                empty reply)
 *
 * Its label is that of the socket it bootstrapped through, as for every
 * native client (broker/policy/apparmor.h).
 */

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "client/bus1-client.h"
#include "time-factor.h"

#define MAX_SEEN 64

static char seen[MAX_SEEN][256];
static size_t n_seen;

static void record(const char *type, struct b1c_message *m)
{
	const char *i = b1c_message_get_interface(m);

	if (n_seen < MAX_SEEN)
		snprintf(seen[n_seen++], sizeof(seen[0]), "[\"%s\", \"%s\", \"%s\", \"%s\"]",
			 type, b1c_message_get_path(m), i ? i : "", b1c_message_get_member(m));
}

static int on_call(struct b1c_bus *bus, struct b1c_message *m, void *userdata)
{
	record("call", m);
	return b1c_bus_reply(bus, m, NULL) ?: 1;
}

static int on_signal(struct b1c_bus *bus, struct b1c_message *m, void *userdata)
{
	record("signal", m);
	return 1;
}

/*
 * No case expects a timeout: the limit (in µs) only catches a call that hangs, as in
 * lsm_peer.py: 25 s, the bus's own reply timeout, times BUS1_TIME_FACTOR.
 */
static uint64_t call_timeout(void)
{
	return 25000000ULL * test_time_factor();
}

/* Print the outcome of a call: its error's name, "reply", or why not. */
static void print_call(struct b1c_bus *bus, struct b1c_message *m, const char *prefix_ok)
{
	struct b1c_message *reply = NULL;
	int r = b1c_bus_call(bus, m, call_timeout(), &reply);
	uint32_t code = 0;

	if (r == B1C_CALL_ERROR)
		printf("{\"result\": \"%s\"}\n", b1c_message_get_error_name(reply));
	else if (r == -ETIMEDOUT)
		printf("{\"result\": \"timeout\"}\n");
	else if (r < 0)
		printf("{\"result\": \"%s\"}\n", strerror(-r));
	else if (prefix_ok && b1c_message_read(reply, "u", &code) >= 0)
		printf("{\"result\": \"%s%u\"}\n", prefix_ok, code);
	else
		printf("{\"result\": \"reply\"}\n");
	b1c_message_unref(reply);
}

static void do_command(struct b1c_bus *bus, char *line)
{
	struct b1c_message *m = NULL;
	char *argv[6] = {};
	int argc = 0;

	for (char *t = strtok(line, " \n"); t && argc < 6; t = strtok(NULL, " \n"))
		argv[argc++] = t;
	if (argc == 2 && !strcmp(argv[0], "own")) {
		if (b1c_message_new_method_call(&m, "org.freedesktop.DBus", "/org/freedesktop/DBus",
						"org.freedesktop.DBus", "RequestName", "su") < 0 ||
		    b1c_message_append(m, "su", argv[1], 4) < 0)
			exit(1);
		print_call(bus, m, "reply:");
	} else if (argc == 5 && !strcmp(argv[0], "call")) {
		if (b1c_message_new_method_call(&m, argv[1], argv[2], argv[3], argv[4], "") < 0)
			exit(1);
		print_call(bus, m, NULL);
	} else if (argc == 2 && !strcmp(argv[0], "match")) {
		int r = b1c_bus_add_match(bus, argv[1], on_signal, NULL);

		printf("{\"result\": \"%s\"}\n", r == -EACCES ? "org.freedesktop.DBus.Error.AccessDenied" :
					      r < 0 ? strerror(-r) : "reply");
	} else if (argc == 4 && !strcmp(argv[0], "emit")) {
		int r = b1c_bus_emit_signal(bus, argv[1], argv[2], argv[3], NULL);

		printf("{\"result\": \"%s\"}\n", r < 0 ? strerror(-r) : "sent");
	} else if (argc == 1 && !strcmp(argv[0], "direct")) {
		printf("{\"result\": \"%s\"}\n",
		       b1c_bus_set_direct(bus, true) < 0 ? "unavailable" : "reply");
	} else if (argc == 1 && !strcmp(argv[0], "seen")) {
		/* What the bus routed before the Ping's reply has arrived by then. */
		if (b1c_message_new_method_call(&m, "org.freedesktop.DBus", "/org/freedesktop/DBus",
						"org.freedesktop.DBus.Peer", "Ping", "") < 0)
			exit(1);
		{
			struct b1c_message *reply = NULL;

			(void)b1c_bus_call(bus, m, call_timeout(), &reply);
			b1c_message_unref(reply);
		}
		while (b1c_bus_process(bus) > 0)
			;
		printf("{\"result\": [");
		for (size_t i = 0; i < n_seen; i++)
			printf("%s%s", i ? ", " : "", seen[i]);
		printf("]}\n");
		n_seen = 0;
	} else {
		printf("{\"result\": \"unknown command\"}\n");
	}
	b1c_message_unref(m);
}

int main(int argc, char **argv)
{
	struct b1c_bus *bus = NULL;
	char line[1024];
	int r;

	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc != 2) {
		fprintf(stderr, "usage: lsm-native ADDRESS\n");
		return 2;
	}
	r = b1c_bus_open(&bus, argv[1]);
	if (r == -EACCES) {
		/* Hello refused with AccessDenied (an LSM's): as lsm_peer.py says it. */
		printf("{\"ready\": null, \"refused\": \"org.freedesktop.DBus.Error.AccessDenied\"}\n");
		return 1;
	}
	if (r < 0) {
		printf("{\"ready\": null, \"why\": \"%s\"}\n", strerror(-r));
		return 1;
	}
	if (b1c_bus_add_object(bus, NULL, on_call, NULL) < 0)
		return 1;
	printf("{\"ready\": \"%s\"}\n", b1c_bus_get_unique_name(bus));

	for (;;) {
		struct pollfd p[2] = {
			{ .fd = 0, .events = POLLIN },
			{ .fd = b1c_bus_get_fd(bus), .events = POLLIN },
		};

		while ((r = b1c_bus_process(bus)) > 0)
			;
		if (r < 0)
			break;
		if (poll(p, 2, -1) < 0 && errno != EINTR)
			break;
		if (p[0].revents) {
			if (!fgets(line, sizeof(line), stdin))
				break;
			do_command(bus, line);
		}
	}
	b1c_bus_free(bus);
	return 0;
}
