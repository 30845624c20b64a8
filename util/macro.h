/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/**
 * DOC: Common macros
 *
 * Small helpers used everywhere in userspace: container_of, array sizes,
 * alignment and the __attribute__((cleanup)) helpers that give every object a
 * single owner. A function that allocates with _cleanup_(x_freep) hands
 * ownership out with steal_ptr() / steal_fd().
 */

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#define _cleanup_(f) __attribute__((cleanup(f)))
#define _public_ __attribute__((visibility("default")))
#define _unused_ __attribute__((unused))
#define _likely_(x) __builtin_expect(!!(x), 1)
#define _unlikely_(x) __builtin_expect(!!(x), 0)
#define _printf_(a, b) __attribute__((format(printf, a, b)))
#define _warn_unused_result_ __attribute__((warn_unused_result))

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

#define container_of(ptr, type, member)                                        \
	((type *)((char *)(ptr) - offsetof(type, member)))

#define ALIGN_TO(x, a) (((x) + ((a) - 1)) & ~((__typeof__(x))(a) - 1))

#define MIN(a, b) ((a) < (b) ? (a) : (b))
#define MAX(a, b) ((a) > (b) ? (a) : (b))

/* Define a cleanup helper for a free function that takes a pointer. */
#define DEFINE_CLEANUP_FUNC(type, func)                                        \
	static inline void func##p(type *p)                                    \
	{                                                                      \
		if (*p)                                                        \
			func(*p);                                              \
	}

static inline void freep(void *p)
{
	free(*(void **)p);
}
#define _cleanup_free_ _cleanup_(freep)

static inline void closep(int *fd)
{
	if (*fd >= 0) {
		int saved = errno;
		close(*fd);
		errno = saved;
	}
}
#define _cleanup_close_ _cleanup_(closep)

/* Take ownership of a pointer out of a _cleanup_ variable. */
#define steal_ptr(p)                                                           \
	({                                                                     \
		__typeof__(p) _tmp = (p);                                      \
		(p) = NULL;                                                    \
		_tmp;                                                          \
	})

static inline int steal_fd(int *fd)
{
	int r = *fd;
	*fd = -1;
	return r;
}

/* Close an fd, returning -1 so it can be used as `fd = safe_close(fd)`. */
static inline int safe_close(int fd)
{
	if (fd >= 0) {
		int saved = errno;
		close(fd);
		errno = saved;
	}
	return -1;
}

/* Close each of the @n fds of @fds (a -1 among them is skipped). */
static inline void close_many(const int *fds, size_t n)
{
	for (size_t i = 0; i < n; i++)
		safe_close(fds[i]);
}
