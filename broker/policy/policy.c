/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The broker's policy decisions, on top of conf's compiled policy. See
 * policy.h.
 */

#include <errno.h>
#include <grp.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "broker/activation/activation.h"
#include "broker/policy/apparmor.h"
#include "broker/core/bus.h"
#include "broker/objects/peer.h"
#include "broker/policy/policy.h"
#include "broker/policy/selinux.h"
#include "dbus-compat/message.h"
#include "dbus-compat/protocol.h"
#include "util/macro.h"

int policy_names_init(struct policy_names *pn, struct peer *peer)
{
	struct name_ownership *o;
	size_t n = 0;

	pn->v = pn->inline_v;
	if (peer->owner.n_ownerships + 1 > POLICY_NAMES_INLINE) {
		pn->v = malloc((peer->owner.n_ownerships + 1) * sizeof(*pn->v));
		if (!pn->v)
			return -ENOMEM;
	}
	pn->v[n++] = peer_name(peer);
	list_for_each_entry(o, &peer->owner.ownerships, owner_link)
		pn->v[n++] = o->name->str;
	pn->peer.names = pn->v;
	pn->peer.n_names = n;
	return 0;
}

void policy_names_deinit(struct policy_names *pn)
{
	if (pn->v != pn->inline_v)
		free(pn->v);
	pn->v = NULL;
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

void verdict_release(struct verdict *v)
{
	free(v->text);
	v->text = NULL;
	v->answer = message_unref(v->answer);
}

int verdict_set(struct verdict *v, enum verdict_kind kind, const char *error_name, char *text)
{
	if (!text)
		return -ENOMEM;
	free(v->text);
	v->kind = kind;
	v->error_name = error_name;
	v->text = text;
	return 0;
}

/**
 * policy_denial_text() - dbus-daemon's words for a message it rejects
 *
 * "@lead, @n_rules matched rules; type=..., sender=... (loginfo)
 * interface=... member=... error name=... requested_reply=...
 * destination=... (loginfo)", as dbus-daemon's complain_about_message()
 * words its errors and log lines (@n_rules < 0: no count, as its AppArmor
 * texts);
 * @from NULL is the bus driver ("(unset)" and "(bus)"), @to NULL the driver
 * or a service not yet activated ("bus"). @rule, the rule that decided if
 * any, is named after it.
 *
 * Return: a malloc'ed text, NULL on ENOMEM.
 */
char *policy_denial_text(const char *lead, int n_rules, struct peer *from, struct peer *to,
			 const struct message *m, bool requested_reply,
			 const struct bus_policy_rule *rule)
{
	const char *from_info = from ? peer_loginfo(from) : "(bus)";
	const char *to_info = to ? peer_loginfo(to) : "bus";
	_cleanup_free_ char *why = rule ? bus_policy_rule_describe(rule) : NULL;
	char count[32] = "";
	char *text;

	if (rule && !why)
		return NULL;
	if (n_rules >= 0)
		snprintf(count, sizeof(count), ", %d matched rules", n_rules);
	if (asprintf(&text, "%s%s; type=\"%s\", sender=\"%s\" (%s) "
		     "interface=\"%s\" member=\"%s\" error name=\"%s\" requested_reply=\"%d\" "
		     "destination=\"%s\" (%s)%s%s", lead, count,
		     bus_message_type_to_string(m->type), from ? peer_name(from) : "(unset)",
		     from_info ? from_info : "", m->interface ? m->interface : "(unset)",
		     m->member ? m->member : "(unset)",
		     m->error_name ? m->error_name : "(unset)", requested_reply,
		     m->destination ? m->destination : DC_SERVICE_DBUS,
		     to_info ? to_info : "", why ? "; decided by " : "", why ? why : "") < 0)
		return NULL;
	return text;
}

/*
 * Deny with @text (NULL: out of memory): an LSM's (@logged: it logged the
 * decision itself) or the <policy> rules'. Return 0 or -ENOMEM.
 */
static int policy_deny(struct verdict *v, enum verdict_kind kind, char *text, bool logged)
{
	int r = verdict_set(v, kind, NULL, text);

	v->logged = logged;
	return r;
}

/* How a question is asked (struct policy_question). */
enum {
	POLICY_REQUESTED_REPLY = 1 << 0,	/* a reply the receiver waits for */
	POLICY_EAVESDROPPING = 1 << 1,		/* the receiver is not the one addressed */
	POLICY_ACTIVATION = 1 << 2,		/* it would start its destination's service */
};

/*
 * One question of the checks below: may @m go from @from (NULL: the driver)
 * to @to (NULL: the driver, or with POLICY_ACTIVATION a service not there
 * yet)? @from_names: the sender's names if the caller collected them
 * already (several receivers of one message), else NULL. A denial sets the
 * verdict to @deny.
 */
struct policy_question {
	struct peer *from;
	const struct bus_policy_peer *from_names;
	struct peer *to;
	struct message *m;
	unsigned int flags;
	enum verdict_kind deny;
};

/*
 * The LSMs' say (the driver's messages are not mediated): denied, @v is set
 * to @q->deny. Return 0 or -ENOMEM.
 */
static int policy_check_lsm(struct bus *bus, const struct policy_question *q, struct verdict *v)
{
	struct peer *from = q->from, *to = q->to;
	struct message *m = q->m;
	bool activation = q->flags & POLICY_ACTIVATION;
	bool requested_reply = q->flags & POLICY_REQUESTED_REPLY;
	enum verdict_kind kind = q->deny;
	const char *assumed = NULL;
	char *text = NULL;
	int r, err;

	if (!from)
		return 0;
	/* SELinux asks an activated service once it is there, not before. */
	if (bus->selinux && !activation) {
		r = selinux_check_send(bus->selinux, from, to, m, true);
		if (r < 0)
			return r;
		if (r == ACCESS_DENIED)
			return policy_deny(v, kind, policy_denial_text(
				"An SELinux policy prevents this sender from sending this message "
				"to this recipient", 0, from, to, m, false, NULL), true);
	}
	if (!bus->apparmor)
		return 0;
	if (activation)
		assumed = activation_assumed_apparmor_label(bus->activation, m->destination);
	r = apparmor_check_send(bus->apparmor, from, to, activation, assumed, m,
				requested_reply, &err);
	if (r < 0 || r == ACCESS_ALLOWED)
		return r < 0 ? r : 0;
	if (err) {
		if (asprintf(&text, "Failed to query AppArmor policy: %s", strerror(err)) < 0)
			text = NULL;
	} else {
		text = policy_denial_text("An AppArmor policy prevents this sender from sending "
					  "this message to this recipient", -1, from, to, m,
					  requested_reply, NULL);
	}
	return policy_deny(v, kind, text, true);
}

/* The <policy> rules' say: denied, @v is set to @q->deny. Return 0 or -ENOMEM. */
static int policy_check_rules(struct bus *bus, const struct policy_question *q,
			      struct verdict *v)
{
	struct peer *from = q->from, *to = q->to;
	const struct bus_policy_peer *from_names = q->from_names;
	struct message *m = q->m;
	bool requested_reply = q->flags & POLICY_REQUESTED_REPLY;
	bool eavesdropping = q->flags & POLICY_EAVESDROPPING;
	enum verdict_kind kind = q->deny;
	struct bus_policy_message pm;
	struct policy_names fn, tn;
	const struct bus_policy_rule *rule = NULL;
	unsigned int n_rules = 0;
	bool send_ok = true, ok = true;
	int r;

	if (!bus->policy)
		return 0;
	policy_message(&pm, m, requested_reply);

	if (from && from->policy) {
		if (to) {
			r = policy_names_init(&tn, to);
			if (r < 0)
				return r;
		}
		send_ok = bus_client_policy_check_send(from->policy, &pm, to ? &tn.peer : NULL,
						       &rule);
		if (!send_ok)
			n_rules = bus_client_policy_count_send(from->policy, &pm,
								 to ? &tn.peer : NULL);
		if (to)
			policy_names_deinit(&tn);
	}
	if (send_ok && to && to->policy) {
		if (from && !from_names) {
			r = policy_names_init(&fn, from);
			if (r < 0)
				return r;
			from_names = &fn.peer;
		}
		ok = bus_client_policy_check_receive(to->policy, &pm, from ? from_names : NULL,
						     eavesdropping, &rule);
		if (!ok)
			n_rules = bus_client_policy_count_receive(to->policy, &pm,
								    from ? from_names : NULL,
								    eavesdropping);
		if (from_names == &fn.peer)
			policy_names_deinit(&fn);
	}
	if (send_ok && ok)
		return 0;
	return policy_deny(v, kind, policy_denial_text(send_ok ? "Rejected receive message" :
							"Rejected send message", (int)n_rules,
							from, to, m, requested_reply, rule),
			   false);
}

/*
 * The LSMs, then both the sender's send rules and the receiver's receive
 * rules must allow it: denied, @v is set to @q->deny. Return 0 or -ENOMEM.
 */
static int policy_check(struct bus *bus, const struct policy_question *q, struct verdict *v)
{
	int r;

	r = policy_check_lsm(bus, q, v);
	if (r < 0 || v->kind != VERDICT_DELIVER)
		return r;
	return policy_check_rules(bus, q, v);
}

/* ------------------------------------------------------------- modules */

void policy_add_module(struct bus *bus, struct policy_module *mod,
		       const struct policy_module_ops *ops)
{
	mod->ops = ops;
	list_append(&bus->policy_modules, &mod->link);
}

void policy_remove_module(struct policy_module *mod)
{
	list_unlink(&mod->link);
}

/* Ask every module's @op (the first that does not deliver decides). */
#define POLICY_ASK_MODULES(bus, v, op, ...)                                    \
	({                                                                     \
		struct policy_module *_mod;                                    \
		int _r = 0;                                                    \
		list_for_each_entry(_mod, &(bus)->policy_modules, link) {      \
			if (!_mod->ops->op)                                    \
				continue;                                      \
			_r = _mod->ops->op(_mod, __VA_ARGS__, (v));            \
			if (_r < 0 || (v)->kind != VERDICT_DELIVER)            \
				break;                                         \
		}                                                              \
		_r;                                                            \
	})

int policy_ask_send(struct peer *from, struct message *m, struct verdict *v)
{
	*v = (struct verdict){};
	return POLICY_ASK_MODULES(from->bus, v, judge_send, from, m);
}

int policy_ask_call(struct peer *from, struct message *m, struct verdict *v)
{
	*v = (struct verdict){};
	return POLICY_ASK_MODULES(from->bus, v, judge_call, from, m);
}

int policy_ask_delivered(struct peer *to, struct peer *from)
{
	struct policy_module *mod;
	int r;

	list_for_each_entry(mod, &to->bus->policy_modules, link) {
		if (!mod->ops->delivered)
			continue;
		r = mod->ops->delivered(mod, to, from);
		if (r < 0)
			return r;
	}
	return 0;
}

bool policy_ask_sees(struct peer *peer, const char *name)
{
	struct policy_module *mod;

	list_for_each_entry(mod, &peer->bus->policy_modules, link)
		if (mod->ops->sees && !mod->ops->sees(mod, peer, name))
			return false;
	return true;
}

void policy_name_owner_changed(struct bus *bus, const char *name, struct peer *owner)
{
	struct policy_module *mod;

	list_for_each_entry(mod, &bus->policy_modules, link)
		if (mod->ops->name_owner_changed)
			mod->ops->name_owner_changed(mod, name, owner);
}

/* ------------------------------------------------------------ the judges */

int policy_ask_unicast(struct bus *bus, struct peer *from, struct peer *to,
		       struct message *m, bool requested_reply, struct verdict *v)
{
	int r;

	*v = (struct verdict){};
	r = POLICY_ASK_MODULES(bus, v, judge_unicast, from, to, m, requested_reply);
	if (r < 0 || v->kind != VERDICT_DELIVER || !policy_active(bus))
		return r;
	return policy_check(bus, &(struct policy_question){
		.from = from, .to = to, .m = m, .deny = VERDICT_DENY,
		.flags = requested_reply ? POLICY_REQUESTED_REPLY : 0 }, v);
}

int policy_ask_receive(struct bus *bus, struct peer *to, struct peer *from,
		       const struct bus_policy_peer *from_names, struct message *m,
		       bool eavesdropping, struct verdict *v)
{
	int r;

	*v = (struct verdict){};
	/* The modules first (a container's filter: xdg-dbus-proxy sits before the bus). */
	r = POLICY_ASK_MODULES(bus, v, judge_receive, to, from, m, eavesdropping);
	if (r < 0 || v->kind != VERDICT_DELIVER || !policy_active(bus))
		return r;
	return policy_check(bus, &(struct policy_question){
		.from = from, .from_names = from_names, .to = to, .m = m, .deny = VERDICT_DROP,
		.flags = eavesdropping ? POLICY_EAVESDROPPING : 0 }, v);
}

int policy_ask_driver(struct bus *bus, struct peer *from, struct message *m,
		      struct verdict *v)
{
	*v = (struct verdict){};
	if (!policy_active(bus))
		return 0;
	return policy_check(bus, &(struct policy_question){
		.from = from, .m = m, .deny = VERDICT_DENY }, v);
}

int policy_ask_from_driver(struct bus *bus, struct peer *to, struct message *m,
			   struct verdict *v)
{
	*v = (struct verdict){};
	/* A connection before Hello receives anything. */
	if (!to->policy || !to->registered)
		return 0;
	return policy_check(bus, &(struct policy_question){
		.to = to, .m = m, .deny = VERDICT_DROP,
		.flags = m->reply_serial ? POLICY_REQUESTED_REPLY : 0 }, v);
}

int policy_judge_unregistered(struct bus *bus, struct peer *from, struct message *m,
			      struct verdict *v)
{
	*v = (struct verdict){};
	return policy_check_lsm(bus, &(struct policy_question){
		.from = from, .m = m, .deny = VERDICT_DENY }, v);
}

int policy_judge_activation(struct bus *bus, struct peer *from, struct message *m,
			    struct verdict *v)
{
	const struct policy_question q = {
		.from = from, .m = m, .deny = VERDICT_DENY, .flags = POLICY_ACTIVATION,
	};
	int r;

	*v = (struct verdict){};
	if (!policy_active(bus))
		return 0;
	r = policy_check_lsm(bus, &q, v);
	if (r < 0 || v->kind != VERDICT_DELIVER)
		return r;
	return policy_check_rules(bus, &q, v);
}

int policy_check_own_lsm(struct bus *bus, struct peer *peer, const char *name,
			 const char **lsmp)
{
	int r = ACCESS_ALLOWED;

	if (bus->selinux) {
		*lsmp = "SELinux";
		r = selinux_check_acquire(bus->selinux, peer, name);
	}
	if (r == ACCESS_ALLOWED && bus->apparmor) {
		*lsmp = "AppArmor";
		r = apparmor_check_bind(bus->apparmor, peer, name);
	}
	return r;
}

int policy_check_eavesdrop_lsm(struct bus *bus, struct peer *peer)
{
	return bus->apparmor ? apparmor_check_eavesdrop(bus->apparmor, peer) : ACCESS_ALLOWED;
}

int policy_check_connect_lsm(struct bus *bus, struct peer *peer, const char **whyp)
{
	const struct apparmor_label *label;
	int r;

	if (bus->selinux) {
		r = selinux_peer_setup(bus->selinux, peer);
		if (r < 0)
			return r;
		if (r == SELINUX_E_NO_CONTEXT) {
			*whyp = "Failed to read an SELinux context from connection";
			return POLICY_E_REFUSED;
		}
	}
	if (!bus->apparmor)
		return 0;
	r = apparmor_peer_label(peer, &label);
	if (r < 0)
		return r;
	if (r == APPARMOR_E_NO_LABEL) {
		*whyp = "Failed to get AppArmor confinement information of socket peer";
		return POLICY_E_REFUSED;
	}
	return 0;
}

/*
 * The groups of a uid from the user database (primary first), for an
 * identity that did not come with the socket (DBUS_COOKIE_SHA1, TCP), as
 * dbus-daemon looks them up. An unknown user has none.
 */
static int groups_from_user_db(uid_t uid, uint32_t **gidsp, size_t *np)
{
	struct passwd pw, *res = NULL;
	_cleanup_free_ char *buf = NULL;
	_cleanup_free_ gid_t *groups = NULL;
	uint32_t *gids;
	int ngroups = 64;

	*gidsp = NULL;
	*np = 0;
	buf = malloc(16384);
	if (!buf)
		return -ENOMEM;
	if (getpwuid_r(uid, &pw, buf, 16384, &res) || !res)
		return 0;
	for (;;) {
		gid_t *g = realloc(groups, (size_t)ngroups * sizeof(*g));
		int k = ngroups;

		if (!g)
			return -ENOMEM;
		groups = g;
		if (getgrouplist(pw.pw_name, pw.pw_gid, groups, &k) >= 0) {
			ngroups = k;
			break;
		}
		if (k <= ngroups || k > 65536)
			return 0;
		ngroups = k;
	}
	gids = calloc((size_t)ngroups + 1, sizeof(*gids));
	if (!gids)
		return -ENOMEM;
	gids[(*np)++] = (uint32_t)pw.pw_gid;
	for (int i = 0; i < ngroups; i++)
		if (groups[i] != pw.pw_gid)
			gids[(*np)++] = (uint32_t)groups[i];
	*gidsp = gids;
	return 0;
}

int policy_setup_peer(struct peer *peer)
{
	const struct socket_creds *cr = &peer->creds;
	struct bus *bus = peer->bus;
	_cleanup_free_ uint32_t *gids = NULL;
	const struct bus_policy_rule *rule = NULL;
	size_t n = 0;
	int r;

	peer->policy = bus_client_policy_free(peer->policy);
	if (!bus->policy)
		return 0;

	if (peer->socket_identity && !cr->groups_unknown) {
		/* The primary group first, then the supplementary ones. */
		gids = calloc(cr->n_groups + 1, sizeof(*gids));
		if (!gids)
			return -ENOMEM;
		gids[n++] = (uint32_t)cr->gid;
		for (size_t i = 0; i < cr->n_groups; i++)
			if (cr->groups[i] != cr->gid)
				gids[n++] = (uint32_t)cr->groups[i];
	} else if (peer->uid != (uid_t)-1) {
		/* No groups of its socket (or SO_PEERGROUPS failed): the user database's. */
		r = groups_from_user_db(peer->uid, &gids, &n);
		if (r < 0)
			return r;
	}

	/* Anonymous clients have no identity to check; the config allowed them. */
	if (!peer->anonymous &&
	    !bus_policy_check_connect(bus->policy, (uint32_t)peer->uid, gids, n,
				      (uint32_t)bus->uid, &rule))
		return POLICY_E_REFUSED;
	/* at_console: decided now (connect, reload), as dbus-daemon; see conf/console.h */
	r = bus_client_policy_new(&peer->policy, bus->policy, (uint32_t)peer->uid, gids, n,
				  peer->uid != (uid_t)-1 &&
				  bus_policy_uid_at_console(bus->policy, (uint32_t)peer->uid) ==
				  BUS_CONSOLE_PRESENT);
	return r < 0 ? r : 0;
}

/*
 * The verdict on a message of @type (a call, or a requested reply) from
 * @from to @to, for a message that no opaque rule concerns: then it is the
 * same for every such message, so one probe decides it.
 */
/* A message of @type (a call, or a reply to one) from @from to @to, to ask about. */
static int policy_probe_new(struct peer *from, struct peer *to, int type,
			    struct message **probep)
{
	struct message_builder b;
	int r;

	if (type == DC_MESSAGE_METHOD_CALL) {
		message_builder_init_method_call(&b, peer_name(to), "/", NULL,
						 "DirectCall", "");
	} else {
		message_builder_init(&b, type, "");
		b.reply_serial = 1;
		b.destination = peer_name(to);
		if (type == DC_MESSAGE_ERROR)
			b.error_name = DC_ERROR_FAILED;
	}
	b.sender = peer_name(from);
	r = message_builder_seal(&b, 1, probep);
	message_builder_deinit(&b);
	return r ? (r < 0 ? r : -EINVAL) : 0;
}

static int policy_probe(struct bus *bus, struct peer *from, struct peer *to, int type)
{
	_cleanup_message_ struct message *probe = NULL;
	_cleanup_verdict_ struct verdict v = {};
	int r;

	r = policy_probe_new(from, to, type, &probe);
	if (r < 0)
		return r;
	r = policy_check(bus, &(struct policy_question){
		.from = from, .to = to, .m = probe, .deny = VERDICT_DENY,
		.flags = type != DC_MESSAGE_METHOD_CALL ? POLICY_REQUESTED_REPLY : 0 }, &v);
	if (r < 0)
		return r;
	return v.kind == VERDICT_DELIVER ? ACCESS_ALLOWED : ACCESS_DENIED;
}

/*
 * Whether SELinux lets @a and @b send to each other (calls and replies),
 * asked without logging: a denial is logged when a message is denied.
 */
static int policy_selinux_pair(struct bus *bus, struct peer *a, struct peer *b)
{
	_cleanup_message_ struct message *probe = NULL;
	int r;

	r = policy_probe_new(a, b, DC_MESSAGE_METHOD_CALL, &probe);
	if (r < 0)
		return r;
	r = selinux_check_send(bus->selinux, a, b, probe, false);
	if (r == ACCESS_ALLOWED)
		r = selinux_check_send(bus->selinux, b, a, probe, false);
	return r;
}

int policy_check_direct(struct bus *bus, struct peer *from, struct peer *to)
{
	struct policy_module *mod;
	struct policy_names fn, tn;
	bool opaque;
	int r;

	/* A module may decide per message (a container's filter). */
	list_for_each_entry(mod, &bus->policy_modules, link) {
		if (!mod->ops->judge_direct)
			continue;
		r = mod->ops->judge_direct(mod, from, to);
		if (r != POLICY_DIRECT_ALLOWED)
			return r;
	}

	if (bus->apparmor && (!apparmor_peer_unconfined(bus->apparmor, from) ||
			      !apparmor_peer_unconfined(bus->apparmor, to)))
		return POLICY_DIRECT_OPAQUE;
	if (bus->selinux) {
		r = policy_selinux_pair(bus, from, to);
		if (r < 0 || r == ACCESS_DENIED)
			return r < 0 ? r : POLICY_DIRECT_OPAQUE;
	}
	r = policy_probe(bus, from, to, DC_MESSAGE_METHOD_CALL);
	if (r < 0 || r == ACCESS_DENIED)
		return r < 0 ? r : POLICY_DIRECT_DENIED;
	if (bus->policy) {
		r = policy_names_init(&fn, from);
		if (r < 0)
			return r;
		r = policy_names_init(&tn, to);
		if (r < 0) {
			policy_names_deinit(&fn);
			return r;
		}
		opaque = bus_policy_opaque_between(bus->policy, &fn.peer, &tn.peer);
		policy_names_deinit(&tn);
		policy_names_deinit(&fn);
		if (opaque)
			return POLICY_DIRECT_OPAQUE;
	}
	r = policy_probe(bus, to, from, DC_MESSAGE_METHOD_RETURN);
	if (r == ACCESS_ALLOWED)
		r = policy_probe(bus, to, from, DC_MESSAGE_ERROR);
	if (r < 0 || r == ACCESS_DENIED)
		return r < 0 ? r : POLICY_DIRECT_NO_REPLIES;
	return POLICY_DIRECT_ALLOWED;
}
