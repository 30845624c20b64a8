/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Tests of dbus-compat/marshal.c: the writer's wire format (alignment,
 * padding, byte orders, containers), the reader's round trip and every
 * validation rule on forged data.
 */

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "dbus-compat/marshal.h"
#include "dbus-compat/protocol.h"
#include "dbus-compat/signature.h"
#include "util/macro.h"
#include "check.h"

static const char endians[2] = { DC_LITTLE_ENDIAN, DC_BIG_ENDIAN };

static int validate(const void *d, size_t n, char e, const char *sig, uint32_t n_fds)
{
	return dc_validate(d, n, e, sig, strlen(sig), n_fds);
}

/* Encode @size bytes of @v (host order) in @endian at @dst. */
static void encode(uint8_t *dst, const void *v, unsigned size, char endian)
{
	unsigned i;

	if (endian == DC_NATIVE_ENDIAN) {
		memcpy(dst, v, size);
		return;
	}
	for (i = 0; i < size; ++i)
		dst[i] = ((const uint8_t *)v)[size - 1 - i];
}

/* Each fixed type at each offset 0..7, both byte orders: exact bytes + round trip. */
static void test_fixed_alignment(void)
{
	static const char types[] = "ybnqiuxtdh";
	const char *t;
	int e, off;

	for (t = types; *t; ++t) {
		for (e = 0; e < 2; ++e) {
			for (off = 0; off < 8; ++off) {
				char sig[16];
				struct dc_writer w;
				struct dc_reader r;
				uint8_t val[8], expect[8], got[8];
				unsigned size = signature_fixed_size(*t), i;
				size_t at, n;
				void *data;
				bool bv = true, bgot = false;
				int k;

				memset(sig, 'y', off);
				sig[off] = *t;
				sig[off + 1] = 0;
				for (i = 0; i < 8; ++i)
					val[i] = (uint8_t)(0x11 * (i + 1));
				if (*t == 'h')
					memset(val, 0, 4), val[0] = 2;

				dc_writer_init(&w, endians[e], sig);
				for (i = 0; i < (unsigned)off; ++i)
					CHECK(dc_writer_write(&w, "y", 0xff) == 0);
				if (*t == 'b')
					CHECK(dc_writer_append(&w, 'b', &bv) == 0);
				else
					CHECK(dc_writer_append(&w, *t, val) == 0);
				CHECK(dc_writer_finish(&w, &data, &n) == 0);
				dc_writer_deinit(&w);

				at = (off + size - 1) / size * size;
				CHECK_EQ(n, at + size);
				for (i = off; i < at; ++i)
					CHECK_EQ(((uint8_t *)data)[i], 0);
				if (*t == 'b') {
					uint32_t one = 1;

					encode(expect, &one, 4, endians[e]);
				} else {
					encode(expect, val, size, endians[e]);
				}
				CHECK(!memcmp((uint8_t *)data + at, expect, size));

				CHECK_EQ(validate(data, n, endians[e], sig, 3), 0);
				k = dc_reader_init(&r, data, n, endians[e], sig, strlen(sig), 3);
				CHECK_EQ(k, 0);
				for (i = 0; i < (unsigned)off; ++i) {
					uint8_t y;

					CHECK_EQ(dc_reader_read_basic(&r, 'y', &y), 0);
					CHECK_EQ(y, 0xff);
				}
				if (*t == 'b') {
					CHECK_EQ(dc_reader_read_basic(&r, 'b', &bgot), 0);
					CHECK(bgot);
				} else {
					memset(got, 0, sizeof(got));
					CHECK_EQ(dc_reader_read_basic(&r, *t, got), 0);
					CHECK(!memcmp(got, val, size));
				}
				CHECK(dc_reader_at_end(&r));
				CHECK_EQ(dc_reader_peek(&r), 0);

				/* non-zero padding is rejected */
				if (at > (size_t)off) {
					((uint8_t *)data)[at - 1] = 1;
					CHECK_EQ(validate(data, n, endians[e], sig, 3),
						 DC_E_PADDING);
				}
				/* truncation at every length */
				for (i = 0; i < n; ++i)
					CHECK(validate(data, i, endians[e], sig, 3) > 0);
				free(data);
			}
		}
	}
}

/* Strings, object paths, signatures at each offset. */
static void test_string_alignment(void)
{
	static const char types[] = "sog";
	const char *t;
	int e, off;

	for (t = types; *t; ++t) {
		for (e = 0; e < 2; ++e) {
			for (off = 0; off < 8; ++off) {
				const char *value = *t == 's' ? "h\xc3\xa9llo" :
						    *t == 'o' ? "/org/x" : "a{sv}";
				const char *got = NULL;
				char sig[16];
				int k;
				struct dc_writer w;
				struct dc_reader r;
				size_t n, at, len = strlen(value), i;
				uint8_t *data;

				memset(sig, 'y', off);
				sig[off] = *t;
				sig[off + 1] = 0;
				dc_writer_init(&w, endians[e], sig);
				for (i = 0; i < (size_t)off; ++i)
					dc_writer_write(&w, "y", 7);
				CHECK_EQ(dc_writer_append(&w, *t, &value), 0);
				CHECK_EQ(dc_writer_finish(&w, (void **)&data, &n), 0);

				if (*t == 'g') {
					at = off;
					CHECK_EQ(n, at + 1 + len + 1);
					CHECK_EQ(data[at], len);
					CHECK(!memcmp(data + at + 1, value, len + 1));
				} else {
					uint32_t l = (uint32_t)len;
					uint8_t expect[4];

					at = (off + 3) / 4 * 4;
					CHECK_EQ(n, at + 4 + len + 1);
					encode(expect, &l, 4, endians[e]);
					CHECK(!memcmp(data + at, expect, 4));
					CHECK(!memcmp(data + at + 4, value, len + 1));
				}

				k = dc_reader_init(&r, data, n, endians[e], sig, strlen(sig), 0);
				CHECK_EQ(k, 0);
				for (i = 0; i < (size_t)off; ++i)
					CHECK_EQ(dc_reader_read_basic(&r, 'y', NULL), 0);
				CHECK_EQ(dc_reader_read_basic(&r, *t, &got), 0);
				CHECK(!strcmp(got, value));
				CHECK(dc_reader_at_end(&r));
				for (i = 0; i < n; ++i)
					CHECK(validate(data, i, endians[e], sig, 0) > 0);
				free(data);
			}
		}
	}
}

/* The spec's two examples, big-endian. */
static void test_spec_examples(void)
{
	static const uint8_t array[] = {
		0, 0, 0, 8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 5,
	};
	static const uint8_t variant[] = {
		1, 't', 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 5,
	};
	struct dc_writer w;
	struct dc_reader r;
	uint64_t five = 5, v = 0;
	const char *vs;
	void *data;
	size_t n;

	dc_writer_init(&w, DC_BIG_ENDIAN, "at");
	CHECK_EQ(dc_writer_open(&w, 'a', NULL), 0);
	CHECK_EQ(dc_writer_append(&w, 't', &five), 0);
	CHECK_EQ(dc_writer_close(&w), 0);
	CHECK_EQ(dc_writer_finish(&w, &data, &n), 0);
	CHECK_EQ(n, sizeof(array));
	CHECK(!memcmp(data, array, n));
	free(data);

	dc_writer_init(&w, DC_BIG_ENDIAN, "v");
	CHECK_EQ(dc_writer_open(&w, 'v', "t"), 0);
	CHECK_EQ(dc_writer_write(&w, "t", (uint64_t)5), 0);
	CHECK_EQ(dc_writer_close(&w), 0);
	CHECK_EQ(dc_writer_finish(&w, &data, &n), 0);
	CHECK_EQ(n, sizeof(variant));
	CHECK(!memcmp(data, variant, n));
	free(data);

	CHECK_EQ(dc_reader_init(&r, variant, sizeof(variant), DC_BIG_ENDIAN, "v", 1, 0), 0);
	CHECK_EQ(dc_reader_peek(&r), 'v');
	CHECK_EQ(dc_reader_enter(&r, 'v'), 0);
	CHECK_EQ(dc_reader_peek_signature(&r, &vs), 1);
	CHECK_EQ(vs[0], 't');
	CHECK_EQ(dc_reader_read_basic(&r, 't', &v), 0);
	CHECK_EQ(v, 5);
	CHECK_EQ(dc_reader_peek(&r), 0);
	CHECK_EQ(dc_reader_exit(&r), 0);
	CHECK(dc_reader_at_end(&r));
}

/* a{sv} with nested containers, written and read back in both byte orders. */
static void test_containers(void)
{
	int e;

	for (e = 0; e < 2; ++e) {
		struct dc_writer w;
		struct dc_reader r;
		const char *s, *vs;
		uint8_t *data;
		size_t n, i;
		int32_t a, b;
		uint16_t q;
		double d;
		bool bb;

		dc_writer_init(&w, endians[e], "ya{sv}(qd)ab");
		dc_writer_write(&w, "y", 3);
		dc_writer_open(&w, 'a', NULL);
		/* "one": variant string */
		dc_writer_open(&w, '{', NULL);
		dc_writer_write(&w, "s", "one");
		dc_writer_open(&w, 'v', "s");
		dc_writer_write(&w, "s", "eins");
		dc_writer_close(&w);
		dc_writer_close(&w);
		/* "two": variant (ii) */
		dc_writer_open(&w, '{', NULL);
		dc_writer_write(&w, "s", "two");
		dc_writer_open(&w, 'v', "(ii)");
		dc_writer_open(&w, '(', NULL);
		dc_writer_write(&w, "ii", -1, 2);
		dc_writer_close(&w);
		dc_writer_close(&w);
		dc_writer_close(&w);
		/* "three": variant as (empty) */
		dc_writer_open(&w, '{', NULL);
		dc_writer_write(&w, "s", "three");
		dc_writer_open(&w, 'v', "as");
		dc_writer_open(&w, 'a', NULL);
		dc_writer_close(&w);
		dc_writer_close(&w);
		dc_writer_close(&w);
		dc_writer_close(&w);
		dc_writer_open(&w, '(', NULL);
		dc_writer_write(&w, "qd", 0xbeef, 2.5);
		dc_writer_close(&w);
		dc_writer_open(&w, 'a', NULL);
		dc_writer_write(&w, "bbb", 1, 0, 1);
		dc_writer_close(&w);
		CHECK_EQ(dc_writer_finish(&w, (void **)&data, &n), 0);

		CHECK_EQ(validate(data, n, endians[e], "ya{sv}(qd)ab", 0), 0);
		CHECK_EQ(validate(data, n, endians[e == 0], "ya{sv}(qd)ab", 0) > 0, 1);

		CHECK_EQ(dc_reader_init(&r, data, n, endians[e], "ya{sv}(qd)ab", 12, 0), 0);
		CHECK_EQ(dc_reader_read_basic(&r, 'y', NULL), 0);
		CHECK_EQ(dc_reader_peek(&r), 'a');
		CHECK_EQ(dc_reader_peek_signature(&r, &vs), 5);
		CHECK_EQ(dc_reader_enter(&r, 'a'), 0);
		i = 0;
		while (dc_reader_peek(&r)) {
			CHECK_EQ(dc_reader_peek(&r), '{');
			CHECK_EQ(dc_reader_enter(&r, '{'), 0);
			CHECK_EQ(dc_reader_read(&r, "s", &s), 0);
			CHECK_EQ(dc_reader_enter(&r, 'v'), 0);
			CHECK(dc_reader_peek_signature(&r, &vs) > 0);
			switch (i) {
			case 0:
				CHECK(!strcmp(s, "one") && vs[0] == 's');
				CHECK_EQ(dc_reader_read(&r, "s", &s), 0);
				CHECK(!strcmp(s, "eins"));
				break;
			case 1:
				CHECK(!strcmp(s, "two") && !strncmp(vs, "(ii)", 4));
				CHECK_EQ(dc_reader_enter(&r, '('), 0);
				CHECK_EQ(dc_reader_read(&r, "ii", &a, &b), 0);
				CHECK(a == -1 && b == 2);
				CHECK_EQ(dc_reader_exit(&r), 0);
				break;
			case 2:
				CHECK(!strcmp(s, "three") && !strncmp(vs, "as", 2));
				CHECK_EQ(dc_reader_enter(&r, 'a'), 0);
				CHECK_EQ(dc_reader_peek(&r), 0);
				CHECK_EQ(dc_reader_exit(&r), 0);
				break;
			}
			CHECK_EQ(dc_reader_exit(&r), 0);
			CHECK_EQ(dc_reader_exit(&r), 0);
			++i;
		}
		CHECK_EQ(i, 3);
		CHECK_EQ(dc_reader_exit(&r), 0);
		CHECK_EQ(dc_reader_enter(&r, '('), 0);
		CHECK_EQ(dc_reader_read(&r, "qd", &q, &d), 0);
		CHECK(q == 0xbeef && d == 2.5);
		CHECK_EQ(dc_reader_exit(&r), 0);
		/* read the bools one by one */
		CHECK_EQ(dc_reader_enter(&r, 'a'), 0);
		CHECK_EQ(dc_reader_read(&r, "b", &bb), 0);
		CHECK(bb);
		CHECK_EQ(dc_reader_read(&r, "b", &bb), 0);
		CHECK(!bb);
		/* exit skips the rest */
		CHECK_EQ(dc_reader_exit(&r), 0);
		CHECK(dc_reader_at_end(&r));

		/* skipping everything at once, and partially read containers */
		CHECK_EQ(dc_reader_init(&r, data, n, endians[e], "ya{sv}(qd)ab", 12, 0), 0);
		CHECK_EQ(dc_reader_skip(&r), 0);
		CHECK_EQ(dc_reader_enter(&r, 'a'), 0);
		CHECK_EQ(dc_reader_enter(&r, '{'), 0);
		CHECK_EQ(dc_reader_exit(&r), 0);	/* skips "one" and its variant */
		CHECK_EQ(dc_reader_exit(&r), 0);	/* skips "two", "three" */
		CHECK_EQ(dc_reader_skip(&r), 0);
		CHECK_EQ(dc_reader_skip(&r), 0);
		CHECK(dc_reader_at_end(&r));
		CHECK_EQ(dc_reader_skip(&r), DC_E_TYPE);

		/* wrong types are refused */
		CHECK_EQ(dc_reader_init(&r, data, n, endians[e], "ya{sv}(qd)ab", 12, 0), 0);
		CHECK_EQ(dc_reader_read_basic(&r, 'u', NULL), DC_E_TYPE);
		CHECK_EQ(dc_reader_enter(&r, '('), DC_E_TYPE);

		for (i = 0; i < n; ++i)
			CHECK(validate(data, i, endians[e], "ya{sv}(qd)ab", 0) > 0);
		free(data);
	}
}

/* Empty arrays still carry the element alignment padding. */
static void test_empty_array(void)
{
	static const uint8_t expect[] = { 0, 0, 0, 0, 0, 0, 0, 0, 'x' };
	struct dc_writer w;
	uint8_t *data;
	size_t n;

	dc_writer_init(&w, DC_LITTLE_ENDIAN, "a(t)y");
	dc_writer_open(&w, 'a', NULL);
	dc_writer_close(&w);
	dc_writer_write(&w, "y", 'x');
	CHECK_EQ(dc_writer_finish(&w, (void **)&data, &n), 0);
	CHECK_EQ(n, sizeof(expect));
	CHECK(!memcmp(data, expect, n));
	CHECK_EQ(validate(data, n, DC_LITTLE_ENDIAN, "a(t)y", 0), 0);
	data[6] = 1;	/* the element padding must be zero too */
	CHECK_EQ(validate(data, n, DC_LITTLE_ENDIAN, "a(t)y", 0), DC_E_PADDING);
	free(data);
}

static void test_fixed_arrays(void)
{
	int e;

	for (e = 0; e < 2; ++e) {
		static const int32_t ints[] = { 1, -2, 0x12345678, 0 };
		static const uint8_t bytes[] = { 0, 1, 2, 255 };
		struct dc_writer w;
		struct dc_reader r;
		const void *p;
		uint8_t *data;
		size_t n, cnt;
		int32_t v;

		dc_writer_init(&w, endians[e], "ayaiai");
		CHECK_EQ(dc_writer_append_array(&w, 'y', bytes, 4), 0);
		CHECK_EQ(dc_writer_append_array(&w, 'i', ints, 4), 0);
		CHECK_EQ(dc_writer_append_array(&w, 'i', NULL, 0), 0);
		CHECK_EQ(dc_writer_finish(&w, (void **)&data, &n), 0);
		CHECK_EQ(validate(data, n, endians[e], "ayaiai", 0), 0);

		CHECK_EQ(dc_reader_init(&r, data, n, endians[e], "ayaiai", 6, 0), 0);
		CHECK_EQ(dc_reader_read_array(&r, 'y', &p, &cnt), 0);
		CHECK(cnt == 4 && !memcmp(p, bytes, 4));
		CHECK_EQ(dc_reader_enter(&r, 'a'), 0);
		for (cnt = 0; dc_reader_peek(&r); ++cnt) {
			CHECK_EQ(dc_reader_read(&r, "i", &v), 0);
			CHECK_EQ(v, ints[cnt]);
		}
		CHECK_EQ(cnt, 4);
		CHECK_EQ(dc_reader_exit(&r), 0);
		CHECK_EQ(dc_reader_read_array(&r, 'i', &p, &cnt), 0);
		CHECK_EQ(cnt, 0);
		CHECK(dc_reader_at_end(&r));

		free(data);
	}

	/* ai with a length of 6 */
	{
		static const uint8_t bad[] = { 6, 0, 0, 0, 1, 0, 0, 0, 2, 0 };
		static const uint8_t bad_as[] = { 6, 0, 0, 0, 3, 0, 0, 0, 'a', 'b', 'c', 0 };

		CHECK_EQ(validate(bad, sizeof(bad), DC_LITTLE_ENDIAN, "ai", 0), DC_E_ARRAY_LENGTH);
		CHECK_EQ(validate(bad_as, sizeof(bad_as), DC_LITTLE_ENDIAN, "as", 0),
			 DC_E_ARRAY_LENGTH);
	}
}

static void test_forged(void)
{
	/* bool = 2 */
	{
		uint8_t d[4] = { 2, 0, 0, 0 };
		uint8_t ab[12] = { 8, 0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0 };

		CHECK_EQ(validate(d, 4, DC_LITTLE_ENDIAN, "b", 0), DC_E_BOOLEAN);
		d[0] = 1;
		CHECK_EQ(validate(d, 4, DC_LITTLE_ENDIAN, "b", 0), 0);
		CHECK_EQ(validate(d, 4, DC_BIG_ENDIAN, "b", 0), DC_E_BOOLEAN);
		CHECK_EQ(validate(ab, 12, DC_LITTLE_ENDIAN, "ab", 0), DC_E_BOOLEAN);
	}
	/* strings */
	{
		uint8_t nonul[8] = { 3, 0, 0, 0, 'a', 'b', 'c', 'd' };
		uint8_t interior[8] = { 3, 0, 0, 0, 'a', 0, 'c', 0 };
		uint8_t badutf[8] = { 3, 0, 0, 0, 'a', 0xc0, 0x80, 0 };
		uint8_t surrogate[8] = { 3, 0, 0, 0, 0xed, 0xa0, 0x80, 0 };
		uint8_t path[8] = { 3, 0, 0, 0, '/', 'a', '/', 0 };
		uint8_t sig[5] = { 3, 'a', '{', 's', 0 };
		uint8_t huge[8] = { 0xff, 0xff, 0xff, 0x7f, 'a', 'b', 'c', 0 };

		CHECK_EQ(validate(nonul, 8, DC_LITTLE_ENDIAN, "s", 0), DC_E_STRING_NUL);
		CHECK_EQ(validate(interior, 8, DC_LITTLE_ENDIAN, "s", 0), DC_E_UTF8);
		CHECK_EQ(validate(badutf, 8, DC_LITTLE_ENDIAN, "s", 0), DC_E_UTF8);
		CHECK_EQ(validate(surrogate, 8, DC_LITTLE_ENDIAN, "s", 0), DC_E_UTF8);
		CHECK_EQ(validate(path, 8, DC_LITTLE_ENDIAN, "o", 0), DC_E_OBJECT_PATH);
		CHECK_EQ(validate(sig, 5, DC_LITTLE_ENDIAN, "g", 0), DC_E_SIGNATURE);
		CHECK_EQ(validate(huge, 8, DC_LITTLE_ENDIAN, "s", 0), DC_E_TRUNCATED);
		path[6] = 'b';
		CHECK_EQ(validate(path, 8, DC_LITTLE_ENDIAN, "o", 0), 0);
		CHECK_EQ(validate(path, 8, DC_LITTLE_ENDIAN, "s", 0), 0);
	}
	/* arrays: too big (forged length, tiny buffer), beyond the data */
	{
		uint8_t big[8] = { 0x01, 0x00, 0x00, 0x04, 0, 0, 0, 0 };	/* 64 MiB + 1 */
		uint8_t max[8] = { 0x00, 0x00, 0x00, 0x04, 0, 0, 0, 0 };	/* 64 MiB */

		CHECK_EQ(validate(big, 8, DC_LITTLE_ENDIAN, "ay", 0), DC_E_ARRAY_TOO_BIG);
		CHECK_EQ(validate(max, 8, DC_LITTLE_ENDIAN, "ay", 0), DC_E_TRUNCATED);
		CHECK_EQ(validate(big, 8, DC_LITTLE_ENDIAN, "a(yy)", 0), DC_E_ARRAY_TOO_BIG);
	}
	/* variants */
	{
		uint8_t two[8] = { 2, 'i', 'i', 0, 1, 0, 0, 0 };
		uint8_t empty[4] = { 0, 0, 0, 0 };
		uint8_t nonul[8] = { 1, 'i', 'x', 0, 1, 0, 0, 0 };
		uint8_t ok[8] = { 1, 'i', 0, 0, 1, 0, 0, 0 };
		uint8_t pad[8] = { 1, 'i', 0, 9, 1, 0, 0, 0 };
		uint8_t badsig[8] = { 1, 'z', 0, 0, 1, 0, 0, 0 };

		CHECK_EQ(validate(two, 8, DC_LITTLE_ENDIAN, "v", 0), DC_E_VARIANT_SIGNATURE);
		CHECK_EQ(validate(empty, 4, DC_LITTLE_ENDIAN, "v", 0), DC_E_VARIANT_SIGNATURE);
		CHECK_EQ(validate(nonul, 8, DC_LITTLE_ENDIAN, "v", 0), DC_E_STRING_NUL);
		CHECK_EQ(validate(badsig, 8, DC_LITTLE_ENDIAN, "v", 0), DC_E_VARIANT_SIGNATURE);
		CHECK_EQ(validate(ok, 8, DC_LITTLE_ENDIAN, "v", 0), 0);
		CHECK_EQ(validate(pad, 8, DC_LITTLE_ENDIAN, "v", 0), DC_E_PADDING);
	}
	/* unix fds */
	{
		uint8_t h[4] = { 2, 0, 0, 0 };
		uint8_t ah[12] = { 8, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0 };

		/* indices are opaque: none is checked against the fds (dbus-daemon) */
		CHECK_EQ(validate(h, 4, DC_LITTLE_ENDIAN, "h", 3), 0);
		CHECK_EQ(validate(h, 4, DC_LITTLE_ENDIAN, "h", 2), 0);
		CHECK_EQ(validate(h, 4, DC_LITTLE_ENDIAN, "h", 0), 0);
		CHECK_EQ(validate(ah, 12, DC_LITTLE_ENDIAN, "ah", 3), 0);
		CHECK_EQ(validate(ah, 12, DC_LITTLE_ENDIAN, "ah", 2), 0);
	}
	/* trailing data, bad signature argument, bad endian */
	{
		uint8_t d[5] = { 1, 0, 0, 0, 0 };

		CHECK_EQ(validate(d, 5, DC_LITTLE_ENDIAN, "u", 0), DC_E_TRAILING);
		CHECK_EQ(validate(d, 4, DC_LITTLE_ENDIAN, "u", 0), 0);
		CHECK_EQ(validate(d, 1, DC_LITTLE_ENDIAN, "", 0), DC_E_TRAILING);
		CHECK_EQ(validate(d, 0, DC_LITTLE_ENDIAN, "", 0), 0);
		CHECK_EQ(validate(d, 4, DC_LITTLE_ENDIAN, "a", 0), DC_E_SIGNATURE);
		CHECK_EQ(validate(d, 4, 'x', "u", 0), -EINVAL);
	}
}

/* Build @depth nested variants around a byte, by hand. */
static size_t nested_variants(uint8_t *buf, unsigned depth)
{
	size_t n = 0;
	unsigned i;

	for (i = 0; i < depth; ++i) {
		buf[n++] = 1;
		buf[n++] = 'v';
		buf[n++] = 0;
	}
	buf[n++] = 1;
	buf[n++] = 'y';
	buf[n++] = 0;
	buf[n++] = 42;
	return n;
}

static void test_nesting(void)
{
	uint8_t buf[512];
	char sig[256];
	size_t n;
	int i;

	/* variants: the outermost "v" is one container; 64 in all are allowed */
	n = nested_variants(buf, 63);
	CHECK_EQ(validate(buf, n, DC_LITTLE_ENDIAN, "v", 0), 0);
	n = nested_variants(buf, 64);
	CHECK_EQ(validate(buf, n, DC_LITTLE_ENDIAN, "v", 0), DC_E_NESTING);

	/* the writer can produce the 64 deep one */
	{
		struct dc_writer w;
		void *data;
		size_t m;

		dc_writer_init(&w, DC_LITTLE_ENDIAN, "v");
		for (i = 0; i < 63; ++i)
			CHECK_EQ(dc_writer_open(&w, 'v', "v"), 0);
		CHECK_EQ(dc_writer_open(&w, 'v', "y"), 0);
		CHECK_EQ(dc_writer_open(&w, 'v', "y"), -EINVAL);	/* not a v: sticky */
		dc_writer_deinit(&w);

		dc_writer_init(&w, DC_LITTLE_ENDIAN, "v");
		for (i = 0; i < 63; ++i)
			CHECK_EQ(dc_writer_open(&w, 'v', "v"), 0);
		CHECK_EQ(dc_writer_open(&w, 'v', "y"), 0);
		CHECK_EQ(dc_writer_write(&w, "y", 42), 0);
		for (i = 0; i < 64; ++i)
			CHECK_EQ(dc_writer_close(&w), 0);
		CHECK_EQ(dc_writer_finish(&w, &data, &m), 0);
		n = nested_variants(buf, 63);
		CHECK_EQ(m, n);
		CHECK(!memcmp(data, buf, n));
		free(data);

		dc_writer_init(&w, DC_LITTLE_ENDIAN, "v");
		for (i = 0; i < 64; ++i)
			CHECK_EQ(dc_writer_open(&w, 'v', "v"), 0);
		CHECK_EQ(dc_writer_open(&w, 'v', "v"), -EINVAL);	/* 65th */
		dc_writer_deinit(&w);
	}

	/* 32 arrays of 32 structs: 64 containers from the signature alone */
	{
		struct dc_writer w;
		struct dc_reader r;
		uint8_t *data;
		size_t m;
		int p = 0;
		uint8_t y = 0;

		for (i = 0; i < 32; ++i) {
			sig[p++] = 'a';
			sig[p++] = '(';
		}
		sig[p++] = 'y';
		for (i = 0; i < 32; ++i)
			sig[p++] = ')';
		sig[p] = 0;

		dc_writer_init(&w, DC_BIG_ENDIAN, sig);
		for (i = 0; i < 32; ++i) {
			CHECK_EQ(dc_writer_open(&w, 'a', NULL), 0);
			CHECK_EQ(dc_writer_open(&w, '(', NULL), 0);
		}
		CHECK_EQ(dc_writer_write(&w, "y", 7), 0);
		for (i = 0; i < 64; ++i)
			CHECK_EQ(dc_writer_close(&w), 0);
		CHECK_EQ(dc_writer_finish(&w, (void **)&data, &m), 0);
		CHECK_EQ(validate(data, m, DC_BIG_ENDIAN, sig, 0), 0);
		CHECK_EQ(dc_reader_init(&r, data, m, DC_BIG_ENDIAN, sig, strlen(sig), 0), 0);
		for (i = 0; i < 32; ++i) {
			CHECK_EQ(dc_reader_enter(&r, 'a'), 0);
			CHECK_EQ(dc_reader_enter(&r, '('), 0);
		}
		CHECK_EQ(dc_reader_read(&r, "y", &y), 0);
		CHECK_EQ(y, 7);
		for (i = 0; i < 64; ++i)
			CHECK_EQ(dc_reader_exit(&r), 0);
		CHECK(dc_reader_at_end(&r));

		/*
		 * The same inside a variant is 65 deep: rejected. Leading bytes
		 * put the array at an 8-aligned offset, as in @data.
		 */
		{
			uint8_t *v = calloc(1, m + 512);
			size_t sl = strlen(sig), k = 0, vn;
			char vsig[16];

			while (ALIGN_TO(k + sl + 2, (size_t)4) % 8)
				++k;
			memset(vsig, 'y', k);
			vsig[k] = 'v';
			vsig[k + 1] = 0;
			v[k] = (uint8_t)sl;
			memcpy(v + k + 1, sig, sl + 1);
			vn = ALIGN_TO(k + sl + 2, (size_t)8);
			memcpy(v + vn, data, m);
			CHECK_EQ(validate(v, vn + m, DC_BIG_ENDIAN, vsig, 0), DC_E_NESTING);
			free(v);
		}
		free(data);
	}

	/* 32 arrays deep of bytes; 33 is an invalid signature */
	{
		struct dc_writer w;
		uint8_t *data;
		size_t m;

		memset(sig, 'a', 32);
		sig[32] = 'y';
		sig[33] = 0;
		dc_writer_init(&w, DC_LITTLE_ENDIAN, sig);
		for (i = 0; i < 32; ++i)
			CHECK_EQ(dc_writer_open(&w, 'a', NULL), 0);
		dc_writer_write(&w, "yy", 1, 2);
		for (i = 0; i < 32; ++i)
			CHECK_EQ(dc_writer_close(&w), 0);
		CHECK_EQ(dc_writer_finish(&w, (void **)&data, &m), 0);
		CHECK_EQ(m, 32 * 4 + 2);
		CHECK_EQ(validate(data, m, DC_LITTLE_ENDIAN, sig, 0), 0);
		sig[32] = 'a';
		sig[33] = 'y';
		sig[34] = 0;
		CHECK_EQ(validate(data, m, DC_LITTLE_ENDIAN, sig, 0), DC_E_SIGNATURE);
		free(data);
	}
}

static void test_writer_errors(void)
{
	struct dc_writer w;
	void *data;
	size_t n;
	const char *bad = "a\xc0\x80";

	/* type mismatch is sticky */
	dc_writer_init(&w, DC_LITTLE_ENDIAN, "su");
	CHECK_EQ(dc_writer_write(&w, "u", 1), -EINVAL);
	CHECK_EQ(dc_writer_write(&w, "s", "x"), -EINVAL);
	CHECK_EQ(dc_writer_finish(&w, &data, &n), -EINVAL);
	dc_writer_deinit(&w);

	/* incomplete */
	dc_writer_init(&w, DC_LITTLE_ENDIAN, "su");
	CHECK_EQ(dc_writer_write(&w, "s", "x"), 0);
	CHECK_EQ(dc_writer_finish(&w, &data, &n), -EINVAL);
	dc_writer_deinit(&w);

	/* too many */
	dc_writer_init(&w, DC_LITTLE_ENDIAN, "s");
	CHECK_EQ(dc_writer_write(&w, "ss", "x", "y"), -EINVAL);
	dc_writer_deinit(&w);

	/* invalid values */
	dc_writer_init(&w, DC_LITTLE_ENDIAN, "s");
	CHECK_EQ(dc_writer_append(&w, 's', &bad), -EINVAL);
	dc_writer_deinit(&w);
	dc_writer_init(&w, DC_LITTLE_ENDIAN, "o");
	CHECK_EQ(dc_writer_write(&w, "o", "/a/"), -EINVAL);
	dc_writer_deinit(&w);
	dc_writer_init(&w, DC_LITTLE_ENDIAN, "g");
	CHECK_EQ(dc_writer_write(&w, "g", "a{vs}"), -EINVAL);
	dc_writer_deinit(&w);
	dc_writer_init(&w, DC_LITTLE_ENDIAN, "s");
	CHECK_EQ(dc_writer_write(&w, "s", NULL), -EINVAL);
	dc_writer_deinit(&w);

	/* invalid signature, endian */
	dc_writer_init(&w, DC_LITTLE_ENDIAN, "a{vs}");
	CHECK_EQ(dc_writer_error(&w), -EINVAL);
	dc_writer_deinit(&w);
	dc_writer_init(&w, 'x', "s");
	CHECK_EQ(dc_writer_error(&w), -EINVAL);
	dc_writer_deinit(&w);

	/* variant contents must be one complete type and must be written */
	dc_writer_init(&w, DC_LITTLE_ENDIAN, "v");
	CHECK_EQ(dc_writer_open(&w, 'v', "ii"), -EINVAL);
	dc_writer_deinit(&w);
	dc_writer_init(&w, DC_LITTLE_ENDIAN, "v");
	CHECK_EQ(dc_writer_open(&w, 'v', "i"), 0);
	CHECK_EQ(dc_writer_close(&w), -EINVAL);
	dc_writer_deinit(&w);

	/* struct closed early; close without open; open the wrong container */
	dc_writer_init(&w, DC_LITTLE_ENDIAN, "(ii)");
	CHECK_EQ(dc_writer_open(&w, '(', NULL), 0);
	CHECK_EQ(dc_writer_write(&w, "i", 1), 0);
	CHECK_EQ(dc_writer_close(&w), -EINVAL);
	dc_writer_deinit(&w);
	dc_writer_init(&w, DC_LITTLE_ENDIAN, "i");
	CHECK_EQ(dc_writer_close(&w), -EINVAL);
	dc_writer_deinit(&w);
	dc_writer_init(&w, DC_LITTLE_ENDIAN, "ai");
	CHECK_EQ(dc_writer_open(&w, '(', NULL), -EINVAL);
	dc_writer_deinit(&w);

	/* finish with an open container */
	dc_writer_init(&w, DC_LITTLE_ENDIAN, "ai");
	CHECK_EQ(dc_writer_open(&w, 'a', NULL), 0);
	CHECK_EQ(dc_writer_finish(&w, &data, &n), -EINVAL);
	dc_writer_deinit(&w);

	/* an array above 64 MiB: -EMSGSIZE without writing it */
	dc_writer_init(&w, DC_LITTLE_ENDIAN, "ay");
	CHECK_EQ(dc_writer_append_array(&w, 'y', "", (size_t)DC_MAX_ARRAY_SIZE + 1), -EMSGSIZE);
	dc_writer_deinit(&w);

	/* empty signature, nothing written */
	dc_writer_init(&w, DC_LITTLE_ENDIAN, "");
	CHECK_EQ(dc_writer_finish(&w, &data, &n), 0);
	CHECK_EQ(n, 0);
	free(data);
	dc_writer_deinit(&w);
}

/* Arrays of variants / structs of strings, elements at all offsets. */
static void test_array_elements(void)
{
	int e;

	for (e = 0; e < 2; ++e) {
		struct dc_writer w;
		struct dc_reader r;
		uint8_t *data;
		size_t n;
		int i;

		dc_writer_init(&w, endians[e], "a(ys)av");
		dc_writer_open(&w, 'a', NULL);
		for (i = 0; i < 10; ++i) {
			char s[16];

			snprintf(s, sizeof(s), "%.*s", i, "abcdefghij");
			dc_writer_open(&w, '(', NULL);
			dc_writer_write(&w, "ys", i, s);
			dc_writer_close(&w);
		}
		dc_writer_close(&w);
		dc_writer_open(&w, 'a', NULL);
		for (i = 0; i < 10; ++i) {
			if (i % 2) {
				dc_writer_open(&w, 'v', "t");
				dc_writer_write(&w, "t", (uint64_t)i);
			} else {
				dc_writer_open(&w, 'v', "ay");
				dc_writer_open(&w, 'a', NULL);
				dc_writer_write(&w, "yyy", 1, 2, 3);
				dc_writer_close(&w);
			}
			dc_writer_close(&w);
		}
		dc_writer_close(&w);
		CHECK_EQ(dc_writer_finish(&w, (void **)&data, &n), 0);
		CHECK_EQ(validate(data, n, endians[e], "a(ys)av", 0), 0);

		CHECK_EQ(dc_reader_init(&r, data, n, endians[e], "a(ys)av", 7, 0), 0);
		CHECK_EQ(dc_reader_enter(&r, 'a'), 0);
		for (i = 0; dc_reader_peek(&r); ++i) {
			uint8_t y;
			const char *s;

			CHECK_EQ(dc_reader_enter(&r, '('), 0);
			CHECK_EQ(dc_reader_read(&r, "ys", &y, &s), 0);
			CHECK_EQ(y, i);
			CHECK_EQ(strlen(s), (size_t)i);
			CHECK_EQ(dc_reader_exit(&r), 0);
		}
		CHECK_EQ(i, 10);
		CHECK_EQ(dc_reader_exit(&r), 0);
		CHECK_EQ(dc_reader_enter(&r, 'a'), 0);
		for (i = 0; dc_reader_peek(&r); ++i) {
			CHECK_EQ(dc_reader_enter(&r, 'v'), 0);
			if (i % 2) {
				uint64_t t;

				CHECK_EQ(dc_reader_read(&r, "t", &t), 0);
				CHECK_EQ(t, (uint64_t)i);
			} else {
				const void *p;
				size_t cnt;

				CHECK_EQ(dc_reader_read_array(&r, 'y', &p, &cnt), 0);
				CHECK(cnt == 3 && !memcmp(p, "\1\2\3", 3));
			}
			CHECK_EQ(dc_reader_exit(&r), 0);
		}
		CHECK_EQ(i, 10);
		CHECK_EQ(dc_reader_exit(&r), 0);
		CHECK(dc_reader_at_end(&r));

		for (i = 0; i < (int)n; ++i)
			CHECK(validate(data, i, endians[e], "a(ys)av", 0) > 0);
		/* flip every byte once: never a crash, and the checker must agree */
		for (i = 0; i < (int)n; ++i) {
			data[i] ^= 0x5a;
			(void)validate(data, n, endians[e], "a(ys)av", 0);
			data[i] ^= 0x5a;
		}
		CHECK_EQ(validate(data, n, endians[e], "a(ys)av", 0), 0);
		free(data);
	}
}

/*
 * dc_copy_value(): a value with every kind of container, written in both byte
 * orders, copies to exactly what writing it natively gives.
 */
static void write_sample(struct dc_writer *w)
{
	static const uint32_t ints[] = { 1, 2, 3 };

	dc_writer_open(w, 'a', NULL);
	dc_writer_open(w, '{', NULL);
	dc_writer_write(w, "s", "struct");
	dc_writer_open(w, 'v', "(ybnqiuxtd)");
	dc_writer_open(w, '(', NULL);
	dc_writer_write(w, "ybnqiuxtd", 7, 1, -3, 4, -5, 6u, (int64_t)-7, (uint64_t)8, 9.5);
	dc_writer_close(w);
	dc_writer_close(w);
	dc_writer_close(w);
	dc_writer_open(w, '{', NULL);
	dc_writer_write(w, "s", "nested");
	dc_writer_open(w, 'v', "v");
	dc_writer_open(w, 'v', "a{sau}");
	dc_writer_open(w, 'a', NULL);
	dc_writer_open(w, '{', NULL);
	dc_writer_write(w, "s", "k");
	dc_writer_append_array(w, 'u', ints, 3);
	dc_writer_close(w);
	dc_writer_close(w);
	dc_writer_close(w);
	dc_writer_close(w);
	dc_writer_close(w);
	dc_writer_open(w, '{', NULL);
	dc_writer_write(w, "s", "strings");
	dc_writer_open(w, 'v', "(sog)");
	dc_writer_open(w, '(', NULL);
	dc_writer_write(w, "sog", "text", "/a/b", "a{sv}");
	dc_writer_close(w);
	dc_writer_close(w);
	dc_writer_close(w);
	dc_writer_close(w);
}

static void test_copy_value(void)
{
	const char orders[] = { DC_LITTLE_ENDIAN, DC_BIG_ENDIAN };
	void *want, *src, *got;
	size_t n_want, n_src, n_got;
	struct dc_writer w;
	struct dc_reader r;

	dc_writer_init(&w, DC_NATIVE_ENDIAN, "a{sv}");
	write_sample(&w);
	CHECK(dc_writer_finish(&w, &want, &n_want) == 0);
	dc_writer_deinit(&w);
	for (size_t i = 0; i < ARRAY_SIZE(orders); i++) {
		dc_writer_init(&w, orders[i], "a{sv}");
		write_sample(&w);
		CHECK(dc_writer_finish(&w, &src, &n_src) == 0);
		dc_writer_deinit(&w);

		CHECK(dc_reader_init(&r, src, n_src, orders[i], "a{sv}", 5, 0) == 0);
		dc_writer_init(&w, DC_NATIVE_ENDIAN, "a{sv}");
		CHECK(dc_copy_value(&r, &w) == 0);
		CHECK(dc_reader_at_end(&r));
		CHECK(dc_writer_finish(&w, &got, &n_got) == 0);
		dc_writer_deinit(&w);
		CHECK(n_got == n_want && !memcmp(got, want, n_want));
		free(got);
		free(src);
	}
	/* A mismatched writer fails, it does not write something else. */
	dc_writer_init(&w, DC_NATIVE_ENDIAN, "as");
	CHECK(dc_reader_init(&r, want, n_want, DC_NATIVE_ENDIAN, "a{sv}", 5, 0) == 0);
	CHECK(dc_copy_value(&r, &w) != 0);
	dc_writer_deinit(&w);
	free(want);
}

int main(void)
{
	test_fixed_alignment();
	test_string_alignment();
	test_spec_examples();
	test_containers();
	test_empty_array();
	test_fixed_arrays();
	test_forged();
	test_nesting();
	test_writer_errors();
	test_array_elements();
	test_copy_value();
	printf("marshal: ok\n");
	return 0;
}
