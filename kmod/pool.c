// SPDX-License-Identifier: GPL-2.0
/*
 * Per-peer pools: see pool.h.
 */

#include <linux/err.h>
#include <linux/falloc.h>
#include <linux/fs.h>
#include <linux/lockdep.h>
#include <linux/mm.h>
#include <linux/shmem_fs.h>
#include <linux/slab.h>
#include <linux/uio.h>
#include "compat.h"
#include "pool.h"
#include "stats.h"

static struct bus1_slice *bus1_slice_new(size_t offset, size_t size)
{
	struct bus1_slice *slice;

	slice = kmalloc(sizeof(*slice), GFP_KERNEL_ACCOUNT);
	if (!slice)
		return NULL;
	INIT_LIST_HEAD(&slice->entry);
	INIT_LIST_HEAD(&slice->punch_link);
	RB_CLEAR_NODE(&slice->rb);
	slice->share = NULL;
	slice->offset = offset;
	slice->size = size;
	slice->free = true;
	slice->published = false;
	slice->punching = false;
	return slice;
}

static void bus1_pool_link_free(struct bus1_pool *pool, struct bus1_slice *slice)
{
	struct rb_node **slot = &pool->free_tree.rb_node, *parent = NULL;
	struct bus1_slice *s;

	while (*slot) {
		parent = *slot;
		s = rb_entry(parent, struct bus1_slice, rb);
		if (slice->size < s->size)
			slot = &parent->rb_left;
		else
			slot = &parent->rb_right;
	}
	rb_link_node(&slice->rb, parent, slot);
	rb_insert_color(&slice->rb, &pool->free_tree);
	slice->free = true;
}

static void bus1_pool_link_busy(struct bus1_pool *pool, struct bus1_slice *slice)
{
	struct rb_node **slot = &pool->busy_tree.rb_node, *parent = NULL;
	struct bus1_slice *s;

	while (*slot) {
		parent = *slot;
		s = rb_entry(parent, struct bus1_slice, rb);
		/* busy slices never overlap, offsets are unique */
		if (WARN_ON(slice->offset == s->offset))
			return;
		if (slice->offset < s->offset)
			slot = &parent->rb_left;
		else
			slot = &parent->rb_right;
	}
	rb_link_node(&slice->rb, parent, slot);
	rb_insert_color(&slice->rb, &pool->busy_tree);
	slice->free = false;
}

static struct bus1_pool_share *bus1_pool_share_find(struct bus1_pool *pool, kuid_t uid)
{
	struct rb_node *n = pool->shares.rb_node;
	struct bus1_pool_share *share;

	while (n) {
		share = rb_entry(n, struct bus1_pool_share, rb);
		if (uid_lt(uid, share->uid))
			n = n->rb_left;
		else if (uid_gt(uid, share->uid))
			n = n->rb_right;
		else
			return share;
	}
	return NULL;
}

static void bus1_pool_share_link(struct bus1_pool *pool, struct bus1_pool_share *share)
{
	struct rb_node **slot = &pool->shares.rb_node, *parent = NULL;
	struct bus1_pool_share *s;

	while (*slot) {
		parent = *slot;
		s = rb_entry(parent, struct bus1_pool_share, rb);
		/* uids are unique: the caller looked this one up under the same lock */
		if (uid_lt(share->uid, s->uid))
			slot = &parent->rb_left;
		else
			slot = &parent->rb_right;
	}
	rb_link_node(&share->rb, parent, slot);
	rb_insert_color(&share->rb, &pool->shares);
}

/* Take a freed slice's bytes out of its share; drop the share when it is empty. */
static void bus1_pool_share_put(struct bus1_pool *pool, struct bus1_slice *slice)
{
	struct bus1_pool_share *share = slice->share;

	if (!share)
		return;
	slice->share = NULL;
	if (WARN_ON(share->bytes < slice->size || !share->n_slices)) {
		share->bytes = 0;
		share->n_slices = 0;
	} else {
		share->bytes -= slice->size;
		share->n_slices--;
	}
	if (!share->bytes || !share->n_slices) {
		WARN_ON(share->bytes || share->n_slices);
		rb_erase(&share->rb, &pool->shares);
		kfree(share);
		bus1_stat_dec(BUS1_STAT_SHARES);
	}
}

/**
 * bus1_pool_init() - create the shmem file of a pool
 * @pool:	pool to initialize
 * @lock:	the owning peer's lock, which protects the pool
 *
 * Return: 0 or a negative errno.
 */
int bus1_pool_init(struct bus1_pool *pool, struct mutex *lock)
{
	struct bus1_slice *slice;
	struct file *f;
	size_t size = PAGE_ALIGN(bus1_pool_size);

	INIT_LIST_HEAD(&pool->slices);
	pool->free_tree = RB_ROOT;
	pool->busy_tree = RB_ROOT;
	pool->shares = RB_ROOT;
	pool->allocated = 0;
	pool->n_busy = 0;
	pool->max_slices = max_t(unsigned int, READ_ONCE(bus1_max_slices), 1);
	pool->size = size;
	pool->f = NULL;
	pool->lock = lock;
	INIT_LIST_HEAD(&pool->punch_list);
	pool->defer_punch = true;

	slice = bus1_slice_new(0, size);
	if (!slice)
		return -ENOMEM;

	f = shmem_file_setup("bus1-pool", size, VM_NORESERVE);
	if (IS_ERR(f)) {
		kfree(slice);
		return PTR_ERR(f);
	}

	pool->f = f;
	list_add(&slice->entry, &pool->slices);
	bus1_pool_link_free(pool, slice);
	return 0;
}

/**
 * bus1_pool_deinit() - free a pool
 * @pool:	pool to free (initialized, or zeroed)
 *
 * Every busy slice must have been freed (bus1_pool_flush() frees published
 * ones; in-flight slices are freed by their transactions).
 */
void bus1_pool_deinit(struct bus1_pool *pool)
{
	struct bus1_slice *slice, *t;

	if (!pool->f)
		return;

	WARN_ON(!RB_EMPTY_ROOT(&pool->busy_tree));
	WARN_ON(pool->allocated || pool->n_busy);
	WARN_ON(!RB_EMPTY_ROOT(&pool->shares));
	list_for_each_entry_safe(slice, t, &pool->slices, entry) {
		list_del(&slice->entry);
		kfree(slice);
	}
	fput(pool->f);
	pool->f = NULL;
}

/**
 * bus1_pool_alloc() - allocate a slice
 * @pool:	pool to allocate from
 * @size:	bytes needed (0 is allowed; every slice has at least 8 bytes)
 * @limited:	the sender is subject to the share rule (see DOC: Pools)
 * @uid:	the sender's uid, whose share the slice is accounted to if
 *		@limited
 *
 * Return: the new busy, in-flight slice, ERR_PTR(-EDQUOT) if a limited
 * sender would exceed its share (of bytes or of slices), ERR_PTR(-ENOSPC)
 * if no free range is large enough or the pool has @max_slices busy slices,
 * or ERR_PTR(-ENOMEM).
 */
struct bus1_slice *bus1_pool_alloc(struct bus1_pool *pool, size_t size, bool limited,
				   kuid_t uid)
{
	struct bus1_slice *slice = NULL, *s, *rest;
	struct bus1_pool_share *share = NULL, *new_share = NULL;
	size_t avail, avail_slices;
	struct rb_node *n;

	lockdep_assert_held(pool->lock);
	if (size > pool->size || pool->n_busy >= pool->max_slices)
		return ERR_PTR(-ENOSPC);
	size = ALIGN(max_t(size_t, size, 8), 8);

	if (limited) {
		/*
		 * Afterwards the sender's share must not exceed what is still
		 * free. A pool too full for the slice anyway is ENOSPC below:
		 * that is not this sender's doing alone. No overflow: every
		 * term is at most the pool size (<= 256 MiB).
		 */
		avail = pool->size - pool->allocated;
		share = bus1_pool_share_find(pool, uid);
		if (size <= avail && (share ? share->bytes : 0) + size > avail - size)
			return ERR_PTR(-EDQUOT);
		/* the same rule for the number of slices; at least 1 is free */
		avail_slices = pool->max_slices - pool->n_busy;
		if ((share ? share->n_slices : 0) + 1 > avail_slices - 1)
			return ERR_PTR(-EDQUOT);
		if (!share) {
			new_share = kmalloc(sizeof(*new_share), GFP_KERNEL_ACCOUNT);
			if (!new_share)
				return ERR_PTR(-ENOMEM);
			RB_CLEAR_NODE(&new_share->rb);
			new_share->uid = uid;
			new_share->bytes = 0;
			new_share->n_slices = 0;
		}
	}

	/* best fit: the smallest free slice that is large enough */
	n = pool->free_tree.rb_node;
	while (n) {
		s = rb_entry(n, struct bus1_slice, rb);
		if (s->size >= size) {
			slice = s;
			n = n->rb_left;
		} else {
			n = n->rb_right;
		}
	}
	if (!slice) {
		kfree(new_share);
		return ERR_PTR(-ENOSPC);
	}

	if (slice->size > size) {
		rest = bus1_slice_new(slice->offset + size, slice->size - size);
		if (!rest) {
			kfree(new_share);
			return ERR_PTR(-ENOMEM);
		}
		list_add(&rest->entry, &slice->entry);
		rb_erase(&slice->rb, &pool->free_tree);
		slice->size = size;
		bus1_pool_link_free(pool, rest);
	} else {
		rb_erase(&slice->rb, &pool->free_tree);
	}

	slice->published = false;
	bus1_pool_link_busy(pool, slice);
	pool->allocated += slice->size;
	pool->n_busy++;

	if (new_share) {
		bus1_pool_share_link(pool, new_share);
		bus1_stat_inc(BUS1_STAT_SHARES);
		share = new_share;
	}
	if (share) {
		share->bytes += slice->size;
		share->n_slices++;
		slice->share = share;
	}
	return slice;
}

/*
 * Allocation prefers low offsets, so the start of a pool is where small
 * messages come and go all the time. Punching those pages on every free
 * would cost a page allocation and zeroing per message; they are kept.
 */
#define BUS1_POOL_KEEP		(512 * 1024)

/* Merge a slice that just became free with its free neighbours; link the result. */
static struct bus1_slice *bus1_pool_merge(struct bus1_pool *pool, struct bus1_slice *slice)
{
	struct bus1_slice *prev, *next;

	if (!list_is_first(&slice->entry, &pool->slices)) {
		prev = list_prev_entry(slice, entry);
		if (prev->free) {
			rb_erase(&prev->rb, &pool->free_tree);
			list_del(&slice->entry);
			prev->size += slice->size;
			kfree(slice);
			slice = prev;
		}
	}
	if (!list_is_last(&slice->entry, &pool->slices)) {
		next = list_next_entry(slice, entry);
		if (next->free) {
			rb_erase(&next->rb, &pool->free_tree);
			list_del(&next->entry);
			slice->size += next->size;
			kfree(next);
		}
	}
	bus1_pool_link_free(pool, slice);
	return slice;
}

/*
 * Give the pages [@start, @end) of the free slice @slice (linked, merged)
 * back to the system. Punching takes the shmem inode lock and unmaps the
 * receiver's mapping, which is not to be done under the peer lock every
 * sender of this pool needs: the range is carved out as a *punching* slice
 * (neither free nor busy, so nobody allocates it and no neighbour merges
 * into it) and bus1_pool_punch() does the work unlocked. Without memory for
 * the carving, or once the peer is disconnected, it is punched right here.
 */
static void bus1_pool_release_pages(struct bus1_pool *pool, struct bus1_slice *slice,
				    size_t start, size_t end)
{
	struct bus1_slice *mid, *tail = NULL;

	start = max_t(size_t, start, BUS1_POOL_KEEP);
	if (end <= start)
		return;
	if (!pool->defer_punch)
		goto now;

	mid = bus1_slice_new(start, end - start);
	if (!mid)
		goto now;
	if (end < slice->offset + slice->size) {
		tail = bus1_slice_new(end, slice->offset + slice->size - end);
		if (!tail) {
			kfree(mid);
			goto now;
		}
	}

	rb_erase(&slice->rb, &pool->free_tree);
	slice->size = start - slice->offset;
	mid->free = false;
	mid->punching = true;
	list_add(&mid->entry, &slice->entry);
	list_add_tail(&mid->punch_link, &pool->punch_list);
	if (tail) {
		list_add(&tail->entry, &mid->entry);
		bus1_pool_link_free(pool, tail);
	}
	if (slice->size) {
		bus1_pool_link_free(pool, slice);
	} else {
		list_del(&slice->entry);
		kfree(slice);
	}
	return;

now:
	vfs_fallocate(pool->f, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, start, end - start);
}

/**
 * bus1_pool_free() - free a busy slice
 * @pool:	pool the slice belongs to
 * @slice:	busy slice; it may be merged away and must not be used again
 *
 * Pages that become wholly free are released later, by bus1_pool_punch().
 */
void bus1_pool_free(struct bus1_pool *pool, struct bus1_slice *slice)
{
	size_t dirty_start, dirty_end;

	lockdep_assert_held(pool->lock);
	if (WARN_ON(slice->free || slice->punching))
		return;

	rb_erase(&slice->rb, &pool->busy_tree);
	WARN_ON(pool->allocated < slice->size || !pool->n_busy);
	pool->allocated -= slice->size;
	pool->n_busy--;
	bus1_pool_share_put(pool, slice);
	slice->published = false;
	dirty_start = ALIGN_DOWN(slice->offset, PAGE_SIZE);
	dirty_end = ALIGN(slice->offset + slice->size, PAGE_SIZE);

	slice = bus1_pool_merge(pool, slice);

	/* release the whole pages this slice touched that are now all free */
	bus1_pool_release_pages(pool, slice,
				max(dirty_start, ALIGN(slice->offset, PAGE_SIZE)),
				min(dirty_end, ALIGN_DOWN(slice->offset + slice->size, PAGE_SIZE)));
}

/**
 * bus1_pool_punch() - release the pages that bus1_pool_free() left to do
 * @pool:	pool; the owning peer's lock must not be held
 *
 * Called by whoever freed slices of @pool, once unlocked. Cheap when there
 * is nothing to do.
 */
void bus1_pool_punch(struct bus1_pool *pool)
{
	struct bus1_slice *s, *t;
	LIST_HEAD(list);

	lockdep_assert_not_held(pool->lock);
	if (list_empty_careful(&pool->punch_list))
		return;

	mutex_lock(pool->lock);
	list_splice_init(&pool->punch_list, &list);
	mutex_unlock(pool->lock);

	/* nobody touches a punching slice: neither free nor busy */
	list_for_each_entry(s, &list, punch_link)
		vfs_fallocate(pool->f, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
			      s->offset, s->size);

	mutex_lock(pool->lock);
	list_for_each_entry_safe(s, t, &list, punch_link) {
		list_del_init(&s->punch_link);
		s->punching = false;
		bus1_pool_merge(pool, s);
	}
	mutex_unlock(pool->lock);
}

/**
 * bus1_pool_publish() - hand an in-flight slice over to the receiver
 * @pool:	pool of the slice
 * @slice:	busy slice whose message was just dequeued
 */
void bus1_pool_publish(struct bus1_pool *pool, struct bus1_slice *slice)
{
	lockdep_assert_held(pool->lock);
	WARN_ON(slice->free || slice->published);
	slice->published = true;
}

/**
 * bus1_pool_release_published() - SLICE_RELEASE
 * @pool:	pool
 * @offset:	offset of a published slice
 *
 * Return: 0, or -ENXIO if no published slice starts at @offset.
 */
int bus1_pool_release_published(struct bus1_pool *pool, size_t offset)
{
	struct rb_node *n = pool->busy_tree.rb_node;
	struct bus1_slice *s;

	lockdep_assert_held(pool->lock);
	while (n) {
		s = rb_entry(n, struct bus1_slice, rb);
		if (offset < s->offset) {
			n = n->rb_left;
		} else if (offset > s->offset) {
			n = n->rb_right;
		} else {
			if (!s->published)
				return -ENXIO;
			bus1_pool_free(pool, s);
			return 0;
		}
	}
	return -ENXIO;
}

/**
 * bus1_pool_flush() - free every published slice
 * @pool:	pool
 *
 * In-flight slices stay: their messages still own them.
 */
void bus1_pool_flush(struct bus1_pool *pool)
{
	struct bus1_slice *s;
	struct rb_node *n;

	lockdep_assert_held(pool->lock);
	n = rb_first(&pool->busy_tree);
	while (n) {
		s = rb_entry(n, struct bus1_slice, rb);
		n = rb_next(n);
		if (s->published)
			bus1_pool_free(pool, s);
	}
}

/**
 * bus1_pool_trim() - release all memory of an unused pool
 * @pool:	pool
 *
 * Called at disconnect: the peer object (and its pool) may live on while
 * other peers still hold handles to its nodes, but its memory need not.
 * Does nothing if a slice is still busy.
 */
void bus1_pool_trim(struct bus1_pool *pool)
{
	lockdep_assert_held(pool->lock);
	/* from now on, frees punch right away: nobody calls bus1_pool_punch() */
	pool->defer_punch = false;
	if (!pool->allocated)
		vfs_fallocate(pool->f, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0, pool->size);
}

/*
 * Copy @len bytes from @iter into the pool at @pos, page by page. The pages
 * are looked up (allocated, for a hole) in the shmem file's page cache and
 * written directly: no inode lock is held while the source is read, so a
 * sender whose memory faults slowly (userfaultfd, FUSE) stalls only itself,
 * never another writer of the same pool nor a punch-hole. Writers never
 * overlap (each writes into its own busy slice), and only whole free pages
 * are punched, so no lock is needed between them either. New pages are
 * charged to the memory cgroup of the writing task.
 */
static int bus1_pool_copy(struct bus1_pool *pool, loff_t pos, struct iov_iter *iter,
			  size_t len)
{
	struct address_space *mapping = pool->f->f_mapping;
	struct page *page;
	size_t off, n, copied;

	while (len) {
		off = offset_in_page(pos);
		n = min_t(size_t, len, PAGE_SIZE - off);
		page = shmem_read_mapping_page_gfp(mapping, pos >> PAGE_SHIFT,
						   mapping_gfp_mask(mapping));
		if (IS_ERR(page))
			return PTR_ERR(page);
		copied = copy_page_from_iter(page, off, n, iter);
		/* shmem pages are only kept if dirty */
		set_page_dirty(page);
		put_page(page);
		if (copied != n)
			return -EFAULT;
		pos += n;
		len -= n;
		cond_resched();
	}
	return 0;
}

/**
 * bus1_pool_write_iter() - copy data into a slice
 * @pool:	pool
 * @slice:	busy slice owned by the caller
 * @offset:	offset inside the slice
 * @iter:	source (usually the sender's iovecs); advanced
 *
 * Runs without the peer lock (see DOC) and must: the source may be user
 * memory.
 *
 * Return: 0, -EFAULT if the source could not be read completely, or another
 * negative errno.
 */
int bus1_pool_write_iter(struct bus1_pool *pool, struct bus1_slice *slice,
			 size_t offset, struct iov_iter *iter)
{
	size_t len = iov_iter_count(iter);

	might_sleep();
	if (WARN_ON(offset > slice->size || len > slice->size - offset))
		return -EINVAL;
	return bus1_pool_copy(pool, slice->offset + offset, iter, len);
}

/**
 * bus1_pool_write_kvec() - copy kernel data into a slice
 * @pool:	pool
 * @slice:	busy slice owned by the caller
 * @offset:	offset inside the slice
 * @data:	source
 * @len:	bytes to copy
 *
 * Return: 0 or a negative errno.
 */
int bus1_pool_write_kvec(struct bus1_pool *pool, struct bus1_slice *slice,
			 size_t offset, const void *data, size_t len)
{
	struct kvec kv = { .iov_base = (void *)data, .iov_len = len };
	struct iov_iter iter;

	if (WARN_ON(offset > slice->size || len > slice->size - offset))
		return -EINVAL;
	iov_iter_kvec(&iter, ITER_SOURCE, &kv, 1, len);
	return bus1_pool_copy(pool, slice->offset + offset, &iter, len);
}

/**
 * bus1_pool_mmap() - map a pool read-only
 * @pool:	pool
 * @vma:	the new mapping
 *
 * Return: 0, -EPERM for a writable mapping, -EINVAL beyond the pool size.
 */
int bus1_pool_mmap(struct bus1_pool *pool, struct vm_area_struct *vma)
{
	unsigned long len = vma->vm_end - vma->vm_start;

	if (vma->vm_flags & VM_WRITE)
		return -EPERM;
	if (vma->vm_pgoff > (pool->size >> PAGE_SHIFT) ||
	    len > pool->size - (vma->vm_pgoff << PAGE_SHIFT))
		return -EINVAL;

	/* never let mprotect() make it writable (nor a private COW copy) */
	vm_flags_clear(vma, VM_MAYWRITE);
	vma_set_file(vma, pool->f);
	return call_mmap(pool->f, vma);
}
