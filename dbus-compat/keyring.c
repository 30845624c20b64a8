/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Server side of the DBUS_COOKIE_SHA1 keyrings. See keyring.h for the rules.
 */

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "dbus-compat/keyring.h"
#include "util/error.h"
#include "util/macro.h"

/* Bytes of a new cookie, before hex encoding. */
#define KEYRING_NEW_SECRET_BYTES 24U
/* Longest line: id, time, secret, separators. */
#define KEYRING_LINE_MAX (10U + 1U + 20U + 1U + KEYRING_SECRET_MAX + 1U)
#define KEYRING_FILE_MAX ((size_t)KEYRING_MAX_COOKIES * KEYRING_LINE_MAX)
#define KEYRING_LOCK_STEP_MS 50

static void wipe(void *p, size_t n)
{
	explicit_bzero(p, n);
}

bool keyring_context_is_valid(const char *context)
{
	const char *p;

	if (!context || !*context)
		return false;
	for (p = context; *p; p++) {
		unsigned char c = (unsigned char)*p;

		if (c >= 0x80 || c == '/' || c == '\\' || c == '.' || c == ' ' || c == '\t' ||
		    c == '\r' || c == '\n')
			return false;
	}
	return true;
}

/* The directory must exist (we create it) and be ours alone. */
static int check_dir(const char *dir)
{
	struct stat st;

	if (lstat(dir, &st) < 0) {
		if (errno != ENOENT)
			return KEYRING_E_UNUSABLE;
		if (mkdir(dir, 0700) < 0 && errno != EEXIST)
			return KEYRING_E_UNUSABLE;
		if (lstat(dir, &st) < 0)
			return KEYRING_E_UNUSABLE;
	}
	if (!S_ISDIR(st.st_mode) || st.st_uid != geteuid() || (st.st_mode & 077))
		return KEYRING_E_UNUSABLE;
	return 0;
}

static bool is_hex(char c)
{
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

/* Parse a run of decimal digits at *@pp (at most @max); false if none or too big. */
static bool parse_number(const char **pp, const char *end, uint64_t max, uint64_t *v)
{
	const char *p = *pp;
	uint64_t n = 0;

	if (p == end || *p < '0' || *p > '9')
		return false;
	while (p < end && *p >= '0' && *p <= '9') {
		n = n * 10 + (uint64_t)(*p - '0');
		if (n > max)
			return false;
		p++;
	}
	*pp = p;
	*v = n;
	return true;
}

static const char *skip_blanks(const char *p, const char *end)
{
	while (p < end && (*p == ' ' || *p == '\t'))
		p++;
	return p;
}

/* One line "ID TIME SECRET"; false if it is not one (such lines are dropped). */
static bool parse_line(const char *p, const char *end, int64_t now, struct keyring_cookie *c)
{
	uint64_t id, created;
	size_t n;

	if (!parse_number(&p, end, INT32_MAX, &id))
		return false;
	p = skip_blanks(p, end);
	if (!parse_number(&p, end, INT64_MAX, &created))
		return false;
	p = skip_blanks(p, end);
	n = (size_t)(end - p);
	if (n == 0 || n % 2 || n > KEYRING_SECRET_MAX)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!is_hex(p[i]))
			return false;
	/* Too old, or so far in the future that it would never expire. */
	if ((int64_t)created > now + KEYRING_FUTURE_SECONDS ||
	    (int64_t)created < now - KEYRING_EXPIRE_SECONDS)
		return false;
	c->id = (uint32_t)id;
	c->created = (int64_t)created;
	memcpy(c->secret, p, n);
	c->secret[n] = '\0';
	return true;
}

/*
 * Read the valid cookies of @path into @cookies (room for KEYRING_MAX_COOKIES);
 * a missing or unreadable file is an empty keyring, as is one that is not
 * ASCII text. Returns the number read or negative errno (-ENOMEM).
 */
static ssize_t load(const char *path, int64_t now, struct keyring_cookie *cookies)
{
	_cleanup_close_ int fd = -1;
	char *buf = NULL;
	size_t n = 0, n_cookies = 0;
	struct stat st;
	const char *p, *end;

	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
	if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
		return 0;
	buf = malloc(KEYRING_FILE_MAX);
	if (!buf)
		return -ENOMEM;
	while (n < KEYRING_FILE_MAX) {
		ssize_t k = read(fd, buf + n, KEYRING_FILE_MAX - n);

		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			break;
		n += (size_t)k;
	}
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)buf[i] >= 0x80) {
			n = 0; /* not ASCII: ignore the contents, as libdbus does */
			break;
		}

	p = buf;
	end = buf + n;
	while (p < end && n_cookies < KEYRING_MAX_COOKIES) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		const char *le = nl ? nl : end;

		if (parse_line(p, le, now, &cookies[n_cookies])) {
			bool dup = false;

			for (size_t i = 0; i < n_cookies; i++)
				if (cookies[i].id == cookies[n_cookies].id)
					dup = true;
			if (!dup)
				n_cookies++;
		}
		p = nl ? nl + 1 : end;
	}
	wipe(buf, KEYRING_FILE_MAX);
	free(buf);
	return (ssize_t)n_cookies;
}

/* The newest cookie young enough to be offered, or NULL. */
static const struct keyring_cookie *find_recent(const struct keyring_cookie *cookies, size_t n,
						int64_t now)
{
	const struct keyring_cookie *best = NULL;

	for (size_t i = 0; i < n; i++)
		if (cookies[i].created > now - KEYRING_NEW_SECONDS &&
		    (!best || cookies[i].created > best->created))
			best = &cookies[i];
	return best;
}

static int random_bytes(void *p, size_t n)
{
	size_t got = 0;

	while (got < n) {
		ssize_t k = getrandom((uint8_t *)p + got, n - got, 0);

		if (k < 0) {
			if (errno == EINTR)
				continue;
			return error_origin(-errno);
		}
		got += (size_t)k;
	}
	return 0;
}

static int new_cookie(const struct keyring_cookie *cookies, size_t n, int64_t now,
		      struct keyring_cookie *c)
{
	static const char digits[] = "0123456789abcdef";
	uint8_t bytes[KEYRING_NEW_SECRET_BYTES];
	bool unique;
	int r;

	do {
		uint32_t id;

		r = random_bytes(&id, sizeof(id));
		if (r < 0)
			return r;
		c->id = id & 0x7fffffffU;
		unique = true;
		for (size_t i = 0; i < n; i++)
			if (cookies[i].id == c->id)
				unique = false;
	} while (!unique);

	r = random_bytes(bytes, sizeof(bytes));
	if (r < 0)
		return r;
	for (size_t i = 0; i < sizeof(bytes); i++) {
		c->secret[2 * i] = digits[bytes[i] >> 4];
		c->secret[2 * i + 1] = digits[bytes[i] & 15];
	}
	c->secret[2 * sizeof(bytes)] = '\0';
	c->created = now;
	wipe(bytes, sizeof(bytes));
	return 0;
}

/* The lock file: created exclusively; a lock held too long is taken as stale. */
static int lock_keyring(const char *lock_path)
{
	int waited = 0;

	for (;;) {
		int fd = open(lock_path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW,
			      0600);

		if (fd >= 0) {
			close(fd);
			return 0;
		}
		if (errno != EEXIST)
			return KEYRING_E_UNUSABLE;
		if (waited >= KEYRING_LOCK_WAIT_MS) {
			/* Stale (its owner died): the specification lets us remove it. */
			if (unlink(lock_path) < 0 && errno != ENOENT)
				return KEYRING_E_UNUSABLE;
			waited = -1; /* one more attempt, then give up */
			continue;
		}
		if (waited < 0)
			return KEYRING_E_UNUSABLE;
		nanosleep(&(struct timespec){ .tv_nsec = KEYRING_LOCK_STEP_MS * 1000000L }, NULL);
		waited += KEYRING_LOCK_STEP_MS;
	}
}

/* Write @cookies to @path atomically (a 0600 temporary file renamed over it). */
static int save(const char *dir, const char *path, const struct keyring_cookie *cookies,
		size_t n)
{
	_cleanup_free_ char *tmp = NULL;
	char line[KEYRING_LINE_MAX + 1];
	int fd, r = 0;

	if (asprintf(&tmp, "%s/.tmp-keyring-XXXXXX", dir) < 0) {
		tmp = NULL;
		return -ENOMEM;
	}
	fd = mkostemp(tmp, O_CLOEXEC);
	if (fd < 0)
		return KEYRING_E_UNUSABLE;
	for (size_t i = 0; i < n && !r; i++) {
		int len = snprintf(line, sizeof(line), "%u %lld %s\n", cookies[i].id,
				   (long long)cookies[i].created, cookies[i].secret);
		size_t done = 0;

		while (done < (size_t)len) {
			ssize_t k = write(fd, line + done, (size_t)len - done);

			if (k < 0 && errno == EINTR)
				continue;
			if (k <= 0) {
				r = KEYRING_E_UNUSABLE;
				break;
			}
			done += (size_t)k;
		}
	}
	wipe(line, sizeof(line));
	if (close(fd) < 0 && !r)
		r = KEYRING_E_UNUSABLE;
	if (!r && rename(tmp, path) < 0)
		r = KEYRING_E_UNUSABLE;
	if (r)
		unlink(tmp);
	return r;
}

int keyring_get_cookie(const char *dir, const char *context, int64_t now,
		       struct keyring_cookie *cookie)
{
	_cleanup_free_ char *path = NULL, *lock_path = NULL;
	struct keyring_cookie *cookies;
	const struct keyring_cookie *best;
	ssize_t n;
	int r;

	if (!keyring_context_is_valid(context))
		return -EINVAL;
	r = check_dir(dir);
	if (r)
		return r;
	if (asprintf(&path, "%s/%s", dir, context) < 0) {
		path = NULL;
		return -ENOMEM;
	}
	cookies = calloc(KEYRING_MAX_COOKIES, sizeof(*cookies));
	if (!cookies)
		return -ENOMEM;

	n = load(path, now, cookies);
	if (n < 0) {
		r = (int)n;
		goto out;
	}
	best = find_recent(cookies, (size_t)n, now);
	if (best) {
		*cookie = *best;
		goto out;
	}

	/* Nothing recent: add a cookie under the lock. */
	if (asprintf(&lock_path, "%s.lock", path) < 0) {
		lock_path = NULL;
		r = -ENOMEM;
		goto out;
	}
	r = lock_keyring(lock_path);
	if (r)
		goto out;
	/* Another server may have added one meanwhile: read again. */
	n = load(path, now, cookies);
	if (n < 0) {
		r = (int)n;
		goto unlock;
	}
	best = find_recent(cookies, (size_t)n, now);
	if (best) {
		*cookie = *best;
		goto unlock;
	}
	if (n == KEYRING_MAX_COOKIES) {
		/* Keep the newest ones: drop the oldest to make room. */
		size_t oldest = 0;

		for (size_t i = 1; i < (size_t)n; i++)
			if (cookies[i].created < cookies[oldest].created)
				oldest = i;
		cookies[oldest] = cookies[n - 1];
		n--;
	}
	r = new_cookie(cookies, (size_t)n, now, &cookies[n]);
	if (r < 0)
		goto unlock;
	n++;
	r = save(dir, path, cookies, (size_t)n);
	if (!r)
		*cookie = cookies[n - 1];
unlock:
	unlink(lock_path);
out:
	wipe(cookies, KEYRING_MAX_COOKIES * sizeof(*cookies));
	free(cookies);
	return r;
}
