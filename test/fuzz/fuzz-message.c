/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * libFuzzer target for the message parser: frame size, parse and validate,
 * walk the whole body with the reader, match-rule arguments, stitch a sender
 * and re-parse the stitched wire form.
 *
 * Input: the first byte chooses how many fds "arrive" with the message
 * (0..3; placeholders -1, so nothing real is closed), the rest is the message.
 */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "dbus-compat/marshal.h"
#include "dbus-compat/message.h"
#include "dbus-compat/signature.h"
#include "check.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Walk every value; the body was validated, so nothing may fail. */
static void walk(struct dc_reader *r, unsigned *n_values)
{
	char c;

	while ((c = dc_reader_peek(r))) {
		++*n_values;
		if (signature_is_basic(c)) {
			union {
				uint64_t u;
				const char *s;
				bool b;
			} v;

			CHECK(dc_reader_read_basic(r, c, &v) == 0);
			if (c == 's' || c == 'o' || c == 'g')
				CHECK(v.s && strlen(v.s) < r->size);
		} else {
			const char *sig;

			CHECK(dc_reader_peek_signature(r, &sig) > 0);
			CHECK(dc_reader_enter(r, c) == 0);
			walk(r, n_values);
			CHECK(dc_reader_exit(r) == 0);
		}
	}
}

static bool same(const char *a, const char *b)
{
	return (!a && !b) || (a && b && !strcmp(a, b));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const int fds[4] = { -1, -1, -1, -1 };
	struct message *m = NULL, *s = NULL, *p = NULL;
	struct dc_reader r;
	struct iovec iov[2];
	size_t n_fds, total, n;
	unsigned n_values = 0, i;
	uint8_t *wire;
	int k;

	if (size < 1)
		return 0;
	n_fds = data[0] % 4;
	++data;
	--size;

	k = message_frame_size(data, size, &total);
	CHECK(k >= 0);
	if (k == 0)
		CHECK(total <= DC_MAX_MESSAGE_SIZE);

	k = message_new_from_data(&m, data, size, fds, n_fds);
	CHECK(k >= 0);
	if (k)
		return 0;
	CHECK(k == 0 && total == size);

	CHECK(message_get_body_reader(m, &r) == 0);
	walk(&r, &n_values);
	CHECK(dc_reader_at_end(&r));

	for (i = 0; i < DC_MAX_MATCH_ARGS; ++i) {
		const char *v = NULL;
		char t = message_get_arg(m, i, &v);

		CHECK(t == 0 || ((t == 's' || t == 'o' || t == 'g') && v));
	}

	CHECK(message_stitch_sender(m, ":1.1", &s) == 0);
	message_get_iovec(s, iov);
	n = iov[0].iov_len + iov[1].iov_len;
	wire = malloc(n);
	CHECK(wire);
	memcpy(wire, iov[0].iov_base, iov[0].iov_len);
	memcpy(wire + iov[0].iov_len, iov[1].iov_base, iov[1].iov_len);
	k = message_new_from_data(&p, wire, n, fds, n_fds);
	CHECK(k == 0);
	CHECK(p->type == m->type && p->flags == m->flags && p->serial == m->serial);
	CHECK(p->endian == m->endian && p->reply_serial == m->reply_serial);
	CHECK(same(p->path, m->path) && same(p->interface, m->interface));
	CHECK(same(p->member, m->member) && same(p->error_name, m->error_name));
	CHECK(same(p->destination, m->destination) && same(p->sender, ":1.1"));
	CHECK(same(p->signature, m->signature) && p->unix_fds == m->unix_fds);
	CHECK(p->body_size == m->body_size && !memcmp(p->body, m->body, m->body_size));
	message_unref(p);
	free(wire);

	/* dropping the sender, and stitching a stitched copy */
	p = NULL;
	CHECK(message_stitch_sender(s, NULL, &p) == 0);
	CHECK(!p->sender && p->body == m->body);
	message_unref(p);

	message_unref(s);
	message_unref(m);
	return 0;
}
