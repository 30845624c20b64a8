/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * libbus1: thin wrappers of the bus1 ioctls plus the pool mapping.
 */

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>
#include "libbus1.h"

/*
 * The kernel takes a structure's size from the ioctl number (a mismatch is ENOTTY), so a layout
 * change must change the number too. Check both at compile time: every ioctl number encodes the
 * size of the structure we pass, and each structure still has the size the uAPI was released
 * with (a field added without updating the number, or padding that crept in, stops the build).
 */
#define B1_CHECK_CMD(_cmd, _type, _size)						\
	_Static_assert(_IOC_SIZE(_cmd) == sizeof(_type),				\
		       #_cmd " does not encode sizeof(" #_type ")");			\
	_Static_assert(sizeof(_type) == (_size), "sizeof(" #_type ") != " #_size)

B1_CHECK_CMD(BUS1_CMD_PEER_DISCONNECT, __u64, 8);
B1_CHECK_CMD(BUS1_CMD_PEER_QUERY, struct bus1_cmd_peer_query, 128);
B1_CHECK_CMD(BUS1_CMD_PEER_RESET, struct bus1_cmd_peer_reset, 8);
B1_CHECK_CMD(BUS1_CMD_HANDLE_TRANSFER, struct bus1_cmd_handle_transfer, 32);
B1_CHECK_CMD(BUS1_CMD_HANDLE_RELEASE, struct bus1_cmd_handle_release, 16);
B1_CHECK_CMD(BUS1_CMD_NODES_DESTROY, struct bus1_cmd_nodes_destroy, 24);
B1_CHECK_CMD(BUS1_CMD_SLICE_RELEASE, struct bus1_cmd_slice_release, 16);
B1_CHECK_CMD(BUS1_CMD_HANDLE_QUERY, struct bus1_cmd_handle_query, 48);
B1_CHECK_CMD(BUS1_CMD_SEND, struct bus1_cmd_send, 80);
B1_CHECK_CMD(BUS1_CMD_RECV, struct bus1_cmd_recv, 72);

/*
 * @release: the slice b1_peer_msg_release_later() handed to the next RECV
 * or CALL (BUS1_OFFSET_INVALID: none). @release_flag: whether the module
 * takes BUS1_RECV_FLAG_RELEASE (RELEASE_FLAG_UNKNOWN until it said so).
 * @more: the last receive's BUS1_RECV_FLAG_MORE.
 */
enum { RELEASE_FLAG_UNKNOWN, RELEASE_FLAG_YES, RELEASE_FLAG_NO };

struct b1_peer {
	int fd;
	const void *pool;
	size_t pool_size;
	uint64_t release;
	int release_flag;
	bool more;
};

static int b1_ioctl(int fd, unsigned long cmd, void *arg)
{
	int r;

	do {
		r = ioctl(fd, cmd, arg);
	} while (r < 0 && errno == EINTR);
	return r < 0 ? -errno : 0;
}

int b1_peer_new_from_fd(int fd, struct b1_peer **peerp)
{
	struct bus1_cmd_peer_query query = { 0 };
	struct b1_peer *peer;
	void *p;
	int r;

	r = b1_ioctl(fd, BUS1_CMD_PEER_QUERY, &query);
	if (r < 0)
		return r;

	peer = calloc(1, sizeof(*peer));
	if (!peer)
		return -ENOMEM;

	p = mmap(NULL, query.pool_size, PROT_READ, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED) {
		r = -errno;
		free(peer);
		return r;
	}

	peer->fd = fd;
	peer->pool = p;
	peer->pool_size = query.pool_size;
	peer->release = BUS1_OFFSET_INVALID;
	*peerp = peer;
	return 0;
}

int b1_peer_new_from_path(const char *path, struct b1_peer **peerp)
{
	int fd, r;

	fd = open(path ? path : "/dev/bus1", O_RDWR | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
	if (fd < 0)
		return -errno;

	r = b1_peer_new_from_fd(fd, peerp);
	if (r < 0)
		close(fd);
	return r;
}

int b1_peer_new(struct b1_peer **peerp)
{
	return b1_peer_new_from_path(NULL, peerp);
}

struct b1_peer *b1_peer_free(struct b1_peer *peer)
{
	if (!peer)
		return NULL;
	if (peer->pool)
		munmap((void *)peer->pool, peer->pool_size);
	if (peer->fd >= 0)
		close(peer->fd);
	free(peer);
	return NULL;
}

int b1_peer_get_fd(struct b1_peer *peer)
{
	return peer->fd;
}

const void *b1_peer_get_pool(struct b1_peer *peer, size_t *sizep)
{
	if (sizep)
		*sizep = peer->pool_size;
	return peer->pool;
}

int b1_peer_query(struct b1_peer *peer, struct bus1_cmd_peer_query *query)
{
	memset(query, 0, sizeof(*query));
	return b1_ioctl(peer->fd, BUS1_CMD_PEER_QUERY, query);
}

int b1_peer_reset(struct b1_peer *peer)
{
	struct bus1_cmd_peer_reset cmd = { 0 };

	/* the reset frees every published slice, the pending one too */
	peer->release = BUS1_OFFSET_INVALID;
	return b1_ioctl(peer->fd, BUS1_CMD_PEER_RESET, &cmd);
}

int b1_peer_disconnect(struct b1_peer *peer)
{
	__u64 flags = 0;

	return b1_ioctl(peer->fd, BUS1_CMD_PEER_DISCONNECT, &flags);
}

int b1_peer_handle_transfer_fd(struct b1_peer *src, int dst_fd,
			       uint64_t *src_handlep, uint64_t *dst_handlep)
{
	struct bus1_cmd_handle_transfer cmd = {
		.src_handle = *src_handlep,
		.dst_fd = (__u32)dst_fd,
		.dst_handle = BUS1_HANDLE_INVALID,
	};
	int r;

	r = b1_ioctl(src->fd, BUS1_CMD_HANDLE_TRANSFER, &cmd);
	if (r < 0)
		return r;

	*src_handlep = cmd.src_handle;
	if (dst_handlep)
		*dst_handlep = cmd.dst_handle;
	return 0;
}

int b1_peer_handle_transfer(struct b1_peer *src, struct b1_peer *dst,
			    uint64_t *src_handlep, uint64_t *dst_handlep)
{
	return b1_peer_handle_transfer_fd(src, dst->fd, src_handlep, dst_handlep);
}

int b1_peer_handle_release(struct b1_peer *peer, uint64_t handle)
{
	struct bus1_cmd_handle_release cmd = { .handle = handle };

	return b1_ioctl(peer->fd, BUS1_CMD_HANDLE_RELEASE, &cmd);
}

int b1_peer_handle_reclaim(struct b1_peer *peer, uint64_t handle)
{
	struct bus1_cmd_handle_query cmd = {
		.flags = BUS1_HANDLE_QUERY_FLAG_RECLAIM,
		.handle = handle,
	};

	return b1_ioctl(peer->fd, BUS1_CMD_HANDLE_QUERY, &cmd);
}

int b1_peer_handle_query(struct b1_peer *peer, uint64_t handle,
			 struct bus1_cmd_handle_query *query)
{
	memset(query, 0, sizeof(*query));
	query->handle = handle;
	return b1_ioctl(peer->fd, BUS1_CMD_HANDLE_QUERY, query);
}

int b1_peer_nodes_destroy(struct b1_peer *peer, const uint64_t *nodes, size_t n_nodes)
{
	struct bus1_cmd_nodes_destroy cmd = {
		.ptr_nodes = (__u64)(uintptr_t)nodes,
		.n_nodes = n_nodes,
	};

	return b1_ioctl(peer->fd, BUS1_CMD_NODES_DESTROY, &cmd);
}

int b1_peer_slice_release(struct b1_peer *peer, uint64_t offset)
{
	struct bus1_cmd_slice_release cmd = { .offset = offset };

	return b1_ioctl(peer->fd, BUS1_CMD_SLICE_RELEASE, &cmd);
}

/* SEND's arguments as the kernel takes them (SEND and CALL). */
static struct bus1_cmd_send send_cmd(uint64_t flags,
				     const uint64_t *destinations, size_t n_destinations,
				     uint32_t *errors, const struct iovec *vecs, size_t n_vecs,
				     uint64_t *handles, size_t n_handles,
				     const int *fds, size_t n_fds)
{
	return (struct bus1_cmd_send){
		.flags = flags,
		.ptr_destinations = (__u64)(uintptr_t)destinations,
		.n_destinations = n_destinations,
		.ptr_errors = (__u64)(uintptr_t)errors,
		.ptr_vecs = (__u64)(uintptr_t)vecs,
		.n_vecs = n_vecs,
		.ptr_handles = (__u64)(uintptr_t)handles,
		.n_handles = n_handles,
		.ptr_fds = (__u64)(uintptr_t)fds,
		.n_fds = n_fds,
	};
}

int b1_peer_send(struct b1_peer *peer, uint64_t flags,
		 const uint64_t *destinations, size_t n_destinations, uint32_t *errors,
		 const struct iovec *vecs, size_t n_vecs,
		 uint64_t *handles, size_t n_handles,
		 const int *fds, size_t n_fds)
{
	struct bus1_cmd_send cmd = send_cmd(flags, destinations, n_destinations, errors, vecs,
					    n_vecs, handles, n_handles, fds, n_fds);

	return b1_ioctl(peer->fd, BUS1_CMD_SEND, &cmd);
}

static void recv_to_msg(struct b1_peer *peer, const struct bus1_cmd_recv *cmd,
			struct b1_msg *msg);

/*
 * Put the pending release into @cmd's RECV flags, if the module takes them;
 * a module not known to do so gets a SLICE_RELEASE of its own first.
 */
static int release_prepare(struct b1_peer *peer, struct bus1_cmd_recv *cmd)
{
	uint64_t offset = peer->release;

	if (offset == BUS1_OFFSET_INVALID)
		return 0;
	if (peer->release_flag == RELEASE_FLAG_NO) {
		peer->release = BUS1_OFFSET_INVALID;
		return b1_peer_slice_release(peer, offset);
	}
	cmd->flags |= BUS1_RECV_FLAG_RELEASE;
	cmd->offset = offset;
	return 0;
}

/*
 * After a RECV or CALL with @cmd: whether to try once more, because it
 * failed with EINVAL only since the module does not know
 * BUS1_RECV_FLAG_RELEASE (then it is not used again). Otherwise the slice is
 * released, or its release failed with the errno the ioctl returned.
 */
static bool release_retry(struct b1_peer *peer, const struct bus1_cmd_recv *cmd, int r)
{
	if (!(cmd->flags & BUS1_RECV_FLAG_RELEASE))
		return false;
	if (r == -EINVAL && peer->release_flag == RELEASE_FLAG_UNKNOWN) {
		peer->release_flag = RELEASE_FLAG_NO;
		return true;
	}
	if (r != -EINVAL)
		peer->release_flag = RELEASE_FLAG_YES;
	peer->release = BUS1_OFFSET_INVALID;
	return false;
}

int b1_peer_recv(struct b1_peer *peer, uint64_t flags, struct b1_msg *msg)
{
	struct bus1_cmd_recv cmd;
	int r;

	/*
	 * Not b1_ioctl(): an EINTR (waiting for another thread's RECV) comes
	 * after the release, so the retry must not name the slice again, which
	 * may hold a new message by then. release_retry() forgets it.
	 */
	do {
		cmd = (struct bus1_cmd_recv){ .flags = flags };
		r = release_prepare(peer, &cmd);
		if (r < 0)
			return r;
		r = ioctl(peer->fd, BUS1_CMD_RECV, &cmd) < 0 ? -errno : 0;
	} while (release_retry(peer, &cmd, r) || r == -EINTR);
	peer->more = r == 0 && (cmd.flags & BUS1_RECV_FLAG_MORE);
	if (r < 0)
		return r;
	recv_to_msg(peer, &cmd, msg);
	return 0;
}

int b1_peer_call(struct b1_peer *peer, uint64_t send_flags,
		 const uint64_t *destinations, size_t n_destinations, uint32_t *errors,
		 const struct iovec *vecs, size_t n_vecs,
		 uint64_t *handles, size_t n_handles,
		 const int *fds, size_t n_fds,
		 uint64_t recv_flags, uint64_t timeout_ns, struct b1_msg *msg, bool *sentp)
{
	struct bus1_cmd_call cmd;
	int r;

	/*
	 * Not b1_ioctl(): once sent, an EINTR must not call again (that would
	 * send a second copy); before that it may. Nothing is sent either when
	 * the module refuses BUS1_RECV_FLAG_RELEASE.
	 */
	do {
		cmd = (struct bus1_cmd_call){
			.send = send_cmd(send_flags, destinations, n_destinations, errors,
					 vecs, n_vecs, handles, n_handles, fds, n_fds),
			.recv = { .flags = recv_flags },
			.timeout_ns = timeout_ns,
		};
		r = release_prepare(peer, &cmd.recv);
		if (r < 0)
			return r;
		r = ioctl(peer->fd, BUS1_CMD_CALL, &cmd) < 0 ? -errno : 0;
		/* no CALL here: the release stays for the RECV that follows */
		if (r == -ENOTTY)
			break;
	} while (release_retry(peer, &cmd.recv, r) ||
		 (r == -EINTR && !(cmd.status & BUS1_CALL_STATUS_SENT)));
	peer->more = r == 0 && (cmd.recv.flags & BUS1_RECV_FLAG_MORE);
	if (sentp)
		*sentp = cmd.status & BUS1_CALL_STATUS_SENT;
	if (r < 0)
		return r;
	recv_to_msg(peer, &cmd.recv, msg);
	return 0;
}

static void recv_to_msg(struct b1_peer *peer, const struct bus1_cmd_recv *cmd,
			struct b1_msg *msg)
{
	const uint8_t *base;

	memset(msg, 0, sizeof(*msg));
	msg->type = cmd->type;
	msg->destination = cmd->destination;
	msg->offset = cmd->offset;
	msg->n_bytes = cmd->n_bytes;
	msg->n_handles = cmd->n_handles;
	msg->n_fds = cmd->n_fds;
	msg->uid = cmd->uid;
	msg->gid = cmd->gid;
	msg->pid = cmd->pid;
	msg->tid = cmd->tid;

	if (cmd->offset != BUS1_OFFSET_INVALID && cmd->offset < peer->pool_size) {
		uint64_t room = peer->pool_size - cmd->offset;

		/*
		 * The kernel places the whole slice (data, handles, fds) inside
		 * the pool; one that reached past it would have us read whatever
		 * is mapped behind the pool as a message.
		 */
		assert(cmd->n_bytes <= room && cmd->n_handles <= room / 8 &&
		       cmd->n_fds <= room / 4);
		assert(((cmd->n_bytes + 7) & ~(uint64_t)7) + cmd->n_handles * 8 + cmd->n_fds * 4 <=
		       room);
		base = (const uint8_t *)peer->pool + cmd->offset;
		msg->data = base;
		msg->handles = (const uint64_t *)(base + ((cmd->n_bytes + 7) & ~(uint64_t)7));
		msg->fds = (const int *)(msg->handles + cmd->n_handles);
	}
}

int b1_peer_msg_release(struct b1_peer *peer, struct b1_msg *msg)
{
	int r;

	if (msg->offset == BUS1_OFFSET_INVALID)
		return 0;
	r = b1_peer_slice_release(peer, msg->offset);
	msg->offset = BUS1_OFFSET_INVALID;
	return r;
}

/*
 * Larger slices are released at once: while one is held, the next message
 * lands elsewhere in the pool, and for a large one that means pages the
 * kernel allocates and zeroes afresh (it keeps only the pool's first pages).
 */
#define RELEASE_LATER_MAX (64 * 1024)

int b1_peer_msg_release_later(struct b1_peer *peer, struct b1_msg *msg)
{
	int r = 0;

	if (msg->offset == BUS1_OFFSET_INVALID)
		return 0;
	if (msg->n_bytes > RELEASE_LATER_MAX)
		return b1_peer_msg_release(peer, msg);
	if (peer->release != BUS1_OFFSET_INVALID)
		r = b1_peer_slice_release(peer, peer->release);
	peer->release = msg->offset;
	msg->offset = BUS1_OFFSET_INVALID;
	return r;
}

void b1_msg_close_fds(const struct b1_msg *msg)
{
	size_t i;

	for (i = 0; msg->fds && i < msg->n_fds; i++)
		if (msg->fds[i] >= 0)
			close(msg->fds[i]);
}

bool b1_peer_more_queued(const struct b1_peer *peer)
{
	return peer->more;
}
