/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * dbus-daemon compatible command line parsing. See cli.h.
 */

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "broker/cli.h"

static const char *const session_configs[] = {
	"/usr/share/dbus-1/session.conf",
	"/etc/dbus-1/session.conf",
};

static const char *const system_configs[] = {
	"/usr/share/dbus-1/system.conf",
	"/etc/dbus-1/system.conf",
};

const char *cli_default_config(const char *bus_type)
{
	const char *const *list;
	size_t i;

	if (!bus_type)
		return NULL;
	list = strcmp(bus_type, "system") ? session_configs : system_configs;
	/* Both lists have two entries; the first one that exists wins. */
	for (i = 0; i < 2; i++)
		if (access(list[i], R_OK) == 0)
			return list[i];
	return list[0];
}

/* Parse a descriptor number; an empty string means stdout (-1). */
static int parse_fd(const char *s, int *fdp)
{
	char *end;
	long v;

	if (!*s) {
		*fdp = -1;
		return 0;
	}
	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || *end || end == s || v < 0 || v > INT_MAX)
		return -EINVAL;
	*fdp = (int)v;
	return 0;
}

/* "--name=value" or "--name": return the value (NULL if none), or "" sentinel. */
static const char *match_opt(const char *arg, const char *name, bool *matched)
{
	size_t n = strlen(name);

	*matched = false;
	if (strncmp(arg, name, n))
		return NULL;
	if (arg[n] == '=') {
		*matched = true;
		return arg + n + 1;
	}
	if (arg[n] == '\0')
		*matched = true;
	return NULL;
}

int cli_parse(struct cli *cli, int argc, char **argv, const char **errorp, const char **wordp)
{
	bool m;
	int i;

	*cli = (struct cli){
		.print_address_fd = -1,
		.print_pid_fd = -1,
		.check_state_fd = -1,
		.check_state_from_fd = -1,
		.restore_state_fd = -1,
		.reexec_fallback_fd = -1,
	};

	for (i = 1; i < argc; i++) {
		const char *arg = argv[i];
		const char *v;

		*wordp = arg;
		if (!strcmp(arg, "--help") || !strcmp(arg, "-h")) {
			cli->help = true;
		} else if (!strcmp(arg, "--version")) {
			cli->version = true;
		} else if (!strcmp(arg, "--session") || !strcmp(arg, "--system")) {
			const char *type = arg + 2;

			if (cli->bus_type || cli->config_file) {
				*errorp = "only one of --session, --system and --config-file may be given";
				return CLI_E_INVALID;
			}
			cli->bus_type = type;
			cli->config_file = cli_default_config(type);
		} else if ((v = match_opt(arg, "--config-file", &m)), m) {
			if (!v) {
				if (i + 1 >= argc) {
					*errorp = "--config-file needs a file name";
					return CLI_E_INVALID;
				}
				v = argv[++i];
			}
			if (cli->bus_type || cli->config_file) {
				*errorp = "only one of --session, --system and --config-file may be given";
				return CLI_E_INVALID;
			}
			if (!*v) {
				*errorp = "--config-file needs a file name";
				return CLI_E_INVALID;
			}
			cli->config_file = v;
		} else if ((v = match_opt(arg, "--address", &m)), m) {
			if (!v) {
				if (i + 1 >= argc) {
					*errorp = "--address needs an address";
					return CLI_E_INVALID;
				}
				v = argv[++i];
			}
			if (cli->address) {
				*errorp = "--address may be given only once";
				return CLI_E_INVALID;
			}
			if (!*v) {
				*errorp = "--address needs an address";
				return CLI_E_INVALID;
			}
			cli->address = v;
		} else if ((v = match_opt(arg, "--print-address", &m)), m) {
			if (cli->print_address) {
				*errorp = "--print-address may be given only once";
				return CLI_E_INVALID;
			}
			cli->print_address = true;
			/* dbus-run-session passes the descriptor as the next word. */
			if (!v && i + 1 < argc && argv[i + 1][0] != '-')
				v = argv[++i];
			if (v && parse_fd(v, &cli->print_address_fd) < 0) {
				*wordp = v;
				*errorp = "invalid file descriptor for --print-address";
				return CLI_E_INVALID;
			}
		} else if ((v = match_opt(arg, "--print-pid", &m)), m) {
			if (cli->print_pid) {
				*errorp = "--print-pid may be given only once";
				return CLI_E_INVALID;
			}
			cli->print_pid = true;
			if (!v && i + 1 < argc && argv[i + 1][0] != '-')
				v = argv[++i];
			if (v && parse_fd(v, &cli->print_pid_fd) < 0) {
				*wordp = v;
				*errorp = "invalid file descriptor for --print-pid";
				return CLI_E_INVALID;
			}
		} else if (!strcmp(arg, "--print-env")) {
			cli->print_env = true;
		} else if (!strcmp(arg, "--fork")) {
			if (cli->fork == CLI_FORK_NO) {
				*errorp = "--fork and --nofork conflict";
				return CLI_E_INVALID;
			}
			cli->fork = CLI_FORK_YES;
		} else if (!strcmp(arg, "--nofork")) {
			if (cli->fork == CLI_FORK_YES) {
				*errorp = "--fork and --nofork conflict";
				return CLI_E_INVALID;
			}
			cli->fork = CLI_FORK_NO;
		} else if (!strcmp(arg, "--nopidfile")) {
			cli->nopidfile = true;
		} else if (!strcmp(arg, "--systemd-activation")) {
			cli->systemd_activation = true;
		} else if (!strcmp(arg, "--containers")) {
			cli->containers = true;
		} else if (!strcmp(arg, "--syslog")) {
			cli->syslog = CLI_SYSLOG_BOTH;
		} else if (!strcmp(arg, "--syslog-only")) {
			cli->syslog = CLI_SYSLOG_ONLY;
		} else if (!strcmp(arg, "--nosyslog")) {
			cli->syslog = CLI_SYSLOG_NONE;
		} else if (!strcmp(arg, "--introspect")) {
			cli->introspect = true;
		} else if ((v = match_opt(arg, "--check-state", &m)), m) {
			if (!v || parse_fd(v, &cli->check_state_fd) < 0) {
				*errorp = "--check-state needs a file descriptor";
				return CLI_E_INVALID;
			}
		} else if ((v = match_opt(arg, "--check-state-from", &m)), m) {
			if (!v || parse_fd(v, &cli->check_state_from_fd) < 0) {
				*errorp = "--check-state-from needs a file descriptor";
				return CLI_E_INVALID;
			}
		} else if ((v = match_opt(arg, "--restore-state", &m)), m) {
			if (!v || parse_fd(v, &cli->restore_state_fd) < 0) {
				*errorp = "--restore-state needs a file descriptor";
				return CLI_E_INVALID;
			}
		} else if ((v = match_opt(arg, "--reexec-fallback", &m)), m) {
			if (!v || parse_fd(v, &cli->reexec_fallback_fd) < 0) {
				*errorp = "--reexec-fallback needs a file descriptor";
				return CLI_E_INVALID;
			}
		} else {
			*errorp = "unknown option";
			return CLI_E_INVALID;
		}
	}
	return 0;
}

void cli_print_help(FILE *f, const char *argv0)
{
	fprintf(f, "%s [--version] [--session] [--system] [--config-file=FILE]\n"
	       "    [--print-address[=DESCRIPTOR]] [--print-pid[=DESCRIPTOR]]\n"
	       "    [--introspect] [--address=ADDRESS] [--nopidfile] [--nosyslog]\n"
	       "    [--syslog] [--syslog-only] [--nofork] [--fork]\n"
	       "    [--systemd-activation] [--print-env] [--containers]\n"
	       "\n"
	       "A D-Bus message bus, command-line compatible with dbus-daemon.\n"
	       "See bus1-broker(1).\n",
	       argv0);
}
