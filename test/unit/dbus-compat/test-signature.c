/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Tests of dbus-compat/signature.c: validation rules, limits, iteration. */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "dbus-compat/protocol.h"
#include "dbus-compat/signature.h"
#include "check.h"

static int sv(const char *s)
{
	return signature_validate(s, strlen(s));
}

static int sv1(const char *s)
{
	return signature_validate_single(s, strlen(s));
}

static void test_valid(void)
{
	static const char *const good[] = {
		"", "y", "b", "n", "q", "i", "u", "x", "t", "d", "s", "o", "g", "h", "v",
		"ybnqiuxtdsoghv", "ai", "aai", "as", "av", "a{sv}", "a{ya{sv}}", "a{s(ii)}",
		"a{oa{sa{sv}}}", "(i)", "((i))", "(ia{sv}as)", "a(ii)", "aa{sv}", "sa{sv}as",
		"a{bv}", "a{hv}", "a{gv}", "(v)", "((((((y))))))", "a(a(a(y)))",
	};
	static const char *const bad[] = {
		"a", "aa", "(", ")", "()", "(i", "i)", "((i)", "(i))", "{sv}", "a{}", "a{s}",
		"a{sss}", "a{vs}", "a{(i)s}", "a{ais}", "a{a{ss}s}", "a)", "(a)", "a}", "r",
		"e", "z", " ", "a{sv", "a{sv}}", "(a{s)v}", "a{s(}i)", "{", "}", "(})",
		"a{s}v", "ia", "(ii", "a{s{ss}}", "a{sa}",
	};
	size_t i;

	for (i = 0; i < sizeof(good) / sizeof(*good); ++i) {
		if (sv(good[i]) != 0)
			fprintf(stderr, "should be valid: '%s'\n", good[i]);
		CHECK(sv(good[i]) == 0);
	}
	for (i = 0; i < sizeof(bad) / sizeof(*bad); ++i) {
		if (sv(bad[i]) != DC_E_SIGNATURE)
			fprintf(stderr, "should be invalid: '%s'\n", bad[i]);
		CHECK(sv(bad[i]) == DC_E_SIGNATURE);
	}

	/* NUL inside the length is invalid; the length bounds the scan */
	CHECK(signature_validate("i\0i", 3) == DC_E_SIGNATURE);
	CHECK(signature_validate("ii)", 2) == 0);
	CHECK(signature_validate("a{sv}", 4) == DC_E_SIGNATURE);
}

static void test_limits(void)
{
	char buf[512];
	int n;

	/* length: 255 ok, 256 not */
	memset(buf, 'y', 255);
	CHECK(signature_validate(buf, 255) == 0);
	memset(buf, 'y', 256);
	CHECK(signature_validate(buf, 256) == DC_E_SIGNATURE);

	/* 32 nested arrays, then 33 */
	memset(buf, 'a', 32);
	buf[32] = 'i';
	CHECK(signature_validate(buf, 33) == 0);
	CHECK(signature_validate_single(buf, 33) == 0);
	memset(buf, 'a', 33);
	buf[33] = 'i';
	CHECK(signature_validate(buf, 34) == DC_E_SIGNATURE);

	/* 32 nested structs, then 33 */
	for (n = 32; n <= 33; ++n) {
		memset(buf, '(', n);
		buf[n] = 'y';
		memset(buf + n + 1, ')', n);
		CHECK(signature_validate(buf, 2 * n + 1) == (n == 32 ? 0 : DC_E_SIGNATURE));
	}

	/* 32 arrays + 32 structs interleaved (64 containers), then one more of each */
	for (n = 32; n <= 33; ++n) {
		int i, p = 0;

		for (i = 0; i < n; ++i) {
			buf[p++] = 'a';
			buf[p++] = '(';
		}
		buf[p++] = 'y';
		for (i = 0; i < n; ++i)
			buf[p++] = ')';
		CHECK(signature_validate(buf, p) == (n == 32 ? 0 : DC_E_SIGNATURE));
	}

	/* nesting counts through structs: 33 arrays separated by structs */
	{
		int i, p = 0;

		for (i = 0; i < 33; ++i) {
			buf[p++] = 'a';
			if (i % 2 == 0)
				buf[p++] = '(';
		}
		buf[p++] = 'y';
		for (i = 0; i < 33; i += 2)
			buf[p++] = ')';
		CHECK(signature_validate(buf, p) == DC_E_SIGNATURE);
	}

	/* dict entries count as structs: 32 levels of a{s...} ok, 33 not */
	for (n = 32; n <= 33; ++n) {
		int i, p = 0;

		for (i = 0; i < n; ++i) {
			buf[p++] = 'a';
			buf[p++] = '{';
			buf[p++] = 's';
		}
		buf[p++] = 'y';
		for (i = 0; i < n; ++i)
			buf[p++] = '}';
		CHECK(signature_validate(buf, p) == (n == 32 ? 0 : DC_E_SIGNATURE));
	}

	/* many fields in one struct is fine */
	buf[0] = '(';
	memset(buf + 1, 'i', 253);
	buf[254] = ')';
	CHECK(signature_validate(buf, 255) == 0);
}

static void test_single(void)
{
	CHECK(sv1("i") == 0);
	CHECK(sv1("a{sv}") == 0);
	CHECK(sv1("(ii)") == 0);
	CHECK(sv1("aai") == 0);
	CHECK(sv1("v") == 0);
	CHECK(sv1("") == DC_E_SIGNATURE);
	CHECK(sv1("ii") == DC_E_SIGNATURE);
	CHECK(sv1("a{sv}i") == DC_E_SIGNATURE);
	CHECK(sv1("a") == DC_E_SIGNATURE);
	CHECK(sv1("(i)(i)") == DC_E_SIGNATURE);
}

static void test_iter(void)
{
	static const char *const parts[] = { "i", "a{sv}", "(ia(ii))", "aai", "v", "s" };
	const char *sig = "ia{sv}(ia(ii))aaivs", *t;
	struct signature_iter it;
	size_t n, i = 0;

	signature_iter_init(&it, sig, strlen(sig));
	while (signature_iter_next(&it, &t, &n)) {
		CHECK(i < 6);
		CHECK(n == strlen(parts[i]));
		CHECK(!memcmp(t, parts[i], n));
		++i;
	}
	CHECK(i == 6);

	CHECK(signature_next("", 0) == 0);
	CHECK(signature_next(")", 1) == 0);
	CHECK(signature_next("}i", 2) == 0);
	CHECK(signature_next("a", 1) == 0);		/* truncated */
	CHECK(signature_next("(ii", 3) == 0);		/* truncated */
	CHECK(signature_next("a{sv}i", 6) == 5);
	CHECK(signature_next("aaa(y)y", 7) == 6);
}

static void test_classify(void)
{
	const char *basic = "ybnqiuxtdsogh";
	const char *p;

	for (p = basic; *p; ++p) {
		CHECK(signature_is_basic(*p));
		CHECK(!signature_is_container(*p));
	}
	CHECK(!signature_is_basic('v'));
	CHECK(!signature_is_basic('a'));
	CHECK(!signature_is_basic('('));
	CHECK(!signature_is_basic(0));
	CHECK(signature_is_container('v') && signature_is_container('a'));
	CHECK(signature_is_container('(') && signature_is_container('{'));
	CHECK(!signature_is_fixed('s') && !signature_is_fixed('o') && !signature_is_fixed('g'));
	CHECK(signature_is_fixed('h') && signature_is_fixed('d') && signature_is_fixed('b'));

	CHECK(signature_alignment('y') == 1 && signature_fixed_size('y') == 1);
	CHECK(signature_alignment('n') == 2 && signature_fixed_size('q') == 2);
	CHECK(signature_alignment('b') == 4 && signature_fixed_size('b') == 4);
	CHECK(signature_alignment('h') == 4 && signature_fixed_size('u') == 4);
	CHECK(signature_alignment('x') == 8 && signature_fixed_size('d') == 8);
	CHECK(signature_alignment('s') == 4 && signature_fixed_size('s') == 0);
	CHECK(signature_alignment('g') == 1 && signature_alignment('v') == 1);
	CHECK(signature_alignment('a') == 4);
	CHECK(signature_alignment('(') == 8 && signature_alignment('{') == 8);
	CHECK(signature_alignment('z') == 0);
}

int main(void)
{
	test_valid();
	test_limits();
	test_single();
	test_iter();
	test_classify();
	printf("signature: ok\n");
	return 0;
}
