/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * libbus1-client inside (not an API), shared by its files:
 *
 *   bus1-client.c   the connection: bootstrap, send, receive, the queue,
 *                   calls, dispatch to handlers
 *   b1c-message.c   messages: building, sealing, reading
 *   b1c-direct.c    the direct path (docs/native-protocol.md): resolved
 *                   names, who may call us, calls and replies that went
 *                   direct, what the broker tells about them
 *
 * None of these names is exported (libbus1-client.sym exports b1c_* only).
 */

#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include "libbus1.h"
#include "bus1-client.h"
#include "dbus-compat/message.h"
#include "dbus-compat/signature.h"
#include "dbus-compat/validate.h"
#include "util/error.h"

#define B1C_DEFAULT_TIMEOUT (25ULL * 1000 * 1000)
/* Local bounds: a client is not a bus, but bad input must not grow memory. */
#define B1C_MAX_QUEUED 65536
#define B1C_MAX_FDS 253

/* message_alloc() (b1c-message.c) sets each field by name: a new one goes there too. */
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
	bool no_call;			/* the module has no BUS1_CMD_CALL: SEND, poll, RECV */
	bool have_called;		/* @called: what a CALL received, for bus_recv() */
	bool recv_drained;		/* the last RECV had nothing behind it */
	bool dispatching;		/* in dispatch(): a direct reply may be held */
	bool fd_exported;		/* b1c_bus_get_fd(): the user may poll it alone */
	struct message *held_reply;	/* a reply held for b1c_bus_wait() ... */
	uint64_t held_handle;		/* ... the handle it goes to ... */
	bool held_direct;		/* ... and whether straight to the caller */
	struct b1_msg called;

	struct message **queue;		/* received, not yet dispatched (FIFO) */
	size_t q_head;
	size_t q_n;
	size_t q_cap;

	struct handler_vec filters;
	struct handler_vec objects;
	struct handler_vec matches;
	struct handler_vec pending;
};

/*
 * The argument checks of the public entries (assert_return()). arg_valid():
 * whether @s is not NULL and passes @valid, a validator of
 * dbus-compat/validate.h (validate_object_path, ...). An optional argument
 * is checked as "!s || arg_valid(s, ...)", which the debug log of a refusal
 * then spells out.
 */
static inline bool arg_valid(const char *s, bool (*valid)(const char *, size_t))
{
	return s && valid(s, strlen(s));
}
static inline bool arg_signature(const char *s)
{
	return s && signature_validate(s, strlen(s)) == 0;
}
/* Basic type codes only: what b1c_message_append() and b1c_message_read() take. */
static inline bool arg_basic_types(const char *s)
{
	if (!s)
		return false;
	for (; *s; s++)
		if (!signature_is_basic(*s))
			return false;
	return true;
}
static inline bool arg_container(char type)
{
	return type == 'a' || type == '(' || type == '{' || type == 'v';
}
/* A method call that was received or sent: what a reply answers. */
static inline bool arg_call(const struct b1c_message *m)
{
	return m && m->msg && m->msg->type == DC_MESSAGE_METHOD_CALL;
}

/* b1c-message.c */
int client_message_seal(struct b1c_message *m, uint32_t serial);
struct b1c_message *client_message_wrap(struct message *msg);

/* b1c-direct.c */
bool client_broker_notice(struct b1c_bus *bus, const struct message *msg);
bool client_dcall_take(struct b1c_bus *bus, uint32_t serial);
int client_direct_lost(struct b1c_bus *bus, uint64_t handle);
void client_direct_refuse(struct b1c_bus *bus, const struct message *call, uint64_t reply,
			  const char *name, const char *text);
int client_direct_resolve(struct b1c_bus *bus, const char *name, uint64_t *handlep);
bool client_direct_retry(struct b1c_bus *bus, const struct message *call, const struct message *err);
int client_direct_send(struct b1c_bus *bus, const struct message *msg, uint64_t handle,
		       bool with_reply_node);
int client_direct_call(struct b1c_bus *bus, const struct message *msg, uint64_t handle,
		       bool with_reply_node, uint64_t timeout_usec);
int client_send_wait(struct b1c_bus *bus, const struct message *wire, uint64_t handle,
		     bool with_reply_node, uint64_t timeout_usec);
int client_dmsg_add(struct b1c_bus *bus, const struct message *msg, uint64_t reply);
uint64_t client_dmsg_take(struct b1c_bus *bus, const struct message *msg);
void client_dname_forget(struct b1c_bus *bus, const char *name, uint64_t handle);
bool client_is_unique_or_wellknown(const char *name);
bool client_owns_name(const struct b1c_bus *bus, const char *name);
bool client_uid_allowed(const struct b1c_bus *bus, uint32_t uid);

/* bus1-client.c */
int client_wait_reply(struct b1c_bus *bus, uint32_t serial, uint64_t timeout_usec,
		      struct message **replyp);
