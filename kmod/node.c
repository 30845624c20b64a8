// SPDX-License-Identifier: GPL-2.0
/*
 * Nodes and handles: see node.h.
 */

#include <linux/err.h>
#include <linux/lockdep.h>
#include <linux/slab.h>
#include "uapi/linux/bus1.h"
#include "message.h"
#include "node.h"
#include "peer.h"
#include "stats.h"
#include "tx.h"

static void bus1_node_free(struct kref *ref)
{
	struct bus1_node *node = container_of(ref, struct bus1_node, ref);

	WARN_ON(!list_empty(&node->holders));
	WARN_ON(!node->destroying);
	/* queued entries hold node references: none can be left */
	WARN_ON(node->queued.messages || node->queued.bytes);
	WARN_ON(node->remote);
	/* a queued release entry holds a node reference */
	WARN_ON(node->release_entry);
	bus1_user_uncharge_objects(node->owner->user, 1);
	bus1_peer_unref(node->owner);
	mutex_destroy(&node->lock);
	kfree(node);
	bus1_stat_dec(BUS1_STAT_NODES);
}

/**
 * bus1_node_ref() - take a node reference
 * @node:	node or NULL
 *
 * Return: @node
 */
struct bus1_node *bus1_node_ref(struct bus1_node *node)
{
	if (node)
		kref_get(&node->ref);
	return node;
}

/**
 * bus1_node_unref() - drop a node reference
 * @node:	node or NULL
 *
 * Return: NULL
 */
struct bus1_node *bus1_node_unref(struct bus1_node *node)
{
	if (node)
		kref_put(&node->ref, bus1_node_free);
	return NULL;
}

static void bus1_handle_link(struct bus1_peer *peer, struct bus1_handle *handle)
{
	struct rb_node **slot, *parent;
	struct bus1_handle *h;

	/* ids only grow: the new one is always the rightmost */
	slot = &peer->handles_by_id.rb_node;
	parent = NULL;
	while (*slot) {
		parent = *slot;
		h = rb_entry(parent, struct bus1_handle, rb_id);
		WARN_ON(h->id >= handle->id);
		slot = &parent->rb_right;
	}
	rb_link_node(&handle->rb_id, parent, slot);
	rb_insert_color(&handle->rb_id, &peer->handles_by_id);

	slot = &peer->handles_by_node.rb_node;
	parent = NULL;
	while (*slot) {
		parent = *slot;
		h = rb_entry(parent, struct bus1_handle, rb_node);
		WARN_ON(h->node == handle->node);
		if ((unsigned long)handle->node < (unsigned long)h->node)
			slot = &parent->rb_left;
		else
			slot = &parent->rb_right;
	}
	rb_link_node(&handle->rb_node, parent, slot);
	rb_insert_color(&handle->rb_node, &peer->handles_by_node);
}

static u64 bus1_handle_next_id(struct bus1_peer *peer, bool remote)
{
	return (++peer->handle_counter << 2) | (remote ? BUS1_HANDLE_FLAG_REMOTE : 0);
}

/**
 * bus1_handle_create_node() - create a node and its owner's handle
 * @peer:	the new node's owner (locked)
 *
 * Both are charged to the owner's user (two objects).
 *
 * Return: the owner's new handle, ERR_PTR(-EDQUOT) or ERR_PTR(-ENOMEM).
 */
struct bus1_handle *bus1_handle_create_node(struct bus1_peer *peer)
{
	struct bus1_handle *handle;
	struct bus1_node *node;
	int r;

	lockdep_assert_held(&peer->lock);

	r = bus1_user_charge_objects(peer->user, 2);
	if (r < 0)
		return ERR_PTR(r);
	node = kzalloc(sizeof(*node), GFP_KERNEL_ACCOUNT);
	handle = kzalloc(sizeof(*handle), GFP_KERNEL_ACCOUNT);
	if (!node || !handle) {
		kfree(handle);
		kfree(node);
		bus1_user_uncharge_objects(peer->user, 2);
		return ERR_PTR(-ENOMEM);
	}

	bus1_stat_inc(BUS1_STAT_NODES);
	bus1_stat_inc(BUS1_STAT_HANDLES);
	kref_init(&node->ref);		/* owned by the handle */
	node->owner = bus1_peer_ref(peer);
	node->destroyed_ts = U64_MAX;
	INIT_LIST_HEAD(&node->destroy_link);
	mutex_init(&node->lock);
	INIT_LIST_HEAD(&node->holders);

	handle->node = node;
	handle->holder = peer;
	handle->id = bus1_handle_next_id(peer, false);
	node->owner_id = handle->id;
	list_add(&handle->link, &node->holders);	/* nobody else sees it yet */
	bus1_handle_link(peer, handle);
	return handle;
}

/**
 * bus1_handle_lookup() - find a handle by id
 * @peer:	holder (locked)
 * @id:		handle id
 *
 * Return: the handle or NULL.
 */
struct bus1_handle *bus1_handle_lookup(struct bus1_peer *peer, u64 id)
{
	struct rb_node *n = peer->handles_by_id.rb_node;
	struct bus1_handle *h;

	lockdep_assert_held(&peer->lock);

	while (n) {
		h = rb_entry(n, struct bus1_handle, rb_id);
		if (id < h->id)
			n = n->rb_left;
		else if (id > h->id)
			n = n->rb_right;
		else
			return h;
	}
	return NULL;
}

static struct bus1_handle *bus1_handle_find_node(struct bus1_peer *peer,
						 struct bus1_node *node)
{
	struct rb_node *n = peer->handles_by_node.rb_node;
	struct bus1_handle *h;

	while (n) {
		h = rb_entry(n, struct bus1_handle, rb_node);
		if ((unsigned long)node < (unsigned long)h->node)
			n = n->rb_left;
		else if ((unsigned long)node > (unsigned long)h->node)
			n = n->rb_right;
		else
			return h;
	}
	return NULL;
}

/**
 * bus1_handle_acquire() - get a peer's handle to a node, creating it
 * @peer:	the future holder (locked)
 * @node:	the node
 *
 * A new handle is charged to the holder's user (one object).
 *
 * Return: the existing or new handle, ERR_PTR(-EHOSTUNREACH) if the peer has
 * none and the node is destroyed, ERR_PTR(-EDQUOT) or ERR_PTR(-ENOMEM).
 */
struct bus1_handle *bus1_handle_acquire(struct bus1_peer *peer, struct bus1_node *node)
{
	struct bus1_handle *handle;
	int r;

	lockdep_assert_held(&peer->lock);

	handle = bus1_handle_find_node(peer, node);
	if (handle)
		return handle;

	r = bus1_user_charge_objects(peer->user, 1);
	if (r < 0)
		return ERR_PTR(r);
	handle = kzalloc(sizeof(*handle), GFP_KERNEL_ACCOUNT);
	/*
	 * The holder's NODE_DESTROY is paid for now, while it can still be
	 * refused, so that the node's destruction needs no memory (node.h).
	 * The owner's handle has none: see bus1_peer_destroy_nodes().
	 */
	if (handle && node->owner != peer) {
		handle->destroy_entry = bus1_entry_new_notify(GFP_KERNEL_ACCOUNT);
		if (!handle->destroy_entry) {
			kfree(handle);
			handle = NULL;
		}
	}
	if (!handle) {
		bus1_user_uncharge_objects(peer->user, 1);
		return ERR_PTR(-ENOMEM);
	}

	mutex_lock(&node->lock);
	if (node->dead) {
		mutex_unlock(&node->lock);
		bus1_entry_discard_notify(handle->destroy_entry);
		kfree(handle);
		bus1_user_uncharge_objects(peer->user, 1);
		return ERR_PTR(-EHOSTUNREACH);
	}
	/*
	 * Complete before it is on @holders: a destruction walks that list
	 * under the node lock alone and notifies each holder under its id.
	 */
	handle->node = bus1_node_ref(node);
	handle->holder = peer;
	handle->id = bus1_handle_next_id(peer, node->owner != peer);
	list_add_tail(&handle->link, &node->holders);
	if (node->owner != peer)
		node->remote++;
	mutex_unlock(&node->lock);

	bus1_stat_inc(BUS1_STAT_HANDLES);
	bus1_handle_link(peer, handle);
	return handle;
}

/*
 * Drop one remote reference (node lock held). Return whether the owner is
 * due a NODE_RELEASE: nothing but its own handle is left of a live node.
 */
static bool bus1_node_drop_remote(struct bus1_node *node)
{
	lockdep_assert_held(&node->lock);
	if (WARN_ON(!node->remote))
		return false;
	return !--node->remote && !node->dead;
}

/*
 * Take @handle out of its holder's trees and its node's holder list, and
 * return its object charge (holder locked). The handle keeps its node
 * reference. Return whether it was the last remote reference to a live
 * node, so that the owner is due a NODE_RELEASE.
 */
static bool bus1_handle_unlink(struct bus1_handle *handle)
{
	struct bus1_peer *peer = handle->holder;
	struct bus1_node *node = handle->node;
	bool notify = false;

	lockdep_assert_held(&peer->lock);
	/*
	 * The owner's handle goes only after its node was destroyed: holders
	 * of a node that lost its owner's handle would never be told.
	 */
	WARN_ON(node->owner == peer && !node->destroying);

	rb_erase(&handle->rb_id, &peer->handles_by_id);
	rb_erase(&handle->rb_node, &peer->handles_by_node);
	mutex_lock(&node->lock);
	list_del(&handle->link);
	if (node->owner != peer)
		notify = bus1_node_drop_remote(node);
	mutex_unlock(&node->lock);
	bus1_user_uncharge_objects(peer->user, 1);
	return notify;
}

static void bus1_handle_free(struct bus1_handle *handle)
{
	/* unlinked from the node: no destruction can take it any more */
	bus1_entry_discard_notify(handle->destroy_entry);
	kfree(handle);
	bus1_stat_dec(BUS1_STAT_HANDLES);
}

/**
 * bus1_handle_release() - drop a handle
 * @handle:	handle; its holder must be locked
 *
 * The owner's handle may only be released once its node is destroying:
 * callers destroy it first.
 *
 * Return: NULL, or a reference to the node if it was the last remote
 * reference to a live node: the caller must then call
 * bus1_node_notify_release() once it holds no lock, and drop the reference.
 */
struct bus1_node *bus1_handle_release(struct bus1_handle *handle)
{
	struct bus1_node *node = handle->node;
	bool notify;

	notify = bus1_handle_unlink(handle);
	bus1_handle_free(handle);
	if (notify)
		return node;	/* the handle's reference goes to the caller */
	bus1_node_unref(node);
	return NULL;
}

/**
 * bus1_handle_release_upto() - a flush drops the handles of a peer
 * @peer:	the holder (locked)
 * @last:	the peer's handle counter when the flush started: handles
 *		with a larger counter were created after it and stay
 * @released:	list that receives the handles whose release is owed a
 *		NODE_RELEASE, linked by their @link
 *
 * Every node @peer owned when the flush started must be destroying. The
 * handles go in one locked section, so that no node can be created, and
 * then lose its owner handle without being destroyed, in between. The
 * handles put on @released are out of every tree and uncharged, and keep
 * their node reference, so the notifications need no allocation here; the
 * caller passes @released to bus1_handle_notify_released() once it holds no
 * lock.
 */
void bus1_handle_release_upto(struct bus1_peer *peer, u64 last, struct list_head *released)
{
	struct bus1_handle *handle;
	struct rb_node *n;

	lockdep_assert_held(&peer->lock);

	/* ids are (counter << 2) | flags: ordered by counter */
	while ((n = rb_first(&peer->handles_by_id))) {
		handle = rb_entry(n, struct bus1_handle, rb_id);
		if (handle->id >> 2 > last)
			break;
		if (bus1_handle_unlink(handle)) {
			list_add_tail(&handle->link, released);
		} else {
			bus1_node_unref(handle->node);
			bus1_handle_free(handle);
		}
	}
}

/**
 * bus1_handle_notify_released() - send the NODE_RELEASEs a flush owes
 * @released:	the handles bus1_handle_release_upto() put on the list;
 *		freed, and the list emptied
 * @causer:	the peer whose handles they were (the caller holds a
 *		reference)
 *
 * Runs without any lock held.
 */
void bus1_handle_notify_released(struct list_head *released, struct bus1_peer *causer)
{
	struct bus1_handle *handle, *t;

	list_for_each_entry_safe(handle, t, released, link) {
		list_del(&handle->link);
		/*
		 * A remote handle whose release is owed a NODE_RELEASE was
		 * not destroyed, so it still has its NODE_DESTROY entry: it
		 * becomes the release, and the flush allocates nothing.
		 */
		bus1_node_notify_release(handle->node, causer, handle->destroy_entry);
		handle->destroy_entry = NULL;
		bus1_node_unref(handle->node);
		bus1_handle_free(handle);
	}
}

/**
 * bus1_node_notify_release() - tell a node's owner nothing remote is left
 * @node:	the node (the caller holds a reference)
 * @causer:	the peer whose release, disconnect or freed message dropped the
 *		last remote reference, or the owner; the notification is
 *		ordered as a message it sends now would be (the caller holds a
 *		reference)
 * @spare:	an unattached entry of bus1_entry_new_notify() to use and
 *		own, or NULL to allocate one (see bus1_entry_new_release())
 *
 * Runs without any lock held. Nothing is queued if the owner disconnected
 * or the node is being destroyed meanwhile. An older release of the node
 * still queued is superseded (bus1_node_supersede_release()).
 */
void bus1_node_notify_release(struct bus1_node *node, struct bus1_peer *causer,
			      struct bus1_entry *spare)
{
	struct bus1_entry *entry;
	struct bus1_tx tx;

	might_sleep();
	entry = bus1_entry_new_release(node, spare);
	bus1_tx_init(&tx, causer);
	if (bus1_tx_stage(&tx, entry) < 0) {
		bus1_entry_free(entry);
		return;
	}
	bus1_tx_timestamp(&tx);
	bus1_tx_commit(&tx);
}

/**
 * bus1_node_supersede_release() - make a release entry the node's only one
 * @node:	the node; its owner must be locked
 * @entry:	a NODE_RELEASE entry for @node, being staged on the owner
 *
 * Called by bus1_tx_stage(). The entry @node had so far is taken out of the
 * queue if it is committed and not being received (a RECV that claimed it
 * delivers it). One still staged is dropped at its commit instead, as
 * bus1_tx_commit() commits only the node's current @release_entry. So the
 * owner's queue holds at most one release entry per node that it has not
 * claimed, however often the node is handed out and released while the
 * owner does not read.
 *
 * Return: the superseded entry if it was taken out (unlinked: the caller
 * frees it once unlocked), or NULL.
 */
struct bus1_entry *bus1_node_supersede_release(struct bus1_node *node,
					       struct bus1_entry *entry)
{
	struct bus1_entry *old = node->release_entry;

	lockdep_assert_held(&node->owner->lock);
	node->release_entry = entry;
	if (!old || !bus1_queue_node_is_committed(&old->qnode) ||
	    old == node->owner->recv_claim)
		return NULL;
	bus1_entry_unlink(old, false);
	return old;
}

/**
 * bus1_node_carry() - count a message carrying a node
 * @node:	node, put into a message being sent
 *
 * A carried node counts as a remote reference until the message is freed
 * (bus1_node_uncarry()), so the owner is not told it was released while a
 * handle to it is still on its way.
 */
void bus1_node_carry(struct bus1_node *node)
{
	mutex_lock(&node->lock);
	node->remote++;
	mutex_unlock(&node->lock);
}

/**
 * bus1_node_uncarry() - a message carrying a node is freed
 * @node:	node (the caller holds a reference)
 *
 * Must be called without any lock held: it may send NODE_RELEASE.
 */
void bus1_node_uncarry(struct bus1_node *node)
{
	bool notify;

	mutex_lock(&node->lock);
	notify = bus1_node_drop_remote(node);
	mutex_unlock(&node->lock);
	if (notify)
		bus1_node_notify_release(node, node->owner, NULL);
}

/**
 * bus1_handle_discard_node() - undo bus1_handle_create_node()
 * @handle:	the owner's handle of a node nobody else has seen (locked)
 *
 * Used on error paths after a BUS1_HANDLE_CREATE was resolved: if the node
 * is still unseen (only its owner's handle, not being destroyed), it goes
 * away without notifications. Otherwise another thread of the owner already
 * used it and it is left alone.
 */
void bus1_handle_discard_node(struct bus1_handle *handle)
{
	struct bus1_node *node = handle->node;
	bool unseen;

	lockdep_assert_held(&handle->holder->lock);

	if (node->owner != handle->holder || node->destroying)
		return;

	mutex_lock(&node->lock);
	unseen = list_is_singular(&node->holders);
	if (unseen)
		node->dead = true;
	mutex_unlock(&node->lock);
	if (!unseen)
		return;

	node->destroying = true;
	node->destroyed_ts = 0;
	/* the owner's own handle is never a remote reference */
	WARN_ON(bus1_handle_release(handle));
}

/**
 * bus1_handle_resolve() - resolve a handle id passed in by its holder
 * @peer:	holder (locked)
 * @id:		one of @peer's handle ids, or BUS1_HANDLE_CREATE
 * @idp:	set to the handle's id (the new one for a CREATE)
 * @createdp:	set to whether a node was created
 *
 * Return: a new reference on the handle's node, ERR_PTR(-ENXIO) if @peer
 * holds no handle @id, or the error of bus1_handle_create_node().
 */
struct bus1_node *bus1_handle_resolve(struct bus1_peer *peer, u64 id, u64 *idp,
				      bool *createdp)
{
	struct bus1_handle *handle;

	lockdep_assert_held(&peer->lock);

	*createdp = false;
	if (id == BUS1_HANDLE_CREATE) {
		handle = bus1_handle_create_node(peer);
		if (IS_ERR(handle))
			return ERR_CAST(handle);
		*createdp = true;
	} else {
		handle = bus1_handle_lookup(peer, id);
		if (!handle)
			return ERR_PTR(-ENXIO);
	}
	*idp = handle->id;
	return bus1_node_ref(handle->node);
}

/**
 * bus1_handle_discard_created() - undo a CREATE of a call that failed
 * @peer:	holder (locked)
 * @id:		the id bus1_handle_resolve() created
 *
 * Another thread of @peer may already have used the new id (ids are
 * predictable): then the node stays, as if that thread had created it.
 */
void bus1_handle_discard_created(struct bus1_peer *peer, u64 id)
{
	struct bus1_handle *handle;

	lockdep_assert_held(&peer->lock);
	handle = bus1_handle_lookup(peer, id);
	if (handle)
		bus1_handle_discard_node(handle);
}
