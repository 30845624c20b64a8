/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Server side of the D-Bus authentication protocol. See sasl.h for the
 * behaviour; this file follows the server state diagram of the specification.
 */

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include "dbus-compat/sasl.h"
#include "dbus-compat/sha1.h"
#include "util/error.h"
#include "util/macro.h"

enum {
	MECH_NONE,
	MECH_EXTERNAL,
	MECH_ANONYMOUS,
	MECH_COOKIE_SHA1,
};

/* Random bytes of the server challenge of DBUS_COOKIE_SHA1 (sent as hex). */
#define COOKIE_CHALLENGE_BYTES 16U

/* DBUS_COOKIE_SHA1 while it runs: the cookie offered and our challenge. */
struct sasl_cookie_state {
	struct sasl_cookie cookie;
	bool challenged;
	char challenge[2 * COOKIE_CHALLENGE_BYTES + 1];
};

/* In the order REJECTED lists them (dbus-daemon's order). */
static const struct {
	const char *name;
	unsigned int bit;
} mechanisms[] = {
	{ "EXTERNAL", SASL_MECH_EXTERNAL },
	{ "DBUS_COOKIE_SHA1", SASL_MECH_COOKIE_SHA1 },
	{ "ANONYMOUS", SASL_MECH_ANONYMOUS },
};

unsigned int sasl_mech_from_name(const char *name)
{
	for (size_t i = 0; i < ARRAY_SIZE(mechanisms); i++)
		if (!strcmp(name, mechanisms[i].name))
			return mechanisms[i].bit;
	return 0;
}

static void cookie_state_free(struct sasl_server *sasl)
{
	if (!sasl->cookie)
		return;
	explicit_bzero(sasl->cookie, sizeof(*sasl->cookie));
	free(sasl->cookie);
	sasl->cookie = NULL;
}

static bool is_hex_char(char c)
{
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

static int hex_value(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return c - 'A' + 10;
}

int sasl_server_init(struct sasl_server *sasl, uid_t peer_uid, const char *guid,
		     unsigned int flags)
{
	size_t i;

	memset(sasl, 0, sizeof(*sasl));
	sasl->state = SASL_SERVER_STATE_FAILED;
	sasl->failure = "not initialized";
	sasl->uid = (uid_t)-1;

	if (!guid || strlen(guid) != SASL_GUID_LEN)
		return -EINVAL;
	for (i = 0; i < SASL_GUID_LEN; i++)
		if (!is_hex_char(guid[i]))
			return -EINVAL;

	memcpy(sasl->guid, guid, SASL_GUID_LEN + 1);
	sasl->peer_uid = peer_uid;
	sasl->flags = flags;
	sasl->mechs = SASL_MECH_EXTERNAL;
	if (flags & SASL_SERVER_ALLOW_ANONYMOUS)
		sasl->mechs |= SASL_MECH_ANONYMOUS;
	sasl->state = SASL_SERVER_STATE_WAIT_NUL;
	sasl->failure = NULL;
	return 0;
}

void sasl_server_set_mechanisms(struct sasl_server *sasl, unsigned int mechs)
{
	sasl->mechs = mechs & SASL_MECH_ALL;
}

void sasl_server_set_cookie_source(struct sasl_server *sasl, sasl_cookie_fn fn, void *userdata)
{
	sasl->cookie_fn = fn;
	sasl->cookie_userdata = userdata;
}

void sasl_server_deinit(struct sasl_server *sasl)
{
	cookie_state_free(sasl);
	free(sasl->line);
	sasl->line = NULL;
	sasl->n_line = 0;
	free(sasl->out);
	sasl->out = NULL;
	sasl->n_out = 0;
	sasl->out_start = 0;
	sasl->out_alloc = 0;
}

static void sasl_fail(struct sasl_server *sasl, const char *why)
{
	cookie_state_free(sasl);
	sasl->state = SASL_SERVER_STATE_FAILED;
	sasl->failure = why;
	sasl->uid = (uid_t)-1;
	sasl->anonymous = false;
	sasl->unix_fd = false;
}

static int sasl_write(struct sasl_server *sasl, const char *line)
{
	size_t n = strlen(line);

	/* Compact before growing: sent bytes at the front are dead. */
	if (sasl->out_start > 0) {
		memmove(sasl->out, sasl->out + sasl->out_start, sasl->n_out - sasl->out_start);
		sasl->n_out -= sasl->out_start;
		sasl->out_start = 0;
	}

	if (sasl->n_out + n + 2 > sasl->out_alloc) {
		size_t alloc = MAX(sasl->out_alloc * 2, (size_t)256);
		char *p;

		while (alloc < sasl->n_out + n + 2)
			alloc *= 2;
		p = realloc(sasl->out, alloc);
		if (!p)
			return -ENOMEM;
		sasl->out = p;
		sasl->out_alloc = alloc;
	}

	memcpy(sasl->out + sasl->n_out, line, n);
	sasl->out[sasl->n_out + n] = '\r';
	sasl->out[sasl->n_out + n + 1] = '\n';
	sasl->n_out += n + 2;
	return 0;
}

/* Count a failed exchange; too many of them end the conversation. */
static void sasl_count_failure(struct sasl_server *sasl)
{
	if (++sasl->n_failures > SASL_FAILURES_MAX)
		sasl_fail(sasl, "too many failed authentication attempts");
}

static int sasl_reject(struct sasl_server *sasl)
{
	char line[64] = "REJECTED";
	int r;

	cookie_state_free(sasl);
	sasl->state = SASL_SERVER_STATE_WAIT_AUTH;
	sasl->mech = MECH_NONE;
	sasl->uid = (uid_t)-1;
	sasl->anonymous = false;
	sasl->unix_fd = false;

	for (size_t i = 0; i < ARRAY_SIZE(mechanisms); i++)
		if (sasl->mechs & mechanisms[i].bit) {
			strcat(line, " ");
			strcat(line, mechanisms[i].name);
		}

	r = sasl_write(sasl, line);
	if (r < 0)
		return r;
	sasl_count_failure(sasl);
	return 0;
}

static int sasl_error(struct sasl_server *sasl, const char *explanation)
{
	char buf[128];
	int r;

	snprintf(buf, sizeof(buf), "ERROR \"%s\"", explanation);
	r = sasl_write(sasl, buf);
	if (r < 0)
		return r;
	sasl_count_failure(sasl);
	return 0;
}

/* Authenticated as @uid ((uid_t)-1 with @anonymous). */
static int sasl_ok(struct sasl_server *sasl, bool anonymous, uid_t uid)
{
	char buf[8 + SASL_GUID_LEN];

	cookie_state_free(sasl);
	sasl->state = SASL_SERVER_STATE_WAIT_BEGIN;
	sasl->mech = MECH_NONE;
	sasl->anonymous = anonymous;
	sasl->uid = anonymous ? (uid_t)-1 : uid;

	snprintf(buf, sizeof(buf), "OK %s", sasl->guid);
	return sasl_write(sasl, buf);
}

/*
 * Decode @n hex characters at @hex into @out (room for n / 2 bytes).
 * Returns the decoded length, or -1 if the input is not valid hex.
 */
static ssize_t hex_decode(const char *hex, size_t n, char *out)
{
	size_t i;

	if (n % 2)
		return -1;
	for (i = 0; i < n; i += 2) {
		if (!is_hex_char(hex[i]) || !is_hex_char(hex[i + 1]))
			return -1;
		out[i / 2] = (char)(hex_value(hex[i]) << 4 | hex_value(hex[i + 1]));
	}
	return (ssize_t)(n / 2);
}

/*
 * The EXTERNAL authorization identity: empty means "the identity the
 * transport established"; otherwise it must name the peer's uid in ASCII
 * decimal. Login names are not resolved (the spec allows refusing them).
 */
static bool external_identity_matches(const struct sasl_server *sasl, const char *id, size_t n)
{
	unsigned long long v = 0;
	size_t i;

	if (n == 0)
		return true;
	/* 20 digits cannot be a uid_t; bounding also prevents overflow. */
	if (n > 19)
		return false;
	for (i = 0; i < n; i++) {
		if (id[i] < '0' || id[i] > '9')
			return false;
		v = v * 10 + (unsigned long long)(id[i] - '0');
	}
	return v == (unsigned long long)sasl->peer_uid;
}

static void hex_encode(const char *in, size_t n, char *out)
{
	static const char digits[] = "0123456789abcdef";

	for (size_t i = 0; i < n; i++) {
		out[2 * i] = digits[(unsigned char)in[i] >> 4];
		out[2 * i + 1] = digits[(unsigned char)in[i] & 15];
	}
	out[2 * n] = '\0';
}

/* Equal strings, in time that does not depend on where they differ. */
static bool secret_equal(const char *a, size_t n_a, const char *b, size_t n_b)
{
	unsigned char d = 0;

	if (n_a != n_b)
		return false;
	for (size_t i = 0; i < n_a; i++)
		d |= (unsigned char)(a[i] ^ b[i]);
	return d == 0;
}

/*
 * DBUS_COOKIE_SHA1, first response: the identity. Ask the cookie source for
 * a cookie of that user and challenge the client with "CONTEXT ID CHALLENGE".
 */
static int cookie_challenge(struct sasl_server *sasl, const char *id, size_t n)
{
	_cleanup_free_ char *identity = NULL;
	struct sasl_cookie_state *st;
	uint8_t rnd[COOKIE_CHALLENGE_BYTES];
	char text[SASL_COOKIE_CONTEXT_MAX + 16 + sizeof(st->challenge)];
	char line[5 + 2 * sizeof(text)];
	size_t got = 0;
	int r;

	/* A user name: printable ASCII, not empty. */
	if (n == 0 || n > 256)
		return sasl_reject(sasl);
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)id[i] <= 0x20 || (unsigned char)id[i] > 0x7e)
			return sasl_reject(sasl);
	identity = strndup(id, n);
	if (!identity)
		return -ENOMEM;

	cookie_state_free(sasl);
	st = calloc(1, sizeof(*st));
	if (!st)
		return -ENOMEM;
	sasl->cookie = st;
	r = sasl->cookie_fn(sasl->cookie_userdata, identity, &st->cookie);
	if (r < 0)
		return r;
	/* SASL_COOKIE_E_REJECTED; any other condition is no cookie either */
	if (r > 0 || !st->cookie.context[0] || !st->cookie.secret[0] ||
	    memchr(st->cookie.context, ' ', strlen(st->cookie.context)))
		return sasl_reject(sasl);

	while (got < sizeof(rnd)) {
		ssize_t k = getrandom(rnd + got, sizeof(rnd) - got, 0);

		if (k < 0) {
			if (errno == EINTR)
				continue;
			return error_origin(-errno);
		}
		got += (size_t)k;
	}
	hex_encode((const char *)rnd, sizeof(rnd), st->challenge);
	st->challenged = true;

	snprintf(text, sizeof(text), "%s %u %s", st->cookie.context, st->cookie.id,
		 st->challenge);
	memcpy(line, "DATA ", 5);
	hex_encode(text, strlen(text), line + 5);
	sasl->mech = MECH_COOKIE_SHA1;
	sasl->state = SASL_SERVER_STATE_WAIT_DATA;
	return sasl_write(sasl, line);
}

/*
 * DBUS_COOKIE_SHA1, second response: "CLIENT-CHALLENGE HASH", the hash being
 * the hex SHA-1 of "SERVER-CHALLENGE:CLIENT-CHALLENGE:COOKIE".
 */
static int cookie_verify(struct sasl_server *sasl, const char *resp, size_t n)
{
	struct sasl_cookie_state *st = sasl->cookie;
	char hex[2 * SHA1_DIGEST_SIZE + 1];
	_cleanup_free_ char *text = NULL;
	const char *client, *hash, *end = resp + n;
	size_t n_client, n_text;
	uid_t uid;

	client = resp;
	for (n_client = 0; n_client < n && resp[n_client] != ' ' && resp[n_client] != '\t';
	     n_client++)
		;
	hash = resp + n_client;
	while (hash < end && (*hash == ' ' || *hash == '\t'))
		hash++;
	if (n_client == 0 || hash == end)
		return sasl_reject(sasl);

	n_text = strlen(st->challenge) + 1 + n_client + 1 + strlen(st->cookie.secret);
	text = malloc(n_text + 1);
	if (!text)
		return -ENOMEM;
	snprintf(text, n_text + 1, "%s:%.*s:%s", st->challenge, (int)n_client, client,
		 st->cookie.secret);
	sha1_hex(text, n_text, hex);
	explicit_bzero(text, n_text);

	if (!secret_equal(hash, (size_t)(end - hash), hex, strlen(hex)))
		return sasl_reject(sasl);
	uid = st->cookie.uid;
	return sasl_ok(sasl, false, uid);
}

/*
 * Feed the response (hex, possibly empty) to the running mechanism. The
 * response fits into a line, so a stack buffer of half a line is enough.
 */
static int sasl_mech_response(struct sasl_server *sasl, unsigned int mech, const char *hex,
			      size_t n)
{
	char buf[SASL_LINE_MAX / 2];
	ssize_t len;

	len = hex_decode(hex, n, buf);
	if (len < 0)
		return sasl_reject(sasl);

	switch (mech) {
	case MECH_EXTERNAL:
		/* No credentials (TCP): there is no identity to vouch for. */
		if ((sasl->flags & SASL_SERVER_NO_CREDENTIALS) ||
		    !external_identity_matches(sasl, buf, (size_t)len))
			return sasl_reject(sasl);
		return sasl_ok(sasl, false, sasl->peer_uid);
	case MECH_ANONYMOUS:
		/* The trace information is informational only (RFC 4505). */
		return sasl_ok(sasl, true, (uid_t)-1);
	case MECH_COOKIE_SHA1:
		if (sasl->cookie && sasl->cookie->challenged)
			return cookie_verify(sasl, buf, (size_t)len);
		return cookie_challenge(sasl, buf, (size_t)len);
	default:
		return sasl_reject(sasl);
	}
}

static int sasl_handle_auth(struct sasl_server *sasl, const char *args, size_t n)
{
	const char *mech_name = args, *resp = NULL, *sp;
	size_t n_mech = n, n_resp = 0;
	unsigned int mech;

	if (n == 0)
		return sasl_reject(sasl); /* "AUTH" alone lists the mechanisms */

	sp = memchr(args, ' ', n);
	if (sp) {
		n_mech = (size_t)(sp - args);
		resp = sp + 1;
		n_resp = n - n_mech - 1;
	}

	if (n_mech == 8 && !memcmp(mech_name, "EXTERNAL", 8) &&
	    (sasl->mechs & SASL_MECH_EXTERNAL))
		mech = MECH_EXTERNAL;
	else if (n_mech == 9 && !memcmp(mech_name, "ANONYMOUS", 9) &&
		 (sasl->mechs & SASL_MECH_ANONYMOUS) &&
		 (sasl->flags & SASL_SERVER_ALLOW_ANONYMOUS))
		mech = MECH_ANONYMOUS;
	else if (n_mech == 16 && !memcmp(mech_name, "DBUS_COOKIE_SHA1", 16) &&
		 (sasl->mechs & SASL_MECH_COOKIE_SHA1) && sasl->cookie_fn)
		mech = MECH_COOKIE_SHA1;
	else
		return sasl_reject(sasl);

	/*
	 * No mechanism has an initial challenge: an initial response (for
	 * DBUS_COOKIE_SHA1 the user name) is processed right away; without one
	 * (or an empty one, "AUTH EXTERNAL "), send an empty challenge and wait
	 * for the client's DATA.
	 */
	if (n_resp > 0)
		return sasl_mech_response(sasl, mech, resp, n_resp);

	sasl->mech = mech;
	sasl->state = SASL_SERVER_STATE_WAIT_DATA;
	return sasl_write(sasl, "DATA");
}

static bool cmd_is(const char *cmd, size_t n_cmd, const char *name)
{
	return strlen(name) == n_cmd && !memcmp(cmd, name, n_cmd);
}

/* Process one line; @line excludes the "\n" but includes the "\r". */
static int sasl_handle_line(struct sasl_server *sasl, const char *line, size_t n)
{
	const char *cmd = line, *args = "", *sp;
	size_t i, n_cmd, n_args = 0;

	if (n == 0 || line[n - 1] != '\r')
		return sasl_error(sasl, "Lines must end with \\r\\n");
	n--;

	/* ASCII only; NUL and other control characters are errors. */
	for (i = 0; i < n; i++)
		if ((unsigned char)line[i] < 0x20 || (unsigned char)line[i] > 0x7e)
			return sasl_error(sasl, "Invalid character in line");

	sp = memchr(line, ' ', n);
	n_cmd = sp ? (size_t)(sp - line) : n;
	if (sp) {
		args = sp + 1;
		n_args = n - n_cmd - 1;
	}

	switch (sasl->state) {
	case SASL_SERVER_STATE_WAIT_AUTH:
		if (cmd_is(cmd, n_cmd, "AUTH"))
			return sasl_handle_auth(sasl, args, n_args);
		if (cmd_is(cmd, n_cmd, "BEGIN")) {
			sasl_fail(sasl, "BEGIN before authentication");
			return 0;
		}
		if (cmd_is(cmd, n_cmd, "ERROR"))
			return sasl_reject(sasl);
		return sasl_error(sasl, "Unknown command or not valid before AUTH");

	case SASL_SERVER_STATE_WAIT_DATA:
		if (cmd_is(cmd, n_cmd, "DATA"))
			return sasl_mech_response(sasl, sasl->mech, args, n_args);
		if (cmd_is(cmd, n_cmd, "BEGIN")) {
			sasl_fail(sasl, "BEGIN before authentication");
			return 0;
		}
		if (cmd_is(cmd, n_cmd, "CANCEL") || cmd_is(cmd, n_cmd, "ERROR"))
			return sasl_reject(sasl);
		return sasl_error(sasl, "Expected DATA");

	case SASL_SERVER_STATE_WAIT_BEGIN:
		if (cmd_is(cmd, n_cmd, "BEGIN") && !sp) {
			sasl->state = SASL_SERVER_STATE_DONE;
			return 0;
		}
		if (cmd_is(cmd, n_cmd, "NEGOTIATE_UNIX_FD") && !sp) {
			if (sasl->flags & SASL_SERVER_UNIX_FD) {
				sasl->unix_fd = true;
				return sasl_write(sasl, "AGREE_UNIX_FD");
			}
			/* A legitimate question, not a failed attempt. */
			return sasl_write(sasl,
					  "ERROR \"fd passing is not supported on this connection\"");
		}
		if (cmd_is(cmd, n_cmd, "CANCEL") || cmd_is(cmd, n_cmd, "ERROR"))
			return sasl_reject(sasl);
		return sasl_error(sasl, "Unknown command or not valid after OK");

	default:
		return 0;
	}
}

static int sasl_append_line(struct sasl_server *sasl, const char *p, size_t n)
{
	if (!sasl->line) {
		sasl->line = malloc(SASL_LINE_MAX);
		if (!sasl->line)
			return -ENOMEM;
	}
	memcpy(sasl->line + sasl->n_line, p, n);
	sasl->n_line += n;
	return 0;
}

int sasl_server_feed(struct sasl_server *sasl, const void *data, size_t n_data,
		     size_t *n_consumedp)
{
	const char *p = data;
	size_t pos = 0;
	int r;

	*n_consumedp = 0;

	while (pos < n_data) {
		const char *nl;
		size_t chunk;

		if (sasl->state == SASL_SERVER_STATE_DONE || sasl->state == SASL_SERVER_STATE_FAILED)
			break;

		if (sasl->state == SASL_SERVER_STATE_WAIT_NUL) {
			sasl->n_input++;
			pos++;
			if (p[pos - 1] != '\0')
				sasl_fail(sasl, "first byte is not NUL");
			else
				sasl->state = SASL_SERVER_STATE_WAIT_AUTH;
			continue;
		}

		nl = memchr(p + pos, '\n', n_data - pos);
		chunk = nl ? (size_t)(nl - (p + pos)) + 1 : n_data - pos;

		if (sasl->n_line + chunk > SASL_LINE_MAX) {
			sasl_fail(sasl, "line too long");
			break;
		}
		if (sasl->n_input + chunk > SASL_INPUT_MAX) {
			sasl_fail(sasl, "too much authentication data");
			break;
		}
		sasl->n_input += chunk;

		if (!nl) {
			r = sasl_append_line(sasl, p + pos, chunk);
			if (r < 0)
				return r;
			pos += chunk;
			break;
		}

		if (sasl->n_line == 0) {
			/* Common case: the whole line is in @data. */
			r = sasl_handle_line(sasl, p + pos, chunk - 1);
		} else {
			r = sasl_append_line(sasl, p + pos, chunk);
			if (r < 0)
				return r;
			r = sasl_handle_line(sasl, sasl->line, sasl->n_line - 1);
			sasl->n_line = 0;
		}
		if (r < 0)
			return r;
		pos += chunk;
	}

	*n_consumedp = pos;
	if (sasl->state == SASL_SERVER_STATE_DONE || sasl->state == SASL_SERVER_STATE_FAILED) {
		/* No more lines will come; do not keep the line buffer around. */
		free(sasl->line);
		sasl->line = NULL;
		sasl->n_line = 0;
	}
	if (sasl->state == SASL_SERVER_STATE_DONE)
		return SASL_SERVER_DONE;
	if (sasl->state == SASL_SERVER_STATE_FAILED)
		return SASL_SERVER_FAILED;
	return 0;
}

const char *sasl_server_peek_output(const struct sasl_server *sasl, size_t *np)
{
	*np = sasl->n_out - sasl->out_start;
	return *np ? sasl->out + sasl->out_start : NULL;
}

void sasl_server_consume_output(struct sasl_server *sasl, size_t n)
{
	sasl->out_start += MIN(n, sasl->n_out - sasl->out_start);
	if (sasl->out_start == sasl->n_out) {
		sasl->out_start = 0;
		sasl->n_out = 0;
	}
}

bool sasl_server_is_done(const struct sasl_server *sasl)
{
	return sasl->state == SASL_SERVER_STATE_DONE;
}

bool sasl_server_is_failed(const struct sasl_server *sasl)
{
	return sasl->state == SASL_SERVER_STATE_FAILED;
}

const char *sasl_server_get_failure(const struct sasl_server *sasl)
{
	return sasl->state == SASL_SERVER_STATE_FAILED ? sasl->failure : NULL;
}

bool sasl_server_is_authenticated(const struct sasl_server *sasl)
{
	return sasl->state == SASL_SERVER_STATE_WAIT_BEGIN ||
	       sasl->state == SASL_SERVER_STATE_DONE;
}

uid_t sasl_server_get_uid(const struct sasl_server *sasl)
{
	if (!sasl_server_is_authenticated(sasl) || sasl->anonymous)
		return (uid_t)-1;
	return sasl->uid;
}

bool sasl_server_is_anonymous(const struct sasl_server *sasl)
{
	return sasl_server_is_authenticated(sasl) && sasl->anonymous;
}

bool sasl_server_unix_fd_agreed(const struct sasl_server *sasl)
{
	return sasl_server_is_authenticated(sasl) && sasl->unix_fd;
}

enum sasl_server_state sasl_server_get_state(const struct sasl_server *sasl)
{
	return sasl->state;
}
