/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The server side of the DBUS_COOKIE_SHA1 keyrings, in a private directory:
 * creation and permissions, cookie lifetime, the file format, locking and
 * what is refused.
 */

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "dbus-compat/keyring.h"
#include "check.h"

#define CTX "org_freedesktop_general"

static char base[] = "/tmp/test-keyring-XXXXXX";
static char dir[256], file[300];

static void write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	CHECK(f);
	fputs(text, f);
	CHECK(fclose(f) == 0);
}

static char *read_file(const char *path)
{
	static char buf[65536];
	FILE *f = fopen(path, "r");
	size_t n;

	CHECK(f);
	n = fread(buf, 1, sizeof(buf) - 1, f);
	buf[n] = '\0';
	fclose(f);
	return buf;
}

static int count_lines(const char *s)
{
	int n = 0;

	for (; *s; s++)
		if (*s == '\n')
			n++;
	return n;
}

static void test_context(void)
{
	CHECK(keyring_context_is_valid(CTX));
	CHECK(keyring_context_is_valid("foo"));
	CHECK(!keyring_context_is_valid(""));
	CHECK(!keyring_context_is_valid(".foo"));
	CHECK(!keyring_context_is_valid("a.lock"));
	CHECK(!keyring_context_is_valid("a/b"));
	CHECK(!keyring_context_is_valid("a\\b"));
	CHECK(!keyring_context_is_valid("a b"));
	CHECK(!keyring_context_is_valid("a\tb"));
	CHECK(!keyring_context_is_valid("a\nb"));
	CHECK(!keyring_context_is_valid("caf\xc3\xa9"));
}

static void test_create(void)
{
	struct keyring_cookie c, c2;
	struct stat st;
	int64_t now = (int64_t)time(NULL);
	char expect[512];
	unsigned int id;
	long long t;
	char secret[300];

	/* No directory yet: created 0700, a cookie file 0600 with one line. */
	CHECK(keyring_get_cookie(dir, CTX, now, &c) == 0);
	CHECK(lstat(dir, &st) == 0 && S_ISDIR(st.st_mode) && (st.st_mode & 0777) == 0700);
	CHECK(stat(file, &st) == 0 && S_ISREG(st.st_mode) && (st.st_mode & 0777) == 0600);
	CHECK(c.created == now && c.id <= 0x7fffffffU && strlen(c.secret) == 48);
	CHECK(sscanf(read_file(file), "%u %lld %299s", &id, &t, secret) == 3);
	CHECK(id == c.id && t == now && !strcmp(secret, c.secret));
	snprintf(expect, sizeof(expect), "%u %lld %s\n", c.id, (long long)now, c.secret);
	CHECK(!strcmp(read_file(file), expect));
	/* No lock or temporary file left behind. */
	{
		char lock[320];

		snprintf(lock, sizeof(lock), "%s.lock", file);
		CHECK(access(lock, F_OK) < 0 && errno == ENOENT);
	}

	/* A recent cookie is offered again; the file is not rewritten. */
	CHECK(keyring_get_cookie(dir, CTX, now + 60, &c2) == 0);
	CHECK(c2.id == c.id && !strcmp(c2.secret, c.secret));
	CHECK(!strcmp(read_file(file), expect));

	/* At 5 minutes it is too old to be offered: a new one joins it. */
	CHECK(keyring_get_cookie(dir, CTX, now + KEYRING_NEW_SECONDS, &c2) == 0);
	CHECK(c2.id != c.id && strcmp(c2.secret, c.secret));
	CHECK(c2.created == now + KEYRING_NEW_SECONDS);
	CHECK(count_lines(read_file(file)) == 2);
	CHECK(strstr(read_file(file), c.secret));

	/* After 7 minutes the first one is dropped when the file is rewritten. */
	CHECK(keyring_get_cookie(dir, CTX, now + KEYRING_EXPIRE_SECONDS + KEYRING_NEW_SECONDS + 1,
				  &c) == 0);
	CHECK(count_lines(read_file(file)) == 1);
	CHECK(strstr(read_file(file), c.secret));
}

static void test_lifetime(void)
{
	struct keyring_cookie c;
	int64_t now = 1700000000;
	char text[1024], *s;

	/*
	 * Expired (8 min), kept but old (6 min), offered (1 min), too far in the
	 * future (6 min ahead), and lines that are not cookies.
	 */
	snprintf(text, sizeof(text),
		 "1 %lld aaaa\n2 %lld bbbb\n3 %lld cccc\n4 %lld dddd\n"
		 "garbage\n5 x eeee\n6 %lld odd\n7 %lld zz\n-8 %lld ffff\n\n",
		 (long long)(now - 480), (long long)(now - 360), (long long)(now - 60),
		 (long long)(now + 360), (long long)now, (long long)now, (long long)now);
	write_file(file, text);
	CHECK(keyring_get_cookie(dir, CTX, now, &c) == 0);
	CHECK(c.id == 3 && !strcmp(c.secret, "cccc"));
	/* Reading does not write. */
	CHECK(!strcmp(read_file(file), text));

	/* Without the recent one: a new cookie; the expired and future ones go. */
	snprintf(text, sizeof(text), "1 %lld aaaa\n2 %lld bbbb\n4 %lld dddd\n",
		 (long long)(now - 480), (long long)(now - 360), (long long)(now + 360));
	write_file(file, text);
	CHECK(keyring_get_cookie(dir, CTX, now, &c) == 0);
	CHECK(c.id != 1 && c.id != 2 && c.id != 4 && c.created == now);
	s = read_file(file);
	CHECK(count_lines(s) == 2);
	CHECK(!strncmp(s, "2 ", 2) && strstr(s, "bbbb") && strstr(s, c.secret));
	CHECK(!strstr(s, "aaaa") && !strstr(s, "dddd"));

	/* Non-ASCII contents are ignored altogether (as libdbus does). */
	snprintf(text, sizeof(text), "3 %lld cccc\n\xff\n", (long long)now);
	write_file(file, text);
	CHECK(keyring_get_cookie(dir, CTX, now, &c) == 0);
	CHECK(c.id != 3);
	CHECK(count_lines(read_file(file)) == 1);
}

static void test_lock(void)
{
	struct keyring_cookie c;
	char lock[320];
	struct timespec a, b;
	int64_t now = (int64_t)time(NULL) + 100000;
	int fd;

	/* A stale lock is waited for (up to KEYRING_LOCK_WAIT_MS), then replaced. */
	write_file(file, "");
	snprintf(lock, sizeof(lock), "%s.lock", file);
	fd = open(lock, O_CREAT | O_EXCL | O_WRONLY, 0600);
	CHECK(fd >= 0);
	close(fd);
	clock_gettime(CLOCK_MONOTONIC, &a);
	CHECK(keyring_get_cookie(dir, CTX, now, &c) == 0);
	clock_gettime(CLOCK_MONOTONIC, &b);
	CHECK((b.tv_sec - a.tv_sec) * 1000 + (b.tv_nsec - a.tv_nsec) / 1000000 >=
	       KEYRING_LOCK_WAIT_MS - 10);
	CHECK(access(lock, F_OK) < 0);
	CHECK(count_lines(read_file(file)) == 1);
}

static void test_refused(void)
{
	struct keyring_cookie c;
	char other[300];
	int64_t now = (int64_t)time(NULL);

	/* Others may read the directory: not used at all. */
	CHECK(chmod(dir, 0750) == 0);
	CHECK(keyring_get_cookie(dir, CTX, now + 100000, &c) == KEYRING_E_UNUSABLE);
	CHECK(chmod(dir, 0700) == 0);
	CHECK(keyring_get_cookie(dir, CTX, now, &c) == 0);

	/* A symlink to a private directory is not the directory. */
	snprintf(other, sizeof(other), "%s/link", base);
	CHECK(symlink(dir, other) == 0);
	CHECK(keyring_get_cookie(other, CTX, now, &c) == KEYRING_E_UNUSABLE);
	CHECK(unlink(other) == 0);

	/* A file where the directory should be. */
	snprintf(other, sizeof(other), "%s/file", base);
	write_file(other, "");
	CHECK(keyring_get_cookie(other, CTX, now, &c) == KEYRING_E_UNUSABLE);
	CHECK(unlink(other) == 0);

	/* A directory that cannot be created. */
	CHECK(keyring_get_cookie("/nonexistent/dir/.dbus-keyrings", CTX, now, &c) ==
	       KEYRING_E_UNUSABLE);
	/* A context that is not a file name. */
	CHECK(keyring_get_cookie(dir, "../x", now, &c) == -EINVAL);

	/* A directory where the file should be can not be replaced: unusable. */
	CHECK(unlink(file) == 0);
	CHECK(mkdir(file, 0700) == 0);
	CHECK(keyring_get_cookie(dir, CTX, now, &c) == KEYRING_E_UNUSABLE);
	CHECK(rmdir(file) == 0);
}

int main(void)
{
	CHECK(mkdtemp(base));
	snprintf(dir, sizeof(dir), "%s/.dbus-keyrings", base);
	snprintf(file, sizeof(file), "%s/" CTX, dir);
	umask(022);
	test_context();
	test_create();
	test_lifetime();
	test_lock();
	test_refused();
	{
		char cmd[400];

		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", base);
		CHECK(system(cmd) == 0);
	}
	printf("ok\n");
	return 0;
}
