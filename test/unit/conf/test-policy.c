/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * conf/policy.c: compiled policy decisions, rule by rule, with dbus-daemon's
 * precedence and matching quirks; then the real system.conf of this machine;
 * then a timing of the hot-path check.
 */

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "conf/config.h"
#include "conf/policy.h"
#include "policy-reference.h"
#include "test.h"

static struct bus_policy *compile(const char *text)
{
	struct bus_config_options o = { .no_listen_ok = true };
	struct bus_config *c = NULL;
	struct bus_policy *p = NULL;
	char *err = NULL;
	int r;

	r = bus_config_load_buffer(&c, text, strlen(text), "/test/policy.conf", &o, &err);
	if (r)
		fprintf(stderr, "config failed: %s\n%s\n", err ? err : "", text);
	CHECK(r == 0);
	CHECK(bus_policy_new(&p, c) == 0);
	bus_config_free(c);	/* the policy keeps its own copies */
	return p;
}

static struct bus_client_policy *client(struct bus_policy *p, uint32_t uid,
					const uint32_t *gids, size_t n, bool console)
{
	struct bus_client_policy *c = NULL;

	CHECK(bus_client_policy_new(&c, p, uid, gids, n, console) == 0);
	return c;
}

#define P(body) "<busconfig>" body "</busconfig>"

static void test_own_precedence(void)
{
	struct bus_policy *p;
	struct bus_client_policy *c;
	const struct bus_policy_rule *rule;
	const uint32_t g100[] = { 100 }, g100_200[] = { 100, 200 }, g200_100[] = { 200, 100 };

	p = compile(P("<policy context=\"mandatory\"><deny own=\"m.n\"/></policy>\n"
		      "<policy context=\"default\"><allow own=\"*\"/><deny own=\"x.y\"/>"
		      "<deny own_prefix=\"pre.fix\"/></policy>\n"
		      "<policy group=\"100\"><allow own=\"x.y\"/></policy>\n"
		      "<policy group=\"200\"><deny own=\"x.y\"/></policy>\n"
		      "<policy user=\"1000\"><deny own=\"x.y\"/><allow own=\"m.n\"/></policy>\n"
		      "<policy at_console=\"true\"><allow own=\"x.y\"/></policy>\n"
		      "<policy at_console=\"false\"><allow own=\"pre.fix.b\"/></policy>\n"));

	c = client(p, 2000, NULL, 0, false);
	CHECK(bus_client_policy_check_own(c, "a.b", &rule));
	CHECK(rule && rule->allow && rule->name == NULL);
	CHECK(!bus_client_policy_check_own(c, "x.y", &rule));	/* last match in default */
	CHECK(rule && rule->line == 2);
	CHECK(!bus_client_policy_check_own(c, "m.n", &rule));	/* mandatory */
	CHECK(rule && rule->scope == BUS_POLICY_SCOPE_MANDATORY);
	CHECK_STR(rule->file, "/test/policy.conf");
	CHECK(!bus_client_policy_check_own(c, "pre.fix", NULL));
	CHECK(!bus_client_policy_check_own(c, "pre.fix.a.b", NULL));
	CHECK(bus_client_policy_check_own(c, "pre.fixed", NULL));	/* word prefix */
	CHECK(bus_client_policy_check_own(c, "pre.fix.b", NULL));	/* at_console=false */
	bus_client_policy_free(c);

	c = client(p, 2000, NULL, 0, true);
	CHECK(bus_client_policy_check_own(c, "x.y", NULL));		/* at_console=true */
	CHECK(!bus_client_policy_check_own(c, "pre.fix.b", NULL));
	bus_client_policy_free(c);

	c = client(p, 2000, g100, 1, false);
	CHECK(bus_client_policy_check_own(c, "x.y", &rule));		/* group over default */
	CHECK(rule && rule->scope == BUS_POLICY_SCOPE_GROUP && rule->scope_id == 100);
	bus_client_policy_free(c);

	c = client(p, 2000, g100_200, 2, false);	/* groups apply in the given order */
	CHECK(!bus_client_policy_check_own(c, "x.y", NULL));
	bus_client_policy_free(c);
	c = client(p, 2000, g200_100, 2, false);
	CHECK(bus_client_policy_check_own(c, "x.y", NULL));
	bus_client_policy_free(c);

	c = client(p, 1000, g100, 1, false);		/* user over group */
	CHECK(!bus_client_policy_check_own(c, "x.y", &rule));
	CHECK(rule && rule->scope == BUS_POLICY_SCOPE_USER);
	CHECK(!bus_client_policy_check_own(c, "m.n", NULL));	/* mandatory over user */
	bus_client_policy_free(c);

	c = client(p, 1000, g100, 1, true);		/* console over user */
	CHECK(bus_client_policy_check_own(c, "x.y", &rule));
	CHECK(rule && rule->scope == BUS_POLICY_SCOPE_CONSOLE);
	bus_client_policy_free(c);
	bus_policy_free(p);

	/* nothing matches: denied, no rule */
	p = compile(P(""));
	c = client(p, 0, NULL, 0, false);
	CHECK(!bus_client_policy_check_own(c, "a.b", &rule));
	CHECK(rule == NULL);
	bus_client_policy_free(c);
	bus_policy_free(p);
}

static struct bus_policy_message call(const char *dest, const char *iface, const char *member)
{
	return (struct bus_policy_message){
		.type = BUS_MESSAGE_TYPE_METHOD_CALL,
		.path = "/obj",
		.interface = iface,
		.member = member,
		.destination = dest,
		.sender = ":1.1",
	};
}

static void test_send(void)
{
	const char *const names[] = { ":1.5", "org.a", "com.example.App" };
	const struct bus_policy_peer recv = { names, ARRAY_SIZE(names) };
	struct bus_policy_message m;
	const struct bus_policy_rule *rule;
	struct bus_client_policy *c;
	struct bus_policy *p;

	/* replies: requested_reply defaults (allow: true, deny: false) */
	p = compile(P("<policy context=\"default\">\n"
		      "<allow send_type=\"method_return\"/>\n"
		      "<allow send_type=\"error\" send_requested_reply=\"false\"/>\n"
		      "</policy>"));
	c = client(p, 1, NULL, 0, false);
	m = (struct bus_policy_message){ .type = BUS_MESSAGE_TYPE_METHOD_RETURN, .is_reply = true,
					 .destination = ":1.5" };
	CHECK(!bus_client_policy_check_send(c, &m, &recv, &rule));	/* unrequested */
	CHECK(rule == NULL);
	m.requested_reply = true;
	CHECK(bus_client_policy_check_send(c, &m, &recv, &rule));
	CHECK(rule && rule->line == 2);
	m = (struct bus_policy_message){ .type = BUS_MESSAGE_TYPE_ERROR, .is_reply = true,
					 .destination = ":1.5", .error_name = "x.E" };
	CHECK(bus_client_policy_check_send(c, &m, &recv, NULL));	/* requested_reply=false */
	bus_client_policy_free(c);
	bus_policy_free(p);

	p = compile(P("<policy context=\"default\">\n"
		      "<allow send_destination=\"*\"/>\n"
		      "<deny send_type=\"method_return\"/>\n"
		      "<deny send_type=\"error\" send_requested_reply=\"true\"/>\n"
		      "<allow send_type=\"signal\" send_requested_reply=\"true\" eavesdrop=\"true\"/>\n"
		      "</policy>"));
	c = client(p, 1, NULL, 0, false);
	m = (struct bus_policy_message){ .type = BUS_MESSAGE_TYPE_METHOD_RETURN, .is_reply = true,
					 .requested_reply = true, .destination = ":1.5" };
	/* the deny only concerns unrequested replies; the allow (requested_reply
	 * defaults to true) covers the requested one */
	CHECK(bus_client_policy_check_send(c, &m, &recv, &rule));
	CHECK(rule && rule->line == 2);
	m.requested_reply = false;
	CHECK(!bus_client_policy_check_send(c, &m, &recv, &rule));
	CHECK(rule && rule->line == 3);
	m.type = BUS_MESSAGE_TYPE_ERROR;
	m.requested_reply = true;
	CHECK(!bus_client_policy_check_send(c, &m, &recv, &rule));	/* deny always applies */
	CHECK(rule && rule->line == 4);
	bus_client_policy_free(c);
	bus_policy_free(p);

	/* interface quirk: allow never matches a message without interface, deny always */
	p = compile(P("<policy context=\"default\">\n"
		      "<allow send_interface=\"org.a.I\"/>\n"
		      "</policy>"));
	c = client(p, 1, NULL, 0, false);
	m = call("org.a", "org.a.I", "M");
	CHECK(bus_client_policy_check_send(c, &m, &recv, NULL));
	m.interface = NULL;
	CHECK(!bus_client_policy_check_send(c, &m, &recv, NULL));
	m.interface = "org.a.J";
	CHECK(!bus_client_policy_check_send(c, &m, &recv, NULL));
	bus_client_policy_free(c);
	bus_policy_free(p);

	p = compile(P("<policy context=\"default\">\n"
		      "<allow send_destination=\"*\"/>\n"
		      "<deny send_interface=\"org.a.I\" send_member=\"Bad\"/>\n"
		      "<deny send_path=\"/secret\"/>\n"
		      "<deny send_type=\"error\" send_error=\"org.E\"/>\n"
		      "</policy>"));
	c = client(p, 1, NULL, 0, false);
	m = call("org.a", NULL, "Bad");
	CHECK(!bus_client_policy_check_send(c, &m, &recv, &rule));	/* no interface: deny */
	CHECK(rule && rule->line == 3);
	m.member = "Good";
	CHECK(bus_client_policy_check_send(c, &m, &recv, NULL));
	m.member = NULL;	/* a rule's member matches a message without member */
	m.interface = "org.a.I";
	CHECK(!bus_client_policy_check_send(c, &m, &recv, NULL));
	m = call("org.a", "x.y", "M");
	m.path = "/secret";
	CHECK(!bus_client_policy_check_send(c, &m, &recv, NULL));
	m.path = NULL;	/* likewise for path */
	CHECK(!bus_client_policy_check_send(c, &m, &recv, NULL));
	m.path = "/public";
	CHECK(bus_client_policy_check_send(c, &m, &recv, NULL));
	m = (struct bus_policy_message){ .type = BUS_MESSAGE_TYPE_ERROR, .is_reply = true,
					 .requested_reply = true, .path = "/public",
					 .error_name = "org.Other" };
	CHECK(bus_client_policy_check_send(c, &m, &recv, NULL));
	m.error_name = "org.E";
	/* the <deny send_error> has requested_reply false by default: a requested reply passes */
	CHECK(bus_client_policy_check_send(c, &m, &recv, NULL));
	m.requested_reply = false;
	CHECK(!bus_client_policy_check_send(c, &m, &recv, NULL));
	bus_client_policy_free(c);
	bus_policy_free(p);

	/* destinations: names owned by the receiver, or the message field for the driver */
	p = compile(P("<policy context=\"default\">\n"
		      "<allow send_destination=\"org.a\"/>\n"
		      "<allow send_destination=\":1.7\"/>\n"
		      "<allow send_destination_prefix=\"com.example\"/>\n"
		      "<deny send_destination_prefix=\"com.example.App.Private\"/>\n"
		      "</policy>"));
	c = client(p, 1, NULL, 0, false);
	/* addressed by unique name; :1.5 also owns org.a and com.example.App, and the
	 * later prefix rule is the one that decides */
	m = call(":1.5", "i.f", "M");
	CHECK(bus_client_policy_check_send(c, &m, &recv, &rule));
	CHECK(rule && rule->line == 4);
	{
		const char *const n1[] = { ":1.5", "org.a" };
		const struct bus_policy_peer r1 = { n1, 2 };

		CHECK(bus_client_policy_check_send(c, &m, &r1, &rule));
		CHECK(rule && rule->line == 2);
	}
	{
		const char *const n2[] = { ":1.7" }, *const n3[] = { ":1.8", "com.exampleX" },
				  *const n4[] = { ":1.9", "com.example.App.Private.X" };
		const struct bus_policy_peer r2 = { n2, 1 }, r3 = { n3, 2 }, r4 = { n4, 2 };

		CHECK(bus_client_policy_check_send(c, &m, &r2, NULL));
		CHECK(!bus_client_policy_check_send(c, &m, &r3, NULL));
		CHECK(!bus_client_policy_check_send(c, &m, &r4, NULL));
	}
	m = call("org.freedesktop.DBus", "org.freedesktop.DBus", "Hello");
	CHECK(!bus_client_policy_check_send(c, &m, NULL, NULL));
	m.destination = "org.a";	/* activation: receiver not there yet */
	CHECK(bus_client_policy_check_send(c, &m, NULL, NULL));
	m.destination = "com.example.Foo";
	CHECK(bus_client_policy_check_send(c, &m, NULL, NULL));
	m.destination = "com.example.App.Private";
	CHECK(!bus_client_policy_check_send(c, &m, NULL, NULL));
	m.destination = NULL;
	CHECK(!bus_client_policy_check_send(c, &m, NULL, NULL));
	bus_client_policy_free(c);
	bus_policy_free(p);

	/* broadcast and fds */
	p = compile(P("<policy context=\"default\">\n"
		      "<allow send_type=\"signal\" send_broadcast=\"true\"/>\n"
		      "<allow send_type=\"method_call\" min_fds=\"1\" max_fds=\"2\"/>\n"
		      "<deny send_type=\"signal\" send_broadcast=\"false\" send_interface=\"x.y\"/>\n"
		      "</policy>"));
	c = client(p, 1, NULL, 0, false);
	m = (struct bus_policy_message){ .type = BUS_MESSAGE_TYPE_SIGNAL, .interface = "x.y",
					 .member = "S", .path = "/" };
	CHECK(bus_client_policy_check_send(c, &m, NULL, NULL));
	m.destination = ":1.5";	/* unicast signal */
	CHECK(!bus_client_policy_check_send(c, &m, &recv, &rule));
	CHECK(rule && rule->line == 4);
	m = call(":1.5", "a.b", "M");
	CHECK(!bus_client_policy_check_send(c, &m, &recv, NULL));
	m.n_fds = 1;
	CHECK(bus_client_policy_check_send(c, &m, &recv, NULL));
	m.n_fds = 2;
	CHECK(bus_client_policy_check_send(c, &m, &recv, NULL));
	m.n_fds = 3;
	CHECK(!bus_client_policy_check_send(c, &m, &recv, NULL));
	bus_client_policy_free(c);
	bus_policy_free(p);

	/*
	 * dbus-daemon quirk kept on purpose: a rule's error name (like path and
	 * member) matches a message that has none, so this deny catches calls.
	 */
	p = compile(P("<policy context=\"default\">\n"
		      "<allow send_destination=\"*\"/>\n"
		      "<deny send_error=\"org.E\"/>\n"
		      "</policy>"));
	c = client(p, 1, NULL, 0, false);
	m = call(":1.5", "a.b", "M");
	CHECK(!bus_client_policy_check_send(c, &m, &recv, &rule));
	CHECK(rule && rule->line == 3);
	bus_client_policy_free(c);
	bus_policy_free(p);
}

static void test_receive(void)
{
	const char *const names[] = { ":1.3", "org.sender" };
	const struct bus_policy_peer snd = { names, 2 };
	const struct bus_policy_rule *rule;
	struct bus_policy_message m;
	struct bus_client_policy *c;
	struct bus_policy *p;

	p = compile(P("<policy context=\"default\">\n"
		      "<allow receive_type=\"signal\"/>\n"
		      "<allow receive_sender=\"org.sender\" eavesdrop=\"true\"/>\n"
		      "<deny receive_interface=\"bad.I\" eavesdrop=\"true\"/>\n"
		      "<allow receive_sender=\"org.freedesktop.DBus\"/>\n"
		      "</policy>"));
	c = client(p, 1, NULL, 0, false);
	m = (struct bus_policy_message){ .type = BUS_MESSAGE_TYPE_SIGNAL, .interface = "a.I",
					 .sender = ":1.9", .destination = ":1.4" };
	CHECK(bus_client_policy_check_receive(c, &m, NULL, false, &rule));
	CHECK(rule && rule->line == 2);
	/* eavesdropping: the allow without eavesdrop="true" does not apply */
	CHECK(!bus_client_policy_check_receive(c, &m, NULL, true, NULL));
	/* ... unless the message is a broadcast (no destination) */
	m.destination = NULL;
	CHECK(bus_client_policy_check_receive(c, &m, NULL, true, NULL));
	m.destination = ":1.4";
	CHECK(bus_client_policy_check_receive(c, &m, &snd, true, &rule));
	CHECK(rule && rule->line == 3);
	/* <deny eavesdrop="true"> applies only to eavesdropping */
	m.interface = "bad.I";
	CHECK(!bus_client_policy_check_receive(c, &m, &snd, true, &rule));
	CHECK(rule && rule->line == 4);
	CHECK(bus_client_policy_check_receive(c, &m, &snd, false, &rule));
	CHECK(rule && rule->line == 3);
	/* from the bus driver: compare the sender field */
	m = (struct bus_policy_message){ .type = BUS_MESSAGE_TYPE_METHOD_CALL, .interface = "x.y",
					 .sender = "org.freedesktop.DBus", .destination = ":1.4" };
	CHECK(bus_client_policy_check_receive(c, &m, NULL, false, &rule));
	CHECK(rule && rule->line == 5);
	m.sender = "org.other";
	CHECK(!bus_client_policy_check_receive(c, &m, NULL, false, NULL));
	bus_client_policy_free(c);
	bus_policy_free(p);
}

static void test_connect(void)
{
	const struct bus_policy_rule *rule;
	struct bus_policy *p;
	const uint32_t g[] = { 5, 50 };

	p = compile(P(""));
	CHECK(bus_policy_check_connect(p, 1000, NULL, 0, 1000, &rule));
	CHECK(rule == NULL);
	CHECK(!bus_policy_check_connect(p, 1001, NULL, 0, 1000, NULL));
	bus_policy_free(p);

	p = compile(P("<policy context=\"default\">\n"
		      "<allow user=\"*\"/>\n"
		      "<deny user=\"1001\"/>\n"
		      "<deny group=\"50\"/>\n"
		      "</policy>\n"
		      "<policy context=\"mandatory\"><allow user=\"7\"/></policy>\n"
		      "<policy at_console=\"true\"><deny user=\"*\"/></policy>\n"));
	CHECK(bus_policy_check_connect(p, 1000, NULL, 0, 0, &rule));
	CHECK(rule && rule->line == 2);
	CHECK(!bus_policy_check_connect(p, 1001, NULL, 0, 0, &rule));
	CHECK(rule && rule->line == 3);
	CHECK(!bus_policy_check_connect(p, 1000, g, 2, 0, &rule));
	CHECK(rule && rule->line == 4);
	CHECK(bus_policy_check_connect(p, 7, g, 2, 0, &rule));	/* mandatory wins */
	CHECK(rule && rule->scope == BUS_POLICY_SCOPE_MANDATORY);
	bus_policy_free(p);
}

static void test_describe(void)
{
	struct bus_policy *p;
	struct bus_client_policy *c;
	const struct bus_policy_rule *rule;
	struct bus_policy_message m = call("org.a", "org.a.I", "M");
	char *s;

	p = compile(P("<policy context=\"default\">\n"
		      "<deny send_destination=\"org.a\" send_interface=\"org.a.I\" "
		      "send_type=\"method_call\" max_fds=\"3\"/>\n"
		      "<deny own_prefix=\"org.b\"/>\n"
		      "</policy>"));
	c = client(p, 1, NULL, 0, false);
	CHECK(!bus_client_policy_check_send(c, &m, NULL, &rule));
	CHECK(rule);
	s = bus_policy_rule_describe(rule);
	CHECK_STR(s, "/test/policy.conf:2: <deny send_destination=\"org.a\" send_interface=\"org.a.I\" send_type=\"method_call\" max_fds=\"3\"/>");
	free(s);
	CHECK(!bus_client_policy_check_own(c, "org.b.c", &rule));
	CHECK(rule);
	s = bus_policy_rule_describe(rule);
	CHECK_STR(s, "/test/policy.conf:3: <deny own_prefix=\"org.b\"/>");
	free(s);
	bus_client_policy_free(c);
	bus_policy_free(p);
}

static void test_system_conf(void)
{
	const char *path = "/usr/share/dbus-1/system.conf";
	struct bus_config *config = NULL;
	struct bus_policy *p = NULL;
	struct bus_client_policy *user, *root;
	const struct bus_policy_rule *rule;
	struct bus_policy_message m;
	char *err = NULL;
	struct timespec t0, t1;
	unsigned long n = 0, allowed = 0;
	double ns;

	if (access(path, R_OK) != 0) {
		printf("SKIP: %s not installed\n", path);
		return;
	}
	CHECK(bus_config_load(&config, path, NULL, &err) == 0);
	CHECK(bus_policy_new(&p, config) == 0);
	bus_config_free(config);
	user = client(p, 1000, NULL, 0, false);
	root = client(p, 0, NULL, 0, false);

	CHECK(bus_policy_check_connect(p, 1000, NULL, 0, 100, NULL));

	m = call("org.freedesktop.DBus", "org.freedesktop.DBus", "Hello");
	CHECK(bus_client_policy_check_send(user, &m, NULL, NULL));
	m.member = "UpdateActivationEnvironment";
	CHECK(!bus_client_policy_check_send(user, &m, NULL, &rule));
	CHECK(rule && !rule->allow && strcmp(rule->file, path) == 0);
	m = call("org.freedesktop.DBus", "org.freedesktop.DBus.Monitoring", "BecomeMonitor");
	CHECK(!bus_client_policy_check_send(user, &m, NULL, NULL));
	CHECK(bus_client_policy_check_send(root, &m, NULL, NULL));

	/* method calls to other services are denied unless a system.d file allows them */
	m = call("org.example.Nobody", "org.example.Nobody", "M");
	CHECK(!bus_client_policy_check_send(user, &m, NULL, &rule));
	CHECK(rule && rule->message_type == BUS_MESSAGE_TYPE_METHOD_CALL);
	/* signals and requested replies are allowed, unrequested replies are not */
	m = (struct bus_policy_message){ .type = BUS_MESSAGE_TYPE_SIGNAL, .interface = "a.b",
					 .member = "S", .path = "/" };
	CHECK(bus_client_policy_check_send(user, &m, NULL, NULL));
	m = (struct bus_policy_message){ .type = BUS_MESSAGE_TYPE_METHOD_RETURN, .is_reply = true,
					 .destination = ":1.1", .requested_reply = true };
	CHECK(bus_client_policy_check_send(user, &m, NULL, NULL));
	CHECK(bus_client_policy_check_receive(user, &m, NULL, false, NULL));
	m.requested_reply = false;
	CHECK(!bus_client_policy_check_send(user, &m, NULL, NULL));
	CHECK(!bus_client_policy_check_receive(user, &m, NULL, false, NULL));

	CHECK(!bus_client_policy_check_own(user, "org.example.Anything", NULL));
	if (access("/usr/share/dbus-1/system.d/org.freedesktop.login1.conf", F_OK) == 0) {
		CHECK(bus_client_policy_check_own(root, "org.freedesktop.login1", NULL));
		CHECK(!bus_client_policy_check_own(user, "org.freedesktop.login1", NULL));
		m = call("org.freedesktop.login1", "org.freedesktop.DBus.Introspectable",
			 "Introspect");
		CHECK(bus_client_policy_check_send(user, &m, NULL, NULL));
		m = call("org.freedesktop.login1", "org.example.Nope", "X");
		CHECK(!bus_client_policy_check_send(user, &m, NULL, &rule));
		CHECK(rule && strstr(rule->file, "login1.conf"));
		CHECK(bus_client_policy_check_send(root, &m, NULL, NULL));
	}

	/* the hot path: a denied call (scans all send rules) and an allowed Hello */
	clock_gettime(CLOCK_MONOTONIC, &t0);
	do {
		for (int i = 0; i < 10000; i++) {
			m = call(i & 1 ? "org.freedesktop.DBus" : "org.example.Nobody",
				 "org.freedesktop.DBus", "Hello");
			allowed += bus_client_policy_check_send(user, &m, NULL, NULL);
			n++;
		}
		clock_gettime(CLOCK_MONOTONIC, &t1);
	} while ((t1.tv_sec - t0.tv_sec) * 1e9 + (t1.tv_nsec - t0.tv_nsec) < 2e8);
	ns = ((t1.tv_sec - t0.tv_sec) * 1e9 + (t1.tv_nsec - t0.tv_nsec)) / n;
	CHECK_EQ(allowed, n / 2);
	printf("system.conf: check_send %.0f ns per message (%lu checks)\n", ns, n);

	bus_client_policy_free(user);
	bus_client_policy_free(root);
	bus_policy_free(p);
}

/* ------------------------------------------------------------------ */
/*
 * Differential test: random policies and messages, checked against a plain
 * forward scan written straight from dbus-daemon's bus/policy.c (build the
 * client's list default, groups, user, console, mandatory; last match wins).
 * It guards the indexed, backwards lookup of conf/policy.c.
 */

static const char *const pool_names[] = { "a.b", "a.b.c", "a.bc", "c.d", ":1.1", ":1.2" };
static const char *const pool_ifaces[] = { "i.x", "i.y" };
static const char *const pool_members[] = { "M", "N" };
static const char *const pool_paths[] = { "/a", "/b" };
static const char *const pool_errors[] = { "e.A", "e.B" };
static const char *const pool_types[] = { "method_call", "method_return", "error", "signal" };

#define PICK(a) (a[rand() % ARRAY_SIZE(a)])

static void append(char **buf, size_t *len, const char *fmt, ...) _printf_(3, 4);
static void append(char **buf, size_t *len, const char *fmt, ...)
{
	va_list ap;
	char *s;
	int l;

	va_start(ap, fmt);
	l = vasprintf(&s, fmt, ap);
	va_end(ap);
	CHECK(l >= 0);
	*buf = realloc(*buf, *len + l + 1);
	CHECK(*buf);
	memcpy(*buf + *len, s, l + 1);
	*len += l;
	free(s);
}

static const char *tri(void)
{
	int v = rand() % 3;

	return v == 0 ? NULL : v == 1 ? "true" : "false";
}

static void random_rule(char **buf, size_t *len)
{
	int kind = rand() % 5;

	append(buf, len, "<%s", rand() % 2 ? "allow" : "deny");
	if (kind <= 1) {
		const char *pfx = kind == 0 ? "send_" : "receive_";
		bool iface = rand() % 2, path = rand() % 3 == 0;
		const char *t;
		int name = rand() % 3;

		if (name == 1)
			append(buf, len, " %s%s=\"%s\"", pfx, kind == 0 ? "destination" : "sender",
			       rand() % 5 ? PICK(pool_names) : "*");
		else if (name == 2 && kind == 0)
			append(buf, len, " send_destination_prefix=\"%s\"", PICK(pool_names));
		if (iface)
			append(buf, len, " %sinterface=\"%s\"", pfx, PICK(pool_ifaces));
		if ((iface || path) && rand() % 2)
			append(buf, len, " %smember=\"%s\"", pfx, PICK(pool_members));
		else if (!iface && rand() % 4 == 0)
			append(buf, len, " %serror=\"%s\"", pfx, PICK(pool_errors));
		if (path)
			append(buf, len, " %spath=\"%s\"", pfx, PICK(pool_paths));
		if (rand() % 2)
			append(buf, len, " %stype=\"%s\"", pfx, PICK(pool_types));
		if ((t = tri()))
			append(buf, len, " %srequested_reply=\"%s\"", pfx, t);
		if ((t = tri()))
			append(buf, len, " eavesdrop=\"%s\"", t);
		if (kind == 0 && name != 1 && (t = tri()))
			append(buf, len, " send_broadcast=\"%s\"", t);
		if (rand() % 4 == 0)
			append(buf, len, " min_fds=\"%d\"", rand() % 3);
		if (rand() % 4 == 0)
			append(buf, len, " max_fds=\"%d\"", rand() % 3);
		/* a rule needs at least one send_/receive_ attribute */
		if (!path)
			append(buf, len, " %spath=\"*\"", pfx);
	} else {
		append(buf, len, " %s=\"%s\"", rand() % 2 ? "own" : "own_prefix",
		       rand() % 5 ? PICK(pool_names) : "*");
	}
	append(buf, len, "/>\n");
}

static const char *maybe(const char *const *pool, size_t n)
{
	return rand() % 4 == 0 ? NULL : pool[rand() % n];
}
#define MAYBE(a) maybe(a, ARRAY_SIZE(a))

static void random_msg(struct ref_msg *x)
{
	memset(x, 0, sizeof(*x));
	x->m.type = 1 + rand() % 4;
	x->m.path = MAYBE(pool_paths);
	x->m.interface = MAYBE(pool_ifaces);
	x->m.member = MAYBE(pool_members);
	x->m.error_name = MAYBE(pool_errors);
	x->m.destination = MAYBE(pool_names);
	x->m.sender = MAYBE(pool_names);
	x->m.is_reply = rand() % 2;
	x->m.requested_reply = x->m.is_reply && rand() % 2;
	x->m.n_fds = rand() % 3;
	x->use_peer = rand() % 2;
	x->peer.n_names = rand() % 3;
	for (size_t i = 0; i < x->peer.n_names; i++)
		x->names[i] = PICK(pool_names);
	x->peer.names = x->names;
	x->eavesdropping = rand() % 2;
	x->own = PICK(pool_names);
}

static void test_differential(void)
{
	const uint32_t gids[] = { 10, 20 };
	unsigned long checks = 0;

	srand(1);
	for (int iter = 0; iter < 300; iter++) {
		struct bus_config_options o = { .no_listen_ok = true };
		struct bus_config *config = NULL;
		struct bus_policy *p = NULL;
		const struct bus_policy_rule *list[512];
		char *text = NULL, *err = NULL;
		size_t len = 0;
		int r;

		append(&text, &len, "<busconfig>\n");
		for (int b = 0; b < 6; b++) {
			static const char *const scopes[] = {
				"context=\"default\"", "context=\"mandatory\"", "user=\"7\"",
				"user=\"8\"", "group=\"10\"", "group=\"20\"",
				"at_console=\"true\"", "at_console=\"false\"",
			};
			append(&text, &len, "<policy %s>\n", PICK(scopes));
			for (int k = rand() % 12; k > 0; k--)
				random_rule(&text, &len);
			append(&text, &len, "</policy>\n");
		}
		append(&text, &len, "</busconfig>\n");

		r = bus_config_load_buffer(&config, text, len, "/rand.conf", &o, &err);
		if (r)
			fprintf(stderr, "random config rejected: %s\n%s", err, text);
		CHECK(r == 0);
		CHECK(bus_policy_new(&p, config) == 0);

		for (int who = 0; who < 4; who++) {
			uint32_t uid = who < 2 ? 7 : 9;
			size_t n_gids = who % 2 ? 2 : 0;
			bool console = who == 1 || who == 2;
			struct bus_client_policy *c = client(p, uid, gids, n_gids, console);
			size_t n = ref_rules(config, uid, gids, n_gids, console, list);

			CHECK(n <= ARRAY_SIZE(list));
			for (int k = 0; k < 200; k++) {
				const struct bus_policy_rule *want, *got;
				struct ref_msg x;
				bool a, b;

				random_msg(&x);
				a = ref_check(list, n, BUS_POLICY_RULE_SEND, &x, &want);
				b = bus_client_policy_check_send(c, &x.m, x.use_peer ? &x.peer : NULL,
								 &got);
				if (a != b || (want ? want->line : 0) != (got ? got->line : 0)) {
					fprintf(stderr, "send mismatch (ref %d line %u, got %d line %u) in:\n%s",
						a, want ? want->line : 0, b, got ? got->line : 0, text);
					test_failures++;
				}
				a = ref_check(list, n, BUS_POLICY_RULE_RECEIVE, &x, &want);
				b = bus_client_policy_check_receive(c, &x.m,
								    x.use_peer ? &x.peer : NULL,
								    x.eavesdropping, &got);
				if (a != b || (want ? want->line : 0) != (got ? got->line : 0)) {
					fprintf(stderr, "receive mismatch (ref %d line %u, got %d line %u) in:\n%s",
						a, want ? want->line : 0, b, got ? got->line : 0, text);
					test_failures++;
				}
				a = ref_check(list, n, BUS_POLICY_RULE_OWN, &x, &want);
				b = bus_client_policy_check_own(c, x.own, &got);
				if (a != b || (want ? want->line : 0) != (got ? got->line : 0)) {
					fprintf(stderr, "own mismatch (ref %d, got %d) for %s in:\n%s",
						a, b, x.own, text);
					test_failures++;
				}
				checks += 3;
			}
			bus_client_policy_free(c);
		}
		bus_policy_free(p);
		bus_config_free(config);
		free(text);
		if (test_failures > 5)
			break;
	}
	printf("differential: %lu checks against the reference scan\n", checks);
}

int main(void)
{
	test_own_precedence();
	test_send();
	test_receive();
	test_connect();
	test_describe();
	test_differential();
	test_system_conf();
	return test_result("test-policy");
}
