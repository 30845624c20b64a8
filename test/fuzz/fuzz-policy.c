/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * libFuzzer target: the policy compiler and its decisions (conf/policy.c).
 *
 * An input is either a busconfig file (it starts with '<') or, otherwise, a
 * byte string that drives a generator of <policy> blocks made of rules with
 * attribute values from small pools (so that rules and messages actually
 * meet). After an optional NUL byte in an XML input, the rest drives the
 * decisions; when those bytes run out, a PRNG seeded from the whole input
 * takes over, so every input is deterministic.
 *
 * Whatever loads is compiled with bus_policy_new(); per-connection policies
 * are built for a few credentials taken from the rules' own user and group
 * scopes, and random send / receive / own / connect decisions are compared
 * with a plain forward scan over the rules in dbus-daemon's order (default,
 * groups, user, console, mandatory; the last match wins), written here from
 * the rules documented in conf/policy.h. Any disagreement, in the verdict or
 * in the deciding rule, aborts.
 */

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conf/config.h"
#include "conf/policy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/*
 * The reference scan and the decision generator are not what is being tested:
 * without coverage feedback from them, libFuzzer's features are those of
 * conf/ (and the config generator), and it runs several times faster.
 */
#define NO_COVERAGE __attribute__((no_sanitize("coverage")))
#define POLICY_REFERENCE_FN NO_COVERAGE static
#include "../unit/conf/policy-reference.h"

/* ------------------------------------------------------------------ */
/* input: bytes first, then a PRNG seeded from the whole input         */

struct src {
	const uint8_t *p;
	size_t n;
	uint64_t state;
};

NO_COVERAGE static void src_init(struct src *s, const uint8_t *p, size_t n, const uint8_t *all, size_t n_all)
{
	uint64_t h = 0xcbf29ce484222325ULL;

	for (size_t i = 0; i < n_all; i++)
		h = (h ^ all[i]) * 0x100000001b3ULL;
	s->p = p;
	s->n = n;
	s->state = h | 1;
}

NO_COVERAGE static unsigned int src_byte(struct src *s)
{
	if (s->n) {
		s->n--;
		return *s->p++;
	}
	s->state ^= s->state << 13;
	s->state ^= s->state >> 7;
	s->state ^= s->state << 17;
	return (unsigned int)(s->state >> 24) & 0xff;
}

NO_COVERAGE static unsigned int src_pick(struct src *s, unsigned int n)
{
	return n ? (src_byte(s) | src_byte(s) << 8) % n : 0;
}

/* ------------------------------------------------------------------ */
/* generator mode                                                       */

static const char *const pool_names[] = {
	"a.b", "a.b.c", "a.bc", "c.d", ":1.1", ":1.2", "org.freedesktop.DBus",
};
static const char *const pool_ifaces[] = { "i.x", "i.y", "org.freedesktop.DBus" };
static const char *const pool_members[] = { "M", "N", "Hello" };
static const char *const pool_paths[] = { "/a", "/b", "/" };
static const char *const pool_errors[] = { "e.A", "e.B" };
static const char *const pool_types[] = {
	"method_call", "method_return", "error", "signal", "*",
};
static const char *const pool_scopes[] = {
	"context=\"default\"", "context=\"mandatory\"", "user=\"0\"", "user=\"7\"",
	"group=\"0\"", "group=\"20\"", "at_console=\"true\"", "at_console=\"false\"",
};

#define POOL(s, a) ((a)[src_pick((s), sizeof(a) / sizeof((a)[0]))])

struct text {
	char *buf;
	size_t len;
	size_t cap;
	bool failed;
};

__attribute__((format(printf, 2, 3)))
static void put(struct text *t, const char *fmt, ...)
{
	va_list ap;
	int l;

	if (t->failed)
		return;
	for (;;) {
		va_start(ap, fmt);
		l = vsnprintf(t->buf ? t->buf + t->len : NULL, t->buf ? t->cap - t->len : 0, fmt, ap);
		va_end(ap);
		if (l < 0) {
			t->failed = true;
			return;
		}
		if (t->buf && t->len + (size_t)l < t->cap)
			break;
		t->cap = (t->cap + (size_t)l + 1) * 2;
		t->buf = realloc(t->buf, t->cap);
		if (!t->buf) {
			t->failed = true;
			return;
		}
	}
	t->len += (size_t)l;
}

static const char *tri(struct src *s)
{
	unsigned int v = src_pick(s, 3);

	return v == 0 ? NULL : v == 1 ? "true" : "false";
}

static void gen_rule(struct text *t, struct src *s, bool global_scope)
{
	/* connect rules (user=, group=) only where they mean something */
	unsigned int kind = src_pick(s, global_scope ? 7 : 5);
	const char *v;

	put(t, "<%s", src_pick(s, 2) ? "allow" : "deny");
	if (kind <= 2) {
		bool send = kind != 1;
		const char *pfx = send ? "send_" : "receive_";
		unsigned int mask = src_byte(s);
		bool any = false;

		/* the combinations dbus-daemon refuses: error with member or interface,
		 * member without interface or path */
		if (mask & 8)
			mask &= ~6U;
		if ((mask & 4) && !(mask & 18))
			mask |= 16;

		if (mask & 1) {
			unsigned int w = src_pick(s, 4);

			if (send && w == 0)
				put(t, " send_destination_prefix=\"%s\"", POOL(s, pool_names));
			else
				put(t, " %s=\"%s\"", send ? "send_destination" : "receive_sender",
				    w == 1 ? "*" : POOL(s, pool_names));
			any = true;
		}
		if (mask & 2)
			put(t, " %sinterface=\"%s\"", pfx, src_pick(s, 5) ? POOL(s, pool_ifaces) : "*");
		if (mask & 4)
			put(t, " %smember=\"%s\"", pfx, src_pick(s, 5) ? POOL(s, pool_members) : "*");
		if (mask & 8)
			put(t, " %serror=\"%s\"", pfx, src_pick(s, 5) ? POOL(s, pool_errors) : "*");
		if (mask & 16)
			put(t, " %spath=\"%s\"", pfx, src_pick(s, 5) ? POOL(s, pool_paths) : "*");
		if (mask & 32)
			put(t, " %stype=\"%s\"", pfx, POOL(s, pool_types));
		any = any || (mask & 62);
		if ((v = tri(s))) {
			put(t, " %srequested_reply=\"%s\"", pfx, v);
			any = true;
		}
		if ((v = tri(s)))
			put(t, " eavesdrop=\"%s\"", v);
		if (send && !(mask & 1) && (v = tri(s))) {
			put(t, " send_broadcast=\"%s\"", v);
			any = true;
		}
		if (mask & 64)
			put(t, " min_fds=\"%u\"", src_pick(s, 3));
		if (mask & 128)
			put(t, " max_fds=\"%u\"", src_pick(s, 3));
		if (src_pick(s, 8) == 0)
			put(t, " log=\"true\"");
		if (!any)
			put(t, " %spath=\"*\"", pfx);
	} else if (kind <= 4) {
		unsigned int w = src_pick(s, 5);

		put(t, " %s=\"%s\"", src_pick(s, 2) ? "own" : "own_prefix",
		    w == 0 ? "*" : POOL(s, pool_names));
	} else {
		static const char *const ids[] = { "0", "7", "20", "*" };

		put(t, " %s=\"%s\"", kind == 5 ? "user" : "group", POOL(s, ids));
	}
	put(t, "/>\n");
}

static void gen_config(struct text *t, struct src *s)
{
	unsigned int blocks = 1 + src_pick(s, 6);

	put(t, "<busconfig>\n");
	while (blocks--) {
		unsigned int rules = src_pick(s, 16);
		unsigned int scope = src_pick(s, sizeof(pool_scopes) / sizeof(pool_scopes[0]));

		put(t, "<policy %s>\n", pool_scopes[scope]);
		while (rules--)
			gen_rule(t, s, scope < 2);
		put(t, "</policy>\n");
	}
	put(t, "</busconfig>\n");
}

/* ------------------------------------------------------------------ */
/* the reference: a forward scan, last match wins                      */

NO_COVERAGE static bool ref_connect(const struct bus_config *c, uint32_t uid, const uint32_t *gids,
			size_t n_gids, uint32_t bus_uid, const struct bus_policy_rule **rulep)
{
	static const enum bus_policy_scope order[] = {
		BUS_POLICY_SCOPE_DEFAULT, BUS_POLICY_SCOPE_MANDATORY,
	};
	const struct bus_policy_rule *r;
	bool allowed = uid == bus_uid;

	*rulep = NULL;
	for (size_t o = 0; o < 2; o++) {
		list_for_each_entry(r, &c->rules, link) {
			bool match = false;

			if (r->scope != order[o])
				continue;
			if (r->type == BUS_POLICY_RULE_USER) {
				match = r->id_any || r->id == uid;
			} else if (r->type == BUS_POLICY_RULE_GROUP) {
				/* group="*" matches even a peer without groups */
				match = r->id_any;
				for (size_t g = 0; g < n_gids && !match; g++)
					match = r->id == gids[g];
			}
			if (match) {
				allowed = r->allow;
				*rulep = r;
			}
		}
	}
	return allowed;
}

/* ------------------------------------------------------------------ */

#define MAX_STRINGS 64
#define MAX_IDS 8

/* values the decisions draw from: the pools plus whatever the rules name */
struct vocab {
	const char *s[MAX_STRINGS];
	size_t n;
	uint32_t users[MAX_IDS], groups[MAX_IDS];
	size_t n_users, n_groups;
};

NO_COVERAGE static void vocab_add(struct vocab *v, const char *s)
{
	if (s && v->n < MAX_STRINGS)
		v->s[v->n++] = s;
}

NO_COVERAGE static void vocab_id(uint32_t *ids, size_t *n, uint32_t id)
{
	for (size_t i = 0; i < *n; i++)
		if (ids[i] == id)
			return;
	if (*n < MAX_IDS)
		ids[(*n)++] = id;
}

NO_COVERAGE static void vocab_init(struct vocab *v, const struct bus_config *c)
{
	const struct bus_policy_rule *r;

	memset(v, 0, sizeof(*v));
	for (size_t i = 0; i < sizeof(pool_names) / sizeof(pool_names[0]); i++)
		vocab_add(v, pool_names[i]);
	vocab_add(v, pool_ifaces[0]);
	vocab_add(v, pool_members[0]);
	vocab_add(v, pool_paths[0]);
	vocab_add(v, pool_errors[0]);
	vocab_id(v->users, &v->n_users, 0);
	vocab_id(v->users, &v->n_users, 4242);
	list_for_each_entry(r, &c->rules, link) {
		vocab_add(v, r->name);
		vocab_add(v, r->interface);
		vocab_add(v, r->member);
		vocab_add(v, r->path);
		vocab_add(v, r->error);
		if (r->scope == BUS_POLICY_SCOPE_USER)
			vocab_id(v->users, &v->n_users, r->scope_id);
		else if (r->scope == BUS_POLICY_SCOPE_GROUP)
			vocab_id(v->groups, &v->n_groups, r->scope_id);
		if (r->type == BUS_POLICY_RULE_USER && !r->id_any)
			vocab_id(v->users, &v->n_users, r->id);
		else if (r->type == BUS_POLICY_RULE_GROUP && !r->id_any)
			vocab_id(v->groups, &v->n_groups, r->id);
	}
}

NO_COVERAGE static const char *vocab_maybe(const struct vocab *v, struct src *s)
{
	return src_pick(s, 4) == 0 ? NULL : v->s[src_pick(s, (unsigned int)v->n)];
}

NO_COVERAGE static void random_msg(struct ref_msg *x, const struct vocab *v, struct src *s)
{
	memset(x, 0, sizeof(*x));
	x->m.type = 1 + (int)src_pick(s, 4);
	x->m.path = vocab_maybe(v, s);
	x->m.interface = vocab_maybe(v, s);
	x->m.member = vocab_maybe(v, s);
	x->m.error_name = vocab_maybe(v, s);
	x->m.destination = vocab_maybe(v, s);
	x->m.sender = vocab_maybe(v, s);
	x->m.is_reply = src_pick(s, 2);
	x->m.requested_reply = x->m.is_reply && src_pick(s, 2);
	x->m.n_fds = src_pick(s, 4);
	x->use_peer = src_pick(s, 2);
	x->peer.n_names = src_pick(s, 4);
	for (size_t i = 0; i < x->peer.n_names; i++)
		x->names[i] = v->s[src_pick(s, (unsigned int)v->n)];
	x->peer.names = x->names;
	x->eavesdropping = src_pick(s, 2);
	x->own = v->s[src_pick(s, (unsigned int)v->n)];
}

NO_COVERAGE static bool same_rule(const struct bus_policy_rule *a, const struct bus_policy_rule *b)
{
	if (!a || !b)
		return a == b;
	return a->line == b->line && a->allow == b->allow && a->type == b->type &&
	       a->scope == b->scope;
}

static void describe(const struct bus_policy_rule *r)
{
	char *d;

	if (!r)
		return;
	d = bus_policy_rule_describe(r);
	if (d && !*d)
		abort();
	free(d);
}

static void verdict(bool want, const struct bus_policy_rule *want_rule, bool got,
		    const struct bus_policy_rule *got_rule, const char *what)
{
	if (want == got && same_rule(want_rule, got_rule))
		return;
	fprintf(stderr, "%s: reference %s (line %u), compiled %s (line %u)\n", what,
		want ? "allow" : "deny", want_rule ? want_rule->line : 0, got ? "allow" : "deny",
		got_rule ? got_rule->line : 0);
	abort();
}

static void ignore_warning(void *userdata, const char *message)
{
	(void)userdata;
	(void)message;
}

static void decide(const struct bus_config *config, const struct bus_policy *policy,
		   struct src *s)
{
	static const struct bus_policy_rule *list[8192];
	struct vocab v;

	vocab_init(&v, config);
	for (unsigned int who = 0; who < 4; who++) {
		uint32_t gids[MAX_IDS];
		size_t n_gids = 0, n;
		uint32_t uid = v.users[src_pick(s, (unsigned int)v.n_users)];
		bool console = src_pick(s, 2);
		struct bus_client_policy *client = NULL;
		const struct bus_policy_rule *want, *got;
		bool a, b;
		int r;

		for (size_t i = 0; i < v.n_groups; i++)
			if (src_pick(s, 2))
				gids[n_gids++] = v.groups[i];

		a = ref_connect(config, uid, gids, n_gids, 0, &want);
		b = bus_policy_check_connect(policy, uid, gids, n_gids, 0, &got);
		verdict(a, want, b, got, "connect");

		r = bus_client_policy_new(&client, policy, uid, gids, n_gids, console);
		if (r == -ENOMEM)
			continue;
		if (r != 0 || !client)
			abort();
		n = ref_rules(config, uid, gids, n_gids, console, list);
		if (n > sizeof(list) / sizeof(list[0]))
			abort();

		for (unsigned int k = 0; k < 16; k++) {
			struct ref_msg x;

			random_msg(&x, &v, s);
			a = ref_check(list, n, BUS_POLICY_RULE_SEND, &x, &want);
			b = bus_client_policy_check_send(client, &x.m, x.use_peer ? &x.peer : NULL,
							 &got);
			verdict(a, want, b, got, "send");
			describe(got);
			a = ref_check(list, n, BUS_POLICY_RULE_RECEIVE, &x, &want);
			b = bus_client_policy_check_receive(client, &x.m,
							    x.use_peer ? &x.peer : NULL,
							    x.eavesdropping, &got);
			verdict(a, want, b, got, "receive");
			a = ref_check(list, n, BUS_POLICY_RULE_OWN, &x, &want);
			b = bus_client_policy_check_own(client, x.own, &got);
			verdict(a, want, b, got, "own");
			describe(got);
		}
		bus_client_policy_free(client);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const struct bus_config_options opts = {
		.no_listen_ok = true,
		.warn = ignore_warning,
	};
	struct bus_config *config = NULL;
	struct bus_policy *policy = NULL;
	struct text gen = {};
	const uint8_t *xml = data, *rest = NULL;
	size_t n_xml = size, n_rest = 0, n_rules = 0;
	const struct bus_policy_rule *rule;
	char *error = NULL;
	struct src s;
	int r;

	if (size > 0 && data[0] == '<') {
		const uint8_t *nul = memchr(data, 0, size);

		if (nul) {
			n_xml = (size_t)(nul - data);
			rest = nul + 1;
			n_rest = size - n_xml - 1;
		}
		src_init(&s, rest, n_rest, data, size);
	} else {
		src_init(&s, data, size, data, size);
		gen_config(&gen, &s);
		if (gen.failed) {
			free(gen.buf);
			return 0;
		}
		xml = (const uint8_t *)gen.buf;
		n_xml = gen.len;
	}

	r = bus_config_load_buffer(&config, xml, n_xml, "/nonexistent-fuzz/policy.conf", &opts,
				   &error);
	if (getenv("FUZZ_POLICY_DEBUG"))
		fprintf(stderr, "%s: load %d %s\n", xml == data ? "xml" : "generated", r,
			error ? error : "");
	if (r < 0 && r != -ENOMEM)
		abort();
	if (r > 0 && (!error || !*error))
		abort();
	if (r != 0)
		goto out;

	list_for_each_entry(rule, &config->rules, link)
		n_rules++;
	/* the reference list holds each rule at most once per client */
	if (n_rules > 8192)
		goto out;

	r = bus_policy_new(&policy, config);
	if (r == -ENOMEM)
		goto out;
	if (r != 0 || !policy)
		abort();
	decide(config, policy, &s);

out:
	bus_policy_free(policy);
	bus_config_free(config);
	free(error);
	free(gen.buf);
	return 0;
}
