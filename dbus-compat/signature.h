/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/**
 * DOC: D-Bus type signatures
 *
 * A signature is a string of zero or more "single complete types" (basic type
 * codes, 'v', 'a' + a complete type, '(' complete types ')', and '{' basic
 * complete ')' only directly inside an array).
 *
 * Validation rules (D-Bus specification, "Valid Signatures"):
 *  - at most DC_MAX_SIGNATURE_LENGTH (255) bytes, only type codes and brackets;
 *  - at most 32 nested arrays (DC_MAX_ARRAY_DEPTH) and 32 nested structs
 *    (DC_MAX_STRUCT_DEPTH; dict entries count as structs), so at most 64
 *    containers in total; nesting is counted through all enclosing containers,
 *    not only consecutive 'a's;
 *  - no empty struct "()";
 *  - a dict entry appears only as array element ("a{"), with exactly two
 *    fields, the first a basic type.
 *
 * All functions take an explicit length; the string need not be
 * NUL-terminated, and a NUL byte inside the length is invalid.
 */

#include <stdbool.h>
#include <stddef.h>

/**
 * signature_validate() - check a whole signature (zero or more complete types)
 * @sig: the type codes
 * @len: their number
 *
 * Return: 0 if valid, DC_E_SIGNATURE (positive) otherwise.
 */
int signature_validate(const char *sig, size_t len);

/**
 * signature_validate_single() - check that @sig is exactly one complete type
 *
 * Variant signatures must satisfy this.
 *
 * Return: 0 if valid, DC_E_SIGNATURE (positive) otherwise.
 */
int signature_validate_single(const char *sig, size_t len);

/**
 * signature_next() - length of the complete type at the start of @sig
 * @sig: a VALID signature (or a suffix of one starting at a type boundary)
 * @len: bytes available at @sig
 *
 * Return: the number of bytes of the first complete type; 0 if @len is 0,
 * @sig starts with ')' or '}' (end of the enclosing container), or the type is
 * malformed/truncated (defensive: callers pass validated signatures).
 */
size_t signature_next(const char *sig, size_t len);

/**
 * struct signature_iter - iterate the complete types of a signature
 *
 * Usage:
 *	struct signature_iter it;
 *	const char *t; size_t n;
 *	signature_iter_init(&it, sig, strlen(sig));
 *	while (signature_iter_next(&it, &t, &n))
 *		... t[0..n) is one complete type ...
 *
 * The signature must be valid.
 */
struct signature_iter {
	const char *pos;
	const char *end;
};

void signature_iter_init(struct signature_iter *it, const char *sig, size_t len);
/* Return: true and the next complete type in @type/@len, false at the end. */
bool signature_iter_next(struct signature_iter *it, const char **type, size_t *len);

/* Type code classification. Brackets and unknown characters are none of these. */
bool signature_is_basic(char c);	/* ybnqiuxtdsogh */
bool signature_is_fixed(char c);	/* ybnqiuxtdh: fixed-size basic types */
bool signature_is_container(char c);	/* a ( { v */
/*
 * Wire alignment of the values of the type whose signature starts with @c
 * (1, 2, 4 or 8), 0 for characters that start no type.
 */
unsigned signature_alignment(char c);
/* Wire size of a fixed type (1, 2, 4, 8), 0 for other types. */
unsigned signature_fixed_size(char c);
