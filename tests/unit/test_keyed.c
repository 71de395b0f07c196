/*
 * Tables of objects by number (daemon/core/keyed.c): found after any
 * growth, removed from any place in a chain, several under one key, and
 * chains that stay short however many objects there are.
 */
#include "config.h"

#include <check.h>
#include <stdlib.h>

#include "core/keyed.h"
#include "tests/common/check_run.h"

#define MANY	100000u

static uint32_t next_rand(uint32_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 17;
	*s ^= *s << 5;
	return *s;
}

static unsigned int longest_chain(const struct ibvd_keyed_table *t)
{
	unsigned int i, longest = 0;

	for (i = 0; i < 1u << t->bits; i++) {
		unsigned int n = 0;
		const struct ibvd_keyed *k;

		for (k = t->b[i]; k; k = k->next)
			n++;
		if (n > longest)
			longest = n;
	}
	return longest;
}

START_TEST(many_found_after_growth)
{
	struct ibvd_keyed_table t = { 0 };
	struct ibvd_keyed *nodes = calloc(MANY, sizeof(*nodes));
	uint32_t i, s = 12345;

	ck_assert_ptr_nonnull(nodes);
	for (i = 0; i < MANY; i++)
		ck_assert_int_eq(ibvd_keyed_insert(&t, &nodes[i], next_rand(&s)), 0);
	ck_assert_uint_eq(t.count, MANY);
	ck_assert_uint_ge(2u << t.bits, MANY);
	ck_assert_uint_le(longest_chain(&t), 16);
	for (i = 0; i < MANY; i++)
		ck_assert_ptr_nonnull(ibvd_keyed_find(&t, nodes[i].key));
	/* every other one goes; the rest are still found, the gone are not */
	for (i = 0; i < MANY; i += 2)
		ibvd_keyed_remove(&t, &nodes[i]);
	ck_assert_uint_eq(t.count, MANY / 2);
	for (i = 0; i < MANY; i++) {
		struct ibvd_keyed *k = ibvd_keyed_find(&t, nodes[i].key);

		while (k && k != &nodes[i])
			k = ibvd_keyed_next(k);
		ck_assert(i % 2 ? k == &nodes[i] : k == NULL);
	}
	ibvd_keyed_free(&t);
	free(nodes);
}
END_TEST

START_TEST(one_key_many_nodes)
{
	struct ibvd_keyed_table t = { .min_bits = 2 };
	struct ibvd_keyed n[5], other, *k;
	unsigned int i, seen;

	for (i = 0; i < 5; i++)
		ck_assert_int_eq(ibvd_keyed_insert(&t, &n[i], 7), 0);
	ck_assert_int_eq(ibvd_keyed_insert(&t, &other, 8), 0);
	ck_assert_uint_eq(t.bits, 2);
	/* out of the middle, the head and the tail of the chain */
	ibvd_keyed_remove(&t, &n[2]);
	ibvd_keyed_remove(&t, &n[4]);
	ibvd_keyed_remove(&t, &n[0]);
	for (seen = 0, k = ibvd_keyed_find(&t, 7); k; k = ibvd_keyed_next(k)) {
		ck_assert(k == &n[1] || k == &n[3]);
		seen++;
	}
	ck_assert_uint_eq(seen, 2);
	ck_assert_ptr_eq(ibvd_keyed_find(&t, 8), &other);
	ck_assert_ptr_null(ibvd_keyed_find(&t, 9));
	ibvd_keyed_remove(&t, &n[1]);
	ibvd_keyed_remove(&t, &n[3]);
	ibvd_keyed_remove(&t, &other);
	ck_assert_uint_eq(t.count, 0);
	ck_assert_ptr_null(ibvd_keyed_find(&t, 7));
	ibvd_keyed_free(&t);
	ck_assert_ptr_null(ibvd_keyed_find(&t, 7));
}
END_TEST

int main(void)
{
	Suite *s = suite_create("keyed");
	TCase *tc = tcase_create("tables");

	tcase_add_test(tc, many_found_after_growth);
	tcase_add_test(tc, one_key_many_nodes);
	suite_add_tcase(s, tc);
	return check_run(s, CK_NORMAL);
}
