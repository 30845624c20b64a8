/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * LD_PRELOAD shim for test-fd-exhaustion: getsockopt(SO_PEERPIDFD) fails with
 * ENOPROTOOPT, as on kernels before 6.5. A connection then costs the bus one
 * fd, not two, and the bus reaches its RLIMIT_NOFILE in accept() itself.
 */

#include <dlfcn.h>
#include <errno.h>
#include <sys/socket.h>

#ifndef SO_PEERPIDFD
#define SO_PEERPIDFD 77
#endif

int getsockopt(int fd, int level, int name, void *val, socklen_t *len)
{
	static int (*real)(int, int, int, void *, socklen_t *);

	if (level == SOL_SOCKET && name == SO_PEERPIDFD) {
		errno = ENOPROTOOPT;
		return -1;
	}
	if (!real)
		real = (int (*)(int, int, int, void *, socklen_t *))dlsym(RTLD_NEXT, "getsockopt");
	return real(fd, level, name, val, len);
}
