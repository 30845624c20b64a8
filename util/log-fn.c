/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Logging through a callback. See log-fn.h.
 */

#include <stdarg.h>
#include <stdio.h>
#include "util/log-fn.h"

void log_fn_printf(log_fn fn, void *userdata, int priority, const char *fmt, ...)
{
	char *text = NULL;
	va_list ap;
	int r;

	if (!fn)
		return;
	va_start(ap, fmt);
	r = vasprintf(&text, fmt, ap);
	va_end(ap);
	if (r >= 0)
		fn(userdata, priority, text);
	free(text);
}
