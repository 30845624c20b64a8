/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The bus object: configuration, listeners, the event loop and the
 * once-per-iteration flush of output. See bus.h.
 */

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>
#include "broker/bus.h"
#include "broker/connection.h"
#include "broker/listener.h"
#include "broker/log.h"
#include "broker/match.h"
#include "broker/name.h"
#include "broker/reply.h"
#include "broker/router.h"
#include "broker/user.h"
#include "conf/config.h"
#include "dbus-compat/address.h"
#include "dbus-compat/protocol.h"

/*
 * Whatever the configuration says, one connection's output queue never holds
 * more than this: a client that stops reading is disconnected at this point
 * instead of making the bus grow (session.conf allows 1 GB).
 */
#define BUS_QUEUE_BYTES_CAP (256ULL * 1024 * 1024)
#define BUS_QUEUE_FDS_CAP 1024ULL

static int read_machine_id(char id[33])
{
	static const char *const paths[] = { "/etc/machine-id", "/var/lib/dbus/machine-id" };
	size_t i;

	for (i = 0; i < ARRAY_SIZE(paths); i++) {
		char buf[64];
		ssize_t l;
		int fd = open(paths[i], O_RDONLY | O_CLOEXEC);

		if (fd < 0)
			continue;
		l = read(fd, buf, sizeof(buf) - 1);
		close(fd);
		if (l < 32)
			continue;
		memcpy(id, buf, 32);
		id[32] = '\0';
		return 0;
	}
	return -ENOENT;
}

static void bus_config_warn(void *userdata, const char *message)
{
	log_warn("%s", message);
}

/* Apply the parts of a configuration that can change at runtime. */
static void bus_apply_config(struct bus *bus, const struct bus_config *config)
{
	if (config)
		bus->limits = config->limits;
	else
		bus_config_limits_init(&bus->limits);
	bus->max_queued_bytes = MIN((unsigned long long)bus->limits.max_outgoing_bytes,
				    BUS_QUEUE_BYTES_CAP);
	bus->max_queued_fds = MIN((unsigned long long)bus->limits.max_outgoing_unix_fds,
				  BUS_QUEUE_FDS_CAP);
	/* One message of the largest allowed size must always fit. */
	if (bus->max_queued_bytes < (unsigned long long)bus->limits.max_message_size)
		bus->max_queued_bytes = MIN((unsigned long long)bus->limits.max_message_size,
					    BUS_QUEUE_BYTES_CAP);
	if (bus->max_queued_fds < (unsigned long long)bus->limits.max_message_unix_fds)
		bus->max_queued_fds = MIN((unsigned long long)bus->limits.max_message_unix_fds,
					  (unsigned long long)DC_MAX_UNIX_FDS);
	if (bus->replies)
		bus->replies->max_per_caller = (size_t)bus->limits.max_replies_per_connection;
	if (config) {
		struct bus_services *services = NULL;

		if (bus_services_load(&services, &config->servicedirs, bus_config_warn, NULL) >= 0) {
			bus_services_free(bus->services);
			bus->services = services;
		}
	}
}

static int bus_set_error(struct bus *bus, char *msg)
{
	free(bus->error);
	bus->error = msg;
	return 1;
}

static int bus_add_listener(struct bus *bus, const char *address)
{
	struct listener *l = NULL;
	char *err = NULL, *joined;
	int r;

	r = listener_new(&l, bus, address, &err);
	if (r)
		return r < 0 ? r : bus_set_error(bus, err);
	list_append(&bus->listeners, &l->link);
	if (bus->address) {
		if (asprintf(&joined, "%s;%s", bus->address, l->address) < 0)
			return -ENOMEM;
		free(bus->address);
		bus->address = joined;
	} else {
		bus->address = strdup(l->address);
		if (!bus->address)
			return -ENOMEM;
	}
	return 0;
}

/* More connections need more fds: raise the soft limit to the hard one. */
static void raise_fd_limit(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		(void)setrlimit(RLIMIT_NOFILE, &rl);
	}
}

int bus_new(struct bus **busp, const struct bus_options *opts)
{
	struct bus *bus;
	const struct bus_config *config = opts->config;
	struct user_limits ulimits;
	int r;

	bus = calloc(1, sizeof(*bus));
	if (!bus)
		return -ENOMEM;
	*busp = bus;
	list_init(&bus->listeners);
	list_init(&bus->connections);
	list_init(&bus->flush_list);
	list_init(&bus->monitors);
	list_init(&bus->dead_list);
	list_init(&bus->overflow_list);
	bus->uid = getuid();
	bus->pid = getpid();
	bus->systemd_activation = opts->systemd_activation;

	r = address_generate_guid(bus->guid);
	if (r < 0)
		return r;
	if (read_machine_id(bus->machine_id) < 0)
		memcpy(bus->machine_id, bus->guid, sizeof(bus->machine_id));
	if (opts->config_file) {
		bus->config_file = strdup(opts->config_file);
		if (!bus->config_file)
			return -ENOMEM;
	}
	if (config && config->type) {
		bus->bus_type = strdup(config->type);
		if (!bus->bus_type)
			return -ENOMEM;
	}
	bus->allow_anonymous = config && config->allow_anonymous;

	if (bus->bus_type && !strcmp(bus->bus_type, "system"))
		user_limits_init_system(&ulimits);
	else
		user_limits_init_session(&ulimits);
	r = user_registry_new(&bus->users, &ulimits);
	if (r < 0)
		return r;
	r = name_registry_new(&bus->names, router_name_event, bus);
	if (r < 0)
		return r;
	r = match_registry_new(&bus->matches);
	if (r < 0)
		return r;
	r = match_registry_new(&bus->monitor_matches);
	if (r < 0)
		return r;
	bus_apply_config(bus, config);
	r = reply_registry_new(&bus->replies, (size_t)bus->limits.max_replies_per_connection, 0);
	if (r < 0)
		return r;

	raise_fd_limit();

	if (opts->address) {
		r = bus_add_listener(bus, opts->address);
		if (r)
			return r;
	} else if (config) {
		struct bus_config_string *s;

		list_for_each_entry(s, &config->listen, link) {
			r = bus_add_listener(bus, s->str);
			if (r)
				return r;
		}
	}
	if (!bus->address) {
		char *msg = strdup("no address to listen on (no <listen> and no --address)");

		return msg ? bus_set_error(bus, msg) : -ENOMEM;
	}
	return 0;
}

static void bus_free_dead(struct bus *bus)
{
	while (!list_is_empty(&bus->dead_list)) {
		struct connection *c = list_first_entry(&bus->dead_list, struct connection,
							 dead_link);

		connection_free(c);
	}
}

struct bus *bus_free(struct bus *bus)
{
	if (!bus)
		return NULL;
	/* Closing emits signals to the remaining ones; that is harmless at exit. */
	while (!list_is_empty(&bus->connections)) {
		struct connection *c = list_first_entry(&bus->connections, struct connection,
							 bus_link);

		connection_close(c, NULL);
	}
	bus_free_dead(bus);
	while (!list_is_empty(&bus->listeners))
		listener_free(list_first_entry(&bus->listeners, struct listener, link));
	bus->flush = sd_event_source_disable_unref(bus->flush);
	bus->sig_term = sd_event_source_disable_unref(bus->sig_term);
	bus->sig_int = sd_event_source_disable_unref(bus->sig_int);
	bus->sig_hup = sd_event_source_disable_unref(bus->sig_hup);
	bus->event = sd_event_unref(bus->event);
	if (bus->replies)
		reply_registry_free(bus->replies);
	if (bus->matches)
		match_registry_free(bus->matches);
	if (bus->monitor_matches)
		match_registry_free(bus->monitor_matches);
	if (bus->names)
		name_registry_free(bus->names);
	if (bus->users)
		user_registry_free(bus->users);
	bus_services_free(bus->services);
	for (size_t i = 0; i < bus->n_activation_env; i++)
		free(bus->activation_env[i]);
	free(bus->activation_env);
	free(bus->address);
	free(bus->error);
	free(bus->config_file);
	free(bus->bus_type);
	free(bus);
	return NULL;
}

const char *bus_get_address(struct bus *bus)
{
	return bus->address;
}

const char *bus_get_error(struct bus *bus)
{
	return bus && bus->error ? bus->error : "unknown error";
}

struct connection *bus_resolve(struct bus *bus, const char *name)
{
	struct name_owner *o = name_registry_resolve(bus->names, name);
	struct connection *c;

	if (!o)
		return NULL;
	c = container_of(o, struct connection, owner);
	return c->closed ? NULL : c;
}

int bus_accept(struct bus *bus, int fd)
{
	struct connection *conn;

	if (bus->n_incomplete >= (unsigned int)bus->limits.max_incomplete_connections) {
		/* dbus-daemon drops a connection too: here the new one. */
		log_warn("too many incomplete connections (max_incomplete_connections=%lld)",
			 (long long)bus->limits.max_incomplete_connections);
		close(fd);
		return 0;
	}
	return connection_new(&conn, bus, fd);
}

void bus_schedule_flush(struct bus *bus, struct connection *conn)
{
	if (conn && !list_node_is_linked(&conn->flush_link))
		list_append(&bus->flush_list, &conn->flush_link);
	if (bus->flush)
		sd_event_source_set_enabled(bus->flush, SD_EVENT_ONESHOT);
}

static int bus_flush_cb(sd_event_source *s, void *userdata)
{
	struct bus *bus = userdata;

	for (;;) {
		if (!list_is_empty(&bus->overflow_list)) {
			struct connection *c = list_first_entry(&bus->overflow_list,
								 struct connection, overflow_link);

			list_unlink(&c->overflow_link);
			connection_close(c, "its output queue is full: it does not read");
			continue;
		}
		if (!list_is_empty(&bus->flush_list)) {
			struct connection *c = list_first_entry(&bus->flush_list,
								 struct connection, flush_link);

			list_unlink(&c->flush_link);
			connection_flush(c);
			continue;
		}
		break;
	}
	bus_free_dead(bus);
	return 0;
}

int bus_set_activation_env(struct bus *bus, const char *key, const char *value)
{
	size_t klen = strlen(key), i;
	char *entry, **v;

	if (asprintf(&entry, "%s=%s", key, value) < 0)
		return -ENOMEM;
	for (i = 0; i < bus->n_activation_env; i++) {
		if (!strncmp(bus->activation_env[i], key, klen) &&
		    bus->activation_env[i][klen] == '=') {
			free(bus->activation_env[i]);
			bus->activation_env[i] = entry;
			return 0;
		}
	}
	v = realloc(bus->activation_env, (bus->n_activation_env + 1) * sizeof(*v));
	if (!v) {
		free(entry);
		return -ENOMEM;
	}
	bus->activation_env = v;
	bus->activation_env[bus->n_activation_env++] = entry;
	return 0;
}

int bus_reload_config(struct bus *bus, char **errorp)
{
	_cleanup_(bus_config_freep) struct bus_config *config = NULL;
	struct bus_config_options copts = {
		.no_listen_ok = true,
		.warn = bus_config_warn,
	};
	int r;

	if (!bus->config_file)
		return 0;
	r = bus_config_load(&config, bus->config_file, &copts, errorp);
	if (r)
		return r;
	/* Listen addresses and the bus type stay; limits and services change. */
	bus_apply_config(bus, config);
	log_info("reloaded configuration from %s", bus->config_file);
	return 0;
}

static int bus_signal_cb(sd_event_source *s, const struct signalfd_siginfo *si, void *userdata)
{
	struct bus *bus = userdata;

	if (si->ssi_signo == SIGHUP) {
		_cleanup_free_ char *err = NULL;

		if (bus_reload_config(bus, &err))
			log_warn("cannot reload configuration: %s", err ? err : "error");
		return 0;
	}
	return sd_event_exit(sd_event_source_get_event(s), 0);
}

int bus_run(struct bus *bus)
{
	struct listener *l;
	sigset_t mask;
	int r;

	r = sd_event_new(&bus->event);
	if (r < 0)
		return r;

	sigemptyset(&mask);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGHUP);
	if (sigprocmask(SIG_BLOCK, &mask, NULL) < 0)
		return -errno;
	r = sd_event_add_signal(bus->event, &bus->sig_term, SIGTERM, bus_signal_cb, bus);
	if (r >= 0)
		r = sd_event_add_signal(bus->event, &bus->sig_int, SIGINT, bus_signal_cb, bus);
	if (r >= 0)
		r = sd_event_add_signal(bus->event, &bus->sig_hup, SIGHUP, bus_signal_cb, bus);
	if (r < 0)
		return r;

	/* Output goes out after all ready input of one iteration was handled. */
	r = sd_event_add_defer(bus->event, &bus->flush, bus_flush_cb, bus);
	if (r < 0)
		return r;
	r = sd_event_source_set_priority(bus->flush, SD_EVENT_PRIORITY_IDLE);
	if (r < 0)
		return r;
	r = sd_event_source_set_enabled(bus->flush, SD_EVENT_OFF);
	if (r < 0)
		return r;

	list_for_each_entry(l, &bus->listeners, link) {
		r = listener_attach(l);
		if (r < 0)
			return r;
	}

	return sd_event_loop(bus->event);
}
