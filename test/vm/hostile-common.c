/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * test-hostile: the helpers every theme uses: raw peers (ioctls without libbus1,
 * see test-hostile.c), jobs run as another user, processes, module parameters.
 */

#include "hostile.h"

#define REFCNT "/sys/module/bus1/refcnt"

/* ------------------------------------------------------------------------------------------ */
/* Raw peers. */

/* PEER_QUERY before quota_objects and used_objects were added (14 fields). */
struct legacy_peer_query {
	__u64 fields[14];
};
#define LEGACY_CMD_PEER_QUERY _IOWR(BUS1_IOCTL_MAGIC, 0x01, struct legacy_peer_query)

int xioctl(int fd, unsigned long cmd, void *arg)
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
int query(int fd, struct bus1_cmd_peer_query *q)
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
void query_objects(int fd, struct bus1_cmd_peer_query *q)
{
	int r = query(fd, q);

	if (r == 1)
		CHECK_FAIL("PEER_QUERY with quota_objects/used_objects: ENOTTY (the module predates it)");
	if (r < 0)
		CHECK_FAIL("PEER_QUERY: %s", strerror(-r));
}

/* PEER_QUERY as seen by @uid (used_* are the counters of the caller's real uid). */
void query_objects_as(uid_t uid, int fd, struct bus1_cmd_peer_query *q)
{
	if (setresuid(uid, uid, 0) < 0)
		CHECK_FAIL("setresuid(%u): %m", (unsigned int)uid);
	query_objects(fd, q);
	if (setresuid(0, 0, 0) < 0)
		CHECK_FAIL("setresuid(0): %m");
}

struct hpeer hp_from_fd(int fd)
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

struct hpeer hp_open(void)
{
	return hp_from_fd(kt_open_peer());
}

/* Open a peer whose opener is @uid (we are root and single-threaded). */
struct hpeer hp_open_as(uid_t uid)
{
	struct hpeer p;

	if (setresuid(uid, uid, 0) < 0)
		CHECK_FAIL("setresuid(%u): %m", (unsigned int)uid);
	p = hp_open();
	if (setresuid(0, 0, 0) < 0)
		CHECK_FAIL("setresuid(0): %m");
	return p;
}

void hp_close(struct hpeer *p)
{
	if (p->pool)
		munmap((void *)p->pool, p->size);
	if (p->fd >= 0)
		close(p->fd);
	p->pool = NULL;
	p->fd = -1;
}

int hp_transfer(int fd, uint64_t *src, int dst_fd, uint64_t *dst)
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
uint64_t hp_node(struct hpeer *owner, struct hpeer *holder, uint64_t *holder_h)
{
	uint64_t h = BUS1_HANDLE_CREATE;
	int r = hp_transfer(owner->fd, &h, holder->fd, holder_h);

	if (r < 0)
		CHECK_FAIL("HANDLE_TRANSFER(CREATE): %s", strerror(-r));
	return h;
}

/* Give @to a handle to the node of @from's handle @h; returns @to's id. */
uint64_t hp_give(struct hpeer *from, uint64_t h, struct hpeer *to)
{
	uint64_t d = BUS1_HANDLE_INVALID;
	int r = hp_transfer(from->fd, &h, to->fd, &d);

	if (r < 0)
		CHECK_FAIL("HANDLE_TRANSFER: %s", strerror(-r));
	return d;
}

int hp_release(int fd, uint64_t h)
{
	struct bus1_cmd_handle_release cmd = { .handle = h };

	return xioctl(fd, BUS1_CMD_HANDLE_RELEASE, &cmd);
}

int hp_destroy(int fd, uint64_t h)
{
	struct bus1_cmd_nodes_destroy cmd = { .ptr_nodes = (__u64)(uintptr_t)&h, .n_nodes = 1 };

	return xioctl(fd, BUS1_CMD_NODES_DESTROY, &cmd);
}

int hp_send(int fd, uint64_t flags, const uint64_t *dests, size_t n_dests, uint32_t *errors,
	    const void *data, size_t len, uint64_t *handles, size_t n_handles, const int *fds,
	    size_t n_fds)
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
int hp_send1(int fd, uint64_t dst, const void *data, size_t len, int carry_fd)
{
	return hp_send(fd, 0, &dst, 1, NULL, data, len, NULL, 0, carry_fd >= 0 ? &carry_fd : NULL,
		       carry_fd >= 0);
}

int hp_recv(int fd, uint64_t flags, struct bus1_cmd_recv *cmd)
{
	memset(cmd, 0, sizeof(*cmd));
	cmd->flags = flags;
	return xioctl(fd, BUS1_CMD_RECV, cmd);
}

int hp_slice_release(int fd, uint64_t offset)
{
	struct bus1_cmd_slice_release cmd = { .offset = offset };

	return xioctl(fd, BUS1_CMD_SLICE_RELEASE, &cmd);
}

const uint8_t *hp_data(const struct hpeer *p, const struct bus1_cmd_recv *c)
{
	if (c->offset == BUS1_OFFSET_INVALID || c->offset >= p->size)
		CHECK_FAIL("RECV: offset %llu outside the pool", (unsigned long long)c->offset);
	return p->pool + c->offset;
}

const uint64_t *hp_handles(const struct hpeer *p, const struct bus1_cmd_recv *c)
{
	return (const uint64_t *)(hp_data(p, c) + ((c->n_bytes + 7) & ~(uint64_t)7));
}

const int *hp_fds(const struct hpeer *p, const struct bus1_cmd_recv *c)
{
	return (const int *)(hp_handles(p, c) + c->n_handles);
}

/* Receive the next message, which must be there (waits up to @ms for it). */
void hp_recv_wait(struct hpeer *p, struct bus1_cmd_recv *c, int ms)
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
size_t hp_drain(struct hpeer *p)
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

/*
 * Fork a child that becomes @uid (unless (uid_t)-1), runs @fn and writes its result back.
 * The child's own fds are the parent's (every peer the case opened).
 */
struct job job_start(uid_t uid, void (*fn)(void *arg, struct result *res), void *arg)
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
bool job_wait(struct job *j, int ms)
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
char proc_state(pid_t pid)
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
void proc_stack(pid_t pid, char *out, size_t size)
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

void send_fd(int sock, int fd)
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
int recv_fd(int sock, int flags)
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

long long refcnt(void)
{
	long long v = kt_read_ll(REFCNT);

	if (v < 0)
		CHECK_FAIL(REFCNT ": %m");
	return v;
}

/* KASAN, lockdep and kmemleak: the ioctls run many times slower and objects are larger */
bool debug_kernel(void)
{
	return access("/sys/kernel/debug/kmemleak", F_OK) == 0;
}

/*
 * Run @fn in a child with module parameter @name set to @value, then restore the old value
 * whatever happened; the case fails if the child failed.
 */
void with_param(const char *name, const char *value, void (*fn)(void))
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
void with_debug_param(const char *name, const char *value, void (*fn)(void))
{
	if (debug_kernel()) {
		REPORT("debug kernel: %s %s for this case", name, value);
		with_param(name, value, fn);
	} else {
		fn();
	}
}

/* qsort() of the latencies a case measured, for their percentiles. */
int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}
