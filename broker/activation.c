/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Service activation: pending activations, fork/exec of services, the
 * systemd hand-off and the activation environment. See activation.h.
 *
 * Ownership: struct activation owns its pending activations (struct pending,
 * indexed by name) and the children it spawned (struct child). A child
 * outlives its pending activation when the service took its name: it is
 * still reaped. Each pending activation owns its queued requests (struct
 * act_entry), each holding a reference to its message.
 *
 * While a pending activation is being resolved (success or failure), it is
 * taken out of the name index and parked on ->resolving, so that callbacks
 * that close a connection (activation_sender_gone()) still find the entries
 * not handed out yet, and so that a new activation of the same name can start.
 */

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>
#include "broker/activation.h"
#include "conf/config.h"
#include "dbus-compat/message.h"
#include "dbus-compat/protocol.h"
#include "util/fd.h"
#include "util/hashmap.h"

extern char **environ;

#define SYSTEMD_ACTIVATOR_INTERFACE "org.freedesktop.systemd1.Activator"
#define SYSTEMD_MANAGER_PATH "/org/freedesktop/systemd1"
#define SYSTEMD_MANAGER_INTERFACE "org.freedesktop.systemd1.Manager"

/* dbus-daemon-launch-helper exit codes (dbus 1.14 bus/activation-exit-codes.h). */
enum {
	HELPER_EXIT_GENERIC_FAILURE = 1,
	HELPER_EXIT_NO_MEMORY = 2,
	HELPER_EXIT_CONFIG_INVALID = 3,
	HELPER_EXIT_SETUP_FAILED = 4,
	HELPER_EXIT_NAME_INVALID = 5,
	HELPER_EXIT_SERVICE_NOT_FOUND = 6,
	HELPER_EXIT_PERMISSIONS_INVALID = 7,
	HELPER_EXIT_FILE_INVALID = 8,
	HELPER_EXIT_EXEC_FAILED = 9,
	HELPER_EXIT_INVALID_ARGS = 10,
	HELPER_EXIT_CHILD_SIGNALED = 11,
};

/* One queued request: a StartServiceByName call or an auto-start message. */
struct act_entry {
	struct list_node link;		/* pending->entries */
	void *sender;
	struct message *msg;
	size_t size;			/* charged to activation->n_bytes */
	bool auto_start;
};

struct child;

struct pending {
	struct activation *a;
	struct hmap_node node;		/* a->by_name, while not resolving */
	struct list_node link;		/* a->pendings, or a->resolving */
	struct list_node entries;	/* struct act_entry, in arrival order */
	sd_event_source *timer;
	struct child *child;		/* the spawned process, or NULL */
	char *exec;			/* Exec= it was started with (NULL: none) */
	char *unit;			/* SystemdService= when started through systemd */
	bool request_sent;		/* the ActivationRequest went out */
	char name[];
};

struct child {
	struct activation *a;
	struct list_node link;		/* a->children */
	struct pending *pending;	/* NULL once the activation ended */
	sd_event_source *source;
	pid_t pid;
	int err_fd;			/* read end: errno of a failed execve() */
	bool helper;			/* the <servicehelper>: exit codes have meanings */
	char name[];
};

struct servicedir_stamp {
	bool exists;
	struct timespec mtime;
};

struct activation {
	const struct activation_ops *ops;
	void *userdata;
	sd_event *event;

	struct bus_services *services;
	struct list_node servicedirs;	/* own copy: struct bus_config_servicedir */
	struct servicedir_stamp *stamps; /* per servicedir, at the last scan */
	size_t n_stamps;
	struct timespec scanned;	/* CLOCK_REALTIME of the last scan */

	char *address;
	char *bus_type;
	char *servicehelper;
	bool systemd_activation;
	uint64_t timeout_usec;
	size_t max_pending;

	char **env;			/* "KEY=VALUE" */
	size_t n_env;
	struct rlimit nofile;
	bool have_nofile;

	struct hmap by_name;		/* struct pending by name */
	struct list_node pendings;	/* struct pending, creation order */
	struct list_node resolving;	/* struct pending being answered */
	struct list_node children;	/* struct child */
	size_t n_entries;		/* queued requests over all pendings */
	size_t n_bytes;			/* bytes of queued auto-start messages */
};

/* --------------------------------------------------------------- helpers */

void activation_error_deinit(struct activation_error *err)
{
	free(err->message);
	free(err->name_owned);
	*err = (struct activation_error){};
}

void activation_strv_free(char **v)
{
	if (!v)
		return;
	for (char **p = v; *p; p++)
		free(*p);
	free(v);
}

_printf_(3, 4) static void act_log(struct activation *a, int priority, const char *fmt, ...)
{
	_cleanup_free_ char *text = NULL;
	va_list ap;
	int r;

	if (!a->ops->log)
		return;
	va_start(ap, fmt);
	r = vasprintf(&text, fmt, ap);
	va_end(ap);
	if (r >= 0)
		a->ops->log(a->userdata, priority, text);
}

static int strdup_or_null(char **dst, const char *src)
{
	char *s = NULL;

	if (src) {
		s = strdup(src);
		if (!s)
			return -ENOMEM;
	}
	free(*dst);
	*dst = s;
	return 0;
}

/* ------------------------------------------------------------ Exec= parsing */

struct strv_builder {
	char **v;
	size_t n, cap;
	char *word;
	size_t len, wcap;
};

static int word_add(struct strv_builder *b, char c)
{
	if (b->len + 1 >= b->wcap) {
		size_t cap = b->wcap ? b->wcap * 2 : 64;
		char *w = realloc(b->word, cap);

		if (!w)
			return -ENOMEM;
		b->word = w;
		b->wcap = cap;
	}
	b->word[b->len++] = c;
	return 0;
}

static int word_end(struct strv_builder *b)
{
	char *w;

	if (b->n + 2 > b->cap) {
		size_t cap = b->cap ? b->cap * 2 : 8;
		char **v = realloc(b->v, cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		b->v = v;
		b->cap = cap;
	}
	w = malloc(b->len + 1);
	if (!w)
		return -ENOMEM;
	if (b->len)
		memcpy(w, b->word, b->len);
	w[b->len] = '\0';
	b->v[b->n++] = w;
	b->v[b->n] = NULL;
	b->len = 0;
	return 0;
}

int activation_parse_exec(const char *line, char ***argvp, const char **errorp)
{
	struct strv_builder b = {};
	bool in_word = false;
	char quote = 0;
	const char *p;
	int r = 0;

	for (p = line; *p && r == 0; p++) {
		char c = *p;

		if (quote == '\'') {
			if (c == '\'')
				quote = 0;
			else
				r = word_add(&b, c);
		} else if (quote == '"') {
			if (c == '"') {
				quote = 0;
			} else if (c == '\\' && p[1] && strchr("\"\\`$\n", p[1])) {
				/* dbus keeps the newline of backslash-newline in "..." */
				r = word_add(&b, *++p);
			} else {
				r = word_add(&b, c);
			}
		} else if (c == ' ' || c == '\t' || c == '\n') {
			if (in_word)
				r = word_end(&b);
			in_word = false;
		} else if (c == '\'' || c == '"') {
			quote = c;
			in_word = true;
		} else if (c == '\\') {
			if (!p[1]) {
				quote = c;	/* a trailing backslash is an open quote */
				break;
			}
			p++;
			if (*p != '\n') {
				r = word_add(&b, *p);
				in_word = true;
			}
		} else if (c == '#') {
			/* dbus starts a comment at any unquoted '#', to the end of the line. */
			while (p[1] && p[1] != '\n')
				p++;
		} else {
			r = word_add(&b, c);
			in_word = true;
		}
	}
	if (r == 0 && quote) {
		*errorp = "Unclosed quotes in command line";
		r = ACTIVATION_E_FAILED;
	}
	if (r == 0 && in_word)
		r = word_end(&b);
	if (r == 0 && b.n == 0) {
		*errorp = "No tokens found in command line";
		r = ACTIVATION_E_FAILED;
	}
	free(b.word);
	if (r) {
		if (b.v)
			b.v[b.n] = NULL;
		activation_strv_free(b.v);
		return r;
	}
	*argvp = b.v;
	return 0;
}

/* ------------------------------------------------------------ environment */

/* Variables of the bus process that do not belong to its children (as dbus-daemon). */
static bool env_inherited(const char *entry)
{
	static const char *const drop[] = {
		"JOURNAL_STREAM", "LISTEN_FDNAMES", "LISTEN_FDS", "LISTEN_PID",
		"NOTIFY_SOCKET", "INVOCATION_ID",
	};

	for (size_t i = 0; i < ARRAY_SIZE(drop); i++) {
		size_t l = strlen(drop[i]);

		if (!strncmp(entry, drop[i], l) && entry[l] == '=')
			return false;
	}
	return strchr(entry, '=') != NULL;
}

static ssize_t env_find(struct activation *a, const char *key, size_t klen)
{
	for (size_t i = 0; i < a->n_env; i++)
		if (!strncmp(a->env[i], key, klen) && a->env[i][klen] == '=')
			return (ssize_t)i;
	return -1;
}

static int env_set(struct activation *a, const char *key, const char *value)
{
	size_t klen = strlen(key);
	ssize_t i = env_find(a, key, klen);
	char *entry;

	if (asprintf(&entry, "%s=%s", key, value) < 0)
		return -ENOMEM;
	if (i >= 0) {
		free(a->env[i]);
		a->env[i] = entry;
		return 0;
	}
	if (a->n_env % 16 == 0) {
		char **v = realloc(a->env, (a->n_env + 16) * sizeof(*v));

		if (!v) {
			free(entry);
			return -ENOMEM;
		}
		a->env = v;
	}
	a->env[a->n_env++] = entry;
	return 0;
}

/* The environment of a child: the activation environment + the bus variables. */
static int env_build(struct activation *a, char ***envp)
{
	const char *keys[3] = {};
	const char *values[3] = {};
	size_t n_extra = 0, n = 0;
	char **v;

	if (a->address) {
		keys[n_extra] = "DBUS_STARTER_ADDRESS";
		values[n_extra++] = a->address;
	}
	if (a->bus_type) {
		keys[n_extra] = "DBUS_STARTER_BUS_TYPE";
		values[n_extra++] = a->bus_type;
		if (a->address && !strcmp(a->bus_type, "session")) {
			keys[n_extra] = "DBUS_SESSION_BUS_ADDRESS";
			values[n_extra++] = a->address;
		} else if (a->address && !strcmp(a->bus_type, "system")) {
			keys[n_extra] = "DBUS_SYSTEM_BUS_ADDRESS";
			values[n_extra++] = a->address;
		}
	}

	v = calloc(a->n_env + n_extra + 1, sizeof(*v));
	if (!v)
		return -ENOMEM;
	for (size_t i = 0; i < a->n_env; i++) {
		bool replaced = false;

		for (size_t k = 0; k < n_extra; k++) {
			size_t l = strlen(keys[k]);

			if (!strncmp(a->env[i], keys[k], l) && a->env[i][l] == '=')
				replaced = true;
		}
		if (replaced)
			continue;
		v[n] = strdup(a->env[i]);
		if (!v[n])
			goto oom;
		n++;
	}
	for (size_t k = 0; k < n_extra; k++) {
		if (asprintf(&v[n], "%s=%s", keys[k], values[k]) < 0) {
			v[n] = NULL;
			goto oom;
		}
		n++;
	}
	*envp = v;
	return 0;
oom:
	activation_strv_free(v);
	return -ENOMEM;
}

/* ----------------------------------------------------------------- lifecycle */

int activation_new(struct activation **ap, const struct activation_ops *ops, void *userdata)
{
	struct activation *a;

	a = calloc(1, sizeof(*a));
	if (!a)
		return -ENOMEM;
	a->ops = ops;
	a->userdata = userdata;
	list_init(&a->servicedirs);
	list_init(&a->pendings);
	list_init(&a->resolving);
	list_init(&a->children);
	hmap_init(&a->by_name);
	a->timeout_usec = ACTIVATION_DEFAULT_TIMEOUT_MSEC * 1000ULL;
	a->max_pending = ACTIVATION_DEFAULT_MAX_PENDING;
	a->have_nofile = getrlimit(RLIMIT_NOFILE, &a->nofile) == 0;

	a->services = calloc(1, sizeof(*a->services));
	if (!a->services)
		goto oom;
	list_init(&a->services->warnings);
	list_init(&a->services->notes);

	for (char **e = environ; e && *e; e++) {
		char *copy;

		if (!env_inherited(*e))
			continue;
		if (a->n_env % 16 == 0) {
			char **v = realloc(a->env, (a->n_env + 16) * sizeof(*v));

			if (!v)
				goto oom;
			a->env = v;
		}
		copy = strdup(*e);
		if (!copy)
			goto oom;
		a->env[a->n_env++] = copy;
	}
	*ap = a;
	return 0;
oom:
	activation_free(a);
	return -ENOMEM;
}

static void entry_free(struct activation *a, struct act_entry *e)
{
	list_unlink(&e->link);
	a->n_entries--;
	a->n_bytes -= e->size;
	message_unref(e->msg);
	free(e);
}

static void child_free(struct child *c)
{
	if (c->pending)
		c->pending->child = NULL;
	list_unlink(&c->link);
	sd_event_source_disable_unref(c->source);
	safe_close(c->err_fd);
	free(c);
}

/* Take @p out of the index: it no longer exists for new requests. */
static void pending_detach(struct pending *p)
{
	struct activation *a = p->a;

	list_unlink(&p->link);
	list_append(&a->resolving, &p->link);
	hmap_remove(&a->by_name, &p->node);
	p->timer = sd_event_source_disable_unref(p->timer);
	if (p->child) {
		p->child->pending = NULL;
		p->child = NULL;
	}
}

/* Free a detached (or never indexed) pending activation and its entries. */
static void pending_free(struct pending *p)
{
	struct activation *a = p->a;

	while (!list_is_empty(&p->entries))
		entry_free(a, list_first_entry(&p->entries, struct act_entry, link));
	if (p->child)
		p->child->pending = NULL;
	sd_event_source_disable_unref(p->timer);
	list_unlink(&p->link);
	free(p->exec);
	free(p->unit);
	free(p);
}

struct activation *activation_free(struct activation *a)
{
	if (!a)
		return NULL;
	while (!list_is_empty(&a->pendings)) {
		struct pending *p = list_first_entry(&a->pendings, struct pending, link);

		pending_detach(p);
		pending_free(p);
	}
	while (!list_is_empty(&a->resolving))
		pending_free(list_first_entry(&a->resolving, struct pending, link));
	while (!list_is_empty(&a->children))
		child_free(list_first_entry(&a->children, struct child, link));
	hmap_deinit(&a->by_name);
	bus_services_free(a->services);
	bus_config_servicedirs_clear(&a->servicedirs);
	free(a->stamps);
	for (size_t i = 0; i < a->n_env; i++)
		free(a->env[i]);
	free(a->env);
	free(a->address);
	free(a->bus_type);
	free(a->servicehelper);
	sd_event_unref(a->event);
	free(a);
	return NULL;
}

int activation_attach(struct activation *a, sd_event *event)
{
	sigset_t mask;

	/* sd-event child sources need SIGCHLD blocked (the loop reaps). */
	sigemptyset(&mask);
	sigaddset(&mask, SIGCHLD);
	if (sigprocmask(SIG_BLOCK, &mask, NULL) < 0)
		return -errno;
	sd_event_unref(a->event);
	a->event = sd_event_ref(event);
	return 0;
}

/* ------------------------------------------------------------- services */

/*
 * A service file refused (misnamed in a strict directory): dbus-daemon logs
 * it at its security level, syslog's LOG_AUTH | LOG_NOTICE.
 */
static void services_warn(void *userdata, const char *message)
{
	act_log(userdata, LOG_AUTH | LOG_NOTICE, "%s", message);
}

/* Record the directories' mtimes, to know later whether a rescan can find more. */
static void stamps_take(struct activation *a)
{
	struct bus_config_servicedir *d;
	size_t i = 0;

	clock_gettime(CLOCK_REALTIME, &a->scanned);
	list_for_each_entry(d, &a->servicedirs, link) {
		struct stat st;

		if (i >= a->n_stamps)
			break;
		a->stamps[i].exists = stat(d->path, &st) == 0;
		a->stamps[i].mtime = a->stamps[i].exists ? st.st_mtim : (struct timespec){};
		i++;
	}
}

/*
 * Could a rescan find a new file? Yes if a directory appeared, vanished or
 * changed its mtime, or changed too recently for the mtime to tell (the
 * kernel's timestamps are coarse).
 */
static bool stamps_changed(struct activation *a)
{
	struct bus_config_servicedir *d;
	size_t i = 0;

	list_for_each_entry(d, &a->servicedirs, link) {
		struct stat st;
		bool exists;

		if (i >= a->n_stamps)
			return true;
		exists = stat(d->path, &st) == 0;
		if (exists != a->stamps[i].exists)
			return true;
		if (exists && (st.st_mtim.tv_sec != a->stamps[i].mtime.tv_sec ||
			       st.st_mtim.tv_nsec != a->stamps[i].mtime.tv_nsec ||
			       st.st_mtim.tv_sec + 2 >= a->scanned.tv_sec))
			return true;
		i++;
	}
	return false;
}

static int copy_servicedirs(struct list_node *to, const struct list_node *from, size_t *np)
{
	const struct bus_config_servicedir *d;

	*np = 0;
	if (!from)
		return 0;
	list_for_each_entry(d, from, link) {
		size_t l = strlen(d->path);
		struct bus_config_servicedir *c = malloc(sizeof(*c) + l + 1);

		if (!c)
			return -ENOMEM;
		c->flags = d->flags;
		memcpy(c->path, d->path, l + 1);
		list_append(to, &c->link);
		(*np)++;
	}
	return 0;
}

/*
 * The transient directory ($XDG_RUNTIME_DIR/dbus-1/services, NO_WATCH |
 * STRICT_NAMING) exists from the start, as with dbus-daemon: tools (and
 * systemd generators) write there and then call ReloadConfig.
 */
static void transient_dirs_create(struct activation *a, const struct list_node *dirs)
{
	const unsigned int flags = BUS_CONFIG_SERVICEDIR_NO_WATCH |
				   BUS_CONFIG_SERVICEDIR_STRICT_NAMING;
	const struct bus_config_servicedir *d;

	list_for_each_entry(d, dirs, link) {
		_cleanup_free_ char *parent = NULL;
		char *slash;

		if ((d->flags & flags) != flags)
			continue;
		parent = strdup(d->path);
		if (!parent)
			return;
		slash = strrchr(parent, '/');
		if (!slash || slash == parent)
			continue;
		*slash = '\0';
		if ((mkdir(parent, 0700) < 0 && errno != EEXIST) ||
		    (mkdir(d->path, 0700) < 0 && errno != EEXIST))
			act_log(a, 6, "Cannot create the transient service directory %s: %s",
				d->path, strerror(errno));
	}
}

int activation_configure(struct activation *a, const struct activation_config *config)
{
	struct list_node dirs = LIST_INIT(dirs);
	_cleanup_(bus_services_freep) struct bus_services *services = NULL;
	struct servicedir_stamp *stamps = NULL;
	char *address = NULL, *bus_type = NULL, *helper = NULL;
	size_t n_dirs;
	int r;

	r = copy_servicedirs(&dirs, config->servicedirs, &n_dirs);
	if (r < 0)
		goto fail;
	transient_dirs_create(a, &dirs);
	if (n_dirs) {
		stamps = calloc(n_dirs, sizeof(*stamps));
		if (!stamps) {
			r = -ENOMEM;
			goto fail;
		}
	}
	r = bus_services_load(&services, &dirs, services_warn, a);
	if (r < 0)
		goto fail;
	r = strdup_or_null(&address, config->address ? config->address : a->address);
	if (r >= 0)
		r = strdup_or_null(&bus_type, config->bus_type);
	if (r >= 0)
		r = strdup_or_null(&helper, config->servicehelper);
	if (r < 0)
		goto fail;

	/* Commit: nothing can fail from here. */
	bus_config_servicedirs_clear(&a->servicedirs);
	list_splice_tail(&a->servicedirs, &dirs);
	free(a->stamps);
	a->stamps = stamps;
	a->n_stamps = n_dirs;
	stamps_take(a);
	bus_services_free(a->services);
	a->services = steal_ptr(services);
	free(a->address);
	a->address = address;
	free(a->bus_type);
	a->bus_type = bus_type;
	free(a->servicehelper);
	a->servicehelper = helper;
	a->systemd_activation = config->systemd_activation;
	a->timeout_usec = config->service_start_timeout > 0 ?
			  (uint64_t)config->service_start_timeout * 1000ULL :
			  ACTIVATION_DEFAULT_TIMEOUT_MSEC * 1000ULL;
	a->max_pending = config->max_pending_service_starts > 0 ?
			 (size_t)config->max_pending_service_starts :
			 ACTIVATION_DEFAULT_MAX_PENDING;
	return 0;
fail:
	bus_config_servicedirs_clear(&dirs);
	free(stamps);
	free(address);
	free(bus_type);
	free(helper);
	return r;
}

int activation_set_address(struct activation *a, const char *address)
{
	return strdup_or_null(&a->address, address);
}

const struct bus_services *activation_services(const struct activation *a)
{
	return a->services;
}

/* The .service entry of @name; on a miss, rescan if the directories changed (dbus-daemon). */
static const struct bus_service *lookup_service(struct activation *a, const char *name)
{
	const struct bus_service *s = bus_services_lookup(a->services, name);
	struct bus_services *fresh = NULL;

	/* Unique names never have a .service file: no rescan for them. */
	if (s || name[0] == ':' || !stamps_changed(a))
		return s;
	/* Warnings were logged at the last (re)configuration: do not repeat them. */
	if (bus_services_load(&fresh, &a->servicedirs, NULL, NULL) < 0)
		return NULL;
	bus_services_free(a->services);
	a->services = fresh;
	stamps_take(a);
	return bus_services_lookup(a->services, name);
}

size_t activation_n_pending(const struct activation *a)
{
	return a->n_entries;
}

/* ------------------------------------------------------------- replies */

static void send_reply_u(struct activation *a, void *to, struct message *call, uint32_t v)
{
	_cleanup_message_ struct message *m = NULL;
	struct message_builder b;
	int r;

	if (!message_expects_reply(call))
		return;
	message_builder_init_method_return(&b, call, "u");
	b.sender = DC_SERVICE_DBUS;
	dc_writer_write(&b.body, "u", v);
	r = message_builder_seal(&b, a->ops->next_serial(a->userdata), &m);
	message_builder_deinit(&b);
	if (r < 0) {
		act_log(a, 4, "cannot build StartServiceByName reply: %s", strerror(-r));
		return;
	}
	a->ops->send(a->userdata, to, m);
}

static void send_error(struct activation *a, void *to, struct message *call, const char *name,
		       const char *text)
{
	_cleanup_message_ struct message *m = NULL;
	int r;

	/*
	 * A method call with NO_REPLY_EXPECTED gets no error: the bus' rule for
	 * every routing error (test/integration/test_routing.py; dbus-daemon
	 * would send one). A unicast signal that triggered an activation gets
	 * it, although libdbus marks signals NO_REPLY_EXPECTED: dbus-daemon does,
	 * and test-monitor's /monitor/activation relies on it.
	 */
	if (call->type == DC_MESSAGE_METHOD_CALL && (call->flags & DC_FLAG_NO_REPLY_EXPECTED))
		return;
	r = message_new_error(&m, call, DC_SERVICE_DBUS, a->ops->next_serial(a->userdata), name,
			      text);
	if (r == -EINVAL)	/* an invalid error name from systemd */
		r = message_new_error(&m, call, DC_SERVICE_DBUS, a->ops->next_serial(a->userdata),
				      DC_ERROR_FAILED, text);
	if (r < 0) {
		act_log(a, 4, "cannot build error %s: %s", name, strerror(-r));
		return;
	}
	a->ops->send(a->userdata, to, m);
}

/*
 * The activation of @p failed: every waiting caller gets the error, then @p
 * is freed. Entries are taken off one at a time, so that a callback dropping
 * a sender's entries (activation_sender_gone()) finds a consistent list.
 */
static void pending_fail_quiet(struct pending *p, const char *name, const char *text)
{
	struct activation *a = p->a;

	pending_detach(p);
	while (!list_is_empty(&p->entries)) {
		struct act_entry *e = list_first_entry(&p->entries, struct act_entry, link);
		struct message *msg = message_ref(e->msg);
		void *sender = e->sender;

		entry_free(a, e);
		if (sender)	/* NULL: the bus' own message for systemd, dropped */
			send_error(a, sender, msg, name, text);
		message_unref(msg);
	}
	pending_free(p);
}

static void pending_fail(struct pending *p, const char *name, const char *text)
{
	act_log(p->a, 6, "Activated service '%s' failed: %s", p->name, text);
	pending_fail_quiet(p, name, text);
}

_printf_(3, 4) static void pending_failf(struct pending *p, const char *name, const char *fmt, ...)
{
	_cleanup_free_ char *text = NULL;
	va_list ap;
	int r;

	va_start(ap, fmt);
	r = vasprintf(&text, fmt, ap);
	va_end(ap);
	/* The text is the log line too (dbus-daemon's timeout message). */
	act_log(p->a, 6, "%s", r >= 0 ? text : "activation failed");
	pending_fail_quiet(p, name, r >= 0 ? text : "activation failed");
}

/*
 * A failed child fails every pending activation with the same Exec=, with its
 * error; dbus-daemon logs the failure once, for the child's own name.
 */
static void pending_fail_same_exec(struct activation *a, const char *exec, const char *name,
				   const char *text)
{
	for (;;) {
		struct pending *p, *found = NULL;

		list_for_each_entry(p, &a->pendings, link) {
			if (p->exec && !strcmp(p->exec, exec)) {
				found = p;
				break;
			}
		}
		if (!found)
			return;
		pending_fail_quiet(found, name, text);
	}
}

static struct pending *pending_find(struct activation *a, const char *name)
{
	uint64_t h = hash_str(name);

	hmap_for_each_hash(n, &a->by_name, h) {
		struct pending *p = container_of(n, struct pending, node);

		if (!strcmp(p->name, name))
			return p;
	}
	return NULL;
}

/* ------------------------------------------------------------ children */

static void child_exited(struct child *c, const siginfo_t *si)
{
	struct activation *a = c->a;
	struct pending *p = c->pending;
	_cleanup_free_ char *text = NULL;
	const char *error = NULL;
	int exec_errno = 0;
	ssize_t l;

	/* A failed execve() left its errno in the pipe before the child exited. */
	do {
		l = read(c->err_fd, &exec_errno, sizeof(exec_errno));
	} while (l < 0 && errno == EINTR);

	if (l == (ssize_t)sizeof(exec_errno)) {
		error = DC_ERROR_SPAWN_EXEC_FAILED;
		if (asprintf(&text, "Failed to execute program %s: %s", c->name,
			     strerror(exec_errno)) < 0)
			text = NULL;
	} else if (si->si_code == CLD_EXITED) {
		if (si->si_status == 0) {
			/* It may have daemonized: wait for the name or the timeout. */
			if (p)
				act_log(a, 6, "Activated service '%s' exited with status 0 before "
					"taking its name; waiting for it", c->name);
		} else if (c->helper) {
			static const struct {
				int code;
				const char *name;
				const char *text;
			} map[] = {
				{ HELPER_EXIT_CONFIG_INVALID, DC_ERROR_SPAWN_CONFIG_INVALID,
				  "Invalid configuration (missing or empty <user>?)" },
				{ HELPER_EXIT_NO_MEMORY, DC_ERROR_NO_MEMORY,
				  "Launcher could not run (out of memory)" },
				{ HELPER_EXIT_SETUP_FAILED, DC_ERROR_SPAWN_SETUP_FAILED,
				  "Failed to setup environment correctly" },
				{ HELPER_EXIT_NAME_INVALID, DC_ERROR_SPAWN_SERVICE_INVALID,
				  "Bus name is not valid or missing" },
				{ HELPER_EXIT_SERVICE_NOT_FOUND, DC_ERROR_SPAWN_SERVICE_NOT_FOUND,
				  "Bus name not found in system service directory" },
				{ HELPER_EXIT_PERMISSIONS_INVALID, DC_ERROR_SPAWN_PERMISSIONS_INVALID,
				  "The permission of the setuid helper is not correct" },
				{ HELPER_EXIT_FILE_INVALID, DC_ERROR_SPAWN_PERMISSIONS_INVALID,
				  "The service file is incorrect or does not have all required "
				  "attributes" },
				{ HELPER_EXIT_EXEC_FAILED, DC_ERROR_SPAWN_EXEC_FAILED,
				  "Cannot launch daemon, file not found or permissions invalid" },
				{ HELPER_EXIT_INVALID_ARGS, DC_ERROR_INVALID_ARGS,
				  "Invalid arguments to command line" },
				{ HELPER_EXIT_CHILD_SIGNALED, DC_ERROR_SPAWN_CHILD_SIGNALED,
				  "Launched child was signaled, it probably crashed" },
			};

			error = DC_ERROR_SPAWN_CHILD_EXITED;
			for (size_t i = 0; i < ARRAY_SIZE(map); i++) {
				if (map[i].code == si->si_status) {
					error = map[i].name;
					text = strdup(map[i].text);
					break;
				}
			}
			if (!text && asprintf(&text, "Launch helper exited with unknown return "
					      "code %i", si->si_status) < 0)
				text = NULL;
		} else {
			error = DC_ERROR_SPAWN_CHILD_EXITED;
			if (asprintf(&text, "Process %s exited with status %d", c->name,
				     si->si_status) < 0)
				text = NULL;
		}
	} else {
		error = DC_ERROR_SPAWN_CHILD_SIGNALED;
		if (asprintf(&text, "Process %s received signal %d", c->name, si->si_status) < 0)
			text = NULL;
	}

	if (!error) {
		child_free(c);
		return;
	}
	if (!p) {
		/*
		 * Its activation ended already (it took the name, timed out, or
		 * failed with another child of the same Exec=): nothing to
		 * report, as dbus-daemon stops watching a child then.
		 */
		child_free(c);
		return;
	}
	{
		_cleanup_free_ char *exec = p->exec ? strdup(p->exec) : NULL;
		const char *t = text ? text : "activation failed";

		child_free(c);
		pending_fail(p, error, t);
		if (exec)
			pending_fail_same_exec(a, exec, error, t);
	}
}

static int child_cb(sd_event_source *s, const siginfo_t *si, void *userdata)
{
	child_exited(userdata, si);
	return 0;
}

/*
 * Between fork() and execve(): async-signal-safe calls only. Reports the
 * errno of a failed execve() through @err_fd and exits 127.
 */
_Noreturn static void child_run(char **argv, char **envp, int err_fd, int null_fd,
				const struct rlimit *nofile)
{
	struct sigaction sa = { .sa_handler = SIG_DFL };
	sigset_t mask;
	int e;

	for (int sig = 1; sig < _NSIG; sig++)
		if (sig != SIGKILL && sig != SIGSTOP)
			(void)sigaction(sig, &sa, NULL);
	sigemptyset(&mask);
	(void)sigprocmask(SIG_SETMASK, &mask, NULL);

	/* Out of the way of 0..3 first. */
	err_fd = fcntl(err_fd, F_DUPFD_CLOEXEC, 10);
	null_fd = fcntl(null_fd, F_DUPFD, 10);
	if (err_fd < 0 || null_fd < 0)
		_exit(127);
	if (dup2(null_fd, STDIN_FILENO) < 0)
		_exit(127);
	for (int fd = STDOUT_FILENO; fd <= STDERR_FILENO; fd++)
		if (fcntl(fd, F_GETFD) < 0)
			(void)dup2(null_fd, fd);
	if (dup3(err_fd, 3, O_CLOEXEC) < 0)
		_exit(127);
	if (syscall(SYS_close_range, 4U, ~0U, 0U) < 0) {
		long max = sysconf(_SC_OPEN_MAX);

		for (long fd = 4; fd < (max > 0 && max < 65536 ? max : 65536); fd++)
			close((int)fd);
	}
	if (nofile)
		(void)setrlimit(RLIMIT_NOFILE, nofile);
	execve(argv[0], argv, envp);
	e = errno;
	(void)!write(3, &e, sizeof(e));
	_exit(127);
}

/*
 * Start the process of @p. Return 0 (running), ACTIVATION_E_FAILED with @err
 * set, or negative errno.
 */
static int pending_spawn(struct pending *p, const struct bus_service *service,
			 const char *requester, struct activation_error *err)
{
	struct activation *a = p->a;
	char **argv = NULL, **envp = NULL;
	_cleanup_close_ int null_fd = -1;
	int pipefd[2] = { -1, -1 };
	const char *perr = NULL;
	struct child *c = NULL;
	pid_t pid;
	int r;

	if (!a->event) {
		err->name = DC_ERROR_SPAWN_FAILED;
		err->message = strdup("Activation is not available (no event loop)");
		return err->message ? ACTIVATION_E_FAILED : -ENOMEM;
	}

	if (a->servicehelper) {
		if (!service->user) {
			err->name = DC_ERROR_SPAWN_FILE_INVALID;
			err->message = strdup("Cannot do system-bus activation with no user\n");
			return err->message ? ACTIVATION_E_FAILED : -ENOMEM;
		}
		/* The helper reads the .service file itself; it gets the name only. */
		argv = calloc(3, sizeof(*argv));
		if (!argv)
			return -ENOMEM;
		argv[0] = strdup(a->servicehelper);
		argv[1] = strdup(service->name);
		if (!argv[0] || !argv[1]) {
			r = -ENOMEM;
			goto out;
		}
	} else {
		r = activation_parse_exec(service->exec, &argv, &perr);
		if (r > 0) {
			err->name = DC_ERROR_INVALID_ARGS;
			err->message = strdup(perr);
			r = err->message ? ACTIVATION_E_FAILED : -ENOMEM;
		}
		if (r)
			goto out;
	}
	r = env_build(a, &envp);
	if (r < 0)
		goto out;

	c = calloc(1, sizeof(*c) + strlen(service->name) + 1);
	if (!c) {
		r = -ENOMEM;
		goto out;
	}
	strcpy(c->name, service->name);
	c->a = a;
	c->err_fd = -1;
	c->helper = a->servicehelper != NULL;
	list_init(&c->link);

	null_fd = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (null_fd < 0 || pipe2(pipefd, O_CLOEXEC) < 0) {
		r = -errno;
		err->name = DC_ERROR_SPAWN_SETUP_FAILED;
		if (asprintf(&err->message, "Failed to set up the child process: %s",
			     strerror(-r)) < 0)
			err->message = NULL;
		r = err->message ? ACTIVATION_E_FAILED : -ENOMEM;
		goto out;
	}

	act_log(a, 6, "Activating service name='%s' requested by '%s'%s", service->name,
		requester ? requester : "(unknown)",
		a->servicehelper ? " (using servicehelper)" : "");
	pid = fork();
	if (pid < 0) {
		r = -errno;
		err->name = DC_ERROR_SPAWN_FORK_FAILED;
		if (asprintf(&err->message, "Failed to fork (%s)", strerror(-r)) < 0)
			err->message = NULL;
		r = err->message ? ACTIVATION_E_FAILED : -ENOMEM;
		goto out;
	}
	if (pid == 0)
		child_run(argv, envp, pipefd[1], null_fd,
			  a->have_nofile ? &a->nofile : NULL);

	pipefd[1] = safe_close(pipefd[1]);
	c->pid = pid;
	c->err_fd = steal_fd(&pipefd[0]);
	(void)fcntl(c->err_fd, F_SETFL, O_NONBLOCK);
	r = sd_event_add_child(a->event, &c->source, pid, WEXITED, child_cb, c);
	if (r < 0) {
		/* Cannot watch it: do not leave it running unobserved. */
		(void)kill(pid, SIGKILL);
		(void)waitpid(pid, NULL, 0);
		err->name = DC_ERROR_SPAWN_FAILED;
		if (asprintf(&err->message, "Cannot watch the child process: %s",
			     strerror(-r)) < 0)
			err->message = NULL;
		r = err->message ? ACTIVATION_E_FAILED : -ENOMEM;
		goto out;
	}
	list_append(&a->children, &c->link);
	c->pending = p;
	p->child = steal_ptr(c);
	r = 0;
out:
	safe_close(pipefd[0]);
	safe_close(pipefd[1]);
	if (c)
		child_free(c);
	activation_strv_free(argv);
	activation_strv_free(envp);
	return r;
}

/* -------------------------------------------------------------- systemd */

static int build_activation_request(struct activation *a, const char *unit, struct message **mp)
{
	struct message_builder b;
	int r;

	message_builder_init_signal(&b, DC_PATH_DBUS, SYSTEMD_ACTIVATOR_INTERFACE,
				    "ActivationRequest", "s");
	b.sender = DC_SERVICE_DBUS;
	b.destination = ACTIVATION_SYSTEMD_NAME;
	dc_writer_write(&b.body, "s", unit);
	r = message_builder_seal(&b, a->ops->next_serial(a->userdata), mp);
	message_builder_deinit(&b);
	return r;
}

/*
 * Send the ActivationRequest of @p if systemd is there. @capture: show it to
 * the monitors (when it is first made, even if systemd is not there yet, as
 * dbus-daemon logs it; not again when it goes out later). Return 0 or
 * negative errno.
 */
static int pending_request_systemd(struct pending *p, bool capture)
{
	struct activation *a = p->a;
	_cleanup_message_ struct message *m = NULL;
	int r;

	r = build_activation_request(a, p->unit, &m);
	if (r < 0)
		return r;
	if (capture && a->ops->capture)
		a->ops->capture(a->userdata, NULL, m);
	if (a->ops->send_to_systemd(a->userdata, m)) {
		p->request_sent = true;
		act_log(a, 6, "Activating via systemd: service name='%s' unit='%s'", p->name,
			p->unit);
	} else {
		act_log(a, 6, "Activating systemd to hand-off: service name='%s' unit='%s'",
			p->name, p->unit);
	}
	return 0;
}

bool activation_is_systemd_failure(const struct message *msg)
{
	return msg->type == DC_MESSAGE_SIGNAL && msg->interface && msg->member &&
	       !strcmp(msg->interface, SYSTEMD_ACTIVATOR_INTERFACE) &&
	       !strcmp(msg->member, "ActivationFailure");
}

int activation_systemd_failure(struct activation *a, struct message *msg)
{
	const char *unit, *error, *text;
	struct dc_reader r;

	if (!activation_is_systemd_failure(msg) || strcmp(msg->signature, "sss"))
		return 0;
	if (message_get_body_reader(msg, &r) != 0 ||
	    dc_reader_read(&r, "sss", &unit, &error, &text) != 0)
		return 0;
	act_log(a, 6, "Activation via systemd failed for unit '%s': %s", unit, text);
	for (;;) {
		struct pending *p, *found = NULL;

		list_for_each_entry(p, &a->pendings, link) {
			if (p->unit && !strcmp(p->unit, unit)) {
				found = p;
				break;
			}
		}
		if (!found)
			return 0;
		pending_fail_quiet(found, error, text);	/* logged once, above */
	}
}

/* ------------------------------------------------------------- requests */

static int timer_cb(sd_event_source *s, uint64_t usec, void *userdata)
{
	struct pending *p = userdata;
	struct activation *a = p->a;

	if (p->child && p->child->pid > 0)
		(void)kill(p->child->pid, SIGKILL);	/* reaped by its child source */
	pending_failf(p, DC_ERROR_TIMED_OUT,
		      "Failed to activate service '%s': timed out (service_start_timeout=%llums)",
		      p->name, (unsigned long long)(a->timeout_usec / 1000));
	return 0;
}

static int pending_new(struct activation *a, const char *name, const struct bus_service *service,
		       struct pending **pp)
{
	struct pending *p;
	int r;

	p = calloc(1, sizeof(*p) + strlen(name) + 1);
	if (!p)
		return -ENOMEM;
	strcpy(p->name, name);
	p->a = a;
	list_init(&p->entries);
	list_init(&p->link);
	if (service) {
		p->exec = strdup(service->exec);
		if (!p->exec)
			goto oom;
		if (a->systemd_activation && service->systemd_service) {
			p->unit = strdup(service->systemd_service);
			if (!p->unit)
				goto oom;
		}
	}
	if (a->event) {
		r = sd_event_add_time_relative(a->event, &p->timer, CLOCK_MONOTONIC,
					       a->timeout_usec, 1000, timer_cb, p);
		if (r < 0) {
			pending_free(p);
			return r;
		}
	}
	r = hmap_insert(&a->by_name, &p->node, hash_str(name));
	if (r < 0) {
		pending_free(p);
		return r;
	}
	list_append(&a->pendings, &p->link);
	*pp = p;
	return 0;
oom:
	pending_free(p);
	return -ENOMEM;
}

bool activation_is_activatable(struct activation *a, const char *name)
{
	if (a->systemd_activation && !strcmp(name, ACTIVATION_SYSTEMD_NAME))
		return true;
	return lookup_service(a, name) != NULL;
}

const char *activation_assumed_apparmor_label(struct activation *a, const char *name)
{
	const struct bus_service *service = lookup_service(a, name);

	return service ? service->apparmor_label : NULL;
}

int activation_start(struct activation *a, void *sender, struct message *msg, const char *name,
		     bool auto_start)
{
	const struct bus_service *service = NULL;
	struct activation_error err = {};
	struct pending *p;
	struct act_entry *e;
	size_t size = auto_start ? message_get_size(msg) : 0;
	bool systemd_itself, created = false;
	int r;

	/*
	 * Monitors see an auto-start message once, when it arrives (dbus-daemon),
	 * not when it is delivered later. With systemd, the ActivationRequest it
	 * causes is seen first. The router does not capture it itself.
	 */
#define CAPTURE()								\
	do {									\
		if (auto_start && a->ops->capture)				\
			a->ops->capture(a->userdata, sender, msg);		\
	} while (0)

	if (a->n_entries >= a->max_pending || a->n_bytes + size > ACTIVATION_QUEUE_BYTES_MAX) {
		_cleanup_free_ char *text = NULL;
		int n;

		if (a->n_entries >= a->max_pending)
			n = asprintf(&text, "The maximum number of pending activations has been "
				     "reached, activation of %s failed (max_pending_service_starts=%zu)",
				     name, a->max_pending);
		else
			n = asprintf(&text, "The messages waiting for activations exceed %u bytes, "
				     "activation of %s failed", ACTIVATION_QUEUE_BYTES_MAX, name);
		if (n < 0)
			return -ENOMEM;
		CAPTURE();
		send_error(a, sender, msg, DC_ERROR_LIMITS_EXCEEDED, text);
		return 0;
	}

	/* With systemd activation, systemd itself needs no .service file: it will connect. */
	systemd_itself = a->systemd_activation && !strcmp(name, ACTIVATION_SYSTEMD_NAME);
	if (!systemd_itself) {
		service = lookup_service(a, name);
		if (!service) {
			_cleanup_free_ char *text = NULL;

			if (asprintf(&text, "The name %s was not provided by any .service files",
				     name) < 0)
				return -ENOMEM;
			CAPTURE();
			send_error(a, sender, msg, DC_ERROR_SERVICE_UNKNOWN, text);
			return 0;
		}
	}

	if (!auto_start && a->ops->owner(a->userdata, name)) {
		send_reply_u(a, sender, msg, DC_START_REPLY_ALREADY_RUNNING);
		return 0;
	}

	e = calloc(1, sizeof(*e));
	if (!e)
		return -ENOMEM;
	e->sender = sender;
	e->msg = message_ref(msg);
	e->size = size;
	e->auto_start = auto_start;

	p = pending_find(a, name);
	if (!p) {
		r = pending_new(a, name, service, &p);
		if (r < 0) {
			message_unref(e->msg);
			free(e);
			return r;
		}
		created = true;
	}
	list_append(&p->entries, &e->link);
	a->n_entries++;
	a->n_bytes += size;
	if (!created || systemd_itself) {
		/* Joins a running activation, or waits for systemd to connect. */
		CAPTURE();
		return 0;
	}
	if (p->unit) {
		r = pending_request_systemd(p, true);
		if (r < 0) {
			pending_detach(p);
			pending_free(p);
			return r;
		}
		CAPTURE();
		return 0;
	}

	CAPTURE();
	r = pending_spawn(p, service, msg->sender, &err);
	if (r) {
		/* Nobody else waits yet: the caller gets the error, the activation is gone. */
		if (r > 0) {
			act_log(a, 6, "Failed to activate service %s: %s", name, err.message);
			pending_fail_quiet(p, err.name, err.message);
			r = 0;
		} else {
			pending_detach(p);
			pending_free(p);
		}
	}
	activation_error_deinit(&err);
	return r;
#undef CAPTURE
}

void activation_name_acquired(struct activation *a, const char *name)
{
	struct pending *p;

	if (a->systemd_activation && !strcmp(name, ACTIVATION_SYSTEMD_NAME)) {
		/* Hand the activations that waited for systemd over to it. */
		list_for_each_entry(p, &a->pendings, link) {
			if (p->unit && !p->request_sent) {
				int r = pending_request_systemd(p, false);

				if (r < 0)
					act_log(a, 4, "cannot send ActivationRequest for %s: %s",
						p->name, strerror(-r));
			}
		}
	}

	if (hmap_size(&a->by_name) == 0)
		return;
	p = pending_find(a, name);
	if (!p)
		return;

	act_log(a, 6, "Successfully activated service '%s'", name);
	pending_detach(p);
	/*
	 * As dbus-daemon: StartServiceByName replies first, then the queued
	 * messages. Rescan from the head after every callback: it may have
	 * dropped entries (activation_sender_gone()).
	 */
	for (;;) {
		struct act_entry *e, *found = NULL;
		struct message *msg;
		void *sender;

		list_for_each_entry(e, &p->entries, link) {
			if (!e->auto_start) {
				found = e;
				break;
			}
		}
		if (!found)
			break;
		msg = message_ref(found->msg);
		sender = found->sender;
		entry_free(a, found);
		send_reply_u(a, sender, msg, DC_START_REPLY_SUCCESS);
		message_unref(msg);
	}
	while (!list_is_empty(&p->entries)) {
		struct act_entry *e = list_first_entry(&p->entries, struct act_entry, link);
		struct message *msg = message_ref(e->msg);
		void *sender = e->sender;

		entry_free(a, e);
		if (sender)
			a->ops->deliver(a->userdata, sender, msg);
		else if (!a->ops->send_to_systemd(a->userdata, msg))
			act_log(a, 4, "systemd left the bus: message of the bus to it dropped");
		message_unref(msg);
	}
	pending_free(p);
}

void activation_sender_gone(struct activation *a, void *sender)
{
	struct list_node *lists[] = { &a->pendings, &a->resolving };

	if (a->n_entries == 0)
		return;
	for (size_t i = 0; i < ARRAY_SIZE(lists); i++) {
		struct pending *p;

		list_for_each_entry(p, lists[i], link) {
			struct act_entry *e, *t;

			list_for_each_entry_safe(e, t, &p->entries, link)
				if (e->sender == sender)
					entry_free(a, e);
		}
	}
}

/* ------------------------------------------------------------ environment */

/*
 * A message of the bus for systemd, which is not on the bus: it waits on the
 * pending activation of org.freedesktop.systemd1 (sender NULL), as in
 * dbus-daemon. Bounded like any queued request. Return 0 or -ENOMEM.
 */
static int queue_for_systemd(struct activation *a, struct message *msg)
{
	struct pending *p = pending_find(a, ACTIVATION_SYSTEMD_NAME);
	size_t size = message_get_size(msg);
	struct act_entry *e;
	int r;

	if (a->n_entries >= a->max_pending || a->n_bytes + size > ACTIVATION_QUEUE_BYTES_MAX) {
		act_log(a, 4, "Too many pending activations: message for systemd dropped");
		return 0;
	}
	e = calloc(1, sizeof(*e));
	if (!e)
		return -ENOMEM;
	if (!p) {
		r = pending_new(a, ACTIVATION_SYSTEMD_NAME, NULL, &p);
		if (r < 0) {
			free(e);
			return r;
		}
	}
	e->msg = message_ref(msg);
	e->size = size;
	e->auto_start = true;
	list_append(&p->entries, &e->link);
	a->n_entries++;
	a->n_bytes += size;
	return 0;
}

static bool env_key_valid(const char *key)
{
	return key[0] && !strchr(key, '=');
}

int activation_update_environment(struct activation *a, struct message *msg,
				  struct activation_error *err)
{
	struct dc_reader r;
	size_t n_new = 0, n = 0;
	const char **keys = NULL, **values = NULL;
	int ret = 0;

	if (a->servicehelper) {
		err->name = DC_ERROR_ACCESS_DENIED;
		err->message = strdup("Cannot change activation environment on a system bus.");
		return err->message ? ACTIVATION_E_FAILED : -ENOMEM;
	}
	if (strcmp(msg->signature, "a{ss}") || message_get_body_reader(msg, &r) != 0 ||
	    dc_reader_enter(&r, 'a') != 0)
		goto invalid;

	/* Validate everything first: an update applies completely or not at all. */
	while (dc_reader_peek(&r) == '{') {
		const char *key, *value;
		const char **v;

		if (dc_reader_enter(&r, '{') || dc_reader_read(&r, "ss", &key, &value) ||
		    dc_reader_exit(&r))
			goto invalid;
		if (!env_key_valid(key)) {
			err->name = DC_ERROR_INVALID_ARGS;
			if (asprintf(&err->message, "Invalid environment variable name \"%s\"",
				     key) < 0)
				err->message = NULL;
			ret = err->message ? ACTIVATION_E_FAILED : -ENOMEM;
			goto out;
		}
		if (strlen(key) + strlen(value) + 2 > ACTIVATION_ENV_ENTRY_MAX) {
			err->name = DC_ERROR_LIMITS_EXCEEDED;
			if (asprintf(&err->message, "Environment variable \"%s\" is too long "
				     "(at most %u bytes)", key, ACTIVATION_ENV_ENTRY_MAX) < 0)
				err->message = NULL;
			ret = err->message ? ACTIVATION_E_FAILED : -ENOMEM;
			goto out;
		}
		if (env_find(a, key, strlen(key)) < 0)
			n_new++;
		if (n % 16 == 0) {
			v = realloc(keys, (n + 16) * sizeof(*v));
			if (!v) {
				ret = -ENOMEM;
				goto out;
			}
			keys = v;
			v = realloc(values, (n + 16) * sizeof(*v));
			if (!v) {
				ret = -ENOMEM;
				goto out;
			}
			values = v;
		}
		keys[n] = key;
		values[n++] = value;
	}
	if (dc_reader_exit(&r))
		goto invalid;
	if (a->n_env + n_new > ACTIVATION_ENV_MAX) {
		err->name = DC_ERROR_LIMITS_EXCEEDED;
		if (asprintf(&err->message, "Too many activation environment variables "
			     "(at most %u)", ACTIVATION_ENV_MAX) < 0)
			err->message = NULL;
		ret = err->message ? ACTIVATION_E_FAILED : -ENOMEM;
		goto out;
	}

	for (size_t i = 0; i < n; i++) {
		ret = env_set(a, keys[i], values[i]);
		if (ret < 0)
			goto out;
	}

	if (a->systemd_activation) {
		_cleanup_message_ struct message *m = NULL;
		const char *systemd = a->ops->owner(a->userdata, ACTIVATION_SYSTEMD_NAME);
		struct message_builder b;

		/* dbus-daemon addresses the unique name, or activates systemd. */
		message_builder_init_method_call(&b, systemd ? systemd : ACTIVATION_SYSTEMD_NAME,
						 SYSTEMD_MANAGER_PATH, SYSTEMD_MANAGER_INTERFACE,
						 "SetEnvironment", "as");
		b.sender = DC_SERVICE_DBUS;
		b.flags |= DC_FLAG_NO_REPLY_EXPECTED;
		dc_writer_open(&b.body, 'a', NULL);
		for (size_t i = 0; i < n; i++) {
			ssize_t k = env_find(a, keys[i], strlen(keys[i]));

			if (k >= 0)
				dc_writer_write(&b.body, "s", a->env[k]);
		}
		dc_writer_close(&b.body);
		ret = message_builder_seal(&b, a->ops->next_serial(a->userdata), &m);
		message_builder_deinit(&b);
		if (ret < 0)
			goto out;
		if (a->ops->capture)
			a->ops->capture(a->userdata, NULL, m);
		if (!systemd || !a->ops->send_to_systemd(a->userdata, m)) {
			ret = queue_for_systemd(a, m);
			if (ret < 0)
				goto out;
		}
	}
	ret = 0;
	goto out;

invalid:
	err->name = DC_ERROR_INVALID_ARGS;
	err->message = strdup("Invalid arguments");
	ret = err->message ? ACTIVATION_E_FAILED : -ENOMEM;
out:
	free(keys);
	free(values);
	return ret;
}

/* ---------------------------------------------------------------- re-exec */

bool activation_is_settled(const struct activation *a)
{
	return list_is_empty(&a->resolving);
}

void activation_foreach_child(const struct activation *a, activation_child_fn fn, void *userdata)
{
	const struct child *c;

	list_for_each_entry(c, &a->children, link)
		fn(userdata, c->pid, c->err_fd, c->helper, c->name);
}

int activation_restore_child(struct activation *a, pid_t pid, int err_fd, bool helper,
			     const char *name)
{
	size_t len = strlen(name);
	struct child *c;
	int r;

	if (!a->event || pid <= 0 || err_fd < 0)
		return -EINVAL;
	/* Read once the child exited; carried over, it may come blocking. */
	r = fd_prepare_for_loop(err_fd);
	if (r < 0)
		return r;
	c = calloc(1, sizeof(*c) + len + 1);
	if (!c)
		return -ENOMEM;
	c->a = a;
	c->pid = pid;
	c->err_fd = err_fd;
	c->helper = helper;
	memcpy(c->name, name, len + 1);
	list_init(&c->link);
	r = sd_event_add_child(a->event, &c->source, pid, WEXITED, child_cb, c);
	if (r < 0) {
		child_free(c);
		return r;
	}
	list_append(&a->children, &c->link);
	return 0;
}

void activation_foreach_pending(const struct activation *a, activation_pending_fn pending_fn,
				activation_entry_fn entry_fn, void *userdata)
{
	const struct pending *p;

	list_for_each_entry(p, &a->pendings, link) {
		struct activation_pending_info info = {
			.name = p->name,
			.exec = p->exec,
			.unit = p->unit,
			.request_sent = p->request_sent,
			.child_pid = p->child ? p->child->pid : 0,
		};
		const struct act_entry *e;
		size_t n = 0;

		if (p->timer)
			(void)sd_event_source_get_time(p->timer, &info.deadline_usec);
		list_for_each_entry(e, &p->entries, link)
			n++;
		pending_fn(userdata, &info, n);
		list_for_each_entry(e, &p->entries, link)
			entry_fn(userdata, e->sender, e->msg, e->auto_start);
	}
}

int activation_restore_pending(struct activation *a, const struct activation_pending_info *info)
{
	struct child *c, *child = NULL;
	struct pending *p;
	int r;

	if (!a->event || !info->name)
		return -EINVAL;
	if (pending_find(a, info->name))
		return -EEXIST;
	if (info->child_pid) {
		list_for_each_entry(c, &a->children, link) {
			if (c->pid == info->child_pid && !c->pending) {
				child = c;
				break;
			}
		}
		if (!child)
			return -ENOENT;
	}
	r = pending_new(a, info->name, NULL, &p);
	if (r < 0)
		return r;
	if ((info->exec && !(p->exec = strdup(info->exec))) ||
	    (info->unit && !(p->unit = strdup(info->unit)))) {
		pending_detach(p);
		pending_free(p);
		return -ENOMEM;
	}
	/* The deadline of the old program: a re-exec does not extend it. */
	if (info->deadline_usec) {
		r = sd_event_source_set_time(p->timer, info->deadline_usec);
		if (r < 0) {
			pending_detach(p);
			pending_free(p);
			return r;
		}
	}
	p->request_sent = info->request_sent;
	if (child) {
		p->child = child;
		child->pending = p;
	}
	return 0;
}

int activation_restore_entry(struct activation *a, const char *name, void *sender,
			     struct message *msg, bool auto_start)
{
	struct pending *p = pending_find(a, name);
	struct act_entry *e;

	if (!p)
		return -ENOENT;
	e = calloc(1, sizeof(*e));
	if (!e)
		return -ENOMEM;
	e->sender = sender;
	e->msg = message_ref(msg);
	e->size = auto_start ? message_get_size(msg) : 0;
	e->auto_start = auto_start;
	list_append(&p->entries, &e->link);
	a->n_entries++;
	a->n_bytes += e->size;
	return 0;
}

void activation_get_env(const struct activation *a, char *const **envp, size_t *np)
{
	*envp = a->env;
	*np = a->n_env;
}

int activation_restore_env(struct activation *a, const char *const *env, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		const char *eq = strchr(env[i], '=');
		_cleanup_free_ char *key = NULL;
		int r;

		if (!eq || eq == env[i])
			return -EINVAL;
		key = strndup(env[i], (size_t)(eq - env[i]));
		if (!key)
			return -ENOMEM;
		r = env_set(a, key, eq + 1);
		if (r < 0)
			return r;
	}
	return 0;
}
