/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * libFuzzer target for the SASL server. Input layout: byte 0 = flags (bit 0
 * ANONYMOUS, bit 1 UNIX_FD, bit 2 peer uid 0 instead of 1000, bit 3 all
 * mechanisms with a fixed DBUS_COOKIE_SHA1 cookie source, bit 4 no transport
 * credentials), byte 1 = seed of the chunking, the rest = bytes from the
 * client. The stream is fed once in one piece and once in pseudo-random
 * chunks; both runs must agree exactly (result, consumed bytes, output but
 * for the random cookie challenges, uid), and the invariants of sasl.h must
 * hold.
 */

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "dbus-compat/sasl.h"
#include "check.h"

/* Chunks of 1..16 bytes, biased to tiny ones. */
#define MIN_CHUNK(seed, left) ((size_t)((seed) % 16 + 1) < (left) ? (size_t)((seed) % 16 + 1) : (left))

static const char guid[] = "00112233445566778899aabbccddeeff";

struct run {
	int r;
	size_t consumed;
	char *out;
	size_t n_out;
	uid_t uid;
	bool fd, anon;
};

/* Every reply line is one the server can produce. */
static void check_output(const char *out, size_t n)
{
	size_t pos = 0;

	while (pos < n) {
		const char *nl = memchr(out + pos, '\n', n - pos);
		size_t len;

		CHECK(nl);
		len = (size_t)(nl - (out + pos)) + 1;
		CHECK(len >= 2 && out[pos + len - 2] == '\r');
		CHECK(!strncmp(out + pos, "OK ", 3) || !strncmp(out + pos, "REJECTED ", 9) ||
		      !strncmp(out + pos, "ERROR ", 6) || !strncmp(out + pos, "DATA\r\n", 6) ||
		      !strncmp(out + pos, "DATA ", 5) ||
		      !strncmp(out + pos, "AGREE_UNIX_FD\r\n", 15));
		pos += len;
	}
}

/* The challenges of "DATA <hex>" lines are random: blank them for comparing. */
static void blank_challenges(char *out, size_t n)
{
	size_t pos = 0;

	while (pos < n) {
		char *nl = memchr(out + pos, '\n', n - pos);
		size_t len = (size_t)(nl - (out + pos)) + 1;

		if (len > 7 && !strncmp(out + pos, "DATA ", 5))
			memset(out + pos + 5, '0', len - 7);
		pos += len;
	}
}

static int fixed_cookie(void *userdata, const char *identity, struct sasl_cookie *c)
{
	(void)userdata;
	if (strcmp(identity, "1000") && strcmp(identity, "alice"))
		return SASL_COOKIE_E_REJECTED;
	c->uid = 1000;
	strcpy(c->context, "org_freedesktop_general");
	c->id = 1;
	strcpy(c->secret, "00112233445566778899aabbccddeeff0011223344556677");
	return 0;
}


/*
 * The input taken ends with a line "BEGIN", the command alone or followed by
 * a blank and anything (dbus-daemon ignores BEGIN's arguments).
 */
static bool ends_with_begin(const uint8_t *data, size_t n)
{
	size_t start = n - 2;

	if (n < 7 || memcmp(data + n - 2, "\r\n", 2))
		return false;
	while (start > 0 && !(data[start - 1] == '\n' && start >= 2 && data[start - 2] == '\r'))
		start--;
	if (start == 0 && data[0] == '\0')
		start = 1;
	if (n - 2 - start < 5 || memcmp(data + start, "BEGIN", 5))
		return false;
	return n - 2 - start == 5 || data[start + 5] == ' ' || data[start + 5] == '\t';
}
static void run(struct run *res, unsigned int flags, bool cookie, uid_t peer, const uint8_t *data,
		size_t n, uint32_t seed)
{
	struct sasl_server s;
	size_t pos = 0, cap = 0;
	int r = 0;

	CHECK(sasl_server_init(&s, peer, guid, flags) == 0);
	if (cookie) {
		sasl_server_set_mechanisms(&s, SASL_MECH_ALL);
		sasl_server_set_cookie_source(&s, fixed_cookie, NULL);
	}
	res->out = NULL;
	res->n_out = 0;

	while (pos < n) {
		size_t chunk = n - pos, c, k;
		const char *o;

		if (seed) {
			seed ^= seed << 13;
			seed ^= seed >> 17;
			seed ^= seed << 5;
			chunk = MIN_CHUNK(seed, n - pos);
		}
		r = sasl_server_feed(&s, data + pos, chunk, &c);
		CHECK(r >= 0);
		CHECK(c <= chunk);
		pos += c;
		o = sasl_server_peek_output(&s, &k);
		if (k) {
			if (res->n_out + k > cap) {
				cap = (res->n_out + k) * 2;
				res->out = realloc(res->out, cap);
				CHECK(res->out);
			}
			memcpy(res->out + res->n_out, o, k);
			res->n_out += k;
			sasl_server_consume_output(&s, k);
		}
		if (r)
			break;
		CHECK(c == chunk);
	}

	CHECK(sasl_server_is_done(&s) == (r == SASL_SERVER_DONE));
	CHECK(sasl_server_is_failed(&s) == (r == SASL_SERVER_FAILED));
	if (r == SASL_SERVER_DONE) {
		CHECK(ends_with_begin(data, pos));
		CHECK(sasl_server_is_authenticated(&s));
		/* EXTERNAL: the peer; DBUS_COOKIE_SHA1: the cookie's user. */
		CHECK(sasl_server_is_anonymous(&s) ||
		      (sasl_server_get_uid(&s) == peer && !(flags & SASL_SERVER_NO_CREDENTIALS)) ||
		      (cookie && sasl_server_get_uid(&s) == 1000));
	}
	if (r == SASL_SERVER_FAILED)
		CHECK(sasl_server_get_failure(&s));
	if (sasl_server_is_anonymous(&s))
		CHECK(flags & SASL_SERVER_ALLOW_ANONYMOUS);
	if (sasl_server_unix_fd_agreed(&s))
		CHECK(flags & SASL_SERVER_UNIX_FD);
	/* Input is bounded, so is the output. */
	CHECK(pos <= SASL_INPUT_MAX + 1);
	CHECK(res->n_out <= 64 * 1024);

	res->r = r;
	res->consumed = pos;
	res->uid = sasl_server_get_uid(&s);
	res->fd = sasl_server_unix_fd_agreed(&s);
	res->anon = sasl_server_is_anonymous(&s);
	check_output(res->out, res->n_out);
	sasl_server_deinit(&s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct run a, b;
	unsigned int flags = 0;
	uid_t peer;

	if (size < 2)
		return 0;
	if (data[0] & 1)
		flags |= SASL_SERVER_ALLOW_ANONYMOUS;
	if (data[0] & 2)
		flags |= SASL_SERVER_UNIX_FD;
	peer = (data[0] & 4) ? 0 : 1000;
	if (data[0] & 16)
		flags |= SASL_SERVER_NO_CREDENTIALS;

	run(&a, flags, data[0] & 8, peer, data + 2, size - 2, 0);
	run(&b, flags, data[0] & 8, peer, data + 2, size - 2, data[1] * 2654435761U + 1);
	blank_challenges(a.out, a.n_out);
	blank_challenges(b.out, b.n_out);

	CHECK(a.r == b.r);
	CHECK(a.consumed == b.consumed);
	CHECK(a.n_out == b.n_out);
	CHECK(!a.n_out || !memcmp(a.out, b.out, a.n_out));
	CHECK(a.uid == b.uid && a.fd == b.fd && a.anon == b.anon);
	free(a.out);
	free(b.out);
	return 0;
}
