/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * test-hostile: operations held up by another user: a user copy stalled in a
 * userfaultfd (recv_stall, send_stall) and a large multicast (multicast_hol).
 */

#include "hostile.h"

/* ------------------------------------------------------------------------------------------ */
/*
 * 2. Stalled user copies. A userfaultfd stalls a user copy the kernel does on behalf of one
 * peer for as long as its user wants; whatever lock the kernel holds across that copy is held
 * that long. Other users' operations must not wait for it.
 */

static int uffd_open(void)
{
	struct uffdio_api api = { .api = UFFD_API };
	int fd = syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK);

	if (fd < 0)
		CHECK_FAIL("userfaultfd: %m");
	if (ioctl(fd, UFFDIO_API, &api) < 0)
		CHECK_FAIL("UFFDIO_API: %m");
	return fd;
}

static void uffd_register(int uffd, void *addr, size_t len, uint64_t mode)
{
	struct uffdio_register reg = {
		.range = { .start = (uintptr_t)addr, .len = len },
		.mode = mode,
	};

	if (ioctl(uffd, UFFDIO_REGISTER, &reg) < 0)
		CHECK_FAIL("UFFDIO_REGISTER(mode %llu): %m", (unsigned long long)mode);
}

static void uffd_wp(int uffd, void *addr, size_t len, bool on)
{
	struct uffdio_writeprotect wp = {
		.range = { .start = (uintptr_t)addr, .len = len },
		.mode = on ? UFFDIO_WRITEPROTECT_MODE_WP : 0,
	};

	if (ioctl(uffd, UFFDIO_WRITEPROTECT, &wp) < 0)
		CHECK_FAIL("UFFDIO_WRITEPROTECT(%d): %m", on);
}

/* Wait up to @ms for a fault on @uffd; returns its flags, or -1 if none came. */
static long long uffd_wait_fault(int uffd, int ms)
{
	struct pollfd pfd = { .fd = uffd, .events = POLLIN };
	struct uffd_msg msg;

	if (poll(&pfd, 1, ms) <= 0)
		return -1;
	if (read(uffd, &msg, sizeof(msg)) != sizeof(msg))
		CHECK_FAIL("reading the userfaultfd: %m");
	if (msg.event != UFFD_EVENT_PAGEFAULT)
		CHECK_FAIL("userfaultfd event %u", msg.event);
	return msg.arg.pagefault.flags;
}

/*
 * The stalling side: a child (root until it has made the userfaultfd, then @uid) whose thread
 * runs @call; the main thread reports the fault, waits for the word to resolve it, resolves it
 * and reports the call's result.
 */
struct staller {
	pid_t pid;
	int cmd_w;		/* write a byte: resolve */
	int res_r;		/* reads: the fault flags (long long, -1: none), then a result */
};

struct stall_call {
	int fd;
	void *mem;		/* the userfaultfd-registered memory */
	size_t len;
	uint64_t dst;		/* send_stall: destination handle */
	int r;
	double t;
	struct bus1_cmd_recv out;
};

static void *stall_recv_thread(void *arg)
{
	struct stall_call *c = arg;
	double t0 = kt_now();

	/* the struct bus1_cmd_recv lives on the write-protected page */
	c->r = xioctl(c->fd, BUS1_CMD_RECV, c->mem);
	c->t = kt_now() - t0;
	memcpy(&c->out, c->mem, sizeof(c->out));
	return NULL;
}

static void *stall_send_thread(void *arg)
{
	struct stall_call *c = arg;
	double t0 = kt_now();

	/* the data lives in never-populated, MISSING-registered memory */
	c->r = hp_send1(c->fd, c->dst, c->mem, c->len, -1);
	c->t = kt_now() - t0;
	return NULL;
}

static struct staller staller_start(bool recv, int fd, uint64_t dst, uid_t uid)
{
	struct staller s;
	int cmd[2], res[2];

	CHECK_OK(pipe2(cmd, O_CLOEXEC));
	CHECK_OK(pipe2(res, O_CLOEXEC));
	s.pid = fork();
	CHECK(s.pid >= 0);
	if (s.pid == 0) {
		struct stall_call c = { .fd = fd, .dst = dst };
		struct result out = { 0 };
		long long flags;
		pthread_t th;
		char byte;
		int uffd;

		close(cmd[1]);
		close(res[0]);
		/* root may catch kernel-mode faults (vm.unprivileged_userfaultfd is 0) */
		uffd = uffd_open();
		if (recv) {
			c.len = 4096;
			c.mem = mmap(NULL, c.len, PROT_READ | PROT_WRITE,
				     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
			CHECK(c.mem != MAP_FAILED);
			memset(c.mem, 0, c.len);	/* populated: RECV reads its flags fine */
			uffd_register(uffd, c.mem, c.len, UFFDIO_REGISTER_MODE_WP);
			uffd_wp(uffd, c.mem, c.len, true);
		} else {
			c.len = 64 * 1024;
			c.mem = mmap(NULL, c.len, PROT_READ | PROT_WRITE,
				     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
			CHECK(c.mem != MAP_FAILED);
			uffd_register(uffd, c.mem, c.len, UFFDIO_REGISTER_MODE_MISSING);
		}
		if (uid != (uid_t)-1)
			kt_become(uid);
		CHECK_EQ(pthread_create(&th, NULL, recv ? stall_recv_thread : stall_send_thread,
					 &c), 0);
		flags = uffd_wait_fault(uffd, 10000);
		if (write(res[1], &flags, sizeof(flags)) != sizeof(flags))
			_exit(2);
		if (read(cmd[0], &byte, 1) != 1)
			_exit(3);
		if (recv) {
			uffd_wp(uffd, c.mem, c.len, false);
		} else {
			struct uffdio_zeropage z = {
				.range = { .start = (uintptr_t)c.mem, .len = c.len },
			};

			if (ioctl(uffd, UFFDIO_ZEROPAGE, &z) < 0 && errno != EEXIST)
				CHECK_FAIL("UFFDIO_ZEROPAGE: %m");
		}
		pthread_join(th, NULL);
		out.r = c.r;
		out.t = c.t;
		out.v[0] = c.out.type;
		out.v[1] = c.out.n_bytes;
		out.v[2] = c.out.offset;
		if (write(res[1], &out, sizeof(out)) != sizeof(out))
			_exit(2);
		_exit(0);
	}
	close(cmd[0]);
	close(res[1]);
	s.cmd_w = cmd[1];
	s.res_r = res[0];
	return s;
}

/* Wait until the staller's call is stalled on its fault; returns the fault flags. */
static long long staller_stalled(struct staller *s)
{
	long long flags = -1;

	if (read(s->res_r, &flags, sizeof(flags)) != sizeof(flags))
		CHECK_FAIL("the stalling child died");
	if (flags < 0)
		CHECK_FAIL("the stalling call never faulted on the userfaultfd memory");
	return flags;
}

/* Resolve the fault; wait up to @ms for the stalled call's result. */
static bool staller_resolve(struct staller *s, struct result *out, int ms)
{
	struct pollfd pfd = { .fd = s->res_r, .events = POLLIN };

	if (write(s->cmd_w, "r", 1) != 1)
		CHECK_FAIL("the stalling child is gone");
	/* @ms bounds a hang: a slower machine gets longer (kt_time_factor()) */
	if (poll(&pfd, 1, ms * (int)kt_time_factor()) <= 0)
		return false;
	if (read(s->res_r, out, sizeof(*out)) != sizeof(*out))
		CHECK_FAIL("the stalling child died after the fault was resolved");
	waitpid(s->pid, NULL, 0);
	return true;
}

/* Describe a job that did not return in time: state and kernel stack. */
static void report_blocked(const char *what, struct job *j)
{
	char stack[1024];

	proc_stack(j->pid, stack, sizeof(stack));
	REPORT("%s: still blocked after %.1f s, state %c, stack: %s", what, kt_now() - j->t0,
	       proc_state(j->pid), stack[0] ? stack : "(unreadable)");
}

static struct {
	struct hpeer r, x, q1, q2;
	uint64_t q1_r, q2_r, q2_x, x_n2, r_x2;
} rs;

static void rs_send(void *arg, struct result *res)
{
	double t0 = kt_now();

	res->r = hp_send1(rs.q1.fd, rs.q1_r, "second", 6, -1);
	res->t = kt_now() - t0;
}

static void rs_destroy(void *arg, struct result *res)
{
	double t0 = kt_now();

	res->r = hp_destroy(rs.x.fd, rs.x_n2);
	res->t = kt_now() - t0;
}

static void rs_multicast(void *arg, struct result *res)
{
	uint64_t dst[2] = { rs.q2_r, rs.q2_x };
	double t0 = kt_now();

	res->r = hp_send(rs.q2.fd, 0, dst, 2, NULL, "multi", 5, NULL, 0, NULL, 0);
	res->t = kt_now() - t0;
}

/* Wait up to @ms for the DATA message "multi" on @p (skipping notifications). */
static double wait_multi(struct hpeer *p, int ms)
{
	struct pollfd pfd = { .fd = p->fd, .events = POLLIN };
	double t0 = kt_now();
	struct bus1_cmd_recv c;

	while (kt_now() - t0 < ms / 1000.0) {
		if (hp_recv(p->fd, 0, &c) < 0) {
			poll(&pfd, 1, 10);
			continue;
		}
		if (c.type == BUS1_MSG_DATA && c.n_bytes == 5 &&
		    !memcmp(hp_data(p, &c), "multi", 5)) {
			hp_slice_release(p->fd, c.offset);
			return kt_now() - t0;
		}
		if (c.offset != BUS1_OFFSET_INVALID)
			hp_slice_release(p->fd, c.offset);
	}
	return -1;
}

void recv_stall(void)
{
	struct job ja, jb, jc;
	struct staller st;
	struct result sres;
	double t_multi;
	long long fflags;
	uint64_t n_r, n_x;
	bool ok_a, ok_b, ok_c, resolved;
	char state_a = '-', state_b = '-', state_c = '-';
	size_t n;

	/* R (uid 1000) has a node; X, Q1, Q2 are uid 1001 */
	rs.r = hp_open_as(UID_A);
	rs.x = hp_open_as(UID_B);
	rs.q1 = hp_open_as(UID_B);
	rs.q2 = hp_open_as(UID_B);
	n_r = hp_node(&rs.r, &rs.q1, &rs.q1_r);
	rs.q2_r = hp_give(&rs.r, n_r, &rs.q2);
	n_x = hp_node(&rs.x, &rs.q2, &rs.q2_x);
	(void)n_x;
	rs.x_n2 = hp_node(&rs.x, &rs.r, &rs.r_x2);	/* R holds a handle of X's node */
	CHECK_OK(hp_send1(rs.q1.fd, rs.q1_r, "first", 5, -1));

	st = staller_start(true, rs.r.fd, 0, UID_A);
	fflags = staller_stalled(&st);
	REPORT("R's RECV is stalled on its write-protected struct (fault flags %#llx)", fflags);

	/* (a) another user's SEND to R */
	ja = job_start(UID_B, rs_send, NULL);
	ok_a = job_wait(&ja, 2000);
	if (!ok_a) {
		state_a = proc_state(ja.pid);
		report_blocked("(a) SEND to R", &ja);
	}
	/* (b) NODES_DESTROY of X's node that R holds (queues a notification to R) */
	jb = job_start(UID_B, rs_destroy, NULL);
	ok_b = job_wait(&jb, 2000);
	if (!ok_b) {
		state_b = proc_state(jb.pid);
		report_blocked("(b) NODES_DESTROY", &jb);
	}
	/* (c) a multicast to R and X: X gets it */
	jc = job_start(UID_B, rs_multicast, NULL);
	t_multi = wait_multi(&rs.x, 2000);
	ok_c = job_wait(&jc, t_multi < 0 ? 10 : 500);
	if (!ok_c) {
		state_c = proc_state(jc.pid);
		report_blocked("(c) multicast to R and X", &jc);
	}

	resolved = staller_resolve(&st, &sres, 10000);
	if (!job_wait(&ja, 10000) || !job_wait(&jb, 10000) || !job_wait(&jc, 10000))
		CHECK_FAIL("a call stayed blocked 10 s after the fault was resolved");

	REPORT("(a) SEND to R: %s after %.3f s%s", ok_a ? "returned" : "BLOCKED, returned",
	       ja.res.t, ok_a ? "" : " (only once the fault was resolved)");
	REPORT("(b) NODES_DESTROY: %s after %.3f s", ok_b ? "returned" : "BLOCKED, returned",
	       jb.res.t);
	if (t_multi < 0)
		REPORT("(c) multicast: X did NOT receive it within 2 s; the SEND %s after %.3f s",
		       ok_c ? "returned" : "BLOCKED, returned", jc.res.t);
	else
		REPORT("(c) multicast: X received it %.3f s after the SEND started; the SEND %s after %.3f s",
		       t_multi, ok_c ? "returned" : "BLOCKED, returned", jc.res.t);
	REPORT("(d) states of the blocked callers at 2 s: a %c, b %c, c %c ('-': not blocked)",
	       state_a, state_b, state_c);
	REPORT("the stalled RECV: %s, r %d, type %llu, %llu bytes, after %.2f s",
	       resolved ? "completed" : "DID NOT complete", sres.r,
	       (unsigned long long)sres.v[0], (unsigned long long)sres.v[1], sres.t);

	CHECK(ok_a && ja.res.r == 0, "(a) SEND to R: %s within 2 s, r %d",
	      ok_a ? "returned" : "blocked", ja.res.r);
	CHECK(ok_b && jb.res.r == 0, "(b) NODES_DESTROY: %s within 2 s, r %d",
	      ok_b ? "returned" : "blocked", jb.res.r);
	CHECK(t_multi >= 0, "(c) X did not receive the multicast within 2 s");
	CHECK(ok_c && jc.res.r == 0, "(c) the multicast SEND: %s, r %d",
	      ok_c ? "returned" : "blocked", jc.res.r);
	CHECK(state_a != 'D' && state_b != 'D' && state_c != 'D',
	      "(d) an innocent caller was in state D (a %c, b %c, c %c)", state_a, state_b,
	      state_c);
	CHECK(resolved && sres.r == 0 && sres.v[0] == BUS1_MSG_DATA && sres.v[1] == 5,
	      "the stalled RECV did not complete with the first message (r %d, type %llu, %llu bytes)",
	      sres.r, (unsigned long long)sres.v[0], (unsigned long long)sres.v[1]);
	if (resolved && sres.r == 0 && sres.v[1] == 5)
		CHECK(!memcmp(rs.r.pool + sres.v[2], "first", 5), "the stalled RECV got other data");
	/* the rest is there: "second", the notification, "multi" */
	n = hp_drain(&rs.r);
	CHECK(n == 3, "R's queue held %zu entries afterwards, expected 3", n);
}

static struct {
	struct hpeer d, i, s;
	uint64_t i_d, s_d;
} ss;

static void ss_send(void *arg, struct result *res)
{
	double t0 = kt_now();

	res->r = hp_send1(ss.i.fd, ss.i_d, "one", 3, -1);
	res->t = kt_now() - t0;
}

static void ss_recv(void *arg, struct result *res)
{
	struct bus1_cmd_recv c;
	double t0 = kt_now();

	res->r = hp_recv(ss.d.fd, 0, &c);
	res->t = kt_now() - t0;
	res->v[0] = c.n_handles;
	res->v[1] = c.n_bytes;
}

void send_stall(void)
{
	struct bus1_cmd_recv c;
	struct job ja, jb;
	struct staller st;
	struct result sres;
	uint64_t n_d, h = BUS1_HANDLE_CREATE;
	bool ok_a, ok_b, resolved, got_one = false, got_big = false;
	char state_a = '-', state_b = '-';
	long long fflags;
	size_t k;

	/* destination D (uid 1000), innocent sender I (uid 1001), staller S (root) */
	ss.d = hp_open_as(UID_A);
	ss.i = hp_open_as(UID_B);
	ss.s = hp_open();
	n_d = hp_node(&ss.d, &ss.i, &ss.i_d);
	ss.s_d = hp_give(&ss.d, n_d, &ss.s);
	/* queued before the stall: D's RECV of it writes a handle id into D's pool */
	CHECK_OK(hp_send(ss.i.fd, 0, &ss.i_d, 1, NULL, "zero", 4, &h, 1, NULL, 0));

	st = staller_start(false, ss.s.fd, ss.s_d, (uid_t)-1);
	fflags = staller_stalled(&st);
	REPORT("S's SEND is stalled reading its data (fault flags %#llx)", fflags);

	ja = job_start(UID_B, ss_send, NULL);
	ok_a = job_wait(&ja, 2000);
	if (!ok_a) {
		state_a = proc_state(ja.pid);
		report_blocked("(a) SEND to the same destination", &ja);
	}
	jb = job_start(UID_A, ss_recv, NULL);
	ok_b = job_wait(&jb, 2000);
	if (!ok_b) {
		state_b = proc_state(jb.pid);
		report_blocked("(b) RECV at the destination", &jb);
	}

	resolved = staller_resolve(&st, &sres, 10000);
	if (!job_wait(&ja, 10000) || !job_wait(&jb, 10000))
		CHECK_FAIL("a call stayed blocked 10 s after the fault was resolved");

	REPORT("(a) another user's SEND to the same pool: %s after %.3f s",
	       ok_a ? "returned" : "BLOCKED, returned", ja.res.t);
	REPORT("(b) RECV at the destination (a message with a handle): %s after %.3f s",
	       ok_b ? "returned" : "BLOCKED, returned", jb.res.t);
	REPORT("states of the blocked callers at 2 s: a %c, b %c ('-': not blocked)", state_a,
	       state_b);
	REPORT("the stalled SEND: %s, r %d, after %.2f s", resolved ? "completed" : "DID NOT complete",
	       sres.r, sres.t);

	CHECK(ok_a && ja.res.r == 0, "(a) SEND: %s within 2 s, r %d",
	      ok_a ? "returned" : "blocked", ja.res.r);
	CHECK(ok_b && jb.res.r == 0 && jb.res.v[0] == 1 && jb.res.v[1] == 4,
	      "(b) RECV: %s within 2 s, r %d, %llu handles, %llu bytes (expected the first message)",
	      ok_b ? "returned" : "blocked", jb.res.r, (unsigned long long)jb.res.v[0],
	      (unsigned long long)jb.res.v[1]);
	CHECK(state_a != 'D' && state_b != 'D', "an innocent caller was in state D (a %c, b %c)",
	      state_a, state_b);
	CHECK(resolved && sres.r == 0, "the stalled SEND did not complete (r %d)", sres.r);
	/* D gets "one" and the stalled message (zeros) */
	while (hp_recv(ss.d.fd, 0, &c) == 0) {
		if (c.n_bytes == 3 && !memcmp(hp_data(&ss.d, &c), "one", 3))
			got_one = true;
		if (c.n_bytes == 64 * 1024) {
			got_big = true;
			for (k = 0; k < c.n_bytes; k++)
				if (hp_data(&ss.d, &c)[k])
					break;
			CHECK(k == c.n_bytes, "the stalled message is not all zeros at %zu", k);
		}
		hp_slice_release(ss.d.fd, c.offset);
	}
	CHECK(got_one && got_big, "D did not get both messages (one: %d, stalled: %d)", got_one,
	      got_big);
}

/* ------------------------------------------------------------------------------------------ */
/*
 * 4. Head-of-line blocking by a large multicast: a small message to one destination must not
 * wait while the multicast copies its data into the other destinations' pools.
 */

enum { HOL_BYTES = 48 * MiB, HOL_MAX_T = 4096 };

static struct {
	struct hpeer d[4], s, t;
	uint64_t s_d[4], t_d1;
	uint8_t *buf;
	atomic_int phase;	/* 0 before, 1 multicast running, 2 returned */
	double mc_t0, mc_t1, d1_mc;
	int mc_r;
	atomic_int n_t;
	double t_send[HOL_MAX_T], t_ret[HOL_MAX_T], t_recv[HOL_MAX_T];
	long vcsw[HOL_MAX_T], ivcsw[HOL_MAX_T];	/* T's context switches during its SEND */
	/* where T sleeps: its kernel stack, sampled when a SEND takes longer than 4 ms */
	atomic_int t_tid;
	_Atomic double in_send;	/* start of T's SEND in progress, 0 if none */
	int n_samples;
	char samples[3][400];
	double sample_at[3];
} hol;

static void *hol_sender(void *arg)
{
	hol.mc_t0 = kt_now();
	atomic_store(&hol.phase, 1);
	hol.mc_r = hp_send(hol.s.fd, 0, hol.s_d, 4, NULL, hol.buf, HOL_BYTES, NULL, 0, NULL, 0);
	hol.mc_t1 = kt_now();
	atomic_store(&hol.phase, 2);
	return NULL;
}

static void *hol_t(void *arg)
{
	struct rusage ru0, ru1;
	struct timespec ts = { .tv_nsec = 5 * 1000 * 1000 };
	uint32_t i = 0;

	atomic_store(&hol.t_tid, gettid());
	while (atomic_load(&hol.phase) == 0)
		sched_yield();
	while (i < HOL_MAX_T - 1 && atomic_load(&hol.phase) == 1) {
		getrusage(RUSAGE_THREAD, &ru0);
		hol.t_send[i] = kt_now();
		atomic_store(&hol.in_send, hol.t_send[i]);
		if (hp_send1(hol.t.fd, hol.t_d1, &i, sizeof(i), -1) < 0)
			CHECK_FAIL("T's SEND: %m");
		hol.t_ret[i] = kt_now();
		atomic_store(&hol.in_send, 0.0);
		getrusage(RUSAGE_THREAD, &ru1);
		hol.vcsw[i] = ru1.ru_nvcsw - ru0.ru_nvcsw;
		hol.ivcsw[i] = ru1.ru_nivcsw - ru0.ru_nivcsw;
		i++;
		nanosleep(&ts, NULL);
	}
	/* one more after the multicast returned */
	hol.t_send[i] = kt_now();
	CHECK_OK(hp_send1(hol.t.fd, hol.t_d1, &i, sizeof(i), -1));
	hol.t_ret[i] = kt_now();
	atomic_store(&hol.n_t, i + 1);
	return NULL;
}

/* Sample T's kernel stack when one of its SENDs takes longer than 4 ms (once per SEND). */
static void *hol_sampler(void *arg)
{
	struct timespec ts = { .tv_nsec = 2 * 1000 * 1000 };
	double s, last = 0;
	char path[64];
	int i, j, fd;
	ssize_t n;

	while (atomic_load(&hol.phase) != 2 && hol.n_samples < 3) {
		nanosleep(&ts, NULL);
		s = atomic_load(&hol.in_send);
		if (!s || s == last || kt_now() - s < 0.004)
			continue;
		last = s;
		snprintf(path, sizeof(path), "/proc/self/task/%d/stack", atomic_load(&hol.t_tid));
		fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			continue;
		n = read(fd, hol.samples[hol.n_samples], sizeof(hol.samples[0]) - 1);
		close(fd);
		if (n <= 0 || atomic_load(&hol.in_send) != s)
			continue;	/* the SEND ended meanwhile: not where it waited */
		hol.samples[hol.n_samples][n] = 0;
		/* "[<0>] func+0x1/0x2 [mod]\n" per frame: keep "func+0x1/0x2 [mod] " */
		for (i = 0, j = 0; i < n; i++) {
			if (!strncmp(hol.samples[hol.n_samples] + i, "[<0>] ", 6)) {
				i += 5;
				continue;
			}
			hol.samples[hol.n_samples][j++] =
				hol.samples[hol.n_samples][i] == '\n' ? ' ' : hol.samples[hol.n_samples][i];
		}
		hol.samples[hol.n_samples][j] = 0;
		hol.sample_at[hol.n_samples++] = kt_now() - s;
	}
	return NULL;
}

static void check_pattern(const struct hpeer *p, const struct bus1_cmd_recv *c, int d)
{
	const uint8_t *data = hp_data(p, c);
	size_t off;

	CHECK(c->n_bytes == HOL_BYTES, "D%d got %llu bytes", d + 1,
	      (unsigned long long)c->n_bytes);
	if (c->n_bytes != HOL_BYTES)
		return;
	for (off = 0; off < HOL_BYTES; off += 4093)
		if (data[off] != (uint8_t)(off * 7 + 3)) {
			CHECK(false, "D%d: wrong data at %zu", d + 1, off);
			break;
		}
}

void multicast_hol(void)
{
	struct pollfd pfd;
	struct bus1_cmd_recv c;
	struct bus1_cmd_recv mc = { 0 };
	pthread_t ts, tt, tsm;
	double lat[HOL_MAX_T], max = 0, med = 0, p90, dur, end, lat_worst = 0;
	double slept_max = 0;
	int worst = -1, n_slept = 0;
	int i, got_t = 0, n_in = 0, got_mc = 0;
	uint64_t n_d1 = 0;
	size_t off;

	for (i = 0; i < 4; i++) {
		hol.d[i] = hp_open();
	}
	hol.s = hp_open();
	hol.t = hp_open();
	for (i = 0; i < 4; i++) {
		uint64_t n = hp_node(&hol.d[i], &hol.s, &hol.s_d[i]);

		if (!i)
			n_d1 = n;
	}
	hol.t_d1 = hp_give(&hol.d[0], n_d1, &hol.t);
	CHECK(hol.d[0].size >= HOL_BYTES);
	hol.buf = malloc(HOL_BYTES);
	CHECK(hol.buf);
	for (off = 0; off < HOL_BYTES; off++)
		hol.buf[off] = (uint8_t)(off * 7 + 3);	/* pre-faulted and recognizable */

	CHECK_EQ(pthread_create(&tt, NULL, hol_t, NULL), 0);
	CHECK_EQ(pthread_create(&ts, NULL, hol_sender, NULL), 0);
	CHECK_EQ(pthread_create(&tsm, NULL, hol_sampler, NULL), 0);

	/* D1 polls and receives */
	pfd.fd = hol.d[0].fd;
	pfd.events = POLLIN;
	end = kt_now() + 90;
	while (kt_now() < end && !(got_mc && atomic_load(&hol.n_t) && got_t == atomic_load(&hol.n_t))) {
		if (hp_recv(hol.d[0].fd, 0, &c) < 0) {
			poll(&pfd, 1, 20);
			continue;
		}
		if (c.n_bytes == sizeof(uint32_t)) {
			uint32_t idx;

			memcpy(&idx, hp_data(&hol.d[0], &c), sizeof(idx));
			if (idx < HOL_MAX_T)
				hol.t_recv[idx] = kt_now();
			got_t++;
		} else {
			/* checked after the loop: reading 48 MiB here would delay T's messages */
			hol.d1_mc = kt_now();
			mc = c;
			got_mc = 1;
			continue;
		}
		hp_slice_release(hol.d[0].fd, c.offset);
	}
	if (got_mc) {
		check_pattern(&hol.d[0], &mc, 0);
		hp_slice_release(hol.d[0].fd, mc.offset);
	}
	pthread_join(ts, NULL);
	pthread_join(tt, NULL);
	pthread_join(tsm, NULL);
	CHECK_EQ(hol.mc_r, 0);
	dur = hol.mc_t1 - hol.mc_t0;

	for (i = 0; i < hol.n_t; i++) {
		double l;

		if (hol.t_send[i] < hol.mc_t0 || hol.t_send[i] > hol.mc_t1)
			continue;
		l = (hol.t_recv[i] ? hol.t_recv[i] : kt_now()) - hol.t_send[i];
		if (worst < 0 || l > lat_worst) {
			worst = i;
			lat_worst = l;
		}
		lat[n_in++] = l;
		if (hol.vcsw[i] > 0) {
			n_slept++;
			if (hol.t_ret[i] - hol.t_send[i] > slept_max)
				slept_max = hol.t_ret[i] - hol.t_send[i];
		}
	}
	if (n_in) {
		qsort(lat, n_in, sizeof(lat[0]), cmp_double);
		max = lat[n_in - 1];
		med = lat[n_in / 2];
	}
	REPORT("multicast of %d MiB to 4 peers: %.3f s; D1 received it %.3f s after it started",
	       HOL_BYTES / MiB, dur, hol.d1_mc - hol.mc_t0);
	REPORT("T's small messages to D1 sent during the multicast: %d; latency (SEND start to D1's RECV) median %.1f ms, max %.1f ms (%.0f%% of the multicast)",
	       n_in, med * 1000, max * 1000, dur > 0 ? 100 * max / dur : 0);
	REPORT("T's SENDs that slept in the kernel (voluntary context switch): %d of %d, the longest %.1f ms",
	       n_slept, n_in, slept_max * 1000);
	for (i = 0; i < hol.n_samples; i++)
		REPORT("T's SEND in the kernel %.1f ms after it started: %s", hol.sample_at[i] * 1000,
		       hol.samples[i]);
	if (worst >= 0)
		REPORT("the worst one: sent %.1f ms into the multicast, its SEND took %.1f ms (%ld voluntary, %ld involuntary context switches: voluntary ones mean it slept in the kernel), then %.1f ms until D1 had it",
		       (hol.t_send[worst] - hol.mc_t0) * 1000,
		       (hol.t_ret[worst] - hol.t_send[worst]) * 1000,
		       hol.vcsw[worst], hol.ivcsw[worst],
		       ((hol.t_recv[worst] ? hol.t_recv[worst] : kt_now()) - hol.t_ret[worst]) * 1000);

	CHECK(got_mc, "D1 did not get the multicast");
	CHECK(got_t == hol.n_t, "D1 got %d of T's %d messages", got_t, hol.n_t);
	CHECK(n_in >= 3, "only %d of T's messages were sent during the multicast (%.3f s)", n_in,
	      dur);
	/*
	 * Behind the multicast (the old module) nearly every message waits for
	 * most of its duration. Without that, single messages can still wait a
	 * few tens of ms on D1's lock (its SLICE_RELEASE punches pool pages) and
	 * on a loaded host for the vCPU, so the bounds are on the median and the
	 * 90th percentile, not on the worst one.
	 */
	p90 = n_in ? lat[(n_in * 9) / 10] : 0;
	REPORT("T's latency: 90th percentile %.1f ms", p90 * 1000);
	/* 20 ms on an idle machine: the debug kernel on a loaded one is many times slower */
	CHECK(med < 0.02 * kt_time_factor() && med < dur / 20,
	      "T's median latency %.1f ms is not below %u ms and 5%% of the multicast's %.1f ms",
	      med * 1000, 20 * kt_time_factor(), dur * 1000);
	CHECK(p90 < dur / 4, "T's 90th percentile latency %.1f ms is not below a quarter of the multicast's %.1f ms",
	      p90 * 1000, dur * 1000);
	for (i = 1; i < 4; i++) {
		hp_recv_wait(&hol.d[i], &c, 5000);
		check_pattern(&hol.d[i], &c, i);
		hp_slice_release(hol.d[i].fd, c.offset);
	}
	free(hol.buf);
}
