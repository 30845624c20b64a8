/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Messages: gathered data lands intact in every receiver's pool; the pool is read-only to its
 * owner; slices stay valid until released; PEEK does not dequeue; fds travel (installed at RECV,
 * or declined); multicast reports per-destination results; the kernel stamps real credentials;
 * poll/epoll report readability.
 */

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#include "kmod-test.h"

static void fill(uint8_t *buf, size_t n, uint32_t seed)
{
	size_t i;

	for (i = 0; i < n; i++)
		buf[i] = (uint8_t)((i * 2654435761u + seed) >> 13);
}

static void test_data_gather(void)
{
	struct b1_peer *a = kt_peer(), *b = kt_peer();
	uint64_t na, b_na;
	static uint8_t big[1 << 20], expect[(1 << 20) + 300];
	struct iovec v[4];
	struct b1_msg m;
	size_t sizes[] = { 0, 1, 7, 8, 4095, 4096, 4097, 65536, 1 << 20 };
	size_t i;

	kt_node(a, b, &na, &b_na);
	for (i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		fill(big, sizes[i], i);
		CHECK_OK(kt_send(b, b_na, big, sizes[i]));
		kt_recv(a, 0, &m);
		CHECK_EQ(m.type, BUS1_MSG_DATA);
		CHECK_EQ(m.destination, na);
		CHECK_EQ(m.n_bytes, sizes[i]);
		CHECK_EQ(m.n_handles, 0);
		CHECK_EQ(m.n_fds, 0);
		CHECK(m.offset != BUS1_OFFSET_INVALID);
		CHECK_EQ(m.offset % 8, 0);
		CHECK(!memcmp(m.data, big, sizes[i]));
		CHECK_OK(b1_peer_msg_release(a, &m));
	}
	/* Empty messages still get distinct slices of at least 8 bytes, 8-aligned. */
	{
		struct b1_msg e[3];

		for (i = 0; i < 3; i++) {
			CHECK_OK(kt_send(b, b_na, NULL, 0));
			kt_recv(a, 0, &e[i]);
			CHECK_EQ(e[i].offset % 8, 0);
		}
		for (i = 0; i < 3; i++) {
			size_t j;

			for (j = 0; j < 3; j++)
				if (i != j)
					CHECK(e[i].offset >= e[j].offset + 8 ||
					       e[j].offset >= e[i].offset + 8);
		}
		for (i = 0; i < 3; i++)
			CHECK_OK(b1_peer_msg_release(a, &e[i]));
	}
	/* Four vectors, one of them empty, concatenated. */
	fill(big, 1 << 20, 99);
	v[0] = (struct iovec){ big, 100 };
	v[1] = (struct iovec){ big + 5000, 0 };
	v[2] = (struct iovec){ big + 200, 3000 };
	v[3] = (struct iovec){ big + 7, 200 };
	memcpy(expect, big, 100);
	memcpy(expect + 100, big + 200, 3000);
	memcpy(expect + 3100, big + 7, 200);
	CHECK_OK(b1_peer_send(b, 0, &b_na, 1, NULL, v, 4, NULL, 0, NULL, 0));
	kt_recv(a, 0, &m);
	CHECK_EQ(m.n_bytes, 3300);
	CHECK(!memcmp(m.data, expect, 3300));
	CHECK_OK(b1_peer_msg_release(a, &m));
	b1_peer_free(a);
	b1_peer_free(b);
}

/* One multicast to hundreds of peers (each with its own pool): all or (atomically) none. */
static void test_multicast_many(void)
{
	enum { N = 400 };
	static struct b1_peer *p[N];
	static uint64_t own[N], dst[N + 1];
	static uint32_t errs[N + 1];
	struct b1_peer *s = kt_peer();
	struct b1_msg m;
	int i;

	for (i = 0; i < N; i++) {
		p[i] = kt_peer();
		kt_node(p[i], s, &own[i], &dst[i]);
	}
	CHECK_OK(b1_peer_send(s, 0, dst, N, errs, &(struct iovec){ "many", 4 }, 1,
			       NULL, 0, NULL, 0));
	for (i = 0; i < N; i++) {
		CHECK_EQ(errs[i], 0);
		kt_recv(p[i], 0, &m);
		CHECK_EQ(m.destination, own[i]);
		CHECK(!memcmp(m.data, "many", 4));
		CHECK_OK(b1_peer_msg_release(p[i], &m));
	}
	/* The last destination is bad: nobody gets anything, everybody else is ECANCELED. */
	dst[N] = dst[N - 1] + 4000;
	CHECK_ERR(b1_peer_send(s, 0, dst, N + 1, errs, NULL, 0, NULL, 0, NULL, 0), ENXIO);
	for (i = 0; i < N; i++) {
		CHECK_EQ(errs[i], ECANCELED);
		kt_recv_none(p[i]);
	}
	CHECK_EQ(errs[N], ENXIO);
	for (i = 0; i < N; i++)
		b1_peer_free(p[i]);
	b1_peer_free(s);
}

static sigjmp_buf segv_jmp;

static void on_segv(int sig)
{
	siglongjmp(segv_jmp, 1);
}

static void test_pool_readonly(void)
{
	struct b1_peer *a = kt_peer(), *b = kt_peer();
	struct bus1_cmd_peer_query q;
	uint64_t na, b_na;
	struct b1_msg m;
	volatile uint8_t *p;
	void *map;
	int fd = b1_peer_get_fd(a);

	kt_query(a, &q);
	/* Writable shared or private mappings are refused. */
	map = mmap(NULL, q.pool_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	CHECK(map == MAP_FAILED);
	CHECK_EQ(errno, EPERM);
	map = mmap(NULL, 4096, PROT_WRITE, MAP_SHARED, fd, 0);
	CHECK(map == MAP_FAILED);
	map = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
	CHECK(map == MAP_FAILED);
	/* A read-only mapping cannot be made writable later. */
	map = mmap(NULL, q.pool_size, PROT_READ, MAP_SHARED, fd, 0);
	CHECK(map != MAP_FAILED);
	CHECK_ERR_ANY(mprotect(map, 4096, PROT_READ | PROT_WRITE), EACCES, EPERM);
	CHECK_ERR_ANY(mprotect(map, q.pool_size, PROT_WRITE), EACCES, EPERM);

	/* The data is visible in both read-only mappings; a store faults. */
	kt_node(a, b, &na, &b_na);
	CHECK_OK(kt_send(b, b_na, "readonly", 8));
	kt_recv(a, 0, &m);
	CHECK(!memcmp((const uint8_t *)map + m.offset, "readonly", 8));
	p = (volatile uint8_t *)map + m.offset;
	signal(SIGSEGV, on_segv);
	signal(SIGBUS, on_segv);
	if (!sigsetjmp(segv_jmp, 1)) {
		p[0] = 'X';
		CHECK_FAIL("a store into the pool did not fault");
	}
	signal(SIGSEGV, SIG_DFL);
	signal(SIGBUS, SIG_DFL);
	CHECK_EQ(((const char *)m.data)[0], 'r');
	CHECK_OK(b1_peer_msg_release(a, &m));
	munmap(map, q.pool_size);
	b1_peer_free(a);
	b1_peer_free(b);
}

/*
 * Slices stay valid until released and can be released in any order; released space is reused
 * (a pool that only grew would run out: we push many times the pool size through it).
 */
static void test_slice_release(void)
{
	struct b1_peer *a = kt_peer(), *b = kt_peer();
	struct bus1_cmd_peer_query q;
	enum { N = 16 };
	uint64_t na, b_na, off[N];
	static uint8_t buf[1 << 20];
	struct b1_msg m[N];
	size_t i, chunk, rounds;

	kt_query(a, &q);
	kt_node(a, b, &na, &b_na);
	for (i = 0; i < N; i++) {
		fill(buf, 1000, i);
		CHECK_OK(kt_send(b, b_na, buf, 1000));
		kt_recv(a, 0, &m[i]);
		off[i] = m[i].offset;
	}
	/* Release the even ones; the odd ones must still read correctly. */
	for (i = 0; i < N; i += 2)
		CHECK_OK(b1_peer_slice_release(a, off[i]));
	for (i = 1; i < N; i += 2) {
		fill(buf, 1000, i);
		CHECK(!memcmp(m[i].data, buf, 1000));
	}
	for (i = 1; i < N; i += 2)
		CHECK_OK(b1_peer_slice_release(a, off[i]));
	for (i = 0; i < N; i++)
		CHECK_ERR_ANY(b1_peer_slice_release(a, off[i]), ENXIO, EINVAL);

	/* Twice the pool size through it, one MiB at a time. */
	chunk = sizeof(buf);
	if (chunk > q.pool_size / 4)
		chunk = q.pool_size / 4;
	rounds = 2 * q.pool_size / chunk;
	for (i = 0; i < rounds; i++) {
		buf[0] = (uint8_t)i;
		CHECK_OK(kt_send(b, b_na, buf, chunk));
		kt_recv(a, 0, &m[0]);
		CHECK_EQ(m[0].n_bytes, chunk);
		CHECK_EQ(((const uint8_t *)m[0].data)[0], (uint8_t)i);
		CHECK_OK(b1_peer_msg_release(a, &m[0]));
	}
	b1_peer_free(a);
	b1_peer_free(b);
}

/* A receiver that never releases fills its pool: ENOSPC for it, nobody else. */
static void test_pool_full(void)
{
	struct b1_peer *a = kt_peer(), *b = kt_peer(), *c = kt_peer();
	struct bus1_cmd_peer_query q;
	uint64_t na, b_na, nc, b_nc, dst[2];
	uint32_t errs[2];
	static uint8_t buf[1 << 20];
	struct iovec v = { buf, sizeof(buf) };
	struct b1_msg m;
	size_t i, n;
	int r = 0;

	kt_query(a, &q);
	kt_node(a, b, &na, &b_na);
	kt_node(c, b, &nc, &b_nc);
	n = 0;
	for (i = 0; i < 2 * q.pool_size / sizeof(buf); i++) {
		r = kt_send(b, b_na, buf, sizeof(buf));
		if (r == -ENOSPC)
			break;
		CHECK_OK(r);
		kt_recv(a, 0, &m);	/* dequeued, slice kept */
		++n;
	}
	CHECK_EQ(r, -ENOSPC);
	CHECK(n >= q.pool_size / sizeof(buf) / 2);
	CHECK(n <= q.pool_size / sizeof(buf));
	/* Multicast to the full a and to c: c gets it with CONTINUE, a reports ENOSPC. */
	dst[0] = b_na;
	dst[1] = b_nc;
	CHECK_ERR(b1_peer_send(b, 0, dst, 2, errs, &v, 1, NULL, 0, NULL, 0), ENOSPC);
	CHECK_EQ(errs[0], ENOSPC);
	CHECK_EQ(errs[1], ECANCELED);
	kt_recv_none(c);
	CHECK_OK(b1_peer_send(b, BUS1_SEND_FLAG_CONTINUE, dst, 2, errs, &v, 1, NULL, 0, NULL, 0));
	CHECK_EQ(errs[0], ENOSPC);
	CHECK_EQ(errs[1], 0);
	kt_recv(c, 0, &m);
	CHECK_EQ(m.n_bytes, sizeof(buf));
	/* A reset frees a's pool: it takes messages again. */
	CHECK_OK(b1_peer_reset(a));
	kt_node(a, b, &na, &b_na);
	CHECK_OK(kt_send(b, b_na, buf, sizeof(buf)));
	b1_peer_free(a);
	b1_peer_free(b);
	b1_peer_free(c);
}

static long shmem_kib(void)
{
	char line[256];
	long v = -1;
	FILE *f = fopen("/proc/meminfo", "re");

	CHECK(f);
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "Shmem: %ld kB", &v) == 1)
			break;
	fclose(f);
	CHECK(v >= 0);
	return v;
}

/*
 * Pool memory (shmem) is allocated as it is used, and all of it goes when the peer does: a
 * leaked pool would show here (Debian's kernel has no kmemleak).
 */
static void test_pool_memory(void)
{
	struct b1_peer *a, *b;
	enum { N = 48, SZ = 1 << 20 };
	static uint8_t buf[SZ];
	uint64_t na, b_na;
	struct b1_msg m;
	long base, full, gone;
	int i, round;

	for (round = 0; round < 2; round++) {
		base = shmem_kib();
		a = kt_peer();
		b = kt_peer();
		/* A fresh peer's pool costs (next to) nothing. */
		CHECK(shmem_kib() - base < 1024);
		kt_node(a, b, &na, &b_na);
		for (i = 0; i < N; i++) {
			memset(buf, i, sizeof(buf));
			CHECK_OK(kt_send(b, b_na, buf, SZ));
			kt_recv(a, 0, &m);	/* slice kept */
		}
		full = shmem_kib();
		b1_peer_free(a);
		b1_peer_free(b);
		gone = shmem_kib();
		kt_log("shmem: %ld kB before, %ld kB with %d MiB in a pool, %ld kB after the close",
		       base, full, N, gone);
		CHECK(full - base >= N * 1024 * 3 / 4);
		CHECK(gone - base < 2048);
	}
}

static void test_peek(void)
{
	struct b1_peer *a = kt_peer(), *b = kt_peer();
	uint64_t na, b_na;
	struct b1_msg m1, m2, m3;

	kt_node(a, b, &na, &b_na);
	CHECK_OK(kt_send(b, b_na, "first", 5));
	CHECK_OK(kt_send(b, b_na, "second", 6));
	kt_recv(a, BUS1_RECV_FLAG_PEEK, &m1);
	kt_recv(a, BUS1_RECV_FLAG_PEEK, &m2);
	CHECK_EQ(m1.offset, m2.offset);
	CHECK_EQ(m1.n_bytes, 5);
	CHECK_EQ(m2.n_bytes, 5);
	CHECK(!memcmp(m2.data, "first", 5));
	kt_recv(a, 0, &m3);
	CHECK_EQ(m3.offset, m1.offset);
	CHECK(!memcmp(m3.data, "first", 5));
	kt_recv(a, BUS1_RECV_FLAG_PEEK, &m1);
	CHECK_EQ(m1.n_bytes, 6);
	CHECK(!memcmp(m1.data, "second", 6));
	CHECK_OK(b1_peer_msg_release(a, &m3));
	kt_recv(a, 0, &m2);
	CHECK(!memcmp(m2.data, "second", 6));
	CHECK_OK(b1_peer_msg_release(a, &m2));
	kt_recv_none(a);
	b1_peer_free(a);
	b1_peer_free(b);
}

static int fd_flags(int fd)
{
	return fcntl(fd, F_GETFD);
}

static bool same_file(int x, int y)
{
	struct stat s1, s2;

	return fstat(x, &s1) == 0 && fstat(y, &s2) == 0 &&
	       s1.st_dev == s2.st_dev && s1.st_ino == s2.st_ino;
}

static void test_fds(void)
{
	struct b1_peer *a = kt_peer(), *b = kt_peer();
	uint64_t na, b_na, h = BUS1_HANDLE_CREATE;
	int p[2], mfd, fds[3], rfd[3];
	struct b1_msg m;
	char c;

	kt_node(a, b, &na, &b_na);
	CHECK_OK(pipe2(p, O_CLOEXEC | O_NONBLOCK));
	mfd = memfd_create("kt", MFD_CLOEXEC);
	CHECK(mfd >= 0);
	CHECK_EQ(write(mfd, "memfd", 5), 5);
	fds[0] = p[0];
	fds[1] = p[1];
	fds[2] = mfd;
	CHECK_OK(b1_peer_send(b, 0, &b_na, 1, NULL, &(struct iovec){ "x", 1 }, 1, &h, 1,
			       fds, 3));
	kt_recv(a, 0, &m);
	CHECK_EQ(m.n_fds, 3);
	CHECK_EQ(m.n_handles, 1);
	CHECK_EQ(m.n_bytes, 1);
	CHECK(m.handles[0] & BUS1_HANDLE_FLAG_REMOTE);
	memcpy(rfd, m.fds, sizeof(rfd));
	CHECK(rfd[0] >= 0 && rfd[1] >= 0 && rfd[2] >= 0);
	CHECK(rfd[0] != p[0] && rfd[1] != p[1] && rfd[2] != mfd);
	CHECK(same_file(rfd[0], p[0]));
	CHECK(same_file(rfd[1], p[1]));
	CHECK(same_file(rfd[2], mfd));
	CHECK(fd_flags(rfd[0]) & FD_CLOEXEC);
	CHECK(fd_flags(rfd[2]) & FD_CLOEXEC);
	/* They work: write through the received end, read through ours. */
	CHECK_EQ(write(rfd[1], "y", 1), 1);
	CHECK_EQ(read(p[0], &c, 1), 1);
	CHECK_EQ(c, 'y');
	{
		char buf[8] = { 0 };

		CHECK_EQ(pread(rfd[2], buf, 5, 0), 5);
		CHECK(!memcmp(buf, "memfd", 5));
	}
	CHECK_OK(b1_peer_msg_release(a, &m));
	close(rfd[0]);
	close(rfd[1]);
	close(rfd[2]);
	close(p[0]);
	close(p[1]);
	close(mfd);
	b1_peer_free(a);
	b1_peer_free(b);
}

/* NO_FDS: nothing installed, slots read -1; PEEK installs a set each time; dequeuing with
 * NO_FDS drops the files (the last reference to a pipe's write end goes: EOF). */
static void test_declined_fds(void)
{
	struct b1_peer *a = kt_peer(), *b = kt_peer();
	uint64_t na, b_na;
	struct b1_msg m, m2;
	int p[2], fd, before, after;
	char c;

	kt_node(a, b, &na, &b_na);
	CHECK_OK(pipe2(p, O_CLOEXEC | O_NONBLOCK));
	CHECK_OK(b1_peer_send(b, 0, &b_na, 1, NULL, NULL, 0, NULL, 0, &p[1], 1));
	close(p[1]);
	/* The in-flight message keeps the write end open. */
	CHECK_ERR(read(p[0], &c, 1), EAGAIN);

	before = dup(0);
	close(before);
	kt_recv(a, BUS1_RECV_FLAG_PEEK | BUS1_RECV_FLAG_NO_FDS, &m);
	CHECK_EQ(m.n_fds, 1);
	CHECK_EQ(m.fds[0], -1);
	/* No fd was installed: the lowest free number is unchanged. */
	fd = dup(0);
	CHECK_EQ(fd, before);
	close(fd);

	kt_recv(a, BUS1_RECV_FLAG_PEEK, &m);
	CHECK(m.fds[0] >= 0);
	fd = m.fds[0];
	kt_recv(a, BUS1_RECV_FLAG_PEEK, &m2);
	CHECK(m2.fds[0] >= 0);
	CHECK_NE(m2.fds[0], fd);
	CHECK(same_file(fd, m2.fds[0]));
	close(fd);
	close(m2.fds[0]);

	kt_recv(a, BUS1_RECV_FLAG_NO_FDS, &m);
	CHECK_EQ(m.fds[0], -1);
	after = dup(0);
	CHECK_EQ(after, before);
	close(after);
	CHECK_OK(b1_peer_msg_release(a, &m));
	/* The message was the last holder of the write end. */
	CHECK_EQ(read(p[0], &c, 1), 0);
	close(p[0]);
	kt_recv_none(a);
	b1_peer_free(a);
	b1_peer_free(b);
}

/* A receiver that cannot take the fds (EMFILE) keeps the message queued. */
static void test_fds_emfile(void)
{
	struct b1_peer *a = kt_peer(), *b = kt_peer();
	uint64_t na, b_na;
	struct b1_msg m;
	int p[2], spare[4096], n = 0;

	kt_node(a, b, &na, &b_na);
	CHECK_OK(pipe2(p, O_CLOEXEC));
	CHECK_OK(b1_peer_send(b, 0, &b_na, 1, NULL, NULL, 0, NULL, 0, p, 2));
	CHECK_OK(setrlimit(RLIMIT_NOFILE, &(struct rlimit){ 64, 64 }));
	while (n < 4096 && (spare[n] = dup(0)) >= 0)
		++n;
	CHECK_ERR(b1_peer_recv(a, 0, &m), EMFILE);
	close(spare[--n]);
	/* One free slot is not enough for two fds either. */
	CHECK_ERR(b1_peer_recv(a, 0, &m), EMFILE);
	close(spare[--n]);
	kt_recv(a, 0, &m);
	CHECK_EQ(m.n_fds, 2);
	CHECK(m.fds[0] >= 0 && m.fds[1] >= 0);
	CHECK_OK(b1_peer_msg_release(a, &m));
	b1_peer_free(a);
	b1_peer_free(b);
}

static void test_multicast(void)
{
	enum { N = 6 };
	struct b1_peer *s = kt_peer(), *p[N];
	uint64_t own[N], dst[N + 2];
	uint32_t errs[N + 2];
	struct b1_msg m;
	int i;

	for (i = 0; i < N; i++) {
		p[i] = kt_peer();
		kt_node(p[i], s, &own[i], &dst[i]);
	}
	CHECK_OK(b1_peer_send(s, 0, dst, N, errs, &(struct iovec){ "multi", 5 }, 1,
			       NULL, 0, NULL, 0));
	for (i = 0; i < N; i++) {
		CHECK_EQ(errs[i], 0);
		kt_recv(p[i], 0, &m);
		CHECK_EQ(m.destination, own[i]);
		CHECK_EQ(m.n_bytes, 5);
		CHECK(!memcmp(m.data, "multi", 5));
		CHECK_OK(b1_peer_msg_release(p[i], &m));
	}
	/* A destination listed twice gets it twice; the sender's own node is fine too. */
	{
		uint64_t self, self_h = BUS1_HANDLE_CREATE;

		kt_node(s, s, &self, NULL);
		self_h = self;
		CHECK_OK(b1_peer_send(s, 0, (uint64_t[]){ dst[1], self_h, dst[1] }, 3, errs,
				       &(struct iovec){ "dup", 3 }, 1, NULL, 0, NULL, 0));
		CHECK_EQ(errs[0], 0);
		CHECK_EQ(errs[1], 0);
		CHECK_EQ(errs[2], 0);
		for (i = 0; i < 2; i++) {
			kt_recv(p[1], 0, &m);
			CHECK_EQ(m.destination, own[1]);
			CHECK(!memcmp(m.data, "dup", 3));
			CHECK_OK(b1_peer_msg_release(p[1], &m));
		}
		kt_recv_none(p[1]);
		kt_recv(s, 0, &m);
		CHECK_EQ(m.destination, self);
		CHECK_OK(b1_peer_msg_release(s, &m));
		kt_recv_none(s);
	}
	/* Two nodes of one peer: it gets one message per node. */
	kt_node(p[0], s, NULL, &dst[N]);
	CHECK_OK(b1_peer_send(s, 0, (uint64_t[]){ dst[0], dst[N] }, 2, NULL, NULL, 0,
			       NULL, 0, NULL, 0));
	kt_recv(p[0], 0, &m);
	kt_recv(p[0], 0, &m);
	kt_recv_none(p[0]);

	/* A dead destination (owner gone) among live ones. */
	b1_peer_free(p[2]);
	p[2] = NULL;
	CHECK_ERR(b1_peer_send(s, 0, dst, N, errs, NULL, 0, NULL, 0, NULL, 0), EHOSTUNREACH);
	for (i = 0; i < N; i++)
		CHECK_EQ(errs[i], i == 2 ? EHOSTUNREACH : ECANCELED);
	for (i = 0; i < N; i++)
		if (p[i])
			kt_recv_none(p[i]);
	CHECK_OK(b1_peer_send(s, BUS1_SEND_FLAG_CONTINUE, dst, N, errs, NULL, 0, NULL, 0,
			       NULL, 0));
	for (i = 0; i < N; i++) {
		CHECK_EQ(errs[i], i == 2 ? EHOSTUNREACH : 0);
		if (p[i]) {
			kt_recv(p[i], 0, &m);
			CHECK_EQ(m.type, BUS1_MSG_DATA);
			kt_recv_none(p[i]);
		}
	}
	/* With CONTINUE and no destination left, the ioctl still succeeds (documented). */
	CHECK_OK(b1_peer_send(s, BUS1_SEND_FLAG_CONTINUE, &dst[2], 1, errs, NULL, 0, NULL, 0,
			       NULL, 0));
	CHECK_EQ(errs[0], EHOSTUNREACH);
	/* s was told about the node it held. */
	kt_recv(s, 0, &m);
	CHECK_EQ(m.type, BUS1_MSG_NODE_DESTROY);
	CHECK_EQ(m.destination, dst[2]);
	for (i = 0; i < N; i++)
		b1_peer_free(p[i]);
	b1_peer_free(s);
}

struct cred_arg {
	struct b1_peer *peer;
	uint64_t dst;
	pid_t tid;
};

static void *cred_thread(void *p)
{
	struct cred_arg *arg = p;

	arg->tid = syscall(SYS_gettid);
	if (kt_send(arg->peer, arg->dst, "t", 1) < 0)
		arg->tid = -1;
	return NULL;
}

static void test_credentials(void)
{
	struct b1_peer *a = kt_peer(), *b = kt_peer();
	struct cred_arg arg;
	pthread_t th;
	uint64_t na, b_na;
	struct b1_msg m;
	pid_t pid;
	int status;

	kt_node(a, b, &na, &b_na);
	CHECK_OK(kt_send(b, b_na, "m", 1));
	kt_recv(a, 0, &m);
	CHECK_EQ(m.uid, getuid());
	CHECK_EQ(m.gid, getgid());
	CHECK_EQ(m.pid, getpid());
	CHECK_EQ(m.tid, getpid());
	CHECK_OK(b1_peer_msg_release(a, &m));

	/* From another thread: same pid, its own tid. */
	arg = (struct cred_arg){ .peer = b, .dst = b_na };
	CHECK_EQ(pthread_create(&th, NULL, cred_thread, &arg), 0);
	pthread_join(th, NULL);
	CHECK(arg.tid > 0);
	kt_recv(a, 0, &m);
	CHECK_EQ(m.pid, getpid());
	CHECK_EQ(m.tid, arg.tid);
	CHECK_NE(m.tid, getpid());
	CHECK_OK(b1_peer_msg_release(a, &m));

	/* A child with real ids 4242/4343 and effective ids 0: the real ones are stamped. */
	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		if (setresgid(4343, 0, 0) < 0 || setresuid(4242, 0, 0) < 0)
			_exit(2);
		_exit(kt_send(b, b_na, "c", 1) < 0 ? 3 : 0);
	}
	CHECK_EQ(waitpid(pid, &status, 0), pid);
	CHECK_EQ(status, 0);
	kt_recv(a, 0, &m);
	CHECK_EQ(m.uid, 4242);
	CHECK_EQ(m.gid, 4343);
	CHECK_EQ(m.pid, pid);
	CHECK_EQ(m.tid, pid);
	CHECK_OK(b1_peer_msg_release(a, &m));
	b1_peer_free(a);
	b1_peer_free(b);
}

/*
 * Pid namespaces: a receiver in a child pid namespace sees 0 for a sender outside it; a receiver
 * outside sees the sender's pid in its own (the initial) namespace.
 */
static void test_credentials_pidns(void)
{
	struct b1_peer *a = kt_peer();
	int afd = b1_peer_get_fd(a), pp[2], pq[2], status;
	pid_t child, inner = 0;
	uint64_t ids[2];
	struct b1_msg m;

	/* Two pipes: the two writers race, and each message must arrive whole. */
	CHECK_OK(pipe(pp));
	CHECK_OK(pipe(pq));
	child = fork();
	CHECK(child >= 0);
	if (child == 0) {
		pid_t g;

		if (unshare(CLONE_NEWPID) < 0)
			_exit(10);
		g = fork();
		if (g < 0)
			_exit(11);
		if (g == 0) {
			/* pid 1 of the new namespace. */
			struct b1_peer *c;
			uint64_t a_nc, na, c_na;
			struct b1_msg cm;
			int i;

			if (getpid() != 1 || b1_peer_new(&c) < 0)
				_exit(12);
			if (b1_peer_handle_transfer(c, a, &(uint64_t){ BUS1_HANDLE_CREATE }, &a_nc) < 0)
				_exit(13);
			/* a's node, held by c: created through a's fd (shared with us). */
			{
				struct bus1_cmd_handle_transfer t = { .src_handle = BUS1_HANDLE_CREATE,
								      .dst_fd = b1_peer_get_fd(c) };

				if (ioctl(afd, BUS1_CMD_HANDLE_TRANSFER, &t) < 0)
					_exit(14);
				na = t.src_handle;
				c_na = t.dst_handle;
			}
			ids[0] = a_nc;
			ids[1] = na;
			if (write(pp[1], ids, sizeof(ids)) != sizeof(ids))
				_exit(15);
			if (kt_send(c, c_na, "in", 2) < 0)
				_exit(16);
			/* Wait for a's message. */
			for (i = 0; i < 1000; i++) {
				if (b1_peer_recv(c, 0, &cm) == 0)
					break;
				usleep(10000);
			}
			if (i == 1000)
				_exit(17);
			if (cm.type != BUS1_MSG_DATA || cm.pid != 0 || cm.tid != 0)
				_exit(18);
			_exit(0);
		}
		if (write(pq[1], &g, sizeof(g)) != sizeof(g))
			_exit(19);
		if (waitpid(g, &status, 0) != g)
			_exit(20);
		_exit(WIFEXITED(status) ? WEXITSTATUS(status) : 21);
	}
	CHECK_EQ(read(pq[0], &inner, sizeof(inner)), sizeof(inner));
	CHECK_EQ(read(pp[0], ids, sizeof(ids)), sizeof(ids));
	/* ids[0]: a's handle to c's node; ids[1]: a's own node c sends to. */
	CHECK_EQ(poll(&(struct pollfd){ .fd = afd, .events = POLLIN }, 1, 20000), 1);
	kt_recv(a, 0, &m);
	CHECK_EQ(m.type, BUS1_MSG_DATA);
	CHECK_EQ(m.destination, ids[1]);
	CHECK_EQ(m.pid, inner);
	CHECK_EQ(m.tid, inner);
	CHECK_OK(b1_peer_msg_release(a, &m));
	CHECK_OK(kt_send(a, ids[0], "out", 3));
	CHECK_EQ(waitpid(child, &status, 0), child);
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
		CHECK_FAIL("pid namespace child failed: status 0x%x", status);
	close(pp[0]);
	close(pp[1]);
	close(pq[0]);
	close(pq[1]);
	b1_peer_free(a);
}

/*
 * User namespaces: a receiver in a child user namespace where host uid 4242 is uid 0 (and
 * nothing else is mapped) sees a sender with real uid 4242 as 0, and root as the overflow id.
 */
static unsigned int read_uint(const char *path)
{
	unsigned int v = 0;
	FILE *f = fopen(path, "re");

	if (!f || fscanf(f, "%u", &v) != 1)
		CHECK_FAIL("reading %s failed", path);
	fclose(f);
	return v;
}

static void test_credentials_userns(void)
{
	struct b1_peer *a = kt_peer();
	unsigned int overflow_uid = read_uint("/proc/sys/kernel/overflowuid");
	unsigned int overflow_gid = read_uint("/proc/sys/kernel/overflowgid");
	int to_child[2], to_parent[2], status;
	uint64_t a_nc = 0;
	pid_t child, sender;
	char path[64], c;
	FILE *f;

	CHECK_OK(pipe(to_child));
	CHECK_OK(pipe(to_parent));
	child = fork();
	CHECK(child >= 0);
	if (child == 0) {
		struct b1_peer *cp;
		struct b1_msg m;
		uint64_t h = BUS1_HANDLE_CREATE, d;
		int i, k;

		if (unshare(CLONE_NEWUSER) < 0)
			_exit(10);
		if (write(to_parent[1], "u", 1) != 1 || read(to_child[0], &c, 1) != 1)
			_exit(11);
		/* Mapped now: open our own peer here; a (opened outside) gets a handle. */
		if (b1_peer_new(&cp) < 0)
			_exit(12);
		if (b1_peer_handle_transfer(cp, a, &h, &d) < 0)
			_exit(13);
		if (write(to_parent[1], &d, sizeof(d)) != sizeof(d))
			_exit(14);
		for (k = 0; k < 2; k++) {
			for (i = 0; i < 2000 && b1_peer_recv(cp, 0, &m) < 0; i++)
				usleep(5000);
			if (i == 2000)
				_exit(15);
			/* First from root (unmapped), then from 4242 (our 0). */
			if (k == 0 && (m.uid != overflow_uid || m.gid != overflow_gid))
				_exit(16);
			if (k == 1 && m.uid != 0)
				_exit(17);
		}
		_exit(0);
	}
	CHECK_EQ(read(to_parent[0], &c, 1), 1);
	snprintf(path, sizeof(path), "/proc/%d/uid_map", child);
	f = fopen(path, "we");
	CHECK(f);
	fprintf(f, "0 4242 1\n");
	CHECK_EQ(fclose(f), 0);
	CHECK_EQ(write(to_child[1], "m", 1), 1);
	CHECK_EQ(read(to_parent[0], &a_nc, sizeof(a_nc)), sizeof(a_nc));

	CHECK_OK(kt_send(a, a_nc, "root", 4));
	sender = fork();
	CHECK(sender >= 0);
	if (sender == 0) {
		if (setresuid(4242, 4242, 4242) < 0)
			_exit(1);
		_exit(kt_send(a, a_nc, "4242", 4) < 0 ? 2 : 0);
	}
	CHECK_EQ(waitpid(sender, &status, 0), sender);
	CHECK_EQ(status, 0);
	CHECK_EQ(waitpid(child, &status, 0), child);
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
		CHECK_FAIL("user namespace child failed: status 0x%x", status);
	b1_peer_free(a);
}

static void test_poll(void)
{
	struct b1_peer *a = kt_peer(), *b = kt_peer();
	struct epoll_event ev = { .events = EPOLLIN }, out[2];
	struct pollfd pfd = { .fd = b1_peer_get_fd(a), .events = POLLIN };
	uint64_t na, b_na;
	struct b1_msg m;
	int ep;

	kt_node(a, b, &na, &b_na);
	ep = epoll_create1(EPOLL_CLOEXEC);
	CHECK(ep >= 0);
	CHECK_OK(epoll_ctl(ep, EPOLL_CTL_ADD, pfd.fd, &ev));
	CHECK_EQ(poll(&pfd, 1, 0), 0);
	CHECK_EQ(epoll_wait(ep, out, 2, 0), 0);
	/* Sending never blocks: always writable. */
	CHECK_EQ(poll(&(struct pollfd){ .fd = pfd.fd, .events = POLLOUT }, 1, 0), 1);
	CHECK_OK(kt_send(b, b_na, "p", 1));
	CHECK_EQ(poll(&pfd, 1, 1000), 1);
	CHECK(pfd.revents & POLLIN);
	CHECK_EQ(epoll_wait(ep, out, 2, 1000), 1);
	CHECK(out[0].events & EPOLLIN);
	/* PEEK leaves it readable, RECV does not. */
	kt_recv(a, BUS1_RECV_FLAG_PEEK, &m);
	CHECK_EQ(poll(&pfd, 1, 0), 1);
	kt_recv(a, 0, &m);
	CHECK_OK(b1_peer_msg_release(a, &m));
	CHECK_EQ(poll(&pfd, 1, 0), 0);
	CHECK_EQ(epoll_wait(ep, out, 2, 0), 0);
	/* A notification is readable too. */
	CHECK_OK(b1_peer_handle_release(a, na));
	CHECK_EQ(poll(&(struct pollfd){ .fd = b1_peer_get_fd(b), .events = POLLIN }, 1, 1000), 1);
	/* Hang-up after disconnect. */
	CHECK_OK(b1_peer_disconnect(a));
	CHECK_EQ(poll(&pfd, 1, 0), 1);
	CHECK(pfd.revents & POLLHUP);
	CHECK_EQ(epoll_wait(ep, out, 2, 0), 1);
	CHECK(out[0].events & EPOLLHUP);
	close(ep);
	b1_peer_free(a);
	b1_peer_free(b);
}

/* A blocked poller is woken by a SEND from another process. */
static void test_poll_wakeup(void)
{
	struct b1_peer *a = kt_peer(), *b = kt_peer();
	struct pollfd pfd = { .fd = b1_peer_get_fd(a), .events = POLLIN };
	uint64_t na, b_na;
	double t0;
	pid_t pid;
	int status;

	kt_node(a, b, &na, &b_na);
	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		usleep(200000);
		_exit(kt_send(b, b_na, "w", 1) < 0);
	}
	t0 = kt_now();
	CHECK_EQ(poll(&pfd, 1, 10000), 1);
	CHECK(kt_now() - t0 < 9);
	CHECK_EQ(waitpid(pid, &status, 0), pid);
	CHECK_EQ(status, 0);
	b1_peer_free(a);
	b1_peer_free(b);
}

static const struct kt_case cases[] = {
	KT_CASE(test_data_gather),
	KT_CASE(test_pool_readonly),
	KT_CASE(test_slice_release),
	KT_CASE(test_pool_full),
	KT_CASE(test_pool_memory),
	KT_CASE(test_peek),
	KT_CASE(test_fds),
	KT_CASE(test_declined_fds),
	KT_CASE(test_fds_emfile),
	KT_CASE(test_multicast),
	KT_CASE(test_multicast_many),
	KT_CASE(test_credentials),
	KT_CASE(test_credentials_pidns),
	KT_CASE(test_credentials_userns),
	KT_CASE(test_poll),
	KT_CASE(test_poll_wakeup),
};

int main(int argc, char **argv)
{
	return kt_main(cases, sizeof(cases) / sizeof(cases[0]), argc, argv);
}
