/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Randomized ioctl tester: two processes hammer a few shared peers with random ioctls whose
 * arguments mix valid values (known handle ids, live fds, real buffers) with bad ones (foreign,
 * stale and reserved ids, bad fds, NULL/(void *)1/PROT_NONE/kernel pointers, huge counts,
 * unknown flags), and with random closes, reopens, mmaps and polls; a quarter of the SENDs go
 * as CALLs, waiting at most 2 ms. Each call must succeed or fail with an errno the uAPI
 * documents; the kernel must not warn or oops (the harness checks); when every peer is closed,
 * every quota charge must be back (PEER_QUERY of a fresh peer).
 * KT_SEED replays a run (as far as the two processes' interleaving allows); KT_FUZZ_SECONDS
 * sets its length (default 10).
 */

#include <fcntl.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>
#include "kmod-test.h"

enum {
	N_PEERS = 4,
	N_IDS = 64,
};

static int peer_fd[N_PEERS];
static int storm_op;		/* this process' side of the storm: 14 or 15 */
static uint64_t ids[N_IDS];
static unsigned int n_ids;
static uint8_t *none_page;	/* PROT_NONE */
static uint64_t rng;
static long n_calls, n_ok;
static const char *const op_names[] = {
	"QUERY", "RESET", "TRANSFER", "RELEASE", "DESTROY", "SLICE_RELEASE", "SEND", "RECV", "CALL",
};
static long op_calls[9], op_ok[9];

static uint64_t r64(void)
{
	rng ^= rng >> 12;
	rng ^= rng << 25;
	rng ^= rng >> 27;
	return rng * 0x2545f4914f6cdd1dULL;
}

static uint64_t rn(uint64_t n)
{
	return n ? r64() % n : 0;
}

static void learn(uint64_t id)
{
	if (id == BUS1_HANDLE_INVALID || id <= 3)
		return;
	ids[n_ids < N_IDS ? n_ids++ : rn(N_IDS)] = id;
}

static uint64_t any_handle(void)
{
	switch (rn(24)) {
	case 0:
		return rn(4);	/* reserved, CREATE included */
	case 1:
		return BUS1_HANDLE_INVALID;
	case 2:
		return r64();
	case 3:
	case 4:
		return BUS1_HANDLE_CREATE;
	default:
		return n_ids ? ids[rn(n_ids)] : BUS1_HANDLE_CREATE;
	}
}

static int any_peer(void)
{
	return peer_fd[rn(N_PEERS)];
}

static int any_fd(void)
{
	switch (rn(8)) {
	case 0:
		return -1;
	case 1:
		return 999;
	case 2:
		return 0;	/* /dev/null in the guest */
	case 3:
		return 1;
	default:
		return any_peer();
	}
}

/* A user pointer: usually @good, sometimes something bad. */
static uint64_t ptr(void *good)
{
	switch (rn(48)) {
	case 0:
		return 0;
	case 1:
		return 1;
	case 2:
		return (uintptr_t)none_page;
	case 3:
		return 0xffff888000000000ULL;
	case 4:
		return (uintptr_t)none_page - 4;	/* straddles into PROT_NONE */
	default:
		return (uintptr_t)good;
	}
}

static uint64_t count(uint64_t max)
{
	switch (rn(24)) {
	case 0:
		return ~(uint64_t)0;
	case 1:
		return max + 1;
	case 2:
		return (uint64_t)1 << 32;
	case 3:
		return 0;
	default:
		return 1 + rn(max);
	}
}

static uint64_t flags(uint64_t valid)
{
	return rn(16) ? r64() & valid : r64();
}

static void check(int r, const char *what)
{
	static const int allowed[] = {
		EINVAL, EFAULT, ENXIO, EBADF, EHOSTUNREACH, EDQUOT, ENOSPC, ECANCELED,
		EMSGSIZE, EOPNOTSUPP, EAGAIN, ESHUTDOWN, ENOTTY, EMFILE, ENOMEM, EPERM, 0,
	};
	size_t k;

	for (k = 0; k < 9; k++)
		if (!strncmp(what, op_names[k], strlen(op_names[k])) ||
		    (k == 0 && !strcmp(what, "PEER_QUERY")) || (k == 1 && !strcmp(what, "PEER_RESET")) ||
		    (k == 2 && !strcmp(what, "HANDLE_TRANSFER")) ||
		    (k == 3 && !strcmp(what, "HANDLE_RELEASE")) ||
		    (k == 4 && !strcmp(what, "NODES_DESTROY"))) {
			op_calls[k]++;
			op_ok[k] += r == 0;
			break;
		}

	++n_calls;
	if (r == 0) {
		++n_ok;
		return;
	}
	if (!kt_errno_in(errno, allowed))
		CHECK_FAIL("%s: undocumented errno %s", what, strerrorname_np(errno));
}

/* Learn the handle ids a received message carries (read from a private pool mapping). */
static void learn_received(const struct bus1_cmd_recv *rv, int fd)
{
	struct bus1_cmd_peer_query q = { 0 };
	const uint8_t *pool;
	const uint64_t *hs;
	uint64_t i;

	if (rv->offset == BUS1_OFFSET_INVALID)
		return;
	if (ioctl(fd, BUS1_CMD_PEER_QUERY, &q) < 0 || rv->offset >= q.pool_size)
		return;
	pool = mmap(NULL, q.pool_size, PROT_READ, MAP_SHARED, fd, 0);
	if (pool == MAP_FAILED)
		return;
	/* The other process may reset the peer meanwhile: then this reads garbage, harmlessly. */
	hs = (const uint64_t *)(pool + rv->offset + ((rv->n_bytes + 7) & ~7ULL));
	for (i = 0; i < rv->n_handles && i < 64 &&
	     (const uint8_t *)(hs + i + 1) <= pool + q.pool_size; i++)
		learn(hs[i]);
	munmap((void *)pool, q.pool_size);
}

static void one_op(void)
{
	static uint8_t data[8192];
	uint64_t hbuf[8], dbuf[8];
	uint32_t ebuf[8];
	__u32 fbuf[4];
	struct iovec vbuf[4];
	int fd = any_peer(), r, i, op;

	for (i = 0; i < 8; i++) {
		hbuf[i] = any_handle();
		dbuf[i] = any_handle();
	}
	for (i = 0; i < 4; i++) {
		fbuf[i] = any_fd();
		vbuf[i] = (struct iovec){ data + rn(4096), rn(4096) };
	}
	if (rn(16) == 0)
		vbuf[rn(4)].iov_base = (void *)(uintptr_t)ptr(data);

	/*
	 * Every other half second, one process only creates nodes of peer 0
	 * and sends, receives and releases on them (case 14) while the other
	 * only hands peer 0 nodes of other peers and resets it (case 15): the
	 * races of a flush with node creation need both sides at once, which
	 * the plain mix rarely has.
	 */
	op = rn(16);
	if ((long)(kt_now() * 2) % 2 == 0) {
		fd = peer_fd[0];
		op = storm_op;
	}
	switch (op) {
	case 0: {
		struct bus1_cmd_peer_query q = { .flags = flags(0) };

		r = ioctl(fd, BUS1_CMD_PEER_QUERY, (void *)(uintptr_t)ptr(&q));
		check(r, "PEER_QUERY");
		break;
	}
	case 1:
		if (rn(4) == 0) {
			struct bus1_cmd_peer_reset c = { .flags = flags(0) };

			check(ioctl(fd, BUS1_CMD_PEER_RESET, (void *)(uintptr_t)ptr(&c)), "PEER_RESET");
		}
		break;
	case 2:
	case 3: {
		struct bus1_cmd_handle_transfer t = {
			.flags = flags(0), .src_handle = any_handle(), .dst_fd = any_fd(),
			.dst_pad = rn(8) ? 0 : 1,
		};

		r = ioctl(fd, BUS1_CMD_HANDLE_TRANSFER, (void *)(uintptr_t)ptr(&t));
		check(r, "HANDLE_TRANSFER");
		if (r == 0) {
			learn(t.src_handle);
			learn(t.dst_handle);
		}
		break;
	}
	case 4: {
		struct bus1_cmd_handle_release c = { .flags = flags(0), .handle = any_handle() };

		check(ioctl(fd, BUS1_CMD_HANDLE_RELEASE, (void *)(uintptr_t)ptr(&c)), "HANDLE_RELEASE");
		break;
	}
	case 5: {
		struct bus1_cmd_nodes_destroy c = {
			.flags = flags(0), .ptr_nodes = ptr(hbuf), .n_nodes = count(8) % 9,
		};

		if (rn(8) == 0)
			c.n_nodes = count(8);
		check(ioctl(fd, BUS1_CMD_NODES_DESTROY, (void *)(uintptr_t)ptr(&c)), "NODES_DESTROY");
		break;
	}
	case 6: {
		struct bus1_cmd_slice_release c = { .flags = flags(0), .offset = rn(2) ? rn(1 << 20) :
									   r64() };

		check(ioctl(fd, BUS1_CMD_SLICE_RELEASE, (void *)(uintptr_t)ptr(&c)), "SLICE_RELEASE");
		break;
	}
	case 7:
	case 8:
	case 9: {
		struct bus1_cmd_send s = {
			.flags = flags(BUS1_SEND_FLAG_CONTINUE),
			.ptr_destinations = ptr(dbuf), .n_destinations = 1 + rn(8),
			.ptr_errors = rn(2) ? ptr(ebuf) : 0,
			.ptr_vecs = ptr(vbuf), .n_vecs = rn(5),
			.ptr_handles = ptr(hbuf), .n_handles = rn(3) ? 0 : rn(9),
			.ptr_fds = ptr(fbuf), .n_fds = rn(3) ? 0 : rn(5),
		};

		if (rn(16) == 0)
			s.n_destinations = count(8);
		if (rn(16) == 0)
			s.n_vecs = count(4);
		if (rn(4) == 0) {
			/* the same SEND as a CALL: waits at most 2 ms (or a bad timeout) */
			struct bus1_cmd_call c = {
				.send = s,
				.recv = { .flags = flags(BUS1_RECV_FLAG_PEEK | BUS1_RECV_FLAG_NO_FDS) },
				.flags = flags(0),
				.timeout_ns = rn(8) ? rn(2000000) : r64(),
			};

			r = ioctl(fd, BUS1_CMD_CALL, (void *)(uintptr_t)ptr(&c));
			if (r < 0 && errno == ETIMEDOUT) {
				/* only after a send, and said so */
				CHECK(c.status == BUS1_CALL_STATUS_SENT);
				++n_calls;
				op_calls[8]++;
			} else {
				check(r, "CALL");
			}
			if (r == 0) {
				learn(c.recv.destination);
				learn_received(&c.recv, fd);
			}
			break;
		}
		r = ioctl(fd, BUS1_CMD_SEND, (void *)(uintptr_t)ptr(&s));
		check(r, "SEND");
		if (r == 0)
			for (i = 0; i < (int)s.n_handles && i < 8; i++)
				learn(hbuf[i]);
		break;
	}
	case 10:
	case 11: {
		struct bus1_cmd_recv rv = { .flags = flags(BUS1_RECV_FLAG_PEEK |
							   BUS1_RECV_FLAG_NO_FDS) };
		bool good_ptr = rn(8) != 0;

		r = ioctl(fd, BUS1_CMD_RECV, good_ptr ? (void *)&rv : (void *)(uintptr_t)ptr(&rv));
		check(r, "RECV");
		if (r == 0 && good_ptr) {
			learn(rv.destination);
			learn_received(&rv, fd);
			if (!(rv.flags & BUS1_RECV_FLAG_PEEK) && rv.offset != BUS1_OFFSET_INVALID &&
			    rn(4)) {
				struct bus1_cmd_slice_release c = { .offset = rv.offset };

				r = ioctl(fd, BUS1_CMD_SLICE_RELEASE, &c);
				/* Our own slice, just received: ours to release (unless the other
				 * process reset the peer in between). */
				check(r, "SLICE_RELEASE(received)");
			}
		}
		break;
	}
	case 12: {
		struct pollfd p = { .fd = fd, .events = POLLIN | POLLOUT };

		CHECK(poll(&p, 1, 0) >= 0);
		if (rn(8) == 0) {
			void *m = mmap(NULL, 4096 * (1 + rn(4)), rn(4) ? PROT_READ :
				       PROT_READ | PROT_WRITE, MAP_SHARED, fd, 4096 * rn(4));

			if (m != MAP_FAILED)
				munmap(m, 4096);
		}
		break;
	}
	case 14: {
		/*
		 * A node of its own, a message to it, received and released: the
		 * sequence that creates nodes and handles while the other process
		 * resets (case 15).
		 */
		struct bus1_cmd_handle_transfer t = {
			.src_handle = BUS1_HANDLE_CREATE, .dst_fd = (__u32)fd,
		};
		struct bus1_cmd_recv rv = { 0 };
		uint64_t own;
		struct bus1_cmd_send s = {
			.n_destinations = 1,
			.ptr_vecs = (uintptr_t)vbuf, .n_vecs = 1,
		};

		/* one in eight goes to another peer: a node held from outside */
		if (rn(8) == 0)
			t.dst_fd = (__u32)any_peer();
		r = ioctl(fd, BUS1_CMD_HANDLE_TRANSFER, &t);
		check(r, "HANDLE_TRANSFER(create)");
		if (r < 0)
			break;
		learn(t.src_handle);
		own = t.src_handle;
		s.ptr_destinations = (uintptr_t)&own;
		check(ioctl(fd, BUS1_CMD_SEND, &s), "SEND(own node)");
		r = ioctl(fd, BUS1_CMD_RECV, &rv);
		check(r, "RECV(own node)");
		if (r == 0 && rv.offset != BUS1_OFFSET_INVALID) {
			struct bus1_cmd_slice_release c = { .offset = rv.offset };

			check(ioctl(fd, BUS1_CMD_SLICE_RELEASE, &c), "SLICE_RELEASE(received)");
		}
		break;
	}
	case 15: {
		/* a new node of another peer handed to this one, which is then reset */
		struct bus1_cmd_handle_transfer t = {
			.src_handle = BUS1_HANDLE_CREATE, .dst_fd = (__u32)fd,
		};
		struct bus1_cmd_peer_reset c = { 0 };
		int other = peer_fd[rn(N_PEERS)];

		if (other == fd || rn(64) == 0)
			check(ioctl(other, BUS1_CMD_PEER_RESET, &c), "PEER_RESET");
		else
			check(ioctl(other, BUS1_CMD_HANDLE_TRANSFER, &t), "HANDLE_TRANSFER");
		check(ioctl(fd, BUS1_CMD_PEER_RESET, &c), "PEER_RESET");
		break;
	}
	case 13:
		/* Rarely: disconnect or replace a peer. */
		if (rn(32) == 0) {
			int k = rn(N_PEERS), nfd = kt_open_peer();

			if (rn(2)) {
				__u64 z = 0;

				check(ioctl(peer_fd[k], BUS1_CMD_PEER_DISCONNECT, &z), "PEER_DISCONNECT");
			}
			CHECK(dup2(nfd, peer_fd[k]) == peer_fd[k]);
			close(nfd);
		}
		break;
	}
}

static int first_free_fd;

static void worker(uint64_t seed, double until)
{
	rng = seed | 1;
	while (kt_now() < until) {
		one_op();
		/* Whatever RECV installed: everything above our own fds goes. */
		close_range(first_free_fd, ~0U, 0);
	}
	{
		char line[512];
		size_t k, len = 0;

		for (k = 0; k < 9; k++)
			len += snprintf(line + len, sizeof(line) - len, " %s %ld/%ld", op_names[k],
					op_ok[k], op_calls[k]);
		kt_log("worker %d: %ld calls, %ld succeeded;%s", getpid(), n_calls, n_ok, line);
	}
}

static void test_fuzz(void)
{
	struct bus1_cmd_peer_query q = { 0 };
	const char *e;
	uint64_t seed;
	double secs = 10, until;
	pid_t pid;
	int i, status, fd;

	seed = (e = getenv("KT_SEED")) ? strtoull(e, NULL, 0) : (uint64_t)(kt_now() * 1e6);
	if ((e = getenv("KT_FUZZ_SECONDS")))
		secs = atof(e);
	kt_log("seed %llu (replay with KT_SEED=%llu)", (unsigned long long)seed,
	       (unsigned long long)seed);
	none_page = mmap(NULL, 8192, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	CHECK(none_page != MAP_FAILED);
	CHECK_OK(mprotect(none_page + 4096, 4096, PROT_NONE));
	none_page += 4096;
	for (i = 0; i < N_PEERS; i++)
		peer_fd[i] = kt_open_peer();
	first_free_fd = dup(0);
	CHECK(first_free_fd > peer_fd[N_PEERS - 1]);
	close(first_free_fd);

	until = kt_now() + secs;
	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		storm_op = 14;
		worker(seed * 31 + 7, until);
		_exit(0);
	}
	storm_op = 15;
	worker(seed, until);
	CHECK_EQ(waitpid(pid, &status, 0), pid);
	if (status != 0)
		CHECK_FAIL("fuzz child failed (status 0x%x)", status);

	for (i = 0; i < N_PEERS; i++)
		close(peer_fd[i]);
	fd = kt_open_peer();
	CHECK_OK(ioctl(fd, BUS1_CMD_PEER_QUERY, &q));
	CHECK_EQ(q.used_messages, 0);
	CHECK_EQ(q.used_bytes, 0);
	CHECK_EQ(q.used_handles, 0);
	CHECK_EQ(q.used_fds, 0);
	close(fd);
}

static const struct kt_case cases[] = {
	KT_CASE_T(test_fuzz, 120),
};

int main(int argc, char **argv)
{
	return kt_main(cases, sizeof(cases) / sizeof(cases[0]), argc, argv);
}
