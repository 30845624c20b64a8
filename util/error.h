/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/**
 * DOC: The one error rule
 *
 * Every userspace function that can fail returns an int, read the same way
 * everywhere:
 *
 *  - A negative errno is fatal to the operation: the caller cannot go on
 *    with it. It is passed up unchanged (not turned into another errno, not
 *    folded into a positive code) to the level that gives up on the
 *    operation and logs it: the loop, a connection's teardown, main().
 *  - 0 is success.
 *  - A positive value is a condition the caller is expected to handle (the
 *    input is invalid, the peer went away, a quota is full), named in the
 *    callee's own enum, written in one style:
 *
 *	enum {
 *		_FOO_E_SUCCESS,
 *		FOO_E_INVALID,		(what happened, what the caller does)
 *		FOO_E_QUOTA,
 *	};
 *
 *    Never a bare 1: a reader must find what a value means by its name.
 *    The codes of two enums mean different things, so a caller never passes
 *    its callee's code up as its own: it handles it, or turns it into one
 *    of its own codes or into a negative errno.
 *  - A yes/no answer is a bool. One that may also fail returns a negative
 *    errno or a value of a named verdict enum (enum { FOO_DENIED,
 *    FOO_ALLOWED }), which callers compare by name, never as a truth value:
 *    "1 means allowed" in one prototype and "1 means refused" in the next
 *    is how checks get inverted.
 *
 * A negative errno tells what failed, not where: by the time the loop logs
 * "Permission denied" it went through a dozen returns. error_origin(r) marks
 * the place where a fatal error first arises (the failed syscall whose errno
 * is propagated): it records the file, line and function in a per-thread
 * record and evaluates to @r unchanged, so it wraps the return:
 *
 *	if (bind(fd, ...) < 0)
 *		return error_origin(-errno);
 *
 * The place that logs the error reads error_origin_get() and then
 * error_origin_clear(). The record holds the latest origin and the error it
 * was given: an error logged with a record of another error had no origin
 * recorded (the record is from an earlier failure that was handled).
 * Allocation failures need none (-ENOMEM says it all), nor do positive
 * conditions, which are handled close to where they arise.
 *
 * Arguments: assert_return(expr, r) checks a condition on the arguments of a
 * public entry point (a library's API, as sd-bus checks its own): when it
 * does not hold, the function returns @r at once, having changed nothing,
 * and says which check refused through the hook of error_set_assert_log()
 * (nothing without one). A bad argument is the caller's bug, told back to
 * it; it must not corrupt the library's state. Internal invariants, which
 * only a bug of ours can break, are assert()s; assert_not_reached() marks
 * code that no input can reach, and aborts.
 */

#include <errno.h>
#include "util/log-fn.h"
#include "util/macro.h"

/**
 * struct error_origin - where a fatal error first arose
 * @error:	the negative errno given to error_origin()
 * @file:	source file (__FILE__), NULL if nothing is recorded
 * @line:	line
 * @func:	function
 */
struct error_origin {
	int error;
	const char *file;
	int line;
	const char *func;
};

int error_origin_at(int r, const char *file, int line, const char *func);
/* Record where @r (a negative errno) arose, and evaluate to @r. 0 and positive pass untouched. */
#define error_origin(r) error_origin_at((r), __FILE__, __LINE__, __func__)
/* This thread's latest origin, or NULL if none was recorded since error_origin_clear(). */
const struct error_origin *error_origin_get(void);
void error_origin_clear(void);

/*
 * Where assert_return() says which check refused (LOG_DEBUG): set once at
 * start-up by the owner of the process' log; NULL (the default) says nothing.
 */
void error_set_assert_log(log_fn fn, void *userdata);
void error_assert_failed(const char *expr, const char *file, int line, const char *func);
__attribute__((noreturn, cold)) void error_not_reached(const char *file, int line,
						       const char *func);

/*
 * Return @r from the calling function when @expr is false (a bad argument).
 * For a function returning void, leave @r empty: assert_return(m, ).
 */
#define assert_return(expr, r)								\
	do {										\
		if (_unlikely_(!(expr))) {						\
			error_assert_failed(#expr, __FILE__, __LINE__, __func__);	\
			return r;							\
		}									\
	} while (0)

#define assert_not_reached() error_not_reached(__FILE__, __LINE__, __func__)
