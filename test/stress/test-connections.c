/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * 10,000 simultaneous connections (as many as RLIMIT_NOFILE lets the bus
 * hold): all connect at once and do the handshake and Hello in parallel;
 * then each installs a match rule, one of them sends a broadcast signal that
 * every other must receive, each makes a driver call that must be answered;
 * the bus's memory with all of them is printed. Every phase must end within
 * 60 s (times BUS1_TIME_FACTOR): a loop that re-polls every busy connection per message it reads
 * (one sd-event source per connection) did not, at 9,800.
 * After they all close, the bus counts no connection, match or name of
 * theirs any more.
 *
 *   test-connections BUS_BINARY   (STRESS_CONNECTIONS=N to change 10000)
 */

#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "stress-common.h"
#include "time-factor.h"

static struct rc *conns;
static struct pollfd *pfds;
static size_t n_conns;

/* Poll every connection until @done(i) holds for all; @step(i) reads. */
static void drive_all(const char *what, int (*step)(size_t i), int timeout_s)
{
	uint64_t deadline = now_usec() + (uint64_t)timeout_s * test_time_factor() * 1000000;
	size_t left;

	for (;;) {
		left = 0;
		for (size_t i = 0; i < n_conns; i++) {
			int r = step(i);

			CHECK(r >= 0, "%s: connection %zu failed (eof=%d)", what, i, conns[i].eof);
			pfds[i].fd = r ? -1 : conns[i].fd;
			pfds[i].events = POLLIN;
			left += !r;
		}
		if (!left)
			return;
		CHECK(now_usec() < deadline, "%s: %zu of %zu connections not done after %d s",
		      what, left, n_conns, timeout_s);
		poll(pfds, n_conns, 100);
	}
}

static int step_handshake(size_t i)
{
	return rc_handshake_step(&conns[i]);
}

static uint32_t *pending;	/* serial each connection waits a reply for */
static bool *got;

static int step_reply(size_t i)
{
	struct rc *c = &conns[i];
	DBusMessage *m;

	if (got[i])
		return 1;
	if (rc_fill(c, 0) < 0 && !c->len)
		return -1;
	while ((m = rc_take(c))) {
		if (dbus_message_get_reply_serial(m) == pending[i]) {
			CHECK(!msg_error(m), "connection %zu got %s", i, msg_error(m));
			got[i] = true;
		}
		dbus_message_unref(m);
	}
	return got[i];
}

static int step_signal(size_t i)
{
	struct rc *c = &conns[i];
	DBusMessage *m;

	if (got[i])
		return 1;
	if (rc_fill(c, 0) < 0 && !c->len)
		return -1;
	while ((m = rc_take(c))) {
		if (dbus_message_is_signal(m, STRESS_IFACE, "Hi"))
			got[i] = true;
		dbus_message_unref(m);
	}
	return got[i];
}

int main(int argc, char **argv)
{
	const char *env = getenv("STRESS_CONNECTIONS");
	struct sbus bus;
	struct rc probe;
	long rss0, rss1, active0;
	uint64_t t0, t_hello, t_match, t_signal, t_call;
	unsigned long bus_nofile;
	DBusMessage *m;
	int r;

	n_conns = fit_connections(env ? strtoul(env, NULL, 10) : 10000, &bus_nofile);
	sbus_start(&bus, argc > 1 ? argv[1] : NULL, NULL, bus_nofile);

	rc_open(&probe, &bus, false);
	active0 = rc_bus_stat(&probe, "ActiveConnections");
	rss0 = proc_status_kb(bus.pid, "VmRSS");

	conns = calloc(n_conns, sizeof(*conns));
	pfds = calloc(n_conns, sizeof(*pfds));
	pending = calloc(n_conns, sizeof(*pending));
	got = calloc(n_conns, sizeof(*got));
	CHECK(conns && pfds && pending && got, "oom");

	/* All connect, then all authenticate and say Hello at once. */
	t0 = now_usec();
	for (size_t i = 0; i < n_conns; i++) {
		r = rc_connect(&conns[i], &bus);
		CHECK(r == 0, "connect %zu: %s", i, strerror(-r));
	}
	for (size_t i = 0; i < n_conns; i++)
		CHECK(rc_handshake_start(&conns[i], i % 2) == 0, "handshake %zu", i);
	drive_all("Hello", step_handshake, 60);
	t_hello = now_usec() - t0;
	for (size_t i = 1; i < n_conns; i++)
		CHECK(strcmp(conns[i].name, conns[i - 1].name), "duplicate unique name %s",
		      conns[i].name);

	CHECK(rc_bus_stat(&probe, "ActiveConnections") == active0 + (long)n_conns,
	      "ActiveConnections is not %ld + %zu", active0, n_conns);
	rss1 = proc_status_kb(bus.pid, "VmRSS");

	/* Every connection subscribes to one signal. */
	t0 = now_usec();
	for (size_t i = 0; i < n_conns; i++) {
		const char *rule = "type='signal',interface='" STRESS_IFACE "',member='Hi'";

		m = driver_call_new("AddMatch");
		dbus_message_append_args(m, DBUS_TYPE_STRING, &rule, DBUS_TYPE_INVALID);
		pending[i] = rc_send(&conns[i], m, NULL, 0);
		CHECK(pending[i], "send AddMatch %zu", i);
		dbus_message_unref(m);
	}
	drive_all("AddMatch", step_reply, 60);
	t_match = now_usec() - t0;

	/* One broadcast reaches all of them (the sender too: its rule matches). */
	memset(got, 0, n_conns * sizeof(*got));
	t0 = now_usec();
	m = dbus_message_new_signal("/org/bus1/Stress", STRESS_IFACE, "Hi");
	CHECK(rc_send(&conns[0], m, NULL, 0), "send signal");
	dbus_message_unref(m);
	drive_all("broadcast", step_signal, 60);
	t_signal = now_usec() - t0;

	/* And each still gets its method calls answered. */
	memset(got, 0, n_conns * sizeof(*got));
	t0 = now_usec();
	for (size_t i = 0; i < n_conns; i++) {
		const char *name = conns[(i + 1) % n_conns].name;

		m = driver_call_new("GetNameOwner");
		dbus_message_append_args(m, DBUS_TYPE_STRING, &name, DBUS_TYPE_INVALID);
		pending[i] = rc_send(&conns[i], m, NULL, 0);
		CHECK(pending[i], "send GetNameOwner %zu", i);
		dbus_message_unref(m);
	}
	drive_all("GetNameOwner", step_reply, 60);
	t_call = now_usec() - t0;

	printf("%zu connections (fd passing negotiated by half of them)\n", n_conns);
	printf("  connect+auth+Hello, all at once     %8.1f ms\n", t_hello / 1000.0);
	printf("  AddMatch on each, pipelined         %8.1f ms\n", t_match / 1000.0);
	printf("  one broadcast to %zu receivers     %8.1f ms\n", n_conns, t_signal / 1000.0);
	printf("  one driver call on each             %8.1f ms\n", t_call / 1000.0);
	printf("  bus VmRSS: %ld KiB idle, %ld KiB with %zu connections (%.1f KiB each)\n",
	       rss0, rss1, n_conns, (double)(rss1 - rss0) / (double)n_conns);
	printf("  bus VmHWM: %ld KiB\n", proc_status_kb(bus.pid, "VmHWM"));

	/* All close at once: the bus forgets them. */
	t0 = now_usec();
	for (size_t i = 0; i < n_conns; i++)
		rc_close(&conns[i]);
	for (;;) {
		long active = rc_bus_stat(&probe, "ActiveConnections");

		if (active == active0)
			break;
		CHECK(now_usec() - t0 < 30000000, "ActiveConnections %ld, not %ld, 30 s after close",
		      active, active0);
		rc_fill(&probe, 20);
	}
	printf("  all closed, bus idle again after    %8.1f ms\n", (now_usec() - t0) / 1000.0);
	CHECK(rc_bus_stat(&probe, "MatchRules") == 0, "match rules left behind");
	CHECK(rc_bus_stat(&probe, "IncompleteConnections") == 0, "incomplete connections left");
	CHECK(proc_fd_count(bus.pid) < 32, "the bus still holds %d fds", proc_fd_count(bus.pid));
	rc_ping(&probe);
	rc_close(&probe);
	sbus_stop(&bus);
	printf("ok\n");
	return 0;
}
