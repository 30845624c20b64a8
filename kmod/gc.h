/* SPDX-License-Identifier: GPL-2.0 */
#ifndef __BUS1_GC_H
#define __BUS1_GC_H

/**
 * DOC: Reference cycles through queued files
 *
 * A queued message holds a reference on every file it carries, and a peer
 * lives as long as its file. If a file reachable from a peer's queue holds a
 * reference on that peer's file, and nothing else does, neither is ever
 * freed: a leak any user can cause. The files that can hold references on
 * other files are bus1 peers themselves, AF_UNIX sockets (the files queued
 * on them with SCM_RIGHTS) and io_uring instances (registered files).
 *
 * - bus1 fds and io_uring fds are refused in messages (EOPNOTSUPP). D-Bus
 *   has no use for either, and a peer in its own queue is a cycle at once.
 * - AF_UNIX sockets are carried: D-Bus services pass connected sockets over
 *   the bus (portals, PipeWire). What closes a cycle is a bus1 fd in flight
 *   on such a socket, and that can be sent long after the socket was
 *   queued, by whoever holds the socket's peer end. So cycles are not
 *   prevented but collected.
 *
 * The collector is a mark-and-sweep over the files that bus1 queues hold,
 * in the spirit of AF_UNIX's own collector. Vertices are the peers whose
 * queues hold unix sockets, the messages carrying them, the sockets, and,
 * transitively, the sockets and bus1 files queued on those sockets (for a
 * listening socket: on its not yet accepted connections). A file is
 * referenced from outside if its reference count exceeds the number of
 * edges found into it; everything reachable from such a file (or from a
 * message someone other than its queue entries holds) is alive. A peer that
 * is not alive can never be reached again by anyone: it is disconnected,
 * which drops its queue and so the references that formed the cycle.
 *
 * Consistency: nothing stops while the collector scans; it reads the graph
 * twice and trusts only what both views agree on. A peer's queue changes
 * under its lock, and every entry carrying a unix socket that comes or goes
 * bumps the peer's @unix_seq: the second view of a peer is that sequence,
 * which no change can hide. A socket's queue has no such counter; but an
 * edge is only ever added there by a sender (that makes the target look
 * referenced from outside, which is safe), and only removed by a receiver
 * holding a reference on the socket, so the socket was referenced from
 * outside. So every socket's queue is scanned twice and compared. The
 * same holds for the edges of a peer: one is removed by RECV, through the
 * peer's own fd, or by a reset or disconnect; a sender taking back what it
 * queued (reclaim) only drops references. Reference counts are read in
 * each view too. A pass joins the vertices into weakly connected
 * components as it finds edges; whether a vertex is referenced from
 * outside and what it reaches depend on its component's counts and edges
 * alone, so the verdict on a component is used if both views of that
 * component agree. A component whose views differ is looked at again in a
 * later pass, and only it: a user whose files change all the time delays
 * the collection of its own garbage, never another user's (unless their
 * files are connected, e.g. one's socket is queued on the other's), and no
 * SEND or RECV ever waits for a pass: the collector holds a peer's lock
 * only while it walks that peer's queue.
 *
 * When it runs: a close of a peer's fd while the peer's queue holds a unix
 * socket hints that peer, and about 100 ms later it is looked at on its own
 * (a quick look: a pass from that peer alone, given up past 128 vertices),
 * in the middle of a full pass if one is running, so that a close never
 * waits for a pass over other users' graphs. A round of quick looks takes
 * at most 32 peers, 4 of one user, in the order they were closed. A full
 * pass, from every peer whose queue holds a unix socket, runs about 100 ms
 * after a unix socket is sent or a quick look left something unsettled,
 * and then again (with growing delays, 250 ms to 8 s) as long as some bus1
 * file is found queued on such a socket, since closing the last outside fd
 * of a socket tells bus1 nothing. While no queue holds a unix socket,
 * nothing runs. A full pass that used T of CPU is followed by the next no
 * sooner than 3T later, however often it is asked for, and so is a round of
 * quick looks (and 100 ms at least): a user who builds a large graph and
 * closes fds in a loop gets at most about a quarter of a CPU of collector
 * work, and a pass yields the CPU between vertices.
 */

#include <linux/types.h>

struct bus1_peer;
struct file;

int bus1_gc_check_file(struct file *f);
void bus1_gc_track(size_t n_unix);
void bus1_gc_untrack(size_t n_unix);
void bus1_gc_kick(void);
void bus1_gc_closed(struct bus1_peer *peer);
void bus1_gc_add_peer(struct bus1_peer *peer);
void bus1_gc_remove_peer(struct bus1_peer *peer);
void bus1_gc_exit(void);

#endif /* __BUS1_GC_H */
