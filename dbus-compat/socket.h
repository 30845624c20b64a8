/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/**
 * DOC: D-Bus socket connection
 *
 * A struct socket owns one connected, nonblocking stream socket (unix, or TCP
 * for tcp: and nonce-tcp: addresses, which carry no fds and no
 * credentials) and does
 * the byte-level work of a D-Bus connection: buffered reading with fd passing,
 * splitting the stream into D-Bus messages ("frames"), and a zero-copy write
 * queue. It has no event loop and never blocks. The contract with its owner:
 *
 * - Register socket_get_fd() with epoll. Always watch EPOLLIN (while the owner
 *   wants input); watch EPOLLOUT only while socket_wants_write() is true.
 * - On EPOLLIN call socket_dispatch_read() (one recvmsg per call, so one busy
 *   peer cannot starve the others), then take input out: during
 *   authentication with socket_peek_raw()/socket_consume_raw() (raw bytes for
 *   the SASL server), afterwards with socket_read_frame() until it returns
 *   SOCKET_E_AGAIN. socket_dispatch_read() reads nothing while a complete frame
 *   is still buffered, so input that the owner does not take is bounded.
 * - To send, fill a struct socket_entry and socket_queue() it; then either
 *   call socket_dispatch_write() right away (optimistic write) or wait for
 *   EPOLLOUT. After each call re-check socket_wants_write().
 * - socket_get_queued_bytes() is the owner's back-pressure signal (quota).
 * - Positive return codes (SOCKET_E_*) are conditions of the peer the owner
 *   handles (usually by disconnecting); negative errno values are local
 *   failures (ENOMEM, ...).
 *
 * Authentication phase, as test/unit/dbus-compat/test-sasl.c drives it:
 *
 *	r = socket_dispatch_read(sock);			// on EPOLLIN
 *	p = socket_peek_raw(sock, &n);
 *	r = sasl_server_feed(&sasl, p, n, &consumed);
 *	socket_consume_raw(sock, consumed);
 *	out = sasl_server_peek_output(&sasl, &n_out);
 *	socket_queue_copy(sock, out, n_out);
 *	sasl_server_consume_output(&sasl, n_out);
 *	socket_dispatch_write(sock);
 *	if (r == SASL_SERVER_DONE) {
 *		socket_start_framing(sock);
 *		while (!(r = socket_read_frame(sock, &frame)))	// bytes pipelined
 *			...;					// after BEGIN
 *	}
 *
 * Frames: a frame is one complete D-Bus message as raw bytes. Its size comes
 * from the 16-byte fixed header: 16 + fields length (offset 12) rounded up to
 * 8 + body length (offset 4), in the byte order named by byte 0 ('l' or 'B').
 * Frames larger than SOCKET_FRAME_MAX (the spec's 128 MiB), a protocol version
 * other than 1 and field arrays above 64 MiB are rejected before anything is
 * allocated for them. Other header contents are not validated here.
 *
 * Input memory: a socket with nothing buffered reads into a buffer shared by
 * all sockets of the thread, and frames are taken straight out of it; only a
 * remainder (an incomplete frame or SASL line) gets a buffer of the socket's
 * own (room for the rest of its frame and 16 KiB more to read on), freed as
 * soon as everything in it has been taken. So an idle connection holds no
 * input buffer. A frame larger than SOCKET_FRAME_LARGE is
 * received into a buffer of its own holding exactly that frame (allocated
 * whole up to 4 MiB once the header is in, beyond that growing with the data
 * that arrives), and socket_read_frame() hands that buffer out without a copy.
 * Consequently a pointer from socket_peek_raw() is valid only until the next
 * call into ANY socket of the thread, and a socket must be used by one thread
 * at a time (the shared buffer is per thread).
 *
 * File descriptors: every recvmsg() uses MSG_CMSG_CLOEXEC; received fds are
 * owned by the socket until handed out with a frame, and closed on every other
 * path (socket_free(), protocol errors). The kernel ends a read right after the
 * segment that carried fds, so fds received by one recvmsg() are attached to
 * the frame in which the bytes of that recvmsg() begin: a message's own fds,
 * sent with its first byte or with a later piece of it (dbus-daemon takes
 * them too), or fds that came with the next message's first byte when the
 * kernel glued that segment to the end of this one. Its owner takes each
 * message's UNIX_FDS from the front of the connection's stream of fds and
 * keeps the rest for the next messages, as dbus-daemon does
 * (broker/transport/connection.c). fds that arrive with bytes no frame claims (during
 * the authentication phase) are a protocol violation (SOCKET_E_PROTOCOL).
 * MSG_CTRUNC is a protocol violation too.
 *
 * Writing: queued entries reference the caller's memory (iovecs) and fds; the
 * socket never copies them and calls entry->release exactly once, when the
 * entry has been written completely or when it is dropped (socket_free()).
 * Several entries are written with one sendmsg() (up to IOV_MAX iovecs); an
 * entry with fds is written by a sendmsg() of its own, so its fds travel with
 * its first byte and no other message shares that segment (libdbus, GDBus and
 * sd-bus do the same: one sendmsg() per message); partial writes are resumed.
 *
 * Re-exec: socket_snapshot() copies what a socket holds in memory into plain
 * data, and socket_new_restored() rebuilds it around the same fd in the new
 * program image (see "Handover across a re-exec" below).
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>
#include "util/list.h"

/* Largest D-Bus message (spec: 128 MiB). */
#define SOCKET_FRAME_MAX (128U * 1024U * 1024U)
/* Size of the fixed part of a D-Bus message header. */
#define SOCKET_FRAME_HEADER 16U
/* Most fds one sendmsg()/recvmsg() can carry (kernel SCM_MAX_FD). */
#define SOCKET_FDS_MAX 253U
/*
 * Frames above this size are received into a buffer of their own, which
 * socket_read_frame() hands out without copying (the caller adopts it).
 */
#define SOCKET_FRAME_LARGE (128U * 1024U)
/* Largest amount of raw (pre-BEGIN) input buffered before reading stops. */
#define SOCKET_RAW_MAX (64U * 1024U)

enum {
	_SOCKET_E_SUCCESS,
	/* Nothing to do right now (no complete frame / would block). */
	SOCKET_E_AGAIN,
	/* The peer closed or reset the connection. */
	SOCKET_E_EOF,
	/* The byte stream cannot be D-Bus: bad byte order mark, frame too
	 * large, misplaced or truncated fds. Disconnect. */
	SOCKET_E_PROTOCOL,
	/* socket_queue(): the entry carries more than SOCKET_FDS_MAX fds. */
	SOCKET_E_TOO_MANY_FDS,
};

/**
 * struct socket_creds - peer credentials, read once at accept time
 * @have_creds:	the socket is a unix socket and the fields below are the
 *		kernel's; false on TCP: pid 0, uid and gid (uid_t)-1, nothing else
 * @pid, @uid, @gid:	SO_PEERCRED
 * @groups:	supplementary groups (SO_PEERGROUPS), NULL if unavailable
 * @n_groups:	number of entries in @groups
 * @label:	security label (SO_PEERSEC), NUL-terminated, NULL if absent
 * @pidfd:	a pidfd of the peer process: SO_PEERPIDFD, or where the kernel
 *		lacks it pidfd_open() of @pid right away; -1 if neither works
 *		(old kernel, or the peer is gone)
 * @pidfd_of_socket: @pidfd is SO_PEERPIDFD's: the socket gives the same
 *		process again (socket_peer_pidfd())
 */
/* The optional credentials a kernel refused with an unexpected error (socket_creds_query()). */
enum {
	SOCKET_CREDS_NO_LABEL = 1 << 0,		/* SO_PEERSEC */
	SOCKET_CREDS_NO_GROUPS = 1 << 1,	/* SO_PEERGROUPS */
	SOCKET_CREDS_NO_PIDFD = 1 << 2,		/* SO_PEERPIDFD */
};

struct socket_creds {
	bool have_creds;
	pid_t pid;
	uid_t uid;
	gid_t gid;
	gid_t *groups;
	size_t n_groups;
	bool groups_unknown;	/* SO_PEERGROUPS failed: @groups says nothing */
	char *label;
	int pidfd;
	bool pidfd_of_socket;
	unsigned int failed;	/* SOCKET_CREDS_NO_*: what failed, and why: */
	int failed_errno;	/* the first failure's errno */
};

/*
 * socket_peer_pidfd() - SO_PEERPIDFD of the connected unix socket @fd: a pidfd
 * of the process that connected (the one at connect(), not whoever holds the
 * socket now), or -1 with errno set (a kernel before 6.5: ENOPROTOOPT; that
 * process gone: ESRCH).
 */
int socket_peer_pidfd(int fd);

/**
 * socket_creds_query() - read the peer credentials of a connected socket
 * @creds:	output; release with socket_creds_deinit()
 * @fd:	a connected socket (unix or TCP)
 *
 * SO_PEERSEC, SO_PEERGROUPS and SO_PEERPIDFD are optional (absent on the
 * kernel or without an LSM); SO_PEERCRED is required on a unix socket. A
 * socket of another family (TCP) has no credentials (@have_creds false).
 * An optional one that fails otherwise (a kernel change, an LSM that
 * refuses) degrades the credentials, as dbus-daemon does: no label, groups
 * unknown (@groups_unknown), no pidfd, each noted in @failed. It never
 * fails the connection.
 *
 * Return: 0, or negative errno (SO_PEERCRED failed, -ENOMEM).
 */
int socket_creds_query(struct socket_creds *creds, int fd);
void socket_creds_deinit(struct socket_creds *creds);

/*
 * Move the credentials of @s into @creds (the caller releases them with
 * socket_creds_deinit()); socket_get_creds() then returns empty ones. For
 * an owner of the connection that outlives what it knows of the socket.
 */
struct socket;
void socket_take_creds(struct socket *s, struct socket_creds *creds);

/**
 * struct socket_frame - one complete D-Bus message read from the socket
 * @data:	the raw message bytes (malloc()ed, owned by the holder)
 * @n_data:	its size, == the frame size from the header
 * @fds:	fds that arrived with the message (malloc()ed), or NULL
 * @n_fds:	number of fds
 *
 * The holder owns @data and the fds; socket_frame_deinit() frees and closes
 * whatever is still set. Take ownership by stealing the pointers and setting
 * @n_fds to 0.
 */
struct socket_frame {
	void *data;
	size_t n_data;
	int *fds;
	size_t n_fds;
};

void socket_frame_deinit(struct socket_frame *frame);

/**
 * struct socket_entry - one item of the write queue
 * @link:	queue linkage (private to the socket while queued)
 * @iov:	data to send, in order (the array and the memory stay valid
 *		until @release is called)
 * @n_iov:	number of iovecs
 * @fds:	fds to send with the first byte (the socket duplicates nothing
 *		and closes nothing: the caller keeps ownership)
 * @n_fds:	number of fds, at most SOCKET_FDS_MAX
 * @release:	called once when the entry was fully written or dropped; may
 *		free the entry (and whatever it references), must not call into
 *		the socket
 * @userdata:	free for the caller
 * @n_written:	private: bytes of this entry already written
 * @n_total:	private: sum of the iovec lengths
 *
 * Embed it in the caller's per-destination object; a broadcast message is
 * then shared by many entries without copying.
 */
struct socket_entry {
	struct list_node link;
	const struct iovec *iov;
	size_t n_iov;
	const int *fds;
	size_t n_fds;
	void (*release)(struct socket_entry *entry);
	void *userdata;
	size_t n_written;
	size_t n_total;
};

struct socket;

/**
 * socket_frame_size() - size of a D-Bus message from its fixed header
 * @header:	the first SOCKET_FRAME_HEADER bytes of the message
 * @sizep:	output: total message size
 *
 * Return: 0, or SOCKET_E_PROTOCOL for an unknown byte order mark, a major
 * protocol version other than 1, a header field array above 64 MiB or a
 * total size above SOCKET_FRAME_MAX.
 */
int socket_frame_size(const uint8_t header[SOCKET_FRAME_HEADER], size_t *sizep);

/**
 * socket_new() - take over a connected stream socket (unix or TCP)
 * @socketp:	output
 * @fd:	the connection; owned by the socket from now on, even on failure
 *
 * Sets O_NONBLOCK and reads the peer credentials. The socket starts in raw
 * mode (authentication); see socket_start_framing().
 *
 * Return: 0, or negative errno.
 */
int socket_new(struct socket **socketp, int fd);

/**
 * socket_free() - close the socket
 * @socket:	socket or NULL
 *
 * Releases every queued write entry (calling ->release), closes all received
 * fds not yet handed out, and closes the connection.
 *
 * Return: NULL.
 */
struct socket *socket_free(struct socket *socket);

int socket_get_fd(const struct socket *socket);
const struct socket_creds *socket_get_creds(const struct socket *socket);

/**
 * socket_dispatch_read() - read once from the socket
 * @socket:	socket
 *
 * Performs at most one recvmsg() into the input buffer, unless the buffered
 * input is already enough (a complete frame in framing mode, SOCKET_RAW_MAX
 * bytes in raw mode), in which case it reads nothing.
 *
 * Return: 0 when bytes were read or there is nothing to read now;
 *         SOCKET_E_EOF when the peer closed (data read before remains
 *         available); SOCKET_E_PROTOCOL on truncated control data; negative
 *         errno on local failure.
 */
int socket_dispatch_read(struct socket *socket);

/**
 * socket_peek_raw() - buffered raw input (authentication phase)
 * @socket:	socket
 * @np:	output: number of bytes
 *
 * Works in both modes; in framing mode it shows the bytes not yet handed out
 * as frames (e.g. to check a message header against a size limit before the
 * whole message has arrived).
 *
 * Return: the buffered, not yet consumed bytes, valid until the next call
 * that modifies this socket or reads from any socket of the thread.
 */
const void *socket_peek_raw(const struct socket *socket, size_t *np);

/* Drop @n bytes (n <= peeked size) from the front of the raw input. */
void socket_consume_raw(struct socket *socket, size_t n);

/**
 * socket_start_framing() - switch from raw mode to message framing
 * @socket:	socket
 *
 * Bytes already buffered behind the consumed raw input are the first bytes of
 * the message stream and stay buffered.
 */
void socket_start_framing(struct socket *socket);

/**
 * socket_read_frame() - take the next complete message
 * @socket:	socket in framing mode
 * @frame:	output; owned by the caller on success
 *
 * A frame above SOCKET_FRAME_LARGE is handed out in the buffer it was
 * received into (no copy); smaller frames are copied into a new allocation
 * (socket_peek_frame() + socket_take_frame() into the caller's memory is the
 * cheaper way for those).
 *
 * Return: 0 with @frame filled; SOCKET_E_AGAIN if no complete frame is
 *         buffered (call socket_dispatch_read() when EPOLLIN fires);
 *         SOCKET_E_PROTOCOL if the stream is invalid (disconnect);
 *         -ENOMEM.
 */
int socket_read_frame(struct socket *socket, struct socket_frame *frame);

/**
 * socket_peek_frame() - size of the next complete message, without taking it
 * @socket:	socket in framing mode
 * @sizep:	output: frame size
 *
 * For callers that want the bytes in their own allocation (e.g. a struct
 * message from message_new_incoming()): peek, allocate, socket_take_frame().
 *
 * Return: 0, SOCKET_E_AGAIN, SOCKET_E_PROTOCOL (as socket_read_frame()).
 */
int socket_peek_frame(struct socket *socket, size_t *sizep);

/**
 * socket_take_frame() - copy out the frame reported by socket_peek_frame()
 * @socket:	socket
 * @dst:	room for the peeked size
 * @fdsp:	output: malloc()ed array of the frame's fds (caller owns them), or
 *		NULL when none
 * @n_fdsp:	output: number of fds
 *
 * Return: 0, SOCKET_E_AGAIN / SOCKET_E_PROTOCOL (as socket_peek_frame()), or
 * -ENOMEM (nothing taken).
 */
int socket_take_frame(struct socket *socket, void *dst, int **fdsp, size_t *n_fdsp);

/* Bytes buffered (raw or framing mode) and not yet handed out. */
size_t socket_get_buffered_bytes(const struct socket *socket);

/*
 * The last socket_dispatch_read() found the kernel's queue empty, or took
 * less than it had room for and no fds: the kernel had no more input, so
 * the owner can wait for the next EPOLLIN, also edge-triggered (new input
 * is a new edge). A read that ended at a segment carrying fds is not
 * drained: the kernel ends a read after one sendmsg()'s fds, whatever
 * follows. False after a call that did not read (a complete frame was
 * waiting).
 */
bool socket_is_drained(const struct socket *socket);

/**
 * socket_holds_fds() - whether received fds wait for the rest of their frame
 * @socket:	the socket
 *
 * After every complete frame has been taken, true if file descriptors that
 * arrived with the bytes of an incomplete frame are held (the peer sent the
 * start of a message carrying fds and has not sent the rest yet). The bus
 * bounds how long with pending_fd_timeout.
 */
bool socket_holds_fds(const struct socket *socket);

/**
 * socket_queue() - append an entry to the write queue
 * @socket:	socket
 * @entry:	filled-in entry; must not be queued elsewhere
 *
 * Never writes and never blocks. On success the socket calls
 * @entry->release exactly once later; on failure it is not called.
 *
 * Return: 0, or SOCKET_E_TOO_MANY_FDS.
 */
int socket_queue(struct socket *socket, struct socket_entry *entry);

/**
 * socket_queue_copy() - queue a copy of a small buffer (e.g. SASL replies)
 * @socket:	socket
 * @data:	bytes
 * @n:	number of bytes
 *
 * Return: 0 or -ENOMEM.
 */
int socket_queue_copy(struct socket *socket, const void *data, size_t n);

/**
 * socket_dispatch_write() - write as much of the queue as the kernel takes
 * @socket:	socket
 *
 * Return: 0 (queue empty, or the kernel buffer is full: wait for EPOLLOUT as
 *         socket_wants_write() says); SOCKET_E_EOF if the peer is gone
 *         (EPIPE/ECONNRESET); negative errno otherwise.
 */
int socket_dispatch_write(struct socket *socket);

/* The write queue is not empty: the owner should watch EPOLLOUT. */
bool socket_wants_write(const struct socket *socket);
/* Bytes queued and not yet written. */
size_t socket_get_queued_bytes(const struct socket *socket);
/* Number of fds queued and not yet written (their entries not yet started). */
size_t socket_get_queued_fds(const struct socket *socket);

/*
 * Handover across a re-exec. The bus can execve() itself in place without
 * dropping its clients: the connection fds survive the exec, but what a struct
 * socket holds in memory must be carried over by its owner. socket_snapshot()
 * copies that state into plain data (no serialization format: the owner writes
 * the fields out as it likes), and socket_new_restored() builds a socket from
 * it that behaves exactly as the original would have: the same buffered bytes
 * and fds for socket_dispatch_read(), socket_peek_raw(), socket_peek_frame()
 * and socket_take_frame() / socket_read_frame(), and the same remaining byte
 * stream for socket_dispatch_write(), each entry's fds on its first byte.
 *
 * Ownership:
 * - A snapshot's arrays and byte buffers are its own memory. Those from
 *   socket_snapshot() are malloc()ed, and socket_snapshot_deinit() frees them.
 *   socket_new_restored() only reads @snap, so the owner may equally fill one
 *   itself pointing into any memory (e.g. its serialized state) and release
 *   that as it pleases.
 * - The fd numbers in a snapshot are borrowed: socket_snapshot() dup()s
 *   nothing, and neither socket_snapshot() nor socket_snapshot_deinit() ever
 *   closes an fd. Taking a snapshot changes nothing in the socket: if the exec
 *   does not happen, drop the snapshot and go on with the socket.
 * - Input fds (@in_fds) are the socket's own; output fds (@out[].fds) are the
 *   queued entries' (the owner's, e.g. a message's). The owner makes every fd
 *   listed survive the exec (clear FD_CLOEXEC; received fds have it set).
 * - Output fds that already went out with the first byte of a partly written
 *   entry are not listed; the owner closes them (or lets the exec close them).
 * - socket_new_restored() takes over @fd and every fd number listed in @snap,
 *   from the call on and even when it fails (then it closes them): the socket
 *   closes an input fd when it is not handed out with a frame, an output fd
 *   when its entry has been written or dropped. So every number must be given
 *   to it exactly once: fds shared by entries of several sockets (one message
 *   queued for several peers) must be dup()ed by the owner for each socket but
 *   one before they are restored.
 * - Restored output entries are copies of the socket's own; the original
 *   entries' ->release callbacks are never called by the restored socket (in
 *   the old process they would have dropped the owner's references, which the
 *   exec dropped anyway).
 */

/**
 * struct socket_snapshot_fds - fds received with buffered input (one recvmsg())
 * @start:	first byte they arrived with, relative to the first buffered byte
 *		(0 when that read began with bytes already taken out)
 * @end:	end of the bytes of that read, relative as @start, <= @n_in
 * @fds:	the fd numbers (borrowed, see above)
 * @n_fds:	number of fds, 1..SOCKET_FDS_MAX
 */
struct socket_snapshot_fds {
	size_t start;
	size_t end;
	int *fds;
	size_t n_fds;
};

/**
 * struct socket_snapshot_entry - what is left to write of one queued entry
 * @data:	the bytes not yet written
 * @n_data:	their number, > 0
 * @fds:	the entry's fds (borrowed), only if none of it was written yet;
 *		else NULL (they went out with its first byte)
 * @n_fds:	number of fds, at most SOCKET_FDS_MAX
 */
struct socket_snapshot_entry {
	uint8_t *data;
	size_t n_data;
	int *fds;
	size_t n_fds;
};

/**
 * struct socket_snapshot - the in-memory state of a socket, as plain data
 * @framing:	socket_start_framing() was called (else raw/SASL mode)
 * @eof:	the peer's end of stream was seen (data before it stays readable)
 * @violation:	a protocol violation was reported (it stays reported)
 * @in:	the buffered input not yet taken: complete frames, an incomplete
 *		frame, or raw (SASL) bytes
 * @n_in:	number of bytes in @in
 * @in_fds:	fd batches received with @in and not yet handed out, in stream
 *		order; none when @n_in is 0
 * @n_in_fds:	number of batches
 * @out:	the write queue, in order; the first entry may be partly written
 * @n_out:	number of entries
 *
 * Not carried: the credentials (queried again from the fd) and the
 * socket_is_drained() hint (false on a restored socket: read once more).
 */
struct socket_snapshot {
	bool framing;
	bool eof;
	bool violation;
	uint8_t *in;
	size_t n_in;
	struct socket_snapshot_fds *in_fds;
	size_t n_in_fds;
	struct socket_snapshot_entry *out;
	size_t n_out;
};

/**
 * socket_snapshot() - copy the state of a socket for a re-exec
 * @socket:	socket (not modified)
 * @snap:	output; release with socket_snapshot_deinit()
 *
 * Copies the buffered input and what is left of every queued entry; lists the
 * fd numbers without duplicating them. Wherever the input lives (the thread's
 * shared buffer, a buffer of the socket's own, a large frame's buffer), the
 * snapshot holds a copy.
 *
 * Return: 0, or -ENOMEM (@snap is then empty).
 */
int socket_snapshot(const struct socket *socket, struct socket_snapshot *snap);

/**
 * socket_snapshot_deinit() - free the memory of a snapshot
 * @snap:	snapshot from socket_snapshot(), or zeroed
 *
 * Frees the arrays and buffers and zeroes @snap. Closes no fd.
 */
void socket_snapshot_deinit(struct socket_snapshot *snap);

/**
 * socket_new_restored() - take over a connection with a snapshot of its state
 * @socketp:	output
 * @fd:	the connection; owned by the socket from now on, even on failure
 * @snap:	the state of the connection's socket before the exec; only read
 *
 * Like socket_new() (O_NONBLOCK), but reads no credentials: socket_get_creds()
 * returns empty ones, as after socket_take_creds(): the owner carried those
 * the connection was accepted with. Then it restores
 * the mode, the input buffer with its fd batches and the write queue (as
 * entries of the socket's own, holding copies of the bytes). Every fd listed
 * in @snap is taken over (see the ownership rules above), even on failure.
 *
 * Return: 0, -EINVAL for a snapshot no socket can be in (fd batches outside
 * the input or out of order, more fd batches than a socket holds, fds without
 * bytes to travel with, more than SOCKET_FDS_MAX per batch or entry, a negative
 * fd), or another negative errno (as socket_new(), -ENOMEM).
 */
int socket_new_restored(struct socket **socketp, int fd, const struct socket_snapshot *snap);
