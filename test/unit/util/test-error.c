/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * util/error.h: error_origin() records where a fatal error arose (per
 * thread, the latest, negative errnos only) and hands the value back as it
 * was; assert_return() refuses a bad argument with the given value, changing
 * nothing, and says so through the hook only; assert_not_reached() aborts.
 */

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <syslog.h>
#include <unistd.h>
#include "util/error.h"
#include "check.h"

struct logged {
	int n;
	int priority;
	char text[512];
};

static void log_capture(void *userdata, int priority, const char *text)
{
	struct logged *l = userdata;

	l->n++;
	l->priority = priority;
	snprintf(l->text, sizeof(l->text), "%s", text);
}

static int fail_here(int r, int *linep)
{
	*linep = __LINE__ + 1;
	return error_origin(r);
}

static void test_origin(void)
{
	const struct error_origin *o;
	int line, r;

	error_origin_clear();
	CHECK(!error_origin_get());

	/* 0 and positive conditions pass untouched and record nothing */
	CHECK_EQ(error_origin(0), 0);
	CHECK_EQ(error_origin(3), 3);
	CHECK(!error_origin_get());

	r = fail_here(-EACCES, &line);
	CHECK_EQ(r, -EACCES);
	o = error_origin_get();
	CHECK(o);
	CHECK_EQ(o->error, -EACCES);
	CHECK_EQ(o->line, line);
	CHECK_STR(o->func, "fail_here");
	CHECK(strstr(o->file, "test-error.c"));

	/* the latest origin wins: an earlier one was handled, this one propagates */
	r = error_origin(-ENOENT);
	line = __LINE__ - 1;
	CHECK_EQ(r, -ENOENT);
	o = error_origin_get();
	CHECK_EQ(o->error, -ENOENT);
	CHECK_EQ(o->line, line);
	CHECK_STR(o->func, "test_origin");

	/* a condition after it leaves it alone */
	CHECK_EQ(error_origin(1), 1);
	CHECK_EQ(error_origin_get()->error, -ENOENT);

	error_origin_clear();
	CHECK(!error_origin_get());
}

static void *other_thread(void *arg)
{
	int *seen = arg;

	/* nothing of the main thread's record is visible here ... */
	*seen = error_origin_get() != NULL;
	/* ... and what this thread records stays here */
	(void)error_origin(-EIO);
	return NULL;
}

static void test_origin_per_thread(void)
{
	pthread_t t;
	int seen = -1;

	error_origin_clear();
	(void)error_origin(-EPERM);
	CHECK_EQ(pthread_create(&t, NULL, other_thread, &seen), 0);
	CHECK_EQ(pthread_join(t, NULL), 0);
	CHECK_EQ(seen, 0);
	CHECK_EQ(error_origin_get()->error, -EPERM);
	error_origin_clear();
}

static int take_positive(int x, int *out)
{
	assert_return(x > 0, -EINVAL);
	assert_return(out, -EINVAL);
	*out = x;
	return 0;
}

static const char *name_of(const char *s)
{
	assert_return(s && *s, NULL);
	return s;
}

static void set_flag(int *flag)
{
	assert_return(flag, );
	*flag = 1;
}

static void test_assert_return(void)
{
	struct logged l = {};
	int out = 7, flag = 0;

	/* no hook: refused quietly */
	CHECK_EQ(take_positive(0, &out), -EINVAL);
	CHECK_EQ(out, 7);

	error_set_assert_log(log_capture, &l);
	CHECK_EQ(take_positive(-1, &out), -EINVAL);
	CHECK_EQ(out, 7);
	CHECK_EQ(l.n, 1);
	CHECK_EQ(l.priority, LOG_DEBUG);
	CHECK(strstr(l.text, "'x > 0'"), "%s", l.text);
	CHECK(strstr(l.text, "take_positive()"), "%s", l.text);
	CHECK(strstr(l.text, "test-error.c:"), "%s", l.text);

	CHECK_EQ(take_positive(2, NULL), -EINVAL);
	CHECK(strstr(l.text, "'out'"), "%s", l.text);
	CHECK_EQ(l.n, 2);

	/* a check that holds says nothing */
	CHECK_EQ(take_positive(5, &out), 0);
	CHECK_EQ(out, 5);
	CHECK_EQ(l.n, 2);

	CHECK(!name_of(NULL));
	CHECK(!name_of(""));
	CHECK_STR(name_of("a"), "a");
	CHECK_EQ(l.n, 4);

	set_flag(NULL);
	CHECK_EQ(l.n, 5);
	set_flag(&flag);
	CHECK_EQ(flag, 1);

	/* argument checks are no fatal errors: nothing is recorded as one */
	error_origin_clear();
	CHECK_EQ(take_positive(0, &out), -EINVAL);
	CHECK(!error_origin_get());

	error_set_assert_log(NULL, NULL);
	CHECK_EQ(take_positive(0, &out), -EINVAL);
	CHECK_EQ(l.n, 6);
}

static int unreachable(int x)
{
	switch (x) {
	case 0:
		return 10;
	default:
		assert_not_reached();
	}
}

static void test_not_reached(void)
{
	int status;
	pid_t pid;

	CHECK_EQ(unreachable(0), 10);
	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		/* the message goes to stderr; keep the test's output clean */
		if (!freopen("/dev/null", "w", stderr))
			_exit(2);
		(void)unreachable(1);
		_exit(0);
	}
	CHECK_EQ(waitpid(pid, &status, 0), pid);
	CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT, "status 0x%x", status);
}

int main(void)
{
	test_origin();
	test_origin_per_thread();
	test_assert_return();
	test_not_reached();
	printf("error: ok\n");
	return 0;
}
