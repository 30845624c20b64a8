/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * libbus1-client's direct path (docs/native-protocol.md): names resolved to
 * direct handles, the callers the broker allows, calls and replies that
 * went direct and what to do when a direct peer is lost; and the one way
 * every call leaves (client_send_wait(): CALL, sending and receiving in one
 * ioctl, for brokered calls, direct calls and held replies alike). See
 * b1c-internal.h.
 */

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include "libbus1.h"
#include "bus1-client.h"
#include "b1c-internal.h"
#include "dbus-compat/address.h"
#include "dbus-compat/message.h"
#include "dbus-compat/native-protocol.h"
#include "dbus-compat/protocol.h"
#include "dbus-compat/sasl-client.h"
#include "util/io.h"
#include "util/macro.h"
#include "util/clock.h"

bool client_is_unique_or_wellknown(const char *name)
{
	return name && *name && strcmp(name, DC_SERVICE_DBUS);
}
static struct direct_name *dname_find(struct b1c_bus *bus, const char *name)
{
	for (size_t i = 0; i < bus->n_dnames; i++)
		if (!strcmp(bus->dnames[i].name, name))
			return &bus->dnames[i];
	return NULL;
}
static void dname_drop_at(struct b1c_bus *bus, size_t i)
{
	assert(i < bus->n_dnames);
	free(bus->dnames[i].name);
	bus->dnames[i] = bus->dnames[--bus->n_dnames];
}
/* Forget every name resolved to @handle (0: forget @name only). */
void client_dname_forget(struct b1c_bus *bus, const char *name, uint64_t handle)
{
	for (size_t i = 0; i < bus->n_dnames;) {
		if ((name && !strcmp(bus->dnames[i].name, name)) ||
		    (handle && bus->dnames[i].handle == handle))
			dname_drop_at(bus, i);
		else
			i++;
	}
}
static int dname_add(struct b1c_bus *bus, const char *name, uint64_t handle)
{
	struct direct_name *v;

	if (bus->n_dnames >= B1C_MAX_DIRECT)
		dname_drop_at(bus, 0);
	v = realloc(bus->dnames, (bus->n_dnames + 1) * sizeof(*v));
	if (!v)
		return -ENOMEM;
	bus->dnames = v;
	v[bus->n_dnames].name = strdup(name);
	if (!v[bus->n_dnames].name)
		return -ENOMEM;
	v[bus->n_dnames].handle = handle;
	bus->n_dnames++;
	return 0;
}
bool client_uid_allowed(const struct b1c_bus *bus, uint32_t uid)
{
	for (size_t i = 0; i < bus->n_uids; i++)
		if (bus->uids[i] == uid)
			return true;
	return false;
}
bool client_owns_name(const struct b1c_bus *bus, const char *name)
{
	if (!name || (bus->unique_name && !strcmp(name, bus->unique_name)))
		return true;
	for (size_t i = 0; i < bus->n_names; i++)
		if (!strcmp(bus->names[i], name))
			return true;
	return false;
}
static void names_update(struct b1c_bus *bus, const char *name, bool acquired)
{
	for (size_t i = 0; i < bus->n_names; i++) {
		if (strcmp(bus->names[i], name))
			continue;
		if (!acquired) {
			free(bus->names[i]);
			bus->names[i] = bus->names[--bus->n_names];
		}
		return;
	}
	if (acquired && bus->n_names < B1C_MAX_DIRECT) {
		char **v = realloc(bus->names, (bus->n_names + 1) * sizeof(*v));

		if (!v)
			return;
		bus->names = v;
		v[bus->n_names] = strdup(name);
		if (v[bus->n_names])
			bus->n_names++;
	}
}
uint64_t client_dmsg_take(struct b1c_bus *bus, const struct message *msg)
{
	for (size_t i = 0; i < bus->n_dmsgs; i++) {
		if (bus->dmsgs[i].msg == msg) {
			uint64_t h = bus->dmsgs[i].reply;

			bus->dmsgs[i] = bus->dmsgs[--bus->n_dmsgs];
			return h;
		}
	}
	return 0;
}
int client_dmsg_add(struct b1c_bus *bus, const struct message *msg, uint64_t reply)
{
	struct direct_msg *v;

	if (bus->n_dmsgs >= B1C_MAX_QUEUED)
		return -ENOBUFS;
	v = realloc(bus->dmsgs, (bus->n_dmsgs + 1) * sizeof(*v));
	if (!v)
		return -ENOMEM;
	bus->dmsgs = v;
	v[bus->n_dmsgs++] = (struct direct_msg){ .msg = msg, .reply = reply };
	return 0;
}
bool client_dcall_take(struct b1c_bus *bus, uint32_t serial)
{
	for (size_t i = 0; i < bus->n_dcalls; i++) {
		if (bus->dcalls[i].serial == serial) {
			bus->dcalls[i] = bus->dcalls[--bus->n_dcalls];
			return true;
		}
	}
	return false;
}
/* Send @msg straight to @handle, with SENDER set and our direct node as the way back. */
int client_direct_send(struct b1c_bus *bus, const struct message *msg, uint64_t handle,
		       bool with_reply_node)
{
	struct message *with = NULL;
	struct iovec iov[2];
	uint64_t back = bus->direct_node;
	int r;

	r = message_stitch_sender((struct message *)msg, bus->unique_name, &with);
	if (r < 0)
		return r;
	message_get_iovec(with, iov);
	r = b1_peer_send(bus->peer, 0, &handle, 1, NULL, iov, iov[1].iov_len ? 2 : 1,
			 with_reply_node ? &back : NULL, with_reply_node ? 1 : 0,
			 with->fds, with->n_fds);
	message_unref(with);
	return r;
}
/*
 * Send and wait in one syscall (BUS1_CMD_CALL, docs/bus1.7): send @wire as
 * it is to @handle (with our direct node as the way back if
 * @with_reply_node: a direct call), wait up to @timeout_usec for the next
 * message of our queue and receive it into bus->called, which bus_recv()
 * then takes as if it had received it itself: it is the front of our queue
 * (a call's reply, or whatever was queued before it), so nothing is
 * reordered. Returns 1 once sent and waited for, whatever happened then (a
 * timeout, a signal, a failed receive: the message stays queued, bus_recv()
 * and poll() take over), 0 if only sent (a module without CALL, ENOTTY:
 * SEND, then poll and RECV, from now on), or SEND's negative errno.
 */
int client_send_wait(struct b1c_bus *bus, const struct message *wire, uint64_t handle,
		     bool with_reply_node, uint64_t timeout_usec)
{
	struct iovec iov[2];
	uint64_t back = bus->direct_node, timeout_ns;
	bool sent = false;
	int r;

	message_get_iovec(wire, iov);
	if (!bus->no_call && !bus->have_called) {
		timeout_ns = timeout_usec > BUS1_CALL_TIMEOUT_MAX / 1000 ? BUS1_CALL_TIMEOUT_MAX :
			     timeout_usec * 1000;
		r = b1_peer_call(bus->peer, 0, &handle, 1, NULL, iov, iov[1].iov_len ? 2 : 1,
				 with_reply_node ? &back : NULL, with_reply_node ? 1 : 0,
				 wire->fds, wire->n_fds, 0, timeout_ns, &bus->called, &sent);
		if (r == 0)
			bus->have_called = true;
		if (r == 0 || sent)
			return 1;
		if (r != -ENOTTY && r != -EINVAL)
			return r;
		/* no CALL here (ENOTTY), or one that refuses what SEND may take */
		bus->no_call = r == -ENOTTY;
	}
	return b1_peer_send(bus->peer, 0, &handle, 1, NULL, iov, iov[1].iov_len ? 2 : 1,
			    with_reply_node ? &back : NULL, with_reply_node ? 1 : 0,
			    wire->fds, wire->n_fds);
}

/* client_send_wait() of @msg with SENDER set: a direct call, or a reply to one. */
int client_direct_call(struct b1c_bus *bus, const struct message *msg, uint64_t handle,
		       bool with_reply_node, uint64_t timeout_usec)
{
	struct message *with = NULL;
	int r;

	r = message_stitch_sender((struct message *)msg, bus->unique_name, &with);
	if (r < 0)
		return r;
	r = client_send_wait(bus, with, handle, with_reply_node, timeout_usec);
	message_unref(with);
	return r;
}
/* The direct handle for @name: 1 (*handlep set), 0 (none: use the broker), negative errno. */
int client_direct_resolve(struct b1c_bus *bus, const char *name, uint64_t *handlep)
{
	struct b1c_message *m = NULL;
	struct message *reply = NULL;
	struct direct_name *d = dname_find(bus, name);
	uint32_t serial;
	int r;

	if (d) {
		*handlep = d->handle;
		return d->handle ? 1 : 0;
	}
	r = b1c_message_new_method_call(&m, DC_SERVICE_DBUS, DC_PATH_DBUS, DC_INTERFACE_BUS1,
					DC_BUS1_METHOD_GET_DIRECT_HANDLE,
					DC_BUS1_GET_DIRECT_HANDLE_SIGNATURE);
	if (r < 0)
		return r;
	r = b1c_message_append(m, "s", name);
	if (r == 0)
		r = b1c_bus_send(bus, m, &serial);
	b1c_message_unref(m);
	if (r < 0)
		return r;
	r = client_wait_reply(bus, serial, 0, &reply);
	if (r < 0)
		return r;
	if (reply->type == DC_MESSAGE_ERROR || bus->stash_serial != serial || !bus->stash_handle) {
		/*
		 * Not a native owner, or not allowed: the broker carries the
		 * calls (remembered; a name without owner is asked again).
		 */
		bool remember = reply->type != DC_MESSAGE_ERROR || !reply->error_name ||
				strcmp(reply->error_name, DC_ERROR_NAME_HAS_NO_OWNER);

		message_unref(reply);
		r = remember ? dname_add(bus, name, 0) : 0;
		return r < 0 ? r : 0;
	}
	*handlep = bus->stash_handle;
	bus->stash_serial = 0;
	bus->stash_handle = 0;
	message_unref(reply);
	r = dname_add(bus, name, *handlep);
	return r < 0 ? r : 1;
}
int b1c_bus_set_direct(struct b1c_bus *bus, bool enable)
{
	assert_return(bus, -EINVAL);
	if (enable && !bus->direct_node)
		return -EOPNOTSUPP;
	bus->direct = enable;
	return 0;
}
bool b1c_message_is_direct(const struct b1c_message *m)
{
	assert_return(m, false);
	return m->direct_reply != 0;
}
/* Answer a direct call we refuse, straight back to the caller. */
void client_direct_refuse(struct b1c_bus *bus, const struct message *call, uint64_t reply,
			  const char *name, const char *text)
{
	struct message_builder b;
	struct message *e = NULL;

	if (!reply || !message_expects_reply(call))
		return;
	message_builder_init_error(&b, call, name, "s");
	dc_writer_write(&b.body, "s", text);
	if (++bus->serial == 0)
		bus->serial = 1;
	if (message_builder_seal(&b, bus->serial, &e) == 0)
		(void)client_direct_send(bus, e, reply, false);
	message_builder_deinit(&b);
	message_unref(e);
}
/* A direct call whose callee went away: NoReply, as the broker would say. */
int client_direct_lost(struct b1c_bus *bus, uint64_t handle)
{
	client_dname_forget(bus, NULL, handle);
	for (size_t i = 0; i < bus->n_dcalls;) {
		struct direct_call c = bus->dcalls[i];
		struct message_builder b;
		struct message *e = NULL;
		int r;

		if (c.handle != handle) {
			i++;
			continue;
		}
		bus->dcalls[i] = bus->dcalls[--bus->n_dcalls];
		message_builder_init(&b, DC_MESSAGE_ERROR, "s");
		b.error_name = DC_ERROR_NO_REPLY;
		b.reply_serial = c.serial;
		b.sender = DC_SERVICE_DBUS;
		b.flags |= DC_FLAG_NO_REPLY_EXPECTED;
		dc_writer_write(&b.body, "s", "The direct callee went away without replying");
		r = message_builder_seal(&b, 1, &e);
		message_builder_deinit(&b);
		if (r)
			return r < 0 ? r : -EINVAL;
		/* Received next, like any reply (a waiting call sees it). */
		{
			struct message **v = realloc(bus->synth, (bus->n_synth + 1) * sizeof(*v));

			if (!v) {
				message_unref(e);
				return -ENOMEM;
			}
			bus->synth = v;
			v[bus->n_synth++] = e;
		}
	}
	return 0;
}
/* The broker's own notices to us (arriving at our client node). */
bool client_broker_notice(struct b1c_bus *bus, const struct message *msg)
{
	struct dc_reader r;
	const char *name = NULL;

	if (msg->type != DC_MESSAGE_SIGNAL || !msg->sender || strcmp(msg->sender, DC_SERVICE_DBUS) ||
	    !msg->interface || !msg->member)
		return false;
	if (!strcmp(msg->interface, DC_INTERFACE_BUS1) &&
	    !strcmp(msg->member, DC_BUS1_SIGNAL_DIRECT_POLICY) &&
	    !strcmp(msg->signature, DC_BUS1_DIRECT_POLICY_SIGNATURE)) {
		/* The full set each time. */
		if (message_get_body_reader(msg, &r) == 0 && dc_reader_enter(&r, 'a') == 0) {
			size_t n = 0;
			uint32_t *v = NULL, u;

			while (dc_reader_at_end(&r) == 0 && n < 4096 &&
			       dc_reader_read(&r, "u", &u) == 0) {
				uint32_t *t = realloc(v, (n + 1) * sizeof(*v));

				if (!t)
					break;
				v = t;
				v[n++] = u;
			}
			free(bus->uids);
			bus->uids = v;
			bus->n_uids = n;
		}
		return true;
	}
	if (!strcmp(msg->interface, DC_INTERFACE_DBUS) && !strcmp(msg->signature, "s") &&
	    (!strcmp(msg->member, "NameAcquired") || !strcmp(msg->member, "NameLost")) &&
	    message_get_body_reader(msg, &r) == 0 && dc_reader_read(&r, "s", &name) == 0 && name)
		names_update(bus, name, msg->member[4] == 'A');
	return false;
}
/*
 * @err answers the direct call @call, and the callee's library (not the
 * service) refused it: the name moved on (ServiceUnknown) or the broker
 * revoked the handles (DirectRevoked). Forget the handle; the caller resends
 * the call once, the broker deciding again. Either way the call was not run.
 */
bool client_direct_retry(struct b1c_bus *bus, const struct message *call, const struct message *err)
{
	struct direct_name *d;

	if (err->type != DC_MESSAGE_ERROR || !err->sender || !err->error_name ||
	    !call->destination || !strcmp(err->sender, DC_SERVICE_DBUS))
		return false;
	if (!strcmp(err->error_name, DC_ERROR_SERVICE_UNKNOWN)) {
		client_dname_forget(bus, call->destination, 0);
		return true;
	}
	if (!strcmp(err->error_name, DC_BUS1_ERROR_DIRECT_REVOKED)) {
		/* Every name that leads to this callee. */
		d = dname_find(bus, call->destination);
		client_dname_forget(bus, call->destination, d ? d->handle : 0);
		return true;
	}
	return false;
}
