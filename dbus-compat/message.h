/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/**
 * DOC: D-Bus messages
 *
 * struct message is a refcounted, immutable D-Bus message. It keeps the wire
 * bytes: the header (fixed part + header fields + padding to 8) and the body.
 * The body is validated once when the message is parsed and never
 * re-marshalled: forwarding sends the same body bytes.
 *
 * Incoming path (a socket connection):
 *	r = message_frame_size(buf, n, &total);	// 16 bytes tell the size
 *	r = message_new_incoming(&m, total);	// one allocation, bounded
 *	... fill message_incoming_data(m) with the 'total' bytes ...
 *	r = message_parse(m, fds, n_fds);	// validate everything, one pass
 * or message_new_from_data() for a buffer already complete.
 *
 * Parsing rules (what dbus-daemon/libdbus enforce):
 *  - endianness 'l' or 'B' (both accepted), version 1, size <= 128 MiB,
 *    serial != 0, type != 0 (unknown types > 4 are accepted, with no required
 *    fields: the spec says receivers ignore them; the broker decides);
 *  - header fields: known codes must carry their type (PATH o, INTERFACE s,
 *    MEMBER s, ERROR_NAME s, REPLY_SERIAL u, DESTINATION s, SENDER s,
 *    SIGNATURE g, UNIX_FDS u) and a valid value (names per validate.h,
 *    REPLY_SERIAL != 0); a code appearing twice is rejected; code 0 is
 *    rejected; UNKNOWN field codes are validated as variants and then
 *    IGNORED: they are not exposed and are DROPPED when the sender is
 *    stitched (as dbus-daemon >= 1.12 does, so that a field the bus may add
 *    in the future can never be forged by a client). Code 10
 *    (CONTAINER_INSTANCE) must be an object path, as libdbus 1.14 insists,
 *    and is otherwise treated as unknown;
 *  - required fields: METHOD_CALL PATH+MEMBER; ERROR ERROR_NAME+REPLY_SERIAL;
 *    METHOD_RETURN REPLY_SERIAL; SIGNAL PATH+INTERFACE+MEMBER;
 *  - PATH /org/freedesktop/DBus/Local and INTERFACE org.freedesktop.DBus.Local
 *    are refused (any message type);
 *  - header padding zero; body validated against SIGNATURE ("" if absent);
 *  - UNIX_FDS (0 if absent) equals the number of fds received (for
 *    message_parse(); message_parse_queued() takes them from a connection's
 *    queue of received fds); a 'h' in the body is an opaque index that is
 *    not checked against them (dbus-daemon delivers any index).
 * A client-supplied SENDER is parsed (and exposed in ->sender) but the broker
 * must replace it: message_stitch_sender().
 *
 * Return conventions: 0 success; POSITIVE enum dc_invalid (protocol.h) when
 * the data is invalid (the caller replies with an error or disconnects);
 * negative errno for local failures (-ENOMEM) and misuse (-EINVAL).
 *
 * Sending: message_get_iovec() gives {header, body}; the header is already
 * padded to 8, so writev() of the two is the wire form. A stitched copy
 * shares the body (and fds) with the original, so stitching once and
 * queueing the same stitched message to N receivers is the normal path.
 *
 * The fields of struct message are READ-ONLY for users; string fields point
 * into the header bytes (NUL-terminated) and are NULL when absent.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>
#include "dbus-compat/marshal.h"
#include "dbus-compat/protocol.h"
#include "util/macro.h"

struct message {
	unsigned long n_refs;
	struct message *parent;		/* stitched copy: owner of body and fds */
	void *body_owned;		/* built messages: the body buffer */

	/* fixed header */
	char endian;			/* DC_LITTLE_ENDIAN or DC_BIG_ENDIAN */
	uint8_t type;			/* DC_MESSAGE_* */
	uint8_t flags;			/* DC_FLAG_* */
	uint32_t serial;

	/* known header fields (NULL / 0 when absent) */
	const char *path;
	const char *interface;
	const char *member;
	const char *error_name;
	const char *destination;
	const char *sender;
	const char *signature;		/* never NULL: "" when absent */
	uint32_t reply_serial;		/* 0 when absent (0 is never valid) */
	uint32_t unix_fds;		/* value of UNIX_FDS, 0 when absent */

	/* wire form */
	uint8_t *header;		/* fixed header + fields + padding */
	size_t header_size;		/* multiple of 8 */
	const uint8_t *body;
	size_t body_size;

	/* fds (owned by the message, or by ->parent for stitched copies) */
	int *fds;
	size_t n_fds;

	/* match-rule arguments, computed by the first message_get_arg() */
	bool args_parsed;
	uint8_t n_args;			/* top-level arguments seen, <= 64 */
	char arg_type[DC_MAX_MATCH_ARGS];	/* 's', 'o', 'g' or 0 */
	uint32_t arg_offset[DC_MAX_MATCH_ARGS];	/* string offsets in body */

	bool parsed;			/* message_parse() succeeded */
	bool fields_plain;		/* parsed, no SENDER and no unknown field */
	uint8_t *data;			/* incoming: the whole message (storage or adopted) */
	void *data_owned;		/* message_new_adopted(): the buffer, freed with m */
	size_t storage_size;		/* incoming: size of the message at data */
	uint8_t storage[];		/* incoming: the whole message */
};

/**
 * message_frame_size() - tell the size of a message from its start
 * @buf: the bytes received so far
 * @n: their number
 * @total: set to header + padding + body size on success
 *
 * Return: 0 (and *total), DC_E_NEED_MORE if @n < 16, or DC_E_ENDIAN,
 * DC_E_VERSION, DC_E_ARRAY_TOO_BIG (field array above 64 MiB),
 * DC_E_MESSAGE_TOO_BIG (total above 128 MiB). Never negative.
 */
int message_frame_size(const void *buf, size_t n, size_t *total);

/**
 * message_new_incoming() - allocate a message to receive @size bytes into
 * @size: from message_frame_size(); 16 .. DC_MAX_MESSAGE_SIZE (else -EINVAL)
 *
 * Fill message_incoming_data() with exactly @size bytes, then message_parse().
 */
int message_new_incoming(struct message **ret, size_t size);

static inline void *message_incoming_data(struct message *m)
{
	return m->data;
}

/**
 * message_new_adopted() - a message whose bytes are an existing buffer
 * @data: @size bytes from malloc(), already holding the whole message
 * @size: 16 .. DC_MAX_MESSAGE_SIZE (else -EINVAL)
 *
 * For large messages received into a buffer of their own (socket.h): the
 * message takes the buffer over instead of copying it, and free()s it when
 * the last reference goes. On success the buffer belongs to the message; on
 * failure it stays the caller's. Then message_parse(), as for
 * message_new_incoming().
 */
int message_new_adopted(struct message **ret, void *data, size_t size);

/**
 * message_parse() - validate and index an incoming message
 * @m: from message_new_incoming(), storage filled, not parsed yet
 * @fds: the fds received with it (may be NULL if @n_fds is 0)
 * @n_fds: their number
 *
 * The message takes ownership of the fds in ALL cases (they are closed when
 * the message is freed, or right away if copying the array fails); the @fds
 * array itself stays the caller's.
 *
 * Return: 0, positive dc_invalid, or -ENOMEM / -EINVAL (already parsed).
 */
int message_parse(struct message *m, const int *fds, size_t n_fds);

/**
 * message_parse_queued() - message_parse() for fds taken from a stream
 * @m: as for message_parse()
 * @fds: the fds received on the connection and not claimed yet, oldest first
 * @n_fds: their number
 * @n_takenp: output: how many fds, from the front of @fds, the message took
 *
 * As libdbus does for dbus-daemon, the message takes its UNIX_FDS from the
 * front of the fds received so far, and the others wait for later messages:
 * more fds than UNIX_FDS are not an error, fewer are DC_E_UNIX_FDS (nothing
 * taken). The message owns the first *@n_takenp fds in ALL cases (as
 * message_parse() owns its fds); the rest stay the caller's.
 *
 * Return: as message_parse().
 */
int message_parse_queued(struct message *m, const int *fds, size_t n_fds, size_t *n_takenp);

/*
 * message_frame_size() + message_new_incoming() + copy + message_parse().
 * Fewer than 16 bytes give DC_E_NEED_MORE, a size that differs from the
 * header's DC_E_SIZE_MISMATCH. On any failure *ret is untouched and the fds
 * are closed (ownership as message_parse()).
 */
int message_new_from_data(struct message **ret, const void *data, size_t size,
			  const int *fds, size_t n_fds);

struct message *message_ref(struct message *m);
struct message *message_unref(struct message *m);	/* NULL-safe, returns NULL */
DEFINE_CLEANUP_FUNC(struct message *, message_unref);
#define _cleanup_message_ _cleanup_(message_unrefp)

/* Accessors (the fields can be read directly too). */
static inline uint8_t message_get_type(const struct message *m) { return m->type; }
static inline uint8_t message_get_flags(const struct message *m) { return m->flags; }
static inline uint32_t message_get_serial(const struct message *m) { return m->serial; }
static inline uint32_t message_get_reply_serial(const struct message *m) { return m->reply_serial; }
static inline const char *message_get_path(const struct message *m) { return m->path; }
static inline const char *message_get_interface(const struct message *m) { return m->interface; }
static inline const char *message_get_member(const struct message *m) { return m->member; }
static inline const char *message_get_error_name(const struct message *m) { return m->error_name; }
static inline const char *message_get_destination(const struct message *m)
{
	return m->destination;
}
static inline const char *message_get_sender(const struct message *m) { return m->sender; }
static inline const char *message_get_signature(const struct message *m) { return m->signature; }
static inline uint32_t message_get_unix_fds(const struct message *m) { return m->unix_fds; }
static inline char message_get_endian(const struct message *m) { return m->endian; }
static inline const void *message_get_body(const struct message *m, size_t *size)
{
	if (size)
		*size = m->body_size;
	return m->body;
}
static inline const int *message_get_fds(const struct message *m, size_t *n)
{
	if (n)
		*n = m->n_fds;
	return m->fds;
}
/* Size on the wire: header (padded) + body. */
static inline size_t message_get_size(const struct message *m)
{
	return m->header_size + m->body_size;
}
static inline bool message_expects_reply(const struct message *m)
{
	return m->type == DC_MESSAGE_METHOD_CALL && !(m->flags & DC_FLAG_NO_REPLY_EXPECTED);
}

/*
 * The wire form as two iovecs: iov[0] the header (padded to 8), iov[1] the
 * body (may be empty). Valid while the caller holds a reference.
 */
void message_get_iovec(const struct message *m, struct iovec iov[2]);

/*
 * For blocking clients (bus1ctl, the native client's bootstrap; the bus
 * never blocks): write all of @m to the stream socket @fd, or read one whole
 * message of at most @max_size bytes from it, without fds. 0 or negative
 * errno: -EBADMSG for what is not a message or is larger, -ECONNRESET at the
 * end of the stream.
 */
int message_write_blocking(int fd, const struct message *m);
int message_read_blocking(int fd, size_t max_size, struct message **ret);

/**
 * message_get_body_reader() - a reader over the body, with its signature
 *
 * For driver calls: dc_reader_read(&r, "su", &name, &flags). The body was
 * validated already; the reader checks again as it goes (cheap for the
 * small bodies of driver calls).
 */
int message_get_body_reader(const struct message *m, struct dc_reader *r);

/**
 * message_stitch_sender() - copy of @m with the SENDER field set to @sender
 * @m: a parsed or built message
 * @sender: a valid bus name (-EINVAL otherwise), or NULL to only remove any
 *          SENDER the client supplied
 * @ret: the new message
 *
 * Builds a new header in @m's byte order holding @m's known fields except
 * SENDER (unknown fields are dropped), then SENDER; the body and fds are
 * shared with @m (the copy holds a reference to @m). Only the header is
 * copied. The result is a complete, parsed message. When @m as received
 * holds neither SENDER nor unknown fields (what clients send), its fields
 * are copied byte for byte in their order; otherwise the header is rebuilt
 * in field-code order.
 *
 * Return: 0 or -ENOMEM / -EINVAL.
 */
int message_stitch_sender(struct message *m, const char *sender, struct message **ret);

/**
 * message_get_arg() - top-level string argument @index, for match rules
 * @index: 0 .. DC_MAX_MATCH_ARGS - 1
 * @value: set to the NUL-terminated value (in the body) if a string type
 *
 * Looks at the first 64 top-level arguments once (cached in the message).
 *
 * Return: 's', 'o' or 'g' if argument @index exists and has that type; 0 if
 * it does not exist or is not a string, object path or signature.
 */
char message_get_arg(struct message *m, unsigned index, const char **value);

/* ------------------------------------------------------------- building */

/**
 * struct message_builder - build a message the bus itself sends
 *
 * Set the header fields (string pointers must stay valid until seal), append
 * the body with the writer (->body, already initialized with the signature
 * given at init), then message_builder_seal() with a serial. Messages are
 * built in native byte order.
 *
 *	struct message_builder b;
 *	message_builder_init_method_return(&b, call, "u");
 *	b.sender = DC_SERVICE_DBUS;
 *	dc_writer_write(&b.body, "u", DC_REQUEST_NAME_REPLY_PRIMARY_OWNER);
 *	r = message_builder_seal(&b, ++serial, &reply);
 *	message_builder_deinit(&b);
 */
/* message_builder_init() sets each field by name: a new one goes there too. */
struct message_builder {
	uint8_t type;
	uint8_t flags;
	const char *path;
	const char *interface;
	const char *member;
	const char *error_name;
	const char *destination;
	const char *sender;
	const char *signature;		/* set by init; the body's signature */
	uint32_t reply_serial;
	struct dc_writer body;
	/* fds the 'h' values of the body refer to (seal duplicates them) */
	const int *fds;
	size_t n_fds;
};

/* Generic init: @signature of the body ("" or NULL for none). */
void message_builder_init(struct message_builder *b, uint8_t type, const char *signature);
/*
 * METHOD_RETURN to @call: REPLY_SERIAL = call serial, DESTINATION = call
 * sender (a pointer into @call: keep @call referenced until seal). Replies
 * and signals get NO_REPLY_EXPECTED, as libdbus sets it.
 */
void message_builder_init_method_return(struct message_builder *b, const struct message *call,
					const char *signature);
/* ERROR to @call with @error_name (body signature usually "s": the text). */
void message_builder_init_error(struct message_builder *b, const struct message *call,
				const char *error_name, const char *signature);
void message_builder_init_signal(struct message_builder *b, const char *path,
				 const char *interface, const char *member,
				 const char *signature);
void message_builder_init_method_call(struct message_builder *b, const char *destination,
				      const char *path, const char *interface,
				      const char *member, const char *signature);
void message_builder_deinit(struct message_builder *b);

/**
 * message_builder_seal() - produce the message
 * @serial: its serial (!= 0)
 *
 * Checks the header fields (valid names, required fields per type) and that
 * the body is complete, marshals the header and takes over the body buffer.
 * With @b->n_fds, the message carries duplicates (FD_CLOEXEC) of @b->fds and
 * a UNIX_FDS header field; the caller keeps its own fds.
 *
 * Return: 0, -EINVAL (invalid field/body, or a writer error), -ENOMEM,
 * -EMSGSIZE, -EMFILE (cannot duplicate the fds).
 */
int message_builder_seal(struct message_builder *b, uint32_t serial, struct message **ret);

/**
 * message_new_error() - one-shot error reply to @call
 * @sender: SENDER of the reply (DC_SERVICE_DBUS for the driver), may be NULL
 * @text: the error message (body "s"), or NULL for an empty body
 */
int message_new_error(struct message **ret, const struct message *call, const char *sender,
		      uint32_t serial, const char *error_name, const char *text);
