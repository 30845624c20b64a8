/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/**
 * DOC: The broker's policy decisions
 *
 * conf/policy.c compiles dbus-daemon's <policy> rules and answers pure
 * questions about a message described by a struct bus_policy_message. This
 * file is the one place where the broker asks them, and the LSMs
 * (selinux.h, apparmor.h), and its modules (a feature that decides about
 * messages too, as container instances do: container-policy.c): it knows
 * what a connection is (its names, its credentials), so it turns
 * connections and messages into those descriptions. Every decision about a message is a struct verdict, which
 * the router carries out (router_carry_out()) without knowing who decided:
 *  - policy_judge_send(): what a connection sends, before its destination
 *    is looked up (the modules' only: a container's filter, xdg-dbus-proxy's
 *    rules, where a hidden name looks absent and some driver answers are
 *    made up);
 *  - policy_judge_call(): a call that would wait for a reply (the modules'
 *    only: a container instance's max_replies_per_container);
 *  - policy_judge_unicast(), policy_judge_receive(), policy_judge_driver(),
 *    policy_judge_from_driver(), policy_judge_activation(),
 *    policy_judge_unregistered(): whether a message may go from one
 *    connection (or the driver) to another (or the driver): the modules
 *    first, then the LSMs, as dbus-daemon asks them, then the <policy>; all
 *    must allow it;
 *  - policy_delivered(), policy_name_owner_changed(): what the modules
 *    learn from what the bus did (a filter learns the names its
 *    connection may now see).
 * Also here: whether a connection may connect at all and which rules apply
 * to it (policy_setup_peer(), on connect and on every reload), and whether
 * two native clients may talk on a direct path, where the callee enforces
 * the policy itself (policy_check_direct()). Owning names (<allow own=...>)
 * is asked by the driver directly of the connection's compiled client
 * policy (peer->policy), since it concerns one connection only.
 *
 * Without a policy (bus->policy NULL), without LSM mediation and without
 * filtered connections everything is delivered (policy_active() false).
 *
 * Return codes: 0 (the verdict is set) or negative errno.
 */

#include <stdbool.h>
#include "broker/core/bus.h"
#include "broker/objects/peer.h"
#include "conf/policy.h"
#include "util/list.h"
#include "util/macro.h"

struct bus;
struct peer;
struct message;

/**
 * struct policy_names - the names a connection owns or waits for
 * @peer:	as the compiled policy wants them
 *
 * For send_destination= and receive_sender= rules; dbus-daemon matches
 * queued names too. Small sets live in the object (on the caller's stack).
 */
#define POLICY_NAMES_INLINE 16
struct policy_names {
	struct bus_policy_peer peer;
	const char **v;
	const char *inline_v[POLICY_NAMES_INLINE];
};

/* Collect the names of @peer (registered). Return 0 or -ENOMEM. */
int policy_names_init(struct policy_names *pn, struct peer *peer);
void policy_names_deinit(struct policy_names *pn);

/*
 * The answer of an access question that may also fail (util/error.h): a
 * negative errno or one of these, always compared by name.
 */
enum access {
	ACCESS_DENIED,
	ACCESS_ALLOWED,
};

/* Why a connection is not let in (policy_check_connect_lsm(), policy_setup_peer()). */
enum {
	_POLICY_E_SUCCESS,
	POLICY_E_REFUSED,
};

/* Whether a message may be held back by more than the modules: a <policy> or LSM mediation. */
static inline bool policy_active(const struct bus *bus)
{
	return bus->policy || bus->apparmor || bus->selinux;
}

/* Whether an LSM mediates (what a connection sends before Hello is asked of it). */
static inline bool policy_lsm_active(const struct bus *bus)
{
	return bus->apparmor || bus->selinux;
}

/* Whether a module asks about messages (policy_add_module()). */
static inline bool policy_has_modules(const struct bus *bus)
{
	return !list_is_empty(&bus->policy_modules);
}

/**
 * enum verdict_kind - what becomes of a message
 * @VERDICT_DELIVER:	it goes on
 * @VERDICT_DROP:	nobody gets it, nobody is told; monitors see an
 *			AccessDenied error with @text, if set
 * @VERDICT_DENY:	AccessDenied with @text to its sender, and the refusal
 *			logged as its sender's, unless @logged
 * @VERDICT_ERROR:	the error @error_name with @text to its sender (a name
 *			hidden as absent, a limit)
 * @VERDICT_ANSWER:	@answer, made up by whoever decided, to its sender
 */
enum verdict_kind {
	VERDICT_DELIVER,
	VERDICT_DROP,
	VERDICT_DENY,
	VERDICT_ERROR,
	VERDICT_ANSWER,
};

/**
 * struct verdict - a decision about one message
 * @kind:	what becomes of it
 * @error_name:	VERDICT_ERROR's error (static)
 * @text:	the error's text, in dbus-daemon's words where it has them
 *		(owned)
 * @answer:	VERDICT_ANSWER's message (a reference)
 * @logged:	whoever decided logged it (an LSM does, as in dbus-daemon)
 */
struct verdict {
	enum verdict_kind kind;
	const char *error_name;
	char *text;
	struct message *answer;
	bool logged;
};

void verdict_release(struct verdict *v);

/* Release what @v holds (inline: most verdicts hold nothing). */
static inline void verdict_deinit(struct verdict *v)
{
	if (_unlikely_(v->text || v->answer))
		verdict_release(v);
}
#define _cleanup_verdict_ __attribute__((cleanup(verdict_deinit)))

/* Set @v to @kind with @text (owned; NULL: -ENOMEM). Return 0 or -ENOMEM. */
int verdict_set(struct verdict *v, enum verdict_kind kind, const char *error_name, char *text);

/**
 * struct policy_module_ops - what a module has to say
 *
 * Each op may be NULL. The judges set @v (initialized to VERDICT_DELIVER),
 * and return 0 or negative errno; the first module whose verdict is not
 * VERDICT_DELIVER decides, before the LSMs and the <policy> are asked.
 * @judge_send:	as policy_judge_send()
 * @judge_call:	as policy_judge_call()
 * @judge_unicast: as policy_judge_unicast()
 * @judge_receive: as policy_judge_receive()
 * @judge_direct: POLICY_DIRECT_ALLOWED, or why @from may not call @to past
 *		the bus (POLICY_DIRECT_*)
 * @delivered:	as policy_delivered()
 * @name_owner_changed: as policy_name_owner_changed()
 * @sees:	as policy_sees()
 */
struct policy_module;
struct policy_module_ops {
	int (*judge_send)(struct policy_module *mod, struct peer *from, struct message *m,
			  struct verdict *v);
	int (*judge_call)(struct policy_module *mod, struct peer *from, struct message *m,
			  struct verdict *v);
	int (*judge_unicast)(struct policy_module *mod, struct peer *from, struct peer *to,
			     struct message *m, bool requested_reply, struct verdict *v);
	int (*judge_receive)(struct policy_module *mod, struct peer *to, struct peer *from,
			     struct message *m, bool eavesdropping, struct verdict *v);
	int (*judge_direct)(struct policy_module *mod, struct peer *from, struct peer *to);
	int (*delivered)(struct policy_module *mod, struct peer *to, struct peer *from);
	void (*name_owner_changed)(struct policy_module *mod, const char *name,
				   struct peer *owner);
	bool (*sees)(struct policy_module *mod, struct peer *peer, const char *name);
};

/* Embedded in the module's own object, which gets back with container_of(). */
struct policy_module {
	const struct policy_module_ops *ops;
	struct list_node link;		/* in bus->policy_modules */
};

/* Ask @mod too, from now on, after the modules added before it. */
void policy_add_module(struct bus *bus, struct policy_module *mod,
		       const struct policy_module_ops *ops);
void policy_remove_module(struct policy_module *mod);

char *policy_denial_text(const char *lead, int n_rules, struct peer *from, struct peer *to,
			 const struct message *m, bool requested_reply,
			 const struct bus_policy_rule *rule);

/*
 * The judges' common case inline, where nobody asks (no module, and for
 * the <policy> and LSM questions, policy_active() false): delivered without
 * a call. The rest of each is policy_ask_*() in policy.c.
 */
int policy_ask_send(struct peer *from, struct message *m, struct verdict *v);
int policy_ask_call(struct peer *from, struct message *m, struct verdict *v);
int policy_ask_unicast(struct bus *bus, struct peer *from, struct peer *to, struct message *m,
		       bool requested_reply, struct verdict *v);
int policy_ask_receive(struct bus *bus, struct peer *to, struct peer *from,
		       const struct bus_policy_peer *from_names, struct message *m,
		       bool eavesdropping, struct verdict *v);
int policy_ask_driver(struct bus *bus, struct peer *from, struct message *m, struct verdict *v);
int policy_ask_from_driver(struct bus *bus, struct peer *to, struct message *m,
			   struct verdict *v);
int policy_ask_delivered(struct peer *to, struct peer *from);

/**
 * policy_judge_send() - what @from sends, before its destination is looked up
 *
 * The filter of @from's container instance, if any, about a call or unicast
 * signal to another connection or a call to the driver; a reply it sends
 * goes only to a unique name (Debian's fix of xdg-dbus-proxy; whether a call
 * waits for it is the reply tracking's to say). The filter logs its own
 * refusals (--log): @v->logged.
 */
static inline int policy_judge_send(struct peer *from, struct message *m, struct verdict *v)
{
	*v = (struct verdict){};
	return policy_has_modules(from->bus) ? policy_ask_send(from, m, v) : 0;
}

/*
 * A call of @from that would wait for a reply: within the limits of the
 * group it acts with (LimitsExceeded beyond max_replies_per_container)?
 */
static inline int policy_judge_call(struct peer *from, struct message *m, struct verdict *v)
{
	*v = (struct verdict){};
	return policy_has_modules(from->bus) ? policy_ask_call(from, m, v) : 0;
}

/**
 * policy_judge_unicast() - may @m go from @from to @to, which it addresses?
 * @requested_reply: @m is a reply that @to is waiting for
 *
 * A reply nobody waits for, to or from a filtered connection, is dropped.
 * Denied: VERDICT_DENY.
 */
static inline int policy_judge_unicast(struct bus *bus, struct peer *from, struct peer *to,
				       struct message *m, bool requested_reply,
				       struct verdict *v)
{
	*v = (struct verdict){};
	if (!policy_has_modules(bus) && !policy_active(bus))
		return 0;
	return policy_ask_unicast(bus, from, to, m, requested_reply, v);
}

/**
 * policy_judge_receive() - may @to receive a copy of @m, of @from?
 * @from:	the sender, NULL: the driver
 * @from_names:	the sender's names if the caller collected them already
 *		(several receivers of one message), else NULL
 * @eavesdropping: @to is not the addressed recipient: @m is unicast
 *
 * For the receivers of a broadcast and for eavesdroppers: a filtered
 * connection gets what its filter passes and never eavesdrops. Denied:
 * VERDICT_DROP (monitors see why).
 */
static inline int policy_judge_receive(struct bus *bus, struct peer *to, struct peer *from,
				       const struct bus_policy_peer *from_names,
				       struct message *m, bool eavesdropping, struct verdict *v)
{
	*v = (struct verdict){};
	if (!policy_has_modules(bus) && !policy_active(bus))
		return 0;
	return policy_ask_receive(bus, to, from, from_names, m, eavesdropping, v);
}

/* May @from call the driver with @m? Denied: VERDICT_DENY. */
static inline int policy_judge_driver(struct bus *bus, struct peer *from, struct message *m,
				      struct verdict *v)
{
	*v = (struct verdict){};
	return policy_active(bus) ? policy_ask_driver(bus, from, m, v) : 0;
}

/*
 * May @to receive @m of the driver (a signal, a reply, an error)? Asked of
 * a registered receiver's receive rules, a reply counting as requested, as
 * dbus-daemon asks them. Denied: VERDICT_DROP.
 */
static inline int policy_judge_from_driver(struct bus *bus, struct peer *to, struct message *m,
					   struct verdict *v)
{
	*v = (struct verdict){};
	/* A connection before Hello receives anything. */
	if (!to->policy || !to->registered)
		return 0;
	return policy_ask_from_driver(bus, to, m, v);
}

/*
 * The LSMs' say, and theirs only, on @m from @from to the bus driver: for
 * what a connection sends before Hello (Hello itself first), which
 * dbus-daemon asks SELinux and AppArmor about (the driver's context and
 * label as the receiver's) before it lets Hello, and nothing else, through
 * (bus_context_check_security_policy()); its <policy> rules do not apply.
 * @m carries the sender ":not.active.yet", as in dbus-daemon. Denied:
 * VERDICT_DENY (logged by the LSM).
 */
int policy_judge_unregistered(struct bus *bus, struct peer *from, struct message *m,
			      struct verdict *v);

/*
 * @m, which would start the service of its destination: the send rules
 * decide as if the service owned the name; the LSM asks the sender only,
 * against the label the service will have. Denied: VERDICT_DENY.
 */
int policy_judge_activation(struct bus *bus, struct peer *from, struct message *m,
			    struct verdict *v);

/*
 * @to was given a message of @from (NULL: the driver): a filtered @to
 * learns that @from exists. Return 0 or -ENOMEM.
 */
static inline int policy_delivered(struct peer *to, struct peer *from)
{
	return policy_has_modules(to->bus) ? policy_ask_delivered(to, from) : 0;
}

bool policy_ask_sees(struct peer *peer, const char *name);

/*
 * May @peer see the name @name (unique or well-known) in ListNames and
 * ListActivatableNames? Every module must agree (a container's filter hides
 * what its connection may not see).
 */
static inline bool policy_sees(struct peer *peer, const char *name)
{
	return !policy_has_modules(peer->bus) || policy_ask_sees(peer, name);
}

/* @owner became the primary owner of @name: filtered connections learn it. */
void policy_name_owner_changed(struct bus *bus, const char *name, struct peer *owner);

/*
 * May @peer own @name, as far as the LSMs go? (The <policy> rules are the
 * driver's to ask.) Return ACCESS_ALLOWED, ACCESS_DENIED (*@lsmp: "SELinux"
 * or "AppArmor", for the error), -ENOMEM.
 */
int policy_check_own_lsm(struct bus *bus, struct peer *peer, const char *name,
			 const char **lsmp);

/* May @peer eavesdrop, as far as the LSM goes? Return as policy_check_own_lsm(). */
int policy_check_eavesdrop_lsm(struct bus *bus, struct peer *peer);

/*
 * Whether @peer may be accepted by the LSM: while it mediates, a peer needs
 * a label. Return 0, POLICY_E_REFUSED (*@whyp set to a static text), -ENOMEM.
 */
int policy_check_connect_lsm(struct bus *bus, struct peer *peer, const char **whyp);

/**
 * policy_setup_peer() - (re)build the rules that apply to @peer
 *
 * From bus->policy and the connection's credentials: its groups come with
 * the socket, or from the user database for an identity proven otherwise
 * (DBUS_COOKIE_SHA1 over TCP). Called when it authenticated and on every
 * reload.
 * Return: 0, POLICY_E_REFUSED if the policy does not let it connect at all,
 * or -ENOMEM.
 */
int policy_setup_peer(struct peer *peer);

/*
 * The verdict on a direct path (policy_check_direct()): allowed, or why
 * not. Every value but POLICY_DIRECT_ALLOWED means the two talk through the
 * broker.
 */
enum {
	POLICY_DIRECT_ALLOWED,
	POLICY_DIRECT_DENIED,		/* calls from the caller are denied */
	POLICY_DIRECT_OPAQUE,		/* a rule about the two sees more than the callee */
	POLICY_DIRECT_NO_REPLIES,	/* the callee's replies would be denied */
	POLICY_DIRECT_FILTERED,		/* a container's filter decides per message */
};

/**
 * policy_check_direct() - may @from call @to directly, past the broker?
 *
 * On the direct path the callee enforces the broker's verdict, knowing only
 * the message and the caller's kernel-stamped uid. So it is allowed only
 * when no rule about the two looks at anything else
 * (bus_policy_opaque_between()); then the verdict is the same for every call
 * and every requested reply, and one probe message of each kind decides it.
 * AppArmor decides per message (its rules name paths and members): with
 * AppArmor mediating, only two unconfined peers may talk directly. SELinux
 * decides per pair of contexts: both ways must be allowed.
 * Return: POLICY_DIRECT_*, or -ENOMEM.
 */
int policy_check_direct(struct bus *bus, struct peer *from, struct peer *to);
