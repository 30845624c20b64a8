/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * libbus1-client: the native D-Bus client (see bus1-client.h and
 * docs/native-protocol.md). Messages are dbus-compat's struct message;
 * the transport after the bootstrap is one bus1 peer. This file: the
 * connection; the other parts are listed in b1c-internal.h.
 */

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include "libbus1.h"
#include "bus1-client.h"
#include "b1c-internal.h"
#include "dbus-compat/address.h"
#include "dbus-compat/message.h"
#include "dbus-compat/native-protocol.h"
#include "dbus-compat/protocol.h"
#include "dbus-compat/sasl-client.h"
#include "util/io.h"
#include "util/macro.h"
#include "util/clock.h"

/* ---------------------------------------------------------------- helpers */

/*
 * With B1C_DEBUG set, say on stderr which argument check refused a call
 * (assert_return()), as a dropped message is said; otherwise a library
 * prints nothing.
 */
static void debug_log(void *userdata, int priority, const char *text)
{
	fprintf(stderr, "bus1-client: %s\n", text);
}

__attribute__((constructor)) static void debug_init(void)
{
	if (getenv("B1C_DEBUG"))
		error_set_assert_log(debug_log, NULL);
}

static int handler_vec_add(struct handler_vec *hv, struct b1c_handler *h)
{
	/* every handler is called: one without a function would be called at NULL */
	assert(h->fn && hv->n <= hv->cap);
	if (hv->n == hv->cap) {
		size_t cap = hv->cap ? hv->cap * 2 : 8;
		struct b1c_handler *v = realloc(hv->v, cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		hv->v = v;
		hv->cap = cap;
	}
	hv->v[hv->n++] = *h;
	return 0;
}

static void handler_free(struct b1c_handler *h)
{
	b1c_message_unref(h->call);
	free(h->path);
	free(h->sender);
	free(h->interface);
	free(h->member);
}

static void handler_vec_free(struct handler_vec *hv)
{
	for (size_t i = 0; i < hv->n; i++)
		handler_free(&hv->v[i]);
	free(hv->v);
}

/* --------------------------------------------------------------- transport */

static int bus_send_msg(struct b1c_bus *bus, const struct message *msg)
{
	struct iovec iov[2];

	if (bus->dead)
		return -ECONNRESET;
	message_get_iovec(msg, iov);
	return b1_peer_send(bus->peer, 0, &bus->bus_handle, 1, NULL, iov,
			    iov[1].iov_len ? 2 : 1, NULL, 0, msg->fds, msg->n_fds);
}

/* ------------------------------------------------------- send and receive */

/*
 * A service's reply, direct or through the broker, is held back while
 * dispatch() runs, so that b1c_bus_wait() sends it and waits for the next
 * call in one CALL: a round trip then costs the service one syscall.
 * Anything else that sends or receives sends it first, so no message
 * overtakes it; a user who polls the fd alone (b1c_bus_get_fd()) gets it
 * sent at once.
 */
static void held_reply_hold(struct b1c_bus *bus, struct message *msg, uint64_t handle,
			    bool direct)
{
	/* one reply at a time: bus_send() sent the one before, or it would be lost */
	assert(!bus->held_reply);
	bus->held_reply = message_ref(msg);
	bus->held_handle = handle;
	bus->held_direct = direct;
}

/* A held direct reply's caller that is gone: nobody to tell. */
static int held_reply_result(struct b1c_bus *bus, bool direct, int r)
{
	if (direct && (r == -EHOSTUNREACH || r == -ENXIO))
		return 0;
	if (r == -EHOSTUNREACH) {
		/* the broker's node: the bus is gone */
		bus->dead = true;
		return -ECONNRESET;
	}
	return r;
}

static int held_reply_send(struct b1c_bus *bus)
{
	struct message *msg = bus->held_reply;
	bool direct = bus->held_direct;
	int r;

	if (!msg)
		return 0;
	bus->held_reply = NULL;
	r = direct ? client_direct_send(bus, msg, bus->held_handle, false) : bus_send_msg(bus, msg);
	message_unref(msg);
	return held_reply_result(bus, direct, r);
}

/* b1c_bus_wait() with a held reply: 1 if a CALL sent it and waited, else as held_reply_send(). */
static int held_reply_call(struct b1c_bus *bus, uint64_t timeout_usec)
{
	struct message *msg = bus->held_reply;
	bool direct = bus->held_direct;
	int r;

	if (!msg || bus->q_n || bus->n_synth || bus->have_called || bus->dead)
		return held_reply_send(bus);
	bus->held_reply = NULL;
	r = direct ? client_direct_call(bus, msg, bus->held_handle, false, timeout_usec) :
		     client_send_wait(bus, msg, bus->held_handle, false, timeout_usec);
	message_unref(msg);
	return held_reply_result(bus, direct, r);
}

/* Whether a reply sent now may wait for the next b1c_bus_wait(). */
static bool held_reply_may(struct b1c_bus *bus, const struct message *msg)
{
	return bus->dispatching && !bus->fd_exported && !bus->no_call &&
	       (msg->type == DC_MESSAGE_METHOD_RETURN || msg->type == DC_MESSAGE_ERROR);
}

/*
 * b1c_bus_send(); a call that expects a reply, direct or through the broker,
 * goes as one CALL when @call_usec is not 0 (b1c_bus_call(), which waits
 * that long for it).
 */
static int bus_send(struct b1c_bus *bus, struct b1c_message *m, uint32_t *serial,
		    uint64_t call_usec)
{
	int r;

	if (m->building) {
		if (++bus->serial == 0)
			bus->serial = 1;
		r = client_message_seal(m, bus->serial);
		if (r < 0)
			return r;
	}
	r = held_reply_send(bus);
	if (r < 0)
		return r;
	bus->last_direct = false;
	if (m->direct_reply && m->msg->type != DC_MESSAGE_METHOD_CALL) {
		/* A reply to a direct call goes back the same way. */
		if (held_reply_may(bus, m->msg)) {
			held_reply_hold(bus, m->msg, m->direct_reply, true);
			goto done;
		}
		r = client_direct_send(bus, m->msg, m->direct_reply, false);
		if (r == 0)
			goto done;
		/* the caller is gone: nobody to tell */
		return r == -EHOSTUNREACH || r == -ENXIO ? 0 : r;
	}
	if (bus->direct && m->msg->type == DC_MESSAGE_METHOD_CALL &&
	    client_is_unique_or_wellknown(m->msg->destination)) {
		uint64_t h = 0;

		r = client_direct_resolve(bus, m->msg->destination, &h);
		if (r < 0)
			return r;
		if (r > 0) {
			bool expects = message_expects_reply(m->msg);

			if (expects && call_usec)
				r = client_direct_call(bus, m->msg, h, true, call_usec);
			else
				r = client_direct_send(bus, m->msg, h, expects);
			if (r >= 0) {
				r = 0;
				if (expects && bus->n_dcalls < B1C_MAX_QUEUED) {
					struct direct_call *v = realloc(bus->dcalls,
						(bus->n_dcalls + 1) * sizeof(*v));

					if (!v)
						return -ENOMEM;
					bus->dcalls = v;
					v[bus->n_dcalls++] = (struct direct_call){
						.serial = m->msg->serial, .handle = h };
				}
				bus->last_direct = true;
				goto done;
			}
			if (r != -EHOSTUNREACH && r != -ENXIO)
				return r;
			/* The owner went away: forget the handle, ask the broker. */
			client_dname_forget(bus, NULL, h);
			b1_peer_handle_release(bus->peer, h);
		}
	}
	if (held_reply_may(bus, m->msg)) {
		held_reply_hold(bus, m->msg, bus->bus_handle, false);
		goto done;
	}
	/* a blocking call through the broker: send and wait in one CALL too */
	if (call_usec && m->msg->type == DC_MESSAGE_METHOD_CALL &&
	    message_expects_reply(m->msg) && !bus->dead)
		r = client_send_wait(bus, m->msg, bus->bus_handle, false, call_usec);
	else
		r = bus_send_msg(bus, m->msg);
	if (r == -EHOSTUNREACH) {
		bus->dead = true;
		r = -ECONNRESET;
	}
	if (r < 0)
		return r;
done:
	if (serial)
		*serial = m->msg->serial;
	return 0;
}

int b1c_bus_send(struct b1c_bus *bus, struct b1c_message *m, uint32_t *serial)
{
	assert_return(bus, -EINVAL);
	assert_return(m, -EINVAL);
	return bus_send(bus, m, serial, 0);
}

static int queue_push(struct b1c_bus *bus, struct message *msg);

/* Receive one message from the peer: 1 (*msgp set), 0 (none), negative errno. */
static int bus_recv(struct b1c_bus *bus, struct message **msgp)
{
	struct b1_msg bm;
	int r;

	for (;;) {
		struct message *msg = NULL;
		uint64_t keep = 0;
		bool direct;

		if (bus->dead)
			return -ECONNRESET;
		if (bus->n_synth) {
			*msgp = bus->synth[0];
			memmove(bus->synth, bus->synth + 1, --bus->n_synth * sizeof(*bus->synth));
			return 1;
		}
		if (bus->have_called) {
			/* what a direct CALL received: the next message of the queue */
			bm = bus->called;
			bus->have_called = false;
		} else {
			/*
			 * Nothing was queued behind the last message: say so
			 * without a RECV that would say EAGAIN. The caller
			 * polls, and the fd is readable if anything came since.
			 */
			if (bus->recv_drained) {
				bus->recv_drained = false;
				return 0;
			}
			r = held_reply_send(bus);
			if (r < 0)
				return r;
			r = b1_peer_recv(bus->peer, 0, &bm);
			if (r == -EAGAIN)
				return 0;
			if (r < 0)
				return r;
		}
		bus->recv_drained = !b1_peer_more_queued(bus->peer);
		/* Nobody else holding a node of ours needs no action. */
		if (bm.type == BUS1_MSG_NODE_RELEASE)
			continue;
		if (bm.type == BUS1_MSG_NODE_DESTROY) {
			if (bm.destination == bus->bus_handle) {
				bus->dead = true;
				return -ECONNRESET;
			}
			/* A direct callee went away. */
			r = client_direct_lost(bus, bm.destination);
			b1_peer_handle_release(bus->peer, bm.destination);
			if (r < 0)
				return r;
			continue;
		}
		direct = bus->direct_node && bm.destination == bus->direct_node;
		/* Takes the fds in all cases. */
		r = message_new_from_data(&msg, bm.data, bm.n_bytes, bm.fds, bm.n_fds);
		if (r == 0 && bm.n_handles > DC_BUS1_HANDLE_INDEX &&
		    bm.handles[DC_BUS1_HANDLE_INDEX] != BUS1_HANDLE_INVALID) {
			/*
			 * The only handles we keep: the callee's direct node in the
			 * broker's GetDirectHandle reply, the caller's in a direct call.
			 */
			if (direct ? msg->type == DC_MESSAGE_METHOD_CALL :
			    msg->type == DC_MESSAGE_METHOD_RETURN && msg->sender &&
			    !strcmp(msg->sender, DC_SERVICE_DBUS))
				keep = bm.handles[DC_BUS1_HANDLE_INDEX];
		}
		for (size_t i = 0; i < bm.n_handles; i++)
			if (bm.handles[i] != BUS1_HANDLE_INVALID && bm.handles[i] != keep)
				b1_peer_handle_release(bus->peer, bm.handles[i]);
		/* copied: the next RECV releases the slice (one ioctl per message) */
		b1_peer_msg_release_later(bus->peer, &bm);
		if (r < 0)
			return r;
		if (r > 0) {
			/* Not a valid D-Bus message: dropped (say so when debugging). */
			if (getenv("B1C_DEBUG"))
				fprintf(stderr, "bus1-client: dropped an invalid message "
					"(%zu bytes, error %d)\n", (size_t)bm.n_bytes, r);
			continue;
		}
		if (!direct) {
			if (keep) {
				if (bus->stash_handle && bus->stash_handle != keep)
					b1_peer_handle_release(bus->peer, bus->stash_handle);
				bus->stash_serial = msg->reply_serial;
				bus->stash_handle = keep;
			}
			if (client_broker_notice(bus, msg)) {
				message_unref(msg);
				continue;
			}
			*msgp = msg;
			return 1;
		}

		/*
		 * Straight from another native client: no broker checked it. The
		 * kernel-stamped uid must be one the broker allowed, and a call must
		 * be for a name we own; replies only to our direct calls.
		 */
		if (msg->type == DC_MESSAGE_METHOD_CALL) {
			if (!bus->n_uids) {
				/* The broker revoked every handle (a policy reload). */
				client_direct_refuse(bus, msg, keep, DC_BUS1_ERROR_DIRECT_REVOKED,
					      "Direct handles were revoked; ask the bus again");
				message_unref(msg);
				continue;
			}
			if (!client_uid_allowed(bus, bm.uid)) {
				client_direct_refuse(bus, msg, keep, DC_ERROR_ACCESS_DENIED,
					      "The bus policy does not allow this caller");
				message_unref(msg);
				continue;
			}
			if (!client_owns_name(bus, msg->destination)) {
				client_direct_refuse(bus, msg, keep, DC_ERROR_SERVICE_UNKNOWN,
					      "The name is not owned here any more");
				message_unref(msg);
				continue;
			}
			r = client_dmsg_add(bus, msg, keep);
			if (r < 0) {
				message_unref(msg);
				return r;
			}
			*msgp = msg;
			return 1;
		}
		if ((msg->type == DC_MESSAGE_METHOD_RETURN || msg->type == DC_MESSAGE_ERROR) &&
		    client_dcall_take(bus, msg->reply_serial)) {
			*msgp = msg;
			return 1;
		}
		message_unref(msg);
	}
}

static int queue_push(struct b1c_bus *bus, struct message *msg)
{
	/* the ring's indices: anything else writes outside bus->queue */
	assert(bus->q_n <= bus->q_cap && (!bus->q_cap || bus->q_head < bus->q_cap));
	if (bus->q_n >= B1C_MAX_QUEUED)
		return -ENOBUFS;
	if (bus->q_n == bus->q_cap) {
		size_t cap = bus->q_cap ? bus->q_cap * 2 : 16;
		struct message **q = malloc(cap * sizeof(*q));

		if (!q)
			return -ENOMEM;
		for (size_t i = 0; i < bus->q_n; i++)
			q[i] = bus->queue[(bus->q_head + i) % bus->q_cap];
		free(bus->queue);
		bus->queue = q;
		bus->q_cap = cap;
		bus->q_head = 0;
	}
	bus->queue[(bus->q_head + bus->q_n) % bus->q_cap] = msg;
	bus->q_n++;
	return 0;
}

static struct message *queue_pop(struct b1c_bus *bus)
{
	struct message *msg;

	if (!bus->q_n)
		return NULL;
	assert(bus->q_n <= bus->q_cap && bus->q_head < bus->q_cap);
	msg = bus->queue[bus->q_head];
	bus->q_head = (bus->q_head + 1) % bus->q_cap;
	bus->q_n--;
	return msg;
}

int b1c_bus_wait(struct b1c_bus *bus, uint64_t timeout_usec)
{
	struct pollfd p[2];
	int timeout, r;

	assert_return(bus, -EINVAL);
	p[0] = (struct pollfd){ .fd = b1_peer_get_fd(bus->peer), .events = POLLIN };
	p[1] = (struct pollfd){ .fd = bus->sock, .events = POLLIN };
	if (bus->dead)
		return -ECONNRESET;
	r = held_reply_call(bus, timeout_usec);
	if (r != 0)
		return r < 0 ? r : 0;
	if (bus->q_n || bus->n_synth)
		return 0;
	timeout = timeout_usec == UINT64_MAX ? -1 :
		  (int)((timeout_usec + 999) / 1000 > 0x7fffffff ? 0x7fffffff :
			(timeout_usec + 999) / 1000);
	r = poll(p, 2, timeout);
	if (r < 0)
		return errno == EINTR ? 0 : -errno;
	if (p[1].revents) {
		/* Nothing may arrive on the socket after the bootstrap: EOF = gone. */
		bus->dead = true;
		return -ECONNRESET;
	}
	return 0;
}

/* Wait for the reply to @serial; other messages are queued. */
int client_wait_reply(struct b1c_bus *bus, uint32_t serial, uint64_t timeout_usec,
		      struct message **replyp)
{
	uint64_t deadline = now_usec() + (timeout_usec ? timeout_usec : B1C_DEFAULT_TIMEOUT);
	struct message *msg;
	int r;

	for (;;) {
		uint64_t now;

		r = bus_recv(bus, &msg);
		if (r < 0)
			return r;
		if (r > 0) {
			if ((msg->type == DC_MESSAGE_METHOD_RETURN ||
			     msg->type == DC_MESSAGE_ERROR) && msg->reply_serial == serial) {
				*replyp = msg;
				return 0;
			}
			r = queue_push(bus, msg);
			if (r < 0) {
				message_unref(msg);
				return r;
			}
			continue;
		}
		now = now_usec();
		if (now >= deadline)
			return -ETIMEDOUT;
		{
			struct pollfd p[2] = {
				{ .fd = b1_peer_get_fd(bus->peer), .events = POLLIN },
				{ .fd = bus->sock, .events = POLLIN },
			};

			r = poll(p, 2, (int)((deadline - now + 999) / 1000));
			if (r < 0 && errno != EINTR)
				return -errno;
			if (r > 0 && p[1].revents) {
				bus->dead = true;
				return -ECONNRESET;
			}
		}
	}
}

/*
 * Send @m and wait for its reply until @timeout_usec (0: the default) from
 * now. A direct call is sent as one CALL that waits for the next message of
 * our queue, which is usually the reply: then that one syscall was the whole
 * call. Whatever it received goes through client_wait_reply() like any
 * other message.
 */
static int bus_call(struct b1c_bus *bus, struct b1c_message *m, uint64_t timeout_usec,
		    struct message **msgp)
{
	uint64_t t = timeout_usec ? timeout_usec : B1C_DEFAULT_TIMEOUT;
	uint64_t deadline = now_usec() + t, now;
	uint32_t serial;
	int r;

	r = bus_send(bus, m, &serial, t);
	if (r < 0)
		return r;
	now = now_usec();
	/* the CALL may have used up the time: one more look, then ETIMEDOUT */
	return client_wait_reply(bus, serial, now < deadline ? deadline - now : 1, msgp);
}

/* A method call that waits for its reply: what b1c_bus_call() and b1c_bus_call_async() send. */
static bool message_is_call(const struct b1c_message *m)
{
	if (!m)
		return false;
	if (m->msg)
		return m->msg->type == DC_MESSAGE_METHOD_CALL && message_expects_reply(m->msg);
	return m->b.type == DC_MESSAGE_METHOD_CALL && !(m->b.flags & DC_FLAG_NO_REPLY_EXPECTED);
}

int b1c_bus_call(struct b1c_bus *bus, struct b1c_message *m, uint64_t timeout_usec,
		 struct b1c_message **reply)
{
	struct message *msg = NULL;
	int r;

	assert_return(bus, -EINVAL);
	assert_return(message_is_call(m), -EINVAL);
	assert_return(reply, -EINVAL);
	r = bus_call(bus, m, timeout_usec, &msg);
	if (r < 0)
		return r;
	if (bus->last_direct && client_direct_retry(bus, m->msg, msg)) {
		/* Ask the broker again, once. */
		message_unref(msg);
		r = bus_call(bus, m, timeout_usec, &msg);
		if (r < 0)
			return r;
	}
	*reply = client_message_wrap(msg);
	if (!*reply) {
		message_unref(msg);
		return -ENOMEM;
	}
	return msg->type == DC_MESSAGE_ERROR ? B1C_CALL_ERROR : 0;
}

int b1c_bus_call_async(struct b1c_bus *bus, struct b1c_message *m, b1c_handler_t handler,
		       void *userdata)
{
	struct b1c_handler h = { .fn = handler, .userdata = userdata };
	int r;

	assert_return(bus, -EINVAL);
	assert_return(message_is_call(m), -EINVAL);
	assert_return(handler, -EINVAL);
	r = b1c_bus_send(bus, m, &h.serial);
	if (r < 0)
		return r;
	/* As b1c_bus_call(): a direct call refused by the callee's library is resent once. */
	if (bus->last_direct)
		h.call = b1c_message_ref(m);
	r = handler_vec_add(&bus->pending, &h);
	if (r < 0)
		b1c_message_unref(h.call);
	return r;
}

/* --------------------------------------------------------------- dispatch */

static bool handler_matches(const struct b1c_handler *h, const struct message *msg)
{
	if (h->type && h->type != msg->type)
		return false;
	if (h->sender && (!msg->sender || strcmp(h->sender, msg->sender)))
		return false;
	if (h->path && (!msg->path || strcmp(h->path, msg->path)))
		return false;
	if (h->interface && (!msg->interface || strcmp(h->interface, msg->interface)))
		return false;
	if (h->member && (!msg->member || strcmp(h->member, msg->member)))
		return false;
	return true;
}

static int send_error(struct b1c_bus *bus, struct b1c_message *call, const char *name,
		      const char *text)
{
	struct b1c_message *e = NULL;
	int r;

	r = b1c_message_new_error(&e, call, name, text);
	if (r < 0)
		return r;
	r = b1c_bus_send(bus, e, NULL);
	b1c_message_unref(e);
	return r;
}

static int dispatch(struct b1c_bus *bus, struct message *msg)
{
	uint64_t reply = client_dmsg_take(bus, msg);
	struct b1c_message *m = client_message_wrap(msg);
	int r = 0;

	if (!m) {
		message_unref(msg);
		return -ENOMEM;
	}
	m->direct_reply = reply;
	if (msg->type == DC_MESSAGE_ERROR) {
		for (size_t i = 0; i < bus->pending.n; i++) {
			struct b1c_handler *h = &bus->pending.v[i];
			struct b1c_message *call = h->call;

			if (h->serial != msg->reply_serial || !call)
				continue;
			if (!client_direct_retry(bus, call->msg, msg))
				break;
			/* Resent once, whichever way it goes now; the handler gets that reply. */
			h->call = NULL;
			r = b1c_bus_send(bus, call, &h->serial);
			b1c_message_unref(call);
			b1c_message_unref(m);
			return r < 0 ? r : 1;
		}
	}
	for (size_t i = 0; i < bus->filters.n; i++) {
		b1c_message_rewind(m);
		r = bus->filters.v[i].fn(bus, m, bus->filters.v[i].userdata);
		if (r != 0) {
			b1c_message_unref(m);
			return r < 0 ? r : 1;
		}
	}
	b1c_message_rewind(m);
	switch (msg->type) {
	case DC_MESSAGE_METHOD_RETURN:
	case DC_MESSAGE_ERROR:
		for (size_t i = 0; i < bus->pending.n; i++) {
			struct b1c_handler h = bus->pending.v[i];

			if (h.serial != msg->reply_serial)
				continue;
			/* Remove first: the handler may issue new calls. */
			bus->pending.v[i] = bus->pending.v[--bus->pending.n];
			r = h.fn(bus, m, h.userdata);
			handler_free(&h);
			break;
		}
		break;
	case DC_MESSAGE_METHOD_CALL:
		if (msg->interface && !strcmp(msg->interface, DC_INTERFACE_PEER) &&
		    !strcmp(msg->member, "Ping")) {
			r = b1c_bus_reply(bus, m, NULL);
			break;
		}
		for (size_t i = 0; i < bus->objects.n && r == 0; i++)
			if (handler_matches(&bus->objects.v[i], msg))
				r = bus->objects.v[i].fn(bus, m, bus->objects.v[i].userdata);
		if (r == 0 && message_expects_reply(msg)) {
			char text[512];

			snprintf(text, sizeof(text),
				 "No such method \"%s\" on interface \"%s\" at \"%s\"",
				 msg->member, msg->interface ? msg->interface : "(none)",
				 msg->path);
			r = send_error(bus, m, DC_ERROR_UNKNOWN_METHOD, text);
		}
		break;
	case DC_MESSAGE_SIGNAL:
		for (size_t i = 0; i < bus->matches.n && r >= 0; i++) {
			if (!handler_matches(&bus->matches.v[i], msg))
				continue;
			b1c_message_rewind(m);
			r = bus->matches.v[i].fn(bus, m, bus->matches.v[i].userdata);
		}
		break;
	}
	b1c_message_unref(m);
	return r < 0 ? r : 1;
}

int b1c_bus_process(struct b1c_bus *bus)
{
	struct message *msg;
	bool was;
	int r;

	assert_return(bus, -EINVAL);
	msg = queue_pop(bus);
	if (!msg) {
		r = bus_recv(bus, &msg);
		if (r <= 0)
			return r;
	}
	/* a handler's reply to a direct call may be held for b1c_bus_wait() */
	was = bus->dispatching;
	bus->dispatching = true;
	r = dispatch(bus, msg);
	bus->dispatching = was;
	return r;
}

int b1c_bus_add_filter(struct b1c_bus *bus, b1c_handler_t handler, void *userdata)
{
	struct b1c_handler h = { .fn = handler, .userdata = userdata };

	assert_return(bus, -EINVAL);
	assert_return(handler, -EINVAL);
	return handler_vec_add(&bus->filters, &h);
}

int b1c_bus_add_object(struct b1c_bus *bus, const char *path, b1c_handler_t handler,
		       void *userdata)
{
	struct b1c_handler h = { .fn = handler, .userdata = userdata };
	int r;

	assert_return(bus, -EINVAL);
	assert_return(!path || arg_valid(path, validate_object_path), -EINVAL);
	assert_return(handler, -EINVAL);
	if (path) {
		h.path = strdup(path);
		if (!h.path)
			return -ENOMEM;
	}
	r = handler_vec_add(&bus->objects, &h);
	if (r < 0)
		handler_free(&h);
	return r;
}

/* Parse the keys of @rule that are filtered locally (the bus filters them all). */
static int parse_rule(const char *rule, struct b1c_handler *h)
{
	const char *p = rule;

	while (*p) {
		const char *eq = strchr(p, '='), *v, *end;
		size_t klen;
		char **dst = NULL;

		if (!eq || eq[1] != '\'')
			return -EINVAL;
		klen = (size_t)(eq - p);
		v = eq + 2;
		end = strchr(v, '\'');
		if (!end)
			return -EINVAL;
		if (klen == 4 && !strncmp(p, "type", 4)) {
			size_t n = (size_t)(end - v);

			h->type = n == 6 && !strncmp(v, "signal", 6) ? DC_MESSAGE_SIGNAL :
				  n == 11 && !strncmp(v, "method_call", 11) ?
				  DC_MESSAGE_METHOD_CALL : 0;
		} else if (klen == 6 && !strncmp(p, "sender", 6) &&
			   (v[0] == ':' || !strncmp(v, DC_SERVICE_DBUS "'",
						    sizeof(DC_SERVICE_DBUS)))) {
			dst = &h->sender;
		} else if (klen == 4 && !strncmp(p, "path", 4)) {
			dst = &h->path;
		} else if (klen == 9 && !strncmp(p, "interface", 9)) {
			dst = &h->interface;
		} else if (klen == 6 && !strncmp(p, "member", 6)) {
			dst = &h->member;
		}
		if (dst) {
			free(*dst);
			*dst = strndup(v, (size_t)(end - v));
			if (!*dst)
				return -ENOMEM;
		}
		p = end + 1;
		if (*p == ',')
			p++;
	}
	return 0;
}

static int call_driver(struct b1c_bus *bus, const char *member, const char *types,
		       struct b1c_message **replyp, ...)
{
	struct b1c_message *m = NULL, *reply = NULL;
	va_list ap;
	int r;

	r = b1c_message_new_method_call(&m, DC_SERVICE_DBUS, DC_PATH_DBUS, DC_INTERFACE_DBUS,
					member, types);
	if (r < 0)
		return r;
	va_start(ap, replyp);
	r = dc_writer_writev(&m->b.body, types, ap);
	va_end(ap);
	if (r == 0)
		r = b1c_bus_call(bus, m, 0, &reply);
	b1c_message_unref(m);
	if (r == B1C_CALL_ERROR) {
		/* AccessDenied (the bus' policy or an LSM's): -EACCES, else -EIO. */
		const char *name = b1c_message_get_error_name(reply);

		r = name && !strcmp(name, DC_ERROR_ACCESS_DENIED) ? -EACCES : -EIO;
		b1c_message_unref(reply);
		return r;
	}
	if (r < 0)
		return r;
	if (replyp)
		*replyp = reply;
	else
		b1c_message_unref(reply);
	return 0;
}

int b1c_bus_add_match(struct b1c_bus *bus, const char *rule, b1c_handler_t handler,
		      void *userdata)
{
	struct b1c_handler h = { .fn = handler, .userdata = userdata };
	int r;

	assert_return(bus, -EINVAL);
	assert_return(rule, -EINVAL);
	r = parse_rule(rule, &h);
	if (r == 0)
		r = call_driver(bus, "AddMatch", "s", NULL, rule);
	if (r == 0 && handler)
		r = handler_vec_add(&bus->matches, &h);
	else
		handler_free(&h);
	return r;
}

int b1c_bus_request_name(struct b1c_bus *bus, const char *name, uint32_t flags)
{
	struct b1c_message *reply = NULL;
	uint32_t code = 0;
	int r;

	assert_return(bus, -EINVAL);
	assert_return(arg_valid(name, validate_well_known_name), -EINVAL);
	r = call_driver(bus, "RequestName", "su", &reply, name, flags);
	if (r < 0)
		return r;
	r = b1c_message_read(reply, "u", &code);
	b1c_message_unref(reply);
	return r < 0 ? r : (int)code;
}

int b1c_bus_emit_signal(struct b1c_bus *bus, const char *path, const char *interface,
			const char *member, const char *types, ...)
{
	struct b1c_message *m = NULL;
	va_list ap;
	int r;

	/* the others are b1c_message_new_signal()'s to check */
	assert_return(bus, -EINVAL);
	assert_return(!types || arg_basic_types(types), -EINVAL);
	r = b1c_message_new_signal(&m, path, interface, member, types);
	if (r < 0)
		return r;
	va_start(ap, types);
	r = types ? dc_writer_writev(&m->b.body, types, ap) : 0;
	va_end(ap);
	if (r == 0)
		r = b1c_bus_send(bus, m, NULL);
	b1c_message_unref(m);
	return r;
}

int b1c_bus_reply(struct b1c_bus *bus, struct b1c_message *call, const char *types, ...)
{
	struct b1c_message *m = NULL;
	va_list ap;
	int r;

	assert_return(bus, -EINVAL);
	assert_return(arg_call(call), -EINVAL);
	assert_return(!types || arg_basic_types(types), -EINVAL);
	if (!b1c_message_expects_reply(call))
		return 0;
	r = b1c_message_new_method_return(&m, call, types);
	if (r < 0)
		return r;
	va_start(ap, types);
	r = types ? dc_writer_writev(&m->b.body, types, ap) : 0;
	va_end(ap);
	if (r == 0)
		r = b1c_bus_send(bus, m, NULL);
	b1c_message_unref(m);
	return r;
}

int b1c_bus_reply_error(struct b1c_bus *bus, struct b1c_message *call, const char *name,
			const char *text)
{
	assert_return(bus, -EINVAL);
	assert_return(arg_call(call), -EINVAL);
	assert_return(arg_valid(name, validate_error_name), -EINVAL);
	assert_return(!text || arg_valid(text, validate_utf8), -EINVAL);
	if (!b1c_message_expects_reply(call))
		return 0;
	return send_error(bus, call, name, text);
}

/* --------------------------------------------------------------- bootstrap */

static int sasl_auth(int fd)
{
	bool fds = false;
	int r = sasl_client_authenticate(fd, getuid(), true, &fds);

	if (r == SASL_CLIENT_E_REJECTED)
		return -ECONNREFUSED;
	if (r < 0)
		return r;
	/* The fd of the bootstrap needs fd passing. */
	return fds ? 0 : -EOPNOTSUPP;
}

static int socket_send_with_fd(int sock, const struct message *msg, int fd)
{
	union {
		struct cmsghdr h;
		char buf[CMSG_SPACE(sizeof(int))];
	} control = {};
	struct iovec iov[2];
	struct msghdr mh = {
		.msg_iov = iov,
		.msg_control = &control,
		.msg_controllen = sizeof(control.buf),
	};
	struct cmsghdr *c;
	size_t total;
	ssize_t k;

	message_get_iovec(msg, iov);
	mh.msg_iovlen = iov[1].iov_len ? 2 : 1;
	total = iov[0].iov_len + iov[1].iov_len;
	c = CMSG_FIRSTHDR(&mh);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(c), &fd, sizeof(int));
	do {
		k = sendmsg(sock, &mh, MSG_NOSIGNAL);
	} while (k < 0 && errno == EINTR);
	if (k < 0)
		return -errno;
	/* The rest, if the kernel took a part only (the fd went with byte 0). */
	if ((size_t)k < total) {
		size_t off = (size_t)k;

		if (off < iov[0].iov_len) {
			int r = io_send_all(sock, (const char *)iov[0].iov_base + off,
					  iov[0].iov_len - off);

			if (r < 0)
				return r;
			off = iov[0].iov_len;
		}
		return io_send_all(sock, (const char *)iov[1].iov_base + (off - iov[0].iov_len),
				 total - off);
	}
	return 0;
}

static int bootstrap(struct b1c_bus *bus)
{
	struct message_builder b;
	struct message *call = NULL, *reply = NULL;
	struct dc_reader reader;
	uint64_t bus_handle = 0, node = 0;
	int r;

	r = sasl_auth(bus->sock);
	if (r < 0)
		return r;

	message_builder_init_method_call(&b, DC_SERVICE_DBUS, DC_PATH_DBUS, DC_INTERFACE_BUS1,
					 DC_BUS1_METHOD_CONNECT, DC_BUS1_CONNECT_SIGNATURE);
	dc_writer_write(&b.body, DC_BUS1_CONNECT_SIGNATURE, 0U);
	r = message_builder_seal(&b, ++bus->serial, &call);
	message_builder_deinit(&b);
	if (r < 0)
		return r;
	/* The fds of a message need UNIX_FDS: re-write the header with it. */
	{
		struct message *with = NULL;
		int fd = b1_peer_get_fd(bus->peer);

		call->unix_fds = 1;
		r = message_stitch_sender(call, NULL, &with);
		call->unix_fds = 0;
		message_unref(call);
		if (r < 0)
			return r;
		r = socket_send_with_fd(bus->sock, with, fd);
		message_unref(with);
		if (r < 0)
			return r;
	}

	r = message_read_blocking(bus->sock, 1024 * 1024, &reply);
	if (r < 0)
		return r;
	if (reply->type == DC_MESSAGE_ERROR) {
		r = reply->error_name && !strcmp(reply->error_name, DC_ERROR_NOT_SUPPORTED) ?
		    -EOPNOTSUPP : -EPROTO;
		message_unref(reply);
		return r;
	}
	r = message_get_body_reader(reply, &reader);
	if (r == 0 && strcmp(reply->signature, DC_BUS1_CONNECT_REPLY) == 0)
		r = dc_reader_read(&reader, DC_BUS1_CONNECT_REPLY, &bus_handle, &node,
				   &bus->direct_node);
	else if (r == 0 && strcmp(reply->signature, DC_BUS1_CONNECT_REPLY_OLD) == 0)
		r = dc_reader_read(&reader, DC_BUS1_CONNECT_REPLY_OLD, &bus_handle, &node);	/* no direct path */
	else
		r = -EPROTO;
	message_unref(reply);
	if (r)
		return r < 0 ? r : -EPROTO;
	bus->bus_handle = bus_handle;
	bus->node = node;
	return 0;
}

static int hello(struct b1c_bus *bus)
{
	struct b1c_message *reply = NULL;
	const char *name = NULL;
	int r;

	r = call_driver(bus, "Hello", "", &reply);
	if (r < 0)
		return r;
	r = b1c_message_read(reply, "s", &name);
	if (r == 0) {
		bus->unique_name = strdup(name);
		if (!bus->unique_name)
			r = -ENOMEM;
	}
	b1c_message_unref(reply);
	return r;
}

int b1c_bus_open(struct b1c_bus **busp, const char *address)
{
	struct address_list list = {};
	struct b1c_bus *bus;
	const char *dev = getenv("BUS1_DEVICE");
	int r;

	assert_return(busp, -EINVAL);
	if (!address)
		address = getenv("DBUS_SESSION_BUS_ADDRESS");
	if (!address)
		return -ENOENT;

	bus = calloc(1, sizeof(*bus));
	if (!bus)
		return -ENOMEM;
	bus->sock = -1;

	r = b1_peer_new_from_path(dev ? dev : "/dev/bus1", &bus->peer);
	if (r < 0)
		goto fail;

	r = address_list_parse(&list, address, NULL);
	if (r) {
		r = r < 0 ? r : -EINVAL;
		goto fail;
	}
	r = -ECONNREFUSED;
	for (size_t i = 0; i < list.n_entries; i++) {
		r = address_connect(&list.entries[i], &bus->sock);
		if (r == 0)
			break;
		r = r < 0 ? r : -EINVAL;
	}
	address_list_deinit(&list);
	if (r < 0)
		goto fail;

	r = bootstrap(bus);
	if (r < 0)
		goto fail;
	r = hello(bus);
	if (r < 0)
		goto fail;
	*busp = bus;
	return 0;

fail:
	b1c_bus_free(bus);
	return r;
}

struct b1c_bus *b1c_bus_free(struct b1c_bus *bus)
{
	struct message *msg;

	if (!bus)
		return NULL;
	(void)held_reply_send(bus);
	while ((msg = queue_pop(bus)))
		message_unref(msg);
	free(bus->queue);
	for (size_t i = 0; i < bus->n_dnames; i++)
		free(bus->dnames[i].name);
	free(bus->dnames);
	free(bus->dmsgs);
	free(bus->dcalls);
	for (size_t i = 0; i < bus->n_synth; i++)
		message_unref(bus->synth[i]);
	free(bus->synth);
	if (bus->have_called)
		b1_msg_close_fds(&bus->called);
	free(bus->uids);
	for (size_t i = 0; i < bus->n_names; i++)
		free(bus->names[i]);
	free(bus->names);
	handler_vec_free(&bus->filters);
	handler_vec_free(&bus->objects);
	handler_vec_free(&bus->matches);
	handler_vec_free(&bus->pending);
	if (bus->sock >= 0)
		close(bus->sock);
	bus->peer = b1_peer_free(bus->peer);
	free(bus->unique_name);
	free(bus);
	return NULL;
}

const char *b1c_bus_get_unique_name(const struct b1c_bus *bus)
{
	assert_return(bus, NULL);
	return bus->unique_name;
}

int b1c_bus_get_fd(struct b1c_bus *bus)
{
	assert_return(bus, -EINVAL);
	/* whoever polls it alone must find every reply sent */
	bus->fd_exported = true;
	(void)held_reply_send(bus);
	return b1_peer_get_fd(bus->peer);
}
