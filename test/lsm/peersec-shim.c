/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * peersec-shim.so - a test-only source of socket peer labels (LD_PRELOAD).
 *
 * Debian's kernels label no unix socket peer for AppArmor: getsockopt()
 * SO_PEERSEC fails with ENOPROTOOPT (the reason they lack the dbus feature
 * flag too). The LSM tests load this into both buses, dbus-daemon and
 * bus1-broker alike, so that SO_PEERSEC answers as a kernel with socket
 * labels would: the label of the peer process, read from
 * /proc/PID/attr/apparmor/current (or attr/current) of the SO_PEERCRED pid.
 * That is racy against a peer that changes its label or exits, which the
 * tests never do; a real kernel stamps the label at connect(). It answers
 * only where the kernel gave no label; everything else passes through.
 */

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

typedef int (*getsockopt_fn)(int, int, int, void *, socklen_t *);

/* Read the label of @pid into @buf; its length without the newline, or -1. */
static ssize_t label_of(pid_t pid, char *buf, size_t size)
{
	static const char *const files[] = { "attr/apparmor/current", "attr/current" };
	char path[64];
	ssize_t n = -1;

	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]) && n < 0; i++) {
		int fd;

		snprintf(path, sizeof(path), "/proc/%d/%s", (int)pid, files[i]);
		fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			continue;
		n = read(fd, buf, size);
		close(fd);
	}
	if (n <= 0)
		return -1;
	while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\0'))
		n--;
	return n;
}

int getsockopt(int fd, int level, int optname, void *optval, socklen_t *optlen)
{
	static getsockopt_fn real;
	struct ucred uc;
	socklen_t len = sizeof(uc);
	char label[4096];
	ssize_t n;
	int r;

	if (!real)
		real = (getsockopt_fn)dlsym(RTLD_NEXT, "getsockopt");
	r = real(fd, level, optname, optval, optlen);
	if (r == 0 || errno != ENOPROTOOPT || level != SOL_SOCKET || optname != SO_PEERSEC)
		return r;
	if (real(fd, SOL_SOCKET, SO_PEERCRED, &uc, &len) < 0 || uc.pid <= 0)
		goto fail;
	n = label_of(uc.pid, label, sizeof(label) - 1);
	if (n <= 0)
		goto fail;
	label[n++] = '\0';
	if ((size_t)n > *optlen) {
		*optlen = (socklen_t)n;
		errno = ERANGE;
		return -1;
	}
	memcpy(optval, label, (size_t)n);
	*optlen = (socklen_t)n;
	return 0;
fail:
	errno = ENOPROTOOPT;
	return -1;
}
