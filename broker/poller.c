/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * One epoll set drained in batches: see poller.h.
 */

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <unistd.h>
#include "broker/poller.h"
#include "util/macro.h"

struct poller {
	int epoll_fd;
	sd_event_source *source;
	/* The batch being dispatched: entries of removed watches are NULL. */
	struct epoll_event batch[POLLER_BATCH];
	int n_batch;
	int next;
};

static int poller_dispatch(sd_event_source *s, int fd, uint32_t revents, void *userdata)
{
	struct poller *poller = userdata;
	int n;

	n = epoll_wait(poller->epoll_fd, poller->batch, POLLER_BATCH, 0);
	if (n < 0)
		return errno == EINTR ? 0 : -errno;
	poller->n_batch = n;
	for (poller->next = 0; poller->next < poller->n_batch; ) {
		const struct epoll_event *ev = &poller->batch[poller->next++];
		struct poller_watch *w = ev->data.ptr;

		if (w)
			w->fn(w, ev->events);
	}
	poller->n_batch = 0;
	poller->next = 0;
	return 0;
}

int poller_new(struct poller **pollerp, sd_event *event)
{
	struct poller *poller = calloc(1, sizeof(*poller));
	int r;

	if (!poller)
		return -ENOMEM;
	poller->epoll_fd = epoll_create1(EPOLL_CLOEXEC);
	if (poller->epoll_fd < 0) {
		r = -errno;
		free(poller);
		return r;
	}
	r = sd_event_add_io(event, &poller->source, poller->epoll_fd, EPOLLIN, poller_dispatch,
			    poller);
	if (r < 0) {
		poller_free(poller);
		return r;
	}
	*pollerp = poller;
	return 0;
}

struct poller *poller_free(struct poller *poller)
{
	if (!poller)
		return NULL;
	poller->source = sd_event_source_disable_unref(poller->source);
	if (poller->epoll_fd >= 0)
		close(poller->epoll_fd);
	free(poller);
	return NULL;
}

int poller_add(struct poller *poller, struct poller_watch *w, int fd, uint32_t events,
	       poller_fn fn)
{
	struct epoll_event ev = { .events = events, .data.ptr = w };

	if (epoll_ctl(poller->epoll_fd, EPOLL_CTL_ADD, fd, &ev) < 0)
		return -errno;
	w->fd = fd;
	w->events = events;
	w->fn = fn;
	w->added = true;
	return 0;
}

int poller_modify(struct poller *poller, struct poller_watch *w, uint32_t events)
{
	struct epoll_event ev = { .events = events, .data.ptr = w };

	if (!w->added || events == w->events)
		return 0;
	if (epoll_ctl(poller->epoll_fd, EPOLL_CTL_MOD, w->fd, &ev) < 0)
		return -errno;
	w->events = events;
	return 0;
}

void poller_remove(struct poller *poller, struct poller_watch *w)
{
	int i;

	if (!w->added)
		return;
	/* The fd stays open (its owner closes it): it must leave the set explicitly. */
	(void)epoll_ctl(poller->epoll_fd, EPOLL_CTL_DEL, w->fd, NULL);
	w->added = false;
	for (i = poller->next; i < poller->n_batch; i++)
		if (poller->batch[i].data.ptr == w)
			poller->batch[i].data.ptr = NULL;
}
