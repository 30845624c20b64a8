/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * broker/poller: ready fds are dispatched in batches from one sd-event iteration, level-
 * triggered; a watch removed by an earlier callback of the same batch is not called; events
 * can be changed and removed; more ready fds than a batch holds take several iterations.
 */

#include <stdio.h>
#include <sys/socket.h>
#include <unistd.h>
#include "broker/poller.h"
#include "util/macro.h"
#include "check.h"

#define N_PAIRS (POLLER_BATCH + 6)

struct item {
	struct poller_watch watch;
	int fds[2];
	unsigned int calls;
	uint32_t revents;
	struct item *remove_on_call;	/* removed by this item's callback */
	bool drain;			/* read what is there */
};

static struct poller *poller;

static void item_fn(struct poller_watch *w, uint32_t revents)
{
	struct item *it = container_of(w, struct item, watch);
	char buf[16];

	it->calls++;
	it->revents = revents;
	if (it->remove_on_call)
		poller_remove(poller, &it->remove_on_call->watch);
	if (it->drain)
		CHECK(read(it->fds[0], buf, sizeof(buf)) > 0);
}

static unsigned int total_calls(struct item *items, size_t n)
{
	unsigned int sum = 0;

	for (size_t i = 0; i < n; i++)
		sum += items[i].calls;
	return sum;
}

static void reset(struct item *items, size_t n)
{
	for (size_t i = 0; i < n; i++)
		items[i].calls = 0;
}

int main(void)
{
	static struct item items[N_PAIRS];
	sd_event *event = NULL;

	CHECK_OK(sd_event_new(&event));
	CHECK_OK(poller_new(&poller, event));
	for (size_t i = 0; i < N_PAIRS; i++) {
		CHECK_OK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0,
				    items[i].fds));
		CHECK_OK(poller_add(poller, &items[i].watch, items[i].fds[0], EPOLLIN, item_fn));
	}

	/* Nothing ready: no callback. */
	CHECK_EQ(sd_event_run(event, 0), 0);
	CHECK_EQ(total_calls(items, N_PAIRS), 0);

	/* Three ready: all three in one iteration (one batch). */
	for (size_t i = 0; i < 3; i++)
		CHECK_EQ(write(items[i].fds[1], "x", 1), 1);
	CHECK_EQ(sd_event_run(event, 0), 1);
	CHECK_EQ(total_calls(items, N_PAIRS), 3);
	for (size_t i = 0; i < 3; i++) {
		CHECK_EQ(items[i].calls, 1);
		CHECK(items[i].revents & EPOLLIN);
	}

	/* Level-triggered: unread input is reported again. */
	reset(items, N_PAIRS);
	CHECK_EQ(sd_event_run(event, 0), 1);
	CHECK_EQ(total_calls(items, N_PAIRS), 3);
	for (size_t i = 0; i < 3; i++)
		items[i].drain = true;
	reset(items, N_PAIRS);
	CHECK_EQ(sd_event_run(event, 0), 1);
	CHECK_EQ(total_calls(items, N_PAIRS), 3);
	reset(items, N_PAIRS);
	CHECK_EQ(sd_event_run(event, 0), 0);
	CHECK_EQ(total_calls(items, N_PAIRS), 0);

	/* No events asked: not called while readable; asked again: called. */
	CHECK_OK(poller_modify(poller, &items[0].watch, 0));
	CHECK_EQ(write(items[0].fds[1], "x", 1), 1);
	CHECK_EQ(sd_event_run(event, 0), 0);
	CHECK_EQ(items[0].calls, 0);
	CHECK_OK(poller_modify(poller, &items[0].watch, EPOLLIN));
	CHECK_EQ(sd_event_run(event, 0), 1);
	CHECK_EQ(items[0].calls, 1);

	/*
	 * Two ready in one batch, whichever comes first removes the other: the other is not
	 * called (its memory could be gone), and stays out of later batches.
	 */
	reset(items, N_PAIRS);
	items[1].remove_on_call = &items[2];
	items[2].remove_on_call = &items[1];
	items[1].drain = items[2].drain = false;
	CHECK_EQ(write(items[1].fds[1], "x", 1), 1);
	CHECK_EQ(write(items[2].fds[1], "x", 1), 1);
	CHECK_EQ(sd_event_run(event, 0), 1);
	CHECK_EQ(items[1].calls + items[2].calls, 1);
	items[1].remove_on_call = items[2].remove_on_call = NULL;
	reset(items, N_PAIRS);
	CHECK_EQ(sd_event_run(event, 0), 1);
	CHECK_EQ(items[1].calls + items[2].calls, 1);
	/* Removing twice is harmless; modifying a removed watch does nothing. */
	poller_remove(poller, &items[1].watch);
	poller_remove(poller, &items[2].watch);
	CHECK_OK(poller_modify(poller, &items[1].watch, EPOLLOUT));
	reset(items, N_PAIRS);
	CHECK_EQ(sd_event_run(event, 0), 0);
	CHECK_EQ(total_calls(items, N_PAIRS), 0);

	/* More ready than a batch: each is called once over two iterations. */
	for (size_t i = 3; i < N_PAIRS; i++) {
		items[i].drain = true;
		CHECK_EQ(write(items[i].fds[1], "x", 1), 1);
	}
	CHECK_EQ(sd_event_run(event, 0), 1);
	CHECK_EQ(total_calls(items, N_PAIRS), POLLER_BATCH);
	CHECK_EQ(sd_event_run(event, 0), 1);
	CHECK_EQ(total_calls(items, N_PAIRS), N_PAIRS - 3);
	for (size_t i = 3; i < N_PAIRS; i++)
		CHECK_EQ(items[i].calls, 1);

	/* A hang-up is reported without being asked for. */
	reset(items, N_PAIRS);
	items[0].drain = false;
	CHECK_OK(poller_modify(poller, &items[0].watch, 0));
	close(items[0].fds[1]);
	CHECK_EQ(sd_event_run(event, 0), 1);
	CHECK_EQ(items[0].calls, 1);
	CHECK(items[0].revents & EPOLLHUP);

	poller = poller_free(poller);
	sd_event_unref(event);
	printf("ok\n");
	return 0;
}
