/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/**
 * DOC: Strings
 *
 * Helpers for NUL-terminated strings and arrays of them.
 */

#include <string.h>

/* qsort()/bsearch() comparator of an array of char *: by strcmp(). */
static inline int strcmp_ptr(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}
