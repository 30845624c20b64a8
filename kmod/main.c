// SPDX-License-Identifier: GPL-2.0
/*
 * bus1 - capability-based IPC: the /dev/bus1 misc device and the module.
 *
 * Module parameters (all also readable/writable in
 * /sys/module/bus1/parameters/; changes apply to new peers and new charges):
 *   pool_size		per-peer pool size in bytes (at most 256 MiB)
 *   quota_bytes	pool bytes a user may have in flight
 *   quota_messages	messages a user may have in flight
 *   quota_handles	handles a user may have in flight
 *   quota_fds		fds a user may have in flight
 *   quota_objects	nodes and handles the peers of a user may hold
 *   max_destinations	destinations of one SEND
 *   max_handles	handles carried by one message (and nodes per destroy)
 *   max_fds		fds carried by one message
 *   max_slices		busy slices (queued or received, not released) of one
 *			peer's pool
 */

#include <linux/fs.h>
#include <linux/miscdevice.h>
#include <linux/mm.h>
#include <linux/module.h>
#include <linux/poll.h>
#include <linux/sizes.h>
#include "debugfs.h"
#include "gc.h"
#include "uapi/linux/bus1.h"
#include "peer.h"
#include "stats.h"
#include "pool.h"
#include "user.h"

struct percpu_counter bus1_stats[BUS1_STAT_N];

unsigned long bus1_pool_size = SZ_256M;
unsigned long bus1_quota_bytes = SZ_256M;
unsigned int bus1_quota_messages = 16383;
unsigned int bus1_quota_handles = 65536;
unsigned int bus1_quota_fds = 4096;
unsigned int bus1_quota_objects = 65536;
unsigned int bus1_max_destinations = 4096;
unsigned int bus1_max_handles = 4096;
unsigned int bus1_max_fds = 253;
/* twice quota_messages: a foreign sender's half is not below its message quota */
unsigned int bus1_max_slices = 32768;

/* The pool size is checked on every write, not only at load. */
static int bus1_param_set_pool_size(const char *val, const struct kernel_param *kp)
{
	unsigned long v;
	int r;

	r = kstrtoul(val, 0, &v);
	if (r < 0)
		return r;
	if (v < PAGE_SIZE || v > SZ_256M)
		return -EINVAL;
	*(unsigned long *)kp->arg = v;
	return 0;
}

static const struct kernel_param_ops bus1_param_pool_size_ops = {
	.set	= bus1_param_set_pool_size,
	.get	= param_get_ulong,
};

module_param_cb(pool_size, &bus1_param_pool_size_ops, &bus1_pool_size, 0644);
MODULE_PARM_DESC(pool_size, "Per-peer pool size in bytes (at most 256 MiB)");
/* At least one slice, or no message could ever be delivered. */
static int bus1_param_set_max_slices(const char *val, const struct kernel_param *kp)
{
	unsigned int v;
	int r;

	r = kstrtouint(val, 0, &v);
	if (r < 0)
		return r;
	if (!v)
		return -EINVAL;
	*(unsigned int *)kp->arg = v;
	return 0;
}

static const struct kernel_param_ops bus1_param_max_slices_ops = {
	.set	= bus1_param_set_max_slices,
	.get	= param_get_uint,
};

module_param_named(quota_bytes, bus1_quota_bytes, ulong, 0644);
MODULE_PARM_DESC(quota_bytes, "Pool bytes one user may have in flight");
module_param_named(quota_messages, bus1_quota_messages, uint, 0644);
MODULE_PARM_DESC(quota_messages, "Messages one user may have in flight");
module_param_named(quota_handles, bus1_quota_handles, uint, 0644);
MODULE_PARM_DESC(quota_handles, "Handles one user may have in flight");
module_param_named(quota_fds, bus1_quota_fds, uint, 0644);
MODULE_PARM_DESC(quota_fds, "File descriptors one user may have in flight");
module_param_named(quota_objects, bus1_quota_objects, uint, 0644);
MODULE_PARM_DESC(quota_objects, "Nodes and handles the peers of one user may hold");
module_param_named(max_destinations, bus1_max_destinations, uint, 0644);
MODULE_PARM_DESC(max_destinations, "Destinations of one message");
module_param_named(max_handles, bus1_max_handles, uint, 0644);
MODULE_PARM_DESC(max_handles, "Handles carried by one message");
module_param_named(max_fds, bus1_max_fds, uint, 0644);
MODULE_PARM_DESC(max_fds, "File descriptors carried by one message");
module_param_cb(max_slices, &bus1_param_max_slices_ops, &bus1_max_slices, 0644);
MODULE_PARM_DESC(max_slices, "Busy slices (messages queued or received and not released) of one peer");

static int bus1_fop_open(struct inode *inode, struct file *file)
{
	struct bus1_peer *peer;

	peer = bus1_peer_new();
	if (IS_ERR(peer))
		return PTR_ERR(peer);
	file->private_data = peer;
	peer->file = file;
	bus1_gc_add_peer(peer);
	return stream_open(inode, file);
}

/* Every close of an fd: the last outside reference may be gone (gc.h). */
static int bus1_fop_flush(struct file *file, fl_owner_t id)
{
	bus1_gc_closed(file->private_data);
	return 0;
}

static int bus1_fop_release(struct inode *inode, struct file *file)
{
	struct bus1_peer *peer = file->private_data;

	/* ESHUTDOWN if PEER_DISCONNECT already did it */
	bus1_peer_disconnect(peer);
	bus1_peer_unref(peer);
	bus1_gc_kick();
	return 0;
}

static __poll_t bus1_fop_poll(struct file *file, poll_table *wait)
{
	struct bus1_peer *peer = file->private_data;
	__poll_t mask;

	poll_wait(file, &peer->waitq, wait);

	mutex_lock(&peer->lock);
	if (peer->disconnected) {
		mask = EPOLLHUP;
	} else {
		mask = EPOLLOUT | EPOLLWRNORM;
		if (bus1_queue_peek(&peer->queue))
			mask |= EPOLLIN | EPOLLRDNORM;
	}
	mutex_unlock(&peer->lock);
	return mask;
}

static int bus1_fop_mmap(struct file *file, struct vm_area_struct *vma)
{
	struct bus1_peer *peer = file->private_data;

	/*
	 * No peer lock here: nothing else needs one, the pool's file and size
	 * are constant.
	 */
	if (READ_ONCE(peer->disconnected))
		return -ESHUTDOWN;
	return bus1_pool_mmap(&peer->pool, vma);
}

static long bus1_fop_ioctl(struct file *file, unsigned int cmd, unsigned long arg)
{
	return bus1_peer_ioctl(file->private_data, cmd, arg);
}

const struct file_operations bus1_fops = {
	.owner		= THIS_MODULE,
	.open		= bus1_fop_open,
	.flush		= bus1_fop_flush,
	.release	= bus1_fop_release,
	.poll		= bus1_fop_poll,
	.mmap		= bus1_fop_mmap,
	.unlocked_ioctl	= bus1_fop_ioctl,
	.compat_ioctl	= compat_ptr_ioctl,
	.llseek		= noop_llseek,
};

static struct miscdevice bus1_misc = {
	.fops		= &bus1_fops,
	.minor		= MISC_DYNAMIC_MINOR,
	.name		= "bus1",
	.mode		= 0666,
};

const char * const bus1_stat_names[BUS1_STAT_N] = {
	[BUS1_STAT_PEERS]	= "peers",
	[BUS1_STAT_NODES]	= "nodes",
	[BUS1_STAT_HANDLES]	= "handles",
	[BUS1_STAT_MESSAGES]	= "messages",
	[BUS1_STAT_ENTRIES]	= "entries",
	[BUS1_STAT_SHARES]	= "pool_shares",
};

static void bus1_stats_destroy(void)
{
	s64 n;
	int i;

	for (i = 0; i < BUS1_STAT_N; i++) {
		n = percpu_counter_sum(&bus1_stats[i]);
		/* every file is closed: every object must be gone */
		WARN(n, "bus1: %lld %s leaked\n", n, bus1_stat_names[i]);
	}
	for (i = 0; i < BUS1_STAT_N; i++)
		percpu_counter_destroy(&bus1_stats[i]);
}

/*
 * The ioctl numbers encode the sizes of their structures, and the sizes are
 * ABI: a field added without a new number, or padding that crept in, must
 * not build.
 */
static void __init bus1_check_abi(void)
{
	BUILD_BUG_ON(_IOC_SIZE(BUS1_CMD_PEER_DISCONNECT) != sizeof(__u64));
	BUILD_BUG_ON(_IOC_SIZE(BUS1_CMD_PEER_QUERY) != sizeof(struct bus1_cmd_peer_query));
	BUILD_BUG_ON(_IOC_SIZE(BUS1_CMD_PEER_RESET) != sizeof(struct bus1_cmd_peer_reset));
	BUILD_BUG_ON(_IOC_SIZE(BUS1_CMD_HANDLE_TRANSFER) !=
		     sizeof(struct bus1_cmd_handle_transfer));
	BUILD_BUG_ON(_IOC_SIZE(BUS1_CMD_HANDLE_RELEASE) !=
		     sizeof(struct bus1_cmd_handle_release));
	BUILD_BUG_ON(_IOC_SIZE(BUS1_CMD_NODES_DESTROY) != sizeof(struct bus1_cmd_nodes_destroy));
	BUILD_BUG_ON(_IOC_SIZE(BUS1_CMD_SLICE_RELEASE) != sizeof(struct bus1_cmd_slice_release));
	BUILD_BUG_ON(_IOC_SIZE(BUS1_CMD_HANDLE_QUERY) != sizeof(struct bus1_cmd_handle_query));
	BUILD_BUG_ON(_IOC_SIZE(BUS1_CMD_SEND) != sizeof(struct bus1_cmd_send));
	BUILD_BUG_ON(_IOC_SIZE(BUS1_CMD_RECV) != sizeof(struct bus1_cmd_recv));
	BUILD_BUG_ON(_IOC_SIZE(BUS1_CMD_CALL) != sizeof(struct bus1_cmd_call));
	BUILD_BUG_ON(sizeof(struct bus1_cmd_peer_query) != 128);
	BUILD_BUG_ON(sizeof(struct bus1_cmd_peer_reset) != 8);
	BUILD_BUG_ON(sizeof(struct bus1_cmd_handle_transfer) != 32);
	BUILD_BUG_ON(sizeof(struct bus1_cmd_handle_release) != 16);
	BUILD_BUG_ON(sizeof(struct bus1_cmd_nodes_destroy) != 24);
	BUILD_BUG_ON(sizeof(struct bus1_cmd_slice_release) != 16);
	BUILD_BUG_ON(sizeof(struct bus1_cmd_handle_query) != 48);
	BUILD_BUG_ON(sizeof(struct bus1_cmd_send) != 80);
	BUILD_BUG_ON(sizeof(struct bus1_cmd_recv) != 72);
	BUILD_BUG_ON(sizeof(struct bus1_cmd_call) != 176);
	BUILD_BUG_ON(offsetof(struct bus1_cmd_call, recv) != 80);
}

static int __init bus1_modinit(void)
{
	int i, r;

	bus1_check_abi();

	if (bus1_pool_size < PAGE_SIZE || bus1_pool_size > SZ_256M) {
		pr_err("bus1: pool_size must be between %lu and %u\n", PAGE_SIZE, SZ_256M);
		return -EINVAL;
	}
	for (i = 0; i < BUS1_STAT_N; i++) {
		r = percpu_counter_init(&bus1_stats[i], 0, GFP_KERNEL);
		if (r < 0) {
			while (i--)
				percpu_counter_destroy(&bus1_stats[i]);
			return r;
		}
	}
	r = misc_register(&bus1_misc);
	if (r < 0) {
		bus1_stats_destroy();
		return r;
	}
	bus1_debugfs_init();
	return 0;
}

static void __exit bus1_modexit(void)
{
	bus1_debugfs_exit();
	misc_deregister(&bus1_misc);
	bus1_gc_exit();
	bus1_stats_destroy();
}

module_init(bus1_modinit);
module_exit(bus1_modexit);
MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("bus1: capability-based IPC");
MODULE_ALIAS("devname:bus1");
