/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * Helpers for the differential tests that run the same operations against a
 * private dbus-daemon (through libdbus) and against broker-core. Tests exit
 * with 77 (skipped) when dbus-daemon cannot be started.
 */

#include <dbus/dbus.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>
#include "check.h"

static pid_t daemon_pid;

static void daemon_stop(void)
{
	if (daemon_pid > 0) {
		kill(daemon_pid, SIGTERM);
		waitpid(daemon_pid, NULL, 0);
		daemon_pid = 0;
	}
}

/* Start dbus-daemon --session on a private socket; returns its address. */
static char *daemon_start(void)
{
	static char addr[512];
	int fds[2];
	FILE *f;

	CHECK(pipe(fds) == 0);
	daemon_pid = fork();
	CHECK(daemon_pid >= 0);
	if (daemon_pid == 0) {
		int null = open("/dev/null", O_RDWR);

		/* Never outlive the test, even if it aborts. */
		prctl(PR_SET_PDEATHSIG, SIGTERM);
		if (null >= 0)
			dup2(null, 2);
		dup2(fds[1], 1);
		close(fds[0]);
		close(fds[1]);
		execlp("dbus-daemon", "dbus-daemon", "--session", "--nofork", "--print-address",
		       (char *)NULL);
		_exit(127);
	}
	close(fds[1]);
	f = fdopen(fds[0], "r");
	CHECK(f);
	if (!fgets(addr, sizeof(addr), f)) {
		fprintf(stderr, "dbus-daemon did not start: skipping\n");
		daemon_stop();
		exit(77);
	}
	fclose(f);
	addr[strcspn(addr, "\n")] = '\0';
	atexit(daemon_stop);
	return addr;
}

static DBusConnection *daemon_connect(const char *addr)
{
	DBusError err = DBUS_ERROR_INIT;
	DBusConnection *c = dbus_connection_open_private(addr, &err);

	CHECK(c);
	dbus_connection_set_exit_on_disconnect(c, FALSE);
	CHECK(dbus_bus_register(c, &err));
	return c;
}

/* Call a driver method with one optional string argument; returns the reply. */
static DBusMessage *driver_call(DBusConnection *c, const char *method, const char *arg,
				DBusError *err)
{
	DBusMessage *m = dbus_message_new_method_call("org.freedesktop.DBus",
						      "/org/freedesktop/DBus",
						      "org.freedesktop.DBus", method);
	DBusMessage *r;

	CHECK(m);
	if (arg)
		CHECK(dbus_message_append_args(m, DBUS_TYPE_STRING, &arg, DBUS_TYPE_INVALID));
	r = dbus_connection_send_with_reply_and_block(c, m, 10000, err);
	dbus_message_unref(m);
	return r;
}

/* A round trip to the bus: everything the bus queued for @c before is now
 * in @c's incoming queue. */
static void roundtrip(DBusConnection *c)
{
	DBusError err = DBUS_ERROR_INIT;
	DBusMessage *r = driver_call(c, "GetId", NULL, &err);

	CHECK(r);
	dbus_message_unref(r);
}

static void add_match(DBusConnection *c, const char *rule)
{
	DBusError err = DBUS_ERROR_INIT;
	DBusMessage *r = driver_call(c, "AddMatch", rule, &err);

	if (!r) {
		fprintf(stderr, "AddMatch(%s): %s\n", rule, err.message);
		CHECK(r);
	}
	dbus_message_unref(r);
}
