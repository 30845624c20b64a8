/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * libbus1 - a small userspace wrapper of the bus1 uAPI (<linux/bus1.h>,
 * docs/bus1.7).
 *
 * A struct b1_peer owns one /dev/bus1 file descriptor and the read-only
 * mapping of its pool. Every function returns 0 on success or a negative
 * errno; none of them prints anything. The raw fd is available for poll(2)
 * and for calling ioctl(2) directly. The library's names start with b1_; the
 * bus1_ and BUS1_ names are the kernel's (the uAPI, and the module itself).
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>
#include <linux/bus1.h>

#ifdef __cplusplus
extern "C" {
#endif

struct b1_peer;

/**
 * struct b1_msg - a received message, as RECV reported it
 * @type:		BUS1_MSG_DATA, BUS1_MSG_NODE_DESTROY or BUS1_MSG_NODE_RELEASE
 * @destination:	the receiver's handle the message was sent to
 * @offset:		pool offset of the slice (BUS1_OFFSET_INVALID if none)
 * @data:		the data, inside the read-only pool mapping (or NULL)
 * @n_bytes:		size of @data
 * @handles:		the carried handles, translated (inside the pool)
 * @n_handles:		number of @handles
 * @fds:		the carried fds (inside the pool; -1 if not installed)
 * @n_fds:		number of @fds
 * @uid, @gid, @pid, @tid: the sender, as stamped by the kernel
 */
struct b1_msg {
	uint64_t type;
	uint64_t destination;
	uint64_t offset;
	const void *data;
	size_t n_bytes;
	const uint64_t *handles;
	size_t n_handles;
	const int *fds;
	size_t n_fds;
	uint32_t uid;
	uint32_t gid;
	uint32_t pid;
	uint32_t tid;
};

/* Open /dev/bus1 (or @path if not NULL) and map its pool. */
int b1_peer_new(struct b1_peer **peerp);
int b1_peer_new_from_path(const char *path, struct b1_peer **peerp);
/* Take over an already open /dev/bus1 fd (closed by b1_peer_free()). */
int b1_peer_new_from_fd(int fd, struct b1_peer **peerp);
/* Unmap the pool, close the fd (which disconnects the peer); returns NULL. */
struct b1_peer *b1_peer_free(struct b1_peer *peer);

int b1_peer_get_fd(struct b1_peer *peer);
const void *b1_peer_get_pool(struct b1_peer *peer, size_t *sizep);

int b1_peer_query(struct b1_peer *peer, struct bus1_cmd_peer_query *query);
int b1_peer_reset(struct b1_peer *peer);
int b1_peer_disconnect(struct b1_peer *peer);

/*
 * Give @dst a handle to the node of @src's handle *@src_handlep (pass
 * BUS1_HANDLE_CREATE to create a node; its handle is written back). The
 * destination's handle id is stored in *@dst_handlep if not NULL.
 */
int b1_peer_handle_transfer(struct b1_peer *src, struct b1_peer *dst,
			    uint64_t *src_handlep, uint64_t *dst_handlep);
/* As above, with the destination given as a raw /dev/bus1 fd. */
int b1_peer_handle_transfer_fd(struct b1_peer *src, int dst_fd,
			       uint64_t *src_handlep, uint64_t *dst_handlep);
int b1_peer_handle_release(struct b1_peer *peer, uint64_t handle);
/* HANDLE_QUERY with BUS1_HANDLE_QUERY_FLAG_RECLAIM: our unread messages there are taken back. */
int b1_peer_handle_reclaim(struct b1_peer *peer, uint64_t handle);
/* HANDLE_QUERY: what is queued, unread, for the node of @handle. */
int b1_peer_handle_query(struct b1_peer *peer, uint64_t handle,
			 struct bus1_cmd_handle_query *query);
int b1_peer_nodes_destroy(struct b1_peer *peer, const uint64_t *nodes, size_t n_nodes);
int b1_peer_slice_release(struct b1_peer *peer, uint64_t offset);

/*
 * Send a message. @errors may be NULL, otherwise it has @n_destinations
 * entries (0 or a positive errno each, see BUS1_CMD_SEND). @handles is
 * written to (BUS1_HANDLE_CREATE entries are replaced). Returns 0 or the
 * negative errno of the ioctl.
 */
int b1_peer_send(struct b1_peer *peer, uint64_t flags,
		 const uint64_t *destinations, size_t n_destinations, uint32_t *errors,
		 const struct iovec *vecs, size_t n_vecs,
		 uint64_t *handles, size_t n_handles,
		 const int *fds, size_t n_fds);

/*
 * Receive the next message (flags: BUS1_RECV_FLAG_*). Returns -EAGAIN if
 * none is ready. Without PEEK the caller owns the slice: release it with
 * b1_peer_msg_release() (or b1_peer_slice_release(msg->offset)), and the
 * installed fds, which b1_peer_msg_release() does not close.
 */
int b1_peer_recv(struct b1_peer *peer, uint64_t flags, struct b1_msg *msg);
/*
 * CALL (docs/bus1.7): send as b1_peer_send() does, then wait up to
 * @timeout_ns (0: not at all; at most BUS1_CALL_TIMEOUT_MAX) for the next
 * message of the caller's queue and receive it as b1_peer_recv() does with
 * @recv_flags: the front of the queue, which is not necessarily the reply.
 * Returns 0 (sent and received: *@msg set), or a negative errno; *@sentp
 * (if not NULL) says whether the message was sent, also on failure (e.g.
 * -ETIMEDOUT, -EINTR, -EMFILE after the send). A module without CALL fails
 * with -ENOTTY and *@sentp false: send, poll and receive instead.
 */
int b1_peer_call(struct b1_peer *peer, uint64_t send_flags,
		 const uint64_t *destinations, size_t n_destinations, uint32_t *errors,
		 const struct iovec *vecs, size_t n_vecs,
		 uint64_t *handles, size_t n_handles,
		 const int *fds, size_t n_fds,
		 uint64_t recv_flags, uint64_t timeout_ns, struct b1_msg *msg, bool *sentp);
/* Release the slice of a dequeued message (no-op if it has none). */
int b1_peer_msg_release(struct b1_peer *peer, struct b1_msg *msg);
/*
 * The same, in the next b1_peer_recv() or b1_peer_call(): its ioctl releases
 * the slice first (BUS1_RECV_FLAG_RELEASE), saving a SLICE_RELEASE per
 * message. The data must not be read after that call. Only one slice waits:
 * one already waiting is released now. A message of more than 64 KiB is
 * released now too (a large slice held would push the next message onto
 * fresh pages). Returns 0 or a negative errno.
 */
int b1_peer_msg_release_later(struct b1_peer *peer, struct b1_msg *msg);
/*
 * Whether the last message b1_peer_recv() or b1_peer_call() received had
 * another one queued behind it (BUS1_RECV_FLAG_MORE; false on a module
 * without it, and after a failed receive). If not, poll before receiving
 * again rather than try a receive that would say -EAGAIN.
 */
bool b1_peer_more_queued(const struct b1_peer *peer);
/* Close the fds of @msg that were installed (not -1). */
void b1_msg_close_fds(const struct b1_msg *msg);

#ifdef __cplusplus
}
#endif
