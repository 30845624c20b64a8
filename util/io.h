/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/**
 * DOC: Blocking I/O helpers
 *
 * For the blocking clients (the SASL client, the native client library):
 * the bus itself never blocks and uses dbus-compat/socket.h.
 */

#include <errno.h>
#include <stddef.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <unistd.h>
#include "util/error.h"

/*
 * Send all @n bytes of @p on the stream socket @fd, retrying on EINTR and
 * short writes; no SIGPIPE. Return: 0 or negative errno.
 */
static inline int io_send_all(int fd, const void *p, size_t n)
{
	const char *s = p;

	while (n) {
		ssize_t k = send(fd, s, n, MSG_NOSIGNAL);

		if (k < 0) {
			if (errno == EINTR)
				continue;
			return error_origin(-errno);
		}
		s += k;
		n -= (size_t)k;
	}
	return 0;
}

/*
 * Read exactly @n bytes from @fd, retrying on EINTR and short reads.
 * Return: 0, -ECONNRESET at end of file, or negative errno.
 */
static inline int io_read_all(int fd, void *p, size_t n)
{
	char *d = p;

	while (n) {
		ssize_t k = read(fd, d, n);

		if (k < 0) {
			if (errno == EINTR)
				continue;
			return error_origin(-errno);
		}
		if (k == 0)
			return -ECONNRESET;
		d += k;
		n -= (size_t)k;
	}
	return 0;
}
