/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Node destruction: every holder (the owner included) gets exactly one NODE_DESTROY per node,
 * through the same queue and in order with data messages; an atomic multi-node destruction is
 * seen at the same point by every peer; a peer closing while others send to it (and with queued
 * messages carrying fds) fails the senders cleanly and returns every charge.
 */

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>
#include "kmod-test.h"

static void expect_destroy(struct b1_peer *p, uint64_t h)
{
	struct b1_msg m;

	kt_recv(p, 0, &m);
	CHECK_EQ(m.type, BUS1_MSG_NODE_DESTROY);
	CHECK_EQ(m.destination, h);
	CHECK_EQ(m.offset, BUS1_OFFSET_INVALID);
	CHECK_EQ(m.n_handles, 0);
	CHECK_EQ(m.n_fds, 0);
	CHECK_EQ(m.uid, (uint32_t)-1);
	CHECK_EQ(m.gid, (uint32_t)-1);
	CHECK_EQ(m.pid, 0);
	CHECK_EQ(m.tid, 0);
}

static void test_every_holder(void)
{
	enum { N = 5 };
	struct b1_peer *a = kt_peer(), *p[N];
	uint64_t na, h[N], d;
	uint32_t errs[1];
	int i;

	kt_node(a, a, &na, NULL);
	for (i = 0; i < N; i++) {
		uint64_t x = na;

		p[i] = kt_peer();
		CHECK_OK(b1_peer_handle_transfer(a, p[i], &x, &h[i]));
	}
	/* p[4] gets it a second time through a message from p[0]: still one handle, one notice. */
	{
		uint64_t n4, p0_n4, x = h[0];

		kt_node(p[4], p[0], &n4, &p0_n4);
		CHECK_OK(b1_peer_send(p[0], 0, &p0_n4, 1, NULL, NULL, 0, &x, 1, NULL, 0));
		{
			struct b1_msg m;

			kt_recv(p[4], 0, &m);
			CHECK_EQ(m.handles[0], h[4]);
			CHECK_OK(b1_peer_msg_release(p[4], &m));
		}
	}
	/* p[3] releases its handle first: it is no holder any more and hears nothing. */
	CHECK_OK(b1_peer_handle_release(p[3], h[3]));

	CHECK_OK(b1_peer_nodes_destroy(a, &na, 1));
	expect_destroy(a, na);
	kt_recv_none(a);
	for (i = 0; i < N; i++) {
		if (i != 3)
			expect_destroy(p[i], h[i]);
		kt_recv_none(p[i]);
	}
	for (i = 0; i < N; i++) {
		if (i == 3)
			continue;
		d = h[i];
		CHECK_ERR(b1_peer_send(p[i], 0, &d, 1, errs, NULL, 0, NULL, 0, NULL, 0),
			   EHOSTUNREACH);
		CHECK_EQ(errs[0], EHOSTUNREACH);
	}
	for (i = 0; i < N; i++)
		b1_peer_free(p[i]);
	b1_peer_free(a);
}

static void test_close_notifies(void)
{
	struct b1_peer *a = kt_peer(), *b = kt_peer(), *c = kt_peer();
	uint64_t n1, n2, b1, b2, c1, cn, x;
	struct b1_msg m;

	kt_node(a, b, &n1, &b1);
	kt_node(a, b, &n2, &b2);
	x = n2;
	CHECK_OK(b1_peer_handle_transfer(a, c, &x, &c1));
	/* c owns a node a holds: a's close releases that handle, c hears of it. */
	kt_node(c, a, &cn, NULL);
	b1_peer_free(a);
	{
		struct b1_msg m1, m2;

		kt_recv(b, 0, &m1);
		kt_recv(b, 0, &m2);
		CHECK_EQ(m1.type, BUS1_MSG_NODE_DESTROY);
		CHECK_EQ(m2.type, BUS1_MSG_NODE_DESTROY);
		/* Both, in some order, once each. */
		CHECK((m1.destination == b1 && m2.destination == b2) ||
		       (m1.destination == b2 && m2.destination == b1));
	}
	kt_recv_none(b);
	/* a destroys its nodes before it lets go of its handles */
	expect_destroy(c, c1);
	kt_recv(c, 0, &m);
	CHECK_EQ(m.type, BUS1_MSG_NODE_RELEASE);
	CHECK_EQ(m.destination, cn);
	kt_recv_none(c);
	b1_peer_free(b);
	b1_peer_free(c);
}

/* A notification is ordered with data: a's data before and after the destruction, as sent. */
static void test_order_with_data(void)
{
	struct b1_peer *a = kt_peer(), *b = kt_peer();
	uint64_t nb, a_nb, na, b_na;
	struct b1_msg m;

	kt_node(b, a, &nb, &a_nb);
	kt_node(a, b, &na, &b_na);
	CHECK_OK(kt_send(a, a_nb, "1", 1));
	CHECK_OK(b1_peer_nodes_destroy(a, &na, 1));
	CHECK_OK(kt_send(a, a_nb, "2", 1));
	kt_recv(b, 0, &m);
	CHECK_EQ(m.type, BUS1_MSG_DATA);
	CHECK_EQ(((const char *)m.data)[0], '1');
	CHECK_OK(b1_peer_msg_release(b, &m));
	expect_destroy(b, b_na);
	kt_recv(b, 0, &m);
	CHECK_EQ(m.type, BUS1_MSG_DATA);
	CHECK_EQ(((const char *)m.data)[0], '2');
	CHECK_OK(b1_peer_msg_release(b, &m));
	kt_recv_none(b);
	b1_peer_free(a);
	b1_peer_free(b);
}

/*
 * An atomic destruction of two nodes, while a third peer multicasts a numbered stream to both
 * holders: each holder sees the two notifications next to each other, after the same stream
 * message on both.
 */
static void test_atomic_destroy_point(void)
{
	struct b1_peer *a = kt_peer(), *b = kt_peer(), *c = kt_peer(), *s = kt_peer();
	uint64_t n[2], hb[2], hc[2], sb, sc, x;
	int i, status, pos[2], pp[2];
	pid_t pid;
	char ch;

	for (i = 0; i < 2; i++) {
		kt_node(a, b, &n[i], &hb[i]);
		x = n[i];
		CHECK_OK(b1_peer_handle_transfer(a, c, &x, &hc[i]));
	}
	kt_node(b, s, NULL, &sb);
	kt_node(c, s, NULL, &sc);
	CHECK_OK(pipe(pp));
	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		uint64_t dst[2] = { sb, sc };
		uint32_t k;

		for (k = 0; k < 400; k++) {
			struct iovec v = { &k, sizeof(k) };

			if (b1_peer_send(s, 0, dst, 2, NULL, &v, 1, NULL, 0, NULL, 0) < 0)
				_exit(1);
			/* Halfway: let the parent destroy while we go on. */
			if (k == 100 && write(pp[1], "x", 1) != 1)
				_exit(2);
			if (k % 8 == 0)
				sched_yield();
		}
		_exit(0);
	}
	CHECK_EQ(read(pp[0], &ch, 1), 1);
	CHECK_OK(b1_peer_nodes_destroy(a, n, 2));
	CHECK_EQ(waitpid(pid, &status, 0), pid);
	CHECK_EQ(status, 0);

	for (i = 0; i < 2; i++) {
		struct b1_peer *p = i ? c : b;
		uint64_t *h = i ? hc : hb;
		struct b1_msg m;
		int32_t last = -1, seen = 0, at = -2;

		while (b1_peer_recv(p, 0, &m) == 0) {
			if (m.type == BUS1_MSG_NODE_DESTROY) {
				CHECK(m.destination == h[0] || m.destination == h[1]);
				if (seen == 0)
					at = last;
				else
					CHECK_EQ(at, last);	/* adjacent */
				++seen;
			} else {
				uint32_t k;

				CHECK_EQ(m.n_bytes, sizeof(k));
				memcpy(&k, m.data, sizeof(k));
				CHECK_EQ((int32_t)k, last + 1);
				last = k;
				CHECK_OK(b1_peer_msg_release(p, &m));
			}
		}
		CHECK_EQ(seen, 2);
		CHECK_EQ(last, 399);
		pos[i] = at;
	}
	kt_log("destruction seen after stream message %d on b, %d on c", pos[0], pos[1]);
	CHECK_EQ(pos[0], pos[1]);
	close(pp[0]);
	close(pp[1]);
	b1_peer_free(a);
	b1_peer_free(b);
	b1_peer_free(c);
	b1_peer_free(s);
}

/*
 * Several processes (and threads) send to one peer as fast as they can while it closes. Every
 * SEND succeeds until the close and fails with EHOSTUNREACH after it; no other error, no hang.
 * Queued messages carry fds and handles: the close drops them (pipe EOF) and returns every
 * charge.
 */
static void test_close_while_sending(void)
{
	enum { SENDERS = 4 };
	struct b1_peer *x = kt_peer(), *s[SENDERS], *q = kt_peer();
	struct bus1_cmd_peer_query qq;
	uint64_t nx[SENDERS], h[SENDERS];
	_Atomic int *shared;
	pid_t pid[SENDERS];
	int i, status, p[2];
	char c;

	shared = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	CHECK(shared != MAP_FAILED);
	CHECK_OK(pipe2(p, O_NONBLOCK));
	for (i = 0; i < SENDERS; i++) {
		s[i] = kt_peer();
		kt_node(x, s[i], &nx[i], &h[i]);
	}
	for (i = 0; i < SENDERS; i++) {
		pid[i] = fork();
		CHECK(pid[i] >= 0);
		if (pid[i] == 0) {
			long ok = 0, other = 0;
			int r, j, fd = p[1];

			/* Only the parent may hold x open: its close must be the last one. */
			b1_peer_free(x);
			b1_peer_free(q);
			for (j = 0; j < SENDERS; j++)
				if (j != i)
					b1_peer_free(s[j]);

			for (;;) {
				uint64_t hh = BUS1_HANDLE_CREATE;

				r = b1_peer_send(s[i], 0, &h[i], 1, NULL,
						 &(struct iovec){ "abcdefgh", 8 }, 1,
						 &hh, ok % 3 == 0 ? 1 : 0, &fd, ok % 2);
				if (r == 0) {
					++ok;
					atomic_fetch_add(&shared[0], 1);
				} else if (r == -EHOSTUNREACH) {
					break;
				} else if (r == -EDQUOT || r == -ENOSPC) {
					sched_yield();
				} else {
					++other;
					fprintf(stderr, "sender %d: unexpected %s\n", i, strerror(-r));
					break;
				}
			}
			_exit(other ? 1 : 0);
		}
	}
	close(p[1]);
	/* Let them queue a good number, then close with everything still queued. */
	for (i = 0; i < 500 && atomic_load(&shared[0]) < 2000; i++)
		usleep(10000);
	CHECK(atomic_load(&shared[0]) > 0);
	b1_peer_free(x);
	for (i = 0; i < SENDERS; i++) {
		CHECK_EQ(waitpid(pid[i], &status, 0), pid[i]);
		CHECK_EQ(status, 0);
	}
	kt_log("%d messages queued before the close", atomic_load(&shared[0]));
	/*
	 * Every sender was told about its handle. The nodes it created and sent
	 * are released as their messages are dropped; a message dropped by a
	 * SEND that raced with the close tells its owner before the
	 * destruction of x's node may reach it, so NODE_RELEASE can come first.
	 */
	for (i = 0; i < SENDERS; i++) {
		struct b1_msg m;

		do
			kt_recv(s[i], 0, &m);
		while (m.type == BUS1_MSG_NODE_RELEASE);
		CHECK_EQ(m.type, BUS1_MSG_NODE_DESTROY);
		CHECK_EQ(m.destination, h[i]);
	}
	/* The queued fds are gone (only the senders' copies existed; they have exited). */
	CHECK_EQ(read(p[0], &c, 1), 0);
	/* Every charge is back. */
	kt_query(q, &qq);
	CHECK_EQ(qq.used_messages, 0);
	CHECK_EQ(qq.used_bytes, 0);
	CHECK_EQ(qq.used_handles, 0);
	CHECK_EQ(qq.used_fds, 0);
	for (i = 0; i < SENDERS; i++)
		b1_peer_free(s[i]);
	b1_peer_free(q);
	close(p[0]);
}

/* The same with threads of one process sharing one sender peer, and a PEER_DISCONNECT. */
struct th_arg {
	struct b1_peer *s;
	uint64_t h;
	int result;
	_Atomic long *count;
};

#include <pthread.h>

static void *sender_thread(void *p)
{
	struct th_arg *arg = p;
	int r;

	for (;;) {
		r = kt_send(arg->s, arg->h, "t", 1);
		if (r == 0) {
			atomic_fetch_add(arg->count, 1);
			continue;
		}
		if (r == -EDQUOT || r == -ENOSPC) {
			sched_yield();
			continue;
		}
		arg->result = r;
		return NULL;
	}
}

static void test_disconnect_while_sending_threads(void)
{
	enum { T = 3 };
	struct b1_peer *x = kt_peer(), *s = kt_peer();
	struct th_arg arg[T];
	_Atomic long count = 0;
	pthread_t th[T];
	uint64_t nx, h;
	int i;

	kt_node(x, s, &nx, &h);
	for (i = 0; i < T; i++) {
		arg[i] = (struct th_arg){ .s = s, .h = h, .count = &count };
		CHECK_EQ(pthread_create(&th[i], NULL, sender_thread, &arg[i]), 0);
	}
	for (i = 0; i < 500 && atomic_load(&count) < 1000; i++)
		usleep(10000);
	CHECK_OK(b1_peer_disconnect(x));
	for (i = 0; i < T; i++) {
		pthread_join(th[i], NULL);
		CHECK_EQ(arg[i].result, -EHOSTUNREACH);
	}
	b1_peer_free(x);
	b1_peer_free(s);
}

/*
 * A destruction racing with a sender: the owner never receives data on the node after its
 * NODE_DESTROY (later-ordered messages are discarded), and the sender, once it has received its
 * own NODE_DESTROY, can no longer send to the node (EHOSTUNREACH). Repeated with varying timing.
 */
static void test_destroy_races_send(void)
{
	int round;

	for (round = 0; round < 20; round++) {
		struct b1_peer *o = kt_peer(), *snd = kt_peer();
		uint64_t n, h;
		struct b1_msg m;
		bool destroyed = false;
		long data_after = 0, data_before = 0;
		int status, pp[2];
		pid_t pid;
		char ch;

		kt_node(o, snd, &n, &h);
		CHECK_OK(pipe(pp));
		pid = fork();
		CHECK(pid >= 0);
		if (pid == 0) {
			struct b1_msg sm;
			bool seen = false;
			long k;
			int r;

			b1_peer_free(o);
			if (write(pp[1], "g", 1) != 1)
				_exit(1);
			for (k = 0; k < 100000; k++) {
				r = kt_send(snd, h, &k, sizeof(k));
				if (seen && r != -EHOSTUNREACH)
					_exit(2);	/* sent after seeing the destruction */
				if (r == -EHOSTUNREACH) {
					if (!seen && b1_peer_recv(snd, 0, &sm) == 0)
						seen = sm.type == BUS1_MSG_NODE_DESTROY;
					if (seen)
						_exit(0);
					continue;
				}
				if (r < 0 && r != -EDQUOT)
					_exit(3);
				if (b1_peer_recv(snd, 0, &sm) == 0) {
					if (sm.type != BUS1_MSG_NODE_DESTROY)
						_exit(4);
					seen = true;
				}
			}
			_exit(5);
		}
		CHECK_EQ(read(pp[0], &ch, 1), 1);
		usleep(1000 * (kt_rand() % 20));
		CHECK_OK(b1_peer_nodes_destroy(o, &n, 1));
		CHECK_EQ(waitpid(pid, &status, 0), pid);
		if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
			CHECK_FAIL("round %d: sender failed: status 0x%x", round, status);
		while (b1_peer_recv(o, 0, &m) == 0) {
			if (m.type == BUS1_MSG_NODE_DESTROY) {
				CHECK_EQ(m.destination, n);
				CHECK(!destroyed);
				destroyed = true;
				continue;
			}
			CHECK_EQ(m.destination, n);
			if (destroyed)
				++data_after;
			else
				++data_before;
			CHECK_OK(b1_peer_msg_release(o, &m));
		}
		CHECK(destroyed);
		if (data_after)
			CHECK_FAIL("round %d: %ld messages after the node's destruction (%ld before)",
				round, data_after, data_before);
		close(pp[0]);
		close(pp[1]);
		b1_peer_free(o);
		b1_peer_free(snd);
	}
}

static const struct kt_case cases[] = {
	KT_CASE(test_every_holder),
	KT_CASE(test_close_notifies),
	KT_CASE(test_order_with_data),
	KT_CASE(test_atomic_destroy_point),
	KT_CASE(test_close_while_sending),
	KT_CASE(test_disconnect_while_sending_threads),
	KT_CASE(test_destroy_races_send),
};

int main(int argc, char **argv)
{
	return kt_main(cases, sizeof(cases) / sizeof(cases[0]), argc, argv);
}
