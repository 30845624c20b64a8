/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/**
 * DOC: SASL client (D-Bus authentication, client side)
 *
 * The one client side of the D-Bus authentication protocol used by our own
 * programs (libbus1-client, the tests): the EXTERNAL mechanism with the
 * caller's uid as authorization identity (its ASCII decimal, hex-encoded),
 * optionally NEGOTIATE_UNIX_FD, then BEGIN. The server side is sasl.h.
 *
 * sasl_client_authenticate() is blocking and waits for each reply before it
 * sends the next line:
 *
 *   C: "\0AUTH EXTERNAL <hex uid>\r\n"     S: "OK <guid>\r\n"
 *   C: "NEGOTIATE_UNIX_FD\r\n"             S: "AGREE_UNIX_FD\r\n" or "ERROR ...\r\n"
 *   C: "BEGIN\r\n"
 *
 * It reads exactly the server's reply lines and not one byte more, so a
 * message the server sends right after the last line stays on the socket for
 * the caller's D-Bus framing.
 *
 * sasl_client_pipelined() formats the same conversation as one request, for a
 * client that sends everything at once (as sd-bus does) and reads the replies
 * itself: "OK <guid>" and, if asked for, "AGREE_UNIX_FD" (or "ERROR ...").
 */

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/* Conditions of sasl_client_authenticate(). */
enum {
	_SASL_CLIENT_E_SUCCESS,
	/* The server refused AUTH EXTERNAL (REJECTED or ERROR). */
	SASL_CLIENT_E_REJECTED,
};

/* Room for sasl_client_pipelined() with any uid. */
#define SASL_CLIENT_PIPELINED_MAX 96U

/*
 * Authenticate on the connected stream socket @fd as @uid. With
 * @negotiate_fds, ask for fd passing; *@fds_agreed (may be NULL) tells whether
 * the server agreed (a refusal is not an error: the connection goes on
 * without fds). Returns 0 once BEGIN is sent (the D-Bus message stream
 * starts), SASL_CLIENT_E_REJECTED if the server refused the mechanism (nothing
 * more is sent; the caller closes @fd), or a negative errno: -ECONNRESET
 * (EOF), -EPROTO (an unexpected or overlong reply line), or the error of a
 * failed send()/recv().
 */
int sasl_client_authenticate(int fd, uid_t uid, bool negotiate_fds, bool *fds_agreed);

/*
 * Write to @buf (at least SASL_CLIENT_PIPELINED_MAX bytes) the whole client
 * side of the conversation above: "\0AUTH EXTERNAL <hex uid>\r\n", then
 * "NEGOTIATE_UNIX_FD\r\n" if @negotiate_fds, then "BEGIN\r\n". Returns its
 * length, the leading NUL byte included (no terminating NUL is counted).
 */
size_t sasl_client_pipelined(char *buf, uid_t uid, bool negotiate_fds);
