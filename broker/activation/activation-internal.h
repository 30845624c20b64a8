/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * The insides of service activation, shared by its files (not an API):
 *
 *   activation.c           the object, pending activations and their queued
 *                          requests, the replies, the re-exec hooks
 *   activation-services.c  the service-file directories: scans and lookups
 *   activation-exec.c      Exec= lines, spawning and reaping the services
 *   activation-systemd.c   the hand-off to systemd (ActivationRequest)
 *   activation-env.c       the activation environment
 *   activation-state.c     its section of the re-exec state (via activation.h)
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

#include <signal.h>
#include <stdbool.h>
#include <sys/resource.h>
#include <time.h>
#include <systemd/sd-event.h>
#include "broker/activation/activation.h"
#include "conf/config.h"
#include "util/hashmap.h"
#include "util/list.h"
#include "util/log-fn.h"

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
	bool charged;			/* ops->charge() took it: ops->uncharge() at free */
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
	uint64_t changes;		/* of what it serializes (activation_changes()) */
};

/* Log through the owner's callback (util/log-fn.h). */
#define act_log(a, priority, ...) log_fn_printf((a)->ops->log, (a)->userdata, priority, __VA_ARGS__)

/* activation.c */
int act_strdup_or_null(char **dst, const char *src);
void act_child_free(struct child *c);
int act_pending_new(struct activation *a, const char *name, const struct bus_service *service,
		    struct pending **pp);
struct pending *act_pending_find(struct activation *a, const char *name);
/* The activation of @p failed: every waiting caller gets the error (logged or not). */
void act_pending_fail(struct pending *p, const char *name, const char *text);
void act_pending_fail_quiet(struct pending *p, const char *name, const char *text);
/* ... and so does every other pending activation with the same Exec=. */
void act_pending_fail_same_exec(struct activation *a, const char *exec, const char *name,
				const char *text);

/* activation-services.c: the service that owns @name, or NULL. */
const struct bus_service *act_lookup_service(struct activation *a, const char *name);

/* activation-exec.c */
/* @requester: its unique name; @loginfo: who it is, or NULL (activation_ops). */
int act_pending_spawn(struct pending *p, const struct bus_service *service,
		      const char *requester, const char *loginfo,
		      struct activation_error *err);
/* The sd-event child source of a spawned service. */
int act_child_cb(sd_event_source *s, const siginfo_t *si, void *userdata);

/* activation-systemd.c */
int act_pending_request_systemd(struct pending *p, bool capture);
int act_queue_for_systemd(struct activation *a, struct message *msg);

/* activation-env.c */
bool act_env_inherited(const char *entry);
int act_env_set(struct activation *a, const char *key, const char *value);
/* The environment of a spawned service (allocated, NULL-terminated). */
int act_env_build(struct activation *a, char ***envp);
