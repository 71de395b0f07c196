/*
 * Per-connection handle tables (daemon/handle.c).
 */
#include "config.h"

#include <check.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/core/handle.h"
#include "tests/common/check_run.h"

static struct ibvd_handle_table t;
static int objs[64];		/* distinct addresses to store */

static void setup(void)
{
	ibvd_handle_table_init(&t, 0);
}

static void teardown(void)
{
	ibvd_handle_table_release(&t);
}

static uint32_t alloc_ok(enum ibvd_obj_kind kind, void *obj)
{
	uint32_t h = 0;

	ck_assert_int_eq(ibvd_handle_alloc(&t, kind, obj, &h), 0);
	ck_assert_uint_ne(h, 0);
	return h;
}

/* ---- basics ----------------------------------------------------------- */

START_TEST(test_alloc_lookup_remove)
{
	uint32_t pd = alloc_ok(IBVD_OBJ_PD, &objs[0]);
	uint32_t cq = alloc_ok(IBVD_OBJ_CQ, &objs[1]);

	ck_assert_uint_ne(pd, cq);
	ck_assert_ptr_eq(ibvd_handle_lookup(&t, pd, IBVD_OBJ_PD), &objs[0]);
	ck_assert_ptr_eq(ibvd_handle_lookup(&t, cq, IBVD_OBJ_CQ), &objs[1]);
	ck_assert_uint_eq(ibvd_handle_count(&t, IBVD_OBJ_ANY), 2);
	ck_assert_uint_eq(ibvd_handle_count(&t, IBVD_OBJ_PD), 1);
	ck_assert_uint_eq(ibvd_handle_count(&t, IBVD_OBJ_QP), 0);

	ck_assert_ptr_eq(ibvd_handle_remove(&t, pd, IBVD_OBJ_PD), &objs[0]);
	ck_assert_ptr_null(ibvd_handle_lookup(&t, pd, IBVD_OBJ_PD));
	ck_assert_ptr_eq(ibvd_handle_lookup(&t, cq, IBVD_OBJ_CQ), &objs[1]);
	ck_assert_uint_eq(ibvd_handle_count(&t, IBVD_OBJ_ANY), 1);
	ck_assert_uint_eq(ibvd_handle_count(&t, IBVD_OBJ_PD), 0);
}
END_TEST

START_TEST(test_invalid_arguments)
{
	uint32_t h = 12345;

	ck_assert_int_eq(ibvd_handle_alloc(&t, IBVD_OBJ_ANY, &objs[0], &h), -EINVAL);
	ck_assert_int_eq(ibvd_handle_alloc(&t, IBVD_OBJ_KIND_MAX, &objs[0], &h), -EINVAL);
	ck_assert_int_eq(ibvd_handle_alloc(&t, IBVD_OBJ_PD, NULL, &h), -EINVAL);
	/* Failure leaves the out-parameter alone. */
	ck_assert_uint_eq(h, 12345);
	ck_assert_uint_eq(ibvd_handle_count(&t, IBVD_OBJ_KIND_MAX), 0);
}
END_TEST

START_TEST(test_empty_table)
{
	ck_assert_ptr_null(ibvd_handle_lookup(&t, 0, IBVD_OBJ_PD));
	ck_assert_ptr_null(ibvd_handle_lookup(&t, 1u << IBVD_HANDLE_INDEX_BITS,
					      IBVD_OBJ_PD));
	ck_assert_ptr_null(ibvd_handle_remove(&t, 1u << IBVD_HANDLE_INDEX_BITS,
					      IBVD_OBJ_PD));
	ck_assert_uint_eq(ibvd_handle_count(&t, IBVD_OBJ_ANY), 0);
}
END_TEST

/* ---- stale, forged, wrong kind ---------------------------------------- */

START_TEST(test_stale_handle)
{
	uint32_t old = alloc_ok(IBVD_OBJ_QP, &objs[0]);
	uint32_t new;

	ck_assert_ptr_eq(ibvd_handle_remove(&t, old, IBVD_OBJ_QP), &objs[0]);
	/* Same slot reused: same index, newer generation. */
	new = alloc_ok(IBVD_OBJ_QP, &objs[1]);
	ck_assert_uint_eq(new & IBVD_HANDLE_INDEX_MASK, old & IBVD_HANDLE_INDEX_MASK);
	ck_assert_uint_ne(new, old);
	ck_assert_ptr_null(ibvd_handle_lookup(&t, old, IBVD_OBJ_QP));
	ck_assert_ptr_null(ibvd_handle_remove(&t, old, IBVD_OBJ_QP));
	ck_assert_ptr_eq(ibvd_handle_lookup(&t, new, IBVD_OBJ_QP), &objs[1]);
}
END_TEST

START_TEST(test_double_remove)
{
	uint32_t h = alloc_ok(IBVD_OBJ_MR, &objs[0]);

	ck_assert_ptr_eq(ibvd_handle_remove(&t, h, IBVD_OBJ_MR), &objs[0]);
	ck_assert_ptr_null(ibvd_handle_remove(&t, h, IBVD_OBJ_MR));
	ck_assert_uint_eq(ibvd_handle_count(&t, IBVD_OBJ_MR), 0);
}
END_TEST

START_TEST(test_forged_handles)
{
	uint32_t h = alloc_ok(IBVD_OBJ_PD, &objs[0]);
	uint32_t index = h & IBVD_HANDLE_INDEX_MASK;
	uint32_t gen = h >> IBVD_HANDLE_INDEX_BITS;
	uint32_t i;

	/* Generation 0 never names anything, not even slot 0. */
	ck_assert_ptr_null(ibvd_handle_lookup(&t, index, IBVD_OBJ_PD));
	ck_assert_ptr_null(ibvd_handle_lookup(&t, 0, IBVD_OBJ_PD));
	/* Right index, wrong generation. */
	ck_assert_ptr_null(ibvd_handle_lookup(&t, (gen + 1) << IBVD_HANDLE_INDEX_BITS | index,
					      IBVD_OBJ_PD));
	/* Right generation, index of an unused or non-existent slot. */
	ck_assert_ptr_null(ibvd_handle_lookup(&t, gen << IBVD_HANDLE_INDEX_BITS | (index + 1),
					      IBVD_OBJ_PD));
	ck_assert_ptr_null(ibvd_handle_lookup(&t, gen << IBVD_HANDLE_INDEX_BITS |
					      IBVD_HANDLE_INDEX_MASK, IBVD_OBJ_PD));
	ck_assert_ptr_null(ibvd_handle_lookup(&t, UINT32_MAX, IBVD_OBJ_PD));
	/* A sweep of arbitrary values finds only the one real handle. */
	srand(1);
	for (i = 0; i < 100000; i++) {
		uint32_t v = (uint32_t)rand() ^ ((uint32_t)rand() << 16);

		if (v != h)
			ck_assert_ptr_null(ibvd_handle_lookup(&t, v, IBVD_OBJ_PD));
	}
	ck_assert_ptr_eq(ibvd_handle_lookup(&t, h, IBVD_OBJ_PD), &objs[0]);
}
END_TEST

START_TEST(test_kind_mismatch)
{
	uint32_t qp = alloc_ok(IBVD_OBJ_QP, &objs[0]);
	int k;

	for (k = IBVD_OBJ_ANY; k <= IBVD_OBJ_KIND_MAX; k++)
		if (k != IBVD_OBJ_QP)
			ck_assert_ptr_null(ibvd_handle_lookup(&t, qp, (enum ibvd_obj_kind)k));
	/* Removing with the wrong kind neither succeeds nor harms. */
	ck_assert_ptr_null(ibvd_handle_remove(&t, qp, IBVD_OBJ_CQ));
	ck_assert_ptr_eq(ibvd_handle_lookup(&t, qp, IBVD_OBJ_QP), &objs[0]);
	ck_assert_uint_eq(ibvd_handle_count(&t, IBVD_OBJ_QP), 1);
}
END_TEST

/* Two connections' tables never see each other's handles. */
START_TEST(test_tables_are_separate)
{
	struct ibvd_handle_table other;
	uint32_t h = alloc_ok(IBVD_OBJ_PD, &objs[0]);
	uint32_t h2;

	ibvd_handle_table_init(&other, 0);
	ck_assert_ptr_null(ibvd_handle_lookup(&other, h, IBVD_OBJ_PD));
	ck_assert_int_eq(ibvd_handle_alloc(&other, IBVD_OBJ_PD, &objs[1], &h2), 0);
	/* Same value in both tables, but each names its own object. */
	ck_assert_uint_eq(h, h2);
	ck_assert_ptr_eq(ibvd_handle_lookup(&other, h2, IBVD_OBJ_PD), &objs[1]);
	ck_assert_ptr_eq(ibvd_handle_lookup(&t, h, IBVD_OBJ_PD), &objs[0]);
	ibvd_handle_table_release(&other);
}
END_TEST

/* ---- growth, capacity, reuse ------------------------------------------ */

START_TEST(test_growth)
{
	enum { N = 100000 };
	uint32_t *h = malloc(N * sizeof(*h));
	char *base = malloc(N);
	uint32_t i;

	for (i = 0; i < N; i++)
		h[i] = alloc_ok(i % 2 ? IBVD_OBJ_MR : IBVD_OBJ_CQ, base + i);
	ck_assert_uint_eq(ibvd_handle_count(&t, IBVD_OBJ_ANY), N);
	ck_assert_uint_eq(ibvd_handle_count(&t, IBVD_OBJ_MR), N / 2);
	for (i = 0; i < N; i++)
		ck_assert_ptr_eq(ibvd_handle_lookup(&t, h[i], i % 2 ? IBVD_OBJ_MR :
						    IBVD_OBJ_CQ), base + i);
	/* Indices are dense: the table hands out low slots first. */
	for (i = 0; i < N; i++)
		ck_assert_uint_eq(h[i] & IBVD_HANDLE_INDEX_MASK, i);
	free(h);
	free(base);
}
END_TEST

START_TEST(test_capacity)
{
	struct ibvd_handle_table small;
	uint32_t h[5], extra = 0;
	int i;

	ibvd_handle_table_init(&small, 5);
	for (i = 0; i < 5; i++)
		ck_assert_int_eq(ibvd_handle_alloc(&small, IBVD_OBJ_AH, &objs[i], &h[i]), 0);
	ck_assert_int_eq(ibvd_handle_alloc(&small, IBVD_OBJ_AH, &objs[5], &extra), -ENOSPC);
	ck_assert_uint_eq(extra, 0);
	ck_assert_ptr_eq(ibvd_handle_remove(&small, h[2], IBVD_OBJ_AH), &objs[2]);
	ck_assert_int_eq(ibvd_handle_alloc(&small, IBVD_OBJ_AH, &objs[5], &extra), 0);
	ck_assert_uint_eq(extra & IBVD_HANDLE_INDEX_MASK, h[2] & IBVD_HANDLE_INDEX_MASK);
	ibvd_handle_table_release(&small);
}
END_TEST

START_TEST(test_reuse_after_free)
{
	uint32_t a = alloc_ok(IBVD_OBJ_PD, &objs[0]);
	uint32_t b = alloc_ok(IBVD_OBJ_PD, &objs[1]);
	uint32_t c;

	ibvd_handle_remove(&t, a, IBVD_OBJ_PD);
	/* The freed slot comes back before the table grows. */
	c = alloc_ok(IBVD_OBJ_CQ, &objs[2]);
	ck_assert_uint_eq(c & IBVD_HANDLE_INDEX_MASK, a & IBVD_HANDLE_INDEX_MASK);
	ck_assert_uint_eq(c >> IBVD_HANDLE_INDEX_BITS, (a >> IBVD_HANDLE_INDEX_BITS) + 1);
	ck_assert_ptr_null(ibvd_handle_lookup(&t, a, IBVD_OBJ_PD));
	ck_assert_ptr_null(ibvd_handle_lookup(&t, c, IBVD_OBJ_PD));
	ck_assert_ptr_eq(ibvd_handle_lookup(&t, b, IBVD_OBJ_PD), &objs[1]);
}
END_TEST

/*
 * A slot whose generation runs out is retired: no handle value ever names
 * two objects.  With one slot, the table is exhausted after GEN_MAX uses.
 */
START_TEST(test_generation_exhaustion)
{
	struct ibvd_handle_table one;
	unsigned char *seen = calloc(1u << (32 - IBVD_HANDLE_INDEX_BITS), 1);
	uint32_t h, uses = 0;

	ibvd_handle_table_init(&one, 1);
	while (ibvd_handle_alloc(&one, IBVD_OBJ_PD, &objs[0], &h) == 0) {
		uint32_t gen = h >> IBVD_HANDLE_INDEX_BITS;

		ck_assert_uint_ne(gen, 0);
		ck_assert_msg(!seen[gen], "handle 0x%08x handed out twice", h);
		seen[gen] = 1;
		ck_assert_ptr_eq(ibvd_handle_remove(&one, h, IBVD_OBJ_PD), &objs[0]);
		ck_assert_ptr_null(ibvd_handle_lookup(&one, h, IBVD_OBJ_PD));
		uses++;
	}
	ck_assert_uint_eq(uses, IBVD_HANDLE_GEN_MAX);
	ck_assert_int_eq(ibvd_handle_alloc(&one, IBVD_OBJ_PD, &objs[0], &h), -ENOSPC);
	ibvd_handle_table_release(&one);
	free(seen);
}
END_TEST

START_TEST(test_release_and_reuse_table)
{
	uint32_t h = alloc_ok(IBVD_OBJ_PD, &objs[0]);

	ibvd_handle_table_release(&t);
	ck_assert_uint_eq(ibvd_handle_count(&t, IBVD_OBJ_ANY), 0);
	ck_assert_ptr_null(ibvd_handle_lookup(&t, h, IBVD_OBJ_PD));
	alloc_ok(IBVD_OBJ_PD, &objs[1]);
}
END_TEST

/* ---- foreach ---------------------------------------------------------- */

struct walk {
	unsigned int visits;
	uint32_t stop_after;	/* 0: never */
	int remove;		/* remove what we visit */
	struct ibvd_handle_table *table;
};

static int walk_fn(uint32_t handle, enum ibvd_obj_kind kind, void *obj, void *arg)
{
	struct walk *w = arg;

	ck_assert_ptr_eq(ibvd_handle_lookup(w->table, handle, kind), obj);
	w->visits++;
	if (w->remove)
		ck_assert_ptr_eq(ibvd_handle_remove(w->table, handle, kind), obj);
	if (w->stop_after && w->visits == w->stop_after)
		return 42;
	return 0;
}

/* 10 QPs (objs[0], [3], ...; their handles in qps unless NULL), 20 MRs. */
static void fill_mixed_qps(uint32_t *qps)
{
	uint32_t h;
	int i;

	for (i = 0; i < 30; i++) {
		h = alloc_ok(i % 3 == 0 ? IBVD_OBJ_QP : IBVD_OBJ_MR, &objs[i]);
		if (qps && i % 3 == 0)
			qps[i / 3] = h;
	}
}

static void fill_mixed(void)
{
	fill_mixed_qps(NULL);
}

START_TEST(test_foreach_kind)
{
	struct walk w = { .table = &t };

	fill_mixed();
	ck_assert_int_eq(ibvd_handle_foreach(&t, IBVD_OBJ_QP, walk_fn, &w), 0);
	ck_assert_uint_eq(w.visits, 10);
	w.visits = 0;
	ck_assert_int_eq(ibvd_handle_foreach(&t, IBVD_OBJ_ANY, walk_fn, &w), 0);
	ck_assert_uint_eq(w.visits, 30);
	w.visits = 0;
	ck_assert_int_eq(ibvd_handle_foreach(&t, IBVD_OBJ_SRQ, walk_fn, &w), 0);
	ck_assert_uint_eq(w.visits, 0);
}
END_TEST

START_TEST(test_foreach_remove)
{
	struct walk w = { .table = &t, .remove = 1 };

	fill_mixed();
	ck_assert_int_eq(ibvd_handle_foreach(&t, IBVD_OBJ_MR, walk_fn, &w), 0);
	ck_assert_uint_eq(w.visits, 20);
	ck_assert_uint_eq(ibvd_handle_count(&t, IBVD_OBJ_MR), 0);
	ck_assert_uint_eq(ibvd_handle_count(&t, IBVD_OBJ_QP), 10);
	/* Destroy-everything, as a closing context does. */
	w.visits = 0;
	ck_assert_int_eq(ibvd_handle_foreach(&t, IBVD_OBJ_ANY, walk_fn, &w), 0);
	ck_assert_uint_eq(w.visits, 10);
	ck_assert_uint_eq(ibvd_handle_count(&t, IBVD_OBJ_ANY), 0);
}
END_TEST

/* The walk counts what it has left to find: holes and other kinds skip. */
START_TEST(test_foreach_holes)
{
	struct walk w = { .table = &t };
	uint32_t qps[10];
	int i;

	fill_mixed_qps(qps);
	/* Only the last QP is left, behind nine holes and twenty MRs. */
	for (i = 0; i < 9; i++)
		ck_assert_ptr_eq(ibvd_handle_remove(&t, qps[i], IBVD_OBJ_QP),
				 &objs[i * 3]);
	ck_assert_int_eq(ibvd_handle_foreach(&t, IBVD_OBJ_QP, walk_fn, &w), 0);
	ck_assert_uint_eq(w.visits, 1);
	w.visits = 0;
	ck_assert_int_eq(ibvd_handle_foreach(&t, IBVD_OBJ_MR, walk_fn, &w), 0);
	ck_assert_uint_eq(w.visits, 20);
}
END_TEST

START_TEST(test_foreach_stop)
{
	struct walk w = { .table = &t, .stop_after = 5 };

	fill_mixed();
	ck_assert_int_eq(ibvd_handle_foreach(&t, IBVD_OBJ_ANY, walk_fn, &w), 42);
	ck_assert_uint_eq(w.visits, 5);
}
END_TEST

static Suite *handle_suite(void)
{
	Suite *s = suite_create("handle");
	TCase *tc;

	tc = tcase_create("basics");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_alloc_lookup_remove);
	tcase_add_test(tc, test_invalid_arguments);
	tcase_add_test(tc, test_empty_table);
	suite_add_tcase(s, tc);

	tc = tcase_create("checks");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_stale_handle);
	tcase_add_test(tc, test_double_remove);
	tcase_add_test(tc, test_forged_handles);
	tcase_add_test(tc, test_kind_mismatch);
	tcase_add_test(tc, test_tables_are_separate);
	suite_add_tcase(s, tc);

	tc = tcase_create("storage");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_growth);
	tcase_add_test(tc, test_capacity);
	tcase_add_test(tc, test_reuse_after_free);
	tcase_add_test(tc, test_generation_exhaustion);
	tcase_add_test(tc, test_release_and_reuse_table);
	suite_add_tcase(s, tc);

	tc = tcase_create("foreach");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_foreach_kind);
	tcase_add_test(tc, test_foreach_remove);
	tcase_add_test(tc, test_foreach_holes);
	tcase_add_test(tc, test_foreach_stop);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return check_run(handle_suite(), CK_NORMAL);
}
