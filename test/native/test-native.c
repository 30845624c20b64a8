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
#include "dbus-compat/address.h"
#include "dbus-compat/message.h"
#include "bus1-client.h"

#define SVC_NAME "org.bus1.test.Native"
#define SVC_PATH "/org/bus1/test"
#define SVC_IFACE "org.bus1.test.Echo"
#define SOCK_NAME "org.bus1.test.Socket"
#define SIG_IFACE "org.bus1.test.Signals"
#define N_SIGNALS 200

static char tmpdir[64];

#define fail(...) do {								\
		fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);		\
		fprintf(stderr, __VA_ARGS__);					\
		fprintf(stderr, "\n");						\
		exit(1);							\
	} while (0)
#define check(expr) do { if (!(expr)) fail("%s", #expr); } while (0)
#define check_r(r) do {								\
		int _r = (r);							\
		if (_r < 0)							\
			fail("%s: %s", #r, strerror(-_r));			\
	} while (0)

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
		fail("b1c_bus_open: %s", strerror(-r));
	return bus;
}

/* A method call to the driver with no or one string argument; returns the reply. */
static struct b1c_message *call_driver(struct b1c_bus *bus, const char *member, const char *arg)
{
	struct b1c_message *m = NULL, *reply = NULL;
	int r;

	check_r(b1c_message_new_method_call(&m, "org.freedesktop.DBus", "/org/freedesktop/DBus",
					    "org.freedesktop.DBus", member, arg ? "s" : ""));
	if (arg)
		check_r(b1c_message_append(m, "s", arg));
	r = b1c_bus_call(bus, m, 0, &reply);
	b1c_message_unref(m);
	if (r == B1C_CALL_ERROR)
		fail("%s: %s: %s", member, b1c_message_get_error_name(reply),
		     b1c_message_get_error_text(reply));
	check_r(r);
	return reply;
}

static bool name_has_owner(struct b1c_bus *bus, const char *name)
{
	struct b1c_message *reply = call_driver(bus, "NameHasOwner", name);
	bool b = false;

	check_r(b1c_message_read(reply, "b", &b));
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
	fail("name %s did not %s", name, present ? "appear" : "go away");
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
	if (!strcmp(member, "Die"))
		_exit(0);	/* mid-call: the caller must get NoReply */
	if (!strcmp(member, "Quit")) {
		svc_quit = true;
		return b1c_bus_reply(bus, m, NULL) ?: 1;
	}
	return 0;
}

static void run_loop(struct b1c_bus *bus, bool *quit)
{
	while (!*quit) {
		int r = b1c_bus_process(bus);

		if (r == -ECONNRESET)
			break;
		check_r(r);
		if (r == 0)
			check_r(b1c_bus_wait(bus, 1000000));
	}
}

static pid_t start_native_service(void)
{
	pid_t pid = fork();

	check(pid >= 0);
	if (pid == 0) {
		struct b1c_bus *bus = open_native();

		check_r(b1c_bus_add_object(bus, SVC_PATH, svc_method, NULL));
		check(b1c_bus_request_name(bus, SVC_NAME, 0) == 1);
		run_loop(bus, &svc_quit);
		b1c_bus_free(bus);
		_exit(0);
	}
	return pid;
}

static void stop_service(struct b1c_bus *bus, const char *name, pid_t pid)
{
	struct b1c_message *m = NULL, *reply = NULL;
	int status;

	check_r(b1c_message_new_method_call(&m, name, SVC_PATH, SVC_IFACE, "Quit", ""));
	check(b1c_bus_call(bus, m, 0, &reply) == 0);
	b1c_message_unref(m);
	b1c_message_unref(reply);
	check(waitpid(pid, &status, 0) == pid);
	check(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

/* Call SVC_IFACE.@member on @dest with one string; returns the reply string (static). */
static int call_echo(struct b1c_bus *bus, const char *dest, const char *member, const char *arg,
		     char *out, size_t n_out)
{
	struct b1c_message *m = NULL, *reply = NULL;
	const char *s = NULL;
	int r;

	check_r(b1c_message_new_method_call(&m, dest, SVC_PATH, SVC_IFACE, member,
					    arg ? "s" : ""));
	if (arg)
		check_r(b1c_message_append(m, "s", arg));
	r = b1c_bus_call(bus, m, 5000000, &reply);
	b1c_message_unref(m);
	if (r == B1C_CALL_ERROR) {
		snprintf(out, n_out, "%s: %s", b1c_message_get_error_name(reply),
			 b1c_message_get_error_text(reply));
	} else if (r == 0) {
		check_r(b1c_message_read(reply, "s", &s));
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

	check(!strncmp(b1c_bus_get_unique_name(a), ":1.", 3));
	check(!strncmp(b1c_bus_get_unique_name(b), ":1.", 3));
	check(strcmp(b1c_bus_get_unique_name(a), b1c_bus_get_unique_name(b)));
	check(name_has_owner(b, b1c_bus_get_unique_name(a)));

	/* GetConnectionCredentials of a native client: kernel-stamped uid and pid. */
	reply = call_driver(b, "GetConnectionCredentials", b1c_bus_get_unique_name(a));
	check_r(b1c_message_enter(reply, 'a'));
	while (b1c_message_peek(reply, NULL) == '{') {
		check_r(b1c_message_enter(reply, '{'));
		check_r(b1c_message_read(reply, "s", &key));
		if (!strcmp(key, "UnixUserID") || !strcmp(key, "ProcessID")) {
			uint32_t v;

			check_r(b1c_message_enter(reply, 'v'));
			check_r(b1c_message_read(reply, "u", &v));
			check_r(b1c_message_exit(reply));
			if (!strcmp(key, "UnixUserID"))
				uid = v;
			else
				pid = v;
		}
		check_r(b1c_message_exit(reply));
	}
	b1c_message_unref(reply);
	check(uid == (uint32_t)getuid());
	check(pid == (uint32_t)getpid());

	/* Closing the peer disconnects: the name goes away. */
	{
		char *name = strdup(b1c_bus_get_unique_name(a));

		b1c_bus_free(a);
		wait_for_name(b, name, false);
		free(name);
	}
	b1c_bus_free(b);
}

static int async_done;

static int on_async_reply(struct b1c_bus *bus, struct b1c_message *m, void *userdata)
{
	int32_t v = 0;

	check(b1c_message_get_type(m) == B1C_MESSAGE_METHOD_RETURN);
	check_r(b1c_message_read(m, "i", &v));
	check(v == 42);
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

	check(call_echo(bus, SVC_NAME, "Echo", "hello native", out, sizeof(out)) == 0);
	check(!strcmp(out, "hello native"));
	check(call_echo(bus, SVC_NAME, "Sender", NULL, out, sizeof(out)) == 0);
	check(!strcmp(out, b1c_bus_get_unique_name(bus)));
	check(call_echo(bus, SVC_NAME, "Fail", NULL, out, sizeof(out)) == B1C_CALL_ERROR);
	check(!strcmp(out, "org.bus1.test.Error.Failed: failed on purpose"));
	check(call_echo(bus, SVC_NAME, "NoSuchMethod", NULL, out, sizeof(out)) == B1C_CALL_ERROR);
	check(!strncmp(out, "org.freedesktop.DBus.Error.UnknownMethod", 40));
	check(call_echo(bus, "org.bus1.test.Nobody", "Echo", "x", out, sizeof(out)) ==
	      B1C_CALL_ERROR);
	check(!strncmp(out, "org.freedesktop.DBus.Error.ServiceUnknown", 41));

	/* Async. */
	check_r(b1c_message_new_method_call(&m, SVC_NAME, SVC_PATH, SVC_IFACE, "Add", "ii"));
	check_r(b1c_message_append(m, "ii", 40, 2));
	check_r(b1c_bus_call_async(bus, m, on_async_reply, NULL));
	b1c_message_unref(m);
	for (int i = 0; i < 500 && !async_done; i++) {
		int r = b1c_bus_process(bus);

		check_r(r);
		if (!r)
			check_r(b1c_bus_wait(bus, 10000));
	}
	check(async_done == 1);

	/* fd passing through bus1, both ways through the broker. */
	snprintf(path, sizeof(path), "%s/fdfile", tmpdir);
	fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	check(fd >= 0);
	check(write(fd, "through the kernel", 18) == 18);
	check_r(b1c_message_new_method_call(&m, SVC_NAME, SVC_PATH, SVC_IFACE, "ReadFd", "h"));
	check_r(b1c_message_append_fd(m, fd));
	close(fd);
	{
		struct b1c_message *reply = NULL;
		const char *s;

		check(b1c_bus_call(bus, m, 0, &reply) == 0);
		check_r(b1c_message_read(reply, "s", &s));
		check(!strcmp(s, "through the kernel"));
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
	check(call_echo(bus, SVC_NAME, "Die", NULL, out, sizeof(out)) == B1C_CALL_ERROR);
	check(!strncmp(out, "org.freedesktop.DBus.Error.NoReply", 34));
	check(waitpid(svc, &status, 0) == svc);
	wait_for_name(bus, SVC_NAME, false);
	b1c_bus_free(bus);
}

static int run_cmd(const char *cmd, char *out, size_t n_out)
{
	FILE *f = popen(cmd, "r");
	size_t n;

	check(f);
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
	check(run_cmd("dbus-send --session --print-reply --dest=" SVC_NAME " " SVC_PATH " "
		      SVC_IFACE ".Echo string:from-libdbus 2>&1", out, sizeof(out)) == 0);
	if (!strstr(out, "string \"from-libdbus\""))
		fail("dbus-send output: %s", out);
	check(run_cmd("dbus-send --session --print-reply --dest=" SVC_NAME " " SVC_PATH " "
		      SVC_IFACE ".Fail 2>&1", out, sizeof(out)) != 0);
	if (!strstr(out, "org.bus1.test.Error.Failed"))
		fail("dbus-send output: %s", out);
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
	check(run_cmd("gdbus call --session --dest " SVC_NAME " --object-path " SVC_PATH
		      " --method " SVC_IFACE ".Echo from-gdbus 2>&1", out, sizeof(out)) == 0);
	if (!strstr(out, "('from-gdbus',)"))
		fail("gdbus output: %s", out);
	check(run_cmd("busctl --user call " SVC_NAME " " SVC_PATH " " SVC_IFACE
		      " Add ii 40 2 2>&1", out, sizeof(out)) == 0);
	if (strcmp(out, "i 42\n"))
		fail("busctl output: %s", out);
	check(run_cmd("busctl --user list --no-pager 2>&1", out, sizeof(out)) == 0);
	if (!strstr(out, SVC_NAME))
		fail("busctl list: %s", out);
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

	check(pid >= 0);
	if (pid == 0) {
		sd_bus *bus = NULL;
		bool quit = false;

		check_r(sd_bus_open_user(&bus));
		check_r(sd_bus_add_object_vtable(bus, NULL, SVC_PATH, SVC_IFACE, sd_vtable,
						 &quit));
		check_r(sd_bus_request_name(bus, SOCK_NAME, 0));
		while (!quit) {
			int r = sd_bus_process(bus, NULL);

			check_r(r);
			if (!r)
				check_r(sd_bus_wait(bus, 1000000));
		}
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
	check(call_echo(bus, SOCK_NAME, "Echo", "to sd-bus", out, sizeof(out)) == 0);
	check(!strcmp(out, "to sd-bus"));
	stop_service(bus, SOCK_NAME, svc);
	b1c_bus_free(bus);
}

static void test_monitor(void)
{
	struct b1c_bus *bus = open_native();
	char path[128], cmd[256], out[256], buf[65536];
	pid_t svc = start_native_service(), mon;
	int fd;
	ssize_t n;

	wait_for_name(bus, SVC_NAME, true);
	snprintf(path, sizeof(path), "%s/monitor.out", tmpdir);
	mon = fork();
	check(mon >= 0);
	if (mon == 0) {
		fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
		dup2(fd, 1);
		execlp("dbus-monitor", "dbus-monitor", "--session", (char *)NULL);
		_exit(127);
	}
	/* dbus-monitor has become a monitor once it owns no name but... wait for output. */
	for (int i = 0; i < 500; i++) {
		struct stat st;

		if (stat(path, &st) == 0 && st.st_size > 0)
			break;
		usleep(10000);
	}
	usleep(200000);
	check(call_echo(bus, SVC_NAME, "Echo", "seen-by-monitor", out, sizeof(out)) == 0);
	usleep(300000);
	kill(mon, SIGTERM);
	waitpid(mon, NULL, 0);

	fd = open(path, O_RDONLY);
	check(fd >= 0);
	n = read(fd, buf, sizeof(buf) - 1);
	check(n > 0);
	buf[n] = 0;
	close(fd);
	snprintf(cmd, sizeof(cmd), "sender=%s", b1c_bus_get_unique_name(bus));
	if (!strstr(buf, "member=Echo") || !strstr(buf, "seen-by-monitor") || !strstr(buf, cmd))
		fail("dbus-monitor did not see the native call:\n%s", buf);
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

	check_r(b1c_message_read(m, "su", &who, &seq));
	fprintf(s->log, "%s %u\n", who, seq);
	s->n++;
	return 1;
}

static int on_sd_signal(sd_bus_message *m, void *userdata, sd_bus_error *error)
{
	struct sub_state *s = userdata;
	const char *who;
	uint32_t seq;

	check_r(sd_bus_message_read(m, "su", &who, &seq));
	fprintf(s->log, "%s %u\n", who, seq);
	s->n++;
	return 1;
}

#define SIG_RULE "type='signal',interface='" SIG_IFACE "',member='Tick'"

static pid_t start_subscriber(int index, bool native)
{
	pid_t pid = fork();

	check(pid >= 0);
	if (pid == 0) {
		struct sub_state s = {};
		char path[128], name[64];

		snprintf(path, sizeof(path), "%s/sub%d", tmpdir, index);
		snprintf(name, sizeof(name), "org.bus1.test.Sub%d", index);
		s.log = fopen(path, "w");
		check(s.log);
		alarm(60);
		if (native) {
			struct b1c_bus *bus = open_native();

			check_r(b1c_bus_add_match(bus, SIG_RULE, on_native_signal, &s));
			check(b1c_bus_request_name(bus, name, 0) == 1);
			while (s.n < sub_expect) {
				int r = b1c_bus_process(bus);

				check_r(r);
				if (!r)
					check_r(b1c_bus_wait(bus, 1000000));
			}
			b1c_bus_free(bus);
		} else {
			sd_bus *bus = NULL;

			check_r(sd_bus_open_user(&bus));
			check_r(sd_bus_add_match(bus, NULL, SIG_RULE, on_sd_signal, &s));
			check_r(sd_bus_request_name(bus, name, 0));
			while (s.n < sub_expect) {
				int r = sd_bus_process(bus, NULL);

				check_r(r);
				if (!r)
					check_r(sd_bus_wait(bus, 1000000));
			}
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

	check(pid >= 0);
	if (pid == 0) {
		const char *who = native ? "native" : "socket";

		if (native) {
			struct b1c_bus *bus = open_native();

			for (uint32_t i = 0; i < N_SIGNALS; i++)
				check_r(b1c_bus_emit_signal(bus, SVC_PATH, SIG_IFACE, "Tick", "su",
							    who, i));
			/* A round trip: every signal was routed before we leave. */
			b1c_message_unref(call_driver(bus, "GetId", NULL));
			b1c_bus_free(bus);
		} else {
			sd_bus *bus = NULL;

			check_r(sd_bus_open_user(&bus));
			for (uint32_t i = 0; i < N_SIGNALS; i++)
				check_r(sd_bus_emit_signal(bus, SVC_PATH, SIG_IFACE, "Tick", "su",
							   who, i));
			check_r(sd_bus_flush(bus));
			check_r(sd_bus_call_method(bus, "org.freedesktop.DBus",
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

	check(f && buf);
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
		check(waitpid(em[i], &status, 0) == em[i]);
		check(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	}
	for (int i = 0; i < 4; i++) {
		check(waitpid(subs[i], &status, 0) == subs[i]);
		if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
			fail("subscriber %d failed (status %d)", i, status);
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

			check(sscanf(p, "%15s %u", who, &seq) == 2);
			k = !strcmp(who, "socket");
			if (seq != next[k])
				fail("subscriber %d: %s %u, expected %u", i, who, seq, next[k]);
			next[k]++;
			p = strchr(p, '\n');
			check(p);
			p++;
		}
		check(next[0] == N_SIGNALS && next[1] == N_SIGNALS);
	}
	/* The same total order for every subscriber, native and socket alike. */
	for (int i = 1; i < 4; i++)
		if (strcmp(logs[0], logs[i]))
			fail("subscriber %d saw another order than subscriber 0", i);
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
		fail("needs BUS_PID and /usr/bin/strace");
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
	check(st >= 0);
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
	check(run_cmd(cmd, out, sizeof(out)) == 0);
	for (int i = 0; i < 4; i++) {
		check(waitpid(subs[i], &status, 0) == subs[i]);
		if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
			fail("subscriber %d failed (status %d)", i, status);
	}
	usleep(200000);
	kill(st, SIGINT);
	check(waitpid(st, &status, 0) == st);

	trace = slurp(path);
	/* BUS1_CMD_SEND = _IOWR(0x96, 0x20, 80 bytes); strace prints it raw. */
	for (char *p = trace; (p = strstr(p, "0x96, 0x20")); p++)
		n_send++;
	if (n_send != 1)
		fail("expected 1 bus1 SEND from the broker, strace saw %d:\n%s", n_send, trace);
	free(trace);
	b1c_bus_free(bus);
}

static int noc_seen;

static int on_noc(struct b1c_bus *bus, struct b1c_message *m, void *userdata)
{
	const char *name, *old, *new;

	check_r(b1c_message_read(m, "sss", &name, &old, &new));
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

	check_r(b1c_bus_add_match(bus, "type='signal',sender='org.freedesktop.DBus',"
				  "member='NameOwnerChanged',arg0='" SVC_NAME "'", on_noc, NULL));
	svc = start_native_service();
	wait_for_name(bus, SVC_NAME, true);
	stop_service(bus, SVC_NAME, svc);
	for (int i = 0; i < 500 && noc_seen < 2; i++) {
		int r = b1c_bus_process(bus);

		check_r(r);
		if (!r)
			check_r(b1c_bus_wait(bus, 10000));
	}
	check(noc_seen == 2);
	b1c_bus_free(bus);
}

static void test_bus1ctl(void)
{
	char out[4096], cmd[512];
	const char *ctl = getenv("BUS1CTL");
	struct b1c_bus *bus = open_native();
	pid_t svc = start_native_service();

	if (!ctl)
		fail("BUS1CTL not set");
	wait_for_name(bus, SVC_NAME, true);
	snprintf(cmd, sizeof(cmd), "%s call %s %s %s.Echo s via-bus1ctl 2>&1", ctl, SVC_NAME,
		 SVC_PATH, SVC_IFACE);
	check(run_cmd(cmd, out, sizeof(out)) == 0);
	if (strcmp(out, "\"via-bus1ctl\"\n"))
		fail("bus1ctl call: %s", out);
	snprintf(cmd, sizeof(cmd), "%s list 2>&1", ctl);
	check(run_cmd(cmd, out, sizeof(out)) == 0);
	if (!strstr(out, "\"" SVC_NAME "\""))
		fail("bus1ctl list: %s", out);
	snprintf(cmd, sizeof(cmd), "%s introspect org.freedesktop.DBus / 2>&1", ctl);
	check(run_cmd(cmd, out, sizeof(out)) == 0);
	if (!strstr(out, "<node"))
		fail("bus1ctl introspect: %s", out);
	snprintf(cmd, sizeof(cmd), "%s call %s %s %s.Fail 2>&1", ctl, SVC_NAME, SVC_PATH,
		 SVC_IFACE);
	check(run_cmd(cmd, out, sizeof(out)) != 0);
	if (!strstr(out, "org.bus1.test.Error.Failed: failed on purpose"))
		fail("bus1ctl call Fail: %s", out);
	snprintf(cmd, sizeof(cmd), "%s emit /x org.bus1.test.X.Y su a 1 2>&1", ctl);
	check(run_cmd(cmd, out, sizeof(out)) == 0);

	/* bus1ctl monitor (a native monitor) sees a call between two native clients. */
	{
		char path[128], buf[65536];
		pid_t mon;
		int fd;
		ssize_t n;

		snprintf(path, sizeof(path), "%s/bus1ctl-monitor.out", tmpdir);
		mon = fork();
		check(mon >= 0);
		if (mon == 0) {
			fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
			dup2(fd, 1);
			execl(ctl, "bus1ctl", "monitor", (char *)NULL);
			_exit(127);
		}
		for (int i = 0; i < 500; i++) {
			struct stat st;

			if (stat(path, &st) == 0 && st.st_size > 0)
				break;
			usleep(10000);
		}
		check(call_echo(bus, SVC_NAME, "Echo", "seen-by-bus1ctl", out, sizeof(out)) == 0);
		usleep(300000);
		kill(mon, SIGTERM);
		waitpid(mon, NULL, 0);
		fd = open(path, O_RDONLY);
		check(fd >= 0);
		n = read(fd, buf, sizeof(buf) - 1);
		check(n > 0);
		buf[n] = 0;
		close(fd);
		if (!strstr(buf, "monitoring as :1.") || !strstr(buf, "member=Echo") ||
		    !strstr(buf, "\"seen-by-bus1ctl\""))
			fail("bus1ctl monitor output:\n%s", buf);
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

static double bench_native(const char *dest, int n)
{
	struct b1c_bus *bus = open_native();
	char out[64];
	double t;

	check(call_echo(bus, dest, "Echo", "warm-up", out, sizeof(out)) == 0);
	t = now_sec();
	for (int i = 0; i < n; i++)
		check(call_echo(bus, dest, "Echo", "ping", out, sizeof(out)) == 0);
	t = now_sec() - t;
	b1c_bus_free(bus);
	return n / t;
}

static double bench_socket(const char *dest, int n)
{
	sd_bus *bus = NULL;
	double t;

	check_r(sd_bus_open_user(&bus));
	t = now_sec();
	for (int i = -1; i < n; i++) {
		sd_bus_message *reply = NULL;
		const char *s;

		if (i == 0)
			t = now_sec();
		check_r(sd_bus_call_method(bus, dest, SVC_PATH, SVC_IFACE, "Echo", NULL, &reply,
					   "s", "ping"));
		check_r(sd_bus_message_read(reply, "s", &s));
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
static int run_bench(int n)
{
	struct b1c_bus *bus = open_native();
	pid_t nsvc = start_native_service(), ssvc = start_socket_service();
	double nn, ns, sn, ss;

	wait_for_name(bus, SVC_NAME, true);
	wait_for_name(bus, SOCK_NAME, true);
	nn = bench_native(SVC_NAME, n);
	ss = bench_socket(SOCK_NAME, n);
	ns = bench_native(SOCK_NAME, n);
	sn = bench_socket(SVC_NAME, n);
	printf("round trips through bus1-broker, %d calls each (calls/s):\n", n);
	printf("  native -> native  %9.0f\n", nn);
	printf("  socket -> socket  %9.0f   (sd-bus both sides)\n", ss);
	printf("  native -> socket  %9.0f\n", ns);
	printf("  socket -> native  %9.0f\n", sn);
	printf("  ratio native/socket (both sides): %.2f\n", nn / ss);
	stop_service(bus, SVC_NAME, nsvc);
	stop_service(bus, SOCK_NAME, ssvc);
	b1c_bus_free(bus);
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
		check(kids[k] >= 0);
		if (kids[k] == 0) {
			if (k == 4) {
				struct b1c_bus *b = open_native();
				char out[64];

				for (int i = 0; i < 300; i++)
					check(call_echo(b, SVC_NAME, "Echo", "churn", out,
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
		check(waitpid(kids[k], &status, 0) == kids[k]);
		if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
			fail("churn child %d failed (status %d)", k, status);
	}
	stop_service(bus, SVC_NAME, svc);
	b1c_bus_free(bus);
}

/* ------------------------------------------------------- a bad bootstrap */

static void raw_write(int fd, const void *p, size_t n)
{
	check(write(fd, p, n) == (ssize_t)n);
}

static void raw_line(int fd, char *buf, size_t size)
{
	size_t n = 0;

	while (n + 1 < size) {
		check(read(fd, buf + n, 1) == 1);
		if (buf[n++] == '\n')
			break;
	}
	buf[n] = 0;
}

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
	check(sendmsg(sock, &mh, 0) == (ssize_t)(iov[0].iov_len + iov[1].iov_len));
}

static struct message *raw_recv(int sock)
{
	uint8_t buf[4096];
	size_t size;
	struct message *m = NULL;

	check(read(sock, buf, 16) == 16);
	check(message_frame_size(buf, 16, &size) == 0 && size <= sizeof(buf));
	for (size_t n = 16; n < size;) {
		ssize_t k = read(sock, buf + n, size - n);

		check(k > 0);
		n += (size_t)k;
	}
	check(message_new_from_data(&m, buf, size, NULL, 0) == 0);
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
	check(message_builder_seal(&b, serial, &m) == 0);
	message_builder_deinit(&b);
	if (!with_fd)
		return m;
	m->unix_fds = 1;
	check(message_stitch_sender(m, NULL, &with) == 0);
	m->unix_fds = 0;
	message_unref(m);
	return with;
}

/*
 * Connect with a pipe instead of /dev/bus1: InvalidArgs, and the connection
 * stays a usable socket connection (Hello works). A second Connect after
 * Hello is not the bootstrap any more (an unknown driver interface).
 */
static void test_bad_bootstrap(void)
{
	struct address_list list = {};
	struct message *m;
	char line[256], sasl[64];
	int sock = -1, pipefd[2];

	check(address_list_parse(&list, getenv("DBUS_SESSION_BUS_ADDRESS"), NULL) == 0);
	check(address_connect(&list.entries[0], &sock) == 0);
	address_list_deinit(&list);
	snprintf(sasl, sizeof(sasl), "AUTH EXTERNAL %02x\r\n", '0' + (int)getuid());
	check(getuid() == 0);	/* the guest runs as root: "0" is 0x30 */
	raw_write(sock, "", 1);
	raw_write(sock, sasl, strlen(sasl));
	raw_line(sock, line, sizeof(line));
	check(!strncmp(line, "OK ", 3));
	raw_write(sock, "NEGOTIATE_UNIX_FD\r\n", 19);
	raw_line(sock, line, sizeof(line));
	check(!strcmp(line, "AGREE_UNIX_FD\r\n"));
	raw_write(sock, "BEGIN\r\n", 7);

	check(pipe(pipefd) == 0);
	m = raw_call(1, "org.freedesktop.DBus.Bus1", "Connect", "h", true);
	raw_send(sock, m, pipefd[0]);
	message_unref(m);
	m = raw_recv(sock);
	check(m->type == DC_MESSAGE_ERROR && m->reply_serial == 1);
	if (strcmp(m->error_name, "org.freedesktop.DBus.Error.InvalidArgs"))
		fail("Connect(pipe): %s", m->error_name);
	message_unref(m);

	m = raw_call(2, "org.freedesktop.DBus", "Hello", "", false);
	raw_send(sock, m, -1);
	message_unref(m);
	m = raw_recv(sock);
	check(m->type == DC_MESSAGE_METHOD_RETURN && m->reply_serial == 2);
	message_unref(m);

	m = raw_call(3, "org.freedesktop.DBus.Bus1", "Connect", "h", true);
	raw_send(sock, m, pipefd[0]);
	message_unref(m);
	for (;;) {
		m = raw_recv(sock);
		if (m->reply_serial == 3)
			break;
		message_unref(m);	/* NameAcquired */
	}
	check(m->type == DC_MESSAGE_ERROR);
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
	check(mkdtemp(tmpdir));
	if (argc > 1 && !strcmp(argv[1], "bench"))
		return run_bench(argc > 2 ? atoi(argv[2]) : 2000);

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		pid_t pid;
		int status;

		if (argc > 1 && strcmp(argv[1], cases[i].name))
			continue;
		ran++;
		fflush(NULL);
		pid = fork();
		check(pid >= 0);
		if (pid == 0) {
			setpgid(0, 0);
			alarm(90);
			cases[i].fn();
			_exit(0);
		}
		check(waitpid(pid, &status, 0) == pid);
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
