/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/**
 * DOC: Validation of D-Bus strings and names
 *
 * Rules from the D-Bus specification ("Valid Names", "Valid Object Paths"),
 * which is what libdbus and dbus-daemon enforce:
 *
 *  - UTF-8: well-formed, shortest form, no surrogates (U+D800..U+DFFF), at
 *    most U+10FFFF, and no NUL byte. Noncharacters (U+FFFE, U+FDD0...) are
 *    accepted as libdbus does since 1.6.
 *  - object path: "/" or "/" elements separated by single "/", each element
 *    non-empty [A-Za-z0-9_], no trailing "/"; any length.
 *  - interface name (and error name): 1..255 bytes, two or more elements
 *    separated by ".", each element non-empty [A-Za-z0-9_] not starting with
 *    a digit.
 *  - member name: 1..255 bytes of [A-Za-z0-9_], not starting with a digit,
 *    no ".".
 *  - bus name: 1..255 bytes. Unique names start with ":" and have two or more
 *    elements of [A-Za-z0-9_-] (digits allowed first). Well-known names have
 *    two or more elements of [A-Za-z0-9_-], none starting with a digit, and
 *    do not start with ".".
 *
 * All functions take an explicit length and do not require NUL termination.
 * A NUL byte inside @n makes every kind of name invalid.
 */

#include <stdbool.h>
#include <stddef.h>

bool validate_utf8(const char *s, size_t n);
bool validate_object_path(const char *s, size_t n);
bool validate_interface_name(const char *s, size_t n);
bool validate_error_name(const char *s, size_t n);	/* same rules as interfaces */
bool validate_member_name(const char *s, size_t n);
bool validate_bus_name(const char *s, size_t n);	/* unique or well-known */
bool validate_unique_name(const char *s, size_t n);	/* ":..." */
bool validate_well_known_name(const char *s, size_t n);	/* not ":..." */

/*
 * Namespace as used by match rules' arg0namespace= (a bus or interface name
 * prefix): like a well-known name but a single element is allowed. Unique-name
 * namespaces (":1") are accepted as dbus-daemon does.
 */
bool validate_namespace(const char *s, size_t n);
