/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Match rules: dbus-daemon-compatible parser, evaluation, and an index that
 * makes matching independent of the number of unrelated rules (match.h).
 */

#include <assert.h>
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "broker/objects/match.h"
#include "broker/objects/name.h"
#include "broker/objects/state.h"
#include "dbus-compat/validate.h"
#include "util/macro.h"

/* Index keys, in this order in bucket key arrays. */
enum {
	IDX_SENDER,
	IDX_INTERFACE,
	IDX_MEMBER,
	IDX_PATH,
	IDX_ARG0,
	_IDX_N,
};

#define IDX_MASKS (1u << _IDX_N)

struct match_bucket {
	struct hmap_node node;
	unsigned int mask;              /* which IDX_* keys the rules here set */
	const char *keys[_IDX_N];       /* NULL where not in mask; own copies */
	struct list_node rules;         /* struct match_rule.bucket_link */
	size_t n_rules;
	char buf[];
};

struct match_registry {
	struct hmap buckets;
	struct hmap uniq_senders;       /* rules with a unique-name sender= */
	struct hmap uniq_dests;         /* rules with a unique-name destination= */
	struct list_node rules;         /* all rules */
	size_t n_rules;
	size_t mask_rules[IDX_MASKS];   /* rules per mask, to skip empty masks */
	struct hmap sender_keys;        /* distinct sender= values, refcounted */
	int sender_strategy;            /* MATCH_SENDER_* (tests force one) */
	uint64_t generation;            /* stamp of the current/last match run */
	struct match_peaks *peaks;      /* NULL: not counted */
};

/*
 * One counter for all registries: an owner can be stamped by a registry it
 * is not in (as the excluded recipient of a monitor match), and per-registry
 * counters could then collide and hide it from a later run elsewhere.
 */
static uint64_t match_generation;

/* One distinct sender= value used by at least one rule. */
struct sender_key {
	struct hmap_node node;
	size_t n_rules;
	char str[];
};

/* ---- parser ------------------------------------------------------------- */

#define MAX_TOKENS 16
/*
 * A rule's canonical text (match_rule_to_string(), the state of a re-exec)
 * may be longer than the text it came as: a quote costs the client two
 * bytes (\\') and the canonical form four ('\\''), so up to twice the
 * 1024 bytes a client may send. Parsing it back (match_owner_restore())
 * allows this much.
 */
#define MATCH_STATE_RULE_MAX 8192
/* Unquoting never grows a value; plus one NUL per value. */
#define PARSE_BUF (MATCH_STATE_RULE_MAX + MAX_TOKENS + 1)

struct token {
	const char *key;
	size_t key_len;
	char *value;
	size_t value_len;
};

/*
 * 10 KiB, on the stack, and not zeroed as a whole (every AddMatch, and a
 * re-exec 10,000 times): only what is filled is read, @args below @n_args.
 */
struct parse_state {
	struct token tokens[MAX_TOKENS];
	size_t n_tokens;
	char values[PARSE_BUF];
	size_t used;
	/* What the keys set so far; its strings point into @values. */
	struct match_rule rule;
	struct match_arg args[MATCH_ARGS];
	uint8_t n_args;
};

static bool is_white(char c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

static const char *skip_white(const char *p)
{
	while (is_white(*p))
		++p;
	return p;
}

/*
 * dbus-daemon's texts name the offending key or value, so the reason is
 * formatted, into a buffer of the calling thread that stays valid until its
 * next parse. A client's rule is at most 1024 bytes, so is any key or value
 * of it: the longest text fits; a longer rule's (match_owner_restore(), whose
 * reason nobody reads) is cut.
 */
static _Thread_local char reason_buf[2 * MATCH_RULE_MAX_LENGTH];

_printf_(2, 3)
static void set_reason(const char **reasonp, const char *fmt, ...)
{
	va_list ap;

	/* Callers that do not want the text (fuzzers, tests) pay nothing. */
	if (!reasonp)
		return;
	va_start(ap, fmt);
	vsnprintf(reason_buf, sizeof(reason_buf), fmt, ap);
	va_end(ap);
	*reasonp = reason_buf;
}

/*
 * Copy the value at *@pp to *@outp without its quoting, up to an unquoted ','
 * (consumed) or the end of the text, and NUL-terminate the copy. Advances
 * both pointers past what was read and written.
 */
static int unquote_value(const char **pp, char **outp, const char **reasonp)
{
	const char *p = *pp;
	char *out = *outp;
	char quote = 0;

	for (; *p; ++p) {
		if (quote == 0) {
			if (*p == '\'') {
				quote = '\'';
			} else if (*p == ',') {
				++p;
				break;
			} else if (*p == '\\') {
				quote = '\\';
			} else {
				*out++ = *p;
			}
		} else if (quote == '\\') {
			/* A backslash escapes only a quote; else it is literal. */
			if (*p != '\'')
				*out++ = '\\';
			*out++ = *p;
			quote = 0;
		} else {
			/*
			 * Quoted: all of it up to the closing quote, at once
			 * (values are quoted; this loop was most of parsing
			 * a rule, 10,000 times in a re-exec).
			 */
			const char *q = strchrnul(p, '\'');

			memcpy(out, p, (size_t)(q - p));
			out += q - p;
			p = q;
			if (!*p)
				break;
			quote = 0;
		}
	}
	if (quote == '\\') {
		*out++ = '\\';
	} else if (quote == '\'') {
		set_reason(reasonp, "Unbalanced quotation marks in match rule");
		return MATCH_E_INVALID;
	}
	*out++ = '\0';
	*pp = p;
	*outp = out;
	return 0;
}

/*
 * Read the key='value' pair at *@pp into the next token and advance *@pp
 * past it. A pair without key adds no token and sets *@no_keyp.
 */
static int tokenize_pair(struct parse_state *st, const char **pp, bool *no_keyp,
			 const char **reasonp)
{
	const char *p = skip_white(*pp), *key = p, *key_end;
	char *value = st->values + st->used, *out = value;
	struct token *t;
	int r;

	while (*p && *p != '=' && !is_white(*p))
		++p;
	key_end = p;
	p = skip_white(p);
	if (key == key_end) {
		*no_keyp = true;
		return 0;
	}
	if (*p != '=') {
		set_reason(reasonp, "Match rule has a key with no subsequent '=' character");
		return MATCH_E_INVALID;
	}
	++p;
	r = unquote_value(&p, &out, reasonp);
	if (r)
		return r;

	t = &st->tokens[st->n_tokens++];
	t->key = key;
	t->key_len = key_end - key;
	t->value = value;
	t->value_len = (size_t)(out - value) - 1;
	st->used = out - st->values;
	*pp = p;
	return 0;
}

/*
 * Split @text into tokens exactly as dbus-daemon's tokenize_rule(): at most
 * 16 tokens; an empty key ends the useful part of the rule. (dbus-daemon
 * keeps looking at the same '=' until it runs out of tokens, so nothing
 * after it is ever read: stopping there is the same.)
 */
static int tokenize(struct parse_state *st, const char *text, size_t len,
		    const char **reasonp)
{
	const char *p = text, *end = text + len;

	while (st->n_tokens < MAX_TOKENS && p < end) {
		bool no_key = false;
		int r;

		r = tokenize_pair(st, &p, &no_key, reasonp);
		if (r)
			return r;
		if (no_key)
			break;
	}
	return 0;
}

static bool key_is(const struct token *t, const char *k)
{
	return t->key_len == strlen(k) && memcmp(t->key, k, t->key_len) == 0;
}

static int parse_type(const char *s)
{
	if (strcmp(s, "signal") == 0)
		return MATCH_TYPE_SIGNAL;
	if (strcmp(s, "method_call") == 0)
		return MATCH_TYPE_METHOD_CALL;
	if (strcmp(s, "method_return") == 0)
		return MATCH_TYPE_METHOD_RETURN;
	if (strcmp(s, "error") == 0)
		return MATCH_TYPE_ERROR;
	return MATCH_TYPE_INVALID;
}

static int apply_type(struct match_rule *rule, const struct token *t, const char **reasonp)
{
	/* dbus-daemon ends many of its texts with a newline: so do we. */
	if (rule->keys & MATCH_KEY_TYPE) {
		set_reason(reasonp, "Key type specified twice in match rule\n");
		return MATCH_E_INVALID;
	}
	rule->type = parse_type(t->value);
	if (rule->type == MATCH_TYPE_INVALID) {
		set_reason(reasonp, "Invalid message type (%s) in match rule\n", t->value);
		return MATCH_E_INVALID;
	}
	rule->keys |= MATCH_KEY_TYPE;
	return 0;
}

static int apply_eavesdrop(struct match_rule *rule, const struct token *t,
			   const char **reasonp)
{
	/* May repeat (monitors append eavesdrop='true'): last wins. */
	if (strcmp(t->value, "true") == 0) {
		rule->eavesdrop = true;
	} else if (strcmp(t->value, "false") == 0) {
		rule->eavesdrop = false;
	} else {
		set_reason(reasonp, "eavesdrop='%s' is invalid, it should be 'true' or 'false'\n",
			   t->value);
		return MATCH_E_INVALID;
	}
	return 0;
}

/* The keys whose value is a name or path, stored as a string of the rule. */
struct string_key {
	const char *name;
	uint32_t bit;           /* MATCH_KEY_* it sets */
	uint32_t exclusive;     /* MATCH_KEY_* it cannot be combined with (itself included) */
	size_t offset;          /* of its const char * in struct match_rule */
	bool (*valid)(const char *s, size_t n);
	/* For the reasons, as dbus-daemon words them: */
	const char *twice;      /* NULL: "Key <name> specified twice..." */
	const char *what;       /* "<what> '<value>' is invalid" */
};

/*
 * sender= and destination= take what dbus-daemon takes (libdbus' lenient
 * unique names), since clients may depend on a rule being accepted.
 */
static const struct string_key string_keys[] = {
	{ "sender", MATCH_KEY_SENDER, MATCH_KEY_SENDER,
	  offsetof(struct match_rule, sender), validate_bus_name_lenient,
	  NULL, "Sender name" },
	{ "interface", MATCH_KEY_INTERFACE, MATCH_KEY_INTERFACE,
	  offsetof(struct match_rule, interface), validate_interface_name,
	  NULL, "Interface name" },
	{ "member", MATCH_KEY_MEMBER, MATCH_KEY_MEMBER,
	  offsetof(struct match_rule, member), validate_member_name,
	  NULL, "Member name" },
	{ "path", MATCH_KEY_PATH, MATCH_KEY_PATH | MATCH_KEY_PATH_NAMESPACE,
	  offsetof(struct match_rule, path), validate_object_path,
	  "path or path_namespace specified twice in match rule\n", "Path" },
	{ "path_namespace", MATCH_KEY_PATH_NAMESPACE, MATCH_KEY_PATH | MATCH_KEY_PATH_NAMESPACE,
	  offsetof(struct match_rule, path), validate_path_namespace,
	  "path or path_namespace specified twice in match rule\n", "Path" },
	{ "destination", MATCH_KEY_DESTINATION, MATCH_KEY_DESTINATION,
	  offsetof(struct match_rule, destination), validate_bus_name_lenient,
	  NULL, "Destination name" },
};

static const struct string_key *find_string_key(const struct token *t)
{
	for (size_t i = 0; i < ARRAY_SIZE(string_keys); i++)
		if (key_is(t, string_keys[i].name))
			return &string_keys[i];
	return NULL;
}

static int apply_string_key(struct match_rule *rule, const struct string_key *k,
			    const struct token *t, const char **reasonp)
{
	if (rule->keys & k->exclusive) {
		if (k->twice)
			set_reason(reasonp, "%s", k->twice);
		else
			set_reason(reasonp, "Key %s specified twice in match rule\n", k->name);
		return MATCH_E_INVALID;
	}
	if (!k->valid(t->value, t->value_len)) {
		set_reason(reasonp, "%s '%s' is invalid\n", k->what, t->value);
		return MATCH_E_INVALID;
	}
	*(const char **)((char *)rule + k->offset) = t->value;
	rule->keys |= k->bit;
	return 0;
}

/*
 * Split an argN, argNpath or arg0namespace key into the argument number and
 * the kind of condition. libdbus parses the number with strtoul(base 0); so
 * do we, signs and hex included.
 */
static int parse_arg_key(const struct token *t, unsigned long *argp, uint8_t *kindp,
			 const char **reasonp)
{
	char key[MATCH_RULE_MAX_LENGTH + 1];
	char *end;

	if (t->key_len < 4) {
		set_reason(reasonp, "Key '%.*s' in match rule starts with 'arg' but lacks an "
			   "arg number. Should be 'arg0' or 'arg7' for example.\n",
			   (int)t->key_len, t->key);
		return MATCH_E_INVALID;
	}
	/*
	 * A client's key fits (its rule is at most 1024 bytes); only a restored
	 * rule of up to 8 KiB could have a longer one, and none of ours does.
	 */
	if (t->key_len >= sizeof(key))
		goto unparsable;
	memcpy(key, t->key, t->key_len);
	key[t->key_len] = '\0';
	errno = 0;
	*argp = strtoul(key + 3, &end, 0);
	if (end == key + 3 || errno != 0)
		goto unparsable;
	if (*end == '\0') {
		*kindp = MATCH_ARG_STRING;
	} else if (strcmp(end, "path") == 0) {
		*kindp = MATCH_ARG_PATH;
	} else if (strcmp(key, "arg0namespace") == 0) {
		*kindp = MATCH_ARG_NAMESPACE;
	} else {
		set_reason(reasonp, "Key '%s' in match rule contains junk after argument number "
			   "(%lu). Only 'arg%lupath' (for example) or 'arg0namespace' are valid",
			   key, *argp, *argp);
		return MATCH_E_INVALID;
	}
	return 0;

unparsable:
	set_reason(reasonp, "Key '%.*s' in match rule starts with 'arg' but could not parse "
		   "arg number. Should be 'arg0' or 'arg7' for example.\n",
		   (int)t->key_len, t->key);
	return MATCH_E_INVALID;
}

static int apply_arg_key(struct parse_state *st, const struct token *t, const char **reasonp)
{
	unsigned long arg;
	uint8_t kind;
	int r;

	r = parse_arg_key(t, &arg, &kind, reasonp);
	if (r)
		return r;
	if (kind == MATCH_ARG_NAMESPACE && !validate_namespace_lenient(t->value, t->value_len)) {
		set_reason(reasonp, "arg0namespace='%s' is not a valid prefix of a bus name",
			   t->value);
		return MATCH_E_INVALID;
	}
	/* "arg-1" is strtoul()'s ULONG_MAX, as dbus-daemon says. */
	if (arg > MATCH_ARG_MAX) {
		set_reason(reasonp, "Key '%.*s' in match rule has arg number %lu but the maximum "
			   "is %d.\n", (int)t->key_len, t->key, arg, MATCH_ARG_MAX);
		return MATCH_E_INVALID;
	}
	if (arg < st->n_args && st->args[arg].value) {
		set_reason(reasonp, "Argument %.*s matched more than once in match rule\n",
			   (int)t->key_len, t->key);
		return MATCH_E_INVALID;
	}
	/* The arguments skipped up to this one: without a condition. */
	for (; st->n_args <= arg; st->n_args++)
		st->args[st->n_args] = (struct match_arg){};
	st->args[arg].value = t->value;
	st->args[arg].len = t->value_len;
	st->args[arg].kind = kind;
	st->rule.keys |= MATCH_KEY_ARGS;
	return 0;
}

/* Check one token and record it in @st->rule (or @st->args). */
static int apply_key(struct parse_state *st, const struct token *t, const char **reasonp)
{
	const struct string_key *k;

	if (key_is(t, "type"))
		return apply_type(&st->rule, t, reasonp);
	if (key_is(t, "eavesdrop"))
		return apply_eavesdrop(&st->rule, t, reasonp);
	k = find_string_key(t);
	if (k)
		return apply_string_key(&st->rule, k, t, reasonp);
	if (t->key_len >= 3 && memcmp(t->key, "arg", 3) == 0)
		return apply_arg_key(st, t, reasonp);
	set_reason(reasonp, "Unknown key \"%.*s\" in match rule", (int)t->key_len, t->key);
	return MATCH_E_INVALID;
}

static const char *copy_str(char **pos, const char *s)
{
	size_t n;
	char *r;

	if (!s)
		return NULL;
	n = strlen(s) + 1;
	r = *pos;
	memcpy(r, s, n);
	*pos += n;
	return r;
}

/* Move the parsed rule into one allocation: rule, argument array, strings. */
static int build_rule(const struct parse_state *st, struct match_rule **rulep)
{
	struct match_rule *rule;
	size_t total;
	char *pos;

	total = sizeof(*rule) + st->n_args * sizeof(struct match_arg) + st->used + 1;
	rule = calloc(1, total);
	if (!rule)
		return -ENOMEM;
	*rule = st->rule;
	rule->args = (struct match_arg *)(rule + 1);
	pos = (char *)(rule->args + st->n_args);
	rule->sender = copy_str(&pos, st->rule.sender);
	rule->interface = copy_str(&pos, st->rule.interface);
	rule->member = copy_str(&pos, st->rule.member);
	rule->path = copy_str(&pos, st->rule.path);
	rule->destination = copy_str(&pos, st->rule.destination);
	rule->n_args = st->n_args;
	for (size_t i = 0; i < st->n_args; i++) {
		rule->args[i] = st->args[i];
		rule->args[i].value = copy_str(&pos, st->args[i].value);
	}
	list_init(&rule->owner_link);
	list_init(&rule->bucket_link);
	list_init(&rule->registry_link);
	*rulep = rule;
	return 0;
}

/* match_rule_parse() of a text of at most @max bytes. */
static int parse_text(struct match_rule **rulep, const char *text, size_t max,
		      const char **reasonp)
{
	struct parse_state st;
	size_t len;
	int r;

	len = strnlen(text, max + 1);
	if (len > max) {
		/* The whole length, as dbus-daemon says it. */
		set_reason(reasonp, "Match rule text is %zu bytes, maximum is %zu",
			   strlen(text), max);
		return MATCH_E_TOO_LONG;
	}
	st.n_tokens = 0;
	st.used = 0;
	st.rule = (struct match_rule){};
	st.n_args = 0;

	r = tokenize(&st, text, len, reasonp);
	for (size_t i = 0; r == 0 && i < st.n_tokens; i++)
		r = apply_key(&st, &st.tokens[i], reasonp);
	if (r == 0)
		r = build_rule(&st, rulep);
	return r;
}

int match_rule_parse(struct match_rule **rulep, const char *text, const char **reasonp)
{
	return parse_text(rulep, text, MATCH_RULE_MAX_LENGTH, reasonp);
}

struct match_rule *match_rule_free(struct match_rule *rule)
{
	if (!rule)
		return NULL;
	if (rule->registry)
		match_registry_remove(rule);
	else
		free(rule);
	return NULL;
}

void match_rule_set_eavesdrop(struct match_rule *rule, bool eavesdrop)
{
	rule->eavesdrop = eavesdrop;
}

static bool str_eq(const char *a, const char *b)
{
	if (!a || !b)
		return a == b;
	return strcmp(a, b) == 0;
}

bool match_rule_equal(const struct match_rule *a, const struct match_rule *b)
{
	if (a->keys != b->keys || a->eavesdrop != b->eavesdrop || a->n_args != b->n_args)
		return false;
	if ((a->keys & MATCH_KEY_TYPE) && a->type != b->type)
		return false;
	if (!str_eq(a->sender, b->sender) || !str_eq(a->interface, b->interface) ||
	    !str_eq(a->member, b->member) || !str_eq(a->path, b->path) ||
	    !str_eq(a->destination, b->destination))
		return false;
	for (size_t i = 0; i < a->n_args; i++) {
		if (a->args[i].kind != b->args[i].kind ||
		    !str_eq(a->args[i].value, b->args[i].value))
			return false;
	}
	return true;
}

/*
 * @n bytes of @s at *@pos, as many as fit before the NUL; *@pos counts them
 * all. In spans, not byte by byte: a re-exec writes every rule this way
 * (a fifth of writing the state, byte by byte).
 */
static void append_n(char *buf, size_t size, size_t *pos, const char *s, size_t n)
{
	if (*pos + 1 < size) {
		size_t k = MIN(n, size - 1 - *pos);

		memcpy(buf + *pos, s, k);
		buf[*pos + k] = '\0';
	}
	*pos += n;
}

static void append(char *buf, size_t size, size_t *pos, const char *s)
{
	append_n(buf, size, pos, s, strlen(s));
}

static void append_kv(char *buf, size_t size, size_t *pos, const char *key, const char *v)
{
	if (*pos)
		append(buf, size, pos, ",");
	append(buf, size, pos, key);
	append(buf, size, pos, "='");
	for (;;) {
		const char *q = strchrnul(v, '\'');

		append_n(buf, size, pos, v, (size_t)(q - v));
		if (!*q)
			break;
		/* A quote cannot be escaped inside quotes: close, escape, reopen. */
		append(buf, size, pos, "'\\''");
		v = q + 1;
	}
	append(buf, size, pos, "'");
}

int match_rule_to_string(const struct match_rule *rule, char *buf, size_t size)
{
	static const char *const types[] = { "invalid", "method_call", "method_return",
					     "error", "signal" };
	size_t pos = 0;

	if (size)
		buf[0] = '\0';
	if (rule->keys & MATCH_KEY_TYPE)
		append_kv(buf, size, &pos, "type", types[rule->type < 5 ? rule->type : 0]);
	if (rule->interface)
		append_kv(buf, size, &pos, "interface", rule->interface);
	if (rule->member)
		append_kv(buf, size, &pos, "member", rule->member);
	if (rule->path)
		append_kv(buf, size, &pos, (rule->keys & MATCH_KEY_PATH) ? "path" :
			  "path_namespace", rule->path);
	if (rule->sender)
		append_kv(buf, size, &pos, "sender", rule->sender);
	if (rule->destination)
		append_kv(buf, size, &pos, "destination", rule->destination);
	if (rule->eavesdrop)
		append_kv(buf, size, &pos, "eavesdrop", "true");
	for (size_t i = 0; i < rule->n_args; i++) {
		char key[24];

		if (!rule->args[i].value)
			continue;
		snprintf(key, sizeof(key), "arg%zu%s", i,
			 rule->args[i].kind == MATCH_ARG_PATH ? "path" :
			 rule->args[i].kind == MATCH_ARG_NAMESPACE ? "namespace" : "");
		append_kv(buf, size, &pos, key, rule->args[i].value);
	}
	return pos < size ? 0 : -ENOBUFS;
}

/* ---- evaluation --------------------------------------------------------- */

/* dbus-daemon's connection_is_primary_owner(), unique names included. */
static bool owner_has_name(const struct name_owner *o, const char *name)
{
	if (name[0] == ':')
		return strcmp(o->unique_name, name) == 0;
	return name_owner_is_primary(o, name);
}

static bool arg_matches(const struct match_arg *a, uint8_t type, const char *actual)
{
	size_t alen, elen = a->len;
	const char *exp = a->value;

	if (type != 's' && !(a->kind == MATCH_ARG_PATH && type == 'o'))
		return false;
	if (!actual)
		return false;
	alen = strlen(actual);

	switch (a->kind) {
	case MATCH_ARG_PATH:
		/* Equal, or one is a prefix of the other that ends in '/'. */
		if (alen < elen && (alen == 0 || actual[alen - 1] != '/'))
			return false;
		if (elen < alen && (elen == 0 || exp[elen - 1] != '/'))
			return false;
		return memcmp(actual, exp, MIN(alen, elen)) == 0;
	case MATCH_ARG_NAMESPACE:
		if (elen > alen || memcmp(exp, actual, elen) != 0)
			return false;
		return elen == alen || actual[elen] == '.';
	default:
		return elen == alen && memcmp(exp, actual, elen) == 0;
	}
}

bool match_rule_matches(const struct match_rule *rule, const struct match_message *msg)
{
	if ((rule->keys & MATCH_KEY_TYPE) && rule->type != msg->type)
		return false;
	if (rule->interface && !str_eq(rule->interface, msg->interface))
		return false;
	if (rule->member && !str_eq(rule->member, msg->member))
		return false;
	if (rule->sender) {
		if (!msg->sender) {
			if (strcmp(rule->sender, NAME_DRIVER) != 0)
				return false;
		} else if (!owner_has_name(msg->sender, rule->sender)) {
			return false;
		}
	}
	if (rule->destination) {
		/* Only eavesdroppers match on another connection's messages. */
		if (!msg->destination || !rule->eavesdrop)
			return false;
		if (!msg->recipient_names) {
			if (strcmp(rule->destination, msg->destination) != 0)
				return false;
		} else if (!owner_has_name(msg->recipient_names, rule->destination)) {
			return false;
		}
	} else if (msg->destination && !rule->eavesdrop) {
		return false;
	}
	if (rule->path) {
		if (!msg->path)
			return false;
		if (rule->keys & MATCH_KEY_PATH) {
			if (strcmp(rule->path, msg->path) != 0)
				return false;
		} else {
			size_t len = strlen(rule->path);

			if (strncmp(msg->path, rule->path, len) != 0)
				return false;
			if (len > 1 && msg->path[len] != '\0' && msg->path[len] != '/')
				return false;
		}
	}
	for (size_t i = 0; i < rule->n_args; i++) {
		const struct match_arg *a = &rule->args[i];

		if (!a->value)
			continue;
		if (i >= msg->n_args)
			return false;
		if (!arg_matches(a, msg->arg_types[i], msg->args[i]))
			return false;
	}
	return true;
}

/* ---- registry and index ------------------------------------------------- */

/* A rule of @owner was added to @reg: raise the high-water marks. */
static void match_note_peaks(struct match_registry *reg, struct match_owner *owner)
{
	struct match_peaks *p = reg->peaks;

	if (owner->n_rules > owner->peak_rules)
		owner->peak_rules = (uint32_t)owner->n_rules;
	if (!p)
		return;
	if (++p->n_rules > p->peak_rules)
		p->peak_rules = (uint32_t)p->n_rules;
	if (owner->peak_rules > p->peak_rules_per_owner)
		p->peak_rules_per_owner = owner->peak_rules;
}

void match_registry_set_peaks(struct match_registry *reg, struct match_peaks *peaks)
{
	assert(!reg->peaks && peaks);
	reg->peaks = peaks;
	peaks->n_rules += reg->n_rules;
}

int match_registry_new(struct match_registry **regp)
{
	struct match_registry *reg;

	reg = calloc(1, sizeof(*reg));
	if (!reg)
		return -ENOMEM;
	hmap_init(&reg->buckets);
	hmap_init(&reg->uniq_senders);
	hmap_init(&reg->uniq_dests);
	hmap_init(&reg->sender_keys);
	list_init(&reg->rules);
	*regp = reg;
	return 0;
}

struct match_registry *match_registry_free(struct match_registry *reg)
{
	if (!reg)
		return NULL;
	if (reg->n_rules)
		abort(); /* rules would point at dead owners */
	/* No rule left: no bucket nor sender key either. */
	assert(hmap_size(&reg->buckets) == 0 && hmap_size(&reg->sender_keys) == 0);
	hmap_deinit(&reg->buckets);
	hmap_deinit(&reg->uniq_senders);
	hmap_deinit(&reg->uniq_dests);
	hmap_deinit(&reg->sender_keys);
	free(reg);
	return NULL;
}

size_t match_registry_count(const struct match_registry *reg)
{
	return reg->n_rules;
}

void match_owner_init(struct match_owner *owner, const struct name_owner *names)
{
	owner->names = names;
	list_init(&owner->rules);
	owner->n_rules = 0;
	owner->generation = 0;
	list_init(&owner->result_link);
}

void match_owner_deinit(struct match_owner *owner)
{
	while (!list_is_empty(&owner->rules))
		match_registry_remove(list_entry(owner->rules.next, struct match_rule, owner_link));
	assert(owner->n_rules == 0);
}

static void rule_keys(const struct match_rule *rule, const char *keys[_IDX_N], unsigned int *maskp)
{
	unsigned int mask = 0;

	keys[IDX_SENDER] = rule->sender;
	keys[IDX_INTERFACE] = rule->interface;
	keys[IDX_MEMBER] = rule->member;
	keys[IDX_PATH] = (rule->keys & MATCH_KEY_PATH) ? rule->path : NULL;
	keys[IDX_ARG0] = (rule->n_args > 0 && rule->args[0].kind == MATCH_ARG_STRING) ?
			 rule->args[0].value : NULL;
	for (unsigned int i = 0; i < _IDX_N; i++)
		if (keys[i])
			mask |= 1u << i;
	*maskp = mask;
}

static uint64_t bucket_hash(unsigned int mask, const uint64_t h[_IDX_N])
{
	uint64_t r = mask;

	for (unsigned int i = 0; i < _IDX_N; i++)
		if (mask & (1u << i))
			r = hash_combine(r, h[i]);
	return r;
}

static struct match_bucket *bucket_find(struct match_registry *reg, unsigned int mask,
					const char *const keys[_IDX_N], uint64_t hash)
{
	hmap_for_each_hash(n, &reg->buckets, hash) {
		struct match_bucket *b = container_of(n, struct match_bucket, node);
		unsigned int i;

		if (b->mask != mask)
			continue;
		for (i = 0; i < _IDX_N; i++)
			if ((mask & (1u << i)) && strcmp(b->keys[i], keys[i]) != 0)
				break;
		if (i == _IDX_N)
			return b;
	}
	return NULL;
}

static uint64_t uniq_hash(const char *s)
{
	return hash_str(s);
}

static struct sender_key *sender_key_find(struct match_registry *reg, const char *str,
					   uint64_t hash)
{
	hmap_for_each_hash(n, &reg->sender_keys, hash) {
		struct sender_key *k = container_of(n, struct sender_key, node);

		if (strcmp(k->str, str) == 0)
			return k;
	}
	return NULL;
}

static int sender_key_ref(struct match_registry *reg, const char *str)
{
	uint64_t hash = hash_str(str);
	struct sender_key *k = sender_key_find(reg, str, hash);
	size_t len;
	int r;

	if (k) {
		k->n_rules++;
		return 0;
	}
	len = strlen(str);
	k = calloc(1, sizeof(*k) + len + 1);
	if (!k)
		return -ENOMEM;
	memcpy(k->str, str, len + 1);
	k->n_rules = 1;
	r = hmap_insert(&reg->sender_keys, &k->node, hash);
	if (r < 0)
		free(k);
	return r;
}

static void sender_key_unref(struct match_registry *reg, const char *str)
{
	struct sender_key *k = sender_key_find(reg, str, hash_str(str));

	/* Every rule with a sender= holds a reference on its key. */
	assert(k && k->n_rules > 0);
	if (k && --k->n_rules == 0) {
		hmap_remove(&reg->sender_keys, &k->node);
		free(k);
	}
}

void match_registry_set_sender_strategy(struct match_registry *reg, int strategy)
{
	reg->sender_strategy = strategy;
}

int match_registry_add(struct match_registry *reg, struct match_owner *owner,
		       struct match_rule *rule)
{
	const char *keys[_IDX_N];
	uint64_t h[_IDX_N] = {}, hash;
	struct match_bucket *b;
	unsigned int mask;
	bool new_bucket = false;
	int r;

	/* A rule is in one registry at a time: its links are its own. */
	assert(!rule->registry);
	rule_keys(rule, keys, &mask);
	assert(mask < IDX_MASKS);
	for (unsigned int i = 0; i < _IDX_N; i++)
		if (keys[i])
			h[i] = hash_str(keys[i]);
	hash = bucket_hash(mask, h);

	b = bucket_find(reg, mask, keys, hash);
	if (!b) {
		size_t total = 0;
		char *pos;

		for (unsigned int i = 0; i < _IDX_N; i++)
			if (keys[i])
				total += strlen(keys[i]) + 1;
		b = calloc(1, sizeof(*b) + total);
		if (!b)
			return -ENOMEM;
		b->mask = mask;
		pos = b->buf;
		for (unsigned int i = 0; i < _IDX_N; i++)
			b->keys[i] = copy_str(&pos, keys[i]);
		list_init(&b->rules);
		r = hmap_insert(&reg->buckets, &b->node, hash);
		if (r < 0) {
			free(b);
			return r;
		}
		new_bucket = true;
	}
	if (rule->sender) {
		r = sender_key_ref(reg, rule->sender);
		if (r < 0)
			goto fail;
	}
	if (rule->sender && rule->sender[0] == ':') {
		r = hmap_insert(&reg->uniq_senders, &rule->uniq_sender_node,
				uniq_hash(rule->sender));
		if (r < 0)
			goto fail_key;
	}
	if (rule->destination && rule->destination[0] == ':') {
		r = hmap_insert(&reg->uniq_dests, &rule->uniq_dest_node,
				uniq_hash(rule->destination));
		if (r < 0) {
			if (rule->sender && rule->sender[0] == ':')
				hmap_remove(&reg->uniq_senders, &rule->uniq_sender_node);
			goto fail_key;
		}
	}

	rule->registry = reg;
	rule->owner = owner;
	rule->bucket = b;
	list_append(&b->rules, &rule->bucket_link);
	b->n_rules++;
	list_append(&owner->rules, &rule->owner_link);
	owner->n_rules++;
	list_append(&reg->rules, &rule->registry_link);
	reg->n_rules++;
	reg->mask_rules[mask]++;
	match_note_peaks(reg, owner);
	return 0;

fail_key:
	if (rule->sender)
		sender_key_unref(reg, rule->sender);
fail:
	if (new_bucket) {
		hmap_remove(&reg->buckets, &b->node);
		free(b);
	}
	return r;
}

void match_registry_remove(struct match_rule *rule)
{
	struct match_registry *reg = rule->registry;
	struct match_bucket *b = rule->bucket;

	if (!reg) {
		free(rule);
		return;
	}
	assert(b && b->n_rules > 0 && reg->mask_rules[b->mask] > 0);
	assert(rule->owner->n_rules > 0 && reg->n_rules > 0);
	assert(!reg->peaks || reg->peaks->n_rules > 0);
	reg->mask_rules[b->mask]--;
	if (rule->sender)
		sender_key_unref(reg, rule->sender);
	if (rule->sender && rule->sender[0] == ':')
		hmap_remove(&reg->uniq_senders, &rule->uniq_sender_node);
	if (rule->destination && rule->destination[0] == ':')
		hmap_remove(&reg->uniq_dests, &rule->uniq_dest_node);
	list_unlink(&rule->bucket_link);
	if (--b->n_rules == 0) {
		hmap_remove(&reg->buckets, &b->node);
		free(b);
	}
	list_unlink(&rule->owner_link);
	rule->owner->n_rules--;
	list_unlink(&rule->registry_link);
	reg->n_rules--;
	if (reg->peaks)
		reg->peaks->n_rules--;
	free(rule);
}

int match_registry_add_text(struct match_registry *reg, struct match_owner *owner,
			    const char *text, const char **reasonp)
{
	struct match_rule *rule;
	int r;

	r = match_rule_parse(&rule, text, reasonp);
	if (r)
		return r;
	r = match_registry_add(reg, owner, rule);
	if (r)
		free(rule);
	return r;
}

struct match_rule *match_owner_find_newest(const struct match_owner *owner,
					   const struct match_rule *rule)
{
	/* Newest first, as dbus-daemon removes the most recently added. */
	for (struct list_node *n = owner->rules.prev; n != &owner->rules; n = n->prev) {
		struct match_rule *x = list_entry(n, struct match_rule, owner_link);

		if (match_rule_equal(x, rule))
			return x;
	}
	return NULL;
}

int match_registry_remove_text(struct match_registry *reg, struct match_owner *owner,
			       const char *text, const char **reasonp)
{
	struct match_rule *rule, *other;
	int r;

	r = match_rule_parse(&rule, text, reasonp);
	if (r)
		return r;
	other = match_owner_find_newest(owner, rule);
	free(rule);
	if (other) {
		match_registry_remove(other);
		return 0;
	}
	set_reason(reasonp, "The given match rule wasn't found and can't be removed");
	return MATCH_E_NOT_FOUND;
}

static struct match_rule *uniq_find(struct match_registry *reg, const char *name)
{
	hmap_for_each_hash(n, &reg->uniq_senders, uniq_hash(name)) {
		struct match_rule *rule = container_of(n, struct match_rule, uniq_sender_node);

		if (strcmp(rule->sender, name) == 0)
			return rule;
	}
	hmap_for_each_hash(n, &reg->uniq_dests, uniq_hash(name)) {
		struct match_rule *rule = container_of(n, struct match_rule, uniq_dest_node);

		if (strcmp(rule->destination, name) == 0)
			return rule;
	}
	return NULL;
}

size_t match_registry_drop_unique(struct match_registry *reg, const char *unique_name,
				  void (*fn)(void *userdata, struct match_rule *rule),
				  void *userdata)
{
	struct match_rule *rule;
	size_t n = 0;

	if (unique_name[0] != ':')
		return 0;
	while ((rule = uniq_find(reg, unique_name))) {
		/* Indexed here, so removing it takes it out of the index: the loop ends. */
		assert(rule->registry == reg);
		if (fn)
			fn(userdata, rule);
		match_registry_remove(rule);
		n++;
	}
	return n;
}

static void collect(struct match_registry *reg, struct match_owner *owner,
		    struct list_node *result)
{
	if (owner->generation == reg->generation)
		return;
	owner->generation = reg->generation;
	list_append(result, &owner->result_link);
}

static void begin_match(struct match_registry *reg, const struct match_message *msg,
			struct list_node *result)
{
	list_init(result);
	reg->generation = ++match_generation;
	/* The addressed recipient gets the message by routing, never twice. */
	if (msg->recipient)
		((struct match_owner *)msg->recipient)->generation = reg->generation;
}

static void probe(struct match_registry *reg, const struct match_message *msg,
		  unsigned int mask, const char *const keys[_IDX_N], const uint64_t h[_IDX_N],
		  struct list_node *result)
{
	struct match_bucket *b = bucket_find(reg, mask, keys, bucket_hash(mask, h));
	struct match_rule *rule;

	if (!b)
		return;
	list_for_each_entry(rule, &b->rules, bucket_link) {
		if (rule->owner->generation == reg->generation)
			continue; /* already in, no need to evaluate */
		if (match_rule_matches(rule, msg))
			collect(reg, rule->owner, result);
	}
}

/* Probe every non-empty mask that has the sender key, with sender @name. */
static void probe_sender(struct match_registry *reg, const struct match_message *msg,
			 const char *name, unsigned int avail, const char *keys[_IDX_N],
			 uint64_t h[_IDX_N], struct list_node *result)
{
	keys[IDX_SENDER] = name;
	h[IDX_SENDER] = hash_str(name);
	/* One lookup saves up to 16 bucket probes for names no rule uses. */
	if (!sender_key_find(reg, name, h[IDX_SENDER]))
		return;
	for (unsigned int mask = 0; mask < IDX_MASKS; mask++) {
		if (!reg->mask_rules[mask] || !(mask & (1u << IDX_SENDER)) ||
		    (mask & ~avail & ~(1u << IDX_SENDER)))
			continue;
		probe(reg, msg, mask, keys, h, result);
	}
}

void match_registry_match(struct match_registry *reg, const struct match_message *msg,
			  struct list_node *result)
{
	const char *keys[_IDX_N];
	uint64_t h[_IDX_N] = {};
	unsigned int avail = 0;
	bool sender_masks = false;

	begin_match(reg, msg, result);
	if (!reg->n_rules)
		return;

	keys[IDX_SENDER] = NULL;
	keys[IDX_INTERFACE] = msg->interface;
	keys[IDX_MEMBER] = msg->member;
	keys[IDX_PATH] = msg->path;
	keys[IDX_ARG0] = (msg->n_args > 0 && msg->arg_types[0] == 's') ? msg->args[0] : NULL;
	for (unsigned int i = IDX_INTERFACE; i < _IDX_N; i++) {
		if (keys[i]) {
			avail |= 1u << i;
			h[i] = hash_str(keys[i]);
		}
	}

	/* Masks without the sender key: one probe each. */
	for (unsigned int mask = 0; mask < IDX_MASKS; mask++) {
		if (!reg->mask_rules[mask] || (mask & ~avail & ~(1u << IDX_SENDER)))
			continue;
		if (mask & (1u << IDX_SENDER)) {
			sender_masks = true;
			continue;
		}
		probe(reg, msg, mask, keys, h, result);
	}
	if (!sender_masks)
		return;

	/*
	 * Masks with the sender key: probe once per name the sender answers to
	 * (its unique name and each name it is primary owner of). A sender
	 * owning many names could make that expensive, so when it owns more
	 * names than there are distinct sender= values in all rules, walk those
	 * values instead and probe the ones that designate the sender.
	 */
	if (!msg->sender) {
		probe_sender(reg, msg, NAME_DRIVER, avail, keys, h, result);
		return;
	}
	if (reg->sender_strategy == MATCH_SENDER_BY_KEYS ||
	    (reg->sender_strategy == MATCH_SENDER_AUTO &&
	     msg->sender->n_ownerships > hmap_size(&reg->sender_keys))) {
		for (struct hmap_node *n = hmap_next(&reg->sender_keys, NULL); n;
		     n = hmap_next(&reg->sender_keys, n)) {
			const char *k = container_of(n, struct sender_key, node)->str;

			if (owner_has_name(msg->sender, k))
				probe_sender(reg, msg, k, avail, keys, h, result);
		}
		return;
	}
	probe_sender(reg, msg, msg->sender->unique_name, avail, keys, h, result);
	for (const struct list_node *n = msg->sender->ownerships.next;
	     n != &msg->sender->ownerships; n = n->next) {
		const struct name_ownership *o = list_entry(n, struct name_ownership, owner_link);

		if (name_primary(o->name) == o)
			probe_sender(reg, msg, o->name->str, avail, keys, h, result);
	}
}

void match_registry_match_slow(struct match_registry *reg, const struct match_message *msg,
			       struct list_node *result)
{
	struct match_rule *rule;

	begin_match(reg, msg, result);
	list_for_each_entry(rule, &reg->rules, registry_link)
		if (rule->owner->generation != reg->generation && match_rule_matches(rule, msg))
			collect(reg, rule->owner, result);
}

int match_owner_serialize(const struct match_owner *owner, struct state_writer *w)
{
	const struct match_rule *rule;
	char *text = malloc(MATCH_STATE_RULE_MAX);
	int r;

	if (!text)
		return -ENOMEM;
	state_put_section(w, STATE_TAG_MATCHES, MATCH_OWNER_STATE_VERSION);
	state_put_u64(w, owner->n_rules);
	list_for_each_entry(rule, &owner->rules, owner_link) {
		r = match_rule_to_string(rule, text, MATCH_STATE_RULE_MAX);
		if (r < 0) {
			free(text);
			return r;
		}
		state_put_str(w, text);
		state_put_u32(w, rule->eavesdrop);
	}
	free(text);
	return 0;
}

bool match_owner_state_read(struct state_reader *r, struct match_owner_state *st)
{
	uint32_t version;
	size_t n;

	*st = (struct match_owner_state){};
	if (!state_section(r, STATE_TAG_MATCHES, MATCH_OWNER_STATE_VERSION, &version))
		return false;
	n = state_get_count(r, 12);
	if (!n)
		return !r->error;
	st->rules = calloc(n, sizeof(*st->rules));
	if (!st->rules) {
		r->error = true;
		return false;
	}
	st->n_rules = n;
	for (size_t i = 0; i < n; i++) {
		st->rules[i].text = state_get_str(r);
		st->rules[i].eavesdrop = state_get_u32(r) != 0;
		if (!st->rules[i].text)
			r->error = true;
	}
	return !r->error;
}

void match_owner_state_deinit(struct match_owner_state *st)
{
	free(st->rules);
	*st = (struct match_owner_state){};
}

void match_registry_reserve(struct match_registry *reg, size_t n_rules)
{
	/* A bucket per rule at most (rules with the same keys share one). */
	hmap_reserve(&reg->buckets, n_rules);
}

int match_owner_restore(struct match_registry *reg, struct match_owner *owner,
			const struct match_owner_state *st)
{
	for (size_t i = 0; i < st->n_rules; i++) {
		struct match_rule *rule;
		const char *reason;
		int r;

		/* Its canonical text, which may be longer than a client may send. */
		r = parse_text(&rule, st->rules[i].text, MATCH_STATE_RULE_MAX, &reason);
		if (r)
			return r < 0 ? r : -EINVAL;
		match_rule_set_eavesdrop(rule, st->rules[i].eavesdrop);
		r = match_registry_add(reg, owner, rule);
		if (r < 0) {
			match_rule_free(rule);
			return r;
		}
	}
	return 0;
}
