/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/**
 * DOC: Validation of D-Bus strings and names
 *
 * The one set of validators of the project: the wire layer (marshal.c,
 * message.c), the match rule parser (broker/objects/match.c) and the .service file
 * reader (conf/service.c) all call these, so that a name or string is valid
 * in the same cases everywhere. Signatures are checked by signature.h.
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
 * libdbus itself is laxer than the specification about unique names in one
 * place that clients can observe: the bus names of match rules. The *_lenient()
 * variants reproduce exactly that, and only the match rule parser uses them.
 *
 * All functions take an explicit length and do not require NUL termination.
 * A NUL byte inside @n makes every kind of name invalid.
 */

#include <stdbool.h>
#include <stddef.h>

/**
 * validate_utf8() - check that @s is valid UTF-8 without NUL bytes
 * @s: the bytes
 * @n: their number
 *
 * Return: true if the @n bytes at @s are well-formed shortest-form UTF-8 of
 * scalar values up to U+10FFFF and none of them is NUL.
 */
bool validate_utf8(const char *s, size_t n);

/**
 * validate_object_path() - check an object path
 * @s: the path
 * @n: its length
 *
 * Return: true if @s is "/" or a sequence of "/element" with non-empty
 * [A-Za-z0-9_] elements.
 */
bool validate_object_path(const char *s, size_t n);

/**
 * validate_path_namespace() - check a path prefix (match rules' path_namespace=)
 * @s: the path
 * @n: its length
 *
 * A namespace is an object path ("/" stands for all paths), so the rule is
 * validate_object_path()'s; the separate name keeps callers self-describing.
 *
 * Return: true if @s is a valid object path.
 */
bool validate_path_namespace(const char *s, size_t n);

/**
 * validate_interface_name() - check an interface name
 * @s: the name
 * @n: its length
 *
 * Return: true if @s has 1..255 bytes and two or more "."-separated non-empty
 * [A-Za-z0-9_] elements, none starting with a digit.
 */
bool validate_interface_name(const char *s, size_t n);

/**
 * validate_error_name() - check an error name
 * @s: the name
 * @n: its length
 *
 * Return: as validate_interface_name(), whose rules error names share.
 */
bool validate_error_name(const char *s, size_t n);

/**
 * validate_member_name() - check a method or signal name
 * @s: the name
 * @n: its length
 *
 * Return: true if @s has 1..255 bytes of [A-Za-z0-9_] and does not start
 * with a digit.
 */
bool validate_member_name(const char *s, size_t n);

/**
 * validate_bus_name() - check a unique or well-known bus name
 * @s: the name
 * @n: its length
 *
 * Return: validate_unique_name() if @s starts with ":", else
 * validate_well_known_name().
 */
bool validate_bus_name(const char *s, size_t n);

/**
 * validate_unique_name() - check a unique connection name
 * @s: the name
 * @n: its length
 *
 * Return: true if @s has at most 255 bytes, starts with ":" and the rest has
 * two or more "."-separated non-empty [A-Za-z0-9_-] elements.
 */
bool validate_unique_name(const char *s, size_t n);

/**
 * validate_well_known_name() - check a well-known bus name
 * @s: the name
 * @n: its length
 *
 * Return: true if @s has 1..255 bytes and two or more "."-separated non-empty
 * [A-Za-z0-9_-] elements, none starting with a digit (so never ":").
 */
bool validate_well_known_name(const char *s, size_t n);

/**
 * validate_namespace() - check a bus name prefix (match rules' arg0namespace=)
 * @s: the prefix
 * @n: its length
 *
 * Like a bus name, but a single element is enough ("org" is a namespace of
 * "org.example"), also after ":" (":1"). What dbus-daemon accepts is
 * validate_namespace_lenient().
 *
 * Return: true if @s is a valid namespace.
 */
bool validate_namespace(const char *s, size_t n);

/**
 * validate_bus_name_lenient() - check a bus name as libdbus does
 * @s: the name
 * @n: its length
 *
 * libdbus' _dbus_validate_bus_name(), which dbus-daemon applies to the
 * sender= and destination= keys of match rules, checks a unique name only
 * for its characters: after ":" any [A-Za-z0-9_-] bytes where each "." is
 * followed by one of them. So ":" and ":1" pass, as does ":.1". Well-known
 * names follow validate_well_known_name(). Clients rely on the match rules
 * dbus-daemon accepts, hence this variant; everything else is strict.
 *
 * Return: true if dbus-daemon would accept @s as a bus name in a match rule.
 */
bool validate_bus_name_lenient(const char *s, size_t n);

/**
 * validate_namespace_lenient() - check a bus name prefix as libdbus does
 * @s: the prefix
 * @n: its length
 *
 * validate_namespace() with the unique-name leniency described at
 * validate_bus_name_lenient(), which is what dbus-daemon applies to
 * arg0namespace= (":" passes).
 *
 * Return: true if dbus-daemon would accept @s as arg0namespace.
 */
bool validate_namespace_lenient(const char *s, size_t n);
