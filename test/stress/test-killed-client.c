/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Clients that die in the middle of a message: a child process connects,
 * says Hello, writes part of a message (a header announcing 256 KiB and part
 * of the body; in some rounds with fds attached, in some rounds only half a
 * header, in some rounds half a SASL line) and is SIGKILLed, or closes its
 * socket. Nothing may leak: afterwards the bus holds as many fds as before,
 * counts no connection of theirs, and every one that had a unique name was
 * announced gone with NameOwnerChanged. A bystander's calls keep working
 * during all of it.
 *
 *   test-killed-client BUS_BINARY CONFIG   (STRESS_KILLED_ROUNDS=N, default 200)
 */

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include "stress-common.h"

static struct sbus bus;

enum how {
	HOW_HALF_BODY,		/* header + part of the body */
	HOW_HALF_BODY_FDS,	/* the same, with 4 fds on the first byte */
	HOW_HALF_HEADER,	/* 10 bytes of a header */
	HOW_HALF_SASL,		/* no Hello: part of the AUTH line */
	_HOW_N,
};

/* The part of a message with a 256 KiB body that the child writes. */
static char *partial_message(size_t *lenp)
{
	size_t big = 256 * 1024;
	char *s = malloc(big + 1), *data = NULL, *out;
	DBusMessage *m = dbus_message_new_signal("/org/bus1/Stress", STRESS_IFACE, "Half");
	int len = 0;

	CHECK(s && m, "oom");
	memset(s, 'h', big);
	s[big] = '\0';
	dbus_message_append_args(m, DBUS_TYPE_STRING, &s, DBUS_TYPE_INVALID);
	dbus_message_set_serial(m, 7);
	CHECK(dbus_message_marshal(m, &data, &len), "marshal");
	*lenp = (size_t)len / 3;
	out = malloc(*lenp);
	CHECK(out, "oom");
	memcpy(out, data, *lenp);
	dbus_free(data);
	dbus_message_unref(m);
	free(s);
	return out;
}

/*
 * Run one dying client; returns 1 if it got a unique name. The child reports
 * through @pfd once it has written what it writes, then waits to be killed
 * (or closes its socket and exits when @kill_it is false).
 */
static int one_round(enum how how, bool kill_it, const char *part, size_t part_len)
{
	int pfd[2], status;
	char ok = 0;
	pid_t pid;

	CHECK(pipe(pfd) == 0, "pipe");
	pid = fork();
	CHECK(pid >= 0, "fork");
	if (pid == 0) {
		struct rc c;
		int fds[4];
		char named = 0;

		close(pfd[0]);
		if (how == HOW_HALF_SASL) {
			if (rc_connect(&c, &bus) < 0)
				_exit(1);
			rc_write(&c, "\0AUTH EXTER", 11, NULL, 0);
		} else {
			rc_open(&c, &bus, true);
			named = 1;
			for (int i = 0; i < 4; i++)
				fds[i] = open("/dev/null", O_RDONLY | O_CLOEXEC);
			if (how == HOW_HALF_HEADER)
				rc_write(&c, part, 10, NULL, 0);
			else
				rc_write(&c, part, part_len, fds,
					 how == HOW_HALF_BODY_FDS ? 4 : 0);
		}
		if (write(pfd[1], &named, 1) != 1)
			_exit(1);
		if (!kill_it)
			_exit(0);	/* closes the socket in the middle */
		pause();
		_exit(0);
	}
	close(pfd[1]);
	CHECK(read(pfd[0], &ok, 1) == 1, "the child did not get to write its message");
	close(pfd[0]);
	/* Let the bus take in what was written before the writer dies. */
	usleep(1000);
	if (kill_it)
		kill(pid, SIGKILL);
	CHECK(waitpid(pid, &status, 0) == pid, "waitpid");
	return ok;
}

int main(int argc, char **argv)
{
	const char *env = getenv("STRESS_KILLED_ROUNDS");
	int rounds = env ? atoi(env) : 200;
	const char *rule = "type='signal',sender='" DRIVER "',member='NameOwnerChanged'";
	struct rc by;
	struct lat lat = {};
	int fds0, fds1, named = 0, gone = 0;
	long rss0, rss_mid = 0, rss1;
	size_t part_len;
	char *part = partial_message(&part_len);
	uint64_t deadline;
	DBusMessage *r;

	sbus_start(&bus, argc > 1 ? argv[1] : NULL, argc > 2 ? argv[2] : NULL, 0);
	rc_open(&by, &bus, false);
	by.keep = true;
	r = rc_driver_call(&by, "AddMatch", rule);
	CHECK(!msg_error(r), "AddMatch: %s", msg_error(r));
	dbus_message_unref(r);
	rc_ping(&by);
	fds0 = proc_fd_count(bus.pid);
	rss0 = proc_status_kb(bus.pid, "VmRSS");

	for (int i = 0; i < rounds; i++) {
		DBusMessage *m;

		named += one_round((enum how)(i % _HOW_N), (i / _HOW_N) % 2 == 0, part, part_len);
		lat_add(&lat, rc_ping(&by));
		/* Count the names that went away (old owner set, new owner empty). */
		while ((m = rc_take(&by))) {
			const char *n, *o, *nw;

			if (dbus_message_is_signal(m, DRIVER, "NameOwnerChanged") &&
			    dbus_message_get_args(m, NULL, DBUS_TYPE_STRING, &n, DBUS_TYPE_STRING,
						  &o, DBUS_TYPE_STRING, &nw, DBUS_TYPE_INVALID) &&
			    n[0] == ':' && o[0] && !nw[0])
				gone++;
			dbus_message_unref(m);
		}
		if (i == rounds / 4)
			rss_mid = proc_status_kb(bus.pid, "VmRSS");
	}

	/* Wait for the last ones to be noticed. */
	deadline = now_usec() + 5000000;
	while (gone < named && now_usec() < deadline) {
		DBusMessage *m = rc_recv(&by, 100);
		const char *n, *o, *nw;

		if (!m)
			continue;
		if (dbus_message_is_signal(m, DRIVER, "NameOwnerChanged") &&
		    dbus_message_get_args(m, NULL, DBUS_TYPE_STRING, &n, DBUS_TYPE_STRING, &o,
					  DBUS_TYPE_STRING, &nw, DBUS_TYPE_INVALID) &&
		    n[0] == ':' && o[0] && !nw[0])
			gone++;
		dbus_message_unref(m);
	}
	deadline = now_usec() + 5000000;
	while (rc_bus_stat(&by, "ActiveConnections") != 1 ||
	       rc_bus_stat(&by, "IncompleteConnections") != 0) {
		CHECK(now_usec() < deadline, "connections left: %ld active, %ld incomplete",
		      rc_bus_stat(&by, "ActiveConnections"),
		      rc_bus_stat(&by, "IncompleteConnections"));
		usleep(10000);
	}
	fds1 = proc_fd_count(bus.pid);
	rss1 = proc_status_kb(bus.pid, "VmRSS");

	printf("%d clients died mid-message (%d after Hello, killed or closed)\n", rounds, named);
	lat_print("bystander GetId between deaths", &lat);
	printf("  NameOwnerChanged for %d of %d unique names\n", gone, named);
	printf("  bus fds %d before, %d after; VmRSS %ld KiB before, %ld KiB after %d rounds, "
	       "%ld KiB after %d\n", fds0, fds1, rss0, rss_mid, rounds / 4 + 1, rss1, rounds);
	CHECK(gone == named, "NameOwnerChanged for %d of %d dead clients", gone, named);
	CHECK(fds1 == fds0, "the bus holds %d fds, %d before", fds1, fds0);
	/* Each round's 256 KiB buffer is freed; allow allocator noise, not 150 rounds of it. */
	CHECK_MEM(rss1 - rss_mid < 8 * 1024, "the bus grew by %ld KiB in %d rounds",
	      rss1 - rss_mid, rounds - rounds / 4);
	rc_ping(&by);
	rc_close(&by);
	sbus_stop(&bus);
	free(part);
	lat_free(&lat);
	printf("ok\n");
	return 0;
}
