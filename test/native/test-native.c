/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Native clients (libbus1-client over /dev/bus1) and socket clients (sd-bus,
 * dbus-send, dbus-monitor) on one bus1-broker, in a guest with bus1.ko.
 * Runs against the bus in $DBUS_SESSION_BUS_ADDRESS (run-with-bus.sh).
 *
 *   test-native [CASE]     every case, or one; each runs in a forked child
 *
 * Exit 77 (skip) without /dev/bus1; a broker without the bus1 transport
 * fails (the bootstrap is refused).
 */

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <systemd/sd-bus.h>
#include <time.h>
#include <unistd.h>
#include <linux/bus1.h>
#include <sys/socket.h>
#include <sys/un.h>
#include "dbus-compat/address.h"
#include "dbus-compat/message.h"
#include "dbus-compat/native-protocol.h"
#include "dbus-compat/sasl-client.h"
#include "bus1-client.h"
#include "check.h"
#include "libbus1.h"

#define SVC_NAME "org.bus1.test.Native"
#define SVC_PATH "/org/bus1/test"
#define SVC_IFACE "org.bus1.test.Echo"
#define SOCK_NAME "org.bus1.test.Socket"
#define SIG_IFACE "org.bus1.test.Signals"
#define N_SIGNALS 200

static char tmpdir[64];


/*
 * A native open timed out: look at the broker's bus1 peer from outside
 * (pidfd_getfd gives us the same open file, so the same peer): is its queue
 * readable while the broker waits? Printed for the report, changes nothing
 * (PEEK without fds).
 */
static void dump_broker_peer(void)
{
	const char *bus_pid = getenv("BUS_PID");
	char path[128], link[128], buf[256];
	int pidfd, fd;
	FILE *f;

	if (!bus_pid)
		return;
	pidfd = (int)syscall(SYS_pidfd_open, atoi(bus_pid), 0);
	if (pidfd < 0)
		return;
	for (int n = 0; n < 64; n++) {
		struct pollfd p = { .events = POLLIN };
		struct bus1_cmd_recv recv = { .flags = BUS1_RECV_FLAG_PEEK | BUS1_RECV_FLAG_NO_FDS };
		ssize_t k;
		int r;

		snprintf(path, sizeof(path), "/proc/%s/fd/%d", bus_pid, n);
		k = readlink(path, link, sizeof(link) - 1);
		if (k <= 0)
			continue;
		link[k] = 0;
		if (strcmp(link, "/dev/bus1"))
			continue;
		fd = (int)syscall(SYS_pidfd_getfd, pidfd, n, 0);
		if (fd < 0)
			continue;
		p.fd = fd;
		r = poll(&p, 1, 0);
		fprintf(stderr, "broker bus1 fd %d: poll %d revents 0x%x\n", n, r, p.revents);
		r = ioctl(fd, BUS1_CMD_RECV, &recv);
		fprintf(stderr, "broker bus1 fd %d: RECV PEEK %s type %llu destination %llu "
			"bytes %llu\n", n, r < 0 ? strerror(errno) : "ok",
			(unsigned long long)recv.type, (unsigned long long)recv.destination,
			(unsigned long long)recv.n_bytes);
		close(fd);
	}
	close(pidfd);
	snprintf(path, sizeof(path), "/proc/%s/wchan", bus_pid);
	f = fopen(path, "r");
	if (f && fgets(buf, sizeof(buf), f))
		fprintf(stderr, "broker wchan: %s\n", buf);
	if (f)
		fclose(f);
}

static struct b1c_bus *open_native(void)
{
	struct b1c_bus *bus = NULL;
	int r = b1c_bus_open(&bus, NULL);

	if (r == -ETIMEDOUT)
		dump_broker_peer();
	if (r < 0)
		CHECK_FAIL("b1c_bus_open: %s", strerror(-r));
	return bus;
}

/* A method call to the driver with no or one string argument; returns the reply. */
static struct b1c_message *call_driver(struct b1c_bus *bus, const char *member, const char *arg)
{
	struct b1c_message *m = NULL, *reply = NULL;
	int r;

	CHECK_OK(b1c_message_new_method_call(&m, "org.freedesktop.DBus", "/org/freedesktop/DBus",
					    "org.freedesktop.DBus", member, arg ? "s" : ""));
	if (arg)
		CHECK_OK(b1c_message_append(m, "s", arg));
	r = b1c_bus_call(bus, m, 0, &reply);
	b1c_message_unref(m);
	if (r == B1C_CALL_ERROR)
		CHECK_FAIL("%s: %s: %s", member, b1c_message_get_error_name(reply),
		     b1c_message_get_error_text(reply));
	CHECK_OK(r);
	return reply;
}

static bool name_has_owner(struct b1c_bus *bus, const char *name)
{
	struct b1c_message *reply = call_driver(bus, "NameHasOwner", name);
	bool b = false;

	CHECK_OK(b1c_message_read(reply, "b", &b));
	b1c_message_unref(reply);
	return b;
}

static void wait_for_name(struct b1c_bus *bus, const char *name, bool present)
{
	for (int i = 0; i < 500; i++) {
		if (name_has_owner(bus, name) == present)
			return;
		usleep(10000);
	}
	CHECK_FAIL("name %s did not %s", name, present ? "appear" : "go away");
}

/* ------------------------------------------------------- the native service */

static bool svc_quit;

static int svc_method(struct b1c_bus *bus, struct b1c_message *m, void *userdata)
{
	const char *member = b1c_message_get_member(m);
	const char *iface = b1c_message_get_interface(m);

	if (!iface || strcmp(iface, SVC_IFACE))
		return 0;
	if (!strcmp(member, "Echo")) {
		const char *s;

		if (b1c_message_read(m, "s", &s) < 0)
			return b1c_bus_reply_error(bus, m, "org.freedesktop.DBus.Error.InvalidArgs",
						   "Echo takes a string");
		return b1c_bus_reply(bus, m, "s", s) ?: 1;
	}
	if (!strcmp(member, "Add")) {
		int32_t a, b;

		if (b1c_message_read(m, "ii", &a, &b) < 0)
			return b1c_bus_reply_error(bus, m, "org.freedesktop.DBus.Error.InvalidArgs",
						   "Add takes two ints");
		return b1c_bus_reply(bus, m, "i", a + b) ?: 1;
	}
	if (!strcmp(member, "Fail"))
		return b1c_bus_reply_error(bus, m, "org.bus1.test.Error.Failed",
					   "failed on purpose") ?: 1;
	if (!strcmp(member, "ReadFd")) {
		int fd = -1;
		char buf[64] = {};

		if (b1c_message_read(m, "h", &fd) < 0 || pread(fd, buf, sizeof(buf) - 1, 0) < 0)
			return b1c_bus_reply_error(bus, m, "org.bus1.test.Error.Failed",
						   "no readable fd");
		return b1c_bus_reply(bus, m, "s", buf) ?: 1;
	}
	if (!strcmp(member, "Sender")) {
		return b1c_bus_reply(bus, m, "s", b1c_message_get_sender(m)) ?: 1;
	}
	if (!strcmp(member, "How"))
		return b1c_bus_reply(bus, m, "s", b1c_message_is_direct(m) ? "direct" :
				     "brokered") ?: 1;
	if (!strcmp(member, "Whoami"))
		return b1c_bus_reply(bus, m, "s", b1c_bus_get_unique_name(bus)) ?: 1;
	if (!strcmp(member, "Release")) {
		struct b1c_message *c = NULL, *r = NULL;
		int k;

		CHECK_OK(b1c_message_new_method_call(&c, "org.freedesktop.DBus",
						    "/org/freedesktop/DBus",
						    "org.freedesktop.DBus", "ReleaseName", "s"));
		CHECK_OK(b1c_message_append(c, "s", SVC_NAME));
		k = b1c_bus_call(bus, c, 0, &r);
		CHECK(k == 0);
		b1c_message_unref(c);
		b1c_message_unref(r);
		return b1c_bus_reply(bus, m, "s", "released") ?: 1;
	}
	if (!strcmp(member, "Secret"))
		return b1c_bus_reply(bus, m, "s", "the secret") ?: 1;
	if (!strcmp(member, "Die"))
		_exit(0);	/* mid-call: the caller must get NoReply */
	if (!strcmp(member, "Quit")) {
		svc_quit = true;
		return b1c_bus_reply(bus, m, NULL) ?: 1;
	}
	return 0;
}

/* Dispatch what is queued on @bus, or wait up to @timeout_usec for more. */
static void native_step(struct b1c_bus *bus, uint64_t timeout_usec)
{
	int r = b1c_bus_process(bus);

	CHECK_OK(r);
	if (r == 0)
		CHECK_OK(b1c_bus_wait(bus, timeout_usec));
}

/* The same for an sd-bus connection. */
static void sd_step(sd_bus *bus, uint64_t timeout_usec)
{
	int r = sd_bus_process(bus, NULL);

	CHECK_OK(r);
	if (r == 0)
		CHECK_OK(sd_bus_wait(bus, timeout_usec));
}

/* SIGUSR1 to a "serve" service: it emits one Poked signal (test_fdstore.py). */
static volatile sig_atomic_t svc_poke;

static void svc_on_sigusr1(int sig)
{
	(void)sig;
	svc_poke = 1;
}

/*
 * Emit SVC_IFACE.Poked ("poke N") and print "poked N": a signal sent while
 * no bus process runs waits in the broker's bus1 queue.
 */
static void svc_emit_poke(struct b1c_bus *bus)
{
	static unsigned int n;
	char text[32];

	svc_poke = 0;
	snprintf(text, sizeof(text), "poke %u", ++n);
	CHECK_OK(b1c_bus_emit_signal(bus, SVC_PATH, SVC_IFACE, "Poked", "s", text));
	printf("poked %u\n", n);
	fflush(stdout);
}

static void run_loop(struct b1c_bus *bus, bool *quit)
{
	while (!*quit) {
		int r = b1c_bus_process(bus);

		if (r == -ECONNRESET)
			break;
		CHECK_OK(r);
		if (svc_poke)
			svc_emit_poke(bus);
		if (r == 0)
			CHECK_OK(b1c_bus_wait(bus, 1000000));	/* 0 on EINTR */
	}
}

/*
 * A native service: owns @name, answers SVC_IFACE until Quit (0) or until
 * the bus drops it (1). With @announce, prints "ready UNIQUE-NAME" first.
 */
static int serve_named(const char *name, bool announce)
{
	struct b1c_bus *bus = open_native();

	CHECK_OK(b1c_bus_add_object(bus, SVC_PATH, svc_method, NULL));
	CHECK(b1c_bus_request_name(bus, name, 0) == 1);
	if (announce)
		printf("ready %s\n", b1c_bus_get_unique_name(bus));
	run_loop(bus, &svc_quit);
	b1c_bus_free(bus);
	return svc_quit ? 0 : 1;
}

static pid_t start_named_service(const char *name)
{
	pid_t pid = fork();

	CHECK(pid >= 0);
	if (pid == 0) {
		(void)serve_named(name, false);
		_exit(0);
	}
	return pid;
}

static pid_t start_native_service(void)
{
	return start_named_service(SVC_NAME);
}

static void stop_service(struct b1c_bus *bus, const char *name, pid_t pid)
{
	struct b1c_message *m = NULL, *reply = NULL;
	int status;

	CHECK_OK(b1c_message_new_method_call(&m, name, SVC_PATH, SVC_IFACE, "Quit", ""));
	CHECK(b1c_bus_call(bus, m, 0, &reply) == 0);
	b1c_message_unref(m);
	b1c_message_unref(reply);
	CHECK(waitpid(pid, &status, 0) == pid);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

/* Call SVC_IFACE.@member on @dest with one string; returns the reply string (static). */
static int call_echo(struct b1c_bus *bus, const char *dest, const char *member, const char *arg,
		     char *out, size_t n_out)
{
	struct b1c_message *m = NULL, *reply = NULL;
	const char *s = NULL;
	int r;

	CHECK_OK(b1c_message_new_method_call(&m, dest, SVC_PATH, SVC_IFACE, member,
					    arg ? "s" : ""));
	if (arg)
		CHECK_OK(b1c_message_append(m, "s", arg));
	r = b1c_bus_call(bus, m, 5000000, &reply);
	b1c_message_unref(m);
	if (r == B1C_CALL_ERROR) {
		snprintf(out, n_out, "%s: %s", b1c_message_get_error_name(reply),
			 b1c_message_get_error_text(reply));
	} else if (r == 0) {
		CHECK_OK(b1c_message_read(reply, "s", &s));
		snprintf(out, n_out, "%s", s);
	}
	b1c_message_unref(reply);
	return r;
}

/* ----------------------------------------------------------------- cases */

static void test_unique_name(void)
{
	struct b1c_bus *a = open_native(), *b = open_native();
	struct b1c_message *reply;
	const char *key;
	uint32_t uid = (uint32_t)-1, pid = 0;

	CHECK(!strncmp(b1c_bus_get_unique_name(a), ":1.", 3));
	CHECK(!strncmp(b1c_bus_get_unique_name(b), ":1.", 3));
	CHECK(strcmp(b1c_bus_get_unique_name(a), b1c_bus_get_unique_name(b)));
	CHECK(name_has_owner(b, b1c_bus_get_unique_name(a)));

	/* GetConnectionCredentials of a native client: kernel-stamped uid and pid. */
	reply = call_driver(b, "GetConnectionCredentials", b1c_bus_get_unique_name(a));
	CHECK_OK(b1c_message_enter(reply, 'a'));
	while (b1c_message_peek(reply, NULL) == '{') {
		CHECK_OK(b1c_message_enter(reply, '{'));
		CHECK_OK(b1c_message_read(reply, "s", &key));
		if (!strcmp(key, "UnixUserID") || !strcmp(key, "ProcessID")) {
			uint32_t v;

			CHECK_OK(b1c_message_enter(reply, 'v'));
			CHECK_OK(b1c_message_read(reply, "u", &v));
			CHECK_OK(b1c_message_exit(reply));
			if (!strcmp(key, "UnixUserID"))
				uid = v;
			else
				pid = v;
		}
		CHECK_OK(b1c_message_exit(reply));
	}
	b1c_message_unref(reply);
	CHECK(uid == (uint32_t)getuid());
	CHECK(pid == (uint32_t)getpid());

	/* Closing the peer disconnects: the name goes away. */
	{
		char *name = strdup(b1c_bus_get_unique_name(a));

		b1c_bus_free(a);
		wait_for_name(b, name, false);
		free(name);
	}
	b1c_bus_free(b);
}

/* The "Pid:" of a pidfd, -2 if @fd is no pidfd. */
static int pidfd_pid(int fd)
{
	char path[64], line[128];
	int pid = -2;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", fd);
	f = fopen(path, "r");
	if (!f)
		return -2;
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, "Pid:", 4))
			pid = atoi(line + 4);
	fclose(f);
	return pid;
}

/*
 * GetConnectionCredentials of @name: ProcessID and a duplicate of the
 * ProcessFD (-1 if absent).
 */
static int credentials_pidfd(struct b1c_bus *bus, const char *name, uint32_t *pidp)
{
	struct b1c_message *reply = call_driver(bus, "GetConnectionCredentials", name);
	const char *key;
	int fd = -1;

	*pidp = 0;
	CHECK_OK(b1c_message_enter(reply, 'a'));
	while (b1c_message_peek(reply, NULL) == '{') {
		CHECK_OK(b1c_message_enter(reply, '{'));
		CHECK_OK(b1c_message_read(reply, "s", &key));
		if (!strcmp(key, "ProcessFD")) {
			int h;

			CHECK_OK(b1c_message_enter(reply, 'v'));
			CHECK_OK(b1c_message_read(reply, "h", &h));
			CHECK_OK(b1c_message_exit(reply));
			fd = fcntl(h, F_DUPFD_CLOEXEC, 3);
			CHECK(fd >= 0);
		} else if (!strcmp(key, "ProcessID")) {
			CHECK_OK(b1c_message_enter(reply, 'v'));
			CHECK_OK(b1c_message_read(reply, "u", pidp));
			CHECK_OK(b1c_message_exit(reply));
		} else {
			CHECK_OK(b1c_message_skip(reply));
		}
		CHECK_OK(b1c_message_exit(reply));
	}
	b1c_message_unref(reply);
	return fd;
}

/*
 * ProcessFD of native clients: the broker takes a pidfd of the process the
 * kernel stamps on the connection's first bus1 message, and sends it
 * through bus1 (the fd list of the reply).
 */
static void test_process_fd(void)
{
	struct b1c_bus *bus = open_native();
	int p[2], fd;
	uint32_t pid;
	char name[64] = "";
	pid_t child;

	/* Its own. */
	fd = credentials_pidfd(bus, b1c_bus_get_unique_name(bus), &pid);
	CHECK(fd >= 0);
	CHECK(pid == (uint32_t)getpid());
	CHECK(pidfd_pid(fd) == getpid());
	close(fd);

	/* Another native client's, in another process. */
	CHECK(pipe(p) == 0);
	child = fork();
	CHECK(child >= 0);
	if (child == 0) {
		struct b1c_bus *b = open_native();
		char c;

		close(p[0]);
		CHECK(write(p[1], b1c_bus_get_unique_name(b), strlen(b1c_bus_get_unique_name(b)))
		      > 0);
		close(p[1]);
		/* Until the parent is done (SIGKILL from the case runner at the latest). */
		while (read(STDIN_FILENO, &c, 1) < 0 && errno == EINTR)
			;
		pause();
		_exit(0);
	}
	close(p[1]);
	CHECK(read(p[0], name, sizeof(name) - 1) > 0);
	close(p[0]);
	fd = credentials_pidfd(bus, name, &pid);
	CHECK(fd >= 0);
	CHECK(pid == (uint32_t)child);
	CHECK(pidfd_pid(fd) == child);
	kill(child, SIGKILL);
	CHECK(waitpid(child, NULL, 0) == child);
	/* The process is gone: the pidfd says so, its pid cannot be confused. */
	CHECK(pidfd_pid(fd) == -1);
	close(fd);
	b1c_bus_free(bus);
}

static int async_done;

static int on_async_reply(struct b1c_bus *bus, struct b1c_message *m, void *userdata)
{
	int32_t v = 0;

	CHECK(b1c_message_get_type(m) == B1C_MESSAGE_METHOD_RETURN);
	CHECK_OK(b1c_message_read(m, "i", &v));
	CHECK(v == 42);
	async_done++;
	return 1;
}

static void test_native_call(void)
{
	struct b1c_bus *bus = open_native();
	struct b1c_message *m = NULL;
	char out[256], path[128];
	pid_t svc = start_native_service();
	int fd;

	wait_for_name(bus, SVC_NAME, true);

	CHECK(call_echo(bus, SVC_NAME, "Echo", "hello native", out, sizeof(out)) == 0);
	CHECK(!strcmp(out, "hello native"));
	CHECK(call_echo(bus, SVC_NAME, "Sender", NULL, out, sizeof(out)) == 0);
	CHECK(!strcmp(out, b1c_bus_get_unique_name(bus)));
	CHECK(call_echo(bus, SVC_NAME, "Fail", NULL, out, sizeof(out)) == B1C_CALL_ERROR);
	CHECK(!strcmp(out, "org.bus1.test.Error.Failed: failed on purpose"));
	CHECK(call_echo(bus, SVC_NAME, "NoSuchMethod", NULL, out, sizeof(out)) == B1C_CALL_ERROR);
	CHECK(!strncmp(out, "org.freedesktop.DBus.Error.UnknownMethod", 40));
	CHECK(call_echo(bus, "org.bus1.test.Nobody", "Echo", "x", out, sizeof(out)) ==
	      B1C_CALL_ERROR);
	CHECK(!strncmp(out, "org.freedesktop.DBus.Error.ServiceUnknown", 41));

	/* Async. */
	CHECK_OK(b1c_message_new_method_call(&m, SVC_NAME, SVC_PATH, SVC_IFACE, "Add", "ii"));
	CHECK_OK(b1c_message_append(m, "ii", 40, 2));
	CHECK_OK(b1c_bus_call_async(bus, m, on_async_reply, NULL));
	b1c_message_unref(m);
	for (int i = 0; i < 500 && !async_done; i++)
		native_step(bus, 10000);
	CHECK(async_done == 1);

	/* fd passing through bus1, both ways through the broker. */
	snprintf(path, sizeof(path), "%s/fdfile", tmpdir);
	fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	CHECK(fd >= 0);
	CHECK(write(fd, "through the kernel", 18) == 18);
	CHECK_OK(b1c_message_new_method_call(&m, SVC_NAME, SVC_PATH, SVC_IFACE, "ReadFd", "h"));
	CHECK_OK(b1c_message_append_fd(m, fd));
	close(fd);
	{
		struct b1c_message *reply = NULL;
		const char *s;

		CHECK(b1c_bus_call(bus, m, 0, &reply) == 0);
		CHECK_OK(b1c_message_read(reply, "s", &s));
		CHECK(!strcmp(s, "through the kernel"));
		b1c_message_unref(reply);
	}
	b1c_message_unref(m);

	stop_service(bus, SVC_NAME, svc);
	b1c_bus_free(bus);
}

static void test_native_dies(void)
{
	struct b1c_bus *bus = open_native();
	char out[256];
	pid_t svc = start_native_service();
	int status;

	wait_for_name(bus, SVC_NAME, true);
	CHECK(call_echo(bus, SVC_NAME, "Die", NULL, out, sizeof(out)) == B1C_CALL_ERROR);
	CHECK(!strncmp(out, "org.freedesktop.DBus.Error.NoReply", 34));
	CHECK(waitpid(svc, &status, 0) == svc);
	wait_for_name(bus, SVC_NAME, false);
	b1c_bus_free(bus);
}

static int run_cmd(const char *cmd, char *out, size_t n_out)
{
	FILE *f = popen(cmd, "r");
	size_t n;

	CHECK(f);
	n = fread(out, 1, n_out - 1, f);
	out[n] = 0;
	return pclose(f);
}

static void test_libdbus_to_native(void)
{
	struct b1c_bus *bus = open_native();
	char out[1024];
	pid_t svc = start_native_service();

	wait_for_name(bus, SVC_NAME, true);
	CHECK(run_cmd("dbus-send --session --print-reply --dest=" SVC_NAME " " SVC_PATH " "
		      SVC_IFACE ".Echo string:from-libdbus 2>&1", out, sizeof(out)) == 0);
	if (!strstr(out, "string \"from-libdbus\""))
		CHECK_FAIL("dbus-send output: %s", out);
	CHECK(run_cmd("dbus-send --session --print-reply --dest=" SVC_NAME " " SVC_PATH " "
		      SVC_IFACE ".Fail 2>&1", out, sizeof(out)) != 0);
	if (!strstr(out, "org.bus1.test.Error.Failed"))
		CHECK_FAIL("dbus-send output: %s", out);
	stop_service(bus, SVC_NAME, svc);
	b1c_bus_free(bus);
}

/* gdbus (GDBus) and busctl (sd-bus) call a native service and list it. */
static void test_tools_to_native(void)
{
	struct b1c_bus *bus = open_native();
	char out[4096];
	pid_t svc = start_native_service();

	wait_for_name(bus, SVC_NAME, true);
	CHECK(run_cmd("gdbus call --session --dest " SVC_NAME " --object-path " SVC_PATH
		      " --method " SVC_IFACE ".Echo from-gdbus 2>&1", out, sizeof(out)) == 0);
	if (!strstr(out, "('from-gdbus',)"))
		CHECK_FAIL("gdbus output: %s", out);
	CHECK(run_cmd("busctl --user call " SVC_NAME " " SVC_PATH " " SVC_IFACE
		      " Add ii 40 2 2>&1", out, sizeof(out)) == 0);
	if (strcmp(out, "i 42\n"))
		CHECK_FAIL("busctl output: %s", out);
	CHECK(run_cmd("busctl --user list --no-pager 2>&1", out, sizeof(out)) == 0);
	if (!strstr(out, SVC_NAME))
		CHECK_FAIL("busctl list: %s", out);
	stop_service(bus, SVC_NAME, svc);
	b1c_bus_free(bus);
}

/* The socket service: sd-bus, answers SVC_IFACE.Echo and Quit. */
static int sd_echo(sd_bus_message *m, void *userdata, sd_bus_error *error)
{
	const char *s;
	int r = sd_bus_message_read(m, "s", &s);

	if (r < 0)
		return r;
	return sd_bus_reply_method_return(m, "s", s);
}

static int sd_quit(sd_bus_message *m, void *userdata, sd_bus_error *error)
{
	*(bool *)userdata = true;
	return sd_bus_reply_method_return(m, "");
}

static const sd_bus_vtable sd_vtable[] = {
	SD_BUS_VTABLE_START(0),
	SD_BUS_METHOD("Echo", "s", "s", sd_echo, 0),
	SD_BUS_METHOD("Quit", "", "", sd_quit, 0),
	SD_BUS_VTABLE_END
};

static pid_t start_socket_service(void)
{
	pid_t pid = fork();

	CHECK(pid >= 0);
	if (pid == 0) {
		sd_bus *bus = NULL;
		bool quit = false;

		CHECK_OK(sd_bus_open_user(&bus));
		CHECK_OK(sd_bus_add_object_vtable(bus, NULL, SVC_PATH, SVC_IFACE, sd_vtable,
						 &quit));
		CHECK_OK(sd_bus_request_name(bus, SOCK_NAME, 0));
		while (!quit)
			sd_step(bus, 1000000);
		sd_bus_flush(bus);
		sd_bus_unref(bus);
		_exit(0);
	}
	return pid;
}

static void test_native_to_socket(void)
{
	struct b1c_bus *bus = open_native();
	char out[256];
	pid_t svc = start_socket_service();

	wait_for_name(bus, SOCK_NAME, true);
	CHECK(call_echo(bus, SOCK_NAME, "Echo", "to sd-bus", out, sizeof(out)) == 0);
	CHECK(!strcmp(out, "to sd-bus"));
	stop_service(bus, SOCK_NAME, svc);
	b1c_bus_free(bus);
}

/*
 * Run a monitor (@argv, looked up in PATH unless it names a path) with its
 * output in @path, and wait until it has printed something: by then it is
 * subscribed.
 */
static pid_t monitor_start(const char *path, char *const argv[])
{
	pid_t mon = fork();

	CHECK(mon >= 0);
	if (mon == 0) {
		int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);

		dup2(fd, 1);
		execvp(argv[0], argv);
		_exit(127);
	}
	for (int i = 0; i < 500; i++) {
		struct stat st;

		if (stat(path, &st) == 0 && st.st_size > 0)
			break;
		usleep(10000);
	}
	return mon;
}

/* Give the monitor time to print what it saw, stop it, and read its output. */
static void monitor_stop(pid_t mon, const char *path, char *buf, size_t size)
{
	ssize_t n;
	int fd;

	usleep(300000);
	kill(mon, SIGTERM);
	waitpid(mon, NULL, 0);
	fd = open(path, O_RDONLY);
	CHECK(fd >= 0);
	n = read(fd, buf, size - 1);
	CHECK(n > 0);
	buf[n] = 0;
	close(fd);
}

static void test_monitor(void)
{
	struct b1c_bus *bus = open_native();
	char *const dbus_monitor_argv[] = { "dbus-monitor", "--session", NULL };
	char path[128], cmd[256], out[256], buf[65536];
	pid_t svc = start_native_service(), mon;

	wait_for_name(bus, SVC_NAME, true);
	snprintf(path, sizeof(path), "%s/monitor.out", tmpdir);
	mon = monitor_start(path, dbus_monitor_argv);
	usleep(200000);
	CHECK(call_echo(bus, SVC_NAME, "Echo", "seen-by-monitor", out, sizeof(out)) == 0);
	monitor_stop(mon, path, buf, sizeof(buf));
	snprintf(cmd, sizeof(cmd), "sender=%s", b1c_bus_get_unique_name(bus));
	if (!strstr(buf, "member=Echo") || !strstr(buf, "seen-by-monitor") || !strstr(buf, cmd))
		CHECK_FAIL("dbus-monitor did not see the native call:\n%s", buf);
	stop_service(bus, SVC_NAME, svc);
	b1c_bus_free(bus);
}

/* ------------------------------------------------- mixed-audience ordering */

struct sub_state {
	FILE *log;
	int n;
};

/* Signals a subscriber waits for before it exits. */
static int sub_expect = 2 * N_SIGNALS;

static int on_native_signal(struct b1c_bus *bus, struct b1c_message *m, void *userdata)
{
	struct sub_state *s = userdata;
	const char *who;
	uint32_t seq;

	CHECK_OK(b1c_message_read(m, "su", &who, &seq));
	fprintf(s->log, "%s %u\n", who, seq);
	s->n++;
	return 1;
}

static int on_sd_signal(sd_bus_message *m, void *userdata, sd_bus_error *error)
{
	struct sub_state *s = userdata;
	const char *who;
	uint32_t seq;

	CHECK_OK(sd_bus_message_read(m, "su", &who, &seq));
	fprintf(s->log, "%s %u\n", who, seq);
	s->n++;
	return 1;
}

#define SIG_RULE "type='signal',interface='" SIG_IFACE "',member='Tick'"

static pid_t start_subscriber(int index, bool native)
{
	pid_t pid = fork();

	CHECK(pid >= 0);
	if (pid == 0) {
		struct sub_state s = {};
		char path[128], name[64];

		snprintf(path, sizeof(path), "%s/sub%d", tmpdir, index);
		snprintf(name, sizeof(name), "org.bus1.test.Sub%d", index);
		s.log = fopen(path, "w");
		CHECK(s.log);
		alarm(60);
		if (native) {
			struct b1c_bus *bus = open_native();

			CHECK_OK(b1c_bus_add_match(bus, SIG_RULE, on_native_signal, &s));
			CHECK(b1c_bus_request_name(bus, name, 0) == 1);
			while (s.n < sub_expect)
				native_step(bus, 1000000);
			b1c_bus_free(bus);
		} else {
			sd_bus *bus = NULL;

			CHECK_OK(sd_bus_open_user(&bus));
			CHECK_OK(sd_bus_add_match(bus, NULL, SIG_RULE, on_sd_signal, &s));
			CHECK_OK(sd_bus_request_name(bus, name, 0));
			while (s.n < sub_expect)
				sd_step(bus, 1000000);
			sd_bus_unref(bus);
		}
		fclose(s.log);
		_exit(0);
	}
	return pid;
}

static pid_t start_emitter(bool native)
{
	pid_t pid = fork();

	CHECK(pid >= 0);
	if (pid == 0) {
		const char *who = native ? "native" : "socket";

		if (native) {
			struct b1c_bus *bus = open_native();

			for (uint32_t i = 0; i < N_SIGNALS; i++)
				CHECK_OK(b1c_bus_emit_signal(bus, SVC_PATH, SIG_IFACE, "Tick", "su",
							    who, i));
			/* A round trip: every signal was routed before we leave. */
			b1c_message_unref(call_driver(bus, "GetId", NULL));
			b1c_bus_free(bus);
		} else {
			sd_bus *bus = NULL;

			CHECK_OK(sd_bus_open_user(&bus));
			for (uint32_t i = 0; i < N_SIGNALS; i++)
				CHECK_OK(sd_bus_emit_signal(bus, SVC_PATH, SIG_IFACE, "Tick", "su",
							   who, i));
			CHECK_OK(sd_bus_flush(bus));
			CHECK_OK(sd_bus_call_method(bus, "org.freedesktop.DBus",
						   "/org/freedesktop/DBus",
						   "org.freedesktop.DBus", "GetId", NULL, NULL,
						   ""));
			sd_bus_unref(bus);
		}
		_exit(0);
	}
	return pid;
}

static char *slurp(const char *path)
{
	FILE *f = fopen(path, "r");
	char *buf = calloc(1, 1 << 20);
	size_t n;

	CHECK(f && buf);
	n = fread(buf, 1, (1 << 20) - 1, f);
	buf[n] = 0;
	fclose(f);
	return buf;
}

static void test_signal_order(void)
{
	/* Subscribers 0, 1 native; 2, 3 socket. Emitters: one native, one socket. */
	struct b1c_bus *bus = open_native();
	pid_t subs[4], em[2];
	char *logs[4];
	int status;

	for (int i = 0; i < 4; i++)
		subs[i] = start_subscriber(i, i < 2);
	for (int i = 0; i < 4; i++) {
		char name[64];

		snprintf(name, sizeof(name), "org.bus1.test.Sub%d", i);
		wait_for_name(bus, name, true);
	}
	em[0] = start_emitter(true);
	em[1] = start_emitter(false);
	for (int i = 0; i < 2; i++) {
		CHECK(waitpid(em[i], &status, 0) == em[i]);
		CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	}
	for (int i = 0; i < 4; i++) {
		CHECK(waitpid(subs[i], &status, 0) == subs[i]);
		if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
			CHECK_FAIL("subscriber %d failed (status %d)", i, status);
	}
	for (int i = 0; i < 4; i++) {
		char path[128];
		unsigned next[2] = {};
		char *p;

		snprintf(path, sizeof(path), "%s/sub%d", tmpdir, i);
		logs[i] = slurp(path);
		/* Each emitter's signals in its own order, none lost. */
		for (p = logs[i]; *p;) {
			char who[16];
			unsigned seq;
			int k;

			CHECK(sscanf(p, "%15s %u", who, &seq) == 2);
			k = !strcmp(who, "socket");
			if (seq != next[k])
				CHECK_FAIL("subscriber %d: %s %u, expected %u", i, who, seq, next[k]);
			next[k]++;
			p = strchr(p, '\n');
			CHECK(p);
			p++;
		}
		CHECK(next[0] == N_SIGNALS && next[1] == N_SIGNALS);
	}
	/* The same total order for every subscriber, native and socket alike. */
	for (int i = 1; i < 4; i++)
		if (strcmp(logs[0], logs[i]))
			CHECK_FAIL("subscriber %d saw another order than subscriber 0", i);
	for (int i = 0; i < 4; i++)
		free(logs[i]);
	b1c_bus_free(bus);
}

/*
 * One signal to three native subscribers and one socket subscriber: the broker
 * reaches the three with ONE multicast SEND (counted with strace on the bus).
 */
static void test_multicast_once(void)
{
	struct b1c_bus *bus = open_native();
	const char *bus_pid = getenv("BUS_PID");
	char path[128], cmd[512], out[256], *trace;
	pid_t subs[4], st;
	int status, n_send = 0;

	if (!bus_pid || access("/usr/bin/strace", X_OK) < 0)
		CHECK_FAIL("needs BUS_PID and /usr/bin/strace");
	sub_expect = 1;
	for (int i = 0; i < 4; i++)
		subs[i] = start_subscriber(10 + i, i < 3);
	for (int i = 0; i < 4; i++) {
		char name[64];

		snprintf(name, sizeof(name), "org.bus1.test.Sub%d", 10 + i);
		wait_for_name(bus, name, true);
	}

	snprintf(path, sizeof(path), "%s/strace.out", tmpdir);
	st = fork();
	CHECK(st >= 0);
	if (st == 0) {
		execl("/usr/bin/strace", "strace", "-q", "-e", "trace=ioctl", "-o", path, "-p",
		      bus_pid, (char *)NULL);
		_exit(127);
	}
	/* strace writes its output file once attached; give it time to attach. */
	for (int i = 0; i < 500 && access(path, F_OK) < 0; i++)
		usleep(10000);
	usleep(500000);

	/* Emit from a socket client, so the broker's only SEND is the signal. */
	snprintf(cmd, sizeof(cmd), "dbus-send --session --type=signal " SVC_PATH " "
		 SIG_IFACE ".Tick string:socket uint32:0 2>&1");
	CHECK(run_cmd(cmd, out, sizeof(out)) == 0);
	for (int i = 0; i < 4; i++) {
		CHECK(waitpid(subs[i], &status, 0) == subs[i]);
		if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
			CHECK_FAIL("subscriber %d failed (status %d)", i, status);
	}
	usleep(200000);
	kill(st, SIGINT);
	CHECK(waitpid(st, &status, 0) == st);

	trace = slurp(path);
	/* BUS1_CMD_SEND = _IOWR(0x96, 0x20, 80 bytes); strace prints it raw. */
	for (char *p = trace; (p = strstr(p, "0x96, 0x20")); p++)
		n_send++;
	if (n_send != 1)
		CHECK_FAIL("expected 1 bus1 SEND from the broker, strace saw %d:\n%s", n_send, trace);
	free(trace);
	b1c_bus_free(bus);
}

static int noc_seen;

static int on_noc(struct b1c_bus *bus, struct b1c_message *m, void *userdata)
{
	const char *name, *old, *new;

	CHECK_OK(b1c_message_read(m, "sss", &name, &old, &new));
	if (!strcmp(name, SVC_NAME)) {
		if (noc_seen == 0 && !*old && *new)
			noc_seen = 1;
		else if (noc_seen == 1 && *old && !*new)
			noc_seen = 2;
	}
	return 1;
}

static void test_name_owner_changed(void)
{
	struct b1c_bus *bus = open_native();
	pid_t svc;

	CHECK_OK(b1c_bus_add_match(bus, "type='signal',sender='org.freedesktop.DBus',"
				  "member='NameOwnerChanged',arg0='" SVC_NAME "'", on_noc, NULL));
	svc = start_native_service();
	wait_for_name(bus, SVC_NAME, true);
	stop_service(bus, SVC_NAME, svc);
	for (int i = 0; i < 500 && noc_seen < 2; i++)
		native_step(bus, 10000);
	CHECK(noc_seen == 2);
	b1c_bus_free(bus);
}

static void test_bus1ctl(void)
{
	char out[4096], cmd[512];
	const char *ctl = getenv("BUS1CTL");
	struct b1c_bus *bus = open_native();
	pid_t svc = start_native_service();

	if (!ctl)
		CHECK_FAIL("BUS1CTL not set");
	wait_for_name(bus, SVC_NAME, true);
	snprintf(cmd, sizeof(cmd), "%s call %s %s %s.Echo s via-bus1ctl 2>&1", ctl, SVC_NAME,
		 SVC_PATH, SVC_IFACE);
	CHECK(run_cmd(cmd, out, sizeof(out)) == 0);
	if (strcmp(out, "\"via-bus1ctl\"\n"))
		CHECK_FAIL("bus1ctl call: %s", out);
	snprintf(cmd, sizeof(cmd), "%s list 2>&1", ctl);
	CHECK(run_cmd(cmd, out, sizeof(out)) == 0);
	if (!strstr(out, "\"" SVC_NAME "\""))
		CHECK_FAIL("bus1ctl list: %s", out);
	snprintf(cmd, sizeof(cmd), "%s introspect org.freedesktop.DBus / 2>&1", ctl);
	CHECK(run_cmd(cmd, out, sizeof(out)) == 0);
	if (!strstr(out, "<node"))
		CHECK_FAIL("bus1ctl introspect: %s", out);
	snprintf(cmd, sizeof(cmd), "%s call %s %s %s.Fail 2>&1", ctl, SVC_NAME, SVC_PATH,
		 SVC_IFACE);
	CHECK(run_cmd(cmd, out, sizeof(out)) != 0);
	if (!strstr(out, "org.bus1.test.Error.Failed: failed on purpose"))
		CHECK_FAIL("bus1ctl call Fail: %s", out);
	snprintf(cmd, sizeof(cmd), "%s emit /x org.bus1.test.X.Y su a 1 2>&1", ctl);
	CHECK(run_cmd(cmd, out, sizeof(out)) == 0);

	/* bus1ctl monitor (a native monitor) sees a call between two native clients. */
	{
		char *const monitor_argv[] = { (char *)ctl, "monitor", NULL };
		char path[128], buf[65536];
		pid_t mon;

		snprintf(path, sizeof(path), "%s/bus1ctl-monitor.out", tmpdir);
		mon = monitor_start(path, monitor_argv);
		CHECK(call_echo(bus, SVC_NAME, "Echo", "seen-by-bus1ctl", out, sizeof(out)) == 0);
		monitor_stop(mon, path, buf, sizeof(buf));
		if (!strstr(buf, "monitoring as :1.") || !strstr(buf, "member=Echo") ||
		    !strstr(buf, "\"seen-by-bus1ctl\""))
			CHECK_FAIL("bus1ctl monitor output:\n%s", buf);
	}

	/* bus1ctl top shows bus1.ko's per-user usage below the broker's: root's peers (the
	 * broker's, ours, the service's) in the kernel's table. */
	{
		char top[16384];
		const char *k, *row;
		unsigned int uid;
		unsigned long long peers;

		snprintf(cmd, sizeof(cmd), "%s top --once 2>&1", ctl);
		CHECK(run_cmd(cmd, top, sizeof(top)) == 0);
		k = strstr(top, "\nbus1.ko: ");
		if (!k || strncmp(k, "\nbus1.ko: peers ", 16) || !(row = strstr(k, "\nKUID ")))
			CHECK_FAIL("bus1ctl top has no kernel section:\n%s", top);
		row = strstr(row + 1, "\n0 ");
		if (!row || sscanf(row + 1, "%u %llu", &uid, &peers) != 2 || peers < 3)
			CHECK_FAIL("bus1ctl top: no kernel row of uid 0 with 3 peers:\n%s", top);
	}
	stop_service(bus, SVC_NAME, svc);
	b1c_bus_free(bus);
}

/* ----------------------------------------------------------------- bench */

static double now_sec(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static double bench_native_mode(const char *dest, int n, bool direct)
{
	struct b1c_bus *bus = open_native();
	char out[64];
	double t;

	if (direct) {
		CHECK_OK(b1c_bus_set_direct(bus, true));
		CHECK(call_echo(bus, dest, "How", NULL, out, sizeof(out)) == 0);
		CHECK(!strcmp(out, "direct"));
	}

	CHECK(call_echo(bus, dest, "Echo", "warm-up", out, sizeof(out)) == 0);
	t = now_sec();
	for (int i = 0; i < n; i++)
		CHECK(call_echo(bus, dest, "Echo", "ping", out, sizeof(out)) == 0);
	t = now_sec() - t;
	b1c_bus_free(bus);
	return n / t;
}

static double bench_native(const char *dest, int n)
{
	return bench_native_mode(dest, n, false);
}

static double bench_socket(const char *dest, int n)
{
	sd_bus *bus = NULL;
	double t;

	CHECK_OK(sd_bus_open_user(&bus));
	t = now_sec();
	for (int i = -1; i < n; i++) {
		sd_bus_message *reply = NULL;
		const char *s;

		if (i == 0)
			t = now_sec();
		CHECK_OK(sd_bus_call_method(bus, dest, SVC_PATH, SVC_IFACE, "Echo", NULL, &reply,
					   "s", "ping"));
		CHECK_OK(sd_bus_message_read(reply, "s", &s));
		sd_bus_message_unref(reply);
	}
	t = now_sec() - t;
	sd_bus_unref(bus);
	return n / t;
}

/*
 * Round trips through the broker: native and socket (sd-bus) callers to
 * native and socket services, in one bus, one guest run. Prints calls/s.
 */
/* Start dbus-daemon (the reference bus) in this guest; returns its pid, sets the address. */
static pid_t start_dbus_daemon(void)
{
	static char addr[512];
	int p[2];
	pid_t pid;
	ssize_t k;
	char fdarg[32];

	CHECK(pipe(p) == 0);
	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		close(p[0]);
		snprintf(fdarg, sizeof(fdarg), "--print-address=%d", p[1]);
		execlp("dbus-daemon", "dbus-daemon", "--session", "--nofork", "--nopidfile",
		       "--address=unix:tmpdir=/tmp", fdarg, (char *)NULL);
		_exit(127);
	}
	close(p[1]);
	k = read(p[0], addr, sizeof(addr) - 1);
	close(p[0]);
	CHECK(k > 0);
	addr[k] = 0;
	addr[strcspn(addr, "\n")] = 0;
	CHECK(setenv("DBUS_SESSION_BUS_ADDRESS", addr, 1) == 0);
	return pid;
}

/*
 * Round trips, one guest run: native clients through bus1-broker (brokered
 * and direct), socket clients (sd-bus) through bus1-broker, and the same
 * socket clients through dbus-daemon. Prints calls/s and ratios.
 */
static int run_bench(int n)
{
	struct b1c_bus *bus = open_native();
	pid_t nsvc = start_native_service(), ssvc = start_socket_service(), dd;
	double nn, nd, ns, sn, ss, dds;
	const char *broker_addr = getenv("DBUS_SESSION_BUS_ADDRESS");
	char *saved = strdup(broker_addr ? broker_addr : "");

	wait_for_name(bus, SVC_NAME, true);
	wait_for_name(bus, SOCK_NAME, true);
	nn = bench_native(SVC_NAME, n);
	nd = bench_native_mode(SVC_NAME, n, true);
	ss = bench_socket(SOCK_NAME, n);
	ns = bench_native(SOCK_NAME, n);
	sn = bench_socket(SVC_NAME, n);
	stop_service(bus, SVC_NAME, nsvc);
	stop_service(bus, SOCK_NAME, ssvc);
	b1c_bus_free(bus);

	/* The reference: the same socket clients on dbus-daemon, same guest. */
	dd = start_dbus_daemon();
	{
		sd_bus *b = NULL;

		ssvc = start_socket_service();
		CHECK_OK(sd_bus_open_user(&b));
		for (int i = 0; i < 500; i++) {
			if (sd_bus_call_method(b, SOCK_NAME, SVC_PATH, SVC_IFACE, "Echo", NULL,
					       NULL, "s", "up") >= 0)
				break;
			usleep(10000);
		}
		dds = bench_socket(SOCK_NAME, n);
		CHECK_OK(sd_bus_call_method(b, SOCK_NAME, SVC_PATH, SVC_IFACE, "Quit", NULL, NULL,
					   ""));
		sd_bus_unref(b);
		waitpid(ssvc, NULL, 0);
	}
	kill(dd, SIGTERM);
	waitpid(dd, NULL, 0);
	setenv("DBUS_SESSION_BUS_ADDRESS", saved, 1);
	free(saved);

	printf("round trips, %d calls each, one guest run (calls/s):\n", n);
	printf("  native -> native, direct (bus1 only)   %9.0f\n", nd);
	printf("  native -> native, via bus1-broker      %9.0f\n", nn);
	printf("  socket -> socket, via bus1-broker      %9.0f   (sd-bus both sides)\n", ss);
	printf("  native -> socket, via bus1-broker      %9.0f\n", ns);
	printf("  socket -> native, via bus1-broker      %9.0f\n", sn);
	printf("  socket -> socket, via dbus-daemon      %9.0f   (sd-bus both sides)\n", dds);
	printf("ratios: direct/brokered-native %.2f, direct/socket-broker %.2f, "
	       "direct/dbus-daemon %.2f, brokered-native/socket-broker %.2f, "
	       "socket-broker/dbus-daemon %.2f\n", nd / nn, nd / ss, nd / dds, nn / ss, ss / dds);
	return 0;
}

/*
 * Connection churn: four processes open, call and close native connections
 * while a fifth keeps calling a native service; everything must go on.
 */
static void test_churn(void)
{
	struct b1c_bus *bus = open_native();
	pid_t svc = start_native_service(), kids[5];
	int status;

	wait_for_name(bus, SVC_NAME, true);
	for (int k = 0; k < 5; k++) {
		kids[k] = fork();
		CHECK(kids[k] >= 0);
		if (kids[k] == 0) {
			if (k == 4) {
				struct b1c_bus *b = open_native();
				char out[64];

				for (int i = 0; i < 300; i++)
					CHECK(call_echo(b, SVC_NAME, "Echo", "churn", out,
							sizeof(out)) == 0);
				b1c_bus_free(b);
			} else {
				for (int i = 0; i < 40; i++) {
					struct b1c_bus *b = open_native();

					b1c_message_unref(call_driver(b, "GetId", NULL));
					b1c_bus_free(b);
				}
			}
			_exit(0);
		}
	}
	for (int k = 0; k < 5; k++) {
		CHECK(waitpid(kids[k], &status, 0) == kids[k]);
		if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
			CHECK_FAIL("churn child %d failed (status %d)", k, status);
	}
	stop_service(bus, SVC_NAME, svc);
	b1c_bus_free(bus);
}

/* ------------------------------------------------------------ stress */

/*
 * Many native clients bootstrap concurrently while signals are multicast to
 * native and socket subscribers, connectors die with calls in flight and
 * names come and go (NameOwnerChanged multicasts). Every bootstrap must
 * finish in time (a stalled broker shows as a Hello without reply: the
 * broker's peer is dumped then), and every subscriber gets every signal.
 * STRESS_ROUNDS=N repeats the whole case (for loops in a loaded guest).
 */
#define STORM_IFACE "org.bus1.test.Storm"
#define STORM_RULE "type='signal',interface='" STORM_IFACE "',member='Tick'"
#define STORM_EMITTERS 2
#define STORM_SIGNALS 400
#define STORM_SUBS 4
#define STORM_CONNECTORS 6
#define STORM_ROUNDS 25

static int on_storm(struct b1c_bus *bus, struct b1c_message *m, void *userdata)
{
	unsigned *next = userdata;
	uint32_t who, seq;

	CHECK_OK(b1c_message_read(m, "uu", &who, &seq));
	CHECK(who < STORM_EMITTERS);
	if (seq != next[who])
		CHECK_FAIL("storm: emitter %u: got %u, expected %u", who, seq, next[who]);
	next[who]++;
	return 1;
}

static int on_sd_storm(sd_bus_message *m, void *userdata, sd_bus_error *error)
{
	unsigned *next = userdata;
	uint32_t who, seq;

	CHECK_OK(sd_bus_message_read(m, "uu", &who, &seq));
	CHECK(who < STORM_EMITTERS);
	if (seq != next[who])
		CHECK_FAIL("storm: socket subscriber, emitter %u: got %u, expected %u", who, seq,
		     next[who]);
	next[who]++;
	return 1;
}

static bool storm_done(const unsigned *next)
{
	for (int i = 0; i < STORM_EMITTERS; i++)
		if (next[i] < STORM_SIGNALS)
			return false;
	return true;
}

/* Open with a bound on the bootstrap: a stall is reported, not waited out. */
static struct b1c_bus *open_native_timed(const char *what)
{
	double t0 = now_sec();
	struct b1c_bus *bus = open_native();
	double dt = now_sec() - t0;

	if (dt > 15)
		CHECK_FAIL("%s: bootstrap took %.1f s", what, dt);
	return bus;
}

static pid_t start_storm_subscriber(int index, bool native, int ready_fd)
{
	pid_t pid = fork();

	CHECK(pid >= 0);
	if (pid == 0) {
		unsigned next[STORM_EMITTERS] = {};

		alarm(80);
		if (native) {
			struct b1c_bus *bus = open_native_timed("subscriber");

			CHECK_OK(b1c_bus_add_match(bus, STORM_RULE, on_storm, next));
			CHECK(write(ready_fd, "r", 1) == 1);
			while (!storm_done(next))
				native_step(bus, 1000000);
			b1c_bus_free(bus);
		} else {
			sd_bus *bus = NULL;

			CHECK_OK(sd_bus_open_user(&bus));
			CHECK_OK(sd_bus_add_match(bus, NULL, STORM_RULE, on_sd_storm, next));
			CHECK(write(ready_fd, "r", 1) == 1);
			while (!storm_done(next))
				sd_step(bus, 1000000);
			sd_bus_unref(bus);
		}
		(void)index;
		_exit(0);
	}
	return pid;
}

static pid_t start_storm_emitter(uint32_t who)
{
	pid_t pid = fork();

	CHECK(pid >= 0);
	if (pid == 0) {
		struct b1c_bus *bus = open_native_timed("emitter");

		alarm(80);
		for (uint32_t i = 0; i < STORM_SIGNALS; i++) {
			CHECK_OK(b1c_bus_emit_signal(bus, SVC_PATH, STORM_IFACE, "Tick", "uu",
						    who, i));
			/* Now and then a round trip, so the emitter cannot run away. */
			if (i % 50 == 49)
				b1c_message_unref(call_driver(bus, "GetId", NULL));
		}
		b1c_message_unref(call_driver(bus, "GetId", NULL));
		b1c_bus_free(bus);
		_exit(0);
	}
	return pid;
}

static pid_t start_storm_connector(int k)
{
	pid_t pid = fork();

	CHECK(pid >= 0);
	if (pid == 0) {
		alarm(80);
		for (int i = 0; i < STORM_ROUNDS; i++) {
			struct b1c_bus *b = open_native_timed("connector");
			char name[64];

			switch (i % 3) {
			case 0:
				b1c_message_unref(call_driver(b, "GetId", NULL));
				break;
			case 1:
				/* A name that goes with the connection: NameOwnerChanged. */
				snprintf(name, sizeof(name), "org.bus1.test.Storm.C%d", k);
				CHECK(b1c_bus_request_name(b, name, 0) == 1);
				break;
			case 2: {
				/* Leave with a call in flight, its reply never read. */
				struct b1c_message *m = NULL;

				CHECK_OK(b1c_message_new_method_call(&m, "org.freedesktop.DBus",
								    "/org/freedesktop/DBus",
								    "org.freedesktop.DBus",
								    "ListNames", ""));
				CHECK_OK(b1c_bus_send(b, m, NULL));
				b1c_message_unref(m);
				break;
			}
			}
			b1c_bus_free(b);
		}
		_exit(0);
	}
	return pid;
}

static void storm_round(struct b1c_bus *bus)
{
	pid_t subs[STORM_SUBS], em[STORM_EMITTERS], conns[STORM_CONNECTORS];
	int status, ready[2];
	char c;

	CHECK(pipe(ready) == 0);
	for (int i = 0; i < STORM_SUBS; i++)
		subs[i] = start_storm_subscriber(i, i != STORM_SUBS - 1, ready[1]);
	for (int i = 0; i < STORM_SUBS; i++)
		CHECK(read(ready[0], &c, 1) == 1);
	close(ready[0]);
	close(ready[1]);
	/* The matches are in place once a round trip of ours went through. */
	b1c_message_unref(call_driver(bus, "GetId", NULL));

	for (int i = 0; i < STORM_CONNECTORS; i++)
		conns[i] = start_storm_connector(i);
	for (uint32_t i = 0; i < STORM_EMITTERS; i++)
		em[i] = start_storm_emitter(i);

	for (int i = 0; i < STORM_CONNECTORS; i++) {
		CHECK(waitpid(conns[i], &status, 0) == conns[i]);
		if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
			CHECK_FAIL("storm connector %d failed (status %d)", i, status);
	}
	for (int i = 0; i < STORM_EMITTERS; i++) {
		CHECK(waitpid(em[i], &status, 0) == em[i]);
		if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
			CHECK_FAIL("storm emitter %d failed (status %d)", i, status);
	}
	for (int i = 0; i < STORM_SUBS; i++) {
		CHECK(waitpid(subs[i], &status, 0) == subs[i]);
		if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
			CHECK_FAIL("storm subscriber %d failed (status %d)", i, status);
	}
	/* The bus still answers a fresh native client. */
	b1c_bus_free(open_native_timed("after the storm"));
}

static void test_stress(void)
{
	struct b1c_bus *bus = open_native();
	const char *s = getenv("STRESS_ROUNDS");
	int rounds = s ? atoi(s) : 1;

	if (rounds > 1)
		alarm(0);
	for (int i = 0; i < rounds; i++) {
		storm_round(bus);
		if (rounds > 1)
			fprintf(stderr, "stress round %d ok\n", i + 1);
	}
	b1c_bus_free(bus);
}

/* ------------------------------------------------------------- quota */

/*
 * Native clients that never read. The broker bounds what stays unread for
 * one native client as it bounds a socket's output queue (docs/bus1-broker.1,
 * max_outgoing_bytes; for native clients also at most 1/8 of the kernel's
 * per-user quota, which all of them share): a method call that does not fit
 * fails with LimitsExceeded to its caller, a signal that does not fit
 * disconnects the receiver, and what a disconnected client left unread is
 * taken back from the kernel (its quota returns at once).
 */
#define QUOTA_IFACE "org.bus1.test.Quota"
#define QUOTA_RULE "type='signal',interface='" QUOTA_IFACE "',member='Tick'"
#define QUOTA_SIGNALS 2300
#define QUOTA_CALLS 160
#define QUOTA_CALL_SIZE (256 * 1024)

/* The kernel's accounting of our uid (the broker's too: one user in the guest). */
static void kernel_usage(uint64_t *bytes, uint64_t *messages, uint64_t *quota_messages)
{
	struct bus1_cmd_peer_query q = {};
	int fd = open("/dev/bus1", O_RDWR | O_CLOEXEC);

	CHECK(fd >= 0);
	CHECK(ioctl(fd, BUS1_CMD_PEER_QUERY, &q) == 0);
	close(fd);
	*bytes = q.used_bytes;
	*messages = q.used_messages;
	if (quota_messages)
		*quota_messages = q.quota_messages;
}

static pid_t start_lazy(const char *name, bool subscribe)
{
	int ready[2];
	pid_t pid;
	char c;

	CHECK(pipe(ready) == 0);
	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		struct b1c_bus *bus = open_native();

		close(ready[0]);
		if (subscribe)
			CHECK_OK(b1c_bus_add_match(bus, QUOTA_RULE, on_native_signal, NULL));
		CHECK(b1c_bus_request_name(bus, name, 0) == 1);
		CHECK(write(ready[1], "r", 1) == 1);
		/* Never reads again; holds its peer open until killed. */
		for (;;)
			pause();
	}
	close(ready[1]);
	CHECK(read(ready[0], &c, 1) == 1);
	close(ready[0]);
	return pid;
}

static int quota_refused, quota_other;

static int on_quota_reply(struct b1c_bus *bus, struct b1c_message *m, void *userdata)
{
	const char *e = b1c_message_get_error_name(m);

	if (e && !strcmp(e, "org.freedesktop.DBus.Error.LimitsExceeded"))
		quota_refused++;
	else
		quota_other++;
	return 1;
}

static int quota_seen;

static int on_quota_tick(struct b1c_bus *bus, struct b1c_message *m, void *userdata)
{
	uint32_t seq;

	CHECK_OK(b1c_message_read(m, "u", &seq));
	if (seq != (uint32_t)quota_seen)
		CHECK_FAIL("quota reader: tick %u, expected %d", seq, quota_seen);
	quota_seen++;
	return 1;
}

/* GetConnectionStats of @name: its Outgoing* and PeakOutgoingBytes. */
static void outgoing_stats(struct b1c_bus *bus, const char *name, uint32_t *msgsp,
			   uint32_t *bytesp, uint32_t *peakp)
{
	struct b1c_message *m = NULL, *reply = NULL;
	const char *key;
	uint32_t *into;

	*msgsp = *bytesp = *peakp = UINT32_MAX;
	CHECK_OK(b1c_message_new_method_call(&m, "org.freedesktop.DBus", "/org/freedesktop/DBus",
					    "org.freedesktop.DBus.Debug.Stats",
					    "GetConnectionStats", "s"));
	CHECK_OK(b1c_message_append(m, "s", name));
	CHECK(b1c_bus_call(bus, m, 0, &reply) == 0);
	b1c_message_unref(m);
	CHECK_OK(b1c_message_enter(reply, 'a'));
	while (b1c_message_peek(reply, NULL) == '{') {
		CHECK_OK(b1c_message_enter(reply, '{'));
		CHECK_OK(b1c_message_read(reply, "s", &key));
		into = !strcmp(key, "OutgoingMessages") ? msgsp :
		       !strcmp(key, "OutgoingBytes") ? bytesp :
		       !strcmp(key, "PeakOutgoingBytes") ? peakp : NULL;
		if (into) {
			CHECK_OK(b1c_message_enter(reply, 'v'));
			CHECK_OK(b1c_message_read(reply, "u", into));
			CHECK_OK(b1c_message_exit(reply));
		} else {
			CHECK_OK(b1c_message_skip(reply));
		}
		CHECK_OK(b1c_message_exit(reply));
	}
	b1c_message_unref(reply);
}

static void test_quota(void)
{
	struct b1c_bus *bus = open_native();
	pid_t lazy_calls, lazy_signals, reader;
	uint64_t bytes, msgs, quota_msgs, base_msgs, base_bytes;
	char *big = malloc(QUOTA_CALL_SIZE + 1);
	int status, ready[2];
	char c;

	CHECK(big);
	memset(big, 'q', QUOTA_CALL_SIZE);
	big[QUOTA_CALL_SIZE] = 0;
	kernel_usage(&base_bytes, &base_msgs, &quota_msgs);

	/* 1. Calls to a service that never reads: refused once its queue is full. */
	lazy_calls = start_lazy("org.bus1.test.LazyCalls", false);
	for (int i = 0; i < QUOTA_CALLS; i++) {
		struct b1c_message *m = NULL;

		CHECK_OK(b1c_message_new_method_call(&m, "org.bus1.test.LazyCalls", SVC_PATH,
						    SVC_IFACE, "Echo", "s"));
		CHECK_OK(b1c_message_append(m, "s", big));
		CHECK_OK(b1c_bus_call_async(bus, m, on_quota_reply, NULL));
		b1c_message_unref(m);
		/* Let the errors come back as we go (and the broker keep up). */
		while (b1c_bus_process(bus) > 0)
			;
	}
	b1c_message_unref(call_driver(bus, "GetId", NULL));
	while (b1c_bus_process(bus) > 0)
		;
	fprintf(stderr, "quota: %d of %d calls of %d KiB refused\n", quota_refused, QUOTA_CALLS,
		QUOTA_CALL_SIZE / 1024);
	if (quota_refused < QUOTA_CALLS / 8 || quota_other)
		CHECK_FAIL("calls to a non-reading service: %d refused, %d other replies",
		     quota_refused, quota_other);
	/* Refused callers, not a disconnected service (as for socket services). */
	CHECK(name_has_owner(bus, "org.bus1.test.LazyCalls"));
	{
		uint32_t out_msgs, out_bytes, peak;

		/* Its unread bus1 queue is its output queue (GetConnectionStats). */
		outgoing_stats(bus, "org.bus1.test.LazyCalls", &out_msgs, &out_bytes, &peak);
		fprintf(stderr, "quota: GetConnectionStats of the non-reader: %u messages, %u KiB "
			"outgoing, peak %u KiB\n", out_msgs, out_bytes / 1024, peak / 1024);
		if (out_msgs < (uint32_t)(QUOTA_CALLS - quota_refused) / 2 ||
		    out_bytes < out_msgs * (uint32_t)QUOTA_CALL_SIZE / 2 || peak < out_bytes)
			CHECK_FAIL("GetConnectionStats of a native client that does not read: %u messages, "
			     "%u bytes outgoing, peak %u (%d calls queued)", out_msgs, out_bytes, peak,
			     QUOTA_CALLS - quota_refused);
	}
	kernel_usage(&bytes, &msgs, NULL);
	fprintf(stderr, "quota: kernel usage with the call queue full: %llu KiB, %llu messages\n",
		(unsigned long long)(bytes / 1024), (unsigned long long)msgs);
	if (bytes > base_bytes + 40ULL * 1024 * 1024)
		CHECK_FAIL("one non-reading client holds %llu KiB of the uid's quota",
		     (unsigned long long)((bytes - base_bytes) / 1024));

	/* 2. Signals to a subscriber that never reads: it is disconnected. */
	lazy_signals = start_lazy("org.bus1.test.LazySignals", true);
	CHECK(pipe(ready) == 0);
	reader = fork();
	CHECK(reader >= 0);
	if (reader == 0) {
		struct b1c_bus *b = open_native();

		close(ready[0]);
		alarm(80);
		CHECK_OK(b1c_bus_add_match(b, QUOTA_RULE, on_quota_tick, NULL));
		CHECK(write(ready[1], "r", 1) == 1);
		while (quota_seen < QUOTA_SIGNALS)
			native_step(b, 1000000);
		b1c_bus_free(b);
		_exit(0);
	}
	close(ready[1]);
	CHECK(read(ready[0], &c, 1) == 1);
	close(ready[0]);
	for (uint32_t i = 0; i < QUOTA_SIGNALS; i++) {
		CHECK_OK(b1c_bus_emit_signal(bus, SVC_PATH, QUOTA_IFACE, "Tick", "u", i));
		if (i % 100 == 99)
			b1c_message_unref(call_driver(bus, "GetId", NULL));
	}
	CHECK(waitpid(reader, &status, 0) == reader);
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
		CHECK_FAIL("the reading subscriber failed (status %d)", status);
	wait_for_name(bus, "org.bus1.test.LazySignals", false);
	/* What it left unread was taken back, though its peer is still open. */
	kernel_usage(&bytes, &msgs, NULL);
	fprintf(stderr, "quota: kernel usage after the disconnect: %llu KiB, %llu messages "
		"(quota %llu)\n", (unsigned long long)(bytes / 1024), (unsigned long long)msgs,
		(unsigned long long)quota_msgs);
	if (msgs > base_msgs + QUOTA_CALLS + 64)
		CHECK_FAIL("%llu messages still charged after the non-reader was disconnected",
		     (unsigned long long)msgs);

	/* The service that never read goes away: everything is returned. */
	kill(lazy_signals, SIGKILL);
	kill(lazy_calls, SIGKILL);
	CHECK(waitpid(lazy_signals, &status, 0) == lazy_signals);
	CHECK(waitpid(lazy_calls, &status, 0) == lazy_calls);
	wait_for_name(bus, "org.bus1.test.LazyCalls", false);
	kernel_usage(&bytes, &msgs, NULL);
	if (msgs > base_msgs + 16)
		CHECK_FAIL("%llu messages still charged at the end", (unsigned long long)msgs);
	free(big);
	b1c_bus_free(bus);
}

/* ------------------------------------------------- the kernel side of it */

/*
 * HANDLE_QUERY, plain and with RECLAIM, on raw peers (what the broker
 * uses for the limits above): a sender sees what is unread at a node, and
 * takes back its own unread messages (only its own, only to that node).
 */
static void test_kernel_reclaim(void)
{
	struct b1_peer *a = NULL, *b = NULL, *r = NULL;
	struct bus1_cmd_handle_query q;
	uint64_t node = BUS1_HANDLE_CREATE, a_to_r = 0, b_to_r = 0, node2 = BUS1_HANDLE_CREATE;
	uint64_t a_to_r2 = 0, bytes0, msgs0, bytes, msgs;
	char data[100] = "reclaim";
	struct iovec iov = { data, sizeof(data) };
	struct b1_msg m;

	CHECK_OK(b1_peer_new(&a));
	CHECK_OK(b1_peer_new(&b));
	CHECK_OK(b1_peer_new(&r));
	kernel_usage(&bytes0, &msgs0, NULL);
	/* r owns two nodes; a holds handles to both, b to the first. */
	CHECK_OK(b1_peer_handle_transfer(r, a, &node, &a_to_r));
	CHECK_OK(b1_peer_handle_transfer(r, b, &node, &b_to_r));
	CHECK_OK(b1_peer_handle_transfer(r, a, &node2, &a_to_r2));

	for (int i = 0; i < 5; i++)
		CHECK_OK(b1_peer_send(a, 0, &a_to_r, 1, NULL, &iov, 1, NULL, 0, NULL, 0));
	CHECK_OK(b1_peer_send(a, 0, &a_to_r2, 1, NULL, &iov, 1, NULL, 0, NULL, 0));
	CHECK_OK(b1_peer_send(b, 0, &b_to_r, 1, NULL, &iov, 1, NULL, 0, NULL, 0));

	CHECK_OK(b1_peer_handle_query(a, a_to_r, &q));
	CHECK(q.n_messages == 6 && q.n_bytes >= 6 * sizeof(data) && !q.n_fds && !q.n_handles);
	CHECK_OK(b1_peer_handle_query(a, a_to_r2, &q));
	CHECK(q.n_messages == 1);
	kernel_usage(&bytes, &msgs, NULL);
	CHECK(msgs == msgs0 + 7);

	/* r reads one of a's: 5 left at the first node. */
	CHECK_OK(b1_peer_recv(r, 0, &m));
	CHECK(m.type == BUS1_MSG_DATA && m.destination == node);
	CHECK_OK(b1_peer_msg_release(r, &m));
	CHECK_OK(b1_peer_handle_query(b, b_to_r, &q));
	CHECK(q.n_messages == 5);

	/* a takes back its 4 unread ones there; b's and the other node's stay. */
	CHECK_OK(b1_peer_handle_reclaim(a, a_to_r));
	CHECK_OK(b1_peer_handle_query(b, b_to_r, &q));
	CHECK(q.n_messages == 1);
	CHECK_OK(b1_peer_handle_query(a, a_to_r, &q));		/* the handle stays */
	CHECK(q.n_messages == 1);
	CHECK_OK(b1_peer_handle_release(a, a_to_r));
	CHECK(b1_peer_handle_query(a, a_to_r, &q) == -ENXIO);
	CHECK_OK(b1_peer_handle_query(a, a_to_r2, &q));
	CHECK(q.n_messages == 1);
	kernel_usage(&bytes, &msgs, NULL);
	CHECK(msgs == msgs0 + 2);

	/* What r receives now, in send order: a's to the second node, then b's. */
	CHECK_OK(b1_peer_recv(r, 0, &m));
	CHECK(m.type == BUS1_MSG_DATA && m.destination == node2);
	CHECK_OK(b1_peer_msg_release(r, &m));
	CHECK_OK(b1_peer_recv(r, 0, &m));
	CHECK(m.type == BUS1_MSG_DATA && m.destination == node);
	CHECK_OK(b1_peer_msg_release(r, &m));
	CHECK(b1_peer_recv(r, 0, &m) == -EAGAIN);
	CHECK_OK(b1_peer_handle_query(b, b_to_r, &q));
	CHECK(q.n_messages == 0 && q.n_bytes == 0);

	/* Bad input. */
	CHECK(b1_peer_handle_query(a, 0x12345678, &q) == -ENXIO);
	{
		struct bus1_cmd_handle_query bad = { .flags = 2, .handle = a_to_r2 };
		struct bus1_cmd_handle_release rel = { .flags = 1, .handle = a_to_r2 };

		CHECK(ioctl(b1_peer_get_fd(a), BUS1_CMD_HANDLE_QUERY, &bad) < 0 &&
		      errno == EINVAL);
		CHECK(ioctl(b1_peer_get_fd(a), BUS1_CMD_HANDLE_RELEASE, &rel) < 0 &&
		      errno == EINVAL);
	}
	b1_peer_free(a);
	b1_peer_free(b);
	b1_peer_free(r);
	kernel_usage(&bytes, &msgs, NULL);
	CHECK(msgs == msgs0 && bytes == bytes0);
}

/* ------------------------------------------------------------ direct path */

/*
 * Direct calls (docs/native-protocol.md): the caller gets the owner's direct
 * handle from the broker once, then calls and replies cross the kernel once.
 * The callee checks the kernel-stamped uid against what the broker published
 * to it; a name that moves on, or a callee that dies, invalidates the handle.
 */
static void test_direct(void)
{
	struct b1c_bus *bus = open_native();
	char out[256], svc1_name[64], svc2_name[64];
	pid_t svc = start_native_service(), svc2, child;
	int status;

	wait_for_name(bus, SVC_NAME, true);
	CHECK_OK(b1c_bus_set_direct(bus, true));

	/* Calls, errors and replies straight between the two clients. */
	CHECK(call_echo(bus, SVC_NAME, "How", NULL, out, sizeof(out)) == 0);
	if (strcmp(out, "direct"))
		CHECK_FAIL("call by name went %s", out);
	CHECK(call_echo(bus, SVC_NAME, "Echo", "straight", out, sizeof(out)) == 0);
	CHECK(!strcmp(out, "straight"));
	CHECK(call_echo(bus, SVC_NAME, "Sender", NULL, out, sizeof(out)) == 0);
	CHECK(!strcmp(out, b1c_bus_get_unique_name(bus)));
	CHECK(call_echo(bus, SVC_NAME, "Fail", NULL, out, sizeof(out)) == B1C_CALL_ERROR);
	CHECK(!strcmp(out, "org.bus1.test.Error.Failed: failed on purpose"));
	CHECK(call_echo(bus, SVC_NAME, "NoSuchMethod", NULL, out, sizeof(out)) == B1C_CALL_ERROR);
	CHECK(!strncmp(out, "org.freedesktop.DBus.Error.UnknownMethod", 40));
	CHECK(call_echo(bus, SVC_NAME, "Whoami", NULL, svc1_name, sizeof(svc1_name)) == 0);
	/* By unique name too. */
	CHECK(call_echo(bus, svc1_name, "How", NULL, out, sizeof(out)) == 0);
	CHECK(!strcmp(out, "direct"));

	/*
	 * Policy on the direct path: a process of another uid that got hold of
	 * the handle (here: it inherits our peer) is refused by the callee, which
	 * the broker told which uids may call it.
	 */
	child = fork();
	CHECK(child >= 0);
	if (child == 0) {
		CHECK(setgid(65534) == 0 && setuid(65534) == 0);
		CHECK(call_echo(bus, SVC_NAME, "Echo", "sneaky", out, sizeof(out)) ==
		      B1C_CALL_ERROR);
		if (strncmp(out, "org.freedesktop.DBus.Error.AccessDenied", 39))
			CHECK_FAIL("a direct call from uid 65534: %s", out);
		_exit(0);
	}
	CHECK(waitpid(child, &status, 0) == child);
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
		CHECK_FAIL("direct policy child failed (status %d)", status);
	CHECK(call_echo(bus, SVC_NAME, "How", NULL, out, sizeof(out)) == 0);
	CHECK(!strcmp(out, "direct"));

	/* The name moves to another owner: the next call reaches the new one. */
	CHECK(call_echo(bus, SVC_NAME, "Release", NULL, out, sizeof(out)) == 0);
	svc2 = start_native_service();
	wait_for_name(bus, SVC_NAME, true);
	CHECK(call_echo(bus, SVC_NAME, "Whoami", NULL, svc2_name, sizeof(svc2_name)) == 0);
	if (!strcmp(svc1_name, svc2_name))
		CHECK_FAIL("the call by name still reached the old owner %s", svc1_name);
	CHECK(call_echo(bus, SVC_NAME, "How", NULL, out, sizeof(out)) == 0);
	CHECK(!strcmp(out, "direct"));

	/* The callee dies mid-call: NoReply; then the name is gone. */
	CHECK(call_echo(bus, SVC_NAME, "Die", NULL, out, sizeof(out)) == B1C_CALL_ERROR);
	if (strncmp(out, "org.freedesktop.DBus.Error.NoReply", 34))
		CHECK_FAIL("direct call to a dying callee: %s", out);
	CHECK(waitpid(svc2, &status, 0) == svc2);
	wait_for_name(bus, SVC_NAME, false);
	CHECK(call_echo(bus, SVC_NAME, "Echo", "x", out, sizeof(out)) == B1C_CALL_ERROR);
	CHECK(!strncmp(out, "org.freedesktop.DBus.Error.ServiceUnknown", 41));

	/* Socket owners have no direct node: the broker carries the call. */
	{
		pid_t ssvc = start_socket_service();

		wait_for_name(bus, SOCK_NAME, true);
		CHECK(call_echo(bus, SOCK_NAME, "Echo", "via the broker", out, sizeof(out)) == 0);
		CHECK(!strcmp(out, "via the broker"));
		stop_service(bus, SOCK_NAME, ssvc);
	}
	/*
	 * Quit goes direct too. The service holds its reply for the CALL of its
	 * next b1c_bus_wait(), but leaves its loop instead: b1c_bus_free() must
	 * send it (else: NoReply).
	 */
	CHECK(call_echo(bus, svc1_name, "How", NULL, out, sizeof(out)) == 0);
	CHECK(!strcmp(out, "direct"));
	stop_service(bus, svc1_name, svc);
	b1c_bus_free(bus);
}

/* ------------------------------------------- the direct path and the policy */

#define POL_DENIED "org.bus1.test.Denied"
#define POL_MEMBER "org.bus1.test.Member"
#define POL_OPEN "org.bus1.test.Open"

/*
 * A config for a broker of our own: a session bus that allows everything,
 * then @rules (more <policy> elements, applied after the default one).
 */
static void write_config(const char *path, const char *rules)
{
	char tmp[256];
	FILE *f;

	snprintf(tmp, sizeof(tmp), "%s.new", path);
	f = fopen(tmp, "w");
	CHECK(f);
	fprintf(f, "<busconfig>\n  <type>session</type>\n"
		"  <policy context=\"default\"><allow send_destination=\"*\" eavesdrop=\"true\"/>"
		"<allow eavesdrop=\"true\"/><allow own=\"*\"/></policy>\n  %s\n</busconfig>\n",
		rules);
	CHECK(fclose(f) == 0);
	CHECK(rename(tmp, path) == 0);
}

/*
 * Start $BUS_BINARY (run-with-bus.sh exports it) with @config on a socket in
 * tmpdir, and point $DBUS_SESSION_BUS_ADDRESS of this case (and of the
 * services it forks) there.
 */
static pid_t start_broker_args(const char *config, const char *extra)
{
	const char *bin = getenv("BUS_BINARY");
	char sock[128], cfg[300], addr[200];
	pid_t pid;

	CHECK(bin);
	snprintf(sock, sizeof(sock), "%s/policy-%d.sock", tmpdir, (int)getpid());
	snprintf(cfg, sizeof(cfg), "--config-file=%s", config);
	snprintf(addr, sizeof(addr), "unix:path=%s", sock);
	unlink(sock);
	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		char a[220];

		snprintf(a, sizeof(a), "--address=%s", addr);
		execl(bin, bin, cfg, "--nofork", a, extra, (char *)NULL);
		_exit(127);
	}
	/* Up when it accepts connections (the socket file exists before listen()). */
	for (int i = 0;; i++) {
		struct sockaddr_un sa = { .sun_family = AF_UNIX };
		int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		int ok;

		CHECK(fd >= 0);
		CHECK(strlen(sock) < sizeof(sa.sun_path));
		memcpy(sa.sun_path, sock, strlen(sock) + 1);
		ok = connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0;
		close(fd);
		if (ok)
			break;
		if (i > 500 || waitpid(pid, NULL, WNOHANG) == pid)
			CHECK_FAIL("the broker with %s did not start", config);
		usleep(10000);
	}
	CHECK(setenv("DBUS_SESSION_BUS_ADDRESS", addr, 1) == 0);
	return pid;
}

static pid_t start_broker(const char *config)
{
	return start_broker_args(config, NULL);
}

static void stop_broker(pid_t pid)
{
	int status;

	CHECK(kill(pid, SIGTERM) == 0);
	CHECK(waitpid(pid, &status, 0) == pid);
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
		CHECK_FAIL("the policy broker exited with status %d", status);
}

/* GetDirectHandle(@name) by hand: 0 (a handle) or the error name in @out. */
static int get_direct_handle(struct b1c_bus *bus, const char *name, char *out, size_t n_out)
{
	struct b1c_message *m = NULL, *reply = NULL;
	int r;

	CHECK_OK(b1c_message_new_method_call(&m, "org.freedesktop.DBus", "/org/freedesktop/DBus",
					    DC_INTERFACE_BUS1, DC_BUS1_METHOD_GET_DIRECT_HANDLE,
					    DC_BUS1_GET_DIRECT_HANDLE_SIGNATURE));
	CHECK_OK(b1c_message_append(m, "s", name));
	r = b1c_bus_call(bus, m, 0, &reply);
	CHECK_OK(r);
	snprintf(out, n_out, "%s", r == B1C_CALL_ERROR ? b1c_message_get_error_name(reply) : "");
	b1c_message_unref(m);
	b1c_message_unref(reply);
	return r;
}

#define ACCESS_DENIED "org.freedesktop.DBus.Error.AccessDenied"

/*
 * GetDirectHandle under a policy: refused with AccessDenied where the
 * brokered path says AccessDenied too; refused with NotSupported where a
 * rule names a member (the callee could not apply it), so the library takes
 * the broker, which applies the rule; granted where nothing stands in the way.
 */
static void test_direct_policy(void)
{
	char config[128], out[256];
	pid_t broker, s_denied, s_member, s_open;
	struct b1c_bus *bus;

	snprintf(config, sizeof(config), "%s/policy-%d.conf", tmpdir, (int)getpid());
	/* Deny for our uid (root; the broker runs as root too) only. */
	write_config(config,
		     "<policy user=\"root\"><deny send_destination=\"" POL_DENIED "\"/></policy>\n"
		     "  <policy context=\"default\"><deny send_destination=\"" POL_MEMBER "\" "
		     "send_interface=\"" SVC_IFACE "\" send_member=\"Secret\"/></policy>");
	broker = start_broker(config);
	bus = open_native();
	s_denied = start_named_service(POL_DENIED);
	s_member = start_named_service(POL_MEMBER);
	s_open = start_named_service(POL_OPEN);
	wait_for_name(bus, POL_DENIED, true);
	wait_for_name(bus, POL_MEMBER, true);
	wait_for_name(bus, POL_OPEN, true);

	/* 1. Denied: the broker refuses the handle and the brokered call alike. */
	CHECK(get_direct_handle(bus, POL_DENIED, out, sizeof(out)) == B1C_CALL_ERROR);
	if (strcmp(out, ACCESS_DENIED))
		CHECK_FAIL("GetDirectHandle(%s): %s", POL_DENIED, out);
	CHECK(call_echo(bus, POL_DENIED, "Echo", "x", out, sizeof(out)) == B1C_CALL_ERROR);
	if (strncmp(out, ACCESS_DENIED, strlen(ACCESS_DENIED)))
		CHECK_FAIL("brokered call to %s: %s", POL_DENIED, out);
	CHECK_OK(b1c_bus_set_direct(bus, true));
	CHECK(call_echo(bus, POL_DENIED, "Echo", "x", out, sizeof(out)) == B1C_CALL_ERROR);
	if (strncmp(out, ACCESS_DENIED, strlen(ACCESS_DENIED)))
		CHECK_FAIL("direct-enabled call to %s: %s", POL_DENIED, out);

	/* 2. A rule on one member: no handle; the member is denied, the others work. */
	CHECK(get_direct_handle(bus, POL_MEMBER, out, sizeof(out)) == B1C_CALL_ERROR);
	if (strcmp(out, "org.freedesktop.DBus.Error.NotSupported"))
		CHECK_FAIL("GetDirectHandle(%s): %s", POL_MEMBER, out);
	CHECK(call_echo(bus, POL_MEMBER, "Secret", NULL, out, sizeof(out)) == B1C_CALL_ERROR);
	if (strncmp(out, ACCESS_DENIED, strlen(ACCESS_DENIED)))
		CHECK_FAIL("call to the denied member: %s", out);
	CHECK(call_echo(bus, POL_MEMBER, "Echo", "allowed", out, sizeof(out)) == 0);
	CHECK(!strcmp(out, "allowed"));
	CHECK(call_echo(bus, POL_MEMBER, "How", NULL, out, sizeof(out)) == 0);
	if (strcmp(out, "brokered"))
		CHECK_FAIL("a call to %s (member rule) went %s", POL_MEMBER, out);

	/* 3. Nothing in the way: direct, and Secret is answered there. */
	CHECK(get_direct_handle(bus, POL_OPEN, out, sizeof(out)) == 0);
	CHECK(call_echo(bus, POL_OPEN, "How", NULL, out, sizeof(out)) == 0);
	if (strcmp(out, "direct"))
		CHECK_FAIL("a call to %s went %s", POL_OPEN, out);
	CHECK(call_echo(bus, POL_OPEN, "Secret", NULL, out, sizeof(out)) == 0);
	CHECK(!strcmp(out, "the secret"));

	kill(s_denied, SIGKILL);
	kill(s_member, SIGKILL);
	kill(s_open, SIGKILL);
	waitpid(s_denied, NULL, 0);
	waitpid(s_member, NULL, 0);
	waitpid(s_open, NULL, 0);
	b1c_bus_free(bus);
	stop_broker(broker);
}

/* ------------------------------------------------ a container's filter */

#define CT_TALK "org.bus1.test.Talk"
#define CT_CALL "org.bus1.test.CallOnly"
#define CT_HIDDEN "org.bus1.test.Hidden"

/*
 * AddServer on @mgr with a Filter: the instance's path and address
 * (malloc'ed).
 */
static void add_filtered_server(sd_bus *mgr, char **pathp, char **addressp)
{
	sd_bus_message *m = NULL, *reply = NULL;
	sd_bus_error err = SD_BUS_ERROR_NULL;
	const char *path, *address;
	const void *sock;
	size_t n_sock;

	CHECK_OK(sd_bus_message_new_method_call(mgr, &m, "org.freedesktop.DBus",
						"/org/freedesktop/DBus",
						"org.freedesktop.DBus.Containers1", "AddServer"));
	CHECK_OK(sd_bus_message_append(m, "ss", "org.example.Sandbox", "org.example.NativeApp"));
	CHECK_OK(sd_bus_message_append(m, "a{sv}", 1, "app-id", "s", "org.example.NativeApp"));
	CHECK_OK(sd_bus_message_append(m, "a{sv}", 1, "Filter", "as", 2, "--talk=" CT_TALK,
				       "--call=" CT_CALL "=" SVC_IFACE ".Echo"));
	if (sd_bus_call(mgr, m, 0, &err, &reply) < 0)
		CHECK_FAIL("AddServer: %s: %s", err.name, err.message);
	CHECK_OK(sd_bus_message_read(reply, "o", &path));
	CHECK_OK(sd_bus_message_read_array(reply, 'y', &sock, &n_sock));
	CHECK_OK(sd_bus_message_read(reply, "s", &address));
	*pathp = strdup(path);
	*addressp = strdup(address);
	CHECK(*pathp && *addressp);
	sd_bus_message_unref(m);
	sd_bus_message_unref(reply);
}

/*
 * A native client in a container whose filter talks to one service, may
 * call one method of another, and hides a third: the same verdicts as for
 * socket clients (test_container_filter.py), its identity from the bus, and
 * the direct path only where the filter passes every call.
 */
static void test_container(void)
{
	char config[128], out[256], *path = NULL, *address = NULL;
	sd_bus_message *reply = NULL;
	sd_bus_error err = SD_BUS_ERROR_NULL;
	pid_t broker, s_talk, s_call, s_hidden;
	struct b1c_bus *outside, *inside;
	const char *got_path = NULL;
	sd_bus *mgr = NULL;

	snprintf(config, sizeof(config), "%s/container-%d.conf", tmpdir, (int)getpid());
	write_config(config, "");
	broker = start_broker_args(config, "--containers");
	outside = open_native();
	s_talk = start_named_service(CT_TALK);
	s_call = start_named_service(CT_CALL);
	s_hidden = start_named_service(CT_HIDDEN);
	wait_for_name(outside, CT_TALK, true);
	wait_for_name(outside, CT_CALL, true);
	wait_for_name(outside, CT_HIDDEN, true);

	CHECK_OK(sd_bus_open_user(&mgr));
	add_filtered_server(mgr, &path, &address);
	CHECK(setenv("DBUS_SESSION_BUS_ADDRESS", address, 1) == 0);
	inside = open_native();

	/* The bus says which instance the native client is in. */
	if (sd_bus_call_method(mgr, "org.freedesktop.DBus", "/org/freedesktop/DBus",
			       "org.freedesktop.DBus.Containers1", "GetConnectionInstance", &err,
			       &reply, "s", b1c_bus_get_unique_name(inside)) < 0)
		CHECK_FAIL("GetConnectionInstance: %s: %s", err.name, err.message);
	CHECK_OK(sd_bus_message_read(reply, "o", &got_path));
	if (strcmp(got_path, path))
		CHECK_FAIL("GetConnectionInstance of the native client: %s, not %s", got_path,
			   path);
	sd_bus_message_unref(reply);

	/* Through the broker: the filter's verdicts. */
	CHECK(call_echo(inside, CT_TALK, "Secret", NULL, out, sizeof(out)) == 0);
	CHECK(!strcmp(out, "the secret"));
	CHECK(call_echo(inside, CT_CALL, "Echo", "allowed", out, sizeof(out)) == 0);
	CHECK(!strcmp(out, "allowed"));
	CHECK(call_echo(inside, CT_CALL, "Secret", NULL, out, sizeof(out)) == B1C_CALL_ERROR);
	if (strncmp(out, ACCESS_DENIED, strlen(ACCESS_DENIED)))
		CHECK_FAIL("a call the --call rule does not allow: %s", out);
	CHECK(call_echo(inside, CT_HIDDEN, "Secret", NULL, out, sizeof(out)) == B1C_CALL_ERROR);
	if (strncmp(out, "org.freedesktop.DBus.Error.ServiceUnknown", 41))
		CHECK_FAIL("a call to a hidden name: %s", out);
	CHECK(!name_has_owner(inside, CT_HIDDEN));
	CHECK(name_has_owner(inside, CT_CALL));

	/* The direct path: where --talk passes every call, not where a rule decides. */
	CHECK(get_direct_handle(inside, CT_TALK, out, sizeof(out)) == 0);
	CHECK(get_direct_handle(inside, CT_CALL, out, sizeof(out)) == B1C_CALL_ERROR);
	if (strcmp(out, "org.freedesktop.DBus.Error.NotSupported"))
		CHECK_FAIL("GetDirectHandle(%s): %s", CT_CALL, out);
	CHECK(get_direct_handle(inside, CT_HIDDEN, out, sizeof(out)) == B1C_CALL_ERROR);
	if (strcmp(out, "org.freedesktop.DBus.Error.ServiceUnknown"))
		CHECK_FAIL("GetDirectHandle(%s): %s", CT_HIDDEN, out);
	CHECK_OK(b1c_bus_set_direct(inside, true));
	CHECK(call_echo(inside, CT_TALK, "How", NULL, out, sizeof(out)) == 0);
	if (strcmp(out, "direct"))
		CHECK_FAIL("a call to %s (--talk) went %s", CT_TALK, out);
	CHECK(call_echo(inside, CT_CALL, "Echo", "brokered", out, sizeof(out)) == 0);
	CHECK(!strcmp(out, "brokered"));
	CHECK(call_echo(inside, CT_CALL, "How", NULL, out, sizeof(out)) == B1C_CALL_ERROR);
	if (strncmp(out, ACCESS_DENIED, strlen(ACCESS_DENIED)))
		CHECK_FAIL("with the direct path on, a call no rule allows: %s", out);
	CHECK(call_echo(inside, CT_HIDDEN, "Secret", NULL, out, sizeof(out)) == B1C_CALL_ERROR);
	if (strncmp(out, "org.freedesktop.DBus.Error.ServiceUnknown", 41))
		CHECK_FAIL("with the direct path on, a call to a hidden name: %s", out);

	b1c_bus_free(inside);
	kill(s_talk, SIGKILL);
	kill(s_call, SIGKILL);
	kill(s_hidden, SIGKILL);
	waitpid(s_talk, NULL, 0);
	waitpid(s_call, NULL, 0);
	waitpid(s_hidden, NULL, 0);
	b1c_bus_free(outside);
	sd_bus_flush_close_unref(mgr);
	free(path);
	free(address);
	stop_broker(broker);
}

static int async_n;
static char async_out[256];

static int on_async_text(struct b1c_bus *bus, struct b1c_message *m, void *userdata)
{
	const char *s = NULL;

	if (b1c_message_get_type(m) == B1C_MESSAGE_ERROR)
		snprintf(async_out, sizeof(async_out), "%s", b1c_message_get_error_name(m));
	else if (b1c_message_read(m, "s", &s) == 0)
		snprintf(async_out, sizeof(async_out), "%s", s);
	else
		snprintf(async_out, sizeof(async_out), "(no text)");
	async_n++;
	return 1;
}

/* b1c_bus_call_async() of SVC_IFACE.@member; waits for the handler; the reply text. */
static const char *call_async_wait(struct b1c_bus *bus, const char *dest, const char *member)
{
	struct b1c_message *m = NULL;
	int n = async_n;

	CHECK_OK(b1c_message_new_method_call(&m, dest, SVC_PATH, SVC_IFACE, member, ""));
	CHECK_OK(b1c_bus_call_async(bus, m, on_async_text, NULL));
	b1c_message_unref(m);
	for (int i = 0; async_n == n; i++) {
		native_step(bus, 100000);
		if (i > 100000)
			CHECK_FAIL("no async reply to %s", member);
	}
	CHECK(async_n == n + 1);
	return async_out;
}

/*
 * The policy is reloaded while direct handles are out: the callees are told
 * to refuse them (DirectRevoked), the callers' libraries ask the broker again
 * and get its new verdict; sync and async calls alike. And async calls, like
 * sync ones, follow a name to its new owner.
 */
static void test_direct_reload(void)
{
	char config[128], out[256], svc1_name[64], svc2_name[64];
	pid_t broker, svc, svc2, other;
	struct b1c_bus *bus;
	const char *s;

	snprintf(config, sizeof(config), "%s/reload-%d.conf", tmpdir, (int)getpid());
	write_config(config, "");
	broker = start_broker(config);
	bus = open_native();
	svc = start_native_service();
	other = start_named_service(POL_OPEN);
	wait_for_name(bus, SVC_NAME, true);
	wait_for_name(bus, POL_OPEN, true);
	CHECK_OK(b1c_bus_set_direct(bus, true));

	/* 4. Async after ServiceUnknown from the old owner: resent to the new one. */
	CHECK(call_echo(bus, SVC_NAME, "Whoami", NULL, svc1_name, sizeof(svc1_name)) == 0);
	CHECK(call_echo(bus, SVC_NAME, "How", NULL, out, sizeof(out)) == 0);
	CHECK(!strcmp(out, "direct"));
	CHECK(call_echo(bus, SVC_NAME, "Release", NULL, out, sizeof(out)) == 0);
	svc2 = start_native_service();
	wait_for_name(bus, SVC_NAME, true);
	s = call_async_wait(bus, SVC_NAME, "Whoami");
	snprintf(svc2_name, sizeof(svc2_name), "%s", s);
	if (!strcmp(svc2_name, svc1_name) || svc2_name[0] != ':')
		CHECK_FAIL("async call after the name moved: %s (old owner %s)", svc2_name, svc1_name);
	CHECK(!strcmp(call_async_wait(bus, SVC_NAME, "How"), "direct"));
	kill(svc, SIGKILL);
	waitpid(svc, NULL, 0);
	CHECK(!strcmp(call_async_wait(bus, POL_OPEN, "How"), "direct"));

	/* 3. Reload to a config denying SVC_NAME: the next direct calls are refused. */
	write_config(config, "<policy context=\"default\"><deny send_destination=\"" SVC_NAME
		     "\"/></policy>");
	b1c_message_unref(call_driver(bus, "ReloadConfig", NULL));
	CHECK(call_echo(bus, SVC_NAME, "Echo", "x", out, sizeof(out)) == B1C_CALL_ERROR);
	if (strncmp(out, ACCESS_DENIED, strlen(ACCESS_DENIED)))
		CHECK_FAIL("a direct call after the reload to a denying config: %s", out);
	CHECK(call_echo(bus, SVC_NAME, "Echo", "x", out, sizeof(out)) == B1C_CALL_ERROR);
	CHECK(!strncmp(out, ACCESS_DENIED, strlen(ACCESS_DENIED)));
	/* Revoked as well, and still allowed: asked again, direct again (async). */
	CHECK(!strcmp(call_async_wait(bus, POL_OPEN, "How"), "direct"));

	/* A member rule arrives by reload: the callee's handle goes, the broker decides. */
	write_config(config, "<policy context=\"default\"><deny send_destination=\"" POL_OPEN
		     "\" send_interface=\"" SVC_IFACE "\" send_member=\"Secret\"/></policy>");
	b1c_message_unref(call_driver(bus, "ReloadConfig", NULL));
	s = call_async_wait(bus, POL_OPEN, "Secret");
	if (strcmp(s, ACCESS_DENIED))
		CHECK_FAIL("async call of a member denied by reload: %s", s);
	CHECK(call_echo(bus, POL_OPEN, "How", NULL, out, sizeof(out)) == 0);
	if (strcmp(out, "brokered"))
		CHECK_FAIL("a call to %s after a member rule was loaded went %s", POL_OPEN, out);

	kill(svc2, SIGKILL);
	kill(other, SIGKILL);
	waitpid(svc2, NULL, 0);
	waitpid(other, NULL, 0);
	b1c_bus_free(bus);
	stop_broker(broker);
}

/* ------------------------------------------------------- a bad bootstrap */

/* Send @msg on @sock with @fd attached (or none if @fd < 0). */
static void raw_send(int sock, struct message *msg, int fd)
{
	union {
		struct cmsghdr h;
		char buf[CMSG_SPACE(sizeof(int))];
	} control = {};
	struct iovec iov[2];
	struct msghdr mh = { .msg_iov = iov };

	message_get_iovec(msg, iov);
	mh.msg_iovlen = iov[1].iov_len ? 2 : 1;
	if (fd >= 0) {
		struct cmsghdr *c;

		mh.msg_control = &control;
		mh.msg_controllen = sizeof(control.buf);
		c = CMSG_FIRSTHDR(&mh);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(c), &fd, sizeof(int));
	}
	CHECK(sendmsg(sock, &mh, 0) == (ssize_t)(iov[0].iov_len + iov[1].iov_len));
}

static struct message *raw_recv(int sock)
{
	uint8_t buf[4096];
	size_t size;
	struct message *m = NULL;

	CHECK(read(sock, buf, 16) == 16);
	CHECK(message_frame_size(buf, 16, &size) == 0 && size <= sizeof(buf));
	for (size_t n = 16; n < size;) {
		ssize_t k = read(sock, buf + n, size - n);

		CHECK(k > 0);
		n += (size_t)k;
	}
	CHECK(message_new_from_data(&m, buf, size, NULL, 0) == 0);
	return m;
}

static struct message *raw_call(uint32_t serial, const char *iface, const char *member,
				const char *sig, bool with_fd)
{
	struct message_builder b;
	struct message *m = NULL, *with = NULL;

	message_builder_init_method_call(&b, "org.freedesktop.DBus", "/org/freedesktop/DBus",
					 iface, member, sig);
	if (*sig)
		dc_writer_write(&b.body, "h", 0U);
	CHECK(message_builder_seal(&b, serial, &m) == 0);
	message_builder_deinit(&b);
	if (!with_fd)
		return m;
	m->unix_fds = 1;
	CHECK(message_stitch_sender(m, NULL, &with) == 0);
	m->unix_fds = 0;
	message_unref(m);
	return with;
}

/*
 * Connect with a pipe instead of /dev/bus1: InvalidArgs, and the connection
 * stays a usable socket connection (Hello works). A second Connect after
 * Hello is not the bootstrap any more (an unknown driver interface).
 */
/*
 * The bus re-executes itself (SIGUSR2) while native clients are connected:
 * they see nothing. Calls sent while the old program writes its state are
 * answered by the new one, an async call in flight gets its reply, names
 * and unique names stay, fds still pass, and the bus logs one "resumed" line
 * per re-exec.
 */
static int count_resumed(void)
{
	const char *dir = getenv("BUS_DIR");
	char path[512], line[512];
	FILE *f;
	int n = 0;

	CHECK(dir);
	snprintf(path, sizeof(path), "%s/bus.log", dir);
	f = fopen(path, "re");
	CHECK(f);
	while (fgets(line, sizeof(line), f))
		if (strstr(line, "re-exec: resumed"))
			n++;
	fclose(f);
	return n;
}

static void test_reexec(void)
{
	const char *bus_pid = getenv("BUS_PID");
	struct b1c_bus *bus = open_native();
	char out[256], owner[256], unique[256];
	struct b1c_message *m = NULL;
	pid_t svc = start_native_service();
	int before;

	CHECK(bus_pid);
	wait_for_name(bus, SVC_NAME, true);
	snprintf(unique, sizeof(unique), "%s", b1c_bus_get_unique_name(bus));
	CHECK(call_echo(bus, SVC_NAME, "Sender", NULL, owner, sizeof(owner)) == 0);
	before = count_resumed();

	for (int round = 0; round < 5; round++) {
		async_done = 0;
		/* One call in flight across the switch. */
		CHECK_OK(b1c_message_new_method_call(&m, SVC_NAME, SVC_PATH, SVC_IFACE, "Add",
						    "ii"));
		CHECK_OK(b1c_message_append(m, "ii", 40, 2));
		CHECK_OK(b1c_bus_call_async(bus, m, on_async_reply, NULL));
		b1c_message_unref(m);
		CHECK(kill(atoi(bus_pid), SIGUSR2) == 0);
		CHECK(call_echo(bus, SVC_NAME, "Echo", "after", out, sizeof(out)) == 0);
		CHECK(!strcmp(out, "after"));
		for (int i = 0; i < 500 && !async_done; i++)
			native_step(bus, 10000);
		CHECK(async_done == 1);
		for (int i = 0; i < 500 && count_resumed() < before + round + 1; i++)
			usleep(10000);
		CHECK(count_resumed() == before + round + 1);
		/* The same names, the same owner. */
		CHECK(!strcmp(b1c_bus_get_unique_name(bus), unique));
		CHECK(call_echo(bus, SVC_NAME, "Sender", NULL, out, sizeof(out)) == 0);
		CHECK(!strcmp(out, owner));
	}
	stop_service(bus, SVC_NAME, svc);
	b1c_bus_free(bus);
}


static void test_bad_bootstrap(void)
{
	struct address_list list = {};
	struct message *m;
	int sock = -1, pipefd[2];
	bool fds = false;

	CHECK(address_list_parse(&list, getenv("DBUS_SESSION_BUS_ADDRESS"), NULL) == 0);
	CHECK(address_connect(&list.entries[0], &sock) == 0);
	address_list_deinit(&list);
	CHECK(sasl_client_authenticate(sock, getuid(), true, &fds) == 0);
	CHECK(fds);

	CHECK(pipe(pipefd) == 0);
	m = raw_call(1, DC_INTERFACE_BUS1, DC_BUS1_METHOD_CONNECT, DC_BUS1_CONNECT_SIGNATURE, true);
	raw_send(sock, m, pipefd[0]);
	message_unref(m);
	m = raw_recv(sock);
	CHECK(m->type == DC_MESSAGE_ERROR && m->reply_serial == 1);
	if (strcmp(m->error_name, "org.freedesktop.DBus.Error.InvalidArgs"))
		CHECK_FAIL("Connect(pipe): %s", m->error_name);
	message_unref(m);

	m = raw_call(2, "org.freedesktop.DBus", "Hello", "", false);
	raw_send(sock, m, -1);
	message_unref(m);
	m = raw_recv(sock);
	CHECK(m->type == DC_MESSAGE_METHOD_RETURN && m->reply_serial == 2);
	message_unref(m);

	m = raw_call(3, DC_INTERFACE_BUS1, DC_BUS1_METHOD_CONNECT, DC_BUS1_CONNECT_SIGNATURE, true);
	raw_send(sock, m, pipefd[0]);
	message_unref(m);
	for (;;) {
		m = raw_recv(sock);
		if (m->reply_serial == 3)
			break;
		message_unref(m);	/* NameAcquired */
	}
	CHECK(m->type == DC_MESSAGE_ERROR);
	message_unref(m);
	close(pipefd[0]);
	close(pipefd[1]);
	close(sock);
}

static const struct {
	const char *name;
	void (*fn)(void);
} cases[] = {
	{ "bad-bootstrap", test_bad_bootstrap },
	{ "unique-name", test_unique_name },
	{ "process-fd", test_process_fd },
	{ "native-call", test_native_call },
	{ "native-dies", test_native_dies },
	{ "libdbus-to-native", test_libdbus_to_native },
	{ "tools-to-native", test_tools_to_native },
	{ "native-to-socket", test_native_to_socket },
	{ "monitor", test_monitor },
	{ "name-owner-changed", test_name_owner_changed },
	{ "signal-order", test_signal_order },
	{ "multicast-once", test_multicast_once },
	{ "bus1ctl", test_bus1ctl },
	{ "churn", test_churn },
	{ "stress", test_stress },
	{ "quota", test_quota },
	{ "kernel-reclaim", test_kernel_reclaim },
	{ "direct", test_direct },
	{ "direct-policy", test_direct_policy },
	{ "direct-reload", test_direct_reload },
	{ "container", test_container },
	{ "reexec", test_reexec },
};

int main(int argc, char **argv)
{
	int failed = 0, ran = 0;

	if (access("/dev/bus1", F_OK) < 0) {
		fprintf(stderr, "no /dev/bus1: skipped\n");
		return 77;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/native-test.XXXXXX");
	CHECK(mkdtemp(tmpdir));
	if (argc > 1 && !strcmp(argv[1], "bench"))
		return run_bench(argc > 2 ? atoi(argv[2]) : 2000);
	/* For tests driven from outside (test/integration/test_fdstore.py in the guest). */
	if (argc > 2 && !strcmp(argv[1], "serve")) {
		struct sigaction sa = { .sa_handler = svc_on_sigusr1 };

		/* No SA_RESTART: the wait returns at once, and the loop emits. */
		CHECK_OK(sigaction(SIGUSR1, &sa, NULL));
		return serve_named(argv[2], true);
	}

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		pid_t pid;
		int status;

		if (argc > 1 && strcmp(argv[1], cases[i].name))
			continue;
		ran++;
		fflush(NULL);
		pid = fork();
		CHECK(pid >= 0);
		if (pid == 0) {
			setpgid(0, 0);
			alarm(90);
			cases[i].fn();
			_exit(0);
		}
		CHECK(waitpid(pid, &status, 0) == pid);
		/* Leftover service processes of a failed case. */
		kill(-pid, SIGKILL);
		if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
			printf("ok %s\n", cases[i].name);
		} else {
			printf("not ok %s (status %d)\n", cases[i].name, status);
			failed++;
		}
	}
	if (!ran) {
		fprintf(stderr, "unknown case %s\n", argv[1]);
		return 2;
	}
	return failed ? 1 : 0;
}
