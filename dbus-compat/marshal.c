/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * D-Bus marshalling: a signature-checked writer into a growing buffer, and a
 * validating reader that walks a buffer without allocating.
 */

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "dbus-compat/marshal.h"
#include "dbus-compat/signature.h"
#include "dbus-compat/validate.h"
#include "util/macro.h"

/* Basic type codes and 'v' are complete types of one character. */
static const bool one_char_type[256] = {
	['y'] = true, ['b'] = true, ['n'] = true, ['q'] = true, ['i'] = true,
	['u'] = true, ['x'] = true, ['t'] = true, ['d'] = true, ['s'] = true,
	['o'] = true, ['g'] = true, ['h'] = true, ['v'] = true,
};

static inline size_t type_length(const char *sig, const char *end)
{
	if (_likely_(one_char_type[(uint8_t)*sig]))
		return 1;
	return signature_next(sig, (size_t)(end - sig));
}

/* ---------------------------------------------------------------- writer */

static int writer_fail(struct dc_writer *w, int r)
{
	if (!w->error)
		w->error = r;
	return w->error;
}

void dc_writer_init(struct dc_writer *w, char endian, const char *signature)
{
	size_t len = signature ? strlen(signature) : 0;

	/*
	 * Field by field: the frame stack (4 KiB) is written as containers
	 * open, never read before, and zeroing it cost more than the rest of
	 * building a small message.
	 */
	w->data = NULL;
	w->size = 0;
	w->allocated = 0;
	w->endian = endian;
	w->error = 0;
	w->sig = signature ? signature : "";
	w->sig_end = w->sig + len;
	w->depth = 0;
	if (endian != DC_LITTLE_ENDIAN && endian != DC_BIG_ENDIAN)
		w->error = -EINVAL;
	else if (signature_validate(w->sig, len))
		w->error = -EINVAL;
}

void dc_writer_deinit(struct dc_writer *w)
{
	free(w->data);
	w->data = NULL;
	w->size = w->allocated = 0;
}

static int writer_reserve(struct dc_writer *w, size_t n)
{
	size_t want;
	uint8_t *p;

	if (n > DC_MAX_MESSAGE_SIZE || w->size + n > DC_MAX_MESSAGE_SIZE)
		return writer_fail(w, -EMSGSIZE);
	want = w->size + n;
	if (want <= w->allocated)
		return 0;

	want = MAX(want, MAX(w->allocated * 2, (size_t)64));
	want = MIN(want, (size_t)DC_MAX_MESSAGE_SIZE);
	p = realloc(w->data, want);
	if (!p)
		return writer_fail(w, -ENOMEM);
	w->data = p;
	w->allocated = want;
	return 0;
}

static int writer_align(struct dc_writer *w, unsigned align)
{
	size_t pad = ALIGN_TO(w->size, (size_t)align) - w->size;
	int r;

	if (!pad)
		return 0;
	r = writer_reserve(w, pad);
	if (r)
		return r;
	memset(w->data + w->size, 0, pad);
	w->size += pad;
	return 0;
}

/* Append raw bytes; space must have been reserved. */
static void writer_put(struct dc_writer *w, const void *p, size_t n)
{
	memcpy(w->data + w->size, p, n);
	w->size += n;
}

static void writer_put_u32(struct dc_writer *w, uint32_t v)
{
	if (w->endian != DC_NATIVE_ENDIAN)
		v = dc_bswap32(v);
	writer_put(w, &v, 4);
}

/*
 * Take the next complete type off the signature; it must start with @type.
 * Inside an array, the element type is rewound for every element.
 */
static int writer_next(struct dc_writer *w, char type, const char **t, size_t *n)
{
	struct dc_writer_frame *f = w->depth ? &w->stack[w->depth - 1] : NULL;
	size_t len;

	if (f && f->type == 'a' && w->sig == w->sig_end)
		w->sig = f->elem_sig;
	if (w->sig >= w->sig_end || *w->sig != type)
		return writer_fail(w, -EINVAL);
	len = signature_next(w->sig, (size_t)(w->sig_end - w->sig));
	if (len == 0)
		return writer_fail(w, -EINVAL);
	if (f && f->type == 'a' && w->sig == f->elem_sig)
		++f->n_elems;
	*t = w->sig;
	*n = len;
	w->sig += len;
	return 0;
}

static int writer_string(struct dc_writer *w, char type, const char *s)
{
	size_t len;
	int r;

	if (!s)
		return writer_fail(w, -EINVAL);
	len = strlen(s);

	switch (type) {
	case 's':
		if (!validate_utf8(s, len))
			return writer_fail(w, -EINVAL);
		break;
	case 'o':
		if (!validate_object_path(s, len))
			return writer_fail(w, -EINVAL);
		break;
	case 'g':
		if (signature_validate(s, len))
			return writer_fail(w, -EINVAL);
		r = writer_reserve(w, len + 2);
		if (r)
			return r;
		w->data[w->size++] = (uint8_t)len;
		writer_put(w, s, len + 1);
		return 0;
	}

	if (len > DC_MAX_MESSAGE_SIZE)
		return writer_fail(w, -EMSGSIZE);
	r = writer_align(w, 4);
	if (r)
		return r;
	r = writer_reserve(w, 4 + len + 1);
	if (r)
		return r;
	writer_put_u32(w, (uint32_t)len);
	writer_put(w, s, len + 1);
	return 0;
}

int dc_writer_append(struct dc_writer *w, char type, const void *value)
{
	const char *t;
	size_t n;
	unsigned size;
	uint8_t buf[8];
	int r;

	if (w->error)
		return w->error;
	if (!signature_is_basic(type) || !value)
		return writer_fail(w, -EINVAL);
	r = writer_next(w, type, &t, &n);
	if (r)
		return r;

	switch (type) {
	case 's':
	case 'o':
	case 'g':
		return writer_string(w, type, *(const char *const *)value);
	case 'b': {
		uint32_t v = *(const bool *)value ? 1 : 0;

		memcpy(buf, &v, 4);
		break;
	}
	default:
		memcpy(buf, value, signature_fixed_size(type));
		break;
	}

	size = signature_fixed_size(type);
	if (w->endian != DC_NATIVE_ENDIAN) {
		uint16_t v16;
		uint32_t v32;
		uint64_t v64;

		switch (size) {
		case 2:
			memcpy(&v16, buf, 2);
			v16 = dc_bswap16(v16);
			memcpy(buf, &v16, 2);
			break;
		case 4:
			memcpy(&v32, buf, 4);
			v32 = dc_bswap32(v32);
			memcpy(buf, &v32, 4);
			break;
		case 8:
			memcpy(&v64, buf, 8);
			v64 = dc_bswap64(v64);
			memcpy(buf, &v64, 8);
			break;
		}
	}

	r = writer_align(w, size);
	if (r)
		return r;
	r = writer_reserve(w, size);
	if (r)
		return r;
	writer_put(w, buf, size);
	return 0;
}

int dc_writer_writev(struct dc_writer *w, const char *types, va_list ap)
{
	const char *p;
	int r = 0;

	if (!types)
		return writer_fail(w, -EINVAL);

	for (p = types; *p && !r; ++p) {
		switch (*p) {
		case 'y': {
			uint8_t v = (uint8_t)va_arg(ap, int);

			r = dc_writer_append(w, *p, &v);
			break;
		}
		case 'b': {
			bool v = !!va_arg(ap, int);

			r = dc_writer_append(w, *p, &v);
			break;
		}
		case 'n':
		case 'q': {
			uint16_t v = (uint16_t)va_arg(ap, int);

			r = dc_writer_append(w, *p, &v);
			break;
		}
		case 'i':
		case 'u':
		case 'h': {
			uint32_t v = va_arg(ap, uint32_t);

			r = dc_writer_append(w, *p, &v);
			break;
		}
		case 'x':
		case 't': {
			uint64_t v = va_arg(ap, uint64_t);

			r = dc_writer_append(w, *p, &v);
			break;
		}
		case 'd': {
			double v = va_arg(ap, double);

			r = dc_writer_append(w, *p, &v);
			break;
		}
		case 's':
		case 'o':
		case 'g': {
			const char *v = va_arg(ap, const char *);

			r = dc_writer_append(w, *p, &v);
			break;
		}
		default:
			r = writer_fail(w, -EINVAL);
			break;
		}
	}

	return r;
}

int dc_writer_write(struct dc_writer *w, const char *types, ...)
{
	va_list ap;
	int r;

	va_start(ap, types);
	r = dc_writer_writev(w, types, ap);
	va_end(ap);
	return r;
}

int dc_writer_open(struct dc_writer *w, char type, const char *contents)
{
	struct dc_writer_frame *f;
	const char *t;
	size_t n;
	int r;

	if (w->error)
		return w->error;
	if (type != 'a' && type != '(' && type != '{' && type != 'v')
		return writer_fail(w, -EINVAL);
	if (w->depth >= DC_MAX_TOTAL_DEPTH)
		return writer_fail(w, -EINVAL);
	if ((type == 'v') != !!contents)
		return writer_fail(w, -EINVAL);
	if (type == 'v' && signature_validate_single(contents, strlen(contents)))
		return writer_fail(w, -EINVAL);

	r = writer_next(w, type, &t, &n);
	if (r)
		return r;

	f = &w->stack[w->depth];
	*f = (struct dc_writer_frame){
		.type = type,
		.parent_sig = w->sig,
		.parent_end = w->sig_end,
	};

	switch (type) {
	case 'a':
		r = writer_align(w, 4);
		if (r)
			return r;
		r = writer_reserve(w, 4);
		if (r)
			return r;
		f->len_pos = w->size;
		writer_put_u32(w, 0);
		/* element padding is present even for empty arrays */
		r = writer_align(w, signature_alignment(t[1]));
		if (r)
			return r;
		f->start = w->size;
		f->elem_sig = t + 1;
		f->elem_end = t + n;
		w->sig = t + 1;
		w->sig_end = t + n;
		break;
	case '(':
	case '{':
		r = writer_align(w, 8);
		if (r)
			return r;
		w->sig = t + 1;
		w->sig_end = t + n - 1;
		break;
	case 'v':
		r = writer_string(w, 'g', contents);
		if (r)
			return r;
		w->sig = contents;
		w->sig_end = contents + strlen(contents);
		break;
	}

	++w->depth;
	return 0;
}

int dc_writer_close(struct dc_writer *w)
{
	struct dc_writer_frame *f;

	if (w->error)
		return w->error;
	if (w->depth == 0)
		return writer_fail(w, -EINVAL);
	f = &w->stack[w->depth - 1];

	if (f->type == 'a') {
		size_t len = w->size - f->start;
		uint32_t v;

		if (w->sig != w->sig_end && w->sig != f->elem_sig)
			return writer_fail(w, -EINVAL);
		if (len > DC_MAX_ARRAY_SIZE)
			return writer_fail(w, -EMSGSIZE);
		v = (uint32_t)len;
		if (w->endian != DC_NATIVE_ENDIAN)
			v = dc_bswap32(v);
		memcpy(w->data + f->len_pos, &v, 4);
	} else if (w->sig != w->sig_end) {
		return writer_fail(w, -EINVAL);	/* struct/variant not complete */
	}

	w->sig = f->parent_sig;
	w->sig_end = f->parent_end;
	--w->depth;
	return 0;
}

int dc_writer_append_array(struct dc_writer *w, char elem, const void *data, size_t n)
{
	struct dc_writer_frame *f;
	unsigned size = signature_fixed_size(elem);
	const uint8_t *src = data;
	size_t i;
	int r;

	if (w->error)
		return w->error;
	if (!size || elem == 'b' || (n && !data))
		return writer_fail(w, -EINVAL);
	if (w->sig >= w->sig_end || w->sig[0] != 'a' || w->sig_end - w->sig < 2 ||
	    w->sig[1] != elem) {
		/* may be an array element position that must rewind first */
		f = w->depth ? &w->stack[w->depth - 1] : NULL;
		if (!(f && f->type == 'a' && w->sig == w->sig_end && f->elem_sig[0] == 'a' &&
		      f->elem_sig[1] == elem))
			return writer_fail(w, -EINVAL);
	}
	if (n > DC_MAX_ARRAY_SIZE / size)
		return writer_fail(w, -EMSGSIZE);

	r = dc_writer_open(w, 'a', NULL);
	if (r)
		return r;
	r = writer_reserve(w, n * size);
	if (r)
		return r;
	if (w->endian == DC_NATIVE_ENDIAN || size == 1) {
		if (n)
			writer_put(w, src, n * size);
	} else {
		for (i = 0; i < n; ++i) {
			uint8_t *dst = w->data + w->size + i * size;
			unsigned k;

			for (k = 0; k < size; ++k)
				dst[k] = src[i * size + size - 1 - k];
		}
		w->size += n * size;
	}
	/* the element type is consumed once the array has elements */
	w->sig = w->sig_end;
	return dc_writer_close(w);
}

int dc_writer_finish(struct dc_writer *w, void **data, size_t *size)
{
	if (w->error)
		return w->error;
	if (w->depth != 0 || w->sig != w->sig_end)
		return writer_fail(w, -EINVAL);
	*data = steal_ptr(w->data);
	*size = w->size;
	w->size = w->allocated = 0;
	return 0;
}

/* ---------------------------------------------------------------- reader */

int dc_reader_init(struct dc_reader *r, const void *data, size_t size, char endian,
		   const char *sig, size_t sig_len, uint32_t n_fds)
{
	if (endian != DC_LITTLE_ENDIAN && endian != DC_BIG_ENDIAN)
		return -EINVAL;
	if (!sig)
		sig = "";
	if (signature_validate(sig, sig_len))
		return DC_E_SIGNATURE;

	r->data = data;
	r->size = size;
	r->pos = 0;
	r->limit = size;
	r->swap = endian != DC_NATIVE_ENDIAN;
	r->n_fds = n_fds;
	r->sig = sig;
	r->sig_end = sig + sig_len;
	r->depth = 0;
	return 0;
}

static inline struct dc_reader_frame *reader_top(const struct dc_reader *r)
{
	return r->depth ? (struct dc_reader_frame *)&r->stack[r->depth - 1] : NULL;
}

/* Not enough data: inside an array that means the length is wrong. */
static int reader_short(const struct dc_reader *r)
{
	return r->limit < r->size ? DC_E_ARRAY_LENGTH : DC_E_TRUNCATED;
}

static int reader_align(struct dc_reader *r, unsigned align)
{
	size_t np = ALIGN_TO(r->pos, (size_t)align);

	if (np > r->limit)
		return reader_short(r);
	for (; r->pos < np; ++r->pos)
		if (r->data[r->pos])
			return DC_E_PADDING;
	return 0;
}

static uint16_t reader_u16(const struct dc_reader *r, size_t at)
{
	uint16_t v;

	memcpy(&v, r->data + at, 2);
	return r->swap ? dc_bswap16(v) : v;
}

static uint32_t reader_u32(const struct dc_reader *r, size_t at)
{
	uint32_t v;

	memcpy(&v, r->data + at, 4);
	return r->swap ? dc_bswap32(v) : v;
}

static uint64_t reader_u64(const struct dc_reader *r, size_t at)
{
	uint64_t v;

	memcpy(&v, r->data + at, 8);
	return r->swap ? dc_bswap64(v) : v;
}

char dc_reader_peek(const struct dc_reader *r)
{
	const struct dc_reader_frame *f = reader_top(r);

	if (f && f->type == 'a') {
		if (r->pos >= r->limit)
			return 0;
		if (r->sig == r->sig_end)
			return f->elem_sig[0];
	}
	return r->sig < r->sig_end ? *r->sig : 0;
}

size_t dc_reader_peek_signature(const struct dc_reader *r, const char **sig)
{
	const struct dc_reader_frame *f = reader_top(r);
	const char *s = r->sig, *end = r->sig_end;

	if (f && f->type == 'a') {
		if (r->pos >= r->limit)
			return 0;
		if (s == end)
			s = f->elem_sig;
	}
	if (s >= end)
		return 0;
	*sig = s;
	return signature_next(s, (size_t)(end - s));
}

/* Consume the next complete type, which must start with @type. */
static int reader_next(struct dc_reader *r, char type, const char **t, size_t *n)
{
	struct dc_reader_frame *f = reader_top(r);
	size_t len;

	if (f && f->type == 'a') {
		if (r->pos >= r->limit)
			return DC_E_TYPE;
		if (r->sig == r->sig_end)
			r->sig = f->elem_sig;
	}
	if (r->sig >= r->sig_end || *r->sig != type)
		return DC_E_TYPE;
	len = type_length(r->sig, r->sig_end);
	if (len == 0)
		return DC_E_TYPE;
	*t = r->sig;
	*n = len;
	r->sig += len;
	return 0;
}

/* Read a string-like value whose length field has been consumed. */
static int reader_string_body(struct dc_reader *r, char type, size_t len, void *value)
{
	const char *s;

	if (len >= r->limit - r->pos)
		return reader_short(r);
	s = (const char *)r->data + r->pos;
	if (s[len] != 0)
		return DC_E_STRING_NUL;
	switch (type) {
	case 's':
		if (!validate_utf8(s, len))
			return DC_E_UTF8;
		break;
	case 'o':
		if (!validate_object_path(s, len))
			return DC_E_OBJECT_PATH;
		break;
	case 'g':
		if (signature_validate(s, len))
			return DC_E_SIGNATURE;
		break;
	}
	r->pos += len + 1;
	if (value)
		*(const char **)value = s;
	return 0;
}

/* Read a basic value at the current position; the signature is consumed. */
static int reader_basic(struct dc_reader *r, char type, void *value)
{
	unsigned size;
	int k;

	switch (type) {
	case 's':
	case 'o':
		k = reader_align(r, 4);
		if (k)
			return k;
		if (r->limit - r->pos < 4)
			return reader_short(r);
		r->pos += 4;
		return reader_string_body(r, type, reader_u32(r, r->pos - 4), value);
	case 'g':
		if (r->pos >= r->limit)
			return reader_short(r);
		++r->pos;
		return reader_string_body(r, type, r->data[r->pos - 1], value);
	}

	size = signature_fixed_size(type);
	k = reader_align(r, size);
	if (k)
		return k;
	if (r->limit - r->pos < size)
		return reader_short(r);

	switch (type) {
	case 'y':
		if (value)
			*(uint8_t *)value = r->data[r->pos];
		break;
	case 'b': {
		uint32_t v = reader_u32(r, r->pos);

		if (v > 1)
			return DC_E_BOOLEAN;
		if (value)
			*(bool *)value = v;
		break;
	}
	case 'n':
	case 'q': {
		uint16_t v = reader_u16(r, r->pos);

		if (value)
			memcpy(value, &v, 2);
		break;
	}
	case 'h':	/* an opaque index: not checked against the fds (marshal.h) */
	case 'i':
	case 'u': {
		uint32_t v = reader_u32(r, r->pos);

		if (value)
			memcpy(value, &v, 4);
		break;
	}
	default: {
		uint64_t v = reader_u64(r, r->pos);

		if (value)
			memcpy(value, &v, 8);
		break;
	}
	}

	r->pos += size;
	return 0;
}

int dc_reader_read_basic(struct dc_reader *r, char type, void *value)
{
	const char *t;
	size_t n;
	int k;

	if (!signature_is_basic(type))
		return DC_E_TYPE;
	k = reader_next(r, type, &t, &n);
	if (k)
		return k;
	return reader_basic(r, type, value);
}

int dc_reader_read(struct dc_reader *r, const char *types, ...)
{
	va_list ap;
	int k = 0;

	va_start(ap, types);
	for (; types && *types && !k; ++types)
		k = dc_reader_read_basic(r, *types, va_arg(ap, void *));
	va_end(ap);
	return k;
}

int dc_reader_enter(struct dc_reader *r, char type)
{
	struct dc_reader_frame *f;
	const char *t;
	size_t n;
	int k;

	if (type != 'a' && type != '(' && type != '{' && type != 'v')
		return DC_E_TYPE;
	k = reader_next(r, type, &t, &n);
	if (k)
		return k;
	if (r->depth >= DC_MAX_TOTAL_DEPTH)
		return DC_E_NESTING;

	f = &r->stack[r->depth];
	f->type = type;
	f->parent_sig = r->sig;
	f->parent_end = r->sig_end;
	f->parent_limit = r->limit;

	switch (type) {
	case 'a': {
		uint32_t len;

		k = reader_align(r, 4);
		if (k)
			return k;
		if (r->limit - r->pos < 4)
			return reader_short(r);
		len = reader_u32(r, r->pos);
		r->pos += 4;
		if (len > DC_MAX_ARRAY_SIZE)
			return DC_E_ARRAY_TOO_BIG;
		k = reader_align(r, signature_alignment(t[1]));
		if (k)
			return k;
		if (len > r->limit - r->pos)
			return reader_short(r);
		f->elem_sig = t + 1;
		f->elem_end = t + n;
		r->sig = t + 1;
		r->sig_end = t + n;
		r->limit = r->pos + len;
		break;
	}
	case '(':
	case '{':
		k = reader_align(r, 8);
		if (k)
			return k;
		r->sig = t + 1;
		r->sig_end = t + n - 1;
		break;
	case 'v': {
		const char *s;
		size_t len;

		if (r->pos >= r->limit)
			return reader_short(r);
		len = r->data[r->pos];
		if (len + 1 >= r->limit - r->pos)
			return reader_short(r);
		s = (const char *)r->data + r->pos + 1;
		if (s[len] != 0)
			return DC_E_STRING_NUL;
		if (!(len == 1 && one_char_type[(uint8_t)s[0]]) &&
		    signature_validate_single(s, len))
			return DC_E_VARIANT_SIGNATURE;
		r->pos += len + 2;
		r->sig = s;
		r->sig_end = s + len;
		break;
	}
	}

	++r->depth;
	return 0;
}

/* Inside an array of fixed-size elements: check and consume all of it. */
static int reader_fixed_elements(struct dc_reader *r, char elem)
{
	unsigned size = signature_fixed_size(elem);
	size_t avail = r->limit - r->pos;

	if (avail % size)
		return DC_E_ARRAY_LENGTH;
	if (elem == 'b') {
		size_t at;

		for (at = r->pos; at < r->limit; at += 4) {
			if (reader_u32(r, at) > 1)
				return DC_E_BOOLEAN;
		}
	}
	r->pos = r->limit;
	r->sig = r->sig_end;	/* element type consumed */
	return 0;
}

/* Leave the innermost container; its remaining values must have been consumed. */
static void reader_pop(struct dc_reader *r)
{
	struct dc_reader_frame *f = &r->stack[r->depth - 1];

	r->sig = f->parent_sig;
	r->sig_end = f->parent_end;
	r->limit = f->parent_limit;
	--r->depth;
}

/*
 * Skip values until the container at @depth is left (or, for @depth equal to
 * the current depth, until one complete value has been consumed). Iterative,
 * so arbitrarily nested data does not recurse.
 */
static int reader_skip_to(struct dc_reader *r, unsigned depth, bool one)
{
	for (;;) {
		char c = dc_reader_peek(r);
		int k;

		if (c == 0) {
			if (r->depth <= depth)
				return one ? DC_E_TYPE : 0;
			reader_pop(r);
			if (r->depth == depth && one)
				return 0;
			continue;
		}

		if (signature_is_basic(c)) {
			k = dc_reader_read_basic(r, c, NULL);
			if (k)
				return k;
			if (r->depth == depth && one)
				return 0;
			continue;
		}

		k = dc_reader_enter(r, c);
		if (k)
			return k;
		if (c == 'a' && signature_is_fixed(r->stack[r->depth - 1].elem_sig[0])) {
			k = reader_fixed_elements(r, r->stack[r->depth - 1].elem_sig[0]);
			if (k)
				return k;
		}
	}
}

int dc_reader_skip(struct dc_reader *r)
{
	return reader_skip_to(r, r->depth, true);
}

int dc_reader_exit(struct dc_reader *r)
{
	int k;

	if (r->depth == 0)
		return DC_E_TYPE;
	k = reader_skip_to(r, r->depth, false);
	if (k)
		return k;
	reader_pop(r);
	return 0;
}

int dc_reader_read_array(struct dc_reader *r, char elem, const void **data, size_t *n)
{
	const char *s;
	size_t len, start;
	int k;

	if (!signature_is_fixed(elem))
		return DC_E_TYPE;
	len = dc_reader_peek_signature(r, &s);
	if (len != 2 || s[0] != 'a' || s[1] != elem)
		return DC_E_TYPE;
	k = dc_reader_enter(r, 'a');
	if (k)
		return k;
	start = r->pos;
	k = reader_fixed_elements(r, elem);
	if (k)
		return k;
	if (data)
		*data = r->data + start;
	if (n)
		*n = (r->pos - start) / signature_fixed_size(elem);
	reader_pop(r);
	return 0;
}

bool dc_reader_at_end(const struct dc_reader *r)
{
	return r->depth == 0 && r->sig == r->sig_end && r->pos == r->size;
}

int dc_validate(const void *data, size_t size, char endian, const char *sig, size_t sig_len,
		uint32_t n_fds)
{
	struct dc_reader r;
	int k;

	k = dc_reader_init(&r, data, size, endian, sig, sig_len, n_fds);
	if (k)
		return k;
	k = reader_skip_to(&r, 0, false);
	if (k)
		return k;
	return r.pos == r.size ? 0 : DC_E_TRAILING;
}

/* ---------------------------------------------------------------- copying */

int dc_copy_value(struct dc_reader *r, struct dc_writer *w)
{
	char c = dc_reader_peek(r);
	int k;

	if (!c)
		return DC_E_TYPE;
	if (signature_is_basic(c)) {
		union {
			uint8_t y;
			bool b;
			int16_t n;
			uint16_t q;
			int32_t i;
			uint32_t u;
			int64_t x;
			uint64_t t;
			double d;
			const char *s;
		} v;

		k = dc_reader_read_basic(r, c, &v);
		return k ? k : dc_writer_append(w, c, &v);
	}
	k = dc_reader_enter(r, c);
	if (k)
		return k;
	if (c == 'v') {
		/* The variant's type, NUL-terminated, alive until it is closed. */
		char sig[DC_MAX_SIGNATURE_LENGTH + 1];
		const char *s;
		size_t n = dc_reader_peek_signature(r, &s);

		if (n == 0 || n > DC_MAX_SIGNATURE_LENGTH)
			return DC_E_TYPE;
		memcpy(sig, s, n);
		sig[n] = '\0';
		k = dc_writer_open(w, 'v', sig);
		if (!k)
			k = dc_copy_value(r, w);
		if (!k)
			k = dc_writer_close(w);
	} else {
		k = dc_writer_open(w, c, NULL);
		while (!k && dc_reader_peek(r))
			k = dc_copy_value(r, w);
		if (!k)
			k = dc_writer_close(w);
	}
	return k ? k : dc_reader_exit(r);
}
