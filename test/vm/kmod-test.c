/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Runner and helpers for the guest tests (see kmod-test.h).
 */

#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "kmod-test.h"
#include "time-factor.h"

static const char *kt_current = "?";

/* A failed check (check.h) names the case before its child aborts. */
void check_failure_hook(void)
{
	fprintf(stderr, "  [%s] failed\n", kt_current);
	fflush(stderr);
}

int kt_soft_failures;

void kt_note_at(const char *file, int line, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "  [%s] %s:%d: ", kt_current, file, line);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	fflush(stderr);
}

void kt_log(const char *fmt, ...)
{
	va_list ap;

	fprintf(stdout, "  [%s] ", kt_current);
	va_start(ap, fmt);
	vfprintf(stdout, fmt, ap);
	va_end(ap);
	fputc('\n', stdout);
	fflush(stdout);
}

int kt_open_peer(void)
{
	int fd = open("/dev/bus1", O_RDWR | O_CLOEXEC | O_NONBLOCK);

	if (fd < 0)
		CHECK_FAIL("open(/dev/bus1): %m");
	return fd;
}

static uint64_t kt_state = 0x9e3779b97f4a7c15ULL;

void kt_srand(uint64_t seed)
{
	kt_state = seed ? seed : 0x9e3779b97f4a7c15ULL;
}

uint64_t kt_rand(void)
{
	/* xorshift64*: reproducible from the printed seed. */
	kt_state ^= kt_state >> 12;
	kt_state ^= kt_state << 25;
	kt_state ^= kt_state >> 27;
	return kt_state * 0x2545f4914f6cdd1dULL;
}

double kt_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

unsigned int kt_time_factor(void)
{
	unsigned int factor = test_time_factor();
	const char *e;

	/*
	 * run-guest.sh's time factor (how much slower than the reference this machine is now),
	 * times the suite's own (-Dvm_timeout_factor: the debug kernel is several times slower).
	 */
	e = getenv("KT_TIMEOUT_FACTOR");
	if (e && atoi(e) > 1)
		factor *= atoi(e);
	return factor;
}

int kt_main(const struct kt_case *cases, size_t n_cases, int argc, char **argv)
{
	const char *only = argc > 1 ? argv[1] : NULL;
	size_t i, n_run = 0, n_failed = 0;
	unsigned int factor = kt_time_factor();

	setvbuf(stdout, NULL, _IOLBF, 0);
	if (access("/dev/bus1", F_OK) < 0) {
		if (getenv("BUS1_VM_GUEST")) {
			printf("FAIL: /dev/bus1 does not exist in the guest\n");
			return 1;
		}
		printf("SKIP: /dev/bus1 does not exist (run through test/vm/run-guest.sh)\n");
		return 77;
	}

	for (i = 0; i < n_cases; i++) {
		double t0 = kt_now();
		int status;
		pid_t pid;

		if (only && strcmp(only, cases[i].name))
			continue;
		++n_run;
		fflush(NULL);
		pid = fork();
		if (pid < 0) {
			perror("fork");
			return 1;
		}
		if (pid == 0) {
			setpgid(0, 0);
			kt_current = cases[i].name;
			kt_srand(getpid() ^ (uint64_t)time(NULL));
			alarm((cases[i].timeout_s ? cases[i].timeout_s : 60) * factor);
			cases[i].fn();
			fflush(NULL);
			_exit(kt_soft_failures ? 1 : 0);
		}
		if (waitpid(pid, &status, 0) < 0) {
			perror("waitpid");
			return 1;
		}
		if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
			printf("ok %zu %s (%.2fs)\n", i + 1, cases[i].name, kt_now() - t0);
		} else {
			++n_failed;
			if (WIFSIGNALED(status))
				printf("FAIL %zu %s: killed by signal %s\n", i + 1, cases[i].name,
				       sigabbrev_np(WTERMSIG(status)) ?: "?");
			else
				printf("FAIL %zu %s: exit status %d\n", i + 1, cases[i].name,
				       WEXITSTATUS(status));
		}
		/* Whatever the case forked must not outlive it. */
		kill(-pid, SIGKILL);
	}
	if (only && !n_run) {
		printf("no case named %s\n", only);
		return 1;
	}
	printf("%zu/%zu passed\n", n_run - n_failed, n_run);
	return n_failed ? 1 : 0;
}

struct b1_peer *kt_peer(void)
{
	struct b1_peer *peer;
	int r;

	r = b1_peer_new(&peer);
	if (r < 0)
		CHECK_FAIL("b1_peer_new: %s", strerror(-r));
	return peer;
}

void kt_node(struct b1_peer *owner, struct b1_peer *holder, uint64_t *owner_h,
	     uint64_t *holder_h)
{
	uint64_t h = BUS1_HANDLE_CREATE, d = BUS1_HANDLE_INVALID;
	int r;

	r = b1_peer_handle_transfer(owner, holder, &h, &d);
	if (r < 0)
		CHECK_FAIL("HANDLE_TRANSFER(CREATE): %s", strerror(-r));
	if (owner_h)
		*owner_h = h;
	if (holder_h)
		*holder_h = d;
}

int kt_send(struct b1_peer *peer, uint64_t dst, const void *data, size_t len)
{
	struct iovec v = { .iov_base = (void *)data, .iov_len = len };

	return b1_peer_send(peer, 0, &dst, 1, NULL, &v, 1, NULL, 0, NULL, 0);
}

void kt_recv(struct b1_peer *peer, uint64_t flags, struct b1_msg *msg)
{
	int r = b1_peer_recv(peer, flags, msg);

	if (r < 0)
		CHECK_FAIL("RECV: %s", strerror(-r));
}

void kt_recv_none(struct b1_peer *peer)
{
	struct b1_msg msg;
	int r = b1_peer_recv(peer, BUS1_RECV_FLAG_PEEK, &msg);

	if (r != -EAGAIN)
		CHECK_FAIL("RECV on an empty queue: expected EAGAIN, got %d (type %llu)", r,
			r ? 0ULL : (unsigned long long)msg.type);
}

void kt_query(struct b1_peer *peer, struct bus1_cmd_peer_query *q)
{
	int r = b1_peer_query(peer, q);

	if (r < 0)
		CHECK_FAIL("PEER_QUERY: %s", strerror(-r));
}

long long kt_read_ll(const char *path)
{
	char buf[64];
	ssize_t n;
	int fd;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0) {
		errno = n < 0 ? errno : ENODATA;
		return -1;
	}
	buf[n] = 0;
	return strtoll(buf, NULL, 10);
}

int kt_write_str(const char *path, const char *s)
{
	size_t len = strlen(s);
	ssize_t n;
	int fd, err;

	fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	n = write(fd, s, len);
	err = n < 0 ? errno : 0;
	close(fd);
	if (n < 0)
		return -err;
	return (size_t)n == len ? 0 : -EIO;
}

long long kt_meminfo_kb(const char *field)
{
	size_t len = strlen(field);
	long long v = -1;
	char line[256];
	FILE *f;

	f = fopen("/proc/meminfo", "re");
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		if (!strncmp(line, field, len) && line[len] == ':') {
			v = strtoll(line + len + 1, NULL, 10);
			break;
		}
	}
	fclose(f);
	return v;
}

void kt_become(uid_t uid)
{
	if (setgroups(0, NULL) < 0 || setresgid(uid, uid, uid) < 0 ||
	    setresuid(uid, uid, uid) < 0)
		CHECK_FAIL("becoming uid %u: %m", (unsigned int)uid);
}

void kt_report(const char *tag, const char *fmt, ...)
{
	va_list ap;

	fprintf(stdout, "%s: %s: ", tag, kt_current);
	va_start(ap, fmt);
	vfprintf(stdout, fmt, ap);
	va_end(ap);
	fputc('\n', stdout);
	fflush(stdout);
}
