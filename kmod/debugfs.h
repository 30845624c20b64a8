/* SPDX-License-Identifier: GPL-2.0 */
#ifndef __BUS1_DEBUGFS_H
#define __BUS1_DEBUGFS_H

/**
 * DOC: What an operator reads
 *
 * The module's accounting is shown in debugfs, under /sys/kernel/debug/bus1/,
 * so that an operator can see who fills the kernel's queues without a core
 * dump or a peer of every user:
 *
 * - users: one line per user object (DOC: Users and quotas), after a header
 *   line naming the columns: the uid, the peers it opened, and its charges in
 *   flight (bytes, messages, handles, fds) and objects held. The limits are
 *   the quota_* module parameters.
 * - objects: the live object counters (DOC: Object counters), one
 *   "name value" line each.
 *
 * Both files are read-only and readable by root only: a user's usage tells
 * what it is doing. Reading walks the user tree under its mutex, which the
 * send path never takes for a peer's own uid, and copies to user memory only
 * after the lock is dropped (seq_file fills its buffer first). This is a
 * diagnostic interface, not an ABI: columns may be added at the end.
 */

void bus1_debugfs_init(void);
void bus1_debugfs_exit(void);

#endif /* __BUS1_DEBUGFS_H */
