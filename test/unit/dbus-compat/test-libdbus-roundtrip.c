/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Round trips against libdbus, the reference implementation:
 *  - messages built with libdbus (many signatures, nested containers,
 *    variants; both byte orders) are parsed by us and every value compared;
 *  - messages built with our builder/writer are accepted by
 *    dbus_message_demarshal() and read back identically;
 *  - a stitched message (either byte order) is accepted by libdbus, which
 *    reports the stitched sender;
 *  - for every single-byte corruption of sample messages, whatever we accept
 *    libdbus accepts too (we are never laxer than the reference).
 */

#include <dbus/dbus.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "dbus-compat/marshal.h"
#include "dbus-compat/message.h"
#include "dbus-compat/protocol.h"
#include "dbus-compat/signature.h"
#include "util/macro.h"
#include "check.h"

static bool str_eq(const char *a, const char *b)
{
	return a && b && !strcmp(a, b);
}

static bool opt_str_eq(const char *a, const char *b)
{
	return (!a && !b) || str_eq(a, b);
}

/* Compare what libdbus reads (it) with what our reader reads (r), recursively. */
static void compare(DBusMessageIter *it, struct dc_reader *r)
{
	int t;

	while ((t = dbus_message_iter_get_arg_type(it)) != DBUS_TYPE_INVALID) {
		/* libdbus reports structs and dict entries as 'r' and 'e' */
		CHECK_EQ(dc_reader_peek(r), t == DBUS_TYPE_DICT_ENTRY ? '{' :
					    t == DBUS_TYPE_STRUCT ? '(' : t);

		if (dbus_type_is_basic(t)) {
			DBusBasicValue v;
			union {
				uint8_t y;
				bool b;
				uint16_t q;
				uint32_t u;
				uint64_t t;
				double d;
				const char *s;
			} o;

			memset(&v, 0, sizeof(v));
			memset(&o, 0, sizeof(o));
			dbus_message_iter_get_basic(it, &v);
			CHECK_EQ(dc_reader_read_basic(r, (char)t, &o), 0);
			switch (t) {
			case 'y':
				CHECK_EQ(v.byt, o.y);
				break;
			case 'b':
				CHECK_EQ(!!v.bool_val, o.b);
				break;
			case 'n':
			case 'q':
				CHECK_EQ(v.u16, o.q);
				break;
			case 'i':
			case 'u':
				CHECK_EQ(v.u32, o.u);
				break;
			case 'h':
				/*
				 * Any index is accepted, as by libdbus (these
				 * messages have no fds: it reads -1 for every one).
				 */
				CHECK_EQ(v.fd, -1);
				break;
			case 'x':
			case 't':
				CHECK(v.u64 == o.t);
				break;
			case 'd':
				CHECK(!memcmp(&v.dbl, &o.d, 8));
				break;
			case 's':
			case 'o':
			case 'g':
				CHECK(str_eq(v.str, o.s));
				break;
			default:
				CHECK(0);
			}
		} else {
			DBusMessageIter sub;

			dbus_message_iter_recurse(it, &sub);
			if (t == 'v') {
				char *ls = dbus_message_iter_get_signature(&sub);
				const char *os;
				size_t n;

				CHECK_EQ(dc_reader_enter(r, 'v'), 0);
				n = dc_reader_peek_signature(r, &os);
				CHECK(n == strlen(ls) && !memcmp(ls, os, n));
				dbus_free(ls);
			} else {
				CHECK_EQ(dc_reader_enter(r, t == DBUS_TYPE_DICT_ENTRY ? '{' :
							    t == DBUS_TYPE_STRUCT ? '(' : (char)t),
					 0);
			}
			compare(&sub, r);
			CHECK_EQ(dc_reader_peek(r), 0);
			CHECK_EQ(dc_reader_exit(r), 0);
		}
		dbus_message_iter_next(it);
	}
	CHECK_EQ(dc_reader_peek(r), 0);
}

/* Header fields and body of a libdbus message vs. ours. */
static void compare_message_ex(DBusMessage *lm, struct message *m, bool sender)
{
	DBusMessageIter it;
	struct dc_reader r;

	CHECK_EQ(dbus_message_get_type(lm), m->type);
	CHECK_EQ(dbus_message_get_serial(lm), m->serial);
	CHECK_EQ(dbus_message_get_reply_serial(lm), m->reply_serial);
	CHECK(opt_str_eq(dbus_message_get_path(lm), m->path));
	CHECK(opt_str_eq(dbus_message_get_interface(lm), m->interface));
	CHECK(opt_str_eq(dbus_message_get_member(lm), m->member));
	CHECK(opt_str_eq(dbus_message_get_error_name(lm), m->error_name));
	CHECK(opt_str_eq(dbus_message_get_destination(lm), m->destination));
	if (sender)
		CHECK(opt_str_eq(dbus_message_get_sender(lm), m->sender));
	CHECK(str_eq(dbus_message_get_signature(lm), m->signature));
	CHECK_EQ(!!dbus_message_get_no_reply(lm), !!(m->flags & DC_FLAG_NO_REPLY_EXPECTED));
	CHECK_EQ(!dbus_message_get_auto_start(lm), !!(m->flags & DC_FLAG_NO_AUTO_START));

	CHECK_EQ(message_get_body_reader(m, &r), 0);
	dbus_message_iter_init(lm, &it);
	compare(&it, &r);
	CHECK(dc_reader_at_end(&r));
}

static void compare_message(DBusMessage *lm, struct message *m)
{
	compare_message_ex(lm, m, true);
}

/* ---------------------------------------------- bodies built with libdbus */

static void append_basic(DBusMessageIter *it, int type, const void *v)
{
	CHECK(dbus_message_iter_append_basic(it, type, v));
}

static void lib_body_basic(DBusMessage *m)
{
	DBusMessageIter it;
	unsigned char y = 0xfe;
	dbus_bool_t b = TRUE, f = FALSE;
	dbus_int16_t n = -32768;
	dbus_uint16_t q = 0xffff;
	dbus_int32_t i = INT32_MIN;
	dbus_uint32_t u = 0xdeadbeef;
	dbus_int64_t x = INT64_MIN;
	dbus_uint64_t t = UINT64_MAX;
	double d = -0.0, d2 = 1e300;
	const char *s = "h\xc3\xa9llo \xf0\x9f\x98\x80", *e = "", *o = "/a/b_c/D0";
	const char *g = "a{sv}(ii)";

	dbus_message_iter_init_append(m, &it);
	append_basic(&it, 'y', &y);
	append_basic(&it, 'b', &b);
	append_basic(&it, 'n', &n);
	append_basic(&it, 'y', &y);	/* misalign what follows */
	append_basic(&it, 'q', &q);
	append_basic(&it, 'b', &f);
	append_basic(&it, 'i', &i);
	append_basic(&it, 'y', &y);
	append_basic(&it, 'x', &x);
	append_basic(&it, 'u', &u);
	append_basic(&it, 't', &t);
	append_basic(&it, 'd', &d);
	append_basic(&it, 'y', &y);
	append_basic(&it, 'd', &d2);
	append_basic(&it, 's', &s);
	append_basic(&it, 's', &e);
	append_basic(&it, 'o', &o);
	append_basic(&it, 'g', &g);
	append_basic(&it, 'g', &e);
}

static void lib_body_arrays(DBusMessage *m)
{
	static const unsigned char bytes[] = { 1, 2, 3, 4, 5 };
	static const dbus_int32_t ints[] = { -1, 0, 1, 0x7fffffff };
	static const dbus_uint64_t longs[] = { 1, UINT64_MAX, 0x0102030405060708ull };
	static const double dbls[] = { 0.5, -2.25 };
	const unsigned char *pb = bytes;
	const dbus_int32_t *pi = ints;
	const dbus_uint64_t *pt = longs;
	const double *pd = dbls;
	DBusMessageIter it, a, aa;
	const char *strs[] = { "one", "", "three" }, *paths[] = { "/", "/x" };
	unsigned char y = 7;
	int k;

	dbus_message_iter_init_append(m, &it);
	append_basic(&it, 'y', &y);
	CHECK(dbus_message_iter_open_container(&it, 'a', "y", &a));
	CHECK(dbus_message_iter_append_fixed_array(&a, 'y', &pb, 5));
	CHECK(dbus_message_iter_close_container(&it, &a));
	CHECK(dbus_message_iter_open_container(&it, 'a', "y", &a));	/* empty */
	CHECK(dbus_message_iter_close_container(&it, &a));
	CHECK(dbus_message_iter_open_container(&it, 'a', "i", &a));
	CHECK(dbus_message_iter_append_fixed_array(&a, 'i', &pi, 4));
	CHECK(dbus_message_iter_close_container(&it, &a));
	append_basic(&it, 'y', &y);
	CHECK(dbus_message_iter_open_container(&it, 'a', "t", &a));
	CHECK(dbus_message_iter_append_fixed_array(&a, 't', &pt, 3));
	CHECK(dbus_message_iter_close_container(&it, &a));
	CHECK(dbus_message_iter_open_container(&it, 'a', "t", &a));	/* empty, 8-aligned */
	CHECK(dbus_message_iter_close_container(&it, &a));
	CHECK(dbus_message_iter_open_container(&it, 'a', "d", &a));
	CHECK(dbus_message_iter_append_fixed_array(&a, 'd', &pd, 2));
	CHECK(dbus_message_iter_close_container(&it, &a));
	CHECK(dbus_message_iter_open_container(&it, 'a', "s", &a));
	for (k = 0; k < 3; ++k)
		append_basic(&a, 's', &strs[k]);
	CHECK(dbus_message_iter_close_container(&it, &a));
	CHECK(dbus_message_iter_open_container(&it, 'a', "o", &a));
	for (k = 0; k < 2; ++k)
		append_basic(&a, 'o', &paths[k]);
	CHECK(dbus_message_iter_close_container(&it, &a));
	CHECK(dbus_message_iter_open_container(&it, 'a', "ay", &a));
	for (k = 0; k < 3; ++k) {
		CHECK(dbus_message_iter_open_container(&a, 'a', "y", &aa));
		CHECK(dbus_message_iter_append_fixed_array(&aa, 'y', &pb, k));
		CHECK(dbus_message_iter_close_container(&a, &aa));
	}
	CHECK(dbus_message_iter_close_container(&it, &a));
	CHECK(dbus_message_iter_open_container(&it, 'a', "b", &a));
	for (k = 0; k < 3; ++k) {
		dbus_bool_t b = k & 1;

		append_basic(&a, 'b', &b);
	}
	CHECK(dbus_message_iter_close_container(&it, &a));
}

static void lib_body_dict(DBusMessage *m)
{
	DBusMessageIter it, a, e, v, vv, s, sa;
	const char *keys[] = { "int", "str", "nested", "struct", "dict" };
	dbus_int32_t i = 42;
	const char *str = "value";
	dbus_uint64_t t = 9;
	unsigned char y = 1;
	int k;

	dbus_message_iter_init_append(m, &it);
	CHECK(dbus_message_iter_open_container(&it, 'a', "{sv}", &a));
	for (k = 0; k < 5; ++k) {
		CHECK(dbus_message_iter_open_container(&a, DBUS_TYPE_DICT_ENTRY, NULL, &e));
		append_basic(&e, 's', &keys[k]);
		switch (k) {
		case 0:
			CHECK(dbus_message_iter_open_container(&e, 'v', "i", &v));
			append_basic(&v, 'i', &i);
			break;
		case 1:
			CHECK(dbus_message_iter_open_container(&e, 'v', "s", &v));
			append_basic(&v, 's', &str);
			break;
		case 2:	/* v(v(t)) */
			CHECK(dbus_message_iter_open_container(&e, 'v', "v", &v));
			CHECK(dbus_message_iter_open_container(&v, 'v', "t", &vv));
			append_basic(&vv, 't', &t);
			CHECK(dbus_message_iter_close_container(&v, &vv));
			break;
		case 3:	/* v((yt)as) */
			CHECK(dbus_message_iter_open_container(&e, 'v', "((yt)as)", &v));
			CHECK(dbus_message_iter_open_container(&v, DBUS_TYPE_STRUCT, NULL, &s));
			CHECK(dbus_message_iter_open_container(&s, DBUS_TYPE_STRUCT, NULL, &vv));
			append_basic(&vv, 'y', &y);
			append_basic(&vv, 't', &t);
			CHECK(dbus_message_iter_close_container(&s, &vv));
			CHECK(dbus_message_iter_open_container(&s, 'a', "s", &sa));
			append_basic(&sa, 's', &str);
			CHECK(dbus_message_iter_close_container(&s, &sa));
			CHECK(dbus_message_iter_close_container(&v, &s));
			break;
		case 4:	/* v(a{sv}) with one entry */
			CHECK(dbus_message_iter_open_container(&e, 'v', "a{sv}", &v));
			CHECK(dbus_message_iter_open_container(&v, 'a', "{sv}", &sa));
			CHECK(dbus_message_iter_open_container(&sa, DBUS_TYPE_DICT_ENTRY, NULL,
							       &s));
			append_basic(&s, 's', &str);
			CHECK(dbus_message_iter_open_container(&s, 'v', "y", &vv));
			append_basic(&vv, 'y', &y);
			CHECK(dbus_message_iter_close_container(&s, &vv));
			CHECK(dbus_message_iter_close_container(&sa, &s));
			CHECK(dbus_message_iter_close_container(&v, &sa));
			break;
		}
		CHECK(dbus_message_iter_close_container(&e, &v));
		CHECK(dbus_message_iter_close_container(&a, &e));
	}
	CHECK(dbus_message_iter_close_container(&it, &a));
	/* a{ia(ss)} */
	CHECK(dbus_message_iter_open_container(&it, 'a', "{ia(ss)}", &a));
	for (k = 0; k < 2; ++k) {
		CHECK(dbus_message_iter_open_container(&a, DBUS_TYPE_DICT_ENTRY, NULL, &e));
		append_basic(&e, 'i', &k);
		CHECK(dbus_message_iter_open_container(&e, 'a', "(ss)", &v));
		CHECK(dbus_message_iter_open_container(&v, DBUS_TYPE_STRUCT, NULL, &s));
		append_basic(&s, 's', &keys[k]);
		append_basic(&s, 's', &str);
		CHECK(dbus_message_iter_close_container(&v, &s));
		CHECK(dbus_message_iter_close_container(&e, &v));
		CHECK(dbus_message_iter_close_container(&a, &e));
	}
	CHECK(dbus_message_iter_close_container(&it, &a));
}

/* 32 nested arrays + variant nesting, the deepest things libdbus builds. */
static void lib_body_deep(DBusMessage *m)
{
	DBusMessageIter stack[40];
	char sig[40];
	unsigned char y = 5;
	int k;

	dbus_message_iter_init_append(m, &stack[0]);
	for (k = 0; k < 31; ++k) {
		memset(sig, 'a', 31 - k - 1);
		sig[31 - k - 1] = 'y';
		sig[31 - k] = 0;
		CHECK(dbus_message_iter_open_container(&stack[k], 'a', sig, &stack[k + 1]));
	}
	append_basic(&stack[31], 'y', &y);
	append_basic(&stack[31], 'y', &y);
	for (k = 31; k > 0; --k)
		CHECK(dbus_message_iter_close_container(&stack[k - 1], &stack[k]));

	for (k = 0; k < 20; ++k)
		CHECK(dbus_message_iter_open_container(&stack[k], 'v', k < 19 ? "v" : "y",
						       &stack[k + 1]));
	append_basic(&stack[20], 'y', &y);
	for (k = 20; k > 0; --k)
		CHECK(dbus_message_iter_close_container(&stack[k - 1], &stack[k]));
}

typedef void (*body_fn)(DBusMessage *m);

/*
 * A libdbus message of @type. libdbus always builds in native byte order
 * (appending converts a message to it), so the big-endian variants below are
 * produced by to_big_endian() and checked against libdbus' reading of them.
 */
static DBusMessage *lib_new(int type)
{
	DBusMessage *lm;

	switch (type) {
	case DC_MESSAGE_METHOD_CALL:
		lm = dbus_message_new_method_call("org.example.Dest", "/org/example",
						  "org.example.Iface", "Method");
		break;
	case DC_MESSAGE_SIGNAL:
		lm = dbus_message_new_signal("/org/example", "org.example.Iface", "Sig");
		break;
	default: {
		DBusMessage *call = dbus_message_new_method_call(NULL, "/a", NULL, "M");

		dbus_message_set_serial(call, 99);
		dbus_message_set_sender(call, ":1.8");
		lm = type == DC_MESSAGE_ERROR ?
			     dbus_message_new_error(call, "org.example.Error.Bad", NULL) :
			     dbus_message_new_method_return(call);
		dbus_message_unref(call);
		break;
	}
	}
	CHECK(lm);
	return lm;
}

/* Re-marshal the values under @r with @w (any byte orders). */
static void convert(struct dc_reader *r, struct dc_writer *w)
{
	char c;

	while ((c = dc_reader_peek(r))) {
		if (signature_is_basic(c)) {
			union {
				uint8_t bytes[8];
				bool b;
				const char *s;
			} v;

			CHECK_EQ(dc_reader_read_basic(r, c, &v), 0);
			CHECK_EQ(dc_writer_append(w, c, &v), 0);
		} else if (c == 'v') {
			const char *sig;

			CHECK_EQ(dc_reader_enter(r, 'v'), 0);
			/* the variant signature in the data is NUL-terminated */
			CHECK(dc_reader_peek_signature(r, &sig) > 0);
			CHECK_EQ(dc_writer_open(w, 'v', sig), 0);
			convert(r, w);
			CHECK_EQ(dc_writer_close(w), 0);
			CHECK_EQ(dc_reader_exit(r), 0);
		} else {
			CHECK_EQ(dc_reader_enter(r, c), 0);
			CHECK_EQ(dc_writer_open(w, c, NULL), 0);
			convert(r, w);
			CHECK_EQ(dc_writer_close(w), 0);
			CHECK_EQ(dc_reader_exit(r), 0);
		}
	}
}

/* The same message, big-endian, marshalled by us field by field. */
static char *to_big_endian(const struct message *m, size_t *size)
{
	const char *str[] = { NULL, m->path, m->interface, m->member, m->error_name, NULL,
			      m->destination, m->sender, *m->signature ? m->signature : NULL };
	struct dc_writer w;
	struct dc_reader r;
	uint8_t *hdr, *body;
	size_t hn, bn, hs;
	char *out;
	int code;

	dc_writer_init(&w, DC_BIG_ENDIAN, m->signature);
	CHECK_EQ(message_get_body_reader(m, &r), 0);
	convert(&r, &w);
	CHECK_EQ(dc_writer_finish(&w, (void **)&body, &bn), 0);
	dc_writer_deinit(&w);

	dc_writer_init(&w, DC_BIG_ENDIAN, "yyyyuua(yv)");
	dc_writer_write(&w, "yyyyuu", 'B', m->type, m->flags, 1, (uint32_t)bn, m->serial);
	dc_writer_open(&w, 'a', NULL);
	for (code = 1; code <= 8; ++code) {
		const char *t = code == 1 ? "o" : code == 5 ? "u" : code == 8 ? "g" : "s";

		if (code == 5 ? !m->reply_serial : !str[code])
			continue;
		dc_writer_open(&w, '(', NULL);
		dc_writer_write(&w, "y", code);
		dc_writer_open(&w, 'v', t);
		if (code == 5)
			dc_writer_write(&w, "u", m->reply_serial);
		else
			dc_writer_write(&w, t, str[code]);
		dc_writer_close(&w);
		dc_writer_close(&w);
	}
	dc_writer_close(&w);
	CHECK_EQ(dc_writer_finish(&w, (void **)&hdr, &hn), 0);
	dc_writer_deinit(&w);

	hs = ALIGN_TO(hn, (size_t)8);
	out = calloc(1, hs + bn + 1);
	memcpy(out, hdr, hn);
	if (bn)
		memcpy(out + hs, body, bn);
	free(hdr);
	free(body);
	*size = hs + bn;
	return out;
}

static void demarshal_check(const char *wire, size_t n, DBusMessage **ret)
{
	DBusError err;

	dbus_error_init(&err);
	*ret = dbus_message_demarshal(wire, (int)n, &err);
	if (!*ret)
		fprintf(stderr, "libdbus refused: %s\n", err.message);
	CHECK(*ret);
}

/* Our stitched copy of @m: libdbus accepts it, in @m's byte order, with the sender. */
static void check_stitched(struct message *m)
{
	struct message *s = NULL;
	struct iovec iov[2];
	DBusMessage *back;
	char *sw;

	CHECK_EQ(message_stitch_sender(m, ":1.42", &s), 0);
	message_get_iovec(s, iov);
	sw = malloc(iov[0].iov_len + iov[1].iov_len);
	memcpy(sw, iov[0].iov_base, iov[0].iov_len);
	memcpy(sw + iov[0].iov_len, iov[1].iov_base, iov[1].iov_len);
	CHECK_EQ(sw[0], m->endian);
	demarshal_check(sw, iov[0].iov_len + iov[1].iov_len, &back);
	CHECK(str_eq(dbus_message_get_sender(back), ":1.42"));
	compare_message(back, s);
	compare_message_ex(back, m, false);	/* same values as before, sender aside */
	dbus_message_unref(back);
	free(sw);
	message_unref(s);
}

/*
 * libdbus -> bytes -> our parser; compare; stitch -> libdbus. Then the same
 * message big-endian: libdbus and we must read the same values as from the
 * little-endian original.
 */
static void roundtrip_from_libdbus(int type, body_fn fn)
{
	struct message *m = NULL, *mb = NULL;
	DBusMessage *lm, *lb;
	char *wire = NULL, *be;
	size_t bn;
	int len = 0;

	lm = lib_new(type);
	if (fn)
		fn(lm);
	dbus_message_set_serial(lm, 1234);
	CHECK(dbus_message_marshal(lm, &wire, &len));
	CHECK_EQ(wire[0], DC_NATIVE_ENDIAN);

	CHECK_EQ(message_new_from_data(&m, wire, (size_t)len, NULL, 0), 0);
	compare_message(lm, m);
	check_stitched(m);

	be = to_big_endian(m, &bn);
	demarshal_check(be, bn, &lb);
	compare_message(lb, m);
	CHECK_EQ(message_new_from_data(&mb, be, bn, NULL, 0), 0);
	CHECK_EQ(mb->endian, DC_BIG_ENDIAN);
	compare_message(lb, mb);
	compare_message(lm, mb);
	check_stitched(mb);

	message_unref(mb);
	dbus_message_unref(lb);
	free(be);
	message_unref(m);
	dbus_free(wire);
	dbus_message_unref(lm);
}

static void test_from_libdbus(void)
{
	static const body_fn fns[] = { NULL, lib_body_basic, lib_body_arrays, lib_body_dict,
				       lib_body_deep };
	static const int types[] = { DC_MESSAGE_METHOD_CALL, DC_MESSAGE_SIGNAL,
				     DC_MESSAGE_METHOD_RETURN, DC_MESSAGE_ERROR };
	size_t t, f;

	for (t = 0; t < 4; ++t)
		for (f = 0; f < sizeof(fns) / sizeof(*fns); ++f)
			roundtrip_from_libdbus(types[t], fns[f]);
}

/* --------------------------------------------------- ours -> libdbus */

static struct message *our_message(int which)
{
	struct message_builder b;
	struct dc_writer *w = &b.body;
	struct message *m = NULL;
	int i;

	switch (which) {
	case 0:
		message_builder_init_method_call(&b, "org.example.Dest", "/a/b", "org.example.I",
						 "Call", "ybnqiuxtdsogv");
		dc_writer_write(w, "ybnqiuxtdsog", 0xff, 1, -5, 65535, -7, 7u, INT64_MIN,
				UINT64_MAX, 3.25, "str\xc3\xa9", "/o", "a(ii)");
		dc_writer_open(w, 'v', "a{sv}");
		dc_writer_open(w, 'a', NULL);
		dc_writer_open(w, '{', NULL);
		dc_writer_write(w, "s", "k");
		dc_writer_open(w, 'v', "(yt)");
		dc_writer_open(w, '(', NULL);
		dc_writer_write(w, "yt", 1, (uint64_t)2);
		dc_writer_close(w);
		dc_writer_close(w);
		dc_writer_close(w);
		dc_writer_close(w);
		dc_writer_close(w);
		b.flags = DC_FLAG_NO_AUTO_START;
		break;
	case 1: {
		static const uint64_t ts[] = { 1, 2, 3 };

		message_builder_init_signal(&b, "/s", "org.example.S", "Sig", "a(ys)atayaas");
		dc_writer_open(w, 'a', NULL);
		for (i = 0; i < 5; ++i) {
			dc_writer_open(w, '(', NULL);
			dc_writer_write(w, "ys", i, i % 2 ? "odd" : "");
			dc_writer_close(w);
		}
		dc_writer_close(w);
		dc_writer_append_array(w, 't', ts, 3);
		dc_writer_append_array(w, 'y', "bytes", 5);
		dc_writer_open(w, 'a', NULL);
		dc_writer_open(w, 'a', NULL);
		dc_writer_close(w);
		dc_writer_open(w, 'a', NULL);
		dc_writer_write(w, "ss", "x", "y");
		dc_writer_close(w);
		dc_writer_close(w);
		b.sender = "org.freedesktop.DBus";
		break;
	}
	case 2: {
		struct message call = { .serial = 17, .sender = ":1.3" };

		message_builder_init_error(&b, &call, DC_ERROR_SERVICE_UNKNOWN, "s");
		dc_writer_write(w, "s", "The name is not activatable");
		b.sender = DC_SERVICE_DBUS;
		break;
	}
	default: {
		struct message call = { .serial = 5, .sender = ":1.3" };

		message_builder_init_method_return(&b, &call, "a{sv}");
		dc_writer_open(w, 'a', NULL);
		dc_writer_close(w);
		break;
	}
	}
	CHECK_EQ(message_builder_seal(&b, 100 + which, &m), 0);
	message_builder_deinit(&b);
	return m;
}

static void test_to_libdbus(void)
{
	int which;

	for (which = 0; which < 4; ++which) {
		struct message *m = our_message(which), *s = NULL;
		struct iovec iov[2];
		DBusMessage *lm;
		DBusError err;
		char *wire;
		size_t n;
		int k;

		for (k = 0; k < 2; ++k) {
			struct message *cur = k ? s : m;

			message_get_iovec(cur, iov);
			n = iov[0].iov_len + iov[1].iov_len;
			wire = malloc(n);
			memcpy(wire, iov[0].iov_base, iov[0].iov_len);
			memcpy(wire + iov[0].iov_len, iov[1].iov_base, iov[1].iov_len);
			CHECK_EQ(dbus_message_demarshal_bytes_needed(wire, (int)n), (int)n);
			dbus_error_init(&err);
			lm = dbus_message_demarshal(wire, (int)n, &err);
			if (!lm)
				fprintf(stderr, "libdbus refused our message %d: %s\n", which,
					err.message);
			CHECK(lm);
			compare_message(lm, cur);
			dbus_message_unref(lm);
			free(wire);
			if (!k)
				CHECK_EQ(message_stitch_sender(m, ":1.1000", &s), 0);
		}
		CHECK(str_eq(s->sender, ":1.1000"));

		/* big-endian: libdbus reads the same values */
		{
			struct message *mb = NULL;
			char *be = to_big_endian(m, &n);

			demarshal_check(be, n, &lm);
			compare_message(lm, m);
			CHECK_EQ(message_new_from_data(&mb, be, n, NULL, 0), 0);
			compare_message(lm, mb);
			check_stitched(mb);
			message_unref(mb);
			dbus_message_unref(lm);
			free(be);
		}
		message_unref(s);
		message_unref(m);
	}
}

struct tally {
	unsigned long ours, theirs, both;
};

/* We may refuse what libdbus accepts (we are stricter), never the reverse. */
static void check_agreement(const char *wire, int len, struct tally *t, const char *what)
{
	struct message *m = NULL;
	DBusMessage *l;
	DBusError err;
	int r;

	r = message_new_from_data(&m, wire, (size_t)len, NULL, 0);
	CHECK(r >= 0);
	dbus_error_init(&err);
	l = dbus_message_demarshal(wire, len, &err);
	if (dbus_error_is_set(&err))
		dbus_error_free(&err);
	if (r == 0 && !l) {
		fprintf(stderr, "we accept what libdbus refuses: %s\n", what);
		CHECK(0);
	}
	t->ours += r == 0;
	t->theirs += !!l;
	if (r == 0 && l) {
		/* both read the same header fields and values */
		compare_message(l, m);
		++t->both;
	}
	if (l)
		dbus_message_unref(l);
	message_unref(m);
}

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static uint32_t rng(void)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return (uint32_t)(rng_state >> 16);
}

/*
 * Corrupted variants of a few messages (one big-endian): every single-byte
 * change from a small set, then random multi-byte changes (deterministic).
 */
static void test_corruption(void)
{
	static const body_fn fns[] = { lib_body_basic, lib_body_dict, lib_body_arrays };
	static const uint8_t deltas[] = { 0x01, 0x80, 0xff };
	struct tally t = {};
	size_t f;

	for (f = 0; f < sizeof(fns) / sizeof(*fns); ++f) {
		DBusMessage *lm = lib_new(DC_MESSAGE_METHOD_CALL);
		char *wire = NULL, *copy, what[64];
		int len = 0, i, k;
		size_t d;

		fns[f](lm);
		dbus_message_set_serial(lm, 7);
		CHECK(dbus_message_marshal(lm, &wire, &len));
		dbus_message_unref(lm);
		if (f == 1) {
			/* one big-endian sample */
			struct message *m = NULL;
			size_t bn;
			char *be;

			CHECK_EQ(message_new_from_data(&m, wire, (size_t)len, NULL, 0), 0);
			be = to_big_endian(m, &bn);
			message_unref(m);
			dbus_free(wire);
			wire = dbus_malloc(bn);
			memcpy(wire, be, bn);
			len = (int)bn;
			free(be);
		}

		for (i = 0; i < len; ++i) {
			for (d = 0; d < sizeof(deltas); ++d) {
				wire[i] ^= deltas[d];
				snprintf(what, sizeof(what), "sample %zu byte %d ^ 0x%02x", f, i,
					 deltas[d]);
				check_agreement(wire, len, &t, what);
				wire[i] ^= deltas[d];
			}
		}

		copy = malloc((size_t)len);
		for (i = 0; i < 3000; ++i) {
			memcpy(copy, wire, (size_t)len);
			for (k = 1 + rng() % 4; k > 0; --k)
				copy[rng() % (unsigned)len] = (char)rng();
			snprintf(what, sizeof(what), "sample %zu random mutation %d", f, i);
			check_agreement(copy, len, &t, what);
		}
		free(copy);
		dbus_free(wire);
	}
	printf("corruption: accepted by us %lu, by libdbus %lu, compared %lu\n", t.ours,
	       t.theirs, t.both);
}

int main(void)
{
	test_from_libdbus();
	test_to_libdbus();
	test_corruption();
	printf("libdbus-roundtrip: ok\n");
	return 0;
}
