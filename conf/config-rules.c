/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * <allow> and <deny> of a <policy>: their attributes checked as dbus-daemon
 * 1.14 checks them, made into a struct bus_policy_rule. See
 * config-parser.h.
 */

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conf/config.h"
#include "conf/config-parser.h"
#include "conf/internal.h"
#include "util/macro.h"

enum {
	A_SEND_INTERFACE,
	A_SEND_MEMBER,
	A_SEND_ERROR,
	A_SEND_DESTINATION,
	A_SEND_DESTINATION_PREFIX,
	A_SEND_PATH,
	A_SEND_TYPE,
	A_SEND_BROADCAST,
	A_SEND_REQUESTED_REPLY,
	A_RECEIVE_INTERFACE,
	A_RECEIVE_MEMBER,
	A_RECEIVE_ERROR,
	A_RECEIVE_SENDER,
	A_RECEIVE_PATH,
	A_RECEIVE_TYPE,
	A_RECEIVE_REQUESTED_REPLY,
	A_EAVESDROP,
	A_MAX_FDS,
	A_MIN_FDS,
	A_OWN,
	A_OWN_PREFIX,
	A_USER,
	A_GROUP,
	A_LOG,
	_A_N,
};

static const char *const rule_attributes[_A_N + 1] = {
	[A_SEND_INTERFACE] = "send_interface",
	[A_SEND_MEMBER] = "send_member",
	[A_SEND_ERROR] = "send_error",
	[A_SEND_DESTINATION] = "send_destination",
	[A_SEND_DESTINATION_PREFIX] = "send_destination_prefix",
	[A_SEND_PATH] = "send_path",
	[A_SEND_TYPE] = "send_type",
	[A_SEND_BROADCAST] = "send_broadcast",
	[A_SEND_REQUESTED_REPLY] = "send_requested_reply",
	[A_RECEIVE_INTERFACE] = "receive_interface",
	[A_RECEIVE_MEMBER] = "receive_member",
	[A_RECEIVE_ERROR] = "receive_error",
	[A_RECEIVE_SENDER] = "receive_sender",
	[A_RECEIVE_PATH] = "receive_path",
	[A_RECEIVE_TYPE] = "receive_type",
	[A_RECEIVE_REQUESTED_REPLY] = "receive_requested_reply",
	[A_EAVESDROP] = "eavesdrop",
	[A_MAX_FDS] = "max_fds",
	[A_MIN_FDS] = "min_fds",
	[A_OWN] = "own",
	[A_OWN_PREFIX] = "own_prefix",
	[A_USER] = "user",
	[A_GROUP] = "group",
	[A_LOG] = "log",
	[_A_N] = NULL,
};

/*
 * The attributes of one <allow>/<deny> must describe one kind of rule, as
 * dbus-daemon checks them: messages sent or received, owning names, or
 * connecting users/groups. Return 0 (*@sendp / *@receivep: a send or receive
 * rule) or the parser's error.
 */
static int check_rule_attributes(struct file_parser *p, unsigned int line, const char *element,
				 const char *const *v, bool *sendp, bool *receivep)
{
	bool any_send = false, any_receive = false, any_message;
	int n_exclusive;

	for (int i = A_SEND_INTERFACE; i <= A_SEND_REQUESTED_REPLY; i++)
		any_send |= v[i] != NULL;
	for (int i = A_RECEIVE_INTERFACE; i <= A_RECEIVE_REQUESTED_REPLY; i++)
		any_receive |= v[i] != NULL;
	/* A lone eavesdrop= means receive_sender="*" eavesdrop=... */
	if (!any_send && v[A_EAVESDROP])
		any_receive = true;
	any_message = any_send || any_receive || v[A_EAVESDROP] || v[A_MAX_FDS] || v[A_MIN_FDS];
	*sendp = any_send;
	*receivep = any_receive;

	if (!(any_send || any_receive || v[A_OWN] || v[A_OWN_PREFIX] || v[A_USER] || v[A_GROUP]))
		return conf_parser_fail(p, line, "Element <%s> must have one or more attributes",
				   element);

	if ((v[A_SEND_MEMBER] && !v[A_SEND_INTERFACE] && !v[A_SEND_PATH]) ||
	    (v[A_RECEIVE_MEMBER] && !v[A_RECEIVE_INTERFACE] && !v[A_RECEIVE_PATH]))
		return conf_parser_fail(p, line,
				   "On element <%s>, if you specify a member you must specify an interface or a path. Keep in mind that not all messages have an interface field.",
				   element);

	n_exclusive = any_message + !!v[A_OWN] + !!v[A_OWN_PREFIX] + !!v[A_USER] + !!v[A_GROUP];
	if (n_exclusive > 1)
		return conf_parser_fail(p, line,
				   "Invalid combination of attributes on element <%s>: own, own_prefix, user, group and the message-related attributes cannot be combined",
				   element);
	if (any_send && any_receive)
		return conf_parser_fail(p, line,
				   "Invalid combination of attributes on element <%s>: send and receive attributes cannot be combined",
				   element);
	if ((v[A_SEND_MEMBER] || v[A_SEND_INTERFACE]) && v[A_SEND_ERROR])
		return conf_parser_fail(p, line,
				   "Invalid combination of attributes on element <%s>: send_error cannot be combined with send_member or send_interface",
				   element);
	if (v[A_SEND_DESTINATION] && v[A_SEND_DESTINATION_PREFIX])
		return conf_parser_fail(p, line,
				   "Invalid combination of attributes on element <%s>: send_destination cannot be combined with send_destination_prefix",
				   element);
	if ((v[A_RECEIVE_MEMBER] || v[A_RECEIVE_INTERFACE]) && v[A_RECEIVE_ERROR])
		return conf_parser_fail(p, line,
				   "Invalid combination of attributes on element <%s>: receive_error cannot be combined with receive_member or receive_interface",
				   element);
	return 0;
}

/* A send (@send) or receive rule. Return 0 or the parser's error. */
static int rule_set_message(struct file_parser *p, unsigned int line,
			    struct bus_policy_rule *rule, const char *const *v, bool send)
{
	const char *type_attr = v[send ? A_SEND_TYPE : A_RECEIVE_TYPE];
	const char *name;

	rule->type = send ? BUS_POLICY_RULE_SEND : BUS_POLICY_RULE_RECEIVE;
	if (type_attr) {
		rule->message_type = bus_message_type_from_string(type_attr);
		if (rule->message_type < 0)
			return conf_parser_fail(p, line, "Bad message type \"%s\"", type_attr);
	}
	if (conf_parse_true_false(p, line, "eavesdrop", v[A_EAVESDROP], &rule->eavesdrop) ||
	    conf_parse_true_false(p, line, "send_broadcast", v[A_SEND_BROADCAST], &rule->broadcast) ||
	    conf_parse_true_false(p, line, send ? "send_requested_reply" : "receive_requested_reply",
			     v[send ? A_SEND_REQUESTED_REPLY : A_RECEIVE_REQUESTED_REPLY],
			     &rule->requested_reply))
		return p->r;
	/* Broadcasts have no destination: such a rule could never match. */
	if (send && v[A_SEND_DESTINATION] && !conf_is_wildcard(v[A_SEND_DESTINATION]) &&
	    rule->broadcast == BUS_TRISTATE_TRUE)
		return conf_parser_fail(p, line,
				   "Rule with send_broadcast=\"true\" and send_destination=\"%s\" cannot match anything",
				   v[A_SEND_DESTINATION]);
	if (conf_parse_fds_attribute(p, line, "max_fds", v[A_MAX_FDS], BUS_POLICY_MAX_FDS,
				&rule->max_fds) ||
	    conf_parse_fds_attribute(p, line, "min_fds", v[A_MIN_FDS], 0, &rule->min_fds))
		return p->r;

	if (send) {
		name = v[A_SEND_DESTINATION];
		if (v[A_SEND_DESTINATION_PREFIX]) {
			/* The prefix is taken literally: "*" is no wildcard here. */
			rule->name = strdup(v[A_SEND_DESTINATION_PREFIX]);
			rule->name_is_prefix = true;
			if (!rule->name)
				return conf_parser_fail_errno(p, -ENOMEM);
			name = NULL;
		}
	} else {
		name = v[A_RECEIVE_SENDER];
	}
	if ((name && conf_dup_or_null(name, &rule->name) < 0) ||
	    conf_dup_or_null(v[send ? A_SEND_INTERFACE : A_RECEIVE_INTERFACE], &rule->interface) < 0 ||
	    conf_dup_or_null(v[send ? A_SEND_MEMBER : A_RECEIVE_MEMBER], &rule->member) < 0 ||
	    conf_dup_or_null(v[send ? A_SEND_ERROR : A_RECEIVE_ERROR], &rule->error) < 0 ||
	    conf_dup_or_null(v[send ? A_SEND_PATH : A_RECEIVE_PATH], &rule->path) < 0)
		return conf_parser_fail_errno(p, -ENOMEM);
	return 0;
}

/* An own= or own_prefix= rule. Return 0 or the parser's error. */
static int rule_set_own(struct file_parser *p, struct bus_policy_rule *rule,
			const char *const *v)
{
	rule->type = BUS_POLICY_RULE_OWN;
	if (v[A_OWN])
		return conf_dup_or_null(v[A_OWN], &rule->name) < 0 ? conf_parser_fail_errno(p, -ENOMEM) : 0;
	rule->name = strdup(v[A_OWN_PREFIX]);
	rule->name_is_prefix = true;
	return rule->name ? 0 : conf_parser_fail_errno(p, -ENOMEM);
}

/*
 * A user= or group= (connect) rule. An unknown user or group is warned about
 * and the rule dropped (*@skipp), as dbus-daemon does. Return 0 or the
 * parser's error.
 */
static int rule_set_identity(struct file_parser *p, unsigned int line, const char *element,
			     struct bus_policy_rule *rule, const char *const *v, bool *skipp)
{
	bool user = v[A_USER] != NULL;
	const char *who = user ? v[A_USER] : v[A_GROUP];
	int r;

	rule->type = user ? BUS_POLICY_RULE_USER : BUS_POLICY_RULE_GROUP;
	if (conf_is_wildcard(who)) {
		rule->id_any = true;
		return 0;
	}
	r = user ? conf_lookup_user(who, &rule->id) : conf_lookup_group(who, &rule->id);
	if (r < 0)
		return conf_parser_fail_errno(p, r);
	if (r == CONF_LOOKUP_E_UNKNOWN) {
		*skipp = true;
		return conf_parser_warn(p, line, "Unknown %s \"%s\" on element <%s>",
				   user ? "username" : "group", who, element);
	}
	return 0;
}

int conf_parse_rule(struct file_parser *p, unsigned int line, const char *element,
		      bool allow, const char **atts, const struct element *policy)
{
	const char *v[_A_N];
	struct bus_policy_rule *rule;
	bool send, receive, skip = false;
	int r;

	r = conf_locate_attributes(p, line, element, atts, rule_attributes, v);
	if (r)
		return r;
	r = check_rule_attributes(p, line, element, v, &send, &receive);
	if (r)
		return r;

	rule = calloc(1, sizeof(*rule));
	if (!rule)
		return conf_parser_fail_errno(p, -ENOMEM);
	list_init(&rule->link);
	rule->file = p->path;
	rule->line = line;
	rule->allow = allow;
	rule->scope = policy->policy.scope;
	rule->scope_id = policy->policy.id;
	rule->max_fds = BUS_POLICY_MAX_FDS;
	rule->log = v[A_LOG] && strcmp(v[A_LOG], "true") == 0;

	if (send || receive)
		r = rule_set_message(p, line, rule, v, send);
	else if (v[A_OWN] || v[A_OWN_PREFIX])
		r = rule_set_own(p, rule, v);
	else if (v[A_USER] || v[A_GROUP])
		r = rule_set_identity(p, line, element, rule, v, &skip);
	if (r || skip || policy->policy.ignored) {
		/* <policy user="unknown">: dbus-daemon drops its rules silently. */
		conf_rule_free(rule);
		return r;
	}
	if ((rule->type == BUS_POLICY_RULE_USER || rule->type == BUS_POLICY_RULE_GROUP) &&
	    (rule->scope == BUS_POLICY_SCOPE_USER || rule->scope == BUS_POLICY_SCOPE_GROUP)) {
		bool per_user = rule->scope == BUS_POLICY_SCOPE_USER;

		conf_rule_free(rule);
		return conf_parser_fail(p, line,
				   "<%s> rule cannot be per-%s because it has bus-global semantics",
				   element, per_user ? "user" : "group");
	}

	list_append(&p->config->rules, &rule->link);
	return 0;
}
