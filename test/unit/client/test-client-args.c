/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The argument checks of libbus1-client's public entries (bus1-client.h):
 * every entry is called with each bad argument it can be given, and must
 * refuse it with -EINVAL (or the value its documentation gives for a
 * function that returns no errno), say so once through the assert_return()
 * hook, and change nothing: not the bus, not the messages, not what the
 * output pointers point to.
 *
 * No /dev/bus1 is needed: the checks come before the bus is used, so the
 * bus is a zeroed struct b1c_bus that no call may touch, and the messages
 * are built and sealed without one.
 */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>
#include "b1c-internal.h"
#include "check.h"

static int n_refused;
static char last_refusal[512];

static void on_refusal(void *userdata, int priority, const char *text)
{
	CHECK_EQ(priority, LOG_DEBUG);
	n_refused++;
	snprintf(last_refusal, sizeof(last_refusal), "%s", text);
}

static int handler(struct b1c_bus *b, struct b1c_message *m, void *userdata)
{
	return 0;
}

/* What a refused call could have changed of a message. */
struct msg_state {
	unsigned long n_refs;
	const struct message *msg;
	bool building;
	uint8_t type;
	uint8_t flags;
	const char *strs[ARRAY_SIZE(((struct b1c_message *)NULL)->strs)];
	size_t body_size;
	int body_error;
	const char *body_sig;
	unsigned body_depth;
	size_t n_fds;
	bool reader_ready;
	const char *error_text;
	uint64_t direct_reply;
};

/* Field by field into zeroed memory: the states are compared with memcmp(), padding too. */
static void msg_state(struct msg_state *s, const struct b1c_message *m)
{
	memset(s, 0, sizeof(*s));
	s->n_refs = m->n_refs;
	s->msg = m->msg;
	s->building = m->building;
	s->type = m->b.type;
	s->flags = m->b.flags;
	for (size_t i = 0; i < ARRAY_SIZE(s->strs); i++)
		s->strs[i] = m->strs[i];
	s->body_size = m->b.body.size;
	s->body_error = m->b.body.error;
	s->body_sig = m->b.body.sig;
	s->body_depth = m->b.body.depth;
	s->n_fds = m->n_fds;
	s->reader_ready = m->reader_ready;
	s->error_text = m->error_text;
	s->direct_reply = m->direct_reply;
}

/*
 * The objects every call is given: the bus, a sealed method call, a sealed
 * signal, a method call being built and one that expects no reply.
 */
static struct b1c_bus *bus;
static struct b1c_message *call, *sig, *building, *noreply;
static struct b1c_message **const msgs[] = { &call, &sig, &building, &noreply };

struct world {
	struct b1c_bus bus;
	struct msg_state msgs[ARRAY_SIZE(msgs)];
	int n_refused;
};

static void world_take(struct world *w)
{
	memcpy(&w->bus, bus, sizeof(w->bus));
	for (size_t i = 0; i < ARRAY_SIZE(msgs); i++)
		msg_state(&w->msgs[i], *msgs[i]);
	w->n_refused = n_refused;
}

/* One refusal was said, nothing else happened. */
static void world_check(const struct world *w, const char *expr, int line)
{
	CHECK(n_refused == w->n_refused + 1, "line %d: %s: %d refusals, not one", line, expr,
	      n_refused - w->n_refused);
	CHECK(!memcmp(&w->bus, bus, sizeof(w->bus)), "line %d: %s changed the bus", line, expr);
	for (size_t i = 0; i < ARRAY_SIZE(msgs); i++) {
		struct msg_state now;

		msg_state(&now, *msgs[i]);
		CHECK(!memcmp(&w->msgs[i], &now, sizeof(now)), "line %d: %s changed message %zu",
		      line, expr, i);
	}
}

/* @expr must be refused with @want (any type comparable with ==). */
#define REFUSED(expr, want)								\
	do {										\
		struct world _w;							\
											\
		world_take(&_w);							\
		CHECK((expr) == (want), "line %d: %s", __LINE__, #expr);		\
		world_check(&_w, #expr, __LINE__);					\
	} while (0)

/* As REFUSED(), for a function without a result. */
#define REFUSED_VOID(expr)								\
	do {										\
		struct world _w;							\
											\
		world_take(&_w);							\
		expr;									\
		world_check(&_w, #expr, __LINE__);					\
	} while (0)

#define UNTOUCHED ((struct b1c_message *)(uintptr_t)0x5a5a5a5a)

static struct b1c_message *sealed(struct b1c_message *m, uint32_t serial)
{
	CHECK_EQ(client_message_seal(m, serial), 0);
	return m;
}

static void setup(void)
{
	struct b1c_message *m = NULL;

	bus = calloc(1, sizeof(*bus));
	CHECK(bus);
	bus->sock = -1;

	CHECK_EQ(b1c_message_new_method_call(&m, "org.example.Dest", "/org/example",
					     "org.example.Iface", "Method", "s"), 0);
	CHECK_EQ(b1c_message_append(m, "s", "hello"), 0);
	call = sealed(m, 1);

	CHECK_EQ(b1c_message_new_signal(&m, "/org/example", "org.example.Iface", "Changed", "u"),
		 0);
	CHECK_EQ(b1c_message_append(m, "u", 7), 0);
	sig = sealed(m, 2);

	CHECK_EQ(b1c_message_new_method_call(&m, NULL, "/", NULL, "Build", "asv"), 0);
	building = m;

	CHECK_EQ(b1c_message_new_method_call(&m, "org.example.Dest", "/", NULL, "Fire", NULL), 0);
	b1c_message_set_no_reply(m, true);
	noreply = m;
}

static void test_bus(void)
{
	struct b1c_message *reply = UNTOUCHED;
	uint32_t serial = 0xdeadbeef;

	REFUSED(b1c_bus_open(NULL, "unix:path=/nonexistent"), -EINVAL);
	REFUSED(b1c_bus_get_unique_name(NULL), NULL);
	REFUSED(b1c_bus_get_fd(NULL), -EINVAL);
	REFUSED(b1c_bus_process(NULL), -EINVAL);
	REFUSED(b1c_bus_wait(NULL, 0), -EINVAL);
	REFUSED(b1c_bus_set_direct(NULL, true), -EINVAL);
	REFUSED(b1c_message_is_direct(NULL), false);

	REFUSED(b1c_bus_send(NULL, call, &serial), -EINVAL);
	REFUSED(b1c_bus_send(bus, NULL, &serial), -EINVAL);
	CHECK_EQ(serial, 0xdeadbeef);

	REFUSED(b1c_bus_call(NULL, call, 0, &reply), -EINVAL);
	REFUSED(b1c_bus_call(bus, NULL, 0, &reply), -EINVAL);
	REFUSED(b1c_bus_call(bus, sig, 0, &reply), -EINVAL);
	REFUSED(b1c_bus_call(bus, noreply, 0, &reply), -EINVAL);
	REFUSED(b1c_bus_call(bus, call, 0, NULL), -EINVAL);
	CHECK(reply == UNTOUCHED);

	REFUSED(b1c_bus_call_async(NULL, call, handler, NULL), -EINVAL);
	REFUSED(b1c_bus_call_async(bus, NULL, handler, NULL), -EINVAL);
	REFUSED(b1c_bus_call_async(bus, sig, handler, NULL), -EINVAL);
	REFUSED(b1c_bus_call_async(bus, noreply, handler, NULL), -EINVAL);
	REFUSED(b1c_bus_call_async(bus, call, NULL, NULL), -EINVAL);

	REFUSED(b1c_bus_add_filter(NULL, handler, NULL), -EINVAL);
	REFUSED(b1c_bus_add_filter(bus, NULL, NULL), -EINVAL);

	REFUSED(b1c_bus_add_object(NULL, "/", handler, NULL), -EINVAL);
	REFUSED(b1c_bus_add_object(bus, "relative/path", handler, NULL), -EINVAL);
	REFUSED(b1c_bus_add_object(bus, "/trailing/", handler, NULL), -EINVAL);
	REFUSED(b1c_bus_add_object(bus, "/", NULL, NULL), -EINVAL);

	REFUSED(b1c_bus_add_match(NULL, "type='signal'", handler, NULL), -EINVAL);
	REFUSED(b1c_bus_add_match(bus, NULL, handler, NULL), -EINVAL);

	REFUSED(b1c_bus_request_name(NULL, "org.example.Name", 0), -EINVAL);
	REFUSED(b1c_bus_request_name(bus, NULL, 0), -EINVAL);
	REFUSED(b1c_bus_request_name(bus, ":1.42", 0), -EINVAL);
	REFUSED(b1c_bus_request_name(bus, "nodots", 0), -EINVAL);

	REFUSED(b1c_bus_emit_signal(NULL, "/", "org.example.Iface", "Changed", "u", 1), -EINVAL);
	REFUSED(b1c_bus_emit_signal(bus, "", "org.example.Iface", "Changed", "u", 1), -EINVAL);
	REFUSED(b1c_bus_emit_signal(bus, "/", NULL, "Changed", "u", 1), -EINVAL);
	REFUSED(b1c_bus_emit_signal(bus, "/", "org.example.Iface", "Not.A.Member", "u", 1),
		-EINVAL);
	REFUSED(b1c_bus_emit_signal(bus, "/", "org.example.Iface", "Changed", "(u)", 1), -EINVAL);

	REFUSED(b1c_bus_reply(NULL, call, "s", "x"), -EINVAL);
	REFUSED(b1c_bus_reply(bus, NULL, "s", "x"), -EINVAL);
	REFUSED(b1c_bus_reply(bus, sig, "s", "x"), -EINVAL);
	REFUSED(b1c_bus_reply(bus, building, "s", "x"), -EINVAL);
	REFUSED(b1c_bus_reply(bus, call, "as", "x"), -EINVAL);

	REFUSED(b1c_bus_reply_error(NULL, call, "org.example.Error", "text"), -EINVAL);
	REFUSED(b1c_bus_reply_error(bus, NULL, "org.example.Error", "text"), -EINVAL);
	REFUSED(b1c_bus_reply_error(bus, sig, "org.example.Error", "text"), -EINVAL);
	REFUSED(b1c_bus_reply_error(bus, call, NULL, "text"), -EINVAL);
	REFUSED(b1c_bus_reply_error(bus, call, "NoDots", "text"), -EINVAL);
	REFUSED(b1c_bus_reply_error(bus, call, "org.example.Error", "\xff\xfe"), -EINVAL);
}

static void test_new(void)
{
	struct b1c_message *out = UNTOUCHED;

	REFUSED(b1c_message_new_method_call(NULL, "org.example.Dest", "/", NULL, "M", NULL),
		-EINVAL);
	REFUSED(b1c_message_new_method_call(&out, "not a name", "/", NULL, "M", NULL), -EINVAL);
	REFUSED(b1c_message_new_method_call(&out, NULL, NULL, NULL, "M", NULL), -EINVAL);
	REFUSED(b1c_message_new_method_call(&out, NULL, "/a//b", NULL, "M", NULL), -EINVAL);
	REFUSED(b1c_message_new_method_call(&out, NULL, "/", "nodots", "M", NULL), -EINVAL);
	REFUSED(b1c_message_new_method_call(&out, NULL, "/", NULL, NULL, NULL), -EINVAL);
	REFUSED(b1c_message_new_method_call(&out, NULL, "/", NULL, "9Member", NULL), -EINVAL);
	REFUSED(b1c_message_new_method_call(&out, NULL, "/", NULL, "M", "(s"), -EINVAL);

	REFUSED(b1c_message_new_signal(NULL, "/", "org.example.Iface", "S", NULL), -EINVAL);
	REFUSED(b1c_message_new_signal(&out, NULL, "org.example.Iface", "S", NULL), -EINVAL);
	REFUSED(b1c_message_new_signal(&out, "/", NULL, "S", NULL), -EINVAL);
	REFUSED(b1c_message_new_signal(&out, "/", "org..Iface", "S", NULL), -EINVAL);
	REFUSED(b1c_message_new_signal(&out, "/", "org.example.Iface", NULL, NULL), -EINVAL);
	REFUSED(b1c_message_new_signal(&out, "/", "org.example.Iface", "S", "a"), -EINVAL);

	REFUSED(b1c_message_new_method_return(NULL, call, NULL), -EINVAL);
	REFUSED(b1c_message_new_method_return(&out, NULL, NULL), -EINVAL);
	REFUSED(b1c_message_new_method_return(&out, sig, NULL), -EINVAL);
	REFUSED(b1c_message_new_method_return(&out, building, NULL), -EINVAL);
	REFUSED(b1c_message_new_method_return(&out, call, "{ss}"), -EINVAL);

	REFUSED(b1c_message_new_error(NULL, call, "org.example.Error", NULL), -EINVAL);
	REFUSED(b1c_message_new_error(&out, NULL, "org.example.Error", NULL), -EINVAL);
	REFUSED(b1c_message_new_error(&out, sig, "org.example.Error", NULL), -EINVAL);
	REFUSED(b1c_message_new_error(&out, building, "org.example.Error", NULL), -EINVAL);
	REFUSED(b1c_message_new_error(&out, call, NULL, NULL), -EINVAL);
	REFUSED(b1c_message_new_error(&out, call, "org.example.", NULL), -EINVAL);
	REFUSED(b1c_message_new_error(&out, call, "org.example.Error", "\xc0\x80"), -EINVAL);

	CHECK(out == UNTOUCHED);
}

static void test_build(void)
{
	REFUSED(b1c_message_append(NULL, "s", "x"), -EINVAL);
	REFUSED(b1c_message_append(building, NULL), -EINVAL);
	REFUSED(b1c_message_append(building, "a"), -EINVAL);
	REFUSED(b1c_message_append(building, "(s)", "x"), -EINVAL);

	REFUSED(b1c_message_open(NULL, 'a', NULL), -EINVAL);
	REFUSED(b1c_message_open(building, 's', NULL), -EINVAL);
	REFUSED(b1c_message_open(building, 'v', NULL), -EINVAL);
	REFUSED(b1c_message_open(building, 'v', "ss"), -EINVAL);

	REFUSED(b1c_message_close(NULL), -EINVAL);

	REFUSED(b1c_message_append_fd(NULL, 0), -EINVAL);
	REFUSED(b1c_message_append_fd(building, -1), -EINVAL);

	REFUSED_VOID(b1c_message_set_no_reply(NULL, true));
}

static void test_read(void)
{
	const char *s = "untouched";

	REFUSED(b1c_message_read(NULL, "s", &s), -EINVAL);
	REFUSED(b1c_message_read(call, NULL), -EINVAL);
	REFUSED(b1c_message_read(call, "v", &s), -EINVAL);
	CHECK_STR(s, "untouched");

	REFUSED(b1c_message_peek(NULL, &s), 0);
	CHECK_STR(s, "untouched");
	REFUSED(b1c_message_enter(NULL, 'a'), -EINVAL);
	REFUSED(b1c_message_enter(call, 's'), -EINVAL);
	REFUSED(b1c_message_exit(NULL), -EINVAL);
	REFUSED(b1c_message_skip(NULL), -EINVAL);
	REFUSED(b1c_message_rewind(NULL), -EINVAL);

	REFUSED(b1c_message_get_type(NULL), -EINVAL);
	REFUSED(b1c_message_get_serial(NULL), 0);
	REFUSED(b1c_message_get_reply_serial(NULL), 0);
	REFUSED(b1c_message_expects_reply(NULL), false);
	REFUSED(b1c_message_get_sender(NULL), NULL);
	REFUSED(b1c_message_get_destination(NULL), NULL);
	REFUSED(b1c_message_get_path(NULL), NULL);
	REFUSED(b1c_message_get_interface(NULL), NULL);
	REFUSED(b1c_message_get_member(NULL), NULL);
	REFUSED(b1c_message_get_error_name(NULL), NULL);
	REFUSED(b1c_message_get_signature(NULL), NULL);
	REFUSED(strcmp(b1c_message_get_error_text(NULL), ""), 0);
	/* a refusal names its check, where it was made and in which function */
	CHECK(strstr(last_refusal, "'m'") && strstr(last_refusal, "b1c-message.c") &&
	      strstr(last_refusal, "b1c_message_get_error_text()"), "%s", last_refusal);
}

/* NULL is no bad argument here: freeing and referencing nothing is nothing. */
static void test_null_allowed(void)
{
	int n = n_refused;

	CHECK(!b1c_bus_free(NULL));
	CHECK(!b1c_message_ref(NULL));
	CHECK(!b1c_message_unref(NULL));
	CHECK_EQ(n_refused, n);
}

/* The checks refuse what is bad only: the same calls with good arguments pass them. */
static void test_good_pass(void)
{
	struct b1c_message *m = NULL;
	int n = n_refused;

	CHECK_EQ(b1c_message_new_method_call(&m, ":1.42", "/org/example", "org.example.Iface",
					     "Method", "asv"), 0);
	/* an array takes its element type from the signature (bus1ctl opens it so) */
	CHECK_EQ(b1c_message_open(m, 'a', NULL), 0);
	CHECK_EQ(b1c_message_close(m), 0);
	CHECK_EQ(b1c_message_open(m, 'v', "s"), 0);
	CHECK_EQ(b1c_message_append(m, "s", "x"), 0);
	CHECK_EQ(b1c_message_close(m), 0);
	CHECK_EQ(b1c_message_get_type(m), B1C_MESSAGE_METHOD_CALL);
	b1c_message_unref(m);

	CHECK_EQ(b1c_message_new_method_return(&m, call, NULL), 0);
	b1c_message_unref(m);
	CHECK_EQ(b1c_message_new_error(&m, call, "org.example.Error", NULL), 0);
	b1c_message_unref(m);
	CHECK_EQ(b1c_message_new_signal(&m, "/", "org.example.Iface", "S", ""), 0);
	b1c_message_unref(m);

	{
		const char *s = NULL;

		CHECK_EQ(b1c_message_read(call, "s", &s), 0);
		CHECK_STR(s, "hello");
	}
	CHECK_EQ(n_refused, n);
}

int main(void)
{
	error_set_assert_log(on_refusal, NULL);
	setup();
	test_bus();
	test_new();
	test_build();
	test_read();
	test_null_allowed();
	test_good_pass();
	for (size_t i = 0; i < ARRAY_SIZE(msgs); i++)
		b1c_message_unref(*msgs[i]);
	b1c_bus_free(bus);
	printf("client-args: ok\n");
	return 0;
}
