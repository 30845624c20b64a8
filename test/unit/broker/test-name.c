/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Name registry: RequestName/ReleaseName decisions and event sequences as in
 * dbus-daemon 1.14 (bus/services.c), every flag combination.
 */

#include <stdio.h>
#include <string.h>
#include "broker/objects/name.h"
#include "dbus-compat/validate.h"
#include "check.h"

static char log_buf[4096];

static void on_event(void *userdata, const struct name_event *ev)
{
	char one[256];
	size_t n = strlen(log_buf);

	switch (ev->type) {
	case NAME_EVENT_OWNER_CHANGED:
		snprintf(one, sizeof(one), "OC(%s,%s,%s)", ev->name,
			 ev->old_owner ? ev->old_owner->unique_name : "",
			 ev->new_owner ? ev->new_owner->unique_name : "");
		break;
	case NAME_EVENT_LOST:
		CHECK(ev->old_owner);
		snprintf(one, sizeof(one), "LOST(%s,%s)", ev->name, ev->old_owner->unique_name);
		break;
	case NAME_EVENT_ACQUIRED:
		CHECK(ev->new_owner);
		snprintf(one, sizeof(one), "ACQ(%s,%s)", ev->name, ev->new_owner->unique_name);
		break;
	}
	snprintf(log_buf + n, sizeof(log_buf) - n, "%s%s", n ? " " : "", one);
}

static const char *take_log(void)
{
	static char copy[sizeof(log_buf)];

	strcpy(copy, log_buf);
	log_buf[0] = '\0';
	return copy;
}

/* The queue of @name as "u1 u2 ...", primary first; "" if no such name. */
static const char *queue_str(struct name_registry *reg, const char *str)
{
	static char buf[1024];
	struct name *name = name_registry_find(reg, str);
	struct name_ownership *o;
	size_t n = 0;

	buf[0] = '\0';
	if (!name)
		return buf;
	list_for_each_entry(o, &name->queue, name_link)
		n += snprintf(buf + n, sizeof(buf) - n, "%s%s", n ? " " : "",
			      o->owner->unique_name);
	return buf;
}

static uint32_t req(struct name_registry *reg, struct name_owner *o, const char *n, uint32_t f)
{
	uint32_t reply = 0;

	CHECK_EQ(name_registry_request(reg, o, n, f, &reply), 0);
	return reply;
}

static uint32_t rel(struct name_registry *reg, struct name_owner *o, const char *n)
{
	uint32_t reply = 0;

	CHECK_EQ(name_registry_release(reg, o, n, &reply), 0);
	return reply;
}

#define A NAME_FLAG_ALLOW_REPLACEMENT
#define R NAME_FLAG_REPLACE_EXISTING
#define D NAME_FLAG_DO_NOT_QUEUE

static void test_validation(void)
{
	static const char *const valid[] = {
		"a.b", "com.example.Foo", "_a.-b", "a-b.c_d.e9", ":1.2", ":", ":1", ":.1",
		"a.b0.c",
	};
	static const char *const invalid[] = {
		"", "a", ".a.b", "a.b.", "a..b", "1a.b", "a.1b", "a b.c", "a.b/c", ":1..2",
		":1.", "a.b\xc3\xa9", "a.*",
	};
	char longname[300];

	for (size_t i = 0; i < sizeof(valid) / sizeof(valid[0]); i++)
		CHECK(validate_bus_name_lenient(valid[i], strlen(valid[i])));
	for (size_t i = 0; i < sizeof(invalid) / sizeof(invalid[0]); i++)
		CHECK(!validate_bus_name_lenient(invalid[i], strlen(invalid[i])));
	memset(longname, 'a', sizeof(longname));
	longname[1] = '.';
	longname[255] = '\0';
	CHECK(validate_bus_name_lenient(longname, strlen(longname)));
	longname[255] = 'a';
	longname[256] = '\0';
	CHECK(!validate_bus_name_lenient(longname, strlen(longname)));
}

static void test_errors(void)
{
	struct name_registry *reg;
	struct name_owner a;
	uint32_t reply = 0;

	CHECK_EQ(name_registry_new(&reg, on_event, NULL), 0);
	name_owner_init(&a, 1);
	CHECK_EQ(name_registry_add_unique(reg, &a), 0);
	take_log();
	CHECK_EQ(name_registry_request(reg, &a, "nodot", 0, &reply), NAME_E_INVALID);
	CHECK_EQ(name_registry_request(reg, &a, ":1.7", 0, &reply), NAME_E_UNIQUE);
	CHECK_EQ(name_registry_request(reg, &a, "org.freedesktop.DBus", 0, &reply),
		 NAME_E_RESERVED);
	CHECK_EQ(name_registry_release(reg, &a, "a..b", &reply), NAME_E_INVALID);
	CHECK_EQ(name_registry_release(reg, &a, ":1.1", &reply), NAME_E_UNIQUE);
	CHECK_EQ(name_registry_release(reg, &a, "org.freedesktop.DBus", &reply),
		 NAME_E_RESERVED);
	CHECK_STR(take_log(), "");
	CHECK_EQ(a.n_ownerships, 0);
	/* Flags beyond the three defined ones are ignored, as by dbus-daemon. */
	CHECK_EQ(req(reg, &a, "x.y", 0xfff8), NAME_REQUEST_PRIMARY_OWNER);
	CHECK_EQ(name_primary(name_registry_find(reg, "x.y"))->flags, 0);
	name_registry_remove_unique(reg, &a);
	name_owner_deinit(&a);
	take_log();
	name_registry_free(reg);
}

static void test_sequences(void)
{
	struct name_registry *reg;
	struct name_owner a, b, c;

	CHECK_EQ(name_registry_new(&reg, on_event, NULL), 0);
	name_owner_init(&a, 1);
	name_owner_init(&b, 2);
	name_owner_init(&c, 3);
	CHECK_STR(a.unique_name, ":1.1");

	/* Hello: unique names are announced like new names. */
	CHECK_EQ(name_registry_add_unique(reg, &a), 0);
	CHECK_STR(take_log(), "OC(:1.1,,:1.1) ACQ(:1.1,:1.1)");
	CHECK_EQ(name_registry_add_unique(reg, &b), 0);
	CHECK_EQ(name_registry_add_unique(reg, &c), 0);
	take_log();
	CHECK(name_registry_find_unique(reg, ":1.2") == &b);
	CHECK(name_registry_resolve(reg, ":1.3") == &c);
	CHECK(!name_registry_resolve(reg, ":1.4"));
	CHECK(!name_registry_resolve(reg, "org.freedesktop.DBus"));

	/* New name. */
	CHECK_EQ(req(reg, &a, "com.x", 0), NAME_REQUEST_PRIMARY_OWNER);
	CHECK_STR(take_log(), "OC(com.x,,:1.1) ACQ(com.x,:1.1)");
	CHECK(name_registry_resolve(reg, "com.x") == &a);
	CHECK(name_owner_is_primary(&a, "com.x"));

	/* Re-request by the primary owner: flags updated, no event. */
	CHECK_EQ(req(reg, &a, "com.x", D), NAME_REQUEST_ALREADY_OWNER);
	CHECK_EQ(name_primary(name_registry_find(reg, "com.x"))->flags, D);
	CHECK_EQ(req(reg, &a, "com.x", 0), NAME_REQUEST_ALREADY_OWNER);
	CHECK_STR(take_log(), "");

	/* Queueing, and DO_NOT_QUEUE dropping a waiter silently. */
	CHECK_EQ(req(reg, &b, "com.x", 0), NAME_REQUEST_IN_QUEUE);
	CHECK_STR(queue_str(reg, "com.x"), ":1.1 :1.2");
	CHECK(!name_owner_is_primary(&b, "com.x"));
	CHECK_EQ(req(reg, &b, "com.x", D), NAME_REQUEST_EXISTS);
	CHECK_STR(queue_str(reg, "com.x"), ":1.1");
	CHECK_EQ(b.n_ownerships, 0);
	/* REPLACE_EXISTING without ALLOW_REPLACEMENT on the primary: queued. */
	CHECK_EQ(req(reg, &b, "com.x", R), NAME_REQUEST_IN_QUEUE);
	CHECK_EQ(req(reg, &c, "com.x", 0), NAME_REQUEST_IN_QUEUE);
	CHECK_STR(queue_str(reg, "com.x"), ":1.1 :1.2 :1.3");
	/* A waiter re-requesting with REPLACE_EXISTING jumps to first in line. */
	CHECK_EQ(req(reg, &c, "com.x", R), NAME_REQUEST_IN_QUEUE);
	CHECK_STR(queue_str(reg, "com.x"), ":1.1 :1.3 :1.2");
	CHECK_STR(take_log(), "");

	/* Replacement: old primary queued behind the new one. */
	CHECK_EQ(req(reg, &a, "com.x", A), NAME_REQUEST_ALREADY_OWNER);
	CHECK_EQ(req(reg, &b, "com.x", R), NAME_REQUEST_PRIMARY_OWNER);
	CHECK_STR(take_log(), "LOST(com.x,:1.1) OC(com.x,:1.1,:1.2) ACQ(com.x,:1.2)");
	CHECK_STR(queue_str(reg, "com.x"), ":1.2 :1.1 :1.3");

	/* Replacement of an owner holding DO_NOT_QUEUE: it loses the name. */
	CHECK_EQ(req(reg, &b, "com.x", A | D), NAME_REQUEST_ALREADY_OWNER);
	CHECK_EQ(req(reg, &c, "com.x", R | D), NAME_REQUEST_PRIMARY_OWNER);
	CHECK_STR(take_log(), "LOST(com.x,:1.2) OC(com.x,:1.2,:1.3) ACQ(com.x,:1.3)");
	CHECK_STR(queue_str(reg, "com.x"), ":1.3 :1.1");
	CHECK_EQ(b.n_ownerships, 0);

	/* DO_NOT_QUEUE|REPLACE against a primary without ALLOW: EXISTS, and
	 * the waiter A is removed from the queue. */
	CHECK_EQ(req(reg, &a, "com.x", R | D), NAME_REQUEST_EXISTS);
	CHECK_STR(queue_str(reg, "com.x"), ":1.3");
	CHECK_STR(take_log(), "");

	/* ReleaseName codes. */
	CHECK_EQ(rel(reg, &a, "com.none"), NAME_RELEASE_NON_EXISTENT);
	CHECK_EQ(rel(reg, &a, "com.x"), NAME_RELEASE_NOT_OWNER);
	CHECK_EQ(req(reg, &a, "com.x", 0), NAME_REQUEST_IN_QUEUE);
	CHECK_EQ(req(reg, &b, "com.x", 0), NAME_REQUEST_IN_QUEUE);
	CHECK_EQ(rel(reg, &a, "com.x"), NAME_RELEASE_RELEASED); /* waiter: silent */
	CHECK_STR(take_log(), "");
	CHECK_STR(queue_str(reg, "com.x"), ":1.3 :1.2");
	CHECK_EQ(rel(reg, &c, "com.x"), NAME_RELEASE_RELEASED);
	CHECK_STR(take_log(), "LOST(com.x,:1.3) OC(com.x,:1.3,:1.2) ACQ(com.x,:1.2)");
	CHECK_EQ(rel(reg, &b, "com.x"), NAME_RELEASE_RELEASED);
	CHECK_STR(take_log(), "LOST(com.x,:1.2) OC(com.x,:1.2,)");
	CHECK(!name_registry_find(reg, "com.x"));
	CHECK_EQ(reg->n_names, 0);
	CHECK_EQ(rel(reg, &b, "com.x"), NAME_RELEASE_NON_EXISTENT);

	/* Disconnect: names released newest first, then the unique name. */
	CHECK_EQ(req(reg, &a, "n.one", 0), NAME_REQUEST_PRIMARY_OWNER);
	CHECK_EQ(req(reg, &a, "n.two", 0), NAME_REQUEST_PRIMARY_OWNER);
	CHECK_EQ(req(reg, &b, "n.three", 0), NAME_REQUEST_PRIMARY_OWNER);
	CHECK_EQ(req(reg, &a, "n.three", 0), NAME_REQUEST_IN_QUEUE);
	CHECK_EQ(req(reg, &c, "n.one", 0), NAME_REQUEST_IN_QUEUE);
	take_log();
	CHECK_EQ(a.n_ownerships, 3);
	name_registry_remove_unique(reg, &a);
	CHECK_STR(take_log(), "LOST(n.two,:1.1) OC(n.two,:1.1,) "
			      "LOST(n.one,:1.1) OC(n.one,:1.1,:1.3) ACQ(n.one,:1.3) "
			      "LOST(:1.1,:1.1) OC(:1.1,:1.1,)");
	CHECK(!name_registry_find_unique(reg, ":1.1"));
	CHECK_STR(queue_str(reg, "n.three"), ":1.2");
	CHECK_EQ(a.n_ownerships, 0);
	name_owner_deinit(&a);

	/* ListNames helpers. */
	{
		size_t n_unique = 0;

		for (struct name_owner *o = name_registry_next_unique(reg, NULL); o;
		     o = name_registry_next_unique(reg, o))
			n_unique++;
		CHECK_EQ(n_unique, 2);
		CHECK_EQ(reg->n_names, 2);
	}

	name_registry_remove_unique(reg, &b);
	name_registry_remove_unique(reg, &c);
	take_log();
	name_owner_deinit(&b);
	name_owner_deinit(&c);
	CHECK_EQ(reg->n_names, 0);
	name_registry_free(reg);
}

/*
 * Every flag combination of the primary owner and of the requester, with the
 * requester absent from or waiting in the queue. Expected outcome from the
 * decision table in name.h (dbus-daemon's bus_registry_acquire_service()).
 */
static void test_all_flags(void)
{
	for (uint32_t pf = 0; pf < 8; pf++) {
		for (uint32_t rf = 0; rf < 8; rf++) {
			for (int queued = 0; queued < 2; queued++) {
				struct name_registry *reg;
				struct name_owner p, w, r;
				bool replace = (rf & R) && (pf & A);
				uint32_t reply;
				char exp[128];

				CHECK_EQ(name_registry_new(&reg, on_event, NULL), 0);
				name_owner_init(&p, 1);
				name_owner_init(&w, 2);
				name_owner_init(&r, 3);
				CHECK_EQ(req(reg, &p, "f.x", pf), NAME_REQUEST_PRIMARY_OWNER);
				CHECK_EQ(req(reg, &w, "f.x", 0), NAME_REQUEST_IN_QUEUE);
				if (queued)
					CHECK_EQ(req(reg, &r, "f.x", 0), NAME_REQUEST_IN_QUEUE);
				take_log();

				reply = req(reg, &r, "f.x", rf);
				if (replace) {
					CHECK_EQ(reply, NAME_REQUEST_PRIMARY_OWNER);
					CHECK_STR(take_log(),
						  "LOST(f.x,:1.1) OC(f.x,:1.1,:1.3) ACQ(f.x,:1.3)");
					CHECK_STR(queue_str(reg, "f.x"),
						  (pf & D) ? ":1.3 :1.2" : ":1.3 :1.1 :1.2");
					CHECK_EQ(p.n_ownerships, (pf & D) ? 0 : 1);
				} else if (rf & D) {
					CHECK_EQ(reply, NAME_REQUEST_EXISTS);
					CHECK_STR(take_log(), "");
					CHECK_STR(queue_str(reg, "f.x"), ":1.1 :1.2");
					CHECK_EQ(r.n_ownerships, 0);
				} else {
					CHECK_EQ(reply, NAME_REQUEST_IN_QUEUE);
					CHECK_STR(take_log(), "");
					snprintf(exp, sizeof(exp), "%s",
						 (rf & R) ? ":1.1 :1.3 :1.2" : ":1.1 :1.2 :1.3");
					CHECK_STR(queue_str(reg, "f.x"), exp);
				}
				/* The requester's latest flags are recorded. */
				if (r.n_ownerships) {
					struct name_ownership *o = list_first_entry(
						&r.ownerships, struct name_ownership, owner_link);
					CHECK_EQ(o->flags, rf);
				}
				name_registry_release_all(reg, &p);
				name_registry_release_all(reg, &w);
				name_registry_release_all(reg, &r);
				CHECK_EQ(reg->n_names, 0);
				take_log();
				name_registry_free(reg);
			}
		}
	}
}

static void test_many(void)
{
	enum { N = 2000 };
	static struct name_owner owners[N];
	struct name_registry *reg;
	char buf[64];

	CHECK_EQ(name_registry_new(&reg, NULL, NULL), 0);
	for (unsigned int i = 0; i < N; i++) {
		name_owner_init(&owners[i], i + 1);
		CHECK_EQ(name_registry_add_unique(reg, &owners[i]), 0);
	}
	CHECK_EQ(name_registry_add_unique(reg, &owners[5]), -EALREADY);
	for (unsigned int i = 0; i < N; i++) {
		snprintf(buf, sizeof(buf), "org.n%u.x", i % 500);
		req(reg, &owners[i], buf, (i % 3) ? 0 : A | R);
	}
	CHECK_EQ(reg->n_names, 500);
	for (unsigned int i = 0; i < N; i++) {
		snprintf(buf, sizeof(buf), ":1.%u", i + 1);
		CHECK(name_registry_find_unique(reg, buf) == &owners[i]);
	}
	for (unsigned int i = 0; i < N; i++)
		name_registry_remove_unique(reg, &owners[i]);
	CHECK_EQ(reg->n_names, 0);
	name_registry_free(reg);
}

/* Page through @reg from @from, @max at a time: the ids seen, in order, into @ids. */
static size_t page_all(struct name_registry *reg, uint64_t from, size_t max, uint64_t *ids,
		       size_t *pagesp)
{
	struct name_owner *page[64];
	uint64_t next = from;
	size_t n = 0, got;

	*pagesp = 0;
	do {
		got = name_registry_list_uniques(reg, next, page, max, &next);
		CHECK(got <= max);
		for (size_t i = 0; i < got; i++)
			ids[n++] = page[i]->id;
		++*pagesp;
		CHECK(*pagesp < 100000);
	} while (next);
	return n;
}

static void test_by_id(void)
{
	enum { N = 3000 };
	static struct name_owner owners[N];
	static uint64_t ids[N];
	struct name_owner *page[8];
	struct name_registry *reg;
	uint64_t next;
	size_t n, pages;

	CHECK_EQ(name_registry_new(&reg, NULL, NULL), 0);
	CHECK_EQ(name_registry_list_uniques(reg, 0, page, 8, &next), 0);
	CHECK_EQ(next, 0);
	/* Out of order (as a restore adds them): sorted for the first page. */
	for (unsigned int i = 0; i < N; i++) {
		name_owner_init(&owners[i], (i * 7919u) % N);
		CHECK_EQ(name_registry_add_unique(reg, &owners[i]), 0);
	}
	n = page_all(reg, 0, 7, ids, &pages);
	CHECK_EQ(n, N);
	for (size_t i = 0; i < n; i++)
		CHECK_EQ(ids[i], i);
	CHECK_EQ(pages, (N + 6) / 7);
	n = page_all(reg, 2990, 64, ids, &pages);
	CHECK_EQ(n, 10);
	CHECK_EQ(ids[0], 2990);
	CHECK_EQ(name_registry_list_uniques(reg, N, page, 8, &next), 0);
	CHECK_EQ(next, 0);

	/* A long run of holes: pages end early, nobody is skipped or seen twice. */
	for (unsigned int i = 0; i < N; i++)
		if (owners[i].id >= 100 && owners[i].id < 1400)
			name_registry_remove_unique(reg, &owners[i]);
	CHECK_EQ(name_registry_list_uniques(reg, 99, page, 2, &next), 1);
	CHECK_EQ(page[0]->id, 99);
	CHECK(next > 99 && next <= 1400);
	n = page_all(reg, 0, 5, ids, &pages);
	CHECK_EQ(n, N - 1300);
	for (size_t i = 1; i < n; i++)
		CHECK(ids[i] > ids[i - 1]);
	/* The holes outnumbered the owners once: compacted, still in order. */
	for (unsigned int i = 0; i < N; i++)
		if (owners[i].id >= 1400 && owners[i].id % 3)
			name_registry_remove_unique(reg, &owners[i]);
	CHECK(reg->n_by_id_holes <= reg->n_by_id - reg->n_by_id_holes);
	n = page_all(reg, 0, 3, ids, &pages);
	for (size_t i = 1; i < n; i++)
		CHECK(ids[i] > ids[i - 1]);
	/* Ids handed out in order (Hello) are appended. */
	for (unsigned int i = 0; i < N; i++)
		if (owners[i].registry)
			name_registry_remove_unique(reg, &owners[i]);
	for (unsigned int i = 0; i < N; i++) {
		name_owner_init(&owners[i], N + i);
		CHECK_EQ(name_registry_add_unique(reg, &owners[i]), 0);
	}
	CHECK(!reg->by_id_unsorted);
	n = page_all(reg, N + 10, 64, ids, &pages);
	CHECK_EQ(n, N - 10);
	CHECK_EQ(ids[0], N + 10);
	for (unsigned int i = 0; i < N; i++)
		name_registry_remove_unique(reg, &owners[i]);
	CHECK_EQ(name_registry_list_uniques(reg, 0, page, 8, &next), 0);
	CHECK_EQ(next, 0);
	name_registry_free(reg);
}

int main(void)
{
	test_validation();
	test_errors();
	test_sequences();
	test_all_flags();
	test_many();
	test_by_id();
	printf("name: ok\n");
	return 0;
}
