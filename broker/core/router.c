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
#include <syslog.h>
#include <time.h>
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
#include "conf/policy.h"
#include "dbus-compat/message.h"
#include "dbus-compat/protocol.h"
#include "util/clock.h"

/* ------------------------------------------------------------ destination set */

/**
 * struct destset - the destinations of one message
 * @peers:	destination peers, each at most once
 * @n, @cap:	entries used / allocated
 * @inline_peers: storage for the common case (no allocation)
 */
#define DESTSET_INLINE 32
struct destset {
	struct peer **peers;
	size_t n;
	size_t cap;
	struct peer *inline_peers[DESTSET_INLINE];
};

static void destset_init(struct destset *set)
{
	set->peers = set->inline_peers;
	set->n = 0;
	set->cap = DESTSET_INLINE;
}

static void destset_deinit(struct destset *set)
{
	if (set->peers != set->inline_peers)
		free(set->peers);
	set->peers = NULL;
	set->n = set->cap = 0;
}

static int destset_add(struct destset *set, struct peer *peer)
{
	if (set->n == set->cap) {
		size_t cap = set->cap * 2;
		struct peer **v;

		if (set->peers == set->inline_peers) {
			v = malloc(cap * sizeof(*v));
			if (!v)
				return -ENOMEM;
			memcpy(v, set->peers, set->n * sizeof(*v));
		} else {
			v = realloc(set->peers, cap * sizeof(*v));
			if (!v)
				return -ENOMEM;
		}
		set->peers = v;
		set->cap = cap;
	}
	set->peers[set->n++] = peer;
	return 0;
}

/* ------------------------------------------------------------------ policy */

/*
 * A refusal of a message of @actor, logged at the bus' security level as
 * dbus-daemon logs it, but at most a burst of lines per window per actor
 * (its connection, or its container instance as a whole:
 * peer_refusal_log()): a flood of refusals cannot fill the journal, and how
 * many lines were left out is logged after the window.
 */
static void router_log_refusal(struct peer *actor, const char *text)
{
	if (log_limit_pass(&actor->bus->log_limits, peer_refusal_log(actor)))
		log_printf(LOG_AUTH | LOG_NOTICE, "%s", text);
}

/**
 * router_carry_out() - do what the policy decided about @m
 * @sender:	who sent @m, and gets the answer; NULL: the driver (or nobody
 *		is answered, a broadcast's receiver), then only monitors see
 *		an error
 * @v:		the verdict (policy.h), not VERDICT_DELIVER's
 * @actor:	whose refusal it is, logged as dbus-daemon logs it unless the
 *		decider did; NULL: not logged (a broadcast, an eavesdropped copy)
 *
 * The router knows what each verdict means, never who decided it.
 */
static int router_carry_out(struct bus *bus, struct peer *sender, struct message *m,
			    const struct verdict *v, struct peer *actor)
{
	_cleanup_message_ struct message *err = NULL;

	switch (v->kind) {
	case VERDICT_DELIVER:
		return 0;
	case VERDICT_ANSWER:
		router_send_from_driver(bus, sender, v->answer);
		return 0;
	case VERDICT_ERROR:
		return router_send_error(sender, m, v->error_name, "%s", v->text);
	case VERDICT_DROP:
	case VERDICT_DENY:
		break;
	}
	if (!v->text)
		return 0;
	if (actor && !v->logged)
		router_log_refusal(actor, v->text);
	if (v->kind == VERDICT_DENY && sender)
		return router_send_error(sender, m, DC_ERROR_ACCESS_DENIED, "%s", v->text);
	if (list_is_empty(&bus->monitors))
		return 0;
	if (message_new_error(&err, m, DC_SERVICE_DBUS, bus_next_serial(bus),
			      DC_ERROR_ACCESS_DENIED, v->text) >= 0)
		monitor_capture(bus, err, NULL, NULL);
	return 0;
}

/*
 * A call to @target, whose queue is full: LimitsExceeded to its caller,
 * logged, in dbus-daemon's words.
 */
static int router_queue_full(struct peer *peer, struct peer *target, struct message *m)
{
	_cleanup_free_ char *text = policy_denial_text(
		"Rejected: destination has a full message queue", 0, peer, target, m, false, NULL);

	if (!text)
		return -ENOMEM;
	router_log_refusal(peer, text);
	return router_send_error(peer, m, DC_ERROR_LIMITS_EXCEEDED, "%s", text);
}

/* ------------------------------------------------------------------ helpers */

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

void router_fill_match(struct match_message *mm, struct message *msg, struct peer *sender,
		       struct peer *recipient)
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
		struct peer *c = set->peers[i];

		r = peer_queue(c, msg);
		if (r == PEER_E_QUOTA)
			peer_overflow(c);
		else if (r < 0)
			return r;
	}
	return 0;
}

/*
 * An error of the bus to the sender of @call. dbus-daemon sends its errors
 * whatever @call is (a call with NO_REPLY_EXPECTED, a signal, a reply): so
 * does the bus. To a sender that is closed meanwhile only the monitors see
 * it, as they would have seen it sent.
 */
_printf_(4, 0) static int router_send_error_v(struct peer *peer, struct message *call,
					      const char *name, const char *fmt, va_list ap)
{
	_cleanup_message_ struct message *err = NULL;
	_cleanup_free_ char *text = NULL;
	int r;

	if (peer->closed && list_is_empty(&peer->bus->monitors))
		return 0;
	if (fmt && vasprintf(&text, fmt, ap) < 0)
		return -ENOMEM;
	r = message_new_error(&err, call, DC_SERVICE_DBUS, bus_next_serial(peer->bus), name,
			      text);
	if (r < 0)
		return r;
	if (!peer->closed)
		router_send_from_driver(peer->bus, peer, err);
	else
		monitor_capture(peer->bus, err, NULL, peer);
	return 0;
}

int router_send_error(struct peer *peer, struct message *call, const char *name,
		      const char *fmt, ...)
{
	va_list ap;
	int r;

	va_start(ap, fmt);
	r = router_send_error_v(peer, call, name, fmt, ap);
	va_end(ap);
	return r;
}

/*
 * A message of the driver (a signal, a reply, an error) that @to may not
 * receive (a receive rule denies it, or none allows it) is not delivered,
 * as in dbus-daemon, which asks the receive rules of a registered receiver
 * about everything the bus sends it, a reply counting as requested. It logs
 * that, and answers it with an AccessDenied error addressed to itself, which
 * only monitors see. A connection before Hello receives anything.
 */
static bool router_driver_denied(struct bus *bus, struct peer *to, struct message *msg)
{
	_cleanup_verdict_ struct verdict v = {};
	int r;

	r = policy_judge_from_driver(bus, to, msg, &v);
	if (r >= 0 && v.kind == VERDICT_DELIVER)
		return false;
	/*
	 * Out of memory: not delivered either, rather than let it pass. The
	 * actor is the connection whose message made the bus send it, if any.
	 */
	if (r >= 0)
		(void)router_carry_out(bus, NULL, msg, &v, bus->dispatching ?: to);
	return true;
}

/*
 * Count an error of the bus to @to as a refusal of its message: every
 * LimitsExceeded and AccessDenied the bus answers with passes here,
 * whichever part of it refused (router, driver, activation).
 */
static void router_count_answer(struct peer *to, const struct message *msg)
{
	if (msg->type != DC_MESSAGE_ERROR || !msg->error_name)
		return;
	if (!strcmp(msg->error_name, DC_ERROR_LIMITS_EXCEEDED))
		peer_count_refusal(to, REFUSAL_LIMITS);
	else if (!strcmp(msg->error_name, DC_ERROR_ACCESS_DENIED))
		peer_count_refusal(to, REFUSAL_POLICY);
}

void router_send_from_driver(struct bus *bus, struct peer *to, struct message *msg)
{
	int r;

	monitor_capture(bus, msg, NULL, to);
	if (to->closed || to->monitor)
		return;
	router_count_answer(to, msg);
	if (router_driver_denied(bus, to, msg)) {
		peer_count_refusal(to, REFUSAL_DROPPED);
		return;
	}
	r = peer_queue(to, msg);
	if (r == PEER_E_QUOTA)
		peer_overflow(to);
	else if (r < 0)
		log_warn("cannot queue message for %s: %s", peer_name(to), strerror(-r));
}

/*
 * Add everyone whose rules match @msg to @set; @recipient is excluded. Each
 * receiver must be allowed to get it by the policy (silently skipped if
 * not, as in dbus-daemon); @recipient != NULL means the others eavesdrop.
 */
struct router_audience {
	bool (*may_know)(const struct peer *to, const void *data);
	const void *data;
};

static int router_collect_matches(struct bus *bus, struct message *msg, struct peer *sender,
				  struct peer *recipient, const struct router_audience *audience,
				  struct destset *set)
{
	struct match_message mm;
	struct list_node result;
	struct match_owner *o;
	struct policy_names sn;
	bool have_sn = false;
	int r = 0;

	/* Unicast messages only match eavesdropping rules: skip the lookup without any. */
	if (msg->destination && bus->n_eavesdrop_rules == 0)
		return 0;
	if (match_registry_count(bus->matches) == 0)
		return 0;
	router_fill_match(&mm, msg, sender, recipient);
	match_registry_match(bus->matches, &mm, &result);
	list_for_each_entry(o, &result, result_link) {
		struct peer *c = container_of(o, struct peer, matches);

		if (c->closed || c->overflow || c->monitor)
			continue;
		/* dbus-daemon skips receivers that cannot take fds, silently. */
		if (msg->n_fds && !c->unix_fds)
			continue;
		if (audience && !audience->may_know(c, audience->data))
			continue;
		/* The sender's names, once, for the <policy> rules of every receiver. */
		if (sender && !have_sn && policy_active(bus)) {
			r = policy_names_init(&sn, sender);
			if (r < 0)
				return r;
			have_sn = true;
		}
		{
			_cleanup_verdict_ struct verdict v = {};

			r = policy_judge_receive(bus, c, sender, have_sn ? &sn.peer : NULL, msg,
						 recipient != NULL, &v);
			if (r < 0)
				break;
			if (v.kind != VERDICT_DELIVER) {
				/* Not delivered, silently; monitors see the error. */
				(void)router_carry_out(bus, NULL, msg, &v, NULL);
				continue;
			}
		}
		r = destset_add(set, c);
		if (r < 0)
			break;
		r = policy_delivered(c, sender);
		if (r < 0)
			break;
	}
	if (have_sn)
		policy_names_deinit(&sn);
	return r < 0 ? r : 0;
}

/*
 * Broadcast @msg of @sender (NULL: the driver) to everyone whose rules
 * match it, and who is in @audience (NULL: anyone), after the monitors.
 */
static int router_broadcast_to(struct bus *bus, struct peer *sender, struct message *msg,
			       const struct router_audience *audience)
{
	struct destset set;
	int r;

	destset_init(&set);
	monitor_capture(bus, msg, sender, NULL);
	r = router_collect_matches(bus, msg, sender, NULL, audience, &set);
	if (r >= 0)
		r = router_deliver(&set, msg);
	destset_deinit(&set);
	return r;
}

static void router_broadcast_driver_signal(struct bus *bus, struct message *msg,
					   const struct router_audience *audience)
{
	int r = router_broadcast_to(bus, NULL, msg, audience);

	if (r < 0)
		log_warn("cannot broadcast %s: %s", msg->member ? msg->member : "signal",
			 strerror(-r));
}

void router_broadcast_from_driver(struct bus *bus, struct message *msg)
{
	router_broadcast_driver_signal(bus, msg, NULL);
}

void router_broadcast_from_driver_to(struct bus *bus, struct message *msg,
				     bool (*may_know)(const struct peer *to, const void *data),
				     const void *data)
{
	const struct router_audience audience = { .may_know = may_know, .data = data };

	router_broadcast_driver_signal(bus, msg, &audience);
}

/* ------------------------------------------------------------- name events */

static void router_send_name_signal(struct bus *bus, struct peer *to, const char *member,
				    const char *name)
{
	_cleanup_message_ struct message *m = NULL;
	struct message_builder b;
	int r;

	/* Built even for a closed receiver: monitors see it, as with dbus-daemon. */
	message_builder_init_signal(&b, DC_PATH_DBUS, DC_INTERFACE_DBUS, member, "s");
	b.sender = DC_SERVICE_DBUS;
	b.destination = peer_name(to);
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

/* Keep the NAMES charge of @peer equal to the names it owns or waits for. */
void router_sync_name_charge(struct peer *peer)
{
	uint64_t have = peer->charges[USER_SLOT_NAMES].amount;
	uint64_t want = peer->owner.n_ownerships;

	if (want > have) {
		/* Cannot fail the operation after the fact: checked up front. */
		if (peer_charge(peer, USER_SLOT_NAMES, want - have))
			log_warn("names of %s exceed the user's quota", peer_name(peer));
	} else if (want < have) {
		peer_uncharge(peer, USER_SLOT_NAMES, have - want);
	}
}

void router_name_event(void *userdata, const struct name_event *ev)
{
	struct bus *bus = userdata;
	struct peer *c;

	switch (ev->type) {
	case NAME_EVENT_OWNER_CHANGED: {
		_cleanup_message_ struct message *m = NULL;
		struct message_builder b;
		int r;

		/* The policy learns who owns the name (a filter: what it may see). */
		if (ev->new_owner && ev->name[0] != ':')
			policy_name_owner_changed(bus, ev->name,
						  container_of(ev->new_owner, struct peer, owner));

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
		c = container_of(ev->old_owner, struct peer, owner);
		router_sync_name_charge(c);
		router_send_name_signal(bus, c, "NameLost", ev->name);
		break;
	case NAME_EVENT_ACQUIRED:
		c = container_of(ev->new_owner, struct peer, owner);
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
	struct peer *c = container_of(caller, struct peer, replies);
	_cleanup_message_ struct message *m = NULL;
	struct message_builder b;
	int r;

	if (c->closed)
		return;
	message_builder_init(&b, DC_MESSAGE_ERROR, "s");
	b.error_name = DC_ERROR_NO_REPLY;
	b.reply_serial = serial;
	b.sender = DC_SERVICE_DBUS;
	b.destination = peer_name(c);
	dc_writer_write(&b.body, "s", text);
	r = message_builder_seal(&b, bus_next_serial(bus), &m);
	message_builder_deinit(&b);
	if (r < 0) {
		log_warn("cannot build NoReply: %s", strerror(-r));
		return;
	}
	router_send_from_driver(bus, c, m);
}

void router_noreply(void *userdata, struct reply_owner *caller, struct reply_owner *callee,
		    uint32_t serial)
{
	router_send_noreply(userdata, caller, serial,
			    "Message recipient disconnected from message bus without replying");
}

static void router_reply_expired(void *userdata, struct reply_owner *caller,
				 struct reply_owner *callee, uint32_t serial)
{
	/* Closed in the crash journal too: a restored bus must not expire it again. */
	bus_journal_reply(container_of(caller, struct peer, replies),
			  container_of(callee, struct peer, replies), JOURNAL_REC_REPLY_DONE,
			  serial, 0);
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
		if (sd_event_add_time(bus->event, &bus->reply_timer, CLOCK_MONOTONIC, deadline,
				      BUS_TIMER_ACCURACY_USEC, router_reply_timer_cb, bus) < 0)
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
	struct peer *c = container_of(rule->owner, struct peer, matches);

	if (rule->eavesdrop && bus->n_eavesdrop_rules)
		bus->n_eavesdrop_rules--;
	peer_uncharge(c, USER_SLOT_MATCHES, 1);
}

void router_peer_gone(struct peer *peer)
{
	struct bus *bus = peer->bus;

	/* Its calls waiting for an activation are dropped. */
	activation_sender_gone(bus->activation, peer);

	/* Its own rules first: it must not receive its own NameOwnerChanged. */
	if (!peer->monitor) {
		struct match_rule *rule;

		list_for_each_entry(rule, &peer->matches.rules, owner_link)
			if (rule->eavesdrop && bus->n_eavesdrop_rules)
				bus->n_eavesdrop_rules--;
	}
	match_owner_deinit(&peer->matches);
	peer_uncharge(peer, USER_SLOT_MATCHES, peer->charges[USER_SLOT_MATCHES].amount);

	if (peer->owner.registry) {
		/* Names (newest first) and the unique name, with their signals. */
		bus->peer_leaving = peer;
		name_registry_remove_unique(bus->names, &peer->owner);
		bus->peer_leaving = NULL;
		(void)match_registry_drop_unique(bus->matches, peer_name(peer),
						 router_rule_dropped, bus);
	}
	if (peer->registered)	/* monitors included */
		bus->n_active--;

	/* Callers waiting on this connection get NoReply, its own calls vanish. */
	reply_owner_flush(&peer->replies, router_noreply, bus);
	list_unlink(&peer->monitor_link);
}

/* ------------------------------------------------------------------ routing */

/* Show @m to monitors, unless they saw it before it waited for an activation. */
static void router_capture(bool resumed, struct bus *bus, struct message *m,
			   struct peer *sender, struct peer *target)
{
	if (!resumed)
		monitor_capture(bus, m, sender, target);
}

/*
 * @m is for a name nobody owns. Auto-start (dbus-daemon: any message without
 * NO_AUTO_START, a signal or a reply too): queued until the name appears
 * (monitors see it when it is delivered), or ServiceUnknown / Spawn.* /
 * LimitsExceeded. The send rules decide first, as if the service owned the
 * name; a name without .service file is ServiceUnknown before that
 * (dbus-daemon). With NO_AUTO_START: NameHasNoOwner, whatever the message.
 */
static int router_unicast_unowned(struct peer *peer, struct message *m, bool resumed)
{
	struct bus *bus = peer->bus;
	_cleanup_verdict_ struct verdict v = {};
	int r;

	if (!(m->flags & DC_FLAG_NO_AUTO_START)) {
		if (activation_is_activatable(bus->activation, m->destination)) {
			r = policy_judge_activation(bus, peer, m, &v);
			if (r < 0)
				return r;
			if (v.kind != VERDICT_DELIVER) {
				router_capture(resumed, bus, m, peer, NULL);
				return router_carry_out(bus, peer, m, &v, peer);
			}
		}
		return activation_start(bus->activation, peer, m, m->destination, true);
	}
	router_capture(resumed, bus, m, peer, NULL);
	return router_send_error(peer, m, DC_ERROR_NAME_HAS_NO_OWNER,
				 "Name \"%s\" does not exist", m->destination);
}

/*
 * What @peer sends, judged before its destination is looked up (a
 * container's filter): 0 passes, 1 carried out otherwise (shown to monitors
 * first), or negative errno.
 */
static int router_judge_send(struct peer *peer, struct message *m)
{
	_cleanup_verdict_ struct verdict v = {};
	int r;

	r = policy_judge_send(peer, m, &v);
	if (r < 0 || v.kind == VERDICT_DELIVER)
		return r;
	monitor_capture(peer->bus, m, peer, NULL);
	r = router_carry_out(peer->bus, peer, m, &v, peer);
	return r < 0 ? r : 1;
}

/*
 * A message type D-Bus does not define (5 and up), to the bus or to a peer:
 * refused and its sender kept, as dbus-daemon does (its text included, with
 * the newline at its end). Without destination it is dropped, as a reply
 * there is. Monitors saw it already.
 */
static int router_refuse_unknown_type(struct peer *peer, struct message *m)
{
	return router_send_error(peer, m, DC_ERROR_ACCESS_DENIED,
		"Message bus will not accept messages of unknown type\n");
}

static bool message_type_known(const struct message *m)
{
	return m->type >= DC_MESSAGE_METHOD_CALL && m->type <= DC_MESSAGE_SIGNAL;
}

/* Why a unicast message is not delivered (router_unicast_admit()). */
enum {
	UNICAST_ADMITTED,
	UNICAST_UNREQUESTED,		/* a reply nobody waits for: the policy decides */
	UNICAST_FDS,			/* fds to one that takes none */
	UNICAST_UNKNOWN_TYPE,		/* a message type D-Bus does not define */
	UNICAST_SERIAL_EXISTS,		/* a call with the serial of a pending one */
	UNICAST_TOO_MANY_CALLS,		/* max_replies_per_connection */
	UNICAST_JUDGED,			/* the policy's verdict on a call (its group's limits) */
};

/*
 * May @m go from @peer to @target as far as the reply tracking and fd
 * passing go? A reply consumes the slot of its call; a call that expects a
 * reply gets one (*@slotp), if the policy lets it wait (@v). Return:
 * UNICAST_*, or negative errno.
 */
static int router_unicast_admit(struct peer *peer, struct peer *target, struct message *m,
				struct reply_slot **slotp, struct verdict *v)
{
	struct bus *bus = peer->bus;
	int r;

	*slotp = NULL;
	/*
	 * Before a reply consumes its slot: refused, it leaves the caller
	 * waiting for the reply timeout's error, as with dbus-daemon.
	 */
	if (m->n_fds && !target->unix_fds)
		return UNICAST_FDS;
	switch (m->type) {
	case DC_MESSAGE_METHOD_RETURN:
	case DC_MESSAGE_ERROR:
		r = reply_registry_consume(bus->replies, &target->replies, &peer->replies,
					   m->reply_serial);
		if (r)
			return UNICAST_UNREQUESTED;
		bus_journal_reply(target, peer, JOURNAL_REC_REPLY_DONE, m->reply_serial, 0);
		return UNICAST_ADMITTED;
	case DC_MESSAGE_METHOD_CALL:
		if (!message_expects_reply(m))
			return UNICAST_ADMITTED;
		r = policy_judge_call(peer, m, v);
		if (r < 0)
			return r;
		if (v->kind != VERDICT_DELIVER)
			return UNICAST_JUDGED;
		r = reply_registry_add(bus->replies, &peer->replies, &target->replies, m->serial,
				       loop_now_usec(bus), slotp);
		if (r == REPLY_E_EXISTS)
			return UNICAST_SERIAL_EXISTS;
		if (r == REPLY_E_QUOTA)
			return UNICAST_TOO_MANY_CALLS;
		if (r < 0)
			return r;
		if (bus->replies->timeout_usec)
			router_arm_reply_timer(bus);
		return UNICAST_ADMITTED;
	case DC_MESSAGE_SIGNAL:
		return UNICAST_ADMITTED;
	default:
		return UNICAST_UNKNOWN_TYPE;
	}
}

/* The error for a message router_unicast_admit() refused (@why). */
static int router_unicast_refuse(struct peer *peer, struct peer *target, struct message *m,
				 int why)
{
	switch (why) {
	case UNICAST_FDS:
		/*
		 * Whatever the type, the sender learns it, as with dbus-daemon;
		 * the receiver's statistics count what it missed.
		 */
		peer_count_refusal(target, REFUSAL_DROPPED);
		return router_send_error(peer, m, DC_ERROR_NOT_SUPPORTED,
			"Tried to send message with Unix file descriptors to a client "
			"that doesn't support that.");
	case UNICAST_UNKNOWN_TYPE:
		return router_refuse_unknown_type(peer, m);
	case UNICAST_SERIAL_EXISTS:
		return router_send_error(peer, m, DC_ERROR_ACCESS_DENIED,
			"Message has the same reply serial as a currently-"
			"outstanding existing method call");
	case UNICAST_TOO_MANY_CALLS:
		/* Logged as dbus-daemon logs it, rate-limited as refusals are. */
		log_limit_printf(&peer->bus->log_limits, peer_refusal_log(peer), LOG_WARNING,
				 "The maximum number of pending replies for \"%s\" (%s) has been "
				 "reached (max_replies_per_connection=%lld)", peer_name(peer),
				 peer_loginfo(peer) ? peer_loginfo(peer) : "",
				 (long long)peer->bus->limits.max_replies_per_connection);
		return router_send_error(peer, m, DC_ERROR_LIMITS_EXCEEDED,
			"The maximum number of pending replies per connection "
			"has been reached");
	default:
		return 0;
	}
}

/*
 * Deliver an admitted @m to @target (the policy permitting) and to the
 * eavesdroppers. @slot: the reply slot of a call, released if the call does
 * not get through. @unrequested: a reply that answers no pending call, which
 * the policy judges with requested_reply false, as dbus-daemon does (its
 * session.conf lets it through, its system.conf does not).
 */
static int router_unicast_deliver(struct peer *peer, struct peer *target, struct message *m,
				  struct reply_slot *slot, bool unrequested)
{
	struct bus *bus = peer->bus;
	struct destset set;
	int r;

	{
		_cleanup_verdict_ struct verdict v = {};

		r = policy_judge_unicast(bus, peer, target, m,
					 !unrequested && (m->type == DC_MESSAGE_METHOD_RETURN ||
							  m->type == DC_MESSAGE_ERROR),
					 &v);
		if (r < 0 || v.kind != VERDICT_DELIVER) {
			if (slot)
				reply_slot_free(slot);
			return r < 0 ? r : router_carry_out(bus, peer, m, &v, peer);
		}
	}

	/* The addressed recipient first, then eavesdroppers. */
	r = peer_queue(target, m);
	if (r == 0 && slot)
		bus_journal_reply(peer, target, JOURNAL_REC_REPLY_ADD, slot->serial,
				  slot->deadline_usec);
	if (r == 0) {
		r = policy_delivered(target, peer);
		if (r < 0)
			return r;
	}
	if (r == PEER_E_QUOTA || r == PEER_E_DEAD) {
		if (m->type == DC_MESSAGE_METHOD_CALL) {
			if (slot)
				reply_slot_free(slot);
			if (r == PEER_E_QUOTA)
				return router_queue_full(peer, target, m);
			return router_send_error(peer, m, DC_ERROR_NO_REPLY,
				"Message recipient disconnected from message bus without replying");
		}
		if (r == PEER_E_QUOTA)
			peer_overflow(target);
	} else if (r < 0) {
		if (slot)
			reply_slot_free(slot);
		return r;
	}

	destset_init(&set);
	r = router_collect_matches(bus, m, peer, target, NULL, &set);
	if (r >= 0)
		r = router_deliver(&set, m);
	destset_deinit(&set);
	return r;
}

/*
 * @resumed: @m waited for an activation; monitors saw it when it arrived
 * (activation.h, ops->capture) and do not see it again. Otherwise they see
 * it once the bus decided what happens to it, before any error it causes.
 */
static int router_unicast(struct peer *peer, struct message *m, bool resumed)
{
	_cleanup_verdict_ struct verdict v = {};
	struct peer *target;
	struct reply_slot *slot;
	int r;

	/* Judged once, when it arrived (not again after an activation). */
	if (!resumed) {
		r = router_judge_send(peer, m);
		if (r)
			return r < 0 ? r : 0;
	}
	target = bus_resolve(peer->bus, m->destination);
	if (!target)
		return router_unicast_unowned(peer, m, resumed);
	r = router_unicast_admit(peer, target, m, &slot, &v);
	if (r < 0)
		return r;
	router_capture(resumed, peer->bus, m, peer, target);
	if (r == UNICAST_JUDGED)
		return router_carry_out(peer->bus, peer, m, &v, peer);
	if (r != UNICAST_ADMITTED && r != UNICAST_UNREQUESTED)
		return router_unicast_refuse(peer, target, m, r);
	return router_unicast_deliver(peer, target, m, slot, r == UNICAST_UNREQUESTED);
}

/*
 * Run @route on @msg with @peer as the actor of everything it makes the bus
 * queue (bus->dispatching, user.h's actors), whoever's turn it was: a
 * resumed call is its caller's, not the activated service's.
 */
static int router_as_actor(struct peer *peer, struct message *msg,
			   int (*route)(struct peer *peer, struct message *msg))
{
	struct peer *outer = peer->bus->dispatching;
	int r;

	peer->bus->dispatching = peer;
	r = route(peer, msg);
	peer->bus->dispatching = outer;
	return r;
}

static int router_unicast_resumed(struct peer *peer, struct message *msg)
{
	return router_unicast(peer, msg, true);
}

int router_resume_activated(struct peer *peer, struct message *msg)
{
	if (peer->closed)
		return 0;
	return router_as_actor(peer, msg, router_unicast_resumed);
}

/*
 * A message before Hello, as dbus-daemon 1.14 treats it (its security check
 * lets an inactive connection send nothing but Hello to the driver):
 *  - no destination: a method call gets the bus' Peer interface (or
 *    UnknownMethod), a reply or error is dropped, as after Hello;
 *  - anything else is shown to monitors as sent by ":not.active.yet"; then
 *    one for org.freedesktop.DBus, whatever its type and flags, gets
 *    AccessDenied (to ":not.active.yet") and the connection stays: Hello may
 *    follow. The LSMs are asked first (router_check_unregistered()): their
 *    denial is logged, and its AccessDenied is theirs. A signal without destination, or anything for another
 *    destination, closes the connection.
 */
#define ROUTER_INACTIVE_SENDER ":not.active.yet"

/*
 * A message to the driver before Hello, as dbus-daemon asks its LSMs about
 * it (bus_context_check_security_policy(), before its "only Hello" rule):
 * @m (stitched with ":not.active.yet") against the bus' own label and
 * context. Denied, the connection gets AccessDenied and stays (Hello may
 * follow; a client whose Hello is refused fails to connect), and monitors
 * see the message and the error. Return 1 allowed, 0 denied, -errno.
 */
static int router_check_unregistered(struct peer *peer, struct message *m)
{
	_cleanup_verdict_ struct verdict v = {};
	int r;

	r = policy_judge_unregistered(peer->bus, peer, m, &v);
	if (r < 0 || v.kind == VERDICT_DELIVER)
		return r < 0 ? r : 1;
	monitor_capture(peer->bus, m, peer, NULL);
	r = router_carry_out(peer->bus, peer, m, &v, peer);
	return r < 0 ? r : 0;
}

/*
 * Hello: asked of the LSMs first. The message the driver handles is
 * unstitched (it stitches the unique name it allocates).
 */
static int router_dispatch_hello(struct peer *peer, struct message *msg)
{
	_cleanup_message_ struct message *m = NULL;
	int r;

	if (policy_lsm_active(peer->bus)) {
		/* Never the sender field the client wrote: it has no name yet. */
		r = message_stitch_sender(msg, ROUTER_INACTIVE_SENDER, &m);
		if (r < 0)
			return r;
		r = router_check_unregistered(peer, m);
		if (r <= 0)
			return r;
	}
	return driver_dispatch_bootstrap(peer, msg);
}

static int router_dispatch_unregistered(struct peer *peer, struct message *msg)
{
	_cleanup_message_ struct message *m = NULL;
	int r;

	if (!msg->destination && msg->type == DC_MESSAGE_METHOD_CALL)
		return driver_dispatch_peer(peer, msg);
	if (!msg->destination && msg->type != DC_MESSAGE_SIGNAL)
		return 0;

	r = message_stitch_sender(msg, ROUTER_INACTIVE_SENDER, &m);
	if (r < 0)
		return r;
	if (!m->destination || strcmp(m->destination, DC_SERVICE_DBUS)) {
		monitor_capture(peer->bus, m, peer, NULL);
		peer_close(peer, "a message other than Hello() before Hello()");
		return 0;
	}
	if (!message_type_known(m)) {
		monitor_capture(peer->bus, m, peer, NULL);
		return router_refuse_unknown_type(peer, m);
	}
	r = router_check_unregistered(peer, m);
	if (r <= 0)
		return r;
	monitor_capture(peer->bus, m, peer, NULL);
	return router_send_error(peer, m, DC_ERROR_ACCESS_DENIED,
		"Client tried to send a message other than Hello without being registered");
}

static int router_dispatch_message(struct peer *peer, struct message *msg)
{
	_cleanup_message_ struct message *m = NULL;
	int r;

	if (peer->monitor) {
		peer_close(peer, "monitors are not allowed to send messages");
		return 0;
	}
	/* Hello, and the bus1 bootstrap (docs/native-protocol.md), come first. */
	if (!peer->registered) {
		if (driver_is_hello(msg))
			return router_dispatch_hello(peer, msg);
		if (driver_is_bootstrap(peer->bus, msg))
			return driver_dispatch_bootstrap(peer, msg);
		return router_dispatch_unregistered(peer, msg);
	}

	r = message_stitch_sender(msg, peer_name(peer), &m);
	if (r < 0)
		return r;

	if (!m->destination) {
		if (m->type == DC_MESSAGE_SIGNAL)
			return router_broadcast_to(peer->bus, peer, m, NULL);
		monitor_capture(peer->bus, m, peer, NULL);
		if (m->type == DC_MESSAGE_METHOD_CALL)
			return driver_dispatch_peer(peer, m);
		return 0;
	}
	if (!strcmp(m->destination, DC_SERVICE_DBUS)) {
		/*
		 * dbus-daemon fails the activations of an ActivationFailure in a
		 * transaction of its own: monitors see the errors before the signal.
		 */
		bool late = activation_is_systemd_failure(m);
		_cleanup_verdict_ struct verdict v = {};

		if (!message_type_known(m)) {
			monitor_capture(peer->bus, m, peer, NULL);
			return router_refuse_unknown_type(peer, m);
		}
		r = router_judge_send(peer, m);
		if (r)
			return r < 0 ? r : 0;
		if (!late)
			monitor_capture(peer->bus, m, peer, NULL);
		r = policy_judge_driver(peer->bus, peer, m, &v);
		if (r < 0)
			return r;
		if (v.kind != VERDICT_DELIVER) {
			if (late)
				monitor_capture(peer->bus, m, peer, NULL);
			return router_carry_out(peer->bus, peer, m, &v, peer);
		}
		r = driver_dispatch(peer, m);
		if (late)
			monitor_capture(peer->bus, m, peer, NULL);
		return r;
	}
	return router_unicast(peer, m, false);
}

int router_dispatch(struct peer *peer, struct message *msg)
{
	return router_as_actor(peer, msg, router_dispatch_message);
}
