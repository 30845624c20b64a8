/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/**
 * DOC: Helpers shared by the benchmark clients
 *
 * The clients (bench-dbus, bench-sdbus) print one result line of
 * "key=value" pairs that bench/run parses. They sample the bus process's CPU
 * time and RSS themselves, right around the measured phase, so that setup
 * (connecting, installing match rules) is not charged to the row.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

/* Bounds of the arguments of the modes every client has. */
#define BENCH_MAX_COUNT 10000000ULL
#define BENCH_MAX_SIZE (64ULL << 20)
#define BENCH_MAX_SUBSCRIBERS 4096ULL

/* Latency samples of one run, in nanoseconds. */
typedef struct BenchSamples {
	uint64_t *ns;
	size_t n;
	size_t n_max;
} BenchSamples;

uint64_t bench_now_ns(void);

int bench_samples_init(BenchSamples *s, size_t n_max);
void bench_samples_deinit(BenchSamples *s);
void bench_samples_add(BenchSamples *s, uint64_t ns);
/* Percentile (0..100) of the samples in microseconds; sorts in place. */
double bench_samples_percentile_us(BenchSamples *s, double pct);

/*
 * On-CPU time of all threads of @pid in nanoseconds (schedstat, falling back
 * to utime+stime in clock ticks), or -1 if @pid <= 0 or it cannot be read.
 */
int64_t bench_proc_cpu_ns(pid_t pid);
/*
 * Times the threads of @pid went to sleep (voluntary context switches, summed
 * over /proc/PID/task/TID/status): how often a bus ran out of work and had to
 * be woken again. -1 if @pid <= 0 or it cannot be read.
 */
int64_t bench_proc_sleeps(pid_t pid);
/* CPU time of this process (CLOCK_PROCESS_CPUTIME_ID), or -1. */
int64_t bench_self_cpu_ns(void);
/* Times this process was preempted (involuntary context switches), or -1. */
int64_t bench_self_preempted(void);
/* Resident set size of @pid in KiB, or -1. */
long bench_proc_rss_kib(pid_t pid);

/* Parse a non-negative decimal argument; exits with a message on bad input. */
uint64_t bench_parse_u64(const char *what, const char *s, uint64_t max);

/* Raise RLIMIT_NOFILE to its hard limit (for the many-connection rows). */
void bench_raise_fd_limit(void);

/* Print "ok ops=... secs=... rate=... [bus_cpu_ns=...]" plus @extra. */
void bench_report(uint64_t ops, uint64_t elapsed_ns, int64_t cpu0, int64_t cpu1,
		  const char *extra);

/*
 * The modes the socket and the native clients both have, with the same
 * arguments (bench/run drives either the same way); NULL where a client
 * lacks one.
 */
struct bench_modes {
	int (*ping)(const char *address);
	int (*serve)(const char *address);
	int (*calls)(const char *address, size_t size, uint64_t count);
	int (*fanout)(const char *address, size_t n_subs, uint64_t count, uint64_t rounds);
	/*
	 * The client's own modes: true with *status set when it knows @mode
	 * with @n_args arguments.
	 */
	bool (*other)(const char *mode, char **args, int n_args, int *status);
};

/* A client's option beyond --pid and --help: a flag, or one taking a pid. */
struct bench_option {
	const char *name;
	bool *flag;
	pid_t *pid;
};

/*
 * main() of a client: "[--pid BUS_PID] [OPTIONS] [--help] MODE ARGS...",
 * where @options (ended by an entry without name, at most 8) are the
 * client's own, then the mode of @modes.
 * Return: the mode's exit status; 0 for --help; 2 for a command line that
 * names no mode (@usage is printed).
 */
int bench_main(int argc, char **argv, pid_t *pidp, const struct bench_option *options,
	       void (*usage)(FILE *f), const struct bench_modes *modes);
