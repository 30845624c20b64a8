/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Routing: one incoming message -> a destination set -> queued on every
 * destination socket, stitched once. See router.h.
 */

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "broker/activation.h"
#include "broker/bus.h"
#include "broker/connection.h"
#include "broker/driver.h"
#include "broker/log.h"
#include "broker/match.h"
#include "broker/monitor.h"
#include "broker/native.h"
#include "broker/name.h"
#include "broker/reply.h"
#include "broker/router.h"
#include "conf/policy.h"
#include "dbus-compat/message.h"
#include "dbus-compat/protocol.h"

/* ------------------------------------------------------------ destination set */

void destset_init(struct destset *set)
{
	set->conns = set->inline_conns;
	set->n = 0;
	set->cap = DESTSET_INLINE;
}

void destset_deinit(struct destset *set)
{
	if (set->conns != set->inline_conns)
		free(set->conns);
	set->conns = NULL;
	set->n = set->cap = 0;
}

int destset_add(struct destset *set, struct connection *conn)
{
	if (set->n == set->cap) {
		size_t cap = set->cap * 2;
		struct connection **v;

		if (set->conns == set->inline_conns) {
			v = malloc(cap * sizeof(*v));
			if (!v)
				return -ENOMEM;
			memcpy(v, set->conns, set->n * sizeof(*v));
		} else {
			v = realloc(set->conns, cap * sizeof(*v));
			if (!v)
				return -ENOMEM;
		}
		set->conns = v;
		set->cap = cap;
	}
	set->conns[set->n++] = conn;
	return 0;
}

/* ------------------------------------------------------------------ policy */

/*
 * The names a connection owns or waits for, for send_destination= and
 * receive_sender= rules (dbus-daemon matches queued names too). Small sets
 * live on the stack.
 */
#define PEER_NAMES_INLINE 16
struct peer_names {
	struct bus_policy_peer peer;
	const char **v;
	const char *inline_v[PEER_NAMES_INLINE];
};

static int peer_names_init(struct peer_names *pn, struct connection *c)
{
	struct name_ownership *o;
	size_t n = 0;

	pn->v = pn->inline_v;
	if (c->owner.n_ownerships + 1 > PEER_NAMES_INLINE) {
		pn->v = malloc((c->owner.n_ownerships + 1) * sizeof(*pn->v));
		if (!pn->v)
			return -ENOMEM;
	}
	pn->v[n++] = connection_name(c);
	list_for_each_entry(o, &c->owner.ownerships, owner_link)
		pn->v[n++] = o->name->str;
	pn->peer.names = pn->v;
	pn->peer.n_names = n;
	return 0;
}

static void peer_names_deinit(struct peer_names *pn)
{
	if (pn->v != pn->inline_v)
		free(pn->v);
}

static void policy_message(struct bus_policy_message *pm, const struct message *m,
			   bool requested_reply)
{
	*pm = (struct bus_policy_message){
		.type = m->type,
		.path = m->path,
		.interface = m->interface,
		.member = m->member,
		.error_name = m->error_name,
		.destination = m->destination,
		.sender = m->sender,
		.is_reply = m->reply_serial != 0,
		.requested_reply = requested_reply,
		.n_fds = (uint32_t)m->n_fds,
	};
}

/*
 * May @m go from @from (NULL: the driver) to @to (NULL: the driver)? Both
 * the sender's send rules and the receiver's receive rules must allow it.
 * @from_names: the sender's names if already computed (else NULL).
 * Return: 1 allowed, 0 denied (*@rulep: the deciding rule, *@sendp: whether
 * the send side denied), -ENOMEM.
 */
static int policy_allows(struct bus *bus, struct connection *from,
			 const struct bus_policy_peer *from_names, struct connection *to,
			 struct message *m, bool requested_reply, bool eavesdropping,
			 const struct bus_policy_rule **rulep, bool *sendp)
{
	struct bus_policy_message pm;
	struct peer_names fn, tn;
	bool ok = true;
	int r;

	*rulep = NULL;
	*sendp = false;
	if (!bus->policy)
		return 1;
	policy_message(&pm, m, requested_reply);

	if (from && from->policy) {
		if (to) {
			r = peer_names_init(&tn, to);
			if (r < 0)
				return r;
		}
		ok = bus_client_policy_check_send(from->policy, &pm, to ? &tn.peer : NULL, rulep);
		if (to)
			peer_names_deinit(&tn);
		if (!ok) {
			*sendp = true;
			return 0;
		}
	}
	if (to && to->policy) {
		if (from && !from_names) {
			r = peer_names_init(&fn, from);
			if (r < 0)
				return r;
			from_names = &fn.peer;
		}
		ok = bus_client_policy_check_receive(to->policy, &pm, from ? from_names : NULL,
						     eavesdropping, rulep);
		if (from_names == &fn.peer)
			peer_names_deinit(&fn);
	}
	return ok;
}

static int router_send_error_capture(struct connection *conn, struct message *call,
				     const char *name, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

/* AccessDenied to the sender of a message the policy rejected. */
static int policy_denied(struct connection *conn, struct message *m,
			 const struct bus_policy_rule *rule, bool send_side)
{
	_cleanup_free_ char *why = rule ? bus_policy_rule_describe(rule) : NULL;

	return router_send_error_capture(conn, m, DC_ERROR_ACCESS_DENIED,
		"Rejected %s message, type=\"%s\" interface=\"%s\" member=\"%s\" "
		"error name=\"%s\" destination=\"%s\" (%s)",
		send_side ? "send" : "receive", bus_message_type_to_string(m->type),
		m->interface ? m->interface : "(unset)", m->member ? m->member : "(unset)",
		m->error_name ? m->error_name : "(unset)",
		m->destination ? m->destination : "(unset)",
		why ? why : "no rule allows it");
}

/* ------------------------------------------------------------------ helpers */

static uint64_t now_usec(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000ULL + (uint64_t)ts.tv_nsec / 1000;
}

/*
 * The time of the current loop iteration, for reply deadlines: sd-event took
 * it when it woke up, so no clock read per call (a deadline seconds away does
 * not care about the microseconds of this dispatch).
 */
static uint64_t loop_now_usec(struct bus *bus)
{
	uint64_t usec;

	if (bus->event && sd_event_now(bus->event, CLOCK_MONOTONIC, &usec) >= 0)
		return usec;
	return now_usec();
}

void router_fill_match(struct match_message *mm, struct message *msg, struct connection *sender,
		       struct connection *recipient)
{
	unsigned int i, n;
	const char *v;

	mm->type = msg->type;
	mm->sender = sender ? &sender->owner : NULL;
	mm->destination = msg->destination;
	mm->recipient_names = recipient ? &recipient->owner : NULL;
	mm->recipient = recipient ? &recipient->matches : NULL;
	mm->path = msg->path;
	mm->interface = msg->interface;
	mm->member = msg->member;

	/* The first call parses the top-level arguments once (cached). */
	mm->n_args = 0;
	if (msg->body_size == 0)
		return;
	(void)message_get_arg(msg, 0, &v);
	n = msg->n_args;
	if (n > MATCH_ARGS)
		n = MATCH_ARGS;
	for (i = 0; i < n; i++) {
		v = NULL;
		mm->arg_types[i] = (uint8_t)message_get_arg(msg, i, &v);
		mm->args[i] = mm->arg_types[i] ? v : NULL;
	}
	mm->n_args = (uint8_t)n;
}

/*
 * Queue @msg on every destination of @set. The addressed recipient of a
 * method call is handled by the caller (its failure is the caller's error);
 * everyone else who does not take the message is not reading and is
 * disconnected after this dispatch.
 */
static int router_deliver(struct destset *set, struct message *msg)
{
	size_t i;
	int r;

	for (i = 0; i < set->n; i++) {
		struct connection *c = set->conns[i];

		r = connection_queue(c, msg);
		if (r == CONNECTION_E_QUOTA)
			connection_overflow(c);
		else if (r < 0)
			return r;
	}
	return 0;
}

enum {
	ERROR_IF_EXPECTED,	/* only to a call that expects a reply */
	ERROR_FORCE,		/* even to a message that expects none */
	ERROR_CAPTURE,		/* as IF_EXPECTED, but monitors always see it */
};

_printf_(5, 0) static int router_send_error_v(struct connection *conn, struct message *call,
					      int mode, const char *name, const char *fmt,
					      va_list ap)
{
	_cleanup_message_ struct message *err = NULL;
	_cleanup_free_ char *text = NULL;
	bool send;
	int r;

	send = !conn->closed && (mode == ERROR_FORCE || message_expects_reply(call));
	if (!send && (mode != ERROR_CAPTURE || list_is_empty(&conn->bus->monitors)))
		return 0;
	if (fmt && vasprintf(&text, fmt, ap) < 0)
		return -ENOMEM;
	r = message_new_error(&err, call, DC_SERVICE_DBUS, bus_next_serial(conn->bus), name,
			      text);
	if (r < 0)
		return r;
	if (send)
		router_send_from_driver(conn->bus, conn, err);
	else
		/* dbus-daemon shows monitors the error it would have sent. */
		monitor_capture(conn->bus, err, NULL, conn);
	return 0;
}

int router_send_error(struct connection *conn, struct message *call, const char *name,
		      const char *fmt, ...)
{
	va_list ap;
	int r;

	va_start(ap, fmt);
	r = router_send_error_v(conn, call, ERROR_IF_EXPECTED, name, fmt, ap);
	va_end(ap);
	return r;
}

/* An error even to a message that expects none (rejected replies). */
static int router_send_error_force(struct connection *conn, struct message *call,
				   const char *name, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static int router_send_error_force(struct connection *conn, struct message *call,
				   const char *name, const char *fmt, ...)
{
	va_list ap;
	int r;

	va_start(ap, fmt);
	r = router_send_error_v(conn, call, ERROR_FORCE, name, fmt, ap);
	va_end(ap);
	return r;
}

static int router_send_error_capture(struct connection *conn, struct message *call,
				     const char *name, const char *fmt, ...)
{
	va_list ap;
	int r;

	va_start(ap, fmt);
	r = router_send_error_v(conn, call, ERROR_CAPTURE, name, fmt, ap);
	va_end(ap);
	return r;
}

/*
 * A signal of the driver that @to may not receive (a receive rule denies it)
 * is not delivered. As dbus-daemon does, the bus answers it with an
 * AccessDenied error addressed to itself, which only monitors see.
 */
static bool router_driver_signal_denied(struct bus *bus, struct connection *to,
					struct message *msg)
{
	_cleanup_message_ struct message *err = NULL;
	_cleanup_free_ char *why = NULL, *text = NULL;
	const struct bus_policy_rule *rule;
	bool send_side;
	int r;

	if (msg->type != DC_MESSAGE_SIGNAL || !to->policy)
		return false;
	r = policy_allows(bus, NULL, NULL, to, msg, false, false, &rule, &send_side);
	if (r != 0)
		return false;
	why = rule ? bus_policy_rule_describe(rule) : NULL;
	if (asprintf(&text, "Rejected receive message, type=\"signal\" interface=\"%s\" "
		     "member=\"%s\" destination=\"%s\" (%s)",
		     msg->interface ? msg->interface : "(unset)",
		     msg->member ? msg->member : "(unset)", connection_name(to),
		     why ? why : "no rule allows it") < 0)
		return true;
	if (message_new_error(&err, msg, DC_SERVICE_DBUS, bus_next_serial(bus),
			      DC_ERROR_ACCESS_DENIED, text) >= 0)
		monitor_capture(bus, err, NULL, NULL);
	return true;
}

void router_send_from_driver(struct bus *bus, struct connection *to, struct message *msg)
{
	int r;

	monitor_capture(bus, msg, NULL, to);
	if (to->closed || to->monitor)
		return;
	if (router_driver_signal_denied(bus, to, msg))
		return;
	r = connection_queue(to, msg);
	if (r == CONNECTION_E_QUOTA)
		connection_overflow(to);
	else if (r < 0)
		log_warn("cannot queue message for %s: %s", connection_name(to), strerror(-r));
}

/*
 * Add everyone whose rules match @msg to @set; @recipient is excluded. With a
 * policy, each receiver must be allowed to get it (silently skipped if not,
 * as in dbus-daemon); @recipient != NULL means the others eavesdrop.
 */
static int router_collect_matches(struct bus *bus, struct message *msg, struct connection *sender,
				  struct connection *recipient, struct destset *set)
{
	struct match_message mm;
	struct list_node result;
	struct match_owner *o;
	struct peer_names sn;
	bool have_sn = false;
	int r = 0;

	if (match_registry_count(bus->matches) == 0)
		return 0;
	/* Unicast messages only match eavesdropping rules: skip the lookup without any. */
	if (msg->destination && bus->n_eavesdrop_rules == 0)
		return 0;
	router_fill_match(&mm, msg, sender, recipient);
	match_registry_match(bus->matches, &mm, &result);
	list_for_each_entry(o, &result, result_link) {
		struct connection *c = container_of(o, struct connection, matches);

		if (c->closed || c->overflow || c->monitor)
			continue;
		/* dbus-daemon skips receivers that cannot take fds, silently. */
		if (msg->n_fds && !c->unix_fds)
			continue;
		if (bus->policy) {
			const struct bus_policy_rule *rule;
			bool send_side;

			if (sender && !have_sn) {
				r = peer_names_init(&sn, sender);
				if (r < 0)
					return r;
				have_sn = true;
			}
			r = policy_allows(bus, sender, have_sn ? &sn.peer : NULL, c, msg, false,
					  recipient != NULL, &rule, &send_side);
			if (r < 0)
				break;
			if (r == 0) {
				/* Not delivered, silently; monitors see the error. */
				if (sender && recipient == NULL)
					(void)policy_denied(sender, msg, rule, send_side);
				r = 0;
				continue;
			}
		}
		r = destset_add(set, c);
		if (r < 0)
			break;
	}
	if (have_sn)
		peer_names_deinit(&sn);
	return r < 0 ? r : 0;
}

void router_broadcast_from_driver(struct bus *bus, struct message *msg)
{
	struct destset set;
	int r;

	destset_init(&set);
	monitor_capture(bus, msg, NULL, NULL);
	r = router_collect_matches(bus, msg, NULL, NULL, &set);
	if (r >= 0)
		r = router_deliver(&set, msg);
	if (r < 0)
		log_warn("cannot broadcast %s: %s", msg->member ? msg->member : "signal",
			 strerror(-r));
	destset_deinit(&set);
}

/* ------------------------------------------------------------- name events */

static void router_send_name_signal(struct bus *bus, struct connection *to, const char *member,
				    const char *name)
{
	_cleanup_message_ struct message *m = NULL;
	struct message_builder b;
	int r;

	/* Built even for a closed receiver: monitors see it, as with dbus-daemon. */
	message_builder_init_signal(&b, DC_PATH_DBUS, DC_INTERFACE_DBUS, member, "s");
	b.sender = DC_SERVICE_DBUS;
	b.destination = connection_name(to);
	dc_writer_write(&b.body, "s", name);
	r = message_builder_seal(&b, bus_next_serial(bus), &m);
	message_builder_deinit(&b);
	if (r < 0) {
		log_warn("cannot build %s: %s", member, strerror(-r));
		return;
	}
	/* The receiver's receive rules apply (router_send_from_driver()). */
	router_send_from_driver(bus, to, m);
}

/* Keep the NAMES charge of @conn equal to the names it owns or waits for. */
void router_sync_name_charge(struct connection *conn)
{
	uint64_t have = conn->charges[USER_SLOT_NAMES].amount;
	uint64_t want = conn->owner.n_ownerships;

	if (want > have) {
		/* Cannot fail the operation after the fact: checked up front. */
		if (connection_charge(conn, USER_SLOT_NAMES, want - have))
			log_warn("names of %s exceed the user's quota", connection_name(conn));
	} else if (want < have) {
		connection_uncharge(conn, USER_SLOT_NAMES, have - want);
	}
}

void router_name_event(void *userdata, const struct name_event *ev)
{
	struct bus *bus = userdata;
	struct connection *c;

	switch (ev->type) {
	case NAME_EVENT_OWNER_CHANGED: {
		_cleanup_message_ struct message *m = NULL;
		struct message_builder b;
		int r;

		message_builder_init_signal(&b, DC_PATH_DBUS, DC_INTERFACE_DBUS,
					    "NameOwnerChanged", "sss");
		b.sender = DC_SERVICE_DBUS;
		dc_writer_write(&b.body, "sss", ev->name,
				ev->old_owner ? ev->old_owner->unique_name : "",
				ev->new_owner ? ev->new_owner->unique_name : "");
		r = message_builder_seal(&b, bus_next_serial(bus), &m);
		message_builder_deinit(&b);
		if (r < 0) {
			log_warn("cannot build NameOwnerChanged: %s", strerror(-r));
			return;
		}
		router_broadcast_from_driver(bus, m);
		break;
	}
	case NAME_EVENT_LOST:
		c = container_of(ev->old_owner, struct connection, owner);
		router_sync_name_charge(c);
		router_send_name_signal(bus, c, "NameLost", ev->name);
		break;
	case NAME_EVENT_ACQUIRED:
		c = container_of(ev->new_owner, struct connection, owner);
		router_sync_name_charge(c);
		router_send_name_signal(bus, c, "NameAcquired", ev->name);
		/* StartServiceByName replies and queued auto-start calls, after NameAcquired. */
		activation_name_acquired(bus->activation, ev->name);
		break;
	}
}

/* ---------------------------------------------------------------- teardown */

static void router_send_noreply(struct bus *bus, struct reply_owner *caller, uint32_t serial,
				const char *text)
{
	struct connection *c = container_of(caller, struct connection, replies);
	_cleanup_message_ struct message *m = NULL;
	struct message_builder b;
	int r;

	if (c->closed)
		return;
	message_builder_init(&b, DC_MESSAGE_ERROR, "s");
	b.error_name = DC_ERROR_NO_REPLY;
	b.reply_serial = serial;
	b.sender = DC_SERVICE_DBUS;
	b.destination = connection_name(c);
	dc_writer_write(&b.body, "s", text);
	r = message_builder_seal(&b, bus_next_serial(bus), &m);
	message_builder_deinit(&b);
	if (r < 0) {
		log_warn("cannot build NoReply: %s", strerror(-r));
		return;
	}
	router_send_from_driver(bus, c, m);
}

void router_noreply(void *userdata, struct reply_owner *caller, uint32_t serial)
{
	router_send_noreply(userdata, caller, serial,
			    "Message recipient disconnected from message bus without replying");
}

static void router_reply_expired(void *userdata, struct reply_owner *caller, uint32_t serial)
{
	router_send_noreply(userdata, caller, serial,
			    "Message did not receive a reply (timeout by message bus)");
}

static int router_reply_timer_cb(sd_event_source *s, uint64_t usec, void *userdata)
{
	struct bus *bus = userdata;

	reply_registry_expire(bus->replies, now_usec(), router_reply_expired, bus);
	router_arm_reply_timer(bus);
	return 0;
}

/* Keep one timer armed at the oldest pending call's deadline (reply_timeout). */
void router_arm_reply_timer(struct bus *bus)
{
	uint64_t deadline = reply_registry_next_deadline(bus->replies), armed;
	int enabled;

	if (!bus->event)
		return;
	if (!deadline) {
		if (bus->reply_timer)
			sd_event_source_set_enabled(bus->reply_timer, SD_EVENT_OFF);
		return;
	}
	if (!bus->reply_timer) {
		if (sd_event_add_time(bus->event, &bus->reply_timer, CLOCK_MONOTONIC, deadline, 0,
				      router_reply_timer_cb, bus) < 0)
			log_warn("cannot arm the reply timeout");
		return;
	}
	/*
	 * Already armed no later than the oldest deadline: leave it. Calls come
	 * in deadline order, so re-arming for each one would cost two sd-event
	 * updates per call; an early expiry finds nothing due and re-arms here.
	 */
	if (sd_event_source_get_enabled(bus->reply_timer, &enabled) >= 0 &&
	    enabled != SD_EVENT_OFF &&
	    sd_event_source_get_time(bus->reply_timer, &armed) >= 0 && armed <= deadline)
		return;
	sd_event_source_set_time(bus->reply_timer, deadline);
	sd_event_source_set_enabled(bus->reply_timer, SD_EVENT_ONESHOT);
}

static void router_rule_dropped(void *userdata, struct match_rule *rule)
{
	struct bus *bus = userdata;
	struct connection *c = container_of(rule->owner, struct connection, matches);

	if (rule->eavesdrop && bus->n_eavesdrop_rules)
		bus->n_eavesdrop_rules--;
	connection_uncharge(c, USER_SLOT_MATCHES, 1);
}

void router_connection_gone(struct connection *conn)
{
	struct bus *bus = conn->bus;

	/* Its calls waiting for an activation are dropped. */
	activation_sender_gone(bus->activation, conn);

	/* Its own rules first: it must not receive its own NameOwnerChanged. */
	if (!conn->monitor) {
		struct match_rule *rule;

		list_for_each_entry(rule, &conn->matches.rules, owner_link)
			if (rule->eavesdrop && bus->n_eavesdrop_rules)
				bus->n_eavesdrop_rules--;
	}
	match_owner_deinit(&conn->matches);
	connection_uncharge(conn, USER_SLOT_MATCHES, conn->charges[USER_SLOT_MATCHES].amount);

	if (conn->owner.registry) {
		/* Names (newest first) and the unique name, with their signals. */
		name_registry_remove_unique(bus->names, &conn->owner);
		(void)match_registry_drop_unique(bus->matches, connection_name(conn),
						 router_rule_dropped, bus);
	}
	if (conn->registered)	/* monitors included */
		bus->n_active--;

	/* Callers waiting on this connection get NoReply, its own calls vanish. */
	reply_owner_flush(&conn->replies, router_noreply, bus);
	list_unlink(&conn->monitor_link);
}

/* ------------------------------------------------------------------ routing */

static bool is_hello(const struct message *m)
{
	return m->type == DC_MESSAGE_METHOD_CALL && m->destination &&
	       !strcmp(m->destination, DC_SERVICE_DBUS) && m->member &&
	       !strcmp(m->member, "Hello") &&
	       (!m->interface || !strcmp(m->interface, DC_INTERFACE_DBUS));
}

static int router_broadcast(struct connection *conn, struct message *m)
{
	struct bus *bus = conn->bus;
	struct destset set;
	int r;

	destset_init(&set);
	monitor_capture(bus, m, conn, NULL);
	r = router_collect_matches(bus, m, conn, NULL, &set);
	if (r >= 0)
		r = router_deliver(&set, m);
	destset_deinit(&set);
	return r;
}

/* Show @m to monitors, unless they saw it before it waited for an activation. */
static void router_capture(bool resumed, struct bus *bus, struct message *m,
			   struct connection *sender, struct connection *target)
{
	if (!resumed)
		monitor_capture(bus, m, sender, target);
}

/*
 * @resumed: @m waited for an activation; monitors saw it when it arrived
 * (activation.h, ops->capture) and do not see it again.
 */
static int router_unicast(struct connection *conn, struct message *m, bool resumed)
{
	struct bus *bus = conn->bus;
	struct connection *target;
	struct reply_slot *slot = NULL;
	struct list_node *last;
	struct destset set;
	int r;

	target = bus_resolve(bus, m->destination);
	if (!target) {
		/*
		 * Auto-start (dbus-daemon: method calls and unicast signals without
		 * NO_AUTO_START): queued until the name appears (monitors see it when
		 * it is delivered), or ServiceUnknown / Spawn.* / LimitsExceeded. The
		 * send rules decide first, as if the service owned the name; a name
		 * without .service file is ServiceUnknown before that (dbus-daemon).
		 */
		if ((m->type == DC_MESSAGE_METHOD_CALL || m->type == DC_MESSAGE_SIGNAL) &&
		    !(m->flags & DC_FLAG_NO_AUTO_START)) {
			if (bus->policy && activation_is_activatable(bus->activation,
								     m->destination)) {
				const struct bus_policy_rule *rule;
				bool send_side;

				r = policy_allows(bus, conn, NULL, NULL, m, false, false, &rule,
						  &send_side);
				if (r < 0)
					return r;
				if (r == 0) {
					router_capture(resumed, bus, m, conn, NULL);
					return policy_denied(conn, m, rule, true);
				}
			}
			return activation_start(bus->activation, conn, m, m->destination, true);
		}
		router_capture(resumed, bus, m, conn, NULL);
		if (m->type != DC_MESSAGE_METHOD_CALL)
			return 0;
		return router_send_error(conn, m, DC_ERROR_NAME_HAS_NO_OWNER,
					 "Name \"%s\" does not exist", m->destination);
	}

	switch (m->type) {
	case DC_MESSAGE_METHOD_RETURN:
	case DC_MESSAGE_ERROR:
		r = reply_registry_consume(bus->replies, &target->replies, &conn->replies,
					   m->reply_serial);
		if (r) {
			router_capture(resumed, bus, m, conn, target);
			return router_send_error_force(conn, m, DC_ERROR_ACCESS_DENIED,
				"Rejected: %s is not a reply to a pending method call of %s "
				"(reply serial %u)",
				m->type == DC_MESSAGE_ERROR ? "error" : "method return",
				connection_name(target), m->reply_serial);
		}
		break;
	case DC_MESSAGE_METHOD_CALL:
		if (m->n_fds && !target->unix_fds) {
			router_capture(resumed, bus, m, conn, target);
			return router_send_error(conn, m, DC_ERROR_NOT_SUPPORTED,
				"Tried to send message with Unix file descriptors to a client "
				"that doesn't support that.");
		}
		if (message_expects_reply(m)) {
			r = reply_registry_add(bus->replies, &conn->replies, &target->replies,
					       m->serial, loop_now_usec(bus));
			if (r == REPLY_E_EXISTS) {
				router_capture(resumed, bus, m, conn, target);
				return router_send_error(conn, m, DC_ERROR_ACCESS_DENIED,
					"Message has the same reply serial as a currently-"
					"outstanding existing method call");
			} else if (r == REPLY_E_QUOTA) {
				router_capture(resumed, bus, m, conn, target);
				return router_send_error(conn, m, DC_ERROR_LIMITS_EXCEEDED,
					"The maximum number of pending replies per connection "
					"has been reached");
			} else if (r < 0) {
				return r;
			}
			/* reply_registry_add() appends the new slot to the caller's calls. */
			last = list_last(&conn->replies.calls);
			slot = last ? list_entry(last, struct reply_slot, caller_link) : NULL;
			if (!slot || slot->callee != &target->replies || slot->serial != m->serial)
				slot = reply_registry_find(bus->replies, &conn->replies,
							   &target->replies, m->serial);
			if (bus->replies->timeout_usec)
				router_arm_reply_timer(bus);
		}
		break;
	default:
		/* Signals (and unknown types) to one peer: drop fds it cannot take. */
		if (m->n_fds && !target->unix_fds) {
			router_capture(resumed, bus, m, conn, target);
			return 0;
		}
		break;
	}

	router_capture(resumed, bus, m, conn, target);

	if (bus->policy) {
		const struct bus_policy_rule *rule;
		bool send_side;

		r = policy_allows(bus, conn, NULL, target, m,
				  m->type == DC_MESSAGE_METHOD_RETURN || m->type == DC_MESSAGE_ERROR,
				  false, &rule, &send_side);
		if (r < 0)
			return r;
		if (r == 0) {
			if (slot)
				reply_slot_free(slot);
			return policy_denied(conn, m, rule, send_side);
		}
	}

	/* The addressed recipient first, then eavesdroppers. */
	r = connection_queue(target, m);
	if (r == CONNECTION_E_QUOTA || r == CONNECTION_E_DEAD) {
		if (m->type == DC_MESSAGE_METHOD_CALL) {
			if (slot)
				reply_slot_free(slot);
			if (r == CONNECTION_E_QUOTA)
				return router_send_error(conn, m, DC_ERROR_LIMITS_EXCEEDED,
					"The message queue of %s is full: it does not read its "
					"messages", connection_name(target));
			return router_send_error(conn, m, DC_ERROR_NO_REPLY,
				"Message recipient disconnected from message bus without replying");
		}
		if (r == CONNECTION_E_QUOTA)
			connection_overflow(target);
	} else if (r < 0) {
		if (slot)
			reply_slot_free(slot);
		return r;
	}

	destset_init(&set);
	r = router_collect_matches(bus, m, conn, target, &set);
	if (r >= 0)
		r = router_deliver(&set, m);
	destset_deinit(&set);
	return r;
}

int router_resume_activated(struct connection *conn, struct message *msg)
{
	if (conn->closed)
		return 0;
	return router_unicast(conn, msg, true);
}

/* The send policy for the direct path of native clients (native.h). */
static int router_native_policy(struct connection *from, struct connection *to,
				struct message *probe, bool requested_reply)
{
	const struct bus_policy_rule *rule;
	bool send_side;

	return policy_allows(from->bus, from, NULL, to, probe, requested_reply, false, &rule,
			     &send_side);
}

/*
 * A message before Hello, as dbus-daemon 1.14 treats it (its security check
 * lets an inactive connection send nothing but Hello to the driver):
 *  - no destination: a method call gets the bus' Peer interface (or
 *    UnknownMethod), a reply or error is dropped, as after Hello;
 *  - anything else is shown to monitors as sent by ":not.active.yet"; then
 *    one for org.freedesktop.DBus, whatever its type and flags, gets
 *    AccessDenied (to ":not.active.yet") and the connection stays: Hello may
 *    follow. A signal without destination, or anything for another
 *    destination, closes the connection.
 */
#define ROUTER_INACTIVE_SENDER ":not.active.yet"

static int router_dispatch_unregistered(struct connection *conn, struct message *msg)
{
	_cleanup_message_ struct message *m = NULL;
	int r;

	if (!msg->destination && msg->type == DC_MESSAGE_METHOD_CALL)
		return driver_dispatch_peer(conn, msg);
	if (!msg->destination && msg->type != DC_MESSAGE_SIGNAL)
		return 0;

	r = message_stitch_sender(msg, ROUTER_INACTIVE_SENDER, &m);
	if (r < 0)
		return r;
	monitor_capture(conn->bus, m, conn, NULL);
	if (!m->destination || strcmp(m->destination, DC_SERVICE_DBUS)) {
		connection_close(conn, "a message other than Hello() before Hello()");
		return 0;
	}
	return router_send_error_force(conn, m, DC_ERROR_ACCESS_DENIED,
		"Client tried to send a message other than Hello without being registered");
}

int router_dispatch(struct connection *conn, struct message *msg)
{
	_cleanup_message_ struct message *m = NULL;
	int r;

	if (conn->monitor) {
		connection_close(conn, "monitors are not allowed to send messages");
		return 0;
	}
	/* The bus1 bootstrap comes before Hello (docs/native-protocol.md). */
	if (!conn->registered && native_is_connect(msg))
		return native_connect(conn->bus->native, conn, msg, &conn->native);
	if (!conn->registered) {
		if (!is_hello(msg))
			return router_dispatch_unregistered(conn, msg);
		return driver_hello(conn, msg);
	}

	r = message_stitch_sender(msg, connection_name(conn), &m);
	if (r < 0)
		return r;

	if (!m->destination) {
		if (m->type == DC_MESSAGE_SIGNAL)
			return router_broadcast(conn, m);
		monitor_capture(conn->bus, m, conn, NULL);
		if (m->type == DC_MESSAGE_METHOD_CALL)
			return driver_dispatch_peer(conn, m);
		return 0;
	}
	if (!strcmp(m->destination, DC_SERVICE_DBUS)) {
		/*
		 * dbus-daemon fails the activations of an ActivationFailure in a
		 * transaction of its own: monitors see the errors before the signal.
		 */
		bool late = activation_is_systemd_failure(m);

		if (!late)
			monitor_capture(conn->bus, m, conn, NULL);
		if (conn->bus->policy) {
			const struct bus_policy_rule *rule;
			bool send_side;

			r = policy_allows(conn->bus, conn, NULL, NULL, m, false, false, &rule,
					  &send_side);
			if (r < 0)
				return r;
			if (r == 0) {
				if (late)
					monitor_capture(conn->bus, m, conn, NULL);
				return policy_denied(conn, m, rule, true);
			}
		}
		if (native_is_get_direct_handle(m))
			return native_get_direct_handle(conn->bus->native, conn, m,
							router_native_policy);
		r = driver_dispatch(conn, m);
		if (late)
			monitor_capture(conn->bus, m, conn, NULL);
		return r;
	}
	return router_unicast(conn, m, false);
}
