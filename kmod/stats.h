/* SPDX-License-Identifier: GPL-2.0 */
#ifndef __BUS1_STATS_H
#define __BUS1_STATS_H

/**
 * DOC: Object counters
 *
 * Live peers, nodes, handles, messages, queue entries and pool shares are
 * counted in per-CPU counters (cheap on the send path: no shared cache
 * line). The module can only be unloaded once every /dev/bus1 file is
 * closed, and by then every object must be gone: module exit WARNs about any
 * counter that is not zero, which turns a reference leak into a visible
 * kernel warning in the tests.
 */

#include <linux/percpu_counter.h>

enum bus1_stat {
	BUS1_STAT_PEERS,
	BUS1_STAT_NODES,
	BUS1_STAT_HANDLES,
	BUS1_STAT_MESSAGES,
	BUS1_STAT_ENTRIES,
	BUS1_STAT_SHARES,
	BUS1_STAT_N,
};

extern struct percpu_counter bus1_stats[BUS1_STAT_N];
/* What each counter counts, for messages and debugfs (debugfs.h). */
extern const char * const bus1_stat_names[BUS1_STAT_N];

static inline void bus1_stat_inc(enum bus1_stat stat)
{
	percpu_counter_inc(&bus1_stats[stat]);
}

static inline void bus1_stat_dec(enum bus1_stat stat)
{
	percpu_counter_dec(&bus1_stats[stat]);
}

#endif /* __BUS1_STATS_H */
