/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The serialized state of a re-exec (broker/objects/state.c): every field comes back
 * as written, and a damaged stream (cut anywhere, a wrong magic or version,
 * a count larger than the stream, a string without its NUL) is refused with
 * the error flag, never read past its end. Sections: each with its version,
 * a version the reader does not know refused and named; a stream of version
 * 1 read as sections of version 1, those it wrote bare included; fds
 * collected for carrying.
 */

#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include "broker/objects/state.h"
#include "check.h"

static int write_sample(uint32_t version)
{
	struct state_writer w;
	int fd;

	state_writer_init(&w, version);
	state_put_u32(&w, STATE_TAG_BUS);
	state_put_u32(&w, 0xdeadbeef);
	state_put_u64(&w, 0x0123456789abcdefULL);
	state_put_i32(&w, -7);
	state_put_str(&w, "hello");
	state_put_str(&w, NULL);
	state_put_bytes(&w, "\0\1\2", 3);
	state_put_u64(&w, 2);		/* a count of two u32 */
	state_put_u32(&w, 1);
	state_put_u32(&w, 2);
	state_put_u32(&w, STATE_TAG_END);
	fd = state_writer_to_memfd(&w);
	state_writer_deinit(&w);
	CHECK(fd >= 0);
	return fd;
}

/* Read the sample; return whether everything was as written and no error. */
static bool read_sample(struct state_reader *r)
{
	const uint8_t *b;
	const char *s;
	size_t n;
	bool ok = true;

	ok &= state_expect(r, STATE_TAG_BUS);
	ok &= state_get_u32(r) == 0xdeadbeef;
	ok &= state_get_u64(r) == 0x0123456789abcdefULL;
	ok &= state_get_i32(r) == -7;
	s = state_get_str(r);
	ok &= s && !strcmp(s, "hello");
	ok &= state_get_str(r) == NULL;
	b = state_get_bytes(r, &n);
	ok &= b && n == 3 && b[0] == 0 && b[1] == 1 && b[2] == 2;
	ok &= state_get_count(r, 4) == 2;
	ok &= state_get_u32(r) == 1;
	ok &= state_get_u32(r) == 2;
	ok &= state_expect(r, STATE_TAG_END);
	return ok && !r->error && r->pos == r->n;
}

static int memfd_of(const uint8_t *p, size_t n)
{
	struct state_writer w = { .buf = (uint8_t *)p, .n = n, .cap = n };

	/* The writer copies into a new memfd; the buffer is not its own. */
	return state_writer_to_memfd(&w);
}

/* Two sections (one a tag stream version 1 had, one it wrote bare) and an fd. */
static int write_sections(uint32_t stream_version, uint32_t bus_version, uint32_t conn_version)
{
	struct state_writer w;
	int fd;

	state_writer_init(&w, stream_version);
	if (stream_version == 1) {
		state_put_u32(&w, STATE_TAG_BUS);
	} else {
		state_put_section(&w, STATE_TAG_BUS, bus_version);
	}
	state_put_u32(&w, 11);
	if (stream_version != 1)
		state_put_section(&w, STATE_TAG_CONNECTION, conn_version);
	state_put_fd(&w, 0);
	state_put_fd(&w, -1);
	state_put_u32(&w, STATE_TAG_END);
	CHECK_EQ(w.n_fds, 1);		/* -1 is written, not carried */
	CHECK_EQ(w.fds[0], 0);
	fd = state_writer_to_memfd(&w);
	state_writer_deinit(&w);
	CHECK(fd >= 0);
	return fd;
}

/* Read them, knowing versions up to 2 of each; the reader is left for the caller. */
static bool read_sections(struct state_reader *r, int fd)
{
	uint32_t version, v;

	CHECK_EQ(state_reader_init(r, fd, &version), 0);
	if (!state_section(r, STATE_TAG_BUS, 2, &v) || v < 1 || state_get_u32(r) != 11)
		return false;
	if (!state_section(r, STATE_TAG_CONNECTION, 2, &v) || v < 1)
		return false;
	return state_get_fd(r) == 0 && state_get_fd_or_none(r) == -1 &&
	       state_expect(r, STATE_TAG_END) && r->pos == r->n;
}

static void test_sections(void)
{
	struct state_reader r;
	int fd;

	/* Versions 1 and 2 of a section are read; both the stream versions. */
	for (uint32_t bus_v = 1; bus_v <= 2; bus_v++) {
		fd = write_sections(STATE_VERSION, bus_v, 1);
		CHECK(read_sections(&r, fd));
		CHECK(!r.error);
		state_reader_deinit(&r);
		close(fd);
	}
	/* Stream version 1: its tags are there, the bare sections are read as version 1. */
	fd = write_sections(1, 0, 0);
	CHECK(read_sections(&r, fd));
	state_reader_deinit(&r);
	close(fd);

	/* A section of a version the reader does not know: refused, named. */
	fd = write_sections(STATE_VERSION, 3, 1);
	CHECK(!read_sections(&r, fd));
	CHECK(r.error);
	CHECK_EQ(r.unknown_tag, STATE_TAG_BUS);
	CHECK_EQ(r.unknown_version, 3);
	CHECK(!strcmp(state_tag_name(r.unknown_tag), "bus"));
	state_reader_deinit(&r);
	close(fd);
	fd = write_sections(STATE_VERSION, 1, 0);
	CHECK(!read_sections(&r, fd));
	CHECK_EQ(r.unknown_tag, STATE_TAG_CONNECTION);
	CHECK_EQ(r.unknown_version, 0);
	CHECK(!strcmp(state_tag_name(r.unknown_tag), "connection"));
	state_reader_deinit(&r);
	close(fd);

	/* A stream older than the oldest this program reads. */
	fd = write_sections(STATE_VERSION_MIN - 1, 1, 1);
	{
		uint32_t version;

		CHECK_EQ(state_reader_init(&r, fd, &version), STATE_E_UNREADABLE);
		CHECK_EQ(version, STATE_VERSION_MIN - 1);
	}
	close(fd);
	CHECK(!strcmp(state_tag_name(0), "?"));
}

int main(void)
{
	struct state_reader r;
	uint32_t version;
	uint8_t *full;
	size_t n_full;
	int fd;

	/* Round trip. */
	fd = write_sample(STATE_VERSION);
	CHECK_EQ(state_reader_init(&r, fd, &version), 0);
	CHECK_EQ(version, STATE_VERSION);
	CHECK(read_sample(&r));
	n_full = r.n;
	full = malloc(n_full);
	CHECK(full);
	memcpy(full, r.buf, n_full);
	state_reader_deinit(&r);
	close(fd);

	/* Another version: refused, and its number reported. */
	fd = write_sample(STATE_VERSION + 41);
	CHECK_EQ(state_reader_init(&r, fd, &version), STATE_E_UNREADABLE);
	CHECK_EQ(version, STATE_VERSION + 41);
	close(fd);

	/* Not a state stream. */
	fd = memfd_of((const uint8_t *)"not a state at all", 18);
	CHECK_EQ(state_reader_init(&r, fd, &version), STATE_E_UNREADABLE);
	close(fd);

	/* Cut at every length: refused or read with the error flag, never past the end. */
	for (size_t cut = 0; cut < n_full; cut++) {
		fd = memfd_of(full, cut);
		CHECK(fd >= 0);
		if (state_reader_init(&r, fd, &version) == 0) {
			CHECK(!read_sample(&r));
			CHECK(r.error);
			CHECK(r.pos <= r.n);
			state_reader_deinit(&r);
		}
		close(fd);
	}

	/* A count larger than what is left, and a string without its NUL. */
	{
		struct state_writer w;

		state_writer_init(&w, STATE_VERSION);
		state_put_u64(&w, 1ULL << 40);
		state_put_bytes(&w, "abc", 3);	/* read as a string: no NUL */
		fd = state_writer_to_memfd(&w);
		state_writer_deinit(&w);
		CHECK(fd >= 0);
		CHECK_EQ(state_reader_init(&r, fd, &version), 0);
		CHECK_EQ(state_get_count(&r, 4), 0);
		CHECK(r.error);
		state_reader_deinit(&r);
		CHECK_EQ(state_reader_init(&r, fd, &version), 0);
		(void)state_get_u64(&r);
		CHECK(state_get_str(&r) == NULL);
		CHECK(r.error);
		/* After an error every read returns zeroes. */
		CHECK_EQ(state_get_u32(&r), 0);
		state_reader_deinit(&r);
		close(fd);
	}
	free(full);
	test_sections();
	printf("state: ok\n");
	return 0;
}
