/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/**
 * DOC: The broker's policy decisions
 *
 * conf/policy.c compiles dbus-daemon's <policy> rules and answers pure
 * questions about a message described by a struct bus_policy_message. This
 * file is the one place where the broker asks them: it knows what a
 * connection is (its names, its credentials), so it turns connections and
 * messages into those descriptions. Every decision goes through here:
 *  - whether a connection may connect at all, and which rules apply to it
 *    (policy_setup_peer(), on connect and on every reload);
 *  - whether a message may go from one connection to another, or to or from
 *    the bus driver (policy_check());
 *  - whether two native clients may talk on a direct path, where the callee
 *    enforces the policy itself (policy_check_direct()).
 * Owning names (<allow own=...>) is asked by the driver directly of the
 * connection's compiled client policy (peer->policy), since it concerns one
 * connection only.
 *
 * Before all of that, a connection of a filtered container instance is held
 * to its instance's filter, xdg-dbus-proxy's rules (container-filter.h):
 * policy_filter_send() for what it sends, policy_filter_broadcast() for the
 * broadcasts it would receive. Its verdicts are richer than allow/deny (a
 * hidden name looks absent, some driver answers are made up), so the router
 * gives the answer; the <policy> is asked only about what the filter passed.
 *
 * The LSMs (SELinux, selinux.h, then AppArmor, apparmor.h) are asked first,
 * as dbus-daemon asks them, and all must allow a message. Without a policy (bus->policy NULL) and
 * without LSM mediation everything is allowed (policy_active() false).
 */

#include <stdbool.h>
#include "conf/policy.h"

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
 * The filter of @from's container instance about @m, which it sends: a
 * FILTER_* verdict (container-filter.h); FILTER_PASS for a connection
 * without filter. Replies are the router's to judge (only awaited ones, to
 * the caller's unique name, pass).
 */
int policy_filter_send(struct peer *from, struct message *m);

/* May @to, maybe filtered, receive the broadcast @m of @from (NULL: the driver)? */
bool policy_filter_broadcast(struct peer *to, struct peer *from, struct message *m);

/* Whether any message may be denied: a <policy> or LSM mediation. */
bool policy_active(struct bus *bus);

/**
 * struct policy_verdict - why a message was denied
 * @text:	the text of the AccessDenied error and of the log line, in
 *		dbus-daemon's words (policy_denial_text(); owned,
 *		policy_verdict_deinit())
 * @lsm:	an LSM denied it, and logged that itself
 */
struct policy_verdict {
	char *text;
	bool lsm;
};

void policy_verdict_deinit(struct policy_verdict *verdict);
#define _cleanup_verdict_ __attribute__((cleanup(policy_verdict_deinit)))

char *policy_denial_text(const char *lead, int n_rules, struct peer *from, struct peer *to,
			 const struct message *m, bool requested_reply,
			 const struct bus_policy_rule *rule);

/**
 * policy_check() - may @m go from @from to @to?
 * @from:	the sender, NULL: the bus driver
 * @from_names:	the sender's names if the caller collected them already
 *		(several receivers of one message), else NULL
 * @to:		the receiver, NULL: the bus driver or a service not yet
 *		activated (then the message's destination field is matched)
 * @requested_reply: @m is a reply that @to is waiting for
 * @eavesdropping: @to is not the addressed recipient
 * @verdict:	set when denied
 *
 * Both the sender's send rules and the receiver's receive rules must allow
 * it. Return: 1 allowed, 0 denied, -ENOMEM.
 */
int policy_check(struct bus *bus, struct peer *from,
		 const struct bus_policy_peer *from_names, struct peer *to,
		 struct message *m, bool requested_reply, bool eavesdropping,
		 struct policy_verdict *verdict);

/*
 * The LSMs' say, and theirs only, on @m from @from to the bus driver: for
 * what a connection sends before Hello (Hello itself first), which
 * dbus-daemon asks SELinux and AppArmor about (the driver's context and
 * label as the receiver's) before it lets Hello, and nothing else, through
 * (bus_context_check_security_policy()); its <policy> rules do not apply.
 * @m carries the sender ":not.active.yet", as in dbus-daemon. Return 1
 * allowed, 0 denied (logged by the LSM; @verdict set), -ENOMEM.
 */
int policy_check_driver_lsm(struct bus *bus, struct peer *from, struct message *m,
			    struct policy_verdict *verdict);

/*
 * policy_check() for @m, which would start the service of its destination:
 * the send rules decide as if the service owned the name; the LSM asks the
 * sender only, against the label the service will have.
 */
int policy_check_activation(struct bus *bus, struct peer *from, struct message *m,
			    struct policy_verdict *verdict);

/*
 * May @peer own @name, as far as the LSMs go? (The <policy> rules are the
 * driver's to ask.) Return 1 allowed, 0 denied (*@lsmp: "SELinux" or
 * "AppArmor", for the error), -ENOMEM.
 */
int policy_check_own_lsm(struct bus *bus, struct peer *peer, const char *name,
			 const char **lsmp);

/* May @peer eavesdrop, as far as the LSM goes? Return as policy_check_own_lsm(). */
int policy_check_eavesdrop_lsm(struct bus *bus, struct peer *peer);

/*
 * Whether @peer may be accepted by the LSM: while it mediates, a peer needs
 * a label. Return 0, 1 (not accepted, *@whyp set to a static text), -ENOMEM.
 */
int policy_check_connect_lsm(struct bus *bus, struct peer *peer, const char **whyp);

/**
 * policy_setup_peer() - (re)build the rules that apply to @peer
 *
 * From bus->policy and the connection's credentials: its groups come with
 * the socket, or from the user database for an identity proven otherwise
 * (DBUS_COOKIE_SHA1 over TCP). Called when it authenticated and on every
 * reload.
 * Return: 0, 1 if the policy does not let it connect at all, or -ENOMEM.
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
