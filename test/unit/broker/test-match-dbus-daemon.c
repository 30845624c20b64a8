/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Differential test against the real dbus-daemon: receivers install the same
 * random match rules on a private dbus-daemon (libdbus clients) and in a
 * match registry; random broadcast and unicast signals and method calls are
 * sent, and the set of connections dbus-daemon delivers each one to must be
 * exactly the registry's result plus the addressed recipient.
 */

#include "broker/objects/match.h"
#include "broker/objects/name.h"
#include "daemon.h"
#include "random-rule.h"

#define N_RECV 6
#define N_RULES 5

struct conn {
	DBusConnection *dc;
	struct name_owner names;
	struct match_owner rules;
};

static struct conn sender, recv_[N_RECV];
static struct name_registry *nreg;
static struct match_registry *mreg;
static const char *addr;
static char last_msg[512];
static unsigned int last_target;

static const char *v_sender[8];
static const struct random_rule_odds odds = {
	.other_type = 3, .destination = 3, .eavesdrop = 3, .eavesdrop_false = 4, .max_argn = 2,
};

static void conn_open(struct conn *c)
{
	const char *u;

	c->dc = daemon_connect(addr);
	u = dbus_bus_get_unique_name(c->dc);
	CHECK(u && strncmp(u, ":1.", 3) == 0);
	name_owner_init(&c->names, strtoull(u + 3, NULL, 10));
	CHECK_EQ(name_registry_add_unique(nreg, &c->names), 0);
	match_owner_init(&c->rules, &c->names);
}

static void conn_close(struct conn *c)
{
	dbus_connection_close(c->dc);
	dbus_connection_unref(c->dc);
	match_owner_deinit(&c->rules);
	name_registry_remove_unique(nreg, &c->names);
	name_owner_deinit(&c->names);
}

static void request(struct conn *c, const char *name, uint32_t expect)
{
	DBusError err = DBUS_ERROR_INIT;
	uint32_t reply = 0;

	CHECK_EQ(dbus_bus_request_name(c->dc, name, 0, &err), (int)expect);
	CHECK_EQ(name_registry_request(nreg, &c->names, name, 0, &reply), 0);
	CHECK_EQ(reply, expect);
}

/* Send one random message; return which receivers must get it (bitmask). */
static unsigned int send_random(struct conn *from, dbus_uint32_t *serialp)
{
	struct match_message mm = {};
	struct list_node result;
	struct match_owner *o;
	DBusMessage *m;
	const char *dest = NULL;
	struct conn *target = NULL;
	unsigned int expect = 0;
	int kind = rand() % 4;
	const char *path = PICK(v_path), *iface = PICK(v_iface), *member = PICK(v_member);
	int n_args = rand() % 4;
	int d = rand() % (N_RECV + 3);

	/*
	 * dbus-daemon shows a call to itself to eavesdroppers only if it handled
	 * it without error (that is routing, not matching): call a real method.
	 */
	if (kind >= 2 && d == N_RECV + 2) {
		iface = "org.freedesktop.DBus";
		member = "GetId";
		n_args = 0;
	}
	if (kind == 0 || kind == 1) {
		m = dbus_message_new_signal(path, iface, member);
		mm.type = MATCH_TYPE_SIGNAL;
	} else {
		m = dbus_message_new_method_call(NULL, path,
						 rand() % 3 || member[0] == 'G' ? iface : NULL,
						 member);
		dbus_message_set_no_reply(m, TRUE);
		mm.type = MATCH_TYPE_METHOD_CALL;
		if (!dbus_message_get_interface(m))
			iface = NULL;
	}
	CHECK(m);
	if (kind != 0) {
		/* Unicast: to a receiver by unique or well-known name, or the driver. */
		if (d < N_RECV) {
			target = &recv_[d];
			dest = target->names.unique_name;
		} else if (d == N_RECV) {
			target = &recv_[1];
			dest = "com.b";
		} else if (d == N_RECV + 1) {
			target = &recv_[0];
			dest = "com.c";
		} else if (kind >= 2) {
			dest = "org.freedesktop.DBus";
		} else {
			target = &recv_[2];
			dest = target->names.unique_name;
		}
		CHECK(dbus_message_set_destination(m, dest));
	}
	for (int i = 0; i < n_args; i++) {
		int t = rand() % 3;

		if (t == 0) {
			const char *s = PICK(v_arg);

			CHECK(dbus_message_append_args(m, DBUS_TYPE_STRING, &s, DBUS_TYPE_INVALID));
			mm.arg_types[i] = 's';
			mm.args[i] = s;
		} else if (t == 1) {
			const char *s = PICK(v_path);

			CHECK(dbus_message_append_args(m, DBUS_TYPE_OBJECT_PATH, &s,
						       DBUS_TYPE_INVALID));
			mm.arg_types[i] = 'o';
			mm.args[i] = s;
		} else {
			dbus_uint32_t u = 7;

			CHECK(dbus_message_append_args(m, DBUS_TYPE_UINT32, &u, DBUS_TYPE_INVALID));
			mm.arg_types[i] = 'u';
		}
	}
	mm.n_args = n_args;
	mm.sender = &from->names;
	mm.destination = dest;
	mm.recipient_names = target ? &target->names : NULL;
	mm.recipient = target ? &target->rules : NULL;
	mm.path = path;
	mm.interface = iface;
	mm.member = member;

	snprintf(last_msg, sizeof(last_msg), "type %d dest %s path %s iface %s member %s args %d",
		 mm.type, dest ? dest : "-", path, iface ? iface : "-", member, n_args);
	CHECK(dbus_connection_send(from->dc, m, serialp));
	dbus_connection_flush(from->dc);
	dbus_message_unref(m);

	match_registry_match(mreg, &mm, &result);
	list_for_each_entry(o, &result, result_link)
		expect |= 1u << (container_of(o, struct conn, rules) - recv_);
	last_target = target ? 1u << (target - recv_) : 0;
	return expect | last_target;
}

static unsigned int delivered(struct conn *from, dbus_uint32_t serial)
{
	unsigned int got = 0;

	roundtrip(from->dc);
	for (int i = 0; i < N_RECV; i++) {
		DBusMessage *m;

		roundtrip(recv_[i].dc);
		while ((m = dbus_connection_pop_message(recv_[i].dc))) {
			const char *s = dbus_message_get_sender(m);

			if (s && strcmp(s, from->names.unique_name) == 0 &&
			    dbus_message_get_serial(m) == serial) {
				CHECK(!(got & (1u << i))); /* once */
				got |= 1u << i;
			}
			dbus_message_unref(m);
		}
	}
	return got;
}

static void dump_rules(void)
{
	char text[512];

	for (int i = 0; i < N_RECV; i++) {
		struct match_rule *r;

		list_for_each_entry(r, &recv_[i].rules.rules, owner_link) {
			CHECK_EQ(match_rule_to_string(r, text, sizeof(text)), 0);
			fprintf(stderr, "  %d %s: %s\n", i, recv_[i].names.unique_name, text);
		}
	}
}

int main(int argc, char **argv)
{
	unsigned int seed = argc > 1 ? (unsigned int)atoi(argv[1]) : 777;
	size_t n_delivered = 0, n_msgs = 0, n_by_rule = 0;
	char text[512];

	srand(seed);
	addr = daemon_start();
	CHECK_EQ(name_registry_new(&nreg, NULL, NULL), 0);
	CHECK_EQ(match_registry_new(&mreg), 0);
	conn_open(&sender);
	for (int i = 0; i < N_RECV; i++)
		conn_open(&recv_[i]);
	request(&sender, "com.a", DBUS_REQUEST_NAME_REPLY_PRIMARY_OWNER);
	request(&recv_[0], "com.c", DBUS_REQUEST_NAME_REPLY_PRIMARY_OWNER);
	request(&sender, "com.c", DBUS_REQUEST_NAME_REPLY_IN_QUEUE);
	request(&recv_[1], "com.b", DBUS_REQUEST_NAME_REPLY_PRIMARY_OWNER);

	v_sender[0] = sender.names.unique_name;
	v_sender[1] = recv_[0].names.unique_name;
	v_sender[2] = recv_[1].names.unique_name;
	v_sender[3] = recv_[2].names.unique_name;
	v_sender[4] = "com.a";
	v_sender[5] = "com.b";
	v_sender[6] = "com.c";
	v_sender[7] = "org.freedesktop.DBus";

	for (int round = 0; round < 10; round++) {
		/* Fresh random rules for everyone. */
		for (int i = 0; i < N_RECV; i++) {
			while (recv_[i].rules.n_rules) {
				struct match_rule *r = list_entry(recv_[i].rules.rules.next,
								  struct match_rule, owner_link);
				DBusError err = DBUS_ERROR_INIT;
				DBusMessage *reply;

				CHECK_EQ(match_rule_to_string(r, text, sizeof(text)), 0);
				reply = driver_call(recv_[i].dc, "RemoveMatch", text, &err);
				CHECK(reply);
				dbus_message_unref(reply);
				match_registry_remove(r);
			}
			for (int k = 0; k < N_RULES; k++) {
				random_rule(text, sizeof(text), v_sender, NELEM(v_sender), &odds);
				add_match(recv_[i].dc, text);
				CHECK_EQ(match_registry_add_text(mreg, &recv_[i].rules, text,
								 NULL), 0);
			}
			roundtrip(recv_[i].dc);
			for (DBusMessage *m; (m = dbus_connection_pop_message(recv_[i].dc));)
				dbus_message_unref(m);
		}
		for (int k = 0; k < 60; k++) {
			struct conn *from = rand() % 4 ? &sender : &recv_[2];
			dbus_uint32_t serial = 0;
			unsigned int expect = send_random(from, &serial);
			unsigned int got = delivered(from, serial);

			if (got != expect) {
				fprintf(stderr, "seed %u round %d msg %d from %s: dbus-daemon delivered "
						"to %#x, broker-core says %#x\n", seed, round, k,
					from->names.unique_name, got, expect);
				fprintf(stderr, "  message: %s\n", last_msg);
				dump_rules();
				CHECK(got == expect);
			}
			n_msgs++;
			n_delivered += __builtin_popcount(got);
			n_by_rule += __builtin_popcount(got & ~last_target);
		}
	}
	/* Meaningful only if rules (not just routing) deliver a fair share. */
	CHECK(n_by_rule > n_msgs / 10);
	printf("match-dbus-daemon: %zu messages, %zu deliveries (%zu by match rules) identical "
	       "(seed %u)\n", n_msgs, n_delivered, n_by_rule, seed);

	conn_close(&sender);
	for (int i = 0; i < N_RECV; i++)
		conn_close(&recv_[i]);
	match_registry_free(mreg);
	name_registry_free(nreg);
	return 0;
}
