/* SPDX-License-Identifier: GPL-2.0 */
#ifndef __BUS1_PEER_H
#define __BUS1_PEER_H

/**
 * DOC: Peers
 *
 * Every open file description of /dev/bus1 is a peer. A peer has a queue
 * (queue.h), a pool (pool.h), the handles it holds (node.h) and a clock (the
 * queue's). The file holds one reference on the peer; nodes hold references
 * on their owner and transactions on their destinations, so the peer object
 * can outlive its file. Closing the file (or PEER_DISCONNECT) *disconnects*
 * the peer: its nodes are destroyed (holders are notified), its handles
 * released, its queue flushed (charges returned) and its pool emptied;
 * nothing is queued for it any more, and every ioctl fails with ESHUTDOWN.
 *
 * Receiving: RECV runs under @recv_lock, so one RECV at a time per peer. It
 * *claims* the front entry under @lock (@recv_claim), then drops @lock for
 * everything that touches user memory or the fd table (reserving fds,
 * writing the pool, copy_to_user(), fd_install()), and takes @lock again
 * to dequeue the entry. Reset, disconnect and reclaim leave a claimed entry
 * alone; the receiver finds out (@disconnected, @flush_seq) and drops it
 * itself. So a receiver whose memory faults for ever (userfaultfd, FUSE)
 * holds up only its own peer's later RECVs, never a sender, a node
 * destruction or another destination of a multicast. While a reset or
 * disconnect runs (@flushing), RECV claims nothing: whatever is queued is
 * about to be dropped.
 *
 * Calling: CALL is a SEND, then a wait for the queue's front to be ready
 * (on @waitq, holding no lock, interruptible, bounded by the caller's
 * timeout), then a RECV, exactly the RECV above. Nothing is received out
 * of order and nothing is charged other than by the SEND and the RECV, so
 * CALL adds no guarantee to keep and no resource to bound. Once the SEND
 * succeeded nothing restarts the call (it would send twice): a signal is
 * EINTR, and the caller is told the message was sent.
 *
 * Locking: @lock protects everything in the peer except @ref, @id, @user,
 * @file and @pool's file and size, which are constant, @waitq and @tx_seq,
 * and @gc_link and @gc_hint_link (the collector's list lock). No code holds
 * two peer locks at once, and none copies from or to user memory, installs
 * an fd or faults under one. The lock order is peer lock -> node lock;
 * @recv_lock comes before both. The collector (gc.h) takes a peer lock
 * holding none of its own, so no SEND or RECV ever waits for a pass.
 */

#include <linux/kref.h>
#include <linux/mutex.h>
#include <linux/rbtree.h>
#include <linux/types.h>
#include <linux/wait.h>
#include "pool.h"
#include "queue.h"

struct bus1_entry;
struct bus1_user;
struct file;

/**
 * struct bus1_peer - a peer
 * @ref:		reference count
 * @id:			globally unique id (tie-breaker of queue ordering)
 * @tx_seq:		number of the last transaction started by this peer
 * @lock:		the peer lock
 * @waitq:		poll wait queue
 * @disconnected:	set once by disconnect
 * @user:		accounting object of the opener's real uid
 * @pool:		the pool
 * @queue:		the queue (and the peer's clock)
 * @handles_by_id:	held handles, by id
 * @handles_by_node:	held handles, by node
 * @handle_counter:	last handle counter value used
 * @file:		the peer's file (not a reference: it holds the peer)
 * @gc_link:		link into the collector's list of connected peers
 * @gc_hint_link:	link into the collector's list of peers to look at
 *			first, on their own (an fd of theirs was closed)
 * @n_unix_entries:	queued entries whose message carries a unix socket
 * @unix_seq:		bumped whenever @n_unix_entries changes: the collector
 *			compares it between its two views of the queue (gc.h)
 * @recv_lock:		serializes RECV
 * @recv_claim:		the entry a RECV is delivering, or NULL
 * @flush_seq:		number of resets and disconnects so far
 * @flushing:		resets and disconnects in progress (RECV claims nothing
 *			meanwhile: they drop the queue)
 */
struct bus1_peer {
	struct kref ref;
	u64 id;
	atomic64_t tx_seq;
	struct mutex lock;		/* all but the constant fields: see DOC */
	wait_queue_head_t waitq;
	bool disconnected;
	struct bus1_user *user;
	struct bus1_pool pool;
	struct bus1_queue queue;
	struct rb_root handles_by_id;
	struct rb_root handles_by_node;
	u64 handle_counter;
	struct file *file;
	struct list_head gc_link;
	struct list_head gc_hint_link;
	size_t n_unix_entries;
	u64 unix_seq;
	struct mutex recv_lock;	/* one RECV at a time */
	struct bus1_entry *recv_claim;
	u64 flush_seq;
	unsigned int flushing;
};

/* Per-message limits, module parameters (main.c). */
extern unsigned int bus1_max_destinations;
extern unsigned int bus1_max_handles;
extern unsigned int bus1_max_fds;

extern const struct file_operations bus1_fops;

struct bus1_peer *bus1_peer_new(void);
struct bus1_peer *bus1_peer_ref(struct bus1_peer *peer);
struct bus1_peer *bus1_peer_unref(struct bus1_peer *peer);
int bus1_peer_disconnect(struct bus1_peer *peer);
long bus1_peer_ioctl(struct bus1_peer *peer, unsigned int cmd, unsigned long arg);

#endif /* __BUS1_PEER_H */
