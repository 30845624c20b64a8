// SPDX-License-Identifier: GPL-2.0
/*
 * Peers and their ioctls: see peer.h and docs/bus1.7.
 */

#include <linux/atomic.h>
#include <linux/cred.h>
#include <linux/err.h>
#include <linux/file.h>
#include <linux/fs.h>
#include <linux/lockdep.h>
#include <linux/mm.h>
#include <linux/pid.h>
#include <linux/pid_namespace.h>
#include <linux/poll.h>
#include <linux/sched.h>
#include <linux/slab.h>
#include <linux/string.h>
#include <linux/uaccess.h>
#include <linux/uio.h>
#include "gc.h"
#include "message.h"
#include "node.h"
#include "peer.h"
#include "pool.h"
#include "stats.h"
#include "tx.h"
#include "uapi/linux/bus1.h"
#include "user.h"

static atomic64_t bus1_peer_ids = ATOMIC64_INIT(0);

/**
 * bus1_peer_new() - create a peer for the current task
 *
 * Return: the peer or an ERR_PTR().
 */
struct bus1_peer *bus1_peer_new(void)
{
	struct bus1_peer *peer;
	int r;

	peer = kzalloc(sizeof(*peer), GFP_KERNEL_ACCOUNT);
	if (!peer)
		return ERR_PTR(-ENOMEM);

	bus1_stat_inc(BUS1_STAT_PEERS);
	kref_init(&peer->ref);
	peer->id = atomic64_inc_return(&bus1_peer_ids);
	mutex_init(&peer->lock);
	mutex_init(&peer->recv_lock);
	INIT_LIST_HEAD(&peer->gc_link);
	INIT_LIST_HEAD(&peer->gc_hint_link);
	init_waitqueue_head(&peer->waitq);
	bus1_queue_init(&peer->queue, &peer->lock);
	peer->handles_by_id = RB_ROOT;
	peer->handles_by_node = RB_ROOT;

	peer->user = bus1_user_ref_by_uid(current_uid());
	if (IS_ERR(peer->user)) {
		r = PTR_ERR(peer->user);
		peer->user = NULL;
		goto err;
	}
	atomic_inc(&peer->user->peers);
	r = bus1_pool_init(&peer->pool, &peer->lock);
	if (r < 0)
		goto err;
	return peer;

err:
	peer->disconnected = true;
	bus1_peer_unref(peer);
	return ERR_PTR(r);
}

static void bus1_peer_free(struct kref *ref)
{
	struct bus1_peer *peer = container_of(ref, struct bus1_peer, ref);

	WARN_ON(!peer->disconnected);
	WARN_ON(!RB_EMPTY_ROOT(&peer->handles_by_id));
	WARN_ON(!RB_EMPTY_ROOT(&peer->handles_by_node));
	WARN_ON(!list_empty(&peer->gc_link));
	WARN_ON(!list_empty(&peer->gc_hint_link));
	WARN_ON(peer->n_unix_entries);
	bus1_queue_deinit(&peer->queue);
	bus1_pool_deinit(&peer->pool);
	if (peer->user)
		atomic_dec(&peer->user->peers);
	bus1_user_unref(peer->user);
	mutex_destroy(&peer->recv_lock);
	mutex_destroy(&peer->lock);
	kfree(peer);
	bus1_stat_dec(BUS1_STAT_PEERS);
}

/**
 * bus1_peer_ref() - take a reference
 * @peer:	peer or NULL
 *
 * Return: @peer
 */
struct bus1_peer *bus1_peer_ref(struct bus1_peer *peer)
{
	if (peer)
		kref_get(&peer->ref);
	return peer;
}

/**
 * bus1_peer_unref() - drop a reference
 * @peer:	peer or NULL (its lock must not be held by the caller)
 *
 * Return: NULL
 */
struct bus1_peer *bus1_peer_unref(struct bus1_peer *peer)
{
	if (peer)
		kref_put(&peer->ref, bus1_peer_free);
	return NULL;
}

/*
 * Destroy the nodes on @list (linked by destroy_link, each referenced by the
 * list, each marked destroying under @owner's lock), then unlink them and
 * drop the list's references. One transaction carries a NODE_DESTROY
 * notification to every holder of every node, so all of them share one
 * timestamp, which also becomes the nodes' destroyed_ts: the owner drops
 * data entries to these nodes that are ordered after it.
 *
 * Nothing is allocated here (a destruction cannot fail, and memory that
 * must not be refused would go beyond a memory cgroup's limit): the other
 * holders' entries came with their handles (@destroy_entry), and the
 * owner's come from @spare, entries of bus1_entry_new_notify() the caller
 * allocated, one per node, before it marked them. A flush passes NULL: it
 * drops its own queue right after, so the owner gets none. What is left on
 * @spare stays the caller's.
 *
 * The caller holds a reference on @owner and no lock; the last node
 * reference can therefore be dropped under @owner's lock (freeing a node
 * only drops a reference on its owner).
 */
static void bus1_peer_destroy_nodes(struct bus1_peer *owner, struct list_head *list,
				    struct list_head *spare)
{
	struct bus1_entry *entry, *t;
	struct bus1_node *node, *tn;
	struct bus1_handle *handle;
	struct bus1_tx tx;
	LIST_HEAD(pending);
	LIST_HEAD(drop);

	if (list_empty(list))
		return;

	list_for_each_entry(node, list, destroy_link) {
		mutex_lock(&node->lock);
		WARN_ON(node->dead);
		node->dead = true;
		list_for_each_entry(handle, &node->holders, link) {
			if (handle->holder == owner) {
				if (!spare || WARN_ON(list_empty(spare)))
					continue;
				entry = list_first_entry(spare, struct bus1_entry, tx_link);
				list_del_init(&entry->tx_link);
			} else {
				entry = handle->destroy_entry;
				handle->destroy_entry = NULL;
				if (WARN_ON(!entry))
					continue;
			}
			bus1_entry_attach_notify(entry, handle->holder, handle->id);
			list_add_tail(&entry->tx_link, &pending);
		}
		mutex_unlock(&node->lock);
	}

	bus1_tx_init(&tx, owner);
	list_for_each_entry_safe(entry, t, &pending, tx_link) {
		list_del_init(&entry->tx_link);
		/* a disconnected holder needs no notification */
		if (bus1_tx_stage(&tx, entry) < 0)
			list_add_tail(&entry->tx_link, &drop);
	}

	bus1_tx_timestamp(&tx);
	mutex_lock(&owner->lock);
	list_for_each_entry(node, list, destroy_link) {
		node->destroyed_ts = tx.timestamp;
		node->destroyed_sender = owner->id;
		node->destroyed_seq = tx.seq;
	}
	mutex_unlock(&owner->lock);
	bus1_tx_commit(&tx);

	bus1_entry_free_list(&drop);

	mutex_lock(&owner->lock);
	list_for_each_entry_safe(node, tn, list, destroy_link) {
		list_del_init(&node->destroy_link);
		node->destroy_list = NULL;
		bus1_node_unref(node);
	}
	mutex_unlock(&owner->lock);
}

/* Mark @node (owned by @peer, locked) for destruction and queue it on @list. */
static void bus1_peer_mark_destroy(struct bus1_peer *peer, struct bus1_node *node,
				   struct list_head *list)
{
	lockdep_assert_held(&peer->lock);
	WARN_ON(node->owner != peer || node->destroying);
	node->destroying = true;
	node->destroy_list = list;
	bus1_node_ref(node);
	list_add_tail(&node->destroy_link, list);
}

/*
 * Reset or disconnect: destroy owned nodes, release held handles, drop the
 * queue and free published slices.
 */
static int bus1_peer_flush(struct bus1_peer *peer, bool disconnect)
{
	struct bus1_queue_node *qn;
	struct bus1_handle *handle;
	struct bus1_entry *entry;
	struct rb_node *n, *next;
	LIST_HEAD(released);
	LIST_HEAD(destroy);
	LIST_HEAD(drop);
	u64 last_counter;

	mutex_lock(&peer->lock);
	if (peer->disconnected) {
		mutex_unlock(&peer->lock);
		return -ESHUTDOWN;
	}
	if (disconnect)
		WRITE_ONCE(peer->disconnected, true);
	peer->flush_seq++;
	peer->flushing++;

	/*
	 * The flush acts at this point: what the peer owns and holds now goes,
	 * and since handle ids only grow, that is every handle up to the
	 * current counter. Nodes and handles that other threads of the peer
	 * create while the lock is dropped below come after the flush and
	 * stay (a disconnected peer gets none). One pass, so a thread that
	 * keeps creating nodes cannot keep the flush going for ever.
	 */
	last_counter = peer->handle_counter;
	for (n = rb_first(&peer->handles_by_id); n; n = rb_next(n)) {
		handle = rb_entry(n, struct bus1_handle, rb_id);
		if (handle->node->owner == peer && !handle->node->destroying)
			bus1_peer_mark_destroy(peer, handle->node, &destroy);
	}
	if (!list_empty(&destroy)) {
		mutex_unlock(&peer->lock);
		/* no NODE_DESTROY for the peer itself: its queue goes below */
		bus1_peer_destroy_nodes(peer, &destroy, NULL);
		mutex_lock(&peer->lock);
	}

	/*
	 * Every node the peer owned at that point is destroying, so its owner
	 * handle may go (node.h). The NODE_RELEASEs owed are sent once
	 * unlocked.
	 */
	bus1_handle_release_upto(peer, last_counter, &released);
	WARN_ON(disconnect && !RB_EMPTY_ROOT(&peer->handles_by_id));

	/*
	 * Staged entries belong to their transactions, which drop them; a
	 * claimed one to its RECV, which sees @flush_seq move and drops it.
	 */
	for (n = rb_first_cached(&peer->queue.tree); n; n = next) {
		next = rb_next(n);
		qn = rb_entry(n, struct bus1_queue_node, rb);
		if (!bus1_queue_node_is_committed(qn))
			continue;
		entry = container_of(qn, struct bus1_entry, qnode);
		if (entry == peer->recv_claim)
			continue;
		bus1_entry_unlink(entry, false);
		list_add_tail(&entry->tx_link, &drop);
	}

	bus1_pool_flush(&peer->pool);
	if (disconnect)
		bus1_pool_trim(&peer->pool);
	peer->flushing--;
	mutex_unlock(&peer->lock);

	bus1_entry_free_list(&drop);
	if (disconnect)
		bus1_gc_remove_peer(peer);
	bus1_handle_notify_released(&released, peer);
	bus1_pool_punch(&peer->pool);
	/* pollers see EPOLLHUP; a waiting CALL looks again (it skips a flush) */
	wake_up_interruptible_all(&peer->waitq);
	return 0;
}

/**
 * bus1_peer_disconnect() - disconnect a peer
 * @peer:	peer (no lock held)
 *
 * Return: 0, or -ESHUTDOWN if it already was disconnected.
 */
int bus1_peer_disconnect(struct bus1_peer *peer)
{
	return bus1_peer_flush(peer, true);
}

static int bus1_peer_ioctl_disconnect(struct bus1_peer *peer, void __user *uarg)
{
	u64 flags;

	if (get_user(flags, (u64 __user *)uarg))
		return -EFAULT;
	if (flags)
		return -EINVAL;
	return bus1_peer_disconnect(peer);
}

static int bus1_peer_ioctl_query(struct bus1_peer *peer, void __user *uarg)
{
	struct bus1_cmd_peer_query cmd;
	struct bus1_user *user;

	if (copy_from_user(&cmd, uarg, sizeof(cmd)))
		return -EFAULT;
	if (cmd.flags)
		return -EINVAL;
	if (READ_ONCE(peer->disconnected))
		return -ESHUTDOWN;

	if (uid_eq(current_uid(), peer->user->uid))
		user = bus1_user_ref(peer->user);
	else
		user = bus1_user_ref_by_uid(current_uid());
	if (IS_ERR(user))
		return PTR_ERR(user);

	cmd.pool_size = peer->pool.size;
	cmd.max_destinations = bus1_max_destinations;
	cmd.max_vecs = UIO_MAXIOV;
	cmd.max_handles = bus1_max_handles;
	cmd.max_fds = bus1_max_fds;
	cmd.quota_bytes = bus1_quota_bytes;
	cmd.quota_messages = bus1_quota_messages;
	cmd.quota_handles = bus1_quota_handles;
	cmd.quota_fds = bus1_quota_fds;
	cmd.used_bytes = atomic64_read(&user->bytes);
	cmd.used_messages = atomic64_read(&user->messages);
	cmd.used_handles = atomic64_read(&user->handles);
	cmd.used_fds = atomic64_read(&user->fds);
	cmd.quota_objects = bus1_quota_objects;
	cmd.used_objects = atomic64_read(&user->objects);
	bus1_user_unref(user);

	return copy_to_user(uarg, &cmd, sizeof(cmd)) ? -EFAULT : 0;
}

static int bus1_peer_ioctl_reset(struct bus1_peer *peer, void __user *uarg)
{
	struct bus1_cmd_peer_reset cmd;

	if (copy_from_user(&cmd, uarg, sizeof(cmd)))
		return -EFAULT;
	if (cmd.flags)
		return -EINVAL;
	return bus1_peer_flush(peer, false);
}

static struct bus1_peer *bus1_peer_from_fd(u32 fd)
{
	struct bus1_peer *peer;
	struct file *f;

	if (fd > INT_MAX)
		return ERR_PTR(-EBADF);
	f = fget(fd);
	if (!f)
		return ERR_PTR(-EBADF);
	if (f->f_op != &bus1_fops) {
		fput(f);
		return ERR_PTR(-EBADF);
	}
	peer = bus1_peer_ref(f->private_data);
	fput(f);
	return peer;
}

static int bus1_peer_ioctl_transfer(struct bus1_peer *peer, void __user *uarg)
{
	struct bus1_cmd_handle_transfer cmd;
	struct bus1_handle *handle;
	struct bus1_node *node;
	struct bus1_peer *dst;
	bool created;
	u64 src_id, dst_id = 0;
	int r = 0;

	if (copy_from_user(&cmd, uarg, sizeof(cmd)))
		return -EFAULT;
	if (cmd.flags || cmd.dst_pad)
		return -EINVAL;

	dst = bus1_peer_from_fd(cmd.dst_fd);
	if (IS_ERR(dst))
		return PTR_ERR(dst);

	mutex_lock(&peer->lock);
	if (peer->disconnected)
		node = ERR_PTR(-ESHUTDOWN);
	else
		node = bus1_handle_resolve(peer, cmd.src_handle, &src_id, &created);
	mutex_unlock(&peer->lock);
	if (IS_ERR(node)) {
		bus1_peer_unref(dst);
		return PTR_ERR(node);
	}

	mutex_lock(&dst->lock);
	if (dst->disconnected) {
		r = -EHOSTUNREACH;
	} else {
		handle = bus1_handle_acquire(dst, node);
		if (IS_ERR(handle))
			r = PTR_ERR(handle);
		else
			dst_id = handle->id;
	}
	mutex_unlock(&dst->lock);

	if (r < 0 && created) {
		mutex_lock(&peer->lock);
		bus1_handle_discard_created(peer, src_id);
		mutex_unlock(&peer->lock);
	}
	bus1_node_unref(node);
	bus1_peer_unref(dst);
	if (r < 0)
		return r;

	cmd.src_handle = src_id;
	cmd.dst_handle = dst_id;
	return copy_to_user(uarg, &cmd, sizeof(cmd)) ? -EFAULT : 0;
}

/*
 * Take back what @sender queued for @node and its owner has not received:
 * committed data entries only (a staged one belongs to a transaction still
 * running, which commits or drops it). Removing committed entries never makes
 * a queue readable that was not, so nobody needs a wakeup.
 */
static void bus1_peer_reclaim(struct bus1_peer *sender, struct bus1_node *node)
{
	struct bus1_peer *owner = node->owner;
	struct bus1_queue_node *qn;
	struct bus1_entry *entry;
	struct rb_node *n, *next;
	LIST_HEAD(drop);

	mutex_lock(&owner->lock);
	for (n = rb_first_cached(&owner->queue.tree); n; n = next) {
		next = rb_next(n);
		qn = rb_entry(n, struct bus1_queue_node, rb);
		if (!bus1_queue_node_is_committed(qn) || qn->sender != sender->id)
			continue;
		entry = container_of(qn, struct bus1_entry, qnode);
		/* a claimed entry is being received right now: it stays */
		if (entry->type != BUS1_ENTRY_DATA || entry->node != node ||
		    entry == owner->recv_claim)
			continue;
		bus1_entry_unlink(entry, false);
		list_add_tail(&entry->tx_link, &drop);
	}
	mutex_unlock(&owner->lock);
	bus1_entry_free_list(&drop);
	bus1_pool_punch(&owner->pool);
}

static int bus1_peer_ioctl_release(struct bus1_peer *peer, void __user *uarg)
{
	struct bus1_cmd_handle_release cmd;
	struct bus1_node *node, *released = NULL;
	struct bus1_handle *handle;
	struct bus1_entry *entry;
	LIST_HEAD(destroy);
	LIST_HEAD(spare);
	int r = 0;

	if (copy_from_user(&cmd, uarg, sizeof(cmd)))
		return -EFAULT;
	if (cmd.flags)
		return -EINVAL;

	mutex_lock(&peer->lock);
	if (peer->disconnected) {
		r = -ESHUTDOWN;
		goto out;
	}
	handle = bus1_handle_lookup(peer, cmd.handle);
	if (!handle) {
		r = -ENXIO;
		goto out;
	}
	node = handle->node;
	if (node->owner == peer && !node->destroying) {
		/*
		 * The owner lets go of a live node: destroy it first. Its own
		 * NODE_DESTROY is the one entry that did not come with a
		 * handle; allocated before anything is marked, it may fail.
		 */
		entry = bus1_entry_new_notify(GFP_KERNEL_ACCOUNT);
		if (!entry) {
			r = -ENOMEM;
			goto out;
		}
		list_add_tail(&entry->tx_link, &spare);
		bus1_peer_mark_destroy(peer, node, &destroy);
		mutex_unlock(&peer->lock);
		bus1_peer_destroy_nodes(peer, &destroy, &spare);
		mutex_lock(&peer->lock);
		/* a concurrent release may have won the race */
		handle = bus1_handle_lookup(peer, cmd.handle);
		if (!handle) {
			r = -ENXIO;
			goto out;
		}
	}
	released = bus1_handle_release(handle);
out:
	mutex_unlock(&peer->lock);
	bus1_entry_discard_notify_list(&spare);
	if (released) {
		bus1_node_notify_release(released, peer, NULL);
		bus1_node_unref(released);
	}
	return r;
}

static int bus1_peer_ioctl_query_handle(struct bus1_peer *peer, void __user *uarg)
{
	struct bus1_cmd_handle_query cmd;
	struct bus1_handle *handle;
	struct bus1_node *node;
	struct bus1_charge q;

	if (copy_from_user(&cmd, uarg, sizeof(cmd)))
		return -EFAULT;
	if (cmd.flags & ~BUS1_HANDLE_QUERY_FLAG_RECLAIM)
		return -EINVAL;

	/* no two peer locks at once: find the node, then visit its owner */
	mutex_lock(&peer->lock);
	if (peer->disconnected) {
		mutex_unlock(&peer->lock);
		return -ESHUTDOWN;
	}
	handle = bus1_handle_lookup(peer, cmd.handle);
	node = handle ? bus1_node_ref(handle->node) : NULL;
	mutex_unlock(&peer->lock);
	if (!node)
		return -ENXIO;

	if (cmd.flags & BUS1_HANDLE_QUERY_FLAG_RECLAIM)
		bus1_peer_reclaim(peer, node);
	mutex_lock(&node->owner->lock);
	q = node->queued;
	mutex_unlock(&node->owner->lock);
	bus1_node_unref(node);

	cmd.n_messages = q.messages;
	cmd.n_bytes = q.bytes;
	cmd.n_handles = q.handles;
	cmd.n_fds = q.fds;
	return copy_to_user(uarg, &cmd, sizeof(cmd)) ? -EFAULT : 0;
}

static int bus1_peer_ioctl_destroy(struct bus1_peer *peer, void __user *uarg)
{
	struct bus1_cmd_nodes_destroy cmd;
	struct bus1_handle *handle;
	struct bus1_entry *entry;
	struct bus1_node *node, *t;
	LIST_HEAD(destroy);
	LIST_HEAD(spare);
	u64 *ids;
	size_t i;
	int r = 0;

	if (copy_from_user(&cmd, uarg, sizeof(cmd)))
		return -EFAULT;
	if (cmd.flags || cmd.n_nodes > bus1_max_handles)
		return -EINVAL;
	if (!cmd.n_nodes)
		return 0;

	ids = vmemdup_user(u64_to_user_ptr(cmd.ptr_nodes), cmd.n_nodes * sizeof(*ids));
	if (IS_ERR(ids))
		return PTR_ERR(ids);
	/*
	 * The owner's own NODE_DESTROYs, one per node: the only entries of
	 * the destruction that did not come with a handle, so allocated here,
	 * where failing destroys nothing (bus1_peer_destroy_nodes()).
	 */
	for (i = 0; i < cmd.n_nodes; i++) {
		entry = bus1_entry_new_notify(GFP_KERNEL_ACCOUNT);
		if (!entry) {
			bus1_entry_discard_notify_list(&spare);
			kvfree(ids);
			return -ENOMEM;
		}
		list_add_tail(&entry->tx_link, &spare);
	}

	mutex_lock(&peer->lock);
	if (peer->disconnected) {
		r = -ESHUTDOWN;
		goto out;
	}
	for (i = 0; i < cmd.n_nodes; i++) {
		handle = bus1_handle_lookup(peer, ids[i]);
		if (!handle) {
			r = -ENXIO;
			break;
		}
		node = handle->node;
		if (node->owner != peer) {
			r = -EPERM;
			break;
		}
		if (!list_empty(&node->destroy_link)) {
			/* listed twice, or another call is destroying it now */
			r = node->destroy_list == &destroy ? -EINVAL : -EHOSTUNREACH;
			break;
		}
		if (node->destroying) {
			r = -EHOSTUNREACH;
			break;
		}
		bus1_peer_mark_destroy(peer, node, &destroy);
	}
	if (r < 0) {
		/* atomic: nothing is destroyed, take the marks back */
		list_for_each_entry_safe(node, t, &destroy, destroy_link) {
			node->destroying = false;
			list_del_init(&node->destroy_link);
			node->destroy_list = NULL;
			bus1_node_unref(node);
		}
	}
out:
	mutex_unlock(&peer->lock);

	if (r >= 0)
		bus1_peer_destroy_nodes(peer, &destroy, &spare);
	bus1_entry_discard_notify_list(&spare);
	kvfree(ids);
	return r;
}

/* SLICE_RELEASE's body, shared by RECV and CALL (BUS1_RECV_FLAG_RELEASE). */
static int bus1_peer_release_slice(struct bus1_peer *peer, u64 offset)
{
	int r;

	if (offset >= peer->pool.size)
		return -ENXIO;

	mutex_lock(&peer->lock);
	if (peer->disconnected)
		r = -ESHUTDOWN;
	else
		r = bus1_pool_release_published(&peer->pool, offset);
	mutex_unlock(&peer->lock);
	return r;
}

static int bus1_peer_ioctl_slice_release(struct bus1_peer *peer, void __user *uarg)
{
	struct bus1_cmd_slice_release cmd;

	if (copy_from_user(&cmd, uarg, sizeof(cmd)))
		return -EFAULT;
	if (cmd.flags)
		return -EINVAL;
	return bus1_peer_release_slice(peer, cmd.offset);
}

/* SEND: import (message.c), then the SEND's transaction (tx.c). */
static int bus1_peer_ioctl_send(struct bus1_peer *peer, void __user *uarg)
{
	struct bus1_send send;
	int r;

	r = bus1_send_import(&send, peer, uarg);
	if (r < 0)
		return r;
	r = bus1_tx_send(&send);
	bus1_send_deinit(&send, r);
	return r;
}

/* Fill the sender fields of a RECV, mapped into the receiver's namespaces. */
static void bus1_peer_recv_creds(struct bus1_cmd_recv *cmd, const struct bus1_message *message)
{
	struct user_namespace *user_ns = current_user_ns();
	struct pid_namespace *pid_ns = task_active_pid_ns(current);

	cmd->uid = from_kuid_munged(user_ns, message->cred->uid);
	cmd->gid = from_kgid_munged(user_ns, message->cred->gid);
	cmd->pid = pid_nr_ns(message->pid, pid_ns);
	cmd->tid = pid_nr_ns(message->tid, pid_ns);
}

/*
 * What a RECV delivers, gathered under the peer lock from the claimed
 * entry, so that the rest can run unlocked.
 */
struct bus1_recv {
	struct bus1_cmd_recv cmd;
	struct bus1_entry *entry;
	u64 flush_seq;
	size_t n_fds;
	struct file **files;	/* references, if fds are installed */
	int *fds;
	void *buf;		/* handle ids, then fd numbers */
	size_t len;
};

static void bus1_recv_deinit(struct bus1_recv *rv)
{
	size_t i;

	for (i = 0; rv->files && i < rv->n_fds; i++) {
		if (rv->fds && rv->fds[i] >= 0)
			put_unused_fd(rv->fds[i]);
		fput(rv->files[i]);
	}
	kvfree(rv->files);
	kvfree(rv->fds);
	kvfree(rv->buf);
}

/*
 * Claim the front entry and gather what RECV reports (locked). Handles are
 * acquired here: a receiver over its object quota gets EDQUOT and the entry
 * stays queued, with the handles acquired so far kept.
 */
static int bus1_peer_recv_claim(struct bus1_peer *peer, struct bus1_recv *rv,
				struct list_head *drop)
{
	struct bus1_queue_node *qn;
	struct bus1_entry *entry;
	struct bus1_message *message;
	struct bus1_handle *handle;
	u64 flags = rv->cmd.flags;
	bool install;
	u64 *ids;
	size_t i;

	lockdep_assert_held(&peer->lock);

	if (peer->disconnected)
		return -ESHUTDOWN;
	/*
	 * A flush in progress drops everything queued now: nothing to
	 * receive. Claiming here would translate handles the flush is about
	 * to release, and keep new ones for a message it then drops.
	 */
	if (peer->flushing)
		return -EAGAIN;

	for (;;) {
		qn = bus1_queue_peek(&peer->queue);
		if (!qn)
			return -EAGAIN;
		entry = container_of(qn, struct bus1_entry, qnode);
		/* sent to a node whose destruction is ordered before it: drop */
		if (entry->node && entry->node->destroying &&
		    bus1_node_destroyed_before(entry->node, qn)) {
			bus1_entry_unlink(entry, false);
			list_add_tail(&entry->tx_link, drop);
			continue;
		}
		break;
	}

	memset(&rv->cmd, 0, sizeof(rv->cmd));
	rv->cmd.flags = flags & ~BUS1_RECV_FLAG_MORE;
	if (bus1_queue_has_next(&peer->queue, qn))
		rv->cmd.flags |= BUS1_RECV_FLAG_MORE;
	rv->flush_seq = peer->flush_seq;
	if (entry->type != BUS1_ENTRY_DATA) {
		if (entry->type == BUS1_ENTRY_NODE_DESTROY) {
			rv->cmd.type = BUS1_MSG_NODE_DESTROY;
			rv->cmd.destination = entry->handle_id;
		} else {
			rv->cmd.type = BUS1_MSG_NODE_RELEASE;
			rv->cmd.destination = entry->node->owner_id;
		}
		rv->cmd.offset = BUS1_OFFSET_INVALID;
		rv->cmd.uid = (u32)-1;
		rv->cmd.gid = (u32)-1;
		rv->entry = entry;
		peer->recv_claim = entry;
		return 0;
	}

	message = entry->message;
	install = message->n_fds && !(flags & BUS1_RECV_FLAG_NO_FDS);
	rv->len = message->n_handles * sizeof(u64) + message->n_fds * sizeof(u32);
	if (rv->len) {
		rv->buf = kvmalloc(rv->len, GFP_KERNEL);
		if (!rv->buf)
			return -ENOMEM;
	}
	ids = rv->buf;
	for (i = 0; i < message->n_handles; i++) {
		handle = bus1_handle_acquire(peer, message->nodes[i]);
		if (IS_ERR(handle)) {
			/* destroyed before we got here: no handle */
			if (PTR_ERR(handle) != -EHOSTUNREACH)
				return PTR_ERR(handle);
			ids[i] = BUS1_HANDLE_INVALID;
		} else {
			ids[i] = handle->id;
		}
	}
	if (install) {
		rv->files = kvmalloc_array(message->n_fds, sizeof(*rv->files), GFP_KERNEL);
		if (!rv->files)
			return -ENOMEM;
		for (i = 0; i < message->n_fds; i++)
			rv->files[i] = get_file(message->files[i]);
		rv->n_fds = message->n_fds;
	}

	rv->cmd.type = BUS1_MSG_DATA;
	rv->cmd.destination = entry->node->owner_id;
	rv->cmd.offset = entry->slice->offset;
	rv->cmd.n_bytes = message->n_bytes;
	rv->cmd.n_handles = message->n_handles;
	rv->cmd.n_fds = message->n_fds;
	bus1_peer_recv_creds(&rv->cmd, message);
	rv->entry = entry;
	peer->recv_claim = entry;
	return 0;
}

/*
 * The unlocked part: reserve the fds, write handle ids and fd numbers into
 * the slice (claimed, so nobody frees it) and copy the result to user space.
 */
static int bus1_peer_recv_deliver(struct bus1_peer *peer, struct bus1_recv *rv,
				  void __user *uarg)
{
	struct bus1_entry *entry = rv->entry;
	u32 *slots;
	size_t i;
	int r;

	might_sleep();
	lockdep_assert_not_held(&peer->lock);

	if (rv->cmd.type == BUS1_MSG_DATA && rv->len) {
		slots = (u32 *)((u64 *)rv->buf + rv->cmd.n_handles);
		if (rv->files) {
			rv->fds = kvmalloc_array(rv->n_fds, sizeof(*rv->fds), GFP_KERNEL);
			if (!rv->fds)
				return -ENOMEM;
			for (i = 0; i < rv->n_fds; i++)
				rv->fds[i] = -1;
			for (i = 0; i < rv->n_fds; i++) {
				r = get_unused_fd_flags(O_CLOEXEC);
				if (r < 0)
					return r;
				rv->fds[i] = r;
			}
		}
		for (i = 0; i < rv->cmd.n_fds; i++)
			slots[i] = rv->fds ? rv->fds[i] : (u32)-1;
		r = bus1_pool_write_kvec(&peer->pool, entry->slice,
					 ALIGN(rv->cmd.n_bytes, 8), rv->buf, rv->len);
		if (r < 0)
			return r;
	}
	return copy_to_user(uarg, &rv->cmd, sizeof(rv->cmd)) ? -EFAULT : 0;
}

/*
 * Give up the claim (locked). On success the entry is dequeued unless this
 * was a PEEK. If the peer was reset or disconnected meanwhile, the entry is
 * dropped as the flush would have done: -ESHUTDOWN, or -ERESTART for a
 * reset (RECV starts over).
 */
static int bus1_peer_recv_finish(struct bus1_peer *peer, struct bus1_recv *rv, int r,
				 struct list_head *drop)
{
	struct bus1_entry *entry = rv->entry;

	lockdep_assert_held(&peer->lock);
	WARN_ON(peer->recv_claim != entry);
	peer->recv_claim = NULL;

	if (peer->disconnected || peer->flush_seq != rv->flush_seq) {
		bus1_entry_unlink(entry, false);
		list_add_tail(&entry->tx_link, drop);
		if (peer->disconnected) {
			bus1_pool_trim(&peer->pool);
			return -ESHUTDOWN;
		}
		return -ERESTART;
	}
	if (r >= 0 && !(rv->cmd.flags & BUS1_RECV_FLAG_PEEK)) {
		bus1_entry_unlink(entry, true);
		list_add_tail(&entry->tx_link, drop);
	}
	return r;
}

/*
 * Deliver the claimed entry (unlocked), then give up the claim (locked). On
 * success the fds are installed: they become the user's.
 */
static int bus1_peer_recv_complete(struct bus1_peer *peer, struct bus1_recv *rv,
				   void __user *uarg)
{
	LIST_HEAD(drop);
	size_t i;
	int r;

	r = bus1_peer_recv_deliver(peer, rv, uarg);

	mutex_lock(&peer->lock);
	r = bus1_peer_recv_finish(peer, rv, r, &drop);
	mutex_unlock(&peer->lock);
	bus1_entry_free_list(&drop);
	if (r < 0)
		return r;

	/* past the point of no return: the fds become the user's */
	for (i = 0; rv->files && i < rv->n_fds; i++) {
		fd_install(rv->fds[i], rv->files[i]);
		rv->fds[i] = -1;
		rv->files[i] = NULL;
	}
	rv->n_fds = 0;
	return r;
}

/*
 * RECV with @flags (already checked), its result written to @uarg, the
 * struct bus1_cmd_recv in the caller's memory: RECV's body, shared by CALL.
 * Called with no lock held; takes @recv_lock (interruptibly: -EINTR).
 */
static int bus1_peer_recv(struct bus1_peer *peer, u64 flags, void __user *uarg)
{
	struct bus1_recv rv;
	LIST_HEAD(drop);
	int r;

	might_sleep();
	lockdep_assert_not_held(&peer->lock);

	if (mutex_lock_interruptible(&peer->recv_lock))
		return -EINTR;

	do {
		memset(&rv, 0, sizeof(rv));
		rv.cmd.flags = flags;

		mutex_lock(&peer->lock);
		r = bus1_peer_recv_claim(peer, &rv, &drop);
		if (r < 0 && rv.entry)
			r = bus1_peer_recv_finish(peer, &rv, r, &drop);
		mutex_unlock(&peer->lock);
		bus1_entry_free_list(&drop);

		if (r >= 0 && rv.entry)
			r = bus1_peer_recv_complete(peer, &rv, uarg);
		/* whatever the claim gathered and did not hand over */
		bus1_recv_deinit(&rv);
	} while (r == -ERESTART);

	mutex_unlock(&peer->recv_lock);
	return r;
}

/*
 * The input half of RECV's flags, shared by RECV and CALL: check them, and
 * release the slice BUS1_RECV_FLAG_RELEASE names, before anything else.
 */
static bool bus1_peer_recv_flags_valid(u64 flags)
{
	return !(flags & ~(BUS1_RECV_FLAG_PEEK | BUS1_RECV_FLAG_NO_FDS |
			   BUS1_RECV_FLAG_RELEASE | BUS1_RECV_FLAG_MORE));
}

static int bus1_peer_recv_prepare(struct bus1_peer *peer, const struct bus1_cmd_recv *cmd)
{
	if (!bus1_peer_recv_flags_valid(cmd->flags))
		return -EINVAL;
	if (cmd->flags & BUS1_RECV_FLAG_RELEASE)
		return bus1_peer_release_slice(peer, cmd->offset);
	return 0;
}

static int bus1_peer_ioctl_recv(struct bus1_peer *peer, void __user *uarg)
{
	struct bus1_cmd_recv cmd;
	int r;

	if (copy_from_user(&cmd, uarg, sizeof(cmd)))
		return -EFAULT;
	r = bus1_peer_recv_prepare(peer, &cmd);
	if (r < 0)
		return r;
	return bus1_peer_recv(peer, cmd.flags, uarg);
}

/*
 * CALL's wait, holding no lock: until the queue has a front entry RECV may
 * take, or the peer is disconnected (RECV then says ESHUTDOWN). While a
 * reset runs nothing is taken (RECV would say EAGAIN): the flush wakes the
 * wait queue when it is done. Return: 0, -ETIMEDOUT once *@timeout jiffies
 * have passed (*@timeout is what is left), or -EINTR on a signal.
 */
static int bus1_peer_call_wait(struct bus1_peer *peer, long *timeout)
{
	DEFINE_WAIT_FUNC(wait, woken_wake_function);
	bool ready;
	int r = 0;

	might_sleep();
	lockdep_assert_not_held(&peer->lock);

	add_wait_queue(&peer->waitq, &wait);
	for (;;) {
		mutex_lock(&peer->lock);
		ready = peer->disconnected ||
			(!peer->flushing && bus1_queue_peek(&peer->queue));
		mutex_unlock(&peer->lock);
		if (ready)
			break;
		if (!*timeout) {
			r = -ETIMEDOUT;
			break;
		}
		if (signal_pending(current)) {
			r = -EINTR;
			break;
		}
		*timeout = wait_woken(&wait, TASK_INTERRUPTIBLE, *timeout);
	}
	remove_wait_queue(&peer->waitq, &wait);
	return r;
}

/*
 * CALL: SEND, then wait (no lock held) and RECV the front of the queue. Once
 * the SEND succeeded, BUS1_CALL_STATUS_SENT is written back at once and
 * nothing returns -ERESTARTSYS (a restarted CALL would send again).
 */
static int bus1_peer_ioctl_call(struct bus1_peer *peer, void __user *uarg)
{
	struct bus1_cmd_call __user *ucall = uarg;
	struct bus1_cmd_call cmd;
	long timeout;
	int r;

	if (copy_from_user(&cmd, ucall, sizeof(cmd)))
		return -EFAULT;
	/*
	 * Every field is checked before @status is written: one rule for the
	 * caller, a CALL refused with EINVAL (or EFAULT on reading it) leaves
	 * @status as it was; every later return has written it.
	 */
	if (cmd.flags || cmd.timeout_ns > BUS1_CALL_TIMEOUT_MAX ||
	    !bus1_peer_recv_flags_valid(cmd.recv.flags))
		return -EINVAL;
	/* not sent yet: and a caller whose @status is not writable finds out now */
	if (put_user(0ULL, &ucall->status))
		return -EFAULT;
	r = bus1_peer_recv_prepare(peer, &cmd.recv);
	if (r < 0)
		return r;

	r = bus1_peer_ioctl_send(peer, &ucall->send);
	if (r < 0)
		return r;
	if (put_user(BUS1_CALL_STATUS_SENT, &ucall->status))
		return -EFAULT;

	/* at most a day: far below LONG_MAX jiffies */
	timeout = 0;
	if (cmd.timeout_ns)
		timeout = nsecs_to_jiffies(cmd.timeout_ns + TICK_NSEC - 1) ?: 1;
	for (;;) {
		r = bus1_peer_call_wait(peer, &timeout);
		if (r < 0)
			return r;
		r = bus1_peer_recv(peer, cmd.recv.flags, &ucall->recv);
		/* another thread's RECV was first, or a reset came: wait on */
		if (r != -EAGAIN)
			return r;
	}
}

static long bus1_peer_ioctl_dispatch(struct bus1_peer *peer, unsigned int cmd,
				     void __user *uarg)
{
	switch (cmd) {
	case BUS1_CMD_PEER_DISCONNECT:
		return bus1_peer_ioctl_disconnect(peer, uarg);
	case BUS1_CMD_PEER_QUERY:
		return bus1_peer_ioctl_query(peer, uarg);
	case BUS1_CMD_PEER_RESET:
		return bus1_peer_ioctl_reset(peer, uarg);
	case BUS1_CMD_HANDLE_TRANSFER:
		return bus1_peer_ioctl_transfer(peer, uarg);
	case BUS1_CMD_HANDLE_RELEASE:
		return bus1_peer_ioctl_release(peer, uarg);
	case BUS1_CMD_NODES_DESTROY:
		return bus1_peer_ioctl_destroy(peer, uarg);
	case BUS1_CMD_HANDLE_QUERY:
		return bus1_peer_ioctl_query_handle(peer, uarg);
	case BUS1_CMD_SLICE_RELEASE:
		return bus1_peer_ioctl_slice_release(peer, uarg);
	case BUS1_CMD_SEND:
		return bus1_peer_ioctl_send(peer, uarg);
	case BUS1_CMD_RECV:
		return bus1_peer_ioctl_recv(peer, uarg);
	case BUS1_CMD_CALL:
		return bus1_peer_ioctl_call(peer, uarg);
	}
	return -ENOTTY;
}

/**
 * bus1_peer_ioctl() - dispatch an ioctl
 * @peer:	peer of the file
 * @cmd:	ioctl number
 * @arg:	its argument
 *
 * Return: 0 or a negative errno.
 */
long bus1_peer_ioctl(struct bus1_peer *peer, unsigned int cmd, unsigned long arg)
{
	long r;

	r = bus1_peer_ioctl_dispatch(peer, cmd, (void __user *)arg);
	/* pool pages this call freed go back now that no lock is held */
	bus1_pool_punch(&peer->pool);
	return r;
}
