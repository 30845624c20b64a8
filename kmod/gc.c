// SPDX-License-Identifier: GPL-2.0
/*
 * Collecting reference cycles through queued files: see gc.h.
 */

#include <linux/atomic.h>
#include <linux/dcache.h>
#include <linux/file.h>
#include <linux/fs.h>
#include <linux/hash.h>
#include <linux/jiffies.h>
#include <linux/list.h>
#include <linux/lockdep.h>
#include <linux/log2.h>
#include <linux/magic.h>
#include <linux/minmax.h>
#include <linux/mutex.h>
#include <linux/net.h>
#include <linux/rbtree.h>
#include <linux/sched.h>
#include <linux/skbuff.h>
#include <linux/slab.h>
#include <linux/spinlock.h>
#include <linux/sort.h>
#include <linux/string.h>
#include <linux/workqueue.h>
#include <net/af_unix.h>
#include <net/scm.h>
#include <net/sock.h>
#include "gc.h"
#include "message.h"
#include "peer.h"

static DEFINE_MUTEX(bus1_gc_peers_lock);
static LIST_HEAD(bus1_gc_peers);
/* peers an fd of which was closed, to look at on their own first */
static LIST_HEAD(bus1_gc_hints);
/* unix sockets carried by live messages */
static atomic_long_t bus1_gc_n_unix = ATOMIC_LONG_INIT(0);

#define BUS1_GC_DELAY_MIN	(HZ / 4)
#define BUS1_GC_DELAY_MAX	(8 * HZ)
#define BUS1_GC_DELAY_RETRY	(HZ / 10)
/*
 * A quick look at one peer gives up past this many vertices (and leaves the
 * peer to a full pass): a cycle a process leaves behind is a handful.
 */
#define BUS1_GC_QUICK_VERTICES	128
/* peers one round of quick looks takes, and of them at most so many of one user */
#define BUS1_GC_QUICK_ROOTS	32
#define BUS1_GC_QUICK_PER_USER	4

static void bus1_gc_work_fn(struct work_struct *work);
static DECLARE_DELAYED_WORK(bus1_gc_work, bus1_gc_work_fn);

/*
 * When the work runs, and what it does then, under @bus1_gc_sched_lock: a
 * full pass is wanted at @bus1_gc_full_due but never before
 * @bus1_gc_full_not_before; a round of quick looks runs while peers are
 * hinted, never before @bus1_gc_quick_not_before. @bus1_gc_due is when the
 * work is queued to run, while it is pending. All in jiffies.
 */
static DEFINE_SPINLOCK(bus1_gc_sched_lock);
static unsigned long bus1_gc_due = INITIAL_JIFFIES;
static bool bus1_gc_want_full;
static unsigned long bus1_gc_full_due = INITIAL_JIFFIES;
static unsigned long bus1_gc_full_not_before = INITIAL_JIFFIES;
static unsigned long bus1_gc_quick_not_before = INITIAL_JIFFIES;
/* delay of the next re-check while a cycle is possible (work item only) */
static unsigned long bus1_gc_backoff = BUS1_GC_DELAY_MIN;

static unsigned long bus1_gc_later(unsigned long a, unsigned long b)
{
	return time_after(a, b) ? a : b;
}

/* Have the work run at @due, or sooner if it already is to. */
static void bus1_gc_arm(unsigned long due)
{
	unsigned long now = jiffies;

	lockdep_assert_held(&bus1_gc_sched_lock);
	/*
	 * Only ever bring the work forward: a stream of closes must not keep
	 * pushing a pending run back.
	 */
	if (delayed_work_pending(&bus1_gc_work) && !time_after(bus1_gc_due, due))
		return;
	bus1_gc_due = due;
	mod_delayed_work(system_wq, &bus1_gc_work, time_after(due, now) ? due - now : 0);
}

/* Want a full pass in @delay, or sooner if one already is. */
static void bus1_gc_want_full_in(unsigned long delay)
{
	unsigned long due = jiffies + delay;

	lockdep_assert_held(&bus1_gc_sched_lock);
	if (!bus1_gc_want_full || time_before(due, bus1_gc_full_due))
		bus1_gc_full_due = due;
	bus1_gc_want_full = true;
	bus1_gc_arm(bus1_gc_later(bus1_gc_full_due, bus1_gc_full_not_before));
}

static bool bus1_gc_file_is_unix(struct file *f)
{
	struct socket *sock = sock_from_file(f);

	return sock && sock->sk && sock->sk->sk_family == AF_UNIX;
}

static bool bus1_gc_file_is_io_uring(struct file *f)
{
	return f->f_inode->i_sb->s_magic == ANON_INODE_FS_MAGIC &&
	       !strcmp(f->f_path.dentry->d_name.name, "[io_uring]");
}

/**
 * bus1_gc_check_file() - may a file be carried by a message?
 * @f:		the file
 *
 * Return: 0 for an ordinary file, 1 for an AF_UNIX socket (the caller
 * counts it in the message), -EOPNOTSUPP for a bus1 fd or an io_uring fd.
 */
int bus1_gc_check_file(struct file *f)
{
	if (f->f_op == &bus1_fops || bus1_gc_file_is_io_uring(f))
		return -EOPNOTSUPP;
	return bus1_gc_file_is_unix(f) ? 1 : 0;
}

/**
 * bus1_gc_kick() - something changed that may have closed a cycle
 *
 * Asks for a full pass soon if any queue holds a unix socket.
 */
void bus1_gc_kick(void)
{
	if (atomic_long_read(&bus1_gc_n_unix) <= 0)
		return;
	spin_lock(&bus1_gc_sched_lock);
	bus1_gc_want_full_in(BUS1_GC_DELAY_RETRY);
	spin_unlock(&bus1_gc_sched_lock);
}

/**
 * bus1_gc_closed() - an fd of a peer was closed
 * @peer:	the peer
 *
 * If the peer's queue holds a unix socket, its last outside reference may be
 * gone: it is looked at soon, on its own (a quick look), whatever a full
 * pass over other users' graphs is doing. A peer whose queue holds none
 * reaches no file, so it cannot keep a cycle alive.
 */
void bus1_gc_closed(struct bus1_peer *peer)
{
	if (atomic_long_read(&bus1_gc_n_unix) <= 0 || !READ_ONCE(peer->n_unix_entries))
		return;
	/* a close loop finds it hinted already: no lock for that */
	if (list_empty(&peer->gc_hint_link)) {
		mutex_lock(&bus1_gc_peers_lock);
		if (list_empty(&peer->gc_hint_link) && !list_empty(&peer->gc_link))
			list_add_tail(&peer->gc_hint_link, &bus1_gc_hints);
		mutex_unlock(&bus1_gc_peers_lock);
	}
	spin_lock(&bus1_gc_sched_lock);
	bus1_gc_arm(bus1_gc_later(jiffies + BUS1_GC_DELAY_RETRY, bus1_gc_quick_not_before));
	spin_unlock(&bus1_gc_sched_lock);
}

/**
 * bus1_gc_track() - a message carrying unix sockets was created
 * @n_unix:	how many it carries
 */
void bus1_gc_track(size_t n_unix)
{
	if (n_unix) {
		atomic_long_add(n_unix, &bus1_gc_n_unix);
		bus1_gc_kick();
	}
}

/**
 * bus1_gc_untrack() - such a message was freed
 * @n_unix:	how many it carried
 */
void bus1_gc_untrack(size_t n_unix)
{
	if (n_unix)
		WARN_ON(atomic_long_sub_return(n_unix, &bus1_gc_n_unix) < 0);
}

/**
 * bus1_gc_add_peer() - make a new peer known to the collector
 * @peer:	peer, connected
 */
void bus1_gc_add_peer(struct bus1_peer *peer)
{
	mutex_lock(&bus1_gc_peers_lock);
	list_add_tail(&peer->gc_link, &bus1_gc_peers);
	mutex_unlock(&bus1_gc_peers_lock);
}

/**
 * bus1_gc_remove_peer() - forget a peer (at disconnect)
 * @peer:	peer; its lock must not be held
 */
void bus1_gc_remove_peer(struct bus1_peer *peer)
{
	lockdep_assert_not_held(&peer->lock);
	mutex_lock(&bus1_gc_peers_lock);
	list_del_init(&peer->gc_link);
	list_del_init(&peer->gc_hint_link);
	mutex_unlock(&bus1_gc_peers_lock);
}

/**
 * bus1_gc_exit() - stop the collector (module exit; no peer is left)
 */
void bus1_gc_exit(void)
{
	cancel_delayed_work_sync(&bus1_gc_work);
	WARN_ON(atomic_long_read(&bus1_gc_n_unix));
	WARN_ON(!list_empty(&bus1_gc_hints));
}

/* ---- one pass -------------------------------------------------------- */

enum bus1_gc_type {
	BUS1_GC_PEER,		/* key: the peer's file */
	BUS1_GC_UNIX,		/* key: the socket's file */
	BUS1_GC_MESSAGE,	/* key: the message */
};

/*
 * @parent and @rank: union-find over the edges found, so that every vertex
 * knows its weakly connected component (its root). @dirty (on a root): the
 * second view of some vertex of the component differed from the first.
 * @seq: a peer's @unix_seq when its queue was scanned.
 */
struct bus1_gc_vertex {
	struct hlist_node hnode;
	struct list_head link;
	void *key;
	struct bus1_gc_vertex *parent;
	unsigned int rank;
	enum bus1_gc_type type;
	bool reachable;
	bool dirty;
	long count;
	long inref;
	u64 seq;
	size_t n_out;
	size_t max_out;
	struct bus1_gc_vertex **out;
};

/*
 * One pass. @outer: the full pass a quick look runs in the middle of (its
 * vertices hold a reference each, which the look does not count), or NULL.
 * @max_vertices: how many the look may find before it gives up, 0 for a
 * full pass.
 */
struct bus1_gc {
	struct bus1_gc *outer;
	size_t max_vertices;
	size_t n_vertices;
	struct hlist_head *table;
	unsigned int bits;
	struct list_head vertices;
	struct file **buf;
	size_t max_buf;
	struct sock **socks;
	size_t max_socks;
};

static struct bus1_gc_vertex *bus1_gc_find(struct bus1_gc *gc, void *key)
{
	struct bus1_gc_vertex *v;

	hlist_for_each_entry(v, &gc->table[hash_ptr(key, gc->bits)], hnode)
		if (v->key == key)
			return v;
	return NULL;
}

/*
 * The vertex of @key, created if new. For files, the caller passes its own
 * reference, which a new vertex keeps and an existing one drops. A message
 * is found under its destination's lock, which keeps it alive; a new vertex
 * takes a reference on it, since nothing stops a RECV from freeing it while
 * the pass goes on.
 */
static struct bus1_gc_vertex *bus1_gc_vertex(struct bus1_gc *gc, void *key,
					     enum bus1_gc_type type)
{
	struct bus1_gc_vertex *v;

	v = bus1_gc_find(gc, key);
	if (v) {
		if (type != BUS1_GC_MESSAGE)
			fput(key);
		return v;
	}
	v = kzalloc(sizeof(*v), GFP_KERNEL);
	if (!v) {
		if (type != BUS1_GC_MESSAGE)
			fput(key);
		return NULL;
	}
	v->key = type == BUS1_GC_MESSAGE ? bus1_message_ref(key) : key;
	gc->n_vertices++;
	v->parent = v;
	v->type = type;
	hlist_add_head(&v->hnode, &gc->table[hash_ptr(key, gc->bits)]);
	list_add_tail(&v->link, &gc->vertices);
	return v;
}

/* The root of @v's component; halves the path on the way. */
static struct bus1_gc_vertex *bus1_gc_component(struct bus1_gc_vertex *v)
{
	while (v->parent != v) {
		v->parent = v->parent->parent;
		v = v->parent;
	}
	return v;
}

/* One component of @a's and @b's, the lower tree under the higher. */
static void bus1_gc_join(struct bus1_gc_vertex *a, struct bus1_gc_vertex *b)
{
	a = bus1_gc_component(a);
	b = bus1_gc_component(b);
	if (a == b)
		return;
	if (a->rank < b->rank)
		swap(a, b);
	b->parent = a;
	if (a->rank == b->rank)
		a->rank++;
}

/* Would @n more vertices take a quick look past its limit? */
static bool bus1_gc_over(struct bus1_gc *gc, size_t n)
{
	return gc->max_vertices && gc->n_vertices + n > gc->max_vertices;
}

static int bus1_gc_edge(struct bus1_gc_vertex *from, struct bus1_gc_vertex *to)
{
	struct bus1_gc_vertex **out;
	size_t max;

	if (from->n_out == from->max_out) {
		max = max_t(size_t, 4, from->max_out * 2);
		out = krealloc_array(from->out, max, sizeof(*out), GFP_KERNEL);
		if (!out)
			return -ENOMEM;
		from->out = out;
		from->max_out = max;
	}
	from->out[from->n_out++] = to;
	to->inref++;
	bus1_gc_join(from, to);
	return 0;
}

static bool bus1_gc_wanted(struct file *f)
{
	return f->f_op == &bus1_fops || bus1_gc_file_is_unix(f);
}

/*
 * Take a reference on every bus1 file and unix socket queued on @sk into
 * gc->buf, from *n on. Return the number it would need (may exceed the
 * buffer: then the caller grows it and starts over).
 */
static size_t bus1_gc_collect_queue(struct bus1_gc *gc, struct sock *sk, size_t n)
{
	struct scm_fp_list *fp;
	struct sk_buff *skb;
	int i;

	spin_lock(&sk->sk_receive_queue.lock);
	skb_queue_walk(&sk->sk_receive_queue, skb) {
		fp = UNIXCB(skb).fp;
		if (!fp)
			continue;
		for (i = 0; i < fp->count; i++) {
			if (!bus1_gc_wanted(fp->fp[i]))
				continue;
			if (n < gc->max_buf)
				gc->buf[n] = get_file(fp->fp[i]);
			n++;
		}
	}
	spin_unlock(&sk->sk_receive_queue.lock);
	return n;
}

/* The not yet accepted connections of a listening socket, referenced. */
static size_t bus1_gc_collect_embryos(struct bus1_gc *gc, struct sock *sk)
{
	struct sk_buff *skb;
	size_t n = 0;

	spin_lock(&sk->sk_receive_queue.lock);
	skb_queue_walk(&sk->sk_receive_queue, skb) {
		if (n < gc->max_socks) {
			sock_hold(skb->sk);
			gc->socks[n] = skb->sk;
		}
		n++;
	}
	spin_unlock(&sk->sk_receive_queue.lock);
	return n;
}

static void bus1_gc_put_buf(struct bus1_gc *gc, size_t n)
{
	while (n--)
		fput(gc->buf[n]);
}

static int bus1_gc_grow(void **buf, size_t *max, size_t need, size_t size)
{
	void *p;

	kvfree(*buf);
	*buf = NULL;
	*max = 0;
	p = kvmalloc_array(need, size, GFP_KERNEL);
	if (!p)
		return -ENOMEM;
	*buf = p;
	*max = need;
	return 0;
}

/*
 * Collect what is queued on the unix socket of @f into gc->buf (references).
 * Return the count or a negative errno.
 */
static ssize_t bus1_gc_collect_unix(struct bus1_gc *gc, struct file *f)
{
	struct sock *sk = sock_from_file(f)->sk;
	size_t i, n, n_socks;
	int r = 0;

	if (READ_ONCE(sk->sk_state) != TCP_LISTEN) {
		for (;;) {
			n = bus1_gc_collect_queue(gc, sk, 0);
			if (n <= gc->max_buf)
				return n;
			bus1_gc_put_buf(gc, gc->max_buf);
			r = bus1_gc_grow((void **)&gc->buf, &gc->max_buf, 2 * n, sizeof(*gc->buf));
			if (r < 0)
				return r;
		}
	}

	for (;;) {
		n_socks = bus1_gc_collect_embryos(gc, sk);
		if (n_socks <= gc->max_socks)
			break;
		for (i = 0; i < gc->max_socks; i++)
			sock_put(gc->socks[i]);
		r = bus1_gc_grow((void **)&gc->socks, &gc->max_socks, 2 * n_socks,
				 sizeof(*gc->socks));
		if (r < 0)
			return r;
	}
	for (;;) {
		n = 0;
		for (i = 0; i < n_socks; i++)
			n = bus1_gc_collect_queue(gc, gc->socks[i], n);
		if (n <= gc->max_buf)
			break;
		bus1_gc_put_buf(gc, gc->max_buf);
		r = bus1_gc_grow((void **)&gc->buf, &gc->max_buf, 2 * n, sizeof(*gc->buf));
		if (r < 0)
			break;
	}
	for (i = 0; i < n_socks; i++)
		sock_put(gc->socks[i]);
	return r < 0 ? r : n;
}

static int bus1_gc_scan_unix(struct bus1_gc *gc, struct bus1_gc_vertex *v)
{
	struct bus1_gc_vertex *to;
	ssize_t i, n;

	n = bus1_gc_collect_unix(gc, v->key);
	if (n < 0)
		return n;
	if (bus1_gc_over(gc, n)) {
		bus1_gc_put_buf(gc, n);
		return -E2BIG;
	}
	for (i = 0; i < n; i++) {
		to = bus1_gc_vertex(gc, gc->buf[i], gc->buf[i]->f_op == &bus1_fops ?
				    BUS1_GC_PEER : BUS1_GC_UNIX);
		if (!to || bus1_gc_edge(v, to) < 0) {
			/* the rest of the collected references are still ours */
			while (++i < n)
				fput(gc->buf[i]);
			return -ENOMEM;
		}
	}
	return 0;
}

static int bus1_gc_scan_message(struct bus1_gc *gc, struct bus1_gc_vertex *v)
{
	struct bus1_message *message = v->key;
	struct bus1_gc_vertex *to;
	size_t i;

	if (bus1_gc_over(gc, message->n_unix))
		return -E2BIG;
	for (i = 0; i < message->n_fds; i++) {
		/* bus1 fds are never carried, see bus1_gc_check_file() */
		if (!message->files[i] || !bus1_gc_file_is_unix(message->files[i]))
			continue;
		to = bus1_gc_vertex(gc, get_file(message->files[i]), BUS1_GC_UNIX);
		if (!to || bus1_gc_edge(v, to) < 0)
			return -ENOMEM;
	}
	return 0;
}

static int bus1_gc_scan_peer(struct bus1_gc *gc, struct bus1_gc_vertex *v)
{
	struct bus1_peer *peer = ((struct file *)v->key)->private_data;
	struct bus1_queue_node *qn;
	struct bus1_gc_vertex *to;
	struct bus1_entry *entry;
	struct rb_node *n;
	int r = 0;

	mutex_lock(&peer->lock);
	v->seq = peer->unix_seq;
	for (n = rb_first_cached(&peer->queue.tree); n && !r; n = rb_next(n)) {
		qn = rb_entry(n, struct bus1_queue_node, rb);
		entry = container_of(qn, struct bus1_entry, qnode);
		if (!entry->message || !entry->message->n_unix)
			continue;
		if (bus1_gc_over(gc, 1)) {
			r = -E2BIG;
			break;
		}
		to = bus1_gc_vertex(gc, entry->message, BUS1_GC_MESSAGE);
		r = to ? bus1_gc_edge(v, to) : -ENOMEM;
	}
	mutex_unlock(&peer->lock);
	return r;
}

/*
 * Second look at a peer's queue: true if no entry carrying a unix socket
 * came or went since the first (its @unix_seq moves with every one).
 */
static bool bus1_gc_verify_peer(struct bus1_gc_vertex *v)
{
	struct bus1_peer *peer = ((struct file *)v->key)->private_data;
	bool same;

	mutex_lock(&peer->lock);
	same = peer->unix_seq == v->seq;
	mutex_unlock(&peer->lock);
	return same;
}

static int bus1_gc_ptr_cmp(const void *a, const void *b)
{
	unsigned long x = *(const unsigned long *)a, y = *(const unsigned long *)b;

	return x < y ? -1 : x > y;
}

/*
 * Second look at a socket's queue: the same files must be there, and no
 * file that is not a vertex yet. Return 1 if so, 0 if not, or an errno.
 */
static int bus1_gc_verify_unix(struct bus1_gc *gc, struct bus1_gc_vertex *v)
{
	struct bus1_gc_vertex **seen;
	ssize_t i, n;
	int r = 1;

	n = bus1_gc_collect_unix(gc, v->key);
	if (n < 0)
		return n;
	if (n != v->n_out) {
		bus1_gc_put_buf(gc, n);
		return 0;
	}
	seen = kvmalloc_array(n ?: 1, sizeof(*seen), GFP_KERNEL);
	if (!seen) {
		bus1_gc_put_buf(gc, n);
		return -ENOMEM;
	}
	for (i = 0; i < n; i++) {
		seen[i] = bus1_gc_find(gc, gc->buf[i]);
		if (!seen[i])
			r = 0;
	}
	bus1_gc_put_buf(gc, n);
	if (r) {
		sort(seen, n, sizeof(*seen), bus1_gc_ptr_cmp, NULL);
		sort(v->out, n, sizeof(*v->out), bus1_gc_ptr_cmp, NULL);
		r = !memcmp(seen, v->out, n * sizeof(*seen));
	}
	kvfree(seen);
	return r;
}

/* References on @v's key, minus the collector's own (this pass's and its outer's). */
static long bus1_gc_count(struct bus1_gc *gc, struct bus1_gc_vertex *v)
{
	long n;

	if (v->type == BUS1_GC_MESSAGE)
		n = kref_read(&((struct bus1_message *)v->key)->ref) - 1;
	else
		n = file_count((struct file *)v->key) - 1;
	if (gc->outer && bus1_gc_find(gc->outer, v->key))
		n--;
	return n;
}

/* Mark everything reachable from @root. */
static int bus1_gc_mark(struct bus1_gc_vertex *root, struct bus1_gc_vertex **stack)
{
	struct bus1_gc_vertex *v;
	size_t i, top = 0;

	if (root->reachable)
		return 0;
	root->reachable = true;
	stack[top++] = root;
	while (top) {
		v = stack[--top];
		for (i = 0; i < v->n_out; i++) {
			if (v->out[i]->reachable)
				continue;
			v->out[i]->reachable = true;
			stack[top++] = v->out[i];
		}
	}
	return 0;
}

/* A pass with a table for about @n vertices (2^6 to 2^18 buckets). */
static struct bus1_gc *bus1_gc_new(struct bus1_gc *outer, size_t max_vertices, size_t n)
{
	struct bus1_gc *gc;
	size_t i;

	gc = kzalloc(sizeof(*gc), GFP_KERNEL);
	if (!gc)
		return NULL;
	INIT_LIST_HEAD(&gc->vertices);
	gc->outer = outer;
	gc->max_vertices = max_vertices;
	gc->bits = clamp_t(unsigned int, order_base_2(n + 1), 6, 18);
	gc->table = kvmalloc_array(1UL << gc->bits, sizeof(*gc->table), GFP_KERNEL);
	if (!gc->table) {
		kfree(gc);
		return NULL;
	}
	for (i = 0; i < (1UL << gc->bits); i++)
		INIT_HLIST_HEAD(&gc->table[i]);
	return gc;
}

enum {
	BUS1_GC_DONE,		/* no cycle is possible now */
	BUS1_GC_SUSPECT,	/* a peer is queued on a socket: look again later */
	BUS1_GC_RETRY,		/* part of the graph changed while scanned */
};

static void bus1_gc_quick_round(struct bus1_gc *outer);

/*
 * Between two vertices of a full pass: the CPU for whoever wants it, and the
 * peers closed meanwhile a quick look (they need not wait for this pass).
 */
static void bus1_gc_checkpoint(struct bus1_gc *gc)
{
	cond_resched();
	if (!gc->max_vertices)
		bus1_gc_quick_round(gc);
}

/*
 * Walk the graph from the vertices @gc holds (its roots). Garbage peers are
 * returned on @dead (a reference on each file, through the vertices' keys:
 * the caller disconnects them, then frees @gc).
 *
 * Whether a vertex is referenced from outside, and what it reaches, depends
 * only on the counts and edges of its own weakly connected component: every
 * edge out of it was found, and an edge into it that was not found (from a
 * file no root reaches) leaves a count above the edges found, which makes the
 * vertex referenced from outside. So a component whose second view differs
 * from its first is given up for this pass (BUS1_GC_RETRY), and the verdicts
 * on all the others stand: another user's files changing all the time cannot
 * keep a dead peer alive. For the same reason any set of roots gives right
 * verdicts on what it reaches: a quick look from one peer is a pass too.
 */
static int bus1_gc_walk(struct bus1_gc *gc, struct bus1_gc_vertex ***deadp, size_t *n_deadp)
{
	struct bus1_gc_vertex *v, **stack = NULL, **dead;
	size_t n = 0, n_dead = 0;
	bool suspect = false, changed = false;
	int r = 0, ok;

	/* the graph, breadth first: new vertices are appended as we go */
	list_for_each_entry(v, &gc->vertices, link) {
		switch (v->type) {
		case BUS1_GC_PEER:
			r = bus1_gc_scan_peer(gc, v);
			break;
		case BUS1_GC_MESSAGE:
			r = bus1_gc_scan_message(gc, v);
			break;
		case BUS1_GC_UNIX:
			r = bus1_gc_scan_unix(gc, v);
			break;
		}
		if (r < 0)
			return r;
		v->count = bus1_gc_count(gc, v);
		n++;
		/* a large graph must not hold this CPU from the peers it walks */
		bus1_gc_checkpoint(gc);
	}

	/* the same view a second time, or give up on the component for now */
	list_for_each_entry(v, &gc->vertices, link) {
		ok = 1;
		if (v->type == BUS1_GC_UNIX) {
			ok = bus1_gc_verify_unix(gc, v);
			if (ok < 0)
				return ok;
		} else if (v->type == BUS1_GC_PEER) {
			ok = bus1_gc_verify_peer(v);
		}
		if (!ok || bus1_gc_count(gc, v) != v->count) {
			bus1_gc_component(v)->dirty = true;
			changed = true;
		}
		bus1_gc_checkpoint(gc);
	}

	stack = kvmalloc_array(n ?: 1, sizeof(*stack), GFP_KERNEL);
	dead = kvmalloc_array(n ?: 1, sizeof(*dead), GFP_KERNEL);
	if (!stack || !dead) {
		kvfree(stack);
		kvfree(dead);
		return -ENOMEM;
	}
	list_for_each_entry(v, &gc->vertices, link)
		if (v->count > v->inref)
			bus1_gc_mark(v, stack);
	list_for_each_entry(v, &gc->vertices, link) {
		if (v->type != BUS1_GC_PEER || bus1_gc_component(v)->dirty)
			continue;
		if (!v->reachable)
			dead[n_dead++] = v;
		else if (v->inref)
			suspect = true;
	}
	kvfree(stack);
	*deadp = dead;
	*n_deadp = n_dead;
	if (changed)
		return BUS1_GC_RETRY;
	return suspect ? BUS1_GC_SUSPECT : BUS1_GC_DONE;
}

static void bus1_gc_free(struct bus1_gc *gc)
{
	struct bus1_gc_vertex *v, *t;

	list_for_each_entry_safe(v, t, &gc->vertices, link) {
		if (v->type == BUS1_GC_MESSAGE)
			bus1_message_unref(v->key);
		else
			fput(v->key);
		kfree(v->out);
		kfree(v);
	}
	kvfree(gc->buf);
	kvfree(gc->socks);
	kvfree(gc->table);
	kfree(gc);
}

/*
 * Nobody can reach a dead peer's file any more, so it stays dead (a SEND may
 * still queue on it: the disconnect drops that too); disconnecting drops its
 * queue and pool, which frees the cycle once the collector's own references
 * are put.
 */
static void bus1_gc_collect(struct bus1_gc_vertex **dead, size_t n_dead)
{
	struct bus1_peer *peer;
	size_t i;

	for (i = 0; i < n_dead; i++) {
		peer = ((struct file *)dead[i]->key)->private_data;
		pr_debug("bus1: collecting peer %llu, unreachable\n", peer->id);
		bus1_peer_disconnect(peer);
	}
	kvfree(dead);
}

/*
 * A quick look at the peer of @root (a reference, which the pass takes
 * over): a pass from it alone, given up past BUS1_GC_QUICK_VERTICES.
 * Return BUS1_GC_DONE if nothing is left to look at, or what a full pass
 * should look at again.
 */
static int bus1_gc_quick(struct bus1_gc *outer, struct file *root)
{
	struct bus1_gc_vertex **dead = NULL;
	size_t n_dead = 0;
	struct bus1_gc *gc;
	int r = -ENOMEM;

	gc = bus1_gc_new(outer, BUS1_GC_QUICK_VERTICES, BUS1_GC_QUICK_VERTICES);
	if (!gc) {
		fput(root);
		return r;
	}
	if (bus1_gc_vertex(gc, root, BUS1_GC_PEER))
		r = bus1_gc_walk(gc, &dead, &n_dead);
	bus1_gc_collect(dead, n_dead);
	bus1_gc_free(gc);
	/* collected peers freed sockets: a full pass looks once more */
	return r == BUS1_GC_DONE && n_dead ? BUS1_GC_RETRY : r;
}

/*
 * Take hinted peers for a round of quick looks, in the order they were
 * closed, at most BUS1_GC_QUICK_PER_USER of one user: a user who closes fds
 * all the time delays only its own. A reference on each file goes to @roots.
 */
static size_t bus1_gc_take_hints(struct file **roots)
{
	struct bus1_peer *peer, *t;
	size_t i, n = 0, same;

	mutex_lock(&bus1_gc_peers_lock);
	list_for_each_entry_safe(peer, t, &bus1_gc_hints, gc_hint_link) {
		if (n == BUS1_GC_QUICK_ROOTS)
			break;
		for (i = 0, same = 0; i < n; i++)
			if (((struct bus1_peer *)roots[i]->private_data)->user == peer->user)
				same++;
		if (same == BUS1_GC_QUICK_PER_USER)
			continue;
		list_del_init(&peer->gc_hint_link);
		/* a file being released is disconnected right after us */
		if (READ_ONCE(peer->n_unix_entries) &&
		    atomic_long_inc_not_zero(&peer->file->f_count))
			roots[n++] = peer->file;
	}
	mutex_unlock(&bus1_gc_peers_lock);
	return n;
}

/*
 * A round of quick looks at the peers closed lately (in the middle of the
 * full pass @outer, or on its own if NULL). Rounds are BUS1_GC_DELAY_RETRY
 * apart at least, and a round that used T of CPU is followed by the next
 * no sooner than 3T later. What a look could not settle is left to a full
 * pass.
 */
static void bus1_gc_quick_round(struct bus1_gc *outer)
{
	u64 cpu_ns = current->se.sum_exec_runtime;
	struct file *roots[BUS1_GC_QUICK_ROOTS];
	bool unsettled = false;
	size_t i, n;

	if (list_empty(&bus1_gc_hints) ||
	    time_before(jiffies, READ_ONCE(bus1_gc_quick_not_before)))
		return;
	n = bus1_gc_take_hints(roots);
	for (i = 0; i < n; i++)
		if (bus1_gc_quick(outer, roots[i]) != BUS1_GC_DONE)
			unsettled = true;
	cpu_ns = current->se.sum_exec_runtime - cpu_ns;

	spin_lock(&bus1_gc_sched_lock);
	WRITE_ONCE(bus1_gc_quick_not_before,
		   jiffies + max_t(unsigned long, BUS1_GC_DELAY_RETRY,
				   3 * nsecs_to_jiffies(cpu_ns)));
	if (unsettled)
		bus1_gc_want_full_in(BUS1_GC_DELAY_RETRY);
	spin_unlock(&bus1_gc_sched_lock);
}

/* A full pass, from every peer whose queue holds a unix socket. */
static void bus1_gc_full(void)
{
	struct bus1_gc_vertex **dead = NULL;
	u64 cpu_ns = current->se.sum_exec_runtime;
	struct bus1_peer *peer;
	size_t n_dead = 0, n = 0;
	struct bus1_gc *gc;
	int r = 0;

	/*
	 * A table for about four vertices per queued unix socket (message,
	 * socket, what is queued on it): lookups stay short however large a
	 * graph a user builds. The counts are read unlocked: they only size
	 * the table.
	 */
	mutex_lock(&bus1_gc_peers_lock);
	list_for_each_entry(peer, &bus1_gc_peers, gc_link)
		n += READ_ONCE(peer->n_unix_entries);
	gc = bus1_gc_new(NULL, 0, 4 * n);
	list_for_each_entry(peer, &bus1_gc_peers, gc_link) {
		if (!gc)
			break;
		if (!READ_ONCE(peer->n_unix_entries))
			continue;
		/* a file being released is disconnected right after us */
		if (!atomic_long_inc_not_zero(&peer->file->f_count))
			continue;
		if (!bus1_gc_vertex(gc, peer->file, BUS1_GC_PEER)) {
			r = -ENOMEM;
			break;
		}
	}
	mutex_unlock(&bus1_gc_peers_lock);
	if (!gc)
		r = -ENOMEM;
	if (!r)
		r = bus1_gc_walk(gc, &dead, &n_dead);
	bus1_gc_collect(dead, n_dead);
	if (gc)
		bus1_gc_free(gc);

	/*
	 * A user who builds a large graph and kicks the collector all the
	 * time must not make it take more than a quarter of a CPU: a pass
	 * that used T of CPU is followed by the next one no sooner than 3T
	 * later. CPU time, not wall time: a pass that other tasks preempted
	 * (the attacker's own threads, say) did not cost more, and delaying
	 * the next one for it would delay other users' collection.
	 */
	cpu_ns = current->se.sum_exec_runtime - cpu_ns;

	spin_lock(&bus1_gc_sched_lock);
	bus1_gc_full_not_before = jiffies + 3 * nsecs_to_jiffies(cpu_ns);
	if (r == BUS1_GC_SUSPECT) {
		bus1_gc_want_full_in(bus1_gc_backoff);
		bus1_gc_backoff = min_t(unsigned long, 2 * bus1_gc_backoff, BUS1_GC_DELAY_MAX);
	} else if (r == BUS1_GC_RETRY || r < 0) {
		bus1_gc_want_full_in(r < 0 ? BUS1_GC_DELAY_MAX : BUS1_GC_DELAY_RETRY);
	} else {
		bus1_gc_backoff = BUS1_GC_DELAY_MIN;
		/* collected peers freed sockets: look once more */
		if (n_dead)
			bus1_gc_want_full_in(BUS1_GC_DELAY_RETRY);
	}
	spin_unlock(&bus1_gc_sched_lock);
}

static void bus1_gc_drop_hints(void)
{
	struct bus1_peer *peer, *t;

	mutex_lock(&bus1_gc_peers_lock);
	list_for_each_entry_safe(peer, t, &bus1_gc_hints, gc_hint_link)
		list_del_init(&peer->gc_hint_link);
	mutex_unlock(&bus1_gc_peers_lock);
}

static void bus1_gc_work_fn(struct work_struct *work)
{
	unsigned long now = jiffies, due;
	bool full, any;

	if (atomic_long_read(&bus1_gc_n_unix) <= 0) {
		/* no queue holds a socket: nothing can be a cycle */
		bus1_gc_drop_hints();
		spin_lock(&bus1_gc_sched_lock);
		bus1_gc_want_full = false;
		bus1_gc_backoff = BUS1_GC_DELAY_MIN;
		spin_unlock(&bus1_gc_sched_lock);
		return;
	}

	spin_lock(&bus1_gc_sched_lock);
	full = bus1_gc_want_full && !time_before(now, bus1_gc_full_due) &&
	       !time_before(now, bus1_gc_full_not_before);
	if (full)
		bus1_gc_want_full = false;
	spin_unlock(&bus1_gc_sched_lock);

	bus1_gc_quick_round(NULL);
	if (full)
		bus1_gc_full();

	/* what is still wanted, at its time */
	spin_lock(&bus1_gc_sched_lock);
	any = bus1_gc_want_full;
	due = bus1_gc_later(bus1_gc_full_due, bus1_gc_full_not_before);
	if (!list_empty(&bus1_gc_hints)) {
		if (!any || time_before(bus1_gc_quick_not_before, due))
			due = bus1_gc_quick_not_before;
		any = true;
	}
	if (any)
		bus1_gc_arm(due);
	spin_unlock(&bus1_gc_sched_lock);
}
