/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * libbus1-client messages: building (the builder of dbus-compat, with the
 * header strings and fds it keeps), sealing, reading. See b1c-internal.h.
 */

#include <assert.h>
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
#include "b1c-internal.h"
#include "dbus-compat/address.h"
#include "dbus-compat/message.h"
#include "dbus-compat/native-protocol.h"
#include "dbus-compat/protocol.h"
#include "dbus-compat/sasl-client.h"
#include "util/io.h"
#include "util/macro.h"
#include "util/clock.h"

/*
 * A new message, every field set but the frame stacks of its builder and
 * reader (8 KiB together): they are written before they are read, and
 * zeroing them (calloc) was the largest single cost of a small call.
 */
static struct b1c_message *message_alloc(void)
{
	struct b1c_message *m = malloc(sizeof(*m));

	if (!m)
		return NULL;
	m->n_refs = 1;
	m->msg = NULL;
	m->building = false;
	message_builder_init(&m->b, DC_MESSAGE_INVALID, NULL);
	memset(m->strs, 0, sizeof(m->strs));
	m->call = NULL;
	m->fds = NULL;
	m->n_fds = 0;
	m->reader_ready = false;
	m->error_text = NULL;
	m->direct_reply = 0;
	return m;
}

struct b1c_message *client_message_wrap(struct message *msg)
{
	struct b1c_message *m = message_alloc();

	if (!m)
		return NULL;
	m->msg = msg;
	return m;
}
static int builder_new(struct b1c_message **mp, uint8_t type, const char *signature)
{
	struct b1c_message *m = message_alloc();

	if (!m)
		return -ENOMEM;
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
	assert(i >= 0 && (size_t)i < ARRAY_SIZE(m->strs) && !m->strs[i]);
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

	assert_return(mp, -EINVAL);
	assert_return(!destination || arg_valid(destination, validate_bus_name), -EINVAL);
	assert_return(arg_valid(path, validate_object_path), -EINVAL);
	assert_return(!interface || arg_valid(interface, validate_interface_name), -EINVAL);
	assert_return(arg_valid(member, validate_member_name), -EINVAL);
	assert_return(!signature || arg_signature(signature), -EINVAL);
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

	assert_return(mp, -EINVAL);
	assert_return(arg_valid(path, validate_object_path), -EINVAL);
	assert_return(arg_valid(interface, validate_interface_name), -EINVAL);
	assert_return(arg_valid(member, validate_member_name), -EINVAL);
	assert_return(!signature || arg_signature(signature), -EINVAL);
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

	assert_return(mp, -EINVAL);
	assert_return(arg_call(call), -EINVAL);
	assert_return(!signature || arg_signature(signature), -EINVAL);
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

	assert_return(mp, -EINVAL);
	assert_return(arg_call(call), -EINVAL);
	assert_return(arg_valid(name, validate_error_name), -EINVAL);
	assert_return(!text || arg_valid(text, validate_utf8), -EINVAL);
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
	if (m) {
		/* a freed message (use after unref) would be written to */
		assert(m->n_refs > 0);
		m->n_refs++;
	}
	return m;
}
struct b1c_message *b1c_message_unref(struct b1c_message *m)
{
	if (!m)
		return NULL;
	/* one unref too many: the count would wrap and the next one free it twice */
	assert(m->n_refs > 0);
	if (--m->n_refs > 0)
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

	assert_return(m, -EINVAL);
	assert_return(arg_basic_types(types), -EINVAL);
	if (!m->building)
		return -EPERM;
	va_start(ap, types);
	r = dc_writer_writev(&m->b.body, types, ap);
	va_end(ap);
	return r;
}
int b1c_message_open(struct b1c_message *m, char type, const char *contents)
{
	assert_return(m, -EINVAL);
	assert_return(arg_container(type), -EINVAL);
	/* a variant's contents are one complete type; the others take theirs from the signature */
	assert_return(type != 'v' ||
		      (contents && signature_validate_single(contents, strlen(contents)) == 0),
		      -EINVAL);
	if (!m->building)
		return -EPERM;
	return dc_writer_open(&m->b.body, type, contents);
}
int b1c_message_close(struct b1c_message *m)
{
	assert_return(m, -EINVAL);
	if (!m->building)
		return -EPERM;
	return dc_writer_close(&m->b.body);
}
int b1c_message_append_fd(struct b1c_message *m, int fd)
{
	int *fds;
	int copy;
	uint32_t index;

	assert_return(m, -EINVAL);
	assert_return(fd >= 0, -EINVAL);
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
	assert_return(m, );
	if (!m->building)
		return;
	if (no_reply)
		m->b.flags |= DC_FLAG_NO_REPLY_EXPECTED;
	else
		m->b.flags &= (uint8_t)~DC_FLAG_NO_REPLY_EXPECTED;
}
/* Seal a message being built; attaches its fds (UNIX_FDS through a re-stitch). */
int client_message_seal(struct b1c_message *m, uint32_t serial)
{
	struct message *msg = NULL, *with_fds = NULL;
	int r;

	if (!m->building)
		return -EALREADY;
	/* a message is built or sealed, never both: a second one would leak */
	assert(!m->msg);
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
	assert_return(m, -EINVAL);
	m->reader_ready = false;
	return reader_ready(m);
}
int b1c_message_read(struct b1c_message *m, const char *types, ...)
{
	va_list ap;
	int r;

	assert_return(m, -EINVAL);
	assert_return(arg_basic_types(types), -EINVAL);
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

	assert_return(m, 0);
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
	int r;

	assert_return(m, -EINVAL);
	assert_return(arg_container(type), -EINVAL);
	r = reader_ready(m);
	if (r < 0)
		return r;
	r = dc_reader_enter(&m->reader, type);
	return r > 0 ? -EBADMSG : r;
}
int b1c_message_exit(struct b1c_message *m)
{
	int r;

	assert_return(m, -EINVAL);
	r = reader_ready(m);
	if (r < 0)
		return r;
	r = dc_reader_exit(&m->reader);
	return r > 0 ? -EBADMSG : r;
}
int b1c_message_skip(struct b1c_message *m)
{
	int r;

	assert_return(m, -EINVAL);
	r = reader_ready(m);
	if (r < 0)
		return r;
	r = dc_reader_skip(&m->reader);
	return r > 0 ? -EBADMSG : r;
}
int b1c_message_get_type(const struct b1c_message *m)
{
	assert_return(m, -EINVAL);
	return m->msg ? m->msg->type : m->b.type;
}
uint32_t b1c_message_get_serial(const struct b1c_message *m)
{
	assert_return(m, 0);
	return m->msg ? m->msg->serial : 0;
}
uint32_t b1c_message_get_reply_serial(const struct b1c_message *m)
{
	assert_return(m, 0);
	return m->msg ? m->msg->reply_serial : 0;
}
bool b1c_message_expects_reply(const struct b1c_message *m)
{
	assert_return(m, false);
	return m->msg && message_expects_reply(m->msg);
}
const char *b1c_message_get_signature(const struct b1c_message *m)
{
	assert_return(m, NULL);
	return m->msg ? m->msg->signature : m->b.signature;
}
const char *b1c_message_get_error_text(struct b1c_message *m)
{
	struct dc_reader r;
	const char *s = NULL;

	assert_return(m, "");
	if (m->error_text)
		return m->error_text;
	if (!m->msg || message_get_body_reader(m->msg, &r))
		return "";
	if (m->msg->signature[0] != 's' || dc_reader_read(&r, "s", &s) || !s)
		return "";
	m->error_text = strdup(s);
	return m->error_text ? m->error_text : "";
}

#define GETTER(field)								\
	const char *b1c_message_get_##field(const struct b1c_message *m)	\
	{									\
		assert_return(m, NULL);						\
		return m->msg ? m->msg->field : NULL;				\
	}
GETTER(sender)
GETTER(destination)
GETTER(path)
GETTER(interface)
GETTER(member)
GETTER(error_name)
