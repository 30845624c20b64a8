/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Re-executing a live bus: the state out, the check, the exec, the state in.
 * See reexec.h.
 */

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <systemd/sd-daemon.h>
#include "broker/activation.h"
#include "broker/broker.h"
#include "broker/connection.h"
#include "broker/fdstore.h"
#include "broker/listener.h"
#include "broker/log.h"
#include "broker/match.h"
#include "broker/name.h"
#include "broker/native.h"
#include "broker/peer.h"
#include "broker/policy.h"
#include "broker/reexec.h"
#include "broker/reload.h"
#include "broker/reply.h"
#include "broker/router.h"
#include "broker/state.h"
#include "conf/config.h"
#include "dbus-compat/message.h"

extern char **environ;

/* Bits of a peer's flags in the state. */
enum {
	PEER_STATE_REGISTERED = 1 << 0,
	PEER_STATE_MONITOR = 1 << 1,
	PEER_STATE_UNIX_FDS = 1 << 2,
	PEER_STATE_ANONYMOUS = 1 << 3,
	PEER_STATE_SOCKET_IDENTITY = 1 << 4,
	PEER_STATE_HAVE_CREDS = 1 << 5,
};

/*
 * A re-exec waits for the clients in SASL at most as long as auth_timeout
 * gives them (then they are gone), plus a second; 30 s without a timeout.
 * It looks every REEXEC_WAIT_POLL_USEC.
 */
#define REEXEC_WAIT_MAX_MSEC(broker)							\
	((broker)->bus.limits.auth_timeout > 0 ?					\
		 (uint64_t)(broker)->bus.limits.auth_timeout + 1000 : UINT64_C(30000))
#define REEXEC_WAIT_POLL_USEC (5 * 1000)

/* A match rule's text is far below this (the parser refuses longer ones). */
#define REEXEC_RULE_MAX 8192

/* ------------------------------------------------------------- parsed state */

struct ps_listener {
	int fds[ADDRESS_TCP_FDS_MAX];
	size_t n_fds;
	bool tcp;
	bool has_nonce;
	bool full;
	const uint8_t *nonce;
	const char *address;
	const char *unlink_path;
	const char *nonce_file;
};

struct ps_rule {
	const char *text;
	bool eavesdrop;
};

struct ps_owned {
	const char *name;
	uint32_t flags;
	uint32_t pos;
};

struct ps_peer {
	int fd;
	uint32_t flags;
	pid_t creds_pid;
	uid_t creds_uid;
	gid_t creds_gid;
	gid_t *groups;
	size_t n_groups;
	const char *label;
	int pidfd;
	uid_t uid;
	pid_t pid;
	uint64_t id;
	uint64_t n_incoming;
	uint64_t n_outgoing;
	uint64_t peak_queued_bytes;
	uint64_t peak_queued_fds;
	uint64_t peak_dispatching_bytes;
	uint64_t peak_dispatching_fds;
	uint32_t peak_names;
	uint32_t peak_matches;
	int *spare;
	size_t n_spare;
	struct socket_snapshot snap;
	struct ps_rule *rules;
	size_t n_rules;
	struct ps_owned *owned;
	size_t n_owned;
	bool native;
	struct native_conn_state nstate;
	uint32_t *uids;
};

struct ps_child {
	pid_t pid;
	int err_fd;
	bool helper;
	const char *name;
};

/* A queued request of a pending activation: its message, whole, with its fds. */
struct ps_entry {
	uint32_t sender;		/* peer position, or PS_NO_SENDER */
	bool auto_start;
	const uint8_t *header;
	size_t n_header;
	const uint8_t *body;
	size_t n_body;
	int *fds;
	size_t n_fds;
};

#define PS_NO_SENDER UINT32_MAX

struct ps_pending {
	struct activation_pending_info info;
	struct ps_entry *entries;
	size_t n_entries;
};

struct ps_reply {
	uint32_t callee;
	uint32_t caller;
	uint32_t serial;
	uint64_t deadline;
};

/* Everything of a state stream, checked; strings point into the reader. */
struct parsed_state {
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
	int native_fd;

	struct ps_listener *listeners;
	size_t n_listeners;
	const char **names;
	size_t n_names;
	struct ps_peer *peers;
	size_t n_peers;
	struct ps_reply *replies;
	size_t n_replies;
	const char **env;
	size_t n_env;
	struct ps_child *children;
	size_t n_children;
	struct ps_pending *pendings;
	size_t n_pendings;
};

/* Frees what parsing allocated; closes no fd. */
static void parsed_state_deinit(struct parsed_state *ps)
{
	for (size_t i = 0; i < ps->n_peers; i++) {
		struct ps_peer *p = &ps->peers[i];

		free(p->groups);
		free(p->spare);
		free(p->rules);
		free(p->owned);
		free(p->uids);
		for (size_t j = 0; j < p->snap.n_in_fds; j++)
			free(p->snap.in_fds[j].fds);
		free(p->snap.in_fds);
		for (size_t j = 0; j < p->snap.n_out; j++)
			free(p->snap.out[j].fds);
		free(p->snap.out);
	}
	free(ps->peers);
	free(ps->listeners);
	free(ps->names);
	free(ps->replies);
	free(ps->env);
	free(ps->children);
	for (size_t i = 0; i < ps->n_pendings; i++) {
		for (size_t j = 0; j < ps->pendings[i].n_entries; j++)
			free(ps->pendings[i].entries[j].fds);
		free(ps->pendings[i].entries);
	}
	free(ps->pendings);
	*ps = (struct parsed_state){};
}

/* An array of @n fds from the stream (allocated), or NULL with r->error set. */
static int *parse_fds(struct state_reader *r, size_t *np)
{
	size_t n = state_get_count(r, 4);
	int *v;

	*np = 0;
	if (r->error || n == 0)
		return NULL;
	v = calloc(n, sizeof(*v));
	if (!v) {
		r->error = true;
		return NULL;
	}
	for (size_t i = 0; i < n; i++)
		v[i] = state_get_fd(r);
	*np = n;
	return v;
}

static void parse_snapshot(struct state_reader *r, struct socket_snapshot *snap)
{
	size_t n;

	*snap = (struct socket_snapshot){};
	n = state_get_u32(r);
	snap->framing = n & 1;
	snap->eof = n & 2;
	snap->violation = n & 4;
	snap->in = (uint8_t *)state_get_bytes(r, &snap->n_in);
	n = state_get_count(r, 24);
	if (n) {
		snap->in_fds = calloc(n, sizeof(*snap->in_fds));
		if (!snap->in_fds) {
			r->error = true;
			return;
		}
		snap->n_in_fds = n;
		for (size_t i = 0; i < n && !r->error; i++) {
			snap->in_fds[i].start = (size_t)state_get_u64(r);
			snap->in_fds[i].end = (size_t)state_get_u64(r);
			snap->in_fds[i].fds = parse_fds(r, &snap->in_fds[i].n_fds);
		}
	}
	n = state_get_count(r, 16);
	if (n) {
		snap->out = calloc(n, sizeof(*snap->out));
		if (!snap->out) {
			r->error = true;
			return;
		}
		snap->n_out = n;
		for (size_t i = 0; i < n && !r->error; i++) {
			snap->out[i].data = (uint8_t *)state_get_bytes(r, &snap->out[i].n_data);
			snap->out[i].fds = parse_fds(r, &snap->out[i].n_fds);
		}
	}
}

static void parse_peer(struct state_reader *r, struct ps_peer *p)
{
	size_t n;

	p->fd = state_get_fd(r);
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
	p->pidfd = state_get_i32(r);
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
	p->spare = parse_fds(r, &p->n_spare);
	parse_snapshot(r, &p->snap);

	n = state_get_count(r, 12);
	if (n) {
		p->rules = calloc(n, sizeof(*p->rules));
		if (!p->rules) {
			r->error = true;
			return;
		}
		p->n_rules = n;
		for (size_t i = 0; i < n; i++) {
			p->rules[i].text = state_get_str(r);
			p->rules[i].eavesdrop = state_get_u32(r) != 0;
			if (!p->rules[i].text)
				r->error = true;
		}
	}
	n = state_get_count(r, 16);
	if (n) {
		p->owned = calloc(n, sizeof(*p->owned));
		if (!p->owned) {
			r->error = true;
			return;
		}
		p->n_owned = n;
		for (size_t i = 0; i < n; i++) {
			p->owned[i].name = state_get_str(r);
			p->owned[i].flags = state_get_u32(r);
			p->owned[i].pos = state_get_u32(r);
			if (!p->owned[i].name)
				r->error = true;
		}
	}
	p->native = state_get_u32(r) != 0;
	if (p->native) {
		struct native_conn_state *st = &p->nstate;

		st->node = state_get_u64(r);
		st->client = state_get_u64(r);
		st->direct = state_get_u64(r);
		st->q_bytes = state_get_u64(r);
		st->q_fds = state_get_u64(r);
		st->q_msgs = state_get_u64(r);
		st->charged_bytes = state_get_u64(r);
		st->charged_fds = state_get_u64(r);
		st->refresh_msgs = state_get_u64(r);
		st->refresh_bytes = state_get_u64(r);
		st->have_creds = state_get_u32(r) != 0;
		n = state_get_count(r, 4);
		if (n) {
			p->uids = calloc(n, sizeof(*p->uids));
			if (!p->uids) {
				r->error = true;
				return;
			}
			for (size_t i = 0; i < n; i++)
				p->uids[i] = state_get_u32(r);
		}
		st->uids = p->uids;
		st->n_uids = n;
	}
	if (p->pidfd < -1 || (p->flags & PEER_STATE_MONITOR && !(p->flags & PEER_STATE_REGISTERED)))
		r->error = true;
}

/* Parse and cross-check the whole stream. Return 0, 1 (malformed) or -ENOMEM. */
/* Whether header and body make one whole message of their size. */
static bool entry_frame_ok(const struct ps_entry *e)
{
	size_t total;

	if (e->n_header < 16 || e->n_header % 8)
		return false;
	return message_frame_size(e->header, e->n_header, &total) == 0 &&
	       total == e->n_header + e->n_body;
}

/* The pending activations, after the children (ACTIVATION section). 0, 1, -ENOMEM. */
static int parse_pendings(struct state_reader *r, struct parsed_state *ps)
{
	size_t n = state_get_count(r, 30);

	ps->pendings = calloc(n ? n : 1, sizeof(*ps->pendings));
	if (!ps->pendings)
		return -ENOMEM;
	ps->n_pendings = n;
	for (size_t i = 0; i < n && !r->error; i++) {
		struct ps_pending *p = &ps->pendings[i];
		bool child_found = false;
		size_t m;

		p->info.name = state_get_str(r);
		p->info.exec = state_get_str(r);
		p->info.unit = state_get_str(r);
		p->info.request_sent = state_get_u32(r) != 0;
		p->info.deadline_usec = state_get_u64(r);
		p->info.child_pid = (pid_t)state_get_u32(r);
		if (!p->info.name || p->info.child_pid < 0)
			return 1;
		for (size_t k = 0; k < ps->n_children && p->info.child_pid; k++)
			child_found |= ps->children[k].pid == p->info.child_pid;
		if (p->info.child_pid && !child_found)
			return 1;

		m = state_get_count(r, 28);
		p->entries = calloc(m ? m : 1, sizeof(*p->entries));
		if (!p->entries)
			return -ENOMEM;
		p->n_entries = m;
		for (size_t j = 0; j < m && !r->error; j++) {
			struct ps_entry *e = &p->entries[j];

			e->sender = state_get_u32(r);
			e->auto_start = state_get_u32(r) != 0;
			e->header = state_get_bytes(r, &e->n_header);
			e->body = state_get_bytes(r, &e->n_body);
			e->fds = parse_fds(r, &e->n_fds);
			if (!e->header || (e->sender != PS_NO_SENDER && e->sender >= ps->n_peers) ||
			    !entry_frame_ok(e))
				return 1;
		}
	}
	return r->error ? 1 : 0;
}

static int state_parse(struct state_reader *r, struct parsed_state *ps)
{
	size_t n;
	int ret;

	*ps = (struct parsed_state){};
	if (!state_expect(r, STATE_TAG_BUS))
		return 1;
	ps->guid = state_get_str(r);
	ps->next_id = state_get_u64(r);
	ps->serial = state_get_u32(r);
	ps->n_messages = state_get_u64(r);
	ps->peak_names = state_get_u32(r);
	ps->peak_names_per_conn = state_get_u32(r);
	ps->peak_matches = state_get_u32(r);
	ps->peak_matches_per_conn = state_get_u32(r);
	ps->stats_serial = state_get_u32(r);
	ps->conn_stats_serial = state_get_u32(r);
	ps->uid = (uid_t)state_get_u32(r);
	ps->native_fd = state_get_i32(r);
	if (r->error || !ps->guid || strlen(ps->guid) != 32 || ps->native_fd < -1)
		return 1;

	if (!state_expect(r, STATE_TAG_LISTENER))
		return 1;
	n = state_get_count(r, 24);
	ps->listeners = calloc(n ? n : 1, sizeof(*ps->listeners));
	if (!ps->listeners)
		return -ENOMEM;
	ps->n_listeners = n;
	for (size_t i = 0; i < n && !r->error; i++) {
		struct ps_listener *l = &ps->listeners[i];
		size_t len;

		l->n_fds = state_get_count(r, 4);
		if (l->n_fds == 0 || l->n_fds > ADDRESS_TCP_FDS_MAX) {
			r->error = true;
			break;
		}
		for (size_t j = 0; j < l->n_fds; j++)
			l->fds[j] = state_get_fd(r);
		l->tcp = state_get_u32(r) != 0;
		l->has_nonce = state_get_u32(r) != 0;
		l->full = state_get_u32(r) != 0;
		l->nonce = state_get_bytes(r, &len);
		if (len != ADDRESS_NONCE_LEN)
			r->error = true;
		l->address = state_get_str(r);
		l->unlink_path = state_get_str(r);
		l->nonce_file = state_get_str(r);
		if (!l->address)
			r->error = true;
	}

	if (!state_expect(r, STATE_TAG_NAME))
		return 1;
	n = state_get_count(r, 9);
	ps->names = calloc(n ? n : 1, sizeof(*ps->names));
	if (!ps->names)
		return -ENOMEM;
	ps->n_names = n;
	for (size_t i = 0; i < n && !r->error; i++)
		if (!(ps->names[i] = state_get_str(r)))
			r->error = true;

	if (!state_expect(r, STATE_TAG_PEER))
		return 1;
	n = state_get_count(r, 64);
	ps->peers = calloc(n ? n : 1, sizeof(*ps->peers));
	if (!ps->peers)
		return -ENOMEM;
	ps->n_peers = n;
	for (size_t i = 0; i < n && !r->error; i++)
		parse_peer(r, &ps->peers[i]);

	if (!state_expect(r, STATE_TAG_REPLY))
		return 1;
	n = state_get_count(r, 20);
	ps->replies = calloc(n ? n : 1, sizeof(*ps->replies));
	if (!ps->replies)
		return -ENOMEM;
	ps->n_replies = n;
	for (size_t i = 0; i < n && !r->error; i++) {
		struct ps_reply *rp = &ps->replies[i];

		rp->callee = state_get_u32(r);
		rp->caller = state_get_u32(r);
		rp->serial = state_get_u32(r);
		rp->deadline = state_get_u64(r);
		if (rp->callee >= ps->n_peers || rp->caller >= ps->n_peers)
			r->error = true;
	}

	if (!state_expect(r, STATE_TAG_ACTIVATION))
		return 1;
	n = state_get_count(r, 9);
	ps->env = calloc(n ? n : 1, sizeof(*ps->env));
	if (!ps->env)
		return -ENOMEM;
	ps->n_env = n;
	for (size_t i = 0; i < n && !r->error; i++)
		if (!(ps->env[i] = state_get_str(r)))
			r->error = true;
	n = state_get_count(r, 21);
	ps->children = calloc(n ? n : 1, sizeof(*ps->children));
	if (!ps->children)
		return -ENOMEM;
	ps->n_children = n;
	for (size_t i = 0; i < n && !r->error; i++) {
		struct ps_child *c = &ps->children[i];

		c->pid = (pid_t)state_get_u32(r);
		c->err_fd = state_get_fd(r);
		c->helper = state_get_u32(r) != 0;
		c->name = state_get_str(r);
		if (c->pid <= 0 || !c->name)
			r->error = true;
	}
	ret = parse_pendings(r, ps);
	if (ret)
		return ret;

	for (size_t i = 0; i < ps->n_peers; i++)
		if (ps->peers[i].native && ps->native_fd < 0)
			r->error = true;
	if (!state_expect(r, STATE_TAG_END) || r->pos != r->n)
		return 1;
	return r->error ? 1 : 0;
}

/* Read the stream of @fd into @ps. 0, 1 (cannot: logged), -errno. */
static int state_load(int fd, struct state_reader *r, struct parsed_state *ps,
		      struct fdstore_carried *carried)
{
	uint32_t version;
	int ret;

	*ps = (struct parsed_state){};
	ret = state_reader_init(r, fd, &version);
	if (ret) {
		if (ret > 0)
			log_err("re-exec: the state is %s (version %u; this program reads %u)",
				version ? "of another version" : "not a bus1-broker state",
				(unsigned)version, (unsigned)STATE_VERSION);
		return ret;
	}
	if (carried) {
		r->fd_present = fdstore_carries;
		r->fd_userdata = carried;
	}
	ret = state_parse(r, ps);
	if (ret > 0)
		log_err("re-exec: the state is malformed (at byte %zu)", r->pos);
	return ret;
}

int reexec_check_state(int fd)
{
	struct state_reader r;
	struct parsed_state ps;
	int ret;

	ret = state_load(fd, &r, &ps, NULL);
	parsed_state_deinit(&ps);
	state_reader_deinit(&r);
	return ret;
}

/* ------------------------------------------------------------ writing it */

/* The fds that must survive the exec. */
struct fdset {
	int *v;
	size_t n;
	size_t cap;
	int error;
};

static void fdset_add(struct fdset *s, int fd)
{
	if (fd < 0 || s->error)
		return;
	if (s->n == s->cap) {
		size_t cap = s->cap ? s->cap * 2 : 64;
		int *v = realloc(s->v, cap * sizeof(*v));

		if (!v) {
			s->error = -ENOMEM;
			return;
		}
		s->v = v;
		s->cap = cap;
	}
	s->v[s->n++] = fd;
}

static void put_fds(struct state_writer *w, struct fdset *fds, const int *v, size_t n)
{
	state_put_u64(w, n);
	for (size_t i = 0; i < n; i++) {
		state_put_i32(w, v[i]);
		fdset_add(fds, v[i]);
	}
}

static void put_snapshot(struct state_writer *w, struct fdset *fds,
			 const struct socket_snapshot *snap)
{
	state_put_u32(w, (snap->framing ? 1 : 0) | (snap->eof ? 2 : 0) | (snap->violation ? 4 : 0));
	state_put_bytes(w, snap->in, snap->n_in);
	state_put_u64(w, snap->n_in_fds);
	for (size_t i = 0; i < snap->n_in_fds; i++) {
		state_put_u64(w, snap->in_fds[i].start);
		state_put_u64(w, snap->in_fds[i].end);
		put_fds(w, fds, snap->in_fds[i].fds, snap->in_fds[i].n_fds);
	}
	state_put_u64(w, snap->n_out);
	for (size_t i = 0; i < snap->n_out; i++) {
		state_put_bytes(w, snap->out[i].data, snap->out[i].n_data);
		put_fds(w, fds, snap->out[i].fds, snap->out[i].n_fds);
	}
}

/* The position of @o in its name's queue (0: primary). */
static uint32_t ownership_position(const struct name_ownership *o)
{
	const struct name_ownership *q;
	uint32_t pos = 0;

	list_for_each_entry(q, &o->name->queue, name_link) {
		if (q == o)
			break;
		pos++;
	}
	return pos;
}

static int put_peer(struct state_writer *w, struct fdset *fds, struct peer *p)
{
	struct connection *conn = connection_of(p);
	struct native_conn *nc;
	struct socket_snapshot snap;
	struct name_ownership *o;
	struct match_rule *rule;
	char *text;
	size_t n;
	int r;

	r = connection_snapshot(conn, &snap);
	if (r < 0)
		return r;
	state_put_i32(w, socket_get_fd(conn->socket));
	fdset_add(fds, socket_get_fd(conn->socket));
	state_put_u32(w, (p->registered ? PEER_STATE_REGISTERED : 0) |
			 (p->monitor ? PEER_STATE_MONITOR : 0) |
			 (p->unix_fds ? PEER_STATE_UNIX_FDS : 0) |
			 (p->anonymous ? PEER_STATE_ANONYMOUS : 0) |
			 (p->socket_identity ? PEER_STATE_SOCKET_IDENTITY : 0) |
			 (p->creds.have_creds ? PEER_STATE_HAVE_CREDS : 0));
	state_put_u32(w, (uint32_t)p->creds.pid);
	state_put_u32(w, (uint32_t)p->creds.uid);
	state_put_u32(w, (uint32_t)p->creds.gid);
	state_put_u64(w, p->creds.n_groups);
	for (size_t i = 0; i < p->creds.n_groups; i++)
		state_put_u32(w, (uint32_t)p->creds.groups[i]);
	state_put_str(w, p->creds.label);
	state_put_i32(w, p->creds.pidfd);
	fdset_add(fds, p->creds.pidfd);
	state_put_u32(w, (uint32_t)p->uid);
	state_put_u32(w, (uint32_t)p->pid);
	state_put_u64(w, p->owner.id);
	state_put_u64(w, p->n_incoming);
	state_put_u64(w, p->n_outgoing);
	state_put_u64(w, p->peak_queued_bytes);
	state_put_u64(w, p->peak_queued_fds);
	state_put_u64(w, p->peak_dispatching_bytes);
	state_put_u64(w, p->peak_dispatching_fds);
	state_put_u32(w, p->peak_names);
	state_put_u32(w, p->peak_matches);
	put_fds(w, fds, conn->spare_fds, conn->n_spare_fds);
	put_snapshot(w, fds, &snap);
	socket_snapshot_deinit(&snap);

	text = malloc(REEXEC_RULE_MAX);
	if (!text)
		return -ENOMEM;
	n = 0;
	list_for_each_entry(rule, &p->matches.rules, owner_link)
		n++;
	state_put_u64(w, n);
	list_for_each_entry(rule, &p->matches.rules, owner_link) {
		r = match_rule_to_string(rule, text, REEXEC_RULE_MAX);
		if (r < 0) {
			free(text);
			return r;
		}
		state_put_str(w, text);
		state_put_u32(w, rule->eavesdrop);
	}
	free(text);

	state_put_u64(w, p->owner.n_ownerships);
	list_for_each_entry(o, &p->owner.ownerships, owner_link) {
		state_put_str(w, o->name->str);
		state_put_u32(w, o->flags);
		state_put_u32(w, ownership_position(o));
	}

	nc = native_conn_of(p);
	state_put_u32(w, nc != NULL);
	if (nc) {
		struct native_conn_state st;

		native_conn_get_state(nc, &st);
		state_put_u64(w, st.node);
		state_put_u64(w, st.client);
		state_put_u64(w, st.direct);
		state_put_u64(w, st.q_bytes);
		state_put_u64(w, st.q_fds);
		state_put_u64(w, st.q_msgs);
		state_put_u64(w, st.charged_bytes);
		state_put_u64(w, st.charged_fds);
		state_put_u64(w, st.refresh_msgs);
		state_put_u64(w, st.refresh_bytes);
		state_put_u32(w, st.have_creds);
		state_put_u64(w, st.n_uids);
		for (size_t i = 0; i < st.n_uids; i++)
			state_put_u32(w, st.uids[i]);
	}
	return 0;
}

/* The spawned services still running: the new program reaps them. */
struct child_writer {
	struct state_writer *w;
	struct fdset *fds;
	size_t n;
};

static void count_child(void *userdata, pid_t pid, int err_fd, bool helper, const char *name)
{
	struct child_writer *cw = userdata;

	cw->n++;
}

static void put_child(void *userdata, pid_t pid, int err_fd, bool helper, const char *name)
{
	struct child_writer *cw = userdata;

	state_put_u32(cw->w, (uint32_t)pid);
	state_put_i32(cw->w, err_fd);
	fdset_add(cw->fds, err_fd);
	state_put_u32(cw->w, helper);
	state_put_str(cw->w, name);
}

/*
 * The pending activations and their queued requests. A request's sender is
 * written as its peer's position in bus->peers, looked up in @sorted (the
 * peers by address).
 */
struct peer_pos {
	const struct peer *peer;
	uint32_t pos;
};

struct pending_writer {
	struct state_writer *w;
	struct fdset *fds;
	bool no_children;
	struct peer_pos *sorted;
	size_t n_peers;
	size_t n;
};

static int peer_pos_cmp(const void *a, const void *b)
{
	const struct peer_pos *x = a, *y = b;

	return x->peer < y->peer ? -1 : x->peer > y->peer;
}

static void count_pending(void *userdata, const struct activation_pending_info *info,
			  size_t n_entries)
{
	struct pending_writer *pw = userdata;

	pw->n++;
}

static void skip_entry(void *userdata, void *sender, struct message *msg, bool auto_start)
{
}

static void put_pending(void *userdata, const struct activation_pending_info *info,
			size_t n_entries)
{
	struct pending_writer *pw = userdata;

	state_put_str(pw->w, info->name);
	state_put_str(pw->w, info->exec);
	state_put_str(pw->w, info->unit);
	state_put_u32(pw->w, info->request_sent);
	state_put_u64(pw->w, info->deadline_usec);
	state_put_u32(pw->w, pw->no_children ? 0 : (uint32_t)info->child_pid);
	state_put_u64(pw->w, n_entries);
}

static void put_entry(void *userdata, void *sender, struct message *msg, bool auto_start)
{
	struct pending_writer *pw = userdata;
	struct peer_pos key = { .peer = sender }, *found = NULL;
	struct iovec iov[2];
	const int *v;
	size_t n;

	if (sender)
		found = bsearch(&key, pw->sorted, pw->n_peers, sizeof(key), peer_pos_cmp);
	if (sender && !found) {
		/* A request of a peer that is gone: none (activation_sender_gone()). */
		pw->fds->error = -EINVAL;
		return;
	}
	state_put_u32(pw->w, found ? found->pos : PS_NO_SENDER);
	state_put_u32(pw->w, auto_start);
	message_get_iovec(msg, iov);
	state_put_bytes(pw->w, iov[0].iov_base, iov[0].iov_len);
	state_put_bytes(pw->w, iov[1].iov_base, iov[1].iov_len);
	v = message_get_fds(msg, &n);
	put_fds(pw->w, pw->fds, v, n);
}

static int put_pendings(struct state_writer *w, struct fdset *fds, struct bus *bus,
			bool no_children)
{
	struct pending_writer pw = { .w = w, .fds = fds, .no_children = no_children };
	struct peer *p;
	size_t i = 0;

	list_for_each_entry(p, &bus->peers, bus_link)
		pw.n_peers++;
	pw.sorted = calloc(pw.n_peers ? pw.n_peers : 1, sizeof(*pw.sorted));
	if (!pw.sorted)
		return -ENOMEM;
	list_for_each_entry(p, &bus->peers, bus_link) {
		pw.sorted[i].peer = p;
		pw.sorted[i].pos = (uint32_t)i;
		i++;
	}
	qsort(pw.sorted, pw.n_peers, sizeof(*pw.sorted), peer_pos_cmp);
	activation_foreach_pending(bus->activation, count_pending, skip_entry, &pw);
	state_put_u64(w, pw.n);
	activation_foreach_pending(bus->activation, put_pending, put_entry, &pw);
	free(pw.sorted);
	return 0;
}

/* Why the bus cannot be carried over right now, or NULL. */
static const char *reexec_refusal(struct broker *broker)
{
	struct bus *bus = &broker->bus;
	struct peer *p;

	if (!broker->exe_path)
		return "the running program could not be found at start-up";
	if (!activation_is_settled(bus->activation))
		return "an activation is being answered";
	list_for_each_entry(p, &bus->peers, bus_link)
		if (!connection_of(p))
			return "a client without a socket connection";
	return NULL;
}

/* The clients still in SASL: their server's state is not carried, they are waited for. */
static unsigned int n_authenticating(struct bus *bus)
{
	struct peer *p;
	unsigned int n = 0;

	list_for_each_entry(p, &bus->peers, bus_link)
		n += !p->authenticated;
	return n;
}

/*
 * @handover: for the next process of the service, not for this one's exec
 * (fdstore.h): the spawned services are not carried (not its children).
 */
static int reexec_write(struct broker *broker, uint32_t version, bool handover,
			struct fdset *fds)
{
	struct bus *bus = &broker->bus;
	struct state_writer w;
	struct listener *l;
	struct name *name;
	struct peer *p;
	char *const *env;
	size_t n, i;
	int r = 0;

	state_writer_init(&w, version);
	state_put_u32(&w, STATE_TAG_BUS);
	state_put_str(&w, bus->guid);
	state_put_u64(&w, bus->next_id);
	state_put_u32(&w, bus->serial);
	state_put_u64(&w, bus->n_messages);
	state_put_u32(&w, bus->peak_names);
	state_put_u32(&w, bus->peak_names_per_conn);
	state_put_u32(&w, bus->peak_matches);
	state_put_u32(&w, bus->peak_matches_per_conn);
	state_put_u32(&w, bus->stats_serial);
	state_put_u32(&w, bus->conn_stats_serial);
	state_put_u32(&w, (uint32_t)bus->uid);
	state_put_i32(&w, native_get_fd(bus->native));
	fdset_add(fds, native_get_fd(bus->native));

	state_put_u32(&w, STATE_TAG_LISTENER);
	n = 0;
	list_for_each_entry(l, &broker->listeners, link)
		n++;
	state_put_u64(&w, n);
	list_for_each_entry(l, &broker->listeners, link) {
		put_fds(&w, fds, l->fds, l->n_fds);
		state_put_u32(&w, l->tcp);
		state_put_u32(&w, l->has_nonce);
		state_put_u32(&w, l->full);
		state_put_bytes(&w, l->nonce, ADDRESS_NONCE_LEN);
		state_put_str(&w, l->address);
		state_put_str(&w, l->unlink_path);
		state_put_str(&w, l->nonce_file);
	}

	state_put_u32(&w, STATE_TAG_NAME);
	state_put_u64(&w, bus->names->n_names);
	list_for_each_entry(name, &bus->names->name_list, registry_link)
		state_put_str(&w, name->str);

	state_put_u32(&w, STATE_TAG_PEER);
	n = 0;
	list_for_each_entry(p, &bus->peers, bus_link)
		n++;
	state_put_u64(&w, n);
	list_for_each_entry(p, &bus->peers, bus_link) {
		r = put_peer(&w, fds, p);
		if (r < 0)
			goto out;
	}

	/* Per callee, its pending calls in order; peers by position. */
	state_put_u32(&w, STATE_TAG_REPLY);
	state_put_u64(&w, bus->replies->n_slots);
	i = 0;
	list_for_each_entry(p, &bus->peers, bus_link) {
		struct reply_slot *s;

		list_for_each_entry(s, &p->replies.pending, callee_link) {
			struct peer *caller = container_of(s->caller, struct peer, replies);
			struct peer *q;
			uint32_t k = 0;

			list_for_each_entry(q, &bus->peers, bus_link) {
				if (q == caller)
					break;
				k++;
			}
			state_put_u32(&w, (uint32_t)i);
			state_put_u32(&w, k);
			state_put_u32(&w, s->serial);
			state_put_u64(&w, s->deadline_usec);
		}
		i++;
	}

	state_put_u32(&w, STATE_TAG_ACTIVATION);
	activation_get_env(bus->activation, &env, &n);
	state_put_u64(&w, n);
	for (i = 0; i < n; i++)
		state_put_str(&w, env[i]);
	{
		struct child_writer cw = { .w = &w, .fds = fds };

		if (!handover)
			activation_foreach_child(bus->activation, count_child, &cw);
		state_put_u64(&w, cw.n);
		if (!handover)
			activation_foreach_child(bus->activation, put_child, &cw);
	}
	r = put_pendings(&w, fds, bus, handover);
	if (r < 0)
		goto out;
	state_put_u32(&w, STATE_TAG_END);
	r = state_writer_to_memfd(&w);
out:
	state_writer_deinit(&w);
	return r;
}

static bool is_reexec_arg(const char *a)
{
	return !strncmp(a, "--restore-state=", 16) || !strncmp(a, "--reexec-fallback=", 18) ||
	       !strncmp(a, "--check-state=", 14);
}

/*
 * Run the new program on the state: it must read all of it. Return 0 if it
 * did, 1 if not (*@whyp), negative errno.
 */
static int reexec_check(struct broker *broker, int state_fd, char *why, size_t why_size)
{
	char arg[64];
	struct pollfd pfd;
	int status = 0, pidfd;
	pid_t pid, w;

	snprintf(arg, sizeof(arg), "--check-state=%d", state_fd);
	pid = fork();
	if (pid < 0)
		return -errno;
	if (pid == 0) {
		/* The command line it will run with (the configuration file), and ours. */
		size_t n = 0, k = 0;
		char **argv;

		while (broker->argv[n])
			n++;
		argv = calloc(n + 2, sizeof(*argv));
		if (!argv)
			_exit(127);
		argv[k++] = broker->exe_path;
		for (size_t i = 1; i < n; i++)
			if (!is_reexec_arg(broker->argv[i]))
				argv[k++] = broker->argv[i];
		argv[k++] = arg;

		/*
		 * The signal mask stays as it is: the bus' signals blocked.
		 * "systemctl kill -s SIGUSR2" signals every process of the
		 * unit, this one too; it must not die of the default action
		 * in the window before the new program's main() ignores them.
		 */
		(void)fcntl(state_fd, F_SETFD, 0);
		execv(broker->exe_path, argv);
		_exit(127);
	}
	pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
	if (pidfd >= 0) {
		pfd = (struct pollfd){ .fd = pidfd, .events = POLLIN };
		if (poll(&pfd, 1, REEXEC_CHECK_TIMEOUT_MSEC) == 0)
			kill(pid, SIGKILL);
		close(pidfd);
	}
	do {
		w = waitpid(pid, &status, 0);
	} while (w < 0 && errno == EINTR);
	if (w < 0)
		return -errno;
	if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
		return 0;
	if (WIFEXITED(status))
		snprintf(why, why_size, "%s --check-state exited with status %d", broker->exe_path,
			 WEXITSTATUS(status));
	else
		snprintf(why, why_size, "%s --check-state was killed by signal %d",
			 broker->exe_path, WTERMSIG(status));
	return 1;
}

static void set_cloexec(const int *v, size_t n, bool on)
{
	for (size_t i = 0; i < n; i++)
		(void)fcntl(v[i], F_SETFD, on ? FD_CLOEXEC : 0);
}

/* The command line, without the previous re-exec's options, plus ours. */
static char **reexec_argv(struct broker *broker, int state_fd, int fallback_fd)
{
	size_t n = 0, k = 0;
	char **v;

	while (broker->argv[n])
		n++;
	v = calloc(n + 3, sizeof(*v));
	if (!v)
		return NULL;
	for (size_t i = 0; i < n; i++)
		if (i == 0 || !is_reexec_arg(broker->argv[i]))
			v[k++] = broker->argv[i];
	if (asprintf(&v[k++], "--restore-state=%d", state_fd) < 0 ||
	    (fallback_fd >= 0 && asprintf(&v[k++], "--reexec-fallback=%d", fallback_fd) < 0)) {
		free(v);
		return NULL;
	}
	v[k] = NULL;
	return v;
}

int reexec_prepare(struct broker *broker, char **argv)
{
	const char *override = getenv("BUS1_BROKER_REEXEC");
	char buf[4096];
	ssize_t l;

	broker->argv = argv;
	broker->exe_fd = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
	if (override && *override) {
		broker->exe_path = strdup(override);
	} else {
		l = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
		if (l < 0)
			return -errno;
		buf[l] = '\0';
		/* Replaced on disk since it started: execute what is there now. */
		if (l > 10 && !strcmp(buf + l - 10, " (deleted)"))
			buf[l - 10] = '\0';
		broker->exe_path = strdup(buf);
	}
	return broker->exe_path ? 0 : -ENOMEM;
}

/* Write what can be written (less to carry); why the bus cannot go now, or NULL. */
static const char *reexec_settle(struct broker *broker)
{
	native_flush(broker->bus.native);
	bus_flush_now(&broker->bus);
	if (n_authenticating(&broker->bus))
		return "a client is still authenticating";
	return reexec_refusal(broker);
}

static void reexec_now(struct broker *broker)
{
	const char *env_version = getenv("BUS1_BROKER_STATE_VERSION");
	uint32_t version = STATE_VERSION;
	struct fdset fds = {};
	char why[512] = "";
	const char *refusal;
	char **argv = NULL;
	int state_fd, r;

	refusal = reexec_settle(broker);
	if (refusal) {
		log_warn("re-exec refused: %s", refusal);
		return;
	}
	if (env_version && *env_version)
		version = (uint32_t)strtoul(env_version, NULL, 10);

	state_fd = reexec_write(broker, version, false, &fds);
	if (state_fd < 0 || fds.error) {
		log_warn("re-exec refused: cannot write the state: %s",
			 strerror(state_fd < 0 ? -state_fd : -fds.error));
		goto out;
	}
	r = reexec_check(broker, state_fd, why, sizeof(why));
	if (r) {
		log_warn("re-exec refused: %s", r > 0 ? why : strerror(-r));
		goto out;
	}
	argv = reexec_argv(broker, state_fd, broker->exe_fd);
	if (!argv) {
		log_warn("re-exec refused: out of memory");
		goto out;
	}
	fdset_add(&fds, state_fd);
	fdset_add(&fds, broker->exe_fd);
	if (fds.error) {
		log_warn("re-exec refused: out of memory");
		goto out;
	}
	log_info("re-exec: executing %s", broker->exe_path);
	set_cloexec(fds.v, fds.n, false);
	execv(broker->exe_path, argv);
	r = -errno;
	set_cloexec(fds.v, fds.n, true);
	log_warn("re-exec refused: cannot execute %s: %s", broker->exe_path, strerror(-r));
out:
	if (argv) {
		for (size_t i = 0; argv[i]; i++)
			if (is_reexec_arg(argv[i]))
				free(argv[i]);
		free(argv);
	}
	if (state_fd >= 0)
		close(state_fd);
	free(fds.v);
}

/* SIGTERM with the fd store there: everything into it, then the loop ends. */
static void hand_over_now(struct broker *broker)
{
	struct fdset fds = {};
	const char *refusal;
	struct listener *l;
	int state_fd, r;

	refusal = reexec_settle(broker);
	if (refusal) {
		log_warn("fd store: not handing the bus over: %s", refusal);
		goto out;
	}
	state_fd = reexec_write(broker, STATE_VERSION, true, &fds);
	if (state_fd < 0 || fds.error) {
		log_warn("fd store: not handing the bus over: cannot write the state: %s",
			 strerror(state_fd < 0 ? -state_fd : -fds.error));
		goto out_fds;
	}
	r = fdstore_hand_over(state_fd, fds.v, fds.n);
	close(state_fd);
	if (r < 0) {
		log_warn("fd store: not handing the bus over: %s", strerror(-r));
		goto out_fds;
	}
	/* The socket files and nonce files are the next process's now. */
	list_for_each_entry(l, &broker->listeners, link) {
		free(steal_ptr(l->unlink_path));
		free(steal_ptr(l->nonce_file));
	}
	broker->handed_over = true;
	log_info("fd store: bus handed over (%zu fds)", fds.n);
out_fds:
	free(fds.v);
out:
	(void)sd_event_exit(broker->event, 0);
}

static void reexec_wait_end(struct broker *broker)
{
	struct listener *l;

	broker->reexec_wait = sd_event_source_disable_unref(broker->reexec_wait);
	list_for_each_entry(l, &broker->listeners, link)
		listener_release(l);
}

static int reexec_wait_cb(sd_event_source *s, uint64_t usec, void *userdata)
{
	struct broker *broker = userdata;
	unsigned int n = n_authenticating(&broker->bus);

	if (n && usec < broker->reexec_deadline)
		return sd_event_source_set_time_relative(s, REEXEC_WAIT_POLL_USEC) < 0 ? 0 :
		       sd_event_source_set_enabled(s, SD_EVENT_ONESHOT);
	/* The listeners go back on before the exec: the new program must watch them. */
	reexec_wait_end(broker);
	if (broker->reexec_hand_over) {
		/* Stopping: with what can be carried, or without. */
		hand_over_now(broker);
		return 0;
	}
	if (n) {
		log_warn("re-exec refused: %u client%s still authenticating after %llu ms", n,
			 n == 1 ? "" : "s", (unsigned long long)REEXEC_WAIT_MAX_MSEC(broker));
		return 0;
	}
	reexec_now(broker);
	return 0;
}

static void reexec_start(struct broker *broker, bool hand_over)
{
	unsigned int n = n_authenticating(&broker->bus);
	struct listener *l;
	uint64_t now;
	int r;

	if (broker->reexec_wait) {
		if (hand_over && broker->reexec_hand_over) {
			/* A second SIGTERM: stop now, whatever is lost. */
			reexec_wait_end(broker);
			(void)sd_event_exit(broker->event, 0);
			return;
		}
		/* A SIGTERM during a re-exec's wait: the hand-over waits on the same. */
		broker->reexec_hand_over |= hand_over;
		log_info("re-exec: already waiting for clients to authenticate");
		return;
	}
	broker->reexec_hand_over = hand_over;
	if (!n) {
		if (hand_over)
			hand_over_now(broker);
		else
			reexec_now(broker);
		return;
	}
	/*
	 * A client in SASL is not carried over: let those there finish (or
	 * meet auth_timeout) while new ones wait in the backlog.
	 */
	list_for_each_entry(l, &broker->listeners, link) {
		r = listener_hold(l);
		if (r < 0)
			goto fail;
	}
	r = sd_event_now(broker->event, CLOCK_MONOTONIC, &now);
	if (r < 0)
		goto fail;
	broker->reexec_deadline = now + REEXEC_WAIT_MAX_MSEC(broker) * 1000;
	r = sd_event_add_time(broker->event, &broker->reexec_wait, CLOCK_MONOTONIC,
			      now + REEXEC_WAIT_POLL_USEC, 0, reexec_wait_cb, broker);
	if (r < 0)
		goto fail;
	log_info("re-exec: waiting for %u client%s to finish authenticating", n,
		 n == 1 ? "" : "s");
	return;
fail:
	reexec_wait_end(broker);
	log_warn("re-exec refused: cannot wait for the clients authenticating: %s",
		 strerror(-r));
	if (hand_over)
		(void)sd_event_exit(broker->event, 0);
}

void reexec_run(struct broker *broker)
{
	reexec_start(broker, false);
}

void reexec_hand_over(struct broker *broker)
{
	reexec_start(broker, true);
}

/* ------------------------------------------------------------- restoring */

/*
 * Everything open gets FD_CLOEXEC: what the previous program handed over
 * and the state does not name must not leak into activated services. The
 * fds that came without it go to @inherited, so that going back to the
 * previous program hands them over as they came.
 */
static void cloexec_all(struct fdset *inherited)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;

	if (!d)
		return;
	while ((e = readdir(d))) {
		int fd = atoi(e->d_name);
		int flags;

		if (fd <= STDERR_FILENO || fd == dirfd(d))
			continue;
		flags = fcntl(fd, F_GETFD);
		if (flags < 0 || (flags & FD_CLOEXEC))
			continue;
		fdset_add(inherited, fd);
		(void)fcntl(fd, F_SETFD, flags | FD_CLOEXEC);
	}
	closedir(d);
}

/*
 * The new program cannot restore what the previous one wrote: execute the
 * previous one (kept open as @fallback_fd) with the same command line and
 * every fd it handed over. Returns only if that fails.
 */
static void reexec_go_back(int fallback_fd, char **argv, struct fdset *inherited)
{
	size_t n = 0, k = 0;
	char **v;

	log_err("re-exec: going back to the previous program");
	if (inherited->error)
		log_err("re-exec: out of memory counting the fds handed over; some are lost");
	/*
	 * Without --reexec-fallback: should the previous program fail too, it
	 * must not go back to itself for ever. Its own file is not handed over
	 * (fexecve() of an ELF file works with FD_CLOEXEC).
	 */
	while (argv[n])
		n++;
	v = calloc(n + 1, sizeof(*v));
	if (!v) {
		log_err("re-exec: out of memory going back");
		return;
	}
	for (size_t i = 0; i < n; i++)
		if (strncmp(argv[i], "--reexec-fallback=", 18))
			v[k++] = argv[i];
	set_cloexec(inherited->v, inherited->n, false);
	(void)fcntl(fallback_fd, F_SETFD, FD_CLOEXEC);
	fexecve(fallback_fd, v, environ);
	log_err("re-exec: cannot execute the previous program: %m");
	set_cloexec(inherited->v, inherited->n, true);
	free(v);
}

static int restore_peer(struct bus *bus, const struct ps_peer *ps, struct peer **peerp)
{
	struct socket_creds creds = {
		.have_creds = ps->flags & PEER_STATE_HAVE_CREDS,
		.pid = ps->creds_pid,
		.uid = ps->creds_uid,
		.gid = ps->creds_gid,
		.n_groups = ps->n_groups,
		.pidfd = ps->pidfd,
	};
	struct match_registry *rules;
	struct peer *p;
	int r;

	if (ps->n_groups) {
		creds.groups = malloc(ps->n_groups * sizeof(*creds.groups));
		if (!creds.groups)
			return -ENOMEM;
		memcpy(creds.groups, ps->groups, ps->n_groups * sizeof(*creds.groups));
	}
	if (ps->label && !(creds.label = strdup(ps->label))) {
		free(creds.groups);
		return -ENOMEM;
	}
	r = connection_new_restored(&p, bus, ps->fd, &creds, &ps->snap, ps->spare, ps->n_spare);
	if (r < 0)
		return r;
	*peerp = p;

	p->uid = ps->uid;
	p->pid = ps->pid;
	p->socket_identity = ps->flags & PEER_STATE_SOCKET_IDENTITY;
	p->unix_fds = ps->flags & PEER_STATE_UNIX_FDS;
	p->anonymous = ps->flags & PEER_STATE_ANONYMOUS;
	p->authenticated = true;
	bus->n_incomplete--;
	p->n_incoming = ps->n_incoming;
	p->n_outgoing = ps->n_outgoing;
	p->peak_queued_bytes = ps->peak_queued_bytes;
	p->peak_queued_fds = ps->peak_queued_fds;
	p->peak_dispatching_bytes = ps->peak_dispatching_bytes;
	p->peak_dispatching_fds = ps->peak_dispatching_fds;
	p->peak_names = ps->peak_names;
	p->peak_matches = ps->peak_matches;
	/* The rules of the configuration loaded now (it may have changed). */
	r = policy_setup_peer(p);
	if (r < 0)
		return r;
	if (r > 0)
		log_info("re-exec: %u would not be allowed to connect now; it stays",
			 (unsigned)p->uid);

	/* A native client's output is its bus1 node again (after its bootstrap). */
	if (ps->native) {
		r = native_conn_restore(bus->native, p, &ps->nstate);
		if (r < 0)
			return r;
	}
	if (!(ps->flags & PEER_STATE_REGISTERED))
		return 0;
	name_owner_init(&p->owner, ps->id);
	/* A monitor's unique name left the registry when it became one (monitor.c). */
	if (!(ps->flags & PEER_STATE_MONITOR)) {
		r = name_registry_restore_unique(bus->names, &p->owner);
		if (r < 0)
			return r;
	}
	p->registered = true;
	bus->n_active++;
	(void)peer_charge(p, USER_SLOT_CONNECTIONS, 1);

	p->monitor = ps->flags & PEER_STATE_MONITOR;
	if (p->monitor)
		list_append(&bus->monitors, &p->monitor_link);
	rules = p->monitor ? bus->monitor_matches : bus->matches;
	for (size_t i = 0; i < ps->n_rules; i++) {
		struct match_rule *rule;
		const char *reason;

		r = match_rule_parse(&rule, ps->rules[i].text, &reason);
		if (r)
			return r < 0 ? r : -EINVAL;
		match_rule_set_eavesdrop(rule, ps->rules[i].eavesdrop);
		r = match_registry_add(rules, &p->matches, rule);
		if (r < 0) {
			match_rule_free(rule);
			return r;
		}
		if (!p->monitor) {
			if (rule->eavesdrop)
				bus->n_eavesdrop_rules++;
			(void)peer_charge(p, USER_SLOT_MATCHES, 1);
		}
	}
	for (size_t i = 0; i < ps->n_owned; i++) {
		r = name_registry_restore_ownership(bus->names, &p->owner, ps->owned[i].name,
						    ps->owned[i].flags, ps->owned[i].pos);
		if (r < 0)
			return r;
	}
	router_sync_name_charge(p);
	return 0;
}

/* Calls @fn on each fd slot of messages in @ps (queued output, pending activations). */
static int for_each_message_fd(struct parsed_state *ps, int (*fn)(int *fd, void *userdata),
			       void *userdata)
{
	int r;

	for (size_t i = 0; i < ps->n_peers; i++)
		for (size_t j = 0; j < ps->peers[i].snap.n_out; j++)
			for (size_t k = 0; k < ps->peers[i].snap.out[j].n_fds; k++)
				if ((r = fn(&ps->peers[i].snap.out[j].fds[k], userdata)) < 0)
					return r;
	for (size_t i = 0; i < ps->n_pendings; i++)
		for (size_t j = 0; j < ps->pendings[i].n_entries; j++)
			for (size_t k = 0; k < ps->pendings[i].entries[j].n_fds; k++)
				if ((r = fn(&ps->pendings[i].entries[j].fds[k], userdata)) < 0)
					return r;
	return 0;
}

struct fd_marks {
	uint8_t *seen;
	int max;
};

static int note_max_fd(int *fd, void *userdata)
{
	struct fd_marks *m = userdata;

	m->max = MAX(m->max, *fd);
	return 0;
}

static int claim_fd(int *fd, void *userdata)
{
	struct fd_marks *m = userdata;
	int copy;

	if (!(m->seen[*fd / 8] & (1u << (*fd % 8)))) {
		m->seen[*fd / 8] |= (uint8_t)(1u << (*fd % 8));
		return 0;
	}
	copy = fcntl(*fd, F_DUPFD_CLOEXEC, 3);
	if (copy < 0)
		return -errno;
	*fd = copy;
	return 0;
}

/*
 * One message queued for several peers (or queued for a peer and waiting
 * for an activation) lists the same fds in each place, and each restored
 * owner closes what it holds: give every place but the first a duplicate
 * of its own. Return 0 or negative errno.
 */
static int dup_shared_fds(struct parsed_state *ps)
{
	struct fd_marks m = { .max = -1 };
	int r;

	(void)for_each_message_fd(ps, note_max_fd, &m);
	if (m.max < 0)
		return 0;
	m.seen = calloc((size_t)m.max / 8 + 1, 1);
	if (!m.seen)
		return -ENOMEM;
	r = for_each_message_fd(ps, claim_fd, &m);
	free(m.seen);
	return r;
}

/* The pending activations and their requests, after the peers and children. */
static int restore_pendings(struct bus *bus, struct parsed_state *ps, struct peer **peers)
{
	for (size_t i = 0; i < ps->n_pendings; i++) {
		struct ps_pending *p = &ps->pendings[i];
		int r;

		r = activation_restore_pending(bus->activation, &p->info);
		if (r < 0)
			return r;
		for (size_t j = 0; j < p->n_entries; j++) {
			struct ps_entry *e = &p->entries[j];
			_cleanup_message_ struct message *msg = NULL;
			_cleanup_free_ uint8_t *buf = NULL;
			size_t n = e->n_header + e->n_body;

			buf = malloc(n);
			if (!buf)
				return -ENOMEM;
			memcpy(buf, e->header, e->n_header);
			if (e->n_body)
				memcpy(buf + e->n_header, e->body, e->n_body);
			/* The message owns the fds from here on, whatever happens. */
			r = message_new_from_data(&msg, buf, n, e->fds, e->n_fds);
			e->n_fds = 0;
			if (r)
				return r < 0 ? r : -EINVAL;
			r = activation_restore_entry(bus->activation, p->info.name,
						     e->sender == PS_NO_SENDER ? NULL :
						     peers[e->sender], msg, e->auto_start);
			if (r < 0)
				return r;
		}
	}
	return 0;
}

static int restore(struct broker *broker, struct parsed_state *ps)
{
	struct bus *bus = &broker->bus;
	struct peer **peers;
	int r;

	memcpy(bus->guid, ps->guid, sizeof(bus->guid));
	bus->next_id = ps->next_id;
	bus->serial = ps->serial;
	bus->n_messages = ps->n_messages;
	bus->peak_names = ps->peak_names;
	bus->peak_names_per_conn = ps->peak_names_per_conn;
	bus->peak_matches = ps->peak_matches;
	bus->peak_matches_per_conn = ps->peak_matches_per_conn;
	bus->stats_serial = ps->stats_serial;
	bus->conn_stats_serial = ps->conn_stats_serial;
	bus->uid = ps->uid;

	for (size_t i = 0; i < ps->n_listeners; i++) {
		const struct ps_listener *pl = &ps->listeners[i];
		struct listener *l = NULL;

		r = listener_new_restored(&l, bus, pl->fds, pl->n_fds, pl->tcp,
					  pl->has_nonce ? pl->nonce : NULL, pl->address,
					  pl->unlink_path, pl->nonce_file);
		if (r < 0)
			return r;
		l->full = pl->full;
		r = broker_link_listener(broker, l);
		if (r < 0)
			return r;
	}
	if (broker->address) {
		r = bus_set_address(bus, broker->address);
		if (r < 0)
			return r;
	}

	r = dup_shared_fds(ps);
	if (r < 0)
		return r;
	r = sd_event_new(&broker->event);
	if (r < 0)
		return r;
	r = bus_attach_restored(bus, broker->event, ps->native_fd);
	if (r < 0)
		return r;

	for (size_t i = 0; i < ps->n_names; i++) {
		r = name_registry_restore_name(bus->names, ps->names[i]);
		if (r < 0)
			return r;
	}
	peers = calloc(ps->n_peers ? ps->n_peers : 1, sizeof(*peers));
	if (!peers)
		return -ENOMEM;
	for (size_t i = 0; i < ps->n_peers; i++) {
		r = restore_peer(bus, &ps->peers[i], &peers[i]);
		if (r < 0)
			goto out;
	}
	name_registry_restore_done(bus->names);
	for (size_t i = 0; i < ps->n_replies; i++) {
		const struct ps_reply *rp = &ps->replies[i];

		r = reply_registry_restore(bus->replies, &peers[rp->caller]->replies,
					   &peers[rp->callee]->replies, rp->serial, rp->deadline);
		if (r < 0)
			goto out;
	}
	router_arm_reply_timer(bus);
	r = activation_restore_env(bus->activation, ps->env, ps->n_env);
	if (r < 0)
		goto out;
	for (size_t i = 0; i < ps->n_children; i++) {
		const struct ps_child *c = &ps->children[i];

		r = activation_restore_child(bus->activation, c->pid, c->err_fd, c->helper,
					     c->name);
		if (r < 0)
			goto out;
	}
	r = restore_pendings(bus, ps, peers);
	if (r < 0)
		goto out;
	for (size_t i = 0; i < ps->n_peers; i++)
		connection_restored(connection_of(peers[i]));
	r = 0;
out:
	free(peers);
	return r;
}

int broker_restore(struct broker **brokerp, const struct broker_options *opts, int state_fd,
		   int fallback_fd, char **argv, struct fdstore_carried *carried)
{
	const char *fail_hook = getenv("BUS1_BROKER_RESTORE_FAIL");
	struct fdset inherited = {};
	struct state_reader r;
	struct parsed_state ps;
	bool fail_load, fail_restore;
	int ret;

	/* A test hook for the way back, used once: the previous program never sees it. */
	fail_load = fallback_fd >= 0 && fail_hook && !strcmp(fail_hook, "load");
	fail_restore = fallback_fd >= 0 && fail_hook && !strcmp(fail_hook, "restore");
	(void)unsetenv("BUS1_BROKER_RESTORE_FAIL");

	/* First of all: nothing the old program handed over may leak further. */
	cloexec_all(&inherited);
	ret = state_load(state_fd, &r, &ps, carried);
	if (ret == 0 && fail_load)
		ret = 1;
	if (ret) {
		parsed_state_deinit(&ps);
		state_reader_deinit(&r);
		/* The old program wrote it: it can read it. Nothing was touched. */
		if (fallback_fd >= 0)
			reexec_go_back(fallback_fd, argv, &inherited);
		free(inherited.v);
		if (carried) {
			/* Nothing was touched: the caller starts a new bus. */
			close(state_fd);
			return ret < 0 ? ret : 1;
		}
		return ret < 0 ? ret : -EINVAL;
	}

	ret = broker_new_restoring(brokerp, opts);
	if (ret == 0)
		ret = restore(*brokerp, &ps);
	/* The socket unit may have been restarted meanwhile: serve its sockets. */
	if (ret == 0 && carried) {
		ret = broker_take_socket_unit(*brokerp, opts);
		if (ret > 0) {
			log_err("fd store: %s", broker_get_error(*brokerp));
			ret = -ENOTSOCK;
		}
	}
	if (ret == 0 && fail_restore)
		ret = -EIO;
	if (ret && fallback_fd >= 0) {
		/*
		 * Restoring sends nothing to a client and closes no carried fd:
		 * what is half built is left as it is, and the previous program
		 * gets every fd as it handed them over.
		 */
		log_err("re-exec: cannot restore the bus: %s", strerror(ret < 0 ? -ret : EINVAL));
		reexec_go_back(fallback_fd, argv, &inherited);
	}
	free(inherited.v);
	if (ret == 0) {
		size_t n = ps.n_peers;

		log_info("%s: resumed, %zu peer%s carried over", carried ? "fd store" : "re-exec",
			 n, n == 1 ? "" : "s");
	}
	parsed_state_deinit(&ps);
	state_reader_deinit(&r);
	close(state_fd);
	if (fallback_fd >= 0)
		close(fallback_fd);
	return ret;
}
