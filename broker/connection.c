/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Socket connections: authentication, framing, the output queue and
 * teardown. Routing of what a connection sends is in router.c, the bus
 * driver in driver.c. See connection.h.
 */

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <time.h>
#include "broker/bus.h"
#include "broker/connection.h"
#include "broker/log.h"
#include "broker/monitor.h"
#include "broker/native.h"
#include "broker/router.h"
#include "conf/policy.h"
#include "dbus-compat/message.h"
#include "dbus-compat/protocol.h"

/*
 * Work done for one connection per wakeup: this many recvmsg() calls. Each
 * call may deliver many small messages; the bound keeps one busy client from
 * starving the others (the level-triggered source fires again).
 */
#define CONNECTION_READ_BUDGET 16

/**
 * struct delivery - one message queued on one socket
 * @entry:	the socket's write-queue entry
 * @msg:	the (shared) message; one reference per delivery
 * @conn:	the destination, whose counters are charged
 * @iov:	header and body of @msg
 *
 * Freed deliveries are kept on a per-bus free list, so the steady state
 * allocates nothing per destination.
 */
struct delivery {
	struct socket_entry entry;
	struct message *msg;
	struct connection *conn;
	struct iovec iov[2];
	struct delivery *next_free;
};

#define DELIVERY_CACHE_MAX 4096

static struct delivery *delivery_free_list;
static size_t delivery_n_free;

static struct delivery *delivery_alloc(void)
{
	struct delivery *d = delivery_free_list;

	if (d) {
		delivery_free_list = d->next_free;
		delivery_n_free--;
		return d;
	}
	return malloc(sizeof(*d));
}

static void delivery_recycle(struct delivery *d)
{
	if (delivery_n_free >= DELIVERY_CACHE_MAX) {
		free(d);
		return;
	}
	d->next_free = delivery_free_list;
	delivery_free_list = d;
	delivery_n_free++;
}

static void delivery_release(struct socket_entry *entry)
{
	struct delivery *d = container_of(entry, struct delivery, entry);
	struct connection *conn = d->conn;
	size_t size = message_get_size(d->msg);

	conn->n_queued_bytes -= size;
	conn->n_queued_fds -= d->msg->n_fds;
	connection_uncharge(conn, USER_SLOT_BYTES, size);
	if (d->msg->n_fds)
		connection_uncharge(conn, USER_SLOT_FDS, d->msg->n_fds);
	message_unref(d->msg);
	delivery_recycle(d);
}

int connection_charge(struct connection *conn, enum user_slot slot, uint64_t amount)
{
	if (!conn->user || !amount)
		return 0;
	return user_charge(&conn->charges[slot], conn->user, slot, amount);
}

void connection_uncharge(struct connection *conn, enum user_slot slot, uint64_t amount)
{
	struct user_charge *c = &conn->charges[slot];

	if (!c->user || !amount)
		return;
	if (amount > c->amount)
		amount = c->amount;
	user_counters_uncharge(&c->user->counters, slot, amount);
	c->amount -= amount;
}

int connection_charge_message(struct connection *conn, uint64_t bytes, uint64_t n_fds)
{
	int r;

	r = connection_charge(conn, USER_SLOT_BYTES, bytes);
	if (r)
		return r;
	r = connection_charge(conn, USER_SLOT_FDS, n_fds);
	if (r)
		connection_uncharge(conn, USER_SLOT_BYTES, bytes);
	return r;
}

void connection_overflow(struct connection *conn)
{
	if (conn->overflow || conn->closed)
		return;
	conn->overflow = true;
	list_append(&conn->bus->overflow_list, &conn->overflow_link);
	bus_schedule_flush(conn->bus, NULL);
}

uint32_t bus_next_serial(struct bus *bus)
{
	static uint32_t serial;

	(void)bus;
	if (++serial == 0)
		serial = 1;
	return serial;
}

static void connection_update_events(struct connection *conn)
{
	uint32_t events;

	if (conn->closed || !conn->io)
		return;
	events = conn->eof ? 0 : EPOLLIN;
	/*
	 * A pending flush tries the write first; EPOLLOUT is only needed when
	 * the kernel did not take everything (saves two epoll_ctl() per message).
	 */
	if (socket_wants_write(conn->socket) && !list_node_is_linked(&conn->flush_link))
		events |= EPOLLOUT;
	if (events != conn->io_events) {
		if (sd_event_source_set_io_events(conn->io, events) >= 0)
			conn->io_events = events;
	}
}

int connection_queue(struct connection *conn, struct message *msg)
{
	struct delivery *d;
	size_t size = message_get_size(msg);
	int r;

	if (conn->closed || conn->overflow)
		return CONNECTION_E_DEAD;
	if (conn->native)
		return native_conn_queue(conn->native, msg);
	if (conn->n_queued_bytes + size > conn->bus->max_queued_bytes ||
	    conn->n_queued_fds + msg->n_fds > conn->bus->max_queued_fds) {
		/*
		 * The quota is for what the receiver does not take: one read
		 * batch may produce more than it for a reader, so give the
		 * kernel what fits before judging.
		 */
		r = socket_dispatch_write(conn->socket);
		if (r) {
			/* Closed after this dispatch, never in the middle of routing. */
			connection_overflow(conn);
			return CONNECTION_E_DEAD;
		}
		if (conn->n_queued_bytes + size > conn->bus->max_queued_bytes ||
		    conn->n_queued_fds + msg->n_fds > conn->bus->max_queued_fds)
			return CONNECTION_E_QUOTA;
	}
	if (connection_charge_message(conn, size, msg->n_fds))
		return CONNECTION_E_QUOTA;

	d = delivery_alloc();
	if (!d) {
		connection_uncharge(conn, USER_SLOT_BYTES, size);
		connection_uncharge(conn, USER_SLOT_FDS, msg->n_fds);
		return -ENOMEM;
	}
	d->msg = message_ref(msg);
	d->conn = conn;
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
		connection_uncharge(conn, USER_SLOT_BYTES, size);
		connection_uncharge(conn, USER_SLOT_FDS, msg->n_fds);
		message_unref(d->msg);
		delivery_recycle(d);
		return r < 0 ? r : CONNECTION_E_QUOTA;
	}
	if (conn->n_queued_bytes > conn->peak_queued_bytes)
		conn->peak_queued_bytes = conn->n_queued_bytes;
	conn->n_outgoing++;
	if (!conn->bus->dispatching_input)
		bus_schedule_flush(conn->bus, conn);
	else if (!list_node_is_linked(&conn->flush_link))
		list_append(&conn->bus->flush_list, &conn->flush_link);
	return 0;
}

void connection_flush(struct connection *conn)
{
	int r;

	if (conn->closed)
		return;
	r = socket_dispatch_write(conn->socket);
	if (r) {
		connection_close(conn, r > 0 ? NULL : "write failed");
		return;
	}
	connection_update_events(conn);
}

int connection_setup_policy(struct connection *conn)
{
	const struct socket_creds *cr = socket_get_creds(conn->socket);
	struct bus *bus = conn->bus;
	_cleanup_free_ uint32_t *gids = NULL;
	const struct bus_policy_rule *rule = NULL;
	size_t n = 0;
	int r;

	conn->policy = bus_client_policy_free(conn->policy);
	if (!bus->policy)
		return 0;

	/* The primary group first, then the supplementary ones. */
	gids = calloc(cr->n_groups + 1, sizeof(*gids));
	if (!gids)
		return -ENOMEM;
	gids[n++] = (uint32_t)cr->gid;
	for (size_t i = 0; i < cr->n_groups; i++)
		if (cr->groups[i] != cr->gid)
			gids[n++] = (uint32_t)cr->groups[i];

	/* Anonymous clients have no identity to check; the config allowed them. */
	if (!conn->anonymous &&
	    !bus_policy_check_connect(bus->policy, (uint32_t)conn->uid, gids, n,
				      (uint32_t)bus->uid, &rule))
		return 1;
	/* at_console: decided now (connect, reload), as dbus-daemon; see conf/console.h */
	r = bus_client_policy_new(&conn->policy, bus->policy, (uint32_t)conn->uid, gids, n,
				  bus_policy_uid_at_console(bus->policy, (uint32_t)conn->uid) > 0);
	return r < 0 ? r : 0;
}

/* Send pending SASL replies (small; copied into the queue). */
static int connection_flush_sasl(struct connection *conn)
{
	const char *out;
	size_t n;
	int r;

	out = sasl_server_peek_output(&conn->sasl, &n);
	if (!n)
		return 0;
	r = socket_queue_copy(conn->socket, out, n);
	if (r < 0)
		return r;
	sasl_server_consume_output(&conn->sasl, n);
	bus_schedule_flush(conn->bus, conn);
	return 0;
}

/* Feed raw input to the SASL server. Returns 0, 1 (closed) or -errno. */
static int connection_authenticate(struct connection *conn)
{
	const void *data;
	size_t n, consumed = 0;
	int r;

	data = socket_peek_raw(conn->socket, &n);
	if (!n)
		return 0;
	r = sasl_server_feed(&conn->sasl, data, n, &consumed);
	socket_consume_raw(conn->socket, consumed);
	if (r < 0)
		return r;
	if (connection_flush_sasl(conn) < 0)
		return -ENOMEM;
	if (r == SASL_SERVER_FAILED) {
		const char *why = sasl_server_get_failure(&conn->sasl);

		/* Let the last ERROR/REJECTED reach the client, then close. */
		connection_flush(conn);
		connection_close(conn, why ? why : "authentication failed");
		return 1;
	}
	if (r == SASL_SERVER_DONE) {
		conn->authenticated = true;
		conn->unix_fds = sasl_server_unix_fd_agreed(&conn->sasl);
		conn->anonymous = sasl_server_is_anonymous(&conn->sasl);
		/* Its buffers are not needed any more (memory per connection). */
		sasl_server_deinit(&conn->sasl);
		socket_start_framing(conn->socket);
		conn->auth_timer = sd_event_source_disable_unref(conn->auth_timer);
		bus_incomplete_done(conn->bus);
		r = connection_setup_policy(conn);
		if (r < 0)
			return r;
		if (r) {
			connection_close(conn, "the bus policy does not allow this user to connect");
			return 1;
		}
	}
	return 0;
}

static void close_fds(int *fds, size_t n)
{
	for (size_t i = 0; i < n; i++)
		safe_close(fds[i]);
	free(fds);
}

int connection_dispatch_incoming(struct connection *conn, struct message *msg, const int *fds,
				 size_t n_fds)
{
	int r;

	/* The message owns the fds from here on, in all cases. */
	r = message_parse(msg, fds, n_fds);
	if (r > 0) {
		log_info("disconnecting %s: invalid message: %s",
			 conn->registered ? connection_name(conn) : "(inactive)",
			 dc_invalid_to_string(r));
		connection_close(conn, NULL);
	} else if (r == 0) {
		conn->n_incoming++;
		conn->bus->n_messages++;
		r = router_dispatch(conn, msg);
	}
	message_unref(msg);
	return r;
}

/* Take and dispatch every complete message. Returns 0, 1 (closed) or -errno. */
static int connection_read_frames(struct connection *conn)
{
	struct bus *bus = conn->bus;
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
				connection_close(conn, "message exceeds max_message_size");
				return 1;
			}
			return 0;
		}
		if (r > 0) {
			connection_close(conn, "invalid message framing");
			return 1;
		}
		if (r < 0)
			return r;
		if (size > (size_t)bus->limits.max_message_size) {
			connection_close(conn, "message exceeds max_message_size");
			return 1;
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
			connection_close(conn, "invalid message framing");
			return 1;
		}
		if (n_fds && !conn->unix_fds) {
			close_fds(fds, n_fds);
			message_unref(msg);
			connection_close(conn, "sent file descriptors without negotiating them");
			return 1;
		}
		if (n_fds > (size_t)bus->limits.max_message_unix_fds) {
			close_fds(fds, n_fds);
			message_unref(msg);
			connection_close(conn, "message exceeds max_message_unix_fds");
			return 1;
		}

		r = connection_dispatch_incoming(conn, msg, fds, n_fds);
		free(fds);
		if (r)
			return r;
		if (conn->closed)
			return 1;
	}
}

static int connection_pending_fd_timeout(sd_event_source *s, uint64_t usec, void *userdata)
{
	struct connection *conn = userdata;

	connection_close(conn, "held file descriptors in an incomplete message for longer "
			       "than pending_fd_timeout");
	return 0;
}

/*
 * pending_fd_timeout, as dbus-daemon has it: the clock starts when fds are
 * first held for an incomplete message and stops when no fds are held any
 * more; a client that keeps fds in a half-sent message past it is
 * disconnected (the fds count against the user's quota meanwhile).
 */
static void connection_watch_pending_fds(struct connection *conn)
{
	struct bus *bus = conn->bus;
	uint64_t now;

	if (!socket_holds_fds(conn->socket)) {
		conn->pending_fd_timer = sd_event_source_disable_unref(conn->pending_fd_timer);
		return;
	}
	if (conn->pending_fd_timer || bus->limits.pending_fd_timeout <= 0)
		return;
	sd_event_now(bus->event, CLOCK_MONOTONIC, &now);
	if (sd_event_add_time(bus->event, &conn->pending_fd_timer, CLOCK_MONOTONIC,
			      now + (uint64_t)bus->limits.pending_fd_timeout * 1000, 0,
			      connection_pending_fd_timeout, conn) < 0)
		/* Not fatal: the fds stay bounded by the per-user quota. */
		log_warn("cannot arm pending_fd_timeout for a connection");
}

static int connection_io_work(sd_event_source *s, int fd, uint32_t revents, void *userdata)
{
	struct connection *conn = userdata;
	int i, r;

	if (revents & EPOLLOUT) {
		connection_flush(conn);
		if (conn->closed)
			return 0;
	}

	if (revents & (EPOLLIN | EPOLLHUP | EPOLLERR)) {
		for (i = 0; i < CONNECTION_READ_BUDGET && !conn->eof; i++) {
			size_t before = socket_get_buffered_bytes(conn->socket);

			r = socket_dispatch_read(conn->socket);
			if (r == SOCKET_E_EOF) {
				conn->eof = true;
			} else if (r > 0) {
				connection_close(conn, "protocol error");
				return 0;
			} else if (r < 0) {
				connection_close(conn, "read failed");
				return 0;
			}

			if (!conn->authenticated) {
				r = connection_authenticate(conn);
				if (r)
					goto out;
			}
			if (conn->authenticated) {
				r = connection_read_frames(conn);
				if (r)
					goto out;
			}
			/* Nothing new arrived: the socket is drained for now. */
			if (socket_get_buffered_bytes(conn->socket) == before && r == 0 &&
			    !conn->eof)
				break;
			/* A short read: the next one would most likely be EAGAIN. */
			if (r == 0 && !conn->eof && socket_is_drained(conn->socket))
				break;
		}
		if (conn->eof) {
			connection_close(conn, NULL);
			return 0;
		}
		if (conn->authenticated)
			connection_watch_pending_fds(conn);
	}
	connection_update_events(conn);
	return 0;

out:
	if (r < 0)
		connection_close(conn, strerror(-r));
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
	struct bus *bus = conn->bus;

	bus->dispatching_input = true;
	connection_io_work(s, fd, revents, userdata);
	bus->dispatching_input = false;
	/* @conn may be freed from here on. */
	bus_flush_now(bus);
	return 0;
}

static int connection_auth_timeout(sd_event_source *s, uint64_t usec, void *userdata)
{
	struct connection *conn = userdata;

	connection_close(conn, "authentication timed out");
	return 0;
}

int connection_new(struct connection **connp, struct bus *bus, int fd)
{
	struct connection *conn;
	const struct socket_creds *creds;
	unsigned int flags = SASL_SERVER_UNIX_FD;
	uint64_t now;
	int r;

	conn = calloc(1, sizeof(*conn));
	if (!conn) {
		close(fd);
		return -ENOMEM;
	}
	conn->bus = bus;
	list_init(&conn->bus_link);
	list_init(&conn->flush_link);
	list_init(&conn->monitor_link);
	list_init(&conn->dead_link);
	list_init(&conn->overflow_link);

	r = socket_new(&conn->socket, fd);
	if (r < 0) {
		free(conn);
		return r;
	}
	creds = socket_get_creds(conn->socket);
	conn->uid = creds->uid;
	conn->pid = creds->pid;

	if (bus->allow_anonymous)
		flags |= SASL_SERVER_ALLOW_ANONYMOUS;
	r = sasl_server_init(&conn->sasl, conn->uid, bus->guid, flags);
	if (r < 0)
		goto fail;

	/* The real id is assigned at Hello (driver_hello()). */
	name_owner_init(&conn->owner, 0);
	match_owner_init(&conn->matches, &conn->owner);
	reply_owner_init(&conn->replies, bus->replies);

	r = user_registry_ref_user(bus->users, &conn->user, conn->uid);
	if (r < 0)
		goto fail_names;

	r = sd_event_add_io(bus->event, &conn->io, socket_get_fd(conn->socket), EPOLLIN,
			    connection_io, conn);
	if (r < 0)
		goto fail_names;
	conn->io_events = EPOLLIN;

	if (bus->limits.auth_timeout > 0) {
		sd_event_now(bus->event, CLOCK_MONOTONIC, &now);
		r = sd_event_add_time(bus->event, &conn->auth_timer, CLOCK_MONOTONIC,
				      now + (uint64_t)bus->limits.auth_timeout * 1000, 0,
				      connection_auth_timeout, conn);
		if (r < 0)
			goto fail_names;
	}

	list_append(&bus->connections, &conn->bus_link);
	bus->n_incomplete++;
	*connp = conn;
	return 0;

fail_names:
	conn->io = sd_event_source_disable_unref(conn->io);
	conn->auth_timer = sd_event_source_disable_unref(conn->auth_timer);
	for (int i = 0; i < _USER_SLOT_N; i++)
		user_charge_release(&conn->charges[i]);
	if (conn->user)
		conn->user = user_unref(conn->user);
	reply_owner_deinit(&conn->replies);
	match_owner_deinit(&conn->matches);
	name_owner_deinit(&conn->owner);
fail:
	sasl_server_deinit(&conn->sasl);
	socket_free(conn->socket);
	free(conn);
	return r;
}

void connection_close(struct connection *conn, const char *reason)
{
	struct bus *bus = conn->bus;

	if (conn->closed)
		return;
	conn->closed = true;

	if (reason)
		log_info("closing connection %s (uid %u pid %d): %s",
			 conn->registered ? connection_name(conn) : "(inactive)",
			 (unsigned)conn->uid, (int)conn->pid, reason);

	conn->io = sd_event_source_disable_unref(conn->io);
	conn->auth_timer = sd_event_source_disable_unref(conn->auth_timer);
	conn->pending_fd_timer = sd_event_source_disable_unref(conn->pending_fd_timer);
	list_unlink(&conn->flush_link);
	list_unlink(&conn->overflow_link);
	if (!conn->authenticated)
		bus_incomplete_done(bus);

	/* The client sees its connection node destroyed. */
	conn->native = native_conn_free(conn->native);
	/* D-Bus state: the router emits NameOwnerChanged, NoReply, ... */
	router_connection_gone(conn);

	list_unlink(&conn->bus_link);
	list_append(&bus->dead_list, &conn->dead_link);
	bus_schedule_flush(bus, NULL);
}

struct connection *connection_free(struct connection *conn)
{
	if (!conn)
		return NULL;
	list_unlink(&conn->dead_link);
	list_unlink(&conn->bus_link);
	list_unlink(&conn->flush_link);
	list_unlink(&conn->monitor_link);
	list_unlink(&conn->overflow_link);
	conn->io = sd_event_source_disable_unref(conn->io);
	conn->auth_timer = sd_event_source_disable_unref(conn->auth_timer);
	conn->pending_fd_timer = sd_event_source_disable_unref(conn->pending_fd_timer);
	/* Releases queued deliveries, which uncharge conn->user. */
	conn->socket = socket_free(conn->socket);
	sasl_server_deinit(&conn->sasl);
	conn->policy = bus_client_policy_free(conn->policy);
	reply_owner_deinit(&conn->replies);
	match_owner_deinit(&conn->matches);
	name_owner_deinit(&conn->owner);
	for (int i = 0; i < _USER_SLOT_N; i++)
		user_charge_release(&conn->charges[i]);
	if (conn->user)
		conn->user = user_unref(conn->user);
	free(conn);
	return NULL;
}
