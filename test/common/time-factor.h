/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * DOC: How much slower this machine is now than the reference CI machine.
 *
 * tools/run-tests.sh measures it once at the start of a run (tools/time-factor.sh) and exports
 * it as BUS1_TIME_FACTOR; run-guest.sh passes it into the guests. A bound that only catches a
 * hang (a bus that never prints its address, a call that never returns) is multiplied by it, so
 * that a loaded machine stretches the bound instead of failing the test. Unset, empty or not a
 * positive integer: 1.
 */

#include <stdlib.h>

static inline unsigned int test_time_factor(void)
{
	const char *e = getenv("BUS1_TIME_FACTOR");
	int factor = e ? atoi(e) : 1;

	return factor > 1 ? (unsigned int)factor : 1;
}
