/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The broker's bus1 transport: the bootstrap of native clients, bus1 input
 * into the router and multicast output. See native.h and
 * docs/native-protocol.md.
 */

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <unistd.h>
#include <systemd/sd-event.h>
#include "libbus1.h"
#include "broker/bus.h"
#include "broker/connection.h"
#include "broker/log.h"
#include "broker/name.h"
#include "broker/native.h"
#include "broker/router.h"
#include "dbus-compat/message.h"
#include "dbus-compat/protocol.h"
#include "conf/config.h"
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
 * @native:	the broker's transport
 * @conn:	the connection (owns this object through conn->native)
 * @node:	the broker's own handle of the connection node (input arrives there)
 * @client:	the broker's handle to the client node (output goes there)
 * @node_link:	native->nodes, keyed by @node
 * @client_link: native->clients, keyed by @client
 * @uid, @gid, @pid: kernel-stamped sender of the last message received
 * @q_bytes, @q_fds, @q_msgs: sent (or collected) for the client and not known
 *		to be read: an upper bound, exact after native_conn_refresh()
 * @charged_bytes, @charged_fds: what of that is charged to the connection's
 *		user (USER_SLOT_BYTES/FDS, as a socket's output queue)
 * @in_batch:	collected for the message being batched, not sent yet
 * @direct:	the broker's handle to the client's direct node (direct calls
 *		from other native clients arrive there; handed out by
 *		GetDirectHandle, never used by the broker itself)
 * @uids:	uids published to the client as allowed direct callers
 */
struct native_conn {
	struct native *native;
	struct connection *conn;
	uint64_t node;
	uint64_t client;
	struct hmap_node node_link;
	struct hmap_node client_link;
	bool have_creds;
	uint32_t uid;
	uint32_t gid;
	uint32_t pid;

	uint64_t q_bytes;
	uint64_t q_fds;
	uint64_t q_msgs;
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
	struct bus *bus;
	struct b1_peer *peer;
	sd_event_source *io;
	sd_event_source *flush;
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

void native_flush(struct native *native)
{
	struct iovec iov[2];
	size_t n = 0;
	int r;

	if (!native || !native->batch_msg)
		return;

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
			log_warn("bus1 multicast to %zu destinations failed: %s", n, strerror(-r));
			for (size_t i = 0; i < n; i++)
				connection_overflow(native->batch_nc[i]->conn);
		} else {
			for (size_t i = 0; i < n; i++) {
				struct connection *c = native->batch_nc[i]->conn;

				switch (native->batch_err[i]) {
				case 0:
					break;
				case EHOSTUNREACH:
				case ENXIO:
					/* The client's peer is gone; NODE_DESTROY follows. */
					connection_overflow(c);
					break;
				default:
					/* EDQUOT, ENOSPC: it does not read its messages. */
					log_info("bus1 destination %s: %s",
						 c->registered ? connection_name(c) : "(inactive)",
						 strerror((int)native->batch_err[i]));
					connection_overflow(c);
					break;
				}
			}
		}
	}
	native->batch_n = 0;
	native->batch_msg = message_unref(native->batch_msg);
}

static int native_flush_cb(sd_event_source *s, void *userdata)
{
	native_flush(userdata);
	return 0;
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
	connection_uncharge(nc->conn, USER_SLOT_BYTES, bytes);
	connection_uncharge(nc->conn, USER_SLOT_FDS, fds);
	nc->charged_bytes -= bytes;
	nc->charged_fds -= fds;
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
	nc->q_bytes = bytes;
	nc->q_fds = fds;
	nc->q_msgs = msgs;
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

int native_conn_queue(struct native_conn *nc, struct message *msg)
{
	struct native *native = nc->native;
	struct connection *conn = nc->conn;
	uint64_t size = message_get_size(msg);

	if (conn->closed || conn->overflow)
		return CONNECTION_E_DEAD;
	/*
	 * No fd check here: every native client negotiated fds (its bootstrap
	 * carried one), so one multicast with the fds suits all of them.
	 *
	 * The output queue is the client's bus1 queue: bounded as a socket's
	 * (CONNECTION_E_QUOTA: the caller is refused or the receiver
	 * disconnected, as the router decides), by what the kernel says the
	 * client has not read yet.
	 */
	if (nc->q_msgs >= nc->refresh_msgs || nc->q_bytes + size > nc->refresh_bytes ||
	    native_conn_over(nc, size, msg->n_fds))
		native_conn_refresh(nc);
	if (native_conn_over(nc, size, msg->n_fds))
		return CONNECTION_E_QUOTA;
	if (connection_charge_message(conn, size, msg->n_fds))
		return CONNECTION_E_QUOTA;
	nc->charged_bytes += size;
	nc->charged_fds += msg->n_fds;
	nc->q_bytes += size;
	nc->q_fds += msg->n_fds;
	nc->q_msgs++;

	if (native->batch_msg != msg) {
		native_flush(native);
		native->batch_msg = message_ref(msg);
	} else if (native->batch_n >= native->max_destinations) {
		native_flush(native);
		native->batch_msg = message_ref(msg);
	}
	native->batch_dst[native->batch_n] = nc->client;
	native->batch_nc[native->batch_n] = nc;
	native->batch_n++;
	nc->in_batch = true;
	conn->n_outgoing++;
	sd_event_source_set_enabled(native->flush, SD_EVENT_ONESHOT);
	return 0;
}

/* ------------------------------------------------------------------- input */

static void close_fds(const int *fds, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (fds[i] >= 0)
			close(fds[i]);
}

/* Take one received DATA message. Returns 0 or negative errno (fatal). */
static int native_input(struct native *native, const struct b1_msg *bm)
{
	struct bus *bus = native->bus;
	struct native_conn *nc;
	struct connection *conn;
	struct message *msg = NULL;
	size_t size;
	int r;

	/* Clients have no business giving the broker handles: drop them. */
	for (size_t i = 0; i < bm->n_handles; i++)
		if (bm->handles[i] != BUS1_HANDLE_INVALID)
			b1_peer_handle_release(native->peer, bm->handles[i]);

	nc = find_by_node(native, bm->destination);
	if (!nc || nc->conn->closed) {
		/* Sent before the connection closed (its node is gone now). */
		if (!nc)
			log_info("bus1 message to unknown node %llu dropped",
				 (unsigned long long)bm->destination);
		close_fds(bm->fds, bm->n_fds);
		return 0;
	}
	conn = nc->conn;

	if (bm->uid != (uint32_t)conn->uid) {
		close_fds(bm->fds, bm->n_fds);
		connection_close(conn, "bus1 message stamped with a different uid");
		return 0;
	}
	if (!nc->have_creds)
		/* The first bus1 message (Hello): its process is the connection's. */
		connection_set_native_pid(conn, (pid_t)bm->pid);
	nc->have_creds = true;
	nc->uid = bm->uid;
	nc->gid = bm->gid;
	nc->pid = bm->pid;

	if (bm->n_fds && !conn->unix_fds) {
		close_fds(bm->fds, bm->n_fds);
		connection_close(conn, "sent file descriptors without negotiating them");
		return 0;
	}
	if (bm->n_fds > (size_t)bus->limits.max_message_unix_fds) {
		close_fds(bm->fds, bm->n_fds);
		connection_close(conn, "message exceeds max_message_unix_fds");
		return 0;
	}
	if (bm->n_bytes > (size_t)bus->limits.max_message_size) {
		close_fds(bm->fds, bm->n_fds);
		connection_close(conn, "message exceeds max_message_size");
		return 0;
	}
	/* One bus1 message must be exactly one D-Bus message. */
	if (message_frame_size(bm->data, bm->n_bytes, &size) || size != bm->n_bytes) {
		close_fds(bm->fds, bm->n_fds);
		connection_close(conn, "invalid message framing");
		return 0;
	}

	/* The copy out of the pool: the slice is released right after. */
	r = message_new_incoming(&msg, size);
	if (r < 0) {
		close_fds(bm->fds, bm->n_fds);
		return r;
	}
	memcpy(message_incoming_data(msg), bm->data, size);
	r = connection_dispatch_incoming(conn, msg, bm->fds, bm->n_fds);
	return r < 0 ? r : 0;
}

static int native_io(sd_event_source *s, int fd, uint32_t revents, void *userdata)
{
	struct native *native = userdata;
	struct b1_msg bm;
	int r;

	for (int i = 0; i < NATIVE_READ_BUDGET; i++) {
		r = b1_peer_recv(native->peer, 0, &bm);
		if (r == -EAGAIN)
			break;
		if (r < 0) {
			log_err("bus1 receive failed: %s", strerror(-r));
			return sd_event_exit(native->bus->event, r);
		}
		/* The broker keeps no count of who holds its nodes. */
		if (bm.type == BUS1_MSG_NODE_RELEASE)
			continue;
		if (bm.type == BUS1_MSG_NODE_DESTROY) {
			struct native_conn *nc = find_by_client(native, bm.destination);

			if (nc)
				connection_close(nc->conn, NULL);
			continue;
		}
		r = native_input(native, &bm);
		b1_peer_msg_release(native->peer, &bm);
		if (r < 0) {
			log_err("bus1 input failed: %s", strerror(-r));
			return sd_event_exit(native->bus->event, r);
		}
	}
	return 0;
}

/* --------------------------------------------------------------- bootstrap */

bool native_is_connect(const struct message *msg)
{
	return msg->type == DC_MESSAGE_METHOD_CALL && msg->interface && msg->member &&
	       msg->destination && !strcmp(msg->destination, DC_SERVICE_DBUS) &&
	       !strcmp(msg->interface, NATIVE_INTERFACE) && !strcmp(msg->member, "Connect");
}

static int reply_error(struct connection *conn, struct message *msg, const char *name,
		       const char *text)
{
	return router_send_error(conn, msg, name, "%s", text);
}

int native_connect(struct native *native, struct connection *conn, struct message *msg,
		   struct native_conn **ncp)
{
	_cleanup_message_ struct message *reply = NULL;
	struct message_builder b;
	struct native_conn *nc;
	struct dc_reader reader;
	uint32_t index;
	uint64_t node = BUS1_HANDLE_CREATE, bus_handle = 0;
	uint64_t client_node = BUS1_HANDLE_CREATE, client = 0, direct_node = 0;
	int fd, r;

	if (!native)
		return reply_error(conn, msg, DC_ERROR_NOT_SUPPORTED,
				   "This bus has no bus1 transport (/dev/bus1 is absent)");
	if (*ncp || conn->registered)
		return reply_error(conn, msg, DC_ERROR_FAILED,
				   "Connect must be the first call, and only one");
	if (strcmp(msg->signature, "h"))
		return reply_error(conn, msg, DC_ERROR_INVALID_ARGS,
				   "Connect takes one unix fd (signature h)");
	r = message_get_body_reader(msg, &reader);
	if (r < 0)
		return r;
	if (r > 0 || dc_reader_read(&reader, "h", &index) || index >= msg->n_fds)
		return reply_error(conn, msg, DC_ERROR_INVALID_ARGS,
				   "Connect needs its fd (negotiate NEGOTIATE_UNIX_FD)");
	fd = msg->fds[index];

	nc = calloc(1, sizeof(*nc));
	if (!nc)
		return -ENOMEM;
	nc->native = native;
	nc->conn = conn;
	nc->refresh_msgs = NATIVE_REFRESH_MESSAGES;
	nc->refresh_bytes = NATIVE_REFRESH_BYTES;

	/* The connection node: the broker's, the client gets the only other handle. */
	r = b1_peer_handle_transfer_fd(native->peer, fd, &node, &bus_handle);
	if (r < 0) {
		free(nc);
		return reply_error(conn, msg, DC_ERROR_INVALID_ARGS,
				   r == -EBADF || r == -ENOTTY || r == -EINVAL ?
				   "Connect needs a /dev/bus1 fd" : "bus1 handle transfer failed");
	}
	/*
	 * The client node: created on the client's peer through its fd (the
	 * broker may: it holds the fd), the broker receives a handle to it.
	 */
	{
		struct bus1_cmd_handle_transfer cmd = {
			.src_handle = BUS1_HANDLE_CREATE,
			.dst_fd = (uint32_t)b1_peer_get_fd(native->peer),
		};

		if (ioctl(fd, BUS1_CMD_HANDLE_TRANSFER, &cmd) < 0) {
			r = -errno;
			b1_peer_handle_release(native->peer, node);
			free(nc);
			return reply_error(conn, msg, DC_ERROR_INVALID_ARGS,
					   r == -EBADF || r == -ENOTTY ?
					   "Connect needs a /dev/bus1 fd" :
					   "bus1 handle transfer failed");
		}
		client_node = cmd.src_handle;
		client = cmd.dst_handle;

		/* The direct node: the same, a second node of the client. */
		cmd = (struct bus1_cmd_handle_transfer){
			.src_handle = BUS1_HANDLE_CREATE,
			.dst_fd = (uint32_t)b1_peer_get_fd(native->peer),
		};
		if (ioctl(fd, BUS1_CMD_HANDLE_TRANSFER, &cmd) < 0) {
			r = -errno;
			b1_peer_handle_release(native->peer, client);
			b1_peer_handle_release(native->peer, node);
			free(nc);
			return reply_error(conn, msg, DC_ERROR_INVALID_ARGS,
					   "bus1 handle transfer failed");
		}
		direct_node = cmd.src_handle;
		nc->direct = cmd.dst_handle;
	}
	nc->node = node;
	nc->client = client;

	/*
	 * The broker keeps no copy of the client's peer fd: it must not keep
	 * the client's peer alive, nor act as it later. The fd is owned by the
	 * message; replace it with -1 so nothing else can use it.
	 */
	close(fd);
	msg->fds[index] = -1;

	message_builder_init_method_return(&b, msg, "ttt");
	b.sender = DC_SERVICE_DBUS;
	dc_writer_write(&b.body, "ttt", bus_handle, client_node, direct_node);
	r = message_builder_seal(&b, bus_next_serial(conn->bus), &reply);
	message_builder_deinit(&b);
	if (r < 0)
		goto fail;
	/* Still a socket connection here: the reply goes out on the socket. */
	r = connection_queue(conn, reply);
	if (r) {
		r = r < 0 ? r : 0;
		connection_close(conn, "cannot queue the bus1 bootstrap reply");
		goto fail;
	}

	r = hmap_insert(&native->nodes, &nc->node_link, handle_hash(node));
	if (r < 0)
		goto fail;
	r = hmap_insert(&native->clients, &nc->client_link, handle_hash(client));
	if (r < 0) {
		hmap_remove(&native->nodes, &nc->node_link);
		goto fail;
	}
	*ncp = nc;
	return 0;

fail:
	b1_peer_handle_release(native->peer, nc->direct);
	b1_peer_handle_release(native->peer, client);
	b1_peer_handle_release(native->peer, node);
	free(nc);
	return r;
}

struct native_conn *native_conn_free(struct native_conn *nc)
{
	struct native *native;

	if (!nc)
		return NULL;
	native = nc->native;
	for (size_t i = 0; i < native->batch_n; i++)
		if (native->batch_nc[i] == nc)
			native->batch_nc[i] = NULL;
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
	free(nc->uids);
	free(nc);
	return NULL;
}

int native_conn_get_creds(const struct native_conn *nc, uint32_t *uid, uint32_t *gid,
			  uint32_t *pid)
{
	if (!nc->have_creds)
		return -ENODATA;
	*uid = nc->uid;
	*gid = nc->gid;
	*pid = nc->pid;
	return 0;
}

/* ------------------------------------------------------------ direct path */

bool native_is_get_direct_handle(const struct message *msg)
{
	return msg->type == DC_MESSAGE_METHOD_CALL && msg->interface && msg->member &&
	       !strcmp(msg->interface, NATIVE_INTERFACE) &&
	       !strcmp(msg->member, "GetDirectHandle");
}

/*
 * Tell @nc (through the broker, so in the broker's order) which uids may call
 * it directly: the full set each time (an empty set revokes every handle).
 */
static int native_publish(struct native_conn *nc)
{
	_cleanup_message_ struct message *sig = NULL;
	struct connection *conn = nc->conn;
	struct message_builder b;
	int r;

	message_builder_init_signal(&b, DC_PATH_DBUS, NATIVE_INTERFACE, "DirectPolicy", "au");
	b.sender = DC_SERVICE_DBUS;
	b.destination = connection_name(conn);
	r = dc_writer_append_array(&b.body, 'u', nc->uids, nc->n_uids);
	if (r == 0)
		r = message_builder_seal(&b, bus_next_serial(conn->bus), &sig);
	message_builder_deinit(&b);
	if (r)
		return r < 0 ? r : -EINVAL;
	r = connection_queue(conn, sig);
	if (r == CONNECTION_E_QUOTA)
		connection_overflow(conn);
	return r < 0 ? r : (r ? 1 : 0);
}

static int native_publish_uid(struct native_conn *nc, uint32_t uid)
{
	uint32_t *v;

	for (size_t i = 0; i < nc->n_uids; i++)
		if (nc->uids[i] == uid)
			return 0;
	if (nc->n_uids >= 4096)
		return 1;	/* no more: direct calls from this uid are refused */
	v = realloc(nc->uids, (nc->n_uids + 1) * sizeof(*v));
	if (!v)
		return -ENOMEM;
	nc->uids = v;
	nc->uids[nc->n_uids++] = uid;
	return native_publish(nc);
}

void native_policy_changed(struct native *native)
{
	struct connection *c;

	if (!native)
		return;
	/*
	 * Revoke every handle handed out under the old policy: the callees
	 * answer direct calls with DirectRevoked until a caller has asked the
	 * broker again (and was allowed under the new policy).
	 */
	list_for_each_entry(c, &native->bus->connections, bus_link) {
		struct native_conn *nc = c->native;

		if (!nc || !nc->n_uids || c->closed || !c->registered)
			continue;
		nc->n_uids = 0;
		if (native_publish(nc) < 0)
			connection_overflow(c);
	}
}

/* ----------------------------------------------- the policy, for the callee */

/*
 * A send/receive rule the callee cannot evaluate from a direct message and
 * its kernel-stamped uid: one that looks at interface, member, path, error
 * name or fds, or applies by group or console (the callee knows the uid,
 * not the groups or the seat).
 */
struct native_rule {
	char *name;		/* send_destination / receive_sender, NULL: any */
	bool prefix;
};

struct native_rules {
	struct native_rule *v;
	size_t n;
};

static bool rule_is_opaque(const struct bus_policy_rule *r)
{
	if (r->type != BUS_POLICY_RULE_SEND && r->type != BUS_POLICY_RULE_RECEIVE)
		return false;
	return r->interface || r->member || r->path || r->error || r->min_fds > 0 ||
	       r->max_fds < BUS_POLICY_MAX_FDS || r->scope == BUS_POLICY_SCOPE_GROUP ||
	       r->scope == BUS_POLICY_SCOPE_CONSOLE;
}

struct native_rules *native_rules_free(struct native_rules *rules)
{
	if (!rules)
		return NULL;
	for (size_t i = 0; i < rules->n; i++)
		free(rules->v[i].name);
	free(rules->v);
	free(rules);
	return NULL;
}

int native_rules_update(struct native_rules **rulesp, const struct bus_config *config)
{
	struct native_rules *rules;
	struct bus_policy_rule *r;
	size_t n = 0;

	*rulesp = native_rules_free(*rulesp);
	rules = calloc(1, sizeof(*rules));
	if (!rules)
		return -ENOMEM;
	list_for_each_entry(r, &config->rules, link)
		if (rule_is_opaque(r))
			n++;
	if (n) {
		rules->v = calloc(n, sizeof(*rules->v));
		if (!rules->v) {
			native_rules_free(rules);
			return -ENOMEM;
		}
	}
	list_for_each_entry(r, &config->rules, link) {
		if (!rule_is_opaque(r))
			continue;
		if (r->name) {
			rules->v[rules->n].name = strdup(r->name);
			if (!rules->v[rules->n].name) {
				native_rules_free(rules);
				return -ENOMEM;
			}
		}
		rules->v[rules->n].prefix = r->name_is_prefix;
		rules->n++;
	}
	*rulesp = rules;
	return 0;
}

static bool name_matches(const char *rule, bool prefix, const char *name)
{
	size_t n = strlen(rule);

	return !strcmp(rule, name) || (prefix && !strncmp(rule, name, n) && name[n] == '.');
}

static bool conn_has_name(struct connection *c, const struct native_rule *rule)
{
	struct name_ownership *o;

	if (name_matches(rule->name, rule->prefix, connection_name(c)))
		return true;
	list_for_each_entry(o, &c->owner.ownerships, owner_link)
		if (name_matches(rule->name, rule->prefix, o->name->str))
			return true;
	return false;
}

/*
 * Does an opaque rule concern calls from @from to @to or their replies? Then
 * the callee could not reach the broker's verdict for every message.
 */
static bool native_opaque(struct bus *bus, struct connection *from, struct connection *to)
{
	const struct native_rules *rules = bus->native_rules;

	if (!bus->policy)
		return false;
	if (!rules)
		return true;	/* the summary failed (ENOMEM): no direct path */
	for (size_t i = 0; i < rules->n; i++)
		if (!rules->v[i].name || conn_has_name(from, &rules->v[i]) ||
		    conn_has_name(to, &rules->v[i]))
			return true;
	return false;
}

/*
 * The broker's verdict on a message of @type (a call, or a requested reply)
 * from @from to @to: with the opaque rules excluded it is the same for every
 * such message, so one probe decides it.
 */
static int native_probe(native_policy_fn policy, struct connection *from, struct connection *to,
			int type)
{
	_cleanup_message_ struct message *probe = NULL;
	struct message_builder b;
	int r;

	if (type == DC_MESSAGE_METHOD_CALL) {
		message_builder_init_method_call(&b, connection_name(to), "/", NULL,
						 "DirectCall", "");
	} else {
		message_builder_init(&b, type, "");
		b.reply_serial = 1;
		b.destination = connection_name(to);
		if (type == DC_MESSAGE_ERROR)
			b.error_name = DC_ERROR_FAILED;
	}
	b.sender = connection_name(from);
	r = message_builder_seal(&b, 1, &probe);
	message_builder_deinit(&b);
	if (r)
		return r < 0 ? r : -EINVAL;
	return policy(from, to, probe, type != DC_MESSAGE_METHOD_CALL);
}

int native_get_direct_handle(struct native *native, struct connection *conn, struct message *msg,
			     native_policy_fn policy)
{
	_cleanup_message_ struct message *reply = NULL;
	struct native_conn *nc = conn->native;
	struct connection *target;
	struct message_builder b;
	struct dc_reader reader;
	struct iovec iov[2];
	const char *name = NULL;
	uint64_t handle;
	int r;

	if (!native || !nc)
		return router_send_error(conn, msg, DC_ERROR_NOT_SUPPORTED, "%s",
					 "Direct handles are for native (bus1) clients only");
	r = message_get_body_reader(msg, &reader);
	if (r < 0)
		return r;
	if (r > 0 || strcmp(msg->signature, "s") || dc_reader_read(&reader, "s", &name) || !name)
		return router_send_error(conn, msg, DC_ERROR_INVALID_ARGS, "%s",
					 "GetDirectHandle takes one bus name (signature s)");
	target = bus_resolve(conn->bus, name);
	if (!target)
		return router_send_error(conn, msg, DC_ERROR_NAME_HAS_NO_OWNER,
					 "Could not get owner of name '%s': no such name", name);
	if (!target->native)
		return router_send_error(conn, msg, DC_ERROR_NOT_SUPPORTED,
					 "The owner of '%s' is not a native client", name);

	/*
	 * The broker's verdict for a call from the caller to the owner. It is
	 * the callee's to enforce on the direct path, where it knows only the
	 * message and the caller's kernel-stamped uid: if a rule concerning the
	 * two looks at anything else, no direct handle (the calls go through
	 * the broker, which applies every rule).
	 */
	r = native_probe(policy, conn, target, DC_MESSAGE_METHOD_CALL);
	if (r < 0)
		return r;
	if (r == 0)
		return router_send_error(conn, msg, DC_ERROR_ACCESS_DENIED,
					 "The policy does not allow calls to '%s'", name);
	if (native_opaque(conn->bus, conn, target))
		return router_send_error(conn, msg, DC_ERROR_NOT_SUPPORTED,
					 "The policy for '%s' looks at interfaces, members, paths, "
					 "errors, fds, groups or the console: no direct handle",
					 name);
	r = native_probe(policy, target, conn, DC_MESSAGE_METHOD_RETURN);
	if (r > 0)
		r = native_probe(policy, target, conn, DC_MESSAGE_ERROR);
	if (r < 0)
		return r;
	if (r == 0)
		return router_send_error(conn, msg, DC_ERROR_NOT_SUPPORTED,
					 "The policy does not allow replies from '%s': no direct "
					 "handle", name);
	r = native_publish_uid(target->native, (uint32_t)conn->uid);
	if (r < 0)
		return r;
	if (r > 0)
		return router_send_error(conn, msg, DC_ERROR_LIMITS_EXCEEDED,
					 "No direct handle to '%s' now", name);

	message_builder_init_method_return(&b, msg, "s");
	b.sender = DC_SERVICE_DBUS;
	dc_writer_write(&b.body, "s", connection_name(target));
	r = message_builder_seal(&b, bus_next_serial(conn->bus), &reply);
	message_builder_deinit(&b);
	if (r)
		return r < 0 ? r : -EINVAL;

	/* After everything routed before it (the DirectPolicy signal too). */
	native_flush(native);
	message_get_iovec(reply, iov);
	handle = target->native->direct;
	r = b1_peer_send(native->peer, 0, &nc->client, 1, NULL, iov, iov[1].iov_len ? 2 : 1,
			 &handle, 1, NULL, 0);
	if (r < 0) {
		log_info("direct handle for %s: %s", connection_name(conn), strerror(-r));
		connection_overflow(conn);
	}
	return 0;
}

/* ------------------------------------------------------------------ object */

int native_new(struct native **nativep, struct bus *bus)
{
	struct bus1_cmd_peer_query q = {};
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

	native = calloc(1, sizeof(*native));
	if (!native)
		return -ENOMEM;
	native->bus = bus;
	hmap_init(&native->nodes);
	hmap_init(&native->clients);

	r = b1_peer_new_from_path(path, &native->peer);
	if (r < 0) {
		log_warn("cannot open %s (%s): serving socket clients only", path, strerror(-r));
		native_free(native);
		return 0;
	}
	r = b1_peer_query(native->peer, &q);
	if (r < 0)
		goto fail;
	native->max_destinations = q.max_destinations ? q.max_destinations : 1;
	native->max_fds = q.max_fds;
	native->quota_bytes = q.quota_bytes;
	native->quota_fds = q.quota_fds;
	native->quota_messages = q.quota_messages;
	native->batch_dst = calloc(native->max_destinations, sizeof(*native->batch_dst));
	native->batch_nc = calloc(native->max_destinations, sizeof(*native->batch_nc));
	native->batch_err = calloc(native->max_destinations, sizeof(*native->batch_err));
	if (!native->batch_dst || !native->batch_nc || !native->batch_err) {
		r = -ENOMEM;
		goto fail;
	}

	r = sd_event_add_io(bus->event, &native->io, b1_peer_get_fd(native->peer), EPOLLIN,
			    native_io, native);
	if (r < 0)
		goto fail;
	r = sd_event_add_defer(bus->event, &native->flush, native_flush_cb, native);
	if (r < 0)
		goto fail;
	/* After the input of this iteration, like the socket flush. */
	r = sd_event_source_set_priority(native->flush, SD_EVENT_PRIORITY_IDLE);
	if (r < 0)
		goto fail;
	sd_event_source_set_enabled(native->flush, SD_EVENT_OFF);

	log_info("bus1 transport on %s: native clients accepted", path);
	*nativep = native;
	return 0;

fail:
	native_free(native);
	return r;
}

struct native *native_free(struct native *native)
{
	if (!native)
		return NULL;
	native->batch_msg = message_unref(native->batch_msg);
	native->io = sd_event_source_disable_unref(native->io);
	native->flush = sd_event_source_disable_unref(native->flush);
	/* Connections still pointing here are freed first by the bus. */
	hmap_deinit(&native->nodes);
	hmap_deinit(&native->clients);
	native->peer = b1_peer_free(native->peer);
	free(native->batch_dst);
	free(native->batch_nc);
	free(native->batch_err);
	free(native);
	return NULL;
}
