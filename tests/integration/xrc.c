/*
 * xrc-helper: XRC against a real daemon (xrc.sh).
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <infiniband/verbs.h>

#include "vt.h"

static struct vt_dev D;

static void setup(void)
{
	vt_open(&D);
}

static void teardown(void)
{
	vt_close(&D);
}

START_TEST(xrcd_private)
{
	struct ibv_xrcd_init_attr a = {
		.comp_mask = IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS,
		.fd = -1,
	};
	struct ibv_xrcd *x = ibv_open_xrcd(D.ctx, &a);

	ck_assert_ptr_nonnull(x);
	ck_assert_int_eq(ibv_close_xrcd(x), 0);
}
END_TEST

static Suite *xrc_suite(void)
{
	Suite *s = suite_create("xrc");
	TCase *tc = tcase_create("xrc");

	tcase_set_timeout(tc, 30.0 * vt_tmul());
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, xrcd_private);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(xrc_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
