/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * bench-dbus: the libdbus side of bench/run.
 *
 * One program, one mode per invocation. Every mode connects with unchanged
 * libdbus (private connections, Hello through dbus_bus_register), runs one
 * measurement and prints a single "ok key=value ..." line on stdout, or an
 * error on stderr with a non-zero exit status. bench/run starts the echo
 * server once per bus and then runs the other modes against it.
 *
 * The "reexec" mode is interactive: bench/run drives it over stdin/stdout
 * while it sends the bus SIGUSR2 (see mode_reexec()).
 *
 * The "floor" mode needs no bus: it ping-pongs the same payload between two
 * processes over a socketpair, the cheapest possible round trip that a
 * brokered call (two socket crossings each way) can be compared with.
 */

#include <dbus/dbus.h>
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench-util.h"
#include "util/macro.h"

#define BENCH_NAME "org.bus1.Bench"
#define BENCH_PATH "/org/bus1/Bench"
#define BENCH_IFACE "org.bus1.Bench"
#define FANOUT_IFACE "org.bus1.Bench.Fanout"
#define RULES_IFACE "org.bus1.Bench.Rules"

/* Generous: a 1 MiB call on a loaded 2-core machine can take a while. */
#define CALL_TIMEOUT_MS (60 * 1000)
/* Poll timeout after which a run that waits for messages is declared stuck. */
#define STALL_TIMEOUT_MS (30 * 1000)
/* Upper bounds on command-line values, so bad input cannot ask for unbounded memory. */
#define MAX_RULES 1000000ULL
#define MAX_CONNS 100000ULL
/* Unmeasured calls before a call row: a tenth of the count, at most this. */
#define WARMUP_MAX 500ULL

static pid_t arg_pid = -1;
/* A process between client and bus (xdg-dbus-proxy): its CPU is reported apart. */
static pid_t arg_proxy_pid = -1;

static void conn_close(DBusConnection *c)
{
	dbus_connection_close(c);
	dbus_connection_unref(c);
}
DEFINE_CLEANUP_FUNC(DBusConnection *, conn_close);
DEFINE_CLEANUP_FUNC(DBusMessage *, dbus_message_unref);

static DBusConnection *conn_open(const char *address)
{
	DBusError err = DBUS_ERROR_INIT;
	DBusConnection *c;

	c = dbus_connection_open_private(address, &err);
	if (!c) {
		fprintf(stderr, "connect %s: %s: %s\n", address, err.name, err.message);
		dbus_error_free(&err);
		return NULL;
	}
	dbus_connection_set_exit_on_disconnect(c, FALSE);
	if (!dbus_bus_register(c, &err)) {
		fprintf(stderr, "Hello on %s: %s: %s\n", address, err.name, err.message);
		dbus_error_free(&err);
		conn_close(c);
		return NULL;
	}
	return c;
}

static int conn_fd(DBusConnection *c)
{
	int fd = -1;

	if (!dbus_connection_get_unix_fd(c, &fd))
		return -1;
	return fd;
}

static DBusMessage *echo_call_new(const uint8_t *payload, size_t size)
{
	DBusMessage *m;

	m = dbus_message_new_method_call(BENCH_NAME, BENCH_PATH, BENCH_IFACE, "Echo");
	if (!m)
		return NULL;
	/* 0 B means a call without a body at all, not an empty array. */
	if (size > 0 && !dbus_message_append_args(m, DBUS_TYPE_ARRAY, DBUS_TYPE_BYTE, &payload,
						  (int)size, DBUS_TYPE_INVALID)) {
		dbus_message_unref(m);
		return NULL;
	}
	return m;
}

/* Returns the payload length of an Echo reply, or -1 if it is not one. */
static long reply_payload_len(DBusMessage *reply)
{
	DBusMessageIter it, sub;
	const uint8_t *p;
	int n = 0;

	if (dbus_message_get_type(reply) != DBUS_MESSAGE_TYPE_METHOD_RETURN)
		return -1;
	if (!dbus_message_iter_init(reply, &it))
		return 0;
	if (dbus_message_iter_get_arg_type(&it) != DBUS_TYPE_ARRAY ||
	    dbus_message_iter_get_element_type(&it) != DBUS_TYPE_BYTE)
		return -1;
	dbus_message_iter_recurse(&it, &sub);
	dbus_message_iter_get_fixed_array(&sub, &p, &n);
	return n;
}

static void print_error_reply(const char *what, DBusMessage *m)
{
	const char *text = "";

	if (dbus_message_get_type(m) == DBUS_MESSAGE_TYPE_ERROR)
		dbus_message_get_args(m, NULL, DBUS_TYPE_STRING, &text, DBUS_TYPE_INVALID);
	fprintf(stderr, "%s: unexpected reply type %d %s: %s\n", what, dbus_message_get_type(m),
		dbus_message_get_error_name(m) ?: "", text);
}

/* ---- ping: Hello, then one call to the bus driver ---- */

static int mode_ping(const char *address)
{
	_cleanup_(conn_closep) DBusConnection *c = NULL;
	DBusError err = DBUS_ERROR_INIT;

	c = conn_open(address);
	if (!c)
		return 1;
	/* NameHasOwner on our own unique name must say yes on any bus. */
	if (!dbus_bus_name_has_owner(c, dbus_bus_get_unique_name(c), &err)) {
		fprintf(stderr, "NameHasOwner: %s: %s\n", err.name ?: "false", err.message ?: "");
		dbus_error_free(&err);
		return 1;
	}
	printf("ok unique=%s\n", dbus_bus_get_unique_name(c));
	return 0;
}

/* ---- serve: the echo service every call row talks to ---- */

static int serve_one(DBusConnection *c, DBusMessage *m)
{
	_cleanup_(dbus_message_unrefp) DBusMessage *reply = NULL;
	DBusMessageIter it, sub;
	const uint8_t *p = NULL;
	int n = 0;

	if (dbus_message_get_type(m) != DBUS_MESSAGE_TYPE_METHOD_CALL)
		return 0;
	if (dbus_message_is_method_call(m, BENCH_IFACE, "Echo")) {
		reply = dbus_message_new_method_return(m);
		if (!reply)
			return -ENOMEM;
		if (dbus_message_iter_init(m, &it) &&
		    dbus_message_iter_get_arg_type(&it) == DBUS_TYPE_ARRAY &&
		    dbus_message_iter_get_element_type(&it) == DBUS_TYPE_BYTE) {
			dbus_message_iter_recurse(&it, &sub);
			dbus_message_iter_get_fixed_array(&sub, &p, &n);
			if (!dbus_message_append_args(reply, DBUS_TYPE_ARRAY, DBUS_TYPE_BYTE, &p, n,
						      DBUS_TYPE_INVALID))
				return -ENOMEM;
		}
	} else {
		reply = dbus_message_new_error(m, DBUS_ERROR_UNKNOWN_METHOD,
					       "bench: no such method");
		if (!reply)
			return -ENOMEM;
	}
	if (dbus_message_get_no_reply(m))
		return 0;
	if (!dbus_connection_send(c, reply, NULL))
		return -ENOMEM;
	return 0;
}

static int mode_serve(const char *address)
{
	_cleanup_(conn_closep) DBusConnection *c = NULL;
	DBusError err = DBUS_ERROR_INIT;
	DBusMessage *m;
	int r;

	c = conn_open(address);
	if (!c)
		return 1;
	r = dbus_bus_request_name(c, BENCH_NAME, DBUS_NAME_FLAG_DO_NOT_QUEUE, &err);
	if (r != DBUS_REQUEST_NAME_REPLY_PRIMARY_OWNER) {
		fprintf(stderr, "RequestName %s: %d %s %s\n", BENCH_NAME, r, err.name ?: "",
			err.message ?: "");
		dbus_error_free(&err);
		return 1;
	}
	printf("ready %s\n", dbus_bus_get_unique_name(c));
	fflush(stdout);

	/* Runs until the bus goes away or bench/run kills us. */
	while (dbus_connection_read_write(c, -1)) {
		while ((m = dbus_connection_pop_message(c))) {
			r = serve_one(c, m);
			dbus_message_unref(m);
			if (r < 0) {
				fprintf(stderr, "serve: out of memory\n");
				return 1;
			}
		}
	}
	return 0;
}

/* ---- calls: sequential Echo round trips ---- */

/* One blocking Echo call; returns its round-trip time in ns, or 0 on failure. */
static uint64_t echo_roundtrip(DBusConnection *c, const uint8_t *payload, size_t size)
{
	_cleanup_(dbus_message_unrefp) DBusMessage *m = NULL, *reply = NULL;
	DBusError err = DBUS_ERROR_INIT;
	uint64_t t;

	m = echo_call_new(payload, size);
	if (!m)
		return 0;
	t = bench_now_ns();
	reply = dbus_connection_send_with_reply_and_block(c, m, CALL_TIMEOUT_MS, &err);
	if (!reply) {
		fprintf(stderr, "Echo call: %s: %s\n", err.name, err.message);
		dbus_error_free(&err);
		return 0;
	}
	t = bench_now_ns() - t;
	if (reply_payload_len(reply) != (long)size) {
		fprintf(stderr, "Echo call: reply carries %ld bytes, sent %zu\n",
			reply_payload_len(reply), size);
		return 0;
	}
	return t ?: 1;
}

static int mode_calls(const char *address, size_t size, uint64_t count)
{
	_cleanup_(conn_closep) DBusConnection *c = NULL;
	_cleanup_(bench_samples_deinit) BenchSamples s = {};
	_cleanup_free_ uint8_t *payload = NULL;
	uint64_t t0, t, i;
	int64_t cpu0, cpu1, pcpu0 = -1, pcpu1 = -1;
	char extra[192];
	int k;

	payload = malloc(size ? size : 1);
	if (!payload || bench_samples_init(&s, count) < 0)
		return 1;
	memset(payload, 0xa5, size);
	c = conn_open(address);
	if (!c)
		return 1;

	/* Warm up caches and buffers on every side; not measured. */
	for (i = 0; i < MIN(count / 10, WARMUP_MAX); i++)
		if (!echo_roundtrip(c, payload, size))
			return 1;

	if (arg_proxy_pid > 0)
		pcpu0 = bench_proc_cpu_ns(arg_proxy_pid);
	cpu0 = bench_proc_cpu_ns(arg_pid);
	t0 = bench_now_ns();
	for (i = 0; i < count; i++) {
		t = echo_roundtrip(c, payload, size);
		if (!t) {
			fprintf(stderr, "call %" PRIu64 " of %" PRIu64 " failed\n", i, count);
			return 1;
		}
		bench_samples_add(&s, t);
	}
	t = bench_now_ns() - t0;
	cpu1 = bench_proc_cpu_ns(arg_pid);
	if (arg_proxy_pid > 0)
		pcpu1 = bench_proc_cpu_ns(arg_proxy_pid);
	k = snprintf(extra, sizeof(extra), "p50_us=%.2f p99_us=%.2f",
		     bench_samples_percentile_us(&s, 50), bench_samples_percentile_us(&s, 99));
	if (pcpu0 >= 0 && pcpu1 >= pcpu0)
		snprintf(extra + k, sizeof(extra) - (size_t)k, " proxy_cpu_ns=%" PRId64,
			 pcpu1 - pcpu0);
	bench_report(count, t, cpu0, cpu1, extra);
	return 0;
}

/* ---- pipeline: up to DEPTH calls outstanding ---- */

static int mode_pipeline(const char *address, size_t size, uint64_t count, uint64_t depth)
{
	_cleanup_(conn_closep) DBusConnection *c = NULL;
	_cleanup_free_ uint8_t *payload = NULL;
	uint64_t sent = 0, done = 0, t0, t, i;
	int64_t cpu0, cpu1;
	DBusMessage *m;

	payload = malloc(size ? size : 1);
	if (!payload)
		return 1;
	memset(payload, 0x5a, size);
	c = conn_open(address);
	if (!c)
		return 1;
	for (i = 0; i < MIN(count / 100, WARMUP_MAX); i++)
		if (!echo_roundtrip(c, payload, size))
			return 1;

	cpu0 = bench_proc_cpu_ns(arg_pid);
	t0 = bench_now_ns();
	while (done < count) {
		while (sent < count && sent - done < depth) {
			_cleanup_(dbus_message_unrefp) DBusMessage *call = NULL;

			call = echo_call_new(payload, size);
			if (!call || !dbus_connection_send(c, call, NULL))
				return 1;
			sent++;
		}
		if (!dbus_connection_read_write(c, STALL_TIMEOUT_MS)) {
			fprintf(stderr, "pipeline: disconnected after %" PRIu64 " replies\n", done);
			return 1;
		}
		while ((m = dbus_connection_pop_message(c))) {
			int type = dbus_message_get_type(m);

			if (type == DBUS_MESSAGE_TYPE_METHOD_RETURN) {
				done++;
			} else if (type == DBUS_MESSAGE_TYPE_ERROR) {
				print_error_reply("pipeline", m);
				dbus_message_unref(m);
				return 1;
			}
			dbus_message_unref(m);
		}
	}
	t = bench_now_ns() - t0;
	cpu1 = bench_proc_cpu_ns(arg_pid);
	bench_report(count, t, cpu0, cpu1, NULL);
	return 0;
}

/* ---- fanout: one emitter, N subscribers in this process ---- */

typedef struct Fanout {
	DBusConnection *emitter;
	DBusConnection **subs;
	uint64_t *received;
	struct pollfd *pfd;
	size_t n_subs;
} Fanout;

static void fanout_deinit(Fanout *f)
{
	size_t i;

	for (i = 0; f->subs && i < f->n_subs; i++)
		if (f->subs[i])
			conn_close(f->subs[i]);
	if (f->emitter)
		conn_close(f->emitter);
	free(f->subs);
	free(f->received);
	free(f->pfd);
	*f = (Fanout){};
}

static int fanout_init(Fanout *f, const char *address, size_t n_subs)
{
	DBusError err = DBUS_ERROR_INIT;
	size_t i;

	*f = (Fanout){ .n_subs = n_subs };
	f->subs = calloc(n_subs, sizeof(*f->subs));
	f->received = calloc(n_subs, sizeof(*f->received));
	f->pfd = calloc(n_subs + 1, sizeof(*f->pfd));
	if (!f->subs || !f->received || !f->pfd)
		return -ENOMEM;
	f->emitter = conn_open(address);
	if (!f->emitter)
		return -EIO;
	for (i = 0; i < n_subs; i++) {
		f->subs[i] = conn_open(address);
		if (!f->subs[i])
			return -EIO;
		/* Blocking AddMatch: the rule is active once it returns. */
		dbus_bus_add_match(f->subs[i], "type='signal',interface='" FANOUT_IFACE "'", &err);
		if (dbus_error_is_set(&err)) {
			fprintf(stderr, "AddMatch: %s: %s\n", err.name, err.message);
			dbus_error_free(&err);
			return -EIO;
		}
		f->pfd[i] = (struct pollfd){ .fd = conn_fd(f->subs[i]), .events = POLLIN };
	}
	f->pfd[n_subs] = (struct pollfd){ .fd = conn_fd(f->emitter) };
	return 0;
}

static int fanout_emit(Fanout *f)
{
	_cleanup_(dbus_message_unrefp) DBusMessage *m = NULL;

	m = dbus_message_new_signal(BENCH_PATH, FANOUT_IFACE, "Tick");
	if (!m || !dbus_connection_send(f->emitter, m, NULL))
		return -ENOMEM;
	return 0;
}

static uint64_t fanout_min_received(Fanout *f)
{
	uint64_t min = UINT64_MAX;
	size_t i;

	for (i = 0; i < f->n_subs; i++)
		min = MIN(min, f->received[i]);
	return min;
}

/* Wait for traffic, flush the emitter, and count signals at the subscribers. */
static int fanout_pump(Fanout *f)
{
	DBusMessage *m;
	size_t i;
	int r;

	f->pfd[f->n_subs].events = dbus_connection_has_messages_to_send(f->emitter) ? POLLOUT : 0;
	r = poll(f->pfd, f->n_subs + 1, STALL_TIMEOUT_MS);
	if (r < 0)
		return errno == EINTR ? 0 : -errno;
	if (r == 0) {
		fprintf(stderr, "fanout: no traffic for %d ms (signals lost?)\n", STALL_TIMEOUT_MS);
		return -ETIMEDOUT;
	}
	if (f->pfd[f->n_subs].revents && !dbus_connection_read_write(f->emitter, 0))
		return -ECONNRESET;
	for (i = 0; i < f->n_subs; i++) {
		if (!f->pfd[i].revents)
			continue;
		if (!dbus_connection_read_write(f->subs[i], 0))
			return -ECONNRESET;
		while ((m = dbus_connection_pop_message(f->subs[i]))) {
			if (dbus_message_is_signal(m, FANOUT_IFACE, "Tick"))
				f->received[i]++;
			dbus_message_unref(m);
		}
	}
	return 0;
}

static int mode_fanout(const char *address, size_t n_subs, uint64_t count, uint64_t rounds)
{
	_cleanup_(fanout_deinit) Fanout f = {};
	_cleanup_(bench_samples_deinit) BenchSamples s = {};
	/* Signals in flight beyond the slowest subscriber; keeps every queue bounded. */
	const uint64_t window = 64;
	uint64_t sent = 0, t0, t, i, base;
	int64_t cpu0, cpu1;
	char extra[160];
	int r;

	if (bench_samples_init(&s, rounds) < 0)
		return 1;
	bench_raise_fd_limit();
	r = fanout_init(&f, address, n_subs);
	if (r < 0)
		return 1;

	/* Throughput: every subscriber must see every signal. */
	cpu0 = bench_proc_cpu_ns(arg_pid);
	t0 = bench_now_ns();
	while (fanout_min_received(&f) < count) {
		while (sent < count && sent - fanout_min_received(&f) < window) {
			if (fanout_emit(&f) < 0)
				return 1;
			sent++;
		}
		r = fanout_pump(&f);
		if (r < 0) {
			fprintf(stderr, "fanout: %s after %" PRIu64 " signals\n", strerror(-r),
				sent);
			return 1;
		}
	}
	t = bench_now_ns() - t0;
	cpu1 = bench_proc_cpu_ns(arg_pid);

	/* Latency: one signal at a time, until the last subscriber has it. */
	for (i = 0; i < rounds; i++) {
		uint64_t ts = bench_now_ns();

		base = count + i;
		if (fanout_emit(&f) < 0)
			return 1;
		while (fanout_min_received(&f) <= base) {
			r = fanout_pump(&f);
			if (r < 0) {
				fprintf(stderr, "fanout latency: %s\n", strerror(-r));
				return 1;
			}
		}
		bench_samples_add(&s, bench_now_ns() - ts);
	}
	snprintf(extra, sizeof(extra), "deliveries=%" PRIu64 " all_p50_us=%.2f all_p99_us=%.2f",
		 count * n_subs, bench_samples_percentile_us(&s, 50),
		 bench_samples_percentile_us(&s, 99));
	/* ops are deliveries: one signal reaching one subscriber. */
	bench_report(count * n_subs, t, cpu0, cpu1, extra);
	return 0;
}

/* ---- churn: connect + auth + Hello + one call + disconnect ---- */

/* The "ok" line of @ops done since @t0, the bus having used @cpu0 then. */
static void report_since(uint64_t ops, uint64_t t0, int64_t cpu0)
{
	uint64_t t = bench_now_ns() - t0;

	bench_report(ops, t, cpu0, bench_proc_cpu_ns(arg_pid), NULL);
}

static int mode_churn(const char *address, uint64_t count)
{
	DBusError err = DBUS_ERROR_INIT;
	uint64_t i, t0;
	int64_t cpu0;

	cpu0 = bench_proc_cpu_ns(arg_pid);
	t0 = bench_now_ns();
	for (i = 0; i < count; i++) {
		_cleanup_(conn_closep) DBusConnection *c = NULL;
		_cleanup_(dbus_message_unrefp) DBusMessage *m = NULL, *reply = NULL;

		c = conn_open(address);
		if (!c)
			return 1;
		m = echo_call_new(NULL, 0);
		if (!m)
			return 1;
		reply = dbus_connection_send_with_reply_and_block(c, m, CALL_TIMEOUT_MS, &err);
		if (!reply) {
			fprintf(stderr, "churn call %" PRIu64 ": %s: %s\n", i, err.name,
				err.message);
			dbus_error_free(&err);
			return 1;
		}
	}
	report_since(count, t0, cpu0);
	return 0;
}

/* ---- names: RequestName then ReleaseName, one round trip each ---- */

static int mode_names(const char *address, uint64_t count)
{
	_cleanup_(conn_closep) DBusConnection *c = conn_open(address);
	DBusError err = DBUS_ERROR_INIT;
	uint64_t i, t0;
	int64_t cpu0;

	if (!c)
		return 1;
	cpu0 = bench_proc_cpu_ns(arg_pid);
	t0 = bench_now_ns();
	for (i = 0; i < count; i++) {
		int r = dbus_bus_request_name(c, BENCH_NAME ".Names", DBUS_NAME_FLAG_DO_NOT_QUEUE,
					      &err);

		if (r == DBUS_REQUEST_NAME_REPLY_PRIMARY_OWNER)
			r = dbus_bus_release_name(c, BENCH_NAME ".Names", &err);
		if (r != DBUS_RELEASE_NAME_REPLY_RELEASED) {
			fprintf(stderr, "names %" PRIu64 ": %s: %s\n", i,
				err.name ? err.name : "unexpected reply", err.message ? err.message : "");
			dbus_error_free(&err);
			return 1;
		}
	}
	/* ops are pairs: one name acquired and released. */
	report_since(count, t0, cpu0);
	return 0;
}

/* ---- matches: a signal nobody subscribed to, with N rules installed ---- */

static int install_rules(DBusConnection *c, uint64_t n_rules)
{
	/* Pipelined AddMatch: a blocking round trip each would dominate setup. */
	const uint64_t window = 256;
	uint64_t sent = 0, done = 0;
	DBusMessage *m;

	while (done < n_rules) {
		while (sent < n_rules && sent - done < window) {
			_cleanup_(dbus_message_unrefp) DBusMessage *call = NULL;
			char rule[160];
			const char *p = rule;

			snprintf(rule, sizeof(rule),
				 "type='signal',interface='" RULES_IFACE "',member='R%" PRIu64 "'",
				 sent);
			call = dbus_message_new_method_call(DBUS_SERVICE_DBUS, DBUS_PATH_DBUS,
							    DBUS_INTERFACE_DBUS, "AddMatch");
			if (!call || !dbus_message_append_args(call, DBUS_TYPE_STRING, &p,
							       DBUS_TYPE_INVALID) ||
			    !dbus_connection_send(c, call, NULL))
				return -ENOMEM;
			sent++;
		}
		if (!dbus_connection_read_write(c, STALL_TIMEOUT_MS))
			return -ECONNRESET;
		while ((m = dbus_connection_pop_message(c))) {
			int type = dbus_message_get_type(m);

			if (type == DBUS_MESSAGE_TYPE_METHOD_RETURN) {
				done++;
			} else if (type == DBUS_MESSAGE_TYPE_ERROR) {
				print_error_reply("AddMatch", m);
				dbus_message_unref(m);
				return -EIO;
			}
			dbus_message_unref(m);
		}
	}
	return 0;
}

/* Append " KEY=VALUE" to the NUL-terminated @buf of @size bytes. */
static void append_kv(char *buf, size_t size, const char *key, int64_t v)
{
	size_t n = strlen(buf);

	if (n < size)
		snprintf(buf + n, size - n, " %s=%" PRId64, key, v);
}

static int mode_matches(const char *address, uint64_t n_rules, uint64_t count)
{
	_cleanup_(conn_closep) DBusConnection *holder = NULL, *emitter = NULL;
	_cleanup_(dbus_message_unrefp) DBusMessage *call = NULL, *reply = NULL;
	DBusError err = DBUS_ERROR_INIT;
	uint64_t i, t0, t;
	int64_t cpu0, cpu1, sleeps0, sleeps1, own0, own1, pre0, pre1;
	char extra[160];

	holder = conn_open(address);
	emitter = conn_open(address);
	if (!holder || !emitter)
		return 1;
	if (install_rules(holder, n_rules) < 0) {
		fprintf(stderr, "matches: installing %" PRIu64 " rules failed\n", n_rules);
		return 1;
	}

	/*
	 * Emitter and bus share the CPU (--cpus 0, or the wakeup places the bus
	 * next to us): the rate also depends on what the bus costs us, how
	 * often it ran dry, slept and was woken by our next signal, and how
	 * often that wakeup preempted us. Those are reported with the rate.
	 */
	sleeps0 = bench_proc_sleeps(arg_pid);
	own0 = bench_self_cpu_ns();
	pre0 = bench_self_preempted();
	cpu0 = bench_proc_cpu_ns(arg_pid);
	t0 = bench_now_ns();
	for (i = 0; i < count; i++) {
		_cleanup_(dbus_message_unrefp) DBusMessage *m = NULL;

		/* Same interface as every rule, a member none of them names. */
		m = dbus_message_new_signal(BENCH_PATH, RULES_IFACE, "Unmatched");
		if (!m || !dbus_connection_send(emitter, m, NULL))
			return 1;
		/* Flushing now and then lets the bus push back on us. */
		if (i % 64 == 63)
			dbus_connection_flush(emitter);
	}
	/* The bus handles our messages in order: the reply means it routed them all. */
	call = echo_call_new(NULL, 0);
	if (!call)
		return 1;
	reply = dbus_connection_send_with_reply_and_block(emitter, call, CALL_TIMEOUT_MS, &err);
	if (!reply) {
		fprintf(stderr, "matches: final call: %s: %s\n", err.name, err.message);
		dbus_error_free(&err);
		return 1;
	}
	t = bench_now_ns() - t0;
	cpu1 = bench_proc_cpu_ns(arg_pid);
	pre1 = bench_self_preempted();
	own1 = bench_self_cpu_ns();
	sleeps1 = bench_proc_sleeps(arg_pid);
	snprintf(extra, sizeof(extra), "rules=%" PRIu64, n_rules);
	if (own0 >= 0 && own1 >= own0)
		append_kv(extra, sizeof(extra), "client_cpu_ns", own1 - own0);
	if (pre0 >= 0 && pre1 >= pre0)
		append_kv(extra, sizeof(extra), "client_preempted", pre1 - pre0);
	if (sleeps0 >= 0 && sleeps1 >= sleeps0)
		append_kv(extra, sizeof(extra), "bus_sleeps", sleeps1 - sleeps0);
	bench_report(count, t, cpu0, cpu1, extra);
	return 0;
}

/* ---- conns: RSS of the bus idle and with N connections ---- */

/* Opens @n connections (each with Hello) into @c, which the caller closes. */
static int conns_open(const char *address, DBusConnection **c, uint64_t n, const char *what)
{
	uint64_t i;

	for (i = 0; i < n; i++) {
		c[i] = conn_open(address);
		if (!c[i]) {
			fprintf(stderr, "%s: connection %" PRIu64 " failed\n", what, i);
			return -EIO;
		}
	}
	return 0;
}

static int mode_conns(const char *address, uint64_t n)
{
	_cleanup_free_ DBusConnection **c = NULL;
	long rss0, rss1;
	uint64_t i, t0, t;
	int64_t cpu0, cpu1;
	char extra[128];
	int ret = 1;

	if (arg_pid <= 0) {
		fprintf(stderr, "conns: --pid of the bus is required\n");
		return 2;
	}
	bench_raise_fd_limit();
	c = calloc(n ? n : 1, sizeof(*c));
	if (!c)
		return 1;
	rss0 = bench_proc_rss_kib(arg_pid);
	cpu0 = bench_proc_cpu_ns(arg_pid);
	t0 = bench_now_ns();
	if (conns_open(address, c, n, "conns") < 0)
		goto out;
	/* Every Hello has been answered, so the bus has set up all of them. */
	t = bench_now_ns() - t0;
	cpu1 = bench_proc_cpu_ns(arg_pid);
	rss1 = bench_proc_rss_kib(arg_pid);
	snprintf(extra, sizeof(extra), "rss_idle_kib=%ld rss_kib=%ld", rss0, rss1);
	bench_report(n, t, cpu0, cpu1, extra);
	ret = 0;
out:
	for (i = 0; i < n; i++)
		if (c[i])
			conn_close(c[i]);
	return ret;
}

/*
 * ---- reexec: how long clients stall while the bus re-executes itself ----
 *
 * Driven by bench/run over stdin/stdout, because the signal and the bus's log
 * are its business. Sets up CONNS connections holding NAMES well-known names
 * and RULES match rules between them (name or rule j belongs to connection
 * j % CONNS), plus one pinger connection, then prints "ready ...". Commands,
 * one per line:
 *
 *   round   the pinger sends org.freedesktop.DBus.Peer.Ping to the driver,
 *           one in flight, back to back; after a few replies it prints
 *           "pinging" (bench/run then sends SIGUSR2 and waits for the bus to
 *           log that it resumed)
 *   end     waits for one more reply (so a stall in progress is closed), stops
 *           and prints "gap max_us=... p50_us=... pings=...": the largest and
 *           the median time between consecutive replies of the round
 *   verify  checks that the state came through: GetId unchanged, every held
 *           connection answers a Ping, ListNames has every unique and
 *           well-known name, GetNameOwner of every well-known name is the
 *           connection that asked for it, and every connection with a rule
 *           receives a signal its first rule matches; prints "ok ..." and exits
 */

#define REEXEC_IFACE "org.bus1.Bench.Reexec"
#define REEXEC_NAME_PREFIX "org.bus1.Bench.Reexec.N"
/* Replies of a round kept for its median; the maximum sees all of them. */
#define REEXEC_GAPS_MAX 2000000

/* One line from stdin without stdio buffering (poll() must see what is left). */
static int read_cmd(char *buf, size_t size)
{
	size_t n = 0;
	ssize_t l;
	char ch;

	for (;;) {
		l = read(STDIN_FILENO, &ch, 1);
		if (l < 0 && errno == EINTR)
			continue;
		if (l <= 0)
			return -EPIPE;
		if (ch == '\n')
			break;
		if (n + 1 < size)
			buf[n++] = ch;
	}
	buf[n] = 0;
	return 0;
}

static int driver_send(DBusConnection *c, const char *iface, const char *member,
		       const char *arg, bool with_flags, dbus_uint32_t *serial)
{
	_cleanup_(dbus_message_unrefp) DBusMessage *m = NULL;
	dbus_uint32_t flags = DBUS_NAME_FLAG_DO_NOT_QUEUE;

	m = dbus_message_new_method_call(DBUS_SERVICE_DBUS, DBUS_PATH_DBUS, iface, member);
	if (!m)
		return -ENOMEM;
	if (arg && !dbus_message_append_args(m, DBUS_TYPE_STRING, &arg, DBUS_TYPE_INVALID))
		return -ENOMEM;
	if (with_flags && !dbus_message_append_args(m, DBUS_TYPE_UINT32, &flags, DBUS_TYPE_INVALID))
		return -ENOMEM;
	if (!dbus_connection_send(c, m, serial))
		return -ENOMEM;
	return 0;
}

/*
 * Waits for @n method replies on @c (signals are dropped). With @want_u32,
 * each must carry that number first (RequestName: 1, primary owner).
 */
static int await_replies(DBusConnection *c, uint64_t n, uint32_t want_u32, const char *what)
{
	uint64_t done = 0, deadline = bench_now_ns() + STALL_TIMEOUT_MS * 1000000ULL;
	DBusMessage *m;

	while (done < n) {
		m = dbus_connection_pop_message(c);
		if (!m) {
			if (bench_now_ns() > deadline) {
				fprintf(stderr, "%s: no reply for %d ms\n", what, STALL_TIMEOUT_MS);
				return -ETIMEDOUT;
			}
			if (!dbus_connection_read_write(c, 1000))
				return -ECONNRESET;
			continue;
		}
		switch (dbus_message_get_type(m)) {
		case DBUS_MESSAGE_TYPE_METHOD_RETURN:
			if (want_u32) {
				dbus_uint32_t v = 0;

				if (!dbus_message_get_args(m, NULL, DBUS_TYPE_UINT32, &v,
							   DBUS_TYPE_INVALID) || v != want_u32) {
					fprintf(stderr, "%s: reply %u, wanted %u\n", what, v, want_u32);
					dbus_message_unref(m);
					return -EIO;
				}
			}
			done++;
			deadline = bench_now_ns() + STALL_TIMEOUT_MS * 1000000ULL;
			break;
		case DBUS_MESSAGE_TYPE_ERROR:
			print_error_reply(what, m);
			dbus_message_unref(m);
			return -EIO;
		}
		dbus_message_unref(m);
	}
	return 0;
}

static int reexec_setup(DBusConnection **c, uint64_t conns, uint64_t n_names, uint64_t n_rules)
{
	uint64_t i, j;
	char buf[160];

	/* Everything is queued on every connection first, then the replies are collected. */
	for (i = 0; i < conns; i++) {
		for (j = i; j < n_names; j += conns) {
			snprintf(buf, sizeof(buf), REEXEC_NAME_PREFIX "%" PRIu64, j);
			if (driver_send(c[i], DBUS_INTERFACE_DBUS, "RequestName", buf, true, NULL) < 0)
				return -ENOMEM;
		}
		for (j = i; j < n_rules; j += conns) {
			snprintf(buf, sizeof(buf),
				 "type='signal',interface='" REEXEC_IFACE "',member='R%" PRIu64 "'", j);
			if (driver_send(c[i], DBUS_INTERFACE_DBUS, "AddMatch", buf, false, NULL) < 0)
				return -ENOMEM;
		}
		dbus_connection_flush(c[i]);
	}
	for (i = 0; i < conns; i++) {
		uint64_t names = i < n_names ? (n_names - i + conns - 1) / conns : 0;
		uint64_t rules = i < n_rules ? (n_rules - i + conns - 1) / conns : 0;

		/* One connection's replies come in the order of its calls. */
		if (await_replies(c[i], names, DBUS_REQUEST_NAME_REPLY_PRIMARY_OWNER,
				  "RequestName") < 0 ||
		    await_replies(c[i], rules, 0, "AddMatch") < 0) {
			fprintf(stderr, "reexec: setting up connection %" PRIu64 " failed\n", i);
			return -EIO;
		}
	}
	return 0;
}

static int ping_send(DBusConnection *c, dbus_uint32_t *serial)
{
	if (driver_send(c, DBUS_INTERFACE_PEER, "Ping", NULL, false, serial) < 0)
		return -ENOMEM;
	dbus_connection_flush(c);
	return 0;
}

static int reexec_round(DBusConnection *c, BenchSamples *gaps)
{
	struct pollfd pfd[2] = {
		{ .fd = conn_fd(c), .events = POLLIN },
		{ .fd = STDIN_FILENO, .events = POLLIN },
	};
	uint64_t last = 0, now, gap, max_gap = 0, pings = 0;
	dbus_uint32_t serial = 0;
	bool ending = false;
	DBusMessage *m;
	char cmd[64];
	int r;

	gaps->n = 0;
	if (ping_send(c, &serial) < 0)
		return -ENOMEM;
	for (;;) {
		while ((m = dbus_connection_pop_message(c))) {
			int type = dbus_message_get_type(m);
			bool ours = dbus_message_get_reply_serial(m) == serial;

			if (type == DBUS_MESSAGE_TYPE_ERROR) {
				print_error_reply("Ping", m);
				dbus_message_unref(m);
				return -EIO;
			}
			dbus_message_unref(m);
			if (type != DBUS_MESSAGE_TYPE_METHOD_RETURN || !ours)
				continue;
			now = bench_now_ns();
			if (last) {
				gap = now - last;
				max_gap = MAX(max_gap, gap);
				bench_samples_add(gaps, gap);
			}
			last = now;
			pings++;
			if (ending) {
				printf("gap max_us=%.1f p50_us=%.2f pings=%" PRIu64 "\n",
				       (double)max_gap / 1000.0, bench_samples_percentile_us(gaps, 50),
				       pings);
				fflush(stdout);
				return 0;
			}
			if (pings == 20) {
				printf("pinging\n");
				fflush(stdout);
			}
			if (ping_send(c, &serial) < 0)
				return -ENOMEM;
		}
		r = poll(pfd, ending ? 1 : 2, STALL_TIMEOUT_MS);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -errno;
		if (r == 0) {
			fprintf(stderr, "reexec: no Ping reply for %d ms\n", STALL_TIMEOUT_MS);
			return -ETIMEDOUT;
		}
		if (pfd[0].revents && !dbus_connection_read_write(c, 0)) {
			fprintf(stderr, "reexec: the pinger was disconnected\n");
			return -ECONNRESET;
		}
		if (!ending && pfd[1].revents) {
			if (read_cmd(cmd, sizeof(cmd)) < 0 || strcmp(cmd, "end")) {
				fprintf(stderr, "reexec: expected \"end\" during a round\n");
				return -EPROTO;
			}
			ending = true;
		}
	}
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static int reexec_verify(DBusConnection *pinger, DBusConnection **c, uint64_t conns,
			 uint64_t n_names, uint64_t n_rules, const char *id0)
{
	_cleanup_(dbus_message_unrefp) DBusMessage *call = NULL, *reply = NULL;
	_cleanup_free_ struct pollfd *pfd = NULL;
	_cleanup_free_ bool *got = NULL;
	DBusError err = DBUS_ERROR_INIT;
	uint64_t i, alive = 0, names_listed = 0, uniques_listed = 0, owners_ok = 0;
	uint64_t signals_ok = 0, n_sig = MIN(conns, n_rules), sent, done;
	char **list = NULL, *id1, buf[160];
	const char *uname;
	bool id_same;
	int n_list = 0, r;
	DBusMessage *m;

	id1 = dbus_bus_get_id(pinger, &err);
	if (!id1) {
		fprintf(stderr, "reexec: GetId: %s: %s\n", err.name, err.message);
		dbus_error_free(&err);
		return -EIO;
	}
	id_same = !strcmp(id0, id1);
	dbus_free(id1);

	/* Every held connection answers. */
	for (i = 0; i < conns; i++)
		if (dbus_connection_get_is_connected(c[i]) && ping_send(c[i], NULL) < 0)
			return -ENOMEM;
	for (i = 0; i < conns; i++)
		if (dbus_connection_get_is_connected(c[i]) && await_replies(c[i], 1, 0, "Ping") == 0)
			alive++;

	/* ListNames has every unique and well-known name. */
	call = dbus_message_new_method_call(DBUS_SERVICE_DBUS, DBUS_PATH_DBUS, DBUS_INTERFACE_DBUS,
					    "ListNames");
	if (!call)
		return -ENOMEM;
	reply = dbus_connection_send_with_reply_and_block(pinger, call, CALL_TIMEOUT_MS, &err);
	if (!reply || !dbus_message_get_args(reply, &err, DBUS_TYPE_ARRAY, DBUS_TYPE_STRING, &list,
					     &n_list, DBUS_TYPE_INVALID)) {
		fprintf(stderr, "reexec: ListNames: %s: %s\n", err.name, err.message);
		dbus_error_free(&err);
		return -EIO;
	}
	qsort(list, (size_t)n_list, sizeof(*list), cmp_str);
	for (r = 0; r < n_list; r++)
		if (!strncmp(list[r], REEXEC_NAME_PREFIX, strlen(REEXEC_NAME_PREFIX)))
			names_listed++;
	for (i = 0; i < conns; i++) {
		uname = dbus_bus_get_unique_name(c[i]);
		if (uname && bsearch(&uname, list, (size_t)n_list, sizeof(*list), cmp_str))
			uniques_listed++;
	}
	dbus_free_string_array(list);

	/* GetNameOwner of every name, pipelined; the driver answers in order. */
	for (sent = done = 0; done < n_names;) {
		while (sent < n_names && sent - done < 256) {
			snprintf(buf, sizeof(buf), REEXEC_NAME_PREFIX "%" PRIu64, sent);
			if (driver_send(pinger, DBUS_INTERFACE_DBUS, "GetNameOwner", buf, false,
					NULL) < 0)
				return -ENOMEM;
			sent++;
		}
		if (!dbus_connection_read_write(pinger, STALL_TIMEOUT_MS))
			return -ECONNRESET;
		while ((m = dbus_connection_pop_message(pinger))) {
			int type = dbus_message_get_type(m);
			const char *owner = NULL;

			if (type == DBUS_MESSAGE_TYPE_METHOD_RETURN &&
			    dbus_message_get_args(m, NULL, DBUS_TYPE_STRING, &owner,
						  DBUS_TYPE_INVALID) &&
			    (uname = dbus_bus_get_unique_name(c[done % conns])) &&
			    !strcmp(owner, uname))
				owners_ok++;
			if (type == DBUS_MESSAGE_TYPE_METHOD_RETURN || type == DBUS_MESSAGE_TYPE_ERROR)
				done++;
			dbus_message_unref(m);
		}
	}

	/* Connection i's first rule matches member Ri: one signal each. */
	pfd = calloc(conns ? conns : 1, sizeof(*pfd));
	got = calloc(conns ? conns : 1, sizeof(*got));
	if (!pfd || !got)
		return -ENOMEM;
	for (i = 0; i < n_sig; i++) {
		_cleanup_(dbus_message_unrefp) DBusMessage *sig = NULL;

		snprintf(buf, sizeof(buf), "R%" PRIu64, i);
		sig = dbus_message_new_signal(BENCH_PATH, REEXEC_IFACE, buf);
		if (!sig || !dbus_connection_send(pinger, sig, NULL))
			return -ENOMEM;
		pfd[i] = (struct pollfd){ .fd = conn_fd(c[i]), .events = POLLIN };
	}
	dbus_connection_flush(pinger);
	while (signals_ok < n_sig) {
		for (i = 0; i < n_sig; i++) {
			if (got[i])
				continue;
			while ((m = dbus_connection_pop_message(c[i]))) {
				snprintf(buf, sizeof(buf), "R%" PRIu64, i);
				if (!got[i] && dbus_message_is_signal(m, REEXEC_IFACE, buf)) {
					got[i] = true;
					signals_ok++;
					pfd[i].fd = -1;
				}
				dbus_message_unref(m);
			}
		}
		if (signals_ok == n_sig)
			break;
		/* A signal that has not come in 2 s after the others is not coming. */
		r = poll(pfd, n_sig, 2000);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		for (i = 0; i < n_sig; i++)
			if (pfd[i].fd >= 0 && pfd[i].revents &&
			    !dbus_connection_read_write(c[i], 0))
				pfd[i].fd = -1;
	}

	printf("ok ops=%" PRIu64 " connected=%" PRIu64 " uniques_listed=%" PRIu64
	       " names_listed=%" PRIu64 " owners_ok=%" PRIu64 " signals_ok=%" PRIu64
	       " signals_expected=%" PRIu64 " id_same=%d\n", conns, alive, uniques_listed,
	       names_listed, owners_ok, signals_ok, n_sig, id_same);
	fflush(stdout);
	return 0;
}

static int mode_reexec(const char *address, uint64_t conns, uint64_t n_names, uint64_t n_rules)
{
	_cleanup_(conn_closep) DBusConnection *pinger = NULL;
	_cleanup_(bench_samples_deinit) BenchSamples gaps = {};
	_cleanup_free_ DBusConnection **c = NULL;
	DBusError err = DBUS_ERROR_INIT;
	char *id0 = NULL, cmd[64];
	uint64_t i, t0;
	int ret = 1;

	bench_raise_fd_limit();
	c = calloc(conns ? conns : 1, sizeof(*c));
	if (!c || bench_samples_init(&gaps, REEXEC_GAPS_MAX) < 0)
		return 1;
	t0 = bench_now_ns();
	pinger = conn_open(address);
	if (!pinger || conns_open(address, c, conns, "reexec") < 0 ||
	    reexec_setup(c, conns, n_names, n_rules) < 0)
		goto out;
	id0 = dbus_bus_get_id(pinger, &err);
	if (!id0) {
		fprintf(stderr, "reexec: GetId: %s: %s\n", err.name, err.message);
		dbus_error_free(&err);
		goto out;
	}
	printf("ready conns=%" PRIu64 " names=%" PRIu64 " rules=%" PRIu64 " setup_ms=%.0f\n",
	       conns, n_names, n_rules, (double)(bench_now_ns() - t0) / 1e6);
	fflush(stdout);

	for (;;) {
		if (read_cmd(cmd, sizeof(cmd)) < 0) {
			fprintf(stderr, "reexec: stdin closed before \"verify\"\n");
			goto out;
		}
		if (!strcmp(cmd, "round")) {
			if (reexec_round(pinger, &gaps) < 0)
				goto out;
		} else if (!strcmp(cmd, "verify")) {
			if (reexec_verify(pinger, c, conns, n_names, n_rules, id0) < 0)
				goto out;
			ret = 0;
			goto out;
		} else {
			fprintf(stderr, "reexec: unknown command \"%s\"\n", cmd);
			goto out;
		}
	}
out:
	dbus_free(id0);
	for (i = 0; i < conns; i++)
		if (c[i])
			conn_close(c[i]);
	return ret;
}

/* ---- floor: socketpair ping-pong between two processes ---- */

static int io_full(int fd, void *buf, size_t len, bool write_it)
{
	uint8_t *p = buf;
	ssize_t l;

	while (len > 0) {
		l = write_it ? write(fd, p, len) : read(fd, p, len);
		if (l < 0 && errno == EINTR)
			continue;
		if (l < 0)
			return -errno;
		if (l == 0)
			return -EPIPE;
		p += l;
		len -= (size_t)l;
	}
	return 0;
}

static int writev_full(int fd, struct iovec *iov, int n)
{
	ssize_t l;

	while (n > 0) {
		l = writev(fd, iov, n);
		if (l < 0 && errno == EINTR)
			continue;
		if (l < 0)
			return -errno;
		while (n > 0 && (size_t)l >= iov->iov_len) {
			l -= (ssize_t)iov->iov_len;
			iov++;
			n--;
		}
		if (n > 0) {
			iov->iov_base = (uint8_t *)iov->iov_base + l;
			iov->iov_len -= (size_t)l;
		}
	}
	return 0;
}

/* A frame is a 64-bit length followed by the payload; the peer echoes it. */
static int floor_echo(int fd, uint8_t *buf, size_t max)
{
	uint64_t len;

	for (;;) {
		if (io_full(fd, &len, sizeof(len), false) < 0)
			return 0;
		if (len > max)
			return 1;
		if (io_full(fd, buf, len, false) < 0)
			return 1;
		{
			struct iovec iov[2] = {
				{ .iov_base = &len, .iov_len = sizeof(len) },
				{ .iov_base = buf, .iov_len = len },
			};

			if (writev_full(fd, iov, 2) < 0)
				return 1;
		}
	}
}

static int mode_floor(size_t size, uint64_t count)
{
	_cleanup_(bench_samples_deinit) BenchSamples s = {};
	_cleanup_free_ uint8_t *buf = NULL;
	uint64_t i, t0, t, ts, len;
	char extra[128];
	int sv[2], status, r = 1;
	pid_t child;

	buf = malloc(size ? size : 1);
	if (!buf || bench_samples_init(&s, count) < 0)
		return 1;
	memset(buf, 0x3c, size);
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0) {
		perror("socketpair");
		return 1;
	}
	child = fork();
	if (child < 0) {
		perror("fork");
		return 1;
	}
	if (child == 0) {
		close(sv[0]);
		_exit(floor_echo(sv[1], buf, size));
	}
	close(sv[1]);

	t0 = bench_now_ns();
	for (i = 0; i < count; i++) {
		struct iovec iov[2] = {
			{ .iov_base = &len, .iov_len = sizeof(len) },
			{ .iov_base = buf, .iov_len = size },
		};

		len = size;
		ts = bench_now_ns();
		/* Header and payload in one system call where they fit, like a D-Bus write. */
		if (writev_full(sv[0], iov, 2) < 0)
			goto out;
		if (io_full(sv[0], &len, sizeof(len), false) < 0 || len != size ||
		    io_full(sv[0], buf, size, false) < 0)
			goto out;
		bench_samples_add(&s, bench_now_ns() - ts);
	}
	t = bench_now_ns() - t0;
	snprintf(extra, sizeof(extra), "p50_us=%.2f p99_us=%.2f",
		 bench_samples_percentile_us(&s, 50), bench_samples_percentile_us(&s, 99));
	bench_report(count, t, -1, -1, extra);
	r = 0;
out:
	if (r)
		fprintf(stderr, "floor: ping-pong failed at round %" PRIu64 "\n", i);
	close(sv[0]);
	waitpid(child, &status, 0);
	return r;
}

/* ---- main ---- */

static void usage(FILE *f)
{
	fprintf(f,
		"Usage: bench-dbus [--pid BUS_PID] [--proxy-pid PID] MODE ARGS...\n"
		"  (--proxy-pid: calls also reports that process's CPU time, proxy_cpu_ns)\n"
		"  ping ADDRESS                      Hello and one driver call\n"
		"  serve ADDRESS                     own " BENCH_NAME " and echo calls\n"
		"  calls ADDRESS SIZE COUNT          sequential Echo calls\n"
		"  pipeline ADDRESS SIZE COUNT DEPTH  Echo calls, DEPTH outstanding\n"
		"  fanout ADDRESS SUBS COUNT ROUNDS  signals to SUBS subscribers\n"
		"  churn ADDRESS COUNT               connect+Hello+call+disconnect\n"
		"  names ADDRESS COUNT               RequestName then ReleaseName\n"
		"  matches ADDRESS RULES COUNT       unmatched signals with RULES rules installed\n"
		"  conns ADDRESS N                   bus RSS idle and with N connections\n"
		"  reexec ADDRESS CONNS NAMES RULES  Ping gaps across re-execs (driven by bench/run)\n"
		"  floor SIZE COUNT                  socketpair ping-pong, no bus\n");
}

/* The modes only this client has (bench_modes.other). */
static bool other_mode(const char *mode, char **a, int n, int *status)
{
	if (!strcmp(mode, "pipeline") && n == 4)
		*status = mode_pipeline(a[0], bench_parse_u64("size", a[1], BENCH_MAX_SIZE),
					bench_parse_u64("count", a[2], BENCH_MAX_COUNT),
					bench_parse_u64("depth", a[3], BENCH_MAX_COUNT) ?: 1);
	else if (!strcmp(mode, "churn") && n == 2)
		*status = mode_churn(a[0], bench_parse_u64("count", a[1], BENCH_MAX_COUNT));
	else if (!strcmp(mode, "names") && n == 2)
		*status = mode_names(a[0], bench_parse_u64("count", a[1], BENCH_MAX_COUNT));
	else if (!strcmp(mode, "matches") && n == 3)
		*status = mode_matches(a[0], bench_parse_u64("rules", a[1], MAX_RULES),
				       bench_parse_u64("count", a[2], BENCH_MAX_COUNT));
	else if (!strcmp(mode, "conns") && n == 2)
		*status = mode_conns(a[0], bench_parse_u64("connections", a[1], MAX_CONNS));
	else if (!strcmp(mode, "reexec") && n == 4)
		*status = mode_reexec(a[0], bench_parse_u64("connections", a[1], MAX_CONNS) ?: 1,
				      bench_parse_u64("names", a[2], MAX_RULES),
				      bench_parse_u64("rules", a[3], MAX_RULES));
	else if (!strcmp(mode, "floor") && n == 2)
		*status = mode_floor(bench_parse_u64("size", a[0], BENCH_MAX_SIZE),
				     bench_parse_u64("count", a[1], BENCH_MAX_COUNT));
	else
		return false;
	return true;
}

int main(int argc, char **argv)
{
	static const struct bench_option options[] = {
		{ "proxy-pid", .pid = &arg_proxy_pid },
		{},
	};
	static const struct bench_modes modes = {
		.ping = mode_ping,
		.serve = mode_serve,
		.calls = mode_calls,
		.fanout = mode_fanout,
		.other = other_mode,
	};

	return bench_main(argc, argv, &arg_pid, options, usage, &modes);
}
