/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Configuration reload: ReloadConfig / SIGHUP / inotify on the include and
 * service directories, with a debounce timer. See reload.h.
 */

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <time.h>
#include <unistd.h>
#include <systemd/sd-daemon.h>
#include "broker/reload.h"
#include "util/log-fn.h"

#define RELOAD_DEFAULT_DEBOUNCE_USEC (100ULL * 1000)
#define RELOAD_INOTIFY_MASK                                                    \
	(IN_CLOSE_WRITE | IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO |  \
	 IN_ONLYDIR)
/* Bound on the directories watched (the config's lists are bounded too). */
#define RELOAD_WATCHES_MAX 4096

struct config_reload {
	const struct config_reload_ops *ops;
	void *userdata;
	char *config_file;
	struct bus_config_options opts;
	char *selinux_root;

	sd_event *event;
	int inotify_fd;
	sd_event_source *io;
	sd_event_source *timer;		/* debounce; armed while a reload is due */
	uint64_t debounce_usec;
	int *wds;
	size_t n_wds;
	char **paths;			/* directories to watch (kept until attached) */
	size_t n_paths;

	unsigned int n_failures;
};

/* Log through the owner's callback (util/log-fn.h). */
#define reload_log(r, priority, ...) log_fn_printf((r)->ops->log, (r)->userdata, priority, __VA_ARGS__)

static void reload_warn(void *userdata, const char *message)
{
	struct config_reload *r = userdata;

	reload_log(r, 4, "%s", message);
}

int config_reload_new(struct config_reload **rp, const char *config_file,
		      const struct bus_config_options *opts, const struct config_reload_ops *ops,
		      void *userdata)
{
	struct config_reload *r;

	r = calloc(1, sizeof(*r));
	if (!r)
		return -ENOMEM;
	r->ops = ops;
	r->userdata = userdata;
	r->inotify_fd = -1;
	r->debounce_usec = RELOAD_DEFAULT_DEBOUNCE_USEC;
	if (opts)
		r->opts = *opts;
	if (!r->opts.warn) {
		r->opts.warn = reload_warn;
		r->opts.userdata = r;
	}
	if (config_file) {
		r->config_file = strdup(config_file);
		if (!r->config_file)
			goto oom;
	}
	if (r->opts.selinux_root) {
		r->selinux_root = strdup(r->opts.selinux_root);
		if (!r->selinux_root)
			goto oom;
		r->opts.selinux_root = r->selinux_root;
	}
	*rp = r;
	return 0;
oom:
	config_reload_free(r);
	return -ENOMEM;
}

static void paths_clear(struct config_reload *r)
{
	for (size_t i = 0; i < r->n_paths; i++)
		free(r->paths[i]);
	free(r->paths);
	r->paths = NULL;
	r->n_paths = 0;
}

struct config_reload *config_reload_free(struct config_reload *r)
{
	if (!r)
		return NULL;
	sd_event_source_disable_unref(r->io);
	sd_event_source_disable_unref(r->timer);
	sd_event_unref(r->event);
	safe_close(r->inotify_fd);
	free(r->wds);
	paths_clear(r);
	free(r->config_file);
	free(r->selinux_root);
	free(r);
	return NULL;
}

void config_reload_set_debounce(struct config_reload *r, uint64_t usec)
{
	r->debounce_usec = usec;
}

unsigned int config_reload_n_failures(const struct config_reload *r)
{
	return r->n_failures;
}

unsigned int config_reload_n_watches(const struct config_reload *r)
{
	return (unsigned int)r->n_wds;
}

static int watch_add(struct config_reload *r, const char *path)
{
	int wd;

	if (r->n_wds >= RELOAD_WATCHES_MAX)
		return 0;
	wd = inotify_add_watch(r->inotify_fd, path, RELOAD_INOTIFY_MASK);
	if (wd < 0) {
		/* Missing directories are normal (~/.local/share/dbus-1/services). */
		if (errno != ENOENT && errno != ENOTDIR)
			reload_log(r, 6, "Cannot watch \"%s\": %s", path, strerror(errno));
		return 0;
	}
	/* The same directory twice gives the same wd: keep one entry. */
	for (size_t i = 0; i < r->n_wds; i++)
		if (r->wds[i] == wd)
			return 0;
	if (r->n_wds % 16 == 0) {
		int *v = realloc(r->wds, (r->n_wds + 16) * sizeof(*v));

		if (!v) {
			(void)inotify_rm_watch(r->inotify_fd, wd);
			return -ENOMEM;
		}
		r->wds = v;
	}
	r->wds[r->n_wds++] = wd;
	return 0;
}

static int paths_add(char ***pathsp, size_t *np, const char *path)
{
	char **v;

	if (*np >= RELOAD_WATCHES_MAX)
		return 0;
	v = realloc(*pathsp, (*np + 1) * sizeof(*v));
	if (!v)
		return -ENOMEM;
	*pathsp = v;
	v[*np] = strdup(path);
	if (!v[*np])
		return -ENOMEM;
	(*np)++;
	return 0;
}

/* (Re)create the watches from r->paths. */
static int watches_apply(struct config_reload *r)
{
	int ret;

	if (r->inotify_fd < 0)
		return 0;
	/* Start over: removed watches queue IN_IGNORED, which the reader skips. */
	for (size_t i = 0; i < r->n_wds; i++)
		(void)inotify_rm_watch(r->inotify_fd, r->wds[i]);
	r->n_wds = 0;
	for (size_t i = 0; i < r->n_paths; i++) {
		ret = watch_add(r, r->paths[i]);
		if (ret < 0)
			return ret;
	}
	return 0;
}

int config_reload_watch(struct config_reload *r, const struct bus_config *config)
{
	const struct bus_config_string *s;
	const struct bus_config_servicedir *d;
	char **paths = NULL;
	size_t n = 0;
	int ret = 0;

	if (config) {
		list_for_each_entry(s, &config->conf_dirs, link) {
			ret = paths_add(&paths, &n, s->str);
			if (ret < 0)
				goto fail;
		}
		list_for_each_entry(d, &config->servicedirs, link) {
			if (d->flags & BUS_CONFIG_SERVICEDIR_NO_WATCH)
				continue;
			ret = paths_add(&paths, &n, d->path);
			if (ret < 0)
				goto fail;
		}
	}
	paths_clear(r);
	r->paths = paths;
	r->n_paths = n;
	return watches_apply(r);
fail:
	for (size_t i = 0; i < n; i++)
		free(paths[i]);
	free(paths);
	return ret;
}

static int config_reload_do(struct config_reload *r, char **errorp);

/*
 * Type=notify(-reload): systemd sees RELOADING=1 (with the time, which
 * Type=notify-reload requires) before and READY=1 after every reload,
 * successful or not, as dbus-daemon reports them. No-ops without NOTIFY_SOCKET.
 */
int config_reload_run(struct config_reload *r, char **errorp)
{
	struct timespec ts;
	int ret;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	(void)sd_notifyf(0, "RELOADING=1\nMONOTONIC_USEC=%llu\nSTATUS=Reloading configuration",
			 (unsigned long long)ts.tv_sec * 1000000ULL +
			 (unsigned long long)ts.tv_nsec / 1000);
	ret = config_reload_do(r, errorp);
	if (r->ops->reloaded)
		r->ops->reloaded(r->userdata, ret);
	(void)sd_notifyf(0, "READY=1\nSTATUS=%s", ret ? "Configuration reload failed, old one kept" :
			 "Configuration reloaded");
	return ret;
}

static int config_reload_do(struct config_reload *r, char **errorp)
{
	_cleanup_(bus_config_freep) struct bus_config *config = NULL;
	_cleanup_free_ char *error = NULL;
	int ret;

	if (errorp)
		*errorp = NULL;
	/* A pending debounced reload is covered by this one. */
	if (r->timer)
		(void)sd_event_source_set_enabled(r->timer, SD_EVENT_OFF);
	if (!r->config_file)
		return 0;

	ret = bus_config_load(&config, r->config_file, &r->opts, &error);
	if (ret) {
		r->n_failures++;
		if (ret == BUS_CONFIG_E_INVALID) {
			reload_log(r, 4, "Unable to reload configuration: %s",
				   error ? error : "invalid configuration");
		} else {
			reload_log(r, 4, "Unable to reload configuration: %s", strerror(-ret));
			free(error);
			if (asprintf(&error, "Unable to reload configuration: %s",
				     strerror(-ret)) < 0)
				error = NULL;
		}
		if (errorp)
			*errorp = steal_ptr(error);
		return ret == BUS_CONFIG_E_INVALID ? CONFIG_RELOAD_E_INVALID : ret;
	}

	ret = r->ops->apply(r->userdata, config);
	if (ret < 0) {
		r->n_failures++;
		reload_log(r, 4, "Unable to apply the reloaded configuration: %s",
			   strerror(-ret));
		if (errorp && asprintf(errorp, "Unable to apply the reloaded configuration: %s",
				       strerror(-ret)) < 0)
			*errorp = NULL;
		return ret;
	}
	ret = config_reload_watch(r, config);
	if (ret < 0)
		reload_log(r, 4, "Cannot update the watched directories: %s", strerror(-ret));
	/* dbus-daemon's words: log scrapers look for them. */
	reload_log(r, 6, "Reloaded configuration");
	return 0;
}

static int timer_cb(sd_event_source *s, uint64_t usec, void *userdata)
{
	struct config_reload *r = userdata;
	_cleanup_free_ char *error = NULL;

	/* Failures are logged by config_reload_run(). */
	(void)config_reload_run(r, &error);
	return 0;
}

static int schedule_reload(struct config_reload *r)
{
	uint64_t now;
	int ret;

	if (r->timer) {
		int enabled = SD_EVENT_OFF;

		(void)sd_event_source_get_enabled(r->timer, &enabled);
		if (enabled != SD_EVENT_OFF)
			return 0;	/* already due: this change is covered */
	}
	ret = sd_event_now(r->event, CLOCK_MONOTONIC, &now);
	if (ret < 0)
		return ret;
	if (!r->timer)
		return sd_event_add_time(r->event, &r->timer, CLOCK_MONOTONIC,
					 now + r->debounce_usec, 1000, timer_cb, r);
	ret = sd_event_source_set_time(r->timer, now + r->debounce_usec);
	if (ret >= 0)
		ret = sd_event_source_set_enabled(r->timer, SD_EVENT_ONESHOT);
	return ret;
}

static int inotify_cb(sd_event_source *s, int fd, uint32_t revents, void *userdata)
{
	struct config_reload *r = userdata;
	/* Aligned for struct inotify_event. */
	char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
	bool changed = false;

	for (;;) {
		ssize_t l = read(fd, buf, sizeof(buf));

		if (l < 0) {
			if (errno == EINTR)
				continue;
			break;	/* EAGAIN: drained */
		}
		if (l == 0)
			break;
		for (char *p = buf; p < buf + l;) {
			const struct inotify_event *ev = (const struct inotify_event *)p;

			if (!(ev->mask & IN_IGNORED))
				changed = true;
			p += sizeof(*ev) + ev->len;
		}
	}
	if (changed) {
		int ret = schedule_reload(r);

		if (ret < 0)
			reload_log(r, 4, "Cannot schedule a configuration reload: %s",
				   strerror(-ret));
	}
	return 0;
}

int config_reload_attach(struct config_reload *r, sd_event *event)
{
	int ret;

	if (r->event)
		return -EALREADY;
	r->inotify_fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	if (r->inotify_fd < 0)
		return -errno;
	ret = sd_event_add_io(event, &r->io, r->inotify_fd, EPOLLIN, inotify_cb, r);
	if (ret < 0) {
		r->inotify_fd = safe_close(r->inotify_fd);
		return ret;
	}
	r->event = sd_event_ref(event);
	return watches_apply(r);
}
