/*
 * The library's recovering copies (client/libibverbs/guard.c): a fault of
 * ibvc_copy under ibvc_guarded fails the copy; any other fault while one
 * runs -- the guarded function's own, or one of a signal handler that
 * interrupted it -- is the process's, and reaches its own handler.
 */
#include "config.h"

#include <check.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/time.h>

#include "ibvd_verbs.h"

static char *page;		/* PROT_NONE until the app's handler opens it */
static long pagesize;
static volatile sig_atomic_t app_faults;
static volatile sig_atomic_t handler_done;

/* The app's SIGSEGV handler: opens the page, so the access goes on. */
static void app_segv(int sig, siginfo_t *si, void *uc)
{
	(void)sig;
	(void)uc;
	if ((char *)si->si_addr >= page && (char *)si->si_addr < page + pagesize) {
		app_faults++;
		mprotect(page, (size_t)pagesize, PROT_READ | PROT_WRITE);
		return;
	}
	abort();
}

/* The app's before the library's, as when it is installed at startup. */
static void setup(void)
{
	struct sigaction sa;

	app_faults = 0;
	handler_done = 0;
	pagesize = sysconf(_SC_PAGESIZE);
	page = mmap(NULL, (size_t)pagesize, PROT_NONE,
		    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ck_assert(page != MAP_FAILED);
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = app_segv;
	sa.sa_flags = SA_SIGINFO;
	ck_assert_int_eq(sigaction(SIGSEGV, &sa, NULL), 0);
	ck_assert(ibvc_guard_ready());
}

static void teardown(void)
{
	munmap(page, (size_t)pagesize);
}

/* ---- the copy's own fault ------------------------------------------------- */

START_TEST(copy_fault_fails_the_copy)
{
	char buf[64];

	ck_assert(!ibvc_guarded_copy(buf, page, sizeof(buf)));
	ck_assert_int_eq(app_faults, 0);
	/* and a copy that does not fault copies */
	ck_assert(ibvc_guarded_copy(buf, "copied", 7));
	ck_assert_str_eq(buf, "copied");
}
END_TEST

/* A file truncated under its mapping: SIGBUS in the copy, a failed copy. */
START_TEST(truncated_file_fails_the_copy)
{
	char path[] = "/tmp/test_guard.XXXXXX", buf[64];
	int fd = mkstemp(path);
	char *m;

	ck_assert_int_ge(fd, 0);
	unlink(path);
	ck_assert_int_eq(ftruncate(fd, pagesize * 2), 0);
	m = mmap(NULL, (size_t)pagesize * 2, PROT_READ, MAP_SHARED, fd, 0);
	ck_assert(m != MAP_FAILED);
	ck_assert_int_eq(ftruncate(fd, 0), 0);
	ck_assert(!ibvc_guarded_copy(buf, m + pagesize, sizeof(buf)));
	munmap(m, (size_t)pagesize * 2);
	close(fd);
}
END_TEST

/* ---- faults that are not the copy's --------------------------------------- */

static void touch_page(void *arg)
{
	(void)arg;
	*(volatile char *)page = 1;
}

/* The guarded function's own access (not through ibvc_copy): a bug of
 * ours, or the app's business; never taken for a gone mapping. */
START_TEST(own_fault_is_the_process_s)
{
	ck_assert(ibvc_guarded(touch_page, NULL));
	ck_assert_int_eq(app_faults, 1);
	ck_assert_int_eq(page[0], 1);
}
END_TEST

/*
 * A handler that interrupts the copy and faults: its fault goes to the
 * app's SIGSEGV handler, and it runs to its end.  The timer's signal is
 * taken for one that came during the copy when it came between the
 * copy's start and end; tried until one did.
 */
#define BIG_COPY	(64u << 20)

static volatile double handled_at;

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void app_alarm(int sig)
{
	(void)sig;
	handled_at = now_s();
	*(volatile char *)page = 2;	/* faults; the app's handler opens it */
	mprotect(page, (size_t)pagesize, PROT_NONE);	/* for the next try */
	handler_done++;
}

struct big_copy {
	char *dst, *src;
	double start, end;
};

static void timed_copy(void *arg)
{
	struct big_copy *c = arg;

	c->start = now_s();
	ibvc_copy(c->dst, c->src, BIG_COPY);
	c->end = now_s();
}

START_TEST(nested_handler_fault_is_the_process_s)
{
	struct itimerval one = { .it_value = { .tv_usec = 500 } };
	struct big_copy c = { 0 };
	struct sigaction sa;
	int tries, during = 0;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = app_alarm;
	ck_assert_int_eq(sigaction(SIGALRM, &sa, NULL), 0);
	c.src = malloc(BIG_COPY);
	c.dst = malloc(BIG_COPY);
	ck_assert(c.src && c.dst);
	memset(c.src, 'g', BIG_COPY);
	memset(c.dst, 0, BIG_COPY);	/* both faulted in: the copy is all copying */
	for (tries = 0; tries < 200 && !during; tries++) {
		int before = handler_done;

		ck_assert_int_eq(setitimer(ITIMER_REAL, &one, NULL), 0);
		ck_assert(ibvc_guarded(timed_copy, &c));
		while (handler_done == before)
			usleep(100);
		during = handled_at > c.start && handled_at < c.end;
	}
	ck_assert_msg(during, "no signal came during a copy in %d tries", tries);
	ck_assert_int_eq(app_faults, handler_done);
	ck_assert_int_eq(c.dst[BIG_COPY - 1], 'g');
	free(c.src);
	free(c.dst);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("guard");
	TCase *tc = tcase_create("guard");
	SRunner *sr;
	int failed;

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, copy_fault_fails_the_copy);
	tcase_add_test(tc, truncated_file_fails_the_copy);
	tcase_add_test(tc, own_fault_is_the_process_s);
	tcase_add_test(tc, nested_handler_fault_is_the_process_s);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
