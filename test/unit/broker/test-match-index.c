/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Randomized differential test: the match index must give exactly the set of
 * owners a brute-force evaluation of every rule gives, on random rule sets
 * (added and removed over time) and random messages.
 */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "broker/objects/match.h"
#include "broker/objects/name.h"
#include "random-rule.h"
#include "check.h"

#define N_CONN 12

static const char *const v_sender[] = { ":1.1", ":1.2", ":1.3", ":1.4", "com.a", "com.b",
					"com.c", "org.freedesktop.DBus" };
static const struct random_rule_odds odds = {
	.other_type = 4, .destination = 4, .eavesdrop = 4, .eavesdrop_false = 2, .max_argn = 3,
};

static struct name_registry *names;
static struct name_owner conn_names[N_CONN];
static struct match_owner conn_rules[N_CONN];

static void random_message(struct match_message *m)
{
	int r = rand();

	memset(m, 0, sizeof(*m));
	m->type = 1 + rand() % 4;
	if (rand() % 5 == 0)
		m->type = MATCH_TYPE_SIGNAL;
	m->sender = rand() % 6 ? &conn_names[rand() % N_CONN] : NULL;
	m->interface = (r & 1) ? PICK(v_iface) : NULL;
	m->member = (r & 2) ? PICK(v_member) : NULL;
	m->path = (r & 4) ? PICK(v_path) : NULL;
	if ((r & 8) && rand() % 3 == 0) {
		int d = rand() % (N_CONN + 1);

		if (d == N_CONN) {
			m->destination = rand() % 2 ? "org.freedesktop.DBus" : "com.unowned";
		} else {
			m->destination = rand() % 2 ? conn_names[d].unique_name : "com.a";
			m->recipient_names = &conn_names[d];
			m->recipient = &conn_rules[d];
		}
	}
	m->n_args = rand() % 5;
	for (unsigned int i = 0; i < m->n_args; i++) {
		switch (rand() % 4) {
		case 0:
		case 1:
			m->arg_types[i] = 's';
			m->args[i] = PICK(v_arg);
			break;
		case 2:
			m->arg_types[i] = 'o';
			m->args[i] = PICK(v_path);
			break;
		default:
			m->arg_types[i] = 'u';
		}
	}
}

/* Bitmask of result owners; each must appear once, never the recipient. */
static unsigned int result_set(struct list_node *result, const struct match_message *m)
{
	unsigned int set = 0;
	struct match_owner *o;

	list_for_each_entry(o, result, result_link) {
		unsigned int i = o - conn_rules;

		CHECK(i < N_CONN);
		CHECK(!(set & (1u << i)));
		CHECK(o != m->recipient);
		set |= 1u << i;
	}
	return set;
}

static void shuffle_names(void)
{
	static const char *const wk[] = { "com.a", "com.b", "com.c" };
	uint32_t reply;

	for (int k = 0; k < 6; k++) {
		struct name_owner *o = &conn_names[rand() % N_CONN];
		const char *n = PICK(wk);

		if (rand() % 3 == 0)
			CHECK_EQ(name_registry_release(names, o, n, &reply), 0);
		else
			CHECK_EQ(name_registry_request(names, o, n, rand() % 8, &reply), 0);
	}
}

int main(int argc, char **argv)
{
	struct match_registry *reg;
	unsigned int seed = argc > 1 ? (unsigned int)atoi(argv[1]) : 12345;
	size_t checked = 0, nonempty = 0;

	srand(seed);
	CHECK_EQ(name_registry_new(&names, NULL, NULL), 0);
	CHECK_EQ(match_registry_new(&reg), 0);
	for (unsigned int i = 0; i < N_CONN; i++) {
		name_owner_init(&conn_names[i], i + 1);
		CHECK_EQ(name_registry_add_unique(names, &conn_names[i]), 0);
		match_owner_init(&conn_rules[i], &conn_names[i]);
	}

	for (int round = 0; round < 300; round++) {
		char text[512];

		shuffle_names();
		/* Grow and shrink the rule set. */
		for (int k = 0; k < 20; k++) {
			struct match_owner *o = &conn_rules[rand() % N_CONN];

			if (rand() % 2 == 0 && o->n_rules) {
				/* Remove a random rule by its text (RemoveMatch). */
				struct list_node *n = o->rules.next;
				size_t before = o->n_rules;

				for (int skip = rand() % o->n_rules; skip > 0; skip--)
					n = n->next;
				CHECK_EQ(match_rule_to_string(list_entry(n, struct match_rule,
									 owner_link),
							      text, sizeof(text)), 0);
				CHECK_EQ(match_registry_remove_text(reg, o, text, NULL), 0);
				CHECK_EQ(o->n_rules, before - 1);
			} else {
				random_rule(text, sizeof(text), v_sender, NELEM(v_sender), &odds);
				CHECK_EQ(match_registry_add_text(reg, o, text, NULL), 0);
			}
		}
		if (round % 50 == 49)
			match_registry_drop_unique(reg, PICK(v_sender), NULL, NULL);
		if (round % 100 == 99)
			match_owner_deinit(&conn_rules[rand() % N_CONN]);

		for (int k = 0; k < 100; k++) {
			struct match_message m;
			struct list_node fast, slow;
			unsigned int a, b;

			random_message(&m);
			/* Both ways of finding sender-keyed rules must agree. */
			match_registry_set_sender_strategy(reg, rand() % 3);
			match_registry_match(reg, &m, &fast);
			a = result_set(&fast, &m);
			match_registry_match_slow(reg, &m, &slow);
			b = result_set(&slow, &m);
			if (a != b) {
				fprintf(stderr, "seed %u round %d: index %#x, scan %#x\n", seed,
					round, a, b);
				CHECK(a == b);
			}
			checked++;
			nonempty += a != 0;
		}
	}
	/* The test means something only if matches actually happen. */
	CHECK(nonempty > checked / 20);
	CHECK(nonempty < checked);
	printf("match-index: %zu messages checked, %zu with recipients, %zu rules at end\n",
	       checked, nonempty, match_registry_count(reg));

	for (unsigned int i = 0; i < N_CONN; i++) {
		match_owner_deinit(&conn_rules[i]);
		name_registry_remove_unique(names, &conn_names[i]);
	}
	match_registry_free(reg);
	name_registry_free(names);
	return 0;
}
