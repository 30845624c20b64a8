/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * conf/service.c: .service key files and the service-directory scan.
 */

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "conf/config.h"
#include "dbus-compat/validate.h"
#include "test.h"

static struct bus_service *parse_ok(const char *text)
{
	struct bus_service *s = NULL;
	char *err = NULL;
	int r;

	r = bus_service_parse_buffer(&s, text, strlen(text), "x.service", &err);
	if (r)
		fprintf(stderr, "unexpected failure %d: %s\n--- input:\n%s\n", r, err ? err : "",
			text);
	CHECK(r == 0 && s);
	free(err);
	return s;
}

static void parse_err(const char *text, size_t len, const char *want)
{
	struct bus_service *s = NULL;
	char *err = NULL;
	int r;

	r = bus_service_parse_buffer(&s, text, len, "x.service", &err);
	CHECK_EQ(r, BUS_CONFIG_E_INVALID);
	CHECK(s == NULL);
	CHECK_STR(err, want);
	free(err);
	bus_service_free(s);
}

static void test_parse(void)
{
	struct bus_service *s;
	char *big;

	s = parse_ok("# comment\n"
		     "\n"
		     "[D-BUS Service]\n"
		     "Name=org.example.Foo\n"
		     "Exec=/usr/bin/foo --arg=1\\s2 \\\\x\n"
		     "User = nobody\n"
		     "SystemdService=foo.service\n"
		     "AssumedAppArmorLabel=foo_t\n"
		     "Name=org.example.Ignored\n"	/* first occurrence wins */
		     "Name[de]=Localized\n"		/* locale keys are skipped */
		     "X-Unknown=whatever\n"
		     "\t  \n"
		     "[Other Group]\n"
		     "Exec=/not/this\n"
		     "[D-BUS Service]\n"			/* a second group of the same name is ignored */
		     "User=not-this\n");
	CHECK_STR(s->path, "x.service");
	CHECK_STR(s->name, "org.example.Foo");
	CHECK_STR(s->exec, "/usr/bin/foo --arg=1 2 \\x");
	CHECK_STR(s->user, "nobody");
	CHECK_STR(s->systemd_service, "foo.service");
	CHECK_STR(s->apparmor_label, "foo_t");
	bus_service_free(s);

	/* minimal, CRLF line ends, no final newline */
	s = parse_ok("[D-BUS Service]\r\nName=a.b\r\nExec=/bin/true");
	CHECK_STR(s->name, "a.b");
	CHECK_STR(s->exec, "/bin/true");
	CHECK(s->user == NULL && s->systemd_service == NULL && s->apparmor_label == NULL);
	bus_service_free(s);

	s = parse_ok("[D-BUS Service]\nName=org._x-y.Z9\nExec=\\t\\n\\r\n");
	CHECK_STR(s->exec, "\t\n\r");
	bus_service_free(s);

#define E(text, msg) parse_err(text, strlen(text), msg)
	E("", "x.service: No [D-BUS Service] group in .service file");
	E("[Other]\nName=a.b\nExec=/x\n", "x.service: No [D-BUS Service] group in .service file");
	E("Name=a.b\n", "x.service:1: invalid service file: key=value before [Section]");
	E("[D-BUS Service]\nExec=/x\n", "x.service: No \"Name\" key in .service file");
	E("[D-BUS Service]\nName=a.b\n", "x.service: No \"Exec\" key in .service file");
	E("[D-BUS Service]\nName=ab\nExec=/x\n",
	  "x.service: Name=\"ab\" is not a valid well-known bus name");
	E("[D-BUS Service]\nName=:1.2\nExec=/x\n",
	  "x.service: Name=\":1.2\" is not a valid well-known bus name");
	E("[D-BUS Service]\nName=a.2b\nExec=/x\n",
	  "x.service: Name=\"a.2b\" is not a valid well-known bus name");
	E("[D-BUS Service]\nName=a..b\nExec=/x\n",
	  "x.service: Name=\"a..b\" is not a valid well-known bus name");
	E("[D-BUS Service\nName=a.b\n", "x.service:1: Invalid syntax for section header");
	E("[]\n", "x.service:1: Invalid syntax for section header");
	E("[D-BUS\tService]\n", "x.service:1: Invalid characters in section name");
	E("[D-BUS Service]\n=value\n", "x.service:2: Empty key name");
	E("[D-BUS Service]\nName\n", "x.service:2: No '=' in key/value pair");
	E("[D-BUS Service]\nNa me=a.b\n", "x.service:2: Invalid characters in key name");
	E("[D-BUS Service]\nName=a.b\nExec=/x\\q\n",
	  "x.service:3: Text to be unescaped had invalid escape sequence");
	E("[D-BUS Service]\n\nName=a.b\\\n", "x.service:3: Text to be unescaped ended in \\");
	E("[D-BUS Service]\nName=\xff\n", "x.service: invalid UTF-8");
	E("[D-BUS Service]\nName=\xc0\xaf\n", "x.service: invalid UTF-8");
	/*
	 * The file is checked with the wire's validate_utf8(), which refuses NUL
	 * bytes anywhere (as dbus-daemon's reader does). conf/ had its own UTF-8
	 * check that let NUL through, to fail later in the value or not at all.
	 */
	parse_err("[D-BUS Service]\nName=a\0.b\nExec=/x\n", 34, "x.service: invalid UTF-8");
	parse_err("# a\0b\n[D-BUS Service]\nName=a.b\nExec=/x\n", 39, "x.service: invalid UTF-8");
	parse_err("[D-BUS Service]\nName=a.b\nExec=/x\n\0", 34, "x.service: invalid UTF-8");
	/* Surrogates, overlong forms, above U+10FFFF: as on the wire. */
	E("[D-BUS Service]\nName=a.b\nExec=/\xed\xa0\x80\n", "x.service: invalid UTF-8");
	E("[D-BUS Service]\nName=a.b\nExec=/\xe0\x80\xaf\n", "x.service: invalid UTF-8");
	E("[D-BUS Service]\nName=a.b\nExec=/\xf4\x90\x80\x80\n", "x.service: invalid UTF-8");
	s = parse_ok("[D-BUS Service]\nName=a.b\nExec=/\xf4\x8f\xbf\xbf \xef\xb7\x90\n");
	CHECK_STR(s->exec, "/\xf4\x8f\xbf\xbf \xef\xb7\x90");
	bus_service_free(s);
#undef E

	big = malloc(200 * 1024);
	CHECK(big);
	memset(big, '#', 200 * 1024);
	parse_err(big, 200 * 1024, "x.service: Service file is too large (204800 bytes)");
	free(big);

	{
		struct bus_service *t = NULL;
		char *err = NULL;

		CHECK_EQ(bus_service_parse_file(&t, "/nonexistent/a.service", &err),
			  BUS_CONFIG_E_INVALID);
		CHECK_STR(err, "/nonexistent/a.service: Failed to open \"/nonexistent/a.service\": No such file or directory");
		free(err);
	}
}

/*
 * Name= is a well-known name by the wire's rule (dbus-compat/validate.h):
 * the file loads exactly when validate_well_known_name() accepts it.
 */
static void test_name_rule(void)
{
	static const char *const names[] = {
		"a.b", "org.freedesktop.DBus", "-a.b-", "_.-", "a.b.c.d", "A0.B1",
		"a", "a.", ".a.b", "a..b", "a.0b", "0a.b", ":1.2", ":a.b", "a.b:c", "a.b/c",
		"a.b c", "a.\xc3\xa9", "a.b*",
	};
	char name[300], text[400];

	for (size_t i = 0; i < sizeof(names) / sizeof(*names); i++) {
		struct bus_service *s = NULL;
		char *err = NULL;
		bool want = validate_well_known_name(names[i], strlen(names[i]));
		int r;

		snprintf(text, sizeof(text), "[D-BUS Service]\nName=%s\nExec=/x\n", names[i]);
		r = bus_service_parse_buffer(&s, text, strlen(text), "x.service", &err);
		if ((r == 0) != want)
			fprintf(stderr, "Name=%s: parse %d (%s), validate_well_known_name %d\n",
				names[i], r, err ? err : "", want);
		CHECK_EQ(r == 0, want);
		bus_service_free(s);
		free(err);
	}

	/* 255 bytes are a name, 256 are not. */
	memset(name, 'a', sizeof(name));
	name[1] = '.';
	for (size_t n = 255; n <= 256; n++) {
		struct bus_service *s = NULL;
		char *err = NULL;
		int r;

		snprintf(text, sizeof(text), "[D-BUS Service]\nName=%.*s\nExec=/x\n", (int)n,
			 name);
		r = bus_service_parse_buffer(&s, text, strlen(text), "x.service", &err);
		CHECK_EQ(r == 0, validate_well_known_name(name, n));
		CHECK_EQ(r == 0, n == 255);
		bus_service_free(s);
		free(err);
	}
}

static void add_dir(struct list_node *dirs, const char *path, unsigned int flags)
{
	size_t n = strlen(path);
	struct bus_config_servicedir *d = malloc(sizeof(*d) + n + 1);

	CHECK(d);
	d->flags = flags;
	memcpy(d->path, path, n + 1);
	list_append(dirs, &d->link);
}

static unsigned int n_warn;
static void on_warn(void *userdata, const char *msg)
{
	(void)userdata;
	(void)msg;
	n_warn++;
}

static void test_scan(const char *data)
{
	struct list_node dirs = LIST_INIT(dirs);
	struct bus_services *services = NULL;
	const struct bus_service *s;
	struct bus_config_string *w;
	char *p;
	int r, n;

	CHECK(asprintf(&p, "%s/svc1", data) > 0);
	add_dir(&dirs, p, 0);
	free(p);
	add_dir(&dirs, "/nonexistent/services", 0);
	CHECK(asprintf(&p, "%s/svc2", data) > 0);
	add_dir(&dirs, p, 0);
	free(p);
	CHECK(asprintf(&p, "%s/svc-strict", data) > 0);
	add_dir(&dirs, p, BUS_CONFIG_SERVICEDIR_STRICT_NAMING | BUS_CONFIG_SERVICEDIR_NO_WATCH);
	free(p);

	r = bus_services_load(&services, &dirs, on_warn, NULL);
	CHECK(r == 0);
	/* One, Two (svc1 wins over svc2), Three (misnamed but not strict), Strict */
	CHECK_EQ(services->n_services, 4);
	CHECK_STR(bus_services_get(services, 0)->name, "org.example.One");
	CHECK_STR(bus_services_get(services, 1)->name, "org.example.Strict");
	CHECK_STR(bus_services_get(services, 2)->name, "org.example.Three");
	CHECK_STR(bus_services_get(services, 3)->name, "org.example.Two");
	CHECK(bus_services_get(services, 4) == NULL);

	s = bus_services_lookup(services, "org.example.Two");
	CHECK(s);
	CHECK_STR(s->exec, "/usr/bin/two-from-svc1");
	CHECK(strstr(s->path, "/svc1/org.example.Two.service") != NULL);
	s = bus_services_lookup(services, "org.example.One");
	CHECK(s);
	CHECK_STR(s->user, "nobody");
	CHECK_STR(s->exec, "/usr/bin/one --flag");
	s = bus_services_lookup(services, "org.example.Three");
	CHECK(s);
	CHECK_STR(s->systemd_service, "three.service");
	CHECK_STR(s->apparmor_label, "unconfined");
	CHECK(bus_services_lookup(services, "org.example.Wrong") == NULL);
	CHECK(bus_services_lookup(services, "org.example.Ignored") == NULL);
	CHECK(bus_services_lookup(services, "org.example.Zzz") == NULL);
	CHECK(bus_services_lookup(services, "a.a") == NULL);

	/* Logged as by dbus-daemon: only the misnamed file in the strict dir. */
	n = 0;
	list_for_each_entry(w, &services->warnings, link) {
		if (strstr(w->str, "/svc-strict/wrong-name.service\" should have been named \"org.example.Wrong.service\": not loading it"))
			n |= 4;
		else
			fprintf(stderr, "unexpected warning: %s\n", w->str);
	}
	CHECK_EQ(n, 4);
	CHECK_EQ(n_warn, 1);
	/* Skipped silently by dbus-daemon: broken.service, the duplicate Two. */
	n = 0;
	list_for_each_entry(w, &services->notes, link) {
		if (strstr(w->str, "/svc1/broken.service: No \"Name\" key in .service file"))
			n |= 1;
		else if (strstr(w->str, "/svc2/org.example.Two.service: Service org.example.Two already exists"))
			n |= 2;
		else
			fprintf(stderr, "unexpected note: %s\n", w->str);
	}
	CHECK_EQ(n, 3);
	bus_services_free(services);

	/* nothing to scan */
	bus_config_servicedirs_clear(&dirs);
	r = bus_services_load(&services, &dirs, NULL, NULL);
	CHECK(r == 0);
	CHECK_EQ(services->n_services, 0);
	CHECK(bus_services_lookup(services, "a.b") == NULL);
	bus_services_free(services);
}

static void write_file(const char *dir, const char *name, const char *text)
{
	char *p;
	FILE *f;

	CHECK(asprintf(&p, "%s/%s", dir, name) > 0);
	f = fopen(p, "w");
	CHECK(f);
	CHECK(fputs(text, f) >= 0);
	CHECK(fclose(f) == 0);
	free(p);
}

static void remove_tree(const char *dir)
{
	char *cmd;

	CHECK(asprintf(&cmd, "rm -rf '%s'", dir) > 0);
	CHECK(system(cmd) == 0);
	free(cmd);
}

/*
 * Two files for one name (two notification daemons installed, both providing
 * org.freedesktop.Notifications), in one directory and across directories,
 * in files this test writes itself: the first definition wins (strcmp()
 * order inside a directory, directory order across them), the others are
 * notes naming both files, and nothing is a warning: dbus-daemon skips them
 * without logging anything.
 */
static void test_duplicates(void)
{
	struct list_node dirs = LIST_INIT(dirs);
	struct bus_services *services = NULL;
	const struct bus_service *s;
	struct bus_config_string *w;
	char tmpl[] = "/tmp/test-service.XXXXXX";
	char *root, *d1, *d2;
	unsigned int n;

	root = mkdtemp(tmpl);
	CHECK(root);
	CHECK(asprintf(&d1, "%s/first", root) > 0 && asprintf(&d2, "%s/second", root) > 0);
	CHECK(mkdir(d1, 0700) == 0 && mkdir(d2, 0700) == 0);
	write_file(d1, "xfce4-notifyd.service",
		   "[D-BUS Service]\nName=org.freedesktop.Notifications\n"
		   "Exec=/usr/lib/xfce4/notifyd/xfce4-notifyd\n");
	write_file(d1, "dunst.service",
		   "[D-BUS Service]\nName=org.freedesktop.Notifications\nExec=/usr/bin/dunst\n");
	write_file(d1, "org.example.Login.service",
		   "[D-BUS Service]\nName=org.example.Login\nExec=/bin/false\nUser=root\n"
		   "SystemdService=dbus-org.example.Login.service\n");
	/* A later directory loses even with a name that sorts first. */
	write_file(d2, "a.service",
		   "[D-BUS Service]\nName=org.freedesktop.Notifications\nExec=/usr/bin/mako\n");
	write_file(d2, "org.example.Other.service",
		   "[D-BUS Service]\nName=org.example.Other\nExec=/usr/bin/other\n");
	add_dir(&dirs, d1, 0);
	add_dir(&dirs, d2, 0);

	n_warn = 0;
	CHECK(bus_services_load(&services, &dirs, on_warn, NULL) == 0);
	CHECK_EQ(services->n_services, 3);
	s = bus_services_lookup(services, "org.freedesktop.Notifications");
	CHECK(s);
	CHECK_STR(s->exec, "/usr/bin/dunst");
	CHECK(strstr(s->path, "/first/dunst.service") != NULL);
	s = bus_services_lookup(services, "org.example.Login");
	CHECK(s);
	CHECK_STR(s->user, "root");
	CHECK_STR(s->exec, "/bin/false");
	CHECK_STR(s->systemd_service, "dbus-org.example.Login.service");
	CHECK(bus_services_lookup(services, "org.example.Other") != NULL);

	CHECK(list_is_empty(&services->warnings));
	CHECK_EQ(n_warn, 0);
	n = 0;
	list_for_each_entry(w, &services->notes, link) {
		char *want1, *want2;

		CHECK(asprintf(&want1, "%s/xfce4-notifyd.service: Service "
				"org.freedesktop.Notifications already exists in activation "
				"entry list (%s/dunst.service), ignoring", d1, d1) > 0);
		CHECK(asprintf(&want2, "%s/a.service: Service "
				"org.freedesktop.Notifications already exists in activation "
				"entry list (%s/dunst.service), ignoring", d2, d1) > 0);
		if (!strcmp(w->str, want1))
			n |= 1;
		else if (!strcmp(w->str, want2))
			n |= 2;
		else
			fprintf(stderr, "unexpected note: %s\n", w->str);
		free(want1);
		free(want2);
	}
	CHECK_EQ(n, 3);
	bus_services_free(services);
	bus_config_servicedirs_clear(&dirs);
	remove_tree(root);
	free(d1);
	free(d2);
}

/*
 * Smoke check of the service files installed on this machine, for either
 * bus: whatever is installed (broken files, duplicates), they load.
 */
static void test_installed(bool system)
{
	struct list_node dirs = LIST_INIT(dirs);
	struct bus_services *services = NULL;

	if (system)
		CHECK(bus_config_standard_system_servicedirs(&dirs) == 0);
	else
		CHECK(bus_config_standard_session_servicedirs(&dirs) == 0);
	CHECK(bus_services_load(&services, &dirs, NULL, NULL) == 0);
	printf("installed activatable names (%s bus): %zu\n", system ? "system" : "session",
	       services->n_services);
	bus_services_free(services);
	bus_config_servicedirs_clear(&dirs);
}

int main(int argc, char **argv)
{
	const char *data = argc > 1 ? argv[1] : TEST_DATA_DIR;

	test_parse();
	test_name_rule();
	test_scan(data);
	test_duplicates();
	test_installed(true);
	test_installed(false);
	return test_result("test-service");
}
