/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/**
 * DOC: The filter of a container instance (xdg-dbus-proxy's, in the bus)
 *
 * AddServer's named argument Filter (as) gives an instance the rules that
 * xdg-dbus-proxy takes on its command line: "--see=NAME", "--talk=NAME",
 * "--own=NAME" (NAME may end in ".*": the name and everything below it),
 * "--call=NAME=RULE" and "--broadcast=NAME=RULE" (RULE is
 * [INTERFACE.MEMBER][@PATH], "*" for any member, "/PATH/ *" for a subtree),
 * "--sloppy-names" and "--log" (Flatpak passes it when session-bus logging
 * is on: the bus logs what the filter refuses the instance's connections,
 * rate-limited, container_log_refusal()). Every connection of such an
 * instance is then held
 * to them exactly as a client behind Debian 12's xdg-dbus-proxy (0.1.4 with
 * its security fixes) is; docs/containers-reference.md part B has the facts
 * this follows, docs/containers.md what a user needs.
 *
 * Two objects:
 *  - struct container_filter, the compiled rules: immutable, shared by the
 *    instance and the views of its connections (reference counted);
 *  - struct filter_view, one per connection of a filtered instance, owned
 *    by its membership (container.h): what that connection has learned
 *    about unique names. A unique name is visible to it when it sent it
 *    something, and inherits the rules of every well-known name it owned
 *    while the connection watched (xdg-dbus-proxy learns that from
 *    NameOwnerChanged, and never forgets). Each learned unique name is a
 *    struct filter_sight, linked into the view (by the peer it names) and
 *    into that peer's list, which hangs on it (a peer attachment, peer.h),
 *    so that a peer's sights go with it.
 *
 * Levels: NONE < SEE < TALK < OWN, each implying the ones below. A name at
 * NONE is hidden (calls get ServiceUnknown or NameHasNoOwner as if it did
 * not exist); at SEE it is listed and can be asked about, but not called;
 * at TALK it may be called where a rule allows (--talk allows everything);
 * at OWN it may also be owned, and everything it sends reaches the client.
 *
 * The decisions are pure (filter_check_*()); the router and the driver ask
 * them first, and the bus' <policy> after them: both must allow.
 */

#include <stdbool.h>
#include <stdint.h>
#include "util/hashmap.h"
#include "util/list.h"

struct bus;
struct message;
struct peer;

enum filter_level {
	FILTER_NONE,
	FILTER_SEE,
	FILTER_TALK,
	FILTER_OWN,
};

/* At most this many options per filter (the bus adds one rule of its own). */
#define FILTER_MAX_OPTIONS 255
#define FILTER_MAX_OPTION_LEN 1024
#define FILTER_WORDS 4			/* (FILTER_MAX_OPTIONS + 1) rules, one bit each */

enum {
	FILTER_TYPE_CALL = 1,
	FILTER_TYPE_BROADCAST = 2,
	FILTER_TYPE_ALL = 3,
};

struct filter_rule {
	char *name;			/* the name, without ".*" */
	bool subtree;			/* NAME.*: also every name below it */
	uint8_t level;			/* enum filter_level */
	uint8_t types;			/* FILTER_TYPE_* it allows (ALL: --see/--talk/--own) */
	bool path_subtree;
	char *path;			/* NULL: any */
	char *interface;		/* NULL: any */
	char *member;			/* NULL: any */
};

struct container_filter {
	unsigned int n_refs;
	bool sloppy_names;		/* NameOwnerChanged of every unique name passes */
	bool log;			/* --log: refusals are logged */
	struct filter_rule *rules;	/* [0]: org.freedesktop.DBus at TALK */
	size_t n_rules;
	char **options;			/* as given, for the re-exec and GetInstanceInfo */
	size_t n_options;
	size_t n_bytes;			/* of the options, for max_container_metadata_bytes */
};

/* Which rules a name matched, and the highest level among them. */
struct filter_match {
	uint8_t level;
	bool unrestricted;		/* a level of its own, as a rule allowing everything */
	uint64_t bits[FILTER_WORDS];
};

/* Positive code of container_filter_new(). */
enum {
	_FILTER_E_SUCCESS,
	/* An option is not understood, or there are too many: *errtextp says which. */
	FILTER_E_INVALID,
};

/**
 * container_filter_new() - compile xdg-dbus-proxy options
 * @options, @n: the strings, as given
 * @errtextp:	why not, on FILTER_E_INVALID (malloc'ed)
 *
 * Return: 0 (*@fp set, one reference), FILTER_E_INVALID, or -ENOMEM.
 */
int container_filter_new(struct container_filter **fp, const char *const *options, size_t n,
			 char **errtextp);
struct container_filter *container_filter_ref(struct container_filter *f);
struct container_filter *container_filter_unref(struct container_filter *f);

/* Which rules the well-known name @name matches (NULL: no destination). */
void container_filter_match_name(const struct container_filter *f, const char *name,
				 struct filter_match *m);

struct filter_sight {
	struct hmap_node node;		/* in view->sights, by target */
	struct list_node target_link;	/* in the target's struct filter_target */
	struct filter_view *view;
	struct peer *target;
	uint8_t level;			/* learned of itself: SEE, or TALK for the viewer */
	uint64_t bits[FILTER_WORDS];	/* the rules of the names it owned */
};

struct filter_view {
	struct container_filter *filter;	/* a reference */
	struct peer *peer;
	struct hmap sights;
};

int filter_view_new(struct filter_view **vp, struct peer *peer, struct container_filter *f);
struct filter_view *filter_view_free(struct filter_view *v);

/* What @v knows of @target (NULL, the driver: TALK, unrestricted). */
void filter_view_match_peer(const struct filter_view *v, const struct peer *target,
			    struct filter_match *m);
/* What @v knows of the name @name, unique or well-known (NULL: TALK). */
void filter_view_match_name(const struct filter_view *v, const char *name,
			    struct filter_match *m);

/* Learn: @from sent something to @v's connection (it becomes SEE). */
int filter_view_saw(struct filter_view *v, struct peer *from);
/* Learn: @owner became the primary owner of @name; for every view of the bus. */
void filter_name_owner_changed(struct bus *bus, const char *name, struct peer *owner);
/*
 * @v's connection said Hello: it is TALK to itself, learns the owners of
 * the names it may see, and gets its NameOwnerChanged match rules, as
 * xdg-dbus-proxy asks the bus for them. Return 0 or -ENOMEM.
 */
int filter_view_hello(struct filter_view *v);

/* The verdicts. */
enum {
	FILTER_PASS,
	FILTER_DENY,			/* AccessDenied */
	FILTER_HIDE,			/* as if the name did not exist */
	FILTER_FAKE_FALSE,		/* NameHasOwner: false */
	FILTER_FAKE_NO_OWNER,		/* GetNameOwner: NameHasNoOwner */
	FILTER_DROP,			/* silently (a reply nobody asked for) */
};

/* A call or unicast signal from @v's connection to @m's destination (not the bus). */
int filter_check_unicast(const struct filter_view *v, const struct message *m);
/* A call from @v's connection to the driver (destination org.freedesktop.DBus). */
int filter_check_driver(const struct filter_view *v, struct message *m);
/* May @v's connection receive the broadcast @m of @from (NULL: the driver)? */
bool filter_check_broadcast(const struct filter_view *v, const struct peer *from,
			    struct message *m);
/* May @v's connection see the name @name (ListNames)? */
bool filter_view_sees(const struct filter_view *v, const char *name);
/* Does @v let its connection call @target whatever the message? */
bool filter_view_allows_all_calls(const struct filter_view *v, const struct peer *target);

/*
 * Re-exec: a view's sights, by their targets' places in the state (@index);
 * read back and restored once every peer exists.
 */
struct state_reader;
struct state_writer;

struct filter_sight_state {
	uint32_t target;
	uint8_t level;
	uint64_t bits[FILTER_WORDS];
};

struct filter_view_state {
	bool present;
	struct filter_sight_state *v;
	size_t n;
};

void filter_view_serialize(const struct filter_view *v, struct state_writer *w,
			   uint32_t (*index)(const void *peer));
bool filter_view_state_read(struct state_reader *r, struct filter_view_state *st,
			    size_t n_peers);
void filter_view_state_deinit(struct filter_view_state *st);
int filter_view_restore(struct filter_view *v, const struct filter_view_state *st,
			struct peer *const *peers);
