/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * bench-roundtrip: unicast round trip (ping-pong between two processes) through bus1 versus
 * through an AF_UNIX socketpair, in the same run, alternating rounds, reporting medians and
 * the ratio. Run it in a guest: `meson compile -C BUILD kmod-bench` (see meson.build).
 *
 * bus1 side: SEND to the peer's node; the other side waits in poll(), RECV, SLICE_RELEASE,
 * and answers the same way (4 ioctls + 1 poll per hop). Socket side: write() and a blocking
 * read() per hop. The same round trip with BUS1_CMD_CALL: the caller's SEND + poll + RECV
 * become one CALL (2 syscalls per hop: CALL, SLICE_RELEASE), the callee unchanged; and with
 * the callee answering by CALL too (its reply and its wait for the next call in one).
 * Every variant runs in each round, interleaved; medians and ratios over the rounds.
 * Usage: bench-roundtrip [ITERATIONS [ROUNDS]]
 */

#include <poll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
#include "kmod-test.h"

static struct b1_peer *pa, *pb;
static uint64_t a_to_b, b_to_a;

static void bus1_hop_recv(struct b1_peer *p, size_t size)
{
	struct pollfd pfd = { .fd = b1_peer_get_fd(p), .events = POLLIN };
	struct b1_msg m;
	int r;

	for (;;) {
		r = b1_peer_recv(p, 0, &m);
		if (r == 0)
			break;
		if (r != -EAGAIN)
			CHECK_FAIL("RECV: %s", strerror(-r));
		if (poll(&pfd, 1, -1) < 0 && errno != EINTR)
			CHECK_FAIL("poll: %m");
	}
	if (m.n_bytes != size)
		CHECK_FAIL("got %zu bytes, want %zu", m.n_bytes, size);
	r = b1_peer_msg_release(p, &m);
	if (r < 0)
		CHECK_FAIL("SLICE_RELEASE: %s", strerror(-r));
}

/* One hop by CALL: send @size bytes to @dst, wait for and receive the next message. */
static void bus1_hop_call(struct b1_peer *p, uint64_t dst, const void *buf, size_t size)
{
	struct iovec v = { .iov_base = (void *)buf, .iov_len = size };
	struct b1_msg m;
	bool sent;
	int r;

	r = b1_peer_call(p, 0, &dst, 1, NULL, &v, 1, NULL, 0, NULL, 0, 0, 10ULL * 1000000000,
			 &m, &sent);
	if (r < 0)
		CHECK_FAIL("CALL: %s (%s)", strerror(-r), sent ? "sent" : "not sent");
	if (m.n_bytes != size)
		CHECK_FAIL("got %zu bytes, want %zu", m.n_bytes, size);
	r = b1_peer_msg_release(p, &m);
	if (r < 0)
		CHECK_FAIL("SLICE_RELEASE: %s", strerror(-r));
}

enum { MODE_SEND, MODE_CALL, MODE_CALL_BOTH };

/*
 * @mode MODE_SEND: both sides SEND + poll + RECV; MODE_CALL: the caller CALLs; MODE_CALL_BOTH:
 * the callee also answers by CALL, which receives the next call (its last answer is a SEND).
 */
static double run_bus1(long n, size_t size, int mode)
{
	static uint8_t buf[65536];
	double t0, t;
	pid_t pid;
	long i;
	int status;

	pid = fork();
	if (pid < 0)
		CHECK_FAIL("fork: %m");
	if (pid == 0) {
		bus1_hop_recv(pb, size);
		for (i = 0; i < n + 1; i++) {
			if (mode == MODE_CALL_BOTH && i < n) {
				bus1_hop_call(pb, b_to_a, buf, size);
				continue;
			}
			if (kt_send(pb, b_to_a, buf, size) < 0)
				_exit(1);
			if (i < n)
				bus1_hop_recv(pb, size);
		}
		_exit(0);
	}
	/* One warm-up round trip, not timed. */
	CHECK_OK(kt_send(pa, a_to_b, buf, size));
	bus1_hop_recv(pa, size);
	t0 = kt_now();
	for (i = 0; i < n; i++) {
		if (mode != MODE_SEND) {
			bus1_hop_call(pa, a_to_b, buf, size);
			continue;
		}
		CHECK_OK(kt_send(pa, a_to_b, buf, size));
		bus1_hop_recv(pa, size);
	}
	t = kt_now() - t0;
	CHECK_EQ(waitpid(pid, &status, 0), pid);
	CHECK_EQ(status, 0);
	return t / n * 1e6;
}

static void xfer(int fd, void *buf, size_t size, bool out)
{
	size_t done = 0;

	while (done < size) {
		ssize_t r = out ? write(fd, (uint8_t *)buf + done, size - done) :
				  read(fd, (uint8_t *)buf + done, size - done);

		if (r <= 0)
			CHECK_FAIL("%s: %m", out ? "write" : "read");
		done += r;
	}
}

static double run_socket(long n, size_t size)
{
	static uint8_t buf[65536];
	double t0, t;
	int sp[2], status;
	pid_t pid;
	long i;

	CHECK_OK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp));
	pid = fork();
	if (pid < 0)
		CHECK_FAIL("fork: %m");
	if (pid == 0) {
		close(sp[0]);
		for (i = 0; i < n + 1; i++) {
			xfer(sp[1], buf, size, false);
			xfer(sp[1], buf, size, true);
		}
		_exit(0);
	}
	close(sp[1]);
	xfer(sp[0], buf, size, true);
	xfer(sp[0], buf, size, false);
	t0 = kt_now();
	for (i = 0; i < n; i++) {
		xfer(sp[0], buf, size, true);
		xfer(sp[0], buf, size, false);
	}
	t = kt_now() - t0;
	CHECK_EQ(waitpid(pid, &status, 0), pid);
	CHECK_EQ(status, 0);
	close(sp[0]);
	return t / n * 1e6;
}

/*
 * Without a context switch: one process sends to its own node and receives, versus writes into
 * one end of a socketpair and reads from the other. This isolates the per-message cost of the
 * IPC itself from the scheduler (which dominates the round trip under TCG).
 */
static void same_process(long n, size_t size)
{
	static uint8_t buf[65536];
	struct b1_peer *p = kt_peer();
	uint64_t own;
	double t0, tb, tc, ts;
	int sp[2];
	long i;

	kt_node(p, p, &own, NULL);
	CHECK_OK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp));
	t0 = kt_now();
	for (i = 0; i < n; i++) {
		struct b1_msg m;

		CHECK_OK(kt_send(p, own, buf, size));
		CHECK_OK(b1_peer_recv(p, 0, &m));
		CHECK_OK(b1_peer_msg_release(p, &m));
	}
	tb = (kt_now() - t0) / n * 1e6;
	t0 = kt_now();
	for (i = 0; i < n; i++)
		bus1_hop_call(p, own, buf, size);
	tc = (kt_now() - t0) / n * 1e6;
	t0 = kt_now();
	for (i = 0; i < n; i++) {
		xfer(sp[0], buf, size, true);
		xfer(sp[1], buf, size, false);
	}
	ts = (kt_now() - t0) / n * 1e6;
	printf("one message, no context switch, %5zu bytes: bus1 SEND+RECV+SLICE_RELEASE %6.2f us, "
	       "CALL+SLICE_RELEASE %6.2f us (ratio %.2f), socketpair write+read %6.2f us, "
	       "ratio SEND/socketpair %.2f\n", size, tb, tc, tc / tb, ts, tb / ts);

	/* Where the bus1 time goes: each ioctl alone (batches below the message quota). */
	{
		enum { B = 2000 };
		static uint64_t offs[B];
		struct bus1_cmd_peer_query q;
		double t_send, t_recv, t_rel, t_query;

		t0 = kt_now();
		for (i = 0; i < B; i++)
			CHECK_OK(kt_send(p, own, buf, size));
		t_send = (kt_now() - t0) / B * 1e6;
		t0 = kt_now();
		for (i = 0; i < B; i++) {
			struct b1_msg m;

			CHECK_OK(b1_peer_recv(p, 0, &m));
			offs[i] = m.offset;
		}
		t_recv = (kt_now() - t0) / B * 1e6;
		t0 = kt_now();
		for (i = 0; i < B; i++)
			CHECK_OK(b1_peer_slice_release(p, offs[i]));
		t_rel = (kt_now() - t0) / B * 1e6;
		t0 = kt_now();
		for (i = 0; i < B; i++)
			CHECK_OK(b1_peer_query(p, &q));
		t_query = (kt_now() - t0) / B * 1e6;
		t0 = kt_now();
		for (i = 0; i < B; i++)
			getppid();
		printf("  per ioctl, %5zu bytes: SEND %6.2f us, RECV %6.2f us, SLICE_RELEASE %6.2f us, "
		       "PEER_QUERY %6.2f us, getppid() %6.2f us\n", size, t_send, t_recv, t_rel,
		       t_query, (kt_now() - t0) / B * 1e6);
	}
	close(sp[0]);
	close(sp[1]);
	b1_peer_free(p);
}

static int cmp_double(const void *x, const void *y)
{
	double a = *(const double *)x, b = *(const double *)y;

	return a < b ? -1 : a > b;
}

static void bench(void)
{
	static const size_t sizes[] = { 8, 4096 };
	long n = 2000;
	int rounds = 5, i;
	size_t k;
	const char *e;

	if ((e = getenv("KT_BENCH_N")))
		n = atol(e);
	if ((e = getenv("KT_BENCH_ROUNDS")))
		rounds = atoi(e);
	if (n < 1 || rounds < 1 || rounds > 64)
		CHECK_FAIL("bad KT_BENCH_N/KT_BENCH_ROUNDS");

	pa = kt_peer();
	pb = kt_peer();
	kt_node(pb, pa, NULL, &a_to_b);
	kt_node(pa, pb, NULL, &b_to_a);

	for (k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
		double tb[64], tc[64], tcc[64], ts[64], rc[64], rcc[64], mb, mc, mcc, ms;

		for (i = 0; i < rounds; i++) {
			/* rotate the order, so no variant always runs first */
			for (int j = 0; j < 4; j++) {
				switch ((i + j) % 4) {
				case 0: tb[i] = run_bus1(n, sizes[k], MODE_SEND); break;
				case 1: tc[i] = run_bus1(n, sizes[k], MODE_CALL); break;
				case 2: tcc[i] = run_bus1(n, sizes[k], MODE_CALL_BOTH); break;
				default: ts[i] = run_socket(n, sizes[k]); break;
				}
			}
			/* the CALL ratios paired per round */
			rc[i] = tc[i] / tb[i];
			rcc[i] = tcc[i] / tb[i];
			printf("  round %d, %5zu bytes: SEND+poll+RECV %7.2f us, CALL %7.2f us, "
			       "CALL both sides %7.2f us, socketpair %7.2f us\n",
			       i, sizes[k], tb[i], tc[i], tcc[i], ts[i]);
		}
		qsort(tb, rounds, sizeof(double), cmp_double);
		qsort(tc, rounds, sizeof(double), cmp_double);
		qsort(tcc, rounds, sizeof(double), cmp_double);
		qsort(ts, rounds, sizeof(double), cmp_double);
		qsort(rc, rounds, sizeof(double), cmp_double);
		qsort(rcc, rounds, sizeof(double), cmp_double);
		mb = tb[rounds / 2];
		mc = tc[rounds / 2];
		mcc = tcc[rounds / 2];
		ms = ts[rounds / 2];
		printf("round trip, %5zu bytes: bus1 %7.2f us, socketpair %7.2f us, "
		       "ratio bus1/socketpair %.2f (median of %d x %ld)\n",
		       sizes[k], mb, ms, mb / ms, rounds, n);
		printf("round trip, %5zu bytes: bus1 CALL %7.2f us (caller), %7.2f us (both sides) "
		       "vs SEND+poll+RECV %7.2f us: ratio CALL/SEND %.2f [%.2f..%.2f], both sides "
		       "%.2f [%.2f..%.2f] (paired per round, median [min..max] of %d); "
		       "CALL/socketpair %.2f\n",
		       sizes[k], mc, mcc, mb, rc[rounds / 2], rc[0], rc[rounds - 1],
		       rcc[rounds / 2], rcc[0], rcc[rounds - 1], rounds, mc / ms);
	}
	b1_peer_free(pa);
	b1_peer_free(pb);
	for (k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++)
		same_process(n * 5, sizes[k]);
}

static const struct kt_case cases[] = {
	KT_CASE_T(bench, 600),
};

int main(int argc, char **argv)
{
	return kt_main(cases, sizeof(cases) / sizeof(cases[0]), argc, argv);
}
