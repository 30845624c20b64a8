/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/**
 * DOC: Container instances (org.freedesktop.DBus.Containers1)
 *
 * A container instance is what dbus's Containers1 draft calls one: a
 * listening socket of its own, made by AddServer for a sandbox (a Flatpak
 * app, say), whose connections all belong to the instance. The bus knows
 * every such connection's instance and tells anyone who asks
 * (GetConnectionInstance, GetConnectionCredentials), so a service learns
 * which app calls it from the bus rather than from /proc. The identity
 * cannot be forged: it is the socket the connection was accepted on, which
 * only the bus listens on, and only processes of the creator's uid may
 * connect to it (SO_PEERCRED at accept, EXTERNAL only).
 *
 * Each instance has an object path, /org/freedesktop/DBus/Containers1/c<32
 * random hex digits> (the draft's c<N> would tell a sandbox how many came
 * before it, and let it guess others'), a type (an interface-like name,
 * e.g. org.flatpak), a name (e.g. the app id), opaque metadata (a{sv},
 * returned as given) and the credentials of its creator at creation. It
 * ends once it no longer listens (StopListening, StopInstance, its creator
 * gone) and its last connection has gone; InstanceRemoved is broadcast then,
 * to the connections that may know of it: every connection without a
 * filter (a filtered connection learns of no other sandbox, as behind
 * xdg-dbus-proxy).
 * StopInstance also closes its connections; so does the creator's
 * disconnection when AddServer asked for it (StopOnDisconnect).
 *
 * The socket is a file named dbus-<10 random characters> in
 * $XDG_RUNTIME_DIR/dbus-1/containers, or, for a bus without
 * XDG_RUNTIME_DIR, /run/dbus/containers when it runs as root and
 * $TMPDIR/dbus-1/containers otherwise (the directories are made, mode 0700
 * resp. 0755 for /run/dbus/containers).
 *
 * Limits (<limit>, the draft's defaults): max_containers (512),
 * max_containers_per_user (16), max_container_metadata_bytes (4096: the
 * metadata's marshalled size plus the type's and name's lengths) and
 * max_connections_per_container (8, counted from accept: the connection
 * beyond it is closed at once); and bus1-broker's max_replies_per_container
 * (512: the calls its connections await together; one more is
 * LimitsExceeded, so a flooding sandbox cannot hold the bus' reply tracking
 * with all its connections).
 *
 * Instances cross a re-exec in their own section of the state
 * (container-state.c), written only when there is one.
 *
 * Ownership: the bus owns the registry (bus->containers); the registry owns
 * the instances; an instance owns its listener. A member's membership (struct
 * container_member, with its filter's view) hangs on its peer as an
 * attachment (peer.h) and is linked into the instance's member list; the
 * instance points at its creator peer while it is connected, and the
 * creator carries an attachment that stops its instances when it goes.
 */

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include "broker/objects/log-limit.h"
#include "broker/objects/peer.h"
#include "broker/policy/policy.h"
#include "util/list.h"

struct bus;
struct container_filter;
struct dc_reader;
struct filter_view;
struct filter_view_state;
struct dc_writer;
struct listener;
struct message;

#define CONTAINER_PATH_PREFIX "/org/freedesktop/DBus/Containers1/c"
#define CONTAINER_PATH_RANDOM_BYTES 16

struct container {
	struct container_registry *registry;
	struct list_node link;		/* in registry->instances */
	uint64_t id;			/* AddServer's count: the order of creation */
	char *path;			/* CONTAINER_PATH_PREFIX, random hex digits */
	char *type;
	char *name;
	void *metadata;			/* a{sv}, marshalled at offset 0, native endian */
	size_t n_metadata;
	void *creator_creds;		/* a{sv} as GetConnectionCredentials, likewise */
	size_t n_creator_creds;
	uid_t creator_uid;
	struct peer *creator;		/* NULL once it disconnected */
	struct listener *listener;	/* NULL once it stopped listening */
	char *socket_path;
	struct list_node members;	/* struct container_member, ->link */
	unsigned int n_members;
	struct container_filter *filter;	/* NULL: <policy> only, as in the draft */
	bool stop_on_disconnect;
	bool closing;			/* StopInstance closes its members: no end yet */
	struct log_limit filter_log;	/* --log: the lines of its filter's refusals */
	struct peer_group group;	/* its members act as one (peer.h); id: ->id */
};

/*
 * A connection's membership of its instance, hung on its peer: the instance,
 * and the view of the instance's filter, what that connection learned
 * (container-filter.h; NULL: unfiltered).
 */
struct container_member {
	struct peer_attachment attachment;
	struct container *container;	/* NULL once the instance is freed */
	struct list_node link;		/* in container->members */
	struct filter_view *view;
};

/* @peer's membership, or NULL: it did not connect through an instance. */
struct container_member *container_member_of(const struct peer *peer);

/* The instance @peer connected through, or NULL. */
struct container *container_of_peer(const struct peer *peer);

/* The view of @peer's instance's filter, or NULL: its messages are not filtered. */
struct filter_view *container_filter_view(const struct peer *peer);

/*
 * Make @peer a member of @c (with a view of its filter, if it has one), on
 * accept and on a re-exec's restore. Return 0 or -ENOMEM.
 */
int container_join(struct container *c, struct peer *peer);

/* --log: at most this many lines per instance in any window of this length. */
#define CONTAINER_LOG_BURST 10
#define CONTAINER_LOG_WINDOW_USEC (10ULL * 1000 * 1000)

struct container_registry {
	struct bus *bus;
	struct bus_part part;		/* the bus frees it (bus_add_part()) */
	struct policy_module policy;	/* its say on messages (container-policy.c) */
	struct list_node instances;
	unsigned int n_instances;
	uint64_t next_id;
};

/* The registry of @bus (bus->containers), which frees it. 0 or -ENOMEM. */
int container_registry_new(struct bus *bus);

/*
 * The instances' say in the policy (container-policy.c): asked about every
 * message from the first instance on, until the last one ends.
 */
void container_policy_add(struct container_registry *reg);
void container_policy_remove(struct container_registry *reg);

/* The instance with object path @path, or NULL. */
struct container *container_find(struct container_registry *reg, const char *path);

/* Positive code of container_add(). */
enum {
	_CONTAINER_E_SUCCESS,
	/* Refused (a limit, no socket): the D-Bus error for the caller is set. */
	CONTAINER_E_REFUSED,
};

/**
 * container_add() - AddServer: a new instance and its listening socket
 * @creator:	the caller (not in a container itself)
 * @creds:	its credentials as GetConnectionCredentials writes them (a{sv},
 *		marshalled at offset 0 in native byte order; copied)
 * @metadata, @n_metadata: likewise, the metadata a{sv} (copied)
 * @filter:	its connections' filter (a reference is taken), or NULL
 * @errnamep, @errtextp: the D-Bus error on CONTAINER_E_REFUSED (*@errtextp
 *		malloc'ed)
 *
 * Return: 0 (*@cp set), CONTAINER_E_REFUSED (an error for the caller), or
 * negative errno.
 */
int container_add(struct container_registry *reg, struct peer *creator, const char *type,
		  const char *name, const void *metadata, size_t n_metadata,
		  const void *creds, size_t n_creds, bool stop_on_disconnect,
		  struct container_filter *filter, struct container **cp,
		  const char **errnamep, char **errtextp);

/*
 * @c's listener (c->listener) is set up: what it accepts is taken into the
 * bus as a member of @c, or closed at once (another uid, beyond
 * max_connections_per_container).
 */
void container_listening(struct container *c);

/*
 * An instance in @reg without socket, creator or members (copying what it
 * is given): container_add()'s (@path NULL: a new random one) and the
 * re-exec's (container-state.c: the path it had).
 * Return 0 (*@cp set) or negative errno (nothing left behind).
 */
int container_new(struct container_registry *reg, uint64_t id, const char *path,
		  const char *type, const char *name, const void *metadata, size_t n_metadata,
		  const void *creds, size_t n_creds, uid_t creator_uid, bool stop_on_disconnect,
		  struct container **cp);

/*
 * The filter of @p's instance refused @m (@what: "denied", "hidden", ...,
 * @name: the name it was for): logged if the filter has "--log", at most
 * CONTAINER_LOG_BURST lines per CONTAINER_LOG_WINDOW_USEC per instance, and
 * then once how many were left out. A flooding sandbox cannot flood the log.
 */
void container_log_refusal(struct container *c, const struct peer *p, const struct message *m,
			   const char *what, const char *name);

/* The calls @c's connections await a reply to, together (max_replies_per_container). */
size_t container_n_calls(const struct container *c);

/* StopListening: close its socket (and remove the file); it ends once empty. */
void container_stop_listening(struct container *c);
/* StopInstance: StopListening and close every connection of it. */
void container_stop_instance(struct container *c);

/*
 * @peer created @c (AddServer, or the re-exec's restore): when it goes, @c
 * stops (its creator attachment's gone op). Return 0 or -ENOMEM.
 */
int container_set_creator(struct container *c, struct peer *peer);

/*
 * Write @c's metadata / its creator's credentials (a{sv}) to @w, whose next
 * type is a{sv}. Return 0 or negative errno.
 */
int container_write_metadata(const struct container *c, struct dc_writer *w);
int container_write_creator_creds(const struct container *c, struct dc_writer *w);

/*
 * Re-exec (state.h, container-state.c): the instances with their sockets,
 * creators and members (peers by their place in the state, @index).
 */
struct container_state {
	uint64_t id;
	const char *path;		/* version 3; before: c<id> */
	const char *type;
	const char *name;
	const void *metadata;
	size_t n_metadata;
	const void *creds;
	size_t n_creds;
	uint32_t creator_uid;
	uint32_t creator_index;		/* UINT32_MAX: gone */
	bool stop_on_disconnect;
	int fd;				/* its listening socket, -1: no longer listens */
	const char *socket_path;
	const char *address;
	uint32_t *members;		/* places of its peers */
	size_t n_members;
	bool has_filter;		/* version 2 */
	const char **options;
	size_t n_options;
	struct filter_view_state *views;	/* [n_members], NULL without filter */
};

struct container_registry_state {
	uint64_t next_id;
	struct container_state *v;
	size_t n;
};

struct state_reader;
struct state_writer;

void container_registry_serialize(const struct container_registry *reg, struct state_writer *w,
				  uint32_t (*index)(const void *peer));
/* Absent (an older stream, or no instance) reads as none. */
bool container_registry_state_read(struct state_reader *r, struct container_registry_state *st,
				   size_t n_peers);
void container_registry_state_deinit(struct container_registry_state *st);
/* After the peers, before they resume: @peers in the state's order. */
int container_registry_restore(struct container_registry *reg,
			       const struct container_registry_state *st,
			       struct peer *const *peers);
