/*
 * The copy watch's looking thread (daemon/engine/watch/copy_describe.c)
 * stops when told, even when the stop comes between its look at the stop
 * flag and its sleep: a stop that only set the flag and woke the futex
 * could find nobody asleep yet, and the thread then slept for ever, with
 * the daemon's exit joining it (a daemon late after SIGTERM).
 *
 * The futex calls of copy_describe.c are wrapped (-Wl,--wrap): a wait on
 * the looker's word first says so and pauses, which holds that window
 * open for the stop.
 */
#include "config.h"

#include <check.h>
#include <errno.h>
#include <linux/futex.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>
#include <unistd.h>

#include "daemon/engine/watch/copy_watch.h"
#include "tests/common/check_run.h"

long __real_ibvd_copy_futex(uint32_t *word, int op, uint32_t val,
			    const struct timespec *timeout);
long __wrap_ibvd_copy_futex(uint32_t *word, int op, uint32_t val,
			    const struct timespec *timeout);

static bool about_to_wait;	/* atomic */

long __wrap_ibvd_copy_futex(uint32_t *word, int op, uint32_t val,
			    const struct timespec *timeout)
{
	if (op == FUTEX_WAIT_PRIVATE) {
		__atomic_store_n(&about_to_wait, true, __ATOMIC_RELEASE);
		usleep(100 * 1000);
	}
	return __real_ibvd_copy_futex(word, op, val, timeout);
}

static bool stopped;		/* atomic */

static void *stopper_main(void *arg)
{
	(void)arg;
	ibvd_copy_look_stop();
	__atomic_store_n(&stopped, true, __ATOMIC_RELEASE);
	return NULL;
}

/* The stop lands while the looker is between its check and its sleep. */
START_TEST(stop_before_sleep)
{
	pthread_t stopper;
	int i;

	__atomic_store_n(&about_to_wait, false, __ATOMIC_RELAXED);
	__atomic_store_n(&stopped, false, __ATOMIC_RELAXED);
	ck_assert_int_eq(ibvd_copy_look_start(), 0);
	for (i = 0; i < 500 && !__atomic_load_n(&about_to_wait, __ATOMIC_ACQUIRE); i++)
		usleep(10 * 1000);
	ck_assert_msg(__atomic_load_n(&about_to_wait, __ATOMIC_ACQUIRE),
		      "the looking thread never went to sleep");
	ck_assert_int_eq(pthread_create(&stopper, NULL, stopper_main, NULL), 0);
	for (i = 0; i < 300 && !__atomic_load_n(&stopped, __ATOMIC_ACQUIRE); i++)
		usleep(10 * 1000);
	ck_assert_msg(__atomic_load_n(&stopped, __ATOMIC_ACQUIRE),
		      "ibvd_copy_look_stop did not return within 3 s");
	pthread_join(stopper, NULL);
}
END_TEST

/* Started again after a stop, it stops again. */
START_TEST(restart)
{
	int i;

	for (i = 0; i < 3; i++) {
		ck_assert_int_eq(ibvd_copy_look_start(), 0);
		usleep(20 * 1000);
		ibvd_copy_look_stop();
	}
}
END_TEST

int main(void)
{
	Suite *s = suite_create("copy_watch");
	TCase *tc = tcase_create("looker");

	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, stop_before_sleep);
	tcase_add_test(tc, restart);
	suite_add_tcase(s, tc);
	return check_run(s, CK_NORMAL);
}
