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
 * Consistency: while the collector scans, it holds bus1_gc_rwsem for
 * writing. Every path that puts an entry whose message carries a unix
 * socket on a queue (staging and commit of such a SEND), or takes entries
 * off a queue that holds one (RECV, reset, disconnect, reclaim), holds it
 * for reading, and never across a user copy, so bus1's side of the graph is
 * frozen. A queue that holds none can only gain one through such a SEND, so
 * a path that finds none under the peer lock (peer->n_unix_entries) runs
 * without it: peers that pass no unix sockets never wait for a pass, however
 * large a graph another user built. The sockets' queues are not: an edge is only ever added
 * there by a sender (that makes the target look referenced from outside,
 * which is safe), and only removed by a receiver holding a reference on
 * the socket, so the socket was referenced from outside. Since reference
 * counts and edges are read at different moments, every socket's queue is
 * scanned twice and every count read twice. A pass joins the vertices into
 * weakly connected components as it finds edges; whether a vertex is
 * referenced from outside and what it reaches depend on its component's
 * counts and edges alone, so the verdict on a component is used if both
 * views of that component agree. A component whose views differ is looked
 * at again in a later pass, and only it: a user whose files change all the
 * time delays the collection of its own garbage, never another user's
 * (unless their files are connected, e.g. one's socket is queued on the
 * other's).
 *
 * When it runs: when a bus1 fd is closed or a unix socket is sent, while any
 * queue holds a unix socket, and then again (with growing delays, 250 ms to
 * 8 s) as long as some bus1 file is found queued on such a socket, since
 * closing the last outside fd of a socket tells bus1 nothing. While no
 * queue holds a unix socket, nothing runs. A pass that took T is followed by
 * the next no sooner than 3T later, however often it is kicked: a user who
 * builds a large graph and closes fds in a loop gets at most a quarter of a
 * CPU of collector work, and the peers that do pass unix sockets are
 * excluded at most a quarter of the time.
 */

#include <linux/types.h>

struct bus1_peer;
struct file;

void bus1_gc_lock_shared(void);
bool bus1_gc_trylock_shared(void);
void bus1_gc_assert_excluded(void);
void bus1_gc_unlock_shared(void);
int bus1_gc_check_file(struct file *f);
void bus1_gc_track(size_t n_unix);
void bus1_gc_untrack(size_t n_unix);
void bus1_gc_kick(void);
void bus1_gc_add_peer(struct bus1_peer *peer);
void bus1_gc_remove_peer(struct bus1_peer *peer);
void bus1_gc_exit(void);

#endif /* __BUS1_GC_H */
