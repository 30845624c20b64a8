/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include "dbus-compat/sasl-client.h"
#include "util/error.h"
#include "util/io.h"

/* Longest reply line we accept ("OK " and a 32-digit guid, or an ERROR text). */
#define REPLY_MAX 512U

/* "\0AUTH EXTERNAL <hex of the decimal uid>\r\n" into @buf; returns its length. */
static size_t format_auth(char *buf, uid_t uid)
{
	char dec[24];
	size_t n = 0;

	snprintf(dec, sizeof(dec), "%lu", (unsigned long)uid);
	buf[n++] = '\0';
	memcpy(buf + n, "AUTH EXTERNAL ", 14);
	n += 14;
	for (size_t i = 0; dec[i]; i++) {
		static const char digits[] = "0123456789abcdef";

		buf[n++] = digits[(unsigned char)dec[i] >> 4];
		buf[n++] = digits[(unsigned char)dec[i] & 0xf];
	}
	buf[n++] = '\r';
	buf[n++] = '\n';
	return n;
}

size_t sasl_client_pipelined(char *buf, uid_t uid, bool negotiate_fds)
{
	size_t n = format_auth(buf, uid);

	if (negotiate_fds) {
		memcpy(buf + n, "NEGOTIATE_UNIX_FD\r\n", 19);
		n += 19;
	}
	memcpy(buf + n, "BEGIN\r\n", 7);
	return n + 7;
}

/*
 * One reply line, without its "\r\n", NUL-terminated in @line (REPLY_MAX
 * bytes). Peeks at what has arrived and takes exactly up to the first "\n",
 * so nothing after the line is consumed.
 */
static int read_reply(int fd, char *line)
{
	size_t n = 0;

	for (;;) {
		char *nl;
		ssize_t k;
		size_t take;

		do
			k = recv(fd, line + n, REPLY_MAX - n, MSG_PEEK);
		while (k < 0 && errno == EINTR);
		if (k < 0)
			return error_origin(-errno);
		if (k == 0)
			return -ECONNRESET;
		nl = memchr(line + n, '\n', (size_t)k);
		take = nl ? (size_t)(nl - (line + n)) + 1 : (size_t)k;
		/* Take the peeked bytes for real: they are still the first ones. */
		do
			k = recv(fd, line + n, take, 0);
		while (k < 0 && errno == EINTR);
		if (k < 0)
			return error_origin(-errno);
		if ((size_t)k != take)
			return -EIO;
		n += take;
		if (nl)
			break;
		if (n == REPLY_MAX)
			return -EPROTO;
	}
	if (n < 2 || line[n - 2] != '\r')
		return -EPROTO;
	line[n - 2] = '\0';
	return 0;
}

static bool is_command(const char *line, const char *cmd)
{
	size_t n = strlen(cmd);

	return !strncmp(line, cmd, n) && (line[n] == '\0' || line[n] == ' ');
}

int sasl_client_authenticate(int fd, uid_t uid, bool negotiate_fds, bool *fds_agreed)
{
	char line[REPLY_MAX];
	size_t n;
	int r;

	if (fds_agreed)
		*fds_agreed = false;
	n = format_auth(line, uid);
	r = io_send_all(fd, line, n);
	if (r == 0)
		r = read_reply(fd, line);
	if (r < 0)
		return r;
	if (is_command(line, "REJECTED") || is_command(line, "ERROR"))
		return SASL_CLIENT_E_REJECTED;
	if (strncmp(line, "OK ", 3))
		return -EPROTO;

	if (negotiate_fds) {
		r = io_send_all(fd, "NEGOTIATE_UNIX_FD\r\n", 19);
		if (r == 0)
			r = read_reply(fd, line);
		if (r < 0)
			return r;
		if (!strcmp(line, "AGREE_UNIX_FD")) {
			if (fds_agreed)
				*fds_agreed = true;
		} else if (!is_command(line, "ERROR")) {
			return -EPROTO;
		}
	}
	return io_send_all(fd, "BEGIN\r\n", 7);
}
