/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/**
 * DOC: Logging through a callback
 *
 * The modules that do not own the process' log (activation.c, reload.c)
 * log through a callback of their owner, (userdata, syslog priority, text).
 * log_fn_printf() formats the text for one: nothing when @fn is NULL.
 */

#include "util/macro.h"

typedef void (*log_fn)(void *userdata, int priority, const char *text);

_printf_(4, 5) void log_fn_printf(log_fn fn, void *userdata, int priority, const char *fmt, ...);
