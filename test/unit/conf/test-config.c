/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * conf/config.c: the busconfig reader.
 *
 *  - the real /usr/share/dbus-1/{system,session}.conf of this machine, with
 *    their system.d / session.d includes;
 *  - one small file per element and attribute;
 *  - every error with its exact "FILE:LINE: message"; where our message is
 *    dbus-daemon's own text, the installed dbus-daemon is run on the same
 *    file and must fail with the same message (skipped if not installed);
 *  - includes: nesting, relative paths, ignore_missing, cycles, includedir
 *    order and broken files inside an includedir.
 */

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "conf/config.h"
#include "test.h"

static char tmpdir[] = "/tmp/test-conf-XXXXXX";
static char tpath[4096];
static bool have_dbus_daemon;

static void write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "we");

	CHECK(f);
	CHECK(fputs(text, f) >= 0);
	CHECK(fclose(f) == 0);
}

static size_t list_count(const struct list_node *head)
{
	size_t n = 0;

	list_for_each(pos, head)
		n++;
	return n;
}

__attribute__((noinline)) static struct bus_config_string *string_at(const struct list_node *head, size_t idx)
{
	struct bus_config_string *s;

	list_for_each_entry(s, head, link)
		if (idx-- == 0)
			return s;
	return NULL;
}

__attribute__((noinline)) static struct bus_policy_rule *rule_at(struct bus_config *c, size_t idx)
{
	struct bus_policy_rule *r;

	list_for_each_entry(r, &c->rules, link)
		if (idx-- == 0)
			return r;
	return NULL;
}

static struct bus_config *load_text_opts(const char *text, const struct bus_config_options *o)
{
	struct bus_config *c = NULL;
	char *err = NULL;
	int r;

	write_file(tpath, text);
	r = bus_config_load(&c, tpath, o, &err);
	if (r != 0)
		fprintf(stderr, "unexpected failure %d: %s\n--- input:\n%s\n", r, err ? err : "",
			text);
	CHECK(r == 0);
	CHECK(c);
	free(err);
	return c;
}

static struct bus_config *load_text(const char *text)
{
	return load_text_opts(text, NULL);
}

/* Run the installed dbus-daemon on @path; return its stderr (malloc'ed). */
static char *run_dbus_daemon(const char *path)
{
	char cmd[8192];
	char *out = NULL;
	size_t n = 0;
	FILE *f;

	snprintf(cmd, sizeof(cmd),
		 "timeout 5 dbus-daemon --config-file='%s' --nofork --nopidfile --print-address=9 "
		 "9>/dev/null 2>&1 </dev/null", path);
	f = popen(cmd, "r");
	CHECK(f);
	for (;;) {
		char buf[1024];
		size_t l = fread(buf, 1, sizeof(buf), f);

		if (l == 0)
			break;
		out = realloc(out, n + l + 1);
		CHECK(out);
		memcpy(out + n, buf, l);
		n += l;
		out[n] = '\0';
	}
	pclose(f);
	return out ? out : strdup("");
}

/*
 * @text must fail with "PATH:LINE: MSG" (or "PATH: MSG" for line 0).
 * @dbus_same: dbus-daemon 1.14 reports exactly @msg for this file too.
 */
static void expect_error_opts(const char *text, unsigned int line, const char *msg,
			      bool dbus_same, const struct bus_config_options *o)
{
	struct bus_config *c = NULL;
	char *err = NULL, *want;
	int r;

	write_file(tpath, text);
	r = bus_config_load(&c, tpath, o, &err);
	if (r != BUS_CONFIG_E_INVALID)
		fprintf(stderr, "expected failure, got %d for:\n%s\n", r, text);
	CHECK_EQ(r, BUS_CONFIG_E_INVALID);
	CHECK(c == NULL);
	if (line)
		CHECK(asprintf(&want, "%s:%u: %s", tpath, line, msg) > 0);
	else
		CHECK(asprintf(&want, "%s: %s", tpath, msg) > 0);
	CHECK_STR(err, want);
	free(want);
	free(err);
	bus_config_free(c);

	if (dbus_same && have_dbus_daemon) {
		char *out = run_dbus_daemon(tpath);

		if (!strstr(out, msg)) {
			fprintf(stderr, "dbus-daemon disagrees on:\n%s\n  dbus-daemon said: %s\n"
				"  we said: %s\n", text, out, msg);
			test_failures++;
		}
		free(out);
	}
}

static void expect_error(const char *text, unsigned int line, const char *msg, bool dbus_same)
{
	expect_error_opts(text, line, msg, dbus_same, NULL);
}

#define HEAD "<busconfig>\n<listen>unix:path=/tmp/x</listen>\n"
#define TAIL "</busconfig>\n"
/* Rules go in a policy opened on line 3. */
#define POLICY(rule) HEAD "<policy context=\"default\">\n" rule "\n</policy>\n" TAIL

/* ------------------------------------------------------------------ */

static void test_defaults(void)
{
	struct bus_config_limits l;
	struct bus_config *c;

	bus_config_limits_init(&l);
	CHECK_EQ(l.max_incoming_bytes, 133169152);
	CHECK_EQ(l.max_incoming_unix_fds, 64);
	CHECK_EQ(l.max_outgoing_bytes, 133169152);
	CHECK_EQ(l.max_outgoing_unix_fds, 64);
	CHECK_EQ(l.max_message_size, 33554432);
	CHECK_EQ(l.max_message_unix_fds, 16);
	CHECK_EQ(l.service_start_timeout, 25000);
	CHECK_EQ(l.auth_timeout, 5000);
	CHECK_EQ(l.pending_fd_timeout, 150000);
	CHECK_EQ(l.reply_timeout, -1);
	CHECK_EQ(l.max_completed_connections, 2048);
	CHECK_EQ(l.max_incomplete_connections, 64);
	CHECK_EQ(l.max_connections_per_user, 256);
	CHECK_EQ(l.max_pending_service_starts, 512);
	CHECK_EQ(l.max_names_per_connection, 512);
	CHECK_EQ(l.max_match_rules_per_connection, 512);
	CHECK_EQ(l.max_replies_per_connection, 128);

	c = load_text(HEAD TAIL);
	CHECK(memcmp(&c->limits, &l, sizeof(l)) == 0);
	CHECK(c->type == NULL && c->user == NULL && c->pidfile == NULL &&
	      c->servicehelper == NULL);
	CHECK(!c->fork && !c->keep_umask && !c->syslog && !c->allow_anonymous);
	CHECK_EQ(c->apparmor, BUS_CONFIG_APPARMOR_UNSET);
	CHECK_EQ(list_count(&c->listen), 1);
	CHECK_EQ(list_count(&c->rules), 0);
	CHECK_EQ(list_count(&c->files), 1);
	CHECK_STR(string_at(&c->files, 0)->str, tpath);
	bus_config_free(c);
}

static void test_elements(void)
{
	struct bus_config *c;
	struct bus_config_associate *a;

	c = load_text("<!DOCTYPE busconfig PUBLIC \"-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN\"\n"
		      " \"http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd\">\n"
		      "<busconfig>\n"
		      "  <type>system</type>\n"
		      "  <user>messagebus</user>\n"
		      "  <fork/>\n"
		      "  <keep_umask/>\n"
		      "  <syslog/>\n"
		      "  <allow_anonymous/>\n"
		      "  <pidfile>/run/x.pid</pidfile>\n"
		      "  <listen>unix:path=/tmp/a</listen>\n"
		      "  <listen>\n    tcp:host=localhost,port=0\n  </listen>\n"
		      "  <listen>unix:abstract=/x</listen>\n"
		      "  <auth>EXTERNAL</auth>\n"
		      "  <auth>ANONYMOUS</auth>\n"
		      "  <servicehelper>/usr/lib/helper</servicehelper>\n"
		      "  <apparmor mode=\"required\"/>\n"
		      "  <selinux>\n"
		      "    <associate own=\"org.a\" context=\"ctx_a\"/>\n"
		      "    <associate own=\"org.b\" context=\"ctx_b\"/>\n"
		      "    <associate own=\"org.a\" context=\"ctx_a2\"/>\n"
		      "  </selinux>\n"
		      "  <type>session</type>\n"
		      "</busconfig>\n");
	CHECK_STR(c->type, "session");	/* last one wins */
	CHECK_STR(c->user, "messagebus");
	CHECK(c->fork && c->keep_umask && c->syslog && c->allow_anonymous);
	CHECK_STR(c->pidfile, "/run/x.pid");
	CHECK_STR(c->servicehelper, "/usr/lib/helper");
	CHECK_EQ(c->apparmor, BUS_CONFIG_APPARMOR_REQUIRED);
	CHECK_EQ(list_count(&c->listen), 3);
	CHECK_STR(string_at(&c->listen, 0)->str, "unix:path=/tmp/a");
	CHECK_EQ(string_at(&c->listen, 0)->line, 11);
	CHECK_STR(string_at(&c->listen, 0)->file, tpath);
	/* surrounding whitespace is dropped */
	CHECK_STR(string_at(&c->listen, 1)->str, "tcp:host=localhost,port=0");
	CHECK_STR(string_at(&c->listen, 2)->str, "unix:abstract=/x");
	CHECK_EQ(list_count(&c->auth), 2);
	CHECK_STR(string_at(&c->auth, 0)->str, "EXTERNAL");
	CHECK_STR(string_at(&c->auth, 1)->str, "ANONYMOUS");
	/* a repeated <associate own=> replaces the earlier one */
	CHECK_EQ(list_count(&c->associations), 2);
	a = list_first_entry(&c->associations, struct bus_config_associate, link);
	CHECK_STR(a->own, "org.b");
	CHECK_STR(a->context, "ctx_b");
	a = list_entry(c->associations.prev, struct bus_config_associate, link);
	CHECK_STR(a->own, "org.a");
	CHECK_STR(a->context, "ctx_a2");
	bus_config_free(c);

	c = load_text(HEAD "<apparmor mode=\"disabled\"/><apparmor/>" TAIL);
	CHECK_EQ(c->apparmor, BUS_CONFIG_APPARMOR_DISABLED);
	bus_config_free(c);
	c = load_text(HEAD "<apparmor mode=\"enabled\"/>" TAIL);
	CHECK_EQ(c->apparmor, BUS_CONFIG_APPARMOR_ENABLED);
	bus_config_free(c);

	/* XML niceties: entities, CDATA, comments inside values */
	c = load_text("<?xml version=\"1.0\"?>\n<busconfig>"
		      "<listen>unix:path=/tmp/a&amp;b</listen>"
		      "<listen><![CDATA[unix:path=/tmp/<c>]]></listen>"
		      "<listen>unix:<!-- x -->path=/tmp/d</listen>"
		      "</busconfig>");
	CHECK_STR(string_at(&c->listen, 0)->str, "unix:path=/tmp/a&b");
	CHECK_STR(string_at(&c->listen, 1)->str, "unix:path=/tmp/<c>");
	CHECK_STR(string_at(&c->listen, 2)->str, "unix:path=/tmp/d");
	bus_config_free(c);
}

static void test_servicedirs(void)
{
	struct bus_config_servicedir *d;
	struct bus_config *c;
	char *rt, *want;
	int i;

	/* session: XDG_RUNTIME_DIR (strict, unwatched), XDG_DATA_HOME, XDG_DATA_DIRS, datadir */
	CHECK(asprintf(&rt, "%s/rt", tmpdir) > 0);
	CHECK(mkdir(rt, 0700) == 0);
	setenv("XDG_RUNTIME_DIR", rt, 1);
	setenv("XDG_DATA_HOME", "/home/u/.local/share", 1);
	setenv("XDG_DATA_DIRS", "/opt/a/share::/usr/share:/opt/b/share", 1);
	c = load_text(HEAD "<servicedir>/first</servicedir>\n<standard_session_servicedirs/>\n"
		      "<servicedir>rel</servicedir><servicedir>/opt/a/share/dbus-1/services</servicedir>"
		      TAIL);
	{
		const char *expect[] = {
			"/first", NULL /* rt */, "/home/u/.local/share/dbus-1/services",
			"/opt/a/share/dbus-1/services", "/usr/share/dbus-1/services",
			"/opt/b/share/dbus-1/services", NULL /* rel */,
		};
		CHECK(asprintf(&want, "%s/dbus-1/services", rt) > 0);
		expect[1] = want;
		CHECK(asprintf((char **)&expect[6], "%s/rel", tmpdir) > 0);
		CHECK_EQ(list_count(&c->servicedirs), ARRAY_SIZE(expect));
		i = 0;
		list_for_each_entry(d, &c->servicedirs, link) {
			if (i < (int)ARRAY_SIZE(expect))
				CHECK_STR(d->path, expect[i]);
			CHECK_EQ(d->flags, i == 1 ? (BUS_CONFIG_SERVICEDIR_NO_WATCH |
						      BUS_CONFIG_SERVICEDIR_STRICT_NAMING) : 0);
			i++;
		}
		free(want);
		free((char *)expect[6]);
	}
	bus_config_free(c);

	/* defaults when unset; an XDG_RUNTIME_DIR writable by others is not trusted */
	CHECK(chmod(rt, 0777) == 0);
	unsetenv("XDG_DATA_DIRS");
	c = load_text(HEAD "<standard_session_servicedirs/>" TAIL);
	{
		const char *expect[] = {
			"/home/u/.local/share/dbus-1/services", "/usr/local/share/dbus-1/services",
			"/usr/share/dbus-1/services",
		};
		CHECK_EQ(list_count(&c->servicedirs), ARRAY_SIZE(expect));
		i = 0;
		list_for_each_entry(d, &c->servicedirs, link)
			if (i < (int)ARRAY_SIZE(expect))
				CHECK_STR(d->path, expect[i++]);
	}
	bus_config_free(c);
	rmdir(rt);
	free(rt);
	unsetenv("XDG_RUNTIME_DIR");
	unsetenv("XDG_DATA_HOME");

	c = load_text(HEAD "<standard_system_servicedirs/><standard_system_servicedirs/>" TAIL);
	{
		const char *expect[] = {
			"/usr/local/share/dbus-1/system-services",
			"/usr/share/dbus-1/system-services",
			"/lib/dbus-1/system-services",
		};
		CHECK_EQ(list_count(&c->servicedirs), ARRAY_SIZE(expect));
		i = 0;
		list_for_each_entry(d, &c->servicedirs, link)
			if (i < (int)ARRAY_SIZE(expect))
				CHECK_STR(d->path, expect[i++]);
	}
	bus_config_free(c);
}

static void test_limits(void)
{
	struct bus_config *c;

	c = load_text(HEAD
		      "<limit name=\"max_incoming_bytes\">1000000000000</limit>\n"
		      "<limit name=\"max_incoming_unix_fds\">1</limit>\n"
		      "<limit name=\"max_outgoing_bytes\">2</limit>\n"
		      "<limit name=\"max_outgoing_unix_fds\">3</limit>\n"
		      "<limit name=\"max_message_size\">4</limit>\n"
		      "<limit name=\"max_message_unix_fds\">5</limit>\n"
		      "<limit name=\"service_start_timeout\">6</limit>\n"
		      "<limit name=\"auth_timeout\">7</limit>\n"
		      "<limit name=\"pending_fd_timeout\">8</limit>\n"
		      "<limit name=\"reply_timeout\">9</limit>\n"
		      "<limit name=\"max_completed_connections\">10</limit>\n"
		      "<limit name=\"max_incomplete_connections\">11</limit>\n"
		      "<limit name=\"max_connections_per_user\">12</limit>\n"
		      "<limit name=\"max_pending_service_starts\">13</limit>\n"
		      "<limit name=\"max_names_per_connection\">14</limit>\n"
		      "<limit name=\"max_match_rules_per_connection\">15</limit>\n"
		      "<limit name=\"max_replies_per_connection\"> 2147483647 </limit>\n"
		      "<limit name=\"max_containers\">1</limit>\n"
		      "<limit name=\"max_containers_per_user\">1</limit>\n"
		      "<limit name=\"max_container_metadata_bytes\">1</limit>\n"
		      "<limit name=\"max_connections_per_container\">1</limit>\n"
		      "<limit name=\"max_replies_per_container\">16</limit>\n"
		      "<limit name=\"auth_timeout\">0</limit>\n"
		      TAIL);
	CHECK_EQ(c->limits.max_incoming_bytes, 1000000000000LL);
	CHECK_EQ(c->limits.max_incoming_unix_fds, 1);
	CHECK_EQ(c->limits.max_outgoing_bytes, 2);
	CHECK_EQ(c->limits.max_outgoing_unix_fds, 3);
	CHECK_EQ(c->limits.max_message_size, 4);
	CHECK_EQ(c->limits.max_message_unix_fds, 5);
	CHECK_EQ(c->limits.service_start_timeout, 6);
	CHECK_EQ(c->limits.auth_timeout, 0);	/* the later one wins */
	CHECK_EQ(c->limits.pending_fd_timeout, 8);
	CHECK_EQ(c->limits.reply_timeout, 9);
	CHECK_EQ(c->limits.max_completed_connections, 10);
	CHECK_EQ(c->limits.max_incomplete_connections, 11);
	CHECK_EQ(c->limits.max_connections_per_user, 12);
	CHECK_EQ(c->limits.max_pending_service_starts, 13);
	CHECK_EQ(c->limits.max_names_per_connection, 14);
	CHECK_EQ(c->limits.max_match_rules_per_connection, 15);
	CHECK_EQ(c->limits.max_replies_per_connection, 2147483647);
	CHECK_EQ(c->limits.max_connections_per_container, 1);
	CHECK_EQ(c->limits.max_replies_per_container, 16);
	bus_config_free(c);
}

static void test_policy(void)
{
	struct bus_config *c;
	struct bus_policy_rule *r;

	c = load_text(HEAD
		      "<policy context=\"default\">\n"				/* 3 */
		      "  <allow send_destination=\"org.a\" send_interface=\"org.a.I\"\n"
		      "         send_member=\"M\" send_path=\"/p\" send_type=\"method_call\"\n"
		      "         send_requested_reply=\"false\" eavesdrop=\"true\" log=\"true\"\n"
		      "         min_fds=\"1\" max_fds=\"2\"/>\n"			/* 4 */
		      "  <deny send_destination_prefix=\"org.p\" send_error=\"org.E\"\n"
		      "        send_broadcast=\"false\"/>\n"			/* 8 */
		      "  <deny receive_sender=\"org.s\" receive_interface=\"*\" receive_member=\"*\"\n"
		      "        receive_type=\"signal\" receive_requested_reply=\"true\"/>\n"	/* 10 */
		      "  <allow receive_error=\"org.E\" receive_path=\"/q\" max_fds=\"0\"/>\n"	/* 12 */
		      "  <allow eavesdrop=\"false\"/>\n"				/* 13 */
		      "  <allow own=\"*\"/>\n"					/* 14 */
		      "  <deny own_prefix=\"org.x\"/>\n"				/* 15 */
		      "  <allow user=\"*\"/>\n"					/* 16 */
		      "  <deny group=\"0\"/>\n"					/* 17 */
		      "  <allow user=\"root\"/>\n"				/* 18 */
		      "  <allow send_destination=\"*\" send_broadcast=\"true\"/>\n"	/* 19 */
		      "  <allow send_type=\"*\" send_destination_prefix=\"*\"/>\n"	/* 20 */
		      "</policy>\n"
		      "<policy context=\"mandatory\"><deny own=\"a.b\"/></policy>\n"	/* 22 */
		      "<policy user=\"root\"><allow own=\"c.d\"/></policy>\n"		/* 23 */
		      "<policy group=\"root\"><deny own=\"e.f\"/></policy>\n"		/* 24 */
		      "<policy at_console=\"true\"><allow user=\"*\"/></policy>\n"	/* 25 */
		      "<policy at_console=\"false\"><deny own=\"g.h\"/></policy>\n"	/* 26 */
		      "<policy user=\"4242\"><allow own=\"i.j\"/></policy>\n"		/* 27 */
		      TAIL);
	CHECK_EQ(list_count(&c->rules), 18);

	r = rule_at(c, 0);
	CHECK(r->allow && r->type == BUS_POLICY_RULE_SEND && r->scope == BUS_POLICY_SCOPE_DEFAULT);
	CHECK_STR(r->file, tpath);
	CHECK_EQ(r->line, 4);
	CHECK_STR(r->name, "org.a");
	CHECK(!r->name_is_prefix);
	CHECK_STR(r->interface, "org.a.I");
	CHECK_STR(r->member, "M");
	CHECK_STR(r->path, "/p");
	CHECK(r->error == NULL);
	CHECK_EQ(r->message_type, BUS_MESSAGE_TYPE_METHOD_CALL);
	CHECK_EQ(r->requested_reply, BUS_TRISTATE_FALSE);
	CHECK_EQ(r->eavesdrop, BUS_TRISTATE_TRUE);
	CHECK_EQ(r->broadcast, BUS_TRISTATE_UNSET);
	CHECK(r->log);
	CHECK_EQ(r->min_fds, 1);
	CHECK_EQ(r->max_fds, 2);

	r = rule_at(c, 1);
	CHECK(!r->allow && r->type == BUS_POLICY_RULE_SEND);
	CHECK_EQ(r->line, 8);
	CHECK_STR(r->name, "org.p");
	CHECK(r->name_is_prefix);
	CHECK_STR(r->error, "org.E");
	CHECK_EQ(r->broadcast, BUS_TRISTATE_FALSE);
	CHECK_EQ(r->message_type, BUS_MESSAGE_TYPE_ANY);
	CHECK_EQ(r->min_fds, 0);
	CHECK_EQ(r->max_fds, BUS_POLICY_MAX_FDS);
	CHECK(!r->log);

	r = rule_at(c, 2);
	CHECK(!r->allow && r->type == BUS_POLICY_RULE_RECEIVE);
	CHECK_STR(r->name, "org.s");
	CHECK(r->interface == NULL && r->member == NULL);	/* "*" = any */
	CHECK_EQ(r->message_type, BUS_MESSAGE_TYPE_SIGNAL);
	CHECK_EQ(r->requested_reply, BUS_TRISTATE_TRUE);
	CHECK_EQ(r->eavesdrop, BUS_TRISTATE_UNSET);

	r = rule_at(c, 3);
	CHECK(r->type == BUS_POLICY_RULE_RECEIVE);
	CHECK_STR(r->error, "org.E");
	CHECK_STR(r->path, "/q");
	CHECK_EQ(r->max_fds, 0);

	r = rule_at(c, 4);	/* lone eavesdrop= is a receive rule */
	CHECK(r->allow && r->type == BUS_POLICY_RULE_RECEIVE);
	CHECK_EQ(r->eavesdrop, BUS_TRISTATE_FALSE);
	CHECK(r->name == NULL);

	r = rule_at(c, 5);
	CHECK(r->allow && r->type == BUS_POLICY_RULE_OWN && r->name == NULL && !r->name_is_prefix);
	r = rule_at(c, 6);
	CHECK(!r->allow && r->type == BUS_POLICY_RULE_OWN && r->name_is_prefix);
	CHECK_STR(r->name, "org.x");
	r = rule_at(c, 7);
	CHECK(r->allow && r->type == BUS_POLICY_RULE_USER && r->id_any);
	r = rule_at(c, 8);
	CHECK(!r->allow && r->type == BUS_POLICY_RULE_GROUP && !r->id_any && r->id == 0);
	r = rule_at(c, 9);
	CHECK(r->type == BUS_POLICY_RULE_USER && !r->id_any && r->id == 0);
	r = rule_at(c, 10);
	CHECK(r->type == BUS_POLICY_RULE_SEND && r->name == NULL &&
	      r->broadcast == BUS_TRISTATE_TRUE);
	r = rule_at(c, 11);	/* send_destination_prefix="*" is literal, send_type="*" any */
	CHECK(r->name_is_prefix);
	CHECK_STR(r->name, "*");
	CHECK_EQ(r->message_type, BUS_MESSAGE_TYPE_ANY);

	r = rule_at(c, 12);
	CHECK(r->scope == BUS_POLICY_SCOPE_MANDATORY && r->line == 22);
	r = rule_at(c, 13);
	CHECK(r->scope == BUS_POLICY_SCOPE_USER && r->scope_id == 0);
	r = rule_at(c, 14);
	CHECK(r->scope == BUS_POLICY_SCOPE_GROUP && r->scope_id == 0 && !r->allow);
	r = rule_at(c, 15);
	CHECK(r->scope == BUS_POLICY_SCOPE_CONSOLE && r->scope_id == 1 &&
	      r->type == BUS_POLICY_RULE_USER);
	r = rule_at(c, 16);
	CHECK(r->scope == BUS_POLICY_SCOPE_CONSOLE && r->scope_id == 0);
	r = rule_at(c, 17);
	CHECK(r->scope == BUS_POLICY_SCOPE_USER && r->scope_id == 4242);
	CHECK_STR(r->name, "i.j");
	CHECK_EQ(list_count(&c->warnings), 0);
	bus_config_free(c);
}

static void test_warnings(void)
{
	struct bus_config *c;
	char *want;

	/* unknown users and groups: the rule (or the whole policy) is dropped */
	c = load_text(HEAD
		      "<policy user=\"no-such-user-xyz\"><allow own=\"a.b\"/><allow user=\"*\"/></policy>\n"
		      "<policy group=\"no-such-group-xyz\"><allow own=\"a.b\"/></policy>\n"
		      "<policy context=\"default\">\n"
		      "<allow user=\"no-such-user-xyz\"/>\n"
		      "<allow group=\"no-such-group-xyz\"/>\n"
		      "<allow own=\"kept\"/>\n"
		      "</policy>\n" TAIL);
	CHECK_EQ(list_count(&c->rules), 1);
	CHECK_STR(rule_at(c, 0)->name, "kept");
	CHECK_EQ(list_count(&c->warnings), 4);
	CHECK(asprintf(&want, "%s:3: Unknown username \"no-such-user-xyz\" in message bus configuration file", tpath) > 0);
	CHECK_STR(string_at(&c->warnings, 0)->str, want);
	free(want);
	CHECK(asprintf(&want, "%s:4: Unknown group \"no-such-group-xyz\" in message bus configuration file", tpath) > 0);
	CHECK_STR(string_at(&c->warnings, 1)->str, want);
	free(want);
	CHECK(asprintf(&want, "%s:6: Unknown username \"no-such-user-xyz\" on element <allow>", tpath) > 0);
	CHECK_STR(string_at(&c->warnings, 2)->str, want);
	free(want);
	CHECK(asprintf(&want, "%s:7: Unknown group \"no-such-group-xyz\" on element <allow>", tpath) > 0);
	CHECK_STR(string_at(&c->warnings, 3)->str, want);
	free(want);
	bus_config_free(c);
}

static unsigned int warn_calls;
static void count_warn(void *userdata, const char *msg)
{
	(void)msg;
	CHECK(userdata == &warn_calls);
	warn_calls++;
}

static void test_errors(void)
{
	/* structure */
	expect_error("<foo/>", 1, "Unknown element <foo> at root of configuration file", true);
	expect_error(HEAD "<frobnicate/>\n" TAIL, 3,
		     "Element <frobnicate> not allowed inside <busconfig> in configuration file",
		     true);
	expect_error("<busconfig x=\"1\"><listen>unix:path=/x</listen></busconfig>", 1,
		     "Attribute \"x\" is invalid on <busconfig> element in this context", true);
	expect_error(HEAD "<listen id=\"1\">unix:path=/y</listen>" TAIL, 3,
		     "Attribute \"id\" is invalid on <listen> element in this context", true);
	expect_error(HEAD "<fork>yes</fork>" TAIL, 3,
		     "No text content expected inside XML element fork in configuration file",
		     true);
	expect_error(HEAD "stray text\n" TAIL, 4,
		     "No text content expected inside XML element busconfig in configuration file",
		     true);
	expect_error(HEAD "<listen></listen>" TAIL, 3,
		     "XML element <listen> was expected to have content inside it", true);
	expect_error(HEAD "<user/>" TAIL, 3,
		     "XML element <user> was expected to have content inside it", true);
	expect_error(HEAD "<pidfile>   </pidfile>" TAIL, 3,
		     "XML element <pidfile> was expected to have content inside it", false);
	expect_error(HEAD "<policy context=\"default\"><allow own=\"a\"><deny own=\"b\"/></allow></policy>" TAIL,
		     3, "Element <deny> is not allowed in this context", true);
	expect_error(HEAD "<servicedir>/x<foo/></servicedir>" TAIL, 3,
		     "Element <foo> is not allowed in this context", true);
	expect_error(HEAD "<associate own=\"a\" context=\"b\"/>" TAIL, 3,
		     "Element <associate> not allowed inside <busconfig> in configuration file",
		     true);
	expect_error(HEAD "<selinux><foo/></selinux>" TAIL, 3,
		     "Element <foo> not allowed inside <selinux> in configuration file", true);
	expect_error(HEAD "<selinux><associate own=\"a\"/></selinux>" TAIL, 3,
		     "Element <associate> must have attributes own=\"<servicename>\" and context=\"<selinux context>\"",
		     true);
	expect_error(HEAD "<apparmor mode=\"sometimes\"/>" TAIL, 3,
		     "Mode attribute on <apparmor> must have value \"required\", \"enabled\" or \"disabled\", not \"sometimes\"",
		     true);
	expect_error("<busconfig><type>session</type></busconfig>", 0,
		     "Configuration file needs one or more <listen> elements giving addresses",
		     true);
	expect_error(HEAD "<listen>unclosed\n" TAIL, 4,
		     "XML error: mismatched tag (column 2)", false);
	expect_error("", 1, "XML error: no element found (column 0)", false);
	expect_error(HEAD, 3, "XML error: no element found (column 0)", false);
	expect_error("<busconfig>\n<listen a=\"1\" a=\"2\">x</listen></busconfig>", 2,
		     "XML error: duplicate attribute (column 14)", false);

	/* include attributes */
	expect_error(HEAD "<include ignore_missing=\"maybe\">x.conf</include>" TAIL, 3,
		     "ignore_missing attribute must have value \"yes\" or \"no\"", true);
	expect_error(HEAD "<include if_selinux_enabled=\"1\">x.conf</include>" TAIL, 3,
		     "if_selinux_enabled attribute must have value \"yes\" or \"no\"", true);
	expect_error(HEAD "<include selinux_root_relative=\"y\">x.conf</include>" TAIL, 3,
		     "selinux_root_relative attribute must have value \"yes\" or \"no\"", true);
	expect_error(HEAD "<include foo=\"yes\">x.conf</include>" TAIL, 3,
		     "Attribute \"foo\" is invalid on <include> element in this context", true);

	/* policy */
	expect_error(HEAD "<policy/>" TAIL, 3,
		     "<policy> element must have exactly one of (context|user|group|at_console) attributes",
		     true);
	expect_error(HEAD "<policy context=\"default\" user=\"root\"/>" TAIL, 3,
		     "<policy> element must have exactly one of (context|user|group|at_console) attributes",
		     true);
	expect_error(HEAD "<policy context=\"sometimes\"/>" TAIL, 3,
		     "context attribute on <policy> must have the value \"default\" or \"mandatory\", not \"sometimes\"",
		     true);
	expect_error(HEAD "<policy at_console=\"yes\"/>" TAIL, 3,
		     "Unknown value \"yes\" for at_console in message bus configuration file", true);
	expect_error(HEAD "<policy users=\"root\"/>" TAIL, 3,
		     "Attribute \"users\" is invalid on <policy> element in this context", true);
	expect_error(POLICY("<foo/>"), 4,
		     "Element <foo> not allowed inside <policy> in configuration file", true);
	expect_error(POLICY("<allow/>"), 4, "Element <allow> must have one or more attributes",
		     true);
	expect_error(POLICY("<deny log=\"true\"/>"), 4,
		     "Element <deny> must have one or more attributes", true);
	expect_error(POLICY("<allow max_fds=\"3\"/>"), 4,
		     "Element <allow> must have one or more attributes", true);
	expect_error(POLICY("<allow send_foo=\"x\"/>"), 4,
		     "Attribute \"send_foo\" is invalid on <allow> element in this context", true);
	expect_error(POLICY("<allow send_member=\"Hello\"/>"), 4,
		     "On element <allow>, if you specify a member you must specify an interface or a path. Keep in mind that not all messages have an interface field.",
		     true);
	expect_error(POLICY("<deny receive_member=\"Hello\" receive_sender=\"a.b\"/>"), 4,
		     "On element <deny>, if you specify a member you must specify an interface or a path. Keep in mind that not all messages have an interface field.",
		     true);
	expect_error(POLICY("<allow send_interface=\"a.b\" receive_sender=\"c.d\"/>"), 4,
		     "Invalid combination of attributes on element <allow>: send and receive attributes cannot be combined",
		     true);
	expect_error(POLICY("<allow own=\"a.b\" user=\"root\"/>"), 4,
		     "Invalid combination of attributes on element <allow>: own, own_prefix, user, group and the message-related attributes cannot be combined",
		     true);
	expect_error(POLICY("<allow own=\"a.b\" own_prefix=\"a\"/>"), 4,
		     "Invalid combination of attributes on element <allow>: own, own_prefix, user, group and the message-related attributes cannot be combined",
		     true);
	expect_error(POLICY("<allow own=\"a.b\" eavesdrop=\"true\"/>"), 4,
		     "Invalid combination of attributes on element <allow>: own, own_prefix, user, group and the message-related attributes cannot be combined",
		     true);
	expect_error(POLICY("<allow group=\"root\" send_destination=\"a.b\"/>"), 4,
		     "Invalid combination of attributes on element <allow>: own, own_prefix, user, group and the message-related attributes cannot be combined",
		     true);
	expect_error(POLICY("<allow send_error=\"a.E\" send_interface=\"a.b\"/>"), 4,
		     "Invalid combination of attributes on element <allow>: send_error cannot be combined with send_member or send_interface",
		     true);
	expect_error(POLICY("<allow send_destination=\"a.b\" send_destination_prefix=\"a\"/>"), 4,
		     "Invalid combination of attributes on element <allow>: send_destination cannot be combined with send_destination_prefix",
		     true);
	expect_error(POLICY("<deny receive_error=\"a.E\" receive_interface=\"a.b\"/>"), 4,
		     "Invalid combination of attributes on element <deny>: receive_error cannot be combined with receive_member or receive_interface",
		     true);
	expect_error(POLICY("<allow send_type=\"method\"/>"), 4, "Bad message type \"method\"",
		     true);
	expect_error(POLICY("<allow receive_type=\"signals\"/>"), 4,
		     "Bad message type \"signals\"", true);
	expect_error(POLICY("<allow send_destination=\"a.b\" eavesdrop=\"yes\"/>"), 4,
		     "Bad value \"yes\" for eavesdrop attribute, must be true or false", false);
	expect_error(POLICY("<allow eavesdrop=\"1\"/>"), 4,
		     "Bad value \"1\" for eavesdrop attribute, must be true or false", false);
	expect_error(POLICY("<allow send_requested_reply=\"no\"/>"), 4,
		     "Bad value \"no\" for send_requested_reply attribute, must be true or false",
		     false);
	expect_error(POLICY("<allow receive_requested_reply=\"no\"/>"), 4,
		     "Bad value \"no\" for receive_requested_reply attribute, must be true or false",
		     false);
	expect_error(POLICY("<allow send_broadcast=\"maybe\"/>"), 4,
		     "Bad value \"maybe\" for send_broadcast attribute, must be true or false",
		     false);
	expect_error(POLICY("<allow send_broadcast=\"true\" send_destination=\"a.b\"/>"), 4,
		     "Rule with send_broadcast=\"true\" and send_destination=\"a.b\" cannot match anything",
		     true);
	expect_error(POLICY("<allow send_type=\"signal\" max_fds=\"-1\"/>"), 4,
		     "Bad value \"-1\" for max_fds attribute, must be an integer in range 0 to 33554432 inclusive",
		     true);
	expect_error(POLICY("<allow receive_type=\"signal\" min_fds=\"33554433\"/>"), 4,
		     "Bad value \"33554433\" for min_fds attribute, must be an integer in range 0 to 33554432 inclusive",
		     true);
	expect_error(POLICY("<allow send_type=\"signal\" min_fds=\"many\"/>"), 4,
		     "Bad value \"many\" for min_fds attribute, must be an integer in range 0 to 33554432 inclusive",
		     true);
	expect_error(HEAD "<policy user=\"root\">\n<allow user=\"*\"/></policy>" TAIL, 4,
		     "<allow> rule cannot be per-user because it has bus-global semantics", true);
	expect_error(HEAD "<policy group=\"root\">\n<deny group=\"root\"/></policy>" TAIL, 4,
		     "<deny> rule cannot be per-group because it has bus-global semantics", true);

	/* limits */
	expect_error(HEAD "<limit>5</limit>" TAIL, 3,
		     "<limit> element must have a \"name\" attribute", true);
	expect_error(HEAD "<limit name=\"auth_timeout\" value=\"5\">5</limit>" TAIL, 3,
		     "Attribute \"value\" is invalid on <limit> element in this context", true);
	expect_error(HEAD "<limit name=\"no_such_limit\">5</limit>" TAIL, 3,
		     "There is no limit called \"no_such_limit\"", true);
	expect_error(HEAD "<limit name=\"auth_timeout\">soon</limit>" TAIL, 3,
		     "<limit name=\"auth_timeout\"> element has invalid value (could not parse as integer)",
		     true);
	expect_error(HEAD "<limit name=\"auth_timeout\">5s</limit>" TAIL, 3,
		     "<limit name=\"auth_timeout\"> element has invalid value (could not parse as integer)",
		     false);
	expect_error(HEAD "<limit name=\"max_message_size\">99999999999999999999</limit>" TAIL, 3,
		     "<limit name=\"max_message_size\"> element has invalid value (could not parse as integer)",
		     false);
	expect_error(HEAD "<limit name=\"auth_timeout\">-1</limit>" TAIL, 3,
		     "<limit name=\"auth_timeout\"> must be a positive number", true);
	expect_error(HEAD "<limit name=\"max_incoming_bytes\">-1</limit>" TAIL, 3,
		     "<limit name=\"max_incoming_bytes\"> must be a positive number", true);
	expect_error(HEAD "<limit name=\"max_names_per_connection\">2147483648</limit>" TAIL, 3,
		     "<limit name=\"max_names_per_connection\"> value is too large", true);
	expect_error(HEAD "<limit name=\"max_containers\">-3</limit>" TAIL, 3,
		     "<limit name=\"max_containers\"> must be a positive number", true);
	expect_error(HEAD "<limit name=\"auth_timeout\"/>" TAIL, 3,
		     "XML element <limit> was expected to have content inside it", true);
}

static void test_includes(const char *data)
{
	struct bus_config_options opts = {};
	struct bus_config *c = NULL;
	char *err = NULL, *want, *path;
	int r;

	/* nested includes with relative paths, scalars and limits flowing */
	CHECK(asprintf(&path, "%s/nested/top.conf", data) > 0);
	r = bus_config_load(&c, path, NULL, &err);
	CHECK_EQ(r, 0);
	if (r == 0) {
		char *s;

		CHECK_EQ(list_count(&c->listen), 4);
		for (int i = 0; i < 4; i++) {
			CHECK(asprintf(&s, "unix:path=/tmp/%d", i + 1) > 0);
			CHECK_STR(string_at(&c->listen, i)->str, s);
			free(s);
		}
		CHECK_STR(string_at(&c->listen, 2)->file + strlen(data), "/nested/sub/leaf.conf");
		CHECK_STR(c->user, "middle");	/* the include comes after <user>top */
		CHECK(c->fork);
		CHECK_EQ(c->limits.reply_timeout, 1000);
		CHECK(asprintf(&s, "%s/nested/sub/helper", data) > 0);
		CHECK_STR(c->servicehelper, s);
		free(s);
		CHECK_EQ(list_count(&c->servicedirs), 2);
		CHECK(asprintf(&s, "%s/nested/sub/middle-services", data) > 0);
		CHECK_STR(list_first_entry(&c->servicedirs, struct bus_config_servicedir,
					   link)->path, s);
		free(s);
		CHECK_EQ(list_count(&c->files), 3);
		CHECK_EQ(list_count(&c->rules), 1);
		CHECK(rule_at(c, 0)->scope == BUS_POLICY_SCOPE_USER && rule_at(c, 0)->scope_id == 0);
		CHECK_STR(rule_at(c, 0)->file + strlen(data), "/nested/sub/leaf.conf");
		CHECK_EQ(rule_at(c, 0)->line, 5);
		bus_config_free(c);
		c = NULL;
	}
	free(path);

	/* an error in an included file names that file and line */
	CHECK(asprintf(&path, "%s/nested/broken-include.conf", data) > 0);
	r = bus_config_load(&c, path, NULL, &err);
	CHECK_EQ(r, BUS_CONFIG_E_INVALID);
	CHECK(asprintf(&want, "%s/nested/sub/bad.conf:2: <limit name=\"max_message_size\"> element has invalid value (could not parse as integer)", data) > 0);
	CHECK_STR(err, want);
	free(want);
	free(err);
	err = NULL;
	free(path);

	/* includedir: sorted, broken file skipped with a warning, missing dir ignored */
	CHECK(asprintf(&path, "%s/includedir.conf", data) > 0);
	opts.warn = count_warn;
	opts.userdata = &warn_calls;
	warn_calls = 0;
	r = bus_config_load(&c, path, &opts, &err);
	CHECK_EQ(r, 0);
	if (r == 0) {
		const char *expect[] = { "top", "a", "b", "c", "last" };
		char *s;

		CHECK_EQ(list_count(&c->listen), 5);
		for (size_t i = 0; i < ARRAY_SIZE(expect); i++) {
			CHECK(asprintf(&s, "unix:path=/tmp/%s", expect[i]) > 0);
			CHECK_STR(string_at(&c->listen, i)->str, s);
			free(s);
		}
		/* 10-a.conf set it to 20; the broken file's 99 is discarded */
		CHECK_EQ(c->limits.max_names_per_connection, 20);
		CHECK_STR(c->type, "custom");
		CHECK_EQ(list_count(&c->rules), 2);
		CHECK_STR(rule_at(c, 0)->name, "org.example.A");
		CHECK_STR(rule_at(c, 1)->name, "org.example.B");
		CHECK_EQ(list_count(&c->warnings), 1);
		CHECK_EQ(warn_calls, 1);
		CHECK(asprintf(&s, "%s/includedir.d/15-broken.conf:5: Element <bogus> not allowed inside <busconfig> in configuration file", data) > 0);
		CHECK_STR(string_at(&c->warnings, 0)->str, s);
		free(s);
		CHECK_EQ(list_count(&c->conf_dirs), 1);
		CHECK(asprintf(&s, "%s/includedir.d", data) > 0);
		CHECK_STR(string_at(&c->conf_dirs, 0)->str, s);
		free(s);
		CHECK_EQ(list_count(&c->files), 4);
		bus_config_free(c);
		c = NULL;
	}
	free(path);

	/* cycles: a -> b -> ./a, and a file including itself */
	CHECK(asprintf(&path, "%s/cycle/a.conf", data) > 0);
	r = bus_config_load(&c, path, NULL, &err);
	CHECK_EQ(r, BUS_CONFIG_E_INVALID);
	CHECK(asprintf(&want, "%s/cycle/b.conf:2: Circular inclusion of file '%s/cycle/./a.conf'",
			data, data) > 0);
	CHECK_STR(err, want);
	free(want);
	free(err);
	err = NULL;
	free(path);
	CHECK(asprintf(&path, "%s/cycle/self.conf", data) > 0);
	r = bus_config_load(&c, path, NULL, &err);
	CHECK_EQ(r, BUS_CONFIG_E_INVALID);
	CHECK(asprintf(&want, "%s:3: Circular inclusion of file '%s/cycle/self.conf'", path,
			data) > 0);
	CHECK_STR(err, want);
	free(want);
	free(err);
	err = NULL;
	free(path);

	/* missing files, with and without ignore_missing */
	{
		char *s;

		CHECK(asprintf(&s, "Failed to open \"%s/missing.conf\": No such file or directory",
				tmpdir) > 0);
		expect_error(HEAD "<include>missing.conf</include>" TAIL, 3, s, false);
		free(s);
		c = load_text(HEAD "<include ignore_missing=\"yes\">missing.conf</include>" TAIL);
		bus_config_free(c);
		CHECK(asprintf(&s, "Failed to open \"%s/.\": Is a directory", tmpdir) > 0);
		expect_error(HEAD "<include ignore_missing=\"yes\">.</include>" TAIL, 3, s, false);
		free(s);
		CHECK(asprintf(&s, "Failed to open directory \"%s/t.conf\": Not a directory",
				tmpdir) > 0);
		expect_error(HEAD "<includedir>t.conf</includedir>" TAIL, 3, s, false);
		free(s);
	}
	/* a FIFO is refused, not waited on; a huge file is refused, not read */
	{
		char *fifo, *big, *s;
		int fd;

		CHECK(asprintf(&fifo, "%s/fifo.conf", tmpdir) > 0);
		CHECK(mkfifo(fifo, 0600) == 0);
		CHECK(asprintf(&s, "Failed to open \"%s\": Not a regular file", fifo) > 0);
		expect_error(HEAD "<include>fifo.conf</include>" TAIL, 3, s, false);
		free(s);
		unlink(fifo);
		free(fifo);

		CHECK(asprintf(&big, "%s/big.conf", tmpdir) > 0);
		fd = open(big, O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
		CHECK(fd >= 0);
		CHECK(ftruncate(fd, BUS_CONFIG_FILE_MAX + 1) == 0);
		close(fd);
		CHECK(asprintf(&s, "Failed to open \"%s\": File too large", big) > 0);
		expect_error(HEAD "<include>big.conf</include>" TAIL, 3, s, false);
		free(s);
		unlink(big);
		free(big);
	}

	r = bus_config_load(&c, "/nonexistent/bus.conf", NULL, &err);
	CHECK_EQ(r, BUS_CONFIG_E_INVALID);
	CHECK_STR(err, "/nonexistent/bus.conf: Failed to open \"/nonexistent/bus.conf\": No such file or directory");
	free(err);
	err = NULL;

	/* SELinux includes */
	c = load_text(HEAD "<include if_selinux_enabled=\"yes\" selinux_root_relative=\"yes\">contexts/x</include>" TAIL);
	bus_config_free(c);
	opts = (struct bus_config_options){ .selinux_enabled = true };
	expect_error_opts(HEAD "<include if_selinux_enabled=\"yes\" selinux_root_relative=\"yes\">contexts/x</include>" TAIL,
			  3, "Could not determine SELinux policy root for relative inclusion", false,
			  &opts);
	{
		char *s, *inc;

		CHECK(asprintf(&s, "%s/selinux", tmpdir) > 0);
		CHECK(mkdir(s, 0755) == 0);
		CHECK(asprintf(&inc, "%s/contexts", s) > 0);
		CHECK(mkdir(inc, 0755) == 0);
		free(inc);
		CHECK(asprintf(&inc, "%s/contexts/dbus_contexts", s) > 0);
		write_file(inc, "<busconfig><selinux><associate own=\"org.s\" context=\"sys_t\"/></selinux></busconfig>");
		opts.selinux_root = s;
		c = load_text_opts(HEAD "<include if_selinux_enabled=\"yes\" selinux_root_relative=\"yes\">contexts/dbus_contexts</include>" TAIL,
				   &opts);
		CHECK_EQ(list_count(&c->associations), 1);
		bus_config_free(c);
		unlink(inc);
		free(inc);
		CHECK(asprintf(&inc, "%s/contexts", s) > 0);
		rmdir(inc);
		free(inc);
		rmdir(s);
		free(s);
	}

	/* buffers: relative includes resolve against the given path */
	{
		const char *buf = "<busconfig><include>nested/sub/leaf.conf</include></busconfig>";
		char *fake;

		CHECK(asprintf(&fake, "%s/virtual.conf", data) > 0);
		r = bus_config_load_buffer(&c, buf, strlen(buf), fake, NULL, &err);
		CHECK_EQ(r, 0);
		if (r == 0) {
			CHECK_EQ(list_count(&c->listen), 1);
			bus_config_free(c);
			c = NULL;
		}
		r = bus_config_load_buffer(&c, "<busconfig>", 11, fake, NULL, &err);
		CHECK_EQ(r, BUS_CONFIG_E_INVALID);
		free(err);
		err = NULL;
		opts = (struct bus_config_options){ .no_listen_ok = true };
		r = bus_config_load_buffer(&c, "<busconfig/>", 12, fake, &opts, &err);
		CHECK_EQ(r, 0);
		bus_config_free(c);
		c = NULL;
		free(fake);
	}
}

static size_t count_conf_files(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	size_t n = 0;

	if (!d)
		return 0;
	while ((de = readdir(d))) {
		size_t l = strlen(de->d_name);

		if (l >= 5 && strcmp(de->d_name + l - 5, ".conf") == 0)
			n++;
	}
	closedir(d);
	return n;
}

static void test_system_conf(void)
{
	const char *path = "/usr/share/dbus-1/system.conf";
	struct bus_config *c = NULL;
	struct bus_config_servicedir *d;
	struct bus_policy_rule *r;
	char *err = NULL;
	size_t n_default = 0, n_root = 0, n_login1 = 0;
	size_t expect_files;
	int ret;

	if (access(path, R_OK) != 0) {
		printf("SKIP: %s not installed\n", path);
		return;
	}
	ret = bus_config_load(&c, path, NULL, &err);
	if (ret)
		fprintf(stderr, "%s\n", err);
	CHECK(ret == 0);

	CHECK_STR(c->type, "system");
	CHECK_STR(c->user, "messagebus");
	CHECK(c->fork && c->syslog && !c->keep_umask);
	CHECK_STR(c->pidfile, "/run/dbus/pid");
	CHECK_STR(c->servicehelper, "/usr/lib/dbus-1.0/dbus-daemon-launch-helper");
	CHECK_EQ(list_count(&c->listen), 1);
	CHECK_STR(string_at(&c->listen, 0)->str, "unix:path=/run/dbus/system_bus_socket");
	CHECK_EQ(list_count(&c->auth), 1);
	CHECK_STR(string_at(&c->auth, 0)->str, "EXTERNAL");
	CHECK_EQ(list_count(&c->servicedirs), 3);
	d = list_first_entry(&c->servicedirs, struct bus_config_servicedir, link);
	CHECK_STR(d->path, "/usr/local/share/dbus-1/system-services");
	/* system.conf only has commented-out limits: all defaults */
	CHECK_EQ(c->limits.auth_timeout, 5000);
	CHECK_EQ(c->limits.max_completed_connections, 2048);
	CHECK_EQ(c->limits.max_replies_per_connection, 128);

	/* includedirs: system.d next to the file, and /etc/dbus-1/system.d if present */
	CHECK_STR(string_at(&c->conf_dirs, 0)->str, "/usr/share/dbus-1/system.d");
	if (access("/etc/dbus-1/system.d", F_OK) == 0)
		CHECK_STR(string_at(&c->conf_dirs, 1)->str, "/etc/dbus-1/system.d");
	expect_files = 1 + count_conf_files("/usr/share/dbus-1/system.d") +
		       count_conf_files("/etc/dbus-1/system.d") +
		       (access("/etc/dbus-1/system.conf", F_OK) == 0) +
		       (access("/etc/dbus-1/system-local.conf", F_OK) == 0);
	CHECK_EQ(list_count(&c->files), expect_files);
	CHECK_EQ(list_count(&c->warnings), 0);

	/* the first rule lets everybody connect; then the default deny of own and calls */
	r = rule_at(c, 0);
	CHECK(r->allow && r->type == BUS_POLICY_RULE_USER && r->id_any &&
	      r->scope == BUS_POLICY_SCOPE_DEFAULT);
	r = rule_at(c, 1);
	CHECK(!r->allow && r->type == BUS_POLICY_RULE_OWN && r->name == NULL);
	r = rule_at(c, 2);
	CHECK(!r->allow && r->type == BUS_POLICY_RULE_SEND &&
	      r->message_type == BUS_MESSAGE_TYPE_METHOD_CALL && r->name == NULL);
	r = rule_at(c, 4);
	CHECK(r->allow && r->message_type == BUS_MESSAGE_TYPE_METHOD_RETURN &&
	      r->requested_reply == BUS_TRISTATE_TRUE);

	list_for_each_entry(r, &c->rules, link) {
		if (strcmp(r->file, path) == 0) {
			if (r->scope == BUS_POLICY_SCOPE_DEFAULT)
				n_default++;
			else if (r->scope == BUS_POLICY_SCOPE_USER && r->scope_id == 0)
				n_root++;
		}
		if (strstr(r->file, "/org.freedesktop.login1.conf") &&
		    r->type == BUS_POLICY_RULE_OWN) {
			CHECK(r->allow && r->scope == BUS_POLICY_SCOPE_USER && r->scope_id == 0);
			CHECK_STR(r->name, "org.freedesktop.login1");
			n_login1++;
		}
	}
	/* dbus 1.14.10's system.conf: 17 default rules, 3 <policy user="root"> */
	CHECK_EQ(n_default, 17);
	CHECK_EQ(n_root, 3);
	if (access("/usr/share/dbus-1/system.d/org.freedesktop.login1.conf", F_OK) == 0)
		CHECK_EQ(n_login1, 1);
	printf("system.conf: %zu files, %zu rules\n", list_count(&c->files),
	       list_count(&c->rules));
	bus_config_free(c);
}

static void test_session_conf(void)
{
	const char *path = "/usr/share/dbus-1/session.conf";
	struct bus_config *c = NULL;
	struct bus_config_servicedir *d, *e;
	struct list_node std = LIST_INIT(std);
	struct bus_policy_rule *r;
	char *err = NULL;
	int ret;

	if (access(path, R_OK) != 0) {
		printf("SKIP: %s not installed\n", path);
		return;
	}
	setenv("XDG_DATA_HOME", "/home/test/.local/share", 1);
	unsetenv("XDG_DATA_DIRS");
	unsetenv("XDG_RUNTIME_DIR");
	ret = bus_config_load(&c, path, NULL, &err);
	if (ret)
		fprintf(stderr, "%s\n", err);
	CHECK(ret == 0);

	CHECK_STR(c->type, "session");
	CHECK(c->keep_umask && !c->fork && !c->syslog);
	CHECK(c->user == NULL && c->pidfile == NULL);
	CHECK_EQ(list_count(&c->listen), 1);
	CHECK_STR(string_at(&c->listen, 0)->str, "unix:tmpdir=/tmp");
	CHECK_STR(string_at(&c->auth, 0)->str, "EXTERNAL");

	/* <standard_session_servicedirs/> expands to the same list as the helper */
	CHECK(bus_config_standard_session_servicedirs(&std) == 0);
	CHECK_EQ(list_count(&c->servicedirs), list_count(&std));
	e = list_first_entry(&std, struct bus_config_servicedir, link);
	list_for_each_entry(d, &c->servicedirs, link) {
		if (!e || &e->link == &std)
			break;
		CHECK_STR(d->path, e->path);
		e = list_entry(e->link.next, struct bus_config_servicedir, link);
	}
	d = list_first_entry(&c->servicedirs, struct bus_config_servicedir, link);
	CHECK_STR(d->path, "/home/test/.local/share/dbus-1/services");
	bus_config_servicedirs_clear(&std);

	CHECK_EQ(c->limits.max_incoming_bytes, 1000000000);
	CHECK_EQ(c->limits.max_incoming_unix_fds, 250000000);
	CHECK_EQ(c->limits.max_message_size, 1000000000);
	CHECK_EQ(c->limits.max_message_unix_fds, 16);
	CHECK_EQ(c->limits.service_start_timeout, 120000);
	CHECK_EQ(c->limits.auth_timeout, 240000);
	CHECK_EQ(c->limits.max_completed_connections, 100000);
	CHECK_EQ(c->limits.max_replies_per_connection, 50000);
	CHECK_EQ(c->limits.reply_timeout, -1);

	/* three default rules: send anything, receive anything (eavesdrop), own anything */
	CHECK(list_count(&c->rules) >= 3);
	r = rule_at(c, 0);
	CHECK(r->allow && r->type == BUS_POLICY_RULE_SEND && r->name == NULL &&
	      r->eavesdrop == BUS_TRISTATE_TRUE);
	r = rule_at(c, 1);
	CHECK(r->allow && r->type == BUS_POLICY_RULE_RECEIVE && r->name == NULL &&
	      r->eavesdrop == BUS_TRISTATE_TRUE);
	r = rule_at(c, 2);
	CHECK(r->allow && r->type == BUS_POLICY_RULE_OWN && r->name == NULL);
	CHECK_EQ(list_count(&c->files), 1 + count_conf_files("/usr/share/dbus-1/session.d") +
					 count_conf_files("/etc/dbus-1/session.d") +
					 (access("/etc/dbus-1/session.conf", F_OK) == 0) +
					 (access("/etc/dbus-1/session-local.conf", F_OK) == 0));
	bus_config_free(c);
	unsetenv("XDG_DATA_HOME");
}

int main(int argc, char **argv)
{
	const char *data = argc > 1 ? argv[1] : TEST_DATA_DIR;

	CHECK(mkdtemp(tmpdir));
	snprintf(tpath, sizeof(tpath), "%s/t.conf", tmpdir);
	have_dbus_daemon = system("command -v dbus-daemon >/dev/null 2>&1") == 0 &&
			   !getenv("CONF_TEST_NO_DBUS_DAEMON");
	if (!have_dbus_daemon)
		printf("note: dbus-daemon not found, not cross-checking error messages\n");

	test_defaults();
	test_elements();
	test_servicedirs();
	test_limits();
	test_policy();
	test_warnings();
	test_errors();
	test_includes(data);
	test_system_conf();
	test_session_conf();

	unlink(tpath);
	rmdir(tmpdir);
	return test_result("test-config");
}
