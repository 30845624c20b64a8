/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Flooders: one client sends method calls (1 KiB, NO_REPLY_EXPECTED) at
 * another client as fast as it can, another pipelines driver calls as fast as
 * it can (reading its replies). Meanwhile a bystander's round trips to the
 * driver and to an echo peer must all be answered (within 2 s each; the
 * figures, idle vs under flood, are printed), the receiver of the flood keeps
 * getting it, and the bus's memory stays within what its queue limits allow.
 *
 *   test-flood BUS_BINARY CONFIG   (STRESS_FLOOD_SECONDS=N, default 3)
 */

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include "stress-common.h"

#define CALL_TIMEOUT_MS 2000

static struct sbus bus;

static uint64_t driver_ping(struct rc *c)
{
	uint64_t t0 = now_usec();
	DBusMessage *r = rc_call(c, driver_call_new("GetId"), CALL_TIMEOUT_MS);

	CHECK(!msg_error(r), "GetId failed: %s", msg_error(r));
	dbus_message_unref(r);
	return now_usec() - t0;
}

/*
 * A client that reads and drops everything; exits 0 on SIGTERM, 1 if
 * disconnected, 2 if it got less than 1000 KiB (1000 of the flood's calls).
 */
static volatile sig_atomic_t sink_stop;

static void on_term(int sig)
{
	sink_stop = 1;
}

static pid_t fork_sink(struct rc *c)
{
	pid_t pid = fork();
	uint64_t got = 0;

	CHECK(pid >= 0, "fork");
	if (pid > 0) {
		stress_track_child(pid);
		return pid;
	}
	signal(SIGTERM, on_term);
	while (!sink_stop && !c->eof) {
		rc_fill(c, 100);
		got += c->len;
		c->len = 0;
	}
	printf("  bytes delivered to the flood's receiver: %llu\n", (unsigned long long)got);
	fflush(stdout);
	_exit(c->eof ? 1 : got < 1000 * 1024 ? 2 : 0);
}

/* Flood NO_REPLY_EXPECTED calls at @dest; never read. */
static pid_t fork_call_flooder(struct rc *c, const char *dest)
{
	pid_t pid = fork();
	char payload[1024];
	const char *p = payload;
	DBusMessage *m;
	char *data = NULL;
	int len = 0;

	CHECK(pid >= 0, "fork");
	if (pid > 0) {
		stress_track_child(pid);
		return pid;
	}
	memset(payload, 'f', sizeof(payload) - 1);
	payload[sizeof(payload) - 1] = '\0';
	m = dbus_message_new_method_call(dest, "/", STRESS_IFACE, "Flood");
	dbus_message_append_args(m, DBUS_TYPE_STRING, &p, DBUS_TYPE_INVALID);
	dbus_message_set_no_reply(m, TRUE);
	for (;;) {
		/* The serial does not matter for calls without replies; reuse one blob. */
		dbus_message_set_serial(m, ++c->serial ? c->serial : ++c->serial);
		if (!data)
			CHECK(dbus_message_marshal(m, &data, &len), "marshal");
		if (rc_write(c, data, (size_t)len, NULL, 0) < 0)
			_exit(1);
	}
}

/* Pipeline driver calls, reading replies as they come. */
static pid_t fork_driver_flooder(struct rc *c)
{
	pid_t pid = fork();

	CHECK(pid >= 0, "fork");
	if (pid > 0) {
		stress_track_child(pid);
		return pid;
	}
	for (;;) {
		for (int i = 0; i < 64; i++) {
			DBusMessage *m = driver_call_new("ListNames");

			if (!rc_send(c, m, NULL, 0))
				_exit(1);
			dbus_message_unref(m);
		}
		while (rc_fill(c, 0) > 0)
			c->len = 0;
		if (c->eof)
			_exit(1);
	}
}

static void measure(struct rc *by, const char *peer, struct lat *drv, struct lat *echo,
		    uint64_t usec, long *peak_rss)
{
	uint64_t end = now_usec() + usec;

	while (now_usec() < end) {
		long rss;

		lat_add(drv, driver_ping(by));
		lat_add(echo, rc_echo_call(by, peer, CALL_TIMEOUT_MS));
		rss = proc_status_kb(bus.pid, "VmRSS");
		if (rss > *peak_rss)
			*peak_rss = rss;
		usleep(2000);
	}
}

int main(int argc, char **argv)
{
	const char *env = getenv("STRESS_FLOOD_SECONDS");
	uint64_t seconds = env ? strtoul(env, NULL, 10) : 3;
	struct rc by, echo, sink, fl1, fl2;
	struct lat idle_drv = {}, idle_echo = {}, fl_drv = {}, fl_echo = {};
	long rss_idle, peak_idle = 0, peak_flood = 0, hwm;
	double cpu0, cpu1;
	pid_t sink_pid, f1, f2;
	int status;
	char echo_name[64], sink_name[64];

	sbus_start(&bus, argc > 1 ? argv[1] : NULL, argc > 2 ? argv[2] : NULL, 0);
	rc_open(&by, &bus, false);
	rc_open(&echo, &bus, false);
	rc_open(&sink, &bus, false);
	rc_open(&fl1, &bus, false);
	rc_open(&fl2, &bus, false);
	snprintf(echo_name, sizeof(echo_name), "%s", echo.name);
	snprintf(sink_name, sizeof(sink_name), "%s", sink.name);
	fork_echo_peer(&echo);
	sink_pid = fork_sink(&sink);
	rc_close(&echo);
	rc_close(&sink);

	rss_idle = proc_status_kb(bus.pid, "VmRSS");
	measure(&by, echo_name, &idle_drv, &idle_echo, 1000000, &peak_idle);

	cpu0 = proc_cpu_seconds(bus.pid);
	f1 = fork_call_flooder(&fl1, sink_name);
	f2 = fork_driver_flooder(&fl2);
	/* The children own these connections now. */
	rc_close(&fl1);
	rc_close(&fl2);
	usleep(200000);
	measure(&by, echo_name, &fl_drv, &fl_echo, seconds * 1000000, &peak_flood);
	cpu1 = proc_cpu_seconds(bus.pid);
	hwm = proc_status_kb(bus.pid, "VmHWM");

	/* The flooders were never cut off, and the flood reached its target. */
	CHECK(waitpid(f1, &status, WNOHANG) == 0, "the call flooder died (disconnected?)");
	CHECK(waitpid(f2, &status, WNOHANG) == 0, "the driver flooder died (disconnected?)");
	kill(f1, SIGKILL);
	kill(f2, SIGKILL);
	CHECK(rc_name_has_owner(&by, sink_name), "the flood's receiver was disconnected");
	kill(sink_pid, SIGTERM);
	/* (Debug.Stats' OutgoingMessages is the queue now, as in dbus-daemon: the sink counts.) */
	CHECK(waitpid(sink_pid, &status, 0) == sink_pid && WIFEXITED(status) &&
	      WEXITSTATUS(status) == 0, "the flood's receiver %s",
	      WIFEXITED(status) && WEXITSTATUS(status) == 2 ? "got less than 1000 messages" :
	      "saw its connection close");

	printf("flood: 1 KiB no-reply calls at a reading client + pipelined ListNames, %llu s\n",
	       (unsigned long long)seconds);
	lat_print("bystander GetId, idle", &idle_drv);
	lat_print("bystander GetId, under flood", &fl_drv);
	lat_print("bystander call to echo peer, idle", &idle_echo);
	lat_print("bystander call to echo peer, under flood", &fl_echo);
	printf("  bus VmRSS idle %ld KiB, peak sampled under flood %ld KiB, VmHWM %ld KiB\n",
	       rss_idle, peak_flood, hwm);
	printf("  bus CPU under flood: %.2f s in %.1f s\n", cpu1 - cpu0,
	       (double)seconds + 0.2);

	/*
	 * Bound: every connection's output queue is limited to max_outgoing_bytes
	 * (8 MiB in stress.conf) and the bus reads at most a bounded batch per
	 * wakeup; six connections can hold at most 48 MiB, plus slack.
	 */
	CHECK_MEM(hwm < rss_idle + 64 * 1024, "the bus grew to %ld KiB under flood", hwm);
	driver_ping(&by);
	rc_close(&by);
	sbus_stop(&bus);
	lat_free(&idle_drv);
	lat_free(&idle_echo);
	lat_free(&fl_drv);
	lat_free(&fl_echo);
	printf("ok\n");
	return 0;
}
