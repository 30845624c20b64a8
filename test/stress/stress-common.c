/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Helpers of the stress tests; see stress-common.h.
 */

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/capability.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "dbus-compat/sasl-client.h"
#include "stress-common.h"
#include "time-factor.h"

#define MAX_CHILDREN 64

static struct sbus *current_bus;
static pid_t children[MAX_CHILDREN];
static size_t n_children;
static bool failed;
static pid_t main_pid;

uint64_t now_usec(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000 + (uint64_t)ts.tv_nsec / 1000;
}

static void print_log(const char *path)
{
	char line[1024];
	FILE *f = fopen(path, "re");
	unsigned int n = 0;

	if (!f)
		return;
	fprintf(stderr, "--- bus log (first 200 lines) ---\n");
	while (fgets(line, sizeof(line), f) && n++ < 200)
		fputs(line, stderr);
	fclose(f);
}

/* Remove the bus's private directory and what a killed bus left in it (its socket). */
static void remove_dir(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	char path[512];

	while (d && (de = readdir(d))) {
		if (de->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
		unlink(path);
	}
	if (d)
		closedir(d);
	rmdir(dir);
}

static void cleanup_at_exit(void)
{
	if (getpid() != main_pid)
		return;
	for (size_t i = 0; i < n_children; i++) {
		kill(children[i], SIGKILL);
		waitpid(children[i], NULL, 0);
	}
	n_children = 0;
	if (current_bus) {
		if (failed)
			print_log(current_bus->log);
		if (current_bus->pid > 0) {
			kill(current_bus->pid, SIGKILL);
			waitpid(current_bus->pid, NULL, 0);
		}
		remove_dir(current_bus->dir);
		current_bus = NULL;
	}
}

/* meson's timeout sends SIGTERM: take the bus and the helpers down with us. */
static void on_fatal_signal(int sig)
{
	if (getpid() == main_pid) {
		for (size_t i = 0; i < n_children; i++)
			kill(children[i], SIGKILL);
		if (current_bus && current_bus->pid > 0)
			kill(current_bus->pid, SIGKILL);
	}
	signal(sig, SIG_DFL);
	raise(sig);
}

void stress_fail(const char *file, int line, const char *fmt, ...)
{
	va_list ap;

	fflush(stdout);
	fprintf(stderr, "FAIL %s:%d: ", file, line);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	failed = true;
	if (getpid() != main_pid)
		_exit(1);
	exit(1);
}

/* A failed CHECK() (check.h) calls this before abort(), which runs no exit handler. */
void check_failure_hook(void)
{
	failed = true;
	cleanup_at_exit();
}

bool stress_check_memory(void)
{
	const char *w = getenv("BUS_WRAPPER");

	return !STRESS_SANITIZED && !(w && *w);
}

void raise_nofile(unsigned long n)
{
	struct rlimit rl;

	CHECK(getrlimit(RLIMIT_NOFILE, &rl) == 0, "getrlimit");
	if (rl.rlim_cur >= n)
		return;
	rl.rlim_cur = n < rl.rlim_max ? n : rl.rlim_max;
	CHECK(setrlimit(RLIMIT_NOFILE, &rl) == 0, "setrlimit: %m");
	CHECK(rl.rlim_cur >= n, "RLIMIT_NOFILE hard limit %lu < %lu", (unsigned long)rl.rlim_max, n);
}

size_t fit_connections(size_t want, unsigned long *bus_nofile)
{
	struct rlimit rl;

	*bus_nofile = 2 * want + 256;
	CHECK(getrlimit(RLIMIT_NOFILE, &rl) == 0, "getrlimit");
	if (rl.rlim_max < *bus_nofile) {
		struct rlimit more = { rl.rlim_cur, *bus_nofile };

		if (setrlimit(RLIMIT_NOFILE, &more) < 0) {
			*bus_nofile = rl.rlim_max;
			want = (*bus_nofile - 64) / 2 - 2;
			printf("RLIMIT_NOFILE hard limit %lu: %zu connections\n",
			       (unsigned long)rl.rlim_max, want);
		}
	}
	raise_nofile(want + 64);
	return want;
}

void stress_track_child(pid_t pid)
{
	CHECK(n_children < MAX_CHILDREN, "too many children");
	children[n_children++] = pid;
}

/* --- the bus ----------------------------------------------------------- */

static void parse_address(struct sbus *bus)
{
	const char *p = bus->address;

	/* The first unix entry with path= or abstract=. */
	while (p && *p) {
		if (!strncmp(p, "unix:", 5)) {
			const char *kv = p + 5;

			while (*kv && *kv != ';') {
				const char *end = kv + strcspn(kv, ",;");
				bool abstract = !strncmp(kv, "abstract=", 9);

				if (abstract || !strncmp(kv, "path=", 5)) {
					const char *v = kv + (abstract ? 9 : 5);
					size_t n = (size_t)(end - v);

					CHECK(n + 1 < sizeof(bus->path), "path too long");
					bus->path[0] = '\0';
					memcpy(bus->path + abstract, v, n);
					bus->path_len = n + abstract;
					bus->path[bus->path_len] = '\0';
					return;
				}
				kv = *end == ',' ? end + 1 : end;
			}
		}
		p = strchr(p, ';');
		if (p)
			p++;
	}
	FAIL("no unix path in address '%s'", bus->address);
}

void sbus_start(struct sbus *bus, const char *binary, const char *config, unsigned long nofile)
{
	const char *override = getenv("BUS_BINARY_OVERRIDE");
	const char *wrapper = getenv("BUS_WRAPPER");
	int pipefd[2];
	uint64_t deadline;
	unsigned int factor;
	size_t n = 0;

	if (!main_pid) {
		main_pid = getpid();
		atexit(cleanup_at_exit);
		signal(SIGPIPE, SIG_IGN);
		signal(SIGTERM, on_fatal_signal);
		signal(SIGINT, on_fatal_signal);
	}
	if (override && *override)
		binary = override;
	CHECK(binary, "usage: test BUS_BINARY");

	memset(bus, 0, sizeof(*bus));
	snprintf(bus->dir, sizeof(bus->dir), "/tmp/bus1-stress.XXXXXX");
	CHECK(mkdtemp(bus->dir), "mkdtemp: %m");
	snprintf(bus->log, sizeof(bus->log), "%s/bus.log", bus->dir);
	CHECK(pipe2(pipefd, O_CLOEXEC) == 0, "pipe: %m");
	current_bus = bus;

	bus->pid = fork();
	CHECK(bus->pid >= 0, "fork: %m");
	if (bus->pid == 0) {
		char *argv[64];
		char cfg[512], addr[128];
		char *words = wrapper ? strdup(wrapper) : NULL;
		int i = 0, logfd;

		signal(SIGPIPE, SIG_DFL);	/* ignored signals stay ignored across exec */
		if (getenv("STRESS_BUS_PRELOAD")) {
			/* Only the bus gets the shim; sanitizer runtimes must not object. */
			char opts[1024];
			const char *old = getenv("ASAN_OPTIONS");

			setenv("LD_PRELOAD", getenv("STRESS_BUS_PRELOAD"), 1);
			snprintf(opts, sizeof(opts), "%s%sverify_asan_link_order=0", old ? old : "",
				 old && *old ? ":" : "");
			setenv("ASAN_OPTIONS", opts, 1);
		}
		if (nofile) {
			struct rlimit rl = { nofile, nofile };

			if (setrlimit(RLIMIT_NOFILE, &rl) < 0)
				_exit(127);
			/*
			 * The bus raises its limit as dbus-daemon does, past the
			 * hard one with CAP_SYS_RESOURCE: keep that capability
			 * out of the bus so the limit holds (fails harmlessly
			 * without CAP_SETPCAP, when it could not raise it anyway).
			 */
			(void)prctl(PR_CAPBSET_DROP, CAP_SYS_RESOURCE, 0, 0, 0);
		}
		logfd = open(bus->log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
		if (logfd < 0 || dup2(logfd, 2) < 0 || dup2(pipefd[1], 3) < 0)
			_exit(127);
		/*
		 * Nothing of the test runner's goes in: fd counts of the bus then
		 * mean the bus' own (a re-exec drops what it inherited unknowingly).
		 */
		if (syscall(SYS_close_range, 4U, ~0U, 0U) < 0 && errno != ENOSYS)
			_exit(127);
		for (char *w = words ? strtok(words, " ") : NULL; w && i < 50; w = strtok(NULL, " "))
			argv[i++] = w;
		argv[i++] = (char *)binary;
		if (config) {
			snprintf(cfg, sizeof(cfg), "--config-file=%s", config);
			argv[i++] = cfg;
		} else {
			argv[i++] = (char *)"--session";
		}
		argv[i++] = (char *)"--nofork";
		snprintf(addr, sizeof(addr), "--address=unix:tmpdir=%s", bus->dir);
		argv[i++] = addr;
		argv[i++] = (char *)"--print-address=3";
		argv[i] = NULL;
		execvp(argv[0], argv);
		_exit(127);
	}
	close(pipefd[1]);

	/*
	 * Valgrind needs time to start, and a busy machine more (BUS1_TIME_FACTOR,
	 * tools/time-factor.sh): the bound only catches a bus that hangs.
	 */
	factor = test_time_factor();
	deadline = now_usec() + (wrapper && *wrapper ? 60 : 10) * (uint64_t)factor * 1000000ULL;
	while (n < sizeof(bus->address) - 1 && !memchr(bus->address, '\n', n)) {
		struct pollfd p = { .fd = pipefd[0], .events = POLLIN };
		ssize_t r;

		CHECK(now_usec() < deadline, "the bus did not print its address");
		if (poll(&p, 1, 100) <= 0)
			continue;
		r = read(pipefd[0], bus->address + n, sizeof(bus->address) - 1 - n);
		CHECK(r > 0, "the bus exited before printing its address");
		n += (size_t)r;
	}
	close(pipefd[0]);
	bus->address[strcspn(bus->address, "\n")] = '\0';
	parse_address(bus);
}

bool sbus_alive(struct sbus *bus)
{
	int status;

	if (bus->pid <= 0)
		return false;
	if (waitpid(bus->pid, &status, WNOHANG) == bus->pid) {
		fprintf(stderr, "the bus exited: %s %d\n",
			WIFSIGNALED(status) ? "signal" : "status",
			WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
		bus->pid = -1;
		return false;
	}
	return true;
}

void sbus_stop(struct sbus *bus)
{
	int status;

	CHECK(sbus_alive(bus), "the bus died during the test");
	kill(bus->pid, SIGTERM);
	CHECK(waitpid(bus->pid, &status, 0) == bus->pid, "waitpid");
	bus->pid = -1;
	CHECK(WIFEXITED(status), "the bus was killed by signal %d on SIGTERM",
	      WIFSIGNALED(status) ? WTERMSIG(status) : 0);
	CHECK(WEXITSTATUS(status) == 0, "the bus exited with %d on SIGTERM (log: %s)",
	      WEXITSTATUS(status), bus->log);
	remove_dir(bus->dir);
	current_bus = NULL;
}

long proc_status_kb(pid_t pid, const char *key)
{
	char path[64], line[256];
	size_t klen = strlen(key);
	long v = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	f = fopen(path, "re");
	CHECK(f, "open %s: %m", path);
	while (fgets(line, sizeof(line), f)) {
		if (!strncmp(line, key, klen) && line[klen] == ':') {
			v = strtol(line + klen + 1, NULL, 10);
			break;
		}
	}
	fclose(f);
	return v;
}

double proc_cpu_seconds(pid_t pid)
{
	char path[64], buf[1024], *p;
	unsigned long utime, stime;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	CHECK(fd >= 0, "open %s: %m", path);
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	CHECK(n > 0, "read %s", path);
	buf[n] = '\0';
	/* Fields after the command name (which may contain spaces). */
	p = strrchr(buf, ')');
	CHECK(p && sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu",
			   &utime, &stime) == 2, "parse %s", path);
	return (double)(utime + stime) / (double)sysconf(_SC_CLK_TCK);
}

int proc_fd_count_except(pid_t pid, const char *skip)
{
	char path[64], link[PATH_MAX], target[256];
	struct dirent *de;
	DIR *d;
	int n = 0;

	snprintf(path, sizeof(path), "/proc/%d/fd", (int)pid);
	d = opendir(path);
	CHECK(d, "opendir %s: %m", path);
	while ((de = readdir(d))) {
		ssize_t k;

		if (de->d_name[0] == '.')
			continue;
		if (skip) {
			snprintf(link, sizeof(link), "%s/%s", path, de->d_name);
			k = readlink(link, target, sizeof(target) - 1);
			if (k > 0) {
				target[k] = '\0';
				if (!strncmp(target, skip, strlen(skip)))
					continue;
			}
		}
		n++;
	}
	closedir(d);
	return n;
}

int proc_fd_count(pid_t pid)
{
	return proc_fd_count_except(pid, NULL);
}

/* --- raw client -------------------------------------------------------- */

int rc_connect(struct rc *c, const struct sbus *bus)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd;

	memset(c, 0, sizeof(*c));
	c->fd = -1;
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	memcpy(sa.sun_path, bus->path, bus->path_len);
	if (connect(fd, (struct sockaddr *)&sa,
		    (socklen_t)(offsetof(struct sockaddr_un, sun_path) + bus->path_len +
				(bus->path[0] ? 1 : 0))) < 0) {
		int e = -errno;

		close(fd);
		return e;
	}
	c->fd = fd;
	return 0;
}

void rc_close(struct rc *c)
{
	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
	for (size_t i = 0; i < c->n_stash; i++)
		dbus_message_unref(c->stash[i]);
	free(c->stash);
	c->stash = NULL;
	c->n_stash = c->cap_stash = 0;
	free(c->buf);
	c->buf = NULL;
	c->len = c->cap = 0;
}

int rc_write(struct rc *c, const void *data, size_t n, const int *fds, size_t n_fds)
{
	const uint8_t *p = data;

	while (n > 0) {
		struct iovec iov = { (void *)p, n };
		union {
			struct cmsghdr h;
			char buf[CMSG_SPACE(sizeof(int) * 253)];
		} ctl;
		struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
		struct pollfd pf = { .fd = c->fd, .events = POLLOUT };
		ssize_t r;

		if (n_fds) {
			CHECK(n_fds <= 253, "too many fds");
			memset(&ctl, 0, sizeof(ctl));
			mh.msg_control = ctl.buf;
			mh.msg_controllen = CMSG_SPACE(sizeof(int) * n_fds);
			ctl.h.cmsg_level = SOL_SOCKET;
			ctl.h.cmsg_type = SCM_RIGHTS;
			ctl.h.cmsg_len = CMSG_LEN(sizeof(int) * n_fds);
			memcpy(CMSG_DATA(&ctl.h), fds, sizeof(int) * n_fds);
		}
		r = sendmsg(c->fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (r < 0) {
			if (errno == EAGAIN) {
				poll(&pf, 1, 1000);
				continue;
			}
			if (errno == EINTR)
				continue;
			return -errno;
		}
		p += r;
		n -= (size_t)r;
		n_fds = 0;	/* the fds go with the first byte */
	}
	return 0;
}

uint32_t rc_send(struct rc *c, DBusMessage *m, const int *fds, size_t n_fds)
{
	char *data = NULL;
	int len = 0;
	uint32_t serial = ++c->serial;

	if (!serial)
		serial = ++c->serial;
	dbus_message_set_serial(m, serial);
	CHECK(dbus_message_marshal(m, &data, &len), "marshal");
	if (rc_write(c, data, (size_t)len, fds, n_fds) < 0)
		serial = 0;
	dbus_free(data);
	return serial;
}

int rc_fill(struct rc *c, int timeout_ms)
{
	struct pollfd pf = { .fd = c->fd, .events = POLLIN };
	union {
		struct cmsghdr h;
		char buf[CMSG_SPACE(sizeof(int) * 256)];
	} ctl;
	struct iovec iov;
	struct msghdr mh = {
		.msg_iov = &iov, .msg_iovlen = 1,
		.msg_control = ctl.buf, .msg_controllen = sizeof(ctl.buf),
	};
	ssize_t r;

	if (c->eof)
		return -1;
	if (poll(&pf, 1, timeout_ms) <= 0)
		return 0;
	if (c->cap - c->len < 65536) {
		c->cap = c->cap ? c->cap * 2 : 131072;
		c->buf = realloc(c->buf, c->cap);
		CHECK(c->buf, "oom");
	}
	iov.iov_base = c->buf + c->len;
	iov.iov_len = c->cap - c->len;
	r = recvmsg(c->fd, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
	if (r < 0 && (errno == EAGAIN || errno == EINTR))
		return 0;
	if (r <= 0) {
		c->eof = true;
		return -1;
	}
	for (struct cmsghdr *h = CMSG_FIRSTHDR(&mh); h; h = CMSG_NXTHDR(&mh, h)) {
		if (h->cmsg_level == SOL_SOCKET && h->cmsg_type == SCM_RIGHTS) {
			size_t k = (h->cmsg_len - CMSG_LEN(0)) / sizeof(int);
			int *fds = (int *)CMSG_DATA(h);

			for (size_t i = 0; i < k; i++)
				close(fds[i]);
			c->n_fds_received += k;
		}
	}
	c->len += (size_t)r;
	return (int)r;
}

static uint32_t get_u32(const uint8_t *p, bool le)
{
	return le ? (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
		    (uint32_t)p[3] << 24
		  : (uint32_t)p[3] | (uint32_t)p[2] << 8 | (uint32_t)p[1] << 16 |
		    (uint32_t)p[0] << 24;
}

static DBusMessage *take_frame(struct rc *c)
{
	DBusError err = DBUS_ERROR_INIT;
	DBusMessage *m;
	size_t size;
	bool le;

	if (c->len < 16)
		return NULL;
	le = c->buf[0] == 'l';
	size = 16 + ((get_u32(c->buf + 12, le) + 7) & ~7u) + get_u32(c->buf + 4, le);
	if (c->len < size)
		return NULL;
	m = dbus_message_demarshal((const char *)c->buf, (int)size, &err);
	CHECK(m, "cannot parse a message from the bus: %s", err.message);
	memmove(c->buf, c->buf + size, c->len - size);
	c->len -= size;
	c->n_messages++;
	return m;
}

DBusMessage *rc_take(struct rc *c)
{
	DBusMessage *m;

	if (c->n_stash) {
		m = c->stash[0];
		memmove(c->stash, c->stash + 1, --c->n_stash * sizeof(*c->stash));
		return m;
	}
	return take_frame(c);
}

static DBusMessage *recv_common(struct rc *c, int timeout_ms, bool use_stash)
{
	uint64_t deadline = now_usec() + (uint64_t)timeout_ms * 1000;

	for (;;) {
		DBusMessage *m = use_stash ? rc_take(c) : take_frame(c);
		int64_t left;

		if (m)
			return m;
		left = (int64_t)(deadline - now_usec()) / 1000;
		if ((int64_t)(deadline - now_usec()) <= 0 || c->eof)
			return NULL;
		rc_fill(c, (int)(left > 0 ? left : 1));
	}
}

DBusMessage *rc_recv(struct rc *c, int timeout_ms)
{
	return recv_common(c, timeout_ms, true);
}

static void stash_push(struct rc *c, DBusMessage *m)
{
	if (c->n_stash == c->cap_stash) {
		c->cap_stash = c->cap_stash ? 2 * c->cap_stash : 64;
		c->stash = realloc(c->stash, c->cap_stash * sizeof(*c->stash));
		CHECK(c->stash, "oom");
	}
	c->stash[c->n_stash++] = m;
}

DBusMessage *rc_wait_reply(struct rc *c, uint32_t serial, int timeout_ms)
{
	uint64_t deadline = now_usec() + (uint64_t)timeout_ms * 1000;

	for (;;) {
		int64_t left = (int64_t)(deadline - now_usec()) / 1000;
		DBusMessage *m;

		if (left < 0)
			return NULL;
		m = recv_common(c, (int)left, false);
		if (!m)
			return NULL;
		if (dbus_message_get_reply_serial(m) == serial &&
		    (dbus_message_get_type(m) == DBUS_MESSAGE_TYPE_METHOD_RETURN ||
		     dbus_message_get_type(m) == DBUS_MESSAGE_TYPE_ERROR))
			return m;
		if (c->keep)
			stash_push(c, m);
		else
			dbus_message_unref(m);
	}
}

DBusMessage *rc_call(struct rc *c, DBusMessage *m, int timeout_ms)
{
	uint32_t serial = rc_send(c, m, NULL, 0);
	const char *member = dbus_message_get_member(m);
	DBusMessage *reply;

	CHECK(serial, "cannot send %s: the bus closed the connection", member);
	reply = rc_wait_reply(c, serial, timeout_ms);
	CHECK(reply, "no reply to %s within %d ms%s", member, timeout_ms,
	      c->eof ? " (disconnected)" : "");
	dbus_message_unref(m);
	return reply;
}

bool rc_wait_closed(struct rc *c, int timeout_ms)
{
	uint64_t deadline = now_usec() + (uint64_t)timeout_ms * 1000;

	while (!c->eof && now_usec() < deadline) {
		rc_fill(c, 50);
		c->len = 0;	/* drop whatever arrives */
	}
	return c->eof;
}

int rc_handshake_start(struct rc *c, bool unix_fds)
{
	char line[SASL_CLIENT_PIPELINED_MAX];
	DBusMessage *hello = driver_call_new("Hello");
	char *data = NULL;
	int len = 0, r;
	size_t n;
	char *out;

	/* The whole handshake and Hello in one write, as sd-bus does. */
	n = sasl_client_pipelined(line, getuid(), unix_fds);
	c->unix_fds = unix_fds;
	c->serial = 1;
	dbus_message_set_serial(hello, 1);
	CHECK(dbus_message_marshal(hello, &data, &len), "marshal");
	dbus_message_unref(hello);
	out = malloc(n + (size_t)len);
	CHECK(out, "oom");
	memcpy(out, line, n);
	memcpy(out + n, data, (size_t)len);
	r = rc_write(c, out, n + (size_t)len, NULL, 0);
	free(out);
	dbus_free(data);
	return r;
}

/* A complete "\r\n" line at the start of the buffer, consumed, or false. */
static bool take_line(struct rc *c, char *line, size_t size)
{
	uint8_t *nl = c->len ? memchr(c->buf, '\n', c->len) : NULL;
	size_t n;

	if (!nl)
		return false;
	n = (size_t)(nl - c->buf) + 1;
	snprintf(line, size, "%.*s", (int)(n > 1 ? n - 2 : 0), (const char *)c->buf);
	memmove(c->buf, c->buf + n, c->len - n);
	c->len -= n;
	return true;
}

/*
 * The pipelined handshake. Until the unique name is known, name[0] is empty
 * and name[1] records the state: 0 = waiting for "OK", 'o' = waiting for
 * AGREE_UNIX_FD, 'a' = waiting for the reply to Hello.
 */
int rc_handshake_step(struct rc *c)
{
	char line[256];
	DBusMessage *m;

	if (c->name[0])
		return 1;
	if (rc_fill(c, 0) < 0 && !c->len)
		return -1;
	for (;;) {
		if (!c->name[1]) {
			if (!take_line(c, line, sizeof(line)))
				return c->eof ? -1 : 0;
			if (strncmp(line, "OK ", 3))
				return -1;
			c->name[1] = 'o';	/* OK seen; name[0] stays empty */
			if (!c->unix_fds)
				c->name[1] = 'a';
			continue;
		}
		if (c->name[1] == 'o') {
			if (!take_line(c, line, sizeof(line)))
				return c->eof ? -1 : 0;
			if (strcmp(line, "AGREE_UNIX_FD"))
				return -1;
			c->name[1] = 'a';
			continue;
		}
		m = rc_take(c);
		if (!m)
			return c->eof ? -1 : 0;
		if (dbus_message_get_reply_serial(m) == 1) {
			const char *name = NULL;
			bool ok = dbus_message_get_type(m) == DBUS_MESSAGE_TYPE_METHOD_RETURN &&
				  dbus_message_get_args(m, NULL, DBUS_TYPE_STRING, &name,
							DBUS_TYPE_INVALID);

			if (ok)
				snprintf(c->name, sizeof(c->name), "%s", name);
			dbus_message_unref(m);
			return ok ? 1 : -1;
		}
		dbus_message_unref(m);
	}
}

void rc_open(struct rc *c, const struct sbus *bus, bool unix_fds)
{
	uint64_t deadline = now_usec() + 10000000;
	int r;

	r = rc_connect(c, bus);
	CHECK(r == 0, "connect: %s", strerror(-r));
	CHECK(rc_handshake_start(c, unix_fds) == 0, "handshake write");
	while ((r = rc_handshake_step(c)) == 0) {
		CHECK(now_usec() < deadline, "handshake timed out");
		rc_fill(c, 100);
	}
	CHECK(r == 1, "handshake failed");
}

DBusMessage *driver_call_new(const char *member)
{
	DBusMessage *m = dbus_message_new_method_call(DRIVER, DRIVER_PATH, DRIVER, member);

	CHECK(m, "oom");
	return m;
}

DBusMessage *rc_driver_call(struct rc *c, const char *member, const char *arg)
{
	DBusMessage *m = driver_call_new(member);

	if (arg)
		dbus_message_append_args(m, DBUS_TYPE_STRING, &arg, DBUS_TYPE_INVALID);
	return rc_call(c, m, 10000);
}

const char *msg_error(DBusMessage *m)
{
	return dbus_message_get_type(m) == DBUS_MESSAGE_TYPE_ERROR ?
	       dbus_message_get_error_name(m) : NULL;
}

uint64_t rc_ping(struct rc *c)
{
	uint64_t t0 = now_usec();
	DBusMessage *r = rc_driver_call(c, "GetId", NULL);

	CHECK(!msg_error(r), "GetId failed: %s", msg_error(r));
	dbus_message_unref(r);
	return now_usec() - t0;
}

uint64_t rc_echo_call(struct rc *c, const char *peer, int timeout_ms)
{
	DBusMessage *m = dbus_message_new_method_call(peer, "/", STRESS_IFACE, "Echo");
	uint64_t t0 = now_usec();
	DBusMessage *r = rc_call(c, m, timeout_ms);

	CHECK(!msg_error(r), "Echo failed: %s", msg_error(r));
	dbus_message_unref(r);
	return now_usec() - t0;
}

/* The uint32 (or boolean: 0, 1) entry @key of the a{sv} of @r (which it takes), or -1. */
static long stats_u32(DBusMessage *r, const char *what, const char *key)
{
	DBusMessageIter it, arr;
	long v = -1;

	CHECK(!msg_error(r), "%s: %s", what, msg_error(r));
	dbus_message_iter_init(r, &it);
	dbus_message_iter_recurse(&it, &arr);
	while (dbus_message_iter_get_arg_type(&arr) == DBUS_TYPE_DICT_ENTRY) {
		DBusMessageIter e, var;
		const char *k;

		dbus_message_iter_recurse(&arr, &e);
		dbus_message_iter_get_basic(&e, &k);
		dbus_message_iter_next(&e);
		dbus_message_iter_recurse(&e, &var);
		if (!strcmp(k, key) && dbus_message_iter_get_arg_type(&var) == DBUS_TYPE_UINT32) {
			uint32_t u;

			dbus_message_iter_get_basic(&var, &u);
			v = u;
		} else if (!strcmp(k, key) &&
			   dbus_message_iter_get_arg_type(&var) == DBUS_TYPE_BOOLEAN) {
			dbus_bool_t b;

			dbus_message_iter_get_basic(&var, &b);
			v = !!b;
		}
		dbus_message_iter_next(&arr);
	}
	dbus_message_unref(r);
	return v;
}

long rc_bus_stat(struct rc *c, const char *key)
{
	return stats_u32(rc_call(c, dbus_message_new_method_call(DRIVER, DRIVER_PATH,
								 DRIVER ".Debug.Stats",
								 "GetStats"), 10000),
			 "GetStats", key);
}

long rc_conn_stat(struct rc *c, const char *name, const char *key)
{
	DBusMessage *m = dbus_message_new_method_call(DRIVER, DRIVER_PATH, DRIVER ".Debug.Stats",
						      "GetConnectionStats");

	dbus_message_append_args(m, DBUS_TYPE_STRING, &name, DBUS_TYPE_INVALID);
	return stats_u32(rc_call(c, m, 10000), "GetConnectionStats", key);
}

bool rc_name_has_owner(struct rc *c, const char *name)
{
	DBusMessage *r = rc_driver_call(c, "NameHasOwner", name);
	dbus_bool_t b = FALSE;

	CHECK(!msg_error(r), "NameHasOwner: %s", msg_error(r));
	CHECK(dbus_message_get_args(r, NULL, DBUS_TYPE_BOOLEAN, &b, DBUS_TYPE_INVALID), "args");
	dbus_message_unref(r);
	return b;
}

/* --- figures ----------------------------------------------------------- */

void lat_add(struct lat *l, uint64_t usec)
{
	if (l->n == l->cap) {
		l->cap = l->cap ? l->cap * 2 : 1024;
		l->v = realloc(l->v, l->cap * sizeof(*l->v));
		CHECK(l->v, "oom");
	}
	l->v[l->n++] = usec;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

uint64_t lat_pct(struct lat *l, double p)
{
	size_t i;

	if (!l->n)
		return 0;
	qsort(l->v, l->n, sizeof(*l->v), cmp_u64);
	i = (size_t)(p / 100.0 * (double)(l->n - 1) + 0.5);
	return l->v[i];
}

void lat_print(const char *what, struct lat *l)
{
	printf("  %-44s n=%-6zu p50=%6.0f us  p99=%7.0f us  max=%7.0f us\n", what, l->n,
	       (double)lat_pct(l, 50), (double)lat_pct(l, 99), (double)lat_pct(l, 100));
}

void lat_free(struct lat *l)
{
	free(l->v);
	memset(l, 0, sizeof(*l));
}

pid_t fork_echo_peer(struct rc *c)
{
	pid_t pid = fork();

	CHECK(pid >= 0, "fork: %m");
	if (pid > 0) {
		stress_track_child(pid);
		return pid;
	}
	for (;;) {
		DBusMessage *m = rc_recv(c, 1000);

		if (!m) {
			if (c->eof)
				_exit(0);
			continue;
		}
		if (dbus_message_get_type(m) == DBUS_MESSAGE_TYPE_METHOD_CALL &&
		    !dbus_message_get_no_reply(m)) {
			DBusMessage *r = dbus_message_new_method_return(m);

			if (r) {
				rc_send(c, r, NULL, 0);
				dbus_message_unref(r);
			}
		}
		dbus_message_unref(m);
	}
}
