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
#include "broker/native.h"
#include "broker/router.h"
#include "dbus-compat/message.h"
#include "dbus-compat/protocol.h"
#include "util/hashmap.h"
#include "util/macro.h"

/* bus1 messages taken per wakeup, so one busy client cannot starve the sockets. */
#define NATIVE_READ_BUDGET 64

/**
 * struct native_conn - the bus1 side of one native connection
 * @native:	the broker's transport
 * @conn:	the connection (owns this object through conn->native)
 * @node:	the broker's own handle of the connection node (input arrives there)
 * @client:	the broker's handle to the client node (output goes there)
 * @node_link:	native->nodes, keyed by @node
 * @client_link: native->clients, keyed by @client
 * @uid, @gid, @pid: kernel-stamped sender of the last message received
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
};

/**
 * struct native - the broker's bus1 peer
 * @batch_msg:	the message whose native destinations are being collected
 * @batch_dst:	their client-node handles
 * @batch_nc:	the connections (NULL once freed while collected)
 */
struct native {
	struct bus *bus;
	struct bus1_peer *peer;
	sd_event_source *io;
	sd_event_source *flush;
	struct hmap nodes;
	struct hmap clients;
	size_t max_destinations;
	size_t max_fds;

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
		native->batch_nc[n] = native->batch_nc[i];
		native->batch_dst[n] = native->batch_dst[i];
		n++;
	}
	native->batch_n = n;

	if (n) {
		const struct message *m = native->batch_msg;

		message_get_iovec(m, iov);
		memset(native->batch_err, 0, n * sizeof(*native->batch_err));
		r = bus1_peer_send(native->peer, BUS1_SEND_FLAG_CONTINUE, native->batch_dst, n,
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

int native_conn_queue(struct native_conn *nc, struct message *msg)
{
	struct native *native = nc->native;
	struct connection *conn = nc->conn;

	if (conn->closed || conn->overflow)
		return CONNECTION_E_DEAD;
	/*
	 * No fd check here: every native client negotiated fds (its bootstrap
	 * carried one), so one multicast with the fds suits all of them.
	 * Output quotas are the kernel's (the broker's uid is charged until
	 * the receiver takes the message; EDQUOT/ENOSPC disconnect it).
	 */
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
static int native_input(struct native *native, const struct bus1_msg *bm)
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
			bus1_peer_handle_release(native->peer, bm->handles[i]);

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
	/* The message owns the fds from here on. */
	r = message_parse(msg, bm->fds, bm->n_fds);
	if (r < 0) {
		message_unref(msg);
		return r;
	}
	if (r > 0) {
		log_info("disconnecting %s: invalid message: %s",
			 conn->registered ? connection_name(conn) : "(inactive)",
			 dc_invalid_to_string(r));
		message_unref(msg);
		connection_close(conn, NULL);
		return 0;
	}
	conn->n_incoming++;
	bus->n_messages++;
	r = router_dispatch(conn, msg);
	message_unref(msg);
	return r;
}

static int native_io(sd_event_source *s, int fd, uint32_t revents, void *userdata)
{
	struct native *native = userdata;
	struct bus1_msg bm;
	int r;

	for (int i = 0; i < NATIVE_READ_BUDGET; i++) {
		r = bus1_peer_recv(native->peer, 0, &bm);
		if (r == -EAGAIN)
			break;
		if (r < 0) {
			log_err("bus1 receive failed: %s", strerror(-r));
			return sd_event_exit(native->bus->event, r);
		}
		if (bm.type == BUS1_MSG_NODE_DESTROY) {
			struct native_conn *nc = find_by_client(native, bm.destination);

			if (nc)
				connection_close(nc->conn, NULL);
			continue;
		}
		r = native_input(native, &bm);
		bus1_peer_msg_release(native->peer, &bm);
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
	uint64_t client_node = BUS1_HANDLE_CREATE, client = 0;
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

	/* The connection node: the broker's, the client gets the only other handle. */
	r = bus1_peer_handle_transfer_fd(native->peer, fd, &node, &bus_handle);
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
			.dst_fd = (uint32_t)bus1_peer_get_fd(native->peer),
		};

		if (ioctl(fd, BUS1_CMD_HANDLE_TRANSFER, &cmd) < 0) {
			r = -errno;
			bus1_peer_handle_release(native->peer, node);
			free(nc);
			return reply_error(conn, msg, DC_ERROR_INVALID_ARGS,
					   r == -EBADF || r == -ENOTTY ?
					   "Connect needs a /dev/bus1 fd" :
					   "bus1 handle transfer failed");
		}
		client_node = cmd.src_handle;
		client = cmd.dst_handle;
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

	message_builder_init_method_return(&b, msg, "tt");
	b.sender = DC_SERVICE_DBUS;
	dc_writer_write(&b.body, "tt", bus_handle, client_node);
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
	bus1_peer_handle_release(native->peer, client);
	bus1_peer_handle_release(native->peer, node);
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
	bus1_peer_handle_release(native->peer, nc->node);
	bus1_peer_handle_release(native->peer, nc->client);
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

/* ------------------------------------------------------------------ object */

int native_new(struct native **nativep, struct bus *bus)
{
	struct bus1_cmd_peer_query q = {};
	const char *path = getenv("BUS1_BROKER_DEVICE");
	struct native *native;
	int r;

	*nativep = NULL;
	if (!path)
		path = "/dev/bus1";
	if (access(path, F_OK) < 0) {
		log_info("%s not found: serving socket clients only", path);
		return 0;
	}

	native = calloc(1, sizeof(*native));
	if (!native)
		return -ENOMEM;
	native->bus = bus;
	hmap_init(&native->nodes);
	hmap_init(&native->clients);

	r = bus1_peer_new_from_path(path, &native->peer);
	if (r < 0) {
		log_warn("cannot open %s (%s): serving socket clients only", path, strerror(-r));
		native_free(native);
		return 0;
	}
	r = bus1_peer_query(native->peer, &q);
	if (r < 0)
		goto fail;
	native->max_destinations = q.max_destinations ? q.max_destinations : 1;
	native->max_fds = q.max_fds;
	native->batch_dst = calloc(native->max_destinations, sizeof(*native->batch_dst));
	native->batch_nc = calloc(native->max_destinations, sizeof(*native->batch_nc));
	native->batch_err = calloc(native->max_destinations, sizeof(*native->batch_err));
	if (!native->batch_dst || !native->batch_nc || !native->batch_err) {
		r = -ENOMEM;
		goto fail;
	}

	r = sd_event_add_io(bus->event, &native->io, bus1_peer_get_fd(native->peer), EPOLLIN,
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
	native->peer = bus1_peer_free(native->peer);
	free(native->batch_dst);
	free(native->batch_nc);
	free(native->batch_err);
	free(native);
	return NULL;
}
