/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The bus driver: org.freedesktop.DBus and friends, table-driven.
 * See driver.h. Error names and texts follow dbus-daemon 1.14.
 */

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "broker/activation.h"
#include "broker/bus.h"
#include "broker/peer.h"
#include "broker/driver.h"
#include "broker/log.h"
#include "broker/match.h"
#include "broker/monitor.h"
#include "broker/name.h"
#include "broker/native.h"
#include "broker/policy.h"
#include "broker/reply.h"
#include "broker/router.h"
#include "broker/selinux.h"
#include "conf/config.h"
#include "conf/policy.h"
#include "dbus-compat/marshal.h"
#include "dbus-compat/message.h"
#include "dbus-compat/native-protocol.h"
#include "dbus-compat/protocol.h"
#include "dbus-compat/signature.h"
#include "dbus-compat/socket.h"
#include "dbus-compat/validate.h"

struct driver_call {
	struct bus *bus;
	struct peer *peer;
	struct message *msg;
	struct dc_reader reader;
	const char *err_name;
	char *err_text;
};

/* Record an error for the caller; returns 1 (the "error set" code). */
static int driver_fail(struct driver_call *c, const char *name, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static int driver_fail(struct driver_call *c, const char *name, const char *fmt, ...)
{
	va_list ap;

	c->err_name = name;
	free(c->err_text);
	c->err_text = NULL;
	va_start(ap, fmt);
	if (vasprintf(&c->err_text, fmt, ap) < 0)
		c->err_text = NULL;
	va_end(ap);
	return 1;
}

static void reply_init(struct driver_call *c, struct message_builder *b, const char *sig)
{
	message_builder_init_method_return(b, c->msg, sig);
	b->sender = DC_SERVICE_DBUS;
}

/* Seal and send a reply (unless the caller asked for none). Deinits @b. */
static int reply_send(struct driver_call *c, struct message_builder *b)
{
	_cleanup_message_ struct message *m = NULL;
	int r;

	if (c->msg->flags & DC_FLAG_NO_REPLY_EXPECTED) {
		message_builder_deinit(b);
		return 0;
	}
	r = message_builder_seal(b, bus_next_serial(c->bus), &m);
	message_builder_deinit(b);
	if (r < 0)
		return r;
	router_send_from_driver(c->bus, c->peer, m);
	return 0;
}

static int reply_empty(struct driver_call *c)
{
	struct message_builder b;

	reply_init(c, &b, "");
	return reply_send(c, &b);
}

static int reply_u(struct driver_call *c, uint32_t v)
{
	struct message_builder b;

	reply_init(c, &b, "u");
	dc_writer_write(&b.body, "u", v);
	return reply_send(c, &b);
}

static int reply_s(struct driver_call *c, const char *s)
{
	struct message_builder b;

	reply_init(c, &b, "s");
	dc_writer_write(&b.body, "s", s);
	return reply_send(c, &b);
}

static int reply_b(struct driver_call *c, bool v)
{
	struct message_builder b;

	reply_init(c, &b, "b");
	dc_writer_write(&b.body, "b", (int)v);
	return reply_send(c, &b);
}

static bool caller_is_privileged(const struct driver_call *c)
{
	return c->peer->uid == c->bus->uid || c->peer->uid == 0;
}

/* Read the single string argument every "s" method has. */
static int read_name(struct driver_call *c, const char **namep)
{
	int r = dc_reader_read(&c->reader, "s", namep);

	if (r)
		return driver_fail(c, DC_ERROR_INVALID_ARGS, "Invalid arguments");
	return 0;
}

/*
 * Which connection does the "s" argument denote (bus_driver_get_conn_helper)?
 * Return: 0 with *selfp set for org.freedesktop.DBus or *connp for a peer,
 * 1 (error set: NameHasNoOwner / InvalidArgs).
 */
static int lookup_conn(struct driver_call *c, const char *what, const char **namep,
		       struct peer **connp, bool *selfp)
{
	const char *name;
	int r;

	r = read_name(c, &name);
	if (r)
		return r;
	*namep = name;
	*selfp = !strcmp(name, DC_SERVICE_DBUS);
	if (*selfp)
		return 0;
	*connp = bus_resolve(c->bus, name);
	if (!*connp)
		return driver_fail(c, DC_ERROR_NAME_HAS_NO_OWNER,
				   "Could not get %s of name '%s': no such name", what, name);
	return 0;
}

/* ------------------------------------------------------- org.freedesktop.DBus */

static int method_hello(struct driver_call *c)
{
	/* Registered connections only get here (driver_hello() handles the first). */
	return driver_fail(c, DC_ERROR_FAILED, "Already handled an Hello message");
}

static int method_request_name(struct driver_call *c)
{
	const char *lsm = NULL;
	struct peer *peer = c->peer;
	const char *name;
	uint32_t flags, reply;
	struct name *n;
	bool queued = false;
	int r;

	r = dc_reader_read(&c->reader, "su", &name, &flags);
	if (r)
		return driver_fail(c, DC_ERROR_INVALID_ARGS, "Invalid arguments");

	if (!validate_bus_name_lenient(name, strlen(name)))
		return driver_fail(c, DC_ERROR_INVALID_ARGS,
				   "Requested bus name \"%s\" is not valid", name);
	if (name[0] == ':')
		return driver_fail(c, DC_ERROR_INVALID_ARGS,
				   "Cannot acquire a service starting with ':' such as \"%s\"",
				   name);
	if (!strcmp(name, DC_SERVICE_DBUS))
		return driver_fail(c, DC_ERROR_INVALID_ARGS,
				   "Connection \"%s\" is not allowed to own the service \"%s\" "
				   "because it is reserved for D-Bus' use only",
				   peer_name(peer), name);

	/* The LSMs first, then the configuration, as dbus-daemon asks them. */
	r = policy_check_own_lsm(c->bus, peer, name, &lsm);
	if (r < 0)
		return r;
	if (r == 0)
		return driver_fail(c, DC_ERROR_ACCESS_DENIED,
				   "Connection \"%s\" is not allowed to own the service \"%s\" "
				   "due to %s policy", peer_name(peer), name, lsm);
	if (peer->policy) {
		const struct bus_policy_rule *rule = NULL;

		if (!bus_client_policy_check_own(peer->policy, name, &rule)) {
			/* dbus-daemon's text, then which rule decided (issue 6) */
			_cleanup_free_ char *why = rule ? bus_policy_rule_describe(rule) : NULL;

			return driver_fail(c, DC_ERROR_ACCESS_DENIED,
				"Connection \"%s\" is not allowed to own the service \"%s\" due "
				"to security policies in the configuration file (%s)",
				peer_name(peer), name, why ? why : "no rule allows it");
		}
	}

	/* A new entry in some queue needs room under both limits. */
	n = name_registry_find(c->bus->names, name);
	if (n) {
		struct name_ownership *o;

		list_for_each_entry(o, &n->queue, name_link)
			if (o->owner == &peer->owner)
				queued = true;
	}
	if (!queued) {
		/* The unique name counts as one name, as in dbus-daemon. */
		if (peer->owner.n_ownerships + 1 >=
		    (size_t)c->bus->limits.max_names_per_connection)
			return driver_fail(c, DC_ERROR_LIMITS_EXCEEDED,
				"Connection \"%s\" is not allowed to own more services "
				"(increase limits in configuration file if required; "
				"max_names_per_connection=%lld)",
				peer_name(peer),
				(long long)c->bus->limits.max_names_per_connection);
		if (peer_charge(peer, USER_SLOT_NAMES, 1))
			return driver_fail(c, DC_ERROR_LIMITS_EXCEEDED,
					   "The user %u owns too many names", (unsigned)peer->uid);
		peer_uncharge(peer, USER_SLOT_NAMES, 1);
	}

	r = name_registry_request(c->bus->names, &peer->owner, name, flags, &reply);
	if (r < 0)
		return r;
	if (r > 0)
		return driver_fail(c, DC_ERROR_INVALID_ARGS, "%s", name_error_string(r));
	router_sync_name_charge(peer);
	driver_stats_names_changed(c->bus, peer);
	/* The signals went out first (the registry emitted them), then the reply. */
	return reply_u(c, reply);
}

static int method_release_name(struct driver_call *c)
{
	const char *name;
	uint32_t reply;
	int r;

	r = read_name(c, &name);
	if (r)
		return r;
	if (!validate_bus_name_lenient(name, strlen(name)))
		return driver_fail(c, DC_ERROR_INVALID_ARGS, "Given bus name \"%s\" is not valid",
				   name);
	if (name[0] == ':')
		return driver_fail(c, DC_ERROR_INVALID_ARGS,
				   "Cannot release a service starting with ':' such as \"%s\"",
				   name);
	if (!strcmp(name, DC_SERVICE_DBUS))
		return driver_fail(c, DC_ERROR_INVALID_ARGS,
				   "Cannot release the %s service because it is owned by the bus",
				   name);
	r = name_registry_release(c->bus->names, &c->peer->owner, name, &reply);
	if (r < 0)
		return r;
	if (r > 0)
		return driver_fail(c, DC_ERROR_INVALID_ARGS, "%s", name_error_string(r));
	router_sync_name_charge(c->peer);
	return reply_u(c, reply);
}

static int method_start_service_by_name(struct driver_call *c)
{
	const char *name;
	uint32_t flags;
	int r;

	r = dc_reader_read(&c->reader, "su", &name, &flags);
	if (r)
		return driver_fail(c, DC_ERROR_INVALID_ARGS, "Invalid arguments");
	/* Replies (1 later, 2 now) and errors are sent by the activation module. */
	return activation_start(c->bus->activation, c->peer, c->msg, name, false);
}

static int method_update_activation_environment(struct driver_call *c)
{
	struct activation_error err = {};
	int r;

	/* The privilege check is the method table's (METHOD_PRIVILEGED). */
	r = activation_update_environment(c->bus->activation, c->msg, &err);
	if (r > 0)
		r = driver_fail(c, err.name, "%s", err.message ? err.message : "");
	activation_error_deinit(&err);
	if (r)
		return r;
	return reply_empty(c);
}

static int method_name_has_owner(struct driver_call *c)
{
	const char *name;
	int r;

	r = read_name(c, &name);
	if (r)
		return r;
	return reply_b(c, !strcmp(name, DC_SERVICE_DBUS) || bus_resolve(c->bus, name));
}

static int method_list_names(struct driver_call *c)
{
	struct message_builder b;
	struct name_owner *o = NULL;
	struct name *n;

	reply_init(c, &b, "as");
	dc_writer_open(&b.body, 'a', NULL);
	dc_writer_write(&b.body, "s", DC_SERVICE_DBUS);
	while ((o = name_registry_next_unique(c->bus->names, o)))
		dc_writer_write(&b.body, "s", o->unique_name);
	list_for_each_entry(n, &c->bus->names->name_list, registry_link)
		dc_writer_write(&b.body, "s", n->str);
	dc_writer_close(&b.body);
	return reply_send(c, &b);
}

static int method_list_activatable_names(struct driver_call *c)
{
	const struct bus_services *services;
	struct message_builder b;
	size_t i;

	reply_init(c, &b, "as");
	dc_writer_open(&b.body, 'a', NULL);
	dc_writer_write(&b.body, "s", DC_SERVICE_DBUS);
	services = activation_services(c->bus->activation);
	for (i = 0; i < services->n_services; i++)
		dc_writer_write(&b.body, "s", bus_services_get(services, i)->name);
	dc_writer_close(&b.body);
	return reply_send(c, &b);
}

/* An LSM (AppArmor) does not let the caller eavesdrop. */
static int eavesdrop_denied(struct driver_call *c)
{
	return driver_fail(c, DC_ERROR_ACCESS_DENIED,
			   "Connection \"%s\" is not allowed to eavesdrop due to AppArmor policy",
			   peer_name(c->peer));
}

static int method_add_match(struct driver_call *c)
{
	struct peer *peer = c->peer;
	struct match_rule *rule = NULL;
	const char *text, *reason = NULL;
	int r;

	if (peer->matches.n_rules >= (size_t)c->bus->limits.max_match_rules_per_connection)
		return driver_fail(c, DC_ERROR_LIMITS_EXCEEDED,
			"Connection \"%s\" is not allowed to add more match rules "
			"(increase limits in configuration file if required; "
			"max_match_rules_per_connection=%lld)",
			peer_name(peer),
			(long long)c->bus->limits.max_match_rules_per_connection);
	r = read_name(c, &text);
	if (r)
		return r;
	r = match_rule_parse(&rule, text, &reason);
	if (r < 0)
		return r;
	if (r == MATCH_E_TOO_LONG)
		return driver_fail(c, DC_ERROR_LIMITS_EXCEEDED, "%s",
				   reason ? reason : "Match rule is too long");
	if (r)
		return driver_fail(c, DC_ERROR_MATCH_RULE_INVALID, "%s",
				   reason ? reason : "Invalid match rule");
	if (rule->eavesdrop && !caller_is_privileged(c)) {
		match_rule_free(rule);
		return driver_fail(c, DC_ERROR_ACCESS_DENIED,
				   "rejected attempt to call AddMatch with eavesdrop=true by "
				   "connection %s with uid %u", peer_name(peer),
				   (unsigned)peer->uid);
	}
	if (rule->eavesdrop) {
		r = policy_check_eavesdrop_lsm(c->bus, peer);
		if (r <= 0) {
			match_rule_free(rule);
			return r < 0 ? r : eavesdrop_denied(c);
		}
	}
	if (peer_charge(peer, USER_SLOT_MATCHES, 1)) {
		match_rule_free(rule);
		return driver_fail(c, DC_ERROR_LIMITS_EXCEEDED,
				   "The user %u has too many match rules", (unsigned)peer->uid);
	}
	r = match_registry_add(c->bus->matches, &peer->matches, rule);
	if (r < 0) {
		peer_uncharge(peer, USER_SLOT_MATCHES, 1);
		match_rule_free(rule);
		return r;
	}
	if (rule->eavesdrop)
		c->bus->n_eavesdrop_rules++;
	driver_stats_matches_changed(c->bus, peer);
	return reply_empty(c);
}

static int method_remove_match(struct driver_call *c)
{
	struct peer *peer = c->peer;
	struct match_rule *rule = NULL, *other;
	const char *text, *reason = NULL;
	int r;

	r = read_name(c, &text);
	if (r)
		return r;
	r = match_rule_parse(&rule, text, &reason);
	if (r < 0)
		return r;
	if (r == MATCH_E_TOO_LONG)
		return driver_fail(c, DC_ERROR_LIMITS_EXCEEDED, "%s",
				   reason ? reason : "Match rule is too long");
	if (r)
		return driver_fail(c, DC_ERROR_MATCH_RULE_INVALID, "%s",
				   reason ? reason : "Invalid match rule");

	/* The newest equal rule goes, as dbus-daemon does. */
	other = NULL;
	for (struct list_node *p = peer->matches.rules.prev; p != &peer->matches.rules;
	     p = p->prev) {
		struct match_rule *x = list_entry(p, struct match_rule, owner_link);

		if (match_rule_equal(x, rule)) {
			other = x;
			break;
		}
	}
	match_rule_free(rule);
	if (!other)
		return driver_fail(c, DC_ERROR_MATCH_RULE_NOT_FOUND,
				   "The given match rule wasn't found and can't be removed");
	if (other->eavesdrop && c->bus->n_eavesdrop_rules)
		c->bus->n_eavesdrop_rules--;
	match_registry_remove(other);
	peer_uncharge(peer, USER_SLOT_MATCHES, 1);
	return reply_empty(c);
}

static int method_get_name_owner(struct driver_call *c)
{
	struct peer *owner;
	const char *name;
	int r;

	r = read_name(c, &name);
	if (r)
		return r;
	if (!strcmp(name, DC_SERVICE_DBUS))
		return reply_s(c, DC_SERVICE_DBUS);
	owner = bus_resolve(c->bus, name);
	if (!owner)
		return driver_fail(c, DC_ERROR_NAME_HAS_NO_OWNER,
				   "Could not get owner of name '%s': no such name", name);
	return reply_s(c, peer_name(owner));
}

static int method_list_queued_owners(struct driver_call *c)
{
	struct message_builder b;
	struct peer *owner;
	struct name *n;
	const char *name;
	int r;

	r = read_name(c, &name);
	if (r)
		return r;
	reply_init(c, &b, "as");
	dc_writer_open(&b.body, 'a', NULL);
	if (!strcmp(name, DC_SERVICE_DBUS)) {
		dc_writer_write(&b.body, "s", DC_SERVICE_DBUS);
	} else if (name[0] == ':' && (owner = bus_resolve(c->bus, name))) {
		dc_writer_write(&b.body, "s", peer_name(owner));
	} else if ((n = name_registry_find(c->bus->names, name))) {
		struct name_ownership *o;

		list_for_each_entry(o, &n->queue, name_link)
			dc_writer_write(&b.body, "s", o->owner->unique_name);
	} else {
		message_builder_deinit(&b);
		return driver_fail(c, DC_ERROR_NAME_HAS_NO_OWNER,
				   "Could not get owners of name '%s': no such name", name);
	}
	dc_writer_close(&b.body);
	return reply_send(c, &b);
}

static int method_get_connection_unix_user(struct driver_call *c)
{
	struct peer *peer = NULL;
	bool self = false;
	const char *name;
	int r;

	r = lookup_conn(c, "UID", &name, &peer, &self);
	if (r)
		return r;
	/* A TCP peer that authenticated with ANONYMOUS has no uid. */
	if (!self && peer->uid == (uid_t)-1)
		return driver_fail(c, DC_ERROR_FAILED, "Could not determine UID for '%s'", name);
	return reply_u(c, self ? (uint32_t)c->bus->uid : (uint32_t)peer->uid);
}

static int method_get_connection_unix_process_id(struct driver_call *c)
{
	struct peer *peer = NULL;
	bool self = false;
	const char *name;
	pid_t pid;
	int r;

	r = lookup_conn(c, "PID", &name, &peer, &self);
	if (r)
		return r;
	pid = self ? c->bus->pid : peer->pid;
	if (pid <= 0)
		return driver_fail(c, DC_ERROR_UNIX_PROCESS_ID_UNKNOWN,
				   "Could not determine PID for '%s'", name);
	return reply_u(c, (uint32_t)pid);
}

static void asv_u(struct dc_writer *w, const char *key, uint32_t v)
{
	dc_writer_open(w, '{', NULL);
	dc_writer_write(w, "s", key);
	dc_writer_open(w, 'v', "u");
	dc_writer_write(w, "u", v);
	dc_writer_close(w);
	dc_writer_close(w);
}

static void asv_s(struct dc_writer *w, const char *key, const char *v)
{
	dc_writer_open(w, '{', NULL);
	dc_writer_write(w, "s", key);
	dc_writer_open(w, 'v', "s");
	dc_writer_write(w, "s", v);
	dc_writer_close(w);
	dc_writer_close(w);
}

#ifndef SO_PEERPIDFD
#define SO_PEERPIDFD 77
#endif

/*
 * A pidfd of the bus itself: pidfd_open(), or where that is missing (e.g.
 * under valgrind) the peer pidfd of a socketpair, whose peer is us.
 */
static int open_own_pidfd(void)
{
	int fd = (int)syscall(SYS_pidfd_open, getpid(), 0);
	int sv[2];
	socklen_t l = sizeof(fd);

	if (fd >= 0)
		return fd;
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
		return -1;
	if (getsockopt(sv[0], SOL_SOCKET, SO_PEERPIDFD, &fd, &l) < 0)
		fd = -1;
	close(sv[0]);
	close(sv[1]);
	return fd;
}

/*
 * ProcessFD (dbus-daemon 1.15.8, dbus-broker 35): a pidfd of the process,
 * attached to the reply, only for a caller that can receive fds.
 */
static void asv_process_fd(struct driver_call *c, struct message_builder *b, int *pidfd)
{
	if (*pidfd < 0 || !peer_can_receive_fds(c->peer))
		return;
	dc_writer_open(&b->body, '{', NULL);
	dc_writer_write(&b->body, "s", "ProcessFD");
	dc_writer_open(&b->body, 'v', "h");
	dc_writer_write(&b->body, "h", (uint32_t)0);
	dc_writer_close(&b->body);
	dc_writer_close(&b->body);
	b->fds = pidfd;
	b->n_fds = 1;
}

static int method_get_connection_credentials(struct driver_call *c)
{
	struct peer *peer = NULL;
	bool self = false;
	struct message_builder b;
	const char *name;
	struct dc_writer *w;
	int pidfd;
	int r;

	r = lookup_conn(c, "credentials", &name, &peer, &self);
	if (r)
		return r;
	reply_init(c, &b, "a{sv}");
	w = &b.body;
	dc_writer_open(w, 'a', NULL);
	if (self) {
		asv_u(w, "UnixUserID", (uint32_t)c->bus->uid);
		asv_u(w, "ProcessID", (uint32_t)c->bus->pid);
		/* Our own pidfd, opened once (after --fork, so of the bus itself). */
		if (c->bus->pidfd < 0)
			c->bus->pidfd = open_own_pidfd();
		pidfd = c->bus->pidfd;
		asv_process_fd(c, &b, &pidfd);
	} else {
		/* Groups and label belong to the socket's peer, not to a proven identity. */
		const struct socket_creds *cr = peer->socket_identity ?
						&peer->creds : NULL;

		if (peer->uid != (uid_t)-1)
			asv_u(w, "UnixUserID", (uint32_t)peer->uid);
		if (cr) {
			/* The primary group first, then the supplementary ones, no duplicates. */
			_cleanup_free_ uint32_t *gids = calloc(cr->n_groups + 1, sizeof(*gids));
			size_t n = 0;

			if (!gids) {
				message_builder_deinit(&b);
				return -ENOMEM;
			}
			gids[n++] = (uint32_t)cr->gid;
			for (size_t i = 0; i < cr->n_groups; i++)
				if ((uint32_t)cr->groups[i] != (uint32_t)cr->gid)
					gids[n++] = (uint32_t)cr->groups[i];
			dc_writer_open(w, '{', NULL);
			dc_writer_write(w, "s", "UnixGroupIDs");
			dc_writer_open(w, 'v', "au");
			dc_writer_append_array(w, 'u', gids, n);
			dc_writer_close(w);
			dc_writer_close(w);
		}
		if (peer->pid > 0)
			asv_u(w, "ProcessID", (uint32_t)peer->pid);
		if (cr && cr->label) {
			/* GVariant bytestring convention: the NUL is included. */
			dc_writer_open(w, '{', NULL);
			dc_writer_write(w, "s", "LinuxSecurityLabel");
			dc_writer_open(w, 'v', "ay");
			dc_writer_append_array(w, 'y', cr->label, strlen(cr->label) + 1);
			dc_writer_close(w);
			dc_writer_close(w);
		}
		pidfd = peer_get_pidfd(peer);
		asv_process_fd(c, &b, &pidfd);
	}
	dc_writer_close(w);
	return reply_send(c, &b);
}

static int method_get_adt_audit_session_data(struct driver_call *c)
{
	struct peer *peer = NULL;
	bool self = false;
	const char *name;
	int r;

	r = lookup_conn(c, "audit session data", &name, &peer, &self);
	if (r)
		return r;
	/* No ADT (Solaris audit) on Linux, as in dbus-daemon. */
	return driver_fail(c, DC_ERROR_ADT_AUDIT_DATA_UNKNOWN,
			   "Could not determine audit session data for '%s'", name);
}

static int method_get_connection_selinux_security_context(struct driver_call *c)
{
	struct peer *peer = NULL;
	bool self = false;
	struct message_builder b;
	_cleanup_free_ char *ctx = NULL;
	const char *name;
	int r;

	r = lookup_conn(c, "security context", &name, &peer, &self);
	if (r)
		return r;
	/* Only with SELinux: any other LSM label is not an SELinux context. */
	r = c->bus->selinux ? selinux_context(c->bus->selinux, self ? NULL : peer, &ctx) : 1;
	if (r < 0)
		return r;
	if (r)
		return driver_fail(c, DC_ERROR_SELINUX_SECURITY_CONTEXT_UNKNOWN,
				   "Could not determine security context for '%s'", name);
	/* The context without its NUL, as dbus-daemon sends it. */
	reply_init(c, &b, "ay");
	dc_writer_append_array(&b.body, 'y', ctx, strlen(ctx));
	return reply_send(c, &b);
}

static int method_reload_config(struct driver_call *c)
{
	_cleanup_free_ char *err = NULL;
	int r;

	r = bus_reload_config(c->bus, &err);
	if (r < 0)
		return driver_fail(c, DC_ERROR_FAILED, "Reloading the configuration failed: %s",
				   strerror(-r));
	if (r > 0)
		return driver_fail(c, DC_ERROR_FAILED, "%s", err ? err : "invalid configuration");
	return reply_empty(c);
}

static int method_get_id(struct driver_call *c)
{
	return reply_s(c, c->bus->guid);
}

static int method_become_monitor(struct driver_call *c)
{
	struct match_rule **rules = NULL;
	size_t n = 0, i;
	uint32_t flags;
	int r;

	/* Asked before the arguments are read, as dbus-daemon asks it. */
	r = policy_check_eavesdrop_lsm(c->bus, c->peer);
	if (r <= 0)
		return r < 0 ? r : eavesdrop_denied(c);

	r = dc_reader_enter(&c->reader, 'a');
	while (!r && dc_reader_peek(&c->reader) == 's') {
		const char *text, *reason = NULL;
		struct match_rule **v;

		r = dc_reader_read(&c->reader, "s", &text);
		if (r)
			break;
		v = realloc(rules, (n + 1) * sizeof(*rules));
		if (!v) {
			r = -ENOMEM;
			break;
		}
		rules = v;
		r = match_rule_parse(&rules[n], text, &reason);
		if (r < 0)
			break;
		if (r) {
			r = driver_fail(c, r == MATCH_E_TOO_LONG ? DC_ERROR_LIMITS_EXCEEDED :
					DC_ERROR_MATCH_RULE_INVALID, "%s",
					reason ? reason : "Invalid match rule");
			goto out;
		}
		n++;
	}
	if (!r)
		r = dc_reader_exit(&c->reader);
	if (!r)
		r = dc_reader_read(&c->reader, "u", &flags);
	if (r > 0) {
		r = driver_fail(c, DC_ERROR_INVALID_ARGS, "Invalid arguments");
		goto out;
	}
	if (r < 0)
		goto out;
	if (flags != 0) {
		r = driver_fail(c, DC_ERROR_INVALID_ARGS,
				"BecomeMonitor does not support any flags yet");
		goto out;
	}
	/* An empty list means "everything", i.e. the rule "". */
	if (n == 0) {
		const char *reason;

		rules = calloc(1, sizeof(*rules));
		if (!rules) {
			r = -ENOMEM;
			goto out;
		}
		r = match_rule_parse(&rules[0], "", &reason);
		if (r) {
			r = r < 0 ? r : -EINVAL;
			goto out;
		}
		n = 1;
	}

	/* The reply goes out while the connection is still a normal one. */
	r = reply_empty(c);
	if (r < 0)
		goto out;
	r = monitor_become(c->peer, rules, n);
	if (r >= 0 && !c->peer->closed)
		driver_stats_matches_changed(c->bus, c->peer);
out:
	for (i = 0; i < n; i++)
		if (rules[i])
			match_rule_free(rules[i]);
	free(rules);
	return r;
}

static int method_get_machine_id(struct driver_call *c)
{
	return reply_s(c, c->bus->machine_id);
}

static int method_ping(struct driver_call *c)
{
	return reply_empty(c);
}

/* ----------------------------------------------------------------- Stats */

/*
 * org.freedesktop.DBus.Debug.Stats reports the keys of dbus-daemon 1.14
 * (bus/stats.c), with its meanings:
 *  - BusNames: entries in name queues, every connection's unique name
 *    included (a connection owning two names and queued for a third counts
 *    4); monitors have none. MatchRules: AddMatch rules, monitors' filters
 *    included. Peak*: the highest value seen; Peak*PerConnection: the most
 *    one connection ever had.
 *  - ActiveConnections: connections after Hello, monitors included;
 *    IncompleteConnections: before it.
 *  - Serial: how many times the method was called before (one counter for
 *    GetStats, one for GetConnectionStats).
 *  - ListMemPool{Used,Cached,Allocated}Bytes: dbus-daemon's pool of list
 *    nodes; here the pool of output queue entries (struct delivery): bytes
 *    in use, kept for reuse, and both.
 * GetConnectionStats: Outgoing* is the output queue (messages, bytes, fds
 * queued and not yet written, with peaks; for a native client, what its
 * socket holds plus what it has not read of its bus1 queue, as the broker
 * last learnt it from the kernel); Incoming* is what the bus holds
 * of the connection's messages. The broker routes each message as soon as
 * it is read, so IncomingMessages is 0 and Incoming{Bytes,FDs} count the
 * message being routed (the caller's own call, for itself); once queued, a
 * message counts against its receivers' Outgoing* only (dbus-daemon also
 * keeps charging its sender until it is written).
 */

static uint32_t conn_bus_names(const struct peer *peer)
{
	return (uint32_t)peer->owner.n_ownerships + (peer->owner.registry ? 1 : 0);
}

/* After a name request (or Hello) of @peer: raise the peaks. */
void driver_stats_names_changed(struct bus *bus, struct peer *peer)
{
	uint32_t total = (uint32_t)(bus->names->n_ownerships + hmap_size(&bus->names->uniques));
	uint32_t mine = conn_bus_names(peer);

	if (total > bus->peak_names)
		bus->peak_names = total;
	if (mine > peer->peak_names)
		peer->peak_names = mine;
	if (mine > bus->peak_names_per_conn)
		bus->peak_names_per_conn = mine;
}

static uint32_t bus_match_rules(struct bus *bus)
{
	return (uint32_t)(match_registry_count(bus->matches) +
			  match_registry_count(bus->monitor_matches));
}

/* After AddMatch or BecomeMonitor of @peer: raise the peaks. */
void driver_stats_matches_changed(struct bus *bus, struct peer *peer)
{
	uint32_t total = bus_match_rules(bus);
	uint32_t mine = (uint32_t)peer->matches.n_rules;

	if (total > bus->peak_matches)
		bus->peak_matches = total;
	if (mine > peer->peak_matches)
		peer->peak_matches = mine;
	if (mine > bus->peak_matches_per_conn)
		bus->peak_matches_per_conn = mine;
}

static int method_get_stats(struct driver_call *c)
{
	struct bus *bus = c->bus;
	struct message_builder b;
	struct dc_writer *w;
	size_t used, cached;

	delivery_cache_stats(&c->bus->deliveries, &used, &cached);
	reply_init(c, &b, "a{sv}");
	w = &b.body;
	dc_writer_open(w, 'a', NULL);
	asv_u(w, "Serial", bus->stats_serial++);
	asv_u(w, "ListMemPoolUsedBytes", (uint32_t)used);
	asv_u(w, "ListMemPoolCachedBytes", (uint32_t)cached);
	asv_u(w, "ListMemPoolAllocatedBytes", (uint32_t)(used + cached));
	asv_u(w, "ActiveConnections", bus->n_active);
	asv_u(w, "IncompleteConnections", bus->n_incomplete);
	asv_u(w, "MatchRules", bus_match_rules(bus));
	asv_u(w, "PeakMatchRules", bus->peak_matches);
	asv_u(w, "PeakMatchRulesPerConnection", bus->peak_matches_per_conn);
	asv_u(w, "BusNames", (uint32_t)(bus->names->n_ownerships +
					hmap_size(&bus->names->uniques)));
	asv_u(w, "PeakBusNames", bus->peak_names);
	asv_u(w, "PeakBusNamesPerConnection", bus->peak_names_per_conn);
	dc_writer_close(w);
	return reply_send(c, &b);
}

static int method_get_connection_stats(struct driver_call *c)
{
	uint64_t out_bytes, out_fds, out_msgs;
	struct native_conn *nc;
	struct peer *peer = NULL;
	bool self = false;
	struct message_builder b;
	struct dc_writer *w;
	const char *name;
	int r;

	r = lookup_conn(c, "statistics", &name, &peer, &self);
	if (r)
		return r;
	if (self)
		return driver_fail(c, DC_ERROR_INVALID_ARGS,
				   "GetConnectionStats is not meaningful for the message bus "
				   "\"%s\" itself", name);
	reply_init(c, &b, "a{sv}");
	w = &b.body;
	dc_writer_open(w, 'a', NULL);
	asv_u(w, "Serial", c->bus->conn_stats_serial++);
	asv_u(w, "MatchRules", (uint32_t)peer->matches.n_rules);
	asv_u(w, "PeakMatchRules", peer->peak_matches);
	asv_u(w, "BusNames", conn_bus_names(peer));
	asv_u(w, "PeakBusNames", peer->peak_names);
	asv_s(w, "UniqueName", peer_name(peer));
	asv_u(w, "IncomingMessages", 0);
	asv_u(w, "IncomingBytes", (uint32_t)peer->n_dispatching_bytes);
	asv_u(w, "IncomingFDs", (uint32_t)peer->n_dispatching_fds);
	asv_u(w, "PeakIncomingBytes", (uint32_t)peer->peak_dispatching_bytes);
	asv_u(w, "PeakIncomingFDs", (uint32_t)peer->peak_dispatching_fds);
	out_bytes = peer->n_queued_bytes;
	out_fds = peer->n_queued_fds;
	out_msgs = peer->n_queued_msgs;
	nc = native_conn_of(peer);
	if (nc) {
		uint64_t bytes, fds, msgs;

		/* A native client's output: its bus1 queue, after what its socket holds. */
		native_conn_get_queued(nc, &bytes, &fds, &msgs);
		out_bytes += bytes;
		out_fds += fds;
		out_msgs += msgs;
	}
	asv_u(w, "OutgoingMessages", (uint32_t)out_msgs);
	asv_u(w, "OutgoingBytes", (uint32_t)out_bytes);
	asv_u(w, "OutgoingFDs", (uint32_t)out_fds);
	asv_u(w, "PeakOutgoingBytes", (uint32_t)peer->peak_queued_bytes);
	asv_u(w, "PeakOutgoingFDs", (uint32_t)peer->peak_queued_fds);
	dc_writer_close(w);
	return reply_send(c, &b);
}

static int method_get_all_match_rules(struct driver_call *c)
{
	struct message_builder b;
	struct dc_writer *w;
	struct peer *peer;
	char buf[MATCH_RULE_MAX_LENGTH * 4];

	reply_init(c, &b, "a{sas}");
	w = &b.body;
	dc_writer_open(w, 'a', NULL);
	list_for_each_entry(peer, &c->bus->peers, bus_link) {
		struct match_rule *rule;

		if (!peer->registered || peer->closed)
			continue;
		dc_writer_open(w, '{', NULL);
		dc_writer_write(w, "s", peer_name(peer));
		dc_writer_open(w, 'a', NULL);
		list_for_each_entry(rule, &peer->matches.rules, owner_link) {
			if (match_rule_to_string(rule, buf, sizeof(buf)) >= 0)
				dc_writer_write(w, "s", buf);
		}
		dc_writer_close(w);
		dc_writer_close(w);
	}
	dc_writer_close(w);
	return reply_send(c, &b);
}

/* --------------------------------------------- org.freedesktop.DBus.Bus1 */

/*
 * The native clients' bootstrap (docs/native-protocol.md): Connect(h) with
 * the client's /dev/bus1 fd, before Hello. The reply (the client's handles
 * of its three nodes) goes out on the socket; everything after it over bus1.
 */
static int method_bus1_connect(struct driver_call *c)
{
	_cleanup_message_ struct message *reply = NULL;
	struct peer *peer = c->peer;
	struct message *msg = c->msg;
	struct message_builder b;
	struct native_conn *nc;
	uint64_t handles[3];
	uint32_t index;
	int r;

	if (!c->bus->native)
		return driver_fail(c, DC_ERROR_NOT_SUPPORTED,
				   "This bus has no bus1 transport (/dev/bus1 is absent)");
	if (peer->output != peer->transport || peer->registered)
		return driver_fail(c, DC_ERROR_FAILED,
				   "Connect must be the first call, and only one");
	if (strcmp(msg->signature, DC_BUS1_CONNECT_SIGNATURE))
		return driver_fail(c, DC_ERROR_INVALID_ARGS,
				   "Connect takes one unix fd (signature h)");
	if (dc_reader_read(&c->reader, "h", &index) || index >= msg->n_fds)
		return driver_fail(c, DC_ERROR_INVALID_ARGS,
				   "Connect needs its fd (negotiate NEGOTIATE_UNIX_FD)");

	r = native_attach(c->bus->native, peer, msg->fds[index], handles, &nc);
	if (r < 0)
		return r;
	if (r > 0)
		return driver_fail(c, DC_ERROR_INVALID_ARGS, "%s",
				   r == NATIVE_E_NOT_BUS1 ? "Connect needs a /dev/bus1 fd" :
							    "bus1 handle transfer failed");
	/* The broker keeps no copy of the client's peer fd (native_attach()). */
	close(msg->fds[index]);
	msg->fds[index] = -1;

	message_builder_init_method_return(&b, msg, DC_BUS1_CONNECT_REPLY);
	b.sender = DC_SERVICE_DBUS;
	dc_writer_write(&b.body, DC_BUS1_CONNECT_REPLY, handles[0], handles[1], handles[2]);
	r = message_builder_seal(&b, bus_next_serial(c->bus), &reply);
	message_builder_deinit(&b);
	if (r == 0) {
		/* Still a socket connection here: the reply goes out on the socket. */
		r = peer_queue(peer, reply);
		if (r > 0) {
			peer_close(peer, "cannot queue the bus1 bootstrap reply");
			r = 0;
		} else if (r == 0) {
			peer_set_output(peer, native_conn_transport(nc));
			return 0;
		}
	}
	native_conn_free(nc);
	return r < 0 ? r : 0;
}

/*
 * GetDirectHandle(s name) -> (s unique_name), with the owner's direct-node
 * handle in the reply's bus1 handle list: the direct path between two
 * native clients, if the policy lets the callee enforce it (policy.h).
 */
static int method_bus1_get_direct_handle(struct driver_call *c)
{
	_cleanup_message_ struct message *reply = NULL;
	struct native_conn *caller = native_conn_of(c->peer), *callee;
	struct peer *target;
	struct message_builder b;
	const char *name;
	int r;

	if (!caller)
		return driver_fail(c, DC_ERROR_NOT_SUPPORTED,
				   "Direct handles are for native (bus1) clients only");
	if (dc_reader_read(&c->reader, "s", &name) || !name)
		return driver_fail(c, DC_ERROR_INVALID_ARGS,
				   "GetDirectHandle takes one bus name (signature s)");
	target = bus_resolve(c->bus, name);
	if (!target)
		return driver_fail(c, DC_ERROR_NAME_HAS_NO_OWNER,
				   "Could not get owner of name '%s': no such name", name);
	callee = native_conn_of(target);
	if (!callee)
		return driver_fail(c, DC_ERROR_NOT_SUPPORTED,
				   "The owner of '%s' is not a native client", name);

	r = policy_check_direct(c->bus, c->peer, target);
	switch (r) {
	case POLICY_DIRECT_ALLOWED:
		break;
	case POLICY_DIRECT_DENIED:
		return driver_fail(c, DC_ERROR_ACCESS_DENIED,
				   "The policy does not allow calls to '%s'", name);
	case POLICY_DIRECT_OPAQUE:
		return driver_fail(c, DC_ERROR_NOT_SUPPORTED,
				   "The policy for '%s' looks at interfaces, members, paths, "
				   "errors, fds, groups or the console: no direct handle", name);
	case POLICY_DIRECT_NO_REPLIES:
		return driver_fail(c, DC_ERROR_NOT_SUPPORTED,
				   "The policy does not allow replies from '%s': no direct "
				   "handle", name);
	default:
		return r < 0 ? r : -EINVAL;
	}
	r = native_conn_allow_direct(callee, (uint32_t)c->peer->uid);
	if (r < 0)
		return r;
	if (r > 0)
		return driver_fail(c, DC_ERROR_LIMITS_EXCEEDED, "No direct handle to '%s' now",
				   name);

	message_builder_init_method_return(&b, c->msg, "s");
	b.sender = DC_SERVICE_DBUS;
	dc_writer_write(&b.body, "s", peer_name(target));
	r = message_builder_seal(&b, bus_next_serial(c->bus), &reply);
	message_builder_deinit(&b);
	if (r)
		return r < 0 ? r : -EINVAL;
	/* Over bus1, since the reply carries a handle. */
	return native_send_direct_handle(caller, callee, reply);
}

/* ------------------------------------------------------------ Properties */

static int prop_features(struct driver_call *c, struct dc_writer *w);
static int prop_interfaces(struct driver_call *c, struct dc_writer *w);

struct driver_property {
	const char *name;
	const char *type;
	int (*get)(struct driver_call *c, struct dc_writer *w);
};

static const struct driver_property dbus_properties[] = {
	{ "Features", "as", prop_features },
	{ "Interfaces", "as", prop_interfaces },
	{}
};

static int method_props_get(struct driver_call *c);
static int method_props_get_all(struct driver_call *c);
static int method_props_set(struct driver_call *c);
static int method_introspect(struct driver_call *c);

/* ------------------------------------------------------------------ tables */

enum {
	METHOD_ANY_PATH = 1 << 0,	/* available at every object path */
	METHOD_PRIVILEGED = 1 << 1,	/* bus uid or root only */
	METHOD_BOOTSTRAP = 1 << 2,	/* called before Hello (driver_dispatch_bootstrap()) */
};

enum {
	IFACE_ANY_PATH = 1 << 0,	/* the interface exists at every path */
	IFACE_UNINTERESTING = 1 << 1,	/* not listed in the Interfaces property */
	/*
	 * Not dbus-daemon's: not introspected, no properties, and only called
	 * by its name (a call without interface never finds it).
	 */
	IFACE_HIDDEN = 1 << 2,
};

struct driver_method {
	const char *name;
	const char *in;
	const char *out;
	int (*fn)(struct driver_call *c);
	unsigned int flags;
};

struct driver_interface {
	const char *name;
	const struct driver_method *methods;
	const char *extra_xml;
	unsigned int flags;
	const struct driver_property *properties;
};

static const struct driver_method dbus_methods[] = {
	{ "Hello", "", "s", method_hello, METHOD_ANY_PATH | METHOD_BOOTSTRAP },
	{ "RequestName", "su", "u", method_request_name, METHOD_ANY_PATH },
	{ "ReleaseName", "s", "u", method_release_name, METHOD_ANY_PATH },
	{ "StartServiceByName", "su", "u", method_start_service_by_name, METHOD_ANY_PATH },
	{ "UpdateActivationEnvironment", "a{ss}", "", method_update_activation_environment,
	  METHOD_PRIVILEGED },
	{ "NameHasOwner", "s", "b", method_name_has_owner, METHOD_ANY_PATH },
	{ "ListNames", "", "as", method_list_names, METHOD_ANY_PATH },
	{ "ListActivatableNames", "", "as", method_list_activatable_names, METHOD_ANY_PATH },
	{ "AddMatch", "s", "", method_add_match, METHOD_ANY_PATH },
	{ "RemoveMatch", "s", "", method_remove_match, METHOD_ANY_PATH },
	{ "GetNameOwner", "s", "s", method_get_name_owner, METHOD_ANY_PATH },
	{ "ListQueuedOwners", "s", "as", method_list_queued_owners, METHOD_ANY_PATH },
	{ "GetConnectionUnixUser", "s", "u", method_get_connection_unix_user,
	  METHOD_ANY_PATH },
	{ "GetConnectionUnixProcessID", "s", "u", method_get_connection_unix_process_id,
	  METHOD_ANY_PATH },
	{ "GetAdtAuditSessionData", "s", "ay", method_get_adt_audit_session_data,
	  METHOD_ANY_PATH },
	{ "GetConnectionSELinuxSecurityContext", "s", "ay",
	  method_get_connection_selinux_security_context, METHOD_ANY_PATH },
	{ "ReloadConfig", "", "", method_reload_config, METHOD_ANY_PATH },
	{ "GetId", "", "s", method_get_id, METHOD_ANY_PATH },
	{ "GetConnectionCredentials", "s", "a{sv}", method_get_connection_credentials,
	  METHOD_ANY_PATH },
	{}
};

static const struct driver_method properties_methods[] = {
	{ "Get", "ss", "v", method_props_get, 0 },
	{ "GetAll", "s", "a{sv}", method_props_get_all, 0 },
	{ "Set", "ssv", "", method_props_set, 0 },
	{}
};

static const struct driver_method introspectable_methods[] = {
	{ "Introspect", "", "s", method_introspect, METHOD_ANY_PATH },
	{}
};

static const struct driver_method monitoring_methods[] = {
	{ "BecomeMonitor", "asu", "", method_become_monitor, METHOD_PRIVILEGED },
	{}
};

static const struct driver_method stats_methods[] = {
	{ "GetStats", "", "a{sv}", method_get_stats, 0 },
	{ "GetConnectionStats", "s", "a{sv}", method_get_connection_stats, 0 },
	{ "GetAllMatchRules", "", "a{sas}", method_get_all_match_rules, 0 },
	{}
};

static const struct driver_method peer_methods[] = {
	{ "GetMachineId", "", "s", method_get_machine_id, METHOD_ANY_PATH },
	{ "Ping", "", "", method_ping, METHOD_ANY_PATH },
	{}
};

static const struct driver_method bus1_methods[] = {
	{ DC_BUS1_METHOD_CONNECT, DC_BUS1_CONNECT_SIGNATURE, DC_BUS1_CONNECT_REPLY,
	  method_bus1_connect, METHOD_ANY_PATH | METHOD_BOOTSTRAP },
	{ DC_BUS1_METHOD_GET_DIRECT_HANDLE, DC_BUS1_GET_DIRECT_HANDLE_SIGNATURE,
	  DC_BUS1_GET_DIRECT_HANDLE_REPLY, method_bus1_get_direct_handle, METHOD_ANY_PATH },
	{}
};

static const struct driver_interface interfaces[] = {
	{ DC_INTERFACE_DBUS, dbus_methods,
	  "    <signal name=\"NameOwnerChanged\">\n"
	  "      <arg type=\"s\"/>\n"
	  "      <arg type=\"s\"/>\n"
	  "      <arg type=\"s\"/>\n"
	  "    </signal>\n"
	  "    <signal name=\"NameLost\">\n"
	  "      <arg type=\"s\"/>\n"
	  "    </signal>\n"
	  "    <signal name=\"NameAcquired\">\n"
	  "      <arg type=\"s\"/>\n"
	  "    </signal>\n"
	  "    <signal name=\"ActivatableServicesChanged\">\n"
	  "    </signal>\n",
	  IFACE_ANY_PATH | IFACE_UNINTERESTING, dbus_properties },
	{ DC_INTERFACE_PROPERTIES, properties_methods,
	  "    <signal name=\"PropertiesChanged\">\n"
	  "      <arg type=\"s\" name=\"interface_name\"/>\n"
	  "      <arg type=\"a{sv}\" name=\"changed_properties\"/>\n"
	  "      <arg type=\"as\" name=\"invalidated_properties\"/>\n"
	  "    </signal>\n",
	  IFACE_UNINTERESTING, NULL },
	{ DC_INTERFACE_INTROSPECTABLE, introspectable_methods, NULL,
	  IFACE_ANY_PATH | IFACE_UNINTERESTING, NULL },
	{ DC_INTERFACE_MONITORING, monitoring_methods, NULL, 0, NULL },
	{ DC_INTERFACE_STATS, stats_methods, NULL, 0, NULL },
	{ DC_INTERFACE_PEER, peer_methods, NULL, IFACE_ANY_PATH | IFACE_UNINTERESTING, NULL },
	{ DC_INTERFACE_BUS1, bus1_methods, NULL,
	  IFACE_ANY_PATH | IFACE_UNINTERESTING | IFACE_HIDDEN, NULL },
	{}
};

static int prop_features(struct driver_call *c, struct dc_writer *w)
{
	dc_writer_open(w, 'a', NULL);
	/* Broadcast after every reload (bus.c), as dbus-daemon >= 1.13.14 does. */
	dc_writer_write(w, "s", "ActivatableServicesChanged");
	if (c->bus->apparmor)
		dc_writer_write(w, "s", "AppArmor");
	/* Unknown header fields are dropped when the sender is stitched. */
	dc_writer_write(w, "s", "HeaderFiltering");
	if (c->bus->selinux)
		dc_writer_write(w, "s", "SELinux");
	if (c->bus->systemd_activation)
		dc_writer_write(w, "s", "SystemdActivation");
	return dc_writer_close(w);
}

static int prop_interfaces(struct driver_call *c, struct dc_writer *w)
{
	const struct driver_interface *i;

	dc_writer_open(w, 'a', NULL);
	for (i = interfaces; i->name; i++)
		if (!(i->flags & IFACE_UNINTERESTING))
			dc_writer_write(w, "s", i->name);
	return dc_writer_close(w);
}

/* Properties are implemented on the canonical path only (dbus-daemon too). */
static const struct driver_interface *find_interface(struct driver_call *c, const char *name)
{
	const struct driver_interface *i;

	for (i = interfaces; i->name; i++)
		if (!(i->flags & IFACE_HIDDEN) && !strcmp(i->name, name))
			return i;
	driver_fail(c, DC_ERROR_UNKNOWN_INTERFACE, "Interface \"%s\" not found", name);
	return NULL;
}

static const struct driver_property *find_property(struct driver_call *c,
						   const struct driver_interface *i,
						   const char *name)
{
	const struct driver_property *p;

	for (p = i->properties; p && p->name; p++)
		if (!strcmp(p->name, name))
			return p;
	driver_fail(c, DC_ERROR_UNKNOWN_PROPERTY, "Property \"%s.%s\" not found", i->name, name);
	return NULL;
}

static int method_props_get(struct driver_call *c)
{
	const struct driver_interface *i;
	const struct driver_property *p;
	struct message_builder b;
	const char *iface, *prop;
	int r;

	r = dc_reader_read(&c->reader, "ss", &iface, &prop);
	if (r)
		return driver_fail(c, DC_ERROR_INVALID_ARGS, "Invalid arguments");
	i = find_interface(c, iface);
	if (!i)
		return 1;
	p = find_property(c, i, prop);
	if (!p)
		return 1;
	reply_init(c, &b, "v");
	dc_writer_open(&b.body, 'v', p->type);
	p->get(c, &b.body);
	dc_writer_close(&b.body);
	return reply_send(c, &b);
}

static int method_props_get_all(struct driver_call *c)
{
	const struct driver_interface *i;
	const struct driver_property *p;
	struct message_builder b;
	const char *iface;
	int r;

	r = read_name(c, &iface);
	if (r)
		return r;
	i = find_interface(c, iface);
	if (!i)
		return 1;
	reply_init(c, &b, "a{sv}");
	dc_writer_open(&b.body, 'a', NULL);
	for (p = i->properties; p && p->name; p++) {
		dc_writer_open(&b.body, '{', NULL);
		dc_writer_write(&b.body, "s", p->name);
		dc_writer_open(&b.body, 'v', p->type);
		p->get(c, &b.body);
		dc_writer_close(&b.body);
		dc_writer_close(&b.body);
	}
	dc_writer_close(&b.body);
	return reply_send(c, &b);
}

static int method_props_set(struct driver_call *c)
{
	const struct driver_interface *i;
	const char *iface, *prop;
	int r;

	r = dc_reader_read(&c->reader, "ss", &iface, &prop);
	if (r)
		return driver_fail(c, DC_ERROR_INVALID_ARGS, "Invalid arguments");
	i = find_interface(c, iface);
	if (!i)
		return 1;
	if (!find_property(c, i, prop))
		return 1;
	return driver_fail(c, DC_ERROR_PROPERTY_READ_ONLY, "Property '%s.%s' cannot be set",
			   iface, prop);
}

/* -------------------------------------------------------- introspection */

struct strbuf {
	char *s;
	size_t n, cap;
	bool oom;
};

static void sb_add(struct strbuf *sb, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_add(struct strbuf *sb, const char *fmt, ...)
{
	va_list ap;
	size_t cap;
	char *p;
	int l;

	if (sb->oom)
		return;
	for (;;) {
		va_start(ap, fmt);
		l = vsnprintf(sb->s ? sb->s + sb->n : NULL, sb->s ? sb->cap - sb->n : 0, fmt, ap);
		va_end(ap);
		if (l < 0) {
			sb->oom = true;
			return;
		}
		if (sb->s && sb->n + (size_t)l < sb->cap) {
			sb->n += (size_t)l;
			return;
		}
		cap = MAX(sb->cap * 2, sb->n + (size_t)l + 256);
		p = realloc(sb->s, cap);

		if (!p) {
			sb->oom = true;
			return;
		}
		sb->s = p;
		sb->cap = cap;
	}
}

static void sb_args(struct strbuf *sb, const char *sig, const char *direction)
{
	size_t len = strlen(sig), pos = 0, l;

	while (pos < len && (l = signature_next(sig + pos, len - pos)) > 0) {
		sb_add(sb, "      <arg direction=\"%s\" type=\"%.*s\"/>\n", direction, (int)l,
		       sig + pos);
		pos += l;
	}
}

int driver_introspect_xml(char **xmlp, const char *path)
{
	const struct driver_interface *i;
	const struct driver_method *m;
	const struct driver_property *p;
	struct strbuf sb = {};
	bool canonical = path && !strcmp(path, DC_PATH_DBUS);

	sb_add(&sb, "<!DOCTYPE node PUBLIC \"-//freedesktop//DTD D-BUS Object Introspection "
		    "1.0//EN\"\n\"http://www.freedesktop.org/standards/dbus/1.0/"
		    "introspect.dtd\">\n<node>\n");
	for (i = interfaces; i->name; i++) {
		if (i->flags & IFACE_HIDDEN)
			continue;
		if (!canonical && !(i->flags & IFACE_ANY_PATH))
			continue;
		sb_add(&sb, "  <interface name=\"%s\">\n", i->name);
		for (m = i->methods; m->name; m++) {
			sb_add(&sb, "    <method name=\"%s\">\n", m->name);
			sb_args(&sb, m->in, "in");
			sb_args(&sb, m->out, "out");
			sb_add(&sb, "    </method>\n");
		}
		for (p = i->properties; p && p->name; p++)
			sb_add(&sb, "    <property name=\"%s\" type=\"%s\" access=\"read\">\n"
				    "      <annotation name=\"org.freedesktop.DBus.Property."
				    "EmitsChangedSignal\" value=\"const\"/>\n"
				    "    </property>\n", p->name, p->type);
		if (i->extra_xml)
			sb_add(&sb, "%s", i->extra_xml);
		sb_add(&sb, "  </interface>\n");
	}
	/* Make the driver's object discoverable from its parents. */
	if (path && !strcmp(path, "/"))
		sb_add(&sb, "  <node name=\"org/freedesktop/DBus\"/>\n");
	else if (path && !strcmp(path, "/org"))
		sb_add(&sb, "  <node name=\"freedesktop/DBus\"/>\n");
	else if (path && !strcmp(path, "/org/freedesktop"))
		sb_add(&sb, "  <node name=\"DBus\"/>\n");
	sb_add(&sb, "</node>\n");
	if (sb.oom) {
		free(sb.s);
		return -ENOMEM;
	}
	*xmlp = sb.s;
	return 0;
}

static int method_introspect(struct driver_call *c)
{
	_cleanup_free_ char *xml = NULL;
	int r;

	r = driver_introspect_xml(&xml, c->msg->path);
	if (r < 0)
		return r;
	return reply_s(c, xml);
}

/* ---------------------------------------------------------------- dispatch */

static int driver_finish(struct driver_call *c, int r)
{
	if (r > 0) {
		r = router_send_error(c->peer, c->msg, c->err_name, "%s",
				      c->err_text ? c->err_text : "");
	}
	free(c->err_text);
	return r < 0 ? r : 0;
}

static int driver_call_init(struct driver_call *c, struct peer *peer, struct message *msg)
{
	*c = (struct driver_call){ .bus = peer->bus, .peer = peer, .msg = msg };
	return message_get_body_reader(msg, &c->reader);
}

/*
 * driver_call_init(), and a body that cannot be read is answered with
 * InvalidArgs. Return: 0, 1 (answered) or negative errno.
 */
static int driver_call_start(struct driver_call *c, struct peer *peer, struct message *msg)
{
	int r = driver_call_init(c, peer, msg);

	if (r <= 0)
		return r;
	r = driver_finish(c, driver_fail(c, DC_ERROR_INVALID_ARGS, "Invalid message body"));
	return r < 0 ? r : 1;
}

int driver_dispatch(struct peer *peer, struct message *msg)
{
	const struct driver_interface *i;
	const struct driver_method *m;
	struct driver_call c;
	bool canonical, found_iface = false;
	int r;

	/* systemd reports a failed activation (dbus-daemon: only from systemd itself). */
	if (msg->type == DC_MESSAGE_SIGNAL && msg->interface && msg->member &&
	    !strcmp(msg->interface, "org.freedesktop.systemd1.Activator") &&
	    !strcmp(msg->member, "ActivationFailure")) {
		if (bus_resolve(peer->bus, ACTIVATION_SYSTEMD_NAME) == peer)
			return activation_systemd_failure(peer->bus->activation, msg);
		log_info("Ignoring ActivationFailure from non-systemd connection %s",
			 peer_name(peer));
		return 0;
	}
	/* Signals and replies to the bus are ignored, as by dbus-daemon. */
	if (msg->type != DC_MESSAGE_METHOD_CALL)
		return 0;

	r = driver_call_start(&c, peer, msg);
	if (r)
		return r < 0 ? r : 0;

	canonical = msg->path && !strcmp(msg->path, DC_PATH_DBUS);
	for (i = interfaces; i->name; i++) {
		if (!canonical && !(i->flags & IFACE_ANY_PATH))
			continue;
		if (msg->interface ? strcmp(msg->interface, i->name) != 0 :
				     (i->flags & IFACE_HIDDEN) != 0)
			continue;
		found_iface = true;
		for (m = i->methods; m->name; m++) {
			if (strcmp(m->name, msg->member))
				continue;
			if ((m->flags & METHOD_PRIVILEGED) && !caller_is_privileged(&c))
				return driver_finish(&c, driver_fail(&c, DC_ERROR_ACCESS_DENIED,
					"rejected attempt to call %s by connection %s with uid %u",
					m->name, peer_name(peer), (unsigned)peer->uid));
			if (!canonical && !(m->flags & METHOD_ANY_PATH))
				return driver_finish(&c, driver_fail(&c, DC_ERROR_ACCESS_DENIED,
					"Method '%s' is only available at the canonical object "
					"path '%s'", m->name, DC_PATH_DBUS));
			if (strcmp(msg->signature, m->in))
				return driver_finish(&c, driver_fail(&c, DC_ERROR_INVALID_ARGS,
					"Call to %s has wrong args (%s, expected %s)\n", m->name,
					msg->signature, m->in));
			return driver_finish(&c, m->fn(&c));
		}
	}
	return driver_finish(&c, driver_fail(&c, found_iface ? DC_ERROR_UNKNOWN_METHOD :
					     DC_ERROR_UNKNOWN_INTERFACE,
					     "%s does not understand message %s",
					     DC_SERVICE_DBUS, msg->member));
}

int driver_dispatch_peer(struct peer *peer, struct message *msg)
{
	struct driver_call c;
	int r;

	r = driver_call_init(&c, peer, msg);
	if (r < 0)
		return r;
	if (msg->interface && !strcmp(msg->interface, DC_INTERFACE_PEER)) {
		if (!strcmp(msg->member, "Ping") && !strcmp(msg->signature, ""))
			return driver_finish(&c, method_ping(&c));
		if (!strcmp(msg->member, "GetMachineId") && !strcmp(msg->signature, ""))
			return driver_finish(&c, method_get_machine_id(&c));
	}
	return driver_finish(&c, driver_fail(&c, DC_ERROR_UNKNOWN_METHOD,
		"Method \"%s\" with signature \"%s\" on interface \"%s\" doesn't exist\n",
		msg->member, msg->signature, msg->interface ? msg->interface : "(null)"));
}

static int driver_hello(struct peer *peer, struct message *msg)
{
	struct bus *bus = peer->bus;
	_cleanup_message_ struct message *m = NULL;
	struct driver_call c;
	int r;

	if (strcmp(msg->signature, "")) {
		r = driver_call_init(&c, peer, msg);
		if (r < 0)
			return r;
		return driver_finish(&c, driver_fail(&c, DC_ERROR_INVALID_ARGS,
			"Call to Hello has wrong args (%s, expected )\n", msg->signature));
	}
	if (bus->n_active >= (unsigned int)bus->limits.max_completed_connections) {
		r = driver_call_init(&c, peer, msg);
		if (r < 0)
			return r;
		/* As dbus-daemon: refuse, but leave the connection (it may retry). */
		return driver_finish(&c, driver_fail(&c, DC_ERROR_LIMITS_EXCEEDED,
			"The maximum number of active connections has been reached"));
	}

	/* Completed connections count against the user, as in dbus-daemon. */
	if (peer_charge(peer, USER_SLOT_CONNECTIONS, 1)) {
		r = driver_call_init(&c, peer, msg);
		if (r < 0)
			return r;
		return driver_finish(&c, driver_fail(&c, DC_ERROR_LIMITS_EXCEEDED,
			"The maximum number of active connections for UID %u has been reached",
			(unsigned)peer->uid));
	}

	/* Unique names are allocated at Hello, in order, never reused. */
	name_owner_init(&peer->owner, bus->next_id++);
	peer->registered = true;
	bus->n_active++;

	r = message_stitch_sender(msg, peer_name(peer), &m);
	if (r < 0)
		return r;
	monitor_capture(bus, m, peer, NULL);

	r = driver_call_init(&c, peer, m);
	if (r < 0)
		return r;
	/* The reply comes before NameOwnerChanged/NameAcquired, as with dbus-daemon. */
	r = driver_finish(&c, reply_s(&c, peer_name(peer)));
	if (r < 0)
		return r;
	r = name_registry_add_unique(bus->names, &peer->owner);
	if (r >= 0)
		driver_stats_names_changed(bus, peer);
	return r;
}

/* The METHOD_BOOTSTRAP method @msg calls, or NULL. */
static const struct driver_method *find_bootstrap_method(const struct message *msg)
{
	const struct driver_interface *i;
	const struct driver_method *m;

	if (msg->type != DC_MESSAGE_METHOD_CALL || !msg->member || !msg->destination ||
	    strcmp(msg->destination, DC_SERVICE_DBUS))
		return NULL;
	for (i = interfaces; i->name; i++) {
		if (msg->interface ? strcmp(msg->interface, i->name) != 0 :
				     (i->flags & IFACE_HIDDEN) != 0)
			continue;
		for (m = i->methods; m->name; m++)
			if ((m->flags & METHOD_BOOTSTRAP) && !strcmp(m->name, msg->member))
				return m;
	}
	return NULL;
}

bool driver_is_bootstrap(const struct message *msg)
{
	return find_bootstrap_method(msg) != NULL;
}

int driver_dispatch_bootstrap(struct peer *peer, struct message *msg)
{
	const struct driver_method *m = find_bootstrap_method(msg);
	struct driver_call c;
	int r;

	if (m->fn == method_hello)
		return driver_hello(peer, msg);
	/* Not stitched (no unique name yet) and not shown to monitors. */
	r = driver_call_start(&c, peer, msg);
	if (r)
		return r < 0 ? r : 0;
	return driver_finish(&c, m->fn(&c));
}
