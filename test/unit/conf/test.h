/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * The conf/ unit tests: the assertions are those of test/common/check.h (a failed
 * CHECK* stops the program). test_failures counts the mismatches the differential
 * loops report themselves and go on; main() returns test_result().
 */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "check.h"

static int test_failures;

static inline int test_result(const char *name)
{
	if (test_failures) {
		fprintf(stderr, "%s: %d check(s) failed\n", name, test_failures);
		return 1;
	}
	printf("%s: all checks passed\n", name);
	return 0;
}
