/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Differential test against the real dbus-daemon: random RequestName,
 * ReleaseName and disconnects are applied to a private dbus-daemon (libdbus
 * clients) and to the name registry. After every step the reply codes, every
 * name's ListQueuedOwners, and each connection's sequence of NameAcquired,
 * NameLost and NameOwnerChanged signals must be identical.
 */

#include "broker/objects/name.h"
#include "daemon.h"

#define N_CONN 4
#define LOG_SIZE 16384

static const char *const names[] = { "com.t.A", "com.t.B", "com.t.C" };

struct conn {
	DBusConnection *dc;
	struct name_owner owner;
	bool logging;
	char real[LOG_SIZE];
	char mine[LOG_SIZE];
};

static struct conn conns[N_CONN];
static struct name_registry *reg;
static const char *addr;

static void log_append(char *log, const char *s)
{
	size_t n = strlen(log);

	CHECK(n + strlen(s) + 2 < LOG_SIZE);
	snprintf(log + n, LOG_SIZE - n, "%s%s", n ? " " : "", s);
}

static void on_event(void *userdata, const struct name_event *ev)
{
	char one[512];

	switch (ev->type) {
	case NAME_EVENT_OWNER_CHANGED:
		snprintf(one, sizeof(one), "OC(%s,%s,%s)", ev->name,
			 ev->old_owner ? ev->old_owner->unique_name : "",
			 ev->new_owner ? ev->new_owner->unique_name : "");
		for (int i = 0; i < N_CONN; i++)
			if (conns[i].logging)
				log_append(conns[i].mine, one);
		break;
	case NAME_EVENT_LOST:
	case NAME_EVENT_ACQUIRED: {
		struct name_owner *o = ev->type == NAME_EVENT_LOST ? ev->old_owner : ev->new_owner;
		struct conn *c = container_of(o, struct conn, owner);

		snprintf(one, sizeof(one), "%s(%s)", ev->type == NAME_EVENT_LOST ? "LOST" : "ACQ",
			 ev->name);
		if (c->logging)
			log_append(c->mine, one);
		break;
	}
	}
}

/* Pop everything @c received and log the name signals. */
static void drain(struct conn *c)
{
	DBusMessage *m;

	if (!c->dc)
		return;
	roundtrip(c->dc);
	while ((m = dbus_connection_pop_message(c->dc))) {
		const char *a = NULL, *b = NULL, *d = NULL;
		char one[512];

		if (dbus_message_get_type(m) == DBUS_MESSAGE_TYPE_SIGNAL &&
		    strcmp(dbus_message_get_sender(m), "org.freedesktop.DBus") == 0) {
			const char *member = dbus_message_get_member(m);

			if (strcmp(member, "NameOwnerChanged") == 0) {
				CHECK(dbus_message_get_args(m, NULL, DBUS_TYPE_STRING, &a,
							    DBUS_TYPE_STRING, &b, DBUS_TYPE_STRING,
							    &d, DBUS_TYPE_INVALID));
				snprintf(one, sizeof(one), "OC(%s,%s,%s)", a, b, d);
			} else {
				CHECK(dbus_message_get_args(m, NULL, DBUS_TYPE_STRING, &a,
							    DBUS_TYPE_INVALID));
				snprintf(one, sizeof(one), "%s(%s)",
					 strcmp(member, "NameLost") == 0 ? "LOST" : "ACQ", a);
			}
			if (c->logging)
				log_append(c->real, one);
		}
		dbus_message_unref(m);
	}
}

static void conn_open(struct conn *c)
{
	const char *u;

	c->dc = daemon_connect(addr);
	u = dbus_bus_get_unique_name(c->dc);
	CHECK(u && strncmp(u, ":1.", 3) == 0);
	name_owner_init(&c->owner, strtoull(u + 3, NULL, 10));
	CHECK_STR(c->owner.unique_name, u);
	CHECK_EQ(name_registry_add_unique(reg, &c->owner), 0);
	add_match(c->dc, "type='signal',sender='org.freedesktop.DBus',"
			 "interface='org.freedesktop.DBus',member='NameOwnerChanged'");
	drain(c);
	c->real[0] = c->mine[0] = '\0';
	c->logging = true;
}

static void conn_close(struct conn *c, struct conn *observer)
{
	char unique[NAME_UNIQUE_MAX];

	snprintf(unique, sizeof(unique), "%s", c->owner.unique_name);
	c->logging = false;
	dbus_connection_close(c->dc);
	dbus_connection_unref(c->dc);
	c->dc = NULL;
	/* Wait until the daemon has processed the disconnect. */
	for (int tries = 0;; tries++) {
		DBusError err = DBUS_ERROR_INIT;
		DBusMessage *r = driver_call(observer->dc, "NameHasOwner", unique, &err);
		dbus_bool_t has = TRUE;

		CHECK(r);
		CHECK(dbus_message_get_args(r, NULL, DBUS_TYPE_BOOLEAN, &has, DBUS_TYPE_INVALID));
		dbus_message_unref(r);
		if (!has)
			break;
		CHECK(tries < 1000);
		usleep(2000);
	}
	name_registry_remove_unique(reg, &c->owner);
	name_owner_deinit(&c->owner);
}

static const char *real_queue(DBusConnection *dc, const char *name)
{
	static char buf[1024];
	DBusError err = DBUS_ERROR_INIT;
	DBusMessage *r = driver_call(dc, "ListQueuedOwners", name, &err);
	char **v = NULL;
	int n = 0;
	size_t len = 0;

	buf[0] = '\0';
	if (!r) {
		CHECK_STR(err.name, "org.freedesktop.DBus.Error.NameHasNoOwner");
		dbus_error_free(&err);
		return buf;
	}
	CHECK(dbus_message_get_args(r, NULL, DBUS_TYPE_ARRAY, DBUS_TYPE_STRING, &v, &n,
				    DBUS_TYPE_INVALID));
	for (int i = 0; i < n; i++)
		len += snprintf(buf + len, sizeof(buf) - len, "%s%s", i ? " " : "", v[i]);
	dbus_free_string_array(v);
	dbus_message_unref(r);
	return buf;
}

static const char *my_queue(const char *str)
{
	static char buf[1024];
	struct name *name = name_registry_find(reg, str);
	struct name_ownership *o;
	size_t len = 0;

	buf[0] = '\0';
	if (!name)
		return buf;
	list_for_each_entry(o, &name->queue, name_link)
		len += snprintf(buf + len, sizeof(buf) - len, "%s%s", len ? " " : "",
				o->owner->unique_name);
	return buf;
}

static uint32_t real_call_u(DBusConnection *dc, const char *method, const char *name,
			    uint32_t flags)
{
	DBusMessage *m = dbus_message_new_method_call("org.freedesktop.DBus",
						      "/org/freedesktop/DBus",
						      "org.freedesktop.DBus", method);
	DBusError err = DBUS_ERROR_INIT;
	DBusMessage *r;
	uint32_t v = 0;

	CHECK(m);
	if (strcmp(method, "RequestName") == 0)
		CHECK(dbus_message_append_args(m, DBUS_TYPE_STRING, &name, DBUS_TYPE_UINT32,
					       &flags, DBUS_TYPE_INVALID));
	else
		CHECK(dbus_message_append_args(m, DBUS_TYPE_STRING, &name, DBUS_TYPE_INVALID));
	r = dbus_connection_send_with_reply_and_block(dc, m, 10000, &err);
	dbus_message_unref(m);
	CHECK(r);
	CHECK(dbus_message_get_args(r, NULL, DBUS_TYPE_UINT32, &v, DBUS_TYPE_INVALID));
	dbus_message_unref(r);
	return v;
}

static void compare(int step, const char *what)
{
	for (int i = 0; i < N_CONN; i++) {
		drain(&conns[i]);
		if (strcmp(conns[i].real, conns[i].mine) != 0) {
			fprintf(stderr, "step %d (%s): signals to %s differ\n dbus-daemon: %s\n "
					"broker-core: %s\n", step, what, conns[i].owner.unique_name,
				conns[i].real, conns[i].mine);
			CHECK(!"signals differ");
		}
		conns[i].real[0] = conns[i].mine[0] = '\0';
	}
	for (size_t j = 0; j < sizeof(names) / sizeof(names[0]); j++) {
		DBusConnection *dc = conns[0].dc ? conns[0].dc : conns[1].dc;
		char real[1024];

		snprintf(real, sizeof(real), "%s", real_queue(dc, names[j]));
		if (strcmp(real, my_queue(names[j])) != 0) {
			fprintf(stderr, "step %d (%s): queue of %s: dbus-daemon \"%s\", "
					"broker-core \"%s\"\n", step, what, names[j], real,
				my_queue(names[j]));
			CHECK(!"queues differ");
		}
	}
}

int main(int argc, char **argv)
{
	unsigned int seed = argc > 1 ? (unsigned int)atoi(argv[1]) : 4242;
	size_t n_events = 0;

	srand(seed);
	addr = daemon_start();
	CHECK_EQ(name_registry_new(&reg, on_event, NULL), 0);
	for (int i = 0; i < N_CONN; i++) {
		conn_open(&conns[i]);
		/* Earlier connections saw this one's Hello on both sides. */
		compare(-1, "connect");
	}

	for (int step = 0; step < 600; step++) {
		int r = rand() % 100, i = rand() % N_CONN;
		const char *n = names[rand() % 3];
		char what[128];

		if (r < 60) {
			uint32_t flags = rand() % 8, mine = 0, real;

			snprintf(what, sizeof(what), "%s RequestName(%s, %u)",
				 conns[i].owner.unique_name, n, flags);
			real = real_call_u(conns[i].dc, "RequestName", n, flags);
			CHECK_EQ(name_registry_request(reg, &conns[i].owner, n, flags, &mine),
				 0);
			if (real != mine) {
				fprintf(stderr, "step %d %s: dbus-daemon %u, broker-core %u\n", step,
					what, real, mine);
				CHECK(real == mine);
			}
		} else if (r < 90) {
			uint32_t mine = 0, real;

			snprintf(what, sizeof(what), "%s ReleaseName(%s)",
				 conns[i].owner.unique_name, n);
			real = real_call_u(conns[i].dc, "ReleaseName", n, 0);
			CHECK_EQ(name_registry_release(reg, &conns[i].owner, n, &mine), 0);
			CHECK_EQ(real, mine);
		} else {
			snprintf(what, sizeof(what), "disconnect %s", conns[i].owner.unique_name);
			conn_close(&conns[i], &conns[(i + 1) % N_CONN]);
			compare(step, what);
			conn_open(&conns[i]);
			snprintf(what, sizeof(what), "connect %s", conns[i].owner.unique_name);
		}
		for (int k = 0; k < N_CONN; k++)
			n_events += strlen(conns[k].mine) > 0;
		compare(step, what);
	}
	CHECK(n_events > 100);
	printf("name-dbus-daemon: 600 steps identical (seed %u)\n", seed);

	for (int i = 0; i < N_CONN; i++) {
		dbus_connection_close(conns[i].dc);
		dbus_connection_unref(conns[i].dc);
		name_registry_remove_unique(reg, &conns[i].owner);
		name_owner_deinit(&conns[i].owner);
	}
	name_registry_free(reg);
	return 0;
}
