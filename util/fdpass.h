/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/**
 * DOC: Passing fds with their numbers
 *
 * A set of fds travels through a stream socket that nobody reads until the
 * next process takes it: each message carries up to FDPASS_BATCH fds as
 * SCM_RIGHTS and, as its data, the number each had in the sender (int32,
 * native byte order). The socket keeps the files alive meanwhile; the fd
 * store holds the socket (broker/upgrade/fdstore.h, the crash journal).
 */

#include <stddef.h>
#include <stdint.h>

/* SCM_MAX_FD: the most fds one message carries. */
#define FDPASS_BATCH 253

struct msghdr;

/*
 * Point @mh's control at @control (CMSG_SPACE(sizeof(int) * @n) bytes, the
 * caller's, aligned as a struct cmsghdr) filled with SCM_RIGHTS of @n fds;
 * none at all for 0. For any message that passes fds (@n at most FDPASS_BATCH).
 */
void fdpass_set_rights(struct msghdr *mh, void *control, const int *fds, size_t n);

/* Send @fds (their numbers as data) into @sock. 0 or negative errno. */
int fdpass_send(int sock, const int *fds, size_t n);

/*
 * Read @sock to its end (or to EAGAIN): numbers and fds, in pairs,
 * appended to *@numbersp / *@fdsp (*@np of each). Received fds are
 * close-on-exec. Return 0 or negative errno (-EBADMSG: a torn message or
 * lost fds; what was read is still in the arrays).
 */
int fdpass_receive(int sock, int32_t **numbersp, int **fdsp, size_t *np);
