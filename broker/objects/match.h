/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/**
 * DOC: Match rules
 *
 * Parsing, storing and evaluating D-Bus match rules (AddMatch / RemoveMatch /
 * BecomeMonitor), following dbus-daemon 1.14 (bus/signals.c).
 *
 * Grammar (as dbus-daemon tokenizes it): up to 16 `key=value` tokens separated
 * by ','; whitespace (space, tab, CR, LF) before a key and between key and '='
 * is skipped, but NOT after '=' (it belongs to the value). In a value, '...'
 * quotes everything up to the next quote (no escapes inside quotes); outside
 * quotes, a backslash escapes only a single quote (\' -> '); any other
 * backslash is kept literally. A ',' outside quotes ends the value. Tokens
 * after the 16th are ignored; an empty key (a '=' with nothing before it) ends
 * the rule: it and everything after it are ignored. Whole text longer than
 * 1024 bytes: MATCH_E_TOO_LONG (driver: org.freedesktop.DBus.Error.LimitsExceeded).
 *
 * Keys: type (signal|method_call|method_return|error), sender (bus name),
 * interface, member, path and path_namespace (object paths; at most one of the
 * two), destination (bus name), eavesdrop (true|false, may repeat: the last
 * wins), argN (string), argNpath (string), arg0namespace (bus-name prefix).
 * N is parsed like strtoul(base 0) (so "arg0x1" is arg1), at most 63. A key
 * given twice, an unknown key, a key without '=', an unbalanced quote, or an
 * invalid value: MATCH_E_INVALID (org.freedesktop.DBus.Error.MatchRuleInvalid).
 * Values are checked by dbus-compat/validate.h; sender=, destination= and
 * arg0namespace= with its *_lenient() rules, which are dbus-daemon's.
 *
 * Matching (all given keys must hold):
 *  - type: equal message type.
 *  - interface / member / path: the message has the field and it is equal.
 *  - path_namespace P: the message path equals P or starts with P + "/";
 *    P = "/" matches every path.
 *  - sender S: S is the sender's unique name or a well-known name the sender
 *    is the PRIMARY owner of; a message from the driver (sender NULL) matches
 *    only S = "org.freedesktop.DBus".
 *  - destination D: only with eavesdrop=true; the message must have a
 *    destination, and D is the addressed recipient's unique name or a name it
 *    is primary owner of (with no recipient connection: D equals the message's
 *    destination field).
 *  - no destination key: the message is a broadcast (no destination field) or
 *    the rule has eavesdrop=true.
 *  - argN V: the N-th argument is a STRING equal to V.
 *  - argNpath V: the N-th argument is a string or object path A, and A == V,
 *    or one of them ends in '/' and is a prefix of the other.
 *  - arg0namespace V: argument 0 is a string equal to V or starting with V".".
 * The addressed recipient itself is never part of the result (it receives the
 * message by routing). Policy (e.g. whether a connection may eavesdrop) is the
 * caller's business.
 *
 * Equality (RemoveMatch): same owner, same keys with the same values, same
 * eavesdrop flag. AddMatch of an equal rule twice stores two rules; RemoveMatch
 * removes one of them (the newest).
 *
 * Index: every rule lives in one bucket keyed by its values of the five
 * equality keys (sender, interface, member, path, arg0) plus a mask of which of
 * them it sets. Matching a message probes, for each of the (at most 32) masks
 * that have rules, the one bucket whose key equals the message's values (for
 * the sender: once per name it answers to, i.e. its unique name and each name
 * it is primary owner of that some rule uses; or, if the sender owns more
 * names than there are distinct sender= values, once per such value that
 * designates it), and evaluates only the rules in the buckets found. Measured
 * by test/unit/broker/bench-match.c. The cost is independent
 * of the number of rules whose keys differ from the message's. Each owner is
 * reported once per message, deduplicated with a generation counter.
 *
 * Checked against a real dbus-daemon: the grammar by check-match-rules.py
 * (test/unit/broker/match-rules.txt), the delivery sets by
 * test-match-dbus-daemon.c; the index against a brute-force scan by
 * test-match-index.c and test/fuzz/fuzz-match.c.
 *
 * Routing note (not matching): dbus-daemon shows a message addressed to the
 * driver to eavesdroppers only if the driver handled it without error, and
 * drops a unicast to a name without owner before matching.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "util/hashmap.h"
#include "util/list.h"

struct name_owner;

#define MATCH_RULE_MAX_LENGTH 1024
#define MATCH_ARG_MAX 63
#define MATCH_ARGS 64

/* D-Bus message types, as on the wire. */
enum {
	MATCH_TYPE_INVALID = 0,
	MATCH_TYPE_METHOD_CALL = 1,
	MATCH_TYPE_METHOD_RETURN = 2,
	MATCH_TYPE_ERROR = 3,
	MATCH_TYPE_SIGNAL = 4,
};

/* Positive error codes. */
enum {
	_MATCH_E_SUCCESS,
	MATCH_E_INVALID,	/* org.freedesktop.DBus.Error.MatchRuleInvalid */
	MATCH_E_TOO_LONG,	/* org.freedesktop.DBus.Error.LimitsExceeded */
	MATCH_E_NOT_FOUND,	/* org.freedesktop.DBus.Error.MatchRuleNotFound */
};

/* Kinds of argument conditions in a rule. */
enum {
	MATCH_ARG_NONE = 0,
	MATCH_ARG_STRING,    /* argN */
	MATCH_ARG_PATH,      /* argNpath */
	MATCH_ARG_NAMESPACE, /* arg0namespace */
};

/* Bits of match_rule.keys */
enum {
	MATCH_KEY_TYPE = 1u << 0,
	MATCH_KEY_SENDER = 1u << 1,
	MATCH_KEY_INTERFACE = 1u << 2,
	MATCH_KEY_MEMBER = 1u << 3,
	MATCH_KEY_PATH = 1u << 4,
	MATCH_KEY_PATH_NAMESPACE = 1u << 5,
	MATCH_KEY_DESTINATION = 1u << 6,
	MATCH_KEY_ARGS = 1u << 7,
};

struct match_registry;
struct match_bucket;

/*
 * The rules of one connection. Embedded in the caller's connection object
 * (container_of() gets back to it). @names is the same connection's name
 * owner (used for destination= checks); it may be NULL.
 */
struct match_owner {
	const struct name_owner *names;
	struct list_node rules;     /* struct match_rule.owner_link, oldest first */
	size_t n_rules;
	uint32_t peak_rules;        /* the most it ever held (Debug.Stats) */
	uint64_t generation;        /* dedup stamp of the last match run */
	struct list_node result_link; /* in a result list of match_registry_match() */
};

struct match_arg {
	const char *value; /* NULL if no condition on this argument */
	uint32_t len;
	uint8_t kind;      /* MATCH_ARG_* */
};

/* A parsed rule. Immutable once added; strings point into the same allocation. */
struct match_rule {
	struct match_registry *registry; /* set while added */
	struct match_owner *owner;
	struct list_node owner_link;
	struct match_bucket *bucket;
	struct list_node bucket_link;
	uint32_t keys;            /* MATCH_KEY_* */
	uint8_t type;             /* MATCH_TYPE_* if MATCH_KEY_TYPE */
	bool eavesdrop;
	const char *sender;
	const char *interface;
	const char *member;
	const char *path;         /* path or path_namespace */
	const char *destination;
	uint8_t n_args;           /* 1 + highest argument index with a condition */
	struct match_arg *args;   /* n_args entries */
	/* registry bookkeeping */
	struct list_node registry_link;   /* all rules, for the brute-force scan */
	struct hmap_node uniq_sender_node; /* if sender is a unique name */
	struct hmap_node uniq_dest_node;   /* if destination is a unique name */
};

/*
 * What matching needs to know of a message, filled by the caller. Strings are
 * NUL-terminated, NULL when the header field is absent.
 */
struct match_message {
	uint8_t type;                         /* MATCH_TYPE_* */
	const struct name_owner *sender;      /* NULL: sent by the driver */
	const char *destination;              /* header field */
	const struct name_owner *recipient_names; /* addressed recipient (NULL: none/driver) */
	const struct match_owner *recipient;  /* its rules owner; excluded from results */
	const char *path;
	const char *interface;
	const char *member;
	/* Top-level arguments 0..n_args-1: args[i] is the value when arg_types[i]
	 * is 's' or 'o' (only these can match, as in dbus-daemon); for any other
	 * type put its type code (or 0) in arg_types[i] and leave args[i] NULL.
	 * Arguments past the first 64 never matter. */
	uint8_t n_args;
	uint8_t arg_types[MATCH_ARGS];
	const char *args[MATCH_ARGS];
};

/*
 * Parse @text into a new rule. Returns 0, MATCH_E_INVALID, MATCH_E_TOO_LONG or
 * -ENOMEM. On a positive error *@reasonp (if not NULL) points to the D-Bus
 * error message, dbus-daemon 1.14's text byte for byte (naming the offending
 * key or value, and often ending in a newline), in a buffer of the calling
 * thread that is valid until its next call of a match_*() function that
 * takes a @reasonp.
 */
int match_rule_parse(struct match_rule **rulep, const char *text, const char **reasonp);
/* Free a rule that is not added (or unlink it first). Returns NULL. */
struct match_rule *match_rule_free(struct match_rule *rule);
/* dbus-daemon's equality, ignoring the owner. */
bool match_rule_equal(const struct match_rule *a, const struct match_rule *b);
/* Force eavesdrop (BecomeMonitor rules are eavesdropping). Only before adding. */
void match_rule_set_eavesdrop(struct match_rule *rule, bool eavesdrop);
/*
 * Evaluate one rule against one message, without the index and without
 * excluding the recipient (used by tests and the brute-force reference).
 */
bool match_rule_matches(const struct match_rule *rule, const struct match_message *msg);
/* Write the rule in canonical text form into @buf (at most @size bytes). */
int match_rule_to_string(const struct match_rule *rule, char *buf, size_t size);

int match_registry_new(struct match_registry **regp);
/* All owners must have been deinitialized. Returns NULL. */
struct match_registry *match_registry_free(struct match_registry *reg);
size_t match_registry_count(const struct match_registry *reg);

void match_owner_init(struct match_owner *owner, const struct name_owner *names);
/* Remove and free all rules of @owner. */
void match_owner_deinit(struct match_owner *owner);

/* Link @rule (owned by the registry from now on) for @owner. 0 or -ENOMEM
 * (on error the rule is still the caller's). */
int match_registry_add(struct match_registry *reg, struct match_owner *owner,
		       struct match_rule *rule);
/* Unlink and free one rule. */
void match_registry_remove(struct match_rule *rule);

/* AddMatch: parse and add. 0, MATCH_E_INVALID, MATCH_E_TOO_LONG, -ENOMEM. */
int match_registry_add_text(struct match_registry *reg, struct match_owner *owner,
			    const char *text, const char **reasonp);
/* The newest rule of @owner equal to @rule (RemoveMatch's), or NULL. */
struct match_rule *match_owner_find_newest(const struct match_owner *owner,
					   const struct match_rule *rule);
/* RemoveMatch: parse, remove the newest equal rule of @owner.
 * 0, MATCH_E_INVALID, MATCH_E_TOO_LONG, MATCH_E_NOT_FOUND, -ENOMEM. */
int match_registry_remove_text(struct match_registry *reg, struct match_owner *owner,
			       const char *text, const char **reasonp);

/*
 * A connection with unique name @unique_name went away: drop the rules of
 * OTHER connections whose sender= or destination= is that unique name (they
 * can never match again; dbus-daemon drops them too). Returns the number of
 * rules dropped, so the caller can uncharge them (it must do so per owner: use
 * @fn, called before each rule is freed, NULL allowed).
 */
size_t match_registry_drop_unique(struct match_registry *reg, const char *unique_name,
				  void (*fn)(void *userdata, struct match_rule *rule),
				  void *userdata);

/*
 * Find all owners with a rule matching @msg, each once, excluding
 * @msg->recipient. They are linked through result_link into @result (which
 * this function initializes). The list is valid until the next call on @reg;
 * the caller does not need to unlink anything. Allocation-free.
 */
void match_registry_match(struct match_registry *reg, const struct match_message *msg,
			  struct list_node *result);
/*
 * How match_registry_match() finds rules keyed by sender=: by the sender's
 * names (unique + primary-owned), or by walking the distinct sender= values of
 * all rules; AUTO (the default) takes the smaller set. Tests force each.
 */
enum {
	MATCH_SENDER_AUTO,
	MATCH_SENDER_BY_NAMES,
	MATCH_SENDER_BY_KEYS,
};
void match_registry_set_sender_strategy(struct match_registry *reg, int strategy);

/*
 * Re-exec (state.h): an owner's rules, oldest first, as canonical text with
 * their eavesdrop flag (section STATE_TAG_MATCHES, in its peer's). The
 * parsed form points into the reader. match_owner_restore() parses and adds
 * them again: 0, -EINVAL (a rule this program does not parse) or -ENOMEM.
 */
struct state_reader;
struct state_writer;

#define MATCH_OWNER_STATE_VERSION 1u

struct match_owner_state {
	struct match_rule_state {
		const char *text;
		bool eavesdrop;
	} *rules;
	size_t n_rules;
};

int match_owner_serialize(const struct match_owner *owner, struct state_writer *w);
bool match_owner_state_read(struct state_reader *r, struct match_owner_state *st);
void match_owner_state_deinit(struct match_owner_state *st);
/*
 * The high-water marks of match rules (Debug.Stats), noted by the registry
 * as rules are added. Shared by the registries that count together (the
 * bus' and its monitors'): owned by whoever set them up, which outlives them.
 */
struct match_peaks {
	size_t n_rules;             /* now, in every registry that shares it */
	uint32_t peak_rules;
	uint32_t peak_rules_per_owner;
};

/* Count @reg's rules (from now on) in @peaks. */
void match_registry_set_peaks(struct match_registry *reg, struct match_peaks *peaks);

/* Before restoring @n_rules rules in all into @reg: room for them at once (a hint). */
void match_registry_reserve(struct match_registry *reg, size_t n_rules);
int match_owner_restore(struct match_registry *reg, struct match_owner *owner,
			const struct match_owner_state *st);

/* The same, by evaluating every rule (reference for tests and fuzzing). */
void match_registry_match_slow(struct match_registry *reg, const struct match_message *msg,
			       struct list_node *result);
