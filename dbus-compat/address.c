/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * D-Bus address parsing, escaping, listening and connecting (unix, tcp and
 * nonce-tcp transports). See address.h.
 */

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>
#include "dbus-compat/address.h"
#include "util/error.h"
#include "util/macro.h"

static _printf_(2, 3) int address_error(char **errorp, const char *fmt, ...)
{
	va_list ap;

	if (errorp) {
		char *m = NULL;

		va_start(ap, fmt);
		if (vasprintf(&m, fmt, ap) < 0)
			m = NULL;
		va_end(ap);
		free(*errorp);
		*errorp = m; /* NULL on ENOMEM: the code still tells the story */
	}
	return ADDRESS_E_INVALID;
}

static bool is_optionally_escaped(unsigned char c)
{
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	       c == '-' || c == '_' || c == '/' || c == '.' || c == '\\' || c == '*';
}

static int hex_digit(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

char *address_escape(const char *value, size_t n)
{
	static const char hex[] = "0123456789abcdef";
	char *out, *p;
	size_t i;

	out = malloc(n * 3 + 1);
	if (!out)
		return NULL;
	p = out;
	for (i = 0; i < n; i++) {
		unsigned char c = (unsigned char)value[i];

		if (is_optionally_escaped(c)) {
			*p++ = (char)c;
		} else {
			*p++ = '%';
			*p++ = hex[c >> 4];
			*p++ = hex[c & 15];
		}
	}
	*p = '\0';
	return out;
}

int address_unescape(const char *value, size_t n, char **outp, size_t *n_outp)
{
	_cleanup_free_ char *out = malloc(n + 1);
	size_t i, k = 0;

	if (!out)
		return -ENOMEM;
	for (i = 0; i < n; i++) {
		unsigned char c = (unsigned char)value[i];

		if (c == '%') {
			int hi, lo;

			if (n - i < 3)
				return ADDRESS_E_INVALID;
			hi = hex_digit(value[i + 1]);
			lo = hex_digit(value[i + 2]);
			if (hi < 0 || lo < 0)
				return ADDRESS_E_INVALID;
			out[k++] = (char)(hi << 4 | lo);
			i += 2;
		} else if (is_optionally_escaped(c)) {
			out[k++] = (char)c;
		} else {
			return ADDRESS_E_INVALID;
		}
	}
	out[k] = '\0';
	*outp = steal_ptr(out);
	if (n_outp)
		*n_outp = k;
	return 0;
}

static void address_deinit(struct address *a)
{
	free(a->value);
	a->value = NULL;
	free(a->guid);
	a->guid = NULL;
	free(a->host);
	a->host = NULL;
	free(a->bind);
	a->bind = NULL;
	free(a->port);
	a->port = NULL;
	free(a->family);
	a->family = NULL;
	free(a->noncefile);
	a->noncefile = NULL;
}

void address_list_deinit(struct address_list *list)
{
	size_t i;

	for (i = 0; i < list->n_entries; i++)
		address_deinit(&list->entries[i]);
	free(list->entries);
	list->entries = NULL;
	list->n_entries = 0;
}

static bool guid_is_valid(const char *s, size_t n)
{
	size_t i;

	if (n != ADDRESS_GUID_LEN)
		return false;
	for (i = 0; i < n; i++)
		if (hex_digit(s[i]) < 0)
			return false;
	return true;
}

static const char *const unsupported_transports[] = {
	"unixexec", "launchd", "systemd", "autolaunch", "kernel",
};

/* Parse the "key=value,..." part of a unix: entry of length @n. */
static int parse_unix(struct address *a, const char *s, size_t n, char **errorp)
{
	const char *end = s + n;
	bool have_location = false, seen[6] = {};
	static const char *const keys[] = { "path", "abstract", "tmpdir", "dir", "runtime", "guid" };
	int r;

	if (n == 0)
		return address_error(errorp, "unix: address needs one of path=, abstract=, "
					     "tmpdir=, dir= or runtime=yes");

	while (s <= end) {
		const char *comma = memchr(s, ',', (size_t)(end - s));
		const char *pair_end = comma ? comma : end;
		const char *eq = memchr(s, '=', (size_t)(pair_end - s));
		_cleanup_free_ char *value = NULL;
		size_t n_key, n_value, k;

		if (pair_end == s)
			return address_error(errorp, "empty key=value pair in unix: address");
		if (!eq)
			return address_error(errorp, "'%.*s' in unix: address is not key=value",
					     (int)(pair_end - s), s);
		n_key = (size_t)(eq - s);
		if (n_key == 0)
			return address_error(errorp, "empty key in unix: address");

		for (k = 0; k < ARRAY_SIZE(keys); k++)
			if (strlen(keys[k]) == n_key && !memcmp(keys[k], s, n_key))
				break;
		if (k == ARRAY_SIZE(keys))
			return address_error(errorp, "unknown key '%.*s' in unix: address",
					     (int)n_key, s);
		if (seen[k])
			return address_error(errorp, "duplicate key '%s' in unix: address", keys[k]);
		seen[k] = true;

		r = address_unescape(eq + 1, (size_t)(pair_end - eq - 1), &value, &n_value);
		if (r < 0)
			return r;
		if (r)
			return address_error(errorp, "invalid escaping in value of '%s' in unix: "
					     "address (bytes outside [-0-9A-Za-z_/.\\*] must be "
					     "written as %%XX)", keys[k]);
		if (n_value == 0)
			return address_error(errorp, "empty value for '%s' in unix: address",
					     keys[k]);
		if (strlen(value) != n_value)
			return address_error(errorp, "value of '%s' contains a NUL byte", keys[k]);

		if (k == 5) {
			if (!guid_is_valid(value, n_value))
				return address_error(errorp, "guid= must be 32 hex characters");
			a->guid = steal_ptr(value);
		} else {
			if (have_location)
				return address_error(errorp, "conflicting keys in unix: address: "
					"only one of path, abstract, tmpdir, dir and runtime may be given");
			have_location = true;
			a->kind = (enum address_kind[]){ ADDRESS_UNIX_PATH, ADDRESS_UNIX_ABSTRACT,
							 ADDRESS_UNIX_TMPDIR, ADDRESS_UNIX_DIR,
							 ADDRESS_UNIX_RUNTIME }[k];
			if (k == 4) {
				if (strcmp(value, "yes"))
					return address_error(errorp, "runtime= must be 'yes'");
			} else {
				a->value = steal_ptr(value);
			}
		}

		if (!comma)
			break;
		s = comma + 1;
		if (s == end)
			return address_error(errorp, "trailing ',' in unix: address");
	}

	if (!have_location)
		return address_error(errorp, "unix: address needs one of path=, abstract=, "
					     "tmpdir=, dir= or runtime=yes");
	return 0;
}

/*
 * Parse the "key=value,..." part of a tcp: or nonce-tcp: entry (@t names
 * the transport for messages). Unknown keys are ignored, as by dbus-daemon.
 */
static int parse_tcp(struct address *a, const char *t, const char *s, size_t n, char **errorp)
{
	const char *end = s + n;
	static const char *const keys[] = { "host", "bind", "port", "family", "noncefile",
					    "guid" };
	char **slots[] = { &a->host, &a->bind, &a->port, &a->family, &a->noncefile, &a->guid };
	int r;

	while (s < end) {
		const char *comma = memchr(s, ',', (size_t)(end - s));
		const char *pair_end = comma ? comma : end;
		const char *eq = memchr(s, '=', (size_t)(pair_end - s));
		_cleanup_free_ char *value = NULL;
		size_t n_key, n_value, k;

		if (pair_end == s)
			return address_error(errorp, "empty key=value pair in %s: address", t);
		if (!eq)
			return address_error(errorp, "'%.*s' in %s: address is not key=value",
					     (int)(pair_end - s), s, t);
		n_key = (size_t)(eq - s);
		if (n_key == 0)
			return address_error(errorp, "empty key in %s: address", t);
		for (k = 0; k < ARRAY_SIZE(keys); k++)
			if (strlen(keys[k]) == n_key && !memcmp(keys[k], s, n_key))
				break;

		r = address_unescape(eq + 1, (size_t)(pair_end - eq - 1), &value, &n_value);
		if (r < 0)
			return r;
		if (r)
			return address_error(errorp, "invalid escaping in value of '%.*s' in %s: "
					     "address (bytes outside [-0-9A-Za-z_/.\\*] must be "
					     "written as %%XX)", (int)n_key, s, t);
		if (k < ARRAY_SIZE(keys)) {
			if (*slots[k])
				return address_error(errorp, "duplicate key '%s' in %s: address",
						     keys[k], t);
			if (n_value == 0)
				return address_error(errorp, "empty value for '%s' in %s: address",
						     keys[k], t);
			if (strlen(value) != n_value)
				return address_error(errorp, "value of '%s' contains a NUL byte",
						     keys[k]);
			*slots[k] = steal_ptr(value);
		}
		if (!comma)
			break;
		s = comma + 1;
		if (s == end)
			return address_error(errorp, "trailing ',' in %s: address", t);
	}

	if (a->guid && !guid_is_valid(a->guid, strlen(a->guid)))
		return address_error(errorp, "guid= must be 32 hex characters");
	if (a->family && strcmp(a->family, "ipv4") && strcmp(a->family, "ipv6"))
		return address_error(errorp, "unknown address family '%s' (ipv4 or ipv6)",
				     a->family);
	if (a->port) {
		unsigned long v = 0;
		const char *p;

		for (p = a->port; *p; p++) {
			if (*p < '0' || *p > '9' || v > 65535)
				break;
			v = v * 10 + (unsigned long)(*p - '0');
		}
		if (*p || v > 65535)
			return address_error(errorp, "port= must be a number from 0 to 65535");
	}
	return 0;
}

static int parse_entry(struct address *a, const char *s, size_t n, char **errorp)
{
	const char *colon = memchr(s, ':', n);
	size_t n_transport, i;

	if (!colon)
		return address_error(errorp, "address '%.*s' has no transport (missing ':')",
				     (int)n, s);
	n_transport = (size_t)(colon - s);
	if (n_transport == 0)
		return address_error(errorp, "address '%.*s' has an empty transport name",
				     (int)n, s);

	if (n_transport == 4 && !memcmp(s, "unix", 4))
		return parse_unix(a, colon + 1, n - 5, errorp);
	if (n_transport == 3 && !memcmp(s, "tcp", 3)) {
		a->kind = ADDRESS_TCP;
		return parse_tcp(a, "tcp", colon + 1, n - 4, errorp);
	}
	if (n_transport == 9 && !memcmp(s, "nonce-tcp", 9)) {
		a->kind = ADDRESS_NONCE_TCP;
		return parse_tcp(a, "nonce-tcp", colon + 1, n - 10, errorp);
	}

	for (i = 0; i < ARRAY_SIZE(unsupported_transports); i++) {
		const char *t = unsupported_transports[i];

		if (strlen(t) == n_transport && !memcmp(t, s, n_transport))
			return address_error(errorp, "transport '%s:' is not supported "
					     "(only unix:, tcp: and nonce-tcp: are)", t);
	}
	return address_error(errorp, "unknown transport '%.*s:'", (int)n_transport, s);
}

int address_list_parse(struct address_list *list, const char *str, char **errorp)
{
	const char *s = str;

	list->entries = NULL;
	list->n_entries = 0;
	if (errorp)
		*errorp = NULL;

	for (;;) {
		const char *semi = strchr(s, ';');
		size_t n = semi ? (size_t)(semi - s) : strlen(s);

		if (n > 0) {
			struct address *v;
			int r;

			v = realloc(list->entries, (list->n_entries + 1) * sizeof(*v));
			if (!v)
				return -ENOMEM;
			list->entries = v;
			memset(&v[list->n_entries], 0, sizeof(*v));
			/* Count it first so deinit frees partial results. */
			list->n_entries++;
			r = parse_entry(&v[list->n_entries - 1], s, n, errorp);
			if (r)
				return r;
		}
		if (!semi)
			break;
		s = semi + 1;
	}

	if (list->n_entries == 0)
		return address_error(errorp, "empty address");
	return 0;
}

int address_generate_guid(char guid[ADDRESS_GUID_LEN + 1])
{
	static const char hex[] = "0123456789abcdef";
	uint8_t bytes[ADDRESS_GUID_LEN / 2];
	size_t i, got = 0;

	while (got < sizeof(bytes)) {
		ssize_t k = getrandom(bytes + got, sizeof(bytes) - got, 0);

		if (k < 0) {
			if (errno == EINTR)
				continue;
			return error_origin(-errno);
		}
		got += (size_t)k;
	}
	for (i = 0; i < sizeof(bytes); i++) {
		guid[2 * i] = hex[bytes[i] >> 4];
		guid[2 * i + 1] = hex[bytes[i] & 15];
	}
	guid[ADDRESS_GUID_LEN] = '\0';
	return 0;
}

/* Fill a sockaddr_un; abstract names have no trailing NUL (spec). */
static int make_sockaddr(struct sockaddr_un *sa, socklen_t *lenp, const char *name,
			 bool abstract)
{
	size_t n = strlen(name);

	memset(sa, 0, sizeof(*sa));
	sa->sun_family = AF_UNIX;
	if (abstract) {
		if (n + 1 > sizeof(sa->sun_path))
			return -ENAMETOOLONG;
		memcpy(sa->sun_path + 1, name, n);
		*lenp = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + n);
	} else {
		if (n + 1 > sizeof(sa->sun_path))
			return -ENAMETOOLONG;
		memcpy(sa->sun_path, name, n);
		*lenp = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n + 1);
	}
	return 0;
}

/* Is someone accepting connections on the socket file @path? */
static bool path_is_live(const char *path)
{
	struct sockaddr_un sa;
	socklen_t len;
	_cleanup_close_ int fd = -1;

	if (make_sockaddr(&sa, &len, path, false) < 0)
		return true;
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return true; /* cannot tell: do not delete anything */
	if (connect(fd, (struct sockaddr *)&sa, len) >= 0)
		return true;
	return errno != ECONNREFUSED;
}

/*
 * Bind @fd to @name. For paths, a stale socket file left behind by a dead
 * server is replaced; a live one is not touched.
 */
static int bind_name(int fd, const char *name, bool abstract, bool replace_stale)
{
	struct sockaddr_un sa;
	socklen_t len;
	struct stat st;
	int r;

	r = make_sockaddr(&sa, &len, name, abstract);
	if (r < 0)
		return r;
	if (bind(fd, (struct sockaddr *)&sa, len) >= 0)
		return 0;
	if (errno != EADDRINUSE || abstract || !replace_stale)
		return error_origin(-errno);
	if (lstat(name, &st) < 0 || !S_ISSOCK(st.st_mode) || path_is_live(name))
		return -EADDRINUSE;
	if (unlink(name) < 0 && errno != ENOENT)
		return error_origin(-errno);
	if (bind(fd, (struct sockaddr *)&sa, len) < 0)
		return error_origin(-errno);
	return 0;
}

static int random_name(char *buf, size_t n)
{
	static const char chars[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
	uint8_t bytes[32];
	size_t i;

	if (n > sizeof(bytes))
		return -EINVAL;
	if (getrandom(bytes, n, 0) != (ssize_t)n)
		return error_origin(errno ? -errno : -EIO);
	for (i = 0; i < n; i++)
		buf[i] = chars[bytes[i] % (sizeof(chars) - 1)];
	buf[n] = '\0';
	return 0;
}

int address_listen(const struct address *a, const char *guid, int *fdp, char **connectablep,
		   char **unlink_pathp, char **errorp)
{
	_cleanup_close_ int fd = -1;
	_cleanup_free_ char *name = NULL, *escaped = NULL, *connectable = NULL;
	bool abstract = false;
	int r;

	if (errorp)
		*errorp = NULL;
	if (unlink_pathp)
		*unlink_pathp = NULL;

	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return error_origin(-errno);

	switch (a->kind) {
	case ADDRESS_UNIX_PATH:
		name = strdup(a->value);
		if (!name)
			return -ENOMEM;
		r = bind_name(fd, name, false, true);
		break;
	case ADDRESS_UNIX_ABSTRACT:
		name = strdup(a->value);
		if (!name)
			return -ENOMEM;
		abstract = true;
		r = bind_name(fd, name, true, false);
		break;
	case ADDRESS_UNIX_TMPDIR:
	case ADDRESS_UNIX_DIR: {
		unsigned int tries;

		r = -EADDRINUSE;
		/* A collision of 10 random characters is unlikely; retry a bit. */
		for (tries = 0; tries < 16 && r == -EADDRINUSE; tries++) {
			char rnd[11];

			r = random_name(rnd, 10);
			if (r < 0)
				return r;
			free(name);
			if (asprintf(&name, "%s/dbus-%s", a->value, rnd) < 0) {
				name = NULL;
				return -ENOMEM;
			}
			r = bind_name(fd, name, false, false);
		}
		break;
	}
	case ADDRESS_UNIX_RUNTIME: {
		const char *dir = getenv("XDG_RUNTIME_DIR");

		if (!dir || dir[0] != '/') {
			address_error(errorp, "unix:runtime=yes needs XDG_RUNTIME_DIR to be set "
				      "to an absolute path");
			return ADDRESS_E_UNUSABLE;
		}
		if (asprintf(&name, "%s/bus", dir) < 0) {
			name = NULL;
			return -ENOMEM;
		}
		r = bind_name(fd, name, false, true);
		break;
	}
	default:
		return -EINVAL;
	}

	if (r == -EADDRINUSE || r == -ENAMETOOLONG) {
		address_error(errorp, "cannot listen on %s%s: %s", abstract ? "abstract " : "",
			      name, r == -EADDRINUSE ? "address in use" : "name too long");
		return ADDRESS_E_UNUSABLE;
	}
	if (r < 0)
		return r;

	/*
	 * Access control is the bus's business (policy), not the file mode's:
	 * like dbus-daemon, make the socket connectable by everyone whatever
	 * the umask was. Best effort; the directory may restrict access anyway.
	 */
	if (!abstract)
		(void)chmod(name, 0777);

	if (listen(fd, SOMAXCONN) < 0) {
		r = error_origin(-errno);
		if (!abstract)
			unlink(name);
		return r;
	}

	escaped = address_escape(name, strlen(name));
	if (!escaped ||
	    asprintf(&connectable, "unix:%s=%s%s%s", abstract ? "abstract" : "path", escaped,
		     guid ? ",guid=" : "", guid ? guid : "") < 0) {
		connectable = NULL;
		if (!abstract)
			unlink(name);
		return -ENOMEM;
	}

	*fdp = steal_fd(&fd);
	*connectablep = steal_ptr(connectable);
	if (unlink_pathp && !abstract)
		*unlink_pathp = steal_ptr(name);
	return 0;
}

/* $TMPDIR, $TMP, $TEMP or /tmp, as libdbus chooses a temporary directory. */
static const char *tmpdir(void)
{
	static const char *const vars[] = { "TMPDIR", "TMP", "TEMP" };

	for (size_t i = 0; i < ARRAY_SIZE(vars); i++) {
		const char *v = getenv(vars[i]);

		if (v && *v)
			return v;
	}
	return "/tmp";
}

/* A new nonce in a new private directory: "TMPDIR/dbus_nonce-XXXXXX/nonce". */
static int write_nonce_file(uint8_t nonce[ADDRESS_NONCE_LEN], char **pathp, char **errorp)
{
	_cleanup_free_ char *dir = NULL, *path = NULL;
	_cleanup_close_ int fd = -1;
	size_t got = 0;
	int r;

	while (got < ADDRESS_NONCE_LEN) {
		ssize_t k = getrandom(nonce + got, ADDRESS_NONCE_LEN - got, 0);

		if (k < 0) {
			if (errno == EINTR)
				continue;
			return error_origin(-errno);
		}
		got += (size_t)k;
	}
	if (asprintf(&dir, "%s/dbus_nonce-XXXXXX", tmpdir()) < 0) {
		dir = NULL;
		return -ENOMEM;
	}
	if (!mkdtemp(dir)) {
		r = errno;
		address_error(errorp, "cannot create the nonce directory in %s: %s", tmpdir(),
			      strerror(r));
		return ADDRESS_E_UNUSABLE;
	}
	if (asprintf(&path, "%s/nonce", dir) < 0) {
		path = NULL;
		rmdir(dir);
		return -ENOMEM;
	}
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0 || write(fd, nonce, ADDRESS_NONCE_LEN) != (ssize_t)ADDRESS_NONCE_LEN) {
		r = fd < 0 ? errno : EIO;
		unlink(path);
		rmdir(dir);
		address_error(errorp, "cannot write the nonce file %s: %s", path, strerror(r));
		return ADDRESS_E_UNUSABLE;
	}
	*pathp = steal_ptr(path);
	return 0;
}

static void close_all(int *fds, size_t n)
{
	for (size_t i = 0; i < n; i++)
		safe_close(fds[i]);
}

/* A tcp: or nonce-tcp: address as address_listen_tcp() takes it on. */
struct tcp_listen {
	const char *host;		/* what clients connect to */
	const char *bind_to;		/* what is listened on; NULL: every interface */
	const char *transport;		/* "tcp" or "nonce-tcp" */
	struct addrinfo hints;
	char port[8];
	bool port_known;		/* false: port 0 and no socket bound yet */
	int *fds;			/* the caller's, ADDRESS_TCP_FDS_MAX of them */
	size_t n_fds;
	bool have_v4, have_v6;
	int last_error;			/* of the last bind() that failed */
};

static void tcp_listen_init(struct tcp_listen *tl, const struct address *a, int *fds)
{
	*tl = (struct tcp_listen){
		.host = a->host ? a->host : "localhost",
		.transport = a->kind == ADDRESS_NONCE_TCP ? "nonce-tcp" : "tcp",
		.hints = {
			.ai_family = !a->family ? AF_UNSPEC :
				     !strcmp(a->family, "ipv6") ? AF_INET6 : AF_INET,
			.ai_socktype = SOCK_STREAM,
			.ai_protocol = IPPROTO_TCP,
			.ai_flags = AI_ADDRCONFIG | AI_PASSIVE,
		},
		.fds = fds,
	};
	tl->bind_to = a->bind ? a->bind : tl->host;
	if (!strcmp(tl->bind_to, "*"))
		tl->bind_to = NULL; /* every interface */
	snprintf(tl->port, sizeof(tl->port), "%s", a->port ? a->port : "0");
	tl->port_known = strcmp(tl->port, "0") != 0;
}

/* Return: 0, or ADDRESS_E_UNUSABLE with a message. */
static int tcp_resolve(struct tcp_listen *tl, struct addrinfo **aip, char **errorp)
{
	int r;

	r = getaddrinfo(tl->bind_to, tl->port, &tl->hints, aip);
	if (r) {
		*aip = NULL;
		address_error(errorp, "cannot resolve %s:%s for %s:: %s",
			      tl->bind_to ? tl->bind_to : "*", tl->port, tl->transport,
			      gai_strerror(r));
		return ADDRESS_E_UNUSABLE;
	}
	return 0;
}

/*
 * Listen on one address of the name.
 * Return: 1 when it listens (in tl->fds), 0 when it could not be bound, or
 * negative errno.
 */
static int tcp_listen_one(struct tcp_listen *tl, const struct addrinfo *ai)
{
	_cleanup_close_ int fd = -1;
	int one = 1;

	fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, ai->ai_protocol);
	if (fd < 0)
		return -errno;
	(void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	/* Nagle would hold back the small SASL lines and calls. */
	(void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (bind(fd, ai->ai_addr, ai->ai_addrlen) < 0) {
		/*
		 * Not fatal, as for dbus-daemon: another address of the
		 * name may work (IPv6 off on an interface, an IPv6
		 * socket that also took the IPv4 port, ...).
		 */
		tl->last_error = errno;
		return 0;
	}
	if (listen(fd, SOMAXCONN) < 0)
		return -errno;
	if (ai->ai_family == AF_INET6)
		tl->have_v6 = true;
	else
		tl->have_v4 = true;
	tl->fds[tl->n_fds++] = steal_fd(&fd);
	return 1;
}

/* Port 0: the port the kernel chose for the first socket. */
static int tcp_learn_port(struct tcp_listen *tl)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);

	if (getsockname(tl->fds[tl->n_fds - 1], (struct sockaddr *)&ss, &len) < 0)
		return -errno;
	snprintf(tl->port, sizeof(tl->port), "%u",
		 ss.ss_family == AF_INET6 ? ntohs(((struct sockaddr_in6 *)&ss)->sin6_port) :
					    ntohs(((struct sockaddr_in *)&ss)->sin_port));
	tl->port_known = true;
	return 0;
}

/*
 * Every address the name yields, up to ADDRESS_TCP_FDS_MAX. Return: 0 (also
 * when none could be bound), ADDRESS_E_UNUSABLE with a message, or negative
 * errno; the sockets bound so far are in tl->fds either way.
 */
static int tcp_listen_all(struct tcp_listen *tl, char **errorp)
{
	struct addrinfo *ai, *p;
	int r;

	r = tcp_resolve(tl, &ai, errorp);
	if (r)
		return r;
	p = ai;
	while (p && tl->n_fds < ADDRESS_TCP_FDS_MAX) {
		r = tcp_listen_one(tl, p);
		if (r < 0)
			goto out;
		if (r == 0 || tl->port_known) {
			p = p->ai_next;
			continue;
		}
		/* The kernel chose: every other address takes the same port. */
		r = tcp_learn_port(tl);
		if (r < 0)
			goto out;
		freeaddrinfo(ai);
		r = tcp_resolve(tl, &ai, errorp);
		if (r)
			goto out;
		/* From the start again; the address just bound is in use now. */
		p = ai;
	}
	r = 0;
out:
	if (ai)
		freeaddrinfo(ai);
	return r;
}

/* "tcp:host=H,port=P[,family=F][,noncefile=N][,guid=G]"; 0 or -ENOMEM. */
static int tcp_connectable(const struct tcp_listen *tl, const char *guid, const char *noncefile,
			   char **connectablep)
{
	_cleanup_free_ char *esc_host = NULL, *esc_nonce = NULL;
	bool one_family = tl->have_v4 != tl->have_v6;

	if (noncefile) {
		esc_nonce = address_escape(noncefile, strlen(noncefile));
		if (!esc_nonce)
			return -ENOMEM;
	}
	esc_host = address_escape(tl->host, strlen(tl->host));
	if (!esc_host ||
	    asprintf(connectablep, "%s:host=%s,port=%s%s%s%s%s%s%s", tl->transport, esc_host,
		     tl->port, one_family ? ",family=" : "",
		     one_family ? (tl->have_v4 ? "ipv4" : "ipv6") : "",
		     esc_nonce ? ",noncefile=" : "", esc_nonce ? esc_nonce : "",
		     guid ? ",guid=" : "", guid ? guid : "") < 0)
		return -ENOMEM;
	return 0;
}

/* The nonce file of write_nonce_file() and its directory. */
static void remove_nonce_file(char *path)
{
	unlink(path);
	*strrchr(path, '/') = '\0';
	rmdir(path);
}

int address_listen_tcp(const struct address *a, const char *guid, int *fds, size_t *n_fdsp,
		       char **connectablep, uint8_t nonce[ADDRESS_NONCE_LEN], char **noncefilep,
		       char **errorp)
{
	_cleanup_free_ char *noncefile = NULL;
	struct tcp_listen tl;
	char *connectable = NULL;
	int r;

	if (errorp)
		*errorp = NULL;
	*n_fdsp = 0;
	if (noncefilep)
		*noncefilep = NULL;
	if (a->kind != ADDRESS_TCP && a->kind != ADDRESS_NONCE_TCP)
		return -EINVAL;
	tcp_listen_init(&tl, a, fds);

	r = tcp_listen_all(&tl, errorp);
	if (r)
		goto fail;
	if (tl.n_fds == 0) {
		address_error(errorp, "cannot listen on %s:%s (%s:): %s",
			      tl.bind_to ? tl.bind_to : "*", tl.port, tl.transport,
			      strerror(tl.last_error ? tl.last_error : EADDRNOTAVAIL));
		return ADDRESS_E_UNUSABLE;
	}
	if (a->kind == ADDRESS_NONCE_TCP) {
		r = write_nonce_file(nonce, &noncefile, errorp);
		if (r)
			goto fail;
	}
	r = tcp_connectable(&tl, guid, noncefile, &connectable);
	if (r) {
		if (noncefile)
			remove_nonce_file(noncefile);
		goto fail;
	}
	*n_fdsp = tl.n_fds;
	*connectablep = connectable;
	if (noncefilep)
		*noncefilep = steal_ptr(noncefile);
	return 0;

fail:
	close_all(fds, tl.n_fds);
	return r;
}

int address_connect(const struct address *a, int *fdp)
{
	_cleanup_close_ int fd = -1;
	struct sockaddr_un sa;
	socklen_t len;
	int r;

	if (a->kind != ADDRESS_UNIX_PATH && a->kind != ADDRESS_UNIX_ABSTRACT)
		return ADDRESS_E_UNUSABLE;

	r = make_sockaddr(&sa, &len, a->value, a->kind == ADDRESS_UNIX_ABSTRACT);
	if (r < 0)
		return r;
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return error_origin(-errno);
	if (connect(fd, (struct sockaddr *)&sa, len) < 0)
		return error_origin(-errno);
	*fdp = steal_fd(&fd);
	return 0;
}
