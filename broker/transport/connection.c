/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Socket connections, the socket transport of a peer: authentication,
 * framing, the output queue. What the peer sends goes to peer.c, which
 * hands it to the router. See connection.h.
 */

#include <assert.h>
#include <errno.h>
#include <grp.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>
#include "broker/core/bus.h"
#include "broker/core/bus-journal.h"
#include "broker/transport/connection.h"
#include "broker/objects/log.h"
#include "broker/objects/log-limit.h"
#include "broker/objects/peer.h"
#include "broker/objects/state.h"
#include "dbus-compat/keyring.h"
#include "dbus-compat/message.h"
#include "dbus-compat/protocol.h"

/*
 * Work done for one connection per wakeup: this many recvmsg() calls. Each
 * call may deliver many small messages; the bound keeps one busy client from
 * starving the others (the level-triggered source fires again).
 */
#define CONNECTION_READ_BUDGET 16

/* Positive code of the input steps below. */
enum {
	_CONNECTION_E_SUCCESS,
	CONNECTION_E_CLOSED,	/* the peer was closed (peer_close()): read no more */
};

/**
 * struct delivery - one message queued on one socket
 * @entry:	the socket's write-queue entry
 * @msg:	the (shared) message; one reference per delivery
 * @peer:	the destination, whose counters are charged
 * @charge:	what it costs @peer's user, and for which actor
 * @iov:	header and body of @msg
 *
 * @sockets:	the transport, whose cache keeps it once freed
 */
struct delivery {
	struct socket_entry entry;
	struct message *msg;
	struct connection *conn;
	struct queue_charge charge;
	struct socket_transport *sockets;
	struct iovec iov[2];
	struct delivery *next_free;
};

#define DELIVERY_CACHE_MAX 4096

/*
 * Unused queue entries, kept for reuse: one cache for all connections, so
 * the steady state allocates nothing per destination.
 */
struct delivery_cache {
	struct delivery *free_list;
	size_t n_free;
	size_t n_used;
};

/**
 * struct socket_transport - every socket connection of the bus
 * @transport:	its entry in the bus' transports
 * @bus:	the bus
 * @flush_list:	connections with output queued (struct connection.flush_link)
 * @deliveries:	the queue entries' cache
 * @dispatching_input: true while connection_io() dispatches a connection's
 *		input: it flushes the bus when done, so queueing then needs no
 *		deferred flush (which would cost two sd-event updates per message)
 */
struct socket_transport {
	struct bus_transport transport;
	struct bus *bus;
	struct list_node flush_list;
	struct delivery_cache deliveries;
	bool dispatching_input;
};

static struct delivery *delivery_alloc(struct delivery_cache *cache)
{
	struct delivery *d = cache->free_list;

	if (d) {
		assert(cache->n_free > 0);
		cache->free_list = d->next_free;
		cache->n_free--;
		cache->n_used++;
		return d;
	}
	d = malloc(sizeof(*d));
	if (d)
		cache->n_used++;
	return d;
}

static void delivery_recycle(struct delivery_cache *cache, struct delivery *d)
{
	/* An entry goes back once: twice would put it twice on the free list. */
	assert(cache->n_used > 0);
	cache->n_used--;
	if (cache->n_free >= DELIVERY_CACHE_MAX) {
		free(d);
		return;
	}
	d->next_free = cache->free_list;
	cache->free_list = d;
	cache->n_free++;
}

static void delivery_release(struct socket_entry *entry)
{
	struct delivery *d = container_of(entry, struct delivery, entry);
	struct connection *conn = d->conn;
	size_t size = message_get_size(d->msg);

	/* What connection_queue() added, taken back once. */
	assert(conn->n_queued_bytes >= size && conn->n_queued_fds >= d->msg->n_fds);
	assert(conn->n_queued_msgs > 0);
	conn->n_queued_bytes -= size;
	conn->n_queued_fds -= d->msg->n_fds;
	conn->n_queued_msgs--;
	peer_uncharge_queued(conn->peer, &d->charge);
	message_unref(d->msg);
	delivery_recycle(&d->sockets->deliveries, d);
}

static void connection_update_events(struct connection *conn)
{
	uint32_t events;

	if (conn->closed || !conn->io)
		return;
	events = conn->eof || conn->peer->input_paused ? 0 : EPOLLIN | EPOLLRDHUP;
	/*
	 * A pending flush tries the write first; EPOLLOUT is only needed when
	 * the kernel did not take everything (saves two epoll_ctl() per message).
	 */
	if (socket_wants_write(conn->socket) && !list_node_is_linked(&conn->flush_link))
		events |= EPOLLOUT;
	events |= EPOLLET;
	/*
	 * Edge-triggered (see connection_io()): a changed mask, or input left
	 * unread, re-arms the edge (epoll_ctl() reports what is ready now).
	 */
	if (events != conn->io_events || conn->input_left) {
		if (sd_event_source_set_io_events(conn->io, events) >= 0) {
			conn->io_events = events;
			conn->input_left = false;
		}
	}
}

/*
 * @conn has output queued: it goes out when the bus flushes its transports
 * (at the end of the input being dispatched, or by the deferred flush).
 */
static void connection_schedule_flush(struct connection *conn)
{
	struct socket_transport *sockets = conn->sockets;

	if (!list_node_is_linked(&conn->flush_link))
		list_append(&sockets->flush_list, &conn->flush_link);
	if (!sockets->dispatching_input)
		bus_schedule_flush(sockets->bus);
}

/*
 * Is @peer's queue too full for @size bytes and @n_fds more? As in
 * dbus-daemon, a queue is full once it holds more than its configured limit
 * (a message of any size goes into a queue at or below it); the bus' own
 * bounds (BUS_QUEUE_*_CAP) hold whatever the configuration says, message
 * included.
 */
static bool connection_queue_full(const struct connection *conn, size_t size, size_t n_fds)
{
	const struct bus *bus = conn->peer->bus;

	return conn->n_queued_bytes > bus->max_queued_bytes ||
	       conn->n_queued_fds > bus->max_queued_fds ||
	       conn->n_queued_bytes + size > BUS_QUEUE_BYTES_CAP ||
	       conn->n_queued_fds + n_fds > BUS_QUEUE_FDS_CAP;
}

static int connection_queue(struct peer_transport *transport, struct message *msg)
{
	struct connection *conn = container_of(transport, struct connection, transport);
	struct peer *peer = conn->peer;
	struct delivery *d;
	struct queue_charge charge;
	size_t size = message_get_size(msg);
	int r;

	if (conn->closed)
		return PEER_E_DEAD;
	if (connection_queue_full(conn, size, msg->n_fds)) {
		/*
		 * The quota is for what the receiver does not take: one read
		 * batch may produce more than it for a reader, so give the
		 * kernel what fits before judging.
		 */
		/*
		 * No snapshot here, in the middle of routing (it could hold
		 * half of a change whose record follows): what this write
		 * reveals keeps the connection's mark set, so a crash before
		 * the next flush closes it (journal.h).
		 */
		r = socket_dispatch_write(conn->socket);
		if (r) {
			/* Closed after this dispatch, never in the middle of routing. */
			peer_overflow(peer);
			return PEER_E_DEAD;
		}
		if (connection_queue_full(conn, size, msg->n_fds))
			return PEER_E_QUOTA;
	}
	r = peer_charge_queued(peer, msg, &charge);
	if (r)
		return r;

	d = delivery_alloc(&conn->sockets->deliveries);
	if (!d) {
		peer_uncharge_queued(peer, &charge);
		return -ENOMEM;
	}
	d->msg = message_ref(msg);
	d->conn = conn;
	d->charge = charge;
	d->sockets = conn->sockets;
	message_get_iovec(msg, d->iov);
	d->entry = (struct socket_entry){
		.iov = d->iov,
		.n_iov = d->iov[1].iov_len ? 2 : 1,
		.fds = msg->fds,
		.n_fds = msg->n_fds,
		.release = delivery_release,
	};
	list_init(&d->entry.link);
	conn->n_queued_bytes += size;
	conn->n_queued_fds += msg->n_fds;
	r = socket_queue(conn->socket, &d->entry);
	if (r) {
		/* release is not called on failure: undo by hand. */
		conn->n_queued_bytes -= size;
		conn->n_queued_fds -= msg->n_fds;
		peer_uncharge_queued(peer, &d->charge);
		message_unref(d->msg);
		delivery_recycle(&conn->sockets->deliveries, d);
		return r < 0 ? r : PEER_E_QUOTA;
	}
	conn->peak_queued_bytes = MAX(conn->peak_queued_bytes, conn->n_queued_bytes);
	conn->peak_queued_fds = MAX(conn->peak_queued_fds, conn->n_queued_fds);
	conn->n_queued_msgs++;
	/* Until written whole: a crash now cuts or swallows it (journal.h). */
	journal_mark_set(peer->bus->journal, socket_get_fd(conn->socket), JOURNAL_MARK_OUT);
	connection_schedule_flush(conn);
	return 0;
}

static void connection_flush(struct connection *conn)
{
	int r;

	if (conn->closed)
		return;
	bus_journal_sync(conn->peer->bus);
	r = socket_dispatch_write(conn->socket);
	if (r) {
		peer_close(conn->peer, r > 0 ? NULL : "write failed");
		return;
	}
	if (!socket_wants_write(conn->socket))
		journal_mark_clear(conn->peer->bus->journal, socket_get_fd(conn->socket),
				   JOURNAL_MARK_OUT);
	connection_update_events(conn);
}

/*
 * The home directory of this process' user: $HOME when it is that user's
 * directory (as libdbus and GDBus clients use it), else the user database's.
 */
static char *own_home(void)
{
	const char *env = getenv("HOME");
	struct passwd pw, *res = NULL;
	char buf[4096];
	struct stat st;

	if (env && env[0] == '/' && stat(env, &st) == 0 && st.st_uid == geteuid())
		return strdup(env);
	if (getpwuid_r(geteuid(), &pw, buf, sizeof(buf), &res) || !res || !res->pw_dir)
		return NULL;
	return strdup(res->pw_dir);
}

/*
 * DBUS_COOKIE_SHA1 cookies: the keyring is in the home directory of the
 * user the client names, and only this process' own user is vouched for
 * (another user's home is theirs to tamper with, as libdbus reasons).
 */
static int connection_cookie_source(void *userdata, const char *identity,
				    struct sasl_cookie *cookie)
{
	_cleanup_free_ char *home = NULL, *dir = NULL;
	struct keyring_cookie kc;
	unsigned long long v = 0;
	uid_t uid;
	int r;

	(void)userdata;
	if (identity[0] >= '0' && identity[0] <= '9') {
		for (const char *p = identity; *p; p++) {
			if (*p < '0' || *p > '9' || v > (uid_t)-1)
				return SASL_COOKIE_E_REJECTED;
			v = v * 10 + (unsigned long long)(*p - '0');
		}
		if (v >= (uid_t)-1)
			return SASL_COOKIE_E_REJECTED;
		uid = (uid_t)v;
	} else {
		struct passwd pw, *res = NULL;
		char buf[4096];

		if (getpwnam_r(identity, &pw, buf, sizeof(buf), &res) || !res)
			return SASL_COOKIE_E_REJECTED;
		uid = res->pw_uid;
	}
	if (uid != geteuid())
		return SASL_COOKIE_E_REJECTED;

	home = own_home();
	if (!home)
		return SASL_COOKIE_E_REJECTED;
	if (asprintf(&dir, "%s/.dbus-keyrings", home) < 0) {
		dir = NULL;
		return -ENOMEM;
	}
	r = keyring_get_cookie(dir, KEYRING_CONTEXT_DEFAULT, (int64_t)time(NULL), &kc);
	/* No usable keyring: the client is rejected, the bus goes on. */
	if (r == KEYRING_E_UNUSABLE || (r < 0 && r != -ENOMEM))
		r = SASL_COOKIE_E_REJECTED;
	if (r)
		goto out;
	if (strlen(kc.secret) > SASL_COOKIE_SECRET_MAX) {
		r = SASL_COOKIE_E_REJECTED;
		goto out;
	}
	cookie->uid = uid;
	snprintf(cookie->context, sizeof(cookie->context), "%s", KEYRING_CONTEXT_DEFAULT);
	cookie->id = kc.id;
	memcpy(cookie->secret, kc.secret, strlen(kc.secret) + 1);
out:
	explicit_bzero(&kc, sizeof(kc));
	return r;
}

/*
 * nonce-tcp: the first ADDRESS_NONCE_LEN bytes must be the listener's nonce
 * (compared without an early exit). Returns 0 (done or more needed), or
 * CONNECTION_E_CLOSED when the connection was closed for a wrong nonce.
 */
static int connection_check_nonce(struct connection *conn)
{
	const uint8_t *data;
	size_t n, k;

	/* The index below stays in the nonce. */
	assert(conn->nonce_left > 0 && conn->nonce_left <= ADDRESS_NONCE_LEN);
	data = socket_peek_raw(conn->socket, &n);
	k = MIN(n, (size_t)conn->nonce_left);
	for (size_t i = 0; i < k; i++)
		conn->nonce_diff |= data[i] ^ conn->nonce[ADDRESS_NONCE_LEN - conn->nonce_left + i];
	socket_consume_raw(conn->socket, k);
	conn->nonce_left -= (uint8_t)k;
	if (conn->nonce_left == 0) {
		explicit_bzero(conn->nonce, sizeof(conn->nonce));
		if (conn->nonce_diff) {
			peer_close(conn->peer, "wrong nonce (nonce-tcp)");
			return CONNECTION_E_CLOSED;
		}
	}
	return 0;
}

/* Send pending SASL replies (small; copied into the queue). */
static int connection_flush_sasl(struct connection *conn)
{
	const char *out;
	size_t n;
	int r;

	out = sasl_server_peek_output(conn->sasl, &n);
	if (!n)
		return 0;
	r = socket_queue_copy(conn->socket, out, n);
	if (r < 0)
		return r;
	sasl_server_consume_output(conn->sasl, n);
	connection_schedule_flush(conn);
	return 0;
}

static void connection_free_sasl(struct connection *conn)
{
	if (!conn->sasl)
		return;
	sasl_server_deinit(conn->sasl);
	free(conn->sasl);
	conn->sasl = NULL;
}

/* Feed raw input to the SASL server. Returns 0, CONNECTION_E_CLOSED or -errno. */
static int connection_authenticate(struct connection *conn)
{
	const void *data;
	size_t n, consumed = 0;
	int r;

	/* Until authenticated (a restored connection is, and has none). */
	assert(conn->sasl && !conn->peer->authenticated);
	if (conn->nonce_left) {
		r = connection_check_nonce(conn);
		if (r || conn->nonce_left)
			return r;
	}
	data = socket_peek_raw(conn->socket, &n);
	if (!n)
		return 0;
	r = sasl_server_feed(conn->sasl, data, n, &consumed);
	socket_consume_raw(conn->socket, consumed);
	if (r < 0)
		return r;
	if (connection_flush_sasl(conn) < 0)
		return -ENOMEM;
	if (r == SASL_SERVER_FAILED) {
		const char *why = sasl_server_get_failure(conn->sasl);

		/* Let the last ERROR/REJECTED reach the client, then close. */
		connection_flush(conn);
		peer_close(conn->peer, why ? why : "authentication failed");
		return CONNECTION_E_CLOSED;
	}
	if (r == SASL_SERVER_DONE) {
		uid_t uid = sasl_server_get_uid(conn->sasl);
		bool unix_fds = sasl_server_unix_fd_agreed(conn->sasl);
		bool anonymous = sasl_server_is_anonymous(conn->sasl);

		/* Not needed any more (memory per connection). */
		connection_free_sasl(conn);
		socket_start_framing(conn->socket);
		/* auth_timeout runs on until Hello (connection_registered()). */
		r = peer_authenticated(conn->peer, uid, unix_fds, anonymous);
		/* The policy or an LSM refused it, and it is closed. */
		return r == PEER_E_REFUSED ? CONNECTION_E_CLOSED : r;
	}
	return 0;
}

/* Close @n fds and free their array. */
static void close_and_free_fds(int *fds, size_t n)
{
	close_many(fds, n);
	free(fds);
}

/*
 * The fds a client sends on its socket form one stream, as for dbus-daemon
 * (libdbus' message loader): a message takes its UNIX_FDS from the front of
 * what arrived so far, and fds beyond that wait in conn->spare_fds for the
 * next messages that declare fds. Fewer than UNIX_FDS is a protocol error,
 * and so are more than max_message_unix_fds waiting (dbus-daemon's loader
 * holds no more); waiting fds count for pending_fd_timeout and are closed
 * with the connection. Takes @msg, the fds and the @fds array. Returns 0,
 * CONNECTION_E_CLOSED or -errno.
 */
static int connection_dispatch_frame(struct connection *conn, struct message *msg, int *fds,
				     size_t n_fds)
{
	int *all = fds;
	size_t n_all = n_fds, n_taken;
	int r;

	if (conn->n_spare_fds + n_fds > (size_t)conn->peer->bus->limits.max_message_unix_fds) {
		close_and_free_fds(fds, n_fds);
		message_unref(msg);
		peer_close(conn->peer, "sent more file descriptors than max_message_unix_fds");
		return CONNECTION_E_CLOSED;
	}
	if (conn->n_spare_fds > 0) {
		if (n_fds > 0) {
			int *v = realloc(conn->spare_fds,
					 (conn->n_spare_fds + n_fds) * sizeof(*v));

			if (!v) {
				close_and_free_fds(fds, n_fds);
				message_unref(msg);
				return -ENOMEM;
			}
			memcpy(v + conn->n_spare_fds, fds, n_fds * sizeof(*v));
			conn->spare_fds = v;
			conn->n_spare_fds += n_fds;
			free(fds);
		}
		all = steal_ptr(conn->spare_fds);
		n_all = conn->n_spare_fds;
		conn->n_spare_fds = 0;
	}

	/* The message owns the first n_taken fds, in all cases. */
	r = message_parse_queued(msg, all, n_all, &n_taken);
	assert(n_taken <= n_all);
	if (n_taken < n_all) {
		memmove(all, all + n_taken, (n_all - n_taken) * sizeof(*all));
		conn->spare_fds = all;
		conn->n_spare_fds = n_all - n_taken;
	} else {
		free(all);
	}
	r = peer_dispatch_parsed(conn->peer, msg, r);
	/* Positive: the message was invalid, and the peer is closed for it. */
	return r > 0 ? CONNECTION_E_CLOSED : r;
}

/* Take and dispatch every complete message. Returns 0, CONNECTION_E_CLOSED or -errno. */
static int connection_read_frames(struct connection *conn)
{
	struct bus *bus = conn->peer->bus;
	int r;

	for (;;) {
		struct message *msg = NULL;
		int *fds = NULL;
		size_t size, n_fds = 0;

		r = socket_peek_frame(conn->socket, &size);
		if (r == SOCKET_E_AGAIN) {
			const void *data;
			size_t n;

			/* Refuse an oversized message as soon as its header is in. */
			data = socket_peek_raw(conn->socket, &n);
			if (n >= SOCKET_FRAME_HEADER &&
			    (socket_frame_size(data, &size) ||
			     size > (size_t)bus->limits.max_message_size)) {
				peer_close(conn->peer, "message exceeds max_message_size");
				return CONNECTION_E_CLOSED;
			}
			return 0;
		}
		if (r > 0) {
			peer_close(conn->peer, "invalid message framing");
			return CONNECTION_E_CLOSED;
		}
		if (r < 0)
			return r;
		if (size > (size_t)bus->limits.max_message_size) {
			peer_close(conn->peer, "message exceeds max_message_size");
			return CONNECTION_E_CLOSED;
		}

		if (size > SOCKET_FRAME_LARGE) {
			/*
			 * A large frame arrived in a buffer of its own: the
			 * message adopts it, its bytes are never copied.
			 */
			struct socket_frame frame;

			r = socket_read_frame(conn->socket, &frame);
			if (!r) {
				r = message_new_adopted(&msg, frame.data, frame.n_data);
				if (r < 0) {
					socket_frame_deinit(&frame);
					return r;
				}
				fds = steal_ptr(frame.fds);
				n_fds = frame.n_fds;
			}
		} else {
			/* One copy: from the socket buffer straight into the message. */
			r = message_new_incoming(&msg, size);
			if (r < 0)
				return r;
			r = socket_take_frame(conn->socket, message_incoming_data(msg), &fds,
					      &n_fds);
		}
		if (r) {
			message_unref(msg);
			if (r < 0)
				return r;
			peer_close(conn->peer, "invalid message framing");
			return CONNECTION_E_CLOSED;
		}
		if (n_fds && !conn->peer->unix_fds) {
			close_and_free_fds(fds, n_fds);
			message_unref(msg);
			peer_close(conn->peer, "sent file descriptors without negotiating them");
			return CONNECTION_E_CLOSED;
		}
		r = connection_dispatch_frame(conn, msg, fds, n_fds);
		if (r)
			return r;
		if (conn->closed)
			return CONNECTION_E_CLOSED;
	}
}

/*
 * pending_fd_timeout and auth_timeout (below) close a connection with a line
 * in dbus-daemon's words and at its level, limited as the connection's
 * refusals are (a container instance's connections together).
 */
static int connection_pending_fd_timeout(sd_event_source *s, uint64_t usec, void *userdata)
{
	struct connection *conn = userdata;
	struct peer *peer = conn->peer;
	const char *info = peer_loginfo(peer);

	log_limit_printf(&peer->bus->log_limits, peer_refusal_log(peer), LOG_WARNING,
			 "Connection \"%s\" (%s) has had Unix fds pending for too long, closing "
			 "it (pending_fd_timeout=%lld ms)",
			 peer->registered ? peer_name(peer) : "(null)",
			 !peer->registered ? "inactive" : info ? info : "",
			 (long long)peer->bus->limits.pending_fd_timeout);
	peer_close(peer, NULL);
	return 0;
}

/*
 * pending_fd_timeout, as dbus-daemon has it: the clock starts when fds are
 * first held for an incomplete message, or wait beyond the UNIX_FDS of the
 * messages sent so far (connection_dispatch_frame()), and stops when no fds
 * are held any more; a client that keeps fds there past it is disconnected
 * (the fds count against the user's quota meanwhile).
 */
static void connection_watch_pending_fds(struct connection *conn)
{
	struct bus *bus = conn->peer->bus;
	uint64_t now;

	if (!socket_holds_fds(conn->socket) && conn->n_spare_fds == 0) {
		conn->pending_fd_timer = sd_event_source_disable_unref(conn->pending_fd_timer);
		return;
	}
	if (conn->pending_fd_timer || bus->limits.pending_fd_timeout <= 0)
		return;
	sd_event_now(bus->event, CLOCK_MONOTONIC, &now);
	if (sd_event_add_time(bus->event, &conn->pending_fd_timer, CLOCK_MONOTONIC,
			      now + (uint64_t)bus->limits.pending_fd_timeout * 1000,
			      BUS_TIMER_ACCURACY_USEC, connection_pending_fd_timeout, conn) < 0)
		/* Not fatal: the fds stay bounded by the per-user quota. */
		log_warn("cannot arm pending_fd_timeout for a connection");
}

/*
 * The socket's io source is edge-triggered. sd-event dispatches one source
 * per loop iteration and asks epoll for the ready ones each time; with
 * level-triggered sources the kernel polls every still-ready socket again at
 * each of those calls, so with thousands of busy connections the bus spent
 * its time in epoll_wait() (quadratic: at 9,800 connections each phase of
 * stress-connections took 10 s on an idle machine, and more than a minute on
 * a loaded one). Edge-triggered, epoll reports a socket once per arrival,
 * and sd-event keeps it pending until its turn. The price is the rule that
 * the input is read until the kernel has no more: a short read or EAGAIN.
 * When the read budget (fairness between connections) runs out first,
 * input_left makes connection_update_events() re-arm the edge, and epoll
 * reports the socket again at once. A paused input is re-armed the same way
 * when it resumes (its events change).
 */
static int connection_io_work(sd_event_source *s, int fd, uint32_t revents, void *userdata)
{
	struct connection *conn = userdata;
	bool hangup;
	int i, r;

	if (revents & EPOLLOUT) {
		connection_flush(conn);
		if (conn->closed)
			return 0;
	}

	/*
	 * Paused (PEER_ANSWER_BACKLOG), the input waits until the peer reads;
	 * a hang-up is still read, to the end.
	 */
	hangup = revents & (EPOLLHUP | EPOLLERR | EPOLLRDHUP);
	if (hangup || ((revents & EPOLLIN) && !conn->peer->input_paused)) {
		struct journal *journal = conn->peer->bus->journal;

		/* Read and not yet routed, until it is: a crash now swallows it (journal.h). */
		journal_mark_set(journal, fd, JOURNAL_MARK_IN);
		/* Until drained, unless the budget runs out first (then input_left). */
		conn->input_left = true;
		for (i = 0; i < CONNECTION_READ_BUDGET && !conn->eof &&
			    (hangup || !conn->peer->input_paused); i++) {
			size_t before = socket_get_buffered_bytes(conn->socket);

			r = socket_dispatch_read(conn->socket);
			if (r == SOCKET_E_EOF) {
				conn->eof = true;
			} else if (r > 0) {
				peer_close(conn->peer, "protocol error");
				return 0;
			} else if (r < 0) {
				peer_close(conn->peer, "read failed");
				return 0;
			}

			if (!conn->peer->authenticated) {
				r = connection_authenticate(conn);
				if (r)
					goto out;
			}
			if (conn->peer->authenticated) {
				r = connection_read_frames(conn);
				if (r)
					goto out;
			}
			/*
			 * The kernel had no more (socket.h): new data will be a new
			 * edge. Not after a hang-up, whose edge is spent: its end of
			 * file is only read after the data before it.
			 */
			if (r == 0 && !conn->eof && !hangup && socket_is_drained(conn->socket)) {
				conn->input_left = false;
				break;
			}
			/* Nothing new arrived, yet not drained: come back (input_left). */
			if (socket_get_buffered_bytes(conn->socket) == before && r == 0 &&
			    !conn->eof)
				break;
		}
		if (conn->eof) {
			peer_close(conn->peer, NULL);
			return 0;
		}
		if (conn->peer->authenticated)
			connection_watch_pending_fds(conn);
		/* Everything read was routed: nothing of its stream is only here. */
		if (!socket_get_buffered_bytes(conn->socket) && !conn->n_spare_fds)
			journal_mark_clear(journal, fd, JOURNAL_MARK_IN);
	}
	connection_update_events(conn);
	return 0;

out:
	if (r < 0)
		peer_close(conn->peer, log_error(r));
	return 0;
}

/*
 * Everything the input produced is written before the loop polls again: the
 * deferred flush would cost a second sd-event iteration (and epoll_wait())
 * per wakeup; batching across the messages of one read batch is kept.
 */
static int connection_io(sd_event_source *s, int fd, uint32_t revents, void *userdata)
{
	struct connection *conn = userdata;
	struct socket_transport *sockets = conn->sockets;

	sockets->dispatching_input = true;
	connection_io_work(s, fd, revents, userdata);
	sockets->dispatching_input = false;
	/* @conn may be freed from here on. */
	bus_flush_now(sockets->bus);
	return 0;
}

/* Its socket's io source, reading (edge-triggered: connection_io_work()). */
static int connection_watch(struct connection *conn)
{
	const uint32_t events = EPOLLIN | EPOLLRDHUP | EPOLLET;
	int r;

	r = sd_event_add_io(conn->peer->bus->event, &conn->io, socket_get_fd(conn->socket),
			    events, connection_io, conn);
	if (r >= 0)
		conn->io_events = events;
	return r;
}

static int connection_auth_timeout(sd_event_source *s, uint64_t usec, void *userdata)
{
	struct connection *conn = userdata;
	struct peer *peer = conn->peer;
	uint64_t now;

	/* Before Hello nothing names the connection: dbus-daemon's line does not either. */
	sd_event_now(peer->bus->event, CLOCK_MONOTONIC, &now);
	log_limit_printf(&peer->bus->log_limits, peer_refusal_log(peer), LOG_WARNING,
			 "Connection has not authenticated soon enough, closing it "
			 "(auth_timeout=%lldms, elapsed: %.0fms)",
			 (long long)peer->bus->limits.auth_timeout,
			 (double)(now - conn->auth_since) / 1000.0);
	peer_close(peer, NULL);
	return 0;
}

/* Hello: auth_timeout no longer applies, as in dbus-daemon. */
static void connection_registered(struct peer_transport *transport)
{
	struct connection *conn = container_of(transport, struct connection, transport);

	conn->auth_timer = sd_event_source_disable_unref(conn->auth_timer);
}

/* Close @conn at auth_timeout from now unless its peer says Hello. 0 or -errno. */
static int connection_arm_auth_timer(struct connection *conn)
{
	struct bus *bus = conn->peer->bus;
	uint64_t now;

	if (bus->limits.auth_timeout <= 0)
		return 0;
	sd_event_now(bus->event, CLOCK_MONOTONIC, &now);
	conn->auth_since = now;
	return sd_event_add_time(bus->event, &conn->auth_timer, CLOCK_MONOTONIC,
				 now + (uint64_t)bus->limits.auth_timeout * 1000,
				 BUS_TIMER_ACCURACY_USEC, connection_auth_timeout, conn);
}

/* The peer closes: no more I/O, and the fds it sent ahead are closed. */
static void connection_close(struct peer_transport *transport)
{
	struct connection *conn = container_of(transport, struct connection, transport);

	conn->closed = true;
	conn->io = sd_event_source_disable_unref(conn->io);
	conn->auth_timer = sd_event_source_disable_unref(conn->auth_timer);
	conn->pending_fd_timer = sd_event_source_disable_unref(conn->pending_fd_timer);
	close_and_free_fds(steal_ptr(conn->spare_fds), conn->n_spare_fds);
	conn->n_spare_fds = 0;
	list_unlink(&conn->flush_link);
}

static void connection_free(struct peer_transport *transport)
{
	struct connection *conn = container_of(transport, struct connection, transport);

	connection_close(transport);
	/* The crash journal's store may hold it: its client must see the end now. */
	if (conn->peer)
		journal_fd_closing(conn->peer->bus->journal, socket_get_fd(conn->socket));
	/* Releases queued deliveries, which uncharge the peer. */
	conn->socket = socket_free(conn->socket);
	connection_free_sasl(conn);
	free(conn);
}

static void connection_output_stats(struct peer_transport *transport,
				    struct peer_output_stats *st)
{
	struct connection *conn = container_of(transport, struct connection, transport);

	st->bytes += conn->n_queued_bytes;
	st->fds += conn->n_queued_fds;
	st->msgs += conn->n_queued_msgs;
	st->peak_bytes = MAX(st->peak_bytes, conn->peak_queued_bytes);
	st->peak_fds = MAX(st->peak_fds, conn->peak_queued_fds);
}

static const struct peer_transport_ops connection_ops = {
	.queue = connection_queue,
	.close = connection_close,
	.free = connection_free,
	.registered = connection_registered,
	.output_stats = connection_output_stats,
};

/*
 * The kernel refused some optional credentials of a new connection: it goes
 * on without them (socket_creds_query()). Said for the 1st, 10th, 100th, ...
 * such connection only: a kernel that always refuses must not flood the log.
 */
static void connection_log_degraded(const struct socket_creds *creds)
{
	static unsigned long long n, next = 1;

	if (++n < next)
		return;
	next *= 10;
	log_warn("connection %llu whose credentials the kernel refused in part (pid %d uid %u): "
		 "without its%s%s%s (%s)", n, (int)creds->pid, (unsigned int)creds->uid,
		 creds->failed & SOCKET_CREDS_NO_LABEL ? " security label (SO_PEERSEC)" : "",
		 creds->failed & SOCKET_CREDS_NO_GROUPS ? " groups (SO_PEERGROUPS)" : "",
		 creds->failed & SOCKET_CREDS_NO_PIDFD ? " pidfd (SO_PEERPIDFD)" : "",
		 strerror(creds->failed_errno));
}

static int connection_new(struct peer **peerp, struct socket_transport *sockets, int fd,
			  const uint8_t *nonce, unsigned int mechs)
{
	struct bus *bus = sockets->bus;
	struct socket_creds creds;
	struct connection *conn;
	struct peer *peer;
	unsigned int flags = 0;
	int r;

	conn = calloc(1, sizeof(*conn));
	if (!conn) {
		close(fd);
		return -ENOMEM;
	}
	conn->transport.ops = &connection_ops;
	conn->sockets = sockets;
	list_init(&conn->flush_link);

	r = socket_new(&conn->socket, fd);
	if (r < 0) {
		free(conn);
		return r;
	}
	/* The peer keeps them: a native client's pidfd may change (peer_set_pid()). */
	socket_take_creds(conn->socket, &creds);
	if (creds.failed)
		connection_log_degraded(&creds);
	if (nonce) {
		memcpy(conn->nonce, nonce, ADDRESS_NONCE_LEN);
		conn->nonce_left = ADDRESS_NONCE_LEN;
	}

	/* fds travel on unix sockets only; TCP has no credentials for EXTERNAL. */
	flags |= creds.have_creds ? SASL_SERVER_UNIX_FD : SASL_SERVER_NO_CREDENTIALS;
	if (bus->allow_anonymous)
		flags |= SASL_SERVER_ALLOW_ANONYMOUS;
	conn->sasl = malloc(sizeof(*conn->sasl));
	r = conn->sasl ? sasl_server_init(conn->sasl, creds.uid, bus->guid, flags) : -ENOMEM;
	if (r < 0) {
		free(conn->sasl);
		conn->sasl = NULL;
		socket_creds_deinit(&creds);
		connection_free(&conn->transport);
		return r;
	}
	sasl_server_set_mechanisms(conn->sasl, mechs ? mechs & bus->auth_mechs : bus->auth_mechs);
	sasl_server_set_cookie_source(conn->sasl, connection_cookie_source, conn);

	/* From here on the peer owns the connection. */
	r = peer_new(&peer, bus, &conn->transport, &creds);
	if (r < 0)
		return r;
	conn->peer = peer;

	r = connection_watch(conn);
	if (r < 0)
		goto fail;

	r = connection_arm_auth_timer(conn);
	if (r < 0)
		goto fail;
	*peerp = peer;
	return 0;

fail:
	/* Freed with the dead after this dispatch. */
	peer_close(peer, NULL);
	return r;
}

/* ---------------------------------------------------------------- re-exec */

struct connection *connection_of(struct peer *peer)
{
	struct peer_transport *t = peer->transport;

	return t && t->ops == &connection_ops ? container_of(t, struct connection, transport) :
						NULL;
}

int connection_get_fd(const struct connection *conn)
{
	return socket_get_fd(conn->socket);
}

int connection_serialize(struct connection *conn, struct state_writer *w)
{
	struct socket_snapshot snap;
	int r;

	/*
	 * A crash snapshot: what is in flight on the socket is not (the
	 * socket's mark tells whether anything was: journal.h).
	 */
	if (w->crash) {
		state_put_section(w, STATE_TAG_CONNECTION, CONNECTION_STATE_VERSION);
		state_put_fds(w, NULL, 0);
		state_put_u32(w, 1);	/* framing */
		state_put_bytes(w, NULL, 0);
		state_put_u64(w, 0);
		state_put_u64(w, 0);
		return 0;
	}
	r = socket_snapshot(conn->socket, &snap);
	if (r < 0)
		return r;
	state_put_section(w, STATE_TAG_CONNECTION, CONNECTION_STATE_VERSION);
	state_put_fds(w, conn->spare_fds, conn->n_spare_fds);
	state_put_u32(w, (snap.framing ? 1 : 0) | (snap.eof ? 2 : 0) | (snap.violation ? 4 : 0));
	state_put_bytes(w, snap.in, snap.n_in);
	state_put_u64(w, snap.n_in_fds);
	for (size_t i = 0; i < snap.n_in_fds; i++) {
		state_put_u64(w, snap.in_fds[i].start);
		state_put_u64(w, snap.in_fds[i].end);
		state_put_fds(w, snap.in_fds[i].fds, snap.in_fds[i].n_fds);
	}
	state_put_u64(w, snap.n_out);
	for (size_t i = 0; i < snap.n_out; i++) {
		state_put_bytes(w, snap.out[i].data, snap.out[i].n_data);
		state_put_fds(w, snap.out[i].fds, snap.out[i].n_fds);
	}
	socket_snapshot_deinit(&snap);
	return 0;
}

bool connection_state_read(struct state_reader *r, struct connection_state *st)
{
	struct socket_snapshot *snap = &st->snap;
	uint32_t version;
	size_t n;

	st->spare = NULL;
	st->n_spare = 0;
	*snap = (struct socket_snapshot){};
	if (!state_section(r, STATE_TAG_CONNECTION, CONNECTION_STATE_VERSION, &version))
		return false;
	st->spare = state_get_fds(r, &st->n_spare);
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
			return false;
		}
		snap->n_in_fds = n;
		for (size_t i = 0; i < n && !r->error; i++) {
			snap->in_fds[i].start = (size_t)state_get_u64(r);
			snap->in_fds[i].end = (size_t)state_get_u64(r);
			snap->in_fds[i].fds = state_get_fds(r, &snap->in_fds[i].n_fds);
		}
	}
	n = state_get_count(r, 16);
	if (n) {
		snap->out = calloc(n, sizeof(*snap->out));
		if (!snap->out) {
			r->error = true;
			return false;
		}
		snap->n_out = n;
		for (size_t i = 0; i < n && !r->error; i++) {
			snap->out[i].data = (uint8_t *)state_get_bytes(r, &snap->out[i].n_data);
			snap->out[i].fds = state_get_fds(r, &snap->out[i].n_fds);
		}
	}
	return !r->error;
}

void connection_state_deinit(struct connection_state *st)
{
	/* The bytes are the reader's; the fd arrays are ours (the fds are not). */
	free(st->spare);
	for (size_t j = 0; j < st->snap.n_in_fds; j++)
		free(st->snap.in_fds[j].fds);
	free(st->snap.in_fds);
	for (size_t j = 0; j < st->snap.n_out; j++)
		free(st->snap.out[j].fds);
	free(st->snap.out);
	*st = (struct connection_state){ .fd = -1 };
}

int connection_new_restored(struct peer **peerp, struct bus *bus, int fd,
			    struct socket_creds *creds, const struct socket_snapshot *snap,
			    const int *spare_fds, size_t n_spare)
{
	struct connection *conn;
	struct peer *peer;
	int r;

	conn = calloc(1, sizeof(*conn));
	if (!conn) {
		close(fd);
		socket_creds_deinit(creds);
		return -ENOMEM;
	}
	conn->transport.ops = &connection_ops;
	conn->sockets = socket_transport_of(bus);
	list_init(&conn->flush_link);
	if (n_spare) {
		conn->spare_fds = malloc(n_spare * sizeof(*conn->spare_fds));
		if (!conn->spare_fds) {
			free(conn);
			close(fd);
			socket_creds_deinit(creds);
			return -ENOMEM;
		}
		memcpy(conn->spare_fds, spare_fds, n_spare * sizeof(*spare_fds));
		conn->n_spare_fds = n_spare;
	}
	r = socket_new_restored(&conn->socket, fd, snap);
	if (r < 0) {
		close_and_free_fds(steal_ptr(conn->spare_fds), conn->n_spare_fds);
		free(conn);
		socket_creds_deinit(creds);
		return r;
	}
	/* The credentials are the ones it connected with (@creds), not read again. */
	r = peer_new(&peer, bus, &conn->transport, creds);
	if (r < 0)
		return r;
	conn->peer = peer;
	r = connection_watch(conn);
	if (r < 0) {
		peer_close(peer, NULL);
		return r;
	}
	*peerp = peer;
	return 0;
}

/* After the peer's state is restored: arm what the socket needs. */
void connection_restored(struct connection *conn)
{
	/* Carried over before its Hello: auth_timeout counts afresh. */
	if (!conn->peer->registered && connection_arm_auth_timer(conn) < 0)
		peer_close(conn->peer, "cannot arm auth_timeout");
	connection_watch_pending_fds(conn);
	/* Output that was queued goes out on the next flush. */
	if (socket_wants_write(conn->socket))
		connection_schedule_flush(conn);
	connection_update_events(conn);
}

/* ------------------------------------------------------ the socket transport */

static bool socket_transport_flush(struct bus_transport *transport)
{
	struct socket_transport *sockets = container_of(transport, struct socket_transport,
							transport);
	bool any = false;

	while (!list_is_empty(&sockets->flush_list)) {
		struct connection *c = list_first_entry(&sockets->flush_list, struct connection,
							flush_link);

		list_unlink(&c->flush_link);
		connection_flush(c);
		any = true;
	}
	return any;
}

static void socket_transport_stats(const struct bus_transport *transport,
				   struct bus_transport_stats *st)
{
	const struct socket_transport *sockets = container_of(transport, struct socket_transport,
							      transport);

	st->queue_used_bytes += sockets->deliveries.n_used * sizeof(struct delivery);
	st->queue_cached_bytes += sockets->deliveries.n_free * sizeof(struct delivery);
}

static const struct bus_transport_ops socket_transport_ops = {
	.flush = socket_transport_flush,
	.stats = socket_transport_stats,
};

int socket_transport_new(struct socket_transport **socketsp, struct bus *bus)
{
	struct socket_transport *sockets = calloc(1, sizeof(*sockets));

	if (!sockets)
		return -ENOMEM;
	sockets->transport.ops = &socket_transport_ops;
	sockets->bus = bus;
	list_init(&sockets->flush_list);
	bus_add_transport(bus, &sockets->transport);
	*socketsp = sockets;
	return 0;
}

struct socket_transport *socket_transport_free(struct socket_transport *sockets)
{
	if (!sockets)
		return NULL;
	bus_remove_transport(&sockets->transport);
	/* The peers are gone: no entry is in use any more. */
	assert(sockets->deliveries.n_used == 0 && list_is_empty(&sockets->flush_list));
	while (sockets->deliveries.free_list) {
		struct delivery *d = sockets->deliveries.free_list;

		sockets->deliveries.free_list = d->next_free;
		free(d);
	}
	free(sockets);
	return NULL;
}

struct socket_transport *socket_transport_of(struct bus *bus)
{
	struct bus_transport *t = bus_find_transport(bus, &socket_transport_ops);

	return t ? container_of(t, struct socket_transport, transport) : NULL;
}

int socket_transport_accept(struct socket_transport *sockets, int fd, const uint8_t *nonce,
			    unsigned int mechs, struct peer **peerp)
{
	struct bus *bus = sockets->bus;
	struct peer *peer = NULL;
	int r;

	if (peerp)
		*peerp = NULL;
	if (bus->n_incomplete >= (unsigned int)bus->limits.max_incomplete_connections) {
		log_warn("too many incomplete connections (max_incomplete_connections=%lld)",
			 (long long)bus->limits.max_incomplete_connections);
		close(fd);
		return 0;
	}
	r = connection_new(&peer, sockets, fd, nonce, mechs);
	if (r >= 0 && peerp)
		*peerp = peer;
	return r;
}
