/*
 * The transit ring (common/transit.c): what the sender writes the receiver
 * reads back in order, byte for byte, across the ring's end and the
 * counters' wrap; and what a hostile sender or receiver writes into the
 * shared memory never makes the other side read or write outside the ring.
 * The leases on one-sided direct access (common/lease.c): a revocation
 * returns only once a copy under the lease ended, and a copy begun after
 * it is refused.
 */
#include "config.h"

#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "transit.h"
#include "tests/common/check_run.h"

#define NCELLS	64u		/* 4 KiB: small, so the ring wraps often */

static struct ibvd_transit_ctl ctl;
static uint8_t *cells;
static struct ibvd_transit tx;	/* the sender's view */
static struct ibvd_transit rx;	/* the receiver's: the same memory */

static void setup(void)
{
	memset(&ctl, 0, sizeof(ctl));
	cells = calloc(NCELLS, IBVD_TRANSIT_CELL);
	ck_assert_ptr_nonnull(cells);
	ibvd_transit_init(&tx, &ctl, cells, NCELLS);
	ibvd_transit_init(&rx, &ctl, cells, NCELLS);
}

static void teardown(void)
{
	free(cells);
}

/* A deterministic generator, so a failure can be replayed. */
static uint32_t rnd_state = 12345;
static uint32_t rnd(void)
{
	rnd_state = rnd_state * 1103515245u + 12345u;
	return rnd_state >> 8;
}

static void fill(uint8_t *p, uint32_t len, uint32_t tag)
{
	uint32_t i;

	for (i = 0; i < len; i++)
		p[i] = (uint8_t)(tag * 31 + i);
}

static int send_frag(uint32_t *produced, uint32_t consumed, uint16_t kind,
		     uint16_t flags, const uint8_t *data, uint32_t len)
{
	struct ibvd_transit_frag f = {
		.kind = kind, .flags = flags, .len = len, .msg_len = len,
		.imm = 0xabcd, .wr_id = len,
	};
	struct iovec iov[2] = {
		{ .iov_base = (void *)data, .iov_len = len / 2 },
		{ .iov_base = (void *)(data + len / 2), .iov_len = len - len / 2 },
	};

	return ibvd_transit_write(&tx, produced, consumed, &f, iov, 2);
}

START_TEST(geometry)
{
	ck_assert(ibvd_transit_geometry_ok(64));
	ck_assert(ibvd_transit_geometry_ok(1u << 20));
	ck_assert(!ibvd_transit_geometry_ok(0));
	ck_assert(!ibvd_transit_geometry_ok(32));
	ck_assert(!ibvd_transit_geometry_ok(96));
	ck_assert(!ibvd_transit_geometry_ok(1u << 21));
	ck_assert_uint_eq(ibvd_transit_frag_cells(0), 1);
	ck_assert_uint_eq(ibvd_transit_frag_cells(32), 1);
	ck_assert_uint_eq(ibvd_transit_frag_cells(33), 2);
}
END_TEST

/*
 * Messages of random sizes, the receiver taking a random number of them
 * each round, starting near the counters' wrap: all arrive in order, with
 * their bytes, headers and no PAD ever seen.
 */
static void stream(uint32_t start)
{
	uint32_t produced = start, consumed = start, sent = 0, got = 0;
	static uint8_t out[4096], want[4096];

	while (got < 3000) {
		uint32_t n = rnd() % 4;

		while (n-- && sent < 3000) {
			uint32_t len = rnd() % 1500;
			uint32_t room = ibvd_transit_room(&tx, produced, consumed);
			int ret;

			fill(out, len, sent);
			ret = send_frag(&produced, consumed, IBVD_TRANSIT_SEND,
					IBVD_TRANSIT_FIRST | IBVD_TRANSIT_LAST,
					out, len);
			/* room says exactly whether it fits */
			ck_assert_int_eq(ret, room && len <= room ? 0 : -EAGAIN);
			if (ret == 0)
				sent++;
			ibvd_transit_publish(&tx, produced);
		}
		n = rnd() % 4;
		while (n--) {
			struct ibvd_transit_frag f;
			const uint8_t *payload;
			uint32_t next;
			int ret = ibvd_transit_next(&rx, consumed, &f, &payload,
						    &next);

			ck_assert_int_ge(ret, 0);
			if (ret == 0) {
				ck_assert_uint_eq(got, sent);
				break;
			}
			ck_assert_uint_eq(f.kind, IBVD_TRANSIT_SEND);
			ck_assert_uint_eq(f.wr_id, f.len);
			ck_assert_uint_eq(f.imm, 0xabcd);
			fill(want, f.len, got);
			ck_assert_mem_eq(payload, want, f.len);
			consumed = next;
			ibvd_transit_release(&rx, consumed);
			got++;
		}
	}
	ck_assert_uint_eq(got, sent);
	ck_assert_uint_eq(consumed, produced);
}

START_TEST(in_order)
{
	stream(0);
}
END_TEST

START_TEST(counter_wrap)
{
	stream(0xffffff00u);
}
END_TEST

/* A full ring refuses more; room comes back as the receiver takes. */
START_TEST(full_and_room)
{
	uint32_t produced = 0, consumed = 0, n = 0;
	uint8_t data[96] = { 0 };
	struct ibvd_transit_frag f;
	const uint8_t *payload;
	uint32_t next;

	/* 96 bytes + header = 2 cells: 32 fit in 64 cells */
	while (send_frag(&produced, consumed, IBVD_TRANSIT_SEND,
			 IBVD_TRANSIT_FIRST | IBVD_TRANSIT_LAST, data, 96) == 0)
		n++;
	ck_assert_uint_eq(n, 32);
	ck_assert_uint_eq(ibvd_transit_room(&tx, produced, consumed), 0);
	ibvd_transit_publish(&tx, produced);
	ck_assert_int_eq(ibvd_transit_next(&rx, consumed, &f, &payload, &next), 1);
	consumed = next;
	/* two cells free at the ring's start: 128 - 32 bytes */
	ck_assert_uint_eq(ibvd_transit_room(&tx, produced, consumed), 96);
	ck_assert_int_eq(send_frag(&produced, consumed, IBVD_TRANSIT_SEND,
				   IBVD_TRANSIT_FIRST | IBVD_TRANSIT_LAST,
				   data, 97), -EAGAIN);
	ck_assert_int_eq(send_frag(&produced, consumed, IBVD_TRANSIT_SEND,
				   IBVD_TRANSIT_FIRST | IBVD_TRANSIT_LAST,
				   data, 96), 0);
}
END_TEST

/* The sender refuses headers a receiver would reject. */
START_TEST(bad_headers)
{
	static uint8_t data[NCELLS * IBVD_TRANSIT_CELL];
	uint32_t produced = 0;

	ck_assert_int_eq(send_frag(&produced, 0, IBVD_TRANSIT_PAD, 0, data, 0),
			 -EINVAL);
	ck_assert_int_eq(send_frag(&produced, 0, 99, 0, data, 0), -EINVAL);
	ck_assert_int_eq(send_frag(&produced, 0, IBVD_TRANSIT_SEND, 0x80, data,
				   0), -EINVAL);
	ck_assert_int_eq(send_frag(&produced, 0, IBVD_TRANSIT_SEND, 0, data,
				   NCELLS * IBVD_TRANSIT_CELL), -EINVAL);
	ck_assert_uint_eq(produced, 0);
}
END_TEST

/* A receiver that claims to have taken more than was sent gets nothing. */
START_TEST(lying_receiver)
{
	uint32_t produced = 5 * 64;
	uint8_t data[8] = { 0 };

	ck_assert_uint_eq(ibvd_transit_room(&tx, produced, produced + 1), 0);
	ck_assert_int_eq(send_frag(&produced, produced + 7, IBVD_TRANSIT_SEND,
				   IBVD_TRANSIT_FIRST | IBVD_TRANSIT_LAST,
				   data, 8), -EAGAIN);
}
END_TEST

/*
 * A 32-bit `consumed` read against the sender's 64-bit count, which
 * begins at IBVD_TRANSIT_START: within a lap behind it, across 2^32 too;
 * never ahead, never further back, never before the ring began.  A mark
 * kept from 2^32 cells ago stays behind the count a `consumed` now stands
 * for, which 32-bit counts cannot tell apart.
 */
START_TEST(widen_counts)
{
	const uint64_t lap = 1ull << 32, start = IBVD_TRANSIT_START;
	uint64_t w;

	ck_assert(ibvd_transit_widen(start + 100, (uint32_t)(start + 40), NCELLS,
				     &w));
	ck_assert_uint_eq(w, start + 40);
	ck_assert(ibvd_transit_widen(start, (uint32_t)start, NCELLS, &w));
	ck_assert_uint_eq(w, start);
	/* ahead; before the start; counts below the start are none */
	ck_assert(!ibvd_transit_widen(start + 100, (uint32_t)(start + 101),
				      NCELLS, &w));
	ck_assert(!ibvd_transit_widen(start + 10, (uint32_t)(start - 2), NCELLS,
				      &w));
	ck_assert(!ibvd_transit_widen(100, 40, NCELLS, &w));
	/* a lap and one behind */
	ck_assert(!ibvd_transit_widen(start + 5 * lap + 200,
				      (uint32_t)(start + 200 - NCELLS - 1),
				      NCELLS, &w));
	/* across 2^32, as every pair's first 64 cells go */
	ck_assert(ibvd_transit_widen(start + 69, (uint32_t)-7, NCELLS, &w));
	ck_assert_uint_eq(w, lap - 7);
	/* the same 32-bit count a lap later stands for the count now */
	ck_assert(ibvd_transit_widen(start + lap + 20, (uint32_t)(start + 10),
				     NCELLS, &w));
	ck_assert_uint_eq(w, start + lap + 10);
	ck_assert_uint_gt(w, start + 10);
}
END_TEST

/* Each way a sender's ring can be wrong, one at a time. */
START_TEST(garbage_cases)
{
	struct ibvd_transit_frag f, *h = (void *)cells;
	uint32_t produced = 0, next;
	const uint8_t *payload;
	uint8_t data[100] = { 0 };

	ck_assert_int_eq(send_frag(&produced, 0, IBVD_TRANSIT_SEND,
				   IBVD_TRANSIT_FIRST | IBVD_TRANSIT_LAST,
				   data, 100), 0);
	ibvd_transit_publish(&tx, produced);
	ck_assert_int_eq(ibvd_transit_next(&rx, 0, &f, &payload, &next), 1);

	h->seq = 7;				/* a stale slot */
	ck_assert_int_eq(ibvd_transit_next(&rx, 0, &f, &payload, &next), -EPROTO);
	h->seq = 1;
	h->len = 200;				/* more than was produced */
	ck_assert_int_eq(ibvd_transit_next(&rx, 0, &f, &payload, &next), -EPROTO);
	h->len = 0xffffffffu;
	ck_assert_int_eq(ibvd_transit_next(&rx, 0, &f, &payload, &next), -EPROTO);
	h->len = 100;
	h->kind = 0;
	ck_assert_int_eq(ibvd_transit_next(&rx, 0, &f, &payload, &next), -EPROTO);
	h->kind = IBVD_TRANSIT_WRITE_IMM;	/* a WRITE in parts */
	h->flags = IBVD_TRANSIT_FIRST;
	ck_assert_int_eq(ibvd_transit_next(&rx, 0, &f, &payload, &next), -EPROTO);
	h->flags = IBVD_TRANSIT_FIRST | IBVD_TRANSIT_LAST;
	h->len = IBVD_TRANSIT_RDMA_INFO - 1;	/* no room for its target */
	ck_assert_int_eq(ibvd_transit_next(&rx, 0, &f, &payload, &next), -EPROTO);
	h->len = 100;				/* whole, with a target */
	ck_assert_int_eq(ibvd_transit_next(&rx, 0, &f, &payload, &next), 1);
	ck_assert_uint_eq(f.kind, IBVD_TRANSIT_WRITE_IMM);
	h->kind = IBVD_TRANSIT_SEND;
	h->msg_len = 50;			/* a first part larger than its message */
	ck_assert_int_eq(ibvd_transit_next(&rx, 0, &f, &payload, &next), -EPROTO);
	h->msg_len = 100;
	h->flags = 0x40;
	ck_assert_int_eq(ibvd_transit_next(&rx, 0, &f, &payload, &next), -EPROTO);
	h->flags = IBVD_TRANSIT_FIRST | IBVD_TRANSIT_LAST;
	ck_assert_int_eq(ibvd_transit_next(&rx, 0, &f, &payload, &next), 1);

	ctl.produced = NCELLS + 1;		/* more than the ring holds */
	ck_assert_int_eq(ibvd_transit_next(&rx, 0, &f, &payload, &next), -EPROTO);

	/* a fragment that would run past the ring's end */
	memset(cells, 0, NCELLS * IBVD_TRANSIT_CELL);
	h = (void *)(cells + (NCELLS - 1) * IBVD_TRANSIT_CELL);
	*h = (struct ibvd_transit_frag){ .seq = NCELLS, .kind = IBVD_TRANSIT_SEND,
		.flags = IBVD_TRANSIT_FIRST | IBVD_TRANSIT_LAST, .len = 64,
		.msg_len = 64 };
	ctl.produced = NCELLS + 1;
	ck_assert_int_eq(ibvd_transit_next(&rx, NCELLS - 1, &f, &payload, &next),
			 -EPROTO);
	/* a PAD with nothing after it is waited on; two PADs are garbage */
	h->kind = IBVD_TRANSIT_PAD;
	ctl.produced = NCELLS;
	ck_assert_int_eq(ibvd_transit_next(&rx, NCELLS - 1, &f, &payload, &next), 0);
	ctl.produced = NCELLS + 1;
	((struct ibvd_transit_frag *)cells)->seq = NCELLS + 1;
	((struct ibvd_transit_frag *)cells)->kind = IBVD_TRANSIT_PAD;
	ck_assert_int_eq(ibvd_transit_next(&rx, NCELLS - 1, &f, &payload, &next),
			 -EPROTO);
}
END_TEST

/*
 * Random bytes anywhere in the ring and random counters: the receiver
 * only ever answers 0, 1 or -EPROTO, and a fragment it hands out lies
 * inside the ring and inside what was produced.
 */
START_TEST(hostile_sender)
{
	uint8_t *end = cells + NCELLS * IBVD_TRANSIT_CELL;
	unsigned int round, accepted = 0;

	for (round = 0; round < 200000; round++) {
		uint32_t consumed = rnd(), produced, next, i;
		struct ibvd_transit_frag f;
		const uint8_t *payload;
		int ret;

		if (round % 64 == 0)	/* fresh random memory now and then */
			for (i = 0; i < NCELLS * IBVD_TRANSIT_CELL; i++)
				cells[i] = (uint8_t)rnd();
		produced = consumed + rnd() % (2 * NCELLS);
		/* plausible headers sometimes, so the checks beyond seq run */
		if (rnd() % 2) {
			struct ibvd_transit_frag *h = (void *)(cells +
				(consumed & (NCELLS - 1)) * IBVD_TRANSIT_CELL);

			h->seq = consumed + 1;
			h->kind = (uint16_t)(rnd() % 7);
			h->flags = (uint16_t)(rnd() % 9);
			h->len = rnd() % 3 ? rnd() % 5000 : rnd() << 8;
			h->msg_len = rnd() % 5000;
		}
		ctl.produced = produced;
		ret = ibvd_transit_next(&rx, consumed, &f, &payload, &next);
		ck_assert(ret == 0 || ret == 1 || ret == -EPROTO);
		if (ret != 1)
			continue;
		accepted++;
		ck_assert(payload >= cells + IBVD_TRANSIT_HDR);
		ck_assert(payload + f.len <= end);
		ck_assert_uint_le(next - consumed, produced - consumed);
		ck_assert(f.kind > IBVD_TRANSIT_PAD &&
			  f.kind <= IBVD_TRANSIT_WRITE_IMM);
	}
	ck_assert_uint_gt(accepted, 1000);	/* the loop reached the checks */
}
END_TEST

/* ---- leases (common/lease.c) ------------------------------------------ */

static struct ibvd_lease lease;

/* A copy under a grant of the current epoch; void or revoke: none. */
START_TEST(lease_epochs)
{
	uint32_t e;

	memset(&lease, 0, sizeof(lease));
	e = lease.epoch;
	ck_assert(ibvd_lease_begin(&lease, e));
	ck_assert_uint_eq(lease.in_use, 1);
	ibvd_lease_end(&lease);
	ck_assert_uint_eq(lease.in_use, 0);
	ibvd_lease_void(&lease);
	ck_assert(!ibvd_lease_begin(&lease, e));
	ck_assert_uint_eq(lease.in_use, 0);	/* a refusal holds nothing */
	ck_assert_int_eq(ibvd_lease_revoke(&lease), 0);
	ck_assert(!ibvd_lease_begin(&lease, e + 1));
	ck_assert(ibvd_lease_begin(&lease, e + 2));
	ibvd_lease_end(&lease);
}
END_TEST

/*
 * A copier that begins, then copies until it sees the revocation start
 * (the epoch moved): the revocation returns only after its copy ended,
 * and its next begin is refused.  No clock decides anything: the
 * revocation may wait a minute on a loaded machine.
 */
static volatile int copy_started, copy_done;

static void *copier(void *arg)
{
	uint32_t epoch = *(uint32_t *)arg;

	if (!ibvd_lease_begin(&lease, epoch))
		return NULL;
	__atomic_store_n(&copy_started, 1, __ATOMIC_SEQ_CST);
	while (__atomic_load_n(&lease.epoch, __ATOMIC_SEQ_CST) == epoch)
		sched_yield();
	__atomic_store_n(&copy_done, 1, __ATOMIC_SEQ_CST);
	ibvd_lease_end(&lease);
	return (void *)1;
}

START_TEST(lease_revoke_waits)
{
	uint32_t epoch;
	pthread_t t;
	void *began;

	memset(&lease, 0, sizeof(lease));
	epoch = lease.epoch;
	copy_started = copy_done = 0;
	ck_assert_int_eq(pthread_create(&t, NULL, copier, &epoch), 0);
	while (!__atomic_load_n(&copy_started, __ATOMIC_SEQ_CST))
		sched_yield();
	ck_assert_int_eq(ibvd_lease_revoke_for(&lease, 60000000000ull), 0);
	ck_assert_msg(__atomic_load_n(&copy_done, __ATOMIC_SEQ_CST),
		      "the revocation returned during a copy");
	pthread_join(t, &began);
	ck_assert_ptr_nonnull(began);
	ck_assert(!ibvd_lease_begin(&lease, epoch));
}
END_TEST

/* A lease held for ever (a stopped or lying library): bounded, told. */
START_TEST(lease_held_for_ever)
{
	memset(&lease, 0, sizeof(lease));
	ck_assert(ibvd_lease_begin(&lease, 0));
	ck_assert_int_eq(ibvd_lease_revoke(&lease), -ETIMEDOUT);
	ck_assert_uint_eq(lease.epoch, 1);
}
END_TEST

static Suite *transit_suite(void)
{
	Suite *s = suite_create("transit");
	TCase *tc = tcase_create("ring");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, geometry);
	tcase_add_test(tc, in_order);
	tcase_add_test(tc, counter_wrap);
	tcase_add_test(tc, full_and_room);
	tcase_add_test(tc, bad_headers);
	tcase_add_test(tc, lying_receiver);
	tcase_add_test(tc, widen_counts);
	tcase_add_test(tc, garbage_cases);
	tcase_add_test(tc, hostile_sender);
	suite_add_tcase(s, tc);
	tc = tcase_create("lease");
	tcase_add_test(tc, lease_epochs);
	tcase_add_test(tc, lease_revoke_waits);
	tcase_add_test(tc, lease_held_for_ever);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return check_run(transit_suite(), CK_NORMAL);
}
