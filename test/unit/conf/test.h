/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * Minimal checks for the conf/ unit tests: CHECK* record a failure and go on,
 * ASSERT* stop the program (for preconditions whose failure would crash the
 * rest). main() returns test_result().
 */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int test_failures;

#define CHECK(cond)                                                            \
	do {                                                                   \
		if (!(cond)) {                                                 \
			fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, \
				__LINE__, #cond);                              \
			test_failures++;                                       \
		}                                                              \
	} while (0)

#define ASSERT(cond)                                                           \
	do {                                                                   \
		if (!(cond)) {                                                 \
			fprintf(stderr, "%s:%d: ASSERT failed: %s\n",          \
				__FILE__, __LINE__, #cond);                    \
			abort();                                               \
		}                                                              \
	} while (0)

#define CHECK_STR(a, b)                                                        \
	do {                                                                   \
		const char *_a = (a), *_b = (b);                               \
		if (!((_a == NULL && _b == NULL) ||                            \
		      (_a && _b && strcmp(_a, _b) == 0))) {                    \
			fprintf(stderr, "%s:%d: CHECK_STR failed: %s\n"        \
				"   got: %s\n  want: %s\n", __FILE__, __LINE__,  \
				#a, _a ? _a : "(null)", _b ? _b : "(null)");   \
			test_failures++;                                       \
		}                                                              \
	} while (0)

#define CHECK_INT(a, b)                                                        \
	do {                                                                   \
		long long _a = (long long)(a), _b = (long long)(b);            \
		if (_a != _b) {                                                \
			fprintf(stderr, "%s:%d: CHECK_INT failed: %s: got %lld, want %lld\n", \
				__FILE__, __LINE__, #a, _a, _b);               \
			test_failures++;                                       \
		}                                                              \
	} while (0)

static inline int test_result(const char *name)
{
	if (test_failures) {
		fprintf(stderr, "%s: %d check(s) failed\n", name, test_failures);
		return 1;
	}
	printf("%s: all checks passed\n", name);
	return 0;
}
