/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Passing fds with their numbers through a stream socket: see fdpass.h.
 */

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include "util/error.h"
#include "util/fdpass.h"
#include "util/macro.h"

void fdpass_set_rights(struct msghdr *mh, void *control, const int *fds, size_t n)
{
	struct cmsghdr *c;

	if (!n) {
		mh->msg_control = NULL;
		mh->msg_controllen = 0;
		return;
	}
	memset(control, 0, CMSG_SPACE(sizeof(int) * n));
	mh->msg_control = control;
	mh->msg_controllen = CMSG_SPACE(sizeof(int) * n);
	c = CMSG_FIRSTHDR(mh);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int) * n);
	memcpy(CMSG_DATA(c), fds, sizeof(int) * n);
}

/* One message: the numbers of @n fds as data, the fds themselves as SCM_RIGHTS. */
static int send_batch(int sock, const int *fds, size_t n)
{
	union {
		struct cmsghdr hdr;
		char buf[CMSG_SPACE(sizeof(int) * FDPASS_BATCH)];
	} control;
	int32_t numbers[FDPASS_BATCH];
	struct iovec iov = { .iov_base = numbers, .iov_len = n * sizeof(int32_t) };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
	ssize_t k;

	for (size_t i = 0; i < n; i++)
		numbers[i] = fds[i];
	fdpass_set_rights(&mh, control.buf, fds, n);
	do {
		k = sendmsg(sock, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
	} while (k < 0 && errno == EINTR);
	if (k < 0)
		return error_origin(errno == EAGAIN ? -ENOBUFS : -errno);
	/* A stream socket takes a small message whole, or nothing. */
	return (size_t)k == iov.iov_len ? 0 : -EIO;
}

int fdpass_send(int sock, const int *fds, size_t n)
{
	int r = 0;

	for (size_t i = 0; i < n && r == 0; i += FDPASS_BATCH)
		r = send_batch(sock, fds + i, MIN(n - i, (size_t)FDPASS_BATCH));
	return r;
}

int fdpass_receive(int sock, int32_t **numbersp, int **fdsp, size_t *np)
{
	for (;;) {
		union {
			struct cmsghdr hdr;
			char buf[CMSG_SPACE(sizeof(int) * FDPASS_BATCH)];
		} control;
		int32_t numbers[FDPASS_BATCH];
		struct iovec iov = { .iov_base = numbers, .iov_len = sizeof(numbers) };
		struct msghdr mh = {
			.msg_iov = &iov,
			.msg_iovlen = 1,
			.msg_control = control.buf,
			.msg_controllen = sizeof(control.buf),
		};
		struct cmsghdr *cm;
		size_t n_numbers, n_fds = 0;
		const int *got = NULL;
		ssize_t k;

		do {
			k = recvmsg(sock, &mh, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
		} while (k < 0 && errno == EINTR);
		/* The end, or nothing more for now (a writer still holds it open). */
		if (k < 0)
			return errno == EAGAIN ? 0 : -errno;
		if (k == 0)
			return 0;
		for (cm = CMSG_FIRSTHDR(&mh); cm; cm = CMSG_NXTHDR(&mh, cm)) {
			if (cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS) {
				got = (const int *)CMSG_DATA(cm);
				n_fds = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
			}
		}
		n_numbers = (size_t)k / sizeof(int32_t);
		if (n_fds) {
			int32_t *nv = realloc(*numbersp, (*np + n_fds) * sizeof(*nv));
			int *fv = nv ? realloc(*fdsp, (*np + n_fds) * sizeof(*fv)) : NULL;

			if (nv)
				*numbersp = nv;
			if (fv)
				*fdsp = fv;
			if (!nv || !fv) {
				for (size_t i = 0; i < n_fds; i++)
					close(got[i]);
				return -ENOMEM;
			}
			for (size_t i = 0; i < n_fds; i++) {
				(*numbersp)[*np] = i < n_numbers ? numbers[i] : -1;
				(*fdsp)[(*np)++] = got[i];
			}
		}
		/* Each message is whole; a torn one or lost fds: unusable. */
		if ((size_t)k % sizeof(int32_t) || n_numbers != n_fds || (mh.msg_flags & MSG_CTRUNC))
			return -EBADMSG;
	}
}

