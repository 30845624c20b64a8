/* SPDX-License-Identifier: GPL-2.0 */
#ifndef __BUS1_NODE_H
#define __BUS1_NODE_H

/**
 * DOC: Nodes and handles
 *
 * A node is the addressable object messages are sent to. It belongs to one
 * peer, its owner, and is known to peers only through handles. A handle is
 * one peer's reference to one node; a peer has at most one handle per node,
 * found through the peer's tree keyed by node, so a peer that receives a
 * handle to a node it already knows gets back the id it already has. Ids are
 * (counter << 2) | flags from a per-peer counter that never goes back, so an
 * id is never reused; ids are looked up through a second per-peer tree.
 *
 * Lifetimes: a handle holds a reference on its node; a node holds a
 * reference on its owner peer (the peer object, not its file: the file may
 * be closed while remote handles still point at the node). A node is
 * *destroyed* by its owner (NODES_DESTROY, the release of the owner's own
 * handle, reset or disconnect): after that no new handle to it is created,
 * nothing new is queued for it, and every peer that held a handle at that
 * moment was sent a NODE_DESTROY notification. Destroyed nodes stay in
 * memory while handles still name them, so ids stay stable until released.
 *
 * Release notification: @remote counts the handles held by peers other than
 * the owner plus the messages in flight that carry the node. When it drops
 * to zero on a live node, the owner is sent a NODE_RELEASE entry, through a
 * transaction of the peer that let go (so it is ordered after everything
 * that peer sent before). Once nothing remote is left only the owner itself
 * can hand the node out again, so the owner always knows whether a
 * notification is still current.
 *
 * Notifications are bounded like messages, without a new quota:
 * - NODE_RELEASE is coalesced per node: a node has at most one committed
 *   release entry its owner has not claimed (@release_entry). A new one
 *   supersedes it: the old one is dropped and the new one queued where the
 *   latest release happened, which is the one that tells the current state.
 *   An owner that never reads thus has at most one per node it owns, and
 *   its nodes are bound by quota_objects.
 * - NODE_DESTROY cannot be coalesced (one per holder and node, the holder's
 *   id) nor refused (a destruction cannot fail half-way), so each one is
 *   charged one object to the holder's user, forcibly, until it is freed.
 *   A destruction happens once per node, and only to holders, whose handles
 *   were charged within the quota; so what a user can have queued is bound
 *   by its quota_objects (twice over at most), and a user that does not
 *   read its notifications runs out of objects, not the kernel of memory.
 *   Nor may it need memory, which a memory cgroup at its limit could only
 *   grant beyond memory.max (__GFP_NOFAIL): every handle of a peer other
 *   than the owner carries its NODE_DESTROY entry from its creation
 *   (@destroy_entry, charged to the memcg of the task that made the
 *   handle, which may fail), and a destruction only addresses and queues
 *   them. The owner's own notification is allocated by the destroy call
 *   before it marks anything (NODES_DESTROY, HANDLE_RELEASE; ENOMEM
 *   leaves the nodes alone), and a reset or disconnect sends none, as it
 *   drops its own queue right after. A remote handle thus costs an entry
 *   more, and destroying nodes allocates nothing. A flush
 *   that drops the last remote handle of a live node turns that handle's
 *   unused entry into the owner's NODE_RELEASE, so it allocates nothing
 *   either.
 *
 * Invariant: the owner's handle is released only once its node is
 * destroying (asserted), so every holder of a node is told NODE_DESTROY
 * before the node can lose its owner handle. A reset or disconnect acts at
 * one point, the peer's handle counter when it starts: it destroys the
 * nodes owned then and releases the handles held then, by id
 * (bus1_handle_release_upto()); nodes and handles other threads create
 * while it runs have larger ids and stay.
 *
 * Locking:
 * - A peer's handle trees and handle counter: the holding peer's lock.
 * - @destroying, @destroyed_*, @queued and @release_entry: the owner peer's
 *   lock.
 * - @holders, @remote and @dead: the node's own mutex, taken inside a peer lock
 *   (peer lock -> node lock), never the other way round.
 * - A handle's @destroy_entry: its node's mutex while the handle is on
 *   @holders (a destruction takes it); its holder's alone once it is off.
 */

#include <linux/kref.h>
#include <linux/list.h>
#include <linux/mutex.h>
#include <linux/rbtree.h>
#include <linux/types.h>
#include "queue.h"
#include "user.h"

struct bus1_entry;
struct bus1_peer;

/**
 * struct bus1_node - a node
 * @ref:		reference count (handles, queued messages, transactions)
 * @owner:		owning peer (a reference)
 * @owner_id:		the owner's handle id for this node
 * @destroying:		destruction started; nothing new may be staged for it
 * @destroyed_ts:	commit timestamp of the destruction, U64_MAX before;
 *			the owner drops entries to this node ordered after it
 * @destroyed_sender:	with @destroyed_seq, the rest of the destruction's
 *			queue key (see bus1_node_destroyed_before())
 * @destroyed_seq:	the destroying transaction's number
 * @destroy_link:	link into the destroyer's list (owner's lock; empty
 *			when not being destroyed)
 * @destroy_list:	that list's head, to detect duplicates (owner's lock)
 * @queued:		what data messages queued for this node and not yet
 *			received are charged (owner's lock)
 * @release_entry:	the NODE_RELEASE entry that stands for the node's
 *			releases in the owner's queue, or NULL (owner's lock;
 *			see bus1_node_supersede_release())
 * @lock:		protects @holders and @dead
 * @holders:		handles pointing at this node
 * @remote:		remote handles plus carrying messages (see DOC)
 * @dead:		no new handles may be created
 */
struct bus1_node {
	struct kref ref;
	struct bus1_peer *owner;
	u64 owner_id;
	bool destroying;
	u64 destroyed_ts;
	u64 destroyed_sender;
	u64 destroyed_seq;
	struct list_head destroy_link;
	struct list_head *destroy_list;
	struct bus1_charge queued;
	struct bus1_entry *release_entry;
	struct mutex lock;		/* @holders, @remote, @dead */
	struct list_head holders;
	u64 remote;
	bool dead;
};

/**
 * struct bus1_handle - a peer's handle to a node
 * @rb_id:	link into the holder's tree by id
 * @rb_node:	link into the holder's tree by node
 * @link:	link into the node's list of holders
 * @node:	the node (a reference)
 * @holder:	the peer holding this handle (no reference: the handle is
 *		released before its holder goes away)
 * @id:		the handle id
 * @destroy_entry:	a handle of a peer other than the owner: the
 *		NODE_DESTROY its holder gets if the node is destroyed while
 *		it holds the handle, allocated with the handle (see DOC);
 *		taken by the destruction, else freed with the handle (node's
 *		lock)
 */
struct bus1_handle {
	struct rb_node rb_id;
	struct rb_node rb_node;
	struct list_head link;
	struct bus1_node *node;
	struct bus1_peer *holder;
	u64 id;
	struct bus1_entry *destroy_entry;
};

/*
 * Is the queue entry @qn, sent to @node, ordered after @node's destruction
 * (owner's lock held, @node destroying)? The whole key counts: another
 * sender's transaction may commit with the destruction's timestamp.
 */
static inline bool bus1_node_destroyed_before(const struct bus1_node *node,
					      const struct bus1_queue_node *qn)
{
	if (qn->timestamp != node->destroyed_ts)
		return qn->timestamp > node->destroyed_ts;
	if (qn->sender != node->destroyed_sender)
		return qn->sender > node->destroyed_sender;
	return qn->seq > node->destroyed_seq;
}

struct bus1_node *bus1_node_ref(struct bus1_node *node);
struct bus1_node *bus1_node_unref(struct bus1_node *node);
struct bus1_handle *bus1_handle_create_node(struct bus1_peer *peer);
struct bus1_handle *bus1_handle_lookup(struct bus1_peer *peer, u64 id);
struct bus1_handle *bus1_handle_acquire(struct bus1_peer *peer, struct bus1_node *node);
struct bus1_node *bus1_handle_release(struct bus1_handle *handle);
void bus1_handle_release_upto(struct bus1_peer *peer, u64 last, struct list_head *released);
void bus1_handle_notify_released(struct list_head *released, struct bus1_peer *causer);
void bus1_node_carry(struct bus1_node *node);
void bus1_node_uncarry(struct bus1_node *node);
void bus1_node_notify_release(struct bus1_node *node, struct bus1_peer *causer,
			      struct bus1_entry *spare);
struct bus1_entry *bus1_node_supersede_release(struct bus1_node *node,
					       struct bus1_entry *entry);
void bus1_handle_discard_node(struct bus1_handle *handle);
struct bus1_node *bus1_handle_resolve(struct bus1_peer *peer, u64 id, u64 *idp,
				      bool *createdp);
void bus1_handle_discard_created(struct bus1_peer *peer, u64 id);

#endif /* __BUS1_NODE_H */
