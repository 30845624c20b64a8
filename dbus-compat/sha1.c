/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * SHA-1 after FIPS 180-4, section 6.1: 512-bit blocks, 80 rounds, a message
 * padded with 0x80, zeros and its length in bits (big-endian).
 */

#include <string.h>
#include "dbus-compat/sha1.h"

static uint32_t rol32(uint32_t v, unsigned int n)
{
	return (v << n) | (v >> (32 - n));
}

static void sha1_block(struct sha1_ctx *ctx, const uint8_t *p)
{
	uint32_t w[80], a, b, c, d, e;
	unsigned int t;

	for (t = 0; t < 16; t++)
		w[t] = (uint32_t)p[4 * t] << 24 | (uint32_t)p[4 * t + 1] << 16 |
		       (uint32_t)p[4 * t + 2] << 8 | (uint32_t)p[4 * t + 3];
	for (t = 16; t < 80; t++)
		w[t] = rol32(w[t - 3] ^ w[t - 8] ^ w[t - 14] ^ w[t - 16], 1);

	a = ctx->h[0];
	b = ctx->h[1];
	c = ctx->h[2];
	d = ctx->h[3];
	e = ctx->h[4];
	for (t = 0; t < 80; t++) {
		uint32_t f, k, tmp;

		if (t < 20) {
			f = (b & c) | (~b & d);
			k = 0x5a827999;
		} else if (t < 40) {
			f = b ^ c ^ d;
			k = 0x6ed9eba1;
		} else if (t < 60) {
			f = (b & c) | (b & d) | (c & d);
			k = 0x8f1bbcdc;
		} else {
			f = b ^ c ^ d;
			k = 0xca62c1d6;
		}
		tmp = rol32(a, 5) + f + e + k + w[t];
		e = d;
		d = c;
		c = rol32(b, 30);
		b = a;
		a = tmp;
	}
	ctx->h[0] += a;
	ctx->h[1] += b;
	ctx->h[2] += c;
	ctx->h[3] += d;
	ctx->h[4] += e;
}

void sha1_init(struct sha1_ctx *ctx)
{
	static const uint32_t iv[5] = { 0x67452301, 0xefcdab89, 0x98badcfe, 0x10325476,
					0xc3d2e1f0 };

	memset(ctx, 0, sizeof(*ctx));
	memcpy(ctx->h, iv, sizeof(iv));
}

void sha1_update(struct sha1_ctx *ctx, const void *data, size_t n)
{
	const uint8_t *p = data;

	ctx->n_bytes += n;
	while (n > 0) {
		size_t k = sizeof(ctx->block) - ctx->n_block;

		if (k > n)
			k = n;
		memcpy(ctx->block + ctx->n_block, p, k);
		ctx->n_block += k;
		p += k;
		n -= k;
		if (ctx->n_block == sizeof(ctx->block)) {
			sha1_block(ctx, ctx->block);
			ctx->n_block = 0;
		}
	}
}

void sha1_final(struct sha1_ctx *ctx, uint8_t digest[SHA1_DIGEST_SIZE])
{
	uint64_t bits = ctx->n_bytes * 8;
	unsigned int i;

	ctx->block[ctx->n_block++] = 0x80;
	if (ctx->n_block > 56) {
		memset(ctx->block + ctx->n_block, 0, sizeof(ctx->block) - ctx->n_block);
		sha1_block(ctx, ctx->block);
		ctx->n_block = 0;
	}
	memset(ctx->block + ctx->n_block, 0, 56 - ctx->n_block);
	for (i = 0; i < 8; i++)
		ctx->block[56 + i] = (uint8_t)(bits >> (56 - 8 * i));
	sha1_block(ctx, ctx->block);

	for (i = 0; i < 5; i++) {
		digest[4 * i] = (uint8_t)(ctx->h[i] >> 24);
		digest[4 * i + 1] = (uint8_t)(ctx->h[i] >> 16);
		digest[4 * i + 2] = (uint8_t)(ctx->h[i] >> 8);
		digest[4 * i + 3] = (uint8_t)ctx->h[i];
	}
	/* Nothing of the input stays behind (the cookie is hashed here). */
	memset(ctx, 0, sizeof(*ctx));
}

void sha1_hex(const void *data, size_t n, char hex[2 * SHA1_DIGEST_SIZE + 1])
{
	static const char digits[] = "0123456789abcdef";
	uint8_t d[SHA1_DIGEST_SIZE];
	struct sha1_ctx ctx;
	unsigned int i;

	sha1_init(&ctx);
	sha1_update(&ctx, data, n);
	sha1_final(&ctx, d);
	for (i = 0; i < SHA1_DIGEST_SIZE; i++) {
		hex[2 * i] = digits[d[i] >> 4];
		hex[2 * i + 1] = digits[d[i] & 15];
	}
	hex[2 * SHA1_DIGEST_SIZE] = '\0';
}
