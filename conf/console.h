/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/**
 * DOC: at_console - is a user at the console?
 *
 * <policy at_console="true|false"> rules apply to a connection according to
 * whether its uid is "at the console". dbus-daemon 1.14 on Linux decides it
 * this way, and so does bus_console_check():
 *
 *  1. When systemd-logind runs (the directory /run/systemd/seats/ exists),
 *     the answer is whether the user has a session on at least one seat,
 *     active or not: sd_uid_get_seats(uid, 0, NULL) > 0 (dbus passes
 *     require_active = 0). Nothing else is consulted.
 *  2. Otherwise, if a console auth directory is configured, the user is at
 *     the console when DIR/USERNAME exists (pam_console's convention,
 *     /var/run/console/ traditionally).
 *  3. Otherwise nobody is at the console.
 *
 * Debian's dbus 1.14 is built with systemd support and without a console auth
 * directory (its binaries contain no such path), so the default here has none
 * either: without logind every connection gets the at_console="false" rules,
 * exactly as with dbus-daemon on the same machine.
 *
 * When it is evaluated: once per connection when its policy is set up (the
 * end of authentication), and again for every connection when the
 * configuration is reloaded, as dbus-daemon does; never per message. A user
 * who logs in on a seat later is seen by connections made after that, or
 * after the next reload.
 *
 * Test hook: when the environment variable BUS1_BROKER_CONSOLE_AUTH_DIR is set
 * (and the process is not set-id: secure_getenv()), logind is not asked and
 * only that directory decides (step 2). It exists so that tests can put a
 * user at the console without a seat; whoever sets the bus' environment
 * chooses its configuration file anyway, so it grants nothing new.
 */

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#define BUS_CONSOLE_SEATS_DIR "/run/systemd/seats/"
#define BUS_CONSOLE_AUTH_DIR_ENV "BUS1_BROKER_CONSOLE_AUTH_DIR"

/**
 * struct bus_console - how to find out who is at the console
 * @seats_dir:	logind runs when this directory exists; NULL: never ask logind
 * @auth_dir:	console auth directory (DIR/USERNAME exists = at the console);
 *		NULL: none
 * @uid_get_seats: number of seats @uid has a session on, or negative errno;
 *		NULL means sd_uid_get_seats(uid, 0, NULL). Injectable for tests.
 *
 * The strings are borrowed; the object is a plain value that can be copied.
 */
struct bus_console {
	const char *seats_dir;
	const char *auth_dir;
	int (*uid_get_seats)(uid_t uid);
};

/*
 * The detection a bus uses: logind's seats directory and no auth directory,
 * or, with BUS1_BROKER_CONSOLE_AUTH_DIR set, that directory alone.
 */
void bus_console_init_default(struct bus_console *console);

/* The verdict of bus_console_check() and bus_policy_uid_at_console(). */
enum bus_console_verdict {
	BUS_CONSOLE_ABSENT,
	BUS_CONSOLE_PRESENT,
};

/**
 * bus_console_check() - is @uid at the console?
 *
 * Return: BUS_CONSOLE_PRESENT, BUS_CONSOLE_ABSENT, or negative errno when it
 * cannot be decided (logind's answer failed). A uid without a passwd entry
 * is not at the console by the auth directory (there is no name to look for).
 */
int bus_console_check(const struct bus_console *console, uint32_t uid);
