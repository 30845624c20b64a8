// SPDX-License-Identifier: GPL-2.0
/*
 * Messages and queue entries: see message.h.
 */

#include <linux/cred.h>
#include <linux/err.h>
#include <linux/file.h>
#include <linux/lockdep.h>
#include <linux/mm.h>
#include <linux/pid.h>
#include <linux/sched.h>
#include <linux/slab.h>
#include <linux/uio.h>
#include "message.h"
#include "node.h"
#include "peer.h"
#include "pool.h"
#include "gc.h"
#include "stats.h"

/**
 * bus1_message_new() - allocate a message for the current task
 * @user:	the sender's user (a reference is taken)
 * @n_bytes:	data size
 * @n_handles:	number of nodes that will be carried
 * @n_fds:	number of files that will be carried
 *
 * The credentials, pid and tid of current are recorded. The node and file
 * arrays start zeroed; the caller fills them.
 *
 * Return: the message or ERR_PTR(-ENOMEM).
 */
struct bus1_message *bus1_message_new(struct bus1_user *user, size_t n_bytes,
				      size_t n_handles, size_t n_fds)
{
	struct bus1_message *message;

	message = kzalloc(sizeof(*message), GFP_KERNEL_ACCOUNT);
	if (!message)
		return ERR_PTR(-ENOMEM);

	kref_init(&message->ref);
	message->n_bytes = n_bytes;
	message->n_handles = n_handles;
	message->n_fds = n_fds;
	if (n_handles) {
		message->nodes = kvcalloc(n_handles, sizeof(*message->nodes), GFP_KERNEL_ACCOUNT);
		if (!message->nodes)
			goto err;
	}
	if (n_fds) {
		message->files = kvcalloc(n_fds, sizeof(*message->files), GFP_KERNEL_ACCOUNT);
		if (!message->files)
			goto err;
	}
	message->user = bus1_user_ref(user);
	message->cred = get_current_cred();
	message->pid = get_task_pid(current, PIDTYPE_TGID);
	message->tid = get_task_pid(current, PIDTYPE_PID);
	bus1_stat_inc(BUS1_STAT_MESSAGES);
	return message;

err:
	kvfree(message->nodes);
	kfree(message);
	return ERR_PTR(-ENOMEM);
}

/**
 * bus1_message_ref() - take a reference
 * @message:	message
 *
 * Return: @message
 */
struct bus1_message *bus1_message_ref(struct bus1_message *message)
{
	kref_get(&message->ref);
	return message;
}

static void bus1_message_free(struct kref *ref)
{
	struct bus1_message *message = container_of(ref, struct bus1_message, ref);
	size_t i;

	for (i = 0; i < message->n_handles && message->nodes[i]; i++) {
		bus1_node_uncarry(message->nodes[i]);
		bus1_node_unref(message->nodes[i]);
	}
	for (i = 0; i < message->n_fds; i++)
		if (message->files[i])
			fput(message->files[i]);
	bus1_gc_untrack(message->n_unix);
	kvfree(message->nodes);
	kvfree(message->files);
	put_pid(message->tid);
	put_pid(message->pid);
	put_cred(message->cred);
	bus1_user_unref(message->user);
	kfree(message);
	bus1_stat_dec(BUS1_STAT_MESSAGES);
}

/**
 * bus1_message_unref() - drop a reference (no lock held)
 * @message:	message or NULL
 *
 * Return: NULL
 */
struct bus1_message *bus1_message_unref(struct bus1_message *message)
{
	if (message)
		kref_put(&message->ref, bus1_message_free);
	return NULL;
}

/**
 * bus1_message_slice_size() - bytes a message needs in a receiver's pool
 * @message:	message
 *
 * Return: the size of the data padded to 8, plus the handle and fd arrays.
 */
size_t bus1_message_slice_size(const struct bus1_message *message)
{
	return ALIGN(message->n_bytes, 8) + message->n_handles * sizeof(u64) +
	       message->n_fds * sizeof(u32);
}

static struct bus1_entry *bus1_entry_new(struct bus1_peer *peer, unsigned int type, gfp_t gfp)
{
	struct bus1_entry *entry;

	entry = kzalloc(sizeof(*entry), gfp);
	if (!entry)
		return NULL;
	RB_CLEAR_NODE(&entry->qnode.rb);
	INIT_LIST_HEAD(&entry->tx_link);
	entry->peer = bus1_peer_ref(peer);
	entry->type = type;
	bus1_stat_inc(BUS1_STAT_ENTRIES);
	return entry;
}

/**
 * bus1_entry_new_data() - create the entry of a message for one destination
 * @peer:	the destination peer (the node's owner)
 * @message:	the message
 * @node:	the destination node
 *
 * Return: the entry or NULL.
 */
struct bus1_entry *bus1_entry_new_data(struct bus1_peer *peer, struct bus1_message *message,
				       struct bus1_node *node)
{
	struct bus1_entry *entry;

	entry = bus1_entry_new(peer, BUS1_ENTRY_DATA, GFP_KERNEL_ACCOUNT);
	if (!entry)
		return NULL;
	entry->message = bus1_message_ref(message);
	entry->node = bus1_node_ref(node);
	return entry;
}

/**
 * bus1_entry_new_notify() - create a node destruction notification
 * @peer:	the peer to notify
 * @handle_id:	its handle id of the destroyed node
 *
 * Destruction cannot fail half-way (every holder must learn about it), and
 * the entry is small, so this allocation does not fail.
 *
 * Return: the entry.
 */
struct bus1_entry *bus1_entry_new_notify(struct bus1_peer *peer, u64 handle_id)
{
	struct bus1_entry *entry;

	entry = bus1_entry_new(peer, BUS1_ENTRY_NODE_DESTROY,
			       GFP_KERNEL_ACCOUNT | __GFP_NOFAIL);
	entry->handle_id = handle_id;
	return entry;
}

/**
 * bus1_entry_new_release() - create a node release notification
 * @node:	the node nothing remote refers to any more
 *
 * Like destruction notifications, it must not be lost, and is small.
 *
 * Return: the entry, for the node's owner.
 */
struct bus1_entry *bus1_entry_new_release(struct bus1_node *node)
{
	struct bus1_entry *entry;

	entry = bus1_entry_new(node->owner, BUS1_ENTRY_NODE_RELEASE,
			       GFP_KERNEL_ACCOUNT | __GFP_NOFAIL);
	entry->node = bus1_node_ref(node);
	return entry;
}

/**
 * bus1_entry_reserve() - charge a data entry and reserve its slice
 * @entry:	data entry, not reserved yet
 *
 * Takes the destination's lock.
 *
 * The sender is charged to its user (global quotas) and, unless it is the
 * destination's own user (the uid that opened the destination peer), to its
 * share of the destination's pool (see DOC: Pools): a user can flood its own
 * peers, but never take more than half of what is left of somebody else's
 * pool.
 *
 * Return: 0, -EHOSTUNREACH if the destination is disconnected or the node
 * destroyed, -EDQUOT if the sender's user is over quota or over its share of
 * the destination's pool, -ENOSPC if the destination's pool is full, or
 * -ENOMEM.
 */
int bus1_entry_reserve(struct bus1_entry *entry)
{
	struct bus1_peer *peer = entry->peer;
	struct bus1_user *user = entry->message->user;
	struct bus1_slice *slice;
	size_t size = bus1_message_slice_size(entry->message);
	int r;

	/* what the message needs (the slice may be up to 7 bytes larger) */
	entry->charge.bytes = max_t(size_t, size, 8);
	entry->charge.messages = 1;
	entry->charge.handles = entry->message->n_handles;
	entry->charge.fds = entry->message->n_fds;

	mutex_lock(&peer->lock);
	if (peer->disconnected || entry->node->destroying) {
		r = -EHOSTUNREACH;
		goto out;
	}
	r = bus1_user_charge(user, &entry->charge);
	if (r < 0)
		goto out;
	slice = bus1_pool_alloc(&peer->pool, size, !uid_eq(user->uid, peer->user->uid),
				user->uid);
	if (IS_ERR(slice)) {
		bus1_user_uncharge(user, &entry->charge);
		r = PTR_ERR(slice);
		goto out;
	}
	entry->slice = slice;
	entry->charged = true;
	bus1_charge_add(&entry->node->queued, &entry->charge);
	r = 0;
out:
	mutex_unlock(&peer->lock);
	return r;
}

/**
 * bus1_entry_copy_data() - copy the message data into the reserved slice
 * @entry:	reserved data entry
 * @iter:	the data; a copy of it is consumed, @iter is not advanced
 *
 * Runs without the destination's lock: the slice is reserved for us.
 *
 * Return: 0 or a negative errno (-EFAULT for unreadable sender memory).
 */
int bus1_entry_copy_data(struct bus1_entry *entry, struct iov_iter *iter)
{
	struct iov_iter it = *iter;

	lockdep_assert_not_held(&entry->peer->lock);
	return bus1_pool_write_iter(&entry->peer->pool, entry->slice, 0, &it);
}

/**
 * bus1_entry_unlink() - take an entry out of its destination
 * @entry:	entry; the destination's lock must be held
 * @publish:	the receiver dequeued it: hand the slice over instead of
 *		freeing it
 *
 * Removes it from the queue, frees or publishes its slice and returns its
 * charge. The entry itself is freed later with bus1_entry_free(), outside
 * the lock.
 */
void bus1_entry_unlink(struct bus1_entry *entry, bool publish)
{
	struct bus1_peer *peer = entry->peer;

	lockdep_assert_held(&peer->lock);

	if (bus1_queue_node_is_queued(&entry->qnode)) {
		bus1_queue_remove(&peer->queue, &entry->qnode);
		if (entry->message && entry->message->n_unix)
			peer->n_unix_entries--;
	}
	if (entry->slice) {
		if (publish)
			bus1_pool_publish(&peer->pool, entry->slice);
		else
			bus1_pool_free(&peer->pool, entry->slice);
		entry->slice = NULL;
	}
	if (entry->charged) {
		bus1_user_uncharge(entry->message->user, &entry->charge);
		/* data entries are queued on their node's owner, whose lock we hold */
		WARN_ON(entry->node->owner != peer);
		bus1_charge_sub(&entry->node->queued, &entry->charge);
		entry->charged = false;
	}
}

/**
 * bus1_entry_free() - free an unlinked entry (no peer lock held)
 * @entry:	entry or NULL
 */
void bus1_entry_free(struct bus1_entry *entry)
{
	if (!entry)
		return;
	WARN_ON(bus1_queue_node_is_queued(&entry->qnode));
	WARN_ON(entry->slice || entry->charged);
	bus1_node_unref(entry->node);
	bus1_message_unref(entry->message);
	bus1_peer_unref(entry->peer);
	kfree(entry);
	bus1_stat_dec(BUS1_STAT_ENTRIES);
}

/**
 * bus1_entry_free_list() - free unlinked entries linked by @tx_link
 * @list:	list head; emptied
 */
void bus1_entry_free_list(struct list_head *list)
{
	struct bus1_entry *entry, *t;

	list_for_each_entry_safe(entry, t, list, tx_link) {
		list_del_init(&entry->tx_link);
		bus1_entry_free(entry);
	}
}
