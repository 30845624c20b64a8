/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Per-user quotas: fill each one (messages, bytes, handles, fds) to its limit, get EDQUOT, see
 * that another user is unaffected, drain, and find every charge returned (PEER_QUERY's used_*
 * back to zero). Charges are lifted when the receiver dequeues (not on PEEK), on reset and on
 * disconnect.
 */

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>
#include "kmod-test.h"

static void expect_idle(struct bus1_peer *p)
{
	struct bus1_cmd_peer_query q;

	kt_query(p, &q);
	ASSERT_EQ(q.used_messages, 0);
	ASSERT_EQ(q.used_bytes, 0);
	ASSERT_EQ(q.used_handles, 0);
	ASSERT_EQ(q.used_fds, 0);
}

/* Drain @p's queue (releasing slices, closing fds); returns the number of messages. */
static size_t drain(struct bus1_peer *p, uint64_t flags)
{
	struct bus1_msg m;
	size_t n = 0;

	while (bus1_peer_recv(p, flags, &m) == 0) {
		bus1_msg_close_fds(&m);
		ASSERT_OK(bus1_peer_msg_release(p, &m));
		++n;
	}
	return n;
}

/* Send through @p from a child whose real uid is @uid: the task's user is charged. */
static int send_as_task(uid_t uid, struct bus1_peer *p, uint64_t dst)
{
	int status;
	pid_t pid = fork();

	ASSERT(pid >= 0);
	if (pid == 0) {
		int r;

		if (setresuid(uid, 0, 0) < 0)
			_exit(100);
		r = kt_send(p, dst, "t", 1);
		_exit(r < 0 ? -r : 0);
	}
	ASSERT_EQ(waitpid(pid, &status, 0), pid);
	ASSERT(WIFEXITED(status));
	ASSERT(WEXITSTATUS(status) < 100);
	return -WEXITSTATUS(status);
}

/*
 * Send one message to @owner's node @node from a peer opened by a child whose real uid is @uid
 * (quotas belong to the user who opened the peer); returns the child's SEND result.
 */
static int send_as(uid_t uid, struct bus1_peer *owner, uint64_t node)
{
	int status;
	pid_t pid = fork();

	ASSERT(pid >= 0);
	if (pid == 0) {
		struct bus1_peer *p;
		uint64_t h = node, d;
		int r;

		if (setresuid(uid, uid, 0) < 0 || bus1_peer_new(&p) < 0)
			_exit(100);
		/* The owner's fd is ours too: give the new peer a handle from there. */
		if (bus1_peer_handle_transfer(owner, p, &h, &d) < 0)
			_exit(101);
		r = kt_send(p, d, "u", 1);
		_exit(r < 0 ? -r : 0);
	}
	ASSERT_EQ(waitpid(pid, &status, 0), pid);
	ASSERT(WIFEXITED(status));
	ASSERT(WEXITSTATUS(status) < 100);
	return -WEXITSTATUS(status);
}

static void test_messages(void)
{
	struct bus1_peer *a = kt_peer(), *b = kt_peer(), *c = kt_peer();
	struct bus1_cmd_peer_query q;
	uint64_t na, b_na, nc, b_nc, dst[2];
	uint32_t errs[2];
	struct bus1_msg m;
	size_t i;

	kt_node(a, b, &na, &b_na);
	kt_node(c, b, &nc, &b_nc);
	expect_idle(b);
	kt_query(b, &q);
	for (i = 0; i < q.quota_messages; i++) {
		int r = kt_send(b, b_na, NULL, 0);

		if (r < 0)
			kt_fail("SEND %zu of %llu: %s", i + 1, (unsigned long long)q.quota_messages,
				strerror(-r));
	}
	kt_query(b, &q);
	ASSERT_EQ(q.used_messages, q.quota_messages);
	/* An empty message's slice counts 8 bytes (documented minimum). */
	ASSERT_EQ(q.used_bytes, 8 * q.quota_messages);
	ASSERT_EQ(kt_send(b, b_na, NULL, 0), -EDQUOT);
	/* To another receiver too: the quota is the user's, not the pair's. */
	ASSERT_EQ(kt_send(b, b_nc, NULL, 0), -EDQUOT);
	dst[0] = b_na;
	dst[1] = b_nc;
	ASSERT_ERR(bus1_peer_send(b, 0, dst, 2, errs, NULL, 0, NULL, 0, NULL, 0), EDQUOT);
	ASSERT(errs[0] == EDQUOT || errs[1] == EDQUOT);
	ASSERT_OK(bus1_peer_send(b, BUS1_SEND_FLAG_CONTINUE, dst, 2, errs, NULL, 0, NULL, 0,
				 NULL, 0));
	ASSERT_EQ(errs[0], EDQUOT);
	ASSERT_EQ(errs[1], EDQUOT);
	kt_recv_none(c);
	/* Another user is not affected. */
	ASSERT_EQ(send_as(4242, c, nc), 0);
	kt_recv(c, 0, &m);
	ASSERT_EQ(m.uid, 4242);
	ASSERT_OK(bus1_peer_msg_release(c, &m));
	/* The charge follows the sending task's real uid, not the peer's opener. */
	ASSERT_EQ(send_as_task(4243, b, b_nc), 0);
	kt_recv(c, 0, &m);
	ASSERT_EQ(m.uid, 4243);
	ASSERT_OK(bus1_peer_msg_release(c, &m));

	/* PEEK does not lift the charge; a dequeue does, one message at a time. */
	kt_recv(a, BUS1_RECV_FLAG_PEEK, &m);
	ASSERT_EQ(kt_send(b, b_na, NULL, 0), -EDQUOT);
	kt_recv(a, 0, &m);
	ASSERT_OK(bus1_peer_msg_release(a, &m));
	ASSERT_OK(kt_send(b, b_na, NULL, 0));
	ASSERT_EQ(kt_send(b, b_na, NULL, 0), -EDQUOT);
	ASSERT_EQ(drain(a, 0), q.quota_messages);
	expect_idle(b);
	bus1_peer_free(a);
	bus1_peer_free(b);
	bus1_peer_free(c);
}

static void test_bytes(void)
{
	struct bus1_peer *r[3], *b = kt_peer();
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
	ASSERT_EQ(ret, -EDQUOT);
	/* A slice of CHUNK bytes counts CHUNK: exactly quota / CHUNK messages fit. */
	ASSERT_EQ(sent, q.quota_bytes / CHUNK * CHUNK);
	kt_query(b, &q);
	ASSERT_EQ(q.used_bytes, sent);
	ASSERT_EQ(q.used_messages, k);
	/* Small messages may still fit; a big one does not. */
	ASSERT_EQ(kt_send(b, h[0], buf, CHUNK), -EDQUOT);
	for (i = 0; i < 3; i++)
		drain(r[i], 0);
	expect_idle(b);
	ASSERT_OK(kt_send(b, h[0], buf, CHUNK));
	drain(r[0], 0);
	expect_idle(b);
	for (i = 0; i < 3; i++)
		bus1_peer_free(r[i]);
	bus1_peer_free(b);
}

static void test_handles(void)
{
	struct bus1_peer *a = kt_peer(), *b = kt_peer();
	struct bus1_cmd_peer_query q;
	uint64_t na, b_na, *hs;
	uint64_t sent = 0, per;
	int ret = 0;
	size_t i, k;

	kt_node(a, b, &na, &b_na);
	kt_query(b, &q);
	per = q.max_handles;
	hs = calloc(per, sizeof(*hs));
	ASSERT(hs);
	for (i = 0; i < per; i++)
		hs[i] = b_na;
	for (k = 0; sent <= q.quota_handles && k < q.quota_messages; k++) {
		ret = bus1_peer_send(b, 0, &b_na, 1, NULL, NULL, 0, hs, per, NULL, 0);
		if (ret < 0)
			break;
		sent += per;
	}
	kt_log("EDQUOT after %llu handles in flight (quota %llu, %llu per message)",
	       (unsigned long long)sent, (unsigned long long)q.quota_handles,
	       (unsigned long long)per);
	ASSERT_EQ(ret, -EDQUOT);
	ASSERT(sent <= q.quota_handles);
	ASSERT(sent + per > q.quota_handles);
	kt_query(b, &q);
	ASSERT_EQ(q.used_handles, sent);
	/* A message without handles still goes. */
	ASSERT_OK(kt_send(b, b_na, NULL, 0));
	/* Up to the exact limit, then not one more. */
	if (q.quota_handles > sent) {
		ASSERT_OK(bus1_peer_send(b, 0, &b_na, 1, NULL, NULL, 0, hs,
					 q.quota_handles - sent, NULL, 0));
		ASSERT_ERR(bus1_peer_send(b, 0, &b_na, 1, NULL, NULL, 0, hs, 1, NULL, 0), EDQUOT);
	}
	drain(a, 0);
	expect_idle(b);
	free(hs);
	bus1_peer_free(a);
	bus1_peer_free(b);
}

static void test_fds(void)
{
	struct bus1_peer *a = kt_peer(), *b = kt_peer();
	struct bus1_cmd_peer_query q;
	uint64_t na, b_na, sent = 0, per;
	int *fds, fd, ret = 0;
	size_t i, k;

	kt_node(a, b, &na, &b_na);
	kt_query(b, &q);
	per = q.max_fds;
	fds = calloc(per, sizeof(*fds));
	ASSERT(fds);
	fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	ASSERT(fd >= 0);
	for (i = 0; i < per; i++)
		fds[i] = fd;
	for (k = 0; sent <= q.quota_fds && k < q.quota_messages; k++) {
		ret = bus1_peer_send(b, 0, &b_na, 1, NULL, NULL, 0, NULL, 0, fds, per);
		if (ret < 0)
			break;
		sent += per;
	}
	kt_log("EDQUOT after %llu fds in flight (quota %llu, %llu per message)",
	       (unsigned long long)sent, (unsigned long long)q.quota_fds,
	       (unsigned long long)per);
	ASSERT_EQ(ret, -EDQUOT);
	ASSERT(sent <= q.quota_fds);
	ASSERT(sent + per > q.quota_fds);
	kt_query(b, &q);
	ASSERT_EQ(q.used_fds, sent);
	ASSERT_OK(kt_send(b, b_na, NULL, 0));
	/* Declining the fds still lifts the charge (the files are dropped). */
	ASSERT_EQ(drain(a, BUS1_RECV_FLAG_NO_FDS), k + 1);
	expect_idle(b);
	free(fds);
	close(fd);
	bus1_peer_free(a);
	bus1_peer_free(b);
}

/* Charges come back when the receiver resets or goes away with messages queued. */
static void test_reset_and_close_return_charges(void)
{
	struct bus1_peer *a = kt_peer(), *b = kt_peer();
	struct bus1_cmd_peer_query q;
	uint64_t na, b_na, h[2];
	int fd = open("/dev/null", O_RDONLY | O_CLOEXEC), i;

	ASSERT(fd >= 0);
	kt_node(a, b, &na, &b_na);
	for (i = 0; i < 100; i++) {
		h[0] = h[1] = b_na;
		ASSERT_OK(bus1_peer_send(b, 0, &b_na, 1, NULL, &(struct iovec){ "0123456789", 10 }, 1,
					 h, 2, &fd, 1));
	}
	kt_query(b, &q);
	ASSERT_EQ(q.used_messages, 100);
	/* 10 bytes -> 16, two handles 16, one fd 4. */
	EXPECT_EQ(q.used_bytes, 100 * 36);
	ASSERT_EQ(q.used_handles, 200);
	ASSERT_EQ(q.used_fds, 100);
	ASSERT_OK(bus1_peer_reset(a));
	expect_idle(b);

	kt_node(a, b, &na, &b_na);
	for (i = 0; i < 100; i++) {
		h[0] = h[1] = b_na;
		ASSERT_OK(bus1_peer_send(b, 0, &b_na, 1, NULL, &(struct iovec){ "0123456789", 10 }, 1,
					 h, 2, &fd, 1));
	}
	bus1_peer_free(a);
	expect_idle(b);
	close(fd);
	bus1_peer_free(b);
}

/* A multicast is charged for what it delivers and refunded for what it does not. */
static void test_multicast_accounting(void)
{
	struct bus1_peer *r[3], *b = kt_peer(), *dead = kt_peer();
	struct bus1_cmd_peer_query q0, q1;
	uint64_t h[4];
	uint32_t errs[4];
	int i;

	for (i = 0; i < 3; i++) {
		r[i] = kt_peer();
		kt_node(r[i], b, NULL, &h[i]);
	}
	kt_node(dead, b, NULL, &h[3]);
	bus1_peer_free(dead);
	kt_query(b, &q0);
	ASSERT_OK(bus1_peer_send(b, BUS1_SEND_FLAG_CONTINUE, h, 4, errs,
				 &(struct iovec){ "0123456789", 10 }, 1, NULL, 0, NULL, 0));
	ASSERT_EQ(errs[3], EHOSTUNREACH);
	kt_query(b, &q1);
	ASSERT(q1.used_messages > q0.used_messages);
	/* A failed atomic multicast leaves nothing charged. */
	ASSERT_ERR(bus1_peer_send(b, 0, h, 4, errs, &(struct iovec){ "0123456789", 10 }, 1,
				  NULL, 0, NULL, 0), EHOSTUNREACH);
	kt_query(b, &q0);
	ASSERT_EQ(q0.used_messages, q1.used_messages);
	ASSERT_EQ(q0.used_bytes, q1.used_bytes);
	for (i = 0; i < 3; i++)
		ASSERT_EQ(drain(r[i], 0), 1);
	drain(b, 0);
	expect_idle(b);
	for (i = 0; i < 3; i++)
		bus1_peer_free(r[i]);
	bus1_peer_free(b);
}

static void write_param(const char *name, unsigned long long v)
{
	char path[128];
	FILE *f;

	snprintf(path, sizeof(path), "/sys/module/bus1/parameters/%s", name);
	f = fopen(path, "we");
	if (!f)
		kt_fail("%s: %m", path);
	fprintf(f, "%llu\n", v);
	if (fclose(f) != 0)
		kt_fail("writing %s: %m", path);
}

/* Module parameters change the limits for new peers and new charges. */
static void test_module_params(void)
{
	struct bus1_peer *a, *b;
	struct bus1_cmd_peer_query q0, q;
	uint64_t na, b_na;
	int i;

	a = kt_peer();
	kt_query(a, &q0);
	bus1_peer_free(a);
	write_param("quota_messages", 5);
	write_param("pool_size", 1 << 20);
	a = kt_peer();
	b = kt_peer();
	kt_query(a, &q);
	ASSERT_EQ(q.quota_messages, 5);
	ASSERT_EQ(q.pool_size, 1 << 20);
	kt_node(a, b, &na, &b_na);
	for (i = 0; i < 5; i++)
		ASSERT_OK(kt_send(b, b_na, "x", 1));
	ASSERT_EQ(kt_send(b, b_na, "x", 1), -EDQUOT);
	ASSERT_EQ(drain(a, 0), 5);
	/* Restore the defaults (this guest is used for nothing else afterwards, but still). */
	write_param("quota_messages", q0.quota_messages);
	write_param("pool_size", q0.pool_size);
	ASSERT_OK(kt_send(b, b_na, "x", 1));
	ASSERT_EQ(drain(a, 0), 1);
	expect_idle(b);
	bus1_peer_free(a);
	bus1_peer_free(b);
}

static const struct kt_case cases[] = {
	KT_CASE(test_messages),
	KT_CASE_T(test_bytes, 120),
	KT_CASE(test_handles),
	KT_CASE(test_fds),
	KT_CASE(test_reset_and_close_return_charges),
	KT_CASE(test_multicast_accounting),
	KT_CASE(test_module_params),
};

int main(int argc, char **argv)
{
	return kt_main(cases, sizeof(cases) / sizeof(cases[0]), argc, argv);
}
