/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/**
 * DOC: The bus
 *
 * struct bus is the state of one bus that every part of the broker reads:
 * every peer, the name registry, the match rules, the pending replies, the
 * user accounting, the policy, the activation state and the limits of the
 * configuration in force. Every object reaches it through a back pointer,
 * never through a global (the bus' serial counter is in it too).
 *
 * It does not own the process: the loop (broker.h) creates the event loop,
 * the listening sockets, the signal handlers, the configuration reloader and
 * the transports, and lends the bus what it needs of them (bus_attach(),
 * struct bus_loop_ops, bus_add_transport()).
 *
 * Transports (struct bus_transport): the socket connections (connection.h)
 * and the bus1 transport of native clients (native.h) each register once
 * with the bus, with what the bus asks of every transport: write out what
 * is queued, report their statistics, hear of a policy reload. The bus
 * knows no transport by name; a part that needs one finds it by its table
 * (socket_transport_of(), native_of_bus()).
 *
 * The loop: one epoll set (sd-event). Every socket connection has one io
 * source (edge-triggered: connection.c), the bus1 transport one for all
 * native clients. Input is read and
 * dispatched at once (routing is synchronous); output is queued on the
 * destinations. One flush rule for every input: the io callback of a socket
 * connection and of the bus1 transport flushes every transport when its
 * input is dispatched (bus_flush_now()), so that all messages a batch of
 * input produces for one destination leave together (one sendmsg(), one
 * multicast SEND), in the turn of the loop that read it; output produced
 * elsewhere (timers, signals) is flushed by the bus' one low-priority defer
 * source. The same flush closes peers that do not read (overflow) and frees
 * closed peers.
 */

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <systemd/sd-event.h>
#include "broker/objects/log-limit.h"
#include "broker/objects/match.h"
#include "broker/objects/name.h"
#include "broker/objects/peer.h"
#include "broker/objects/user.h"
#include "conf/config.h"
#include "util/list.h"
#include "util/macro.h"

struct activation;
struct apparmor;
struct selinux;
struct bus;
struct bus_config;
struct bus_policy;
struct peer;
struct message;
struct bus_transport;
struct bus_part;
struct driver_interface;

/**
 * struct bus_part - the state a feature keeps for the whole bus
 *
 * Embedded in the feature's own object (the container instances' registry),
 * added by whoever set the feature up (broker.c) and freed by the bus with
 * its own state: after every peer closed and was freed (their attachments
 * may point into it), before the bus' log limits, which its lines may still
 * use. The bus knows no feature by name.
 */
struct bus_part_ops {
	void (*free)(struct bus_part *part);
};

struct bus_part {
	const struct bus_part_ops *ops;
	struct list_node link;		/* in bus->parts */
};

/* What the transports hold, for Debug.Stats. */
struct bus_transport_stats {
	size_t queue_used_bytes;	/* output queue entries in use */
	size_t queue_cached_bytes;	/* and kept for reuse */
};

/**
 * struct bus_transport_ops - what the bus asks of every transport
 * @flush:	write out what is queued (end of a dispatch, bus_flush_now());
 *		return whether there was anything (it may have produced more)
 * @stats:	add the transport's figures to @st
 * @policy_changed: the policy was reloaded (NULL: nothing to do)
 */
struct bus_transport_ops {
	bool (*flush)(struct bus_transport *transport);
	void (*stats)(const struct bus_transport *transport, struct bus_transport_stats *st);
	void (*policy_changed)(struct bus_transport *transport);
};

/* Embedded in the transport's own object, which gets back with container_of(). */
struct bus_transport {
	const struct bus_transport_ops *ops;
	struct list_node link;		/* bus->transports */
};

/**
 * struct bus_loop_ops - what the bus asks of the loop that owns it
 * @resume_listeners:	fewer incomplete connections than
 *			max_incomplete_connections: accept again
 * @reload_config:	reload the configuration file now (ReloadConfig):
 *			0, BUS_E_INVALID_CONFIG (invalid: *@errorp says why,
 *			the old one stays) or negative errno
 * @serialize_peer:	write @peer's section of the state (peer-state.h),
 *			for the crash journal's record of its Hello
 */
/* Positive codes of bus_init() and of struct bus_loop_ops. */
enum {
	_BUS_E_SUCCESS,
	/* The configuration cannot be served (*errorp says why). */
	BUS_E_INVALID_CONFIG,
};

struct bus_loop_ops {
	void (*resume_listeners)(struct bus *bus);
	int (*reload_config)(struct bus *bus, char **errorp);
	int (*serialize_peer)(struct peer *peer, struct state_writer *w);
};

struct name_registry;
struct journal;
struct state_writer;
struct match_registry;
struct reply_registry;
struct user_registry;

/*
 * The accuracy of the timers of the configured limits (auth_timeout,
 * pending_fd_timeout, reply_timeout), given in milliseconds: sd-event's
 * default of 250 ms made them fire that much later than dbus-daemon's.
 */
#define BUS_TIMER_ACCURACY_USEC 1000ULL

/*
 * Whatever the configuration says, one connection's output queue never holds
 * more than this: a client that stops reading is disconnected at this point
 * instead of making the bus grow (session.conf allows 1 GB).
 */
#define BUS_QUEUE_BYTES_CAP (256ULL * 1024 * 1024)
#define BUS_QUEUE_FDS_CAP 1024ULL

struct bus {
	const struct bus_loop_ops *loop;
	sd_event *event;		/* the loop's (bus_attach()), NULL before */
	sd_event_source *flush;		/* defer: bus_flush_now() after a timer's output */
	sd_event_source *reply_timer;	/* reply_timeout of the oldest pending call */

	char guid[33];
	char machine_id[33];
	bool systemd_activation;
	bool containers_enabled;	/* --containers: Containers1 is provided */
	bool allow_anonymous;
	unsigned int auth_mechs;	/* SASL_MECH_* the <auth> elements allow */
	uid_t uid;			/* of the bus process */
	pid_t pid;
	int pidfd;			/* of the bus process (its ProcessFD), -1: none yet */

	struct bus_config_limits limits;
	struct activation *activation;	/* .service files, pending activations (activation.h) */
	struct bus_policy *policy;	/* compiled <policy> rules, NULL: allow all */
	struct apparmor *apparmor;	/* AppArmor mediation (apparmor.h), NULL: none */
	struct selinux *selinux;	/* SELinux mediation (selinux.h), NULL: none */
	struct list_node transports;	/* struct bus_transport, registered by the loop */
	struct list_node parts;		/* struct bus_part, freed with the bus */
	/* the driver's interfaces besides its own (driver_add_interface()) */
	const struct driver_interface *driver_interfaces[4];
	size_t n_driver_interfaces;

	struct list_node peers;		/* every peer, in accept order */
	struct list_node monitors;	/* peers that called BecomeMonitor */
	struct list_node policy_modules;	/* struct policy_module (policy.h) */
	struct list_node dead_list;	/* closed peers, freed after dispatch */
	struct list_node overflow_list;	/* peers to close for not reading */
	struct peer *dispatching;	/* whose message is being routed: the actor */
	uint64_t next_id;		/* unique names are :1.<id>, never reused */
	uint32_t serial;		/* of the last message the bus sent */

	struct name_registry *names;
	struct match_registry *matches;	/* AddMatch rules of every peer */
	struct match_registry *monitor_matches;	/* BecomeMonitor filters */
	size_t n_eavesdrop_rules;	/* AddMatch rules with eavesdrop=true */
	/*
	 * The peer whose unique name is being removed, while its own
	 * NameOwnerChanged goes out: container filters still know it then.
	 */
	struct peer *peer_leaving;
	struct reply_registry *replies;
	struct container_registry *containers;	/* Containers1 instances (container.h) */
	struct user_registry *users;
	struct journal *journal;	/* crash survival (journal.h, bus-journal.h), or NULL */
	bool replaying;			/* the journal is replayed: nothing goes out */
	uint64_t journal_activation;	/* activation_changes() at the last snapshot */

	/*
	 * per-peer output queue bounds (see peer_queue()): max_outgoing_bytes
	 * and _unix_fds, but never above BUS_QUEUE_*_CAP
	 */
	size_t max_queued_bytes;
	size_t max_queued_fds;

	/* statistics for Debug.Stats (driver.c has what each means) */
	uint64_t n_messages;
	unsigned int n_incomplete;
	unsigned int n_active;		/* after Hello, monitors included */
	struct match_peaks match_peaks;	/* of ->matches and ->monitor_matches */
	uint32_t stats_serial;		/* GetStats calls so far */
	uint32_t conn_stats_serial;	/* GetConnectionStats calls so far */
	struct refusal_counts refusals;	/* of every connection (peer_count_refusal()) */
	struct log_limits log_limits;	/* the log lines clients cause (log-limit.h) */
};

/**
 * bus_init() - set up the state of a bus
 * @bus:	zeroed, embedded in its owner
 * @config:	the configuration (borrowed; NULL: the defaults, with --address)
 * @systemd_activation: --systemd-activation
 * @loop:	the owner's callbacks
 * @errorp:	set to a message (malloc()ed) when the configuration is invalid
 *
 * Nothing of the event loop yet: it must not cross --fork (bus_attach()).
 * Return: 0, BUS_E_INVALID_CONFIG (an unsupported <auth> mechanism, or an
 * LSM the bus must mediate with is unusable: *@errorp) or negative errno;
 * call bus_deinit() in every case.
 */
int bus_init(struct bus *bus, const struct bus_config *config, bool systemd_activation,
	     const struct bus_loop_ops *loop, char **errorp);

/* Close every peer, release everything (detaching from the loop). */
void bus_deinit(struct bus *bus);

/*
 * Attach to the loop's @event: the deferred flush, the activation's child
 * sources, SELinux's policy notifications. Return 0 or negative errno.
 */
int bus_attach(struct bus *bus, sd_event *event);

/*
 * A transport joins the bus (for as long as the bus lives, or until
 * bus_remove_transport()): its flush, statistics and policy hook apply.
 */
void bus_add_transport(struct bus *bus, struct bus_transport *transport);
void bus_remove_transport(struct bus_transport *transport);
/* The transport of the bus whose table is @ops, or NULL. */
struct bus_transport *bus_find_transport(struct bus *bus, const struct bus_transport_ops *ops);
/* A feature's state joins the bus, which frees it (struct bus_part). */
void bus_add_part(struct bus *bus, struct bus_part *part, const struct bus_part_ops *ops);

/* The figures of every transport, summed. */
void bus_transport_stats(struct bus *bus, struct bus_transport_stats *st);

/* DBUS_STARTER_ADDRESS of activated services: every listener's address. */
int bus_set_address(struct bus *bus, const char *address);

/*
 * Apply the parts of a configuration that can change at runtime: limits,
 * policy (every peer's rules are rebuilt), service directories.
 */
void bus_apply_config(struct bus *bus, const struct bus_config *config);

/*
 * After every reload attempt (ReloadConfig, SIGHUP, a change in a watched
 * directory), applied or not: broadcast ActivatableServicesChanged, as
 * dbus-daemon does.
 */
void bus_config_reloaded(struct bus *bus);

/*
 * Flush every transport, close the peers that do not read and free closed
 * ones now (end of an io callback: one sd-event iteration per wakeup).
 */
void bus_flush_now(struct bus *bus);

/* A transport has output queued: make sure the bus flushes after this batch. */
void bus_schedule_flush(struct bus *bus);

/*
 * One peer less that has not finished authenticating (it did, or it
 * went away): listeners paused at max_incomplete_connections resume.
 */
void bus_incomplete_done(struct bus *bus);

/* The peer owning @name (unique or primary owner of a well-known name), or NULL. */
static inline struct peer *bus_resolve(struct bus *bus, const char *name)
{
	struct name_owner *o = name_registry_resolve(bus->names, name);
	struct peer *c;

	if (!o)
		return NULL;
	c = container_of(o, struct peer, owner);
	return c->closed ? NULL : c;
}

/* Next serial for a message the bus sends (bus-wide counter, never 0). */
static inline uint32_t bus_next_serial(struct bus *bus)
{
	if (++bus->serial == 0)
		bus->serial = 1;
	return bus->serial;
}

/*
 * Re-exec (state.h): the bus' identity and counters, section
 * STATE_TAG_BUS. The parsed form points into the reader.
 */
struct state_reader;
struct state_writer;

#define BUS_STATE_VERSION 2u

struct bus_state {
	const char *guid;
	uint64_t next_id;
	uint32_t serial;
	uint64_t n_messages;
	uint32_t peak_names;
	uint32_t peak_names_per_conn;
	uint32_t peak_matches;
	uint32_t peak_matches_per_conn;
	uint32_t stats_serial;
	uint32_t conn_stats_serial;
	uid_t uid;
	struct refusal_counts refusals;	/* version 2 */
	uint64_t n_log_suppressed;	/* version 2 */
};

void bus_serialize(const struct bus *bus, struct state_writer *w);
/* Return whether it is there and sound (else the reader's error is set). */
bool bus_state_read(struct state_reader *r, struct bus_state *st);
void bus_restore_state(struct bus *bus, const struct bus_state *st);

/* Reload the configuration file (ReloadConfig): see struct bus_loop_ops. */
static inline int bus_reload_config(struct bus *bus, char **errorp)
{
	return bus->loop->reload_config(bus, errorp);
}
