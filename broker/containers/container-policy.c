/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The container instances' say in the policy room (a policy module,
 * policy.h): the connections of a filtered instance are held to its filter,
 * xdg-dbus-proxy's rules (container-filter.h), before the LSMs and the
 * <policy> are asked; and an instance's connections together wait for at
 * most max_replies_per_container replies. See container.h.
 */

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "broker/core/bus.h"
#include "broker/containers/container.h"
#include "broker/containers/container-filter.h"
#include "broker/objects/peer.h"
#include "broker/policy/policy.h"
#include "dbus-compat/message.h"
#include "dbus-compat/protocol.h"
#include "util/macro.h"

/* The verdict on @m that @from's filter did not pass (@refusal: FILTER_*), for @name. */
static int filter_refuse(struct peer *from, struct message *m, int refusal,
				const char *name, bool to_unique, struct verdict *v)
{
	static const char *const what[] = {
		[FILTER_DENY] = "denied", [FILTER_HIDE] = "hid the name of",
		[FILTER_FAKE_FALSE] = "hid the owner asked for in",
		[FILTER_FAKE_NO_OWNER] = "hid the owner asked for in", [FILTER_DROP] = "dropped",
	};
	struct container *c = container_of_peer(from);
	const char *path = c ? c->path : "?";
	struct message_builder b;
	char *text;
	int r;

	/* Logged by the filter, if at all (--log), not as a <policy> refusal. */
	if (refusal > FILTER_PASS && refusal < (int)ARRAY_SIZE(what) && what[refusal])
		container_log_refusal(c, from, m, what[refusal], name);
	v->logged = true;
	v->kind = VERDICT_DROP;
	/* Like xdg-dbus-proxy: what expects no reply vanishes. */
	if (!message_expects_reply(m))
		return 0;
	if (!name)
		name = refusal == FILTER_DENY ? "(none)" : "";
	switch (refusal) {
	case FILTER_DENY:
		return verdict_set(v, VERDICT_DENY, NULL, asprintf(&text,
			"The filter of container %s does not allow this %s to %s", path,
			m->type == DC_MESSAGE_SIGNAL ? "signal" : "call", name) < 0 ? NULL : text);
	case FILTER_HIDE:
		/* The same for a name that exists as for one that does not. */
		if (to_unique || (m->flags & DC_FLAG_NO_AUTO_START))
			return verdict_set(v, VERDICT_ERROR, DC_ERROR_NAME_HAS_NO_OWNER,
				asprintf(&text, "Name \"%s\" does not exist", name) < 0 ? NULL : text);
		return verdict_set(v, VERDICT_ERROR, DC_ERROR_SERVICE_UNKNOWN, asprintf(&text,
			"The name %s was not provided by any .service files", name) < 0 ?
			NULL : text);
	case FILTER_FAKE_NO_OWNER:
		return verdict_set(v, VERDICT_ERROR, DC_ERROR_NAME_HAS_NO_OWNER, asprintf(&text,
			"Could not get owner of name '%s': no such name", name) < 0 ? NULL : text);
	case FILTER_FAKE_FALSE:
		message_builder_init_method_return(&b, m, "b");
		b.sender = DC_SERVICE_DBUS;
		b.destination = peer_name(from);
		dc_writer_write(&b.body, "b", false);
		r = message_builder_seal(&b, bus_next_serial(from->bus), &v->answer);
		message_builder_deinit(&b);
		if (r)
			return r < 0 ? r : -EINVAL;
		v->kind = VERDICT_ANSWER;
		return 0;
	default:
		return 0;
	}
}

static int judge_send(struct policy_module *mod, struct peer *from, struct message *m,
		      struct verdict *v)
{
	struct filter_view *view = container_filter_view(from);
	const char *arg0 = NULL;
	int refusal;

	if (!view || !m->destination)
		return 0;	/* broadcasts are judged per receiver; the bus' Peer interface */
	if (!strcmp(m->destination, DC_SERVICE_DBUS)) {
		refusal = filter_check_driver(view, m);
		if (refusal == FILTER_PASS)
			return 0;
		if (refusal == FILTER_HIDE || refusal == FILTER_FAKE_NO_OWNER)
			(void)message_get_arg(m, 0, &arg0);
		/* Hidden: the bus, not the name asked about, is the destination. */
		return filter_refuse(from, m, refusal,
				     refusal == FILTER_DENY ? DC_SERVICE_DBUS : arg0, false, v);
	}
	/*
	 * Replies pass only to the caller's unique name (Debian's fix of
	 * xdg-dbus-proxy): whether there is a call to answer, the reply
	 * tracking says (judge_unicast()).
	 */
	if (m->type == DC_MESSAGE_METHOD_RETURN || m->type == DC_MESSAGE_ERROR) {
		if (m->destination[0] != ':')
			v->kind = VERDICT_DROP;
		return 0;
	}
	refusal = filter_check_unicast(view, m);
	if (refusal == FILTER_PASS)
		return 0;
	return filter_refuse(from, m, refusal, m->destination, m->destination[0] == ':', v);
}

static int judge_call(struct policy_module *mod, struct peer *from, struct message *m,
		      struct verdict *v)
{
	struct container *c = container_of_peer(from);
	long long max = from->bus->limits.max_replies_per_container;
	char *text;

	if (!c || container_n_calls(c) < (unsigned long long)max)
		return 0;
	return verdict_set(v, VERDICT_ERROR, DC_ERROR_LIMITS_EXCEEDED, asprintf(&text,
		"The maximum number of pending replies of container instance %s has been "
		"reached (max_replies_per_container=%lld)", c->path, max) < 0 ? NULL : text);
}

static int judge_unicast(struct policy_module *mod, struct peer *from, struct peer *to,
			 struct message *m, bool requested_reply, struct verdict *v)
{
	/* A reply nobody waits for, to or from a filtered connection: dropped. */
	if (!requested_reply &&
	    (m->type == DC_MESSAGE_METHOD_RETURN || m->type == DC_MESSAGE_ERROR) &&
	    (container_filter_view(from) || container_filter_view(to)))
		v->kind = VERDICT_DROP;
	return 0;
}

static int judge_receive(struct policy_module *mod, struct peer *to, struct peer *from,
			 struct message *m, bool eavesdropping, struct verdict *v)
{
	struct filter_view *view = container_filter_view(to);

	/* A filtered connection never eavesdrops, and gets the broadcasts it lets through. */
	if (view && (eavesdropping || !filter_check_broadcast(view, from, m)))
		v->kind = VERDICT_DROP;
	return 0;
}

static int judge_direct(struct policy_module *mod, struct peer *from, struct peer *to)
{
	struct filter_view *from_view = container_filter_view(from);
	struct filter_view *to_view = container_filter_view(to);
	struct filter_match fm;

	/*
	 * The caller's filter must pass every call to the callee, and the
	 * callee's must already see the caller (calls reaching it teach it
	 * that, which a direct call past the bus would not).
	 */
	if (from_view && !filter_view_allows_all_calls(from_view, to))
		return POLICY_DIRECT_FILTERED;
	if (to_view) {
		filter_view_match_peer(to_view, from, &fm);
		if (fm.level < FILTER_SEE)
			return POLICY_DIRECT_FILTERED;
	}
	return POLICY_DIRECT_ALLOWED;
}

/* A filtered receiver learns that its sender exists. */
static int delivered(struct policy_module *mod, struct peer *to, struct peer *from)
{
	struct filter_view *view = container_filter_view(to);

	return view ? filter_view_saw(view, from) : 0;
}

static void name_owner_changed(struct policy_module *mod, const char *name, struct peer *owner)
{
	struct container_registry *reg = container_of(mod, struct container_registry, policy);

	filter_name_owner_changed(reg->bus, name, owner);
}

/* A filtered connection lists only the names it may see. */
static bool sees(struct policy_module *mod, struct peer *peer, const char *name)
{
	struct filter_view *view = container_filter_view(peer);

	return !view || filter_view_sees(view, name);
}

static const struct policy_module_ops container_policy_ops = {
	.judge_send = judge_send,
	.judge_call = judge_call,
	.judge_unicast = judge_unicast,
	.judge_receive = judge_receive,
	.judge_direct = judge_direct,
	.delivered = delivered,
	.name_owner_changed = name_owner_changed,
	.sees = sees,
};

void container_policy_add(struct container_registry *reg)
{
	policy_add_module(reg->bus, &reg->policy, &container_policy_ops);
}

void container_policy_remove(struct container_registry *reg)
{
	policy_remove_module(&reg->policy);
}
