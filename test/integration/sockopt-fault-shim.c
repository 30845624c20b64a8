/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * sockopt-fault-shim.so - a test-only kernel that refuses optional peer
 * credentials (LD_PRELOAD), as a kernel change once made SO_PEERPIDFD fail
 * at connect and took dbus-broker's system bus down (dbus-broker #427).
 *
 * BUS1_TEST_SOCKOPT_FAIL names the options that fail, comma-separated:
 * "peersec", "peergroups", "peerpidfd". getsockopt(SOL_SOCKET, that option)
 * then fails with EACCES (no kernel says that for them, so neither bus can
 * take it for "absent"); everything else passes through. Loaded into both
 * buses, dbus-daemon and bus1-broker alike (test_sockopt_faults.py).
 */

#include <dlfcn.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

/* Linux 6.5's; Debian 12's headers are older. */
#ifndef SO_PEERPIDFD
#define SO_PEERPIDFD 77
#endif

typedef int (*getsockopt_fn)(int, int, int, void *, socklen_t *);

static int fails(int optname)
{
	static const struct {
		int optname;
		const char *name;
	} opts[] = {
		{ SO_PEERSEC, "peersec" },
		{ SO_PEERGROUPS, "peergroups" },
		{ SO_PEERPIDFD, "peerpidfd" },
	};
	const char *list = getenv("BUS1_TEST_SOCKOPT_FAIL");

	if (!list)
		return 0;
	for (size_t i = 0; i < sizeof(opts) / sizeof(opts[0]); i++) {
		size_t n = strlen(opts[i].name);
		const char *p = list;

		if (opts[i].optname != optname)
			continue;
		while ((p = strstr(p, opts[i].name))) {
			if ((p == list || p[-1] == ',') && (p[n] == ',' || p[n] == '\0'))
				return 1;
			p += n;
		}
	}
	return 0;
}

int getsockopt(int fd, int level, int optname, void *optval, socklen_t *optlen)
{
	static getsockopt_fn real;

	if (level == SOL_SOCKET && fails(optname)) {
		errno = EACCES;
		return -1;
	}
	if (!real)
		real = (getsockopt_fn)dlsym(RTLD_NEXT, "getsockopt");
	return real(fd, level, optname, optval, optlen);
}
