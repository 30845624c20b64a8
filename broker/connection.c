/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Socket connections: authentication, framing, the output queue and
 * teardown. Routing of what a connection sends is in router.c, the bus
 * driver in driver.c. See connection.h.
 */

#include <errno.h>
#include <grp.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include "broker/bus.h"
#include "broker/connection.h"
#include "broker/log.h"
#include "broker/monitor.h"
#include "broker/native.h"
#include "broker/router.h"
#include "conf/policy.h"
#include "dbus-compat/keyring.h"
#include "dbus-compat/message.h"
#include "dbus-compat/protocol.h"

/*
 * Work done for one connection per wakeup: this many recvmsg() calls. Each
 * call may deliver many small messages; the bound keeps one busy client from
 * starving the others (the level-triggered source fires again).
 */
#define CONNECTION_READ_BUDGET 16

/**
 * struct delivery - one message queued on one socket
 * @entry:	the socket's write-queue entry
 * @msg:	the (shared) message; one reference per delivery
 * @conn:	the destination, whose counters are charged
 * @iov:	header and body of @msg
 *
 * Freed deliveries are kept on a per-bus free list, so the steady state
 * allocates nothing per destination.
 */
struct delivery {
	struct socket_entry entry;
	struct message *msg;
	struct connection *conn;
	struct iovec iov[2];
	struct delivery *next_free;
};

#define DELIVERY_CACHE_MAX 4096

static struct delivery *delivery_free_list;
static size_t delivery_n_free;
static size_t delivery_n_used;

static struct delivery *delivery_alloc(void)
{
	struct delivery *d = delivery_free_list;

	if (d) {
		delivery_free_list = d->next_free;
		delivery_n_free--;
		delivery_n_used++;
		return d;
	}
	d = malloc(sizeof(*d));
	if (d)
		delivery_n_used++;
	return d;
}

void connection_pool_stats(size_t *used_bytes, size_t *cached_bytes)
{
	*used_bytes = delivery_n_used * sizeof(struct delivery);
	*cached_bytes = delivery_n_free * sizeof(struct delivery);
}

static void delivery_recycle(struct delivery *d)
{
	delivery_n_used--;
	if (delivery_n_free >= DELIVERY_CACHE_MAX) {
		free(d);
		return;
	}
	d->next_free = delivery_free_list;
	delivery_free_list = d;
	delivery_n_free++;
}

static void delivery_release(struct socket_entry *entry)
{
	struct delivery *d = container_of(entry, struct delivery, entry);
	struct connection *conn = d->conn;
	size_t size = message_get_size(d->msg);

	conn->n_queued_bytes -= size;
	conn->n_queued_fds -= d->msg->n_fds;
	conn->n_queued_msgs--;
	connection_uncharge(conn, USER_SLOT_BYTES, size);
	if (d->msg->n_fds)
		connection_uncharge(conn, USER_SLOT_FDS, d->msg->n_fds);
	message_unref(d->msg);
	delivery_recycle(d);
}

int connection_charge(struct connection *conn, enum user_slot slot, uint64_t amount)
{
	if (!conn->user || !amount)
		return 0;
	return user_charge(&conn->charges[slot], conn->user, slot, amount);
}

void connection_uncharge(struct connection *conn, enum user_slot slot, uint64_t amount)
{
	struct user_charge *c = &conn->charges[slot];

	if (!c->user || !amount)
		return;
	if (amount > c->amount)
		amount = c->amount;
	user_counters_uncharge(&c->user->counters, slot, amount);
	c->amount -= amount;
}

int connection_charge_message(struct connection *conn, uint64_t bytes, uint64_t n_fds)
{
	int r;

	r = connection_charge(conn, USER_SLOT_BYTES, bytes);
	if (r)
		return r;
	r = connection_charge(conn, USER_SLOT_FDS, n_fds);
	if (r)
		connection_uncharge(conn, USER_SLOT_BYTES, bytes);
	return r;
}

void connection_overflow(struct connection *conn)
{
	if (conn->overflow || conn->closed)
		return;
	conn->overflow = true;
	list_append(&conn->bus->overflow_list, &conn->overflow_link);
	bus_schedule_flush(conn->bus, NULL);
}

uint32_t bus_next_serial(struct bus *bus)
{
	static uint32_t serial;

	(void)bus;
	if (++serial == 0)
		serial = 1;
	return serial;
}

static void connection_update_events(struct connection *conn)
{
	uint32_t events;

	if (conn->closed || !conn->io)
		return;
	events = conn->eof ? 0 : EPOLLIN;
	/*
	 * A pending flush tries the write first; EPOLLOUT is only needed when
	 * the kernel did not take everything (saves two epoll_ctl() per message).
	 */
	if (socket_wants_write(conn->socket) && !list_node_is_linked(&conn->flush_link))
		events |= EPOLLOUT;
	if (events != conn->io_events) {
		if (sd_event_source_set_io_events(conn->io, events) >= 0)
			conn->io_events = events;
	}
}

int connection_queue(struct connection *conn, struct message *msg)
{
	struct delivery *d;
	size_t size = message_get_size(msg);
	int r;

	if (conn->closed || conn->overflow)
		return CONNECTION_E_DEAD;
	if (conn->native)
		return native_conn_queue(conn->native, msg);
	if (conn->n_queued_bytes + size > conn->bus->max_queued_bytes ||
	    conn->n_queued_fds + msg->n_fds > conn->bus->max_queued_fds) {
		/*
		 * The quota is for what the receiver does not take: one read
		 * batch may produce more than it for a reader, so give the
		 * kernel what fits before judging.
		 */
		r = socket_dispatch_write(conn->socket);
		if (r) {
			/* Closed after this dispatch, never in the middle of routing. */
			connection_overflow(conn);
			return CONNECTION_E_DEAD;
		}
		if (conn->n_queued_bytes + size > conn->bus->max_queued_bytes ||
		    conn->n_queued_fds + msg->n_fds > conn->bus->max_queued_fds)
			return CONNECTION_E_QUOTA;
	}
	if (connection_charge_message(conn, size, msg->n_fds))
		return CONNECTION_E_QUOTA;

	d = delivery_alloc();
	if (!d) {
		connection_uncharge(conn, USER_SLOT_BYTES, size);
		connection_uncharge(conn, USER_SLOT_FDS, msg->n_fds);
		return -ENOMEM;
	}
	d->msg = message_ref(msg);
	d->conn = conn;
	message_get_iovec(msg, d->iov);
	d->entry = (struct socket_entry){
		.iov = d->iov,
		.n_iov = d->iov[1].iov_len ? 2 : 1,
		.fds = msg->fds,
		.n_fds = msg->n_fds,
		.release = delivery_release,
	};
	list_init(&d->entry.link);
	conn->n_queued_bytes += size;
	conn->n_queued_fds += msg->n_fds;
	r = socket_queue(conn->socket, &d->entry);
	if (r) {
		/* release is not called on failure: undo by hand. */
		conn->n_queued_bytes -= size;
		conn->n_queued_fds -= msg->n_fds;
		connection_uncharge(conn, USER_SLOT_BYTES, size);
		connection_uncharge(conn, USER_SLOT_FDS, msg->n_fds);
		message_unref(d->msg);
		delivery_recycle(d);
		return r < 0 ? r : CONNECTION_E_QUOTA;
	}
	if (conn->n_queued_bytes > conn->peak_queued_bytes)
		conn->peak_queued_bytes = conn->n_queued_bytes;
	if (conn->n_queued_fds > conn->peak_queued_fds)
		conn->peak_queued_fds = conn->n_queued_fds;
	conn->n_queued_msgs++;
	conn->n_outgoing++;
	if (!conn->bus->dispatching_input)
		bus_schedule_flush(conn->bus, conn);
	else if (!list_node_is_linked(&conn->flush_link))
		list_append(&conn->bus->flush_list, &conn->flush_link);
	return 0;
}

void connection_flush(struct connection *conn)
{
	int r;

	if (conn->closed)
		return;
	r = socket_dispatch_write(conn->socket);
	if (r) {
		connection_close(conn, r > 0 ? NULL : "write failed");
		return;
	}
	connection_update_events(conn);
}

/*
 * The groups of a uid from the user database (primary first), for an
 * identity that did not come with the socket (DBUS_COOKIE_SHA1, TCP), as
 * dbus-daemon looks them up. An unknown user has none.
 */
static int groups_from_user_db(uid_t uid, uint32_t **gidsp, size_t *np)
{
	struct passwd pw, *res = NULL;
	_cleanup_free_ char *buf = NULL;
	_cleanup_free_ gid_t *groups = NULL;
	uint32_t *gids;
	int ngroups = 64;

	*gidsp = NULL;
	*np = 0;
	buf = malloc(16384);
	if (!buf)
		return -ENOMEM;
	if (getpwuid_r(uid, &pw, buf, 16384, &res) || !res)
		return 0;
	for (;;) {
		gid_t *g = realloc(groups, (size_t)ngroups * sizeof(*g));
		int k = ngroups;

		if (!g)
			return -ENOMEM;
		groups = g;
		if (getgrouplist(pw.pw_name, pw.pw_gid, groups, &k) >= 0) {
			ngroups = k;
			break;
		}
		if (k <= ngroups || k > 65536)
			return 0;
		ngroups = k;
	}
	gids = calloc((size_t)ngroups + 1, sizeof(*gids));
	if (!gids)
		return -ENOMEM;
	gids[(*np)++] = (uint32_t)pw.pw_gid;
	for (int i = 0; i < ngroups; i++)
		if (groups[i] != pw.pw_gid)
			gids[(*np)++] = (uint32_t)groups[i];
	*gidsp = gids;
	return 0;
}

int connection_setup_policy(struct connection *conn)
{
	const struct socket_creds *cr = socket_get_creds(conn->socket);
	struct bus *bus = conn->bus;
	_cleanup_free_ uint32_t *gids = NULL;
	const struct bus_policy_rule *rule = NULL;
	size_t n = 0;
	int r;

	conn->policy = bus_client_policy_free(conn->policy);
	if (!bus->policy)
		return 0;

	if (conn->socket_identity) {
		/* The primary group first, then the supplementary ones. */
		gids = calloc(cr->n_groups + 1, sizeof(*gids));
		if (!gids)
			return -ENOMEM;
		gids[n++] = (uint32_t)cr->gid;
		for (size_t i = 0; i < cr->n_groups; i++)
			if (cr->groups[i] != cr->gid)
				gids[n++] = (uint32_t)cr->groups[i];
	} else if (conn->uid != (uid_t)-1) {
		r = groups_from_user_db(conn->uid, &gids, &n);
		if (r < 0)
			return r;
	}

	/* Anonymous clients have no identity to check; the config allowed them. */
	if (!conn->anonymous &&
	    !bus_policy_check_connect(bus->policy, (uint32_t)conn->uid, gids, n,
				      (uint32_t)bus->uid, &rule))
		return 1;
	/* at_console: decided now (connect, reload), as dbus-daemon; see conf/console.h */
	r = bus_client_policy_new(&conn->policy, bus->policy, (uint32_t)conn->uid, gids, n,
				  conn->uid != (uid_t)-1 &&
				  bus_policy_uid_at_console(bus->policy, (uint32_t)conn->uid) > 0);
	return r < 0 ? r : 0;
}

/*
 * The home directory of this process' user: $HOME when it is that user's
 * directory (as libdbus and GDBus clients use it), else the user database's.
 */
static char *own_home(void)
{
	const char *env = getenv("HOME");
	struct passwd pw, *res = NULL;
	char buf[4096];
	struct stat st;

	if (env && env[0] == '/' && stat(env, &st) == 0 && st.st_uid == geteuid())
		return strdup(env);
	if (getpwuid_r(geteuid(), &pw, buf, sizeof(buf), &res) || !res || !res->pw_dir)
		return NULL;
	return strdup(res->pw_dir);
}

/*
 * DBUS_COOKIE_SHA1 cookies: the keyring is in the home directory of the
 * user the client names, and only this process' own user is vouched for
 * (another user's home is theirs to tamper with, as libdbus reasons).
 */
static int connection_cookie_source(void *userdata, const char *identity,
				    struct sasl_cookie *cookie)
{
	_cleanup_free_ char *home = NULL, *dir = NULL;
	struct keyring_cookie kc;
	unsigned long long v = 0;
	uid_t uid;
	int r;

	(void)userdata;
	if (identity[0] >= '0' && identity[0] <= '9') {
		for (const char *p = identity; *p; p++) {
			if (*p < '0' || *p > '9' || v > (uid_t)-1)
				return 1;
			v = v * 10 + (unsigned long long)(*p - '0');
		}
		if (v >= (uid_t)-1)
			return 1;
		uid = (uid_t)v;
	} else {
		struct passwd pw, *res = NULL;
		char buf[4096];

		if (getpwnam_r(identity, &pw, buf, sizeof(buf), &res) || !res)
			return 1;
		uid = res->pw_uid;
	}
	if (uid != geteuid())
		return 1;

	home = own_home();
	if (!home)
		return 1;
	if (asprintf(&dir, "%s/.dbus-keyrings", home) < 0) {
		dir = NULL;
		return -ENOMEM;
	}
	r = keyring_get_cookie(dir, KEYRING_CONTEXT_DEFAULT, (int64_t)time(NULL), &kc);
	if (r < 0 && r != -ENOMEM)
		r = 1;
	if (r)
		goto out;
	if (strlen(kc.secret) > SASL_COOKIE_SECRET_MAX) {
		r = 1;
		goto out;
	}
	cookie->uid = uid;
	snprintf(cookie->context, sizeof(cookie->context), "%s", KEYRING_CONTEXT_DEFAULT);
	cookie->id = kc.id;
	memcpy(cookie->secret, kc.secret, strlen(kc.secret) + 1);
out:
	explicit_bzero(&kc, sizeof(kc));
	return r;
}

int connection_get_pidfd(const struct connection *conn)
{
	return socket_get_creds(conn->socket)->pidfd;
}

void connection_set_native_pid(struct connection *conn, pid_t pid)
{
	int fd;

	/* The bootstrapping process itself: its SO_PEERPIDFD names it already. */
	if (pid <= 0 || (pid == conn->pid && connection_get_pidfd(conn) >= 0))
		return;
	fd = (int)syscall(SYS_pidfd_open, pid, 0);
	socket_set_pidfd(conn->socket, fd >= 0 ? fd : -1);
	conn->pid = pid;
}

/*
 * nonce-tcp: the first ADDRESS_NONCE_LEN bytes must be the listener's nonce
 * (compared without an early exit). Returns 0 (done or more needed), 1 when
 * the connection was closed for a wrong nonce.
 */
static int connection_check_nonce(struct connection *conn)
{
	const uint8_t *data;
	size_t n, k;

	data = socket_peek_raw(conn->socket, &n);
	k = MIN(n, (size_t)conn->nonce_left);
	for (size_t i = 0; i < k; i++)
		conn->nonce_diff |= data[i] ^ conn->nonce[ADDRESS_NONCE_LEN - conn->nonce_left + i];
	socket_consume_raw(conn->socket, k);
	conn->nonce_left -= (uint8_t)k;
	if (conn->nonce_left == 0) {
		explicit_bzero(conn->nonce, sizeof(conn->nonce));
		if (conn->nonce_diff) {
			connection_close(conn, "wrong nonce (nonce-tcp)");
			return 1;
		}
	}
	return 0;
}

/* Send pending SASL replies (small; copied into the queue). */
static int connection_flush_sasl(struct connection *conn)
{
	const char *out;
	size_t n;
	int r;

	out = sasl_server_peek_output(&conn->sasl, &n);
	if (!n)
		return 0;
	r = socket_queue_copy(conn->socket, out, n);
	if (r < 0)
		return r;
	sasl_server_consume_output(&conn->sasl, n);
	bus_schedule_flush(conn->bus, conn);
	return 0;
}

/* Feed raw input to the SASL server. Returns 0, 1 (closed) or -errno. */
static int connection_authenticate(struct connection *conn)
{
	const void *data;
	size_t n, consumed = 0;
	int r;

	if (conn->nonce_left) {
		r = connection_check_nonce(conn);
		if (r || conn->nonce_left)
			return r;
	}
	data = socket_peek_raw(conn->socket, &n);
	if (!n)
		return 0;
	r = sasl_server_feed(&conn->sasl, data, n, &consumed);
	socket_consume_raw(conn->socket, consumed);
	if (r < 0)
		return r;
	if (connection_flush_sasl(conn) < 0)
		return -ENOMEM;
	if (r == SASL_SERVER_FAILED) {
		const char *why = sasl_server_get_failure(&conn->sasl);

		/* Let the last ERROR/REJECTED reach the client, then close. */
		connection_flush(conn);
		connection_close(conn, why ? why : "authentication failed");
		return 1;
	}
	if (r == SASL_SERVER_DONE) {
		uid_t uid = sasl_server_get_uid(&conn->sasl);

		conn->authenticated = true;
		conn->unix_fds = sasl_server_unix_fd_agreed(&conn->sasl);
		conn->anonymous = sasl_server_is_anonymous(&conn->sasl);
		if (uid != (uid_t)-1 && uid != conn->uid) {
			/*
			 * DBUS_COOKIE_SHA1: the identity is the one proven, not
			 * the socket's (a TCP peer has none). Nothing is charged
			 * to the connection before Hello: move it to its user.
			 */
			struct user *u = NULL;

			r = user_registry_ref_user(conn->bus->users, &u, uid);
			if (r < 0)
				return r;
			for (int i = 0; i < _USER_SLOT_N; i++)
				user_charge_release(&conn->charges[i]);
			user_unref(conn->user);
			conn->user = u;
			conn->uid = uid;
			conn->socket_identity = false;
		}
		/* Its buffers are not needed any more (memory per connection). */
		sasl_server_deinit(&conn->sasl);
		socket_start_framing(conn->socket);
		conn->auth_timer = sd_event_source_disable_unref(conn->auth_timer);
		bus_incomplete_done(conn->bus);
		r = connection_setup_policy(conn);
		if (r < 0)
			return r;
		if (r) {
			connection_close(conn, "the bus policy does not allow this user to connect");
			return 1;
		}
	}
	return 0;
}

static void close_fds(int *fds, size_t n)
{
	for (size_t i = 0; i < n; i++)
		safe_close(fds[i]);
	free(fds);
}

/* Route @msg, for which message_parse*() returned @r (> 0: invalid); drops @msg. */
static int connection_dispatch_parsed(struct connection *conn, struct message *msg, int r)
{
	if (r > 0) {
		log_info("disconnecting %s: invalid message: %s",
			 conn->registered ? connection_name(conn) : "(inactive)",
			 dc_invalid_to_string(r));
		connection_close(conn, NULL);
	} else if (r == 0) {
		size_t size = message_get_size(msg), n_fds_in = msg->n_fds;

		conn->n_incoming++;
		conn->bus->n_messages++;
		/* Debug.Stats: what the bus holds of its messages (IncomingBytes). */
		conn->n_dispatching_bytes += size;
		conn->n_dispatching_fds += n_fds_in;
		if (conn->n_dispatching_bytes > conn->peak_dispatching_bytes)
			conn->peak_dispatching_bytes = conn->n_dispatching_bytes;
		if (conn->n_dispatching_fds > conn->peak_dispatching_fds)
			conn->peak_dispatching_fds = conn->n_dispatching_fds;
		r = router_dispatch(conn, msg);
		conn->n_dispatching_bytes -= size;
		conn->n_dispatching_fds -= n_fds_in;
	}
	message_unref(msg);
	return r;
}

int connection_dispatch_incoming(struct connection *conn, struct message *msg, const int *fds,
				 size_t n_fds)
{
	/* The message owns the fds from here on, in all cases. */
	return connection_dispatch_parsed(conn, msg, message_parse(msg, fds, n_fds));
}

/*
 * The fds a client sends on its socket form one stream, as for dbus-daemon
 * (libdbus' message loader): a message takes its UNIX_FDS from the front of
 * what arrived so far, and fds beyond that wait in conn->spare_fds for the
 * next messages that declare fds. Fewer than UNIX_FDS is a protocol error,
 * and so are more than max_message_unix_fds waiting (dbus-daemon's loader
 * holds no more); waiting fds count for pending_fd_timeout and are closed
 * with the connection. Takes @msg, the fds and the @fds array.
 */
static int connection_dispatch_frame(struct connection *conn, struct message *msg, int *fds,
				     size_t n_fds)
{
	int *all = fds;
	size_t n_all = n_fds, n_taken;
	int r;

	if (conn->n_spare_fds + n_fds > (size_t)conn->bus->limits.max_message_unix_fds) {
		close_fds(fds, n_fds);
		message_unref(msg);
		connection_close(conn, "sent more file descriptors than max_message_unix_fds");
		return 1;
	}
	if (conn->n_spare_fds > 0) {
		if (n_fds > 0) {
			int *v = realloc(conn->spare_fds,
					 (conn->n_spare_fds + n_fds) * sizeof(*v));

			if (!v) {
				close_fds(fds, n_fds);
				message_unref(msg);
				return -ENOMEM;
			}
			memcpy(v + conn->n_spare_fds, fds, n_fds * sizeof(*v));
			conn->spare_fds = v;
			conn->n_spare_fds += n_fds;
			free(fds);
		}
		all = steal_ptr(conn->spare_fds);
		n_all = conn->n_spare_fds;
		conn->n_spare_fds = 0;
	}

	/* The message owns the first n_taken fds, in all cases. */
	r = message_parse_queued(msg, all, n_all, &n_taken);
	if (n_taken < n_all) {
		memmove(all, all + n_taken, (n_all - n_taken) * sizeof(*all));
		conn->spare_fds = all;
		conn->n_spare_fds = n_all - n_taken;
	} else {
		free(all);
	}
	return connection_dispatch_parsed(conn, msg, r);
}

/* Take and dispatch every complete message. Returns 0, 1 (closed) or -errno. */
static int connection_read_frames(struct connection *conn)
{
	struct bus *bus = conn->bus;
	int r;

	for (;;) {
		struct message *msg = NULL;
		int *fds = NULL;
		size_t size, n_fds = 0;

		r = socket_peek_frame(conn->socket, &size);
		if (r == SOCKET_E_AGAIN) {
			const void *data;
			size_t n;

			/* Refuse an oversized message as soon as its header is in. */
			data = socket_peek_raw(conn->socket, &n);
			if (n >= SOCKET_FRAME_HEADER &&
			    (socket_frame_size(data, &size) ||
			     size > (size_t)bus->limits.max_message_size)) {
				connection_close(conn, "message exceeds max_message_size");
				return 1;
			}
			return 0;
		}
		if (r > 0) {
			connection_close(conn, "invalid message framing");
			return 1;
		}
		if (r < 0)
			return r;
		if (size > (size_t)bus->limits.max_message_size) {
			connection_close(conn, "message exceeds max_message_size");
			return 1;
		}

		if (size > SOCKET_FRAME_LARGE) {
			/*
			 * A large frame arrived in a buffer of its own: the
			 * message adopts it, its bytes are never copied.
			 */
			struct socket_frame frame;

			r = socket_read_frame(conn->socket, &frame);
			if (!r) {
				r = message_new_adopted(&msg, frame.data, frame.n_data);
				if (r < 0) {
					socket_frame_deinit(&frame);
					return r;
				}
				fds = steal_ptr(frame.fds);
				n_fds = frame.n_fds;
			}
		} else {
			/* One copy: from the socket buffer straight into the message. */
			r = message_new_incoming(&msg, size);
			if (r < 0)
				return r;
			r = socket_take_frame(conn->socket, message_incoming_data(msg), &fds,
					      &n_fds);
		}
		if (r) {
			message_unref(msg);
			if (r < 0)
				return r;
			connection_close(conn, "invalid message framing");
			return 1;
		}
		if (n_fds && !conn->unix_fds) {
			close_fds(fds, n_fds);
			message_unref(msg);
			connection_close(conn, "sent file descriptors without negotiating them");
			return 1;
		}
		r = connection_dispatch_frame(conn, msg, fds, n_fds);
		if (r)
			return r;
		if (conn->closed)
			return 1;
	}
}

static int connection_pending_fd_timeout(sd_event_source *s, uint64_t usec, void *userdata)
{
	struct connection *conn = userdata;

	connection_close(conn, "held file descriptors that no message took for longer "
			       "than pending_fd_timeout");
	return 0;
}

/*
 * pending_fd_timeout, as dbus-daemon has it: the clock starts when fds are
 * first held for an incomplete message, or wait beyond the UNIX_FDS of the
 * messages sent so far (connection_dispatch_frame()), and stops when no fds
 * are held any more; a client that keeps fds there past it is disconnected
 * (the fds count against the user's quota meanwhile).
 */
static void connection_watch_pending_fds(struct connection *conn)
{
	struct bus *bus = conn->bus;
	uint64_t now;

	if (!socket_holds_fds(conn->socket) && conn->n_spare_fds == 0) {
		conn->pending_fd_timer = sd_event_source_disable_unref(conn->pending_fd_timer);
		return;
	}
	if (conn->pending_fd_timer || bus->limits.pending_fd_timeout <= 0)
		return;
	sd_event_now(bus->event, CLOCK_MONOTONIC, &now);
	if (sd_event_add_time(bus->event, &conn->pending_fd_timer, CLOCK_MONOTONIC,
			      now + (uint64_t)bus->limits.pending_fd_timeout * 1000, 0,
			      connection_pending_fd_timeout, conn) < 0)
		/* Not fatal: the fds stay bounded by the per-user quota. */
		log_warn("cannot arm pending_fd_timeout for a connection");
}

static int connection_io_work(sd_event_source *s, int fd, uint32_t revents, void *userdata)
{
	struct connection *conn = userdata;
	int i, r;

	if (revents & EPOLLOUT) {
		connection_flush(conn);
		if (conn->closed)
			return 0;
	}

	if (revents & (EPOLLIN | EPOLLHUP | EPOLLERR)) {
		for (i = 0; i < CONNECTION_READ_BUDGET && !conn->eof; i++) {
			size_t before = socket_get_buffered_bytes(conn->socket);

			r = socket_dispatch_read(conn->socket);
			if (r == SOCKET_E_EOF) {
				conn->eof = true;
			} else if (r > 0) {
				connection_close(conn, "protocol error");
				return 0;
			} else if (r < 0) {
				connection_close(conn, "read failed");
				return 0;
			}

			if (!conn->authenticated) {
				r = connection_authenticate(conn);
				if (r)
					goto out;
			}
			if (conn->authenticated) {
				r = connection_read_frames(conn);
				if (r)
					goto out;
			}
			/* Nothing new arrived: the socket is drained for now. */
			if (socket_get_buffered_bytes(conn->socket) == before && r == 0 &&
			    !conn->eof)
				break;
			/* A short read: the next one would most likely be EAGAIN. */
			if (r == 0 && !conn->eof && socket_is_drained(conn->socket))
				break;
		}
		if (conn->eof) {
			connection_close(conn, NULL);
			return 0;
		}
		if (conn->authenticated)
			connection_watch_pending_fds(conn);
	}
	connection_update_events(conn);
	return 0;

out:
	if (r < 0)
		connection_close(conn, strerror(-r));
	return 0;
}

/*
 * Everything the input produced is written before the loop polls again: the
 * deferred flush would cost a second sd-event iteration (and epoll_wait())
 * per wakeup; batching across the messages of one read batch is kept.
 */
static int connection_io(sd_event_source *s, int fd, uint32_t revents, void *userdata)
{
	struct connection *conn = userdata;
	struct bus *bus = conn->bus;

	bus->dispatching_input = true;
	connection_io_work(s, fd, revents, userdata);
	bus->dispatching_input = false;
	/* @conn may be freed from here on. */
	bus_flush_now(bus);
	return 0;
}

static int connection_auth_timeout(sd_event_source *s, uint64_t usec, void *userdata)
{
	struct connection *conn = userdata;

	connection_close(conn, "authentication timed out");
	return 0;
}

int connection_new(struct connection **connp, struct bus *bus, int fd, const uint8_t *nonce)
{
	struct connection *conn;
	const struct socket_creds *creds;
	unsigned int flags = 0;
	uint64_t now;
	int r;

	conn = calloc(1, sizeof(*conn));
	if (!conn) {
		close(fd);
		return -ENOMEM;
	}
	conn->bus = bus;
	list_init(&conn->bus_link);
	list_init(&conn->flush_link);
	list_init(&conn->monitor_link);
	list_init(&conn->dead_link);
	list_init(&conn->overflow_link);

	r = socket_new(&conn->socket, fd);
	if (r < 0) {
		free(conn);
		return r;
	}
	creds = socket_get_creds(conn->socket);
	conn->uid = creds->uid;
	conn->pid = creds->pid;
	conn->socket_identity = creds->have_creds;
	if (nonce) {
		memcpy(conn->nonce, nonce, ADDRESS_NONCE_LEN);
		conn->nonce_left = ADDRESS_NONCE_LEN;
	}

	/* fds travel on unix sockets only; TCP has no credentials for EXTERNAL. */
	flags |= creds->have_creds ? SASL_SERVER_UNIX_FD : SASL_SERVER_NO_CREDENTIALS;
	if (bus->allow_anonymous)
		flags |= SASL_SERVER_ALLOW_ANONYMOUS;
	r = sasl_server_init(&conn->sasl, conn->uid, bus->guid, flags);
	if (r < 0)
		goto fail;
	sasl_server_set_mechanisms(&conn->sasl, bus->auth_mechs);
	sasl_server_set_cookie_source(&conn->sasl, connection_cookie_source, conn);

	/* The real id is assigned at Hello (driver_hello()). */
	name_owner_init(&conn->owner, 0);
	match_owner_init(&conn->matches, &conn->owner);
	reply_owner_init(&conn->replies, bus->replies);

	r = user_registry_ref_user(bus->users, &conn->user, conn->uid);
	if (r < 0)
		goto fail_names;

	r = sd_event_add_io(bus->event, &conn->io, socket_get_fd(conn->socket), EPOLLIN,
			    connection_io, conn);
	if (r < 0)
		goto fail_names;
	conn->io_events = EPOLLIN;

	if (bus->limits.auth_timeout > 0) {
		sd_event_now(bus->event, CLOCK_MONOTONIC, &now);
		r = sd_event_add_time(bus->event, &conn->auth_timer, CLOCK_MONOTONIC,
				      now + (uint64_t)bus->limits.auth_timeout * 1000, 0,
				      connection_auth_timeout, conn);
		if (r < 0)
			goto fail_names;
	}

	list_append(&bus->connections, &conn->bus_link);
	bus->n_incomplete++;
	*connp = conn;
	return 0;

fail_names:
	conn->io = sd_event_source_disable_unref(conn->io);
	conn->auth_timer = sd_event_source_disable_unref(conn->auth_timer);
	for (int i = 0; i < _USER_SLOT_N; i++)
		user_charge_release(&conn->charges[i]);
	if (conn->user)
		conn->user = user_unref(conn->user);
	reply_owner_deinit(&conn->replies);
	match_owner_deinit(&conn->matches);
	name_owner_deinit(&conn->owner);
fail:
	sasl_server_deinit(&conn->sasl);
	socket_free(conn->socket);
	free(conn);
	return r;
}

void connection_close(struct connection *conn, const char *reason)
{
	struct bus *bus = conn->bus;

	if (conn->closed)
		return;
	conn->closed = true;

	if (reason)
		log_info("closing connection %s (uid %u pid %d): %s",
			 conn->registered ? connection_name(conn) : "(inactive)",
			 (unsigned)conn->uid, (int)conn->pid, reason);

	conn->io = sd_event_source_disable_unref(conn->io);
	conn->auth_timer = sd_event_source_disable_unref(conn->auth_timer);
	conn->pending_fd_timer = sd_event_source_disable_unref(conn->pending_fd_timer);
	close_fds(steal_ptr(conn->spare_fds), conn->n_spare_fds);
	conn->n_spare_fds = 0;
	list_unlink(&conn->flush_link);
	list_unlink(&conn->overflow_link);
	if (!conn->authenticated)
		bus_incomplete_done(bus);

	/* The client sees its connection node destroyed. */
	conn->native = native_conn_free(conn->native);
	/* D-Bus state: the router emits NameOwnerChanged, NoReply, ... */
	router_connection_gone(conn);

	list_unlink(&conn->bus_link);
	list_append(&bus->dead_list, &conn->dead_link);
	bus_schedule_flush(bus, NULL);
}

struct connection *connection_free(struct connection *conn)
{
	if (!conn)
		return NULL;
	list_unlink(&conn->dead_link);
	list_unlink(&conn->bus_link);
	list_unlink(&conn->flush_link);
	list_unlink(&conn->monitor_link);
	list_unlink(&conn->overflow_link);
	conn->io = sd_event_source_disable_unref(conn->io);
	conn->auth_timer = sd_event_source_disable_unref(conn->auth_timer);
	conn->pending_fd_timer = sd_event_source_disable_unref(conn->pending_fd_timer);
	close_fds(steal_ptr(conn->spare_fds), conn->n_spare_fds);
	conn->n_spare_fds = 0;
	/* Releases queued deliveries, which uncharge conn->user. */
	conn->socket = socket_free(conn->socket);
	sasl_server_deinit(&conn->sasl);
	conn->policy = bus_client_policy_free(conn->policy);
	reply_owner_deinit(&conn->replies);
	match_owner_deinit(&conn->matches);
	name_owner_deinit(&conn->owner);
	for (int i = 0; i < _USER_SLOT_N; i++)
		user_charge_release(&conn->charges[i]);
	if (conn->user)
		conn->user = user_unref(conn->user);
	free(conn);
	return NULL;
}
