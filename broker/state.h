/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/**
 * DOC: Serialized state
 *
 * The bus' state crosses a re-exec (reexec.h) as one versioned byte stream
 * in a memfd: a header (magic, version), then tagged sections of
 * little-endian integers and length-prefixed byte strings. File descriptors
 * are not in the stream: they survive the exec under the same numbers, and
 * the stream names them by number.
 *
 * The writer collects into memory and records the first error (-ENOMEM);
 * the reader checks every length against what is left and, on the first
 * malformed field, stops: every later read returns zeroes and state_reader
 * .error is set, so a caller checks once at the end of a section. A reader
 * never trusts a number it reads for an allocation without bounding it by
 * the bytes that remain.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define STATE_MAGIC 0x31737562u		/* "bus1", little-endian */
#define STATE_VERSION 1u

/* Section tags: each section starts with one, so a reader out of step stops. */
enum {
	STATE_TAG_BUS = 0x42555331u,
	STATE_TAG_LISTENER,
	STATE_TAG_PEER,
	STATE_TAG_NAME,
	STATE_TAG_REPLY,
	STATE_TAG_ACTIVATION,
	STATE_TAG_END,
};

struct state_writer {
	uint8_t *buf;
	size_t n;
	size_t cap;
	int error;		/* 0 or the first negative errno */
};

void state_writer_init(struct state_writer *w, uint32_t version);
void state_writer_deinit(struct state_writer *w);
void state_put_u32(struct state_writer *w, uint32_t v);
void state_put_u64(struct state_writer *w, uint64_t v);
void state_put_i32(struct state_writer *w, int32_t v);
void state_put_bytes(struct state_writer *w, const void *p, size_t n);
/* A string (NULL is written as absent). */
void state_put_str(struct state_writer *w, const char *s);

/*
 * Write everything into a new memfd (sealed against writes and growth),
 * positioned at 0. Return the fd (close-on-exec) or negative errno.
 */
int state_writer_to_memfd(struct state_writer *w);

struct state_reader {
	uint8_t *buf;		/* the whole stream (owned) */
	size_t n;
	size_t pos;
	uint32_t version;
	bool error;
	/* NULL, or which fds exist (a state from the fd store: fdstore.h) */
	bool (*fd_present)(int fd, void *userdata);
	void *fd_userdata;
};

/*
 * Read the stream from @fd (from its start). Return 0, 1 if it is not a
 * state stream or of a version this binary cannot read (*@versionp: the
 * version found), or negative errno.
 */
int state_reader_init(struct state_reader *r, int fd, uint32_t *versionp);
void state_reader_deinit(struct state_reader *r);
uint32_t state_get_u32(struct state_reader *r);
uint64_t state_get_u64(struct state_reader *r);
int32_t state_get_i32(struct state_reader *r);
/* Bytes of a put_bytes(): a pointer into the stream and its length, or NULL. */
const void *state_get_bytes(struct state_reader *r, size_t *np);
/* A string of put_str() (NUL-terminated in the stream), or NULL when absent or bad. */
const char *state_get_str(struct state_reader *r);
/*
 * A count of items of at least @min_item_size bytes each: fails (0, error
 * set) when the stream cannot hold that many.
 */
size_t state_get_count(struct state_reader *r, size_t min_item_size);
/* Expect section @tag next. Return true if it is there. */
bool state_expect(struct state_reader *r, uint32_t tag);
/* Whether the next section is @tag (not consumed). */
bool state_peek_tag(struct state_reader *r, uint32_t tag);
/*
 * A file descriptor number of the stream: >= 0 (and present, if the reader
 * checks), else error set (returns -1).
 */
int state_get_fd(struct state_reader *r);
