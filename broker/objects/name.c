/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Name registry: unique names and queues of owners of well-known names, with
 * dbus-daemon's RequestName/ReleaseName decisions and event order (name.h).
 */

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "broker/objects/name.h"
#include "broker/objects/state.h"
#include "dbus-compat/validate.h"
#include "util/error.h"
#include "util/macro.h"

const char *name_error_string(int code)
{
	switch (code) {
	case NAME_E_INVALID:
		return "Requested bus name is not valid";
	case NAME_E_UNIQUE:
		return "Cannot acquire or release a name starting with ':'";
	case NAME_E_RESERVED:
		return "The name org.freedesktop.DBus is reserved for the bus itself";
	default:
		/* Only the registry's own codes are asked about. */
		assert_not_reached();
	}
}

int name_registry_new(struct name_registry **regp, name_event_fn fn, void *userdata)
{
	struct name_registry *reg;

	reg = calloc(1, sizeof(*reg));
	if (!reg)
		return -ENOMEM;
	hmap_init(&reg->names);
	hmap_init(&reg->uniques);
	list_init(&reg->name_list);
	reg->event_fn = fn;
	reg->userdata = userdata;
	*regp = reg;
	return 0;
}

struct name_registry *name_registry_free(struct name_registry *reg)
{
	if (!reg)
		return NULL;
	/* Leaking owned names would leave dangling owner pointers: refuse loudly. */
	if (reg->n_names || hmap_size(&reg->uniques))
		abort();
	hmap_deinit(&reg->names);
	hmap_deinit(&reg->uniques);
	free(reg->by_id);
	free(reg->restored);
	free(reg);
	return NULL;
}

void name_owner_init(struct name_owner *owner, uint64_t id)
{
	memset(owner, 0, sizeof(*owner));
	owner->id = id;
	snprintf(owner->unique_name, sizeof(owner->unique_name), ":1.%" PRIu64, id);
	list_init(&owner->ownerships);
}

void name_owner_deinit(struct name_owner *owner)
{
	if (owner->registry || owner->n_ownerships)
		abort();
}

static void emit(struct name_registry *reg, enum name_event_type type, const char *name,
		 struct name_owner *old_owner, struct name_owner *new_owner)
{
	struct name_event ev = {
		.type = type,
		.name = name,
		.old_owner = old_owner,
		.new_owner = new_owner,
	};

	if (reg->event_fn)
		reg->event_fn(reg->userdata, &ev);
}

/* ------------------------------------------------------- unique names by id */

/* Room for one more place in reg->by_id: 0 or -ENOMEM (nothing changed). */
static int by_id_reserve(struct name_registry *reg)
{
	struct name_id_slot *p;
	size_t cap;

	if (reg->n_by_id < reg->cap_by_id)
		return 0;
	cap = reg->cap_by_id ? reg->cap_by_id * 2 : 64;
	p = reallocarray(reg->by_id, cap, sizeof(*p));
	if (!p)
		return -ENOMEM;
	reg->by_id = p;
	reg->cap_by_id = cap;
	return 0;
}

/* Append @owner (after by_id_reserve()); an id out of order is sorted later. */
static void by_id_append(struct name_registry *reg, struct name_owner *owner)
{
	assert(reg->n_by_id < reg->cap_by_id);
	if (reg->n_by_id && reg->by_id[reg->n_by_id - 1].id >= owner->id)
		reg->by_id_unsorted = true;
	owner->id_pos = reg->n_by_id;
	reg->by_id[reg->n_by_id++] = (struct name_id_slot){ owner->id, owner };
}

/* Drop the holes, keeping the order; every owner learns its new place. */
static void by_id_compact(struct name_registry *reg)
{
	size_t n = 0;

	for (size_t i = 0; i < reg->n_by_id; i++) {
		if (!reg->by_id[i].owner)
			continue;
		reg->by_id[n] = reg->by_id[i];
		reg->by_id[n].owner->id_pos = n;
		n++;
	}
	assert(n == reg->n_by_id - reg->n_by_id_holes);
	reg->n_by_id = n;
	reg->n_by_id_holes = 0;
	/* After a crowd left: halve an array three quarters empty. */
	if (reg->cap_by_id > 256 && n < reg->cap_by_id / 4) {
		struct name_id_slot *p = reallocarray(reg->by_id, reg->cap_by_id / 2, sizeof(*p));

		if (p) {
			reg->by_id = p;
			reg->cap_by_id /= 2;
		}
	}
}

/*
 * Leave a hole: a page that stopped there still finds its way on. Compacted
 * once the holes outnumber the owners (and NAME_LIST_SLACK): O(n) work
 * after n removals at least, so each costs O(1) amortized.
 */
static void by_id_remove(struct name_registry *reg, struct name_owner *owner)
{
	/* Its place is its own: a stale id_pos would punch a hole in another owner. */
	assert(owner->id_pos < reg->n_by_id && reg->by_id[owner->id_pos].owner == owner);
	reg->by_id[owner->id_pos].owner = NULL;
	reg->n_by_id_holes++;
	if (reg->n_by_id_holes > NAME_LIST_SLACK &&
	    reg->n_by_id_holes > reg->n_by_id - reg->n_by_id_holes)
		by_id_compact(reg);
}

static int cmp_id_slot(const void *a, const void *b)
{
	const struct name_id_slot *x = a, *y = b;

	return x->id < y->id ? -1 : x->id > y->id;
}

/* In order again after ids came out of order (a restore): O(n log n), once. */
static void by_id_sort(struct name_registry *reg)
{
	if (!reg->by_id_unsorted)
		return;
	by_id_compact(reg);
	qsort(reg->by_id, reg->n_by_id, sizeof(*reg->by_id), cmp_id_slot);
	for (size_t i = 0; i < reg->n_by_id; i++)
		reg->by_id[i].owner->id_pos = i;
	reg->by_id_unsorted = false;
}

size_t name_registry_list_uniques(struct name_registry *reg, uint64_t from,
				  struct name_owner **owners, size_t max, uint64_t *nextp)
{
	size_t lo = 0, hi, end, n = 0;

	by_id_sort(reg);
	/* The first place whose id is >= @from (holes keep theirs). */
	hi = reg->n_by_id;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (reg->by_id[mid].id < from)
			lo = mid + 1;
		else
			hi = mid;
	}
	end = MIN(reg->n_by_id, lo + 2 * max + NAME_LIST_SLACK);
	for (; lo < end; lo++) {
		if (!reg->by_id[lo].owner)
			continue;
		if (n == max)
			break;
		owners[n++] = reg->by_id[lo].owner;
	}
	/* Where this page stopped: an owner not taken, or a hole that keeps its id. */
	*nextp = lo < reg->n_by_id ? reg->by_id[lo].id : 0;
	return n;
}

/* ------------------------------------------------------------ unique names */

/* @owner took a name (its unique one included): raise the high-water marks. */
static void name_note_peaks(struct name_registry *reg, struct name_owner *owner)
{
	uint32_t total = (uint32_t)(reg->n_ownerships + hmap_size(&reg->uniques));
	uint32_t mine = (uint32_t)owner->n_ownerships + (owner->registry ? 1 : 0);

	if (total > reg->peak_names)
		reg->peak_names = total;
	if (mine > owner->peak_names)
		owner->peak_names = mine;
	if (mine > reg->peak_names_per_owner)
		reg->peak_names_per_owner = mine;
}

int name_registry_add_unique(struct name_registry *reg, struct name_owner *owner)
{
	uint64_t h = hash_str(owner->unique_name);
	int r;

	if (owner->registry)
		return -EALREADY;
	if (name_registry_find_unique(reg, owner->unique_name))
		return -EEXIST;
	r = by_id_reserve(reg);
	if (r < 0)
		return r;
	r = hmap_insert(&reg->uniques, &owner->unique_node, h);
	if (r < 0)
		return r;
	by_id_append(reg, owner);
	owner->registry = reg;
	name_note_peaks(reg, owner);
	emit(reg, NAME_EVENT_OWNER_CHANGED, owner->unique_name, NULL, owner);
	emit(reg, NAME_EVENT_ACQUIRED, owner->unique_name, NULL, owner);
	return 0;
}

static void unique_drop(struct name_registry *reg, struct name_owner *owner)
{
	if (owner->registry != reg)
		return;
	hmap_remove(&reg->uniques, &owner->unique_node);
	by_id_remove(reg, owner);
	owner->registry = NULL;
	emit(reg, NAME_EVENT_LOST, owner->unique_name, owner, NULL);
	emit(reg, NAME_EVENT_OWNER_CHANGED, owner->unique_name, owner, NULL);
}

void name_registry_remove_unique(struct name_registry *reg, struct name_owner *owner)
{
	name_registry_release_all(reg, owner);
	assert(owner->n_ownerships == 0);
	unique_drop(reg, owner);
}


struct name_owner *name_registry_find_unique(struct name_registry *reg, const char *str)
{
	hmap_for_each_hash(n, &reg->uniques, hash_str(str)) {
		struct name_owner *o = container_of(n, struct name_owner, unique_node);

		if (strcmp(o->unique_name, str) == 0)
			return o;
	}
	return NULL;
}

struct name_owner *name_registry_next_unique(struct name_registry *reg, struct name_owner *prev)
{
	struct hmap_node *n = hmap_next(&reg->uniques, prev ? &prev->unique_node : NULL);

	return n ? container_of(n, struct name_owner, unique_node) : NULL;
}

static struct name *name_lookup_hashed(struct name_registry *reg, const char *str, uint64_t h)
{
	hmap_for_each_hash(n, &reg->names, h) {
		struct name *name = container_of(n, struct name, node);

		if (strcmp(name->str, str) == 0)
			return name;
	}
	return NULL;
}

struct name *name_registry_find(struct name_registry *reg, const char *str)
{
	return name_lookup_hashed(reg, str, hash_str(str));
}

struct name_owner *name_registry_resolve(struct name_registry *reg, const char *str)
{
	const struct name_ownership *o;
	struct name *name;

	if (str[0] == ':')
		return name_registry_find_unique(reg, str);
	name = name_registry_find(reg, str);
	if (!name)
		return NULL;
	/*
	 * A name can be looked up while its last owner is being dropped (the
	 * change events are emitted before it leaves the index): no primary.
	 */
	o = name_primary(name);
	return o ? o->owner : NULL;
}

bool name_owner_is_primary(const struct name_owner *owner, const char *str)
{
	const struct name_ownership *o;

	if (owner->registry) {
		struct name *name = name_registry_find(owner->registry, str);

		if (!name)
			return false;
		o = name_primary(name);
		return o && o->owner == owner;
	}
	list_for_each_entry(o, &owner->ownerships, owner_link)
		if (strcmp(o->name->str, str) == 0)
			return name_primary(o->name) == o;
	return false;
}

static struct name_ownership *name_find_ownership(struct name *name,
						  const struct name_owner *owner)
{
	struct name_ownership *o;

	/*
	 * Walk the shorter of the two lists: a name's queue is usually short,
	 * but so is a connection's list of names; either bounds the cost.
	 */
	if (name->n_queued <= owner->n_ownerships) {
		list_for_each_entry(o, &name->queue, name_link)
			if (o->owner == owner)
				return o;
	} else {
		list_for_each_entry(o, &owner->ownerships, owner_link)
			if (o->name == name)
				return o;
	}
	return NULL;
}

static struct name_ownership *ownership_new(struct name *name, struct name_owner *owner,
					    uint32_t flags)
{
	struct name_ownership *o;

	o = calloc(1, sizeof(*o));
	if (!o)
		return NULL;
	o->name = name;
	o->owner = owner;
	o->flags = flags;
	list_init(&o->name_link);
	list_append(&owner->ownerships, &o->owner_link);
	owner->n_ownerships++;
	name->registry->n_ownerships++;
	name_note_peaks(name->registry, owner);
	return o;
}

/* Unlink from both lists and free; does not touch the name's lifetime. */
static void ownership_free(struct name_ownership *o)
{
	assert(list_node_is_linked(&o->name_link) && list_node_is_linked(&o->owner_link));
	assert(o->name->n_queued > 0 && o->owner->n_ownerships > 0 &&
	       o->name->registry->n_ownerships > 0);
	list_unlink(&o->name_link);
	o->name->n_queued--;
	list_unlink(&o->owner_link);
	o->owner->n_ownerships--;
	o->name->registry->n_ownerships--;
	free(o);
}

static void name_free(struct name *name)
{
	/* A name is freed with its last owner, never under one. */
	assert(list_is_empty(&name->queue) && name->n_queued == 0);
	assert(name->registry->n_names > 0);
	hmap_remove(&name->registry->names, &name->node);
	list_unlink(&name->registry_link);
	name->registry->n_names--;
	free(name);
}

/* Insert @o at the second position of the queue (first waiter). */
static void queue_insert_second(struct name *name, struct name_ownership *o)
{
	struct list_node *first = name->queue.next;

	/* Behind a primary owner, and in no queue yet. */
	assert(!list_is_empty(&name->queue) && !list_node_is_linked(&o->name_link));
	list_insert_between(&o->name_link, first, first->next);
}

/*
 * The primary owner @p leaves @name (release, disconnect, or replaced while
 * holding DO_NOT_QUEUE). Emits LOST, OWNER_CHANGED and ACQUIRED for the
 * successor, and frees the name if it has no owner left.
 */
static void name_drop_primary(struct name_registry *reg, struct name *name,
			      struct name_ownership *p)
{
	struct name_owner *old_owner = p->owner, *new_owner = NULL;
	struct name_ownership *next;

	assert(name_primary(name) == p);
	ownership_free(p);
	next = list_first_entry(&name->queue, struct name_ownership, name_link);
	if (next)
		new_owner = next->owner;
	emit(reg, NAME_EVENT_LOST, name->str, old_owner, NULL);
	emit(reg, NAME_EVENT_OWNER_CHANGED, name->str, old_owner, new_owner);
	if (new_owner)
		emit(reg, NAME_EVENT_ACQUIRED, name->str, old_owner, new_owner);
	else
		name_free(name);
}

static int check_name(const char *str)
{
	if (!validate_bus_name_lenient(str, strlen(str)))
		return NAME_E_INVALID;
	if (str[0] == ':')
		return NAME_E_UNIQUE;
	if (strcmp(str, NAME_DRIVER) == 0)
		return NAME_E_RESERVED;
	return 0;
}

/* A new name without owner, indexed by @h but not yet in the name list. */
static int name_alloc(struct name_registry *reg, const char *str, uint64_t h,
		      struct name **namep)
{
	size_t len = strlen(str);
	struct name *name;
	int r;

	name = calloc(1, sizeof(*name) + len + 1);
	if (!name)
		return -ENOMEM;
	memcpy(name->str, str, len + 1);
	name->registry = reg;
	list_init(&name->queue);
	r = hmap_insert(&reg->names, &name->node, h);
	if (r < 0) {
		free(name);
		return r;
	}
	*namep = name;
	return 0;
}

static int name_create(struct name_registry *reg, struct name_owner *owner, const char *str,
		       uint64_t h, uint32_t flags)
{
	struct name_ownership *o;
	struct name *name;
	int r;

	r = name_alloc(reg, str, h, &name);
	if (r < 0)
		return r;
	o = ownership_new(name, owner, flags);
	if (!o) {
		hmap_remove(&reg->names, &name->node);
		free(name);
		return -ENOMEM;
	}
	list_append(&name->queue, &o->name_link);
	name->n_queued = 1;
	list_append(&reg->name_list, &name->registry_link);
	reg->n_names++;
	emit(reg, NAME_EVENT_OWNER_CHANGED, name->str, NULL, owner);
	emit(reg, NAME_EVENT_ACQUIRED, name->str, NULL, owner);
	return 0;
}

int name_registry_request(struct name_registry *reg, struct name_owner *owner,
			  const char *str, uint32_t flags, uint32_t *replyp)
{
	struct name_ownership *primary, *mine;
	struct name *name;
	uint64_t h;
	int r;

	r = check_name(str);
	if (r)
		return r;
	flags &= NAME_FLAG_MASK;

	h = hash_str(str);
	name = name_lookup_hashed(reg, str, h);
	if (!name) {
		r = name_create(reg, owner, str, h, flags);
		if (r < 0)
			return r;
		*replyp = NAME_REQUEST_PRIMARY_OWNER;
		return 0;
	}

	/* A name in the index has an owner: it goes with its last one. */
	primary = name_primary(name);
	assert(primary);
	if (primary->owner == owner) {
		primary->flags = flags;
		*replyp = NAME_REQUEST_ALREADY_OWNER;
		return 0;
	}

	mine = name_find_ownership(name, owner);
	if (!(flags & NAME_FLAG_REPLACE_EXISTING) ||
	    !(primary->flags & NAME_FLAG_ALLOW_REPLACEMENT)) {
		if (flags & NAME_FLAG_DO_NOT_QUEUE) {
			/* It cannot be queued, so it must not stay queued either. */
			if (mine)
				ownership_free(mine);
			*replyp = NAME_REQUEST_EXISTS;
			return 0;
		}
		if (mine) {
			if (flags & NAME_FLAG_REPLACE_EXISTING) {
				list_unlink(&mine->name_link);
				queue_insert_second(name, mine);
			}
			mine->flags = flags;
		} else {
			mine = ownership_new(name, owner, flags);
			if (!mine)
				return -ENOMEM;
			/* dbus-daemon puts a new REPLACE_EXISTING waiter first in line. */
			if (flags & NAME_FLAG_REPLACE_EXISTING)
				queue_insert_second(name, mine);
			else
				list_append(&name->queue, &mine->name_link);
			name->n_queued++;
		}
		*replyp = NAME_REQUEST_IN_QUEUE;
		return 0;
	}

	/* Replacement: the requester becomes primary. */
	if (mine) {
		list_unlink(&mine->name_link);
		mine->flags = flags;
	} else {
		mine = ownership_new(name, owner, flags);
		if (!mine)
			return -ENOMEM;
		name->n_queued++;
	}
	queue_insert_second(name, mine);

	if (primary->flags & NAME_FLAG_DO_NOT_QUEUE) {
		name_drop_primary(reg, name, primary);
	} else {
		struct name_owner *old_owner = primary->owner;

		/* The old primary becomes the first waiter behind the new one. */
		list_unlink(&primary->name_link);
		queue_insert_second(name, primary);
		emit(reg, NAME_EVENT_LOST, name->str, old_owner, NULL);
		emit(reg, NAME_EVENT_OWNER_CHANGED, name->str, old_owner, owner);
		emit(reg, NAME_EVENT_ACQUIRED, name->str, old_owner, owner);
	}
	*replyp = NAME_REQUEST_PRIMARY_OWNER;
	return 0;
}

static void release_ownership(struct name_registry *reg, struct name_ownership *o)
{
	struct name *name = o->name;

	if (name_primary(name) == o)
		name_drop_primary(reg, name, o);
	else
		ownership_free(o); /* a waiter leaves silently */
}

int name_registry_release(struct name_registry *reg, struct name_owner *owner,
			  const char *str, uint32_t *replyp)
{
	struct name_ownership *o;
	struct name *name;
	int r;

	r = check_name(str);
	if (r)
		return r;
	name = name_registry_find(reg, str);
	if (!name) {
		*replyp = NAME_RELEASE_NON_EXISTENT;
		return 0;
	}
	o = name_find_ownership(name, owner);
	if (!o) {
		*replyp = NAME_RELEASE_NOT_OWNER;
		return 0;
	}
	release_ownership(reg, o);
	*replyp = NAME_RELEASE_RELEASED;
	return 0;
}

void name_registry_release_all(struct name_registry *reg, struct name_owner *owner)
{
	while (!list_is_empty(&owner->ownerships)) {
		struct name_ownership *o = list_entry(list_last(&owner->ownerships),
						      struct name_ownership, owner_link);

		release_ownership(reg, o);
	}
}

void name_registry_remove_unique_first(struct name_registry *reg, struct name_owner *owner)
{
	unique_drop(reg, owner);
	while (!list_is_empty(&owner->ownerships))
		release_ownership(reg, list_entry(list_first(&owner->ownerships),
						  struct name_ownership, owner_link));
}

/* ------------------------------------------------------------------ re-exec */

static int name_registry_restore_name(struct name_registry *reg, const char *str)
{
	uint64_t h = hash_str(str);
	struct name *name;
	int r;

	if (check_name(str))
		return -EINVAL;
	if (name_lookup_hashed(reg, str, h))
		return -EEXIST;
	r = name_alloc(reg, str, h, &name);
	if (r < 0)
		return r;
	list_append(&reg->name_list, &name->registry_link);
	reg->n_names++;
	return 0;
}

int name_registry_restore_unique(struct name_registry *reg, struct name_owner *owner)
{
	int r;

	if (owner->registry)
		return -EALREADY;
	if (name_registry_find_unique(reg, owner->unique_name))
		return -EEXIST;
	r = by_id_reserve(reg);
	if (r < 0)
		return r;
	r = hmap_insert(&reg->uniques, &owner->unique_node, hash_str(owner->unique_name));
	if (r < 0)
		return r;
	/* In the state's order, which is accept order: sorted by _done(). */
	by_id_append(reg, owner);
	owner->registry = reg;
	return 0;
}

static int name_registry_restore_ownership(struct name_registry *reg,
					   struct name_owner *owner,
					   const struct name_owned_state *st)
{
	struct name *name;
	struct name_ownership *o, *pos;
	struct list_node *at;
	uint32_t queue_pos = st->pos;

	if (st->name)
		name = name_lookup_hashed(reg, st->name, hash_str(st->name));
	else
		name = st->index < reg->n_restored ? reg->restored[st->index] : NULL;
	if (!name)
		return -ENOENT;
	if (name_find_ownership(name, owner))
		return -EEXIST;
	o = ownership_new(name, owner, st->flags & NAME_FLAG_MASK);
	if (!o)
		return -ENOMEM;
	o->state_pos = queue_pos;
	/* Queues come back mostly in order: look for the place from the tail. */
	at = &name->queue;
	while (at->prev != &name->queue) {
		pos = list_entry(at->prev, struct name_ownership, name_link);
		if (pos->state_pos < queue_pos)
			break;
		at = at->prev;
	}
	list_insert_between(&o->name_link, at->prev, at);
	name->n_queued++;
	return 0;
}

void name_registry_restore_done(struct name_registry *reg)
{
	struct name *name, *tmp;

	free(steal_ptr(reg->restored));
	reg->n_restored = 0;
	list_for_each_entry_safe(name, tmp, &reg->name_list, registry_link)
		if (list_is_empty(&name->queue))
			name_free(name);
	/* Here rather than in the first page someone asks for. */
	by_id_sort(reg);
}

void name_registry_serialize(struct name_registry *reg, struct state_writer *w)
{
	struct name_ownership *o;
	struct name *name;
	uint32_t i = 0, pos;

	state_put_section(w, STATE_TAG_NAME, NAME_REGISTRY_STATE_VERSION);
	state_put_u64(w, reg->n_names);
	list_for_each_entry(name, &reg->name_list, registry_link) {
		state_put_str(w, name->str);
		name->state_index = i++;
		/* Each place once here, not by walking the queue per ownership. */
		pos = 0;
		list_for_each_entry(o, &name->queue, name_link)
			o->state_pos = pos++;
	}
}

bool name_registry_state_read(struct state_reader *r, struct name_registry_state *st)
{
	uint32_t version;
	size_t n;

	*st = (struct name_registry_state){};
	if (!state_section(r, STATE_TAG_NAME, NAME_REGISTRY_STATE_VERSION, &version))
		return false;
	n = state_get_count(r, 9);
	st->names = calloc(n ? n : 1, sizeof(*st->names));
	if (!st->names) {
		r->error = true;
		return false;
	}
	st->n_names = n;
	for (size_t i = 0; i < n && !r->error; i++)
		if (!(st->names[i] = state_get_str(r)))
			r->error = true;
	return !r->error;
}

void name_registry_state_deinit(struct name_registry_state *st)
{
	free(st->names);
	*st = (struct name_registry_state){};
}

int name_registry_restore(struct name_registry *reg, const struct name_registry_state *st)
{
	int r;

	hmap_reserve(&reg->names, st->n_names);
	reg->restored = calloc(st->n_names ? st->n_names : 1, sizeof(*reg->restored));
	if (!reg->restored)
		return -ENOMEM;
	for (size_t i = 0; i < st->n_names; i++) {
		r = name_registry_restore_name(reg, st->names[i]);
		if (r < 0)
			return r;
		reg->restored[reg->n_restored++] = list_entry(list_last(&reg->name_list),
							      struct name, registry_link);
	}
	return 0;
}

/* After name_registry_serialize(): the ownerships by their name's place. */
void name_owner_serialize(const struct name_owner *owner, struct state_writer *w)
{
	const struct name_ownership *o;

	state_put_section(w, STATE_TAG_OWNER, NAME_OWNER_STATE_VERSION);
	state_put_u64(w, owner->n_ownerships);
	list_for_each_entry(o, &owner->ownerships, owner_link) {
		state_put_u32(w, o->name->state_index);
		state_put_u32(w, o->flags);
		state_put_u32(w, o->state_pos);
	}
}

bool name_owner_state_read(struct state_reader *r, struct name_owner_state *st, size_t n_names)
{
	uint32_t version;
	size_t n;

	*st = (struct name_owner_state){};
	if (!state_section(r, STATE_TAG_OWNER, NAME_OWNER_STATE_VERSION, &version))
		return false;
	n = state_get_count(r, version >= 2 ? 12 : 16);
	if (!n)
		return !r->error;
	st->owned = calloc(n, sizeof(*st->owned));
	if (!st->owned) {
		r->error = true;
		return false;
	}
	st->n_owned = n;
	for (size_t i = 0; i < n; i++) {
		struct name_owned_state *o = &st->owned[i];

		if (version >= 2) {
			o->index = state_get_u32(r);
			if (o->index >= n_names)
				r->error = true;
		} else if (!(o->name = state_get_str(r))) {
			r->error = true;
		}
		o->flags = state_get_u32(r);
		o->pos = state_get_u32(r);
	}
	return !r->error;
}

void name_owner_state_deinit(struct name_owner_state *st)
{
	free(st->owned);
	*st = (struct name_owner_state){};
}

int name_owner_restore(struct name_registry *reg, struct name_owner *owner,
		       const struct name_owner_state *st)
{
	for (size_t i = 0; i < st->n_owned; i++) {
		int r = name_registry_restore_ownership(reg, owner, &st->owned[i]);

		if (r < 0)
			return r;
	}
	return 0;
}
