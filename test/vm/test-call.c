/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * CALL: a SEND, a wait and a RECV of the queue's front in one ioctl (docs/bus1.7). The reply
 * comes; a reply that never comes (ETIMEDOUT, sent once); a signal during the wait (EINTR, not
 * restarted, one copy delivered); the callee dies (its NODE_DESTROY is received); the caller's
 * queue holds other messages first (they come first, in order); the send fails (SEND's errno,
 * nothing sent, nothing waited); bad arguments; a RECV failure after the send (EMFILE: sent,
 * the message stays queued); the caller disconnected or reset while waiting; another thread
 * receiving meanwhile. And RECV's RELEASE and MORE flags, which CALL shares.
 */

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>
#include "kmod-test.h"

#define SEC 1000000000ULL

/* A caller C and a callee S: C holds c_ns (S's node), S holds s_nc (C's node). */
struct pair {
	struct b1_peer *c, *s;
	uint64_t ns, c_ns, nc, s_nc;
};

static void pair_init(struct pair *p)
{
	p->c = kt_peer();
	p->s = kt_peer();
	kt_node(p->s, p->c, &p->ns, &p->c_ns);
	kt_node(p->c, p->s, &p->nc, &p->s_nc);
}

static void pair_free(struct pair *p)
{
	b1_peer_free(p->c);
	b1_peer_free(p->s);
}

/* The raw command: a unicast of @data to @dst. */
static void call_init(struct bus1_cmd_call *cmd, uint64_t *dst, struct iovec *v, const char *data,
		      uint64_t timeout_ns)
{
	v->iov_base = (void *)data;
	v->iov_len = strlen(data);
	memset(cmd, 0, sizeof(*cmd));
	cmd->send.ptr_destinations = (uintptr_t)dst;
	cmd->send.n_destinations = 1;
	cmd->send.ptr_vecs = (uintptr_t)v;
	cmd->send.n_vecs = 1;
	cmd->timeout_ns = timeout_ns;
	cmd->status = 0xdead;	/* ignored on input */
}

static int call_raw(struct b1_peer *p, struct bus1_cmd_call *cmd)
{
	return ioctl(b1_peer_get_fd(p), BUS1_CMD_CALL, cmd) < 0 ? -errno : 0;
}

/* The next message of @p must be a DATA message carrying @data. */
static void expect_first(struct b1_peer *p, const char *data)
{
	struct b1_msg m;

	kt_recv(p, 0, &m);
	CHECK_EQ(m.type, BUS1_MSG_DATA);
	CHECK_EQ(m.n_bytes, strlen(data));
	CHECK(!memcmp(m.data, data, m.n_bytes));
	CHECK_OK(b1_peer_msg_release(p, &m));
}

/* The next message of @p must be a notification of @type for @dst. */
static void expect_notify(struct b1_peer *p, uint64_t type, uint64_t dst)
{
	struct b1_msg m;

	kt_recv(p, 0, &m);
	CHECK_EQ(m.type, type);
	CHECK_EQ(m.destination, dst);
}

/* @p must have exactly one message queued, a DATA message carrying @data. */
static void expect_one(struct b1_peer *p, const char *data)
{
	expect_first(p, data);
	kt_recv_none(p);
}

/* The callee: receive one call (waiting for it) and answer @reply, after @delay_us. */
struct server {
	struct pair *p;
	const char *reply;
	unsigned int delay_us;
	int result;
};

static void *serve_one(void *arg)
{
	struct server *sv = arg;
	struct pollfd pfd = { .fd = b1_peer_get_fd(sv->p->s), .events = POLLIN };
	struct b1_msg m;
	int r;

	while ((r = b1_peer_recv(sv->p->s, 0, &m)) == -EAGAIN)
		poll(&pfd, 1, -1);
	if (r == 0) {
		b1_peer_msg_release(sv->p->s, &m);
		usleep(sv->delay_us);
		r = kt_send(sv->p->s, sv->p->s_nc, sv->reply, strlen(sv->reply));
	}
	sv->result = r;
	return NULL;
}

static void test_call_reply(void)
{
	struct pair p;
	struct server sv = { .p = &p, .reply = "pong", .delay_us = 100000 };
	struct bus1_cmd_call cmd;
	struct iovec v;
	pthread_t t;
	int i;

	pair_init(&p);
	/* the reply arrives while CALL waits, and when it is already there (no delay) */
	for (i = 0; i < 2; i++) {
		sv.delay_us = i ? 0 : 100000;
		CHECK_OK(pthread_create(&t, NULL, serve_one, &sv));
		call_init(&cmd, &p.c_ns, &v, "ping", 10 * SEC);
		CHECK_OK(call_raw(p.c, &cmd));
		CHECK_OK(pthread_join(t, NULL));
		CHECK_OK(sv.result);
		CHECK_EQ(cmd.status, BUS1_CALL_STATUS_SENT);
		CHECK_EQ(cmd.recv.type, BUS1_MSG_DATA);
		CHECK_EQ(cmd.recv.destination, p.nc);
		CHECK_EQ(cmd.recv.n_bytes, 4);
		CHECK_EQ(cmd.recv.uid, getuid());
		CHECK_EQ(cmd.recv.pid, getpid());
		CHECK(!memcmp((const uint8_t *)b1_peer_get_pool(p.c, NULL) + cmd.recv.offset,
			      "pong", 4));
		CHECK_OK(b1_peer_slice_release(p.c, cmd.recv.offset));
		kt_recv_none(p.c);
		kt_recv_none(p.s);
	}
	/* the library's wrapper, and PEEK: the message stays queued */
	{
		struct b1_msg m;
		struct iovec w = { .iov_base = "ping", .iov_len = 4 };
		bool sent = false;

		CHECK_OK(pthread_create(&t, NULL, serve_one, &sv));
		CHECK_OK(b1_peer_call(p.c, 0, &p.c_ns, 1, NULL, &w, 1, NULL, 0, NULL, 0,
				      BUS1_RECV_FLAG_PEEK, 10 * SEC, &m, &sent));
		CHECK_OK(pthread_join(t, NULL));
		CHECK(sent);
		CHECK_EQ(m.type, BUS1_MSG_DATA);
		CHECK_EQ(m.n_bytes, 4);
		expect_one(p.c, "pong");
	}
	pair_free(&p);
}

static void test_call_timeout(void)
{
	struct pair p;
	struct bus1_cmd_call cmd;
	struct iovec v;
	double t0, dt;

	pair_init(&p);
	/* nobody answers: ETIMEDOUT after the timeout, the call was sent once */
	call_init(&cmd, &p.c_ns, &v, "lost", SEC / 5);
	t0 = kt_now();
	CHECK_ERR(call_raw(p.c, &cmd), ETIMEDOUT);
	dt = kt_now() - t0;
	CHECK(dt >= 0.19);
	CHECK(dt < 5);
	CHECK_EQ(cmd.status, BUS1_CALL_STATUS_SENT);
	expect_one(p.s, "lost");
	kt_recv_none(p.c);

	/* 0: no wait at all */
	call_init(&cmd, &p.c_ns, &v, "now", 0);
	t0 = kt_now();
	CHECK_ERR(call_raw(p.c, &cmd), ETIMEDOUT);
	CHECK(kt_now() - t0 < 1);
	CHECK_EQ(cmd.status, BUS1_CALL_STATUS_SENT);
	expect_one(p.s, "now");

	/* 0 with a message already there: received */
	CHECK_OK(kt_send(p.s, p.s_nc, "here", 4));
	call_init(&cmd, &p.c_ns, &v, "now", 0);
	CHECK_OK(call_raw(p.c, &cmd));
	CHECK_EQ(cmd.recv.n_bytes, 4);
	CHECK_OK(b1_peer_slice_release(p.c, cmd.recv.offset));
	expect_one(p.s, "now");
	pair_free(&p);
}

static volatile sig_atomic_t n_signals;

static void on_signal(int sig)
{
	(void)sig;
	n_signals++;
}

struct killer {
	pthread_t target;
	unsigned int delay_us;
};

static void *kill_later(void *arg)
{
	struct killer *k = arg;

	usleep(k->delay_us);
	pthread_kill(k->target, SIGUSR1);
	return NULL;
}

static void test_call_signal(void)
{
	struct sigaction sa = { .sa_handler = on_signal, .sa_flags = SA_RESTART };
	struct killer k = { .target = pthread_self(), .delay_us = 200000 };
	struct pair p;
	struct bus1_cmd_call cmd;
	struct iovec v;
	pthread_t t;
	double t0;

	/* SA_RESTART: a restartable error would have been restarted, and sent twice */
	CHECK_OK(sigaction(SIGUSR1, &sa, NULL));
	pair_init(&p);
	call_init(&cmd, &p.c_ns, &v, "once", 20 * SEC);
	CHECK_OK(pthread_create(&t, NULL, kill_later, &k));
	t0 = kt_now();
	CHECK_ERR(call_raw(p.c, &cmd), EINTR);
	CHECK(kt_now() - t0 < 15);
	CHECK_OK(pthread_join(t, NULL));
	CHECK_EQ(n_signals, 1);
	CHECK_EQ(cmd.status, BUS1_CALL_STATUS_SENT);
	/* exactly one copy delivered */
	expect_one(p.s, "once");

	/* the wrapper does not call again either */
	{
		struct iovec w = { .iov_base = "twice?", .iov_len = 6 };
		struct b1_msg m;
		bool sent = false;

		CHECK_OK(pthread_create(&t, NULL, kill_later, &k));
		CHECK_ERR(b1_peer_call(p.c, 0, &p.c_ns, 1, NULL, &w, 1, NULL, 0, NULL, 0, 0,
				       20 * SEC, &m, &sent), EINTR);
		CHECK_OK(pthread_join(t, NULL));
		CHECK(sent);
		expect_one(p.s, "twice?");
	}
	kt_recv_none(p.c);
	pair_free(&p);
}

struct closer {
	struct b1_peer *peer;
	unsigned int delay_us;
	int how;	/* 0: close, 1: PEER_DISCONNECT, 2: PEER_RESET */
};

static void *close_later(void *arg)
{
	struct closer *cl = arg;

	usleep(cl->delay_us);
	if (cl->how == 0)
		b1_peer_free(cl->peer);
	else if (cl->how == 1)
		b1_peer_disconnect(cl->peer);
	else
		b1_peer_reset(cl->peer);
	return NULL;
}

static void test_call_peer_dies(void)
{
	struct pair p;
	struct closer cl = { .delay_us = 200000, .how = 0 };
	struct bus1_cmd_call cmd;
	struct iovec v;
	pthread_t t;

	pair_init(&p);
	cl.peer = p.s;
	CHECK_OK(pthread_create(&t, NULL, close_later, &cl));
	call_init(&cmd, &p.c_ns, &v, "anyone?", 20 * SEC);
	CHECK_OK(call_raw(p.c, &cmd));
	CHECK_OK(pthread_join(t, NULL));
	CHECK_EQ(cmd.status, BUS1_CALL_STATUS_SENT);
	CHECK_EQ(cmd.recv.type, BUS1_MSG_NODE_DESTROY);
	CHECK_EQ(cmd.recv.destination, p.c_ns);
	CHECK_EQ(cmd.recv.offset, BUS1_OFFSET_INVALID);
	/* then the release of our node, which the callee held */
	expect_notify(p.c, BUS1_MSG_NODE_RELEASE, p.nc);
	kt_recv_none(p.c);

	/* a dead callee: the SEND fails, nothing sent, nothing waited for */
	call_init(&cmd, &p.c_ns, &v, "dead", 20 * SEC);
	CHECK_ERR(call_raw(p.c, &cmd), EHOSTUNREACH);
	CHECK_EQ(cmd.status, 0);
	b1_peer_free(p.c);
}

static void test_call_self_disconnect(void)
{
	struct pair p;
	struct closer cl = { .delay_us = 200000 };
	struct bus1_cmd_call cmd;
	struct iovec v;
	pthread_t t;

	/* the caller itself disconnected meanwhile: ESHUTDOWN, sent */
	pair_init(&p);
	cl.peer = p.c;
	cl.how = 1;
	CHECK_OK(pthread_create(&t, NULL, close_later, &cl));
	call_init(&cmd, &p.c_ns, &v, "bye", 20 * SEC);
	CHECK_ERR(call_raw(p.c, &cmd), ESHUTDOWN);
	CHECK_OK(pthread_join(t, NULL));
	CHECK_EQ(cmd.status, BUS1_CALL_STATUS_SENT);
	/* the message, then the notifications of the disconnect */
	expect_first(p.s, "bye");
	expect_notify(p.s, BUS1_MSG_NODE_DESTROY, p.s_nc);
	expect_notify(p.s, BUS1_MSG_NODE_RELEASE, p.ns);
	kt_recv_none(p.s);
	/* and now the SEND fails */
	call_init(&cmd, &p.c_ns, &v, "bye", 20 * SEC);
	CHECK_ERR(call_raw(p.c, &cmd), ESHUTDOWN);
	CHECK_EQ(cmd.status, 0);
	pair_free(&p);

	/* reset meanwhile: the wait goes on (nothing for the caller any more) */
	pair_init(&p);
	cl.peer = p.c;
	cl.how = 2;
	CHECK_OK(pthread_create(&t, NULL, close_later, &cl));
	call_init(&cmd, &p.c_ns, &v, "reset", SEC);
	CHECK_ERR(call_raw(p.c, &cmd), ETIMEDOUT);
	CHECK_OK(pthread_join(t, NULL));
	CHECK_EQ(cmd.status, BUS1_CALL_STATUS_SENT);
	pair_free(&p);
}

static void test_call_queue_first(void)
{
	struct pair p;
	struct b1_peer *o = kt_peer();
	uint64_t nc2, o_nc2;
	struct bus1_cmd_call cmd;
	struct iovec v;
	struct b1_msg m;

	pair_init(&p);
	kt_node(p.c, o, &nc2, &o_nc2);
	/* two messages queued for the caller before its call */
	CHECK_OK(kt_send(o, o_nc2, "first", 5));
	CHECK_OK(kt_send(p.s, p.s_nc, "second", 6));
	call_init(&cmd, &p.c_ns, &v, "call", 10 * SEC);
	CHECK_OK(call_raw(p.c, &cmd));
	CHECK_EQ(cmd.status, BUS1_CALL_STATUS_SENT);
	CHECK_EQ(cmd.recv.type, BUS1_MSG_DATA);
	CHECK_EQ(cmd.recv.destination, nc2);
	CHECK_EQ(cmd.recv.n_bytes, 5);
	CHECK_OK(b1_peer_slice_release(p.c, cmd.recv.offset));
	/* the callee answers; the caller gets the rest in order, the reply last */
	expect_one(p.s, "call");
	CHECK_OK(kt_send(p.s, p.s_nc, "reply", 5));
	kt_recv(p.c, 0, &m);
	CHECK_EQ(m.n_bytes, 6);
	CHECK(!memcmp(m.data, "second", 6));
	CHECK_OK(b1_peer_msg_release(p.c, &m));
	expect_one(p.c, "reply");

	/* a notification queued first comes first too */
	b1_peer_free(o);
	call_init(&cmd, &p.c_ns, &v, "call2", 10 * SEC);
	CHECK_OK(call_raw(p.c, &cmd));
	CHECK_EQ(cmd.recv.type, BUS1_MSG_NODE_RELEASE);
	CHECK_EQ(cmd.recv.destination, nc2);
	expect_one(p.s, "call2");
	kt_recv_none(p.c);
	pair_free(&p);
}

static void test_call_send_fails(void)
{
	struct pair p;
	struct bus1_cmd_call cmd;
	struct iovec v;
	uint64_t bogus = 1000 << 2;
	double t0;

	pair_init(&p);
	/* a handle the caller does not hold */
	call_init(&cmd, &bogus, &v, "x", 20 * SEC);
	t0 = kt_now();
	CHECK_ERR(call_raw(p.c, &cmd), ENXIO);
	CHECK_EQ(cmd.status, 0);
	/* a message bigger than any pool */
	{
		struct bus1_cmd_peer_query q;
		struct iovec big;

		kt_query(p.c, &q);
		call_init(&cmd, &p.c_ns, &v, "x", 20 * SEC);
		big.iov_base = mmap(NULL, q.pool_size + 4096, PROT_READ,
				    MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
		CHECK(big.iov_base != MAP_FAILED);
		big.iov_len = q.pool_size + 4096;
		cmd.send.ptr_vecs = (uintptr_t)&big;
		CHECK_ERR(call_raw(p.c, &cmd), EMSGSIZE);
		CHECK_EQ(cmd.status, 0);
		munmap(big.iov_base, big.iov_len);
	}
	/* the node is destroyed */
	CHECK_OK(b1_peer_nodes_destroy(p.s, &p.ns, 1));
	call_init(&cmd, &p.c_ns, &v, "x", 20 * SEC);
	CHECK_ERR(call_raw(p.c, &cmd), EHOSTUNREACH);
	CHECK_EQ(cmd.status, 0);
	CHECK(kt_now() - t0 < 10);
	/* nothing was delivered: both have just the NODE_DESTROY */
	expect_notify(p.s, BUS1_MSG_NODE_DESTROY, p.ns);
	kt_recv_none(p.s);
	expect_notify(p.c, BUS1_MSG_NODE_DESTROY, p.c_ns);
	kt_recv_none(p.c);
	pair_free(&p);
}

static void test_call_bad_args(void)
{
	struct pair p;
	struct bus1_cmd_call cmd;
	struct iovec v;
	uint8_t *ro;

	pair_init(&p);
	call_init(&cmd, &p.c_ns, &v, "x", SEC);
	cmd.flags = 1;
	CHECK_ERR(call_raw(p.c, &cmd), EINVAL);
	/* one rule: a CALL refused with EINVAL leaves @status as it was */
	CHECK_EQ(cmd.status, 0xdead);
	call_init(&cmd, &p.c_ns, &v, "x", SEC);
	cmd.flags = 1ULL << 63;
	CHECK_ERR(call_raw(p.c, &cmd), EINVAL);
	CHECK_EQ(cmd.status, 0xdead);
	call_init(&cmd, &p.c_ns, &v, "x", SEC);
	cmd.recv.flags = 1ULL << 4;
	CHECK_ERR(call_raw(p.c, &cmd), EINVAL);
	CHECK_EQ(cmd.status, 0xdead);
	/* a RELEASE of no slice fails before the send */
	call_init(&cmd, &p.c_ns, &v, "x", SEC);
	cmd.recv.flags = BUS1_RECV_FLAG_RELEASE;
	cmd.recv.offset = 8;
	CHECK_ERR(call_raw(p.c, &cmd), ENXIO);
	CHECK_EQ(cmd.status, 0);
	cmd.recv.offset = UINT64_MAX;
	CHECK_ERR(call_raw(p.c, &cmd), ENXIO);
	call_init(&cmd, &p.c_ns, &v, "x", BUS1_CALL_TIMEOUT_MAX + 1);
	CHECK_ERR(call_raw(p.c, &cmd), EINVAL);
	CHECK_EQ(cmd.status, 0xdead);
	call_init(&cmd, &p.c_ns, &v, "x", UINT64_MAX);
	CHECK_ERR(call_raw(p.c, &cmd), EINVAL);
	/* SEND's own checks */
	call_init(&cmd, &p.c_ns, &v, "x", SEC);
	cmd.send.flags = 1ULL << 5;
	CHECK_ERR(call_raw(p.c, &cmd), EINVAL);
	call_init(&cmd, &p.c_ns, &v, "x", SEC);
	cmd.send.n_destinations = 0;
	CHECK_ERR(call_raw(p.c, &cmd), EINVAL);
	call_init(&cmd, &p.c_ns, &v, "x", SEC);
	cmd.send.ptr_vecs = 8;
	CHECK_ERR(call_raw(p.c, &cmd), EFAULT);
	CHECK_EQ(cmd.status, 0);
	/* a wrong size is another ioctl number */
	CHECK_ERR(ioctl(b1_peer_get_fd(p.c), _IOWR(BUS1_IOCTL_MAGIC, 0x22, struct bus1_cmd_send),
			&cmd), ENOTTY);
	CHECK_ERR(ioctl(b1_peer_get_fd(p.c), _IOWR(BUS1_IOCTL_MAGIC, 0x22, char[184]), &cmd),
		  ENOTTY);
	/* not readable, not writable: EFAULT before anything is sent */
	CHECK_ERR(ioctl(b1_peer_get_fd(p.c), BUS1_CMD_CALL, NULL), EFAULT);
	ro = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	CHECK(ro != MAP_FAILED);
	call_init((struct bus1_cmd_call *)ro, &p.c_ns, &v, "x", SEC);
	CHECK_OK(mprotect(ro, 4096, PROT_READ));
	CHECK_ERR(ioctl(b1_peer_get_fd(p.c), BUS1_CMD_CALL, ro), EFAULT);
	/* nothing above was sent */
	kt_recv_none(p.s);
	/* unaligned: accepted, as by every other command */
	CHECK_OK(mprotect(ro, 4096, PROT_READ | PROT_WRITE));
	CHECK_OK(kt_send(p.s, p.s_nc, "r", 1));
	{
		struct bus1_cmd_call *u = (struct bus1_cmd_call *)(ro + 3);

		call_init(&cmd, &p.c_ns, &v, "odd", BUS1_CALL_TIMEOUT_MAX);
		memcpy(u, &cmd, sizeof(cmd));
		CHECK_OK(ioctl(b1_peer_get_fd(p.c), BUS1_CMD_CALL, u));
		memcpy(&cmd, u, sizeof(cmd));
		CHECK_EQ(cmd.status, BUS1_CALL_STATUS_SENT);
		CHECK_EQ(cmd.recv.n_bytes, 1);
		CHECK_OK(b1_peer_slice_release(p.c, cmd.recv.offset));
	}
	expect_one(p.s, "odd");
	munmap(ro, 4096);
	kt_recv_none(p.c);
	pair_free(&p);
}

/* RECV with @flags; the command as the kernel wrote it back. */
static int recv_raw(struct b1_peer *p, uint64_t flags, uint64_t offset, struct bus1_cmd_recv *cmd)
{
	memset(cmd, 0, sizeof(*cmd));
	cmd->flags = flags;
	cmd->offset = offset;
	return ioctl(b1_peer_get_fd(p), BUS1_CMD_RECV, cmd) < 0 ? -errno : 0;
}

/*
 * RECV's RELEASE (the previous slice released in the same ioctl) and MORE
 * (another message queued behind the one received), in RECV and in CALL.
 */
static void test_recv_release_more(void)
{
	struct pair p;
	struct bus1_cmd_recv r1, r2, r3, r4;
	struct bus1_cmd_call cmd;
	struct iovec v;

	pair_init(&p);
	CHECK_OK(kt_send(p.s, p.s_nc, "one", 3));
	CHECK_OK(kt_send(p.s, p.s_nc, "two", 3));
	CHECK_OK(kt_send(p.s, p.s_nc, "three", 5));

	/* PEEK: MORE, nothing dequeued; MORE on input is ignored */
	CHECK_OK(recv_raw(p.c, BUS1_RECV_FLAG_PEEK | BUS1_RECV_FLAG_MORE, 0, &r1));
	CHECK_EQ(r1.n_bytes, 3);
	CHECK_EQ(r1.flags, BUS1_RECV_FLAG_PEEK | BUS1_RECV_FLAG_MORE);
	CHECK_OK(recv_raw(p.c, 0, 0, &r1));
	CHECK_EQ(r1.n_bytes, 3);
	CHECK_EQ(r1.flags, BUS1_RECV_FLAG_MORE);

	/* a RELEASE of no slice: ENXIO, and nothing is received */
	CHECK_ERR(recv_raw(p.c, BUS1_RECV_FLAG_RELEASE, r1.offset + 8, &r2), ENXIO);
	CHECK_ERR(recv_raw(p.c, BUS1_RECV_FLAG_RELEASE, UINT64_MAX, &r2), ENXIO);

	/* the previous slice goes with the next RECV */
	CHECK_OK(recv_raw(p.c, BUS1_RECV_FLAG_RELEASE, r1.offset, &r2));
	CHECK_EQ(r2.n_bytes, 3);
	CHECK_EQ(r2.flags, BUS1_RECV_FLAG_RELEASE | BUS1_RECV_FLAG_MORE);
	CHECK_ERR(b1_peer_slice_release(p.c, r1.offset), ENXIO);
	CHECK_OK(recv_raw(p.c, BUS1_RECV_FLAG_RELEASE, r2.offset, &r3));
	CHECK_EQ(r3.n_bytes, 5);
	/* the last one: no MORE */
	CHECK_EQ(r3.flags, BUS1_RECV_FLAG_RELEASE);
	CHECK_ERR(b1_peer_slice_release(p.c, r2.offset), ENXIO);
	/* an empty queue: EAGAIN, the slice released all the same */
	CHECK_ERR(recv_raw(p.c, BUS1_RECV_FLAG_RELEASE, r3.offset, &r4), EAGAIN);
	CHECK_ERR(b1_peer_slice_release(p.c, r3.offset), ENXIO);

	/* CALL: the caller's last slice released before the send */
	CHECK_OK(kt_send(p.s, p.s_nc, "four", 4));
	CHECK_OK(recv_raw(p.c, 0, 0, &r1));
	CHECK_EQ(r1.flags, 0);
	CHECK_OK(kt_send(p.s, p.s_nc, "reply", 5));
	CHECK_OK(kt_send(p.s, p.s_nc, "later", 5));
	call_init(&cmd, &p.c_ns, &v, "call", 10 * SEC);
	cmd.recv.flags = BUS1_RECV_FLAG_RELEASE;
	cmd.recv.offset = r1.offset;
	CHECK_OK(call_raw(p.c, &cmd));
	CHECK_EQ(cmd.status, BUS1_CALL_STATUS_SENT);
	CHECK_EQ(cmd.recv.n_bytes, 5);
	CHECK_EQ(cmd.recv.flags, BUS1_RECV_FLAG_RELEASE | BUS1_RECV_FLAG_MORE);
	CHECK_ERR(b1_peer_slice_release(p.c, r1.offset), ENXIO);
	expect_one(p.s, "call");
	/* libbus1: b1_peer_msg_release_later() and b1_peer_more_queued() */
	{
		struct b1_msg m = { .offset = cmd.recv.offset };
		uint64_t off = cmd.recv.offset;

		CHECK_OK(b1_peer_msg_release_later(p.c, &m));
		CHECK_EQ(m.offset, BUS1_OFFSET_INVALID);
		kt_recv(p.c, 0, &m);
		CHECK_EQ(m.n_bytes, 5);
		CHECK(!memcmp(m.data, "later", 5));
		CHECK(!b1_peer_more_queued(p.c));
		CHECK_ERR(b1_peer_slice_release(p.c, off), ENXIO);
		off = m.offset;
		CHECK_OK(b1_peer_msg_release_later(p.c, &m));
		CHECK_ERR(b1_peer_recv(p.c, 0, &m), EAGAIN);
		CHECK_ERR(b1_peer_slice_release(p.c, off), ENXIO);
	}
	/* a large slice does not wait: it is released at once */
	{
		static char big[70000];
		struct b1_msg m;

		CHECK_OK(kt_send(p.s, p.s_nc, big, sizeof(big)));
		kt_recv(p.c, 0, &m);
		CHECK_EQ(m.n_bytes, sizeof(big));
		r1.offset = m.offset;
		CHECK_OK(b1_peer_msg_release_later(p.c, &m));
		CHECK_ERR(b1_peer_slice_release(p.c, r1.offset), ENXIO);
	}
	kt_recv_none(p.c);
	pair_free(&p);
}

static void test_call_emfile(void)
{
	struct pair p;
	struct bus1_cmd_call cmd;
	struct iovec v;
	struct rlimit rl, low;
	int fd, sp[2];
	struct b1_msg m;

	pair_init(&p);
	/* the reply carries an fd; the caller has no free fd */
	CHECK_OK(socketpair(AF_UNIX, SOCK_STREAM, 0, sp));
	{
		struct iovec w = { .iov_base = "fd", .iov_len = 2 };

		CHECK_OK(b1_peer_send(p.s, 0, &p.s_nc, 1, NULL, &w, 1, NULL, 0, &sp[0], 1));
	}
	CHECK_OK(getrlimit(RLIMIT_NOFILE, &rl));
	fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	CHECK(fd >= 0);
	close(fd);
	low = rl;
	low.rlim_cur = fd;	/* the lowest free fd: none is free under this limit */
	CHECK_OK(setrlimit(RLIMIT_NOFILE, &low));
	call_init(&cmd, &p.c_ns, &v, "emfile", SEC);
	CHECK_ERR(call_raw(p.c, &cmd), EMFILE);
	CHECK_EQ(cmd.status, BUS1_CALL_STATUS_SENT);
	CHECK_OK(setrlimit(RLIMIT_NOFILE, &rl));
	expect_one(p.s, "emfile");
	/* the message stayed queued */
	kt_recv(p.c, 0, &m);
	CHECK_EQ(m.n_fds, 1);
	CHECK(m.fds[0] >= 0);
	b1_msg_close_fds(&m);
	CHECK_OK(b1_peer_msg_release(p.c, &m));
	kt_recv_none(p.c);
	close(sp[0]);
	close(sp[1]);
	pair_free(&p);
}

/* A second thread of the caller receives while CALLs wait: every reply is received once. */
struct grabber {
	struct b1_peer *c;
	volatile int stop;
	volatile long got;
	unsigned long spins;
};

static void *grab(void *arg)
{
	struct grabber *g = arg;
	struct pollfd pfd = { .fd = b1_peer_get_fd(g->c), .events = POLLIN };
	struct b1_msg m;
	int r;

	while (!g->stop) {
		r = b1_peer_recv(g->c, 0, &m);
		if (r == 0) {
			g->got++;
			b1_peer_msg_release(g->c, &m);
		} else if (r == -EAGAIN) {
			/* odd rounds asleep with the CALL, even ones spinning */
			if (g->spins++ % 2)
				poll(&pfd, 1, 100);
			else
				sched_yield();
		} else {
			CHECK_FAIL("RECV: %s", strerror(-r));
		}
	}
	return NULL;
}

static void *echo(void *arg)
{
	struct pair *p = arg;
	struct pollfd pfd = { .fd = b1_peer_get_fd(p->s), .events = POLLIN };
	struct b1_msg m;
	int r;

	for (;;) {
		r = b1_peer_recv(p->s, 0, &m);
		if (r == -EAGAIN) {
			poll(&pfd, 1, -1);
			continue;
		}
		if (r < 0 || m.type != BUS1_MSG_DATA)
			break;
		if (m.n_bytes == 4 && !memcmp(m.data, "stop", 4))
			break;
		b1_peer_msg_release(p->s, &m);
		/* the CALL (and maybe the other thread) waits for it */
		usleep(1000);
		if (kt_send(p->s, p->s_nc, "re", 2) < 0)
			break;
	}
	return NULL;
}

static void test_call_concurrent_recv(void)
{
	struct pair p;
	struct grabber g = { 0 };
	struct bus1_cmd_call cmd;
	struct iovec v;
	pthread_t tg, te;
	long n = 40, i, by_call = 0, timeouts = 0;
	int r;

	pair_init(&p);
	g.c = p.c;
	CHECK_OK(pthread_create(&te, NULL, echo, &p));
	CHECK_OK(pthread_create(&tg, NULL, grab, &g));
	for (i = 0; i < n; i++) {
		call_init(&cmd, &p.c_ns, &v, "ping", SEC / 4);
		r = call_raw(p.c, &cmd);
		CHECK_EQ(cmd.status, BUS1_CALL_STATUS_SENT);
		if (r == 0) {
			CHECK_EQ(cmd.recv.type, BUS1_MSG_DATA);
			CHECK_EQ(cmd.recv.n_bytes, 2);
			CHECK_OK(b1_peer_slice_release(p.c, cmd.recv.offset));
			by_call++;
		} else {
			CHECK_EQ(r, -ETIMEDOUT);
			timeouts++;
		}
	}
	CHECK_OK(kt_send(p.c, p.c_ns, "stop", 4));
	CHECK_OK(pthread_join(te, NULL));
	/* the last reply may still be on its way to the grabber */
	{
		double t0 = kt_now();

		while (by_call + g.got < n && kt_now() - t0 < 10)
			usleep(10000);
	}
	g.stop = 1;
	CHECK_OK(pthread_join(tg, NULL));
	kt_log("%ld replies by CALL, %ld by the other thread, %ld CALLs timed out", by_call,
	       g.got, timeouts);
	CHECK_EQ(by_call + g.got, n);
	kt_recv_none(p.c);
	pair_free(&p);
}

static const struct kt_case cases[] = {
	KT_CASE(test_call_reply),
	KT_CASE(test_call_timeout),
	KT_CASE(test_call_signal),
	KT_CASE(test_call_peer_dies),
	KT_CASE(test_call_self_disconnect),
	KT_CASE(test_call_queue_first),
	KT_CASE(test_call_send_fails),
	KT_CASE(test_call_bad_args),
	KT_CASE(test_call_emfile),
	KT_CASE(test_recv_release_more),
	KT_CASE_T(test_call_concurrent_recv, 120),
};

int main(int argc, char **argv)
{
	return kt_main(cases, sizeof(cases) / sizeof(cases[0]), argc, argv);
}
