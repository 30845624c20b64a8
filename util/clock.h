/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/**
 * DOC: Time
 *
 * The one clock deadlines and timeouts are counted on: CLOCK_MONOTONIC in
 * microseconds (sd-event's unit), never set back, not counting suspend.
 */

#include <stdint.h>
#include <time.h>

static inline uint64_t now_usec(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000ULL + (uint64_t)ts.tv_nsec / 1000;
}
