/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Compiled dbus-daemon policy (see conf/policy.h).
 *
 * bus_policy keeps its own copy of the rules in one array, grouped by scope:
 * plain lists for default, mandatory and the two at_console values, and
 * arrays sorted by id for users and groups (looked up with bsearch when a
 * connection is set up). A bus_client_policy is three arrays of rule
 * pointers (send, receive, own) in precedence order; checks walk them from
 * the end, so the first match found is dbus-daemon's "last match wins".
 */

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conf/policy.h"
#include "conf/internal.h"
#include "util/macro.h"

struct rule_list {
	const struct bus_policy_rule **v;
	size_t n;
	size_t sz;
};

struct id_rules {
	uint32_t id;
	struct rule_list list;
};

struct bus_policy {
	struct bus_policy_rule *rules;	/* copies, file order */
	size_t n_rules;
	char **files;
	size_t n_files;

	struct rule_list by_default;
	struct rule_list mandatory;
	struct rule_list console[2];	/* [0]: at_console="false", [1]: "true" */
	struct bus_console console_detect;	/* who is at the console (console.h) */
	struct id_rules *users;		/* sorted by id */
	size_t n_users;
	struct id_rules *groups;	/* sorted by id */
	size_t n_groups;
};

/* A rule keyed by the exact name it names (send_destination, receive_sender, own). */
struct keyed_rule {
	const char *name;
	uint32_t idx;		/* position in rules.v */
};

/*
 * The rules of one type for one connection, in precedence order, plus an
 * index: a rule naming an exact peer name can only match when the other
 * side owns that name (or the message names it), so those rules are found
 * by binary search on the few names involved; only the other rules (no
 * name, or a prefix) are scanned.
 */
struct rule_index {
	struct rule_list rules;
	uint32_t *unkeyed;	/* indices, ascending */
	size_t n_unkeyed;
	struct keyed_rule *keyed;	/* sorted by (name, idx) */
	size_t n_keyed;
};

struct bus_client_policy {
	struct rule_index send;
	struct rule_index receive;
	struct rule_index own;
};

static int rule_list_append(struct rule_list *l, const struct bus_policy_rule *rule)
{
	if (l->n == l->sz) {
		size_t sz = l->sz ? l->sz * 2 : 8;
		const struct bus_policy_rule **v = realloc(l->v, sz * sizeof(*v));

		if (!v)
			return -ENOMEM;
		l->v = v;
		l->sz = sz;
	}
	l->v[l->n++] = rule;
	return 0;
}

static void rule_list_clear(struct rule_list *l)
{
	free(l->v);
	*l = (struct rule_list){};
}

static void rule_copy_free(struct bus_policy_rule *r)
{
	free(r->interface);
	free(r->member);
	free(r->error);
	free(r->path);
	free(r->name);
}

struct bus_policy *bus_policy_free(struct bus_policy *p)
{
	if (!p)
		return NULL;
	for (size_t i = 0; i < p->n_rules; i++)
		rule_copy_free(&p->rules[i]);
	free(p->rules);
	for (size_t i = 0; i < p->n_files; i++)
		free(p->files[i]);
	free(p->files);
	rule_list_clear(&p->by_default);
	rule_list_clear(&p->mandatory);
	rule_list_clear(&p->console[0]);
	rule_list_clear(&p->console[1]);
	for (size_t i = 0; i < p->n_users; i++)
		rule_list_clear(&p->users[i].list);
	free(p->users);
	for (size_t i = 0; i < p->n_groups; i++)
		rule_list_clear(&p->groups[i].list);
	free(p->groups);
	free(p);
	return NULL;
}

static int dup_field(const char *s, char **out)
{
	*out = NULL;
	if (!s)
		return 0;
	*out = strdup(s);
	return *out ? 0 : -ENOMEM;
}

static const char *intern_file(struct bus_policy *p, const struct bus_config *config,
			       const char *file)
{
	struct bus_config_string *f;
	size_t i = 0;

	if (!file)
		return NULL;
	/* config->files and p->files have the same order */
	list_for_each_entry(f, &config->files, link) {
		if (f->str == file || strcmp(f->str, file) == 0)
			return i < p->n_files ? p->files[i] : NULL;
		i++;
	}
	return NULL;
}

static struct id_rules *id_rules_find(struct id_rules *v, size_t n, uint32_t id)
{
	size_t lo = 0, hi = n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (v[mid].id == id)
			return &v[mid];
		if (v[mid].id < id)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

/* Find or insert (keeping the array sorted) the list for @id. */
static struct rule_list *id_rules_get(struct id_rules **v, size_t *n, uint32_t id)
{
	struct id_rules *e = id_rules_find(*v, *n, id), *t;
	size_t pos = 0;

	if (e)
		return &e->list;
	while (pos < *n && (*v)[pos].id < id)
		pos++;
	t = realloc(*v, (*n + 1) * sizeof(**v));
	if (!t)
		return NULL;
	*v = t;
	memmove(&t[pos + 1], &t[pos], (*n - pos) * sizeof(*t));
	t[pos] = (struct id_rules){ .id = id };
	(*n)++;
	return &t[pos].list;
}

int bus_policy_new(struct bus_policy **policyp, const struct bus_config *config)
{
	_cleanup_(bus_policy_freep) struct bus_policy *p = NULL;
	const struct bus_policy_rule *src;
	struct bus_config_string *f;
	size_t n = 0;

	p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	bus_console_init_default(&p->console_detect);

	list_for_each_entry(f, &config->files, link)
		n++;
	p->files = calloc(n ? n : 1, sizeof(*p->files));
	if (!p->files)
		return -ENOMEM;
	list_for_each_entry(f, &config->files, link) {
		p->files[p->n_files] = strdup(f->str);
		if (!p->files[p->n_files])
			return -ENOMEM;
		p->n_files++;
	}

	n = 0;
	list_for_each_entry(src, &config->rules, link)
		n++;
	p->rules = calloc(n ? n : 1, sizeof(*p->rules));
	if (!p->rules)
		return -ENOMEM;

	list_for_each_entry(src, &config->rules, link) {
		struct bus_policy_rule *r = &p->rules[p->n_rules];
		struct rule_list *l;

		*r = *src;
		r->interface = r->member = r->error = r->path = r->name = NULL;
		list_init(&r->link);
		p->n_rules++;	/* from here on, bus_policy_free() frees its strings */
		if (dup_field(src->interface, &r->interface) < 0 ||
		    dup_field(src->member, &r->member) < 0 ||
		    dup_field(src->error, &r->error) < 0 || dup_field(src->path, &r->path) < 0 ||
		    dup_field(src->name, &r->name) < 0)
			return -ENOMEM;
		r->file = intern_file(p, config, src->file);

		switch (r->scope) {
		case BUS_POLICY_SCOPE_DEFAULT:
			l = &p->by_default;
			break;
		case BUS_POLICY_SCOPE_MANDATORY:
			l = &p->mandatory;
			break;
		case BUS_POLICY_SCOPE_CONSOLE:
			l = &p->console[r->scope_id ? 1 : 0];
			break;
		case BUS_POLICY_SCOPE_USER:
			l = id_rules_get(&p->users, &p->n_users, r->scope_id);
			break;
		case BUS_POLICY_SCOPE_GROUP:
			l = id_rules_get(&p->groups, &p->n_groups, r->scope_id);
			break;
		default:
			l = NULL;
			break;
		}
		if (!l || rule_list_append(l, r) < 0)
			return -ENOMEM;
	}

	*policyp = steal_ptr(p);
	return 0;
}

/* ------------------------------------------------------------------ */
/* connecting                                                           */

static bool connect_rule_matches(const struct bus_policy_rule *r, uint32_t uid,
				 const uint32_t *gids, size_t n_gids)
{
	if (r->type == BUS_POLICY_RULE_USER)
		return r->id_any || r->id == uid;
	if (r->type == BUS_POLICY_RULE_GROUP) {
		if (r->id_any)
			return true;
		for (size_t i = 0; i < n_gids; i++)
			if (gids[i] == r->id)
				return true;
	}
	return false;
}

bool bus_policy_check_connect(const struct bus_policy *policy, uint32_t uid,
			      const uint32_t *gids, size_t n_gids, uint32_t bus_uid,
			      const struct bus_policy_rule **rulep)
{
	const struct rule_list *lists[] = { &policy->mandatory, &policy->by_default };

	/* Backwards: the last matching rule of the later list decides. */
	for (size_t l = 0; l < ARRAY_SIZE(lists); l++) {
		for (size_t i = lists[l]->n; i-- > 0;) {
			const struct bus_policy_rule *r = lists[l]->v[i];

			if (connect_rule_matches(r, uid, gids, n_gids)) {
				if (rulep)
					*rulep = r;
				return r->allow;
			}
		}
	}
	if (rulep)
		*rulep = NULL;
	return uid == bus_uid;
}

/* ------------------------------------------------------------------ */
/* per connection                                                       */

static void rule_index_clear(struct rule_index *x)
{
	rule_list_clear(&x->rules);
	free(x->unkeyed);
	free(x->keyed);
	*x = (struct rule_index){};
}

struct bus_client_policy *bus_client_policy_free(struct bus_client_policy *c)
{
	if (!c)
		return NULL;
	rule_index_clear(&c->send);
	rule_index_clear(&c->receive);
	rule_index_clear(&c->own);
	free(c);
	return NULL;
}

static int cmp_keyed(const void *a, const void *b)
{
	const struct keyed_rule *x = a, *y = b;
	int c = strcmp(x->name, y->name);

	if (c)
		return c;
	return x->idx < y->idx ? -1 : x->idx > y->idx;
}

static int rule_index_build(struct rule_index *x)
{
	size_t n = x->rules.n;

	if (n >= UINT32_MAX)
		return -ENOMEM;
	x->unkeyed = malloc((n ? n : 1) * sizeof(*x->unkeyed));
	x->keyed = malloc((n ? n : 1) * sizeof(*x->keyed));
	if (!x->unkeyed || !x->keyed)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		const struct bus_policy_rule *r = x->rules.v[i];

		if (r->name && !r->name_is_prefix)
			x->keyed[x->n_keyed++] = (struct keyed_rule){ r->name, (uint32_t)i };
		else
			x->unkeyed[x->n_unkeyed++] = (uint32_t)i;
	}
	if (x->n_keyed)
		qsort(x->keyed, x->n_keyed, sizeof(*x->keyed), cmp_keyed);
	return 0;
}

/* First keyed entry for @name, or x->n_keyed. */
static size_t keyed_lower_bound(const struct rule_index *x, const char *name)
{
	size_t lo = 0, hi = x->n_keyed;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (strcmp(x->keyed[mid].name, name) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

typedef bool (*rule_match_fn)(const struct bus_policy_rule *r, const void *ctx);

/*
 * The highest-precedence matching rule among the unkeyed rules and the
 * rules keyed by one of @names. Returns its index + 1, or 0.
 */
static size_t rule_index_lookup(const struct rule_index *x, const char *const *names,
				size_t n_names, rule_match_fn match, const void *ctx)
{
	size_t best = 0;

	for (size_t i = x->n_unkeyed; i-- > 0;) {
		if (match(x->rules.v[x->unkeyed[i]], ctx)) {
			best = x->unkeyed[i] + 1;
			break;
		}
	}
	for (size_t k = 0; k < n_names && x->n_keyed; k++) {
		size_t lo, hi;

		if (!names[k])
			continue;
		lo = keyed_lower_bound(x, names[k]);
		hi = lo;
		while (hi < x->n_keyed && strcmp(x->keyed[hi].name, names[k]) == 0)
			hi++;
		/* entries of one name are ascending by idx: walk down, stop below best */
		while (hi-- > lo) {
			uint32_t idx = x->keyed[hi].idx;

			if (idx + 1 <= best)
				break;
			if (match(x->rules.v[idx], ctx)) {
				best = idx + 1;
				break;
			}
		}
	}
	return best;
}

static int client_add(struct bus_client_policy *c, const struct rule_list *l)
{
	for (size_t i = 0; i < l->n; i++) {
		const struct bus_policy_rule *r = l->v[i];
		struct rule_list *to;

		switch (r->type) {
		case BUS_POLICY_RULE_SEND:
			to = &c->send.rules;
			break;
		case BUS_POLICY_RULE_RECEIVE:
			to = &c->receive.rules;
			break;
		case BUS_POLICY_RULE_OWN:
			to = &c->own.rules;
			break;
		default:
			/* user= / group= rules are about connecting, not per connection */
			continue;
		}
		if (rule_list_append(to, r) < 0)
			return -ENOMEM;
	}
	return 0;
}

int bus_client_policy_new(struct bus_client_policy **clientp, const struct bus_policy *policy,
			  uint32_t uid, const uint32_t *gids, size_t n_gids, bool at_console)
{
	_cleanup_(bus_client_policy_freep) struct bus_client_policy *c = NULL;
	const struct id_rules *e;
	int r;

	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;

	r = client_add(c, &policy->by_default);
	for (size_t i = 0; r == 0 && i < n_gids && policy->n_groups; i++) {
		e = id_rules_find(policy->groups, policy->n_groups, gids[i]);
		if (e)
			r = client_add(c, &e->list);
	}
	if (r == 0 && (e = id_rules_find(policy->users, policy->n_users, uid)))
		r = client_add(c, &e->list);
	if (r == 0)
		r = client_add(c, &policy->console[at_console ? 1 : 0]);
	if (r == 0)
		r = client_add(c, &policy->mandatory);
	if (r == 0)
		r = rule_index_build(&c->send);
	if (r == 0)
		r = rule_index_build(&c->receive);
	if (r == 0)
		r = rule_index_build(&c->own);
	if (r < 0)
		return r;

	*clientp = steal_ptr(c);
	return 0;
}

void bus_policy_set_console(struct bus_policy *policy, const struct bus_console *console)
{
	policy->console_detect = *console;
}

bool bus_policy_has_console_rules(const struct bus_policy *policy)
{
	return policy->console[0].n > 0 || policy->console[1].n > 0;
}

int bus_policy_uid_at_console(const struct bus_policy *policy, uint32_t uid)
{
	/* Without at_console rules the answer changes nothing: spare logind the call. */
	if (!policy || !bus_policy_has_console_rules(policy))
		return BUS_CONSOLE_ABSENT;
	return bus_console_check(&policy->console_detect, uid);
}

/* "a.b" matches "a.b" and "a.b.c", not "a.bc". */
static bool name_has_prefix(const char *name, const char *prefix)
{
	size_t n = strlen(prefix);

	return strncmp(name, prefix, n) == 0 && (name[n] == '\0' || name[n] == '.');
}

static bool peer_has_name(const struct bus_policy_peer *peer, const char *name, bool prefix)
{
	for (size_t i = 0; i < peer->n_names; i++) {
		const char *owned = peer->names[i];

		if (owned && (prefix ? name_has_prefix(owned, name) : strcmp(owned, name) == 0))
			return true;
	}
	return false;
}

/* The checks that send and receive rules share, in dbus-daemon's order. */
static bool message_rule_matches(const struct bus_policy_rule *r,
				 const struct bus_policy_message *m, bool eavesdrop_rule)
{
	if (r->message_type != BUS_MESSAGE_TYPE_ANY && r->message_type != m->type)
		return false;

	if (m->is_reply) {
		bool rule_rr = r->requested_reply == BUS_TRISTATE_UNSET
			? r->allow : r->requested_reply == BUS_TRISTATE_TRUE;

		if (!m->requested_reply && r->allow && rule_rr && !eavesdrop_rule)
			return false;
		if (m->requested_reply && !r->allow && !rule_rr)
			return false;
	}

	if (r->path && m->path && strcmp(r->path, m->path) != 0)
		return false;
	if (r->interface) {
		if (!m->interface) {
			if (r->allow)
				return false;
		} else if (strcmp(r->interface, m->interface) != 0) {
			return false;
		}
	}
	if (r->member && m->member && strcmp(r->member, m->member) != 0)
		return false;
	if (r->error && m->error_name && strcmp(r->error, m->error_name) != 0)
		return false;
	return true;
}

static bool fds_match(const struct bus_policy_rule *r, const struct bus_policy_message *m)
{
	return m->n_fds >= r->min_fds && m->n_fds <= r->max_fds;
}

static bool send_rule_matches(const struct bus_policy_rule *r, const struct bus_policy_message *m,
			      const struct bus_policy_peer *receiver)
{
	if (!message_rule_matches(r, m, r->eavesdrop == BUS_TRISTATE_TRUE))
		return false;

	if (r->broadcast != BUS_TRISTATE_UNSET) {
		bool broadcast = !m->destination && m->type == BUS_MESSAGE_TYPE_SIGNAL;

		if (broadcast != (r->broadcast == BUS_TRISTATE_TRUE))
			return false;
	}

	if (r->name) {
		if (receiver) {
			if (!peer_has_name(receiver, r->name, r->name_is_prefix))
				return false;
		} else if (!m->destination) {
			return false;
		} else if (r->name_is_prefix ? !name_has_prefix(m->destination, r->name)
					     : strcmp(m->destination, r->name) != 0) {
			return false;
		}
	}
	return fds_match(r, m);
}

struct send_ctx {
	const struct bus_policy_message *m;
	const struct bus_policy_peer *peer;
};

static bool send_match(const struct bus_policy_rule *r, const void *ctx)
{
	const struct send_ctx *c = ctx;

	return send_rule_matches(r, c->m, c->peer);
}

static bool decide(const struct rule_index *x, size_t best, const struct bus_policy_rule **rulep)
{
	const struct bus_policy_rule *r = best ? x->rules.v[best - 1] : NULL;

	if (rulep)
		*rulep = r;
	return r && r->allow;
}

bool bus_client_policy_check_send(const struct bus_client_policy *client,
				  const struct bus_policy_message *m,
				  const struct bus_policy_peer *receiver,
				  const struct bus_policy_rule **rulep)
{
	struct send_ctx ctx = { m, receiver };
	const char *const *names = receiver ? receiver->names : &m->destination;
	size_t n = receiver ? receiver->n_names : 1;

	return decide(&client->send,
		      rule_index_lookup(&client->send, names, n, send_match, &ctx), rulep);
}

/* How many rules of @x match: dbus-daemon's "matched rules" of a denial. */
static unsigned int rule_index_count(const struct rule_index *x, rule_match_fn match,
				     const void *ctx)
{
	unsigned int n = 0;

	for (size_t i = 0; i < x->rules.n; i++)
		n += match(x->rules.v[i], ctx);
	return n;
}

unsigned int bus_client_policy_count_send(const struct bus_client_policy *client,
					  const struct bus_policy_message *m,
					  const struct bus_policy_peer *receiver)
{
	struct send_ctx ctx = { m, receiver };

	return rule_index_count(&client->send, send_match, &ctx);
}

static bool receive_rule_matches(const struct bus_policy_rule *r,
				 const struct bus_policy_message *m,
				 const struct bus_policy_peer *sender, bool eavesdropping)
{
	bool rule_eavesdrop = r->eavesdrop == BUS_TRISTATE_TRUE;

	if (r->message_type != BUS_MESSAGE_TYPE_ANY && r->message_type != m->type)
		return false;
	if (eavesdropping && r->allow && !rule_eavesdrop)
		return false;
	if (!eavesdropping && !r->allow && rule_eavesdrop)
		return false;
	if (!message_rule_matches(r, m, rule_eavesdrop))
		return false;

	if (r->name) {
		if (sender) {
			if (!peer_has_name(sender, r->name, false))
				return false;
		} else if (!m->sender || strcmp(m->sender, r->name) != 0) {
			return false;
		}
	}
	return fds_match(r, m);
}

struct receive_ctx {
	const struct bus_policy_message *m;
	const struct bus_policy_peer *peer;
	bool eavesdropping;
};

static bool receive_match(const struct bus_policy_rule *r, const void *ctx)
{
	const struct receive_ctx *c = ctx;

	return receive_rule_matches(r, c->m, c->peer, c->eavesdropping);
}

bool bus_client_policy_check_receive(const struct bus_client_policy *client,
				     const struct bus_policy_message *m,
				     const struct bus_policy_peer *sender, bool eavesdropping,
				     const struct bus_policy_rule **rulep)
{
	/* dbus-daemon: eavesdropping only counts for messages with a destination. */
	struct receive_ctx ctx = { m, sender, eavesdropping && m->destination };
	const char *const *names = sender ? sender->names : &m->sender;
	size_t n = sender ? sender->n_names : 1;

	return decide(&client->receive,
		      rule_index_lookup(&client->receive, names, n, receive_match, &ctx), rulep);
}

unsigned int bus_client_policy_count_receive(const struct bus_client_policy *client,
					     const struct bus_policy_message *m,
					     const struct bus_policy_peer *sender, bool eavesdropping)
{
	struct receive_ctx ctx = { m, sender, eavesdropping && m->destination };

	return rule_index_count(&client->receive, receive_match, &ctx);
}

static bool own_match(const struct bus_policy_rule *r, const void *ctx)
{
	const char *name = ctx;

	if (!r->name)
		return true;
	if (r->name_is_prefix)
		return name_has_prefix(name, r->name);
	return strcmp(name, r->name) == 0;
}

bool bus_client_policy_check_own(const struct bus_client_policy *client, const char *name,
				 const struct bus_policy_rule **rulep)
{
	return decide(&client->own, rule_index_lookup(&client->own, &name, 1, own_match, name),
		      rulep);
}

/* ------------------------------------------------------------------ */

struct buf {
	char *s;
	size_t n;
	size_t sz;
	bool oom;
};

_printf_(2, 3) static void buf_printf(struct buf *b, const char *fmt, ...)
{
	va_list ap;
	int l;

	if (b->oom)
		return;
	va_start(ap, fmt);
	l = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (l < 0 || b->n + l + 1 > b->sz) {
		size_t sz = MAX(b->sz * 2, b->n + (l < 0 ? 0 : l) + 64);
		char *t = l < 0 ? NULL : realloc(b->s, sz);

		if (!t) {
			b->oom = true;
			return;
		}
		b->s = t;
		b->sz = sz;
	}
	va_start(ap, fmt);
	vsnprintf(b->s + b->n, b->sz - b->n, fmt, ap);
	va_end(ap);
	b->n += l;
}

static void buf_attr(struct buf *b, const char *name, const char *value)
{
	buf_printf(b, " %s=\"%s\"", name, value ? value : "*");
}

static void buf_tristate(struct buf *b, const char *name, enum bus_tristate t)
{
	if (t != BUS_TRISTATE_UNSET)
		buf_attr(b, name, t == BUS_TRISTATE_TRUE ? "true" : "false");
}

char *bus_policy_rule_describe(const struct bus_policy_rule *r)
{
	struct buf b = {};
	bool send = r->type == BUS_POLICY_RULE_SEND;

	if (r->file)
		buf_printf(&b, "%s:%u: ", r->file, r->line);
	buf_printf(&b, "<%s", r->allow ? "allow" : "deny");
	switch (r->type) {
	case BUS_POLICY_RULE_SEND:
	case BUS_POLICY_RULE_RECEIVE: {
		const char *pfx = send ? "send_" : "receive_";
		bool any = false;

		if (r->name) {
			buf_printf(&b, " %s%s=\"%s\"", pfx,
				   send ? (r->name_is_prefix ? "destination_prefix" : "destination")
					: "sender",
				   r->name);
			any = true;
		}
		if (r->interface) {
			buf_printf(&b, " %sinterface=\"%s\"", pfx, r->interface);
			any = true;
		}
		if (r->member) {
			buf_printf(&b, " %smember=\"%s\"", pfx, r->member);
			any = true;
		}
		if (r->error) {
			buf_printf(&b, " %serror=\"%s\"", pfx, r->error);
			any = true;
		}
		if (r->path) {
			buf_printf(&b, " %spath=\"%s\"", pfx, r->path);
			any = true;
		}
		if (r->message_type != BUS_MESSAGE_TYPE_ANY) {
			buf_printf(&b, " %stype=\"%s\"", pfx,
				   bus_message_type_to_string(r->message_type));
			any = true;
		}
		if (r->requested_reply != BUS_TRISTATE_UNSET) {
			buf_printf(&b, " %srequested_reply=\"%s\"", pfx,
				   r->requested_reply == BUS_TRISTATE_TRUE ? "true" : "false");
			any = true;
		}
		if (send)
			buf_tristate(&b, "send_broadcast", r->broadcast);
		buf_tristate(&b, "eavesdrop", r->eavesdrop);
		if (r->min_fds)
			buf_printf(&b, " min_fds=\"%u\"", r->min_fds);
		if (r->max_fds != BUS_POLICY_MAX_FDS)
			buf_printf(&b, " max_fds=\"%u\"", r->max_fds);
		if (!any && r->eavesdrop == BUS_TRISTATE_UNSET && r->broadcast == BUS_TRISTATE_UNSET)
			buf_printf(&b, " %s%s=\"*\"", pfx, send ? "destination" : "sender");
		break;
	}
	case BUS_POLICY_RULE_OWN:
		if (r->name_is_prefix)
			buf_attr(&b, "own_prefix", r->name);
		else
			buf_attr(&b, "own", r->name);
		break;
	case BUS_POLICY_RULE_USER:
	case BUS_POLICY_RULE_GROUP:
		if (r->id_any)
			buf_attr(&b, r->type == BUS_POLICY_RULE_USER ? "user" : "group", NULL);
		else
			buf_printf(&b, " %s=\"%u\"", r->type == BUS_POLICY_RULE_USER ? "user" : "group",
				   r->id);
		break;
	}
	buf_printf(&b, "/>");
	if (b.oom) {
		free(b.s);
		return NULL;
	}
	return b.s;
}

/* ------------------------------------------------------------------ */
/* the direct path                                                      */

static bool rule_is_opaque(const struct bus_policy_rule *r)
{
	if (r->type != BUS_POLICY_RULE_SEND && r->type != BUS_POLICY_RULE_RECEIVE)
		return false;
	return r->interface || r->member || r->path || r->error || r->min_fds > 0 ||
	       r->max_fds < BUS_POLICY_MAX_FDS || r->scope == BUS_POLICY_SCOPE_GROUP ||
	       r->scope == BUS_POLICY_SCOPE_CONSOLE;
}

bool bus_policy_opaque_between(const struct bus_policy *policy, const struct bus_policy_peer *a,
			       const struct bus_policy_peer *b)
{
	if (!policy)
		return false;
	for (size_t i = 0; i < policy->n_rules; i++) {
		const struct bus_policy_rule *r = &policy->rules[i];

		if (!rule_is_opaque(r))
			continue;
		if (!r->name || peer_has_name(a, r->name, r->name_is_prefix) ||
		    peer_has_name(b, r->name, r->name_is_prefix))
			return true;
	}
	return false;
}
