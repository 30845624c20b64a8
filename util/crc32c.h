/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/**
 * DOC: CRC-32C
 *
 * The Castagnoli CRC (iSCSI, ext4's metadata), to tell a record that was
 * written whole from one that was torn or scribbled on: the crash journal
 * (broker/objects/journal.h) checks every record with it. The CPU's
 * instruction where it has one (x86-64 with SSE 4.2), else table-driven,
 * eight bytes a step; no claim beyond detecting accidental damage.
 */

#include <stddef.h>
#include <stdint.h>

/* Continue @crc (0 to start) over @n bytes at @p. */
uint32_t crc32c(uint32_t crc, const void *p, size_t n);
/* The same by the table, whatever the CPU has (what crc32c() falls back to; for tests). */
uint32_t crc32c_portable(uint32_t crc, const void *p, size_t n);
