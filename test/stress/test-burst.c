/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * A burst, then silence. The bus's connection sockets are edge-triggered
 * (broker/transport/connection.c): epoll reports new input once, and the bus must come
 * back for what it left unread. Two ways it leaves input unread, each
 * followed by a client that writes nothing more, so no new edge would wake
 * the bus:
 *
 *  - budget: 200 calls written at once, each carrying an fd, so that each is
 *    one recvmsg() for the bus (the kernel ends a read at a message with
 *    fds): more than the 16 reads a connection gets per wakeup. Every call
 *    must reach its receiver.
 *  - pause: 6000 pipelined GetId calls whose replies the client does not read
 *    at first: past 1 MiB of unread answers the bus stops reading it
 *    (PEER_ANSWER_BACKLOG). Then the client reads: the bus resumes, and
 *    every call must be answered.
 *
 *   test-burst BUS_BINARY CONFIG
 */

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>
#include "stress-common.h"
#include "time-factor.h"

#define N_FD_CALLS 200
#define N_PIPELINED 6000

static struct sbus bus;

static void burst_of_fds(void)
{
	struct rc from, to;
	uint64_t deadline;
	int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);

	CHECK(fd >= 0, "open /dev/null");
	rc_open(&from, &bus, true);
	rc_open(&to, &bus, true);
	for (int i = 0; i < N_FD_CALLS; i++) {
		DBusMessage *m = dbus_message_new_method_call(to.name, "/", STRESS_IFACE, "Fd");

		dbus_message_append_args(m, DBUS_TYPE_UNIX_FD, &fd, DBUS_TYPE_INVALID);
		dbus_message_set_no_reply(m, TRUE);
		CHECK(rc_send(&from, m, &fd, 1), "send %d", i);
		dbus_message_unref(m);
	}
	close(fd);
	/* Counted by their fds (libdbus cannot parse a message without its fds). */
	deadline = now_usec() + 10000000ULL * test_time_factor();
	while (to.n_fds_received < N_FD_CALLS && now_usec() < deadline && !to.eof)
		rc_fill(&to, 200);
	printf("budget: %zu of %d calls with an fd written at once arrived\n", to.n_fds_received,
	       N_FD_CALLS);
	CHECK(to.n_fds_received == N_FD_CALLS, "%zu of %d calls arrived: input left unread",
	      to.n_fds_received, N_FD_CALLS);
	rc_close(&from);
	rc_close(&to);
}

static void paused_then_read(void)
{
	struct rc c, probe;
	uint64_t deadline;
	size_t got = 0;
	pid_t writer;
	int status;

	rc_open(&c, &bus, false);
	/* A child writes every call (blocking when the bus stops reading); we read later. */
	writer = fork();
	CHECK(writer >= 0, "fork");
	if (writer == 0) {
		for (int i = 0; i < N_PIPELINED; i++) {
			DBusMessage *m = driver_call_new("GetId");

			if (!rc_send(&c, m, NULL, 0))
				_exit(1);
			dbus_message_unref(m);
		}
		_exit(0);
	}
	/* Its answers are not read: the bus stops reading it. */
	rc_open(&probe, &bus, false);
	deadline = now_usec() + 10000000ULL * test_time_factor();
	while (rc_conn_stat(&probe, c.name, "InputPaused") != 1) {
		CHECK(now_usec() < deadline, "the bus never paused a client with %d unread answers",
		      N_PIPELINED);
		usleep(20000);
	}
	rc_close(&probe);
	deadline = now_usec() + 20000000ULL * test_time_factor();
	while (got < N_PIPELINED && now_usec() < deadline) {
		DBusMessage *m = rc_recv(&c, 200);

		if (!m)
			continue;
		if (dbus_message_get_type(m) == DBUS_MESSAGE_TYPE_METHOD_RETURN)
			got++;
		else if (dbus_message_get_type(m) == DBUS_MESSAGE_TYPE_ERROR)
			CHECK(0, "GetId failed: %s", msg_error(m));
		dbus_message_unref(m);
	}
	CHECK(waitpid(writer, &status, 0) == writer, "waitpid");
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the writer failed");
	printf("pause: %zu of %d pipelined calls answered after the client read again\n", got,
	       N_PIPELINED);
	CHECK(got == N_PIPELINED, "%zu of %d answered: input left unread after the pause", got,
	      N_PIPELINED);
	rc_close(&c);
}

int main(int argc, char **argv)
{
	sbus_start(&bus, argc > 1 ? argv[1] : NULL, argc > 2 ? argv[2] : NULL, 0);
	burst_of_fds();
	paused_then_read();
	sbus_stop(&bus);
	printf("ok\n");
	return 0;
}
