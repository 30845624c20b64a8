/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The activation module across a re-exec: its section of the state
 * (state.h), written and read here, restored through activation.h's
 * restore calls. See activation.h.
 */

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include "broker/activation/activation.h"
#include "broker/objects/state.h"
#include "dbus-compat/message.h"
#include "util/macro.h"

struct activation_writer {
	struct state_writer *w;
	bool with_children;
	uint32_t (*sender_index)(const void *sender);
	size_t n;
	int error;
};

static void count_child(void *userdata, pid_t pid, int err_fd, bool helper, const char *name)
{
	struct activation_writer *aw = userdata;

	aw->n++;
}

static void put_child(void *userdata, pid_t pid, int err_fd, bool helper, const char *name)
{
	struct activation_writer *aw = userdata;

	state_put_u32(aw->w, (uint32_t)pid);
	state_put_fd(aw->w, err_fd);
	state_put_u32(aw->w, helper);
	state_put_str(aw->w, name);
}

static void count_pending(void *userdata, const struct activation_pending_info *info,
			  size_t n_entries)
{
	struct activation_writer *aw = userdata;

	aw->n++;
}

static void skip_entry(void *userdata, void *sender, struct message *msg, bool auto_start)
{
}

static void put_pending(void *userdata, const struct activation_pending_info *info,
			size_t n_entries)
{
	struct activation_writer *aw = userdata;

	state_put_str(aw->w, info->name);
	state_put_str(aw->w, info->exec);
	state_put_str(aw->w, info->unit);
	state_put_u32(aw->w, info->request_sent);
	state_put_u64(aw->w, info->deadline_usec);
	state_put_u32(aw->w, aw->with_children ? (uint32_t)info->child_pid : 0);
	state_put_u64(aw->w, n_entries);
}

static void put_entry(void *userdata, void *sender, struct message *msg, bool auto_start)
{
	struct activation_writer *aw = userdata;
	uint32_t index = sender ? aw->sender_index(sender) : ACTIVATION_STATE_NO_SENDER;
	struct iovec iov[2];
	const int *v;
	size_t n;

	/* A request of a peer that is gone: there is none (activation_sender_gone()). */
	if (index == ACTIVATION_STATE_NO_SENDER && sender)
		aw->error = -EINVAL;
	state_put_u32(aw->w, index);
	state_put_u32(aw->w, auto_start);
	message_get_iovec(msg, iov);
	state_put_bytes(aw->w, iov[0].iov_base, iov[0].iov_len);
	state_put_bytes(aw->w, iov[1].iov_base, iov[1].iov_len);
	v = message_get_fds(msg, &n);
	state_put_fds(aw->w, v, n);
}

int activation_serialize(const struct activation *a, struct state_writer *w,
			 bool with_children, uint32_t (*sender_index)(const void *sender))
{
	struct activation_writer aw = {
		.w = w, .with_children = with_children, .sender_index = sender_index,
	};
	char *const *env;
	size_t n;

	state_put_section(w, STATE_TAG_ACTIVATION, ACTIVATION_STATE_VERSION);
	activation_get_env(a, &env, &n);
	state_put_u64(w, n);
	for (size_t i = 0; i < n; i++)
		state_put_str(w, env[i]);

	if (with_children)
		activation_foreach_child(a, count_child, &aw);
	state_put_u64(w, aw.n);
	if (with_children)
		activation_foreach_child(a, put_child, &aw);

	aw.n = 0;
	activation_foreach_pending(a, count_pending, skip_entry, &aw);
	state_put_u64(w, aw.n);
	activation_foreach_pending(a, put_pending, put_entry, &aw);
	return aw.error;
}

/* Whether header and body make one whole message of their size. */
static bool entry_frame_ok(const struct activation_state_entry *e)
{
	size_t total;

	if (e->n_header < 16 || e->n_header % 8)
		return false;
	return message_frame_size(e->header, e->n_header, &total) == 0 &&
	       total == e->n_header + e->n_body;
}

static bool read_entries(struct state_reader *r, struct activation_state_pending *p,
			 size_t n_senders)
{
	size_t m = state_get_count(r, 28);

	p->entries = calloc(m ? m : 1, sizeof(*p->entries));
	if (!p->entries) {
		r->error = true;
		return false;
	}
	p->n_entries = m;
	for (size_t j = 0; j < m && !r->error; j++) {
		struct activation_state_entry *e = &p->entries[j];

		e->sender = state_get_u32(r);
		e->auto_start = state_get_u32(r) != 0;
		e->header = state_get_bytes(r, &e->n_header);
		e->body = state_get_bytes(r, &e->n_body);
		e->fds = state_get_fds(r, &e->n_fds);
		if (!e->header ||
		    (e->sender != ACTIVATION_STATE_NO_SENDER && e->sender >= n_senders) ||
		    !entry_frame_ok(e))
			r->error = true;
	}
	return !r->error;
}

static bool read_pendings(struct state_reader *r, struct activation_state *st,
			  size_t n_senders)
{
	size_t n = state_get_count(r, 30);

	st->pendings = calloc(n ? n : 1, sizeof(*st->pendings));
	if (!st->pendings) {
		r->error = true;
		return false;
	}
	st->n_pendings = n;
	for (size_t i = 0; i < n && !r->error; i++) {
		struct activation_state_pending *p = &st->pendings[i];
		bool child_found = false;

		p->info.name = state_get_str(r);
		p->info.exec = state_get_str(r);
		p->info.unit = state_get_str(r);
		p->info.request_sent = state_get_u32(r) != 0;
		p->info.deadline_usec = state_get_u64(r);
		p->info.child_pid = (pid_t)state_get_u32(r);
		if (!p->info.name || p->info.child_pid < 0) {
			r->error = true;
			break;
		}
		for (size_t k = 0; k < st->n_children && p->info.child_pid; k++)
			child_found |= st->children[k].pid == p->info.child_pid;
		if (p->info.child_pid && !child_found) {
			r->error = true;
			break;
		}
		read_entries(r, p, n_senders);
	}
	return !r->error;
}

bool activation_state_read(struct state_reader *r, struct activation_state *st,
			   size_t n_senders)
{
	uint32_t version;
	size_t n;

	*st = (struct activation_state){};
	if (!state_section(r, STATE_TAG_ACTIVATION, ACTIVATION_STATE_VERSION, &version))
		return false;
	n = state_get_count(r, 9);
	st->env = calloc(n ? n : 1, sizeof(*st->env));
	if (!st->env) {
		r->error = true;
		return false;
	}
	st->n_env = n;
	for (size_t i = 0; i < n && !r->error; i++)
		if (!(st->env[i] = state_get_str(r)))
			r->error = true;

	n = state_get_count(r, 21);
	st->children = calloc(n ? n : 1, sizeof(*st->children));
	if (!st->children) {
		r->error = true;
		return false;
	}
	st->n_children = n;
	for (size_t i = 0; i < n && !r->error; i++) {
		struct activation_state_child *c = &st->children[i];

		c->pid = (pid_t)state_get_u32(r);
		c->err_fd = state_get_fd(r);
		c->helper = state_get_u32(r) != 0;
		c->name = state_get_str(r);
		if (c->pid <= 0 || !c->name)
			r->error = true;
	}
	if (r->error)
		return false;
	return read_pendings(r, st, n_senders);
}

void activation_state_deinit(struct activation_state *st)
{
	for (size_t i = 0; i < st->n_pendings; i++) {
		for (size_t j = 0; j < st->pendings[i].n_entries; j++)
			free(st->pendings[i].entries[j].fds);
		free(st->pendings[i].entries);
	}
	free(st->pendings);
	free(st->children);
	free(st->env);
	*st = (struct activation_state){};
}

static int restore_entry(struct activation *a, const char *name,
			 struct activation_state_entry *e, void *const *senders)
{
	_cleanup_message_ struct message *msg = NULL;
	_cleanup_free_ uint8_t *buf = NULL;
	size_t n = e->n_header + e->n_body;
	int r;

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
	return activation_restore_entry(a, name,
					e->sender == ACTIVATION_STATE_NO_SENDER ? NULL :
					senders[e->sender], msg, e->auto_start);
}

int activation_restore(struct activation *a, struct activation_state *st,
		       void *const *senders)
{
	int r;

	r = activation_restore_env(a, st->env, st->n_env);
	if (r < 0)
		return r;
	/* Children first: a pending activation finds its child by pid. */
	for (size_t i = 0; i < st->n_children; i++) {
		const struct activation_state_child *c = &st->children[i];

		r = activation_restore_child(a, c->pid, c->err_fd, c->helper, c->name);
		if (r < 0)
			return r;
	}
	for (size_t i = 0; i < st->n_pendings; i++) {
		struct activation_state_pending *p = &st->pendings[i];

		r = activation_restore_pending(a, &p->info);
		if (r < 0)
			return r;
		for (size_t j = 0; j < p->n_entries; j++) {
			r = restore_entry(a, p->info.name, &p->entries[j], senders);
			if (r < 0)
				return r;
		}
	}
	return 0;
}
