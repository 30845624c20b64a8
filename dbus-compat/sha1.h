/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/**
 * DOC: SHA-1
 *
 * The hash of the DBUS_COOKIE_SHA1 authentication mechanism (FIPS 180-4).
 * Only used there: SHA-1 is not collision resistant, but the mechanism
 * needs a keyed digest of random challenges, for which it still serves.
 */

#include <stddef.h>
#include <stdint.h>

#define SHA1_DIGEST_SIZE 20U

struct sha1_ctx {
	uint32_t h[5];
	uint64_t n_bytes;
	uint8_t block[64];
	size_t n_block;
};

void sha1_init(struct sha1_ctx *ctx);
void sha1_update(struct sha1_ctx *ctx, const void *data, size_t n);
void sha1_final(struct sha1_ctx *ctx, uint8_t digest[SHA1_DIGEST_SIZE]);

/* The digest of @data as 40 lowercase hex characters and a NUL. */
void sha1_hex(const void *data, size_t n, char hex[2 * SHA1_DIGEST_SIZE + 1]);
