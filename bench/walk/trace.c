/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The walk of a message: a tracer for -finstrument-functions that records
 * every function entry and exit while on (SIGWINCH toggles it) into $WALK_OUT.
 * Not part of the bus; see bench/walk/README.md.
 */
#define _GNU_SOURCE
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <fcntl.h>

#define NI __attribute__((no_instrument_function))
static volatile sig_atomic_t on;
static uintptr_t buf[1 << 16];
static size_t n;
static int fd = -1;

NI static void flush(void)
{
	if (fd >= 0 && n)
		(void)!write(fd, buf, n * sizeof(buf[0]));
	n = 0;
}

NI static void toggle(int sig)
{
	(void)sig;
	on = !on;
	if (!on)
		flush();
}

NI __attribute__((constructor)) static void init(void)
{
	const char *p = getenv("WALK_OUT");
	if (!p)
		return;
	fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	signal(SIGWINCH, toggle);
	atexit(flush);
}

NI static void rec(uintptr_t v)
{
	if (!on)
		return;
	buf[n++] = v;
	if (n == sizeof(buf) / sizeof(buf[0]))
		flush();
}

NI void __cyg_profile_func_enter(void *fn, void *site)
{
	(void)site;
	rec((uintptr_t)fn);
}

NI void __cyg_profile_func_exit(void *fn, void *site)
{
	(void)site;
	rec((uintptr_t)fn | 1);
}
