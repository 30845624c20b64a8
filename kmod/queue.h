/* SPDX-License-Identifier: GPL-2.0 */
#ifndef __BUS1_QUEUE_H
#define __BUS1_QUEUE_H

/**
 * DOC: Queues and message ordering
 *
 * Every peer has one queue of entries (data messages and node destruction
 * notifications), kept sorted by a key (timestamp, sender, seq, index) in
 * an rb-tree, and one clock. Timestamps are Lamport-style logical times; clocks
 * only grow and are always even. An entry's timestamp is odd while the entry
 * is *staged* (its final timestamp is not known yet) and even once it is
 * *committed*. @sender is a globally unique id of the sending peer, @seq
 * numbers the transactions of that sender and @index is the entry's position
 * inside its transaction, so no two entries of a queue ever have the same
 * key (two transactions of one sender may stage with the same provisional
 * timestamp; committed ones never share a timestamp).
 *
 * Sending (tx.c) never holds more than one peer lock at a time, and there is
 * no global lock:
 *
 *   1. Stage: for every destination D, under D's lock, insert the entry with
 *      the provisional timestamp D.clock + 1 and remember D.clock.
 *   2. Pick the commit timestamp T = max(S.clock, all remembered D.clock) + 2,
 *      and set S.clock = T, under the sender S's lock (so two transactions of
 *      one sender never share a timestamp).
 *   3. Commit: for every D, under D's lock, re-key the entry with T and set
 *      D.clock = max(D.clock, T).
 *
 * An entry may be dequeued only when it is the first entry of its queue and
 * committed. The guarantees follow from two facts: (a) a staged entry's
 * provisional timestamp is smaller than its final one (D.clock + 1 <
 * T), and (b) once an entry with timestamp T is committed on D, D.clock >= T,
 * so every later staging on D uses a timestamp > T.
 *
 * - Nothing is dequeued out of order: when the first entry E (key K) of D is
 *   committed, every staged entry of D is behind E, so by (a) its final key
 *   is larger than K too; every entry staged later is larger by (b).
 *   Dequeuing in key order is therefore final.
 * - Consistency: a transaction gives the same key (T, sender, index-order) on
 *   every destination, and each queue delivers in key order, so any two
 *   peers that receive the same two messages see them in the same order.
 * - Causality: after a peer dequeues a message with timestamp T, its clock
 *   is >= T (set at commit); anything it sends afterwards gets a timestamp
 *   > its clock >= T (step 2), so the effect is ordered after its cause on
 *   every peer that receives both. Successive sends of one peer have strictly
 *   increasing timestamps, which gives per-sender FIFO order.
 *
 * A staged entry at the front of a queue blocks the queue only between the
 * two short locked steps of one transaction: data is copied into the pools
 * of all destinations before anything is staged, and nothing between
 * staging and commit touches user memory, so readers never wait on user
 * memory, not even on that of a large multicast's sender.
 *
 * Locking: every function requires the lock of the peer owning the queue
 * (@lock, asserted).
 */

#include <linux/rbtree.h>
#include <linux/types.h>

struct mutex;

/**
 * struct bus1_queue_node - an entry's link into a queue
 * @rb:		link into the queue's tree
 * @timestamp:	0 if not queued, odd if staged, even if committed
 * @sender:	unique id of the sending peer
 * @seq:	transaction number of that sender
 * @index:	position in the transaction
 */
struct bus1_queue_node {
	struct rb_node rb;
	u64 timestamp;
	u64 sender;
	u64 seq;
	u64 index;
};

/**
 * struct bus1_queue - a peer's queue
 * @tree:	entries, ordered by (timestamp, sender, seq, index)
 * @clock:	the peer's clock (even)
 * @lock:	the owning peer's lock
 */
struct bus1_queue {
	struct rb_root_cached tree;
	u64 clock;
	struct mutex *lock;		/* the owner peer's lock: guards the queue */
};

static inline bool bus1_queue_node_is_queued(const struct bus1_queue_node *qn)
{
	return qn->timestamp != 0;
}

static inline bool bus1_queue_node_is_committed(const struct bus1_queue_node *qn)
{
	return qn->timestamp && !(qn->timestamp & 1);
}

void bus1_queue_init(struct bus1_queue *queue, struct mutex *lock);
void bus1_queue_deinit(struct bus1_queue *queue);
u64 bus1_queue_stage(struct bus1_queue *queue, struct bus1_queue_node *qn,
		     u64 sender, u64 seq, u64 index);
bool bus1_queue_commit(struct bus1_queue *queue, struct bus1_queue_node *qn, u64 timestamp);
void bus1_queue_remove(struct bus1_queue *queue, struct bus1_queue_node *qn);
u64 bus1_queue_sync(struct bus1_queue *queue, u64 timestamp);
struct bus1_queue_node *bus1_queue_peek(struct bus1_queue *queue);
bool bus1_queue_has_next(struct bus1_queue *queue, struct bus1_queue_node *qn);

#endif /* __BUS1_QUEUE_H */
