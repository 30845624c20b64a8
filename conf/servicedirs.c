/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The service directories of a configuration: <servicedir>, and the lists
 * <standard_session_servicedirs/> and <standard_system_servicedirs/> stand
 * for, as dbus-daemon 1.14 makes them. See config.h.
 */

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "conf/config.h"
#include "conf/internal.h"
#include "util/macro.h"

void bus_config_servicedirs_clear(struct list_node *dirs)
{
	struct bus_config_servicedir *e, *t;

	list_for_each_entry_safe(e, t, dirs, link) {
		list_unlink(&e->link);
		free(e);
	}
}

/* Whether @dirs has @path. */
bool conf_servicedirs_contain(struct list_node *dirs, const char *path)
{
	struct bus_config_servicedir *e;

	list_for_each_entry(e, dirs, link)
		if (strcmp(e->path, path) == 0)
			return true;
	return false;
}

/* Append @path unless already present (dbus-daemon keeps the first). */
int conf_servicedirs_append(struct list_node *dirs, const char *path, unsigned int flags)
{
	struct bus_config_servicedir *e;
	size_t n;

	if (conf_servicedirs_contain(dirs, path))
		return 0;
	n = strlen(path);
	e = malloc(sizeof(*e) + n + 1);
	if (!e)
		return -ENOMEM;
	e->flags = flags;
	memcpy(e->path, path, n + 1);
	list_append(dirs, &e->link);
	return 0;
}

/* Append DIR/suffix for each non-empty element of the ':'-separated @paths. */
static int servicedirs_append_split(struct list_node *dirs, const char *paths,
				    const char *suffix, unsigned int flags)
{
	const char *p = paths;

	while (*p) {
		size_t n = strcspn(p, ":");

		if (n > 0) {
			_cleanup_free_ char *dir = NULL;
			int r;

			dir = conf_strdup_printf("%.*s%s", (int)n, p, suffix);
			if (!dir)
				return -ENOMEM;
			r = conf_servicedirs_append(dirs, dir, flags);
			if (r < 0)
				return r;
		}
		p += n;
		if (*p == ':')
			p++;
	}
	return 0;
}

/* dbus-daemon's compile-time ${datadir} on Debian and most distributions. */
#define DBUS_DATADIR "/usr/share"

int bus_config_standard_session_servicedirs(struct list_node *dirs)
{
	const char *xdg_runtime_dir = getenv("XDG_RUNTIME_DIR");
	const char *xdg_data_home = getenv("XDG_DATA_HOME");
	const char *xdg_data_dirs = getenv("XDG_DATA_DIRS");
	_cleanup_free_ char *home_share = NULL;
	struct stat st;
	int r;

	/*
	 * dbus-daemon uses $XDG_RUNTIME_DIR/dbus-1/services for transient
	 * services only if XDG_RUNTIME_DIR is ours and not writable by others
	 * (a root bus started with a user's environment must not trust it).
	 * Unlike dbus-daemon we do not create the subdirectories: a missing
	 * service directory is simply empty.
	 */
	if (xdg_runtime_dir && xdg_runtime_dir[0] == '/' && stat(xdg_runtime_dir, &st) == 0 &&
	    S_ISDIR(st.st_mode) && st.st_uid == geteuid() &&
	    !(st.st_mode & (S_IWGRP | S_IWOTH))) {
		_cleanup_free_ char *dir = conf_strdup_printf("%s/dbus-1/services",
							      xdg_runtime_dir);

		if (!dir)
			return -ENOMEM;
		r = conf_servicedirs_append(dirs, dir,
				       BUS_CONFIG_SERVICEDIR_NO_WATCH |
				       BUS_CONFIG_SERVICEDIR_STRICT_NAMING);
		if (r < 0)
			return r;
	}

	if (!xdg_data_home || !xdg_data_home[0]) {
		const char *home = NULL;
		struct passwd pw, *res = NULL;
		char buf[4096];

		if (getpwuid_r(getuid(), &pw, buf, sizeof(buf), &res) == 0 && res)
			home = res->pw_dir;
		if (!home)
			home = getenv("HOME");
		if (home) {
			home_share = conf_path_join(home, ".local/share");
			if (!home_share)
				return -ENOMEM;
		}
		xdg_data_home = home_share;
	}
	if (xdg_data_home) {
		r = servicedirs_append_split(dirs, xdg_data_home, "/dbus-1/services", 0);
		if (r < 0)
			return r;
	}

	if (!xdg_data_dirs)
		xdg_data_dirs = "/usr/local/share:/usr/share";
	r = servicedirs_append_split(dirs, xdg_data_dirs, "/dbus-1/services", 0);
	if (r < 0)
		return r;

	return servicedirs_append_split(dirs, DBUS_DATADIR, "/dbus-1/services", 0);
}

int bus_config_standard_system_servicedirs(struct list_node *dirs)
{
	return servicedirs_append_split(dirs, "/usr/local/share:/usr/share:" DBUS_DATADIR ":/lib",
					"/dbus-1/system-services", 0);
}
