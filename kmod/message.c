// SPDX-License-Identifier: GPL-2.0
/*
 * Messages and queue entries: see message.h.
 */

#include <linux/bitmap.h>
#include <linux/cred.h>
#include <linux/err.h>
#include <linux/file.h>
#include <linux/lockdep.h>
#include <linux/mm.h>
#include <linux/pid.h>
#include <linux/sched.h>
#include <linux/slab.h>
#include <linux/uaccess.h>
#include <linux/uio.h>
#include "message.h"
#include "node.h"
#include "peer.h"
#include "pool.h"
#include "gc.h"
#include "stats.h"
#include "uapi/linux/bus1.h"

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
 * bus1_entry_new_notify() - allocate a node destruction notification
 * @gfp:	allocation flags (accounted to the caller's memory cgroup)
 *
 * A destruction cannot fail half-way (every holder must learn about it), so
 * it must not need memory it could be refused: the entry is allocated
 * before, when the handle it will be sent for is made (or, for the owner's
 * own notification, before a destroy call commits to anything), within the
 * caller's memory cgroup limit. It belongs to nobody until
 * bus1_entry_attach_notify() addresses it; until then it is freed with
 * bus1_entry_discard_notify().
 *
 * Return: the entry, or NULL.
 */
struct bus1_entry *bus1_entry_new_notify(gfp_t gfp)
{
	return bus1_entry_new(NULL, BUS1_ENTRY_NODE_DESTROY, gfp);
}

/**
 * bus1_entry_attach_notify() - address a preallocated destruction notification
 * @entry:	entry from bus1_entry_new_notify(), not attached yet
 * @peer:	the peer to notify (alive: it still holds a handle of the node)
 * @handle_id:	its handle id of the destroyed node
 *
 * The entry is charged one object to @peer's user even beyond
 * quota_objects (a destruction cannot fail), until it is freed by
 * bus1_entry_free() (see DOC: Nodes and handles).
 */
void bus1_entry_attach_notify(struct bus1_entry *entry, struct bus1_peer *peer, u64 handle_id)
{
	WARN_ON(entry->type != BUS1_ENTRY_NODE_DESTROY || entry->peer);
	entry->peer = bus1_peer_ref(peer);
	entry->handle_id = handle_id;
	bus1_user_force_objects(peer->user, 1);
}

/**
 * bus1_entry_discard_notify() - free a destruction notification never attached
 * @entry:	entry from bus1_entry_new_notify(), or NULL
 */
void bus1_entry_discard_notify(struct bus1_entry *entry)
{
	if (!entry)
		return;
	WARN_ON(entry->type != BUS1_ENTRY_NODE_DESTROY || entry->peer);
	kfree(entry);
	bus1_stat_dec(BUS1_STAT_ENTRIES);
}

/**
 * bus1_entry_discard_notify_list() - free unattached notifications
 * @list:	entries from bus1_entry_new_notify() linked by @tx_link; emptied
 */
void bus1_entry_discard_notify_list(struct list_head *list)
{
	struct bus1_entry *entry, *t;

	list_for_each_entry_safe(entry, t, list, tx_link) {
		list_del_init(&entry->tx_link);
		bus1_entry_discard_notify(entry);
	}
}

/**
 * bus1_entry_new_release() - create a node release notification
 * @node:	the node nothing remote refers to any more
 * @spare:	an unattached entry of bus1_entry_new_notify() to use (the
 *		released handle's, which it no longer needs), or NULL
 *
 * Like destruction notifications, it must not be lost, and is small: without
 * @spare it is allocated, and this allocation does not fail.
 *
 * Return: the entry, for the node's owner.
 */
struct bus1_entry *bus1_entry_new_release(struct bus1_node *node, struct bus1_entry *spare)
{
	struct bus1_entry *entry = spare;

	if (entry) {
		WARN_ON(entry->peer);
		entry->type = BUS1_ENTRY_NODE_RELEASE;
		entry->peer = bus1_peer_ref(node->owner);
	} else {
		entry = bus1_entry_new(node->owner, BUS1_ENTRY_NODE_RELEASE,
				       GFP_KERNEL_ACCOUNT | __GFP_NOFAIL);
	}
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
		if (entry->message && entry->message->n_unix) {
			/* read unlocked by the collector to pick its roots */
			WRITE_ONCE(peer->n_unix_entries, peer->n_unix_entries - 1);
			peer->unix_seq++;
		}
	}
	/* release entries are queued on their node's owner, whose lock we hold */
	if (entry->type == BUS1_ENTRY_NODE_RELEASE && entry->node->release_entry == entry)
		entry->node->release_entry = NULL;
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
	if (entry->type == BUS1_ENTRY_NODE_DESTROY)
		bus1_user_uncharge_objects(entry->peer->user, 1);
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

/* Copy the destinations and set up the per-destination arrays. */
static int bus1_send_import_dests(struct bus1_send *send, u64 __user *udests)
{
	size_t n = send->n_dests;

	/* unicast and small multicasts need no allocation for these */
	if (n <= ARRAY_SIZE(send->dests_stack)) {
		send->dests = send->dests_stack;
		send->errors = send->errors_stack;
		send->entries = send->entries_stack;
		memset(send->errors_stack, 0, sizeof(send->errors_stack));
		memset(send->entries_stack, 0, sizeof(send->entries_stack));
		if (copy_from_user(send->dests, udests, n * sizeof(*send->dests)))
			return -EFAULT;
		return 0;
	}

	send->dests = vmemdup_user(udests, n * sizeof(*send->dests));
	if (IS_ERR(send->dests)) {
		int r = PTR_ERR(send->dests);

		send->dests = NULL;
		return r;
	}
	send->errors = kvcalloc(n, sizeof(*send->errors), GFP_KERNEL);
	send->entries = kvcalloc(n, sizeof(*send->entries), GFP_KERNEL);
	if (!send->errors || !send->entries)
		return -ENOMEM;
	return 0;
}

/* Take a reference on each file the sender names, into the message. */
static int bus1_send_import_fds(struct bus1_send *send, u32 __user *ufds)
{
	struct bus1_message *message = send->message;
	struct file *f;
	u32 *fds;
	size_t i;
	int r = 0;

	if (!message->n_fds)
		return 0;

	fds = vmemdup_user(ufds, message->n_fds * sizeof(*fds));
	if (IS_ERR(fds))
		return PTR_ERR(fds);

	for (i = 0; i < message->n_fds; i++) {
		f = fds[i] > INT_MAX ? NULL : fget(fds[i]);
		if (!f) {
			r = -EBADF;
			break;
		}
		/* bus1 and io_uring fds could close reference cycles (gc.h) */
		r = bus1_gc_check_file(f);
		if (r < 0) {
			fput(f);
			break;
		}
		message->n_unix += r;
		message->files[i] = f;
		r = 0;
	}
	kvfree(fds);
	/* counted even on failure: the message puts what it holds when freed */
	bus1_gc_track(message->n_unix);
	return r;
}

/*
 * Resolve the carried handles into the message, under the sender's lock.
 * CREATE entries make new nodes; once the lock is dropped their ids are
 * written back to user space. They are marked in @created, so that a SEND
 * that fails discards them (bus1_send_deinit()).
 */
static int bus1_send_import_handles(struct bus1_send *send, u64 __user *uids)
{
	struct bus1_peer *peer = send->sender;
	struct bus1_node *node;
	bool c, any = false;
	size_t i;
	int r = 0;

	if (!send->n_handles)
		return 0;

	send->ids = vmemdup_user(uids, send->n_handles * sizeof(*send->ids));
	if (IS_ERR(send->ids)) {
		r = PTR_ERR(send->ids);
		send->ids = NULL;
		return r;
	}
	send->created = bitmap_zalloc(send->n_handles, GFP_KERNEL);
	if (!send->created)
		return -ENOMEM;

	mutex_lock(&peer->lock);
	if (peer->disconnected) {
		mutex_unlock(&peer->lock);
		return -ESHUTDOWN;
	}
	/* check before creating anything */
	for (i = 0; i < send->n_handles; i++) {
		if (send->ids[i] != BUS1_HANDLE_CREATE &&
		    !bus1_handle_lookup(peer, send->ids[i])) {
			mutex_unlock(&peer->lock);
			return -ENXIO;
		}
	}
	for (i = 0; i < send->n_handles; i++) {
		node = bus1_handle_resolve(peer, send->ids[i], &send->ids[i], &c);
		if (IS_ERR(node)) {
			r = PTR_ERR(node);
			break;
		}
		send->message->nodes[i] = node;
		bus1_node_carry(node);
		if (c) {
			__set_bit(i, send->created);
			any = true;
		}
	}
	mutex_unlock(&peer->lock);

	if (!r && any && copy_to_user(uids, send->ids, send->n_handles * sizeof(*send->ids)))
		r = -EFAULT;
	return r;
}

/**
 * bus1_send_import() - import a SEND from the sender's memory
 * @send:	the SEND to fill in
 * @sender:	the sending peer (referenced by the caller, no lock held)
 * @uarg:	the struct bus1_cmd_send in the sender's memory
 *
 * Copies and checks the command, imports the data vector (the data itself
 * stays in the sender's memory, see @send->iter), copies the destinations,
 * creates the message charged to the calling task's real uid and resolves
 * the carried files and handles into it. CREATE entries make new nodes and
 * are written back to user space. The errors of the message itself are
 * therefore all reported here, before any destination is looked at.
 *
 * Runs without any lock held across a user copy.
 *
 * On success the caller delivers @send (bus1_tx_send()) and then releases
 * it with bus1_send_deinit(); on failure nothing is left to release.
 *
 * Return: 0 or a negative errno.
 */
int bus1_send_import(struct bus1_send *send, struct bus1_peer *sender, void __user *uarg)
{
	struct bus1_cmd_send cmd;
	struct bus1_user *user;
	ssize_t len;
	int r;

	might_sleep();
	lockdep_assert_not_held(&sender->lock);

	/* everything but the room for small SENDs, which is set up on use */
	memset(send, 0, offsetof(struct bus1_send, iov_stack));
	send->sender = sender;

	if (copy_from_user(&cmd, uarg, sizeof(cmd)))
		return -EFAULT;
	if (cmd.flags & ~BUS1_SEND_FLAG_CONTINUE)
		return -EINVAL;
	if (!cmd.n_destinations || cmd.n_destinations > bus1_max_destinations ||
	    cmd.n_vecs > UIO_MAXIOV || cmd.n_handles > bus1_max_handles ||
	    cmd.n_fds > bus1_max_fds)
		return -EINVAL;

	if (READ_ONCE(sender->disconnected))
		return -ESHUTDOWN;

	send->flags = cmd.flags;
	send->n_dests = cmd.n_destinations;
	send->uerrors = u64_to_user_ptr(cmd.ptr_errors);
	send->n_handles = cmd.n_handles;

	if (cmd.n_vecs) {
		send->iov = send->iov_stack;
		len = import_iovec(ITER_SOURCE, u64_to_user_ptr(cmd.ptr_vecs), cmd.n_vecs,
				   ARRAY_SIZE(send->iov_stack), &send->iov, &send->iter);
		if (len < 0)
			return len;
	} else {
		iov_iter_kvec(&send->iter, ITER_SOURCE, NULL, 0, 0);
		len = 0;
	}
	if (len > sender->pool.size) {
		r = -EMSGSIZE;
		goto err;
	}

	r = bus1_send_import_dests(send, u64_to_user_ptr(cmd.ptr_destinations));
	if (r < 0)
		goto err;

	/*
	 * Charge the sending task's real uid. Usually that is the opener's,
	 * whose user object the peer keeps: no lookup on the common path.
	 */
	if (uid_eq(current_uid(), sender->user->uid))
		user = bus1_user_ref(sender->user);
	else
		user = bus1_user_ref_by_uid(current_uid());
	if (IS_ERR(user)) {
		r = PTR_ERR(user);
		goto err;
	}
	send->message = bus1_message_new(user, len, cmd.n_handles, cmd.n_fds);
	bus1_user_unref(user);
	if (IS_ERR(send->message)) {
		r = PTR_ERR(send->message);
		send->message = NULL;
		goto err;
	}

	r = bus1_send_import_fds(send, u64_to_user_ptr(cmd.ptr_fds));
	if (r < 0)
		goto err;
	r = bus1_send_import_handles(send, u64_to_user_ptr(cmd.ptr_handles));
	if (r < 0)
		goto err;
	return 0;

err:
	bus1_send_deinit(send, r);
	return r;
}

/**
 * bus1_send_deinit() - release an imported SEND
 * @send:	the SEND, imported by bus1_send_import(); bus1_tx_send() left
 *		no entry in it
 * @r:		its result: if negative, the nodes it created are discarded
 *
 * Takes the sender's lock to discard created nodes; the caller holds no
 * peer lock.
 */
void bus1_send_deinit(struct bus1_send *send, int r)
{
	struct bus1_peer *sender = send->sender;
	size_t i;

	lockdep_assert_not_held(&sender->lock);

	if (r < 0 && send->created) {
		mutex_lock(&sender->lock);
		for_each_set_bit(i, send->created, send->n_handles)
			bus1_handle_discard_created(sender, send->ids[i]);
		mutex_unlock(&sender->lock);
	}
	bitmap_free(send->created);
	send->created = NULL;
	kvfree(send->ids);
	send->ids = NULL;
	send->message = bus1_message_unref(send->message);
	if (send->entries != send->entries_stack)
		kvfree(send->entries);
	if (send->errors != send->errors_stack)
		kvfree(send->errors);
	if (send->dests != send->dests_stack)
		kvfree(send->dests);
	send->entries = NULL;
	send->errors = NULL;
	send->dests = NULL;
	kfree(send->iov);
	send->iov = NULL;
}
