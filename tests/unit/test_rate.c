/*
 * The per-tenant token bucket (daemon/engine/rate.c) on a fake clock: the
 * engine passes "now" to every take, so time here is just a number.
 */
#include "config.h"

#include <check.h>
#include <stdint.h>

#include "daemon/engine/rate.h"

#define MS		(1000ull * 1000)
#define SEC		(1000ull * MS)
#define CHUNK		(128ull << 10)
#define T0		(1000 * SEC)	/* a monotonic clock is never near 0 */

static struct ibvd_eng_rate *r;

static void setup(void)
{
	r = ibvd_eng_rate_new();
	ck_assert_ptr_nonnull(r);
}

static void teardown(void)
{
	ibvd_eng_rate_put(r);
}

/* Send chunks as fast as allowed from `from` to `until`: bytes sent. */
static uint64_t drive(uint64_t from, uint64_t until)
{
	uint64_t now = from, sent = 0, wait;

	while (now < until) {
		wait = ibvd_eng_rate_take(r, CHUNK, now, CHUNK);
		if (wait) {
			ck_assert_uint_lt(wait, 10 * SEC);
			now += wait;
			continue;
		}
		sent += CHUNK;
	}
	return sent;
}

START_TEST(unlimited_never_waits)
{
	int i;

	ck_assert_uint_eq(ibvd_eng_rate_get_limit(r), IBVD_RATE_UNLIMITED);
	for (i = 0; i < 100000; i++)
		ck_assert_uint_eq(ibvd_eng_rate_take(r, CHUNK, T0, CHUNK), 0);
}
END_TEST

START_TEST(long_run_rate)
{
	/* 20 MB/s for 10 s: 200 MB, give or take the burst and one chunk. */
	uint64_t sent;

	ibvd_eng_rate_set(r, 20000000);
	sent = drive(T0, T0 + 10 * SEC);
	ck_assert_uint_ge(sent, 200000000 - CHUNK);
	ck_assert_uint_le(sent, 200000000 + 200000 + 2 * CHUNK);
}
END_TEST

START_TEST(burst_after_idle)
{
	/* 100 MB/s: 10 ms worth is 1 MB, at once, then a wait. */
	uint64_t sent = 0;

	ibvd_eng_rate_set(r, 100000000);
	while (!ibvd_eng_rate_take(r, CHUNK, T0, CHUNK))
		sent += CHUNK;
	ck_assert_uint_ge(sent, 1000000);
	ck_assert_uint_le(sent, 1000000 + 2 * CHUNK);
	/* Idle for a second: the bucket is full again, not 100 MB full. */
	sent = 0;
	while (!ibvd_eng_rate_take(r, CHUNK, T0 + SEC, CHUNK))
		sent += CHUNK;
	ck_assert_uint_le(sent, 1000000 + 2 * CHUNK);
}
END_TEST

START_TEST(burst_is_a_chunk_at_least)
{
	/* 1 MB/s: 10 ms is 10 KB, less than a chunk; one chunk still goes. */
	ibvd_eng_rate_set(r, 1000000);
	ck_assert_uint_eq(ibvd_eng_rate_take(r, CHUNK, T0, CHUNK), 0);
	ck_assert_uint_eq(ibvd_eng_rate_take(r, CHUNK, T0, CHUNK), 0);
	ck_assert_uint_gt(ibvd_eng_rate_take(r, CHUNK, T0, CHUNK), 0);
}
END_TEST

START_TEST(wait_is_exact)
{
	uint64_t wait;

	ibvd_eng_rate_set(r, 1000000);
	while (!ibvd_eng_rate_take(r, CHUNK, T0, CHUNK))
		;
	wait = ibvd_eng_rate_take(r, CHUNK, T0, CHUNK);
	/* Not yet one ns before; yes after. */
	ck_assert_uint_gt(ibvd_eng_rate_take(r, CHUNK, T0 + wait - 1, CHUNK), 0);
	ck_assert_uint_eq(ibvd_eng_rate_take(r, CHUNK, T0 + wait, CHUNK), 0);
}
END_TEST

START_TEST(new_limit_forgets_debt)
{
	ibvd_eng_rate_set(r, 1);	/* one byte per second: deep debt */
	ck_assert_uint_eq(ibvd_eng_rate_take(r, CHUNK, T0, CHUNK), 0);
	ck_assert_uint_eq(ibvd_eng_rate_take(r, CHUNK, T0, CHUNK), 0);
	ck_assert_uint_gt(ibvd_eng_rate_take(r, CHUNK, T0, CHUNK), 1000 * SEC);
	ibvd_eng_rate_set(r, 1000000000);
	ck_assert_uint_eq(ibvd_eng_rate_take(r, CHUNK, T0, CHUNK), 0);
	ibvd_eng_rate_set(r, IBVD_RATE_UNLIMITED);
	ck_assert_uint_eq(ibvd_eng_rate_take(r, CHUNK, T0, CHUNK), 0);
}
END_TEST

START_TEST(huge_take_no_overflow)
{
	ibvd_eng_rate_set(r, 1000);
	ck_assert_uint_eq(ibvd_eng_rate_take(r, UINT64_MAX, T0, CHUNK), 0);
	ck_assert_uint_gt(ibvd_eng_rate_take(r, 1, T0, CHUNK), 0);
}
END_TEST

START_TEST(references)
{
	struct ibvd_eng_rate *again = ibvd_eng_rate_ref(r);

	ck_assert_ptr_eq(again, r);
	ibvd_eng_rate_put(again);
	ibvd_eng_rate_put(NULL);
	/* r is still alive: teardown drops the last reference. */
	ibvd_eng_rate_set(r, 5);
	ck_assert_uint_eq(ibvd_eng_rate_get_limit(r), 5);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("rate");
	TCase *tc = tcase_create("bucket");
	SRunner *sr;
	int failed;

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, unlimited_never_waits);
	tcase_add_test(tc, long_run_rate);
	tcase_add_test(tc, burst_after_idle);
	tcase_add_test(tc, burst_is_a_chunk_at_least);
	tcase_add_test(tc, wait_is_exact);
	tcase_add_test(tc, new_limit_forgets_debt);
	tcase_add_test(tc, huge_take_no_overflow);
	tcase_add_test(tc, references);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
