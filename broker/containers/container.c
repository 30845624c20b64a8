/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Container instances: their sockets, members and lifetime. See container.h.
 */

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <syslog.h>
#include <unistd.h>
#include "broker/core/bus.h"
#include "broker/transport/connection.h"
#include "broker/containers/container.h"
#include "broker/core/bus-journal.h"
#include "broker/containers/container-filter.h"
#include "broker/transport/listener.h"
#include "broker/objects/log.h"
#include "broker/objects/log-limit.h"
#include "broker/objects/peer.h"
#include "broker/core/router.h"
#include "dbus-compat/address.h"
#include "dbus-compat/marshal.h"
#include "dbus-compat/message.h"
#include "dbus-compat/protocol.h"
#include "dbus-compat/sasl.h"
#include "util/macro.h"

static void container_registry_free(struct bus_part *part);

static const struct bus_part_ops container_registry_part_ops = {
	.free = container_registry_free,
};

int container_registry_new(struct bus *bus)
{
	struct container_registry *reg = calloc(1, sizeof(*reg));

	if (!reg)
		return -ENOMEM;
	reg->bus = bus;
	list_init(&reg->instances);
	bus->containers = reg;
	bus_add_part(bus, &reg->part, &container_registry_part_ops);
	return 0;
}

static void container_free(struct container *c)
{
	struct container_member *m, *tmp;

	/* What its limits left out is told while its name is there to tell it. */
	log_limit_deinit(&c->filter_log);
	log_limit_deinit(&c->group.refusal_log);

	/* At exit: the members' peers go after it. */
	list_for_each_entry_safe(m, tmp, &c->members, link) {
		list_unlink(&m->link);
		m->container = NULL;
		m->attachment.peer->group = NULL;
	}
	/* listener_free() removes the socket file. */
	listener_free(c->listener);
	list_unlink(&c->link);
	bus_journal_changed(c->registry->bus);
	if (--c->registry->n_instances == 0)
		container_policy_remove(c->registry);
	free(c->path);
	free(c->type);
	free(c->name);
	free(c->metadata);
	free(c->creator_creds);
	free(c->socket_path);
	container_filter_unref(c->filter);
	free(c);
}

/* With the bus, after its peers: their sockets go too (their files removed), as at exit. */
static void container_registry_free(struct bus_part *part)
{
	struct container_registry *reg = container_of(part, struct container_registry, part);

	/* At exit: nobody is left to tell (InstanceRemoved). */
	while (!list_is_empty(&reg->instances))
		container_free(list_first_entry(&reg->instances, struct container, link));
	reg->bus->containers = NULL;
	free(reg);
}

struct container *container_find(struct container_registry *reg, const char *path)
{
	struct container *c;

	list_for_each_entry(c, &reg->instances, link)
		if (!strcmp(c->path, path))
			return c;
	return NULL;
}

/*
 * Who may learn that an instance ended: a connection without a filter (it
 * may ask GetInstanceInfo of any instance anyway; every creator is one, as
 * a contained connection cannot call AddServer). A filtered connection sees
 * no other sandbox, as behind xdg-dbus-proxy, which passes no
 * InstanceRemoved at all.
 */
static bool container_may_know(const struct peer *to, const void *data)
{
	(void)data;
	return !container_filter_view(to);
}

/* InstanceRemoved(o), broadcast by the driver to those who may know (above). */
static void container_announce_removed(struct container *c)
{
	struct bus *bus = c->registry->bus;
	_cleanup_message_ struct message *m = NULL;
	struct message_builder b;
	int r;

	message_builder_init_signal(&b, DC_PATH_DBUS, DC_INTERFACE_CONTAINERS1, "InstanceRemoved",
				    "o");
	b.sender = DC_SERVICE_DBUS;
	dc_writer_write(&b.body, "o", c->path);
	r = message_builder_seal(&b, bus_next_serial(bus), &m);
	message_builder_deinit(&b);
	if (r < 0) {
		log_warn("cannot build InstanceRemoved: %s", strerror(-r));
		return;
	}
	router_broadcast_from_driver_to(bus, m, container_may_know, c);
}

static const struct ratelimit_rule container_filter_log_rule = {
	.interval_usec = CONTAINER_LOG_WINDOW_USEC,
	.burst = CONTAINER_LOG_BURST,
};

static void container_filter_log_report(struct log_limit *l, uint64_t n_missed)
{
	struct container *c = container_of(l, struct container, filter_log);

	log_info("container %s (%s %s): %llu more refusals were not logged", c->path, c->type,
		 c->name, (unsigned long long)n_missed);
}

static void container_refusal_log_report(struct log_limit *l, uint64_t n_missed)
{
	struct container *c = container_of(l, struct container, group.refusal_log);

	/* Beside the refusals' own lines: the same level and facility. */
	log_printf(LOG_AUTH | LOG_NOTICE, "%llu more refusals of container instance %s (%s %s) "
		   "were not logged", (unsigned long long)n_missed, c->path, c->type, c->name);
}

void container_log_refusal(struct container *c, const struct peer *p, const struct message *m,
			   const char *what, const char *name)
{
	if (!c || !c->filter || !c->filter->log)
		return;
	if (!log_limit_pass(&c->registry->bus->log_limits, &c->filter_log))
		return;
	log_info("container %s (%s %s): filter %s %s from %s to %s: path=%s interface=%s "
		 "member=%s", c->path, c->type, c->name, what,
		 m->type == DC_MESSAGE_SIGNAL ? "signal" :
		 m->type == DC_MESSAGE_METHOD_CALL ? "call" : "reply",
		 peer_name(p), name ? name : "(none)", m->path ? m->path : "(none)",
		 m->interface ? m->interface : "(none)", m->member ? m->member : "(none)");
}

size_t container_n_calls(const struct container *c)
{
	const struct container_member *m;
	size_t n = 0;

	/* At most max_connections_per_container members: summed when asked. */
	list_for_each_entry(m, &c->members, link)
		n += m->attachment.peer->replies.n_calls;
	return n;
}

/* The end of @c, once it no longer listens and has no connection left. */
static void container_maybe_end(struct container *c)
{
	if (c->listener || c->n_members > 0 || c->closing)
		return;
	container_announce_removed(c);
	container_free(c);
}

void container_stop_listening(struct container *c)
{
	bus_journal_changed(c->registry->bus);
	c->listener = listener_free(c->listener);
	container_maybe_end(c);
}

void container_stop_instance(struct container *c)
{
	c->listener = listener_free(c->listener);
	/* peer_close() leaves the member list; the end waits for the last. */
	c->closing = true;
	while (!list_is_empty(&c->members))
		peer_close(list_first_entry(&c->members, struct container_member,
					    link)->attachment.peer,
			   "its container instance was stopped");
	c->closing = false;
	container_maybe_end(c);
}

/* ------------------------------------------------- members and creators */

static void member_leave(struct container_member *m)
{
	struct container *c = m->container;

	m->view = filter_view_free(m->view);
	if (!c)
		return;
	list_unlink(&m->link);
	m->container = NULL;
	m->attachment.peer->group = NULL;
	c->n_members--;
	bus_journal_changed(c->registry->bus);
}

/* It closed: its instance may end now (InstanceRemoved). */
static void member_gone(struct peer_attachment *a)
{
	struct container_member *m = container_of(a, struct container_member, attachment);
	struct container *c = m->container;

	member_leave(m);
	if (c)
		container_maybe_end(c);
}

static void member_free(struct peer_attachment *a)
{
	struct container_member *m = container_of(a, struct container_member, attachment);

	member_leave(m);
	free(m);
}

/* As dbus's Containers1 draft logs a contained connection. */
static void member_describe(struct peer_attachment *a, char *buf, size_t size)
{
	struct container_member *m = container_of(a, struct container_member, attachment);
	const struct container *c = m->container;

	if (c)
		snprintf(buf, size, "container=%s %s=\"%s\"", c->path, c->type, c->name);
}

/* Said Hello: its filter's view learns what it may see from the start. */
static int member_registered(struct peer_attachment *a)
{
	struct container_member *m = container_of(a, struct container_member, attachment);

	return m->view ? filter_view_hello(m->view) : 0;
}

/* GetConnectionCredentials: its instance, as dbus's draft names it. */
static void member_credentials(struct peer_attachment *a, struct dc_writer *w)
{
	struct container_member *m = container_of(a, struct container_member, attachment);

	if (!m->container)
		return;
	dc_writer_open(w, '{', NULL);
	dc_writer_write(w, "s", DC_INTERFACE_CONTAINERS1 ".Instance");
	dc_writer_open(w, 'v', "o");
	dc_writer_write(w, "o", m->container->path);
	dc_writer_close(w);
	dc_writer_close(w);
}

static const struct peer_attachment_ops member_ops = {
	.gone = member_gone,
	.free = member_free,
	.describe = member_describe,
	.registered = member_registered,
	.credentials = member_credentials,
};

struct container_member *container_member_of(const struct peer *peer)
{
	struct peer_attachment *a = peer_find_attachment(peer, &member_ops);

	return a ? container_of(a, struct container_member, attachment) : NULL;
}

struct container *container_of_peer(const struct peer *peer)
{
	struct container_member *m = container_member_of(peer);

	return m ? m->container : NULL;
}

struct filter_view *container_filter_view(const struct peer *peer)
{
	struct container_member *m;

	/* Most peers carry nothing: no walk for them. */
	if (list_is_empty(&peer->attachments))
		return NULL;
	m = container_member_of(peer);
	return m ? m->view : NULL;
}

int container_join(struct container *c, struct peer *peer)
{
	struct container_member *m;
	int r;

	if (container_member_of(peer))
		return -EINVAL;	/* in two instances: not a state we wrote */
	m = calloc(1, sizeof(*m));
	if (!m)
		return -ENOMEM;
	if (c->filter) {
		r = filter_view_new(&m->view, peer, c->filter);
		if (r < 0) {
			free(m);
			return r;
		}
	}
	m->container = c;
	list_append(&c->members, &m->link);
	c->n_members++;
	bus_journal_changed(c->registry->bus);
	peer->group = &c->group;
	/* A contained connection is never privileged (dbus's draft). */
	peer->restricted = true;
	peer_attach(peer, &m->attachment, &member_ops);
	return 0;
}

/* The instances a peer created: they stop when it goes. */
struct container_creator {
	struct peer_attachment attachment;
};

static void creator_gone(struct peer_attachment *a)
{
	struct container_registry *reg = a->peer->bus->containers;
	struct container *c, *tmp;

	if (!reg)
		return;
	/*
	 * As in dbus's draft, its instances stop listening when the creator
	 * goes; with StopOnDisconnect their connections are closed too. A
	 * creator is never in a container, so nothing it stops can be itself.
	 */
	list_for_each_entry_safe(c, tmp, &reg->instances, link) {
		if (c->creator != a->peer)
			continue;
		c->creator = NULL;
		if (c->stop_on_disconnect)
			container_stop_instance(c);
		else
			container_stop_listening(c);
	}
}

static void creator_free(struct peer_attachment *a)
{
	struct container_registry *reg = a->peer->bus->containers;
	struct container *c;

	/* Freed without closing (at exit): its instances forget it. */
	if (reg)
		list_for_each_entry(c, &reg->instances, link)
			if (c->creator == a->peer)
				c->creator = NULL;
	free(container_of(a, struct container_creator, attachment));
}

static const struct peer_attachment_ops creator_ops = {
	.gone = creator_gone,
	.free = creator_free,
};

int container_set_creator(struct container *c, struct peer *peer)
{
	struct container_creator *cr;

	if (!peer_find_attachment(peer, &creator_ops)) {
		cr = calloc(1, sizeof(*cr));
		if (!cr)
			return -ENOMEM;
		peer_attach(peer, &cr->attachment, &creator_ops);
	}
	c->creator = peer;
	return 0;
}

static int container_accept(void *userdata, int fd)
{
	struct container *c = userdata;
	struct bus *bus = c->registry->bus;
	struct ucred cred;
	socklen_t len = sizeof(cred);
	struct peer *peer;
	int r;

	/* Only the creator's uid may connect (root included), as in the draft. */
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0 || cred.uid != c->creator_uid) {
		close(fd);
		return 0;
	}
	if (c->n_members >= (unsigned long long)bus->limits.max_connections_per_container) {
		/* Limited as the instance's refusals: its app may connect in a loop. */
		log_limit_printf(&bus->log_limits, &c->group.refusal_log, LOG_WARNING,
				 "Closing connection to container server %s (%s \"%s\") because it "
				 "would exceed resource limit (max_connections_per_container=%lld)",
				 c->path, c->type, c->name,
				 (long long)bus->limits.max_connections_per_container);
		close(fd);
		return 0;
	}
	r = socket_transport_accept(socket_transport_of(bus), fd, NULL, SASL_MECH_EXTERNAL, &peer);
	if (r < 0 || !peer)
		return r;
	r = container_join(c, peer);
	if (r < 0)
		peer_close(peer, "out of memory");
	return 0;
}

void container_listening(struct container *c)
{
	c->listener->accept = container_accept;
	c->listener->accept_userdata = c;
}

/*
 * Where the sockets go (container.h): made on first use, mode 0700 (0755
 * for /run/dbus/containers, which the system bus' clients must reach).
 */
static int container_socket_dir(char **dirp)
{
	const char *runtime = getenv("XDG_RUNTIME_DIR");
	_cleanup_free_ char *parent = NULL;
	char *dir;

	if (runtime && *runtime) {
		if (asprintf(&parent, "%s/dbus-1", runtime) < 0)
			return -ENOMEM;
	} else if (geteuid() == 0) {
		if (mkdir("/run/dbus", 0755) < 0 && errno != EEXIST)
			return -errno;
		dir = strdup("/run/dbus/containers");
		if (!dir)
			return -ENOMEM;
		if (mkdir(dir, 0755) < 0 && errno != EEXIST) {
			free(dir);
			return -errno;
		}
		*dirp = dir;
		return 0;
	} else {
		const char *tmp = getenv("TMPDIR");

		if (asprintf(&parent, "%s/dbus-1", tmp && *tmp ? tmp : "/tmp") < 0)
			return -ENOMEM;
	}
	if (mkdir(parent, 0700) < 0 && errno != EEXIST)
		return -errno;
	if (asprintf(&dir, "%s/containers", parent) < 0)
		return -ENOMEM;
	if (mkdir(dir, 0700) < 0 && errno != EEXIST) {
		int r = -errno;

		free(dir);
		return r;
	}
	*dirp = dir;
	return 0;
}

/* dbus-<10 random characters> in the socket directory. */
static int container_socket_path(const char *dir, char **pathp)
{
	static const char chars[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
	uint8_t rnd[10];
	char name[11];

	if (getrandom(rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd))
		return -EIO;
	for (size_t i = 0; i < sizeof(rnd); i++)
		name[i] = chars[rnd[i] % (sizeof(chars) - 1)];
	name[sizeof(rnd)] = '\0';
	return asprintf(pathp, "%s/dbus-%s", dir, name) < 0 ? -ENOMEM : 0;
}

static unsigned int container_count_uid(const struct container_registry *reg, uid_t uid)
{
	const struct container *c;
	unsigned int n = 0;

	list_for_each_entry(c, &reg->instances, link)
		n += c->creator_uid == uid;
	return n;
}

/* Refuse with the error @name and @text (malloc()ed; NULL: -ENOMEM). */
static int container_fail(const char **errnamep, char **errtextp, const char *name,
			  char *text)
{
	if (!text)
		return -ENOMEM;
	*errnamep = name;
	*errtextp = text;
	return CONTAINER_E_REFUSED;
}

/*
 * A limit of the configuration refused @creator's AddServer: logged in
 * dbus-daemon's words (the error's text) at its level, warning, limited as
 * the creator's refusals are.
 */
static int container_fail_limit(struct peer *creator, const char **errnamep, char **errtextp,
				char *text)
{
	if (text)
		log_limit_printf(&creator->bus->log_limits, peer_refusal_log(creator),
				 LOG_WARNING, "%s", text);
	return container_fail(errnamep, errtextp, DC_ERROR_LIMITS_EXCEEDED, text);
}

static int container_listen(struct container *c, const char **errnamep, char **errtextp)
{
	struct bus *bus = c->registry->bus;
	_cleanup_free_ char *dir = NULL, *escaped = NULL, *address = NULL, *err = NULL;
	char *text;
	int r;

	r = container_socket_dir(&dir);
	if (r < 0)
		return container_fail(errnamep, errtextp, DC_ERROR_FAILED,
				      asprintf(&text, "Cannot make the directory of container "
					       "sockets: %s", strerror(-r)) < 0 ? NULL : text);
	r = container_socket_path(dir, &c->socket_path);
	if (r < 0)
		return r;
	escaped = address_escape(c->socket_path, strlen(c->socket_path));
	if (!escaped || asprintf(&address, "unix:path=%s", escaped) < 0)
		return -ENOMEM;
	r = listener_new(&c->listener, bus, address, &err);
	if (r < 0)
		return r;
	if (r == LISTENER_E_INVALID_ADDRESS)
		return container_fail(errnamep, errtextp, DC_ERROR_FAILED,
				      asprintf(&text, "Cannot listen on %s: %s", c->socket_path,
					       err ? err : "unusable address") < 0 ? NULL : text);
	container_listening(c);
	return listener_attach(c->listener);
}

int container_add(struct container_registry *reg, struct peer *creator, const char *type,
		  const char *name, const void *metadata, size_t n_metadata,
		  const void *creds, size_t n_creds, bool stop_on_disconnect,
		  struct container_filter *filter, struct container **cp,
		  const char **errnamep, char **errtextp)
{
	const struct bus_config_limits *lim = &reg->bus->limits;
	uint64_t id = reg->next_id++;	/* used up even by a failure, as in the draft */
	/* The filter's options count too: they are the instance's to keep. */
	size_t size = n_metadata + strlen(type) + strlen(name) + (filter ? filter->n_bytes : 0);
	struct container *c;
	char *text;
	int r;

	if ((long long)size > lim->max_container_metadata_bytes)
		return container_fail_limit(creator, errnamep, errtextp,
			asprintf(&text, "Connection \"%s\" (%s) is not allowed to set %zu bytes of "
				 "container metadata (max_container_metadata_bytes=%lld)",
				 peer_name(creator), peer_loginfo(creator), size,
				 (long long)lim->max_container_metadata_bytes) < 0 ? NULL : text);
	if ((long long)reg->n_instances >= lim->max_containers)
		return container_fail_limit(creator, errnamep, errtextp,
			asprintf(&text, "Connection \"%s\" (%s) is not allowed to create more "
				 "container servers (max_containers=%lld)", peer_name(creator),
				 peer_loginfo(creator), (long long)lim->max_containers) < 0 ?
			NULL : text);
	if ((long long)container_count_uid(reg, creator->uid) >= lim->max_containers_per_user)
		return container_fail_limit(creator, errnamep, errtextp,
			asprintf(&text, "Connection \"%s\" (%s) is not allowed to create more "
				 "container servers for uid %u (max_containers_per_user=%lld)",
				 peer_name(creator), peer_loginfo(creator), (unsigned)creator->uid,
				 (long long)lim->max_containers_per_user) < 0 ? NULL : text);

	r = container_new(reg, id, NULL, type, name, metadata, n_metadata, creds, n_creds,
			  creator->uid, stop_on_disconnect, &c);
	if (r < 0)
		return r;
	c->filter = container_filter_ref(filter);
	r = container_set_creator(c, creator);
	if (r == 0)
		r = container_listen(c, errnamep, errtextp);
	if (r) {
		container_free(c);
		return r;
	}
	*cp = c;
	return 0;
}

/*
 * A new instance's path: CONTAINER_PATH_PREFIX and 32 random hex digits, so
 * that a path tells nothing (how many instances came before, which exist)
 * and cannot be guessed to ask about another sandbox's instance.
 */
static int container_make_path(struct container_registry *reg, char **pathp)
{
	static const char hex[] = "0123456789abcdef";
	char digits[CONTAINER_PATH_RANDOM_BYTES * 2 + 1];
	uint8_t rnd[CONTAINER_PATH_RANDOM_BYTES];

	do {
		if (getrandom(rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd))
			return -EIO;
		for (size_t i = 0; i < sizeof(rnd); i++) {
			digits[2 * i] = hex[rnd[i] >> 4];
			digits[2 * i + 1] = hex[rnd[i] & 0xf];
		}
		digits[sizeof(digits) - 1] = '\0';
		free(*pathp);
		if (asprintf(pathp, CONTAINER_PATH_PREFIX "%s", digits) < 0) {
			*pathp = NULL;
			return -ENOMEM;
		}
	} while (container_find(reg, *pathp));
	return 0;
}

int container_new(struct container_registry *reg, uint64_t id, const char *path,
		  const char *type, const char *name, const void *metadata, size_t n_metadata,
		  const void *creds, size_t n_creds, uid_t creator_uid, bool stop_on_disconnect,
		  struct container **cp)
{
	struct container *c = calloc(1, sizeof(*c));
	int r;

	if (!c)
		return -ENOMEM;
	c->registry = reg;
	c->id = id;
	c->creator_uid = creator_uid;
	c->stop_on_disconnect = stop_on_disconnect;
	list_init(&c->members);
	log_limit_init(&c->filter_log, &container_filter_log_rule, container_filter_log_report);
	c->group.id = id + 1;	/* AddServer counts from 0 */
	log_limit_init(&c->group.refusal_log, &peer_refusal_log_rule,
		       container_refusal_log_report);
	if (path) {
		c->path = strdup(path);
	} else {
		r = container_make_path(reg, &c->path);
		if (r < 0) {
			free(c);
			return r;
		}
	}
	list_append(&reg->instances, &c->link);
	bus_journal_changed(reg->bus);
	/* The policy asks the instances only while there is one: no cost without. */
	if (reg->n_instances++ == 0)
		container_policy_add(reg);
	c->type = strdup(type);
	c->name = strdup(name);
	c->metadata = malloc(n_metadata ? n_metadata : 1);
	c->creator_creds = malloc(n_creds ? n_creds : 1);
	if (!c->path || !c->type || !c->name || !c->metadata || !c->creator_creds) {
		container_free(c);
		return -ENOMEM;
	}
	memcpy(c->metadata, metadata, n_metadata);
	c->n_metadata = n_metadata;
	memcpy(c->creator_creds, creds, n_creds);
	c->n_creator_creds = n_creds;
	*cp = c;
	return 0;
}

static int container_copy_asv(const void *data, size_t size, struct dc_writer *w)
{
	struct dc_reader r;
	int k;

	k = dc_reader_init(&r, data, size, DC_NATIVE_ENDIAN, "a{sv}", 5, 0);
	if (!k)
		k = dc_copy_value(&r, w);
	/* It was read from a valid message: a reader error is a bug. */
	return k > 0 ? -EINVAL : k;
}

int container_write_metadata(const struct container *c, struct dc_writer *w)
{
	return container_copy_asv(c->metadata, c->n_metadata, w);
}

int container_write_creator_creds(const struct container *c, struct dc_writer *w)
{
	return container_copy_asv(c->creator_creds, c->n_creator_creds, w);
}
