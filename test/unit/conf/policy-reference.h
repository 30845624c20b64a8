/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * The reference policy evaluator of the policy tests: a plain forward scan over
 * a client's rules in dbus-daemon's order (default, groups, user, console,
 * mandatory), last match wins. It is deliberately naive, written from the
 * semantics of dbus-daemon's policy rather than from conf/policy.c, so that the
 * compiled policy can be checked against it: test/unit/conf/test-policy.c does
 * so on random rule sets, test/fuzz/fuzz-policy.c on fuzzer-made ones.
 *
 * A file including this may define POLICY_REFERENCE_FN (e.g. to keep the
 * reference out of the fuzzer's coverage feedback) before including it.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include "conf/config.h"
#include "conf/policy.h"

#ifndef POLICY_REFERENCE_FN
#define POLICY_REFERENCE_FN static
#endif

/* A decision's input: the message, the peer's names, and what is being owned. */
struct ref_msg {
	struct bus_policy_message m;
	const char *names[3];
	struct bus_policy_peer peer;
	bool use_peer;
	bool eavesdropping;
	const char *own;
};

POLICY_REFERENCE_FN size_t ref_rules(const struct bus_config *c, uint32_t uid, const uint32_t *gids,
				     size_t n_gids, bool console,
				     const struct bus_policy_rule **out)
{
	const struct bus_policy_rule *r;
	size_t n = 0;

	list_for_each_entry (r, &c->rules, link)
		if (r->scope == BUS_POLICY_SCOPE_DEFAULT)
			out[n++] = r;
	for (size_t g = 0; g < n_gids; g++)
		list_for_each_entry (r, &c->rules, link)
			if (r->scope == BUS_POLICY_SCOPE_GROUP && r->scope_id == gids[g])
				out[n++] = r;
	list_for_each_entry (r, &c->rules, link)
		if (r->scope == BUS_POLICY_SCOPE_USER && r->scope_id == uid)
			out[n++] = r;
	list_for_each_entry (r, &c->rules, link)
		if (r->scope == BUS_POLICY_SCOPE_CONSOLE && r->scope_id == console)
			out[n++] = r;
	list_for_each_entry (r, &c->rules, link)
		if (r->scope == BUS_POLICY_SCOPE_MANDATORY)
			out[n++] = r;
	return n;
}

/* "a.b" is below or equal to prefix "a.b" and below "a", not "a.bc" */
POLICY_REFERENCE_FN bool ref_prefix(const char *name, const char *prefix)
{
	size_t l = strlen(prefix);

	return strncmp(name, prefix, l) == 0 && (name[l] == 0 || name[l] == '.');
}

POLICY_REFERENCE_FN bool ref_names(const struct ref_msg *x, const char *field, const char *name,
				   bool prefix)
{
	if (!x->use_peer)
		return field && (prefix ? ref_prefix(field, name) : strcmp(field, name) == 0);
	for (size_t i = 0; i < x->peer.n_names; i++)
		if (prefix ? ref_prefix(x->peer.names[i], name) : !strcmp(x->peer.names[i], name))
			return true;
	return false;
}

POLICY_REFERENCE_FN bool ref_fields(const struct bus_policy_rule *r,
				    const struct bus_policy_message *m, bool eavesdrop)
{
	bool rr = r->requested_reply == BUS_TRISTATE_UNSET
			  ? r->allow
			  : r->requested_reply == BUS_TRISTATE_TRUE;

	if (r->message_type && r->message_type != m->type)
		return false;
	if (m->is_reply) {
		if (!m->requested_reply && r->allow && rr && !eavesdrop)
			return false;
		if (m->requested_reply && !r->allow && !rr)
			return false;
	}
	if (r->path && m->path && strcmp(r->path, m->path))
		return false;
	if (r->interface &&
	    ((!m->interface && r->allow) || (m->interface && strcmp(r->interface, m->interface))))
		return false;
	if (r->member && m->member && strcmp(r->member, m->member))
		return false;
	if (r->error && m->error_name && strcmp(r->error, m->error_name))
		return false;
	return m->n_fds >= r->min_fds && m->n_fds <= r->max_fds;
}

POLICY_REFERENCE_FN bool ref_check(const struct bus_policy_rule **rules, size_t n,
				   enum bus_policy_rule_type type, const struct ref_msg *x,
				   const struct bus_policy_rule **rulep)
{
	const struct bus_policy_message *m = &x->m;
	bool allowed = false;

	*rulep = NULL;
	for (size_t i = 0; i < n; i++) {
		const struct bus_policy_rule *r = rules[i];
		bool ev = r->eavesdrop == BUS_TRISTATE_TRUE;

		if (r->type != type)
			continue;
		if (type == BUS_POLICY_RULE_OWN) {
			if (r->name && (r->name_is_prefix ? !ref_prefix(x->own, r->name)
							  : strcmp(x->own, r->name)))
				continue;
		} else if (type == BUS_POLICY_RULE_SEND) {
			bool bcast = !m->destination && m->type == BUS_MESSAGE_TYPE_SIGNAL;

			if (!ref_fields(r, m, ev))
				continue;
			if (r->broadcast != BUS_TRISTATE_UNSET &&
			    bcast != (r->broadcast == BUS_TRISTATE_TRUE))
				continue;
			if (r->name && !ref_names(x, m->destination, r->name, r->name_is_prefix))
				continue;
		} else {
			/* only a message addressed to someone else is eavesdropped */
			bool eavesdropping = x->eavesdropping && m->destination;

			if (eavesdropping && r->allow && !ev)
				continue;
			if (!eavesdropping && !r->allow && ev)
				continue;
			if (!ref_fields(r, m, ev))
				continue;
			if (r->name && !ref_names(x, m->sender, r->name, false))
				continue;
		}
		allowed = r->allow;
		*rulep = r;
	}
	return allowed;
}
