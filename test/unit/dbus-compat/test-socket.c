/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Tests of struct socket over real socketpairs: framing across and within
 * reads, fd attachment, fd leak checks, back-pressure, size limits,
 * credentials, the raw (SASL) to framing handover, and snapshot/restore across a
 * re-exec.
 */

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "dbus-compat/message.h"
#include "dbus-compat/sasl.h"
#include "dbus-compat/socket.h"
#include "check.h"

static int count_fds(void)
{
	char path[64];
	int n = 0, fd;

	for (fd = 0; fd < 4096; fd++) {
		snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
		if (access(path, F_OK) == 0)
			n++;
	}
	return n;
}

static void put_u32(uint8_t *p, uint32_t v, bool big)
{
	if (big) {
		p[0] = v >> 24;
		p[1] = v >> 16;
		p[2] = v >> 8;
		p[3] = v;
	} else {
		p[0] = v;
		p[1] = v >> 8;
		p[2] = v >> 16;
		p[3] = v >> 24;
	}
}

/*
 * Build a frame: fixed header, @fields bytes of "fields" (filled with 'f'),
 * padding to 8, @body bytes of body, every byte after the header derived
 * from @serial so frames can be told apart. Returns malloc()ed bytes.
 */
static uint8_t *make_frame(uint32_t fields, uint32_t body, uint32_t serial, bool big,
			   size_t *sizep)
{
	size_t size = 16 + ((fields + 7) & ~7U) + body, i;
	uint8_t *f = malloc(size);

	CHECK(f);
	f[0] = big ? 'B' : 'l';
	f[1] = 1;
	f[2] = 0;
	f[3] = 1;
	put_u32(f + 4, body, big);
	put_u32(f + 8, serial, big);
	put_u32(f + 12, fields, big);
	for (i = 16; i < size; i++)
		f[i] = (uint8_t)(serial * 31 + i);
	*sizep = size;
	return f;
}

static void pair(int sv[2])
{
	CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0);
}

static struct socket *new_socket(int fd, bool framing)
{
	struct socket *s;

	CHECK(socket_new(&s, fd) == 0);
	if (framing)
		socket_start_framing(s);
	return s;
}

static void send_all(int fd, const void *p, size_t n)
{
	while (n > 0) {
		ssize_t k = send(fd, p, n, MSG_NOSIGNAL);

		CHECK(k > 0);
		p = (const uint8_t *)p + k;
		n -= (size_t)k;
	}
}

static void send_with_fds(int fd, const void *p, size_t n, const int *fds, size_t n_fds)
{
	union {
		struct cmsghdr align;
		uint8_t buf[CMSG_SPACE(sizeof(int) * 16)];
	} control;
	struct iovec iov = { .iov_base = (void *)p, .iov_len = n };
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1 };
	struct cmsghdr *c;

	CHECK(n_fds <= 16);
	memset(&control, 0, sizeof(control));
	msg.msg_control = &control;
	msg.msg_controllen = CMSG_SPACE(sizeof(int) * n_fds);
	c = CMSG_FIRSTHDR(&msg);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int) * n_fds);
	memcpy(CMSG_DATA(c), fds, sizeof(int) * n_fds);
	CHECK(sendmsg(fd, &msg, MSG_NOSIGNAL) == (ssize_t)n);
}

/* Same open file? */
static bool same_file(int a, int b)
{
	struct stat sa, sb;

	CHECK(fstat(a, &sa) == 0);
	CHECK(fstat(b, &sb) == 0);
	return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

static void expect_frame(struct socket *s, const uint8_t *data, size_t size, size_t n_fds,
			 struct socket_frame *out)
{
	struct socket_frame f = {};
	int r;

	r = socket_read_frame(s, &f);
	if (r != 0)
		fprintf(stderr, "socket_read_frame: %d\n", r);
	CHECK(r == 0);
	CHECK(f.n_data == size);
	CHECK(!memcmp(f.data, data, size));
	CHECK(f.n_fds == n_fds);
	CHECK((f.fds == NULL) == (n_fds == 0));
	if (out)
		*out = f;
	else
		socket_frame_deinit(&f);
}

static void test_frame_size(void)
{
	uint8_t h[16] = { 0, 1, 0, 1 };
	size_t size;

	put_u32(h + 4, 10, false);
	put_u32(h + 12, 5, false);
	h[0] = 'l';
	CHECK(socket_frame_size(h, &size) == 0);
	CHECK(size == 16 + 8 + 10);
	h[0] = 'B';
	put_u32(h + 4, 10, true);
	put_u32(h + 12, 16, true);
	CHECK(socket_frame_size(h, &size) == 0);
	CHECK(size == 16 + 16 + 10);
	h[0] = 'x';
	CHECK(socket_frame_size(h, &size) == SOCKET_E_PROTOCOL);
	h[0] = 'B';
	h[3] = 2; /* protocol version */
	CHECK(socket_frame_size(h, &size) == SOCKET_E_PROTOCOL);
	h[3] = 1;
	CHECK(socket_frame_size(h, &size) == 0);
	put_u32(h + 12, 64 * 1024 * 1024 + 8, true); /* fields array > 64 MiB */
	put_u32(h + 4, 0, true);
	CHECK(socket_frame_size(h, &size) == SOCKET_E_PROTOCOL);
	put_u32(h + 12, 64 * 1024 * 1024, true);
	CHECK(socket_frame_size(h, &size) == 0);
	CHECK(size == 16 + 64 * 1024 * 1024);

	/* Exactly the limit is fine, one byte more is not. */
	h[0] = 'l';
	put_u32(h + 12, 8, false);
	put_u32(h + 4, SOCKET_FRAME_MAX - 24, false);
	CHECK(socket_frame_size(h, &size) == 0);
	CHECK(size == SOCKET_FRAME_MAX);
	put_u32(h + 4, SOCKET_FRAME_MAX - 23, false);
	CHECK(socket_frame_size(h, &size) == SOCKET_E_PROTOCOL);
	/* 32-bit lengths at their maximum do not wrap. */
	put_u32(h + 4, 0xffffffff, false);
	put_u32(h + 12, 0xffffffff, false);
	CHECK(socket_frame_size(h, &size) == SOCKET_E_PROTOCOL);
}

static void test_split_frames(void)
{
	int sv[2];
	struct socket *s;
	uint8_t *f;
	size_t size, i;
	struct socket_frame fr;

	pair(sv);
	s = new_socket(sv[0], true);
	f = make_frame(5, 100, 7, false, &size);

	/* One byte at a time: nothing until the last byte. */
	for (i = 0; i < size; i++) {
		send_all(sv[1], f + i, 1);
		CHECK(socket_dispatch_read(s) == 0);
		if (i + 1 < size)
			CHECK(socket_read_frame(s, &fr) == SOCKET_E_AGAIN);
	}
	expect_frame(s, f, size, 0, NULL);
	CHECK(socket_read_frame(s, &fr) == SOCKET_E_AGAIN);
	CHECK(socket_get_buffered_bytes(s) == 0);
	free(f);

	/* Big-endian, split in the middle of the header. */
	f = make_frame(9, 3, 8, true, &size);
	send_all(sv[1], f, 10);
	CHECK(socket_dispatch_read(s) == 0);
	CHECK(socket_read_frame(s, &fr) == SOCKET_E_AGAIN);
	send_all(sv[1], f + 10, size - 10);
	CHECK(socket_dispatch_read(s) == 0);
	expect_frame(s, f, size, 0, NULL);
	free(f);

	socket_free(s);
	close(sv[1]);
}

static void test_many_frames_one_read(void)
{
	int sv[2];
	struct socket *s;
	uint8_t *f[5], buf[4096];
	size_t size[5], off = 0, i;
	struct socket_frame fr;

	pair(sv);
	s = new_socket(sv[0], true);
	for (i = 0; i < 5; i++) {
		f[i] = make_frame((uint32_t)i * 3, (uint32_t)i * 50, (uint32_t)i + 1, i & 1,
				  &size[i]);
		memcpy(buf + off, f[i], size[i]);
		off += size[i];
	}
	/* Plus the first half of a sixth frame. */
	memcpy(buf + off, f[4], 10);
	send_all(sv[1], buf, off + 10);
	CHECK(socket_dispatch_read(s) == 0);
	CHECK(socket_get_buffered_bytes(s) == off + 10);
	/* Complete frames are buffered: no further read happens. */
	send_all(sv[1], f[4] + 10, size[4] - 10);
	CHECK(socket_dispatch_read(s) == 0);
	CHECK(socket_get_buffered_bytes(s) == off + 10);

	for (i = 0; i < 5; i++)
		expect_frame(s, f[i], size[i], 0, NULL);
	CHECK(socket_read_frame(s, &fr) == SOCKET_E_AGAIN);
	CHECK(socket_dispatch_read(s) == 0);
	expect_frame(s, f[4], size[4], 0, NULL);

	/* socket_peek_frame() + socket_take_frame() into caller memory. */
	send_all(sv[1], f[2], size[2]);
	CHECK(socket_dispatch_read(s) == 0);
	{
		size_t n, n_fds = 99;
		int *fds = (int *)1;
		uint8_t *dst;

		CHECK(socket_peek_frame(s, &n) == 0);
		CHECK(n == size[2]);
		dst = malloc(n);
		CHECK(socket_take_frame(s, dst, &fds, &n_fds) == 0);
		CHECK(!memcmp(dst, f[2], n));
		CHECK(fds == NULL && n_fds == 0);
		free(dst);
		CHECK(socket_peek_frame(s, &n) == SOCKET_E_AGAIN);
	}

	for (i = 0; i < 5; i++)
		free(f[i]);
	socket_free(s);
	close(sv[1]);
}

static void test_fds_attach(void)
{
	int sv[2], p[2], before = count_fds();
	struct socket *s;
	uint8_t *a, *b, *c, buf[1024];
	size_t na, nb, nc;
	struct socket_frame fr;

	CHECK(pipe2(p, O_CLOEXEC) == 0);
	pair(sv);
	s = new_socket(sv[0], true);
	a = make_frame(0, 40, 1, false, &na);
	b = make_frame(8, 24, 2, false, &nb);
	c = make_frame(0, 8, 3, false, &nc);

	/*
	 * A without fds, B with two fds, C without: separate sendmsg calls
	 * read by one recvmsg (the kernel glues A to B's segment). The fds
	 * come with the frame that read began in, A: the owner keeps them in
	 * its fd stream for B, which declares them (as libdbus' loader).
	 */
	send_all(sv[1], a, na);
	send_with_fds(sv[1], b, nb, p, 2);
	send_all(sv[1], c, nc);
	CHECK(socket_dispatch_read(s) == 0);
	expect_frame(s, a, na, 2, &fr);
	CHECK(same_file(fr.fds[0], p[0]));
	CHECK(same_file(fr.fds[1], p[1]));
	CHECK(fcntl(fr.fds[0], F_GETFD) & FD_CLOEXEC);
	socket_frame_deinit(&fr);
	expect_frame(s, b, nb, 0, NULL);
	/* C may need another read (the kernel stops after the fd segment). */
	if (socket_read_frame(s, &fr) == SOCKET_E_AGAIN)
		CHECK(socket_dispatch_read(s) == 0);
	expect_frame(s, c, nc, 0, NULL);

	/* A message split across reads with fds on its first part only. */
	send_with_fds(sv[1], b, 5, p, 1);
	CHECK(socket_dispatch_read(s) == 0);
	CHECK(socket_read_frame(s, &fr) == SOCKET_E_AGAIN);
	send_all(sv[1], b + 5, nb - 5);
	CHECK(socket_dispatch_read(s) == 0);
	expect_frame(s, b, nb, 1, &fr);
	CHECK(same_file(fr.fds[0], p[0]));
	socket_frame_deinit(&fr);

	/* Two fd-carrying messages back to back. */
	memcpy(buf, b, nb);
	send_with_fds(sv[1], b, nb, p, 1);
	send_with_fds(sv[1], a, na, p + 1, 1);
	CHECK(socket_dispatch_read(s) == 0);
	expect_frame(s, b, nb, 1, &fr);
	CHECK(same_file(fr.fds[0], p[0]));
	socket_frame_deinit(&fr);
	if (socket_read_frame(s, &fr) == SOCKET_E_AGAIN)
		CHECK(socket_dispatch_read(s) == 0);
	expect_frame(s, a, na, 1, &fr);
	CHECK(same_file(fr.fds[0], p[1]));
	socket_frame_deinit(&fr);

	socket_free(s);
	close(sv[1]);
	close(p[0]);
	close(p[1]);
	free(a);
	free(b);
	free(c);
	CHECK(count_fds() == before);
}

static void test_fds_misplaced(void)
{
	int sv[2], p[2], before = count_fds();
	struct socket *s;
	uint8_t *b;
	size_t nb;
	struct socket_frame fr;

	CHECK(pipe2(p, O_CLOEXEC) == 0);
	pair(sv);
	s = new_socket(sv[0], true);
	b = make_frame(8, 64, 2, false, &nb);

	/* fds sent with bytes in the middle of a message: the message's (dbus-daemon). */
	send_all(sv[1], b, 20);
	CHECK(socket_dispatch_read(s) == 0);
	CHECK(socket_read_frame(s, &fr) == SOCKET_E_AGAIN);
	send_with_fds(sv[1], b + 20, nb - 20, p, 2);
	CHECK(socket_dispatch_read(s) == 0);
	expect_frame(s, b, nb, 2, &fr);
	CHECK(same_file(fr.fds[0], p[0]));
	CHECK(same_file(fr.fds[1], p[1]));
	socket_frame_deinit(&fr);
	/* And with the last byte alone. */
	send_all(sv[1], b, nb - 1);
	CHECK(socket_dispatch_read(s) == 0);
	CHECK(socket_read_frame(s, &fr) == SOCKET_E_AGAIN);
	send_with_fds(sv[1], b + nb - 1, 1, p, 1);
	CHECK(socket_dispatch_read(s) == 0);
	expect_frame(s, b, nb, 1, &fr);
	socket_frame_deinit(&fr);
	CHECK(!socket_holds_fds(s));
	socket_free(s);
	close(sv[1]);

	/* fds that arrive during authentication and get consumed by SASL. */
	pair(sv);
	s = new_socket(sv[0], false);
	send_with_fds(sv[1], "\0AUTH\r\n", 7, p, 2);
	CHECK(socket_dispatch_read(s) == 0);
	{
		size_t n;

		socket_peek_raw(s, &n);
		CHECK(n == 7);
		socket_consume_raw(s, n);
	}
	socket_start_framing(s);
	CHECK(socket_read_frame(s, &fr) == SOCKET_E_PROTOCOL);
	socket_free(s);
	close(sv[1]);

	close(p[0]);
	close(p[1]);
	free(b);
	CHECK(count_fds() == before);
}

/* ---- write side --------------------------------------------------------- */

struct test_entry {
	struct socket_entry entry;
	struct iovec iov[3];
	int fds[4];
	size_t n_fds;
	unsigned int *released;
};

static void test_entry_release(struct socket_entry *e)
{
	struct test_entry *t = (struct test_entry *)e;
	size_t i;

	(*t->released)++;
	for (i = 0; i < t->n_fds; i++)
		close(t->fds[i]);
	free(t);
}

/* Queue @data split over up to three iovecs, with dup()s of @fds. */
static struct test_entry *queue_entry(struct socket *s, const uint8_t *data, size_t n,
				      const int *fds, size_t n_fds, unsigned int *released)
{
	struct test_entry *t = calloc(1, sizeof(*t));
	size_t i, third = n / 3;

	CHECK(t);
	t->iov[0] = (struct iovec){ (void *)data, third };
	t->iov[1] = (struct iovec){ (void *)(data + third), 0 };
	t->iov[2] = (struct iovec){ (void *)(data + third), n - third };
	for (i = 0; i < n_fds; i++) {
		t->fds[i] = fcntl(fds[i], F_DUPFD_CLOEXEC, 3);
		CHECK(t->fds[i] >= 0);
	}
	t->n_fds = n_fds;
	t->released = released;
	t->entry.iov = t->iov;
	t->entry.n_iov = 3;
	t->entry.fds = t->fds;
	t->entry.n_fds = n_fds;
	t->entry.release = test_entry_release;
	CHECK(socket_queue(s, &t->entry) == 0);
	return t;
}

static void test_write_fds(void)
{
	int sv[2], p[2], before = count_fds();
	struct socket *w, *r;
	uint8_t *f[4];
	size_t n[4], i, total = 0;
	unsigned int released = 0;
	struct socket_frame fr;
	const size_t nfds[4] = { 1, 0, 2, 0 };

	CHECK(pipe2(p, O_CLOEXEC) == 0);
	pair(sv);
	w = new_socket(sv[0], true);
	r = new_socket(sv[1], true);

	for (i = 0; i < 4; i++) {
		f[i] = make_frame(3, 20 + (uint32_t)i, (uint32_t)i, false, &n[i]);
		queue_entry(w, f[i], n[i], p, nfds[i], &released);
		total += n[i];
	}
	CHECK(socket_wants_write(w));
	CHECK(socket_get_queued_bytes(w) == total);
	CHECK(socket_get_queued_fds(w) == 3);
	CHECK(socket_dispatch_write(w) == 0);
	CHECK(!socket_wants_write(w));
	CHECK(socket_get_queued_bytes(w) == 0);
	CHECK(socket_get_queued_fds(w) == 0);
	CHECK(released == 4);

	/*
	 * The reader gets the fds as one stream, each message's by the time
	 * the message is complete (a read that begins in frame 1 may bring
	 * frame 2's fds with it): p0, then p0 and p1.
	 */
	{
		const int want[3] = { p[0], p[0], p[1] };
		size_t got = 0, declared = 0, k;

		for (i = 0; i < 4; i++) {
			while (socket_read_frame(r, &fr) == SOCKET_E_AGAIN)
				CHECK(socket_dispatch_read(r) == 0);
			CHECK(fr.n_data == n[i] && !memcmp(fr.data, f[i], n[i]));
			for (k = 0; k < fr.n_fds; k++) {
				CHECK(got < 3);
				CHECK(same_file(fr.fds[k], want[got++]));
			}
			declared += nfds[i];
			CHECK(got >= declared);
			socket_frame_deinit(&fr);
			free(f[i]);
		}
		CHECK(got == 3);
	}

	/* Too many fds: refused, release not called. */
	{
		struct socket_entry e = {};
		struct iovec v = { "x", 1 };
		int many[SOCKET_FDS_MAX + 1];

		memset(many, 0, sizeof(many));
		e.iov = &v;
		e.n_iov = 1;
		e.fds = many;
		e.n_fds = SOCKET_FDS_MAX + 1;
		e.release = test_entry_release;
		CHECK(socket_queue(w, &e) == SOCKET_E_TOO_MANY_FDS);
		CHECK(!socket_wants_write(w));
	}
	/* Empty entry: released at once. */
	{
		struct test_entry *t = calloc(1, sizeof(*t));

		t->released = &released;
		t->entry.release = test_entry_release;
		CHECK(socket_queue(w, &t->entry) == 0);
		CHECK(released == 5);
		CHECK(!socket_wants_write(w));
	}

	socket_free(w);
	socket_free(r);
	close(p[0]);
	close(p[1]);
	CHECK(count_fds() == before);
}

/* Disconnect with fds queued in both directions: nothing leaks. */
static void test_disconnect_leaks(void)
{
	int sv[2], p[2], before = count_fds(), i;
	struct socket *w, *r;
	uint8_t *f;
	size_t n;
	unsigned int released = 0;

	CHECK(pipe2(p, O_CLOEXEC) == 0);
	pair(sv);
	w = new_socket(sv[0], true);
	r = new_socket(sv[1], true);
	f = make_frame(0, 64 * 1024, 1, false, &n);

	/* Queue more than the socket buffer takes, every entry with fds. */
	for (i = 0; i < 64; i++)
		queue_entry(w, f, n, p, 2, &released);
	CHECK(socket_dispatch_write(w) == 0);
	CHECK(socket_wants_write(w));
	CHECK(released < 64);

	/* The reader picked up fds but no complete frame yet... */
	CHECK(socket_dispatch_read(r) == 0);
	/* ...and queued some of its own. */
	for (i = 0; i < 3; i++)
		queue_entry(r, f, n, p, 1, &released);

	socket_free(r);
	socket_free(w);
	CHECK(released == 67);
	close(p[0]);
	close(p[1]);
	free(f);
	/* In-flight fds in the kernel died with the sockets. */
	CHECK(count_fds() == before);
}

static void test_backpressure(void)
{
	int sv[2], sndbuf = 4096;
	struct socket *w;
	uint8_t *f, *got;
	size_t n, total = 0, recvd = 0, expect_q, k;
	unsigned int released = 0, rounds = 0;
	const unsigned int count = 3000; /* more than IOV_MAX entries */

	pair(sv);
	CHECK(setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof(sndbuf)) == 0);
	w = new_socket(sv[0], true);
	f = make_frame(0, 1000, 5, false, &n);
	for (k = 0; k < count; k++) {
		queue_entry(w, f, n, NULL, 0, &released);
		total += n;
	}
	CHECK(socket_get_queued_bytes(w) == total);

	/* The peer does not read: writing stops, nothing blocks. */
	CHECK(socket_dispatch_write(w) == 0);
	CHECK(socket_dispatch_write(w) == 0);
	CHECK(socket_wants_write(w));
	expect_q = socket_get_queued_bytes(w);
	CHECK(expect_q > 0 && expect_q < total);
	CHECK(released == (total - expect_q) / n);

	/* Drain the peer, resume, until everything went through in order. */
	got = malloc(total);
	CHECK(got);
	while (recvd < total) {
		ssize_t m = recv(sv[1], got + recvd, total - recvd, MSG_DONTWAIT);

		if (m > 0)
			recvd += (size_t)m;
		else
			CHECK(m < 0 && errno == EAGAIN);
		CHECK(socket_dispatch_write(w) == 0);
		/* What is neither received nor queued is in the kernel. */
		CHECK(socket_get_queued_bytes(w) <= total - recvd);
		CHECK(++rounds < 1000000);
	}
	CHECK(!socket_wants_write(w));
	CHECK(socket_get_queued_bytes(w) == 0);
	CHECK(released == count);
	for (k = 0; k < count; k++)
		CHECK(!memcmp(got + k * n, f, n));
	printf("# back-pressure: %zu bytes in %u drain rounds\n", total, rounds);

	free(got);
	free(f);
	socket_free(w);
	close(sv[1]);
}

static void test_peer_gone(void)
{
	int sv[2];
	struct socket *s;
	uint8_t *f;
	size_t n;
	unsigned int released = 0;
	struct socket_frame fr;

	/* EOF on read; frames before it are still handed out. */
	pair(sv);
	s = new_socket(sv[0], true);
	f = make_frame(0, 10, 1, false, &n);
	send_all(sv[1], f, n);
	send_all(sv[1], f, 5);
	close(sv[1]);
	CHECK(socket_dispatch_read(s) == 0);
	/* A complete frame is buffered: no read, so no EOF yet. */
	CHECK(socket_dispatch_read(s) == 0);
	expect_frame(s, f, n, 0, NULL);
	CHECK(socket_dispatch_read(s) == SOCKET_E_EOF);
	CHECK(socket_dispatch_read(s) == SOCKET_E_EOF);
	CHECK(socket_read_frame(s, &fr) == SOCKET_E_AGAIN);
	CHECK(socket_get_buffered_bytes(s) == 5);

	/* EPIPE on write. */
	queue_entry(s, f, n, NULL, 0, &released);
	CHECK(socket_dispatch_write(s) == SOCKET_E_EOF);
	socket_free(s);
	CHECK(released == 1);
	free(f);
}

static void test_too_large(void)
{
	int sv[2];
	struct socket *s;
	uint8_t h[16] = { 'l', 1, 0, 1 };
	struct socket_frame fr;
	struct mallinfo2 before, after;

	pair(sv);
	s = new_socket(sv[0], true);
	put_u32(h + 4, SOCKET_FRAME_MAX, false);
	put_u32(h + 12, 8, false);
	before = mallinfo2();
	send_all(sv[1], h, 16);
	send_all(sv[1], "0123456789", 10);
	CHECK(socket_dispatch_read(s) == 0);
	CHECK(socket_read_frame(s, &fr) == SOCKET_E_PROTOCOL);
	CHECK(socket_dispatch_read(s) == SOCKET_E_PROTOCOL);
	after = mallinfo2();
	/* Nothing near the claimed size was allocated. */
	CHECK(after.hblkhd + after.uordblks < before.hblkhd + before.uordblks + 1024 * 1024);
	CHECK(socket_get_buffered_bytes(s) == 26);
	socket_free(s);
	close(sv[1]);

	/* Bad byte order mark. */
	pair(sv);
	s = new_socket(sv[0], true);
	h[0] = 'X';
	send_all(sv[1], h, 16);
	CHECK(socket_dispatch_read(s) == 0);
	CHECK(socket_read_frame(s, &fr) == SOCKET_E_PROTOCOL);
	socket_free(s);
	close(sv[1]);
}

/* ---- large frames (adopted buffers) and input memory --------------------- */

/*
 * Take the next frame, which must be complete and equal to @data, and check
 * that it is handed out in the very buffer it was received into (no copy):
 * socket_peek_raw() shows the receive buffer.
 */
static void expect_adopted(struct socket *s, const uint8_t *data, size_t size, size_t n_fds,
			   struct socket_frame *out)
{
	struct socket_frame f = {};
	const void *in;
	size_t n;

	in = socket_peek_raw(s, &n);
	CHECK(n == size);
	CHECK(socket_read_frame(s, &f) == 0);
	CHECK(f.data == in);
	CHECK(f.n_data == size && !memcmp(f.data, data, size));
	CHECK(f.n_fds == n_fds);
	CHECK(socket_get_buffered_bytes(s) == 0);
	if (out)
		*out = f;
	else
		socket_frame_deinit(&f);
}

/*
 * Send @n bytes on @fd while @s reads the other end in this thread (a large
 * frame does not fit the kernel's buffers). Nothing it reads may complete a
 * frame before the last byte is sent.
 */
static void send_reading(int fd, struct socket *s, const void *p, size_t n)
{
	unsigned int rounds = 0;

	while (n > 0) {
		ssize_t k = send(fd, p, n, MSG_NOSIGNAL | MSG_DONTWAIT);

		if (k < 0) {
			CHECK(errno == EAGAIN);
			CHECK(socket_dispatch_read(s) == 0);
			CHECK(++rounds < 100000);
			continue;
		}
		p = (const uint8_t *)p + k;
		n -= (size_t)k;
	}
}

/* Read until a frame is complete (the peer has sent all of it). */
static void read_until_frame(struct socket *s)
{
	size_t n;
	unsigned int rounds = 0;

	while (socket_peek_frame(s, &n) == SOCKET_E_AGAIN) {
		CHECK(socket_dispatch_read(s) == 0);
		CHECK(++rounds < 100000);
	}
}

/*
 * A frame just above SOCKET_FRAME_LARGE behind a small frame in the same
 * write, arriving in uneven pieces, followed by a small frame: the small
 * ones are copied, the large one is handed out in its receive buffer, and
 * reading never goes past its end.
 */
static void test_adopt_split(void)
{
	int sv[2];
	struct socket *s;
	uint8_t *small, *big, *buf;
	size_t ns, nb, off, step = 1;
	struct socket_frame fr;

	pair(sv);
	s = new_socket(sv[0], true);
	small = make_frame(3, 40, 1, false, &ns);
	/* 16 + 8 + body == SOCKET_FRAME_LARGE + 1 */
	big = make_frame(5, SOCKET_FRAME_LARGE + 1 - 24, 2, false, &nb);
	CHECK(nb == SOCKET_FRAME_LARGE + 1);

	buf = malloc(ns + 1000);
	memcpy(buf, small, ns);
	memcpy(buf + ns, big, 1000);
	send_all(sv[1], buf, ns + 1000);
	CHECK(socket_dispatch_read(s) == 0);
	expect_frame(s, small, ns, 0, NULL);
	CHECK(socket_read_frame(s, &fr) == SOCKET_E_AGAIN);

	/* The rest in growing pieces, one read each; then a small frame. */
	for (off = 1000; off < nb; off += step, step = step * 3 + 1) {
		if (step > nb - off)
			step = nb - off;
		send_all(sv[1], big + off, step);
		CHECK(socket_dispatch_read(s) == 0);
		if (off + step < nb)
			CHECK(socket_read_frame(s, &fr) == SOCKET_E_AGAIN);
	}
	send_all(sv[1], small, ns);
	/* A complete frame waits: nothing more is read. */
	CHECK(socket_dispatch_read(s) == 0);
	expect_adopted(s, big, nb, 0, NULL);
	CHECK(socket_dispatch_read(s) == 0);
	expect_frame(s, small, ns, 0, NULL);

	/* All of it in one write, read by as many reads as it takes. */
	send_reading(sv[1], s, big, nb);
	read_until_frame(s);
	expect_adopted(s, big, nb, 0, NULL);

	/* Big-endian, the header split in the middle. */
	free(big);
	big = make_frame(11, 300000, 3, true, &nb);
	send_all(sv[1], big, 9);
	CHECK(socket_dispatch_read(s) == 0);
	CHECK(socket_read_frame(s, &fr) == SOCKET_E_AGAIN);
	send_reading(sv[1], s, big + 9, nb - 9);
	read_until_frame(s);
	expect_adopted(s, big, nb, 0, NULL);

	free(buf);
	free(small);
	free(big);
	socket_free(s);
	close(sv[1]);
}

/* socket_is_drained(): whether another read right away would find nothing. */
static void test_drained(void)
{
	int sv[2];
	struct socket *s;
	uint8_t *f, *big;
	size_t n, nb;
	struct socket_frame fr;

	pair(sv);
	s = new_socket(sv[0], true);
	f = make_frame(0, 10, 1, false, &n);
	big = make_frame(0, 300000, 2, false, &nb);

	CHECK(socket_dispatch_read(s) == 0);
	CHECK(socket_is_drained(s));		/* EAGAIN */
	send_all(sv[1], f, n);
	send_all(sv[1], f, 5);
	CHECK(socket_dispatch_read(s) == 0);
	CHECK(socket_is_drained(s));		/* took less than it had room for */
	CHECK(socket_dispatch_read(s) == 0);
	CHECK(!socket_is_drained(s));		/* did not read: a frame waits */
	expect_frame(s, f, n, 0, NULL);

	/* A read that stops at a large frame's end is not a drained queue. */
	send_all(sv[1], f + 5, n - 5);
	CHECK(socket_dispatch_read(s) == 0);
	expect_frame(s, f, n, 0, NULL);
	send_all(sv[1], big, 1000);
	CHECK(socket_dispatch_read(s) == 0);
	send_reading(sv[1], s, big + 1000, nb - 1000);
	send_all(sv[1], f, n);
	read_until_frame(s);
	CHECK(!socket_is_drained(s));
	expect_adopted(s, big, nb, 0, NULL);
	CHECK(socket_dispatch_read(s) == 0);
	expect_frame(s, f, n, 0, NULL);
	CHECK(socket_read_frame(s, &fr) == SOCKET_E_AGAIN);

	free(f);
	free(big);
	socket_free(s);
	close(sv[1]);
}

/* Sizes around the threshold: every frame intact, adopted above it. */
static void test_adopt_limit(void)
{
	static const size_t sizes[] = {
		SOCKET_FRAME_LARGE - 8, SOCKET_FRAME_LARGE, SOCKET_FRAME_LARGE + 8,
		SOCKET_FRAME_LARGE + 1,
	};
	int sv[2];
	struct socket *s;
	size_t i, k;

	pair(sv);
	s = new_socket(sv[0], true);
	for (k = 0; k < 2; k++) {
		for (i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
			uint8_t *f;
			size_t n;

			f = make_frame(0, (uint32_t)(sizes[i] - 16), (uint32_t)i + 1, k, &n);
			CHECK(n == sizes[i]);
			send_reading(sv[1], s, f, n);
			read_until_frame(s);
			if (n > SOCKET_FRAME_LARGE)
				expect_adopted(s, f, n, 0, NULL);
			else
				expect_frame(s, f, n, 0, NULL);
			CHECK(socket_get_buffered_bytes(s) == 0);
			free(f);
		}
	}
	socket_free(s);
	close(sv[1]);
}

/* fds with a large frame: on its first segment they are its own. */
static void test_adopt_fds(void)
{
	int sv[2], p[2], before = count_fds();
	struct socket *s;
	uint8_t *big, *small;
	size_t nb, ns;
	struct socket_frame fr;

	CHECK(pipe2(p, O_CLOEXEC) == 0);
	pair(sv);
	s = new_socket(sv[0], true);
	big = make_frame(8, 500000, 4, false, &nb);
	small = make_frame(0, 16, 5, false, &ns);

	send_with_fds(sv[1], big, 100, p, 2);
	CHECK(socket_dispatch_read(s) == 0);
	send_reading(sv[1], s, big + 100, nb - 100);
	send_with_fds(sv[1], small, ns, p + 1, 1);
	read_until_frame(s);
	expect_adopted(s, big, nb, 2, &fr);
	CHECK(same_file(fr.fds[0], p[0]));
	CHECK(same_file(fr.fds[1], p[1]));
	socket_frame_deinit(&fr);
	read_until_frame(s);
	expect_frame(s, small, ns, 1, &fr);
	CHECK(same_file(fr.fds[0], p[1]));
	socket_frame_deinit(&fr);
	socket_free(s);
	close(sv[1]);

	/* fds in the middle of a large frame: the frame's, as dbus-daemon takes them. */
	pair(sv);
	s = new_socket(sv[0], true);
	send_reading(sv[1], s, big, 200000);
	send_with_fds(sv[1], big + 200000, 1000, p, 2);
	send_reading(sv[1], s, big + 201000, nb - 201000);
	for (;;) {
		int r = socket_dispatch_read(s);

		CHECK(r == 0);
		r = socket_read_frame(s, &fr);
		if (r == 0)
			break;
		CHECK(r == SOCKET_E_AGAIN);
	}
	CHECK(fr.n_data == nb && fr.n_fds == 2);
	CHECK(same_file(fr.fds[0], p[0]));
	socket_frame_deinit(&fr);
	socket_free(s);
	close(sv[1]);

	close(p[0]);
	close(p[1]);
	free(big);
	free(small);
	CHECK(count_fds() == before);
}

/*
 * Lengths that lie: a header claiming 100 MiB (valid) followed by a little
 * data and EOF must not allocate anywhere near 100 MiB, and a header beyond
 * the limit is refused before anything is allocated for it.
 */
static void test_adopt_bad_length(void)
{
	int sv[2];
	struct socket *s;
	uint8_t *f;
	size_t n;
	struct mallinfo2 before, after;
	struct socket_frame fr;
	int r;

	pair(sv);
	s = new_socket(sv[0], true);
	f = make_frame(0, 300000, 6, false, &n);
	put_u32(f + 4, 100U * 1024U * 1024U, false);
	before = mallinfo2();
	send_reading(sv[1], s, f, n);
	close(sv[1]);
	do {
		r = socket_dispatch_read(s);
		CHECK(r == 0 || r == SOCKET_E_EOF);
		CHECK(socket_read_frame(s, &fr) == SOCKET_E_AGAIN);
	} while (r == 0);
	CHECK(socket_get_buffered_bytes(s) == n);
	after = mallinfo2();
	/* At most the preallocation (4 MiB) and the shared read buffer. */
	CHECK(after.hblkhd + after.uordblks < before.hblkhd + before.uordblks + 5 * 1024 * 1024);
	socket_free(s);

	/* 16 + fields 8 + body beyond SOCKET_FRAME_MAX, after a valid frame. */
	pair(sv);
	s = new_socket(sv[0], true);
	put_u32(f + 4, SOCKET_FRAME_MAX, false);
	put_u32(f + 12, 8, false);
	send_all(sv[1], f, 1000);
	CHECK(socket_dispatch_read(s) == 0);
	CHECK(socket_read_frame(s, &fr) == SOCKET_E_PROTOCOL);
	CHECK(socket_dispatch_read(s) == SOCKET_E_PROTOCOL);
	socket_free(s);
	close(sv[1]);
	free(f);
}

/*
 * Sockets share one read buffer: remainders (incomplete frames) left in it
 * by one socket survive reads by others, in framing and raw mode, and an
 * idle socket holds no input buffer of its own.
 */
static void test_shared_input(void)
{
	enum { N = 64 };
	int sv[N][2];
	struct socket *s[N];
	uint8_t *f[N];
	size_t n[N], i, round;
	struct mallinfo2 before, after;
	const void *raw;
	size_t avail;

	before = mallinfo2();
	for (i = 0; i < N; i++) {
		pair(sv[i]);
		s[i] = new_socket(sv[i][0], i != 0);
		f[i] = make_frame((uint32_t)i % 9, (uint32_t)(i * 997) % 70000, (uint32_t)i + 1,
				  i & 1, &n[i]);
	}

	/* Socket 0 is in raw mode with half a line buffered. */
	send_all(sv[0][1], "AUTH EXTER", 10);
	CHECK(socket_dispatch_read(s[0]) == 0);

	/* Every socket gets a part of its frame, then the rest, interleaved. */
	for (round = 0; round < 3; round++) {
		for (i = 1; i < N; i++) {
			size_t a = n[i] * round / 3, b = n[i] * (round + 1) / 3;
			struct socket_frame fr;

			send_all(sv[i][1], f[i] + a, b - a);
			while (socket_get_buffered_bytes(s[i]) < b)
				CHECK(socket_dispatch_read(s[i]) == 0);
			if (round < 2)
				CHECK(socket_read_frame(s[i], &fr) == SOCKET_E_AGAIN);
		}
	}
	for (i = 1; i < N; i++)
		expect_frame(s[i], f[i], n[i], 0, NULL);

	/*
	 * Idle after complete messages: no input buffer per socket. The heap
	 * grew by the sockets and their test frames, not by a read buffer
	 * per socket (it used to be 16 KiB each).
	 */
	after = mallinfo2();
	avail = 0;
	for (i = 0; i < N; i++)
		avail += n[i];
	CHECK(after.uordblks + after.hblkhd <
	       before.uordblks + before.hblkhd + avail + N * 1024 + SOCKET_FRAME_LARGE);

	send_all(sv[0][1], "NAL\r\n", 5);
	CHECK(socket_dispatch_read(s[0]) == 0);
	raw = socket_peek_raw(s[0], &avail);
	CHECK(avail == 15 && !memcmp(raw, "AUTH EXTERNAL\r\n", 15));
	socket_consume_raw(s[0], avail);

	/* Each socket receives and hands out one more frame: the heap stays. */
	before = mallinfo2();
	for (i = 1; i < N; i++) {
		send_all(sv[i][1], f[i], n[i]);
		read_until_frame(s[i]);
		expect_frame(s[i], f[i], n[i], 0, NULL);
	}
	after = mallinfo2();
	CHECK(after.uordblks + after.hblkhd < before.uordblks + before.hblkhd + N * 64);

	for (i = 0; i < N; i++) {
		socket_free(s[i]);
		close(sv[i][1]);
		free(f[i]);
	}
}

/*
 * A valid method call (path "/", member "Echo", body "ay" of @n_body bytes)
 * as raw bytes; header 56 bytes.
 */
static uint8_t *make_call(uint32_t n_body, size_t *sizep)
{
	static const uint8_t fields[40] = {
		1, 1, 'o', 0, 1, 0, 0, 0, '/', 0, 0, 0, 0, 0, 0, 0,
		3, 1, 's', 0, 4, 0, 0, 0, 'E', 'c', 'h', 'o', 0, 0, 0, 0,
		8, 1, 'g', 0, 2, 'a', 'y', 0,
	};
	size_t size = 56 + 4 + n_body, i;
	uint8_t *f = malloc(size);

	CHECK(f);
	f[0] = 'l';
	f[1] = 1;
	f[2] = 0;
	f[3] = 1;
	put_u32(f + 4, 4 + n_body, false);
	put_u32(f + 8, 77, false);
	put_u32(f + 12, sizeof(fields), false);
	memcpy(f + 16, fields, sizeof(fields));
	put_u32(f + 56, n_body, false);
	for (i = 60; i < size; i++)
		f[i] = (uint8_t)(i * 7);
	*sizep = size;
	return f;
}

/*
 * What the broker does with a large frame: the message adopts the receive
 * buffer, so its body points into it (no copy), and frees it at the end.
 */
static void test_adopt_message(void)
{
	int sv[2];
	struct socket *s;
	struct socket_frame fr;
	struct message *m;
	uint8_t *f;
	size_t n, n_body;
	const uint8_t *body;

	pair(sv);
	s = new_socket(sv[0], true);
	f = make_call(SOCKET_FRAME_LARGE + 1000, &n);
	send_reading(sv[1], s, f, n);
	read_until_frame(s);
	expect_adopted(s, f, n, 0, &fr);
	CHECK(message_new_adopted(&m, fr.data, fr.n_data) == 0);
	CHECK(message_parse(m, NULL, 0) == 0);
	body = message_get_body(m, &n_body);
	CHECK(body == (const uint8_t *)fr.data + 56);
	CHECK(n_body == n - 56 && !memcmp(body, f + 56, n_body));
	CHECK(!strcmp(message_get_member(m), "Echo"));
	/* Stitching shares the adopted body. */
	{
		struct message *st;

		CHECK(message_stitch_sender(m, ":1.5", &st) == 0);
		CHECK(message_get_body(st, NULL) == body);
		message_unref(m);
		CHECK(!memcmp(message_get_body(st, NULL), f + 56, n_body));
		message_unref(st);	/* frees the buffer (ASan checks) */
	}

	/* Invalid content: refused, the buffer still freed with the message. */
	f[57] = 0x55;	/* the body's array length no longer matches */
	send_reading(sv[1], s, f, n);
	read_until_frame(s);
	expect_adopted(s, f, n, 0, &fr);
	CHECK(message_new_adopted(&m, fr.data, fr.n_data) == 0);
	CHECK(message_parse(m, NULL, 0) > 0);
	message_unref(m);

	/* A size out of range: refused, the buffer stays the caller's. */
	fr.data = malloc(8);
	CHECK(message_new_adopted(&m, fr.data, 8) == -EINVAL);
	free(fr.data);

	free(f);
	socket_free(s);
	close(sv[1]);
}

/* An 8 MiB message between two sockets, both nonblocking, one thread. */
static void test_large_frame(void)
{
	int sv[2];
	struct socket *w, *r;
	uint8_t *f;
	size_t n;
	unsigned int released = 0, rounds = 0;
	struct socket_frame fr = {};

	pair(sv);
	w = new_socket(sv[0], true);
	r = new_socket(sv[1], true);
	f = make_frame(13, 8 * 1024 * 1024, 9, false, &n);
	queue_entry(w, f, n, NULL, 0, &released);
	for (;;) {
		CHECK(socket_dispatch_write(w) == 0);
		CHECK(socket_dispatch_read(r) == 0);
		if (socket_peek_frame(r, &n) == 0)
			break;
		CHECK(++rounds < 100000);
	}
	/* Above SOCKET_LARGE_PREALLOC: the buffer grew, and is still handed out. */
	expect_adopted(r, f, n, 0, &fr);
	CHECK(fr.n_data == n && !memcmp(fr.data, f, n));
	CHECK(released == 1);
	socket_frame_deinit(&fr);
	CHECK(socket_get_buffered_bytes(r) == 0);
	free(f);
	socket_free(w);
	socket_free(r);
}

static void test_creds(void)
{
	int sv[2];
	struct socket *s;
	const struct socket_creds *c;
	struct socket_creds c2;
	gid_t groups[256];
	int ng, i;
	size_t j;

	pair(sv);
	s = new_socket(sv[0], true);
	c = socket_get_creds(s);
	CHECK(c->pid == getpid());
	CHECK(c->uid == getuid());
	CHECK(c->gid == getgid());
	ng = getgroups(256, groups);
	CHECK(ng >= 0);
	CHECK(c->n_groups == (size_t)ng);
	for (i = 0; i < ng; i++) {
		bool found = false;

		for (j = 0; j < c->n_groups; j++)
			found |= c->groups[j] == groups[i];
		CHECK(found);
	}
	printf("# creds: pid %d uid %u gid %u groups %zu label %s pidfd %s\n", (int)c->pid,
	       (unsigned int)c->uid, (unsigned int)c->gid, c->n_groups,
	       c->label ? c->label : "(none)", c->pidfd >= 0 ? "yes" : "no (kernel < 6.5)");

	/* The standalone query gives the same answer. */
	CHECK(socket_creds_query(&c2, sv[1]) == 0);
	CHECK(c2.pid == getpid() && c2.uid == getuid());
	socket_creds_deinit(&c2);
	socket_creds_deinit(&c2);

	socket_free(s);
	close(sv[1]);

	/* socket_new() on a non-socket fails and closes the fd. */
	{
		int p[2], before = count_fds();

		CHECK(pipe2(p, O_CLOEXEC) == 0);
		CHECK(socket_new(&s, p[0]) == -ENOTSOCK);
		close(p[1]);
		CHECK(count_fds() == before);
	}
}

/* More fds than fit next to SCM_CREDENTIALS: MSG_CTRUNC, nothing leaks. */
static void test_ctrunc(void)
{
	int sv[2], p[2], before = count_fds(), one = 1, i;
	int fds[SOCKET_FDS_MAX];
	struct socket *s;
	union {
		struct cmsghdr align;
		uint8_t buf[CMSG_SPACE(sizeof(int) * SOCKET_FDS_MAX)];
	} control;
	struct iovec iov = { .iov_base = "l", .iov_len = 1 };
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1 };
	struct cmsghdr *c;

	CHECK(pipe2(p, O_CLOEXEC) == 0);
	pair(sv);
	s = new_socket(sv[0], true);
	/* Credentials take control space the fds then lack. */
	CHECK(setsockopt(socket_get_fd(s), SOL_SOCKET, SO_PASSCRED, &one, sizeof(one)) == 0);
	for (i = 0; i < (int)SOCKET_FDS_MAX; i++) {
		fds[i] = fcntl(p[0], F_DUPFD_CLOEXEC, 3);
		CHECK(fds[i] >= 0);
	}
	memset(&control, 0, sizeof(control));
	msg.msg_control = &control;
	msg.msg_controllen = sizeof(control);
	c = CMSG_FIRSTHDR(&msg);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(fds));
	memcpy(CMSG_DATA(c), fds, sizeof(fds));
	CHECK(sendmsg(sv[1], &msg, MSG_NOSIGNAL) == 1);
	for (i = 0; i < (int)SOCKET_FDS_MAX; i++)
		close(fds[i]);

	CHECK(socket_dispatch_read(s) == SOCKET_E_PROTOCOL);
	CHECK(socket_dispatch_read(s) == SOCKET_E_PROTOCOL);
	socket_free(s);
	close(sv[1]);
	close(p[0]);
	close(p[1]);
	CHECK(count_fds() == before);
}

/* SO_PEERGROUPS with more groups than the first buffer holds (needs root). */
static void test_many_groups(void)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	socklen_t len;
	struct socket_creds c;
	int lfd, afd, st;
	pid_t pid;
	size_t i;
	char ch;

	if (geteuid() != 0) {
		printf("# skip many-groups: not root\n");
		return;
	}
	snprintf(sa.sun_path + 1, sizeof(sa.sun_path) - 1, "test-socket-%d", (int)getpid());
	len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + strlen(sa.sun_path + 1));
	lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	CHECK(lfd >= 0);
	CHECK(bind(lfd, (struct sockaddr *)&sa, len) == 0);
	CHECK(listen(lfd, 1) == 0);

	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		gid_t groups[100];
		int fd;

		for (i = 0; i < 100; i++)
			groups[i] = (gid_t)(50000 + i);
		if (setgroups(100, groups) < 0)
			_exit(2);
		fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (fd < 0 || connect(fd, (struct sockaddr *)&sa, len) < 0)
			_exit(3);
		/* Stay until the parent has read our credentials. */
		if (read(fd, &ch, 1) < 0)
			_exit(4);
		_exit(0);
	}
	afd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
	CHECK(afd >= 0);
	CHECK(socket_creds_query(&c, afd) == 0);
	CHECK(c.pid == pid);
	CHECK(c.n_groups == 100);
	for (i = 0; i < 100; i++)
		CHECK(c.groups[i] == (gid_t)(50000 + i));
	if (c.pidfd >= 0) {
		/* The pidfd names the peer process. */
		char path[64], buf[256];
		FILE *f;
		bool found = false;

		snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", c.pidfd);
		f = fopen(path, "re");
		CHECK(f);
		while (fgets(buf, sizeof(buf), f))
			if (!strncmp(buf, "Pid:", 4))
				found = atoi(buf + 4) == pid;
		fclose(f);
		CHECK(found);
	}
	socket_creds_deinit(&c);
	close(afd);
	CHECK(waitpid(pid, &st, 0) == pid);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	close(lfd);
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Not a pass/fail test: prints throughput figures of writer -> reader. */
static void measure(unsigned int count, uint32_t body)
{
	int sv[2];
	struct socket *w, *r;
	uint8_t *f;
	size_t n;
	unsigned int released = 0, got = 0, queued = 0;
	double t0, t;
	struct socket_frame fr;

	pair(sv);
	w = new_socket(sv[0], true);
	r = new_socket(sv[1], true);
	f = make_frame(0, body, 1, false, &n);
	t0 = now();
	while (got < count) {
		/* Keep about 1 MiB queued, like a busy broker. */
		while (queued < count && socket_get_queued_bytes(w) < 1024 * 1024) {
			queue_entry(w, f, n, NULL, 0, &released);
			queued++;
		}
		CHECK(socket_dispatch_write(w) == 0);
		CHECK(socket_dispatch_read(r) == 0);
		while (socket_read_frame(r, &fr) == 0) {
			CHECK(fr.n_data == n);
			socket_frame_deinit(&fr);
			got++;
		}
	}
	t = now() - t0;
	printf("# throughput: %u messages of %zu bytes in %.3f s: %.0f msg/s, %.1f MiB/s\n",
	       count, n, t, count / t, (double)count * n / t / (1024 * 1024));
	CHECK(released == count);
	free(f);
	socket_free(w);
	socket_free(r);
}

/*
 * Randomized stream: messages of random sizes, some with fds, written by
 * struct socket through tiny kernel buffers (many partial writes) and read
 * back by struct socket; every frame must come back intact, and the fds in
 * the order they were sent, each message's by the time it is complete.
 */
static void test_random_stream(void)
{
	enum { N = 3000, NPIPES = 4 };
	int sv[2], pipes[NPIPES][2], before = count_fds(), buf = 4096;
	struct socket *w, *r;
	uint8_t *frames[N];
	size_t sizes[N], nfds[N], i, got = 0, fd_frame = 0, fd_index = 0;
	size_t n_received = 0, n_declared = 0;
	int which[N][3];
	unsigned int released = 0, rounds = 0;
	uint32_t seed = 12345;
	struct socket_frame fr;

	for (i = 0; i < NPIPES; i++)
		CHECK(pipe2(pipes[i], O_CLOEXEC) == 0);
	pair(sv);
	CHECK(setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &buf, sizeof(buf)) == 0);
	CHECK(setsockopt(sv[1], SOL_SOCKET, SO_RCVBUF, &buf, sizeof(buf)) == 0);
	w = new_socket(sv[0], true);
	r = new_socket(sv[1], true);

	for (i = 0; i < N; i++) {
		int fds[3];
		size_t k;

		seed = seed * 1103515245 + 12345;
		frames[i] = make_frame((seed >> 8) % 40, (seed >> 12) % ((seed & 1) ? 300 : 20000),
				       (uint32_t)i, (seed >> 3) & 1, &sizes[i]);
		nfds[i] = ((seed >> 20) % 10 == 0) ? 1 + (seed >> 24) % 3 : 0;
		for (k = 0; k < nfds[i]; k++) {
			which[i][k] = (int)((seed >> (4 + 3 * k)) % NPIPES);
			fds[k] = pipes[which[i][k]][0];
		}
		queue_entry(w, frames[i], sizes[i], fds, nfds[i], &released);
	}

	while (got < N) {
		int ret;

		CHECK(socket_dispatch_write(w) == 0);
		CHECK(socket_dispatch_read(r) == 0);
		while ((ret = socket_read_frame(r, &fr)) == 0) {
			size_t k;

			CHECK(got < N);
			CHECK(fr.n_data == sizes[got] && !memcmp(fr.data, frames[got], fr.n_data));
			/* The fds as one stream, each frame's there once it is complete. */
			for (k = 0; k < fr.n_fds; k++) {
				while (fd_frame < N && fd_index == nfds[fd_frame]) {
					fd_frame++;
					fd_index = 0;
				}
				CHECK(fd_frame < N);
				CHECK(same_file(fr.fds[k], pipes[which[fd_frame][fd_index++]][0]));
			}
			n_received += fr.n_fds;
			n_declared += nfds[got];
			CHECK(n_received >= n_declared);
			socket_frame_deinit(&fr);
			got++;
		}
		CHECK(ret == SOCKET_E_AGAIN);
		CHECK(++rounds < 10000000);
	}
	CHECK(released == N);
	CHECK(!socket_wants_write(w));
	printf("# random stream: %d messages in %u write/read rounds\n", N, rounds);

	for (i = 0; i < N; i++)
		free(frames[i]);
	for (i = 0; i < NPIPES; i++) {
		close(pipes[i][0]);
		close(pipes[i][1]);
	}
	socket_free(w);
	socket_free(r);
	CHECK(count_fds() == before);
}

/* Authentication through the raw interface, pipelined with a message. */
static void test_raw_to_framing(void)
{
	static const char auth[] = "\0AUTH EXTERNAL\r\nDATA\r\nNEGOTIATE_UNIX_FD\r\nBEGIN\r\n";
	int sv[2], p[2], before = count_fds();
	struct socket *s;
	struct sasl_server sasl;
	uint8_t *f, *buf;
	size_t n, c, avail;
	const void *raw;
	struct socket_frame fr;

	CHECK(pipe2(p, O_CLOEXEC) == 0);
	pair(sv);
	s = new_socket(sv[0], false);
	f = make_frame(4, 30, 1, false, &n);
	buf = malloc(sizeof(auth) - 1 + n);
	memcpy(buf, auth, sizeof(auth) - 1);
	memcpy(buf + sizeof(auth) - 1, f, n);
	/* The first message carries an fd and comes in the same write. */
	send_all(sv[1], buf, sizeof(auth) - 1);
	send_with_fds(sv[1], f, n, p, 1);

	CHECK(sasl_server_init(&sasl, getuid(), "00000000000000000000000000000000",
				SASL_SERVER_UNIX_FD) == 0);
	CHECK(socket_dispatch_read(s) == 0);
	raw = socket_peek_raw(s, &avail);
	CHECK(avail == sizeof(auth) - 1 + n);
	CHECK(sasl_server_feed(&sasl, raw, avail, &c) == SASL_SERVER_DONE);
	CHECK(c == sizeof(auth) - 1);
	socket_consume_raw(s, c);
	socket_start_framing(s);
	expect_frame(s, f, n, 1, &fr);
	CHECK(same_file(fr.fds[0], p[0]));
	socket_frame_deinit(&fr);

	sasl_server_deinit(&sasl);
	socket_free(s);
	close(sv[1]);
	close(p[0]);
	close(p[1]);
	free(f);
	free(buf);
	CHECK(count_fds() == before);
}

/* ---- handover across a re-exec (snapshot and restore) -------------------- */

static int dup_fd(int fd)
{
	int r = fcntl(fd, F_DUPFD_CLOEXEC, 3);

	CHECK(r >= 0);
	return r;
}

/*
 * Stand-in for the exec, in one process. After an exec the fd numbers a
 * snapshot lists are still open while the old struct socket and its entries
 * are gone. Here every fd the snapshot lists and the connection itself are
 * replaced by a dup() (the "surviving" number), then the old socket is freed
 * as usual: it closes its own originals and releases its entries (whose
 * owner, test_entry_release(), closes theirs). Afterwards the snapshot's fds
 * are exactly what the restored socket must own and close; count_fds() at the
 * end of each test checks that it does, once. Returns the connection's fd.
 */
static int exec_handover(struct socket *old, struct socket_snapshot *snap)
{
	size_t i, j;
	int fd;

	fd = dup_fd(socket_get_fd(old));
	for (i = 0; i < snap->n_in_fds; i++)
		for (j = 0; j < snap->in_fds[i].n_fds; j++)
			snap->in_fds[i].fds[j] = dup_fd(snap->in_fds[i].fds[j]);
	for (i = 0; i < snap->n_out; i++)
		for (j = 0; j < snap->out[i].n_fds; j++)
			snap->out[i].fds[j] = dup_fd(snap->out[i].fds[j]);
	socket_free(old);
	return fd;
}

/* Snapshot @old, "exec", restore: the socket that continues in its place. */
static struct socket *reexec(struct socket *old, struct socket_snapshot *snap)
{
	size_t buffered = socket_get_buffered_bytes(old);
	size_t queued = socket_get_queued_bytes(old), queued_fds = socket_get_queued_fds(old);
	bool holds = socket_holds_fds(old);
	struct socket *s;
	int fd;

	CHECK_EQ(socket_snapshot(old, snap), 0);
	/* Taking a snapshot changes nothing. */
	CHECK_EQ(socket_get_buffered_bytes(old), buffered);
	CHECK_EQ(socket_get_queued_bytes(old), queued);
	CHECK_EQ(socket_get_queued_fds(old), queued_fds);
	CHECK_EQ(snap->n_in, buffered);

	fd = exec_handover(old, snap);
	CHECK_EQ(socket_new_restored(&s, fd, snap), 0);
	CHECK_EQ(socket_get_fd(s), fd);
	CHECK_EQ(socket_get_buffered_bytes(s), buffered);
	CHECK_EQ(socket_get_queued_bytes(s), queued);
	CHECK_EQ(socket_get_queued_fds(s), queued_fds);
	CHECK(socket_holds_fds(s) == holds);
	CHECK(socket_wants_write(s) == (queued > 0));
	/* Its owner carried the credentials: none are read again. */
	CHECK(!socket_get_creds(s)->have_creds && socket_get_creds(s)->pidfd == -1);
	return s;
}

/*
 * (1) A complete frame and a frame of which the header and part of the body
 * arrived, with two fds, after the first was taken: the snapshot holds the
 * remainder and its fd batch; the restored socket completes the frame with its
 * fds, then reads the next one with its own fd. With @moved, another socket's
 * read moved the remainder out of the shared buffer into one of its own.
 */
static void test_restore_partial_frame(bool moved)
{
	int sv[2], ov[2], p[2], before = count_fds();
	struct socket *s, *other = NULL;
	struct socket_snapshot snap;
	struct socket_frame fr;
	uint8_t *a, *b, *c;
	size_t na, nb, nc, part = 30;
	const void *raw;
	size_t n;

	CHECK(pipe2(p, O_CLOEXEC) == 0);
	pair(sv);
	s = new_socket(sv[0], true);
	a = make_frame(0, 40, 1, false, &na);
	b = make_frame(8, 300, 2, false, &nb);
	c = make_frame(3, 20, 3, true, &nc);

	/* a alone first: a read that ran on into b would give b's fds to a. */
	send_all(sv[1], a, na);
	read_until_frame(s);
	expect_frame(s, a, na, 0, NULL);
	send_with_fds(sv[1], b, part, p, 2);
	while (socket_get_buffered_bytes(s) < part)
		CHECK(socket_dispatch_read(s) == 0);
	CHECK(socket_read_frame(s, &fr) == SOCKET_E_AGAIN);
	CHECK(socket_holds_fds(s));
	if (moved) {
		uint8_t *o;
		size_t no;

		pair(ov);
		other = new_socket(ov[0], true);
		o = make_frame(0, 8, 9, false, &no);
		send_all(ov[1], o, no);
		CHECK(socket_dispatch_read(other) == 0);
		expect_frame(other, o, no, 0, NULL);
		free(o);
	}

	s = reexec(s, &snap);
	CHECK(snap.framing && !snap.eof && !snap.violation);
	CHECK_EQ(snap.n_in, part);
	CHECK(!memcmp(snap.in, b, part));
	CHECK_EQ(snap.n_in_fds, 1);
	CHECK_EQ(snap.in_fds[0].start, 0);
	CHECK_EQ(snap.in_fds[0].end, part);
	CHECK_EQ(snap.in_fds[0].n_fds, 2);
	CHECK(same_file(snap.in_fds[0].fds[0], p[0]));
	CHECK(same_file(snap.in_fds[0].fds[1], p[1]));
	CHECK_EQ(snap.n_out, 0);
	CHECK(!snap.out);
	socket_snapshot_deinit(&snap);

	raw = socket_peek_raw(s, &n);
	CHECK(n == part && !memcmp(raw, b, part));
	CHECK(socket_read_frame(s, &fr) == SOCKET_E_AGAIN);
	CHECK(socket_dispatch_read(s) == 0); /* nothing there yet */
	CHECK(socket_read_frame(s, &fr) == SOCKET_E_AGAIN);

	send_all(sv[1], b + part, nb - part);
	read_until_frame(s);
	expect_frame(s, b, nb, 2, &fr);
	CHECK(same_file(fr.fds[0], p[0]));
	CHECK(same_file(fr.fds[1], p[1]));
	socket_frame_deinit(&fr);
	send_with_fds(sv[1], c, nc, p + 1, 1);
	read_until_frame(s);
	expect_frame(s, c, nc, 1, &fr);
	CHECK(same_file(fr.fds[0], p[1]));
	socket_frame_deinit(&fr);
	CHECK(socket_read_frame(s, &fr) == SOCKET_E_AGAIN);
	CHECK(!socket_holds_fds(s));
	CHECK_EQ(socket_get_buffered_bytes(s), 0);

	socket_free(s);
	close(sv[1]);
	if (other) {
		socket_free(other);
		close(ov[1]);
	}
	close(p[0]);
	close(p[1]);
	free(a);
	free(b);
	free(c);
	CHECK_EQ(count_fds(), before);
}

/*
 * A large frame (received into a buffer of its own) with an fd, half of it in
 * when the bus re-executes: the restored socket receives the rest into a
 * buffer that ends with the frame and hands that out without a copy.
 */
static void test_restore_large_frame(void)
{
	int sv[2], p[2], before = count_fds();
	struct socket *s;
	struct socket_snapshot snap;
	struct socket_frame fr;
	uint8_t *f;
	size_t n, part;

	CHECK(pipe2(p, O_CLOEXEC) == 0);
	pair(sv);
	s = new_socket(sv[0], true);
	f = make_frame(5, 1024 * 1024, 4, false, &n);
	part = n / 2;

	send_with_fds(sv[1], f, 100, p, 1);
	send_reading(sv[1], s, f + 100, part - 100);
	while (socket_get_buffered_bytes(s) < part)
		CHECK(socket_dispatch_read(s) == 0);
	CHECK(socket_read_frame(s, &fr) == SOCKET_E_AGAIN);

	s = reexec(s, &snap);
	CHECK_EQ(snap.n_in, part);
	CHECK(!memcmp(snap.in, f, part));
	CHECK_EQ(snap.n_in_fds, 1);
	CHECK_EQ(snap.in_fds[0].start, 0);
	CHECK_EQ(snap.in_fds[0].end, 100);
	socket_snapshot_deinit(&snap);

	send_reading(sv[1], s, f + part, n - part);
	read_until_frame(s);
	expect_adopted(s, f, n, 1, &fr);
	CHECK(same_file(fr.fds[0], p[0]));
	socket_frame_deinit(&fr);

	socket_free(s);
	close(sv[1]);
	close(p[0]);
	close(p[1]);
	free(f);
	CHECK_EQ(count_fds(), before);
}

/*
 * (2) Output: three entries with fds, the first partly written (the peer does
 * not read, the send buffer is small). The snapshot holds the rest of the
 * first without its fds (they went out with its first byte) and the others
 * whole with theirs; the restored socket writes the remaining stream, and the
 * peer gets every byte and every fd exactly once, in order, each message's by
 * the time it is complete.
 */
static void test_restore_output(void)
{
	int sv[2], p[2], sndbuf = 4096, before = count_fds();
	const size_t nfds[3] = { 1, 2, 1 };
	struct socket *w, *r;
	struct socket_snapshot snap;
	struct socket_frame fr;
	uint8_t *f[3];
	size_t n[3], i, total = 0, written, got = 0, declared = 0;
	unsigned int released = 0, rounds = 0;

	CHECK(pipe2(p, O_CLOEXEC) == 0);
	pair(sv);
	CHECK(setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof(sndbuf)) == 0);
	w = new_socket(sv[0], true);
	for (i = 0; i < 3; i++) {
		f[i] = make_frame(3, 64 * 1024 + (uint32_t)i, (uint32_t)i + 1, i == 1, &n[i]);
		queue_entry(w, f[i], n[i], p, nfds[i], &released);
		total += n[i];
	}
	CHECK(socket_dispatch_write(w) == 0);
	written = total - socket_get_queued_bytes(w);
	CHECK(written > 0 && written < n[0], "written %zu", written);
	CHECK_EQ(socket_get_queued_fds(w), 3);
	CHECK_EQ(released, 0);

	w = reexec(w, &snap);
	/* The old owner's entries were released by the old socket, not the new. */
	CHECK_EQ(released, 3);
	CHECK_EQ(snap.n_in, 0);
	CHECK_EQ(snap.n_in_fds, 0);
	CHECK_EQ(snap.n_out, 3);
	CHECK_EQ(snap.out[0].n_data, n[0] - written);
	CHECK(!memcmp(snap.out[0].data, f[0] + written, n[0] - written));
	CHECK(snap.out[0].n_fds == 0 && !snap.out[0].fds);
	for (i = 1; i < 3; i++) {
		CHECK_EQ(snap.out[i].n_data, n[i]);
		CHECK(!memcmp(snap.out[i].data, f[i], n[i]));
		CHECK_EQ(snap.out[i].n_fds, nfds[i]);
		CHECK(same_file(snap.out[i].fds[0], p[0]));
		if (nfds[i] > 1)
			CHECK(same_file(snap.out[i].fds[1], p[1]));
	}
	socket_snapshot_deinit(&snap);

	/* Drain: the peer reads while the restored socket writes. */
	r = new_socket(sv[1], true);
	for (i = 0; i < 3; i++) {
		while (socket_read_frame(r, &fr) == SOCKET_E_AGAIN) {
			CHECK(socket_dispatch_write(w) == 0);
			CHECK(socket_dispatch_read(r) == 0);
			CHECK(++rounds < 100000);
		}
		CHECK(fr.n_data == n[i] && !memcmp(fr.data, f[i], n[i]));
		/* One stream of fds (see test_write_fds()): p0, p0 p1, p0. */
		for (size_t k = 0; k < fr.n_fds; k++) {
			CHECK(got < 4);
			CHECK(same_file(fr.fds[k], got == 2 ? p[1] : p[0]));
			got++;
		}
		declared += nfds[i];
		CHECK(got >= declared);
		socket_frame_deinit(&fr);
	}
	CHECK_EQ(got, 4);
	CHECK(!socket_wants_write(w));
	CHECK_EQ(socket_get_queued_bytes(w), 0);
	CHECK_EQ(socket_get_queued_fds(w), 0);
	/* Nothing more on the wire. */
	CHECK(socket_dispatch_read(r) == 0);
	CHECK(socket_read_frame(r, &fr) == SOCKET_E_AGAIN);
	CHECK_EQ(socket_get_buffered_bytes(r), 0);
	CHECK(!socket_holds_fds(r));

	/* A restored socket frees queued entries (and closes their fds) too. */
	CHECK_EQ(socket_snapshot(w, &snap), 0);
	CHECK_EQ(snap.n_out, 0);
	socket_snapshot_deinit(&snap);

	socket_free(w);
	socket_free(r);
	for (i = 0; i < 3; i++)
		free(f[i]);
	close(p[0]);
	close(p[1]);
	CHECK_EQ(count_fds(), before);
}

/* Entries with fds still queued when a restored socket is freed. */
static void test_restore_output_dropped(void)
{
	int sv[2], p[2], before = count_fds();
	struct socket *w;
	struct socket_snapshot snap;
	unsigned int released = 0;
	uint8_t *f;
	size_t n;

	CHECK(pipe2(p, O_CLOEXEC) == 0);
	pair(sv);
	w = new_socket(sv[0], true);
	f = make_frame(0, 100, 1, false, &n);
	queue_entry(w, f, n, p, 2, &released);
	queue_entry(w, f, n, p, 1, &released);
	w = reexec(w, &snap);
	socket_snapshot_deinit(&snap);
	CHECK_EQ(socket_get_queued_fds(w), 3);
	socket_free(w);
	close(sv[1]);
	close(p[0]);
	close(p[1]);
	free(f);
	CHECK_EQ(count_fds(), before);
}

/* Feed the complete lines of the raw input to @sasl; queue its replies. */
static int feed_lines(struct socket *s, struct sasl_server *sasl, char *sent, size_t *n_sent)
{
	const char *raw, *out;
	size_t avail, lines = 0, c, n_out, i;
	int r;

	raw = socket_peek_raw(s, &avail);
	for (i = 1; i < avail; i++)
		if (raw[i - 1] == '\r' && raw[i] == '\n')
			lines = i + 1;
	r = sasl_server_feed(sasl, raw, lines, &c);
	CHECK(r >= 0);
	socket_consume_raw(s, c);
	out = sasl_server_peek_output(sasl, &n_out);
	CHECK(socket_queue_copy(s, out, n_out) == 0);
	memcpy(sent + *n_sent, out, n_out);
	*n_sent += n_out;
	sasl_server_consume_output(sasl, n_out);
	return r;
}

/*
 * (3) Raw (SASL) mode: an incomplete line buffered and the server's replies
 * queued, not yet written; then, after the restore, the rest of the lines
 * with the first message's start and its fd in one write, and a second
 * re-exec in framing mode, where the fd batch began with authentication bytes
 * already consumed.
 */
static void test_restore_sasl(void)
{
	static const char first[] = "\0AUTH EXTERNAL\r\nDA";
	static const char rest[] = "TA\r\nNEGOTIATE_UNIX_FD\r\nBEGIN\r\n";
	int sv[2], p[2], before = count_fds();
	struct socket *s;
	struct socket_snapshot snap;
	struct socket_frame fr;
	struct sasl_server sasl;
	char sent[512], recvd[512];
	uint8_t *f, *buf;
	size_t n, n_sent = 0, n_recvd = 0, part = 20;

	CHECK(pipe2(p, O_CLOEXEC) == 0);
	pair(sv);
	s = new_socket(sv[0], false);
	CHECK(sasl_server_init(&sasl, getuid(), "00000000000000000000000000000000",
			       SASL_SERVER_UNIX_FD) == 0);
	f = make_frame(4, 30, 1, false, &n);

	send_all(sv[1], first, sizeof(first) - 1);
	while (socket_get_buffered_bytes(s) < sizeof(first) - 1)
		CHECK(socket_dispatch_read(s) == 0);
	CHECK_EQ(feed_lines(s, &sasl, sent, &n_sent), 0);
	CHECK_EQ(socket_get_buffered_bytes(s), 2); /* "DA" */
	CHECK(n_sent > 0 && socket_wants_write(s));

	s = reexec(s, &snap);
	CHECK(!snap.framing);
	CHECK(snap.n_in == 2 && !memcmp(snap.in, "DA", 2));
	CHECK_EQ(snap.n_in_fds, 0);
	CHECK_EQ(snap.n_out, 1);
	CHECK(snap.out[0].n_data == n_sent && !memcmp(snap.out[0].data, sent, n_sent));
	socket_snapshot_deinit(&snap);

	/* The rest of authentication and the first bytes of a message with an fd. */
	buf = malloc(sizeof(rest) - 1 + part);
	memcpy(buf, rest, sizeof(rest) - 1);
	memcpy(buf + sizeof(rest) - 1, f, part);
	send_with_fds(sv[1], buf, sizeof(rest) - 1 + part, p, 1);
	while (socket_get_buffered_bytes(s) < 2 + sizeof(rest) - 1 + part)
		CHECK(socket_dispatch_read(s) == 0);
	CHECK_EQ(feed_lines(s, &sasl, sent, &n_sent), SASL_SERVER_DONE);
	socket_start_framing(s);
	CHECK_EQ(socket_get_buffered_bytes(s), part);
	CHECK(socket_read_frame(s, &fr) == SOCKET_E_AGAIN);

	s = reexec(s, &snap);
	CHECK(snap.framing);
	CHECK(snap.n_in == part && !memcmp(snap.in, f, part));
	CHECK_EQ(snap.n_in_fds, 1);
	CHECK_EQ(snap.in_fds[0].start, 0);
	CHECK_EQ(snap.in_fds[0].end, part);
	CHECK_EQ(snap.n_out, 2);
	socket_snapshot_deinit(&snap);

	send_all(sv[1], f + part, n - part);
	read_until_frame(s);
	expect_frame(s, f, n, 1, &fr);
	CHECK(same_file(fr.fds[0], p[0]));
	socket_frame_deinit(&fr);

	/* The client gets the replies of both program images, in order. */
	CHECK(socket_dispatch_write(s) == 0);
	CHECK(!socket_wants_write(s));
	while (n_recvd < n_sent) {
		ssize_t k = recv(sv[1], recvd + n_recvd, sizeof(recvd) - n_recvd, 0);

		CHECK(k > 0);
		n_recvd += (size_t)k;
	}
	CHECK(n_recvd == n_sent && !memcmp(recvd, sent, n_sent));
	CHECK(!memcmp(sent, "DATA\r\nOK ", 9));

	sasl_server_deinit(&sasl);
	socket_free(s);
	close(sv[1]);
	close(p[0]);
	close(p[1]);
	free(f);
	free(buf);
	CHECK_EQ(count_fds(), before);
}

/*
 * (4) Empty sockets, in raw and in framing mode: an empty snapshot, and the
 * restored socket reads and writes as a new one; then one whose peer already
 * closed, a complete frame still buffered.
 */
static void test_restore_empty(void)
{
	int sv[2], before = count_fds();
	struct socket *s;
	struct socket_snapshot snap;
	struct socket_frame fr;
	uint8_t *f, got[256];
	size_t n, avail;
	const void *raw;
	int framing;

	f = make_frame(2, 50, 6, false, &n);
	for (framing = 0; framing < 2; framing++) {
		pair(sv);
		s = reexec(new_socket(sv[0], framing), &snap);
		CHECK(snap.framing == !!framing && !snap.eof && !snap.violation);
		CHECK(!snap.in && snap.n_in == 0);
		CHECK(!snap.in_fds && snap.n_in_fds == 0);
		CHECK(!snap.out && snap.n_out == 0);
		socket_snapshot_deinit(&snap);

		send_all(sv[1], f, n);
		while (socket_get_buffered_bytes(s) < n)
			CHECK(socket_dispatch_read(s) == 0);
		if (framing) {
			expect_frame(s, f, n, 0, NULL);
		} else {
			raw = socket_peek_raw(s, &avail);
			CHECK(avail == n && !memcmp(raw, f, n));
			CHECK(socket_read_frame(s, &fr) == SOCKET_E_AGAIN);
		}
		CHECK(socket_queue_copy(s, "hello", 5) == 0);
		CHECK(socket_dispatch_write(s) == 0);
		CHECK(recv(sv[1], got, sizeof(got), 0) == 5 && !memcmp(got, "hello", 5));
		socket_free(s);
		close(sv[1]);
	}

	/* End of stream seen behind the start of a frame: both carried over. */
	pair(sv);
	s = new_socket(sv[0], true);
	send_all(sv[1], f, n);
	send_all(sv[1], f, 5);
	close(sv[1]);
	while (socket_get_buffered_bytes(s) < n + 5)
		CHECK(socket_dispatch_read(s) == 0);
	expect_frame(s, f, n, 0, NULL);
	CHECK(socket_dispatch_read(s) == SOCKET_E_EOF);
	s = reexec(s, &snap);
	CHECK(snap.eof && snap.n_in == 5);
	socket_snapshot_deinit(&snap);
	CHECK(socket_dispatch_read(s) == SOCKET_E_EOF);
	raw = socket_peek_raw(s, &avail);
	CHECK(avail == 5 && !memcmp(raw, f, 5));
	CHECK(socket_read_frame(s, &fr) == SOCKET_E_AGAIN);
	socket_free(s);

	free(f);
	CHECK_EQ(count_fds(), before);
}

/*
 * A snapshot the owner built itself (pointing into its own memory, no
 * socket_snapshot_deinit()), and ones no socket can be in: refused with
 * -EINVAL, and every fd passed in is closed all the same.
 */
static void test_restore_invalid(void)
{
	int sv[2], p[2], before = count_fds(), fds[2];
	uint8_t in[8] = { 'l', 1, 0, 1 };
	struct socket_snapshot_fds batch = { .start = 0, .end = 8, .fds = fds, .n_fds = 1 };
	struct socket_snapshot_entry out = { .data = (uint8_t *)"xy", .n_data = 2, .fds = fds + 1,
					     .n_fds = 1 };
	struct socket_snapshot snap = {
		.framing = true,
		.in = in,
		.n_in = sizeof(in),
		.in_fds = &batch,
		.n_in_fds = 1,
		.out = &out,
		.n_out = 1,
	};
	struct socket *s;
	char got[4];
	int k;

	CHECK(pipe2(p, O_CLOEXEC) == 0);

	/* Valid, in the caller's memory. */
	pair(sv);
	fds[0] = dup_fd(p[0]);
	fds[1] = dup_fd(p[1]);
	CHECK_EQ(socket_new_restored(&s, sv[0], &snap), 0);
	CHECK(socket_holds_fds(s));
	CHECK_EQ(socket_get_buffered_bytes(s), 8);
	CHECK_EQ(socket_get_queued_fds(s), 1);
	CHECK(socket_dispatch_write(s) == 0);
	CHECK(recv(sv[1], got, sizeof(got), 0) == 2 && !memcmp(got, "xy", 2));
	socket_free(s);
	close(sv[1]);
	CHECK_EQ(count_fds(), before + 2);

	/* A batch beyond the input, batches out of order, fds without bytes. */
	for (k = 0; k < 3; k++) {
		struct socket_snapshot bad = snap;
		struct socket_snapshot_fds b2[2] = { batch, batch };
		struct socket_snapshot_entry o2 = out;

		pair(sv);
		fds[0] = dup_fd(p[0]);
		fds[1] = dup_fd(p[1]);
		if (k == 0) {
			bad.n_in = 4;
		} else if (k == 1) {
			b2[0].start = 4;
			b2[1].fds = fds + 1; /* the entry's fd goes with the batch */
			b2[1].end = 6;
			bad.in_fds = b2;
			bad.n_in_fds = 2;
			bad.n_out = 0;
		} else {
			o2.n_data = 0;
			bad.out = &o2;
		}
		CHECK_EQ(socket_new_restored(&s, sv[0], &bad), -EINVAL);
		close(sv[1]);
		CHECK_EQ(count_fds(), before + 2);
	}

	close(p[0]);
	close(p[1]);
	CHECK_EQ(count_fds(), before);
}

int main(void)
{
	int before = count_fds();

	test_frame_size();
	test_split_frames();
	test_many_frames_one_read();
	test_fds_attach();
	test_fds_misplaced();
	test_write_fds();
	test_disconnect_leaks();
	test_backpressure();
	test_peer_gone();
	test_too_large();
	test_large_frame();
	test_adopt_split();
	test_adopt_limit();
	test_drained();
	test_adopt_fds();
	test_adopt_bad_length();
	test_shared_input();
	test_adopt_message();
	test_creds();
	test_raw_to_framing();
	test_ctrunc();
	test_many_groups();
	test_random_stream();
	test_restore_partial_frame(false);
	test_restore_partial_frame(true);
	test_restore_large_frame();
	test_restore_output();
	test_restore_output_dropped();
	test_restore_sasl();
	test_restore_empty();
	test_restore_invalid();
	CHECK(count_fds() == before);
	measure(200000, 100);
	measure(500, 1024 * 1024);
	printf("ok\n");
	return 0;
}
