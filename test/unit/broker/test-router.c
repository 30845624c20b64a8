/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * broker/core/router.c through a real bus and fake clients (peer-harness.h):
 * Hello and the unique names, a call and its reply stitched with their
 * senders, replies nobody asked for, names nobody owns, broadcasts to
 * matching rules only, NoReply when the callee goes, NameOwnerChanged /
 * NameAcquired / NameLost of RequestName and ReleaseName, what a connection
 * may send before Hello, monitors that send, fds to a peer that takes none.
 */

#include <regex.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include "dbus-compat/protocol.h"
#include "peer-harness.h"

#define NOC_RULE "type='signal',sender='org.freedesktop.DBus',member='NameOwnerChanged'"

static bool is_unique_name(const char *s)
{
	regex_t re;
	bool ok;

	CHECK_EQ(regcomp(&re, "^:1\\.[0-9]+$", REG_EXTENDED | REG_NOSUB), 0);
	ok = s && regexec(&re, s, 0, NULL, 0) == 0;
	regfree(&re);
	return ok;
}

/* Hello: ":1.N", the reply first, then NameAcquired; only once. */
static void test_hello(void)
{
	struct harness h;
	struct client *a, *b;
	struct message *reply, *acquired;
	uint32_t serial;

	harness_init(&h, NULL);
	a = client_connect(&h, CLIENT_NO_HELLO);
	CHECK(!a->registered);
	serial = client_driver(a, "Hello", "");
	CHECK(a->registered);
	CHECK_EQ(a->n_msgs, 2);
	reply = a->msgs[0];
	CHECK_EQ(reply->type, DC_MESSAGE_METHOD_RETURN);
	CHECK_EQ(reply->reply_serial, serial);
	CHECK_STR(reply->sender, DC_SERVICE_DBUS);
	CHECK(is_unique_name(msg_str(reply, 0)), "Hello gave \"%s\"", msg_str(reply, 0));
	CHECK_STR(reply->destination, msg_str(reply, 0));
	acquired = a->msgs[1];
	CHECK_EQ(acquired->type, DC_MESSAGE_SIGNAL);
	CHECK_STR(acquired->member, "NameAcquired");
	CHECK_STR(acquired->interface, DC_INTERFACE_DBUS);
	CHECK_STR(acquired->sender, DC_SERVICE_DBUS);
	CHECK_STR(msg_str(acquired, 0), msg_str(reply, 0));
	CHECK_STR(acquired->destination, msg_str(reply, 0));
	snprintf(a->name, sizeof(a->name), "%s", msg_str(reply, 0));
	client_clear(a);

	/* A second Hello is refused; the connection stays. */
	serial = client_driver(a, "Hello", "");
	reply = EXPECT_REPLY(a, serial, DC_MESSAGE_ERROR, DC_ERROR_FAILED);
	CHECK_STR(msg_str(reply, 0), "Already handled an Hello message");
	CHECK(a->peer && !a->n_close);

	/* Names are handed out in order, never twice. */
	b = client_connect(&h, 0);
	CHECK(is_unique_name(b->name));
	CHECK(strcmp(a->name, b->name));
	CHECK(strtoul(b->name + 3, NULL, 10) > strtoul(a->name + 3, NULL, 10));
	client_close(b);
	harness_flush(&h);
	CHECK(b->freed);
	b = client_connect(&h, 0);
	CHECK(strtoul(b->name + 3, NULL, 10) == strtoul(a->name + 3, NULL, 10) + 2);
	harness_deinit(&h);
}

/* A call reaches its destination with the caller's name; the reply comes back. */
static void test_call_and_reply(void)
{
	struct harness h;
	struct client *a, *b;
	struct message *call, *reply;
	struct message_builder mb;
	uint32_t serial;

	harness_init(&h, NULL);
	clients_connect(&h, &a, &b, NULL);

	serial = client_call(a, 0, b->name, "Ping", "su", "ping", 7);
	EXPECT_NOTHING(a);
	CHECK_EQ(b->n_msgs, 1);
	call = EXPECT_MSG(b, DC_MESSAGE_METHOD_CALL, "Ping");
	CHECK_STR(call->sender, a->name);
	CHECK_STR(call->destination, b->name);
	CHECK_STR(call->path, HARNESS_PATH);
	CHECK_STR(call->interface, HARNESS_IFACE);
	CHECK_STR(call->signature, "su");
	CHECK_EQ(call->serial, serial);
	CHECK_STR(msg_str(call, 0), "ping");

	client_reply(b, call, "s", "pong");
	CHECK_EQ(b->n_msgs, 1);	/* the call only */
	reply = EXPECT_REPLY(a, serial, DC_MESSAGE_METHOD_RETURN, NULL);
	CHECK_STR(reply->sender, b->name);
	CHECK_STR(reply->destination, a->name);
	CHECK_STR(msg_str(reply, 0), "pong");
	client_clear(a);
	client_clear(b);

	/* An error reply travels the same way. */
	serial = client_call(a, 0, b->name, "Fail", "");
	call = EXPECT_MSG(b, DC_MESSAGE_METHOD_CALL, "Fail");
	client_error(b, call, "org.example.Error.Failed", "it failed");
	reply = EXPECT_REPLY(a, serial, DC_MESSAGE_ERROR, "org.example.Error.Failed");
	CHECK_STR(reply->sender, b->name);
	CHECK_STR(msg_str(reply, 0), "it failed");
	client_clear(a);
	client_clear(b);

	/* Through a well-known name; a SENDER the client wrote is replaced. */
	CHECK_EQ(client_request_name(b, "org.example.B", 0), DC_REQUEST_NAME_REPLY_PRIMARY_OWNER);
	client_clear(b);
	message_builder_init_method_call(&mb, "org.example.B", HARNESS_PATH, HARNESS_IFACE,
					 "Forged", "");
	mb.sender = ":1.999";
	serial = client_send(a, &mb);
	call = EXPECT_MSG(b, DC_MESSAGE_METHOD_CALL, "Forged");
	CHECK_STR(call->sender, a->name);
	CHECK_STR(call->destination, "org.example.B");
	client_reply(b, call, NULL);
	reply = EXPECT_REPLY(a, serial, DC_MESSAGE_METHOD_RETURN, NULL);
	CHECK_STR(reply->sender, b->name);
	harness_deinit(&h);
}

/*
 * A reply nobody waits for is judged by the policy as an unrequested one
 * (router_unicast_deliver()); without a policy it is delivered, as
 * dbus-daemon's session.conf lets it through (test-policy.c has the
 * system.conf side). So is a second reply to one call.
 */
static void test_unrequested_reply(void)
{
	struct harness h;
	struct client *a, *b;
	struct message_builder mb;
	struct message *call, *m;
	uint32_t serial;

	harness_init(&h, NULL);
	clients_connect(&h, &a, &b, NULL);

	message_builder_init(&mb, DC_MESSAGE_METHOD_RETURN, "s");
	mb.destination = a->name;
	mb.reply_serial = 4242;
	CHECK_EQ(dc_writer_write(&mb.body, "s", "unasked"), 0);
	client_send(b, &mb);
	EXPECT_NOTHING(b);
	m = EXPECT_REPLY(a, 4242, DC_MESSAGE_METHOD_RETURN, NULL);
	CHECK_STR(m->sender, b->name);
	CHECK_STR(msg_str(m, 0), "unasked");
	client_clear(a);

	serial = client_call(a, 0, b->name, "Once", "");
	call = EXPECT_MSG(b, DC_MESSAGE_METHOD_CALL, "Once");
	client_reply(b, call, "s", "first");
	client_reply(b, call, "s", "second");
	CHECK_EQ(b->n_msgs, 1);
	CHECK_EQ(client_count(a, DC_MESSAGE_METHOD_RETURN, NULL), 2);
	CHECK_STR(msg_str(a->msgs[0], 0), "first");
	CHECK_STR(msg_str(a->msgs[1], 0), "second");
	CHECK_EQ(a->msgs[1]->reply_serial, serial);
	/* The slot is gone: closing b now gives a no NoReply. */
	client_clear(a);
	client_close(b);
	harness_flush(&h);
	EXPECT_NOTHING(a);
	harness_deinit(&h);
}

/* Nobody owns the name: NameHasNoOwner with NO_AUTO_START, else ServiceUnknown. */
static void test_no_owner(void)
{
	struct harness h;
	struct client *a;
	struct message *err;
	uint32_t serial;

	harness_init(&h, NULL);
	a = client_connect(&h, 0);

	serial = client_call(a, DC_FLAG_NO_AUTO_START, "org.example.Nobody", "Hi", "");
	err = EXPECT_REPLY(a, serial, DC_MESSAGE_ERROR, DC_ERROR_NAME_HAS_NO_OWNER);
	CHECK_STR(err->sender, DC_SERVICE_DBUS);
	CHECK_STR(err->destination, a->name);
	CHECK_STR(msg_str(err, 0), "Name \"org.example.Nobody\" does not exist");
	CHECK_EQ(a->n_msgs, 1);
	client_clear(a);

	/* A unique name that is not (or no longer) there. */
	serial = client_call(a, DC_FLAG_NO_AUTO_START, ":1.4000", "Hi", "");
	EXPECT_REPLY(a, serial, DC_MESSAGE_ERROR, DC_ERROR_NAME_HAS_NO_OWNER);
	client_clear(a);

	/* Auto-start allowed, but no .service file provides it. */
	serial = client_call(a, 0, "org.example.Nobody", "Hi", "");
	err = EXPECT_REPLY(a, serial, DC_MESSAGE_ERROR, DC_ERROR_SERVICE_UNKNOWN);
	CHECK_STR(msg_str(err, 0),
		  "The name org.example.Nobody was not provided by any .service files");
	client_clear(a);

	/* Even a signal or a call that expects no reply gets the error, as from dbus-daemon. */
	client_signal(a, "org.example.Nobody", "Sig", "");
	EXPECT_MSG(a, DC_MESSAGE_ERROR, DC_ERROR_SERVICE_UNKNOWN);
	harness_deinit(&h);
}

/* A broadcast reaches every peer with a matching rule, once, and no one else. */
static void test_broadcast(void)
{
	struct harness h;
	struct client *a, *b, *c, *d;
	struct message *m;
	uint32_t serial;

	harness_init(&h, NULL);
	clients_connect(&h, &a, &b, &c, &d, NULL);
	client_add_match(b, "type='signal',interface='" HARNESS_IFACE "'");
	/* Two rules that both match: still one copy. */
	client_add_match(b, "type='signal',member='Ping'");
	client_add_match(c, "type='signal',member='Other'");
	client_add_match(d, "type='signal',arg0='yes'");

	serial = client_signal(a, NULL, "Ping", "s", "no");
	EXPECT_NOTHING(a);
	EXPECT_NOTHING(c);
	EXPECT_NOTHING(d);
	CHECK_EQ(b->n_msgs, 1);
	m = EXPECT_MSG(b, DC_MESSAGE_SIGNAL, "Ping");
	CHECK_STR(m->sender, a->name);
	CHECK(m->destination == NULL);
	CHECK_EQ(m->serial, serial);
	CHECK_STR(msg_str(m, 0), "no");
	client_clear(b);

	/* arg0 matches; the sender's own rule matches its own signal too. */
	client_add_match(a, "type='signal',member='Other'");
	client_signal(a, NULL, "Other", "s", "yes");
	EXPECT_MSG(a, DC_MESSAGE_SIGNAL, "Other");
	EXPECT_MSG(b, DC_MESSAGE_SIGNAL, "Other");
	EXPECT_MSG(c, DC_MESSAGE_SIGNAL, "Other");
	EXPECT_MSG(d, DC_MESSAGE_SIGNAL, "Other");
	client_clear(a);
	client_clear(b);
	client_clear(c);
	client_clear(d);

	/* A signal to one peer goes to that one only, whatever the others' rules say. */
	client_signal(a, c->name, "Ping", "s", "yes");
	EXPECT_NOTHING(b);
	EXPECT_NOTHING(d);
	m = EXPECT_MSG(c, DC_MESSAGE_SIGNAL, "Ping");
	CHECK_STR(m->destination, c->name);
	client_clear(c);

	/* RemoveMatch: no more. */
	serial = client_driver(b, "RemoveMatch", "s", "type='signal',interface='" HARNESS_IFACE "'");
	EXPECT_REPLY(b, serial, DC_MESSAGE_METHOD_RETURN, NULL);
	serial = client_driver(b, "RemoveMatch", "s", "type='signal',member='Ping'");
	EXPECT_REPLY(b, serial, DC_MESSAGE_METHOD_RETURN, NULL);
	client_clear(b);
	client_signal(a, NULL, "Ping", "s", "no");
	EXPECT_NOTHING(b);
	harness_deinit(&h);
}

/* The callee goes while a call waits for its answer: NoReply, from the bus. */
static void test_noreply_on_close(void)
{
	struct harness h;
	struct client *a, *b;
	struct message *err;
	uint32_t serial, oneway;

	harness_init(&h, NULL);
	clients_connect(&h, &a, &b, NULL);

	serial = client_call(a, 0, b->name, "Slow", "");
	oneway = client_call(a, DC_FLAG_NO_REPLY_EXPECTED, b->name, "Oneway", "");
	CHECK_EQ(b->n_msgs, 2);
	CHECK(!client_find_reply(a, oneway));
	client_close(b);
	err = EXPECT_REPLY(a, serial, DC_MESSAGE_ERROR, DC_ERROR_NO_REPLY);
	CHECK_STR(err->sender, DC_SERVICE_DBUS);
	CHECK_STR(err->destination, a->name);
	CHECK_STR(msg_str(err, 0), "Message recipient disconnected from message bus without replying");
	/* Nothing for the call that expected no answer. */
	CHECK_EQ(a->n_msgs, 1);
	CHECK_EQ(b->n_close, 1);
	CHECK(!b->freed);
	harness_flush(&h);
	CHECK(b->freed);

	/* The caller goes first: nothing more for anybody. */
	b = client_connect(&h, 0);
	client_clear(a);
	serial = client_call(a, 0, b->name, "Slow", "");
	client_close(a);
	harness_flush(&h);
	EXPECT_MSG(b, DC_MESSAGE_METHOD_CALL, "Slow");
	client_reply(b, b->msgs[0], NULL);
	CHECK_EQ(a->n_msgs, 0);
	harness_deinit(&h);
}

/* The NameOwnerChanged signals of a watcher, from RequestName and ReleaseName. */
static void check_noc(struct client *w, const char *name, const char *old_owner,
		      const char *new_owner)
{
	struct message *m = EXPECT_MSG(w, DC_MESSAGE_SIGNAL, "NameOwnerChanged");

	CHECK_EQ(w->n_msgs, 1);
	CHECK_STR(m->sender, DC_SERVICE_DBUS);
	CHECK_STR(m->path, DC_PATH_DBUS);
	CHECK(m->destination == NULL);
	CHECK_STR(msg_str(m, 0), name);
	CHECK_STR(msg_str(m, 1), old_owner);
	CHECK_STR(msg_str(m, 2), new_owner);
	client_clear(w);
}

static void test_name_owner_changed(void)
{
	struct harness h;
	struct client *w, *only, *a, *b, *x;
	struct message *m;
	char xname[64];

	harness_init(&h, NULL);
	clients_connect(&h, &w, &only, &a, &b, NULL);
	client_add_match(w, NOC_RULE);
	client_add_match(only, NOC_RULE ",arg0='org.example.Other'");

	CHECK_EQ(client_request_name(a, "org.example.Name", 0),
		 DC_REQUEST_NAME_REPLY_PRIMARY_OWNER);
	/* The owner: NameAcquired before the reply (the registry's events come first). */
	CHECK_EQ(a->n_msgs, 2);
	CHECK_STR(a->msgs[0]->member, "NameAcquired");
	CHECK_STR(msg_str(a->msgs[0], 0), "org.example.Name");
	CHECK_STR(a->msgs[0]->destination, a->name);
	CHECK_EQ(a->msgs[1]->type, DC_MESSAGE_METHOD_RETURN);
	client_clear(a);
	check_noc(w, "org.example.Name", "", a->name);
	EXPECT_NOTHING(only);
	EXPECT_NOTHING(b);

	/* Already the owner; queued behind it: no signal. */
	CHECK_EQ(client_request_name(a, "org.example.Name", 0),
		 DC_REQUEST_NAME_REPLY_ALREADY_OWNER);
	CHECK_EQ(client_request_name(b, "org.example.Name", 0), DC_REQUEST_NAME_REPLY_IN_QUEUE);
	EXPECT_NOTHING(w);
	client_clear(a);
	client_clear(b);

	/* Released: the next in the queue gets it. */
	CHECK_EQ(client_release_name(a, "org.example.Name"), DC_RELEASE_NAME_REPLY_RELEASED);
	m = EXPECT_MSG(a, DC_MESSAGE_SIGNAL, "NameLost");
	CHECK_STR(msg_str(m, 0), "org.example.Name");
	m = EXPECT_MSG(b, DC_MESSAGE_SIGNAL, "NameAcquired");
	CHECK_STR(msg_str(m, 0), "org.example.Name");
	check_noc(w, "org.example.Name", a->name, b->name);
	client_clear(a);
	client_clear(b);

	CHECK_EQ(client_release_name(a, "org.example.Name"), DC_RELEASE_NAME_REPLY_NOT_OWNER);
	CHECK_EQ(client_release_name(a, "org.example.Never"), DC_RELEASE_NAME_REPLY_NON_EXISTENT);
	EXPECT_NOTHING(w);
	client_clear(a);

	/* The owner goes: the name goes with it. */
	client_close(b);
	CHECK_EQ(w->n_msgs, 2);
	CHECK_STR(msg_str(w->msgs[0], 0), "org.example.Name");
	CHECK_STR(msg_str(w->msgs[0], 1), b->name);
	CHECK_STR(msg_str(w->msgs[0], 2), "");
	CHECK_STR(msg_str(w->msgs[1], 0), b->name);
	CHECK_STR(msg_str(w->msgs[1], 1), b->name);
	CHECK_STR(msg_str(w->msgs[1], 2), "");
	client_clear(w);

	/* arg0 in the rule: only that name's changes. */
	CHECK_EQ(client_request_name(a, "org.example.Other", 0),
		 DC_REQUEST_NAME_REPLY_PRIMARY_OWNER);
	check_noc(only, "org.example.Other", "", a->name);
	check_noc(w, "org.example.Other", "", a->name);
	client_clear(a);

	/* A unique name comes and goes. */
	x = client_connect(&h, 0);
	snprintf(xname, sizeof(xname), "%s", x->name);
	check_noc(w, xname, "", xname);
	client_close(x);
	check_noc(w, xname, xname, "");
	EXPECT_NOTHING(only);

	/* Invalid and reserved names. */
	m = EXPECT_REPLY(a, client_driver(a, "RequestName", "su", "nodot", 0), DC_MESSAGE_ERROR,
			 DC_ERROR_INVALID_ARGS);
	m = EXPECT_REPLY(a, client_driver(a, "RequestName", "su", DC_SERVICE_DBUS, 0),
			 DC_MESSAGE_ERROR, DC_ERROR_INVALID_ARGS);
	CHECK(strstr(msg_str(m, 0), "reserved for D-Bus' use only"));
	EXPECT_NOTHING(w);
	harness_deinit(&h);
}

/* Before Hello, as router_dispatch_unregistered() tells it. */
static void test_before_hello(void)
{
	struct harness h;
	struct client *u, *b, *w;
	struct message *err;
	struct message_builder mb;
	uint32_t serial;

	harness_init(&h, NULL);
	clients_connect(&h, &b, &w, NULL);
	client_add_match(w, NOC_RULE);

	/* Another method of the driver: AccessDenied, and the connection stays. */
	u = client_connect(&h, CLIENT_NO_HELLO);
	serial = client_driver(u, "ListNames", "");
	err = EXPECT_REPLY(u, serial, DC_MESSAGE_ERROR, DC_ERROR_ACCESS_DENIED);
	CHECK_STR(msg_str(err, 0),
		  "Client tried to send a message other than Hello without being registered");
	CHECK_STR(err->destination, ":not.active.yet");
	CHECK(u->peer && u->n_close == 0);
	client_clear(u);
	/* Whatever its type: a signal to the driver too. */
	message_builder_init_signal(&mb, DC_PATH_DBUS, DC_INTERFACE_DBUS, "Boo", "");
	mb.destination = DC_SERVICE_DBUS;
	client_send(u, &mb);
	EXPECT_MSG(u, DC_MESSAGE_ERROR, DC_ERROR_ACCESS_DENIED);
	client_clear(u);

	/* Without destination: the bus' Peer interface answers; a reply is dropped. */
	message_builder_init_method_call(&mb, NULL, "/", DC_INTERFACE_PEER, "Ping", "");
	serial = client_send(u, &mb);
	EXPECT_REPLY(u, serial, DC_MESSAGE_METHOD_RETURN, NULL);
	client_clear(u);
	message_builder_init(&mb, DC_MESSAGE_METHOD_RETURN, "");
	mb.reply_serial = 1;
	client_send(u, &mb);
	EXPECT_NOTHING(u);
	CHECK(u->peer && u->n_close == 0);

	/* Then Hello works. */
	client_hello(u);
	EXPECT_MSG(w, DC_MESSAGE_SIGNAL, "NameOwnerChanged");
	client_clear(w);

	/* A call to anybody else closes the connection; it never arrives. */
	u = client_connect(&h, CLIENT_NO_HELLO);
	client_call(u, 0, b->name, "Sneak", "");
	CHECK_EQ(u->n_close, 1);
	CHECK(u->freed);
	EXPECT_NOTHING(u);
	EXPECT_NOTHING(b);
	/* Not registered: nobody is told it went. */
	EXPECT_NOTHING(w);

	/* So does a broadcast. */
	client_add_match(b, "type='signal'");
	u = client_connect(&h, CLIENT_NO_HELLO);
	client_signal(u, NULL, "Sneak", "");
	CHECK(u->freed);
	EXPECT_NOTHING(b);
	harness_deinit(&h);
}

/* BecomeMonitor: its names go, it sees the traffic, and it is closed if it sends. */
static void test_monitor(void)
{
	struct harness h;
	struct client *m, *a, *b, *w;
	struct message *lost;
	uint32_t serial;
	char mname[64];

	harness_init(&h, NULL);
	clients_connect(&h, &a, &b, &w, &m, NULL);
	snprintf(mname, sizeof(mname), "%s", m->name);
	client_add_match(w, NOC_RULE);
	CHECK_EQ(client_request_name(m, "org.example.Monitor", 0),
		 DC_REQUEST_NAME_REPLY_PRIMARY_OWNER);
	client_clear(m);
	client_clear(w);

	serial = client_become_monitor(m, NULL);
	/* The reply, then NameLost for each name, its unique name first (dbus-daemon's order). */
	EXPECT_REPLY(m, serial, DC_MESSAGE_METHOD_RETURN, NULL);
	CHECK_EQ(m->msgs[0]->type, DC_MESSAGE_METHOD_RETURN);
	CHECK_EQ(client_count(m, DC_MESSAGE_SIGNAL, "NameLost"), 2);
	lost = m->msgs[m->n_msgs - 2];
	CHECK_STR(lost->member, "NameLost");
	CHECK_STR(msg_str(lost, 0), mname);
	lost = m->msgs[m->n_msgs - 1];
	CHECK_STR(lost->member, "NameLost");
	CHECK_STR(msg_str(lost, 0), "org.example.Monitor");
	/* Others see its names go, as if it had left. */
	CHECK_EQ(client_count(w, DC_MESSAGE_SIGNAL, "NameOwnerChanged"), 2);
	client_clear(m);
	client_clear(w);

	/* It sees a call and its reply, which reach their destinations as before. */
	serial = client_call(a, 0, b->name, "Watched", "");
	client_reply(b, b->msgs[0], NULL);
	EXPECT_REPLY(a, serial, DC_MESSAGE_METHOD_RETURN, NULL);
	CHECK_EQ(m->n_msgs, 2);
	CHECK_STR(m->msgs[0]->member, "Watched");
	CHECK_STR(m->msgs[0]->sender, a->name);
	CHECK_EQ(m->msgs[1]->reply_serial, serial);
	client_clear(m);

	/* A monitor that sends anything is closed; nobody sees a name go (it has none). */
	client_driver(m, "ListNames", "");
	CHECK_EQ(m->n_close, 1);
	CHECK(m->freed);
	EXPECT_NOTHING(m);
	EXPECT_NOTHING(w);
	harness_deinit(&h);
}

/* fds to a peer that cannot take them: a call fails, a signal is dropped. */
static void test_fds(void)
{
	struct harness h;
	struct client *a, *nofd, *fd;
	struct message_builder mb;
	struct message *m;
	uint32_t serial;
	int pipefd[2];

	harness_init(&h, NULL);
	a = client_connect(&h, 0);
	nofd = client_connect(&h, CLIENT_NO_FDS);
	fd = client_connect(&h, 0);
	client_add_match(nofd, "type='signal'");
	client_add_match(fd, "type='signal'");
	CHECK_OK(pipe(pipefd));

	message_builder_init_method_call(&mb, nofd->name, HARNESS_PATH, HARNESS_IFACE, "Take",
					 "h");
	CHECK_EQ(dc_writer_append(&mb.body, 'h', &(uint32_t){ 0 }), 0);
	mb.fds = pipefd;
	mb.n_fds = 1;
	serial = client_send(a, &mb);
	m = EXPECT_REPLY(a, serial, DC_MESSAGE_ERROR, DC_ERROR_NOT_SUPPORTED);
	CHECK(strstr(msg_str(m, 0), "doesn't support that"));
	EXPECT_NOTHING(nofd);
	client_clear(a);

	message_builder_init_method_call(&mb, fd->name, HARNESS_PATH, HARNESS_IFACE, "Take",
					 "h");
	CHECK_EQ(dc_writer_append(&mb.body, 'h', &(uint32_t){ 0 }), 0);
	mb.fds = pipefd;
	mb.n_fds = 1;
	client_send(a, &mb);
	m = EXPECT_MSG(fd, DC_MESSAGE_METHOD_CALL, "Take");
	CHECK_EQ(m->n_fds, 1);
	client_clear(fd);

	message_builder_init_signal(&mb, HARNESS_PATH, HARNESS_IFACE, "Fds", "h");
	CHECK_EQ(dc_writer_append(&mb.body, 'h', &(uint32_t){ 0 }), 0);
	mb.fds = pipefd;
	mb.n_fds = 1;
	client_send(a, &mb);
	EXPECT_MSG(fd, DC_MESSAGE_SIGNAL, "Fds");
	EXPECT_NOTHING(nofd);
	EXPECT_NOTHING(a);
	close(pipefd[0]);
	close(pipefd[1]);
	harness_deinit(&h);
}

int main(void)
{
	test_hello();
	test_call_and_reply();
	test_unrequested_reply();
	test_no_owner();
	test_broadcast();
	test_noreply_on_close();
	test_name_owner_changed();
	test_before_hello();
	test_monitor();
	test_fds();
	printf("router: ok\n");
	return 0;
}
