/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The filter of a container instance: xdg-dbus-proxy's rules, compiled, and
 * what each filtered connection learned. See container-filter.h; the facts
 * followed are in docs/containers-reference.md part B.
 */

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "broker/core/bus.h"
#include "broker/core/bus-journal.h"
#include "broker/containers/container.h"
#include "broker/containers/container-filter.h"
#include "broker/objects/match.h"
#include "broker/objects/name.h"
#include "broker/objects/peer.h"
#include "broker/objects/state.h"
#include "dbus-compat/message.h"
#include "dbus-compat/native-protocol.h"
#include "dbus-compat/protocol.h"
#include "dbus-compat/validate.h"
#include "util/macro.h"

/* ------------------------------------------------------------ the rules */

static void filter_rule_deinit(struct filter_rule *rule)
{
	free(rule->name);
	free(rule->path);
	free(rule->interface);
	free(rule->member);
}

/* NAME or NAME.*: the name, and whether it is a subtree. */
static int rule_set_name(struct filter_rule *rule, const char *name, size_t n)
{
	if (n >= 2 && name[n - 2] == '.' && name[n - 1] == '*') {
		rule->subtree = true;
		n -= 2;
	}
	rule->name = strndup(name, n);
	return rule->name ? 0 : -ENOMEM;
}

/*
 * RULE of --call/--broadcast: [METHOD][@PATH]. METHOD is split at its last
 * dot into interface and member ("*" as member: any); without a dot it is
 * an interface; empty or starting with "*": anything. PATH ending in "/ *"
 * is a subtree. As xdg-dbus-proxy reads it, nothing is validated.
 */
static int rule_set_match(struct filter_rule *rule, const char *text)
{
	const char *at = strchr(text, '@');
	size_t n_method = at ? (size_t)(at - text) : strlen(text);

	if (at && at[1]) {
		size_t n = strlen(at + 1);

		if (n >= 2 && at[n - 1] == '/' && at[n] == '*') {
			rule->path_subtree = true;
			n -= 2;
		}
		rule->path = strndup(at + 1, n);
		if (!rule->path)
			return -ENOMEM;
	}
	if (n_method && text[0] != '*') {
		const char *dot = memrchr(text, '.', n_method);
		size_t n_iface = dot ? (size_t)(dot - text) : n_method;

		rule->interface = strndup(text, n_iface);
		if (!rule->interface)
			return -ENOMEM;
		if (dot && !(n_method - n_iface - 1 == 1 && dot[1] == '*')) {
			rule->member = strndup(dot + 1, n_method - n_iface - 1);
			if (!rule->member)
				return -ENOMEM;
		}
	}
	return 0;
}

/* What filter_parse_option() made of an option, besides 0 (@rule is set). */
enum {
	_FILTER_OPTION_E_SUCCESS,
	FILTER_OPTION_E_INVALID,	/* not one we know, or bad */
	FILTER_OPTION_E_FLAG,		/* a flag of the filter (--sloppy-names, --log): no rule */
};

/* One option into @rule: 0, FILTER_OPTION_E_INVALID, FILTER_OPTION_E_FLAG, -ENOMEM. */
static int filter_parse_option(struct container_filter *f, struct filter_rule *rule,
			       const char *opt)
{
	static const struct {
		const char *prefix;
		uint8_t level;
	} levels[] = {
		{ "--see=", FILTER_SEE },
		{ "--talk=", FILTER_TALK },
		{ "--own=", FILTER_OWN },
	};
	const char *eq;
	size_t i;
	int r;

	for (i = 0; i < ARRAY_SIZE(levels); i++) {
		size_t n = strlen(levels[i].prefix);

		if (strncmp(opt, levels[i].prefix, n))
			continue;
		rule->level = levels[i].level;
		rule->types = FILTER_TYPE_ALL;
		r = rule_set_name(rule, opt + n, strlen(opt + n));
		if (r < 0)
			return r;
		/* xdg-dbus-proxy: a valid bus name, not a unique one. */
		if (rule->name[0] == ':' ||
		    !validate_bus_name(rule->name, strlen(rule->name)))
			return FILTER_OPTION_E_INVALID;
		return 0;
	}
	if (!strncmp(opt, "--call=", 7))
		rule->types = FILTER_TYPE_CALL;
	else if (!strncmp(opt, "--broadcast=", 12))
		rule->types = FILTER_TYPE_BROADCAST;
	else if (!strcmp(opt, "--sloppy-names")) {
		f->sloppy_names = true;
		return FILTER_OPTION_E_FLAG;
	} else if (!strcmp(opt, "--log")) {
		f->log = true;
		return FILTER_OPTION_E_FLAG;
	} else
		return FILTER_OPTION_E_INVALID;
	opt = strchr(opt, '=') + 1;
	eq = strchr(opt, '=');
	if (!eq)
		return FILTER_OPTION_E_INVALID;
	rule->level = FILTER_TALK;
	r = rule_set_name(rule, opt, (size_t)(eq - opt));
	if (r < 0)
		return r;
	return rule_set_match(rule, eq + 1);
}

int container_filter_new(struct container_filter **fp, const char *const *options, size_t n,
			 char **errtextp)
{
	struct container_filter *f;
	size_t i;
	int r;

	*errtextp = NULL;
	if (n > FILTER_MAX_OPTIONS)
		return asprintf(errtextp, "A filter has at most %d options", FILTER_MAX_OPTIONS) < 0
		       ? -ENOMEM : FILTER_E_INVALID;
	f = calloc(1, sizeof(*f));
	if (!f)
		return -ENOMEM;
	f->n_refs = 1;
	f->rules = calloc(n + 1, sizeof(*f->rules));
	f->options = calloc(n + 1, sizeof(*f->options));
	if (!f->rules || !f->options) {
		container_filter_unref(f);
		return -ENOMEM;
	}
	/* The bus itself is TALK, for every message (xdg-dbus-proxy adds it too). */
	f->rules[0] = (struct filter_rule){ .level = FILTER_TALK, .types = FILTER_TYPE_ALL };
	f->rules[0].name = strdup(DC_SERVICE_DBUS);
	f->n_rules = 1;
	if (!f->rules[0].name) {
		container_filter_unref(f);
		return -ENOMEM;
	}
	for (i = 0; i < n; i++) {
		struct filter_rule *rule = &f->rules[f->n_rules];
		size_t len = strlen(options[i]);

		if (len > FILTER_MAX_OPTION_LEN) {
			r = asprintf(errtextp, "Filter option %zu is longer than %d bytes", i,
				     FILTER_MAX_OPTION_LEN) < 0 ? -ENOMEM : FILTER_E_INVALID;
			container_filter_unref(f);
			return r;
		}
		f->options[f->n_options] = strdup(options[i]);
		if (!f->options[f->n_options]) {
			container_filter_unref(f);
			return -ENOMEM;
		}
		f->n_options++;
		f->n_bytes += len;
		r = filter_parse_option(f, rule, options[i]);
		if (r == FILTER_OPTION_E_FLAG)
			continue;	/* no rule */
		f->n_rules++;	/* freed with the filter, also when bad */
		if (r == FILTER_OPTION_E_INVALID)
			r = asprintf(errtextp, "Filter option '%s' is not understood "
				     "(xdg-dbus-proxy's --see=, --talk=, --own=, --call=, "
				     "--broadcast=, --sloppy-names, --log)", options[i]) < 0 ?
			    -ENOMEM : FILTER_E_INVALID;
		if (r) {
			container_filter_unref(f);
			return r;
		}
	}
	*fp = f;
	return 0;
}

struct container_filter *container_filter_ref(struct container_filter *f)
{
	if (f)
		f->n_refs++;
	return f;
}

struct container_filter *container_filter_unref(struct container_filter *f)
{
	size_t i;

	if (!f || --f->n_refs)
		return NULL;
	for (i = 0; i < f->n_rules; i++)
		filter_rule_deinit(&f->rules[i]);
	for (i = 0; i < f->n_options; i++)
		free(f->options[i]);
	free(f->rules);
	free(f->options);
	free(f);
	return NULL;
}

static void match_add(struct filter_match *m, size_t i, uint8_t level)
{
	m->bits[i / 64] |= UINT64_C(1) << (i % 64);
	if (level > m->level)
		m->level = level;
}

/*
 * xdg-dbus-proxy looks the name up, then each shorter prefix (cut at a
 * dot): the rules of the name itself all apply, those of a prefix only if
 * they are NAME.* rules. So org.foo.* matches org.foo and org.foo.a.b, not
 * org.foobar; org.foo matches only org.foo.
 */
void container_filter_match_name(const struct container_filter *f, const char *name,
				 struct filter_match *m)
{
	size_t i, n;

	*m = (struct filter_match){};
	if (!name) {
		/* No destination: the bus answers; TALK, everything. */
		m->level = FILTER_TALK;
		m->unrestricted = true;
		return;
	}
	n = strlen(name);
	for (i = 0; i < f->n_rules; i++) {
		const struct filter_rule *rule = &f->rules[i];
		size_t k = strlen(rule->name);

		if (k > n || memcmp(rule->name, name, k))
			continue;
		if (k == n || (rule->subtree && name[k] == '.'))
			match_add(m, i, rule->level);
	}
}

/* ------------------------------------------------------------- the views */

static uint64_t sight_hash(const struct peer *target)
{
	return hash_bytes(&target, sizeof(target));
}

static struct filter_sight *view_find(const struct filter_view *v, const struct peer *target)
{
	hmap_for_each_hash(n, &v->sights, sight_hash(target)) {
		struct filter_sight *s = container_of(n, struct filter_sight, node);

		if (s->target == target)
			return s;
	}
	return NULL;
}

static void sight_free(struct filter_sight *s)
{
	hmap_remove(&s->view->sights, &s->node);
	list_unlink(&s->target_link);
	free(s);
}

/*
 * The sights of one peer, hung on it (peer.h): when it goes, every view
 * forgets it (after its NameOwnerChanged, which they may still see).
 */
struct filter_target {
	struct peer_attachment attachment;
	struct list_node sightings;	/* struct filter_sight, ->target_link */
};

static void target_gone(struct peer_attachment *a)
{
	struct filter_target *t = container_of(a, struct filter_target, attachment);
	struct filter_sight *s, *tmp;

	list_for_each_entry_safe(s, tmp, &t->sightings, target_link)
		sight_free(s);
}

static void target_free(struct peer_attachment *a)
{
	target_gone(a);
	free(container_of(a, struct filter_target, attachment));
}

static const struct peer_attachment_ops target_ops = {
	.gone = target_gone,
	.free = target_free,
};

static struct filter_target *target_get(struct peer *peer)
{
	struct peer_attachment *a = peer_find_attachment(peer, &target_ops);
	struct filter_target *t;

	if (a)
		return container_of(a, struct filter_target, attachment);
	t = calloc(1, sizeof(*t));
	if (!t)
		return NULL;
	list_init(&t->sightings);
	peer_attach(peer, &t->attachment, &target_ops);
	return t;
}

static int view_sight(struct filter_view *v, struct peer *target, struct filter_sight **sp)
{
	struct filter_sight *s = view_find(v, target);
	struct filter_target *t;
	int r;

	if (!s) {
		t = target_get(target);
		if (!t)
			return -ENOMEM;
		s = calloc(1, sizeof(*s));
		if (!s)
			return -ENOMEM;
		r = hmap_insert(&v->sights, &s->node, sight_hash(target));
		if (r < 0) {
			free(s);
			return r;
		}
		s->view = v;
		s->target = target;
		list_append(&t->sightings, &s->target_link);
	}
	*sp = s;
	return 0;
}

int filter_view_new(struct filter_view **vp, struct peer *peer, struct container_filter *f)
{
	struct filter_view *v = calloc(1, sizeof(*v));

	if (!v)
		return -ENOMEM;
	v->filter = container_filter_ref(f);
	v->peer = peer;
	hmap_init(&v->sights);
	*vp = v;
	return 0;
}

struct filter_view *filter_view_free(struct filter_view *v)
{
	struct hmap_node *n;

	if (!v)
		return NULL;
	while ((n = hmap_next(&v->sights, NULL)))
		sight_free(container_of(n, struct filter_sight, node));
	hmap_deinit(&v->sights);
	container_filter_unref(v->filter);
	free(v);
	return NULL;
}

void filter_view_match_peer(const struct filter_view *v, const struct peer *target,
			    struct filter_match *m)
{
	const struct filter_sight *s;

	*m = (struct filter_match){};
	if (!target) {
		m->level = FILTER_TALK;
		m->unrestricted = true;
		return;
	}
	s = view_find(v, target);
	if (!s)
		return;
	memcpy(m->bits, s->bits, sizeof(m->bits));
	for (size_t i = 0; i < v->filter->n_rules; i++)
		if (s->bits[i / 64] & (UINT64_C(1) << (i % 64)) &&
		    v->filter->rules[i].level > m->level)
			m->level = v->filter->rules[i].level;
	/* Its own level acts as a rule of that level that allows everything. */
	if (s->level > m->level)
		m->level = s->level;
	m->unrestricted = s->level >= FILTER_TALK;
}

void filter_view_match_name(const struct filter_view *v, const char *name,
			    struct filter_match *m)
{
	if (name && name[0] == ':') {
		struct name_owner *o = name_registry_find_unique(v->peer->bus->names, name);
		struct peer *leaving = v->peer->bus->peer_leaving;

		/* Its own NameOwnerChanged, as it leaves: still known. */
		if (!o && leaving && !strcmp(peer_name(leaving), name))
			o = &leaving->owner;
		if (!o) {
			*m = (struct filter_match){};
			return;
		}
		filter_view_match_peer(v, container_of(o, struct peer, owner), m);
		return;
	}
	container_filter_match_name(v->filter, name, m);
}

int filter_view_saw(struct filter_view *v, struct peer *from)
{
	struct filter_sight *s;
	int r;

	if (!from || from->closed)
		return 0;
	r = view_sight(v, from, &s);
	if (r < 0)
		return r;
	if (s->level < FILTER_SEE)
		s->level = FILTER_SEE;
	return 0;
}

/* @owner owns @name now: it takes the name's rules, for good. */
static int view_learn_owner(struct filter_view *v, const char *name, struct peer *owner)
{
	struct filter_match m;
	struct filter_sight *s;
	int r;

	container_filter_match_name(v->filter, name, &m);
	if (m.level == FILTER_NONE)
		return 0;
	r = view_sight(v, owner, &s);
	if (r < 0)
		return r;
	for (size_t i = 0; i < FILTER_WORDS; i++)
		s->bits[i] |= m.bits[i];
	return 0;
}

void filter_name_owner_changed(struct bus *bus, const char *name, struct peer *owner)
{
	struct container_member *m;
	struct container *c;

	if (!owner || owner->closed || !bus->containers)
		return;
	list_for_each_entry(c, &bus->containers->instances, link) {
		if (!c->filter)
			continue;
		list_for_each_entry(m, &c->members, link)
			/* Out of memory: it learns less, and so sees less. */
			if (m->view && m->attachment.peer->registered)
				(void)view_learn_owner(m->view, name, owner);
	}
}

/* The NameOwnerChanged match rule xdg-dbus-proxy adds for @rule's name. */
static int view_add_match(struct filter_view *v, const struct filter_rule *rule)
{
	struct peer *peer = v->peer;
	struct bus *bus = peer->bus;
	_cleanup_free_ char *text = NULL;
	const char *reason;
	int r;

	if (asprintf(&text, "type='signal',sender='org.freedesktop.DBus',"
		     "interface='org.freedesktop.DBus',member='NameOwnerChanged',%s='%s'",
		     rule->subtree ? "arg0namespace" : "arg0", rule->name) < 0)
		return -ENOMEM;
	/* Within the connection's limits, as the proxy's AddMatch would be. */
	if (peer->matches.n_rules >= (size_t)bus->limits.max_match_rules_per_connection)
		return 0;
	if (peer_charge(peer, USER_SLOT_MATCHES, 1))
		return 0;
	bus_journal_changed(bus);
	r = match_registry_add_text(bus->matches, &peer->matches, text, &reason);
	if (r) {
		peer_uncharge(peer, USER_SLOT_MATCHES, 1);
		return r < 0 ? r : 0;	/* a name no rule can hold: nothing to watch */
	}
	return 0;
}

int filter_view_hello(struct filter_view *v)
{
	const struct container_filter *f = v->filter;
	struct peer *peer = v->peer;
	struct filter_sight *s;
	struct name *n;
	size_t i, j;
	int r;

	r = view_sight(v, peer, &s);
	if (r < 0)
		return r;
	s->level = FILTER_TALK;

	/* One rule per name (arg0namespace if any rule of it is NAME.*). */
	for (i = 1; i < f->n_rules; i++) {
		const struct filter_rule *rule = &f->rules[i];
		bool first = true, subtree = rule->subtree;

		if (!strcmp(rule->name, DC_SERVICE_DBUS))
			continue;
		for (j = 1; j < f->n_rules; j++) {
			if (strcmp(f->rules[j].name, rule->name))
				continue;
			if (j < i)
				first = false;
			subtree |= f->rules[j].subtree;
		}
		if (!first)
			continue;
		{
			struct filter_rule probe = *rule;

			probe.subtree = subtree;
			r = view_add_match(v, &probe);
		}
		if (r < 0)
			return r;
	}

	/* The owners of the names it may see, as the proxy asks at the start. */
	list_for_each_entry(n, &peer->bus->names->name_list, registry_link) {
		struct name_ownership *o = name_primary(n);

		if (!o)
			continue;
		r = view_learn_owner(v, n->str, container_of(o->owner, struct peer, owner));
		if (r < 0)
			return r;
	}
	return 0;
}

/* ---------------------------------------------------------- the verdicts */

static bool rule_matches(const struct filter_rule *rule, uint8_t type, const struct message *m)
{
	if (rule->level < FILTER_TALK || !(rule->types & type))
		return false;
	if (rule->path) {
		size_t k = strlen(rule->path);

		if (!m->path)
			return false;
		if (rule->path_subtree) {
			if (strncmp(m->path, rule->path, k) || (m->path[k] && m->path[k] != '/'))
				return false;
		} else if (strcmp(m->path, rule->path)) {
			return false;
		}
	}
	if (rule->interface && (!m->interface || strcmp(m->interface, rule->interface)))
		return false;
	if (rule->member && (!m->member || strcmp(m->member, rule->member)))
		return false;
	return true;
}

/* OWN, or TALK with a rule of @type that lets @m through. */
static bool match_allows(const struct container_filter *f, const struct filter_match *fm,
			 uint8_t type, const struct message *m)
{
	if (fm->level >= FILTER_OWN)
		return true;
	if (fm->level < FILTER_TALK)
		return false;
	if (fm->unrestricted)
		return true;
	for (size_t i = 0; i < f->n_rules; i++)
		if (fm->bits[i / 64] & (UINT64_C(1) << (i % 64)) &&
		    rule_matches(&f->rules[i], type, m))
			return true;
	return false;
}

int filter_check_unicast(const struct filter_view *v, const struct message *m)
{
	struct filter_match fm;

	filter_view_match_name(v, m->destination, &fm);
	if (fm.level < FILTER_SEE)
		return FILTER_HIDE;
	if (fm.level == FILTER_SEE)
		return FILTER_DENY;
	return match_allows(v->filter, &fm, FILTER_TYPE_CALL, m) ? FILTER_PASS : FILTER_DENY;
}

/* Whether the match rule @text asks to eavesdrop, as Debian's proxy reads it. */
static bool match_text_eavesdrops(const char *text)
{
	const char *p = text;

	while ((p = strstr(p, "eavesdrop"))) {
		p += strlen("eavesdrop");
		p += strspn(p, " \t\r\n");
		if (*p == '=')
			return true;
	}
	return false;
}

/* A driver method that needs @need of its first argument, a name. */
static int need_arg0(const struct filter_view *v, struct message *m, uint8_t need,
		     int hidden)
{
	struct filter_match fm;
	const char *name = NULL;

	if (message_get_arg(m, 0, &name) != 's' || !name)
		return hidden;
	filter_view_match_name(v, name, &fm);
	if (fm.level < FILTER_SEE)
		return hidden;
	return fm.level >= need ? FILTER_PASS : FILTER_DENY;
}

int filter_check_driver(const struct filter_view *v, struct message *m)
{
	static const struct {
		const char *member;
		uint8_t need;		/* of arg0; NONE: passes */
		int hidden;		/* the verdict below SEE */
	} methods[] = {
		{ "Hello", FILTER_NONE, FILTER_PASS },
		{ "RemoveMatch", FILTER_NONE, FILTER_PASS },
		{ "GetId", FILTER_NONE, FILTER_PASS },
		{ "ListNames", FILTER_NONE, FILTER_PASS },
		{ "ListActivatableNames", FILTER_NONE, FILTER_PASS },
		{ "AddMatch", FILTER_NONE, FILTER_PASS },
		{ "RequestName", FILTER_OWN, FILTER_HIDE },
		{ "ReleaseName", FILTER_OWN, FILTER_HIDE },
		{ "ListQueuedOwners", FILTER_OWN, FILTER_HIDE },
		{ "NameHasOwner", FILTER_SEE, FILTER_FAKE_FALSE },
		{ "GetNameOwner", FILTER_SEE, FILTER_FAKE_NO_OWNER },
		{ "GetConnectionUnixProcessID", FILTER_SEE, FILTER_HIDE },
		{ "GetConnectionCredentials", FILTER_SEE, FILTER_HIDE },
		{ "GetAdtAuditSessionData", FILTER_SEE, FILTER_HIDE },
		{ "GetConnectionSELinuxSecurityContext", FILTER_SEE, FILTER_HIDE },
		{ "GetConnectionUnixUser", FILTER_SEE, FILTER_HIDE },
		{ "StartServiceByName", FILTER_TALK, FILTER_HIDE },
	};
	size_t i;

	if (m->type != DC_MESSAGE_METHOD_CALL)
		return FILTER_PASS;	/* the bus ignores them */
	if (m->interface && !strcmp(m->interface, DC_INTERFACE_INTROSPECTABLE))
		return FILTER_PASS;
	/* The direct path of native clients (docs/native-protocol.md): TALK at least. */
	if (m->interface && !strcmp(m->interface, DC_INTERFACE_BUS1) && m->member &&
	    !strcmp(m->member, "GetDirectHandle"))
		return need_arg0(v, m, FILTER_TALK, FILTER_HIDE);
	if (!m->interface || strcmp(m->interface, DC_INTERFACE_DBUS))
		return FILTER_DENY;
	for (i = 0; i < ARRAY_SIZE(methods) && m->member; i++) {
		if (strcmp(m->member, methods[i].member))
			continue;
		if (!strcmp(m->member, "AddMatch")) {
			const char *text = NULL;

			if (message_get_arg(m, 0, &text) == 's' && text &&
			    match_text_eavesdrops(text))
				return FILTER_DENY;
			return FILTER_PASS;
		}
		if (methods[i].need == FILTER_NONE)
			return FILTER_PASS;
		return need_arg0(v, m, methods[i].need, methods[i].hidden);
	}
	/* UpdateActivationEnvironment, BecomeMonitor, and all the others. */
	return FILTER_DENY;
}

bool filter_check_broadcast(const struct filter_view *v, const struct peer *from,
			    struct message *m)
{
	struct filter_match fm;

	if (!from && m->member && !strcmp(m->member, "NameOwnerChanged") && m->interface &&
	    !strcmp(m->interface, DC_INTERFACE_DBUS)) {
		const char *name = NULL;

		if (message_get_arg(m, 0, &name) != 's' || !name)
			return false;
		if (v->filter->sloppy_names && name[0] == ':')
			return true;
		/* A unique name gone is forgotten only after this signal. */
		filter_view_match_name(v, name, &fm);
		return fm.level >= FILTER_SEE;
	}
	filter_view_match_peer(v, from, &fm);
	return match_allows(v->filter, &fm, FILTER_TYPE_BROADCAST, m);
}

bool filter_view_sees(const struct filter_view *v, const char *name)
{
	struct filter_match fm;

	filter_view_match_name(v, name, &fm);
	return fm.level >= FILTER_SEE;
}

bool filter_view_allows_all_calls(const struct filter_view *v, const struct peer *target)
{
	struct filter_match fm;

	filter_view_match_peer(v, target, &fm);
	if (fm.level >= FILTER_OWN)
		return true;
	if (fm.level < FILTER_TALK)
		return false;
	if (fm.unrestricted)
		return true;
	for (size_t i = 0; i < v->filter->n_rules; i++) {
		const struct filter_rule *rule = &v->filter->rules[i];

		if (fm.bits[i / 64] & (UINT64_C(1) << (i % 64)) && rule->level >= FILTER_TALK &&
		    (rule->types & FILTER_TYPE_CALL) && !rule->path && !rule->interface &&
		    !rule->member)
			return true;
	}
	return false;
}

/* ------------------------------------------------------------- re-exec */

void filter_view_serialize(const struct filter_view *v, struct state_writer *w,
			   uint32_t (*index)(const void *peer))
{
	struct hmap_node *n = NULL;

	state_put_u64(w, hmap_size(&v->sights));
	while ((n = hmap_next(&v->sights, n))) {
		const struct filter_sight *s = container_of(n, struct filter_sight, node);

		state_put_u32(w, index(s->target));
		state_put_u32(w, s->level);
		for (size_t i = 0; i < FILTER_WORDS; i++)
			state_put_u64(w, s->bits[i]);
	}
}

bool filter_view_state_read(struct state_reader *r, struct filter_view_state *st,
			    size_t n_peers)
{
	st->n = state_get_count(r, 8 + 8 * FILTER_WORDS);
	st->v = calloc(st->n ? st->n : 1, sizeof(*st->v));
	if (!st->v) {
		r->error = true;
		return false;
	}
	for (size_t i = 0; i < st->n && !r->error; i++) {
		struct filter_sight_state *s = &st->v[i];
		uint32_t level;

		s->target = state_get_u32(r);
		level = state_get_u32(r);
		for (size_t j = 0; j < FILTER_WORDS; j++)
			s->bits[j] = state_get_u64(r);
		if (s->target >= n_peers || level > FILTER_OWN)
			r->error = true;
		s->level = (uint8_t)level;
	}
	return !r->error;
}

void filter_view_state_deinit(struct filter_view_state *st)
{
	free(st->v);
	st->v = NULL;
	st->n = 0;
}

int filter_view_restore(struct filter_view *v, const struct filter_view_state *st,
			struct peer *const *peers)
{
	for (size_t i = 0; i < st->n; i++) {
		struct filter_sight *s;
		int r = view_sight(v, peers[st->v[i].target], &s);

		if (r < 0)
			return r;
		s->level = st->v[i].level;
		memcpy(s->bits, st->v[i].bits, sizeof(s->bits));
	}
	return 0;
}
