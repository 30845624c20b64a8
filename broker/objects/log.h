/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/**
 * DOC: Logging
 *
 * The broker logs to stderr, to syslog or to both, like dbus-daemon with
 * --nosyslog / --syslog-only / --syslog. Messages are single lines; callers
 * do not add a newline. Under systemd, syslog() reaches the journal through
 * /dev/log and stderr through the service's stream (with priorities, below).
 *
 * A line has dbus-daemon's form, which journal filters and log scrapers
 * look for: "TAG[PID]: CONTEXT" before the message. The tag is the name the
 * program was invoked by (program_invocation_short_name): a bus installed
 * or started as dbus-daemon says "dbus-daemon[PID]: ", else
 * "bus1-broker[PID]: "; syslog gets the same tag (openlog() with LOG_PID).
 * The context comes from the configuration's <type> (log_set_bus_type()):
 * "[system] ", "[session uid=UID pid=PID] " with the bus' own effective uid
 * and pid, nothing for another type or none. syslog gets the context too.
 */

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include "util/macro.h"

enum log_target {
	LOG_TARGET_STDERR,
	LOG_TARGET_SYSLOG,
	LOG_TARGET_BOTH,
};

/*
 * Under systemd (stderr is the stream named by JOURNAL_STREAM), stderr lines
 * start with "<N>", the syslog priority, which journald stores as PRIORITY=
 * instead of printing it, then the context; journald adds the tag and pid
 * itself. Otherwise they start with "TAG[PID]: " and the context.
 */
void log_setup(enum log_target target);
bool log_stderr_is_journal(void);
/*
 * The bus' <type> (NULL: none), once the configuration is read: the context
 * of every line from then on. Set at start only, as dbus-daemon sets it: a
 * ReloadConfig keeps it; a re-exec reads the file again, as a restart does.
 */
void log_set_bus_type(const char *type);
void log_printf(int priority, const char *fmt, ...) _printf_(2, 3);
void log_vprintf(int priority, const char *fmt, va_list ap) _printf_(2, 0);

/* syslog priorities, without pulling <syslog.h> into every file. */
#define log_err(...) log_printf(3, __VA_ARGS__)
#define log_warn(...) log_printf(4, __VA_ARGS__)
#define log_info(...) log_printf(6, __VA_ARGS__)

/*
 * The text of a fatal error @r (a negative errno) for a log line: its
 * strerror(), and where it arose when error_origin() recorded that for @r
 * (util/error.h): "Permission denied (broker/transport/listener.c:290, listener_io())".
 * The record is cleared: the error is logged now. log_error() writes into a
 * buffer of the enclosing block, so a log call may take several.
 */
#define LOG_ERROR_MAX 256
const char *log_error_text(int r, char *buf, size_t size);
#define log_error(r) log_error_text((r), (char[LOG_ERROR_MAX]){}, LOG_ERROR_MAX)
