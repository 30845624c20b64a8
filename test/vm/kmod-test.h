/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * Tiny test framework for the guest tests of bus1.ko. Every case runs in its own forked child
 * (so a crash or a failed check ends only that case) under an alarm; the runner prints one
 * line per case and exits 0 only if every case passed. Outside the guest (no BUS1_VM_GUEST in
 * the environment) a missing /dev/bus1 means "skip" (77); inside it is a failure.
 *
 * The checks are test/common/check.h's (CHECK, CHECK_EQ, CHECK_OK, CHECK_FAIL...), plus the
 * errno checks of the uAPI below (CHECK_ERR*: fail the case; EXPECT_*: note the mismatch and
 * fail the case at its end).
 */

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "check.h"

struct kt_case {
	const char *name;
	void (*fn)(void);
	unsigned int timeout_s;	/* 0 = 60 s */
};

#define KT_CASE(_fn) { .name = #_fn, .fn = _fn }
#define KT_CASE_T(_fn, _t) { .name = #_fn, .fn = _fn, .timeout_s = (_t) }

int kt_main(const struct kt_case *cases, size_t n_cases, int argc, char **argv);
void kt_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Failure with errno @_e, either as -1/errno or as -_e. */
#define CHECK_ERR(_expr, _e) do {						\
		long long _r;							\
		int _err;							\
		errno = 0;							\
		_r = (long long)(_expr);					\
		_err = (_r == -1 && errno) ? errno : (_r < 0 ? (int)-_r : 0);	\
		if (_err != (_e))						\
			CHECK_FAIL("%s: expected %s, got %lld (%s)", #_expr,	\
				strerrorname_np(_e), _r,			\
				_err ? strerrorname_np(_err) : "success");	\
	} while (0)

/* Helpers shared by the tests. */
int kt_open_peer(void);
void *kt_map_pool(int fd, size_t size);
uint64_t kt_rand(void);
void kt_srand(uint64_t seed);
double kt_now(void);
/*
 * How many times slower than the reference machine this run is: run-guest.sh's time factor
 * times the suite's own (KT_TIMEOUT_FACTOR, the debug kernel). Every wait that only bounds a
 * hang is stretched by it, as kt_main() stretches each case's alarm.
 */
unsigned int kt_time_factor(void);

/* Failure with any of the listed errnos (where the uAPI leaves the exact errno open). */
#define CHECK_ERR2(_expr, _e1, _e2) do {					\
		long long _r;							\
		int _err;							\
		errno = 0;							\
		_r = (long long)(_expr);					\
		_err = (_r == -1 && errno) ? errno : (_r < 0 ? (int)-_r : 0);	\
		if (_err != (_e1) && _err != (_e2))				\
			CHECK_FAIL("%s: expected %s or %s, got %lld (%s)", #_expr,	\
				strerrorname_np(_e1), strerrorname_np(_e2), _r,	\
				_err ? strerrorname_np(_err) : "success");	\
	} while (0)

/* Like CHECK_ERR, but the case goes on (and fails at its end): to see every mismatch. */
extern int kt_soft_failures;
#define EXPECT_ERR(_expr, _e) do {						\
		long long _r;							\
		int _err;							\
		errno = 0;							\
		_r = (long long)(_expr);					\
		_err = (_r == -1 && errno) ? errno : (_r < 0 ? (int)-_r : 0);	\
		if (_err != (_e)) {						\
			kt_note_at(__FILE__, __LINE__,				\
				   "%s: expected %s, got %lld (%s)", #_expr,	\
				   strerrorname_np(_e), _r,			\
				   _err ? strerrorname_np(_err) : "success");	\
			++kt_soft_failures;					\
		}								\
	} while (0)
void kt_note_at(const char *file, int line, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
#define EXPECT_EQ(_a, _b) do {							\
		long long _va = (long long)(_a), _vb = (long long)(_b);		\
		if (_va != _vb) {						\
			kt_note_at(__FILE__, __LINE__, "%s == %s: %lld != %lld",\
				   #_a, #_b, _va, _vb);				\
			++kt_soft_failures;					\
		}								\
	} while (0)

/* Failure with any errno of the 0-terminated list @... (e.g. CHECK_ERR_ANY(x, EINVAL, EMSGSIZE)). */
#define CHECK_ERR_ANY(_expr, ...) do {						\
		static const int _l[] = { __VA_ARGS__, 0 };			\
		long long _r;							\
		int _err;							\
		errno = 0;							\
		_r = (long long)(_expr);					\
		_err = (_r == -1 && errno) ? errno : (_r < 0 ? (int)-_r : 0);	\
		if (!kt_errno_in(_err, _l))					\
			CHECK_FAIL("%s: expected one of %s, got %lld (%s)", #_expr,\
				#__VA_ARGS__, _r,				\
				_err ? strerrorname_np(_err) : "success");	\
	} while (0)

static inline bool kt_errno_in(int err, const int *l)
{
	for (; *l; l++)
		if (*l == err)
			return true;
	return false;
}

/* libbus1 conveniences that fail the case on error. */
#include "libbus1.h"

struct b1_peer *kt_peer(void);
/* A new node owned by @owner; *@owner_h gets its handle, *@holder_h the handle of @holder. */
void kt_node(struct b1_peer *owner, struct b1_peer *holder, uint64_t *owner_h,
	     uint64_t *holder_h);
/* Unicast @len bytes of @data to @dst; returns the ioctl's result (0 or -errno). */
int kt_send(struct b1_peer *peer, uint64_t dst, const void *data, size_t len);
/* Receive the next message, which must exist. */
void kt_recv(struct b1_peer *peer, uint64_t flags, struct b1_msg *msg);
/* The peer's queue must be empty. */
void kt_recv_none(struct b1_peer *peer);
void kt_query(struct b1_peer *peer, struct bus1_cmd_peer_query *q);

/*
 * Small helpers for tests that measure the kernel from outside (sysfs, procfs, cgroupfs) and
 * act as unprivileged users.
 */
#include <sys/types.h>

/* The first integer in the file @path, or -1 (errno set). */
long long kt_read_ll(const char *path);
/* Write @s to @path in one write(2) (sysfs, cgroupfs): 0 or -errno. */
int kt_write_str(const char *path, const char *s);
/* A field of /proc/meminfo in KiB ("Shmem", "SUnreclaim"), or -1 if there is none. */
long long kt_meminfo_kb(const char *field);
/* Become @uid for good: gid @uid, no supplementary groups, real/effective/saved uid @uid. */
void kt_become(uid_t uid);
/* One figure for a report, on its own line: "<tag>: <case>: ...". */
void kt_report(const char *tag, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
