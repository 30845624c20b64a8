/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/**
 * DOC: Logging
 *
 * The broker logs to stderr, to syslog or to both, like dbus-daemon with
 * --nosyslog / --syslog-only / --syslog. Messages are single lines; callers
 * do not add a newline. Under systemd, syslog() reaches the journal through
 * /dev/log and stderr through the service's stream (with priorities, below).
 */

#include <stdbool.h>
#include "util/macro.h"

enum log_target {
	LOG_TARGET_STDERR,
	LOG_TARGET_SYSLOG,
	LOG_TARGET_BOTH,
};

/*
 * Under systemd (stderr is the stream named by JOURNAL_STREAM), stderr lines
 * start with "<N>", the syslog priority, which journald stores as PRIORITY=
 * instead of printing it; otherwise they start with "bus1-broker: ".
 */
void log_setup(enum log_target target);
bool log_stderr_is_journal(void);
void log_printf(int priority, const char *fmt, ...) _printf_(2, 3);

/* syslog priorities, without pulling <syslog.h> into every file. */
#define log_err(...) log_printf(3, __VA_ARGS__)
#define log_warn(...) log_printf(4, __VA_ARGS__)
#define log_info(...) log_printf(6, __VA_ARGS__)
