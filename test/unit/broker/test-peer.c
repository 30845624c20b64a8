/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * broker/objects/peer.c through a real bus and fake clients (peer-harness.h): the
 * charges of a peer against its user's quota, what a queue that cannot take
 * a message means (PEER_E_DEAD, PEER_E_QUOTA: LimitsExceeded to a caller,
 * the disconnection of a receiver that does not read), the fair share of
 * an actor at a user, the answer backlog that pauses a peer's input,
 * peer_loginfo()'s text, closing twice, an invalid message.
 */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "broker/objects/user.h"
#include "dbus-compat/protocol.h"
#include "peer-harness.h"

static const char *argv0;

static uint64_t usage(struct client *c, enum user_slot slot)
{
	return user_usage(c->peer->user, slot);
}

/* peer_charge() and peer_uncharge() against the quota of the peer's user. */
static void test_charges(void)
{
	struct harness h;
	struct client *a, *b;
	uint64_t names, bytes, fds, max_names;

	harness_init(&h, NULL);
	clients_connect(&h, &a, &b, NULL);
	/* One user for both: same uid. */
	CHECK(a->peer->user == b->peer->user);
	names = usage(a, USER_SLOT_NAMES);
	bytes = usage(a, USER_SLOT_BYTES);
	fds = usage(a, USER_SLOT_FDS);
	max_names = a->peer->user->counters.max[USER_SLOT_NAMES];

	CHECK_EQ(peer_charge(a->peer, USER_SLOT_NAMES, 3), 0);
	CHECK_EQ(usage(a, USER_SLOT_NAMES), names + 3);
	peer_uncharge(a->peer, USER_SLOT_NAMES, 2);
	CHECK_EQ(usage(a, USER_SLOT_NAMES), names + 1);
	/* Never more than the peer holds: the rest is another's. */
	CHECK_EQ(peer_charge(b->peer, USER_SLOT_NAMES, 5), 0);
	peer_uncharge(a->peer, USER_SLOT_NAMES, 100);
	CHECK_EQ(usage(a, USER_SLOT_NAMES), names + 5);
	peer_uncharge(b->peer, USER_SLOT_NAMES, 5);
	CHECK_EQ(usage(a, USER_SLOT_NAMES), names);

	/* Over the user's limit: refused, nothing charged; the peers share the limit. */
	CHECK_EQ(peer_charge(a->peer, USER_SLOT_NAMES, max_names - names + 1), USER_E_QUOTA);
	CHECK_EQ(usage(a, USER_SLOT_NAMES), names);
	CHECK_EQ(peer_charge(a->peer, USER_SLOT_NAMES, max_names - names - 1), 0);
	CHECK_EQ(peer_charge(b->peer, USER_SLOT_NAMES, 2), USER_E_QUOTA);
	CHECK_EQ(peer_charge(b->peer, USER_SLOT_NAMES, 1), 0);
	CHECK_EQ(usage(a, USER_SLOT_NAMES), max_names);
	/* Nothing is nothing, even at the limit. */
	CHECK_EQ(peer_charge(b->peer, USER_SLOT_NAMES, 0), 0);

	/* A message's bytes and fds: both or neither. */
	CHECK_EQ(peer_charge_message(a->peer, 1000, 2), 0);
	CHECK_EQ(usage(a, USER_SLOT_BYTES), bytes + 1000);
	CHECK_EQ(usage(a, USER_SLOT_FDS), fds + 2);
	CHECK_EQ(peer_charge_message(a->peer, 1000,
				     a->peer->user->counters.max[USER_SLOT_FDS]), USER_E_QUOTA);
	CHECK_EQ(peer_charge_message(a->peer, USER_BYTES_CAP, 0), USER_E_QUOTA);
	CHECK_EQ(usage(a, USER_SLOT_BYTES), bytes + 1000);
	CHECK_EQ(usage(a, USER_SLOT_FDS), fds + 2);

	/* What a peer holds goes back when it is freed, whatever it was. */
	client_close(a);
	harness_flush(&h);
	CHECK(a->freed);
	CHECK_EQ(usage(b, USER_SLOT_NAMES), names + 1);
	CHECK_EQ(usage(b, USER_SLOT_BYTES), bytes);
	CHECK_EQ(usage(b, USER_SLOT_FDS), fds);
	harness_deinit(&h);
}

/*
 * max_connections_per_user: Hello charges a connection, and the one too many
 * gets LimitsExceeded and stays (it may try again).
 */
static void test_connections_per_user(void)
{
	struct harness h;
	struct client *a, *b, *c;
	struct message *err;
	char text[128];
	uint32_t serial;

	harness_init(&h, "<busconfig>" HARNESS_SESSION_POLICY
			 "<limit name=\"max_connections_per_user\">2</limit></busconfig>");
	clients_connect(&h, &a, &b, NULL);
	c = client_connect(&h, CLIENT_NO_HELLO);
	CHECK_EQ(usage(a, USER_SLOT_CONNECTIONS), 2);
	serial = client_driver(c, "Hello", "");
	err = EXPECT_REPLY(c, serial, DC_MESSAGE_ERROR, DC_ERROR_LIMITS_EXCEEDED);
	snprintf(text, sizeof(text),
		 "The maximum number of active connections for UID %u has been reached",
		 (unsigned int)getuid());
	CHECK_STR(msg_str(err, 0), text);
	CHECK(!c->registered && c->n_close == 0);
	client_clear(c);

	client_close(b);
	harness_flush(&h);
	CHECK_EQ(usage(a, USER_SLOT_CONNECTIONS), 1);
	client_hello(c);
	CHECK(c->registered);
	CHECK_EQ(usage(a, USER_SLOT_CONNECTIONS), 2);
	harness_deinit(&h);
}

/* A message made by the bus, to queue by hand. */
static struct message *driver_signal(struct harness *h, const char *member)
{
	struct message_builder b;
	struct message *m = NULL;

	message_builder_init_signal(&b, DC_PATH_DBUS, DC_INTERFACE_DBUS, member, "");
	b.sender = DC_SERVICE_DBUS;
	CHECK_EQ(message_builder_seal(&b, bus_next_serial(&h->bus), &m), 0);
	message_builder_deinit(&b);
	return m;
}

/* A closed peer takes nothing (PEER_E_DEAD); closing it again changes nothing. */
static void test_closed(void)
{
	struct harness h;
	struct client *a, *w;
	struct message *m;
	unsigned int active;

	harness_init(&h, NULL);
	clients_connect(&h, &w, &a, NULL);
	client_add_match(w, "type='signal',member='NameOwnerChanged'");
	m = driver_signal(&h, "Queued");
	CHECK_EQ(peer_queue(a->peer, m), 0);
	CHECK_EQ(a->n_msgs, 1);

	active = h.bus.n_active;
	peer_close(a->peer, "the test closes it");
	CHECK(a->peer->closed);
	CHECK_EQ(a->n_close, 1);
	CHECK_EQ(h.bus.n_active, active - 1);
	/* Its unique name went, once. */
	CHECK_EQ(client_count(w, DC_MESSAGE_SIGNAL, "NameOwnerChanged"), 1);
	CHECK_EQ(peer_queue(a->peer, m), PEER_E_DEAD);
	CHECK_EQ(a->n_msgs, 1);

	peer_close(a->peer, "again");
	CHECK_EQ(a->n_close, 1);
	CHECK_EQ(h.bus.n_active, active - 1);
	CHECK_EQ(client_count(w, DC_MESSAGE_SIGNAL, "NameOwnerChanged"), 1);
	/* Freed by the flush, not before. */
	CHECK(!a->freed);
	harness_flush(&h);
	CHECK(a->freed);

	/* One that overflowed takes nothing either, and is closed by the flush. */
	a = client_connect(&h, 0);
	peer_overflow(a->peer);
	CHECK_EQ(peer_queue(a->peer, m), PEER_E_DEAD);
	CHECK_EQ(a->n_close, 0);
	harness_flush(&h);
	CHECK_EQ(a->n_close, 1);
	CHECK(a->freed);

	/* Before Hello: closing it counts it out of the incomplete ones, once. */
	active = h.bus.n_incomplete;
	a = client_connect(&h, CLIENT_NO_HELLO);
	CHECK_EQ(h.bus.n_incomplete, active + 1);
	client_close(a);
	client_close(a);
	CHECK_EQ(h.bus.n_incomplete, active);
	message_unref(m);
	harness_deinit(&h);
}

/* The callee's queue is full: LimitsExceeded to the caller, and the callee stays. */
static void test_full_callee(void)
{
	struct harness h;
	struct client *a, *b;
	struct message *err;
	const char *text;
	char lead[256];
	uint32_t serial;

	harness_init(&h, NULL);
	clients_connect(&h, &a, &b, NULL);
	b->refuse = PEER_E_QUOTA;
	serial = client_call(a, 0, b->name, "Full", "");
	CHECK_EQ(b->n_refused, 1);
	err = EXPECT_REPLY(a, serial, DC_MESSAGE_ERROR, DC_ERROR_LIMITS_EXCEEDED);
	text = msg_str(err, 0);
	snprintf(lead, sizeof(lead),
		 "Rejected: destination has a full message queue, 0 matched rules; "
		 "type=\"method_call\", sender=\"%s\" (uid=%u pid=%d comm=\"",
		 a->name, (unsigned int)getuid(), (int)getpid());
	CHECK(!strncmp(text, lead, strlen(lead)), "%s", text);
	CHECK(strstr(text, "interface=\"" HARNESS_IFACE "\" member=\"Full\" error name=\"(unset)\" "
		      "requested_reply=\"0\" destination=\""), "%s", text);
	CHECK(strstr(text, b->name), "%s", text);
	harness_flush(&h);
	CHECK(b->peer && b->n_close == 0);
	/* The call left no reply slot: b's going gives no NoReply. */
	client_clear(a);
	client_close(b);
	harness_flush(&h);
	EXPECT_NOTHING(a);

	/* A callee whose transport cannot take it any more: NoReply at once. */
	b = client_connect(&h, 0);
	b->refuse = PEER_E_DEAD;
	serial = client_call(a, 0, b->name, "Gone", "");
	err = EXPECT_REPLY(a, serial, DC_MESSAGE_ERROR, DC_ERROR_NO_REPLY);
	CHECK_STR(msg_str(err, 0), "Message recipient disconnected from message bus without replying");
	harness_deinit(&h);
}

/* A receiver that cannot take a reply, an error or a signal is disconnected. */
static void test_full_receiver(void)
{
	struct harness h;
	struct client *a, *b, *c;
	uint32_t serial;

	harness_init(&h, NULL);
	clients_connect(&h, &a, &b, &c, NULL);
	client_add_match(b, "type='signal',member='News'");
	client_add_match(c, "type='signal',member='News'");

	/* A broadcast: b goes after the dispatch, the others get it. */
	b->limit = 1;
	client_signal(a, NULL, "News", "s", "one");
	CHECK_EQ(b->n_msgs, 1);
	client_signal(a, NULL, "News", "s", "two");
	CHECK_EQ(b->n_refused, 1);
	CHECK_EQ(b->n_close, 1);
	CHECK(b->freed);
	CHECK_EQ(client_count(c, DC_MESSAGE_SIGNAL, "News"), 2);
	EXPECT_NOTHING(a);
	client_clear(c);

	/* A reply to a caller that does not read: the caller goes, the callee stays. */
	b = client_connect(&h, 0);
	serial = client_call(a, 0, b->name, "Ask", "");
	a->refuse = PEER_E_QUOTA;
	client_reply(b, b->msgs[0], NULL);
	CHECK(a->freed);
	CHECK(!client_find_reply(a, serial));
	CHECK(b->peer && b->n_close == 0);

	/* An answer of the bus to a peer that does not read. */
	c->refuse = PEER_E_QUOTA;
	client_driver(c, "ListNames", "");
	CHECK(c->freed);
	CHECK(b->peer && b->n_close == 0);
	harness_deinit(&h);
}

/*
 * The fair share of an actor at a user that is nearly full: a method call
 * that would take more than its share fails with LimitsExceeded, while a
 * signal of the same size is only held to the user's quota; over the quota,
 * the signal's receiver is disconnected.
 */
static void test_fair_share(void)
{
	struct harness h;
	struct client *first, *a, *b, *filler;
	struct user *u;
	char big[4001];
	uint32_t serial;
	const uint64_t room = 6000;

	harness_init(&h, NULL);
	clients_connect(&h, &first, &a, &b, &filler, NULL);
	CHECK(strcmp(a->name, first->name));
	client_add_match(b, "type='signal',member='Big'");
	b->charge = true;
	u = b->peer->user;
	CHECK_EQ(peer_charge(filler->peer, USER_SLOT_BYTES,
			     u->counters.max[USER_SLOT_BYTES] - user_usage(u, USER_SLOT_BYTES) -
			     room), 0);
	memset(big, 'x', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';

	/* A small call fits its share. */
	serial = client_call(a, 0, b->name, "Small", "");
	EXPECT_MSG(b, DC_MESSAGE_METHOD_CALL, "Small");
	CHECK(b->charges[0].actor);
	client_reply(b, b->msgs[0], NULL);
	EXPECT_REPLY(a, serial, DC_MESSAGE_METHOD_RETURN, NULL);
	client_clear(a);
	client_clear(b);
	CHECK_EQ(user_usage(u, USER_SLOT_BYTES), u->counters.max[USER_SLOT_BYTES] - room);

	/* A call of 4 kB: more than half of what is left. */
	serial = client_call(a, 0, b->name, "Big", "s", big);
	EXPECT_REPLY(a, serial, DC_MESSAGE_ERROR, DC_ERROR_LIMITS_EXCEEDED);
	EXPECT_NOTHING(b);
	CHECK_EQ(b->n_refused, 1);
	client_clear(a);
	/* The first connection too: its unique id 0 is not "nobody" to the accounting. */
	CHECK(!strcmp(first->name, ":1.0"));
	serial = client_call(first, 0, b->name, "Big", "s", big);
	EXPECT_REPLY(first, serial, DC_MESSAGE_ERROR, DC_ERROR_LIMITS_EXCEEDED);
	EXPECT_NOTHING(b);
	CHECK_EQ(b->n_refused, 2);
	client_clear(first);

	/* The same as a signal: it fits the quota. */
	client_signal(a, NULL, "Big", "s", big);
	EXPECT_MSG(b, DC_MESSAGE_SIGNAL, "Big");
	CHECK(user_usage(u, USER_SLOT_BYTES) > u->counters.max[USER_SLOT_BYTES] - room + 4000);
	/* Twice is over the quota: b stops reading, as far as the bus can tell. */
	client_signal(a, NULL, "Big", "s", big);
	CHECK_EQ(b->n_refused, 3);
	CHECK(b->freed);
	EXPECT_NOTHING(a);
	/* What b held went back to the user. */
	CHECK_EQ(user_usage(u, USER_SLOT_BYTES), u->counters.max[USER_SLOT_BYTES] - room);
	harness_deinit(&h);
}

/* Answers a peer does not read pause its input past PEER_ANSWER_BACKLOG, until half. */
static void test_answer_backlog(void)
{
	struct harness h;
	struct client *a, *b;
	uint64_t held = 0;
	size_t n;

	harness_init(&h, NULL);
	clients_connect(&h, &a, &b, NULL);
	a->charge = true;

	/* Another's call is no answer: it does not count. */
	client_call(b, 0, a->name, "NotAnAnswer", "");
	CHECK_EQ(a->n_msgs, 1);
	CHECK(!a->charges[0].answer);
	client_clear(a);

	/* The driver's introspection data, unread, until the bus stops reading. */
	for (n = 0; n < 100000 && !a->peer->input_paused; n++)
		client_call(a, 0, DC_SERVICE_DBUS, "Introspect", "");
	CHECK(a->peer->input_paused);
	CHECK_EQ(a->n_msgs, n);
	for (size_t i = 0; i < a->n_msgs; i++) {
		CHECK(a->charges[i].answer);
		held += a->charges[i].bytes;
	}
	CHECK(held > PEER_ANSWER_BACKLOG);
	CHECK(held - a->charges[a->n_msgs - 1].bytes <= PEER_ANSWER_BACKLOG);

	/* Reading resumes it only once half of the backlog is left. */
	while (a->peer->input_paused) {
		CHECK(a->n_msgs > 0);
		CHECK(held > PEER_ANSWER_BACKLOG / 2);
		held -= a->charges[0].bytes;
		client_consume(a, 1);
	}
	CHECK(held <= PEER_ANSWER_BACKLOG / 2);
	client_clear(a);
	CHECK(!a->peer->input_paused);
	harness_deinit(&h);
}

/* The wire bytes of a call, for damage. */
static uint8_t *call_bytes(size_t *sizep)
{
	struct message_builder b;

	message_builder_init_method_call(&b, DC_SERVICE_DBUS, DC_PATH_DBUS, DC_INTERFACE_DBUS,
					 "ListNames", "");
	return msg_wire(&b, 1, sizep);
}

/* A message that does not parse closes its peer. */
static void test_invalid_message(void)
{
	struct harness h;
	struct client *a, *w;
	uint8_t *data;
	size_t size;

	harness_init(&h, NULL);
	w = client_connect(&h, 0);
	client_add_match(w, "type='signal',member='NameOwnerChanged'");

	a = client_connect(&h, 0);
	client_clear(w);
	data = call_bytes(&size);
	CHECK_EQ(client_send_raw(a, data, size), 0);
	EXPECT_MSG(a, DC_MESSAGE_METHOD_RETURN, NULL);
	/* Serial 0 is invalid. (peer.h says 1; the code returns the dc_invalid code.) */
	memset(data + 8, 0, 4);
	CHECK(client_send_raw(a, data, size) > 0);
	CHECK_EQ(a->n_close, 1);
	CHECK(a->freed);
	EXPECT_MSG(w, DC_MESSAGE_SIGNAL, "NameOwnerChanged");
	free(data);

	/* A message its transport found invalid (peer_dispatch_parsed() > 0). */
	a = client_connect(&h, 0);
	data = call_bytes(&size);
	{
		struct message *m = NULL;

		CHECK_OK(message_new_incoming(&m, size));
		memcpy(message_incoming_data(m), data, size);
		CHECK(peer_dispatch_parsed(a->peer, m, DC_E_UNIX_FDS) > 0);
	}
	CHECK_EQ(a->n_close, 1);
	harness_flush(&h);
	CHECK(a->freed);
	EXPECT_NOTHING(a);
	free(data);
	harness_deinit(&h);
}

/* peer_loginfo(): what is known of the peer, in dbus-daemon's words, read once. */
static void test_loginfo(void)
{
	struct harness h;
	struct client *a, *anon, *labelled;
	struct socket_creds none = { .uid = (uid_t)-1, .gid = (gid_t)-1, .pidfd = -1 };
	struct socket_creds label = {
		.have_creds = true, .uid = getuid(), .gid = getgid(), .pidfd = -1,
	};
	char lead[128];
	const char *info, *comm, *end;

	harness_init(&h, NULL);
	a = client_connect(&h, 0);
	info = peer_loginfo(a->peer);
	snprintf(lead, sizeof(lead), "uid=%u pid=%d comm=\"", (unsigned int)getuid(),
		 (int)getpid());
	CHECK(info && !strncmp(info, lead, strlen(lead)), "%s", info);
	/* The command line, at most 50 bytes of it (no arguments here). */
	comm = info + strlen(lead);
	end = strchr(comm, '"');
	CHECK(end && end[1] == '\0', "%s", info);
	CHECK_EQ(end - comm, strlen(argv0) < 50 ? strlen(argv0) : 50);
	CHECK(!strncmp(comm, argv0, (size_t)(end - comm)), "%s", info);
	/* Kept: the same text, not read again. */
	CHECK(peer_loginfo(a->peer) == info);

	/* Nothing known (TCP, no credentials): empty. */
	anon = client_new(&h, &none);
	CHECK_STR(peer_loginfo(anon->peer), "");

	/* A label, no pid. */
	label.label = strdup("unconfined");
	CHECK(label.label);
	labelled = client_new(&h, &label);
	snprintf(lead, sizeof(lead), "uid=%u label=\"unconfined\"", (unsigned int)getuid());
	CHECK_STR(peer_loginfo(labelled->peer), lead);
	harness_deinit(&h);
}

int main(int argc, char **argv)
{
	argv0 = argv[0];
	test_charges();
	test_connections_per_user();
	test_closed();
	test_full_callee();
	test_full_receiver();
	test_fair_share();
	test_answer_backlog();
	test_invalid_message();
	test_loginfo();
	printf("peer: ok\n");
	return 0;
}
