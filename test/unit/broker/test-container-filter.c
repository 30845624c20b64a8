/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * broker/containers/container-filter.c: xdg-dbus-proxy's options compiled as its
 * 0.1.4 reads them (levels, NAME.*, RULE split at the last dot, paths and
 * subtrees) and which rules a well-known name matches. The verdicts on
 * messages are compared with the real xdg-dbus-proxy by
 * test/integration/test_container_filter.py.
 */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "broker/containers/container-filter.h"
#include "util/macro.h"
#include "check.h"

static struct container_filter *compile(const char *const *opts, size_t n)
{
	struct container_filter *f = NULL;
	char *err = NULL;
	int r = container_filter_new(&f, opts, n, &err);

	if (r)
		CHECK_FAIL("options refused (%d): %s", r, err ? err : "");
	return f;
}

static bool refused(const char *opt)
{
	struct container_filter *f = NULL;
	char *err = NULL;
	int r = container_filter_new(&f, &opt, 1, &err);

	CHECK(r == 0 || r == FILTER_E_INVALID);
	if (r == 0) {
		container_filter_unref(f);
		return false;
	}
	CHECK(err && strstr(err, opt));
	free(err);
	return true;
}

static uint8_t level_of(const struct container_filter *f, const char *name)
{
	struct filter_match m;

	container_filter_match_name(f, name, &m);
	return m.level;
}

static void test_refused(void)
{
	static const char *const bad[] = {
		"--see=:1.5", "--talk=org", "--own=org..foo", "--talk=", "--call=org.foo",
		"--broadcast=org.foo", "--frobnicate", "--log=x", "--filter",
	};
	static const char *const good[] = {
		"--see=org.foo", "--talk=org.foo.*", "--own=org.foo", "--call=org.foo=*",
		"--call==x", "--call=org..bad=@/x", "--broadcast=org.foo.*=a.b@/c/*",
		"--sloppy-names", "--log",
	};
	const char *many[FILTER_MAX_OPTIONS + 1];
	struct container_filter *f = NULL;
	char *err = NULL, *longopt;

	for (size_t i = 0; i < ARRAY_SIZE(bad); i++)
		if (!refused(bad[i]))
			CHECK_FAIL("%s was accepted", bad[i]);
	for (size_t i = 0; i < ARRAY_SIZE(good); i++)
		if (refused(good[i]))
			CHECK_FAIL("%s was refused", good[i]);

	for (size_t i = 0; i < ARRAY_SIZE(many); i++)
		many[i] = "--see=org.foo";
	CHECK(container_filter_new(&f, many, ARRAY_SIZE(many), &err) == FILTER_E_INVALID);
	free(err);
	f = compile(many, FILTER_MAX_OPTIONS);
	CHECK_EQ(f->n_rules, (size_t)FILTER_MAX_OPTIONS + 1);
	container_filter_unref(f);

	longopt = malloc(FILTER_MAX_OPTION_LEN + 2);
	CHECK(longopt);
	memset(longopt, 'a', FILTER_MAX_OPTION_LEN + 1);
	memcpy(longopt, "--call=org.foo=", 15);
	longopt[FILTER_MAX_OPTION_LEN + 1] = '\0';
	CHECK(container_filter_new(&f, (const char *const *)&longopt, 1, &err) ==
	      FILTER_E_INVALID);
	free(err);
	free(longopt);
}

static void test_names(void)
{
	static const char *const opts[] = {
		"--talk=org.foo.*", "--see=org.bar", "--own=org.bar", "--see=org.baz",
		"--talk=org.baz", "--see=org.quux.*", "--call=org.rules=x.y",
	};
	struct container_filter *f = compile(opts, ARRAY_SIZE(opts));
	struct filter_match m;

	/* NAME.* is the name and everything below it, at any depth. */
	CHECK_EQ(level_of(f, "org.foo"), FILTER_TALK);
	CHECK_EQ(level_of(f, "org.foo.a.b"), FILTER_TALK);
	CHECK_EQ(level_of(f, "org.foobar"), FILTER_NONE);
	/* An exact name is only itself. */
	CHECK_EQ(level_of(f, "org.bar.baz"), FILTER_NONE);
	/* Options accumulate: the highest level counts. */
	CHECK_EQ(level_of(f, "org.bar"), FILTER_OWN);
	CHECK_EQ(level_of(f, "org.baz"), FILTER_TALK);
	CHECK_EQ(level_of(f, "org.quux.x"), FILTER_SEE);
	/* A rule alone raises its name to TALK (visible, rules decide). */
	CHECK_EQ(level_of(f, "org.rules"), FILTER_TALK);
	/* The bus is always TALK; no destination is TALK, everything. */
	CHECK_EQ(level_of(f, "org.freedesktop.DBus"), FILTER_TALK);
	container_filter_match_name(f, NULL, &m);
	CHECK(m.level == FILTER_TALK && m.unrestricted);
	/* The rules matched: org.foo.a.b only the wildcard (index 1). */
	container_filter_match_name(f, "org.foo.a.b", &m);
	CHECK(m.bits[0] == UINT64_C(1) << 1 && !m.bits[1]);
	container_filter_match_name(f, "org.bar", &m);
	CHECK(m.bits[0] == ((UINT64_C(1) << 2) | (UINT64_C(1) << 3)));
	container_filter_unref(f);
}

struct rule_case {
	const char *option;
	const char *name, *interface, *member, *path;
	bool subtree, path_subtree;
	uint8_t types;
};

static void test_rules(void)
{
	static const struct rule_case cases[] = {
		/* Split at the last dot: org.foo.Iface is interface org.foo, member Iface. */
		{ "--call=org.a=org.foo.Iface", "org.a", "org.foo", "Iface", NULL, false, false,
		  FILTER_TYPE_CALL },
		{ "--call=org.a=org.foo.Iface.*", "org.a", "org.foo.Iface", NULL, NULL, false, false,
		  FILTER_TYPE_CALL },
		{ "--call=org.a=org.foo.Iface.Method@/obj", "org.a", "org.foo.Iface", "Method", "/obj",
		  false, false, FILTER_TYPE_CALL },
		{ "--call=org.a.*=*@/obj/*", "org.a", NULL, NULL, "/obj", true, true,
		  FILTER_TYPE_CALL },
		{ "--call=org.a=@/*", "org.a", NULL, NULL, "", false, true, FILTER_TYPE_CALL },
		{ "--call=org.a=Iface", "org.a", "Iface", NULL, NULL, false, false, FILTER_TYPE_CALL },
		{ "--call=org.a=", "org.a", NULL, NULL, NULL, false, false, FILTER_TYPE_CALL },
		{ "--call=org.a=@", "org.a", NULL, NULL, NULL, false, false, FILTER_TYPE_CALL },
		{ "--broadcast=org.a=org.foo.Sig.Changed@/p", "org.a", "org.foo.Sig", "Changed", "/p",
		  false, false, FILTER_TYPE_BROADCAST },
		{ "--talk=org.a.*", "org.a", NULL, NULL, NULL, true, false, FILTER_TYPE_ALL },
	};

	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		const struct rule_case *c = &cases[i];
		struct container_filter *f = compile(&c->option, 1);
		const struct filter_rule *r = &f->rules[1];

		CHECK_EQ(f->n_rules, (size_t)2);
		CHECK_STR(r->name, c->name);
		CHECK_EQ(r->subtree, c->subtree);
		CHECK_EQ(r->types, c->types);
		CHECK_EQ(r->path_subtree, c->path_subtree);
		if (c->interface ? !r->interface || strcmp(r->interface, c->interface) : !!r->interface)
			CHECK_FAIL("%s: interface %s", c->option, r->interface ?: "(any)");
		if (c->member ? !r->member || strcmp(r->member, c->member) : !!r->member)
			CHECK_FAIL("%s: member %s", c->option, r->member ?: "(any)");
		if (c->path ? !r->path || strcmp(r->path, c->path) : !!r->path)
			CHECK_FAIL("%s: path %s", c->option, r->path ?: "(any)");
		container_filter_unref(f);
	}
	{
		const char *opt = "--sloppy-names";
		struct container_filter *f = compile(&opt, 1);

		CHECK(f->sloppy_names && f->n_rules == 1 && f->n_options == 1);
		container_filter_unref(f);
	}
	{
		const char *opt = "--log";
		struct container_filter *f = compile(&opt, 1);

		/* a flag: no rule, kept among the options (they cross a re-exec) */
		CHECK(f->log && !f->sloppy_names && f->n_rules == 1 && f->n_options == 1);
		container_filter_unref(f);
	}
}

int main(void)
{
	test_refused();
	test_names();
	test_rules();
	printf("container-filter: ok\n");
	return 0;
}
