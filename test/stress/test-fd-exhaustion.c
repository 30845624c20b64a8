/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * fd exhaustion at accept(): the bus runs with RLIMIT_NOFILE 64 (each
 * connection costs it the socket and, on kernels with SO_PEERPIDFD, a pidfd)
 * and 100 clients connect, then 20 more once it is full: those wait in the
 * listen backlog, accept() fails with EMFILE. While it is saturated the bus must not spin (its CPU time over 2 s must
 * stay small: a loop on EMFILE would burn the whole 2 s), a client connected
 * before keeps its calls answered, and once the clients close, a new client
 * connects and says Hello.
 *
 * With SO_PEERPIDFD (Linux >= 6.5) a connection costs two fds and the bus
 * closes the one it cannot set up right after accept(); without it (run with
 * STRESS_BUS_PRELOAD=nopidfd-shim.so, as the 'fd-exhaustion-nopidfd' test
 * does) a connection costs one fd and accept() itself fails with EMFILE.
 *
 *   test-fd-exhaustion BUS_BINARY CONFIG
 */

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "stress-common.h"

#define BUS_NOFILE 64
#define N_CLIENTS 100
#define N_WAVE2 20

/* Count the bus's log lines about failed accepts and refused connections. */
static void count_log(const struct sbus *bus, int *accept_failed, int *refused)
{
	FILE *f = fopen(bus->log, "re");
	char line[512];

	*accept_failed = *refused = 0;
	if (!f)
		return;
	while (fgets(line, sizeof(line), f)) {
		*accept_failed += strstr(line, "accept failed") != NULL;
		*refused += strstr(line, "cannot set up new connection") != NULL;
	}
	fclose(f);
}

/* Make the bus hold one more fd: queue one for a client that does not read. */
static void hold_one_fd(struct rc *c, int n)
{
	struct rc *from = NULL, *to = NULL;
	size_t big = 64 * 1024;
	char *p = malloc(big + 1);
	int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	DBusMessage *m;

	CHECK(p && fd >= 0, "oom");
	for (int i = 0; i < n && !to; i++) {
		if (!c[i].name[0])
			continue;
		if (!from)
			from = &c[i];
		else
			to = &c[i];
	}
	CHECK(from && to, "two clients with names needed");
	memset(p, 'x', big);
	p[big] = '\0';
	/* 1 MiB: more than the receiver's socket buffer, less than its queue limit. */
	for (int i = 0; i < 16; i++) {
		m = dbus_message_new_method_call(to->name, "/", STRESS_IFACE, "Fill");
		dbus_message_append_args(m, DBUS_TYPE_STRING, &p, DBUS_TYPE_INVALID);
		dbus_message_set_no_reply(m, TRUE);
		CHECK(rc_send(from, m, NULL, 0), "send");
		dbus_message_unref(m);
	}
	m = dbus_message_new_method_call(to->name, "/", STRESS_IFACE, "Fd");
	dbus_message_append_args(m, DBUS_TYPE_UNIX_FD, &fd, DBUS_TYPE_INVALID);
	dbus_message_set_no_reply(m, TRUE);
	CHECK(rc_send(from, m, &fd, 1), "send fd");
	dbus_message_unref(m);
	close(fd);
	free(p);
	usleep(200000);
}

int main(int argc, char **argv)
{
	struct sbus bus;
	struct rc probe, late, *c = calloc(N_CLIENTS, sizeof(*c)), wave2[N_WAVE2];
	struct lat lat = {};
	int n_named = 0, fds_full, r, n_accept_failed, n_refused;
	double cpu0, cpu1;
	uint64_t t0, deadline;

	CHECK(c, "oom");
	raise_nofile(N_CLIENTS + N_WAVE2 + 64);
	sbus_start(&bus, argc > 1 ? argv[1] : NULL, argc > 2 ? argv[2] : NULL, BUS_NOFILE);
	rc_open(&probe, &bus, false);

	for (int i = 0; i < N_CLIENTS; i++) {
		r = rc_connect(&c[i], &bus);
		CHECK(r == 0, "connect %d: %s (the listen backlog should hold them)", i,
		      strerror(-r));
		/*
		 * Past the bus' limit the write may fail: the bus may already
		 * have accepted this connection and closed it.
		 */
		r = rc_handshake_start(&c[i], true);
		CHECK(r == 0 || r == -EPIPE || r == -ECONNRESET, "handshake %d: %s", i,
		      strerror(-r));
		if (r < 0)
			c[i].eof = true;
	}
	/* Let the bus take what it can. */
	deadline = now_usec() + 1000000;
	while (now_usec() < deadline) {
		for (int i = 0; i < N_CLIENTS; i++)
			if (!c[i].name[0] && !c[i].eof)
				rc_handshake_step(&c[i]);
		usleep(20000);
	}
	for (int i = 0; i < N_CLIENTS; i++)
		n_named += c[i].name[0] != 0;
	fds_full = proc_fd_count(bus.pid);

	/*
	 * The bus may refuse the first wave's surplus after accept() (a
	 * connection it cannot set up is closed), so it stays one fd short of
	 * its limit. Take that last fd: a client sends one to a client that
	 * does not read (after filling its socket), so the bus must keep it
	 * queued. Then a second wave stays in the backlog: accept() itself
	 * fails with EMFILE for as long as the bus is full.
	 */
	if (fds_full < BUS_NOFILE)
		hold_one_fd(c, N_CLIENTS);
	fds_full = proc_fd_count(bus.pid);
	CHECK(fds_full >= BUS_NOFILE, "the bus holds only %d fds", fds_full);
	for (int i = 0; i < N_WAVE2; i++) {
		r = rc_connect(&wave2[i], &bus);
		CHECK(r == 0, "connect wave 2, %d: %s", i, strerror(-r));
		/* May fail with EPIPE: the bus may accept and close at once. */
		rc_handshake_start(&wave2[i], false);
	}
	usleep(200000);
	if (getenv("STRESS_DEBUG")) {
		char cmd[128];

		snprintf(cmd, sizeof(cmd), "ls -l /proc/%d/fd | sed 's/.*-> //' | sort | uniq -c",
			 (int)bus.pid);
		CHECK(system(cmd) == 0, "ls");
	}

	/* Saturated: measure the bus's CPU time while a bystander keeps calling. */
	cpu0 = proc_cpu_seconds(bus.pid);
	t0 = now_usec();
	while (now_usec() - t0 < 2000000) {
		lat_add(&lat, rc_ping(&probe));
		usleep(50000);
	}
	cpu1 = proc_cpu_seconds(bus.pid);
	count_log(&bus, &n_accept_failed, &n_refused);
	printf("RLIMIT_NOFILE %d: %d of %d clients got a name, the bus holds %d fds\n",
	       BUS_NOFILE, n_named, N_CLIENTS, fds_full);
	printf("  bus CPU while saturated: %.2f s in %.2f s\n", cpu1 - cpu0,
	       (now_usec() - t0) / 1e6);
	lat_print("connected client's GetId while saturated", &lat);
	printf("  bus log: %d accept() failures, %d connections closed after accept\n",
	       n_accept_failed, n_refused);
	CHECK(n_named > 0, "no client got through");
	CHECK(n_named < N_CLIENTS, "all %d clients got through with %d fds?", N_CLIENTS,
	      BUS_NOFILE);
	CHECK(cpu1 - cpu0 < 0.5, "the bus used %.2f s of CPU in 2 s while out of fds (busy loop)",
	      cpu1 - cpu0);

	/* Recovery: the clients leave; a new one gets in. */
	for (int i = 0; i < N_CLIENTS; i++)
		rc_close(&c[i]);
	for (int i = 0; i < N_WAVE2; i++)
		rc_close(&wave2[i]);
	t0 = now_usec();
	deadline = t0 + 10000000;
	for (;;) {
		uint64_t step_deadline = now_usec() + 1000000;

		r = rc_connect(&late, &bus);
		CHECK(r == 0, "connect after recovery: %s", strerror(-r));
		/* A bus still short of fds accepts and closes: try again. */
		r = rc_handshake_start(&late, false) == 0 ? 0 : -1;
		while (r == 0 && (r = rc_handshake_step(&late)) == 0 &&
		       now_usec() < step_deadline)
			rc_fill(&late, 50);
		if (r == 1)
			break;
		rc_close(&late);
		CHECK(now_usec() < deadline, "no new client accepted 10 s after the others left");
	}
	printf("  a new client got %s %.0f ms after the others closed\n", late.name,
	       (now_usec() - t0) / 1000.0);
	rc_ping(&late);
	rc_ping(&probe);
	rc_close(&late);
	rc_close(&probe);
	sbus_stop(&bus);
	lat_free(&lat);
	free(c);
	printf("ok\n");
	return 0;
}
