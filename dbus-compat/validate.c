/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Validation of UTF-8, object paths and the D-Bus name kinds. Also the
 * descriptions of enum dc_invalid.
 */

#include <string.h>
#include "dbus-compat/protocol.h"
#include "dbus-compat/validate.h"
#include "util/macro.h"

bool validate_utf8(const char *str, size_t n)
{
	const uint8_t *s = (const uint8_t *)str, *end = s + n;

	while (s < end) {
		uint32_t c;
		size_t len, i;

		/* ASCII fast path, 8 bytes at a time when possible. */
		if (*s < 0x80) {
			if (_unlikely_(*s == 0))
				return false;
			while (end - s >= 8) {
				uint64_t w;

				memcpy(&w, s, 8);
				if (w & UINT64_C(0x8080808080808080))
					break;
				/* any zero byte in w? */
				if ((w - UINT64_C(0x0101010101010101)) & ~w &
				    UINT64_C(0x8080808080808080))
					break;
				s += 8;
			}
			if (s < end && *s < 0x80) {
				if (*s == 0)
					return false;
				++s;
			}
			continue;
		}

		if ((*s & 0xe0) == 0xc0) {
			len = 2;
			c = *s & 0x1f;
		} else if ((*s & 0xf0) == 0xe0) {
			len = 3;
			c = *s & 0x0f;
		} else if ((*s & 0xf8) == 0xf0) {
			len = 4;
			c = *s & 0x07;
		} else {
			return false;	/* continuation byte or 0xf8.. */
		}

		if ((size_t)(end - s) < len)
			return false;	/* truncated sequence */
		for (i = 1; i < len; ++i) {
			if ((s[i] & 0xc0) != 0x80)
				return false;
			c = (c << 6) | (s[i] & 0x3f);
		}

		/* shortest form only */
		if ((len == 2 && c < 0x80) || (len == 3 && c < 0x800) || (len == 4 && c < 0x10000))
			return false;
		if (c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff))
			return false;
		s += len;
	}

	return true;
}

/* Character classes of names, one table lookup per byte. */
enum {
	C_WORD = 1,	/* [A-Za-z0-9_] */
	C_DIGIT = 2,	/* [0-9] */
	C_DASH = 4,	/* '-' */
};

static const uint8_t char_class[256] = {
	['0' ... '9'] = C_WORD | C_DIGIT,
	['A' ... 'Z'] = C_WORD,
	['a' ... 'z'] = C_WORD,
	['_'] = C_WORD,
	['-'] = C_DASH,
};

static inline bool is_word(char c)
{
	return char_class[(uint8_t)c] & C_WORD;
}

static inline bool is_digit(char c)
{
	return char_class[(uint8_t)c] & C_DIGIT;
}

bool validate_object_path(const char *s, size_t n)
{
	size_t i;
	bool prev_slash;

	if (n == 0 || s[0] != '/')
		return false;
	if (n == 1)
		return true;

	prev_slash = true;
	for (i = 1; i < n; ++i) {
		if (s[i] == '/') {
			if (prev_slash)
				return false;	/* "//" */
			prev_slash = true;
		} else if (is_word(s[i])) {
			prev_slash = false;
		} else {
			return false;
		}
	}

	return !prev_slash;	/* no trailing '/' */
}

bool validate_path_namespace(const char *s, size_t n)
{
	return validate_object_path(s, n);
}

/*
 * Dot-separated elements. @dash: '-' allowed in elements; @digit_first:
 * elements may start with a digit; @min_elements: 1 or 2.
 */
static bool validate_dotted(const char *s, size_t n, bool dash, bool digit_first,
			    unsigned min_elements)
{
	uint8_t allowed = C_WORD | (dash ? C_DASH : 0);
	unsigned elements = 1;
	bool elem_start = true;
	size_t i;

	if (n == 0 || n > DC_MAX_NAME_LENGTH)
		return false;

	for (i = 0; i < n; ++i) {
		uint8_t cls = char_class[(uint8_t)s[i]];

		if (s[i] == '.') {
			if (elem_start)
				return false;	/* empty element */
			++elements;
			elem_start = true;
			continue;
		}
		if (!(cls & allowed))
			return false;
		if (elem_start && (cls & C_DIGIT) && !digit_first)
			return false;
		elem_start = false;
	}

	return !elem_start && elements >= min_elements;
}

bool validate_interface_name(const char *s, size_t n)
{
	return validate_dotted(s, n, false, false, 2);
}

bool validate_error_name(const char *s, size_t n)
{
	return validate_interface_name(s, n);
}

bool validate_member_name(const char *s, size_t n)
{
	size_t i;

	if (n == 0 || n > DC_MAX_NAME_LENGTH || is_digit(s[0]))
		return false;
	for (i = 0; i < n; ++i)
		if (!is_word(s[i]))
			return false;
	return true;
}

bool validate_unique_name(const char *s, size_t n)
{
	if (n < 2 || n > DC_MAX_NAME_LENGTH || s[0] != ':')
		return false;
	return validate_dotted(s + 1, n - 1, true, true, 2);
}

bool validate_well_known_name(const char *s, size_t n)
{
	if (n == 0 || s[0] == ':')
		return false;
	return validate_dotted(s, n, true, false, 2);
}

bool validate_bus_name(const char *s, size_t n)
{
	if (n > 0 && s[0] == ':')
		return validate_unique_name(s, n);
	return validate_well_known_name(s, n);
}

bool validate_namespace(const char *s, size_t n)
{
	if (n == 0 || n > DC_MAX_NAME_LENGTH)
		return false;
	if (s[0] == ':')
		return validate_dotted(s + 1, n - 1, true, true, 1);
	return validate_dotted(s, n, true, false, 1);
}

/*
 * The part of a unique name after ':' as libdbus checks it: only the
 * characters, and that no '.' is last or followed by another '.'. Element
 * count and an empty first element are not checked (see validate.h).
 */
static bool validate_unique_tail_lenient(const char *s, size_t n)
{
	size_t i;

	for (i = 0; i < n; ++i) {
		if (s[i] == '.') {
			if (i + 1 == n || !(char_class[(uint8_t)s[i + 1]] & (C_WORD | C_DASH)))
				return false;
			++i;	/* the byte after the dot is checked */
		} else if (!(char_class[(uint8_t)s[i]] & (C_WORD | C_DASH))) {
			return false;
		}
	}
	return true;
}

bool validate_bus_name_lenient(const char *s, size_t n)
{
	if (n == 0 || n > DC_MAX_NAME_LENGTH)
		return false;
	if (s[0] == ':')
		return validate_unique_tail_lenient(s + 1, n - 1);
	return validate_well_known_name(s, n);
}

bool validate_namespace_lenient(const char *s, size_t n)
{
	if (n == 0 || n > DC_MAX_NAME_LENGTH)
		return false;
	if (s[0] == ':')
		return validate_unique_tail_lenient(s + 1, n - 1);
	return validate_namespace(s, n);
}

static const char *const invalid_strings[_DC_E_MAX] = {
	[_DC_E_SUCCESS] = "valid",
	[DC_E_TRUNCATED] = "data ends in the middle of a value",
	[DC_E_PADDING] = "non-zero alignment padding",
	[DC_E_BOOLEAN] = "boolean value neither 0 nor 1",
	[DC_E_STRING_NUL] = "string not NUL-terminated",
	[DC_E_UTF8] = "string is not valid UTF-8 or contains NUL",
	[DC_E_OBJECT_PATH] = "invalid object path",
	[DC_E_SIGNATURE] = "invalid type signature",
	[DC_E_ARRAY_TOO_BIG] = "array longer than 64 MiB",
	[DC_E_ARRAY_LENGTH] = "array length does not match its elements",
	[DC_E_VARIANT_SIGNATURE] = "variant signature is not a single complete type",
	[DC_E_NESTING] = "containers nested too deeply",
	[DC_E_UNIX_FD_INDEX] = "unix fd index out of range",
	[DC_E_TRAILING] = "trailing bytes after the last value",
	[DC_E_TYPE] = "value of an unexpected type",
	[DC_E_NEED_MORE] = "need more data",
	[DC_E_ENDIAN] = "invalid byte order mark",
	[DC_E_VERSION] = "unsupported protocol version",
	[DC_E_MESSAGE_TOO_BIG] = "message larger than 128 MiB",
	[DC_E_SIZE_MISMATCH] = "message size does not match its header",
	[DC_E_MESSAGE_TYPE] = "invalid message type",
	[DC_E_SERIAL] = "serial is zero",
	[DC_E_FIELD_CODE] = "invalid header field code",
	[DC_E_FIELD_TYPE] = "header field has the wrong type",
	[DC_E_FIELD_DUPLICATE] = "duplicate header field",
	[DC_E_FIELD_VALUE] = "invalid header field value",
	[DC_E_MISSING_PATH] = "missing PATH header field",
	[DC_E_MISSING_INTERFACE] = "missing INTERFACE header field",
	[DC_E_MISSING_MEMBER] = "missing MEMBER header field",
	[DC_E_MISSING_ERROR_NAME] = "missing ERROR_NAME header field",
	[DC_E_MISSING_REPLY_SERIAL] = "missing REPLY_SERIAL header field",
	[DC_E_LOCAL_PATH] = "reserved path /org/freedesktop/DBus/Local",
	[DC_E_LOCAL_INTERFACE] = "reserved interface org.freedesktop.DBus.Local",
	[DC_E_UNIX_FDS] = "UNIX_FDS does not match the fds received",
	[DC_E_BODY] = "non-empty body without SIGNATURE",
};

const char *dc_invalid_to_string(int code)
{
	if (code < 0 || code >= _DC_E_MAX || !invalid_strings[code])
		return "unknown";
	return invalid_strings[code];
}
