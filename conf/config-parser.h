/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * The XML reader of conf/ inside (not an API): the parser of one file and
 * what config.c (the elements, includes, the model) and config-rules.c
 * (<allow> and <deny>) share of it.
 */

#include <expat.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include "conf/config.h"
#include "util/macro.h"

enum element_type {
	EL_NONE,
	EL_BUSCONFIG,
	EL_USER,
	EL_TYPE,
	EL_FORK,
	EL_SYSLOG,
	EL_KEEP_UMASK,
	EL_LISTEN,
	EL_PIDFILE,
	EL_AUTH,
	EL_INCLUDEDIR,
	EL_STANDARD_SESSION_SERVICEDIRS,
	EL_STANDARD_SYSTEM_SERVICEDIRS,
	EL_SERVICEDIR,
	EL_SERVICEHELPER,
	EL_INCLUDE,
	EL_POLICY,
	EL_LIMIT,
	EL_ALLOW,
	EL_DENY,
	EL_SELINUX,
	EL_ASSOCIATE,
	EL_APPARMOR,
	EL_ALLOW_ANONYMOUS,
	_EL_N,
};

struct element {
	enum element_type type;
	unsigned int line;
	union {
		struct {
			bool ignore_missing;
			bool if_selinux_enabled;
			bool selinux_root_relative;
		} include;
		struct {
			bool ignored;	/* unknown user/group: rules are dropped */
			enum bus_policy_scope scope;
			uint32_t id;
		} policy;
		struct {
			char *name;
		} limit;
	};
};

/* busconfig > policy > allow is the deepest legal nesting. */
#define STACK_MAX 4
/* Total number of files one load may read (includedirs included). */
#define FILES_MAX 4096
/* Total bytes one load may parse, so that memory stays bounded. */
#define TOTAL_BYTES_MAX (4ULL * BUS_CONFIG_FILE_MAX)

struct loader {
	const struct bus_config_options *opts;
	unsigned int n_files;
	uint64_t n_bytes;
};

struct file_parser {
	struct loader *loader;
	struct file_parser *parent;	/* the including file, for cycle checks */
	struct bus_config *config;	/* this file's fragment */
	const char *path;		/* owned by config->files */
	char *basedir;
	dev_t dev;
	ino_t ino;
	unsigned int depth;
	XML_Parser xml;
	struct element stack[STACK_MAX];
	unsigned int n_stack;
	char *text;
	size_t n_text;
	size_t sz_text;
	int r;				/* 0, BUS_CONFIG_E_INVALID or -errno */
	char *error;			/* with BUS_CONFIG_E_INVALID */
};

int conf_parse_rule(struct file_parser *p, unsigned int line, const char *element,
		      bool allow, const char **atts, const struct element *policy);
int conf_dup_or_null(const char *s, char **out);
bool conf_is_wildcard(const char *s);
int conf_locate_attributes(struct file_parser *p, unsigned int line, const char *element,
			     const char **atts, const char *const *names, const char **values);
int conf_parse_fds_attribute(struct file_parser *p, unsigned int line, const char *attr,
			       const char *value, uint32_t def, uint32_t *out);
int conf_parse_true_false(struct file_parser *p, unsigned int line, const char *attr,
			    const char *value, enum bus_tristate *out);
/* The file is invalid (BUS_CONFIG_E_INVALID, "FILE:LINE: ..."); -ENOMEM, -errno as they are. */
int conf_parser_fail_errno(struct file_parser *p, int r);
_printf_(3, 4) int conf_parser_fail(struct file_parser *p, unsigned int line, const char *fmt, ...);
/* A warning of the file, as dbus-daemon logs it; 0 or -ENOMEM. */
_printf_(3, 4) int conf_parser_warn(struct file_parser *p, unsigned int line, const char *fmt, ...);
void conf_rule_free(struct bus_policy_rule *rule);
