/*
 * Every Check program ends the same way: run its suite, free the runner,
 * and exit non-zero when any check failed, so that make check sees it.
 */
#ifndef IBVD_TESTS_CHECK_RUN_H
#define IBVD_TESTS_CHECK_RUN_H

#include <check.h>
#include <stdlib.h>

static inline int check_run(Suite *suite, enum print_output mode)
{
	SRunner *runner = srunner_create(suite);
	int failed;

	srunner_run_all(runner, mode);
	failed = srunner_ntests_failed(runner);
	srunner_free(runner);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

#endif
