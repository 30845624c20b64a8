/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdio.h>

/*
 * bus1ctl top's kernel section: what bus1.ko holds per uid (the debugfs file
 * /sys/kernel/debug/bus1/users, root only) against the module's quotas
 * (/sys/module/bus1/parameters), and its object counters. When the module is
 * not loaded, or the file cannot be read, one line says why: the broker's
 * figures above it stand on their own.
 */
void top_kernel_print(FILE *f);
