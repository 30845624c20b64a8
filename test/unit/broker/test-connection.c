/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * broker/transport/connection.c, the socket transport, over a socketpair whose one end
 * the bus takes as listener.c hands it an accepted socket
 * (socket_transport_accept()), in an sd-event loop run by the test: SASL
 * EXTERNAL, NEGOTIATE_UNIX_FD, BEGIN pipelined with Hello; a message
 * written in pieces is read whole, and several in one write each; what
 * cannot be framed or parsed closes the connection; output the client does
 * not read waits in the queue, pauses the client's input once its answers
 * pass PEER_ANSWER_BACKLOG, and is all written, in order, once it reads.
 */

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include "broker/transport/connection.h"
#include "dbus-compat/protocol.h"
#include "peer-harness.h"

/* The client's end of a connection and what it read and did not take yet. */
struct wire {
	struct harness *h;
	struct peer *peer;		/* the bus' side (valid while connected) */
	int fd;
	uint8_t *buf;
	size_t n;
	size_t cap;
	uint32_t serial;		/* of the last message written */
	bool eof;
	char name[64];			/* its unique name, after Hello */
};

/* Run the loop until it has nothing more to do. */
static void pump(struct harness *h)
{
	for (int i = 0; i < 100000; i++) {
		int r = CHECK_OK(sd_event_run(h->event, 0));

		if (r == 0)
			return;
	}
	CHECK_FAIL("the loop does not settle");
}

/*
 * A new connection; @small: the bus' socket buffer as small as the kernel
 * allows, so that its output waits in the bus' queue when the client does
 * not read.
 */
static void wire_open(struct wire *w, struct harness *h, bool small)
{
	int sv[2], size = 1;

	*w = (struct wire){ .h = h };
	CHECK_OK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, sv));
	if (small) {
		CHECK_OK(setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &size, sizeof(size)));
		CHECK_OK(setsockopt(sv[1], SOL_SOCKET, SO_RCVBUF, &size, sizeof(size)));
	}
	CHECK_OK(socket_transport_accept(h->sockets, sv[0], NULL, 0, &w->peer));
	CHECK(w->peer);
	w->fd = sv[1];
}

static void wire_close(struct wire *w)
{
	close(w->fd);
	free(w->buf);
}

static void wire_write(struct wire *w, const void *data, size_t size)
{
	CHECK_EQ(write(w->fd, data, size), (ssize_t)size);
}

/* Let the bus work, then read what it wrote. Return the number of bytes read. */
static size_t wire_fill(struct wire *w)
{
	size_t got = 0;

	pump(w->h);
	for (;;) {
		ssize_t l;

		if (w->cap - w->n < 65536) {
			w->cap = w->cap ? 2 * w->cap : 65536 * 2;
			w->buf = realloc(w->buf, w->cap);
			CHECK(w->buf);
		}
		l = recv(w->fd, w->buf + w->n, w->cap - w->n, MSG_DONTWAIT);
		if (l < 0 && errno == EAGAIN)
			return got;
		if (l < 0 && errno == ECONNRESET)
			l = 0;
		CHECK(l >= 0, "recv: %m");
		if (l == 0) {
			w->eof = true;
			return got;
		}
		w->n += (size_t)l;
		got += (size_t)l;
		/* The bus writes more as the client makes room. */
		pump(w->h);
	}
}

static void wire_consume(struct wire *w, size_t n)
{
	memmove(w->buf, w->buf + n, w->n - n);
	w->n -= n;
}

/* One SASL line from the bus, without its "\r\n". */
static char *wire_line(struct wire *w)
{
	static char line[512];

	for (int i = 0; i < 100; i++) {
		uint8_t *end = w->n ? memmem(w->buf, w->n, "\r\n", 2) : NULL;

		if (end) {
			size_t l = (size_t)(end - w->buf);

			CHECK(l < sizeof(line));
			memcpy(line, w->buf, l);
			line[l] = '\0';
			wire_consume(w, l + 2);
			return line;
		}
		CHECK(!w->eof, "the bus closed the connection");
		wire_fill(w);
	}
	CHECK_FAIL("no line from the bus");
}

/* The next message from the bus, if a whole one is there already. */
static struct message *wire_try_msg(struct wire *w)
{
	struct message *m = NULL;
	size_t total;

	if (message_frame_size(w->buf, w->n, &total) || total > w->n)
		return NULL;
	CHECK_EQ(message_new_from_data(&m, w->buf, total, NULL, 0), 0);
	wire_consume(w, total);
	return m;
}

/* The next message from the bus, which must come. */
static struct message *wire_msg(struct wire *w)
{
	for (int i = 0; i < 100; i++) {
		struct message *m = wire_try_msg(w);

		if (m)
			return m;
		CHECK(!w->eof, "the bus closed the connection");
		wire_fill(w);
	}
	CHECK_FAIL("no message from the bus");
}

/* Whether the bus closed the connection (after it did what it had to). */
static bool wire_closed(struct wire *w)
{
	wire_fill(w);
	return w->eof;
}

/* @b sealed with the wire's next serial, in wire bytes. */
static void *wire_bytes(struct wire *w, struct message_builder *b, size_t *sizep)
{
	return msg_wire(b, ++w->serial, sizep);
}

/* The bytes of a call of the driver's @member (no arguments), with the next serial. */
static uint8_t *wire_call_bytes(struct wire *w, const char *iface, const char *member,
				size_t *sizep)
{
	struct message_builder b;

	message_builder_init_method_call(&b, DC_SERVICE_DBUS, DC_PATH_DBUS, iface, member, "");
	return wire_bytes(w, &b, sizep);
}

/* That call, written; its serial. */
static uint32_t wire_call(struct wire *w, const char *iface, const char *member)
{
	size_t size;
	void *data = wire_call_bytes(w, iface, member, &size);

	wire_write(w, data, size);
	free(data);
	return w->serial;
}

/* SASL EXTERNAL with this process' uid, as libdbus does it. */
static void wire_auth(struct wire *w)
{
	char uid[32], cmd[128];
	size_t n;

	snprintf(uid, sizeof(uid), "%u", (unsigned int)getuid());
	n = (size_t)snprintf(cmd, sizeof(cmd), "%cAUTH EXTERNAL ", '\0');
	for (const char *p = uid; *p; p++)
		n += (size_t)snprintf(cmd + n, sizeof(cmd) - n, "%02x", (unsigned char)*p);
	n += (size_t)snprintf(cmd + n, sizeof(cmd) - n, "\r\n");
	wire_write(w, cmd, n);
	snprintf(cmd, sizeof(cmd), "OK %s", w->h->bus.guid);
	CHECK_STR(wire_line(w), cmd);
	wire_write(w, "NEGOTIATE_UNIX_FD\r\n", strlen("NEGOTIATE_UNIX_FD\r\n"));
	CHECK_STR(wire_line(w), "AGREE_UNIX_FD");
	/* Not until BEGIN. */
	CHECK(!w->peer->authenticated);
}

/* BEGIN and Hello in one write, as sd-bus sends them: the reply and NameAcquired. */
static void wire_hello(struct wire *w)
{
	_cleanup_message_ struct message *reply = NULL, *acquired = NULL;
	uint8_t *data, *all;
	size_t n;

	data = wire_call_bytes(w, DC_INTERFACE_DBUS, "Hello", &n);
	all = malloc(n + 7);
	CHECK(all);
	memcpy(all, "BEGIN\r\n", 7);
	memcpy(all + 7, data, n);
	wire_write(w, all, n + 7);
	free(all);
	free(data);

	reply = wire_msg(w);
	CHECK_EQ(reply->type, DC_MESSAGE_METHOD_RETURN);
	CHECK_EQ(reply->reply_serial, w->serial);
	CHECK(msg_str(reply, 0) && !strncmp(msg_str(reply, 0), ":1.", 3));
	snprintf(w->name, sizeof(w->name), "%s", msg_str(reply, 0));
	acquired = wire_msg(w);
	CHECK_STR(acquired->member, "NameAcquired");
	CHECK_STR(msg_str(acquired, 0), w->name);
	CHECK(w->peer->authenticated && w->peer->unix_fds && w->peer->registered);
}

/* A new connection that authenticated and said Hello. */
static void wire_connect(struct wire *w, struct harness *h, bool small)
{
	wire_open(w, h, small);
	wire_auth(w);
	wire_hello(w);
}

/* A loop with the socket transport, as broker.c runs the bus. */
static void loop_init(struct harness *h)
{
	harness_init(h, NULL);
	harness_attach_loop(h);
}

static void test_auth_and_hello(void)
{
	struct harness h;
	struct wire w;
	unsigned int incomplete;

	loop_init(&h);
	incomplete = h.bus.n_incomplete;
	wire_open(&w, &h, false);
	CHECK_EQ(h.bus.n_incomplete, incomplete + 1);
	CHECK(!w.peer->authenticated);
	wire_auth(&w);
	wire_hello(&w);
	CHECK_EQ(h.bus.n_incomplete, incomplete);
	CHECK_STR(peer_name(w.peer), w.name);
	CHECK(connection_of(w.peer));

	/* The client goes: so does its peer. */
	wire_close(&w);
	pump(&h);
	CHECK_EQ(h.bus.n_active, 0);
	harness_deinit(&h);
}

/* A message in pieces is read whole; several in one write are read each. */
static void test_framing(void)
{
	struct harness h;
	struct wire w;
	struct message_builder b;
	_cleanup_message_ struct message *reply = NULL;
	uint8_t *data, two[1024];
	size_t size, cuts[] = { 1, 5, 16, 17, 40 }, done = 0, n_two = 0;
	uint32_t first;

	loop_init(&h);
	wire_connect(&w, &h, false);
	message_builder_init_method_call(&b, DC_SERVICE_DBUS, DC_PATH_DBUS, DC_INTERFACE_DBUS,
					 "GetNameOwner", "s");
	CHECK_EQ(dc_writer_write(&b.body, "s", DC_SERVICE_DBUS), 0);
	data = wire_bytes(&w, &b, &size);
	CHECK(size > cuts[ARRAY_SIZE(cuts) - 1]);
	/* Inside the fixed header, at its end, in the fields, before the body. */
	for (size_t i = 0; i < ARRAY_SIZE(cuts); i++) {
		wire_write(&w, data + done, cuts[i] - done);
		done = cuts[i];
		wire_fill(&w);
		CHECK(!wire_try_msg(&w), "a reply to %zu bytes of %zu", done, size);
	}
	wire_write(&w, data + done, size - done);
	reply = wire_msg(&w);
	CHECK_EQ(reply->type, DC_MESSAGE_METHOD_RETURN);
	CHECK_EQ(reply->reply_serial, w.serial);
	CHECK_STR(msg_str(reply, 0), DC_SERVICE_DBUS);
	free(data);

	/* Two in one write: two replies, in order. */
	first = w.serial + 1;
	for (int i = 0; i < 2; i++) {
		data = wire_call_bytes(&w, DC_INTERFACE_DBUS, "GetId", &size);
		CHECK(n_two + size <= sizeof(two));
		memcpy(two + n_two, data, size);
		n_two += size;
		free(data);
	}
	wire_write(&w, two, n_two);
	for (uint32_t serial = first; serial <= first + 1; serial++) {
		_cleanup_message_ struct message *m = wire_msg(&w);

		CHECK_EQ(m->reply_serial, serial);
		CHECK_STR(msg_str(m, 0), h.bus.guid);
	}
	wire_close(&w);
	harness_deinit(&h);
}

/* A connected client writes a call whose @n bytes at @at are @value: it is closed. */
static void check_closes(struct harness *h, size_t at, size_t n, uint8_t value)
{
	struct wire w;
	uint8_t *data;
	size_t size;

	wire_connect(&w, h, false);
	data = wire_call_bytes(&w, DC_INTERFACE_DBUS, "GetId", &size);
	memset(data + at, value, n);
	wire_write(&w, data, size);
	free(data);
	CHECK(wire_closed(&w));
	CHECK_EQ(h->bus.n_active, 0);
	wire_close(&w);
}

/* What the bus cannot frame, parse or authenticate closes the connection. */
static void test_malformed(void)
{
	struct harness h;
	struct wire w;

	loop_init(&h);
	/* A header whose byte order is neither 'l' nor 'B'. */
	check_closes(&h, 0, 1, 'x');
	/* Framed, but not a valid message: serial 0. */
	check_closes(&h, 8, 4, 0);
	/* BEGIN before the bus said OK. */
	wire_open(&w, &h, false);
	wire_write(&w, "\0BEGIN\r\n", 8);
	CHECK(wire_closed(&w));
	wire_close(&w);
	harness_deinit(&h);
}

/*
 * A client that writes calls and does not read: the answers wait in the
 * bus' queue, its input pauses past PEER_ANSWER_BACKLOG (nothing more is
 * read, so nothing more is answered), and when it reads, everything comes,
 * in order, and the input resumes.
 */
/* What the bus holds of @peer's output (GetConnectionStats' Outgoing*). */
static struct peer_output_stats out_of(struct peer *peer)
{
	struct peer_output_stats st;

	peer_output_stats(peer, &st);
	return st;
}

static void test_unread_output(void)
{
	struct harness h;
	struct wire w;
	uint32_t first, next;
	size_t queued;
	int i;

	loop_init(&h);
	wire_connect(&w, &h, true);

	first = w.serial + 1;
	for (i = 0; i < 1000 && !w.peer->input_paused; i++) {
		for (int k = 0; k < 20; k++)
			wire_call(&w, DC_INTERFACE_INTROSPECTABLE, "Introspect");
		pump(&h);
		CHECK(out_of(w.peer).msgs > 0);
	}
	CHECK(w.peer->input_paused);
	CHECK(out_of(w.peer).bytes > PEER_ANSWER_BACKLOG / 2);

	/* Paused: more calls are not read, so not answered. */
	queued = out_of(w.peer).msgs;
	for (int k = 0; k < 20; k++)
		wire_call(&w, DC_INTERFACE_INTROSPECTABLE, "Introspect");
	pump(&h);
	CHECK_EQ(out_of(w.peer).msgs, queued);
	CHECK(w.peer->input_paused);

	/* The client reads: every answer, in order. */
	next = first;
	for (i = 0; i < 100000 && next <= w.serial; i++) {
		struct message *m;

		while ((m = wire_try_msg(&w))) {
			CHECK_EQ(m->type, DC_MESSAGE_METHOD_RETURN);
			CHECK_EQ(m->reply_serial, next);
			next++;
			message_unref(m);
		}
		if (next <= w.serial)
			CHECK(wire_fill(&w) > 0 || wire_fill(&w) > 0, "stuck at reply %u of %u",
			      next, w.serial);
	}
	CHECK_EQ(next, w.serial + 1);
	CHECK(!w.peer->input_paused);
	CHECK_EQ(out_of(w.peer).msgs, 0);
	CHECK_EQ(out_of(w.peer).bytes, 0);
	wire_close(&w);
	harness_deinit(&h);
}

int main(void)
{
	test_auth_and_hello();
	test_framing();
	test_malformed();
	test_unread_output();
	printf("connection: ok\n");
	return 0;
}
