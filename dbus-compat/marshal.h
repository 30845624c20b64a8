/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/**
 * DOC: D-Bus marshalling: writer and reader
 *
 * The writer (struct dc_writer) serializes values into a buffer it grows with
 * realloc(), in a chosen byte order, following a signature given up front:
 * every append/open/close is checked against that signature, so the result
 * always matches it. Alignment is relative to offset 0 of the buffer (a body
 * or a header starts 8-aligned in a message), padding is zero. Errors are
 * sticky: after the first failure every call returns the same error and does
 * nothing, so a sequence of appends can be checked once, at dc_writer_finish().
 * Writer errors are negative errno: -ENOMEM, -EMSGSIZE (an array above 64 MiB
 * or a buffer above 128 MiB), -EINVAL (value or call not matching the
 * signature, invalid UTF-8/object path/signature value).
 *
 * The reader (struct dc_reader) walks a buffer in either byte order against a
 * signature without allocating. Every value is checked when it is read or
 * skipped: bounds, zero alignment padding, booleans 0/1, strings
 * NUL-terminated, valid UTF-8 without interior NUL, object paths and
 * signatures valid, array lengths <= 64 MiB that end exactly on an element
 * boundary, variant signatures one complete type, at most DC_MAX_TOTAL_DEPTH
 * (64) nested containers counting variants. A unix fd ('h') is an opaque
 * UINT32 to the reader: an index beyond the fds that came with the data is
 * not an error (dbus-daemon delivers such a message; the receiver then fails
 * to get the fd), so whoever turns an index into an fd checks it.
 * Reader errors are POSITIVE enum dc_invalid codes (the data is bad); API
 * misuse (asking for a type the signature does not have) is DC_E_TYPE.
 * After an error the reader state is unspecified; stop using it.
 *
 * dc_validate() checks a whole buffer against a signature in one pass; that is
 * what message parsing uses for bodies.
 */

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "dbus-compat/protocol.h"

/* ---------------------------------------------------------------- writer */

struct dc_writer_frame {
	char type;			/* 'a', '(', '{' or 'v' */
	const char *parent_sig;		/* where the enclosing signature resumes */
	const char *parent_end;
	const char *elem_sig;		/* arrays: the element type, rewound per element */
	const char *elem_end;
	size_t len_pos;			/* arrays: offset of the length word */
	size_t start;			/* arrays: offset of the first element */
	size_t n_elems;			/* arrays: elements written so far */
};

/* dc_writer_init() sets each field but @stack by name: a new one goes there too. */
struct dc_writer {
	uint8_t *data;
	size_t size;
	size_t allocated;
	char endian;			/* DC_LITTLE_ENDIAN or DC_BIG_ENDIAN */
	int error;			/* first error (negative errno), sticky */
	const char *sig;		/* next type to write */
	const char *sig_end;		/* end of the current (container's) type list */
	unsigned depth;
	struct dc_writer_frame stack[DC_MAX_TOTAL_DEPTH];
};

/**
 * dc_writer_init() - start writing values of @signature
 * @w: the writer
 * @endian: DC_LITTLE_ENDIAN, DC_BIG_ENDIAN (or DC_NATIVE_ENDIAN)
 * @signature: a NUL-terminated signature; must stay valid until
 *             dc_writer_finish()/deinit. If it is invalid, the writer's sticky
 *             error is set to -EINVAL.
 *
 * No allocation happens here. dc_writer_deinit() frees the buffer.
 */
void dc_writer_init(struct dc_writer *w, char endian, const char *signature);
void dc_writer_deinit(struct dc_writer *w);

/* The sticky error: 0 or negative errno. */
static inline int dc_writer_error(const struct dc_writer *w)
{
	return w->error;
}

/**
 * dc_writer_append() - append one basic value
 * @type: its type code; must be the next type of the signature
 * @value: pointer to the value: uint8_t (y), bool (b), int16_t (n),
 *         uint16_t (q), int32_t (i), uint32_t (u, h: the fd index),
 *         int64_t (x), uint64_t (t), double (d), const char * (s, o, g:
 *         pointer to the string pointer, as libdbus does).
 *
 * Return: 0 or negative errno (also stored as the sticky error).
 */
int dc_writer_append(struct dc_writer *w, char type, const void *value);

/**
 * dc_writer_write() - append several basic values, printf-style
 * @types: basic type codes, e.g. "su"
 *
 * Arguments are passed BY VALUE with C promotions: y b n q i u h as int /
 * unsigned (b: 0 or 1), x as int64_t, t as uint64_t, d as double, s o g as
 * const char *. Containers are not supported here (use open/close).
 */
int dc_writer_write(struct dc_writer *w, const char *types, ...);
int dc_writer_writev(struct dc_writer *w, const char *types, va_list ap);

/**
 * dc_writer_open() - open a container
 * @type: 'a' (array), '(' (struct), '{' (dict entry, only as array element)
 *        or 'v' (variant); must match the signature
 * @contents: for 'v', the single complete type of the variant's value; it must
 *            stay valid until the matching dc_writer_close(). NULL otherwise.
 *
 * Arrays are written as a length placeholder that dc_writer_close()
 * back-patches; any number of elements (0 included) may be written in between.
 */
int dc_writer_open(struct dc_writer *w, char type, const char *contents);

/* Close the innermost container; a struct/dict entry/variant must be complete. */
int dc_writer_close(struct dc_writer *w);

/**
 * dc_writer_append_array() - append a whole array of a fixed-size type
 * @elem: the element type (y n q i u x t d h; b is not allowed: native bool
 *        is not the wire size) — the next signature type must be "a" @elem
 * @data: @n elements in host representation and byte order
 */
int dc_writer_append_array(struct dc_writer *w, char elem, const void *data, size_t n);

/**
 * dc_writer_finish() - check that the whole signature was written and take the buffer
 * @data: the buffer (caller frees; may be NULL if @size is 0)
 * @size: its size
 *
 * Return: 0, or the sticky error, or -EINVAL if values or closes are missing.
 * On success the writer no longer owns the buffer (deinit is still allowed).
 */
int dc_writer_finish(struct dc_writer *w, void **data, size_t *size);

/* ---------------------------------------------------------------- reader */

struct dc_reader_frame {
	char type;			/* 'a', '(', '{' or 'v' */
	const char *parent_sig;		/* where the enclosing signature resumes */
	const char *parent_end;
	size_t parent_limit;		/* the enclosing container's data limit */
	const char *elem_sig;		/* arrays: element type, rewound per element */
	const char *elem_end;
};

struct dc_reader {
	const uint8_t *data;
	size_t size;
	size_t pos;			/* offset of the next byte to read */
	size_t limit;			/* end of the current array's data, else size */
	bool swap;			/* data is in non-native byte order */
	uint32_t n_fds;			/* fds that came with the data (not checked) */
	const char *sig;		/* next type to read */
	const char *sig_end;		/* end of the current type list */
	unsigned depth;
	struct dc_reader_frame stack[DC_MAX_TOTAL_DEPTH];
};

/**
 * dc_reader_init() - start reading @size bytes at @data
 * @endian: DC_LITTLE_ENDIAN or DC_BIG_ENDIAN (anything else: -EINVAL)
 * @sig: the signature of the data (validated here: DC_E_SIGNATURE), need not
 *       be NUL-terminated; must stay valid while the reader is used
 * @n_fds: number of fds that came with the data, kept in r->n_fds for the
 *         caller ('h' values are not checked against it, see above)
 *
 * Offset 0 of @data is taken as 8-aligned.
 */
int dc_reader_init(struct dc_reader *r, const void *data, size_t size, char endian,
		   const char *sig, size_t sig_len, uint32_t n_fds);

/*
 * The type code of the next value ('y', 'a', '(', 'v', ...), or 0 at the end
 * of the current container (for arrays: when the array's data is consumed;
 * at top level: when the signature is consumed).
 */
char dc_reader_peek(const struct dc_reader *r);

/*
 * The complete type of the next value: pointer into the signature (or into
 * the data, inside a variant) and its length; 0 at the end of the container.
 */
size_t dc_reader_peek_signature(const struct dc_reader *r, const char **sig);

/**
 * dc_reader_read_basic() - read one basic value
 * @type: expected type code (DC_E_TYPE if the signature has another)
 * @value: where to store it, same types as dc_writer_append(); strings are
 *         returned as pointers into the data (const char *), NUL-terminated.
 *         May be NULL to just check and skip the value.
 */
int dc_reader_read_basic(struct dc_reader *r, char type, void *value);

/*
 * Read several basic values: dc_reader_read(r, "su", &name, &flags).
 * Pointer types as for dc_reader_read_basic() (b: bool *); a NULL pointer
 * skips that value. Stops at the first error and returns it.
 */
int dc_reader_read(struct dc_reader *r, const char *types, ...);

/**
 * dc_reader_enter() - enter a container
 * @type: 'a', '(', '{' or 'v'; must match the signature
 *
 * In an array, dc_reader_peek() returns the element type until the array's
 * data is consumed, then 0. In a variant, the signature is the variant's
 * contained type (see dc_reader_peek_signature()).
 */
int dc_reader_enter(struct dc_reader *r, char type);

/*
 * Leave the innermost container. Values not read yet are skipped (and
 * validated); for arrays the data must end exactly at the array's length.
 */
int dc_reader_exit(struct dc_reader *r);

/* Skip (and validate) the next complete value. */
int dc_reader_skip(struct dc_reader *r);

/**
 * dc_reader_read_array() - read a whole array of a fixed-size type at once
 * @elem: the element type (y n q i u x t d h b); the next type must be "a" @elem
 * @data: pointer into the buffer, IN THE DATA'S BYTE ORDER (use for 'y', or
 *        check dc_reader.swap)
 * @n: number of elements
 *
 * Booleans and fd indexes are validated.
 */
int dc_reader_read_array(struct dc_reader *r, char elem, const void **data, size_t *n);

/* True if the whole signature was read and no data is left (top level only). */
bool dc_reader_at_end(const struct dc_reader *r);

/**
 * dc_copy_value() - copy the next complete value of @r to @w
 *
 * @w's next type must be the value's type. A variant keeps its contained
 * type; 'h' values are copied as the indexes they are.
 *
 * Return: 0, a positive dc_invalid code (the reader's), or negative errno
 * (the writer's sticky error).
 */
int dc_copy_value(struct dc_reader *r, struct dc_writer *w);

/**
 * dc_validate() - validate @size bytes against a signature in one pass
 *
 * Every value is checked as by the reader, and no bytes may follow the last
 * value (DC_E_TRAILING). No allocation.
 *
 * Return: 0, a positive dc_invalid code, or -EINVAL for a bad @endian.
 */
int dc_validate(const void *data, size_t size, char endian, const char *sig, size_t sig_len,
		uint32_t n_fds);

/* Byte-order helpers shared with message.c. */
static inline uint16_t dc_bswap16(uint16_t v)
{
	return __builtin_bswap16(v);
}

static inline uint32_t dc_bswap32(uint32_t v)
{
	return __builtin_bswap32(v);
}

static inline uint64_t dc_bswap64(uint64_t v)
{
	return __builtin_bswap64(v);
}

/* Load a 32-bit word of byte order @endian from an unaligned pointer. */
static inline uint32_t dc_load_u32(const void *p, char endian)
{
	uint32_t v;

	__builtin_memcpy(&v, p, sizeof(v));
	return endian == DC_NATIVE_ENDIAN ? v : dc_bswap32(v);
}
