/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The container instances across a re-exec (state.h): their section, written
 * only when there is an instance (so that a stream without any is one an
 * older program reads too), read, and restored after the peers.
 */

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "broker/core/bus.h"
#include "broker/containers/container.h"
#include "broker/containers/container-filter.h"
#include "broker/transport/listener.h"
#include "broker/objects/peer.h"
#include "broker/objects/state.h"
#include "util/macro.h"

/* 2: the filter and what each of its connections learned (container-filter.h). */
#define CONTAINER_STATE_VERSION 3

void container_registry_serialize(const struct container_registry *reg, struct state_writer *w,
				  uint32_t (*index)(const void *peer))
{
	const struct container_member *m;
	const struct container *c;
	uint64_t n;

	if (list_is_empty(&reg->instances))
		return;
	state_put_section(w, STATE_TAG_CONTAINER, CONTAINER_STATE_VERSION);
	state_put_u64(w, reg->next_id);
	state_put_u64(w, reg->n_instances);
	list_for_each_entry(c, &reg->instances, link) {
		state_put_u64(w, c->id);
		state_put_str(w, c->path);	/* version 3 */
		state_put_str(w, c->type);
		state_put_str(w, c->name);
		state_put_bytes(w, c->metadata, c->n_metadata);
		state_put_bytes(w, c->creator_creds, c->n_creator_creds);
		state_put_u32(w, (uint32_t)c->creator_uid);
		state_put_u32(w, c->creator ? index(c->creator) : UINT32_MAX);
		state_put_u32(w, c->stop_on_disconnect);
		/* -1: it no longer listens. */
		state_put_fd(w, c->listener ? c->listener->fds[0] : -1);
		state_put_str(w, c->socket_path);
		state_put_str(w, c->listener ? c->listener->address : NULL);
		/* A member not written (before Hello, in a crash snapshot) is left out. */
		n = 0;
		list_for_each_entry(m, &c->members, link)
			n += index(m->attachment.peer) != UINT32_MAX;
		state_put_u64(w, n);
		list_for_each_entry(m, &c->members, link)
			if (index(m->attachment.peer) != UINT32_MAX)
				state_put_u32(w, index(m->attachment.peer));
		/* Version 2: the filter's options (none: unfiltered), each member's view. */
		state_put_u32(w, !!c->filter);
		if (!c->filter)
			continue;
		state_put_u64(w, c->filter->n_options);
		for (size_t i = 0; i < c->filter->n_options; i++)
			state_put_str(w, c->filter->options[i]);
		list_for_each_entry(m, &c->members, link) {
			if (index(m->attachment.peer) == UINT32_MAX)
				continue;
			state_put_u32(w, !!m->view);
			if (m->view)
				filter_view_serialize(m->view, w, index);
		}
	}
}

/* The filter of @c and its members' views (version 2); errors set r->error. */
static void container_filter_state_read(struct state_reader *r, struct container_state *c,
					size_t n_peers)
{
	c->has_filter = true;
	c->n_options = state_get_count(r, 4);
	c->options = calloc(c->n_options ? c->n_options : 1, sizeof(*c->options));
	c->views = calloc(c->n_members ? c->n_members : 1, sizeof(*c->views));
	if (!c->options || !c->views || c->n_options > FILTER_MAX_OPTIONS) {
		r->error = true;
		return;
	}
	for (size_t i = 0; i < c->n_options && !r->error; i++)
		if (!(c->options[i] = state_get_str(r)))
			r->error = true;
	for (size_t j = 0; j < c->n_members && !r->error; j++) {
		if (!state_get_u32(r))
			continue;
		c->views[j].present = true;
		(void)filter_view_state_read(r, &c->views[j], n_peers);
	}
}

bool container_registry_state_read(struct state_reader *r, struct container_registry_state *st,
				   size_t n_peers)
{
	uint32_t version;

	*st = (struct container_registry_state){};
	if (!state_next_is(r, STATE_TAG_CONTAINER))
		return !r->error;
	if (!state_section(r, STATE_TAG_CONTAINER, CONTAINER_STATE_VERSION, &version))
		return false;
	st->next_id = state_get_u64(r);
	st->n = state_get_count(r, 40);
	st->v = calloc(st->n ? st->n : 1, sizeof(*st->v));
	if (!st->v) {
		r->error = true;
		return false;
	}
	for (size_t i = 0; i < st->n && !r->error; i++) {
		struct container_state *c = &st->v[i];

		c->id = state_get_u64(r);
		if (version >= 3) {
			c->path = state_get_str(r);
			if (!c->path || strncmp(c->path, CONTAINER_PATH_PREFIX,
						strlen(CONTAINER_PATH_PREFIX)))
				r->error = true;
		}
		c->type = state_get_str(r);
		c->name = state_get_str(r);
		c->metadata = state_get_bytes(r, &c->n_metadata);
		c->creds = state_get_bytes(r, &c->n_creds);
		c->creator_uid = state_get_u32(r);
		c->creator_index = state_get_u32(r);
		c->stop_on_disconnect = state_get_u32(r) != 0;
		c->fd = state_get_fd_or_none(r);
		c->socket_path = state_get_str(r);
		c->address = state_get_str(r);
		c->n_members = state_get_count(r, 4);
		c->members = calloc(c->n_members ? c->n_members : 1, sizeof(*c->members));
		if (!c->members) {
			r->error = true;
			break;
		}
		for (size_t j = 0; j < c->n_members; j++) {
			c->members[j] = state_get_u32(r);
			if (c->members[j] >= n_peers)
				r->error = true;
		}
		if (version >= 2 && !r->error && state_get_u32(r))
			container_filter_state_read(r, c, n_peers);
		if (!c->type || !c->name || !c->metadata || !c->creds || !c->socket_path ||
		    c->id >= st->next_id || (c->fd >= 0) != !!c->address ||
		    (c->creator_index != UINT32_MAX && c->creator_index >= n_peers))
			r->error = true;
	}
	return !r->error;
}

void container_registry_state_deinit(struct container_registry_state *st)
{
	for (size_t i = 0; i < st->n; i++) {
		free(st->v[i].members);
		free(st->v[i].options);
		if (st->v[i].views)
			for (size_t j = 0; j < st->v[i].n_members; j++)
				filter_view_state_deinit(&st->v[i].views[j]);
		free(st->v[i].views);
	}
	free(st->v);
	*st = (struct container_registry_state){};
}

static int container_restore_one(struct container_registry *reg, const struct container_state *s,
				 struct peer *const *peers)
{
	_cleanup_free_ char *old_path = NULL;
	struct container *c;
	int r;

	/* A bus before version 3 counted: its instances keep the paths their clients know. */
	if (!s->path && asprintf(&old_path, CONTAINER_PATH_PREFIX "%llu",
				 (unsigned long long)s->id) < 0)
		return -ENOMEM;
	if (container_find(reg, s->path ? s->path : old_path))
		return -EINVAL;		/* twice: not a state we wrote */
	r = container_new(reg, s->id, s->path ? s->path : old_path, s->type, s->name,
			  s->metadata, s->n_metadata, s->creds, s->n_creds,
			  (uid_t)s->creator_uid, s->stop_on_disconnect, &c);
	if (r < 0)
		return r;
	if (s->creator_index != UINT32_MAX) {
		r = container_set_creator(c, peers[s->creator_index]);
		if (r < 0)
			return r;
	}
	c->socket_path = strdup(s->socket_path);
	if (!c->socket_path)
		return -ENOMEM;
	if (s->fd >= 0) {
		r = listener_new_restored(&c->listener, reg->bus, &s->fd, 1, false, NULL,
					  s->address, s->socket_path, NULL);
		if (r < 0)
			return r;
		container_listening(c);
		r = listener_attach(c->listener);
		if (r < 0)
			return r;
	}
	if (s->has_filter) {
		_cleanup_free_ char *errtext = NULL;

		r = container_filter_new(&c->filter, s->options, s->n_options, &errtext);
		if (r)
			return r < 0 ? r : -EINVAL;
	}
	for (size_t j = 0; j < s->n_members; j++) {
		struct peer *p = peers[s->members[j]];
		struct filter_view *view;

		r = container_join(c, p);
		if (r < 0)
			return r;
		view = container_filter_view(p);
		if (!view || !s->views[j].present)
			continue;
		r = filter_view_restore(view, &s->views[j], peers);
		if (r < 0)
			return r;
	}
	return 0;
}

int container_registry_restore(struct container_registry *reg,
			       const struct container_registry_state *st,
			       struct peer *const *peers)
{
	reg->next_id = st->next_id;
	for (size_t i = 0; i < st->n; i++) {
		int r = container_restore_one(reg, &st->v[i], peers);

		if (r < 0)
			return r;
	}
	return 0;
}
