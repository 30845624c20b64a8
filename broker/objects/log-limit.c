/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Rate-limited log lines of the bus' sources. See log-limit.h.
 */

#include <stdarg.h>
#include <string.h>
#include <time.h>
#include "broker/objects/log.h"
#include "broker/objects/log-limit.h"
#include "util/clock.h"

/*
 * The timer may fire this late: windows that end close together are told
 * in one wakeup, however many sources flood at once.
 */
#define LOG_LIMITS_ACCURACY_USEC (500ULL * 1000)

/* The loop's time when there is one (as the router's), else the clock. */
static uint64_t log_limits_now(struct log_limits *ls)
{
	uint64_t usec;

	if (ls->event && sd_event_now(ls->event, CLOCK_MONOTONIC, &usec) >= 0)
		return usec;
	return now_usec();
}

static void log_limit_tell(struct log_limit *l, uint64_t n_missed)
{
	if (n_missed)
		l->report(l, n_missed);
}

static void log_limit_unlink(struct log_limit *l)
{
	list_unlink(&l->untold_link);
	l->limits = NULL;
}

static int log_limits_timer_cb(sd_event_source *s, uint64_t usec, void *userdata);

/* Make sure the timer fires at @when or earlier. */
static void log_limits_arm(struct log_limits *ls, uint64_t when)
{
	uint64_t armed;
	int enabled, r;

	if (!ls->event)
		return;
	if (!ls->timer) {
		r = sd_event_add_time(ls->event, &ls->timer, CLOCK_MONOTONIC, when,
				      LOG_LIMITS_ACCURACY_USEC, log_limits_timer_cb, ls);
		if (r < 0)
			log_warn("cannot arm the timer of the log's rate limit: %s", strerror(-r));
		return;
	}
	if (sd_event_source_get_enabled(ls->timer, &enabled) >= 0 && enabled != SD_EVENT_OFF &&
	    sd_event_source_get_time(ls->timer, &armed) >= 0 && armed <= when)
		return;
	sd_event_source_set_time(ls->timer, when);
	sd_event_source_set_enabled(ls->timer, SD_EVENT_ONESHOT);
}

/* Tell every source whose window ended; wait for the first of the others. */
static int log_limits_timer_cb(sd_event_source *s, uint64_t usec, void *userdata)
{
	struct log_limits *ls = userdata;
	struct log_limit *l, *tmp;
	uint64_t now = log_limits_now(ls), next = UINT64_MAX;

	list_for_each_entry_safe(l, tmp, &ls->untold, untold_link) {
		if (ratelimit_window_ended(&l->rl, l->rule, now)) {
			log_limit_unlink(l);
			log_limit_tell(l, ratelimit_collect(&l->rl, l->rule, now));
		} else {
			next = MIN(next, ratelimit_window_end(&l->rl, l->rule));
		}
	}
	if (next != UINT64_MAX)
		log_limits_arm(ls, next);
	return 0;
}

void log_limits_init(struct log_limits *ls)
{
	*ls = (struct log_limits){};
	list_init(&ls->untold);
}

void log_limits_attach(struct log_limits *ls, sd_event *event)
{
	struct log_limit *l;

	ls->event = event;
	/* Lines left out before there was a loop, if any. */
	list_for_each_entry(l, &ls->untold, untold_link)
		log_limits_arm(ls, ratelimit_window_end(&l->rl, l->rule));
}

void log_limits_flush(struct log_limits *ls)
{
	while (!list_is_empty(&ls->untold)) {
		struct log_limit *l = list_first_entry(&ls->untold, struct log_limit, untold_link);

		log_limit_unlink(l);
		log_limit_tell(l, ratelimit_take_missed(&l->rl));
	}
}

void log_limits_deinit(struct log_limits *ls)
{
	log_limits_flush(ls);
	ls->timer = sd_event_source_disable_unref(ls->timer);
	ls->event = NULL;
}

void log_limit_init(struct log_limit *l, const struct ratelimit_rule *rule,
		    log_limit_report_fn report)
{
	*l = (struct log_limit){ .rule = rule, .report = report };
	list_init(&l->untold_link);
}

bool log_limit_pass(struct log_limits *ls, struct log_limit *l)
{
	uint64_t now = log_limits_now(ls), missed;

	if (ratelimit_test(&l->rl, l->rule, now, &missed)) {
		/* A new window: the last one's count first, in the order they happened. */
		if (l->limits)
			log_limit_unlink(l);
		log_limit_tell(l, missed);
		return true;
	}
	ls->n_suppressed++;
	if (!l->limits) {
		l->limits = ls;
		list_append(&ls->untold, &l->untold_link);
		log_limits_arm(ls, ratelimit_window_end(&l->rl, l->rule));
	}
	return false;
}

bool log_limit_printf(struct log_limits *ls, struct log_limit *l, int priority,
		      const char *fmt, ...)
{
	va_list ap;

	if (!log_limit_pass(ls, l))
		return false;
	va_start(ap, fmt);
	log_vprintf(priority, fmt, ap);
	va_end(ap);
	return true;
}

void log_limit_deinit(struct log_limit *l)
{
	if (l->limits)
		log_limit_unlink(l);
	log_limit_tell(l, ratelimit_take_missed(&l->rl));
}
