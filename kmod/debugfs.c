// SPDX-License-Identifier: GPL-2.0
/*
 * The module's accounting in debugfs: see debugfs.h.
 */

#include <linux/debugfs.h>
#include <linux/seq_file.h>
#include "debugfs.h"
#include "stats.h"
#include "user.h"

static struct dentry *bus1_debugfs_dir;

static int bus1_objects_show(struct seq_file *m, void *v)
{
	int i;

	for (i = 0; i < BUS1_STAT_N; i++)
		seq_printf(m, "%s %lld\n", bus1_stat_names[i],
			   percpu_counter_sum(&bus1_stats[i]));
	return 0;
}
DEFINE_SHOW_ATTRIBUTE(bus1_objects);

static int bus1_users_open(struct inode *inode, struct file *file)
{
	return seq_open(file, &bus1_user_seq_ops);
}

static const struct file_operations bus1_users_fops = {
	.owner		= THIS_MODULE,
	.open		= bus1_users_open,
	.read		= seq_read,
	.llseek		= seq_lseek,
	.release	= seq_release,
};

/**
 * bus1_debugfs_init() - create /sys/kernel/debug/bus1/
 *
 * Without debugfs (not built in, or locked down) the files are simply not
 * there: the module works the same, so failures are not reported.
 */
void bus1_debugfs_init(void)
{
	bus1_debugfs_dir = debugfs_create_dir("bus1", NULL);
	debugfs_create_file("users", 0400, bus1_debugfs_dir, NULL, &bus1_users_fops);
	debugfs_create_file("objects", 0400, bus1_debugfs_dir, NULL, &bus1_objects_fops);
}

/**
 * bus1_debugfs_exit() - remove /sys/kernel/debug/bus1/
 *
 * debugfs waits for readers inside a file operation to leave before the
 * files go, so the module's code is not unloaded under them.
 */
void bus1_debugfs_exit(void)
{
	debugfs_remove_recursive(bus1_debugfs_dir);
	bus1_debugfs_dir = NULL;
}
