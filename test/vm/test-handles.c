/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Handle identity: a peer that gets a handle to a node it already holds gets the same id,
 * whether through HANDLE_TRANSFER or through messages; an owner gets its own id back; ids are
 * never reused; handles in messages are translated at RECV (a node destroyed in between reads
 * BUS1_HANDLE_INVALID); BUS1_HANDLE_CREATE inside a message creates a node.
 */

#include <unistd.h>
#include "kmod-test.h"

/* Send @n handles from @from to @dst (a node held by @from); return nothing, fail on error. */
static void send_handles(struct b1_peer *from, uint64_t dst, uint64_t *handles, size_t n)
{
	int r = b1_peer_send(from, 0, &dst, 1, NULL, NULL, 0, handles, n, NULL, 0);

	if (r < 0)
		CHECK_FAIL("SEND with %zu handles: %s", n, strerror(-r));
}

/* Receive one DATA message on @p (to node @node) carrying @n handles; copy them to @out. */
static void recv_handles(struct b1_peer *p, uint64_t node, uint64_t *out, size_t n)
{
	struct b1_msg m;

	kt_recv(p, 0, &m);
	CHECK_EQ(m.type, BUS1_MSG_DATA);
	CHECK_EQ(m.destination, node);
	CHECK_EQ(m.n_handles, n);
	CHECK_EQ(m.n_bytes, 0);
	memcpy(out, m.handles, n * sizeof(*out));
	CHECK_OK(b1_peer_msg_release(p, &m));
}

static void test_identity_transfer(void)
{
	struct b1_peer *a = kt_peer(), *b = kt_peer(), *c = kt_peer();
	uint64_t ha, hb, hb2, hc, h;

	kt_node(a, b, &ha, &hb);
	h = ha;
	CHECK_OK(b1_peer_handle_transfer(a, b, &h, &hb2));
	CHECK_EQ(h, ha);
	CHECK_EQ(hb2, hb);
	/* b -> c -> b: b's id is unchanged; c -> a: the owner's id. */
	h = hb;
	CHECK_OK(b1_peer_handle_transfer(b, c, &h, &hc));
	h = hc;
	CHECK_OK(b1_peer_handle_transfer(c, b, &h, &hb2));
	CHECK_EQ(hb2, hb);
	h = hc;
	CHECK_OK(b1_peer_handle_transfer(c, a, &h, &hb2));
	CHECK_EQ(hb2, ha);
	/* A second node gets different ids everywhere. */
	kt_node(a, b, &h, &hb2);
	CHECK_NE(h, ha);
	CHECK_NE(hb2, hb);
	b1_peer_free(a);
	b1_peer_free(b);
	b1_peer_free(c);
}

static void test_identity_messages(void)
{
	struct b1_peer *a = kt_peer(), *b = kt_peer(), *c = kt_peer();
	uint64_t na, a_nb, nb, b_nc, nc, c_na, hx, hxb[3], hxc, hxa, h, hb;

	/* Nodes: na (a's, held by c), nb (b's, held by a), nc (c's, held by b). */
	kt_node(b, a, &nb, &a_nb);
	kt_node(c, b, &nc, &b_nc);
	kt_node(a, c, &na, &c_na);
	/* a's node X travels a -> b twice in one message, then again in another. */
	kt_node(a, a, &hx, NULL);
	hxb[0] = hx;
	hxb[1] = hx;
	hxb[2] = a_nb;	/* b's own node comes back as b's own id */
	send_handles(a, a_nb, hxb, 3);
	/* The sender's array is unchanged (no CREATE in it). */
	CHECK_EQ(hxb[0], hx);
	recv_handles(b, nb, hxb, 3);
	CHECK_EQ(hxb[0], hxb[1]);
	CHECK_EQ(hxb[0] & BUS1_HANDLE_FLAG_REMOTE, BUS1_HANDLE_FLAG_REMOTE);
	CHECK_EQ(hxb[2], nb);
	hb = hxb[0];
	h = hx;
	send_handles(a, a_nb, &h, 1);
	recv_handles(b, nb, &h, 1);
	CHECK_EQ(h, hb);
	/* A transfer gives b the same id as the messages did. */
	h = hx;
	CHECK_OK(b1_peer_handle_transfer(a, b, &h, &hxb[1]));
	CHECK_EQ(hxb[1], hb);
	/* b -> c (by message) -> a (by message): a gets its own id. */
	h = hb;
	send_handles(b, b_nc, &h, 1);
	recv_handles(c, nc, &hxc, 1);
	h = hxc;
	send_handles(c, c_na, &h, 1);
	recv_handles(a, na, &hxa, 1);
	CHECK_EQ(hxa, hx);
	/* c -> b by transfer: b's id again. */
	h = hxc;
	CHECK_OK(b1_peer_handle_transfer(c, b, &h, &hxb[1]));
	CHECK_EQ(hxb[1], hb);
	b1_peer_free(a);
	b1_peer_free(b);
	b1_peer_free(c);
}

static void test_create_in_message(void)
{
	struct b1_peer *a = kt_peer(), *b = kt_peer();
	uint64_t nb, a_nb, hs[2], got[2];
	struct b1_msg m;

	kt_node(b, a, &nb, &a_nb);
	hs[0] = BUS1_HANDLE_CREATE;
	hs[1] = BUS1_HANDLE_CREATE;
	send_handles(a, a_nb, hs, 2);
	/* Both replaced by two new, different, local ids of a. */
	CHECK(hs[0] != BUS1_HANDLE_CREATE && hs[1] != BUS1_HANDLE_CREATE);
	CHECK_NE(hs[0], hs[1]);
	CHECK_EQ(hs[0] & (BUS1_HANDLE_FLAG_REMOTE | 1), 0);
	CHECK_EQ(hs[1] & (BUS1_HANDLE_FLAG_REMOTE | 1), 0);
	recv_handles(b, nb, got, 2);
	CHECK_NE(got[0], got[1]);
	/* b replies through the first: it reaches a on node hs[0]. */
	CHECK_OK(kt_send(b, got[0], "r", 1));
	kt_recv(a, 0, &m);
	CHECK_EQ(m.type, BUS1_MSG_DATA);
	CHECK_EQ(m.destination, hs[0]);
	CHECK_EQ(m.n_bytes, 1);
	CHECK_EQ(((const char *)m.data)[0], 'r');
	CHECK_OK(b1_peer_msg_release(a, &m));
	CHECK_OK(kt_send(b, got[1], "s", 1));
	kt_recv(a, 0, &m);
	CHECK_EQ(m.destination, hs[1]);
	CHECK_OK(b1_peer_msg_release(a, &m));
	b1_peer_free(a);
	b1_peer_free(b);
}

/* A handle whose node dies between SEND and RECV reads BUS1_HANDLE_INVALID. */
static void test_destroyed_in_flight(void)
{
	struct b1_peer *a = kt_peer(), *b = kt_peer();
	uint64_t nb, a_nb, hx, hy, hs[2], got[2];
	struct b1_msg m;

	kt_node(b, a, &nb, &a_nb);
	kt_node(a, a, &hx, NULL);
	kt_node(a, a, &hy, NULL);
	hs[0] = hx;
	hs[1] = hy;
	send_handles(a, a_nb, hs, 2);
	CHECK_OK(b1_peer_nodes_destroy(a, &hx, 1));
	recv_handles(b, nb, got, 2);
	CHECK_EQ(got[0], BUS1_HANDLE_INVALID);
	CHECK(got[1] != BUS1_HANDLE_INVALID);
	CHECK_OK(kt_send(b, got[1], NULL, 0));
	/* a's queue: the destruction notification of hx, then the message on hy. */
	kt_recv(a, 0, &m);
	CHECK_EQ(m.type, BUS1_MSG_NODE_DESTROY);
	CHECK_EQ(m.destination, hx);
	kt_recv(a, 0, &m);
	CHECK_EQ(m.type, BUS1_MSG_DATA);
	CHECK_EQ(m.destination, hy);
	CHECK_OK(b1_peer_msg_release(a, &m));
	kt_recv_none(a);
	/* b never held hx's node: no notification for it. */
	kt_recv_none(b);
	b1_peer_free(a);
	b1_peer_free(b);
}

/* Ids only grow and are never reused, across creations, releases and resets. */
static void test_ids_not_reused(void)
{
	struct b1_peer *a = kt_peer(), *b = kt_peer();
	uint64_t prev_a = 0, prev_b = 0, ha, hb;
	struct b1_msg m;
	int i;

	for (i = 0; i < 200; i++) {
		kt_node(a, b, &ha, &hb);
		CHECK(ha > prev_a);
		CHECK(hb > prev_b);
		prev_a = ha;
		prev_b = hb;
		if (i % 3 == 0) {
			CHECK_OK(b1_peer_handle_release(b, hb));
		} else {
			CHECK_OK(b1_peer_handle_release(a, ha));
			kt_recv(b, 0, &m);
			CHECK_EQ(m.type, BUS1_MSG_NODE_DESTROY);
			CHECK_EQ(m.destination, hb);
			CHECK_OK(b1_peer_handle_release(b, hb));
		}
		if (i == 100) {
			CHECK_OK(b1_peer_reset(a));
			CHECK_OK(b1_peer_reset(b));
		}
	}
	/* Drain whatever notifications the resets produced. */
	while (b1_peer_recv(b, 0, &m) == 0)
		CHECK_EQ(m.type, BUS1_MSG_NODE_DESTROY);
	b1_peer_free(a);
	b1_peer_free(b);
}

/* Many holders, many nodes: each (holder, node) pair has one id, stable over many transfers. */
static void test_identity_random(void)
{
	enum { N_PEERS = 5, N_NODES = 8 };
	struct b1_peer *p[N_PEERS];
	uint64_t ids[N_PEERS][N_NODES] = { { 0 } };
	int owner[N_NODES];
	int i, j, k;

	for (i = 0; i < N_PEERS; i++)
		p[i] = kt_peer();
	for (j = 0; j < N_NODES; j++) {
		owner[j] = j % N_PEERS;
		kt_node(p[owner[j]], p[owner[j]], &ids[owner[j]][j], NULL);
	}
	for (k = 0; k < 400; k++) {
		int src, dst;
		uint64_t h, d;

		j = kt_rand() % N_NODES;
		src = kt_rand() % N_PEERS;
		dst = kt_rand() % N_PEERS;
		if (!ids[src][j])
			continue;
		h = ids[src][j];
		CHECK_OK(b1_peer_handle_transfer(p[src], p[dst], &h, &d));
		CHECK_EQ(h, ids[src][j]);
		if (ids[dst][j])
			CHECK_EQ(d, ids[dst][j]);
		ids[dst][j] = d;
		/* Ids of different nodes in one peer differ. */
		for (i = 0; i < N_NODES; i++)
			if (i != j && ids[dst][i])
				CHECK_NE(ids[dst][i], d);
		CHECK_EQ(!!(d & BUS1_HANDLE_FLAG_REMOTE), dst != owner[j]);
	}
	for (i = 0; i < N_PEERS; i++)
		b1_peer_free(p[i]);
}

static const struct kt_case cases[] = {
	KT_CASE(test_identity_transfer),
	KT_CASE(test_identity_messages),
	KT_CASE(test_create_in_message),
	KT_CASE(test_destroyed_in_flight),
	KT_CASE(test_ids_not_reused),
	KT_CASE(test_identity_random),
};

int main(int argc, char **argv)
{
	return kt_main(cases, sizeof(cases) / sizeof(cases[0]), argc, argv);
}
