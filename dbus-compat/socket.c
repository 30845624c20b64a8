/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Nonblocking unix stream connection with D-Bus message framing, fd passing
 * and a zero-copy write queue. See socket.h for the contract.
 */

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>
#include "dbus-compat/socket.h"
#include "util/error.h"
#include "util/fd.h"
#include "util/list.h"
#include "util/macro.h"

#ifndef SO_PEERGROUPS
#define SO_PEERGROUPS 59
#endif
#ifndef SO_PEERPIDFD
#define SO_PEERPIDFD 77
#endif

/* Size of the per-thread read buffer shared by all sockets (see below). */
#define SOCKET_SCRATCH_SIZE SOCKET_FRAME_LARGE
/* What a socket's own buffer holds beyond an incomplete header or SASL line. */
#define SOCKET_READ_MIN (16U * 1024U)
/*
 * A large frame's buffer is allocated for the whole frame once its header is
 * in, up to this size; beyond it, the buffer grows (doubling) with the data
 * that arrives, so a bare header claiming 128 MiB pins no more than this
 * much address space (untouched pages cost no memory).
 */
#define SOCKET_LARGE_PREALLOC (4U * 1024U * 1024U)
/*
 * Legitimate peers never have more than a couple of fd batches pending (see
 * socket_dispatch_read()); more means someone is hoarding fds in our process.
 */
#define SOCKET_BATCHES_MAX 8U

/* fds that arrived with the stream bytes [start, end). */
struct fd_batch {
	uint64_t start;
	uint64_t end;
	size_t n_fds;
	int fds[];
};

struct socket {
	int fd;
	struct socket_creds creds;
	bool framing;
	bool eof;
	bool violation;

	/*
	 * Input: buffered bytes are in[in_start..in_end). @in is NULL while
	 * nothing is buffered, the thread's scratch buffer while @in_scratch,
	 * else a buffer of the socket's own.
	 */
	uint8_t *in;
	size_t in_alloc;
	size_t in_start;
	size_t in_end;
	bool in_scratch;
	/* The last read took less than it offered room for (see socket.h). */
	bool in_drained;
	/* Stream offset of in[in_start]. */
	uint64_t in_offset;

	struct fd_batch **batches;
	size_t n_batches;

	/* Output. */
	struct list_node out_queue;
	size_t out_bytes;
	size_t out_fds;
};

/*
 * Input buffering. Between two wakeups almost every connection has nothing
 * buffered: whatever arrived formed complete messages, which the owner took.
 * Keeping a read buffer per connection would cost memory for nothing, so a
 * socket with nothing buffered reads into a buffer shared by all sockets of
 * the thread (the scratch buffer, SOCKET_SCRATCH_SIZE bytes), and the owner
 * takes the frames straight out of it. Only bytes left behind (an incomplete
 * frame or SASL line) need storage of their own: they stay in the scratch
 * buffer until another socket reads (scratch_user tells whose bytes are
 * there), and are then moved into a buffer sized for them. A socket keeps a
 * buffer of its own only while it holds such a remainder.
 *
 * A frame above SOCKET_FRAME_LARGE is received into a buffer of its own that
 * ends with the frame (reads never go past its end), so socket_read_frame()
 * hands that buffer out instead of copying the frame.
 *
 * Sockets are used by one thread at a time; the scratch buffer is per thread.
 */
static __thread uint8_t *scratch;
static __thread struct socket *scratch_user;

/* ---- credentials ------------------------------------------------------ */

void socket_creds_deinit(struct socket_creds *creds)
{
	free(creds->groups);
	creds->groups = NULL;
	creds->n_groups = 0;
	free(creds->label);
	creds->label = NULL;
	creds->pidfd = safe_close(creds->pidfd);
}

/* An optional credential failed with @err: without it (socket_creds_query()). */
static int creds_degrade(struct socket_creds *creds, unsigned int what, int err)
{
	if (err == -ENOMEM)
		return err;
	if (!creds->failed)
		creds->failed_errno = -err;
	creds->failed |= what;
	if (what == SOCKET_CREDS_NO_GROUPS)
		creds->groups_unknown = true;
	return 0;
}

static int query_peersec(struct socket_creds *creds, int fd)
{
	socklen_t len = 64;

	for (;;) {
		_cleanup_free_ char *buf = malloc(len + 1);
		socklen_t l = len;

		if (!buf)
			return -ENOMEM;
		if (getsockopt(fd, SOL_SOCKET, SO_PEERSEC, buf, &l) >= 0) {
			/* The kernel may or may not count a trailing NUL. */
			buf[MIN(l, len)] = '\0';
			if (buf[0] != '\0')
				creds->label = steal_ptr(buf);
			return 0;
		}
		if (errno == ENOPROTOOPT || errno == EOPNOTSUPP)
			return 0; /* no LSM label on this socket */
		if (errno != ERANGE)
			return -errno;
		/* l tells the size the kernel wants; guard against no progress */
		len = l > len ? l : len * 2;
		if (len > 64 * 1024)
			return -E2BIG;
	}
}

static int query_peergroups(struct socket_creds *creds, int fd)
{
	socklen_t len = 32 * sizeof(gid_t);

	for (;;) {
		_cleanup_free_ gid_t *buf = malloc(len);
		socklen_t l = len;

		if (!buf)
			return -ENOMEM;
		if (getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, buf, &l) >= 0) {
			creds->n_groups = l / sizeof(gid_t);
			creds->groups = steal_ptr(buf);
			return 0;
		}
		if (errno == ENOPROTOOPT || errno == EOPNOTSUPP || errno == ENODATA)
			return 0;
		if (errno != ERANGE)
			return -errno;
		len = l > len ? l : len * 2;
		/* NGROUPS_MAX is 65536 */
		if (len > 65536 * sizeof(gid_t))
			return -E2BIG;
	}
}

int socket_peer_pidfd(int fd)
{
	socklen_t l = sizeof(int);
	int pidfd;

	if (getsockopt(fd, SOL_SOCKET, SO_PEERPIDFD, &pidfd, &l) < 0)
		return -1;
	return pidfd;
}

int socket_creds_query(struct socket_creds *creds, int fd)
{
	struct sockaddr_storage sa;
	struct ucred uc;
	socklen_t l = sizeof(sa);
	int pidfd = -1, r;

	memset(creds, 0, sizeof(*creds));
	creds->pidfd = -1;
	creds->uid = (uid_t)-1;
	creds->gid = (gid_t)-1;

	/*
	 * Only a unix socket has credentials: on TCP, SO_PEERCRED "succeeds"
	 * with pid 0 and the overflow uid, which must never be taken for an
	 * identity.
	 */
	if (getsockname(fd, (struct sockaddr *)&sa, &l) < 0)
		return error_origin(-errno);
	if (sa.ss_family != AF_UNIX)
		return 0;
	creds->have_creds = true;

	l = sizeof(uc);
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &uc, &l) < 0)
		return error_origin(-errno);
	if (l != sizeof(uc))
		return -EIO;
	creds->pid = uc.pid;
	creds->uid = uc.uid;
	creds->gid = uc.gid;

	r = query_peersec(creds, fd);
	if (r < 0)
		r = creds_degrade(creds, SOCKET_CREDS_NO_LABEL, r);
	if (r >= 0) {
		r = query_peergroups(creds, fd);
		if (r < 0)
			r = creds_degrade(creds, SOCKET_CREDS_NO_GROUPS, r);
	}
	if (r < 0) {
		socket_creds_deinit(creds);
		return r;
	}

	pidfd = socket_peer_pidfd(fd);
	if (pidfd >= 0) {
		creds->pidfd = pidfd;
		creds->pidfd_of_socket = true;
	} else if (errno == ENOPROTOOPT || errno == EOPNOTSUPP || errno == EINVAL) {
		/*
		 * A kernel before 6.5: the pid, now. It may name another process
		 * if the peer already exited and its pid was reused (the race
		 * SO_PEERPIDFD closes); that is all such a kernel allows.
		 */
		if (creds->pid > 0) {
			pidfd = (int)syscall(SYS_pidfd_open, creds->pid, 0);
			if (pidfd >= 0)
				creds->pidfd = pidfd;
		}
	} else if (errno != ESRCH && errno != ENODATA) {
		/* ESRCH: the peer already exited; that is "absent" too. */
		(void)creds_degrade(creds, SOCKET_CREDS_NO_PIDFD, -errno);
	}
	return 0;
}

/* What socket_get_creds() returns once the owner has taken them (or never had any). */
static void socket_creds_none(struct socket_creds *creds)
{
	*creds = (struct socket_creds){
		.pid = 0,
		.uid = (uid_t)-1,
		.gid = (gid_t)-1,
		.pidfd = -1,
	};
}

void socket_take_creds(struct socket *s, struct socket_creds *creds)
{
	*creds = s->creds;
	socket_creds_none(&s->creds);
}

/* ---- frames ------------------------------------------------------------ */

static uint32_t read_u32(const uint8_t *p, bool big_endian)
{
	if (big_endian)
		return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
	return (uint32_t)p[3] << 24 | (uint32_t)p[2] << 16 | (uint32_t)p[1] << 8 | p[0];
}

int socket_frame_size(const uint8_t header[SOCKET_FRAME_HEADER], size_t *sizep)
{
	uint64_t body, fields, size;
	bool big;

	if (header[0] == 'l')
		big = false;
	else if (header[0] == 'B')
		big = true;
	else
		return SOCKET_E_PROTOCOL;

	/* Another major protocol version cannot be talked to (spec). */
	if (header[3] != 1)
		return SOCKET_E_PROTOCOL;

	body = read_u32(header + 4, big);
	fields = read_u32(header + 12, big);
	/* The header fields are an array, and arrays are at most 64 MiB. */
	if (fields > SOCKET_FRAME_MAX / 2)
		return SOCKET_E_PROTOCOL;
	/* 64-bit arithmetic: two 32-bit lengths cannot overflow it. */
	size = SOCKET_FRAME_HEADER + ALIGN_TO(fields, (uint64_t)8) + body;
	if (size > SOCKET_FRAME_MAX)
		return SOCKET_E_PROTOCOL;

	*sizep = (size_t)size;
	return 0;
}

void socket_frame_deinit(struct socket_frame *frame)
{
	size_t i;

	free(frame->data);
	frame->data = NULL;
	frame->n_data = 0;
	for (i = 0; i < frame->n_fds; i++)
		safe_close(frame->fds[i]);
	free(frame->fds);
	frame->fds = NULL;
	frame->n_fds = 0;
}

/* ---- object ------------------------------------------------------------ */

/* socket_new(); with @query false the credentials stay empty (socket_new_restored()). */
static int socket_new_with(struct socket **socketp, int fd, bool query)
{
	_cleanup_close_ int fd_owned = fd;
	struct socket *s;
	int r;

	/* Accepted, inherited or carried over: in the loop's mode whatever it came in. */
	r = fd_prepare_for_loop(fd);
	if (r < 0)
		return r;

	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;

	if (query) {
		r = socket_creds_query(&s->creds, fd);
		if (r < 0) {
			free(s);
			return r;
		}
	} else {
		socket_creds_none(&s->creds);
	}

	s->fd = steal_fd(&fd_owned);
	list_init(&s->out_queue);
	*socketp = s;
	return 0;
}

int socket_new(struct socket **socketp, int fd)
{
	return socket_new_with(socketp, fd, true);
}

/* Forget the input buffer; nothing may be buffered any more. */
static void socket_release_input(struct socket *s)
{
	if (s->in_scratch) {
		if (scratch_user == s)
			scratch_user = NULL;
		s->in_scratch = false;
	} else {
		free(s->in);
	}
	s->in = NULL;
	s->in_alloc = 0;
	s->in_start = s->in_end = 0;
}

static void batch_free(struct fd_batch *b)
{
	size_t i;

	for (i = 0; i < b->n_fds; i++)
		safe_close(b->fds[i]);
	free(b);
}

/* Remove the first fd batch from the queue, without closing its fds. */
static struct fd_batch *socket_pop_batch(struct socket *s)
{
	struct fd_batch *b = s->batches[0];

	memmove(s->batches, s->batches + 1, (s->n_batches - 1) * sizeof(*s->batches));
	s->n_batches--;
	return b;
}

static void socket_drop_batches(struct socket *s)
{
	while (s->n_batches > 0)
		batch_free(socket_pop_batch(s));
}

/* Mark the stream as broken; received fds cannot be handed out any more. */
static int socket_violation(struct socket *s)
{
	s->violation = true;
	socket_drop_batches(s);
	return SOCKET_E_PROTOCOL;
}

static void socket_release_entry(struct socket *s, struct socket_entry *e)
{
	list_unlink(&e->link);
	s->out_bytes -= e->n_total - e->n_written;
	if (e->n_written == 0)
		s->out_fds -= e->n_fds;
	if (e->release)
		e->release(e);
}

struct socket *socket_free(struct socket *s)
{
	struct socket_entry *e;

	if (!s)
		return NULL;

	while ((e = list_first_entry(&s->out_queue, struct socket_entry, link)))
		socket_release_entry(s, e);

	socket_drop_batches(s);
	free(s->batches);
	socket_release_input(s);
	socket_creds_deinit(&s->creds);
	safe_close(s->fd);
	free(s);
	return NULL;
}

int socket_get_fd(const struct socket *s)
{
	return s->fd;
}

const struct socket_creds *socket_get_creds(const struct socket *s)
{
	return &s->creds;
}

size_t socket_get_buffered_bytes(const struct socket *s)
{
	return s->in_end - s->in_start;
}

bool socket_is_drained(const struct socket *s)
{
	return s->in_drained;
}

bool socket_holds_fds(const struct socket *s)
{
	return s->n_batches > 0;
}

/* ---- reading ----------------------------------------------------------- */

/*
 * Give the buffered bytes a buffer of the socket's own with @alloc bytes
 * (>= the buffered bytes), starting at its front. A buffer of its own is
 * resized in place (realloc() of a large block moves no data); bytes in the
 * scratch buffer are copied out.
 */
static int socket_own_input(struct socket *s, size_t alloc)
{
	size_t n = s->in_end - s->in_start;
	uint8_t *p;

	if (s->in_scratch) {
		p = malloc(alloc);
		if (!p)
			return -ENOMEM;
		memcpy(p, s->in + s->in_start, n);
		if (scratch_user == s)
			scratch_user = NULL;
		s->in_scratch = false;
	} else {
		if (s->in_start > 0)
			memmove(s->in, s->in + s->in_start, n);
		s->in_start = 0;
		s->in_end = n;
		if (alloc == s->in_alloc)
			return 0;
		p = realloc(s->in, alloc);
		if (!p)
			return -ENOMEM;
	}
	s->in = p;
	s->in_alloc = alloc;
	s->in_start = 0;
	s->in_end = n;
	return 0;
}

/*
 * Size of the buffer of its own for a remainder of @buffered bytes. A large
 * frame: the whole frame (up to SOCKET_LARGE_PREALLOC, beyond that twice what
 * is buffered), and nothing after it. Otherwise the rest of the frame and
 * room for SOCKET_READ_MIN more bytes: a peer that leaves remainders is busy,
 * and reads the size of one remainder would double the recvmsg() calls; the
 * buffer goes once everything in it has been taken.
 */
static size_t remainder_alloc(size_t frame_size, size_t buffered)
{
	if (frame_size > SOCKET_LARGE_PREALLOC)
		return MIN(frame_size, MAX((size_t)SOCKET_LARGE_PREALLOC, 2 * buffered));
	if (frame_size > SOCKET_FRAME_LARGE)
		return frame_size;
	return MAX(frame_size, buffered + SOCKET_READ_MIN);
}

static int socket_front_frame_size(struct socket *s, size_t *sizep);

/*
 * Make the scratch buffer the input buffer of @s, which has nothing buffered.
 * The bytes another socket left there are moved into a buffer of its own
 * first, sized for the rest of their frame, so that its next read does not
 * have to move them again.
 */
static int socket_use_scratch(struct socket *s)
{
	struct socket *u = scratch_user;
	size_t size = 0;
	int r;

	if (!scratch) {
		scratch = malloc(SOCKET_SCRATCH_SIZE);
		if (!scratch)
			return -ENOMEM;
	}
	if (u && u != s) {
		if (u->in_end > u->in_start) {
			/* A broken header is reported when @u reads again. */
			if (!u->framing || socket_front_frame_size(u, &size))
				size = 0;
			r = socket_own_input(u, remainder_alloc(size, u->in_end - u->in_start));
			if (r < 0)
				return r;
		} else {
			socket_release_input(u);
		}
	}
	socket_release_input(s);
	s->in = scratch;
	s->in_alloc = SOCKET_SCRATCH_SIZE;
	s->in_scratch = true;
	scratch_user = s;
	return 0;
}

/*
 * Prepare the input buffer for one read and return how many bytes it may
 * take (in *maxp): the socket's buffered input stays in place or moves, as
 * the comment on scratch explains. @frame_size is the size of the frame at
 * the front (0 while its header is incomplete, or in raw mode).
 */
static int socket_prepare_read(struct socket *s, size_t frame_size, size_t *maxp)
{
	size_t buffered = s->in_end - s->in_start, alloc;
	int r;

	if (buffered == 0) {
		r = socket_use_scratch(s);
		if (r < 0)
			return r;
		*maxp = s->in_alloc;
		return 0;
	}

	if (frame_size > SOCKET_FRAME_LARGE) {
		/*
		 * A large frame: its own buffer, ending with the frame. The
		 * whole frame up to SOCKET_LARGE_PREALLOC, then doubling.
		 */
		if (s->in_scratch || s->in_start > 0 || s->in_end == s->in_alloc) {
			r = socket_own_input(s, remainder_alloc(frame_size, buffered));
			if (r < 0)
				return r;
		}
		*maxp = MIN(s->in_alloc - s->in_end, frame_size - buffered);
		return 0;
	}

	if (s->in_scratch) {
		/* Still ours: read on behind the remainder. */
		if (s->in_start > 0) {
			memmove(s->in, s->in + s->in_start, buffered);
			s->in_start = 0;
			s->in_end = buffered;
		}
		*maxp = s->in_alloc - s->in_end;
		return 0;
	}

	/* A remainder in its own buffer: make room (compact, then grow). */
	alloc = remainder_alloc(frame_size, buffered);
	if (s->in_alloc - s->in_end < alloc - buffered) {
		r = socket_own_input(s, MAX(alloc, s->in_alloc));
		if (r < 0)
			return r;
	}
	*maxp = s->in_alloc - s->in_end;
	return 0;
}

/*
 * Size of the frame at the front of the input, if its header is complete.
 * Returns 0 and *sizep (0 when the header is incomplete), or SOCKET_E_PROTOCOL.
 */
static int socket_front_frame_size(struct socket *s, size_t *sizep)
{
	*sizep = 0;
	if (s->in_end - s->in_start < SOCKET_FRAME_HEADER)
		return 0;
	return socket_frame_size(s->in + s->in_start, sizep);
}

static int socket_add_batch(struct socket *s, uint64_t start, uint64_t end, const int *fds,
			    size_t n_fds)
{
	struct fd_batch *b, **v;

	b = malloc(sizeof(*b) + n_fds * sizeof(int));
	if (!b)
		return -ENOMEM;
	b->start = start;
	b->end = end;
	b->n_fds = n_fds;
	memcpy(b->fds, fds, n_fds * sizeof(int));

	v = realloc(s->batches, (s->n_batches + 1) * sizeof(*v));
	if (!v) {
		free(b); /* the caller closes the fds */
		return -ENOMEM;
	}
	s->batches = v;
	s->batches[s->n_batches++] = b;
	return 0;
}

int socket_dispatch_read(struct socket *s)
{
	union {
		struct cmsghdr align;
		uint8_t buf[CMSG_SPACE(sizeof(int) * SOCKET_FDS_MAX)];
	} control;
	int fds[SOCKET_FDS_MAX];
	size_t n_fds = 0, buffered = s->in_end - s->in_start, space, size = 0;
	struct cmsghdr *cmsg;
	struct msghdr msg;
	struct iovec iov;
	uint64_t start;
	ssize_t n;
	int r;

	if (s->violation)
		return SOCKET_E_PROTOCOL;
	if (s->eof)
		return SOCKET_E_EOF;

	s->in_drained = false;
	if (s->framing) {
		r = socket_front_frame_size(s, &size);
		if (r)
			return socket_violation(s);
		if (size && buffered >= size)
			return 0; /* a complete frame waits; let the owner take it */
	} else if (buffered >= SOCKET_RAW_MAX) {
		return 0;
	}

	r = socket_prepare_read(s, size, &space);
	if (r < 0)
		return r;

	iov.iov_base = s->in + s->in_end;
	iov.iov_len = space;
	memset(&msg, 0, sizeof(msg));
	msg.msg_iov = &iov;
	msg.msg_iovlen = 1;
	msg.msg_control = &control;
	msg.msg_controllen = sizeof(control);

	n = recvmsg(s->fd, &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
	if (n < 0) {
		if (errno == EAGAIN) {
			s->in_drained = true;
			return 0;
		}
		if (errno == EINTR)
			return 0;
		if (errno == ECONNRESET) {
			s->eof = true;
			return SOCKET_E_EOF;
		}
		return error_origin(-errno);
	}

	/* Collect fds first so no exit path below leaks them. */
	for (cmsg = CMSG_FIRSTHDR(&msg); cmsg; cmsg = CMSG_NXTHDR(&msg, cmsg)) {
		size_t k;

		if (cmsg->cmsg_level != SOL_SOCKET || cmsg->cmsg_type != SCM_RIGHTS)
			continue;
		k = (cmsg->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		if (k > SOCKET_FDS_MAX - n_fds)
			k = SOCKET_FDS_MAX - n_fds; /* cannot happen: buffer sized for max */
		memcpy(fds + n_fds, CMSG_DATA(cmsg), k * sizeof(int));
		n_fds += k;
	}

	if (msg.msg_flags & MSG_CTRUNC) {
		close_many(fds, n_fds);
		return socket_violation(s);
	}

	if (n == 0) {
		close_many(fds, n_fds);
		s->eof = true;
		return SOCKET_E_EOF;
	}

	start = s->in_offset + buffered;
	s->in_end += (size_t)n;
	/*
	 * A short read is the kernel running out of input, unless it stopped at
	 * a message with fds (a read ends after the fds of one sendmsg()).
	 */
	s->in_drained = (size_t)n < space && n_fds == 0;

	if (n_fds > 0) {
		if (s->n_batches >= SOCKET_BATCHES_MAX) {
			close_many(fds, n_fds);
			return socket_violation(s);
		}
		r = socket_add_batch(s, start, start + (uint64_t)n, fds, n_fds);
		if (r < 0) {
			close_many(fds, n_fds);
			return r;
		}
	}
	return 0;
}

const void *socket_peek_raw(const struct socket *s, size_t *np)
{
	*np = s->in_end - s->in_start;
	return s->in ? s->in + s->in_start : (const void *)"";
}

void socket_consume_raw(struct socket *s, size_t n)
{
	n = MIN(n, s->in_end - s->in_start);
	s->in_start += n;
	s->in_offset += n;
	if (s->in_start == s->in_end)
		socket_release_input(s);

	/*
	 * fds that came with bytes the authentication layer consumed can never
	 * belong to a message.
	 */
	if (s->n_batches > 0 && s->batches[0]->end <= s->in_offset)
		socket_violation(s);
}

void socket_start_framing(struct socket *s)
{
	s->framing = true;
}

int socket_peek_frame(struct socket *s, size_t *sizep)
{
	size_t size;
	int r;

	if (s->violation)
		return SOCKET_E_PROTOCOL;
	if (!s->framing)
		return SOCKET_E_AGAIN;

	r = socket_front_frame_size(s, &size);
	if (r)
		return socket_violation(s);
	if (size == 0 || s->in_end - s->in_start < size) {
		/* Leftover fds that no complete frame can claim. */
		if (s->eof && s->n_batches > 0)
			socket_drop_batches(s);
		return SOCKET_E_AGAIN;
	}

	*sizep = size;
	return 0;
}

/*
 * Collect the fds of the frame [start, end): the batches whose bytes begin
 * inside it (see socket.h), with its first byte or with a later part of it,
 * even when they run on into the next frame. A batch whose bytes no frame
 * claims any more is a protocol violation.
 */
static int socket_claim_fds(struct socket *s, uint64_t start, uint64_t end, int **fdsp,
			    size_t *n_fdsp)
{
	_cleanup_free_ int *fds = NULL;
	size_t i, k, n_fds = 0;

	/*
	 * Decide first which batches are the frame's, then take them: a
	 * violation or ENOMEM half-way must not lose fds already taken out of
	 * the batches (socket_violation() closes only what is still queued).
	 */
	for (k = 0; k < s->n_batches; k++) {
		const struct fd_batch *b = s->batches[k];

		if (b->end <= start)
			return socket_violation(s); /* no frame started in it */
		if (b->start >= end)
			break; /* a later frame's */
		/*
		 * b->start > start: with a later part of the message, as libdbus
		 * allows. b->end > end: the read ran on into the next frame (the
		 * kernel glues a writer's segments up to one with fds); the owner
		 * keeps fds beyond this message's UNIX_FDS for the next ones.
		 */
		n_fds += b->n_fds;
	}
	if (n_fds > 0) {
		fds = malloc(n_fds * sizeof(int));
		if (!fds)
			return -ENOMEM;
	}
	for (i = 0, n_fds = 0; i < k; i++) {
		struct fd_batch *b = socket_pop_batch(s);

		memcpy(fds + n_fds, b->fds, b->n_fds * sizeof(int));
		n_fds += b->n_fds;
		free(b);
	}

	*fdsp = steal_ptr(fds);
	*n_fdsp = n_fds;
	return 0;
}

int socket_take_frame(struct socket *s, void *dst, int **fdsp, size_t *n_fdsp)
{
	size_t size;
	int r;

	r = socket_peek_frame(s, &size);
	if (r)
		return r;

	r = socket_claim_fds(s, s->in_offset, s->in_offset + size, fdsp, n_fdsp);
	if (r)
		return r;

	memcpy(dst, s->in + s->in_start, size);
	s->in_start += size;
	s->in_offset += size;
	if (s->in_start == s->in_end)
		socket_release_input(s);
	return 0;
}

int socket_read_frame(struct socket *s, struct socket_frame *frame)
{
	int *fds = NULL;
	size_t size, n_fds = 0;
	void *data;
	int r;

	r = socket_peek_frame(s, &size);
	if (r)
		return r;

	if (size > SOCKET_FRAME_LARGE && !s->in_scratch && s->in_start == 0 && s->in_end == size) {
		/*
		 * The buffer holds exactly this message (always so for a large
		 * one, see socket_prepare_read()): hand it over.
		 */
		r = socket_claim_fds(s, s->in_offset, s->in_offset + size, &fds, &n_fds);
		if (r)
			return r;
		data = steal_ptr(s->in);
		s->in_alloc = 0;
		s->in_start = s->in_end = 0;
		s->in_offset += size;
	} else {
		data = malloc(size);
		if (!data)
			return -ENOMEM;
		r = socket_take_frame(s, data, &fds, &n_fds);
		if (r) {
			free(data);
			return r;
		}
	}

	frame->data = data;
	frame->n_data = size;
	frame->fds = fds;
	frame->n_fds = n_fds;
	return 0;
}

/* ---- writing ----------------------------------------------------------- */

int socket_queue(struct socket *s, struct socket_entry *e)
{
	size_t i, total = 0;

	if (e->n_fds > SOCKET_FDS_MAX)
		return SOCKET_E_TOO_MANY_FDS;
	for (i = 0; i < e->n_iov; i++)
		total += e->iov[i].iov_len;
	/* fds need at least one byte to travel with. */
	if (total == 0 && e->n_fds > 0)
		return -EINVAL;

	e->n_total = total;
	e->n_written = 0;
	list_init(&e->link);
	if (total == 0) {
		if (e->release)
			e->release(e);
		return 0;
	}

	list_append(&s->out_queue, &e->link);
	s->out_bytes += total;
	s->out_fds += e->n_fds;
	return 0;
}

/*
 * An entry of the socket's own: a copy of the bytes (after the fds), and fds
 * it owns, closed when the entry is released (written or dropped).
 */
struct copy_entry {
	struct socket_entry entry;
	struct iovec iov;
	size_t n_fds;
	int fds[];
};

static void copy_entry_release(struct socket_entry *e)
{
	struct copy_entry *c = container_of(e, struct copy_entry, entry);

	close_many(c->fds, c->n_fds);
	free(c);
}

/*
 * Queue a copy of @n bytes with @n_fds fds to send with the first of them. On
 * success the socket owns the fds (closed when the entry is released); on
 * failure they stay the caller's.
 */
static int socket_queue_copy_fds(struct socket *s, const void *data, size_t n, const int *fds,
				 size_t n_fds)
{
	struct copy_entry *c;
	uint8_t *p;

	if (n_fds > SOCKET_FDS_MAX)
		return SOCKET_E_TOO_MANY_FDS;
	if (n == 0)
		return n_fds > 0 ? -EINVAL : 0;
	c = calloc(1, sizeof(*c) + n_fds * sizeof(int) + n);
	if (!c)
		return -ENOMEM;
	if (n_fds > 0)
		memcpy(c->fds, fds, n_fds * sizeof(int));
	c->n_fds = n_fds;
	p = (uint8_t *)(c->fds + n_fds);
	memcpy(p, data, n);
	c->iov.iov_base = p;
	c->iov.iov_len = n;
	c->entry.iov = &c->iov;
	c->entry.n_iov = 1;
	c->entry.fds = c->fds;
	c->entry.n_fds = n_fds;
	c->entry.release = copy_entry_release;
	/* Cannot fail: the fd count and the size were checked above. */
	return socket_queue(s, &c->entry);
}

int socket_queue_copy(struct socket *s, const void *data, size_t n)
{
	return socket_queue_copy_fds(s, data, n, NULL, 0);
}

/*
 * Gather the front of the queue into @iov: the first entry from where it
 * stopped, then whole entries, up to IOV_MAX vectors. An entry whose fds are
 * still to be sent goes out in a sendmsg() of its own: the fds then travel
 * with its first byte, and the receiver (the kernel ends a read after the
 * segment with fds) sees no other message start in that segment, which is
 * what socket_dispatch_read() relies on to attach fds.
 */
static size_t socket_gather(struct socket *s, struct iovec *iov, size_t max, const int **fdsp,
			    size_t *n_fdsp)
{
	struct socket_entry *e;
	size_t n = 0;
	bool first = true;

	*fdsp = NULL;
	*n_fdsp = 0;

	list_for_each_entry(e, &s->out_queue, link) {
		size_t skip = e->n_written, i;

		bool alone = false;

		if (!first && e->n_fds > 0)
			break;
		if (first && e->n_written == 0 && e->n_fds > 0) {
			*fdsp = e->fds;
			*n_fdsp = e->n_fds;
			alone = true;
		}
		first = false;

		for (i = 0; i < e->n_iov && n < max; i++) {
			const struct iovec *v = &e->iov[i];

			if (skip >= v->iov_len) {
				skip -= v->iov_len;
				continue;
			}
			if (v->iov_len - skip == 0)
				continue;
			iov[n].iov_base = (uint8_t *)v->iov_base + skip;
			iov[n].iov_len = v->iov_len - skip;
			skip = 0;
			n++;
		}
		if (n >= max || alone)
			break;
	}
	return n;
}

/* Account @n written bytes to the front entries, releasing finished ones. */
static void socket_advance(struct socket *s, size_t n)
{
	struct socket_entry *e;

	while (n > 0 && (e = list_first_entry(&s->out_queue, struct socket_entry, link))) {
		size_t left = e->n_total - e->n_written;

		if (e->n_written == 0)
			s->out_fds -= e->n_fds;
		if (n < left) {
			e->n_written += n;
			s->out_bytes -= n;
			return;
		}
		n -= left;
		s->out_bytes -= left;
		e->n_written = e->n_total;
		list_unlink(&e->link);
		if (e->release)
			e->release(e);
	}
}

int socket_dispatch_write(struct socket *s)
{
	union {
		struct cmsghdr align;
		uint8_t buf[CMSG_SPACE(sizeof(int) * SOCKET_FDS_MAX)];
	} control;
	struct iovec iov[IOV_MAX];
	unsigned int rounds;

	/* Bounded, so one connection with a deep queue cannot starve others. */
	for (rounds = 0; rounds < 16 && !list_is_empty(&s->out_queue); rounds++) {
		const int *fds;
		size_t n_iov, n_fds, want = 0, i;
		struct msghdr msg;
		ssize_t n;

		n_iov = socket_gather(s, iov, IOV_MAX, &fds, &n_fds);
		for (i = 0; i < n_iov; i++)
			want += iov[i].iov_len;

		memset(&msg, 0, sizeof(msg));
		msg.msg_iov = iov;
		msg.msg_iovlen = n_iov;
		if (n_fds > 0) {
			struct cmsghdr *cmsg;

			memset(&control, 0, sizeof(control));
			msg.msg_control = &control;
			msg.msg_controllen = CMSG_SPACE(sizeof(int) * n_fds);
			cmsg = CMSG_FIRSTHDR(&msg);
			cmsg->cmsg_level = SOL_SOCKET;
			cmsg->cmsg_type = SCM_RIGHTS;
			cmsg->cmsg_len = CMSG_LEN(sizeof(int) * n_fds);
			memcpy(CMSG_DATA(cmsg), fds, sizeof(int) * n_fds);
		}

		/*
		 * One buffer without fds (a small message alone in the queue,
		 * the common case): send() spares the kernel copying in and
		 * checking a msghdr and an iovec array.
		 */
		if (n_iov == 1 && n_fds == 0)
			n = send(s->fd, iov[0].iov_base, iov[0].iov_len, MSG_DONTWAIT | MSG_NOSIGNAL);
		else
			n = sendmsg(s->fd, &msg, MSG_DONTWAIT | MSG_NOSIGNAL);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN)
				return 0;
			if (errno == EPIPE || errno == ECONNRESET)
				return SOCKET_E_EOF;
			return error_origin(-errno);
		}

		socket_advance(s, (size_t)n);
		if ((size_t)n < want)
			return 0; /* the kernel buffer is full */
	}
	return 0;
}

bool socket_wants_write(const struct socket *s)
{
	return !list_is_empty(&s->out_queue);
}

size_t socket_get_queued_bytes(const struct socket *s)
{
	return s->out_bytes;
}

size_t socket_get_queued_fds(const struct socket *s)
{
	return s->out_fds;
}

/* ---- handover across a re-exec ---------------------------------------- */

static void *memdup(const void *p, size_t n)
{
	void *q = malloc(n);

	if (q)
		memcpy(q, p, n);
	return q;
}

/*
 * Copy what is left of @e (the bytes after the first e->n_written) into @out,
 * with its fds when none of it went out yet.
 */
static int snapshot_entry(const struct socket_entry *e, struct socket_snapshot_entry *out)
{
	size_t skip = e->n_written, n = 0, i;
	uint8_t *p;

	p = malloc(e->n_total - e->n_written);
	if (!p)
		return -ENOMEM;
	for (i = 0; i < e->n_iov; i++) {
		const struct iovec *v = &e->iov[i];

		if (skip >= v->iov_len) {
			skip -= v->iov_len;
			continue;
		}
		memcpy(p + n, (const uint8_t *)v->iov_base + skip, v->iov_len - skip);
		n += v->iov_len - skip;
		skip = 0;
	}
	out->data = p;
	out->n_data = n;

	if (e->n_written == 0 && e->n_fds > 0) {
		out->fds = memdup(e->fds, e->n_fds * sizeof(int));
		if (!out->fds)
			return -ENOMEM; /* out->data is freed with the snapshot */
		out->n_fds = e->n_fds;
	}
	return 0;
}

/*
 * Stream offsets become offsets into the copied input: a batch that began
 * before the first buffered byte (its read also carried bytes already taken)
 * starts at 0, which claims the same frame (socket_claim_fds() compares its
 * start only with frame starts, and none is before that byte).
 */
int socket_snapshot(const struct socket *s, struct socket_snapshot *snap)
{
	const struct socket_entry *e;
	size_t n_in = s->in_end - s->in_start, n_out = 0, i;
	int r;

	*snap = (struct socket_snapshot){
		.framing = s->framing,
		.eof = s->eof,
		.violation = s->violation,
	};

	if (n_in > 0) {
		/* In the scratch buffer or its own: s->in is its bytes. */
		snap->in = memdup(s->in + s->in_start, n_in);
		if (!snap->in)
			goto fail;
		snap->n_in = n_in;
	}

	if (s->n_batches > 0) {
		snap->in_fds = calloc(s->n_batches, sizeof(*snap->in_fds));
		if (!snap->in_fds)
			goto fail;
	}
	for (i = 0; i < s->n_batches; i++) {
		const struct fd_batch *b = s->batches[i];
		struct socket_snapshot_fds *f = &snap->in_fds[i];

		/* Every batch ends behind in_offset, see socket_consume_raw(). */
		f->start = b->start > s->in_offset ? (size_t)(b->start - s->in_offset) : 0;
		f->end = (size_t)(b->end - s->in_offset);
		f->fds = memdup(b->fds, b->n_fds * sizeof(int));
		if (!f->fds)
			goto fail;
		f->n_fds = b->n_fds;
		snap->n_in_fds++;
	}

	list_for_each_entry(e, &s->out_queue, link)
		n_out++;
	if (n_out > 0) {
		snap->out = calloc(n_out, sizeof(*snap->out));
		if (!snap->out)
			goto fail;
	}
	list_for_each_entry(e, &s->out_queue, link) {
		r = snapshot_entry(e, &snap->out[snap->n_out++]);
		if (r < 0)
			goto fail;
	}
	return 0;

fail:
	socket_snapshot_deinit(snap);
	return -ENOMEM;
}

void socket_snapshot_deinit(struct socket_snapshot *snap)
{
	size_t i;

	free(snap->in);
	for (i = 0; i < snap->n_in_fds; i++)
		free(snap->in_fds[i].fds);
	free(snap->in_fds);
	for (i = 0; i < snap->n_out; i++) {
		free(snap->out[i].data);
		free(snap->out[i].fds);
	}
	free(snap->out);
	*snap = (struct socket_snapshot){};
}

static bool fds_valid(const int *fds, size_t n)
{
	size_t i;

	if (n > 0 && !fds)
		return false;
	for (i = 0; i < n; i++)
		if (fds[i] < 0)
			return false;
	return true;
}

/* Whether a socket can be in the state @snap describes (see socket.h). */
static bool snapshot_valid(const struct socket_snapshot *snap)
{
	size_t i, end = 0;

	if (snap->n_in > 0 && !snap->in)
		return false;
	if (snap->n_in_fds > SOCKET_BATCHES_MAX || (snap->n_in_fds > 0 && !snap->in_fds))
		return false;
	for (i = 0; i < snap->n_in_fds; i++) {
		const struct socket_snapshot_fds *f = &snap->in_fds[i];

		/* Batches are disjoint reads in stream order, within the input. */
		if (f->start < end || f->start >= f->end || f->end > snap->n_in)
			return false;
		if (f->n_fds == 0 || f->n_fds > SOCKET_FDS_MAX || !fds_valid(f->fds, f->n_fds))
			return false;
		end = f->end;
	}
	if (snap->n_out > 0 && !snap->out)
		return false;
	for (i = 0; i < snap->n_out; i++) {
		const struct socket_snapshot_entry *o = &snap->out[i];

		if (o->n_data > 0 && !o->data)
			return false;
		/* fds need at least one byte to travel with. */
		if (o->n_fds > 0 && o->n_data == 0)
			return false;
		if (o->n_fds > SOCKET_FDS_MAX || !fds_valid(o->fds, o->n_fds))
			return false;
	}
	return true;
}

/*
 * Close the fds of @snap that the restored socket did not take over: those of
 * the batches from @batch on and of the entries from @entry on.
 */
static void snapshot_close_fds(const struct socket_snapshot *snap, size_t batch, size_t entry)
{
	size_t i;

	for (i = batch; snap->in_fds && i < snap->n_in_fds; i++)
		if (snap->in_fds[i].fds)
			close_many(snap->in_fds[i].fds, snap->in_fds[i].n_fds);
	for (i = entry; snap->out && i < snap->n_out; i++)
		if (snap->out[i].fds)
			close_many(snap->out[i].fds, snap->out[i].n_fds);
}

/*
 * Give @s the input of @snap in a buffer of its own, sized as
 * socket_use_scratch() sizes a remainder it moves out: the rest of the front
 * frame, and for a small one room to read on; a large frame's buffer ends with
 * the frame, so socket_read_frame() hands it out without a copy.
 */
static int socket_restore_input(struct socket *s, const struct socket_snapshot *snap)
{
	size_t size = 0, alloc;

	if (snap->n_in == 0)
		return 0;
	/* A broken header is reported when the socket is read. */
	if (!snap->framing || snap->n_in < SOCKET_FRAME_HEADER ||
	    socket_frame_size(snap->in, &size))
		size = 0;
	alloc = MAX(remainder_alloc(size, snap->n_in), snap->n_in);
	s->in = malloc(alloc);
	if (!s->in)
		return -ENOMEM;
	memcpy(s->in, snap->in, snap->n_in);
	s->in_alloc = alloc;
	s->in_start = 0;
	s->in_end = snap->n_in;
	s->in_offset = 0;
	return 0;
}

/*
 * The restored stream starts at offset 0 with the first buffered byte, so the
 * fd batches keep the snapshot's offsets; the output entries become copy
 * entries that own their fds. On failure every fd of @snap is closed: those
 * already handed to the socket by socket_free(), the others here.
 */
int socket_new_restored(struct socket **socketp, int fd, const struct socket_snapshot *snap)
{
	struct socket *s;
	size_t batch = 0, entry = 0;
	int r;

	if (!snapshot_valid(snap)) {
		safe_close(fd);
		snapshot_close_fds(snap, 0, 0);
		return -EINVAL;
	}

	/*
	 * No credentials: the owner carried those the connection came with.
	 * Reading them again cost a re-exec six syscalls and a pidfd per
	 * connection, only to be thrown away.
	 */
	r = socket_new_with(&s, fd, false);
	if (r < 0) {
		snapshot_close_fds(snap, 0, 0);
		return r;
	}
	s->framing = snap->framing;
	s->eof = snap->eof;
	s->violation = snap->violation;

	r = socket_restore_input(s, snap);
	if (r < 0)
		goto fail;

	for (batch = 0; batch < snap->n_in_fds; batch++) {
		const struct socket_snapshot_fds *f = &snap->in_fds[batch];

		r = socket_add_batch(s, f->start, f->end, f->fds, f->n_fds);
		if (r < 0)
			goto fail;
	}

	for (entry = 0; entry < snap->n_out; entry++) {
		const struct socket_snapshot_entry *o = &snap->out[entry];

		r = socket_queue_copy_fds(s, o->data, o->n_data, o->fds, o->n_fds);
		if (r != 0)
			goto fail;
	}

	*socketp = s;
	return 0;

fail:
	snapshot_close_fds(snap, batch, entry);
	socket_free(s);
	return r > 0 ? -EINVAL : r;
}
