/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * One epoll set for many file descriptors, drained in batches from a single
 * sd-event source.
 *
 * Why not one sd-event io source per socket: sd-event dispatches one source
 * per loop iteration, and every iteration asks epoll for all the ready ones
 * (up to the number of sources). With thousands of connections all busy, the
 * kernel polls every ready socket again for each message the bus reads, and
 * the bus spends its time in epoll_wait() (quadratic in the busy connections).
 * Here the loop sees one source; when it is ready, one epoll_wait() on the
 * private set returns up to POLLER_BATCH ready watches and each is dispatched
 * in turn, so a wakeup costs one extra epoll_wait() and a busy bus amortizes
 * it over the batch. Level-triggered, as sd-event's io sources are: a watch
 * that left input unread (its read budget) is returned again by the next
 * batch, after the others had their turn.
 *
 * A watch removed while a batch is being dispatched (a peer closed by another
 * peer's message) is struck off the rest of the batch, so no callback runs
 * for freed memory: the owner may free the watch right after poller_remove().
 *
 * The poller's epoll fd is close-on-exec: after a re-exec the restored
 * connections are added to a new poller.
 */

#include <stdbool.h>
#include <stdint.h>
#include <sys/epoll.h>
#include <systemd/sd-event.h>

#define POLLER_BATCH 64

struct poller;
struct poller_watch;

/* Called with the epoll events of @w (EPOLLIN, EPOLLOUT, EPOLLHUP, EPOLLERR). */
typedef void (*poller_fn)(struct poller_watch *w, uint32_t revents);

/*
 * struct poller_watch - one fd in a poller, embedded in its owner (zeroed: not added)
 * @fd:		the fd
 * @events:	what it waits for now
 * @fn:		its callback
 * @added:	in the poller's set
 */
struct poller_watch {
	int fd;
	uint32_t events;
	poller_fn fn;
	bool added;
};

/* A poller on @event, its source at sd-event's default priority. 0 or negative errno. */
int poller_new(struct poller **pollerp, sd_event *event);
struct poller *poller_free(struct poller *poller);

/* Watch @fd for @events (with @fn); @w must stay where it is until removed. 0 or -errno. */
int poller_add(struct poller *poller, struct poller_watch *w, int fd, uint32_t events,
	       poller_fn fn);
/* Wait for @events instead; nothing to do when they are the same. 0 or -errno. */
int poller_modify(struct poller *poller, struct poller_watch *w, uint32_t events);
/* Stop watching (the fd stays open); also from within a callback. No-op if not added. */
void poller_remove(struct poller *poller, struct poller_watch *w);
