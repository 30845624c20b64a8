/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/**
 * DOC: Listening sockets
 *
 * A listener owns the listening sockets of one address (one <listen> element
 * or the --address option): one unix socket, or for tcp: and nonce-tcp: one
 * socket per address its host name resolves to, as dbus-daemon does. It
 * accepts connections into the bus. The sockets are created by
 * listener_new(), before the event loop exists (and before --fork), so that
 * an unusable address fails the start-up; listener_attach() registers them
 * with the event loop later.
 *
 * A nonce-tcp listener owns its nonce file (and the directory made for it),
 * removed when the listener is freed; its connections must send the nonce
 * before anything else (connection_new()).
 */

#include <stdint.h>
#include <systemd/sd-event.h>
#include "dbus-compat/address.h"
#include "util/list.h"

struct bus;

/* Positive codes of listener_new() and listener_new_fd(), with *errorp set. */
enum {
	_LISTENER_E_SUCCESS,
	/* No entry of the address is valid and can be listened on. */
	LISTENER_E_INVALID_ADDRESS,
	/* The inherited socket is not a listening unix stream socket. */
	LISTENER_E_NOT_LISTENING,
};

struct listener {
	struct bus *bus;
	struct list_node link;		/* in bus->listeners */
	int fds[ADDRESS_TCP_FDS_MAX];
	sd_event_source *ios[ADDRESS_TCP_FDS_MAX];
	size_t n_fds;
	sd_event_source *retry;		/* accept paused: out of fds/memory */
	bool full;			/* accept paused: max_incomplete_connections */
	bool held;			/* accept paused: a re-exec waits (reexec.h) */
	bool tcp;			/* tcp: or nonce-tcp: */
	bool has_nonce;			/* nonce-tcp: */
	uint8_t nonce[ADDRESS_NONCE_LEN];
	char *address;			/* connectable address, with guid= */
	char *unlink_path;		/* socket file to remove at exit, or NULL */
	char *nonce_file;		/* nonce file to remove at exit (and its dir) */
	/*
	 * Who takes what it accepts (the fd, owned from then on): NULL, a
	 * client of the bus; else e.g. a container instance's socket, whose
	 * clients become its members. Return 0 or negative errno.
	 */
	int (*accept)(void *userdata, int fd);
	void *accept_userdata;
};

/**
 * listener_new() - parse one address entry string and start listening
 * @listenerp:	output
 * @bus:	the bus (for its guid; the listener is linked by the caller)
 * @address:	one or more address entries ("a;b"): the first one that can be
 *		listened on is used, as dbus-daemon does
 * @errorp:	output: malloc()ed message on a positive return
 *
 * Return: 0, LISTENER_E_INVALID_ADDRESS (unusable/invalid address, see
 * *errorp) or negative errno.
 */
int listener_new(struct listener **listenerp, struct bus *bus, const char *address,
		 char **errorp);
/**
 * listener_new_fd() - a listener on an inherited listening socket
 * @fd:		an AF_UNIX SOCK_STREAM socket that listens (socket activation,
 *		the "systemd:" address); owned by the listener on success
 *
 * The socket is made non-blocking; its file is never unlinked (systemd owns
 * it). The connectable address is derived from getsockname().
 * Return: 0, LISTENER_E_NOT_LISTENING (not a listening unix stream socket,
 * see *errorp) or -errno.
 */
int listener_new_fd(struct listener **listenerp, struct bus *bus, int fd, char **errorp);

/**
 * listener_new_restored() - a listener that crossed a re-exec (reexec.h)
 * @fds, @n_fds:	its listening sockets (owned on success)
 * @tcp:		tcp: or nonce-tcp:
 * @nonce:		nonce-tcp's nonce (ADDRESS_NONCE_LEN bytes), or NULL
 * @address, @unlink_path, @nonce_file: as they were (copied; the last two may be NULL)
 *
 * Each socket is checked to be a listening stream socket and made
 * non-blocking and close-on-exec, whatever mode it arrived in (util/fd.h).
 * Return: 0, -ENOTCONN (a socket that does not listen), -ENOTSOCK, -EBADF
 * or -ENOMEM; the fds stay the caller's on failure.
 */
int listener_new_restored(struct listener **listenerp, struct bus *bus, const int *fds,
			  size_t n_fds, bool tcp, const uint8_t *nonce, const char *address,
			  const char *unlink_path, const char *nonce_file);

/*
 * Re-exec (state.h): every listener of @listeners (linked by ->link), in
 * order, section STATE_TAG_LISTENER; read back into an array of parsed
 * listeners (strings point into the reader) that listener_restore() makes
 * listeners again.
 */
struct state_reader;
struct state_writer;

#define LISTENER_STATE_VERSION 1u

struct listener_state {
	int fds[ADDRESS_TCP_FDS_MAX];
	size_t n_fds;
	bool tcp;
	bool has_nonce;
	bool full;
	const uint8_t *nonce;
	const char *address;
	const char *unlink_path;
	const char *nonce_file;
};

void listener_serialize_all(const struct list_node *listeners, struct state_writer *w);
/* An allocated array of *@np (never NULL when it returns true). */
bool listener_state_read_all(struct state_reader *r, struct listener_state **statesp,
			     size_t *np);
/* listener_new_restored() of @st. */
int listener_restore(struct listener **listenerp, struct bus *bus,
		     const struct listener_state *st);

/**
 * listener_replace_socket() - listen on @fd instead, before listener_attach()
 * @l:		a listener with one socket
 * @fd:		a listening unix stream socket; owned by @l on success
 *
 * For a socket unit restarted while its bus was handed over
 * (broker_take_socket_unit()): the old socket is closed. The address stays.
 * Return: 0, -ENOTCONN (@fd does not listen), -EINVAL or negative errno.
 */
int listener_replace_socket(struct listener *l, int fd);

struct listener *listener_free(struct listener *listener);
DEFINE_CLEANUP_FUNC(struct listener *, listener_free);

/* Register with the bus' event loop. Return: 0 or negative errno. */
int listener_attach(struct listener *listener);

/*
 * listener_resume() - accept again after a pause at max_incomplete_connections
 *
 * The bus calls it when an incomplete connection authenticates or goes away,
 * or a reload raises the limit. A no-op for a listener not paused for that.
 */
void listener_resume(struct listener *listener);

/*
 * listener_hold() - stop accepting until listener_release()
 *
 * For a re-exec that waits for the clients still authenticating (reexec.h):
 * new clients wait in the kernel's backlog, and are accepted by whichever
 * program runs after. Other pauses (listener_resume(), out of fds) do not
 * end a hold. Return: 0 or negative errno.
 */
int listener_hold(struct listener *listener);
void listener_release(struct listener *listener);
