/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Tests of D-Bus address parsing, escaping, listening and connecting.
 */

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <netdb.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>
#include "dbus-compat/address.h"
#include "check.h"

static const char guid[] = "0123456789abcdef0123456789ABCDEF";

static void expect_one(const char *str, enum address_kind kind, const char *value,
		       const char *g)
{
	struct address_list l;
	char *err = NULL;
	int r;

	r = address_list_parse(&l, str, &err);
	if (r)
		fprintf(stderr, "parse '%s': %d %s\n", str, r, err ? err : "");
	CHECK(r == 0);
	CHECK(!err);
	CHECK(l.n_entries == 1);
	CHECK(l.entries[0].kind == kind);
	if (value)
		CHECK(l.entries[0].value && !strcmp(l.entries[0].value, value));
	else
		CHECK(!l.entries[0].value);
	if (g)
		CHECK(l.entries[0].guid && !strcmp(l.entries[0].guid, g));
	else
		CHECK(!l.entries[0].guid);
	address_list_deinit(&l);
}

/* Parse must fail with ADDRESS_E_INVALID and a message containing @needle. */
static void expect_error(const char *str, const char *needle)
{
	struct address_list l;
	char *err = NULL;
	int r;

	r = address_list_parse(&l, str, &err);
	if (r != ADDRESS_E_INVALID || !err || (needle && !strstr(err, needle)))
		fprintf(stderr, "parse '%s': r=%d err='%s' (wanted '%s')\n", str, r,
			err ? err : "(null)", needle ? needle : "");
	CHECK(r == ADDRESS_E_INVALID);
	CHECK(err);
	if (needle)
		CHECK(strstr(err, needle));
	free(err);
	address_list_deinit(&l);
}

static void test_parse(void)
{
	struct address_list l;
	char buf[256];

	expect_one("unix:path=/tmp/dbus-test", ADDRESS_UNIX_PATH, "/tmp/dbus-test", NULL);
	expect_one("unix:abstract=/tmp/dbus-abc", ADDRESS_UNIX_ABSTRACT, "/tmp/dbus-abc", NULL);
	expect_one("unix:tmpdir=/tmp", ADDRESS_UNIX_TMPDIR, "/tmp", NULL);
	expect_one("unix:dir=/run/x", ADDRESS_UNIX_DIR, "/run/x", NULL);
	expect_one("unix:runtime=yes", ADDRESS_UNIX_RUNTIME, NULL, NULL);
	snprintf(buf, sizeof(buf), "unix:path=/a,guid=%s", guid);
	expect_one(buf, ADDRESS_UNIX_PATH, "/a", guid);
	snprintf(buf, sizeof(buf), "unix:guid=%s,abstract=x", guid);
	expect_one(buf, ADDRESS_UNIX_ABSTRACT, "x", guid);
	/* Escapes, optionally-escaped bytes escaped anyway, upper/lower hex. */
	expect_one("unix:path=/tmp/a%20b%2cc%3Bd%3de", ADDRESS_UNIX_PATH, "/tmp/a b,c;d=e", NULL);
	expect_one("unix:path=%2F%74mp", ADDRESS_UNIX_PATH, "/tmp", NULL);
	expect_one("unix:path=/a-b_c.d\\e*f", ADDRESS_UNIX_PATH, "/a-b_c.d\\e*f", NULL);
	expect_one("unix:path=%c3%a4", ADDRESS_UNIX_PATH, "\xc3\xa4", NULL);
	/* Empty entries are skipped. */
	expect_one(";unix:path=/a;;", ADDRESS_UNIX_PATH, "/a", NULL);

	/* Several addresses in order. */
	CHECK(address_list_parse(&l, "unix:path=/a;unix:abstract=b;unix:tmpdir=/tmp", NULL) == 0);
	CHECK(l.n_entries == 3);
	CHECK(l.entries[0].kind == ADDRESS_UNIX_PATH && !strcmp(l.entries[0].value, "/a"));
	CHECK(l.entries[1].kind == ADDRESS_UNIX_ABSTRACT && !strcmp(l.entries[1].value, "b"));
	CHECK(l.entries[2].kind == ADDRESS_UNIX_TMPDIR && !strcmp(l.entries[2].value, "/tmp"));
	address_list_deinit(&l);
	address_list_deinit(&l);
}

static void test_parse_errors(void)
{
	/* Unsupported transports are named. */
	expect_error("launchd:env=DBUS_LAUNCHD_SESSION_BUS_SOCKET", "'launchd:'");
	expect_error("systemd:", "'systemd:'");
	expect_error("autolaunch:", "'autolaunch:'");
	expect_error("unixexec:path=/bin/true", "'unixexec:'");
	expect_error("frobnicate:x=y", "unknown transport 'frobnicate:'");
	/* An error in any entry fails the list. */
	expect_error("unix:path=/a;launchd:env=X", "'launchd:'");
	/* tcp: values are checked; unknown keys are ignored (as dbus-daemon). */
	expect_error("tcp:host=::1", "invalid escaping");
	expect_error("tcp:host=127.0.0.1,family=ipx", "unknown address family 'ipx'");
	expect_error("tcp:port=99999", "port=");
	expect_error("tcp:port=http", "port=");
	expect_error("tcp:port=-1", "port=");
	expect_error("tcp:host=a,host=b", "duplicate key 'host'");
	expect_error("nonce-tcp:host=", "empty value");
	expect_error("tcp:host=a,", "trailing ','");
	expect_error("tcp:host=a,guid=xyz", "guid=");

	expect_error("", "empty address");
	expect_error(";;", "empty address");
	expect_error("unix", "missing ':'");
	expect_error(":path=/a", "empty transport");
	expect_error("unix:", "needs one of");
	expect_error("unix:guid=0123456789abcdef0123456789abcdef", "needs one of");
	expect_error("unix:path", "not key=value");
	expect_error("unix:=x", "empty key");
	expect_error("unix:path=", "empty value");
	expect_error("unix:path=/a,", "trailing ','");
	expect_error("unix:path=/a,,abstract=b", "empty key=value");
	expect_error("unix:path=/a,path=/b", "duplicate key 'path'");
	expect_error("unix:path=/a,abstract=b", "conflicting keys");
	expect_error("unix:tmpdir=/tmp,dir=/tmp", "conflicting keys");
	expect_error("unix:runtime=yes,path=/a", "conflicting keys");
	expect_error("unix:foo=bar", "unknown key 'foo'");
	expect_error("unix:path=/a b", "invalid escaping");
	expect_error("unix:path=/a,b", "not key=value");
	expect_error("unix:path=/a=b", "invalid escaping");
	expect_error("unix:path=%zz", "invalid escaping");
	expect_error("unix:path=%4", "invalid escaping");
	expect_error("unix:path=abc%", "invalid escaping");
	expect_error("unix:path=/a%00b", "NUL");
	expect_error("unix:runtime=no", "'yes'");
	expect_error("unix:path=/a,guid=abc", "guid=");
	expect_error("unix:path=/a,guid=0123456789abcdef0123456789abcdeg", "guid=");
	expect_error("unix:path=/a,guid=0123456789abcdef0123456789abcdef,guid="
		     "0123456789abcdef0123456789abcdef", "duplicate key 'guid'");

	/* errorp may be NULL. */
	{
		struct address_list l;

		CHECK(address_list_parse(&l, "unixexec:", NULL) == ADDRESS_E_INVALID);
		address_list_deinit(&l);
	}
}

static void test_parse_tcp(void)
{
	struct address_list l;
	char buf[256];

	CHECK(address_list_parse(&l, "tcp:", NULL) == 0);
	CHECK(l.n_entries == 1 && l.entries[0].kind == ADDRESS_TCP);
	CHECK(!l.entries[0].host && !l.entries[0].port && !l.entries[0].family);
	address_list_deinit(&l);

	snprintf(buf, sizeof(buf), "nonce-tcp:host=127.0.0.1,bind=*,port=0,family=ipv4,"
		 "noncefile=/tmp/a%%20b,frob=1,guid=%s", guid);
	CHECK(address_list_parse(&l, buf, NULL) == 0);
	CHECK(l.n_entries == 1 && l.entries[0].kind == ADDRESS_NONCE_TCP);
	CHECK(!strcmp(l.entries[0].host, "127.0.0.1"));
	CHECK(!strcmp(l.entries[0].bind, "*"));
	CHECK(!strcmp(l.entries[0].port, "0"));
	CHECK(!strcmp(l.entries[0].family, "ipv4"));
	CHECK(!strcmp(l.entries[0].noncefile, "/tmp/a b"));
	CHECK(!strcmp(l.entries[0].guid, guid));
	CHECK(!l.entries[0].value);
	address_list_deinit(&l);

	CHECK(address_list_parse(&l, "tcp:host=%3a%3a1,port=65535,family=ipv6", NULL) == 0);
	CHECK(!strcmp(l.entries[0].host, "::1") && !strcmp(l.entries[0].port, "65535"));
	address_list_deinit(&l);
}

/* Value of @key in the (escaped) address @addr, unescaped; malloc()ed or NULL. */
static char *addr_value(const char *addr, const char *key)
{
	struct address_list l;
	char *v = NULL;
	struct address *a;

	if (address_list_parse(&l, addr, NULL))
		return NULL;
	a = &l.entries[0];
	if (!strcmp(key, "host"))
		v = a->host;
	else if (!strcmp(key, "port"))
		v = a->port;
	else if (!strcmp(key, "family"))
		v = a->family;
	else if (!strcmp(key, "noncefile"))
		v = a->noncefile;
	else if (!strcmp(key, "guid"))
		v = a->guid;
	v = v ? strdup(v) : NULL;
	address_list_deinit(&l);
	return v;
}

static int tcp_connect(const char *host, const char *port, int family)
{
	struct addrinfo hints = { .ai_family = family, .ai_socktype = SOCK_STREAM }, *ai;
	int fd;

	CHECK(getaddrinfo(host, port, &hints, &ai) == 0);
	fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	CHECK(fd >= 0);
	CHECK(connect(fd, ai->ai_addr, ai->ai_addrlen) == 0);
	freeaddrinfo(ai);
	return fd;
}

static void test_listen_tcp(void)
{
	char dir[] = "/tmp/test-address-tcp-XXXXXX", g[ADDRESS_GUID_LEN + 1];
	int fds[ADDRESS_TCP_FDS_MAX], cfd, afd;
	uint8_t nonce[ADDRESS_NONCE_LEN], got[ADDRESS_NONCE_LEN];
	struct address_list l;
	char *connectable = NULL, *noncefile = NULL, *err = NULL, *v, *port;
	size_t n_fds;
	struct stat st;

	CHECK(address_generate_guid(g) == 0);

	/* port=0: the real port is printed, with the family of the sockets. */
	CHECK(address_list_parse(&l, "tcp:host=127.0.0.1,port=0", NULL) == 0);
	CHECK(address_listen_tcp(&l.entries[0], g, fds, &n_fds, &connectable, nonce,
				  &noncefile, &err) == 0);
	printf("# listen tcp:host=127.0.0.1,port=0 -> %s\n", connectable);
	CHECK(n_fds == 1 && !noncefile);
	CHECK(fcntl(fds[0], F_GETFD) & FD_CLOEXEC);
	CHECK(fcntl(fds[0], F_GETFL) & O_NONBLOCK);
	CHECK(!strncmp(connectable, "tcp:host=127.0.0.1,port=", 24));
	CHECK(strstr(connectable, ",family=ipv4,guid="));
	port = addr_value(connectable, "port");
	CHECK(port && strcmp(port, "0") && atoi(port) > 0);
	v = addr_value(connectable, "guid");
	CHECK(v && !strcmp(v, g));
	free(v);
	cfd = tcp_connect("127.0.0.1", port, AF_INET);
	afd = accept4(fds[0], NULL, NULL, SOCK_CLOEXEC);
	CHECK(afd >= 0);
	close(afd);
	close(cfd);
	close(fds[0]);
	free(connectable);
	free(port);
	address_list_deinit(&l);

	/* No keys at all: host localhost, a free port. */
	CHECK(address_list_parse(&l, "tcp:", NULL) == 0);
	CHECK(address_listen_tcp(&l.entries[0], NULL, fds, &n_fds, &connectable, nonce,
				  NULL, NULL) == 0);
	CHECK(!strncmp(connectable, "tcp:host=localhost,port=", 24));
	CHECK(!strstr(connectable, "guid="));
	for (size_t i = 0; i < n_fds; i++)
		close(fds[i]);
	free(connectable);
	address_list_deinit(&l);

	/* A port in use is refused. */
	CHECK(address_list_parse(&l, "tcp:host=127.0.0.1,port=0", NULL) == 0);
	CHECK(address_listen_tcp(&l.entries[0], NULL, fds, &n_fds, &connectable, nonce,
				  NULL, NULL) == 0);
	port = addr_value(connectable, "port");
	free(connectable);
	address_list_deinit(&l);
	{
		char buf[128];
		int fds2[ADDRESS_TCP_FDS_MAX];
		size_t n2;

		snprintf(buf, sizeof(buf), "tcp:host=127.0.0.1,port=%s", port);
		CHECK(address_list_parse(&l, buf, NULL) == 0);
		CHECK(address_listen_tcp(&l.entries[0], NULL, fds2, &n2, &connectable, nonce,
					  NULL, &err) == ADDRESS_E_UNUSABLE);
		CHECK(err && strstr(err, "in use"));
		free(err);
		err = NULL;
		address_list_deinit(&l);
	}
	close(fds[0]);
	free(port);

	/* bind= is listened on, host= is printed. */
	CHECK(address_list_parse(&l, "tcp:host=localhost,bind=127.0.0.1,family=ipv4", NULL) == 0);
	CHECK(address_listen_tcp(&l.entries[0], NULL, fds, &n_fds, &connectable, nonce,
				  NULL, NULL) == 0);
	CHECK(n_fds == 1);
	CHECK(!strncmp(connectable, "tcp:host=localhost,port=", 24));
	CHECK(strstr(connectable, ",family=ipv4"));
	port = addr_value(connectable, "port");
	cfd = tcp_connect("127.0.0.1", port, AF_INET);
	close(cfd);
	close(fds[0]);
	free(port);
	free(connectable);
	address_list_deinit(&l);

	/* IPv6 loopback, where the machine has it. */
	CHECK(address_list_parse(&l, "tcp:host=%3a%3a1,port=0", NULL) == 0);
	if (address_listen_tcp(&l.entries[0], NULL, fds, &n_fds, &connectable, nonce, NULL,
			       NULL) == 0) {
		printf("# listen tcp:host=::1 -> %s\n", connectable);
		CHECK(!strncmp(connectable, "tcp:host=%3a%3a1,port=", 22));
		CHECK(strstr(connectable, ",family=ipv6"));
		port = addr_value(connectable, "port");
		cfd = tcp_connect("::1", port, AF_INET6);
		close(cfd);
		for (size_t i = 0; i < n_fds; i++)
			close(fds[i]);
		free(port);
		free(connectable);
	} else {
		printf("# no IPv6 loopback: ::1 not tested\n");
	}
	address_list_deinit(&l);

	/* An unknown name, a family the host does not have. */
	CHECK(address_list_parse(&l, "tcp:host=127.0.0.1,family=ipv6", NULL) == 0);
	CHECK(address_listen_tcp(&l.entries[0], NULL, fds, &n_fds, &connectable, nonce,
				  NULL, &err) == ADDRESS_E_UNUSABLE);
	CHECK(err);
	free(err);
	err = NULL;
	address_list_deinit(&l);

	/* nonce-tcp: a 0600 nonce file of 16 bytes in a new 0700 directory under TMPDIR. */
	CHECK(mkdtemp(dir));
	setenv("TMPDIR", dir, 1);
	CHECK(address_list_parse(&l, "nonce-tcp:host=127.0.0.1,bind=127.0.0.1", NULL) == 0);
	CHECK(address_listen_tcp(&l.entries[0], g, fds, &n_fds, &connectable, nonce,
				  &noncefile, &err) == 0);
	unsetenv("TMPDIR");
	printf("# listen nonce-tcp -> %s\n", connectable);
	CHECK(!strncmp(connectable, "nonce-tcp:host=127.0.0.1,port=", 30));
	CHECK(noncefile && !strncmp(noncefile, dir, strlen(dir)));
	CHECK(strstr(noncefile, "/dbus_nonce-") && strstr(noncefile, "/nonce"));
	v = addr_value(connectable, "noncefile");
	CHECK(v && !strcmp(v, noncefile));
	free(v);
	CHECK(stat(noncefile, &st) == 0 && S_ISREG(st.st_mode) && (st.st_mode & 0777) == 0600);
	CHECK(st.st_size == ADDRESS_NONCE_LEN);
	{
		int nfd = open(noncefile, O_RDONLY | O_CLOEXEC);

		CHECK(nfd >= 0 && read(nfd, got, sizeof(got)) == (ssize_t)sizeof(got));
		close(nfd);
		CHECK(!memcmp(got, nonce, sizeof(got)));
	}
	{
		char *slash = strrchr(noncefile, '/');

		*slash = '\0';
		CHECK(stat(noncefile, &st) == 0 && (st.st_mode & 0777) == 0700);
		*slash = '/';
	}
	CHECK(unlink(noncefile) == 0);
	*strrchr(noncefile, '/') = '\0';
	CHECK(rmdir(noncefile) == 0);
	CHECK(rmdir(dir) == 0);
	for (size_t i = 0; i < n_fds; i++)
		close(fds[i]);
	free(noncefile);
	free(connectable);
	address_list_deinit(&l);
}

static void test_escape(void)
{
	char all[256], *esc, *back;
	size_t n, i;

	for (i = 0; i < 256; i++)
		all[i] = (char)i;
	esc = address_escape(all, 256);
	CHECK(esc);
	/* Only optionally-escaped bytes and escapes remain. */
	for (i = 0; esc[i]; i++)
		CHECK(strchr("-_/.\\*%", esc[i]) || (esc[i] >= '0' && esc[i] <= '9') ||
		       (esc[i] >= 'a' && esc[i] <= 'z') || (esc[i] >= 'A' && esc[i] <= 'Z'));
	CHECK(address_unescape(esc, strlen(esc), &back, &n) == 0);
	CHECK(n == 256 && !memcmp(back, all, 256));
	free(back);
	free(esc);

	esc = address_escape("/tmp/dbus-AZaz09_-.\\*", 21);
	CHECK(!strcmp(esc, "/tmp/dbus-AZaz09_-.\\*"));
	free(esc);
	esc = address_escape("a b,c;d=e%", 10);
	CHECK(!strcmp(esc, "a%20b%2cc%3bd%3de%25"));
	free(esc);
	esc = address_escape("", 0);
	CHECK(esc && !strcmp(esc, ""));
	free(esc);

	CHECK(address_unescape("a%2", 3, &back, NULL) == ADDRESS_E_INVALID);
	CHECK(address_unescape("a,b", 3, &back, NULL) == ADDRESS_E_INVALID);
	CHECK(address_unescape("%41%42", 6, &back, &n) == 0);
	CHECK(n == 2 && !strcmp(back, "AB"));
	free(back);

	/* Escaped arbitrary path parses back to the same path. */
	{
		const char *path = "/tmp/odd name,with;chars=and%percent";
		char buf[256];
		struct address_list l;

		esc = address_escape(path, strlen(path));
		snprintf(buf, sizeof(buf), "unix:path=%s", esc);
		CHECK(address_list_parse(&l, buf, NULL) == 0);
		CHECK(!strcmp(l.entries[0].value, path));
		address_list_deinit(&l);
		free(esc);
	}
}

static void test_guid(void)
{
	char a[ADDRESS_GUID_LEN + 1], b[ADDRESS_GUID_LEN + 1];
	size_t i;

	CHECK(address_generate_guid(a) == 0);
	CHECK(address_generate_guid(b) == 0);
	CHECK(strlen(a) == ADDRESS_GUID_LEN);
	for (i = 0; i < ADDRESS_GUID_LEN; i++)
		CHECK((a[i] >= '0' && a[i] <= '9') || (a[i] >= 'a' && a[i] <= 'f'));
	CHECK(strcmp(a, b));
}

/* Listen on @str, check the printed address, connect to it, accept. */
static void listen_connect(const char *str, const char *expect_prefix, bool expect_unlink)
{
	struct address_list l, c;
	char *connectable = NULL, *unlink_path = NULL, *err = NULL, g[ADDRESS_GUID_LEN + 1];
	int lfd, cfd, afd, r;
	struct ucred uc;
	socklen_t len = sizeof(uc);

	CHECK(address_generate_guid(g) == 0);
	CHECK(address_list_parse(&l, str, NULL) == 0);
	r = address_listen(&l.entries[0], g, &lfd, &connectable, &unlink_path, &err);
	if (r)
		fprintf(stderr, "listen %s: %d %s\n", str, r, err ? err : "");
	CHECK(r == 0);
	printf("# listen %s -> %s\n", str, connectable);
	CHECK(!strncmp(connectable, expect_prefix, strlen(expect_prefix)));
	CHECK(strstr(connectable, ",guid=") && !strcmp(strstr(connectable, ",guid=") + 6, g));
	CHECK((unlink_path != NULL) == expect_unlink);
	CHECK(fcntl(lfd, F_GETFD) & FD_CLOEXEC);
	CHECK(fcntl(lfd, F_GETFL) & O_NONBLOCK);

	/* The printed address is parseable and connectable. */
	CHECK(address_list_parse(&c, connectable, NULL) == 0);
	CHECK(c.n_entries == 1);
	CHECK(c.entries[0].guid && !strcmp(c.entries[0].guid, g));
	CHECK(address_connect(&c.entries[0], &cfd) == 0);
	afd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
	CHECK(afd >= 0);
	CHECK(getsockopt(afd, SOL_SOCKET, SO_PEERCRED, &uc, &len) == 0);
	CHECK(uc.pid == getpid());
	CHECK(write(cfd, "x", 1) == 1);
	{
		char ch = 0;

		CHECK(read(afd, &ch, 1) == 1 && ch == 'x');
	}
	if (unlink_path) {
		struct stat st;

		CHECK(stat(unlink_path, &st) == 0 && S_ISSOCK(st.st_mode));
		CHECK((st.st_mode & 0777) == 0777);
		CHECK(unlink(unlink_path) == 0);
	}
	close(afd);
	close(cfd);
	close(lfd);
	free(connectable);
	free(unlink_path);
	address_list_deinit(&c);
	address_list_deinit(&l);
}

static void test_listen(void)
{
	char dir[] = "/tmp/test-address-XXXXXX", buf[256], abs_name[64];
	struct address_list l;
	char *connectable = NULL, *unlink_path = NULL, *err = NULL;
	int lfd, lfd2, fd;

	CHECK(mkdtemp(dir));

	snprintf(buf, sizeof(buf), "unix:path=%s/sock", dir);
	snprintf(abs_name, sizeof(abs_name), "unix:path=%s/sock,guid=", dir);
	listen_connect(buf, abs_name, true);

	/* A directory name that needs escaping. */
	{
		char sub[200], esc_prefix[256];

		snprintf(sub, sizeof(sub), "%s/a b,c", dir);
		CHECK(mkdir(sub, 0700) == 0);
		snprintf(buf, sizeof(buf), "unix:dir=%s/a%%20b%%2cc", dir);
		snprintf(esc_prefix, sizeof(esc_prefix), "unix:path=%s/a%%20b%%2cc/dbus-", dir);
		listen_connect(buf, esc_prefix, true);
		CHECK(rmdir(sub) == 0);
	}

	snprintf(buf, sizeof(buf), "unix:tmpdir=%s", dir);
	snprintf(abs_name, sizeof(abs_name), "unix:path=%s/dbus-", dir);
	listen_connect(buf, abs_name, true);

	snprintf(abs_name, sizeof(abs_name), "unix:abstract=/test-address/%d", (int)getpid());
	listen_connect(abs_name, abs_name, false);

	setenv("XDG_RUNTIME_DIR", dir, 1);
	snprintf(abs_name, sizeof(abs_name), "unix:path=%s/bus,guid=", dir);
	listen_connect("unix:runtime=yes", abs_name, true);
	unsetenv("XDG_RUNTIME_DIR");
	CHECK(address_list_parse(&l, "unix:runtime=yes", NULL) == 0);
	CHECK(address_listen(&l.entries[0], NULL, &lfd, &connectable, NULL, &err) ==
	       ADDRESS_E_UNUSABLE);
	CHECK(err && strstr(err, "XDG_RUNTIME_DIR"));
	free(err);
	err = NULL;
	/* Listen-only kinds cannot be connected to. */
	CHECK(address_connect(&l.entries[0], &fd) == ADDRESS_E_UNUSABLE);
	address_list_deinit(&l);

	/* A path somebody listens on is refused; a stale one is replaced. */
	snprintf(buf, sizeof(buf), "unix:path=%s/live", dir);
	CHECK(address_list_parse(&l, buf, NULL) == 0);
	CHECK(address_listen(&l.entries[0], NULL, &lfd, &connectable, &unlink_path, NULL) == 0);
	CHECK(!strstr(connectable, "guid="));
	free(connectable);
	CHECK(address_listen(&l.entries[0], NULL, &lfd2, &connectable, NULL, &err) ==
	       ADDRESS_E_UNUSABLE);
	CHECK(err && strstr(err, "in use"));
	free(err);
	err = NULL;
	close(lfd); /* now the file is stale */
	CHECK(address_listen(&l.entries[0], NULL, &lfd2, &connectable, NULL, NULL) == 0);
	CHECK(address_connect(&l.entries[0], &fd) == 0);
	close(fd);
	close(lfd2);
	free(connectable);
	CHECK(unlink(unlink_path) == 0);
	free(unlink_path);
	address_list_deinit(&l);

	/* A regular file in the way is not deleted. */
	snprintf(buf, sizeof(buf), "%s/file", dir);
	fd = open(buf, O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
	CHECK(fd >= 0);
	close(fd);
	snprintf(buf, sizeof(buf), "unix:path=%s/file", dir);
	CHECK(address_list_parse(&l, buf, NULL) == 0);
	CHECK(address_listen(&l.entries[0], NULL, &lfd, &connectable, NULL, NULL) ==
	       ADDRESS_E_UNUSABLE);
	snprintf(buf, sizeof(buf), "%s/file", dir);
	CHECK(access(buf, F_OK) == 0);
	CHECK(unlink(buf) == 0);
	address_list_deinit(&l);

	/* Too long a path. */
	memset(buf, 'a', sizeof(buf));
	memcpy(buf, "unix:path=/", 11);
	buf[200] = '\0';
	CHECK(address_list_parse(&l, buf, NULL) == 0);
	CHECK(address_listen(&l.entries[0], NULL, &lfd, &connectable, NULL, &err) ==
	       ADDRESS_E_UNUSABLE);
	CHECK(err && strstr(err, "too long"));
	free(err);
	address_list_deinit(&l);

	/* A directory that does not exist. */
	CHECK(address_list_parse(&l, "unix:dir=/nonexistent/dir", NULL) == 0);
	CHECK(address_listen(&l.entries[0], NULL, &lfd, &connectable, NULL, NULL) == -ENOENT);
	address_list_deinit(&l);

	CHECK(rmdir(dir) == 0);
}

int main(void)
{
	/* The socket mode must not depend on the umask. */
	umask(077);
	test_parse();
	test_parse_errors();
	test_parse_tcp();
	test_escape();
	test_guid();
	test_listen();
	test_listen_tcp();
	printf("ok\n");
	return 0;
}
