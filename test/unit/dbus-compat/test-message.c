/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Tests of dbus-compat/message.c: framing, header and body validation,
 * required fields, fds, sender stitching, the builder and match arguments.
 */

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "dbus-compat/marshal.h"
#include "dbus-compat/message.h"
#include "dbus-compat/protocol.h"
#include "util/macro.h"
#include "check.h"

static const char endians[2] = { DC_LITTLE_ENDIAN, DC_BIG_ENDIAN };

/* A header field for raw(): type 'X' is an unknown-field value "as". */
struct field {
	uint8_t code;
	char type;
	const char *s;
	uint32_t u;
};

/* Marshal an arbitrary (possibly invalid) message with the writer. */
static uint8_t *raw(char endian, uint8_t type, uint8_t flags, uint32_t serial,
		    const struct field *f, size_t n_fields, const void *body, size_t body_len,
		    size_t *size)
{
	struct dc_writer w;
	uint8_t *data;
	size_t n, i, hs;

	dc_writer_init(&w, endian, "yyyyuua(yv)");
	dc_writer_write(&w, "yyyyuu", endian, type, flags, 1, (uint32_t)body_len, serial);
	dc_writer_open(&w, 'a', NULL);
	for (i = 0; i < n_fields; ++i) {
		char vt[2] = { f[i].type, 0 };

		dc_writer_open(&w, '(', NULL);
		dc_writer_write(&w, "y", f[i].code);
		if (f[i].type == 'X') {
			dc_writer_open(&w, 'v', "as");
			dc_writer_open(&w, 'a', NULL);
			dc_writer_write(&w, "s", f[i].s);
			dc_writer_close(&w);
		} else {
			dc_writer_open(&w, 'v', vt);
			if (f[i].type == 'u' || f[i].type == 'y')
				dc_writer_write(&w, vt, f[i].u);
			else
				dc_writer_write(&w, vt, f[i].s);
		}
		dc_writer_close(&w);
		dc_writer_close(&w);
	}
	dc_writer_close(&w);
	CHECK_EQ(dc_writer_finish(&w, (void **)&data, &n), 0);

	hs = ALIGN_TO(n, (size_t)8);
	data = realloc(data, hs + body_len + 1);
	CHECK(data);
	memset(data + n, 0, hs - n);
	if (body_len)
		memcpy(data + hs, body, body_len);
	*size = hs + body_len;
	return data;
}

/* Marshal a body in @endian. */
static void *body_u32s(char endian, const char *sig, uint32_t a, uint32_t b, size_t *n)
{
	struct dc_writer w;
	void *data;

	dc_writer_init(&w, endian, sig);
	dc_writer_write(&w, sig, a, b);
	CHECK_EQ(dc_writer_finish(&w, &data, n), 0);
	return data;
}

static int parse(const void *d, size_t n, size_t n_fds)
{
	struct message *m = NULL;
	int fds[4] = { -1, -1, -1, -1 };
	int r;

	r = message_new_from_data(&m, d, n, fds, n_fds);
	if (r == 0) {
		CHECK(m);
		message_unref(m);
	} else {
		CHECK(!m);
	}
	return r;
}

static void test_frame_size(void)
{
	uint8_t h[16] = { 'l', 1, 0, 1, 4, 0, 0, 0, 1, 0, 0, 0, 9, 0, 0, 0 };
	size_t total = 0;
	int i;

	for (i = 0; i < 16; ++i)
		CHECK_EQ(message_frame_size(h, i, &total), DC_E_NEED_MORE);
	CHECK_EQ(message_frame_size(h, 16, &total), 0);
	CHECK_EQ(total, 16 + 16 + 4);

	/* the same bytes read big-endian: 0x09000000 bytes of fields */
	h[0] = 'B';
	CHECK_EQ(message_frame_size(h, 16, &total), DC_E_ARRAY_TOO_BIG);
	h[12] = 0, h[15] = 9;
	CHECK_EQ(message_frame_size(h, 16, &total), 0);
	CHECK_EQ(total, 16 + 16 + 0x04000000u);
	h[12] = 9, h[15] = 0;
	h[0] = 'x';
	CHECK_EQ(message_frame_size(h, 16, &total), DC_E_ENDIAN);
	h[0] = 'l';
	h[3] = 2;
	CHECK_EQ(message_frame_size(h, 16, &total), DC_E_VERSION);
	h[3] = 1;

	/* forged sizes: nothing is allocated for them */
	h[12] = 1, h[13] = 0, h[14] = 0, h[15] = 4;	/* fields 64 MiB + 1 */
	CHECK_EQ(message_frame_size(h, 16, &total), DC_E_ARRAY_TOO_BIG);
	h[12] = 0, h[13] = 0, h[14] = 0, h[15] = 0;
	h[4] = 0xf0, h[5] = 0xff, h[6] = 0xff, h[7] = 0x07;	/* body 128 MiB - 16 */
	CHECK_EQ(message_frame_size(h, 16, &total), 0);
	CHECK_EQ(total, DC_MAX_MESSAGE_SIZE);
	h[4] = 0xf1;
	CHECK_EQ(message_frame_size(h, 16, &total), DC_E_MESSAGE_TOO_BIG);
	h[4] = 0xff, h[5] = 0xff, h[6] = 0xff, h[7] = 0xff;
	CHECK_EQ(message_frame_size(h, 16, &total), DC_E_MESSAGE_TOO_BIG);

	/* message_new_incoming refuses sizes outside the frame limits */
	{
		struct message *m = NULL;

		CHECK_EQ(message_new_incoming(&m, 15), -EINVAL);
		CHECK_EQ(message_new_incoming(&m, (size_t)DC_MAX_MESSAGE_SIZE + 1), -EINVAL);
		CHECK(!m);
	}
}

static const struct field call_fields[] = {
	{ DC_FIELD_PATH, 'o', "/org/example/Obj" },
	{ DC_FIELD_INTERFACE, 's', "org.example.Iface" },
	{ DC_FIELD_MEMBER, 's', "Frobnicate" },
	{ DC_FIELD_DESTINATION, 's', "org.example.Service" },
	{ DC_FIELD_SIGNATURE, 'g', "uu" },
};

static void test_parse_valid(void)
{
	int e;

	for (e = 0; e < 2; ++e) {
		struct message *m = NULL;
		struct dc_reader r;
		uint32_t a, b;
		size_t n, bn;
		void *body = body_u32s(endians[e], "uu", 7, 0xdeadbeef, &bn);
		uint8_t *d = raw(endians[e], DC_MESSAGE_METHOD_CALL, DC_FLAG_NO_AUTO_START, 42,
				 call_fields, 5, body, bn, &n);
		size_t total;
		struct iovec iov[2];
		int k, n_valid;

		CHECK_EQ(message_frame_size(d, n, &total), 0);
		CHECK_EQ(total, n);
		CHECK_EQ(message_new_from_data(&m, d, n, NULL, 0), 0);
		CHECK_EQ(message_get_endian(m), endians[e]);
		CHECK_EQ(message_get_type(m), DC_MESSAGE_METHOD_CALL);
		CHECK_EQ(message_get_flags(m), DC_FLAG_NO_AUTO_START);
		CHECK_EQ(message_get_serial(m), 42);
		CHECK_EQ(message_get_reply_serial(m), 0);
		CHECK_STR(message_get_path(m), "/org/example/Obj");
		CHECK_STR(message_get_interface(m), "org.example.Iface");
		CHECK_STR(message_get_member(m), "Frobnicate");
		CHECK_STR(message_get_destination(m), "org.example.Service");
		CHECK_STR(message_get_signature(m), "uu");
		CHECK(!message_get_sender(m));
		CHECK(!message_get_error_name(m));
		CHECK_EQ(message_get_unix_fds(m), 0);
		CHECK(message_expects_reply(m));
		CHECK_EQ(m->body_size, bn);
		CHECK(!memcmp(m->body, body, bn));
		CHECK_EQ(message_get_size(m), n);
		message_get_iovec(m, iov);
		CHECK_EQ(iov[0].iov_len % 8, 0);
		CHECK_EQ(iov[0].iov_len + iov[1].iov_len, n);
		CHECK(!memcmp(iov[0].iov_base, d, iov[0].iov_len));

		CHECK_EQ(message_get_body_reader(m, &r), 0);
		CHECK_EQ(dc_reader_read(&r, "uu", &a, &b), 0);
		CHECK(a == 7 && b == 0xdeadbeef);
		CHECK(dc_reader_at_end(&r));

		/* parse-once API */
		CHECK_EQ(message_parse(m, NULL, 0), -EINVAL);
		CHECK(message_ref(m) == m);
		message_unref(m);
		message_unref(m);
		message_unref(NULL);

		/* the incoming path in two steps */
		CHECK_EQ(message_new_incoming(&m, n), 0);
		memcpy(message_incoming_data(m), d, n);
		CHECK_EQ(message_parse(m, NULL, 0), 0);
		message_unref(m);

		/* truncated at every length: the size no longer matches */
		for (size_t i = 0; i < n; ++i)
			CHECK(parse(d, i, 0) > 0);
		/*
		 * Truncated at every length with consistent sizes: the header cut
		 * short. Only the two cuts right after MEMBER and DESTINATION
		 * leave a valid message (SIGNATURE "uu" needs a body).
		 */
		n_valid = 0;
		for (size_t i = 16; i < n - bn; ++i) {
			uint8_t *c = malloc(ALIGN_TO(i, (size_t)8));
			uint32_t fl = (uint32_t)(i - 16), zero = 0;

			memcpy(c, d, i);
			memset(c + i, 0, ALIGN_TO(i, (size_t)8) - i);
			if (endians[e] != DC_NATIVE_ENDIAN)
				fl = __builtin_bswap32(fl);
			memcpy(c + 12, &fl, 4);
			memcpy(c + 4, &zero, 4);
			k = parse(c, ALIGN_TO(i, (size_t)8), 0);
			CHECK(k >= 0);
			n_valid += k == 0;
			free(c);
		}
		CHECK_EQ(n_valid, 2);
		/* the body cut: body length patched, signature still "uu" */
		{
			uint32_t bl = 4;

			if (endians[e] != DC_NATIVE_ENDIAN)
				bl = __builtin_bswap32(bl);
			memcpy(d + 4, &bl, 4);
			CHECK_EQ(parse(d, n - 4, 0), DC_E_TRUNCATED);
		}
		free(d);
		free(body);
	}
}

static void test_header_errors(void)
{
	const int E = DC_LITTLE_ENDIAN;
	uint8_t *d;
	size_t n;

#define EXPECT(code, type, ...)                                                       \
	do {                                                                          \
		const struct field _f[] = { __VA_ARGS__ };                            \
		d = raw(E, type, 0, 1, _f, sizeof(_f) / sizeof(*_f), NULL, 0, &n);    \
		CHECK_EQ(parse(d, n, 0), code);                                       \
		free(d);                                                              \
	} while (0)

	const struct field path = { DC_FIELD_PATH, 'o', "/a" };
	const struct field iface = { DC_FIELD_INTERFACE, 's', "a.b" };
	const struct field member = { DC_FIELD_MEMBER, 's', "M" };
	const struct field err = { DC_FIELD_ERROR_NAME, 's', "a.b.Error" };
	const struct field rs = { DC_FIELD_REPLY_SERIAL, 'u', NULL, 5 };

	/* valid baselines */
	EXPECT(0, DC_MESSAGE_METHOD_CALL, path, member);
	EXPECT(0, DC_MESSAGE_METHOD_RETURN, rs);
	EXPECT(0, DC_MESSAGE_ERROR, err, rs);
	EXPECT(0, DC_MESSAGE_SIGNAL, path, iface, member);
	EXPECT(0, 7, path);	/* unknown type: no required fields */
	EXPECT(0, 9, rs);

	/* required fields */
	EXPECT(DC_E_MISSING_PATH, DC_MESSAGE_METHOD_CALL, member);
	EXPECT(DC_E_MISSING_MEMBER, DC_MESSAGE_METHOD_CALL, path, iface);
	EXPECT(DC_E_MISSING_REPLY_SERIAL, DC_MESSAGE_METHOD_RETURN, path);
	EXPECT(DC_E_MISSING_ERROR_NAME, DC_MESSAGE_ERROR, rs);
	EXPECT(DC_E_MISSING_REPLY_SERIAL, DC_MESSAGE_ERROR, err);
	EXPECT(DC_E_MISSING_PATH, DC_MESSAGE_SIGNAL, iface, member);
	EXPECT(DC_E_MISSING_INTERFACE, DC_MESSAGE_SIGNAL, path, member);
	EXPECT(DC_E_MISSING_MEMBER, DC_MESSAGE_SIGNAL, path, iface);

	/* type 0, serial 0, REPLY_SERIAL 0 */
	EXPECT(DC_E_MESSAGE_TYPE, 0, path, member);
	d = raw(E, DC_MESSAGE_METHOD_CALL, 0, 0, (struct field[]){ path, member }, 2, NULL, 0, &n);
	CHECK_EQ(parse(d, n, 0), DC_E_SERIAL);
	free(d);
	EXPECT(DC_E_SERIAL, DC_MESSAGE_METHOD_RETURN, { DC_FIELD_REPLY_SERIAL, 'u', NULL, 0 });

	/* duplicates */
	EXPECT(DC_E_FIELD_DUPLICATE, DC_MESSAGE_METHOD_CALL, path, member, path);
	EXPECT(DC_E_FIELD_DUPLICATE, DC_MESSAGE_METHOD_CALL, path, member, member);
	EXPECT(DC_E_FIELD_DUPLICATE, DC_MESSAGE_METHOD_RETURN, rs, rs);

	/* wrong types, for each known field */
	EXPECT(DC_E_FIELD_TYPE, DC_MESSAGE_METHOD_CALL, { DC_FIELD_PATH, 's', "/a" }, member);
	EXPECT(DC_E_FIELD_TYPE, DC_MESSAGE_METHOD_CALL, path, member,
	       { DC_FIELD_INTERFACE, 'o', "/a" });
	EXPECT(DC_E_FIELD_TYPE, DC_MESSAGE_METHOD_CALL, path, { DC_FIELD_MEMBER, 'g', "s" });
	EXPECT(DC_E_FIELD_TYPE, DC_MESSAGE_ERROR, rs, { DC_FIELD_ERROR_NAME, 'u', NULL, 1 });
	EXPECT(DC_E_FIELD_TYPE, DC_MESSAGE_METHOD_RETURN, { DC_FIELD_REPLY_SERIAL, 'y', NULL, 1 });
	EXPECT(DC_E_FIELD_TYPE, DC_MESSAGE_METHOD_CALL, path, member,
	       { DC_FIELD_DESTINATION, 'X', "a.b" });
	EXPECT(DC_E_FIELD_TYPE, DC_MESSAGE_METHOD_CALL, path, member,
	       { DC_FIELD_SENDER, 'o', "/a" });
	EXPECT(DC_E_FIELD_TYPE, DC_MESSAGE_METHOD_CALL, path, member,
	       { DC_FIELD_SIGNATURE, 's', "" });
	EXPECT(DC_E_FIELD_TYPE, DC_MESSAGE_METHOD_CALL, path, member,
	       { DC_FIELD_UNIX_FDS, 's', "1" });

	/* invalid values */
	EXPECT(DC_E_FIELD_VALUE, DC_MESSAGE_SIGNAL, path, member, { DC_FIELD_INTERFACE, 's', "a" });
	EXPECT(DC_E_FIELD_VALUE, DC_MESSAGE_METHOD_CALL, path, { DC_FIELD_MEMBER, 's', "a.b" });
	EXPECT(DC_E_FIELD_VALUE, DC_MESSAGE_ERROR, rs, { DC_FIELD_ERROR_NAME, 's', "Err" });
	EXPECT(DC_E_FIELD_VALUE, DC_MESSAGE_METHOD_CALL, path, member,
	       { DC_FIELD_DESTINATION, 's', "0.a" });
	EXPECT(DC_E_FIELD_VALUE, DC_MESSAGE_METHOD_CALL, path, member,
	       { DC_FIELD_SENDER, 's', ":1" });

	/* the reserved Local path and interface */
	EXPECT(DC_E_LOCAL_PATH, DC_MESSAGE_METHOD_CALL, member,
	       { DC_FIELD_PATH, 'o', "/org/freedesktop/DBus/Local" });
	EXPECT(DC_E_LOCAL_INTERFACE, DC_MESSAGE_SIGNAL, path, member,
	       { DC_FIELD_INTERFACE, 's', "org.freedesktop.DBus.Local" });
	EXPECT(DC_E_LOCAL_PATH, DC_MESSAGE_METHOD_RETURN, rs,
	       { DC_FIELD_PATH, 'o', "/org/freedesktop/DBus/Local" });
	EXPECT(0, DC_MESSAGE_METHOD_CALL, member,
	       { DC_FIELD_PATH, 'o', "/org/freedesktop/DBus/Local2" });

	/* field code 0 is invalid; unknown codes are accepted and ignored */
	EXPECT(DC_E_FIELD_CODE, DC_MESSAGE_METHOD_CALL, path, member, { 0, 's', "x" });
	EXPECT(0, DC_MESSAGE_METHOD_CALL, path, member, { 11, 's', "x" }, { 200, 'X', "y" },
	       { 11, 'u', NULL, 3 });
	/* CONTAINER_INSTANCE (10) is typed 'o' for libdbus' sake, then ignored */
	EXPECT(0, DC_MESSAGE_METHOD_CALL, path, member, { 10, 'o', "/c/1" });
	EXPECT(DC_E_FIELD_TYPE, DC_MESSAGE_METHOD_CALL, path, member, { 10, 's', "x" });
	EXPECT(DC_E_FIELD_DUPLICATE, DC_MESSAGE_METHOD_CALL, path, member, { 10, 'o', "/c" },
	       { 10, 'o', "/c" });

#undef EXPECT

	/* an unknown field must still be valid data (the writer refuses bad UTF-8: patch it) */
	{
		const struct field f[] = { path, member, { 11, 's', "@@" } };
		uint8_t *at;

		d = raw(E, DC_MESSAGE_METHOD_CALL, 0, 1, f, 3, NULL, 0, &n);
		CHECK_EQ(parse(d, n, 0), 0);
		at = memmem(d, n, "@@", 2);
		CHECK(at);
		at[0] = 0xc0;
		at[1] = 0x80;
		CHECK_EQ(parse(d, n, 0), DC_E_UTF8);
		free(d);
	}

	/* non-zero header padding */
	{
		const struct field f[] = { path, member };

		d = raw(E, DC_MESSAGE_METHOD_CALL, 0, 1, f, 2, NULL, 0, &n);
		CHECK_EQ(n % 8, 0);
		CHECK_EQ(parse(d, n, 0), 0);
		/* fields end at 16 + 8 + 4 + 4 + 2 = 34 (member "M"): pad 34..39 */
		CHECK_EQ(d[n - 1], 0);
		d[n - 1] = 1;
		CHECK_EQ(parse(d, n, 0), DC_E_PADDING);
		free(d);
	}
}

static void test_body_errors(void)
{
	const struct field f[] = {
		{ DC_FIELD_PATH, 'o', "/a" },
		{ DC_FIELD_MEMBER, 's', "M" },
		{ DC_FIELD_SIGNATURE, 'g', "b" },
	};
	const struct field nosig[] = {
		{ DC_FIELD_PATH, 'o', "/a" },
		{ DC_FIELD_MEMBER, 's', "M" },
	};
	uint8_t bool2[4] = { 2, 0, 0, 0 }, bool1[5] = { 1, 0, 0, 0, 0 };
	uint8_t *d;
	size_t n;

	d = raw(DC_LITTLE_ENDIAN, DC_MESSAGE_METHOD_CALL, 0, 1, f, 3, bool2, 4, &n);
	CHECK_EQ(parse(d, n, 0), DC_E_BOOLEAN);
	free(d);
	d = raw(DC_LITTLE_ENDIAN, DC_MESSAGE_METHOD_CALL, 0, 1, f, 3, bool1, 4, &n);
	CHECK_EQ(parse(d, n, 0), 0);
	free(d);
	d = raw(DC_LITTLE_ENDIAN, DC_MESSAGE_METHOD_CALL, 0, 1, f, 3, bool1, 5, &n);
	CHECK_EQ(parse(d, n, 0), DC_E_TRAILING);
	free(d);
	d = raw(DC_LITTLE_ENDIAN, DC_MESSAGE_METHOD_CALL, 0, 1, nosig, 2, bool1, 4, &n);
	CHECK_EQ(parse(d, n, 0), DC_E_BODY);
	free(d);
	d = raw(DC_BIG_ENDIAN, DC_MESSAGE_METHOD_CALL, 0, 1, f, 3, bool1, 4, &n);
	CHECK_EQ(parse(d, n, 0), DC_E_BOOLEAN);	/* 0x01000000 big-endian */
	free(d);
}

static bool fd_is_open(int fd)
{
	return fcntl(fd, F_GETFD) >= 0;
}

static void test_fds(void)
{
	const struct field one[] = {
		{ DC_FIELD_PATH, 'o', "/a" },
		{ DC_FIELD_MEMBER, 's', "M" },
		{ DC_FIELD_SIGNATURE, 'g', "h" },
		{ DC_FIELD_UNIX_FDS, 'u', NULL, 1 },
	};
	uint8_t idx0[4] = { 0 }, idx1[4] = { 1 };
	struct message *m = NULL, *s = NULL;
	uint8_t *d;
	size_t n, nf;
	int fd;

	d = raw(DC_LITTLE_ENDIAN, DC_MESSAGE_METHOD_CALL, 0, 1, one, 4, idx0, 4, &n);
	/* UNIX_FDS = 1 but no fd, or 2 fds */
	CHECK_EQ(parse(d, n, 0), DC_E_UNIX_FDS);
	CHECK_EQ(parse(d, n, 2), DC_E_UNIX_FDS);

	/* one real fd: owned by the message, shared by the stitched copy */
	fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	CHECK(fd >= 0);
	CHECK_EQ(message_new_from_data(&m, d, n, &fd, 1), 0);
	CHECK_EQ(message_get_unix_fds(m), 1);
	CHECK_EQ(message_get_fds(m, &nf)[0], fd);
	CHECK_EQ(nf, 1);
	CHECK_EQ(message_stitch_sender(m, ":1.7", &s), 0);
	CHECK_EQ(message_get_fds(s, &nf)[0], fd);
	CHECK_EQ(message_get_unix_fds(s), 1);
	message_unref(m);
	CHECK(fd_is_open(fd));
	message_unref(s);
	CHECK(!fd_is_open(fd));
	free(d);

	/* an 'h' index out of range is an opaque number, as for dbus-daemon */
	d = raw(DC_LITTLE_ENDIAN, DC_MESSAGE_METHOD_CALL, 0, 1, one, 4, idx1, 4, &n);
	CHECK_EQ(parse(d, n, 1), 0);
	/* fds are closed when parsing fails, too */
	{
		int two[2];

		two[0] = open("/dev/null", O_RDONLY | O_CLOEXEC);
		two[1] = open("/dev/null", O_RDONLY | O_CLOEXEC);
		CHECK(two[0] >= 0 && two[1] >= 0);
		m = NULL;
		CHECK_EQ(message_new_from_data(&m, d, n, two, 2), DC_E_UNIX_FDS);
		CHECK(!m);
		CHECK(!fd_is_open(two[0]));
		CHECK(!fd_is_open(two[1]));
	}
	/* from a stream of fds: the message takes its UNIX_FDS from the front */
	{
		size_t taken = 9;
		int two[2];

		two[0] = open("/dev/null", O_RDONLY | O_CLOEXEC);
		two[1] = open("/dev/null", O_RDONLY | O_CLOEXEC);
		CHECK(two[0] >= 0 && two[1] >= 0);
		CHECK_EQ(message_new_incoming(&m, n), 0);
		memcpy(message_incoming_data(m), d, n);
		CHECK_EQ(message_parse_queued(m, two, 2, &taken), 0);
		CHECK_EQ(taken, 1);
		CHECK_EQ(message_get_fds(m, &nf)[0], two[0]);
		CHECK_EQ(nf, 1);
		message_unref(m);
		CHECK(!fd_is_open(two[0]));
		CHECK(fd_is_open(two[1]));	/* still the caller's */
		/* fewer than UNIX_FDS: nothing taken */
		CHECK_EQ(message_new_incoming(&m, n), 0);
		memcpy(message_incoming_data(m), d, n);
		CHECK_EQ(message_parse_queued(m, NULL, 0, &taken), DC_E_UNIX_FDS);
		CHECK_EQ(taken, 0);
		message_unref(m);
		CHECK(fd_is_open(two[1]));
		close(two[1]);
		m = NULL;
	}
	free(d);

	/* fds without UNIX_FDS */
	d = raw(DC_LITTLE_ENDIAN, DC_MESSAGE_METHOD_CALL, 0, 1, one, 2, NULL, 0, &n);
	CHECK_EQ(parse(d, n, 0), 0);
	CHECK_EQ(parse(d, n, 1), DC_E_UNIX_FDS);
	free(d);
}

static void test_stitch(void)
{
	int e;

	for (e = 0; e < 2; ++e) {
		const struct field f[] = {
			{ DC_FIELD_PATH, 'o', "/org/example/Obj" },
			{ 42, 'X', "unknown field" },
			{ DC_FIELD_SENDER, 's', ":1.99" },
			{ DC_FIELD_INTERFACE, 's', "org.example.Iface" },
			{ DC_FIELD_MEMBER, 's', "Changed" },
			{ DC_FIELD_SIGNATURE, 'g', "uu" },
			{ 17, 's', "another" },
			{ DC_FIELD_CONTAINER_INSTANCE, 'o', "/forged/container" },
		};
		struct message *m = NULL, *s = NULL, *s2 = NULL, *p = NULL, *none = NULL;
		struct iovec iov[2];
		uint8_t *wire;
		size_t n, bn;
		void *body = body_u32s(endians[e], "uu", 1, 2, &bn);
		uint8_t *d = raw(endians[e], DC_MESSAGE_SIGNAL, 0, 77, f, 8, body, bn, &n);
		const char *arg;

		CHECK_EQ(message_new_from_data(&m, d, n, NULL, 0), 0);
		CHECK_STR(m->sender, ":1.99");

		/* sender replaced, byte order kept, body shared */
		CHECK_EQ(message_stitch_sender(m, ":1.5", &s), 0);
		CHECK_STR(s->sender, ":1.5");
		CHECK_EQ(s->endian, endians[e]);
		CHECK(s->body == m->body);
		CHECK_EQ(s->body_size, m->body_size);
		CHECK_STR(s->path, m->path);
		CHECK_STR(s->interface, m->interface);
		CHECK_STR(s->member, m->member);
		CHECK_STR(s->signature, "uu");
		CHECK_EQ(s->serial, 77);
		CHECK_EQ(s->type, DC_MESSAGE_SIGNAL);
		CHECK(s->header != m->header);

		/* the wire form re-parses to the same message, without unknown fields */
		message_get_iovec(s, iov);
		CHECK_EQ(iov[0].iov_len % 8, 0);
		CHECK(iov[1].iov_base == (void *)m->body);
		wire = malloc(iov[0].iov_len + iov[1].iov_len);
		memcpy(wire, iov[0].iov_base, iov[0].iov_len);
		memcpy(wire + iov[0].iov_len, iov[1].iov_base, iov[1].iov_len);
		CHECK(!memcmp(wire + iov[0].iov_len, body, bn));
		n = iov[0].iov_len + iov[1].iov_len;
		CHECK_EQ(message_new_from_data(&p, wire, n, NULL, 0), 0);
		CHECK_STR(p->sender, ":1.5");
		CHECK_STR(p->path, "/org/example/Obj");
		CHECK_STR(p->interface, "org.example.Iface");
		CHECK_STR(p->member, "Changed");
		CHECK_EQ(p->endian, endians[e]);
		CHECK(!memmem(wire, iov[0].iov_len, "unknown field", 13));
		CHECK(!memmem(wire, iov[0].iov_len, "another", 7));
		CHECK(!memmem(wire, iov[0].iov_len, "/forged/container", 17));
		CHECK(!memmem(wire, iov[0].iov_len, ":1.99", 5));
		/* the stitched header is no bigger than needed */
		CHECK(iov[0].iov_len < m->header_size);
		message_unref(p);
		free(wire);

		/* stitching a stitched copy: refers to the original owner */
		CHECK_EQ(message_stitch_sender(s, "org.example.Name", &s2), 0);
		CHECK(s2->parent == m);
		CHECK_STR(s2->sender, "org.example.Name");
		CHECK(s2->body == m->body);

		/* drop the sender entirely */
		CHECK_EQ(message_stitch_sender(m, NULL, &none), 0);
		CHECK(!none->sender);
		message_get_iovec(none, iov);
		CHECK(!memmem(iov[0].iov_base, iov[0].iov_len, ":1.99", 5));

		/* invalid sender */
		CHECK_EQ(message_stitch_sender(m, "not a name", &p), -EINVAL);
		CHECK_EQ(message_stitch_sender(m, ":1", &p), -EINVAL);

		/* args survive stitching (cache copied or recomputed) */
		CHECK_EQ(message_get_arg(m, 0, &arg), 0);
		CHECK_EQ(message_get_arg(s2, 0, &arg), 0);

		/* the original may go first: the copies keep the body alive */
		message_unref(m);
		CHECK(!memcmp(s->body, body, bn));
		message_unref(s);
		CHECK(!memcmp(s2->body, body, bn));
		message_unref(s2);
		message_unref(none);
		free(d);
		free(body);
	}
}

/*
 * A header as clients send it (no SENDER, no unknown field, fields in any
 * order): stitching copies the fields as they are and appends SENDER.
 */
static void test_stitch_plain(void)
{
	int e;

	for (e = 0; e < 2; ++e) {
		const struct field f[] = {
			{ DC_FIELD_PATH, 'o', "/org/example/Obj" },
			{ DC_FIELD_MEMBER, 's', "Echo" },
			{ DC_FIELD_SIGNATURE, 'g', "uu" },
			{ DC_FIELD_INTERFACE, 's', "org.example.Iface" },
			{ DC_FIELD_DESTINATION, 's', "org.example.Dest" },
		};
		struct message *m = NULL, *s = NULL, *s2 = NULL, *p = NULL, *none = NULL;
		struct iovec iov[2];
		uint8_t *wire;
		size_t n, bn, flen;
		void *body = body_u32s(endians[e], "uu", 3, 4, &bn);
		uint8_t *d = raw(endians[e], DC_MESSAGE_METHOD_CALL, DC_FLAG_NO_AUTO_START, 9, f, 5,
				 body, bn, &n);
		const char *arg;

		CHECK_EQ(message_new_from_data(&m, d, n, NULL, 0), 0);
		CHECK_EQ(message_get_arg(m, 1, &arg), 0);
		CHECK_EQ(message_stitch_sender(m, ":1.12345", &s), 0);
		CHECK(s->header != m->header);
		CHECK(s->body == m->body);
		CHECK_STR(s->sender, ":1.12345");
		CHECK_STR(s->path, "/org/example/Obj");
		CHECK_STR(s->interface, "org.example.Iface");
		CHECK_STR(s->member, "Echo");
		CHECK_STR(s->destination, "org.example.Dest");
		CHECK_STR(s->signature, "uu");
		CHECK_EQ(s->flags, DC_FLAG_NO_AUTO_START);
		/* the fields point into the copy's own header */
		CHECK((const uint8_t *)s->member > s->header &&
		      (const uint8_t *)s->member < s->header + s->header_size);
		CHECK((const uint8_t *)s->sender < s->header + s->header_size);

		/* the original fields byte for byte, then SENDER */
		message_get_iovec(s, iov);
		CHECK_EQ(iov[0].iov_len % 8, 0);
		CHECK(!memcmp(iov[0].iov_base, m->header, 12));
		CHECK(!memcmp((uint8_t *)iov[0].iov_base + 16, m->header + 16, m->header_size - 16));
		CHECK_EQ(((uint8_t *)iov[0].iov_base)[m->header_size], DC_FIELD_SENDER);
		flen = dc_load_u32((uint8_t *)iov[0].iov_base + 12, endians[e]);
		CHECK_EQ(flen, m->header_size - 16 + 8 + strlen(":1.12345") + 1);
		CHECK_EQ(iov[0].iov_len, 16 + ALIGN_TO(flen, (size_t)8));

		/* it re-parses to the same message */
		wire = malloc(iov[0].iov_len + iov[1].iov_len);
		memcpy(wire, iov[0].iov_base, iov[0].iov_len);
		memcpy(wire + iov[0].iov_len, iov[1].iov_base, iov[1].iov_len);
		CHECK_EQ(message_new_from_data(&p, wire, iov[0].iov_len + iov[1].iov_len, NULL, 0),
			 0);
		CHECK_STR(p->sender, ":1.12345");
		CHECK_STR(p->path, "/org/example/Obj");
		CHECK_STR(p->interface, "org.example.Iface");
		CHECK_STR(p->member, "Echo");
		CHECK_STR(p->destination, "org.example.Dest");
		CHECK_EQ(p->serial, 9);
		CHECK_EQ(message_get_arg(p, 1, &arg), 0);
		message_unref(p);
		free(wire);

		/* a stitched copy holds SENDER: stitching it again rebuilds the header */
		CHECK_EQ(message_stitch_sender(s, ":1.2", &s2), 0);
		CHECK_STR(s2->sender, ":1.2");
		CHECK_STR(s2->member, "Echo");
		CHECK(s2->parent == m);

		/* no sender: the header unchanged */
		CHECK_EQ(message_stitch_sender(m, NULL, &none), 0);
		CHECK(!none->sender);
		message_get_iovec(none, iov);
		CHECK_EQ(iov[0].iov_len, m->header_size);
		CHECK(!memcmp(iov[0].iov_base, m->header, m->header_size));
		CHECK_STR(none->destination, "org.example.Dest");

		message_unref(m);
		message_unref(s);
		CHECK_STR(s2->path, "/org/example/Obj");
		message_unref(s2);
		message_unref(none);
		free(d);
		free(body);
	}
}

static void test_builder(void)
{
	struct message_builder b;
	struct message *call = NULL, *reply = NULL, *err = NULL, *sig = NULL, *p = NULL;
	struct iovec iov[2];
	struct dc_reader r;
	const char *s;
	uint32_t u;
	uint8_t *wire;

	/* a call, as a client would send it */
	message_builder_init_method_call(&b, DC_SERVICE_DBUS, DC_PATH_DBUS, DC_INTERFACE_DBUS,
					 "RequestName", "su");
	b.sender = ":1.3";
	CHECK_EQ(dc_writer_write(&b.body, "su", "org.example.Name", 4), 0);
	CHECK_EQ(message_builder_seal(&b, 3, &call), 0);
	message_builder_deinit(&b);
	CHECK_EQ(call->endian, DC_NATIVE_ENDIAN);
	CHECK_STR(call->member, "RequestName");
	CHECK_STR(call->signature, "su");
	CHECK(message_expects_reply(call));

	/* it re-parses, and the driver reads its arguments */
	message_get_iovec(call, iov);
	wire = malloc(iov[0].iov_len + iov[1].iov_len);
	memcpy(wire, iov[0].iov_base, iov[0].iov_len);
	memcpy(wire + iov[0].iov_len, iov[1].iov_base, iov[1].iov_len);
	CHECK_EQ(message_new_from_data(&p, wire, iov[0].iov_len + iov[1].iov_len, NULL, 0), 0);
	free(wire);
	CHECK_EQ(message_get_body_reader(p, &r), 0);
	CHECK_EQ(dc_reader_read(&r, "su", &s, &u), 0);
	CHECK_STR(s, "org.example.Name");
	CHECK_EQ(u, 4);
	CHECK_STR(p->destination, DC_SERVICE_DBUS);
	CHECK_STR(p->sender, ":1.3");
	message_unref(p);

	/* the reply */
	message_builder_init_method_return(&b, call, "u");
	b.sender = DC_SERVICE_DBUS;
	CHECK_EQ(dc_writer_write(&b.body, "u", DC_REQUEST_NAME_REPLY_PRIMARY_OWNER), 0);
	CHECK_EQ(message_builder_seal(&b, 1, &reply), 0);
	message_builder_deinit(&b);
	CHECK_EQ(reply->type, DC_MESSAGE_METHOD_RETURN);
	CHECK_EQ(reply->reply_serial, 3);
	CHECK_STR(reply->destination, ":1.3");
	CHECK_STR(reply->sender, DC_SERVICE_DBUS);
	CHECK(!message_expects_reply(reply));

	/* an error */
	CHECK_EQ(message_new_error(&err, call, DC_SERVICE_DBUS, 2, DC_ERROR_ACCESS_DENIED,
				   "no, thanks"), 0);
	CHECK_EQ(err->type, DC_MESSAGE_ERROR);
	CHECK_STR(err->error_name, DC_ERROR_ACCESS_DENIED);
	CHECK_EQ(err->reply_serial, 3);
	CHECK_EQ(message_get_arg(err, 0, &s), 's');
	CHECK_STR(s, "no, thanks");
	message_get_iovec(err, iov);
	wire = malloc(iov[0].iov_len + iov[1].iov_len);
	memcpy(wire, iov[0].iov_base, iov[0].iov_len);
	memcpy(wire + iov[0].iov_len, iov[1].iov_base, iov[1].iov_len);
	CHECK_EQ(message_new_from_data(&p, wire, iov[0].iov_len + iov[1].iov_len, NULL, 0), 0);
	free(wire);
	CHECK_STR(p->error_name, DC_ERROR_ACCESS_DENIED);
	message_unref(p);
	message_unref(err);
	CHECK_EQ(message_new_error(&err, call, NULL, 2, DC_ERROR_FAILED, NULL), 0);
	CHECK_EQ(err->body_size, 0);
	CHECK_STR(err->signature, "");
	message_unref(err);
	/* invalid UTF-8 text or error name */
	CHECK_EQ(message_new_error(&err, call, NULL, 2, DC_ERROR_FAILED, "\xff"), -EINVAL);
	CHECK_EQ(message_new_error(&err, call, NULL, 2, "Failed", "x"), -EINVAL);

	/* a signal */
	message_builder_init_signal(&b, DC_PATH_DBUS, DC_INTERFACE_DBUS, "NameOwnerChanged",
				    "sss");
	b.sender = DC_SERVICE_DBUS;
	CHECK_EQ(dc_writer_write(&b.body, "sss", "org.example.Name", "", ":1.3"), 0);
	CHECK_EQ(message_builder_seal(&b, 4, &sig), 0);
	message_builder_deinit(&b);
	CHECK_EQ(message_get_arg(sig, 0, &s), 's');
	CHECK_STR(s, "org.example.Name");
	CHECK_EQ(message_get_arg(sig, 1, &s), 's');
	CHECK_STR(s, "");
	CHECK_EQ(message_get_arg(sig, 2, &s), 's');
	CHECK_STR(s, ":1.3");
	CHECK_EQ(message_get_arg(sig, 3, &s), 0);
	message_unref(sig);

	/* builder errors */
	message_builder_init_signal(&b, DC_PATH_DBUS, NULL, "X", NULL);
	CHECK_EQ(message_builder_seal(&b, 4, &sig), -EINVAL);	/* no interface */
	message_builder_deinit(&b);
	message_builder_init_signal(&b, "bad", "a.b", "X", NULL);
	CHECK_EQ(message_builder_seal(&b, 4, &sig), -EINVAL);
	message_builder_deinit(&b);
	message_builder_init_signal(&b, "/a", "a.b", "X", NULL);
	CHECK_EQ(message_builder_seal(&b, 0, &sig), -EINVAL);	/* serial 0 */
	message_builder_deinit(&b);
	message_builder_init_signal(&b, "/a", "a.b", "X", "s");
	CHECK_EQ(message_builder_seal(&b, 1, &sig), -EINVAL);	/* body missing */
	message_builder_deinit(&b);
	message_builder_init_method_call(&b, "1bad", "/a", NULL, "X", NULL);
	CHECK_EQ(message_builder_seal(&b, 1, &sig), -EINVAL);
	message_builder_deinit(&b);

	message_unref(reply);
	message_unref(call);
}

static void test_args(void)
{
	struct message_builder b;
	struct message *m = NULL;
	const char *s;
	char sig[80];
	int i;

	/* mixed types: only s, o, g are reported, at their position */
	message_builder_init_signal(&b, "/a", "a.b", "S", "sua{ss}ogvs");
	dc_writer_write(&b.body, "su", "zero", 1);
	dc_writer_open(&b.body, 'a', NULL);
	dc_writer_open(&b.body, '{', NULL);
	dc_writer_write(&b.body, "ss", "k", "v");
	dc_writer_close(&b.body);
	dc_writer_close(&b.body);
	dc_writer_write(&b.body, "og", "/three", "a{sv}");
	dc_writer_open(&b.body, 'v', "s");
	dc_writer_write(&b.body, "s", "in variant");
	dc_writer_close(&b.body);
	dc_writer_write(&b.body, "s", "six");
	CHECK_EQ(message_builder_seal(&b, 1, &m), 0);
	message_builder_deinit(&b);

	CHECK_EQ(message_get_arg(m, 0, &s), 's');
	CHECK_STR(s, "zero");
	CHECK_EQ(message_get_arg(m, 1, &s), 0);
	CHECK_EQ(message_get_arg(m, 2, &s), 0);
	CHECK_EQ(message_get_arg(m, 3, &s), 'o');
	CHECK_STR(s, "/three");
	CHECK_EQ(message_get_arg(m, 4, &s), 'g');
	CHECK_STR(s, "a{sv}");
	CHECK_EQ(message_get_arg(m, 5, &s), 0);
	CHECK_EQ(message_get_arg(m, 6, &s), 's');
	CHECK_STR(s, "six");
	CHECK_EQ(message_get_arg(m, 7, &s), 0);
	CHECK_EQ(message_get_arg(m, 1000, &s), 0);
	message_unref(m);

	/* 70 string arguments: 0..63 are reported, 64+ are not */
	memset(sig, 's', 70);
	sig[70] = 0;
	message_builder_init_signal(&b, "/a", "a.b", "S", sig);
	for (i = 0; i < 70; ++i) {
		char v[16];

		snprintf(v, sizeof(v), "v%d", i);
		dc_writer_write(&b.body, "s", v);
	}
	CHECK_EQ(message_builder_seal(&b, 1, &m), 0);
	message_builder_deinit(&b);
	for (i = 0; i < 64; ++i) {
		char v[16];

		snprintf(v, sizeof(v), "v%d", i);
		CHECK_EQ(message_get_arg(m, i, &s), 's');
		CHECK_STR(s, v);
	}
	CHECK_EQ(message_get_arg(m, 64, &s), 0);
	CHECK_EQ(message_get_arg(m, 69, &s), 0);
	message_unref(m);
}

int main(void)
{
	test_frame_size();
	test_parse_valid();
	test_header_errors();
	test_body_errors();
	test_fds();
	test_stitch();
	test_stitch_plain();
	test_builder();
	test_args();
	printf("message: ok\n");
	return 0;
}
