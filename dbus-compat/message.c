/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * D-Bus messages: framing, one-pass parsing and validation, sender stitching
 * (a new header, the body shared) and building the bus' own messages.
 */

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include "dbus-compat/marshal.h"
#include "dbus-compat/message.h"
#include "dbus-compat/signature.h"
#include "dbus-compat/validate.h"
#include "util/error.h"
#include "util/io.h"
#include "util/macro.h"

/* Codes up to this one have a fixed type (libdbus rejects other types). */
#define FIELD_LAST_TYPED DC_FIELD_CONTAINER_INSTANCE

/* The variant type each known header field must carry. */
static const char field_types[FIELD_LAST_TYPED + 1] = {
	[DC_FIELD_PATH] = 'o',
	[DC_FIELD_INTERFACE] = 's',
	[DC_FIELD_MEMBER] = 's',
	[DC_FIELD_ERROR_NAME] = 's',
	[DC_FIELD_REPLY_SERIAL] = 'u',
	[DC_FIELD_DESTINATION] = 's',
	[DC_FIELD_SENDER] = 's',
	[DC_FIELD_SIGNATURE] = 'g',
	[DC_FIELD_UNIX_FDS] = 'u',
	[DC_FIELD_CONTAINER_INSTANCE] = 'o',
};

int message_frame_size(const void *buf, size_t n, size_t *total)
{
	const uint8_t *p = buf;
	uint32_t body_len, fields_len;
	uint64_t t;

	if (n < DC_FIXED_HEADER_SIZE)
		return DC_E_NEED_MORE;
	if (p[0] != DC_LITTLE_ENDIAN && p[0] != DC_BIG_ENDIAN)
		return DC_E_ENDIAN;
	if (p[3] != DC_PROTOCOL_VERSION)
		return DC_E_VERSION;

	body_len = dc_load_u32(p + 4, (char)p[0]);
	fields_len = dc_load_u32(p + 12, (char)p[0]);
	if (fields_len > DC_MAX_ARRAY_SIZE)
		return DC_E_ARRAY_TOO_BIG;

	t = DC_FIXED_HEADER_SIZE + ALIGN_TO((uint64_t)fields_len, 8) + body_len;
	if (t > DC_MAX_MESSAGE_SIZE)
		return DC_E_MESSAGE_TOO_BIG;
	*total = (size_t)t;
	return 0;
}

static struct message *message_alloc(size_t storage)
{
	struct message *m;

	m = malloc(sizeof(*m) + storage);
	if (!m)
		return NULL;
	/* only the struct is zeroed: storage is overwritten by the caller */
	memset(m, 0, sizeof(*m));
	m->n_refs = 1;
	m->signature = "";
	m->storage_size = storage;
	m->data = m->storage;
	return m;
}

int message_new_incoming(struct message **ret, size_t size)
{
	struct message *m;

	if (size < DC_FIXED_HEADER_SIZE || size > DC_MAX_MESSAGE_SIZE)
		return -EINVAL;
	m = message_alloc(size);
	if (!m)
		return -ENOMEM;
	*ret = m;
	return 0;
}

int message_new_adopted(struct message **ret, void *data, size_t size)
{
	struct message *m;

	if (size < DC_FIXED_HEADER_SIZE || size > DC_MAX_MESSAGE_SIZE)
		return -EINVAL;
	m = message_alloc(0);
	if (!m)
		return -ENOMEM;
	/* The buffer is the whole message: header and body point into it. */
	m->data = data;
	m->data_owned = data;
	m->storage_size = size;
	*ret = m;
	return 0;
}

struct message *message_ref(struct message *m)
{
	if (m)
		++m->n_refs;
	return m;
}

struct message *message_unref(struct message *m)
{
	if (!m || --m->n_refs > 0)
		return NULL;

	if (m->parent) {
		message_unref(m->parent);
	} else {
		close_many(m->fds, m->n_fds);
		free(m->fds);
		free(m->body_owned);
		free(m->data_owned);
	}
	free(m);
	return NULL;
}

/* Store one known header field, whose value @s / @u passed the type checks. */
static int parse_field(struct message *m, uint8_t code, const char *s, size_t len, uint32_t u)
{
	switch (code) {
	case DC_FIELD_PATH:
		if (!strcmp(s, DC_PATH_LOCAL))
			return DC_E_LOCAL_PATH;
		m->path = s;
		break;
	case DC_FIELD_INTERFACE:
		if (!validate_interface_name(s, len))
			return DC_E_FIELD_VALUE;
		if (!strcmp(s, DC_INTERFACE_LOCAL))
			return DC_E_LOCAL_INTERFACE;
		m->interface = s;
		break;
	case DC_FIELD_MEMBER:
		if (!validate_member_name(s, len))
			return DC_E_FIELD_VALUE;
		m->member = s;
		break;
	case DC_FIELD_ERROR_NAME:
		if (!validate_error_name(s, len))
			return DC_E_FIELD_VALUE;
		m->error_name = s;
		break;
	case DC_FIELD_REPLY_SERIAL:
		if (u == 0)
			return DC_E_SERIAL;
		m->reply_serial = u;
		break;
	case DC_FIELD_DESTINATION:
		if (!validate_bus_name(s, len))
			return DC_E_FIELD_VALUE;
		m->destination = s;
		break;
	case DC_FIELD_SENDER:
		if (!validate_bus_name(s, len))
			return DC_E_FIELD_VALUE;
		m->sender = s;
		break;
	case DC_FIELD_SIGNATURE:
		m->signature = s;
		break;
	case DC_FIELD_UNIX_FDS:
		m->unix_fds = u;
		break;
	}
	return 0;
}

static int check_required(const struct message *m)
{
	switch (m->type) {
	case DC_MESSAGE_METHOD_CALL:
		if (!m->path)
			return DC_E_MISSING_PATH;
		if (!m->member)
			return DC_E_MISSING_MEMBER;
		break;
	case DC_MESSAGE_METHOD_RETURN:
		if (!m->reply_serial)
			return DC_E_MISSING_REPLY_SERIAL;
		break;
	case DC_MESSAGE_ERROR:
		if (!m->error_name)
			return DC_E_MISSING_ERROR_NAME;
		if (!m->reply_serial)
			return DC_E_MISSING_REPLY_SERIAL;
		break;
	case DC_MESSAGE_SIGNAL:
		if (!m->path)
			return DC_E_MISSING_PATH;
		if (!m->interface)
			return DC_E_MISSING_INTERFACE;
		if (!m->member)
			return DC_E_MISSING_MEMBER;
		break;
	}
	return 0;
}

/*
 * Walk the header fields a(yv) of m->data, from offset 16 to @fields_end
 * (the array's end). This is the per-message hot path, so known fields are
 * decoded directly: every field starts 8-aligned, with the code, the variant
 * signature (1, type, NUL) and the value at offset 4, which is 4-aligned as
 * 'u', 's' and 'o' need. Unknown fields go through the generic reader, which
 * validates them as variants; they are then ignored.
 */
static int parse_header(struct message *m, size_t fields_end)
{
	const uint8_t *d = m->data;
	size_t pos = DC_FIXED_HEADER_SIZE, i;
	uint32_t seen = 0;
	bool plain = true;
	int k;

	while (pos < fields_end) {
		const char *s = NULL;
		size_t len = 0;
		uint32_t u = 0;
		uint8_t code;
		char type;

		/* struct alignment, inside the array */
		for (; pos & 7; ++pos) {
			if (pos >= fields_end)
				return DC_E_ARRAY_LENGTH;
			if (d[pos])
				return DC_E_PADDING;
		}
		if (pos >= fields_end)
			return DC_E_ARRAY_LENGTH;
		code = d[pos];
		if (code == DC_FIELD_INVALID)
			return DC_E_FIELD_CODE;

		/* Fields that stitching drops or replaces. */
		if (code > DC_FIELD_MAX || code == DC_FIELD_SENDER)
			plain = false;

		if (code > FIELD_LAST_TYPED) {
			struct dc_reader r;

			k = dc_reader_init(&r, d, fields_end, m->endian, "v", 1, 0);
			if (k)
				return k;
			r.pos = pos + 1;
			r.limit = fields_end;
			k = dc_reader_skip(&r);
			if (k)
				return k == DC_E_TRUNCATED ? DC_E_ARRAY_LENGTH : k;
			pos = r.pos;
			continue;
		}

		if (seen & (1u << code))
			return DC_E_FIELD_DUPLICATE;
		seen |= 1u << code;
		type = field_types[code];
		if (fields_end - pos < 4)
			return DC_E_ARRAY_LENGTH;
		if (d[pos + 1] != 1 || d[pos + 2] != (uint8_t)type)
			return DC_E_FIELD_TYPE;
		if (d[pos + 3] != 0)
			return DC_E_STRING_NUL;
		pos += 4;

		if (type == 'g') {
			if (pos >= fields_end)
				return DC_E_ARRAY_LENGTH;
			len = d[pos++];
		} else {
			if (fields_end - pos < 4)
				return DC_E_ARRAY_LENGTH;
			u = dc_load_u32(d + pos, m->endian);
			pos += 4;
			len = u;
		}

		if (type != 'u') {
			if (len >= fields_end - pos)
				return DC_E_ARRAY_LENGTH;
			s = (const char *)d + pos;
			if (s[len] != 0)
				return DC_E_STRING_NUL;
			/*
			 * All 's' fields hold names, whose (ASCII-only)
			 * validation in parse_field() is stricter than UTF-8.
			 */
			if (type == 'o' && !validate_object_path(s, len))
				return DC_E_OBJECT_PATH;
			if (type == 'g' && signature_validate(s, len))
				return DC_E_SIGNATURE;
			pos += len + 1;
		}

		k = parse_field(m, code, s, len, u);
		if (k)
			return k;
	}

	for (i = fields_end; i < m->header_size; ++i)
		if (d[i])
			return DC_E_PADDING;
	m->fields_plain = plain;
	return 0;
}

/* The message takes @fds (closed if that fails). */
static int message_take_fds(struct message *m, const int *fds, size_t n_fds)
{
	if (n_fds > 0) {
		m->fds = malloc(n_fds * sizeof(*fds));
		if (!m->fds) {
			close_many(fds, n_fds);
			return -ENOMEM;
		}
		memcpy(m->fds, fds, n_fds * sizeof(*fds));
		m->n_fds = n_fds;
	}
	return 0;
}

/* Everything before the fds and the body: frame, fixed header, header fields. */
static int message_parse_header(struct message *m)
{
	size_t total, fields_end;
	uint32_t fields_len;
	int k;

	k = message_frame_size(m->data, m->storage_size, &total);
	if (k)
		return k;
	if (total != m->storage_size)
		return DC_E_SIZE_MISMATCH;

	m->endian = (char)m->data[0];
	m->type = m->data[1];
	m->flags = m->data[2];
	m->serial = dc_load_u32(m->data + 8, m->endian);
	fields_len = dc_load_u32(m->data + 12, m->endian);
	if (m->type == DC_MESSAGE_INVALID)
		return DC_E_MESSAGE_TYPE;
	if (m->serial == 0)
		return DC_E_SERIAL;

	fields_end = DC_FIXED_HEADER_SIZE + fields_len;
	m->header = m->data;
	m->header_size = ALIGN_TO(fields_end, (size_t)8);
	m->body = m->data + m->header_size;
	m->body_size = m->storage_size - m->header_size;

	k = parse_header(m, fields_end);
	if (k)
		return k;
	return check_required(m);
}

static int message_parse_body(struct message *m)
{
	int k;

	if (m->body_size > 0 && !*m->signature)
		return DC_E_BODY;

	k = dc_validate(m->body, m->body_size, m->endian, m->signature, strlen(m->signature),
			(uint32_t)m->n_fds);
	if (k)
		return k;

	m->parsed = true;
	return 0;
}

int message_parse(struct message *m, const int *fds, size_t n_fds)
{
	int k;

	if (m->parsed || m->parent || m->body_owned)
		return -EINVAL;

	k = message_take_fds(m, fds, n_fds);
	if (k)
		return k;
	k = message_parse_header(m);
	if (k)
		return k;
	if (m->unix_fds != n_fds)
		return DC_E_UNIX_FDS;
	return message_parse_body(m);
}

int message_parse_queued(struct message *m, const int *fds, size_t n_fds, size_t *n_takenp)
{
	int k;

	*n_takenp = 0;
	if (m->parsed || m->parent || m->body_owned)
		return -EINVAL;

	k = message_parse_header(m);
	if (k)
		return k;
	if (m->unix_fds > n_fds)
		return DC_E_UNIX_FDS;
	*n_takenp = m->unix_fds;
	k = message_take_fds(m, fds, m->unix_fds);
	if (k)
		return k;
	return message_parse_body(m);
}

int message_new_from_data(struct message **ret, const void *data, size_t size,
			  const int *fds, size_t n_fds)
{
	_cleanup_message_ struct message *m = NULL;
	size_t total;
	int k;

	/* check the frame before allocating anything */
	k = message_frame_size(data, size, &total);
	if (!k && total != size)
		k = DC_E_SIZE_MISMATCH;
	if (!k)
		k = message_new_incoming(&m, size);
	if (k) {
		close_many(fds, n_fds);
		return k;
	}
	memcpy(message_incoming_data(m), data, size);
	k = message_parse(m, fds, n_fds);
	if (k)
		return k;
	*ret = steal_ptr(m);
	return 0;
}

void message_get_iovec(const struct message *m, struct iovec iov[2])
{
	iov[0].iov_base = m->header;
	iov[0].iov_len = m->header_size;
	iov[1].iov_base = (void *)m->body;
	iov[1].iov_len = m->body_size;
}

int message_get_body_reader(const struct message *m, struct dc_reader *r)
{
	return dc_reader_init(r, m->body, m->body_size, m->endian, m->signature,
			      strlen(m->signature), (uint32_t)m->n_fds);
}

char message_get_arg(struct message *m, unsigned index, const char **value)
{
	if (!m->args_parsed) {
		struct dc_reader r;
		unsigned i;

		m->args_parsed = true;
		m->n_args = 0;
		if (message_get_body_reader(m, &r) == 0) {
			for (i = 0; i < DC_MAX_MATCH_ARGS; ++i) {
				const char *s;
				char c = dc_reader_peek(&r);

				if (!c)
					break;
				m->arg_type[i] = 0;
				if (c == 's' || c == 'o' || c == 'g') {
					if (dc_reader_read_basic(&r, c, &s))
						break;
					m->arg_type[i] = c;
					m->arg_offset[i] = (uint32_t)((const uint8_t *)s - m->body);
				} else if (dc_reader_skip(&r)) {
					break;
				}
				m->n_args = (uint8_t)(i + 1);
			}
		}
	}

	if (index >= m->n_args || !m->arg_type[index])
		return 0;
	if (value)
		*value = (const char *)m->body + m->arg_offset[index];
	return m->arg_type[index];
}

/* ---------------------------------------------------- header serialization */

struct header_fields {
	const char *str[DC_FIELD_MAX + 1];	/* s, o, g fields; NULL: absent */
	uint32_t u32[DC_FIELD_MAX + 1];		/* u fields; 0: absent */
};

static size_t field_size(char type, const char *s)
{
	switch (type) {
	case 'u':
		return 4 + 4;
	case 'g':
		return 4 + 1 + strlen(s) + 1;
	default:
		return 4 + 4 + strlen(s) + 1;
	}
}

/* Size of the a(yv) contents (without the array length). */
static size_t fields_size(const struct header_fields *h)
{
	size_t n = 0;
	unsigned code;

	for (code = 1; code <= DC_FIELD_MAX; ++code) {
		char type = field_types[code];

		if (type == 'u' ? !h->u32[code] : !h->str[code])
			continue;
		n = ALIGN_TO(n, (size_t)8) + field_size(type, h->str[code]);
	}
	return n;
}

static void put_u32(uint8_t *p, uint32_t v, char endian)
{
	if (endian != DC_NATIVE_ENDIAN)
		v = dc_bswap32(v);
	memcpy(p, &v, 4);
}

/*
 * Write the whole header into m->header (sized by the caller: 16 +
 * ALIGN8(fields_size)) and point m's string fields into it. Each field starts
 * 8-aligned: code, variant signature (3 bytes), then the value at offset 4.
 */
static void write_header(struct message *m, const struct header_fields *h, size_t flen)
{
	uint8_t *p = m->header;
	size_t off = DC_FIXED_HEADER_SIZE;
	unsigned code;

	p[0] = (uint8_t)m->endian;
	p[1] = m->type;
	p[2] = m->flags;
	p[3] = DC_PROTOCOL_VERSION;
	put_u32(p + 4, (uint32_t)m->body_size, m->endian);
	put_u32(p + 8, m->serial, m->endian);
	put_u32(p + 12, (uint32_t)flen, m->endian);

	for (code = 1; code <= DC_FIELD_MAX; ++code) {
		char type = field_types[code];
		const char *s = h->str[code];
		size_t aligned = ALIGN_TO(off, (size_t)8), len;

		if (type == 'u' ? !h->u32[code] : !s)
			continue;
		memset(p + off, 0, aligned - off);
		off = aligned;
		p[off] = (uint8_t)code;
		p[off + 1] = 1;
		p[off + 2] = (uint8_t)type;
		p[off + 3] = 0;
		off += 4;

		if (type == 'u') {
			put_u32(p + off, h->u32[code], m->endian);
			off += 4;
			if (code == DC_FIELD_REPLY_SERIAL)
				m->reply_serial = h->u32[code];
			else
				m->unix_fds = h->u32[code];
			continue;
		}

		len = strlen(s);
		if (type == 'g') {
			p[off++] = (uint8_t)len;
		} else {
			put_u32(p + off, (uint32_t)len, m->endian);
			off += 4;
		}
		memcpy(p + off, s, len + 1);
		s = (const char *)p + off;
		off += len + 1;

		switch (code) {
		case DC_FIELD_PATH: m->path = s; break;
		case DC_FIELD_INTERFACE: m->interface = s; break;
		case DC_FIELD_MEMBER: m->member = s; break;
		case DC_FIELD_ERROR_NAME: m->error_name = s; break;
		case DC_FIELD_DESTINATION: m->destination = s; break;
		case DC_FIELD_SENDER: m->sender = s; break;
		case DC_FIELD_SIGNATURE: m->signature = s; break;
		}
	}

	memset(p + off, 0, m->header_size - off);
}

/* @p (a field of @m, or NULL, or a constant) moved to the same offset in @n's header. */
static const char *field_moved(const struct message *m, const struct message *n, const char *p)
{
	const uint8_t *u = (const uint8_t *)p;

	if (!u || u < m->header || u >= m->header + m->header_size)
		return p;
	return (const char *)n->header + (u - m->header);
}

/*
 * How far a stitched copy may grow past DC_MAX_MESSAGE_SIZE: a SENDER field
 * of the longest name. dbus-daemon forwards a message of exactly 128 MiB
 * with the SENDER it adds (134217744 bytes for ":1.0"), so the bus must too:
 * the sender sent a valid message.
 */
#define STITCH_GROWTH_MAX ALIGN_TO(8 + DC_MAX_NAME_LENGTH + 1, 8)

/*
 * A new message for @m's stitched copy: a header of its own with room for
 * @flen bytes of fields (the caller writes it), and @m's body, fds and
 * argument cache, shared through a reference on the message that owns them.
 * -EMSGSIZE if the new header makes the message too large.
 */
static int stitch_new(struct message *m, size_t flen, struct message **np)
{
	size_t hsize = DC_FIXED_HEADER_SIZE + ALIGN_TO(flen, (size_t)8);
	struct message *n;

	if (hsize + m->body_size > DC_MAX_MESSAGE_SIZE + STITCH_GROWTH_MAX)
		return -EMSGSIZE;
	n = message_alloc(hsize);
	if (!n)
		return -ENOMEM;
	n->parent = message_ref(m->parent ? m->parent : m);
	n->endian = m->endian;
	n->type = m->type;
	n->flags = m->flags;
	n->serial = m->serial;
	n->header = n->storage;
	n->header_size = hsize;
	n->body = m->body;
	n->body_size = m->body_size;
	n->fds = m->fds;
	n->n_fds = m->n_fds;
	/* same body: the argument cache stays valid */
	if (m->args_parsed) {
		n->args_parsed = true;
		n->n_args = m->n_args;
		memcpy(n->arg_type, m->arg_type, sizeof(n->arg_type));
		memcpy(n->arg_offset, m->arg_offset, sizeof(n->arg_offset));
	}
	n->parsed = true;
	*np = n;
	return 0;
}

/*
 * Stitch a header whose fields are all kept (message_parse() saw no SENDER
 * and no unknown field), which is what clients send: the fields are copied
 * as they are, in their order, and SENDER goes after them (as dbus-daemon
 * appends it). Every field starts 8-aligned and the padding was checked to be
 * zero, so the copied bytes stay valid at the same offsets.
 */
static int stitch_plain(struct message *m, const char *sender, size_t sender_len,
			struct message **ret)
{
	size_t old = m->header_size, flen, off;
	struct message *n;
	uint8_t *p;
	int r;

	if (sender)
		flen = old - DC_FIXED_HEADER_SIZE + 4 + 4 + sender_len + 1;
	else
		flen = dc_load_u32(m->header + 12, m->endian);
	r = stitch_new(m, flen, &n);
	if (r < 0)
		return r;
	p = n->header;
	memcpy(p, m->header, old);
	n->path = field_moved(m, n, m->path);
	n->interface = field_moved(m, n, m->interface);
	n->member = field_moved(m, n, m->member);
	n->error_name = field_moved(m, n, m->error_name);
	n->destination = field_moved(m, n, m->destination);
	n->signature = field_moved(m, n, m->signature);
	n->reply_serial = m->reply_serial;
	n->unix_fds = m->unix_fds;
	if (sender) {
		put_u32(p + 12, (uint32_t)flen, m->endian);
		off = old;
		p[off] = DC_FIELD_SENDER;
		p[off + 1] = 1;
		p[off + 2] = 's';
		p[off + 3] = 0;
		put_u32(p + off + 4, (uint32_t)sender_len, m->endian);
		memcpy(p + off + 8, sender, sender_len + 1);
		n->sender = (const char *)p + off + 8;
		off += 8 + sender_len + 1;
		memset(p + off, 0, n->header_size - off);
	}

	*ret = n;
	return 0;
}

/* Any other header: rebuilt from the known fields, unknown ones dropped. */
static int stitch_rewrite(struct message *m, const char *sender, struct message **ret)
{
	struct header_fields h = {};
	struct message *n;
	size_t flen;
	int r;

	h.str[DC_FIELD_PATH] = m->path;
	h.str[DC_FIELD_INTERFACE] = m->interface;
	h.str[DC_FIELD_MEMBER] = m->member;
	h.str[DC_FIELD_ERROR_NAME] = m->error_name;
	h.u32[DC_FIELD_REPLY_SERIAL] = m->reply_serial;
	h.str[DC_FIELD_DESTINATION] = m->destination;
	h.str[DC_FIELD_SENDER] = sender;
	h.str[DC_FIELD_SIGNATURE] = *m->signature ? m->signature : NULL;
	h.u32[DC_FIELD_UNIX_FDS] = m->unix_fds;

	flen = fields_size(&h);
	r = stitch_new(m, flen, &n);
	if (r < 0)
		return r;
	write_header(n, &h, flen);

	*ret = n;
	return 0;
}

int message_stitch_sender(struct message *m, const char *sender, struct message **ret)
{
	size_t sender_len = sender ? strlen(sender) : 0;

	if (sender && !validate_bus_name(sender, sender_len))
		return -EINVAL;
	if (!m->parsed)
		return -EINVAL;
	if (m->fields_plain)
		return stitch_plain(m, sender, sender_len, ret);
	return stitch_rewrite(m, sender, ret);
}

/* ------------------------------------------------------------- building */

void message_builder_init(struct message_builder *b, uint8_t type, const char *signature)
{
	/* not the body as a whole: dc_writer_init() leaves its frame stack alone */
	b->type = type;
	b->flags = 0;
	b->path = NULL;
	b->interface = NULL;
	b->member = NULL;
	b->error_name = NULL;
	b->destination = NULL;
	b->sender = NULL;
	b->signature = signature ? signature : "";
	b->reply_serial = 0;
	b->fds = NULL;
	b->n_fds = 0;
	dc_writer_init(&b->body, DC_NATIVE_ENDIAN, b->signature);
}

void message_builder_init_method_return(struct message_builder *b, const struct message *call,
					const char *signature)
{
	message_builder_init(b, DC_MESSAGE_METHOD_RETURN, signature);
	b->flags = DC_FLAG_NO_REPLY_EXPECTED;
	b->reply_serial = call->serial;
	b->destination = call->sender;
}

void message_builder_init_error(struct message_builder *b, const struct message *call,
				const char *error_name, const char *signature)
{
	message_builder_init(b, DC_MESSAGE_ERROR, signature);
	b->flags = DC_FLAG_NO_REPLY_EXPECTED;
	b->reply_serial = call->serial;
	b->destination = call->sender;
	b->error_name = error_name;
}

void message_builder_init_signal(struct message_builder *b, const char *path,
				 const char *interface, const char *member,
				 const char *signature)
{
	message_builder_init(b, DC_MESSAGE_SIGNAL, signature);
	b->flags = DC_FLAG_NO_REPLY_EXPECTED;
	b->path = path;
	b->interface = interface;
	b->member = member;
}

void message_builder_init_method_call(struct message_builder *b, const char *destination,
				      const char *path, const char *interface,
				      const char *member, const char *signature)
{
	message_builder_init(b, DC_MESSAGE_METHOD_CALL, signature);
	b->destination = destination;
	b->path = path;
	b->interface = interface;
	b->member = member;
}

void message_builder_deinit(struct message_builder *b)
{
	dc_writer_deinit(&b->body);
}

static bool opt_valid(const char *s, bool (*fn)(const char *, size_t))
{
	return !s || fn(s, strlen(s));
}

int message_builder_seal(struct message_builder *b, uint32_t serial, struct message **ret)
{
	struct header_fields h = {};
	struct message *m;
	void *body = NULL;
	size_t body_size = 0, flen, hsize;
	int k;

	if (serial == 0 || b->type == DC_MESSAGE_INVALID)
		return -EINVAL;
	if (!opt_valid(b->path, validate_object_path) ||
	    !opt_valid(b->interface, validate_interface_name) ||
	    !opt_valid(b->member, validate_member_name) ||
	    !opt_valid(b->error_name, validate_error_name) ||
	    !opt_valid(b->destination, validate_bus_name) ||
	    !opt_valid(b->sender, validate_bus_name))
		return -EINVAL;

	k = dc_writer_finish(&b->body, &body, &body_size);
	if (k)
		return k;

	h.str[DC_FIELD_PATH] = b->path;
	h.str[DC_FIELD_INTERFACE] = b->interface;
	h.str[DC_FIELD_MEMBER] = b->member;
	h.str[DC_FIELD_ERROR_NAME] = b->error_name;
	h.u32[DC_FIELD_REPLY_SERIAL] = b->reply_serial;
	h.str[DC_FIELD_DESTINATION] = b->destination;
	h.str[DC_FIELD_SENDER] = b->sender;
	h.str[DC_FIELD_SIGNATURE] = b->signature && *b->signature ? b->signature : NULL;
	h.u32[DC_FIELD_UNIX_FDS] = (uint32_t)b->n_fds;

	flen = fields_size(&h);
	hsize = DC_FIXED_HEADER_SIZE + ALIGN_TO(flen, (size_t)8);
	if (hsize + body_size > DC_MAX_MESSAGE_SIZE) {
		free(body);
		return -EMSGSIZE;
	}

	m = message_alloc(hsize);
	if (!m) {
		free(body);
		return -ENOMEM;
	}
	m->body_owned = body;
	m->endian = DC_NATIVE_ENDIAN;
	m->type = b->type;
	m->flags = b->flags;
	m->serial = serial;
	m->header = m->storage;
	m->header_size = hsize;
	m->body = body ? body : (const uint8_t *)"";
	m->body_size = body_size;
	write_header(m, &h, flen);

	k = check_required(m);
	if (k) {
		message_unref(m);
		return -EINVAL;
	}
	if (b->n_fds) {
		m->fds = malloc(b->n_fds * sizeof(*m->fds));
		if (!m->fds) {
			message_unref(m);
			return -ENOMEM;
		}
		for (size_t i = 0; i < b->n_fds; i++) {
			int fd = fcntl(b->fds[i], F_DUPFD_CLOEXEC, 3);

			if (fd < 0) {
				k = error_origin(-errno);
				message_unref(m);
				return k;
			}
			m->fds[m->n_fds++] = fd;
		}
		m->unix_fds = (uint32_t)b->n_fds;
	}
	m->parsed = true;
	*ret = m;
	return 0;
}

int message_new_error(struct message **ret, const struct message *call, const char *sender,
		      uint32_t serial, const char *error_name, const char *text)
{
	struct message_builder b;
	int k;

	message_builder_init_error(&b, call, error_name, text ? "s" : "");
	b.sender = sender;
	if (text)
		dc_writer_write(&b.body, "s", text);
	k = message_builder_seal(&b, serial, ret);
	message_builder_deinit(&b);
	return k;
}

int message_write_blocking(int fd, const struct message *m)
{
	struct iovec iov[2];
	int r;

	message_get_iovec(m, iov);
	r = io_send_all(fd, iov[0].iov_base, iov[0].iov_len);
	if (r == 0 && iov[1].iov_len)
		r = io_send_all(fd, iov[1].iov_base, iov[1].iov_len);
	return r;
}

int message_read_blocking(int fd, size_t max_size, struct message **ret)
{
	uint8_t hdr[16];
	_cleanup_free_ uint8_t *buf = NULL;
	size_t size;
	int r;

	r = io_read_all(fd, hdr, sizeof(hdr));
	if (r < 0)
		return r;
	if (message_frame_size(hdr, sizeof(hdr), &size) || size > max_size)
		return -EBADMSG;
	buf = malloc(size);
	if (!buf)
		return -ENOMEM;
	memcpy(buf, hdr, sizeof(hdr));
	r = io_read_all(fd, buf + sizeof(hdr), size - sizeof(hdr));
	if (r < 0)
		return r;
	r = message_new_from_data(ret, buf, size, NULL, 0);
	return r > 0 ? -EBADMSG : r;
}
