/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/**
 * DOC: Re-executing a live bus
 *
 * On SIGUSR2 the broker replaces its program with the one on disk (a newer
 * version, usually) without a client noticing: same pid, same sockets, same
 * state. The steps, all inside one callback of the loop (clients wait, they
 * are not dropped):
 *
 *  1. Everything that can be written is written; the state is serialized
 *     (state.h) into a sealed memfd: the bus' identity and counters, every
 *     listener, every peer (credentials, flags, unique name, names with
 *     their queue positions, match rules, what its socket holds unread or
 *     unwritten, fds sent ahead), the pending replies with their deadlines,
 *     the activation environment, the activated services still running
 *     (still the bus' children after the exec: the new program reaps them)
 *     and the pending activations with their queued requests and deadlines.
 *  2. The new program checks the state: it is started with the command
 *     line plus --check-state and must load the configuration file, read
 *     all of the state and exit 0 within REEXEC_CHECK_TIMEOUT. If it cannot
 *     (another state version, a broken binary or file, a crash), the re-exec
 *     is refused and logged, and nothing changed: the bus goes on serving.
 *     It is started before step 1, with --check-state-from=SOCK (a socket
 *     over which the state comes once written), so that its exec and start-up
 *     overlap the writing; a program that does not know that option (it
 *     never says hello on SOCK) is checked again with --check-state=FD.
 *  3. The carried fds lose FD_CLOEXEC and the program is executed again
 *     with its command line plus --restore-state=FD and
 *     --reexec-fallback=FD (the old program, kept open). A short-lived
 *     helper process keeps the old address space and fd table alive
 *     across the exec and frees them after it (reexec.c), so that the exec
 *     does not spend the clients' time on that.
 *  4. The new program loads the configuration file as at start, reads the
 *     state, re-creates everything without a single message to a client
 *     (no NameOwnerChanged, no NameAcquired) and runs the loop. If it
 *     cannot read or restore the state after all, it executes the old
 *     program with the same state (which wrote it, so can read it) and
 *     every fd as it came: the new program set FD_CLOEXEC on all of them
 *     at once first (close_range()), and clears it again before that exec
 *     on the state and every fd the state names (or, when it could not
 *     read the state, on every fd open: it opened none of its own yet).
 *
 * Native clients cross too: the broker's bus1 peer fd survives the exec, and
 * with it every node, handle and queued message in the kernel; only the
 * broker's view of each client (its handles, what it has not read) is in
 * the state.
 *
 * A client still in SASL is not carried over: reexec_run() then holds the
 * listeners (new clients wait in the backlog, listener_hold()) and looks
 * again every few ms until no client authenticates (each finishes, or is
 * dropped at auth_timeout), then re-executes; past auth_timeout + 1 s it
 * gives up and releases them ("re-exec refused: ...").
 *
 * The same state, written on SIGTERM, also crosses a restart by systemd
 * through its fd store (fdstore.h, reexec_hand_over()); what a crash loses
 * is described there.
 */

#include <stdbool.h>
#include <stddef.h>

struct broker;

/* The longest the old program waits for the new one to accept the state. */
#define REEXEC_CHECK_TIMEOUT_MSEC 10000

struct state_writer;

/*
 * What the sequence asks of the process: the whole state, in sections
 * (broker_serialize()). @handover: for the next process of the service.
 */
typedef int (*reexec_serialize_fn)(struct broker *broker, bool handover,
				   struct state_writer *w);

/**
 * reexec_prepare() - remember what a re-exec needs, at start-up
 * @argv:	the command line (kept by pointer: main()'s)
 * @serialize:	writes the state (kept)
 *
 * Opens the running program (the fallback) and notes the path to execute.
 * Return 0 or negative errno (re-exec then refused).
 */
int reexec_prepare(struct broker *broker, char **argv, reexec_serialize_fn serialize);

/*
 * SIGUSR2: re-execute now, or once no client authenticates. Returns if
 * refused or waiting (logged).
 */
void reexec_run(struct broker *broker);

/*
 * The new program, as the check started early (--check-state-from=SOCK,
 * reexec.c): hello on @sock first (it knows the option), then the state's
 * fd from it. Return 0 / the fd (close-on-exec), or negative errno.
 */
int reexec_check_hello(int sock);
int reexec_check_receive(int sock);

/* A set of fds: those handed over, to hand back (reexec_go_back()). */
struct reexec_fds {
	int *v;
	size_t n;
	size_t cap;
	int error;
};

/* Add @fd (if >= 0) to @s; out of memory is recorded in ->error. */
void reexec_fds_add(struct reexec_fds *s, int fd);

/*
 * The new program, first of all: every fd from 3 on gets FD_CLOEXEC (what
 * the previous program handed over and the state does not name must not
 * leak into activated services).
 */
void reexec_cloexec_all(void);

/*
 * Every fd open from 3 on, into @s: what the previous program handed over,
 * as long as this one has opened nothing of its own since.
 */
void reexec_fds_open(struct reexec_fds *s);

/*
 * The new program cannot restore what the previous one wrote: execute the
 * previous one (kept open as @fallback_fd) with the same command line and
 * every fd of @handed (what it handed over) as it came. Returns only if
 * that fails (logged).
 */
void reexec_go_back(int fallback_fd, char **argv, struct reexec_fds *handed);

/*
 * SIGTERM with systemd's fd store there (fdstore.h): put the bus into it
 * (after the clients in SASL, as reexec_run() waits for them) and end the
 * loop; broker->handed_over tells whether it went. A second SIGTERM while
 * waiting ends the loop at once.
 */
void reexec_hand_over(struct broker *broker);
