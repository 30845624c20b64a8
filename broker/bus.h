/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/**
 * DOC: The bus object
 *
 * struct bus owns everything of one running bus: the sd-event loop, the
 * listeners, every peer, the name registry, the match rules, the user
 * accounting and the configuration. There is exactly one per process; every
 * object reaches it through a back pointer, never through a global (the
 * bus' serial counter and the cache of socket queue entries are in it too).
 *
 * The loop: one epoll set (sd-event). Every socket connection has one io
 * source, the bus1 transport one for all native clients. Input is read and
 * dispatched at once (routing is synchronous); output is queued on the
 * destinations. A socket connection's io callback writes out every dirty
 * connection when its input is dispatched (bus_flush_now()), so that all
 * messages a batch of input produces for one destination leave in one
 * sendmsg(); output produced elsewhere (timers, the bus1 input) is flushed by
 * one low-priority defer source. The same flush closes peers that do not
 * read (overflow) and frees closed peers.
 */

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <systemd/sd-event.h>
#include "broker/connection.h"
#include "conf/config.h"
#include "util/list.h"
#include "util/macro.h"

struct activation;
struct native;
struct bus_config;
struct config_reload;
struct bus_policy;
struct bus_services;
struct connection;
struct peer;
struct message;

/**
 * struct bus_options - how to start the bus
 * @config:		loaded configuration (borrowed; may be NULL with @address)
 * @config_file:	its path, for ReloadConfig / SIGHUP (may be NULL)
 * @address:		--address, replaces the config's <listen> elements
 * @systemd_activation:	--systemd-activation
 */
struct bus_options {
	const struct bus_config *config;
	const char *config_file;
	const char *address;
	bool systemd_activation;
};

struct name_registry;
struct match_registry;
struct reply_registry;
struct user_registry;

struct bus {
	sd_event *event;
	sd_event_source *sig_term;
	sd_event_source *sig_int;
	sd_event_source *sig_hup;
	sd_event_source *flush;		/* defer: write out dirty connections */
	sd_event_source *reply_timer;	/* reply_timeout of the oldest pending call */

	char guid[33];
	char machine_id[33];
	char *address;			/* printable: every listener's address, ';'-joined */
	char *error;			/* start-up error message */
	char *config_file;
	char *bus_type;			/* "session", "system", ... or NULL */
	bool systemd_activation;
	bool allow_anonymous;
	unsigned int auth_mechs;	/* SASL_MECH_* the <auth> elements allow */
	uid_t uid;			/* of the bus process */
	pid_t pid;
	int pidfd;			/* of the bus process (its ProcessFD), -1: none yet */

	struct bus_config_limits limits;
	struct activation *activation;	/* .service files, pending activations (activation.h) */
	struct config_reload *reload;	/* ReloadConfig, SIGHUP, inotify (reload.h) */
	struct bus_policy *policy;	/* compiled <policy> rules, NULL: allow all */
	struct native *native;		/* bus1 transport (native.h), NULL: sockets only */

	struct list_node listeners;
	struct list_node peers;		/* every peer, in accept order */
	struct list_node flush_list;	/* socket connections with output queued */
	/*
	 * True while connection_io() dispatches a connection's input: it flushes
	 * the whole flush list when done, so queueing then needs no deferred
	 * flush (which would cost two sd-event updates per message).
	 */
	bool dispatching_input;
	struct list_node monitors;	/* peers that called BecomeMonitor */
	struct list_node dead_list;	/* closed peers, freed after dispatch */
	struct list_node overflow_list;	/* peers to close for not reading */
	uint64_t next_id;		/* unique names are :1.<id>, never reused */
	uint32_t serial;		/* of the last message the bus sent */
	struct delivery_cache deliveries;	/* socket queue entries (connection.h) */

	struct name_registry *names;
	struct match_registry *matches;	/* AddMatch rules of every peer */
	struct match_registry *monitor_matches;	/* BecomeMonitor filters */
	size_t n_eavesdrop_rules;	/* AddMatch rules with eavesdrop=true */
	struct reply_registry *replies;
	struct user_registry *users;

	/* per-peer output queue bounds (see peer_queue()) */
	size_t max_queued_bytes;
	size_t max_queued_fds;

	/* statistics for Debug.Stats (driver.c has what each means) */
	uint64_t n_messages;
	unsigned int n_incomplete;
	unsigned int n_active;		/* after Hello, monitors included */
	unsigned int peak_names;
	unsigned int peak_names_per_conn;
	unsigned int peak_matches;
	unsigned int peak_matches_per_conn;
	uint32_t stats_serial;		/* GetStats calls so far */
	uint32_t conn_stats_serial;	/* GetConnectionStats calls so far */
};

/**
 * bus_new() - create the bus and its listening sockets
 *
 * The event loop is not created here (it must not cross --fork); see
 * bus_run(). Return: 0, negative errno, or 1 on an invalid configuration or
 * address (bus_get_error()); *busp is set in all cases where it could be
 * allocated, so the error can be read.
 */
int bus_new(struct bus **busp, const struct bus_options *opts);
struct bus *bus_free(struct bus *bus);
DEFINE_CLEANUP_FUNC(struct bus *, bus_free);

const char *bus_get_address(struct bus *bus);
const char *bus_get_error(struct bus *bus);

/* Create the event loop, attach the listeners and run until SIGTERM/SIGINT. */
int bus_run(struct bus *bus);

/*
 * A listener accepted @fd (owned by the callee from now on); @nonce: the
 * ADDRESS_NONCE_LEN bytes the client must send first (nonce-tcp), or NULL.
 */
int bus_accept(struct bus *bus, int fd, const uint8_t *nonce);

/*
 * Write out every dirty connection, close overflowing ones and free closed
 * ones now (end of an io callback: one sd-event iteration per wakeup).
 */
void bus_flush_now(struct bus *bus);

/* @conn has output queued: make sure it is flushed after this batch. */
void bus_schedule_flush(struct bus *bus, struct connection *conn);

/*
 * One peer less that has not finished authenticating (it did, or it
 * went away): listeners paused at max_incomplete_connections resume.
 */
void bus_incomplete_done(struct bus *bus);

/* The peer owning @name (unique or primary owner of a well-known name), or NULL. */
struct peer *bus_resolve(struct bus *bus, const char *name);

/* Next serial for a message the bus sends (bus-wide counter, never 0). */
uint32_t bus_next_serial(struct bus *bus);


/* Reload the configuration file (SIGHUP, ReloadConfig). Return 0, 1 (invalid) or -errno. */
int bus_reload_config(struct bus *bus, char **errorp);
