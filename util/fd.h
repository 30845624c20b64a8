/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/**
 * DOC: Taking an fd into the event loop
 *
 * The bus runs one loop that must never block: every fd it watches is
 * read, written or accepted from until EAGAIN. An fd the bus did not open
 * itself arrives in whatever mode its last holder left it. systemd clears
 * O_NONBLOCK and FD_CLOEXEC on every socket of a .socket unit before it
 * starts the service (NonBlocking=no, the default), and that is the same
 * open file the previous bus process put into the fd store: the mode is a
 * property of the shared file, not of one process' descriptor, so a
 * listening socket that was non-blocking when handed over comes back
 * blocking. The next accept() past the last pending client then sleeps, and
 * with it the whole bus, SIGTERM included.
 *
 * So every fd that enters the loop from outside (LISTEN_FDS, the fd store,
 * a re-exec) goes through fd_prepare_for_loop() first, whatever state it is
 * in; fds the bus creates itself are created with SOCK_NONBLOCK /
 * O_NONBLOCK and *_CLOEXEC.
 */

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdlib.h>
#include <sys/stat.h>

/*
 * Put @fd into the mode the loop needs: O_NONBLOCK (a read, write or accept
 * with nothing to do returns EAGAIN) and FD_CLOEXEC (activated services and
 * helpers never inherit the bus' sockets). Flags already set are not set
 * again. Return: 0 or negative errno (e.g. -EBADF: no such fd).
 */
static inline int fd_prepare_for_loop(int fd)
{
	int fl = fcntl(fd, F_GETFL);
	int fdfl;

	if (fl < 0)
		return -errno;
	if (!(fl & O_NONBLOCK) && fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0)
		return -errno;
	fdfl = fcntl(fd, F_GETFD);
	if (fdfl < 0)
		return -errno;
	if (!(fdfl & FD_CLOEXEC) && fcntl(fd, F_SETFD, fdfl | FD_CLOEXEC) < 0)
		return -errno;
	return 0;
}

/*
 * Append @fd to the growing array *@fdsp of *@np (capacity *@capp).
 * Return 0 or -ENOMEM (the array unchanged).
 */
static inline int fd_array_add(int **fdsp, size_t *np, size_t *capp, int fd)
{
	if (*np == *capp) {
		size_t cap = *capp ? *capp * 2 : 64;
		int *v = reallocarray(*fdsp, cap, sizeof(*v));

		if (!v)
			return -ENOMEM;
		*fdsp = v;
		*capp = cap;
	}
	(*fdsp)[(*np)++] = fd;
	return 0;
}

/* Whether @a and @b are the same file (the same open file or not): st_dev and st_ino. */
static inline bool fd_same_file(int a, int b)
{
	struct stat sa, sb;

	return fstat(a, &sa) == 0 && fstat(b, &sb) == 0 && sa.st_dev == sb.st_dev &&
	       sa.st_ino == sb.st_ino;
}
