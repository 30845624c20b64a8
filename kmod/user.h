/* SPDX-License-Identifier: GPL-2.0 */
#ifndef __BUS1_USER_H
#define __BUS1_USER_H

/**
 * DOC: Users and quotas
 *
 * A bus1_user is the accounting object of one real uid. Every message in
 * flight is charged to the real uid of the task that sent it: the bytes of
 * the slice it occupies in the receiver's pool, one message, and the handles
 * and fds it carries. The charge is taken per
 * destination when the message is staged and lifted when the receiver takes
 * the message off its queue (RECV without PEEK, reset, disconnect) - not when
 * the receiver frees the slice, so a receiver cannot make a sender's quota
 * depend on its own diligence beyond the queue.
 *
 * These quotas are global per user; they do not stop one user from filling
 * one particular receiver's pool. That is the pool's share rule (DOC: Pools):
 * a sender whose uid is not the receiver's opener may hold at most as many
 * bytes of the receiver's pool as remain free, charged from slice allocation
 * until the slice is freed (released by the receiver, or dropped unreceived).
 *
 * Objects are different: every node and every handle is charged, one each,
 * to the user of the peer that owns the node or holds the handle (the
 * opener's uid, as the object belongs to the peer, not to a task), from its
 * creation until it is freed, against quota_objects. Without it one user
 * could make the kernel allocate nodes until memory runs out; the slab
 * memory is also charged to the allocating task's memory cgroup. A queued
 * NODE_DESTROY notification counts as one object of its receiver's user
 * until it is freed; it is charged even beyond the quota, since a
 * destruction cannot fail (node.h).
 *
 * Users live in a global rb-tree keyed by kuid, protected by a mutex that is
 * only taken to look up, insert and remove users. A peer keeps the user of
 * its opener, so the send path only looks a user up when the sending task's
 * uid differs from the opener's. The counters are atomics: charging is lock-free.
 */

#include <linux/atomic.h>
#include <linux/bug.h>
#include <linux/kref.h>
#include <linux/rbtree.h>
#include <linux/seq_file.h>
#include <linux/types.h>
#include <linux/uidgid.h>

/**
 * struct bus1_charge - what one queued message costs its sender's user
 * @bytes:	pool bytes (the size of the slice)
 * @messages:	number of messages (0 or 1)
 * @handles:	number of handles carried
 * @fds:	number of fds carried
 */
struct bus1_charge {
	u64 bytes;
	u64 messages;
	u64 handles;
	u64 fds;
};

/**
 * struct bus1_user - accounting object of one uid
 * @ref:	reference count
 * @uid:	the uid
 * @rb:	link into the global user tree
 * @bytes:	pool bytes in flight
 * @messages:	messages in flight
 * @handles:	handles in flight
 * @fds:	fds in flight
 * @objects:	nodes and handles held by the user's peers, and
 *		NODE_DESTROY notifications queued for them
 * @peers:	peers the user opened that are not freed yet (for the
 *		operator, debugfs.h; nothing is limited by it)
 */
struct bus1_user {
	struct kref ref;
	kuid_t uid;
	struct rb_node rb;
	atomic64_t bytes;
	atomic64_t messages;
	atomic64_t handles;
	atomic64_t fds;
	atomic64_t objects;
	atomic_t peers;
};

/* Quota defaults, module parameters (main.c). */
extern unsigned long bus1_quota_bytes;
extern unsigned int bus1_quota_messages;
extern unsigned int bus1_quota_handles;
extern unsigned int bus1_quota_fds;
extern unsigned int bus1_quota_objects;

struct bus1_user *bus1_user_ref_by_uid(kuid_t uid);
struct bus1_user *bus1_user_ref(struct bus1_user *user);
struct bus1_user *bus1_user_unref(struct bus1_user *user);
/* Every user, one line each, for debugfs (debugfs.h). */
extern const struct seq_operations bus1_user_seq_ops;
/* Add @c to the sum @sum (the caller serializes). */
static inline void bus1_charge_add(struct bus1_charge *sum, const struct bus1_charge *c)
{
	sum->bytes += c->bytes;
	sum->messages += c->messages;
	sum->handles += c->handles;
	sum->fds += c->fds;
}

/* Take @c, added earlier, out of @sum (the caller serializes). */
static inline void bus1_charge_sub(struct bus1_charge *sum, const struct bus1_charge *c)
{
	WARN_ON(sum->bytes < c->bytes || sum->messages < c->messages ||
		sum->handles < c->handles || sum->fds < c->fds);
	sum->bytes -= c->bytes;
	sum->messages -= c->messages;
	sum->handles -= c->handles;
	sum->fds -= c->fds;
}

int bus1_user_charge(struct bus1_user *user, const struct bus1_charge *charge);
void bus1_user_uncharge(struct bus1_user *user, const struct bus1_charge *charge);
int bus1_user_charge_objects(struct bus1_user *user, unsigned int n);
void bus1_user_force_objects(struct bus1_user *user, unsigned int n);
void bus1_user_uncharge_objects(struct bus1_user *user, unsigned int n);

#endif /* __BUS1_USER_H */
