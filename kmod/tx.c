// SPDX-License-Identifier: GPL-2.0
/*
 * Transactions: staging and commit of multicasts. See tx.h and queue.h.
 */

#include <linux/atomic.h>
#include <linux/kernel.h>
#include <linux/lockdep.h>
#include <linux/poll.h>
#include <linux/sched.h>
#include "message.h"
#include "node.h"
#include "peer.h"
#include "tx.h"

/**
 * bus1_tx_init() - start a transaction
 * @tx:		transaction
 * @sender:	sending peer (the caller keeps it referenced)
 */
void bus1_tx_init(struct bus1_tx *tx, struct bus1_peer *sender)
{
	tx->sender = sender;
	INIT_LIST_HEAD(&tx->entries);
	tx->clock = 0;
	tx->seq = atomic64_inc_return(&sender->tx_seq);
	tx->index = 0;
	tx->timestamp = 0;
}

/**
 * bus1_tx_stage() - stage an entry on its destination's queue
 * @tx:		transaction
 * @entry:	entry (data entries must be reserved and filled)
 *
 * On success the transaction owns the entry.
 *
 * Return: 0, or -EHOSTUNREACH if the destination is disconnected or the
 * destination node (DATA, NODE_RELEASE) is being destroyed (the entry stays
 * the caller's).
 */
int bus1_tx_stage(struct bus1_tx *tx, struct bus1_entry *entry)
{
	struct bus1_peer *peer = entry->peer;
	u64 clock;

	if (WARN_ON(tx->timestamp))
		return -EINVAL;
	lockdep_assert_not_held(&peer->lock);

	mutex_lock(&peer->lock);
	if (peer->disconnected || (entry->node && entry->node->destroying)) {
		mutex_unlock(&peer->lock);
		return -EHOSTUNREACH;
	}
	clock = bus1_queue_stage(&peer->queue, &entry->qnode, tx->sender->id, tx->seq,
				 tx->index++);
	if (entry->message && entry->message->n_unix)
		peer->n_unix_entries++;
	mutex_unlock(&peer->lock);

	tx->clock = max(tx->clock, clock);
	list_add_tail(&entry->tx_link, &tx->entries);
	return 0;
}

/**
 * bus1_tx_timestamp() - pick the commit timestamp
 * @tx:		transaction with everything staged
 *
 * The timestamp is above the sender's clock and above every destination's
 * clock at staging; the sender's clock moves to it, so a later transaction
 * of the same sender gets a larger one.
 *
 * Return: the commit timestamp.
 */
u64 bus1_tx_timestamp(struct bus1_tx *tx)
{
	struct bus1_peer *sender = tx->sender;

	lockdep_assert_not_held(&sender->lock);
	mutex_lock(&sender->lock);
	tx->timestamp = max(sender->queue.clock, tx->clock) + 2;
	bus1_queue_sync(&sender->queue, tx->timestamp);
	mutex_unlock(&sender->lock);
	return tx->timestamp;
}

/**
 * bus1_tx_commit() - commit every staged entry
 * @tx:		transaction, after bus1_tx_timestamp()
 *
 * An entry whose destination disconnected since staging is dropped: the
 * message was delivered to a peer that then went away.
 */
void bus1_tx_commit(struct bus1_tx *tx)
{
	struct bus1_entry *entry, *t;
	struct bus1_peer *peer;
	LIST_HEAD(drop);

	if (WARN_ON(!tx->timestamp))
		bus1_tx_timestamp(tx);

	list_for_each_entry_safe(entry, t, &tx->entries, tx_link) {
		peer = entry->peer;
		list_del_init(&entry->tx_link);

		mutex_lock(&peer->lock);
		if (peer->disconnected) {
			bus1_entry_unlink(entry, false);
			list_add_tail(&entry->tx_link, &drop);
		} else if (bus1_queue_commit(&peer->queue, &entry->qnode, tx->timestamp)) {
			/*
			 * Under the lock: once it is unlocked, the receiver may
			 * dequeue the entry and drop the last peer reference.
			 */
			wake_up_interruptible_poll(&peer->waitq, EPOLLIN | EPOLLRDNORM);
		}
		mutex_unlock(&peer->lock);
	}

	bus1_entry_free_list(&drop);
}

/**
 * bus1_tx_abort() - take back every staged entry
 * @tx:		transaction, not committed
 *
 * The entries are unlinked (slices freed, charges returned) and freed.
 */
void bus1_tx_abort(struct bus1_tx *tx)
{
	struct bus1_entry *entry;
	struct bus1_peer *peer;

	list_for_each_entry(entry, &tx->entries, tx_link) {
		peer = entry->peer;
		mutex_lock(&peer->lock);
		bus1_entry_unlink(entry, false);
		mutex_unlock(&peer->lock);
		/*
		 * An aborted staged entry may have blocked the queue: what was
		 * behind it may be ready now.
		 */
		wake_up_interruptible_poll(&peer->waitq, EPOLLIN | EPOLLRDNORM);
	}
	bus1_entry_free_list(&tx->entries);
}
