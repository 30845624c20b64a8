/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Tests of dbus-compat/validate.c: UTF-8, object paths and names. */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "dbus-compat/protocol.h"
#include "dbus-compat/validate.h"
#include "check.h"

#define S(s) s, (sizeof(s) - 1)

static void test_utf8(void)
{
	static const char *const good[] = {
		"", "hello", "caf\xc3\xa9", "\xe2\x82\xac", "\xf0\x9f\x98\x80",
		"\xc2\x80", "\xdf\xbf", "\xe0\xa0\x80", "\xef\xbf\xbf" /* U+FFFF */,
		"\xed\x9f\xbf" /* U+D7FF */, "\xee\x80\x80" /* U+E000 */,
		"\xf0\x90\x80\x80" /* U+10000 */, "\xf4\x8f\xbf\xbf" /* U+10FFFF */,
		"\xef\xb7\x90" /* U+FDD0, noncharacter: accepted */,
		"a long ascii string that crosses the eight byte fast path several times",
	};
	static const char *const bad[] = {
		"\x80", "\xbf", "a\xc0\x80", "\xc1\xbf" /* overlong */,
		"\xe0\x80\x80", "\xe0\x9f\xbf" /* overlong 3 */,
		"\xf0\x80\x80\x80", "\xf0\x8f\xbf\xbf" /* overlong 4 */,
		"\xed\xa0\x80" /* U+D800 */, "\xed\xbf\xbf" /* U+DFFF */,
		"\xf4\x90\x80\x80" /* U+110000 */, "\xf7\xbf\xbf\xbf",
		"\xf8\x88\x80\x80\x80" /* 5 bytes */, "\xfc\x84\x80\x80\x80\x80", "\xfe", "\xff",
		"\xc3" /* truncated */, "\xe2\x82" /* truncated */, "\xf0\x9f\x98",
		"\xc3(", "\xe2\x28\xa1", "abcdefgh\xc3", "abcdefghijklmno\x80",
	};
	size_t i;

	for (i = 0; i < sizeof(good) / sizeof(*good); ++i)
		CHECK(validate_utf8(good[i], strlen(good[i])));
	for (i = 0; i < sizeof(bad) / sizeof(*bad); ++i) {
		if (validate_utf8(bad[i], strlen(bad[i])))
			fprintf(stderr, "accepted bad UTF-8 #%zu\n", i);
		CHECK(!validate_utf8(bad[i], strlen(bad[i])));
	}

	/* NUL anywhere, including inside the 8-byte fast path */
	CHECK(!validate_utf8(S("\0")));
	CHECK(!validate_utf8(S("abc\0def")));
	CHECK(!validate_utf8(S("abcdefghij\0klmnopqrstuvwxyz")));
	CHECK(!validate_utf8(S("abcdefg\0")));
	/* the length bounds the scan */
	CHECK(validate_utf8("ab\xc3\xa9", 2));
	CHECK(!validate_utf8("ab\xc3\xa9", 3));

	/* every code point round trip: encode, validate */
	{
		uint32_t c;

		for (c = 1; c <= 0x10ffff; c += (c < 0x20000 ? 1 : 97)) {
			unsigned char b[4];
			size_t n;

			if (c < 0x80) {
				b[0] = (unsigned char)c;
				n = 1;
			} else if (c < 0x800) {
				b[0] = 0xc0 | (c >> 6);
				b[1] = 0x80 | (c & 0x3f);
				n = 2;
			} else if (c < 0x10000) {
				b[0] = 0xe0 | (c >> 12);
				b[1] = 0x80 | ((c >> 6) & 0x3f);
				b[2] = 0x80 | (c & 0x3f);
				n = 3;
			} else {
				b[0] = 0xf0 | (c >> 18);
				b[1] = 0x80 | ((c >> 12) & 0x3f);
				b[2] = 0x80 | ((c >> 6) & 0x3f);
				b[3] = 0x80 | (c & 0x3f);
				n = 4;
			}
			CHECK(validate_utf8((const char *)b, n) == !(c >= 0xd800 && c <= 0xdfff));
		}
	}
}

static void test_object_path(void)
{
	CHECK(validate_object_path(S("/")));
	CHECK(validate_object_path(S("/a")));
	CHECK(validate_object_path(S("/org/freedesktop/DBus")));
	CHECK(validate_object_path(S("/_/0/A_b9")));
	CHECK(!validate_object_path(S("")));
	CHECK(!validate_object_path(S("a")));
	CHECK(!validate_object_path(S("a/b")));
	CHECK(!validate_object_path(S("//")));
	CHECK(!validate_object_path(S("/a/")));
	CHECK(!validate_object_path(S("/a//b")));
	CHECK(!validate_object_path(S("/a-b")));
	CHECK(!validate_object_path(S("/a.b")));
	CHECK(!validate_object_path(S("/a\0b")));
	CHECK(!validate_object_path(S("/\xc3\xa9")));
	/* any length */
	{
		static char p[1001];
		int i;

		for (i = 0; i < 1000; i += 2) {
			p[i] = '/';
			p[i + 1] = 'x';
		}
		CHECK(validate_object_path(p, 1000));
	}
}

static void test_interface(void)
{
	char buf[300];

	CHECK(validate_interface_name(S("org.freedesktop.DBus")));
	CHECK(validate_interface_name(S("a.b")));
	CHECK(validate_interface_name(S("_a._0")));
	CHECK(validate_interface_name(S("a1.b2.c3")));
	CHECK(!validate_interface_name(S("")));
	CHECK(!validate_interface_name(S("a")));
	CHECK(!validate_interface_name(S(".a.b")));
	CHECK(!validate_interface_name(S("a.b.")));
	CHECK(!validate_interface_name(S("a..b")));
	CHECK(!validate_interface_name(S("a.0b")));
	CHECK(!validate_interface_name(S("0a.b")));
	CHECK(!validate_interface_name(S("a-b.c")));
	CHECK(!validate_interface_name(S(":a.b")));
	CHECK(!validate_interface_name(S("a.b\0")));
	CHECK(!validate_interface_name(S("a.\xc3\xa9")));
	/* 255 ok, 256 not */
	memset(buf, 'a', sizeof(buf));
	buf[1] = '.';
	CHECK(validate_interface_name(buf, 255));
	CHECK(!validate_interface_name(buf, 256));

	CHECK(validate_error_name(S("org.freedesktop.DBus.Error.Failed")));
	CHECK(!validate_error_name(S("Failed")));
	CHECK(!validate_error_name(S("org.freedesktop.DBus.Error.Spawn-Failed")));
}

static void test_member(void)
{
	char buf[300];

	CHECK(validate_member_name(S("Hello")));
	CHECK(validate_member_name(S("_")));
	CHECK(validate_member_name(S("a0_B")));
	CHECK(!validate_member_name(S("")));
	CHECK(!validate_member_name(S("0a")));
	CHECK(!validate_member_name(S("a.b")));
	CHECK(!validate_member_name(S("a-b")));
	CHECK(!validate_member_name(S("a b")));
	CHECK(!validate_member_name(S("a\0")));
	memset(buf, 'm', sizeof(buf));
	CHECK(validate_member_name(buf, 255));
	CHECK(!validate_member_name(buf, 256));
}

static void test_bus_name(void)
{
	char buf[300];

	CHECK(validate_bus_name(S(":1.0")));
	CHECK(validate_bus_name(S(":1.42")));
	CHECK(validate_bus_name(S(":a-b.0-9.x")));
	CHECK(validate_bus_name(S("org.freedesktop.DBus")));
	CHECK(validate_bus_name(S("com.example-foo.Bar_1")));
	CHECK(validate_bus_name(S("a.b")));
	CHECK(!validate_bus_name(S("")));
	CHECK(!validate_bus_name(S(":")));
	CHECK(!validate_bus_name(S(":1")));
	CHECK(!validate_bus_name(S(":1.")));
	CHECK(!validate_bus_name(S(":.1")));
	CHECK(!validate_bus_name(S(":1..2")));
	CHECK(!validate_bus_name(S("org")));
	CHECK(!validate_bus_name(S("org.")));
	CHECK(!validate_bus_name(S(".org.x")));
	CHECK(!validate_bus_name(S("org..x")));
	CHECK(!validate_bus_name(S("org.0x")));
	CHECK(!validate_bus_name(S("0org.x")));
	CHECK(!validate_bus_name(S("org.x/y")));
	CHECK(!validate_bus_name(S("org.x\0")));
	CHECK(!validate_bus_name(S("org.\xc3\xa9")));
	memset(buf, 'a', sizeof(buf));
	buf[1] = '.';
	CHECK(validate_bus_name(buf, 255));
	CHECK(!validate_bus_name(buf, 256));
	buf[0] = ':';
	buf[1] = 'a';
	buf[2] = '.';
	CHECK(validate_bus_name(buf, 255));
	CHECK(!validate_bus_name(buf, 256));

	CHECK(validate_unique_name(S(":1.0")));
	CHECK(!validate_unique_name(S("a.b")));
	CHECK(validate_well_known_name(S("a.b")));
	CHECK(!validate_well_known_name(S(":1.0")));

	CHECK(validate_namespace(S("org")));
	CHECK(validate_namespace(S("org.freedesktop")));
	CHECK(validate_namespace(S(":1")));
	CHECK(!validate_namespace(S("")));
	CHECK(!validate_namespace(S("org.")));
	CHECK(!validate_namespace(S("0org")));
	CHECK(!validate_namespace(S(":")));
}

/*
 * The libdbus leniency of match rules (sender=, destination=, arg0namespace=):
 * unique names are checked only for their characters. Each case here is one
 * where the strict rule says no and dbus-daemon's AddMatch says yes, so the
 * match parser must not use the strict one (test/unit/broker/match-rules.txt
 * has sender=':1' and arg0namespace=':1' checked against dbus-daemon).
 */
static void test_lenient(void)
{
	static const char *const lenient_only[] = { ":", ":1", ":.1", ":.a.b", ":-" };
	static const char *const both[] = { ":1.0", ":a-b.0-9.x", "org.freedesktop.DBus",
					    "a.b", "-a.b" };
	static const char *const neither[] = {
		"", ":1.", ":1..2", ":..", ":1.2/", ":1 2", ":\xc3\xa9", "org", "org.",
		".org.x", "org..x", "org.0x", "0org.x", "org.x/y",
	};
	char buf[300];
	size_t i;

	for (i = 0; i < sizeof(lenient_only) / sizeof(*lenient_only); ++i) {
		CHECK(validate_bus_name_lenient(lenient_only[i], strlen(lenient_only[i])));
		CHECK(!validate_bus_name(lenient_only[i], strlen(lenient_only[i])));
		CHECK(validate_namespace_lenient(lenient_only[i], strlen(lenient_only[i])));
	}
	for (i = 0; i < sizeof(both) / sizeof(*both); ++i) {
		CHECK(validate_bus_name_lenient(both[i], strlen(both[i])));
		CHECK(validate_bus_name(both[i], strlen(both[i])));
	}
	for (i = 0; i < sizeof(neither) / sizeof(*neither); ++i)
		CHECK(!validate_bus_name_lenient(neither[i], strlen(neither[i])));
	CHECK(!validate_bus_name_lenient(S(":1.0\0")));
	CHECK(!validate_bus_name_lenient(S("a.b\0")));

	/* Namespaces: a single well-known element is fine, the rest as above. */
	CHECK(validate_namespace_lenient(S("org")));
	CHECK(validate_namespace_lenient(S("org.freedesktop")));
	CHECK(!validate_namespace_lenient(S("")));
	CHECK(!validate_namespace_lenient(S("org.")));
	CHECK(!validate_namespace_lenient(S("0org")));
	CHECK(!validate_namespace_lenient(S(":1.")));

	/* Same length limit as every name. */
	memset(buf, '1', sizeof(buf));
	buf[0] = ':';
	CHECK(validate_bus_name_lenient(buf, 255));
	CHECK(!validate_bus_name_lenient(buf, 256));
	CHECK(validate_namespace_lenient(buf, 255));
	CHECK(!validate_namespace_lenient(buf, 256));
}

static void test_path_namespace(void)
{
	/* path_namespace= is an object path: "/" (everything) included. */
	CHECK(validate_path_namespace(S("/")));
	CHECK(validate_path_namespace(S("/org/freedesktop")));
	CHECK(!validate_path_namespace(S("")));
	CHECK(!validate_path_namespace(S("/org/")));
	CHECK(!validate_path_namespace(S("//")));
	CHECK(!validate_path_namespace(S("org")));
}

static void test_strings(void)
{
	int i;

	for (i = 0; i < _DC_E_MAX; ++i)
		CHECK(strcmp(dc_invalid_to_string(i), "unknown") != 0);
	CHECK(!strcmp(dc_invalid_to_string(-1), "unknown"));
	CHECK(!strcmp(dc_invalid_to_string(_DC_E_MAX), "unknown"));
}

int main(void)
{
	test_utf8();
	test_object_path();
	test_interface();
	test_member();
	test_bus_name();
	test_lenient();
	test_path_namespace();
	test_strings();
	printf("validate: ok\n");
	return 0;
}
