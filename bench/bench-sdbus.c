/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * bench-sdbus: sequential Echo calls from an sd-bus (libsystemd) client.
 *
 * The same measurement as "bench-dbus calls", with the other widely used
 * client library, so that one row shows the bus under sd-bus's framing and
 * write pattern (sd-bus writes header and body with one sendmsg and never
 * splits a message across writes the way libdbus may).
 */

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <systemd/sd-bus.h>

#include "bench-util.h"
#include "util/macro.h"

#define BENCH_NAME "org.bus1.Bench"
#define BENCH_PATH "/org/bus1/Bench"
#define BENCH_IFACE "org.bus1.Bench"
#define CALL_TIMEOUT_USEC (60ULL * 1000 * 1000)

static int bus_open(sd_bus **busp, const char *address)
{
	sd_bus *bus = NULL;
	int r;

	r = sd_bus_new(&bus);
	if (r < 0)
		return r;
	r = sd_bus_set_address(bus, address);
	if (r >= 0)
		r = sd_bus_set_bus_client(bus, 1);
	if (r >= 0)
		r = sd_bus_start(bus);
	if (r < 0) {
		sd_bus_unref(bus);
		return r;
	}
	*busp = bus;
	return 0;
}

static int mode_calls(const char *address, size_t size, uint64_t count, pid_t pid)
{
	_cleanup_(sd_bus_flush_close_unrefp) sd_bus *bus = NULL;
	_cleanup_(bench_samples_deinit) BenchSamples s = {};
	_cleanup_free_ uint8_t *payload = NULL;
	uint64_t i, t0 = 0, t, warmup;
	int64_t cpu0 = -1;
	int64_t cpu1;
	char extra[128];
	int r;

	payload = malloc(size ? size : 1);
	if (!payload || bench_samples_init(&s, count) < 0)
		return 1;
	memset(payload, 0xa5, size);
	r = bus_open(&bus, address);
	if (r < 0) {
		fprintf(stderr, "sd-bus connect %s: %s\n", address, strerror(-r));
		return 1;
	}

	/* A tenth of the count (at most 500) warms up every side, unmeasured. */
	warmup = MIN(count / 10, 500ULL);
	for (i = 0; i < warmup + count; i++) {
		_cleanup_(sd_bus_message_unrefp) sd_bus_message *m = NULL, *reply = NULL;
		_cleanup_(sd_bus_error_free) sd_bus_error err = SD_BUS_ERROR_NULL;
		const void *p;
		size_t n = 0;
		uint64_t ts;

		if (i == warmup) {
			cpu0 = bench_proc_cpu_ns(pid);
			t0 = bench_now_ns();
		}

		r = sd_bus_message_new_method_call(bus, &m, BENCH_NAME, BENCH_PATH, BENCH_IFACE,
						   "Echo");
		if (r >= 0 && size > 0)
			r = sd_bus_message_append_array(m, 'y', payload, size);
		if (r < 0) {
			fprintf(stderr, "sd-bus message: %s\n", strerror(-r));
			return 1;
		}
		ts = bench_now_ns();
		r = sd_bus_call(bus, m, CALL_TIMEOUT_USEC, &err, &reply);
		if (r < 0) {
			fprintf(stderr, "sd-bus call %" PRIu64 ": %s: %s\n", i, err.name ?: "",
				err.message ?: strerror(-r));
			return 1;
		}
		if (i >= warmup)
			bench_samples_add(&s, bench_now_ns() - ts);
		if (size > 0) {
			r = sd_bus_message_read_array(reply, 'y', &p, &n);
			if (r < 0 || n != size) {
				fprintf(stderr, "sd-bus call %" PRIu64 ": bad reply (%zu bytes)\n",
					i, n);
				return 1;
			}
		}
	}
	t = bench_now_ns() - t0;
	cpu1 = bench_proc_cpu_ns(pid);
	snprintf(extra, sizeof(extra), "p50_us=%.2f p99_us=%.2f",
		 bench_samples_percentile_us(&s, 50), bench_samples_percentile_us(&s, 99));
	bench_report(count, t, cpu0, cpu1, extra);
	return 0;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "pid", required_argument, NULL, 'p' },
		{},
	};
	pid_t pid = -1;
	int c;

	while ((c = getopt_long(argc, argv, "+", opts, NULL)) >= 0) {
		if (c != 'p')
			goto usage;
		pid = (pid_t)bench_parse_u64("pid", optarg, INT32_MAX);
	}
	signal(SIGPIPE, SIG_IGN);
	if (argc - optind == 4 && !strcmp(argv[optind], "calls"))
		return mode_calls(argv[optind + 1],
				  bench_parse_u64("size", argv[optind + 2], 64 << 20),
				  bench_parse_u64("count", argv[optind + 3], 10000000), pid);
usage:
	fprintf(stderr, "Usage: bench-sdbus [--pid BUS_PID] calls ADDRESS SIZE COUNT\n");
	return 2;
}
