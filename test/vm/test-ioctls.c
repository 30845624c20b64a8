/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Every bus1 ioctl, raw: the success path and each documented error path (unknown flags,
 * non-zero padding, bad pointers, wrong structure sizes, stale, foreign and reserved handles,
 * invalid fds, a disconnected peer).
 */

#include <fcntl.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>
#include "kmod-test.h"

#define BAD_PTR ((void *)1)
#define BAD_U64 ((__u64)1)

/* A fresh peer's handle to a new node of its own, and a second peer holding one too. */
static void two_peers(int *a, int *b, uint64_t *ha, uint64_t *hb)
{
	struct bus1_cmd_handle_transfer t = { .src_handle = BUS1_HANDLE_CREATE };

	*a = kt_open_peer();
	*b = kt_open_peer();
	t.dst_fd = *b;
	CHECK_OK(ioctl(*a, BUS1_CMD_HANDLE_TRANSFER, &t));
	*ha = t.src_handle;
	*hb = t.dst_handle;
}

static int send_raw(int fd, uint64_t dst, uint32_t *err)
{
	char buf[8] = "payload";
	struct iovec v = { .iov_base = buf, .iov_len = sizeof(buf) };
	struct bus1_cmd_send s = {
		.ptr_destinations = (uintptr_t)&dst,
		.n_destinations = 1,
		.ptr_errors = (uintptr_t)err,
		.ptr_vecs = (uintptr_t)&v,
		.n_vecs = 1,
	};

	return ioctl(fd, BUS1_CMD_SEND, &s);
}

static void test_query(void)
{
	struct bus1_cmd_peer_query q = { 0 };
	int fd = kt_open_peer();
	long page = sysconf(_SC_PAGESIZE);

	CHECK_OK(ioctl(fd, BUS1_CMD_PEER_QUERY, &q));
	CHECK(q.pool_size > 0);
	CHECK(q.pool_size <= 256ULL << 20);
	CHECK_EQ(q.pool_size % page, 0);
	CHECK(q.max_destinations > 0);
	CHECK(q.max_vecs > 0);
	CHECK(q.max_handles > 0);
	CHECK(q.max_fds > 0);
	/* The seed's defaults (the harness loads the module without parameters). */
	CHECK_EQ(q.quota_bytes, 256ULL << 20);
	CHECK_EQ(q.quota_messages, 16383);
	CHECK(q.quota_handles > 0);
	CHECK(q.quota_fds > 0);
	/* Nothing is in flight in a fresh guest. */
	CHECK_EQ(q.used_bytes, 0);
	CHECK_EQ(q.used_messages, 0);
	CHECK_EQ(q.used_handles, 0);
	CHECK_EQ(q.used_fds, 0);

	q.flags = 1;
	CHECK_ERR(ioctl(fd, BUS1_CMD_PEER_QUERY, &q), EINVAL);
	q.flags = (__u64)1 << 63;
	CHECK_ERR(ioctl(fd, BUS1_CMD_PEER_QUERY, &q), EINVAL);
	CHECK_ERR(ioctl(fd, BUS1_CMD_PEER_QUERY, BAD_PTR), EFAULT);
	CHECK_ERR(ioctl(fd, BUS1_CMD_PEER_QUERY, NULL), EFAULT);
	close(fd);
}

/* The structure size is part of each ioctl number: any other size is an unknown command. */
static void test_sizes(void)
{
	static const unsigned long cmds[] = {
		BUS1_CMD_PEER_DISCONNECT, BUS1_CMD_PEER_QUERY, BUS1_CMD_PEER_RESET,
		BUS1_CMD_HANDLE_TRANSFER, BUS1_CMD_HANDLE_RELEASE, BUS1_CMD_NODES_DESTROY,
		BUS1_CMD_SLICE_RELEASE, BUS1_CMD_SEND, BUS1_CMD_RECV,
	};
	uint64_t buf[64] = { 0 };
	int fd = kt_open_peer();
	size_t i;

	for (i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++) {
		unsigned long c = cmds[i], size = _IOC_SIZE(c);
		unsigned long bigger = (c & ~((unsigned long)_IOC_SIZEMASK << _IOC_SIZESHIFT)) |
				       ((size + 8) << _IOC_SIZESHIFT);
		unsigned long smaller = (c & ~((unsigned long)_IOC_SIZEMASK << _IOC_SIZESHIFT)) |
					((size - 8) << _IOC_SIZESHIFT);
		unsigned long nodir = c & ~((unsigned long)_IOC_DIRMASK << _IOC_DIRSHIFT);

		CHECK_ERR(ioctl(fd, bigger, buf), ENOTTY);
		if (size > 8)
			CHECK_ERR(ioctl(fd, smaller, buf), ENOTTY);
		CHECK_ERR(ioctl(fd, nodir, buf), ENOTTY);
	}
	/* Unknown numbers and foreign magics. */
	CHECK_ERR(ioctl(fd, _IOWR(BUS1_IOCTL_MAGIC, 0x7f, __u64), buf), ENOTTY);
	CHECK_ERR(ioctl(fd, _IOWR(BUS1_IOCTL_MAGIC, 0x03, __u64), buf), ENOTTY);
	CHECK_ERR(ioctl(fd, _IOWR(0x97, 0x01, struct bus1_cmd_peer_query), buf), ENOTTY);
	CHECK_ERR(ioctl(fd, FIONREAD, buf), ENOTTY);
	/* Nothing above may have done anything. */
	CHECK_OK(ioctl(fd, BUS1_CMD_PEER_QUERY, buf));
	close(fd);
}

static void test_reset(void)
{
	struct bus1_cmd_peer_reset r = { 0 };
	struct bus1_cmd_recv rv = { 0 };
	struct bus1_cmd_handle_transfer t = { .src_handle = BUS1_HANDLE_CREATE };
	uint64_t ha, hb, ha2;
	int a, b;

	two_peers(&a, &b, &ha, &hb);
	r.flags = 1;
	CHECK_ERR(ioctl(a, BUS1_CMD_PEER_RESET, &r), EINVAL);
	CHECK_ERR(ioctl(a, BUS1_CMD_PEER_RESET, BAD_PTR), EFAULT);

	/* b queues a message on a's node; reset drops it, destroys the node, releases ha. */
	CHECK_OK(send_raw(b, hb, NULL));
	r.flags = 0;
	CHECK_OK(ioctl(a, BUS1_CMD_PEER_RESET, &r));
	CHECK_ERR(ioctl(a, BUS1_CMD_RECV, &rv), EAGAIN);
	CHECK_ERR(send_raw(a, ha, NULL), ENXIO);

	/* b learns that the node is gone. */
	CHECK_OK(ioctl(b, BUS1_CMD_RECV, &rv));
	CHECK_EQ(rv.type, BUS1_MSG_NODE_DESTROY);
	CHECK_EQ(rv.destination, hb);
	CHECK_EQ(rv.offset, BUS1_OFFSET_INVALID);
	CHECK_ERR(send_raw(b, hb, NULL), EHOSTUNREACH);

	/* The peer is usable, and ids keep growing. */
	t.dst_fd = b;
	CHECK_OK(ioctl(a, BUS1_CMD_HANDLE_TRANSFER, &t));
	ha2 = t.src_handle;
	CHECK(ha2 > ha);
	CHECK_OK(send_raw(b, t.dst_handle, NULL));
	CHECK_OK(ioctl(a, BUS1_CMD_RECV, &rv));
	CHECK_EQ(rv.type, BUS1_MSG_DATA);
	CHECK_EQ(rv.destination, ha2);
	close(a);
	close(b);
}

static void test_transfer(void)
{
	struct bus1_cmd_handle_transfer t = { .src_handle = BUS1_HANDLE_CREATE };
	uint64_t ha, hb, hc;
	int a, b, c, p[2];

	a = kt_open_peer();
	b = kt_open_peer();
	c = kt_open_peer();

	/* Create: a local id (bit 1 clear) for the owner, a remote one for the other peer. */
	t.dst_fd = b;
	CHECK_OK(ioctl(a, BUS1_CMD_HANDLE_TRANSFER, &t));
	ha = t.src_handle;
	hb = t.dst_handle;
	CHECK(ha > BUS1_HANDLE_CREATE && ha != BUS1_HANDLE_INVALID);
	CHECK(hb > BUS1_HANDLE_CREATE && hb != BUS1_HANDLE_INVALID);
	CHECK_EQ(ha & 1, 0);
	CHECK_EQ(hb & 1, 0);
	CHECK_EQ(ha & BUS1_HANDLE_FLAG_REMOTE, 0);
	CHECK_EQ(hb & BUS1_HANDLE_FLAG_REMOTE, BUS1_HANDLE_FLAG_REMOTE);

	/* Again: same ids on both sides. */
	t = (struct bus1_cmd_handle_transfer){ .src_handle = ha, .dst_fd = b };
	CHECK_OK(ioctl(a, BUS1_CMD_HANDLE_TRANSFER, &t));
	CHECK_EQ(t.src_handle, ha);
	CHECK_EQ(t.dst_handle, hb);

	/* To itself: the owner's own id. */
	t = (struct bus1_cmd_handle_transfer){ .src_handle = ha, .dst_fd = a };
	CHECK_OK(ioctl(a, BUS1_CMD_HANDLE_TRANSFER, &t));
	CHECK_EQ(t.dst_handle, ha);

	/* A holder passes the handle on; a third party's handle names the same node. */
	t = (struct bus1_cmd_handle_transfer){ .src_handle = hb, .dst_fd = c };
	CHECK_OK(ioctl(b, BUS1_CMD_HANDLE_TRANSFER, &t));
	hc = t.dst_handle;
	CHECK_EQ(hc & BUS1_HANDLE_FLAG_REMOTE, BUS1_HANDLE_FLAG_REMOTE);
	/* ...and back to the owner, who gets its own id. */
	t = (struct bus1_cmd_handle_transfer){ .src_handle = hc, .dst_fd = a };
	CHECK_OK(ioctl(c, BUS1_CMD_HANDLE_TRANSFER, &t));
	CHECK_EQ(t.dst_handle, ha);

	/* Errors. */
	t = (struct bus1_cmd_handle_transfer){ .flags = 1, .src_handle = ha, .dst_fd = b };
	CHECK_ERR(ioctl(a, BUS1_CMD_HANDLE_TRANSFER, &t), EINVAL);
	t = (struct bus1_cmd_handle_transfer){ .src_handle = ha, .dst_fd = b, .dst_pad = 1 };
	CHECK_ERR(ioctl(a, BUS1_CMD_HANDLE_TRANSFER, &t), EINVAL);
	CHECK_ERR(ioctl(a, BUS1_CMD_HANDLE_TRANSFER, BAD_PTR), EFAULT);
	CHECK_ERR(ioctl(a, BUS1_CMD_HANDLE_TRANSFER, NULL), EFAULT);
	/* Invalid and non-bus1 destination fds. */
	t = (struct bus1_cmd_handle_transfer){ .src_handle = ha, .dst_fd = (__u32)-1 };
	CHECK_ERR(ioctl(a, BUS1_CMD_HANDLE_TRANSFER, &t), EBADF);
	t = (struct bus1_cmd_handle_transfer){ .src_handle = ha, .dst_fd = 999 };
	CHECK_ERR(ioctl(a, BUS1_CMD_HANDLE_TRANSFER, &t), EBADF);
	CHECK_OK(pipe(p));
	t = (struct bus1_cmd_handle_transfer){ .src_handle = ha, .dst_fd = p[0] };
	CHECK_ERR(ioctl(a, BUS1_CMD_HANDLE_TRANSFER, &t), EBADF);
	/* A CREATE whose transfer fails (its node is discarded again). */
	t = (struct bus1_cmd_handle_transfer){ .src_handle = BUS1_HANDLE_CREATE, .dst_fd = p[0] };
	CHECK_ERR(ioctl(a, BUS1_CMD_HANDLE_TRANSFER, &t), EBADF);
	close(p[0]);
	close(p[1]);
	/* Unknown, reserved and foreign source handles. */
	t = (struct bus1_cmd_handle_transfer){ .src_handle = ha + 400, .dst_fd = b };
	CHECK_ERR(ioctl(a, BUS1_CMD_HANDLE_TRANSFER, &t), ENXIO);
	t = (struct bus1_cmd_handle_transfer){ .src_handle = 0, .dst_fd = b };
	CHECK_ERR(ioctl(a, BUS1_CMD_HANDLE_TRANSFER, &t), ENXIO);
	t = (struct bus1_cmd_handle_transfer){ .src_handle = 1, .dst_fd = b };
	CHECK_ERR(ioctl(a, BUS1_CMD_HANDLE_TRANSFER, &t), ENXIO);
	t = (struct bus1_cmd_handle_transfer){ .src_handle = 2, .dst_fd = b };
	CHECK_ERR(ioctl(a, BUS1_CMD_HANDLE_TRANSFER, &t), ENXIO);
	t = (struct bus1_cmd_handle_transfer){ .src_handle = BUS1_HANDLE_INVALID, .dst_fd = b };
	CHECK_ERR(ioctl(a, BUS1_CMD_HANDLE_TRANSFER, &t), ENXIO);
	/* c holds hc only; b's id hb means nothing to c unless it happens to be hc. */
	if (hb != hc) {
		t = (struct bus1_cmd_handle_transfer){ .src_handle = hb, .dst_fd = a };
		CHECK_ERR(ioctl(c, BUS1_CMD_HANDLE_TRANSFER, &t), ENXIO);
	}
	/* A destroyed node: a holder keeps its id, a new holder cannot be made. */
	{
		int d = kt_open_peer();

		CHECK_OK(ioctl(a, BUS1_CMD_NODES_DESTROY,
				&(struct bus1_cmd_nodes_destroy){ .ptr_nodes = (uintptr_t)&ha,
								  .n_nodes = 1 }));
		t = (struct bus1_cmd_handle_transfer){ .src_handle = hb, .dst_fd = c };
		CHECK_OK(ioctl(b, BUS1_CMD_HANDLE_TRANSFER, &t));
		CHECK_EQ(t.dst_handle, hc);
		t = (struct bus1_cmd_handle_transfer){ .src_handle = hb, .dst_fd = d };
		CHECK_ERR(ioctl(b, BUS1_CMD_HANDLE_TRANSFER, &t), EHOSTUNREACH);
		t = (struct bus1_cmd_handle_transfer){ .src_handle = ha, .dst_fd = d };
		CHECK_ERR(ioctl(a, BUS1_CMD_HANDLE_TRANSFER, &t), EHOSTUNREACH);
		close(d);
	}
	close(a);
	close(b);
	close(c);
}

static void test_release(void)
{
	struct bus1_cmd_handle_release r = { 0 };
	struct bus1_cmd_recv rv = { 0 };
	uint64_t ha, hb;
	int a, b;

	two_peers(&a, &b, &ha, &hb);
	r = (struct bus1_cmd_handle_release){ .flags = 1, .handle = hb };
	CHECK_ERR(ioctl(b, BUS1_CMD_HANDLE_RELEASE, &r), EINVAL);
	CHECK_ERR(ioctl(b, BUS1_CMD_HANDLE_RELEASE, BAD_PTR), EFAULT);
	r = (struct bus1_cmd_handle_release){ .handle = hb + 400 };
	CHECK_ERR(ioctl(b, BUS1_CMD_HANDLE_RELEASE, &r), ENXIO);
	r = (struct bus1_cmd_handle_release){ .handle = BUS1_HANDLE_CREATE };
	CHECK_ERR(ioctl(b, BUS1_CMD_HANDLE_RELEASE, &r), ENXIO);
	r = (struct bus1_cmd_handle_release){ .handle = BUS1_HANDLE_INVALID };
	CHECK_ERR(ioctl(b, BUS1_CMD_HANDLE_RELEASE, &r), ENXIO);

	/* A holder's release: the handle is stale, the node lives on. */
	r = (struct bus1_cmd_handle_release){ .handle = hb };
	CHECK_OK(ioctl(b, BUS1_CMD_HANDLE_RELEASE, &r));
	CHECK_ERR(ioctl(b, BUS1_CMD_HANDLE_RELEASE, &r), ENXIO);
	CHECK_ERR(send_raw(b, hb, NULL), ENXIO);
	/* b held the only remote handle: the owner hears of the release */
	CHECK_OK(ioctl(a, BUS1_CMD_RECV, &rv));
	CHECK_EQ(rv.type, BUS1_MSG_NODE_RELEASE);
	CHECK_EQ(rv.destination, ha);
	CHECK_EQ(rv.offset, BUS1_OFFSET_INVALID);
	CHECK_OK(send_raw(a, ha, NULL));
	CHECK_OK(ioctl(a, BUS1_CMD_RECV, &rv));
	CHECK_EQ(rv.type, BUS1_MSG_DATA);
	CHECK_OK(ioctl(a, BUS1_CMD_SLICE_RELEASE,
			&(struct bus1_cmd_slice_release){ .offset = rv.offset }));

	/* The owner's release destroys the node: every holder is told, the owner too. */
	{
		struct bus1_cmd_handle_transfer t = { .src_handle = ha, .dst_fd = b };

		CHECK_OK(ioctl(a, BUS1_CMD_HANDLE_TRANSFER, &t));
		/* Ids are never reused: b gets a new one. */
		CHECK(t.dst_handle != hb);
		hb = t.dst_handle;
	}
	r = (struct bus1_cmd_handle_release){ .handle = ha };
	CHECK_OK(ioctl(a, BUS1_CMD_HANDLE_RELEASE, &r));
	/* The owner is told too, with the id it just released. */
	CHECK_OK(ioctl(a, BUS1_CMD_RECV, &rv));
	CHECK_EQ(rv.type, BUS1_MSG_NODE_DESTROY);
	CHECK_EQ(rv.destination, ha);
	CHECK_ERR(ioctl(a, BUS1_CMD_RECV, &rv), EAGAIN);
	CHECK_OK(ioctl(b, BUS1_CMD_RECV, &rv));
	CHECK_EQ(rv.type, BUS1_MSG_NODE_DESTROY);
	CHECK_EQ(rv.destination, hb);
	CHECK_ERR(ioctl(a, BUS1_CMD_HANDLE_RELEASE, &r), ENXIO);
	CHECK_ERR(send_raw(b, hb, NULL), EHOSTUNREACH);
	/* b still holds hb (stale node) until it releases it. */
	r = (struct bus1_cmd_handle_release){ .handle = hb };
	CHECK_OK(ioctl(b, BUS1_CMD_HANDLE_RELEASE, &r));
	CHECK_ERR(ioctl(b, BUS1_CMD_HANDLE_RELEASE, &r), ENXIO);
	close(a);
	close(b);
}

static void test_destroy(void)
{
	struct bus1_cmd_nodes_destroy d = { 0 };
	struct bus1_cmd_peer_query q = { 0 };
	struct bus1_cmd_recv rv = { 0 };
	uint64_t ha, hb, ha2, hb2, list[3];
	int a, b;

	two_peers(&a, &b, &ha, &hb);
	{
		struct bus1_cmd_handle_transfer t = { .src_handle = BUS1_HANDLE_CREATE, .dst_fd = b };

		CHECK_OK(ioctl(a, BUS1_CMD_HANDLE_TRANSFER, &t));
		ha2 = t.src_handle;
		hb2 = t.dst_handle;
	}
	CHECK_OK(ioctl(a, BUS1_CMD_PEER_QUERY, &q));

	list[0] = ha;
	list[1] = ha2;
	d = (struct bus1_cmd_nodes_destroy){ .flags = 1, .ptr_nodes = (uintptr_t)list, .n_nodes = 2 };
	CHECK_ERR(ioctl(a, BUS1_CMD_NODES_DESTROY, &d), EINVAL);
	CHECK_ERR(ioctl(a, BUS1_CMD_NODES_DESTROY, BAD_PTR), EFAULT);
	d = (struct bus1_cmd_nodes_destroy){ .ptr_nodes = BAD_U64, .n_nodes = 2 };
	CHECK_ERR(ioctl(a, BUS1_CMD_NODES_DESTROY, &d), EFAULT);
	d = (struct bus1_cmd_nodes_destroy){ .ptr_nodes = (uintptr_t)list, .n_nodes = q.max_handles + 1 };
	CHECK_ERR(ioctl(a, BUS1_CMD_NODES_DESTROY, &d), EINVAL);
	d = (struct bus1_cmd_nodes_destroy){ .ptr_nodes = (uintptr_t)list, .n_nodes = ~(__u64)0 };
	CHECK_ERR(ioctl(a, BUS1_CMD_NODES_DESTROY, &d), EINVAL);
	/* A node listed twice. */
	list[2] = ha;
	d = (struct bus1_cmd_nodes_destroy){ .ptr_nodes = (uintptr_t)list, .n_nodes = 3 };
	CHECK_ERR(ioctl(a, BUS1_CMD_NODES_DESTROY, &d), EINVAL);

	/* Atomic: one bad entry (unknown, or a node the caller does not own) and none goes. */
	list[2] = ha2 + 400;
	d = (struct bus1_cmd_nodes_destroy){ .ptr_nodes = (uintptr_t)list, .n_nodes = 3 };
	CHECK_ERR(ioctl(a, BUS1_CMD_NODES_DESTROY, &d), ENXIO);
	list[2] = hb;
	d = (struct bus1_cmd_nodes_destroy){ .ptr_nodes = (uintptr_t)list, .n_nodes = 2 };
	/* b holds hb but does not own its node. */
	CHECK_ERR(ioctl(b, BUS1_CMD_NODES_DESTROY,
			 &(struct bus1_cmd_nodes_destroy){ .ptr_nodes = (uintptr_t)&list[2],
							   .n_nodes = 1 }), EPERM);
	CHECK_ERR(ioctl(b, BUS1_CMD_RECV, &rv), EAGAIN);
	CHECK_OK(send_raw(b, hb, NULL));
	CHECK_OK(send_raw(b, hb2, NULL));
	CHECK_OK(ioctl(a, BUS1_CMD_RECV, &rv));
	CHECK_OK(ioctl(a, BUS1_CMD_SLICE_RELEASE,
			&(struct bus1_cmd_slice_release){ .offset = rv.offset }));
	CHECK_OK(ioctl(a, BUS1_CMD_RECV, &rv));
	CHECK_OK(ioctl(a, BUS1_CMD_SLICE_RELEASE,
			&(struct bus1_cmd_slice_release){ .offset = rv.offset }));

	/* Both at once: b gets two notifications, a (the owner, holding both) two as well. */
	CHECK_OK(ioctl(a, BUS1_CMD_NODES_DESTROY, &d));
	CHECK_OK(ioctl(b, BUS1_CMD_RECV, &rv));
	CHECK_EQ(rv.type, BUS1_MSG_NODE_DESTROY);
	CHECK(rv.destination == hb || rv.destination == hb2);
	CHECK_OK(ioctl(b, BUS1_CMD_RECV, &rv));
	CHECK_EQ(rv.type, BUS1_MSG_NODE_DESTROY);
	CHECK(rv.destination == hb || rv.destination == hb2);
	CHECK_ERR(ioctl(b, BUS1_CMD_RECV, &rv), EAGAIN);
	CHECK_OK(ioctl(a, BUS1_CMD_RECV, &rv));
	CHECK_EQ(rv.type, BUS1_MSG_NODE_DESTROY);
	CHECK_OK(ioctl(a, BUS1_CMD_RECV, &rv));
	CHECK_EQ(rv.type, BUS1_MSG_NODE_DESTROY);
	CHECK_ERR(ioctl(a, BUS1_CMD_RECV, &rv), EAGAIN);

	/* Destroying a destroyed node again fails; the owner still holds its handles. */
	CHECK_ERR(ioctl(a, BUS1_CMD_NODES_DESTROY, &d), EHOSTUNREACH);
	CHECK_OK(ioctl(a, BUS1_CMD_HANDLE_RELEASE, &(struct bus1_cmd_handle_release){ .handle = ha }));
	CHECK_ERR(ioctl(a, BUS1_CMD_NODES_DESTROY, &d), ENXIO);
	close(a);
	close(b);
}

static void test_slice_release(void)
{
	struct bus1_cmd_slice_release s = { 0 };
	struct bus1_cmd_recv rv = { 0 };
	uint64_t ha, hb;
	int a, b;

	two_peers(&a, &b, &ha, &hb);
	s.flags = 1;
	CHECK_ERR(ioctl(a, BUS1_CMD_SLICE_RELEASE, &s), EINVAL);
	CHECK_ERR(ioctl(a, BUS1_CMD_SLICE_RELEASE, BAD_PTR), EFAULT);
	/* No slice at all. */
	s = (struct bus1_cmd_slice_release){ .offset = 0 };
	CHECK_ERR(ioctl(a, BUS1_CMD_SLICE_RELEASE, &s), ENXIO);
	s.offset = BUS1_OFFSET_INVALID;
	CHECK_ERR(ioctl(a, BUS1_CMD_SLICE_RELEASE, &s), ENXIO);

	/* A peeked (still queued) message's slice is not the receiver's yet. */
	CHECK_OK(send_raw(b, hb, NULL));
	rv.flags = BUS1_RECV_FLAG_PEEK;
	CHECK_OK(ioctl(a, BUS1_CMD_RECV, &rv));
	s.offset = rv.offset;
	CHECK_ERR(ioctl(a, BUS1_CMD_SLICE_RELEASE, &s), ENXIO);
	rv.flags = 0;
	CHECK_OK(ioctl(a, BUS1_CMD_RECV, &rv));
	CHECK_EQ(rv.offset, s.offset);
	/* Not the start of the slice. */
	if (rv.n_bytes > 1) {
		s.offset = rv.offset + 1;
		CHECK_ERR(ioctl(a, BUS1_CMD_SLICE_RELEASE, &s), ENXIO);
	}
	s.offset = rv.offset;
	CHECK_OK(ioctl(a, BUS1_CMD_SLICE_RELEASE, &s));
	CHECK_ERR(ioctl(a, BUS1_CMD_SLICE_RELEASE, &s), ENXIO);
	close(a);
	close(b);
}

static void test_send_errors(void)
{
	struct bus1_cmd_peer_query q = { 0 };
	struct bus1_cmd_send s;
	uint64_t ha, hb, dst[2], h;
	uint32_t errs[2];
	char buf[16] = "x";
	struct iovec v = { .iov_base = buf, .iov_len = sizeof(buf) };
	int a, b, fd;

	two_peers(&a, &b, &ha, &hb);
	CHECK_OK(ioctl(b, BUS1_CMD_PEER_QUERY, &q));
	/* S0: a valid unicast from b to a; each check below changes one thing. */
#define S0 ((struct bus1_cmd_send){ .ptr_destinations = (uintptr_t)&hb, .n_destinations = 1, \
				    .ptr_vecs = (uintptr_t)&v, .n_vecs = 1 })
	s = S0;
	s.flags = 2;
	CHECK_ERR(ioctl(b, BUS1_CMD_SEND, &s), EINVAL);
	s = S0;
	s.flags = (__u64)1 << 63;
	CHECK_ERR(ioctl(b, BUS1_CMD_SEND, &s), EINVAL);
	CHECK_ERR(ioctl(b, BUS1_CMD_SEND, BAD_PTR), EFAULT);
	CHECK_ERR(ioctl(b, BUS1_CMD_SEND, NULL), EFAULT);
	/* Destinations. */
	s = S0;
	s.n_destinations = 0;
	CHECK_ERR(ioctl(b, BUS1_CMD_SEND, &s), EINVAL);
	s = S0;
	s.n_destinations = q.max_destinations + 1;
	CHECK_ERR(ioctl(b, BUS1_CMD_SEND, &s), EINVAL);
	s = S0;
	s.n_destinations = ~(__u64)0;
	CHECK_ERR(ioctl(b, BUS1_CMD_SEND, &s), EINVAL);
	s = S0;
	s.ptr_destinations = BAD_U64;
	CHECK_ERR(ioctl(b, BUS1_CMD_SEND, &s), EFAULT);
	/* Data. */
	s = S0;
	s.ptr_vecs = BAD_U64;
	CHECK_ERR(ioctl(b, BUS1_CMD_SEND, &s), EFAULT);
	s = S0;
	s.n_vecs = q.max_vecs + 1;
	CHECK_ERR(ioctl(b, BUS1_CMD_SEND, &s), EINVAL);
	s = S0;
	s.n_vecs = ~(__u64)0;
	CHECK_ERR(ioctl(b, BUS1_CMD_SEND, &s), EINVAL);
	{
		struct iovec bad = { .iov_base = BAD_PTR, .iov_len = 16 };

		s = S0;
		s.ptr_vecs = (uintptr_t)&bad;
		CHECK_ERR(ioctl(b, BUS1_CMD_SEND, &s), EFAULT);
		/* A length no address space has: a bad range. */
		bad = (struct iovec){ .iov_base = buf, .iov_len = ~(size_t)0 >> 1 };
		CHECK_ERR_ANY(ioctl(b, BUS1_CMD_SEND, &s), EFAULT, EMSGSIZE);
		/* Readable memory, but more than any pool holds: nothing is delivered. */
		bad.iov_len = q.pool_size + 4096;
		bad.iov_base = mmap(NULL, bad.iov_len, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS |
				    MAP_NORESERVE, -1, 0);
		CHECK(bad.iov_base != MAP_FAILED);
		CHECK_ERR(ioctl(b, BUS1_CMD_SEND, &s), EMSGSIZE);
		munmap(bad.iov_base, bad.iov_len);
	}
	/* Carried handles. */
	s = S0;
	s.ptr_handles = BAD_U64;
	s.n_handles = 1;
	CHECK_ERR(ioctl(b, BUS1_CMD_SEND, &s), EFAULT);
	s = S0;
	s.ptr_handles = (uintptr_t)&h;
	s.n_handles = q.max_handles + 1;
	CHECK_ERR(ioctl(b, BUS1_CMD_SEND, &s), EINVAL);
	h = hb + 400;
	s = S0;
	s.ptr_handles = (uintptr_t)&h;
	s.n_handles = 1;
	CHECK_ERR(ioctl(b, BUS1_CMD_SEND, &s), ENXIO);
	h = 0;
	CHECK_ERR(ioctl(b, BUS1_CMD_SEND, &s), ENXIO);
	h = BUS1_HANDLE_INVALID;
	CHECK_ERR(ioctl(b, BUS1_CMD_SEND, &s), ENXIO);
	/* a's id is a's, not b's (unless b happens to use the same number). */
	h = ha;
	if (ha != hb)
		CHECK_ERR(ioctl(b, BUS1_CMD_SEND, &s), ENXIO);
	/* Carried fds: invalid, and a bus1 peer (which could make reference cycles). */
	{
		__u32 f = (__u32)-1;

		s = S0;
		s.ptr_fds = (uintptr_t)&f;
		s.n_fds = 1;
		CHECK_ERR(ioctl(b, BUS1_CMD_SEND, &s), EBADF);
		f = 999;
		CHECK_ERR(ioctl(b, BUS1_CMD_SEND, &s), EBADF);
		f = a;
		CHECK_ERR(ioctl(b, BUS1_CMD_SEND, &s), EOPNOTSUPP);
		s = S0;
		s.ptr_fds = BAD_U64;
		s.n_fds = 1;
		CHECK_ERR(ioctl(b, BUS1_CMD_SEND, &s), EFAULT);
		s = S0;
		s.ptr_fds = (uintptr_t)&f;
		s.n_fds = q.max_fds + 1;
		CHECK_ERR(ioctl(b, BUS1_CMD_SEND, &s), EINVAL);
	}
	/* A message-level error leaves the error array alone. */
	{
		uint32_t e = 12345;
		__u32 f = (__u32)-1;

		s = S0;
		s.ptr_errors = (uintptr_t)&e;
		s.ptr_fds = (uintptr_t)&f;
		s.n_fds = 1;
		CHECK_ERR(ioctl(b, BUS1_CMD_SEND, &s), EBADF);
		CHECK_EQ(e, 12345);
		s.n_fds = 0;
		s.flags = 4;
		CHECK_ERR(ioctl(b, BUS1_CMD_SEND, &s), EINVAL);
		CHECK_EQ(e, 12345);
	}
	/* Nothing above reached a: */
	CHECK_ERR(ioctl(a, BUS1_CMD_RECV, &(struct bus1_cmd_recv){ 0 }), EAGAIN);

	/* Per-destination errors: unknown, reserved, foreign, stale. */
	errs[0] = errs[1] = 12345;
	dst[0] = hb;
	dst[1] = hb + 400;
	s = S0;
	s.ptr_destinations = (uintptr_t)dst;
	s.n_destinations = 2;
	s.ptr_errors = (uintptr_t)errs;
	CHECK_ERR(ioctl(b, BUS1_CMD_SEND, &s), ENXIO);
	CHECK_EQ(errs[0], ECANCELED);
	CHECK_EQ(errs[1], ENXIO);
	CHECK_ERR(ioctl(a, BUS1_CMD_RECV, &(struct bus1_cmd_recv){ 0 }), EAGAIN);
	/* With CONTINUE the good destination gets it. */
	s.flags = BUS1_SEND_FLAG_CONTINUE;
	errs[0] = errs[1] = 12345;
	CHECK_OK(ioctl(b, BUS1_CMD_SEND, &s));
	CHECK_EQ(errs[0], 0);
	CHECK_EQ(errs[1], ENXIO);
	CHECK_OK(ioctl(a, BUS1_CMD_RECV, &(struct bus1_cmd_recv){ 0 }));
	/* A bad error array is a message-level fault (checked before anything is delivered). */
	s = S0;
	s.ptr_errors = BAD_U64;
	CHECK_ERR(ioctl(b, BUS1_CMD_SEND, &s), EFAULT);
	CHECK_ERR(ioctl(a, BUS1_CMD_RECV, &(struct bus1_cmd_recv){ 0 }), EAGAIN);
	/* Reserved ids as destinations, CREATE included (a node cannot be a destination yet). */
	for (h = 0; h <= 3; h++) {
		s = S0;
		s.ptr_destinations = (uintptr_t)&h;
		CHECK_ERR(ioctl(b, BUS1_CMD_SEND, &s), ENXIO);
	}
	/* Foreign: a's id means nothing to a fresh peer. */
	fd = kt_open_peer();
	s = S0;
	s.ptr_destinations = (uintptr_t)&ha;
	CHECK_ERR(ioctl(fd, BUS1_CMD_SEND, &s), ENXIO);
	s = S0;
	s.ptr_destinations = (uintptr_t)&hb;
	if (hb != ha)
		CHECK_ERR(ioctl(fd, BUS1_CMD_SEND, &s), ENXIO);
	close(fd);
	/* An empty message is fine. */
	s = S0;
	s.n_vecs = 0;
	s.ptr_vecs = 0;
	CHECK_OK(ioctl(b, BUS1_CMD_SEND, &s));
	{
		struct bus1_cmd_recv rv = { 0 };

		CHECK_OK(ioctl(a, BUS1_CMD_RECV, &rv));
		CHECK_EQ(rv.type, BUS1_MSG_DATA);
		CHECK_EQ(rv.n_bytes, 0);
	}
#undef S0
	close(a);
	close(b);
}

static void test_recv_errors(void)
{
	struct bus1_cmd_recv rv = { 0 };
	uint64_t ha, hb;
	int a, b;

	two_peers(&a, &b, &ha, &hb);
	CHECK_ERR(ioctl(a, BUS1_CMD_RECV, &rv), EAGAIN);
	rv.flags = BUS1_RECV_FLAG_PEEK;
	CHECK_ERR(ioctl(a, BUS1_CMD_RECV, &rv), EAGAIN);
	rv.flags = 16;
	CHECK_ERR(ioctl(a, BUS1_CMD_RECV, &rv), EINVAL);
	CHECK_ERR(ioctl(a, BUS1_CMD_RECV, BAD_PTR), EFAULT);
	CHECK_OK(send_raw(b, hb, NULL));
	rv.flags = 1ULL << 63;
	CHECK_ERR(ioctl(a, BUS1_CMD_RECV, &rv), EINVAL);
	/* a RELEASE of no slice: ENXIO, and the message stays */
	rv.flags = BUS1_RECV_FLAG_RELEASE;
	rv.offset = 0;
	CHECK_ERR(ioctl(a, BUS1_CMD_RECV, &rv), ENXIO);
	/* A fault writing the result must not lose the message. */
	CHECK_ERR(ioctl(a, BUS1_CMD_RECV, BAD_PTR), EFAULT);
	rv.flags = 0;
	CHECK_OK(ioctl(a, BUS1_CMD_RECV, &rv));
	CHECK_EQ(rv.type, BUS1_MSG_DATA);
	CHECK_EQ(rv.destination, ha);
	CHECK_EQ(rv.n_bytes, 8);
	close(a);
	close(b);
}

static void test_disconnect(void)
{
	struct bus1_cmd_peer_query q = { 0 };
	struct bus1_cmd_recv rv = { 0 };
	struct pollfd pfd;
	uint64_t ha, hb, flags = 1;
	int a, b;

	two_peers(&a, &b, &ha, &hb);
	CHECK_ERR(ioctl(a, BUS1_CMD_PEER_DISCONNECT, &flags), EINVAL);
	CHECK_ERR(ioctl(a, BUS1_CMD_PEER_DISCONNECT, BAD_PTR), EFAULT);
	pfd = (struct pollfd){ .fd = a, .events = POLLIN };
	CHECK_EQ(poll(&pfd, 1, 0), 0);

	flags = 0;
	CHECK_OK(ioctl(a, BUS1_CMD_PEER_DISCONNECT, &flags));
	EXPECT_ERR(ioctl(a, BUS1_CMD_PEER_DISCONNECT, &flags), ESHUTDOWN);
	EXPECT_ERR(ioctl(a, BUS1_CMD_PEER_RESET, &(struct bus1_cmd_peer_reset){ 0 }), ESHUTDOWN);
	EXPECT_ERR(ioctl(a, BUS1_CMD_RECV, &rv), ESHUTDOWN);
	EXPECT_ERR(send_raw(a, ha, NULL), ESHUTDOWN);
	EXPECT_ERR(ioctl(a, BUS1_CMD_HANDLE_RELEASE,
			 &(struct bus1_cmd_handle_release){ .handle = ha }), ESHUTDOWN);
	EXPECT_ERR(ioctl(a, BUS1_CMD_HANDLE_TRANSFER,
			 &(struct bus1_cmd_handle_transfer){ .src_handle = BUS1_HANDLE_CREATE,
							     .dst_fd = b }), ESHUTDOWN);
	EXPECT_ERR(ioctl(a, BUS1_CMD_SLICE_RELEASE,
			 &(struct bus1_cmd_slice_release){ .offset = 0 }), ESHUTDOWN);
	EXPECT_ERR(ioctl(a, BUS1_CMD_NODES_DESTROY,
			 &(struct bus1_cmd_nodes_destroy){ .ptr_nodes = (uintptr_t)&ha,
							   .n_nodes = 1 }), ESHUTDOWN);
	pfd = (struct pollfd){ .fd = a, .events = POLLIN | POLLOUT };
	CHECK_EQ(poll(&pfd, 1, 0), 1);
	CHECK(pfd.revents & POLLHUP);
	/* The header: "afterwards every ioctl on the fd fails with ESHUTDOWN". */
	CHECK_ERR(ioctl(a, BUS1_CMD_PEER_QUERY, &q), ESHUTDOWN);

	{
		void *m = mmap(NULL, 4096, PROT_READ, MAP_SHARED, a, 0);

		CHECK(m == MAP_FAILED);
		CHECK_EQ(errno, ESHUTDOWN);
	}
	/* The disconnected peer is no destination for transfers either. */
	{
		struct bus1_cmd_handle_transfer t = { .src_handle = BUS1_HANDLE_CREATE, .dst_fd = a };

		CHECK_ERR(ioctl(b, BUS1_CMD_HANDLE_TRANSFER, &t), EHOSTUNREACH);
	}
	/* b was told; its handle is dead. */
	CHECK_OK(ioctl(b, BUS1_CMD_RECV, &rv));
	CHECK_EQ(rv.type, BUS1_MSG_NODE_DESTROY);
	CHECK_EQ(rv.destination, hb);
	CHECK_ERR(send_raw(b, hb, NULL), EHOSTUNREACH);
	close(a);
	close(b);
}

static void test_bad_fd_ops(void)
{
	int fd = kt_open_peer();
	char c;

	/* A peer is not a byte stream. */
	CHECK(read(fd, &c, 1) < 0);
	CHECK(write(fd, &c, 1) < 0);
	/* Mapping past the pool, or writable, is refused. */
	{
		struct bus1_cmd_peer_query q = { 0 };
		void *p;

		CHECK_OK(ioctl(fd, BUS1_CMD_PEER_QUERY, &q));
		p = mmap(NULL, q.pool_size + 4096, PROT_READ, MAP_SHARED, fd, 0);
		CHECK(p == MAP_FAILED);
		p = mmap(NULL, 4096, PROT_READ, MAP_SHARED, fd, q.pool_size);
		CHECK(p == MAP_FAILED);
		p = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
		CHECK(p == MAP_FAILED);
		CHECK_EQ(errno, EPERM);
	}
	close(fd);
}

static const struct kt_case cases[] = {
	KT_CASE(test_query),
	KT_CASE(test_sizes),
	KT_CASE(test_reset),
	KT_CASE(test_transfer),
	KT_CASE(test_release),
	KT_CASE(test_destroy),
	KT_CASE(test_slice_release),
	KT_CASE(test_send_errors),
	KT_CASE(test_recv_errors),
	KT_CASE(test_disconnect),
	KT_CASE(test_bad_fd_ops),
};

int main(int argc, char **argv)
{
	return kt_main(cases, sizeof(cases) / sizeof(cases[0]), argc, argv);
}
