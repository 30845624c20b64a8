/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * Helpers shared by the files of conf/; not part of the public API. The
 * prefixes say which is which: bus_ names the public objects of the bus
 * configuration (bus_config, bus_policy, bus_service, bus_console, as
 * dbus-daemon's BusConfigParser, BusPolicy... are named), conf_ the private
 * helpers here, which nothing outside conf/ calls.
 */

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include "util/list.h"
#include "util/macro.h"

/* A new formatted string, or NULL on ENOMEM; the one vasprintf() of conf/. */
_printf_(1, 0) char *conf_vstrdup_printf(const char *fmt, va_list ap);
_printf_(1, 2) char *conf_strdup_printf(const char *fmt, ...);
/* @file if absolute, else @dir/@file. NULL on ENOMEM. */
char *conf_path_join(const char *dir, const char *file);
char *conf_dirname(const char *path);
/* Read a whole file of at most @max bytes; -EFBIG if larger, -errno else. */
int conf_read_file(const char *path, size_t max, char **datap, size_t *sizep, dev_t *devp,
		   ino_t *inop);
/* strerror() of a negative errno, knowing conf_read_file()'s -EFBIG. */
const char *conf_strerror(int error);
int conf_strings_append(struct list_node *list, const char *file, unsigned int line,
			const char *s);
enum {
	_CONF_LOOKUP_E_SUCCESS,
	/* No such user or group: dbus-daemon warns and skips what names it. */
	CONF_LOOKUP_E_UNKNOWN,
};
/* 0 and the id if known (decimal numbers are taken as ids), CONF_LOOKUP_E_UNKNOWN, -ENOMEM. */
int conf_lookup_user(const char *name, uint32_t *uidp);
int conf_lookup_group(const char *name, uint32_t *gidp);
/* servicedirs.c: whether @dirs (struct bus_config_servicedir) has @path; append it unless so. */
bool conf_servicedirs_contain(struct list_node *dirs, const char *path);
int conf_servicedirs_append(struct list_node *dirs, const char *path, unsigned int flags);
