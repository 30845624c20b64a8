/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The driver's org.freedesktop.DBus methods (and Monitoring.BecomeMonitor,
 * Peer). See driver-internal.h; error names and texts follow dbus-daemon 1.14.
 */

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "broker/activation/activation.h"
#include "broker/core/bus.h"
#include "broker/core/bus-journal.h"
#include "broker/objects/peer.h"
#include "broker/core/driver.h"
#include "broker/objects/log.h"
#include "broker/objects/match.h"
#include "broker/core/monitor.h"
#include "broker/objects/name.h"
#include "broker/policy/policy.h"
#include "broker/objects/reply.h"
#include "broker/core/router.h"
#include "broker/policy/selinux.h"
#include "conf/config.h"
#include "conf/policy.h"
#include "dbus-compat/marshal.h"
#include "dbus-compat/message.h"
#include "dbus-compat/native-protocol.h"
#include "dbus-compat/protocol.h"
#include "dbus-compat/signature.h"
#include "dbus-compat/socket.h"
#include "dbus-compat/validate.h"
#include "broker/core/driver-internal.h"

/* ------------------------------------------------------- org.freedesktop.DBus */

int driver_method_hello(struct driver_call *c)
{
	/* Registered connections only get here (driver_hello() handles the first). */
	return driver_fail(c, DC_ERROR_FAILED, "Already handled an Hello message");
}

int driver_method_request_name(struct driver_call *c)
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
	if (r == ACCESS_DENIED)
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
			return driver_fail_limit(c, NULL, 0,
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
	bus_journal_name(peer, JOURNAL_REC_NAME_REQUEST, name, flags);
	router_sync_name_charge(peer);
	/* The signals went out first (the registry emitted them), then the reply. */
	return driver_reply_u(c, reply);
}

int driver_method_release_name(struct driver_call *c)
{
	const char *name;
	uint32_t reply;
	int r;

	r = driver_read_name(c, &name);
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
	bus_journal_name(c->peer, JOURNAL_REC_NAME_RELEASE, name, 0);
	router_sync_name_charge(c->peer);
	return driver_reply_u(c, reply);
}

int driver_method_start_service_by_name(struct driver_call *c)
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

int driver_method_update_activation_environment(struct driver_call *c)
{
	struct activation_error err = {};
	int r;

	/* The privilege check is the method table's (METHOD_PRIVILEGED). */
	r = activation_update_environment(c->bus->activation, c->msg, &err);
	if (r == ACTIVATION_E_FAILED)
		r = driver_fail(c, err.name, "%s", err.message ? err.message : "");
	activation_error_deinit(&err);
	if (r)
		return r;
	return driver_reply_ack(c);
}

int driver_method_name_has_owner(struct driver_call *c)
{
	const char *name;
	int r;

	r = driver_read_name(c, &name);
	if (r)
		return r;
	return driver_reply_b(c, !strcmp(name, DC_SERVICE_DBUS) || bus_resolve(c->bus, name));
}

int driver_method_list_names(struct driver_call *c)
{
	struct message_builder b;
	struct name_owner *o = NULL;
	struct name *n;

	driver_reply_init(c, &b, "as");
	dc_writer_open(&b.body, 'a', NULL);
	dc_writer_write(&b.body, "s", DC_SERVICE_DBUS);
	/* Only what the connection may see (a container's filter hides names). */
	while ((o = name_registry_next_unique(c->bus->names, o)))
		if (policy_sees(c->peer, o->unique_name))
			dc_writer_write(&b.body, "s", o->unique_name);
	list_for_each_entry(n, &c->bus->names->name_list, registry_link)
		if (policy_sees(c->peer, n->str))
			dc_writer_write(&b.body, "s", n->str);
	dc_writer_close(&b.body);
	return driver_reply_send(c, &b);
}

int driver_method_list_activatable_names(struct driver_call *c)
{
	const struct bus_services *services;
	struct message_builder b;
	size_t i;

	driver_reply_init(c, &b, "as");
	dc_writer_open(&b.body, 'a', NULL);
	dc_writer_write(&b.body, "s", DC_SERVICE_DBUS);
	services = activation_services(c->bus->activation);
	for (i = 0; i < services->n_services; i++) {
		const char *name = bus_services_get(services, i)->name;

		if (policy_sees(c->peer, name))
			dc_writer_write(&b.body, "s", name);
	}
	dc_writer_close(&b.body);
	return driver_reply_send(c, &b);
}

/* An LSM (AppArmor) does not let the caller eavesdrop. */
static int eavesdrop_denied(struct driver_call *c)
{
	return driver_fail(c, DC_ERROR_ACCESS_DENIED,
			   "Connection \"%s\" is not allowed to eavesdrop due to AppArmor policy",
			   peer_name(c->peer));
}

int driver_method_add_match(struct driver_call *c)
{
	struct peer *peer = c->peer;
	struct match_rule *rule = NULL;
	const char *text, *reason = NULL;
	int r;

	if (peer->matches.n_rules >= (size_t)c->bus->limits.max_match_rules_per_connection)
		return driver_fail_limit(c, NULL, 0,
			"Connection \"%s\" is not allowed to add more match rules "
			"(increase limits in configuration file if required; "
			"max_match_rules_per_connection=%lld)",
			peer_name(peer),
			(long long)c->bus->limits.max_match_rules_per_connection);
	r = driver_read_name(c, &text);
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
	if (rule->eavesdrop && !driver_caller_is_privileged(c)) {
		match_rule_free(rule);
		return driver_fail(c, DC_ERROR_ACCESS_DENIED,
				   "rejected attempt to call AddMatch with eavesdrop=true by "
				   "connection %s with uid %u", peer_name(peer),
				   (unsigned)peer->uid);
	}
	if (rule->eavesdrop) {
		r = policy_check_eavesdrop_lsm(c->bus, peer);
		if (r < 0 || r == ACCESS_DENIED) {
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
	bus_journal_match(peer, JOURNAL_REC_MATCH_ADD, rule);
	return driver_reply_ack(c);
}

int driver_method_remove_match(struct driver_call *c)
{
	struct peer *peer = c->peer;
	struct match_rule *rule = NULL, *other;
	const char *text, *reason = NULL;
	int r;

	r = driver_read_name(c, &text);
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
	other = match_owner_find_newest(&peer->matches, rule);
	match_rule_free(rule);
	if (!other)
		return driver_fail(c, DC_ERROR_MATCH_RULE_NOT_FOUND,
				   "The given match rule wasn't found and can't be removed");
	if (other->eavesdrop && c->bus->n_eavesdrop_rules)
		c->bus->n_eavesdrop_rules--;
	bus_journal_match(peer, JOURNAL_REC_MATCH_REMOVE, other);
	match_registry_remove(other);
	peer_uncharge(peer, USER_SLOT_MATCHES, 1);
	return driver_reply_ack(c);
}

int driver_method_get_name_owner(struct driver_call *c)
{
	struct peer *owner = NULL;
	bool self = false;
	const char *name;
	int r;

	/* "Could not get owner of name '%s': no such name", as dbus-daemon. */
	r = driver_lookup_conn(c, "owner", &name, &owner, &self);
	if (r)
		return r;
	return driver_reply_s(c, self ? DC_SERVICE_DBUS : peer_name(owner));
}

int driver_method_list_queued_owners(struct driver_call *c)
{
	struct message_builder b;
	struct peer *owner;
	struct name *n;
	const char *name;
	int r;

	r = driver_read_name(c, &name);
	if (r)
		return r;
	driver_reply_init(c, &b, "as");
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
	return driver_reply_send(c, &b);
}

int driver_method_get_connection_unix_user(struct driver_call *c)
{
	struct peer *peer = NULL;
	bool self = false;
	const char *name;
	int r;

	r = driver_lookup_conn(c, "UID", &name, &peer, &self);
	if (r)
		return r;
	/* A TCP peer that authenticated with ANONYMOUS has no uid. */
	if (!self && peer->uid == (uid_t)-1)
		return driver_fail(c, DC_ERROR_FAILED, "Could not determine UID for '%s'", name);
	return driver_reply_u(c, self ? (uint32_t)c->bus->uid : (uint32_t)peer->uid);
}

int driver_method_get_connection_unix_process_id(struct driver_call *c)
{
	struct peer *peer = NULL;
	bool self = false;
	const char *name;
	pid_t pid;
	int r;

	r = driver_lookup_conn(c, "PID", &name, &peer, &self);
	if (r)
		return r;
	pid = self ? c->bus->pid : peer->pid;
	if (pid <= 0)
		return driver_fail(c, DC_ERROR_UNIX_PROCESS_ID_UNKNOWN,
				   "Could not determine PID for '%s'", name);
	return driver_reply_u(c, (uint32_t)pid);
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

int driver_write_credentials(struct dc_writer *w, struct peer *peer)
{
	/* Groups and label belong to the socket's peer, not to a proven identity. */
	const struct socket_creds *cr = peer->socket_identity ? &peer->creds : NULL;

	if (peer->uid != (uid_t)-1)
		driver_asv_u(w, "UnixUserID", (uint32_t)peer->uid);
	/* SO_PEERGROUPS failed at connect: no UnixGroupIDs, as dbus-daemon then. */
	if (cr && !cr->groups_unknown) {
		/* The primary group first, then the supplementary ones, no duplicates. */
		_cleanup_free_ uint32_t *gids = calloc(cr->n_groups + 1, sizeof(*gids));
		size_t n = 0;

		if (!gids)
			return -ENOMEM;
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
		driver_asv_u(w, "ProcessID", (uint32_t)peer->pid);
	if (cr && cr->label) {
		/* GVariant bytestring convention: the NUL is included. */
		dc_writer_open(w, '{', NULL);
		dc_writer_write(w, "s", "LinuxSecurityLabel");
		dc_writer_open(w, 'v', "ay");
		dc_writer_append_array(w, 'y', cr->label, strlen(cr->label) + 1);
		dc_writer_close(w);
		dc_writer_close(w);
	}
	return dc_writer_error(w);
}

int driver_method_get_connection_credentials(struct driver_call *c)
{
	struct peer *peer = NULL;
	bool self = false;
	struct message_builder b;
	const char *name;
	struct dc_writer *w;
	int pidfd;
	int r;

	r = driver_lookup_conn(c, "credentials", &name, &peer, &self);
	if (r)
		return r;
	driver_reply_init(c, &b, "a{sv}");
	w = &b.body;
	dc_writer_open(w, 'a', NULL);
	if (self) {
		driver_asv_u(w, "UnixUserID", (uint32_t)c->bus->uid);
		driver_asv_u(w, "ProcessID", (uint32_t)c->bus->pid);
		/* Our own pidfd, opened once (after --fork, so of the bus itself). */
		if (c->bus->pidfd < 0)
			c->bus->pidfd = open_own_pidfd();
		pidfd = c->bus->pidfd;
		asv_process_fd(c, &b, &pidfd);
	} else {
		r = driver_write_credentials(w, peer);
		if (r < 0) {
			message_builder_deinit(&b);
			return r;
		}
		pidfd = peer_get_pidfd(peer);
		asv_process_fd(c, &b, &pidfd);
		/* What hangs on it adds (its container instance, as dbus's draft names it). */
		peer_attachments_credentials(peer, w);
	}
	dc_writer_close(w);
	return driver_reply_send(c, &b);
}

int driver_method_get_adt_audit_session_data(struct driver_call *c)
{
	struct peer *peer = NULL;
	bool self = false;
	const char *name;
	int r;

	r = driver_lookup_conn(c, "audit session data", &name, &peer, &self);
	if (r)
		return r;
	/* No ADT (Solaris audit) on Linux, as in dbus-daemon. */
	return driver_fail(c, DC_ERROR_ADT_AUDIT_DATA_UNKNOWN,
			   "Could not determine audit session data for '%s'", name);
}

int driver_method_get_connection_selinux_security_context(struct driver_call *c)
{
	struct peer *peer = NULL;
	bool self = false;
	struct message_builder b;
	_cleanup_free_ char *ctx = NULL;
	const char *name;
	int r;

	r = driver_lookup_conn(c, "security context", &name, &peer, &self);
	if (r)
		return r;
	/* Only with SELinux: any other LSM label is not an SELinux context. */
	r = c->bus->selinux ? selinux_context(c->bus->selinux, self ? NULL : peer, &ctx) :
			      SELINUX_E_NO_CONTEXT;
	if (r < 0)
		return r;
	if (r == SELINUX_E_NO_CONTEXT)
		return driver_fail(c, DC_ERROR_SELINUX_SECURITY_CONTEXT_UNKNOWN,
				   "Could not determine security context for '%s'", name);
	/* The context without its NUL, as dbus-daemon sends it. */
	driver_reply_init(c, &b, "ay");
	dc_writer_append_array(&b.body, 'y', ctx, strlen(ctx));
	return driver_reply_send(c, &b);
}

int driver_method_reload_config(struct driver_call *c)
{
	_cleanup_free_ char *err = NULL;
	int r;

	r = bus_reload_config(c->bus, &err);
	if (r < 0)
		return driver_fail(c, DC_ERROR_FAILED, "Reloading the configuration failed: %s",
				   strerror(-r));
	if (r == BUS_E_INVALID_CONFIG)
		return driver_fail(c, DC_ERROR_FAILED, "%s", err ? err : "invalid configuration");
	return driver_reply_empty(c);
}

int driver_method_get_id(struct driver_call *c)
{
	return driver_reply_s(c, c->bus->guid);
}

int driver_method_become_monitor(struct driver_call *c)
{
	struct match_rule **rules = NULL;
	const char *bad_reason = NULL;
	size_t n = 0, i;
	uint32_t flags;
	int r, bad = 0;

	/* Asked before the arguments are read, as dbus-daemon asks it. */
	r = policy_check_eavesdrop_lsm(c->bus, c->peer);
	if (r < 0 || r == ACCESS_DENIED)
		return r < 0 ? r : eavesdrop_denied(c);

	r = dc_reader_enter(&c->reader, 'a');
	while (!r && dc_reader_peek(&c->reader) == 's') {
		const char *text, *reason = NULL;
		struct match_rule **v;

		r = dc_reader_read(&c->reader, "s", &text);
		if (r)
			break;
		if (bad)
			continue;
		v = realloc(rules, (n + 1) * sizeof(*rules));
		if (!v) {
			r = -ENOMEM;
			break;
		}
		rules = v;
		r = match_rule_parse(&rules[n], text, &reason);
		if (r < 0)
			break;
		/*
		 * dbus-daemon reads all arguments and checks the flags before
		 * it parses a rule: the first bad rule is told after them (its
		 * reason stays valid, nothing is parsed after it).
		 */
		if (r) {
			bad = r;
			bad_reason = reason;
			r = 0;
			continue;
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
	if (bad) {
		r = driver_fail(c, bad == MATCH_E_TOO_LONG ? DC_ERROR_LIMITS_EXCEEDED :
				DC_ERROR_MATCH_RULE_INVALID, "%s",
				bad_reason ? bad_reason : "Invalid match rule");
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
	r = driver_reply_ack(c);
	if (r < 0)
		goto out;
	r = monitor_become(c->peer, rules, n);
out:
	for (i = 0; i < n; i++)
		if (rules[i])
			match_rule_free(rules[i]);
	free(rules);
	return r;
}

int driver_method_get_machine_id(struct driver_call *c)
{
	return driver_reply_s(c, c->bus->machine_id);
}

int driver_method_ping(struct driver_call *c)
{
	return driver_reply_ack(c);
}

