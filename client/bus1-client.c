/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * libbus1-client: the native D-Bus client (see bus1-client.h and
 * docs/native-protocol.md). Messages are dbus-compat's struct message;
 * the transport after the bootstrap is one bus1 peer.
 */

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
#include "dbus-compat/address.h"
#include "dbus-compat/message.h"
#include "dbus-compat/native-protocol.h"
#include "dbus-compat/protocol.h"
#include "dbus-compat/sasl-client.h"
#include "util/io.h"
#include "util/macro.h"
#include "util/time.h"

#define B1C_DEFAULT_TIMEOUT (25ULL * 1000 * 1000)
/* Local bounds: a client is not a bus, but bad input must not grow memory. */
#define B1C_MAX_QUEUED 65536
#define B1C_MAX_FDS 253

struct b1c_message {
	unsigned long n_refs;
	struct message *msg;		/* sealed or received; NULL while building */
	bool building;
	struct message_builder b;
	char *strs[6];			/* owned header strings of the builder */
	struct b1c_message *call;	/* reply: keeps the call's strings alive */
	int *fds;			/* building: attached fds (owned) */
	size_t n_fds;
	bool reader_ready;
	struct dc_reader reader;
	char *error_text;
	uint64_t direct_reply;		/* a direct call: our handle to the caller's direct node */
};

struct b1c_handler {
	b1c_handler_t fn;
	void *userdata;
	char *path;			/* object path filter */
	/* match filter (NULL: any) */
	int type;
	char *sender;
	char *interface;
	char *member;
	uint32_t serial;		/* pending call */
	struct b1c_message *call;	/* pending call that went direct: resent once */
};

struct handler_vec {
	struct b1c_handler *v;
	size_t n;
	size_t cap;
};

/* The direct path (docs/native-protocol.md). */
struct direct_name {
	char *name;
	uint64_t handle;		/* 0: the broker said no, use the broker */
};

struct direct_msg {
	const struct message *msg;	/* received directly, not dispatched yet */
	uint64_t reply;			/* handle to the caller's direct node (0: none) */
};

struct direct_call {
	uint32_t serial;		/* a direct call waiting for its reply */
	uint64_t handle;		/* sent there */
};

#define B1C_MAX_DIRECT 1024

struct b1c_bus {
	int sock;			/* the bootstrap socket: kept as the lifeline */
	struct b1_peer *peer;
	uint64_t bus_handle;		/* our handle to our connection node at the broker */
	uint64_t node;			/* our client node */
	uint64_t direct_node;		/* our direct node (0: the broker has none for us) */
	char *unique_name;
	uint32_t serial;
	bool dead;

	bool direct;			/* b1c_bus_set_direct() */
	struct direct_name *dnames;	/* resolved names (cache) */
	size_t n_dnames;
	struct direct_msg *dmsgs;
	size_t n_dmsgs;
	struct direct_call *dcalls;
	size_t n_dcalls;
	uint32_t *uids;			/* who may call us directly (published by the broker) */
	size_t n_uids;
	char **names;			/* well-known names we own (NameAcquired/NameLost) */
	size_t n_names;
	uint32_t stash_serial;		/* a driver reply that carried a handle ... */
	uint64_t stash_handle;		/* ... and that handle */
	bool last_direct;		/* the last b1c_bus_send() went the direct path */
	struct message **synth;		/* NoReply errors made up for lost direct calls */
	size_t n_synth;

	struct message **queue;		/* received, not yet dispatched (FIFO) */
	size_t q_head;
	size_t q_n;
	size_t q_cap;

	struct handler_vec filters;
	struct handler_vec objects;
	struct handler_vec matches;
	struct handler_vec pending;
};

/* ---------------------------------------------------------------- helpers */

static int handler_vec_add(struct handler_vec *hv, struct b1c_handler *h)
{
	if (hv->n == hv->cap) {
		size_t cap = hv->cap ? hv->cap * 2 : 8;
		struct b1c_handler *v = realloc(hv->v, cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		hv->v = v;
		hv->cap = cap;
	}
	hv->v[hv->n++] = *h;
	return 0;
}

static void handler_free(struct b1c_handler *h)
{
	b1c_message_unref(h->call);
	free(h->path);
	free(h->sender);
	free(h->interface);
	free(h->member);
}

static void handler_vec_free(struct handler_vec *hv)
{
	for (size_t i = 0; i < hv->n; i++)
		handler_free(&hv->v[i]);
	free(hv->v);
}

static int read_all(int fd, void *p, size_t n)
{
	while (n) {
		ssize_t k = read(fd, p, n);

		if (k < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (k == 0)
			return -ECONNRESET;
		p = (char *)p + k;
		n -= (size_t)k;
	}
	return 0;
}

/* ---------------------------------------------------------------- messages */

static struct b1c_message *message_wrap(struct message *msg)
{
	struct b1c_message *m = calloc(1, sizeof(*m));

	if (!m)
		return NULL;
	m->n_refs = 1;
	m->msg = msg;
	return m;
}

static int builder_new(struct b1c_message **mp, uint8_t type, const char *signature)
{
	struct b1c_message *m = calloc(1, sizeof(*m));

	if (!m)
		return -ENOMEM;
	m->n_refs = 1;
	m->building = true;
	m->strs[5] = strdup(signature ? signature : "");
	if (!m->strs[5]) {
		free(m);
		return -ENOMEM;
	}
	message_builder_init(&m->b, type, m->strs[5]);
	*mp = m;
	return 0;
}

/* Keep a copy of @s in slot @i (builders keep pointers until seal). */
static int keep_str(struct b1c_message *m, int i, const char *s, const char **field)
{
	if (!s) {
		*field = NULL;
		return 0;
	}
	m->strs[i] = strdup(s);
	if (!m->strs[i])
		return -ENOMEM;
	*field = m->strs[i];
	return 0;
}

int b1c_message_new_method_call(struct b1c_message **mp, const char *destination,
				const char *path, const char *interface, const char *member,
				const char *signature)
{
	struct b1c_message *m;
	int r;

	if (!path || !member)
		return -EINVAL;
	r = builder_new(&m, DC_MESSAGE_METHOD_CALL, signature);
	if (r < 0)
		return r;
	if (keep_str(m, 0, destination, &m->b.destination) < 0 ||
	    keep_str(m, 1, path, &m->b.path) < 0 ||
	    keep_str(m, 2, interface, &m->b.interface) < 0 ||
	    keep_str(m, 3, member, &m->b.member) < 0) {
		b1c_message_unref(m);
		return -ENOMEM;
	}
	*mp = m;
	return 0;
}

int b1c_message_new_signal(struct b1c_message **mp, const char *path, const char *interface,
			   const char *member, const char *signature)
{
	struct b1c_message *m;
	int r;

	if (!path || !interface || !member)
		return -EINVAL;
	r = builder_new(&m, DC_MESSAGE_SIGNAL, signature);
	if (r < 0)
		return r;
	if (keep_str(m, 1, path, &m->b.path) < 0 ||
	    keep_str(m, 2, interface, &m->b.interface) < 0 ||
	    keep_str(m, 3, member, &m->b.member) < 0) {
		b1c_message_unref(m);
		return -ENOMEM;
	}
	m->b.flags |= DC_FLAG_NO_REPLY_EXPECTED;
	*mp = m;
	return 0;
}

int b1c_message_new_method_return(struct b1c_message **mp, struct b1c_message *call,
				  const char *signature)
{
	struct b1c_message *m;
	int r;

	if (!call || !call->msg || call->msg->type != DC_MESSAGE_METHOD_CALL)
		return -EINVAL;
	r = builder_new(&m, DC_MESSAGE_METHOD_RETURN, signature);
	if (r < 0)
		return r;
	message_builder_init_method_return(&m->b, call->msg, m->strs[5]);
	m->call = b1c_message_ref(call);
	m->direct_reply = call->direct_reply;
	*mp = m;
	return 0;
}

int b1c_message_new_error(struct b1c_message **mp, struct b1c_message *call,
			  const char *name, const char *text)
{
	struct b1c_message *m;
	int r;

	if (!call || !call->msg || call->msg->type != DC_MESSAGE_METHOD_CALL || !name)
		return -EINVAL;
	r = builder_new(&m, DC_MESSAGE_ERROR, "s");
	if (r < 0)
		return r;
	if (keep_str(m, 4, name, &m->b.error_name) < 0) {
		b1c_message_unref(m);
		return -ENOMEM;
	}
	message_builder_init_error(&m->b, call->msg, m->strs[4], m->strs[5]);
	m->call = b1c_message_ref(call);
	m->direct_reply = call->direct_reply;
	dc_writer_write(&m->b.body, "s", text ? text : "");
	*mp = m;
	return 0;
}

struct b1c_message *b1c_message_ref(struct b1c_message *m)
{
	if (m)
		m->n_refs++;
	return m;
}

struct b1c_message *b1c_message_unref(struct b1c_message *m)
{
	if (!m || --m->n_refs > 0)
		return NULL;
	if (m->building)
		message_builder_deinit(&m->b);
	for (size_t i = 0; i < ARRAY_SIZE(m->strs); i++)
		free(m->strs[i]);
	for (size_t i = 0; i < m->n_fds; i++)
		close(m->fds[i]);
	free(m->fds);
	b1c_message_unref(m->call);
	message_unref(m->msg);
	free(m->error_text);
	free(m);
	return NULL;
}

int b1c_message_append(struct b1c_message *m, const char *types, ...)
{
	va_list ap;
	int r;

	if (!m->building)
		return -EPERM;
	va_start(ap, types);
	r = dc_writer_writev(&m->b.body, types, ap);
	va_end(ap);
	return r;
}

int b1c_message_open(struct b1c_message *m, char type, const char *contents)
{
	if (!m->building)
		return -EPERM;
	return dc_writer_open(&m->b.body, type, contents);
}

int b1c_message_close(struct b1c_message *m)
{
	if (!m->building)
		return -EPERM;
	return dc_writer_close(&m->b.body);
}

int b1c_message_append_fd(struct b1c_message *m, int fd)
{
	int *fds;
	int copy;
	uint32_t index;

	if (!m->building)
		return -EPERM;
	if (m->n_fds >= B1C_MAX_FDS)
		return -E2BIG;
	fds = realloc(m->fds, (m->n_fds + 1) * sizeof(*fds));
	if (!fds)
		return -ENOMEM;
	m->fds = fds;
	copy = fcntl(fd, F_DUPFD_CLOEXEC, 3);
	if (copy < 0)
		return -errno;
	index = (uint32_t)m->n_fds;
	m->fds[m->n_fds++] = copy;
	return dc_writer_write(&m->b.body, "h", index);
}

void b1c_message_set_no_reply(struct b1c_message *m, bool no_reply)
{
	if (!m->building)
		return;
	if (no_reply)
		m->b.flags |= DC_FLAG_NO_REPLY_EXPECTED;
	else
		m->b.flags &= (uint8_t)~DC_FLAG_NO_REPLY_EXPECTED;
}

/* Seal a message being built; attaches its fds (UNIX_FDS through a re-stitch). */
static int message_seal(struct b1c_message *m, uint32_t serial)
{
	struct message *msg = NULL, *with_fds = NULL;
	int r;

	if (!m->building)
		return -EALREADY;
	r = message_builder_seal(&m->b, serial, &msg);
	if (r < 0)
		return r;
	message_builder_deinit(&m->b);
	m->building = false;
	if (m->n_fds) {
		/*
		 * The builder has no UNIX_FDS field; re-writing the header with
		 * the fds attached adds it (message_stitch_sender() writes every
		 * known field). The fds move into the message.
		 */
		msg->fds = m->fds;
		msg->n_fds = m->n_fds;
		msg->unix_fds = (uint32_t)m->n_fds;
		m->fds = NULL;
		m->n_fds = 0;
		r = message_stitch_sender(msg, NULL, &with_fds);
		if (r < 0) {
			message_unref(msg);
			return r;
		}
		message_unref(msg);
		msg = with_fds;
	}
	m->msg = msg;
	return 0;
}

static int reader_ready(struct b1c_message *m)
{
	int r;

	if (!m->msg)
		return -EPERM;
	if (m->reader_ready)
		return 0;
	r = message_get_body_reader(m->msg, &m->reader);
	if (r)
		return r < 0 ? r : -EBADMSG;
	m->reader_ready = true;
	return 0;
}

int b1c_message_rewind(struct b1c_message *m)
{
	m->reader_ready = false;
	return reader_ready(m);
}

int b1c_message_read(struct b1c_message *m, const char *types, ...)
{
	va_list ap;
	int r;

	r = reader_ready(m);
	if (r < 0)
		return r;
	va_start(ap, types);
	for (const char *t = types; *t; t++) {
		void *p = va_arg(ap, void *);

		if (*t == 'h') {
			uint32_t index;

			r = dc_reader_read_basic(&m->reader, 'h', &index);
			if (r == 0 && p) {
				if (index >= m->msg->n_fds) {
					r = -EBADMSG;
					break;
				}
				*(int *)p = m->msg->fds[index];
			}
		} else {
			r = dc_reader_read_basic(&m->reader, *t, p);
		}
		if (r) {
			r = r < 0 ? r : -EBADMSG;
			break;
		}
	}
	va_end(ap);
	return r;
}

char b1c_message_peek(struct b1c_message *m, const char **signature)
{
	const char *sig = NULL;

	if (reader_ready(m) < 0)
		return 0;
	if (signature) {
		size_t n = dc_reader_peek_signature(&m->reader, &sig);

		*signature = n ? sig : "";
	}
	return dc_reader_peek(&m->reader);
}

int b1c_message_enter(struct b1c_message *m, char type)
{
	int r = reader_ready(m);

	if (r < 0)
		return r;
	r = dc_reader_enter(&m->reader, type);
	return r > 0 ? -EBADMSG : r;
}

int b1c_message_exit(struct b1c_message *m)
{
	int r = reader_ready(m);

	if (r < 0)
		return r;
	r = dc_reader_exit(&m->reader);
	return r > 0 ? -EBADMSG : r;
}

int b1c_message_skip(struct b1c_message *m)
{
	int r = reader_ready(m);

	if (r < 0)
		return r;
	r = dc_reader_skip(&m->reader);
	return r > 0 ? -EBADMSG : r;
}

int b1c_message_get_type(const struct b1c_message *m)
{
	return m->msg ? m->msg->type : m->b.type;
}

uint32_t b1c_message_get_serial(const struct b1c_message *m)
{
	return m->msg ? m->msg->serial : 0;
}

uint32_t b1c_message_get_reply_serial(const struct b1c_message *m)
{
	return m->msg ? m->msg->reply_serial : 0;
}

bool b1c_message_expects_reply(const struct b1c_message *m)
{
	return m->msg && message_expects_reply(m->msg);
}

#define GETTER(field)								\
	const char *b1c_message_get_##field(const struct b1c_message *m)	\
	{									\
		return m->msg ? m->msg->field : NULL;				\
	}
GETTER(sender)
GETTER(destination)
GETTER(path)
GETTER(interface)
GETTER(member)
GETTER(error_name)

const char *b1c_message_get_signature(const struct b1c_message *m)
{
	return m->msg ? m->msg->signature : m->b.signature;
}

const char *b1c_message_get_error_text(struct b1c_message *m)
{
	struct dc_reader r;
	const char *s = NULL;

	if (m->error_text)
		return m->error_text;
	if (!m->msg || message_get_body_reader(m->msg, &r))
		return "";
	if (m->msg->signature[0] != 's' || dc_reader_read(&r, "s", &s) || !s)
		return "";
	m->error_text = strdup(s);
	return m->error_text ? m->error_text : "";
}

/* --------------------------------------------------------------- transport */

static int bus_send_msg(struct b1c_bus *bus, const struct message *msg)
{
	struct iovec iov[2];

	if (bus->dead)
		return -ECONNRESET;
	message_get_iovec(msg, iov);
	return b1_peer_send(bus->peer, 0, &bus->bus_handle, 1, NULL, iov,
			    iov[1].iov_len ? 2 : 1, NULL, 0, msg->fds, msg->n_fds);
}

/* ------------------------------------------------------------ direct path */

static bool is_unique_or_wellknown(const char *name)
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
	free(bus->dnames[i].name);
	bus->dnames[i] = bus->dnames[--bus->n_dnames];
}

/* Forget every name resolved to @handle (0: forget @name only). */
static void dname_forget(struct b1c_bus *bus, const char *name, uint64_t handle)
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

static bool uid_allowed(const struct b1c_bus *bus, uint32_t uid)
{
	for (size_t i = 0; i < bus->n_uids; i++)
		if (bus->uids[i] == uid)
			return true;
	return false;
}

static bool owns_name(const struct b1c_bus *bus, const char *name)
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

static uint64_t dmsg_take(struct b1c_bus *bus, const struct message *msg)
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

static int dmsg_add(struct b1c_bus *bus, const struct message *msg, uint64_t reply)
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

static bool dcall_take(struct b1c_bus *bus, uint32_t serial)
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
static int direct_send(struct b1c_bus *bus, const struct message *msg, uint64_t handle,
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

static int wait_reply(struct b1c_bus *bus, uint32_t serial, uint64_t timeout_usec,
		      struct message **replyp);

/* The direct handle for @name: 1 (*handlep set), 0 (none: use the broker), negative errno. */
static int direct_resolve(struct b1c_bus *bus, const char *name, uint64_t *handlep)
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
	r = wait_reply(bus, serial, 0, &reply);
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
	if (enable && !bus->direct_node)
		return -EOPNOTSUPP;
	bus->direct = enable;
	return 0;
}

bool b1c_message_is_direct(const struct b1c_message *m)
{
	return m->direct_reply != 0;
}

int b1c_bus_send(struct b1c_bus *bus, struct b1c_message *m, uint32_t *serial)
{
	int r;

	if (m->building) {
		if (++bus->serial == 0)
			bus->serial = 1;
		r = message_seal(m, bus->serial);
		if (r < 0)
			return r;
	}
	bus->last_direct = false;
	if (m->direct_reply && m->msg->type != DC_MESSAGE_METHOD_CALL) {
		/* A reply to a direct call goes back the same way. */
		r = direct_send(bus, m->msg, m->direct_reply, false);
		if (r == 0)
			goto done;
		/* the caller is gone: nobody to tell */
		return r == -EHOSTUNREACH || r == -ENXIO ? 0 : r;
	}
	if (bus->direct && m->msg->type == DC_MESSAGE_METHOD_CALL &&
	    is_unique_or_wellknown(m->msg->destination)) {
		uint64_t h = 0;

		r = direct_resolve(bus, m->msg->destination, &h);
		if (r < 0)
			return r;
		if (r > 0) {
			bool expects = message_expects_reply(m->msg);

			r = direct_send(bus, m->msg, h, expects);
			if (r == 0) {
				if (expects && bus->n_dcalls < B1C_MAX_QUEUED) {
					struct direct_call *v = realloc(bus->dcalls,
						(bus->n_dcalls + 1) * sizeof(*v));

					if (!v)
						return -ENOMEM;
					bus->dcalls = v;
					v[bus->n_dcalls++] = (struct direct_call){
						.serial = m->msg->serial, .handle = h };
				}
				bus->last_direct = true;
				goto done;
			}
			if (r != -EHOSTUNREACH && r != -ENXIO)
				return r;
			/* The owner went away: forget the handle, ask the broker. */
			dname_forget(bus, NULL, h);
			b1_peer_handle_release(bus->peer, h);
		}
	}
	r = bus_send_msg(bus, m->msg);
	if (r == -EHOSTUNREACH) {
		bus->dead = true;
		r = -ECONNRESET;
	}
	if (r < 0)
		return r;
done:
	if (serial)
		*serial = m->msg->serial;
	return 0;
}

static int queue_push(struct b1c_bus *bus, struct message *msg);

/* Answer a direct call we refuse, straight back to the caller. */
static void direct_refuse(struct b1c_bus *bus, const struct message *call, uint64_t reply,
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
		(void)direct_send(bus, e, reply, false);
	message_builder_deinit(&b);
	message_unref(e);
}

/* A direct call whose callee went away: NoReply, as the broker would say. */
static int direct_lost(struct b1c_bus *bus, uint64_t handle)
{
	dname_forget(bus, NULL, handle);
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
static bool broker_notice(struct b1c_bus *bus, const struct message *msg)
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

/* Receive one message from the peer: 1 (*msgp set), 0 (none), negative errno. */
static int bus_recv(struct b1c_bus *bus, struct message **msgp)
{
	struct b1_msg bm;
	int r;

	for (;;) {
		struct message *msg = NULL;
		uint64_t keep = 0;
		bool direct;

		if (bus->dead)
			return -ECONNRESET;
		if (bus->n_synth) {
			*msgp = bus->synth[0];
			memmove(bus->synth, bus->synth + 1, --bus->n_synth * sizeof(*bus->synth));
			return 1;
		}
		r = b1_peer_recv(bus->peer, 0, &bm);
		if (r == -EAGAIN)
			return 0;
		if (r < 0)
			return r;
		/* Nobody else holding a node of ours needs no action. */
		if (bm.type == BUS1_MSG_NODE_RELEASE)
			continue;
		if (bm.type == BUS1_MSG_NODE_DESTROY) {
			if (bm.destination == bus->bus_handle) {
				bus->dead = true;
				return -ECONNRESET;
			}
			/* A direct callee went away. */
			r = direct_lost(bus, bm.destination);
			b1_peer_handle_release(bus->peer, bm.destination);
			if (r < 0)
				return r;
			continue;
		}
		direct = bus->direct_node && bm.destination == bus->direct_node;
		/* Takes the fds in all cases. */
		r = message_new_from_data(&msg, bm.data, bm.n_bytes, bm.fds, bm.n_fds);
		if (r == 0 && bm.n_handles > DC_BUS1_HANDLE_INDEX &&
		    bm.handles[DC_BUS1_HANDLE_INDEX] != BUS1_HANDLE_INVALID) {
			/*
			 * The only handles we keep: the callee's direct node in the
			 * broker's GetDirectHandle reply, the caller's in a direct call.
			 */
			if (direct ? msg->type == DC_MESSAGE_METHOD_CALL :
			    msg->type == DC_MESSAGE_METHOD_RETURN && msg->sender &&
			    !strcmp(msg->sender, DC_SERVICE_DBUS))
				keep = bm.handles[DC_BUS1_HANDLE_INDEX];
		}
		for (size_t i = 0; i < bm.n_handles; i++)
			if (bm.handles[i] != BUS1_HANDLE_INVALID && bm.handles[i] != keep)
				b1_peer_handle_release(bus->peer, bm.handles[i]);
		b1_peer_msg_release(bus->peer, &bm);
		if (r < 0)
			return r;
		if (r > 0) {
			/* Not a valid D-Bus message: dropped (say so when debugging). */
			if (getenv("B1C_DEBUG"))
				fprintf(stderr, "bus1-client: dropped an invalid message "
					"(%zu bytes, error %d)\n", (size_t)bm.n_bytes, r);
			continue;
		}
		if (!direct) {
			if (keep) {
				if (bus->stash_handle && bus->stash_handle != keep)
					b1_peer_handle_release(bus->peer, bus->stash_handle);
				bus->stash_serial = msg->reply_serial;
				bus->stash_handle = keep;
			}
			if (broker_notice(bus, msg)) {
				message_unref(msg);
				continue;
			}
			*msgp = msg;
			return 1;
		}

		/*
		 * Straight from another native client: no broker checked it. The
		 * kernel-stamped uid must be one the broker allowed, and a call must
		 * be for a name we own; replies only to our direct calls.
		 */
		if (msg->type == DC_MESSAGE_METHOD_CALL) {
			if (!bus->n_uids) {
				/* The broker revoked every handle (a policy reload). */
				direct_refuse(bus, msg, keep, DC_BUS1_ERROR_DIRECT_REVOKED,
					      "Direct handles were revoked; ask the bus again");
				message_unref(msg);
				continue;
			}
			if (!uid_allowed(bus, bm.uid)) {
				direct_refuse(bus, msg, keep, DC_ERROR_ACCESS_DENIED,
					      "The bus policy does not allow this caller");
				message_unref(msg);
				continue;
			}
			if (!owns_name(bus, msg->destination)) {
				direct_refuse(bus, msg, keep, DC_ERROR_SERVICE_UNKNOWN,
					      "The name is not owned here any more");
				message_unref(msg);
				continue;
			}
			r = dmsg_add(bus, msg, keep);
			if (r < 0) {
				message_unref(msg);
				return r;
			}
			*msgp = msg;
			return 1;
		}
		if ((msg->type == DC_MESSAGE_METHOD_RETURN || msg->type == DC_MESSAGE_ERROR) &&
		    dcall_take(bus, msg->reply_serial)) {
			*msgp = msg;
			return 1;
		}
		message_unref(msg);
	}
}

static int queue_push(struct b1c_bus *bus, struct message *msg)
{
	if (bus->q_n >= B1C_MAX_QUEUED)
		return -ENOBUFS;
	if (bus->q_n == bus->q_cap) {
		size_t cap = bus->q_cap ? bus->q_cap * 2 : 16;
		struct message **q = malloc(cap * sizeof(*q));

		if (!q)
			return -ENOMEM;
		for (size_t i = 0; i < bus->q_n; i++)
			q[i] = bus->queue[(bus->q_head + i) % bus->q_cap];
		free(bus->queue);
		bus->queue = q;
		bus->q_cap = cap;
		bus->q_head = 0;
	}
	bus->queue[(bus->q_head + bus->q_n) % bus->q_cap] = msg;
	bus->q_n++;
	return 0;
}

static struct message *queue_pop(struct b1c_bus *bus)
{
	struct message *msg;

	if (!bus->q_n)
		return NULL;
	msg = bus->queue[bus->q_head];
	bus->q_head = (bus->q_head + 1) % bus->q_cap;
	bus->q_n--;
	return msg;
}

int b1c_bus_wait(struct b1c_bus *bus, uint64_t timeout_usec)
{
	struct pollfd p[2] = {
		{ .fd = b1_peer_get_fd(bus->peer), .events = POLLIN },
		{ .fd = bus->sock, .events = POLLIN },
	};
	int timeout, r;

	if (bus->dead)
		return -ECONNRESET;
	if (bus->q_n || bus->n_synth)
		return 0;
	timeout = timeout_usec == UINT64_MAX ? -1 :
		  (int)((timeout_usec + 999) / 1000 > 0x7fffffff ? 0x7fffffff :
			(timeout_usec + 999) / 1000);
	r = poll(p, 2, timeout);
	if (r < 0)
		return errno == EINTR ? 0 : -errno;
	if (p[1].revents) {
		/* Nothing may arrive on the socket after the bootstrap: EOF = gone. */
		bus->dead = true;
		return -ECONNRESET;
	}
	return 0;
}

/* Wait for the reply to @serial; other messages are queued. */
static int wait_reply(struct b1c_bus *bus, uint32_t serial, uint64_t timeout_usec,
		      struct message **replyp)
{
	uint64_t deadline = now_usec() + (timeout_usec ? timeout_usec : B1C_DEFAULT_TIMEOUT);
	struct message *msg;
	int r;

	for (;;) {
		uint64_t now;

		r = bus_recv(bus, &msg);
		if (r < 0)
			return r;
		if (r > 0) {
			if ((msg->type == DC_MESSAGE_METHOD_RETURN ||
			     msg->type == DC_MESSAGE_ERROR) && msg->reply_serial == serial) {
				*replyp = msg;
				return 0;
			}
			r = queue_push(bus, msg);
			if (r < 0) {
				message_unref(msg);
				return r;
			}
			continue;
		}
		now = now_usec();
		if (now >= deadline)
			return -ETIMEDOUT;
		{
			struct pollfd p[2] = {
				{ .fd = b1_peer_get_fd(bus->peer), .events = POLLIN },
				{ .fd = bus->sock, .events = POLLIN },
			};

			r = poll(p, 2, (int)((deadline - now + 999) / 1000));
			if (r < 0 && errno != EINTR)
				return -errno;
			if (r > 0 && p[1].revents) {
				bus->dead = true;
				return -ECONNRESET;
			}
		}
	}
}

/*
 * @err answers the direct call @call, and the callee's library (not the
 * service) refused it: the name moved on (ServiceUnknown) or the broker
 * revoked the handles (DirectRevoked). Forget the handle; the caller resends
 * the call once, the broker deciding again. Either way the call was not run.
 */
static bool direct_retry(struct b1c_bus *bus, const struct message *call, const struct message *err)
{
	struct direct_name *d;

	if (err->type != DC_MESSAGE_ERROR || !err->sender || !err->error_name ||
	    !call->destination || !strcmp(err->sender, DC_SERVICE_DBUS))
		return false;
	if (!strcmp(err->error_name, DC_ERROR_SERVICE_UNKNOWN)) {
		dname_forget(bus, call->destination, 0);
		return true;
	}
	if (!strcmp(err->error_name, DC_BUS1_ERROR_DIRECT_REVOKED)) {
		/* Every name that leads to this callee. */
		d = dname_find(bus, call->destination);
		dname_forget(bus, call->destination, d ? d->handle : 0);
		return true;
	}
	return false;
}

int b1c_bus_call(struct b1c_bus *bus, struct b1c_message *m, uint64_t timeout_usec,
		 struct b1c_message **reply)
{
	struct message *msg = NULL;
	uint32_t serial;
	int r;

	r = b1c_bus_send(bus, m, &serial);
	if (r < 0)
		return r;
	r = wait_reply(bus, serial, timeout_usec, &msg);
	if (r < 0)
		return r;
	if (bus->last_direct && direct_retry(bus, m->msg, msg)) {
		/* Ask the broker again, once. */
		message_unref(msg);
		r = b1c_bus_send(bus, m, &serial);
		if (r < 0)
			return r;
		r = wait_reply(bus, serial, timeout_usec, &msg);
		if (r < 0)
			return r;
	}
	*reply = message_wrap(msg);
	if (!*reply) {
		message_unref(msg);
		return -ENOMEM;
	}
	return msg->type == DC_MESSAGE_ERROR ? B1C_CALL_ERROR : 0;
}

int b1c_bus_call_async(struct b1c_bus *bus, struct b1c_message *m, b1c_handler_t handler,
		       void *userdata)
{
	struct b1c_handler h = { .fn = handler, .userdata = userdata };
	int r;

	r = b1c_bus_send(bus, m, &h.serial);
	if (r < 0)
		return r;
	/* As b1c_bus_call(): a direct call refused by the callee's library is resent once. */
	if (bus->last_direct)
		h.call = b1c_message_ref(m);
	r = handler_vec_add(&bus->pending, &h);
	if (r < 0)
		b1c_message_unref(h.call);
	return r;
}

/* --------------------------------------------------------------- dispatch */

static bool handler_matches(const struct b1c_handler *h, const struct message *msg)
{
	if (h->type && h->type != msg->type)
		return false;
	if (h->sender && (!msg->sender || strcmp(h->sender, msg->sender)))
		return false;
	if (h->path && (!msg->path || strcmp(h->path, msg->path)))
		return false;
	if (h->interface && (!msg->interface || strcmp(h->interface, msg->interface)))
		return false;
	if (h->member && (!msg->member || strcmp(h->member, msg->member)))
		return false;
	return true;
}

static int send_error(struct b1c_bus *bus, struct b1c_message *call, const char *name,
		      const char *text)
{
	struct b1c_message *e = NULL;
	int r;

	r = b1c_message_new_error(&e, call, name, text);
	if (r < 0)
		return r;
	r = b1c_bus_send(bus, e, NULL);
	b1c_message_unref(e);
	return r;
}

static int dispatch(struct b1c_bus *bus, struct message *msg)
{
	uint64_t reply = dmsg_take(bus, msg);
	struct b1c_message *m = message_wrap(msg);
	int r = 0;

	if (!m) {
		message_unref(msg);
		return -ENOMEM;
	}
	m->direct_reply = reply;
	if (msg->type == DC_MESSAGE_ERROR) {
		for (size_t i = 0; i < bus->pending.n; i++) {
			struct b1c_handler *h = &bus->pending.v[i];
			struct b1c_message *call = h->call;

			if (h->serial != msg->reply_serial || !call)
				continue;
			if (!direct_retry(bus, call->msg, msg))
				break;
			/* Resent once, whichever way it goes now; the handler gets that reply. */
			h->call = NULL;
			r = b1c_bus_send(bus, call, &h->serial);
			b1c_message_unref(call);
			b1c_message_unref(m);
			return r < 0 ? r : 1;
		}
	}
	for (size_t i = 0; i < bus->filters.n; i++) {
		b1c_message_rewind(m);
		r = bus->filters.v[i].fn(bus, m, bus->filters.v[i].userdata);
		if (r != 0) {
			b1c_message_unref(m);
			return r < 0 ? r : 1;
		}
	}
	b1c_message_rewind(m);
	switch (msg->type) {
	case DC_MESSAGE_METHOD_RETURN:
	case DC_MESSAGE_ERROR:
		for (size_t i = 0; i < bus->pending.n; i++) {
			struct b1c_handler h = bus->pending.v[i];

			if (h.serial != msg->reply_serial)
				continue;
			/* Remove first: the handler may issue new calls. */
			bus->pending.v[i] = bus->pending.v[--bus->pending.n];
			r = h.fn(bus, m, h.userdata);
			handler_free(&h);
			break;
		}
		break;
	case DC_MESSAGE_METHOD_CALL:
		if (msg->interface && !strcmp(msg->interface, DC_INTERFACE_PEER) &&
		    !strcmp(msg->member, "Ping")) {
			r = b1c_bus_reply(bus, m, NULL);
			break;
		}
		for (size_t i = 0; i < bus->objects.n && r == 0; i++)
			if (handler_matches(&bus->objects.v[i], msg))
				r = bus->objects.v[i].fn(bus, m, bus->objects.v[i].userdata);
		if (r == 0 && message_expects_reply(msg)) {
			char text[512];

			snprintf(text, sizeof(text),
				 "No such method \"%s\" on interface \"%s\" at \"%s\"",
				 msg->member, msg->interface ? msg->interface : "(none)",
				 msg->path);
			r = send_error(bus, m, DC_ERROR_UNKNOWN_METHOD, text);
		}
		break;
	case DC_MESSAGE_SIGNAL:
		for (size_t i = 0; i < bus->matches.n && r >= 0; i++) {
			if (!handler_matches(&bus->matches.v[i], msg))
				continue;
			b1c_message_rewind(m);
			r = bus->matches.v[i].fn(bus, m, bus->matches.v[i].userdata);
		}
		break;
	}
	b1c_message_unref(m);
	return r < 0 ? r : 1;
}

int b1c_bus_process(struct b1c_bus *bus)
{
	struct message *msg = queue_pop(bus);
	int r;

	if (!msg) {
		r = bus_recv(bus, &msg);
		if (r <= 0)
			return r;
	}
	return dispatch(bus, msg);
}

int b1c_bus_add_filter(struct b1c_bus *bus, b1c_handler_t handler, void *userdata)
{
	struct b1c_handler h = { .fn = handler, .userdata = userdata };

	return handler_vec_add(&bus->filters, &h);
}

int b1c_bus_add_object(struct b1c_bus *bus, const char *path, b1c_handler_t handler,
		       void *userdata)
{
	struct b1c_handler h = { .fn = handler, .userdata = userdata };
	int r;

	if (path) {
		h.path = strdup(path);
		if (!h.path)
			return -ENOMEM;
	}
	r = handler_vec_add(&bus->objects, &h);
	if (r < 0)
		handler_free(&h);
	return r;
}

/* Parse the keys of @rule that are filtered locally (the bus filters them all). */
static int parse_rule(const char *rule, struct b1c_handler *h)
{
	const char *p = rule;

	while (*p) {
		const char *eq = strchr(p, '='), *v, *end;
		size_t klen;
		char **dst = NULL;

		if (!eq || eq[1] != '\'')
			return -EINVAL;
		klen = (size_t)(eq - p);
		v = eq + 2;
		end = strchr(v, '\'');
		if (!end)
			return -EINVAL;
		if (klen == 4 && !strncmp(p, "type", 4)) {
			size_t n = (size_t)(end - v);

			h->type = n == 6 && !strncmp(v, "signal", 6) ? DC_MESSAGE_SIGNAL :
				  n == 11 && !strncmp(v, "method_call", 11) ?
				  DC_MESSAGE_METHOD_CALL : 0;
		} else if (klen == 6 && !strncmp(p, "sender", 6) &&
			   (v[0] == ':' || !strncmp(v, DC_SERVICE_DBUS "'",
						    sizeof(DC_SERVICE_DBUS)))) {
			dst = &h->sender;
		} else if (klen == 4 && !strncmp(p, "path", 4)) {
			dst = &h->path;
		} else if (klen == 9 && !strncmp(p, "interface", 9)) {
			dst = &h->interface;
		} else if (klen == 6 && !strncmp(p, "member", 6)) {
			dst = &h->member;
		}
		if (dst) {
			free(*dst);
			*dst = strndup(v, (size_t)(end - v));
			if (!*dst)
				return -ENOMEM;
		}
		p = end + 1;
		if (*p == ',')
			p++;
	}
	return 0;
}

static int call_driver(struct b1c_bus *bus, const char *member, const char *types,
		       struct b1c_message **replyp, ...)
{
	struct b1c_message *m = NULL, *reply = NULL;
	va_list ap;
	int r;

	r = b1c_message_new_method_call(&m, DC_SERVICE_DBUS, DC_PATH_DBUS, DC_INTERFACE_DBUS,
					member, types);
	if (r < 0)
		return r;
	va_start(ap, replyp);
	r = dc_writer_writev(&m->b.body, types, ap);
	va_end(ap);
	if (r == 0)
		r = b1c_bus_call(bus, m, 0, &reply);
	b1c_message_unref(m);
	if (r == B1C_CALL_ERROR) {
		b1c_message_unref(reply);
		return -EIO;
	}
	if (r < 0)
		return r;
	if (replyp)
		*replyp = reply;
	else
		b1c_message_unref(reply);
	return 0;
}

int b1c_bus_add_match(struct b1c_bus *bus, const char *rule, b1c_handler_t handler,
		      void *userdata)
{
	struct b1c_handler h = { .fn = handler, .userdata = userdata };
	int r;

	r = parse_rule(rule, &h);
	if (r == 0)
		r = call_driver(bus, "AddMatch", "s", NULL, rule);
	if (r == 0 && handler)
		r = handler_vec_add(&bus->matches, &h);
	else
		handler_free(&h);
	return r;
}

int b1c_bus_request_name(struct b1c_bus *bus, const char *name, uint32_t flags)
{
	struct b1c_message *reply = NULL;
	uint32_t code = 0;
	int r;

	r = call_driver(bus, "RequestName", "su", &reply, name, flags);
	if (r < 0)
		return r;
	r = b1c_message_read(reply, "u", &code);
	b1c_message_unref(reply);
	return r < 0 ? r : (int)code;
}

int b1c_bus_emit_signal(struct b1c_bus *bus, const char *path, const char *interface,
			const char *member, const char *types, ...)
{
	struct b1c_message *m = NULL;
	va_list ap;
	int r;

	r = b1c_message_new_signal(&m, path, interface, member, types);
	if (r < 0)
		return r;
	va_start(ap, types);
	r = types ? dc_writer_writev(&m->b.body, types, ap) : 0;
	va_end(ap);
	if (r == 0)
		r = b1c_bus_send(bus, m, NULL);
	b1c_message_unref(m);
	return r;
}

int b1c_bus_reply(struct b1c_bus *bus, struct b1c_message *call, const char *types, ...)
{
	struct b1c_message *m = NULL;
	va_list ap;
	int r;

	if (!b1c_message_expects_reply(call))
		return 0;
	r = b1c_message_new_method_return(&m, call, types);
	if (r < 0)
		return r;
	va_start(ap, types);
	r = types ? dc_writer_writev(&m->b.body, types, ap) : 0;
	va_end(ap);
	if (r == 0)
		r = b1c_bus_send(bus, m, NULL);
	b1c_message_unref(m);
	return r;
}

int b1c_bus_reply_error(struct b1c_bus *bus, struct b1c_message *call, const char *name,
			const char *text)
{
	if (!b1c_message_expects_reply(call))
		return 0;
	return send_error(bus, call, name, text);
}

/* --------------------------------------------------------------- bootstrap */

static int sasl_auth(int fd)
{
	bool fds = false;
	int r = sasl_client_authenticate(fd, getuid(), true, &fds);

	if (r == SASL_CLIENT_REJECTED)
		return -ECONNREFUSED;
	if (r < 0)
		return r;
	/* The fd of the bootstrap needs fd passing. */
	return fds ? 0 : -EOPNOTSUPP;
}

static int socket_send_with_fd(int sock, const struct message *msg, int fd)
{
	union {
		struct cmsghdr h;
		char buf[CMSG_SPACE(sizeof(int))];
	} control = {};
	struct iovec iov[2];
	struct msghdr mh = {
		.msg_iov = iov,
		.msg_control = &control,
		.msg_controllen = sizeof(control.buf),
	};
	struct cmsghdr *c;
	size_t total;
	ssize_t k;

	message_get_iovec(msg, iov);
	mh.msg_iovlen = iov[1].iov_len ? 2 : 1;
	total = iov[0].iov_len + iov[1].iov_len;
	c = CMSG_FIRSTHDR(&mh);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(c), &fd, sizeof(int));
	do {
		k = sendmsg(sock, &mh, MSG_NOSIGNAL);
	} while (k < 0 && errno == EINTR);
	if (k < 0)
		return -errno;
	/* The rest, if the kernel took a part only (the fd went with byte 0). */
	if ((size_t)k < total) {
		size_t off = (size_t)k;

		if (off < iov[0].iov_len) {
			int r = io_send_all(sock, (const char *)iov[0].iov_base + off,
					  iov[0].iov_len - off);

			if (r < 0)
				return r;
			off = iov[0].iov_len;
		}
		return io_send_all(sock, (const char *)iov[1].iov_base + (off - iov[0].iov_len),
				 total - off);
	}
	return 0;
}

static int socket_read_message(int sock, struct message **msgp)
{
	uint8_t hdr[16];
	_cleanup_free_ uint8_t *buf = NULL;
	size_t size;
	int r;

	r = read_all(sock, hdr, sizeof(hdr));
	if (r < 0)
		return r;
	if (message_frame_size(hdr, sizeof(hdr), &size) || size > 1024 * 1024)
		return -EBADMSG;
	buf = malloc(size);
	if (!buf)
		return -ENOMEM;
	memcpy(buf, hdr, sizeof(hdr));
	r = read_all(sock, buf + sizeof(hdr), size - sizeof(hdr));
	if (r < 0)
		return r;
	r = message_new_from_data(msgp, buf, size, NULL, 0);
	return r > 0 ? -EBADMSG : r;
}

static int bootstrap(struct b1c_bus *bus)
{
	struct message_builder b;
	struct message *call = NULL, *reply = NULL;
	struct dc_reader reader;
	uint64_t bus_handle = 0, node = 0;
	int r;

	r = sasl_auth(bus->sock);
	if (r < 0)
		return r;

	message_builder_init_method_call(&b, DC_SERVICE_DBUS, DC_PATH_DBUS, DC_INTERFACE_BUS1,
					 DC_BUS1_METHOD_CONNECT, DC_BUS1_CONNECT_SIGNATURE);
	dc_writer_write(&b.body, DC_BUS1_CONNECT_SIGNATURE, 0U);
	r = message_builder_seal(&b, ++bus->serial, &call);
	message_builder_deinit(&b);
	if (r < 0)
		return r;
	/* The fds of a message need UNIX_FDS: re-write the header with it. */
	{
		struct message *with = NULL;
		int fd = b1_peer_get_fd(bus->peer);

		call->unix_fds = 1;
		r = message_stitch_sender(call, NULL, &with);
		call->unix_fds = 0;
		message_unref(call);
		if (r < 0)
			return r;
		r = socket_send_with_fd(bus->sock, with, fd);
		message_unref(with);
		if (r < 0)
			return r;
	}

	r = socket_read_message(bus->sock, &reply);
	if (r < 0)
		return r;
	if (reply->type == DC_MESSAGE_ERROR) {
		r = reply->error_name && !strcmp(reply->error_name, DC_ERROR_NOT_SUPPORTED) ?
		    -EOPNOTSUPP : -EPROTO;
		message_unref(reply);
		return r;
	}
	r = message_get_body_reader(reply, &reader);
	if (r == 0 && strcmp(reply->signature, DC_BUS1_CONNECT_REPLY) == 0)
		r = dc_reader_read(&reader, DC_BUS1_CONNECT_REPLY, &bus_handle, &node,
				   &bus->direct_node);
	else if (r == 0 && strcmp(reply->signature, DC_BUS1_CONNECT_REPLY_OLD) == 0)
		r = dc_reader_read(&reader, DC_BUS1_CONNECT_REPLY_OLD, &bus_handle, &node);	/* no direct path */
	else
		r = -EPROTO;
	message_unref(reply);
	if (r)
		return r < 0 ? r : -EPROTO;
	bus->bus_handle = bus_handle;
	bus->node = node;
	return 0;
}

static int hello(struct b1c_bus *bus)
{
	struct b1c_message *reply = NULL;
	const char *name = NULL;
	int r;

	r = call_driver(bus, "Hello", "", &reply);
	if (r < 0)
		return r;
	r = b1c_message_read(reply, "s", &name);
	if (r == 0) {
		bus->unique_name = strdup(name);
		if (!bus->unique_name)
			r = -ENOMEM;
	}
	b1c_message_unref(reply);
	return r;
}

int b1c_bus_open(struct b1c_bus **busp, const char *address)
{
	struct address_list list = {};
	struct b1c_bus *bus;
	const char *dev = getenv("BUS1_DEVICE");
	int r;

	if (!address)
		address = getenv("DBUS_SESSION_BUS_ADDRESS");
	if (!address)
		return -ENOENT;

	bus = calloc(1, sizeof(*bus));
	if (!bus)
		return -ENOMEM;
	bus->sock = -1;

	r = b1_peer_new_from_path(dev ? dev : "/dev/bus1", &bus->peer);
	if (r < 0)
		goto fail;

	r = address_list_parse(&list, address, NULL);
	if (r) {
		r = r < 0 ? r : -EINVAL;
		goto fail;
	}
	r = -ECONNREFUSED;
	for (size_t i = 0; i < list.n_entries; i++) {
		r = address_connect(&list.entries[i], &bus->sock);
		if (r == 0)
			break;
		r = r < 0 ? r : -EINVAL;
	}
	address_list_deinit(&list);
	if (r < 0)
		goto fail;

	r = bootstrap(bus);
	if (r < 0)
		goto fail;
	r = hello(bus);
	if (r < 0)
		goto fail;
	*busp = bus;
	return 0;

fail:
	b1c_bus_free(bus);
	return r;
}

struct b1c_bus *b1c_bus_free(struct b1c_bus *bus)
{
	struct message *msg;

	if (!bus)
		return NULL;
	while ((msg = queue_pop(bus)))
		message_unref(msg);
	free(bus->queue);
	for (size_t i = 0; i < bus->n_dnames; i++)
		free(bus->dnames[i].name);
	free(bus->dnames);
	free(bus->dmsgs);
	free(bus->dcalls);
	for (size_t i = 0; i < bus->n_synth; i++)
		message_unref(bus->synth[i]);
	free(bus->synth);
	free(bus->uids);
	for (size_t i = 0; i < bus->n_names; i++)
		free(bus->names[i]);
	free(bus->names);
	handler_vec_free(&bus->filters);
	handler_vec_free(&bus->objects);
	handler_vec_free(&bus->matches);
	handler_vec_free(&bus->pending);
	if (bus->sock >= 0)
		close(bus->sock);
	bus->peer = b1_peer_free(bus->peer);
	free(bus->unique_name);
	free(bus);
	return NULL;
}

const char *b1c_bus_get_unique_name(const struct b1c_bus *bus)
{
	return bus->unique_name;
}

int b1c_bus_get_fd(const struct b1c_bus *bus)
{
	return b1_peer_get_fd(bus->peer);
}
