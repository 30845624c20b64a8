/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * test-hostile: the lifetime of nodes: NODE_RELEASE (node_release*), handles of
 * destroyed nodes in flight, pool_size (destroyed_in_flight, pool_size_param), a reset
 * racing node creation (flush_race).
 */

#include "hostile.h"

/* ------------------------------------------------------------------------------------------ */
/*
 * 5. BUS1_MSG_NODE_RELEASE: the owner learns when nobody else holds its node (and no message
 * carrying it is in flight).
 */

#define expect_release(_p, _node, _what) expect_release_at(__LINE__, _p, _node, _what)
static void expect_release_at(int line, struct hpeer *p, uint64_t node, const char *what)
{
	struct bus1_cmd_recv c;
	int r = hp_recv(p->fd, 0, &c);

	if (r < 0)
		CHECK_FAIL("line %d: %s: expected NODE_RELEASE of %llu, RECV: %s", line, what,
			(unsigned long long)node, strerror(-r));
	if (c.type != BUS1_MSG_NODE_RELEASE || c.destination != node)
		CHECK_FAIL("line %d: %s: expected NODE_RELEASE of %llu, got type %llu for %llu", line,
			what, (unsigned long long)node, (unsigned long long)c.type,
			(unsigned long long)c.destination);
	if (c.offset != BUS1_OFFSET_INVALID || c.n_bytes || c.n_handles || c.n_fds ||
	    c.uid != (uint32_t)-1 || c.gid != (uint32_t)-1 || c.pid || c.tid)
		CHECK_FAIL("line %d: %s: NODE_RELEASE with offset %llu, %llu/%llu/%llu bytes/handles/fds, uid %u gid %u pid %u tid %u",
			line, what, (unsigned long long)c.offset, (unsigned long long)c.n_bytes,
			(unsigned long long)c.n_handles, (unsigned long long)c.n_fds, c.uid, c.gid,
			c.pid, c.tid);
}

#define expect_data(_p, _node, _s) expect_data_at(__LINE__, _p, _node, _s)
static void expect_data_at(int line, struct hpeer *p, uint64_t node, const char *s)
{
	struct bus1_cmd_recv c;
	int r = hp_recv(p->fd, 0, &c);

	if (r < 0)
		CHECK_FAIL("line %d: expected the message \"%s\", RECV: %s", line, s, strerror(-r));
	if (c.type != BUS1_MSG_DATA || c.destination != node || c.n_bytes != strlen(s) ||
	    memcmp(hp_data(p, &c), s, c.n_bytes))
		CHECK_FAIL("line %d: expected the message \"%s\" to %llu, got type %llu to %llu (%llu bytes)",
			line, s, (unsigned long long)node, (unsigned long long)c.type,
			(unsigned long long)c.destination, (unsigned long long)c.n_bytes);
	hp_slice_release(p->fd, c.offset);
}

#define expect_type(_p, _type, _h) expect_type_at(__LINE__, _p, _type, _h)
static void expect_type_at(int line, struct hpeer *p, uint64_t type, uint64_t h)
{
	struct bus1_cmd_recv c;
	int r = hp_recv(p->fd, 0, &c);

	if (r < 0 || c.type != type || c.destination != h)
		CHECK_FAIL("line %d: expected type %llu for %llu, got r %d type %llu for %llu", line,
			(unsigned long long)type, (unsigned long long)h, r,
			(unsigned long long)c.type, (unsigned long long)c.destination);
	if (c.offset != BUS1_OFFSET_INVALID)
		hp_slice_release(p->fd, c.offset);
}

#define expect_empty(_p, _what) expect_empty_at(__LINE__, _p, _what)
static void expect_empty_at(int line, struct hpeer *p, const char *what)
{
	struct bus1_cmd_recv c;
	int r = hp_recv(p->fd, BUS1_RECV_FLAG_PEEK, &c);

	if (r != -EAGAIN)
		CHECK_FAIL("line %d: %s: expected an empty queue, got r %d type %llu for %llu", line,
			what, r, r ? 0ULL : (unsigned long long)c.type,
			r ? 0ULL : (unsigned long long)c.destination);
}

void node_release(void)
{
	struct hpeer a = hp_open(), b = hp_open(), c = hp_open(), b2;
	struct bus1_cmd_recv m;
	uint64_t n, n2, bn, bn2, cn, nc, a_nc, carry;
	int steps = 0;

	/* a node nobody else ever held: nothing */
	n = hp_node(&a, &a, NULL);
	expect_empty(&a, "a new node");
	CHECK_OK(hp_release(a.fd, n));
	/* releasing the owner's handle destroys the node: a NODE_DESTROY for that id (bus1.7) */
	expect_type(&a, BUS1_MSG_NODE_DESTROY, n);
	expect_empty(&a, "the owner released a node nobody else held");

	/* one holder releases */
	n = hp_node(&a, &b, &bn);
	expect_empty(&a, "B holds the node");
	CHECK_OK(hp_release(b.fd, bn));
	expect_release(&a, n, "B released");
	expect_empty(&a, "after the one NODE_RELEASE");
	steps++;

	/* re-acquired and released again: a second one */
	bn = hp_give(&a, n, &b);
	expect_empty(&a, "B holds the node again");
	CHECK_OK(hp_release(b.fd, bn));
	expect_release(&a, n, "B released the node a second time");
	steps++;

	/* B sends M1 to the node, then releases: M1, then RELEASE */
	bn = hp_give(&a, n, &b);
	CHECK_OK(hp_send1(b.fd, bn, "M1", 2, -1));
	CHECK_OK(hp_release(b.fd, bn));
	expect_data(&a, n, "M1");
	expect_release(&a, n, "B sent M1, then released");
	steps++;

	/* B releases, then sends M2 to another node of A: RELEASE, then M2 */
	bn = hp_give(&a, n, &b);
	n2 = hp_node(&a, &b, &bn2);
	CHECK_OK(hp_release(b.fd, bn));
	CHECK_OK(hp_send1(b.fd, bn2, "M2", 2, -1));
	expect_release(&a, n, "B released, then sent M2");
	expect_data(&a, n2, "M2");
	CHECK_OK(hp_release(b.fd, bn2));
	expect_release(&a, n2, "B released its handle of the second node");
	steps++;

	/* two holders: only after both released */
	bn = hp_give(&a, n, &b);
	cn = hp_give(&a, n, &c);
	CHECK_OK(hp_release(b.fd, bn));
	expect_empty(&a, "B released, C still holds");
	CHECK_OK(hp_release(c.fd, cn));
	expect_release(&a, n, "B and C released");
	steps++;

	/* in flight: A sends the node to C while B holds it; B releases; C receives, releases */
	nc = hp_node(&c, &a, &a_nc);
	bn = hp_give(&a, n, &b);
	carry = n;
	CHECK_OK(hp_send(a.fd, 0, &a_nc, 1, NULL, "carry", 5, &carry, 1, NULL, 0));
	CHECK_OK(hp_release(b.fd, bn));
	expect_empty(&a, "B released while a message carries the node to C");
	hp_recv_wait(&c, &m, 1000);
	CHECK_EQ(m.n_handles, 1);
	cn = hp_handles(&c, &m)[0];
	CHECK(cn != BUS1_HANDLE_INVALID);
	hp_slice_release(c.fd, m.offset);
	expect_empty(&a, "C received the handle");
	CHECK_OK(hp_release(c.fd, cn));
	expect_release(&a, n, "C received the carried handle and released it");
	(void)nc;
	steps++;

	/* the holder disconnects (close) */
	b2 = hp_open();
	bn = hp_give(&a, n, &b2);
	(void)bn;
	hp_close(&b2);
	expect_release(&a, n, "the holder closed its fd");
	steps++;

	/* the holder resets */
	bn = hp_give(&a, n, &b);
	{
		struct bus1_cmd_peer_reset rst = { 0 };

		CHECK_OK(xioctl(b.fd, BUS1_CMD_PEER_RESET, &rst));
	}
	expect_release(&a, n, "the holder reset");
	steps++;

	/* the owner releases its own handle: the node is destroyed, no RELEASE ever */
	bn = hp_give(&a, n, &b);
	CHECK_OK(hp_release(a.fd, n));
	expect_type(&a, BUS1_MSG_NODE_DESTROY, n);
	expect_type(&b, BUS1_MSG_NODE_DESTROY, bn);
	CHECK_OK(hp_release(b.fd, bn));
	expect_empty(&a, "the owner released (destroyed) the node, then B released");
	steps++;

	/* NODES_DESTROY, then the holder releases: no RELEASE */
	n = hp_node(&a, &b, &bn);
	CHECK_OK(hp_destroy(a.fd, n));
	expect_type(&a, BUS1_MSG_NODE_DESTROY, n);
	expect_type(&b, BUS1_MSG_NODE_DESTROY, bn);
	CHECK_OK(hp_release(b.fd, bn));
	expect_empty(&a, "NODES_DESTROY, then B released");
	steps++;

	REPORT("%d NODE_RELEASE scenarios as specified", steps);
	hp_close(&a);
	hp_close(&b);
	hp_close(&c);
}

/*
 * Inferred from the rule, not spelled out: the only reference left is a message in flight,
 * and that message is dropped unreceived (its receiver closes): nobody else can hold the node
 * any more, so the owner should learn it.
 */
void node_release_dropped(void)
{
	struct hpeer a = hp_open(), c = hp_open();
	bool got_destroy = false, got_release = false;
	struct bus1_cmd_recv m;
	uint64_t n, a_nc, carry;
	int i, r;

	n = hp_node(&a, &a, NULL);
	hp_node(&c, &a, &a_nc);
	carry = n;
	CHECK_OK(hp_send(a.fd, 0, &a_nc, 1, NULL, "carry", 5, &carry, 1, NULL, 0));
	expect_empty(&a, "a message carries the node to C");
	hp_close(&c);
	/* C's own node is gone too: A gets its NODE_DESTROY, in either order with the RELEASE */
	for (i = 0; i < 2; i++) {
		r = hp_recv(a.fd, 0, &m);
		if (r < 0)
			CHECK_FAIL("after C closed: expected NODE_DESTROY of %llu and NODE_RELEASE of %llu, entry %d: %s",
				(unsigned long long)a_nc, (unsigned long long)n, i + 1,
				strerror(-r));
		if (m.type == BUS1_MSG_NODE_DESTROY && m.destination == a_nc && !got_destroy)
			got_destroy = true;
		else if (m.type == BUS1_MSG_NODE_RELEASE && m.destination == n && !got_release)
			got_release = true;
		else
			CHECK_FAIL("after C closed: unexpected type %llu for %llu",
				(unsigned long long)m.type, (unsigned long long)m.destination);
	}
	expect_empty(&a, "after the NODE_DESTROY and the NODE_RELEASE");
	REPORT("a dropped in-flight message ends the hold: NODE_RELEASE received");
	hp_close(&a);
}

/* ------------------------------------------------------------------------------------------ */
/* 6. Translation of destroyed nodes; pool_size bounds. */

void destroyed_in_flight(void)
{
	struct hpeer o = hp_open(), s = hp_open(), r1 = hp_open(), r2 = hp_open();
	struct bus1_cmd_recv c;
	uint64_t n, s_n, r2_n, d[2], carry;

	n = hp_node(&o, &s, &s_n);
	r2_n = hp_give(&o, n, &r2);		/* R2 already holds the node, R1 does not */
	hp_node(&r1, &s, &d[0]);
	hp_node(&r2, &s, &d[1]);
	carry = s_n;
	CHECK_OK(hp_send(s.fd, 0, d, 2, NULL, "h", 1, &carry, 1, NULL, 0));
	CHECK_OK(hp_destroy(o.fd, n));

	hp_recv_wait(&r1, &c, 1000);
	CHECK_EQ(c.type, BUS1_MSG_DATA);
	CHECK_EQ(c.n_handles, 1);
	REPORT("receiver without a handle reads %#llx", (unsigned long long)hp_handles(&r1, &c)[0]);
	EXPECT_EQ(hp_handles(&r1, &c)[0], BUS1_HANDLE_INVALID);
	hp_slice_release(r1.fd, c.offset);
	expect_empty(&r1, "R1 never held the node: no notification");

	hp_recv_wait(&r2, &c, 1000);
	CHECK_EQ(c.type, BUS1_MSG_DATA);
	CHECK_EQ(c.n_handles, 1);
	REPORT("receiver holding handle %#llx reads %#llx", (unsigned long long)r2_n,
	       (unsigned long long)hp_handles(&r2, &c)[0]);
	EXPECT_EQ(hp_handles(&r2, &c)[0], r2_n);
	hp_slice_release(r2.fd, c.offset);
	/* the destruction was after the message */
	expect_type(&r2, BUS1_MSG_NODE_DESTROY, r2_n);
	hp_close(&o);
	hp_close(&s);
	hp_close(&r1);
	hp_close(&r2);
}

void pool_size_param(void)
{
	const char *path = PARAM_DIR "pool_size";
	struct bus1_cmd_peer_query q;
	long long orig, after_big, after_small = -1, restored;
	char buf[32];
	int r_big, r_small, r;
	struct hpeer p;
	size_t small_pool = 0;

	orig = kt_read_ll(path);
	CHECK(orig > 0);
	r_big = kt_write_str(path, "536870912");
	after_big = kt_read_ll(path);
	/* put it back at once, whatever happened */
	snprintf(buf, sizeof(buf), "%lld", orig);
	if (after_big != orig)
		CHECK_OK(kt_write_str(path, buf));
	r_small = kt_write_str(path, "1048576");
	if (r_small == 0) {
		after_small = kt_read_ll(path);
		p = hp_open();
		r = query(p.fd, &q);
		small_pool = r >= 0 ? q.pool_size : 0;
		hp_close(&p);
	}
	CHECK_OK(kt_write_str(path, buf));
	restored = kt_read_ll(path);

	REPORT("pool_size %lld; writing 536870912: %s, then it read %lld", orig,
	       r_big < 0 ? strerrorname_np(-r_big) : "accepted", after_big);
	REPORT("writing 1048576: %s, read %lld, a new peer's pool %zu; restored to %lld",
	       r_small < 0 ? strerrorname_np(-r_small) : "accepted", after_small, small_pool,
	       restored);
	CHECK(r_big == -EINVAL, "writing 512 MiB: expected EINVAL, got %s",
	      r_big < 0 ? strerrorname_np(-r_big) : "success");
	CHECK(after_big == orig, "after the refused write pool_size reads %lld (was %lld)",
	      after_big, orig);
	CHECK(r_small == 0 && after_small == 1048576 && small_pool == 1048576,
	      "1 MiB: write %d, reads %lld, new pool %zu", r_small, after_small, small_pool);
	CHECK(restored == orig, "pool_size not restored: %lld", restored);
}

/* ------------------------------------------------------------------------------------------ */
/*
 * 6. A reset racing node creation. One thread of a peer P keeps handing P a handle to another
 * peer's node and resetting P (the reset's release of that handle owes the other peer a
 * NODE_RELEASE), while a second thread keeps creating nodes of P (some handed to a third peer
 * R), sending to them and receiving. No node may end up freed without having been destroyed
 * (the kernel WARNs), and every holder of a node P owned must be told NODE_DESTROY by the
 * final reset at the latest. The WARNs are counted in the kernel log.
 */

enum { FR_SECONDS = 10, FR_MAX_GIVEN = 4096 };

static struct {
	struct hpeer p, q, r;
	uint64_t q_node;
	atomic_bool stop;
	unsigned long n_resets, n_creates, n_msgs, n_edquot, n_create_edquot;
	size_t n_given;
	uint64_t given[FR_MAX_GIVEN];	/* R's ids of P's nodes, ascending */
} fr;

static void *fr_resetter(void *arg)
{
	struct bus1_cmd_peer_reset reset = { 0 };
	unsigned long i;
	uint64_t h;
	int r;

	(void)arg;
	for (i = 0; !atomic_load(&fr.stop); i++) {
		h = fr.q_node;
		r = hp_transfer(fr.q.fd, &h, fr.p.fd, NULL);
		if (r < 0)
			CHECK_FAIL("HANDLE_TRANSFER(Q's node -> P): %s", strerror(-r));
		r = xioctl(fr.p.fd, BUS1_CMD_PEER_RESET, &reset);
		if (r < 0)
			CHECK_FAIL("PEER_RESET: %s", strerror(-r));
		/* the NODE_RELEASEs this owes Q */
		if (i % 256 == 255)
			hp_drain(&fr.q);
	}
	fr.n_resets = i;
	return NULL;
}

static void *fr_creator(void *arg)
{
	struct bus1_cmd_recv c;
	unsigned long i;
	uint64_t h, d;
	bool give;
	int r;

	(void)arg;
	for (i = 0; !atomic_load(&fr.stop); i++) {
		give = i % 8 == 0 && fr.n_given < FR_MAX_GIVEN;
		h = BUS1_HANDLE_CREATE;
		d = BUS1_HANDLE_INVALID;
		r = hp_transfer(fr.p.fd, &h, give ? fr.r.fd : fr.p.fd, &d);
		/* EHOSTUNREACH: a reset destroyed the new node before the destination got it */
		if (r == -EHOSTUNREACH)
			continue;
		if (r == -EDQUOT && !fr.n_create_edquot++) {
			struct bus1_cmd_peer_query q;

			query_objects(fr.p.fd, &q);
			REPORT("first CREATE EDQUOT after %lu: used_objects %llu used_messages %llu",
			       i, (unsigned long long)q.used_objects,
			       (unsigned long long)q.used_messages);
		}
		if (r == -EDQUOT)
			continue;
		if (r < 0)
			CHECK_FAIL("HANDLE_TRANSFER(CREATE): %s", strerror(-r));
		if (give)
			fr.given[fr.n_given++] = d;
		/* the reset may have destroyed the node or released the handle already */
		r = hp_send1(fr.p.fd, h, "ping", 4, -1);
		fr.n_edquot += r == -EDQUOT;
		if (r < 0 && r != -EHOSTUNREACH && r != -ENXIO && r != -EDQUOT)
			CHECK_FAIL("SEND to a new node: %s", strerror(-r));
		fr.n_msgs += r == 0;
		while ((r = hp_recv(fr.p.fd, 0, &c)) == 0) {
			if (c.offset == BUS1_OFFSET_INVALID)
				continue;
			r = hp_slice_release(fr.p.fd, c.offset);
			if (r < 0 && r != -ENXIO)	/* ENXIO: a reset freed it */
				CHECK_FAIL("SLICE_RELEASE: %s", strerror(-r));
		}
		if (r != -EAGAIN)
			CHECK_FAIL("RECV: %s", strerror(-r));
	}
	fr.n_creates = i;
	return NULL;
}

static void fr_run(void *arg, struct result *res)
{
	struct bus1_cmd_peer_reset reset = { 0 };
	struct bus1_cmd_peer_query q;
	struct bus1_cmd_recv c;
	pthread_t t1, t2;
	size_t n_told = 0, n_other = 0, n_twice = 0, lo, hi, mid;
	uint8_t *told;

	(void)arg;
	fr.p = hp_open();
	fr.q = hp_open();
	fr.r = hp_open();
	fr.q_node = hp_node(&fr.q, &fr.q, NULL);
	CHECK_OK(-pthread_create(&t1, NULL, fr_resetter, NULL));
	CHECK_OK(-pthread_create(&t2, NULL, fr_creator, NULL));
	sleep(FR_SECONDS);
	atomic_store(&fr.stop, true);
	pthread_join(t1, NULL);
	pthread_join(t2, NULL);

	/* every node P still owns is destroyed now: R must have heard of each one */
	CHECK_OK(xioctl(fr.p.fd, BUS1_CMD_PEER_RESET, &reset));
	hp_drain(&fr.q);
	query_objects(fr.p.fd, &q);
	REPORT("%lu SENDs, %lu failed with EDQUOT; after a reset and a drain: used_messages %llu",
	       fr.n_msgs, fr.n_edquot, (unsigned long long)q.used_messages);
	told = calloc(FR_MAX_GIVEN, 1);
	CHECK(told);
	while (hp_recv(fr.r.fd, 0, &c) == 0) {
		if (c.type != BUS1_MSG_NODE_DESTROY) {
			++n_other;
			if (c.offset != BUS1_OFFSET_INVALID)
				hp_slice_release(fr.r.fd, c.offset);
			continue;
		}
		for (lo = 0, hi = fr.n_given; lo < hi;) {
			mid = (lo + hi) / 2;
			if (fr.given[mid] < c.destination)
				lo = mid + 1;
			else
				hi = mid;
		}
		if (lo < fr.n_given && fr.given[lo] == c.destination) {
			n_twice += told[lo];
			told[lo] = 1;
		} else {
			++n_other;
		}
	}
	for (lo = 0; lo < fr.n_given; lo++)
		n_told += told[lo];
	free(told);
	res->v[0] = fr.n_resets;
	res->v[1] = fr.n_creates;
	res->v[2] = fr.n_given;
	res->v[3] = n_told;
	CHECK(n_other == 0 && n_twice == 0, "R got %zu unexpected entries, %zu duplicates",
	      n_other, n_twice);
	hp_close(&fr.p);
	hp_close(&fr.q);
	hp_close(&fr.r);
}

/* Kernel log records from @fd on: how many contain "WARNING:", how many of those @what. */
static size_t kmsg_warnings(int fd, const char *what, size_t *n_what)
{
	char rec[8192];
	size_t n = 0;
	ssize_t len;

	*n_what = 0;
	for (;;) {
		len = read(fd, rec, sizeof(rec) - 1);
		if (len < 0 && errno == EPIPE)	/* overwritten records: go on */
			continue;
		if (len <= 0)
			break;
		rec[len] = 0;
		if (strstr(rec, "WARNING:")) {
			++n;
			*n_what += strstr(rec, what) != NULL;
		}
	}
	return n;
}

void flush_race(void)
{
	size_t n_warn, n_node;
	struct job j;
	int kfd;

	/* only records from now on */
	kfd = open("/dev/kmsg", O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	CHECK(kfd >= 0);
	CHECK(lseek(kfd, 0, SEEK_END) >= 0);

	j = job_start(UID_A, fr_run, NULL);
	if (!job_wait(&j, (FR_SECONDS + 40) * 1000))
		CHECK_FAIL("the race did not end within %d s", FR_SECONDS + 40);

	n_warn = kmsg_warnings(kfd, "bus1_node_free", &n_node);
	close(kfd);
	REPORT("%d s as uid %d: %llu resets, %llu creations; %zu kernel WARNINGs (%zu in bus1_node_free); R was given %llu nodes, told NODE_DESTROY of %llu",
	       FR_SECONDS, UID_A, (unsigned long long)j.res.v[0], (unsigned long long)j.res.v[1],
	       n_warn, n_node, (unsigned long long)j.res.v[2], (unsigned long long)j.res.v[3]);
	CHECK(n_warn == 0, "%zu kernel WARNINGs during the race", n_warn);
	CHECK(j.res.v[3] == j.res.v[2], "%llu of R's %llu handles were never told NODE_DESTROY",
	      (unsigned long long)(j.res.v[2] - j.res.v[3]), (unsigned long long)j.res.v[2]);
	CHECK(j.res.v[0] > 0 && j.res.v[1] > 0, "the race did not run");
}
