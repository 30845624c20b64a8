/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * bus1-broker: entry point. Parses the dbus-daemon compatible command line,
 * loads the configuration, creates the bus (listening sockets first, so that
 * an unusable address is reported by the exit status of the starting
 * process), optionally forks, reports the address and pid, and runs the event
 * loop until SIGTERM / SIGINT.
 */

#include <errno.h>
#include <grp.h>
#include <pwd.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <systemd/sd-daemon.h>
#include "config.h"
#include "broker/broker.h"
#include "broker/upgrade/fdstore.h"
#include "broker/cli.h"
#include "broker/core/driver.h"
#include "broker/objects/log.h"
#include "broker/policy/selinux.h"
#include "broker/upgrade/reexec.h"
#include "conf/config.h"
#include "dbus-compat/protocol.h"
#include "util/macro.h"

static int write_all(int fd, const char *s, size_t n)
{
	while (n > 0) {
		ssize_t l = write(fd, s, n);

		if (l < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		s += l;
		n -= (size_t)l;
	}
	return 0;
}

/* "PID\n", as in dbus-daemon's pid file and --print-pid. */
static int write_pid(int fd)
{
	char buf[32];

	snprintf(buf, sizeof(buf), "%d\n", (int)getpid());
	return write_all(fd, buf, strlen(buf));
}

/*
 * Print the address and/or pid as dbus-daemon does: address first, then pid,
 * each on its own line; a descriptor other than stdout is closed afterwards so
 * that the reader (dbus-run-session, dbus-launch) sees EOF.
 */
static int print_startup_info(const struct cli *cli, const char *address)
{
	int afd = cli->print_address_fd < 0 ? STDOUT_FILENO : cli->print_address_fd;
	int pfd = cli->print_pid_fd < 0 ? STDOUT_FILENO : cli->print_pid_fd;
	_cleanup_free_ char *line = NULL;
	int r;

	if (cli->print_address) {
		if (asprintf(&line, "%s%s\n", cli->print_env ? "DBUS_SESSION_BUS_ADDRESS=" : "",
			     address) < 0)
			return -ENOMEM;
		r = write_all(afd, line, strlen(line));
		if (r < 0)
			return r;
	}
	if (cli->print_pid) {
		r = write_pid(pfd);
		if (r < 0)
			return r;
	}
	/* Each descriptor closed once, after everything written to it. */
	if (cli->print_address && afd != STDOUT_FILENO)
		close(afd);
	if (cli->print_pid && pfd != STDOUT_FILENO && !(cli->print_address && pfd == afd))
		close(pfd);
	if (afd == STDOUT_FILENO || pfd == STDOUT_FILENO)
		fflush(stdout);
	return 0;
}

/*
 * The umask the pid file is created with, when --fork changed the process's
 * own to 022: the one the bus was started with, as dbus-daemon's parent,
 * which keeps it, writes the file. (mode_t)-1: the process's umask.
 */
static mode_t pidfile_umask = (mode_t)-1;

static int write_pidfile(const char *path)
{
	_cleanup_close_ int fd = -1;
	mode_t saved = 0;

	if (pidfile_umask != (mode_t)-1)
		saved = umask(pidfile_umask);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (pidfile_umask != (mode_t)-1)
		umask(saved);
	if (fd < 0)
		return -errno;
	return write_pid(fd);
}

/*
 * --fork: the parent stays until the child has reported the address, so that
 * "bus1-broker --fork --print-address" behaves like dbus-daemon for scripts.
 * Returns in the child with *readyp set to the write end of the readiness
 * pipe; the parent exits with the child's verdict.
 */
static int daemonize(int *readyp)
{
	int pipefd[2];
	pid_t pid;
	char c;
	ssize_t l;

	if (pipe2(pipefd, O_CLOEXEC) < 0)
		return -errno;
	pid = fork();
	if (pid < 0)
		return -errno;
	if (pid > 0) {
		close(pipefd[1]);
		do {
			l = read(pipefd[0], &c, 1);
		} while (l < 0 && errno == EINTR);
		_exit(l == 1 ? EXIT_SUCCESS : EXIT_FAILURE);
	}
	close(pipefd[0]);
	if (setsid() < 0)
		return -errno;
	/*
	 * As dbus-daemon's: a daemon keeps no directory busy, and the
	 * services it starts begin in / (dbus-launch sessions use --fork).
	 */
	if (chdir("/") < 0)
		return -errno;
	*readyp = pipefd[1];
	return 0;
}

/*
 * A forked bus lets go of the terminal (or the pipe of "$(bus1-broker --fork
 * --print-address)", which must see EOF) once it printed what it was asked to.
 */
static void detach_stdio(void)
{
	int fd = open("/dev/null", O_RDWR | O_CLOEXEC);

	if (fd < 0)
		return;
	dup2(fd, STDIN_FILENO);
	dup2(fd, STDOUT_FILENO);
	dup2(fd, STDERR_FILENO);
	if (fd > STDERR_FILENO)
		close(fd);
}

/*
 * Started with stdin, stdout or stderr closed (test-dbus-daemon-fork.sh does
 * that), the first socket would become fd 0-2 and be replaced later by
 * detach_stdio(). Fill the gaps with /dev/null before anything else opens.
 */
static void ensure_stdio(void)
{
	int fd;

	do {
		fd = open("/dev/null", O_RDWR);
	} while (fd >= 0 && fd <= STDERR_FILENO);
	if (fd > STDERR_FILENO)
		close(fd);
}

/*
 * <user>: a bus started as root switches to this user once its sockets listen
 * and its pid file is written, as dbus-daemon does. The bus' own uid (the
 * default connect policy, GetConnectionUnixUser of the driver) follows.
 * Return: 0 or negative errno; -ESRCH for an unknown user.
 */
static int drop_privileges(struct broker *broker, const char *user)
{
	struct passwd *pw;

	errno = 0;
	pw = getpwnam(user);
	if (!pw)
		return errno ? -errno : -ESRCH;
	if (getuid() == pw->pw_uid && geteuid() == pw->pw_uid)
		return 0;
	if (initgroups(pw->pw_name, pw->pw_gid) < 0)
		return -errno;
	if (setresgid(pw->pw_gid, pw->pw_gid, pw->pw_gid) < 0)
		return -errno;
	if (setresuid(pw->pw_uid, pw->pw_uid, pw->pw_uid) < 0)
		return -errno;
	broker_set_uid(broker, pw->pw_uid);
	return 0;
}

static void config_warn(void *userdata, const char *message)
{
	log_warn("%s", message);
}

/*
 * --help, --version, --introspect: answered without starting anything.
 * Return: an exit status, or -1 when none of them was asked for.
 */
static int answer_query(const struct cli *cli)
{
	_cleanup_free_ char *xml = NULL;
	int r;

	if (cli->help) {
		cli_print_help(stdout, program_invocation_short_name);
		return EXIT_SUCCESS;
	}
	if (cli->version) {
		printf("bus1-broker %s (compatible with D-Bus Message Bus Daemon 1.14)\n",
		       PACKAGE_VERSION);
		return EXIT_SUCCESS;
	}
	if (!cli->introspect)
		return -1;
	/* As the bus would serve it: Containers1 with --containers. */
	r = driver_introspect_xml(&xml, DC_PATH_DBUS, (const struct driver_interface *[]){
					  &driver_containers_interface }, cli->containers ? 1 : 0);
	if (r < 0) {
		fprintf(stderr, "introspection failed: %s\n", strerror(-r));
		return EXIT_FAILURE;
	}
	/* dbus-daemon ends it with an empty line: the document and a newline. */
	printf("%s\n", xml);
	return EXIT_SUCCESS;
}

/* Load --config-file, as dbus-daemon reports its failures. Return 0 or -1 (reported). */
static int load_config(const struct cli *cli, struct bus_config **configp)
{
	struct bus_config_options copts = {
		.no_listen_ok = cli->address != NULL,
		.warn = config_warn,
		/* <include if_selinux_enabled= selinux_root_relative=>, as dbus-daemon. */
		.selinux_enabled = selinux_is_enabled(),
		.selinux_root = selinux_root(),
	};
	_cleanup_free_ char *cerr = NULL;
	int r;

	r = bus_config_load(configp, cli->config_file, &copts, &cerr);
	if (r > 0) {
		fprintf(stderr, "Failed to start message bus: %s\n", cerr);
		return -1;
	} else if (r < 0) {
		fprintf(stderr, "Failed to start message bus: %s: %s\n", cli->config_file,
			strerror(-r));
		return -1;
	}
	return 0;
}

/*
 * The pid file, then <user>: once at start, and again in the new process of
 * a restart through the fd store (systemd starts it as root, and its pid is
 * a new one). Return 0 or -1 (logged).
 */
static int become_bus_user(struct broker *broker, const struct bus_config *config,
			   const char *pidfile)
{
	int r;

	if (pidfile) {
		r = write_pidfile(pidfile);
		if (r < 0) {
			log_err("cannot write pid file %s: %s", pidfile, strerror(-r));
			return -1;
		}
	}
	if (config && config->user) {
		r = drop_privileges(broker, config->user);
		if (r < 0) {
			log_err("cannot change to user %s: %s", config->user, strerror(-r));
			return -1;
		}
	}
	return 0;
}

/*
 * The bus listens: tell the world (pid file, <user>, --print-address and
 * --print-pid, the forked parent, systemd). Return 0 or -1 (logged).
 */
static int announce(const struct cli *cli, struct broker *broker,
		    const struct bus_config *config, const char *pidfile, bool forked,
		    int ready_fd)
{
	int r;

	if (become_bus_user(broker, config, pidfile) < 0)
		return -1;

	/* The sockets listen already: clients may connect as soon as they know. */
	r = print_startup_info(cli, broker_get_address(broker));
	if (r < 0) {
		log_err("cannot print the bus address: %s", strerror(-r));
		return -1;
	}
	if (ready_fd >= 0) {
		detach_stdio();
		if (cli->syslog != CLI_SYSLOG_NONE)
			log_setup(LOG_TARGET_SYSLOG);
		(void)write_all(ready_fd, "1", 1);
		safe_close(ready_fd);
	}

	/*
	 * Type=notify: ready once clients can connect (the sockets listen; they
	 * queue in the backlog until the loop runs). A forked bus reports its
	 * own pid. Without NOTIFY_SOCKET this does nothing.
	 */
	if (forked)
		(void)sd_notifyf(0, "MAINPID=%d\nREADY=1\nSTATUS=Serving %s", (int)getpid(),
				 broker_get_address(broker));
	else
		(void)sd_notifyf(0, "READY=1\nSTATUS=Serving %s", broker_get_address(broker));
	return 0;
}

/*
 * --check-state-fd, --check-state-from-fd: the new program of a re-exec,
 * asked whether it can take the state and start from the configuration file
 * as it is now (a broken one would make the re-executed bus exit: refused
 * instead). Return: an exit status.
 */
static int check_state(const struct cli *cli)
{
	_cleanup_(bus_config_freep) struct bus_config *config = NULL;
	int fd = cli->check_state_fd;

	/*
	 * A signal meant for the bus may reach every process of its
	 * service (systemctl kill): not a reason to fail the check.
	 */
	signal(SIGTERM, SIG_IGN);
	signal(SIGINT, SIG_IGN);
	signal(SIGHUP, SIG_IGN);
	signal(SIGUSR2, SIG_IGN);
	/* Started before the state was written: say we know the option, wait for it. */
	if (cli->check_state_from_fd >= 0 && reexec_check_hello(cli->check_state_from_fd) < 0)
		return EXIT_FAILURE;
	if (cli->config_file && load_config(cli, &config) < 0)
		return EXIT_FAILURE;
	if (fd < 0) {
		fd = reexec_check_receive(cli->check_state_from_fd);
		if (fd < 0) {
			fprintf(stderr, "%s: no state to check: %s\n",
				program_invocation_short_name, strerror(-fd));
			return EXIT_FAILURE;
		}
	}
	return broker_check_state(fd) == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}

/*
 * What every way of starting the bus needs first: the fds systemd passed,
 * the log, the configuration and with it the pid file. Return 0 or -1
 * (reported).
 */
static int prepare(const struct cli *cli, struct fdstore_carried *carried,
		   struct bus_config **configp, const char **pidfilep)
{
	int r;

	/* Before anything opens an fd: a hand-over puts fds at fixed numbers. */
	if (cli->restore_state_fd < 0) {
		r = fdstore_take(carried);
		if (r < 0)
			fprintf(stderr, "%s: cannot read the fds systemd passed: %s\n",
				program_invocation_short_name, strerror(-r));
	}
	if (!cli->config_file && !cli->address) {
		fprintf(stderr, "No configuration file specified.\n");
		cli_print_help(stderr, program_invocation_short_name);
		return -1;
	}

	log_setup(cli->syslog == CLI_SYSLOG_ONLY ? LOG_TARGET_SYSLOG :
		  cli->syslog == CLI_SYSLOG_BOTH ? LOG_TARGET_BOTH : LOG_TARGET_STDERR);
	if (cli->config_file) {
		if (load_config(cli, configp) < 0)
			return -1;
		/* The lines' "[session uid=... pid=...] " from here on (log.h). */
		log_set_bus_type((*configp)->type);
		if ((*configp)->syslog && cli->syslog == CLI_SYSLOG_DEFAULT)
			log_setup(LOG_TARGET_BOTH);
		if (!cli->nopidfile)
			*pidfilep = (*configp)->pidfile;
	}
	return 0;
}

/*
 * Restarted by systemd, which kept the bus in its fd store (fdstore.h).
 * Return: whether the bus is restored and ready to run (false: the state
 * cannot be used and a new bus must start); exits on anything else.
 */
static bool restore_from_store(struct broker **brokerp, const struct broker_options *opts,
			      char **argv, struct fdstore_carried *carried,
			      const struct bus_config *config, const char *pidfile)
{
	int r;

	(void)broker_block_signals();
	r = broker_restore(brokerp, opts, steal_fd(&carried->state_fd), -1, argv, carried);
	if (r < 0) {
		/*
		 * Half restored: exit rather than look healthy, and
		 * leave nothing in the store, so that the next start
		 * (systemd's, or the socket unit's on the next client)
		 * is a clean one. Nothing is torn down: the clients see
		 * their connections end, as after dbus-daemon's restart.
		 */
		log_err("fd store: cannot restore the bus: %s; exiting", log_error(r));
		fdstore_discard(carried);
		_exit(EXIT_FAILURE);
	}
	if (r == 0) {
		/* A crash journal beside it is older: its entries go. */
		broker_journal_forget(*brokerp, carried);
		fdstore_taken(carried);
		/* A new process: what the first one did before it served, again. */
		if (become_bus_user(*brokerp, config, pidfile) < 0)
			_exit(EXIT_FAILURE);
		(void)sd_notify(0, "READY=1");
		return true;
	}
	log_err("fd store: the handed-over state cannot be used; starting a new bus");
	fdstore_discard(carried);
	return false;
}

/*
 * The previous process died without handing over: its crash journal
 * (journal.h). Return: whether the bus is restored and ready to run (false:
 * no journal that can be used, a new bus must start); exits on anything else.
 */
static bool restore_from_journal(struct broker **brokerp, const struct broker_options *opts,
				 struct fdstore_carried *carried, const struct bus_config *config,
				 const char *pidfile)
{
	int r;

	(void)broker_block_signals();
	r = broker_restore_crash(brokerp, opts, carried);
	if (r < 0) {
		/*
		 * Half restored: exit. The journal counts this attempt, so
		 * the next start discards it and starts clean (journal.h).
		 */
		log_err("crash journal: cannot restore the bus: %s; exiting", log_error(r));
		_exit(EXIT_FAILURE);
	}
	if (r) {
		/* A new bus: on the old one's paths, its clients told the end now. */
		fdstore_journal_shut(carried);
		return false;
	}
	fdstore_taken(carried);
	if (become_bus_user(*brokerp, config, pidfile) < 0)
		_exit(EXIT_FAILURE);
	(void)sd_notify(0, "READY=1");
	return true;
}

/* Re-executed (reexec.h): the bus is up and announced already. Return 0 or -1 (logged). */
static int restore_reexec(struct broker **brokerp, const struct broker_options *opts,
			  const struct cli *cli, char **argv)
{
	int r;

	r = broker_restore(brokerp, opts, cli->restore_state_fd, cli->reexec_fallback_fd, argv,
			   NULL);
	if (r < 0) {
		log_err("re-exec: cannot restore the bus: %s", strerror(-r));
		return -1;
	}
	(void)sd_notify(0, "READY=1");
	return 0;
}

/*
 * A new bus: listen, fork if asked to, then announce it. @from_store: systemd
 * passed a state that could not be used. Return 0 or -1 (reported).
 */
static int start_new(struct broker **brokerp, const struct broker_options *opts,
		     const struct cli *cli, const struct bus_config *config, const char *pidfile,
		     bool from_store, struct fdstore_carried *carried)
{
	int ready_fd = -1;
	bool do_fork;
	int r;

	/*
	 * A fresh start refuses an existing pid file before it listens, as
	 * dbus-daemon does. A restart through the fd store replaces the one its
	 * old process wrote, also when it cannot use the handed-over state.
	 * The configuration is read: from here on a failure is a log line
	 * (tagged, at warning, where the log goes), as dbus-daemon's; before
	 * it, a plain message on stderr.
	 */
	if (pidfile && !from_store && access(pidfile, F_OK) == 0) {
		log_warn("Failed to start message bus: The pid file \"%s\" exists, if the "
			 "message bus is not running, remove this file", pidfile);
		return -1;
	}
	r = broker_new(brokerp, opts);
	if (r) {
		log_warn("Failed to start message bus: %s",
			 r == BROKER_E_INVALID ? broker_get_error(*brokerp) : strerror(-r));
		return -1;
	}
	/* A crash journal of a bus not resumed: its entries leave the store. */
	broker_journal_forget(*brokerp, carried);
	/* The rest of what systemd passed: the listeners took copies of theirs. */
	fdstore_carried_free(carried);

	do_fork = cli->fork == CLI_FORK_YES ||
		  (cli->fork == CLI_FORK_DEFAULT && config && config->fork);
	if (do_fork) {
		r = daemonize(&ready_fd);
		if (r < 0) {
			log_warn("Failed to fork: %s", strerror(-r));
			return -1;
		}
		/* The bus is this process now, not the parent that exits. */
		broker_set_pid(*brokerp, getpid());
		if (!(config && config->keep_umask))
			pidfile_umask = umask(022);
	}

	/*
	 * From here on others learn that the bus is up (address, pid file,
	 * READY=1) and may signal it at once (systemd's ExecReload=, a test's
	 * SIGTERM) before broker_run() sets up its signalfd.
	 */
	(void)broker_block_signals();

	return announce(cli, *brokerp, config, pidfile, do_fork, ready_fd);
}

/*
 * The bus of the fd store if it can be used, else the re-executed one, else
 * a new one. Return 0 or -1 (reported).
 */
static int start(struct broker **brokerp, const struct cli *cli, char **argv,
		 const struct bus_config *config, struct fdstore_carried *carried,
		 const char *pidfile)
{
	struct broker_options opts = {
		.config = config,
		.config_file = cli->config_file,
		.address = cli->address,
		.systemd_activation = cli->systemd_activation,
		.containers = cli->containers,
		.listen_fds = carried->listen_fds,
		.n_listen_fds = carried->n_listen,
	};
	bool from_store = carried->state_fd >= 0;

	if (from_store && restore_from_store(brokerp, &opts, argv, carried, config, pidfile))
		return 0;
	if (!from_store && fdstore_has_journal(carried)) {
		if (restore_from_journal(brokerp, &opts, carried, config, pidfile))
			return 0;
		from_store = true;	/* its pid file is the old process's */
	}
	if (cli->restore_state_fd >= 0)
		return restore_reexec(brokerp, &opts, cli, argv);
	return start_new(brokerp, &opts, cli, config, pidfile, from_store, carried);
}

/* The event loop, until the bus stops or hands over. Return: an exit status. */
static int serve(struct broker *broker, char **argv, const char *pidfile)
{
	int r;

	r = reexec_prepare(broker, argv, broker_serialize);
	if (r < 0)
		log_warn("re-exec will be refused: cannot find the running program: %s",
			 strerror(-r));
	r = broker_run(broker);
	(void)sd_notify(0, "STOPPING=1");
	/*
	 * The fd store holds the bus: tearing down would reach what it keeps
	 * (socket files, the bus1 peer's nodes). The kernel closes our copies.
	 */
	if (broker && broker->handed_over)
		_exit(EXIT_SUCCESS);
	if (pidfile)
		unlink(pidfile);
	if (r < 0) {
		log_err("event loop failed: %s", log_error(r));
		return EXIT_FAILURE;
	}
	return EXIT_SUCCESS;
}

int main(int argc, char **argv)
{
	_cleanup_(bus_config_freep) struct bus_config *config = NULL;
	_cleanup_(broker_freep) struct broker *broker = NULL;
	_cleanup_(fdstore_carried_free) struct fdstore_carried carried = FDSTORE_CARRIED_INIT;
	const char *err = NULL, *word = NULL;
	const char *pidfile = NULL;
	struct cli cli;
	int r;

	ensure_stdio();
	signal(SIGPIPE, SIG_IGN);

	if (cli_parse(&cli, argc, argv, &err, &word)) {
		fprintf(stderr, "%s: %s: %s\n", program_invocation_short_name, word ? word : "",
			err);
		cli_print_help(stderr, program_invocation_short_name);
		return EXIT_FAILURE;
	}
	if (cli.check_state_fd >= 0 || cli.check_state_from_fd >= 0)
		return check_state(&cli);
	r = answer_query(&cli);
	if (r >= 0)
		return r;
	if (prepare(&cli, &carried, &config, &pidfile) < 0)
		return EXIT_FAILURE;
	if (start(&broker, &cli, argv, config, &carried, pidfile) < 0)
		return EXIT_FAILURE;
	return serve(broker, argv, pidfile);
}
