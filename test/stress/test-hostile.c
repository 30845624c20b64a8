/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Hostile input after authentication, against a bus with the stock session
 * configuration (--session: its limits are huge, so only the protocol's own
 * bounds and the bus's hard caps stand in the way):
 *
 *   garbage bytes; a header announcing a 200 MiB body (over the spec's
 *   128 MiB maximum); a header announcing a 128 MiB header-field array;
 *   invalid UTF-8 in a body string and in the member name; 250 fds on one
 *   message; a flood of messages with 8 fds each at a client that does not
 *   read; a method call to /org/freedesktop/DBus/Local and a signal on the
 *   org.freedesktop.DBus.Local interface.
 *
 * Each offender must be cut off (or, for the fd flood, refused with
 * LimitsExceeded as docs/bus1-broker.1 says), nothing it sent may reach the
 * bystander, which keeps working, and the bus's fd count returns to where it
 * was.
 *
 *   test-hostile BUS_BINARY
 */

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "stress-common.h"

static struct sbus bus;
static struct rc by;
static int fds_base;
static long rss_base;

static char *marshal(DBusMessage *m, size_t *len)
{
	char *data = NULL, *out;
	int n = 0;

	dbus_message_set_serial(m, 2);
	CHECK(dbus_message_marshal(m, &data, &n), "marshal");
	out = malloc((size_t)n);
	CHECK(out, "oom");
	memcpy(out, data, (size_t)n);
	dbus_free(data);
	dbus_message_unref(m);
	*len = (size_t)n;
	return out;
}

static void patch(char *data, size_t len, const char *from, const char *to)
{
	char *p = memmem(data, len, from, strlen(from));

	CHECK(p, "'%s' not in the message", from);
	memcpy(p, to, strlen(to));
}

static void put_u32(char *p, uint32_t v)
{
	memcpy(p, &v, 4);	/* the messages are in host (little-endian) order */
}

/* The bystander works, got nothing from offenders, and the bus holds no extra fd. */
static void still_fine(const char *what)
{
	uint64_t deadline = now_usec() + 3000000;
	DBusMessage *m;
	int fds;

	CHECK(sbus_alive(&bus), "the bus died after: %s", what);
	rc_ping(&by);
	while ((m = rc_take(&by))) {
		CHECK(!dbus_message_has_interface(m, STRESS_IFACE) &&
		      !dbus_message_has_interface(m, "org.freedesktop.DBus.Local"),
		      "the bystander got %s.%s from an offender (%s)",
		      dbus_message_get_interface(m), dbus_message_get_member(m), what);
		dbus_message_unref(m);
	}
	while ((fds = proc_fd_count(bus.pid)) != fds_base) {
		CHECK(now_usec() < deadline, "the bus holds %d fds, %d before: %s", fds, fds_base,
		      what);
		usleep(10000);
	}
}

/* A fresh offender writes @data (with @fds) and must be disconnected within 3 s. */
static void expect_cut_off(const char *what, const void *data, size_t len, const int *fds,
			   size_t n_fds)
{
	struct rc c;
	uint64_t t0;

	rc_open(&c, &bus, n_fds > 0);
	t0 = now_usec();
	/* The bus may cut it off in the middle of the write: EPIPE is fine. */
	rc_write(&c, data, len, fds, n_fds);
	CHECK(rc_wait_closed(&c, 3000), "not disconnected after: %s", what);
	CHECK(now_usec() - t0 < 3000000, "slow");
	rc_close(&c);
	still_fine(what);
	printf("  %-58s cut off; bystander fine\n", what);
}

/* Cut off, or answered with an error (and then the message went nowhere). */
static void expect_cut_off_or_error(const char *what, const void *data, size_t len)
{
	struct rc c;
	DBusMessage *r;

	rc_open(&c, &bus, false);
	rc_write(&c, data, len, NULL, 0);
	r = rc_wait_reply(&c, 2, 3000);
	if (r) {
		CHECK(msg_error(r), "%s: the bus answered with success", what);
		printf("  %-58s error %s\n", what, msg_error(r));
		dbus_message_unref(r);
		rc_close(&c);
		still_fine(what);
		return;
	}
	CHECK(c.eof, "%s: neither an error nor a disconnect", what);
	rc_close(&c);
	still_fine(what);
	printf("  %-58s cut off; bystander fine\n", what);
}

/*
 * Fill @dest's socket with 1 MiB (it does not read), so that what comes next
 * stays queued in the bus instead of in the kernel's socket buffer.
 */
static void fill_socket(struct rc *src, const char *dest)
{
	size_t big = 128 * 1024;
	char *p = malloc(big + 1);

	CHECK(p, "oom");
	memset(p, 'f', big);
	p[big] = '\0';
	for (int i = 0; i < 8; i++) {
		DBusMessage *m = dbus_message_new_method_call(dest, "/", STRESS_IFACE, "Fill");

		dbus_message_append_args(m, DBUS_TYPE_STRING, &p, DBUS_TYPE_INVALID);
		dbus_message_set_no_reply(m, TRUE);
		CHECK(rc_send(src, m, NULL, 0), "send filler");
		dbus_message_unref(m);
	}
	free(p);
}

static void fd_flood(void)
{
	struct rc nr, src;
	int fds[8], n_limits = 0, peak = 0, sent = 0;
	uint64_t deadline;

	for (int i = 0; i < 8; i++)
		fds[i] = open("/dev/null", O_RDONLY | O_CLOEXEC);
	rc_open(&nr, &bus, true);		/* never reads */
	rc_open(&src, &bus, true);
	fill_socket(&src, nr.name);
	for (int i = 0; i < 250; i++) {
		DBusMessage *m = dbus_message_new_method_call(nr.name, "/", STRESS_IFACE, "Fds");
		DBusMessage *r;
		int n;

		for (int k = 0; k < 8; k++)
			dbus_message_append_args(m, DBUS_TYPE_UNIX_FD, &fds[k], DBUS_TYPE_INVALID);
		if (!rc_send(&src, m, fds, 8)) {
			dbus_message_unref(m);
			break;
		}
		sent++;
		dbus_message_unref(m);
		while (rc_fill(&src, 0) > 0)
			;
		while ((r = rc_take(&src))) {
			if (msg_error(r) && !strcmp(msg_error(r), DBUS_ERROR_LIMITS_EXCEEDED))
				n_limits++;
			dbus_message_unref(r);
		}
		if (i % 10 == 0) {
			n = proc_fd_count(bus.pid);
			peak = n > peak ? n : peak;
		}
	}
	deadline = now_usec() + 1000000;
	while (now_usec() < deadline) {
		DBusMessage *r = rc_recv(&src, 100);

		if (!r)
			continue;
		if (msg_error(r) && !strcmp(msg_error(r), DBUS_ERROR_LIMITS_EXCEEDED))
			n_limits++;
		dbus_message_unref(r);
	}
	printf("  fd flood: %d calls with 8 fds at a non-reader: %d refused with LimitsExceeded,"
	       " bus fds peaked at %d (%d idle)\n", sent, n_limits, peak, fds_base);
	CHECK(!src.eof, "the fd sender was disconnected");
	CHECK(n_limits > 0, "no LimitsExceeded for 2000 fds queued for a non-reader");
	/* docs: at most 1024 fds queued per connection, whatever the configuration. */
	CHECK(peak <= fds_base + 4 + 1024 + 8, "the bus held %d fds", peak);
	CHECK(rc_name_has_owner(&by, nr.name), "the non-reader was disconnected for calls");
	rc_close(&nr);
	rc_close(&src);
	for (int i = 0; i < 8; i++)
		close(fds[i]);
	still_fine("fd flood at a non-reader, then both leave");
	printf("  %-58s bystander fine, no fd left\n", "fd flood: both leave");
}

int main(int argc, char **argv)
{
	char garbage[4096], *data;
	size_t len;
	DBusMessage *m, *r;
	const char *s;
	int fds[250];
	long hwm;

	raise_nofile(4096);
	sbus_start(&bus, argc > 1 ? argv[1] : NULL, NULL, 0);
	rc_open(&by, &bus, false);
	by.keep = true;
	r = rc_driver_call(&by, "AddMatch", "type='signal',interface='" STRESS_IFACE "'");
	CHECK(!msg_error(r), "AddMatch");
	dbus_message_unref(r);
	r = rc_driver_call(&by, "AddMatch", "interface='org.freedesktop.DBus.Local'");
	CHECK(!msg_error(r), "AddMatch");
	dbus_message_unref(r);
	fds_base = proc_fd_count(bus.pid);
	rss_base = proc_status_kb(bus.pid, "VmRSS");
	printf("hostile clients against --session:\n");

	srand(42);
	for (size_t i = 0; i < sizeof(garbage); i++)
		garbage[i] = (char)rand();
	garbage[0] = 'l';
	expect_cut_off("4 KiB of garbage", garbage, sizeof(garbage), NULL, 0);

	/* A header announcing a 200 MiB body; only the header is sent. */
	m = dbus_message_new_signal("/", STRESS_IFACE, "Big");
	s = "x";
	dbus_message_append_args(m, DBUS_TYPE_STRING, &s, DBUS_TYPE_INVALID);
	data = marshal(m, &len);
	put_u32(data + 4, 200u << 20);
	expect_cut_off("header announcing a 200 MiB body", data, len - 6, NULL, 0);
	free(data);

	/* A header-field array of 128 MiB. */
	m = dbus_message_new_signal("/", STRESS_IFACE, "Big");
	data = marshal(m, &len);
	put_u32(data + 12, 128u << 20);
	expect_cut_off("header announcing 128 MiB of header fields", data, len, NULL, 0);
	free(data);
	hwm = proc_status_kb(bus.pid, "VmHWM");
	CHECK_MEM(hwm < rss_base + 64 * 1024, "the bus grew to %ld KiB for announced sizes", hwm);

	/* Invalid UTF-8 in a body string. */
	m = dbus_message_new_signal("/", STRESS_IFACE, "BadUtf8");
	s = "ok-AAAA-ok";
	dbus_message_append_args(m, DBUS_TYPE_STRING, &s, DBUS_TYPE_INVALID);
	data = marshal(m, &len);
	patch(data, len, "AAAA", "\xff\xfe\xc0\x80");
	expect_cut_off("invalid UTF-8 in a body string", data, len, NULL, 0);
	free(data);

	/* Invalid UTF-8 (and an invalid member name) in the header. */
	m = dbus_message_new_signal("/", STRESS_IFACE, "Bxxxd");
	data = marshal(m, &len);
	patch(data, len, "Bxxxd", "B\xc3\x28\xa0" "d");
	expect_cut_off("invalid UTF-8 in the member name", data, len, NULL, 0);
	free(data);

	/* 250 fds on one message. */
	for (int i = 0; i < 250; i++)
		fds[i] = open("/dev/null", O_RDONLY | O_CLOEXEC);
	m = dbus_message_new_signal("/", STRESS_IFACE, "Fds");
	dbus_message_append_args(m, DBUS_TYPE_UNIX_FD, &fds[0], DBUS_TYPE_INVALID);
	data = marshal(m, &len);
	/* Claim all 250 in the header: UNIX_FDS is the last field, a uint32 = 1. */
	{
		char *p = memmem(data, len, "\x09\x01u\x00\x01\x00\x00\x00", 8);

		CHECK(p, "no UNIX_FDS field");
		put_u32(p + 4, 250);
	}
	expect_cut_off("250 fds on one message", data, len, fds, 250);
	free(data);
	for (int i = 0; i < 250; i++)
		close(fds[i]);

	fd_flood();

	/* The reserved local path and interface. */
	m = dbus_message_new_method_call(DRIVER, "/org/freedesktop/DBus/Locax", DRIVER, "GetId");
	data = marshal(m, &len);
	patch(data, len, "DBus/Locax", "DBus/Local");
	expect_cut_off_or_error("call to /org/freedesktop/DBus/Local", data, len);
	free(data);
	m = dbus_message_new_signal("/", "org.freedesktop.DBus.Locax", "Disconnected");
	data = marshal(m, &len);
	patch(data, len, "DBus.Locax", "DBus.Local");
	expect_cut_off_or_error("signal on org.freedesktop.DBus.Local", data, len);
	free(data);

	printf("  bus VmHWM %ld KiB (VmRSS %ld KiB at start)\n", proc_status_kb(bus.pid, "VmHWM"),
	       rss_base);
	CHECK(rc_bus_stat(&by, "ActiveConnections") == 1, "connections left behind");
	CHECK(rc_bus_stat(&by, "IncompleteConnections") == 0, "incomplete connections left");
	rc_close(&by);
	sbus_stop(&bus);
	printf("ok\n");
	return 0;
}
