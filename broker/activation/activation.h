/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/**
 * DOC: Service activation
 *
 * struct activation starts the services of the .service files in the
 * configured service directories, as dbus-daemon 1.14 does (bus/activation.c),
 * for StartServiceByName and for auto-start (a method call or unicast signal
 * to a name that has no owner and lacks NO_AUTO_START, as dbus-daemon).
 *
 * The module knows nothing about connections or routing: a caller is an
 * opaque pointer (the broker passes its struct peer), and everything
 * that goes out goes through struct activation_ops, so that the unit test can
 * drive it with a fake router. Messages it sends are built here, from
 * org.freedesktop.DBus.
 *
 * A start request of name N (activation_start()):
 *  - the pending queue is full (max_pending_service_starts entries over all
 *    names, or ACTIVATION_QUEUE_BYTES_MAX bytes of queued messages):
 *    LimitsExceeded;
 *  - the caller's own share of it is (ops->charge() refuses: the broker
 *    charges each waiting message, its bytes and its fds to the caller's
 *    user, so that one uid neither fills the queue for everyone nor parks
 *    fds at a name nobody claims beyond its quota): LimitsExceeded;
 *  - N has no .service file (on a miss the directories are rescanned, as
 *    dbus-daemon does, when one of them changed since the last scan):
 *    ServiceUnknown;
 *  - StartServiceByName and N has an owner: reply 2 (ALREADY_RUNNING);
 *  - otherwise the request joins the pending activation of N (created, and
 *    the service started, if there is none yet).
 * The pending activation ends when:
 *  - N gets an owner (activation_name_acquired()): StartServiceByName callers
 *    get 1 (SUCCESS); auto-start messages go back to the router
 *    (ops->deliver), in the order they were queued;
 *  - the child fails: Spawn.ExecFailed ("Failed to execute program N: ..."),
 *    Spawn.ChildExited ("Process N exited with status S") for a non-zero
 *    exit, Spawn.ChildSignaled ("Process N received signal S"); with a
 *    <servicehelper>, its exit codes map to the Spawn.* errors as in
 *    dbus-daemon (6 = Spawn.ServiceNotFound, ...). A child that exits with
 *    status 0 is NOT a failure (it may have daemonized): the activation
 *    waits for the name or the timeout, as in dbus-daemon. A failure also
 *    fails every other pending activation with the same Exec line;
 *  - service_start_timeout passes (default 25 s): TimedOut ("Failed to
 *    activate service 'N': timed out (service_start_timeout=Tms)"), and the
 *    child, if still running, is killed with SIGKILL;
 *  - systemd reports ActivationFailure(unit, error, message) for its
 *    SystemdService: that error, to every waiting caller.
 * Every waiting caller gets the error, except method calls with
 * NO_REPLY_EXPECTED (the bus' rule for all routing errors; dbus-daemon sends
 * them). Unicast signals that triggered an activation get it, as from
 * dbus-daemon, although libdbus marks signals NO_REPLY_EXPECTED.
 *
 * The transient service directory ($XDG_RUNTIME_DIR/dbus-1/services, the
 * one with NO_WATCH and STRICT_NAMING) is created (0700) when missing, as
 * dbus-daemon does at start-up, so that tools can drop files there.
 *
 * Direct exec (no SystemdService, or --systemd-activation off): Exec= is
 * split as dbus-daemon's _dbus_shell_parse_argv() does (activation_parse_exec);
 * argv[0] is executed with execve() (no PATH search). The environment is the
 * bus' environment at activation_new() (minus JOURNAL_STREAM, LISTEN_FDS,
 * LISTEN_PID, LISTEN_FDNAMES, NOTIFY_SOCKET, INVOCATION_ID) plus
 * UpdateActivationEnvironment's variables, plus DBUS_STARTER_ADDRESS,
 * DBUS_STARTER_BUS_TYPE and DBUS_SESSION_BUS_ADDRESS (session bus) or
 * DBUS_SYSTEM_BUS_ADDRESS (system bus). The child has stdin on /dev/null,
 * inherits stdout/stderr, every other fd closed, an empty signal mask,
 * default signal dispositions and the RLIMIT_NOFILE of activation_new().
 * Children are reaped with sd-event child sources, also after their
 * activation ended (SIGCHLD is blocked by activation_attach()).
 *
 * systemd activation (config systemd_activation and a SystemdService=): the
 * bus sends the signal org.freedesktop.systemd1.Activator.ActivationRequest
 * (s unit) from org.freedesktop.DBus, path /org/freedesktop/DBus, to
 * destination org.freedesktop.systemd1 (ops->send_to_systemd). If
 * org.freedesktop.systemd1 has no owner, the request waits and is sent when
 * that name appears (activation_name_acquired()); the timeout runs anyway.
 * This is what dbus-daemon does by queueing the signal on a pending
 * activation of org.freedesktop.systemd1. Auto-start of
 * org.freedesktop.systemd1 itself only waits (no .service file needed).
 *
 * Reentrancy: ops callbacks may call activation_sender_gone() (a delivery
 * that closes a connection); they must not call anything else of this API.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <systemd/sd-event.h>
#include "util/list.h"
#include "util/macro.h"

struct activation;
struct bus_services;
struct message;

/* Bytes of queued auto-start messages, over all pending activations. */
#define ACTIVATION_QUEUE_BYTES_MAX (128U * 1024 * 1024)
/* UpdateActivationEnvironment: variables kept, and the size of one. */
#define ACTIVATION_ENV_MAX 1024
#define ACTIVATION_ENV_ENTRY_MAX (64U * 1024)
/* dbus-daemon's defaults */
#define ACTIVATION_DEFAULT_TIMEOUT_MSEC 25000
#define ACTIVATION_DEFAULT_MAX_PENDING 512

#define ACTIVATION_SYSTEMD_NAME "org.freedesktop.systemd1"

/* Positive return codes. */
enum {
	_ACTIVATION_E_SUCCESS,
	/* The request failed: the error is in struct activation_error. */
	ACTIVATION_E_FAILED,
	/* ops->charge(): the sender's user may not have the message wait. */
	ACTIVATION_E_QUOTA,
};

/**
 * struct activation_error - a D-Bus error to return to a caller
 * @name:	error name (static string, or one owned by @message's buffer)
 * @message:	malloc'ed text
 */
struct activation_error {
	const char *name;
	char *message;
	char *name_owned;
};

void activation_error_deinit(struct activation_error *err);

/**
 * struct activation_ops - how the module talks to the bus
 * @send:	send @msg (a reply or error built here, SENDER
 *		org.freedesktop.DBus) to the caller @to. The broker:
 *		router_send_from_driver(bus, to, msg).
 * @deliver:	the name of a queued auto-start message got an owner: route
 *		@msg (stitched, from @sender) to it, without capturing it for
 *		monitors again (see @capture).
 *		(Messages of the bus itself, queued for systemd, go through
 *		@send_to_systemd instead.)
 * @send_to_systemd: deliver @msg (a signal or call to
 *		org.freedesktop.systemd1) to the owner of that name WITHOUT
 *		showing it to monitors (@capture did, when it was made); return
 *		false (nothing sent) if the name has no owner.
 * @capture:	show @msg to the monitors (may be NULL): an auto-start message
 *		from @sender when it arrives (the router does not capture it,
 *		and does not capture it again when @deliver routes it), or a
 *		message of the bus for systemd (@sender NULL) when it is made.
 *		The broker: monitor_capture(bus, msg, sender, NULL).
 * @owner:	the unique name of the (primary) owner of @name, or NULL.
 * @next_serial: serial for a message the bus sends.
 * @log:	log a line (priority as syslog's: 3 err, 4 warning, 6 info, with
 *		a facility for dbus-daemon's security messages). May be NULL.
 * @loginfo:	who @sender is, for log lines: uid=U pid=P comm="..." as
 *		dbus-daemon writes it, or NULL. May be NULL.
 * @charge:	a message of @sender (not NULL) of @bytes with @n_fds is
 *		about to wait in the queue: 0, or ACTIVATION_E_QUOTA if
 *		@sender's user may not have it wait (nothing charged). May be
 *		NULL.
 * @uncharge:	that message left the queue (delivered, answered, dropped).
 */
struct activation_ops {
	void (*send)(void *userdata, void *to, struct message *msg);
	void (*deliver)(void *userdata, void *sender, struct message *msg);
	bool (*send_to_systemd)(void *userdata, struct message *msg);
	void (*capture)(void *userdata, void *sender, struct message *msg);
	const char *(*owner)(void *userdata, const char *name);
	uint32_t (*next_serial)(void *userdata);
	void (*log)(void *userdata, int priority, const char *text);
	const char *(*loginfo)(void *userdata, void *sender);
	int (*charge)(void *userdata, void *sender, size_t bytes, size_t n_fds);
	void (*uncharge)(void *userdata, void *sender, size_t bytes, size_t n_fds);
};

/**
 * struct activation_config - what the configuration decides
 * @address:	the bus address for DBUS_STARTER_ADDRESS (NULL: keep the
 *		previous one)
 * @bus_type:	<type> ("session", "system", other or NULL)
 * @servicehelper: <servicehelper> (setuid launch helper), or NULL
 * @systemd_activation: --systemd-activation
 * @service_start_timeout: milliseconds (<= 0: 25000)
 * @max_pending_service_starts: queued requests over all names (<= 0: 512)
 * @servicedirs: struct bus_config_servicedir list, or NULL for none
 */
struct activation_config {
	const char *address;
	const char *bus_type;
	const char *servicehelper;
	bool systemd_activation;
	int64_t service_start_timeout;
	int64_t max_pending_service_starts;
	const struct list_node *servicedirs;
};

/**
 * activation_new() - create the activation state
 *
 * Captures the process environment and RLIMIT_NOFILE for the children, so
 * call it before the bus raises its fd limit. No event loop yet: see
 * activation_attach(). Return: 0 or -ENOMEM.
 */
int activation_new(struct activation **ap, const struct activation_ops *ops, void *userdata);
/* Pending callers are dropped silently; running children are left alone. */
struct activation *activation_free(struct activation *a);
DEFINE_CLEANUP_FUNC(struct activation *, activation_free);

/*
 * Attach to the event loop (timeouts, child sources) and block SIGCHLD, which
 * sd-event requires for child sources. Return 0 or negative errno.
 */
int activation_attach(struct activation *a, sd_event *event);

/**
 * activation_configure() - apply a (new) configuration
 *
 * Copies everything and rescans the service directories (invalid files are
 * skipped, logged as by dbus-daemon: see struct bus_services). Pending activations
 * keep running with what they started with. On failure nothing changes.
 * Return: 0 or -ENOMEM.
 */
int activation_configure(struct activation *a, const struct activation_config *config);

/* Set DBUS_STARTER_ADDRESS (once the listeners exist). Return 0 or -ENOMEM. */
int activation_set_address(struct activation *a, const char *address);

/* The activatable names, sorted (ListActivatableNames). Never NULL. */
const struct bus_services *activation_services(const struct activation *a);

/*
 * Whether activation_start() would find something to start for @name: a
 * .service file (the directories are rescanned if they changed), or systemd
 * itself under --systemd-activation. The router asks before the send policy
 * check of an auto-start, because dbus-daemon answers ServiceUnknown for a
 * name no .service file provides before it looks at the policy.
 */
bool activation_is_activatable(struct activation *a, const char *name);

/* AssumedAppArmorLabel= of @name's .service file, or NULL (apparmor.h). */
const char *activation_assumed_apparmor_label(struct activation *a, const char *name);

/**
 * activation_start() - StartServiceByName or auto-start
 * @sender:	the caller (opaque; activation_sender_gone() drops its requests)
 * @msg:	the stitched call: StartServiceByName itself, or the auto-start
 *		method call (a reference is taken while it waits)
 * @name:	the name to activate
 * @auto_start:	true for auto-start (the message is delivered once the name
 *		has an owner), false for StartServiceByName (reply 1 then)
 *
 * Every outcome reaches @sender through ops->send: the ALREADY_RUNNING reply,
 * immediate errors (LimitsExceeded, ServiceUnknown, Spawn.*), and later the
 * SUCCESS reply or the failure. Return: 0, or negative errno (nothing sent).
 */
int activation_start(struct activation *a, void *sender, struct message *msg, const char *name,
		     bool auto_start);

/*
 * @name got an owner (its first one): answer the StartServiceByName callers,
 * deliver the queued auto-start messages in order. For
 * org.freedesktop.systemd1, also send the ActivationRequests that waited for
 * it. Cheap when nothing waits for @name.
 */
void activation_name_acquired(struct activation *a, const char *name);

/* @sender disconnected: drop its queued requests (nothing is sent to it). */
void activation_sender_gone(struct activation *a, void *sender);

/**
 * activation_systemd_failure() - org.freedesktop.systemd1.Activator.ActivationFailure
 * @msg:	the signal, body (s unit, s error_name, s error_message)
 *
 * The caller checks that the sender is the owner of org.freedesktop.systemd1
 * (dbus-daemon ignores the signal from anyone else). Every pending activation
 * whose SystemdService is the unit fails with the given error. A malformed
 * signal is ignored. Return: 0 or negative errno.
 */
int activation_systemd_failure(struct activation *a, struct message *msg);

/* Whether @msg is org.freedesktop.systemd1.Activator.ActivationFailure (a signal). */
bool activation_is_systemd_failure(const struct message *msg);

/**
 * activation_update_environment() - UpdateActivationEnvironment(a{ss})
 * @msg:	the call
 * @err:	set on ACTIVATION_E_FAILED
 *
 * Refused (AccessDenied "Cannot change activation environment on a system
 * bus.") when a <servicehelper> is configured, as dbus-daemon does. Keys must
 * be non-empty and contain no '=' or NUL, and entries are bounded
 * (ACTIVATION_ENV_*): InvalidArgs / LimitsExceeded, nothing applied (dbus-daemon
 * does not check keys; a key with '=' would silently set another variable).
 * With systemd activation, the variables are also forwarded to systemd
 * (org.freedesktop.systemd1.Manager.SetEnvironment(as), no reply expected,
 * even for an empty dictionary), as dbus-daemon does: addressed to systemd's
 * unique name when it is on the bus, else queued (addressed to
 * org.freedesktop.systemd1) until it connects. The caller checks privileges
 * and sends the empty reply.
 * Return: 0, ACTIVATION_E_FAILED or negative errno.
 */
int activation_update_environment(struct activation *a, struct message *msg,
				  struct activation_error *err);

/**
 * activation_parse_exec() - split an Exec= line as dbus-daemon does
 * @argvp:	NULL-terminated, malloc'ed vector (free with activation_strv_free)
 * @errorp:	on ACTIVATION_E_FAILED: static message ("Unclosed quotes in
 *		command line", "No tokens found in command line")
 *
 * Blanks (space, tab) and unquoted newlines separate words; '...' is
 * literal; "..." knows the escapes \" \\ \` \$ and backslash-newline; an
 * unquoted backslash escapes the next character (backslash-newline vanishes);
 * '#' at the start of a word comments out the rest of the line. No
 * expansions. Deviation: dbus-daemon can produce a trailing empty argument
 * for a line ending in blanks; this never does.
 * Return: 0, ACTIVATION_E_FAILED, -ENOMEM.
 */
int activation_parse_exec(const char *line, char ***argvp, const char **errorp);
void activation_strv_free(char **v);

/* Number of queued requests (all names), for statistics and tests. */
size_t activation_n_pending(const struct activation *a);

/*
 * Re-exec (reexec.h). Everything of the module that is not configuration
 * crosses: the environment set with UpdateActivationEnvironment
 * (activation_get_env(), activation_restore_env()); the spawned services
 * still running, each still the bus' child after the exec and reaped by the
 * new program (activation_foreach_child(), activation_restore_child(), which
 * takes over @err_fd, the read end of its exec-error pipe); and the pending
 * activations with their queued requests, in order, and their deadlines
 * (activation_foreach_pending(), activation_restore_pending(),
 * activation_restore_entry()). Restore children first: a pending activation
 * finds its child by pid.
 *
 * activation_is_settled(): false only inside activation_name_acquired()
 * (an activation is being answered); a re-exec then waits.
 */
bool activation_is_settled(const struct activation *a);
/*
 * A count that moves with every change of what activation_serialize()
 * writes (the environment, a pending activation, a queued request): the
 * crash journal takes a snapshot when it moved (bus-journal.h).
 */
uint64_t activation_changes(const struct activation *a);
typedef void (*activation_child_fn)(void *userdata, pid_t pid, int err_fd, bool helper,
				    const char *name);
void activation_foreach_child(const struct activation *a, activation_child_fn fn,
			      void *userdata);
int activation_restore_child(struct activation *a, pid_t pid, int err_fd, bool helper,
			     const char *name);

/**
 * struct activation_pending_info - a pending activation, as re-exec carries it
 * @name:	the name waited for
 * @exec:	the Exec= it was started with, or NULL (waits for systemd itself)
 * @unit:	the SystemdService= it was started through, or NULL
 * @request_sent: the ActivationRequest went out to systemd
 * @deadline_usec: CLOCK_MONOTONIC time of its timeout (0: none)
 * @child_pid:	the spawned process still running, or 0
 */
struct activation_pending_info {
	const char *name;
	const char *exec;
	const char *unit;
	bool request_sent;
	uint64_t deadline_usec;
	pid_t child_pid;
};

typedef void (*activation_pending_fn)(void *userdata, const struct activation_pending_info *info,
				      size_t n_entries);
/* @sender: as given to activation_start(); NULL for a message of the bus for systemd. */
typedef void (*activation_entry_fn)(void *userdata, void *sender, struct message *msg,
				    bool auto_start);

/*
 * Calls @pending_fn for each pending activation in creation order, each
 * followed by @entry_fn for each of its queued requests in arrival order.
 */
void activation_foreach_pending(const struct activation *a, activation_pending_fn pending_fn,
				activation_entry_fn entry_fn, void *userdata);

/**
 * activation_restore_pending() - re-create a pending activation after a re-exec
 * @info:	as activation_foreach_pending() gave it
 *
 * Its timer fires at @info->deadline_usec (at once if that passed); a
 * @info->child_pid must have been restored with activation_restore_child().
 * Return: 0, -EEXIST (a pending activation of that name exists), -ENOENT
 * (no such child), -EINVAL, -ENOMEM.
 */
int activation_restore_pending(struct activation *a, const struct activation_pending_info *info);

/**
 * activation_restore_entry() - queue a request on a restored pending activation
 * @name:	its name (activation_restore_pending() first)
 * @sender:	the caller (the broker's peer), or NULL (a message for systemd)
 * @msg:	the request (a reference is taken)
 * @auto_start:	an auto-start message, not a StartServiceByName call
 *
 * Charged to the queue's bounds like a new request, but never refused by
 * them: it was admitted before. Return: 0, -ENOENT (no pending activation
 * of @name), -ENOMEM.
 */
int activation_restore_entry(struct activation *a, const char *name, void *sender,
			     struct message *msg, bool auto_start);
void activation_get_env(const struct activation *a, char *const **envp, size_t *np);
/* Replace the environment by @n "KEY=VALUE" strings (copied). 0 or -ENOMEM. */
int activation_restore_env(struct activation *a, const char *const *env, size_t n);

/*
 * The section of all that (state.h: STATE_TAG_ACTIVATION), activation-state.c.
 * A queued request's sender is written as its place in the state's peers
 * (@sender_index; a sender the state does not have makes the write fail
 * with -EINVAL). @with_children false: for another process (the fd store),
 * whose children they will not be: none is written, nor any pending
 * activation's child. The parsed form points into the reader; its fds are
 * named by number (struct activation_state_entry) until restored.
 */
struct state_reader;
struct state_writer;

#define ACTIVATION_STATE_VERSION 1u
#define ACTIVATION_STATE_NO_SENDER UINT32_MAX

struct activation_state_entry {
	uint32_t sender;		/* place in the peers, or ACTIVATION_STATE_NO_SENDER */
	bool auto_start;
	const uint8_t *header;
	size_t n_header;
	const uint8_t *body;
	size_t n_body;
	int *fds;
	size_t n_fds;
};

struct activation_state {
	const char **env;
	size_t n_env;
	struct activation_state_child {
		pid_t pid;
		int err_fd;
		bool helper;
		const char *name;
	} *children;
	size_t n_children;
	struct activation_state_pending {
		struct activation_pending_info info;
		struct activation_state_entry *entries;
		size_t n_entries;
	} *pendings;
	size_t n_pendings;
};

int activation_serialize(const struct activation *a, struct state_writer *w,
			 bool with_children, uint32_t (*sender_index)(const void *sender));
/* @n_senders: how many peers the state has. */
bool activation_state_read(struct state_reader *r, struct activation_state *st,
			   size_t n_senders);
void activation_state_deinit(struct activation_state *st);
/*
 * Restore it all; @senders: the restored peers, in the state's order. The
 * entries' fds are owned by their messages from then on, also on failure.
 * Return 0 or negative errno.
 */
int activation_restore(struct activation *a, struct activation_state *st,
		       void *const *senders);
