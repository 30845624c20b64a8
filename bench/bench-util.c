/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Timing, percentile and /proc sampling helpers for the benchmark clients.
 */

#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "bench-util.h"

uint64_t bench_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

int bench_samples_init(BenchSamples *s, size_t n_max)
{
	*s = (BenchSamples){};
	s->ns = calloc(n_max ? n_max : 1, sizeof(*s->ns));
	if (!s->ns)
		return -ENOMEM;
	s->n_max = n_max;
	return 0;
}

void bench_samples_deinit(BenchSamples *s)
{
	free(s->ns);
	*s = (BenchSamples){};
}

void bench_samples_add(BenchSamples *s, uint64_t ns)
{
	/* The callers size the buffer for their run; extra samples are dropped. */
	if (s->n < s->n_max)
		s->ns[s->n++] = ns;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

double bench_samples_percentile_us(BenchSamples *s, double pct)
{
	size_t i;

	if (!s->n)
		return 0;
	qsort(s->ns, s->n, sizeof(*s->ns), cmp_u64);
	/* Nearest rank: the smallest sample with at least pct% at or below it. */
	i = (size_t)(pct / 100.0 * (double)s->n + 0.999999);
	if (i > 0)
		i--;
	if (i >= s->n)
		i = s->n - 1;
	return (double)s->ns[i] / 1000.0;
}

static int64_t task_schedstat_ns(pid_t pid, const char *tid)
{
	char path[64 + 256];
	unsigned long long ns;
	FILE *f;
	int r;

	snprintf(path, sizeof(path), "/proc/%d/task/%s/schedstat", (int)pid, tid);
	f = fopen(path, "re");
	if (!f)
		return -1;
	r = fscanf(f, "%llu", &ns);
	fclose(f);
	return r == 1 ? (int64_t)ns : -1;
}

static int64_t proc_stat_ns(pid_t pid)
{
	char path[64], buf[2048], *p;
	unsigned long long utime, stime, tick_ns;
	size_t n;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	f = fopen(path, "re");
	if (!f)
		return -1;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = 0;
	/* comm may contain spaces and parentheses; fields resume after the last ')'. */
	p = strrchr(buf, ')');
	if (!p)
		return -1;
	/* After ") " come state(3) ... utime(14) stime(15): skip 11 fields. */
	if (sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu",
		   &utime, &stime) != 2)
		return -1;
	tick_ns = 1000000000ULL / (unsigned long long)sysconf(_SC_CLK_TCK);
	return (int64_t)((utime + stime) * tick_ns);
}

/*
 * The number after @key (e.g. "VmRSS:") on its line of the status file @path,
 * or -1 if the line is missing or the file cannot be read.
 */
static long long status_field(const char *path, const char *key)
{
	size_t n = strlen(key);
	char line[256];
	long long v = -1;
	FILE *f;

	f = fopen(path, "re");
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		if (!strncmp(line, key, n)) {
			v = strtoll(line + n, NULL, 10);
			break;
		}
	}
	fclose(f);
	return v;
}

/*
 * Times the thread went to sleep (voluntary context switches), from the
 * voluntary_ctxt_switches line of its status file; -1 if it cannot be read.
 */
static int64_t task_sleeps(pid_t pid, const char *tid)
{
	char path[64 + 256];

	snprintf(path, sizeof(path), "/proc/%d/task/%s/status", (int)pid, tid);
	return status_field(path, "voluntary_ctxt_switches:");
}

/* Sum of @fn over the threads of @pid; -1 if any of them cannot be read. */
static int64_t sum_over_tasks(pid_t pid, int64_t (*fn)(pid_t pid, const char *tid))
{
	char path[64];
	struct dirent *de;
	int64_t sum = 0, v;
	bool any = false;
	DIR *d;

	if (pid <= 0)
		return -1;
	snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
	d = opendir(path);
	if (!d)
		return -1;
	while ((de = readdir(d))) {
		if (de->d_name[0] == '.')
			continue;
		v = fn(pid, de->d_name);
		if (v < 0) {
			any = false;
			break;
		}
		sum += v;
		any = true;
	}
	closedir(d);
	return any ? sum : -1;
}

int64_t bench_proc_cpu_ns(pid_t pid)
{
	int64_t sum;

	if (pid <= 0)
		return -1;
	sum = sum_over_tasks(pid, task_schedstat_ns);
	/* A kernel without sched_info reports zero; use the tick counters then. */
	if (sum <= 0)
		return proc_stat_ns(pid);
	return sum;
}

int64_t bench_proc_sleeps(pid_t pid)
{
	return sum_over_tasks(pid, task_sleeps);
}

int64_t bench_self_cpu_ns(void)
{
	struct timespec ts;

	if (clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts) < 0)
		return -1;
	return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

int64_t bench_self_preempted(void)
{
	struct rusage ru;

	if (getrusage(RUSAGE_SELF, &ru) < 0)
		return -1;
	return ru.ru_nivcsw;
}

long bench_proc_rss_kib(pid_t pid)
{
	char path[64];

	if (pid <= 0)
		return -1;
	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	return (long)status_field(path, "VmRSS:");
}

uint64_t bench_parse_u64(const char *what, const char *s, uint64_t max)
{
	unsigned long long v;
	char *end;

	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || end == s || *end || s[0] == '-' || v > max) {
		fprintf(stderr, "invalid %s '%s' (0..%" PRIu64 ")\n", what, s, max);
		exit(2);
	}
	return v;
}

void bench_raise_fd_limit(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
}

void bench_report(uint64_t ops, uint64_t elapsed_ns, int64_t cpu0, int64_t cpu1,
		  const char *extra)
{
	double secs = (double)elapsed_ns / 1e9;

	printf("ok ops=%" PRIu64 " secs=%.6f rate=%.3f", ops, secs,
	       secs > 0 ? (double)ops / secs : 0.0);
	if (cpu0 >= 0 && cpu1 >= cpu0)
		printf(" bus_cpu_ns=%" PRId64, cpu1 - cpu0);
	if (extra && *extra)
		printf(" %s", extra);
	printf("\n");
	fflush(stdout);
}

#define BENCH_OPTIONS_MAX 8
/* getopt_long()'s value of the client's option i: beyond any character. */
#define BENCH_OPTION_VAL(i) (0x100 + (i))

static bool run_common_mode(const struct bench_modes *m, const char *mode, char **a, int n,
			    int *status)
{
	if (m->ping && !strcmp(mode, "ping") && n == 1)
		*status = m->ping(a[0]);
	else if (m->serve && !strcmp(mode, "serve") && n == 1)
		*status = m->serve(a[0]);
	else if (m->calls && !strcmp(mode, "calls") && n == 3)
		*status = m->calls(a[0], bench_parse_u64("size", a[1], BENCH_MAX_SIZE),
				   bench_parse_u64("count", a[2], BENCH_MAX_COUNT));
	else if (m->fanout && !strcmp(mode, "fanout") && n == 4)
		*status = m->fanout(a[0],
				    bench_parse_u64("subscribers", a[1], BENCH_MAX_SUBSCRIBERS) ?: 1,
				    bench_parse_u64("count", a[2], BENCH_MAX_COUNT),
				    bench_parse_u64("rounds", a[3], BENCH_MAX_COUNT));
	else
		return false;
	return true;
}

/*
 * --pid, --help and @options, up to the mode (getopt's "+": the mode's
 * arguments are its own, not options).
 * Return: -1 to go on with the mode at argv[optind], else an exit status.
 */
static int parse_options(int argc, char **argv, pid_t *pidp, const struct bench_option *options,
			 void (*usage)(FILE *f))
{
	struct option opts[BENCH_OPTIONS_MAX + 3] = {
		{ "pid", required_argument, NULL, 'p' },
		{ "help", no_argument, NULL, 'h' },
	};
	int n = 0, c;

	for (; options && options[n].name; n++) {
		if (n >= BENCH_OPTIONS_MAX)
			abort();
		opts[n + 2] = (struct option){
			options[n].name, options[n].pid ? required_argument : no_argument, NULL,
			BENCH_OPTION_VAL(n),
		};
	}
	while ((c = getopt_long(argc, argv, "+", opts, NULL)) >= 0) {
		if (c == 'p') {
			*pidp = (pid_t)bench_parse_u64("pid", optarg, INT32_MAX);
		} else if (c >= BENCH_OPTION_VAL(0) && c < BENCH_OPTION_VAL(n)) {
			const struct bench_option *o = &options[c - BENCH_OPTION_VAL(0)];

			if (o->pid)
				*o->pid = (pid_t)bench_parse_u64(o->name, optarg, INT32_MAX);
			else
				*o->flag = true;
		} else if (c == 'h') {
			usage(stdout);
			return 0;
		} else {
			usage(stderr);
			return 2;
		}
	}
	return -1;
}

int bench_main(int argc, char **argv, pid_t *pidp, const struct bench_option *options,
	       void (*usage)(FILE *f), const struct bench_modes *modes)
{
	const char *mode;
	int n, status;

	status = parse_options(argc, argv, pidp, options, usage);
	if (status >= 0)
		return status;
	if (optind >= argc) {
		usage(stderr);
		return 2;
	}
	/* A bus that drops us must not kill us before we report. */
	signal(SIGPIPE, SIG_IGN);
	mode = argv[optind];
	argv += optind + 1;
	n = argc - optind - 1;
	if (run_common_mode(modes, mode, argv, n, &status) ||
	    (modes->other && modes->other(mode, argv, n, &status)))
		return status;
	usage(stderr);
	return 2;
}
