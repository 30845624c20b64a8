/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/**
 * DOC: compiled dbus-daemon policy
 *
 * bus_policy_new() compiles the rules of a struct bus_config once per
 * (re)load. bus_client_policy_new() then builds, once per connection, the
 * ordered rule lists that apply to that peer: <policy context="default">,
 * then each of its groups (in the order given), then its user, then
 * at_console="true" or "false", then context="mandatory", exactly like
 * dbus-daemon. Within the result the last matching rule wins; the checks scan
 * the per-type arrays backwards and stop at the first match, so a decision
 * costs one pass over the rules of that type that could match at most.
 *
 * The checks are pure functions of a small struct describing the message;
 * they return whether it is allowed and, through @rulep, the deciding rule
 * (NULL when no rule matched and the default "deny" applied), so that the
 * broker can say which rule denied ("FILE:LINE") in AccessDenied errors.
 *
 * Matching follows dbus-daemon 1.14 bus/policy.c, including its quirks:
 *  - path, member and error name of a rule match a message lacking that
 *    field; a rule's interface never matches a message without interface
 *    for <allow>, always for <deny>;
 *  - replies (messages with a reply serial): an <allow> whose
 *    requested_reply is true (the default for <allow>) does not apply to an
 *    unrequested reply unless eavesdrop="true"; a <deny> whose
 *    requested_reply is false (the default for <deny>) does not apply to a
 *    requested reply;
 *  - receive rules and eavesdropping: an <allow> without eavesdrop="true"
 *    does not apply when eavesdropping, a <deny eavesdrop="true"> applies
 *    only when eavesdropping;
 *  - send_destination / receive_sender match any name the other peer owns
 *    (its unique name included); when the other side is the bus itself or a
 *    not-yet-activated service (peer NULL), the message's destination /
 *    sender field is compared instead; *_prefix and own_prefix match the
 *    name itself or any name below it ("a.b" matches "a.b" and "a.b.c", not
 *    "a.bc").
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "conf/config.h"
#include "conf/console.h"
#include "util/macro.h"

struct bus_policy;
struct bus_client_policy;

/**
 * bus_policy_new() - compile the policy of @config
 * @policyp:	the result; owns copies of everything it needs, so @config may
 *		be freed afterwards
 * Return: 0 or -ENOMEM.
 */
int bus_policy_new(struct bus_policy **policyp, const struct bus_config *config);
struct bus_policy *bus_policy_free(struct bus_policy *policy);
DEFINE_CLEANUP_FUNC(struct bus_policy *, bus_policy_free);

/**
 * bus_policy_check_connect() - may a peer with these credentials connect?
 * @uid, @gids, @n_gids: the peer's user and all its groups
 * @bus_uid:	the user the bus runs as: the default, before any rule, is to
 *		allow only that user (dbus-daemon's rule)
 * @rulep:	if not NULL, the deciding <allow|deny user=|group=> or NULL
 *
 * Only <policy context="default"> and context="mandatory" take part, as in
 * dbus-daemon.
 */
bool bus_policy_check_connect(const struct bus_policy *policy, uint32_t uid,
			      const uint32_t *gids, size_t n_gids, uint32_t bus_uid,
			      const struct bus_policy_rule **rulep);

/**
 * bus_policy_uid_at_console() - is @uid at the console, for at_console rules?
 *
 * Decided by the policy's console detection (console.h; by default what
 * dbus-daemon does: logind seats, else nothing) when the policy has
 * at_console rules at all; BUS_CONSOLE_ABSENT without asking anyone
 * otherwise. Call it when a connection's client policy is built (connect
 * and reload), not per message.
 * @policy may be NULL (no policy: BUS_CONSOLE_ABSENT).
 *
 * Return: a bus_console_verdict, or negative errno when logind's answer
 * failed (callers treat it as "not at the console").
 */
int bus_policy_uid_at_console(const struct bus_policy *policy, uint32_t uid);

/* Whether any <policy at_console=...> rule exists. */
bool bus_policy_has_console_rules(const struct bus_policy *policy);

/*
 * Replace the console detection (tests inject a fake seats function or
 * directories). The strings in @console must outlive @policy.
 */
void bus_policy_set_console(struct bus_policy *policy, const struct bus_console *console);

/**
 * bus_client_policy_new() - the rules that apply to one connection
 * @uid, @gids, @n_gids: the peer's credentials (gids in the order to apply)
 * @at_console:	whether @uid is at the console (selects at_console rules;
 *		normally bus_policy_uid_at_console() == BUS_CONSOLE_PRESENT)
 * Return: 0 or -ENOMEM. The client policy refers to @policy, which must
 * outlive it.
 */
int bus_client_policy_new(struct bus_client_policy **clientp, const struct bus_policy *policy,
			  uint32_t uid, const uint32_t *gids, size_t n_gids, bool at_console);
struct bus_client_policy *bus_client_policy_free(struct bus_client_policy *client);
DEFINE_CLEANUP_FUNC(struct bus_client_policy *, bus_client_policy_free);

/**
 * struct bus_policy_message - what the checks look at
 * @type:	BUS_MESSAGE_TYPE_METHOD_CALL etc.
 * @path, @interface, @member, @error_name: header fields, NULL if absent
 * @destination, @sender: header fields, NULL if absent (a signal without
 *		destination is a broadcast)
 * @is_reply:	the message has a reply serial (method return or error)
 * @requested_reply: it is a reply that the recipient is waiting for
 * @n_fds:	number of unix fds attached
 */
struct bus_policy_message {
	int type;
	const char *path;
	const char *interface;
	const char *member;
	const char *error_name;
	const char *destination;
	const char *sender;
	bool is_reply;
	bool requested_reply;
	uint32_t n_fds;
};

/**
 * struct bus_policy_peer - the names a peer currently owns
 * @names:	its unique name and well-known names (any order)
 */
struct bus_policy_peer {
	const char *const *names;
	size_t n_names;
};

/**
 * bus_client_policy_check_send() - may this client send @m to @receiver?
 * @receiver:	the destination connection, or NULL when the destination is the
 *		bus driver or a service being activated: then send_destination
 *		is compared with @m->destination
 * @rulep:	the deciding rule, or NULL if none matched (denied)
 */
bool bus_client_policy_check_send(const struct bus_client_policy *client,
				  const struct bus_policy_message *m,
				  const struct bus_policy_peer *receiver,
				  const struct bus_policy_rule **rulep);

/**
 * bus_client_policy_check_receive() - may this client receive @m from @sender?
 * @sender:	the sending connection, or NULL for the bus driver (then
 *		receive_sender is compared with @m->sender)
 * @eavesdropping: the client gets @m only as an eavesdropper (the message is
 *		addressed to someone else)
 */
bool bus_client_policy_check_receive(const struct bus_client_policy *client,
				     const struct bus_policy_message *m,
				     const struct bus_policy_peer *sender, bool eavesdropping,
				     const struct bus_policy_rule **rulep);

/*
 * How many of the client's send (receive) rules match @m: what dbus-daemon
 * reports as "N matched rules" when it denies a message. A full scan: for
 * the denial path only.
 */
unsigned int bus_client_policy_count_send(const struct bus_client_policy *client,
					  const struct bus_policy_message *m,
					  const struct bus_policy_peer *receiver);
unsigned int bus_client_policy_count_receive(const struct bus_client_policy *client,
					     const struct bus_policy_message *m,
					     const struct bus_policy_peer *sender, bool eavesdropping);

/* May this client own @name? */
bool bus_client_policy_check_own(const struct bus_client_policy *client, const char *name,
				 const struct bus_policy_rule **rulep);

/**
 * bus_policy_rule_describe() - "FILE:LINE: <deny send_destination=... >"
 * for AccessDenied messages and logs; malloc'ed, NULL on ENOMEM.
 */
char *bus_policy_rule_describe(const struct bus_policy_rule *rule);

/**
 * bus_policy_opaque_between() - does a rule see more than a callee can?
 * @a, @b:	the names of the two peers of a direct (peer-to-peer) path
 *
 * On a direct path the callee enforces the policy itself, knowing only the
 * message and the caller's kernel-stamped uid. A send or receive rule that
 * looks at the interface, member, path, error name or fds, or applies by
 * group or console, cannot be evaluated there. This says whether such a rule
 * names either peer (or names nobody, so applies to all): then the broker's
 * verdict is not the same for every message between the two, and they must
 * talk through the broker. @policy may be NULL (no policy: false).
 */
bool bus_policy_opaque_between(const struct bus_policy *policy, const struct bus_policy_peer *a,
			       const struct bus_policy_peer *b);
