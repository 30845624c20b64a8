/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/**
 * DOC: Name registry
 *
 * The registry of bus names. Every connection embeds a struct name_owner; the
 * registry indexes it by its unique name (":1.N", allocated by the caller,
 * never reused) and keeps, for every well-known name, the queue of owners:
 * the first entry is the primary owner, the others wait in order.
 *
 * RequestName / ReleaseName follow dbus-daemon 1.14 (bus/services.c) exactly:
 *
 * Request by connection C of name N with flags F:
 *  - N has no owner: C becomes primary owner with F. Reply PRIMARY_OWNER.
 *  - C is the primary owner: its flags become F. Reply ALREADY_OWNER.
 *  - F has DO_NOT_QUEUE and (the primary owner lacks ALLOW_REPLACEMENT or F
 *    lacks REPLACE_EXISTING): C is removed from the queue if it was waiting
 *    in it (silently, no event). Reply EXISTS.
 *  - F lacks DO_NOT_QUEUE and (primary lacks ALLOW_REPLACEMENT or F lacks
 *    REPLACE_EXISTING): C is queued (appended at the tail; if C was already
 *    queued, its flags become F and it stays in place). In both cases, if F
 *    has REPLACE_EXISTING, C is moved to the second position (first waiter).
 *    Reply IN_QUEUE.
 *  - otherwise (F has REPLACE_EXISTING and the primary allows replacement):
 *    C takes over. The old primary owner goes to the second position of the
 *    queue, unless it holds DO_NOT_QUEUE, in which case it loses the name
 *    entirely. Reply PRIMARY_OWNER.
 *
 * Release of N by C: NON_EXISTENT if N has no owner, NOT_OWNER if C is not in
 * N's queue, else RELEASED: a waiting C leaves the queue silently; a primary
 * C hands the name to the first waiter (or N ceases to exist).
 *
 * Events, in dbus-daemon's order (the caller turns them into signals; the
 * driver's RequestName/ReleaseName reply is sent by the caller AFTER them, as
 * dbus-daemon queues the signals first):
 *  - new name:          OWNER_CHANGED(N, NULL, C), ACQUIRED(N, C)
 *  - primary leaves,
 *    with successor S:  LOST(N, old), OWNER_CHANGED(N, old, S), ACQUIRED(N, S)
 *  - primary leaves,
 *    no successor:      LOST(N, old), OWNER_CHANGED(N, old, NULL)
 *  - replacement (both with and without DO_NOT_QUEUE on the old owner):
 *                       LOST(N, old), OWNER_CHANGED(N, old, C), ACQUIRED(N, C)
 *  - queue-only changes (queued, dequeued, flags updated): no event.
 * ACQUIRED and LOST are unicast NameAcquired/NameLost to the owner named in
 * the event; OWNER_CHANGED is the NameOwnerChanged broadcast (NULL = "").
 *
 * Unique names are owned like a name nobody else can queue for, as in
 * dbus-daemon (which keeps them in the same registry):
 *  - name_registry_add_unique() (Hello; the caller sends the Hello reply
 *    BEFORE these, as dbus-daemon does): OWNER_CHANGED(U, NULL, C),
 *    ACQUIRED(U, C).
 *  - name_registry_remove_unique() (disconnect): first every well-known name of
 *    C is released in the reverse order of acquisition (newest first, each with
 *    the events above), then LOST(U, C), OWNER_CHANGED(U, C, NULL). The caller
 *    drops events addressed to the dead connection itself.
 *
 * The callback runs synchronously, after the registry's state reflects the
 * change it reports (so lookups inside the callback see the new owner). It
 * must not modify the registry. It cannot fail: delivery problems are the
 * receiver's (as for any signal).
 *
 * Lookups by name are O(1) (hash map); ListQueuedOwners is O(queue length).
 * The unique names are also kept in order of their id, for a caller that
 * pages through the connections (name_registry_list_uniques()).
 * The registry does not check policy or the per-connection name limit: the
 * caller does that before calling name_registry_request(). (dbus-daemon counts
 * the unique name as one of the connection's names and checks
 * `names >= max_names_per_connection` before anything else, even for a name
 * the connection already owns; that is owner->n_ownerships + 1 here.)
 *
 * The behaviour (reply codes, queues, and each connection's sequence of
 * NameAcquired/NameLost/NameOwnerChanged) is checked against a real
 * dbus-daemon by test/unit/broker/test-name-dbus-daemon.c.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "util/hashmap.h"
#include "util/list.h"

/* RequestName flags */
#define NAME_FLAG_ALLOW_REPLACEMENT 0x1
#define NAME_FLAG_REPLACE_EXISTING 0x2
#define NAME_FLAG_DO_NOT_QUEUE 0x4
#define NAME_FLAG_MASK 0x7

/* RequestName replies */
#define NAME_REQUEST_PRIMARY_OWNER 1
#define NAME_REQUEST_IN_QUEUE 2
#define NAME_REQUEST_EXISTS 3
#define NAME_REQUEST_ALREADY_OWNER 4

/* ReleaseName replies */
#define NAME_RELEASE_RELEASED 1
#define NAME_RELEASE_NON_EXISTENT 2
#define NAME_RELEASE_NOT_OWNER 3

/*
 * Positive error codes of name_registry_request()/_release(); the driver maps
 * all three to org.freedesktop.DBus.Error.InvalidArgs (see name_error_string).
 */
enum {
	_NAME_E_SUCCESS,
	NAME_E_INVALID,		/* not a valid bus name */
	NAME_E_UNIQUE,		/* starts with ':' (unique names are not requested) */
	NAME_E_RESERVED,	/* org.freedesktop.DBus */
};

#define NAME_DRIVER "org.freedesktop.DBus"
#define NAME_UNIQUE_MAX 32

struct name_registry;

/*
 * One connection, as the registry sees it. Embedded in the caller's connection
 * object; get back to it with container_of(). All fields are read-only for
 * the caller.
 */
struct name_owner {
	struct name_registry *registry; /* set while the unique name is indexed */
	uint64_t id;                    /* the N of ":1.N" */
	char unique_name[NAME_UNIQUE_MAX];
	struct hmap_node unique_node;   /* in registry->uniques */
	struct list_node ownerships;    /* struct name_ownership.owner_link, acquisition order */
	size_t n_ownerships;            /* names owned or queued for */
	uint32_t peak_names;            /* the most names it ever had, unique included */
	size_t id_pos;                  /* its place in registry->by_id, while indexed */
};

/* One well-known name with at least one owner (it is freed with its last). */
struct name {
	struct name_registry *registry;
	struct hmap_node node;          /* in registry->names */
	struct list_node registry_link; /* in registry->name_list */
	struct list_node queue;         /* struct name_ownership.name_link; first = primary */
	size_t n_queued;                /* entries in queue, primary included */
	uint32_t state_index;           /* its place in the state (name_registry_serialize()) */
	char str[];
};

/* One entry of a name's queue: owner @owner holds or waits for @name. */
struct name_ownership {
	struct name *name;
	struct name_owner *owner;
	struct list_node name_link;  /* in name->queue */
	struct list_node owner_link; /* in owner->ownerships */
	uint32_t flags;              /* NAME_FLAG_* of the latest request */
	/*
	 * Its place in the name's queue, in the state: set for all at once by
	 * name_registry_serialize(), and while restoring.
	 */
	uint32_t state_pos;
};

enum name_event_type {
	NAME_EVENT_OWNER_CHANGED, /* broadcast NameOwnerChanged(name, old, new) */
	NAME_EVENT_LOST,          /* NameLost(name) to old_owner */
	NAME_EVENT_ACQUIRED,      /* NameAcquired(name) to new_owner */
};

struct name_event {
	enum name_event_type type;
	const char *name;              /* valid during the callback only */
	struct name_owner *old_owner;  /* OWNER_CHANGED, LOST; NULL = none */
	struct name_owner *new_owner;  /* OWNER_CHANGED, ACQUIRED; NULL = none */
};

typedef void (*name_event_fn)(void *userdata, const struct name_event *event);

/* One place of the registry's array of unique names by id; owner NULL: a hole. */
struct name_id_slot {
	uint64_t id;
	struct name_owner *owner;
};

struct name_registry {
	struct hmap names;          /* struct name by string */
	struct hmap uniques;        /* struct name_owner by unique_name */
	/*
	 * The same owners by increasing id. Hello hands out ids in increasing
	 * order, so a new one is appended; one that leaves becomes a hole that
	 * keeps its id (a page may stop at it), until the holes outnumber the
	 * owners and the array is compacted: O(1) amortized either way. A
	 * restore appends in the state's order and sorts once at the end.
	 */
	struct name_id_slot *by_id;
	size_t n_by_id;             /* places used, holes included */
	size_t n_by_id_holes;
	size_t cap_by_id;
	bool by_id_unsorted;        /* an id came out of order: sort before a lookup */
	struct list_node name_list; /* all struct name, creation order (ListNames) */
	size_t n_names;
	size_t n_ownerships;        /* queue entries of all names (Debug.Stats) */
	/* High-water marks (Debug.Stats), noted as names are taken; unique names count. */
	uint32_t peak_names;
	uint32_t peak_names_per_owner;
	/* From name_registry_restore() to _done(): the names by their place in the state. */
	struct name **restored;
	size_t n_restored;
	name_event_fn event_fn;
	void *userdata;
};

/* @fn may be NULL (no events). */
int name_registry_new(struct name_registry **regp, name_event_fn fn, void *userdata);
/* All owners must have been removed. Returns NULL. */
struct name_registry *name_registry_free(struct name_registry *reg);

/* Prepare @owner with unique name ":1.@id". Not yet indexed. */
void name_owner_init(struct name_owner *owner, uint64_t id);
/* @owner must own no name and be unindexed (name_registry_remove_unique()). */
void name_owner_deinit(struct name_owner *owner);

/*
 * Index @owner by its unique name (Hello), emitting OWNER_CHANGED + ACQUIRED.
 * 0, or -ENOMEM, or -EEXIST if the id is taken.
 */
int name_registry_add_unique(struct name_registry *reg, struct name_owner *owner);
/* Release all names of @owner and then its unique name, with events. */
void name_registry_remove_unique(struct name_registry *reg, struct name_owner *owner);

/*
 * As name_registry_remove_unique(), in the order of BecomeMonitor (as
 * dbus-daemon's): LOST(U, C) and OWNER_CHANGED(U, C, NULL) first, then the
 * well-known names in the order of acquisition (oldest first).
 */
void name_registry_remove_unique_first(struct name_registry *reg, struct name_owner *owner);

/*
 * RequestName. On success returns 0 and stores NAME_REQUEST_* in *replyp.
 * Returns NAME_E_* for invalid names (nothing changed), -ENOMEM.
 * @flags bits outside NAME_FLAG_MASK are ignored (as dbus-daemon does).
 */
int name_registry_request(struct name_registry *reg, struct name_owner *owner,
			  const char *name, uint32_t flags, uint32_t *replyp);

/* ReleaseName. 0 with NAME_RELEASE_* in *replyp, or NAME_E_*. */
int name_registry_release(struct name_registry *reg, struct name_owner *owner,
			  const char *name, uint32_t *replyp);

/* Release every name @owner owns or waits for, newest first, with events. */
void name_registry_release_all(struct name_registry *reg, struct name_owner *owner);

/* The well-known name @str if it has an owner, else NULL. O(1). */
struct name *name_registry_find(struct name_registry *reg, const char *str);
/* The connection with unique name @str, if indexed. O(1). */
struct name_owner *name_registry_find_unique(struct name_registry *reg, const char *str);
/*
 * GetNameOwner / routing: the owner of @str, a unique name or the primary
 * owner of a well-known name; NULL if none (also for org.freedesktop.DBus,
 * which belongs to the driver, not to a registry entry).
 */
struct name_owner *name_registry_resolve(struct name_registry *reg, const char *str);

static inline struct name_ownership *name_primary(const struct name *name)
{
	return list_first_entry(&name->queue, struct name_ownership, name_link);
}

/* Whether @owner is the primary owner of well-known name @str. */
bool name_owner_is_primary(const struct name_owner *owner, const char *str);

/*
 * ListQueuedOwners: iterate a name's queue, primary first:
 *	struct name_ownership *o;
 *	list_for_each_entry(o, &name->queue, name_link) ... o->owner->unique_name
 * ListNames: the driver's name, then each indexed unique name (hmap) and every
 * struct name of reg->name_list. Helper iterators below.
 */
struct name_owner *name_registry_next_unique(struct name_registry *reg,
					     struct name_owner *prev);

/* How many places one page may look at beyond twice its @max owners (holes). */
#define NAME_LIST_SLACK 16

/**
 * name_registry_list_uniques() - a page of the unique names, by id
 * @reg:	the registry
 * @from:	the first id wanted
 * @owners:	filled with up to @max owners whose id is >= @from, increasing
 * @max:	how many at most, 1 or more (with 0, *@nextp is the first id, maybe 0)
 * @nextp:	the id to ask for next, 0 when there is none left
 *
 * O(log n + @max), whatever the number of names: a binary search for @from,
 * then at most 2 * @max + NAME_LIST_SLACK places (holes left by names gone
 * included: a page that meets a long run of them ends early, with *@nextp
 * where it stopped). Only after ids were added out of order (a restore not
 * yet done, or a test) does it sort first, once. Return: how many were
 * filled.
 */
size_t name_registry_list_uniques(struct name_registry *reg, uint64_t from,
				  struct name_owner **owners, size_t max, uint64_t *nextp);

const char *name_error_string(int code);

/*
 * Re-exec (state.h). The registry writes its well-known names, in ListNames
 * order (section STATE_TAG_NAME); each owner writes its ownerships in its
 * order of acquisition with their position in the name's queue, 0: primary
 * (section STATE_TAG_OWNER, in its peer's). Since version 2 of the owner
 * section an ownership names its name by its place in the registry's
 * section: a restore looked up every name by its string once more (a
 * tenth of restoring 10,000 names), and the stream carried each twice.
 * Version 1 wrote the string. Restoring re-creates the
 * registry as it was, without events: first every name
 * (name_registry_restore()), then each owner's unique name
 * (name_registry_restore_unique()) and ownerships (name_owner_restore()),
 * then name_registry_restore_done() removes a name left without owner.
 * The parsed forms point into the reader.
 * Return (restore): 0, -EEXIST (a duplicate), -ENOENT (a name not restored
 * first), -EINVAL (an invalid name) or -ENOMEM.
 */
struct state_reader;
struct state_writer;

#define NAME_REGISTRY_STATE_VERSION 1u
#define NAME_OWNER_STATE_VERSION 2u

struct name_registry_state {
	const char **names;
	size_t n_names;
};

struct name_owner_state {
	struct name_owned_state {
		const char *name;	/* version 1; NULL since 2: */
		uint32_t index;		/* in the registry's section */
		uint32_t flags;
		uint32_t pos;
	} *owned;
	size_t n_owned;
};

/* Before the owners' sections: numbers every name and queue place for them. */
void name_registry_serialize(struct name_registry *reg, struct state_writer *w);
bool name_registry_state_read(struct state_reader *r, struct name_registry_state *st);
void name_registry_state_deinit(struct name_registry_state *st);
int name_registry_restore(struct name_registry *reg, const struct name_registry_state *st);
int name_registry_restore_unique(struct name_registry *reg, struct name_owner *owner);
void name_registry_restore_done(struct name_registry *reg);

void name_owner_serialize(const struct name_owner *owner, struct state_writer *w);
/* @n_names: in the registry's section, read before. */
bool name_owner_state_read(struct state_reader *r, struct name_owner_state *st, size_t n_names);
void name_owner_state_deinit(struct name_owner_state *st);
int name_owner_restore(struct name_registry *reg, struct name_owner *owner,
		       const struct name_owner_state *st);
