/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * conf/console.c and bus_policy_uid_at_console(): who is at the console, in
 * dbus-daemon's order (logind seats first, then the console auth directory),
 * with an injected seats function and scratch directories; then the policy a
 * connection gets from the answer.
 */

#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "conf/config.h"
#include "conf/console.h"
#include "conf/policy.h"
#include "test.h"

/* The injected logind: uid 1000 has 2 seats, 1001 none, 1002 makes it fail. */
static unsigned int seats_calls;
static uid_t seats_last_uid;

static int fake_get_seats(uid_t uid)
{
	seats_calls++;
	seats_last_uid = uid;
	if (uid == 1000)
		return 2;
	if (uid == 1002)
		return -EIO;
	return 0;
}

static char scratch[] = "/tmp/bus1-console-test.XXXXXX";
static char seats_dir[256], auth_dir[256], missing_dir[256];

static void touch(const char *dir, const char *name)
{
	char path[512];
	int fd;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
	CHECK(fd >= 0);
	close(fd);
}

static void rm(const char *dir, const char *name)
{
	char path[512];

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	CHECK(unlink(path) == 0);
}

/* Name of an existing user other than the one of uid @not (root and nobody exist). */
static const struct passwd *some_user(void)
{
	const struct passwd *pw = getpwnam("nobody");

	if (!pw)
		pw = getpwuid(0);
	CHECK(pw);
	return pw;
}

static void test_logind(void)
{
	struct bus_console c = {
		.seats_dir = seats_dir,
		.auth_dir = auth_dir,
		.uid_get_seats = fake_get_seats,
	};
	const struct passwd *pw = some_user();
	uid_t uid = pw->pw_uid;
	char name[256];

	snprintf(name, sizeof(name), "%s", pw->pw_name);

	/* logind runs: its answer alone counts, the auth dir is not consulted */
	touch(auth_dir, name);
	seats_calls = 0;
	CHECK_EQ(bus_console_check(&c, 1000), BUS_CONSOLE_PRESENT);
	CHECK_EQ(seats_last_uid, 1000);
	CHECK_EQ(bus_console_check(&c, 1001), BUS_CONSOLE_ABSENT);
	CHECK_EQ(bus_console_check(&c, 1002), -EIO);
	CHECK_EQ(bus_console_check(&c, (uint32_t)uid),
		 uid == 1000 ? BUS_CONSOLE_PRESENT : BUS_CONSOLE_ABSENT);
	CHECK_EQ(seats_calls, 4);
	rm(auth_dir, name);

	/* no seats directory: logind is not running, never asked */
	c.seats_dir = missing_dir;
	seats_calls = 0;
	CHECK_EQ(bus_console_check(&c, 1000), BUS_CONSOLE_ABSENT);
	touch(auth_dir, name);
	CHECK_EQ(bus_console_check(&c, (uint32_t)uid), BUS_CONSOLE_PRESENT);
	CHECK_EQ(seats_calls, 0);
	rm(auth_dir, name);
}

static void test_auth_dir(void)
{
	struct bus_console c = { .auth_dir = auth_dir, .uid_get_seats = fake_get_seats };
	const struct passwd *pw = some_user();
	uid_t uid = pw->pw_uid;
	char name[256];

	snprintf(name, sizeof(name), "%s", pw->pw_name);

	CHECK_EQ(bus_console_check(&c, (uint32_t)uid), BUS_CONSOLE_ABSENT);
	touch(auth_dir, name);
	CHECK_EQ(bus_console_check(&c, (uint32_t)uid), BUS_CONSOLE_PRESENT);
	/* a directory entry of another kind counts as well (existence only) */
	rm(auth_dir, name);
	{
		char path[512];

		snprintf(path, sizeof(path), "%s/%s", auth_dir, name);
		CHECK(mkdir(path, 0755) == 0);
		CHECK_EQ(bus_console_check(&c, (uint32_t)uid), BUS_CONSOLE_PRESENT);
		CHECK(rmdir(path) == 0);
	}
	CHECK_EQ(bus_console_check(&c, (uint32_t)uid), BUS_CONSOLE_ABSENT);

	/* a uid without a passwd entry has no name to look for */
	touch(auth_dir, "4000000000");
	CHECK_EQ(bus_console_check(&c, 4000000000U), BUS_CONSOLE_ABSENT);
	rm(auth_dir, "4000000000");

	/* a missing auth dir: nobody */
	c.auth_dir = missing_dir;
	CHECK_EQ(bus_console_check(&c, (uint32_t)uid), BUS_CONSOLE_ABSENT);

	/* neither: nobody, and logind never asked */
	c = (struct bus_console){ .uid_get_seats = fake_get_seats };
	seats_calls = 0;
	CHECK_EQ(bus_console_check(&c, 1000), BUS_CONSOLE_ABSENT);
	CHECK_EQ(seats_calls, 0);
}

static void test_default(void)
{
	struct bus_console c;

	unsetenv(BUS_CONSOLE_AUTH_DIR_ENV);
	bus_console_init_default(&c);
	CHECK_STR(c.seats_dir, BUS_CONSOLE_SEATS_DIR);
	CHECK(c.auth_dir == NULL);	/* as Debian's dbus: no console auth dir */
	CHECK(c.uid_get_seats != NULL);

	/* the test hook: only that directory decides, logind is not asked */
	setenv(BUS_CONSOLE_AUTH_DIR_ENV, auth_dir, 1);
	bus_console_init_default(&c);
	CHECK(c.seats_dir == NULL);
	CHECK_STR(c.auth_dir, auth_dir);
	setenv(BUS_CONSOLE_AUTH_DIR_ENV, "", 1);
	bus_console_init_default(&c);
	CHECK(c.auth_dir == NULL);
	unsetenv(BUS_CONSOLE_AUTH_DIR_ENV);
}

static struct bus_policy *compile(const char *text)
{
	struct bus_config_options o = { .no_listen_ok = true };
	struct bus_config *c = NULL;
	struct bus_policy *p = NULL;
	char *err = NULL;

	CHECK(bus_config_load_buffer(&c, text, strlen(text), "/test/console.conf", &o,
				      &err) == 0);
	CHECK(bus_policy_new(&p, c) == 0);
	bus_config_free(c);
	return p;
}

/* The policy side: the answer selects the at_console rules of a connection. */
static void test_policy(void)
{
	struct bus_console fake = {
		.seats_dir = seats_dir,
		.uid_get_seats = fake_get_seats,
	};
	struct bus_policy *p;
	struct bus_client_policy *cp;
	const struct bus_policy_rule *rule;
	bool at;

	p = compile("<busconfig>"
		    "<policy context=\"default\"><deny own=\"*\"/></policy>\n"
		    "<policy at_console=\"true\"><allow own=\"org.example.Console\"/></policy>\n"
		    "<policy at_console=\"false\"><allow own=\"org.example.Remote\"/></policy>\n"
		    "</busconfig>");
	CHECK(bus_policy_has_console_rules(p));
	bus_policy_set_console(p, &fake);

	seats_calls = 0;
	CHECK_EQ(bus_policy_uid_at_console(p, 1000), BUS_CONSOLE_PRESENT);
	CHECK_EQ(bus_policy_uid_at_console(p, 1001), BUS_CONSOLE_ABSENT);
	CHECK_EQ(bus_policy_uid_at_console(p, 1002), -EIO);
	CHECK_EQ(seats_calls, 3);

	at = bus_policy_uid_at_console(p, 1000) == BUS_CONSOLE_PRESENT;
	CHECK(bus_client_policy_new(&cp, p, 1000, NULL, 0, at) == 0);
	CHECK(bus_client_policy_check_own(cp, "org.example.Console", &rule));
	CHECK(rule && rule->scope == BUS_POLICY_SCOPE_CONSOLE && rule->scope_id == 1);
	CHECK(!bus_client_policy_check_own(cp, "org.example.Remote", NULL));
	bus_client_policy_free(cp);

	/* a failed answer counts as "not at the console" */
	at = bus_policy_uid_at_console(p, 1002) == BUS_CONSOLE_PRESENT;
	CHECK(bus_client_policy_new(&cp, p, 1002, NULL, 0, at) == 0);
	CHECK(!bus_client_policy_check_own(cp, "org.example.Console", NULL));
	CHECK(bus_client_policy_check_own(cp, "org.example.Remote", &rule));
	CHECK(rule && rule->scope == BUS_POLICY_SCOPE_CONSOLE && rule->scope_id == 0);
	bus_client_policy_free(cp);
	bus_policy_free(p);

	/* without at_console rules nobody is asked */
	p = compile("<busconfig><policy context=\"default\"><allow own=\"*\"/></policy>"
		    "</busconfig>");
	CHECK(!bus_policy_has_console_rules(p));
	bus_policy_set_console(p, &fake);
	seats_calls = 0;
	CHECK_EQ(bus_policy_uid_at_console(p, 1000), BUS_CONSOLE_ABSENT);
	CHECK_EQ(seats_calls, 0);
	bus_policy_free(p);
	CHECK_EQ(bus_policy_uid_at_console(NULL, 1000), BUS_CONSOLE_ABSENT);
}

int main(void)
{
	CHECK(mkdtemp(scratch));
	snprintf(seats_dir, sizeof(seats_dir), "%s/seats", scratch);
	snprintf(auth_dir, sizeof(auth_dir), "%s/console", scratch);
	snprintf(missing_dir, sizeof(missing_dir), "%s/missing", scratch);
	CHECK(mkdir(seats_dir, 0755) == 0);
	CHECK(mkdir(auth_dir, 0755) == 0);

	test_logind();
	test_auth_dir();
	test_default();
	test_policy();

	rmdir(seats_dir);
	rmdir(auth_dir);
	rmdir(scratch);
	return test_result("test-console");
}
