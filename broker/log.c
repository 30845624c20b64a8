/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Logging to stderr and/or syslog. See log.h.
 */

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <syslog.h>
#include "broker/log.h"

static enum log_target log_target = LOG_TARGET_STDERR;
static bool log_opened;

void log_setup(enum log_target target)
{
	log_target = target;
	if (target != LOG_TARGET_STDERR && !log_opened) {
		openlog("bus1-broker", LOG_PID, LOG_DAEMON);
		log_opened = true;
	}
}

void log_printf(int priority, const char *fmt, ...)
{
	int saved = errno;
	va_list ap;

	if (log_target != LOG_TARGET_SYSLOG) {
		va_start(ap, fmt);
		fprintf(stderr, "bus1-broker: ");
		vfprintf(stderr, fmt, ap);
		fputc('\n', stderr);
		va_end(ap);
	}
	if (log_target != LOG_TARGET_STDERR) {
		va_start(ap, fmt);
		vsyslog(priority, fmt, ap);
		va_end(ap);
	}
	errno = saved;
}
