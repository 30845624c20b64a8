/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Listening sockets: accept() into new connections. See listener.h.
 */

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>
#include "broker/core/bus.h"
#include "broker/transport/connection.h"
#include "broker/transport/listener.h"
#include "broker/objects/log.h"
#include "broker/objects/state.h"
#include "dbus-compat/address.h"
#include "util/error.h"
#include "util/fd.h"
#include <systemd/sd-daemon.h>

/* A listener not yet bound to a socket; NULL when out of memory. */
static struct listener *listener_alloc(struct bus *bus)
{
	struct listener *l = calloc(1, sizeof(*l));

	if (!l)
		return NULL;
	l->bus = bus;
	list_init(&l->link);
	return l;
}

int listener_new(struct listener **listenerp, struct bus *bus, const char *address,
		 char **errorp)
{
	_cleanup_(listener_freep) struct listener *l = NULL;
	struct address_list list = {};
	_cleanup_free_ char *last_error = NULL;
	size_t i;
	int r;

	l = listener_alloc(bus);
	if (!l)
		return -ENOMEM;

	r = address_list_parse(&list, address, &last_error);
	if (r) {
		address_list_deinit(&list);
		if (r < 0)
			return r;
		if (asprintf(errorp, "invalid address '%s': %s", address,
			     last_error ? last_error : "parse error") < 0)
			return -ENOMEM;
		return LISTENER_E_INVALID_ADDRESS;
	}

	/* No entry (yet) that could be listened on. */
	r = ADDRESS_E_UNUSABLE;
	for (i = 0; i < list.n_entries; i++) {
		const struct address *a = &list.entries[i];
		char *err = NULL;

		l->tcp = l->has_nonce = false;
		if (a->kind == ADDRESS_TCP || a->kind == ADDRESS_NONCE_TCP) {
			r = address_listen_tcp(a, bus->guid, l->fds, &l->n_fds, &l->address,
					       l->nonce, &l->nonce_file, &err);
			l->tcp = true;
			l->has_nonce = a->kind == ADDRESS_NONCE_TCP;
		} else {
			r = address_listen(a, bus->guid, &l->fds[0], &l->address,
					   &l->unlink_path, &err);
			l->n_fds = r == 0 ? 1 : 0;
		}
		if (r == 0)
			break;
		if (r < 0) {
			free(err);
			address_list_deinit(&list);
			return r;
		}
		free(last_error);
		last_error = err;
	}
	address_list_deinit(&list);
	if (r) {
		if (asprintf(errorp, "cannot listen on '%s': %s", address,
			     last_error ? last_error : "unusable address") < 0)
			return -ENOMEM;
		return LISTENER_E_INVALID_ADDRESS;
	}

	*listenerp = steal_ptr(l);
	return 0;
}

int listener_new_fd(struct listener **listenerp, struct bus *bus, int fd, char **errorp)
{
	_cleanup_(listener_freep) struct listener *l = NULL;
	_cleanup_free_ char *esc = NULL;
	struct sockaddr_un sa = {};
	socklen_t len = sizeof(sa);
	bool abstract;
	int r;

	if (sd_is_socket(fd, AF_UNIX, SOCK_STREAM, 1) <= 0 ||
	    getsockname(fd, (struct sockaddr *)&sa, &len) < 0 ||
	    len <= offsetof(struct sockaddr_un, sun_path)) {
		if (asprintf(errorp, "inherited socket %d is not a listening unix stream socket "
			     "(only those are supported)", fd) < 0)
			return -ENOMEM;
		return LISTENER_E_NOT_LISTENING;
	}
	/* The loop accepts until EAGAIN: a blocking socket would stall the bus. */
	r = fd_prepare_for_loop(fd);
	if (r < 0)
		return r;

	abstract = sa.sun_path[0] == '\0';
	len -= offsetof(struct sockaddr_un, sun_path);
	esc = abstract ? address_escape(sa.sun_path + 1, len - 1) :
			 address_escape(sa.sun_path, strnlen(sa.sun_path, len));
	if (!esc)
		return -ENOMEM;

	l = listener_alloc(bus);
	if (!l)
		return -ENOMEM;
	if (asprintf(&l->address, "unix:%s=%s,guid=%s", abstract ? "abstract" : "path", esc,
		     bus->guid) < 0)
		return -ENOMEM;
	/* Owned from here on; the socket file belongs to systemd: never unlinked. */
	l->fds[0] = fd;
	l->n_fds = 1;
	*listenerp = steal_ptr(l);
	return 0;
}

int listener_replace_socket(struct listener *l, int fd)
{
	int r;

	if (l->n_fds != 1 || l->ios[0])
		return -EINVAL;
	r = sd_is_socket(fd, AF_UNIX, SOCK_STREAM, 1);
	if (r <= 0)
		return r < 0 ? r : -ENOTCONN;
	r = fd_prepare_for_loop(fd);
	if (r < 0)
		return r;
	close(l->fds[0]);
	l->fds[0] = fd;
	return 0;
}

struct listener *listener_free(struct listener *l)
{
	if (!l)
		return NULL;
	list_unlink(&l->link);
	for (size_t i = 0; i < l->n_fds; i++) {
		sd_event_source_disable_unref(l->ios[i]);
		close(l->fds[i]);
	}
	sd_event_source_disable_unref(l->retry);
	if (l->unlink_path)
		unlink(l->unlink_path);
	if (l->nonce_file) {
		char *slash = strrchr(l->nonce_file, '/');

		unlink(l->nonce_file);
		if (slash) {
			*slash = '\0';
			rmdir(l->nonce_file);
		}
	}
	explicit_bzero(l->nonce, sizeof(l->nonce));
	free(l->nonce_file);
	free(l->unlink_path);
	free(l->address);
	free(l);
	return NULL;
}

/* Watch all sockets, or none. */
static int listener_enable(struct listener *l, int on)
{
	int r = 0;

	/* Held for a re-exec: whoever else resumes it waits for the release. */
	if (l->held && on != SD_EVENT_OFF)
		return 0;
	for (size_t i = 0; i < l->n_fds; i++) {
		int k = sd_event_source_set_enabled(l->ios[i], on);

		if (k < 0)
			r = k;
	}
	return r;
}

/* How long accepting pauses when the process is out of fds or memory. */
#define LISTENER_RETRY_USEC (100 * 1000)

static int listener_retry(sd_event_source *s, uint64_t usec, void *userdata)
{
	struct listener *l = userdata;

	l->retry = sd_event_source_disable_unref(l->retry);
	return listener_enable(l, SD_EVENT_ON);
}

/*
 * The listening socket stays readable while accept() fails for lack of fds
 * or memory, and the io source is level-triggered: without a pause the loop
 * would spin (and log) at full speed. Stop watching the socket and look again
 * after a short delay; pending clients wait in the kernel's backlog.
 */
static int listener_pause(struct listener *l, int error)
{
	int r;

	if (l->retry)
		return 0;
	log_warn("accept failed: %s; pausing new connections for %d ms", strerror(error),
		 LISTENER_RETRY_USEC / 1000);
	r = listener_enable(l, SD_EVENT_OFF);
	if (r < 0)
		return r;
	return sd_event_add_time_relative(l->bus->event, &l->retry, CLOCK_MONOTONIC,
					  LISTENER_RETRY_USEC, 0, listener_retry, l);
}

void listener_resume(struct listener *l)
{
	if (!l->full)
		return;
	l->full = false;
	if (listener_enable(l, SD_EVENT_ON) < 0)
		log_err("cannot resume accepting on %s", l->address);
}

int listener_hold(struct listener *l)
{
	int r;

	if (l->held)
		return 0;
	r = listener_enable(l, SD_EVENT_OFF);
	if (r < 0)
		return r;
	l->held = true;
	return 0;
}

void listener_release(struct listener *l)
{
	if (!l->held)
		return;
	l->held = false;
	/* Still paused for another reason: that one's end enables it. */
	if (l->full || l->retry)
		return;
	if (listener_enable(l, SD_EVENT_ON) < 0)
		log_err("cannot resume accepting on %s", l->address);
}

static int listener_io(sd_event_source *s, int fd, uint32_t revents, void *userdata)
{
	struct listener *l = userdata;
	int i, r;

	/* Accept a bounded batch per wakeup so connecting clients cannot starve traffic. */
	for (i = 0; i < 32; i++) {
		int cfd;

		/*
		 * At max_incomplete_connections, stop accepting, as dbus-daemon
		 * does (fd.o #80919): new clients wait in the backlog until a
		 * stalled one authenticates or hits auth_timeout, instead of
		 * being refused. The bus resumes the listener
		 * (listener_resume()) once below the limit again.
		 */
		if (l->bus->n_incomplete >= (unsigned int)l->bus->limits.max_incomplete_connections) {
			r = listener_enable(l, SD_EVENT_OFF);
			if (r < 0)
				log_err("cannot pause accepting: %s", log_error(r));
			else
				l->full = true;
			return 0;
		}
		cfd = accept4(fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);

		if (cfd < 0) {
			if (errno == EAGAIN || errno == EINTR || errno == ECONNABORTED)
				return 0;
			if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS ||
			    errno == ENOMEM) {
				/* Out of resources: keep running, try again later. */
				r = listener_pause(l, errno);
				if (r < 0)
					log_err("cannot pause accepting: %s", log_error(r));
				return 0;
			}
			r = error_origin(-errno);
			log_err("accept failed: %s", log_error(r));
			return 0;
		}
		if (l->accept)
			r = l->accept(l->accept_userdata, cfd);
		else
			r = socket_transport_accept(socket_transport_of(l->bus), cfd,
						    l->has_nonce ? l->nonce : NULL, 0, NULL);
		if (r < 0)
			log_warn("cannot set up new connection: %s", log_error(r));
	}
	return 0;
}

int listener_attach(struct listener *l)
{
	for (size_t i = 0; i < l->n_fds; i++) {
		int r = sd_event_add_io(l->bus->event, &l->ios[i], l->fds[i], EPOLLIN,
					listener_io, l);

		if (r < 0)
			return r;
	}
	return 0;
}

int listener_new_restored(struct listener **listenerp, struct bus *bus, const int *fds,
			  size_t n_fds, bool tcp, const uint8_t *nonce, const char *address,
			  const char *unlink_path, const char *nonce_file)
{
	_cleanup_(listener_freep) struct listener *l = NULL;

	if (n_fds == 0 || n_fds > ADDRESS_TCP_FDS_MAX)
		return -EINVAL;
	/*
	 * Whatever mode they come in: systemd may have cleared O_NONBLOCK on
	 * this very socket (util/fd.h), or it may not listen at all any more.
	 */
	for (size_t i = 0; i < n_fds; i++) {
		int r = sd_is_socket(fds[i], AF_UNSPEC, SOCK_STREAM, 1);

		if (r == 0)
			return -ENOTCONN;
		if (r < 0)
			return r;
		r = fd_prepare_for_loop(fds[i]);
		if (r < 0)
			return r;
	}
	l = listener_alloc(bus);
	if (!l)
		return -ENOMEM;
	l->tcp = tcp;
	if (nonce) {
		l->has_nonce = true;
		memcpy(l->nonce, nonce, ADDRESS_NONCE_LEN);
	}
	l->address = strdup(address);
	if (!l->address || (unlink_path && !(l->unlink_path = strdup(unlink_path))) ||
	    (nonce_file && !(l->nonce_file = strdup(nonce_file))))
		return -ENOMEM;
	/* Owned from here on (the caller must not close them any more). */
	memcpy(l->fds, fds, n_fds * sizeof(*fds));
	l->n_fds = n_fds;
	*listenerp = steal_ptr(l);
	return 0;
}

void listener_serialize_all(const struct list_node *listeners, struct state_writer *w)
{
	const struct listener *l;
	size_t n = 0;

	state_put_section(w, STATE_TAG_LISTENER, LISTENER_STATE_VERSION);
	list_for_each_entry(l, listeners, link)
		n++;
	state_put_u64(w, n);
	list_for_each_entry(l, listeners, link) {
		state_put_fds(w, l->fds, l->n_fds);
		state_put_u32(w, l->tcp);
		state_put_u32(w, l->has_nonce);
		state_put_u32(w, l->full);
		state_put_bytes(w, l->nonce, ADDRESS_NONCE_LEN);
		state_put_str(w, l->address);
		state_put_str(w, l->unlink_path);
		state_put_str(w, l->nonce_file);
	}
}

bool listener_state_read_all(struct state_reader *r, struct listener_state **statesp,
			     size_t *np)
{
	struct listener_state *v;
	uint32_t version;
	size_t n;

	*statesp = NULL;
	*np = 0;
	if (!state_section(r, STATE_TAG_LISTENER, LISTENER_STATE_VERSION, &version))
		return false;
	n = state_get_count(r, 24);
	v = calloc(n ? n : 1, sizeof(*v));
	if (!v) {
		r->error = true;
		return false;
	}
	*statesp = v;
	*np = n;
	for (size_t i = 0; i < n && !r->error; i++) {
		struct listener_state *l = &v[i];
		size_t len;

		l->n_fds = state_get_count(r, 4);
		if (l->n_fds == 0 || l->n_fds > ADDRESS_TCP_FDS_MAX) {
			r->error = true;
			break;
		}
		for (size_t j = 0; j < l->n_fds; j++)
			l->fds[j] = state_get_fd(r);
		l->tcp = state_get_u32(r) != 0;
		l->has_nonce = state_get_u32(r) != 0;
		l->full = state_get_u32(r) != 0;
		l->nonce = state_get_bytes(r, &len);
		if (len != ADDRESS_NONCE_LEN)
			r->error = true;
		l->address = state_get_str(r);
		l->unlink_path = state_get_str(r);
		l->nonce_file = state_get_str(r);
		if (!l->address)
			r->error = true;
	}
	return !r->error;
}

int listener_restore(struct listener **listenerp, struct bus *bus,
		     const struct listener_state *st)
{
	int r;

	r = listener_new_restored(listenerp, bus, st->fds, st->n_fds, st->tcp,
				  st->has_nonce ? st->nonce : NULL, st->address,
				  st->unlink_path, st->nonce_file);
	if (r < 0)
		return r;
	(*listenerp)->full = st->full;
	return 0;
}
