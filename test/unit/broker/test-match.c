/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Match rules: grammar (cases in match-rules.txt, checked against dbus-daemon
 * by check-match-rules.py), parsed values, equality, AddMatch/RemoveMatch
 * counting, and the matching semantics of every key.
 */

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include "broker/objects/match.h"
#include "broker/objects/name.h"
#include "check.h"

static int parse_code(const char *text)
{
	struct match_rule *rule = NULL;
	const char *reason = NULL;
	int r = match_rule_parse(&rule, text, &reason);

	if (r == 0)
		match_rule_free(rule);
	else
		CHECK(reason && *reason);
	return r;
}

static void decode(char *s)
{
	char *o = s;

	for (; *s; s++) {
		if (*s != '\\') {
			*o++ = *s;
			continue;
		}
		s++;
		switch (*s) {
		case 'n': *o++ = '\n'; break;
		case 't': *o++ = '\t'; break;
		case 'r': *o++ = '\r'; break;
		case '\\': *o++ = '\\'; break;
		case 'x': {
			char hex[3] = { s[1], s[2], 0 };

			*o++ = (char)strtol(hex, NULL, 16);
			s += 2;
			break;
		}
		default:
			CHECK(!"bad escape in match-rules.txt");
		}
	}
	*o = '\0';
}

static void test_grammar_file(const char *path)
{
	char line[4096];
	size_t n = 0;
	FILE *f = fopen(path, "r");

	CHECK(f);
	while (fgets(line, sizeof(line), f)) {
		char *bar, *rule;
		int expect, got;

		line[strcspn(line, "\n")] = '\0';
		if (line[0] == '#' || line[0] == '\0')
			continue;
		bar = strchr(line, '|');
		CHECK(bar);
		*bar = '\0';
		rule = bar + 1;
		decode(rule);
		if (strcmp(line, "OK") == 0)
			expect = 0;
		else if (strcmp(line, "INVALID") == 0)
			expect = MATCH_E_INVALID;
		else if (strcmp(line, "TOOLONG") == 0)
			expect = MATCH_E_TOO_LONG;
		else
			CHECK(!"bad result in match-rules.txt");
		got = parse_code(rule);
		if (got != expect) {
			fprintf(stderr, "rule \"%s\": got %d, expected %d\n", rule, got, expect);
			CHECK(got == expect);
		}
		n++;
	}
	fclose(f);
	CHECK(n > 100);
}

static void test_length(void)
{
	char buf[1100];

	/* arg0='xxx...': 1024 bytes pass, 1025 bytes are LimitsExceeded. */
	memset(buf, 'x', sizeof(buf));
	memcpy(buf, "arg0='", 6);
	buf[6 + 1017] = '\'';
	buf[6 + 1018] = '\0';
	CHECK_EQ(strlen(buf), 1024);
	CHECK_EQ(parse_code(buf), 0);
	memset(buf, 'x', sizeof(buf));
	memcpy(buf, "arg0='", 6);
	buf[6 + 1018] = '\'';
	buf[6 + 1019] = '\0';
	CHECK_EQ(parse_code(buf), MATCH_E_TOO_LONG);
	/* Too long wins over invalid, as in dbus-daemon. */
	memset(buf, ',', 1050);
	buf[1050] = '\0';
	CHECK_EQ(parse_code(buf), MATCH_E_TOO_LONG);
}

/*
 * The reasons are dbus-daemon's texts, byte for byte (test_match_parity.py
 * compares them all with a running dbus-daemon): a few of each form here.
 */
static void test_reasons(void)
{
	static const struct {
		const char *rule;
		const char *reason;
	} cases[] = {
		{ "member='1a'", "Member name '1a' is invalid\n" },
		{ "sender='org..x'", "Sender name 'org..x' is invalid\n" },
		{ "path_namespace='/a/'", "Path '/a/' is invalid\n" },
		{ "type='bogus'", "Invalid message type (bogus) in match rule\n" },
		{ "member='A',member='B'", "Key member specified twice in match rule\n" },
		{ "path='/a',path_namespace='/b'",
		  "path or path_namespace specified twice in match rule\n" },
		/* The key is not NUL-terminated in the text: only it is named. */
		{ "color=red,type='signal'", "Unknown key \"color\" in match rule" },
		{ "arg64path='/x'",
		  "Key 'arg64path' in match rule has arg number 64 but the maximum is 63.\n" },
		{ "arg1junk='x'", "Key 'arg1junk' in match rule contains junk after argument "
		  "number (1). Only 'arg1path' (for example) or 'arg0namespace' are valid" },
		{ "arg0='a',arg0x0path='/b'",
		  "Argument arg0x0path matched more than once in match rule\n" },
		{ "arg0namespace='a.'", "arg0namespace='a.' is not a valid prefix of a bus name" },
		{ "eavesdrop=yes", "eavesdrop='yes' is invalid, it should be 'true' or 'false'\n" },
		{ "member='Foo", "Unbalanced quotation marks in match rule" },
		{ "type", "Match rule has a key with no subsequent '=' character" },
	};
	struct match_rule *rule = NULL;
	char buf[1100], want[1200];
	const char *reason;

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		reason = NULL;
		CHECK_EQ(match_rule_parse(&rule, cases[i].rule, &reason), MATCH_E_INVALID);
		CHECK_STR(reason, cases[i].reason);
		CHECK(!rule);
	}

	/* The whole length is told, not where counting stopped. */
	memset(buf, 'x', 1099);
	buf[1099] = '\0';
	CHECK_EQ(match_rule_parse(&rule, buf, &reason), MATCH_E_TOO_LONG);
	CHECK_STR(reason, "Match rule text is 1099 bytes, maximum is 1024");

	/* The longest key a client can send fits in the reason, whole. */
	memset(buf, '9', 1023);
	memcpy(buf, "arg", 3);
	buf[1023] = '=';
	buf[1024] = '\0';
	snprintf(want, sizeof(want), "Key '%.*s' in match rule starts with 'arg' but could "
		 "not parse arg number. Should be 'arg0' or 'arg7' for example.\n", 1023, buf);
	CHECK_EQ(match_rule_parse(&rule, buf, &reason), MATCH_E_INVALID);
	CHECK_STR(reason, want);
}

static struct match_rule *parse(const char *text)
{
	struct match_rule *rule = NULL;

	CHECK_EQ(match_rule_parse(&rule, text, NULL), 0);
	return rule;
}

static void test_values(void)
{
	struct match_rule *r;

	r = parse("type='signal',sender='org.freedes''ktop.DBusSender',interface='a.b''''',"
		  "member=Foo,path_namespace='/bar/foo',destination=':452345.34'''''");
	CHECK_EQ(r->keys, MATCH_KEY_TYPE | MATCH_KEY_SENDER | MATCH_KEY_INTERFACE |
				  MATCH_KEY_MEMBER | MATCH_KEY_PATH_NAMESPACE |
				  MATCH_KEY_DESTINATION);
	CHECK_EQ(r->type, MATCH_TYPE_SIGNAL);
	CHECK_STR(r->sender, "org.freedesktop.DBusSender");
	CHECK_STR(r->interface, "a.b");
	CHECK_STR(r->member, "Foo");
	CHECK_STR(r->path, "/bar/foo");
	CHECK_STR(r->destination, ":452345.34");
	CHECK(!r->eavesdrop);
	CHECK_EQ(r->n_args, 0);
	match_rule_free(r);

	r = parse("arg0=a\\'b,arg1='a'\\''b',arg2='a\\b',arg3=a\\b,arg4=a\\,arg5=\\,");
	/* arg4's trailing backslash escapes the ',' (kept literally), so arg4
	 * swallows "arg5=..." up to the next unescaped comma. */
	CHECK_EQ(r->n_args, 5);
	CHECK_STR(r->args[0].value, "a'b");
	CHECK_STR(r->args[1].value, "a'b");
	CHECK_STR(r->args[2].value, "a\\b");
	CHECK_STR(r->args[3].value, "a\\b");
	CHECK_STR(r->args[4].value, "a\\,arg5=\\,");
	match_rule_free(r);

	r = parse("arg0=a\\");
	CHECK_STR(r->args[0].value, "a\\");
	match_rule_free(r);

	r = parse("arg0x1='one',arg010=eight,arg2path='/p',arg0namespace='org.x'");
	CHECK_EQ(r->n_args, 9);
	CHECK_EQ(r->args[0].kind, MATCH_ARG_NAMESPACE);
	CHECK_STR(r->args[0].value, "org.x");
	CHECK_EQ(r->args[1].kind, MATCH_ARG_STRING);
	CHECK_STR(r->args[1].value, "one");
	CHECK_EQ(r->args[2].kind, MATCH_ARG_PATH);
	CHECK(!r->args[3].value);
	CHECK_EQ(r->args[3].kind, MATCH_ARG_NONE);
	CHECK_STR(r->args[8].value, "eight");
	CHECK_EQ(r->args[8].len, 5);
	match_rule_free(r);

	r = parse("arg0='a b',arg1=' x ',arg2=''");
	CHECK_STR(r->args[0].value, "a b");
	CHECK_STR(r->args[1].value, " x ");
	CHECK_STR(r->args[2].value, "");
	match_rule_free(r);

	/* Everything after an empty key is ignored. */
	r = parse("member=A,='x',bogus=y");
	CHECK_EQ(r->keys, MATCH_KEY_MEMBER);
	match_rule_free(r);

	r = parse("eavesdrop=true,eavesdrop='false',eavesdrop=true");
	CHECK(r->eavesdrop);
	CHECK_EQ(r->keys, 0);
	match_rule_free(r);
}

static bool equal_text(const char *a, const char *b)
{
	struct match_rule *x = parse(a), *y = parse(b);
	bool eq = match_rule_equal(x, y);

	CHECK_EQ(eq, match_rule_equal(y, x));
	match_rule_free(x);
	match_rule_free(y);
	return eq;
}

static void test_equality_and_text(void)
{
	static const char *const rules[] = {
		"",
		"type='signal'",
		"type='signal',interface='a.b',member='C',path='/x',sender=':1.1'",
		"path_namespace='/x',destination='a.b',eavesdrop=true",
		"arg0='x',arg3path='/a/',arg0namespace=''",
		"arg0namespace='org.x',arg63=\"'\"",
		"arg0=it\\'s,arg2='a,b'",
	};
	char buf[2048];

	CHECK(equal_text("type='signal'", "type=signal"));
	CHECK(equal_text("type='signal',member='A'", "member='A',type='signal'"));
	CHECK(equal_text("eavesdrop='false'", ""));
	CHECK(equal_text("arg1='x'", "arg01='x'"));
	CHECK(!equal_text("eavesdrop='true'", ""));
	CHECK(!equal_text("arg0='/a'", "arg0path='/a'"));
	CHECK(!equal_text("path='/a'", "path_namespace='/a'"));
	CHECK(!equal_text("arg0='a'", "arg1='a'"));
	CHECK(!equal_text("arg0='a'", "arg0='a',arg1='b'"));
	CHECK(!equal_text("type='signal'", "type='error'"));
	CHECK(!equal_text("sender='a.b'", "destination='a.b'"));
	CHECK(!equal_text("member='A'", "member='B'"));

	/* to_string gives a rule that parses back to an equal rule. */
	for (size_t i = 0; i < sizeof(rules) / sizeof(rules[0]); i++) {
		struct match_rule *a, *b;
		int r = match_rule_parse(&a, rules[i], NULL);

		if (r) /* the arg0namespace='' one is invalid by design */
			continue;
		CHECK_EQ(match_rule_to_string(a, buf, sizeof(buf)), 0);
		b = parse(buf);
		CHECK(match_rule_equal(a, b));
		match_rule_free(a);
		match_rule_free(b);
	}
	{
		struct match_rule *a = parse("arg0=it\\'s,type=signal");

		CHECK_EQ(match_rule_to_string(a, buf, sizeof(buf)), 0);
		CHECK_STR(buf, "type='signal',arg0='it'\\''s'");
		CHECK_EQ(match_rule_to_string(a, buf, 5), -ENOBUFS);
		CHECK_STR(buf, "type");
		match_rule_free(a);
	}
}

/*
 * A rule a client may add whose canonical text (what a re-exec carries) is
 * longer than a client may send: the restore takes it back all the same.
 */
static void test_restore_long_text(void)
{
	struct match_rule_state rs = {};
	struct match_owner_state st = { .rules = &rs, .n_rules = 1 };
	struct match_registry *reg;
	struct match_owner owner;
	struct match_rule *a, *b = NULL;
	char text[1024], canonical[8192];
	size_t n = 0;

	n += (size_t)snprintf(text, sizeof(text), "arg0=");
	while (n + 2 < sizeof(text)) {
		text[n++] = '\\';
		text[n++] = '\'';
	}
	text[n] = '\0';
	a = parse(text);
	CHECK_EQ(match_rule_to_string(a, canonical, sizeof(canonical)), 0);
	CHECK(strlen(canonical) > MATCH_RULE_MAX_LENGTH);
	CHECK_EQ(match_rule_parse(&b, canonical, NULL), MATCH_E_TOO_LONG);

	CHECK_EQ(match_registry_new(&reg), 0);
	match_owner_init(&owner, NULL);
	rs.text = canonical;
	CHECK_EQ(match_owner_restore(reg, &owner, &st), 0);
	CHECK_EQ(owner.n_rules, 1);
	b = list_entry(owner.rules.next, struct match_rule, owner_link);
	CHECK(match_rule_equal(a, b));
	match_owner_deinit(&owner);
	match_registry_free(reg);
	match_rule_free(a);
}

static void test_add_remove(void)
{
	struct match_registry *reg;
	struct match_owner a, b;
	const char *reason = NULL;

	CHECK_EQ(match_registry_new(&reg), 0);
	match_owner_init(&a, NULL);
	match_owner_init(&b, NULL);
	CHECK_EQ(match_registry_add_text(reg, &a, "type='signal',member='X'", NULL), 0);
	CHECK_EQ(match_registry_add_text(reg, &a, "member='X',type=signal", NULL), 0);
	CHECK_EQ(match_registry_add_text(reg, &b, "type='signal',member='X'", NULL), 0);
	CHECK_EQ(a.n_rules, 2);
	CHECK_EQ(match_registry_count(reg), 3);
	CHECK_EQ(match_registry_add_text(reg, &a, "bogus='1'", &reason), MATCH_E_INVALID);
	CHECK(reason);
	CHECK_EQ(a.n_rules, 2);
	/* Removing needs an equal rule of the same owner. */
	CHECK_EQ(match_registry_remove_text(reg, &a, "type='signal'", NULL), MATCH_E_NOT_FOUND);
	CHECK_EQ(match_registry_remove_text(reg, &a, "bogus", NULL), MATCH_E_INVALID);
	CHECK_EQ(match_registry_remove_text(reg, &a, "type='signal',member='X'", NULL), 0);
	CHECK_EQ(a.n_rules, 1);
	CHECK_EQ(match_registry_remove_text(reg, &a, "type='signal',member='X'", NULL), 0);
	CHECK_EQ(a.n_rules, 0);
	CHECK_EQ(match_registry_remove_text(reg, &a, "type='signal',member='X'", &reason),
		 MATCH_E_NOT_FOUND);
	CHECK_STR(reason, "The given match rule wasn't found and can't be removed");
	CHECK_EQ(b.n_rules, 1);
	match_owner_deinit(&b);
	CHECK_EQ(match_registry_count(reg), 0);
	match_owner_deinit(&a);
	match_registry_free(reg);
}

/* ---- matching ----------------------------------------------------------- */

static struct name_registry *names;
static struct name_owner n_sender, n_recipient, n_other;

static void setup_names(void)
{
	uint32_t reply;

	CHECK_EQ(name_registry_new(&names, NULL, NULL), 0);
	name_owner_init(&n_sender, 10);
	name_owner_init(&n_recipient, 20);
	name_owner_init(&n_other, 30);
	CHECK_EQ(name_registry_add_unique(names, &n_sender), 0);
	CHECK_EQ(name_registry_add_unique(names, &n_recipient), 0);
	CHECK_EQ(name_registry_add_unique(names, &n_other), 0);
	CHECK_EQ(name_registry_request(names, &n_sender, "com.sender", 0, &reply), 0);
	CHECK_EQ(name_registry_request(names, &n_other, "com.shared", 0, &reply), 0);
	CHECK_EQ(name_registry_request(names, &n_sender, "com.shared", 0, &reply), 0);
	CHECK_EQ(reply, NAME_REQUEST_IN_QUEUE);
	CHECK_EQ(name_registry_request(names, &n_recipient, "com.recipient", 0, &reply), 0);
}

static void teardown_names(void)
{
	name_registry_remove_unique(names, &n_sender);
	name_registry_remove_unique(names, &n_recipient);
	name_registry_remove_unique(names, &n_other);
	name_registry_free(names);
}

/* A broadcast signal from n_sender with two string args. */
static void base_msg(struct match_message *m)
{
	memset(m, 0, sizeof(*m));
	m->type = MATCH_TYPE_SIGNAL;
	m->sender = &n_sender;
	m->path = "/org/x/Obj";
	m->interface = "org.x.Iface";
	m->member = "Changed";
	m->n_args = 3;
	m->arg_types[0] = 's';
	m->args[0] = "org.x.Name";
	m->arg_types[1] = 'o';
	m->args[1] = "/org/x/Obj/";
	m->arg_types[2] = 'u';
}

static bool matches(const char *text, const struct match_message *m)
{
	struct match_rule *r = parse(text);
	bool res = match_rule_matches(r, m);

	match_rule_free(r);
	return res;
}

static void test_matching(void)
{
	struct match_message m;

	setup_names();
	base_msg(&m);

	CHECK(matches("", &m));
	CHECK(matches("type='signal'", &m));
	CHECK(!matches("type='method_call'", &m));
	CHECK(matches("interface='org.x.Iface'", &m));
	CHECK(!matches("interface='org.x.Other'", &m));
	CHECK(matches("member='Changed'", &m));
	CHECK(!matches("member='Other'", &m));
	CHECK(matches("path='/org/x/Obj'", &m));
	CHECK(!matches("path='/org/x'", &m));
	CHECK(matches("path_namespace='/org/x'", &m));
	CHECK(matches("path_namespace='/org/x/Obj'", &m));
	CHECK(matches("path_namespace='/'", &m));
	CHECK(!matches("path_namespace='/org/x/O'", &m));
	CHECK(!matches("path_namespace='/org/x/Obj/Child'", &m));

	/* sender: unique name, or a name it is PRIMARY owner of. */
	CHECK(matches("sender=':1.10'", &m));
	CHECK(!matches("sender=':1.30'", &m));
	CHECK(matches("sender='com.sender'", &m));
	CHECK(!matches("sender='com.shared'", &m)); /* only queued */
	CHECK(!matches("sender='com.recipient'", &m));
	CHECK(!matches("sender='org.freedesktop.DBus'", &m));
	m.sender = NULL; /* from the driver */
	CHECK(matches("sender='org.freedesktop.DBus'", &m));
	CHECK(!matches("sender=':1.10'", &m));
	m.sender = &n_sender;

	/* args */
	CHECK(matches("arg0='org.x.Name'", &m));
	CHECK(!matches("arg0='org.x'", &m));
	CHECK(!matches("arg1='/org/x/Obj/'", &m)); /* object path != string */
	CHECK(!matches("arg2='1'", &m));
	CHECK(!matches("arg3='x'", &m));
	CHECK(matches("arg0namespace='org.x'", &m));
	CHECK(matches("arg0namespace='org.x.Name'", &m));
	CHECK(matches("arg0namespace='org'", &m));
	CHECK(!matches("arg0namespace='org.x.Na'", &m));
	CHECK(!matches("arg0namespace='org.x.Name.Sub'", &m));
	/* argNpath: equal, or a '/'-terminated prefix of the other */
	CHECK(matches("arg1path='/org/x/Obj/'", &m));
	CHECK(matches("arg1path='/org/x/'", &m));
	CHECK(matches("arg1path='/'", &m));
	CHECK(matches("arg1path='/org/x/Obj/Child'", &m)); /* actual ends in '/' */
	CHECK(!matches("arg1path='/org/x/Obj'", &m));
	CHECK(!matches("arg1path='/org/x'", &m));
	CHECK(!matches("arg1path='/org/y/'", &m));
	m.args[1] = "/org/x/Obj";
	CHECK(matches("arg1path='/org/x/Obj'", &m));
	CHECK(!matches("arg1path='/org/x/Obj/Child'", &m));
	CHECK(matches("arg1path='/org/'", &m));
	m.arg_types[1] = 's'; /* strings match argNpath too */
	CHECK(matches("arg1path='/org/'", &m));
	m.args[1] = "";
	CHECK(!matches("arg1path='/org/'", &m));
	CHECK(matches("arg1path=''", &m));
	m.args[1] = "/a/";
	CHECK(!matches("arg1path=''", &m));
	CHECK(matches("arg0='org.x.Name',arg1path='/a/b'", &m));
	CHECK(!matches("arg0='org.x.Nam',arg1path='/a/b'", &m));

	/* destination and eavesdropping */
	base_msg(&m);
	CHECK(!matches("destination=':1.20'", &m));          /* broadcast */
	CHECK(!matches("destination=':1.20',eavesdrop=true", &m));
	CHECK(matches("eavesdrop=true", &m));
	m.destination = "com.recipient";
	m.recipient_names = &n_recipient;
	CHECK(!matches("", &m));                            /* unicast: not ours */
	CHECK(matches("eavesdrop=true", &m));
	CHECK(!matches("destination='com.recipient'", &m)); /* needs eavesdrop */
	CHECK(matches("destination='com.recipient',eavesdrop=true", &m));
	CHECK(matches("destination=':1.20',eavesdrop=true", &m));
	CHECK(!matches("destination=':1.30',eavesdrop=true", &m));
	CHECK(!matches("destination='com.other',eavesdrop=true", &m));
	m.recipient_names = NULL; /* to the driver / not yet activated */
	CHECK(matches("destination='com.recipient',eavesdrop=true", &m));
	CHECK(!matches("destination=':1.20',eavesdrop=true", &m));

	/* absent header fields never match a rule that names them */
	base_msg(&m);
	m.interface = NULL;
	m.member = NULL;
	m.path = NULL;
	CHECK(!matches("interface='org.x.Iface'", &m));
	CHECK(!matches("member='Changed'", &m));
	CHECK(!matches("path='/org/x/Obj'", &m));
	CHECK(!matches("path_namespace='/'", &m));
	CHECK(matches("type=signal", &m));
	teardown_names();
}

static void test_registry_match(void)
{
	struct match_registry *reg;
	struct match_owner a, b, c;
	struct match_message m;
	struct list_node result;
	struct match_owner *o;
	size_t n;

	setup_names();
	CHECK_EQ(match_registry_new(&reg), 0);
	match_owner_init(&a, &n_other);
	match_owner_init(&b, &n_recipient);
	match_owner_init(&c, NULL);
	CHECK_EQ(match_registry_add_text(reg, &a, "member='Changed'", NULL), 0);
	CHECK_EQ(match_registry_add_text(reg, &a, "sender='com.sender'", NULL), 0);
	CHECK_EQ(match_registry_add_text(reg, &a, "interface='org.x.Iface'", NULL), 0);
	CHECK_EQ(match_registry_add_text(reg, &b, "arg0='org.x.Name',sender=':1.10'", NULL), 0);
	CHECK_EQ(match_registry_add_text(reg, &c, "member='Other'", NULL), 0);
	CHECK_EQ(match_registry_add_text(reg, &c, "sender=':1.10',destination=':1.20'", NULL), 0);

	base_msg(&m);
	match_registry_match(reg, &m, &result);
	n = 0;
	list_for_each_entry(o, &result, result_link) {
		CHECK(o == &a || o == &b); /* each once */
		n++;
	}
	CHECK_EQ(n, 2);

	/* Unicast to b: b is excluded (it gets it by routing), a does not
	 * eavesdrop, so nobody. */
	m.destination = ":1.20";
	m.recipient_names = &n_recipient;
	m.recipient = &b;
	match_registry_match(reg, &m, &result);
	CHECK(list_is_empty(&result));

	/* The unique name :1.10 goes away: rules naming it are dropped. */
	CHECK_EQ(match_registry_drop_unique(reg, ":1.10", NULL, NULL), 2);
	CHECK_EQ(b.n_rules, 0);
	CHECK_EQ(c.n_rules, 1);
	CHECK_EQ(match_registry_drop_unique(reg, ":1.10", NULL, NULL), 0);
	CHECK_EQ(match_registry_drop_unique(reg, "com.sender", NULL, NULL), 0);

	match_owner_deinit(&a);
	match_owner_deinit(&b);
	match_owner_deinit(&c);
	match_registry_free(reg);
	teardown_names();
}

/* An owner excluded as recipient by one registry is not hidden in another. */
static void test_two_registries(void)
{
	struct match_registry *r1, *r2;
	struct match_owner a, mon;
	struct match_message m;
	struct list_node result;

	setup_names();
	CHECK_EQ(match_registry_new(&r1), 0);
	CHECK_EQ(match_registry_new(&r2), 0);
	match_owner_init(&a, &n_recipient);
	match_owner_init(&mon, NULL);
	CHECK_EQ(match_registry_add_text(r1, &a, "member='Changed'", NULL), 0);
	CHECK_EQ(match_registry_add_text(r2, &mon, "eavesdrop=true", NULL), 0);

	/* A unicast to a, seen by the monitor registry: a is the recipient. */
	base_msg(&m);
	m.destination = ":1.20";
	m.recipient_names = &n_recipient;
	m.recipient = &a;
	match_registry_match(r2, &m, &result);
	CHECK(list_first(&result) == &mon.result_link);
	/* Then a broadcast in the main registry must reach a. */
	base_msg(&m);
	match_registry_match(r1, &m, &result);
	CHECK(list_first(&result) == &a.result_link);

	match_owner_deinit(&a);
	match_owner_deinit(&mon);
	match_registry_free(r1);
	match_registry_free(r2);
	teardown_names();
}

int main(int argc, char **argv)
{
	CHECK(argc > 1);
	test_grammar_file(argv[1]);
	test_length();
	test_reasons();
	test_values();
	test_equality_and_text();
	test_restore_long_text();
	test_add_remove();
	test_matching();
	test_registry_match();
	test_two_registries();
	printf("match: ok\n");
	return 0;
}
