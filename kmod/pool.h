/* SPDX-License-Identifier: GPL-2.0 */
#ifndef __BUS1_POOL_H
#define __BUS1_POOL_H

/**
 * DOC: Pools
 *
 * Every peer has a pool: a shmem file of fixed size (module parameter
 * pool_size, 256 MiB by default, allocated lazily page by page) that the
 * peer maps read-only with mmap(2) on its bus1 fd. Writable mappings are
 * refused and VM_MAYWRITE is cleared, so mprotect() cannot add write access
 * later. Only the kernel writes into a pool, through the shmem file.
 *
 * The pool is cut into slices. A slice is reserved for a message before it is
 * staged for the peer; the sender then copies the data straight from its own
 * memory into the slice (one copy per receiver, no bounce buffer), before
 * anything is staged, and the receiver
 * writes the translated handles and fds behind the data at RECV. A slice is
 * "in flight" until the receiver dequeues its message; from then on it is
 * "published" and belongs to the receiver until SLICE_RELEASE (or a reset).
 *
 * Allocation is best fit over a tree of free slices ordered by size; all
 * slices are also on a list ordered by offset, so a freed slice merges with
 * free neighbours in O(1). Busy slices are in a tree ordered by offset, for
 * SLICE_RELEASE. Whole pages that become free are punched out of the shmem
 * file, so a pool only holds memory for what is in use (plus its first
 * 512 KiB once touched, where small messages keep coming and going). The
 * punching itself runs after the peer lock is dropped (bus1_pool_punch()),
 * so that no sender waits on the receiver's page cache and mapping.
 *
 * Shares: a pool is a resource of its owner that other users fill. To keep
 * one foreign user from filling it for everybody, every busy slice is
 * accounted to a share, the bytes one sending uid occupies in this pool
 * (in-flight and published slices alike, until the slice is freed). A
 * limited (foreign) sender may take a slice only if, afterwards, its share
 * is still no larger than what stays free:
 *
 *	share + size <= free - size	(free: pool size - busy bytes, before)
 *
 * So one user never holds more than half of what was free when it started,
 * and whoever comes next always finds the other half; each further user again
 * gets at most half of the rest. A sender that owns the pool (same uid as the
 * peer's opener) is not limited: the caller decides, see bus1_entry_reserve().
 * Shares live in a per-pool rb-tree by uid and exist only while they are not
 * zero.
 *
 * Slices: every busy slice costs kernel memory (its descriptor, and the free
 * fragment it may split off), which neither the bytes quota (in-flight only)
 * nor the pool size (8 bytes a slice) bounds for slices the receiver keeps.
 * So a pool holds at most @max_slices busy slices (module parameter
 * max_slices, taken when the pool is created): beyond that it is full,
 * ENOSPC, like a pool without room. Limited senders are held to the same
 * rule for their number of slices as for their bytes, so one foreign user
 * cannot use up the count either:
 *
 *	share slices + 1 <= free slices - 1	(free: max_slices - busy, before)
 *
 * Locking: the pool has no lock of its own. Every function except
 * bus1_pool_write_iter() and bus1_pool_write_kvec() requires the owning
 * peer's lock (@lock, asserted). The write functions only use the file and
 * an offset inside a slice the caller has allocated and not yet freed, and
 * run unlocked: they read user memory, which may fault for as long as the
 * user likes, and no other user touches that range while the slice is busy.
 * They write the shmem pages directly, without the inode lock (see
 * bus1_pool_copy()). The file itself lives as long as the peer object (not
 * just until disconnect).
 */

#include <linux/list.h>
#include <linux/rbtree.h>
#include <linux/types.h>
#include <linux/uidgid.h>

struct file;
struct iov_iter;
struct mutex;
struct vm_area_struct;

/**
 * struct bus1_pool_share - what one limited sending user occupies of a pool
 * @rb:		link into the pool's share tree, by uid
 * @uid:	the sending user
 * @bytes:	bytes of the busy slices accounted to this share (never 0
 *		while linked)
 * @n_slices:	number of those slices (never 0 while linked)
 */
struct bus1_pool_share {
	struct rb_node rb;
	kuid_t uid;
	size_t bytes;
	size_t n_slices;
};

/**
 * struct bus1_slice - a range of a pool
 * @entry:	link into the pool's list of all slices, by offset
 * @punch_link:	link into the pool's punch list while @punching
 * @rb:	link into the free tree (by size) or the busy tree (by offset)
 * @share:	busy: the share it is accounted to, or NULL (unlimited sender)
 * @offset:	offset in the pool
 * @size:	size in bytes (a multiple of 8, never 0)
 * @free:	whether the slice is free
 * @published:	busy and owned by the receiver (its message was dequeued)
 * @punching:	free pages on their way back to the system (bus1_pool_punch())
 */
struct bus1_slice {
	struct list_head entry;
	struct list_head punch_link;
	struct rb_node rb;
	struct bus1_pool_share *share;
	size_t offset;
	size_t size;
	bool free : 1;
	bool published : 1;
	bool punching : 1;
};

/**
 * struct bus1_pool - a peer's pool
 * @f:		the shmem file backing the pool
 * @size:	its size
 * @allocated:	bytes in busy slices
 * @n_busy:	number of busy slices
 * @max_slices:	the most busy slices it may have
 * @slices:	all slices, ordered by offset
 * @free_tree:	free slices, ordered by size
 * @busy_tree:	busy slices, ordered by offset
 * @shares:	shares of limited senders with busy slices, ordered by uid
 * @lock:	the owning peer's lock
 * @punch_list:	punching slices, for bus1_pool_punch()
 * @defer_punch: whether frees leave the punching to bus1_pool_punch()
 */
struct bus1_pool {
	struct file *f;
	size_t size;
	size_t allocated;
	size_t n_busy;
	size_t max_slices;
	struct list_head slices;
	struct rb_root free_tree;
	struct rb_root busy_tree;
	struct rb_root shares;
	struct mutex *lock;		/* the owner peer's lock: guards the pool */
	struct list_head punch_list;
	bool defer_punch;
};

extern unsigned long bus1_pool_size;
extern unsigned int bus1_max_slices;

int bus1_pool_init(struct bus1_pool *pool, struct mutex *lock);
void bus1_pool_deinit(struct bus1_pool *pool);
struct bus1_slice *bus1_pool_alloc(struct bus1_pool *pool, size_t size, bool limited,
				   kuid_t uid);
void bus1_pool_free(struct bus1_pool *pool, struct bus1_slice *slice);
void bus1_pool_punch(struct bus1_pool *pool);
void bus1_pool_publish(struct bus1_pool *pool, struct bus1_slice *slice);
int bus1_pool_release_published(struct bus1_pool *pool, size_t offset);
void bus1_pool_flush(struct bus1_pool *pool);
void bus1_pool_trim(struct bus1_pool *pool);
int bus1_pool_write_iter(struct bus1_pool *pool, struct bus1_slice *slice,
			 size_t offset, struct iov_iter *iter);
int bus1_pool_write_kvec(struct bus1_pool *pool, struct bus1_slice *slice,
			 size_t offset, const void *data, size_t len);
int bus1_pool_mmap(struct bus1_pool *pool, struct vm_area_struct *vma);

#endif /* __BUS1_POOL_H */
