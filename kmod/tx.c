// SPDX-License-Identifier: GPL-2.0
/*
 * Transactions: staging and commit of multicasts, and the transaction of a
 * SEND. See tx.h and queue.h.
 */

#include <linux/atomic.h>
#include <linux/err.h>
#include <linux/kernel.h>
#include <linux/lockdep.h>
#include <linux/poll.h>
#include <linux/sched.h>
#include <linux/uaccess.h>
#include "message.h"
#include "node.h"
#include "peer.h"
#include "pool.h"
#include "tx.h"
#include "uapi/linux/bus1.h"

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
 * A NODE_RELEASE entry supersedes the one its node had queued
 * (bus1_node_supersede_release()).
 *
 * Return: 0, or -EHOSTUNREACH if the destination is disconnected or the
 * destination node (DATA, NODE_RELEASE) is being destroyed (the entry stays
 * the caller's).
 */
int bus1_tx_stage(struct bus1_tx *tx, struct bus1_entry *entry)
{
	struct bus1_peer *peer = entry->peer;
	struct bus1_entry *superseded = NULL;
	u64 clock;

	if (WARN_ON(tx->timestamp))
		return -EINVAL;
	lockdep_assert_not_held(&peer->lock);

	mutex_lock(&peer->lock);
	if (peer->disconnected || (entry->node && entry->node->destroying)) {
		mutex_unlock(&peer->lock);
		return -EHOSTUNREACH;
	}
	if (entry->type == BUS1_ENTRY_NODE_RELEASE)
		superseded = bus1_node_supersede_release(entry->node, entry);
	clock = bus1_queue_stage(&peer->queue, &entry->qnode, tx->sender->id, tx->seq,
				 tx->index++);
	if (entry->message && entry->message->n_unix) {
		/* read unlocked by the collector to pick its roots */
		WRITE_ONCE(peer->n_unix_entries, peer->n_unix_entries + 1);
		peer->unix_seq++;
	}
	mutex_unlock(&peer->lock);
	bus1_entry_free(superseded);

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
 * message was delivered to a peer that then went away. So is a NODE_RELEASE
 * that a later one superseded while it was staged.
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
		} else if (entry->type == BUS1_ENTRY_NODE_RELEASE &&
			   entry->node->release_entry != entry) {
			bus1_entry_unlink(entry, false);
			list_add_tail(&entry->tx_link, &drop);
			/* it may have blocked what is behind it, as in an abort */
			if (bus1_queue_peek(&peer->queue))
				wake_up_interruptible_poll(&peer->waitq, EPOLLIN | EPOLLRDNORM);
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

/*
 * Reserve a slice for the message of @send at the destination @dest (one of
 * the sender's handle ids). Return the entry, or an ERR_PTR(): -ENOMEM fails
 * the whole SEND, any other errno only this destination.
 */
static struct bus1_entry *bus1_tx_send_reserve(struct bus1_send *send, u64 dest)
{
	struct bus1_peer *sender = send->sender;
	struct bus1_handle *handle;
	struct bus1_entry *entry;
	struct bus1_node *node;
	int r;

	mutex_lock(&sender->lock);
	handle = sender->disconnected ? NULL : bus1_handle_lookup(sender, dest);
	node = handle ? bus1_node_ref(handle->node) : NULL;
	mutex_unlock(&sender->lock);
	if (!node)
		return ERR_PTR(-ENXIO);

	entry = bus1_entry_new_data(node->owner, send->message, node);
	bus1_node_unref(node);
	if (!entry)
		return ERR_PTR(-ENOMEM);
	r = bus1_entry_reserve(entry);
	if (r < 0) {
		bus1_entry_free(entry);
		return ERR_PTR(r);
	}
	return entry;
}

/* Take back an entry that was reserved (and maybe filled), never staged. */
static void bus1_tx_send_discard(struct bus1_entry *entry)
{
	mutex_lock(&entry->peer->lock);
	bus1_entry_unlink(entry, false);
	mutex_unlock(&entry->peer->lock);
	bus1_pool_punch(&entry->peer->pool);
	bus1_entry_free(entry);
}

/**
 * bus1_tx_send() - deliver an imported SEND to its destinations
 * @send:	the SEND (bus1_send_import())
 *
 * The SEND's transaction, in three steps, so that no destination waits on
 * the sender's memory:
 *
 *   1. reserve a slice at every destination (charges, pool space);
 *   2. copy the data into every slice, unlocked, nothing staged yet (a
 *      large multicast or a sender whose memory faults slowly delays only
 *      its own message), and write the per-destination errors back;
 *   3. stage, timestamp and commit: short locked steps, no user memory.
 *
 * Without BUS1_SEND_FLAG_CONTINUE a destination failing in step 1 ends the
 * SEND there: the other destinations are reported as ECANCELED and nothing
 * is delivered. A destination that disconnects or whose node is destroyed
 * between 1 and 3 is treated as if the message had been delivered and then
 * dropped, which is what would happen a moment later anyway.
 *
 * The caller holds no lock; user memory is only touched before anything is
 * staged and with no peer or node lock held. On return no entry is left in
 * @send: what was reserved and not staged has been taken back.
 *
 * Return: 0 if the message was delivered to every destination whose error
 * is 0; else the errno of the first failing destination, -ENOMEM, or -EFAULT
 * if the data or the errors array is not accessible.
 */
int bus1_tx_send(struct bus1_send *send)
{
	struct bus1_entry *entry;
	struct bus1_tx tx;
	size_t i, n_failed = 0;
	int r, first_error = 0;

	might_sleep();
	lockdep_assert_not_held(&send->sender->lock);

	bus1_tx_init(&tx, send->sender);

	/* 1. reserve */
	for (i = 0; i < send->n_dests; i++) {
		entry = bus1_tx_send_reserve(send, send->dests[i]);
		if (IS_ERR(entry)) {
			r = PTR_ERR(entry);
			if (r == -ENOMEM)
				goto out;
			send->errors[i] = -r;
			if (!n_failed++)
				first_error = r;
			continue;
		}
		send->entries[i] = entry;
	}

	if (n_failed && !(send->flags & BUS1_SEND_FLAG_CONTINUE)) {
		for (i = 0; i < send->n_dests; i++)
			if (!send->errors[i])
				send->errors[i] = ECANCELED;
		if (send->uerrors)
			(void)!copy_to_user(send->uerrors, send->errors,
					    send->n_dests * sizeof(*send->errors));
		r = first_error;
		goto out;
	}

	/* 2. copy, and report; nothing is staged yet */
	for (i = 0; i < send->n_dests; i++) {
		if (!send->entries[i])
			continue;
		r = bus1_entry_copy_data(send->entries[i], &send->iter);
		if (r < 0)
			goto out;
	}
	if (send->uerrors && copy_to_user(send->uerrors, send->errors,
					  send->n_dests * sizeof(*send->errors))) {
		r = -EFAULT;
		goto out;
	}

	/* 3. stage and commit */
	for (i = 0; i < send->n_dests; i++) {
		entry = send->entries[i];
		if (!entry)
			continue;
		send->entries[i] = NULL;
		if (bus1_tx_stage(&tx, entry) < 0)
			bus1_tx_send_discard(entry);
	}
	bus1_tx_timestamp(&tx);
	bus1_tx_commit(&tx);
	r = 0;

out:
	for (i = 0; i < send->n_dests; i++) {
		if (send->entries[i]) {
			bus1_tx_send_discard(send->entries[i]);
			send->entries[i] = NULL;
		}
	}
	return r;
}
