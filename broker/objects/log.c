/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Logging to stderr and/or syslog, with priorities for the journal. See log.h.
 */

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <syslog.h>
#include <unistd.h>
#include "broker/objects/log.h"
#include "util/error.h"

static enum log_target log_target = LOG_TARGET_STDERR;
static bool log_opened;
static bool log_journal;

bool log_stderr_is_journal(void)
{
	const char *e = getenv("JOURNAL_STREAM");
	unsigned long long dev, ino;
	struct stat st;
	char extra;

	/* systemd sets JOURNAL_STREAM=DEV:INODE of the stream it connected. */
	if (!e || sscanf(e, "%llu:%llu%c", &dev, &ino, &extra) != 2)
		return false;
	if (fstat(STDERR_FILENO, &st) < 0)
		return false;
	return (unsigned long long)st.st_dev == dev && (unsigned long long)st.st_ino == ino;
}

void log_setup(enum log_target target)
{
	log_target = target;
	log_journal = log_stderr_is_journal();
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
		/*
		 * journald reads "<N>" at the start of a line as its priority
		 * (SyslogLevelPrefix=, on by default); the unit name already says
		 * who is talking, so no program prefix then.
		 */
		if (log_journal)
			fprintf(stderr, "<%d>", priority & LOG_PRIMASK);
		else
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

const char *log_error_text(int r, char *buf, size_t size)
{
	const struct error_origin *o = error_origin_get();

	if (o && o->error == r)
		snprintf(buf, size, "%s (%s:%d, %s())", strerror(-r), o->file, o->line, o->func);
	else
		snprintf(buf, size, "%s", strerror(-r));
	error_origin_clear();
	return buf;
}
