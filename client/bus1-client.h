/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * libbus1-client - a D-Bus client that talks to the bus through bus1.
 *
 * b1c_bus_open() connects to a bus1-broker (bootstrap over the bus socket,
 * docs/native-protocol.md); afterwards every message travels through the
 * kernel. The API is a small subset of sd-bus:
 *
 *	struct b1c_bus *bus;
 *	struct b1c_message *m, *reply;
 *
 *	b1c_bus_open(&bus, NULL);			// $DBUS_SESSION_BUS_ADDRESS
 *	b1c_message_new_method_call(&m, "org.example", "/", "org.example.Echo", "Echo", "s");
 *	b1c_message_append(m, "s", "hello");
 *	r = b1c_bus_call(bus, m, 0, &reply);		// 0: reply, B1C_CALL_ERROR: error reply
 *	b1c_message_read(reply, "s", &text);
 *
 * Event loops: watch b1c_bus_get_fd() for POLLIN and call b1c_bus_process()
 * until it returns 0. Handlers run from b1c_bus_process() only.
 *
 * Conventions: functions return 0 (or a documented positive value) on
 * success and a negative errno on failure; -ECONNRESET once the bus is gone.
 * Messages are reference counted; strings returned point into the message.
 *
 * Bad arguments (a NULL bus or message, a name, path, interface, member or
 * signature D-Bus does not allow, a reply to something that is no method
 * call, an fd < 0) are refused with -EINVAL before anything is done; with
 * $B1C_DEBUG set, stderr says which check refused. A function that returns
 * no errno returns what it says below for a NULL argument. Optional
 * arguments (NULL allowed) are said to be.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

struct b1c_bus;
struct b1c_message;

enum {
	B1C_MESSAGE_METHOD_CALL = 1,
	B1C_MESSAGE_METHOD_RETURN = 2,
	B1C_MESSAGE_ERROR = 3,
	B1C_MESSAGE_SIGNAL = 4,
};

/* Conditions of b1c_bus_call() (B1C_CALL_ERROR keeps its name of 0.1). */
enum {
	_B1C_CALL_E_SUCCESS,
	/* The reply is an ERROR message (read its name and text). */
	B1C_CALL_ERROR,
};

/*
 * Handlers: return 0 when the message was not for them (a method call nobody
 * takes gets UnknownMethod), > 0 when handled, negative errno to make
 * b1c_bus_process() fail with it.
 */
typedef int (*b1c_handler_t)(struct b1c_bus *bus, struct b1c_message *m, void *userdata);

/* ---------------------------------------------------------------- the bus */

/*
 * Open a native connection: @address is a D-Bus address string
 * ("unix:path=...", several entries tried in order), NULL for
 * $DBUS_SESSION_BUS_ADDRESS. Opens /dev/bus1 (or $BUS1_DEVICE), runs the
 * bootstrap and Hello. -ENOENT without /dev/bus1, -EOPNOTSUPP if the bus
 * has no bus1 transport, -ECONNREFUSED if authentication fails, -EACCES if
 * the bus refuses Hello with AccessDenied (an LSM's policy: the connection's
 * label may not talk to the bus driver).
 */
int b1c_bus_open(struct b1c_bus **busp, const char *address);
struct b1c_bus *b1c_bus_free(struct b1c_bus *bus);

/* NULL for a NULL @bus. */
const char *b1c_bus_get_unique_name(const struct b1c_bus *bus);
/*
 * The fd to poll for POLLIN (the bus1 peer). From then on every message is
 * sent at once; without it a handler's reply to a direct call waits for the
 * next b1c_bus_wait() (or any other send or receive), which sends it and
 * waits for the next message in one syscall (BUS1_CMD_CALL).
 */
int b1c_bus_get_fd(struct b1c_bus *bus);
/* Dispatch at most one message: 1 if one was dispatched, 0 if none is ready. */
int b1c_bus_process(struct b1c_bus *bus);
/* Wait until a message is ready or @timeout_usec passed (UINT64_MAX: forever). */
int b1c_bus_wait(struct b1c_bus *bus, uint64_t timeout_usec);

/*
 * The direct path (docs/native-protocol.md): once enabled, method calls to a
 * name owned by another native client go straight to it through the kernel
 * (the broker hands out the handle if its policy allows, once per name), and
 * the reply comes back the same way. Calls to anything else, or refused by
 * the broker, still go through the broker. -EOPNOTSUPP if the broker gave
 * this connection no direct node.
 */
int b1c_bus_set_direct(struct b1c_bus *bus, bool enable);
/*
 * A callee's library answers a direct call with this error after the broker
 * revoked its direct handles (the bus policy was reloaded). b1c_bus_call()
 * and b1c_bus_call_async() then forget the handle, ask the broker again and
 * resend the call once (as after ServiceUnknown from a name's old owner).
 * (DC_BUS1_ERROR_DIRECT_REVOKED of dbus-compat/native-protocol.h, which is not
 * installed.)
 */
#define B1C_ERROR_DIRECT_REVOKED "org.freedesktop.DBus.Bus1.Error.DirectRevoked"
/* Whether @m (a received method call) came straight from its caller; false for NULL. */
bool b1c_message_is_direct(const struct b1c_message *m);

/* Send (seals @m with the next serial, written to *@serial if not NULL). */
int b1c_bus_send(struct b1c_bus *bus, struct b1c_message *m, uint32_t *serial);
/*
 * Call and wait for the reply (@timeout_usec 0: 25 s). @m is a method call
 * that expects a reply. Messages arriving meanwhile are kept for
 * b1c_bus_process(). Return 0 (*@reply: the method return), B1C_CALL_ERROR
 * (*@reply: the error), -ETIMEDOUT, negative errno.
 */
int b1c_bus_call(struct b1c_bus *bus, struct b1c_message *m, uint64_t timeout_usec,
		 struct b1c_message **reply);
/* Call (as b1c_bus_call()); @handler gets the reply (or error) from b1c_bus_process(). */
int b1c_bus_call_async(struct b1c_bus *bus, struct b1c_message *m, b1c_handler_t handler,
		       void *userdata);

/*
 * Every incoming message goes to the filters first, in the order added; a
 * filter returning > 0 consumes it (no reply, match or object handler runs).
 */
int b1c_bus_add_filter(struct b1c_bus *bus, b1c_handler_t handler, void *userdata);
/* Method calls to @path (NULL: any path) go to @handler. */
int b1c_bus_add_object(struct b1c_bus *bus, const char *path, b1c_handler_t handler,
		       void *userdata);
/*
 * AddMatch(@rule) on the bus; signals matching the rule's type, sender (unique
 * or org.freedesktop.DBus), path, interface and member keys go to @handler
 * (optional: NULL only asks the bus).
 */
int b1c_bus_add_match(struct b1c_bus *bus, const char *rule, b1c_handler_t handler,
		      void *userdata);
/*
 * RequestName of the well-known @name: returns the (positive) reply code of
 * the bus, DBUS_REQUEST_NAME_REPLY_PRIMARY_OWNER (1) and the others.
 */
int b1c_bus_request_name(struct b1c_bus *bus, const char *name, uint32_t flags);
/* Emit a signal whose body is the basic values @types (optional), as b1c_message_append(). */
int b1c_bus_emit_signal(struct b1c_bus *bus, const char *path, const char *interface,
			const char *member, const char *types, ...);
/*
 * Reply to @call (a received method call) with basic values (@types may be
 * "" or NULL), or with the error @name (@text optional); 0 without sending
 * when @call expects no reply.
 */
int b1c_bus_reply(struct b1c_bus *bus, struct b1c_message *call, const char *types, ...);
int b1c_bus_reply_error(struct b1c_bus *bus, struct b1c_message *call, const char *name,
			const char *text);

/* ------------------------------------------------------------ messages */

/*
 * @destination, @interface (of a method call), @signature and an error's
 * @text are optional. A reply's @call is a method call received (or sent).
 */
int b1c_message_new_method_call(struct b1c_message **mp, const char *destination,
				const char *path, const char *interface, const char *member,
				const char *signature);
int b1c_message_new_signal(struct b1c_message **mp, const char *path, const char *interface,
			   const char *member, const char *signature);
int b1c_message_new_method_return(struct b1c_message **mp, struct b1c_message *call,
				  const char *signature);
int b1c_message_new_error(struct b1c_message **mp, struct b1c_message *call,
			  const char *name, const char *text);
/* Both take NULL (and return it); unref returns NULL. */
struct b1c_message *b1c_message_ref(struct b1c_message *m);
struct b1c_message *b1c_message_unref(struct b1c_message *m);

/* Building: basic values by value (y b n q i u as int, x t as 64-bit, d double, s o g). */
int b1c_message_append(struct b1c_message *m, const char *types, ...);
/*
 * Containers: 'a', '(', '{', 'v' (@contents: the variant's type, one complete
 * type; the others take theirs from the signature: NULL).
 */
int b1c_message_open(struct b1c_message *m, char type, const char *contents);
int b1c_message_close(struct b1c_message *m);
/* Attach a copy (dup) of @fd (>= 0) and append its index ('h'). */
int b1c_message_append_fd(struct b1c_message *m, int fd);
/* A NULL @m is ignored. */
void b1c_message_set_no_reply(struct b1c_message *m, bool no_reply);

/* Reading (received messages): pointers as the types (b: bool *, h: int * = the fd). */
int b1c_message_read(struct b1c_message *m, const char *types, ...);
/*
 * Next type code (0 at the end of the container, and for NULL; *@signature,
 * if @signature is not NULL, the complete type), enter/exit containers, skip.
 */
char b1c_message_peek(struct b1c_message *m, const char **signature);
int b1c_message_enter(struct b1c_message *m, char type);
int b1c_message_exit(struct b1c_message *m);
int b1c_message_skip(struct b1c_message *m);
/* Restart reading from the first value. */
int b1c_message_rewind(struct b1c_message *m);

/*
 * The header of @m. For a NULL @m: the type -EINVAL, serials 0,
 * expects_reply false, strings NULL, the error text "".
 */
int b1c_message_get_type(const struct b1c_message *m);
uint32_t b1c_message_get_serial(const struct b1c_message *m);
uint32_t b1c_message_get_reply_serial(const struct b1c_message *m);
bool b1c_message_expects_reply(const struct b1c_message *m);
const char *b1c_message_get_sender(const struct b1c_message *m);
const char *b1c_message_get_destination(const struct b1c_message *m);
const char *b1c_message_get_path(const struct b1c_message *m);
const char *b1c_message_get_interface(const struct b1c_message *m);
const char *b1c_message_get_member(const struct b1c_message *m);
const char *b1c_message_get_error_name(const struct b1c_message *m);
const char *b1c_message_get_signature(const struct b1c_message *m);
/* The text of an error reply (its first string argument), or "". */
const char *b1c_message_get_error_text(struct b1c_message *m);

#ifdef __cplusplus
}
#endif
