/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * D-Bus type signatures: validation and iteration over complete types.
 */

#include "dbus-compat/protocol.h"
#include "dbus-compat/signature.h"
#include "util/macro.h"

bool signature_is_basic(char c)
{
	switch (c) {
	case 'y': case 'b': case 'n': case 'q': case 'i': case 'u': case 'x':
	case 't': case 'd': case 's': case 'o': case 'g': case 'h':
		return true;
	default:
		return false;
	}
}

bool signature_is_fixed(char c)
{
	switch (c) {
	case 'y': case 'b': case 'n': case 'q': case 'i': case 'u': case 'x':
	case 't': case 'd': case 'h':
		return true;
	default:
		return false;
	}
}

bool signature_is_container(char c)
{
	return c == 'a' || c == '(' || c == '{' || c == 'v';
}

unsigned signature_alignment(char c)
{
	switch (c) {
	case 'y': case 'g': case 'v':
		return 1;
	case 'n': case 'q':
		return 2;
	case 'b': case 'i': case 'u': case 'h': case 's': case 'o': case 'a':
		return 4;
	case 'x': case 't': case 'd': case '(': case '{':
		return 8;
	default:
		return 0;
	}
}

unsigned signature_fixed_size(char c)
{
	return signature_is_fixed(c) ? signature_alignment(c) : 0;
}

/*
 * One pass with an explicit stack of open containers. Arrays are popped as
 * soon as their element type is complete; structs and dict entries count
 * their fields. Nesting is bounded by the array/struct limits, so the stack
 * never exceeds DC_MAX_ARRAY_DEPTH + DC_MAX_STRUCT_DEPTH.
 */
int signature_validate(const char *sig, size_t len)
{
	struct {
		char kind;
		uint8_t n_fields;
	} stack[DC_MAX_ARRAY_DEPTH + DC_MAX_STRUCT_DEPTH];
	unsigned depth = 0, arrays = 0, structs = 0;
	size_t i;

	if (len > DC_MAX_SIGNATURE_LENGTH)
		return DC_E_SIGNATURE;

	for (i = 0; i < len; ++i) {
		char c = sig[i];

		switch (c) {
		case 'a':
			if (arrays >= DC_MAX_ARRAY_DEPTH)
				return DC_E_SIGNATURE;
			++arrays;
			stack[depth].kind = 'a';
			stack[depth++].n_fields = 0;
			continue;	/* not complete yet */
		case '(':
		case '{':
			if (structs >= DC_MAX_STRUCT_DEPTH)
				return DC_E_SIGNATURE;
			if (c == '{') {
				/* only directly as array element, basic key */
				if (depth == 0 || stack[depth - 1].kind != 'a' ||
				    i + 1 >= len || !signature_is_basic(sig[i + 1]))
					return DC_E_SIGNATURE;
			}
			++structs;
			stack[depth].kind = c;
			stack[depth++].n_fields = 0;
			continue;
		case ')':
			if (depth == 0 || stack[depth - 1].kind != '(' ||
			    stack[depth - 1].n_fields == 0)
				return DC_E_SIGNATURE;
			--depth;
			--structs;
			break;
		case '}':
			if (depth == 0 || stack[depth - 1].kind != '{' ||
			    stack[depth - 1].n_fields != 2)
				return DC_E_SIGNATURE;
			--depth;
			--structs;
			break;
		default:
			if (!signature_is_basic(c) && c != 'v')
				return DC_E_SIGNATURE;
			break;
		}

		/* A complete type ended: it completes any arrays waiting for it. */
		while (depth > 0 && stack[depth - 1].kind == 'a') {
			--depth;
			--arrays;
		}
		if (depth > 0) {
			if (++stack[depth - 1].n_fields > 2 && stack[depth - 1].kind == '{')
				return DC_E_SIGNATURE;
			/* struct field counts are bounded by the length; avoid wrap */
			if (stack[depth - 1].n_fields == UINT8_MAX)
				stack[depth - 1].n_fields = 3;
		}
	}

	return depth == 0 ? 0 : DC_E_SIGNATURE;
}

size_t signature_next(const char *sig, size_t len)
{
	unsigned depth = 0;
	size_t i = 0;
	char c;

	do {
		if (i >= len)
			return 0;
		c = sig[i++];
		if (c == '(' || c == '{') {
			++depth;
		} else if (c == ')' || c == '}') {
			if (depth == 0)
				return 0;
			--depth;
		} else if (c != 'a' && c != 'v' && !signature_is_basic(c)) {
			return 0;
		}
	} while (depth > 0 || c == 'a');

	return i;
}

int signature_validate_single(const char *sig, size_t len)
{
	int r;

	r = signature_validate(sig, len);
	if (r)
		return r;
	if (len == 0 || signature_next(sig, len) != len)
		return DC_E_SIGNATURE;
	return 0;
}

void signature_iter_init(struct signature_iter *it, const char *sig, size_t len)
{
	it->pos = sig;
	it->end = sig + len;
}

bool signature_iter_next(struct signature_iter *it, const char **type, size_t *len)
{
	size_t n;

	n = signature_next(it->pos, (size_t)(it->end - it->pos));
	if (n == 0)
		return false;
	*type = it->pos;
	*len = n;
	it->pos += n;
	return true;
}
