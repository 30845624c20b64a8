/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/**
 * DOC: dbus-daemon compatible command line
 *
 * bus1-broker takes dbus-daemon's options so that every tool that starts
 * dbus-daemon (dbus-run-session, dbus-launch, GTestDBus, systemd units) can
 * start it instead. Like dbus-daemon, an option that takes a value accepts it
 * both as "--opt=VALUE" and as "--opt VALUE"; for --print-address and
 * --print-pid the value is optional, so the next word is taken only when it
 * is not an option (dbus-run-session passes "--print-address FD").
 */

#include <stdbool.h>
#include <stdio.h>

enum cli_fork {
	CLI_FORK_DEFAULT,	/* whatever the configuration says (<fork/>) */
	CLI_FORK_YES,
	CLI_FORK_NO,
};

enum cli_syslog {
	CLI_SYSLOG_DEFAULT,	/* stderr, plus syslog if the config says <syslog/> */
	CLI_SYSLOG_BOTH,	/* --syslog */
	CLI_SYSLOG_ONLY,	/* --syslog-only */
	CLI_SYSLOG_NONE,	/* --nosyslog */
};

/**
 * struct cli - the parsed command line
 * @config_file:	--config-file, or the session/system file for --session /
 *			--system; NULL if none was given
 * @bus_type:		"session", "system" or NULL
 * @address:		--address (replaces every <listen> of the config)
 * @print_address:	--print-address given; @print_address_fd is -1 for stdout
 * @print_pid:		--print-pid given; @print_pid_fd is -1 for stdout
 * @print_env:		print DBUS_SESSION_BUS_ADDRESS=... instead of the bare
 *			address (bus1-broker extension, for tools/run-bus.sh)
 * @fork:		--fork / --nofork
 * @nopidfile:		--nopidfile
 * @systemd_activation:	--systemd-activation (accepted; advertised as feature)
 * @syslog:		--syslog* / --nosyslog
 * @introspect:		--introspect: print the driver's XML and exit
 * @version, @help:	print and exit
 */
struct cli {
	const char *config_file;
	const char *bus_type;
	const char *address;
	bool print_address;
	int print_address_fd;
	bool print_pid;
	int print_pid_fd;
	bool print_env;
	enum cli_fork fork;
	bool nopidfile;
	bool systemd_activation;
	bool containers;		/* --containers: Containers1 (container.h) */
	enum cli_syslog syslog;
	bool introspect;
	bool version;
	bool help;
	/* re-exec (reexec.h), given by the bus to itself: -1 when absent */
	int check_state_fd;		/* --check-state=FD */
	int check_state_from_fd;	/* --check-state-from=FD (a socket) */
	int restore_state_fd;		/* --restore-state=FD */
	int reexec_fallback_fd;		/* --reexec-fallback=FD */
};

/* Positive code of cli_parse(). */
enum {
	_CLI_E_SUCCESS,
	/* The command line is invalid: *errorp says why, *wordp where. */
	CLI_E_INVALID,
};

/**
 * cli_parse() - parse argv
 * @cli:	filled in
 * @argc, @argv: as given to main()
 * @errorp:	on failure, a static or argv-owned message is stored here (the
 *		caller prints it with the offending word)
 *
 * Return: 0, or CLI_E_INVALID when the command line is invalid (see *errorp /
 * *wordp).
 */
int cli_parse(struct cli *cli, int argc, char **argv, const char **errorp, const char **wordp);

/* Print the --help text to @f. */
void cli_print_help(FILE *f, const char *argv0);

/* The session/system configuration file dbus-daemon would use. */
const char *cli_default_config(const char *bus_type);
