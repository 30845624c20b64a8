/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The crash journal: its memfds, its records, its files in the fd store.
 * See journal.h.
 */

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>
#include "broker/objects/journal.h"
#include "broker/objects/state.h"
#include "util/crc32c.h"
#include "util/fdpass.h"
#include "util/error.h"
#include "util/macro.h"

#define JOURNAL_MAGIC 0x4c4e524au	/* "JRNL", little-endian */
/* 2: a record's files travel in its slot's socket, after the snapshot's. */
#define JOURNAL_VERSION 2u
#define JOURNAL_HEADER_SIZE 4096u
/* Records may take this much, or twice the snapshot, before a compaction. */
#define JOURNAL_RECORDS_MIN (256u * 1024)
/*
 * Records' fds in the slot's socket (a peer's socket, maybe its pidfd),
 * beyond which a compaction is due at the next flush: they are in flight
 * there, charged to the bus's user and its socket buffer. A full buffer
 * makes a compaction due at once (journal_record_end()).
 */
#define JOURNAL_RECORD_FDS_COMPACT 256u
/* The store: the two slots of two, and a hand-over's two. */
_Static_assert(2 * 2 + 2 <= JOURNAL_STORE_NEEDED,
	       "the store must hold what the journal keeps there");
/* The most marks: fd numbers past it are never clean (journal_loaded_mark()). */
#define JOURNAL_MARKS_MAX (1u << 20)
/*
 * A map entry: int32 number, 4 bytes zero, uint64 index: the file's place
 * among the fds of the slot's socket (the snapshot's first, then each
 * record's in order), then its st_dev and st_ino, which the reader checks.
 */
#define JOURNAL_MAP_ENTRY 32u
/* The most fds one record names (a Hello names one or two); more: a snapshot instead. */
#define JOURNAL_RECORD_FDS_MAX 8u
/* The longest the bus waits for a manager that does not read its notifications. */
#define JOURNAL_NOTIFY_WAIT_MS 2000

/* At offset 0 of the memfd; the previous process wrote it with this layout. */
struct journal_header {
	uint32_t magic;
	uint32_t version;
	uint64_t generation;
	uint64_t reserved;	/* 0 */
	uint64_t marks_off;
	uint64_t marks_size;
	uint64_t snapshot_off;
	uint64_t snapshot_len;
	uint64_t records_off;
	uint64_t n_fds;		/* in the socket stored beside it */
	uint32_t snapshot_crc;
	uint32_t header_crc;	/* of every byte before it */
	uint32_t attempts;	/* starts from it; not in header_crc */
	uint32_t padding;
};

/* Each record; @len written last (journal.h). */
struct journal_rec_header {
	uint32_t len;		/* of the whole record, padded to 8; 0: the end */
	uint32_t crc;		/* of every byte after this field, up to the padding */
	uint32_t type;
	uint32_t n_map;
	uint64_t n_payload;
};

struct journal {
	journal_snapshot_fn fn;
	void *userdata;
	int notify_fd;

	int fd;			/* the memfd in use */
	uint8_t *mem;
	size_t cap;
	size_t tail;		/* where the next record goes */
	size_t records_off;
	size_t records_limit;
	uint64_t generation;
	bool slot_b;
	uint8_t *marks;		/* in ->mem */
	size_t n_marks;
	size_t marks_hi;	/* past the highest fd ever marked: what to carry */

	int fds_w;		/* the slot's socket of fds: the end the bus writes, or -1 */
	uint64_t n_fds_sent;	/* into it: the snapshot's, then the records' */
	size_t n_record_fds;	/* the records' */
	uint64_t *files;	/* the "f<seq>" entries of a version 1 journal, to remove */
	size_t n_files;
	size_t cap_files;

	struct state_writer scratch;
	uint32_t rec_type;
	bool due;		/* journal_changed(), or room short */
	bool broken;		/* stopped: no crash survival */
};

/* ---------------------------------------------------------- the fd store */

static int notify_open(void)
{
	const char *path = getenv("NOTIFY_SOCKET");
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	socklen_t len;
	size_t n;
	int fd;

	if (!path || (path[0] != '/' && path[0] != '@'))
		return -ENOTCONN;
	n = strlen(path);
	if (n >= sizeof(sa.sun_path))
		return -EINVAL;
	memcpy(sa.sun_path, path, n);
	if (path[0] == '@')
		sa.sun_path[0] = '\0';
	len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n + (path[0] == '/'));
	fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return error_origin(-errno);
	if (connect(fd, (struct sockaddr *)&sa, len) < 0) {
		int r = -errno;

		close(fd);
		return error_origin(r);
	}
	return fd;
}

/*
 * One notification, with @n fds (at most FDPASS_BATCH). systemd reads them in
 * order; a manager that does not read for JOURNAL_NOTIFY_WAIT_MS (its queue
 * full) fails it: the bus must not stall on it.
 */
static int notify_send(struct journal *j, const char *text, const int *fds, size_t n)
{
	union {
		struct cmsghdr hdr;
		char buf[CMSG_SPACE(sizeof(int) * FDPASS_BATCH)];
	} control;
	struct iovec iov = { .iov_base = (void *)text, .iov_len = strlen(text) };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
	int waited = 0;
	ssize_t k;

	assert(n <= FDPASS_BATCH);
	fdpass_set_rights(&mh, control.buf, fds, n);
	for (;;) {
		struct pollfd p = { .fd = j->notify_fd, .events = POLLOUT };

		k = sendmsg(j->notify_fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (k >= 0)
			return 0;
		if (errno == EINTR)
			continue;
		if (errno != EAGAIN || waited >= JOURNAL_NOTIFY_WAIT_MS)
			return error_origin(errno == EAGAIN ? -ETIMEDOUT : -errno);
		(void)poll(&p, 1, 10);
		waited += 10;
	}
}

static int store_named(struct journal *j, const char *name, const int *fds, size_t n)
{
	char text[128];

	snprintf(text, sizeof(text), "FDSTORE=1\nFDPOLL=0\nFDNAME=%s", name);
	return notify_send(j, text, fds, n);
}

static void store_remove(struct journal *j, const char *name)
{
	char text[128];

	snprintf(text, sizeof(text), "FDSTOREREMOVE=1\nFDNAME=%s", name);
	(void)notify_send(j, text, NULL, 0);
}

static void file_name(char *buf, size_t size, uint64_t seq)
{
	snprintf(buf, size, "%c%" PRIu64, JOURNAL_FILE_PREFIX, seq);
}

static void store_remove_seq(struct journal *j, uint64_t seq)
{
	char name[32];

	file_name(name, sizeof(name), seq);
	store_remove(j, name);
}

bool journal_file_name(const char *name, uint64_t *seqp)
{
	uint64_t v = 0;

	if (name[0] != JOURNAL_FILE_PREFIX || !name[1])
		return false;
	for (const char *p = name + 1; *p; p++) {
		if (*p < '0' || *p > '9' || v > (UINT64_MAX - 9) / 10)
			return false;
		v = v * 10 + (uint64_t)(*p - '0');
	}
	*seqp = v;
	return v != 0;
}

/*
 * Note "f<seq>", an entry of a version 1 journal (a file per record), to
 * remove at the next compaction. 0 or -ENOMEM.
 */
static int journal_note_files(struct journal *j, uint64_t seq)
{
	if (j->n_files == j->cap_files) {
		size_t cap = j->cap_files ? j->cap_files * 2 : 64;
		uint64_t *v = reallocarray(j->files, cap, sizeof(*v));

		if (!v)
			return -ENOMEM;
		j->files = v;
		j->cap_files = cap;
	}
	j->files[j->n_files++] = seq;
	return 0;
}

/* Every "f<seq>" noted leaves the store. */
static void journal_remove_files(struct journal *j)
{
	for (size_t i = 0; i < j->n_files; i++)
		store_remove_seq(j, j->files[i]);
	j->n_files = 0;
}

void journal_fd_closing(struct journal *j, int fd)
{
	/* The store may keep it open: the client must see the end now. */
	if (j && fd >= 0) {
		(void)shutdown(fd, SHUT_RDWR);
		if ((size_t)fd < j->n_marks)
			j->marks[fd] = 0;
	}
}

/* ---------------------------------------------------------------- marks */

void journal_mark_set(struct journal *j, int fd, uint8_t bits)
{
	if (j && fd >= 0 && (size_t)fd < j->n_marks) {
		j->marks[fd] |= bits;
		j->marks_hi = MAX(j->marks_hi, (size_t)fd + 1);
	}
}

void journal_mark_clear(struct journal *j, int fd, uint8_t bits)
{
	if (j && fd >= 0 && (size_t)fd < j->n_marks)
		j->marks[fd] &= (uint8_t)~bits;
}

/* ----------------------------------------------------------- compaction */

static size_t align8(size_t n)
{
	return (n + 7) & ~(size_t)7;
}

static size_t marks_size(void)
{
	struct rlimit rl;
	size_t n = 65536;

	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
		n = MAX((size_t)rl.rlim_cur, n);
	n = MIN(n, (size_t)JOURNAL_MARKS_MAX);
	return (n + 4095) & ~(size_t)4095;
}

/* Make room for @n more bytes at ->tail. 0 or negative errno. */
static int journal_reserve(struct journal *j, size_t n)
{
	size_t cap = j->cap;
	uint8_t *p;

	if (cap - j->tail >= n)
		return 0;
	while (cap - j->tail < n)
		cap *= 2;
	if (ftruncate(j->fd, (off_t)cap) < 0)
		return error_origin(-errno);
	p = mremap(j->mem, j->cap, cap, MREMAP_MAYMOVE);
	if (p == MAP_FAILED)
		return error_origin(-errno);
	j->mem = p;
	j->cap = cap;
	j->marks = p + JOURNAL_HEADER_SIZE;
	return 0;
}

static void journal_put_map(uint8_t *p, int number, uint64_t seq, const struct stat *st)
{
	int32_t n = number;
	uint64_t dev = st->st_dev, ino = st->st_ino;

	memcpy(p, &n, 4);
	memset(p + 4, 0, 4);
	memcpy(p + 8, &seq, 8);
	memcpy(p + 16, &dev, 8);
	memcpy(p + 24, &ino, 8);
}

/*
 * The snapshot's fds into a new socket: its reading end (to store), or
 * negative errno. The bus keeps the writing end in *@wp, for the records'
 * fds (their places follow the snapshot's); when it dies, the reader sees
 * the end of the stream once everything is read.
 */
static int journal_pack_fds(const int *fds, size_t n, int *wp)
{
	int pair[2], r, big = INT_MAX;

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, pair) < 0)
		return error_origin(-errno);
	/* As much as net.core.wmem_max allows: each record's fds are one message. */
	(void)setsockopt(pair[0], SOL_SOCKET, SO_SNDBUF, &big, sizeof(big));
	r = fdpass_send(pair[0], fds, n);
	if (r < 0) {
		close(pair[0]);
		close(pair[1]);
		return r;
	}
	*wp = pair[0];
	return pair[1];
}

/*
 * A new generation: the snapshot, written straight into a new memfd with
 * room for records after it, stored with its fds under the other slot's
 * name before the old slot and the records' files go.
 */
static int journal_compact(struct journal *j)
{
	size_t n_marks = marks_size(), off = JOURNAL_HEADER_SIZE + n_marks;
	size_t end, records_off, cap;
	struct journal_header *h;
	struct state_writer w;
	int slot[2], fds_w = -1, r;
	uint8_t *mem;

	state_writer_init_at(&w, STATE_VERSION, off);
	w.crash = true;
	r = w.mapped ? j->fn(j->userdata, &w) : -ENOMEM;
	if (r == 0)
		r = w.error;
	if (r == 0) {
		r = journal_pack_fds(w.fds, w.n_fds, &fds_w);
		slot[1] = r;
	}
	if (r < 0) {
		state_writer_deinit(&w);
		return r;
	}
	/* The memfd is the journal's now; the records go after the stream. */
	end = w.n;
	records_off = align8(end);
	cap = w.cap;
	while (cap < records_off + MAX((size_t)JOURNAL_RECORDS_MIN, 2 * (end - off)))
		cap *= 2;
	mem = w.buf;
	slot[0] = w.memfd;
	if (cap != w.cap) {
		uint8_t *p = MAP_FAILED;

		if (ftruncate(slot[0], (off_t)cap) == 0)
			p = mremap(mem, w.cap, cap, MREMAP_MAYMOVE);
		if (p == MAP_FAILED) {
			r = error_origin(-errno);
			close(slot[1]);
			close(fds_w);
			state_writer_deinit(&w);
			return r;
		}
		mem = p;
	}
	memset(mem + end, 0, records_off - end);
	/* The marks go on where they were (the pages past them stay unallocated). */
	j->marks_hi = MIN(j->marks_hi, n_marks);
	if (j->marks)
		memcpy(mem + JOURNAL_HEADER_SIZE, j->marks, j->marks_hi);
	h = (struct journal_header *)mem;
	*h = (struct journal_header){
		.magic = JOURNAL_MAGIC,
		.version = JOURNAL_VERSION,
		.generation = j->generation + 1,
		.marks_off = JOURNAL_HEADER_SIZE,
		.marks_size = n_marks,
		.snapshot_off = off,
		.snapshot_len = end - off,
		.records_off = records_off,
		.n_fds = w.n_fds,
		.snapshot_crc = crc32c(0, mem + off, end - off),
	};
	h->header_crc = crc32c(0, h, offsetof(struct journal_header, header_crc));
	free(w.fds);

	r = store_named(j, j->slot_b ? JOURNAL_NAME_A : JOURNAL_NAME_B, slot, 2);
	close(slot[1]);
	if (r < 0) {
		munmap(mem, cap);
		close(slot[0]);
		close(fds_w);
		return r;
	}
	/* Stored: the old slot and what its records stored go. */
	if (j->fd >= 0) {
		store_remove(j, j->slot_b ? JOURNAL_NAME_B : JOURNAL_NAME_A);
		munmap(j->mem, j->cap);
		close(j->fd);
	}
	journal_remove_files(j);
	if (j->fds_w >= 0)
		close(j->fds_w);
	j->fds_w = fds_w;
	j->n_fds_sent = w.n_fds;
	j->n_record_fds = 0;
	j->slot_b = !j->slot_b;
	j->fd = slot[0];
	j->mem = mem;
	j->cap = cap;
	j->records_off = records_off;
	j->tail = records_off;
	j->records_limit = MAX((size_t)JOURNAL_RECORDS_MIN, 2 * (end - off));
	j->marks = mem + JOURNAL_HEADER_SIZE;
	j->n_marks = n_marks;
	j->generation++;
	j->due = false;
	return 0;
}

int journal_sync(struct journal *j)
{
	int r;

	if (!j || j->broken)
		return 0;
	if (!j->due && j->tail - j->records_off <= j->records_limit &&
	    j->n_record_fds <= JOURNAL_RECORD_FDS_COMPACT)
		return 0;
	r = journal_compact(j);
	if (r < 0) {
		/* Never a journal that misses a change: none at all. */
		journal_discard(j);
		j->broken = true;
	}
	return r;
}

void journal_changed(struct journal *j)
{
	if (j)
		j->due = true;
}

/* -------------------------------------------------------------- records */

struct state_writer *journal_record_begin(struct journal *j, uint32_t type)
{
	state_writer_reset(&j->scratch);
	j->rec_type = type;
	return &j->scratch;
}

void journal_record_end(struct journal *j)
{
	struct state_writer *w = &j->scratch;
	struct journal_rec_header *h;
	size_t len, n_map = w->n_fds;
	uint8_t *p;

	if (j->broken)
		return;
	len = align8(sizeof(*h) + n_map * JOURNAL_MAP_ENTRY + w->n);
	if (w->error || journal_reserve(j, len + sizeof(h->len)) < 0) {
		/* A snapshot instead, before anyone sees the change. */
		j->due = true;
		return;
	}
	p = j->mem + j->tail;
	h = (struct journal_rec_header *)p;
	/*
	 * Its new files (a peer's socket, maybe its pidfd) into the slot's
	 * socket, after those there: no notification, the store holds them
	 * already. Anything short of that (more fds than a record has, a full
	 * socket buffer): a snapshot instead.
	 */
	if (n_map) {
		struct stat st[JOURNAL_RECORD_FDS_MAX];
		size_t i = 0;

		if (n_map <= JOURNAL_RECORD_FDS_MAX && j->fds_w >= 0)
			while (i < n_map && fstat(w->fds[i], &st[i]) == 0)
				i++;
		if (i < n_map || fdpass_send(j->fds_w, w->fds, n_map) < 0) {
			j->due = true;
			return;
		}
		for (i = 0; i < n_map; i++)
			journal_put_map(p + sizeof(*h) + i * JOURNAL_MAP_ENTRY, w->fds[i],
					j->n_fds_sent + i, &st[i]);
		j->n_fds_sent += n_map;
		j->n_record_fds += n_map;
	}
	if (w->n)
		memcpy(p + sizeof(*h) + n_map * JOURNAL_MAP_ENTRY, w->buf, w->n);
	h->type = j->rec_type;
	h->n_map = (uint32_t)n_map;
	h->n_payload = w->n;
	h->crc = crc32c(0, p + 8, sizeof(*h) - 8 + n_map * JOURNAL_MAP_ENTRY + w->n);
	/* Last: until the length is there, the record is not (journal.h). */
	__atomic_store_n(&h->len, (uint32_t)len, __ATOMIC_RELEASE);
	j->tail += len;
}

/* ------------------------------------------------------------- life */

int journal_new(struct journal **jp, journal_snapshot_fn fn, void *userdata,
		struct journal_loaded *l)
{
	struct journal *j;
	int r;

	j = calloc(1, sizeof(*j));
	if (!j)
		return -ENOMEM;
	j->fn = fn;
	j->userdata = userdata;
	j->fd = -1;
	j->fds_w = -1;
	state_writer_init_memory(&j->scratch);
	j->scratch.crash = true;
	j->notify_fd = notify_open();
	if (j->notify_fd < 0) {
		r = j->notify_fd;
		free(j);
		return r;
	}
	if (l && l->mem) {
		/*
		 * Restored from it: counted on. A stale entry under the name
		 * the first snapshot takes goes first (two under one name
		 * would be ambiguous); its own slot and files go once the
		 * snapshot is stored.
		 */
		j->generation = l->generation;
		j->slot_b = !strcmp(l->slot, JOURNAL_NAME_B);
		store_remove(j, j->slot_b ? JOURNAL_NAME_A : JOURNAL_NAME_B);
	} else {
		/* A new bus: whatever a journal left in the store is stale. */
		store_remove(j, JOURNAL_NAME_A);
		store_remove(j, JOURNAL_NAME_B);
	}
	/* A version 1 journal's files: each name once (an entry's fds come in no set order). */
	for (size_t i = 0; l && i < l->n_files; i++) {
		uint64_t seq = l->files[i].seq;
		bool noted = false;

		for (size_t k = 0; k < j->n_files && !noted; k++)
			noted = j->files[k] == seq;
		if (!noted && journal_note_files(j, seq) < 0) {
			journal_free(j);
			return -ENOMEM;
		}
	}
	r = journal_compact(j);
	if (r < 0) {
		journal_free(j);
		return r;
	}
	/* The slot restored from: the other one than the snapshot just stored. */
	if (l && l->mem)
		store_remove(j, j->slot_b ? JOURNAL_NAME_A : JOURNAL_NAME_B);
	*jp = j;
	return 0;
}

struct journal *journal_free(struct journal *j)
{
	if (!j)
		return NULL;
	if (j->mem)
		munmap(j->mem, j->cap);
	if (j->fd >= 0)
		close(j->fd);
	if (j->fds_w >= 0)
		close(j->fds_w);
	if (j->notify_fd >= 0)
		close(j->notify_fd);
	state_writer_deinit(&j->scratch);
	free(j->files);
	free(j);
	return NULL;
}

void journal_discard(struct journal *j)
{
	if (!j || j->notify_fd < 0)
		return;
	store_remove(j, JOURNAL_NAME_A);
	store_remove(j, JOURNAL_NAME_B);
	journal_remove_files(j);
	j->broken = true;
}

/* ------------------------------------------------------------- reading */

int journal_check(const uint8_t *mem, size_t n, struct journal_loaded *l)
{
	const struct journal_header *h = (const void *)mem;
	size_t pos, cap = 0;

	l->records = NULL;
	l->n_records = 0;
	if (n < JOURNAL_HEADER_SIZE || h->magic != JOURNAL_MAGIC || h->version != JOURNAL_VERSION ||
	    crc32c(0, h, offsetof(struct journal_header, header_crc)) != h->header_crc)
		return JOURNAL_E_CORRUPT;
	/* Every region inside the file, in order, none overlapping. */
	if (h->marks_off != JOURNAL_HEADER_SIZE || h->marks_size > n - JOURNAL_HEADER_SIZE ||
	    h->snapshot_off != h->marks_off + h->marks_size || h->snapshot_len > n ||
	    h->snapshot_off > n - h->snapshot_len ||
	    h->records_off != align8(h->snapshot_off + h->snapshot_len) || h->records_off > n)
		return JOURNAL_E_CORRUPT;
	if (crc32c(0, mem + h->snapshot_off, h->snapshot_len) != h->snapshot_crc)
		return JOURNAL_E_CORRUPT;
	l->generation = h->generation;
	l->n_snap_fds = h->n_fds;
	l->marks = mem + h->marks_off;
	l->n_marks = h->marks_size;
	l->snapshot = mem + h->snapshot_off;
	l->n_snapshot = h->snapshot_len;

	for (pos = h->records_off; n - pos >= 4;) {
		const struct journal_rec_header *r = (const void *)(mem + pos);
		struct journal_record *rec;
		size_t body;

		if (r->len == 0)
			break;
		/* Whole, and its parts inside it. */
		if (r->len % 8 || r->len > n - pos || r->len < sizeof(*r))
			goto corrupt;
		if (r->n_map > (r->len - sizeof(*r)) / JOURNAL_MAP_ENTRY)
			goto corrupt;
		body = r->n_map * JOURNAL_MAP_ENTRY;
		if (r->n_payload > r->len - sizeof(*r) - body ||
		    align8(sizeof(*r) + body + r->n_payload) != r->len)
			goto corrupt;
		if (crc32c(0, mem + pos + 8, sizeof(*r) - 8 + body + r->n_payload) != r->crc)
			goto corrupt;
		if (r->type == 0 || r->type >= _JOURNAL_REC_MAX)
			goto corrupt;
		if (l->n_records == cap) {
			size_t c = cap ? cap * 2 : 64;
			struct journal_record *v = reallocarray(l->records, c, sizeof(*v));

			if (!v) {
				free(steal_ptr(l->records));
				l->n_records = 0;
				return -ENOMEM;
			}
			l->records = v;
			cap = c;
		}
		rec = &l->records[l->n_records++];
		rec->type = r->type;
		rec->map = mem + pos + sizeof(*r);
		rec->n_map = r->n_map;
		rec->payload = rec->map + body;
		rec->n_payload = (size_t)r->n_payload;
		pos += r->len;
	}
	/*
	 * What follows the end is a record the crash interrupted before its
	 * length was written (journal.h): never applied, and no damage.
	 */
	return 0;
corrupt:
	free(steal_ptr(l->records));
	l->n_records = 0;
	return JOURNAL_E_CORRUPT;
}

/* Map @fd read-write: 0 with the mapping, or JOURNAL_E_CORRUPT / negative errno. */
static int journal_map(int fd, uint8_t **memp, size_t *np)
{
	struct stat st;
	void *p;

	if (fstat(fd, &st) < 0)
		return error_origin(-errno);
	if (!S_ISREG(st.st_mode) || st.st_size < (off_t)JOURNAL_HEADER_SIZE ||
	    (uint64_t)st.st_size > (1ULL << 34))
		return JOURNAL_E_CORRUPT;
	p = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED)
		return error_origin(-errno);
	*memp = p;
	*np = (size_t)st.st_size;
	return 0;
}

/* Of a slot's two fds: the memfd (a regular file) first. */
static void journal_slot_order(const int in[2], int out[2])
{
	struct stat st;

	out[0] = in[0];
	out[1] = in[1];
	if (in[0] >= 0 && fstat(in[0], &st) == 0 && S_ISSOCK(st.st_mode)) {
		out[0] = in[1];
		out[1] = in[0];
	}
}

/* A candidate slot of journal_load(). */
struct journal_slot {
	int fds[2];		/* memfd, socket */
	const char *name;
	uint8_t *mem;
	size_t n;
	int r;
	struct journal_loaded t;
};

static void journal_slot_deinit(struct journal_slot *c)
{
	free(c->t.records);
	if (c->mem)
		munmap(c->mem, c->n);
	c->mem = NULL;
	c->t.records = NULL;
}

int journal_load(struct journal_loaded *l, const int slot_a[2], const int slot_b[2],
		 struct journal_file *files, size_t n_files)
{
	struct journal_slot c[2] = {
		{ .name = JOURNAL_NAME_A, .r = JOURNAL_E_NONE },
		{ .name = JOURNAL_NAME_B, .r = JOURNAL_E_NONE },
	};
	int best = -1, r;

	*l = (struct journal_loaded){ .fd = -1, .files = files, .n_files = n_files };
	journal_slot_order(slot_a, c[0].fds);
	journal_slot_order(slot_b, c[1].fds);
	for (int i = 0; i < 2; i++) {
		if (c[i].fds[0] < 0)
			continue;
		c[i].r = journal_map(c[i].fds[0], &c[i].mem, &c[i].n);
		if (c[i].r == 0)
			c[i].r = journal_check(c[i].mem, c[i].n, &c[i].t);
		if (c[i].r < 0) {
			r = c[i].r;
			goto out;
		}
		if (best < 0 || (c[i].r == 0 && (c[best].r != 0 ||
						 c[i].t.generation > c[best].t.generation)))
			best = i;
	}
	r = best < 0 ? JOURNAL_E_NONE : c[best].r;
	/*
	 * Two slots: a compaction was cut short after storing the newer one,
	 * which is whole (stored only once written). A damaged one that
	 * claims to be newer than the one taken: refuse both (the older
	 * misses changes clients saw).
	 */
	for (int i = 0; r == 0 && i < 2; i++)
		if (i != best && c[i].r == JOURNAL_E_CORRUPT &&
		    ((const struct journal_header *)c[i].mem)->generation > c[best].t.generation)
			r = JOURNAL_E_CORRUPT;
	if (r == 0) {
		struct journal_header *h = (struct journal_header *)c[best].mem;

		if (h->attempts) {
			r = JOURNAL_E_CRASHED;
			goto out;
		}
		/* The snapshot's fds, then the records', each with the number it had. */
		if (c[best].fds[1] < 0) {
			r = JOURNAL_E_CORRUPT;
			goto out;
		}
		c[best].t.snap_numbers = NULL;
		c[best].t.snap_fds = NULL;
		r = fdpass_receive(c[best].fds[1], &c[best].t.snap_numbers, &c[best].t.snap_fds,
				   &c[best].t.n_snap);
		if (r == 0 && c[best].t.n_snap < h->n_fds)
			r = -EBADMSG;
		if (r == 0 && c[best].t.n_snap &&
		    !(c[best].t.snap_used = calloc(c[best].t.n_snap, sizeof(bool))))
			r = -ENOMEM;
		if (r < 0) {
			for (size_t k = 0; k < c[best].t.n_snap; k++)
				close(c[best].t.snap_fds[k]);
			free(c[best].t.snap_numbers);
			free(c[best].t.snap_fds);
			free(c[best].t.snap_used);
			r = r == -EBADMSG ? JOURNAL_E_CORRUPT : r;
			goto out;
		}
		/* Counted before anything is applied: if this process dies, the next discards it. */
		__atomic_store_n(&h->attempts, 1, __ATOMIC_SEQ_CST);
		*l = c[best].t;
		l->mem = c[best].mem;
		l->n_mem = c[best].n;
		l->fd = c[best].fds[0];
		l->slot = c[best].name;
		l->files = files;
		l->n_files = n_files;
		c[best].mem = NULL;
		c[best].t.records = NULL;
	}
out:
	journal_slot_deinit(&c[0]);
	journal_slot_deinit(&c[1]);
	return r;
}

void journal_loaded_deinit(struct journal_loaded *l)
{
	free(l->records);
	if (l->mem)
		munmap(l->mem, l->n_mem);
	if (l->fd >= 0)
		close(l->fd);
	/* A version 1 journal's files: never used. */
	for (size_t i = 0; i < l->n_files; i++)
		if (l->files[i].fd >= 0)
			close(l->files[i].fd);
	free(l->files);
	/*
	 * The fds a map gave are the bus's now; the records' others go (a
	 * record cut by the crash). The snapshot's are the caller's.
	 */
	for (size_t i = l->n_snap_fds; l->snap_used && i < l->n_snap; i++)
		if (!l->snap_used[i] && l->snap_fds[i] >= 0)
			close(l->snap_fds[i]);
	free(l->snap_numbers);
	free(l->snap_fds);
	free(l->snap_used);
	free(l->old_numbers);
	/* The stand-ins are the bus's (their peers closed) like any file given. */
	free(l->stand_ins);
	*l = (struct journal_loaded){ .fd = -1 };
}

static void journal_loaded_note(struct journal_loaded *l, int fd, int old)
{
	if ((size_t)fd >= l->n_old) {
		size_t n = MAX((size_t)fd + 1, l->n_old * 2);
		int *v = reallocarray(l->old_numbers, n, sizeof(*v));

		if (!v)
			return;	/* unknown: its mark reads as set (journal_loaded_mark()) */
		for (size_t i = l->n_old; i < n; i++)
			v[i] = -1;
		l->old_numbers = v;
		l->n_old = n;
	}
	l->old_numbers[fd] = old;
}

/* A socket whose other end is closed: it stands in for a file the store lost. */
static int journal_loaded_stand_in(struct journal_loaded *l)
{
	int pair[2], *v;

	v = reallocarray(l->stand_ins, l->n_stand_ins + 1, sizeof(*v));
	if (!v)
		return -1;
	l->stand_ins = v;
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, pair) < 0)
		return -1;
	close(pair[1]);
	l->stand_ins[l->n_stand_ins++] = pair[0];
	return pair[0];
}

bool journal_loaded_lost(const struct journal_loaded *l, int fd)
{
	for (size_t i = 0; i < l->n_stand_ins; i++)
		if (l->stand_ins[i] == fd)
			return true;
	return false;
}

static int journal_loaded_map_fd(int fd, void *userdata)
{
	struct journal_loaded *l = userdata;

	if (!l->map) {
		for (size_t i = 0; i < MIN(l->n_snap_fds, l->n_snap); i++)
			if (l->snap_numbers[i] == fd) {
				journal_loaded_note(l, l->snap_fds[i], fd);
				l->snap_used[i] = true;
				return l->snap_fds[i];
			}
		return -1;
	}
	for (size_t i = 0; i < l->n_map; i++) {
		const uint8_t *e = l->map + i * JOURNAL_MAP_ENTRY;
		uint64_t index, dev, ino;
		int32_t number;
		struct stat st;

		memcpy(&number, e, 4);
		memcpy(&index, e + 8, 8);
		memcpy(&dev, e + 16, 8);
		memcpy(&ino, e + 24, 8);
		if (number != fd)
			continue;
		if (index >= l->n_snap_fds && index < l->n_snap && !l->snap_used[index] &&
		    l->snap_numbers[index] == number && fstat(l->snap_fds[index], &st) == 0 &&
		    (uint64_t)st.st_dev == dev && (uint64_t)st.st_ino == ino) {
			journal_loaded_note(l, l->snap_fds[index], fd);
			l->snap_used[index] = true;
			return l->snap_fds[index];
		}
		/*
		 * Named, but not the file there (the socket lost it): a
		 * stand-in, so that the record still applies; its peer is
		 * closed after the replay (journal_loaded_lost()).
		 */
		return journal_loaded_stand_in(l);
	}
	return -1;
}

void journal_loaded_use_map(struct journal_loaded *l, struct state_reader *r,
			    const struct journal_record *rec)
{
	l->map = rec ? rec->map : NULL;
	l->n_map = rec ? rec->n_map : 0;
	r->fd_map = journal_loaded_map_fd;
	r->fd_map_userdata = l;
}

uint8_t journal_loaded_mark(const struct journal_loaded *l, int fd)
{
	int old = fd >= 0 && (size_t)fd < l->n_old ? l->old_numbers[fd] : -1;

	/* Past the marks, or not known: never clean. */
	if (old < 0 || (size_t)old >= l->n_marks)
		return JOURNAL_MARK_IN | JOURNAL_MARK_OUT;
	return l->marks[old];
}
