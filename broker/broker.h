/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/**
 * DOC: The broker process
 *
 * struct broker is what one bus1-broker process runs: the bus (bus.h, its
 * state), its transports (the socket connections, connection.h; the bus1
 * transport, native.h), the sd-event loop, the listening sockets
 * (listener.h), the signal handlers (SIGINT stops the loop; SIGTERM too,
 * or, under systemd with an fd store, first hands the bus over to the next
 * process through it: fdstore.h; SIGHUP reloads) and the configuration
 * reloader (reload.h: SIGHUP, ReloadConfig, inotify on the configuration and
 * service directories). main.c makes one.
 *
 * broker_new() creates the bus and the socket transport and binds the
 * listening sockets, so that an unusable address is reported by the exit
 * status of the starting process; broker_run() creates the event loop
 * (which must not cross --fork), attaches everything to it, opens the bus1
 * transport and runs until SIGTERM or SIGINT. SIGUSR2 re-executes the
 * program in place (reexec.h).
 */

#include <stdbool.h>
#include <sys/types.h>
#include <systemd/sd-event.h>
#include "broker/core/bus.h"
#include "broker/objects/journal.h"
#include "util/list.h"
#include "util/macro.h"

struct bus_config;
struct config_reload;
struct native;
struct socket_transport;
struct state_writer;

/**
 * struct broker_options - how to start the bus
 * @config:		loaded configuration (borrowed; may be NULL with @address)
 * @config_file:	its path, for ReloadConfig / SIGHUP (may be NULL)
 * @address:		--address, replaces the config's <listen> elements
 * @systemd_activation:	--systemd-activation
 * @containers:		--containers: the driver provides Containers1
 * @listen_fds:		the sockets of "systemd:" when not where sd_listen_fds()
 *			finds them (fdstore.h), else NULL
 * @n_listen_fds:	their number
 */
struct broker_options {
	const struct bus_config *config;
	const char *config_file;
	const char *address;
	bool systemd_activation;
	bool containers;
	const int *listen_fds;
	size_t n_listen_fds;
};

/* Positive codes of broker_new(), broker_restore() and friends. */
enum {
	_BROKER_E_SUCCESS,
	/* The configuration, an address or a passed socket cannot be used: broker_get_error(). */
	BROKER_E_INVALID,
	/* This program cannot read the state it was given (logged). */
	BROKER_E_STATE_UNREADABLE,
};

struct broker {
	struct bus bus;
	struct socket_transport *sockets;	/* every socket connection (connection.h) */
	struct native *native;		/* the bus1 transport (native.h), NULL: none */
	sd_event *event;
	sd_event_source *sig_term;
	sd_event_source *sig_int;
	sd_event_source *sig_hup;
	struct list_node listeners;
	struct config_reload *reload;	/* ReloadConfig, SIGHUP, inotify (reload.h) */
	char *address;			/* printable: every listener's address, ';'-joined */
	char *error;			/* start-up error message */

	/* re-exec (reexec.h) */
	sd_event_source *sig_usr2;
	sd_event_source *reexec_wait;	/* waiting for clients to authenticate */
	bool reexec_hand_over;		/* what the wait is for: the fd store, not exec */
	bool handed_over;		/* the fd store has it all: exit, touch nothing */
	uint64_t reexec_deadline;	/* CLOCK_MONOTONIC: then the wait gives up */
	char **argv;			/* main()'s */
	int (*reexec_serialize)(struct broker *broker, bool handover,
				struct state_writer *w);	/* broker_serialize() */
	char *exe_path;			/* the program to execute */
	int exe_fd;			/* the running program (the fallback), -1: none */

	/*
	 * crash survival (journal.h): the journal restored from, or the
	 * entries of one not used (to remove), until broker_journal_start()
	 */
	struct journal_loaded journal_from;
};

/**
 * broker_new() - create the bus and its listening sockets
 *
 * Return: 0, BROKER_E_INVALID (an invalid configuration or address:
 * broker_get_error()) or negative errno; *@brokerp is set in all cases where
 * it could be allocated, so the error can be read.
 */
int broker_new(struct broker **brokerp, const struct broker_options *opts);
struct broker *broker_free(struct broker *broker);
DEFINE_CLEANUP_FUNC(struct broker *, broker_free);

const char *broker_get_address(struct broker *broker);
const char *broker_get_error(struct broker *broker);


/**
 * broker_take_socket_unit() - after a restore, serve the .socket unit's sockets
 * @opts:	@listen_fds: the sockets the .socket unit passed with the fd store
 *
 * A bus restored from the fd store (fdstore.h) listens on the sockets in its
 * state. Those are the .socket unit's own, unless the unit was restarted in
 * between: its new socket then sits on the same path while the carried one
 * is unreachable. A bus that listens on "systemd:" serves every passed
 * socket: one bound to the name of a carried listener replaces that
 * listener's socket, any other becomes a listener of its own. The passed
 * fds stay the caller's (copies are taken).
 * Return: 0, BROKER_E_INVALID (not a listening unix socket, broker_get_error())
 * or -errno.
 */
int broker_take_socket_unit(struct broker *broker, const struct broker_options *opts);


/* The process now runs as @uid (<user>): the bus' own identity follows. */
void broker_set_uid(struct broker *broker, uid_t uid);
/* The bus is process @pid now (--fork): GetConnectionUnixProcessID tells it. */
void broker_set_pid(struct broker *broker, pid_t pid);

/*
 * Block the signals the loop reads from its signalfd (SIGTERM, SIGINT, SIGHUP,
 * SIGUSR2), so that one sent while the bus starts or is restored waits,
 * pending, for the loop instead of killing a half-built bus by its default
 * action. A re-executed program inherits the mask. 0 or negative errno.
 */
int broker_block_signals(void);

/*
 * Create the event loop, attach everything and run until SIGTERM/SIGINT
 * (after the hand-over to the fd store, if SIGTERM makes one).
 */
int broker_run(struct broker *broker);

/*
 * The state of a re-exec or a hand-over (reexec.h, state.h): every section
 * in order, each written by its object: the bus, the bus1 transport, the
 * listeners, the names, the peers (with what each holds), the replies, the
 * activations. @handover: for the next process of the service (fdstore.h),
 * which is not the parent of the spawned services (none is written).
 * Return 0 or negative errno.
 */
int broker_serialize(struct broker *broker, bool handover, struct state_writer *w);

/*
 * --check-state=FD: read the whole state without acting on it.
 * Return 0 if this program can restore it, BROKER_E_STATE_UNREADABLE if not
 * (logged), -errno.
 */
int broker_check_state(int fd);

/*
 * A crash journal's snapshot (@n bytes at @mem), read whole as a state
 * without acting on it: 0, or JOURNAL_E_CORRUPT.
 */
int broker_check_snapshot(const uint8_t *mem, size_t n);

/**
 * broker_restore() - the broker of a re-executed or handed-over bus
 * @opts:	as for broker_new()
 * @state_fd:	--restore-state, or the fd store's state (always consumed)
 * @fallback_fd: --reexec-fallback, or -1
 * @carried:	the fds from the fd store (fdstore.h), NULL after a re-exec
 *
 * Creates the event loop and everything in the state; from the fd store it
 * also serves the socket unit's sockets (broker_take_socket_unit()). Nothing
 * is announced: the caller tells systemd (READY=1) once it runs as it must.
 * A state this program cannot read makes it execute @fallback_fd with the
 * same command line (reexec_go_back()); from the fd store (it may name only
 * @carried fds) it returns BROKER_E_STATE_UNREADABLE then, with nothing
 * created.
 * Return: 0, BROKER_E_STATE_UNREADABLE, BROKER_E_INVALID (the configuration
 * cannot be served: broker_get_error()), or negative errno (logged; the
 * process must exit: a bus that cannot serve must not look as if it did).
 */
struct fdstore_carried;
int broker_restore(struct broker **brokerp, const struct broker_options *opts, int state_fd,
		   int fallback_fd, char **argv, struct fdstore_carried *carried);

/**
 * broker_restore_crash() - the bus of a process that died, from its journal
 * @carried:	the fds from the fd store, with the crash journal's
 *		(fdstore_has_journal()); what the journal uses is taken
 *
 * Loads the journal (journal_load(): the newest whole one, not one whose
 * start died already), restores its snapshot, replays its records and
 * closes the connections whose streams the crash cut (their mark), with
 * a log line that counts them.
 * Return: 0, BROKER_E_STATE_UNREADABLE (no journal that can be used: logged,
 * nothing created, start a new bus), or negative errno (half restored:
 * the process must exit).
 */
int broker_restore_crash(struct broker **brokerp, const struct broker_options *opts,
			 struct fdstore_carried *carried);

/*
 * The crash journal's entries @carried holds, not used (a hand-over or a
 * new bus came instead): removed from the store once the journal starts.
 */
void broker_journal_forget(struct broker *broker, struct fdstore_carried *carried);

/* Keep the bus in the fd store from now on (journal.h), if the store is there. */
void broker_journal_start(struct broker *broker);
/* Stop it, and take its entries out of the store (before a re-exec). */
void broker_journal_stop(struct broker *broker);
