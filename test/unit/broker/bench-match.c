/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Match-rule lookup cost against the number of installed rules: prints ns per
 * match_registry_match() call (the index) and per brute-force scan, for a
 * signal no rule matches and for a NameOwnerChanged that one rule matches.
 * Rules are typical GDBus/sd-bus rules spread over many connections.
 * Usage: bench-match [N_RULES...]   (default 10 1000 10000 100000)
 */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "broker/objects/match.h"
#include "broker/objects/name.h"

#define RULES_PER_CONN 5

struct conn {
	struct name_owner names;
	struct match_owner rules;
};

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + ts.tv_nsec;
}

static double bench(struct match_registry *reg, const struct match_message *m, bool slow,
		    size_t *n_result)
{
	struct list_node result;
	uint64_t t0, t;
	size_t iters = 0, batch = 64;

	t0 = now_ns();
	do {
		for (size_t i = 0; i < batch; i++) {
			if (slow)
				match_registry_match_slow(reg, m, &result);
			else
				match_registry_match(reg, m, &result);
		}
		iters += batch;
		t = now_ns();
	} while (t - t0 < 200000000u); /* 0.2 s per figure */
	*n_result = 0;
	for (struct list_node *n = result.next; n != &result; n = n->next)
		(*n_result)++;
	return (double)(t - t0) / iters;
}

static void run(size_t n_rules)
{
	size_t n_conn = (n_rules + RULES_PER_CONN - 1) / RULES_PER_CONN;
	struct name_registry *names;
	struct match_registry *reg;
	struct conn *c = calloc(n_conn, sizeof(*c));
	struct match_message miss = {}, hit = {};
	size_t added = 0, res_fast, res_slow;
	double fast, slow;
	char text[512];
	uint32_t reply;

	if (!c || name_registry_new(&names, NULL, NULL) || match_registry_new(&reg))
		abort();
	for (size_t i = 0; i < n_conn; i++) {
		name_owner_init(&c[i].names, i + 1);
		match_owner_init(&c[i].rules, &c[i].names);
		if (name_registry_add_unique(names, &c[i].names))
			abort();
		snprintf(text, sizeof(text), "com.app%zu", i);
		if (name_registry_request(names, &c[i].names, text, 0, &reply))
			abort();
	}
	for (size_t i = 0; added < n_rules; i++) {
		size_t k = i % n_conn, peer = (i * 7919) % n_conn;

		switch (i / n_conn % RULES_PER_CONN) {
		case 0: /* a name watcher */
			snprintf(text, sizeof(text),
				 "type='signal',sender='org.freedesktop.DBus',"
				 "interface='org.freedesktop.DBus',member='NameOwnerChanged',"
				 "path='/org/freedesktop/DBus',arg0='com.app%zu'", peer);
			break;
		case 1: /* a proxy's properties */
			snprintf(text, sizeof(text),
				 "type='signal',sender='com.app%zu',path='/com/app%zu',"
				 "interface='org.freedesktop.DBus.Properties',"
				 "member='PropertiesChanged',arg0='com.app%zu.Iface'",
				 peer, peer, peer);
			break;
		case 2: /* a proxy's signals */
			snprintf(text, sizeof(text),
				 "type='signal',sender='com.app%zu',path='/com/app%zu',"
				 "interface='com.app%zu.Iface'", peer, peer, peer);
			break;
		case 3: /* object manager */
			snprintf(text, sizeof(text),
				 "type='signal',sender=':1.%zu',path_namespace='/com/app%zu'",
				 peer + 1, peer);
			break;
		default: /* an interface-wide subscription */
			snprintf(text, sizeof(text), "type='signal',interface='com.app%zu.Events',"
						     "member='Sig%zu'", peer, i % 13);
			break;
		}
		if (match_registry_add_text(reg, &c[k].rules, text, NULL))
			abort();
		added++;
	}

	/* A signal from connection 0 that no rule wants. */
	miss.type = MATCH_TYPE_SIGNAL;
	miss.sender = &c[0].names;
	miss.path = "/org/example/Nope";
	miss.interface = "org.example.Nope";
	miss.member = "Nothing";
	miss.n_args = 1;
	miss.arg_types[0] = 's';
	miss.args[0] = "nope";
	/* NameOwnerChanged for com.app0, which its watchers match. */
	hit.type = MATCH_TYPE_SIGNAL;
	hit.sender = NULL;
	hit.path = "/org/freedesktop/DBus";
	hit.interface = "org.freedesktop.DBus";
	hit.member = "NameOwnerChanged";
	hit.n_args = 3;
	hit.arg_types[0] = hit.arg_types[1] = hit.arg_types[2] = 's';
	hit.args[0] = "com.app0";
	hit.args[1] = ":1.1";
	hit.args[2] = "";

	fast = bench(reg, &miss, false, &res_fast);
	slow = bench(reg, &miss, true, &res_slow);
	if (res_fast != res_slow)
		abort();
	printf("%7zu rules %6zu conns  miss: index %8.1f ns  scan %10.1f ns  (%zu recipients)\n",
	       n_rules, n_conn, fast, slow, res_fast);
	fast = bench(reg, &hit, false, &res_fast);
	slow = bench(reg, &hit, true, &res_slow);
	if (res_fast != res_slow)
		abort();
	printf("%7zu rules %6zu conns  hit:  index %8.1f ns  scan %10.1f ns  (%zu recipients)\n",
	       n_rules, n_conn, fast, slow, res_fast);

	/* The sender owns 2000 more names: AUTO walks the distinct sender=
	 * values instead of the sender's names when those are fewer. */
	for (size_t i = 0; i < 2000; i++) {
		snprintf(text, sizeof(text), "org.many.n%zu", i);
		if (name_registry_request(names, &c[0].names, text, 0, &reply))
			abort();
	}
	fast = bench(reg, &miss, false, &res_fast);
	match_registry_set_sender_strategy(reg, MATCH_SENDER_BY_NAMES);
	slow = bench(reg, &miss, false, &res_slow);
	match_registry_set_sender_strategy(reg, MATCH_SENDER_AUTO);
	printf("%7zu rules, sender owns 2001 names, miss: auto %8.1f ns  by-names %8.1f ns\n",
	       n_rules, fast, slow);

	for (size_t i = 0; i < n_conn; i++) {
		match_owner_deinit(&c[i].rules);
		name_registry_remove_unique(names, &c[i].names);
	}
	match_registry_free(reg);
	name_registry_free(names);
	free(c);
}

int main(int argc, char **argv)
{
	static const size_t def[] = { 10, 1000, 10000, 100000 };

	if (argc > 1) {
		for (int i = 1; i < argc; i++)
			run(strtoul(argv[i], NULL, 10));
	} else {
		for (size_t i = 0; i < sizeof(def) / sizeof(def[0]); i++)
			run(def[i]);
	}
	return 0;
}
