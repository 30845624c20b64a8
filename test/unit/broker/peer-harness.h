/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * DOC: A real bus with fake clients, for the unit tests of the router, the
 * peers, the policy and the socket transport.
 *
 * struct harness holds a real struct bus (bus_init(), as broker.c makes it,
 * from a configuration given as XML or from the defaults), without AppArmor
 * or SELinux mediation whatever the host runs, so that every verdict comes
 * from the configuration. harness_attach_loop() adds an sd-event loop and
 * the socket transport, as broker.c has them, for tests of connection.c.
 *
 * struct client is one peer of that bus whose transport is fake: a
 * struct peer_transport (peer.h) that records every message the bus queues
 * for it, in order, and can be told to refuse them (PEER_E_QUOTA,
 * PEER_E_DEAD) or to charge them to the peer's user until the test reads
 * them (peer_charge_queued(), as a socket charges its output queue). The
 * client outlives its peer: once the bus freed the peer (->peer NULL,
 * ->freed) what it received can still be looked at. Everything a client
 * sends is built with dbus-compat's message builder, turned into wire bytes
 * and handed to peer_dispatch_incoming(), which parses and routes it as the
 * bus1 transport does; then the bus is flushed (bus_flush_now()), as at the
 * end of an io callback: peers that overflowed are closed, closed ones freed.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <systemd/sd-event.h>
#include "broker/core/bus.h"
#include "broker/objects/peer.h"
#include "dbus-compat/message.h"
#include "check.h"

/* Where the tests' own calls and signals go, unless they say otherwise. */
#define HARNESS_PATH "/org/example/Object"
#define HARNESS_IFACE "org.example.Iface"

/*
 * The rules of dbus-daemon's session.conf: everything allowed. A
 * configuration without any <policy> denies every message, the bus' too, as
 * dbus-daemon's does.
 */
#define HARNESS_SESSION_POLICY                                                            \
	"<policy context=\"default\">"                                                   \
	"<allow send_destination=\"*\" eavesdrop=\"true\"/>"                             \
	"<allow eavesdrop=\"true\"/>"                                                    \
	"<allow own=\"*\"/>"                                                             \
	"</policy>"

struct socket_transport;

struct harness {
	struct bus bus;
	struct bus_config *config;	/* the configuration it was made from, or NULL */
	sd_event *event;		/* harness_attach_loop(), else NULL */
	struct socket_transport *sockets;	/* with the loop */
	struct client **clients;	/* every client made, freed at harness_deinit() */
	size_t n_clients;
};

struct client {
	struct peer_transport transport;	/* the fake */
	struct harness *h;
	struct peer *peer;		/* NULL once the bus freed it */
	char name[64];			/* unique name after Hello, else "" */
	uint32_t serial;		/* of the last message it sent */

	/* What the bus queued for it and the test did not read yet, in order. */
	struct message **msgs;
	struct queue_charge *charges;	/* of each, with ->charge */
	size_t n_msgs;
	size_t cap;

	/* How the fake behaves. */
	int refuse;			/* returned instead of queueing; 0: queue */
	size_t limit;			/* PEER_E_QUOTA with this many unread; 0: none */
	bool charge;			/* charge what it queues (peer_charge_queued()) */

	/* What was done to it. */
	size_t n_refused;		/* messages the fake refused */
	unsigned int n_close;		/* ops->close calls */
	bool registered;		/* ops->registered ran */
	bool freed;			/* ops->free ran: the peer is gone */
};

/*
 * A bus from @config_xml (a <busconfig> document; NULL: the defaults, as
 * without a configuration file).
 */
void harness_init(struct harness *h, const char *config_xml);
/* The sd-event loop and the socket transport (connection.h), as broker.c attaches them. */
void harness_attach_loop(struct harness *h);
void harness_deinit(struct harness *h);
/* The end of an io callback: write out, close who overflowed, free the closed. */
void harness_flush(struct harness *h);
/* A bus made from @config_xml, replacing the policy and limits in force (a reload). */
void harness_reload(struct harness *h, const char *config_xml);

/* Options of client_connect(). */
enum {
	CLIENT_NO_AUTH = 1 << 0,	/* stop before peer_authenticated() */
	CLIENT_NO_HELLO = 1 << 1,	/* authenticated, but no Hello */
	CLIENT_NO_FDS = 1 << 2,		/* may not receive fds */
};

/*
 * A new peer with this process' credentials (or @creds, moved into the
 * peer), not authenticated.
 */
struct client *client_new(struct harness *h, struct socket_creds *creds);
/* peer_authenticated() with the socket's identity: its result. */
int client_authenticate(struct client *c, bool unix_fds);
/* Hello: checks the reply, keeps the unique name, clears what it received. */
void client_hello(struct client *c);
/* client_new(), authenticated and registered unless @flags say otherwise. */
struct client *client_connect(struct harness *h, unsigned int flags);
/* client_connect(h, 0) into each of the (struct client **) up to NULL, in order. */
void clients_connect(struct harness *h, struct client **first, ...);

/*
 * Seal @b with the client's next serial, deinit it, and dispatch the
 * message (peer_dispatch_incoming()), then flush the bus. Return the serial.
 */
uint32_t client_send(struct client *c, struct message_builder *b);
/* Dispatch the bytes @data as a message: peer_dispatch_incoming()'s result. */
int client_send_raw(struct client *c, const void *data, size_t size);
/* The wire bytes (malloc()ed, *@sizep of them) of @b sealed with @serial; @b is deinit. */
void *msg_wire(struct message_builder *b, uint32_t serial, size_t *sizep);

/* A method call to @dest (NULL: none) at HARNESS_PATH, HARNESS_IFACE; body per dc_writer_write(). */
uint32_t client_call(struct client *c, uint8_t flags, const char *dest, const char *member,
		     const char *sig, ...);
/* A method call to the bus driver, interface org.freedesktop.DBus. */
uint32_t client_driver(struct client *c, const char *member, const char *sig, ...);
/* A signal at HARNESS_PATH, HARNESS_IFACE, to @dest (NULL: broadcast). */
uint32_t client_signal(struct client *c, const char *dest, const char *member,
		       const char *sig, ...);
/* A reply to @call (as the client received it); @sig NULL: empty body. */
uint32_t client_reply(struct client *c, const struct message *call, const char *sig, ...);
/* An error reply to @call, with @text as its body (NULL: empty). */
uint32_t client_error(struct client *c, const struct message *call, const char *name,
		      const char *text);

/* AddMatch / RequestName (the reply checked) / ReleaseName; cleared afterwards. */
void client_add_match(struct client *c, const char *rule);
uint32_t client_request_name(struct client *c, const char *name, uint32_t flags);
uint32_t client_release_name(struct client *c, const char *name);
/* BecomeMonitor with one rule (NULL: everything); the serial (the reply is not checked). */
uint32_t client_become_monitor(struct client *c, const char *rule);

/* peer_close() now (the bus frees it at the next flush). */
void client_close(struct client *c);

/* Read (and uncharge) the first @n messages it received, or all of them. */
void client_consume(struct client *c, size_t n);
void client_clear(struct client *c);

/*
 * The first unread message of @type (0: any) whose member, or error name for
 * an error, is @name (NULL: any), or NULL. client_count() counts them.
 */
struct message *client_find(struct client *c, uint8_t type, const char *name);
size_t client_count(struct client *c, uint8_t type, const char *name);
/* The reply (return or error) to the call of serial @serial, or NULL. */
struct message *client_find_reply(struct client *c, uint32_t serial);
/* What it received, one line each, for the messages of failed checks. */
const char *client_dump(struct client *c);

/* The @index'th top-level string argument of @m, or NULL. */
const char *msg_str(struct message *m, unsigned int index);
/* The first argument of @m, a UINT32 (checked). */
uint32_t msg_u32(struct message *m);

/*
 * client_find() / client_find_reply() that must find it, of @type and, for
 * an error, @error_name (NULL: any): a failed check names the test's line
 * and lists what the client received.
 */
struct message *client_expect_at(const char *file, int line, struct client *c, uint8_t type,
				 const char *name);
struct message *client_expect_reply_at(const char *file, int line, struct client *c,
				       uint32_t serial, uint8_t type, const char *error_name);
#define EXPECT_MSG(c, type, name) client_expect_at(__FILE__, __LINE__, (c), (type), (name))
#define EXPECT_REPLY(c, serial, type, error_name)                                          \
	client_expect_reply_at(__FILE__, __LINE__, (c), (serial), (type), (error_name))

/* The client received nothing since it was last cleared. */
#define EXPECT_NOTHING(c)                                                                  \
	CHECK((c)->n_msgs == 0, "%s received:\n%s", (c)->name, client_dump(c))
