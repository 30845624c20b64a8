/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/**
 * DOC: Serialized state
 *
 * The bus' state crosses a re-exec (reexec.h) as one byte stream in a memfd:
 * a header (magic, stream version), then sections of little-endian integers
 * and length-prefixed byte strings. Every object that crosses writes and
 * reads its own section, beside its code (bus.c, listener.c, peer-state.c,
 * connection.c, native.c, name.c, match.c, reply.c, activation-state.c,
 * container-state.c),
 * and broker.c puts them in order. A section starts with its tag and its
 * own version: an object that changes what it writes raises its version
 * and keeps reading the versions before, and a reader that meets a version
 * newer than it knows refuses the whole stream (the old program serves on).
 *
 * Stream version 1 (the first program that re-executed) had no section
 * versions, and wrote some sections without a tag, inside the one before:
 * state_section() reads such a stream as if every section were of version 1
 * and there (STATE_TAG_IN_V1() tells which tags it wrote).
 *
 * File descriptors are not in the stream: they survive the exec under the
 * same numbers, the stream names them by number, and the writer collects
 * them (state_put_fd()) for whoever carries them.
 *
 * The writer writes straight into the memfd that carries the state (a
 * shared mapping of it; into memory, copied at the end, when it cannot) and
 * records the first error (-ENOMEM). The reader maps that memfd read-only
 * once it is sealed (else copies the file), checks every length against
 * what is left and, on the first malformed field, stops: every later read
 * returns zeroes and state_reader .error is set, so a caller checks once at
 * the end of a section. A reader never trusts a number it reads for an
 * allocation without bounding it by the bytes that remain. It collects
 * every fd the stream names, as the writer does (to hand them back).
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define STATE_MAGIC 0x31737562u		/* "bus1", little-endian */
#define STATE_VERSION 2u		/* of the stream: sections with versions */
#define STATE_VERSION_MIN 1u		/* the oldest stream this program reads */

/* Section tags: each section starts with one, so a reader out of step stops. */
enum {
	STATE_TAG_BUS = 0x42555331u,	/* bus.h: the bus' identity and counters */
	STATE_TAG_LISTENER,		/* listener.h: every listening socket */
	STATE_TAG_PEER,			/* peer.h: every peer, each with the sections below */
	STATE_TAG_NAME,			/* name.h: the well-known names, in order */
	STATE_TAG_REPLY,		/* reply.h: the calls not answered yet */
	STATE_TAG_ACTIVATION,		/* activation.h: environment, children, pendings */
	STATE_TAG_END,
	/* Since stream version 2; version 1 wrote these without a tag. */
	STATE_TAG_NATIVE = 0x42555341u,	/* native.h: the broker's bus1 peer */
	STATE_TAG_CONNECTION,		/* connection.h: a peer's socket */
	STATE_TAG_MATCHES,		/* match.h: a peer's match rules */
	STATE_TAG_OWNER,		/* name.h: a peer's names and queue places */
	STATE_TAG_NATIVE_CONN,		/* native.h: a peer's bus1 side, if any */
	STATE_TAG_CONTAINER,		/* container.h: the instances, only if any */
};

/* Whether stream version 1 wrote @tag (else it wrote that section bare). */
#define STATE_TAG_IN_V1(tag) ((tag) <= STATE_TAG_END)

struct state_writer {
	uint8_t *buf;		/* mapped: a shared mapping of memfd; else allocated */
	/*
	 * A snapshot or record of the crash journal (journal.h): what cannot
	 * outlive the process (bytes in flight on a socket, a peer before
	 * Hello) is left out.
	 */
	bool crash;
	size_t n;
	size_t cap;
	bool mapped;
	int memfd;		/* if mapped */
	int error;		/* 0 or the first negative errno */
	int *fds;		/* every fd named (state_put_fd()), to carry */
	size_t n_fds;
	size_t cap_fds;
};

void state_writer_init(struct state_writer *w, uint32_t version);
/*
 * As state_writer_init(), but the stream starts at @offset of the memfd
 * (the bytes before it are zero, for the caller: journal.c's header).
 */
void state_writer_init_at(struct state_writer *w, uint32_t version, size_t offset);
/* A writer into memory, no stream header: a journal record's payload. */
void state_writer_init_memory(struct state_writer *w);
/* Empty it again (memory kept, crash flag kept). */
void state_writer_reset(struct state_writer *w);
void state_writer_deinit(struct state_writer *w);
void state_put_u32(struct state_writer *w, uint32_t v);
void state_put_u64(struct state_writer *w, uint64_t v);
void state_put_i32(struct state_writer *w, int32_t v);
void state_put_bytes(struct state_writer *w, const void *p, size_t n);
/* A string (NULL is written as absent). */
void state_put_str(struct state_writer *w, const char *s);
/* Start section @tag of @version (its writer's own). */
void state_put_section(struct state_writer *w, uint32_t tag, uint32_t version);
/* An fd to carry, by number; -1 (none) is written but not carried. */
void state_put_fd(struct state_writer *w, int fd);
/* A count and that many fds to carry. */
void state_put_fds(struct state_writer *w, const int *fds, size_t n);

/*
 * The memfd written into (a writer from state_writer_init() writes in
 * place), or one with a copy of ->buf; sealed against writes and growth,
 * positioned at 0. Return the fd (close-on-exec; the caller's, and ->buf
 * is gone if it was mapped) or negative errno.
 */
int state_writer_to_memfd(struct state_writer *w);

struct state_reader {
	uint8_t *buf;		/* the whole stream (owned: mapped or allocated) */
	size_t n;
	bool mapped;		/* buf is a read-only mapping of the sealed memfd */
	size_t pos;
	uint32_t version;	/* of the stream */
	bool error;
	/* The first section of a version this program cannot read (0: none). */
	uint32_t unknown_tag;
	uint32_t unknown_version;
	/* NULL, or which fds exist (a state from the fd store: fdstore.h) */
	bool (*fd_present)(int fd, void *userdata);
	void *fd_userdata;
	/*
	 * NULL, or the fd a number of the stream stands for now (a crash
	 * journal's: journal.h), -1 if none: the stream's numbers were the
	 * previous process's.
	 */
	int (*fd_map)(int fd, void *userdata);
	void *fd_map_userdata;
	bool borrowed;		/* buf is the caller's (state_reader_init_view()) */
	/* Every fd the stream named so far, as the writer collected them. */
	int *fds;
	size_t n_fds;
	size_t cap_fds;
};

/* Positive code of state_reader_init(). */
enum {
	_STATE_E_SUCCESS,
	/* Not a state stream, or of a stream version this program cannot read. */
	STATE_E_UNREADABLE,
};

/*
 * Read the stream from @fd (from its start): in place if it is a memfd sealed
 * against writes and shrinking (mapped, read-only), else a copy. Return 0,
 * STATE_E_UNREADABLE (not a state stream, or of a stream version this binary
 * cannot read: *@versionp is the version found), or negative errno.
 */
int state_reader_init(struct state_reader *r, int fd, uint32_t *versionp);
/*
 * A reader over @n bytes at @buf that stay the caller's: a stream with its
 * header (@version 0: read it, as state_reader_init() does; return as it),
 * or a journal record's payload of stream version @version.
 */
int state_reader_init_view(struct state_reader *r, const void *buf, size_t n, uint32_t version);
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
/*
 * Whether @tag comes next (nothing is consumed): for a section written only
 * when there is something in it, which older streams never have.
 */
bool state_next_is(const struct state_reader *r, uint32_t tag);
/* Expect @tag next (with no version: the end). Return true if it is there. */
bool state_expect(struct state_reader *r, uint32_t tag);
/**
 * state_section() - the start of section @tag
 * @max_version: the newest version of it this program reads
 * @versionp:	its version (1 in a stream of version 1)
 *
 * Return: true if the section is there, of a version from 1 to
 * @max_version; else false with the error set (and, for a version this
 * program does not know, ->unknown_tag and ->unknown_version).
 */
bool state_section(struct state_reader *r, uint32_t tag, uint32_t max_version,
		   uint32_t *versionp);
/* A name for @tag in log lines ("peer"), "?" if none. */
const char *state_tag_name(uint32_t tag);
/*
 * A file descriptor number of the stream: >= 0 (and present, if the reader
 * checks), else error set (returns -1).
 */
int state_get_fd(struct state_reader *r);
/* As state_get_fd(), but -1 (none) is one too. */
int state_get_fd_or_none(struct state_reader *r);
/* The fds of state_put_fds(): an allocated array of *@np, NULL if none or on error. */
int *state_get_fds(struct state_reader *r, size_t *np);
