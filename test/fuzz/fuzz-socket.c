/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * libFuzzer target: the input side of dbus-compat/socket.c, through a real
 * socketpair.
 *
 * The input is a script. Byte 0 says how many bytes the authentication phase
 * consumes raw (socket_peek_raw()/socket_consume_raw()) before
 * socket_start_framing(). Then records, each starting with a control byte c:
 *
 *	c % 4 == 0: write the next (next byte + 1) input bytes
 *	c % 4 == 1: the same with 1..3 fds attached (SCM_RIGHTS)
 *	c % 4 == 2: write ((c >> 2) + 1) * 2 KiB of the next byte (large frames)
 *	c % 4 == 3: read and take frames now; bit 2 selects socket_read_frame()
 *		   or socket_peek_frame() + socket_take_frame() for this pump
 *
 * so the stream arrives split at arbitrary points, in arbitrary recvmsg()
 * sizes. At the end the writer shuts down and everything is read.
 *
 * Checks: every frame handed out is exactly the next message of the byte
 * stream, sized by the fixed header as a plain reading of the spec says;
 * without fds, the socket reports a protocol error exactly when the next
 * header is invalid, and nothing is left unread when it does not; fds are
 * never leaked (the process's fd count is back to where it was).
 */

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "dbus-compat/socket.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Total bytes one input may write: keeps an execution short. */
#define STREAM_MAX (1U * 1024U * 1024U)

struct run {
	struct socket *sock;
	int writer;
	uint8_t *stream;	/* everything written, in order */
	size_t n_stream;
	size_t n_raw;		/* bytes the raw phase consumes */
	size_t raw_done;
	size_t pos;		/* stream offset of the next expected frame */
	bool framing;
	bool sent_fds;
	bool eof;
	bool violation;
	bool use_take;
	size_t frames;
};

static size_t count_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	size_t n = 0;

	if (!d)
		abort();
	while ((e = readdir(d)))
		n++;
	closedir(d);
	return n;
}

static uint32_t u32(const uint8_t *p, bool big)
{
	if (big)
		return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
	return (uint32_t)p[3] << 24 | (uint32_t)p[2] << 16 | (uint32_t)p[1] << 8 | p[0];
}

/*
 * The spec's reading of a fixed header: 'l' or 'B', major version 1, header
 * fields (an array: at most 64 MiB) padded to 8, then the body; a message is
 * at most 128 MiB. Returns 0 for an invalid header, else the message size.
 */
static uint64_t ref_size(const uint8_t *h)
{
	bool big;
	uint64_t fields, total;

	if (h[0] != 'l' && h[0] != 'B')
		return 0;
	big = h[0] == 'B';
	if (h[3] != 1)
		return 0;
	fields = u32(h + 12, big);
	if (fields > 64ULL * 1024 * 1024)
		return 0;
	total = 16 + ((fields + 7) & ~7ULL) + u32(h + 4, big);
	return total > 128ULL * 1024 * 1024 ? 0 : total;
}

static void check_frame(struct run *rn, const uint8_t *p, size_t n, int *fds, size_t n_fds)
{
	uint64_t want;

	if (rn->n_stream - rn->pos < 16)
		abort();	/* a frame without a complete header */
	want = ref_size(rn->stream + rn->pos);
	if (want == 0 || want != n || rn->n_stream - rn->pos < n)
		abort();
	if (memcmp(p, rn->stream + rn->pos, n))
		abort();
	if (n_fds && !rn->sent_fds)
		abort();
	for (size_t i = 0; i < n_fds; i++) {
		if (fds[i] < 0 || fcntl(fds[i], F_GETFD) != FD_CLOEXEC)
			abort();	/* every received fd is ours and close-on-exec */
		close(fds[i]);
	}
	rn->pos += n;
	rn->frames++;
}

/* Take out whatever is complete; returns whether anything was taken. */
static bool drain(struct run *rn)
{
	bool progress = false;

	if (!rn->framing) {
		size_t n;

		socket_peek_raw(rn->sock, &n);
		n = n < rn->n_raw - rn->raw_done ? n : rn->n_raw - rn->raw_done;
		if (n) {
			socket_consume_raw(rn->sock, n);
			rn->raw_done += n;
			progress = true;
		}
		if (rn->raw_done < rn->n_raw)
			return progress;
		socket_start_framing(rn->sock);
		rn->framing = true;
		rn->pos = rn->n_raw;
	}

	for (;;) {
		int r;

		if (rn->use_take) {
			uint8_t *buf;
			int *fds = NULL;
			size_t size = 0, n_fds = 0;

			r = socket_peek_frame(rn->sock, &size);
			if (r == 0) {
				buf = malloc(size);
				if (!buf)
					abort();
				r = socket_take_frame(rn->sock, buf, &fds, &n_fds);
				if (r == 0)
					check_frame(rn, buf, size, fds, n_fds);
				free(buf);
				free(fds);
			}
		} else {
			struct socket_frame f = {};

			r = socket_read_frame(rn->sock, &f);
			if (r == 0) {
				check_frame(rn, f.data, f.n_data, f.fds, f.n_fds);
				f.n_fds = 0;
				socket_frame_deinit(&f);
			}
		}
		if (r == SOCKET_E_AGAIN)
			return progress;
		if (r == SOCKET_E_PROTOCOL) {
			rn->violation = true;
			return progress;
		}
		if (r != 0)
			abort();	/* ENOMEM aside, nothing else is documented */
		progress = true;
	}
}

/* Read until the kernel has nothing more for us (or the stream is dead). */
static void pump(struct run *rn)
{
	for (int idle = 0; idle < 3 && !rn->violation && !rn->eof;) {
		int pending = 0, r;
		bool progress;

		r = socket_dispatch_read(rn->sock);
		if (r == SOCKET_E_EOF)
			rn->eof = true;
		else if (r == SOCKET_E_PROTOCOL)
			rn->violation = true;
		else if (r != 0)
			abort();
		progress = drain(rn);
		if (ioctl(socket_get_fd(rn->sock), FIONREAD, &pending) < 0)
			abort();
		if (pending == 0 && !rn->eof)
			break;
		idle = progress ? 0 : idle + 1;
	}
	if (rn->eof && !rn->violation)
		drain(rn);
}

static void send_bytes(struct run *rn, const uint8_t *p, size_t n, unsigned int n_fds)
{
	union {
		struct cmsghdr align;
		uint8_t buf[CMSG_SPACE(3 * sizeof(int))];
	} control;

	if (n == 0 || rn->n_stream + n > STREAM_MAX)
		return;
	memcpy(rn->stream + rn->n_stream, p, n);
	rn->n_stream += n;

	while (n > 0) {
		struct iovec iov = { (void *)p, n };
		struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1 };
		int fds[3];
		ssize_t w;

		if (n_fds) {
			struct cmsghdr *c;

			for (unsigned int i = 0; i < n_fds; i++)
				fds[i] = open("/dev/null", O_RDONLY | O_CLOEXEC);
			msg.msg_control = &control;
			msg.msg_controllen = CMSG_SPACE(n_fds * sizeof(int));
			c = CMSG_FIRSTHDR(&msg);
			c->cmsg_level = SOL_SOCKET;
			c->cmsg_type = SCM_RIGHTS;
			c->cmsg_len = CMSG_LEN(n_fds * sizeof(int));
			memcpy(CMSG_DATA(c), fds, n_fds * sizeof(int));
		}
		w = sendmsg(rn->writer, &msg, MSG_DONTWAIT | MSG_NOSIGNAL);
		for (unsigned int i = 0; i < n_fds; i++)
			close(fds[i]);
		if (w > 0) {
			if (n_fds)
				rn->sent_fds = true;
			n_fds = 0;
			p += w;
			n -= (size_t)w;
			continue;
		}
		if (w < 0 && errno != EAGAIN)
			break;	/* the reader is gone (protocol error) */
		/* kernel buffer full: make room */
		pump(rn);
		if (rn->violation || rn->eof) {
			rn->n_stream -= n;	/* never arrived */
			break;
		}
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static uint8_t *stream;
	struct run rn = {};
	size_t i = 1, fds_before;
	int sv[2];

	if (size < 1)
		return 0;
	if (!stream && !(stream = malloc(STREAM_MAX)))
		abort();
	fds_before = count_fds();

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
		abort();
	if (socket_new(&rn.sock, sv[0]) < 0)
		abort();
	rn.writer = sv[1];
	rn.stream = stream;
	rn.n_raw = data[0] % 64;

	while (i < size && !rn.violation) {
		unsigned int c = data[i++];
		size_t n;

		switch (c % 4) {
		case 0:
		case 1:
			n = i < size ? (size_t)data[i++] + 1 : 0;
			n = n < size - i ? n : size - i;
			send_bytes(&rn, data + i, n, c % 4 == 1 ? 1 + (c >> 2) % 3 : 0);
			i += n;
			break;
		case 2: {
			size_t fill = ((size_t)(c >> 2) + 1) * 2048;
			uint8_t *tmp;

			if (i >= size)
				break;
			tmp = malloc(fill);
			if (!tmp)
				abort();
			memset(tmp, data[i++], fill);
			send_bytes(&rn, tmp, fill, 0);
			free(tmp);
			break;
		}
		default:
			rn.use_take = (c >> 2) & 1;
			pump(&rn);
			break;
		}
	}

	shutdown(rn.writer, SHUT_WR);
	while (!rn.eof && !rn.violation)
		pump(&rn);

	if (rn.framing && !rn.sent_fds) {
		size_t left = rn.n_stream - rn.pos;
		uint64_t next = left >= 16 ? ref_size(rn.stream + rn.pos) : 1;

		/* exactly the invalid headers are refused ... */
		if (rn.violation != (next == 0))
			abort();
		/* ... and nothing complete is left behind */
		if (!rn.violation && next <= left && left >= 16)
			abort();
	}
	if (!rn.framing && !rn.violation && rn.raw_done != rn.n_stream && rn.raw_done < rn.n_raw)
		abort();	/* the raw phase saw everything that was written */

	if (getenv("FUZZ_SOCKET_DEBUG"))
		fprintf(stderr, "stream %zu raw %zu/%zu frames %zu pos %zu eof %d violation %d fds %d "
			"open fds %zu (before %zu)\n", rn.n_stream, rn.raw_done, rn.n_raw, rn.frames,
			rn.pos, rn.eof, rn.violation, rn.sent_fds, count_fds(), fds_before);
	socket_free(rn.sock);
	close(rn.writer);
	if (count_fds() != fds_before)
		abort();	/* a received fd was neither handed out nor closed */
	return 0;
}
