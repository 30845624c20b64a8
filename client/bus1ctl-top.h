/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stddef.h>
#include <stdint.h>

/*
 * bus1ctl top: print what the bus at @address (NULL: $DBUS_SESSION_BUS_ADDRESS)
 * holds, per uid and per connection (the @max_rows with the most queued),
 * @count times (0: until interrupted), every @interval seconds. Over the
 * bus socket, without /dev/bus1. 0, or negative errno (the error printed).
 */
int bus1ctl_top(const char *address, double interval, unsigned int count, size_t max_rows);

/* @v as a short size for a table column (10K, 12M, 3G) in @buf of @n bytes; @buf. */
const char *top_human(uint64_t v, char *buf, size_t n);
