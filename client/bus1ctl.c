/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * bus1ctl - talk to a bus1-broker natively (through /dev/bus1).
 *
 *   bus1ctl [--address ADDR] [--timeout SEC] COMMAND ...
 *     call DEST PATH IFACE.MEMBER [SIG [ARG...]]   call a method, print the reply
 *     emit PATH IFACE.MEMBER [SIG [ARG...]]        emit a signal
 *     monitor [RULE...]                            print matching messages (BecomeMonitor)
 *     list                                         ListNames
 *     introspect DEST PATH                         print the introspection XML
 *     name                                         print the unique name
 *     top [--once] [--interval SEC] [--rows N]     what the bus holds, per uid and
 *                                                  connection (over the socket)
 *
 * Arguments are basic types only (y b n q i u x t d s o g); b takes
 * true/false/1/0. Replies are printed one value per line, busctl-like.
 */

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "bus1-client.h"
#include "bus1ctl-top.h"
#include "util/error.h"

static const char *arg_address;
static uint64_t arg_timeout;

/*
 * "bus1ctl: WHAT: ERROR", with where the error arose when the code it went
 * through recorded that (util/error.h): which syscall of which step failed
 * tells more than the errno alone.
 */
static void print_failure(const char *what, int r)
{
	const struct error_origin *o = error_origin_get();

	fprintf(stderr, "bus1ctl: %s%s%s", what ? what : "", what ? ": " : "", strerror(-r));
	if (o && o->error == r)
		fprintf(stderr, " (%s:%d, %s())", o->file, o->line, o->func);
	fputc('\n', stderr);
	error_origin_clear();
}

static int parse_value(struct b1c_message *m, char type, const char *s)
{
	char *end = NULL;

	errno = 0;
	switch (type) {
	case 's':
	case 'o':
	case 'g':
		return b1c_message_append(m, (char[]){ type, 0 }, s);
	case 'b':
		if (!strcmp(s, "true") || !strcmp(s, "1"))
			return b1c_message_append(m, "b", 1);
		if (!strcmp(s, "false") || !strcmp(s, "0"))
			return b1c_message_append(m, "b", 0);
		return -EINVAL;
	case 'd': {
		double d = strtod(s, &end);

		if (errno || !*s || *end)
			return -EINVAL;
		return b1c_message_append(m, "d", d);
	}
	case 'x': {
		long long v = strtoll(s, &end, 0);

		if (errno || !*s || *end)
			return -EINVAL;
		return b1c_message_append(m, "x", (int64_t)v);
	}
	case 't': {
		unsigned long long v = strtoull(s, &end, 0);

		if (errno || !*s || *end)
			return -EINVAL;
		return b1c_message_append(m, "t", (uint64_t)v);
	}
	case 'y':
	case 'n':
	case 'q':
	case 'i':
	case 'u': {
		long long v = strtoll(s, &end, 0);

		if (errno || !*s || *end)
			return -EINVAL;
		if (type == 'i' || type == 'n')
			return b1c_message_append(m, (char[]){ type, 0 }, (int)v);
		return b1c_message_append(m, (char[]){ type, 0 }, (unsigned)v);
	}
	}
	return -EINVAL;
}

/* Append ARGs according to SIG (basic types only). */
static int append_args(struct b1c_message *m, const char *sig, char **args, int n)
{
	int i = 0;

	for (const char *t = sig; *t; t++, i++) {
		int r;

		if (i >= n) {
			fprintf(stderr, "bus1ctl: too few arguments for signature '%s'\n", sig);
			return -EINVAL;
		}
		r = parse_value(m, *t, args[i]);
		if (r < 0) {
			fprintf(stderr, "bus1ctl: invalid argument '%s' for type '%c'\n",
				args[i], *t);
			return r;
		}
	}
	if (i < n) {
		fprintf(stderr, "bus1ctl: too many arguments for signature '%s'\n", sig);
		return -EINVAL;
	}
	return 0;
}

static void indent(int depth)
{
	for (int i = 0; i < depth; i++)
		fputs("  ", stdout);
}

/* Print the values of the current container, recursively. */
static int print_values(struct b1c_message *m, int depth)
{
	char t;

	while ((t = b1c_message_peek(m, NULL))) {
		int r = 0;

		switch (t) {
		case 'y': case 'n': case 'q': case 'i': case 'u': case 'h': {
			uint8_t y; int16_t n; uint16_t q; int32_t i; uint32_t u; int fd;

			indent(depth);
			if (t == 'y' && !(r = b1c_message_read(m, "y", &y)))
				printf("%u\n", y);
			else if (t == 'n' && !(r = b1c_message_read(m, "n", &n)))
				printf("%d\n", n);
			else if (t == 'q' && !(r = b1c_message_read(m, "q", &q)))
				printf("%u\n", q);
			else if (t == 'i' && !(r = b1c_message_read(m, "i", &i)))
				printf("%" PRId32 "\n", i);
			else if (t == 'u' && !(r = b1c_message_read(m, "u", &u)))
				printf("%" PRIu32 "\n", u);
			else if (t == 'h' && !(r = b1c_message_read(m, "h", &fd)))
				printf("fd %d\n", fd);
			break;
		}
		case 'b': {
			bool b;

			indent(depth);
			if (!(r = b1c_message_read(m, "b", &b)))
				printf("%s\n", b ? "true" : "false");
			break;
		}
		case 'x': {
			int64_t x;

			indent(depth);
			if (!(r = b1c_message_read(m, "x", &x)))
				printf("%" PRId64 "\n", x);
			break;
		}
		case 't': {
			uint64_t v;

			indent(depth);
			if (!(r = b1c_message_read(m, "t", &v)))
				printf("%" PRIu64 "\n", v);
			break;
		}
		case 'd': {
			double d;

			indent(depth);
			if (!(r = b1c_message_read(m, "d", &d)))
				printf("%g\n", d);
			break;
		}
		case 's': case 'o': case 'g': {
			const char *s;

			indent(depth);
			if (!(r = b1c_message_read(m, (char[]){ t, 0 }, &s)))
				printf("\"%s\"\n", s);
			break;
		}
		case 'a': case '(': case '{': case 'v': {
			const char *sig = "";

			b1c_message_peek(m, &sig);
			indent(depth);
			printf("%c%s\n", t, t == 'v' ? "" : "");
			r = b1c_message_enter(m, t);
			if (!r)
				r = print_values(m, depth + 1);
			if (!r)
				r = b1c_message_exit(m);
			break;
		}
		default:
			r = b1c_message_skip(m);
			break;
		}
		if (r < 0)
			return r;
	}
	return 0;
}

static int split_member(const char *arg, char **iface, const char **member)
{
	const char *dot = strrchr(arg, '.');

	if (!dot || dot == arg || !dot[1]) {
		fprintf(stderr, "bus1ctl: expected INTERFACE.MEMBER, got '%s'\n", arg);
		return -EINVAL;
	}
	*iface = strndup(arg, (size_t)(dot - arg));
	*member = dot + 1;
	return *iface ? 0 : -ENOMEM;
}

static int do_call(struct b1c_bus *bus, const char *dest, const char *path, const char *iface,
		   const char *member, const char *sig, char **args, int n_args)
{
	struct b1c_message *m = NULL, *reply = NULL;
	int r;

	r = b1c_message_new_method_call(&m, dest, path, iface, member, sig);
	if (r < 0)
		return r;
	r = append_args(m, sig, args, n_args);
	if (r == 0)
		r = b1c_bus_call(bus, m, arg_timeout, &reply);
	b1c_message_unref(m);
	if (r == B1C_CALL_ERROR) {
		fprintf(stderr, "%s: %s\n", b1c_message_get_error_name(reply),
			b1c_message_get_error_text(reply));
		b1c_message_unref(reply);
		return -EREMOTEIO;
	}
	if (r < 0)
		return r;
	r = print_values(reply, 0);
	b1c_message_unref(reply);
	return r;
}

static const char *type_name(int t)
{
	switch (t) {
	case B1C_MESSAGE_METHOD_CALL:
		return "method call";
	case B1C_MESSAGE_METHOD_RETURN:
		return "method return";
	case B1C_MESSAGE_ERROR:
		return "error";
	case B1C_MESSAGE_SIGNAL:
		return "signal";
	}
	return "?";
}

static int on_monitored(struct b1c_bus *bus, struct b1c_message *m, void *userdata)
{
	const char *e = b1c_message_get_error_name(m);

	printf("%s sender=%s -> destination=%s serial=%u", type_name(b1c_message_get_type(m)),
	       b1c_message_get_sender(m) ?: "(null)", b1c_message_get_destination(m) ?: "(null)",
	       b1c_message_get_serial(m));
	if (b1c_message_get_reply_serial(m))
		printf(" reply_serial=%u", b1c_message_get_reply_serial(m));
	if (b1c_message_get_path(m))
		printf(" path=%s", b1c_message_get_path(m));
	if (b1c_message_get_interface(m))
		printf(" interface=%s", b1c_message_get_interface(m));
	if (b1c_message_get_member(m))
		printf(" member=%s", b1c_message_get_member(m));
	if (e)
		printf(" error_name=%s", e);
	printf("\n");
	print_values(m, 1);
	fflush(stdout);
	return 1;
}

static int do_monitor(struct b1c_bus *bus, char **rules, int n_rules)
{
	struct b1c_message *m = NULL, *reply = NULL;
	int r;

	/* A monitor may not send anything: every message is consumed by the printer. */
	r = b1c_bus_add_filter(bus, on_monitored, NULL);
	if (r < 0)
		return r;
	r = b1c_message_new_method_call(&m, "org.freedesktop.DBus", "/org/freedesktop/DBus",
					"org.freedesktop.DBus.Monitoring", "BecomeMonitor",
					"asu");
	if (r < 0)
		return r;
	b1c_message_open(m, 'a', NULL);
	for (int i = 0; i < n_rules; i++)
		b1c_message_append(m, "s", rules[i]);
	b1c_message_close(m);
	b1c_message_append(m, "u", 0U);
	r = b1c_bus_call(bus, m, arg_timeout, &reply);
	b1c_message_unref(m);
	if (r == B1C_CALL_ERROR) {
		fprintf(stderr, "%s: %s\n", b1c_message_get_error_name(reply),
			b1c_message_get_error_text(reply));
		b1c_message_unref(reply);
		return -EACCES;
	}
	if (r < 0)
		return r;
	b1c_message_unref(reply);
	printf("monitoring as %s\n", b1c_bus_get_unique_name(bus));
	fflush(stdout);

	for (;;) {
		r = b1c_bus_process(bus);
		if (r < 0)
			return r == -ECONNRESET ? 0 : r;
		if (r > 0)
			continue;
		r = b1c_bus_wait(bus, UINT64_MAX);
		if (r < 0)
			return r == -ECONNRESET ? 0 : r;
	}
}

static void usage(void)
{
	fputs("usage: bus1ctl [--address ADDR] [--timeout SEC] COMMAND ...\n"
	      "  call DEST PATH IFACE.MEMBER [SIG [ARG...]]\n"
	      "  emit PATH IFACE.MEMBER [SIG [ARG...]]\n"
	      "  monitor [RULE...]\n"
	      "  list\n"
	      "  introspect DEST PATH\n"
	      "  name\n"
	      "  top [--once] [--interval SEC] [--rows N]\n", stderr);
}

static int do_top(int argc, char **argv)
{
	double interval = 2;
	unsigned int count = 0;
	size_t rows = 20;

	for (int i = 0; i < argc; i++) {
		if (!strcmp(argv[i], "--once")) {
			count = 1;
		} else if (!strcmp(argv[i], "--interval") && i + 1 < argc) {
			interval = strtod(argv[++i], NULL);
			if (!(interval > 0 && interval < 3600))
				interval = 2;
		} else if (!strcmp(argv[i], "--rows") && i + 1 < argc) {
			rows = strtoul(argv[++i], NULL, 10);
		} else {
			usage();
			return -EINVAL;
		}
	}
	return bus1ctl_top(arg_address, interval, count, rows);
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "address", required_argument, NULL, 'a' },
		{ "timeout", required_argument, NULL, 't' },
		{ "help", no_argument, NULL, 'h' },
		{}
	};
	struct b1c_bus *bus = NULL;
	const char *cmd;
	char *iface = NULL;
	const char *member;
	int c, r;

	while ((c = getopt_long(argc, argv, "+a:t:h", opts, NULL)) >= 0) {
		switch (c) {
		case 'a':
			arg_address = optarg;
			break;
		case 't':
			arg_timeout = (uint64_t)(strtod(optarg, NULL) * 1e6);
			break;
		case 'h':
			usage();
			return 0;
		default:
			usage();
			return 2;
		}
	}
	if (optind >= argc) {
		usage();
		return 2;
	}
	cmd = argv[optind++];
	argc -= optind;
	argv += optind;

	/* top reads the broker's statistics: the socket is enough, no /dev/bus1 needed. */
	if (!strcmp(cmd, "top"))
		return do_top(argc, argv) < 0 ? 1 : 0;

	r = b1c_bus_open(&bus, arg_address);
	if (r < 0) {
		print_failure("cannot connect natively", r);
		return 1;
	}

	if (!strcmp(cmd, "call") && argc >= 3) {
		r = split_member(argv[2], &iface, &member);
		if (r == 0)
			r = do_call(bus, argv[0], argv[1], iface, member, argc > 3 ? argv[3] : "",
				    argv + 4, argc > 4 ? argc - 4 : 0);
	} else if (!strcmp(cmd, "emit") && argc >= 2) {
		struct b1c_message *m = NULL;
		const char *sig = argc > 2 ? argv[2] : "";

		r = split_member(argv[1], &iface, &member);
		if (r == 0)
			r = b1c_message_new_signal(&m, argv[0], iface, member, sig);
		if (r == 0)
			r = append_args(m, sig, argv + 3, argc > 3 ? argc - 3 : 0);
		if (r == 0)
			r = b1c_bus_send(bus, m, NULL);
		b1c_message_unref(m);
		/* A round trip so the signal has been routed before we disconnect. */
		if (r == 0)
			r = do_call(bus, "org.freedesktop.DBus", "/org/freedesktop/DBus",
				    "org.freedesktop.DBus.Peer", "Ping", "", NULL, 0);
	} else if (!strcmp(cmd, "monitor")) {
		r = do_monitor(bus, argv, argc);
	} else if (!strcmp(cmd, "list") && argc == 0) {
		r = do_call(bus, "org.freedesktop.DBus", "/org/freedesktop/DBus",
			    "org.freedesktop.DBus", "ListNames", "", NULL, 0);
	} else if (!strcmp(cmd, "introspect") && argc == 2) {
		struct b1c_message *m = NULL, *reply = NULL;
		const char *xml = NULL;

		r = b1c_message_new_method_call(&m, argv[0], argv[1],
						"org.freedesktop.DBus.Introspectable",
						"Introspect", "");
		if (r == 0)
			r = b1c_bus_call(bus, m, arg_timeout, &reply);
		b1c_message_unref(m);
		if (r == B1C_CALL_ERROR) {
			fprintf(stderr, "%s: %s\n", b1c_message_get_error_name(reply),
				b1c_message_get_error_text(reply));
			r = -EREMOTEIO;
		} else if (r == 0) {
			r = b1c_message_read(reply, "s", &xml);
			if (r == 0)
				fputs(xml, stdout);
		}
		b1c_message_unref(reply);
	} else if (!strcmp(cmd, "name") && argc == 0) {
		printf("%s\n", b1c_bus_get_unique_name(bus));
		r = 0;
	} else {
		usage();
		r = -EINVAL;
	}
	free(iface);
	b1c_bus_free(bus);
	if (r < 0 && r != -EREMOTEIO && r != -EINVAL)
		print_failure(NULL, r);
	return r < 0 ? 1 : 0;
}
