/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The origin of fatal errors and the argument checks' log. See error.h.
 */

#include <stdio.h>
#include <stdlib.h>
#include <syslog.h>
#include "util/error.h"

/* Per thread: a client library may fail in several threads at once. */
static _Thread_local struct error_origin origin;

/* Process-wide: the log belongs to the process, set before threads start. */
static log_fn assert_log;
static void *assert_log_userdata;

int error_origin_at(int r, const char *file, int line, const char *func)
{
	if (r < 0)
		origin = (struct error_origin){
			.error = r,
			.file = file,
			.line = line,
			.func = func,
		};
	return r;
}

const struct error_origin *error_origin_get(void)
{
	return origin.file ? &origin : NULL;
}

void error_origin_clear(void)
{
	origin = (struct error_origin){};
}

void error_set_assert_log(log_fn fn, void *userdata)
{
	assert_log = fn;
	assert_log_userdata = userdata;
}

void error_assert_failed(const char *expr, const char *file, int line, const char *func)
{
	log_fn_printf(assert_log, assert_log_userdata, LOG_DEBUG,
		      "Assertion '%s' failed at %s:%d, function %s(): refused", expr, file,
		      line, func);
}

void error_not_reached(const char *file, int line, const char *func)
{
	/* stderr, not a hook: the process ends here and an owner's log may need the loop */
	fprintf(stderr, "Code should not be reached at %s:%d, function %s(); aborting\n", file,
		line, func);
	abort();
}
