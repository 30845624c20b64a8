/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Service activation: the object, its pending activations and their queued
 * requests, the replies to them, the re-exec hooks. The parts of it are
 * listed in activation-internal.h. See activation.h.
 */

#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <syslog.h>
#include <unistd.h>
#include "broker/activation/activation-internal.h"
#include "dbus-compat/message.h"
#include "dbus-compat/protocol.h"
#include "util/fd.h"

extern char **environ;

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

/* Log through the owner's callback (util/log-fn.h). */
#define act_log(a, priority, ...) log_fn_printf((a)->ops->log, (a)->userdata, priority, __VA_ARGS__)

int act_strdup_or_null(char **dst, const char *src)
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

		if (!act_env_inherited(*e))
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

/* Charge @e's message to its sender's user (see ops->charge). 0 or ACTIVATION_E_QUOTA. */
static int entry_charge(struct activation *a, struct act_entry *e)
{
	if (!e->sender || !a->ops->charge)
		return 0;
	if (a->ops->charge(a->userdata, e->sender, message_get_size(e->msg), e->msg->n_fds) ==
	    ACTIVATION_E_QUOTA)
		return ACTIVATION_E_QUOTA;
	e->charged = true;
	return 0;
}

/* Return what entry_charge() took, if it took anything. */
static void entry_uncharge(struct activation *a, struct act_entry *e)
{
	if (!e->charged)
		return;
	a->ops->uncharge(a->userdata, e->sender, message_get_size(e->msg), e->msg->n_fds);
	e->charged = false;
}

static void entry_free(struct activation *a, struct act_entry *e)
{
	a->changes++;
	list_unlink(&e->link);
	a->n_entries--;
	a->n_bytes -= e->size;
	entry_uncharge(a, e);
	message_unref(e->msg);
	free(e);
}

void act_child_free(struct child *c)
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

	a->changes++;
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

	a->changes++;
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
		act_child_free(list_first_entry(&a->children, struct child, link));
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

	/* Whatever @call is (NO_REPLY_EXPECTED, a signal): dbus-daemon sends it too. */
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
void act_pending_fail_quiet(struct pending *p, const char *name, const char *text)
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

void act_pending_fail(struct pending *p, const char *name, const char *text)
{
	act_log(p->a, 6, "Activated service '%s' failed: %s", p->name, text);
	act_pending_fail_quiet(p, name, text);
}

_printf_(3, 4) static void pending_failf(struct pending *p, const char *name, const char *fmt, ...)
{
	_cleanup_free_ char *text = NULL;
	va_list ap;
	int r;

	va_start(ap, fmt);
	r = vasprintf(&text, fmt, ap);
	va_end(ap);
	/*
	 * The text is the log line too (dbus-daemon's timeout message), at the
	 * security level (notice, LOG_AUTH): dbus-daemon logs an error it
	 * sets and logs at once there, whatever level it asks for.
	 */
	act_log(p->a, LOG_AUTH | LOG_NOTICE, "%s", r >= 0 ? text : "activation failed");
	act_pending_fail_quiet(p, name, r >= 0 ? text : "activation failed");
}

/*
 * A failed child fails every pending activation with the same Exec=, with its
 * error; dbus-daemon logs the failure once, for the child's own name.
 */
void act_pending_fail_same_exec(struct activation *a, const char *exec, const char *name,
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
		act_pending_fail_quiet(found, name, text);
	}
}

struct pending *act_pending_find(struct activation *a, const char *name)
{
	uint64_t h = hash_str(name);

	hmap_for_each_hash(n, &a->by_name, h) {
		struct pending *p = container_of(n, struct pending, node);

		if (!strcmp(p->name, name))
			return p;
	}
	return NULL;
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

int act_pending_new(struct activation *a, const char *name, const struct bus_service *service,
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
	a->changes++;
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
	return act_lookup_service(a, name) != NULL;
}

const char *activation_assumed_apparmor_label(struct activation *a, const char *name)
{
	const struct bus_service *service = act_lookup_service(a, name);

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
		service = act_lookup_service(a, name);
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
	if (entry_charge(a, e) == ACTIVATION_E_QUOTA) {
		_cleanup_free_ char *text = NULL;

		message_unref(e->msg);
		free(e);
		if (asprintf(&text, "The messages of this user waiting for activations exceed "
			     "its share, activation of %s failed", name) < 0)
			return -ENOMEM;
		CAPTURE();
		send_error(a, sender, msg, DC_ERROR_LIMITS_EXCEEDED, text);
		return 0;
	}

	p = act_pending_find(a, name);
	if (!p) {
		r = act_pending_new(a, name, service, &p);
		if (r < 0) {
			entry_uncharge(a, e);
			message_unref(e->msg);
			free(e);
			return r;
		}
		created = true;
	}
	list_append(&p->entries, &e->link);
	a->changes++;
	a->n_entries++;
	a->n_bytes += size;
	if (!created || systemd_itself) {
		/* Joins a running activation, or waits for systemd to connect. */
		CAPTURE();
		return 0;
	}
	if (p->unit) {
		r = act_pending_request_systemd(p, true);
		if (r < 0) {
			pending_detach(p);
			pending_free(p);
			return r;
		}
		CAPTURE();
		return 0;
	}

	CAPTURE();
	r = act_pending_spawn(p, service, msg->sender,
			      a->ops->loginfo && sender ? a->ops->loginfo(a->userdata, sender) : NULL,
			      &err);
	if (r) {
		/* Nobody else waits yet: the caller gets the error, the activation is gone. */
		if (r == ACTIVATION_E_FAILED) {
			act_log(a, 6, "Failed to activate service %s: %s", name, err.message);
			act_pending_fail_quiet(p, err.name, err.message);
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
				int r = act_pending_request_systemd(p, false);

				if (r < 0)
					act_log(a, 4, "cannot send ActivationRequest for %s: %s",
						p->name, strerror(-r));
			}
		}
	}

	if (hmap_size(&a->by_name) == 0)
		return;
	p = act_pending_find(a, name);
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

/* ---------------------------------------------------------------- re-exec */

uint64_t activation_changes(const struct activation *a)
{
	return a->changes;
}

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
	r = sd_event_add_child(a->event, &c->source, pid, WEXITED, act_child_cb, c);
	if (r < 0) {
		act_child_free(c);
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
	if (act_pending_find(a, info->name))
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
	r = act_pending_new(a, info->name, NULL, &p);
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
	struct pending *p = act_pending_find(a, name);
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
	/* It waited before the re-exec: it waits on, over its share or not. */
	(void)entry_charge(a, e);
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
		r = act_env_set(a, key, eq + 1);
		if (r < 0)
			return r;
	}
	return 0;
}

