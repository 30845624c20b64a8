/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * What a hostile unprivileged local user must not be able to do to the kernel through bus1, and
 * the uAPI rules that come with the fixes. Attackers and innocent parties run as uids 1000/1001
 * in forked children (the harness runs us as root; root only prepares what a user could not,
 * e.g. a userfaultfd that catches kernel-mode faults, cgroups, module parameters).
 *
 *   cycle_leak, cycle_pair, cycle_listen: a peer whose own fd sits in a unix socket that sits
 *	in a message queued on that peer (directly, through two peers, through a listening
 *	socket's unaccepted connection) is garbage once its user exits: the module's refcount
 *	and the pool's shmem must come back within 30 s.
 *   cycle_alive: the same constructions, still reachable from a live process, lose nothing.
 *   unix_socket_pass: a unix socket passed through bus1 still works (portals).
 *   recv_stall, send_stall: a RECV or SEND stalled in a user copy (userfaultfd) holds up no
 *	other user's SEND, RECV, NODES_DESTROY or multicast.
 *   memcg_nodes, quota_objects: nodes and handles are limited per user (quota_objects) and
 *	charged to the creator's memory cgroup.
 *   memcg_destroy, memcg_release: destroying nodes held by many handles, or dropping the last
 *	remote handles of many nodes, with the cgroup at its limit, takes memory.peak at most
 *	MD_SLACK beyond memory.max (the notifications are paid for with the handles).
 *   multicast_hol: a large multicast does not hold up a small message to one of its
 *	destinations for its whole duration.
 *   node_release, node_release_dropped: BUS1_MSG_NODE_RELEASE tells an owner that nobody else
 *	holds its node any more.
 *   destroyed_in_flight, pool_size_param: handle translation of destroyed nodes; pool_size
 *	accepts no value above 256 MiB.
 *   flush_race: a reset of a peer racing node creation by another thread of it frees no node
 *	without destroying it (no kernel WARNING in 10 s), and every holder is told NODE_DESTROY.
 *   slice_bound: received slices a peer keeps are bounded by max_slices (ENOSPC), a foreign
 *	sender gets half of that count (EDQUOT).
 *   notify_bound: unread NODE_RELEASEs are coalesced per node, unread NODE_DESTROYs count
 *	against quota_objects (300,000 and 600,000 attempts; slab measured).
 *   gc_stall: a user who builds a large graph for the collector and makes it run every 20 ms
 *	does not make another user's SEND+RECV sleep in the kernel (the peers that pass no unix
 *	sockets never wait for a pass), and the graph is collected once its builder exits.
 *   gc_starve: a user whose own graph changes all the time (close(dup()) in two threads) does
 *	not delay the collection of another user's cycle: it is freed within 1 s (times the
 *	run's time factor, or 4x its collection without the attack on a machine slower now than
 *	that factor says) of its owner's exit.
 *   gc_unix_latency: under the same attack, a third user's round trips with a unix socket in
 *	every message stay within 2x of alone (p99; at least a 4 ms tick, times the time factor),
 *	the worst within 1 s (the control and the attack measured again once if p99 misses),
 *	and sleep in the kernel no more than alone (3 more allowed): its
 *	SEND and RECV never wait for a pass over another user's graph.
 *
 * Every figure a case measures is printed as one "hostile: <case>: ..." line.
 *
 * One program, its cases in this file's table; each theme in a file of its own (hostile.h):
 * hostile-gc.c (cycle_*, unix_socket_pass, gc_*), hostile-stall.c (recv_stall, send_stall,
 * multicast_hol), hostile-limits.c (memcg_*, quota_objects, slice_bound, notify_bound),
 * hostile-nodes.c (node_release*, destroyed_in_flight, pool_size_param, flush_race), and the
 * helpers they share in hostile-common.c.
 *
 * The peers are used through raw ioctls (not libbus1) so that the cases that need no new uAPI
 * also run against a module whose PEER_QUERY predates quota_objects/used_objects (older size,
 * so a different ioctl number): query() falls back to that layout for the pool size.
 */

#include "hostile.h"

static const struct kt_case cases[] = {
	KT_CASE_T(cycle_leak, 60),
	KT_CASE_T(cycle_pair, 60),
	KT_CASE_T(cycle_listen, 60),
	KT_CASE_T(cycle_alive, 60),
	KT_CASE_T(unix_socket_pass, 30),
	KT_CASE_T(recv_stall, 60),
	KT_CASE_T(send_stall, 60),
	KT_CASE_T(memcg_nodes, 200),
	KT_CASE_T(memcg_destroy, 150),
	KT_CASE_T(memcg_release, 150),
	KT_CASE_T(quota_objects, 60),
	KT_CASE_T(multicast_hol, 120),
	KT_CASE_T(node_release, 30),
	KT_CASE_T(node_release_dropped, 30),
	KT_CASE_T(destroyed_in_flight, 30),
	KT_CASE_T(pool_size_param, 30),
	KT_CASE_T(flush_race, 90),
	KT_CASE_T(slice_bound, 120),
	KT_CASE_T(gc_stall, 200),
	KT_CASE_T(notify_bound, 180),
	KT_CASE_T(gc_starve, 200),
	KT_CASE_T(gc_unix_latency, 320),
};

int main(int argc, char **argv)
{
	return kt_main(cases, sizeof(cases) / sizeof(cases[0]), argc, argv);
}
