/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/**
 * DOC: Configuration reload
 *
 * struct config_reload re-reads the configuration file for ReloadConfig,
 * SIGHUP and changes in the watched directories, as dbus-daemon does:
 *  - config_reload_run() loads the file (and its includes) again. An invalid
 *    configuration changes nothing: the error ("FILE:LINE: message") is
 *    logged and returned, the old configuration keeps running. A valid one is
 *    handed to ops->apply (limits, policy, service directories: the bus
 *    decides), then the watches follow the new directory lists.
 *  - The watched directories are the <includedir>s that exist and the service
 *    directories without NO_WATCH (dbus-daemon's list). inotify events
 *    (IN_CLOSE_WRITE, IN_CREATE, IN_DELETE, IN_MOVED_FROM, IN_MOVED_TO, queue
 *    overflow) schedule one reload after a quiet delay (debounce, 100 ms by
 *    default): a burst of changes (a package install) gives one reload, not
 *    one per file. dbus-daemon sends itself SIGHUP per event batch instead.
 *
 * The reload is synchronous: the bus keeps serving once it returns, with
 * every connection kept (nothing here touches connections).
 */

#include <stdbool.h>
#include <stdint.h>
#include <systemd/sd-event.h>
#include "conf/config.h"
#include "util/macro.h"

struct config_reload;

/**
 * struct config_reload_ops
 * @apply:	a valid new configuration: apply it. The config stays owned by
 *		the caller of @apply (freed after it returns). Return 0, or
 *		negative errno (reported as the reload's failure; the bus must
 *		then still be consistent).
 * @log:	log a line (syslog priority: 3 err, 4 warning, 6 info); may be NULL
 * @reloaded:	after every reload attempt, applied or not, with the result of
 *		config_reload_run(); may be NULL (dbus-daemon broadcasts
 *		ActivatableServicesChanged at this point, whatever the outcome)
 */
struct config_reload_ops {
	int (*apply)(void *userdata, const struct bus_config *config);
	void (*log)(void *userdata, int priority, const char *text);
	void (*reloaded)(void *userdata, int result);
};

/**
 * config_reload_new() - create the reloader
 * @config_file: the top configuration file (copied); NULL: nothing to reload
 * @opts:	how to load it (copied, including the SELinux root string);
 *		@opts->warn, if NULL, is replaced by ops->log at warning level
 */
int config_reload_new(struct config_reload **rp, const char *config_file,
		      const struct bus_config_options *opts, const struct config_reload_ops *ops,
		      void *userdata);
struct config_reload *config_reload_free(struct config_reload *r);
DEFINE_CLEANUP_FUNC(struct config_reload *, config_reload_free);

/*
 * Create the inotify fd and its source on @event, and watch what
 * config_reload_watch() set. Return 0 or negative errno.
 */
int config_reload_attach(struct config_reload *r, sd_event *event);

/*
 * Watch the directories of @config (call once with the start-up
 * configuration, before or after config_reload_attach(); reloads update the
 * watches themselves). Directories that cannot be watched are skipped (logged
 * at info level). Return 0 or -ENOMEM.
 */
int config_reload_watch(struct config_reload *r, const struct bus_config *config);

/* Positive code of config_reload_run(). */
enum {
	_CONFIG_RELOAD_E_SUCCESS,
	/* The file is invalid: the old configuration is kept. */
	CONFIG_RELOAD_E_INVALID,
};

/**
 * config_reload_run() - reload now (ReloadConfig, SIGHUP)
 * @errorp:	on a positive return, a malloc'ed message for ReloadConfig's
 *		error reply (may be NULL)
 *
 * Return: 0 (applied), CONFIG_RELOAD_E_INVALID (invalid file, old
 * configuration kept, *errorp = "FILE:LINE: message"), or negative errno
 * (loading or applying failed; *errorp describes it when possible).
 */
int config_reload_run(struct config_reload *r, char **errorp);

/* Debounce delay for inotify-triggered reloads (default 100 ms). */
void config_reload_set_debounce(struct config_reload *r, uint64_t usec);

/* Statistics for tests: reloads failed, directories watched. */
unsigned int config_reload_n_failures(const struct config_reload *r);
unsigned int config_reload_n_watches(const struct config_reload *r);
