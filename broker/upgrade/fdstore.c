/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Handing the bus over through systemd's fd store: see fdstore.h.
 */

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>
#include <systemd/sd-daemon.h>
#include "broker/upgrade/fdstore.h"
#include "broker/objects/journal.h"
#include "broker/objects/log.h"
#include "util/error.h"
#include "util/fd.h"
#include "util/fdpass.h"
#include "util/macro.h"

#define FDSTORE_STATE_NAME "bus1-state"
#define FDSTORE_FDS_NAME "bus1-fds"

bool fdstore_enabled(void)
{
	const char *n = getenv("FDSTORE"), *pid = getenv("SYSTEMD_EXEC_PID");

	/*
	 * Only the service's own process: a bus started by something under
	 * systemd (a test, a session) inherits $NOTIFY_SOCKET but must stop
	 * when told to.
	 */
	if (!pid || strtol(pid, NULL, 10) != (long)getpid())
		return false;
	return getenv("NOTIFY_SOCKET") && n && strtoul(n, NULL, 10) >= 2;
}

static int store(int fd, const char *name)
{
	char line[128];

	snprintf(line, sizeof(line), "FDSTORE=1\nFDPOLL=0\nFDNAME=%s", name);
	return sd_pid_notify_with_fds(0, 0, line, &fd, 1) > 0 ? 0 : -ENOTCONN;
}

static void store_remove(const char *name)
{
	char line[128];

	snprintf(line, sizeof(line), "FDSTOREREMOVE=1\nFDNAME=%s", name);
	(void)sd_notify(0, line);
}

int fdstore_hand_over(int state_fd, const int *fds, size_t n_fds)
{
	int pair[2], r = 0;

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) < 0)
		return error_origin(-errno);
	r = fdpass_send(pair[0], fds, n_fds);
	/* The reader sees the end of the stream once everything is read. */
	close(pair[0]);
	if (r == 0)
		r = store(pair[1], FDSTORE_FDS_NAME);
	if (r == 0) {
		r = store(state_fd, FDSTORE_STATE_NAME);
		if (r < 0)
			store_remove(FDSTORE_FDS_NAME);
	}
	close(pair[1]);
	return r;
}

/* ----------------------------------------------------------- taking over */

bool fdstore_carries(int fd, void *userdata)
{
	struct fdstore_carried *c = userdata;

	for (size_t i = 0; i < c->n_fds; i++)
		if (c->fds[i] == fd)
			return true;
	return false;
}

/* Above every fd in use and every number to be restored. */
static int high_water(const int32_t *numbers, size_t n, int n_passed)
{
	int h = SD_LISTEN_FDS_START + n_passed;

	for (size_t i = 0; i < n; i++)
		h = MAX(h, numbers[i] + 1);
	return h + 16;
}

static int move_above(int fd, int min)
{
	int copy = fcntl(fd, F_DUPFD_CLOEXEC, min);

	if (copy < 0)
		return -errno;
	close(fd);
	return copy;
}

void fdstore_carried_free(struct fdstore_carried *c)
{
	for (size_t i = 0; i < c->n_listen; i++) {
		close(c->listen_fds[i]);
		free(c->listen_names[i]);
	}
	free(c->listen_fds);
	free(c->listen_names);
	free(c->fds);
	for (int i = 0; i < 2; i++)
		for (int k = 0; k < 2; k++)
			if (c->journal_slots[i][k] >= 0)
				close(c->journal_slots[i][k]);
	for (size_t i = 0; i < c->n_journal_files; i++)
		if (c->journal_files[i].fd >= 0)
			close(c->journal_files[i].fd);
	free(c->journal_files);
	*c = (struct fdstore_carried)FDSTORE_CARRIED_INIT;
}


static void free_names(char **names)
{
	for (size_t i = 0; names && names[i]; i++)
		free(names[i]);
	free(names);
}

/* Each received fd at the number it had: 0 or negative errno (placed ones in @c). */
static int place(struct fdstore_carried *c, const int32_t *numbers, int *received, size_t n,
		 int high)
{
	int r = 0;

	for (size_t i = 0; i < n; i++) {
		int fd = r ? -1 : move_above(received[i], high);

		if (fd < 0) {
			close(received[i]);
			r = r ?: fd;
			received[i] = -1;
			continue;
		}
		received[i] = fd;
	}
	/* A number twice, or one of stdio: not a state of ours. */
	for (size_t i = 0; i < n && r == 0; i++) {
		int want = numbers[i];

		if (want <= STDERR_FILENO || fdstore_carries(want, c))
			r = -EBADMSG;
		else if (dup3(received[i], want, O_CLOEXEC) < 0)
			r = -errno;
		else
			c->fds[c->n_fds++] = want;
	}
	for (size_t i = 0; i < n; i++)
		if (received[i] >= 0)
			close(received[i]);
	return r;
}

/* The crash journal's entry @fd of @name: into @c, above @high; false if it is not one. */
static bool take_journal_entry(struct fdstore_carried *c, const char *name, int fd, int high)
{
	uint64_t seq;
	int slot = !strcmp(name, JOURNAL_NAME_A) ? 0 : !strcmp(name, JOURNAL_NAME_B) ? 1 : -1;

	if (slot >= 0) {
		int *v = c->journal_slots[slot];
		int moved = move_above(fd, high);

		if (moved < 0) {
			close(fd);
			return true;
		}
		if (v[0] < 0)
			v[0] = moved;
		else if (v[1] < 0)
			v[1] = moved;
		else
			close(moved);	/* a third: not a journal this bus wrote */
		return true;
	}
	if (journal_file_name(name, &seq)) {
		struct journal_file *f = reallocarray(c->journal_files, c->n_journal_files + 1,
						      sizeof(*f));

		if (!f) {
			close(fd);
			return true;
		}
		c->journal_files = f;
		/* A version 1 journal's file of a record: its clients told the end, then removed. */
		f[c->n_journal_files++] = (struct journal_file){
			.seq = seq, .fd = move_above(fd, high),
		};
		if (f[c->n_journal_files - 1].fd < 0)
			close(fd);
		return true;
	}
	return false;
}

int fdstore_take(struct fdstore_carried *c)
{
	_cleanup_free_ int32_t *numbers = NULL;
	_cleanup_free_ int *received = NULL;
	char **names = NULL;
	int n, state = -1, sock = -1, high, r;
	size_t n_received = 0;

	bool journal = false;
	uint64_t seq;

	*c = (struct fdstore_carried)FDSTORE_CARRIED_INIT;
	n = sd_listen_fds_with_names(0, &names);
	for (int i = 0; i < n; i++) {
		if (!strcmp(names[i], FDSTORE_STATE_NAME))
			state = SD_LISTEN_FDS_START + i;
		else if (!strcmp(names[i], FDSTORE_FDS_NAME))
			sock = SD_LISTEN_FDS_START + i;
		else if (!strcmp(names[i], JOURNAL_NAME_A) || !strcmp(names[i], JOURNAL_NAME_B) ||
			 journal_file_name(names[i], &seq))
			journal = true;
	}
	if (state < 0 && sock < 0 && !journal) {
		/* Nothing handed over: a .socket unit's fds stay as systemd passed them. */
		free_names(names);
		return n < 0 ? n : 0;
	}
	/* From here on the passed fds are ours; the rest go by broker_options. */
	unsetenv("LISTEN_FDS");
	unsetenv("LISTEN_PID");
	unsetenv("LISTEN_FDNAMES");
	c->listen_fds = calloc((size_t)n, sizeof(*c->listen_fds));
	c->listen_names = calloc((size_t)n, sizeof(*c->listen_names));
	r = c->listen_fds && c->listen_names ? 0 : -ENOMEM;
	if (r == 0 && (state < 0) != (sock < 0))
		r = -ENODATA;	/* half a hand-over */
	if (r == 0 && sock >= 0)
		r = fdpass_receive(sock, &numbers, &received, &n_received);
	if (r == 0 && !(c->fds = calloc(n_received ? n_received : 1, sizeof(*c->fds))))
		r = -ENOMEM;

	/* Everything out of the way of the numbers to restore. */
	high = high_water(numbers, n_received, n);
	for (int i = 0; i < n; i++) {
		int fd = SD_LISTEN_FDS_START + i;

		if (fd == state) {
			c->state_fd = move_above(fd, high);
			r = r ?: MIN(c->state_fd, 0);
		} else if (take_journal_entry(c, names[i], fd, high)) {
			continue;
		} else if (fd == sock || !c->listen_fds || !c->listen_names) {
			close(fd);
		} else {
			c->listen_fds[c->n_listen] = move_above(fd, high);
			if (c->listen_fds[c->n_listen] < 0)
				close(fd);
			else
				c->listen_names[c->n_listen++] = steal_ptr(names[i]);
		}
	}
	free_names(names);
	if (c->fds)
		r = r ?: place(c, numbers, received, n_received, high);
	else
		for (size_t i = 0; i < n_received; i++)
			close(received[i]);
	if (r) {
		log_err("fd store: cannot take the handed-over bus: %s; starting afresh",
			strerror(-r));
		fdstore_discard(c);
		return 0;
	}
	if (state >= 0)
		log_info("fd store: %zu fds taken over", c->n_fds);
	return 0;
}

/* Whether @fd is one of the .socket unit's sockets in @c: those are systemd's, never shut. */
static bool is_socket_unit_fd(const struct fdstore_carried *c, int fd)
{
	for (size_t i = 0; i < c->n_listen; i++)
		if (fd_same_file(c->listen_fds[i], fd))
			return true;
	return false;
}

void fdstore_journal_shut_fds(const struct fdstore_carried *c, int *fds, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		if (fds[i] < 0)
			continue;
		if (!is_socket_unit_fd(c, fds[i]))
			(void)shutdown(fds[i], SHUT_RDWR);
		close(fds[i]);
		fds[i] = -1;
	}
}

void fdstore_journal_shut(struct fdstore_carried *c)
{
	for (int i = 0; i < 2; i++)
		for (int k = 0; k < 2; k++) {
			int fd = c->journal_slots[i][k];
			_cleanup_free_ int32_t *numbers = NULL;
			_cleanup_free_ int *fds = NULL;
			size_t n = 0;

			if (fd < 0)
				continue;
			/* The snapshot's socket (unless journal_load() read it): the bus's files. */
			(void)fdpass_receive(fd, &numbers, &fds, &n);
			fdstore_journal_shut_fds(c, fds, n);
			close(fd);
			c->journal_slots[i][k] = -1;
		}
	for (size_t i = 0; i < c->n_journal_files; i++)
		fdstore_journal_shut_fds(c, &c->journal_files[i].fd, 1);
}

void fdstore_taken(struct fdstore_carried *c)
{
	store_remove(FDSTORE_STATE_NAME);
	store_remove(FDSTORE_FDS_NAME);
	if (c->state_fd >= 0)
		close(c->state_fd);
	c->state_fd = -1;
	/* The carried fds belong to the bus now; the .socket unit's copies go. */
	c->n_fds = 0;
	fdstore_carried_free(c);
}

void fdstore_discard(struct fdstore_carried *c)
{
	store_remove(FDSTORE_STATE_NAME);
	store_remove(FDSTORE_FDS_NAME);
	for (size_t i = 0; i < c->n_fds; i++)
		close(c->fds[i]);
	c->n_fds = 0;
	if (c->state_fd >= 0)
		close(c->state_fd);
	c->state_fd = -1;
}
