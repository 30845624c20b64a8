/* SPDX-License-Identifier: GPL-2.0 WITH Linux-syscall-note */
#ifndef _UAPI_LINUX_BUS1_H
#define _UAPI_LINUX_BUS1_H

/*
 * bus1 - capability-based IPC
 *
 * Every open file description of /dev/bus1 is a peer. A peer owns nodes
 * (rendezvous points that messages are addressed to) and holds handles
 * (per-peer 64-bit names of nodes, owned by itself or by others). Messages
 * carry data, handles and file descriptors to one or more nodes; each
 * receiving peer finds them in its own pool, a read-only shared memory area
 * it maps with mmap(2). The full description is docs/bus1.7.
 *
 * All structures have fixed sizes and only __u64/__u32 fields with explicit
 * padding. The size of each structure is encoded in its ioctl number; a
 * mismatch fails with ENOTTY. Every "flags" field rejects unknown bits with
 * EINVAL, and every padding/reserved field must be zero (EINVAL otherwise).
 *
 * The structures are spelled __attribute__((__aligned__(8))), not with the
 * kernel's __aligned(8): this header is installed for user space, where
 * that macro does not exist. checkpatch's PREFER_DEFINED_ATTRIBUTE_MACRO
 * warnings about it are expected (kmod/check-style.sh ignores exactly that
 * type in this file).
 */

#include <linux/ioctl.h>
#include <linux/types.h>

/*
 * Handle ids. Values 0 to 3 are reserved and never name a handle:
 *
 * BUS1_HANDLE_INVALID (~0): "no handle", written by RECV for a transferred
 *	handle whose node was destroyed before the message was received, if
 *	the receiver holds no handle to it (one that does reads its own id).
 * BUS1_HANDLE_CREATE (3): accepted wherever the caller passes one of its
 *	own handles into the kernel (HANDLE_TRANSFER's src_handle, SEND's
 *	handle array). A new node owned by the caller is created, together
 *	with the caller's handle to it, and the new handle id is written back
 *	in place of the 3.
 *
 * Allocated ids are (counter << 2) | flags, with a per-peer counter that only
 * grows, so an id is never reused by the same peer. Bit 1
 * (BUS1_HANDLE_FLAG_REMOTE) is set when the node is owned by another peer.
 * Bit 0 is always clear.
 */
#define BUS1_HANDLE_INVALID		((__u64)-1)
#define BUS1_HANDLE_CREATE		((__u64)3)
#define BUS1_HANDLE_FLAG_REMOTE		((__u64)2)

/* The pool offset reported for messages that have no slice. */
#define BUS1_OFFSET_INVALID		((__u64)-1)

/* Message types reported by RECV. */
enum {
	BUS1_MSG_NONE		= 0,	/* never reported */
	BUS1_MSG_DATA		= 1,	/* a message sent with SEND */
	BUS1_MSG_NODE_DESTROY	= 2,	/* the node of a held handle is gone */
	BUS1_MSG_NODE_RELEASE	= 3,	/* nobody else holds an owned node */
};

/**
 * struct bus1_cmd_peer_query - limits and usage of a peer
 * @flags:		in: must be 0
 * @pool_size:		out: size of the pool in bytes (map it read-only)
 * @max_destinations:	out: most destinations of one SEND
 * @max_vecs:		out: most iovecs of one SEND
 * @max_handles:	out: most handles carried by one message
 * @max_fds:		out: most fds carried by one message
 * @quota_bytes:	out: pool bytes a user may have in flight
 * @quota_messages:	out: messages a user may have in flight
 * @quota_handles:	out: handles a user may have in flight
 * @quota_fds:		out: fds a user may have in flight
 * @used_bytes:		out: pool bytes the caller's user has in flight now
 * @used_messages:	out: messages the caller's user has in flight now
 * @used_handles:	out: handles the caller's user has in flight now
 * @used_fds:		out: fds the caller's user has in flight now
 * @quota_objects:	out: nodes and handles the peers of one user may hold
 * @used_objects:	out: nodes and handles held now by the peers that the
 *			caller's user opened
 *
 * A "user" is a real uid. Every message a task sends is charged, once per
 * destination, to the task's real uid at SEND; "the caller's user" is the
 * real uid of the task calling PEER_QUERY. A message is "in flight" from a
 * successful SEND until the receiver takes it off its queue (RECV without
 * PEEK, a reset or a disconnect). The bytes charged are
 * ALIGN(n_bytes, 8) + 8 * n_handles + 4 * n_fds, at least 8 (10 bytes,
 * 2 handles and 1 fd: 16 + 16 + 4 = 36); the slice itself is that rounded
 * up to a multiple of 8.
 *
 * Objects are charged differently: every node and every handle counts one
 * against the user that opened the peer owning the node or holding the
 * handle, from its creation until it is freed (a node lives until its
 * last handle is gone). Creating a node therefore costs two (the node and
 * its owner's handle). A call that would go over the quota fails with
 * EDQUOT: SEND and HANDLE_TRANSFER creating a node, HANDLE_TRANSFER giving
 * the destination a new handle, and RECV giving the receiver a new handle
 * (the message then stays queued, as with EMFILE).
 */
struct bus1_cmd_peer_query {
	__u64 flags;
	__u64 pool_size;
	__u64 max_destinations;
	__u64 max_vecs;
	__u64 max_handles;
	__u64 max_fds;
	__u64 quota_bytes;
	__u64 quota_messages;
	__u64 quota_handles;
	__u64 quota_fds;
	__u64 used_bytes;
	__u64 used_messages;
	__u64 used_handles;
	__u64 used_fds;
	__u64 quota_objects;
	__u64 used_objects;
} __attribute__((__aligned__(8)));

/**
 * struct bus1_cmd_peer_reset - flush a peer
 * @flags:	in: must be 0
 *
 * Destroys every node the peer owns (holders are notified), releases every
 * handle it holds, drops every queued message (returning the senders'
 * charges) and frees every slice of its pool. The peer stays usable; new
 * handle ids continue from where they were (ids are still never reused).
 */
struct bus1_cmd_peer_reset {
	__u64 flags;
} __attribute__((__aligned__(8)));

/**
 * struct bus1_cmd_handle_transfer - give another peer a handle
 * @flags:	in: must be 0
 * @src_handle:	in/out: a handle of the calling peer, or BUS1_HANDLE_CREATE
 *		(a new node is created and its handle written back here)
 * @dst_fd:	in: a file descriptor of the destination peer (/dev/bus1)
 * @dst_pad:	must be 0
 * @dst_handle:	out: the destination peer's handle to the same node
 *
 * The destination gets the id it already has if it already holds a handle
 * to that node. @dst_fd may name the calling peer itself.
 */
struct bus1_cmd_handle_transfer {
	__u64 flags;
	__u64 src_handle;
	__u32 dst_fd;
	__u32 dst_pad;
	__u64 dst_handle;
} __attribute__((__aligned__(8)));

/**
 * struct bus1_cmd_handle_release - drop a handle
 * @flags:	in: must be 0
 * @handle:	in: the handle to release
 *
 * Releasing the owner's own handle to a live node destroys that node (as
 * NODES_DESTROY would) before releasing the handle.
 */
struct bus1_cmd_handle_release {
	__u64 flags;
	__u64 handle;
} __attribute__((__aligned__(8)));

/*
 * HANDLE_QUERY flags:
 *
 * BUS1_HANDLE_QUERY_FLAG_RECLAIM: first take back every message the caller
 *	sent to the node that its owner has not received yet (dropped, its
 *	pool slice freed and its quota charge returned); the counts reported
 *	are those after it. A sender that gives up on a receiver that stopped
 *	reading gets its quota back without waiting for the receiver to read
 *	or close.
 */
#define BUS1_HANDLE_QUERY_FLAG_RECLAIM	((__u64)1)

/**
 * struct bus1_cmd_handle_query - what is queued for a node
 * @flags:	in: 0 or BUS1_HANDLE_QUERY_FLAG_RECLAIM
 * @handle:	in: a handle of the calling peer
 * @n_messages:	out: data messages sent to the node (by anyone) that its
 *		owner has not received yet
 * @n_bytes:	out: the pool bytes charged for them
 * @n_handles:	out: the handles they carry
 * @n_fds:	out: the file descriptors they carry
 *
 * A sender uses it to bound what it leaves queued for one receiver (as a
 * socket sender sees its unsent bytes), e.g. a broker that must not let one
 * client that stopped reading use up its quota.
 */
struct bus1_cmd_handle_query {
	__u64 flags;
	__u64 handle;
	__u64 n_messages;
	__u64 n_bytes;
	__u64 n_handles;
	__u64 n_fds;
} __attribute__((__aligned__(8)));

/**
 * struct bus1_cmd_nodes_destroy - destroy nodes atomically
 * @flags:	in: must be 0
 * @ptr_nodes:	in: pointer to an array of __u64 handles of nodes the caller owns
 * @n_nodes:	in: number of entries (at most max_handles of PEER_QUERY)
 *
 * Either every listed node is destroyed or none is. All the resulting
 * BUS1_MSG_NODE_DESTROY notifications (one per holder and node, the owner
 * included) carry one common timestamp, so every peer sees them at the same
 * point relative to any other message.
 */
struct bus1_cmd_nodes_destroy {
	__u64 flags;
	__u64 ptr_nodes;
	__u64 n_nodes;
} __attribute__((__aligned__(8)));

/**
 * struct bus1_cmd_slice_release - free a slice of the pool
 * @flags:	in: must be 0
 * @offset:	in: the offset RECV reported for a message already dequeued
 */
struct bus1_cmd_slice_release {
	__u64 flags;
	__u64 offset;
} __attribute__((__aligned__(8)));

/*
 * SEND flags.
 * BUS1_SEND_FLAG_CONTINUE: deliver to every destination that can take the
 *	message even if others cannot. Without it, the message is delivered
 *	to all destinations or to none.
 */
#define BUS1_SEND_FLAG_CONTINUE		((__u64)1 << 0)

/**
 * struct bus1_cmd_send - send a message
 * @flags:		in: BUS1_SEND_FLAG_*
 * @ptr_destinations:	in: pointer to __u64 handles of the destination nodes
 * @n_destinations:	in: number of destinations (1 to max_destinations)
 * @ptr_errors:		in: 0, or pointer to n_destinations __u32: out: for
 *			each destination 0 or a positive errno (see below)
 * @ptr_vecs:		in: pointer to an array of struct iovec (the data)
 * @n_vecs:		in: number of iovecs (at most max_vecs)
 * @ptr_handles:	in: pointer to __u64 handles of the caller to carry;
 *			BUS1_HANDLE_CREATE entries are replaced by new handles
 * @n_handles:		in: number of handles (at most max_handles)
 * @ptr_fds:		in: pointer to __u32 file descriptors to carry
 * @n_fds:		in: number of fds (at most max_fds)
 *
 * Per-destination errors (reported through @ptr_errors):
 *	ENXIO		the caller holds no such handle
 *	EHOSTUNREACH	the node is destroyed or its owner disconnected
 *	EDQUOT		the caller's user is over one of its quotas
 *	ENOSPC		the receiver's pool has no room for the message
 *	ECANCELED	fine, but not delivered because another destination
 *			failed and BUS1_SEND_FLAG_CONTINUE was not given
 *
 * The ioctl succeeds (returns 0) if and only if the message was delivered to
 * every destination whose error is 0 (with CONTINUE that may be none of
 * them). It fails with the first failing destination's errno if a
 * destination failed without CONTINUE (nothing delivered), and with a
 * message-level errno (EINVAL, EFAULT, EBADF, EMSGSIZE, ENXIO for a bad
 * carried handle, EDQUOT for a CREATE over the object quota, EOPNOTSUPP for
 * a carried bus1 or io_uring fd, ENOMEM, ...) before any
 * destination is looked at; @ptr_errors is then left untouched.
 */
struct bus1_cmd_send {
	__u64 flags;
	__u64 ptr_destinations;
	__u64 n_destinations;
	__u64 ptr_errors;
	__u64 ptr_vecs;
	__u64 n_vecs;
	__u64 ptr_handles;
	__u64 n_handles;
	__u64 ptr_fds;
	__u64 n_fds;
} __attribute__((__aligned__(8)));

/*
 * RECV flags.
 * BUS1_RECV_FLAG_PEEK: report the front message without dequeuing it.
 * BUS1_RECV_FLAG_NO_FDS: do not install the message's fds; their slots in
 *	the pool read -1. Without PEEK the files are dropped with the message.
 * BUS1_RECV_FLAG_RELEASE: first release the slice at @offset (in), as
 *	SLICE_RELEASE does: the previous message's, so that a receive loop
 *	spends one ioctl per message. If that fails, RECV fails with
 *	SLICE_RELEASE's errno and receives nothing; once it succeeded, the
 *	slice is gone whatever RECV then returns (EAGAIN included).
 * BUS1_RECV_FLAG_MORE: out only, ignored on input: when the message was
 *	received, another one was queued behind it. Without it, a receiver
 *	may wait (poll) instead of trying a RECV that would say EAGAIN. A
 *	hint: messages queued after the RECV make the fd readable as ever.
 */
#define BUS1_RECV_FLAG_PEEK		((__u64)1 << 0)
#define BUS1_RECV_FLAG_NO_FDS		((__u64)1 << 1)
#define BUS1_RECV_FLAG_RELEASE		((__u64)1 << 2)
#define BUS1_RECV_FLAG_MORE		((__u64)1 << 3)

/**
 * struct bus1_cmd_recv - receive the next message
 * @flags:		in: BUS1_RECV_FLAG_*; out: the same, with
 *			BUS1_RECV_FLAG_MORE set or cleared
 * @type:		out: BUS1_MSG_*
 * @destination:	out: the receiver's handle id of the node the message
 *			was sent to (DATA: a node the receiver owns;
 *			NODE_DESTROY: the handle whose node is gone;
 *			NODE_RELEASE: the owner's handle of the node)
 * @offset:		in: with BUS1_RECV_FLAG_RELEASE, the slice to release;
 *			out: pool offset of the message's slice, or
 *			BUS1_OFFSET_INVALID if it has none (notifications)
 * @n_bytes:		out: size of the data at @offset
 * @n_handles:		out: number of __u64 handle ids, at
 *			@offset + ALIGN(@n_bytes, 8)
 * @n_fds:		out: number of __u32 fds, right after the handles
 * @uid:		out: sender's real uid in the receiver's user namespace
 * @gid:		out: sender's real gid in the receiver's user namespace
 * @pid:		out: sender's process id in the receiver's pid namespace
 *			(0 if not visible there)
 * @tid:		out: sender's thread id, likewise
 *
 * Fails with EAGAIN when no message is ready. Handles are translated into
 * the receiver's ids (BUS1_HANDLE_INVALID for a destroyed node the receiver
 * holds no handle to) and fds installed (close-on-exec) when the message is
 * received, including with PEEK (a second PEEK or RECV installs a second
 * set). If fds cannot be installed (EMFILE) or a new handle would exceed the
 * receiver's object quota (EDQUOT), the message stays queued. NODE_DESTROY
 * and NODE_RELEASE messages carry uid = gid = (__u32)-1 and pid = tid = 0.
 * A dequeued DATA message's slice belongs to the receiver until
 * SLICE_RELEASE (also with zero bytes). One RECV runs at a time per peer; a
 * second one waits (EINTR if a signal arrives meanwhile).
 */
struct bus1_cmd_recv {
	__u64 flags;
	__u64 type;
	__u64 destination;
	__u64 offset;
	__u64 n_bytes;
	__u64 n_handles;
	__u64 n_fds;
	__u32 uid;
	__u32 gid;
	__u32 pid;
	__u32 tid;
} __attribute__((__aligned__(8)));

/*
 * CALL status bits (struct bus1_cmd_call's @status, out only).
 * BUS1_CALL_STATUS_SENT: the SEND part succeeded (it returned 0): the
 *	message was sent, exactly once. Set as soon as it is true, so it is
 *	also reported when the wait or the RECV part fails afterwards.
 *
 * BUS1_CALL_TIMEOUT_MAX: the longest wait of one CALL (one day, in ns).
 */
#define BUS1_CALL_STATUS_SENT		((__u64)1 << 0)
#define BUS1_CALL_TIMEOUT_MAX		((__u64)86400 * 1000000000)

/**
 * struct bus1_cmd_call - send a message, then receive the next one
 * @send:	in/out: exactly as for SEND
 * @recv:	in/out: exactly as for RECV (@recv.flags: BUS1_RECV_FLAG_*)
 * @flags:	in: must be 0
 * @timeout_ns:	in: the longest time to wait for a message after the send,
 *		in ns (rounded up to the kernel's tick), at most
 *		BUS1_CALL_TIMEOUT_MAX; 0: do not wait (receive only what is
 *		already there)
 * @status:	out: BUS1_CALL_STATUS_* (its value on input is ignored)
 *
 * A SEND followed by a RECV in one ioctl, for a caller that waits for a
 * reply: the SEND of @send, then an interruptible wait, holding no lock,
 * until the caller's queue has a message RECV can take (or the peer is
 * disconnected), then the RECV of @recv. RECV takes the *front* of the
 * queue, whatever it is: the reply, or anything queued before it. The
 * caller checks @recv.type and @recv.destination; if it is not the reply,
 * it handles the message and waits for the reply with poll(2) and RECV.
 * The order of the queue and every quota are those of a SEND followed by a
 * RECV: nothing is received out of order, nothing is charged twice.
 *
 * Before anything is sent, the command is checked (EINVAL for @flags,
 * @recv.flags or @timeout_ns, EFAULT if it cannot be read: then @status is
 * left as it was), @status is set to 0 (EFAULT if it cannot be written),
 * and with BUS1_RECV_FLAG_RELEASE in @recv.flags the slice at
 * @recv.offset is released (if that fails, so does CALL, with nothing
 * sent). Then the SEND runs with all its checks: if it fails, CALL
 * fails with SEND's errno, nothing was sent, nothing waited for and
 * @status is 0. Once it succeeded, @status has BUS1_CALL_STATUS_SENT and
 * CALL returns:
 *	0		a message was received into @recv (as RECV does)
 *	ETIMEDOUT	none arrived within @timeout_ns
 *	EINTR		a signal arrived (never restarted: that would send
 *			the message twice)
 *	any RECV errno	e.g. EMFILE, EDQUOT, ENOMEM (the message stays
 *			queued), ESHUTDOWN (the caller was disconnected)
 * A disconnected destination is reported as RECV reports it: a
 * BUS1_MSG_NODE_DESTROY for the caller's handle to its node (the caller
 * holds one: it sent to it). The timeout bounds the wait for a message, not
 * the wait for another thread's RECV on the same peer (one RECV at a time).
 * close() of the peer's last fd by another thread does not end a CALL (the
 * CALL holds the file): it waits on for its timeout or a signal;
 * PEER_DISCONNECT ends it with ESHUTDOWN.
 */
struct bus1_cmd_call {
	struct bus1_cmd_send send;
	struct bus1_cmd_recv recv;
	__u64 flags;
	__u64 timeout_ns;
	__u64 status;
} __attribute__((__aligned__(8)));

/*
 * PEER_DISCONNECT takes a __u64 flags argument that must be 0. It does what
 * close() would (nodes destroyed, handles released, queue and pool freed);
 * afterwards every ioctl on the fd fails with ESHUTDOWN and poll reports
 * EPOLLHUP.
 */
#define BUS1_IOCTL_MAGIC		0x96

#define BUS1_CMD_PEER_DISCONNECT	_IOW(BUS1_IOCTL_MAGIC, 0x00, __u64)
#define BUS1_CMD_PEER_QUERY		_IOWR(BUS1_IOCTL_MAGIC, 0x01,	\
					      struct bus1_cmd_peer_query)
#define BUS1_CMD_PEER_RESET		_IOW(BUS1_IOCTL_MAGIC, 0x02,	\
					     struct bus1_cmd_peer_reset)
#define BUS1_CMD_HANDLE_TRANSFER	_IOWR(BUS1_IOCTL_MAGIC, 0x10,	\
					      struct bus1_cmd_handle_transfer)
#define BUS1_CMD_HANDLE_RELEASE		_IOW(BUS1_IOCTL_MAGIC, 0x11,	\
					     struct bus1_cmd_handle_release)
#define BUS1_CMD_NODES_DESTROY		_IOW(BUS1_IOCTL_MAGIC, 0x12,	\
					     struct bus1_cmd_nodes_destroy)
#define BUS1_CMD_SLICE_RELEASE		_IOW(BUS1_IOCTL_MAGIC, 0x13,	\
					     struct bus1_cmd_slice_release)
#define BUS1_CMD_HANDLE_QUERY		_IOWR(BUS1_IOCTL_MAGIC, 0x14,	\
					      struct bus1_cmd_handle_query)
#define BUS1_CMD_SEND			_IOWR(BUS1_IOCTL_MAGIC, 0x20,	\
					      struct bus1_cmd_send)
#define BUS1_CMD_RECV			_IOWR(BUS1_IOCTL_MAGIC, 0x21,	\
					      struct bus1_cmd_recv)
#define BUS1_CMD_CALL			_IOWR(BUS1_IOCTL_MAGIC, 0x22,	\
					      struct bus1_cmd_call)

#endif /* _UAPI_LINUX_BUS1_H */
