/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* Minimal assertion helpers for the broker-core unit tests. */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(cond)                                                            \
	do {                                                                   \
		if (!(cond)) {                                                 \
			fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, \
				__LINE__, #cond);                              \
			abort();                                               \
		}                                                              \
	} while (0)

#define CHECK_EQ(a, b)                                                         \
	do {                                                                   \
		long long _a = (long long)(a), _b = (long long)(b);            \
		if (_a != _b) {                                                \
			fprintf(stderr, "%s:%d: %s == %lld, expected %s == %lld\n", \
				__FILE__, __LINE__, #a, _a, #b, _b);           \
			abort();                                               \
		}                                                              \
	} while (0)

#define CHECK_STR(a, b)                                                        \
	do {                                                                   \
		const char *_a = (a), *_b = (b);                               \
		if (strcmp(_a, _b) != 0) {                                     \
			fprintf(stderr, "%s:%d: %s is\n  \"%s\"\nexpected\n  \"%s\"\n", \
				__FILE__, __LINE__, #a, _a, _b);               \
			abort();                                               \
		}                                                              \
	} while (0)
