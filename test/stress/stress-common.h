/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * Helpers of the stress tests (test/stress/): start bus1-broker on a private
 * socket, read its figures from /proc, and a raw D-Bus client over a unix
 * socket that can behave or misbehave. Messages are built and parsed with
 * libdbus (dbus_message_marshal/demarshal); the socket I/O is our own, so a
 * client can pipeline its handshake, stop reading, write half a message or
 * send bytes no library would.
 *
 * Failures: CHECK() (test/common/check.h) prints file:line and aborts, FAIL()
 * prints file:line and exits 1; before either, the main process kills the bus
 * and every forked helper and prints the bus log.
 */

#include <dbus/dbus.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include "check.h"

/*
 * Under AddressSanitizer (or valgrind) the bus's memory figures mean little
 * (quarantine, shadow memory): memory bounds are printed but not checked.
 */
#if defined(__SANITIZE_ADDRESS__)
#define STRESS_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define STRESS_SANITIZED 1
#endif
#endif
#ifndef STRESS_SANITIZED
#define STRESS_SANITIZED 0
#endif
/* Whether memory bounds are checked: not under sanitizers nor BUS_WRAPPER (valgrind). */
bool stress_check_memory(void);
/* CHECK() for memory bounds. */
#define CHECK_MEM(cond, ...) \
	do { \
		if (stress_check_memory()) \
			CHECK(cond, __VA_ARGS__); \
	} while (0)

#define DRIVER "org.freedesktop.DBus"
#define DRIVER_PATH "/org/freedesktop/DBus"
#define STRESS_IFACE "org.bus1.Stress"

void stress_fail(const char *file, int line, const char *fmt, ...)
	__attribute__((format(printf, 3, 4), noreturn));
#define FAIL(...) stress_fail(__FILE__, __LINE__, __VA_ARGS__)

/* Monotonic time in microseconds. */
uint64_t now_usec(void);

/* Raise our own RLIMIT_NOFILE soft limit to at least @n (up to the hard limit). */
void raise_nofile(unsigned long n);
/*
 * How many of @want connections this process and a bus may hold: the bus needs two fds per
 * connection (its socket and pidfd) and some of its own, in *@bus_nofile for sbus_start();
 * without CAP_SYS_RESOURCE the hard limit cannot be raised, and fewer fit (9966 at 20000).
 * Raises this process's soft limit for them.
 */
size_t fit_connections(size_t want, unsigned long *bus_nofile);

/* Remember a forked helper so the exit handler kills it. */
void stress_track_child(pid_t pid);

/* --- the bus ----------------------------------------------------------- */

struct sbus {
	pid_t pid;
	char dir[64];		/* private directory: socket and log */
	char log[128];
	char address[512];
	char path[256];		/* socket path ('\0' first: abstract) */
	size_t path_len;
};

/*
 * Start the bus given as argv[1] (BUS_BINARY_OVERRIDE replaces it; BUS_WRAPPER,
 * words separated by spaces, is put in front, e.g. "valgrind -q"). @config is
 * a file name (NULL: --session); @nofile > 0 sets the bus's RLIMIT_NOFILE.
 * STRESS_BUS_PRELOAD, if set, becomes the bus's LD_PRELOAD.
 */
void sbus_start(struct sbus *bus, const char *binary, const char *config, unsigned long nofile);
/* Fails the test if the bus died; then stops it with SIGTERM. */
void sbus_stop(struct sbus *bus);
bool sbus_alive(struct sbus *bus);

/* /proc figures of @pid: a "Vm..." line of status in KiB, CPU seconds, open fds. */
long proc_status_kb(pid_t pid, const char *key);
double proc_cpu_seconds(pid_t pid);
int proc_fd_count(pid_t pid);
/* The same, not counting the fds whose /proc link starts with @skip. */
int proc_fd_count_except(pid_t pid, const char *skip);

/* --- raw client -------------------------------------------------------- */

struct rc {
	int fd;
	bool eof;		/* read returned 0 or an error */
	bool unix_fds;
	uint32_t serial;
	char name[64];		/* unique name after Hello */
	uint8_t *buf;		/* unparsed input */
	size_t len, cap;
	size_t n_fds_received;	/* fds that came with messages (closed at once) */
	uint64_t n_messages;	/* messages parsed */
	bool keep;		/* rc_wait_reply() keeps other messages for rc_take() */
	DBusMessage **stash;
	size_t n_stash, cap_stash;
};

/* Connect (blocking socket). Returns 0 or -errno (no failure of the test). */
int rc_connect(struct rc *c, const struct sbus *bus);
/* Connect, authenticate and Hello, blocking; fails the test on error. */
void rc_open(struct rc *c, const struct sbus *bus, bool unix_fds);
void rc_close(struct rc *c);

/*
 * Pipelined handshake: write the SASL lines, BEGIN and Hello at once (so many
 * connections can be set up in parallel), then rc_handshake_step() while it
 * returns 0; 1 when the unique name is known, -1 on failure.
 */
int rc_handshake_start(struct rc *c, bool unix_fds);
int rc_handshake_step(struct rc *c);

/* Write everything, blocking (poll). Returns 0 or -errno (EPIPE, ...). */
int rc_write(struct rc *c, const void *data, size_t n, const int *fds, size_t n_fds);
/* Set the next serial on @m and write it. Returns the serial, or 0 on a write error. */
uint32_t rc_send(struct rc *c, DBusMessage *m, const int *fds, size_t n_fds);

/* Read what is available, waiting up to @timeout_ms. Returns bytes read, 0, or -1 (eof). */
int rc_fill(struct rc *c, int timeout_ms);
/*
 * The next message kept by rc_wait_reply(), else the next complete message in
 * the buffer, or NULL. Unparsable frames fail the test.
 */
DBusMessage *rc_take(struct rc *c);
/* The next message, waiting up to @timeout_ms; NULL on timeout or eof. */
DBusMessage *rc_recv(struct rc *c, int timeout_ms);
/* Wait for the reply to @serial, dropping (or keeping, see ->keep) other messages. */
DBusMessage *rc_wait_reply(struct rc *c, uint32_t serial, int timeout_ms);
/* Send a method call and wait for its reply (fails the test on timeout). Takes @m. */
DBusMessage *rc_call(struct rc *c, DBusMessage *m, int timeout_ms);
/* Whether the bus closed this connection within @timeout_ms (reads and drops input). */
bool rc_wait_closed(struct rc *c, int timeout_ms);

/* A method call to the driver, with optional string/uint arguments. */
DBusMessage *driver_call_new(const char *member);
/* Call a driver method with one string argument (or none if @arg is NULL). */
DBusMessage *rc_driver_call(struct rc *c, const char *member, const char *arg);
/* Driver round trip (GetId) that must succeed; returns its latency in usec. */
uint64_t rc_ping(struct rc *c);
/* Round trip to an echo peer (fork_echo_peer()) that must succeed; its latency in usec. */
uint64_t rc_echo_call(struct rc *c, const char *peer, int timeout_ms);
/* GetStats of the driver: the value of the uint32 entry @key (-1 if absent). */
long rc_bus_stat(struct rc *c, const char *key);
/* GetConnectionStats of @name: the uint32 (or boolean: 0, 1) entry @key (-1 if absent). */
long rc_conn_stat(struct rc *c, const char *name, const char *key);
bool rc_name_has_owner(struct rc *c, const char *name);

/* Error name of @m if it is an error, else NULL. */
const char *msg_error(DBusMessage *m);

/* --- figures ----------------------------------------------------------- */

struct lat {
	uint64_t *v;
	size_t n, cap;
};
void lat_add(struct lat *l, uint64_t usec);
/* Percentile (0..100) in usec; sorts. */
uint64_t lat_pct(struct lat *l, double p);
void lat_print(const char *what, struct lat *l);
void lat_free(struct lat *l);

/*
 * Fork a child that answers every method call it gets on @c with an empty
 * return (an echo peer), until killed. The parent must not use @c afterwards
 * except to rc_close() its copy of the fd.
 */
pid_t fork_echo_peer(struct rc *c);
