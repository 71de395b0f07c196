/*
 * The daemon's random numbers (daemon/core/random.c): drawn from a pool,
 * refilled past its end, and never shared between a process and a child
 * it forks (which would then hand out the same QP numbers and keys).
 */
#include <config.h>

#include <check.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/wait.h>

#include "core/random.h"
#include "tests/common/check_run.h"

#define DRAWS	1000

static int cmp32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

/* 1,000 draws over many refills: 32-bit values, no repeats to speak of. */
START_TEST(draws_go_on_past_the_pool)
{
	uint32_t v[DRAWS];
	unsigned int i, same = 0, high = 0;

	for (i = 0; i < DRAWS; i++) {
		v[i] = ibvd_random32();
		high += v[i] >> 31;
	}
	qsort(v, DRAWS, sizeof(v[0]), cmp32);
	for (i = 1; i < DRAWS; i++)
		same += v[i] == v[i - 1];
	/* a repeat among 1,000 has odds of about 1 in 8,600 */
	ck_assert_uint_le(same, 1);
	ck_assert_uint_gt(high, DRAWS / 4);
	ck_assert_uint_lt(high, DRAWS * 3 / 4);
}
END_TEST

/* A child of fork() must not draw what its parent draws next. */
START_TEST(a_child_draws_its_own)
{
	uint32_t mine[8], its[8];
	int fds[2], status;
	unsigned int i;
	pid_t pid;

	(void)ibvd_random32();		/* a pool is there to be copied */
	ck_assert_int_eq(pipe(fds), 0);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		for (i = 0; i < 8; i++)
			its[i] = ibvd_random32();
		_exit(write(fds[1], its, sizeof(its)) == sizeof(its) ? 0 : 1);
	}
	for (i = 0; i < 8; i++)
		mine[i] = ibvd_random32();
	ck_assert_int_eq(read(fds[0], its, sizeof(its)), (ssize_t)sizeof(its));
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	ck_assert_msg(memcmp(mine, its, sizeof(mine)) != 0,
		      "the child drew its parent's numbers");
	close(fds[0]);
	close(fds[1]);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("random");
	TCase *tc = tcase_create("pool");

	tcase_add_test(tc, draws_go_on_past_the_pool);
	tcase_add_test(tc, a_child_draws_its_own);
	suite_add_tcase(s, tc);
	return check_run(s, CK_NORMAL);
}
