/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * SHA-1 against the FIPS 180 examples and a digest of a long input fed in
 * pieces of every size (block boundaries, padding into a second block).
 */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "dbus-compat/sha1.h"
#include "check.h"

static void expect(const char *in, const char *hex)
{
	char got[41];

	sha1_hex(in, strlen(in), got);
	if (strcmp(got, hex))
		fprintf(stderr, "sha1('%s') = %s, want %s\n", in, got, hex);
	CHECK(!strcmp(got, hex));
}

int main(void)
{
	static char million[1000000];
	struct sha1_ctx ctx;
	uint8_t d1[SHA1_DIGEST_SIZE], d2[SHA1_DIGEST_SIZE];
	char hex[41];

	expect("", "da39a3ee5e6b4b0d3255bfef95601890afd80709");
	expect("abc", "a9993e364706816aba3e25717850c26c9cd0d89d");
	expect("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
	       "84983e441c3bd26ebaae4aa1f95129e5e54670f1");
	expect("The quick brown fox jumps over the lazy dog",
	       "2fd4e1c67a2d28fced849ee1bb76e7391b93eb12");
	/*
	 * "0123456789012..." of 55 to 120 bytes: the length field fits into the
	 * last block or spills over (digests from Python's hashlib).
	 */
	{
		static const struct {
			size_t n;
			const char *hex;
		} v[] = {
			{ 55, "9f3a4ce7f66b1b74c34da2c5d732c39f81e0f8df" },
			{ 56, "0a40b8fbdaafb7c29651618ac15d27e772287130" },
			{ 63, "984b0f2f6d78c24020f5a79d409f67ab99302891" },
			{ 64, "cf0800f7644ace3cb4c3fa33388d3ba0ea3c8b6e" },
			{ 65, "92de3a8444fe6d15268f0ba810aa43bc8b3a4ffe" },
			{ 119, "d1ba16c5f745875597b6d0b9061f30b5a5c89092" },
			{ 120, "deb4cf0a6f315d8403e5eff0923a8c5c52f21ac8" },
		};
		char digits[128];

		for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
			for (size_t k = 0; k < v[i].n; k++)
				digits[k] = (char)('0' + k % 10);
			digits[v[i].n] = '\0';
			expect(digits, v[i].hex);
		}
	}
	memset(million, 'a', sizeof(million));
	sha1_hex(million, sizeof(million), hex);
	CHECK(!strcmp(hex, "34aa973cd4c4daa4f61eeb2bdbad27316534016f"));

	/* Any split gives the same digest. */
	for (size_t step = 1; step <= 130; step++) {
		sha1_init(&ctx);
		for (size_t off = 0; off < 1000; off += step)
			sha1_update(&ctx, million + off, off + step > 1000 ? 1000 - off : step);
		sha1_final(&ctx, d1);
		sha1_init(&ctx);
		sha1_update(&ctx, million, 1000);
		sha1_final(&ctx, d2);
		CHECK(!memcmp(d1, d2, sizeof(d1)));
	}
	printf("ok\n");
	return 0;
}
