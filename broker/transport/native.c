/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The broker's bus1 transport: the bootstrap of native clients, bus1 input
 * into the router and multicast output. See native.h and
 * docs/native-protocol.md.
 */

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <unistd.h>
#include <systemd/sd-event.h>
#include "libbus1.h"
#include "broker/core/bus.h"
#include "broker/objects/peer.h"
#include "broker/objects/log.h"
#include "broker/transport/native.h"
#include "broker/objects/state.h"
#include "dbus-compat/message.h"
#include "dbus-compat/native-protocol.h"
#include "dbus-compat/protocol.h"
#include "conf/config.h"
#include "util/fd.h"
#include "util/hashmap.h"
#include "util/macro.h"

/* bus1 messages taken per wakeup, so one busy client cannot starve the sockets. */
#define NATIVE_READ_BUDGET 64

/*
 * Everything the broker sends is charged by the kernel to the broker's uid
 * until the receiver takes it, and that quota is shared by all native
 * clients. One client's unread messages may use at most 1/NATIVE_QUOTA_SHARE
 * of it (and never more than a socket connection's output queue may hold),
 * so a client that stops reading is stopped long before it hurts the others.
 */
#define NATIVE_QUOTA_SHARE 8

/*
 * The broker counts what it sends to a client; the kernel knows what the
 * client has read. The count is corrected from the kernel (HANDLE_QUERY) when
 * a limit would be crossed, or after this much, so that the per-user charges
 * of the connection follow what is really unread.
 */
#define NATIVE_REFRESH_MESSAGES 256
#define NATIVE_REFRESH_BYTES (1024 * 1024)

/**
 * struct native_conn - the bus1 side of one native connection
 * @transport:	the connection's output goes here (peer_set_output())
 * @native:	the broker's transport
 * @peer:	the connection (owns this object through @transport)
 * @node:	the broker's own handle of the connection node (input arrives there)
 * @client:	the broker's handle to the client node (output goes there)
 * @node_link:	native->nodes, keyed by @node
 * @client_link: native->clients, keyed by @client
 * @have_creds:	a message was received (its kernel-stamped pid is the connection's)
 * @released:	the nodes and handles are released (the peer closed)
 * @q_bytes, @q_fds, @q_msgs: sent (or collected) for the client and not known
 *		to be read: an upper bound, exact after native_conn_refresh()
 * @peak_bytes, @peak_fds: the most of @q_bytes, @q_fds (GetConnectionStats)
 * @charged_bytes, @charged_fds: what of that is charged to the connection's
 *		user (USER_SLOT_BYTES/FDS, as a socket's output queue)
 * @in_batch:	collected for the message being batched, not sent yet
 * @direct:	the broker's handle to the client's direct node (direct calls
 *		from other native clients arrive there; handed out by
 *		GetDirectHandle, never used by the broker itself)
 * @uids:	uids published to the client as allowed direct callers
 */
struct native_conn {
	struct peer_transport transport;
	struct native *native;
	struct peer *peer;
	uint64_t node;
	uint64_t client;
	struct hmap_node node_link;
	struct hmap_node client_link;
	bool have_creds;
	bool released;

	uint64_t q_bytes;
	uint64_t q_fds;
	uint64_t q_msgs;
	uint64_t peak_bytes;
	uint64_t peak_fds;
	uint64_t charged_bytes;
	uint64_t charged_fds;
	uint64_t refresh_msgs;
	uint64_t refresh_bytes;
	bool in_batch;

	uint64_t direct;
	uint32_t *uids;
	size_t n_uids;
};

/**
 * struct native - the broker's bus1 peer
 * @batch_msg:	the message whose native destinations are being collected
 * @batch_dst:	their client-node handles
 * @batch_nc:	the connections (NULL once freed while collected)
 */
struct native {
	struct bus_transport transport;	/* in bus->transports */
	struct bus *bus;
	struct b1_peer *peer;
	sd_event_source *io;
	struct hmap nodes;
	struct hmap clients;
	size_t max_destinations;
	size_t max_fds;
	uint64_t quota_bytes;
	uint64_t quota_fds;
	uint64_t quota_messages;

	struct message *batch_msg;
	uint64_t *batch_dst;
	struct native_conn **batch_nc;
	uint32_t *batch_err;
	size_t batch_n;
};

static uint64_t handle_hash(uint64_t h)
{
	return hash_bytes(&h, sizeof(h));
}

static struct native_conn *find_by_node(struct native *native, uint64_t node)
{
	hmap_for_each_hash(pos, &native->nodes, handle_hash(node)) {
		struct native_conn *nc = container_of(pos, struct native_conn, node_link);

		if (nc->node == node)
			return nc;
	}
	return NULL;
}

static struct native_conn *find_by_client(struct native *native, uint64_t client)
{
	hmap_for_each_hash(pos, &native->clients, handle_hash(client)) {
		struct native_conn *nc = container_of(pos, struct native_conn, client_link);

		if (nc->client == client)
			return nc;
	}
	return NULL;
}

/* ------------------------------------------------------------------ output */

/* Send what is still collected (whenever the bus flushes its transports). */
static void native_flush(struct native *native)
{
	struct iovec iov[2];
	size_t n = 0;
	int r;

	if (!native || !native->batch_msg)
		return;
	assert(native->batch_n <= native->max_destinations);

	/* Drop connections freed while collected. */
	for (size_t i = 0; i < native->batch_n; i++) {
		if (!native->batch_nc[i])
			continue;
		native->batch_nc[i]->in_batch = false;
		native->batch_nc[n] = native->batch_nc[i];
		native->batch_dst[n] = native->batch_dst[i];
		n++;
	}
	native->batch_n = n;

	if (n) {
		const struct message *m = native->batch_msg;

		message_get_iovec(m, iov);
		memset(native->batch_err, 0, n * sizeof(*native->batch_err));
		r = b1_peer_send(native->peer, BUS1_SEND_FLAG_CONTINUE, native->batch_dst, n,
				 native->batch_err, iov, iov[1].iov_len ? 2 : 1, NULL, 0,
				 m->fds, m->n_fds);
		if (r < 0) {
			/*
			 * A message-level failure (ENOMEM, EMSGSIZE, ...): nobody got it.
			 * Like a socket that cannot take its output, the receivers lose
			 * their connection rather than silently a message.
			 */
			log_warn("bus1 multicast to %zu destinations failed: %s", n, log_error(r));
			for (size_t i = 0; i < n; i++)
				peer_overflow(native->batch_nc[i]->peer);
		} else {
			for (size_t i = 0; i < n; i++) {
				struct peer *c = native->batch_nc[i]->peer;

				switch (native->batch_err[i]) {
				case 0:
					break;
				case EHOSTUNREACH:
				case ENXIO:
					/* The client's peer is gone; NODE_DESTROY follows. */
					peer_overflow(c);
					break;
				default:
					/* EDQUOT, ENOSPC: it does not read its messages. */
					log_info("bus1 destination %s: %s",
						 c->registered ? peer_name(c) : "(inactive)",
						 strerror((int)native->batch_err[i]));
					peer_overflow(c);
					break;
				}
			}
		}
	}
	native->batch_n = 0;
	native->batch_msg = message_unref(native->batch_msg);
}

/* The limits of what may stay unread for one native client. */
static void native_limits(struct native *native, uint64_t *bytes, uint64_t *fds, uint64_t *msgs)
{
	struct bus *bus = native->bus;

	*bytes = MIN((uint64_t)bus->max_queued_bytes, native->quota_bytes / NATIVE_QUOTA_SHARE);
	*fds = MIN((uint64_t)bus->max_queued_fds, native->quota_fds / NATIVE_QUOTA_SHARE);
	*msgs = native->quota_messages / NATIVE_QUOTA_SHARE;
}

static void native_conn_uncharge(struct native_conn *nc, uint64_t bytes, uint64_t fds)
{
	bytes = MIN(bytes, nc->charged_bytes);
	fds = MIN(fds, nc->charged_fds);
	peer_uncharge(nc->peer, USER_SLOT_BYTES, bytes);
	peer_uncharge(nc->peer, USER_SLOT_FDS, fds);
	nc->charged_bytes -= bytes;
	nc->charged_fds -= fds;
}

/* The peaks of the bus1 queue (GetConnectionStats). */
static void native_conn_note_peak(struct native_conn *nc)
{
	nc->peak_bytes = MAX(nc->peak_bytes, nc->q_bytes);
	nc->peak_fds = MAX(nc->peak_fds, nc->q_fds);
}

static void native_conn_output_stats(struct peer_transport *transport,
				     struct peer_output_stats *st)
{
	struct native_conn *nc = container_of(transport, struct native_conn, transport);

	st->bytes += nc->q_bytes;
	st->fds += nc->q_fds;
	st->msgs += nc->q_msgs;
	st->peak_bytes = MAX(st->peak_bytes, nc->peak_bytes);
	st->peak_fds = MAX(st->peak_fds, nc->peak_fds);
}

/*
 * Replace the estimate by what the kernel says is unread (plus the message
 * collected but not sent yet) and return the charges of what was read.
 */
static void native_conn_refresh(struct native_conn *nc)
{
	struct native *native = nc->native;
	struct bus1_cmd_handle_query q;
	uint64_t bytes, fds, msgs;

	if (b1_peer_handle_query(native->peer, nc->client, &q) < 0)
		return;		/* the client node is gone: NODE_DESTROY follows */
	bytes = q.n_bytes;
	fds = q.n_fds;
	msgs = q.n_messages;
	if (nc->in_batch && native->batch_msg) {
		bytes += message_get_size(native->batch_msg);
		fds += native->batch_msg->n_fds;
		msgs++;
	}
	if (nc->charged_bytes > bytes || nc->charged_fds > fds)
		native_conn_uncharge(nc, nc->charged_bytes > bytes ? nc->charged_bytes - bytes : 0,
				     nc->charged_fds > fds ? nc->charged_fds - fds : 0);
	/* Never charged for more than is unread. */
	assert(nc->charged_bytes <= bytes && nc->charged_fds <= fds);
	nc->q_bytes = bytes;
	nc->q_fds = fds;
	nc->q_msgs = msgs;
	native_conn_note_peak(nc);
	/* A client that lags behind is asked again only after as much more. */
	nc->refresh_msgs = msgs + NATIVE_REFRESH_MESSAGES;
	nc->refresh_bytes = bytes + NATIVE_REFRESH_BYTES;
}

/* Would @size bytes and @n_fds fds more cross a limit? One message alone always fits. */
static bool native_conn_over(struct native_conn *nc, uint64_t size, uint64_t n_fds)
{
	uint64_t max_bytes, max_fds, max_msgs;

	if (!nc->q_msgs)
		return false;
	native_limits(nc->native, &max_bytes, &max_fds, &max_msgs);
	return nc->q_bytes + size > max_bytes || nc->q_fds + n_fds > max_fds ||
	       nc->q_msgs + 1 > max_msgs;
}

static int native_conn_queue(struct peer_transport *t, struct message *msg)
{
	struct native_conn *nc = container_of(t, struct native_conn, transport);
	struct native *native = nc->native;
	struct peer *peer = nc->peer;
	uint64_t size = message_get_size(msg);

	if (peer->closed || peer->overflow)
		return PEER_E_DEAD;
	/* Released only when the peer closes. */
	assert(!nc->released);
	/*
	 * No fd check here: every native client negotiated fds (its bootstrap
	 * carried one), so one multicast with the fds suits all of them.
	 *
	 * The output queue is the client's bus1 queue: bounded as a socket's
	 * (PEER_E_QUOTA: the caller is refused or the receiver
	 * disconnected, as the router decides), by what the kernel says the
	 * client has not read yet.
	 */
	if (nc->q_msgs >= nc->refresh_msgs || nc->q_bytes + size > nc->refresh_bytes ||
	    native_conn_over(nc, size, msg->n_fds))
		native_conn_refresh(nc);
	if (native_conn_over(nc, size, msg->n_fds))
		return PEER_E_QUOTA;
	if (peer_charge_message(peer, size, msg->n_fds))
		return PEER_E_QUOTA;
	nc->charged_bytes += size;
	nc->charged_fds += msg->n_fds;
	nc->q_bytes += size;
	nc->q_fds += msg->n_fds;
	nc->q_msgs++;
	native_conn_note_peak(nc);

	if (native->batch_msg != msg) {
		native_flush(native);
		native->batch_msg = message_ref(msg);
	} else if (native->batch_n >= native->max_destinations) {
		native_flush(native);
		native->batch_msg = message_ref(msg);
	}
	/* A full batch went out above: there is room for this destination. */
	assert(native->batch_n < native->max_destinations);
	native->batch_dst[native->batch_n] = nc->client;
	native->batch_nc[native->batch_n] = nc;
	native->batch_n++;
	nc->in_batch = true;
	/* Out at the end of the input being dispatched, or by the bus' deferred flush. */
	bus_schedule_flush(native->bus);
	return 0;
}

/* ------------------------------------------------------------------- input */

/* Take one received DATA message. Returns 0 or negative errno (fatal). */
static int native_input(struct native *native, const struct b1_msg *bm)
{
	struct bus *bus = native->bus;
	struct native_conn *nc;
	struct peer *peer;
	struct message *msg = NULL;
	size_t size;
	int r;

	/* Clients have no business giving the broker handles: drop them. */
	for (size_t i = 0; i < bm->n_handles; i++)
		if (bm->handles[i] != BUS1_HANDLE_INVALID)
			b1_peer_handle_release(native->peer, bm->handles[i]);

	nc = find_by_node(native, bm->destination);
	if (!nc || nc->peer->closed) {
		/* Sent before the connection closed (its node is gone now). */
		if (!nc)
			log_info("bus1 message to unknown node %llu dropped",
				 (unsigned long long)bm->destination);
		close_many(bm->fds, bm->n_fds);
		return 0;
	}
	peer = nc->peer;

	if (bm->uid != (uint32_t)peer->uid) {
		close_many(bm->fds, bm->n_fds);
		peer_close(peer, "bus1 message stamped with a different uid");
		return 0;
	}
	if (!nc->have_creds)
		/* The first bus1 message (Hello): its process is the connection's. */
		peer_set_pid(peer, (pid_t)bm->pid);
	nc->have_creds = true;

	if (bm->n_fds && !peer->unix_fds) {
		close_many(bm->fds, bm->n_fds);
		peer_close(peer, "sent file descriptors without negotiating them");
		return 0;
	}
	if (bm->n_fds > (size_t)bus->limits.max_message_unix_fds) {
		close_many(bm->fds, bm->n_fds);
		peer_close(peer, "message exceeds max_message_unix_fds");
		return 0;
	}
	if (bm->n_bytes > (size_t)bus->limits.max_message_size) {
		close_many(bm->fds, bm->n_fds);
		peer_close(peer, "message exceeds max_message_size");
		return 0;
	}
	/* One bus1 message must be exactly one D-Bus message. */
	if (message_frame_size(bm->data, bm->n_bytes, &size) || size != bm->n_bytes) {
		close_many(bm->fds, bm->n_fds);
		peer_close(peer, "invalid message framing");
		return 0;
	}

	/* The copy out of the pool: the slice is released right after. */
	r = message_new_incoming(&msg, size);
	if (r < 0) {
		close_many(bm->fds, bm->n_fds);
		return r;
	}
	memcpy(message_incoming_data(msg), bm->data, size);
	r = peer_dispatch_incoming(peer, msg, bm->fds, bm->n_fds);
	return r < 0 ? r : 0;
}

static int native_io(sd_event_source *s, int fd, uint32_t revents, void *userdata)
{
	struct native *native = userdata;
	struct b1_msg bm;
	int r;

	for (int i = 0; i < NATIVE_READ_BUDGET; i++) {
		/* nothing behind the last one: back to epoll (level-triggered), no empty RECV */
		if (i > 0 && !b1_peer_more_queued(native->peer))
			break;
		r = b1_peer_recv(native->peer, 0, &bm);
		if (r == -EAGAIN)
			break;
		if (r < 0) {
			log_err("bus1 receive failed: %s", log_error(r));
			return sd_event_exit(native->bus->event, r);
		}
		/* The broker keeps no count of who holds its nodes. */
		if (bm.type == BUS1_MSG_NODE_RELEASE)
			continue;
		if (bm.type == BUS1_MSG_NODE_DESTROY) {
			struct native_conn *nc = find_by_client(native, bm.destination);

			if (nc)
				peer_close(nc->peer, NULL);
			continue;
		}
		r = native_input(native, &bm);
		/* copied out: the next RECV releases the slice, in the same ioctl */
		b1_peer_msg_release_later(native->peer, &bm);
		if (r < 0) {
			log_err("bus1 input failed: %s", log_error(r));
			return sd_event_exit(native->bus->event, r);
		}
	}
	/*
	 * One flush rule for every input: what this input produced goes out
	 * now, to native clients and to sockets alike, rather than from the
	 * bus' deferred flush, which would cost another turn of the event
	 * loop (an epoll_wait) per message: a native service's reply to a
	 * socket client leaves in the turn that read it. Each message's
	 * destinations are complete once it is routed, so nothing is lost to
	 * batching. It also closes the peers that overflowed and frees the
	 * closed ones, as after socket input.
	 */
	bus_flush_now(native->bus);
	return 0;
}

/* --------------------------------------------------------------- bootstrap */

static void native_conn_close(struct peer_transport *t);
static void native_conn_destroy(struct peer_transport *t);

static const struct peer_transport_ops native_transport_ops = {
	.queue = native_conn_queue,
	.close = native_conn_close,
	.free = native_conn_destroy,
	.output_stats = native_conn_output_stats,
};

/* Give the client's peer (through @fd) a new node and the broker a handle to it. */
static int native_transfer_node(struct native *native, int fd, uint64_t *client_node,
				uint64_t *handle)
{
	struct bus1_cmd_handle_transfer cmd = {
		.src_handle = BUS1_HANDLE_CREATE,
		.dst_fd = (uint32_t)b1_peer_get_fd(native->peer),
	};

	if (ioctl(fd, BUS1_CMD_HANDLE_TRANSFER, &cmd) < 0)
		return -errno;
	*client_node = cmd.src_handle;
	*handle = cmd.dst_handle;
	return 0;
}

int native_attach(struct native *native, struct peer *peer, int fd,
		  uint64_t handles[static 3], struct native_conn **ncp)
{
	struct native_conn *nc;
	uint64_t node = BUS1_HANDLE_CREATE;
	int r;

	nc = calloc(1, sizeof(*nc));
	if (!nc)
		return -ENOMEM;
	nc->transport.ops = &native_transport_ops;
	nc->native = native;
	nc->peer = peer;
	nc->refresh_msgs = NATIVE_REFRESH_MESSAGES;
	nc->refresh_bytes = NATIVE_REFRESH_BYTES;

	/* The connection node: the broker's, the client gets the only other handle. */
	r = b1_peer_handle_transfer_fd(native->peer, fd, &node, &handles[0]);
	if (r < 0) {
		free(nc);
		return r == -EBADF || r == -ENOTTY || r == -EINVAL ? NATIVE_E_NOT_BUS1 :
								     NATIVE_E_TRANSFER;
	}
	nc->node = node;
	/*
	 * The client node (output goes there) and the direct node (direct
	 * calls of other clients arrive there): created on the client's peer
	 * through its fd, which the broker may do while it holds the fd.
	 */
	r = native_transfer_node(native, fd, &handles[1], &nc->client);
	if (r < 0) {
		r = r == -EBADF || r == -ENOTTY ? NATIVE_E_NOT_BUS1 : NATIVE_E_TRANSFER;
		goto fail;
	}
	r = native_transfer_node(native, fd, &handles[2], &nc->direct);
	if (r < 0) {
		r = NATIVE_E_TRANSFER;
		goto fail;
	}

	r = hmap_insert(&native->nodes, &nc->node_link, handle_hash(nc->node));
	if (r < 0)
		goto fail;
	r = hmap_insert(&native->clients, &nc->client_link, handle_hash(nc->client));
	if (r < 0) {
		hmap_remove(&native->nodes, &nc->node_link);
		goto fail;
	}
	*ncp = nc;
	return 0;

fail:
	b1_peer_handle_release(native->peer, nc->direct);
	b1_peer_handle_release(native->peer, nc->client);
	b1_peer_handle_release(native->peer, nc->node);
	free(nc);
	return r;
}

struct peer_transport *native_conn_transport(struct native_conn *nc)
{
	return &nc->transport;
}

/* Release the nodes and handles; the object stays until the peer is freed. */
static void native_conn_release(struct native_conn *nc)
{
	struct native *native = nc->native;

	if (nc->released)
		return;
	nc->released = true;
	for (size_t i = 0; i < native->batch_n; i++)
		if (native->batch_nc[i] == nc)
			native->batch_nc[i] = NULL;
	/* Indexed since native_attach() or native_conn_restore(), until now. */
	assert(find_by_node(native, nc->node) == nc && find_by_client(native, nc->client) == nc);
	hmap_remove(&native->nodes, &nc->node_link);
	hmap_remove(&native->clients, &nc->client_link);
	/* Releasing the owner's handle destroys the node: the client is told. */
	b1_peer_handle_release(native->peer, nc->node);
	/*
	 * What the client did not read is taken back: a client that stopped
	 * reading (and may never read or close) must not keep the broker's
	 * kernel quota. The connection's user charges go with the connection.
	 */
	b1_peer_handle_reclaim(native->peer, nc->client);
	b1_peer_handle_release(native->peer, nc->client);
	native_conn_uncharge(nc, nc->charged_bytes, nc->charged_fds);
	b1_peer_handle_release(native->peer, nc->direct);
}

struct native_conn *native_conn_free(struct native_conn *nc)
{
	if (!nc)
		return NULL;
	native_conn_release(nc);
	free(nc->uids);
	free(nc);
	return NULL;
}

static void native_conn_close(struct peer_transport *t)
{
	native_conn_release(container_of(t, struct native_conn, transport));
}

static void native_conn_destroy(struct peer_transport *t)
{
	native_conn_free(container_of(t, struct native_conn, transport));
}

struct native_conn *native_conn_of(struct peer *peer)
{
	struct peer_transport *t = peer->output;

	return t && t->ops == &native_transport_ops ? container_of(t, struct native_conn, transport) :
						      NULL;
}

/* ------------------------------------------------------------ direct path */

/*
 * Tell @nc (through the broker, so in the broker's order) which uids may call
 * it directly: the full set each time (an empty set revokes every handle).
 * Return: 0, NATIVE_E_NO_DIRECT (it cannot take the signal: PEER_E_QUOTA,
 * PEER_E_DEAD), or negative errno.
 */
static int native_publish(struct native_conn *nc)
{
	_cleanup_message_ struct message *sig = NULL;
	struct peer *peer = nc->peer;
	struct message_builder b;
	int r;

	message_builder_init_signal(&b, DC_PATH_DBUS, DC_INTERFACE_BUS1, DC_BUS1_SIGNAL_DIRECT_POLICY,
				    DC_BUS1_DIRECT_POLICY_SIGNATURE);
	b.sender = DC_SERVICE_DBUS;
	b.destination = peer_name(peer);
	r = dc_writer_append_array(&b.body, 'u', nc->uids, nc->n_uids);
	if (r == 0)
		r = message_builder_seal(&b, bus_next_serial(peer->bus), &sig);
	message_builder_deinit(&b);
	if (r)
		return r < 0 ? r : -EINVAL;
	r = peer_queue(peer, sig);
	if (r == PEER_E_QUOTA)
		peer_overflow(peer);
	return r < 0 ? r : (r ? NATIVE_E_NO_DIRECT : 0);
}

int native_conn_allow_direct(struct native_conn *nc, uint32_t uid)
{
	uint32_t *v;

	assert(nc->n_uids <= 4096);
	for (size_t i = 0; i < nc->n_uids; i++)
		if (nc->uids[i] == uid)
			return 0;
	if (nc->n_uids >= 4096)
		return NATIVE_E_NO_DIRECT;	/* no more: calls from this uid are not direct */
	v = realloc(nc->uids, (nc->n_uids + 1) * sizeof(*v));
	if (!v)
		return -ENOMEM;
	nc->uids = v;
	nc->uids[nc->n_uids++] = uid;
	return native_publish(nc);
}

/*
 * The policy was reloaded: revoke every direct handle handed out (the
 * callees get an empty DirectPolicy; callers ask the broker again).
 */
static void native_policy_changed(struct bus_transport *transport)
{
	struct native *native = container_of(transport, struct native, transport);
	struct peer *c;

	/*
	 * Revoke every handle handed out under the old policy: the callees
	 * answer direct calls with DirectRevoked until a caller has asked the
	 * broker again (and was allowed under the new policy).
	 */
	list_for_each_entry(c, &native->bus->peers, bus_link) {
		struct native_conn *nc = native_conn_of(c);

		if (!nc || !nc->n_uids || c->closed || !c->registered)
			continue;
		nc->n_uids = 0;
		if (native_publish(nc) < 0)
			peer_overflow(c);
	}
}

int native_send_direct_handle(struct native_conn *caller, struct native_conn *callee,
			      struct message *reply)
{
	struct native *native = caller->native;
	struct iovec iov[2];
	uint64_t handle = callee->direct;
	int r;

	/* After everything routed before it (the DirectPolicy signal too). */
	native_flush(native);
	message_get_iovec(reply, iov);
	r = b1_peer_send(native->peer, 0, &caller->client, 1, NULL, iov, iov[1].iov_len ? 2 : 1,
			 &handle, 1, NULL, 0);
	if (r < 0) {
		log_info("direct handle for %s: %s", peer_name(caller->peer), strerror(-r));
		peer_overflow(caller->peer);
	}
	return 0;
}

/* ------------------------------------------------------------------ object */

/* Set up @native around its open peer (native->peer). */
static int native_setup(struct native *native)
{
	struct bus1_cmd_peer_query q = {};
	struct bus *bus = native->bus;
	int r;

	r = b1_peer_query(native->peer, &q);
	if (r < 0)
		return r;
	native->max_destinations = q.max_destinations ? q.max_destinations : 1;
	native->max_fds = q.max_fds;
	native->quota_bytes = q.quota_bytes;
	native->quota_fds = q.quota_fds;
	native->quota_messages = q.quota_messages;
	native->batch_dst = calloc(native->max_destinations, sizeof(*native->batch_dst));
	native->batch_nc = calloc(native->max_destinations, sizeof(*native->batch_nc));
	native->batch_err = calloc(native->max_destinations, sizeof(*native->batch_err));
	if (!native->batch_dst || !native->batch_nc || !native->batch_err)
		return -ENOMEM;

	r = sd_event_add_io(bus->event, &native->io, b1_peer_get_fd(native->peer), EPOLLIN,
			    native_io, native);
	if (r < 0)
		return r;
	bus_add_transport(bus, &native->transport);
	return 0;
}

/* The bus flushes its transports: what is collected goes out now. */
static bool native_transport_flush(struct bus_transport *transport)
{
	struct native *native = container_of(transport, struct native, transport);
	bool any = native->batch_msg != NULL;

	native_flush(native);
	return any;
}

/* The queue entries of the bus1 transport are the kernel's: nothing to add. */
static void native_transport_stats(const struct bus_transport *transport,
				   struct bus_transport_stats *st)
{
}

static const struct bus_transport_ops native_bus_transport_ops = {
	.flush = native_transport_flush,
	.stats = native_transport_stats,
	.policy_changed = native_policy_changed,
};

static struct native *native_alloc(struct bus *bus)
{
	struct native *native = calloc(1, sizeof(*native));

	if (!native)
		return NULL;
	native->transport.ops = &native_bus_transport_ops;
	list_init(&native->transport.link);
	native->bus = bus;
	hmap_init(&native->nodes);
	hmap_init(&native->clients);
	return native;
}

struct native *native_of_bus(struct bus *bus)
{
	struct bus_transport *t = bus_find_transport(bus, &native_bus_transport_ops);

	return t ? container_of(t, struct native, transport) : NULL;
}

int native_new(struct native **nativep, struct bus *bus)
{
	const char *path = getenv("BUS1_BROKER_DEVICE");
	struct native *native;
	int r;

	*nativep = NULL;
	/*
	 * No /dev/bus1 is the normal case on a kernel without the module: not
	 * worth a line at every start (dbus-daemon prints nothing either). A
	 * device named explicitly and missing is.
	 */
	if (access(path ? path : "/dev/bus1", F_OK) < 0) {
		if (path)
			log_info("%s not found: serving socket clients only", path);
		return 0;
	}
	if (!path)
		path = "/dev/bus1";

	native = native_alloc(bus);
	if (!native)
		return -ENOMEM;
	r = b1_peer_new_from_path(path, &native->peer);
	if (r < 0) {
		log_warn("cannot open %s (%s): serving socket clients only", path, log_error(r));
		native_free(native);
		return 0;
	}
	r = native_setup(native);
	if (r < 0) {
		native_free(native);
		return r;
	}
	log_info("bus1 transport on %s: native clients accepted", path);
	*nativep = native;
	return 0;
}

/* ---------------------------------------------------------------- re-exec */

int native_new_from_fd(struct native **nativep, struct bus *bus, int fd)
{
	struct native *native;
	int r;

	*nativep = NULL;
	native = native_alloc(bus);
	if (!native) {
		close(fd);
		return -ENOMEM;
	}
	/* Carried over (a re-exec, the fd store): the loop's mode, as for a new one. */
	r = fd_prepare_for_loop(fd);
	if (r == 0)
		r = b1_peer_new_from_fd(fd, &native->peer);
	if (r < 0) {
		close(fd);
		native_free(native);
		return r;
	}
	r = native_setup(native);
	if (r < 0) {
		native_free(native);
		return r;
	}
	*nativep = native;
	return 0;
}

void native_serialize(const struct native *native, struct state_writer *w)
{
	state_put_section(w, STATE_TAG_NATIVE, NATIVE_STATE_VERSION);
	state_put_fd(w, native ? b1_peer_get_fd(native->peer) : -1);
}

bool native_state_read(struct state_reader *r, int *fdp)
{
	uint32_t version;

	*fdp = -1;
	if (!state_section(r, STATE_TAG_NATIVE, NATIVE_STATE_VERSION, &version))
		return false;
	*fdp = state_get_fd_or_none(r);
	return !r->error;
}

void native_conn_serialize(struct peer *peer, struct state_writer *w)
{
	const struct native_conn *nc = native_conn_of(peer);

	state_put_section(w, STATE_TAG_NATIVE_CONN, NATIVE_CONN_STATE_VERSION);
	state_put_u32(w, nc != NULL);
	if (!nc)
		return;
	state_put_u64(w, nc->node);
	state_put_u64(w, nc->client);
	state_put_u64(w, nc->direct);
	state_put_u64(w, nc->q_bytes);
	state_put_u64(w, nc->q_fds);
	state_put_u64(w, nc->q_msgs);
	state_put_u64(w, nc->charged_bytes);
	state_put_u64(w, nc->charged_fds);
	state_put_u64(w, nc->refresh_msgs);
	state_put_u64(w, nc->refresh_bytes);
	state_put_u32(w, nc->have_creds);
	state_put_u64(w, nc->n_uids);
	for (size_t i = 0; i < nc->n_uids; i++)
		state_put_u32(w, nc->uids[i]);
}

bool native_conn_state_read(struct state_reader *r, bool *presentp,
			    struct native_conn_state *st)
{
	uint32_t version, *uids;
	size_t n;

	*presentp = false;
	*st = (struct native_conn_state){};
	if (!state_section(r, STATE_TAG_NATIVE_CONN, NATIVE_CONN_STATE_VERSION, &version))
		return false;
	*presentp = state_get_u32(r) != 0;
	if (!*presentp)
		return !r->error;
	st->node = state_get_u64(r);
	st->client = state_get_u64(r);
	st->direct = state_get_u64(r);
	st->q_bytes = state_get_u64(r);
	st->q_fds = state_get_u64(r);
	st->q_msgs = state_get_u64(r);
	st->charged_bytes = state_get_u64(r);
	st->charged_fds = state_get_u64(r);
	st->refresh_msgs = state_get_u64(r);
	st->refresh_bytes = state_get_u64(r);
	st->have_creds = state_get_u32(r) != 0;
	n = state_get_count(r, 4);
	if (!n)
		return !r->error;
	uids = calloc(n, sizeof(*uids));
	if (!uids) {
		r->error = true;
		return false;
	}
	for (size_t i = 0; i < n; i++)
		uids[i] = state_get_u32(r);
	st->uids = uids;
	st->n_uids = n;
	return !r->error;
}

void native_conn_state_deinit(struct native_conn_state *st)
{
	free((uint32_t *)st->uids);
	*st = (struct native_conn_state){};
}

int native_conn_restore(struct native *native, struct peer *peer,
			const struct native_conn_state *st)
{
	struct native_conn *nc;
	int r;

	if (!native)
		return -ENODEV;
	if (st->n_uids > 4096 || find_by_node(native, st->node) ||
	    find_by_client(native, st->client))
		return -EINVAL;
	nc = calloc(1, sizeof(*nc));
	if (!nc)
		return -ENOMEM;
	nc->transport.ops = &native_transport_ops;
	nc->native = native;
	nc->peer = peer;
	nc->node = st->node;
	nc->client = st->client;
	nc->direct = st->direct;
	nc->q_bytes = st->q_bytes;
	nc->q_fds = st->q_fds;
	nc->q_msgs = st->q_msgs;
	nc->refresh_msgs = st->refresh_msgs;
	nc->refresh_bytes = st->refresh_bytes;
	nc->have_creds = st->have_creds;
	if (st->n_uids) {
		nc->uids = malloc(st->n_uids * sizeof(*nc->uids));
		if (!nc->uids) {
			free(nc);
			return -ENOMEM;
		}
		memcpy(nc->uids, st->uids, st->n_uids * sizeof(*nc->uids));
		nc->n_uids = st->n_uids;
	}
	/* What the client had not read is charged to it again, as before. */
	if (peer_charge_message(peer, st->charged_bytes, st->charged_fds) == 0) {
		nc->charged_bytes = st->charged_bytes;
		nc->charged_fds = st->charged_fds;
	}
	r = hmap_insert(&native->nodes, &nc->node_link, handle_hash(nc->node));
	if (r < 0)
		goto fail;
	r = hmap_insert(&native->clients, &nc->client_link, handle_hash(nc->client));
	if (r < 0) {
		hmap_remove(&native->nodes, &nc->node_link);
		goto fail;
	}
	peer_set_output(peer, &nc->transport);
	return 0;

fail:
	native_conn_uncharge(nc, nc->charged_bytes, nc->charged_fds);
	free(nc->uids);
	free(nc);
	return r;
}

struct native *native_free(struct native *native)
{
	if (!native)
		return NULL;
	list_unlink(&native->transport.link);
	native->batch_msg = message_unref(native->batch_msg);
	native->io = sd_event_source_disable_unref(native->io);
	/* Connections still pointing here are freed first by the bus. */
	assert(hmap_size(&native->nodes) == 0 && hmap_size(&native->clients) == 0);
	hmap_deinit(&native->nodes);
	hmap_deinit(&native->clients);
	native->peer = b1_peer_free(native->peer);
	free(native->batch_dst);
	free(native->batch_nc);
	free(native->batch_err);
	free(native);
	return NULL;
}
