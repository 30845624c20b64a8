/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Unit tests of the blocking SASL client (dbus-compat/sasl-client.c): the
 * bytes it sends, the replies it accepts and refuses, that it never reads past
 * the last reply line (the D-Bus stream follows it on the same socket), and a
 * full conversation with our SASL server (sasl.c).
 */

#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
#include "dbus-compat/sasl.h"
#include "dbus-compat/sasl-client.h"
#include "check.h"

#define GUID "0123456789abcdef0123456789abcdef"
/* "1000" in hex. */
#define AUTH_1000 "\0AUTH EXTERNAL 31303030\r\n"

struct pair {
	int client, server;
};

static struct pair pair_new(void)
{
	int sv[2];

	CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0);
	return (struct pair){ .client = sv[0], .server = sv[1] };
}

static void pair_close(struct pair *p)
{
	close(p->client);
	close(p->server);
}

static void put(int fd, const char *s, size_t n)
{
	CHECK(write(fd, s, n) == (ssize_t)n);
}

/* Everything that is waiting on @fd (non-blocking), as a string of @n bytes. */
static size_t drain(int fd, char *buf, size_t size)
{
	ssize_t k = recv(fd, buf, size - 1, MSG_DONTWAIT);

	if (k < 0) {
		CHECK(errno == EAGAIN);
		k = 0;
	}
	buf[k] = '\0';
	return (size_t)k;
}

#define CHECK_BYTES(fd, lit)                                                       \
	do {                                                                       \
		char _buf[512];                                                    \
		size_t _n = drain((fd), _buf, sizeof(_buf));                       \
		CHECK(_n == sizeof(lit) - 1 && !memcmp(_buf, (lit), _n),           \
		      " got %zu bytes \"%s\"", _n, _buf[0] ? _buf : _buf + 1);     \
	} while (0)

/* The server's replies are all queued before the client starts. */
static void test_agreed_and_no_overread(void)
{
	struct pair p = pair_new();
	static const char replies[] = "OK " GUID "\r\nAGREE_UNIX_FD\r\nl\1\0\1STREAM";
	bool fds = false;

	put(p.server, replies, sizeof(replies) - 1);
	CHECK_EQ(sasl_client_authenticate(p.client, 1000, true, &fds), 0);
	CHECK(fds);
	CHECK_BYTES(p.server, AUTH_1000 "NEGOTIATE_UNIX_FD\r\nBEGIN\r\n");
	/* The bytes after the last line are the caller's. */
	CHECK_BYTES(p.client, "l\1\0\1STREAM");
	pair_close(&p);
}

static void test_without_fds(void)
{
	struct pair p = pair_new();
	static const char replies[] = "OK " GUID "\r\nSTREAM";

	put(p.server, replies, sizeof(replies) - 1);
	CHECK_EQ(sasl_client_authenticate(p.client, 1000, false, NULL), 0);
	CHECK_BYTES(p.server, AUTH_1000 "BEGIN\r\n");
	CHECK_BYTES(p.client, "STREAM");
	pair_close(&p);
}

/* A refused NEGOTIATE_UNIX_FD is not an error: BEGIN follows. */
static void test_fds_refused(void)
{
	struct pair p = pair_new();
	static const char replies[] = "OK " GUID "\r\nERROR \"no fds here\"\r\n";
	bool fds = true;

	put(p.server, replies, sizeof(replies) - 1);
	CHECK_EQ(sasl_client_authenticate(p.client, 0, true, &fds), 0);
	CHECK(!fds);
	CHECK_BYTES(p.server, "\0AUTH EXTERNAL 30\r\nNEGOTIATE_UNIX_FD\r\nBEGIN\r\n");
	pair_close(&p);
}

static void test_rejected(void)
{
	static const char *const replies[] = { "REJECTED EXTERNAL ANONYMOUS\r\n",
					       "REJECTED\r\n", "ERROR\r\n",
					       "ERROR \"bad\"\r\n" };

	for (size_t i = 0; i < sizeof(replies) / sizeof(replies[0]); i++) {
		struct pair p = pair_new();
		bool fds = true;

		put(p.server, replies[i], strlen(replies[i]));
		CHECK_EQ(sasl_client_authenticate(p.client, 1000, true, &fds),
			 SASL_CLIENT_E_REJECTED);
		CHECK(!fds);
		/* Nothing after the AUTH line. */
		CHECK_BYTES(p.server, AUTH_1000);
		pair_close(&p);
	}
}

static void test_bad_replies(void)
{
	static const struct {
		const char *reply;
		bool fds;
		int r;
	} cases[] = {
		{ "DATA\r\n", false, -EPROTO },
		{ "OKAY\r\n", false, -EPROTO },
		{ "OK " GUID "\n", false, -EPROTO },
		{ "\r\n", false, -EPROTO },
		{ "OK " GUID "\r\nOK " GUID "\r\n", true, -EPROTO },
		{ "OK " GUID "\r\nAGREE_UNIX_FDS\r\n", true, -EPROTO },
		{ "", false, -ECONNRESET },
		{ "OK " GUID, false, -ECONNRESET },
		{ "OK " GUID "\r\n", true, -ECONNRESET },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct pair p = pair_new();

		put(p.server, cases[i].reply, strlen(cases[i].reply));
		CHECK(shutdown(p.server, SHUT_WR) == 0);
		CHECK_EQ(sasl_client_authenticate(p.client, 1000, cases[i].fds, NULL), cases[i].r);
		pair_close(&p);
	}
}

static void test_overlong_line(void)
{
	struct pair p = pair_new();
	char big[2048];

	memset(big, 'x', sizeof(big));
	put(p.server, big, sizeof(big));
	CHECK_EQ(sasl_client_authenticate(p.client, 1000, false, NULL), -EPROTO);
	pair_close(&p);

	/* Send fails: the peer is gone. */
	p = pair_new();
	close(p.server);
	p.server = -1;
	CHECK_EQ(sasl_client_authenticate(p.client, 1000, false, NULL), -EPIPE);
	close(p.client);
}

/* Replies that arrive in small pieces, from another process. */
static void test_fragmented(void)
{
	static const char *const pieces[] = { "O", "K ", GUID, "\r", "\nAGR", "EE_UNIX_FD\r",
					      "\nSTR", "EAM" };
	struct pair p = pair_new();
	bool fds = false;
	pid_t pid = fork();
	int status;

	CHECK(pid >= 0);
	if (pid == 0) {
		for (size_t i = 0; i < sizeof(pieces) / sizeof(pieces[0]); i++) {
			usleep(5000);
			put(p.server, pieces[i], strlen(pieces[i]));
		}
		_exit(0);
	}
	CHECK_EQ(sasl_client_authenticate(p.client, 1000, true, &fds), 0);
	CHECK(fds);
	CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && !WEXITSTATUS(status));
	CHECK_BYTES(p.client, "STREAM");
	pair_close(&p);
}

/* The pipelined request is exactly what the server takes up to BEGIN. */
static void test_pipelined(void)
{
	static const uid_t uids[] = { 0, 7, 1000, 65534, 4294967294U };

	for (size_t i = 0; i < sizeof(uids) / sizeof(uids[0]); i++) {
		for (int fds = 0; fds < 2; fds++) {
			char req[SASL_CLIENT_PIPELINED_MAX + 8];
			struct sasl_server s;
			size_t n, consumed = 0;

			n = sasl_client_pipelined(req, uids[i], fds);
			CHECK(n <= SASL_CLIENT_PIPELINED_MAX);
			CHECK(req[0] == '\0');
			memcpy(req + n, "l\1", 2);	/* the first message follows */
			CHECK(sasl_server_init(&s, uids[i], GUID,
					       fds ? SASL_SERVER_UNIX_FD : 0) == 0);
			CHECK_EQ(sasl_server_feed(&s, req, n + 2, &consumed), SASL_SERVER_DONE);
			CHECK_EQ(consumed, n);
			CHECK(sasl_server_is_authenticated(&s));
			CHECK_EQ(sasl_server_get_uid(&s), uids[i]);
			CHECK_EQ(sasl_server_unix_fd_agreed(&s), fds);
			sasl_server_deinit(&s);
		}
	}
	{
		char req[SASL_CLIENT_PIPELINED_MAX];
		size_t n = sasl_client_pipelined(req, 1000, true);
		static const char want[] = AUTH_1000 "NEGOTIATE_UNIX_FD\r\nBEGIN\r\n";

		CHECK(n == sizeof(want) - 1 && !memcmp(req, want, n));
	}
}

/* Our SASL server in a child process, then a first "message" from it. */
static void run_server(int fd, unsigned int flags, uid_t uid)
{
	struct sasl_server s;
	char buf[256];
	int r = 0;

	CHECK(sasl_server_init(&s, uid, GUID, flags) == 0);
	while (r == 0) {
		ssize_t k = read(fd, buf, sizeof(buf));
		size_t consumed = 0, n;
		const char *out;

		if (k == 0)
			_exit(4);	/* the client gave up */
		CHECK(k > 0);
		r = sasl_server_feed(&s, buf, (size_t)k, &consumed);
		out = sasl_server_peek_output(&s, &n);
		if (n) {
			put(fd, out, n);
			sasl_server_consume_output(&s, n);
		}
		/* The client waits for each reply: nothing follows its BEGIN. */
		CHECK(r != SASL_SERVER_DONE || consumed == (size_t)k);
	}
	if (r == SASL_SERVER_DONE)
		put(fd, "HELLO", 5);
	sasl_server_deinit(&s);
	_exit(r == SASL_SERVER_DONE ? 0 : 3);
}

static void test_with_server(unsigned int flags, uid_t server_uid, int want_r, bool want_fds,
			     int want_status)
{
	struct pair p = pair_new();
	bool fds = !want_fds;
	pid_t pid = fork();
	int status;

	CHECK(pid >= 0);
	if (pid == 0) {
		close(p.client);
		run_server(p.server, flags, server_uid);
	}
	close(p.server);
	p.server = -1;
	CHECK_EQ(sasl_client_authenticate(p.client, 1000, true, &fds), want_r);
	if (want_r == SASL_CLIENT_E_REJECTED)
		shutdown(p.client, SHUT_WR);	/* the child's read sees EOF */
	else
		CHECK_EQ(fds, want_fds);
	if (want_r == 0) {
		char buf[16];

		CHECK(read(p.client, buf, sizeof(buf)) == 5 && !memcmp(buf, "HELLO", 5));
	}
	CHECK(waitpid(pid, &status, 0) == pid);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == want_status, " status %d", status);
	close(p.client);
}

int main(void)
{
	signal(SIGPIPE, SIG_IGN);
	test_agreed_and_no_overread();
	test_without_fds();
	test_fds_refused();
	test_rejected();
	test_bad_replies();
	test_overlong_line();
	test_fragmented();
	test_pipelined();
	test_with_server(SASL_SERVER_UNIX_FD, 1000, 0, true, 0);
	test_with_server(0, 1000, 0, false, 0);
	/* Another uid: our server answers REJECTED; its read then sees EOF. */
	test_with_server(SASL_SERVER_UNIX_FD, 1001, SASL_CLIENT_E_REJECTED, false, 4);
	printf("sasl-client: all checks passed\n");
	return 0;
}
