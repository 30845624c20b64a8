/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * What a hostile unprivileged local user must not be able to do to the kernel through bus1, and
 * the uAPI rules that come with the fixes. Attackers and innocent parties run as uids 1000/1001
 * in forked children (the harness runs us as root; root only prepares what a user could not,
 * e.g. a userfaultfd that catches kernel-mode faults, cgroups, module parameters).
 *
 *   cycle_leak, cycle_pair, cycle_listen: a peer whose own fd sits in a unix socket that sits
 *	in a message queued on that peer (directly, through two peers, through a listening
 *	socket's unaccepted connection) is garbage once its user exits: the module's refcount
 *	and the pool's shmem must come back within 30 s.
 *   cycle_alive: the same constructions, still reachable from a live process, lose nothing.
 *   unix_socket_pass: a unix socket passed through bus1 still works (portals).
 *   recv_stall, send_stall: a RECV or SEND stalled in a user copy (userfaultfd) holds up no
 *	other user's SEND, RECV, NODES_DESTROY or multicast.
 *   memcg_nodes, quota_objects: nodes and handles are limited per user (quota_objects) and
 *	charged to the creator's memory cgroup.
 *   memcg_destroy, memcg_release: destroying nodes held by many handles, or dropping the last
 *	remote handles of many nodes, with the cgroup at its limit, takes memory.peak at most
 *	MD_SLACK beyond memory.max (the notifications are paid for with the handles).
 *   multicast_hol: a large multicast does not hold up a small message to one of its
 *	destinations for its whole duration.
 *   node_release, node_release_dropped: BUS1_MSG_NODE_RELEASE tells an owner that nobody else
 *	holds its node any more.
 *   destroyed_in_flight, pool_size_param: handle translation of destroyed nodes; pool_size
 *	accepts no value above 256 MiB.
 *   flush_race: a reset of a peer racing node creation by another thread of it frees no node
 *	without destroying it (no kernel WARNING in 10 s), and every holder is told NODE_DESTROY.
 *   slice_bound: received slices a peer keeps are bounded by max_slices (ENOSPC), a foreign
 *	sender gets half of that count (EDQUOT).
 *   notify_bound: unread NODE_RELEASEs are coalesced per node, unread NODE_DESTROYs count
 *	against quota_objects (300,000 and 600,000 attempts; slab measured).
 *   gc_stall: a user who builds a large graph for the collector and makes it run every 20 ms
 *	does not make another user's SEND+RECV sleep in the kernel (the peers that pass no unix
 *	sockets never wait for a pass), and the graph is collected once its builder exits.
 *   gc_starve: a user whose own graph changes all the time (close(dup()) in two threads) does
 *	not delay the collection of another user's cycle: it is freed within 1 s (times the
 *	run's time factor, or 4x its collection without the attack on a machine slower now than
 *	that factor says) of its owner's exit.
 *   gc_unix_latency: under the same attack, a third user's round trips with a unix socket in
 *	every message stay within 2x of alone (p99; at least a 4 ms tick, times the time factor),
 *	the worst within 1 s (the control and the attack measured again once if p99 misses),
 *	and sleep in the kernel no more than alone (3 more allowed): its
 *	SEND and RECV never wait for a pass over another user's graph.
 *
 * Every figure a case measures is printed as one "hostile: <case>: ..." line.
 *
 * The peers are used through raw ioctls (not libbus1) so that the cases that need no new uAPI
 * also run against a module whose PEER_QUERY predates quota_objects/used_objects (older size,
 * so a different ioctl number): query() falls back to that layout for the pool size.
 */

#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "check.h"
#include "kmod-test.h"

#define REPORT(...) kt_report("hostile", __VA_ARGS__)

enum { UID_A = 1000, UID_B = 1001 };
enum { MiB = 1 << 20 };

#define PARAM_DIR "/sys/module/bus1/parameters/"
#define REFCNT "/sys/module/bus1/refcnt"

/* ------------------------------------------------------------------------------------------ */
/* Raw peers. */

/* PEER_QUERY before quota_objects and used_objects were added (14 fields). */
struct legacy_peer_query {
	__u64 fields[14];
};
#define LEGACY_CMD_PEER_QUERY _IOWR(BUS1_IOCTL_MAGIC, 0x01, struct legacy_peer_query)

static int xioctl(int fd, unsigned long cmd, void *arg)
{
	int r;

	do {
		r = ioctl(fd, cmd, arg);
	} while (r < 0 && errno == EINTR);
	return r < 0 ? -errno : 0;
}

/*
 * PEER_QUERY. Returns 0, 1 if the module only knows the legacy layout (then quota_objects and
 * used_objects read UINT64_MAX), or -errno.
 */
static int query(int fd, struct bus1_cmd_peer_query *q)
{
	struct legacy_peer_query l = { { 0 } };
	int r;

	memset(q, 0, sizeof(*q));
	r = xioctl(fd, BUS1_CMD_PEER_QUERY, q);
	if (r != -ENOTTY)
		return r;
	r = xioctl(fd, LEGACY_CMD_PEER_QUERY, &l);
	if (r < 0)
		return r;
	memcpy(q, &l, sizeof(l));
	q->quota_objects = UINT64_MAX;
	q->used_objects = UINT64_MAX;
	return 1;
}

/* PEER_QUERY with the object counters, which this case needs. */
static void query_objects(int fd, struct bus1_cmd_peer_query *q)
{
	int r = query(fd, q);

	if (r == 1)
		CHECK_FAIL("PEER_QUERY with quota_objects/used_objects: ENOTTY (the module predates it)");
	if (r < 0)
		CHECK_FAIL("PEER_QUERY: %s", strerror(-r));
}

/* PEER_QUERY as seen by @uid (used_* are the counters of the caller's real uid). */
static void query_objects_as(uid_t uid, int fd, struct bus1_cmd_peer_query *q)
{
	if (setresuid(uid, uid, 0) < 0)
		CHECK_FAIL("setresuid(%u): %m", (unsigned int)uid);
	query_objects(fd, q);
	if (setresuid(0, 0, 0) < 0)
		CHECK_FAIL("setresuid(0): %m");
}

struct hpeer {
	int fd;
	const uint8_t *pool;
	size_t size;
};

static struct hpeer hp_from_fd(int fd)
{
	struct bus1_cmd_peer_query q;
	struct hpeer p = { .fd = fd };
	void *m;
	int r;

	r = query(fd, &q);
	if (r < 0)
		CHECK_FAIL("PEER_QUERY: %s", strerror(-r));
	m = mmap(NULL, q.pool_size, PROT_READ, MAP_SHARED, fd, 0);
	if (m == MAP_FAILED)
		CHECK_FAIL("mmap(pool): %m");
	p.pool = m;
	p.size = q.pool_size;
	return p;
}

static struct hpeer hp_open(void)
{
	return hp_from_fd(kt_open_peer());
}

/* Open a peer whose opener is @uid (we are root and single-threaded). */
static struct hpeer hp_open_as(uid_t uid)
{
	struct hpeer p;

	if (setresuid(uid, uid, 0) < 0)
		CHECK_FAIL("setresuid(%u): %m", (unsigned int)uid);
	p = hp_open();
	if (setresuid(0, 0, 0) < 0)
		CHECK_FAIL("setresuid(0): %m");
	return p;
}

static void hp_close(struct hpeer *p)
{
	if (p->pool)
		munmap((void *)p->pool, p->size);
	if (p->fd >= 0)
		close(p->fd);
	p->pool = NULL;
	p->fd = -1;
}

static int hp_transfer(int fd, uint64_t *src, int dst_fd, uint64_t *dst)
{
	struct bus1_cmd_handle_transfer cmd = {
		.src_handle = *src,
		.dst_fd = (__u32)dst_fd,
		.dst_handle = BUS1_HANDLE_INVALID,
	};
	int r = xioctl(fd, BUS1_CMD_HANDLE_TRANSFER, &cmd);

	if (r == 0) {
		*src = cmd.src_handle;
		if (dst)
			*dst = cmd.dst_handle;
	}
	return r;
}

/* A new node of @owner; returns the owner's handle, *@holder_h gets @holder's. */
static uint64_t hp_node(struct hpeer *owner, struct hpeer *holder, uint64_t *holder_h)
{
	uint64_t h = BUS1_HANDLE_CREATE;
	int r = hp_transfer(owner->fd, &h, holder->fd, holder_h);

	if (r < 0)
		CHECK_FAIL("HANDLE_TRANSFER(CREATE): %s", strerror(-r));
	return h;
}

/* Give @to a handle to the node of @from's handle @h; returns @to's id. */
static uint64_t hp_give(struct hpeer *from, uint64_t h, struct hpeer *to)
{
	uint64_t d = BUS1_HANDLE_INVALID;
	int r = hp_transfer(from->fd, &h, to->fd, &d);

	if (r < 0)
		CHECK_FAIL("HANDLE_TRANSFER: %s", strerror(-r));
	return d;
}

static int hp_release(int fd, uint64_t h)
{
	struct bus1_cmd_handle_release cmd = { .handle = h };

	return xioctl(fd, BUS1_CMD_HANDLE_RELEASE, &cmd);
}

static int hp_destroy(int fd, uint64_t h)
{
	struct bus1_cmd_nodes_destroy cmd = { .ptr_nodes = (__u64)(uintptr_t)&h, .n_nodes = 1 };

	return xioctl(fd, BUS1_CMD_NODES_DESTROY, &cmd);
}

static int hp_send(int fd, uint64_t flags, const uint64_t *dests, size_t n_dests,
		   uint32_t *errors, const void *data, size_t len, uint64_t *handles,
		   size_t n_handles, const int *fds, size_t n_fds)
{
	struct iovec v = { .iov_base = (void *)data, .iov_len = len };
	struct bus1_cmd_send cmd = {
		.flags = flags,
		.ptr_destinations = (__u64)(uintptr_t)dests,
		.n_destinations = n_dests,
		.ptr_errors = (__u64)(uintptr_t)errors,
		.ptr_vecs = (__u64)(uintptr_t)&v,
		.n_vecs = 1,
		.ptr_handles = (__u64)(uintptr_t)handles,
		.n_handles = n_handles,
		.ptr_fds = (__u64)(uintptr_t)fds,
		.n_fds = n_fds,
	};

	return xioctl(fd, BUS1_CMD_SEND, &cmd);
}

/* Unicast of @len bytes, optionally carrying one fd (@fd >= 0). */
static int hp_send1(int fd, uint64_t dst, const void *data, size_t len, int carry_fd)
{
	return hp_send(fd, 0, &dst, 1, NULL, data, len, NULL, 0, carry_fd >= 0 ? &carry_fd : NULL,
		       carry_fd >= 0);
}

static int hp_recv(int fd, uint64_t flags, struct bus1_cmd_recv *cmd)
{
	memset(cmd, 0, sizeof(*cmd));
	cmd->flags = flags;
	return xioctl(fd, BUS1_CMD_RECV, cmd);
}

static int hp_slice_release(int fd, uint64_t offset)
{
	struct bus1_cmd_slice_release cmd = { .offset = offset };

	return xioctl(fd, BUS1_CMD_SLICE_RELEASE, &cmd);
}

static const uint8_t *hp_data(const struct hpeer *p, const struct bus1_cmd_recv *c)
{
	if (c->offset == BUS1_OFFSET_INVALID || c->offset >= p->size)
		CHECK_FAIL("RECV: offset %llu outside the pool", (unsigned long long)c->offset);
	return p->pool + c->offset;
}

static const uint64_t *hp_handles(const struct hpeer *p, const struct bus1_cmd_recv *c)
{
	return (const uint64_t *)(hp_data(p, c) + ((c->n_bytes + 7) & ~(uint64_t)7));
}

static const int *hp_fds(const struct hpeer *p, const struct bus1_cmd_recv *c)
{
	return (const int *)(hp_handles(p, c) + c->n_handles);
}

/* Receive the next message, which must be there (waits up to @ms for it). */
static void hp_recv_wait(struct hpeer *p, struct bus1_cmd_recv *c, int ms)
{
	struct pollfd pfd = { .fd = p->fd, .events = POLLIN };
	double end = kt_now() + ms / 1000.0;
	int r;

	for (;;) {
		r = hp_recv(p->fd, 0, c);
		if (r != -EAGAIN)
			break;
		if (kt_now() > end)
			CHECK_FAIL("RECV: nothing arrived within %d ms", ms);
		poll(&pfd, 1, 10);
	}
	if (r < 0)
		CHECK_FAIL("RECV: %s", strerror(-r));
}

/* Drain @p's queue (releasing slices, closing fds); returns the number of entries. */
static size_t hp_drain(struct hpeer *p)
{
	struct bus1_cmd_recv c;
	size_t n = 0, i;

	while (hp_recv(p->fd, 0, &c) == 0) {
		if (c.offset != BUS1_OFFSET_INVALID) {
			for (i = 0; i < c.n_fds; i++)
				if (hp_fds(p, &c)[i] >= 0)
					close(hp_fds(p, &c)[i]);
			hp_slice_release(p->fd, c.offset);
		}
		++n;
	}
	return n;
}

/* ------------------------------------------------------------------------------------------ */
/* Processes, pipes, files. */

/* What a job child reports back. */
struct result {
	int r;			/* 0 or -errno of the call under test */
	int line;		/* 0, or where a check in the child failed */
	double t;		/* seconds the call took */
	uint64_t v[5];		/* case-specific values */
};

struct job {
	pid_t pid;
	int rfd;		/* read end of the result pipe */
	double t0;
	bool done;
	struct result res;
};

/*
 * Fork a child that becomes @uid (unless (uid_t)-1), runs @fn and writes its result back.
 * The child's own fds are the parent's (every peer the case opened).
 */
static struct job job_start(uid_t uid, void (*fn)(void *arg, struct result *res), void *arg)
{
	struct job j = { .rfd = -1 };
	int p[2];

	CHECK_OK(pipe2(p, O_CLOEXEC));
	j.t0 = kt_now();
	j.pid = fork();
	CHECK(j.pid >= 0);
	if (j.pid == 0) {
		struct result res = { 0 };

		close(p[0]);
		if (uid != (uid_t)-1)
			kt_become(uid);
		fn(arg, &res);
		if (write(p[1], &res, sizeof(res)) != sizeof(res))
			_exit(2);
		_exit(0);
	}
	close(p[1]);
	j.rfd = p[0];
	return j;
}

/* Wait up to @ms for the job's result; true if it arrived. */
static bool job_wait(struct job *j, int ms)
{
	struct pollfd pfd = { .fd = j->rfd, .events = POLLIN };
	ssize_t n;

	if (j->done)
		return true;
	/* @ms bounds a hang: a slower machine gets longer (kt_time_factor()) */
	if (poll(&pfd, 1, ms * (int)kt_time_factor()) <= 0)
		return false;
	n = read(j->rfd, &j->res, sizeof(j->res));
	if (n != sizeof(j->res))
		CHECK_FAIL("job %d died without a result", (int)j->pid);
	j->done = true;
	waitpid(j->pid, NULL, 0);
	close(j->rfd);
	j->rfd = -1;
	return true;
}

/* The scheduler state of @pid ('R', 'S', 'D', ...), '?' if unknown. */
static char proc_state(pid_t pid)
{
	char path[64], buf[512], *p;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return '?';
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return '?';
	buf[n] = 0;
	p = strrchr(buf, ')');
	return p && p[1] == ' ' ? p[2] : '?';
}

/* The kernel stack of @pid, squeezed onto one line (for reports of blocked tasks). */
static void proc_stack(pid_t pid, char *out, size_t size)
{
	char path[64];
	ssize_t n;
	int fd, i;

	snprintf(path, sizeof(path), "/proc/%d/stack", (int)pid);
	out[0] = 0;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	n = read(fd, out, size - 1);
	close(fd);
	if (n < 0)
		n = 0;
	out[n] = 0;
	for (i = 0; i < n; i++)
		if (out[i] == '\n')
			out[i] = ' ';
}

static void send_fd(int sock, int fd)
{
	char cbuf[CMSG_SPACE(sizeof(int))] = { 0 };
	struct iovec v = { .iov_base = "F", .iov_len = 1 };
	struct msghdr m = {
		.msg_iov = &v,
		.msg_iovlen = 1,
		.msg_control = cbuf,
		.msg_controllen = sizeof(cbuf),
	};
	struct cmsghdr *c = CMSG_FIRSTHDR(&m);

	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(c), &fd, sizeof(int));
	if (sendmsg(sock, &m, 0) != 1)
		CHECK_FAIL("sendmsg(SCM_RIGHTS): %m");
}

/* Receive one byte and the fd that came with it (-1 if none). */
static int recv_fd(int sock, int flags)
{
	char cbuf[CMSG_SPACE(sizeof(int))] = { 0 }, byte;
	struct iovec v = { .iov_base = &byte, .iov_len = 1 };
	struct msghdr m = {
		.msg_iov = &v,
		.msg_iovlen = 1,
		.msg_control = cbuf,
		.msg_controllen = sizeof(cbuf),
	};
	struct cmsghdr *c;
	int fd = -1;

	if (recvmsg(sock, &m, MSG_CMSG_CLOEXEC | flags) != 1)
		CHECK_FAIL("recvmsg: %m");
	c = CMSG_FIRSTHDR(&m);
	if (c && c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS)
		memcpy(&fd, CMSG_DATA(c), sizeof(int));
	return fd;
}

static long long refcnt(void)
{
	long long v = kt_read_ll(REFCNT);

	if (v < 0)
		CHECK_FAIL(REFCNT ": %m");
	return v;
}

/* KASAN, lockdep and kmemleak: the ioctls run many times slower and objects are larger */
static bool debug_kernel(void)
{
	return access("/sys/kernel/debug/kmemleak", F_OK) == 0;
}

/*
 * Run @fn in a child with module parameter @name set to @value, then restore the old value
 * whatever happened; the case fails if the child failed.
 */
static void with_param(const char *name, const char *value, void (*fn)(void))
{
	char path[128], old[64];
	int status, r;
	pid_t pid;

	snprintf(path, sizeof(path), PARAM_DIR "%s", name);
	if (kt_read_ll(path) < 0)
		CHECK_FAIL("%s: %m (the module has no parameter %s)", path, name);
	snprintf(old, sizeof(old), "%lld", kt_read_ll(path));
	r = kt_write_str(path, value);
	if (r < 0)
		CHECK_FAIL("writing %s to %s: %s", value, path, strerror(-r));
	fflush(NULL);
	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		fn();
		fflush(NULL);
		_exit(kt_soft_failures ? 1 : 0);
	}
	CHECK_EQ(waitpid(pid, &status, 0), pid);
	r = kt_write_str(path, old);
	if (r < 0)
		CHECK_FAIL("restoring %s to %s: %s", path, old, strerror(-r));
	if (!WIFEXITED(status) || WEXITSTATUS(status))
		CHECK_FAIL("the case failed with %s = %s (restored to %s)", name, value, old);
}

/* @fn with module parameter @name at @value on a debug kernel (said so), as it is elsewhere. */
static void with_debug_param(const char *name, const char *value, void (*fn)(void))
{
	if (debug_kernel()) {
		REPORT("debug kernel: %s %s for this case", name, value);
		with_param(name, value, fn);
	} else {
		fn();
	}
}

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

static void cycle_leak(void)
{
	cycle_run(build_self, 1);
}

static void cycle_pair(void)
{
	cycle_run(build_pair, 2);
}

static void cycle_listen(void)
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

static void cycle_alive(void)
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

static void unix_socket_pass(void)
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

static void recv_stall(void)
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

static void send_stall(void)
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
 * 3. Nodes and handles are kernel memory any user can make. They must be limited per user
 * (quota_objects) and charged to the user's memory cgroup.
 */

#define CG_ROOT "/sys/fs/cgroup"

/* The value of KEY in a flat-keyed cgroup file such as memory.stat, or -1. */
static long long cg_key(const char *cg, const char *file, const char *key)
{
	char path[256], line[256];
	size_t len = strlen(key);
	long long v = -1;
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", cg, file);
	f = fopen(path, "re");
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		if (!strncmp(line, key, len) && line[len] == ' ') {
			v = strtoll(line + len + 1, NULL, 10);
			break;
		}
	}
	fclose(f);
	return v;
}

static long long cg_stat(const char *cg, const char *key)
{
	return cg_key(cg, "memory.stat", key);
}

static long long cg_events(const char *cg, const char *key)
{
	return cg_key(cg, "memory.events", key);
}

/*
 * A 16 MiB memory cgroup of a case's own, CG_ROOT/NAME-PID: cgroup2 is
 * mounted if it is not (*@mountedp tells memcg_remove()), the memory
 * controller enabled. @cg (@size bytes) receives its path.
 */
static void memcg_create(const char *name, char *cg, size_t size, bool *mountedp)
{
	char path[256];
	int r;

	*mountedp = false;
	if (access(CG_ROOT "/cgroup.controllers", F_OK) < 0) {
		if (mount("cgroup2", CG_ROOT, "cgroup2", 0, NULL) < 0)
			CHECK_FAIL("mount cgroup2 on " CG_ROOT ": %m");
		*mountedp = true;
	}
	r = kt_write_str(CG_ROOT "/cgroup.subtree_control", "+memory");
	if (r < 0)
		CHECK_FAIL("enabling the memory controller: %s", strerror(-r));
	snprintf(cg, size, CG_ROOT "/%s-%d", name, (int)getpid());
	if (mkdir(cg, 0755) < 0)
		CHECK_FAIL("mkdir %s: %m", cg);
	snprintf(path, sizeof(path), "%s/memory.max", cg);
	CHECK_OK(kt_write_str(path, "16777216"));
}

/* The calling process (a case's child) moves into @cg. */
static void memcg_join(const char *cg)
{
	char path[256];
	int r;

	snprintf(path, sizeof(path), "%s/cgroup.procs", cg);
	r = kt_write_str(path, "0");
	if (r < 0)
		CHECK_FAIL("joining %s: %s", cg, strerror(-r));
}

/*
 * Remove @cg once its processes were reaped (the kernel lets go of the
 * cgroup a little later: up to 5 s), and cgroup2 if memcg_create() mounted it.
 */
static void memcg_remove(const char *cg, bool mounted)
{
	for (int i = 0; i < 50 && rmdir(cg) < 0; i++)
		usleep(100 * 1000);
	if (mounted)
		umount2(CG_ROOT, MNT_DETACH);
}

static long long cg_read(const char *cg, const char *file)
{
	char path[256];

	snprintf(path, sizeof(path), "%s/%s", cg, file);
	return kt_read_ll(path);
}

enum { MEMCG_NODES = 300000 };

struct memcg_progress {
	_Atomic long count;
	int err;
	int have_objects;
	uint64_t quota_objects, used_before, used_after;
	double t;
};

static void memcg_nodes_run(void)
{
	struct memcg_progress *pr;
	long long su0, su_peak, su_after = -1, cur0, cur_peak, peak, slab, oom_kill;
	char cg[128], byte;
	bool mounted = false, killed = false;
	int p[2], q[2], status, r, i;
	double t_back = -1, t0;
	pid_t pid;

	memcg_create("bus1-hostile", cg, sizeof(cg), &mounted);

	pr = mmap(NULL, sizeof(*pr), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	CHECK(pr != MAP_FAILED);
	memset(pr, 0, sizeof(*pr));
	CHECK_OK(pipe2(p, O_CLOEXEC));
	CHECK_OK(pipe2(q, O_CLOEXEC));
	su0 = kt_meminfo_kb("SUnreclaim");
	cur0 = cg_read(cg, "memory.current");

	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		struct bus1_cmd_peer_query qq;
		uint64_t h;
		int fd;

		close(p[0]);
		close(q[1]);
		memcg_join(cg);
		kt_become(UID_A);
		fd = kt_open_peer();
		pr->have_objects = query(fd, &qq) == 0;
		pr->quota_objects = qq.quota_objects;
		pr->used_before = qq.used_objects;
		t0 = kt_now();
		for (i = 0; i < MEMCG_NODES; i++) {
			h = BUS1_HANDLE_CREATE;
			r = hp_transfer(fd, &h, fd, NULL);
			if (r < 0) {
				pr->err = -r;
				break;
			}
			atomic_store(&pr->count, i + 1);
		}
		pr->t = kt_now() - t0;
		if (query(fd, &qq) == 0)
			pr->used_after = qq.used_objects;
		if (write(p[1], "d", 1) != 1)
			_exit(2);
		/* hold everything until the parent has measured */
		if (read(q[0], &byte, 1) < 0)
			_exit(3);
		_exit(0);
	}
	close(p[1]);
	close(q[0]);
	{
		struct pollfd pfd = { .fd = p[0], .events = POLLIN };

		if (poll(&pfd, 1, 150 * 1000 * (int)kt_time_factor()) <= 0)
			CHECK_FAIL("the child did not finish creating nodes in %u s (%ld so far)",
				   150 * kt_time_factor(), atomic_load(&pr->count));
		if (read(p[0], &byte, 1) != 1)
			killed = true;	/* died before reporting: the OOM killer? */
	}
	su_peak = kt_meminfo_kb("SUnreclaim");
	cur_peak = cg_read(cg, "memory.current");
	peak = cg_read(cg, "memory.peak");
	slab = cg_stat(cg, "slab_unreclaimable");
	oom_kill = cg_events(cg, "oom_kill");
	close(q[1]);
	CHECK_EQ(waitpid(pid, &status, 0), pid);
	if (WIFSIGNALED(status))
		killed = true;

	t0 = kt_now();
	while (kt_now() - t0 < 10) {
		su_after = kt_meminfo_kb("SUnreclaim");
		if (su_after - su0 < 8 * 1024) {
			t_back = kt_now() - t0;
			break;
		}
		usleep(200 * 1000);
	}
	memcg_remove(cg, mounted);

	REPORT("nodes created %ld of %d in %.1f s, then %s%s", atomic_load(&pr->count),
	       MEMCG_NODES, pr->t, pr->err ? strerrorname_np(pr->err) : "no error",
	       killed ? " (the child was KILLED)" : "");
	if (pr->have_objects)
		REPORT("quota_objects %llu, used_objects %llu before, %llu after",
		       (unsigned long long)pr->quota_objects,
		       (unsigned long long)pr->used_before, (unsigned long long)pr->used_after);
	else
		REPORT("quota_objects/used_objects: not in this module's PEER_QUERY");
	REPORT("SUnreclaim %lld kB before, %lld kB at the peak (+%lld kB), %lld kB after exit (+%lld kB)%s",
	       su0, su_peak, su_peak - su0, su_after, su_after - su0,
	       t_back >= 0 ? "" : " (not back within 10 s)");
	REPORT("memcg (memory.max 16M): memory.current %lld before, %lld at the peak, memory.peak %lld, slab_unreclaimable %lld, oom_kill %lld",
	       cur0, cur_peak, peak, slab, oom_kill);
	if (atomic_load(&pr->count))
		REPORT("%.0f bytes of SUnreclaim per node, %.0f bytes charged to the memcg per node",
		       (su_peak - su0) * 1024.0 / atomic_load(&pr->count),
		       slab * 1.0 / atomic_load(&pr->count));

	CHECK(!killed, "the child was killed (memcg OOM kills: %lld) after %ld nodes", oom_kill,
	      atomic_load(&pr->count));
	CHECK(pr->err == EDQUOT, "creating nodes stopped with %s after %ld, expected EDQUOT",
	      pr->err ? strerrorname_np(pr->err) : "no error", atomic_load(&pr->count));
	if (pr->have_objects && pr->err == EDQUOT) {
		CHECK(pr->used_after == pr->used_before + 2 * (uint64_t)atomic_load(&pr->count),
		      "used_objects %llu -> %llu for %ld nodes (2 each)",
		      (unsigned long long)pr->used_before, (unsigned long long)pr->used_after,
		      atomic_load(&pr->count));
		CHECK(pr->used_after <= pr->quota_objects && pr->used_after + 2 > pr->quota_objects,
		      "EDQUOT at used_objects %llu of quota_objects %llu",
		      (unsigned long long)pr->used_after, (unsigned long long)pr->quota_objects);
	}
	CHECK(su_peak - su0 < 64 * 1024, "SUnreclaim grew by %lld kB (limit 64 MiB)",
	      su_peak - su0);
	CHECK(slab >= atomic_load(&pr->count) * 128LL,
	      "the memcg was charged %lld bytes of slab for %ld nodes (at least 128 bytes each expected: GFP_KERNEL_ACCOUNT)",
	      slab, atomic_load(&pr->count));
	CHECK(t_back >= 0, "SUnreclaim stayed %lld kB above its baseline 10 s after the exit",
	      su_after - su0);
}

/*
 * A debug kernel (KASAN redzones, lockdep maps) needs about four times the
 * memory per node, so the default quota's nodes would not fit into the 16 MiB
 * cgroup and its OOM killer would stop the child first: bounded and accounted
 * as well, but not what this case checks. There the quota is lowered so that
 * its objects fit.
 */
static void memcg_nodes(void)
{
	with_debug_param("quota_objects", "16384", memcg_nodes_run);
}

/*
 * memcg_destroy, memcg_release: a node's destruction tells every holder NODE_DESTROY, and a
 * flush that drops the last remote handles of nodes tells their owner NODE_RELEASE; neither
 * can fail half-way, so neither may need memory that could be refused. An attacker in a memory
 * cgroup (memory.max 16 MiB) makes holder peers hold handles to up to MD_NODES nodes of an
 * owner (until the cgroup is half full or EDQUOT), fills the rest of the cgroup with tmpfs
 * pages (unreclaimable: no swap) up to MD_MARGIN below memory.max, then closes the owner
 * (memcg_destroy: MD_HOLDERS holders, one NODE_DESTROY per holder and node) or the holder
 * (memcg_release: one holder, one NODE_RELEASE per node). Before the fix these entries were
 * allocated during the flush with __GFP_NOFAIL, which memcg charges beyond memory.max after an
 * OOM kill: memory.peak 27.2 MB (+10.4 MB) for destroy, 18.1-18.3 MB (+1.4-1.5 MB) for
 * release, on 6.1 and 6.12. Checked: memory.peak <= memory.max + MD_SLACK (1 MiB: what the kernel may still
 * force-charge around an OOM kill, e.g. an exiting task's allocations), and the close needs
 * no OOM kill at all (the entries come with the handles now).
 */
enum { MD_NODES = 22000, MD_HOLDERS = 4 };
#define MD_MAX (16LL << 20)
#define MD_MARGIN (256LL << 10)
#define MD_SLACK (1LL << 20)

struct md_progress {
	_Atomic long nodes;
	int err;
	long long cur_created, cur_filled, filled, cur_closed;
	int stage;
};

static void md_child(const char *cg, struct md_progress *pr, int n_holders, bool release,
		     int done_fd, int hold_fd)
{
	uint64_t h, owner_h;
	int o, hs[MD_HOLDERS], i, k, r, f;
	char path[256], byte, buf[65536];

	kt_become(UID_A);
	o = kt_open_peer();
	for (k = 0; k < n_holders; k++)
		hs[k] = kt_open_peer();
	/*
	 * Nodes of o, each held by every holder, until MD_NODES, an error, or the cgroup is
	 * half full (a debug kernel's objects are larger).
	 */
	for (i = 0; i < MD_NODES && cg_read(cg, "memory.current") < MD_MAX / 2; i++) {
		owner_h = BUS1_HANDLE_CREATE;
		r = hp_transfer(o, &owner_h, hs[0], NULL);
		for (k = 1; r == 0 && k < n_holders; k++) {
			h = owner_h;
			r = hp_transfer(o, &h, hs[k], NULL);
		}
		if (r < 0) {
			pr->err = -r;
			break;
		}
		atomic_store(&pr->nodes, i + 1);
	}
	pr->cur_created = cg_read(cg, "memory.current");
	pr->stage = 1;

	/* the rest of the cgroup: tmpfs pages up to MD_MARGIN below the limit */
	snprintf(path, sizeof(path), "/dev/shm/bus1-md-%d", (int)getpid());
	f = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (f < 0)
		_exit(4);
	unlink(path);
	memset(buf, 0x5a, sizeof(buf));
	while (cg_read(cg, "memory.current") + MD_MARGIN + (long long)sizeof(buf) < MD_MAX) {
		if (write(f, buf, sizeof(buf)) != sizeof(buf))
			break;
		pr->filled += sizeof(buf);
	}
	pr->cur_filled = cg_read(cg, "memory.current");
	pr->stage = 2;

	if (release) {
		/* the last remote handle of every node goes: a NODE_RELEASE each */
		for (k = 0; k < n_holders; k++)
			close(hs[k]);
	} else {
		/* every node destroyed: a NODE_DESTROY for each holder */
		close(o);
	}
	pr->cur_closed = cg_read(cg, "memory.current");
	pr->stage = 3;
	if (write(done_fd, "d", 1) != 1)
		_exit(2);
	if (read(hold_fd, &byte, 1) < 0)
		_exit(3);
	_exit(0);
}

static void md_run(int n_holders, bool release)
{
	struct md_progress *pr;
	long long peak, max, oom_kill, cur;
	char cg[128], path[256], byte;
	bool mounted = false, killed = false;
	int p[2], q[2], status;
	pid_t pid;

	memcg_create("bus1-md", cg, sizeof(cg), &mounted);
	/* no swap in the guest; and none to hide the tmpfs pages in */
	snprintf(path, sizeof(path), "%s/memory.swap.max", cg);
	kt_write_str(path, "0");

	pr = mmap(NULL, sizeof(*pr), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	CHECK(pr != MAP_FAILED);
	memset(pr, 0, sizeof(*pr));
	CHECK_OK(pipe2(p, O_CLOEXEC));
	CHECK_OK(pipe2(q, O_CLOEXEC));

	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		close(p[0]);
		close(q[1]);
		memcg_join(cg);
		md_child(cg, pr, n_holders, release, p[1], q[0]);
	}
	close(p[1]);
	close(q[0]);
	{
		struct pollfd pfd = { .fd = p[0], .events = POLLIN };

		/* a hang, not slowness: the debug guest mid-run took 120 s for 3798 nodes */
		if (poll(&pfd, 1, 120 * 1000 * (int)kt_time_factor()) <= 0)
			CHECK_FAIL("the child did not finish in %u s (stage %d, %ld nodes)",
				   120 * kt_time_factor(), pr->stage, atomic_load(&pr->nodes));
		if (read(p[0], &byte, 1) != 1)
			killed = true;
	}
	cur = cg_read(cg, "memory.current");
	peak = cg_read(cg, "memory.peak");
	max = cg_read(cg, "memory.max");
	oom_kill = cg_events(cg, "oom_kill");
	close(q[1]);
	CHECK_EQ(waitpid(pid, &status, 0), pid);
	if (WIFSIGNALED(status))
		killed = true;
	memcg_remove(cg, mounted);

	REPORT("%ld nodes x %d holders (%s), memory.current %lld after them, %lld after %lld bytes of tmpfs, %lld after the %s close (stage %d%s)",
	       atomic_load(&pr->nodes), n_holders, pr->err ? strerrorname_np(pr->err) : "no error",
	       pr->cur_created, pr->cur_filled, pr->filled, pr->cur_closed,
	       release ? "holders'" : "owner's", pr->stage,
	       killed ? ", the child was KILLED" : "");
	REPORT("memory.max %lld, memory.peak %lld (%+lld), memory.current at the end %lld, oom_kill %lld",
	       max, peak, peak - max, cur, oom_kill);

	CHECK(pr->stage >= 2, "the child got to stage %d only (killed: %d)", pr->stage, killed);
	CHECK(atomic_load(&pr->nodes) >= 1000, "only %ld nodes", atomic_load(&pr->nodes));
	CHECK(peak <= max + MD_SLACK, "memory.peak %lld exceeds memory.max %lld by %lld (slack %lld)",
	      peak, max, peak - max, MD_SLACK);
	CHECK(pr->stage == 3 && !killed && oom_kill == 0,
	      "the %s close did not return (stage %d, killed: %d, oom_kill %lld)",
	      release ? "holders'" : "owner's", pr->stage, killed, oom_kill);
}

static void memcg_destroy(void)
{
	md_run(MD_HOLDERS, false);
}

static void memcg_release(void)
{
	md_run(1, true);
}

/* Object quota: lowered to QUOTA_OBJ for the test. */
enum { QUOTA_OBJ = 40 };

static uint64_t used_objects_as(uid_t uid, struct hpeer *p)
{
	struct bus1_cmd_peer_query q;

	query_objects_as(uid, p->fd, &q);
	return q.used_objects;
}

static void quota_objects_body(void)
{
	struct bus1_cmd_peer_query q;
	struct bus1_cmd_recv c;
	struct hpeer a = hp_open_as(UID_A), b = hp_open_as(UID_B), a2, b2;
	uint64_t nodes[QUOTA_OBJ], u0, ub0, h, n_b, b_a, carry;
	size_t k;
	int r;
	double t0 = kt_now();

	/* what an earlier case's peers held is freed as they go: wait for it (a leak fails) */
	while ((used_objects_as(UID_A, &a) || used_objects_as(UID_B, &b)) &&
	       kt_now() < t0 + 30 * kt_time_factor())
		usleep(100 * 1000);
	query_objects_as(UID_A, a.fd, &q);
	CHECK(q.used_objects == 0 && used_objects_as(UID_B, &b) == 0,
	      "uids %d and %d still hold %llu and %llu objects %.0f s after the earlier cases",
	      UID_A, UID_B, (unsigned long long)q.used_objects,
	      (unsigned long long)used_objects_as(UID_B, &b), kt_now() - t0);
	REPORT("quota_objects %llu, used_objects of uid %d at start %llu",
	       (unsigned long long)q.quota_objects, UID_A, (unsigned long long)q.used_objects);
	CHECK_EQ(q.quota_objects, QUOTA_OBJ);
	u0 = q.used_objects;
	ub0 = used_objects_as(UID_B, &b);

	/* nodes of A until EDQUOT: two objects each (the node and A's handle) */
	for (k = 0; k < QUOTA_OBJ; k++) {
		h = BUS1_HANDLE_CREATE;
		r = hp_transfer(a.fd, &h, a.fd, NULL);
		if (r < 0)
			break;
		nodes[k] = h;
		CHECK(used_objects_as(UID_A, &a) == u0 + 2 * (k + 1),
		      "used_objects %llu after %zu nodes (expected %llu)",
		      (unsigned long long)used_objects_as(UID_A, &a), k + 1,
		      (unsigned long long)(u0 + 2 * (k + 1)));
	}
	REPORT("uid %d: %zu nodes, then %s; used_objects %llu", UID_A, k,
	       r < 0 ? strerrorname_np(-r) : "no error",
	       (unsigned long long)used_objects_as(UID_A, &a));
	CHECK_EQ(r, -EDQUOT);
	CHECK_EQ(k, (QUOTA_OBJ - u0) / 2);
	CHECK(k >= 2);
	/* SEND creating a node: EDQUOT too */
	h = BUS1_HANDLE_CREATE;
	EXPECT_ERR(hp_send(a.fd, 0, &nodes[0], 1, NULL, "c", 1, &h, 1, NULL, 0), EDQUOT);

	/* another user's node handed to A: A's user would hold one more handle */
	n_b = hp_node(&b, &b, NULL);
	CHECK(used_objects_as(UID_B, &b) == ub0 + 2, "uid %d: used_objects %llu after one node",
	      UID_B, (unsigned long long)used_objects_as(UID_B, &b));
	h = n_b;
	EXPECT_ERR(hp_transfer(b.fd, &h, a.fd, NULL), EDQUOT);
	CHECK(used_objects_as(UID_A, &a) == u0 + 2 * k, "a failed transfer changed used_objects");
	CHECK(used_objects_as(UID_B, &b) == ub0 + 2, "a failed transfer changed the sender's count");

	/* B gets a handle of A's first node (charged to B) and sends A two messages */
	b_a = hp_give(&a, nodes[0], &b);
	carry = b_a;	/* a node A owns: no new handle for A */
	CHECK_OK(hp_send(b.fd, 0, &b_a, 1, NULL, "own", 3, &carry, 1, NULL, 0));
	carry = n_b;	/* B's node: A would need a new handle */
	CHECK_OK(hp_send(b.fd, 0, &b_a, 1, NULL, "new", 3, &carry, 1, NULL, 0));

	r = hp_recv(a.fd, 0, &c);
	CHECK(r == 0 && c.n_handles == 1 && hp_handles(&a, &c)[0] == nodes[0],
	      "RECV of a message carrying A's own node at quota: r %d", r);
	if (r == 0)
		hp_slice_release(a.fd, c.offset);
	r = hp_recv(a.fd, 0, &c);
	REPORT("RECV of a message carrying a new handle at quota: %s",
	       r < 0 ? strerrorname_np(-r) : "success");
	CHECK(r == -EDQUOT, "RECV at quota: expected EDQUOT, got %d", r);
	if (r == 0) {
		hp_slice_release(a.fd, c.offset);
	} else {
		/* still queued: release a node of A (node + handle: two objects), then it works */
		/*
		 * The owner's release destroys the node: its NODE_DESTROY to A counts one object
		 * until A receives it (behind the message), so one object comes back.
		 */
		CHECK_OK(hp_release(a.fd, nodes[k - 1]));
		CHECK(used_objects_as(UID_A, &a) == u0 + 2 * k - 1,
		      "used_objects %llu after releasing a node",
		      (unsigned long long)used_objects_as(UID_A, &a));
		r = hp_recv(a.fd, 0, &c);
		CHECK(r == 0, "RECV after releasing a node: %d (the message was not kept?)", r);
		if (r == 0) {
			CHECK(c.n_bytes == 3 && !memcmp(hp_data(&a, &c), "new", 3),
			      "RECV got another message");
			CHECK(c.n_handles == 1 && (hp_handles(&a, &c)[0] & BUS1_HANDLE_FLAG_REMOTE),
			      "RECV: the carried handle is not a new remote handle");
			CHECK(used_objects_as(UID_A, &a) == u0 + 2 * k,
			      "used_objects %llu after receiving a new handle",
			      (unsigned long long)used_objects_as(UID_A, &a));
			hp_slice_release(a.fd, c.offset);
		}
	}
	hp_close(&a);
	hp_close(&b);
	/* everything is returned (asked through fresh peers of each user) */
	a2 = hp_open_as(UID_A);
	b2 = hp_open_as(UID_B);
	u0 = used_objects_as(UID_A, &a2);
	ub0 = used_objects_as(UID_B, &b2);
	REPORT("after closing: used_objects uid %d %llu, uid %d %llu", UID_A,
	       (unsigned long long)u0, UID_B, (unsigned long long)ub0);
	CHECK(u0 == 0 && ub0 == 0, "objects still charged after every peer was closed");
	hp_close(&a2);
	hp_close(&b2);
}

static void quota_objects(void)
{
	char v[16];

	snprintf(v, sizeof(v), "%d", QUOTA_OBJ);
	with_param("quota_objects", v, quota_objects_body);
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

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
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

static void multicast_hol(void)
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

/* ------------------------------------------------------------------------------------------ */
/*
 * 5. BUS1_MSG_NODE_RELEASE: the owner learns when nobody else holds its node (and no message
 * carrying it is in flight).
 */

#ifndef BUS1_MSG_NODE_RELEASE
#define BUS1_MSG_NODE_RELEASE 3
#endif

#define expect_release(_p, _node, _what) expect_release_at(__LINE__, _p, _node, _what)
static void expect_release_at(int line, struct hpeer *p, uint64_t node, const char *what)
{
	struct bus1_cmd_recv c;
	int r = hp_recv(p->fd, 0, &c);

	if (r < 0)
		CHECK_FAIL("line %d: %s: expected NODE_RELEASE of %llu, RECV: %s", line, what,
			(unsigned long long)node, strerror(-r));
	if (c.type != BUS1_MSG_NODE_RELEASE || c.destination != node)
		CHECK_FAIL("line %d: %s: expected NODE_RELEASE of %llu, got type %llu for %llu", line,
			what, (unsigned long long)node, (unsigned long long)c.type,
			(unsigned long long)c.destination);
	if (c.offset != BUS1_OFFSET_INVALID || c.n_bytes || c.n_handles || c.n_fds ||
	    c.uid != (uint32_t)-1 || c.gid != (uint32_t)-1 || c.pid || c.tid)
		CHECK_FAIL("line %d: %s: NODE_RELEASE with offset %llu, %llu/%llu/%llu bytes/handles/fds, uid %u gid %u pid %u tid %u",
			line, what, (unsigned long long)c.offset, (unsigned long long)c.n_bytes,
			(unsigned long long)c.n_handles, (unsigned long long)c.n_fds, c.uid, c.gid,
			c.pid, c.tid);
}

#define expect_data(_p, _node, _s) expect_data_at(__LINE__, _p, _node, _s)
static void expect_data_at(int line, struct hpeer *p, uint64_t node, const char *s)
{
	struct bus1_cmd_recv c;
	int r = hp_recv(p->fd, 0, &c);

	if (r < 0)
		CHECK_FAIL("line %d: expected the message \"%s\", RECV: %s", line, s, strerror(-r));
	if (c.type != BUS1_MSG_DATA || c.destination != node || c.n_bytes != strlen(s) ||
	    memcmp(hp_data(p, &c), s, c.n_bytes))
		CHECK_FAIL("line %d: expected the message \"%s\" to %llu, got type %llu to %llu (%llu bytes)",
			line, s, (unsigned long long)node, (unsigned long long)c.type,
			(unsigned long long)c.destination, (unsigned long long)c.n_bytes);
	hp_slice_release(p->fd, c.offset);
}

#define expect_type(_p, _type, _h) expect_type_at(__LINE__, _p, _type, _h)
static void expect_type_at(int line, struct hpeer *p, uint64_t type, uint64_t h)
{
	struct bus1_cmd_recv c;
	int r = hp_recv(p->fd, 0, &c);

	if (r < 0 || c.type != type || c.destination != h)
		CHECK_FAIL("line %d: expected type %llu for %llu, got r %d type %llu for %llu", line,
			(unsigned long long)type, (unsigned long long)h, r,
			(unsigned long long)c.type, (unsigned long long)c.destination);
	if (c.offset != BUS1_OFFSET_INVALID)
		hp_slice_release(p->fd, c.offset);
}

#define expect_empty(_p, _what) expect_empty_at(__LINE__, _p, _what)
static void expect_empty_at(int line, struct hpeer *p, const char *what)
{
	struct bus1_cmd_recv c;
	int r = hp_recv(p->fd, BUS1_RECV_FLAG_PEEK, &c);

	if (r != -EAGAIN)
		CHECK_FAIL("line %d: %s: expected an empty queue, got r %d type %llu for %llu", line,
			what, r, r ? 0ULL : (unsigned long long)c.type,
			r ? 0ULL : (unsigned long long)c.destination);
}

static void node_release(void)
{
	struct hpeer a = hp_open(), b = hp_open(), c = hp_open(), b2;
	struct bus1_cmd_recv m;
	uint64_t n, n2, bn, bn2, cn, nc, a_nc, carry;
	int steps = 0;

	/* a node nobody else ever held: nothing */
	n = hp_node(&a, &a, NULL);
	expect_empty(&a, "a new node");
	CHECK_OK(hp_release(a.fd, n));
	/* releasing the owner's handle destroys the node: a NODE_DESTROY for that id (bus1.7) */
	expect_type(&a, BUS1_MSG_NODE_DESTROY, n);
	expect_empty(&a, "the owner released a node nobody else held");

	/* one holder releases */
	n = hp_node(&a, &b, &bn);
	expect_empty(&a, "B holds the node");
	CHECK_OK(hp_release(b.fd, bn));
	expect_release(&a, n, "B released");
	expect_empty(&a, "after the one NODE_RELEASE");
	steps++;

	/* re-acquired and released again: a second one */
	bn = hp_give(&a, n, &b);
	expect_empty(&a, "B holds the node again");
	CHECK_OK(hp_release(b.fd, bn));
	expect_release(&a, n, "B released the node a second time");
	steps++;

	/* B sends M1 to the node, then releases: M1, then RELEASE */
	bn = hp_give(&a, n, &b);
	CHECK_OK(hp_send1(b.fd, bn, "M1", 2, -1));
	CHECK_OK(hp_release(b.fd, bn));
	expect_data(&a, n, "M1");
	expect_release(&a, n, "B sent M1, then released");
	steps++;

	/* B releases, then sends M2 to another node of A: RELEASE, then M2 */
	bn = hp_give(&a, n, &b);
	n2 = hp_node(&a, &b, &bn2);
	CHECK_OK(hp_release(b.fd, bn));
	CHECK_OK(hp_send1(b.fd, bn2, "M2", 2, -1));
	expect_release(&a, n, "B released, then sent M2");
	expect_data(&a, n2, "M2");
	CHECK_OK(hp_release(b.fd, bn2));
	expect_release(&a, n2, "B released its handle of the second node");
	steps++;

	/* two holders: only after both released */
	bn = hp_give(&a, n, &b);
	cn = hp_give(&a, n, &c);
	CHECK_OK(hp_release(b.fd, bn));
	expect_empty(&a, "B released, C still holds");
	CHECK_OK(hp_release(c.fd, cn));
	expect_release(&a, n, "B and C released");
	steps++;

	/* in flight: A sends the node to C while B holds it; B releases; C receives, releases */
	nc = hp_node(&c, &a, &a_nc);
	bn = hp_give(&a, n, &b);
	carry = n;
	CHECK_OK(hp_send(a.fd, 0, &a_nc, 1, NULL, "carry", 5, &carry, 1, NULL, 0));
	CHECK_OK(hp_release(b.fd, bn));
	expect_empty(&a, "B released while a message carries the node to C");
	hp_recv_wait(&c, &m, 1000);
	CHECK_EQ(m.n_handles, 1);
	cn = hp_handles(&c, &m)[0];
	CHECK(cn != BUS1_HANDLE_INVALID);
	hp_slice_release(c.fd, m.offset);
	expect_empty(&a, "C received the handle");
	CHECK_OK(hp_release(c.fd, cn));
	expect_release(&a, n, "C received the carried handle and released it");
	(void)nc;
	steps++;

	/* the holder disconnects (close) */
	b2 = hp_open();
	bn = hp_give(&a, n, &b2);
	(void)bn;
	hp_close(&b2);
	expect_release(&a, n, "the holder closed its fd");
	steps++;

	/* the holder resets */
	bn = hp_give(&a, n, &b);
	{
		struct bus1_cmd_peer_reset rst = { 0 };

		CHECK_OK(xioctl(b.fd, BUS1_CMD_PEER_RESET, &rst));
	}
	expect_release(&a, n, "the holder reset");
	steps++;

	/* the owner releases its own handle: the node is destroyed, no RELEASE ever */
	bn = hp_give(&a, n, &b);
	CHECK_OK(hp_release(a.fd, n));
	expect_type(&a, BUS1_MSG_NODE_DESTROY, n);
	expect_type(&b, BUS1_MSG_NODE_DESTROY, bn);
	CHECK_OK(hp_release(b.fd, bn));
	expect_empty(&a, "the owner released (destroyed) the node, then B released");
	steps++;

	/* NODES_DESTROY, then the holder releases: no RELEASE */
	n = hp_node(&a, &b, &bn);
	CHECK_OK(hp_destroy(a.fd, n));
	expect_type(&a, BUS1_MSG_NODE_DESTROY, n);
	expect_type(&b, BUS1_MSG_NODE_DESTROY, bn);
	CHECK_OK(hp_release(b.fd, bn));
	expect_empty(&a, "NODES_DESTROY, then B released");
	steps++;

	REPORT("%d NODE_RELEASE scenarios as specified", steps);
	hp_close(&a);
	hp_close(&b);
	hp_close(&c);
}

/*
 * Inferred from the rule, not spelled out: the only reference left is a message in flight,
 * and that message is dropped unreceived (its receiver closes): nobody else can hold the node
 * any more, so the owner should learn it.
 */
static void node_release_dropped(void)
{
	struct hpeer a = hp_open(), c = hp_open();
	bool got_destroy = false, got_release = false;
	struct bus1_cmd_recv m;
	uint64_t n, a_nc, carry;
	int i, r;

	n = hp_node(&a, &a, NULL);
	hp_node(&c, &a, &a_nc);
	carry = n;
	CHECK_OK(hp_send(a.fd, 0, &a_nc, 1, NULL, "carry", 5, &carry, 1, NULL, 0));
	expect_empty(&a, "a message carries the node to C");
	hp_close(&c);
	/* C's own node is gone too: A gets its NODE_DESTROY, in either order with the RELEASE */
	for (i = 0; i < 2; i++) {
		r = hp_recv(a.fd, 0, &m);
		if (r < 0)
			CHECK_FAIL("after C closed: expected NODE_DESTROY of %llu and NODE_RELEASE of %llu, entry %d: %s",
				(unsigned long long)a_nc, (unsigned long long)n, i + 1,
				strerror(-r));
		if (m.type == BUS1_MSG_NODE_DESTROY && m.destination == a_nc && !got_destroy)
			got_destroy = true;
		else if (m.type == BUS1_MSG_NODE_RELEASE && m.destination == n && !got_release)
			got_release = true;
		else
			CHECK_FAIL("after C closed: unexpected type %llu for %llu",
				(unsigned long long)m.type, (unsigned long long)m.destination);
	}
	expect_empty(&a, "after the NODE_DESTROY and the NODE_RELEASE");
	REPORT("a dropped in-flight message ends the hold: NODE_RELEASE received");
	hp_close(&a);
}

/* ------------------------------------------------------------------------------------------ */
/* 6. Translation of destroyed nodes; pool_size bounds. */

static void destroyed_in_flight(void)
{
	struct hpeer o = hp_open(), s = hp_open(), r1 = hp_open(), r2 = hp_open();
	struct bus1_cmd_recv c;
	uint64_t n, s_n, r2_n, d[2], carry;

	n = hp_node(&o, &s, &s_n);
	r2_n = hp_give(&o, n, &r2);		/* R2 already holds the node, R1 does not */
	hp_node(&r1, &s, &d[0]);
	hp_node(&r2, &s, &d[1]);
	carry = s_n;
	CHECK_OK(hp_send(s.fd, 0, d, 2, NULL, "h", 1, &carry, 1, NULL, 0));
	CHECK_OK(hp_destroy(o.fd, n));

	hp_recv_wait(&r1, &c, 1000);
	CHECK_EQ(c.type, BUS1_MSG_DATA);
	CHECK_EQ(c.n_handles, 1);
	REPORT("receiver without a handle reads %#llx", (unsigned long long)hp_handles(&r1, &c)[0]);
	EXPECT_EQ(hp_handles(&r1, &c)[0], BUS1_HANDLE_INVALID);
	hp_slice_release(r1.fd, c.offset);
	expect_empty(&r1, "R1 never held the node: no notification");

	hp_recv_wait(&r2, &c, 1000);
	CHECK_EQ(c.type, BUS1_MSG_DATA);
	CHECK_EQ(c.n_handles, 1);
	REPORT("receiver holding handle %#llx reads %#llx", (unsigned long long)r2_n,
	       (unsigned long long)hp_handles(&r2, &c)[0]);
	EXPECT_EQ(hp_handles(&r2, &c)[0], r2_n);
	hp_slice_release(r2.fd, c.offset);
	/* the destruction was after the message */
	expect_type(&r2, BUS1_MSG_NODE_DESTROY, r2_n);
	hp_close(&o);
	hp_close(&s);
	hp_close(&r1);
	hp_close(&r2);
}

static void pool_size_param(void)
{
	const char *path = PARAM_DIR "pool_size";
	struct bus1_cmd_peer_query q;
	long long orig, after_big, after_small = -1, restored;
	char buf[32];
	int r_big, r_small, r;
	struct hpeer p;
	size_t small_pool = 0;

	orig = kt_read_ll(path);
	CHECK(orig > 0);
	r_big = kt_write_str(path, "536870912");
	after_big = kt_read_ll(path);
	/* put it back at once, whatever happened */
	snprintf(buf, sizeof(buf), "%lld", orig);
	if (after_big != orig)
		CHECK_OK(kt_write_str(path, buf));
	r_small = kt_write_str(path, "1048576");
	if (r_small == 0) {
		after_small = kt_read_ll(path);
		p = hp_open();
		r = query(p.fd, &q);
		small_pool = r >= 0 ? q.pool_size : 0;
		hp_close(&p);
	}
	CHECK_OK(kt_write_str(path, buf));
	restored = kt_read_ll(path);

	REPORT("pool_size %lld; writing 536870912: %s, then it read %lld", orig,
	       r_big < 0 ? strerrorname_np(-r_big) : "accepted", after_big);
	REPORT("writing 1048576: %s, read %lld, a new peer's pool %zu; restored to %lld",
	       r_small < 0 ? strerrorname_np(-r_small) : "accepted", after_small, small_pool,
	       restored);
	CHECK(r_big == -EINVAL, "writing 512 MiB: expected EINVAL, got %s",
	      r_big < 0 ? strerrorname_np(-r_big) : "success");
	CHECK(after_big == orig, "after the refused write pool_size reads %lld (was %lld)",
	      after_big, orig);
	CHECK(r_small == 0 && after_small == 1048576 && small_pool == 1048576,
	      "1 MiB: write %d, reads %lld, new pool %zu", r_small, after_small, small_pool);
	CHECK(restored == orig, "pool_size not restored: %lld", restored);
}

/* ------------------------------------------------------------------------------------------ */
/*
 * 6. A reset racing node creation. One thread of a peer P keeps handing P a handle to another
 * peer's node and resetting P (the reset's release of that handle owes the other peer a
 * NODE_RELEASE), while a second thread keeps creating nodes of P (some handed to a third peer
 * R), sending to them and receiving. No node may end up freed without having been destroyed
 * (the kernel WARNs), and every holder of a node P owned must be told NODE_DESTROY by the
 * final reset at the latest. The WARNs are counted in the kernel log.
 */

enum { FR_SECONDS = 10, FR_MAX_GIVEN = 4096 };

static struct {
	struct hpeer p, q, r;
	uint64_t q_node;
	atomic_bool stop;
	unsigned long n_resets, n_creates, n_msgs, n_edquot, n_create_edquot;
	size_t n_given;
	uint64_t given[FR_MAX_GIVEN];	/* R's ids of P's nodes, ascending */
} fr;

static void *fr_resetter(void *arg)
{
	struct bus1_cmd_peer_reset reset = { 0 };
	unsigned long i;
	uint64_t h;
	int r;

	(void)arg;
	for (i = 0; !atomic_load(&fr.stop); i++) {
		h = fr.q_node;
		r = hp_transfer(fr.q.fd, &h, fr.p.fd, NULL);
		if (r < 0)
			CHECK_FAIL("HANDLE_TRANSFER(Q's node -> P): %s", strerror(-r));
		r = xioctl(fr.p.fd, BUS1_CMD_PEER_RESET, &reset);
		if (r < 0)
			CHECK_FAIL("PEER_RESET: %s", strerror(-r));
		/* the NODE_RELEASEs this owes Q */
		if (i % 256 == 255)
			hp_drain(&fr.q);
	}
	fr.n_resets = i;
	return NULL;
}

static void *fr_creator(void *arg)
{
	struct bus1_cmd_recv c;
	unsigned long i;
	uint64_t h, d;
	bool give;
	int r;

	(void)arg;
	for (i = 0; !atomic_load(&fr.stop); i++) {
		give = i % 8 == 0 && fr.n_given < FR_MAX_GIVEN;
		h = BUS1_HANDLE_CREATE;
		d = BUS1_HANDLE_INVALID;
		r = hp_transfer(fr.p.fd, &h, give ? fr.r.fd : fr.p.fd, &d);
		/* EHOSTUNREACH: a reset destroyed the new node before the destination got it */
		if (r == -EHOSTUNREACH)
			continue;
		if (r == -EDQUOT && !fr.n_create_edquot++) {
			struct bus1_cmd_peer_query q;

			query_objects(fr.p.fd, &q);
			REPORT("first CREATE EDQUOT after %lu: used_objects %llu used_messages %llu",
			       i, (unsigned long long)q.used_objects,
			       (unsigned long long)q.used_messages);
		}
		if (r == -EDQUOT)
			continue;
		if (r < 0)
			CHECK_FAIL("HANDLE_TRANSFER(CREATE): %s", strerror(-r));
		if (give)
			fr.given[fr.n_given++] = d;
		/* the reset may have destroyed the node or released the handle already */
		r = hp_send1(fr.p.fd, h, "ping", 4, -1);
		fr.n_edquot += r == -EDQUOT;
		if (r < 0 && r != -EHOSTUNREACH && r != -ENXIO && r != -EDQUOT)
			CHECK_FAIL("SEND to a new node: %s", strerror(-r));
		fr.n_msgs += r == 0;
		while ((r = hp_recv(fr.p.fd, 0, &c)) == 0) {
			if (c.offset == BUS1_OFFSET_INVALID)
				continue;
			r = hp_slice_release(fr.p.fd, c.offset);
			if (r < 0 && r != -ENXIO)	/* ENXIO: a reset freed it */
				CHECK_FAIL("SLICE_RELEASE: %s", strerror(-r));
		}
		if (r != -EAGAIN)
			CHECK_FAIL("RECV: %s", strerror(-r));
	}
	fr.n_creates = i;
	return NULL;
}

static void fr_run(void *arg, struct result *res)
{
	struct bus1_cmd_peer_reset reset = { 0 };
	struct bus1_cmd_peer_query q;
	struct bus1_cmd_recv c;
	pthread_t t1, t2;
	size_t n_told = 0, n_other = 0, n_twice = 0, lo, hi, mid;
	uint8_t *told;

	(void)arg;
	fr.p = hp_open();
	fr.q = hp_open();
	fr.r = hp_open();
	fr.q_node = hp_node(&fr.q, &fr.q, NULL);
	CHECK_OK(-pthread_create(&t1, NULL, fr_resetter, NULL));
	CHECK_OK(-pthread_create(&t2, NULL, fr_creator, NULL));
	sleep(FR_SECONDS);
	atomic_store(&fr.stop, true);
	pthread_join(t1, NULL);
	pthread_join(t2, NULL);

	/* every node P still owns is destroyed now: R must have heard of each one */
	CHECK_OK(xioctl(fr.p.fd, BUS1_CMD_PEER_RESET, &reset));
	hp_drain(&fr.q);
	query_objects(fr.p.fd, &q);
	REPORT("%lu SENDs, %lu failed with EDQUOT; after a reset and a drain: used_messages %llu",
	       fr.n_msgs, fr.n_edquot, (unsigned long long)q.used_messages);
	told = calloc(FR_MAX_GIVEN, 1);
	CHECK(told);
	while (hp_recv(fr.r.fd, 0, &c) == 0) {
		if (c.type != BUS1_MSG_NODE_DESTROY) {
			++n_other;
			if (c.offset != BUS1_OFFSET_INVALID)
				hp_slice_release(fr.r.fd, c.offset);
			continue;
		}
		for (lo = 0, hi = fr.n_given; lo < hi;) {
			mid = (lo + hi) / 2;
			if (fr.given[mid] < c.destination)
				lo = mid + 1;
			else
				hi = mid;
		}
		if (lo < fr.n_given && fr.given[lo] == c.destination) {
			n_twice += told[lo];
			told[lo] = 1;
		} else {
			++n_other;
		}
	}
	for (lo = 0; lo < fr.n_given; lo++)
		n_told += told[lo];
	free(told);
	res->v[0] = fr.n_resets;
	res->v[1] = fr.n_creates;
	res->v[2] = fr.n_given;
	res->v[3] = n_told;
	CHECK(n_other == 0 && n_twice == 0, "R got %zu unexpected entries, %zu duplicates",
	      n_other, n_twice);
	hp_close(&fr.p);
	hp_close(&fr.q);
	hp_close(&fr.r);
}

/* Kernel log records from @fd on: how many contain "WARNING:", how many of those @what. */
static size_t kmsg_warnings(int fd, const char *what, size_t *n_what)
{
	char rec[8192];
	size_t n = 0;
	ssize_t len;

	*n_what = 0;
	for (;;) {
		len = read(fd, rec, sizeof(rec) - 1);
		if (len < 0 && errno == EPIPE)	/* overwritten records: go on */
			continue;
		if (len <= 0)
			break;
		rec[len] = 0;
		if (strstr(rec, "WARNING:")) {
			++n;
			*n_what += strstr(rec, what) != NULL;
		}
	}
	return n;
}

static void flush_race(void)
{
	size_t n_warn, n_node;
	struct job j;
	int kfd;

	/* only records from now on */
	kfd = open("/dev/kmsg", O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	CHECK(kfd >= 0);
	CHECK(lseek(kfd, 0, SEEK_END) >= 0);

	j = job_start(UID_A, fr_run, NULL);
	if (!job_wait(&j, (FR_SECONDS + 40) * 1000))
		CHECK_FAIL("the race did not end within %d s", FR_SECONDS + 40);

	n_warn = kmsg_warnings(kfd, "bus1_node_free", &n_node);
	close(kfd);
	REPORT("%d s as uid %d: %llu resets, %llu creations; %zu kernel WARNINGs (%zu in bus1_node_free); R was given %llu nodes, told NODE_DESTROY of %llu",
	       FR_SECONDS, UID_A, (unsigned long long)j.res.v[0], (unsigned long long)j.res.v[1],
	       n_warn, n_node, (unsigned long long)j.res.v[2], (unsigned long long)j.res.v[3]);
	CHECK(n_warn == 0, "%zu kernel WARNINGs during the race", n_warn);
	CHECK(j.res.v[3] == j.res.v[2], "%llu of R's %llu handles were never told NODE_DESTROY",
	      (unsigned long long)(j.res.v[2] - j.res.v[3]), (unsigned long long)j.res.v[2]);
	CHECK(j.res.v[0] > 0 && j.res.v[1] > 0, "the race did not run");
}

/* ------------------------------------------------------------------------------------------ */
/*
 * 7. Slices a receiver keeps. A slice that was received and not released is outside the
 * message quotas (those end at RECV), and the pool size bounds them only at 8 bytes each: a
 * peer's pool holds at most max_slices busy slices (ENOSPC beyond, like a full pool), and a
 * foreign user gets at most half of what is left of that count (EDQUOT, like its share of
 * the bytes).
 */

enum { SB_TRIES = 200000 };

static unsigned long long sb_max(void)
{
	long long v = kt_read_ll(PARAM_DIR "max_slices");

	return v < 0 ? 0 : (unsigned long long)v;
}

/* As uid A: 4-byte messages to itself, each received and kept, until a SEND fails. */
static void sb_self(void *arg, struct result *res)
{
	struct hpeer p = hp_open();
	struct bus1_cmd_recv c;
	uint64_t n, first = BUS1_OFFSET_INVALID;
	long long slab0 = kt_meminfo_kb("Slab");
	size_t k;
	int r = 0;

	(void)arg;
	n = hp_node(&p, &p, NULL);
	for (k = 0; k < SB_TRIES; k++) {
		r = hp_send1(p.fd, n, "keep", 4, -1);
		if (r < 0)
			break;
		CHECK_OK(hp_recv(p.fd, 0, &c));
		if (first == BUS1_OFFSET_INVALID)
			first = c.offset;
	}
	res->v[0] = k;
	res->r = r;
	res->v[1] = (uint64_t)(kt_meminfo_kb("Slab") - slab0);
	/* one slice released: room for exactly one more */
	if (r < 0) {
		CHECK_OK(hp_slice_release(p.fd, first));
		res->v[2] = hp_send1(p.fd, n, "more", 4, -1) == 0;
		res->v[3] = hp_send1(p.fd, n, "more", 4, -1) == r;
	}
	hp_close(&p);
}

static struct {
	struct hpeer a, b;
	uint64_t a_n, b_n;
} sb;

/* Send 4-byte messages to @h of @p (nobody receives them) until a SEND fails. */
static void sb_fill(struct hpeer *p, uint64_t h, struct result *res)
{
	size_t k;
	int r = 0;

	for (k = 0; k < SB_TRIES; k++) {
		r = hp_send1(p->fd, h, "fill", 4, -1);
		if (r < 0)
			break;
	}
	res->v[0] = k;
	res->r = r;
}

static void sb_foreign(void *arg, struct result *res)
{
	(void)arg;
	sb_fill(&sb.b, sb.b_n, res);
}

static void sb_owner(void *arg, struct result *res)
{
	(void)arg;
	sb_fill(&sb.a, sb.a_n, res);
}

/* With a small max_slices (1024): the peers are opened under it. */
static void sb_share_body(void)
{
	unsigned long long max = sb_max();
	struct job j;

	/* a foreign sender gets half of the count, the owner's user the rest */
	sb.a = hp_open_as(UID_A);
	sb.b = hp_open_as(UID_B);
	sb.a_n = hp_node(&sb.a, &sb.b, &sb.b_n);
	j = job_start(UID_B, sb_foreign, NULL);
	if (!job_wait(&j, 50000))
		CHECK_FAIL("the foreign sender did not end");
	REPORT("max_slices %llu: uid %d into uid %d's pool: %llu messages, then %s", max, UID_B,
	       UID_A, (unsigned long long)j.res.v[0],
	       j.res.r ? strerrorname_np(-j.res.r) : "no error");
	CHECK(j.res.r == -EDQUOT && j.res.v[0] == max / 2,
	      "foreign sender: %llu accepted then %s (expected %llu, EDQUOT)",
	      (unsigned long long)j.res.v[0], strerrorname_np(-j.res.r), max / 2);
	j = job_start(UID_A, sb_owner, NULL);
	if (!job_wait(&j, 50000))
		CHECK_FAIL("the owner's sender did not end");
	REPORT("uid %d into its own pool after that: %llu messages, then %s", UID_A,
	       (unsigned long long)j.res.v[0], j.res.r ? strerrorname_np(-j.res.r) : "no error");
	CHECK(j.res.r == -ENOSPC && j.res.v[0] == max - max / 2,
	      "owner: %llu accepted then %s (expected %llu, ENOSPC)",
	      (unsigned long long)j.res.v[0], strerrorname_np(-j.res.r), max - max / 2);
	hp_close(&sb.a);
	hp_close(&sb.b);
}

static void slice_bound_run(void)
{
	unsigned long long max = sb_max();
	struct job j;

	REPORT("max_slices %llu%s", max, max ? "" : " (no such parameter)");
	j = job_start(UID_A, sb_self, NULL);
	if (!job_wait(&j, 50000))
		CHECK_FAIL("filling a pool with kept slices did not end");
	REPORT("uid %d: %llu self-sent 4-byte messages received and kept, then %s; Slab %+lld KiB",
	       UID_A, (unsigned long long)j.res.v[0],
	       j.res.r ? strerrorname_np(-j.res.r) : "no error", (long long)j.res.v[1]);
	CHECK(j.res.v[0] < SB_TRIES, "all %d kept slices accepted: no bound", SB_TRIES);
	CHECK(j.res.r == -ENOSPC, "the bound fails with %s, not ENOSPC",
	      strerrorname_np(-j.res.r));
	CHECK(max && j.res.v[0] == max, "%llu slices accepted, max_slices is %llu",
	      (unsigned long long)j.res.v[0], max);
	CHECK(j.res.v[2] && j.res.v[3], "after releasing one slice: one more SEND %s, the next %s",
	      j.res.v[2] ? "works" : "fails", j.res.v[3] ? "fails again" : "does not fail");
	CHECK(kt_write_str(PARAM_DIR "max_slices", "0") == -EINVAL, "max_slices accepts 0");

	/* small enough that the foreign sender's message quota is not what stops it */
	with_param("max_slices", "1024", sb_share_body);
}

/*
 * A debug kernel under TCG fills the default 32768 kept slices (a SEND and a RECV each) in
 * about a minute on a slow machine: there the bound checked is 4096, the same code path.
 */
static void slice_bound(void)
{
	with_debug_param("max_slices", "4096", slice_bound_run);
}

/* ------------------------------------------------------------------------------------------ */
/*
 * 8. Notifications a peer never reads. NODE_RELEASE (its node handed to another peer and
 * released there, in a loop) is coalesced per node: one stays queued. NODE_DESTROY (a node
 * created and its owner handle released, in a loop: one NODE_DESTROY to the owner each time)
 * counts one object until received, so the loop ends in EDQUOT within quota_objects. The
 * kernel's unreclaimable slab is measured around each loop.
 */

enum { NB_RELEASES = 300000, NB_DESTROYS = 600000 };
/* fewer on a debug kernel (see notify_bound()) */
static int nb_releases = NB_RELEASES;

static void nb_run(void *arg, struct result *res)
{
	struct hpeer p = hp_open(), q = hp_open();
	struct bus1_cmd_peer_query qq;
	struct bus1_cmd_recv c;
	long long s0;
	uint64_t n, h;
	size_t k, queued = 0;
	int r = 0;

	(void)arg;
	/* releases */
	n = hp_node(&p, &p, NULL);
	s0 = kt_meminfo_kb("SUnreclaim");
	for (k = 0; k < (size_t)nb_releases; k++) {
		h = hp_give(&p, n, &q);
		CHECK_OK(hp_release(q.fd, h));
	}
	res->v[0] = (uint64_t)(kt_meminfo_kb("SUnreclaim") - s0);
	while (hp_recv(p.fd, 0, &c) == 0) {
		CHECK(c.type == BUS1_MSG_NODE_RELEASE && c.destination == n,
		      "unexpected entry type %llu for %llu", (unsigned long long)c.type,
		      (unsigned long long)c.destination);
		++queued;
	}
	res->v[1] = queued;

	/* destructions */
	s0 = kt_meminfo_kb("SUnreclaim");
	for (k = 0; k < NB_DESTROYS; k++) {
		h = BUS1_HANDLE_CREATE;
		r = hp_transfer(p.fd, &h, p.fd, NULL);
		if (r < 0)
			break;
		CHECK_OK(hp_release(p.fd, h));
	}
	res->v[2] = (uint64_t)(kt_meminfo_kb("SUnreclaim") - s0);
	res->v[3] = k;
	res->r = r;
	query_objects(p.fd, &qq);
	REPORT("after %zu destructions: used_objects %llu of %llu", k,
	       (unsigned long long)qq.used_objects, (unsigned long long)qq.quota_objects);
	/* reading them gives the objects back */
	queued = hp_drain(&p);
	query_objects(p.fd, &qq);
	REPORT("%zu entries received; used_objects %llu", queued,
	       (unsigned long long)qq.used_objects);
	CHECK(queued == k, "%zu NODE_DESTROYs queued for %zu destructions", queued, k);
	CHECK(qq.used_objects == 2, "used_objects %llu after reading (the first node: 2)",
	      (unsigned long long)qq.used_objects);
	h = BUS1_HANDLE_CREATE;
	CHECK(hp_transfer(p.fd, &h, p.fd, NULL) == 0, "no new node after reading");
	hp_close(&p);
	hp_close(&q);
}

static void notify_bound_run(void)
{
	struct job j = job_start(UID_A, nb_run, NULL);

	if (!job_wait(&j, 170000))
		CHECK_FAIL("the notification floods did not end");
	REPORT("uid %d: %d releases of a node by another peer, never read: %llu NODE_RELEASE queued, SUnreclaim %+lld KiB",
	       UID_A, nb_releases, (unsigned long long)j.res.v[1], (long long)j.res.v[0]);
	REPORT("uid %d: %llu of %d create+release (NODE_DESTROY to itself) accepted, then %s; SUnreclaim %+lld KiB",
	       UID_A, (unsigned long long)j.res.v[3], NB_DESTROYS,
	       j.res.r ? strerrorname_np(-j.res.r) : "no error", (long long)j.res.v[2]);
	CHECK(j.res.v[1] == 1, "%llu NODE_RELEASE queued for one node",
	      (unsigned long long)j.res.v[1]);
	/* unbounded, 300,000 entries took 57 MB */
	CHECK((long long)j.res.v[0] < 8192, "SUnreclaim grew by %lld KiB for one node's releases",
	      (long long)j.res.v[0]);
	CHECK(j.res.v[3] < NB_DESTROYS && j.res.r == -EDQUOT,
	      "%llu unread NODE_DESTROYs accepted, then %s", (unsigned long long)j.res.v[3],
	      j.res.r ? strerrorname_np(-j.res.r) : "no error");
}

/*
 * A debug kernel (KASAN, lockdep, under TCG) runs these ioctls about a hundred
 * times slower: there the floods are 20,000 releases and the quota 4096
 * objects, the same bounds in a tenth of the time.
 */
static void notify_bound(void)
{
	if (debug_kernel()) {
		nb_releases = 20000;
		REPORT("debug kernel: %d releases", nb_releases);
	}
	with_debug_param("quota_objects", "4096", notify_bound_run);
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
static void gc_stall(void)
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
static void gc_starve(void)
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
static void gc_unix_latency(void)
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

static const struct kt_case cases[] = {
	KT_CASE_T(cycle_leak, 60),
	KT_CASE_T(cycle_pair, 60),
	KT_CASE_T(cycle_listen, 60),
	KT_CASE_T(cycle_alive, 60),
	KT_CASE_T(unix_socket_pass, 30),
	KT_CASE_T(recv_stall, 60),
	KT_CASE_T(send_stall, 60),
	KT_CASE_T(memcg_nodes, 200),
	KT_CASE_T(memcg_destroy, 150),
	KT_CASE_T(memcg_release, 150),
	KT_CASE_T(quota_objects, 60),
	KT_CASE_T(multicast_hol, 120),
	KT_CASE_T(node_release, 30),
	KT_CASE_T(node_release_dropped, 30),
	KT_CASE_T(destroyed_in_flight, 30),
	KT_CASE_T(pool_size_param, 30),
	KT_CASE_T(flush_race, 90),
	KT_CASE_T(slice_bound, 120),
	KT_CASE_T(gc_stall, 200),
	KT_CASE_T(notify_bound, 180),
	KT_CASE_T(gc_starve, 200),
	KT_CASE_T(gc_unix_latency, 320),
};

int main(int argc, char **argv)
{
	return kt_main(cases, sizeof(cases) / sizeof(cases[0]), argc, argv);
}
