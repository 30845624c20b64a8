/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The broker process: the loop, the listeners, signals and the configuration
 * reloader around the bus. See broker.h.
 */

#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <stddef.h>
#include <unistd.h>
#include <systemd/sd-daemon.h>
#include "broker/activation/activation.h"
#include "broker/broker.h"
#include "broker/transport/connection.h"
#include "broker/containers/container.h"
#include "broker/core/driver.h"
#include "broker/upgrade/fdstore.h"
#include "broker/upgrade/journal-replay.h"
#include "broker/transport/listener.h"
#include "broker/objects/log.h"
#include "broker/objects/name.h"
#include "broker/transport/native.h"
#include "broker/upgrade/peer-state.h"
#include "broker/upgrade/reexec.h"
#include "broker/reload.h"
#include "broker/objects/reply.h"
#include "broker/core/router.h"
#include "broker/policy/selinux.h"
#include "broker/objects/state.h"
#include "conf/config.h"
#include "util/error.h"
#include "util/fd.h"

/* ------------------------------------------------------------- listeners */

/* @msg (malloc()ed, NULL: out of memory) is why the bus cannot start: BROKER_E_INVALID. */
static int broker_set_error(struct broker *broker, char *msg)
{
	free(broker->error);
	broker->error = msg;
	return msg ? BROKER_E_INVALID : -ENOMEM;
}

/* Add @l to the listeners and its address to the bus address. 0 or -ENOMEM. */
static int broker_link_listener(struct broker *broker, struct listener *l)
{
	char *joined;

	list_append(&broker->listeners, &l->link);
	if (broker->address) {
		if (asprintf(&joined, "%s;%s", broker->address, l->address) < 0)
			return -ENOMEM;
		free(broker->address);
		broker->address = joined;
	} else {
		broker->address = strdup(l->address);
		if (!broker->address)
			return -ENOMEM;
	}
	return 0;
}

/*
 * "systemd:" (dbus-daemon's socket activation address, as in dbus.service's
 * --address=systemd:): one listener per socket systemd passed (LISTEN_FDS).
 */
static int broker_add_systemd_listeners(struct broker *broker, const int *fds, size_t n_fds)
{
	int n = fds ? (int)n_fds : sd_listen_fds(1);

	if (n <= 0)
		return broker_set_error(broker, strdup(n < 0 ?
			"systemd: cannot read the passed sockets (LISTEN_FDS)" :
			"systemd: address given, but systemd passed no socket"));
	for (int i = 0; i < n; i++) {
		struct listener *l = NULL;
		char *err = NULL;
		/* Given ones stay the caller's: the listener takes a copy. */
		int fd = fds ? fcntl(fds[i], F_DUPFD_CLOEXEC, SD_LISTEN_FDS_START) :
			       SD_LISTEN_FDS_START + i;
		int r = fd < 0 ? error_origin(-errno) : listener_new_fd(&l, &broker->bus, fd, &err);

		if (r)
			return r == LISTENER_E_NOT_LISTENING ? broker_set_error(broker, err) : r;
		r = broker_link_listener(broker, l);
		if (r < 0)
			return r;
	}
	return 0;
}

/* Whether the unix sockets @a and @b are bound to the same name. */
static bool same_name(int a, int b)
{
	struct sockaddr_un na = {}, nb = {};
	socklen_t la = sizeof(na), lb = sizeof(nb);

	return getsockname(a, (struct sockaddr *)&na, &la) == 0 &&
	       getsockname(b, (struct sockaddr *)&nb, &lb) == 0 && na.sun_family == AF_UNIX &&
	       la == lb && la > offsetof(struct sockaddr_un, sun_path) && !memcmp(&na, &nb, la);
}

static bool broker_uses_systemd_sockets(const struct broker_options *opts)
{
	struct bus_config_string *s;

	if (opts->address)
		return !strcmp(opts->address, "systemd:");
	if (opts->config)
		list_for_each_entry(s, &opts->config->listen, link)
			if (!strcmp(s->str, "systemd:"))
				return true;
	return false;
}

int broker_take_socket_unit(struct broker *broker, const struct broker_options *opts)
{
	bool added = false;
	int r;

	if (!broker_uses_systemd_sockets(opts))
		return 0;
	for (size_t i = 0; i < opts->n_listen_fds; i++) {
		int fd = opts->listen_fds[i], copy;
		struct listener *l, *stale = NULL;
		bool known = false;
		char *err = NULL;

		list_for_each_entry(l, &broker->listeners, link) {
			for (size_t j = 0; j < l->n_fds; j++)
				known |= fd_same_file(l->fds[j], fd);
			if (!l->tcp && l->n_fds == 1 && !l->unlink_path && same_name(l->fds[0], fd))
				stale = l;
		}
		if (known)
			continue;
		/* The listener takes a copy: the passed ones stay the caller's. */
		copy = fcntl(fd, F_DUPFD_CLOEXEC, SD_LISTEN_FDS_START);
		if (copy < 0)
			return error_origin(-errno);
		if (stale) {
			/* The .socket unit was restarted: its new socket replaces the old one. */
			r = listener_replace_socket(stale, copy);
			if (r < 0) {
				close(copy);
				return r;
			}
			log_warn("%s: the socket unit passed a new socket; serving it instead of "
				 "the one carried over", stale->address);
			continue;
		}
		r = listener_new_fd(&l, &broker->bus, copy, &err);
		if (r) {
			close(copy);
			return r == LISTENER_E_NOT_LISTENING ? broker_set_error(broker, err) : r;
		}
		r = broker_link_listener(broker, l);
		if (r < 0)
			return r;
		log_info("%s: a socket passed by the socket unit, served too", l->address);
		added = true;
	}
	return added ? bus_set_address(&broker->bus, broker->address) : 0;
}

static int broker_add_listener(struct broker *broker, const char *address,
			       const struct broker_options *opts)
{
	struct listener *l = NULL;
	char *err = NULL;
	int r;

	if (!strcmp(address, "systemd:"))
		return broker_add_systemd_listeners(broker, opts->listen_fds, opts->n_listen_fds);
	r = listener_new(&l, &broker->bus, address, &err);
	if (r)
		return r == LISTENER_E_INVALID_ADDRESS ? broker_set_error(broker, err) : r;
	return broker_link_listener(broker, l);
}

static void broker_resume_listeners(struct bus *bus)
{
	struct broker *broker = container_of(bus, struct broker, bus);
	struct listener *l;

	list_for_each_entry(l, &broker->listeners, link)
		listener_resume(l);
}

/* ------------------------------------------------------------ reloading */

static int broker_reload_config(struct bus *bus, char **errorp)
{
	struct broker *broker = container_of(bus, struct broker, bus);
	int r;

	/* Invalid file: the old configuration stays (logged, returned for ReloadConfig). */
	r = config_reload_run(broker->reload, errorp);
	return r == CONFIG_RELOAD_E_INVALID ? BUS_E_INVALID_CONFIG : r;
}

/* The crash journal's record of a Hello: the section version, then the peer's. */
static int broker_serialize_peer(struct peer *peer, struct state_writer *w)
{
	state_put_u32(w, PEER_STATE_VERSION);
	return peer_serialize(peer, w);
}

static const struct bus_loop_ops broker_loop_ops = {
	.resume_listeners = broker_resume_listeners,
	.reload_config = broker_reload_config,
	.serialize_peer = broker_serialize_peer,
};

static int broker_reload_apply(void *userdata, const struct bus_config *config)
{
	struct broker *broker = userdata;

	/* Listen addresses and the bus type stay; limits, policy and services change. */
	bus_apply_config(&broker->bus, config);
	return 0;
}

static void broker_reload_done(void *userdata, int result)
{
	struct broker *broker = userdata;

	bus_config_reloaded(&broker->bus);
}

static void broker_log(void *userdata, int priority, const char *text)
{
	log_printf(priority, "%s", text);
}

static void broker_config_warn(void *userdata, const char *message)
{
	log_warn("%s", message);
}

static const struct config_reload_ops broker_reload_ops = {
	.apply = broker_reload_apply,
	.log = broker_log,
	.reloaded = broker_reload_done,
};

/* ---------------------------------------------------------------- object */

/*
 * More connections need more fds. Like dbus-daemon: try to raise both limits
 * to 65536 (which needs CAP_SYS_RESOURCE when above the hard limit), else at
 * least the soft limit to the hard one. Never lowered.
 */
#define BROKER_FD_LIMIT 65536

static void raise_fd_limit(void)
{
	struct rlimit rl, want;

	if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
		return;
	if (rl.rlim_cur < BROKER_FD_LIMIT || rl.rlim_max < BROKER_FD_LIMIT) {
		want.rlim_cur = rl.rlim_cur > BROKER_FD_LIMIT ? rl.rlim_cur : BROKER_FD_LIMIT;
		want.rlim_max = rl.rlim_max > BROKER_FD_LIMIT ? rl.rlim_max : BROKER_FD_LIMIT;
		if (setrlimit(RLIMIT_NOFILE, &want) == 0)
			return;
	}
	if (rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		(void)setrlimit(RLIMIT_NOFILE, &rl);
	}
}

/* broker_new() without the listening sockets: a restored bus gets them from its state. */
static int broker_new_restoring(struct broker **brokerp, const struct broker_options *opts)
{
	const struct bus_config *config = opts->config;
	struct bus_config_options copts = {
		.no_listen_ok = true,
		.warn = broker_config_warn,
		.selinux_enabled = selinux_is_enabled(),
		.selinux_root = selinux_root(),
	};
	struct broker *broker;
	char *err = NULL;
	int r;

	broker = calloc(1, sizeof(*broker));
	if (!broker)
		return -ENOMEM;
	*brokerp = broker;
	list_init(&broker->listeners);
	broker->exe_fd = -1;
	broker->journal_from = (struct journal_loaded){ .fd = -1 };

	/* Before raise_fd_limit(): activated services get the original RLIMIT_NOFILE. */
	r = bus_init(&broker->bus, config, opts->systemd_activation, &broker_loop_ops, &err);
	if (r)
		return r == BUS_E_INVALID_CONFIG ? broker_set_error(broker, err) : r;
	broker->bus.containers_enabled = opts->containers;
	r = container_registry_new(&broker->bus);
	if (r < 0)
		return r;
	/* The driver's interfaces besides its own: the native clients', Containers1. */
	r = driver_add_interface(&broker->bus, &driver_bus1_interface);
	if (r == 0 && opts->containers)
		r = driver_add_interface(&broker->bus, &driver_containers_interface);
	if (r < 0)
		return r;
	r = socket_transport_new(&broker->sockets, &broker->bus);
	if (r < 0)
		return r;
	r = config_reload_new(&broker->reload, opts->config_file, &copts, &broker_reload_ops,
			      broker);
	if (r < 0)
		return r;
	r = config_reload_watch(broker->reload, config);
	if (r < 0)
		return r;

	raise_fd_limit();
	return 0;
}

int broker_new(struct broker **brokerp, const struct broker_options *opts)
{
	const struct bus_config *config = opts->config;
	struct broker *broker;
	int r;

	r = broker_new_restoring(brokerp, opts);
	if (r)
		return r;
	broker = *brokerp;
	if (opts->address) {
		r = broker_add_listener(broker, opts->address, opts);
		if (r)
			return r;
	} else if (config) {
		struct bus_config_string *s;

		list_for_each_entry(s, &config->listen, link) {
			r = broker_add_listener(broker, s->str, opts);
			if (r)
				return r;
		}
	}
	if (!broker->address)
		return broker_set_error(broker,
			strdup("no address to listen on (no <listen> and no --address)"));
	return bus_set_address(&broker->bus, broker->address);
}

struct broker *broker_free(struct broker *broker)
{
	if (!broker)
		return NULL;
	/* Not a crash: what the journal holds is of no use to anyone. */
	broker->bus.journal = journal_free(broker->bus.journal);
	journal_loaded_deinit(&broker->journal_from);
	bus_deinit(&broker->bus);
	/* After the peers: they release their bus1 nodes and queue entries first. */
	broker->native = native_free(broker->native);
	broker->sockets = socket_transport_free(broker->sockets);
	while (!list_is_empty(&broker->listeners))
		listener_free(list_first_entry(&broker->listeners, struct listener, link));
	broker->sig_term = sd_event_source_disable_unref(broker->sig_term);
	broker->sig_int = sd_event_source_disable_unref(broker->sig_int);
	broker->sig_hup = sd_event_source_disable_unref(broker->sig_hup);
	broker->sig_usr2 = sd_event_source_disable_unref(broker->sig_usr2);
	broker->reexec_wait = sd_event_source_disable_unref(broker->reexec_wait);
	broker->reload = config_reload_free(broker->reload);
	safe_close(broker->exe_fd);
	free(broker->exe_path);
	broker->event = sd_event_unref(broker->event);
	free(broker->address);
	free(broker->error);
	free(broker);
	return NULL;
}

const char *broker_get_address(struct broker *broker)
{
	return broker->address;
}

const char *broker_get_error(struct broker *broker)
{
	return broker && broker->error ? broker->error : "unknown error";
}

void broker_set_uid(struct broker *broker, uid_t uid)
{
	broker->bus.uid = uid;
}

void broker_set_pid(struct broker *broker, pid_t pid)
{
	broker->bus.pid = pid;
	/* A pidfd taken of the process before is not this one's. */
	broker->bus.pidfd = safe_close(broker->bus.pidfd);
}

/* ------------------------------------------------------------------ loop */

static int broker_signal_cb(sd_event_source *s, const struct signalfd_siginfo *si,
			    void *userdata)
{
	struct broker *broker = userdata;

	if (si->ssi_signo == SIGUSR2) {
		reexec_run(broker);
		return 0;
	}
	if (si->ssi_signo == SIGHUP) {
		_cleanup_free_ char *err = NULL;

		if (config_reload_run(broker->reload, &err))
			log_warn("cannot reload configuration: %s", err ? err : "error");
		return 0;
	}
	/* Stopped or restarted by systemd: the next start may take it all over. */
	if (si->ssi_signo == SIGTERM && fdstore_enabled()) {
		reexec_hand_over(broker);
		return 0;
	}
	return sd_event_exit(sd_event_source_get_event(s), 0);
}

int broker_block_signals(void)
{
	sigset_t mask;

	sigemptyset(&mask);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGHUP);
	sigaddset(&mask, SIGUSR2);
	return sigprocmask(SIG_BLOCK, &mask, NULL) < 0 ? -errno : 0;
}

int broker_run(struct broker *broker)
{
	struct listener *l;
	int r;

	/* A re-executed bus has its loop already (broker_restore()). */
	if (!broker->event) {
		r = sd_event_new(&broker->event);
		if (r < 0)
			return r;
		r = bus_attach(&broker->bus, broker->event);
		if (r < 0)
			return r;
		/* Native clients: the bus1 transport, when /dev/bus1 exists. */
		r = native_new(&broker->native, &broker->bus);
		if (r < 0)
			return r;
	}
	/* From now on a crash loses nothing (journal.h). */
	broker_journal_start(broker);
	/* The inotify watches of the reloader. */
	r = config_reload_attach(broker->reload, broker->event);
	if (r < 0)
		log_warn("cannot watch the configuration directories: %s", log_error(r));

	r = broker_block_signals();
	if (r < 0)
		return r;
	r = sd_event_add_signal(broker->event, &broker->sig_term, SIGTERM, broker_signal_cb,
				broker);
	if (r >= 0)
		r = sd_event_add_signal(broker->event, &broker->sig_int, SIGINT, broker_signal_cb,
					broker);
	if (r >= 0)
		r = sd_event_add_signal(broker->event, &broker->sig_hup, SIGHUP, broker_signal_cb,
					broker);
	if (r >= 0)
		r = sd_event_add_signal(broker->event, &broker->sig_usr2, SIGUSR2, broker_signal_cb,
					broker);
	if (r < 0)
		return r;

	list_for_each_entry(l, &broker->listeners, link) {
		r = listener_attach(l);
		if (r < 0)
			return r;
	}
	/*
	 * WatchdogSec= in the unit: the loop itself pings systemd, so a bus
	 * whose loop stalls is killed and restarted instead of looking alive.
	 * $WATCHDOG_PID names this process across a re-exec too (same pid).
	 */
	r = sd_event_set_watchdog(broker->event, true);
	if (r < 0)
		log_warn("cannot set up systemd's watchdog: %s", log_error(r));
	return sd_event_loop(broker->event);
}

/* ------------------------------------------------------------------ state */

/* Every section of the state (state.h), parsed and checked; as broker_serialize() writes it. */
struct broker_state {
	struct bus_state bus;
	int native_fd;
	struct listener_state *listeners;
	size_t n_listeners;
	struct name_registry_state names;
	struct peer_state *peers;
	size_t n_peers;
	struct reply_registry_state replies;
	struct activation_state activation;
	struct container_registry_state containers;
};

/* The owners of reply slots, in the state's peer order: an allocated array. */
static struct reply_owner **reply_owners(struct peer **peers, size_t n)
{
	struct reply_owner **v = calloc(n ? n : 1, sizeof(*v));

	for (size_t i = 0; v && i < n; i++)
		v[i] = &peers[i]->replies;
	return v;
}

int broker_serialize(struct broker *broker, bool handover, struct state_writer *w)
{
	struct bus *bus = &broker->bus;
	struct reply_owner **owners;
	struct peer **peers;
	struct peer *p;
	size_t n = 0;
	int r;

	/*
	 * The next program opens its log windows afresh: what they left out
	 * is told now (not for a crash journal's snapshot: this one goes on).
	 */
	if (!w->crash)
		log_limits_flush(&bus->log_limits);
	bus_serialize(bus, w);
	native_serialize(broker->native, w);
	listener_serialize_all(&broker->listeners, w);
	name_registry_serialize(bus->names, w);
	r = peer_serialize_all(bus, w);
	if (r < 0)
		return r;
	/* In the order of their section, without those it left out. */
	list_for_each_entry(p, &bus->peers, bus_link)
		n += peer_state_index(p) != UINT32_MAX;
	peers = calloc(n ? n : 1, sizeof(*peers));
	if (!peers)
		return -ENOMEM;
	n = 0;
	list_for_each_entry(p, &bus->peers, bus_link)
		if (peer_state_index(p) != UINT32_MAX)
			peers[n++] = p;
	owners = reply_owners(peers, n);
	free(peers);
	if (!owners)
		return -ENOMEM;
	reply_registry_serialize(bus->replies, w, owners, n);
	free(owners);
	/* The next process of the fd store is not the parent of our children. */
	r = activation_serialize(bus->activation, w, !handover, peer_state_index);
	if (r < 0)
		return r;
	container_registry_serialize(bus->containers, w, peer_state_index);
	state_put_u32(w, STATE_TAG_END);
	return w->error;
}

static void broker_state_deinit(struct broker_state *st)
{
	free(st->listeners);
	name_registry_state_deinit(&st->names);
	peer_state_free_all(st->peers, st->n_peers);
	reply_registry_state_deinit(&st->replies);
	activation_state_deinit(&st->activation);
	container_registry_state_deinit(&st->containers);
	*st = (struct broker_state){};
}

static bool broker_state_parse(struct state_reader *r, struct broker_state *st)
{
	*st = (struct broker_state){ .native_fd = -1 };
	if (!bus_state_read(r, &st->bus) || !native_state_read(r, &st->native_fd) ||
	    !listener_state_read_all(r, &st->listeners, &st->n_listeners) ||
	    !name_registry_state_read(r, &st->names) ||
	    !peer_state_read_all(r, &st->peers, &st->n_peers, st->names.n_names) ||
	    !reply_registry_state_read(r, &st->replies, st->n_peers) ||
	    !activation_state_read(r, &st->activation, st->n_peers) ||
	    !container_registry_state_read(r, &st->containers, st->n_peers))
		return false;
	for (size_t i = 0; i < st->n_peers; i++)
		if (st->peers[i].native && st->native_fd < 0)
			return false;
	return state_expect(r, STATE_TAG_END) && r->pos == r->n;
}

/* Read the stream of @fd into @st. 0, BROKER_E_STATE_UNREADABLE (logged), -errno. */
static int broker_state_load(int fd, struct state_reader *r, struct broker_state *st,
			     struct fdstore_carried *carried)
{
	uint32_t version;
	int ret;

	*st = (struct broker_state){ .native_fd = -1 };
	ret = state_reader_init(r, fd, &version);
	if (ret == STATE_E_UNREADABLE) {
		log_err("re-exec: the state is %s (version %u; this program reads %u to %u)",
			version ? "of another version" : "not a bus1-broker state",
			(unsigned int)version, (unsigned int)STATE_VERSION_MIN,
			(unsigned int)STATE_VERSION);
		return BROKER_E_STATE_UNREADABLE;
	}
	if (ret < 0)
		return ret;
	if (carried) {
		r->fd_present = fdstore_carries;
		r->fd_userdata = carried;
	}
	if (broker_state_parse(r, st))
		return 0;
	if (r->unknown_tag)
		log_err("re-exec: the state's %s section is of version %u, newer than this "
			"program reads", state_tag_name(r->unknown_tag),
			(unsigned int)r->unknown_version);
	else
		log_err("re-exec: the state is malformed (at byte %zu)", r->pos);
	return BROKER_E_STATE_UNREADABLE;
}

int broker_check_state(int fd)
{
	struct state_reader r;
	struct broker_state st;
	int ret;

	ret = broker_state_load(fd, &r, &st, NULL);
	broker_state_deinit(&st);
	state_reader_deinit(&r);
	return ret;
}

int broker_check_snapshot(const uint8_t *mem, size_t n)
{
	struct state_reader r;
	struct broker_state st;
	bool ok = false;

	if (state_reader_init_view(&r, mem, n, 0) == 0) {
		ok = broker_state_parse(&r, &st);
		broker_state_deinit(&st);
	}
	state_reader_deinit(&r);
	return ok ? 0 : JOURNAL_E_CORRUPT;
}

/* Calls @fn on each fd slot of messages in @st (queued output, pending activations). */
static int for_each_message_fd(struct broker_state *st, int (*fn)(int *fd, void *userdata),
			       void *userdata)
{
	int r;

	for (size_t i = 0; i < st->n_peers; i++) {
		struct socket_snapshot *snap = &st->peers[i].conn.snap;

		for (size_t j = 0; j < snap->n_out; j++)
			for (size_t k = 0; k < snap->out[j].n_fds; k++)
				if ((r = fn(&snap->out[j].fds[k], userdata)) < 0)
					return r;
	}
	for (size_t i = 0; i < st->activation.n_pendings; i++) {
		struct activation_state_pending *p = &st->activation.pendings[i];

		for (size_t j = 0; j < p->n_entries; j++)
			for (size_t k = 0; k < p->entries[j].n_fds; k++)
				if ((r = fn(&p->entries[j].fds[k], userdata)) < 0)
					return r;
	}
	return 0;
}

struct fd_marks {
	uint8_t *seen;
	int max;
};

static int note_max_fd(int *fd, void *userdata)
{
	struct fd_marks *m = userdata;

	m->max = MAX(m->max, *fd);
	return 0;
}

static int claim_fd(int *fd, void *userdata)
{
	struct fd_marks *m = userdata;
	int copy;

	if (!(m->seen[*fd / 8] & (1u << (*fd % 8)))) {
		m->seen[*fd / 8] |= (uint8_t)(1u << (*fd % 8));
		return 0;
	}
	copy = fcntl(*fd, F_DUPFD_CLOEXEC, 3);
	if (copy < 0)
		return error_origin(-errno);
	*fd = copy;
	return 0;
}

/*
 * One message queued for several peers (or queued for a peer and waiting
 * for an activation) lists the same fds in each place, and each restored
 * owner closes what it holds: give every place but the first a duplicate
 * of its own. Return 0 or negative errno.
 */
static int dup_shared_fds(struct broker_state *st)
{
	struct fd_marks m = { .max = -1 };
	int r;

	(void)for_each_message_fd(st, note_max_fd, &m);
	if (m.max < 0)
		return 0;
	m.seen = calloc((size_t)m.max / 8 + 1, 1);
	if (!m.seen)
		return -ENOMEM;
	r = for_each_message_fd(st, claim_fd, &m);
	free(m.seen);
	return r;
}

/*
 * After a crash (@l: the journal the state is the snapshot of): the records,
 * then the connections whose streams the crash cut go. Return the number
 * closed, or negative errno.
 */
static int broker_replay(struct broker *broker, struct journal_loaded *l)
{
	struct bus *bus = &broker->bus;
	struct peer *p, *tmp;
	uint64_t max_id;
	int r, n = 0;

	r = journal_replay(bus, l, &max_id);
	if (r < 0)
		return r;
	/* The records' reply slots expire too, the oldest first. */
	router_arm_reply_timer(bus);
	name_registry_restore_done(bus->names);
	bus->next_id = MAX(bus->next_id, max_id + 1);
	/* The bus sent messages the snapshot does not count: serials move on. */
	bus->serial += 1u << 20;
	list_for_each_entry(p, &bus->peers, bus_link)
		peer_restored(p);
	list_for_each_entry_safe(p, tmp, &bus->peers, bus_link) {
		int fd = connection_get_fd(connection_of(p));
		uint8_t mark = journal_loaded_mark(l, fd);

		if (journal_loaded_lost(l, fd) || journal_loaded_lost(l, p->creds.pidfd))
			mark = JOURNAL_MARK_IN | JOURNAL_MARK_OUT;
		if (!mark)
			continue;
		peer_close(p, mark & JOURNAL_MARK_OUT ?
			   "the crash cut or lost what the bus was writing to it" :
			   "the crash cut or lost what the bus had read from it");
		n++;
	}
	return n;
}

/* Everything of @st, in the order each part needs the ones before. */
static int broker_restore_state(struct broker *broker, struct broker_state *st,
				struct journal_loaded *journal)
{
	struct bus *bus = &broker->bus;
	struct reply_owner **owners = NULL;
	struct peer **peers;
	size_t n_rules = 0;
	int r;

	bus_restore_state(bus, &st->bus);
	for (size_t i = 0; i < st->n_listeners; i++) {
		struct listener *l = NULL;

		r = listener_restore(&l, bus, &st->listeners[i]);
		if (r < 0)
			return r;
		r = broker_link_listener(broker, l);
		if (r < 0)
			return r;
	}
	if (broker->address) {
		r = bus_set_address(bus, broker->address);
		if (r < 0)
			return r;
	}
	r = dup_shared_fds(st);
	if (r < 0)
		return r;
	r = sd_event_new(&broker->event);
	if (r < 0)
		return r;
	r = bus_attach(bus, broker->event);
	if (r < 0)
		return r;
	/* The old program's bus1 peer, with every node and handle in it. */
	if (st->native_fd >= 0)
		r = native_new_from_fd(&broker->native, bus, st->native_fd);
	else
		r = native_new(&broker->native, bus);
	if (r < 0)
		return r;
	r = name_registry_restore(bus->names, &st->names);
	if (r < 0)
		return r;

	peers = calloc(st->n_peers ? st->n_peers : 1, sizeof(*peers));
	if (!peers)
		return -ENOMEM;
	for (size_t i = 0; i < st->n_peers; i++)
		n_rules += st->peers[i].matches.n_rules;
	match_registry_reserve(bus->matches, n_rules);
	for (size_t i = 0; i < st->n_peers; i++) {
		r = peer_restore(bus, &st->peers[i], &peers[i]);
		if (r < 0)
			goto out;
	}
	name_registry_restore_done(bus->names);
	owners = reply_owners(peers, st->n_peers);
	if (!owners) {
		r = -ENOMEM;
		goto out;
	}
	r = reply_registry_restore(bus->replies, &st->replies, owners);
	if (r < 0)
		goto out;
	router_arm_reply_timer(bus);
	r = activation_restore(bus->activation, &st->activation, (void *const *)peers);
	if (r < 0)
		goto out;
	r = container_registry_restore(bus->containers, &st->containers, peers);
	if (r < 0)
		goto out;
	if (journal) {
		r = broker_replay(broker, journal);
		goto out;
	}
	for (size_t i = 0; i < st->n_peers; i++)
		peer_restored(peers[i]);
	r = 0;
out:
	free(owners);
	free(peers);
	return r;
}

/* What the previous program handed over: every fd its state names, and the state. */
static void handed_over_fds(struct reexec_fds *fds, const struct state_reader *r, int state_fd)
{
	for (size_t i = 0; i < r->n_fds; i++)
		reexec_fds_add(fds, r->fds[i]);
	reexec_fds_add(fds, state_fd);
}

int broker_restore(struct broker **brokerp, const struct broker_options *opts, int state_fd,
		   int fallback_fd, char **argv, struct fdstore_carried *carried)
{
	struct reexec_fds handed = {};
	struct state_reader r;
	struct broker_state st;
	bool fail_load = false, fail_restore = false;
	int ret;

#if BUS1_TEST_HOOKS
	{
		/* The way back, tested (-Dtest_hooks): once, the previous program never sees it. */
		const char *fail_hook = getenv("BUS1_BROKER_RESTORE_FAIL");

		fail_load = fallback_fd >= 0 && fail_hook && !strcmp(fail_hook, "load");
		fail_restore = fallback_fd >= 0 && fail_hook && !strcmp(fail_hook, "restore");
		(void)unsetenv("BUS1_BROKER_RESTORE_FAIL");
	}
#endif

	/* First of all: nothing the old program handed over may leak further. */
	reexec_cloexec_all();
	ret = broker_state_load(state_fd, &r, &st, carried);
	if (ret == 0 && fail_load)
		ret = BROKER_E_STATE_UNREADABLE;
	if (ret) {
		broker_state_deinit(&st);
		state_reader_deinit(&r);
		/*
		 * The old program wrote it: it can read it. Nothing was
		 * touched, nothing opened: every fd open is one it handed over
		 * (the state, unreadable here, cannot tell which).
		 */
		if (fallback_fd >= 0) {
			reexec_fds_open(&handed);
			reexec_go_back(fallback_fd, argv, &handed);
		}
		free(handed.v);
		if (carried) {
			/* Nothing was touched: the caller starts a new bus. */
			close(state_fd);
			return ret;
		}
		return ret < 0 ? ret : -EINVAL;
	}

	ret = broker_new_restoring(brokerp, opts);
	if (ret == 0)
		ret = broker_restore_state(*brokerp, &st, NULL);
	/* The socket unit may have been restarted meanwhile: serve its sockets. */
	if (ret == 0 && carried) {
		ret = broker_take_socket_unit(*brokerp, opts);
		if (ret == BROKER_E_INVALID) {
			log_err("fd store: %s", broker_get_error(*brokerp));
			ret = -ENOTSOCK;
		}
	}
	if (ret == 0 && fail_restore)
		ret = -EIO;
	if (ret && fallback_fd >= 0) {
		/*
		 * Restoring sends nothing to a client and closes no carried fd:
		 * what is half built is left as it is, and the previous program
		 * gets every fd as it handed them over.
		 */
		log_err("re-exec: cannot restore the bus: %s",
			ret < 0 ? log_error(ret) : broker_get_error(*brokerp));
		/* Exactly those: the fds this program opened itself stay its own. */
		handed_over_fds(&handed, &r, state_fd);
		reexec_go_back(fallback_fd, argv, &handed);
	}
	free(handed.v);
	if (ret == 0) {
		size_t n = st.n_peers;

		log_info("%s: resumed, %zu peer%s carried over", carried ? "fd store" : "re-exec",
			 n, n == 1 ? "" : "s");
	}
	broker_state_deinit(&st);
	state_reader_deinit(&r);
	close(state_fd);
	if (fallback_fd >= 0)
		close(fallback_fd);
	return ret;
}

/* ------------------------------------------------------ crash survival */

/* The crash journal's snapshot (journal.h): the state a hand-over writes. */
static int broker_crash_snapshot(void *userdata, struct state_writer *w)
{
	return broker_serialize(userdata, true, w);
}

static const char *journal_refusal(int r)
{
	switch (r) {
	case JOURNAL_E_NONE:
		return "there is none";
	case JOURNAL_E_CORRUPT:
		return "it is damaged or truncated";
	case JOURNAL_E_CRASHED:
		return "the start from it before this one died";
	default:
		return "its snapshot does not parse";
	}
}

int broker_restore_crash(struct broker **brokerp, const struct broker_options *opts,
			 struct fdstore_carried *carried)
{
	struct journal_loaded l;
	struct state_reader r;
	struct broker_state st;
	int ret, closed;

	/* The store's files are the journal's from here on. */
	ret = journal_load(&l, carried->journal_slots[0], carried->journal_slots[1],
			   carried->journal_files, carried->n_journal_files);
	carried->journal_files = NULL;
	carried->n_journal_files = 0;
	for (int i = 0; i < 2; i++)
		for (int k = 0; k < 2; k++)
			if (carried->journal_slots[i][k] == l.fd)
				carried->journal_slots[i][k] = -1;
	if (ret < 0)
		goto unusable;
	if (ret == 0) {
		/* A stream of a version this program reads, parsed whole (st is set then). */
		bool ok = state_reader_init_view(&r, l.snapshot, l.n_snapshot, 0) == 0;

		journal_loaded_use_map(&l, &r, NULL);
		if (ok && !broker_state_parse(&r, &st)) {
			broker_state_deinit(&st);
			ok = false;
		}
		if (!ok) {
			state_reader_deinit(&r);
			ret = -EBADMSG;
		}
	}
	if (ret == 0) {
		size_t bad = journal_check_records(&l);

		if (bad) {
			log_err("crash journal: record %zu of %zu (type %u) does not parse", bad,
				l.n_records, (unsigned int)l.records[bad - 1].type);
			broker_state_deinit(&st);
			state_reader_deinit(&r);
			ret = JOURNAL_E_CORRUPT;
		}
	}
	if (ret)
		goto unusable;
	ret = broker_new_restoring(brokerp, opts);
	if (ret == 0)
		ret = broker_restore_state(*brokerp, &st, &l);
	closed = ret;
	if (ret >= 0)
		ret = broker_take_socket_unit(*brokerp, opts);
	if (ret == BROKER_E_INVALID) {
		log_err("crash journal: %s", broker_get_error(*brokerp));
		ret = -ENOTSOCK;
	}
	if (ret == 0) {
		struct peer *p;
		size_t n = 0;

		list_for_each_entry(p, &(*brokerp)->bus.peers, bus_link)
			n++;
		log_warn("crash journal: the bus restarted after a crash; %zu connection%s "
			 "resumed, %d closed (the crash cut their streams); %zu record%s "
			 "replayed after the snapshot", n, n == 1 ? "" : "s", closed,
			 l.n_records, l.n_records == 1 ? "" : "s");
	}
	broker_state_deinit(&st);
	state_reader_deinit(&r);
	if (ret == 0)
		(*brokerp)->journal_from = l;
	else
		journal_loaded_deinit(&l);
	return ret;

unusable:
	/* Its entries are left to remove once a new bus starts (broker_journal_forget()). */
	log_err("crash journal: cannot resume the bus from it: %s; starting a new bus",
		ret < 0 && ret != -EBADMSG ? log_error(ret) : journal_refusal(ret));
	carried->journal_files = steal_ptr(l.files);
	carried->n_journal_files = l.n_files;
	l.n_files = 0;
	/* The snapshot's files, if journal_load() took them: told the end, as the rest. */
	fdstore_journal_shut_fds(carried, l.snap_fds, l.n_snap);
	journal_loaded_deinit(&l);
	return ret < 0 && ret != -EBADMSG ? ret : BROKER_E_STATE_UNREADABLE;
}

void broker_journal_forget(struct broker *broker, struct fdstore_carried *carried)
{
	struct journal_loaded *l = &broker->journal_from;
	struct journal_file *v;

	if (!carried->n_journal_files)
		return;
	v = reallocarray(l->files, l->n_files + carried->n_journal_files, sizeof(*v));
	if (!v)
		return;	/* left in the store: the next compaction cannot name them */
	memcpy(v + l->n_files, carried->journal_files, carried->n_journal_files * sizeof(*v));
	l->files = v;
	l->n_files += carried->n_journal_files;
	free(steal_ptr(carried->journal_files));
	carried->n_journal_files = 0;
}

void broker_journal_start(struct broker *broker)
{
	struct bus *bus = &broker->bus;
	int r;

	if (bus->journal || !fdstore_enabled())
		return;
	if (strtoul(getenv("FDSTORE"), NULL, 10) < JOURNAL_STORE_NEEDED) {
		log_warn("crash journal: the fd store takes %s fds, fewer than the %u it needs "
			 "(FileDescriptorStoreMax=): the bus will not survive a crash",
			 getenv("FDSTORE"), JOURNAL_STORE_NEEDED);
		journal_loaded_deinit(&broker->journal_from);
		return;
	}
	r = journal_new(&bus->journal, broker_crash_snapshot, broker, &broker->journal_from);
	journal_loaded_deinit(&broker->journal_from);
	if (r < 0) {
		log_warn("crash journal: cannot start: %s; the bus will not survive a crash",
			 log_error(r));
		return;
	}
	bus->journal_activation = activation_changes(bus->activation);
}

void broker_journal_stop(struct broker *broker)
{
	journal_discard(broker->bus.journal);
	broker->bus.journal = journal_free(broker->bus.journal);
}
