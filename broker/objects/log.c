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

/* What follows the tag of a line: dbus-daemon's context for the bus' <type>. */
static enum {
	LOG_CONTEXT_NONE,
	LOG_CONTEXT_SYSTEM,
	LOG_CONTEXT_SESSION,
} log_context;

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
		/* The invocation name, as on stderr: "dbus-daemon" when installed as it. */
		openlog(program_invocation_short_name, LOG_PID, LOG_DAEMON);
		log_opened = true;
	}
}

void log_set_bus_type(const char *type)
{
	if (type && !strcmp(type, "system"))
		log_context = LOG_CONTEXT_SYSTEM;
	else if (type && !strcmp(type, "session"))
		log_context = LOG_CONTEXT_SESSION;
	else
		log_context = LOG_CONTEXT_NONE;
}

/*
 * The context in @buf. The session's uid and pid are read for each line, so
 * they name the bus as it serves: after --fork its own pid, after <user> its
 * uid (dbus-daemon keeps those of the process that read the configuration,
 * the parent that exited, and root). Nothing else logs in between: a forked
 * activation child executes its service or exits without a line.
 */
static const char *log_context_text(char *buf, size_t size, pid_t pid)
{
	switch (log_context) {
	case LOG_CONTEXT_SYSTEM:
		return "[system] ";
	case LOG_CONTEXT_SESSION:
		snprintf(buf, size, "[session uid=%u pid=%d] ", (unsigned)geteuid(), (int)pid);
		return buf;
	default:
		return "";
	}
}

void log_vprintf(int priority, const char *fmt, va_list ap)
{
	_cleanup_free_ char *text = NULL;
	char buf[64];
	const char *context;
	int saved = errno;
	pid_t pid = getpid();
	va_list aq;

	va_copy(aq, ap);
	if (vasprintf(&text, fmt, aq) < 0)
		text = NULL;
	va_end(aq);
	context = log_context_text(buf, sizeof(buf), pid);

	if (log_target != LOG_TARGET_SYSLOG) {
		/*
		 * One write per line (stderr is unbuffered; fprintf() formats
		 * it in one go): the services the bus started write to the same
		 * stderr, and their output must not split a line of the bus.
		 * Out of memory, the message follows in writes of its own.
		 * journald reads "<N>" at the start of a line as its priority
		 * (SyslogLevelPrefix=, on by default) and adds the tag and pid
		 * itself; the context stays, as in dbus-daemon's journal lines.
		 */
		if (log_journal)
			fprintf(stderr, "<%d>%s%s%s", priority & LOG_PRIMASK, context,
				text ? text : "", text ? "\n" : "");
		else
			fprintf(stderr, "%s[%d]: %s%s%s", program_invocation_short_name, (int)pid,
				context, text ? text : "", text ? "\n" : "");
		if (!text) {
			errno = saved;	/* for a %m */
			va_copy(aq, ap);
			vfprintf(stderr, fmt, aq);
			va_end(aq);
			fputc('\n', stderr);
		}
	}
	if (log_target != LOG_TARGET_STDERR) {
		if (text) {
			syslog(priority, "%s%s", context, text);
		} else {
			errno = saved;
			va_copy(aq, ap);
			vsyslog(priority, fmt, aq);
			va_end(aq);
		}
	}
	errno = saved;
}

void log_printf(int priority, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	log_vprintf(priority, fmt, ap);
	va_end(ap);
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
