/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * DOC: Assertions of every C test program (unit tests, stress tests, the guest tests of
 * test/vm, the native suite, fuzzers).
 *
 * A failed check prints "FILE:LINE: check failed: EXPRESSION" (with the values compared and
 * an optional printf-style message) to stderr and calls abort(): the test stops at the first
 * failure, a fuzzer reports a crash, and a forked test case dies by SIGABRT, which its parent
 * counts as a failure.
 *
 *   CHECK(cond)                 cond is true
 *   CHECK(cond, fmt, ...)       the same, with a message printed after the expression
 *   CHECK_EQ(a, b)              integers, compared as long long
 *   CHECK_NE(a, b)              integers, compared as long long
 *   CHECK_STR(a, b)             strings equal; NULL equals only NULL
 *   CHECK_OK(expr)              a call that returns -1 with errno or a negative errno
 *                               succeeded; the value of the expression is its result
 *   CHECK_FAIL(fmt, ...)        fail here, with a message
 *
 * A program that must clean up before it dies (the stress tests kill their bus and print its
 * log) defines check_failure_hook(); it is called once, before abort().
 */

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Optional: defined by a program that needs to clean up when a check fails. */
extern void check_failure_hook(void) __attribute__((weak));

__attribute__((format(printf, 4, 5), noreturn, cold, unused))
static void check_failed_at(const char *file, int line, const char *expr, const char *fmt, ...)
{
	static int failing;
	va_list ap;

	fflush(stdout);
	if (expr)
		fprintf(stderr, "%s:%d: check failed: %s", file, line, expr);
	else
		fprintf(stderr, "%s:%d: failed", file, line);
	/* fmt is " " followed by the caller's message, if any. */
	if (fmt[0] && fmt[1]) {
		fputc(':', stderr);
		va_start(ap, fmt);
		vfprintf(stderr, fmt, ap);
		va_end(ap);
	}
	fputc('\n', stderr);
	fflush(stderr);
	if (check_failure_hook && !failing++)
		check_failure_hook();
	abort();
}

#define CHECK(cond, ...)                                                                   \
	do {                                                                               \
		if (!(cond))                                                               \
			check_failed_at(__FILE__, __LINE__, #cond, " " __VA_ARGS__);       \
	} while (0)

#define CHECK_EQ(a, b)                                                                     \
	do {                                                                               \
		long long _check_a = (long long)(a), _check_b = (long long)(b);            \
		if (_check_a != _check_b)                                                  \
			check_failed_at(__FILE__, __LINE__, #a " == " #b, " %lld != %lld", \
					_check_a, _check_b);                               \
	} while (0)

#define CHECK_NE(a, b)                                                                     \
	do {                                                                               \
		long long _check_a = (long long)(a), _check_b = (long long)(b);            \
		if (_check_a == _check_b)                                                  \
			check_failed_at(__FILE__, __LINE__, #a " != " #b, " both %lld",    \
					_check_a);                                         \
	} while (0)

#define CHECK_STR(a, b)                                                                    \
	do {                                                                               \
		const char *_check_a = (a), *_check_b = (b);                               \
		if (!(_check_a == _check_b ||                                              \
		      (_check_a && _check_b && !strcmp(_check_a, _check_b))))              \
			check_failed_at(__FILE__, __LINE__, #a " == " #b,                  \
					" \"%s\" != \"%s\"",                               \
					_check_a ? _check_a : "(null)",                    \
					_check_b ? _check_b : "(null)");                   \
	} while (0)

#define CHECK_OK(expr)                                                                     \
	({                                                                                 \
		long long _check_r;                                                        \
		errno = 0;                                                                 \
		_check_r = (long long)(expr);                                              \
		if (_check_r < 0)                                                          \
			check_failed_at(__FILE__, __LINE__, #expr, " returned %lld (%s)",  \
					_check_r,                                          \
					strerror(_check_r == -1 && errno ? errno :         \
						 (int)-_check_r));                         \
		_check_r;                                                                  \
	})

#define CHECK_FAIL(...) check_failed_at(__FILE__, __LINE__, NULL, " " __VA_ARGS__)
