/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/**
 * DOC: D-Bus addresses
 *
 * Parsing of D-Bus server/client addresses (spec "Server Addresses" and
 * "Unix Domain Sockets"): one or more entries separated by ';', each
 * "transport:key=value,key=value" with %-escaped values. The unix, tcp and
 * nonce-tcp transports are implemented; unixexec:, launchd:, systemd: and
 * autolaunch: are recognised and rejected with a message naming them.
 *
 * Unix keys: exactly one of path=, abstract=, tmpdir=, dir=, runtime=yes, plus
 * an optional guid= (32 hex characters). Duplicate keys, a second location
 * key, unknown keys, bad escapes and unescaped bytes outside the
 * optionally-escaped set [-0-9A-Za-z_/.\*] are errors.
 *
 * tcp: and nonce-tcp: keys (the spec's "TCP Sockets" and "Nonce-authenticated
 * TCP Sockets"): host= (default "localhost"), bind= (what to listen on: an
 * address or name, "*" for every interface; default: host), port= (decimal,
 * 0 or absent: a free port), family= ("ipv4" or "ipv6"), guid=, and for
 * connecting to nonce-tcp: noncefile=. Unknown keys are ignored and an
 * unknown family is an error, as dbus-daemon has it.
 *
 * Listening (address_listen()) creates a SOCK_STREAM|SOCK_CLOEXEC|SOCK_NONBLOCK
 * unix socket and produces the connectable address that a server prints,
 * e.g. "unix:path=/tmp/dbus-AbCdEf0123,guid=<32 hex>"; address_listen_tcp()
 * does the same for tcp: and nonce-tcp:.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Positive error code of the parse and listen functions. */
enum {
	_ADDRESS_E_SUCCESS,
	/* Syntax error or unsupported transport; see the error message. */
	ADDRESS_E_INVALID,
	/* The address cannot be used for this purpose (e.g. connecting to
	 * tmpdir=, listening on a path that is in use). */
	ADDRESS_E_UNUSABLE,
};

enum address_kind {
	ADDRESS_UNIX_PATH,	/* unix:path=	listenable, connectable */
	ADDRESS_UNIX_ABSTRACT,	/* unix:abstract= listenable, connectable */
	ADDRESS_UNIX_TMPDIR,	/* unix:tmpdir=	listenable only */
	ADDRESS_UNIX_DIR,	/* unix:dir=	listenable only */
	ADDRESS_UNIX_RUNTIME,	/* unix:runtime=yes listenable only */
	ADDRESS_TCP,		/* tcp:		(address_listen_tcp()) */
	ADDRESS_NONCE_TCP,	/* nonce-tcp:	(address_listen_tcp()) */
};

/**
 * struct address - one parsed address entry
 * @kind:	which location key was given (unix), or the tcp transport
 * @value:	unescaped value of that key (NUL-terminated; NULL for runtime
 *		and tcp)
 * @guid:	value of guid= (32 lowercase-or-uppercase hex chars) or NULL
 * @host, @bind, @port, @family, @noncefile: tcp and nonce-tcp values
 *		(unescaped), NULL when not given
 */
struct address {
	enum address_kind kind;
	char *value;
	char *guid;
	char *host;
	char *bind;
	char *port;
	char *family;
	char *noncefile;
};

/**
 * struct address_list - all entries of an address string, in order
 */
struct address_list {
	struct address *entries;
	size_t n_entries;
};

/* Length of a GUID in hex, without NUL. */
#define ADDRESS_GUID_LEN 32U

/**
 * address_list_parse() - parse an address string
 * @list:	output; release with address_list_deinit() (also on failure)
 * @str:	address string, e.g. "unix:path=/tmp/a;unix:abstract=b"
 * @errorp:	output: on ADDRESS_E_INVALID a malloc()ed message; may be NULL
 *
 * Empty entries (";;" or a trailing ';') are skipped; a string without any
 * entry is an error.
 *
 * Return: 0, ADDRESS_E_INVALID, or -ENOMEM.
 */
int address_list_parse(struct address_list *list, const char *str, char **errorp);
void address_list_deinit(struct address_list *list);

/**
 * address_escape() - escape a value for use in an address
 * @value:	bytes to escape
 * @n:	number of bytes
 *
 * Bytes in [-0-9A-Za-z_/.\*] are kept, every other byte becomes %xx.
 *
 * Return: malloc()ed NUL-terminated string, or NULL on ENOMEM.
 */
char *address_escape(const char *value, size_t n);

/**
 * address_unescape() - unescape one address value
 * @value:	escaped value (not containing ',', ';' or '=' unescaped)
 * @n:	its length
 * @outp:	output: malloc()ed NUL-terminated unescaped value
 * @n_outp:	output: its length (it may contain NUL bytes); may be NULL
 *
 * Return: 0, ADDRESS_E_INVALID (bad %-escape or byte that must be escaped),
 * or -ENOMEM.
 */
int address_unescape(const char *value, size_t n, char **outp, size_t *n_outp);

/**
 * address_generate_guid() - make a fresh random server GUID
 * @guid:	output: ADDRESS_GUID_LEN lowercase hex chars plus NUL
 *
 * Return: 0 or negative errno (getrandom failure).
 */
int address_generate_guid(char guid[ADDRESS_GUID_LEN + 1]);

/**
 * address_listen() - create a listening socket for a server address
 * @a:	parsed address (any kind)
 * @guid:	GUID to put in the connectable address, or NULL for none
 * @fdp:	output: bound, listening SOCK_STREAM|SOCK_CLOEXEC|SOCK_NONBLOCK fd
 * @connectablep: output: malloc()ed connectable address, e.g.
 *		"unix:path=/tmp/dbus-XXXXXXXXXX,guid=..." (escaped)
 * @unlink_pathp: output: malloc()ed filesystem path the caller should
 *		unlink() when it stops listening, or NULL (abstract); may be NULL
 * @errorp:	output: malloc()ed message on positive errors; may be NULL
 *
 * tmpdir= and dir= bind a random "dbus-XXXXXXXXXX" name in the directory
 * (always path-based, never abstract). runtime=yes binds
 * $XDG_RUNTIME_DIR/bus (ADDRESS_E_UNUSABLE if the variable is unset). For
 * path= (and runtime=), a stale socket file nobody listens on is replaced; a
 * live one gives ADDRESS_E_UNUSABLE. Socket files get mode 0777 regardless of
 * the umask, as dbus-daemon does (access control is the bus policy's job).
 *
 * Return: 0, ADDRESS_E_UNUSABLE (with message), or negative errno.
 */
int address_listen(const struct address *a, const char *guid, int *fdp,
		   char **connectablep, char **unlink_pathp, char **errorp);

/* Most sockets one tcp: address listens on (one per address of its host). */
#define ADDRESS_TCP_FDS_MAX 16U
/* Bytes of a nonce-tcp nonce: what a client sends before anything else. */
#define ADDRESS_NONCE_LEN 16U

/**
 * address_listen_tcp() - listen on a tcp: or nonce-tcp: address
 * @a:		parsed address of kind ADDRESS_TCP or ADDRESS_NONCE_TCP
 * @guid:	GUID to put in the connectable address, or NULL for none
 * @fds:	output: room for ADDRESS_TCP_FDS_MAX listening sockets
 *		(SOCK_CLOEXEC|SOCK_NONBLOCK, TCP_NODELAY)
 * @n_fdsp:	output: how many
 * @connectablep: output: malloc()ed connectable address,
 *		"tcp:host=H,port=P[,family=F][,noncefile=N][,guid=G]"
 * @nonce:	output (nonce-tcp): the nonce the clients must send first
 * @noncefilep:	output (nonce-tcp, else NULL): malloc()ed path of the nonce
 *		file, "TMPDIR/dbus_nonce-XXXXXX/nonce" (0600 in a new 0700
 *		directory); the caller removes the file and its directory
 * @errorp:	output: malloc()ed message on positive errors; may be NULL
 *
 * As dbus-daemon does: the name bind= (or host=) is resolved (AI_PASSIVE,
 * AI_ADDRCONFIG, the family= asked for) and every address it yields is
 * listened on; where one of them is in use or not available, the others are
 * still taken. With port 0 the kernel picks the port of the first socket and
 * the others take the same. family= is printed when all sockets have one
 * family. TMPDIR is $TMPDIR, $TMP, $TEMP or /tmp.
 *
 * Return: 0, ADDRESS_E_UNUSABLE (with message: name not resolved, nothing
 * could be bound), or negative errno.
 */
int address_listen_tcp(const struct address *a, const char *guid, int *fds, size_t *n_fdsp,
		       char **connectablep, uint8_t nonce[ADDRESS_NONCE_LEN], char **noncefilep,
		       char **errorp);

/**
 * address_connect() - connect to a connectable address entry
 * @a:	parsed address of kind path or abstract
 * @fdp:	output: connected SOCK_STREAM|SOCK_CLOEXEC socket (blocking)
 *
 * Return: 0, ADDRESS_E_UNUSABLE for listen-only kinds, or negative errno
 * from socket()/connect().
 */
int address_connect(const struct address *a, int *fdp);
