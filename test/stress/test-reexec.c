/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Re-executing the bus under traffic (issue 16): SIGUSR2 makes bus1-broker
 * execve() itself in place, carrying over its sockets and its whole state.
 * Clients must see nothing.
 *
 * N clients (forked processes using libdbus, sd-bus, GDBus and, with
 * STRESS_REEXEC_NATIVE=1 on a bus with /dev/bus1, native libbus1-client in
 * turn; GDBus only when built with gio-2.0) own a well-known name each, add
 * match rules and then stream, all at once:
 *  - method calls "Echo" (caller id, sequence number, a payload string of a
 *    varying length and pattern, on some an fd: a memfd or the read end of a
 *    pipe holding "call <caller> <seq>") to the next client by its
 *    well-known name and to the one after by its unique name, at most
 *    WINDOW outstanding per target; the callee checks sender, order,
 *    payload and fd content and replies with the sequence number and a
 *    checksum that the caller checks;
 *  - broadcast signals "Tick" (sender id, sequence number, payload, on some
 *    a memfd), one per reply received, matched by an interface rule of every
 *    client (and by a second rule on the sender's well-known name for the
 *    previous client: a message matched twice must still come once).
 * Meanwhile the test sends SIGUSR2 to the bus STRESS_REEXEC_COUNT times
 * (default 100), each time waiting for the "re-exec: resumed" line in the
 * bus log, then for every client to have got at least one more reply.
 * A refusal ("re-exec refused:") is retried after 20 ms and counted; one
 * for any reason but a client still authenticating fails the test.
 *
 * At the end each client stops calling, waits for its replies and
 * broadcasts "Done" (its totals); once a client has every Done it reports.
 * Asserted: every call and every signal arrived exactly once and in order
 * per sender, with its payload and fd intact; every call got its reply, no
 * error; no client saw a disconnect, NameOwnerChanged, NameLost or
 * NameAcquired after the start; well-known names still owned by the same
 * unique names; the bus pid unchanged (still our child, never reaped), GetId
 * unchanged after every re-exec; MatchRules/BusNames as before; the bus's
 * open fds the same at the quiescent points before and after (clients
 * connected, nothing in flight) and after the clients left as before they
 * came; VmRSS after the last re-exec < 2 x that after the first + 4 MiB
 * (both under the same traffic: an exec'd process starts from a new address
 * space, so only what the bus carries over in its state can make the second
 * grow: a per-re-exec growth of the state, e.g. duplicated rules or names,
 * or fds kept, would exceed it long before 100 re-execs; the factor 2 and
 * 4 MiB leave room for the queued traffic, at most a few hundred KiB here,
 * and for malloc arenas that differ from run to run).
 * Printed: the stall of each re-exec (SIGUSR2 to the resumed line) median
 * and worst, the longest gap between two replies a client saw, counts.
 *
 *   test-reexec BUS_BINARY CONFIG
 *   STRESS_REEXEC_COUNT=N (default 100)  STRESS_REEXEC_CLIENTS=N (2..16, default 6)
 *   STRESS_REEXEC_NATIVE=1: native clients too (test/native/meson.build runs it so
 *   in the guest)
 */

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <systemd/sd-bus.h>
#ifdef HAVE_GDBUS
#include <gio/gio.h>
#include <gio/gunixfdlist.h>
#endif
#include "bus1-client.h"
#include "stress-common.h"

#define MAX_CLIENTS 16
#define WINDOW 4		/* outstanding calls per target */
#define N_TARGETS 2
#define CALL_PAYLOAD_MAX 16384
#define TICK_PAYLOAD_MAX 4096
#define IFACE "org.bus1.ReexecTest"
#define OPATH "/org/bus1/ReexecTest"
#define NAME_FMT "org.bus1.ReexecTest.C%d"

enum { PHASE_SETUP, PHASE_GO, PHASE_STOP, PHASE_EXIT };

struct cstat {
	char unique[64];
	int ready, finished;
	uint64_t calls_sent[MAX_CLIENTS];	/* by target */
	uint64_t replies[MAX_CLIENTS];		/* by target */
	uint64_t calls_recv[MAX_CLIENTS];	/* by caller */
	uint64_t ticks_sent;
	uint64_t ticks_recv[MAX_CLIENTS];	/* by sender */
	uint64_t done_ticks[MAX_CLIENTS];	/* from Done, by sender */
	uint64_t done_calls[MAX_CLIENTS];
	int done_seen[MAX_CLIENTS];
	uint64_t fds_checked;
	uint64_t max_reply_gap_us;
	uint64_t total_replies;
	int disconnected;
	int name_events;			/* NameOwnerChanged/Lost/Acquired after go */
	int errors;
	char error[256];
	char name_event[256];
};

struct shared {
	int phase;
	int n;
	struct cstat c[MAX_CLIENTS];
};

static struct shared *sh;
static struct sbus bus;

/* --- what every client does, whatever its library ----------------------- */

struct client;

struct out {
	struct client *owner;
	bool used;
	int target;
	uint32_t seq;
	uint64_t serial;
	uint64_t t;
};

struct client {
	int id;
	struct cstat *st;
	char names[MAX_CLIENTS][64];	/* well-known names */
	int targets[N_TARGETS];
	uint32_t next_seq[MAX_CLIENTS];	/* next call seq, by target */
	uint32_t next_reply[MAX_CLIENTS];	/* next expected reply seq, by target */
	int outstanding[MAX_CLIENTS];
	struct out out[N_TARGETS * WINDOW];
	uint64_t last_reply_t;
	char payload[CALL_PAYLOAD_MAX + 1];
};

static int phase(void)
{
	return __atomic_load_n(&sh->phase, __ATOMIC_ACQUIRE);
}

static void cerr(struct client *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void cerr(struct client *c, const char *fmt, ...)
{
	va_list ap;

	if (!c->st->errors++) {
		va_start(ap, fmt);
		vsnprintf(c->st->error, sizeof(c->st->error), fmt, ap);
		va_end(ap);
		fprintf(stderr, "client %d: %s\n", c->id, c->st->error);
	}
}

static uint32_t payload_len(int who, uint32_t seq, size_t max)
{
	return (uint32_t)(((uint64_t)seq * 7919 + (uint64_t)who * 131) % max);
}

static const char *make_payload(struct client *c, int who, uint32_t seq, size_t max)
{
	uint32_t n = payload_len(who, seq, max);

	for (uint32_t i = 0; i < n; i++)
		c->payload[i] = (char)('a' + (seq + i + (uint32_t)who) % 26);
	c->payload[n] = '\0';
	return c->payload;
}

static bool payload_ok(int who, uint32_t seq, size_t max, const char *p)
{
	uint32_t n = payload_len(who, seq, max);

	if (strlen(p) != n)
		return false;
	for (uint32_t i = 0; i < n; i++)
		if (p[i] != (char)('a' + (seq + i + (uint32_t)who) % 26))
			return false;
	return true;
}

static uint32_t checksum(int caller, uint32_t seq)
{
	return seq * 2654435761u ^ (uint32_t)caller;
}

/* An fd to send with message @seq of @who: a memfd, or (@pipe) a pipe's read end; -1 on error. */
static int make_fd(const char *what, int who, uint32_t seq, bool use_pipe)
{
	char text[64];
	int n = snprintf(text, sizeof(text), "%s %d %u", what, who, seq);
	int fd, p[2];

	if (use_pipe) {
		if (pipe2(p, O_CLOEXEC) < 0)
			return -1;
		if (write(p[1], text, (size_t)n) != n) {
			close(p[0]);
			close(p[1]);
			return -1;
		}
		close(p[1]);
		return p[0];
	}
	fd = memfd_create("reexec", MFD_CLOEXEC);
	if (fd < 0)
		return -1;
	if (write(fd, text, (size_t)n) != n) {
		close(fd);
		return -1;
	}
	return fd;
}

/* Whether @fd holds what make_fd() put in (memfds are read with pread: shared offsets). */
static bool fd_ok(int fd, const char *what, int who, uint32_t seq)
{
	char text[64], got[80];
	int n = snprintf(text, sizeof(text), "%s %d %u", what, who, seq);
	struct stat s;
	ssize_t r, len = 0;

	if (fstat(fd, &s) < 0)
		return false;
	if (S_ISFIFO(s.st_mode)) {
		while ((r = read(fd, got + len, sizeof(got) - 1 - (size_t)len)) > 0)
			len += r;
	} else {
		len = pread(fd, got, sizeof(got) - 1, 0);
	}
	return len == n && !memcmp(got, text, (size_t)n);
}

static bool with_fd(uint32_t seq)
{
	return seq % 4 == 1 || seq % 4 == 3;
}

static bool tick_with_fd(uint32_t seq)
{
	return seq % 8 == 0;
}

static int find_sender(struct client *c, const char *sender, int claimed)
{
	if (claimed < 0 || claimed >= sh->n || !sender || strcmp(sender, sh->c[claimed].unique))
		return -1;
	return claimed;
}

/* A call arrived: check it, return the checksum for the reply or -1 (logged). */
static int64_t on_call(struct client *c, const char *sender, uint32_t caller, uint32_t seq,
		       const char *payload, int fd, bool has_fd)
{
	int k = find_sender(c, sender, (int)caller);

	if (k < 0) {
		cerr(c, "Echo from %s claiming to be client %u", sender, caller);
		return -1;
	}
	if (seq != c->st->calls_recv[k] + 1) {
		cerr(c, "Echo from client %d: seq %u, expected %llu (lost, duplicated or reordered)",
		     k, seq, (unsigned long long)c->st->calls_recv[k] + 1);
		return -1;
	}
	c->st->calls_recv[k] = seq;
	if (!payload_ok(k, seq, CALL_PAYLOAD_MAX, payload)) {
		cerr(c, "Echo %u from client %d: payload corrupted", seq, k);
		return -1;
	}
	if (has_fd != with_fd(seq)) {
		cerr(c, "Echo %u from client %d: fd %s", seq, k, has_fd ? "unexpected" : "missing");
		return -1;
	}
	if (has_fd) {
		if (!fd_ok(fd, "call", k, seq)) {
			cerr(c, "Echo %u from client %d: the fd does not hold what was sent", seq, k);
			return -1;
		}
		c->st->fds_checked++;
	}
	return checksum(k, seq);
}

static struct out *out_find(struct client *c, uint64_t serial)
{
	for (size_t i = 0; i < N_TARGETS * WINDOW; i++)
		if (c->out[i].used && c->out[i].serial == serial)
			return &c->out[i];
	return NULL;
}

static struct out *out_new(struct client *c)
{
	for (size_t i = 0; i < N_TARGETS * WINDOW; i++)
		if (!c->out[i].used)
			return &c->out[i];
	return NULL;
}

static void on_reply(struct client *c, struct out *o, const char *error, uint32_t seq,
		     uint32_t sum)
{
	uint64_t now = now_usec();
	int t = o->target;

	o->used = false;
	c->outstanding[t]--;
	if (error) {
		cerr(c, "call %u to client %d failed: %s", o->seq, t, error);
		return;
	}
	if (seq != o->seq || o->seq != c->next_reply[t]) {
		cerr(c, "reply from client %d: seq %u for call %u, expected %u", t, seq, o->seq,
		     c->next_reply[t]);
		return;
	}
	if (sum != checksum(c->id, seq)) {
		cerr(c, "reply %u from client %d: bad checksum", seq, t);
		return;
	}
	c->next_reply[t]++;
	c->st->replies[t]++;
	__atomic_add_fetch(&c->st->total_replies, 1, __ATOMIC_RELEASE);
	if (c->last_reply_t && now - c->last_reply_t > c->st->max_reply_gap_us)
		c->st->max_reply_gap_us = now - c->last_reply_t;
	c->last_reply_t = now;
}

static void on_tick(struct client *c, const char *sender, uint32_t from, uint32_t seq,
		    const char *payload, int fd, bool has_fd)
{
	int k = find_sender(c, sender, (int)from);

	if (k < 0) {
		cerr(c, "Tick from %s claiming to be client %u", sender, from);
		return;
	}
	if (seq != c->st->ticks_recv[k] + 1) {
		cerr(c, "Tick from client %d: seq %u, expected %llu (lost, duplicated or reordered)",
		     k, seq, (unsigned long long)c->st->ticks_recv[k] + 1);
		return;
	}
	c->st->ticks_recv[k] = seq;
	if (!payload_ok(k, seq, TICK_PAYLOAD_MAX, payload))
		cerr(c, "Tick %u from client %d: payload corrupted", seq, k);
	if (has_fd != tick_with_fd(seq))
		cerr(c, "Tick %u from client %d: fd %s", seq, k, has_fd ? "unexpected" : "missing");
	else if (has_fd && !fd_ok(fd, "tick", k, seq))
		cerr(c, "Tick %u from client %d: the fd does not hold what was sent", seq, k);
	else if (has_fd)
		c->st->fds_checked++;
}

static void on_done(struct client *c, const char *sender, uint32_t from, uint32_t ticks,
		    uint32_t calls)
{
	int k = find_sender(c, sender, (int)from);

	if (k < 0 || c->st->done_seen[k]) {
		cerr(c, "Done from %s (client %u) unexpected or twice", sender, from);
		return;
	}
	c->st->done_seen[k] = 1;
	c->st->done_ticks[k] = ticks;
	c->st->done_calls[k] = calls;
	if (c->st->ticks_recv[k] != ticks)
		cerr(c, "Done from client %d after %llu of its %u Ticks", k,
		     (unsigned long long)c->st->ticks_recv[k], ticks);
}

static void on_name_event(struct client *c, const char *member, const char *arg0)
{
	if (phase() < PHASE_GO)
		return;
	if (!c->st->name_events++)
		snprintf(c->st->name_event, sizeof(c->st->name_event), "%s(%s)", member,
			 arg0 ? arg0 : "?");
}

static bool all_done(struct client *c)
{
	for (int i = 0; i < sh->n; i++)
		if (!c->st->done_seen[i])
			return false;
	return true;
}

static int n_outstanding(struct client *c)
{
	int n = 0;

	for (int i = 0; i < sh->n; i++)
		n += c->outstanding[i];
	return n;
}

static void client_init(struct client *c, int id)
{
	memset(c, 0, sizeof(*c));
	c->id = id;
	c->st = &sh->c[id];
	for (int i = 0; i < sh->n; i++) {
		snprintf(c->names[i], sizeof(c->names[i]), NAME_FMT, i);
		c->next_seq[i] = 1;
		c->next_reply[i] = 1;
	}
	c->targets[0] = (id + 1) % sh->n;
	c->targets[1] = (id + 2) % sh->n;
}

/* Wait until every client is ready (their unique names are known for the checks). */
static void wait_all_ready(void)
{
	for (int i = 0; i < sh->n; i++)
		while (!__atomic_load_n(&sh->c[i].ready, __ATOMIC_ACQUIRE) && phase() == PHASE_SETUP)
			usleep(1000);
}

static void rule_names(int id, char *r1, char *r2, char *r3, size_t size)
{
	snprintf(r1, size, "type='signal',interface='" IFACE "'");
	snprintf(r2, size, "type='signal',sender='" NAME_FMT "',interface='" IFACE "',member='Tick'",
		 (id + sh->n - 1) % sh->n);
	snprintf(r3, size, "type='signal',sender='" DRIVER "',interface='" DRIVER "'");
}

/* --- libdbus client ------------------------------------------------------ */

static DBusHandlerResult ld_filter(DBusConnection *conn, DBusMessage *m, void *ud)
{
	struct client *c = ud;
	const char *sender = dbus_message_get_sender(m);
	int type = dbus_message_get_type(m);
	uint32_t a = 0, b = 0, d = 0;
	const char *s = NULL;
	int fd = -1;
	bool has_fd;

	if (type == DBUS_MESSAGE_TYPE_SIGNAL) {
		if (dbus_message_is_signal(m, DBUS_INTERFACE_LOCAL, "Disconnected")) {
			c->st->disconnected = 1;
		} else if (sender && !strcmp(sender, DRIVER)) {
			dbus_message_get_args(m, NULL, DBUS_TYPE_STRING, &s, DBUS_TYPE_INVALID);
			on_name_event(c, dbus_message_get_member(m), s);
		} else if (dbus_message_is_signal(m, IFACE, "Tick")) {
			has_fd = dbus_message_has_signature(m, "uush");
			if (!dbus_message_get_args(m, NULL, DBUS_TYPE_UINT32, &a, DBUS_TYPE_UINT32, &b,
						   DBUS_TYPE_STRING, &s,
						   has_fd ? DBUS_TYPE_UNIX_FD : DBUS_TYPE_INVALID, &fd,
						   DBUS_TYPE_INVALID))
				cerr(c, "Tick: bad arguments");
			else
				on_tick(c, sender, a, b, s, fd, has_fd);
		} else if (dbus_message_is_signal(m, IFACE, "Done")) {
			if (!dbus_message_get_args(m, NULL, DBUS_TYPE_UINT32, &a, DBUS_TYPE_UINT32, &b,
						   DBUS_TYPE_UINT32, &d, DBUS_TYPE_INVALID))
				cerr(c, "Done: bad arguments");
			else
				on_done(c, sender, a, b, d);
		}
	} else if (type == DBUS_MESSAGE_TYPE_METHOD_CALL) {
		DBusMessage *r;
		int64_t sum = -1;

		if (!dbus_message_is_method_call(m, IFACE, "Echo"))
			return DBUS_HANDLER_RESULT_NOT_YET_HANDLED;
		has_fd = dbus_message_has_signature(m, "uush");
		if (!dbus_message_get_args(m, NULL, DBUS_TYPE_UINT32, &a, DBUS_TYPE_UINT32, &b,
					   DBUS_TYPE_STRING, &s,
					   has_fd ? DBUS_TYPE_UNIX_FD : DBUS_TYPE_INVALID, &fd,
					   DBUS_TYPE_INVALID))
			cerr(c, "Echo: bad arguments");
		else
			sum = on_call(c, sender, a, b, s, fd, has_fd);
		if (sum < 0) {
			r = dbus_message_new_error(m, "org.bus1.ReexecTest.Error", "check failed");
		} else {
			uint32_t u = (uint32_t)sum;

			r = dbus_message_new_method_return(m);
			if (r)
				dbus_message_append_args(r, DBUS_TYPE_UINT32, &b, DBUS_TYPE_UINT32, &u,
							 DBUS_TYPE_INVALID);
		}
		if (!r || !dbus_connection_send(conn, r, NULL))
			cerr(c, "cannot reply: oom");
		if (r)
			dbus_message_unref(r);
	} else {
		struct out *o = out_find(c, dbus_message_get_reply_serial(m));

		if (!o)
			return DBUS_HANDLER_RESULT_NOT_YET_HANDLED;
		if (type == DBUS_MESSAGE_TYPE_ERROR)
			on_reply(c, o, dbus_message_get_error_name(m), 0, 0);
		else if (!dbus_message_get_args(m, NULL, DBUS_TYPE_UINT32, &b, DBUS_TYPE_UINT32, &d,
						DBUS_TYPE_INVALID))
			on_reply(c, o, "(bad reply arguments)", 0, 0);
		else
			on_reply(c, o, NULL, b, d);
	}
	if (fd >= 0)
		close(fd);
	return DBUS_HANDLER_RESULT_HANDLED;
}

static void ld_send_tick(struct client *c, DBusConnection *conn)
{
	uint32_t id = (uint32_t)c->id, seq = (uint32_t)c->st->ticks_sent + 1;
	DBusMessage *m = dbus_message_new_signal(OPATH, IFACE, "Tick");
	const char *p = make_payload(c, c->id, seq, TICK_PAYLOAD_MAX);
	int fd = tick_with_fd(seq) ? make_fd("tick", c->id, seq, false) : -1;

	CHECK(m, "oom");
	CHECK(!tick_with_fd(seq) || fd >= 0, "memfd: %m");
	dbus_message_append_args(m, DBUS_TYPE_UINT32, &id, DBUS_TYPE_UINT32, &seq, DBUS_TYPE_STRING,
				 &p, fd >= 0 ? DBUS_TYPE_UNIX_FD : DBUS_TYPE_INVALID, &fd,
				 DBUS_TYPE_INVALID);
	CHECK(dbus_connection_send(conn, m, NULL), "oom");
	c->st->ticks_sent = seq;
	dbus_message_unref(m);
	if (fd >= 0)
		close(fd);
}

static void ld_send_call(struct client *c, DBusConnection *conn, int slot)
{
	int t = c->targets[slot];
	const char *dest = slot == 0 ? c->names[t] : sh->c[t].unique;
	uint32_t id = (uint32_t)c->id, seq = c->next_seq[t];
	DBusMessage *m = dbus_message_new_method_call(dest, OPATH, IFACE, "Echo");
	const char *p = make_payload(c, c->id, seq, CALL_PAYLOAD_MAX);
	int fd = with_fd(seq) ? make_fd("call", c->id, seq, seq % 4 == 3) : -1;
	struct out *o = out_new(c);
	dbus_uint32_t serial = 0;

	CHECK(m && o, "oom");
	CHECK(!with_fd(seq) || fd >= 0, "fd: %m");
	dbus_message_append_args(m, DBUS_TYPE_UINT32, &id, DBUS_TYPE_UINT32, &seq, DBUS_TYPE_STRING,
				 &p, fd >= 0 ? DBUS_TYPE_UNIX_FD : DBUS_TYPE_INVALID, &fd,
				 DBUS_TYPE_INVALID);
	CHECK(dbus_connection_send(conn, m, &serial), "oom");
	*o = (struct out){ .used = true, .target = t, .seq = seq, .serial = serial,
			   .t = now_usec() };
	c->next_seq[t]++;
	c->outstanding[t]++;
	c->st->calls_sent[t]++;
	dbus_message_unref(m);
	if (fd >= 0)
		close(fd);
}

static void ld_pump(DBusConnection *conn, int timeout_ms)
{
	while (dbus_connection_dispatch(conn) == DBUS_DISPATCH_DATA_REMAINS)
		;
	dbus_connection_read_write(conn, timeout_ms);
	while (dbus_connection_dispatch(conn) == DBUS_DISPATCH_DATA_REMAINS)
		;
}

static int run_libdbus(struct client *c)
{
	DBusError err = DBUS_ERROR_INIT;
	DBusConnection *conn = dbus_connection_open_private(bus.address, &err);
	char r1[256], r2[256], r3[256];
	uint64_t deadline;
	uint64_t ticks_owed = 0;

	CHECK(conn, "libdbus connect: %s", err.message);
	dbus_connection_set_exit_on_disconnect(conn, FALSE);
	CHECK(dbus_bus_register(conn, &err), "Hello: %s", err.message);
	CHECK(dbus_connection_add_filter(conn, ld_filter, c, NULL), "oom");
	snprintf(c->st->unique, sizeof(c->st->unique), "%s", dbus_bus_get_unique_name(conn));
	CHECK(dbus_bus_request_name(conn, c->names[c->id], DBUS_NAME_FLAG_DO_NOT_QUEUE, &err) ==
	      DBUS_REQUEST_NAME_REPLY_PRIMARY_OWNER, "RequestName: %s", err.message);
	rule_names(c->id, r1, r2, r3, sizeof(r1));
	dbus_bus_add_match(conn, r1, &err);
	CHECK(!dbus_error_is_set(&err), "AddMatch: %s", err.message);
	dbus_bus_add_match(conn, r2, &err);
	CHECK(!dbus_error_is_set(&err), "AddMatch: %s", err.message);
	dbus_bus_add_match(conn, r3, &err);
	CHECK(!dbus_error_is_set(&err), "AddMatch: %s", err.message);
	ld_pump(conn, 0);
	__atomic_store_n(&c->st->ready, 1, __ATOMIC_RELEASE);
	wait_all_ready();
	while (phase() == PHASE_SETUP)
		ld_pump(conn, 1);

	while (phase() == PHASE_GO && !c->st->disconnected) {
		uint64_t before = c->st->total_replies;

		for (int s = 0; s < N_TARGETS; s++)
			while (c->outstanding[c->targets[s]] < WINDOW)
				ld_send_call(c, conn, s);
		ld_pump(conn, 2);
		ticks_owed += c->st->total_replies - before;
		for (; ticks_owed; ticks_owed--)
			ld_send_tick(c, conn);
	}

	deadline = now_usec() + 30000000;
	while (n_outstanding(c) && !c->st->disconnected && now_usec() < deadline)
		ld_pump(conn, 5);
	if (n_outstanding(c))
		cerr(c, "%d calls without a reply after 30 s", n_outstanding(c));
	{
		DBusMessage *m = dbus_message_new_signal(OPATH, IFACE, "Done");
		uint32_t id = (uint32_t)c->id, t = (uint32_t)c->st->ticks_sent, n = 0;

		for (int i = 0; i < sh->n; i++)
			n += (uint32_t)c->st->calls_sent[i];
		CHECK(m, "oom");
		dbus_message_append_args(m, DBUS_TYPE_UINT32, &id, DBUS_TYPE_UINT32, &t,
					 DBUS_TYPE_UINT32, &n, DBUS_TYPE_INVALID);
		dbus_connection_send(conn, m, NULL);
		dbus_message_unref(m);
	}
	deadline = now_usec() + 30000000;
	while (!all_done(c) && !c->st->disconnected && now_usec() < deadline)
		ld_pump(conn, 5);
	if (!all_done(c))
		cerr(c, "not every client's Done arrived within 30 s");
	dbus_connection_flush(conn);
	__atomic_store_n(&c->st->finished, 1, __ATOMIC_RELEASE);
	while (phase() != PHASE_EXIT)
		ld_pump(conn, 5);
	dbus_connection_close(conn);
	dbus_connection_unref(conn);
	return 0;
}

/* --- sd-bus client -------------------------------------------------------- */

struct sd_ctx {
	struct client *c;
	sd_bus *bus;
};

static int sd_filter(sd_bus_message *m, void *ud, sd_bus_error *e)
{
	struct client *c = ((struct sd_ctx *)ud)->c;
	sd_bus *b = ((struct sd_ctx *)ud)->bus;
	const char *sender = sd_bus_message_get_sender(m);
	const char *sig = sd_bus_message_get_signature(m, 1);
	uint32_t a = 0, x = 0, d = 0;
	const char *s = NULL;
	int fd = -1;
	bool has_fd = sig && !strcmp(sig, "uush");
	uint8_t type = 0;

	(void)e;
	sd_bus_message_get_type(m, &type);
	if (type == SD_BUS_MESSAGE_SIGNAL) {
		if (sd_bus_message_is_signal(m, "org.freedesktop.DBus.Local", "Disconnected")) {
			c->st->disconnected = 1;
		} else if (sender && !strcmp(sender, DRIVER)) {
			if (sig && sig[0] == 's')
				sd_bus_message_read(m, "s", &s);
			on_name_event(c, sd_bus_message_get_member(m), s);
		} else if (sd_bus_message_is_signal(m, IFACE, "Tick")) {
			if (sd_bus_message_read(m, "uus", &a, &x, &s) < 0 ||
			    (has_fd && sd_bus_message_read(m, "h", &fd) < 0))
				cerr(c, "Tick: bad arguments");
			else
				on_tick(c, sender, a, x, s, fd, has_fd);
		} else if (sd_bus_message_is_signal(m, IFACE, "Done")) {
			if (sd_bus_message_read(m, "uuu", &a, &x, &d) < 0)
				cerr(c, "Done: bad arguments");
			else
				on_done(c, sender, a, x, d);
		}
		return 1;
	}
	if (type == SD_BUS_MESSAGE_METHOD_CALL && sd_bus_message_is_method_call(m, IFACE, "Echo")) {
		sd_bus_message *r = NULL;
		int64_t sum = -1;

		if (sd_bus_message_read(m, "uus", &a, &x, &s) < 0 ||
		    (has_fd && sd_bus_message_read(m, "h", &fd) < 0))
			cerr(c, "Echo: bad arguments");
		else
			sum = on_call(c, sender, a, x, s, fd, has_fd);
		/* fd is borrowed from the message */
		if (sum < 0)
			sd_bus_reply_method_errorf(m, "org.bus1.ReexecTest.Error", "check failed");
		else if (sd_bus_message_new_method_return(m, &r) < 0 ||
			 sd_bus_message_append(r, "uu", x, (uint32_t)sum) < 0 ||
			 sd_bus_send(b, r, NULL) < 0)
			cerr(c, "cannot reply");
		sd_bus_message_unref(r);
		return 1;
	}
	return 0;
}

static int sd_reply_cb(sd_bus_message *m, void *ud, sd_bus_error *e)
{
	struct out *o = ud;
	struct client *c = o->owner;
	uint32_t seq = 0, sum = 0;

	(void)e;
	if (sd_bus_message_is_method_error(m, NULL)) {
		const sd_bus_error *be = sd_bus_message_get_error(m);

		on_reply(c, o, be && be->name ? be->name : "(error)", 0, 0);
	} else if (sd_bus_message_read(m, "uu", &seq, &sum) < 0) {
		on_reply(c, o, "(bad reply arguments)", 0, 0);
	} else {
		on_reply(c, o, NULL, seq, sum);
	}
	return 1;
}


static int sd_noop(sd_bus_message *m, void *ud, sd_bus_error *e)
{
	(void)m;
	(void)ud;
	(void)e;
	return 0;
}

static void sd_send_tick(struct client *c, sd_bus *b)
{
	uint32_t seq = (uint32_t)c->st->ticks_sent + 1;
	const char *p = make_payload(c, c->id, seq, TICK_PAYLOAD_MAX);
	int fd = tick_with_fd(seq) ? make_fd("tick", c->id, seq, false) : -1;
	sd_bus_message *m = NULL;
	int r;

	CHECK(!tick_with_fd(seq) || fd >= 0, "memfd: %m");
	r = sd_bus_message_new_signal(b, &m, OPATH, IFACE, "Tick");
	if (r >= 0)
		r = fd >= 0 ? sd_bus_message_append(m, "uush", (uint32_t)c->id, seq, p, fd)
			    : sd_bus_message_append(m, "uus", (uint32_t)c->id, seq, p);
	if (r >= 0)
		r = sd_bus_send(b, m, NULL);
	CHECK(r >= 0, "sd-bus Tick: %s", strerror(-r));
	c->st->ticks_sent = seq;
	sd_bus_message_unref(m);
	if (fd >= 0)
		close(fd);
}

static void sd_send_call(struct client *c, sd_bus *b, int slot)
{
	int t = c->targets[slot];
	const char *dest = slot == 0 ? c->names[t] : sh->c[t].unique;
	uint32_t seq = c->next_seq[t];
	const char *p = make_payload(c, c->id, seq, CALL_PAYLOAD_MAX);
	int fd = with_fd(seq) ? make_fd("call", c->id, seq, seq % 4 == 3) : -1;
	struct out *o = out_new(c);
	sd_bus_message *m = NULL;
	uint64_t cookie = 0;
	int r;

	CHECK(o, "no free slot");
	CHECK(!with_fd(seq) || fd >= 0, "fd: %m");
	r = sd_bus_message_new_method_call(b, &m, dest, OPATH, IFACE, "Echo");
	if (r >= 0)
		r = fd >= 0 ? sd_bus_message_append(m, "uush", (uint32_t)c->id, seq, p, fd)
			    : sd_bus_message_append(m, "uus", (uint32_t)c->id, seq, p);
	if (r >= 0)
		r = sd_bus_call_async(b, NULL, m, sd_reply_cb, o, 120 * 1000000ULL);
	CHECK(r >= 0, "sd-bus Echo: %s", strerror(-r));
	sd_bus_message_get_cookie(m, &cookie);
	*o = (struct out){ .owner = c, .used = true, .target = t, .seq = seq, .serial = cookie,
			   .t = now_usec() };
	c->next_seq[t]++;
	c->outstanding[t]++;
	c->st->calls_sent[t]++;
	sd_bus_message_unref(m);
	if (fd >= 0)
		close(fd);
}

static void sd_pump(struct client *c, sd_bus *b, uint64_t timeout_usec)
{
	int r;

	while ((r = sd_bus_process(b, NULL)) > 0)
		;
	if (r < 0) {
		c->st->disconnected = 1;
		return;
	}
	if (timeout_usec) {
		sd_bus_wait(b, timeout_usec);
		while ((r = sd_bus_process(b, NULL)) > 0)
			;
		if (r < 0)
			c->st->disconnected = 1;
	}
}

static int run_sdbus(struct client *c)
{
	struct sd_ctx ctx = { .c = c };
	char r1[256], r2[256], r3[256];
	const char *unique = NULL;
	uint64_t deadline, ticks_owed = 0;
	sd_bus *b = NULL;
	int r;

	CHECK(sd_bus_new(&b) >= 0, "sd_bus_new");
	ctx.bus = b;
	CHECK(sd_bus_set_address(b, bus.address) >= 0, "address");
	CHECK(sd_bus_set_bus_client(b, 1) >= 0, "bus client");
	CHECK(sd_bus_negotiate_fds(b, 1) >= 0, "fds");
	CHECK((r = sd_bus_start(b)) >= 0, "sd_bus_start: %s", strerror(-r));
	CHECK((r = sd_bus_get_unique_name(b, &unique)) >= 0, "unique name: %s", strerror(-r));
	snprintf(c->st->unique, sizeof(c->st->unique), "%s", unique);
	CHECK(sd_bus_add_filter(b, NULL, sd_filter, &ctx) >= 0, "filter");
	CHECK((r = sd_bus_request_name(b, c->names[c->id], 0)) >= 0, "RequestName: %s",
	      strerror(-r));
	rule_names(c->id, r1, r2, r3, sizeof(r1));
	CHECK((r = sd_bus_add_match(b, NULL, r1, sd_noop, NULL)) >= 0, "AddMatch: %s", strerror(-r));
	CHECK((r = sd_bus_add_match(b, NULL, r2, sd_noop, NULL)) >= 0, "AddMatch: %s", strerror(-r));
	CHECK((r = sd_bus_add_match(b, NULL, r3, sd_noop, NULL)) >= 0, "AddMatch: %s", strerror(-r));
	sd_pump(c, b, 0);
	__atomic_store_n(&c->st->ready, 1, __ATOMIC_RELEASE);
	wait_all_ready();
	while (phase() == PHASE_SETUP)
		sd_pump(c, b, 1000);

	while (phase() == PHASE_GO && !c->st->disconnected) {
		uint64_t before = c->st->total_replies;

		for (int s = 0; s < N_TARGETS; s++)
			while (c->outstanding[c->targets[s]] < WINDOW)
				sd_send_call(c, b, s);
		sd_pump(c, b, 2000);
		ticks_owed += c->st->total_replies - before;
		for (; ticks_owed; ticks_owed--)
			sd_send_tick(c, b);
	}

	deadline = now_usec() + 30000000;
	while (n_outstanding(c) && !c->st->disconnected && now_usec() < deadline)
		sd_pump(c, b, 5000);
	if (n_outstanding(c))
		cerr(c, "%d calls without a reply after 30 s", n_outstanding(c));
	{
		uint32_t n = 0;

		for (int i = 0; i < sh->n; i++)
			n += (uint32_t)c->st->calls_sent[i];
		r = sd_bus_emit_signal(b, OPATH, IFACE, "Done", "uuu", (uint32_t)c->id,
				       (uint32_t)c->st->ticks_sent, n);
		if (r < 0)
			cerr(c, "Done: %s", strerror(-r));
	}
	deadline = now_usec() + 30000000;
	while (!all_done(c) && !c->st->disconnected && now_usec() < deadline)
		sd_pump(c, b, 5000);
	if (!all_done(c))
		cerr(c, "not every client's Done arrived within 30 s");
	sd_bus_flush(b);
	__atomic_store_n(&c->st->finished, 1, __ATOMIC_RELEASE);
	while (phase() != PHASE_EXIT)
		sd_pump(c, b, 5000);
	sd_bus_flush_close_unref(b);
	return 0;
}

/* --- GDBus client --------------------------------------------------------- */

#ifdef HAVE_GDBUS
/*
 * GDBus reads in its worker thread. The filter takes every message of the
 * test there (calls and replies of IFACE, its signals, the driver's) into a
 * queue, in arrival order, and this thread handles them: all client state
 * stays single-threaded, as with the other two libraries.
 */
static GDBusMessage *gd_filter(GDBusConnection *conn, GDBusMessage *m, gboolean incoming,
			       gpointer ud)
{
	GAsyncQueue *q = ud;
	const char *sender = g_dbus_message_get_sender(m);
	GDBusMessageType type = g_dbus_message_get_message_type(m);
	bool ours;

	(void)conn;
	if (!incoming)
		return m;
	if (type == G_DBUS_MESSAGE_TYPE_METHOD_RETURN || type == G_DBUS_MESSAGE_TYPE_ERROR)
		ours = !sender || strcmp(sender, DRIVER);
	else
		ours = (sender && !strcmp(sender, DRIVER)) ||
		       !g_strcmp0(g_dbus_message_get_interface(m), IFACE);
	if (!ours)
		return m;
	g_async_queue_push(q, m);	/* the filter's reference goes with it */
	return NULL;
}

/* Argument @idx ('h') of @m as an fd of our own, or -1. */
static int gd_fd(GDBusMessage *m, GVariant *body, size_t idx)
{
	GUnixFDList *list = g_dbus_message_get_unix_fd_list(m);
	GVariant *h = g_variant_get_child_value(body, idx);
	int fd = list ? g_unix_fd_list_get(list, g_variant_get_handle(h), NULL) : -1;

	g_variant_unref(h);
	return fd;
}

static void gd_send(struct client *c, GDBusConnection *conn, GDBusMessage *m, int fd,
		    guint32 *serial)
{
	GError *err = NULL;

	if (fd >= 0) {
		GUnixFDList *list = g_unix_fd_list_new();

		CHECK(g_unix_fd_list_append(list, fd, NULL) == 0, "fd list");
		g_dbus_message_set_unix_fd_list(m, list);
		g_object_unref(list);
	}
	if (!g_dbus_connection_send_message(conn, m, G_DBUS_SEND_MESSAGE_FLAGS_NONE, serial, &err)) {
		cerr(c, "GDBus send: %s", err->message);
		g_error_free(err);
	}
}

static void gd_on_call(struct client *c, GDBusConnection *conn, GDBusMessage *m)
{
	GVariant *body = g_dbus_message_get_body(m);
	bool has_fd = body && g_variant_is_of_type(body, G_VARIANT_TYPE("(uush)"));
	uint32_t a = 0, x = 0;
	const char *s = NULL;
	GDBusMessage *r;
	int64_t sum = -1;
	int fd = -1;

	if (!body || !(has_fd || g_variant_is_of_type(body, G_VARIANT_TYPE("(uus)")))) {
		cerr(c, "Echo: bad arguments");
	} else {
		g_variant_get_child(body, 0, "u", &a);
		g_variant_get_child(body, 1, "u", &x);
		g_variant_get_child(body, 2, "&s", &s);
		fd = has_fd ? gd_fd(m, body, 3) : -1;
		sum = on_call(c, g_dbus_message_get_sender(m), a, x, s, fd, has_fd);
	}
	if (sum < 0) {
		r = g_dbus_message_new_method_error(m, "org.bus1.ReexecTest.Error", "check failed");
	} else {
		r = g_dbus_message_new_method_reply(m);
		g_dbus_message_set_body(r, g_variant_new("(uu)", x, (uint32_t)sum));
	}
	gd_send(c, conn, r, -1, NULL);
	g_object_unref(r);
	if (fd >= 0)
		close(fd);
}

static void gd_on_signal(struct client *c, GDBusMessage *m)
{
	const char *sender = g_dbus_message_get_sender(m);
	const char *member = g_dbus_message_get_member(m);
	GVariant *body = g_dbus_message_get_body(m);
	uint32_t a = 0, x = 0, d = 0;
	const char *s = NULL;

	if (sender && !strcmp(sender, DRIVER)) {
		if (body && g_variant_n_children(body) &&
		    g_variant_is_of_type(g_variant_get_child_value(body, 0), G_VARIANT_TYPE_STRING))
			g_variant_get_child(body, 0, "&s", &s);
		on_name_event(c, member, s);
	} else if (!g_strcmp0(member, "Tick")) {
		bool has_fd = body && g_variant_is_of_type(body, G_VARIANT_TYPE("(uush)"));
		int fd = -1;

		if (!body || !(has_fd || g_variant_is_of_type(body, G_VARIANT_TYPE("(uus)")))) {
			cerr(c, "Tick: bad arguments");
			return;
		}
		g_variant_get_child(body, 0, "u", &a);
		g_variant_get_child(body, 1, "u", &x);
		g_variant_get_child(body, 2, "&s", &s);
		fd = has_fd ? gd_fd(m, body, 3) : -1;
		on_tick(c, sender, a, x, s, fd, has_fd);
		if (fd >= 0)
			close(fd);
	} else if (!g_strcmp0(member, "Done")) {
		if (!body || !g_variant_is_of_type(body, G_VARIANT_TYPE("(uuu)"))) {
			cerr(c, "Done: bad arguments");
			return;
		}
		g_variant_get(body, "(uuu)", &a, &x, &d);
		on_done(c, sender, a, x, d);
	}
}

static void gd_on_reply(struct client *c, GDBusMessage *m)
{
	struct out *o = out_find(c, g_dbus_message_get_reply_serial(m));
	GVariant *body = g_dbus_message_get_body(m);
	uint32_t seq = 0, sum = 0;

	if (!o)
		return;
	if (g_dbus_message_get_message_type(m) == G_DBUS_MESSAGE_TYPE_ERROR) {
		on_reply(c, o, g_dbus_message_get_error_name(m), 0, 0);
	} else if (!body || !g_variant_is_of_type(body, G_VARIANT_TYPE("(uu)"))) {
		on_reply(c, o, "(bad reply arguments)", 0, 0);
	} else {
		g_variant_get(body, "(uu)", &seq, &sum);
		on_reply(c, o, NULL, seq, sum);
	}
}

static void gd_pump(struct client *c, GDBusConnection *conn, GAsyncQueue *q,
		    uint64_t timeout_usec)
{
	GDBusMessage *m = timeout_usec ? g_async_queue_timeout_pop(q, timeout_usec)
				       : g_async_queue_try_pop(q);

	for (; m; m = g_async_queue_try_pop(q)) {
		switch (g_dbus_message_get_message_type(m)) {
		case G_DBUS_MESSAGE_TYPE_METHOD_CALL:
			gd_on_call(c, conn, m);
			break;
		case G_DBUS_MESSAGE_TYPE_SIGNAL:
			gd_on_signal(c, m);
			break;
		default:
			gd_on_reply(c, m);
			break;
		}
		g_object_unref(m);
	}
	if (g_dbus_connection_is_closed(conn))
		c->st->disconnected = 1;
}

static void gd_send_tick(struct client *c, GDBusConnection *conn)
{
	uint32_t seq = (uint32_t)c->st->ticks_sent + 1;
	const char *p = make_payload(c, c->id, seq, TICK_PAYLOAD_MAX);
	int fd = tick_with_fd(seq) ? make_fd("tick", c->id, seq, false) : -1;
	GDBusMessage *m = g_dbus_message_new_signal(OPATH, IFACE, "Tick");

	CHECK(!tick_with_fd(seq) || fd >= 0, "memfd: %m");
	g_dbus_message_set_body(m, fd >= 0 ? g_variant_new("(uush)", (uint32_t)c->id, seq, p, 0)
					   : g_variant_new("(uus)", (uint32_t)c->id, seq, p));
	gd_send(c, conn, m, fd, NULL);
	c->st->ticks_sent = seq;
	g_object_unref(m);
	if (fd >= 0)
		close(fd);
}

static void gd_send_call(struct client *c, GDBusConnection *conn, int slot)
{
	int t = c->targets[slot];
	const char *dest = slot == 0 ? c->names[t] : sh->c[t].unique;
	uint32_t seq = c->next_seq[t];
	const char *p = make_payload(c, c->id, seq, CALL_PAYLOAD_MAX);
	int fd = with_fd(seq) ? make_fd("call", c->id, seq, seq % 4 == 3) : -1;
	GDBusMessage *m = g_dbus_message_new_method_call(dest, OPATH, IFACE, "Echo");
	struct out *o = out_new(c);
	guint32 serial = 0;

	CHECK(o, "no free slot");
	CHECK(!with_fd(seq) || fd >= 0, "fd: %m");
	g_dbus_message_set_body(m, fd >= 0 ? g_variant_new("(uush)", (uint32_t)c->id, seq, p, 0)
					   : g_variant_new("(uus)", (uint32_t)c->id, seq, p));
	/* Its reply is handled here, in gd_pump(), once o->serial is set. */
	*o = (struct out){ .owner = c, .used = true, .target = t, .seq = seq, .t = now_usec() };
	gd_send(c, conn, m, fd, &serial);
	o->serial = serial;
	c->next_seq[t]++;
	c->outstanding[t]++;
	c->st->calls_sent[t]++;
	g_object_unref(m);
	if (fd >= 0)
		close(fd);
}

static void gd_call_driver(GDBusConnection *conn, const char *method, GVariant *args)
{
	GError *err = NULL;
	GVariant *r = g_dbus_connection_call_sync(conn, DRIVER, "/org/freedesktop/DBus", DRIVER,
						  method, args, NULL, G_DBUS_CALL_FLAGS_NONE, 30000,
						  NULL, &err);

	CHECK(r, "GDBus %s: %s", method, err ? err->message : "?");
	g_variant_unref(r);
}

static int run_gdbus(struct client *c)
{
	GDBusConnectionFlags flags = G_DBUS_CONNECTION_FLAGS_AUTHENTICATION_CLIENT |
				     G_DBUS_CONNECTION_FLAGS_MESSAGE_BUS_CONNECTION;
	GAsyncQueue *q = g_async_queue_new();
	char r1[256], r2[256], r3[256];
	uint64_t deadline, ticks_owed = 0;
	GDBusConnection *conn;
	GError *err = NULL;

	conn = g_dbus_connection_new_for_address_sync(bus.address, flags, NULL, NULL, &err);
	CHECK(conn, "GDBus connect: %s", err ? err->message : "?");
	g_dbus_connection_set_exit_on_close(conn, FALSE);
	snprintf(c->st->unique, sizeof(c->st->unique), "%s", g_dbus_connection_get_unique_name(conn));
	gd_call_driver(conn, "RequestName", g_variant_new("(su)", c->names[c->id], 4));
	rule_names(c->id, r1, r2, r3, sizeof(r1));
	gd_call_driver(conn, "AddMatch", g_variant_new("(s)", r1));
	gd_call_driver(conn, "AddMatch", g_variant_new("(s)", r2));
	gd_call_driver(conn, "AddMatch", g_variant_new("(s)", r3));
	/* From here on every message of the test goes through the queue. */
	g_dbus_connection_add_filter(conn, gd_filter, q, NULL);
	__atomic_store_n(&c->st->ready, 1, __ATOMIC_RELEASE);
	wait_all_ready();
	while (phase() == PHASE_SETUP)
		gd_pump(c, conn, q, 1000);

	while (phase() == PHASE_GO && !c->st->disconnected) {
		uint64_t before = c->st->total_replies;

		for (int s = 0; s < N_TARGETS; s++)
			while (c->outstanding[c->targets[s]] < WINDOW)
				gd_send_call(c, conn, s);
		gd_pump(c, conn, q, 2000);
		ticks_owed += c->st->total_replies - before;
		for (; ticks_owed; ticks_owed--)
			gd_send_tick(c, conn);
	}

	deadline = now_usec() + 30000000;
	while (n_outstanding(c) && !c->st->disconnected && now_usec() < deadline)
		gd_pump(c, conn, q, 5000);
	if (n_outstanding(c))
		cerr(c, "%d calls without a reply after 30 s", n_outstanding(c));
	{
		GDBusMessage *m = g_dbus_message_new_signal(OPATH, IFACE, "Done");
		uint32_t n = 0;

		for (int i = 0; i < sh->n; i++)
			n += (uint32_t)c->st->calls_sent[i];
		g_dbus_message_set_body(m, g_variant_new("(uuu)", (uint32_t)c->id,
							 (uint32_t)c->st->ticks_sent, n));
		gd_send(c, conn, m, -1, NULL);
		g_object_unref(m);
	}
	deadline = now_usec() + 30000000;
	while (!all_done(c) && !c->st->disconnected && now_usec() < deadline)
		gd_pump(c, conn, q, 5000);
	if (!all_done(c))
		cerr(c, "not every client's Done arrived within 30 s");
	g_dbus_connection_flush_sync(conn, NULL, NULL);
	__atomic_store_n(&c->st->finished, 1, __ATOMIC_RELEASE);
	while (phase() != PHASE_EXIT)
		gd_pump(c, conn, q, 5000);
	g_dbus_connection_close_sync(conn, NULL, NULL);
	return 0;
}
#endif

/* --- native client (libbus1-client over /dev/bus1) ------------------------ */

static int str_differ(const char *a, const char *b)
{
	return a && b ? strcmp(a, b) : a != b;
}

static int nt_filter(struct b1c_bus *b, struct b1c_message *m, void *ud)
{
	struct client *c = ud;
	const char *sender = b1c_message_get_sender(m);
	const char *sig = b1c_message_get_signature(m);
	const char *member = b1c_message_get_member(m);
	const char *iface = b1c_message_get_interface(m);
	bool has_fd = sig && !strcmp(sig, "uush");
	uint32_t a = 0, x = 0, d = 0;
	const char *s = NULL;
	int fd = -1;

	switch (b1c_message_get_type(m)) {
	case B1C_MESSAGE_SIGNAL:
		if (sender && !strcmp(sender, DRIVER)) {
			if (sig && sig[0] == 's')
				b1c_message_read(m, "s", &s);
			on_name_event(c, member, s);
		} else if (!str_differ(iface, IFACE) && !str_differ(member, "Tick")) {
			if (b1c_message_read(m, "uus", &a, &x, &s) < 0 ||
			    (has_fd && b1c_message_read(m, "h", &fd) < 0))
				cerr(c, "Tick: bad arguments");
			else
				on_tick(c, sender, a, x, s, fd, has_fd);
		} else if (!str_differ(iface, IFACE) && !str_differ(member, "Done")) {
			if (b1c_message_read(m, "uuu", &a, &x, &d) < 0)
				cerr(c, "Done: bad arguments");
			else
				on_done(c, sender, a, x, d);
		}
		return 1;
	case B1C_MESSAGE_METHOD_CALL: {
		int64_t sum = -1;

		if (str_differ(iface, IFACE) || str_differ(member, "Echo"))
			return 0;
		if (b1c_message_read(m, "uus", &a, &x, &s) < 0 ||
		    (has_fd && b1c_message_read(m, "h", &fd) < 0))
			cerr(c, "Echo: bad arguments");
		else
			sum = on_call(c, sender, a, x, s, fd, has_fd);
		/* fd is borrowed from the message */
		if (sum < 0)
			b1c_bus_reply_error(b, m, "org.bus1.ReexecTest.Error", "check failed");
		else if (b1c_bus_reply(b, m, "uu", x, (uint32_t)sum) < 0)
			cerr(c, "cannot reply");
		return 1;
	}
	default:
		return 0;	/* replies go to their call's handler */
	}
}

static int nt_reply_cb(struct b1c_bus *b, struct b1c_message *m, void *ud)
{
	struct out *o = ud;
	struct client *c = o->owner;
	uint32_t seq = 0, sum = 0;

	(void)b;
	if (b1c_message_get_type(m) == B1C_MESSAGE_ERROR)
		on_reply(c, o, b1c_message_get_error_name(m), 0, 0);
	else if (b1c_message_read(m, "uu", &seq, &sum) < 0)
		on_reply(c, o, "(bad reply arguments)", 0, 0);
	else
		on_reply(c, o, NULL, seq, sum);
	return 1;
}

static int nt_noop(struct b1c_bus *b, struct b1c_message *m, void *ud)
{
	(void)b;
	(void)m;
	(void)ud;
	return 0;
}

/* Tick or Echo with the test's arguments (and an fd on some). */
static struct b1c_message *nt_message(struct client *c, const char *dest, const char *member,
				      uint32_t seq, size_t max, int fd)
{
	const char *p = make_payload(c, c->id, seq, max);
	struct b1c_message *m = NULL;
	int r;

	r = dest ? b1c_message_new_method_call(&m, dest, OPATH, IFACE, member,
					       fd >= 0 ? "uush" : "uus")
		 : b1c_message_new_signal(&m, OPATH, IFACE, member, fd >= 0 ? "uush" : "uus");
	if (r >= 0)
		r = b1c_message_append(m, "uus", (uint32_t)c->id, seq, p);
	if (r >= 0 && fd >= 0)
		r = b1c_message_append_fd(m, fd);
	CHECK(r >= 0, "native %s: %s", member, strerror(-r));
	return m;
}

static void nt_send_tick(struct client *c, struct b1c_bus *b)
{
	uint32_t seq = (uint32_t)c->st->ticks_sent + 1;
	int fd = tick_with_fd(seq) ? make_fd("tick", c->id, seq, false) : -1;
	struct b1c_message *m;
	int r;

	CHECK(!tick_with_fd(seq) || fd >= 0, "memfd: %m");
	m = nt_message(c, NULL, "Tick", seq, TICK_PAYLOAD_MAX, fd);
	r = b1c_bus_send(b, m, NULL);
	CHECK(r >= 0, "native Tick: %s", strerror(-r));
	c->st->ticks_sent = seq;
	b1c_message_unref(m);
	if (fd >= 0)
		close(fd);
}

static void nt_send_call(struct client *c, struct b1c_bus *b, int slot)
{
	int t = c->targets[slot];
	const char *dest = slot == 0 ? c->names[t] : sh->c[t].unique;
	uint32_t seq = c->next_seq[t];
	int fd = with_fd(seq) ? make_fd("call", c->id, seq, seq % 4 == 3) : -1;
	struct out *o = out_new(c);
	struct b1c_message *m;
	int r;

	CHECK(o, "no free slot");
	CHECK(!with_fd(seq) || fd >= 0, "fd: %m");
	m = nt_message(c, dest, "Echo", seq, CALL_PAYLOAD_MAX, fd);
	*o = (struct out){ .owner = c, .used = true, .target = t, .seq = seq, .t = now_usec() };
	r = b1c_bus_call_async(b, m, nt_reply_cb, o);
	CHECK(r >= 0, "native Echo: %s", strerror(-r));
	o->serial = b1c_message_get_serial(m);
	c->next_seq[t]++;
	c->outstanding[t]++;
	c->st->calls_sent[t]++;
	b1c_message_unref(m);
	if (fd >= 0)
		close(fd);
}

static void nt_pump(struct client *c, struct b1c_bus *b, uint64_t timeout_usec)
{
	int r;

	while ((r = b1c_bus_process(b)) > 0)
		;
	if (r == 0 && timeout_usec) {
		b1c_bus_wait(b, timeout_usec);
		while ((r = b1c_bus_process(b)) > 0)
			;
	}
	if (r < 0)
		c->st->disconnected = 1;
}

static int run_native(struct client *c)
{
	char r1[256], r2[256], r3[256];
	uint64_t deadline, ticks_owed = 0;
	struct b1c_bus *b = NULL;
	int r;

	CHECK((r = b1c_bus_open(&b, bus.address)) >= 0, "native connect: %s", strerror(-r));
	snprintf(c->st->unique, sizeof(c->st->unique), "%s", b1c_bus_get_unique_name(b));
	CHECK(b1c_bus_add_filter(b, nt_filter, c) >= 0, "filter");
	CHECK((r = b1c_bus_request_name(b, c->names[c->id], 4)) == 1, "RequestName: %d", r);
	rule_names(c->id, r1, r2, r3, sizeof(r1));
	CHECK((r = b1c_bus_add_match(b, r1, nt_noop, NULL)) >= 0, "AddMatch: %s", strerror(-r));
	CHECK((r = b1c_bus_add_match(b, r2, nt_noop, NULL)) >= 0, "AddMatch: %s", strerror(-r));
	CHECK((r = b1c_bus_add_match(b, r3, nt_noop, NULL)) >= 0, "AddMatch: %s", strerror(-r));
	nt_pump(c, b, 0);
	__atomic_store_n(&c->st->ready, 1, __ATOMIC_RELEASE);
	wait_all_ready();
	while (phase() == PHASE_SETUP)
		nt_pump(c, b, 1000);

	while (phase() == PHASE_GO && !c->st->disconnected) {
		uint64_t before = c->st->total_replies;

		for (int s = 0; s < N_TARGETS; s++)
			while (c->outstanding[c->targets[s]] < WINDOW)
				nt_send_call(c, b, s);
		nt_pump(c, b, 2000);
		ticks_owed += c->st->total_replies - before;
		for (; ticks_owed; ticks_owed--)
			nt_send_tick(c, b);
	}

	deadline = now_usec() + 30000000;
	while (n_outstanding(c) && !c->st->disconnected && now_usec() < deadline)
		nt_pump(c, b, 5000);
	if (n_outstanding(c))
		cerr(c, "%d calls without a reply after 30 s", n_outstanding(c));
	{
		uint32_t n = 0;

		for (int i = 0; i < sh->n; i++)
			n += (uint32_t)c->st->calls_sent[i];
		r = b1c_bus_emit_signal(b, OPATH, IFACE, "Done", "uuu", (uint32_t)c->id,
					(uint32_t)c->st->ticks_sent, n);
		if (r < 0)
			cerr(c, "Done: %s", strerror(-r));
	}
	deadline = now_usec() + 30000000;
	while (!all_done(c) && !c->st->disconnected && now_usec() < deadline)
		nt_pump(c, b, 5000);
	if (!all_done(c))
		cerr(c, "not every client's Done arrived within 30 s");
	__atomic_store_n(&c->st->finished, 1, __ATOMIC_RELEASE);
	while (phase() != PHASE_EXIT)
		nt_pump(c, b, 5000);
	b1c_bus_free(b);
	return 0;
}

/* --- the test ------------------------------------------------------------ */

/* The client libraries, in turn: client i uses kinds[i % n_kinds]. */
static const struct {
	const char *name;
	int (*run)(struct client *c);
} kinds[] = {
	{ "libdbus", run_libdbus },
	{ "sd-bus", run_sdbus },
#ifdef HAVE_GDBUS
	{ "GDBus", run_gdbus },
#endif
	{ "native", run_native },	/* only with STRESS_REEXEC_NATIVE=1 */
};

static size_t n_kinds;

/* New lines of the bus log since the last call: counts of resumed and refused lines. */
struct logscan {
	long pos;
	char partial[1024];
	size_t n_partial;
	unsigned int resumed, refused, refused_auth;
	char last_refusal[1024];
};

static void log_scan(struct logscan *ls)
{
	char buf[8192];
	ssize_t r;
	int fd = open(bus.log, O_RDONLY | O_CLOEXEC);

	CHECK(fd >= 0, "open %s: %m", bus.log);
	while ((r = pread(fd, buf, sizeof(buf), ls->pos)) > 0) {
		ls->pos += r;
		for (ssize_t i = 0; i < r; i++) {
			if (buf[i] != '\n') {
				if (ls->n_partial < sizeof(ls->partial) - 1)
					ls->partial[ls->n_partial++] = buf[i];
				continue;
			}
			ls->partial[ls->n_partial] = '\0';
			if (strstr(ls->partial, "re-exec: resumed")) {
				ls->resumed++;
			} else if (strstr(ls->partial, "re-exec refused:")) {
				ls->refused++;
				if (strstr(ls->partial, "authenticating"))
					ls->refused_auth++;
				snprintf(ls->last_refusal, sizeof(ls->last_refusal), "%s",
					 ls->partial);
			}
			ls->n_partial = 0;
		}
	}
	close(fd);
}

static char *get_id(struct rc *c)
{
	DBusMessage *r = rc_driver_call(c, "GetId", NULL);
	const char *id = NULL;
	char *out;

	CHECK(!msg_error(r), "GetId: %s", msg_error(r));
	CHECK(dbus_message_get_args(r, NULL, DBUS_TYPE_STRING, &id, DBUS_TYPE_INVALID), "GetId args");
	out = strdup(id);
	dbus_message_unref(r);
	return out;
}

static uint64_t total_replies(int i)
{
	return __atomic_load_n(&sh->c[i].total_replies, __ATOMIC_ACQUIRE);
}

/* Every client got at least one more reply than in @base (bus serving after a re-exec). */
static void wait_progress(const uint64_t *base, int gen)
{
	uint64_t deadline = now_usec() + 20000000;

	for (int i = 0; i < sh->n; i++) {
		while (total_replies(i) <= base[i]) {
			CHECK(sbus_alive(&bus), "the bus died after re-exec %d", gen);
			if (sh->c[i].errors || sh->c[i].disconnected)
				FAIL("client %d after re-exec %d: %s%s", i, gen,
				     sh->c[i].disconnected ? "disconnected " : "", sh->c[i].error);
			CHECK(now_usec() < deadline,
			      "client %d got no reply within 20 s after re-exec %d", i, gen);
			usleep(500);
		}
	}
}

/* Poll the bus's fd count until it is @want (some closes follow a write). */
/*
 * The bus' open fds, but for timerfds: sd-event opens one per clock the
 * first time a timer on that clock is armed and keeps it, so a process that
 * has just been executed has fewer (at most one per clock, five in all,
 * whatever happens; the bus opens none itself).
 */
static int bus_fd_count(void)
{
	return proc_fd_count_except(bus.pid, "anon_inode:[timerfd]");
}

/* What the bus has open, printed where a count differs. */
static void print_bus_fds(const char *when)
{
	char cmd[128];

	printf("bus fds %s:\n", when);
	fflush(stdout);
	snprintf(cmd, sizeof(cmd), "ls -l /proc/%d/fd | sed 's/.* \\([0-9]* -> \\)/  \\1/'",
		 (int)bus.pid);
	if (system(cmd) != 0)
		printf("  (cannot list)\n");
}

static int wait_fds(int want, int timeout_ms)
{
	uint64_t deadline = now_usec() + (uint64_t)timeout_ms * 1000;
	int n;

	while ((n = bus_fd_count()) != want && now_usec() < deadline)
		usleep(10000);
	if (n != want)
		print_bus_fds("now");
	return n;
}

static void check_bus_pid(pid_t pid0, const char *exe0)
{
	char path[64], exe[512];
	ssize_t n;

	CHECK(sbus_alive(&bus), "the bus is gone");
	CHECK(bus.pid == pid0, "bus pid changed");
	snprintf(path, sizeof(path), "/proc/%d/exe", (int)pid0);
	n = readlink(path, exe, sizeof(exe) - 1);
	CHECK(n > 0, "readlink %s: %m", path);
	exe[n] = '\0';
	CHECK(!strcmp(exe, exe0), "pid %d now runs %s, not %s", (int)pid0, exe, exe0);
}

int main(int argc, char **argv)
{
	const char *env_count = getenv("STRESS_REEXEC_COUNT");
	const char *env_clients = getenv("STRESS_REEXEC_CLIENTS");
	int count = env_count ? atoi(env_count) : 100;
	int n = env_clients ? atoi(env_clients) : 6;
	struct logscan ls = {};
	struct lat stall = {};
	struct rc rc;
	char *id0, *id, exe0[512], path[64];
	int fds0, fds1, fds2, fds3;
	long rules1, names1, rss_first = 0, rss_last = 0, hwm;
	uint64_t t_start, t_go, base[MAX_CLIENTS];
	unsigned int refusals_total = 0;
	pid_t pid0, pids[MAX_CLIENTS];
	ssize_t k;

	/* Native clients need /dev/bus1 (the guest test sets it). */
	n_kinds = sizeof(kinds) / sizeof(kinds[0]) - 1;
	if (getenv("STRESS_REEXEC_NATIVE") && !strcmp(getenv("STRESS_REEXEC_NATIVE"), "1"))
		n_kinds++;
	CHECK(count >= 1, "STRESS_REEXEC_COUNT must be >= 1");
	CHECK(n >= 2 && n <= MAX_CLIENTS, "STRESS_REEXEC_CLIENTS must be 2..%d", MAX_CLIENTS);
	sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	CHECK(sh != MAP_FAILED, "mmap");
	memset(sh, 0, sizeof(*sh));
	sh->n = n;
	setvbuf(stdout, NULL, _IOLBF, 0);

	sbus_start(&bus, argc > 1 ? argv[1] : NULL, argc > 2 ? argv[2] : NULL, 0);
	pid0 = bus.pid;
	snprintf(path, sizeof(path), "/proc/%d/exe", (int)pid0);
	k = readlink(path, exe0, sizeof(exe0) - 1);
	CHECK(k > 0, "readlink %s: %m", path);
	exe0[k] = '\0';
	rc_open(&rc, &bus, true);
	id0 = get_id(&rc);
	fds0 = bus_fd_count();
	printf("bus pid %d, %d clients (", (int)pid0, n);
	for (size_t j = 0; j < n_kinds; j++)
		printf("%s%d %s", j ? ", " : "",
		       (int)((size_t)n / n_kinds + ((size_t)n % n_kinds > j)), kinds[j].name);
	printf("), %d re-execs; bus fds %d idle\n", count, fds0);

	for (int i = 0; i < n; i++) {
		pid_t pid = fork();

		CHECK(pid >= 0, "fork: %m");
		if (pid == 0) {
			struct client *c = malloc(sizeof(*c));

			prctl(PR_SET_PDEATHSIG, SIGKILL);
			close(rc.fd);
			CHECK(c, "oom");
			client_init(c, i);
			_exit(kinds[(size_t)i % n_kinds].run(c));
		}
		pids[i] = pid;
		stress_track_child(pid);
	}
	t_start = now_usec();
	for (int i = 0; i < n; i++) {
		while (!__atomic_load_n(&sh->c[i].ready, __ATOMIC_ACQUIRE)) {
			int st;

			CHECK(waitpid(pids[i], &st, WNOHANG) == 0, "client %d died during setup", i);
			CHECK(now_usec() - t_start < 30000000, "client %d not ready in 30 s", i);
			usleep(1000);
		}
	}
	/* Quiescent point 1: all connected, names and rules in place, nothing in flight. */
	usleep(100000);
	rules1 = rc_bus_stat(&rc, "MatchRules");
	names1 = rc_bus_stat(&rc, "BusNames");
	fds1 = bus_fd_count();
	if (getenv("STRESS_REEXEC_PRINT_FDS"))
		print_bus_fds("with the clients, before the re-execs");
	printf("clients ready: bus fds %d, MatchRules %ld, BusNames %ld, VmRSS %ld KiB\n", fds1,
	       rules1, names1, proc_status_kb(bus.pid, "VmRSS"));

	__atomic_store_n(&sh->phase, PHASE_GO, __ATOMIC_RELEASE);
	t_go = now_usec();
	for (int i = 0; i < n; i++)
		base[i] = 0;
	wait_progress(base, 0);

	for (int gen = 1; gen <= count; gen++) {
		unsigned int refused0 = ls.refused;
		uint64_t t0 = now_usec(), deadline = t0 + 30000000;

		log_scan(&ls);
		CHECK(ls.resumed == (unsigned int)gen - 1, "%u resumed lines before re-exec %d",
		      ls.resumed, gen);
		refused0 = ls.refused;
		for (int i = 0; i < n; i++)
			base[i] = total_replies(i);
		CHECK(kill(bus.pid, SIGUSR2) == 0, "kill: %m");
		for (;;) {
			log_scan(&ls);
			if (ls.resumed >= (unsigned int)gen)
				break;
			CHECK(sbus_alive(&bus), "the bus died at re-exec %d", gen);
			CHECK(now_usec() < deadline, "no \"re-exec: resumed\" within 30 s of re-exec %d"
			      " (%u refusals; last: %s)", gen, ls.refused - refused0, ls.last_refusal);
			if (ls.refused > refused0 + refusals_total * 0) {
				/* refused: the old process keeps serving; try again */
				CHECK(strstr(ls.last_refusal, "authenticating"),
				      "re-exec %d refused for a reason other than a client "
				      "authenticating: %s", gen, ls.last_refusal);
				refusals_total += ls.refused - refused0;
				refused0 = ls.refused;
				usleep(20000);
				CHECK(kill(bus.pid, SIGUSR2) == 0, "kill: %m");
				continue;
			}
			usleep(200);
		}
		lat_add(&stall, now_usec() - t0);
		CHECK(ls.resumed == (unsigned int)gen, "%u resumed lines after re-exec %d",
		      ls.resumed, gen);
		check_bus_pid(pid0, exe0);
		wait_progress(base, gen);
		id = get_id(&rc);
		CHECK(!strcmp(id, id0), "GetId changed at re-exec %d: %s -> %s", gen, id0, id);
		free(id);
		if (gen == 1)
			rss_first = proc_status_kb(bus.pid, "VmRSS");
		if (gen == count)
			rss_last = proc_status_kb(bus.pid, "VmRSS");
		/* land the next one at another point of the traffic */
		usleep((useconds_t)(gen * 7919 % 20) * 1000);
	}
	printf("%d re-execs in %.2f s of traffic, %u refusals (client authenticating)\n", count,
	       (double)(now_usec() - t_go) / 1e6, refusals_total);

	__atomic_store_n(&sh->phase, PHASE_STOP, __ATOMIC_RELEASE);
	for (int i = 0; i < n; i++) {
		uint64_t deadline = now_usec() + 90000000;

		while (!__atomic_load_n(&sh->c[i].finished, __ATOMIC_ACQUIRE)) {
			int st;

			CHECK(waitpid(pids[i], &st, WNOHANG) == 0, "client %d died", i);
			CHECK(now_usec() < deadline, "client %d did not finish within 90 s", i);
			usleep(1000);
		}
	}

	/* Quiescent point 2: same clients, nothing in flight. */
	{
		uint64_t calls = 0, ticks = 0, fdsc = 0, gap = 0, deliveries = 0;

		for (int i = 0; i < n; i++) {
			struct cstat *s = &sh->c[i];

			CHECK(!s->disconnected, "client %d was disconnected", i);
			CHECK(!s->errors, "client %d: %d errors, first: %s", i, s->errors, s->error);
			CHECK(!s->name_events, "client %d saw %d name events, first: %s", i,
			      s->name_events, s->name_event);
			for (int j = 0; j < n; j++) {
				struct cstat *t = &sh->c[j];

				CHECK(s->calls_sent[j] == s->replies[j], "client %d -> %d: %llu calls,"
				      " %llu replies", i, j, (unsigned long long)s->calls_sent[j],
				      (unsigned long long)s->replies[j]);
				CHECK(s->calls_sent[j] == t->calls_recv[i], "client %d -> %d: %llu "
				      "calls sent, %llu received", i, j,
				      (unsigned long long)s->calls_sent[j],
				      (unsigned long long)t->calls_recv[i]);
				CHECK(t->ticks_recv[i] == s->ticks_sent, "client %d's Ticks: %llu sent, "
				      "%llu at client %d", i, (unsigned long long)s->ticks_sent,
				      (unsigned long long)t->ticks_recv[i], j);
				CHECK(t->done_seen[i] && t->done_ticks[i] == s->ticks_sent,
				      "client %d's Done at client %d", i, j);
				deliveries += t->ticks_recv[i];
			}
			for (int j = 0; j < N_TARGETS; j++)
				CHECK(s->calls_sent[(i + 1 + j) % n] > 0, "client %d made no call", i);
			calls += s->replies[(i + 1) % n] + s->replies[(i + 2) % n];
			ticks += s->ticks_sent;
			fdsc += s->fds_checked;
			if (s->max_reply_gap_us > gap)
				gap = s->max_reply_gap_us;
		}
		for (int i = 0; i < n; i++) {
			char name[64];
			DBusMessage *r;
			const char *owner = NULL;

			snprintf(name, sizeof(name), NAME_FMT, i);
			r = rc_driver_call(&rc, "GetNameOwner", name);
			CHECK(!msg_error(r), "GetNameOwner %s: %s", name, msg_error(r));
			CHECK(dbus_message_get_args(r, NULL, DBUS_TYPE_STRING, &owner, DBUS_TYPE_INVALID),
			      "args");
			CHECK_STR(owner, sh->c[i].unique);
			dbus_message_unref(r);
		}
		CHECK_EQ(rc_bus_stat(&rc, "MatchRules"), rules1);
		CHECK_EQ(rc_bus_stat(&rc, "BusNames"), names1);
		fds2 = wait_fds(fds1, 3000);
		printf("calls answered %llu, Ticks sent %llu (%llu deliveries), fds checked %llu\n",
		       (unsigned long long)calls, (unsigned long long)ticks,
		       (unsigned long long)deliveries, (unsigned long long)fdsc);
		printf("longest gap between two replies at a client: %.1f ms\n", (double)gap / 1e3);
	}
	printf("bus fds: %d idle, %d with the clients before, %d after %d re-execs\n", fds0, fds1,
	       fds2, count);
	CHECK(fds2 == fds1, "bus fds with the clients: %d before the re-execs, %d after", fds1, fds2);

	__atomic_store_n(&sh->phase, PHASE_EXIT, __ATOMIC_RELEASE);
	for (int i = 0; i < n; i++) {
		int st;
		uint64_t deadline = now_usec() + 30000000;
		pid_t r;

		while ((r = waitpid(pids[i], &st, WNOHANG)) == 0) {
			CHECK(now_usec() < deadline, "client %d did not exit", i);
			usleep(1000);
		}
		CHECK(r == pids[i] && WIFEXITED(st) && WEXITSTATUS(st) == 0,
		      "client %d ended badly (status 0x%x)", i, st);
	}
	fds3 = wait_fds(fds0, 5000);
	printf("bus fds after the clients left: %d (idle before: %d)\n", fds3, fds0);
	CHECK(fds3 == fds0, "bus fds: %d before the clients, %d after", fds0, fds3);
	id = get_id(&rc);
	CHECK_STR(id, id0);
	free(id);
	check_bus_pid(pid0, exe0);

	lat_print("stall: SIGUSR2 -> \"re-exec: resumed\"", &stall);
	printf("  stall median %.1f ms, worst %.1f ms\n", (double)lat_pct(&stall, 50) / 1e3,
	       (double)lat_pct(&stall, 100) / 1e3);
	hwm = proc_status_kb(bus.pid, "VmHWM");
	printf("bus VmRSS %ld KiB after re-exec 1, %ld KiB after re-exec %d (bound %ld), "
	       "VmHWM %ld KiB\n", rss_first, rss_last, count, 2 * rss_first + 4096, hwm);
	CHECK_MEM(rss_last < 2 * rss_first + 4096, "VmRSS %ld KiB after %d re-execs, %ld after the "
		  "first", rss_last, count, rss_first);

	rc_close(&rc);
	free(id0);
	lat_free(&stall);
	sbus_stop(&bus);
	printf("ok\n");
	return 0;
}
