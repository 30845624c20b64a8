/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * A real bus with fake clients: see peer-harness.h.
 */

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "broker/policy/apparmor.h"
#include "broker/transport/connection.h"
#include "broker/policy/selinux.h"
#include "conf/config.h"
#include "dbus-compat/protocol.h"
#include "util/macro.h"
#include "peer-harness.h"

/* ------------------------------------------------------------ the bus */

static void harness_resume_listeners(struct bus *bus)
{
}

static int harness_reload_config(struct bus *bus, char **errorp)
{
	*errorp = strdup("the test harness has no configuration file");
	return *errorp ? BUS_E_INVALID_CONFIG : -ENOMEM;
}

static const struct bus_loop_ops harness_loop_ops = {
	.resume_listeners = harness_resume_listeners,
	.reload_config = harness_reload_config,
};

static struct bus_config *harness_load_config(const char *xml)
{
	const struct bus_config_options opts = { .no_listen_ok = true };
	struct bus_config *config = NULL;
	char *err = NULL;
	int r;

	r = bus_config_load_buffer(&config, xml, strlen(xml), "harness.conf", &opts, &err);
	CHECK(r == 0, "the configuration is refused (%d): %s", r, err ? err : "");
	return config;
}

void harness_init(struct harness *h, const char *config_xml)
{
	char *err = NULL;
	int r;

	*h = (struct harness){};
	if (config_xml)
		h->config = harness_load_config(config_xml);
	r = bus_init(&h->bus, h->config, false, &harness_loop_ops, &err);
	CHECK(r == 0, "bus_init() failed (%d): %s", r, err ? err : "");
	/* The configuration decides, whatever the LSMs of this host would say. */
	h->bus.apparmor = apparmor_free(h->bus.apparmor);
	h->bus.selinux = selinux_free(h->bus.selinux);
}

void harness_attach_loop(struct harness *h)
{
	CHECK_OK(sd_event_new(&h->event));
	CHECK_OK(bus_attach(&h->bus, h->event));
	CHECK_OK(socket_transport_new(&h->sockets, &h->bus));
}

void harness_reload(struct harness *h, const char *config_xml)
{
	struct bus_config *config = harness_load_config(config_xml);

	bus_apply_config(&h->bus, config);
	bus_config_free(h->config);
	h->config = config;
}

void harness_flush(struct harness *h)
{
	bus_flush_now(&h->bus);
}

static void client_free(struct client *c)
{
	for (size_t i = 0; i < c->n_msgs; i++)
		message_unref(c->msgs[i]);
	free(c->msgs);
	free(c->charges);
	free(c);
}

void harness_deinit(struct harness *h)
{
	bus_deinit(&h->bus);
	h->sockets = socket_transport_free(h->sockets);
	for (size_t i = 0; i < h->n_clients; i++) {
		CHECK(h->clients[i]->freed);
		client_free(h->clients[i]);
	}
	free(h->clients);
	bus_config_free(h->config);
	h->event = sd_event_unref(h->event);
}

/* ------------------------------------------------------ the fake transport */

static int fake_queue(struct peer_transport *transport, struct message *msg)
{
	struct client *c = container_of(transport, struct client, transport);
	struct queue_charge qc = {};
	int r;

	CHECK(!c->freed && c->n_close == 0, "a message queued for a closed peer");
	if (c->refuse || (c->limit && c->n_msgs >= c->limit)) {
		c->n_refused++;
		return c->refuse ? c->refuse : PEER_E_QUOTA;
	}
	if (c->charge) {
		r = peer_charge_queued(c->peer, msg, &qc);
		if (r) {
			c->n_refused++;
			return r;
		}
	}
	if (c->n_msgs == c->cap) {
		c->cap = c->cap ? 2 * c->cap : 16;
		c->msgs = realloc(c->msgs, c->cap * sizeof(*c->msgs));
		c->charges = realloc(c->charges, c->cap * sizeof(*c->charges));
		CHECK(c->msgs && c->charges);
	}
	c->msgs[c->n_msgs] = message_ref(msg);
	c->charges[c->n_msgs] = qc;
	c->n_msgs++;
	return 0;
}

static void fake_close(struct peer_transport *transport)
{
	struct client *c = container_of(transport, struct client, transport);

	c->n_close++;
}

static void fake_uncharge(struct client *c, size_t from, size_t to)
{
	for (size_t i = from; i < to; i++)
		if (c->peer)
			peer_uncharge_queued(c->peer, &c->charges[i]);
}

/* The peer is being freed: what is still queued goes back to its user. */
static void fake_free(struct peer_transport *transport)
{
	struct client *c = container_of(transport, struct client, transport);

	fake_uncharge(c, 0, c->n_msgs);
	c->freed = true;
	c->peer = NULL;
}

static void fake_registered(struct peer_transport *transport)
{
	struct client *c = container_of(transport, struct client, transport);

	c->registered = true;
}

static const struct peer_transport_ops fake_ops = {
	.queue = fake_queue,
	.close = fake_close,
	.free = fake_free,
	.registered = fake_registered,
};

/* ------------------------------------------------------------- clients */

struct client *client_new(struct harness *h, struct socket_creds *creds)
{
	struct socket_creds own = {
		.have_creds = true,
		.pid = getpid(),
		.uid = getuid(),
		.gid = getgid(),
		.pidfd = -1,
	};
	struct client *c = calloc(1, sizeof(*c));
	struct client **v = realloc(h->clients, (h->n_clients + 1) * sizeof(*v));

	CHECK(c && v);
	h->clients = v;
	h->clients[h->n_clients++] = c;
	c->h = h;
	c->transport.ops = &fake_ops;
	CHECK_OK(peer_new(&c->peer, &h->bus, &c->transport, creds ? creds : &own));
	return c;
}

int client_authenticate(struct client *c, bool unix_fds)
{
	return CHECK_OK(peer_authenticated(c->peer, (uid_t)-1, unix_fds, false));
}

void client_hello(struct client *c)
{
	uint32_t serial = client_driver(c, "Hello", "");
	struct message *reply = EXPECT_REPLY(c, serial, DC_MESSAGE_METHOD_RETURN, NULL);
	const char *name = msg_str(reply, 0);

	CHECK(name && strlen(name) < sizeof(c->name));
	strcpy(c->name, name);
	client_clear(c);
}

struct client *client_connect(struct harness *h, unsigned int flags)
{
	struct client *c = client_new(h, NULL);

	if (flags & CLIENT_NO_AUTH)
		return c;
	CHECK_EQ(client_authenticate(c, !(flags & CLIENT_NO_FDS)), 0);
	if (!(flags & CLIENT_NO_HELLO))
		client_hello(c);
	return c;
}

void clients_connect(struct harness *h, struct client **first, ...)
{
	va_list ap;

	va_start(ap, first);
	for (struct client **c = first; c; c = va_arg(ap, struct client **))
		*c = client_connect(h, 0);
	va_end(ap);
}

void client_close(struct client *c)
{
	CHECK(c->peer);
	peer_close(c->peer, NULL);
}

/* ------------------------------------------------------------ sending */

int client_send_raw(struct client *c, const void *data, size_t size)
{
	struct message *in = NULL;
	int r;

	CHECK(c->peer, "%s sends after the bus freed it", c->name);
	CHECK_OK(message_new_incoming(&in, size));
	memcpy(message_incoming_data(in), data, size);
	r = CHECK_OK(peer_dispatch_incoming(c->peer, in, NULL, 0));
	harness_flush(c->h);
	return r;
}

/* Seal @b (and deinit it). */
static struct message *seal(struct message_builder *b, uint32_t serial)
{
	struct message *m = NULL;

	CHECK_EQ(message_builder_seal(b, serial, &m), 0);
	message_builder_deinit(b);
	return m;
}

/* The wire bytes of @m, into @dst (message_get_size() bytes). */
static void copy_wire(const struct message *m, uint8_t *dst)
{
	struct iovec iov[2];

	message_get_iovec(m, iov);
	memcpy(dst, iov[0].iov_base, iov[0].iov_len);
	if (iov[1].iov_len)
		memcpy(dst + iov[0].iov_len, iov[1].iov_base, iov[1].iov_len);
}

void *msg_wire(struct message_builder *b, uint32_t serial, size_t *sizep)
{
	_cleanup_message_ struct message *m = seal(b, serial);
	uint8_t *data = malloc(message_get_size(m));

	CHECK(data);
	copy_wire(m, data);
	*sizep = message_get_size(m);
	return data;
}

/* @m as it arrives from a transport: bytes to parse, and copies of its fds. */
uint32_t client_send(struct client *c, struct message_builder *b)
{
	uint32_t serial = ++c->serial;
	_cleanup_message_ struct message *m = seal(b, serial);
	struct message *in = NULL;
	int fds[8];

	CHECK(c->peer, "%s sends after the bus freed it", c->name);
	CHECK_OK(message_new_incoming(&in, message_get_size(m)));
	copy_wire(m, message_incoming_data(in));
	CHECK(m->n_fds <= ARRAY_SIZE(fds));
	for (size_t i = 0; i < m->n_fds; i++)
		fds[i] = CHECK_OK(dup(m->fds[i]));
	CHECK_EQ(CHECK_OK(peer_dispatch_incoming(c->peer, in, fds, m->n_fds)), 0);
	harness_flush(c->h);
	return serial;
}

static uint32_t client_send_body(struct client *c, struct message_builder *b, const char *sig,
				 va_list ap)
{
	if (sig && sig[0])
		CHECK_EQ(dc_writer_writev(&b->body, sig, ap), 0);
	return client_send(c, b);
}

uint32_t client_call(struct client *c, uint8_t flags, const char *dest, const char *member,
		     const char *sig, ...)
{
	struct message_builder b;
	va_list ap;
	uint32_t serial;

	message_builder_init_method_call(&b, dest, HARNESS_PATH, HARNESS_IFACE, member, sig);
	b.flags = flags;
	va_start(ap, sig);
	serial = client_send_body(c, &b, sig, ap);
	va_end(ap);
	return serial;
}

uint32_t client_driver(struct client *c, const char *member, const char *sig, ...)
{
	struct message_builder b;
	va_list ap;
	uint32_t serial;

	message_builder_init_method_call(&b, DC_SERVICE_DBUS, DC_PATH_DBUS, DC_INTERFACE_DBUS,
					 member, sig);
	va_start(ap, sig);
	serial = client_send_body(c, &b, sig, ap);
	va_end(ap);
	return serial;
}

uint32_t client_signal(struct client *c, const char *dest, const char *member,
		       const char *sig, ...)
{
	struct message_builder b;
	va_list ap;
	uint32_t serial;

	message_builder_init_signal(&b, HARNESS_PATH, HARNESS_IFACE, member, sig);
	b.destination = dest;
	va_start(ap, sig);
	serial = client_send_body(c, &b, sig, ap);
	va_end(ap);
	return serial;
}

uint32_t client_reply(struct client *c, const struct message *call, const char *sig, ...)
{
	struct message_builder b;
	va_list ap;
	uint32_t serial;

	message_builder_init_method_return(&b, call, sig);
	va_start(ap, sig);
	serial = client_send_body(c, &b, sig, ap);
	va_end(ap);
	return serial;
}

uint32_t client_error(struct client *c, const struct message *call, const char *name,
		      const char *text)
{
	struct message_builder b;

	message_builder_init_error(&b, call, name, text ? "s" : "");
	if (text)
		CHECK_EQ(dc_writer_write(&b.body, "s", text), 0);
	return client_send(c, &b);
}

void client_add_match(struct client *c, const char *rule)
{
	uint32_t serial = client_driver(c, "AddMatch", "s", rule);

	EXPECT_REPLY(c, serial, DC_MESSAGE_METHOD_RETURN, NULL);
	client_clear(c);
}

uint32_t client_become_monitor(struct client *c, const char *rule)
{
	struct message_builder b;

	message_builder_init_method_call(&b, DC_SERVICE_DBUS, DC_PATH_DBUS,
					 DC_INTERFACE_MONITORING, "BecomeMonitor", "asu");
	CHECK_EQ(dc_writer_open(&b.body, 'a', NULL), 0);
	if (rule)
		CHECK_EQ(dc_writer_append(&b.body, 's', rule), 0);
	CHECK_EQ(dc_writer_close(&b.body), 0);
	CHECK_EQ(dc_writer_append(&b.body, 'u', &(uint32_t){ 0 }), 0);
	return client_send(c, &b);
}

/* The UINT32 answer of the driver to @serial; what else came is left for the caller. */
static uint32_t client_driver_u32(struct client *c, uint32_t serial)
{
	return msg_u32(EXPECT_REPLY(c, serial, DC_MESSAGE_METHOD_RETURN, NULL));
}

uint32_t client_request_name(struct client *c, const char *name, uint32_t flags)
{
	return client_driver_u32(c, client_driver(c, "RequestName", "su", name, flags));
}

uint32_t client_release_name(struct client *c, const char *name)
{
	return client_driver_u32(c, client_driver(c, "ReleaseName", "s", name));
}

/* ------------------------------------------------------------ receiving */

void client_consume(struct client *c, size_t n)
{
	n = MIN(n, c->n_msgs);
	fake_uncharge(c, 0, n);
	for (size_t i = 0; i < n; i++)
		message_unref(c->msgs[i]);
	memmove(c->msgs, c->msgs + n, (c->n_msgs - n) * sizeof(*c->msgs));
	memmove(c->charges, c->charges + n, (c->n_msgs - n) * sizeof(*c->charges));
	c->n_msgs -= n;
}

void client_clear(struct client *c)
{
	client_consume(c, c->n_msgs);
}

static bool msg_is(const struct message *m, uint8_t type, const char *name)
{
	const char *what = m->type == DC_MESSAGE_ERROR ? m->error_name : m->member;

	if (type && m->type != type)
		return false;
	return !name || (what && !strcmp(what, name));
}

struct message *client_find(struct client *c, uint8_t type, const char *name)
{
	for (size_t i = 0; i < c->n_msgs; i++)
		if (msg_is(c->msgs[i], type, name))
			return c->msgs[i];
	return NULL;
}

size_t client_count(struct client *c, uint8_t type, const char *name)
{
	size_t n = 0;

	for (size_t i = 0; i < c->n_msgs; i++)
		n += msg_is(c->msgs[i], type, name);
	return n;
}

struct message *client_find_reply(struct client *c, uint32_t serial)
{
	for (size_t i = 0; i < c->n_msgs; i++) {
		struct message *m = c->msgs[i];

		if ((m->type == DC_MESSAGE_METHOD_RETURN || m->type == DC_MESSAGE_ERROR) &&
		    m->reply_serial == serial)
			return m;
	}
	return NULL;
}

const char *client_dump(struct client *c)
{
	static const char *const types[] = { "?", "call", "return", "error", "signal" };
	static char buf[8192];
	size_t n = 0;

	buf[0] = '\0';
	for (size_t i = 0; i < c->n_msgs && n < sizeof(buf); i++) {
		struct message *m = c->msgs[i];
		const char *arg = msg_str(m, 0);

		n += (size_t)snprintf(buf + n, sizeof(buf) - n,
				      "  %s %s from %s to %s reply_serial=%u arg0=\"%s\"\n",
				      types[m->type < ARRAY_SIZE(types) ? m->type : 0],
				      m->type == DC_MESSAGE_ERROR ? m->error_name :
				      m->member ? m->member : "-",
				      m->sender ? m->sender : "-",
				      m->destination ? m->destination : "-",
				      (unsigned int)m->reply_serial, arg ? arg : "");
	}
	return n ? buf : "  (nothing)\n";
}

struct message *client_expect_at(const char *file, int line, struct client *c, uint8_t type,
				 const char *name)
{
	struct message *m = client_find(c, type, name);

	if (!m)
		check_failed_at(file, line, NULL, " no %s (type %u) in what %s received:\n%s",
				name ? name : "message", (unsigned int)type, c->name,
				client_dump(c));
	return m;
}

struct message *client_expect_reply_at(const char *file, int line, struct client *c,
				       uint32_t serial, uint8_t type, const char *error_name)
{
	struct message *m = client_find_reply(c, serial);

	if (!m || m->type != type || (error_name && (!m->error_name ||
						     strcmp(m->error_name, error_name))))
		check_failed_at(file, line, NULL,
				" no reply of type %u%s%s to %u in what %s received:\n%s",
				(unsigned int)type, error_name ? " " : "",
				error_name ? error_name : "", (unsigned int)serial, c->name,
				client_dump(c));
	return m;
}

const char *msg_str(struct message *m, unsigned int index)
{
	const char *v = NULL;

	return message_get_arg(m, index, &v) ? v : NULL;
}

uint32_t msg_u32(struct message *m)
{
	struct dc_reader r;
	uint32_t v = 0;

	CHECK_EQ(message_get_body_reader(m, &r), 0);
	CHECK_EQ(dc_reader_read(&r, "u", &v), 0);
	return v;
}
