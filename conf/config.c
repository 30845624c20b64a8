/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * dbus-daemon XML configuration reader.
 *
 * Every file (the top one and each include) is parsed into its own struct
 * bus_config "fragment", which is merged into the including fragment only
 * when the whole file parsed. That gives dbus-daemon's semantics for free: a
 * broken file inside an <includedir> is skipped as a whole (with a warning),
 * a broken <include> fails the load, and limits flow through includes in
 * file order (a fragment starts with its parent's limits and hands them back).
 */

#include <dirent.h>
#include <errno.h>
#include <expat.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "conf/config.h"
#include "conf/config-parser.h"
#include "conf/internal.h"
#include "util/macro.h"
#include "util/str.h"

static const char *const element_names[_EL_N] = {
	[EL_NONE] = "",
	[EL_BUSCONFIG] = "busconfig",
	[EL_USER] = "user",
	[EL_TYPE] = "type",
	[EL_FORK] = "fork",
	[EL_SYSLOG] = "syslog",
	[EL_KEEP_UMASK] = "keep_umask",
	[EL_LISTEN] = "listen",
	[EL_PIDFILE] = "pidfile",
	[EL_AUTH] = "auth",
	[EL_INCLUDEDIR] = "includedir",
	[EL_STANDARD_SESSION_SERVICEDIRS] = "standard_session_servicedirs",
	[EL_STANDARD_SYSTEM_SERVICEDIRS] = "standard_system_servicedirs",
	[EL_SERVICEDIR] = "servicedir",
	[EL_SERVICEHELPER] = "servicehelper",
	[EL_INCLUDE] = "include",
	[EL_POLICY] = "policy",
	[EL_LIMIT] = "limit",
	[EL_ALLOW] = "allow",
	[EL_DENY] = "deny",
	[EL_SELINUX] = "selinux",
	[EL_ASSOCIATE] = "associate",
	[EL_APPARMOR] = "apparmor",
	[EL_ALLOW_ANONYMOUS] = "allow_anonymous",
};

/* Leaf elements whose text is their value; all others take whitespace only. */
static bool element_takes_content(enum element_type t)
{
	switch (t) {
	case EL_USER:
	case EL_TYPE:
	case EL_LISTEN:
	case EL_PIDFILE:
	case EL_AUTH:
	case EL_INCLUDEDIR:
	case EL_SERVICEDIR:
	case EL_SERVICEHELPER:
	case EL_INCLUDE:
	case EL_LIMIT:
		return true;
	default:
		return false;
	}
}

static int parse_file(struct loader *loader, struct file_parser *parent, const char *path,
		      const void *data, size_t size, struct bus_config *config,
		      unsigned int line_in_parent, char **errorp);

/* ------------------------------------------------------------------ */
/* values                                                               */

void bus_config_strings_clear(struct list_node *strings)
{
	struct bus_config_string *e, *t;

	list_for_each_entry_safe(e, t, strings, link) {
		list_unlink(&e->link);
		free(e);
	}
}

void bus_config_limits_init(struct bus_config_limits *l)
{
	*l = (struct bus_config_limits){
		.max_incoming_bytes = 127LL * 1024 * 1024,
		.max_incoming_unix_fds = 64,
		.max_outgoing_bytes = 127LL * 1024 * 1024,
		.max_outgoing_unix_fds = 64,
		.max_message_size = 32LL * 1024 * 1024,
		.max_message_unix_fds = 16,
		.service_start_timeout = 25000,
		.auth_timeout = 5000,
		.pending_fd_timeout = 150000,
		.reply_timeout = -1,
		.max_completed_connections = 2048,
		.max_incomplete_connections = 64,
		.max_connections_per_user = 256,
		.max_pending_service_starts = 512,
		.max_names_per_connection = 512,
		.max_match_rules_per_connection = 512,
		.max_replies_per_connection = 128,
		.max_containers = 512,
		.max_containers_per_user = 16,
		.max_container_metadata_bytes = 4096,
		.max_connections_per_container = 8,
		.max_replies_per_container = 512,
	};
}

const char *bus_message_type_to_string(int type)
{
	switch (type) {
	case BUS_MESSAGE_TYPE_ANY:
		return "*";
	case BUS_MESSAGE_TYPE_METHOD_CALL:
		return "method_call";
	case BUS_MESSAGE_TYPE_METHOD_RETURN:
		return "method_return";
	case BUS_MESSAGE_TYPE_ERROR:
		return "error";
	case BUS_MESSAGE_TYPE_SIGNAL:
		return "signal";
	}
	return "invalid";
}

int bus_message_type_from_string(const char *s)
{
	if (strcmp(s, "*") == 0)
		return BUS_MESSAGE_TYPE_ANY;
	if (strcmp(s, "method_call") == 0)
		return BUS_MESSAGE_TYPE_METHOD_CALL;
	if (strcmp(s, "method_return") == 0)
		return BUS_MESSAGE_TYPE_METHOD_RETURN;
	if (strcmp(s, "error") == 0)
		return BUS_MESSAGE_TYPE_ERROR;
	if (strcmp(s, "signal") == 0)
		return BUS_MESSAGE_TYPE_SIGNAL;
	return -1;
}

/* ------------------------------------------------------------------ */
/* the model                                                            */

static struct bus_config *config_new(void)
{
	struct bus_config *c = calloc(1, sizeof(*c));

	if (!c)
		return NULL;
	list_init(&c->listen);
	list_init(&c->auth);
	list_init(&c->conf_dirs);
	list_init(&c->files);
	list_init(&c->servicedirs);
	list_init(&c->rules);
	list_init(&c->associations);
	list_init(&c->warnings);
	bus_config_limits_init(&c->limits);
	return c;
}

void conf_rule_free(struct bus_policy_rule *rule)
{
	free(rule->interface);
	free(rule->member);
	free(rule->error);
	free(rule->path);
	free(rule->name);
	free(rule);
}

static void associate_free(struct bus_config_associate *a)
{
	free(a->own);
	free(a->context);
	free(a);
}

struct bus_config *bus_config_free(struct bus_config *c)
{
	struct bus_policy_rule *rule, *rt;
	struct bus_config_associate *a, *at;

	if (!c)
		return NULL;
	free(c->type);
	free(c->user);
	free(c->pidfile);
	free(c->servicehelper);
	bus_config_strings_clear(&c->listen);
	bus_config_strings_clear(&c->auth);
	bus_config_strings_clear(&c->conf_dirs);
	bus_config_servicedirs_clear(&c->servicedirs);
	list_for_each_entry_safe(rule, rt, &c->rules, link) {
		list_unlink(&rule->link);
		conf_rule_free(rule);
	}
	list_for_each_entry_safe(a, at, &c->associations, link) {
		list_unlink(&a->link);
		associate_free(a);
	}
	bus_config_strings_clear(&c->warnings);
	/* Last: rules and strings point at these names. */
	bus_config_strings_clear(&c->files);
	free(c);
	return NULL;
}

static void replace_str(char **dst, char **src)
{
	if (*src) {
		free(*dst);
		*dst = steal_ptr(*src);
	}
}

/* Merge the fragment of a successfully parsed include into its parent. */
static void config_merge(struct bus_config *to, struct bus_config *from)
{
	struct bus_config_servicedir *d, *dt;
	struct bus_config_associate *a, *at, *old, *ot;

	replace_str(&to->type, &from->type);
	replace_str(&to->user, &from->user);
	replace_str(&to->pidfile, &from->pidfile);
	replace_str(&to->servicehelper, &from->servicehelper);
	to->fork |= from->fork;
	to->keep_umask |= from->keep_umask;
	to->syslog |= from->syslog;
	to->allow_anonymous |= from->allow_anonymous;
	if (from->apparmor != BUS_CONFIG_APPARMOR_UNSET)
		to->apparmor = from->apparmor;
	to->limits = from->limits;

	list_splice_tail(&to->files, &from->files);
	list_splice_tail(&to->listen, &from->listen);
	list_splice_tail(&to->auth, &from->auth);
	list_splice_tail(&to->conf_dirs, &from->conf_dirs);
	list_splice_tail(&to->rules, &from->rules);
	list_splice_tail(&to->warnings, &from->warnings);

	list_for_each_entry_safe(d, dt, &from->servicedirs, link) {
		list_unlink(&d->link);
		if (conf_servicedirs_contain(&to->servicedirs, d->path))
			free(d);
		else
			list_append(&to->servicedirs, &d->link);
	}

	/* dbus-daemon keeps associations in a hash: a later one replaces. */
	list_for_each_entry_safe(a, at, &from->associations, link) {
		list_unlink(&a->link);
		list_for_each_entry_safe(old, ot, &to->associations, link) {
			if (strcmp(old->own, a->own) == 0) {
				list_unlink(&old->link);
				associate_free(old);
			}
		}
		list_append(&to->associations, &a->link);
	}
}

/* ------------------------------------------------------------------ */
/* errors and warnings                                                  */

int conf_parser_fail_errno(struct file_parser *p, int r)
{
	if (p->r == 0)
		p->r = r;
	XML_StopParser(p->xml, XML_FALSE);
	return p->r;
}

/* Record the first error of this file and stop the XML parser. */
int conf_parser_fail(struct file_parser *p, unsigned int line, const char *fmt, ...)
{
	_cleanup_free_ char *msg = NULL;
	va_list ap;

	if (p->r != 0)
		return p->r;
	va_start(ap, fmt);
	msg = conf_vstrdup_printf(fmt, ap);
	va_end(ap);
	if (!msg)
		return conf_parser_fail_errno(p, -ENOMEM);
	p->error = line ? conf_strdup_printf("%s:%u: %s", p->path, line, msg)
			: conf_strdup_printf("%s: %s", p->path, msg);
	if (!p->error)
		return conf_parser_fail_errno(p, -ENOMEM);
	return conf_parser_fail_errno(p, BUS_CONFIG_E_INVALID);
}

/* Adopt an error produced while including another file. */
static int parser_fail_take(struct file_parser *p, int r, char **error)
{
	if (p->r == 0 && r > 0) {
		p->error = steal_ptr(*error);
	}
	free(*error);
	*error = NULL;
	return conf_parser_fail_errno(p, r);
}

static int config_warn_str(struct bus_config *c, const struct bus_config_options *opts,
			   const char *msg)
{
	if (opts && opts->warn)
		opts->warn(opts->userdata, msg);
	return conf_strings_append(&c->warnings, NULL, 0, msg);
}

int conf_parser_warn(struct file_parser *p, unsigned int line, const char *fmt, ...)
{
	_cleanup_free_ char *msg = NULL, *full = NULL;
	va_list ap;
	int r;

	va_start(ap, fmt);
	msg = conf_vstrdup_printf(fmt, ap);
	va_end(ap);
	if (!msg)
		return conf_parser_fail_errno(p, -ENOMEM);
	full = conf_strdup_printf("%s:%u: %s", p->path, line, msg);
	if (!full)
		return conf_parser_fail_errno(p, -ENOMEM);
	r = config_warn_str(p->config, p->loader->opts, full);
	if (r < 0)
		return conf_parser_fail_errno(p, r);
	return 0;
}

/* ------------------------------------------------------------------ */
/* attributes                                                           */

/*
 * Find the attributes named in @names (NULL-terminated) in expat's @atts
 * and store their values at the same index of @values. Any other attribute
 * is an error, as in dbus-daemon.
 */
int conf_locate_attributes(struct file_parser *p, unsigned int line, const char *element,
			     const char **atts, const char *const *names, const char **values)
{
	size_t n;

	for (n = 0; names[n]; n++)
		values[n] = NULL;
	for (size_t i = 0; atts[i]; i += 2) {
		size_t j;

		for (j = 0; j < n; j++)
			if (strcmp(atts[i], names[j]) == 0)
				break;
		if (j == n)
			return conf_parser_fail(p, line,
					   "Attribute \"%s\" is invalid on <%s> element in this context",
					   atts[i], element);
		/* expat already rejects duplicate attributes; keep the check cheap. */
		if (values[j])
			return conf_parser_fail(p, line,
					   "Attribute \"%s\" repeated twice on the same <%s> element",
					   atts[i], element);
		values[j] = atts[i + 1];
	}
	return 0;
}

static int check_no_attributes(struct file_parser *p, unsigned int line, const char *element,
			       const char **atts)
{
	if (atts[0])
		return conf_parser_fail(p, line,
				   "Attribute \"%s\" is invalid on <%s> element in this context",
				   atts[0], element);
	return 0;
}

/* "yes"/"no" attributes of <include>. */
static int parse_yes_no(struct file_parser *p, unsigned int line, const char *attr,
			const char *value, bool *out)
{
	if (!value)
		return 0;
	if (strcmp(value, "yes") == 0)
		*out = true;
	else if (strcmp(value, "no") == 0)
		*out = false;
	else
		return conf_parser_fail(p, line, "%s attribute must have value \"yes\" or \"no\"", attr);
	return 0;
}

int conf_parse_true_false(struct file_parser *p, unsigned int line, const char *attr,
			    const char *value, enum bus_tristate *out)
{
	if (!value)
		return 0;
	if (strcmp(value, "true") == 0)
		*out = BUS_TRISTATE_TRUE;
	else if (strcmp(value, "false") == 0)
		*out = BUS_TRISTATE_FALSE;
	else
		return conf_parser_fail(p, line,
				   "Bad value \"%s\" for %s attribute, must be true or false",
				   value, attr);
	return 0;
}

/* A complete decimal integer (optional sign); false on garbage or overflow. */
static bool parse_int64(const char *s, int64_t *out)
{
	char *end;
	long long v;

	if (!*s)
		return false;
	errno = 0;
	v = strtoll(s, &end, 10);
	if (errno != 0 || *end != '\0' || end == s || s[0] == ' ' || s[0] == '\t' ||
	    s[0] == '\n' || s[0] == '\r')
		return false;
	*out = v;
	return true;
}

int conf_parse_fds_attribute(struct file_parser *p, unsigned int line, const char *attr,
			       const char *value, uint32_t def, uint32_t *out)
{
	int64_t v;

	*out = def;
	if (!value)
		return 0;
	if (!parse_int64(value, &v) || v < 0 || v > BUS_POLICY_MAX_FDS)
		return conf_parser_fail(p, line,
				   "Bad value \"%s\" for %s attribute, must be an integer in range %u to %u inclusive",
				   value, attr, 0U, BUS_POLICY_MAX_FDS);
	*out = (uint32_t)v;
	return 0;
}

bool conf_is_wildcard(const char *s)
{
	return s && s[0] == '*' && s[1] == '\0';
}

int conf_dup_or_null(const char *s, char **out)
{
	*out = NULL;
	if (!s || conf_is_wildcard(s))
		return 0;
	*out = strdup(s);
	return *out ? 0 : -ENOMEM;
}

/* ------------------------------------------------------------------ */
/* element start                                                        */

static enum element_type element_from_name(const char *name)
{
	for (int i = EL_BUSCONFIG; i < _EL_N; i++)
		if (strcmp(element_names[i], name) == 0)
			return i;
	return EL_NONE;
}

static int start_policy(struct file_parser *p, struct element *e, const char **atts)
{
	static const char *const names[] = { "context", "user", "group", "at_console", NULL };
	const char *v[4];
	int r, n;

	r = conf_locate_attributes(p, e->line, "policy", atts, names, v);
	if (r)
		return r;
	n = !!v[0] + !!v[1] + !!v[2] + !!v[3];
	if (n != 1)
		return conf_parser_fail(p, e->line,
				   "<policy> element must have exactly one of (context|user|group|at_console) attributes");

	if (v[0]) {
		if (strcmp(v[0], "default") == 0)
			e->policy.scope = BUS_POLICY_SCOPE_DEFAULT;
		else if (strcmp(v[0], "mandatory") == 0)
			e->policy.scope = BUS_POLICY_SCOPE_MANDATORY;
		else
			return conf_parser_fail(p, e->line,
					   "context attribute on <policy> must have the value \"default\" or \"mandatory\", not \"%s\"",
					   v[0]);
	} else if (v[1] || v[2]) {
		bool user = v[1] != NULL;

		e->policy.scope = user ? BUS_POLICY_SCOPE_USER : BUS_POLICY_SCOPE_GROUP;
		r = user ? conf_lookup_user(v[1], &e->policy.id)
			 : conf_lookup_group(v[2], &e->policy.id);
		if (r < 0)
			return conf_parser_fail_errno(p, r);
		if (r == CONF_LOOKUP_E_UNKNOWN) {
			e->policy.ignored = true;
			return conf_parser_warn(p, e->line,
					   "Unknown %s \"%s\" in message bus configuration file",
					   user ? "username" : "group", user ? v[1] : v[2]);
		}
	} else {
		e->policy.scope = BUS_POLICY_SCOPE_CONSOLE;
		if (strcmp(v[3], "true") == 0)
			e->policy.id = 1;
		else if (strcmp(v[3], "false") == 0)
			e->policy.id = 0;
		else
			return conf_parser_fail(p, e->line,
					   "Unknown value \"%s\" for at_console in message bus configuration file",
					   v[3]);
	}
	return 0;
}

static int start_busconfig_child(struct file_parser *p, struct element *e, const char *name,
				 const char **atts)
{
	int r;

	e->type = element_from_name(name);
	switch (e->type) {
	case EL_USER:
	case EL_TYPE:
	case EL_PIDFILE:
	case EL_LISTEN:
	case EL_AUTH:
	case EL_SERVICEHELPER:
	case EL_INCLUDEDIR:
	case EL_SERVICEDIR:
	case EL_SELINUX:
		return check_no_attributes(p, e->line, name, atts);
	case EL_FORK:
	case EL_SYSLOG:
	case EL_KEEP_UMASK:
	case EL_ALLOW_ANONYMOUS:
		r = check_no_attributes(p, e->line, name, atts);
		if (r)
			return r;
		if (e->type == EL_FORK)
			p->config->fork = true;
		else if (e->type == EL_SYSLOG)
			p->config->syslog = true;
		else if (e->type == EL_KEEP_UMASK)
			p->config->keep_umask = true;
		else
			p->config->allow_anonymous = true;
		return 0;
	case EL_STANDARD_SESSION_SERVICEDIRS:
	case EL_STANDARD_SYSTEM_SERVICEDIRS:
		r = check_no_attributes(p, e->line, name, atts);
		if (r)
			return r;
		r = e->type == EL_STANDARD_SESSION_SERVICEDIRS
			? bus_config_standard_session_servicedirs(&p->config->servicedirs)
			: bus_config_standard_system_servicedirs(&p->config->servicedirs);
		return r < 0 ? conf_parser_fail_errno(p, r) : 0;
	case EL_INCLUDE: {
		static const char *const names[] = { "ignore_missing", "if_selinux_enabled",
						     "selinux_root_relative", NULL };
		const char *v[3];

		r = conf_locate_attributes(p, e->line, name, atts, names, v);
		if (r)
			return r;
		if (parse_yes_no(p, e->line, "ignore_missing", v[0], &e->include.ignore_missing) ||
		    parse_yes_no(p, e->line, "if_selinux_enabled", v[1],
				 &e->include.if_selinux_enabled) ||
		    parse_yes_no(p, e->line, "selinux_root_relative", v[2],
				 &e->include.selinux_root_relative))
			return p->r;
		return 0;
	}
	case EL_POLICY:
		return start_policy(p, e, atts);
	case EL_LIMIT: {
		static const char *const names[] = { "name", NULL };
		const char *v[1];

		r = conf_locate_attributes(p, e->line, name, atts, names, v);
		if (r)
			return r;
		if (!v[0])
			return conf_parser_fail(p, e->line,
					   "<limit> element must have a \"name\" attribute");
		e->limit.name = strdup(v[0]);
		return e->limit.name ? 0 : conf_parser_fail_errno(p, -ENOMEM);
	}
	case EL_APPARMOR: {
		static const char *const names[] = { "mode", NULL };
		const char *v[1];

		r = conf_locate_attributes(p, e->line, name, atts, names, v);
		if (r)
			return r;
		if (!v[0])
			return 0;
		if (strcmp(v[0], "enabled") == 0)
			p->config->apparmor = BUS_CONFIG_APPARMOR_ENABLED;
		else if (strcmp(v[0], "disabled") == 0)
			p->config->apparmor = BUS_CONFIG_APPARMOR_DISABLED;
		else if (strcmp(v[0], "required") == 0)
			p->config->apparmor = BUS_CONFIG_APPARMOR_REQUIRED;
		else
			return conf_parser_fail(p, e->line,
					   "Mode attribute on <apparmor> must have value \"required\", \"enabled\" or \"disabled\", not \"%s\"",
					   v[0]);
		return 0;
	}
	default:
		e->type = EL_NONE;
		return conf_parser_fail(p, e->line,
				   "Element <%s> not allowed inside <%s> in configuration file",
				   name, "busconfig");
	}
}

static int start_associate(struct file_parser *p, unsigned int line, const char **atts)
{
	static const char *const names[] = { "own", "context", NULL };
	struct bus_config_associate *a, *old, *t;
	const char *v[2];
	int r;

	r = conf_locate_attributes(p, line, "associate", atts, names, v);
	if (r)
		return r;
	if (!v[0] || !v[1])
		return conf_parser_fail(p, line,
				   "Element <associate> must have attributes own=\"<servicename>\" and context=\"<selinux context>\"");
	a = calloc(1, sizeof(*a));
	if (!a)
		return conf_parser_fail_errno(p, -ENOMEM);
	a->own = strdup(v[0]);
	a->context = strdup(v[1]);
	if (!a->own || !a->context) {
		associate_free(a);
		return conf_parser_fail_errno(p, -ENOMEM);
	}
	list_for_each_entry_safe(old, t, &p->config->associations, link) {
		if (strcmp(old->own, a->own) == 0) {
			list_unlink(&old->link);
			associate_free(old);
		}
	}
	list_append(&p->config->associations, &a->link);
	return 0;
}

static bool text_is_whitespace(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (s[i] != ' ' && s[i] != '\t' && s[i] != '\n' && s[i] != '\r')
			return false;
	return true;
}

/* Text seen inside an element that takes none must be whitespace. */
static int flush_text(struct file_parser *p)
{
	struct element *top;

	if (p->n_text == 0)
		return 0;
	top = p->n_stack ? &p->stack[p->n_stack - 1] : NULL;
	if (top && !element_takes_content(top->type) && !text_is_whitespace(p->text, p->n_text))
		return conf_parser_fail(p, XML_GetCurrentLineNumber(p->xml),
				   "No text content expected inside XML element %s in configuration file",
				   element_names[top->type]);
	if (!top || !element_takes_content(top->type))
		p->n_text = 0;
	return 0;
}

static void XMLCALL on_start(void *userdata, const XML_Char *name, const XML_Char **atts)
{
	struct file_parser *p = userdata;
	unsigned int line = XML_GetCurrentLineNumber(p->xml);
	enum element_type parent;
	struct element *e;

	if (p->r)
		return;
	parent = p->n_stack ? p->stack[p->n_stack - 1].type : EL_NONE;
	if (parent != EL_NONE && element_takes_content(parent)) {
		conf_parser_fail(p, line, "Element <%s> is not allowed in this context", name);
		return;
	}
	if (flush_text(p))
		return;
	if (p->n_stack >= STACK_MAX) {
		conf_parser_fail(p, line, "Element <%s> is not allowed in this context", name);
		return;
	}

	e = &p->stack[p->n_stack++];
	memset(e, 0, sizeof(*e));
	e->type = EL_NONE;
	e->line = line;

	switch (parent) {
	case EL_NONE:
		if (strcmp(name, "busconfig") != 0) {
			conf_parser_fail(p, line, "Unknown element <%s> at root of configuration file",
				    name);
			return;
		}
		e->type = EL_BUSCONFIG;
		check_no_attributes(p, line, name, atts);
		return;
	case EL_BUSCONFIG:
		start_busconfig_child(p, e, name, atts);
		return;
	case EL_POLICY:
		if (strcmp(name, "allow") == 0 || strcmp(name, "deny") == 0) {
			bool allow = name[0] == 'a';

			e->type = allow ? EL_ALLOW : EL_DENY;
			conf_parse_rule(p, line, name, allow, atts, &p->stack[p->n_stack - 2]);
			return;
		}
		conf_parser_fail(p, line, "Element <%s> not allowed inside <%s> in configuration file",
			    name, "policy");
		return;
	case EL_SELINUX:
		if (strcmp(name, "associate") == 0) {
			e->type = EL_ASSOCIATE;
			start_associate(p, line, atts);
			return;
		}
		conf_parser_fail(p, line, "Element <%s> not allowed inside <%s> in configuration file",
			    name, "selinux");
		return;
	default:
		conf_parser_fail(p, line, "Element <%s> is not allowed in this context", name);
		return;
	}
}

/* ------------------------------------------------------------------ */
/* element end: the leaf values                                         */

struct limit_def {
	const char *name;
	size_t offset;		/* in struct bus_config_limits, or SIZE_MAX: ignored */
	bool is_int;		/* dbus-daemon stores it in an int */
};

#define LIMIT(n, i) { #n, offsetof(struct bus_config_limits, n), i }
static const struct limit_def limit_defs[] = {
	LIMIT(max_incoming_bytes, false),
	LIMIT(max_incoming_unix_fds, false),
	LIMIT(max_outgoing_bytes, false),
	LIMIT(max_outgoing_unix_fds, false),
	LIMIT(max_message_size, false),
	LIMIT(max_message_unix_fds, false),
	LIMIT(service_start_timeout, true),
	LIMIT(auth_timeout, true),
	LIMIT(pending_fd_timeout, true),
	LIMIT(reply_timeout, true),
	LIMIT(max_completed_connections, true),
	LIMIT(max_incomplete_connections, true),
	LIMIT(max_connections_per_user, true),
	LIMIT(max_pending_service_starts, true),
	LIMIT(max_names_per_connection, true),
	LIMIT(max_match_rules_per_connection, true),
	LIMIT(max_replies_per_connection, true),
	/* The Containers1 draft's (broker/containers/container.h). */
	LIMIT(max_containers, true),
	LIMIT(max_containers_per_user, true),
	LIMIT(max_container_metadata_bytes, true),
	LIMIT(max_connections_per_container, true),
	/* bus1-broker's: the calls an instance's connections await, together. */
	LIMIT(max_replies_per_container, true),
};
#undef LIMIT

static int end_limit(struct file_parser *p, struct element *e, const char *text)
{
	const struct limit_def *def = NULL;
	int64_t v;

	if (!parse_int64(text, &v))
		return conf_parser_fail(p, e->line,
				   "<limit name=\"%s\"> element has invalid value (could not parse as integer)",
				   e->limit.name);
	for (size_t i = 0; i < ARRAY_SIZE(limit_defs); i++)
		if (strcmp(limit_defs[i].name, e->limit.name) == 0)
			def = &limit_defs[i];
	if (!def)
		return conf_parser_fail(p, e->line, "There is no limit called \"%s\"", e->limit.name);
	if (v < 0)
		return conf_parser_fail(p, e->line, "<limit name=\"%s\"> must be a positive number",
				   e->limit.name);
	if (def->is_int && v > INT32_MAX)
		return conf_parser_fail(p, e->line, "<limit name=\"%s\"> value is too large",
				   e->limit.name);
	if (def->offset != SIZE_MAX)
		*(int64_t *)((char *)&p->config->limits + def->offset) = v;
	return 0;
}

static int include_one(struct file_parser *p, unsigned int line, const char *path,
		       bool ignore_missing, bool from_dir)
{
	_cleanup_(bus_config_freep) struct bus_config *frag = NULL;
	_cleanup_free_ char *error = NULL;
	int r;

	frag = config_new();
	if (!frag)
		return conf_parser_fail_errno(p, -ENOMEM);
	/* Limits flow through includes in file order. */
	frag->limits = p->config->limits;

	r = parse_file(p->loader, p, path, NULL, 0, frag, line, &error);
	if (r == -ENOENT && ignore_missing)
		return 0;
	if (r < 0 && r != -ENOENT)
		return conf_parser_fail_errno(p, r);
	if (r == -ENOENT)
		r = BUS_CONFIG_E_INVALID;	/* error already formatted */

	if (r == 0) {
		config_merge(p->config, frag);
		return 0;
	}
	if (from_dir) {
		/*
		 * dbus-daemon logs a broken file from an <includedir> and goes
		 * on without it; its warnings are kept.
		 */
		list_splice_tail(&p->config->warnings, &frag->warnings);
		r = config_warn_str(p->config, p->loader->opts, error);
		return r < 0 ? conf_parser_fail_errno(p, r) : 0;
	}
	return parser_fail_take(p, r, &error);
}

static int end_includedir(struct file_parser *p, struct element *e, const char *dir)
{
	DIR *d;
	struct dirent *de;
	char **names = NULL;
	size_t n = 0, sz = 0;
	int r = 0;

	d = opendir(dir);
	if (!d) {
		if (errno == ENOENT)
			return 0;	/* a missing <includedir> is fine */
		return conf_parser_fail(p, e->line, "Failed to open directory \"%s\": %s", dir,
				   strerror(errno));
	}
	while ((errno = 0, de = readdir(d))) {
		size_t l = strlen(de->d_name);

		if (l < 5 || strcmp(de->d_name + l - 5, ".conf") != 0)
			continue;
		if (n == sz) {
			char **t;

			if (n >= FILES_MAX) {
				r = conf_parser_fail(p, e->line, "Too many files in directory \"%s\"",
						dir);
				goto out;
			}
			sz = sz ? sz * 2 : 16;
			t = realloc(names, sz * sizeof(*names));
			if (!t) {
				r = conf_parser_fail_errno(p, -ENOMEM);
				goto out;
			}
			names = t;
		}
		names[n] = strdup(de->d_name);
		if (!names[n]) {
			r = conf_parser_fail_errno(p, -ENOMEM);
			goto out;
		}
		n++;
	}
	if (errno) {
		r = conf_parser_fail(p, e->line, "Failed to read directory \"%s\": %s", dir,
				strerror(errno));
		goto out;
	}

	/* dbus-daemon uses readdir() order; sorting makes the result reproducible. */
	if (n)
		qsort(names, n, sizeof(*names), strcmp_ptr);
	for (size_t i = 0; i < n && !r; i++) {
		_cleanup_free_ char *path = conf_path_join(dir, names[i]);

		if (!path) {
			r = conf_parser_fail_errno(p, -ENOMEM);
			break;
		}
		r = include_one(p, e->line, path, true, true);
	}
	if (!r) {
		r = conf_strings_append(&p->config->conf_dirs, p->path, e->line, dir);
		if (r < 0)
			r = conf_parser_fail_errno(p, r);
	}
out:
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	free(names);
	closedir(d);
	return r;
}

static int set_string(struct file_parser *p, char **dst, const char *value)
{
	char *s = strdup(value);

	if (!s)
		return conf_parser_fail_errno(p, -ENOMEM);
	free(*dst);
	*dst = s;
	return 0;
}

static int end_leaf(struct file_parser *p, struct element *e, const char *text)
{
	_cleanup_free_ char *path = NULL;
	int r;

	switch (e->type) {
	case EL_USER:
		return set_string(p, &p->config->user, text);
	case EL_TYPE:
		return set_string(p, &p->config->type, text);
	case EL_PIDFILE:
		return set_string(p, &p->config->pidfile, text);
	case EL_LISTEN:
		r = conf_strings_append(&p->config->listen, p->path, e->line, text);
		return r < 0 ? conf_parser_fail_errno(p, r) : 0;
	case EL_AUTH:
		r = conf_strings_append(&p->config->auth, p->path, e->line, text);
		return r < 0 ? conf_parser_fail_errno(p, r) : 0;
	case EL_SERVICEHELPER:
		path = conf_path_join(p->basedir, text);
		if (!path)
			return conf_parser_fail_errno(p, -ENOMEM);
		free(p->config->servicehelper);
		p->config->servicehelper = steal_ptr(path);
		return 0;
	case EL_SERVICEDIR:
		path = conf_path_join(p->basedir, text);
		if (!path)
			return conf_parser_fail_errno(p, -ENOMEM);
		r = conf_servicedirs_append(&p->config->servicedirs, path, 0);
		return r < 0 ? conf_parser_fail_errno(p, r) : 0;
	case EL_INCLUDEDIR:
		path = conf_path_join(p->basedir, text);
		if (!path)
			return conf_parser_fail_errno(p, -ENOMEM);
		return end_includedir(p, e, path);
	case EL_INCLUDE: {
		const struct bus_config_options *o = p->loader->opts;

		if (e->include.if_selinux_enabled && !(o && o->selinux_enabled))
			return 0;
		if (e->include.selinux_root_relative) {
			if (!o || !o->selinux_root)
				return conf_parser_fail(p, e->line,
						   "Could not determine SELinux policy root for relative inclusion");
			path = conf_path_join(o->selinux_root, text);
		} else {
			path = conf_path_join(p->basedir, text);
		}
		if (!path)
			return conf_parser_fail_errno(p, -ENOMEM);
		return include_one(p, e->line, path, e->include.ignore_missing, false);
	}
	case EL_LIMIT:
		return end_limit(p, e, text);
	default:
		return 0;
	}
}

static void XMLCALL on_end(void *userdata, const XML_Char *name)
{
	struct file_parser *p = userdata;
	struct element *e;

	if (p->r || p->n_stack == 0)
		return;
	e = &p->stack[p->n_stack - 1];

	if (element_takes_content(e->type)) {
		char *s = p->text, *end = p->text + p->n_text;

		/* Unlike dbus-daemon, surrounding whitespace is not part of a value. */
		while (s < end && (*s == ' ' || *s == '\t' || *s == '\n' || *s == '\r'))
			s++;
		while (end > s && (end[-1] == ' ' || end[-1] == '\t' || end[-1] == '\n' ||
				   end[-1] == '\r'))
			end--;
		if (s == end) {
			conf_parser_fail(p, e->line,
				    "XML element <%s> was expected to have content inside it",
				    element_names[e->type]);
			return;
		}
		if (memchr(s, '\0', end - s)) {
			conf_parser_fail(p, e->line, "XML element <%s> contains a NUL character",
				    element_names[e->type]);
			return;
		}
		*end = '\0';
		p->n_text = 0;
		end_leaf(p, e, s);
	} else if (flush_text(p)) {
		return;
	}
	if (e->type == EL_LIMIT)
		free(e->limit.name);
	p->n_stack--;
}

static void XMLCALL on_text(void *userdata, const XML_Char *s, int len)
{
	struct file_parser *p = userdata;

	if (p->r || len <= 0)
		return;
	/* +1 keeps room for the terminating NUL of a leaf value. */
	if (p->n_text + len + 1 > p->sz_text) {
		size_t sz = MAX(p->sz_text * 2, p->n_text + len + 1);
		char *t;

		if (sz < 256)
			sz = 256;
		t = realloc(p->text, sz);
		if (!t) {
			conf_parser_fail_errno(p, -ENOMEM);
			return;
		}
		p->text = t;
		p->sz_text = sz;
	}
	memcpy(p->text + p->n_text, s, len);
	p->n_text += len;
}

/* ------------------------------------------------------------------ */
/* one file                                                             */

static int parse_file(struct loader *loader, struct file_parser *parent, const char *path,
		      const void *data, size_t size, struct bus_config *config,
		      unsigned int line_in_parent, char **errorp)
{
	_cleanup_free_ char *buf = NULL, *where = NULL;
	struct file_parser p = {
		.loader = loader,
		.parent = parent,
		.config = config,
		.depth = parent ? parent->depth + 1 : 0,
	};
	struct bus_config_string *file;
	int r;

	/* Messages about opening an include are located at the <include>. */
	if (parent)
		where = conf_strdup_printf("%s:%u", parent->path, line_in_parent);
	else
		where = strdup(path);
	if (!where)
		return -ENOMEM;

	if (!data) {
		r = conf_read_file(path, BUS_CONFIG_FILE_MAX, &buf, &size, &p.dev, &p.ino);
		if (r == -ENOMEM)
			return r;
		if (r < 0) {
			*errorp = conf_strdup_printf("%s: Failed to open \"%s\": %s", where, path,
						     conf_strerror(r));
			if (!*errorp)
				return -ENOMEM;
			return r == -ENOENT ? -ENOENT : BUS_CONFIG_E_INVALID;
		}
		data = buf;
	} else if (size > BUS_CONFIG_FILE_MAX) {
		*errorp = conf_strdup_printf("%s: Failed to open \"%s\": File too large", where,
					     path);
		return *errorp ? BUS_CONFIG_E_INVALID : -ENOMEM;
	}

	for (struct file_parser *q = parent; q; q = q->parent) {
		if ((q->ino != 0 || q->dev != 0) && q->dev == p.dev && q->ino == p.ino &&
		    p.ino != 0) {
			*errorp = conf_strdup_printf("%s: Circular inclusion of file '%s'", where,
						     path);
			return *errorp ? BUS_CONFIG_E_INVALID : -ENOMEM;
		}
	}
	loader->n_bytes += size;
	if (loader->n_bytes > TOTAL_BYTES_MAX) {
		*errorp = conf_strdup_printf("%s: Configuration too large at '%s' (more than %llu bytes in all files)",
					     where, path, TOTAL_BYTES_MAX);
		return *errorp ? BUS_CONFIG_E_INVALID : -ENOMEM;
	}
	if (p.depth > BUS_CONFIG_INCLUDE_DEPTH_MAX || ++loader->n_files > FILES_MAX) {
		*errorp = conf_strdup_printf("%s: Too many nested or included files at '%s'", where,
					     path);
		return *errorp ? BUS_CONFIG_E_INVALID : -ENOMEM;
	}

	r = conf_strings_append(&config->files, NULL, 0, path);
	if (r < 0)
		return r;
	file = list_entry(config->files.prev, struct bus_config_string, link);
	p.path = file->str;
	p.basedir = conf_dirname(path);
	if (!p.basedir)
		return -ENOMEM;

	p.xml = XML_ParserCreate("UTF-8");
	if (!p.xml) {
		free(p.basedir);
		return -ENOMEM;
	}
	XML_SetUserData(p.xml, &p);
	XML_SetElementHandler(p.xml, on_start, on_end);
	XML_SetCharacterDataHandler(p.xml, on_text);

	if (XML_Parse(p.xml, data, (int)size, XML_TRUE) == XML_STATUS_ERROR && p.r == 0) {
		enum XML_Error e = XML_GetErrorCode(p.xml);

		if (e == XML_ERROR_NO_MEMORY)
			conf_parser_fail_errno(&p, -ENOMEM);
		else
			conf_parser_fail(&p, XML_GetCurrentLineNumber(p.xml), "XML error: %s (column %lu)",
				    XML_ErrorString(e),
				    (unsigned long)XML_GetCurrentColumnNumber(p.xml));
	}
	if (p.r == 0 && p.n_stack != 0)
		conf_parser_fail(&p, 0, "Element <%s> was not closed in configuration file",
			    element_names[p.stack[p.n_stack - 1].type]);
	if (p.r == 0 && !parent && list_is_empty(&config->listen) &&
	    !(loader->opts && loader->opts->no_listen_ok))
		conf_parser_fail(&p, 0,
			    "Configuration file needs one or more <listen> elements giving addresses");

	for (unsigned int i = 0; i < p.n_stack; i++)
		if (p.stack[i].type == EL_LIMIT)
			free(p.stack[i].limit.name);
	XML_ParserFree(p.xml);
	free(p.basedir);
	free(p.text);

	if (p.r > 0)
		*errorp = steal_ptr(p.error);
	free(p.error);
	return p.r;
}

static int load(struct bus_config **configp, const char *path, const void *data, size_t size,
		const struct bus_config_options *opts, char **errorp)
{
	_cleanup_(bus_config_freep) struct bus_config *c = NULL;
	_cleanup_free_ char *error = NULL;
	struct loader loader = { .opts = opts };
	int r;

	c = config_new();
	if (!c)
		return -ENOMEM;
	r = parse_file(&loader, NULL, path, data, size, c, 0, &error);
	if (r == -ENOENT)
		r = BUS_CONFIG_E_INVALID;
	if (r) {
		if (r > 0 && errorp)
			*errorp = steal_ptr(error);
		return r;
	}
	*configp = steal_ptr(c);
	return 0;
}

int bus_config_load(struct bus_config **configp, const char *path,
		    const struct bus_config_options *opts, char **errorp)
{
	return load(configp, path, NULL, 0, opts, errorp);
}

int bus_config_load_buffer(struct bus_config **configp, const void *data, size_t size,
			   const char *path, const struct bus_config_options *opts,
			   char **errorp)
{
	/* A zero-length buffer still goes through the buffer path. */
	static const char empty[1];

	return load(configp, path, data ? data : empty, size, opts, errorp);
}
