/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The service-file directories of activation: scanned when needed, looked
 * up by name. See activation-internal.h.
 */

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>
#include "broker/activation/activation-internal.h"
#include "dbus-compat/message.h"
#include "dbus-compat/protocol.h"
#include "util/fd.h"

/* ------------------------------------------------------------- services */

/*
 * A service file refused (misnamed in a strict directory): dbus-daemon logs
 * it at its security level, syslog's LOG_AUTH | LOG_NOTICE.
 */
static void services_warn(void *userdata, const char *message)
{
	act_log((struct activation *)userdata, LOG_AUTH | LOG_NOTICE, "%s", message);
}

/* Record the directories' mtimes, to know later whether a rescan can find more. */
static void stamps_take(struct activation *a)
{
	struct bus_config_servicedir *d;
	size_t i = 0;

	clock_gettime(CLOCK_REALTIME, &a->scanned);
	list_for_each_entry(d, &a->servicedirs, link) {
		struct stat st;

		if (i >= a->n_stamps)
			break;
		a->stamps[i].exists = stat(d->path, &st) == 0;
		a->stamps[i].mtime = a->stamps[i].exists ? st.st_mtim : (struct timespec){};
		i++;
	}
}

/*
 * Could a rescan find a new file? Yes if a directory appeared, vanished or
 * changed its mtime, or changed too recently for the mtime to tell (the
 * kernel's timestamps are coarse).
 */
static bool stamps_changed(struct activation *a)
{
	struct bus_config_servicedir *d;
	size_t i = 0;

	list_for_each_entry(d, &a->servicedirs, link) {
		struct stat st;
		bool exists;

		if (i >= a->n_stamps)
			return true;
		exists = stat(d->path, &st) == 0;
		if (exists != a->stamps[i].exists)
			return true;
		if (exists && (st.st_mtim.tv_sec != a->stamps[i].mtime.tv_sec ||
			       st.st_mtim.tv_nsec != a->stamps[i].mtime.tv_nsec ||
			       st.st_mtim.tv_sec + 2 >= a->scanned.tv_sec))
			return true;
		i++;
	}
	return false;
}

static int copy_servicedirs(struct list_node *to, const struct list_node *from, size_t *np)
{
	const struct bus_config_servicedir *d;

	*np = 0;
	if (!from)
		return 0;
	list_for_each_entry(d, from, link) {
		size_t l = strlen(d->path);
		struct bus_config_servicedir *c = malloc(sizeof(*c) + l + 1);

		if (!c)
			return -ENOMEM;
		c->flags = d->flags;
		memcpy(c->path, d->path, l + 1);
		list_append(to, &c->link);
		(*np)++;
	}
	return 0;
}

/*
 * The transient directory ($XDG_RUNTIME_DIR/dbus-1/services, NO_WATCH |
 * STRICT_NAMING) exists from the start, as with dbus-daemon: tools (and
 * systemd generators) write there and then call ReloadConfig.
 */
static void transient_dirs_create(struct activation *a, const struct list_node *dirs)
{
	const unsigned int flags = BUS_CONFIG_SERVICEDIR_NO_WATCH |
				   BUS_CONFIG_SERVICEDIR_STRICT_NAMING;
	const struct bus_config_servicedir *d;

	list_for_each_entry(d, dirs, link) {
		_cleanup_free_ char *parent = NULL;
		char *slash;

		if ((d->flags & flags) != flags)
			continue;
		parent = strdup(d->path);
		if (!parent)
			return;
		slash = strrchr(parent, '/');
		if (!slash || slash == parent)
			continue;
		*slash = '\0';
		if ((mkdir(parent, 0700) < 0 && errno != EEXIST) ||
		    (mkdir(d->path, 0700) < 0 && errno != EEXIST))
			act_log(a, 6, "Cannot create the transient service directory %s: %s",
				d->path, strerror(errno));
	}
}

int activation_configure(struct activation *a, const struct activation_config *config)
{
	struct list_node dirs = LIST_INIT(dirs);
	_cleanup_(bus_services_freep) struct bus_services *services = NULL;
	struct servicedir_stamp *stamps = NULL;
	char *address = NULL, *bus_type = NULL, *helper = NULL;
	size_t n_dirs;
	int r;

	r = copy_servicedirs(&dirs, config->servicedirs, &n_dirs);
	if (r < 0)
		goto fail;
	transient_dirs_create(a, &dirs);
	if (n_dirs) {
		stamps = calloc(n_dirs, sizeof(*stamps));
		if (!stamps) {
			r = -ENOMEM;
			goto fail;
		}
	}
	r = bus_services_load(&services, &dirs, services_warn, a);
	if (r < 0)
		goto fail;
	r = act_strdup_or_null(&address, config->address ? config->address : a->address);
	if (r >= 0)
		r = act_strdup_or_null(&bus_type, config->bus_type);
	if (r >= 0)
		r = act_strdup_or_null(&helper, config->servicehelper);
	if (r < 0)
		goto fail;

	/* Commit: nothing can fail from here. */
	bus_config_servicedirs_clear(&a->servicedirs);
	list_splice_tail(&a->servicedirs, &dirs);
	free(a->stamps);
	a->stamps = stamps;
	a->n_stamps = n_dirs;
	stamps_take(a);
	bus_services_free(a->services);
	a->services = steal_ptr(services);
	free(a->address);
	a->address = address;
	free(a->bus_type);
	a->bus_type = bus_type;
	free(a->servicehelper);
	a->servicehelper = helper;
	a->systemd_activation = config->systemd_activation;
	a->timeout_usec = config->service_start_timeout > 0 ?
			  (uint64_t)config->service_start_timeout * 1000ULL :
			  ACTIVATION_DEFAULT_TIMEOUT_MSEC * 1000ULL;
	a->max_pending = config->max_pending_service_starts > 0 ?
			 (size_t)config->max_pending_service_starts :
			 ACTIVATION_DEFAULT_MAX_PENDING;
	return 0;
fail:
	bus_config_servicedirs_clear(&dirs);
	free(stamps);
	free(address);
	free(bus_type);
	free(helper);
	return r;
}

int activation_set_address(struct activation *a, const char *address)
{
	return act_strdup_or_null(&a->address, address);
}

const struct bus_services *activation_services(const struct activation *a)
{
	return a->services;
}

/* The .service entry of @name; on a miss, rescan if the directories changed (dbus-daemon). */
const struct bus_service *act_lookup_service(struct activation *a, const char *name)
{
	const struct bus_service *s = bus_services_lookup(a->services, name);
	struct bus_services *fresh = NULL;

	/* Unique names never have a .service file: no rescan for them. */
	if (s || name[0] == ':' || !stamps_changed(a))
		return s;
	/* Warnings were logged at the last (re)configuration: do not repeat them. */
	if (bus_services_load(&fresh, &a->servicedirs, NULL, NULL) < 0)
		return NULL;
	bus_services_free(a->services);
	a->services = fresh;
	stamps_take(a);
	return bus_services_lookup(a->services, name);
}

