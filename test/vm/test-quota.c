/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Per-user quotas: fill each one (messages, bytes, handles, fds) to its limit, get EDQUOT, see
 * that another user is unaffected, drain, and find every charge returned (PEER_QUERY's used_*
 * back to zero). Charges are lifted when the receiver dequeues (not on PEEK), on reset and on
 * disconnect. test_cross_user_exhaustion: one user over each quota against a victim peer leaves
 * another user able to send to it and receive from it, and every counter returns to zero.
 * test_pool_share_rule and test_cross_user_bytes: a user other than a pool's owner may occupy at
 * most as many bytes of that pool as stay free (so at most half of what was free), then gets
 * EDQUOT; everybody else still finds room. test_debugfs_users: what each user holds is readable
 * by root in /sys/kernel/debug/bus1/users (and the object counters in .../objects), and by no one
 * else.
 */

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>
#include "kmod-test.h"

static void expect_idle(struct b1_peer *p)
{
	struct bus1_cmd_peer_query q;

	kt_query(p, &q);
	CHECK_EQ(q.used_messages, 0);
	CHECK_EQ(q.used_bytes, 0);
	CHECK_EQ(q.used_handles, 0);
	CHECK_EQ(q.used_fds, 0);
}

/* Drain @p's queue (releasing slices, closing fds); returns the number of messages. */
static size_t drain(struct b1_peer *p, uint64_t flags)
{
	struct b1_msg m;
	size_t n = 0;

	while (b1_peer_recv(p, flags, &m) == 0) {
		b1_msg_close_fds(&m);
		CHECK_OK(b1_peer_msg_release(p, &m));
		++n;
	}
	return n;
}

/* Send through @p from a child whose real uid is @uid: the task's user is charged. */
static int send_as_task(uid_t uid, struct b1_peer *p, uint64_t dst)
{
	int status;
	pid_t pid = fork();

	CHECK(pid >= 0);
	if (pid == 0) {
		int r;

		if (setresuid(uid, 0, 0) < 0)
			_exit(100);
		r = kt_send(p, dst, "t", 1);
		_exit(r < 0 ? -r : 0);
	}
	CHECK_EQ(waitpid(pid, &status, 0), pid);
	CHECK(WIFEXITED(status));
	CHECK(WEXITSTATUS(status) < 100);
	return -WEXITSTATUS(status);
}

/*
 * Send one message to @owner's node @node from a peer opened by a child whose real uid is @uid
 * (quotas belong to the user who opened the peer); returns the child's SEND result.
 */
static int send_as(uid_t uid, struct b1_peer *owner, uint64_t node)
{
	int status;
	pid_t pid = fork();

	CHECK(pid >= 0);
	if (pid == 0) {
		struct b1_peer *p;
		uint64_t h = node, d;
		int r;

		if (setresuid(uid, uid, 0) < 0 || b1_peer_new(&p) < 0)
			_exit(100);
		/* The owner's fd is ours too: give the new peer a handle from there. */
		if (b1_peer_handle_transfer(owner, p, &h, &d) < 0)
			_exit(101);
		r = kt_send(p, d, "u", 1);
		_exit(r < 0 ? -r : 0);
	}
	CHECK_EQ(waitpid(pid, &status, 0), pid);
	CHECK(WIFEXITED(status));
	CHECK(WEXITSTATUS(status) < 100);
	return -WEXITSTATUS(status);
}

static void test_messages(void)
{
	struct b1_peer *a = kt_peer(), *b = kt_peer(), *c = kt_peer();
	struct bus1_cmd_peer_query q;
	uint64_t na, b_na, nc, b_nc, dst[2];
	uint32_t errs[2];
	struct b1_msg m;
	size_t i;

	kt_node(a, b, &na, &b_na);
	kt_node(c, b, &nc, &b_nc);
	expect_idle(b);
	kt_query(b, &q);
	for (i = 0; i < q.quota_messages; i++) {
		int r = kt_send(b, b_na, NULL, 0);

		if (r < 0)
			CHECK_FAIL("SEND %zu of %llu: %s", i + 1, (unsigned long long)q.quota_messages,
				strerror(-r));
	}
	kt_query(b, &q);
	CHECK_EQ(q.used_messages, q.quota_messages);
	/* An empty message's slice counts 8 bytes (documented minimum). */
	CHECK_EQ(q.used_bytes, 8 * q.quota_messages);
	CHECK_EQ(kt_send(b, b_na, NULL, 0), -EDQUOT);
	/* To another receiver too: the quota is the user's, not the pair's. */
	CHECK_EQ(kt_send(b, b_nc, NULL, 0), -EDQUOT);
	dst[0] = b_na;
	dst[1] = b_nc;
	CHECK_ERR(b1_peer_send(b, 0, dst, 2, errs, NULL, 0, NULL, 0, NULL, 0), EDQUOT);
	CHECK(errs[0] == EDQUOT || errs[1] == EDQUOT);
	CHECK_OK(b1_peer_send(b, BUS1_SEND_FLAG_CONTINUE, dst, 2, errs, NULL, 0, NULL, 0,
			       NULL, 0));
	CHECK_EQ(errs[0], EDQUOT);
	CHECK_EQ(errs[1], EDQUOT);
	kt_recv_none(c);
	/* Another user is not affected. */
	CHECK_EQ(send_as(4242, c, nc), 0);
	kt_recv(c, 0, &m);
	CHECK_EQ(m.uid, 4242);
	CHECK_OK(b1_peer_msg_release(c, &m));
	/* The charge follows the sending task's real uid, not the peer's opener. */
	CHECK_EQ(send_as_task(4243, b, b_nc), 0);
	kt_recv(c, 0, &m);
	CHECK_EQ(m.uid, 4243);
	CHECK_OK(b1_peer_msg_release(c, &m));

	/* PEEK does not lift the charge; a dequeue does, one message at a time. */
	kt_recv(a, BUS1_RECV_FLAG_PEEK, &m);
	CHECK_EQ(kt_send(b, b_na, NULL, 0), -EDQUOT);
	kt_recv(a, 0, &m);
	CHECK_OK(b1_peer_msg_release(a, &m));
	CHECK_OK(kt_send(b, b_na, NULL, 0));
	CHECK_EQ(kt_send(b, b_na, NULL, 0), -EDQUOT);
	CHECK_EQ(drain(a, 0), q.quota_messages);
	expect_idle(b);
	b1_peer_free(a);
	b1_peer_free(b);
	b1_peer_free(c);
}

static void test_bytes(void)
{
	struct b1_peer *r[3], *b = kt_peer();
	struct bus1_cmd_peer_query q;
	uint64_t n[3], h[3];
	enum { CHUNK = 4 << 20 };
	static uint8_t buf[CHUNK];
	uint64_t sent = 0;
	int i, k, ret = 0;

	for (i = 0; i < 3; i++) {
		r[i] = kt_peer();
		kt_node(r[i], b, &n[i], &h[i]);
	}
	kt_query(b, &q);
	/* Spread over three pools so that the user quota, not one pool, is the limit. */
	for (k = 0; sent < 2 * q.quota_bytes; k++) {
		ret = kt_send(b, h[k % 3], buf, CHUNK);
		if (ret < 0)
			break;
		sent += CHUNK;
	}
	kt_log("EDQUOT after %llu MiB (quota %llu MiB)", (unsigned long long)sent >> 20,
	       (unsigned long long)q.quota_bytes >> 20);
	CHECK_EQ(ret, -EDQUOT);
	/* A slice of CHUNK bytes counts CHUNK: exactly quota / CHUNK messages fit. */
	CHECK_EQ(sent, q.quota_bytes / CHUNK * CHUNK);
	kt_query(b, &q);
	CHECK_EQ(q.used_bytes, sent);
	CHECK_EQ(q.used_messages, k);
	/* Small messages may still fit; a big one does not. */
	CHECK_EQ(kt_send(b, h[0], buf, CHUNK), -EDQUOT);
	for (i = 0; i < 3; i++)
		drain(r[i], 0);
	expect_idle(b);
	CHECK_OK(kt_send(b, h[0], buf, CHUNK));
	drain(r[0], 0);
	expect_idle(b);
	for (i = 0; i < 3; i++)
		b1_peer_free(r[i]);
	b1_peer_free(b);
}

static void test_handles(void)
{
	struct b1_peer *a = kt_peer(), *b = kt_peer();
	struct bus1_cmd_peer_query q;
	uint64_t na, b_na, *hs;
	uint64_t sent = 0, per;
	int ret = 0;
	size_t i, k;

	kt_node(a, b, &na, &b_na);
	kt_query(b, &q);
	per = q.max_handles;
	hs = calloc(per, sizeof(*hs));
	CHECK(hs);
	for (i = 0; i < per; i++)
		hs[i] = b_na;
	for (k = 0; sent <= q.quota_handles && k < q.quota_messages; k++) {
		ret = b1_peer_send(b, 0, &b_na, 1, NULL, NULL, 0, hs, per, NULL, 0);
		if (ret < 0)
			break;
		sent += per;
	}
	kt_log("EDQUOT after %llu handles in flight (quota %llu, %llu per message)",
	       (unsigned long long)sent, (unsigned long long)q.quota_handles,
	       (unsigned long long)per);
	CHECK_EQ(ret, -EDQUOT);
	CHECK(sent <= q.quota_handles);
	CHECK(sent + per > q.quota_handles);
	kt_query(b, &q);
	CHECK_EQ(q.used_handles, sent);
	/* A message without handles still goes. */
	CHECK_OK(kt_send(b, b_na, NULL, 0));
	/* Up to the exact limit, then not one more. */
	if (q.quota_handles > sent) {
		CHECK_OK(b1_peer_send(b, 0, &b_na, 1, NULL, NULL, 0, hs,
				       q.quota_handles - sent, NULL, 0));
		CHECK_ERR(b1_peer_send(b, 0, &b_na, 1, NULL, NULL, 0, hs, 1, NULL, 0), EDQUOT);
	}
	drain(a, 0);
	expect_idle(b);
	free(hs);
	b1_peer_free(a);
	b1_peer_free(b);
}

static void test_fds(void)
{
	struct b1_peer *a = kt_peer(), *b = kt_peer();
	struct bus1_cmd_peer_query q;
	uint64_t na, b_na, sent = 0, per;
	int *fds, fd, ret = 0;
	size_t i, k;

	kt_node(a, b, &na, &b_na);
	kt_query(b, &q);
	per = q.max_fds;
	fds = calloc(per, sizeof(*fds));
	CHECK(fds);
	fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	CHECK(fd >= 0);
	for (i = 0; i < per; i++)
		fds[i] = fd;
	for (k = 0; sent <= q.quota_fds && k < q.quota_messages; k++) {
		ret = b1_peer_send(b, 0, &b_na, 1, NULL, NULL, 0, NULL, 0, fds, per);
		if (ret < 0)
			break;
		sent += per;
	}
	kt_log("EDQUOT after %llu fds in flight (quota %llu, %llu per message)",
	       (unsigned long long)sent, (unsigned long long)q.quota_fds,
	       (unsigned long long)per);
	CHECK_EQ(ret, -EDQUOT);
	CHECK(sent <= q.quota_fds);
	CHECK(sent + per > q.quota_fds);
	kt_query(b, &q);
	CHECK_EQ(q.used_fds, sent);
	CHECK_OK(kt_send(b, b_na, NULL, 0));
	/* Declining the fds still lifts the charge (the files are dropped). */
	CHECK_EQ(drain(a, BUS1_RECV_FLAG_NO_FDS), k + 1);
	expect_idle(b);
	free(fds);
	close(fd);
	b1_peer_free(a);
	b1_peer_free(b);
}

/* Charges come back when the receiver resets or goes away with messages queued. */
static void test_reset_and_close_return_charges(void)
{
	struct b1_peer *a = kt_peer(), *b = kt_peer();
	struct bus1_cmd_peer_query q;
	uint64_t na, b_na, h[2];
	int fd = open("/dev/null", O_RDONLY | O_CLOEXEC), i;

	CHECK(fd >= 0);
	kt_node(a, b, &na, &b_na);
	for (i = 0; i < 100; i++) {
		h[0] = h[1] = b_na;
		CHECK_OK(b1_peer_send(b, 0, &b_na, 1, NULL, &(struct iovec){ "0123456789", 10 }, 1,
				       h, 2, &fd, 1));
	}
	kt_query(b, &q);
	CHECK_EQ(q.used_messages, 100);
	/* 10 bytes -> 16, two handles 16, one fd 4. */
	EXPECT_EQ(q.used_bytes, 100 * 36);
	CHECK_EQ(q.used_handles, 200);
	CHECK_EQ(q.used_fds, 100);
	CHECK_OK(b1_peer_reset(a));
	expect_idle(b);

	kt_node(a, b, &na, &b_na);
	for (i = 0; i < 100; i++) {
		h[0] = h[1] = b_na;
		CHECK_OK(b1_peer_send(b, 0, &b_na, 1, NULL, &(struct iovec){ "0123456789", 10 }, 1,
				       h, 2, &fd, 1));
	}
	b1_peer_free(a);
	expect_idle(b);
	close(fd);
	b1_peer_free(b);
}

/* A multicast is charged for what it delivers and refunded for what it does not. */
static void test_multicast_accounting(void)
{
	struct b1_peer *r[3], *b = kt_peer(), *dead = kt_peer();
	struct bus1_cmd_peer_query q0, q1;
	uint64_t h[4];
	uint32_t errs[4];
	int i;

	for (i = 0; i < 3; i++) {
		r[i] = kt_peer();
		kt_node(r[i], b, NULL, &h[i]);
	}
	kt_node(dead, b, NULL, &h[3]);
	b1_peer_free(dead);
	kt_query(b, &q0);
	CHECK_OK(b1_peer_send(b, BUS1_SEND_FLAG_CONTINUE, h, 4, errs,
			       &(struct iovec){ "0123456789", 10 }, 1, NULL, 0, NULL, 0));
	CHECK_EQ(errs[3], EHOSTUNREACH);
	kt_query(b, &q1);
	CHECK(q1.used_messages > q0.used_messages);
	/* A failed atomic multicast leaves nothing charged. */
	CHECK_ERR(b1_peer_send(b, 0, h, 4, errs, &(struct iovec){ "0123456789", 10 }, 1,
				NULL, 0, NULL, 0), EHOSTUNREACH);
	kt_query(b, &q0);
	CHECK_EQ(q0.used_messages, q1.used_messages);
	CHECK_EQ(q0.used_bytes, q1.used_bytes);
	for (i = 0; i < 3; i++)
		CHECK_EQ(drain(r[i], 0), 1);
	drain(b, 0);
	expect_idle(b);
	for (i = 0; i < 3; i++)
		b1_peer_free(r[i]);
	b1_peer_free(b);
}

/* ------------------------------------------------------------------ */
/*
 * One user exhausts a quota against a victim peer; another user still sends to that peer and
 * receives from it. Three uids act in forked children (setresuid): the victim's owner, the
 * attacker and a bystander. The peers are opened once by the parent and inherited (charges
 * follow the sending task's real uid, see test_messages), so every message below is charged to
 * the uid of the child that sends it, and PEER_QUERY in a child reports that uid's counters.
 */

enum { UID_VICTIM = 5101, UID_ATTACKER = 5102, UID_BYSTANDER = 5103 };

enum quota_kind { QUOTA_MESSAGES, QUOTA_BYTES, QUOTA_HANDLES, QUOTA_FDS };

static const char *const quota_names[] = { "messages", "bytes", "handles", "fds" };

struct arena {
	enum quota_kind kind;
	struct b1_peer *v, *a, *b;	/* victim, attacker's peer, bystander's peer */
	uint64_t a_to_v, b_to_v;	/* handles of the victim's node */
	uint64_t v_to_b;		/* the victim's handle of the bystander's node */
	int devnull;
};

/* Run @fn(@x) in a child whose real, effective and saved uid is @uid; it must exit 0. */
static void as_user(uid_t uid, void (*fn)(struct arena *), struct arena *x)
{
	int status;
	pid_t pid = fork();

	CHECK(pid >= 0);
	if (pid == 0) {
		if (setresuid(uid, uid, uid) < 0)
			CHECK_FAIL("setresuid(%u): %m", (unsigned int)uid);
		fn(x);
		_exit(0);
	}
	CHECK_EQ(waitpid(pid, &status, 0), pid);
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
		CHECK_FAIL("%s: the child running as uid %u failed", quota_names[x->kind],
			(unsigned int)uid);
}

enum { SMALL_BYTES = 4096, LARGE_BYTES = 4 << 20 };

/*
 * Send one message of the arena's kind from @p to @dst: @heavy uses as much of that resource
 * as one message may, otherwise one unit (one message, SMALL_BYTES, one handle, one fd).
 */
static int send_kind(struct arena *x, struct b1_peer *p, uint64_t dst, bool heavy)
{
	static uint8_t buf[LARGE_BYTES];
	struct bus1_cmd_peer_query q;
	uint64_t *hs;
	int *fds, r = -EINVAL;
	size_t i, n;

	kt_query(p, &q);
	switch (x->kind) {
	case QUOTA_MESSAGES:
		r = kt_send(p, dst, "m", 1);
		break;
	case QUOTA_BYTES:
		r = kt_send(p, dst, buf, heavy ? LARGE_BYTES : SMALL_BYTES);
		break;
	case QUOTA_HANDLES:
		n = heavy ? q.max_handles : 1;
		hs = calloc(n, sizeof(*hs));
		CHECK(hs);
		for (i = 0; i < n; i++)
			hs[i] = dst;
		r = b1_peer_send(p, 0, &dst, 1, NULL, NULL, 0, hs, n, NULL, 0);
		free(hs);
		break;
	case QUOTA_FDS:
		n = heavy ? q.max_fds : 1;
		fds = calloc(n, sizeof(*fds));
		CHECK(fds);
		for (i = 0; i < n; i++)
			fds[i] = x->devnull;
		r = b1_peer_send(p, 0, &dst, 1, NULL, NULL, 0, NULL, 0, fds, n);
		free(fds);
		break;
	default:
		break;
	}
	return r;
}

static uint64_t used_of(const struct bus1_cmd_peer_query *q, enum quota_kind kind)
{
	return kind == QUOTA_MESSAGES ? q->used_messages :
	       kind == QUOTA_BYTES    ? q->used_bytes :
	       kind == QUOTA_HANDLES  ? q->used_handles :
					q->used_fds;
}

static uint64_t quota_of(const struct bus1_cmd_peer_query *q, enum quota_kind kind)
{
	return kind == QUOTA_MESSAGES ? q->quota_messages :
	       kind == QUOTA_BYTES    ? q->quota_bytes :
	       kind == QUOTA_HANDLES  ? q->quota_handles :
					q->quota_fds;
}

static void attacker_floods(struct arena *x)
{
	struct bus1_cmd_peer_query q;
	uint64_t sent = 0;
	int r;

	expect_idle(x->a);
	/* big messages first, then single units to fill the quota up exactly */
	while ((r = send_kind(x, x->a, x->a_to_v, true)) == 0)
		sent++;
	CHECK_EQ(r, -EDQUOT);
	while ((r = send_kind(x, x->a, x->a_to_v, false)) == 0)
		sent++;
	kt_query(x->a, &q);
	kt_log("%s: the attacker got %s after %llu messages, %llu of %llu %s in flight",
	       quota_names[x->kind], strerror(-r), (unsigned long long)sent,
	       (unsigned long long)used_of(&q, x->kind),
	       (unsigned long long)quota_of(&q, x->kind), quota_names[x->kind]);
	CHECK_EQ(r, -EDQUOT);
	CHECK_EQ(q.used_messages, sent);
	if (x->kind == QUOTA_BYTES) {
		/*
		 * Not the user's quota but its share of the victim's (empty) pool is the limit:
		 * the share may not exceed what stays free, so half of the pool, to SMALL_BYTES.
		 */
		CHECK(used_of(&q, x->kind) < quota_of(&q, x->kind));
		CHECK(used_of(&q, x->kind) <= q.pool_size / 2);
		CHECK(used_of(&q, x->kind) + SMALL_BYTES > q.pool_size / 2);
	} else {
		CHECK_EQ(used_of(&q, x->kind), quota_of(&q, x->kind));
	}
}

static void bystander_sends(struct arena *x)
{
	struct bus1_cmd_peer_query q;
	int r;

	expect_idle(x->b);
	/* for bytes a big message: the other half of the victim's pool is there for others */
	r = send_kind(x, x->b, x->b_to_v, x->kind == QUOTA_BYTES);
	if (r < 0)
		CHECK_FAIL("%s: the bystander cannot send to the victim while the attacker is over "
			"quota: %s", quota_names[x->kind], strerror(-r));
	kt_query(x->b, &q);
	CHECK_EQ(q.used_messages, 1);
}

static void victim_answers(struct arena *x)
{
	expect_idle(x->v);
	CHECK_OK(kt_send(x->v, x->v_to_b, "answer", 6));
}

static void bystander_receives(struct arena *x)
{
	struct bus1_cmd_peer_query q;
	struct b1_msg m;

	kt_recv(x->b, 0, &m);
	CHECK_EQ(m.uid, UID_VICTIM);
	CHECK_EQ(m.n_bytes, 6);
	CHECK(!memcmp(m.data, "answer", 6));
	CHECK_OK(b1_peer_msg_release(x->b, &m));
	kt_recv_none(x->b);
	/* only the bystander's own message, still queued at the victim, is charged */
	kt_query(x->b, &q);
	CHECK_EQ(q.used_messages, 1);
}

/* Drain the victim's queue; returns the uid of the last message. */
static uint32_t victim_drain(struct arena *x, size_t *n_attacker, size_t *n_other)
{
	struct b1_msg m;
	uint32_t last = 0;

	*n_attacker = *n_other = 0;
	while (b1_peer_recv(x->v, 0, &m) == 0) {
		if (m.uid == UID_ATTACKER)
			++*n_attacker;
		else
			++*n_other;
		last = m.uid;
		b1_msg_close_fds(&m);
		CHECK_OK(b1_peer_msg_release(x->v, &m));
	}
	return last;
}

static void victim_drains_flood(struct arena *x)
{
	size_t n_attacker, n_other;

	/* everything the attacker queued, then (in send order) the bystander's message */
	CHECK_EQ(victim_drain(x, &n_attacker, &n_other), UID_BYSTANDER);
	CHECK(n_attacker > 0);
	CHECK_EQ(n_other, 1);
	expect_idle(x->v);
}

static void attacker_sends_again(struct arena *x)
{
	expect_idle(x->a);
	CHECK_OK(send_kind(x, x->a, x->a_to_v, false));
}

/* Bytes: the attacker's share of the victim's pool went with its slices, all of it is back. */
static void attacker_floods_again(struct arena *x)
{
	attacker_floods(x);
}

static void victim_drains_attacker(struct arena *x)
{
	size_t n_attacker, n_other;

	CHECK_EQ(victim_drain(x, &n_attacker, &n_other), UID_ATTACKER);
	CHECK(n_attacker > 0);
	CHECK_EQ(n_other, 0);
}

static void victim_drains_one(struct arena *x)
{
	size_t n_attacker, n_other;

	CHECK_EQ(victim_drain(x, &n_attacker, &n_other), UID_ATTACKER);
	CHECK_EQ(n_attacker, 1);
	CHECK_EQ(n_other, 0);
}

static void user_is_idle(struct arena *x)
{
	expect_idle(x->v);
}

static void cross_user(enum quota_kind kind)
{
	struct arena x = { .kind = kind };

	x.v = kt_peer();
	x.a = kt_peer();
	x.b = kt_peer();
	x.devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
	CHECK(x.devnull >= 0);
	kt_node(x.v, x.a, NULL, &x.a_to_v);
	kt_node(x.v, x.b, NULL, &x.b_to_v);
	kt_node(x.b, x.v, NULL, &x.v_to_b);

	as_user(UID_ATTACKER, attacker_floods, &x);
	as_user(UID_BYSTANDER, bystander_sends, &x);
	as_user(UID_VICTIM, victim_answers, &x);
	as_user(UID_BYSTANDER, bystander_receives, &x);
	as_user(UID_VICTIM, victim_drains_flood, &x);
	if (kind == QUOTA_BYTES) {
		as_user(UID_ATTACKER, attacker_floods_again, &x);
		as_user(UID_VICTIM, victim_drains_attacker, &x);
	} else {
		as_user(UID_ATTACKER, attacker_sends_again, &x);
		as_user(UID_VICTIM, victim_drains_one, &x);
	}
	/* every counter of every user is back to zero */
	as_user(UID_ATTACKER, user_is_idle, &x);
	as_user(UID_BYSTANDER, user_is_idle, &x);
	as_user(UID_VICTIM, user_is_idle, &x);
	expect_idle(x.v);

	close(x.devnull);
	b1_peer_free(x.a);
	b1_peer_free(x.b);
	b1_peer_free(x.v);
}

static void test_cross_user_exhaustion(void)
{
	cross_user(QUOTA_MESSAGES);
	cross_user(QUOTA_HANDLES);
	cross_user(QUOTA_FDS);
}

/*
 * The same for bytes. quota_bytes and pool_size are both 256 MiB, so a user's quota alone would
 * let it fill a victim's whole pool; its share of that pool stops it at half (EDQUOT), and the
 * bystander's SEND still fits. Heavy (two 128 MiB floods): run on its own, last in the meson test
 * 'kmod-batch-smp1', after the other cases of test-quota.
 */
static void test_cross_user_bytes(void)
{
	cross_user(QUOTA_BYTES);
}

static void write_param(const char *name, unsigned long long v);

struct flood_result {
	uint64_t n;
	int err;
};

/*
 * In a child whose real uid is @uid, send @size-byte messages from @p to @dst until one fails;
 * returns how many were sent and (in *@errp) the error.
 */
static uint64_t flood_as(uid_t uid, struct b1_peer *p, uint64_t dst, size_t size, int *errp)
{
	struct flood_result res = { 0, 0 };
	int pfd[2], status;
	pid_t pid;

	CHECK_OK(pipe2(pfd, O_CLOEXEC) < 0 ? -errno : 0);
	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		static uint8_t buf[SMALL_BYTES];

		if (size > sizeof(buf) || setresuid(uid, 0, 0) < 0)
			_exit(100);
		while ((res.err = kt_send(p, dst, buf, size)) == 0)
			res.n++;
		_exit(write(pfd[1], &res, sizeof(res)) == sizeof(res) ? 0 : 101);
	}
	close(pfd[1]);
	CHECK_EQ(waitpid(pid, &status, 0), pid);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	CHECK_EQ(read(pfd[0], &res, sizeof(res)), (ssize_t)sizeof(res));
	close(pfd[0]);
	*errp = res.err;
	return res.n;
}

/*
 * The share rule, exactly, on a 1 MiB pool owned by root: each foreign user in turn fills what
 * it may with SMALL_BYTES messages and gets EDQUOT with half of what was free; the owner's own
 * uid is not limited and fills the rest (ENOSPC). Once everything is received and released,
 * the shares are gone: a foreign user gets half of the pool again.
 */
static void test_pool_share_rule(void)
{
	enum { POOL = 1 << 20 };
	static uint8_t buf[SMALL_BYTES];
	struct b1_peer *v, *s;
	struct bus1_cmd_peer_query q0, q;
	uint64_t h, n, total = 0, avail = POOL;
	int i, err;

	v = kt_peer();
	kt_query(v, &q0);
	b1_peer_free(v);
	write_param("pool_size", POOL);
	v = kt_peer();
	write_param("pool_size", q0.pool_size);
	kt_query(v, &q);
	CHECK_EQ(q.pool_size, POOL);
	s = kt_peer();
	kt_node(v, s, NULL, &h);

	for (i = 0; i < 3; i++) {
		n = flood_as(6001 + i, s, h, SMALL_BYTES, &err);
		kt_log("uid %d: %llu KiB of %llu KiB free, then %s", 6001 + i,
		       (unsigned long long)(n * SMALL_BYTES) >> 10,
		       (unsigned long long)avail >> 10, strerror(-err));
		CHECK_EQ(err, -EDQUOT);
		CHECK_EQ(n * SMALL_BYTES, avail / 2);
		avail -= n * SMALL_BYTES;
		total += n;
	}
	/* the pool's own user is not limited by the rule, only by the pool */
	for (n = 0; (err = kt_send(s, h, buf, SMALL_BYTES)) == 0; n++)
		;
	CHECK_EQ(err, -ENOSPC);
	CHECK_EQ(n * SMALL_BYTES, avail);
	total += n;
	/* and a foreign user now finds the pool full, not its share exceeded */
	CHECK_EQ(flood_as(6001, s, h, SMALL_BYTES, &err), 0);
	CHECK_EQ(err, -ENOSPC);

	CHECK_EQ(drain(v, 0), total);
	expect_idle(s);
	n = flood_as(6002, s, h, SMALL_BYTES, &err);
	CHECK_EQ(err, -EDQUOT);
	CHECK_EQ(n * SMALL_BYTES, POOL / 2);
	/* a reset frees the unreceived slices and their share too */
	CHECK_OK(b1_peer_reset(v));
	kt_node(v, s, NULL, &h);
	CHECK_EQ(flood_as(6002, s, h, SMALL_BYTES, &err), n);
	CHECK_EQ(err, -EDQUOT);
	CHECK_EQ(drain(v, 0), n);
	expect_idle(s);
	b1_peer_free(s);
	b1_peer_free(v);
}

static void write_param(const char *name, unsigned long long v)
{
	char path[128];
	FILE *f;

	snprintf(path, sizeof(path), "/sys/module/bus1/parameters/%s", name);
	f = fopen(path, "we");
	if (!f)
		CHECK_FAIL("%s: %m", path);
	fprintf(f, "%llu\n", v);
	if (fclose(f) != 0)
		CHECK_FAIL("writing %s: %m", path);
}

/* Module parameters change the limits for new peers and new charges. */
static void test_module_params(void)
{
	struct b1_peer *a, *b;
	struct bus1_cmd_peer_query q0, q;
	uint64_t na, b_na;
	int i;

	a = kt_peer();
	kt_query(a, &q0);
	b1_peer_free(a);
	write_param("quota_messages", 5);
	write_param("pool_size", 1 << 20);
	a = kt_peer();
	b = kt_peer();
	kt_query(a, &q);
	CHECK_EQ(q.quota_messages, 5);
	CHECK_EQ(q.pool_size, 1 << 20);
	kt_node(a, b, &na, &b_na);
	for (i = 0; i < 5; i++)
		CHECK_OK(kt_send(b, b_na, "x", 1));
	CHECK_EQ(kt_send(b, b_na, "x", 1), -EDQUOT);
	CHECK_EQ(drain(a, 0), 5);
	/* Restore the defaults (this guest is used for nothing else afterwards, but still). */
	write_param("quota_messages", q0.quota_messages);
	write_param("pool_size", q0.pool_size);
	CHECK_OK(kt_send(b, b_na, "x", 1));
	CHECK_EQ(drain(a, 0), 1);
	expect_idle(b);
	b1_peer_free(a);
	b1_peer_free(b);
}

#define DEBUGFS_USERS "/sys/kernel/debug/bus1/users"
#define DEBUGFS_OBJECTS "/sys/kernel/debug/bus1/objects"

struct debugfs_user {
	long long peers, bytes, messages, handles, fds, objects;
};

/* The row of @uid in DEBUGFS_USERS, checking the header; false if it has none. */
static bool read_debugfs_user(uid_t uid, struct debugfs_user *u)
{
	char line[256];
	bool found = false;
	FILE *f = fopen(DEBUGFS_USERS, "re");

	if (!f)
		CHECK_FAIL("%s: %m", DEBUGFS_USERS);
	CHECK(fgets(line, sizeof(line), f));
	CHECK_EQ(strcmp(line, "uid peers bytes messages handles fds objects\n"), 0);
	while (fgets(line, sizeof(line), f)) {
		unsigned int row_uid;
		struct debugfs_user r;

		if (sscanf(line, "%u %lld %lld %lld %lld %lld %lld", &row_uid, &r.peers, &r.bytes,
			   &r.messages, &r.handles, &r.fds, &r.objects) != 7)
			CHECK_FAIL("%s: bad line '%s'", DEBUGFS_USERS, line);
		if (row_uid == uid) {
			CHECK(!found);
			*u = r;
			found = true;
		}
	}
	fclose(f);
	return found;
}

static long long read_debugfs_object(const char *name)
{
	char line[128], key[64];
	long long v, found = -1;
	FILE *f = fopen(DEBUGFS_OBJECTS, "re");

	if (!f)
		CHECK_FAIL("%s: %m", DEBUGFS_OBJECTS);
	while (fgets(line, sizeof(line), f)) {
		CHECK_EQ(sscanf(line, "%63s %lld", key, &v), 2);
		if (!strcmp(key, name))
			found = v;
	}
	fclose(f);
	CHECK(found >= 0);
	return found;
}

/* A user whose last peer and message are gone leaves the file (at once, or after a peer's last
 * reference is dropped elsewhere): a row that stays is a leaked reference. */
static void expect_no_debugfs_user(uid_t uid)
{
	double end = kt_now() + 2.0 * kt_time_factor();
	struct debugfs_user u;

	while (read_debugfs_user(uid, &u)) {
		CHECK_EQ(u.messages, 0);
		CHECK_EQ(u.bytes, 0);
		if (kt_now() > end)
			CHECK_FAIL("uid %u still has a row, %lld peers", uid, u.peers);
		usleep(10000);
	}
}

/*
 * The operator's view: a peer held open by uid 4250 and a message in flight from uid 4251 (whose
 * peer is gone) show in their rows, the charge leaves the row at the dequeue, and a user with
 * nothing left has no row. Only root reads the files.
 */
static void test_debugfs_users(void)
{
	struct b1_peer *a = kt_peer(), *b = kt_peer();
	struct debugfs_user u;
	uint64_t na, b_na;
	int ready[2], hold[2], status;
	pid_t pid;
	char c;

	kt_node(a, b, &na, &b_na);
	CHECK(read_debugfs_user(0, &u));
	CHECK(u.peers >= 2);
	/* a's node and handle, b's handle */
	CHECK(u.objects >= 3);
	CHECK(read_debugfs_object("peers") >= 2);
	CHECK(read_debugfs_object("nodes") >= 1);
	CHECK(!read_debugfs_user(4250, &u));

	CHECK_OK(pipe2(ready, O_CLOEXEC));
	CHECK_OK(pipe2(hold, O_CLOEXEC));
	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		struct b1_peer *p;

		close(ready[0]);
		close(hold[1]);
		if (setresuid(4250, 4250, 0) < 0 || b1_peer_new(&p) < 0)
			_exit(1);
		if (write(ready[1], "r", 1) != 1 || read(hold[0], &c, 1) < 0)
			_exit(1);
		_exit(0);
	}
	close(ready[1]);
	close(hold[0]);
	CHECK_EQ(read(ready[0], &c, 1), 1);
	CHECK(read_debugfs_user(4250, &u));
	CHECK_EQ(u.peers, 1);
	CHECK_EQ(u.messages, 0);
	close(hold[1]);
	CHECK_EQ(waitpid(pid, &status, 0), pid);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	close(ready[0]);

	/* Its peer closed with the child: the user goes with the peer's last reference. */
	expect_no_debugfs_user(4250);

	CHECK_EQ(send_as(4251, a, na), 0);
	CHECK(read_debugfs_user(4251, &u));
	CHECK_EQ(u.messages, 1);
	/* one byte of data: an 8-byte slice (PEER_QUERY's rule) */
	CHECK_EQ(u.bytes, 8);
	CHECK_EQ(u.fds, 0);
	CHECK_EQ(drain(a, 0), 1);
	expect_no_debugfs_user(4251);

	/* Root's only: a user's usage says what it does. */
	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		int fd;

		if (setresuid(4252, 4252, 4252) < 0)
			_exit(100);
		fd = open(DEBUGFS_USERS, O_RDONLY | O_CLOEXEC);
		_exit(fd < 0 ? errno : 0);
	}
	CHECK_EQ(waitpid(pid, &status, 0), pid);
	CHECK(WIFEXITED(status));
	CHECK_EQ(WEXITSTATUS(status), EACCES);

	b1_peer_free(a);
	b1_peer_free(b);
}

static const struct kt_case cases[] = {
	KT_CASE(test_messages),
	KT_CASE_T(test_bytes, 120),
	KT_CASE(test_handles),
	KT_CASE(test_fds),
	KT_CASE(test_reset_and_close_return_charges),
	KT_CASE(test_multicast_accounting),
	KT_CASE_T(test_cross_user_exhaustion, 200),
	KT_CASE(test_pool_share_rule),
	KT_CASE(test_module_params),
	KT_CASE(test_debugfs_users),
};

/* Heavy, run only when named (last in the meson test kmod-batch-smp1). */
static const struct kt_case heavy[] = {
	KT_CASE_T(test_cross_user_bytes, 200),
};

int main(int argc, char **argv)
{
	if (argc > 1 && !strcmp(argv[1], "test_cross_user_bytes"))
		return kt_main(heavy, 1, argc, argv);
	return kt_main(cases, sizeof(cases) / sizeof(cases[0]), argc, argv);
}
