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
#include "broker/bus.h"
#include "broker/connection.h"
#include "broker/driver.h"
#include "broker/log.h"
#include "broker/match.h"
#include "broker/monitor.h"
#include "broker/name.h"
#include "broker/reply.h"
#include "broker/router.h"
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

/* ------------------------------------------------------------------ helpers */

static uint64_t now_usec(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000ULL + (uint64_t)ts.tv_nsec / 1000;
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

static int router_send_error_v(struct connection *conn, struct message *call, bool force,
			       const char *name, const char *fmt, va_list ap)
{
	_cleanup_message_ struct message *err = NULL;
	_cleanup_free_ char *text = NULL;
	int r;

	if (!force && !message_expects_reply(call))
		return 0;
	if (conn->closed)
		return 0;
	if (fmt && vasprintf(&text, fmt, ap) < 0)
		return -ENOMEM;
	r = message_new_error(&err, call, DC_SERVICE_DBUS, bus_next_serial(conn->bus), name,
			      text);
	if (r < 0)
		return r;
	router_send_from_driver(conn->bus, conn, err);
	return 0;
}

int router_send_error(struct connection *conn, struct message *call, const char *name,
		      const char *fmt, ...)
{
	va_list ap;
	int r;

	va_start(ap, fmt);
	r = router_send_error_v(conn, call, false, name, fmt, ap);
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
	r = router_send_error_v(conn, call, true, name, fmt, ap);
	va_end(ap);
	return r;
}

void router_send_from_driver(struct bus *bus, struct connection *to, struct message *msg)
{
	int r;

	monitor_capture(bus, msg, NULL, to);
	if (to->closed || to->monitor)
		return;
	r = connection_queue(to, msg);
	if (r == CONNECTION_E_QUOTA)
		connection_overflow(to);
	else if (r < 0)
		log_warn("cannot queue message for %s: %s", connection_name(to), strerror(-r));
}

/* Add everyone whose rules match @msg to @set; @recipient is excluded. */
static int router_collect_matches(struct bus *bus, struct message *msg, struct connection *sender,
				  struct connection *recipient, struct destset *set)
{
	struct match_message mm;
	struct list_node result;
	struct match_owner *o;
	int r;

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
		r = destset_add(set, c);
		if (r < 0)
			return r;
	}
	return 0;
}

void router_broadcast_from_driver(struct bus *bus, struct message *msg)
{
	struct destset set;
	int r;

	destset_init(&set);
	r = router_collect_matches(bus, msg, NULL, NULL, &set);
	monitor_capture(bus, msg, NULL, NULL);
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
		break;
	}
}

/* ---------------------------------------------------------------- teardown */

void router_noreply(void *userdata, struct reply_owner *caller, uint32_t serial)
{
	struct bus *bus = userdata;
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
	dc_writer_write(&b.body, "s",
			"Message recipient disconnected from message bus without replying");
	r = message_builder_seal(&b, bus_next_serial(bus), &m);
	message_builder_deinit(&b);
	if (r < 0) {
		log_warn("cannot build NoReply: %s", strerror(-r));
		return;
	}
	router_send_from_driver(bus, c, m);
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
	if (conn->registered && !conn->monitor)
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
	r = router_collect_matches(bus, m, conn, NULL, &set);
	monitor_capture(bus, m, conn, NULL);
	if (r >= 0)
		r = router_deliver(&set, m);
	destset_deinit(&set);
	return r;
}

static int router_unicast(struct connection *conn, struct message *m)
{
	struct bus *bus = conn->bus;
	struct connection *target;
	struct reply_slot *slot = NULL;
	struct destset set;
	int r;

	target = bus_resolve(bus, m->destination);
	if (!target) {
		monitor_capture(bus, m, conn, NULL);
		if (m->type != DC_MESSAGE_METHOD_CALL)
			return 0;
		if (m->flags & DC_FLAG_NO_AUTO_START)
			return router_send_error(conn, m, DC_ERROR_NAME_HAS_NO_OWNER,
						 "Name \"%s\" does not exist", m->destination);
		return router_send_error(conn, m, DC_ERROR_SERVICE_UNKNOWN,
					 "The name %s was not provided by any .service files",
					 m->destination);
	}

	switch (m->type) {
	case DC_MESSAGE_METHOD_RETURN:
	case DC_MESSAGE_ERROR:
		r = reply_registry_consume(bus->replies, &target->replies, &conn->replies,
					   m->reply_serial);
		if (r) {
			monitor_capture(bus, m, conn, target);
			return router_send_error_force(conn, m, DC_ERROR_ACCESS_DENIED,
				"Rejected: %s is not a reply to a pending method call of %s "
				"(reply serial %u)",
				m->type == DC_MESSAGE_ERROR ? "error" : "method return",
				connection_name(target), m->reply_serial);
		}
		break;
	case DC_MESSAGE_METHOD_CALL:
		if (m->n_fds && !target->unix_fds) {
			monitor_capture(bus, m, conn, target);
			return router_send_error(conn, m, DC_ERROR_NOT_SUPPORTED,
				"Tried to send message with Unix file descriptors to a client "
				"that doesn't support that.");
		}
		if (message_expects_reply(m)) {
			r = reply_registry_add(bus->replies, &conn->replies, &target->replies,
					       m->serial, now_usec());
			if (r == REPLY_E_EXISTS) {
				monitor_capture(bus, m, conn, target);
				return router_send_error(conn, m, DC_ERROR_ACCESS_DENIED,
					"Message has the same reply serial as a currently-"
					"outstanding existing method call");
			} else if (r == REPLY_E_QUOTA) {
				monitor_capture(bus, m, conn, target);
				return router_send_error(conn, m, DC_ERROR_LIMITS_EXCEEDED,
					"The maximum number of pending replies per connection "
					"has been reached");
			} else if (r < 0) {
				return r;
			}
			slot = reply_registry_find(bus->replies, &conn->replies,
						   &target->replies, m->serial);
		}
		break;
	default:
		/* Signals (and unknown types) to one peer: drop fds it cannot take. */
		if (m->n_fds && !target->unix_fds) {
			monitor_capture(bus, m, conn, target);
			return 0;
		}
		break;
	}

	monitor_capture(bus, m, conn, target);

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

int router_dispatch(struct connection *conn, struct message *msg)
{
	_cleanup_message_ struct message *m = NULL;
	int r;

	if (conn->monitor) {
		connection_close(conn, "monitors are not allowed to send messages");
		return 0;
	}
	if (!conn->registered) {
		if (!is_hello(msg)) {
			connection_close(conn, "the first message must be Hello()");
			return 0;
		}
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
		monitor_capture(conn->bus, m, conn, NULL);
		return driver_dispatch(conn, m);
	}
	return router_unicast(conn, m);
}
