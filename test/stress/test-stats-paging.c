/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Debug.Stats with 10,000 connections (issue 41): they all connect, then a
 * pager reads the statistics of every one with ListConnectionStats, 256 a
 * call, and GetUserStats, round after round, while a bystander measures its
 * round trips to the driver. Asserted: each round lists every connection
 * exactly once, by increasing N, ends with next = 0, and every call is
 * answered; GetUserStats counts this uid's connections. Printed: what one
 * page costs the bus (its CPU time, in a first round with nobody else
 * calling: the longest any other client waits for a page), the round trips
 * of the pages and of GetUserStats, and the bystander's latency idle and
 * while paging.
 *
 *   test-stats-paging BUS_BINARY CONFIG   (STRESS_CONNECTIONS=N to change 10000)
 */

#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#include "stress-common.h"
#include "util/macro.h"

#define STATS_IFACE "org.freedesktop.DBus.Debug.Stats"
#define PAGE_MAX 256
#define CALL_TIMEOUT_MS 10000
/* The pager's rounds: at least this many, and on for at least this long. */
#define MIN_ROUNDS 3
#define MIN_PAGING_USEC 2000000

static struct rc *conns;
static size_t n_conns;

/* The time @pid spent on a CPU, in ns (schedstat: finer than the clock ticks of stat). */
static uint64_t cpu_ns(pid_t pid)
{
	unsigned long long ns = 0;
	char path[64];
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/schedstat", (int)pid);
	f = fopen(path, "re");
	CHECK(f, "%s: %m", path);
	CHECK(fscanf(f, "%llu", &ns) == 1, "%s: unreadable", path);
	fclose(f);
	return ns;
}

static uint64_t unique_id(const char *name)
{
	const char *dot = strrchr(name, '.');

	CHECK(!strncmp(name, ":1.", 3) && dot, "unique name %s", name);
	return strtoull(dot + 1, NULL, 10);
}

/* The uint32 or uint64 value of a{sv} entry @key in the dict @it points into, or -1. */
static long long dict_uint(DBusMessageIter *dict, const char *key)
{
	DBusMessageIter it = *dict;

	for (; dbus_message_iter_get_arg_type(&it) == DBUS_TYPE_DICT_ENTRY;
	     dbus_message_iter_next(&it)) {
		DBusMessageIter e, v;
		const char *k;

		dbus_message_iter_recurse(&it, &e);
		dbus_message_iter_get_basic(&e, &k);
		if (strcmp(k, key))
			continue;
		dbus_message_iter_next(&e);
		dbus_message_iter_recurse(&e, &v);
		if (dbus_message_iter_get_arg_type(&v) == DBUS_TYPE_UINT32) {
			uint32_t u;

			dbus_message_iter_get_basic(&v, &u);
			return u;
		}
		if (dbus_message_iter_get_arg_type(&v) == DBUS_TYPE_UINT64) {
			uint64_t t;

			dbus_message_iter_get_basic(&v, &t);
			return (long long)t;
		}
		return -1;
	}
	return -1;
}

struct round {
	uint32_t *seen;		/* per N: how many times listed this round */
	size_t n_seen;
	uint64_t last;		/* the N listed last, to check the order */
	size_t n_entries;
	size_t n_pages;
	struct lat rtt;		/* each page's round trip */
	struct lat bus_cpu;	/* the bus's CPU time in each call (if measured) */
	uint64_t bytes;		/* of the replies (if measured) */
};

/*
 * One ListConnectionStats call from @start: its entries counted in @rd;
 * returns next. @bus_pid > 0: the bus's CPU time in the call, and the
 * reply's size, are recorded too (when nothing else talks to the bus).
 */
static uint32_t list_page(struct rc *c, uint32_t start, struct round *rd, pid_t bus_pid)
{
	uint32_t max = PAGE_MAX, next;
	DBusMessageIter it, arr, st, dict;
	uint64_t t0, cpu0 = 0;
	DBusMessage *m, *r;

	m = dbus_message_new_method_call(DRIVER, DRIVER_PATH, STATS_IFACE, "ListConnectionStats");
	CHECK(m, "oom");
	dbus_message_append_args(m, DBUS_TYPE_UINT32, &start, DBUS_TYPE_UINT32, &max,
				 DBUS_TYPE_INVALID);
	if (bus_pid > 0)
		cpu0 = cpu_ns(bus_pid);
	t0 = now_usec();
	r = rc_call(c, m, CALL_TIMEOUT_MS);
	lat_add(&rd->rtt, now_usec() - t0);
	if (bus_pid > 0) {
		char *data;
		int len;

		lat_add(&rd->bus_cpu, (cpu_ns(bus_pid) - cpu0) / 1000);
		CHECK(dbus_message_marshal(r, &data, &len), "oom");
		rd->bytes += (uint64_t)len;
		dbus_free(data);
	}
	CHECK(!msg_error(r), "ListConnectionStats(%u, %u): %s", start, max, msg_error(r));
	CHECK(!strcmp(dbus_message_get_signature(r), "ua(sa{sv})"), "signature %s",
	      dbus_message_get_signature(r));
	dbus_message_iter_init(r, &it);
	dbus_message_iter_get_basic(&it, &next);
	dbus_message_iter_next(&it);
	dbus_message_iter_recurse(&it, &arr);
	for (; dbus_message_iter_get_arg_type(&arr) == DBUS_TYPE_STRUCT;
	     dbus_message_iter_next(&arr)) {
		const char *name;
		uint64_t id;

		dbus_message_iter_recurse(&arr, &st);
		dbus_message_iter_get_basic(&st, &name);
		dbus_message_iter_next(&st);
		dbus_message_iter_recurse(&st, &dict);
		id = unique_id(name);
		CHECK(id >= start, "%s listed from %u", name, start);
		CHECK(!rd->n_entries || id > rd->last, "%s listed after :1.%llu", name,
		      (unsigned long long)rd->last);
		CHECK(id < rd->n_seen, "%s: not a connection of this test", name);
		CHECK(dict_uint(&dict, "UnixUserID") == (long long)getuid(),
		      "UnixUserID of %s", name);
		rd->seen[id]++;
		rd->last = id;
		rd->n_entries++;
		CHECK(rd->n_entries <= n_conns + 2, "more entries than connections");
	}
	CHECK(!next || next > rd->last || !rd->n_entries, "next %u after :1.%llu", next,
	      (unsigned long long)rd->last);
	rd->n_pages++;
	dbus_message_unref(r);
	return next;
}

/* How many of @l are above @usec. */
static size_t over(const struct lat *l, uint64_t usec)
{
	size_t n = 0;

	for (size_t i = 0; i < l->n; i++)
		n += l->v[i] > usec;
	return n;
}

/* Every page, from N 0 on; then each connection must have been listed exactly once. */
static void list_round(struct rc *c, struct round *rd, uint64_t pager_id, uint64_t bystander_id,
		       pid_t bus_pid)
{
	uint32_t next = 0;

	memset(rd->seen, 0, rd->n_seen * sizeof(*rd->seen));
	rd->n_entries = rd->n_pages = 0;
	do
		next = list_page(c, next, rd, bus_pid);
	while (next);
	for (size_t i = 0; i < n_conns; i++)
		CHECK(rd->seen[unique_id(conns[i].name)] == 1, "%s listed %u times",
		      conns[i].name, rd->seen[unique_id(conns[i].name)]);
	CHECK(rd->seen[pager_id] == 1 && rd->seen[bystander_id] == 1,
	      "pager or bystander not listed once");
	CHECK(rd->n_entries == n_conns + 2, "%zu entries, not %zu", rd->n_entries, n_conns + 2);
}

/* GetUserStats: this uid's Connections. */
static long long user_connections(struct rc *c, struct lat *lat)
{
	DBusMessageIter it, arr, st, dict;
	long long conns_of_uid = -1;
	DBusMessage *r;
	uint64_t t0;

	t0 = now_usec();
	r = rc_call(c, dbus_message_new_method_call(DRIVER, DRIVER_PATH, STATS_IFACE,
						    "GetUserStats"), CALL_TIMEOUT_MS);
	lat_add(lat, now_usec() - t0);
	CHECK(!msg_error(r), "GetUserStats: %s", msg_error(r));
	CHECK(!strcmp(dbus_message_get_signature(r), "a(ua{sv})"), "signature %s",
	      dbus_message_get_signature(r));
	dbus_message_iter_init(r, &it);
	dbus_message_iter_recurse(&it, &arr);
	for (; dbus_message_iter_get_arg_type(&arr) == DBUS_TYPE_STRUCT;
	     dbus_message_iter_next(&arr)) {
		uint32_t uid;

		dbus_message_iter_recurse(&arr, &st);
		dbus_message_iter_get_basic(&st, &uid);
		dbus_message_iter_next(&st);
		dbus_message_iter_recurse(&st, &dict);
		if (uid != getuid())
			continue;
		conns_of_uid = dict_uint(&dict, "Connections");
		CHECK(dict_uint(&dict, "MaxConnections") >= conns_of_uid, "MaxConnections");
	}
	dbus_message_unref(r);
	return conns_of_uid;
}

/*
 * The pager (a child process): rounds of list_round() and GetUserStats, for
 * MIN_ROUNDS and MIN_PAGING_USEC at least. Exits 0, or fails.
 */
static void run_pager(struct rc *pager, struct round *rd, uint64_t pager_id,
		      uint64_t bystander_id)
{
	struct lat user_lat = {};
	uint64_t t0 = now_usec();
	unsigned int rounds = 0;
	long long n;

	lat_free(&rd->rtt);
	while (rounds < MIN_ROUNDS || now_usec() - t0 < MIN_PAGING_USEC) {
		list_round(pager, rd, pager_id, bystander_id, 0);
		n = user_connections(pager, &user_lat);
		CHECK(n == (long long)n_conns + 2, "GetUserStats: Connections %lld, not %zu", n,
		      n_conns + 2);
		rounds++;
	}
	printf("  pager: %u rounds of %zu pages + GetUserStats in %.1f ms\n", rounds,
	       rd->n_pages, (now_usec() - t0) / 1000.0);
	lat_print("one page, round trip, while paging", &rd->rtt);
	lat_print("GetUserStats, round trip, while paging", &user_lat);
	fflush(stdout);
	_exit(0);
}

int main(int argc, char **argv)
{
	const char *env = getenv("STRESS_CONNECTIONS");
	struct lat idle = {}, paging = {};
	struct round rd = {};
	struct pollfd *pfds;
	uint64_t t0, t_hello, max_id = 0, pager_id, bystander_id;
	uint64_t cpu0, t_paging;
	struct rc bystander, pager;
	unsigned long bus_nofile;
	struct sbus bus;
	size_t left;
	pid_t pid;
	int status, r;

	n_conns = fit_connections(env ? strtoul(env, NULL, 10) : 10000, &bus_nofile);
	sbus_start(&bus, argc > 1 ? argv[1] : NULL, argc > 2 ? argv[2] : NULL, bus_nofile);
	rc_open(&bystander, &bus, false);
	rc_open(&pager, &bus, false);

	conns = calloc(n_conns, sizeof(*conns));
	pfds = calloc(n_conns, sizeof(*pfds));
	CHECK(conns && pfds, "oom");
	/*
	 * Each writes its handshake and Hello as soon as it is connected: the
	 * bus completes them while the others connect (no more than
	 * max_incomplete_connections wait at once).
	 */
	t0 = now_usec();
	for (size_t i = 0; i < n_conns; i++) {
		r = rc_connect(&conns[i], &bus);
		CHECK(r == 0, "connect %zu: %s", i, strerror(-r));
		CHECK(rc_handshake_start(&conns[i], false) == 0, "handshake %zu", i);
	}
	for (;;) {
		left = 0;
		for (size_t i = 0; i < n_conns; i++) {
			r = rc_handshake_step(&conns[i]);
			CHECK(r >= 0, "Hello: connection %zu failed", i);
			pfds[i].fd = r ? -1 : conns[i].fd;
			pfds[i].events = POLLIN;
			left += !r;
		}
		if (!left)
			break;
		CHECK(now_usec() - t0 < 60000000, "%zu of %zu connections without Hello after 60 s",
		      left, n_conns);
		poll(pfds, n_conns, 100);
	}
	t_hello = now_usec() - t0;
	for (size_t i = 0; i < n_conns; i++)
		max_id = MAX(max_id, unique_id(conns[i].name));
	pager_id = unique_id(pager.name);
	bystander_id = unique_id(bystander.name);
	max_id = MAX(max_id, MAX(pager_id, bystander_id));
	printf("%zu connections: connect+auth+Hello %.1f ms, bus VmRSS %ld KiB\n", n_conns,
	       t_hello / 1000.0, proc_status_kb(bus.pid, "VmRSS"));

	/*
	 * One round alone first: what a page costs the bus, measured without
	 * anyone else's calls in it. The bus serves one call at a time: that
	 * is what any other client waits at worst for a page, whatever else
	 * runs on the machine.
	 */
	rd.n_seen = max_id + 1;
	rd.seen = calloc(rd.n_seen, sizeof(*rd.seen));
	CHECK(rd.seen, "oom");
	list_round(&pager, &rd, pager_id, bystander_id, bus.pid);
	printf("  one round alone: %zu pages of up to %d for %zu connections, %.0f KiB a page\n",
	       rd.n_pages, PAGE_MAX, rd.n_entries, (double)rd.bytes / 1024.0 / (double)rd.n_pages);
	lat_print("one page, round trip, alone", &rd.rtt);
	lat_print("one page, bus CPU, alone", &rd.bus_cpu);

	/* The bystander alone, for a second. */
	t0 = now_usec();
	while (now_usec() - t0 < 1000000)
		lat_add(&idle, rc_ping(&bystander));

	/* The pager pages meanwhile; the bystander keeps measuring until it is done. */
	fflush(stdout);
	cpu0 = cpu_ns(bus.pid);
	t0 = now_usec();
	pid = fork();
	CHECK(pid >= 0, "fork: %m");
	if (!pid)
		run_pager(&pager, &rd, pager_id, bystander_id);
	stress_track_child(pid);
	rc_close(&pager);
	for (;;) {
		r = waitpid(pid, &status, WNOHANG);
		CHECK(r >= 0, "waitpid: %m");
		if (r)
			break;
		lat_add(&paging, rc_ping(&bystander));
		CHECK(now_usec() - t0 < 60000000, "the pager is not done after 60 s");
	}
	t_paging = now_usec() - t0;
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the pager failed (status %#x)",
	      status);

	/*
	 * The bystander's figures also hold the machine's scheduling (the pager
	 * parses its pages on the same CPUs): its waits over 5 ms, idle and
	 * while paging, tell the bus's part from the machine's.
	 */
	printf("  bus CPU while paging: %.3f s in %.1f s (the bystander's calls included)\n",
	       (double)(cpu_ns(bus.pid) - cpu0) / 1e9, t_paging / 1e6);
	lat_print("bystander GetId, idle", &idle);
	lat_print("bystander GetId, while paging", &paging);
	printf("  bystander waits over 5 ms: %zu of %zu idle, %zu of %zu while paging\n",
	       over(&idle, 5000), idle.n, over(&paging, 5000), paging.n);
	printf("  longest wait of the bystander beyond its idle median: %.1f ms while paging "
	       "(%.1f ms idle)\n",
	       ((double)lat_pct(&paging, 100) - (double)lat_pct(&idle, 50)) / 1000.0,
	       ((double)lat_pct(&idle, 100) - (double)lat_pct(&idle, 50)) / 1000.0);

	rc_ping(&bystander);
	rc_close(&bystander);
	/* Stopped first: 10,000 connections closing at once are the connections test's. */
	sbus_stop(&bus);
	for (size_t i = 0; i < n_conns; i++)
		rc_close(&conns[i]);
	lat_free(&idle);
	lat_free(&paging);
	lat_free(&rd.rtt);
	lat_free(&rd.bus_cpu);
	free(rd.seen);
	free(conns);
	free(pfds);
	printf("ok\n");
	return 0;
}
