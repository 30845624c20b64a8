/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * bus1ctl top: bus1.ko's per-user usage, beside the broker's (see
 * bus1ctl-top-kernel.h and kmod/debugfs.h for the file's format).
 */

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include "bus1ctl-top.h"
#include "bus1ctl-top-kernel.h"

#define KMOD_PARAMS "/sys/module/bus1/parameters"
#define KMOD_DEBUGFS "/sys/kernel/debug/bus1"
#define KMOD_USERS_HEADER "uid peers bytes messages handles fds objects\n"

/* The columns of a user's line after the uid, with the quota that limits each. */
enum {
	KCOL_PEERS,
	KCOL_BYTES,
	KCOL_MESSAGES,
	KCOL_HANDLES,
	KCOL_FDS,
	KCOL_OBJECTS,
	KCOL_N,
};

static const struct {
	const char *name;	/* for CLOSEST */
	const char *quota;	/* module parameter, NULL: not limited */
} kcols[KCOL_N] = {
	[KCOL_PEERS]	= { "Peers", NULL },
	[KCOL_BYTES]	= { "Bytes", "quota_bytes" },
	[KCOL_MESSAGES]	= { "Messages", "quota_messages" },
	[KCOL_HANDLES]	= { "Handles", "quota_handles" },
	[KCOL_FDS]	= { "FDs", "quota_fds" },
	[KCOL_OBJECTS]	= { "Objects", "quota_objects" },
};

static int read_u64_file(const char *path, uint64_t *v)
{
	FILE *f = fopen(path, "re");
	int r;

	if (!f)
		return -errno;
	r = fscanf(f, "%" SCNu64, v) == 1 ? 0 : -EBADMSG;
	fclose(f);
	return r;
}

/* The bus-wide counters: "peers 3, nodes 2, ..." from the objects file, or nothing. */
static void print_objects(FILE *f)
{
	char line[128], key[64];
	bool first = true;
	long long v;
	FILE *o = fopen(KMOD_DEBUGFS "/objects", "re");

	if (!o)
		return;
	while (fgets(line, sizeof(line), o))
		if (sscanf(line, "%63s %lld", key, &v) == 2) {
			fprintf(f, "%s%s %lld", first ? ": " : ", ", key, v);
			first = false;
		}
	fclose(o);
}

void top_kernel_print(FILE *f)
{
	uint64_t quota[KCOL_N] = {};
	char line[256], b1[16], b2[16];
	FILE *u;

	if (access("/sys/module/bus1", F_OK) < 0) {
		fputs("\nbus1.ko: not loaded\n", f);
		return;
	}
	for (int i = 0; i < KCOL_N; i++) {
		char path[128];

		if (!kcols[i].quota)
			continue;
		snprintf(path, sizeof(path), KMOD_PARAMS "/%s", kcols[i].quota);
		if (read_u64_file(path, &quota[i]) < 0)
			quota[i] = 0;
	}
	u = fopen(KMOD_DEBUGFS "/users", "re");
	if (!u) {
		fprintf(f, "\nbus1.ko: per-user usage unreadable: %s/users: %s (root only, with "
			   "debugfs mounted)\n", KMOD_DEBUGFS, strerror(errno));
		return;
	}
	fputs("\nbus1.ko", f);
	print_objects(f);
	fputc('\n', f);
	if (!fgets(line, sizeof(line), u) || strcmp(line, KMOD_USERS_HEADER)) {
		fprintf(f, "bus1.ko: %s/users: a format this bus1ctl does not know\n",
			KMOD_DEBUGFS);
		fclose(u);
		return;
	}
	fprintf(f, "%-8s %6s %9s %9s %8s %8s %6s %8s  %s\n", "KUID", "PEERS", "BYTES",
		"MAXBYTES", "MESSAGES", "HANDLES", "FDS", "OBJECTS", "CLOSEST");
	while (fgets(line, sizeof(line), u)) {
		uint64_t c[KCOL_N], pct = 0;
		unsigned int uid;
		int closest = -1;

		if (sscanf(line, "%u %" SCNu64 " %" SCNu64 " %" SCNu64 " %" SCNu64 " %" SCNu64
			   " %" SCNu64, &uid, &c[KCOL_PEERS], &c[KCOL_BYTES], &c[KCOL_MESSAGES],
			   &c[KCOL_HANDLES], &c[KCOL_FDS], &c[KCOL_OBJECTS]) != 7)
			continue;
		for (int i = 0; i < KCOL_N; i++) {
			uint64_t p;

			if (!quota[i])
				continue;
			p = c[i] * 100 / quota[i];
			if (closest < 0 || p > pct) {
				closest = i;
				pct = p;
			}
		}
		fprintf(f, "%-8u %6" PRIu64 " %9s %9s %8" PRIu64 " %8" PRIu64 " %6" PRIu64 " %8"
			PRIu64 "  ", uid, c[KCOL_PEERS], top_human(c[KCOL_BYTES], b1, sizeof(b1)),
			top_human(quota[KCOL_BYTES], b2, sizeof(b2)), c[KCOL_MESSAGES],
			c[KCOL_HANDLES], c[KCOL_FDS], c[KCOL_OBJECTS]);
		if (closest >= 0)
			fprintf(f, "%s %" PRIu64 "%%\n", kcols[closest].name, pct);
		else
			fputs("-\n", f);
	}
	fclose(u);
}
