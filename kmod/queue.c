// SPDX-License-Identifier: GPL-2.0
/*
 * Per-peer ordered queues: see queue.h for the ordering argument.
 */

#include <linux/bug.h>
#include <linux/kernel.h>
#include <linux/lockdep.h>
#include <linux/mutex.h>
#include "queue.h"

static int bus1_queue_node_compare(const struct bus1_queue_node *a,
				   const struct bus1_queue_node *b)
{
	if (a->timestamp != b->timestamp)
		return a->timestamp < b->timestamp ? -1 : 1;
	if (a->sender != b->sender)
		return a->sender < b->sender ? -1 : 1;
	if (a->seq != b->seq)
		return a->seq < b->seq ? -1 : 1;
	if (a->index != b->index)
		return a->index < b->index ? -1 : 1;
	return 0;
}

static void bus1_queue_link(struct bus1_queue *queue, struct bus1_queue_node *qn)
{
	struct rb_node **slot = &queue->tree.rb_root.rb_node, *parent = NULL;
	struct bus1_queue_node *other;
	bool leftmost = true;
	int c;

	while (*slot) {
		parent = *slot;
		other = rb_entry(parent, struct bus1_queue_node, rb);
		c = bus1_queue_node_compare(qn, other);
		WARN_ON(c == 0);
		if (c < 0) {
			slot = &parent->rb_left;
		} else {
			slot = &parent->rb_right;
			leftmost = false;
		}
	}
	rb_link_node(&qn->rb, parent, slot);
	rb_insert_color_cached(&qn->rb, &queue->tree, leftmost);
}

/**
 * bus1_queue_init() - initialize a queue
 * @queue:	queue
 * @lock:	the owning peer's lock, which protects the queue
 */
void bus1_queue_init(struct bus1_queue *queue, struct mutex *lock)
{
	queue->tree = RB_ROOT_CACHED;
	queue->clock = 0;
	queue->lock = lock;
}

/**
 * bus1_queue_deinit() - check that a queue is empty before it goes away
 * @queue:	queue
 */
void bus1_queue_deinit(struct bus1_queue *queue)
{
	WARN_ON(!RB_EMPTY_ROOT(&queue->tree.rb_root));
}

/**
 * bus1_queue_stage() - insert a staged entry
 * @queue:	destination queue
 * @qn:		entry, not queued
 * @sender:	unique id of the sending peer
 * @seq:	transaction number of that sender
 * @index:	position in the transaction
 *
 * Return: the queue's clock, which the commit timestamp must exceed.
 */
u64 bus1_queue_stage(struct bus1_queue *queue, struct bus1_queue_node *qn,
		     u64 sender, u64 seq, u64 index)
{
	lockdep_assert_held(queue->lock);
	WARN_ON(bus1_queue_node_is_queued(qn));
	qn->timestamp = queue->clock + 1;
	qn->sender = sender;
	qn->seq = seq;
	qn->index = index;
	bus1_queue_link(queue, qn);
	return queue->clock;
}

/**
 * bus1_queue_commit() - give a staged entry its final timestamp
 * @queue:	queue the entry is staged on
 * @qn:		staged entry
 * @timestamp:	commit timestamp (even, above the clock seen at staging)
 *
 * Return: true if the queue became readable (readers should be woken up).
 * That is not only when @qn is now first: a staged entry that blocked the
 * queue may move behind an entry committed earlier, which becomes ready.
 */
bool bus1_queue_commit(struct bus1_queue *queue, struct bus1_queue_node *qn, u64 timestamp)
{
	bool was_ready = bus1_queue_peek(queue);

	lockdep_assert_held(queue->lock);
	WARN_ON(timestamp & 1);
	WARN_ON(qn->timestamp >= timestamp || !(qn->timestamp & 1));

	rb_erase_cached(&qn->rb, &queue->tree);
	qn->timestamp = timestamp;
	bus1_queue_link(queue, qn);
	queue->clock = max(queue->clock, timestamp);
	return !was_ready && bus1_queue_peek(queue);
}

/**
 * bus1_queue_remove() - unlink an entry (staged or committed)
 * @queue:	queue
 * @qn:		queued entry
 */
void bus1_queue_remove(struct bus1_queue *queue, struct bus1_queue_node *qn)
{
	lockdep_assert_held(queue->lock);
	if (WARN_ON(!bus1_queue_node_is_queued(qn)))
		return;
	rb_erase_cached(&qn->rb, &queue->tree);
	RB_CLEAR_NODE(&qn->rb);
	qn->timestamp = 0;
}

/**
 * bus1_queue_sync() - move a clock forward
 * @queue:	queue
 * @timestamp:	a timestamp the clock must reach
 *
 * Return: the new clock.
 */
u64 bus1_queue_sync(struct bus1_queue *queue, u64 timestamp)
{
	lockdep_assert_held(queue->lock);
	queue->clock = max(queue->clock, timestamp);
	return queue->clock;
}

/**
 * bus1_queue_peek() - the entry that may be dequeued next
 * @queue:	queue
 *
 * Return: the first entry if it is committed, otherwise NULL (the queue is
 * empty, or a transaction that may still be ordered first is in progress).
 */
struct bus1_queue_node *bus1_queue_peek(struct bus1_queue *queue)
{
	struct rb_node *n = rb_first_cached(&queue->tree);
	struct bus1_queue_node *qn;

	lockdep_assert_held(queue->lock);
	if (!n)
		return NULL;
	qn = rb_entry(n, struct bus1_queue_node, rb);
	return bus1_queue_node_is_committed(qn) ? qn : NULL;
}

/**
 * bus1_queue_has_next() - whether an entry follows a committed one
 * @queue:	queue
 * @qn:		a committed entry of @queue (the one a RECV claimed)
 *
 * Return: true if the entry after @qn is committed: it may be dequeued as
 * soon as @qn is gone (RECV's BUS1_RECV_FLAG_MORE).
 */
bool bus1_queue_has_next(struct bus1_queue *queue, struct bus1_queue_node *qn)
{
	struct rb_node *n;

	lockdep_assert_held(queue->lock);
	if (WARN_ON(!bus1_queue_node_is_committed(qn)))
		return false;
	n = rb_next(&qn->rb);
	return n && bus1_queue_node_is_committed(rb_entry(n, struct bus1_queue_node, rb));
}
