/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Global ordering under a randomized stress: P peers, some in their own processes, some as
 * threads of one process, multicast numbered messages to random overlapping destination sets
 * while receiving. Every peer logs what it sent and received, in order, into shared memory;
 * the parent then checks:
 *  - delivery: every message reaches each of its destinations exactly once, and nobody else;
 *  - per-sender FIFO: two messages of one sender arrive in send order at a common receiver;
 *  - consistency: any two receivers see their common messages in the same order;
 *  - causality: a message sent by X after X received m1 is ordered after m1 on every receiver
 *    that gets both (and transitively through chains of such sends, see check_causality()).
 * Node destructions take part: every peer owns E extra nodes that every peer holds, and
 * destroys them at random times; a destruction counts as a message from its owner to all
 * peers (its NODE_DESTROY notifications), under the same checks.
 * The seed is printed so that a failure can be replayed (argument: seed, cases run all).
 */

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>
#include "kmod-test.h"

enum {
	P = 8,			/* peers */
	P_PROCS = 4,		/* peers 0..P_PROCS-1 own a process each; the rest are threads */
	MAX_SEQ = 3000,		/* messages per sender, at most */
	LOG_CAP = MAX_SEQ * (P + 1),
	RUN_SECONDS = 8,	/* at least; and until every sender has sent MIN_SEQ */
	MIN_SEQ = 100,
	E = 4,			/* extra nodes per peer, destroyed during the run */
};

struct payload {
	uint32_t sender;
	uint32_t seq;
	uint32_t mask;		/* destination peers */
	uint32_t pad;
};

struct entry {
	uint32_t kind;		/* 1 = sent, 2 = received */
	uint32_t id;		/* sender * MAX_SEQ + seq */
	uint32_t mask;
	uint32_t pad;
};

struct shared {
	_Atomic int started;
	_Atomic int done_sending;
	_Atomic int failed;
	uint64_t handle[P][P];	/* handle[i][j]: peer i's handle of peer j's node */
	uint64_t node[P];	/* node[j]: peer j's own handle of its node */
	uint64_t eph[P][P][E];	/* eph[i][j][k]: peer i's handle of peer j's extra node k */
	_Atomic uint32_t eph_seq[P][E];	/* seq of the destruction of j's node k, +1 */
	uint32_t n_log[P];
	uint32_t n_sent[P];
	uint64_t seed;
	double stop_at;
	struct entry log[P][LOG_CAP];
};

static struct shared *sh;
static struct b1_peer *peers[P];

static void peer_log(int me, uint32_t kind, uint32_t id, uint32_t mask)
{
	if (sh->n_log[me] >= LOG_CAP)
		CHECK_FAIL("peer %d: log full", me);
	sh->log[me][sh->n_log[me]++] = (struct entry){ .kind = kind, .id = id, .mask = mask };
}

/* Receive everything queued; returns the number of messages taken. */
static int peer_drain(int me)
{
	struct b1_peer *p = peers[me];
	struct b1_msg m;
	struct payload pl;
	int n = 0, r;

	while ((r = b1_peer_recv(p, 0, &m)) == 0) {
		if (m.type == BUS1_MSG_NODE_DESTROY) {
			int j, k, found = 0;

			for (j = 0; j < P && !found; j++)
				for (k = 0; k < E && !found; k++)
					if (sh->eph[me][j][k] == m.destination) {
						uint32_t q = atomic_load(&sh->eph_seq[j][k]);

						if (!q)
							CHECK_FAIL("peer %d: destruction of %d's node %d "
								"before it was destroyed", me, j, k);
						peer_log(me, 2, j * MAX_SEQ + q - 1, (1u << P) - 1);
						found = 1;
					}
			if (!found)
				CHECK_FAIL("peer %d: NODE_DESTROY for unknown handle %llu", me,
					(unsigned long long)m.destination);
			++n;
			continue;
		}
		if (m.type != BUS1_MSG_DATA)
			CHECK_FAIL("peer %d: unexpected message type %llu", me,
				(unsigned long long)m.type);
		if (m.destination != sh->node[me])
			CHECK_FAIL("peer %d: message for %llu, own node %llu", me,
				(unsigned long long)m.destination,
				(unsigned long long)sh->node[me]);
		if (m.n_bytes != sizeof(pl))
			CHECK_FAIL("peer %d: message of %zu bytes", me, m.n_bytes);
		memcpy(&pl, m.data, sizeof(pl));
		if (pl.sender >= P || pl.seq >= MAX_SEQ || !(pl.mask & (1u << me)))
			CHECK_FAIL("peer %d: bad payload %u/%u/%x", me, pl.sender, pl.seq, pl.mask);
		peer_log(me, 2, pl.sender * MAX_SEQ + pl.seq, pl.mask);
		r = b1_peer_msg_release(p, &m);
		if (r < 0)
			CHECK_FAIL("peer %d: SLICE_RELEASE: %s", me, strerror(-r));
		++n;
	}
	if (r != -EAGAIN)
		CHECK_FAIL("peer %d: RECV: %s", me, strerror(-r));
	return n;
}

/* Per-peer xorshift64* (kt_rand() has one global state; peers may be threads). */
static uint64_t rnd(uint64_t *s)
{
	*s ^= *s >> 12;
	*s ^= *s << 25;
	*s ^= *s >> 27;
	return *s * 0x2545f4914f6cdd1dULL;
}

static void peer_run(int me)
{
	uint64_t state = (sh->seed ^ (0x9e3779b97f4a7c15ULL * (me + 1))) | 1;
	uint64_t dst[P];
	uint32_t seq = 0, n_destroyed = 0;

	atomic_fetch_add(&sh->started, 1);
	while (atomic_load(&sh->started) < P)
		sched_yield();

	/*
	 * A slow machine (the debug kernel beside other guests) sends less in RUN_SECONDS: it
	 * goes on until this sender has its share of the minimum, bounded by the case's alarm.
	 */
	while (seq < MAX_SEQ && (kt_now() < sh->stop_at || seq < MIN_SEQ) &&
	       !atomic_load(&sh->failed)) {
		uint64_t r = rnd(&state);

		if (r % 4 == 0) {
			peer_drain(me);
		} else if (r % 256 == 5 && n_destroyed < E) {
			/* Destroy one extra node: "sent" to every peer, the owner included. */
			uint32_t k = n_destroyed++;
			int ret;

			atomic_store(&sh->eph_seq[me][k], seq + 1);
			ret = b1_peer_nodes_destroy(peers[me], &sh->eph[me][me][k], 1);
			if (ret < 0)
				CHECK_FAIL("peer %d: NODES_DESTROY: %s", me, strerror(-ret));
			peer_log(me, 1, me * MAX_SEQ + seq, (1u << P) - 1);
			++seq;
		} else {
			struct payload pl = { .sender = me, .seq = seq };
			struct iovec v = { &pl, sizeof(pl) };
			size_t n = 0;
			int j, ret;

			/* A random non-empty set, often overlapping with everyone else's. */
			while (!pl.mask)
				pl.mask = (uint32_t)(rnd(&state) >> 17) & ((1u << P) - 1);
			for (j = 0; j < P; j++)
				if (pl.mask & (1u << j))
					dst[n++] = sh->handle[me][j];
			/* Logged after SEND returned: nothing else happens on this peer between. */
			ret = b1_peer_send(peers[me], 0, dst, n, NULL, &v, 1, NULL, 0, NULL, 0);
			if (ret == -EDQUOT || ret == -ENOSPC) {
				/* Everyone is root: the user's quota is shared. Make room. */
				peer_drain(me);
				sched_yield();
				continue;
			}
			if (ret < 0)
				CHECK_FAIL("peer %d: SEND: %s", me, strerror(-ret));
			peer_log(me, 1, me * MAX_SEQ + seq, pl.mask);
			++seq;
		}
		if (r % 64 == 1)
			sched_yield();
	}
	sh->n_sent[me] = seq;
	atomic_fetch_add(&sh->done_sending, 1);
	/* Keep receiving until every peer has stopped sending, then take the rest. */
	while (atomic_load(&sh->done_sending) < P) {
		if (!peer_drain(me))
			sched_yield();
	}
	peer_drain(me);
}

static void *thread_main(void *arg)
{
	peer_run((int)(intptr_t)arg);
	return NULL;
}

/*
 * The checks. Each returns false with a description in check_msg on the first violation; they
 * are also run on hand-made logs with known faults (test_checker) to prove they can fail.
 */
static char check_msg[256];
static bool check_verbose;

#define VIOLATION(...) do {							\
		snprintf(check_msg, sizeof(check_msg), __VA_ARGS__);		\
		return false;							\
	} while (0)

static int32_t *pos;	/* pos[r * P * MAX_SEQ + id]: index in r's receive order, or -1 */

#define POS(r, id) pos[(size_t)(r) * P * MAX_SEQ + (id)]

static bool check_delivery(void)
{
	int s, r;
	uint32_t i;

	for (r = 0; r < P; r++) {
		int32_t k = 0;

		for (i = 0; i < sh->n_log[r]; i++) {
			struct entry *e = &sh->log[r][i];

			if (e->kind != 2)
				continue;
			if (POS(r, e->id) >= 0)
				VIOLATION("peer %d received message %u/%u twice", r,
					   e->id / MAX_SEQ, e->id % MAX_SEQ);
			POS(r, e->id) = k++;
		}
	}
	for (s = 0; s < P; s++) {
		for (i = 0; i < sh->n_log[s]; i++) {
			struct entry *e = &sh->log[s][i];

			if (e->kind != 1)
				continue;
			for (r = 0; r < P; r++) {
				bool want = e->mask & (1u << r);

				if (want != (POS(r, e->id) >= 0))
					VIOLATION("message %d/%u to %x: peer %d %s", s,
						   e->id % MAX_SEQ, e->mask, r,
						   want ? "never got it" : "got it");
			}
		}
	}
	return true;
}

static bool check_fifo(void)
{
	int s, r;
	uint32_t q;

	for (r = 0; r < P; r++)
		for (s = 0; s < P; s++) {
			int32_t last = -1;

			for (q = 0; q < sh->n_sent[s]; q++) {
				int32_t p = POS(r, s * MAX_SEQ + q);

				if (p < 0)
					continue;
				if (p < last)
					VIOLATION("fifo: peer %d got %d's message %u before an earlier "
						   "one", r, s, q);
				last = p;
			}
		}
	return true;
}

static bool check_consistency(void)
{
	int r1, r2;
	uint32_t i;
	long pairs = 0;

	for (r1 = 0; r1 < P; r1++)
		for (r2 = 0; r2 < P; r2++) {
			int32_t last = -1;

			if (r1 == r2)
				continue;
			/* Walk r1's receive order; the common messages must rise in r2's order. */
			for (i = 0; i < sh->n_log[r1]; i++) {
				struct entry *e = &sh->log[r1][i];
				int32_t p;

				if (e->kind != 2)
					continue;
				p = POS(r2, e->id);
				if (p < 0)
					continue;
				if (p < last)
					VIOLATION("consistency: peers %d and %d disagree on the order "
						   "of message %u/%u", r1, r2, e->id / MAX_SEQ,
						   e->id % MAX_SEQ);
				last = p;
				++pairs;
			}
		}
	if (check_verbose)
		kt_log("consistency: %ld common deliveries compared", pairs);
	return true;
}

/*
 * Causality, transitively: vector clocks computed from the logs. vc(m)[s] is the number of
 * s's messages that happened before m or are m (Lamport's relation: program order on each peer,
 * plus "received before sending"). Every receiver R that got m must have got, before m, every
 * message it also received among those that happened before m.
 */
static uint32_t *vc;	/* vc[id * P + s] */
static bool *vc_known;	/* vc_known[id] */

#define VC(id, s) vc[(size_t)(id) * P + (s)]

static bool compute_vector_clocks(void)
{
	uint32_t idx[P] = { 0 }, cur[P][P];
	bool progress = true;
	int x, s;

	memset(cur, 0, sizeof(cur));
	while (progress) {
		progress = false;
		for (x = 0; x < P; x++) {
			while (idx[x] < sh->n_log[x]) {
				struct entry *e = &sh->log[x][idx[x]];

				if (e->kind == 2) {
					if (!vc_known[e->id])
						break;	/* its sender's log is behind */
					for (s = 0; s < P; s++)
						if (VC(e->id, s) > cur[x][s])
							cur[x][s] = VC(e->id, s);
				} else {
					cur[x][x] = e->id % MAX_SEQ + 1;
					for (s = 0; s < P; s++)
						VC(e->id, s) = cur[x][s];
					vc_known[e->id] = true;
				}
				++idx[x];
				progress = true;
			}
		}
	}
	for (x = 0; x < P; x++)
		if (idx[x] < sh->n_log[x])
			VIOLATION("peer %d received message %u/%u that was never sent", x,
				   sh->log[x][idx[x]].id / MAX_SEQ, sh->log[x][idx[x]].id % MAX_SEQ);
	return true;
}

static bool check_causality(void)
{
	/* pm[s][k]: the latest position on R of s's messages with seq < k (-1: none). */
	static int32_t pm[P][MAX_SEQ + 1];
	long checked = 0;
	uint32_t i, k;
	int r, s;

	if (!compute_vector_clocks())
		return false;
	for (r = 0; r < P; r++) {
		for (s = 0; s < P; s++) {
			pm[s][0] = -1;
			for (k = 0; k < MAX_SEQ; k++) {
				int32_t p = POS(r, s * MAX_SEQ + k);

				pm[s][k + 1] = p > pm[s][k] ? p : pm[s][k];
			}
		}
		for (i = 0; i < sh->n_log[r]; i++) {
			struct entry *e = &sh->log[r][i];
			uint32_t z = e->id / MAX_SEQ;
			int32_t p;

			if (e->kind != 2)
				continue;
			p = POS(r, e->id);
			for (s = 0; s < P; s++) {
				/* Before m: s's first VC(m)[s] messages, m itself excluded. */
				uint32_t n = VC(e->id, s) - (s == (int)z);

				if (pm[s][n] > p)
					VIOLATION("causality: peer %d got %u/%u before a message of %d "
						   "(seq < %u) that happened before it", r, z,
						   e->id % MAX_SEQ, s, n);
				++checked;
			}
		}
	}
	if (check_verbose)
		kt_log("causality: %ld (message, sender) clocks checked", checked);
	return true;
}

static bool run_checks(void)
{
	size_t n = (size_t)P * MAX_SEQ;
	bool ok;

	pos = malloc(sizeof(*pos) * n * P);
	vc = calloc(n * P, sizeof(*vc));
	vc_known = calloc(n, sizeof(*vc_known));
	CHECK(pos && vc && vc_known);
	memset(pos, 0xff, sizeof(*pos) * n * P);
	ok = check_delivery() && check_fifo() && check_consistency() && check_causality();
	free(pos);
	free(vc);
	free(vc_known);
	return ok;
}

/* Hand-made logs: the checks accept a correct history and catch each kind of fault. */
static void syn_send(int x, uint32_t seq, uint32_t mask)
{
	peer_log(x, 1, x * MAX_SEQ + seq, mask);
	if (sh->n_sent[x] < seq + 1)
		sh->n_sent[x] = seq + 1;
}

static void syn_recv(int r, int x, uint32_t seq, uint32_t mask)
{
	peer_log(r, 2, x * MAX_SEQ + seq, mask);
}

static void syn_reset(void)
{
	memset(sh->n_log, 0, sizeof(sh->n_log));
	memset(sh->n_sent, 0, sizeof(sh->n_sent));
}

static void syn_expect(bool good, const char *what)
{
	bool ok = run_checks();

	if (ok != good)
		CHECK_FAIL("checker on '%s': %s", what, ok ? "passed a faulty history" : check_msg);
	if (!good)
		kt_log("'%s' caught: %s", what, check_msg);
}

static void test_checker(void)
{
	sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	CHECK(sh != MAP_FAILED);

	/* Good: 0 -> {1,2}; 1 got it, then sent to {2}; 2 sees both in causal order. */
	syn_reset();
	syn_send(0, 0, 0x6);
	syn_recv(1, 0, 0, 0x6);
	syn_send(1, 0, 0x4);
	syn_recv(2, 0, 0, 0x6);
	syn_recv(2, 1, 0, 0x4);
	syn_expect(true, "correct history");

	/* Duplicate and loss. */
	syn_recv(2, 1, 0, 0x4);
	syn_expect(false, "duplicate");
	syn_reset();
	syn_send(0, 0, 0x6);
	syn_recv(1, 0, 0, 0x6);
	syn_expect(false, "loss");

	/* FIFO: 0 sends two to {1}, 1 gets them reversed. */
	syn_reset();
	syn_send(0, 0, 0x2);
	syn_send(0, 1, 0x2);
	syn_recv(1, 0, 1, 0x2);
	syn_recv(1, 0, 0, 0x2);
	syn_expect(false, "fifo");

	/* Consistency: 0 and 3 send to {1,2}; 1 and 2 disagree. */
	syn_reset();
	syn_send(0, 0, 0x6);
	syn_send(3, 0, 0x6);
	syn_recv(1, 0, 0, 0x6);
	syn_recv(1, 3, 0, 0x6);
	syn_recv(2, 3, 0, 0x6);
	syn_recv(2, 0, 0, 0x6);
	syn_expect(false, "consistency");

	/* Causality through a chain no single receiver sees: 0 -> {1,3}; 1 got it, sends to
	 * {2}; 2 got that, sends to {3}; 3 gets 2's message before 0's. */
	syn_reset();
	syn_send(0, 0, 0xa);
	syn_recv(1, 0, 0, 0xa);
	syn_send(1, 0, 0x4);
	syn_recv(2, 1, 0, 0x4);
	syn_send(2, 0, 0x8);
	syn_recv(3, 2, 0, 0x8);
	syn_recv(3, 0, 0, 0xa);
	syn_expect(false, "transitive causality");
	munmap(sh, sizeof(*sh));
}

static void test_stress(void)
{
	pid_t pids[P_PROCS];
	pthread_t th[P];
	int i, j, status;
	uint64_t total_sent = 0, total_recv = 0;
	double t0;

	sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	CHECK(sh != MAP_FAILED);
	sh->seed = getenv("KT_SEED") ? strtoull(getenv("KT_SEED"), NULL, 0) :
		   (uint64_t)(kt_now() * 1e6) ^ getpid();
	kt_log("seed %llu (replay with KT_SEED=%llu)", (unsigned long long)sh->seed,
	       (unsigned long long)sh->seed);

	for (i = 0; i < P; i++)
		peers[i] = kt_peer();
	for (j = 0; j < P; j++) {
		int k;

		for (k = 0; k < E; k++) {
			kt_node(peers[j], peers[j], &sh->eph[j][j][k], NULL);
			for (i = 0; i < P; i++) {
				uint64_t h = sh->eph[j][j][k];

				CHECK_OK(b1_peer_handle_transfer(peers[j], peers[i], &h,
								  &sh->eph[i][j][k]));
			}
		}
		kt_node(peers[j], peers[j], &sh->node[j], NULL);
		for (i = 0; i < P; i++) {
			uint64_t h = sh->node[j];

			CHECK_OK(b1_peer_handle_transfer(peers[j], peers[i], &h, &sh->handle[i][j]));
		}
	}

	t0 = kt_now();
	sh->stop_at = t0 + RUN_SECONDS;
	for (i = 0; i < P_PROCS; i++) {
		pids[i] = fork();
		CHECK(pids[i] >= 0);
		if (pids[i] == 0) {
			peer_run(i);
			_exit(0);
		}
	}
	for (i = P_PROCS; i < P; i++)
		CHECK_EQ(pthread_create(&th[i], NULL, thread_main, (void *)(intptr_t)i), 0);
	for (i = P_PROCS; i < P; i++)
		pthread_join(th[i], NULL);
	for (i = 0; i < P_PROCS; i++) {
		CHECK_EQ(waitpid(pids[i], &status, 0), pids[i]);
		if (status != 0)
			CHECK_FAIL("peer process %d failed (status 0x%x)", i, status);
	}
	for (i = 0; i < P; i++) {
		uint32_t k;

		total_sent += sh->n_sent[i];
		for (k = 0; k < sh->n_log[i]; k++)
			total_recv += sh->log[i][k].kind == 2;
	}
	{
		uint32_t n_destroy = 0, k;

		for (i = 0; i < P; i++)
			for (k = 0; k < E; k++)
				n_destroy += atomic_load(&sh->eph_seq[i][k]) != 0;
		kt_log("%llu multicasts (%u of them node destructions), %llu deliveries in %.1fs",
		       (unsigned long long)total_sent, n_destroy, (unsigned long long)total_recv,
		       kt_now() - t0);
	}
	CHECK(total_sent >= MIN_SEQ * P);

	check_verbose = true;
	if (!run_checks())
		CHECK_FAIL("%s (seed %llu)", check_msg, (unsigned long long)sh->seed);
	for (i = 0; i < P; i++)
		b1_peer_free(peers[i]);
}

static const struct kt_case cases[] = {
	KT_CASE(test_checker),
	KT_CASE_T(test_stress, 120),
};

int main(int argc, char **argv)
{
	return kt_main(cases, sizeof(cases) / sizeof(cases[0]), argc, argv);
}
