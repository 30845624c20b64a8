/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/**
 * DOC: dbus-daemon XML configuration
 *
 * bus_config_load() reads a busconfig file the way dbus-daemon 1.14 does
 * (expat, <include>/<includedir> followed recursively) and returns a
 * struct bus_config: a plain, typed model with every list in file order.
 * Nothing here touches the network or the running bus; the broker decides
 * what to do with the result (exit at start-up, keep the old config on
 * reload).
 *
 * Conventions:
 *  - Functions return 0 on success, a negative errno on fatal failure
 *    (-ENOMEM), and the positive BUS_CONFIG_E_INVALID when the input is
 *    invalid; then *errorp (if not NULL) receives a malloc'ed message of the
 *    form "FILE:LINE: message" (or "FILE: message" where no line applies).
 *  - Things dbus-daemon only warns about (unknown user in <policy user=>,
 *    a broken file inside an <includedir>, ...) are
 *    appended to bus_config.warnings as "FILE:LINE: message" and passed to
 *    bus_config_options.warn if set. They never fail the load.
 *  - In rules, a NULL string means "any" (the config file's "*").
 *
 * Deviations from dbus-daemon, all on the strict or deterministic side:
 *  - Text content of elements is stripped of surrounding whitespace, and
 *    <limit> values must be a complete decimal integer.
 *  - <includedir> reads its *.conf files in strcmp() order (dbus-daemon uses
 *    readdir() order, which is unspecified).
 *  - Files above BUS_CONFIG_FILE_MAX bytes, more than 4 * BUS_CONFIG_FILE_MAX
 *    bytes or 4096 files in one load, and include nesting deeper than
 *    BUS_CONFIG_INCLUDE_DEPTH_MAX are errors. Only regular files are read
 *    (a FIFO or device named by an <include> is an error, not a hang).
 *  - Include cycles are detected by device and inode, so "./a.conf" and
 *    "a.conf" are the same file.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include "util/list.h"

#define BUS_CONFIG_FILE_MAX (16U * 1024 * 1024)
#define BUS_CONFIG_INCLUDE_DEPTH_MAX 64

enum {
	_BUS_CONFIG_E_SUCCESS,
	/* The configuration is invalid, see *errorp. */
	BUS_CONFIG_E_INVALID,
};

/**
 * struct bus_config_limits - the <limit name="..."> values
 *
 * Every field has dbus-daemon's default when the file does not set it.
 * Timeouts are in milliseconds. reply_timeout is -1 by default and means
 * "never"; a configured value is always >= 0 (dbus-daemon treats 0 as never
 * as well). All configured values are >= 0; the ones dbus-daemon stores in an
 * int (timeouts and counts) are <= INT32_MAX. An unknown limit name is an
 * error, as in dbus-daemon 1.14. The container limits are those of dbus's
 * Containers1 draft, with its defaults (broker/containers/container.h).
 */
struct bus_config_limits {
	int64_t max_incoming_bytes;		/* 127 MiB */
	int64_t max_incoming_unix_fds;		/* 64 */
	int64_t max_outgoing_bytes;		/* 127 MiB */
	int64_t max_outgoing_unix_fds;		/* 64 */
	int64_t max_message_size;		/* 32 MiB */
	int64_t max_message_unix_fds;		/* 16 */
	int64_t service_start_timeout;		/* 25000 ms ("activation timeout") */
	int64_t auth_timeout;			/* 5000 ms */
	int64_t pending_fd_timeout;		/* 150000 ms */
	int64_t reply_timeout;			/* -1 = never */
	int64_t max_completed_connections;	/* 2048 */
	int64_t max_incomplete_connections;	/* 64 */
	int64_t max_connections_per_user;	/* 256 */
	int64_t max_pending_service_starts;	/* 512 */
	int64_t max_names_per_connection;	/* 512 */
	int64_t max_match_rules_per_connection;	/* 512 */
	int64_t max_replies_per_connection;	/* 128 */
	int64_t max_containers;			/* 512 */
	int64_t max_containers_per_user;	/* 16 */
	int64_t max_container_metadata_bytes;	/* 4096 */
	int64_t max_connections_per_container;	/* 8 */
	int64_t max_replies_per_container;	/* 512 (bus1-broker's) */
};

/* Fill @limits with dbus-daemon's defaults. */
void bus_config_limits_init(struct bus_config_limits *limits);

/**
 * struct bus_config_string - one entry of a string list
 * @link:	in the owning list
 * @file:	file the element was read from (owned by the config)
 * @line:	line of the element
 * @str:	the value
 */
struct bus_config_string {
	struct list_node link;
	const char *file;
	unsigned int line;
	char str[];
};

enum {
	/* Do not watch this directory for changes (dbus: NO_WATCH). */
	BUS_CONFIG_SERVICEDIR_NO_WATCH = 1U << 0,
	/* Only NAME.service may define NAME here (dbus: STRICT_NAMING). */
	BUS_CONFIG_SERVICEDIR_STRICT_NAMING = 1U << 1,
};

/**
 * struct bus_config_servicedir - one service directory, in search order
 * @flags:	BUS_CONFIG_SERVICEDIR_* flags
 * @path:	absolute path (relative <servicedir> resolved against its file)
 *
 * Duplicates are dropped (the first occurrence keeps its place), as
 * dbus-daemon does. <standard_session_servicedirs/> and
 * <standard_system_servicedirs/> are expanded here to the real list.
 */
struct bus_config_servicedir {
	struct list_node link;
	unsigned int flags;
	char path[];
};

/**
 * enum bus_policy_scope - which connections a <policy> applies to
 *
 * Precedence, lowest first, as dbus-daemon applies them: DEFAULT, GROUP,
 * USER, CONSOLE, MANDATORY. Within one scope the last matching rule in file
 * order wins.
 */
enum bus_policy_scope {
	BUS_POLICY_SCOPE_DEFAULT,	/* context="default" */
	BUS_POLICY_SCOPE_GROUP,		/* group="..." ; scope_id = gid */
	BUS_POLICY_SCOPE_USER,		/* user="..." ; scope_id = uid */
	BUS_POLICY_SCOPE_CONSOLE,	/* at_console="true|false" ; scope_id = 1|0 */
	BUS_POLICY_SCOPE_MANDATORY,	/* context="mandatory" */
};

enum bus_policy_rule_type {
	BUS_POLICY_RULE_SEND,		/* any send_* attribute */
	BUS_POLICY_RULE_RECEIVE,	/* any receive_* attribute, or eavesdrop alone */
	BUS_POLICY_RULE_OWN,		/* own= or own_prefix= */
	BUS_POLICY_RULE_USER,		/* user= : may this uid connect */
	BUS_POLICY_RULE_GROUP,		/* group= : may a member of this gid connect */
};

/* A boolean attribute that may be absent. */
enum bus_tristate {
	BUS_TRISTATE_UNSET = 0,
	BUS_TRISTATE_FALSE,
	BUS_TRISTATE_TRUE,
};

/* Values of bus_policy_rule.message_type; the D-Bus wire numbers. */
enum {
	BUS_MESSAGE_TYPE_ANY = 0,	/* attribute absent or "*" */
	BUS_MESSAGE_TYPE_METHOD_CALL = 1,
	BUS_MESSAGE_TYPE_METHOD_RETURN = 2,
	BUS_MESSAGE_TYPE_ERROR = 3,
	BUS_MESSAGE_TYPE_SIGNAL = 4,
};

/**
 * struct bus_policy_rule - one <allow> or <deny>, in file order
 * @link:	in bus_config.rules
 * @file, @line: where it was written (for "denied by rule FILE:LINE")
 * @allow:	true for <allow>, false for <deny>
 * @type:	what the rule is about
 * @scope, @scope_id: the enclosing <policy> (see enum bus_policy_scope)
 *
 * SEND / RECEIVE:
 * @interface, @member, @error, @path: message fields to match, NULL = any
 * @name:	send_destination / send_destination_prefix (SEND) or
 *		receive_sender (RECEIVE); NULL = any
 * @name_is_prefix: @name came from send_destination_prefix (SEND only)
 * @message_type: BUS_MESSAGE_TYPE_*
 * @requested_reply: send_requested_reply / receive_requested_reply
 * @eavesdrop:	eavesdrop=
 * @broadcast:	send_broadcast= (SEND only)
 * @min_fds, @max_fds: number of unix fds the message must carry; default
 *		0 and BUS_POLICY_MAX_FDS (matches everything)
 * @log:	log="true": the broker logs denials by this rule
 *
 * OWN:
 * @name:	own= (NULL for own="*") or own_prefix= (@name_is_prefix set)
 *
 * USER / GROUP:
 * @id:		uid or gid; @id_any set for user="*" / group="*"
 *
 * Rules naming an unknown user or group are dropped with a warning, and so
 * are all rules of a <policy user=/group=> naming an unknown one, as
 * dbus-daemon does.
 */
struct bus_policy_rule {
	struct list_node link;
	const char *file;
	unsigned int line;
	bool allow;
	enum bus_policy_rule_type type;
	enum bus_policy_scope scope;
	uint32_t scope_id;

	char *interface;
	char *member;
	char *error;
	char *path;
	char *name;
	bool name_is_prefix;
	int message_type;
	enum bus_tristate requested_reply;
	enum bus_tristate eavesdrop;
	enum bus_tristate broadcast;
	uint32_t min_fds;
	uint32_t max_fds;
	bool log;

	uint32_t id;
	bool id_any;
};

/* dbus' DBUS_MAXIMUM_MESSAGE_UNIX_FDS (2^27 / 4): the upper bound of min_fds/max_fds. */
#define BUS_POLICY_MAX_FDS (1U << 25)

/* One <selinux><associate own="NAME" context="CTX"/></selinux>. */
struct bus_config_associate {
	struct list_node link;
	char *own;
	char *context;
};

enum bus_config_apparmor {
	BUS_CONFIG_APPARMOR_UNSET = 0,	/* no <apparmor mode=...> seen */
	BUS_CONFIG_APPARMOR_ENABLED,
	BUS_CONFIG_APPARMOR_DISABLED,
	BUS_CONFIG_APPARMOR_REQUIRED,
};

/**
 * struct bus_config - a fully loaded configuration (top file + includes)
 *
 * Scalars: the last value seen wins (includes count at their position).
 * Lists are in file order with includes spliced in where they occur.
 *
 * @type:	<type> ("session", "system" or anything), NULL if absent
 * @user:	<user>, NULL if absent
 * @pidfile:	<pidfile>, NULL if absent
 * @servicehelper: <servicehelper>, absolute, NULL if absent
 * @fork, @keep_umask, @syslog, @allow_anonymous: element present
 * @apparmor:	last <apparmor mode=>
 * @listen:	<listen> addresses (struct bus_config_string), at least one
 *		in a successfully loaded top-level file
 * @auth:	<auth> mechanisms (struct bus_config_string)
 * @conf_dirs:	<includedir> directories that existed (struct
 *		bus_config_string), for the broker to watch for reloads
 * @files:	every file read, top file first (struct bus_config_string)
 * @servicedirs: struct bus_config_servicedir, in search order, no duplicates
 * @limits:	see struct bus_config_limits
 * @rules:	every policy rule of every <policy>, file order (struct
 *		bus_policy_rule)
 * @associations: struct bus_config_associate (SELinux), file order
 * @warnings:	struct bus_config_string, each "FILE:LINE: message" (the
 *		entries' own file/line fields are NULL/0)
 */
struct bus_config {
	char *type;
	char *user;
	char *pidfile;
	char *servicehelper;
	bool fork;
	bool keep_umask;
	bool syslog;
	bool allow_anonymous;
	enum bus_config_apparmor apparmor;

	struct list_node listen;
	struct list_node auth;
	struct list_node conf_dirs;
	struct list_node files;
	struct list_node servicedirs;
	struct bus_config_limits limits;
	struct list_node rules;
	struct list_node associations;
	struct list_node warnings;
};

/**
 * struct bus_config_options - how to load (all fields optional, zero = default)
 * @selinux_enabled: <include if_selinux_enabled="yes"> files are read only
 *		when set (the broker sets it when SELinux is active)
 * @selinux_root: the SELinux policy root for selinux_root_relative="yes";
 *		such an include is an error when NULL and it is not skipped
 * @no_listen_ok: do not require a <listen> element (dbus-daemon always does;
 *		for tests and tools)
 * @warn:	called for every warning, in addition to bus_config.warnings
 */
struct bus_config_options {
	bool selinux_enabled;
	const char *selinux_root;
	bool no_listen_ok;
	void (*warn)(void *userdata, const char *message);
	void *userdata;
};

/**
 * bus_config_load() - read a configuration file and everything it includes
 * @configp:	on success a new config, owned by the caller
 * @path:	the file; relative includes resolve against its directory
 * @opts:	options, or NULL for defaults
 * @errorp:	on BUS_CONFIG_E_INVALID a malloc'ed "FILE:LINE: message"
 *
 * A top file that cannot be read is BUS_CONFIG_E_INVALID ("FILE: No such
 * file or directory"). Return: 0, BUS_CONFIG_E_INVALID or negative errno.
 */
int bus_config_load(struct bus_config **configp, const char *path,
		    const struct bus_config_options *opts, char **errorp);

/**
 * bus_config_load_buffer() - as bus_config_load(), from memory
 * @data, @size: the top file's content (need not be NUL-terminated)
 * @path:	the name used in messages and for resolving relative includes;
 *		it need not exist
 */
int bus_config_load_buffer(struct bus_config **configp, const void *data, size_t size,
			   const char *path, const struct bus_config_options *opts,
			   char **errorp);

struct bus_config *bus_config_free(struct bus_config *config);
DEFINE_CLEANUP_FUNC(struct bus_config *, bus_config_free);

/* Name of a message type, for messages ("signal", "*" for ANY). */
const char *bus_message_type_to_string(int type);
/* "method_call" etc. to BUS_MESSAGE_TYPE_*, or -1 if unknown ("*" is ANY). */
int bus_message_type_from_string(const char *s);

/**
 * bus_config_standard_session_servicedirs() - dbus-daemon's session list
 * @dirs:	list head; struct bus_config_servicedir entries are appended
 *		(skipping any already present)
 *
 * Computed from XDG_RUNTIME_DIR, XDG_DATA_HOME (or the user's home),
 * XDG_DATA_DIRS and /usr/share as dbus-daemon 1.14 does on Linux:
 * $XDG_RUNTIME_DIR/dbus-1/services first (NO_WATCH | STRICT_NAMING; only if
 * that directory is ours and not group/other-writable; unlike dbus-daemon it
 * is not created), then $XDG_DATA_HOME/dbus-1/services, then
 * DIR/dbus-1/services for each XDG_DATA_DIRS entry (default
 * /usr/local/share:/usr/share), then /usr/share/dbus-1/services. Exposed for tests and for
 * the broker's activation environment. Return: 0 or -ENOMEM.
 */
int bus_config_standard_session_servicedirs(struct list_node *dirs);

/*
 * Same for the system bus, a fixed list: /usr/local/share, /usr/share and
 * /lib, each + /dbus-1/system-services. Return: 0 or -ENOMEM.
 */
int bus_config_standard_system_servicedirs(struct list_node *dirs);

/* Free a list of struct bus_config_servicedir / struct bus_config_string. */
void bus_config_servicedirs_clear(struct list_node *dirs);
void bus_config_strings_clear(struct list_node *strings);

/* --------------------------------------------------------------------- */

/**
 * DOC: D-Bus service files
 *
 * A .service file is a key file with one [D-BUS Service] group:
 *   Name=org.example.Foo          (required, a valid well-known bus name)
 *   Exec=/usr/bin/foo --arg       (required, as dbus-daemon requires it)
 *   User=foo                      (required by the system bus for exec)
 *   SystemdService=foo.service    (activate through systemd)
 *   AssumedAppArmorLabel=label
 * Comments start with '#'; other groups and unknown keys are ignored as
 * dbus-daemon does. Parse errors are BUS_CONFIG_E_INVALID with
 * "FILE:LINE: message".
 */

/**
 * struct bus_service - one parsed .service file
 * @path:	the file it came from
 * @name:	Name=
 * @exec:	Exec= (as written; the broker splits it)
 * @user:	User=, or NULL
 * @systemd_service: SystemdService=, or NULL
 * @apparmor_label: AssumedAppArmorLabel=, or NULL
 */
struct bus_service {
	char *path;
	char *name;
	char *exec;
	char *user;
	char *systemd_service;
	char *apparmor_label;
};

int bus_service_parse_buffer(struct bus_service **servicep, const void *data, size_t size,
			     const char *path, char **errorp);
int bus_service_parse_file(struct bus_service **servicep, const char *path, char **errorp);
struct bus_service *bus_service_free(struct bus_service *service);
DEFINE_CLEANUP_FUNC(struct bus_service *, bus_service_free);

/**
 * struct bus_services - the activatable names of a list of service directories
 *
 * Built by bus_services_load() from bus_config.servicedirs: directories in
 * order, *.service files in strcmp() order inside each; the first definition
 * of a name wins. Skipped files are reported in one of two lists (struct
 * bus_config_string), as dbus-daemon 1.14 reports them:
 *  - @warnings, also passed to warn(): what dbus-daemon logs. A file in a
 *    STRICT_NAMING directory whose name is not NAME.service ("Service file
 *    \"PATH\" should have been named \"NAME.service\": not loading it"), and
 *    the end of a scan past the file limit.
 *  - @notes, not passed to warn(): what dbus-daemon skips silently (only its
 *    verbose debug build prints it). Invalid or unreadable files ("FILE:LINE:
 *    message"), unreadable directories, and a second file for a name already
 *    defined ("PATH: Service NAME already exists in activation entry list
 *    (FIRST-PATH), ignoring"), e.g. two notification daemons installed.
 * Missing directories are ignored. Lookup is by binary search;
 * bus_services_get(i) iterates in name order (ListActivatableNames).
 */
struct bus_services {
	struct bus_service **by_name;	/* sorted by name */
	size_t n_services;
	struct list_node warnings;
	struct list_node notes;
};

int bus_services_load(struct bus_services **servicesp, const struct list_node *servicedirs,
		      void (*warn)(void *userdata, const char *message), void *userdata);
const struct bus_service *bus_services_lookup(const struct bus_services *services,
					      const char *name);
static inline const struct bus_service *bus_services_get(const struct bus_services *services,
							 size_t i)
{
	return i < services->n_services ? services->by_name[i] : NULL;
}
struct bus_services *bus_services_free(struct bus_services *services);
DEFINE_CLEANUP_FUNC(struct bus_services *, bus_services_free);
