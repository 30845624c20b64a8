/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/**
 * DOC: Log lines a client causes, rate-limited
 *
 * A line the bus logs because of what a client did (a refused call, a
 * container filter's verdict) is limited per source, whatever the line is
 * about (a connection, a container instance as a whole), by the rule of
 * util/ratelimit.h: a burst of lines per window. A flood cannot fill the
 * journal, a source that rarely gets there loses nothing, and one source's
 * flood does not silence another's first line.
 *
 * The lines left out are told in one line of the source's own (struct
 * log_limit .report) once its window ended: at its next line, on the timer
 * of the bus' struct log_limits, or when the source goes
 * (log_limit_deinit()), whichever comes first. So the log says how many
 * lines are missing, also when the flood stopped, and says it soon.
 *
 * Ownership: a struct log_limit is embedded in its source; the bus owns the
 * struct log_limits, which links the sources with untold lines (no source
 * is ever freed while linked: log_limit_deinit() unlinks it).
 */

#include <stdbool.h>
#include <stdint.h>
#include <systemd/sd-event.h>
#include "util/list.h"
#include "util/macro.h"
#include "util/ratelimit.h"

struct log_limit;

/* Log that @n_missed lines of @l were left out (@n_missed > 0), in one line. */
typedef void (*log_limit_report_fn)(struct log_limit *l, uint64_t n_missed);

struct log_limits {
	sd_event *event;		/* NULL: no timer (told at the next line or the end) */
	sd_event_source *timer;		/* at the earliest window end of ->untold */
	struct list_node untold;	/* struct log_limit with lines left out, not told yet */
	uint64_t n_suppressed;		/* lines left out, ever (LogLinesSuppressed) */
};

struct log_limit {
	const struct ratelimit_rule *rule;
	log_limit_report_fn report;
	struct ratelimit rl;
	struct log_limits *limits;	/* while in its ->untold */
	struct list_node untold_link;
};

void log_limits_init(struct log_limits *ls);
/* From now on, tell what was left out on a timer of @event (bus_attach()). */
void log_limits_attach(struct log_limits *ls, sd_event *event);
/* Every source is gone (log_limit_deinit()): release the timer. */
void log_limits_deinit(struct log_limits *ls);
/*
 * Tell now what every source left out so far: before a re-exec, whose
 * program starts without the windows of this one.
 */
void log_limits_flush(struct log_limits *ls);

void log_limit_init(struct log_limit *l, const struct ratelimit_rule *rule,
		    log_limit_report_fn report);
/*
 * Whether one more line of @l may be logged now; a window of it that ended
 * with lines left out is told first. A line that may not is counted.
 */
bool log_limit_pass(struct log_limits *ls, struct log_limit *l);
/*
 * A line of @l at syslog @priority, if log_limit_pass() lets it through.
 * Return: whether it was logged.
 */
bool log_limit_printf(struct log_limits *ls, struct log_limit *l, int priority,
		      const char *fmt, ...) _printf_(4, 5);
/* The source goes: tell what it left out, unlink it. */
void log_limit_deinit(struct log_limit *l);
