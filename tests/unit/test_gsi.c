/*
 * QP1's mailbox (transport/gsi.c): bounded in all, and per sender, so
 * that one peer flooding QP1 leaves room for the others' MADs.
 */
#include "config.h"

#include <check.h>
#include <stdint.h>
#include <string.h>

#include "transport/gsi.h"
#include "tests/common/check_run.h"

/* A MAD from the remote GID whose last byte is `from`, numbered n. */
static struct ibvd_mad mad_from(uint8_t from, uint32_t n)
{
	struct ibvd_mad m;

	memset(&m, 0, sizeof(m));
	m.remote_gid[15] = from;
	m.remote_qpn = 1;
	memcpy(m.data, &n, sizeof(n));
	return m;
}

/* Take everything waiting: how many came from `from`, how many in all. */
static unsigned int drain(uint8_t from, unsigned int *all)
{
	struct ibvd_mad m;
	unsigned int n = 0;

	*all = 0;
	while (ibvd_gsi_take(&m)) {
		(*all)++;
		n += m.remote_gid[15] == from;
	}
	return n;
}

START_TEST(one_sender_gets_its_share)
{
	struct ibvd_mad m;
	uint64_t dropped;
	unsigned int i, all;

	ck_assert_int_ge(ibvd_gsi_fd(), 0);
	dropped = ibvd_gsi_dropped();
	for (i = 0; i < IBVD_GSI_INBOX_MAX; i++) {
		m = mad_from(7, i);
		ibvd_gsi_deliver(&m);
	}
	ck_assert_uint_eq(ibvd_gsi_dropped() - dropped,
			  IBVD_GSI_INBOX_MAX - IBVD_GSI_SOURCE_MAX);
	/* another peer's MAD still finds room, and comes after, in order */
	m = mad_from(8, 0);
	ibvd_gsi_deliver(&m);
	ck_assert_uint_eq(drain(7, &all), IBVD_GSI_SOURCE_MAX);
	ck_assert_uint_eq(all, IBVD_GSI_SOURCE_MAX + 1);
}
END_TEST

START_TEST(many_senders_fill_it)
{
	struct ibvd_mad m;
	uint64_t dropped;
	unsigned int i, all, senders = IBVD_GSI_INBOX_MAX / IBVD_GSI_SOURCE_MAX;

	ck_assert_int_ge(ibvd_gsi_fd(), 0);
	dropped = ibvd_gsi_dropped();
	for (i = 0; i < IBVD_GSI_INBOX_MAX + 10; i++) {
		m = mad_from((uint8_t)(i % (senders + 1)), i);
		ibvd_gsi_deliver(&m);
	}
	drain(0, &all);
	ck_assert_uint_eq(all, IBVD_GSI_INBOX_MAX);
	ck_assert_uint_eq(ibvd_gsi_dropped() - dropped, 10);
}
END_TEST

/* Taking or purging a MAD gives its sender's share back. */
START_TEST(shares_come_back)
{
	static char device;
	struct ibvd_device *dev = (struct ibvd_device *)(void *)&device;
	struct ibvd_mad m;
	uint64_t dropped;
	unsigned int i, round, all;

	ck_assert_int_ge(ibvd_gsi_fd(), 0);
	for (round = 0; round < 3; round++) {
		dropped = ibvd_gsi_dropped();
		for (i = 0; i < IBVD_GSI_SOURCE_MAX + 1; i++) {
			m = mad_from(9, i);
			m.dev = round == 1 ? dev : NULL;
			ibvd_gsi_deliver(&m);
		}
		ck_assert_uint_eq(ibvd_gsi_dropped() - dropped, 1);
		/* the second round leaves by its device's purge */
		if (round == 1)
			ibvd_gsi_purge(dev);
		ck_assert_uint_eq(drain(9, &all), round == 1 ? 0 : IBVD_GSI_SOURCE_MAX);
	}
}
END_TEST

/* Senders are told apart by the whole GID, not by a byte of it. */
START_TEST(senders_are_whole_gids)
{
	struct ibvd_mad m;
	uint64_t dropped;
	unsigned int i, all;

	ck_assert_int_ge(ibvd_gsi_fd(), 0);
	dropped = ibvd_gsi_dropped();
	for (i = 0; i < 2 * IBVD_GSI_SOURCE_MAX; i++) {
		m = mad_from(5, i);
		m.remote_gid[0] = (uint8_t)(i & 1);	/* two senders */
		ibvd_gsi_deliver(&m);
	}
	ck_assert_uint_eq(ibvd_gsi_dropped() - dropped, 0);
	ck_assert_uint_eq(drain(5, &all), 2 * IBVD_GSI_SOURCE_MAX);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("gsi");
	TCase *tc = tcase_create("inbox");

	tcase_add_test(tc, one_sender_gets_its_share);
	tcase_add_test(tc, many_senders_fill_it);
	tcase_add_test(tc, shares_come_back);
	tcase_add_test(tc, senders_are_whole_gids);
	suite_add_tcase(s, tc);
	return check_run(s, CK_NORMAL);
}
