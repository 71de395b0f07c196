/*
 * The per-tenant token bucket (daemon/core/rate.c) on a fake clock: the
 * engine passes "now" to every take, so time here is just a number.
 */
#include "config.h"

#include <check.h>
#include <stdint.h>

#include "daemon/core/rate.h"
#include "tests/common/check_run.h"

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

/* A take at `now` on a new bucket, which waits: the bucket starts empty. */
static void start_empty(uint64_t now)
{
	ck_assert_uint_gt(ibvd_eng_rate_take(r, CHUNK, now, CHUNK), 0);
}

/* Chunks that go at once at `now`. */
static uint64_t burst_at(uint64_t now)
{
	uint64_t sent = 0;

	while (!ibvd_eng_rate_take(r, CHUNK, now, CHUNK))
		sent += CHUNK;
	return sent;
}

START_TEST(new_bucket_starts_empty)
{
	/* 100 MB/s: a chunk costs 1.31 ms; the first one waits exactly that. */
	uint64_t cost = (CHUNK * SEC + 100000000 - 1) / 100000000;

	ibvd_eng_rate_set(r, 100000000);
	ck_assert_uint_eq(ibvd_eng_rate_take(r, CHUNK, T0, CHUNK), cost);
	ck_assert_uint_eq(ibvd_eng_rate_take(r, CHUNK, T0 + cost - 1, CHUNK), 1);
	ck_assert_uint_eq(ibvd_eng_rate_take(r, CHUNK, T0 + cost, CHUNK), 0);
	ck_assert_uint_gt(ibvd_eng_rate_take(r, CHUNK, T0 + cost, CHUNK), 0);
}
END_TEST

START_TEST(burst_is_exact)
{
	/* 1 GB/s: the burst is 10 ms, 10 MB: 76 chunks fit, a 77th does not. */
	ibvd_eng_rate_set(r, 1000000000);
	start_empty(T0);
	ck_assert_uint_eq(burst_at(T0 + SEC), 76 * CHUNK);
	/* Idle for a minute: still the burst, not a minute's worth. */
	ck_assert_uint_eq(burst_at(T0 + 61 * SEC), 76 * CHUNK);
}
END_TEST

START_TEST(burst_after_idle)
{
	/* 100 MB/s: 10 ms worth is 1 MB, at once, then a wait. */
	uint64_t sent;

	ibvd_eng_rate_set(r, 100000000);
	start_empty(T0);
	sent = burst_at(T0 + SEC);
	ck_assert_uint_le(sent, 1000000);
	ck_assert_uint_gt(sent, 1000000 - CHUNK);
}
END_TEST

START_TEST(burst_is_a_chunk_at_least)
{
	/* 1 MB/s: 10 ms is 10 KB, less than a chunk; one chunk still goes. */
	ibvd_eng_rate_set(r, 1000000);
	start_empty(T0);
	ck_assert_uint_eq(burst_at(T0 + 100 * SEC), CHUNK);
}
END_TEST

START_TEST(take_over_the_burst_goes_alone)
{
	/* Chunking off: 64 MiB at 1 MB/s is 67 s, more than any burst. */
	uint64_t big = 64ull << 20;
	uint64_t wait;

	ibvd_eng_rate_set(r, 1000000);
	wait = ibvd_eng_rate_take(r, big, T0, CHUNK);
	ck_assert_uint_gt(wait, 60 * SEC);
	ck_assert_uint_eq(ibvd_eng_rate_take(r, big, T0 + wait, CHUNK), 0);
	ck_assert_uint_gt(ibvd_eng_rate_take(r, 1, T0 + wait, CHUNK), 0);
}
END_TEST

START_TEST(wait_is_exact)
{
	uint64_t wait;

	ibvd_eng_rate_set(r, 1000000);
	start_empty(T0);
	burst_at(T0 + 100 * SEC);
	wait = ibvd_eng_rate_take(r, CHUNK, T0 + 100 * SEC, CHUNK);
	/* Not yet one ns before; yes after. */
	ck_assert_uint_gt(ibvd_eng_rate_take(r, CHUNK, T0 + 100 * SEC + wait - 1,
					     CHUNK), 0);
	ck_assert_uint_eq(ibvd_eng_rate_take(r, CHUNK, T0 + 100 * SEC + wait,
					     CHUNK), 0);
}
END_TEST

START_TEST(new_limit_forgets_debt)
{
	uint64_t wait;

	ibvd_eng_rate_set(r, 1);	/* one byte per second: deep debt */
	ck_assert_uint_gt(ibvd_eng_rate_take(r, CHUNK, T0, CHUNK), 1000 * SEC);
	/* A new limit: empty, but paid at its own rate, not the old one's. */
	ibvd_eng_rate_set(r, 1000000000);
	wait = ibvd_eng_rate_take(r, CHUNK, T0, CHUNK);
	ck_assert_uint_gt(wait, 0);
	ck_assert_uint_lt(wait, MS);
	ck_assert_uint_eq(ibvd_eng_rate_take(r, CHUNK, T0 + wait, CHUNK), 0);
	ibvd_eng_rate_set(r, IBVD_RATE_UNLIMITED);
	ck_assert_uint_eq(ibvd_eng_rate_take(r, CHUNK, T0, CHUNK), 0);
}
END_TEST

/* Copies sent without a take are debt: the next take waits them off. */
START_TEST(charge_is_debt)
{
	uint64_t wait;

	ibvd_eng_rate_set(r, 1000000);	/* 1 MB/s */
	start_empty(T0);
	burst_at(T0 + 100 * SEC);
	/* 10 copies of a chunk: 10 chunks' time owed past the burst */
	ibvd_eng_rate_charge(r, 10 * CHUNK, T0 + 100 * SEC);
	wait = ibvd_eng_rate_take(r, CHUNK, T0 + 100 * SEC, CHUNK);
	ck_assert_uint_ge(wait, 10 * CHUNK * SEC / 1000000);
	ck_assert_uint_le(wait, 11 * CHUNK * SEC / 1000000 + 1);
	ck_assert_uint_eq(ibvd_eng_rate_take(r, CHUNK, T0 + 100 * SEC + wait, CHUNK), 0);
	/* an unlimited bucket owes nothing */
	ibvd_eng_rate_set(r, IBVD_RATE_UNLIMITED);
	ibvd_eng_rate_charge(r, 1ull << 40, T0);
	ck_assert_uint_eq(ibvd_eng_rate_take(r, CHUNK, T0, CHUNK), 0);
}
END_TEST

/* What the limit saw: takes that went and charges, while it was set. */
START_TEST(paid_counts_what_went)
{
	uint64_t wait;

	ck_assert_uint_eq(ibvd_eng_rate_take(r, CHUNK, T0, CHUNK), 0);
	ibvd_eng_rate_charge(r, CHUNK, T0);
	ck_assert_uint_eq(ibvd_eng_rate_paid(r), 0);	/* unlimited */
	ibvd_eng_rate_set(r, 1000000);
	/* a new limit's bucket starts empty: this take waits, unpaid */
	wait = ibvd_eng_rate_take(r, CHUNK, T0, CHUNK);
	ck_assert_uint_gt(wait, 0);
	ck_assert_uint_eq(ibvd_eng_rate_paid(r), 0);
	ck_assert_uint_eq(ibvd_eng_rate_take(r, CHUNK, T0 + wait, CHUNK), 0);
	ck_assert_uint_eq(ibvd_eng_rate_paid(r), CHUNK);
	ibvd_eng_rate_charge(r, 3 * CHUNK, T0 + wait);
	ck_assert_uint_eq(ibvd_eng_rate_paid(r), 4 * CHUNK);
}
END_TEST

START_TEST(huge_take_no_overflow)
{
	uint64_t wait;

	ibvd_eng_rate_set(r, 1000);
	wait = ibvd_eng_rate_take(r, UINT64_MAX, T0, CHUNK);
	ck_assert_uint_gt(wait, 0);
	ck_assert_uint_eq(ibvd_eng_rate_take(r, UINT64_MAX, T0 + wait, CHUNK), 0);
	ck_assert_uint_gt(ibvd_eng_rate_take(r, 1, T0 + wait, CHUNK), 0);
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

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, unlimited_never_waits);
	tcase_add_test(tc, long_run_rate);
	tcase_add_test(tc, new_bucket_starts_empty);
	tcase_add_test(tc, burst_is_exact);
	tcase_add_test(tc, burst_after_idle);
	tcase_add_test(tc, burst_is_a_chunk_at_least);
	tcase_add_test(tc, take_over_the_burst_goes_alone);
	tcase_add_test(tc, wait_is_exact);
	tcase_add_test(tc, new_limit_forgets_debt);
	tcase_add_test(tc, charge_is_debt);
	tcase_add_test(tc, paid_counts_what_went);
	tcase_add_test(tc, huge_take_no_overflow);
	tcase_add_test(tc, references);
	suite_add_tcase(s, tc);
	return check_run(s, CK_NORMAL);
}
