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
#include <unistd.h>
#include <systemd/sd-daemon.h>
#include "broker/upgrade/fdstore.h"
#include "broker/objects/log.h"
#include "util/error.h"
#include "util/macro.h"

#define FDSTORE_STATE_NAME "bus1-state"
#define FDSTORE_FDS_NAME "bus1-fds"

/* SCM_MAX_FD: the most fds one message carries. */
#define FDSTORE_BATCH 253

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

/* One message: the numbers of @n fds as data, the fds themselves as SCM_RIGHTS. */
static int send_batch(int sock, const int *fds, size_t n)
{
	union {
		struct cmsghdr hdr;
		char buf[CMSG_SPACE(sizeof(int) * FDSTORE_BATCH)];
	} control = {};
	int32_t numbers[FDSTORE_BATCH];
	struct iovec iov = { .iov_base = numbers, .iov_len = n * sizeof(int32_t) };
	struct msghdr mh = {
		.msg_iov = &iov,
		.msg_iovlen = 1,
		.msg_control = control.buf,
		.msg_controllen = CMSG_SPACE(sizeof(int) * n),
	};
	struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
	ssize_t k;

	for (size_t i = 0; i < n; i++)
		numbers[i] = fds[i];
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int) * n);
	memcpy(CMSG_DATA(c), fds, sizeof(int) * n);
	do {
		k = sendmsg(sock, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
	} while (k < 0 && errno == EINTR);
	if (k < 0)
		return error_origin(errno == EAGAIN ? -ENOBUFS : -errno);
	/* A stream socket takes a small message whole, or nothing. */
	return (size_t)k == iov.iov_len ? 0 : -EIO;
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
	for (size_t i = 0; i < n_fds && r == 0; i += FDSTORE_BATCH)
		r = send_batch(pair[0], fds + i, MIN(n_fds - i, (size_t)FDSTORE_BATCH));
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

/*
 * Read the whole socket: numbers and fds, in pairs. Appends to *@numbersp /
 * *@fdsp. Return 0 or negative errno (what was read is still in the arrays).
 */
static int receive_all(int sock, int32_t **numbersp, int **fdsp, size_t *np)
{
	for (;;) {
		union {
			struct cmsghdr hdr;
			char buf[CMSG_SPACE(sizeof(int) * FDSTORE_BATCH)];
		} control;
		int32_t numbers[FDSTORE_BATCH];
		struct iovec iov = { .iov_base = numbers, .iov_len = sizeof(numbers) };
		struct msghdr mh = {
			.msg_iov = &iov,
			.msg_iovlen = 1,
			.msg_control = control.buf,
			.msg_controllen = sizeof(control.buf),
		};
		struct cmsghdr *cm;
		size_t n_numbers, n_fds = 0;
		const int *got = NULL;
		ssize_t k;

		do {
			k = recvmsg(sock, &mh, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
		} while (k < 0 && errno == EINTR);
		if (k < 0)
			return -errno;
		if (k == 0)
			return 0;
		for (cm = CMSG_FIRSTHDR(&mh); cm; cm = CMSG_NXTHDR(&mh, cm)) {
			if (cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS) {
				got = (const int *)CMSG_DATA(cm);
				n_fds = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
			}
		}
		n_numbers = (size_t)k / sizeof(int32_t);
		if (n_fds) {
			int32_t *nv = realloc(*numbersp, (*np + n_fds) * sizeof(*nv));
			int *fv = nv ? realloc(*fdsp, (*np + n_fds) * sizeof(*fv)) : NULL;

			if (nv)
				*numbersp = nv;
			if (fv)
				*fdsp = fv;
			if (!nv || !fv) {
				for (size_t i = 0; i < n_fds; i++)
					close(got[i]);
				return -ENOMEM;
			}
			for (size_t i = 0; i < n_fds; i++) {
				(*numbersp)[*np] = i < n_numbers ? numbers[i] : -1;
				(*fdsp)[(*np)++] = got[i];
			}
		}
		/* Each message is whole; a torn one or lost fds: unusable. */
		if ((size_t)k % sizeof(int32_t) || n_numbers != n_fds || (mh.msg_flags & MSG_CTRUNC))
			return -EBADMSG;
	}
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
	*c = (struct fdstore_carried){ .state_fd = -1 };
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

int fdstore_take(struct fdstore_carried *c)
{
	_cleanup_free_ int32_t *numbers = NULL;
	_cleanup_free_ int *received = NULL;
	char **names = NULL;
	int n, state = -1, sock = -1, high, r;
	size_t n_received = 0;

	*c = (struct fdstore_carried){ .state_fd = -1 };
	n = sd_listen_fds_with_names(0, &names);
	for (int i = 0; i < n; i++) {
		if (!strcmp(names[i], FDSTORE_STATE_NAME))
			state = SD_LISTEN_FDS_START + i;
		else if (!strcmp(names[i], FDSTORE_FDS_NAME))
			sock = SD_LISTEN_FDS_START + i;
	}
	if (state < 0 && sock < 0) {
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
	if (r == 0 && (state < 0 || sock < 0))
		r = -ENODATA;	/* half a hand-over */
	if (r == 0)
		r = receive_all(sock, &numbers, &received, &n_received);
	if (r == 0 && !(c->fds = calloc(n_received ? n_received : 1, sizeof(*c->fds))))
		r = -ENOMEM;

	/* Everything out of the way of the numbers to restore. */
	high = high_water(numbers, n_received, n);
	for (int i = 0; i < n; i++) {
		int fd = SD_LISTEN_FDS_START + i;

		if (fd == state) {
			c->state_fd = move_above(fd, high);
			r = r ?: MIN(c->state_fd, 0);
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
	log_info("fd store: %zu fds taken over", c->n_fds);
	return 0;
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
