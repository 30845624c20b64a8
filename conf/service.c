/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * D-Bus .service files and the scan of the service directories.
 *
 * The key-file syntax is the subset dbus-daemon's desktop-file reader
 * accepts: "[Group]" lines, "Key=Value" lines, blank lines and '#'
 * comments. Keys are [A-Za-z0-9-]+; "Key[locale]=..." lines are skipped;
 * spaces around '=' are dropped; values know the escapes \s \t \n \r \\.
 * The first occurrence of a key in the first [D-BUS Service] group wins,
 * as in dbus-daemon.
 */

#include <dirent.h>
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conf/config.h"
#include "conf/internal.h"
#include "dbus-compat/validate.h"
#include "util/macro.h"
#include "util/str.h"

/* dbus-daemon refuses service files above 128 KiB. */
#define SERVICE_FILE_MAX (128U * 1024)
/* Bound on the files one scan reads, across all directories. */
#define SERVICE_FILES_MAX 65536

#define SERVICE_GROUP "D-BUS Service"

struct bus_service *bus_service_free(struct bus_service *s)
{
	if (!s)
		return NULL;
	free(s->path);
	free(s->name);
	free(s->exec);
	free(s->user);
	free(s->systemd_service);
	free(s->apparmor_label);
	free(s);
	return NULL;
}

static bool key_char(char c)
{
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
	       c == '-';
}

enum {
	K_NAME,
	K_EXEC,
	K_USER,
	K_SYSTEMD_SERVICE,
	K_APPARMOR_LABEL,
	_K_N,
};

static const char *const service_keys[_K_N] = {
	[K_NAME] = "Name",
	[K_EXEC] = "Exec",
	[K_USER] = "User",
	[K_SYSTEMD_SERVICE] = "SystemdService",
	[K_APPARMOR_LABEL] = "AssumedAppArmorLabel",
};

/* Where the lines of a key file are, as the parser goes through them. */
enum kf_where {
	KF_BEFORE_GROUP,	/* before any [Group] line: keys are refused */
	KF_SERVICE_GROUP,	/* in the first [D-BUS Service]: keys are taken */
	KF_OTHER_GROUP,		/* anywhere else: keys are checked, then dropped */
};

struct keyfile_parser {
	const char *path;
	unsigned int line;
	char *error;
	enum kf_where where;
	bool seen_service_group;
	/* The first value of each key of service_keys[] in the service group. */
	char *values[_K_N];
};

_printf_(2, 3) static int kf_fail(struct keyfile_parser *kp, const char *fmt, ...)
{
	_cleanup_free_ char *msg = NULL;
	va_list ap;

	va_start(ap, fmt);
	msg = conf_vstrdup_printf(fmt, ap);
	va_end(ap);
	if (!msg)
		return -ENOMEM;
	kp->error = kp->line ? conf_strdup_printf("%s:%u: %s", kp->path, kp->line, msg)
			     : conf_strdup_printf("%s: %s", kp->path, msg);
	return kp->error ? BUS_CONFIG_E_INVALID : -ENOMEM;
}

/*
 * Unescape [s, end) into a new string. The file passed validate_utf8(), so
 * there is no NUL byte to refuse here.
 */
static int kf_unescape(struct keyfile_parser *kp, const char *s, const char *end, char **out)
{
	_cleanup_free_ char *v = malloc(end - s + 1);
	char *q = v;

	if (!v)
		return -ENOMEM;
	while (s < end) {
		if (*s != '\\') {
			*q++ = *s++;
			continue;
		}
		if (++s >= end)
			return kf_fail(kp, "Text to be unescaped ended in \\");
		switch (*s++) {
		case 's':
			*q++ = ' ';
			break;
		case 't':
			*q++ = '\t';
			break;
		case 'n':
			*q++ = '\n';
			break;
		case 'r':
			*q++ = '\r';
			break;
		case '\\':
			*q++ = '\\';
			break;
		default:
			return kf_fail(kp, "Text to be unescaped had invalid escape sequence");
		}
	}
	*q = '\0';
	*out = steal_ptr(v);
	return 0;
}

/* "[Group]": only the first [D-BUS Service] group counts, as in dbus-daemon. */
static int kf_parse_group(struct keyfile_parser *kp, const char *p, const char *le)
{
	const char *name = p + 1, *name_end = le - 1;

	if (le - p <= 2 || *name_end != ']')
		return kf_fail(kp, "Invalid syntax for section header");
	for (const char *q = name; q < name_end; q++) {
		unsigned char c = *q;

		if (c <= 0x1f || c >= 0x7f || c == '[' || c == ']')
			return kf_fail(kp, "Invalid characters in section name");
	}
	if (!kp->seen_service_group && (size_t)(name_end - name) == strlen(SERVICE_GROUP) &&
	    memcmp(name, SERVICE_GROUP, name_end - name) == 0) {
		kp->seen_service_group = true;
		kp->where = KF_SERVICE_GROUP;
	} else {
		kp->where = KF_OTHER_GROUP;
	}
	return 0;
}

/*
 * Keep the value of [key, key_end) if the service group is where it stands,
 * it is one of service_keys[] and the first of its kind; free it otherwise.
 */
static void kf_store(struct keyfile_parser *kp, const char *key, const char *key_end,
		     char *value)
{
	size_t n = key_end - key;

	if (kp->where == KF_SERVICE_GROUP) {
		for (int k = 0; k < _K_N; k++) {
			if (strlen(service_keys[k]) == n && memcmp(service_keys[k], key, n) == 0 &&
			    !kp->values[k]) {
				kp->values[k] = steal_ptr(value);
				break;
			}
		}
	}
	free(value);
}

/*
 * "Key=Value": every group's keys are checked (dbus-daemon refuses a
 * malformed file whatever the group), only the service group's are kept.
 */
static int kf_parse_key(struct keyfile_parser *kp, const char *p, const char *le)
{
	const char *q, *key_end;
	char *value = NULL;
	int r;

	if (kp->where == KF_BEFORE_GROUP)
		return kf_fail(kp, "invalid service file: key=value before [Section]");
	for (q = p; q < le && key_char(*q); q++)
		;
	key_end = q;
	if (q == p)
		return kf_fail(kp, "Empty key name");
	/* Localized key: ignored, as dbus-daemon does. */
	if (q < le && *q == '[')
		return 0;
	while (q < le && *q == ' ')
		q++;
	if (q == le)
		return kf_fail(kp, "No '=' in key/value pair");
	if (*q != '=')
		return kf_fail(kp, "Invalid characters in key name");
	q++;
	while (q < le && *q == ' ')
		q++;
	r = kf_unescape(kp, q, le, &value);
	if (r)
		return r;
	kf_store(kp, p, key_end, value);
	return 0;
}

/* One line [p, le), without its line end. */
static int kf_parse_line(struct keyfile_parser *kp, const char *p, const char *le)
{
	const char *q;

	for (q = p; q < le && (*q == ' ' || *q == '\t' || *q == '\r' || *q == '\f'); q++)
		;
	/* A blank line, or a comment: '#' only as the line's first byte. */
	if (q == le || *p == '#')
		return 0;
	if (*p == '[')
		return kf_parse_group(kp, p, le);
	return kf_parse_key(kp, p, le);
}

/* The file as a whole: the keys it must have. Return 0 or kf_fail()'s. */
static int kf_check_service(struct keyfile_parser *kp)
{
	const char *name = kp->values[K_NAME];

	/* Not about one line: the error names only the file. */
	kp->line = 0;
	if (!kp->seen_service_group)
		return kf_fail(kp, "No [" SERVICE_GROUP "] group in .service file");
	if (!name)
		return kf_fail(kp, "No \"Name\" key in .service file");
	if (!validate_well_known_name(name, strlen(name)))
		return kf_fail(kp, "Name=\"%s\" is not a valid well-known bus name", name);
	if (!kp->values[K_EXEC])
		return kf_fail(kp, "No \"Exec\" key in .service file");
	return 0;
}

/* The service of a file that passed kf_check_service(); takes kp's values. */
static int kf_make_service(struct keyfile_parser *kp, struct bus_service **servicep)
{
	_cleanup_(bus_service_freep) struct bus_service *s = NULL;

	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->path = strdup(kp->path);
	if (!s->path)
		return -ENOMEM;
	s->name = steal_ptr(kp->values[K_NAME]);
	s->exec = steal_ptr(kp->values[K_EXEC]);
	s->user = steal_ptr(kp->values[K_USER]);
	s->systemd_service = steal_ptr(kp->values[K_SYSTEMD_SERVICE]);
	s->apparmor_label = steal_ptr(kp->values[K_APPARMOR_LABEL]);
	*servicep = steal_ptr(s);
	return 0;
}

static int kf_parse(struct keyfile_parser *kp, const char *p, const char *end, size_t size,
		    struct bus_service **servicep)
{
	int r;

	if (size > SERVICE_FILE_MAX)
		return kf_fail(kp, "Service file is too large (%zu bytes)", size);
	/*
	 * The wire's rule, which also refuses NUL bytes (as dbus-daemon's
	 * reader does): nothing below has to deal with them.
	 */
	if (!validate_utf8(p, size))
		return kf_fail(kp, "invalid UTF-8");
	while (p < end) {
		const char *eol = memchr(p, '\n', end - p);
		const char *le = eol ? eol : end;

		kp->line++;
		if (le > p && le[-1] == '\r')
			le--;
		r = kf_parse_line(kp, p, le);
		if (r)
			return r;
		p = eol ? eol + 1 : end;
	}
	r = kf_check_service(kp);
	if (r)
		return r;
	return kf_make_service(kp, servicep);
}

int bus_service_parse_buffer(struct bus_service **servicep, const void *data, size_t size,
			     const char *path, char **errorp)
{
	struct keyfile_parser kp = { .path = path, .where = KF_BEFORE_GROUP };
	int r;

	r = kf_parse(&kp, data, (const char *)data + size, size, servicep);
	for (int k = 0; k < _K_N; k++)
		free(kp.values[k]);
	if (r > 0 && errorp)
		*errorp = steal_ptr(kp.error);
	free(kp.error);
	return r;
}

int bus_service_parse_file(struct bus_service **servicep, const char *path, char **errorp)
{
	_cleanup_free_ char *data = NULL;
	size_t size;
	int r;

	r = conf_read_file(path, SERVICE_FILE_MAX, &data, &size, NULL, NULL);
	if (r == -ENOMEM)
		return r;
	if (r < 0) {
		if (errorp) {
			*errorp = conf_strdup_printf("%s: Failed to open \"%s\": %s", path, path,
						     conf_strerror(r));
			if (!*errorp)
				return -ENOMEM;
		}
		return BUS_CONFIG_E_INVALID;
	}
	return bus_service_parse_buffer(servicep, data, size, path, errorp);
}

/* ------------------------------------------------------------------ */

struct bus_services *bus_services_free(struct bus_services *services)
{
	if (!services)
		return NULL;
	for (size_t i = 0; i < services->n_services; i++)
		bus_service_free(services->by_name[i]);
	free(services->by_name);
	bus_config_strings_clear(&services->warnings);
	bus_config_strings_clear(&services->notes);
	free(services);
	return NULL;
}

struct scan_entry {
	struct bus_service *service;
	size_t seq;		/* discovery order: directory order, then file name */
};

struct scan {
	struct bus_services *services;
	struct scan_entry *entries;
	size_t n_entries;
	size_t sz;
	size_t n_files;
	void (*warn)(void *userdata, const char *message);
	void *userdata;
};

_printf_(2, 3) static int scan_warn(struct scan *scan, const char *fmt, ...)
{
	_cleanup_free_ char *msg = NULL;
	va_list ap;

	va_start(ap, fmt);
	msg = conf_vstrdup_printf(fmt, ap);
	va_end(ap);
	if (!msg)
		return -ENOMEM;
	if (scan->warn)
		scan->warn(scan->userdata, msg);
	return conf_strings_append(&scan->services->warnings, NULL, 0, msg);
}

/* What dbus-daemon skips without logging: recorded, not passed to warn(). */
_printf_(2, 3) static int scan_note(struct scan *scan, const char *fmt, ...)
{
	_cleanup_free_ char *msg = NULL;
	va_list ap;

	va_start(ap, fmt);
	msg = conf_vstrdup_printf(fmt, ap);
	va_end(ap);
	if (!msg)
		return -ENOMEM;
	return conf_strings_append(&scan->services->notes, NULL, 0, msg);
}

static int cmp_entry(const void *a, const void *b)
{
	const struct scan_entry *x = a, *y = b;
	int c = strcmp(x->service->name, y->service->name);

	if (c)
		return c;
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

static int scan_file(struct scan *scan, const struct bus_config_servicedir *dir,
		     const char *filename)
{
	_cleanup_(bus_service_freep) struct bus_service *s = NULL;
	_cleanup_free_ char *path = NULL, *error = NULL;
	int r;

	path = conf_path_join(dir->path, filename);
	if (!path)
		return -ENOMEM;
	r = bus_service_parse_file(&s, path, &error);
	if (r < 0)
		return r;
	if (r > 0)
		return scan_note(scan, "%s", error);

	if (dir->flags & BUS_CONFIG_SERVICEDIR_STRICT_NAMING) {
		size_t n = strlen(s->name);

		if (strncmp(filename, s->name, n) != 0 || strcmp(filename + n, ".service") != 0)
			return scan_warn(scan,
					 "Service file \"%s\" should have been named \"%s.service\": not loading it",
					 path, s->name);
	}

	if (scan->n_entries == scan->sz) {
		size_t sz = scan->sz ? scan->sz * 2 : 32;
		struct scan_entry *t = realloc(scan->entries, sz * sizeof(*t));

		if (!t)
			return -ENOMEM;
		scan->entries = t;
		scan->sz = sz;
	}
	scan->entries[scan->n_entries].seq = scan->n_entries;
	scan->entries[scan->n_entries++].service = steal_ptr(s);
	return 0;
}

static int scan_dir(struct scan *scan, const struct bus_config_servicedir *dir)
{
	DIR *d;
	struct dirent *de;
	char **names = NULL;
	size_t n = 0, sz = 0;
	int r = 0;

	d = opendir(dir->path);
	if (!d) {
		if (errno == ENOENT || errno == ENOTDIR)
			return 0;
		return scan_note(scan, "Failed to open service directory \"%s\": %s", dir->path,
				 strerror(errno));
	}
	while ((errno = 0, de = readdir(d))) {
		size_t l = strlen(de->d_name);

		if (l < 8 || strcmp(de->d_name + l - 8, ".service") != 0)
			continue;
		if (++scan->n_files > SERVICE_FILES_MAX) {
			r = scan_warn(scan, "Too many service files, ignoring the rest of \"%s\"",
				      dir->path);
			errno = 0;
			break;
		}
		if (n == sz) {
			char **t;

			sz = sz ? sz * 2 : 32;
			t = realloc(names, sz * sizeof(*names));
			if (!t) {
				r = -ENOMEM;
				goto out;
			}
			names = t;
		}
		names[n] = strdup(de->d_name);
		if (!names[n]) {
			r = -ENOMEM;
			goto out;
		}
		n++;
	}
	if (r == 0 && errno != 0)
		r = scan_note(scan, "Failed to read service directory \"%s\": %s", dir->path,
			      strerror(errno));
	if (r < 0)
		goto out;

	/* dbus-daemon takes readdir() order; sorted is reproducible. */
	if (n)
		qsort(names, n, sizeof(*names), strcmp_ptr);
	for (size_t i = 0; i < n; i++) {
		r = scan_file(scan, dir, names[i]);
		if (r < 0)
			break;
	}
out:
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	free(names);
	closedir(d);
	return r;
}

/* Sort by name, keep the first definition of each name (dbus-daemon's rule). */
static int scan_finish(struct scan *scan)
{
	struct bus_services *services = scan->services;
	int r = 0;

	if (scan->n_entries == 0)
		return 0;
	qsort(scan->entries, scan->n_entries, sizeof(*scan->entries), cmp_entry);
	services->by_name = calloc(scan->n_entries, sizeof(*services->by_name));
	if (!services->by_name)
		return -ENOMEM;
	for (size_t i = 0; i < scan->n_entries; i++) {
		struct bus_service *s = steal_ptr(scan->entries[i].service);
		struct bus_service *prev = services->n_services ?
			services->by_name[services->n_services - 1] : NULL;

		if (prev && strcmp(prev->name, s->name) == 0) {
			if (r == 0)
				r = scan_note(scan,
					      "%s: Service %s already exists in activation entry list (%s), ignoring",
					      s->path, s->name, prev->path);
			bus_service_free(s);
			continue;
		}
		services->by_name[services->n_services++] = s;
	}
	return r;
}

int bus_services_load(struct bus_services **servicesp, const struct list_node *servicedirs,
		      void (*warn)(void *userdata, const char *message), void *userdata)
{
	_cleanup_(bus_services_freep) struct bus_services *services = NULL;
	struct bus_config_servicedir *dir;
	struct scan scan = { .warn = warn, .userdata = userdata };
	int r = 0;

	services = calloc(1, sizeof(*services));
	if (!services)
		return -ENOMEM;
	list_init(&services->warnings);
	list_init(&services->notes);
	scan.services = services;

	list_for_each_entry(dir, servicedirs, link) {
		r = scan_dir(&scan, dir);
		if (r < 0)
			break;
	}
	if (r >= 0)
		r = scan_finish(&scan);
	for (size_t i = 0; i < scan.n_entries; i++)
		bus_service_free(scan.entries[i].service);
	free(scan.entries);
	if (r < 0)
		return r;
	*servicesp = steal_ptr(services);
	return 0;
}

const struct bus_service *bus_services_lookup(const struct bus_services *services,
					      const char *name)
{
	size_t lo = 0, hi = services->n_services;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = strcmp(name, services->by_name[mid]->name);

		if (c == 0)
			return services->by_name[mid];
		if (c < 0)
			hi = mid;
		else
			lo = mid + 1;
	}
	return NULL;
}
