/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Server side of the D-Bus authentication protocol. See sasl.h for the
 * behaviour. The file reads top down: the mechanisms, the replies, the three
 * mechanisms' steps, the commands and which of them each state accepts (one
 * table), then the cutting of the input into lines.
 */

#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include "dbus-compat/sasl.h"
#include "dbus-compat/sha1.h"
#include "dbus-compat/validate.h"
#include "util/error.h"
#include "util/macro.h"

/* Random bytes of the server challenge of DBUS_COOKIE_SHA1 (sent as hex). */
#define COOKIE_CHALLENGE_BYTES 16U
/* Longest user name a DBUS_COOKIE_SHA1 client may name. */
#define COOKIE_IDENTITY_MAX 256U

/* DBUS_COOKIE_SHA1 while it runs: the cookie offered and our challenge. */
struct sasl_cookie_state {
	struct sasl_cookie cookie;
	char challenge[2 * COOKIE_CHALLENGE_BYTES + 1];
};

/*
 * A mechanism's step: @data is the decoded response (NUL-terminated after
 * @n bytes), the initial response of AUTH in WaitingForAuth, the argument
 * of DATA in WaitingForData. The step answers with OK, DATA or REJECTED.
 */
typedef int (*mech_step_fn)(struct sasl_server *sasl, const char *data, size_t n);

static int external_step(struct sasl_server *sasl, const char *data, size_t n);
static int cookie_step(struct sasl_server *sasl, const char *data, size_t n);
static int anonymous_step(struct sasl_server *sasl, const char *data, size_t n);

/* In the order REJECTED lists them (dbus-daemon's order). */
static const struct mechanism {
	const char *name;
	unsigned int bit;
	mech_step_fn step;
} mechanisms[] = {
	{ "EXTERNAL", SASL_MECH_EXTERNAL, external_step },
	{ "DBUS_COOKIE_SHA1", SASL_MECH_COOKIE_SHA1, cookie_step },
	{ "ANONYMOUS", SASL_MECH_ANONYMOUS, anonymous_step },
};

unsigned int sasl_mech_from_name(const char *name)
{
	for (size_t i = 0; i < ARRAY_SIZE(mechanisms); i++)
		if (!strcmp(name, mechanisms[i].name))
			return mechanisms[i].bit;
	return 0;
}

/* The offered mechanism named by the @n bytes at @name, NULL if none. */
static const struct mechanism *mechanism_offered(const struct sasl_server *sasl, const char *name,
						 size_t n)
{
	for (size_t i = 0; i < ARRAY_SIZE(mechanisms); i++)
		if ((sasl->mechs & mechanisms[i].bit) && strlen(mechanisms[i].name) == n &&
		    !memcmp(name, mechanisms[i].name, n))
			return &mechanisms[i];
	return NULL;
}

static const struct mechanism *mechanism_of_bit(unsigned int bit)
{
	for (size_t i = 0; i < ARRAY_SIZE(mechanisms); i++)
		if (mechanisms[i].bit == bit)
			return &mechanisms[i];
	return NULL;
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

/* Blanks separate the words of a line: space and tab. */
static bool is_blank(char c)
{
	return c == ' ' || c == '\t';
}

/* Length of the word at @s (up to the first blank or @n). */
static size_t word_len(const char *s, size_t n)
{
	size_t i = 0;

	while (i < n && !is_blank(s[i]))
		i++;
	return i;
}

/* Number of blanks at @s. */
static size_t blanks_len(const char *s, size_t n)
{
	size_t i = 0;

	while (i < n && is_blank(s[i]))
		i++;
	return i;
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

/* ---- replies ----------------------------------------------------------- */

static void sasl_fail(struct sasl_server *sasl, const char *why)
{
	cookie_state_free(sasl);
	sasl->state = SASL_SERVER_STATE_FAILED;
	sasl->failure = why;
	sasl->mech = 0;
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

/* Forget the running mechanism and its result: back to WaitingForAuth. */
static int sasl_reject(struct sasl_server *sasl)
{
	char line[64] = "REJECTED";
	int r;

	cookie_state_free(sasl);
	sasl->state = SASL_SERVER_STATE_WAIT_AUTH;
	sasl->mech = 0;
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
	/* A client that keeps failing is guessing: the last REJECTED ends it. */
	if (++sasl->n_rejected >= SASL_REJECTED_MAX)
		sasl_fail(sasl, "too many failed authentication attempts");
	return 0;
}

/* An ERROR reply changes no state; the last one the bound allows ends it. */
static int sasl_error(struct sasl_server *sasl, const char *explanation)
{
	char buf[128];
	int r;

	snprintf(buf, sizeof(buf), "ERROR \"%s\"", explanation);
	r = sasl_write(sasl, buf);
	if (r < 0)
		return r;
	if (++sasl->n_errors >= SASL_ERRORS_MAX)
		sasl_fail(sasl, "too many errors in the authentication exchange");
	return 0;
}

/* Authenticated as @uid ((uid_t)-1 with @anonymous). */
static int sasl_ok(struct sasl_server *sasl, bool anonymous, uid_t uid)
{
	char buf[8 + SASL_GUID_LEN];

	cookie_state_free(sasl);
	sasl->state = SASL_SERVER_STATE_WAIT_BEGIN;
	sasl->mech = 0;
	sasl->anonymous = anonymous;
	sasl->uid = anonymous ? (uid_t)-1 : uid;

	snprintf(buf, sizeof(buf), "OK %s", sasl->guid);
	return sasl_write(sasl, buf);
}

/* ---- mechanisms -------------------------------------------------------- */

/*
 * Decode the @n hex digits at @hex into @out (room for n / 2 + 2 bytes),
 * NUL-terminated, as dbus-daemon decodes them: an odd last digit is the high
 * half of one more byte. Returns false if a character is not a hex digit.
 */
static bool hex_decode(const char *hex, size_t n, char *out, size_t *n_outp)
{
	for (size_t i = 0; i < n; i++) {
		int v;

		if (!is_hex_char(hex[i]))
			return false;
		v = hex_value(hex[i]);
		if (i % 2 == 0)
			out[i / 2] = (char)(v << 4);
		else
			out[i / 2] = (char)(out[i / 2] | v);
	}
	*n_outp = (n + 1) / 2;
	out[*n_outp] = '\0';
	return true;
}

/*
 * A uid as dbus-daemon reads the identities of EXTERNAL and DBUS_COOKIE_SHA1:
 * all @n bytes of the NUL-terminated @s through strtoul() with base 0 (so
 * " 1000", "+1000" and "0x3e8" name uid 1000). Lenient but safe: the value
 * is only ever compared with a uid the kernel or the keyring vouches for.
 */
static bool parse_uid_number(const char *s, size_t n, unsigned long *valuep)
{
	char *end = NULL;
	unsigned long v;

	if (n == 0)
		return false;
	errno = 0;
	v = strtoul(s, &end, 0);
	if (errno != 0 || end != s + n)
		return false;
	*valuep = v;
	return true;
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

/*
 * EXTERNAL. Without identity in AUTH the client gets an empty challenge, and
 * its DATA (empty or not) is the identity; an empty identity means the one
 * the transport established. Login names are not resolved (neither does
 * dbus-daemon for EXTERNAL).
 */
static int external_step(struct sasl_server *sasl, const char *data, size_t n)
{
	unsigned long v;

	if (n == 0 && sasl->state == SASL_SERVER_STATE_WAIT_AUTH) {
		sasl->mech = SASL_MECH_EXTERNAL;
		sasl->state = SASL_SERVER_STATE_WAIT_DATA;
		return sasl_write(sasl, "DATA");
	}
	/* No credentials (TCP): there is no identity to vouch for. */
	if (sasl->flags & SASL_SERVER_NO_CREDENTIALS)
		return sasl_reject(sasl);
	if (n > 0 && (!parse_uid_number(data, n, &v) || v != (unsigned long)sasl->peer_uid))
		return sasl_reject(sasl);
	return sasl_ok(sasl, false, sasl->peer_uid);
}

/* ANONYMOUS: the optional trace is informational (RFC 4505), but UTF-8. */
static int anonymous_step(struct sasl_server *sasl, const char *data, size_t n)
{
	if (!(sasl->flags & SASL_SERVER_ALLOW_ANONYMOUS) || !validate_utf8(data, n))
		return sasl_reject(sasl);
	return sasl_ok(sasl, true, (uid_t)-1);
}

/*
 * DBUS_COOKIE_SHA1, first response: the user. A uid is passed on to the
 * cookie source in plain decimal, a name as sent. Ask the source for a
 * cookie of that user and challenge the client with "CONTEXT ID CHALLENGE".
 */
static int cookie_challenge(struct sasl_server *sasl, const char *id, size_t n)
{
	char identity[COOKIE_IDENTITY_MAX + 1];
	struct sasl_cookie_state *st;
	uint8_t rnd[COOKIE_CHALLENGE_BYTES];
	char text[SASL_COOKIE_CONTEXT_MAX + 16 + sizeof(st->challenge)];
	char line[5 + 2 * sizeof(text)];
	unsigned long uid;
	size_t got = 0;
	int r;

	if (parse_uid_number(id, n, &uid)) {
		snprintf(identity, sizeof(identity), "%lu", uid);
	} else {
		/* A user name: printable ASCII without blanks, not empty. */
		if (n == 0 || n > COOKIE_IDENTITY_MAX)
			return sasl_reject(sasl);
		for (size_t i = 0; i < n; i++)
			if ((unsigned char)id[i] <= 0x20 || (unsigned char)id[i] > 0x7e)
				return sasl_reject(sasl);
		memcpy(identity, id, n + 1);
	}

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

	snprintf(text, sizeof(text), "%s %u %s", st->cookie.context, st->cookie.id,
		 st->challenge);
	memcpy(line, "DATA ", 5);
	hex_encode(text, strlen(text), line + 5);
	sasl->mech = SASL_MECH_COOKIE_SHA1;
	sasl->state = SASL_SERVER_STATE_WAIT_DATA;
	return sasl_write(sasl, line);
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
 * DBUS_COOKIE_SHA1, second response: "CLIENT-CHALLENGE HASH", the hash being
 * the hex SHA-1 of "SERVER-CHALLENGE:CLIENT-CHALLENGE:COOKIE".
 */
static int cookie_verify(struct sasl_server *sasl, const char *resp, size_t n)
{
	struct sasl_cookie_state *st = sasl->cookie;
	char hex[2 * SHA1_DIGEST_SIZE + 1];
	_cleanup_free_ char *text = NULL;
	const char *hash;
	size_t n_client, n_hash, n_text;

	n_client = word_len(resp, n);
	hash = resp + n_client + blanks_len(resp + n_client, n - n_client);
	n_hash = (size_t)(resp + n - hash);
	if (n_client == 0 || n_hash == 0)
		return sasl_reject(sasl);

	n_text = strlen(st->challenge) + 1 + n_client + 1 + strlen(st->cookie.secret);
	text = malloc(n_text + 1);
	if (!text)
		return -ENOMEM;
	snprintf(text, n_text + 1, "%s:%.*s:%s", st->challenge, (int)n_client, resp,
		 st->cookie.secret);
	sha1_hex(text, n_text, hex);
	explicit_bzero(text, n_text);

	if (!secret_equal(hash, n_hash, hex, strlen(hex)))
		return sasl_reject(sasl);
	return sasl_ok(sasl, false, st->cookie.uid);
}

/* The identity comes with AUTH; the answer to our challenge with DATA. */
static int cookie_step(struct sasl_server *sasl, const char *data, size_t n)
{
	if (!sasl->cookie_fn)
		return sasl_reject(sasl);
	if (sasl->state == SASL_SERVER_STATE_WAIT_AUTH)
		return cookie_challenge(sasl, data, n);
	return cookie_verify(sasl, data, n);
}

/*
 * Decode the hex response and hand it to @mech. The response fits into a
 * line, so a stack buffer of half a line is enough.
 */
static int mechanism_respond(struct sasl_server *sasl, const struct mechanism *mech,
			     const char *hex, size_t n)
{
	char buf[SASL_LINE_MAX / 2 + 2];
	size_t len;

	if (!hex_decode(hex, n, buf, &len))
		return sasl_error(sasl, "Invalid hex encoding");
	return mech->step(sasl, buf, len);
}

/* ---- commands ---------------------------------------------------------- */

enum command {
	CMD_UNKNOWN,
	CMD_AUTH,
	CMD_CANCEL,
	CMD_DATA,
	CMD_BEGIN,
	CMD_ERROR,
	CMD_NEGOTIATE_UNIX_FD,
	_CMD_N,
};

static const char *const command_names[_CMD_N] = {
	[CMD_AUTH] = "AUTH",
	[CMD_CANCEL] = "CANCEL",
	[CMD_DATA] = "DATA",
	[CMD_BEGIN] = "BEGIN",
	[CMD_ERROR] = "ERROR",
	[CMD_NEGOTIATE_UNIX_FD] = "NEGOTIATE_UNIX_FD",
};

/* The replies a client may send by mistake (OK, REJECTED...) are unknown here. */
static enum command command_lookup(const char *word, size_t n)
{
	for (size_t i = 0; i < _CMD_N; i++)
		if (command_names[i] && strlen(command_names[i]) == n &&
		    !memcmp(word, command_names[i], n))
			return (enum command)i;
	return CMD_UNKNOWN;
}

/* "AUTH [MECHANISM [INITIAL-RESPONSE]]" in WaitingForAuth. */
static int cmd_auth(struct sasl_server *sasl, const char *args, size_t n)
{
	const struct mechanism *mech;
	size_t n_mech, skip;

	if (n == 0)
		return sasl_reject(sasl); /* "AUTH" alone lists the mechanisms */

	n_mech = word_len(args, n);
	skip = n_mech + blanks_len(args + n_mech, n - n_mech);
	mech = mechanism_offered(sasl, args, n_mech);
	if (!mech)
		return sasl_reject(sasl);
	return mechanism_respond(sasl, mech, args + skip, n - skip);
}

/* "DATA [RESPONSE]" in WaitingForData. */
static int cmd_data(struct sasl_server *sasl, const char *args, size_t n)
{
	const struct mechanism *mech = mechanism_of_bit(sasl->mech);

	/* Only a running mechanism enters WaitingForData. */
	assert(mech);
	return mechanism_respond(sasl, mech, args, n);
}

static int cmd_reject(struct sasl_server *sasl, const char *args, size_t n)
{
	return sasl_reject(sasl);
}

/* The spec says to disconnect a client that begins unauthenticated. */
static int cmd_begin_too_early(struct sasl_server *sasl, const char *args, size_t n)
{
	sasl_fail(sasl, "BEGIN before authentication");
	return 0;
}

static int cmd_begin(struct sasl_server *sasl, const char *args, size_t n)
{
	sasl->state = SASL_SERVER_STATE_DONE;
	return 0;
}

static int cmd_negotiate_unix_fd(struct sasl_server *sasl, const char *args, size_t n)
{
	if (!(sasl->flags & SASL_SERVER_UNIX_FD))
		return sasl_error(sasl, "Unix FD passing not supported, not authenticated or "
					"otherwise not possible");
	sasl->unix_fd = true;
	return sasl_write(sasl, "AGREE_UNIX_FD");
}

/*
 * What a command does in each state: a handler, or else the text of the
 * ERROR it gets; a command a state does not list gets "Unknown command".
 */
static const struct transition {
	int (*handle)(struct sasl_server *sasl, const char *args, size_t n);
	const char *error;
} transitions[][_CMD_N] = {
	[SASL_SERVER_STATE_WAIT_AUTH] = {
		[CMD_AUTH] = { .handle = cmd_auth },
		[CMD_CANCEL] = { .error = "Not currently in an auth conversation" },
		[CMD_DATA] = { .error = "Not currently in an auth conversation" },
		[CMD_BEGIN] = { .handle = cmd_begin_too_early },
		[CMD_ERROR] = { .handle = cmd_reject },
		[CMD_NEGOTIATE_UNIX_FD] = { .error = "Need to authenticate first" },
	},
	[SASL_SERVER_STATE_WAIT_DATA] = {
		[CMD_AUTH] = { .error = "Sent AUTH while another AUTH in progress" },
		[CMD_CANCEL] = { .handle = cmd_reject },
		[CMD_DATA] = { .handle = cmd_data },
		[CMD_BEGIN] = { .handle = cmd_begin_too_early },
		[CMD_ERROR] = { .handle = cmd_reject },
		[CMD_NEGOTIATE_UNIX_FD] = { .error = "Need to authenticate first" },
	},
	[SASL_SERVER_STATE_WAIT_BEGIN] = {
		[CMD_AUTH] = { .error = "Sent AUTH while expecting BEGIN" },
		[CMD_CANCEL] = { .handle = cmd_reject },
		[CMD_DATA] = { .error = "Sent DATA while expecting BEGIN" },
		[CMD_BEGIN] = { .handle = cmd_begin },
		[CMD_ERROR] = { .handle = cmd_reject },
		[CMD_NEGOTIATE_UNIX_FD] = { .handle = cmd_negotiate_unix_fd },
	},
};

/* Process one line, @n bytes at @line without its "\r\n". */
static int sasl_handle_line(struct sasl_server *sasl, const char *line, size_t n)
{
	const struct transition *t;
	size_t n_cmd, skip;

	assert((size_t)sasl->state < ARRAY_SIZE(transitions));
	for (size_t i = 0; i < n; i++)
		if (line[i] == '\0' || (unsigned char)line[i] > 0x7f)
			return sasl_error(sasl, "Command contained non-ASCII");

	n_cmd = word_len(line, n);
	skip = n_cmd + blanks_len(line + n_cmd, n - n_cmd);
	t = &transitions[sasl->state][command_lookup(line, n_cmd)];
	if (t->handle)
		return t->handle(sasl, line + skip, n - skip);
	return sasl_error(sasl, t->error ? t->error : "Unknown command");
}

/* ---- input ------------------------------------------------------------- */

/*
 * Where the current line ends in the @n bytes at @p: the length up to and
 * including its "\r\n", 0 if it does not end there. @cr_before says whether
 * the part of the line buffered before @p ends in "\r".
 */
static size_t line_end(const char *p, size_t n, bool cr_before)
{
	const char *nl;

	for (size_t pos = 0; (nl = memchr(p + pos, '\n', n - pos)); pos = (size_t)(nl - p) + 1) {
		if (nl > p ? nl[-1] == '\r' : cr_before)
			return (size_t)(nl - p) + 1;
	}
	return 0;
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
		size_t end, chunk;

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

		end = line_end(p + pos, n_data - pos,
			       sasl->n_line > 0 && sasl->line[sasl->n_line - 1] == '\r');
		chunk = end ? end : n_data - pos;

		if (sasl->n_line + chunk > SASL_LINE_MAX) {
			sasl_fail(sasl, "line too long");
			break;
		}
		if (sasl->n_input + chunk > SASL_INPUT_MAX) {
			sasl_fail(sasl, "too much authentication data");
			break;
		}
		sasl->n_input += chunk;

		if (!end) {
			r = sasl_append_line(sasl, p + pos, chunk);
			if (r < 0)
				return r;
			pos += chunk;
			break;
		}

		if (sasl->n_line == 0) {
			/* Common case: the whole line is in @data. */
			r = sasl_handle_line(sasl, p + pos, chunk - 2);
		} else {
			r = sasl_append_line(sasl, p + pos, chunk);
			if (r < 0)
				return r;
			r = sasl_handle_line(sasl, sasl->line, sasl->n_line - 2);
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
