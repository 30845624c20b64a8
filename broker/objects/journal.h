/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/**
 * DOC: The crash journal
 *
 * A re-exec and a restart by systemd hand a live bus over (reexec.h,
 * fdstore.h): the old process writes the state when told to. A crash tells
 * nobody. So, while systemd's fd store is there (fdstore_enabled()), the bus
 * keeps its state outside its own memory at all times, in files the store
 * holds: when the process dies, whatever the way, systemd restarts it
 * (Restart=on-failure) and hands it the store, and the new process serves
 * the same bus.
 *
 * The journal: a memfd that starts with a snapshot of the bus, the state a
 * hand-over writes (state.h) without what cannot outlive a process (bytes
 * in flight on a socket, peers before Hello: state_writer .crash), followed
 * by records of every change since, appended in the same loop turn as the
 * change and before any client can see its effect (nothing is written to a
 * socket before the loop's flush, and the records are in the memfd by
 * then). A change that has no record (rare ones: a monitor, a container
 * instance, an activation, a reload) asks for a new snapshot instead
 * (journal_changed()), taken before the next flush. A new snapshot is
 * also taken when the records outgrow it (compaction), and right after a
 * restore. Each snapshot goes into a new memfd, stored under the name of
 * the slot not in use ("bus1-journal-a", "-b"), before the old one is
 * removed: the store always holds a whole journal, and the reader takes
 * the newest whole one (the generation in its header).
 *
 * Files: the fds a snapshot names (clients' sockets and pidfds, the
 * listeners, the bus1 peer, the fds of queued activation requests) travel
 * with it, in a socket nobody reads (util/fdpass.h) stored under the slot's
 * name beside the memfd. The bus keeps that socket's other end: a record
 * that names new fds (a peer's Hello: its socket, and its pidfd unless the
 * socket gives it again: peer-state.h) sends them into it, behind those
 * there, and its map gives each number its place there (and the file's
 * st_dev and st_ino, which the reader checks), so that the next process
 * finds every file whatever number it gets. The socket lives in the store
 * already: a record costs systemd nothing, and the store holds the two
 * entries of a slot whatever the number of clients, four during a
 * compaction. A compaction is due once the records' fds reach
 * JOURNAL_RECORD_FDS_COMPACT or fill the socket's buffer (journal.c). A
 * client socket the bus closes is shut down first (journal_fd_closing()),
 * so that its client sees the end although the slot's socket may still
 * hold the file.
 *
 * Streams: a socket's byte stream cannot be journaled, so each socket has
 * a mark byte (in the journal's memfd, indexed by fd number) that says whether the bus held bytes of it it had read and not yet
 * routed (JOURNAL_MARK_IN: set before each read, cleared once everything
 * read is routed) or had queued and not yet written (JOURNAL_MARK_OUT). A
 * connection restored with a mark set is closed: a message was cut, or
 * swallowed, and its client gets an end rather than a silent wait.
 *
 * Records (struct journal_record): length, CRC-32C, type, then the fd map
 * and the payload. The length is written last, into zeroed memory: a
 * record the crash interrupted has length 0 and is not there. Any other
 * damage (a bad CRC, a length past the end, a record or snapshot that does
 * not parse) refuses the whole journal before anything is applied: the
 * bus then starts clean, as dbus-daemon would after a crash.
 *
 * Never a crash loop: before it restores, the new process counts the
 * attempt in the journal's header; a journal that already counts one (the
 * process that tried it died) is discarded and the bus starts clean, and
 * the log says so. A successful restore takes a new snapshot at once,
 * whose count is 0.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct state_reader;
struct state_writer;

/* Record types: each is written and replayed by its owner (journal-records.c). */
enum {
	JOURNAL_REC_HELLO = 1,		/* a peer said Hello: its section (peer-state.h) */
	JOURNAL_REC_GONE,		/* u64 id: the peer closed */
	JOURNAL_REC_NAME_REQUEST,	/* u64 id, str name, u32 flags */
	JOURNAL_REC_NAME_RELEASE,	/* u64 id, str name */
	JOURNAL_REC_MATCH_ADD,		/* u64 id, str rule */
	JOURNAL_REC_MATCH_REMOVE,	/* u64 id, str rule */
	JOURNAL_REC_REPLY_ADD,		/* u64 caller, u64 callee, u32 serial, u64 deadline */
	JOURNAL_REC_REPLY_DONE,		/* u64 caller, u64 callee, u32 serial */
	_JOURNAL_REC_MAX,
};

/* A socket's mark (see above). */
enum {
	JOURNAL_MARK_IN = 1 << 0,
	JOURNAL_MARK_OUT = 1 << 1,
};

/* Positive codes of journal_load(). */
enum {
	_JOURNAL_E_SUCCESS,
	JOURNAL_E_NONE,		/* the store holds no journal */
	JOURNAL_E_CORRUPT,	/* damaged or truncated: refused whole */
	JOURNAL_E_CRASHED,	/* a start from it died already: discarded */
};

/*
 * The most entries the journal keeps in the store (two slots of two during a
 * compaction), with room for a hand-over's two: it does not start with a
 * smaller store ($FDSTORE, FileDescriptorStoreMax=), which would drop
 * entries it needs.
 */
#define JOURNAL_STORE_NEEDED 8u

/* The store names of the journal (each: the memfd and its socket of fds). */
#define JOURNAL_NAME_A "bus1-journal-a"
#define JOURNAL_NAME_B "bus1-journal-b"
#define JOURNAL_FILE_PREFIX 'f'

/* Write the whole bus into @w (w->crash is set). 0 or negative errno. */
typedef int (*journal_snapshot_fn)(void *userdata, struct state_writer *w);

struct journal;
struct journal_loaded;

/**
 * journal_new() - keep the bus in the fd store from now on
 * @fn, @userdata: write a snapshot (called by journal_sync() and now)
 * @l:		the journal restored from (its files become this one's,
 *		its generation is counted on), or NULL
 *
 * Takes the first snapshot and stores everything it names, then removes
 * from the store what the restored journal held and no longer needs.
 * Return: 0 or negative errno (no journal: the bus runs as before).
 */
int journal_new(struct journal **jp, journal_snapshot_fn fn, void *userdata,
		struct journal_loaded *l);
/* Stops keeping the bus: the store is left as it is (a hand-over follows). */
struct journal *journal_free(struct journal *j);

/*
 * The bus stops for good (not a crash, not a hand-over): every entry the
 * journal put into the store is removed.
 */
void journal_discard(struct journal *j);

/**
 * journal_record_begin() - start a record of type @type
 *
 * Return: the writer for its payload (a scratch writer of the journal's);
 * the fds it names are stored and mapped by journal_record_end().
 */
struct state_writer *journal_record_begin(struct journal *j, uint32_t type);
/* Append the record. A failure (no memory, no room) asks for a snapshot instead. */
void journal_record_end(struct journal *j);

/* A change without a record: take a snapshot before the next flush. */
void journal_changed(struct journal *j);

/*
 * Before the bus writes to any client (bus_flush_now()): take the snapshot
 * asked for or due. Return 0, or negative errno: the snapshot could not be
 * taken and the journal stopped (its entries left the store): the bus goes
 * on without crash survival rather than with a journal that misses a change.
 */
int journal_sync(struct journal *j);

/*
 * The bus closes @fd, a client socket the journal may hold: shut it down
 * (its client sees the end now, although the store holds the file until
 * the next snapshot no longer names it).
 */
void journal_fd_closing(struct journal *j, int fd);

/* The marks of the socket @fd (0..255): set, clear. */
void journal_mark_set(struct journal *j, int fd, uint8_t bits);
void journal_mark_clear(struct journal *j, int fd, uint8_t bits);

/* ------------------------------------------------------------ reading */

/**
 * struct journal_record - one record, as journal_load() found it
 * @type:	JOURNAL_REC_*
 * @payload, @n_payload: its bytes (in the loaded journal's mapping)
 * @map, @n_map: its fd map: (number in the previous process, place among
 *		the fds of the slot's socket, st_dev, st_ino)
 */
struct journal_record {
	uint32_t type;
	const uint8_t *payload;
	size_t n_payload;
	const uint8_t *map;
	size_t n_map;
};

/**
 * struct journal_loaded - a journal found in the fd store, checked whole
 * @mem, @n_mem, @fd, @slot: the memfd taken (mapped), its store name
 * @marks, @n_marks: the sockets' marks, by the previous process's numbers
 * @snapshot, @n_snapshot: the snapshot stream (state.h)
 * @records, @n_records: every record after it, in order
 * @generation: of the journal taken
 * @snap_numbers, @snap_fds, @n_snap: the fds of the slot's socket and the
 *		numbers they had: the snapshot's, then the records'
 * @n_snap_fds: how many of them are the snapshot's
 * @snap_used:	by place: a map gave it (the bus's now)
 * @files, @n_files: "f<seq>" entries the store passed: a version 1
 *		journal's (a file per record), closed and removed
 * @old_numbers, @n_old: by fd now: the number it had (-1: none), as the
 *		maps used so far gave it
 * @stand_ins, @n_stand_ins: the sockets that stand in for files the store
 *		lost (journal_loaded_lost())
 */
struct journal_loaded {
	uint8_t *mem;
	size_t n_mem;
	int fd;
	const char *slot;
	const uint8_t *marks;
	size_t n_marks;
	const uint8_t *snapshot;
	size_t n_snapshot;
	struct journal_record *records;
	size_t n_records;
	uint64_t generation;
	int32_t *snap_numbers;
	int *snap_fds;
	size_t n_snap;
	size_t n_snap_fds;
	bool *snap_used;
	struct journal_file {
		uint64_t seq;
		int fd;
	} *files;
	size_t n_files;
	int *old_numbers;
	size_t n_old;
	int *stand_ins;
	size_t n_stand_ins;
	/* the map in use: a record's (number, seq) pairs, or NULL: the snapshot's */
	const uint8_t *map;
	size_t n_map;
};

/**
 * journal_check() - check a journal's bytes
 * @mem, @n:	the whole memfd's contents
 * @l:		output: the snapshot and records (pointing into @mem)
 *
 * The pure part of journal_load(), for the fuzzer: every length and CRC.
 * Return: 0, JOURNAL_E_CORRUPT, or -ENOMEM.
 */
int journal_check(const uint8_t *mem, size_t n, struct journal_loaded *l);

/**
 * journal_load() - take the newest whole journal the store passed
 * @slot_a, @slot_b: the fds of the entries JOURNAL_NAME_A and _B (a memfd
 *		and a socket each, in any order; -1 where missing), not closed
 * @files, @n_files: "f<seq>" entries (seq, fd), of a version 1 journal
 *		(a store entry per record): moved into @l, closed there
 *
 * Counts the attempt in the journal's header (see above) before it
 * returns it.
 * Return: 0, JOURNAL_E_NONE, JOURNAL_E_CORRUPT, JOURNAL_E_CRASHED, or
 * negative errno.
 */
int journal_load(struct journal_loaded *l, const int slot_a[2], const int slot_b[2],
		 struct journal_file *files, size_t n_files);
void journal_loaded_deinit(struct journal_loaded *l);

/*
 * Read @r's fds through the map of @rec, or of the snapshot (NULL): its
 * numbers are the previous process's.
 */
void journal_loaded_use_map(struct journal_loaded *l, struct state_reader *r,
			    const struct journal_record *rec);
/*
 * The mark the previous process left on the socket @fd (a file a map gave):
 * JOURNAL_MARK_*, 0 if clean.
 */
uint8_t journal_loaded_mark(const struct journal_loaded *l, int fd);

/*
 * Whether @fd stands in for a file a record named and the slot's socket did
 * not hold: its peer is lost (closed after the replay).
 */
bool journal_loaded_lost(const struct journal_loaded *l, int fd);

/*
 * Parse "f<seq>" into *@seqp: whether @name is the name of a record's file
 * as a version 1 journal stored it (removed on sight).
 */
bool journal_file_name(const char *name, uint64_t *seqp);
