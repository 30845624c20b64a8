/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * test-hostile: cycles and the collector: garbage that references itself through unix
 * sockets is collected (cycle_*, unix_socket_pass), and the collector stalls, starves and
 * slows down no other user (gc_stall, gc_starve, gc_unix_latency).
 */

#include "hostile.h"

/* ------------------------------------------------------------------------------------------ */
/*
 * 1. Cycles through unix sockets. bus1 refuses bus1 fds in messages, but a unix socket is
 * accepted, and a unix socket may hold a bus1 fd in its receive queue. A peer can so hold
 * itself: P's queue -> message -> socket S -> S's queue -> P's file. The unix garbage collector
 * only knows about sockets in flight over unix sockets, not in bus1 queues, so after the user
 * is gone nothing frees P (its pool, its queue, its module reference) unless bus1 collects it.
 */

enum { CYCLE_DATA = 4 * MiB };

/* A peer with a node of its own, and CYCLE_DATA received into its pool (pool pages exist). */
static struct hpeer cycle_peer(uint64_t *node)
{
	struct hpeer p = hp_open();
	struct bus1_cmd_recv c;
	uint8_t *buf;
	int r;

	*node = hp_node(&p, &p, NULL);
	buf = malloc(CYCLE_DATA);
	CHECK(buf);
	memset(buf, 0x5a, CYCLE_DATA);
	r = hp_send1(p.fd, *node, buf, CYCLE_DATA, -1);
	if (r < 0)
		CHECK_FAIL("SEND of %d bytes to the own node: %s", CYCLE_DATA, strerror(-r));
	free(buf);
	hp_recv_wait(&p, &c, 1000);
	CHECK_EQ(c.n_bytes, CYCLE_DATA);
	/* the slice is kept: its pages stay in the pool until the peer goes */
	return p;
}

/* P -> S -> P: P's fd in S's receive queue, S in a message on P's own node. */
static void build_self(void)
{
	uint64_t n;
	struct hpeer p = cycle_peer(&n);
	int s[2], r;

	CHECK_OK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, s));
	send_fd(s[1], p.fd);
	r = hp_send1(p.fd, n, "S", 1, s[0]);
	if (r < 0)
		CHECK_FAIL("SEND carrying a unix socket: %s", strerror(-r));
}

/* P1 -> S -> P2 -> T -> P1. */
static void build_pair(void)
{
	uint64_t n1, n2;
	struct hpeer p1 = cycle_peer(&n1), p2 = cycle_peer(&n2);
	int s[2], t[2], r;

	CHECK_OK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, s));
	CHECK_OK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, t));
	send_fd(s[1], p2.fd);
	send_fd(t[1], p1.fd);
	r = hp_send1(p1.fd, n1, "S", 1, s[0]);
	if (r < 0)
		CHECK_FAIL("SEND carrying a unix socket to P1: %s", strerror(-r));
	r = hp_send1(p2.fd, n2, "T", 1, t[0]);
	if (r < 0)
		CHECK_FAIL("SEND carrying a unix socket to P2: %s", strerror(-r));
}

/* P -> listening L -> L's unaccepted connection -> P. */
static void build_listen(void)
{
	struct sockaddr_un addr = { .sun_family = AF_UNIX };
	uint64_t n;
	struct hpeer p = cycle_peer(&n);
	socklen_t len;
	int l, c, r;

	/* abstract address */
	snprintf(addr.sun_path + 1, sizeof(addr.sun_path) - 1, "bus1-hostile-%d", (int)getpid());
	len = offsetof(struct sockaddr_un, sun_path) + 1 + strlen(addr.sun_path + 1);
	l = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	c = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	CHECK(l >= 0 && c >= 0);
	CHECK_OK(bind(l, (struct sockaddr *)&addr, len));
	CHECK_OK(listen(l, 4));
	CHECK_OK(connect(c, (struct sockaddr *)&addr, len));
	send_fd(c, p.fd);
	r = hp_send1(p.fd, n, "L", 1, l);
	if (r < 0)
		CHECK_FAIL("SEND carrying a listening unix socket: %s", strerror(-r));
}

/*
 * Let an unprivileged child build a cycle and exit, then wait up to 30 s for the module's
 * refcount and Shmem to come back. @n_pools pools of CYCLE_DATA each were filled.
 */
static void cycle_run(void (*build)(void), int n_pools)
{
	long long rc0, rc1, rc = 0, sh0, sh1, sh = 0, sh_child = 0;
	double t0, t = 0;
	bool back = false;
	int p[2], status;
	pid_t pid;

	rc0 = refcnt();
	sh0 = kt_meminfo_kb("Shmem");
	CHECK_OK(pipe2(p, O_CLOEXEC));
	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		long long v;

		close(p[0]);
		kt_become(UID_A);
		build();
		v = kt_meminfo_kb("Shmem");
		if (write(p[1], &v, sizeof(v)) != sizeof(v))
			_exit(2);
		/* exit with everything still open: the kernel closes it */
		_exit(0);
	}
	close(p[1]);
	if (read(p[0], &sh_child, sizeof(sh_child)) != sizeof(sh_child))
		sh_child = -1;
	close(p[0]);
	CHECK_EQ(waitpid(pid, &status, 0), pid);
	if (!WIFEXITED(status) || WEXITSTATUS(status))
		CHECK_FAIL("the child building the cycle failed");

	t0 = kt_now();
	rc1 = refcnt();
	sh1 = kt_meminfo_kb("Shmem");
	while (kt_now() - t0 < 30 * kt_time_factor()) {
		rc = refcnt();
		sh = kt_meminfo_kb("Shmem");
		t = kt_now() - t0;
		if (rc <= rc0 && sh - sh0 < CYCLE_DATA / 1024 / 4) {
			back = true;
			break;
		}
		usleep(100 * 1000);
	}
	REPORT("refcnt before %lld, at the child's exit %lld, after %.1f s %lld", rc0, rc1, t, rc);
	REPORT("Shmem before %lld kB, in the child %lld kB, at its exit %lld kB, after %.1f s %lld kB",
	       sh0, sh_child, sh1, t, sh);
	REPORT("%s after %.2f s", back ? "collected" : "NOT collected", t);
	/* the measurement means something only if the pools really had pages */
	CHECK(sh_child - sh0 >= (long long)n_pools * CYCLE_DATA / 1024 * 3 / 4,
	      "the pools held no shmem in the child (%lld kB over the baseline)", sh_child - sh0);
	CHECK(rc <= rc0, "refcnt did not return to %lld within 30 s: %lld", rc0, rc);
	CHECK(sh - sh0 < CYCLE_DATA / 1024 / 4,
	      "Shmem did not return to its baseline within 30 s: %lld kB over it", sh - sh0);
}

void cycle_leak(void)
{
	cycle_run(build_self, 1);
}

void cycle_pair(void)
{
	cycle_run(build_pair, 2);
}

void cycle_listen(void)
{
	cycle_run(build_listen, 1);
}

/*
 * The construction of cycle_leak, still reachable: nothing may be collected. (a) P and S2 stay
 * open (S is closed): RECV on P gives S back, recvmsg on S gives P's fd back, which is P.
 * (b) only S stays open (P and S2 are closed): recvmsg on S gives P back, RECV on it gives S.
 */
static void alive_keep_peer(void *arg, struct result *res)
{
	struct bus1_cmd_recv c;
	uint64_t n;
	struct hpeer p = cycle_peer(&n);
	int s[2], s1, p1, r;
	char byte;

	CHECK_OK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, s));
	send_fd(s[1], p.fd);
	CHECK_OK(hp_send1(p.fd, n, "S", 1, s[0]));
	close(s[0]);
	sleep(10);

	r = hp_recv(p.fd, 0, &c);
	if (r < 0)
		CHECK_FAIL("RECV after 10 s: %s (the message was collected?)", strerror(-r));
	CHECK_EQ(c.type, BUS1_MSG_DATA);
	CHECK_EQ(c.n_fds, 1);
	s1 = hp_fds(&p, &c)[0];
	CHECK(s1 >= 0);
	p1 = recv_fd(s1, MSG_DONTWAIT);
	if (p1 < 0)
		CHECK_FAIL("recvmsg on the socket from the message: no fd (P's fd was dropped)");
	/* P's fd is P: send through it, receive on P */
	CHECK_OK(hp_send1(p1, n, "again", 5, -1));
	hp_recv_wait(&p, &c, 1000);
	CHECK_EQ(c.n_bytes, 5);
	CHECK(!memcmp(hp_data(&p, &c), "again", 5));
	/* and the socket is still connected to S2 */
	CHECK_EQ(write(s[1], "x", 1), 1);
	CHECK_EQ(read(s1, &byte, 1), 1);
	CHECK_EQ(byte, 'x');
	res->r = 0;
}

static void alive_keep_socket(void *arg, struct result *res)
{
	struct bus1_cmd_recv c;
	struct stat st0, st1;
	struct hpeer p1;
	uint64_t n;
	struct hpeer p = cycle_peer(&n);
	int s[2], pfd, s1, r;

	CHECK_OK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, s));
	send_fd(s[1], p.fd);
	CHECK_OK(hp_send1(p.fd, n, "S", 1, s[0]));
	hp_close(&p);
	close(s[1]);
	sleep(10);

	pfd = recv_fd(s[0], MSG_DONTWAIT);
	if (pfd < 0)
		CHECK_FAIL("recvmsg on S after 10 s: no fd (P's fd was dropped)");
	p1 = hp_from_fd(pfd);
	r = hp_recv(p1.fd, 0, &c);
	if (r < 0)
		CHECK_FAIL("RECV on P after 10 s: %s (P was collected?)", strerror(-r));
	CHECK_EQ(c.type, BUS1_MSG_DATA);
	CHECK_EQ(c.n_fds, 1);
	s1 = hp_fds(&p1, &c)[0];
	CHECK(s1 >= 0);
	CHECK_OK(fstat(s[0], &st0));
	CHECK_OK(fstat(s1, &st1));
	/* the same socket came back */
	CHECK_EQ(st0.st_ino, st1.st_ino);
	res->r = 0;
}

void cycle_alive(void)
{
	long long rc0 = refcnt(), rc_mid[2];
	struct job a, b;
	int i;

	a = job_start(UID_A, alive_keep_peer, NULL);
	b = job_start(UID_B, alive_keep_socket, NULL);
	for (i = 0; i < 2; i++) {
		sleep(i ? 4 : 5);
		/* both peers still exist (each holds a module reference through its file) */
		rc_mid[i] = refcnt();
	}
	if (!job_wait(&a, 30 * 1000) || !job_wait(&b, 30 * 1000))
		CHECK_FAIL("a child did not finish within 30 s of its 10 s wait");
	REPORT("refcnt before %lld, at 5 s %lld, at 9 s %lld, after %lld", rc0, rc_mid[0],
	       rc_mid[1], refcnt());
	REPORT("after 10 s: kept P and S2: RECV gave S back, recvmsg on it gave P back (which works); kept only S: recvmsg gave P back, RECV on it gave S back");
	CHECK(rc_mid[0] >= rc0 + 2 && rc_mid[1] >= rc0 + 2,
	      "a reachable peer lost its file: refcnt %lld, %lld (expected >= %lld)", rc_mid[0],
	      rc_mid[1], rc0 + 2);
	CHECK(refcnt() <= rc0, "refcnt %lld after everything was closed (before: %lld)",
	      refcnt(), rc0);
}

/* A unix socket passed through bus1 to another user's peer works on both ends (portals). */
static struct hpeer usp_a, usp_b;
static uint64_t usp_b_node, usp_a_to_b;
static int usp_s[2];

static void usp_sender(void *arg, struct result *res)
{
	char buf[8];
	int devnull, fd;
	double t0 = kt_now();

	CHECK_OK(hp_send1(usp_a.fd, usp_a_to_b, "sock", 4, usp_s[0]));
	close(usp_s[0]);
	/* the receiver writes to it; we answer with an fd */
	CHECK_EQ(read(usp_s[1], buf, 4), 4);
	CHECK(!memcmp(buf, "ping", 4));
	devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
	CHECK(devnull >= 0);
	send_fd(usp_s[1], devnull);
	fd = recv_fd(usp_s[1], 0);
	CHECK(fd >= 0);
	res->r = 0;
	res->t = kt_now() - t0;
}

static void usp_receiver(void *arg, struct result *res)
{
	struct bus1_cmd_recv c;
	struct stat st;
	int s, fd;

	hp_recv_wait(&usp_b, &c, 5000);
	CHECK_EQ(c.n_fds, 1);
	s = hp_fds(&usp_b, &c)[0];
	CHECK(s >= 0);
	CHECK_EQ(write(s, "ping", 4), 4);
	fd = recv_fd(s, 0);
	CHECK(fd >= 0);
	CHECK_OK(fstat(fd, &st));
	CHECK(S_ISCHR(st.st_mode));
	/* and our fd goes back the other way */
	send_fd(s, fd);
	res->r = 0;
}

void unix_socket_pass(void)
{
	long long rc0 = refcnt();
	struct job a, b;

	usp_a = hp_open_as(UID_A);
	usp_b = hp_open_as(UID_B);
	usp_b_node = hp_node(&usp_b, &usp_a, &usp_a_to_b);
	CHECK_OK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, usp_s));
	b = job_start(UID_B, usp_receiver, NULL);
	a = job_start(UID_A, usp_sender, NULL);
	if (!job_wait(&a, 10000) || !job_wait(&b, 10000))
		CHECK_FAIL("the socket passed through bus1 did not carry data and fds within 10 s");
	hp_close(&usp_a);
	hp_close(&usp_b);
	close(usp_s[0]);
	close(usp_s[1]);
	REPORT("socket passed from uid %d to uid %d: data and fds both ways in %.1f ms", UID_A,
	       UID_B, a.res.t * 1000);
	CHECK(refcnt() <= rc0, "refcnt %lld after closing (before: %lld)", refcnt(), rc0);
}

/* ------------------------------------------------------------------------------------------ */
/*
 * 9. The collector as a global stall. An attacker (UID_A) builds GS_GRAPH live structures
 * the collector must walk (a peer whose queue holds a unix socket on which that peer's own fd
 * is queued; the attacker keeps the peer's fd, so nothing is garbage) and then opens and
 * closes a bus1 fd every 20 ms, which asks for a pass each time. Meanwhile a bystander
 * (UID_B) does SEND+RECV round trips of 8 bytes on its own peer, and a second one (UID_B too)
 * the same with a unix socket in every message. Each round trip is timed and its voluntary
 * context switches counted (one means it slept in the kernel). The first bystander must
 * never wait for the collector; the second one may, and its figures are reported.
 */

enum { GS_GRAPH = 4000, GS_SECONDS = 5, GS_MAX_RT = 1 << 20 };
static int gs_graph = GS_GRAPH;

struct gs_stats {
	size_t n, slept;
	double p50, worst;
};

/* Round trips on a peer of our own for GS_SECONDS; with @carry, each carries a unix socket. */
static void gs_bystander(void *arg, struct result *res)
{
	bool carry = arg != NULL;
	struct hpeer p = hp_open();
	struct rusage ru0, ru1;
	struct bus1_cmd_recv c;
	double *lat, t0, end;
	uint64_t n;
	size_t k = 0, slept = 0;
	int s[2] = { -1, -1 };

	lat = calloc(GS_MAX_RT, sizeof(*lat));
	CHECK(lat);
	n = hp_node(&p, &p, NULL);
	if (carry)
		CHECK_OK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, s));
	end = kt_now() + GS_SECONDS;
	while (k < GS_MAX_RT && kt_now() < end) {
		getrusage(RUSAGE_THREAD, &ru0);
		t0 = kt_now();
		CHECK_OK(hp_send1(p.fd, n, "8 bytes", 8, s[0]));
		CHECK_OK(hp_recv(p.fd, 0, &c));
		lat[k++] = kt_now() - t0;
		getrusage(RUSAGE_THREAD, &ru1);
		slept += ru1.ru_nvcsw != ru0.ru_nvcsw;
		if (carry)
			close(hp_fds(&p, &c)[0]);
		CHECK_OK(hp_slice_release(p.fd, c.offset));
	}
	qsort(lat, k, sizeof(*lat), cmp_double);
	res->v[0] = k;
	res->v[1] = slept;
	res->v[2] = (uint64_t)(lat[k / 2] * 1e6);
	res->v[3] = (uint64_t)(lat[k - 1] * 1e6);
	free(lat);
	if (carry) {
		close(s[0]);
		close(s[1]);
	}
	hp_close(&p);
}

/* Build the graph, say so on a pipe, then kick the collector until another one closes. */
static void gs_attacker(void *arg, struct result *res)
{
	int *ready = arg, i, s[2], k = 0;
	struct hpeer p;
	struct pollfd pfd;
	uint64_t n;

	/* ours: [1] to say ready, [2] to see the end; the other ends are the parent's */
	close(ready[0]);
	close(ready[3]);
	for (i = 0; i < gs_graph; i++) {
		p.fd = kt_open_peer();
		p.pool = NULL;
		n = hp_node(&p, &p, NULL);
		CHECK_OK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, s));
		send_fd(s[0], p.fd);
		CHECK_OK(hp_send1(p.fd, n, "x", 1, s[1]));
		close(s[0]);
		close(s[1]);
	}
	CHECK_EQ(write(ready[1], "R", 1), 1);
	pfd = (struct pollfd){ .fd = ready[2], .events = POLLIN };
	while (poll(&pfd, 1, 20) == 0) {
		close(kt_open_peer());
		k++;
	}
	res->v[0] = k;
	res->r = 0;
}

static struct gs_stats gs_stats(const struct job *j)
{
	return (struct gs_stats){ .n = j->res.v[0], .slept = j->res.v[1],
				  .p50 = j->res.v[2] / 1000.0, .worst = j->res.v[3] / 1000.0 };
}

static void gs_report(const char *who, const struct gs_stats *st)
{
	REPORT("%s: %zu round trips, p50 %.3f ms, worst %.1f ms, %zu slept in the kernel", who,
	       st->n, st->p50, st->worst, st->slept);
}

/*
 * Wait until the refcount of the bus1 module is back at @rc0 (the attacker, who exited, left
 * only garbage), 60 s times the factor at most.
 */
static void attacker_collected(long long rc0)
{
	double t0 = kt_now();

	while (refcnt() > rc0 && kt_now() < t0 + 60 * kt_time_factor())
		usleep(100 * 1000);
	REPORT("the attacker's garbage collected %.1f s after it exited", kt_now() - t0);
	CHECK(refcnt() <= rc0, "refcnt %lld %.0f s after the attacker exited (before: %lld)",
	      refcnt(), kt_now() - t0, rc0);
}

/*
 * Start @fn as UID_A with room for @n_fds open or in-flight fds (RLIMIT_NOFILE, which counts
 * fds in flight on unix sockets too), and wait until it says on pipes[1] that its graph is
 * built. pipes[2..3] stay for telling it to stop: closing pipes[3] does.
 */
static struct job attacker_start(void (*fn)(void *, struct result *), rlim_t n_fds, int pipes[4])
{
	struct rlimit rl0, rl;
	struct job a;
	char x;

	CHECK_OK(getrlimit(RLIMIT_NOFILE, &rl0));
	rl.rlim_cur = rl.rlim_max = n_fds > rl0.rlim_max ? n_fds : rl0.rlim_max;
	CHECK_OK(setrlimit(RLIMIT_NOFILE, &rl));
	CHECK_OK(pipe2(pipes, O_CLOEXEC));
	CHECK_OK(pipe2(pipes + 2, O_CLOEXEC));
	a = job_start(UID_A, fn, pipes);
	CHECK_OK(setrlimit(RLIMIT_NOFILE, &rl0));
	close(pipes[1]);
	close(pipes[2]);
	if (read(pipes[0], &x, 1) != 1)
		CHECK_FAIL("the attacker died building its graph");
	close(pipes[0]);
	return a;
}

static void gc_stall_run(void)
{
	struct gs_stats plain0, carry0, plain, carry;
	long long rc0 = refcnt();
	struct job a, b, c;
	int pipes[4];

	/* alone first */
	b = job_start(UID_B, gs_bystander, NULL);
	if (!job_wait(&b, (GS_SECONDS + 30) * 1000))
		CHECK_FAIL("the bystander did not end");
	plain0 = gs_stats(&b);
	c = job_start(UID_B, gs_bystander, "carry");
	if (!job_wait(&c, (GS_SECONDS + 30) * 1000))
		CHECK_FAIL("the bystander passing sockets did not end");
	carry0 = gs_stats(&c);
	gs_report("no attack: bystander", &plain0);
	gs_report("no attack: bystander passing unix sockets", &carry0);

	/* the attacker's fds: one per structure */
	a = attacker_start(gs_attacker, (rlim_t)gs_graph + 256, pipes);
	REPORT("uid %d: %d live peers each with a unix socket queued that holds the peer's fd; a bus1 fd opened and closed every 20 ms",
	       UID_A, gs_graph);

	b = job_start(UID_B, gs_bystander, NULL);
	c = job_start(UID_B, gs_bystander, "carry");
	if (!job_wait(&b, (GS_SECONDS + 60) * 1000) || !job_wait(&c, (GS_SECONDS + 60) * 1000))
		CHECK_FAIL("a bystander did not end under the attack");
	close(pipes[3]);
	if (!job_wait(&a, 60 * 1000))
		CHECK_FAIL("the attacker did not end");
	plain = gs_stats(&b);
	carry = gs_stats(&c);
	gs_report("under attack: bystander", &plain);
	gs_report("under attack: bystander passing unix sockets", &carry);
	REPORT("the attacker asked for %llu passes", (unsigned long long)a.res.v[0]);

	/* a bystander that passes no unix socket never waits for the collector */
	CHECK(plain.slept <= plain0.slept + 2,
	      "the bystander slept in %zu of %zu round trips under the attack (%zu alone)",
	      plain.slept, plain.n, plain0.slept);
	/* the attacker's graph, now garbage, is collected */
	attacker_collected(rc0);
}

/*
 * A debug kernel under TCG builds and walks a graph about a hundred times slower: there the
 * attacker builds 1000 structures.
 */
void gc_stall(void)
{
	if (debug_kernel())
		gs_graph = 1000;
	gc_stall_run();
}

/* ------------------------------------------------------------------------------------------ */
/*
 * 10. One user's graph does not hold up another user's garbage (issue 38). UID_A keeps
 * GX_GRAPH live structures (a peer whose queue holds a unix socket on which the peer's own fd
 * is queued; A keeps the fd) and two threads of it loop close(dup(fd)) over GX_CHURN of
 * those fds: every close asks for a pass, and the counts of A's files change all the time.
 * UID_B then leaves a cycle behind (cycle_leak's construction with GX_DATA in its pool) and
 * exits; its Shmem must come back within GX_COLLECT seconds (times the run's time factor).
 * Meanwhile UID_C does SEND+RECV round trips with a unix socket in every message: the p99 of
 * its round trips under the attack is held against its p99 alone.
 */

enum { UID_C = 1002 };
enum { GX_GRAPH = 1000, GX_CHURN = 16, GX_DATA = 16 * MiB, GX_SECONDS = 4 };
/* the wide attack: so many other peers' fds on each churned peer's socket */
enum { GX_WIDE = 200 };
/*
 * C's round trips per phase: GX_SECONDS, and at least GX_MIN_RT (within 60 s), so that its
 * p99 is not the worst of a few dozen: the debug guest beside the other lanes of the test
 * command managed 55-70 in 4 s, where one preempted round trip made the p99 (227.8 ms against
 * 102.8 beside the control).
 */
enum { GX_MAX_RT = 1 << 20, GX_MIN_RT = 300 };
static const double GX_COLLECT = 1.0;
static int gx_graph = GX_GRAPH;
/* the control: the same threads churning pipe fds, no graph (the CPU load alone) */
static bool gx_control;
/*
 * The wide attack: each churned peer's socket also holds GX_WIDE fds of A's other peers, so
 * that a look at a churned peer alone finds more than the kernel's quick look takes on.
 */
static bool gx_wide;

/*
 * On a guest with two CPUs or more, the attacker's threads run on CPU 0 and C on CPU 1: C's
 * figures then show what bus1 makes it wait for, not that two spinning threads share its CPU
 * (on the debug kernel that alone made C's p50 six times slower). The collector runs anywhere.
 */
static void gx_pin(int cpu)
{
	cpu_set_t set;

	if (sysconf(_SC_NPROCESSORS_ONLN) < 2)
		return;
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	CHECK_OK(sched_setaffinity(0, sizeof(set), &set));
}

struct gx_attack {
	int fds[GX_CHURN];
	atomic_bool stop;
	atomic_ulong n;
};

static void *gx_churn(void *arg)
{
	struct gx_attack *a = arg;
	unsigned long k = 0;

	while (!atomic_load(&a->stop)) {
		close(dup(a->fds[k % GX_CHURN]));
		k++;
	}
	atomic_fetch_add(&a->n, k);
	return NULL;
}

/* Build the graph, say so on a pipe, churn until another one closes. */
static void gx_attacker(void *arg, struct result *res)
{
	static struct gx_attack a;
	int *ready = arg, i, j, s[2], wide[GX_CHURN], *all;
	struct pollfd pfd;
	pthread_t t[2];
	struct hpeer p;
	uint64_t n;

	close(ready[0]);
	close(ready[3]);
	all = calloc(gx_graph, sizeof(*all));
	CHECK(all);
	for (i = 0; gx_control && i < GX_CHURN; i++) {
		CHECK_OK(pipe2(s, O_CLOEXEC));
		a.fds[i] = s[0];
	}
	for (i = 0; !gx_control && i < gx_graph; i++) {
		p.fd = kt_open_peer();
		p.pool = NULL;
		n = hp_node(&p, &p, NULL);
		CHECK_OK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, s));
		send_fd(s[0], p.fd);
		CHECK_OK(hp_send1(p.fd, n, "x", 1, s[1]));
		all[i] = p.fd;
		if (gx_wide && i < GX_CHURN)
			wide[i] = s[0];
		else
			close(s[0]);
		close(s[1]);
		if (i < GX_CHURN)
			a.fds[i] = p.fd;
	}
	for (i = 0; gx_wide && i < GX_CHURN; i++) {
		for (j = 0; j < GX_WIDE; j++)
			send_fd(wide[i], all[GX_CHURN + (i * GX_WIDE + j) % (gx_graph - GX_CHURN)]);
		close(wide[i]);
	}
	free(all);
	gx_pin(0);
	for (i = 0; i < 2; i++)
		CHECK(!pthread_create(&t[i], NULL, gx_churn, &a));
	CHECK_EQ(write(ready[1], "R", 1), 1);
	pfd = (struct pollfd){ .fd = ready[2], .events = POLLIN };
	while (poll(&pfd, 1, 1000) == 0)
		;
	atomic_store(&a.stop, true);
	for (i = 0; i < 2; i++)
		pthread_join(t[i], NULL);
	res->v[0] = atomic_load(&a.n);
	res->r = 0;
}

/* UID_B: GX_DATA in the pool of a peer that holds itself through a unix socket; exit. */
static void gx_victim(void *arg, struct result *res)
{
	struct hpeer p = hp_open();
	struct bus1_cmd_recv c;
	uint64_t n;
	uint8_t *buf;
	int s[2], i, r;

	n = hp_node(&p, &p, NULL);
	buf = malloc(CYCLE_DATA);
	CHECK(buf);
	memset(buf, 0x5b, CYCLE_DATA);
	for (i = 0; i < GX_DATA / CYCLE_DATA; i++) {
		r = hp_send1(p.fd, n, buf, CYCLE_DATA, -1);
		if (r < 0)
			CHECK_FAIL("SEND of %d bytes to the own node: %s", CYCLE_DATA, strerror(-r));
		hp_recv_wait(&p, &c, 1000);
		CHECK_EQ(c.n_bytes, CYCLE_DATA);
	}
	free(buf);
	CHECK_OK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, s));
	send_fd(s[1], p.fd);
	r = hp_send1(p.fd, n, "S", 1, s[0]);
	if (r < 0)
		CHECK_FAIL("SEND carrying a unix socket: %s", strerror(-r));
	res->v[0] = kt_meminfo_kb("Shmem");
	/* exit with everything still open: the kernel closes it */
}

/* Run the victim; seconds from its exit until its pool's Shmem is back (-1: not in 60 s times the factor). */
static double gx_collect(void)
{
	long long sh0 = kt_meminfo_kb("Shmem"), sh = 0;
	struct job b;
	double t0;

	b = job_start(UID_B, gx_victim, NULL);
	if (!job_wait(&b, 60 * 1000))
		CHECK_FAIL("the victim did not end");
	CHECK(b.res.v[0] - sh0 >= (long long)GX_DATA / 1024 * 3 / 4,
	      "the victim's pool held no shmem (%lld kB over the baseline)",
	      (long long)b.res.v[0] - sh0);
	t0 = kt_now();
	while (kt_now() < t0 + 60 * kt_time_factor()) {
		sh = kt_meminfo_kb("Shmem");
		if (sh - sh0 < GX_DATA / 1024 / 4)
			return kt_now() - t0;
		usleep(10 * 1000);
	}
	return -1;
}

/* UID_C: round trips carrying a unix socket for GX_SECONDS; n, p50, p99, worst (us). */
static void gx_bystander(void *arg, struct result *res)
{
	struct hpeer p = hp_open();
	struct rusage ru0, ru1;
	struct bus1_cmd_recv c;
	double *lat, t0, end;
	size_t k = 0, slept = 0;
	uint64_t n;
	int s[2];

	lat = calloc(GX_MAX_RT, sizeof(*lat));
	CHECK(lat);
	gx_pin(1);
	n = hp_node(&p, &p, NULL);
	CHECK_OK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, s));
	t0 = kt_now();
	end = t0 + GX_SECONDS;
	while (k < GX_MAX_RT && (kt_now() < end || (k < GX_MIN_RT && kt_now() < end + 60))) {
		getrusage(RUSAGE_THREAD, &ru0);
		t0 = kt_now();
		CHECK_OK(hp_send1(p.fd, n, "8 bytes", 8, s[0]));
		CHECK_OK(hp_recv(p.fd, 0, &c));
		lat[k++] = kt_now() - t0;
		/* nothing here waits for anybody but the collector: a sleep is a wait for it */
		getrusage(RUSAGE_THREAD, &ru1);
		slept += ru1.ru_nvcsw != ru0.ru_nvcsw;
		close(hp_fds(&p, &c)[0]);
		CHECK_OK(hp_slice_release(p.fd, c.offset));
	}
	CHECK(k > 0);
	qsort(lat, k, sizeof(*lat), cmp_double);
	res->v[0] = k;
	res->v[1] = (uint64_t)(lat[k / 2] * 1e6);
	res->v[2] = (uint64_t)(lat[k * 99 / 100] * 1e6);
	res->v[3] = (uint64_t)(lat[k - 1] * 1e6);
	res->v[4] = slept;
	free(lat);
	close(s[0]);
	close(s[1]);
	hp_close(&p);
}

static void gx_report(const char *when, const struct job *j)
{
	REPORT("%s: uid %d passing a unix socket in each message: %llu round trips, p50 %.3f ms, p99 %.3f ms, worst %.1f ms, %llu slept in the kernel",
	       when, UID_C, (unsigned long long)j->res.v[0], j->res.v[1] / 1000.0,
	       j->res.v[2] / 1000.0, j->res.v[3] / 1000.0, (unsigned long long)j->res.v[4]);
}

static struct job gx_attack_start(int pipes[4])
{
	/* fds in flight on unix sockets count against the limit too */
	return attacker_start(gx_attacker, (rlim_t)gx_graph + 256 + (gx_wide ? GX_CHURN * GX_WIDE : 0),
			      pipes);
}

static void gx_attack_stop(struct job *a, int pipes[4], long long rc0)
{
	close(pipes[3]);
	if (!job_wait(a, 60 * 1000))
		CHECK_FAIL("the attacker did not end");
	REPORT("uid %d closed %llu dups", UID_A, (unsigned long long)a->res.v[0]);
	/* the attacker's graph, now garbage, is collected before the next case */
	attacker_collected(rc0);
}

/* A's attack (wide or not) while B leaves its cycle; seconds until B's cycle was collected. */
static double gx_starve_under(bool wide, long long rc0)
{
	double attacked;
	struct job a;
	int pipes[4];

	gx_wide = wide;
	a = gx_attack_start(pipes);
	REPORT("uid %d: %d live peers each holding itself through a unix socket%s; 2 threads close(dup()) %d of their fds",
	       UID_A, gx_graph, wide ? ", the sockets of those 16 holding 200 other peers' fds each" : "",
	       GX_CHURN);
	attacked = gx_collect();
	REPORT("under the %sattack: uid %d's cycle with %d MiB collected %.2f s after its exit",
	       wide ? "wide " : "", UID_B, GX_DATA / MiB, attacked);
	gx_attack_stop(&a, pipes, rc0);
	gx_wide = false;
	return attacked;
}

/* B's cycle is collected within GX_COLLECT s while A churns its own graph. */
void gc_starve(void)
{
	unsigned int factor = kt_time_factor();
	long long rc0 = refcnt();
	double alone, attacked, wide, bound;

	/*
	 * The debug kernel builds and walks A's graph ten times slower, and the case does not
	 * need the whole of it there: B's collection does not depend on the size of A's graph
	 * (1000 peers on the debug kernel alone: 0.50-0.64 s under the attack, 0.76 s under the
	 * wide one).
	 */
	if (debug_kernel())
		gx_graph = 250;
	alone = gx_collect();
	REPORT("no attack: uid %d's cycle with %d MiB collected %.2f s after its exit", UID_B,
	       GX_DATA / MiB, alone);
	attacked = gx_starve_under(false, rc0);
	wide = gx_starve_under(true, rc0);
	CHECK(alone >= 0, "the cycle was not collected in 60 s (times the factor) without an attack");
	CHECK(attacked >= 0, "the cycle was not collected in 60 s (times the factor) under the attack");
	CHECK(wide >= 0, "the cycle was not collected in 60 s (times the factor) under the wide attack");
	/*
	 * 1 s times the factor measured at the start of the run, or 4x the collection without
	 * the attack where the machine is slower now than that factor says (the debug guest in
	 * the middle of a loaded test command: 16x slower than alone, the factor said 2).
	 */
	bound = GX_COLLECT * factor > 4 * alone ? GX_COLLECT * factor : 4 * alone;
	REPORT("bound %.1f s (1 s times the factor %u, or 4x without the attack)", bound, factor);
	CHECK(attacked <= bound,
	      "the cycle was collected %.2f s after its owner exited under the attack, %.2f s without, bound %.1f s",
	      attacked, alone, bound);
	CHECK(wide <= bound,
	      "the cycle was collected %.2f s after its owner exited under the wide attack, %.2f s without, bound %.1f s",
	      wide, alone, bound);
}

/*
 * C's round trips with a unix socket in each message stay within 2x of alone (p99), or of C
 * beside the same threads churning pipes (the control) where the machine makes that slower.
 */
void gc_unix_latency(void)
{
	unsigned int factor = kt_time_factor();
	long long rc0 = refcnt();
	struct job a, c0, cc, c;
	double p99_0, p99_c, p99, bound;
	int pipes[4];

	if (debug_kernel())
		gx_graph = 250;
	c0 = job_start(UID_C, gx_bystander, NULL);
	if (!job_wait(&c0, (GX_SECONDS + 60) * 1000))
		CHECK_FAIL("the bystander did not end");
	gx_report("no attack", &c0);
	p99_0 = c0.res.v[2] / 1e6;
	/*
	 * The control and the attack, measured again once when the bound is missed: the p99 of
	 * a few hundred round trips is their third worst, and one preempted round trip moves it
	 * (6.1 in a full test command: 8.27 ms under the attack against a bound of 8.14 ms from
	 * a 4.07 ms control). A collector that stalls C misses it both times, and sleeps.
	 */
	for (int attempt = 0;; attempt++) {
		gx_control = true;
		a = gx_attack_start(pipes);
		cc = job_start(UID_C, gx_bystander, NULL);
		if (!job_wait(&cc, (GX_SECONDS + 60) * 1000))
			CHECK_FAIL("the bystander did not end beside the control");
		gx_report("control (2 threads close(dup()) pipe fds, no graph)", &cc);
		gx_attack_stop(&a, pipes, rc0);
		gx_control = false;
		a = gx_attack_start(pipes);
		REPORT("uid %d: %d live peers each holding itself through a unix socket; 2 threads close(dup()) %d of their fds",
		       UID_A, gx_graph, GX_CHURN);
		c = job_start(UID_C, gx_bystander, NULL);
		if (!job_wait(&c, (GX_SECONDS + 60) * 1000))
			CHECK_FAIL("the bystander did not end under the attack");
		gx_report("under attack", &c);
		gx_attack_stop(&a, pipes, rc0);
		/*
		 * 2x of p99 alone, but at least a scheduler tick (4 ms at HZ=250) stretched by
		 * the time factor: on a TCG guest p99 alone is a fraction of a millisecond, and
		 * two CPU-bound processes on it make a round trip wait a tick now and then
		 * whatever bus1 does. Where the control is slower than alone, 2x of the control:
		 * under TCG on the debug kernel, two threads spinning on the other CPU made C's
		 * p50 3.5x slower with no graph at all (C slept 0 times); that is the machine,
		 * not the collector.
		 */
		p99_c = cc.res.v[2] / 1e6;
		p99 = c.res.v[2] / 1e6;
		bound = 2 * (p99_c > p99_0 ? p99_c : p99_0);
		if (bound < 0.004 * factor)
			bound = 0.004 * factor;
		REPORT("p99 under the attack %.3f ms, alone %.3f ms, beside the control %.3f ms: %s 2x (%.3f ms)",
		       p99 * 1e3, p99_0 * 1e3, p99_c * 1e3, p99 <= bound ? "within" : "NOT within",
		       bound * 1e3);
		if (p99 <= bound || attempt == 1)
			break;
		REPORT("measuring the control and the attack once more");
	}
	CHECK(p99 <= bound, "C's p99 under the attack is %.3f ms, alone %.3f ms, control %.3f ms, bound %.3f ms",
	      p99 * 1e3, p99_0 * 1e3, p99_c * 1e3, bound * 1e3);
	/*
	 * What p99 hardly shows on an idle machine: a SEND or RECV that waits for a pass sleeps.
	 * C's only wait left is its own peer lock while the collector walks C's one-entry queue,
	 * a few microseconds twice a pass (a collector that excluded every user made C sleep
	 * 33 times in 42,000 round trips on 6.1).
	 */
	CHECK(c.res.v[4] <= c0.res.v[4] + 3,
	      "C slept in the kernel in %llu round trips under the attack, %llu alone",
	      (unsigned long long)c.res.v[4], (unsigned long long)c0.res.v[4]);
	CHECK(c.res.v[3] / 1e6 <= 1.0 * factor,
	      "a round trip under the attack took %.1f ms, bound %u s", c.res.v[3] / 1e3, factor);
}
