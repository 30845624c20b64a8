/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The flood of issue 41: eight connections that never read send 4 KiB
 * NO_REPLY_EXPECTED calls, as fast as the bus takes them, at a service that
 * never reads. The service's queue fills, every further call is refused, and
 * each refusal is an error the bus queues back to a flooder that does not
 * read either. With the session limits (--session: a user may queue 1 GB)
 * nothing in the configuration stops that before gigabytes.
 *
 * Asserts: the bus's RSS levels off (the flooders' uid gets its share, not
 * the configured maximum), a bystander of another actor keeps its round-trip
 * latency, and when the flood ends and the queues drain the RSS comes back
 * down; its log keeps a burst of each flooder's refusals per window
 * (broker/objects/log-limit.h), not one line per refusal. Prints the RSS curve (the
 * figures of issue 41 at 2, 12 and 40 s) and the size of the log.
 *
 *   test-flood-share BUS_BINARY [CONFIG]   (STRESS_FLOOD_SECONDS=N, default 8)
 */

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include "stress-common.h"
#include "time-factor.h"

#define N_FLOODERS 8
#define PAYLOAD 4096
#define CALL_TIMEOUT_MS 5000
/* broker/objects/peer.h: the refusal lines of one actor per window, and the window. */
#define LOG_BURST 10
#define LOG_WINDOW_SECONDS 5
/* A refusal line names both peers and their command lines: well below this. */
#define LOG_LINE_MAX 1024

static struct sbus bus;

/* 4 KiB NO_REPLY_EXPECTED calls at @dest as fast as the bus reads; never read. */
static pid_t fork_flooder(struct rc *c, const char *dest)
{
	pid_t pid = fork();
	static char payload[PAYLOAD];
	const char *p = payload;
	DBusMessage *m;

	CHECK(pid >= 0, "fork");
	if (pid > 0) {
		stress_track_child(pid);
		return pid;
	}
	memset(payload, 'f', sizeof(payload) - 1);
	m = dbus_message_new_method_call(dest, "/", STRESS_IFACE, "Flood");
	dbus_message_append_args(m, DBUS_TYPE_STRING, &p, DBUS_TYPE_INVALID);
	dbus_message_set_no_reply(m, TRUE);
	for (;;) {
		char *data = NULL;
		int len = 0;

		dbus_message_set_serial(m, ++c->serial ? c->serial : ++c->serial);
		CHECK(dbus_message_marshal(m, &data, &len), "marshal");
		if (rc_write(c, data, (size_t)len, NULL, 0) < 0)
			_exit(0);
		dbus_free(data);
	}
}

/* Round trips for @usec; returns the peak bus RSS sampled meanwhile (KiB). */
static long measure(struct rc *by, const char *peer, struct lat *l, uint64_t usec)
{
	uint64_t end = now_usec() + usec;
	long peak = 0;

	while (now_usec() < end) {
		long rss;

		lat_add(l, rc_echo_call(by, peer, CALL_TIMEOUT_MS));
		rss = proc_status_kb(bus.pid, "VmRSS");
		if (rss > peak)
			peak = rss;
		usleep(5000);
	}
	return peak;
}

int main(int argc, char **argv)
{
	const char *env = getenv("STRESS_FLOOD_SECONDS");
	uint64_t seconds = env ? strtoul(env, NULL, 10) : 8;
	struct rc by, echo, service, fl[N_FLOODERS];
	struct lat idle = {}, flood = {};
	char echo_name[64], service_name[64];
	pid_t pids[N_FLOODERS];
	long rss_idle, rss_peak = 0, rss_after, window[3] = {}, at[3] = {};
	uint64_t marks[3] = { 2, 12, 40 }, t0, flood_seconds;
	long long log_bytes, log_max;
	struct stat st;
	size_t n_samples = 0;
	bool level = false;
	int k = 0;

	sbus_start(&bus, argc > 1 ? argv[1] : NULL, argc > 2 ? argv[2] : NULL, 0);
	rc_open(&by, &bus, false);
	rc_open(&echo, &bus, false);
	snprintf(echo_name, sizeof(echo_name), "%s", echo.name);
	fork_echo_peer(&echo);
	rc_close(&echo);
	/* After the fork: the echo peer holds no copy of these (their end is their close). */
	rc_open(&service, &bus, false);
	for (int i = 0; i < N_FLOODERS; i++)
		rc_open(&fl[i], &bus, false);
	snprintf(service_name, sizeof(service_name), "%s", service.name);

	rss_idle = proc_status_kb(bus.pid, "VmRSS");
	measure(&by, echo_name, &idle, 1000000);

	t0 = now_usec();
	for (int i = 0; i < N_FLOODERS; i++) {
		pids[i] = fork_flooder(&fl[i], service_name);
		rc_close(&fl[i]);
	}
	printf("flood-share: %d non-readers, %d B no-reply calls at a non-reader, %llu s\n",
	       N_FLOODERS, PAYLOAD, (unsigned long long)seconds);
	/*
	 * At least @seconds, and on until the RSS held still (within 8 MiB)
	 * for three seconds, for at most four times as long times the
	 * machine's time factor: a slow machine fills the queues later.
	 */
	for (uint64_t s = 0;;) {
		long peak = measure(&by, echo_name, &flood, 1000000);

		s = (now_usec() - t0 + 500000) / 1000000;
		if (peak > rss_peak)
			rss_peak = peak;
		window[n_samples++ % 3] = peak;
		printf("  %2llu s: bus VmRSS %ld KiB\n", (unsigned long long)s, peak);
		while (k < 3 && s >= marks[k])
			at[k++] = peak;
		level = n_samples >= 3 && labs(window[0] - window[1]) < 8 * 1024 &&
			labs(window[1] - window[2]) < 8 * 1024 &&
			labs(window[0] - window[2]) < 8 * 1024;
		if (s >= seconds && (level || s >= 4 * seconds * test_time_factor()))
			break;
	}
	CHECK(sbus_alive(&bus), "the bus died under the flood");

	/* The flood ends: the flooders go, the service reads its queue. */
	for (int i = 0; i < N_FLOODERS; i++)
		kill(pids[i], SIGKILL);
	for (int i = 0; i < N_FLOODERS; i++)
		waitpid(pids[i], NULL, 0);
	flood_seconds = (now_usec() - t0 + 999999) / 1000000;
	while (rc_fill(&service, 200) > 0)
		service.len = 0;
	CHECK(!service.eof, "the service was disconnected");
	rc_ping(&by);
	usleep(300000);
	rss_after = proc_status_kb(bus.pid, "VmRSS");

	lat_print("bystander call to echo peer, idle", &idle);
	lat_print("bystander call to echo peer, under flood", &flood);
	printf("  bus VmRSS idle %ld KiB; under flood", rss_idle);
	for (int i = 0; i < k; i++)
		printf(" %llu s %ld,", (unsigned long long)marks[i], at[i]);
	printf(" peak %ld; after drain %ld KiB\n", rss_peak, rss_after);
	/*
	 * Each flooder: a burst of refusal lines per window it refused in, and
	 * a line of what was left out after each; and the lines of the flooders'
	 * ends. Without the rate limit this was a line per refusal (issue 41: MBs).
	 */
	CHECK(stat(bus.log, &st) == 0, "stat %s: %m", bus.log);
	log_bytes = (long long)st.st_size;
	log_max = (long long)N_FLOODERS *
		  ((long long)(flood_seconds / LOG_WINDOW_SECONDS + 2) * (LOG_BURST + 1) + 2) *
		  LOG_LINE_MAX;
	printf("  bus log: %lld bytes in %llu s of flood (bound %lld)\n", log_bytes,
	       (unsigned long long)flood_seconds, log_max);
	/* The reference bus logs every refusal: the bound is bus1-broker's. */
	if (!getenv("BUS_BINARY_OVERRIDE"))
		CHECK(log_bytes <= log_max, "the bus logged %lld bytes in a %llu s flood",
		      log_bytes, (unsigned long long)flood_seconds);

	/*
	 * The flooders' uid may hold at most USER_BYTES_CAP (257 MiB) however
	 * they split it, and its actors half of that (user.h); each flooder's
	 * unread errors pause it at 1 MiB (PEER_ANSWER_BACKLOG). Allow the
	 * heap's own slack on top.
	 */
	CHECK_MEM(rss_peak < rss_idle + 224 * 1024, "the flood grew the bus to %ld KiB", rss_peak);
	/* It levelled off. */
	CHECK_MEM(level, "still growing: the last three seconds' RSS %ld, %ld, %ld KiB",
		  window[n_samples % 3], window[(n_samples + 1) % 3], window[(n_samples + 2) % 3]);
	/* And the memory went back to the system once the queues drained. */
	CHECK_MEM(rss_after < rss_idle + 32 * 1024, "%ld KiB after the drain (idle: %ld)",
		  rss_after, rss_idle);

	rc_close(&service);
	rc_close(&by);
	sbus_stop(&bus);
	lat_free(&idle);
	lat_free(&flood);
	printf("ok\n");
	return 0;
}
