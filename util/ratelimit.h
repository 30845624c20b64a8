/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/**
 * DOC: Rate limits
 *
 * The one rule by which the bus limits how often something a client causes
 * may happen (a log line): at most @burst events pass in a window of
 * @interval_usec, which opens with the first event after the previous
 * window ended. The events beyond the burst are counted, so that whoever
 * reports them can tell how many there were once their window ended.
 *
 * A struct ratelimit is the state of one limited source, zero-initialized
 * (no window open); the rule is the caller's constant. Time is the caller's
 * too: microseconds of CLOCK_MONOTONIC (util/clock.h), so that a test drives
 * it.
 */

#include <stdbool.h>
#include <stdint.h>

/* At most @burst (at least 1) events per window of @interval_usec. */
struct ratelimit_rule {
	uint64_t interval_usec;
	unsigned int burst;
};

struct ratelimit {
	uint64_t begin_usec;		/* when the current window opened */
	unsigned int n_passed;		/* events passed in it; 0: none is open */
	uint64_t n_missed;		/* events suppressed, not taken yet */
};

/* Whether no window is open at @now_usec (none opened yet, or it ended). */
static inline bool ratelimit_window_ended(const struct ratelimit *rl,
					  const struct ratelimit_rule *rule, uint64_t now_usec)
{
	return !rl->n_passed || now_usec - rl->begin_usec >= rule->interval_usec;
}

/* When the open window ends (meaningless when none is open). */
static inline uint64_t ratelimit_window_end(const struct ratelimit *rl,
					    const struct ratelimit_rule *rule)
{
	return rl->begin_usec + rule->interval_usec;
}

/* The events suppressed so far, from now on no longer counted. */
static inline uint64_t ratelimit_take_missed(struct ratelimit *rl)
{
	uint64_t n = rl->n_missed;

	rl->n_missed = 0;
	return n;
}

/*
 * If the window ended at @now_usec: close it and return the events it
 * suppressed (maybe 0). While it is open: 0, and nothing changes.
 */
static inline uint64_t ratelimit_collect(struct ratelimit *rl, const struct ratelimit_rule *rule,
					 uint64_t now_usec)
{
	if (!ratelimit_window_ended(rl, rule, now_usec))
		return 0;
	rl->n_passed = 0;
	return ratelimit_take_missed(rl);
}

/**
 * ratelimit_test() - may one more event pass at @now_usec?
 * @missedp:	the events a window that ended before this one suppressed,
 *		which the caller reports before this one (0: none)
 *
 * Return: true if it passes; false if it is suppressed (and counted).
 */
static inline bool ratelimit_test(struct ratelimit *rl, const struct ratelimit_rule *rule,
				  uint64_t now_usec, uint64_t *missedp)
{
	*missedp = ratelimit_collect(rl, rule, now_usec);
	if (!rl->n_passed)
		rl->begin_usec = now_usec;
	if (rl->n_passed < rule->burst) {
		rl->n_passed++;
		return true;
	}
	rl->n_missed++;
	return false;
}
