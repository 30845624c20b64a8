/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Re-executing a live bus: the state out, the check, the exec, the state in.
 * See reexec.h.
 */

#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "broker/activation/activation.h"
#include "broker/broker.h"
#include "broker/transport/connection.h"
#include "broker/upgrade/fdstore.h"
#include "broker/transport/listener.h"
#include "broker/objects/log.h"
#include "broker/objects/peer.h"
#include "broker/upgrade/reexec.h"
#include "broker/objects/state.h"
#include "util/error.h"
#include "util/fd.h"
#if HAVE_VALGRIND_VALGRIND_H
#include <valgrind/valgrind.h>
#else
#define RUNNING_ON_VALGRIND 0
#endif

extern char **environ;

/*
 * A re-exec waits for the clients in SASL at most as long as auth_timeout
 * gives them (then they are gone), plus a second; 30 s without a timeout.
 * It looks every REEXEC_WAIT_POLL_USEC.
 */
#define REEXEC_WAIT_MAX_MSEC(broker)							\
	((broker)->bus.limits.auth_timeout > 0 ?					\
		 (uint64_t)(broker)->bus.limits.auth_timeout + 1000 : UINT64_C(30000))
#define REEXEC_WAIT_POLL_USEC (5 * 1000)

/* ------------------------------------------------------------ writing it */

void reexec_fds_add(struct reexec_fds *s, int fd)
{
	if (fd >= 0 && !s->error && fd_array_add(&s->v, &s->n, &s->cap, fd) < 0)
		s->error = -ENOMEM;
}

/* Why the bus cannot be carried over right now, or NULL. */
static const char *reexec_refusal(struct broker *broker)
{
	struct bus *bus = &broker->bus;
	struct peer *p;

	if (!broker->exe_path)
		return "the running program could not be found at start-up";
	if (!activation_is_settled(bus->activation))
		return "an activation is being answered";
	list_for_each_entry(p, &bus->peers, bus_link)
		if (!connection_of(p))
			return "a client without a socket connection";
	return NULL;
}

/* The clients still in SASL: their server's state is not carried, they are waited for. */
static unsigned int n_authenticating(struct bus *bus)
{
	struct peer *p;
	unsigned int n = 0;

	list_for_each_entry(p, &bus->peers, bus_link)
		n += !p->authenticated;
	return n;
}

/*
 * The state into a sealed memfd (returned) and the fds it names into @fds.
 * @handover: for the next process of the service (fdstore.h).
 */
static int reexec_write(struct broker *broker, uint32_t version, bool handover,
			struct reexec_fds *fds)
{
	struct state_writer w;
	int r;

	state_writer_init(&w, version);
	r = broker->reexec_serialize ? broker->reexec_serialize(broker, handover, &w) : -ENOSYS;
	if (r == 0)
		r = state_writer_to_memfd(&w);
	for (size_t i = 0; r >= 0 && i < w.n_fds; i++)
		reexec_fds_add(fds, w.fds[i]);
	state_writer_deinit(&w);
	return r;
}

static void set_cloexec(const int *v, size_t n, bool on)
{
	for (size_t i = 0; i < n; i++)
		(void)fcntl(v[i], F_SETFD, on ? FD_CLOEXEC : 0);
}

static bool is_reexec_arg(const char *a)
{
	return !strncmp(a, "--restore-state=", 16) || !strncmp(a, "--reexec-fallback=", 18) ||
	       !strncmp(a, "--check-state=", 14) || !strncmp(a, "--check-state-from=", 19);
}

/*
 * The command line without the previous re-exec's options, with room for
 * @extra more and the NULL after them; *@kp: where they go.
 */
static char **command_line(struct broker *broker, size_t extra, size_t *kp)
{
	size_t n = 0, k = 0;
	char **v;

	while (broker->argv[n])
		n++;
	v = calloc(n + extra + 1, sizeof(*v));
	if (!v)
		return NULL;
	for (size_t i = 0; i < n; i++)
		if (i == 0 || !is_reexec_arg(broker->argv[i]))
			v[k++] = broker->argv[i];
	*kp = k;
	return v;
}

/* The command line the new program will run with (the configuration file), and @arg. */
static char **check_argv(struct broker *broker, char *arg)
{
	size_t k;
	char **argv = command_line(broker, 1, &k);

	if (!argv)
		return NULL;
	argv[0] = broker->exe_path;
	argv[k] = arg;
	return argv;
}

/* Positive code of the check of the state by the new program. */
enum {
	_REEXEC_E_SUCCESS,
	REEXEC_E_REFUSED,	/* the new program cannot read the state: *why says how it ended */
};

/*
 * Wait for the check child @pid (at most REEXEC_CHECK_TIMEOUT_MSEC, then it
 * is killed). Return 0 if it read the state, REEXEC_E_REFUSED if not
 * (*@why), negative errno.
 */
static int check_wait(struct broker *broker, pid_t pid, char *why, size_t why_size)
{
	struct pollfd pfd;
	int status = 0, pidfd;
	pid_t w;

	pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
	if (pidfd >= 0) {
		pfd = (struct pollfd){ .fd = pidfd, .events = POLLIN };
		if (poll(&pfd, 1, REEXEC_CHECK_TIMEOUT_MSEC) == 0)
			kill(pid, SIGKILL);
		close(pidfd);
	}
	do {
		w = waitpid(pid, &status, 0);
	} while (w < 0 && errno == EINTR);
	if (w < 0)
		return error_origin(-errno);
	if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
		return 0;
	if (WIFEXITED(status))
		snprintf(why, why_size, "%s --check-state exited with status %d", broker->exe_path,
			 WEXITSTATUS(status));
	else
		snprintf(why, why_size, "%s --check-state was killed by signal %d",
			 broker->exe_path, WTERMSIG(status));
	return REEXEC_E_REFUSED;
}

/*
 * Run the new program on the state written already: it must read all of
 * it. Return 0 if it did, REEXEC_E_REFUSED if not (*@why), negative errno.
 */
static int reexec_check(struct broker *broker, int state_fd, char *why, size_t why_size)
{
	char arg[64];
	char **argv;
	pid_t pid;

	snprintf(arg, sizeof(arg), "--check-state=%d", state_fd);
	argv = check_argv(broker, arg);
	if (!argv)
		return -ENOMEM;
	pid = fork();
	if (pid < 0) {
		free(argv);
		return error_origin(-errno);
	}
	if (pid == 0) {
		/*
		 * The signal mask stays as it is: the bus' signals blocked.
		 * "systemctl kill -s SIGUSR2" signals every process of the
		 * unit, this one too; it must not die of the default action
		 * in the window before the new program's main() ignores them.
		 */
		(void)fcntl(state_fd, F_SETFD, 0);
		execv(broker->exe_path, argv);
		_exit(127);
	}
	free(argv);
	return check_wait(broker, pid, why, why_size);
}

/*
 * The same check, started before the state is written: the new program's
 * exec, dynamic loading and configuration file (half of the check's 9 ms
 * with 1000 clients) overlap the writing, instead of following it. It gets
 * --check-state-from=SOCK, one end of a socket pair; it says hello on it
 * at once, then receives the sealed state memfd on it (SCM_RIGHTS) and
 * reads it as --check-state does. A program that never says hello does not
 * know the option (an older one, or not a bus1-broker at all): it is
 * checked again the way every version knows (reexec_check()).
 */
struct early_check {
	pid_t pid;
	int sock;		/* ours */
};

static int early_check_start(struct broker *broker, struct early_check *c)
{
	posix_spawn_file_actions_t fa;
	char arg[64];
	char **argv;
	int sv[2], r;

	*c = (struct early_check){ .pid = -1, .sock = -1 };
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
		return -errno;
	snprintf(arg, sizeof(arg), "--check-state-from=%d", sv[1]);
	argv = check_argv(broker, arg);
	r = argv ? posix_spawn_file_actions_init(&fa) : ENOMEM;
	if (r == 0) {
		/* dup2() onto itself: the child's copy loses FD_CLOEXEC, ours not. */
		r = posix_spawn_file_actions_adddup2(&fa, sv[1], sv[1]);
		/*
		 * posix_spawn(): no copy of our page tables (fork() of a bus
		 * this size takes 1 ms, and every page written while the child
		 * lives would be copied). The signal mask stays as it is, as
		 * for reexec_check().
		 */
		if (r == 0)
			r = posix_spawn(&c->pid, broker->exe_path, &fa, NULL, argv, environ);
		posix_spawn_file_actions_destroy(&fa);
	}
	free(argv);
	close(sv[1]);
	if (r) {
		close(sv[0]);
		c->pid = -1;
		return -r;
	}
	c->sock = sv[0];
	return 0;
}

/*
 * The state's message: one byte, and the memfd as SCM_RIGHTS. The control
 * buffer goes last: struct cmsghdr ends in a flexible array, so the union
 * is of variable size to clang.
 */
struct state_message {
	char byte;
	struct iovec iov;
	struct msghdr mh;
	union {
		struct cmsghdr h;
		char buf[CMSG_SPACE(sizeof(int))];
	} u;
};

static struct msghdr *state_message_init(struct state_message *m)
{
	*m = (struct state_message){ .byte = 'S' };
	m->iov = (struct iovec){ .iov_base = &m->byte, .iov_len = 1 };
	m->mh = (struct msghdr){
		.msg_iov = &m->iov,
		.msg_iovlen = 1,
		.msg_control = m->u.buf,
		.msg_controllen = sizeof(m->u.buf),
	};
	return &m->mh;
}

/* Hand the child the state; it may be gone already, which waiting tells. */
static void early_check_send(struct early_check *c, int state_fd)
{
	struct state_message m;
	struct msghdr *mh = state_message_init(&m);
	struct cmsghdr *cm = CMSG_FIRSTHDR(mh);

	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_RIGHTS;
	cm->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(cm), &state_fd, sizeof(int));
	(void)sendmsg(c->sock, mh, MSG_NOSIGNAL);
}

/* Whether the child said hello: it knows --check-state-from, its verdict counts. */
static bool early_check_spoke(struct early_check *c)
{
	char byte;

	return recv(c->sock, &byte, 1, MSG_DONTWAIT) == 1;
}

/* Without a state to check: the child goes. */
static void early_check_cancel(struct early_check *c)
{
	if (c->pid > 0) {
		kill(c->pid, SIGKILL);
		while (waitpid(c->pid, NULL, 0) < 0 && errno == EINTR)
			;
	}
	c->sock = safe_close(c->sock);
}

int reexec_check_receive(int sock)
{
	struct state_message m;
	struct msghdr *mh = state_message_init(&m);
	struct cmsghdr *cm;
	ssize_t l;
	int fd;

	do {
		l = recvmsg(sock, mh, MSG_CMSG_CLOEXEC);
	} while (l < 0 && errno == EINTR);
	if (l < 0)
		return error_origin(-errno);
	cm = CMSG_FIRSTHDR(mh);
	if (l != 1 || !cm || cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS ||
	    cm->cmsg_len != CMSG_LEN(sizeof(int)))
		return -EBADMSG;
	memcpy(&fd, CMSG_DATA(cm), sizeof(int));
	return fd;
}

int reexec_check_hello(int sock)
{
	return send(sock, "H", 1, MSG_NOSIGNAL) == 1 ? 0 : -errno;
}

/*
 * The check of @state_fd, by @c if it started (else the classic way); the
 * fds of @fds lose FD_CLOEXEC while the new program reads (nothing forks
 * meanwhile). Return 0 with @fds ready for the exec, or REEXEC_E_REFUSED
 * (*@why) or negative errno with @fds as they were.
 */
static int reexec_verify(struct broker *broker, struct early_check *c, int state_fd,
			 struct reexec_fds *fds, char *why, size_t why_size)
{
	int r;

	if (c->pid > 0) {
		early_check_send(c, state_fd);
		set_cloexec(fds->v, fds->n, false);
		r = check_wait(broker, c->pid, why, why_size);
		c->pid = -1;
		if (r == 0)
			return 0;
		set_cloexec(fds->v, fds->n, true);
		if (r < 0 || early_check_spoke(c))
			return r;
	}
	r = reexec_check(broker, state_fd, why, why_size);
	if (r == 0)
		set_cloexec(fds->v, fds->n, false);
	return r;
}

/*
 * Just before the exec: a process to tear down, after it, what the exec
 * would tear down on the clients' time. The old address space, and the
 * last reference to the loop's epoll instance with a registration per
 * connection, went with the exec: half of its 3.5 ms with 1000 clients.
 * The helper shares the address space and holds a copy of the fd table,
 * so both outlive the exec; it waits for the end of a pipe whose write end
 * the exec closes, and exits, freeing them on its own time (on the other
 * CPU, if there is one). It touches nothing but its stack and the two pipe
 * fds. It is orphaned at once, by a middle process that starts it and
 * exits: init or the service manager reaps it, not the new program (so
 * not when the bus is init itself). Not under valgrind either: it does not
 * run such a clone() (sharing the address space, not a thread, not a
 * vfork()) and ends the whole process instead of failing the call. Return
 * the pipe's write end (to close if the exec fails), or -1: then the exec
 * does it all as before.
 */
static int teardown_fds[2];
static char teardown_middle_stack[16384] __attribute__((aligned(64)));
static char teardown_helper_stack[16384] __attribute__((aligned(64)));

static int teardown_helper(void *arg)
{
	char c;

	close(teardown_fds[1]);
	while (read(teardown_fds[0], &c, 1) < 0 && errno == EINTR)
		;
	return 0;
}

static int teardown_middle(void *arg)
{
	/* Our own fd table: its copy of the pipe's write end goes, the exec closes ours. */
	(void)clone(teardown_helper, teardown_helper_stack + sizeof(teardown_helper_stack),
		    CLONE_VM | SIGCHLD, NULL);
	_exit(0);
}

static int teardown_start(void)
{
	pid_t pid;

	if (getpid() == 1 || RUNNING_ON_VALGRIND || pipe2(teardown_fds, O_CLOEXEC) < 0)
		return -1;
	/* Suspends us until it exited (CLONE_VFORK); it shares our fd table. */
	pid = clone(teardown_middle, teardown_middle_stack + sizeof(teardown_middle_stack),
		    CLONE_VM | CLONE_FILES | CLONE_VFORK | SIGCHLD, NULL);
	close(teardown_fds[0]);
	if (pid < 0) {
		close(teardown_fds[1]);
		return -1;
	}
	while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
		;
	return teardown_fds[1];
}

/* The command line, without the previous re-exec's options, plus ours. */
static char **reexec_argv(struct broker *broker, int state_fd, int fallback_fd)
{
	size_t k;
	char **v = command_line(broker, 2, &k);

	if (!v)
		return NULL;
	if (asprintf(&v[k++], "--restore-state=%d", state_fd) < 0 ||
	    (fallback_fd >= 0 && asprintf(&v[k++], "--reexec-fallback=%d", fallback_fd) < 0)) {
		free(v);
		return NULL;
	}
	v[k] = NULL;
	return v;
}

int reexec_prepare(struct broker *broker, char **argv, reexec_serialize_fn serialize)
{
	const char *override = getenv("BUS1_BROKER_REEXEC");
	char buf[4096];
	ssize_t l;

	broker->argv = argv;
	broker->reexec_serialize = serialize;
	broker->exe_fd = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
	if (override && *override) {
		broker->exe_path = strdup(override);
	} else {
		l = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
		if (l < 0)
			return -errno;
		buf[l] = '\0';
		/* Replaced on disk since it started: execute what is there now. */
		if (l > 10 && !strcmp(buf + l - 10, " (deleted)"))
			buf[l - 10] = '\0';
		broker->exe_path = strdup(buf);
	}
	return broker->exe_path ? 0 : -ENOMEM;
}

/* Write what can be written (less to carry); why the bus cannot go now, or NULL. */
static const char *reexec_settle(struct broker *broker)
{
	bus_flush_now(&broker->bus);
	if (n_authenticating(&broker->bus))
		return "a client is still authenticating";
	return reexec_refusal(broker);
}

static void reexec_now(struct broker *broker)
{
	uint32_t version = STATE_VERSION;
	struct early_check check;
	struct reexec_fds fds = {};
	int teardown;
	char why[512] = "";
	const char *refusal;
	char **argv = NULL;
	int state_fd, r;

	refusal = reexec_settle(broker);
	if (refusal) {
		log_warn("re-exec refused: %s", refusal);
		return;
	}
#if BUS1_TEST_HOOKS
	{
		/* Another stream version, to test the refusal (-Dtest_hooks). */
		const char *env_version = getenv("BUS1_BROKER_STATE_VERSION");

		if (env_version && *env_version)
			version = (uint32_t)strtoul(env_version, NULL, 10);
	}
#endif

	/* First: it starts while the state is written. */
	(void)early_check_start(broker, &check);
	state_fd = reexec_write(broker, version, false, &fds);
	if (state_fd < 0 || fds.error) {
		early_check_cancel(&check);
		log_warn("re-exec refused: cannot write the state: %s",
			 log_error(state_fd < 0 ? state_fd : fds.error));
		goto out;
	}
	argv = reexec_argv(broker, state_fd, broker->exe_fd);
	reexec_fds_add(&fds, state_fd);
	reexec_fds_add(&fds, broker->exe_fd);
	if (!argv || fds.error) {
		early_check_cancel(&check);
		log_warn("re-exec refused: out of memory");
		goto out;
	}
	r = reexec_verify(broker, &check, state_fd, &fds, why, sizeof(why));
	check.sock = safe_close(check.sock);
	if (r) {
		log_warn("re-exec refused: %s", r == REEXEC_E_REFUSED ? why : log_error(r));
		goto out;
	}
	log_info("re-exec: executing %s", broker->exe_path);
	/* The new program starts a journal of its own; this one leaves the store. */
	broker_journal_stop(broker);
	teardown = teardown_start();
	execv(broker->exe_path, argv);
	r = -errno;
	safe_close(teardown);
	set_cloexec(fds.v, fds.n, true);
	broker_journal_start(broker);
	log_warn("re-exec refused: cannot execute %s: %s", broker->exe_path, strerror(-r));
out:
	if (argv) {
		for (size_t i = 0; argv[i]; i++)
			if (is_reexec_arg(argv[i]))
				free(argv[i]);
		free(argv);
	}
	if (state_fd >= 0)
		close(state_fd);
	free(fds.v);
}

/* SIGTERM with the fd store there: everything into it, then the loop ends. */
static void hand_over_now(struct broker *broker)
{
	struct reexec_fds fds = {};
	const char *refusal;
	struct listener *l;
	int state_fd, r;

	refusal = reexec_settle(broker);
	if (refusal) {
		log_warn("fd store: not handing the bus over: %s", refusal);
		goto out;
	}
	state_fd = reexec_write(broker, STATE_VERSION, true, &fds);
	if (state_fd < 0 || fds.error) {
		log_warn("fd store: not handing the bus over: cannot write the state: %s",
			 log_error(state_fd < 0 ? state_fd : fds.error));
		goto out_fds;
	}
	r = fdstore_hand_over(state_fd, fds.v, fds.n);
	close(state_fd);
	if (r < 0) {
		log_warn("fd store: not handing the bus over: %s", log_error(r));
		goto out_fds;
	}
	/* The socket files and nonce files are the next process's now. */
	list_for_each_entry(l, &broker->listeners, link) {
		free(steal_ptr(l->unlink_path));
		free(steal_ptr(l->nonce_file));
	}
	broker->handed_over = true;
	log_info("fd store: bus handed over (%zu fds)", fds.n);
out_fds:
	free(fds.v);
out:
	(void)sd_event_exit(broker->event, 0);
}

static void reexec_wait_end(struct broker *broker)
{
	struct listener *l;

	broker->reexec_wait = sd_event_source_disable_unref(broker->reexec_wait);
	list_for_each_entry(l, &broker->listeners, link)
		listener_release(l);
}

static int reexec_wait_cb(sd_event_source *s, uint64_t usec, void *userdata)
{
	struct broker *broker = userdata;
	unsigned int n = n_authenticating(&broker->bus);

	if (n && usec < broker->reexec_deadline)
		return sd_event_source_set_time_relative(s, REEXEC_WAIT_POLL_USEC) < 0 ? 0 :
		       sd_event_source_set_enabled(s, SD_EVENT_ONESHOT);
	/* The listeners go back on before the exec: the new program must watch them. */
	reexec_wait_end(broker);
	if (broker->reexec_hand_over) {
		/* Stopping: with what can be carried, or without. */
		hand_over_now(broker);
		return 0;
	}
	if (n) {
		log_warn("re-exec refused: %u client%s still authenticating after %llu ms", n,
			 n == 1 ? "" : "s", (unsigned long long)REEXEC_WAIT_MAX_MSEC(broker));
		return 0;
	}
	reexec_now(broker);
	return 0;
}

static void reexec_start(struct broker *broker, bool hand_over)
{
	unsigned int n = n_authenticating(&broker->bus);
	struct listener *l;
	uint64_t now;
	int r;

	if (broker->reexec_wait) {
		if (hand_over && broker->reexec_hand_over) {
			/* A second SIGTERM: stop now, whatever is lost. */
			reexec_wait_end(broker);
			(void)sd_event_exit(broker->event, 0);
			return;
		}
		/* A SIGTERM during a re-exec's wait: the hand-over waits on the same. */
		broker->reexec_hand_over |= hand_over;
		log_info("re-exec: already waiting for clients to authenticate");
		return;
	}
	broker->reexec_hand_over = hand_over;
	if (!n) {
		if (hand_over)
			hand_over_now(broker);
		else
			reexec_now(broker);
		return;
	}
	/*
	 * A client in SASL is not carried over: let those there finish (or
	 * meet auth_timeout) while new ones wait in the backlog.
	 */
	list_for_each_entry(l, &broker->listeners, link) {
		r = listener_hold(l);
		if (r < 0)
			goto fail;
	}
	r = sd_event_now(broker->event, CLOCK_MONOTONIC, &now);
	if (r < 0)
		goto fail;
	broker->reexec_deadline = now + REEXEC_WAIT_MAX_MSEC(broker) * 1000;
	r = sd_event_add_time(broker->event, &broker->reexec_wait, CLOCK_MONOTONIC,
			      now + REEXEC_WAIT_POLL_USEC, 0, reexec_wait_cb, broker);
	if (r < 0)
		goto fail;
	log_info("re-exec: waiting for %u client%s to finish authenticating", n,
		 n == 1 ? "" : "s");
	return;
fail:
	reexec_wait_end(broker);
	log_warn("re-exec refused: cannot wait for the clients authenticating: %s",
		 strerror(-r));
	if (hand_over)
		(void)sd_event_exit(broker->event, 0);
}

void reexec_run(struct broker *broker)
{
	reexec_start(broker, false);
}

void reexec_hand_over(struct broker *broker)
{
	reexec_start(broker, true);
}

/* ------------------------------------------------------------- restoring */

/* Calls @fn on each fd open from 3 on. */
static void for_each_open_fd(void (*fn)(int fd, void *userdata), void *userdata)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;

	if (!d)
		return;
	while ((e = readdir(d))) {
		int fd = atoi(e->d_name);

		if (fd > STDERR_FILENO && fd != dirfd(d))
			fn(fd, userdata);
	}
	closedir(d);
}

static void set_fd_cloexec(int fd, void *userdata)
{
	int flags = fcntl(fd, F_GETFD);

	if (flags >= 0 && !(flags & FD_CLOEXEC))
		(void)fcntl(fd, F_SETFD, flags | FD_CLOEXEC);
}

void reexec_cloexec_all(void)
{
	/*
	 * In one call: with 1000 clients, reading /proc/self/fd and two
	 * fcntl() per fd took 3 ms of the re-exec. Which fds came from the
	 * previous program is only needed to go back, and then the state
	 * tells (broker_restore()).
	 */
	if (close_range(STDERR_FILENO + 1, ~0U, CLOSE_RANGE_CLOEXEC) == 0)
		return;
	/* Before Linux 5.11: one by one. */
	for_each_open_fd(set_fd_cloexec, NULL);
}

static void add_fd(int fd, void *userdata)
{
	reexec_fds_add(userdata, fd);
}

void reexec_fds_open(struct reexec_fds *s)
{
	for_each_open_fd(add_fd, s);
}

void reexec_go_back(int fallback_fd, char **argv, struct reexec_fds *handed)
{
	size_t n = 0, k = 0;
	char **v;

	log_err("re-exec: going back to the previous program");
	if (handed->error)
		log_err("re-exec: out of memory counting the fds handed over; some are lost");
	/*
	 * Without --reexec-fallback: should the previous program fail too, it
	 * must not go back to itself for ever. Its own file is not handed over
	 * (fexecve() of an ELF file works with FD_CLOEXEC).
	 */
	while (argv[n])
		n++;
	v = calloc(n + 1, sizeof(*v));
	if (!v) {
		log_err("re-exec: out of memory going back");
		return;
	}
	for (size_t i = 0; i < n; i++)
		if (strncmp(argv[i], "--reexec-fallback=", 18))
			v[k++] = argv[i];
	set_cloexec(handed->v, handed->n, false);
	(void)fcntl(fallback_fd, F_SETFD, FD_CLOEXEC);
	fexecve(fallback_fd, v, environ);
	log_err("re-exec: cannot execute the previous program: %m");
	set_cloexec(handed->v, handed->n, true);
	free(v);
}
