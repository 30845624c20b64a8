/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * What the themes of test-hostile (test-hostile.c: the cases and their table; hostile-*.c:
 * one theme each) share: the users they act as, the raw peers, the jobs that run as another
 * user, and the cases themselves. The helpers are in hostile-common.c.
 */

#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "check.h"
#include "kmod-test.h"

#define REPORT(...) kt_report("hostile", __VA_ARGS__)

enum { UID_A = 1000, UID_B = 1001 };
enum { MiB = 1 << 20 };

#define PARAM_DIR "/sys/module/bus1/parameters/"

/* A uAPI header older than the message type still builds the cases that use it. */
#ifndef BUS1_MSG_NODE_RELEASE
#define BUS1_MSG_NODE_RELEASE 3
#endif

/* Raw peers: an fd and its pool, mapped. */
struct hpeer {
	int fd;
	const uint8_t *pool;
	size_t size;
};

int xioctl(int fd, unsigned long cmd, void *arg);
int query(int fd, struct bus1_cmd_peer_query *q);
void query_objects(int fd, struct bus1_cmd_peer_query *q);
void query_objects_as(uid_t uid, int fd, struct bus1_cmd_peer_query *q);
struct hpeer hp_from_fd(int fd);
struct hpeer hp_open(void);
struct hpeer hp_open_as(uid_t uid);
void hp_close(struct hpeer *p);
int hp_transfer(int fd, uint64_t *src, int dst_fd, uint64_t *dst);
uint64_t hp_node(struct hpeer *owner, struct hpeer *holder, uint64_t *holder_h);
uint64_t hp_give(struct hpeer *from, uint64_t h, struct hpeer *to);
int hp_release(int fd, uint64_t h);
int hp_destroy(int fd, uint64_t h);
int hp_send(int fd, uint64_t flags, const uint64_t *dests, size_t n_dests, uint32_t *errors,
	    const void *data, size_t len, uint64_t *handles, size_t n_handles, const int *fds,
	    size_t n_fds);
int hp_send1(int fd, uint64_t dst, const void *data, size_t len, int carry_fd);
int hp_recv(int fd, uint64_t flags, struct bus1_cmd_recv *cmd);
int hp_slice_release(int fd, uint64_t offset);
const uint8_t *hp_data(const struct hpeer *p, const struct bus1_cmd_recv *c);
const uint64_t *hp_handles(const struct hpeer *p, const struct bus1_cmd_recv *c);
const int *hp_fds(const struct hpeer *p, const struct bus1_cmd_recv *c);
void hp_recv_wait(struct hpeer *p, struct bus1_cmd_recv *c, int ms);
size_t hp_drain(struct hpeer *p);

/* What a job child reports back. */
struct result {
	int r;			/* 0 or -errno of the call under test */
	int line;		/* 0, or where a check in the child failed */
	double t;		/* seconds the call took */
	uint64_t v[5];		/* case-specific values */
};

struct job {
	pid_t pid;
	int rfd;		/* read end of the result pipe */
	double t0;
	bool done;
	struct result res;
};

struct job job_start(uid_t uid, void (*fn)(void *arg, struct result *res), void *arg);
bool job_wait(struct job *j, int ms);

/* Processes, pipes, files, module parameters. */
char proc_state(pid_t pid);
void proc_stack(pid_t pid, char *out, size_t size);
void send_fd(int sock, int fd);
int recv_fd(int sock, int flags);
long long refcnt(void);
bool debug_kernel(void);
void with_param(const char *name, const char *value, void (*fn)(void));
void with_debug_param(const char *name, const char *value, void (*fn)(void));
int cmp_double(const void *a, const void *b);

/* The cases, in the order of test-hostile.c's table. */
void cycle_leak(void);		/* hostile-gc.c */
void cycle_pair(void);
void cycle_listen(void);
void cycle_alive(void);
void unix_socket_pass(void);
void recv_stall(void);		/* hostile-stall.c */
void send_stall(void);
void memcg_nodes(void);		/* hostile-limits.c */
void memcg_destroy(void);
void memcg_release(void);
void quota_objects(void);
void multicast_hol(void);	/* hostile-stall.c */
void node_release(void);	/* hostile-nodes.c */
void node_release_dropped(void);
void destroyed_in_flight(void);
void pool_size_param(void);
void flush_race(void);
void slice_bound(void);		/* hostile-limits.c */
void gc_stall(void);		/* hostile-gc.c */
void notify_bound(void);	/* hostile-limits.c */
void gc_starve(void);		/* hostile-gc.c */
void gc_unix_latency(void);
