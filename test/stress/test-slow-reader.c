/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Clients that never read their socket (docs/bus1-broker.1, LIMITS AND
 * ACCOUNTING: a connection's output queue is bounded by max_outgoing_bytes,
 * 8 MiB in stress.conf; a signal that does not fit disconnects the receiver,
 * a method call that does not fit fails with LimitsExceeded to its caller):
 *
 *  1. A non-reader subscribed to a signal that another client broadcasts
 *     (32 KiB each, 20 MiB in all): the non-reader is disconnected, a reading
 *     subscriber gets every signal, the bus's memory stays bounded.
 *  2. Method calls (64 KiB each) at a non-reader: the caller gets
 *     LimitsExceeded once the queue is full, the non-reader stays connected;
 *     when it leaves, every call that was queued gets NoReply (none lost).
 *
 * A bystander's driver round trips are timed idle and during both.
 *
 *   test-slow-reader BUS_BINARY CONFIG
 */

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>
#include "stress-common.h"

#define N_SIGNALS 640
#define SIGNAL_SIZE (32 * 1024)
#define N_CALLS 300
#define CALL_SIZE (64 * 1024)
#define QUEUE_LIMIT (8 * 1024 * 1024)	/* max_outgoing_bytes of stress.conf */

static struct sbus bus;

static void add_match(struct rc *c, const char *rule)
{
	DBusMessage *r = rc_driver_call(c, "AddMatch", rule);

	CHECK(!msg_error(r), "AddMatch: %s", msg_error(r));
	dbus_message_unref(r);
}

static char *payload(size_t n, char ch)
{
	char *p = malloc(n + 1);

	CHECK(p, "oom");
	memset(p, ch, n);
	p[n] = '\0';
	return p;
}

/* Flood signals the reader has taken so far (shared with the forked reader). */
static volatile uint32_t *reader_progress;

/*
 * Count Flood signals until Done; write the count to @fd. The count is also
 * published in *reader_progress, so that the sender does not outrun this
 * reader by more than its queue limit (it would rightly be cut off too).
 */
static pid_t fork_reader(struct rc *c, int fd)
{
	pid_t pid = fork();
	uint32_t n = 0;

	CHECK(pid >= 0, "fork");
	if (pid > 0) {
		stress_track_child(pid);
		return pid;
	}
	for (;;) {
		DBusMessage *m = rc_recv(c, 30000);

		if (!m)
			_exit(1);
		if (dbus_message_is_signal(m, STRESS_IFACE, "Flood"))
			*reader_progress = ++n;
		if (dbus_message_is_signal(m, STRESS_IFACE, "Done")) {
			if (write(fd, &n, sizeof(n)) != sizeof(n))
				_exit(1);
			_exit(0);
		}
		dbus_message_unref(m);
	}
}

static void signals_to_non_reader(struct rc *by)
{
	const char *rule = "type='signal',interface='" STRESS_IFACE "'";
	struct rc nr, reader, sender;
	struct lat lat = {};
	char *p = payload(SIGNAL_SIZE, 's');
	char nr_name[64];
	long rss0, hwm;
	uint32_t count = 0;
	uint64_t t0;
	int pfd[2], status;
	pid_t pid;

	rss0 = proc_status_kb(bus.pid, "VmRSS");
	rc_open(&nr, &bus, false);
	add_match(&nr, rule);
	snprintf(nr_name, sizeof(nr_name), "%s", nr.name);
	rc_open(&reader, &bus, false);
	add_match(&reader, rule);
	CHECK(pipe(pfd) == 0, "pipe");
	reader_progress = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
			       -1, 0);
	CHECK(reader_progress != MAP_FAILED, "mmap");
	pid = fork_reader(&reader, pfd[1]);
	close(pfd[1]);
	rc_close(&reader);
	rc_open(&sender, &bus, false);

	t0 = now_usec();
	for (int i = 0; i < N_SIGNALS; i++) {
		DBusMessage *m = dbus_message_new_signal("/org/bus1/Stress", STRESS_IFACE, "Flood");

		dbus_message_append_args(m, DBUS_TYPE_STRING, &p, DBUS_TYPE_INVALID);
		CHECK(rc_send(&sender, m, NULL, 0), "the sender was cut off at signal %d", i);
		dbus_message_unref(m);
		if (i % 8 == 0)
			lat_add(&lat, rc_ping(by));
		/* Stay within 4 MiB of the reader (half its queue limit). */
		while ((uint32_t)i + 1 - *reader_progress > QUEUE_LIMIT / 2 / SIGNAL_SIZE) {
			CHECK(waitpid(pid, &status, WNOHANG) == 0, "the reader died");
			usleep(1000);
		}
	}
	{
		DBusMessage *m = dbus_message_new_signal("/org/bus1/Stress", STRESS_IFACE, "Done");

		CHECK(rc_send(&sender, m, NULL, 0), "send Done");
		dbus_message_unref(m);
	}
	CHECK(read(pfd[0], &count, sizeof(count)) == sizeof(count), "the reader did not report");
	CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && !WEXITSTATUS(status),
	      "the reader failed");
	printf("signals: %d x %d KiB broadcast to a reader and a non-reader in %.0f ms\n",
	       N_SIGNALS, SIGNAL_SIZE / 1024, (now_usec() - t0) / 1000.0);
	CHECK(count == N_SIGNALS, "the reading subscriber got %u of %d signals", count,
	      N_SIGNALS);

	/* The non-reader was cut off: the bus forgot it and closed its socket. */
	CHECK(!rc_name_has_owner(by, nr_name), "the non-reader %s is still connected", nr_name);
	CHECK(rc_wait_closed(&nr, 5000), "the non-reader's socket was not closed");
	hwm = proc_status_kb(bus.pid, "VmHWM");
	lat_print("bystander GetId while signals pile up", &lat);
	printf("  bus VmRSS before %ld KiB, VmHWM %ld KiB (queue limit %d KiB per connection)\n",
	       rss0, hwm, QUEUE_LIMIT / 1024);
	/* Queued for the non-reader and the reader at most, plus buffers. */
	CHECK_MEM(hwm < rss0 + 3 * QUEUE_LIMIT / 1024 + 16 * 1024, "the bus grew to %ld KiB", hwm);

	rc_close(&nr);
	rc_close(&sender);
	close(pfd[0]);
	munmap((void *)reader_progress, 4096);
	lat_free(&lat);
	free(p);
}

static void calls_to_non_reader(struct rc *by)
{
	struct rc nr, caller;
	struct lat lat = {};
	char *p = payload(CALL_SIZE, 'c');
	char nr_name[64];
	unsigned int n_limits = 0, n_noreply = 0, n_other = 0, accepted;
	uint64_t deadline;
	long hwm0 = proc_status_kb(bus.pid, "VmHWM"), hwm;

	rc_open(&nr, &bus, false);
	snprintf(nr_name, sizeof(nr_name), "%s", nr.name);
	rc_open(&caller, &bus, false);

	for (int i = 0; i < N_CALLS; i++) {
		DBusMessage *m = dbus_message_new_method_call(nr_name, "/", STRESS_IFACE, "Big");
		DBusMessage *r;

		dbus_message_append_args(m, DBUS_TYPE_STRING, &p, DBUS_TYPE_INVALID);
		CHECK(rc_send(&caller, m, NULL, 0), "the caller was cut off at call %d", i);
		dbus_message_unref(m);
		while (rc_fill(&caller, 0) > 0)
			;
		while ((r = rc_take(&caller))) {
			const char *e = msg_error(r);

			if (e && !strcmp(e, DBUS_ERROR_LIMITS_EXCEEDED))
				n_limits++;
			else if (dbus_message_get_reply_serial(r))
				n_other++;
			dbus_message_unref(r);
		}
		if (i % 8 == 0)
			lat_add(&lat, rc_ping(by));
	}
	/* Let the last refusals arrive. */
	deadline = now_usec() + 1000000;
	while (now_usec() < deadline) {
		DBusMessage *r = rc_recv(&caller, 100);

		if (!r)
			continue;
		if (msg_error(r) && !strcmp(msg_error(r), DBUS_ERROR_LIMITS_EXCEEDED))
			n_limits++;
		else if (dbus_message_get_reply_serial(r))
			n_other++;
		dbus_message_unref(r);
	}
	hwm = proc_status_kb(bus.pid, "VmHWM");
	printf("calls: %d x %d KiB at a non-reader: %u refused with LimitsExceeded\n",
	       N_CALLS, CALL_SIZE / 1024, n_limits);
	lat_print("bystander GetId while calls pile up", &lat);
	printf("  bus VmHWM %ld KiB (was %ld KiB)\n", hwm, hwm0);
	CHECK(n_other == 0, "%u unexpected replies", n_other);
	CHECK(n_limits > 0, "no LimitsExceeded after %d KiB queued for a non-reader",
	      N_CALLS * CALL_SIZE / 1024);
	CHECK(rc_name_has_owner(by, nr_name), "the non-reader was disconnected for calls");

	/* The callee goes: every queued call gets NoReply. */
	accepted = N_CALLS - n_limits;
	rc_close(&nr);
	deadline = now_usec() + 10000000;
	while (n_noreply < accepted && now_usec() < deadline) {
		DBusMessage *r = rc_recv(&caller, 100);

		if (!r)
			continue;
		if (msg_error(r) && !strcmp(msg_error(r), DBUS_ERROR_NO_REPLY))
			n_noreply++;
		dbus_message_unref(r);
	}
	printf("  callee closed: %u NoReply for %u queued calls\n", n_noreply, accepted);
	CHECK(n_noreply == accepted, "%u NoReply for %u calls", n_noreply, accepted);
	rc_close(&caller);
	lat_free(&lat);
	free(p);
}

int main(int argc, char **argv)
{
	struct rc by;
	struct lat idle = {};

	sbus_start(&bus, argc > 1 ? argv[1] : NULL, argc > 2 ? argv[2] : NULL, 0);
	rc_open(&by, &bus, false);
	for (int i = 0; i < 200; i++)
		lat_add(&idle, rc_ping(&by));
	lat_print("bystander GetId, idle", &idle);

	signals_to_non_reader(&by);
	calls_to_non_reader(&by);

	CHECK(rc_bus_stat(&by, "ActiveConnections") == 1, "connections left behind");
	rc_close(&by);
	sbus_stop(&bus);
	lat_free(&idle);
	printf("ok\n");
	return 0;
}
