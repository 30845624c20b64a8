/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Service activation by fork/exec: Exec= lines, spawning a service (or the
 * <servicehelper>) and reaping it. See activation-internal.h.
 */

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>
#include "broker/activation/activation-internal.h"
#include "dbus-compat/message.h"
#include "dbus-compat/protocol.h"
#include "util/fd.h"

extern char **environ;

/* ------------------------------------------------------------ Exec= parsing */

struct strv_builder {
	char **v;
	size_t n, cap;
	char *word;
	size_t len, wcap;
};

static int word_add(struct strv_builder *b, char c)
{
	if (b->len + 1 >= b->wcap) {
		size_t cap = b->wcap ? b->wcap * 2 : 64;
		char *w = realloc(b->word, cap);

		if (!w)
			return -ENOMEM;
		b->word = w;
		b->wcap = cap;
	}
	b->word[b->len++] = c;
	return 0;
}

static int word_end(struct strv_builder *b)
{
	char *w;

	if (b->n + 2 > b->cap) {
		size_t cap = b->cap ? b->cap * 2 : 8;
		char **v = realloc(b->v, cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		b->v = v;
		b->cap = cap;
	}
	w = malloc(b->len + 1);
	if (!w)
		return -ENOMEM;
	if (b->len)
		memcpy(w, b->word, b->len);
	w[b->len] = '\0';
	b->v[b->n++] = w;
	b->v[b->n] = NULL;
	b->len = 0;
	return 0;
}

int activation_parse_exec(const char *line, char ***argvp, const char **errorp)
{
	struct strv_builder b = {};
	bool in_word = false;
	char quote = 0;
	const char *p;
	int r = 0;

	for (p = line; *p && r == 0; p++) {
		char c = *p;

		if (quote == '\'') {
			if (c == '\'')
				quote = 0;
			else
				r = word_add(&b, c);
		} else if (quote == '"') {
			if (c == '"') {
				quote = 0;
			} else if (c == '\\' && p[1] && strchr("\"\\`$\n", p[1])) {
				/* dbus keeps the newline of backslash-newline in "..." */
				r = word_add(&b, *++p);
			} else {
				r = word_add(&b, c);
			}
		} else if (c == ' ' || c == '\t' || c == '\n') {
			if (in_word)
				r = word_end(&b);
			in_word = false;
		} else if (c == '\'' || c == '"') {
			quote = c;
			in_word = true;
		} else if (c == '\\') {
			if (!p[1]) {
				quote = c;	/* a trailing backslash is an open quote */
				break;
			}
			p++;
			if (*p != '\n') {
				r = word_add(&b, *p);
				in_word = true;
			}
		} else if (c == '#') {
			/* dbus starts a comment at any unquoted '#', to the end of the line. */
			while (p[1] && p[1] != '\n')
				p++;
		} else {
			r = word_add(&b, c);
			in_word = true;
		}
	}
	if (r == 0 && quote) {
		*errorp = "Unclosed quotes in command line";
		r = ACTIVATION_E_FAILED;
	}
	if (r == 0 && in_word)
		r = word_end(&b);
	if (r == 0 && b.n == 0) {
		*errorp = "No tokens found in command line";
		r = ACTIVATION_E_FAILED;
	}
	free(b.word);
	if (r) {
		if (b.v)
			b.v[b.n] = NULL;
		activation_strv_free(b.v);
		return r;
	}
	*argvp = b.v;
	return 0;
}

/* ------------------------------------------------------------ children */

static void child_exited(struct child *c, const siginfo_t *si)
{
	struct activation *a = c->a;
	struct pending *p = c->pending;
	_cleanup_free_ char *text = NULL;
	const char *error = NULL;
	int exec_errno = 0;
	ssize_t l;

	/* A failed execve() left its errno in the pipe before the child exited. */
	do {
		l = read(c->err_fd, &exec_errno, sizeof(exec_errno));
	} while (l < 0 && errno == EINTR);

	if (l == (ssize_t)sizeof(exec_errno)) {
		error = DC_ERROR_SPAWN_EXEC_FAILED;
		if (asprintf(&text, "Failed to execute program %s: %s", c->name,
			     strerror(exec_errno)) < 0)
			text = NULL;
	} else if (si->si_code == CLD_EXITED) {
		if (si->si_status == 0) {
			/* It may have daemonized: wait for the name or the timeout. */
			if (p)
				act_log(a, 6, "Activated service '%s' exited with status 0 before "
					"taking its name; waiting for it", c->name);
		} else if (c->helper) {
			static const struct {
				int code;
				const char *name;
				const char *text;
			} map[] = {
				{ HELPER_EXIT_CONFIG_INVALID, DC_ERROR_SPAWN_CONFIG_INVALID,
				  "Invalid configuration (missing or empty <user>?)" },
				{ HELPER_EXIT_NO_MEMORY, DC_ERROR_NO_MEMORY,
				  "Launcher could not run (out of memory)" },
				{ HELPER_EXIT_SETUP_FAILED, DC_ERROR_SPAWN_SETUP_FAILED,
				  "Failed to setup environment correctly" },
				{ HELPER_EXIT_NAME_INVALID, DC_ERROR_SPAWN_SERVICE_INVALID,
				  "Bus name is not valid or missing" },
				{ HELPER_EXIT_SERVICE_NOT_FOUND, DC_ERROR_SPAWN_SERVICE_NOT_FOUND,
				  "Bus name not found in system service directory" },
				{ HELPER_EXIT_PERMISSIONS_INVALID, DC_ERROR_SPAWN_PERMISSIONS_INVALID,
				  "The permission of the setuid helper is not correct" },
				{ HELPER_EXIT_FILE_INVALID, DC_ERROR_SPAWN_PERMISSIONS_INVALID,
				  "The service file is incorrect or does not have all required "
				  "attributes" },
				{ HELPER_EXIT_EXEC_FAILED, DC_ERROR_SPAWN_EXEC_FAILED,
				  "Cannot launch daemon, file not found or permissions invalid" },
				{ HELPER_EXIT_INVALID_ARGS, DC_ERROR_INVALID_ARGS,
				  "Invalid arguments to command line" },
				{ HELPER_EXIT_CHILD_SIGNALED, DC_ERROR_SPAWN_CHILD_SIGNALED,
				  "Launched child was signaled, it probably crashed" },
			};

			error = DC_ERROR_SPAWN_CHILD_EXITED;
			for (size_t i = 0; i < ARRAY_SIZE(map); i++) {
				if (map[i].code == si->si_status) {
					error = map[i].name;
					text = strdup(map[i].text);
					break;
				}
			}
			if (!text && asprintf(&text, "Launch helper exited with unknown return "
					      "code %i", si->si_status) < 0)
				text = NULL;
		} else {
			error = DC_ERROR_SPAWN_CHILD_EXITED;
			if (asprintf(&text, "Process %s exited with status %d", c->name,
				     si->si_status) < 0)
				text = NULL;
		}
	} else {
		error = DC_ERROR_SPAWN_CHILD_SIGNALED;
		if (asprintf(&text, "Process %s received signal %d", c->name, si->si_status) < 0)
			text = NULL;
	}

	if (!error) {
		act_child_free(c);
		return;
	}
	if (!p) {
		/*
		 * Its activation ended already (it took the name, timed out, or
		 * failed with another child of the same Exec=): nothing to
		 * report, as dbus-daemon stops watching a child then.
		 */
		act_child_free(c);
		return;
	}
	{
		_cleanup_free_ char *exec = p->exec ? strdup(p->exec) : NULL;
		const char *t = text ? text : "activation failed";

		act_child_free(c);
		act_pending_fail(p, error, t);
		if (exec)
			act_pending_fail_same_exec(a, exec, error, t);
	}
}

int act_child_cb(sd_event_source *s, const siginfo_t *si, void *userdata)
{
	child_exited(userdata, si);
	return 0;
}

/*
 * Between fork() and execve(): async-signal-safe calls only. Reports the
 * errno of a failed execve() through @err_fd and exits 127.
 */
_Noreturn static void child_run(char **argv, char **envp, int err_fd, int null_fd,
				const struct rlimit *nofile)
{
	struct sigaction sa = { .sa_handler = SIG_DFL };
	sigset_t mask;
	int e;

	for (int sig = 1; sig < _NSIG; sig++)
		if (sig != SIGKILL && sig != SIGSTOP)
			(void)sigaction(sig, &sa, NULL);
	sigemptyset(&mask);
	(void)sigprocmask(SIG_SETMASK, &mask, NULL);

	/* Out of the way of 0..3 first. */
	err_fd = fcntl(err_fd, F_DUPFD_CLOEXEC, 10);
	null_fd = fcntl(null_fd, F_DUPFD, 10);
	if (err_fd < 0 || null_fd < 0)
		_exit(127);
	if (dup2(null_fd, STDIN_FILENO) < 0)
		_exit(127);
	for (int fd = STDOUT_FILENO; fd <= STDERR_FILENO; fd++)
		if (fcntl(fd, F_GETFD) < 0)
			(void)dup2(null_fd, fd);
	if (dup3(err_fd, 3, O_CLOEXEC) < 0)
		_exit(127);
	if (syscall(SYS_close_range, 4U, ~0U, 0U) < 0) {
		long max = sysconf(_SC_OPEN_MAX);

		for (long fd = 4; fd < (max > 0 && max < 65536 ? max : 65536); fd++)
			close((int)fd);
	}
	if (nofile)
		(void)setrlimit(RLIMIT_NOFILE, nofile);
	execve(argv[0], argv, envp);
	e = errno;
	(void)!write(3, &e, sizeof(e));
	_exit(127);
}

/*
 * Start the process of @p. Return 0 (running), ACTIVATION_E_FAILED with @err
 * set, or negative errno.
 */
int act_pending_spawn(struct pending *p, const struct bus_service *service,
		      const char *requester, const char *loginfo,
		      struct activation_error *err)
{
	struct activation *a = p->a;
	char **argv = NULL, **envp = NULL;
	_cleanup_close_ int null_fd = -1;
	int pipefd[2] = { -1, -1 };
	const char *perr = NULL;
	struct child *c = NULL;
	pid_t pid;
	int r;

	if (!a->event) {
		err->name = DC_ERROR_SPAWN_FAILED;
		err->message = strdup("Activation is not available (no event loop)");
		return err->message ? ACTIVATION_E_FAILED : -ENOMEM;
	}

	if (a->servicehelper) {
		if (!service->user) {
			err->name = DC_ERROR_SPAWN_FILE_INVALID;
			err->message = strdup("Cannot do system-bus activation with no user\n");
			return err->message ? ACTIVATION_E_FAILED : -ENOMEM;
		}
		/* The helper reads the .service file itself; it gets the name only. */
		argv = calloc(3, sizeof(*argv));
		if (!argv)
			return -ENOMEM;
		argv[0] = strdup(a->servicehelper);
		argv[1] = strdup(service->name);
		if (!argv[0] || !argv[1]) {
			r = -ENOMEM;
			goto out;
		}
	} else {
		r = activation_parse_exec(service->exec, &argv, &perr);
		if (r == ACTIVATION_E_FAILED) {
			err->name = DC_ERROR_INVALID_ARGS;
			err->message = strdup(perr);
			r = err->message ? ACTIVATION_E_FAILED : -ENOMEM;
		}
		if (r)
			goto out;
	}
	r = act_env_build(a, &envp);
	if (r < 0)
		goto out;

	c = calloc(1, sizeof(*c) + strlen(service->name) + 1);
	if (!c) {
		r = -ENOMEM;
		goto out;
	}
	strcpy(c->name, service->name);
	c->a = a;
	c->err_fd = -1;
	c->helper = a->servicehelper != NULL;
	list_init(&c->link);

	null_fd = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (null_fd < 0 || pipe2(pipefd, O_CLOEXEC) < 0) {
		r = -errno;
		err->name = DC_ERROR_SPAWN_SETUP_FAILED;
		if (asprintf(&err->message, "Failed to set up the child process: %s",
			     strerror(-r)) < 0)
			err->message = NULL;
		r = err->message ? ACTIVATION_E_FAILED : -ENOMEM;
		goto out;
	}

	act_log(a, 6, "Activating service name='%s' requested by '%s'%s%s%s%s", service->name,
		requester ? requester : "(unknown)", loginfo ? " (" : "", loginfo ? loginfo : "",
		loginfo ? ")" : "", a->servicehelper ? " (using servicehelper)" : "");
	pid = fork();
	if (pid < 0) {
		r = -errno;
		err->name = DC_ERROR_SPAWN_FORK_FAILED;
		if (asprintf(&err->message, "Failed to fork (%s)", strerror(-r)) < 0)
			err->message = NULL;
		r = err->message ? ACTIVATION_E_FAILED : -ENOMEM;
		goto out;
	}
	if (pid == 0)
		child_run(argv, envp, pipefd[1], null_fd,
			  a->have_nofile ? &a->nofile : NULL);

	pipefd[1] = safe_close(pipefd[1]);
	c->pid = pid;
	c->err_fd = steal_fd(&pipefd[0]);
	(void)fcntl(c->err_fd, F_SETFL, O_NONBLOCK);
	r = sd_event_add_child(a->event, &c->source, pid, WEXITED, act_child_cb, c);
	if (r < 0) {
		/* Cannot watch it: do not leave it running unobserved. */
		(void)kill(pid, SIGKILL);
		(void)waitpid(pid, NULL, 0);
		err->name = DC_ERROR_SPAWN_FAILED;
		if (asprintf(&err->message, "Cannot watch the child process: %s",
			     strerror(-r)) < 0)
			err->message = NULL;
		r = err->message ? ACTIVATION_E_FAILED : -ENOMEM;
		goto out;
	}
	list_append(&a->children, &c->link);
	c->pending = p;
	p->child = steal_ptr(c);
	r = 0;
out:
	safe_close(pipefd[0]);
	safe_close(pipefd[1]);
	if (c)
		act_child_free(c);
	activation_strv_free(argv);
	activation_strv_free(envp);
	return r;
}

