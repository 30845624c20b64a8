/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The helpers the files of conf/ share: strings, paths, reading a file
 * whole, users and groups by name or number. See internal.h.
 */

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "conf/config.h"
#include "conf/internal.h"
#include "util/error.h"
#include "util/macro.h"

char *conf_vstrdup_printf(const char *fmt, va_list ap)
{
	char *s;

	/* vasprintf() leaves @s undefined on failure: never return it then. */
	if (vasprintf(&s, fmt, ap) < 0)
		return NULL;
	return s;
}

char *conf_strdup_printf(const char *fmt, ...)
{
	va_list ap;
	char *s;

	va_start(ap, fmt);
	s = conf_vstrdup_printf(fmt, ap);
	va_end(ap);
	return s;
}

char *conf_path_join(const char *dir, const char *file)
{
	size_t n;

	if (file[0] == '/' || dir == NULL || dir[0] == '\0')
		return strdup(file);
	n = strlen(dir);
	if (dir[n - 1] == '/')
		return conf_strdup_printf("%s%s", dir, file);
	return conf_strdup_printf("%s/%s", dir, file);
}

char *conf_dirname(const char *path)
{
	const char *slash = strrchr(path, '/');

	if (!slash)
		return strdup(".");
	if (slash == path)
		return strdup("/");
	return strndup(path, slash - path);
}

int conf_read_file(const char *path, size_t max, char **datap, size_t *sizep, dev_t *devp,
		   ino_t *inop)
{
	_cleanup_close_ int fd = -1;
	_cleanup_free_ char *data = NULL;
	struct stat st;
	size_t n = 0, sz;

	/*
	 * O_NONBLOCK: opening a FIFO must not hang the bus. Only regular files
	 * are configuration (dbus-daemon would block on a FIFO or read
	 * /dev/zero until memory runs out).
	 */
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	if (fd < 0)
		return error_origin(-errno);
	if (fstat(fd, &st) < 0)
		return error_origin(-errno);
	if (S_ISDIR(st.st_mode))
		return -EISDIR;
	if (!S_ISREG(st.st_mode))
		return -EBADFD;
	if ((uint64_t)st.st_size > max)
		return -EFBIG;

	/* st_size may be 0 (procfs) or stale: read to EOF, bounded by @max. */
	sz = st.st_size > 0 ? (size_t)st.st_size + 1 : 4096;
	data = malloc(sz);
	if (!data)
		return -ENOMEM;
	for (;;) {
		ssize_t l;

		if (n == sz) {
			char *p;

			if (sz > max)
				return -EFBIG;
			sz = MIN(sz * 2, max + 1);
			p = realloc(data, sz);
			if (!p)
				return -ENOMEM;
			data = p;
		}
		l = read(fd, data + n, sz - n);
		if (l < 0) {
			if (errno == EINTR)
				continue;
			return error_origin(-errno);
		}
		if (l == 0)
			break;
		n += l;
		if (n > max)
			return -EFBIG;
	}

	if (devp)
		*devp = st.st_dev;
	if (inop)
		*inop = st.st_ino;
	*sizep = n;
	*datap = steal_ptr(data);
	return 0;
}

const char *conf_strerror(int error)
{
	if (error == -EFBIG)
		return "File too large";
	if (error == -EBADFD)
		return "Not a regular file";
	return strerror(-error);
}

/* Append a copy of @s to a bus_config_string list. Return: 0 or -ENOMEM. */
int conf_strings_append(struct list_node *list, const char *file, unsigned int line,
			const char *s)
{
	size_t n = strlen(s);
	struct bus_config_string *e = malloc(sizeof(*e) + n + 1);

	if (!e)
		return -ENOMEM;
	e->file = file;
	e->line = line;
	memcpy(e->str, s, n + 1);
	list_append(list, &e->link);
	return 0;
}

/*
 * A user or group as dbus-daemon reads it from the config: a decimal number
 * is taken as the id itself, anything else is looked up by name.
 */
static bool parse_id_number(const char *s, uint32_t *idp)
{
	unsigned long long v = 0;

	if (!*s)
		return false;
	for (; *s; s++) {
		if (*s < '0' || *s > '9')
			return false;
		v = v * 10 + (*s - '0');
		if (v >= UINT32_MAX)	/* (uid_t)-1 is not a user */
			return false;
	}
	*idp = (uint32_t)v;
	return true;
}

/* getpwnam_r() and getgrnam_r() behind one signature. */
typedef int (*nss_lookup_fn)(const char *name, void *entry, char *buf, size_t size,
			     void **resultp);

static int lookup_passwd(const char *name, void *entry, char *buf, size_t size, void **resultp)
{
	return getpwnam_r(name, entry, buf, size, (struct passwd **)resultp);
}

static int lookup_group(const char *name, void *entry, char *buf, size_t size, void **resultp)
{
	return getgrnam_r(name, entry, buf, size, (struct group **)resultp);
}

/*
 * Look @name up with @fn into @entry, the buffer growing while it is too
 * small (up to 1 MiB). 0 if found (its strings live in *@bufp, the
 * caller's to free), CONF_LOOKUP_E_UNKNOWN if not, -ENOMEM.
 */
static int nss_lookup(nss_lookup_fn fn, const char *name, void *entry, char **bufp)
{
	void *result = NULL;
	size_t size = 4096;
	int r;

	for (;;) {
		free(*bufp);
		*bufp = malloc(size);
		if (!*bufp)
			return -ENOMEM;
		r = fn(name, entry, *bufp, size, &result);
		if (r != ERANGE || size >= 1024 * 1024)
			break;
		size *= 2;
	}
	return r == 0 && result ? 0 : CONF_LOOKUP_E_UNKNOWN;
}

int conf_lookup_user(const char *name, uint32_t *uidp)
{
	_cleanup_free_ char *buf = NULL;
	struct passwd pw;
	int r;

	if (parse_id_number(name, uidp))
		return 0;
	r = nss_lookup(lookup_passwd, name, &pw, &buf);
	if (r == 0)
		*uidp = pw.pw_uid;
	return r;
}

int conf_lookup_group(const char *name, uint32_t *gidp)
{
	_cleanup_free_ char *buf = NULL;
	struct group gr;
	int r;

	if (parse_id_number(name, gidp))
		return 0;
	r = nss_lookup(lookup_group, name, &gr, &buf);
	if (r == 0)
		*gidp = gr.gr_gid;
	return r;
}
