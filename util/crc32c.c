/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * CRC-32C: the CPU's instruction, or slicing by eight: see crc32c.h.
 */

#include <pthread.h>
#include <stdbool.h>
#include <string.h>
#include "util/crc32c.h"
#if defined(__x86_64__)
#include <nmmintrin.h>
#endif

/* The reflected Castagnoli polynomial. */
#define CRC32C_POLY 0x82f63b78u

static uint32_t crc32c_table[8][256];
static pthread_once_t crc32c_once = PTHREAD_ONCE_INIT;

static void crc32c_init(void)
{
	for (uint32_t i = 0; i < 256; i++) {
		uint32_t c = i;

		for (int k = 0; k < 8; k++)
			c = c & 1 ? (c >> 1) ^ CRC32C_POLY : c >> 1;
		crc32c_table[0][i] = c;
	}
	/* Table k: the byte's effect k bytes further on. */
	for (uint32_t i = 0; i < 256; i++)
		for (int k = 1; k < 8; k++)
			crc32c_table[k][i] = (crc32c_table[k - 1][i] >> 8) ^
					     crc32c_table[0][crc32c_table[k - 1][i] & 0xff];
}

uint32_t crc32c_portable(uint32_t crc, const void *p, size_t n)
{
	const uint8_t *b = p;

	pthread_once(&crc32c_once, crc32c_init);
	crc = ~crc;
	while (n >= 8) {
		uint32_t lo, hi;

		memcpy(&lo, b, 4);
		memcpy(&hi, b + 4, 4);
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
		lo = __builtin_bswap32(lo);
		hi = __builtin_bswap32(hi);
#endif
		lo ^= crc;
		crc = crc32c_table[7][lo & 0xff] ^ crc32c_table[6][(lo >> 8) & 0xff] ^
		      crc32c_table[5][(lo >> 16) & 0xff] ^ crc32c_table[4][lo >> 24] ^
		      crc32c_table[3][hi & 0xff] ^ crc32c_table[2][(hi >> 8) & 0xff] ^
		      crc32c_table[1][(hi >> 16) & 0xff] ^ crc32c_table[0][hi >> 24];
		b += 8;
		n -= 8;
	}
	while (n--)
		crc = (crc >> 8) ^ crc32c_table[0][(crc ^ *b++) & 0xff];
	return ~crc;
}

#if defined(__x86_64__)
/* SSE 4.2's crc32: the same polynomial, reflected, without the inversions. */
__attribute__((target("sse4.2")))
static uint32_t crc32c_sse42(uint32_t crc, const void *p, size_t n)
{
	const uint8_t *b = p;
	uint64_t c = ~crc;

	while (n >= 8) {
		uint64_t v;

		memcpy(&v, b, 8);
		c = _mm_crc32_u64(c, v);
		b += 8;
		n -= 8;
	}
	while (n--)
		c = _mm_crc32_u8((uint32_t)c, *b++);
	return ~(uint32_t)c;
}

static bool crc32c_have_sse42(void)
{
	static int have = -1;

	if (have < 0) {
		__builtin_cpu_init();
		have = __builtin_cpu_supports("sse4.2");
	}
	return have;
}
#endif

uint32_t crc32c(uint32_t crc, const void *p, size_t n)
{
#if defined(__x86_64__)
	if (crc32c_have_sse42())
		return crc32c_sse42(crc, p, n);
#endif
	return crc32c_portable(crc, p, n);
}
