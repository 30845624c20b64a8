/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Peers across a re-exec: their section of the state. See peer-state.h.
 */

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "broker/core/bus.h"
#include "broker/objects/log.h"
#include "broker/upgrade/peer-state.h"
#include "broker/policy/policy.h"
#include "broker/core/router.h"
#include "broker/objects/state.h"
#include "broker/objects/user.h"

int peer_serialize(struct peer *p, struct state_writer *w)
{
	struct connection *conn = connection_of(p);
	struct peer_output_stats out;
	/*
	 * The crash journal stores every fd it writes: a pidfd the socket
	 * gives again is one store entry's fd less per Hello.
	 */
	bool pidfd_again = w->crash && p->creds.pidfd >= 0 && p->creds.pidfd_of_socket;
	int r;

	state_put_fd(w, connection_get_fd(conn));
	state_put_u32(w, (p->registered ? PEER_STATE_REGISTERED : 0) |
			 (p->monitor ? PEER_STATE_MONITOR : 0) |
			 (p->unix_fds ? PEER_STATE_UNIX_FDS : 0) |
			 (p->anonymous ? PEER_STATE_ANONYMOUS : 0) |
			 (p->socket_identity ? PEER_STATE_SOCKET_IDENTITY : 0) |
			 (p->creds.have_creds ? PEER_STATE_HAVE_CREDS : 0) |
			 (p->creds.groups_unknown ? PEER_STATE_GROUPS_UNKNOWN : 0) |
			 (pidfd_again ? PEER_STATE_PIDFD_OF_SOCKET : 0));
	state_put_u32(w, (uint32_t)p->creds.pid);
	state_put_u32(w, (uint32_t)p->creds.uid);
	state_put_u32(w, (uint32_t)p->creds.gid);
	state_put_u64(w, p->creds.n_groups);
	for (size_t i = 0; i < p->creds.n_groups; i++)
		state_put_u32(w, (uint32_t)p->creds.groups[i]);
	state_put_str(w, p->creds.label);
	state_put_fd(w, pidfd_again ? -1 : p->creds.pidfd);
	state_put_u32(w, (uint32_t)p->uid);
	state_put_u32(w, (uint32_t)p->pid);
	state_put_u64(w, p->owner.id);
	state_put_u64(w, p->n_incoming);
	state_put_u64(w, p->n_outgoing);
	/* The peaks of all its transports, which the socket's carry from now on. */
	peer_output_stats(p, &out);
	state_put_u64(w, out.peak_bytes);
	state_put_u64(w, out.peak_fds);
	state_put_u64(w, p->peak_dispatching_bytes);
	state_put_u64(w, p->peak_dispatching_fds);
	state_put_u32(w, p->owner.peak_names);
	state_put_u32(w, p->matches.peak_rules);
	/* Version 2: Debug.Stats' counts of refusals. */
	state_put_u64(w, p->refusals.n[REFUSAL_LIMITS]);
	state_put_u64(w, p->refusals.n[REFUSAL_POLICY]);
	state_put_u64(w, p->refusals.n[REFUSAL_DROPPED]);
	state_put_u64(w, p->refusals.n[REFUSAL_QUEUE_FULL]);

	r = connection_serialize(conn, w);
	if (r < 0)
		return r;
	r = match_owner_serialize(&p->matches, w);
	if (r < 0)
		return r;
	name_owner_serialize(&p->owner, w);
	native_conn_serialize(p, w);
	return 0;
}

int peer_serialize_all(struct bus *bus, struct state_writer *w)
{
	struct peer *p;
	uint32_t n = 0;
	int r;

	list_for_each_entry(p, &bus->peers, bus_link) {
		/* Every peer arrives through a socket connection (peer.h). */
		if (!connection_of(p))
			return -EINVAL;
		/* A crash closes a peer before Hello anyway: not in a crash snapshot. */
		p->state_index = w->crash && !p->registered ? UINT32_MAX : n++;
	}
	state_put_section(w, STATE_TAG_PEER, PEER_STATE_VERSION);
	state_put_u64(w, n);
	list_for_each_entry(p, &bus->peers, bus_link) {
		if (p->state_index == UINT32_MAX)
			continue;
		r = peer_serialize(p, w);
		if (r < 0)
			return r;
	}
	return 0;
}

uint32_t peer_state_index(const void *peer)
{
	const struct peer *p = peer;

	/* A closed peer is not in the state: its place would be another's. */
	return p->closed ? UINT32_MAX : p->state_index;
}

void peer_state_read(struct state_reader *r, struct peer_state *p, size_t n_names,
		     uint32_t version)
{
	size_t n;

	p->conn.fd = state_get_fd(r);
	p->flags = state_get_u32(r);
	p->creds_pid = (pid_t)state_get_u32(r);
	p->creds_uid = (uid_t)state_get_u32(r);
	p->creds_gid = (gid_t)state_get_u32(r);
	n = state_get_count(r, 4);
	if (n) {
		p->groups = calloc(n, sizeof(*p->groups));
		if (!p->groups) {
			r->error = true;
			return;
		}
		p->n_groups = n;
		for (size_t i = 0; i < n; i++)
			p->groups[i] = (gid_t)state_get_u32(r);
	}
	p->label = state_get_str(r);
	p->pidfd = state_get_fd_or_none(r);
	p->uid = (uid_t)state_get_u32(r);
	p->pid = (pid_t)state_get_u32(r);
	p->id = state_get_u64(r);
	p->n_incoming = state_get_u64(r);
	p->n_outgoing = state_get_u64(r);
	p->peak_queued_bytes = state_get_u64(r);
	p->peak_queued_fds = state_get_u64(r);
	p->peak_dispatching_bytes = state_get_u64(r);
	p->peak_dispatching_fds = state_get_u64(r);
	p->peak_names = state_get_u32(r);
	p->peak_matches = state_get_u32(r);
	if (version >= 2) {
		p->refusals.n[REFUSAL_LIMITS] = state_get_u64(r);
		p->refusals.n[REFUSAL_POLICY] = state_get_u64(r);
		p->refusals.n[REFUSAL_DROPPED] = state_get_u64(r);
		p->refusals.n[REFUSAL_QUEUE_FULL] = state_get_u64(r);
	}
	if (p->flags & PEER_STATE_MONITOR && !(p->flags & PEER_STATE_REGISTERED))
		r->error = true;

	if (!connection_state_read(r, &p->conn) || !match_owner_state_read(r, &p->matches) ||
	    !name_owner_state_read(r, &p->names, n_names))
		return;
	native_conn_state_read(r, &p->native, &p->nstate);
}

bool peer_state_read_all(struct state_reader *r, struct peer_state **statesp, size_t *np,
			 size_t n_names)
{
	struct peer_state *v;
	uint32_t version;
	size_t n;

	*statesp = NULL;
	*np = 0;
	if (!state_section(r, STATE_TAG_PEER, PEER_STATE_VERSION, &version))
		return false;
	n = state_get_count(r, 64);
	v = calloc(n ? n : 1, sizeof(*v));
	if (!v) {
		r->error = true;
		return false;
	}
	*statesp = v;
	*np = n;
	for (size_t i = 0; i < n && !r->error; i++)
		peer_state_read(r, &v[i], n_names, version);
	return !r->error;
}

void peer_state_deinit(struct peer_state *p)
{
	free(p->groups);
	connection_state_deinit(&p->conn);
	match_owner_state_deinit(&p->matches);
	name_owner_state_deinit(&p->names);
	native_conn_state_deinit(&p->nstate);
}

void peer_state_free_all(struct peer_state *states, size_t n)
{
	for (size_t i = 0; i < n; i++)
		peer_state_deinit(&states[i]);
	free(states);
}

/* Registered: its unique name, rules and names, charged as when they came. */
static int peer_restore_registered(struct peer *p, const struct peer_state *st)
{
	struct bus *bus = p->bus;
	struct match_rule *rule;
	int r;

	name_owner_init(&p->owner, st->id);
	/* A monitor's unique name left the registry when it became one (monitor.c). */
	if (!(st->flags & PEER_STATE_MONITOR)) {
		r = name_registry_restore_unique(bus->names, &p->owner);
		if (r < 0)
			return r;
	}
	/* As peer_set_registered(), without resuming listeners not attached yet. */
	p->registered = true;
	bus->n_active++;
	bus->n_incomplete--;
	(void)peer_charge(p, USER_SLOT_CONNECTIONS, 1);

	p->monitor = st->flags & PEER_STATE_MONITOR;
	if (p->monitor)
		list_append(&bus->monitors, &p->monitor_link);
	r = match_owner_restore(p->monitor ? bus->monitor_matches : bus->matches, &p->matches,
				&st->matches);
	if (r < 0)
		return r;
	if (!p->monitor) {
		/* One by one, as AddMatch charged them: the user's limit may have changed. */
		list_for_each_entry(rule, &p->matches.rules, owner_link) {
			bus->n_eavesdrop_rules += rule->eavesdrop;
			(void)peer_charge(p, USER_SLOT_MATCHES, 1);
		}
	}
	r = name_owner_restore(bus->names, &p->owner, &st->names);
	if (r < 0)
		return r;
	router_sync_name_charge(p);
	return 0;
}

int peer_restore(struct bus *bus, const struct peer_state *st, struct peer **peerp)
{
	struct socket_creds creds = {
		.have_creds = st->flags & PEER_STATE_HAVE_CREDS,
		.groups_unknown = st->flags & PEER_STATE_GROUPS_UNKNOWN,
		.pid = st->creds_pid,
		.uid = st->creds_uid,
		.gid = st->creds_gid,
		.n_groups = st->n_groups,
		.pidfd = st->pidfd,
		.pidfd_of_socket = st->flags & PEER_STATE_PIDFD_OF_SOCKET,
	};
	struct peer *p;
	int r;

	if (creds.pidfd_of_socket && creds.pidfd < 0)
		creds.pidfd = socket_peer_pidfd(st->conn.fd);

	if (st->n_groups) {
		creds.groups = malloc(st->n_groups * sizeof(*creds.groups));
		if (!creds.groups)
			return -ENOMEM;
		memcpy(creds.groups, st->groups, st->n_groups * sizeof(*creds.groups));
	}
	if (st->label && !(creds.label = strdup(st->label))) {
		free(creds.groups);
		return -ENOMEM;
	}
	r = connection_new_restored(&p, bus, st->conn.fd, &creds, &st->conn.snap, st->conn.spare,
				    st->conn.n_spare);
	if (r < 0)
		return r;
	*peerp = p;

	p->uid = st->uid;
	p->pid = st->pid;
	p->socket_identity = st->flags & PEER_STATE_SOCKET_IDENTITY;
	p->unix_fds = st->flags & PEER_STATE_UNIX_FDS;
	p->anonymous = st->flags & PEER_STATE_ANONYMOUS;
	p->authenticated = true;
	p->n_incoming = st->n_incoming;
	p->n_outgoing = st->n_outgoing;
	connection_of(p)->peak_queued_bytes = st->peak_queued_bytes;
	connection_of(p)->peak_queued_fds = st->peak_queued_fds;
	p->peak_dispatching_bytes = st->peak_dispatching_bytes;
	p->peak_dispatching_fds = st->peak_dispatching_fds;
	p->owner.peak_names = st->peak_names;
	p->matches.peak_rules = st->peak_matches;
	/* Its user's counts start again from those of its connections. */
	p->refusals = st->refusals;
	if (p->user)
		for (size_t i = 0; i < _REFUSAL_N; i++)
			p->user->refusals.n[i] += st->refusals.n[i];
	/* The rules of the configuration loaded now (it may have changed). */
	r = policy_setup_peer(p);
	if (r < 0)
		return r;
	if (r == POLICY_E_REFUSED)
		log_info("re-exec: %u would not be allowed to connect now; it stays",
			 (unsigned int)p->uid);

	/* A native client's output is its bus1 node again (after its bootstrap). */
	if (st->native) {
		r = native_conn_restore(native_of_bus(bus), p, &st->nstate);
		if (r < 0)
			return r;
	}
	if (!(st->flags & PEER_STATE_REGISTERED))
		return 0;
	return peer_restore_registered(p, st);
}

void peer_restored(struct peer *peer)
{
	connection_restored(connection_of(peer));
}
