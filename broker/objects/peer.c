/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Peers: the transport-neutral client of the bus. See peer.h.
 */

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <syslog.h>
#include <unistd.h>
#include "broker/core/bus.h"
#include "broker/objects/log.h"
#include "broker/objects/peer.h"
#include "conf/policy.h"
#include "dbus-compat/message.h"
#include "dbus-compat/protocol.h"

const struct ratelimit_rule peer_refusal_log_rule = {
	.interval_usec = PEER_REFUSAL_LOG_WINDOW_USEC,
	.burst = PEER_REFUSAL_LOG_BURST,
};

static void peer_refusal_log_report(struct log_limit *l, uint64_t n_missed)
{
	struct peer *peer = container_of(l, struct peer, refusal_log);
	const char *info = peer_loginfo(peer);

	/* Beside the refusals' own lines: the same level and facility. */
	log_printf(LOG_AUTH | LOG_NOTICE, "%llu more refusals of %s (%s) were not logged",
		   (unsigned long long)n_missed,
		   peer->registered ? peer_name(peer) : "(inactive)", info ? info : "");
}

int peer_new(struct peer **peerp, struct bus *bus, struct peer_transport *transport,
	     struct socket_creds *creds)
{
	struct peer *peer;
	int r;

	peer = calloc(1, sizeof(*peer));
	if (!peer) {
		transport->ops->free(transport);
		socket_creds_deinit(creds);
		return -ENOMEM;
	}
	peer->bus = bus;
	log_limit_init(&peer->refusal_log, &peer_refusal_log_rule, peer_refusal_log_report);
	list_init(&peer->bus_link);
	list_init(&peer->monitor_link);
	list_init(&peer->attachments);
	list_init(&peer->dead_link);
	list_init(&peer->overflow_link);
	peer->transport = transport;
	peer->output = transport;
	peer->creds = *creds;
	*creds = (struct socket_creds){ .pidfd = -1 };
	peer->uid = peer->creds.uid;
	peer->pid = peer->creds.pid;
	peer->socket_identity = peer->creds.have_creds;

	/* The real id is assigned at Hello (driver.c). */
	name_owner_init(&peer->owner, 0);
	match_owner_init(&peer->matches, &peer->owner);
	reply_owner_init(&peer->replies, bus->replies);

	r = user_registry_ref_user(bus->users, &peer->user, peer->uid);
	if (r < 0) {
		peer_free(peer);
		return r;
	}
	if (peer->user)
		peer->replies.pending_tally = &peer->user->n_pending_replies;
	list_append(&bus->peers, &peer->bus_link);
	bus->n_incomplete++;
	*peerp = peer;
	return 0;
}

struct peer *peer_free(struct peer *peer)
{
	if (!peer)
		return NULL;
	/* First: telling what it left out names it. */
	log_limit_deinit(&peer->refusal_log);
	list_unlink(&peer->dead_link);
	list_unlink(&peer->bus_link);
	list_unlink(&peer->monitor_link);
	list_unlink(&peer->overflow_link);
	/* The features' state first: the newest may point into the older. */
	while (!list_is_empty(&peer->attachments)) {
		struct peer_attachment *a = list_first_entry(&peer->attachments,
							     struct peer_attachment, peer_link);

		peer_detach(a);
		a->ops->free(a);
	}
	/* Transports first: releasing queued output uncharges peer->user. */
	if (peer->output && peer->output != peer->transport)
		peer->output->ops->free(peer->output);
	if (peer->transport)
		peer->transport->ops->free(peer->transport);
	peer->output = peer->transport = NULL;
	peer->policy = bus_client_policy_free(peer->policy);
	reply_owner_deinit(&peer->replies);
	match_owner_deinit(&peer->matches);
	name_owner_deinit(&peer->owner);
	for (int i = 0; i < _USER_SLOT_N; i++)
		user_charge_release(&peer->charges[i]);
	if (peer->user)
		peer->user = user_unref(peer->user);
	free(peer->loginfo);
	socket_creds_deinit(&peer->creds);
	free(peer);
	return NULL;
}

/* dbus-daemon's length limit of the command line in log lines. */
#define LOGINFO_COMMAND_MAX 50

/* The command line of @pid, its arguments joined by spaces; "" if unknown. */
static void command_of(pid_t pid, char *buf, size_t size)
{
	char path[64];
	ssize_t n;
	int fd;

	buf[0] = '\0';
	snprintf(path, sizeof(path), "/proc/%d/cmdline", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	n = read(fd, buf, size - 1);
	close(fd);
	if (n <= 0)
		return;
	while (n > 0 && buf[n - 1] == '\0')
		n--;
	buf[n] = '\0';
	for (ssize_t i = 0; i < n; i++)
		if (buf[i] == '\0')
			buf[i] = ' ';
}

const char *peer_loginfo(struct peer *peer)
{
	char comm[LOGINFO_COMMAND_MAX + 1];
	struct peer_attachment *a;
	char buf[512];
	size_t len = 0;

	if (peer->loginfo)
		return peer->loginfo;
	buf[0] = '\0';
	if (peer->uid != (uid_t)-1)
		len += (size_t)snprintf(buf + len, sizeof(buf) - len, "uid=%u", (unsigned)peer->uid);
	if (peer->pid > 0 && len < sizeof(buf)) {
		command_of(peer->pid, comm, sizeof(comm));
		len += (size_t)snprintf(buf + len, sizeof(buf) - len, "%spid=%d comm=\"%s\"",
					len ? " " : "", (int)peer->pid, comm);
	}
	if (peer->creds.label && len < sizeof(buf))
		len += (size_t)snprintf(buf + len, sizeof(buf) - len, "%slabel=\"%s\"",
					len ? " " : "", peer->creds.label);
	/* What the features add (a container instance), oldest first. */
	list_for_each_entry_reverse(a, &peer->attachments, peer_link) {
		size_t at = len;

		if (!a->ops->describe || len + 2 >= sizeof(buf))
			continue;
		if (len)
			buf[len++] = ' ';
		buf[len] = '\0';
		a->ops->describe(a, buf + len, sizeof(buf) - len);
		len = buf[len] ? len + strlen(buf + len) : at;
		buf[len] = '\0';
	}
	peer->loginfo = strdup(buf);
	return peer->loginfo;
}

int peer_queue(struct peer *peer, struct message *msg)
{
	int r;

	if (peer->closed || peer->overflow)
		return PEER_E_DEAD;
	/* The crash journal is replayed (bus-journal.h): nothing goes out. */
	if (peer->bus->replaying)
		return 0;
	r = peer->output->ops->queue(peer->output, msg);
	if (r == 0)
		peer->n_outgoing++;
	return r;
}

void peer_output_stats(struct peer *peer, struct peer_output_stats *st)
{
	*st = (struct peer_output_stats){};
	/* A native client's output: its bus1 queue, after what its socket holds. */
	if (peer->transport && peer->transport->ops->output_stats)
		peer->transport->ops->output_stats(peer->transport, st);
	if (peer->output && peer->output != peer->transport && peer->output->ops->output_stats)
		peer->output->ops->output_stats(peer->output, st);
}

void peer_set_output(struct peer *peer, struct peer_transport *output)
{
	/* Only once: the bootstrap is the first call, and only one. */
	assert(peer->output == peer->transport);
	peer->output = output;
}

int peer_charge(struct peer *peer, enum user_slot slot, uint64_t amount)
{
	if (!peer->user || !amount)
		return 0;
	return user_charge(&peer->charges[slot], peer->user, slot, amount);
}

void peer_uncharge(struct peer *peer, enum user_slot slot, uint64_t amount)
{
	struct user_charge *c = &peer->charges[slot];

	if (!c->user || !amount)
		return;
	if (amount > c->amount)
		amount = c->amount;
	user_uncharge(c->user, slot, amount);
	c->amount -= amount;
}

int peer_charge_message(struct peer *peer, uint64_t bytes, uint64_t n_fds)
{
	int r;

	r = peer_charge(peer, USER_SLOT_BYTES, bytes);
	if (r)
		return r;
	r = peer_charge(peer, USER_SLOT_FDS, n_fds);
	if (r)
		peer_uncharge(peer, USER_SLOT_BYTES, bytes);
	return r;
}

/*
 * What the bus holds for a queued message besides its bytes: the message
 * object (one per message, but each receiver is charged for it: a multicast
 * costs more than its bytes too), the queue entry and the allocator's
 * headers.
 */
#define PEER_MESSAGE_OVERHEAD (sizeof(struct message) + 192)

static uint64_t peer_actor_key(const struct peer *p)
{
	/*
	 * Before Hello, none (it can send nothing but Hello); after it, its
	 * unique id counted from 1, since 0 means none to user.h and ":1.0"
	 * must not escape its share.
	 */
	if (!p->registered)
		return 0;
	return user_actor_key(p->owner.id + 1, p->group ? p->group->id : 0);
}

int peer_charge_queued(struct peer *peer, const struct message *msg, struct queue_charge *qc)
{
	struct peer *actor = peer->bus->dispatching;
	bool fair;
	int r;

	*qc = (struct queue_charge){
		.bytes = message_get_size(msg) + PEER_MESSAGE_OVERHEAD,
		.fds = msg->n_fds,
		.answer = actor == peer,
	};
	/*
	 * Peers without an identity (ANONYMOUS, TCP without a cookie) share
	 * the user of uid -1: one quota for all of them. peer->user is NULL
	 * only for a peer that never got that far (peer_new() failing).
	 */
	if (peer->user) {
		fair = actor && !qc->answer && msg->type == DC_MESSAGE_METHOD_CALL;
		r = user_actor_charge(peer->user, actor ? peer_actor_key(actor) : 0, qc->bytes,
				      qc->fds, fair, &qc->actor);
		if (r)
			return r < 0 ? r : PEER_E_QUOTA;
		if (peer_charge_message(peer, qc->bytes, qc->fds)) {
			user_actor_uncharge(qc->actor, qc->bytes, qc->fds);
			qc->actor = NULL;
			return PEER_E_QUOTA;
		}
	}
	if (qc->answer) {
		peer->n_answer_bytes += qc->bytes;
		if (peer->n_answer_bytes > PEER_ANSWER_BACKLOG)
			peer->input_paused = true;
	}
	return 0;
}

void peer_uncharge_queued(struct peer *peer, struct queue_charge *qc)
{
	if (peer->user) {
		peer_uncharge(peer, USER_SLOT_BYTES, qc->bytes);
		peer_uncharge(peer, USER_SLOT_FDS, qc->fds);
	}
	user_actor_uncharge(qc->actor, qc->bytes, qc->fds);
	if (qc->answer) {
		peer->n_answer_bytes -= qc->bytes;
		if (peer->n_answer_bytes <= PEER_ANSWER_BACKLOG / 2)
			peer->input_paused = false;
	}
	*qc = (struct queue_charge){};
}

void peer_count_refusal(struct peer *peer, enum refusal what)
{
	peer->refusals.n[what]++;
	if (peer->user)
		peer->user->refusals.n[what]++;
	peer->bus->refusals.n[what]++;
}

struct log_limit *peer_refusal_log(struct peer *peer)
{
	return peer->group ? &peer->group->refusal_log : &peer->refusal_log;
}

void peer_set_pid(struct peer *peer, pid_t pid)
{
	int fd;

	/* The bootstrapping process itself: its SO_PEERPIDFD names it already. */
	if (pid <= 0 || (pid == peer->pid && peer->creds.pidfd >= 0))
		return;
	fd = (int)syscall(SYS_pidfd_open, pid, 0);
	if (peer->creds.pidfd >= 0)
		close(peer->creds.pidfd);
	peer->creds.pidfd = fd >= 0 ? fd : -1;
	peer->creds.pidfd_of_socket = false;
	peer->pid = pid;
}

int peer_attachments_registered(struct peer *peer)
{
	struct peer_attachment *a;
	int r;

	list_for_each_entry_reverse(a, &peer->attachments, peer_link) {
		if (!a->ops->registered)
			continue;
		r = a->ops->registered(a);
		if (r < 0)
			return r;
	}
	return 0;
}

void peer_attachments_credentials(struct peer *peer, struct dc_writer *w)
{
	struct peer_attachment *a;

	list_for_each_entry_reverse(a, &peer->attachments, peer_link)
		if (a->ops->credentials)
			a->ops->credentials(a, w);
}
