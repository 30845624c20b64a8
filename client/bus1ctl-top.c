/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * bus1ctl top: what the bus holds, per uid and per connection, from the
 * driver's Debug.Stats (GetStats, GetUserStats, ListConnectionStats; see
 * bus1-broker(1), STATISTICS). It talks plain D-Bus over the bus socket, so
 * it works with or without bus1.ko: the statistics are the broker's. Below
 * them, what bus1.ko holds per uid when it is loaded (bus1ctl-top-kernel.c).
 */

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "bus1ctl-top.h"
#include "bus1ctl-top-kernel.h"
#include "dbus-compat/address.h"
#include "dbus-compat/marshal.h"
#include "dbus-compat/message.h"
#include "dbus-compat/protocol.h"
#include "dbus-compat/sasl-client.h"
#include "util/macro.h"

#define STATS_IFACE "org.freedesktop.DBus.Debug.Stats"
#define TOP_MAX_MESSAGE (16U * 1024 * 1024)

struct top_bus {
	int fd;
	uint32_t serial;
};

/*
 * Call @member of the driver (@iface) with @sig and its arguments; the
 * reply's message in *@replyp. Signals on the way (NameAcquired) are
 * dropped. 0, 1 for an error reply (printed), or negative errno.
 */
static int top_call(struct top_bus *bus, const char *iface, const char *member,
		    struct message **replyp, const char *sig, ...)
{
	struct message_builder b;
	struct message *call = NULL;
	uint32_t serial = ++bus->serial;
	va_list ap;
	int r;

	message_builder_init_method_call(&b, DC_SERVICE_DBUS, DC_PATH_DBUS, iface, member,
					 sig ? sig : "");
	if (sig && *sig) {
		va_start(ap, sig);
		r = dc_writer_writev(&b.body, sig, ap);
		va_end(ap);
		if (r < 0) {
			message_builder_deinit(&b);
			return r;
		}
	}
	r = message_builder_seal(&b, serial, &call);
	message_builder_deinit(&b);
	if (r < 0)
		return r;
	r = message_write_blocking(bus->fd, call);
	message_unref(call);
	if (r < 0)
		return r;
	for (;;) {
		struct message *m = NULL;

		r = message_read_blocking(bus->fd, TOP_MAX_MESSAGE, &m);
		if (r < 0)
			return r;
		if (m->reply_serial != serial) {
			message_unref(m);
			continue;
		}
		if (m->type == DC_MESSAGE_ERROR) {
			fprintf(stderr, "bus1ctl: %s: %s\n", member,
				m->error_name ? m->error_name : "error");
			message_unref(m);
			return 1;
		}
		*replyp = m;
		return 0;
	}
}

static int top_open(struct top_bus *bus, const char *address)
{
	struct address_list list = {};
	struct message *reply = NULL;
	bool fds = false;
	int r;

	bus->fd = -1;
	if (address_list_parse(&list, address, NULL))
		return -EINVAL;
	r = -ECONNREFUSED;
	for (size_t i = 0; i < list.n_entries && r; i++) {
		r = address_connect(&list.entries[i], &bus->fd);
		if (r > 0)
			r = -EINVAL;
	}
	address_list_deinit(&list);
	if (r < 0)
		return r;
	r = sasl_client_authenticate(bus->fd, getuid(), false, &fds);
	if (r)
		return r < 0 ? r : -ECONNREFUSED;
	r = top_call(bus, DC_INTERFACE_DBUS, "Hello", &reply, NULL);
	if (r == 0)
		message_unref(reply);
	return r ? (r < 0 ? r : -EPROTO) : 0;
}

/* ------------------------------------------------------------- a{sv} */

/* One value of an a{sv}: numbers as uint64, booleans 0/1, strings kept. */
struct top_value {
	char key[40];
	uint64_t u;
	const char *s;
};

#define TOP_MAX_VALUES 64

struct top_dict {
	struct top_value v[TOP_MAX_VALUES];
	size_t n;
};

static uint64_t dict_u(const struct top_dict *d, const char *key)
{
	for (size_t i = 0; i < d->n; i++)
		if (!strcmp(d->v[i].key, key))
			return d->v[i].u;
	return 0;
}

static const char *dict_s(const struct top_dict *d, const char *key)
{
	for (size_t i = 0; i < d->n; i++)
		if (!strcmp(d->v[i].key, key))
			return d->v[i].s ? d->v[i].s : "";
	return "";
}

/* Read an a{sv} at @r into @d (unknown types skipped). */
static int read_dict(struct dc_reader *r, struct top_dict *d)
{
	int e;

	d->n = 0;
	e = dc_reader_enter(r, 'a');
	while (!e && dc_reader_peek(r) == '{') {
		struct top_value v = {};
		const char *key;
		char t;

		e = dc_reader_enter(r, '{');
		if (!e)
			e = dc_reader_read(r, "s", &key);
		if (!e)
			e = dc_reader_enter(r, 'v');
		if (e)
			break;
		snprintf(v.key, sizeof(v.key), "%s", key);
		t = dc_reader_peek(r);
		switch (t) {
		case 'u': {
			uint32_t x;

			e = dc_reader_read(r, "u", &x);
			v.u = x;
			break;
		}
		case 't':
			e = dc_reader_read(r, "t", &v.u);
			break;
		case 'b': {
			bool x;

			e = dc_reader_read(r, "b", &x);
			v.u = x;
			break;
		}
		case 's':
			e = dc_reader_read(r, "s", &v.s);
			break;
		default:
			e = dc_reader_skip(r);
			break;
		}
		if (!e)
			e = dc_reader_exit(r);
		if (!e)
			e = dc_reader_exit(r);
		if (!e && d->n < TOP_MAX_VALUES)
			d->v[d->n++] = v;
	}
	if (!e)
		e = dc_reader_exit(r);
	return e ? -EBADMSG : 0;
}

/* ------------------------------------------------------------- snapshot */

struct top_conn {
	char name[32];
	struct top_dict d;
};

struct top_snapshot {
	struct top_dict bus;
	struct top_conn *conns;
	size_t n_conns;
	uint32_t *uids;
	struct top_dict *users;
	size_t n_users;
	struct message *keep[4096];	/* replies whose strings the dicts point into */
	size_t n_keep;
};

static void snapshot_free(struct top_snapshot *s)
{
	for (size_t i = 0; i < s->n_keep; i++)
		message_unref(s->keep[i]);
	free(s->conns);
	free(s->uids);
	free(s->users);
	memset(s, 0, sizeof(*s));
}

static int snapshot_keep(struct top_snapshot *s, struct message *m, struct dc_reader *r)
{
	if (s->n_keep == ARRAY_SIZE(s->keep)) {
		message_unref(m);
		return -E2BIG;
	}
	s->keep[s->n_keep++] = m;
	return message_get_body_reader(m, r) ? -EBADMSG : 0;
}

static int snapshot_take(struct top_bus *bus, struct top_snapshot *s)
{
	struct message *m = NULL;
	struct dc_reader r;
	uint32_t start = 0;
	int e;

	e = top_call(bus, STATS_IFACE, "GetStats", &m, NULL);
	if (e)
		return e < 0 ? e : -EPROTO;
	e = snapshot_keep(s, m, &r);
	if (!e)
		e = read_dict(&r, &s->bus);
	if (e)
		return e;

	e = top_call(bus, STATS_IFACE, "GetUserStats", &m, NULL);
	if (e)
		return e < 0 ? e : -EPROTO;
	e = snapshot_keep(s, m, &r);
	if (!e)
		e = dc_reader_enter(&r, 'a') ? -EBADMSG : 0;
	while (!e && dc_reader_peek(&r) == '(') {
		void *p = reallocarray(s->users, s->n_users + 1, sizeof(*s->users));
		void *q = p ? reallocarray(s->uids, s->n_users + 1, sizeof(*s->uids)) : NULL;

		if (p)
			s->users = p;
		if (!q)
			return -ENOMEM;
		s->uids = q;
		if (dc_reader_enter(&r, '(') || dc_reader_read(&r, "u", &s->uids[s->n_users]))
			return -EBADMSG;
		e = read_dict(&r, &s->users[s->n_users]);
		if (!e)
			e = dc_reader_exit(&r) ? -EBADMSG : 0;
		s->n_users++;
	}
	if (e)
		return e;

	/* Page by page: each call costs the bus a bounded time. */
	do {
		uint32_t next = 0;

		e = top_call(bus, STATS_IFACE, "ListConnectionStats", &m, "uu", start, 256U);
		if (e)
			return e < 0 ? e : -EPROTO;
		e = snapshot_keep(s, m, &r);
		if (!e && (dc_reader_read(&r, "u", &next) || dc_reader_enter(&r, 'a')))
			e = -EBADMSG;
		while (!e && dc_reader_peek(&r) == '(') {
			struct top_conn *c;
			const char *name;
			void *p = reallocarray(s->conns, s->n_conns + 1, sizeof(*s->conns));

			if (!p)
				return -ENOMEM;
			s->conns = p;
			c = &s->conns[s->n_conns];
			if (dc_reader_enter(&r, '(') || dc_reader_read(&r, "s", &name))
				return -EBADMSG;
			snprintf(c->name, sizeof(c->name), "%s", name);
			e = read_dict(&r, &c->d);
			if (!e)
				e = dc_reader_exit(&r) ? -EBADMSG : 0;
			s->n_conns++;
		}
		start = next;
	} while (!e && start);
	return e;
}

/* ------------------------------------------------------------- printing */

const char *top_human(uint64_t v, char *buf, size_t n)
{
	if (v >= 10ULL << 30)
		snprintf(buf, n, "%" PRIu64 "G", v >> 30);
	else if (v >= 10ULL << 20)
		snprintf(buf, n, "%" PRIu64 "M", v >> 20);
	else if (v >= 10ULL << 10)
		snprintf(buf, n, "%" PRIu64 "K", v >> 10);
	else
		snprintf(buf, n, "%" PRIu64, v);
	return buf;
}

/* A count in 7 characters (below 10^15): thousands (K), then millions (M). */
static const char *count_short(uint64_t v, char *buf, size_t n)
{
	if (v >= 1000000000ULL)
		snprintf(buf, n, "%" PRIu64 "M", v / 1000000);
	else if (v >= 10000000)
		snprintf(buf, n, "%" PRIu64 "K", v / 1000);
	else
		snprintf(buf, n, "%" PRIu64, v);
	return buf;
}

/* What the bus refused of a connection, a uid or all: for limits and by policy. */
static uint64_t refused(const struct top_dict *d)
{
	return dict_u(d, "RefusedLimits") + dict_u(d, "RefusedPolicy");
}

static int cmp_conn(const void *a, const void *b)
{
	const struct top_conn *x = a, *y = b;
	uint64_t vx = dict_u(&x->d, "OutgoingBytes") + dict_u(&x->d, "AnswerBytes");
	uint64_t vy = dict_u(&y->d, "OutgoingBytes") + dict_u(&y->d, "AnswerBytes");

	return vx < vy ? 1 : vx > vy ? -1 : strcmp(x->name, y->name);
}

/*
 * The bus line: its connections, rules and names, and what it refused (with
 * *@since: how many more than at the previous refresh), dropped,
 * disconnected and left out of its log, those three only when any.
 */
static void print_bus_line(const struct top_dict *d, const uint64_t *since)
{
	uint64_t dropped = dict_u(d, "DroppedMessages");
	uint64_t disconnected = dict_u(d, "QueueFullDisconnects");
	uint64_t suppressed = dict_u(d, "LogLinesSuppressed");

	printf("bus: %" PRIu64 " connections (%" PRIu64 " incomplete), %" PRIu64
	       " match rules, %" PRIu64 " names; %" PRIu64 " refused (%" PRIu64 " limits, %"
	       PRIu64 " policy)", dict_u(d, "ActiveConnections"),
	       dict_u(d, "IncompleteConnections"), dict_u(d, "MatchRules"),
	       dict_u(d, "BusNames"), refused(d), dict_u(d, "RefusedLimits"),
	       dict_u(d, "RefusedPolicy"));
	/* A bus restarted since: its counts began again. */
	if (since)
		printf(" +%" PRIu64, refused(d) >= *since ? refused(d) - *since : refused(d));
	if (dropped)
		printf(", %" PRIu64 " dropped", dropped);
	if (disconnected)
		printf(", %" PRIu64 " disconnected with a full queue", disconnected);
	if (suppressed)
		printf(", %" PRIu64 " log lines left out", suppressed);
	printf("\n\n");
}

static void snapshot_print(struct top_snapshot *s, size_t max_rows, const uint64_t *since)
{
	char b1[16], b2[16], b3[16];

	print_bus_line(&s->bus, since);

	printf("%-8s %6s %9s %9s %6s %7s %7s %7s %6s %6s %7s  %s\n", "UID", "CONNS", "BYTES",
	       "MAXBYTES", "FDS", "MATCHES", "NAMES", "PENDING", "ACTORS", "ACTIV", "REFUSED",
	       "CLOSEST");
	for (size_t i = 0; i < s->n_users; i++) {
		const struct top_dict *d = &s->users[i];

		printf("%-8" PRIu32 " %6" PRIu64 " %9s %9s %6" PRIu64 " %7" PRIu64 " %7" PRIu64
		       " %7" PRIu64 " %6" PRIu64 " %6" PRIu64 " %7s  %s %" PRIu64 "%%\n",
		       s->uids[i], dict_u(d, "Connections"),
		       top_human(dict_u(d, "Bytes"), b1, sizeof(b1)),
		       top_human(dict_u(d, "MaxBytes"), b2, sizeof(b2)), dict_u(d, "FDs"),
		       dict_u(d, "MatchRules"), dict_u(d, "BusNames"),
		       dict_u(d, "PendingReplies"), dict_u(d, "Actors"),
		       dict_u(d, "ActivationMessages"), count_short(refused(d), b3, sizeof(b3)),
		       dict_s(d, "ClosestQuota"), dict_u(d, "ClosestQuotaPercent"));
	}

	qsort(s->conns, s->n_conns, sizeof(*s->conns), cmp_conn);
	printf("\n%-12s %-6s %-8s %7s %6s %6s %7s %7s %5s %7s %5s %7s %s\n", "CONNECTION",
	       "UID", "PID", "OUT", "OUTMSG", "OUTFD", "ANSWERS", "MATCHES", "NAMES", "PENDING",
	       "ACTIV", "REFUSED", "STATE");
	for (size_t i = 0; i < s->n_conns && i < max_rows; i++) {
		const struct top_dict *d = &s->conns[i].d;
		char b4[16];

		printf("%-12s %-6" PRIu64 " %-8" PRIu64 " %7s %6" PRIu64 " %6" PRIu64 " %7s %7"
		       PRIu64 " %5" PRIu64 " %7" PRIu64 " %5" PRIu64 " %7s %s\n",
		       s->conns[i].name, dict_u(d, "UnixUserID"), dict_u(d, "ProcessID"),
		       top_human(dict_u(d, "OutgoingBytes"), b1, sizeof(b1)),
		       dict_u(d, "OutgoingMessages"), dict_u(d, "OutgoingFDs"),
		       top_human(dict_u(d, "AnswerBytes"), b3, sizeof(b3)), dict_u(d, "MatchRules"),
		       dict_u(d, "BusNames"), dict_u(d, "PendingReplies"),
		       dict_u(d, "ActivationMessages"), count_short(refused(d), b4, sizeof(b4)),
		       dict_u(d, "InputPaused") ? "paused" : "-");
	}
	if (s->n_conns > max_rows)
		printf("(%zu more)\n", s->n_conns - max_rows);
}

int bus1ctl_top(const char *address, double interval, unsigned int count, size_t max_rows)
{
	uint64_t last_refused = 0;	/* live: the bus' refusals at the previous refresh */
	struct top_bus bus;
	int r;

	if (!address)
		address = getenv("DBUS_SESSION_BUS_ADDRESS");
	if (!address) {
		fprintf(stderr, "bus1ctl: no bus address (--address, DBUS_SESSION_BUS_ADDRESS)\n");
		return -EINVAL;
	}
	r = top_open(&bus, address);
	if (r < 0) {
		fprintf(stderr, "bus1ctl: cannot connect to %s: %s\n", address, strerror(-r));
		if (bus.fd >= 0)
			close(bus.fd);
		return -EREMOTEIO;
	}
	for (unsigned int i = 0; !count || i < count; i++) {
		struct top_snapshot s = {};

		if (i) {
			struct timespec ts = { (time_t)interval,
					       (long)((interval - (double)(time_t)interval) * 1e9) };

			nanosleep(&ts, NULL);
		}
		r = snapshot_take(&bus, &s);
		if (r == 0) {
			if (count != 1 && isatty(STDOUT_FILENO))
				fputs("\033[H\033[2J", stdout);
			snapshot_print(&s, max_rows, count != 1 && i ? &last_refused : NULL);
			last_refused = refused(&s.bus);
			top_kernel_print(stdout);
			fflush(stdout);
		}
		snapshot_free(&s);
		if (r)
			break;
	}
	close(bus.fd);
	if (r < 0)
		fprintf(stderr, "bus1ctl: top: %s\n", strerror(-r));
	return r ? -EREMOTEIO : 0;
}
