/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * util/ratelimit.h, the one rule: a burst per window, the window opening with
 * the first event after the last one ended, the events beyond counted and
 * handed out once. Then broker/objects/log-limit.c on top of it: a window's left-out
 * lines told at the next line, on the timer of an sd-event loop, when the
 * source goes and on a flush, each exactly once, and counted.
 */

#include <stdio.h>
#include <systemd/sd-event.h>
#include "broker/objects/log-limit.h"
#include "util/clock.h"
#include "util/macro.h"
#include "util/ratelimit.h"
#include "check.h"

static const struct ratelimit_rule rule = { .interval_usec = 1000, .burst = 3 };

/* The first burst passes, the rest is counted; nothing is reported inside the window. */
static void test_burst(void)
{
	struct ratelimit rl = {};
	uint64_t missed = 99;

	CHECK(ratelimit_window_ended(&rl, &rule, 5000));
	for (int i = 0; i < 3; i++) {
		CHECK(ratelimit_test(&rl, &rule, 5000 + (uint64_t)i, &missed));
		CHECK_EQ(missed, 0);
	}
	for (int i = 0; i < 7; i++) {
		CHECK(!ratelimit_test(&rl, &rule, 5100 + (uint64_t)i, &missed));
		CHECK_EQ(missed, 0);
	}
	CHECK_EQ(rl.n_missed, 7);
	CHECK_EQ(ratelimit_window_end(&rl, &rule), 6000);
	/* Still open one microsecond before its end: nothing to collect. */
	CHECK(!ratelimit_window_ended(&rl, &rule, 5999));
	CHECK_EQ(ratelimit_collect(&rl, &rule, 5999), 0);
	CHECK_EQ(rl.n_missed, 7);
	/* At its end: the next event opens a new window and hands out the count, once. */
	CHECK(ratelimit_window_ended(&rl, &rule, 6000));
	CHECK(ratelimit_test(&rl, &rule, 6000, &missed));
	CHECK_EQ(missed, 7);
	CHECK(ratelimit_test(&rl, &rule, 6001, &missed));
	CHECK_EQ(missed, 0);
}

/* A window opens with the first event after the last one ended, not on a fixed grid. */
static void test_window_opens_late(void)
{
	struct ratelimit rl = {};
	uint64_t missed;

	CHECK(ratelimit_test(&rl, &rule, 0, &missed));
	/* Long after: a new window from 10007 on, with its whole burst. */
	for (int i = 0; i < 3; i++)
		CHECK(ratelimit_test(&rl, &rule, 10007, &missed));
	CHECK_EQ(missed, 0);
	CHECK(!ratelimit_test(&rl, &rule, 11006, &missed));
	CHECK_EQ(ratelimit_window_end(&rl, &rule), 11007);
	/* Collected by someone else (a timer): the next event reports nothing again. */
	CHECK_EQ(ratelimit_collect(&rl, &rule, 11007), 1);
	CHECK_EQ(ratelimit_collect(&rl, &rule, 11008), 0);
	CHECK(ratelimit_test(&rl, &rule, 11008, &missed));
	CHECK_EQ(missed, 0);
}

/* Taking the count early (the source goes, a flush) keeps the window and its burst spent. */
static void test_take_missed(void)
{
	struct ratelimit rl = {};
	uint64_t missed;

	for (int i = 0; i < 5; i++)
		(void)ratelimit_test(&rl, &rule, 100, &missed);
	CHECK_EQ(ratelimit_take_missed(&rl), 2);
	CHECK_EQ(ratelimit_take_missed(&rl), 0);
	CHECK(!ratelimit_test(&rl, &rule, 200, &missed));
	CHECK_EQ(missed, 0);
	CHECK(ratelimit_test(&rl, &rule, 1100, &missed));
	CHECK_EQ(missed, 1);
}

/* A flood of a million in one window: one line's worth of report, exact. */
static void test_flood(void)
{
	struct ratelimit rl = {};
	uint64_t missed, passed = 0;

	for (uint64_t t = 0; t < 1000000; t++)
		passed += ratelimit_test(&rl, &rule, 50000, &missed);
	CHECK_EQ(passed, 3);
	CHECK(ratelimit_test(&rl, &rule, 51000, &missed));
	CHECK_EQ(missed, 1000000 - 3);
}

/* ------------------------------------------------------------ log-limit.c */

struct source {
	struct log_limit limit;
	uint64_t told;		/* lines it was told it left out, in all */
	unsigned int n_tellings;
};

static void source_report(struct log_limit *l, uint64_t n_missed)
{
	struct source *s = container_of(l, struct source, limit);

	CHECK(n_missed > 0);
	s->told += n_missed;
	s->n_tellings++;
}

/* Short windows: the timer's case waits for real ones. */
static const struct ratelimit_rule short_rule = { .interval_usec = 20000, .burst = 2 };

/* Without a loop: told at the next line after the window, on flush and at the end. */
static void test_log_limit_lazy(void)
{
	struct log_limits ls;
	struct source a = {}, b = {};
	uint64_t end;

	log_limits_init(&ls);
	log_limit_init(&a.limit, &short_rule, source_report);
	log_limit_init(&b.limit, &short_rule, source_report);
	CHECK(log_limit_pass(&ls, &a.limit));
	CHECK(log_limit_pass(&ls, &a.limit));
	for (int i = 0; i < 5; i++)
		CHECK(!log_limit_pass(&ls, &a.limit));
	/* Another source is not silenced by the first one's flood. */
	CHECK(log_limit_pass(&ls, &b.limit));
	CHECK_EQ(ls.n_suppressed, 5);
	CHECK_EQ(a.n_tellings, 0);

	end = now_usec() + short_rule.interval_usec;
	while (now_usec() < end)
		;
	CHECK(log_limit_pass(&ls, &a.limit));
	CHECK_EQ(a.told, 5);
	CHECK_EQ(a.n_tellings, 1);
	CHECK(list_is_empty(&ls.untold));

	/* Left out, then flushed (a re-exec): told once, not again at the end. */
	CHECK(log_limit_pass(&ls, &a.limit));
	CHECK(!log_limit_pass(&ls, &a.limit));
	log_limits_flush(&ls);
	CHECK_EQ(a.told, 6);
	CHECK(!log_limit_pass(&ls, &a.limit));
	CHECK(!log_limit_pass(&ls, &a.limit));
	/* The source goes: told what is left, unlinked. */
	log_limit_deinit(&a.limit);
	CHECK_EQ(a.told, 8);
	CHECK_EQ(a.n_tellings, 3);
	log_limit_deinit(&b.limit);
	CHECK_EQ(b.n_tellings, 0);
	CHECK(list_is_empty(&ls.untold));
	CHECK_EQ(ls.n_suppressed, 8);
	log_limits_deinit(&ls);
}

/* With a loop: a flood that stops is told by the timer, without another line. */
static void test_log_limit_timer(void)
{
	struct log_limits ls;
	struct source s[3] = {};
	sd_event *event = NULL;
	uint64_t deadline;

	CHECK_OK(sd_event_new(&event));
	log_limits_init(&ls);
	log_limits_attach(&ls, event);
	for (int i = 0; i < 3; i++) {
		log_limit_init(&s[i].limit, &short_rule, source_report);
		/* The third stays within its burst: nothing to tell. */
		for (int k = 0; k < (i == 2 ? 2 : 10 + i); k++)
			(void)log_limit_pass(&ls, &s[i].limit);
	}
	CHECK_EQ(ls.n_suppressed, 8 + 9);
	/* The window (20 ms) and the timer's accuracy (500 ms), and a margin. */
	deadline = now_usec() + 5 * 1000 * 1000;
	while ((s[0].n_tellings == 0 || s[1].n_tellings == 0) && now_usec() < deadline)
		CHECK_OK(sd_event_run(event, 100 * 1000));
	CHECK_EQ(s[0].told, 8);
	CHECK_EQ(s[1].told, 9);
	CHECK_EQ(s[0].n_tellings, 1);
	CHECK_EQ(s[1].n_tellings, 1);
	CHECK_EQ(s[2].n_tellings, 0);
	CHECK(list_is_empty(&ls.untold));
	/* A new window after the timer told the last one: its full burst again. */
	CHECK(log_limit_pass(&ls, &s[0].limit));
	CHECK(log_limit_pass(&ls, &s[0].limit));
	CHECK(!log_limit_pass(&ls, &s[0].limit));
	for (int i = 0; i < 3; i++)
		log_limit_deinit(&s[i].limit);
	CHECK_EQ(s[0].told, 9);
	log_limits_deinit(&ls);
	sd_event_unref(event);
}

int main(void)
{
	test_burst();
	test_window_opens_late();
	test_take_missed();
	test_flood();
	test_log_limit_lazy();
	test_log_limit_timer();
	printf("ratelimit: ok\n");
	return 0;
}
