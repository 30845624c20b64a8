/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * Random match rules and message fields for the randomized match tests.
 *
 * Both the index test (index vs brute force) and the differential test
 * (registry vs a live dbus-daemon) draw rules from one small vocabulary, so
 * that random rules and random messages collide often enough to exercise
 * every key. The tests differ only in how often the rarer keys appear; that
 * is what struct random_rule_odds carries.
 */

#include <stdio.h>
#include <stdlib.h>

#define NELEM(v) (sizeof(v) / sizeof((v)[0]))
#define PICK(v) (v[rand() % NELEM(v)])

static const char *const v_iface[] = { "i.a", "i.b", "org.freedesktop.DBus" };
static const char *const v_member[] = { "A", "B", "NameOwnerChanged" };
static const char *const v_path[] = { "/", "/a", "/a/b", "/b" };
static const char *const v_arg[] = { "", "com.a", "com.a.x", "com", "/a/", "/a/b", "/a", "x" };
static const char *const v_type[] = { "signal", "method_call", "method_return", "error" };

/**
 * struct random_rule_odds - how often the rarer keys appear
 * @other_type:		1 in @other_type type= keys names a random type, else 'signal'
 * @destination:	1 in @destination candidate rules get a destination= key
 * @eavesdrop:		1 in @eavesdrop candidate rules get an eavesdrop= key
 * @eavesdrop_false:	1 in @eavesdrop_false eavesdrop= keys say 'false'
 * @max_argn:		argN / argNpath keys use N in 1..@max_argn
 */
struct random_rule_odds {
	int other_type;
	int destination;
	int eavesdrop;
	int eavesdrop_false;
	int max_argn;
};

/* Write a random rule over @senders (also used as destinations) to @buf. */
static inline void random_rule(char *buf, size_t size, const char *const *senders,
			       size_t n_senders, const struct random_rule_odds *odds)
{
	size_t n = 0;
	int keys = rand();

#define ADD(...) n += snprintf(buf + n, n < size ? size - n : 0, __VA_ARGS__)
	buf[0] = '\0';
	if (keys & 1)
		ADD("type='%s',", rand() % odds->other_type ? "signal" : PICK(v_type));
	if (keys & 2)
		ADD("sender='%s',", senders[rand() % n_senders]);
	if (keys & 4)
		ADD("interface='%s',", PICK(v_iface));
	if (keys & 8)
		ADD("member='%s',", PICK(v_member));
	if (keys & 16)
		ADD("%s='%s',", rand() % 2 ? "path" : "path_namespace", PICK(v_path));
	if ((keys & 32) && rand() % odds->destination == 0)
		ADD("destination='%s',", senders[rand() % n_senders]);
	if ((keys & 64) && rand() % odds->eavesdrop == 0)
		ADD("eavesdrop='%s',", rand() % odds->eavesdrop_false ? "true" : "false");
	if (keys & 128) {
		int kind = rand() % 3;

		if (kind == 0)
			ADD("arg0='%s',", PICK(v_arg));
		else if (kind == 1)
			ADD("arg0path='%s',", PICK(v_arg));
		else
			ADD("arg0namespace='%s',", rand() % 2 ? "com" : "com.a");
	}
	if (keys & 256)
		ADD("arg%d%s='%s',", 1 + rand() % odds->max_argn, rand() % 2 ? "path" : "",
		    PICK(v_arg));
#undef ADD
	/* A trailing comma is accepted by every parser; strip it anyway. */
	if (n && n < size && buf[n - 1] == ',')
		buf[n - 1] = '\0';
}
