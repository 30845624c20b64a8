/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/**
 * DOC: Handing the bus over through systemd's fd store
 *
 * A re-exec (reexec.h) keeps the process. A restart by systemd
 * (systemctl restart, or Restart= after a clean exit) replaces it; with the
 * service's fd store enabled (FileDescriptorStoreMax= >= 2, which systemd
 * 254 and later announce in $FDSTORE; the shipped units set $FDSTORE for
 * older ones) the bus still carries everything over:
 *
 *  1. On SIGTERM the bus writes the state a re-exec writes (without the
 *     activated services: systemd stops them with the old process), and
 *     sends every fd the state names into one end of a socket pair, with
 *     the fd numbers as data (fdstore_hand_over()). Both that socket and
 *     the state memfd go to the store: FDSTORE=1, FDPOLL=0, FDNAME=
 *     bus1-fds and bus1-state. Two entries whatever the number of clients,
 *     and nothing systemd could drop: the store removes duplicates, and a
 *     client could make two of the bus' fds refer to one file.
 *  2. The process ends without touching what it handed over: no socket
 *     file unlinked, nothing closed on purpose, no bus1 node released.
 *  3. systemd stops the service and starts it again, passing the store
 *     (LISTEN_FDNAMES). fdstore_take(), first thing in main(), finds the
 *     two entries, reads the fds back and moves each to the number it had
 *     in the old process; the bus is restored from the state as after a
 *     re-exec, and the entries are removed from the store (FDSTOREREMOVE=1)
 *     so that a later crash never finds a stale state.
 *  4. Nothing the old process set up is taken as given: every carried fd
 *     is put in the loop's mode again (util/fd.h: systemd made the .socket
 *     unit's sockets blocking, and the carried listener is one of them),
 *     the pid file and <user> are done again, and a .socket unit restarted
 *     meanwhile has its new socket served (broker_take_socket_unit()). A
 *     state read but not restorable empties the store and exits 1: never a
 *     bus that looks ready and cannot serve.
 *
 * What clients see: a delay, nothing else (their sockets stay open, kept by
 * the store while no process holds them). If the new process cannot use
 * the state (another version, an fd missing), it logs why, closes every
 * carried fd (those clients see their connection close, as after
 * dbus-daemon's restart) and starts as a new bus on the sockets systemd
 * passed. "systemctl stop" discards the store: the clients are
 * disconnected then. A crash hands nothing over, but the crash journal
 * (broker/objects/journal.h) is in the store all the time: fdstore_take()
 * finds its entries beside (or instead of) a hand-over's, and the bus
 * resumes from it when there is no hand-over (broker_restore_crash()).
 */

#include <stdbool.h>
#include <stddef.h>

/*
 * The fd store is there to take the bus: $NOTIFY_SOCKET, $FDSTORE >= 2, and
 * this is the process systemd started ($SYSTEMD_EXEC_PID, systemd 248 and
 * later), not one that inherited its environment.
 */
bool fdstore_enabled(void);

/**
 * fdstore_hand_over() - put the state and its fds into the fd store
 * @state_fd:	the state (reexec.h), not closed
 * @fds:	every fd the state names (duplicates allowed)
 * @n_fds:	their number
 *
 * Return: 0, or negative errno (nothing left in the store).
 */
int fdstore_hand_over(int state_fd, const int *fds, size_t n_fds);

/**
 * struct fdstore_carried - what fdstore_take() found
 * @state_fd:	the state, or -1 (a start with nothing handed over)
 * @fds:	the fds it names, each at the number the old process gave it
 * @n_fds:	their number
 * @listen_fds:	the other passed fds (a .socket unit's), moved out of the way
 * @listen_names: their names
 * @n_listen:	their number
 */
struct fdstore_carried {
	int state_fd;
	int *fds;
	size_t n_fds;
	int *listen_fds;
	char **listen_names;
	size_t n_listen;
	/* the crash journal's entries (journal.h): each slot's fds, -1 if none */
	int journal_slots[2][2];
	struct journal_file *journal_files;	/* a version 1 journal's "f<seq>" files */
	size_t n_journal_files;
};

#define FDSTORE_CARRIED_INIT { .state_fd = -1, .journal_slots = { { -1, -1 }, { -1, -1 } } }

/**
 * fdstore_take() - take over what the previous process handed over
 * @c:		output; state_fd -1 if nothing (usable) was handed over; the
 *		crash journal's entries (journal.h) in ->journal_*, whatever
 *		else was there
 *
 * Must run before anything else opens an fd: it moves fds to fixed numbers.
 * Without a hand-over in the passed fds, nothing is touched (a .socket
 * unit's fds stay where sd_listen_fds() finds them). Otherwise the passed
 * fds are all taken: those of a .socket unit go to @c->listen_fds (for
 * broker_options) and $LISTEN_* is unset. A hand-over that cannot be used
 * is logged and discarded (fdstore_discard()).
 * Return: 0 or negative errno (as sd_listen_fds_with_names()).
 */
int fdstore_take(struct fdstore_carried *c);

/* Whether @fd is one of @c's: a state from the store names no other fd. */
bool fdstore_carries(int fd, void *c);

/*
 * The bus restored: the store gives the state and the socket up, the carried
 * fds are the bus's, and the .socket unit's fds are closed (the listeners
 * were in the state).
 */
void fdstore_taken(struct fdstore_carried *c);

/*
 * The state cannot be used: every carried fd is closed (those clients are
 * disconnected) and the store gives the entries up. @c->listen_fds remain,
 * for a bus started afresh.
 */
void fdstore_discard(struct fdstore_carried *c);

/* Closes what @c still holds. */
void fdstore_carried_free(struct fdstore_carried *c);

/*
 * A crash journal that cannot be used: every socket it carries is shut down
 * (its clients see the end, its listeners refuse, so that a new bus can take
 * their paths) and closed; but not the .socket unit's listening sockets, also
 * passed in @c's listen_fds: systemd keeps those for every start, and one shut
 * down would refuse every client until the unit restarts. Its entries stay in
 * @c, to be removed from the store (broker_journal_forget()).
 */
void fdstore_journal_shut(struct fdstore_carried *c);
/* The same for @n fds taken from it already (a snapshot's, journal_load()): each set to -1. */
void fdstore_journal_shut_fds(const struct fdstore_carried *c, int *fds, size_t n);

/* Whether the store passed a crash journal (journal.h). */
static inline bool fdstore_has_journal(const struct fdstore_carried *c)
{
	return c->journal_slots[0][0] >= 0 || c->journal_slots[1][0] >= 0;
}
