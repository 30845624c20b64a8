/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The crash journal (broker/objects/journal.c) against a stand-in for
 * systemd's fd store: what the journal stores and removes, and what a next
 * process reads back. A snapshot and its fds come back as written; records
 * in order, their fds through the map (in the slot's socket after the
 * snapshot's: the store holds nothing more); a record cut before its length
 * is simply not there; any other damage refuses the journal; a journal whose
 * start died once is refused as crashed; a compaction moves to the other
 * slot, and is due once the records hold enough fds; a socket's mark is
 * found under the number it had.
 */

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>
#include "broker/objects/journal.h"
#include "broker/objects/state.h"
#include "util/fd.h"
#include "check.h"

/* ------------------------------------------------- the stand-in store */

#define STORE_MAX 64

static struct {
	int sock;
	char name[STORE_MAX][64];
	int fd[STORE_MAX];
	int n;
} store;

static void store_open(const char *dir)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };

	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/notify", dir);
	store.sock = CHECK_OK(socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
	CHECK_OK(bind(store.sock, (struct sockaddr *)&sa, sizeof(sa)));
	CHECK_OK(setenv("NOTIFY_SOCKET", sa.sun_path, 1));
}

/* What systemd does with the notifications sent so far. */
static void store_pump(void)
{
	for (;;) {
		char text[512], cbuf[CMSG_SPACE(sizeof(int) * 8)], name[64] = "stored";
		struct iovec iov = { .iov_base = text, .iov_len = sizeof(text) - 1 };
		struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf,
				     .msg_controllen = sizeof(cbuf) };
		int fds[8], n_fds = 0;
		const char *p;
		ssize_t k = recvmsg(store.sock, &mh, MSG_CMSG_CLOEXEC);

		if (k < 0)
			return;
		text[k] = '\0';
		for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
			n_fds = (int)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
			memcpy(fds, CMSG_DATA(c), sizeof(int) * n_fds);
		}
		p = strstr(text, "FDNAME=");
		if (p)
			sscanf(p + 7, "%63[^\n]", name);
		if (strstr(text, "FDSTORE=1")) {
			/* systemd keeps a message's fds in no particular order: reversed. */
			for (int i = n_fds - 1; i >= 0; i--) {
				CHECK(store.n < STORE_MAX);
				snprintf(store.name[store.n], 64, "%s", name);
				store.fd[store.n++] = fds[i];
			}
		} else if (strstr(text, "FDSTOREREMOVE=1")) {
			int m = 0;

			for (int i = 0; i < store.n; i++) {
				if (!strcmp(store.name[i], name)) {
					close(store.fd[i]);
					continue;
				}
				store.fd[m] = store.fd[i];
				memcpy(store.name[m++], store.name[i], 64);
			}
			store.n = m;
		}
	}
}

static int store_count(const char *name)
{
	int n = 0;

	store_pump();
	for (int i = 0; i < store.n; i++)
		n += !strcmp(store.name[i], name);
	return n;
}

/* As fdstore_take() sorts them: the two slots, the records' files. */
static void store_take(int slot_a[2], int slot_b[2], struct journal_file **filesp, size_t *np)
{
	struct journal_file *files = calloc(STORE_MAX, sizeof(*files));
	size_t n = 0;

	CHECK(files);
	store_pump();
	slot_a[0] = slot_a[1] = slot_b[0] = slot_b[1] = -1;
	for (int i = 0; i < store.n; i++) {
		int fd = CHECK_OK(fcntl(store.fd[i], F_DUPFD_CLOEXEC, 3));
		int *slot = !strcmp(store.name[i], JOURNAL_NAME_A) ? slot_a :
			    !strcmp(store.name[i], JOURNAL_NAME_B) ? slot_b : NULL;
		uint64_t seq;

		if (slot) {
			slot[slot[0] < 0 ? 0 : 1] = fd;
		} else {
			CHECK(journal_file_name(store.name[i], &seq));
			files[n++] = (struct journal_file){ .seq = seq, .fd = fd };
		}
	}
	*filesp = files;
	*np = n;
}

static void close_slots(int a[2], int b[2], const struct journal_loaded *l)
{
	for (int i = 0; i < 2; i++) {
		if (a[i] >= 0 && a[i] != l->fd)
			close(a[i]);
		if (b[i] >= 0 && b[i] != l->fd)
			close(b[i]);
	}
}

static int load(struct journal_loaded *l)
{
	struct journal_file *files;
	int a[2], b[2], r;
	size_t n;

	store_take(a, b, &files, &n);
	r = journal_load(l, a, b, files, n);
	close_slots(a, b, l);
	return r;
}

/* ---------------------------------------------------------- the bus */

static int snapshot_pipe[2];
static int snapshot_socket[2];
static int n_snapshots;

/* A bus of two fds (a pipe's ends stand for a listener, a socket for a client). */
static int snapshot(void *userdata, struct state_writer *w)
{
	CHECK(w->crash);
	n_snapshots++;
	state_put_str(w, userdata);
	state_put_fd(w, snapshot_pipe[0]);
	state_put_fd(w, snapshot_socket[0]);
	return 0;
}

static void record_name(struct journal *j, uint64_t id, const char *name)
{
	struct state_writer *w = journal_record_begin(j, JOURNAL_REC_NAME_REQUEST);

	state_put_u64(w, id);
	state_put_str(w, name);
	state_put_u32(w, 4);
	journal_record_end(j);
}

static void check_snapshot(struct journal_loaded *l, const char *text)
{
	struct state_reader r;
	const char *s;
	int fd;

	CHECK_EQ(state_reader_init_view(&r, l->snapshot, l->n_snapshot, 0), 0);
	journal_loaded_use_map(l, &r, NULL);
	s = state_get_str(&r);
	CHECK_STR(s, text);
	fd = state_get_fd(&r);
	CHECK(fd_same_file(fd, snapshot_pipe[0]), "the snapshot's fd is the file it named");
	fd = state_get_fd(&r);
	CHECK(fd_same_file(fd, snapshot_socket[0]));
	/* Marked OUT before the snapshot: found under its old number. */
	CHECK_EQ(journal_loaded_mark(l, fd), JOURNAL_MARK_OUT);
	CHECK(!r.error && r.pos == r.n);
	state_reader_deinit(&r);
}

int main(void)
{
	char dir[] = "/tmp/test-journal.XXXXXX";
	struct journal_loaded l;
	struct state_reader r;
	struct journal *j;
	int client[2], fd;
	uint8_t *mem;
	size_t n;

	CHECK(mkdtemp(dir));
	store_open(dir);
	CHECK_OK(pipe2(snapshot_pipe, O_CLOEXEC));
	CHECK_OK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, snapshot_socket));
	CHECK_OK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, client));

	/* A new journal: the first snapshot in slot b, stale names removed first. */
	l = (struct journal_loaded){ .fd = -1 };
	CHECK_EQ(journal_new(&j, snapshot, "first", &l), 0);
	CHECK_EQ(n_snapshots, 1);
	CHECK_EQ(store_count(JOURNAL_NAME_B), 2);
	CHECK_EQ(store_count(JOURNAL_NAME_A), 0);
	journal_mark_set(j, snapshot_socket[0], JOURNAL_MARK_OUT | JOURNAL_MARK_IN);
	journal_mark_clear(j, snapshot_socket[0], JOURNAL_MARK_IN);

	/* Records: one names two new fds, sent into the slot's socket. */
	record_name(j, 7, "com.example.A");
	{
		struct state_writer *w = journal_record_begin(j, JOURNAL_REC_HELLO);

		state_put_u32(w, 1);
		state_put_fd(w, client[0]);
		state_put_fd(w, snapshot_pipe[1]);
		journal_record_end(j);
	}
	record_name(j, 8, "com.example.B");
	store_pump();
	CHECK_EQ(store.n, 2);	/* no notification: slot b's two entries hold all */

	/* What the next process reads, records and their map. */
	CHECK_EQ(load(&l), 0);
	check_snapshot(&l, "first");
	CHECK_EQ(l.n_records, 3);
	CHECK_EQ(l.records[0].type, JOURNAL_REC_NAME_REQUEST);
	CHECK_EQ(l.records[1].type, JOURNAL_REC_HELLO);
	CHECK_EQ(state_reader_init_view(&r, l.records[1].payload, l.records[1].n_payload,
					STATE_VERSION), 0);
	journal_loaded_use_map(&l, &r, &l.records[1]);
	CHECK_EQ(state_get_u32(&r), 1);
	fd = state_get_fd(&r);
	CHECK(fd_same_file(fd, client[0]), "the record's fd is the file it named");
	fd = state_get_fd(&r);
	CHECK(fd_same_file(fd, snapshot_pipe[1]), "each fd of the record in its place");
	CHECK(!r.error && r.pos == r.n);
	state_reader_deinit(&r);
	CHECK_EQ(state_reader_init_view(&r, l.records[2].payload, l.records[2].n_payload,
					STATE_VERSION), 0);
	CHECK_EQ(state_get_u64(&r), 8);
	CHECK_STR(state_get_str(&r), "com.example.B");
	state_reader_deinit(&r);

	/* Loaded once, the attempt is counted: loaded again, it is a start that died. */
	journal_loaded_deinit(&l);
	CHECK_EQ(load(&l), JOURNAL_E_CRASHED);
	journal_loaded_deinit(&l);

	/* The count back to 0 by hand, then damage. */
	fd = -1;
	for (int i = 0; i < store.n; i++) {
		struct stat st;

		if (!strcmp(store.name[i], JOURNAL_NAME_B) && fstat(store.fd[i], &st) == 0 &&
		    S_ISREG(st.st_mode))
			fd = store.fd[i];
	}
	CHECK(fd >= 0);
	n = (size_t)lseek(fd, 0, SEEK_END);
	mem = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	CHECK(mem != MAP_FAILED);
	/* struct journal_header's attempts: after two u32, eight u64 and two u32. */
	memset(mem + 2 * 4 + 8 * 8 + 2 * 4, 0, 4);
	{
		struct journal_loaded t = { .fd = -1 };
		size_t end, first;

		CHECK_EQ(journal_check(mem, n, &t), 0);
		CHECK_EQ(t.n_records, 3);
		/* A record the crash cut before its length: garbage after the end, ignored. */
		end = (size_t)(t.records[2].payload - mem) + t.records[2].n_payload;
		end = (end + 7) & ~(size_t)7;
		memset(mem + end + 4, 0x5a, 40);
		first = (size_t)(t.records[0].payload - mem);
		free(t.records);
		t = (struct journal_loaded){ .fd = -1 };
		CHECK_EQ(journal_check(mem, n, &t), 0);
		CHECK_EQ(t.n_records, 3);
		free(t.records);
		/* One byte of a record's payload changed: the whole journal refused. */
		mem[first + 9] ^= 1;
		t = (struct journal_loaded){ .fd = -1 };
		CHECK_EQ(journal_check(mem, n, &t), JOURNAL_E_CORRUPT);
		CHECK(!t.records);
		/* Cut short (a truncated memfd): refused, never read past the end. */
		CHECK_EQ(journal_check(mem, 100, &t), JOURNAL_E_CORRUPT);
		CHECK_EQ(journal_check(mem, 4096 + 10, &t), JOURNAL_E_CORRUPT);
	}
	munmap(mem, n);

	/* A compaction: slot a, then slot b gone and the records' file too. */
	journal_changed(j);
	CHECK_EQ(journal_sync(j), 0);
	CHECK_EQ(n_snapshots, 2);
	CHECK_EQ(store_count(JOURNAL_NAME_A), 2);
	CHECK_EQ(store_count(JOURNAL_NAME_B), 0);
	CHECK_EQ(load(&l), 0);
	CHECK_EQ(l.n_records, 0);
	check_snapshot(&l, "first");
	journal_loaded_deinit(&l);

	/* Records with fds: a compaction is due once they hold enough. */
	for (int i = 0; i < 300 && n_snapshots == 2; i++) {
		struct state_writer *w = journal_record_begin(j, JOURNAL_REC_HELLO);

		state_put_u32(w, 1);
		state_put_fd(w, client[0]);
		journal_record_end(j);
		CHECK_EQ(journal_sync(j), 0);
	}
	CHECK_EQ(n_snapshots, 3);
	CHECK_EQ(store_count(JOURNAL_NAME_B), 2);
	CHECK_EQ(store_count(JOURNAL_NAME_A), 0);
	store_pump();
	CHECK_EQ(store.n, 2);

	/* Discarded (the bus stops for good): nothing of it left in the store. */
	journal_discard(j);
	CHECK_EQ(store_count(JOURNAL_NAME_A) + store_count(JOURNAL_NAME_B), 0);
	journal_free(j);
	for (int i = 0; i < store.n; i++)
		close(store.fd[i]);
	printf("journal: ok\n");
	return 0;
}
