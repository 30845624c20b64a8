/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * at_console detection, as dbus-daemon 1.14 does it on Linux. See console.h.
 */

#include <errno.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <systemd/sd-login.h>
#include "conf/console.h"
#include "util/error.h"
#include "util/macro.h"

static int logind_uid_get_seats(uid_t uid)
{
	return sd_uid_get_seats(uid, 0, NULL);
}

void bus_console_init_default(struct bus_console *console)
{
	const char *dir = secure_getenv(BUS_CONSOLE_AUTH_DIR_ENV);

	*console = (struct bus_console){
		.seats_dir = BUS_CONSOLE_SEATS_DIR,
		.uid_get_seats = logind_uid_get_seats,
	};
	if (dir && *dir) {
		console->seats_dir = NULL;
		console->auth_dir = dir;
	}
}

/* Whether DIR/USERNAME exists for @uid's user name: a bus_console_verdict, or -ENOMEM. */
static int auth_dir_has_user(const char *dir, uid_t uid)
{
	_cleanup_free_ char *buf = NULL, *path = NULL;
	struct passwd pw, *res = NULL;
	size_t sz = 1024;
	int r;

	for (;;) {
		char *n = realloc(buf, sz);

		if (!n)
			return -ENOMEM;
		buf = n;
		r = getpwuid_r(uid, &pw, buf, sz, &res);
		if (r != ERANGE)
			break;
		/* Entries are small; a runaway size means a broken NSS module. */
		if (sz >= 1024 * 1024)
			return BUS_CONSOLE_ABSENT;
		sz *= 2;
	}
	/* Unknown uid or NSS failure: no name, so no file can name it. */
	if (r || !res || !res->pw_name || !*res->pw_name || strchr(res->pw_name, '/'))
		return BUS_CONSOLE_ABSENT;
	if (asprintf(&path, "%s/%s", dir, res->pw_name) < 0)
		return -ENOMEM;
	/* pam_console creates the file; any kind of entry counts, as in dbus. */
	return access(path, F_OK) == 0 ? BUS_CONSOLE_PRESENT : BUS_CONSOLE_ABSENT;
}

int bus_console_check(const struct bus_console *console, uint32_t uid)
{
	if (console->seats_dir && access(console->seats_dir, F_OK) == 0) {
		int (*get)(uid_t) = console->uid_get_seats ? console->uid_get_seats :
								   logind_uid_get_seats;
		int n = get((uid_t)uid);

		/* logind's errno, from its library: this is where it enters ours */
		if (n < 0)
			return error_origin(n);
		return n > 0 ? BUS_CONSOLE_PRESENT : BUS_CONSOLE_ABSENT;
	}
	if (console->auth_dir)
		return auth_dir_has_user(console->auth_dir, (uid_t)uid);
	return BUS_CONSOLE_ABSENT;
}
