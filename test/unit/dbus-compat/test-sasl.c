/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Tests of the SASL server: every state-machine path with hand-written input,
 * the known transcripts of libdbus, GDBus and sd-bus, and live
 * authentication of the real dbus-send, gdbus and busctl programs over a
 * unix socket (driven through struct socket, so the raw-to-framing handover
 * is exercised with real pipelining clients).
 */

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "dbus-compat/address.h"
#include "dbus-compat/sasl.h"
#include "dbus-compat/sha1.h"
#include "dbus-compat/socket.h"
#include "check.h"

static const char guid[] = "0123456789abcdef0123456789abcdef";
static uid_t peer_uid = 1000;

static void init(struct sasl_server *s, unsigned int flags)
{
	CHECK(sasl_server_init(s, peer_uid, guid, flags) == 0);
}

/* Feed a string (with explicit length for embedded NULs). */
static int feed_n(struct sasl_server *s, const char *data, size_t n, size_t *consumed)
{
	size_t c = 0;
	int r = sasl_server_feed(s, data, n, &c);

	if (consumed)
		*consumed = c;
	else if (r == 0)
		CHECK(c == n);
	return r;
}

static int feed(struct sasl_server *s, const char *str)
{
	return feed_n(s, str, strlen(str), NULL);
}

/* Take the output and compare it with @expect. */
static void expect_out(struct sasl_server *s, const char *expect)
{
	size_t n;
	const char *out = sasl_server_peek_output(s, &n);

	if (n != strlen(expect) || (n && memcmp(out, expect, n))) {
		fprintf(stderr, "expected output '%s', got '%.*s'\n", expect, (int)n,
			out ? out : "");
		CHECK(0);
	}
	sasl_server_consume_output(s, n);
}

static void hex_of(char *buf, const char *s)
{
	static const char hex[] = "0123456789abcdef";

	for (; *s; s++) {
		*buf++ = hex[(unsigned char)*s >> 4];
		*buf++ = hex[*s & 15];
	}
	*buf = '\0';
}

static void uid_hex(char *buf, uid_t uid)
{
	char dec[32];

	snprintf(dec, sizeof(dec), "%u", (unsigned int)uid);
	hex_of(buf, dec);
}

static const char *ok_line(void)
{
	static char buf[64];

	snprintf(buf, sizeof(buf), "OK %s\r\n", guid);
	return buf;
}

static void test_init(void)
{
	struct sasl_server s;

	CHECK(sasl_server_init(&s, 0, "short", 0) == -EINVAL);
	sasl_server_deinit(&s);
	CHECK(sasl_server_init(&s, 0, "0123456789abcdef0123456789abcdeX", 0) == -EINVAL);
	sasl_server_deinit(&s);
	CHECK(sasl_server_init(&s, 0, guid, 0) == 0);
	CHECK(sasl_server_get_state(&s) == SASL_SERVER_STATE_WAIT_NUL);
	CHECK(!sasl_server_is_authenticated(&s));
	CHECK(sasl_server_get_uid(&s) == (uid_t)-1);
	sasl_server_deinit(&s);
	sasl_server_deinit(&s); /* idempotent */
}

static void test_missing_nul(void)
{
	struct sasl_server s;
	size_t c;

	init(&s, 0);
	CHECK(feed_n(&s, "AUTH EXTERNAL 31303030\r\n", 24, &c) == SASL_SERVER_FAILED);
	CHECK(sasl_server_is_failed(&s));
	CHECK(sasl_server_get_failure(&s));
	expect_out(&s, "");
	/* Sticky. */
	CHECK(feed_n(&s, "\0", 1, &c) == SASL_SERVER_FAILED);
	CHECK(c == 0);
	sasl_server_deinit(&s);
}

static void test_external_initial_response(void)
{
	struct sasl_server s;
	char line[128], hex[64];

	/* Matching uid. */
	init(&s, 0);
	uid_hex(hex, peer_uid);
	snprintf(line, sizeof(line), "AUTH EXTERNAL %s\r\n", hex);
	CHECK(feed_n(&s, "\0", 1, NULL) == 0);
	CHECK(feed(&s, line) == 0);
	expect_out(&s, ok_line());
	CHECK(sasl_server_is_authenticated(&s));
	CHECK(!sasl_server_is_done(&s));
	CHECK(sasl_server_get_uid(&s) == peer_uid);
	CHECK(feed(&s, "BEGIN\r\n") == SASL_SERVER_DONE);
	CHECK(sasl_server_is_done(&s));
	CHECK(!sasl_server_is_anonymous(&s));
	CHECK(!sasl_server_unix_fd_agreed(&s));
	expect_out(&s, "");
	sasl_server_deinit(&s);

	/* Upper-case hex is hex too. */
	init(&s, 0);
	CHECK(feed_n(&s, "\0AUTH EXTERNAL 31303030\r\n", 25, NULL) == 0);
	expect_out(&s, ok_line());
	sasl_server_deinit(&s);

	/* Wrong uid, then retry with the right one. */
	init(&s, 0);
	CHECK(feed_n(&s, "\0AUTH EXTERNAL 30\r\n", 19, NULL) == 0); /* "0" */
	expect_out(&s, "REJECTED EXTERNAL\r\n");
	CHECK(!sasl_server_is_authenticated(&s));
	CHECK(sasl_server_get_uid(&s) == (uid_t)-1);
	CHECK(feed(&s, line) == 0);
	expect_out(&s, ok_line());
	sasl_server_deinit(&s);

	/* Non-hex is an ERROR, not a failed attempt; the state stays. */
	init(&s, 0);
	CHECK(feed_n(&s, "\0", 1, NULL) == 0);
	CHECK(feed(&s, "AUTH EXTERNAL zz\r\n") == 0);
	expect_out(&s, "ERROR \"Invalid hex encoding\"\r\n");
	CHECK(sasl_server_get_state(&s) == SASL_SERVER_STATE_WAIT_AUTH);
	/* Hex is read to the first non-hex character: a second word or a trailing blank. */
	CHECK(feed(&s, "AUTH EXTERNAL 31303030 30\r\n") == 0);
	expect_out(&s, "ERROR \"Invalid hex encoding\"\r\n");
	CHECK(feed(&s, "AUTH EXTERNAL 31303030 \r\n") == 0);
	expect_out(&s, "ERROR \"Invalid hex encoding\"\r\n");
	/* An odd last digit is the high half of one more byte: "313" is "1" "0". */
	CHECK(feed(&s, "AUTH EXTERNAL 313\r\n") == 0);
	expect_out(&s, "REJECTED EXTERNAL\r\n");
	CHECK(feed(&s, "AUTH EXTERNAL 3130303\r\n") == 0); /* "1000" */
	expect_out(&s, ok_line());
	sasl_server_deinit(&s);

	/* Non-numeric identity, uid overflow. */
	init(&s, 0);
	CHECK(feed_n(&s, "\0", 1, NULL) == 0);
	CHECK(feed(&s, "AUTH EXTERNAL 726f6f74\r\n") == 0); /* "root" */
	expect_out(&s, "REJECTED EXTERNAL\r\n");
	/* 4294968296 == 2^32 + 1000 must not wrap to 1000 */
	hex_of(hex, "4294968296");
	snprintf(line, sizeof(line), "AUTH EXTERNAL %s\r\n", hex);
	CHECK(feed(&s, line) == 0);
	expect_out(&s, "REJECTED EXTERNAL\r\n");
	hex_of(hex, "99999999999999999999999");
	snprintf(line, sizeof(line), "AUTH EXTERNAL %s\r\n", hex);
	CHECK(feed(&s, line) == 0);
	expect_out(&s, "REJECTED EXTERNAL\r\n");
	/* A trailing blank or a NUL is not part of a number. */
	CHECK(feed(&s, "AUTH EXTERNAL 3130303020\r\n") == 0);
	expect_out(&s, "REJECTED EXTERNAL\r\n");
	CHECK(feed(&s, "AUTH EXTERNAL 3130303000\r\n") == 0);
	expect_out(&s, "REJECTED EXTERNAL\r\n");
	sasl_server_deinit(&s);

	init(&s, 0);
	CHECK(feed_n(&s, "\0", 1, NULL) == 0);
	/* -1 is no uid (and 2^64 - 1 after strtoul()). */
	CHECK(feed(&s, "AUTH EXTERNAL 2d31\r\n") == 0);
	expect_out(&s, "REJECTED EXTERNAL\r\n");
	/* A leading 0 is octal, as strtoul() with base 0 reads it: 512. */
	hex_of(hex, "0001000");
	snprintf(line, sizeof(line), "AUTH EXTERNAL %s\r\n", hex);
	CHECK(feed(&s, line) == 0);
	expect_out(&s, "REJECTED EXTERNAL\r\n");
	sasl_server_deinit(&s);

	/* The other ways strtoul() with base 0 reads 1000 (dbus-daemon's reading). */
	{
		static const char *const forms[] = { " 1000", "\t1000", "+1000", "0x3e8", "0X3E8",
						     "01750", NULL };

		for (size_t i = 0; forms[i]; i++) {
			init(&s, 0);
			hex_of(hex, forms[i]);
			snprintf(line, sizeof(line), "AUTH EXTERNAL %s\r\n", hex);
			CHECK(feed_n(&s, "\0", 1, NULL) == 0);
			CHECK(feed(&s, line) == 0);
			expect_out(&s, ok_line());
			CHECK(sasl_server_get_uid(&s) == peer_uid);
			sasl_server_deinit(&s);
		}
	}

	/* Blanks: two spaces or a tab between the words. */
	init(&s, 0);
	CHECK(feed_n(&s, "\0AUTH  EXTERNAL \t31303030\r\n", 27, NULL) == 0);
	expect_out(&s, ok_line());
	sasl_server_deinit(&s);
	init(&s, 0);
	CHECK(feed_n(&s, "\0AUTH\tEXTERNAL\t31303030\r\n", 25, NULL) == 0);
	expect_out(&s, ok_line());
	sasl_server_deinit(&s);
}

static void test_external_data_exchange(void)
{
	struct sasl_server s;
	char line[128], hex[64];

	/* Empty DATA: use the transport's identity. */
	init(&s, 0);
	CHECK(feed_n(&s, "\0AUTH EXTERNAL\r\n", 16, NULL) == 0);
	expect_out(&s, "DATA\r\n");
	CHECK(sasl_server_get_state(&s) == SASL_SERVER_STATE_WAIT_DATA);
	CHECK(feed(&s, "DATA\r\n") == 0);
	expect_out(&s, ok_line());
	CHECK(sasl_server_get_uid(&s) == peer_uid);
	sasl_server_deinit(&s);

	/* "DATA " with an empty argument is the same. */
	init(&s, 0);
	CHECK(feed_n(&s, "\0AUTH EXTERNAL \r\n", 17, NULL) == 0);
	expect_out(&s, "DATA\r\n");
	CHECK(feed(&s, "DATA \r\n") == 0);
	expect_out(&s, ok_line());
	sasl_server_deinit(&s);

	/* DATA with the matching uid. */
	init(&s, 0);
	uid_hex(hex, peer_uid);
	snprintf(line, sizeof(line), "DATA %s\r\n", hex);
	CHECK(feed_n(&s, "\0AUTH EXTERNAL\r\n", 16, NULL) == 0);
	expect_out(&s, "DATA\r\n");
	CHECK(feed(&s, line) == 0);
	expect_out(&s, ok_line());
	sasl_server_deinit(&s);

	/* DATA with a wrong uid: REJECTED, back to WaitingForAuth. */
	init(&s, 0);
	CHECK(feed_n(&s, "\0AUTH EXTERNAL\r\n", 16, NULL) == 0);
	expect_out(&s, "DATA\r\n");
	CHECK(feed(&s, "DATA 30\r\n") == 0);
	expect_out(&s, "REJECTED EXTERNAL\r\n");
	CHECK(sasl_server_get_state(&s) == SASL_SERVER_STATE_WAIT_AUTH);
	/* Bad hex: ERROR, still waiting for DATA; a tab separates too. */
	CHECK(feed(&s, "AUTH EXTERNAL\r\n") == 0);
	expect_out(&s, "DATA\r\n");
	CHECK(feed(&s, "DATA xy\r\n") == 0);
	expect_out(&s, "ERROR \"Invalid hex encoding\"\r\n");
	CHECK(sasl_server_get_state(&s) == SASL_SERVER_STATE_WAIT_DATA);
	CHECK(feed(&s, "DATA\t31303030\r\n") == 0);
	expect_out(&s, ok_line());
	sasl_server_deinit(&s);

	/* Other commands while waiting for DATA. */
	init(&s, 0);
	CHECK(feed_n(&s, "\0AUTH EXTERNAL\r\n", 16, NULL) == 0);
	expect_out(&s, "DATA\r\n");
	CHECK(feed(&s, "NEGOTIATE_UNIX_FD\r\n") == 0);
	expect_out(&s, "ERROR \"Need to authenticate first\"\r\n");
	CHECK(feed(&s, "AUTH EXTERNAL 31303030\r\n") == 0);
	expect_out(&s, "ERROR \"Sent AUTH while another AUTH in progress\"\r\n");
	CHECK(feed(&s, "OK\r\n") == 0);
	expect_out(&s, "ERROR \"Unknown command\"\r\n");
	CHECK(sasl_server_get_state(&s) == SASL_SERVER_STATE_WAIT_DATA);
	CHECK(feed(&s, "DATA\r\n") == 0);
	expect_out(&s, ok_line());
	sasl_server_deinit(&s);
}

static void test_anonymous(void)
{
	struct sasl_server s;

	/* Disabled: rejected, and not advertised. */
	init(&s, 0);
	CHECK(feed_n(&s, "\0AUTH ANONYMOUS 7472616365\r\n", 28, NULL) == 0);
	expect_out(&s, "REJECTED EXTERNAL\r\n");
	CHECK(!sasl_server_is_authenticated(&s));
	sasl_server_deinit(&s);

	/* Enabled, with trace. */
	init(&s, SASL_SERVER_ALLOW_ANONYMOUS);
	CHECK(feed_n(&s, "\0AUTH ANONYMOUS 7472616365\r\n", 28, NULL) == 0);
	expect_out(&s, ok_line());
	CHECK(sasl_server_is_authenticated(&s));
	CHECK(sasl_server_is_anonymous(&s));
	CHECK(sasl_server_get_uid(&s) == (uid_t)-1);
	CHECK(feed(&s, "BEGIN\r\n") == SASL_SERVER_DONE);
	CHECK(sasl_server_is_anonymous(&s));
	sasl_server_deinit(&s);

	/* Enabled, without trace: OK at once; advertised in REJECTED. */
	init(&s, SASL_SERVER_ALLOW_ANONYMOUS);
	CHECK(feed_n(&s, "\0AUTH FOO\r\n", 11, NULL) == 0);
	expect_out(&s, "REJECTED EXTERNAL ANONYMOUS\r\n");
	CHECK(feed(&s, "AUTH ANONYMOUS\r\n") == 0);
	expect_out(&s, ok_line());
	CHECK(sasl_server_is_anonymous(&s));
	sasl_server_deinit(&s);

	/* Bad hex trace is an ERROR; a trace that is not UTF-8 (or has a NUL) is rejected. */
	init(&s, SASL_SERVER_ALLOW_ANONYMOUS);
	CHECK(feed_n(&s, "\0AUTH ANONYMOUS q\r\n", 19, NULL) == 0);
	expect_out(&s, "ERROR \"Invalid hex encoding\"\r\n");
	CHECK(feed(&s, "AUTH ANONYMOUS ff\r\n") == 0);
	expect_out(&s, "REJECTED EXTERNAL ANONYMOUS\r\n");
	CHECK(feed(&s, "AUTH ANONYMOUS eda080\r\n") == 0); /* a surrogate */
	expect_out(&s, "REJECTED EXTERNAL ANONYMOUS\r\n");
	CHECK(feed(&s, "AUTH ANONYMOUS 6100\r\n") == 0);
	expect_out(&s, "REJECTED EXTERNAL ANONYMOUS\r\n");
	CHECK(feed(&s, "AUTH ANONYMOUS c3a9e282ac\r\n") == 0);
	expect_out(&s, ok_line());
	sasl_server_deinit(&s);
}

static void test_rejected_list_and_unknown(void)
{
	struct sasl_server s;

	init(&s, 0);
	CHECK(feed_n(&s, "\0AUTH\r\n", 7, NULL) == 0);
	expect_out(&s, "REJECTED EXTERNAL\r\n");
	CHECK(feed(&s, "AUTH DBUS_COOKIE_SHA1 31303030\r\n") == 0);
	expect_out(&s, "REJECTED EXTERNAL\r\n");
	CHECK(feed(&s, "AUTH KERBEROS_V4\r\n") == 0);
	expect_out(&s, "REJECTED EXTERNAL\r\n");
	/* Unknown commands get ERROR and the exchange goes on (spec Figure 3). */
	CHECK(feed(&s, "FOOBAR\r\n") == 0);
	expect_out(&s, "ERROR \"Unknown command\"\r\n");
	CHECK(feed(&s, "EXTENSION_COM_EXAMPLE_X 1 2\r\n") == 0);
	expect_out(&s, "ERROR \"Unknown command\"\r\n");
	/* The server's own replies are unknown commands too. */
	CHECK(feed(&s, "OK\r\n") == 0);
	expect_out(&s, "ERROR \"Unknown command\"\r\n");
	CHECK(feed(&s, "REJECTED EXTERNAL\r\n") == 0);
	expect_out(&s, "ERROR \"Unknown command\"\r\n");
	CHECK(feed(&s, "AGREE_UNIX_FD\r\n") == 0);
	expect_out(&s, "ERROR \"Unknown command\"\r\n");
	/* Commands are case-sensitive. */
	CHECK(feed(&s, "auth EXTERNAL 31303030\r\n") == 0);
	expect_out(&s, "ERROR \"Unknown command\"\r\n");
	/* "AUTH " (a blank but no mechanism) lists the mechanisms, as "AUTH". */
	CHECK(feed(&s, "AUTH \r\n") == 0);
	expect_out(&s, "REJECTED EXTERNAL\r\n");
	CHECK(feed(&s, "AUTH EXTERNAL 31303030\r\n") == 0);
	expect_out(&s, ok_line());
	sasl_server_deinit(&s);
}

static void test_cancel_error(void)
{
	struct sasl_server s;

	/* WaitingForAuth: CANCEL and DATA are ERRORs; ERROR -> REJECTED. */
	init(&s, 0);
	CHECK(feed_n(&s, "\0CANCEL\r\n", 9, NULL) == 0);
	expect_out(&s, "ERROR \"Not currently in an auth conversation\"\r\n");
	CHECK(feed(&s, "DATA 31303030\r\n") == 0);
	expect_out(&s, "ERROR \"Not currently in an auth conversation\"\r\n");
	CHECK(feed(&s, "ERROR\r\n") == 0);
	expect_out(&s, "REJECTED EXTERNAL\r\n");
	CHECK(feed(&s, "ERROR \"client did not like it\"\r\n") == 0);
	expect_out(&s, "REJECTED EXTERNAL\r\n");

	/* WaitingForData: CANCEL and ERROR -> REJECTED. */
	CHECK(feed(&s, "AUTH EXTERNAL\r\n") == 0);
	expect_out(&s, "DATA\r\n");
	CHECK(feed(&s, "CANCEL\r\n") == 0);
	expect_out(&s, "REJECTED EXTERNAL\r\n");
	CHECK(sasl_server_get_state(&s) == SASL_SERVER_STATE_WAIT_AUTH);
	CHECK(feed(&s, "AUTH EXTERNAL\r\n") == 0);
	expect_out(&s, "DATA\r\n");
	CHECK(feed(&s, "ERROR\r\n") == 0);
	expect_out(&s, "REJECTED EXTERNAL\r\n");
	CHECK(sasl_server_get_state(&s) == SASL_SERVER_STATE_WAIT_AUTH);
	sasl_server_deinit(&s);

	/* WaitingForBegin: CANCEL and ERROR undo the authentication. */
	init(&s, 0);
	CHECK(feed_n(&s, "\0AUTH EXTERNAL 31303030\r\n", 25, NULL) == 0);
	expect_out(&s, ok_line());
	CHECK(sasl_server_is_authenticated(&s));
	CHECK(feed(&s, "CANCEL\r\n") == 0);
	expect_out(&s, "REJECTED EXTERNAL\r\n");
	CHECK(!sasl_server_is_authenticated(&s));
	CHECK(sasl_server_get_uid(&s) == (uid_t)-1);
	CHECK(feed(&s, "AUTH EXTERNAL 31303030\r\n") == 0);
	expect_out(&s, ok_line());
	CHECK(feed(&s, "ERROR\r\n") == 0);
	expect_out(&s, "REJECTED EXTERNAL\r\n");
	CHECK(!sasl_server_is_authenticated(&s));
	/* Other commands after OK: ERROR, still authenticated. */
	CHECK(feed(&s, "AUTH EXTERNAL 31303030\r\n") == 0);
	expect_out(&s, ok_line());
	CHECK(feed(&s, "AUTH EXTERNAL 31303030\r\n") == 0);
	expect_out(&s, "ERROR \"Sent AUTH while expecting BEGIN\"\r\n");
	CHECK(feed(&s, "DATA\r\n") == 0);
	expect_out(&s, "ERROR \"Sent DATA while expecting BEGIN\"\r\n");
	CHECK(feed(&s, "STARTTLS\r\n") == 0);
	expect_out(&s, "ERROR \"Unknown command\"\r\n");
	CHECK(sasl_server_is_authenticated(&s));
	CHECK(feed(&s, "BEGIN\r\n") == SASL_SERVER_DONE);
	sasl_server_deinit(&s);
}

static void test_unix_fd(void)
{
	struct sasl_server s;

	/* Supported. */
	init(&s, SASL_SERVER_UNIX_FD);
	CHECK(feed_n(&s, "\0NEGOTIATE_UNIX_FD\r\n", 20, NULL) == 0); /* before auth */
	expect_out(&s, "ERROR \"Need to authenticate first\"\r\n");
	CHECK(feed(&s, "AUTH EXTERNAL 31303030\r\n") == 0);
	expect_out(&s, ok_line());
	CHECK(feed(&s, "NEGOTIATE_UNIX_FD\r\n") == 0);
	expect_out(&s, "AGREE_UNIX_FD\r\n");
	CHECK(sasl_server_unix_fd_agreed(&s));
	CHECK(feed(&s, "BEGIN\r\n") == SASL_SERVER_DONE);
	CHECK(sasl_server_unix_fd_agreed(&s));
	sasl_server_deinit(&s);

	/* Arguments are ignored, as dbus-daemon does. */
	init(&s, SASL_SERVER_UNIX_FD);
	CHECK(feed_n(&s, "\0AUTH EXTERNAL 31303030\r\nNEGOTIATE_UNIX_FD x\r\n", 46, NULL) == 0);
	expect_out(&s, "OK 0123456789abcdef0123456789abcdef\r\nAGREE_UNIX_FD\r\n");
	CHECK(sasl_server_unix_fd_agreed(&s));
	sasl_server_deinit(&s);

	/* Not supported. */
	init(&s, 0);
	CHECK(feed_n(&s, "\0AUTH EXTERNAL 31303030\r\n", 25, NULL) == 0);
	expect_out(&s, ok_line());
	CHECK(feed(&s, "NEGOTIATE_UNIX_FD\r\n") == 0);
	expect_out(&s, "ERROR \"Unix FD passing not supported, not authenticated or otherwise "
		       "not possible\"\r\n");
	CHECK(!sasl_server_unix_fd_agreed(&s));
	CHECK(feed(&s, "BEGIN\r\n") == SASL_SERVER_DONE);
	CHECK(!sasl_server_unix_fd_agreed(&s));
	sasl_server_deinit(&s);

	/* Agreement is forgotten when the authentication is cancelled. */
	init(&s, SASL_SERVER_UNIX_FD);
	CHECK(feed_n(&s, "\0AUTH EXTERNAL 31303030\r\nNEGOTIATE_UNIX_FD\r\nCANCEL\r\n",
		      52, NULL) == 0);
	expect_out(&s, "OK 0123456789abcdef0123456789abcdef\r\nAGREE_UNIX_FD\r\n"
		       "REJECTED EXTERNAL\r\n");
	CHECK(!sasl_server_unix_fd_agreed(&s));
	CHECK(feed(&s, "AUTH EXTERNAL 31303030\r\nBEGIN\r\n") == SASL_SERVER_DONE);
	CHECK(!sasl_server_unix_fd_agreed(&s));
	sasl_server_deinit(&s);
}

static void test_begin(void)
{
	struct sasl_server s;
	size_t c;

	init(&s, 0);
	CHECK(feed_n(&s, "\0BEGIN\r\n", 8, NULL) == SASL_SERVER_FAILED);
	CHECK(!sasl_server_is_done(&s));
	CHECK(sasl_server_get_uid(&s) == (uid_t)-1);
	sasl_server_deinit(&s);

	init(&s, 0);
	CHECK(feed_n(&s, "\0AUTH EXTERNAL\r\nBEGIN\r\n", 23, NULL) == SASL_SERVER_FAILED);
	expect_out(&s, "DATA\r\n");
	sasl_server_deinit(&s);

	/* "BEGIN x" after OK is BEGIN: arguments are ignored, as dbus-daemon does. */
	init(&s, 0);
	CHECK(feed_n(&s, "\0AUTH EXTERNAL 31303030\r\nBEGIN x\r\nl", 35, &c) == SASL_SERVER_DONE);
	CHECK(c == 34);
	expect_out(&s, "OK 0123456789abcdef0123456789abcdef\r\n");
	CHECK(sasl_server_get_uid(&s) == peer_uid);
	sasl_server_deinit(&s);

	init(&s, 0);
	CHECK(feed_n(&s, "\0AUTH EXTERNAL 31303030\r\nBEGIN\t\r\n", 33, &c) == SASL_SERVER_DONE);
	CHECK(c == 33);
	sasl_server_deinit(&s);
}

/* sd-bus style: everything in one write, followed by the first message. */
static const char pipelined[] = "\0AUTH EXTERNAL 31303030\r\nNEGOTIATE_UNIX_FD\r\nBEGIN\r\n"
				"l\1\0\1\0\0\0\0\1\0\0\0m\0\0\0";

static void test_pipelined(void)
{
	struct sasl_server s;
	size_t c, prefix = 1 + 24 + 19 + 7, i;
	int r = 0;

	CHECK(sizeof(pipelined) - 1 == prefix + 16);
	init(&s, SASL_SERVER_UNIX_FD);
	CHECK(feed_n(&s, pipelined, sizeof(pipelined) - 1, &c) == SASL_SERVER_DONE);
	CHECK(c == prefix);
	expect_out(&s, "OK 0123456789abcdef0123456789abcdef\r\nAGREE_UNIX_FD\r\n");
	CHECK(sasl_server_get_uid(&s) == peer_uid);
	CHECK(sasl_server_unix_fd_agreed(&s));
	/* Later calls consume nothing. */
	CHECK(feed_n(&s, pipelined + c, sizeof(pipelined) - 1 - c, &c) == SASL_SERVER_DONE);
	CHECK(c == 0);
	sasl_server_deinit(&s);

	/* One byte at a time. */
	init(&s, SASL_SERVER_UNIX_FD);
	for (i = 0; i < sizeof(pipelined) - 1; i++) {
		r = feed_n(&s, pipelined + i, 1, &c);
		CHECK(c == 1);
		if (r)
			break;
	}
	CHECK(r == SASL_SERVER_DONE);
	CHECK(i + 1 == prefix);
	expect_out(&s, "OK 0123456789abcdef0123456789abcdef\r\nAGREE_UNIX_FD\r\n");
	sasl_server_deinit(&s);

	/* Every split point into two chunks. */
	for (i = 0; i <= sizeof(pipelined) - 1; i++) {
		size_t c1, c2 = 0;

		init(&s, SASL_SERVER_UNIX_FD);
		r = feed_n(&s, pipelined, i, &c1);
		if (r == 0) {
			CHECK(c1 == i);
			r = feed_n(&s, pipelined + i, sizeof(pipelined) - 1 - i, &c2);
		}
		CHECK(r == SASL_SERVER_DONE);
		CHECK(c1 + c2 == prefix);
		expect_out(&s, "OK 0123456789abcdef0123456789abcdef\r\nAGREE_UNIX_FD\r\n");
		sasl_server_deinit(&s);
	}
}

static void test_malformed(void)
{
	struct sasl_server s;

	init(&s, 0);
	CHECK(feed_n(&s, "\0AUTH \0EXTERNAL\r\n", 17, NULL) == 0); /* NUL */
	expect_out(&s, "ERROR \"Command contained non-ASCII\"\r\n");
	CHECK(feed(&s, "AUTH EXTERNAL \xc3\xa4\r\n") == 0); /* non-ASCII */
	expect_out(&s, "ERROR \"Command contained non-ASCII\"\r\n");
	/* Other control characters are ASCII: here they are not hex. */
	CHECK(feed(&s, "AUTH EXTERNAL 31303030\x01\r\n") == 0);
	expect_out(&s, "ERROR \"Invalid hex encoding\"\r\n");
	CHECK(feed(&s, "\r\n") == 0); /* empty line */
	expect_out(&s, "ERROR \"Unknown command\"\r\n");
	CHECK(feed(&s, "AUTH EXTERNAL 31303030\r\n") == 0);
	expect_out(&s, ok_line());
	sasl_server_deinit(&s);
}

/* Lines end at "\r\n" only, wherever the input is cut. */
static void test_line_ends(void)
{
	struct sasl_server s;

	/* A lone "\n" is a byte of the line: no answer until "\r\n". */
	init(&s, 0);
	CHECK(feed_n(&s, "\0AUTH EXTERNAL 31303030\n", 24, NULL) == 0);
	expect_out(&s, "");
	CHECK(feed(&s, "BEGIN\r\n") == 0);
	expect_out(&s, "ERROR \"Invalid hex encoding\"\r\n");
	/* So is a lone "\r"; "\r\r\n" ends a line that ends in "\r". */
	CHECK(feed(&s, "AUTH EXTERNAL 31303030\r") == 0);
	expect_out(&s, "");
	CHECK(feed(&s, "\r\n") == 0);
	expect_out(&s, "ERROR \"Invalid hex encoding\"\r\n");
	/* "\r" and "\n" in two pieces. */
	CHECK(feed(&s, "AUTH EXTERNAL 31303030\r") == 0);
	expect_out(&s, "");
	CHECK(feed(&s, "\n") == 0);
	expect_out(&s, ok_line());
	/* "\n" then "\r\n" in two pieces: one line, whose command is not a known one. */
	CHECK(feed(&s, "NEGOTIATE_UNIX_FD\n") == 0);
	CHECK(feed(&s, "\r\n") == 0);
	expect_out(&s, "ERROR \"Unknown command\"\r\n");
	CHECK(feed(&s, "BEGIN\r\n") == SASL_SERVER_DONE);
	sasl_server_deinit(&s);
}

static void test_overlong(void)
{
	struct sasl_server s;
	char *buf = malloc(SASL_LINE_MAX + 16);
	size_t c;

	CHECK(buf);

	/* A line of exactly SASL_LINE_MAX bytes (terminator included) is fine. */
	init(&s, 0);
	memset(buf, 'A', SASL_LINE_MAX);
	buf[SASL_LINE_MAX - 2] = '\r';
	buf[SASL_LINE_MAX - 1] = '\n';
	CHECK(feed_n(&s, "\0", 1, NULL) == 0);
	CHECK(feed_n(&s, buf, SASL_LINE_MAX, &c) == 0);
	CHECK(c == SASL_LINE_MAX);
	expect_out(&s, "ERROR \"Unknown command\"\r\n");
	sasl_server_deinit(&s);

	/* One byte more fails, whether in one piece or split. */
	init(&s, 0);
	memset(buf, 'A', SASL_LINE_MAX + 1);
	buf[SASL_LINE_MAX - 1] = '\r';
	buf[SASL_LINE_MAX] = '\n';
	CHECK(feed_n(&s, "\0", 1, NULL) == 0);
	CHECK(feed_n(&s, buf, SASL_LINE_MAX + 1, &c) == SASL_SERVER_FAILED);
	sasl_server_deinit(&s);

	init(&s, 0);
	CHECK(feed_n(&s, "\0", 1, NULL) == 0);
	CHECK(feed_n(&s, buf, 1000, &c) == 0);
	CHECK(feed_n(&s, buf + 1000, SASL_LINE_MAX + 1 - 1000, &c) == SASL_SERVER_FAILED);
	CHECK(sasl_server_is_failed(&s));
	sasl_server_deinit(&s);

	/* Long hex argument within the line limit: still just rejected. */
	init(&s, 0);
	memcpy(buf, "AUTH EXTERNAL ", 14);
	memset(buf + 14, '3', SASL_LINE_MAX - 16);
	buf[SASL_LINE_MAX - 2] = '\r';
	buf[SASL_LINE_MAX - 1] = '\n';
	CHECK(feed_n(&s, "\0", 1, NULL) == 0);
	CHECK(feed_n(&s, buf, SASL_LINE_MAX, &c) == 0);
	expect_out(&s, "REJECTED EXTERNAL\r\n");
	sasl_server_deinit(&s);
	free(buf);
}

static void test_bounds(void)
{
	struct sasl_server s;
	unsigned int i;
	size_t total = 1;
	int r = 0;

	/* The SASL_REJECTED_MAX-th REJECTED is sent, then the conversation ends. */
	init(&s, 0);
	CHECK(feed_n(&s, "\0", 1, NULL) == 0);
	for (i = 1; i < SASL_REJECTED_MAX; i++) {
		CHECK(feed(&s, "AUTH FOO\r\n") == 0);
		expect_out(&s, "REJECTED EXTERNAL\r\n");
	}
	CHECK(feed(&s, "AUTH FOO\r\n") == SASL_SERVER_FAILED);
	expect_out(&s, "REJECTED EXTERNAL\r\n");
	CHECK(sasl_server_is_failed(&s));
	sasl_server_deinit(&s);

	/* One fewer, and the client may still authenticate. */
	init(&s, 0);
	CHECK(feed_n(&s, "\0", 1, NULL) == 0);
	for (i = 1; i < SASL_REJECTED_MAX; i++)
		CHECK(feed(&s, "AUTH FOO\r\n") == 0);
	expect_out(&s, "REJECTED EXTERNAL\r\nREJECTED EXTERNAL\r\nREJECTED EXTERNAL\r\n"
		       "REJECTED EXTERNAL\r\nREJECTED EXTERNAL\r\n");
	CHECK(feed(&s, "AUTH EXTERNAL 31303030\r\nBEGIN\r\n") == SASL_SERVER_DONE);
	sasl_server_deinit(&s);

	/* Errors have a bound of their own (a client spamming unknown commands). */
	init(&s, 0);
	CHECK(feed_n(&s, "\0", 1, NULL) == 0);
	for (i = 1; i <= SASL_ERRORS_MAX && r == 0; i++) {
		r = feed(&s, "X\r\n");
		expect_out(&s, "ERROR \"Unknown command\"\r\n");
	}
	CHECK(r == SASL_SERVER_FAILED);
	CHECK(i == SASL_ERRORS_MAX + 1);
	sasl_server_deinit(&s);

	/* Total input bound: NEGOTIATE_UNIX_FD is not a failure but costs bytes. */
	init(&s, SASL_SERVER_UNIX_FD);
	CHECK(feed_n(&s, "\0AUTH EXTERNAL 31303030\r\n", 25, NULL) == 0);
	total = 25;
	r = 0;
	while (r == 0) {
		size_t n;

		r = feed(&s, "NEGOTIATE_UNIX_FD\r\n");
		total += 19;
		sasl_server_peek_output(&s, &n);
		sasl_server_consume_output(&s, n);
		CHECK(total < SASL_INPUT_MAX + 100);
	}
	CHECK(r == SASL_SERVER_FAILED);
	CHECK(total > SASL_INPUT_MAX);
	sasl_server_deinit(&s);
}

static void test_output_partial_consume(void)
{
	struct sasl_server s;
	size_t n;
	const char *out;

	init(&s, 0);
	CHECK(feed_n(&s, "\0AUTH\r\n", 7, NULL) == 0);
	out = sasl_server_peek_output(&s, &n);
	CHECK(n == 19 && !memcmp(out, "REJECTED EXTERNAL\r\n", 19));
	sasl_server_consume_output(&s, 5);
	CHECK(feed(&s, "AUTH\r\n") == 0);
	expect_out(&s, "TED EXTERNAL\r\nREJECTED EXTERNAL\r\n");
	sasl_server_deinit(&s);
}

/*
 * Client transcripts as the Debian 12 libraries write them (captured by
 * test_real_clients() below from dbus-send 1.14, gdbus 2.74 and busctl 252),
 * each chunk being one write of the client.
 */
static void run_transcript(const char *name, const char *const *chunks, const size_t *lens,
			   const char *const *replies, unsigned int flags, bool expect_fd)
{
	struct sasl_server s;
	size_t i, c;
	int r = 0;

	init(&s, flags);
	for (i = 0; chunks[i]; i++) {
		r = feed_n(&s, chunks[i], lens[i], &c);
		CHECK(r >= 0);
		expect_out(&s, replies[i]);
		if (r == SASL_SERVER_DONE)
			break;
		CHECK(r == 0);
	}
	if (r != SASL_SERVER_DONE)
		fprintf(stderr, "transcript %s did not complete\n", name);
	CHECK(r == SASL_SERVER_DONE);
	CHECK(sasl_server_get_uid(&s) == peer_uid);
	CHECK(sasl_server_unix_fd_agreed(&s) == expect_fd);
	sasl_server_deinit(&s);
}

static void test_transcripts(void)
{
	static char ok[64], ok_agree[96];
	char hex[32];
	static char ext[64];

	snprintf(ok, sizeof(ok), "OK %s\r\n", guid);
	snprintf(ok_agree, sizeof(ok_agree), "OK %s\r\nAGREE_UNIX_FD\r\n", guid);
	uid_hex(hex, peer_uid);
	snprintf(ext, sizeof(ext), "AUTH EXTERNAL %s\r\n", hex);

	{
		/* libdbus: NUL sent separately, EXTERNAL with uid, then fd
		 * negotiation and BEGIN after each reply. */
		const char *chunks[] = { "\0", ext, "NEGOTIATE_UNIX_FD\r\n", "BEGIN\r\n", NULL };
		size_t lens[] = { 1, strlen(ext), 19, 7 };
		const char *replies[] = { "", ok, "AGREE_UNIX_FD\r\n", "" };

		run_transcript("libdbus", chunks, lens, replies, SASL_SERVER_UNIX_FD, true);
	}
	{
		/* libdbus against a server without fd passing. */
		const char *chunks[] = { "\0", ext, "NEGOTIATE_UNIX_FD\r\n", "BEGIN\r\n", NULL };
		size_t lens[] = { 1, strlen(ext), 19, 7 };
		const char *replies[] = {
			"", ok,
			"ERROR \"Unix FD passing not supported, not authenticated or otherwise "
			"not possible\"\r\n",
			""
		};

		run_transcript("libdbus-nofd", chunks, lens, replies, 0, false);
	}
	{
		/* GDBus 2.74: NUL with a bare AUTH to learn the mechanisms, then
		 * EXTERNAL with the uid, fd negotiation, BEGIN. */
		const char *chunks[] = { "\0AUTH\r\n", ext, "NEGOTIATE_UNIX_FD\r\n",
					 "BEGIN\r\n", NULL };
		size_t lens[] = { 7, strlen(ext), 19, 7 };
		const char *replies[] = { "REJECTED EXTERNAL\r\n", ok, "AGREE_UNIX_FD\r\n", "" };

		run_transcript("gdbus", chunks, lens, replies, SASL_SERVER_UNIX_FD, true);
	}
	{
		/* sd-bus 252: everything pipelined in one write, EXTERNAL without
		 * initial response and the empty DATA answer sent before the
		 * server's challenge arrived. */
		static const char all[] = "\0AUTH EXTERNAL\r\nDATA\r\nNEGOTIATE_UNIX_FD\r\nBEGIN\r\n";
		static char replies0[128];
		const char *chunks[] = { all, NULL };
		size_t lens[] = { sizeof(all) - 1 };
		const char *replies[] = { replies0 };

		snprintf(replies0, sizeof(replies0), "DATA\r\n%s", ok_agree);
		run_transcript("sd-bus", chunks, lens, replies, SASL_SERVER_UNIX_FD, true);
	}
	{
		/* sd-bus as documented elsewhere: uid as initial response. */
		static char all[160];
		const char *chunks[] = { all, NULL };
		size_t lens[1];
		const char *replies[] = { ok_agree };

		all[0] = '\0';
		snprintf(all + 1, sizeof(all) - 1, "%sNEGOTIATE_UNIX_FD\r\nBEGIN\r\n", ext);
		lens[0] = 1 + strlen(all + 1);
		run_transcript("sd-bus-uid", chunks, lens, replies, SASL_SERVER_UNIX_FD, true);
	}
	{
		/* sd-bus with anonymous fallback disabled, libdbus probing with
		 * a bare AUTH first. */
		const char *chunks[] = { "\0AUTH\r\n", ext, "BEGIN\r\n", NULL };
		size_t lens[] = { 7, strlen(ext), 7 };
		const char *replies[] = { "REJECTED EXTERNAL\r\n", ok, "" };

		run_transcript("probe", chunks, lens, replies, 0, false);
	}
}

/* ---- real clients ------------------------------------------------------ */

static int count_fds(void)
{
	char path[64];
	int n = 0, fd;

	for (fd = 0; fd < 1024; fd++) {
		snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
		if (access(path, F_OK) == 0)
			n++;
	}
	return n;
}

/*
 * Serve one connection on @lfd: authenticate it through struct socket + the
 * SASL server, then read the first message frame. Returns true on success.
 */
static bool serve_one(int lfd, const char *name, pid_t child, unsigned int flags)
{
	struct socket *sock = NULL;
	struct sasl_server sasl;
	struct socket_frame frame = {};
	struct pollfd pfd;
	bool authed = false, ok = false;
	char guid_buf[ADDRESS_GUID_LEN + 1];
	time_t deadline = time(NULL) + 20;
	int fd, r;

	pfd.fd = lfd;
	pfd.events = POLLIN;
	while (poll(&pfd, 1, 1000) == 0) {
		int st;

		if (waitpid(child, &st, WNOHANG) == child) {
			fprintf(stderr, "%s exited before connecting\n", name);
			return false;
		}
		if (time(NULL) > deadline)
			return false;
	}
	fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
	CHECK(fd >= 0);
	CHECK(socket_new(&sock, fd) == 0);
	CHECK(socket_get_creds(sock)->uid == getuid());
	CHECK(socket_get_creds(sock)->pid == child);
	CHECK(address_generate_guid(guid_buf) == 0);
	CHECK(sasl_server_init(&sasl, socket_get_creds(sock)->uid, guid_buf, flags) == 0);

	while (time(NULL) <= deadline) {
		pfd.fd = socket_get_fd(sock);
		pfd.events = POLLIN | (socket_wants_write(sock) ? POLLOUT : 0);
		if (poll(&pfd, 1, 1000) <= 0)
			continue;
		if (pfd.revents & POLLOUT)
			CHECK(socket_dispatch_write(sock) == 0);
		if (!(pfd.revents & (POLLIN | POLLHUP)))
			continue;
		r = socket_dispatch_read(sock);
		if (r == SOCKET_E_EOF) {
			fprintf(stderr, "%s hung up\n", name);
			break;
		}
		CHECK(r == 0);

		if (!authed) {
			size_t n, c;
			const void *p = socket_peek_raw(sock, &n);
			const char *out;

			printf("# %s sent: '", name);
			for (size_t i = 0; i < n; i++) {
				unsigned char ch = ((const unsigned char *)p)[i];

				if (ch >= 0x20 && ch < 0x7f)
					putchar(ch);
				else
					printf("\\x%02x", ch);
			}
			printf("'\n");

			r = sasl_server_feed(&sasl, p, n, &c);
			socket_consume_raw(sock, c);
			CHECK(r >= 0);
			out = sasl_server_peek_output(&sasl, &n);
			if (n) {
				CHECK(socket_queue_copy(sock, out, n) == 0);
				sasl_server_consume_output(&sasl, n);
				CHECK(socket_dispatch_write(sock) == 0);
			}
			if (r == SASL_SERVER_FAILED) {
				fprintf(stderr, "%s: sasl failed: %s\n", name,
					sasl_server_get_failure(&sasl));
				break;
			}
			if (r != SASL_SERVER_DONE)
				continue;
			authed = true;
			CHECK(sasl_server_get_uid(&sasl) == getuid());
			/* All three clients ask for fd passing. */
			CHECK(sasl_server_unix_fd_agreed(&sasl) == !!(flags & SASL_SERVER_UNIX_FD));
			printf("# %s authenticated, unix fds %s\n", name,
			       sasl_server_unix_fd_agreed(&sasl) ? "agreed" : "not agreed");
			socket_start_framing(sock);
		}

		r = socket_read_frame(sock, &frame);
		if (r == SOCKET_E_AGAIN)
			continue;
		CHECK(r == 0);
		/* A method call of protocol version 1 (Hello or the call itself). */
		CHECK(frame.n_data >= 16);
		CHECK(((uint8_t *)frame.data)[0] == 'l' || ((uint8_t *)frame.data)[0] == 'B');
		CHECK(((uint8_t *)frame.data)[1] == 1);
		CHECK(((uint8_t *)frame.data)[3] == 1);
		CHECK(frame.n_fds == 0);
		printf("# %s sent its first message: %zu bytes\n", name, frame.n_data);
		socket_frame_deinit(&frame);
		ok = true;
		break;
	}

	sasl_server_deinit(&sasl);
	socket_free(sock);
	return ok;
}

static void run_client(const char *name, char *const argv[], const char *sock_path, int lfd,
		       unsigned int flags)
{
	pid_t pid;
	int st;
	bool ok;

	if (access(argv[0], X_OK) != 0) {
		printf("# skip %s: %s not installed\n", name, argv[0]);
		return;
	}
	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		int devnull = open("/dev/null", O_RDWR);

		dup2(devnull, STDOUT_FILENO);
		dup2(devnull, STDERR_FILENO);
		/* No session bus lookups, no autolaunch. */
		unsetenv("DBUS_SESSION_BUS_ADDRESS");
		setenv("DBUS_SYSTEM_BUS_ADDRESS", "unix:path=/nonexistent", 1);
		execv(argv[0], argv);
		_exit(127);
	}
	ok = serve_one(lfd, name, pid, flags);
	kill(pid, SIGTERM);
	CHECK(waitpid(pid, &st, 0) == pid);
	if (!ok)
		fprintf(stderr, "real client %s failed (socket %s)\n", name, sock_path);
	CHECK(ok);
}

static void test_mechanisms(void)
{
	struct sasl_server s;

	/* All three, in dbus-daemon's order; ANONYMOUS listed but not allowed. */
	init(&s, 0);
	sasl_server_set_mechanisms(&s, SASL_MECH_ALL);
	CHECK(feed_n(&s, "\0AUTH\r\n", 7, NULL) == 0);
	expect_out(&s, "REJECTED EXTERNAL DBUS_COOKIE_SHA1 ANONYMOUS\r\n");
	CHECK(feed(&s, "AUTH ANONYMOUS 74657374\r\n") == 0);
	expect_out(&s, "REJECTED EXTERNAL DBUS_COOKIE_SHA1 ANONYMOUS\r\n");
	/* No cookie source: DBUS_COOKIE_SHA1 cannot succeed. */
	CHECK(feed(&s, "AUTH DBUS_COOKIE_SHA1 31303030\r\n") == 0);
	expect_out(&s, "REJECTED EXTERNAL DBUS_COOKIE_SHA1 ANONYMOUS\r\n");
	sasl_server_deinit(&s);

	/* <auth>DBUS_COOKIE_SHA1</auth>: EXTERNAL is not tried at all. */
	init(&s, SASL_SERVER_ALLOW_ANONYMOUS);
	sasl_server_set_mechanisms(&s, SASL_MECH_COOKIE_SHA1);
	CHECK(feed_n(&s, "\0AUTH EXTERNAL 31303030\r\n", 25, NULL) == 0);
	expect_out(&s, "REJECTED DBUS_COOKIE_SHA1\r\n");
	CHECK(feed(&s, "AUTH ANONYMOUS\r\n") == 0);
	expect_out(&s, "REJECTED DBUS_COOKIE_SHA1\r\n");
	sasl_server_deinit(&s);

	CHECK(sasl_mech_from_name("EXTERNAL") == SASL_MECH_EXTERNAL);
	CHECK(sasl_mech_from_name("DBUS_COOKIE_SHA1") == SASL_MECH_COOKIE_SHA1);
	CHECK(sasl_mech_from_name("ANONYMOUS") == SASL_MECH_ANONYMOUS);
	CHECK(sasl_mech_from_name("external") == 0);
	CHECK(sasl_mech_from_name("KERBEROS_V4") == 0);
}

static void test_no_credentials(void)
{
	struct sasl_server s;
	char line[128], hex[64];

	/* TCP: EXTERNAL fails with the uid and with an empty identity. */
	init(&s, SASL_SERVER_NO_CREDENTIALS);
	uid_hex(hex, peer_uid);
	snprintf(line, sizeof(line), "AUTH EXTERNAL %s\r\n", hex);
	CHECK(feed_n(&s, "\0", 1, NULL) == 0);
	CHECK(feed(&s, line) == 0);
	expect_out(&s, "REJECTED EXTERNAL\r\n");
	CHECK(feed(&s, "AUTH EXTERNAL\r\n") == 0);
	expect_out(&s, "DATA\r\n");
	CHECK(feed(&s, "DATA\r\n") == 0);
	expect_out(&s, "REJECTED EXTERNAL\r\n");
	CHECK(!sasl_server_is_authenticated(&s));
	/* No fd passing was offered either. */
	sasl_server_deinit(&s);
}

/* A fake keyring: user "alice" or "4242" is uid 4242, anyone else is refused. */
static int fake_cookie_calls;

static int fake_cookie_source(void *userdata, const char *identity, struct sasl_cookie *c)
{
	fake_cookie_calls++;
	CHECK(userdata == &fake_cookie_calls);
	if (strcmp(identity, "alice") && strcmp(identity, "4242"))
		return SASL_COOKIE_E_REJECTED;
	c->uid = 4242;
	snprintf(c->context, sizeof(c->context), "org_freedesktop_general");
	c->id = 77;
	snprintf(c->secret, sizeof(c->secret), "%s", "0123456789abcdef0123456789abcdef0123456789abcdef");
	return 0;
}

/* The server's DATA line: check it, return the server challenge (hex). */
static void take_cookie_challenge(struct sasl_server *s, char *challenge)
{
	const char *out;
	char text[256];
	size_t n, i;
	unsigned int id;

	out = sasl_server_peek_output(s, &n);
	CHECK(n > 7 && !memcmp(out, "DATA ", 5) && !memcmp(out + n - 2, "\r\n", 2));
	CHECK((n - 7) % 2 == 0 && (n - 7) / 2 < sizeof(text));
	for (i = 0; i < (n - 7) / 2; i++) {
		unsigned int b;

		CHECK(sscanf(out + 5 + 2 * i, "%2x", &b) == 1);
		text[i] = (char)b;
	}
	text[i] = '\0';
	sasl_server_consume_output(s, n);
	CHECK(sscanf(text, "org_freedesktop_general %u %64s", &id, challenge) == 2);
	CHECK(id == 77);
	CHECK(strlen(challenge) == 32);
}

/* Answer a challenge with "CLIENT<sep>HASH", the right hash or a wrong one. */
static void cookie_answer_sep(struct sasl_server *s, const char *challenge, const char *client,
			      bool right, char sep)
{
	char text[512], hash[41], line[1200], hex[1100];

	snprintf(text, sizeof(text), "%s:%s:%s", challenge, client,
		 "0123456789abcdef0123456789abcdef0123456789abcdef");
	sha1_hex(text, strlen(text), hash);
	if (!right)
		hash[0] = hash[0] == '0' ? '1' : '0';
	snprintf(text, sizeof(text), "%s%c%s", client, sep, hash);
	hex_of(hex, text);
	snprintf(line, sizeof(line), "DATA %s\r\n", hex);
	CHECK(feed(s, line) == 0);
}

static void cookie_answer(struct sasl_server *s, const char *challenge, const char *client,
			  bool right)
{
	cookie_answer_sep(s, challenge, client, right, ' ');
}

static void test_cookie_sha1(void)
{
	struct sasl_server s;
	char challenge[65], challenge2[65], hex[64], line[128];

	/* The whole exchange, with the user name as initial response (GDBus). */
	init(&s, SASL_SERVER_NO_CREDENTIALS);
	sasl_server_set_mechanisms(&s, SASL_MECH_ALL);
	sasl_server_set_cookie_source(&s, fake_cookie_source, &fake_cookie_calls);
	hex_of(hex, "alice");
	snprintf(line, sizeof(line), "AUTH DBUS_COOKIE_SHA1 %s\r\n", hex);
	CHECK(feed_n(&s, "\0", 1, NULL) == 0);
	CHECK(feed(&s, line) == 0);
	take_cookie_challenge(&s, challenge);
	cookie_answer(&s, challenge, "c0ffee", true);
	expect_out(&s, ok_line());
	CHECK(sasl_server_is_authenticated(&s));
	CHECK(!sasl_server_is_anonymous(&s));
	CHECK(sasl_server_get_uid(&s) == 4242);
	CHECK(feed(&s, "BEGIN\r\n") == SASL_SERVER_DONE);
	CHECK(sasl_server_get_uid(&s) == 4242);
	sasl_server_deinit(&s);

	/* A decimal uid (libdbus), a wrong hash, then a fresh challenge. */
	init(&s, 0);
	sasl_server_set_mechanisms(&s, SASL_MECH_EXTERNAL | SASL_MECH_COOKIE_SHA1);
	sasl_server_set_cookie_source(&s, fake_cookie_source, &fake_cookie_calls);
	hex_of(hex, "4242");
	snprintf(line, sizeof(line), "AUTH DBUS_COOKIE_SHA1 %s\r\n", hex);
	CHECK(feed_n(&s, "\0", 1, NULL) == 0);
	CHECK(feed(&s, line) == 0);
	take_cookie_challenge(&s, challenge);
	cookie_answer(&s, challenge, "abcd", false);
	expect_out(&s, "REJECTED EXTERNAL DBUS_COOKIE_SHA1\r\n");
	CHECK(!sasl_server_is_authenticated(&s));
	CHECK(feed(&s, line) == 0);
	take_cookie_challenge(&s, challenge2);
	CHECK(strcmp(challenge, challenge2)); /* random, per attempt */
	/* The old challenge does not do. */
	cookie_answer(&s, challenge, "abcd", true);
	expect_out(&s, "REJECTED EXTERNAL DBUS_COOKIE_SHA1\r\n");
	sasl_server_deinit(&s);

	/* Without initial response: no user, rejected at once (no DATA round). */
	init(&s, 0);
	sasl_server_set_mechanisms(&s, SASL_MECH_COOKIE_SHA1);
	sasl_server_set_cookie_source(&s, fake_cookie_source, &fake_cookie_calls);
	CHECK(feed_n(&s, "\0AUTH DBUS_COOKIE_SHA1\r\n", 24, NULL) == 0);
	expect_out(&s, "REJECTED DBUS_COOKIE_SHA1\r\n");
	CHECK(feed(&s, "AUTH DBUS_COOKIE_SHA1 \r\n") == 0);
	expect_out(&s, "REJECTED DBUS_COOKIE_SHA1\r\n");
	/* Bad hex: ERROR, before the challenge and in answer to it. */
	CHECK(feed(&s, "AUTH DBUS_COOKIE_SHA1 616c6963z\r\n") == 0);
	expect_out(&s, "ERROR \"Invalid hex encoding\"\r\n");
	hex_of(hex, "alice");
	snprintf(line, sizeof(line), "AUTH DBUS_COOKIE_SHA1 %s\r\n", hex);
	CHECK(feed(&s, line) == 0);
	take_cookie_challenge(&s, challenge);
	CHECK(feed(&s, "DATA zz\r\n") == 0);
	expect_out(&s, "ERROR \"Invalid hex encoding\"\r\n");
	CHECK(sasl_server_get_state(&s) == SASL_SERVER_STATE_WAIT_DATA);
	/* ... and the right answer still does, separated by a tab. */
	cookie_answer_sep(&s, challenge, "x", true, '\t');
	expect_out(&s, ok_line());
	CHECK(sasl_server_get_uid(&s) == 4242);
	sasl_server_deinit(&s);

	/* A uid as strtoul() with base 0 reads it reaches the source in decimal. */
	{
		static const char *const forms[] = { "+4242", " 4242", "0x1092", "010222", NULL };

		for (size_t i = 0; forms[i]; i++) {
			init(&s, 0);
			sasl_server_set_mechanisms(&s, SASL_MECH_COOKIE_SHA1);
			sasl_server_set_cookie_source(&s, fake_cookie_source, &fake_cookie_calls);
			hex_of(hex, forms[i]);
			snprintf(line, sizeof(line), "AUTH DBUS_COOKIE_SHA1 %s\r\n", hex);
			CHECK(feed_n(&s, "\0", 1, NULL) == 0);
			CHECK(feed(&s, line) == 0);
			take_cookie_challenge(&s, challenge);
			sasl_server_deinit(&s);
		}
	}

	/* Refused user, malformed answers, CANCEL. */
	init(&s, 0);
	sasl_server_set_mechanisms(&s, SASL_MECH_COOKIE_SHA1);
	sasl_server_set_cookie_source(&s, fake_cookie_source, &fake_cookie_calls);
	hex_of(hex, "mallory");
	snprintf(line, sizeof(line), "AUTH DBUS_COOKIE_SHA1 %s\r\n", hex);
	CHECK(feed_n(&s, "\0", 1, NULL) == 0);
	CHECK(feed(&s, line) == 0);
	expect_out(&s, "REJECTED DBUS_COOKIE_SHA1\r\n");
	hex_of(hex, "alice");
	snprintf(line, sizeof(line), "AUTH DBUS_COOKIE_SHA1 %s\r\n", hex);
	CHECK(feed(&s, line) == 0);
	take_cookie_challenge(&s, challenge);
	hex_of(hex, "nospacehere");
	snprintf(line, sizeof(line), "DATA %s\r\n", hex);
	CHECK(feed(&s, line) == 0);
	expect_out(&s, "REJECTED DBUS_COOKIE_SHA1\r\n");
	hex_of(hex, "alice");
	snprintf(line, sizeof(line), "AUTH DBUS_COOKIE_SHA1 %s\r\n", hex);
	CHECK(feed(&s, line) == 0);
	take_cookie_challenge(&s, challenge);
	CHECK(feed(&s, "CANCEL\r\n") == 0);
	expect_out(&s, "REJECTED DBUS_COOKIE_SHA1\r\n");
	/* A user name with a space or control character is not one. */
	hex_of(hex, "a b");
	snprintf(line, sizeof(line), "AUTH DBUS_COOKIE_SHA1 %s\r\n", hex);
	CHECK(feed(&s, line) == 0);
	expect_out(&s, "REJECTED DBUS_COOKIE_SHA1\r\n");
	sasl_server_deinit(&s);

	init(&s, 0);
	sasl_server_set_mechanisms(&s, SASL_MECH_COOKIE_SHA1);
	sasl_server_set_cookie_source(&s, fake_cookie_source, &fake_cookie_calls);
	CHECK(feed_n(&s, "\0AUTH DBUS_COOKIE_SHA1 610062\r\n", 31, NULL) == 0);
	expect_out(&s, "REJECTED DBUS_COOKIE_SHA1\r\n");
	sasl_server_deinit(&s);
	/* Only the identities that are one reached the source. */
	CHECK(fake_cookie_calls == 11);
}

static void test_real_clients(void)
{
	char dir[] = "/tmp/test-sasl-XXXXXX", path[64], addr[128];
	struct address_list list;
	char *connectable = NULL, *unlink_path = NULL;
	int lfd, before;

	before = count_fds();
	CHECK(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/bus", dir);
	snprintf(addr, sizeof(addr), "unix:path=%s", path);
	CHECK(address_list_parse(&list, addr, NULL) == 0);
	CHECK(address_listen(&list.entries[0], NULL, &lfd, &connectable, &unlink_path,
			      NULL) == 0);
	address_list_deinit(&list);

	{
		char a2[160];
		char *argv[] = { "/usr/bin/dbus-send", a2, "--print-reply",
				 "--dest=org.freedesktop.DBus", "/org/freedesktop/DBus",
				 "org.freedesktop.DBus.Peer.Ping", NULL };

		snprintf(a2, sizeof(a2), "--address=%s", addr);
		run_client("dbus-send (libdbus)", argv, path, lfd, SASL_SERVER_UNIX_FD);
		run_client("dbus-send (libdbus)", argv, path, lfd, 0);
	}
	{
		char *argv[] = { "/usr/bin/gdbus", "call", "--address", addr, "--dest",
				 "org.freedesktop.DBus", "--object-path", "/org/freedesktop/DBus",
				 "--method", "org.freedesktop.DBus.Peer.Ping", NULL };

		run_client("gdbus (GDBus)", argv, path, lfd, SASL_SERVER_UNIX_FD);
		run_client("gdbus (GDBus)", argv, path, lfd, 0);
	}
	{
		char a2[160];
		char *argv[] = { "/usr/bin/busctl", a2, "call", "org.freedesktop.DBus",
				 "/org/freedesktop/DBus", "org.freedesktop.DBus.Peer", "Ping",
				 NULL };

		snprintf(a2, sizeof(a2), "--address=%s", addr);
		run_client("busctl (sd-bus)", argv, path, lfd, SASL_SERVER_UNIX_FD);
		run_client("busctl (sd-bus)", argv, path, lfd, 0);
	}

	close(lfd);
	unlink(unlink_path);
	rmdir(dir);
	free(unlink_path);
	free(connectable);
	CHECK(count_fds() == before);
}

int main(void)
{
	peer_uid = 1000;
	test_init();
	test_missing_nul();
	test_external_initial_response();
	test_external_data_exchange();
	test_anonymous();
	test_rejected_list_and_unknown();
	test_cancel_error();
	test_unix_fd();
	test_begin();
	test_pipelined();
	test_malformed();
	test_line_ends();
	test_overlong();
	test_bounds();
	test_output_partial_consume();
	test_mechanisms();
	test_no_credentials();
	test_cookie_sha1();
	test_transcripts();
	/* Also with root's uid: "0" is a valid identity. */
	peer_uid = 0;
	test_transcripts();
	test_real_clients();
	printf("ok\n");
	return 0;
}
