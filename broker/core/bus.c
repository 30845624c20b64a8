/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The state of the bus: its registries, the configuration in force, the
 * activation glue and the once-per-iteration flush of output. See bus.h.
 */

#include <assert.h>
#include <errno.h>
#include <malloc.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "broker/activation/activation.h"
#include "broker/policy/apparmor.h"
#include "broker/policy/audit.h"
#include "broker/core/bus.h"
#include "broker/core/bus-journal.h"
#include "broker/objects/log.h"
#include "broker/objects/match.h"
#include "broker/core/monitor.h"
#include "broker/objects/name.h"
#include "broker/objects/peer.h"
#include "broker/policy/policy.h"
#include "broker/objects/reply.h"
#include "broker/core/router.h"
#include "broker/policy/selinux.h"
#include "broker/objects/state.h"
#include "broker/objects/user.h"
#include "conf/config.h"
#include "conf/policy.h"
#include "dbus-compat/address.h"
#include "dbus-compat/message.h"
#include "dbus-compat/protocol.h"
#include "dbus-compat/sasl.h"

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

/* Listeners paused at max_incomplete_connections accept again below it. */
static void bus_resume_listeners(struct bus *bus)
{
	if (bus->n_incomplete < (unsigned int)bus->limits.max_incomplete_connections)
		bus->loop->resume_listeners(bus);
}

static void bus_transports_policy_changed(struct bus *bus)
{
	struct bus_transport *t;

	list_for_each_entry(t, &bus->transports, link)
		if (t->ops->policy_changed)
			t->ops->policy_changed(t);
}

void bus_apply_config(struct bus *bus, const struct bus_config *config)
{
	if (config)
		bus->limits = config->limits;
	else
		bus_config_limits_init(&bus->limits);
	/* A reload may have raised max_incomplete_connections. */
	bus_resume_listeners(bus);
	bus->max_queued_bytes = MIN((unsigned long long)bus->limits.max_outgoing_bytes,
				    BUS_QUEUE_BYTES_CAP);
	bus->max_queued_fds = MIN((unsigned long long)bus->limits.max_outgoing_unix_fds,
				  BUS_QUEUE_FDS_CAP);
	if (bus->replies) {
		bus->replies->max_per_caller = (size_t)bus->limits.max_replies_per_connection;
		bus->replies->timeout_usec = bus->limits.reply_timeout > 0 ?
			(uint64_t)bus->limits.reply_timeout * 1000 : 0;
	}
	if (config) {
		struct bus_policy *policy = NULL;
		struct activation_config acfg = {
			.bus_type = config->type,
			.servicehelper = config->servicehelper,
			.systemd_activation = bus->systemd_activation,
			.service_start_timeout = config->limits.service_start_timeout,
			.max_pending_service_starts = config->limits.max_pending_service_starts,
			.servicedirs = &config->servicedirs,
		};
		struct peer *c;

		if (bus_policy_new(&policy, config) >= 0) {
			bus_policy_free(bus->policy);
			bus->policy = policy;
			/* Every connection gets the rules of the new policy. */
			list_for_each_entry(c, &bus->peers, bus_link)
				if (c->authenticated && policy_setup_peer(c) < 0)
					log_warn("cannot apply the new policy to %s",
						 peer_name(c));
			bus_transports_policy_changed(bus);
		}

		if (bus->selinux)
			selinux_set_associations(bus->selinux, config);

		/* Rescans the service directories; pending activations keep running. */
		if (bus->activation && activation_configure(bus->activation, &acfg) < 0)
			log_warn("cannot load the service directories: out of memory");
	}
}

/* ------------------------------------------------ activation <-> bus glue */

static void bus_activation_send(void *userdata, void *to, struct message *msg)
{
	router_send_from_driver(userdata, to, msg);
}

static void bus_activation_deliver(void *userdata, void *sender, struct message *msg)
{
	int r = router_resume_activated(sender, msg);

	if (r < 0)
		log_warn("cannot deliver a message to an activated service: %s", log_error(r));
}

static bool bus_activation_send_to_systemd(void *userdata, struct message *msg)
{
	struct peer *systemd = bus_resolve(userdata, ACTIVATION_SYSTEMD_NAME);
	int r;

	if (!systemd)
		return false;
	/* Monitors saw it when it was made (ops->capture), as with dbus-daemon. */
	r = peer_queue(systemd, msg);
	if (r == PEER_E_QUOTA)
		peer_overflow(systemd);
	else if (r < 0)
		log_warn("cannot queue a message for systemd: %s", log_error(r));
	return true;
}

/*
 * A message waiting for an activation is charged to its sender's user: one
 * of its ACTIVATIONS, its bytes and its fds (peer.c's records return them
 * whatever happens to the entry or the peer).
 */
static int bus_activation_charge(void *userdata, void *sender, size_t bytes, size_t n_fds)
{
	struct peer *peer = sender;

	/* USER_E_QUOTA (or a charge that cannot be taken): it may not wait. */
	if (peer_charge(peer, USER_SLOT_ACTIVATIONS, 1))
		return ACTIVATION_E_QUOTA;
	if (peer_charge_message(peer, bytes, n_fds)) {
		peer_uncharge(peer, USER_SLOT_ACTIVATIONS, 1);
		return ACTIVATION_E_QUOTA;
	}
	return 0;
}

static void bus_activation_uncharge(void *userdata, void *sender, size_t bytes, size_t n_fds)
{
	struct peer *peer = sender;

	peer_uncharge(peer, USER_SLOT_ACTIVATIONS, 1);
	peer_uncharge(peer, USER_SLOT_BYTES, bytes);
	peer_uncharge(peer, USER_SLOT_FDS, n_fds);
}

static void bus_activation_capture(void *userdata, void *sender, struct message *msg)
{
	monitor_capture(userdata, msg, sender, NULL);
}

static const char *bus_activation_owner(void *userdata, const char *name)
{
	struct peer *c = bus_resolve(userdata, name);

	return c ? peer_name(c) : NULL;
}

static uint32_t bus_activation_next_serial(void *userdata)
{
	return bus_next_serial(userdata);
}

static void bus_activation_log(void *userdata, int priority, const char *text)
{
	log_printf(priority, "%s", text);
}

static const char *bus_activation_loginfo(void *userdata, void *sender)
{
	return peer_loginfo(sender);
}

static const struct activation_ops bus_activation_ops = {
	.send = bus_activation_send,
	.deliver = bus_activation_deliver,
	.send_to_systemd = bus_activation_send_to_systemd,
	.capture = bus_activation_capture,
	.owner = bus_activation_owner,
	.next_serial = bus_activation_next_serial,
	.log = bus_activation_log,
	.loginfo = bus_activation_loginfo,
	.charge = bus_activation_charge,
	.uncharge = bus_activation_uncharge,
};

void bus_config_reloaded(struct bus *bus)
{
	_cleanup_message_ struct message *m = NULL;
	struct message_builder b;
	int r;

	message_builder_init_signal(&b, DC_PATH_DBUS, DC_INTERFACE_DBUS,
				    "ActivatableServicesChanged", "");
	b.sender = DC_SERVICE_DBUS;
	r = message_builder_seal(&b, bus_next_serial(bus), &m);
	message_builder_deinit(&b);
	if (r < 0) {
		log_info("Unable to send signal that configuration has been reloaded: %s",
			 log_error(r));
		return;
	}
	router_broadcast_from_driver(bus, m);
}

int bus_init(struct bus *bus, const struct bus_config *config, bool systemd_activation,
	     const struct bus_loop_ops *loop, char **errorp)
{
	struct user_limits ulimits;
	int r;

	bus->loop = loop;
	list_init(&bus->peers);
	list_init(&bus->transports);
	list_init(&bus->monitors);
	list_init(&bus->policy_modules);
	list_init(&bus->parts);
	list_init(&bus->dead_list);
	list_init(&bus->overflow_list);
	log_limits_init(&bus->log_limits);
	bus->uid = getuid();
	bus->pid = getpid();
	bus->pidfd = -1;
	bus->systemd_activation = systemd_activation;

	r = address_generate_guid(bus->guid);
	if (r < 0)
		return r;
	if (read_machine_id(bus->machine_id) < 0)
		memcpy(bus->machine_id, bus->guid, sizeof(bus->machine_id));
	bus->allow_anonymous = config && config->allow_anonymous;
	/* <auth>: the mechanisms offered; none given: all of them (dbus-daemon). */
	bus->auth_mechs = SASL_MECH_ALL;
	if (config && !list_is_empty(&config->auth)) {
		struct bus_config_string *a;

		bus->auth_mechs = 0;
		list_for_each_entry(a, &config->auth, link) {
			unsigned int m = sasl_mech_from_name(a->str);

			if (!m) {
				if (asprintf(errorp, "Unsupported auth mechanism \"%s\" in bus "
					     "config file detected. Supported mechanisms are "
					     "\"EXTERNAL, DBUS_COOKIE_SHA1, ANONYMOUS\".",
					     a->str) < 0) {
					*errorp = NULL;
					return -ENOMEM;
				}
				return BUS_E_INVALID_CONFIG;
			}
			bus->auth_mechs |= m;
		}
	}

	/* SELinux first, then AppArmor, as dbus-daemon starts them. */
	r = selinux_new(&bus->selinux, errorp);
	if (r)
		return r == SELINUX_E_FAILED ? BUS_E_INVALID_CONFIG : r;
	if (bus->selinux)
		log_info("SELinux support is enabled");
	/* <apparmor mode=...> counts at start only, as in dbus-daemon. */
	r = apparmor_new(&bus->apparmor, config ? config->apparmor : BUS_CONFIG_APPARMOR_UNSET,
			 config ? config->type : NULL, errorp);
	if (r)
		return r == APPARMOR_E_UNAVAILABLE ? BUS_E_INVALID_CONFIG : r;
	if (bus->apparmor)
		log_info("AppArmor D-Bus mediation is enabled");

	if (config && config->type && !strcmp(config->type, "system"))
		user_limits_init_system(&ulimits);
	else
		user_limits_init_session(&ulimits);
	if (config) {
		ulimits.max[USER_SLOT_CONNECTIONS] = (uint64_t)config->limits.max_connections_per_user;
		if (config->limits.max_pending_service_starts > 0)
			user_limits_set_activations(
				&ulimits, (uint64_t)config->limits.max_pending_service_starts);
	}
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
	match_registry_set_peaks(bus->matches, &bus->match_peaks);
	match_registry_set_peaks(bus->monitor_matches, &bus->match_peaks);
	r = activation_new(&bus->activation, &bus_activation_ops, bus);
	if (r < 0)
		return r;
	bus_apply_config(bus, config);
	r = reply_registry_new(&bus->replies, (size_t)bus->limits.max_replies_per_connection,
			       bus->limits.reply_timeout > 0 ?
			       (uint64_t)bus->limits.reply_timeout * 1000 : 0);
	return r < 0 ? r : 0;
}

static void bus_free_dead(struct bus *bus)
{
	while (!list_is_empty(&bus->dead_list)) {
		struct peer *p = list_first_entry(&bus->dead_list, struct peer, dead_link);

		/* Only a closed peer is freed, and only once (it leaves the list). */
		assert(p->closed && !list_node_is_linked(&p->bus_link));
		peer_free(p);
	}
}

void bus_deinit(struct bus *bus)
{
	/* Closing emits signals to the remaining ones; that is harmless at exit. */
	while (!list_is_empty(&bus->peers))
		peer_close(list_first_entry(&bus->peers, struct peer, bus_link), NULL);
	bus_free_dead(bus);
	/* Every peer went through peer_close(): nothing counts them any more. */
	assert(list_is_empty(&bus->monitors) && list_is_empty(&bus->overflow_list));
	assert(bus->n_incomplete == 0 && bus->n_active == 0);
	assert(!bus->dispatching && !bus->peer_leaving);
	/* The features' state (container instances: their sockets and files). */
	while (!list_is_empty(&bus->parts)) {
		struct bus_part *part = list_first_entry(&bus->parts, struct bus_part, link);

		list_unlink(&part->link);
		part->ops->free(part);
	}
	/* After every source of its lines (peers, instances) told what it left out. */
	log_limits_deinit(&bus->log_limits);
	bus->flush = sd_event_source_disable_unref(bus->flush);
	bus->reply_timer = sd_event_source_disable_unref(bus->reply_timer);
	bus->event = NULL;
	if (bus->replies)
		bus->replies = reply_registry_free(bus->replies);
	if (bus->matches)
		bus->matches = match_registry_free(bus->matches);
	if (bus->monitor_matches)
		bus->monitor_matches = match_registry_free(bus->monitor_matches);
	if (bus->names)
		bus->names = name_registry_free(bus->names);
	if (bus->users)
		bus->users = user_registry_free(bus->users);
	bus->activation = activation_free(bus->activation);
	bus->policy = bus_policy_free(bus->policy);
	bus->apparmor = apparmor_free(bus->apparmor);
	bus->selinux = selinux_free(bus->selinux);
	audit_log_close();
	bus->pidfd = safe_close(bus->pidfd);
}

static int bus_flush_cb(sd_event_source *s, void *userdata);

int bus_attach(struct bus *bus, sd_event *event)
{
	int r;

	/* Once: a second deferred flush would leak the first. */
	assert(!bus->event && !bus->flush);
	bus->event = event;
	log_limits_attach(&bus->log_limits, event);
	/* Child sources of activated services. */
	r = activation_attach(bus->activation, event);
	if (r < 0)
		return r;
	/* SELinux policy loads and mode changes. */
	if (bus->selinux) {
		r = selinux_attach(bus->selinux, event);
		if (r < 0)
			return r;
	}
	/* Output goes out after all ready input of one iteration was handled. */
	r = sd_event_add_defer(event, &bus->flush, bus_flush_cb, bus);
	if (r < 0)
		return r;
	r = sd_event_source_set_priority(bus->flush, SD_EVENT_PRIORITY_IDLE);
	if (r < 0)
		return r;
	r = sd_event_source_set_enabled(bus->flush, SD_EVENT_OFF);
	return r < 0 ? r : 0;
}

void bus_add_part(struct bus *bus, struct bus_part *part, const struct bus_part_ops *ops)
{
	part->ops = ops;
	list_append(&bus->parts, &part->link);
}

void bus_add_transport(struct bus *bus, struct bus_transport *transport)
{
	list_append(&bus->transports, &transport->link);
}

void bus_remove_transport(struct bus_transport *transport)
{
	list_unlink(&transport->link);
}

struct bus_transport *bus_find_transport(struct bus *bus, const struct bus_transport_ops *ops)
{
	struct bus_transport *t;

	list_for_each_entry(t, &bus->transports, link)
		if (t->ops == ops)
			return t;
	return NULL;
}

void bus_transport_stats(struct bus *bus, struct bus_transport_stats *st)
{
	struct bus_transport *t;

	*st = (struct bus_transport_stats){};
	list_for_each_entry(t, &bus->transports, link)
		t->ops->stats(t, st);
}

int bus_set_address(struct bus *bus, const char *address)
{
	return activation_set_address(bus->activation, address);
}

void bus_incomplete_done(struct bus *bus)
{
	/* Once per peer: when it registers or, still incomplete, closes. */
	assert(bus->n_incomplete > 0);
	bus->n_incomplete--;
	bus_resume_listeners(bus);
}

void bus_schedule_flush(struct bus *bus)
{
	if (bus->flush)
		sd_event_source_set_enabled(bus->flush, SD_EVENT_ONESHOT);
}

void bus_flush_now(struct bus *bus)
{
	struct bus_transport *t;
	bool again;

	/* Nothing left for the deferred flush: spare the loop an iteration. */
	if (bus->flush)
		sd_event_source_set_enabled(bus->flush, SD_EVENT_OFF);
	do {
		/* Closing a peer may queue signals for others: flush until all is out. */
		while (!list_is_empty(&bus->overflow_list)) {
			struct peer *c = list_first_entry(&bus->overflow_list, struct peer,
							 overflow_link);

			/* peer_overflow() never lists a closed peer; peer_close() unlists it. */
			assert(c->overflow && !c->closed);
			list_unlink(&c->overflow_link);
			peer_close(c, "its output queue is full: it does not read");
		}
		again = false;
		/* Every change is in the crash journal before a client can see it. */
		bus_journal_sync(bus);
		list_for_each_entry(t, &bus->transports, link)
			again |= t->ops->flush(t);
	} while (again || !list_is_empty(&bus->overflow_list));
	bus_free_dead(bus);
	/* A flood drained: its memory goes back to the system, not to the heap's free lists. */
	if (bus->users && user_registry_drained(bus->users))
		malloc_trim(0);
}

static int bus_flush_cb(sd_event_source *s, void *userdata)
{
	bus_flush_now(userdata);
	return 0;
}

void bus_serialize(const struct bus *bus, struct state_writer *w)
{
	state_put_section(w, STATE_TAG_BUS, BUS_STATE_VERSION);
	state_put_str(w, bus->guid);
	state_put_u64(w, bus->next_id);
	state_put_u32(w, bus->serial);
	state_put_u64(w, bus->n_messages);
	state_put_u32(w, bus->names->peak_names);
	state_put_u32(w, bus->names->peak_names_per_owner);
	state_put_u32(w, bus->match_peaks.peak_rules);
	state_put_u32(w, bus->match_peaks.peak_rules_per_owner);
	state_put_u32(w, bus->stats_serial);
	state_put_u32(w, bus->conn_stats_serial);
	state_put_u32(w, (uint32_t)bus->uid);
	/* Version 2: Debug.Stats' counts of refusals. */
	state_put_u64(w, bus->refusals.n[REFUSAL_LIMITS]);
	state_put_u64(w, bus->refusals.n[REFUSAL_POLICY]);
	state_put_u64(w, bus->refusals.n[REFUSAL_DROPPED]);
	state_put_u64(w, bus->refusals.n[REFUSAL_QUEUE_FULL]);
	state_put_u64(w, bus->log_limits.n_suppressed);
}

bool bus_state_read(struct state_reader *r, struct bus_state *st)
{
	uint32_t version;

	*st = (struct bus_state){};
	if (!state_section(r, STATE_TAG_BUS, BUS_STATE_VERSION, &version))
		return false;
	st->guid = state_get_str(r);
	st->next_id = state_get_u64(r);
	st->serial = state_get_u32(r);
	st->n_messages = state_get_u64(r);
	st->peak_names = state_get_u32(r);
	st->peak_names_per_conn = state_get_u32(r);
	st->peak_matches = state_get_u32(r);
	st->peak_matches_per_conn = state_get_u32(r);
	st->stats_serial = state_get_u32(r);
	st->conn_stats_serial = state_get_u32(r);
	st->uid = (uid_t)state_get_u32(r);
	if (version >= 2) {
		st->refusals.n[REFUSAL_LIMITS] = state_get_u64(r);
		st->refusals.n[REFUSAL_POLICY] = state_get_u64(r);
		st->refusals.n[REFUSAL_DROPPED] = state_get_u64(r);
		st->refusals.n[REFUSAL_QUEUE_FULL] = state_get_u64(r);
		st->n_log_suppressed = state_get_u64(r);
	}
	if (!r->error && (!st->guid || strlen(st->guid) != 32))
		r->error = true;
	return !r->error;
}

void bus_restore_state(struct bus *bus, const struct bus_state *st)
{
	memcpy(bus->guid, st->guid, sizeof(bus->guid));
	bus->next_id = st->next_id;
	bus->serial = st->serial;
	bus->n_messages = st->n_messages;
	bus->names->peak_names = st->peak_names;
	bus->names->peak_names_per_owner = st->peak_names_per_conn;
	bus->match_peaks.peak_rules = st->peak_matches;
	bus->match_peaks.peak_rules_per_owner = st->peak_matches_per_conn;
	bus->stats_serial = st->stats_serial;
	bus->conn_stats_serial = st->conn_stats_serial;
	bus->uid = st->uid;
	bus->refusals = st->refusals;
	bus->log_limits.n_suppressed = st->n_log_suppressed;
}
