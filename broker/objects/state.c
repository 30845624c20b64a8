/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The serialized state of a re-exec: writer and bounded reader. See state.h.
 */

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include "broker/objects/state.h"
#include "util/error.h"
#include "util/fd.h"
#include "util/macro.h"

/* Larger is not a state this bus could have written: refuse it. */
#define STATE_MAX_SIZE (1ULL << 32)
/* The memfd's first size: pages are only allocated where written. */
#define STATE_MEMFD_START (1024 * 1024)

static void state_reserve(struct state_writer *w, size_t n)
{
	size_t cap;
	uint8_t *p;

	assert(w->n <= w->cap);
	assert(!w->mapped || w->memfd >= 0);
	if (w->error || w->cap - w->n >= n)
		return;
	cap = w->cap ? w->cap : 4096;
	while (cap - w->n < n)
		cap *= 2;
	if (w->mapped) {
		/* The memfd grows; its pages stay where they are. */
		if (ftruncate(w->memfd, (off_t)cap) < 0) {
			w->error = error_origin(-errno);
			return;
		}
		p = mremap(w->buf, w->cap, cap, MREMAP_MAYMOVE);
		if (p == MAP_FAILED) {
			w->error = error_origin(-errno);
			return;
		}
	} else {
		p = realloc(w->buf, cap);
		if (!p) {
			w->error = -ENOMEM;
			return;
		}
	}
	w->buf = p;
	w->cap = cap;
}

static void state_put_raw(struct state_writer *w, const void *p, size_t n)
{
	state_reserve(w, n);
	if (w->error)
		return;
	assert(w->cap - w->n >= n);
	memcpy(w->buf + w->n, p, n);
	w->n += n;
}

void state_put_u32(struct state_writer *w, uint32_t v)
{
	uint8_t b[4] = { v, v >> 8, v >> 16, v >> 24 };

	state_put_raw(w, b, sizeof(b));
}

void state_put_u64(struct state_writer *w, uint64_t v)
{
	state_put_u32(w, (uint32_t)v);
	state_put_u32(w, (uint32_t)(v >> 32));
}

void state_put_i32(struct state_writer *w, int32_t v)
{
	state_put_u32(w, (uint32_t)v);
}

void state_put_bytes(struct state_writer *w, const void *p, size_t n)
{
	state_put_u64(w, n);
	if (n)
		state_put_raw(w, p, n);
}

void state_put_str(struct state_writer *w, const char *s)
{
	if (!s) {
		state_put_u64(w, UINT64_MAX);
		return;
	}
	state_put_bytes(w, s, strlen(s) + 1);
}

void state_put_section(struct state_writer *w, uint32_t tag, uint32_t version)
{
	state_put_u32(w, tag);
	state_put_u32(w, version);
}

void state_put_fd(struct state_writer *w, int fd)
{
	state_put_i32(w, fd);
	if (fd >= 0 && !w->error && fd_array_add(&w->fds, &w->n_fds, &w->cap_fds, fd) < 0)
		w->error = -ENOMEM;
}

void state_put_fds(struct state_writer *w, const int *fds, size_t n)
{
	state_put_u64(w, n);
	for (size_t i = 0; i < n; i++)
		state_put_fd(w, fds[i]);
}

/*
 * Write straight into the memfd that will carry the state, through a
 * shared mapping: no buffer to fault in and copy into the memfd after
 * (a fifth of writing 1.2 MB of state). Without it, into memory.
 */
static void state_writer_map(struct state_writer *w)
{
	int fd = memfd_create("bus1-broker-state", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	void *p;

	if (fd < 0)
		return;
	if (ftruncate(fd, STATE_MEMFD_START) < 0) {
		close(fd);
		return;
	}
	p = mmap(NULL, STATE_MEMFD_START, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED) {
		close(fd);
		return;
	}
	w->buf = p;
	w->cap = STATE_MEMFD_START;
	w->memfd = fd;
	w->mapped = true;
}

void state_writer_init(struct state_writer *w, uint32_t version)
{
	state_writer_init_at(w, version, 0);
}

void state_writer_init_at(struct state_writer *w, uint32_t version, size_t offset)
{
	*w = (struct state_writer){ .memfd = -1 };
	state_writer_map(w);
	state_reserve(w, offset);
	if (!w->error) {
		memset(w->buf, 0, offset);
		w->n = offset;
	}
	state_put_u32(w, STATE_MAGIC);
	state_put_u32(w, version);
}

void state_writer_init_memory(struct state_writer *w)
{
	*w = (struct state_writer){ .memfd = -1 };
}

void state_writer_reset(struct state_writer *w)
{
	w->n = 0;
	w->error = 0;
	w->n_fds = 0;
}

void state_writer_deinit(struct state_writer *w)
{
	if (w->mapped) {
		munmap(w->buf, w->cap);
		close(w->memfd);
	} else {
		free(w->buf);
	}
	free(w->fds);
	*w = (struct state_writer){};
}

/* The memfd written in place, now the caller's: as long as what was written. */
static int state_writer_unmap(struct state_writer *w)
{
	int fd = w->memfd;
	off_t n = (off_t)w->n;

	assert(w->mapped && fd >= 0);
	/* No writable mapping may remain for F_SEAL_WRITE. */
	munmap(w->buf, w->cap);
	w->buf = NULL;
	w->cap = w->n = 0;
	w->mapped = false;
	w->memfd = -1;
	if (ftruncate(fd, n) < 0) {
		int r = error_origin(-errno);

		close(fd);
		return r;
	}
	return fd;
}

int state_writer_to_memfd(struct state_writer *w)
{
	size_t done = 0;
	int fd;

	if (w->error)
		return w->error;
	if (w->mapped) {
		fd = state_writer_unmap(w);
		if (fd < 0)
			return fd;
		goto seal;
	}
	fd = memfd_create("bus1-broker-state", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd < 0)
		return error_origin(-errno);
	while (done < w->n) {
		ssize_t k = write(fd, w->buf + done, w->n - done);

		if (k < 0) {
			int r = -errno;

			if (r == -EINTR)
				continue;
			close(fd);
			return error_origin(r);
		}
		done += (size_t)k;
	}
seal:
	/* The reader may trust that nobody changes it under its feet. */
	(void)fcntl(fd, F_ADD_SEALS, F_SEAL_WRITE | F_SEAL_GROW | F_SEAL_SHRINK | F_SEAL_SEAL);
	if (lseek(fd, 0, SEEK_SET) < 0) {
		int r = error_origin(-errno);

		close(fd);
		return r;
	}
	return fd;
}

/* ---------------------------------------------------------------- reader */

static const uint8_t *state_take(struct state_reader *r, size_t n)
{
	const uint8_t *p;

	/* The position never passes the end: r->n - r->pos cannot wrap. */
	assert(r->pos <= r->n);
	if (r->error || r->n - r->pos < n) {
		r->error = true;
		return NULL;
	}
	p = r->buf + r->pos;
	r->pos += n;
	return p;
}

uint32_t state_get_u32(struct state_reader *r)
{
	const uint8_t *b = state_take(r, 4);

	return b ? (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 |
		   (uint32_t)b[3] << 24 : 0;
}

uint64_t state_get_u64(struct state_reader *r)
{
	uint64_t lo = state_get_u32(r);

	return lo | (uint64_t)state_get_u32(r) << 32;
}

int32_t state_get_i32(struct state_reader *r)
{
	return (int32_t)state_get_u32(r);
}

const void *state_get_bytes(struct state_reader *r, size_t *np)
{
	uint64_t n = state_get_u64(r);

	*np = 0;
	if (r->error || n > r->n - r->pos) {
		r->error = true;
		return NULL;
	}
	*np = (size_t)n;
	return n ? state_take(r, (size_t)n) : r->buf + r->pos;
}

const char *state_get_str(struct state_reader *r)
{
	size_t save = r->pos, n;
	const char *s;

	if (r->error)
		return NULL;
	if (state_get_u64(r) == UINT64_MAX)
		return NULL;
	r->pos = save;
	s = state_get_bytes(r, &n);
	if (!s || n == 0 || s[n - 1] != '\0' || memchr(s, '\0', n - 1)) {
		r->error = true;
		return NULL;
	}
	return s;
}

size_t state_get_count(struct state_reader *r, size_t min_item_size)
{
	uint64_t n = state_get_u64(r);

	if (r->error || (min_item_size && n > (r->n - r->pos) / min_item_size)) {
		r->error = true;
		return 0;
	}
	return (size_t)n;
}

bool state_next_is(const struct state_reader *r, uint32_t tag)
{
	const uint8_t *b = r->buf + r->pos;

	assert(r->pos <= r->n);
	if (r->error || r->n - r->pos < 4)
		return false;
	return ((uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 |
		(uint32_t)b[3] << 24) == tag;
}

bool state_expect(struct state_reader *r, uint32_t tag)
{
	if (state_get_u32(r) != tag)
		r->error = true;
	return !r->error;
}

bool state_section(struct state_reader *r, uint32_t tag, uint32_t max_version,
		   uint32_t *versionp)
{
	*versionp = 0;
	if (r->version == 1) {
		/* No versions; the sections it wrote bare are simply there. */
		if (STATE_TAG_IN_V1(tag) && !state_expect(r, tag))
			return false;
		*versionp = 1;
		return !r->error;
	}
	if (!state_expect(r, tag))
		return false;
	*versionp = state_get_u32(r);
	if (!r->error && (*versionp == 0 || *versionp > max_version)) {
		r->error = true;
		r->unknown_tag = tag;
		r->unknown_version = *versionp;
	}
	return !r->error;
}

const char *state_tag_name(uint32_t tag)
{
	static const char *const names[] = {
		[STATE_TAG_BUS - STATE_TAG_BUS] = "bus",
		[STATE_TAG_LISTENER - STATE_TAG_BUS] = "listener",
		[STATE_TAG_PEER - STATE_TAG_BUS] = "peer",
		[STATE_TAG_NAME - STATE_TAG_BUS] = "name",
		[STATE_TAG_REPLY - STATE_TAG_BUS] = "reply",
		[STATE_TAG_ACTIVATION - STATE_TAG_BUS] = "activation",
		[STATE_TAG_END - STATE_TAG_BUS] = "end",
	};
	static const char *const names2[] = {
		[STATE_TAG_NATIVE - STATE_TAG_NATIVE] = "native",
		[STATE_TAG_CONNECTION - STATE_TAG_NATIVE] = "connection",
		[STATE_TAG_MATCHES - STATE_TAG_NATIVE] = "matches",
		[STATE_TAG_OWNER - STATE_TAG_NATIVE] = "owner",
		[STATE_TAG_NATIVE_CONN - STATE_TAG_NATIVE] = "native connection",
		[STATE_TAG_CONTAINER - STATE_TAG_NATIVE] = "container",
	};

	if (tag >= STATE_TAG_BUS && tag - STATE_TAG_BUS < ARRAY_SIZE(names))
		return names[tag - STATE_TAG_BUS];
	if (tag >= STATE_TAG_NATIVE && tag - STATE_TAG_NATIVE < ARRAY_SIZE(names2))
		return names2[tag - STATE_TAG_NATIVE];
	return "?";
}

static int state_check_fd(struct state_reader *r, int32_t fd, bool none_ok)
{
	if (none_ok && fd == -1 && !r->error)
		return -1;
	if (fd >= 0 && r->fd_map)
		fd = r->fd_map(fd, r->fd_map_userdata);
	if (fd < 0 || (r->fd_present && !r->fd_present(fd, r->fd_userdata))) {
		r->error = true;
		return -1;
	}
	/* Those handed over, to hand them back should the restore fail (reexec.h). */
	if (fd_array_add(&r->fds, &r->n_fds, &r->cap_fds, fd) < 0) {
		r->error = true;
		return -1;
	}
	return fd;
}

int state_get_fd(struct state_reader *r)
{
	return state_check_fd(r, state_get_i32(r), false);
}

int state_get_fd_or_none(struct state_reader *r)
{
	return state_check_fd(r, state_get_i32(r), true);
}

int *state_get_fds(struct state_reader *r, size_t *np)
{
	size_t n = state_get_count(r, 4);
	int *v;

	*np = 0;
	if (r->error || n == 0)
		return NULL;
	v = calloc(n, sizeof(*v));
	if (!v) {
		r->error = true;
		return NULL;
	}
	for (size_t i = 0; i < n; i++)
		v[i] = state_get_fd(r);
	*np = n;
	return v;
}

/* Positive code of state_map(). */
enum {
	_STATE_MAP_E_SUCCESS,
	STATE_MAP_E_COPY,	/* not a sealed memfd, or mmap() refused: copy it instead */
};

/*
 * A memfd sealed as state_writer_to_memfd() seals it can neither change nor
 * shrink under a mapping of it: read in place, its pages are the writer's
 * (no copy, no fresh pages to fault in). Return 0, STATE_MAP_E_COPY,
 * negative errno.
 */
static int state_map(struct state_reader *r, int fd)
{
	int seals = fcntl(fd, F_GET_SEALS);
	void *p;

	if (seals < 0 || (seals & (F_SEAL_WRITE | F_SEAL_SHRINK)) !=
			 (F_SEAL_WRITE | F_SEAL_SHRINK))
		return STATE_MAP_E_COPY;
	p = mmap(NULL, r->n, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd, 0);
	if (p == MAP_FAILED)
		return errno == ENOMEM ? -ENOMEM : STATE_MAP_E_COPY;
	r->buf = p;
	r->mapped = true;
	return 0;
}

/* Any other file (a stream saved to disk, a pipe's worth): a copy of it. */
static int state_copy(struct state_reader *r, int fd)
{
	size_t done = 0;

	r->buf = malloc(r->n);
	if (!r->buf)
		return -ENOMEM;
	while (done < r->n) {
		ssize_t k = pread(fd, r->buf + done, r->n - done, (off_t)done);

		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return error_origin(k < 0 ? -errno : -EIO);
		done += (size_t)k;
	}
	return 0;
}

int state_reader_init(struct state_reader *r, int fd, uint32_t *versionp)
{
	struct stat st;
	int e;

	*r = (struct state_reader){};
	*versionp = 0;
	if (fstat(fd, &st) < 0)
		return error_origin(-errno);
	if (st.st_size < 8 || (uint64_t)st.st_size > STATE_MAX_SIZE)
		return STATE_E_UNREADABLE;
	r->n = (size_t)st.st_size;
	e = state_map(r, fd);
	if (e == STATE_MAP_E_COPY)
		e = state_copy(r, fd);
	if (e < 0) {
		state_reader_deinit(r);
		return e;
	}
	if (state_get_u32(r) != STATE_MAGIC) {
		state_reader_deinit(r);
		return STATE_E_UNREADABLE;
	}
	r->version = state_get_u32(r);
	*versionp = r->version;
	if (r->version < STATE_VERSION_MIN || r->version > STATE_VERSION) {
		state_reader_deinit(r);
		return STATE_E_UNREADABLE;
	}
	return 0;
}

int state_reader_init_view(struct state_reader *r, const void *buf, size_t n, uint32_t version)
{
	*r = (struct state_reader){ .buf = (uint8_t *)buf, .n = n, .borrowed = true };
	if (version) {
		r->version = version;
		return 0;
	}
	if (n < 8 || state_get_u32(r) != STATE_MAGIC)
		return STATE_E_UNREADABLE;
	r->version = state_get_u32(r);
	if (r->version < STATE_VERSION_MIN || r->version > STATE_VERSION)
		return STATE_E_UNREADABLE;
	return 0;
}

void state_reader_deinit(struct state_reader *r)
{
	if (r->mapped && !r->borrowed)
		munmap(r->buf, r->n);
	else if (!r->borrowed)
		free(r->buf);
	free(r->fds);
	*r = (struct state_reader){};
}
