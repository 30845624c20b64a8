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
#include <sys/types.h>

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
