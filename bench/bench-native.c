/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * bench-native: the native (libbus1-client over /dev/bus1) side of
 * `bench/run --guest`.
 *
 * The same protocol and the same output as bench-dbus: one mode per
 * invocation, one "ok key=value ..." line on stdout, errors on stderr with a
 * non-zero exit status. The echo service owns org.bus1.Bench and answers
 * org.bus1.Bench.Echo with the byte array it was sent (no body for 0 B), so
 * bench-dbus's call client can talk to it and this call client to
 * bench-dbus's echo service: every mix of native and socket callers and
 * services runs the same messages.
 *
 *   bench-native [--pid BUS_PID] ping ADDRESS
 *   bench-native serve ADDRESS
 *   bench-native [--pid BUS_PID] [--direct] calls ADDRESS SIZE COUNT
 *   bench-native [--pid BUS_PID] fanout ADDRESS SUBS COUNT ROUNDS
 *
 * libbus1-client has no call to append or read a whole byte array (sd-bus
 * has sd_bus_message_append_array(), libdbus DBUS_TYPE_ARRAY with a
 * pointer); appending 1 MiB byte by byte would measure the marshaller, not
 * the transport. So the payload is written and read with the library's own
 * builder and reader (dc_writer_append_array(), dc_reader_read_array())
 * through its internal header, b1c-internal.h: one copy into the message
 * being built, one pointer into the received one, as libdbus does.
 */

#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench-util.h"
#include "bus1-client.h"
#include "b1c-internal.h"
#include "dbus-compat/message.h"
#include "util/macro.h"

#define BENCH_NAME "org.bus1.Bench"
#define BENCH_PATH "/org/bus1/Bench"
#define BENCH_IFACE "org.bus1.Bench"
#define FANOUT_IFACE "org.bus1.Bench.Fanout"

/* As bench-dbus: generous timeouts, bounded arguments, the same warm-up. */
#define CALL_TIMEOUT_USEC (60ULL * 1000 * 1000)
#define STALL_TIMEOUT_MS (30 * 1000)
#define WARMUP_MAX 500ULL

static pid_t arg_pid = -1;
static bool arg_direct;

static struct b1c_bus *bus_open(const char *address)
{
	struct b1c_bus *bus = NULL;
	int r = b1c_bus_open(&bus, address);

	if (r < 0) {
		fprintf(stderr, "native connect %s: %s\n", address, strerror(-r));
		return NULL;
	}
	return bus;
}

/* The byte array of an Echo call or reply: its length (0 without a body), or -1. */
static long body_bytes(struct b1c_message *m, const void **data)
{
	struct dc_reader r;
	size_t n = 0;

	*data = NULL;
	if (!m->msg)
		return -1;
	if (!m->msg->signature[0])
		return 0;
	if (strcmp(m->msg->signature, "ay") || message_get_body_reader(m->msg, &r) != 0 ||
	    dc_reader_read_array(&r, 'y', data, &n) < 0)
		return -1;
	return (long)n;
}

/* A message being built gets @size bytes as "ay" (nothing for 0 B). */
static int append_bytes(struct b1c_message *m, const void *data, size_t size)
{
	if (!size)
		return 0;
	return dc_writer_append_array(&m->b.body, 'y', data, size);
}

/* ---- ping: bootstrap, Hello, one driver call ---- */

static int mode_ping(const char *address)
{
	struct b1c_bus *bus = bus_open(address);
	struct b1c_message *m = NULL, *reply = NULL;
	int r, ok = 0;

	if (!bus)
		return 1;
	r = b1c_message_new_method_call(&m, "org.freedesktop.DBus", "/org/freedesktop/DBus",
					"org.freedesktop.DBus", "NameHasOwner", "s");
	if (r == 0)
		r = b1c_message_append(m, "s", b1c_bus_get_unique_name(bus));
	if (r == 0)
		r = b1c_bus_call(bus, m, CALL_TIMEOUT_USEC, &reply);
	if (r == 0) {
		bool b = false;

		r = b1c_message_read(reply, "b", &b);
		ok = r == 0 && b;
	}
	if (!ok)
		fprintf(stderr, "NameHasOwner on our own name: %s\n", r ? strerror(r < 0 ? -r : EIO) :
			"false");
	else
		printf("ok unique=%s\n", b1c_bus_get_unique_name(bus));
	b1c_message_unref(m);
	b1c_message_unref(reply);
	b1c_bus_free(bus);
	return ok ? 0 : 1;
}

/* ---- serve: the native echo service ---- */

static int serve_method(struct b1c_bus *bus, struct b1c_message *m, void *userdata)
{
	struct b1c_message *reply = NULL;
	const char *iface = b1c_message_get_interface(m), *member = b1c_message_get_member(m);
	const void *data;
	long n;
	int r;

	if (!iface || strcmp(iface, BENCH_IFACE) || !member)
		return 0;
	if (!strcmp(member, "How"))
		return b1c_bus_reply(bus, m, "s", b1c_message_is_direct(m) ? "direct" :
				     "brokered") ?: 1;
	if (strcmp(member, "Echo"))
		return 0;
	n = body_bytes(m, &data);
	if (n < 0)
		return b1c_bus_reply_error(bus, m, "org.freedesktop.DBus.Error.InvalidArgs",
					   "Echo takes a byte array or nothing") ?: 1;
	if (!b1c_message_expects_reply(m))
		return 1;
	r = b1c_message_new_method_return(&reply, m, n ? "ay" : "");
	if (r == 0)
		r = append_bytes(reply, data, (size_t)n);
	if (r == 0)
		r = b1c_bus_send(bus, reply, NULL);
	b1c_message_unref(reply);
	return r < 0 ? r : 1;
}

static int mode_serve(const char *address)
{
	struct b1c_bus *bus = bus_open(address);
	int r;

	if (!bus)
		return 1;
	r = b1c_bus_add_object(bus, BENCH_PATH, serve_method, NULL);
	if (r < 0) {
		fprintf(stderr, "add_object: %s\n", strerror(-r));
		return 1;
	}
	r = b1c_bus_request_name(bus, BENCH_NAME, 4 /* DO_NOT_QUEUE */);
	if (r != 1) {
		fprintf(stderr, "RequestName %s: %d (%s)\n", BENCH_NAME, r,
			r < 0 ? strerror(-r) : "not the primary owner");
		return 1;
	}
	printf("ready %s\n", b1c_bus_get_unique_name(bus));
	fflush(stdout);
	/* Runs until the bus goes away or bench/run kills us. */
	for (;;) {
		r = b1c_bus_process(bus);
		if (r == 0)
			r = b1c_bus_wait(bus, UINT64_MAX);
		if (r == -ECONNRESET)
			break;
		if (r < 0 && r != -EINTR) {
			fprintf(stderr, "serve: %s\n", strerror(-r));
			return 1;
		}
	}
	b1c_bus_free(bus);
	return 0;
}

/* ---- calls: sequential Echo round trips ---- */

/* One Echo call; its round-trip time in ns, or 0 on failure. */
static uint64_t echo_roundtrip(struct b1c_bus *bus, const uint8_t *payload, size_t size)
{
	struct b1c_message *m = NULL, *reply = NULL;
	const void *data;
	uint64_t t = 0;
	long n;
	int r;

	r = b1c_message_new_method_call(&m, BENCH_NAME, BENCH_PATH, BENCH_IFACE, "Echo",
					size ? "ay" : "");
	if (r == 0)
		r = append_bytes(m, payload, size);
	if (r < 0) {
		fprintf(stderr, "Echo call: building: %s\n", strerror(-r));
		goto out;
	}
	t = bench_now_ns();
	r = b1c_bus_call(bus, m, CALL_TIMEOUT_USEC, &reply);
	if (r == B1C_CALL_ERROR) {
		fprintf(stderr, "Echo call: %s: %s\n", b1c_message_get_error_name(reply),
			b1c_message_get_error_text(reply));
		t = 0;
		goto out;
	}
	if (r < 0) {
		fprintf(stderr, "Echo call: %s\n", strerror(-r));
		t = 0;
		goto out;
	}
	t = bench_now_ns() - t;
	n = body_bytes(reply, &data);
	if (n != (long)size) {
		fprintf(stderr, "Echo call: reply carries %ld bytes, sent %zu\n", n, size);
		t = 0;
		goto out;
	}
	t = t ?: 1;
out:
	b1c_message_unref(m);
	b1c_message_unref(reply);
	return t;
}

/* "direct" or "brokered": how the echo service saw a call arrive (copied to @out). */
static int ask_how(struct b1c_bus *bus, char *out, size_t n_out)
{
	struct b1c_message *m = NULL, *reply = NULL;
	const char *s = NULL;
	int r;

	r = b1c_message_new_method_call(&m, BENCH_NAME, BENCH_PATH, BENCH_IFACE, "How", "");
	if (r == 0)
		r = b1c_bus_call(bus, m, CALL_TIMEOUT_USEC, &reply);
	if (r == 0)
		r = b1c_message_read(reply, "s", &s);
	else if (r == B1C_CALL_ERROR)
		/* A socket echo service (bench-dbus) has no How: brokered, necessarily. */
		s = "brokered";
	snprintf(out, n_out, "%s", s ?: "?");
	b1c_message_unref(m);
	b1c_message_unref(reply);
	return r == B1C_CALL_ERROR ? 0 : r;
}

static int mode_calls(const char *address, size_t size, uint64_t count)
{
	_cleanup_(bench_samples_deinit) BenchSamples s = {};
	_cleanup_free_ uint8_t *payload = NULL;
	struct b1c_bus *bus;
	uint64_t t0, t, i;
	int64_t cpu0, cpu1;
	char extra[192], how[32];
	int r, ret = 1;

	payload = malloc(size ? size : 1);
	if (!payload || bench_samples_init(&s, count) < 0)
		return 1;
	memset(payload, 0xa5, size);
	bus = bus_open(address);
	if (!bus)
		return 1;
	if (arg_direct) {
		r = b1c_bus_set_direct(bus, true);
		if (r < 0) {
			fprintf(stderr, "set_direct: %s\n", strerror(-r));
			goto out;
		}
	}

	/* Warm up (and, for --direct, resolve the name's handle); not measured. */
	for (i = 0; i < MIN(count / 10, WARMUP_MAX) || i < 1; i++)
		if (!echo_roundtrip(bus, payload, size))
			goto out;
	/* The path the calls take is checked, not assumed. */
	r = ask_how(bus, how, sizeof(how));
	if (r < 0) {
		fprintf(stderr, "How: %s\n", strerror(-r));
		goto out;
	}
	if (strcmp(how, arg_direct ? "direct" : "brokered")) {
		fprintf(stderr, "calls went %s, wanted %s\n", how,
			arg_direct ? "direct" : "brokered");
		goto out;
	}

	cpu0 = bench_proc_cpu_ns(arg_pid);
	t0 = bench_now_ns();
	for (i = 0; i < count; i++) {
		t = echo_roundtrip(bus, payload, size);
		if (!t) {
			fprintf(stderr, "call %" PRIu64 " of %" PRIu64 " failed\n", i, count);
			goto out;
		}
		bench_samples_add(&s, t);
	}
	t = bench_now_ns() - t0;
	cpu1 = bench_proc_cpu_ns(arg_pid);
	snprintf(extra, sizeof(extra), "p50_us=%.2f p99_us=%.2f path=%s",
		 bench_samples_percentile_us(&s, 50), bench_samples_percentile_us(&s, 99), how);
	bench_report(count, t, cpu0, cpu1, extra);
	ret = 0;
out:
	b1c_bus_free(bus);
	return ret;
}

/* ---- fanout: one native emitter, N native subscribers in this process ---- */

typedef struct Fanout {
	struct b1c_bus *emitter;
	struct b1c_bus **subs;
	uint64_t *received;
	struct pollfd *pfd;
	size_t n_subs;
} Fanout;

static void fanout_deinit(Fanout *f)
{
	for (size_t i = 0; f->subs && i < f->n_subs; i++)
		if (f->subs[i])
			b1c_bus_free(f->subs[i]);
	if (f->emitter)
		b1c_bus_free(f->emitter);
	free(f->subs);
	free(f->received);
	free(f->pfd);
	*f = (Fanout){};
}

static int on_tick(struct b1c_bus *bus, struct b1c_message *m, void *userdata)
{
	const char *member = b1c_message_get_member(m);

	if (member && !strcmp(member, "Tick"))
		(*(uint64_t *)userdata)++;
	return 1;
}

/* Everything a subscriber's library holds or its peer has queued, dispatched. */
static int fanout_drain(struct b1c_bus *bus)
{
	int r;

	while ((r = b1c_bus_process(bus)) > 0)
		;
	return r;
}

static int fanout_init(Fanout *f, const char *address, size_t n_subs)
{
	int r;

	*f = (Fanout){ .n_subs = n_subs };
	f->subs = calloc(n_subs, sizeof(*f->subs));
	f->received = calloc(n_subs, sizeof(*f->received));
	f->pfd = calloc(n_subs, sizeof(*f->pfd));
	if (!f->subs || !f->received || !f->pfd)
		return -ENOMEM;
	f->emitter = bus_open(address);
	if (!f->emitter)
		return -EIO;
	for (size_t i = 0; i < n_subs; i++) {
		f->subs[i] = bus_open(address);
		if (!f->subs[i])
			return -EIO;
		/* AddMatch is a call: the rule is active once it returns. */
		r = b1c_bus_add_match(f->subs[i], "type='signal',interface='" FANOUT_IFACE "'",
				      on_tick, &f->received[i]);
		if (r < 0) {
			fprintf(stderr, "AddMatch: %s\n", strerror(-r));
			return r;
		}
		f->pfd[i] = (struct pollfd){ .fd = b1c_bus_get_fd(f->subs[i]), .events = POLLIN };
	}
	for (size_t i = 0; i < n_subs; i++) {
		r = fanout_drain(f->subs[i]);
		if (r < 0)
			return r;
	}
	return 0;
}

static uint64_t fanout_min_received(Fanout *f)
{
	uint64_t min = UINT64_MAX;

	for (size_t i = 0; i < f->n_subs; i++)
		min = MIN(min, f->received[i]);
	return min;
}

static int fanout_emit(Fanout *f)
{
	return b1c_bus_emit_signal(f->emitter, BENCH_PATH, FANOUT_IFACE, "Tick", NULL);
}

/* Wait for traffic and count signals at the subscribers. */
static int fanout_pump(Fanout *f)
{
	int r;

	r = poll(f->pfd, f->n_subs, STALL_TIMEOUT_MS);
	if (r < 0)
		return errno == EINTR ? 0 : -errno;
	if (r == 0) {
		fprintf(stderr, "fanout: no traffic for %d ms (signals lost?)\n", STALL_TIMEOUT_MS);
		return -ETIMEDOUT;
	}
	for (size_t i = 0; i < f->n_subs; i++) {
		if (!f->pfd[i].revents)
			continue;
		if (f->pfd[i].revents & (POLLHUP | POLLERR))
			return -ECONNRESET;
		r = fanout_drain(f->subs[i]);
		if (r < 0)
			return r;
	}
	return 0;
}

static int mode_fanout(const char *address, size_t n_subs, uint64_t count, uint64_t rounds)
{
	_cleanup_(fanout_deinit) Fanout f = {};
	_cleanup_(bench_samples_deinit) BenchSamples s = {};
	/* Signals in flight beyond the slowest subscriber, as bench-dbus. */
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
			r = fanout_emit(&f);
			if (r < 0) {
				fprintf(stderr, "fanout: emit: %s\n", strerror(-r));
				return 1;
			}
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
		r = fanout_emit(&f);
		if (r < 0) {
			fprintf(stderr, "fanout latency: emit: %s\n", strerror(-r));
			return 1;
		}
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
	bench_report(count * n_subs, t, cpu0, cpu1, extra);
	return 0;
}

/* ---- main ---- */

static void usage(FILE *f)
{
	fprintf(f,
		"Usage: bench-native [--pid BUS_PID] [--direct] MODE ARGS...\n"
		"  ping ADDRESS                      native bootstrap, Hello and one driver call\n"
		"  serve ADDRESS                     own " BENCH_NAME " and echo calls\n"
		"  calls ADDRESS SIZE COUNT          sequential Echo calls (--direct: the direct\n"
		"                                    path; checked either way)\n"
		"  fanout ADDRESS SUBS COUNT ROUNDS  signals to SUBS native subscribers\n");
}

int main(int argc, char **argv)
{
	static const struct bench_option options[] = {
		{ "direct", .flag = &arg_direct },
		{},
	};
	static const struct bench_modes modes = {
		.ping = mode_ping,
		.serve = mode_serve,
		.calls = mode_calls,
		.fanout = mode_fanout,
	};

	return bench_main(argc, argv, &arg_pid, options, usage, &modes);
}
