/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * util/crc32c: the check value of the Castagnoli CRC, and the CPU's
 * instruction (where crc32c() uses it) against the table, on every length
 * and alignment a record has, continued in pieces or in one go.
 */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "util/crc32c.h"
#include "check.h"

int main(void)
{
	uint8_t buf[600];
	uint32_t seed = 12345;

	/* The catalogue's check value: CRC-32C of "123456789". */
	CHECK_EQ(crc32c(0, "123456789", 9), 0xe3069283u);
	CHECK_EQ(crc32c_portable(0, "123456789", 9), 0xe3069283u);
	CHECK_EQ(crc32c(0, "", 0), 0u);

	for (size_t i = 0; i < sizeof(buf); i++) {
		seed = seed * 1103515245u + 12345u;
		buf[i] = (uint8_t)(seed >> 16);
	}
	for (size_t off = 0; off < 8; off++)
		for (size_t n = 0; n + off <= sizeof(buf); n += 7) {
			uint32_t whole = crc32c_portable(0, buf + off, n);

			CHECK_EQ(crc32c(0, buf + off, n), whole);
			/* In two pieces: the same. */
			CHECK_EQ(crc32c(crc32c(0, buf + off, n / 3), buf + off + n / 3, n - n / 3),
				 whole);
		}
	printf("crc32c: ok\n");
	return 0;
}
