/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * The "peer protocol" shared by test-peer-libdbus.c, test-peer-gdbus.c and
 * test-peer-sdbus.c: three clients built on three D-Bus libraries that must
 * interoperate through the bus.
 *
 *   test-peer-X MYNAME OTHER1 OTHER2 EXITER
 *
 * Each peer subscribes (match rules) to the signals of interface
 * org.bus1.Peer and to NameOwnerChanged, owns MYNAME, and, once both others
 * own their names: emits Announce(MYNAME) and calls OTHER.Ping(MYNAME) on
 * both (asynchronously: everybody calls everybody at the same time). When it
 * has both Announce signals and both Ping replies it emits Done(MYNAME). When
 * it has both Done signals, the peer named EXITER exits; the others wait for
 * NameOwnerChanged(EXITER, old, "") and then exit. Every step is checked; any
 * mismatch or a 20 s timeout fails the peer.
 */

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define PEER_IFACE "org.bus1.Peer"
#define PEER_PATH "/org/bus1/Peer"
#define PEER_TIMEOUT_SEC 20

struct peer {
	const char *impl;
	const char *me;
	const char *others[2];
	const char *exiter;
	bool started;		/* Announce sent, Pings sent */
	bool got_announce[2];
	bool got_pong[2];
	bool got_done[2];
	bool done_sent;
	bool exiter_gone;
	int n_pings_served;
	time_t deadline;
};

__attribute__((format(printf, 2, 3)))
static inline void peer_log(const struct peer *p, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "[%s %s] ", p->impl, p->me);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

static inline void peer_fail(const struct peer *p, const char *what)
{
	peer_log(p, "FAIL: %s", what);
	exit(1);
}

static inline void peer_init(struct peer *p, const char *impl, int argc, char **argv)
{
	memset(p, 0, sizeof(*p));
	p->impl = impl;
	if (argc != 5) {
		fprintf(stderr, "usage: %s MYNAME OTHER1 OTHER2 EXITER\n", argv[0]);
		exit(2);
	}
	p->me = argv[1];
	p->others[0] = argv[2];
	p->others[1] = argv[3];
	p->exiter = argv[4];
	p->deadline = time(NULL) + PEER_TIMEOUT_SEC;
}

static inline int peer_index(const struct peer *p, const char *name)
{
	if (name && !strcmp(name, p->others[0]))
		return 0;
	if (name && !strcmp(name, p->others[1]))
		return 1;
	return -1;
}

static inline bool peer_is_exiter(const struct peer *p)
{
	return !strcmp(p->me, p->exiter);
}

/* Ready to emit Done? */
static inline bool peer_ready_for_done(const struct peer *p)
{
	return !p->done_sent && p->got_announce[0] && p->got_announce[1] && p->got_pong[0] &&
	       p->got_pong[1];
}

/* Finished (may exit 0)? */
static inline bool peer_finished(const struct peer *p)
{
	if (!p->done_sent || !p->got_done[0] || !p->got_done[1])
		return false;
	return peer_is_exiter(p) || p->exiter_gone;
}

static inline void peer_check_deadline(const struct peer *p)
{
	char buf[256];

	if (time(NULL) < p->deadline)
		return;
	snprintf(buf, sizeof(buf),
		 "timeout: started=%d announce=%d%d pong=%d%d done=%d%d sent=%d exiter_gone=%d",
		 p->started, p->got_announce[0], p->got_announce[1], p->got_pong[0],
		 p->got_pong[1], p->got_done[0], p->got_done[1], p->done_sent, p->exiter_gone);
	peer_fail(p, buf);
}

/* The reply Ping(from) must give. */
static inline void peer_pong_text(const struct peer *p, const char *from, char *buf, size_t n)
{
	snprintf(buf, n, "pong:%s:%s", p->me, from);
}

/* Check a Ping reply from others[i]. */
static inline void peer_check_pong(struct peer *p, int i, const char *text)
{
	char want[512];

	snprintf(want, sizeof(want), "pong:%s:%s", p->others[i], p->me);
	if (!text || strcmp(text, want)) {
		peer_log(p, "bad Ping reply from %s: '%s' (want '%s')", p->others[i],
			 text ? text : "(null)", want);
		exit(1);
	}
	p->got_pong[i] = true;
}
