/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * libFuzzer target for match rules.
 *
 * Input: lines of rule text up to the first empty line (each is parsed; valid
 * ones are printed back with match_rule_to_string(), re-parsed and compared,
 * then added for one of a few connections, which also request the well-known
 * names the rules mention). The bytes after the empty line describe messages
 * built from the rules' own values; every message is matched with the index
 * and with a brute-force scan, which must agree. Any difference, leak or
 * sanitizer report is a bug.
 */

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "broker/objects/match.h"
#include "broker/objects/name.h"

#define N_CONN 6
#define MAX_VOCAB 256

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct vocab {
	const char *s[MAX_VOCAB];
	size_t n;
};

static void vocab_add(struct vocab *v, const char *s)
{
	if (s && v->n < MAX_VOCAB)
		v->s[v->n++] = s;
}

static const char *vocab_pick(const struct vocab *v, uint8_t b)
{
	static const char *const fixed[] = { "/", "org.freedesktop.DBus", "a.b", "" };

	if (b % 8 == 0 || v->n == 0)
		return fixed[b % 4];
	return v->s[b % v->n];
}

static uint8_t next_byte(const uint8_t **p, const uint8_t *end)
{
	return *p < end ? *(*p)++ : 0;
}

static void fail(const char *what)
{
	fprintf(stderr, "fuzz-match: %s\n", what);
	abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct name_registry *names = NULL;
	struct match_registry *reg = NULL;
	struct name_owner cn[N_CONN];
	struct match_owner cm[N_CONN];
	struct vocab vocab = { .n = 0 };
	const uint8_t *p = data, *end = data + size;
	char *line = NULL;
	size_t n_lines = 0;

	if (name_registry_new(&names, NULL, NULL) < 0 || match_registry_new(&reg) < 0)
		abort();
	for (int i = 0; i < N_CONN; i++) {
		name_owner_init(&cn[i], i + 1);
		match_owner_init(&cm[i], &cn[i]);
		if (name_registry_add_unique(names, &cn[i]) < 0)
			abort();
		vocab_add(&vocab, cn[i].unique_name);
	}

	/* Rules: one per line until an empty line; at most 64. */
	while (p < end && n_lines < 64) {
		const uint8_t *nl = memchr(p, '\n', end - p);
		size_t len = nl ? (size_t)(nl - p) : (size_t)(end - p);
		struct match_rule *rule = NULL, *again = NULL;
		char text[2200];
		int r;

		if (len == 0) {
			p = nl + 1;
			break;
		}
		line = malloc(len + 1);
		if (!line)
			abort();
		memcpy(line, p, len);
		line[len] = '\0';
		p = nl ? nl + 1 : end;
		n_lines++;

		r = match_rule_parse(&rule, line, NULL);
		free(line);
		line = NULL;
		if (r < 0)
			abort();
		if (r > 0)
			continue;
		if (match_rule_to_string(rule, text, sizeof(text)) < 0)
			fail("to_string overflow");
		if (match_rule_parse(&again, text, NULL) != 0)
			fail("printed rule does not parse");
		if (!match_rule_equal(rule, again))
			fail("printed rule differs");
		match_rule_free(again);

		if (match_registry_add(reg, &cm[n_lines % N_CONN], rule) < 0)
			abort();
		vocab_add(&vocab, rule->sender);
		vocab_add(&vocab, rule->interface);
		vocab_add(&vocab, rule->member);
		vocab_add(&vocab, rule->path);
		vocab_add(&vocab, rule->destination);
		for (size_t i = 0; i < rule->n_args; i++)
			vocab_add(&vocab, rule->args[i].value);
		if (rule->sender && rule->sender[0] != ':') {
			uint32_t reply;

			/* May fail for org.freedesktop.DBus: fine. */
			if (name_registry_request(names, &cn[(n_lines / N_CONN) % N_CONN],
						  rule->sender, (uint32_t)n_lines % 8, &reply) < 0)
				abort();
		}
	}

	/* Messages. */
	for (int k = 0; k < 64 && p < end; k++) {
		struct match_message m;
		struct list_node fast, slow;
		struct match_owner *o;
		uint8_t flags = next_byte(&p, end);
		size_t n_fast = 0, n_slow = 0;

		memset(&m, 0, sizeof(m));
		m.type = next_byte(&p, end) % 5;
		if (flags & 1)
			m.sender = &cn[next_byte(&p, end) % N_CONN];
		if (flags & 2)
			m.interface = vocab_pick(&vocab, next_byte(&p, end));
		if (flags & 4)
			m.member = vocab_pick(&vocab, next_byte(&p, end));
		if (flags & 8)
			m.path = vocab_pick(&vocab, next_byte(&p, end));
		if (flags & 16) {
			uint8_t d = next_byte(&p, end);

			m.destination = vocab_pick(&vocab, next_byte(&p, end));
			if (d % (N_CONN + 1) < N_CONN) {
				m.recipient_names = &cn[d % (N_CONN + 1)];
				m.recipient = &cm[d % (N_CONN + 1)];
			}
		}
		m.n_args = flags >> 5;
		for (unsigned int i = 0; i < m.n_args; i++) {
			uint8_t t = next_byte(&p, end);

			m.arg_types[i] = (t & 3) == 0 ? 'u' : (t & 3) == 1 ? 'o' : 's';
			if (m.arg_types[i] != 'u')
				m.args[i] = vocab_pick(&vocab, t >> 2);
		}

		match_registry_set_sender_strategy(reg, flags % 3);
		match_registry_match(reg, &m, &fast);
		list_for_each_entry(o, &fast, result_link) {
			if (o == m.recipient)
				fail("recipient in result");
			n_fast++;
		}
		/* Compare as sets: generation stamps of the fast run mark members. */
		{
			uint64_t mark[N_CONN];

			for (int i = 0; i < N_CONN; i++)
				mark[i] = 0;
			list_for_each_entry(o, &fast, result_link)
				mark[o - cm]++;
			match_registry_match_slow(reg, &m, &slow);
			list_for_each_entry(o, &slow, result_link) {
				if (mark[o - cm] != 1)
					fail("index and scan disagree");
				n_slow++;
			}
		}
		if (n_fast != n_slow)
			fail("index and scan disagree on the count");
	}

	/* Drop rules naming a unique name, then everything. */
	match_registry_drop_unique(reg, cn[0].unique_name, NULL, NULL);
	for (int i = 0; i < N_CONN; i++) {
		match_owner_deinit(&cm[i]);
		name_registry_remove_unique(names, &cn[i]);
	}
	if (match_registry_count(reg) != 0)
		fail("rules left");
	match_registry_free(reg);
	name_registry_free(names);
	return 0;
}
