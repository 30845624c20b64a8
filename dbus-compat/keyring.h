/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/**
 * DOC: DBUS_COOKIE_SHA1 keyrings (server side)
 *
 * The cookie files of the D-Bus specification ("DBUS_COOKIE_SHA1"): a user's
 * directory ~/.dbus-keyrings holds one file per cookie context, each line
 * "ID CREATION-TIME COOKIE" (a non-negative 32-bit integer, seconds since the
 * epoch, the secret in hex). A client proves that it is the user by reading
 * the cookie the server names. What this module does, as the specification
 * asks of servers:
 *
 * - the directory must be a directory (not a symlink) owned by this process'
 *   effective uid and accessible by nobody else (no group or other bits); a
 *   missing one is created with mode 0700; any other is not used at all;
 * - cookies older than KEYRING_EXPIRE_SECONDS, or more than
 *   KEYRING_FUTURE_SECONDS in the future, are ignored and dropped when the
 *   file is rewritten; at most KEYRING_MAX_COOKIES are read;
 * - a cookie younger than KEYRING_NEW_SECONDS is offered; without one, a new
 *   cookie (24 random bytes) is added under the lock file "CONTEXT.lock"
 *   (created with O_EXCL; retried for up to KEYRING_LOCK_WAIT_MS, then taken
 *   as stale and replaced) and the file is saved atomically (a 0600 temporary
 *   file renamed over it). Only servers write the file; clients just read it.
 *
 * The window between KEYRING_NEW_SECONDS and KEYRING_EXPIRE_SECONDS is the
 * time a client has to finish authenticating with an offered cookie.
 * These are the figures of libdbus, so that both kinds of servers may share
 * one keyring.
 */

#include <stdbool.h>
#include <stdint.h>

/* The context libdbus servers (and dbus-daemon) use. */
#define KEYRING_CONTEXT_DEFAULT "org_freedesktop_general"
#define KEYRING_NEW_SECONDS (5 * 60)
#define KEYRING_EXPIRE_SECONDS (KEYRING_NEW_SECONDS + 2 * 60)
#define KEYRING_FUTURE_SECONDS (5 * 60)
#define KEYRING_MAX_COOKIES 256
#define KEYRING_LOCK_WAIT_MS 1000
/* Longest cookie (hex characters) read from a file; ours are 48. */
#define KEYRING_SECRET_MAX 256U

enum {
	_KEYRING_E_SUCCESS,
	/* The directory or file cannot be used (see the rules above). */
	KEYRING_E_UNUSABLE,
};

struct keyring_cookie {
	uint32_t id;
	int64_t created;
	char secret[KEYRING_SECRET_MAX + 1];	/* hex, NUL-terminated */
};

/*
 * Whether @context may name a keyring file: non-empty ASCII without '/',
 * '\\', '.', blanks, CR or LF (the specification's rule).
 */
bool keyring_context_is_valid(const char *context);

/**
 * keyring_get_cookie() - the cookie a server offers to a client
 * @dir:	the keyring directory ("HOME/.dbus-keyrings")
 * @context:	the cookie context (file name), keyring_context_is_valid()
 * @now:	the current time, seconds since the epoch
 * @cookie:	output
 *
 * Return: 0; KEYRING_E_UNUSABLE (the directory is not private, the file
 * cannot be written, the lock cannot be taken); negative errno. The secret
 * is wiped from every buffer but @cookie.
 */
int keyring_get_cookie(const char *dir, const char *context, int64_t now,
		       struct keyring_cookie *cookie);
