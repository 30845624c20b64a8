/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/**
 * DOC: SASL server (D-Bus authentication)
 *
 * The server side of the D-Bus authentication protocol (spec section
 * "Authentication Protocol"). A struct sasl_server is a pure state machine: it
 * performs no I/O. The owner feeds it the raw bytes read from the socket with
 * sasl_server_feed() and sends whatever sasl_server_peek_output() returns to
 * the client.
 *
 * Clients pipeline: sd-bus sends "\0AUTH EXTERNAL 31303030\r\nNEGOTIATE_UNIX_FD
 * \r\nBEGIN\r\n" followed by its first D-Bus message in one write. The server
 * therefore stops right after the "\r\n" of BEGIN and tells the caller how many
 * input bytes it consumed; everything after that is the D-Bus message stream
 * and must be handed to the message framing unchanged.
 *
 * Mechanisms: EXTERNAL (the authorization identity, if given, must name the
 * peer uid taken from SO_PEERCRED, in ASCII digits, hex-encoded; an empty
 * identity means "whatever the transport says"; never accepted on a transport
 * without credentials, SASL_SERVER_NO_CREDENTIALS, such as TCP),
 * DBUS_COOKIE_SHA1 (the spec's challenge: the client names a user, the server
 * names a cookie of that user's keyring and a random challenge, the client
 * answers with its own challenge and the SHA-1 of "SERVER:CLIENT:COOKIE"; the
 * keyring is the owner's business, see sasl_server_set_cookie_source()) and
 * ANONYMOUS (accepted only with SASL_SERVER_ALLOW_ANONYMOUS). Which of them are
 * offered (listed in REJECTED, in this order, and tried at all) is set with
 * sasl_server_set_mechanisms(); by default EXTERNAL, plus ANONYMOUS when it is
 * allowed. The state machine follows the spec's server state diagram
 * (WaitingForAuth / WaitingForData / WaitingForBegin), and where the spec
 * leaves a choice it answers as dbus-daemon 1.14 does, reply text included
 * (test/integration/test_sasl_parity.py holds the two side by side):
 *
 * - the first byte must be a NUL, otherwise the server fails at once;
 * - a line ends at "\r\n" only: a lone "\n" is a byte of the line. A line
 *   holding a NUL or a byte above 0x7f gets ERROR. The command is the text
 *   up to the first blank (space or tab); the blanks after it are skipped
 *   and the rest are its arguments, which BEGIN and NEGOTIATE_UNIX_FD ignore;
 * - hex is read up to its end or the first non-hex digit: anything left over
 *   (a second word, a trailing blank) gets ERROR and changes no state; an odd
 *   last digit is the high half of one more byte;
 * - "AUTH" alone and unknown or unoffered mechanisms get "REJECTED <offered
 *   mechanisms>";
 * - "AUTH EXTERNAL" without initial response gets "DATA" and waits for the
 *   client's "DATA" / "DATA <hex>" line; the identity is a uid as strtoul()
 *   reads it with base 0. ANONYMOUS takes an optional UTF-8 trace and
 *   DBUS_COOKIE_SHA1 a user name or uid, both only as initial response;
 * - CANCEL and ERROR get REJECTED while a mechanism is running or after OK,
 *   ERROR also before; CANCEL and DATA before AUTH get ERROR;
 * - NEGOTIATE_UNIX_FD after OK gets AGREE_UNIX_FD if the caller allows fd
 *   passing, ERROR otherwise; before OK it gets ERROR;
 * - BEGIN after OK ends authentication (SASL_SERVER_DONE); BEGIN before OK is
 *   fatal (the spec says disconnect);
 * - other commands get ERROR "Unknown command";
 * - the SASL_REJECTED_MAX-th REJECTED is the last reply, and a line longer
 *   than SASL_LINE_MAX ends the conversation at once, as with dbus-daemon.
 *   Beyond dbus-daemon, so that a client which never reads cannot make the
 *   bus queue replies without bound before it authenticated, the
 *   SASL_ERRORS_MAX-th ERROR is the last reply too, and more than
 *   SASL_INPUT_MAX input bytes end the conversation at once. An ended
 *   conversation is SASL_SERVER_FAILED: the owner disconnects;
 * - ANONYMOUS without SASL_SERVER_ALLOW_ANONYMOUS is REJECTED, where
 *   dbus-daemon answers OK and hangs up at BEGIN: the client learns in the
 *   conversation that the mechanism failed and can try another one.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Longest accepted line, "\r\n" included (dbus-daemon uses the same limit). */
#define SASL_LINE_MAX (16U * 1024U)
/* Total number of input bytes accepted before BEGIN. */
#define SASL_INPUT_MAX (64U * 1024U)
/* REJECTED replies the client gets; the last one ends the conversation (dbus-daemon's 6). */
#define SASL_REJECTED_MAX 6U
/* ERROR replies the client gets; the last one ends the conversation. */
#define SASL_ERRORS_MAX 16U

/* Length of a server GUID: 16 bytes in hex, without the terminating NUL. */
#define SASL_GUID_LEN 32U

/* Flags for sasl_server_init(). */
enum {
	/* Offer and accept the ANONYMOUS mechanism. */
	SASL_SERVER_ALLOW_ANONYMOUS = 1U << 0,
	/* The transport can pass fds: NEGOTIATE_UNIX_FD gets AGREE_UNIX_FD. */
	SASL_SERVER_UNIX_FD = 1U << 1,
	/* The transport has no peer credentials (TCP): EXTERNAL always fails. */
	SASL_SERVER_NO_CREDENTIALS = 1U << 2,
};

/* Mechanisms, for sasl_server_set_mechanisms(). */
enum {
	SASL_MECH_EXTERNAL = 1U << 0,
	SASL_MECH_COOKIE_SHA1 = 1U << 1,
	SASL_MECH_ANONYMOUS = 1U << 2,
	SASL_MECH_ALL = SASL_MECH_EXTERNAL | SASL_MECH_COOKIE_SHA1 | SASL_MECH_ANONYMOUS,
};

/* The SASL_MECH_* bit of a mechanism name ("EXTERNAL", ...), 0 if unknown. */
unsigned int sasl_mech_from_name(const char *name);

/* Longest cookie secret (hex characters) a cookie source may hand out. */
#define SASL_COOKIE_SECRET_MAX 256U
/* Longest cookie context name. */
#define SASL_COOKIE_CONTEXT_MAX 64U

/**
 * struct sasl_cookie - what a cookie source returns for DBUS_COOKIE_SHA1
 * @uid:	the user the client's identity names (the authenticated uid)
 * @context:	the cookie context (keyring file name), NUL-terminated
 * @id:		the id of the cookie offered
 * @secret:	the cookie, as written in the keyring (hex), NUL-terminated
 */
struct sasl_cookie {
	uid_t uid;
	char context[SASL_COOKIE_CONTEXT_MAX + 1];
	uint32_t id;
	char secret[SASL_COOKIE_SECRET_MAX + 1];
};

/* Conditions of a sasl_cookie_fn. */
enum {
	_SASL_COOKIE_E_SUCCESS,
	/* Reject the client: unknown user, one this server cannot vouch for, no usable keyring. */
	SASL_COOKIE_E_REJECTED,
};

/*
 * The keyring side of DBUS_COOKIE_SHA1: @identity is the user name the
 * client wants to authenticate as (as sent: a login name or a decimal uid).
 * Fill @cookie with a recent cookie of that user's keyring. Return 0,
 * SASL_COOKIE_E_REJECTED, or negative errno.
 */
typedef int (*sasl_cookie_fn)(void *userdata, const char *identity, struct sasl_cookie *cookie);

/* Positive results of sasl_server_feed(); 0 means "consumed all, need more". */
enum {
	_SASL_SERVER_E_SUCCESS,
	/* BEGIN was received; the client is authenticated. */
	SASL_SERVER_DONE,
	/* The client broke the protocol or exceeded a bound: disconnect it. */
	SASL_SERVER_FAILED,
};

enum sasl_server_state {
	SASL_SERVER_STATE_WAIT_NUL,
	SASL_SERVER_STATE_WAIT_AUTH,
	SASL_SERVER_STATE_WAIT_DATA,
	SASL_SERVER_STATE_WAIT_BEGIN,
	SASL_SERVER_STATE_DONE,
	SASL_SERVER_STATE_FAILED,
};

/*
 * All fields are private; use the accessors below. The object is embedded by
 * its owner (e.g. a broker connection) and needs sasl_server_deinit().
 */
struct sasl_server {
	enum sasl_server_state state;
	unsigned int flags;
	uid_t peer_uid;
	char guid[SASL_GUID_LEN + 1];

	/* result */
	uid_t uid;
	bool anonymous;
	bool unix_fd;

	/* the SASL_MECH_* bit of the mechanism waiting for DATA, 0 if none */
	unsigned int mech;
	unsigned int mechs;		/* SASL_MECH_* offered */

	/* DBUS_COOKIE_SHA1 */
	sasl_cookie_fn cookie_fn;
	void *cookie_userdata;
	struct sasl_cookie_state *cookie;	/* while the mechanism runs */

	/* bounds */
	unsigned int n_rejected;
	unsigned int n_errors;
	size_t n_input;
	const char *failure;

	/* partial line (without its terminator yet) */
	char *line;
	size_t n_line;

	/* pending replies */
	char *out;
	size_t n_out;
	size_t out_start;
	size_t out_alloc;
};

/**
 * sasl_server_init() - prepare a SASL server for one connection
 * @sasl:	object to initialize (caller-owned memory)
 * @peer_uid:	uid of the peer, from SO_PEERCRED
 * @guid:	server GUID, exactly SASL_GUID_LEN hex characters, sent with OK
 * @flags:	SASL_SERVER_ALLOW_ANONYMOUS, SASL_SERVER_UNIX_FD
 *
 * Return: 0, or -EINVAL if @guid is not 32 hex characters. sasl_server_deinit()
 * is safe to call on an object whose init failed.
 */
int sasl_server_init(struct sasl_server *sasl, uid_t peer_uid, const char *guid,
		     unsigned int flags);

/**
 * sasl_server_set_mechanisms() - choose the mechanisms offered
 * @mechs:	SASL_MECH_* bits; call before the first sasl_server_feed()
 *
 * Offered mechanisms are listed in REJECTED; the others are rejected like
 * unknown ones. ANONYMOUS is still only accepted with
 * SASL_SERVER_ALLOW_ANONYMOUS, DBUS_COOKIE_SHA1 only with a cookie source.
 */
void sasl_server_set_mechanisms(struct sasl_server *sasl, unsigned int mechs);

/* Where DBUS_COOKIE_SHA1 takes its cookies from (see sasl_cookie_fn). */
void sasl_server_set_cookie_source(struct sasl_server *sasl, sasl_cookie_fn fn, void *userdata);

/**
 * sasl_server_deinit() - release the buffers of a SASL server
 * @sasl:	object to release
 *
 * Idempotent; the object may be re-initialized afterwards.
 */
void sasl_server_deinit(struct sasl_server *sasl);

/**
 * sasl_server_feed() - process input bytes from the client
 * @sasl:	SASL server
 * @data:	bytes read from the socket
 * @n_data:	number of bytes at @data
 * @n_consumedp: output: how many bytes of @data were consumed
 *
 * Parses as many complete lines as possible and appends the replies to the
 * output buffer (see sasl_server_peek_output()). Incomplete trailing lines are
 * buffered internally (and count as consumed), so the input may be split at
 * any byte. Processing stops right after the "\r\n" of BEGIN: the bytes of
 * @data behind *@n_consumedp then belong to the D-Bus message stream.
 *
 * Return: 0 if all of @data was consumed and more input is needed;
 *         SASL_SERVER_DONE when BEGIN completed authentication (also on every
 *         later call, consuming nothing);
 *         SASL_SERVER_FAILED if the client must be disconnected (also on every
 *         later call); sasl_server_get_failure() says why;
 *         -ENOMEM.
 */
int sasl_server_feed(struct sasl_server *sasl, const void *data, size_t n_data,
		     size_t *n_consumedp);

/**
 * sasl_server_peek_output() - replies waiting to be sent to the client
 * @sasl:	SASL server
 * @np:	output: number of bytes
 *
 * Return: pointer to the pending reply bytes (complete "\r\n"-terminated lines),
 * valid until the next call on @sasl; NULL with *@np == 0 when nothing is
 * pending. Call sasl_server_consume_output() after queueing them.
 */
const char *sasl_server_peek_output(const struct sasl_server *sasl, size_t *np);

/**
 * sasl_server_consume_output() - drop sent reply bytes
 * @sasl:	SASL server
 * @n:	number of bytes from the front of the output that were taken
 */
void sasl_server_consume_output(struct sasl_server *sasl, size_t n);

/* Authentication completed (BEGIN received). */
bool sasl_server_is_done(const struct sasl_server *sasl);
/* The client must be disconnected. */
bool sasl_server_is_failed(const struct sasl_server *sasl);
/* Human-readable reason for the failure (static string), or NULL. */
const char *sasl_server_get_failure(const struct sasl_server *sasl);
/* OK was sent (authenticated, BEGIN possibly still pending). */
bool sasl_server_is_authenticated(const struct sasl_server *sasl);
/*
 * The authenticated uid (the peer uid for EXTERNAL, the cookie's user for
 * DBUS_COOKIE_SHA1), or (uid_t)-1 if not authenticated or authenticated with
 * ANONYMOUS.
 */
uid_t sasl_server_get_uid(const struct sasl_server *sasl);
/* Authenticated with ANONYMOUS (no identity). */
bool sasl_server_is_anonymous(const struct sasl_server *sasl);
/* NEGOTIATE_UNIX_FD was answered with AGREE_UNIX_FD. */
bool sasl_server_unix_fd_agreed(const struct sasl_server *sasl);
enum sasl_server_state sasl_server_get_state(const struct sasl_server *sasl);
