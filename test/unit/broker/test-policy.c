/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * broker/policy/policy.c through the router, with dbus-daemon's <policy> rules
 * (conf/policy.h) compiled by the bus from an XML configuration: a denied
 * call gets AccessDenied in dbus-daemon's words and an allowed one passes,
 * send_destination matches every name of the receiver, receive rules, a
 * denied broadcast is not delivered and nobody is told (but monitors),
 * replies nobody asked for under system.conf's rules and session.conf's,
 * <deny own>, a reload that changes the rules of connected peers, who may
 * connect at all.
 */

#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include "dbus-compat/protocol.h"
#include "peer-harness.h"

/* session.conf, and a few rules to refuse with; one rule a line (they are named by line). */
static const char session_config[] =
	"<busconfig>\n"
	"<type>session</type>\n"
	HARNESS_SESSION_POLICY "\n"
	"<policy context=\"default\">\n"
	"<deny own=\"org.example.Forbidden\"/>\n"
	"<deny send_interface=\"org.example.Secret\"/>\n"
	"<deny send_destination=\"org.example.Guarded\" send_interface=\"" HARNESS_IFACE "\" send_member=\"Forbidden\"/>\n"
	"<deny receive_sender=\"org.example.Noisy\" receive_interface=\"" HARNESS_IFACE "\" receive_member=\"Spam\"/>\n"
	"<deny send_type=\"signal\" send_interface=\"" HARNESS_IFACE "\" send_member=\"Hidden\"/>\n"
	"</policy>\n"
	"</busconfig>\n";

/* The rules of system.conf that matter here: calls need a rule, replies must be requested. */
static const char system_config[] =
	"<busconfig>\n"
	"<type>system</type>\n"
	"<policy context=\"default\">\n"
	"<allow user=\"*\"/>\n"
	"<deny own=\"*\"/>\n"
	"<deny send_type=\"method_call\"/>\n"
	"<allow send_type=\"signal\"/>\n"
	"<allow send_requested_reply=\"true\" send_type=\"method_return\"/>\n"
	"<allow send_requested_reply=\"true\" send_type=\"error\"/>\n"
	"<allow receive_type=\"method_call\"/>\n"
	"<allow receive_type=\"method_return\"/>\n"
	"<allow receive_type=\"error\"/>\n"
	"<allow receive_type=\"signal\"/>\n"
	"<allow send_destination=\"org.freedesktop.DBus\" send_interface=\"org.freedesktop.DBus\"/>\n"
	"<allow own=\"org.example.Service\"/>\n"
	"<allow send_destination=\"org.example.Service\"/>\n"
	"</policy>\n"
	"</busconfig>\n";

/* A call of @from's to @dest (interface @iface) that must be denied: its error text. */
static const char *denied_call(struct client *from, const char *dest, const char *iface,
			       const char *member)
{
	struct message_builder b;
	struct message *err;
	uint32_t serial;

	message_builder_init_method_call(&b, dest, HARNESS_PATH, iface, member, "");
	serial = client_send(from, &b);
	err = EXPECT_REPLY(from, serial, DC_MESSAGE_ERROR, DC_ERROR_ACCESS_DENIED);
	CHECK_STR(err->sender, DC_SERVICE_DBUS);
	CHECK_STR(err->destination, from->name);
	return msg_str(err, 0);
}

/* A call of @from's to @to's @dest that must arrive; @to answers it. */
static void allowed_call(struct client *from, struct client *to, const char *dest,
			 const char *member)
{
	uint32_t serial = client_call(from, 0, dest, member, "");
	struct message *call = EXPECT_MSG(to, DC_MESSAGE_METHOD_CALL, member);

	CHECK_STR(call->sender, from->name);
	client_reply(to, call, NULL);
	EXPECT_REPLY(from, serial, DC_MESSAGE_METHOD_RETURN, NULL);
	client_clear(from);
	client_clear(to);
}

/* dbus-daemon's text: "LEAD, N matched rules; type=..., sender=... (...) ...". */
static void check_denial_text(const char *text, const char *lead, const char *type,
			      struct client *from, const char *rest, struct client *to)
{
	char want[512];

	snprintf(want, sizeof(want), "%s; type=\"%s\", sender=\"%s\" (uid=%u pid=%d comm=\"",
		 lead, type, from->name, (unsigned int)getuid(), (int)getpid());
	CHECK(text && !strncmp(text, want, strlen(want)), "\n%s\nis not\n%s...", text, want);
	CHECK(strstr(text, rest), "\n%s\nlacks\n%s", text, rest);
	snprintf(want, sizeof(want), " destination=\"%s\" (uid=%u pid=%d comm=\"", to->name,
		 (unsigned int)getuid(), (int)getpid());
	CHECK(strstr(text, want), "\n%s\nlacks\n%s", text, want);
}

static void test_send_rules(void)
{
	struct harness h;
	struct client *a, *b, *c;
	const char *text;

	harness_init(&h, session_config);
	clients_connect(&h, &a, &b, &c, NULL);

	/* An interface the rules deny: AccessDenied, and b sees nothing. */
	text = denied_call(a, b->name, "org.example.Secret", "Get");
	check_denial_text(text, "Rejected send message, 2 matched rules", "method_call", a,
			  "\") interface=\"org.example.Secret\" member=\"Get\" "
			  "error name=\"(unset)\" requested_reply=\"0\" destination=", b);
	/* The rule that decided, after dbus-daemon's words. */
	CHECK(strstr(text, "; decided by harness.conf:6: <deny send_interface=\"org.example.Secret\""),
	      "%s", text);
	EXPECT_NOTHING(b);
	client_clear(a);
	allowed_call(a, b, b->name, "Get");

	/* send_destination: any name the receiver owns, its unique name too. */
	CHECK_EQ(client_request_name(b, "org.example.Guarded", 0),
		 DC_REQUEST_NAME_REPLY_PRIMARY_OWNER);
	client_clear(b);
	text = denied_call(a, "org.example.Guarded", HARNESS_IFACE, "Forbidden");
	CHECK(strstr(text, "destination=\"org.example.Guarded\""), "%s", text);
	client_clear(a);
	denied_call(a, b->name, HARNESS_IFACE, "Forbidden");
	EXPECT_NOTHING(b);
	client_clear(a);
	allowed_call(a, b, "org.example.Guarded", "Fine");
	/* c owns nothing of the kind. */
	allowed_call(a, c, c->name, "Forbidden");
	/* Once b let the name go, the rule no longer concerns it. */
	CHECK_EQ(client_release_name(b, "org.example.Guarded"), DC_RELEASE_NAME_REPLY_RELEASED);
	client_clear(b);
	allowed_call(a, b, b->name, "Forbidden");
	harness_deinit(&h);
}

static void test_receive_rules(void)
{
	struct harness h;
	struct client *b, *c;
	struct message *err;
	uint32_t serial;

	harness_init(&h, session_config);
	clients_connect(&h, &b, &c, NULL);
	client_add_match(c, "type='signal'");
	CHECK_EQ(client_request_name(b, "org.example.Noisy", 0),
		 DC_REQUEST_NAME_REPLY_PRIMARY_OWNER);
	client_clear(b);
	client_clear(c);

	/* A broadcast c may not receive: not delivered, and b is not told. */
	client_signal(b, NULL, "Spam", "");
	EXPECT_NOTHING(c);
	EXPECT_NOTHING(b);
	client_signal(b, NULL, "Tune", "");
	EXPECT_MSG(c, DC_MESSAGE_SIGNAL, "Tune");
	client_clear(c);

	/* The same addressed to c: AccessDenied to b, in the receive rules' words. */
	serial = client_signal(b, c->name, "Spam", "");
	EXPECT_NOTHING(c);
	err = EXPECT_REPLY(b, serial, DC_MESSAGE_ERROR, DC_ERROR_ACCESS_DENIED);
	check_denial_text(msg_str(err, 0), "Rejected receive message, 2 matched rules", "signal",
			  b, "\") interface=\"" HARNESS_IFACE "\" member=\"Spam\"", c);
	harness_deinit(&h);
}

/* A broadcast the sender's rules deny reaches nobody; only monitors see the error. */
static void test_denied_broadcast(void)
{
	struct harness h;
	struct client *a, *b, *m;
	uint32_t serial;

	harness_init(&h, session_config);
	clients_connect(&h, &a, &b, &m, NULL);
	client_add_match(b, "type='signal'");
	serial = client_become_monitor(m, NULL);
	EXPECT_REPLY(m, serial, DC_MESSAGE_METHOD_RETURN, NULL);
	client_clear(m);
	client_clear(b);

	serial = client_signal(a, NULL, "Hidden", "");
	EXPECT_NOTHING(a);
	EXPECT_NOTHING(b);
	EXPECT_MSG(m, DC_MESSAGE_SIGNAL, "Hidden");
	EXPECT_REPLY(m, serial, DC_MESSAGE_ERROR, DC_ERROR_ACCESS_DENIED);
	client_clear(m);

	client_signal(a, NULL, "Shown", "");
	EXPECT_MSG(b, DC_MESSAGE_SIGNAL, "Shown");
	CHECK_EQ(m->n_msgs, 1);
	harness_deinit(&h);
}

/* <deny own=...>: RequestName is refused, in dbus-daemon's words. */
static void test_own(void)
{
	struct harness h;
	struct client *a;
	struct message *err;
	char want[256];

	harness_init(&h, session_config);
	a = client_connect(&h, 0);
	err = EXPECT_REPLY(a, client_driver(a, "RequestName", "su", "org.example.Forbidden", 0),
			   DC_MESSAGE_ERROR, DC_ERROR_ACCESS_DENIED);
	snprintf(want, sizeof(want),
		 "Connection \"%s\" is not allowed to own the service \"org.example.Forbidden\" "
		 "due to security policies in the configuration file", a->name);
	CHECK(!strncmp(msg_str(err, 0), want, strlen(want)), "%s", msg_str(err, 0));
	CHECK(!client_find(a, DC_MESSAGE_SIGNAL, "NameAcquired"));
	client_clear(a);
	CHECK_EQ(client_request_name(a, "org.example.Allowed", 0),
		 DC_REQUEST_NAME_REPLY_PRIMARY_OWNER);
	harness_deinit(&h);
}

/* A reply to @to of @from's that nobody asked for (reply serial 999). */
static uint32_t unrequested_reply(struct client *from, struct client *to)
{
	struct message_builder b;

	message_builder_init(&b, DC_MESSAGE_METHOD_RETURN, "");
	b.destination = to->name;
	b.reply_serial = 999;
	return client_send(from, &b);
}

/*
 * system.conf: a call needs a rule that allows it, a reply must answer a
 * call; session.conf's eavesdrop="true" lets an unrequested reply through.
 */
static void test_unrequested_replies(void)
{
	struct harness h;
	struct client *a, *b, *c;
	struct message *call, *err;
	uint32_t serial;

	harness_init(&h, system_config);
	clients_connect(&h, &a, &b, &c, NULL);
	CHECK_EQ(client_request_name(b, "org.example.Service", 0),
		 DC_REQUEST_NAME_REPLY_PRIMARY_OWNER);
	client_clear(b);
	err = EXPECT_REPLY(c, client_driver(c, "RequestName", "su", "org.example.Other", 0),
			   DC_MESSAGE_ERROR, DC_ERROR_ACCESS_DENIED);
	client_clear(c);

	/* The service may be called, and its reply goes back. */
	serial = client_call(a, 0, "org.example.Service", "Get", "");
	call = EXPECT_MSG(b, DC_MESSAGE_METHOD_CALL, "Get");
	client_reply(b, call, NULL);
	EXPECT_REPLY(a, serial, DC_MESSAGE_METHOD_RETURN, NULL);
	client_clear(a);
	/* A second reply to it is one nobody asked for. */
	serial = client_reply(b, call, NULL);
	EXPECT_NOTHING(a);
	err = EXPECT_REPLY(b, serial, DC_MESSAGE_ERROR, DC_ERROR_ACCESS_DENIED);
	check_denial_text(msg_str(err, 0), "Rejected send message, 0 matched rules",
			  "method_return", b, "requested_reply=\"0\"", a);
	client_clear(b);
	serial = unrequested_reply(b, a);
	EXPECT_NOTHING(a);
	EXPECT_REPLY(b, serial, DC_MESSAGE_ERROR, DC_ERROR_ACCESS_DENIED);
	client_clear(b);

	/* c owns no name a rule allows calls to. */
	denied_call(a, c->name, HARNESS_IFACE, "Get");
	EXPECT_NOTHING(c);
	harness_deinit(&h);

	harness_init(&h, "<busconfig>" HARNESS_SESSION_POLICY "</busconfig>");
	clients_connect(&h, &a, &b, NULL);
	unrequested_reply(b, a);
	EXPECT_NOTHING(b);
	EXPECT_REPLY(a, 999, DC_MESSAGE_METHOD_RETURN, NULL);
	harness_deinit(&h);
}

/* A reload gives the connected peers the new rules. */
static void test_reload(void)
{
	struct harness h;
	struct client *a, *b;

	harness_init(&h, session_config);
	clients_connect(&h, &a, &b, NULL);
	denied_call(a, b->name, "org.example.Secret", "Get");
	client_clear(a);
	harness_reload(&h, "<busconfig>" HARNESS_SESSION_POLICY "</busconfig>");
	allowed_call(a, b, b->name, "Get");
	harness_reload(&h, session_config);
	denied_call(a, b->name, "org.example.Secret", "Get");
	harness_deinit(&h);
}

/* Who may connect: the bus' own user by default, and what <allow|deny user=> says. */
static void test_connect(void)
{
	const uid_t other = getuid() == 4242 ? 4243 : 4242;
	struct socket_creds creds = { .have_creds = true, .uid = other, .gid = other, .pidfd = -1 };
	struct harness h;
	struct client *c;

	harness_init(&h, "<busconfig>" HARNESS_SESSION_POLICY "</busconfig>");
	c = client_new(&h, &creds);
	CHECK_EQ(client_authenticate(c, true), PEER_E_REFUSED);
	CHECK_EQ(c->n_close, 1);
	c = client_connect(&h, 0);
	CHECK(c->registered);
	harness_deinit(&h);

	harness_init(&h, system_config);
	creds = (struct socket_creds){ .have_creds = true, .uid = other, .gid = other, .pidfd = -1 };
	c = client_new(&h, &creds);
	CHECK_EQ(client_authenticate(c, true), 0);
	client_hello(c);
	CHECK(c->registered);
	harness_deinit(&h);

	harness_init(&h, "<busconfig>" HARNESS_SESSION_POLICY
			 "<policy context=\"mandatory\"><deny user=\"*\"/></policy></busconfig>");
	c = client_new(&h, NULL);
	CHECK_EQ(client_authenticate(c, true), PEER_E_REFUSED);
	CHECK_EQ(c->n_close, 1);
	harness_deinit(&h);
}

int main(void)
{
	test_send_rules();
	test_receive_rules();
	test_denied_broadcast();
	test_own();
	test_unrequested_replies();
	test_reload();
	test_connect();
	printf("policy: ok\n");
	return 0;
}
