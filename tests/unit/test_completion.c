/*
 * Unit tests: CQEs into a CQ ring and their purge at a QP's RESET or
 * destroy (daemon/engine/completion.c), on a CQ of our own with the
 * counters set where a test needs them: near the 2^32 wrap, with the
 * client's head a lap back or past the tail.  A purge looks only at the
 * CQEs pushed for its QP since its last purge (the span), whatever the
 * client's head says; the engine counts the slots it looked at.
 */
#include "config.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/engine/internal.h"
#include "tests/common/check_run.h"

#define NSLOTS	64u
#define NEAR_WRAP	(UINT32_MAX - 20u)

/* ---- what completion.c calls outside itself ---------------------------- */

static struct ibvd_engine eng;
static unsigned int cq_errors;	/* IBV_EVENT_CQ_ERR raised */

static void on_async(struct ibvd_context *ctx, uint32_t event, uint32_t handle)
{
	(void)ctx, (void)handle;
	if (event == IBV_EVENT_CQ_ERR)
		cq_errors++;
}

static void on_completion(const struct ibvd_cq *cq)
{
	(void)cq;
}

static const struct ibvd_engine_events events = {
	.async = on_async,
	.completion = on_completion,
};
const struct ibvd_engine_events *ibvd_eng_events = &events;

struct ibvd_engine *ibvd_eng_of(const struct ibvd_qp *qp)
{
	(void)qp;
	return &eng;
}

uint64_t ibvd_eng_now(void)
{
	return 1;
}

/* ---- a CQ, two QPs on it ------------------------------------------------ */

static struct ibvd_context ctx;
static struct ibvd_cq cq, other_cq;
static struct ibvd_qp qa, qb;
static struct ibvd_cq_engine cq_engine, other_engine;
static struct ibvd_cq_client cq_client, other_client;
static struct ibvd_cqe slots[NSLOTS], other_slots[NSLOTS];

static void cq_init(struct ibvd_cq *c, struct ibvd_cq_engine *e,
		    struct ibvd_cq_client *cl, struct ibvd_cqe *s)
{
	memset(c, 0, sizeof(*c));
	memset(e, 0, sizeof(*e));
	memset(cl, 0, sizeof(*cl));
	memset(s, 0, NSLOTS * sizeof(*s));
	c->ctx = &ctx;
	c->ring.nslots = NSLOTS;
	c->ring.stride = sizeof(struct ibvd_cqe);
	c->ring.slots = (uint8_t *)s;
	c->ring.engine_page = e;
	c->ring.client_page = cl;
	pthread_mutex_init(&c->lock, NULL);
}

static void qp_init(struct ibvd_qp *qp, uint32_t qp_num)
{
	memset(qp, 0, sizeof(*qp));
	qp->qp_num = qp_num;
	qp->qp_type = IBV_QPT_RC;
	qp->send_cq = &cq;
	qp->recv_cq = &cq;
}

static void setup(void)
{
	memset(&eng, 0, sizeof(eng));
	memset(&ctx, 0, sizeof(ctx));
	cq_errors = 0;
	cq_init(&cq, &cq_engine, &cq_client, slots);
	cq_init(&other_cq, &other_engine, &other_client, other_slots);
	qp_init(&qa, 0x100);
	qp_init(&qb, 0x200);
}

static void teardown(void)
{
	pthread_mutex_destroy(&cq.lock);
	pthread_mutex_destroy(&other_cq.lock);
}

/* Both counters at `at`, as after `at` CQEs pushed and polled. */
static void start_at(struct ibvd_cq *c, uint32_t at)
{
	c->tail = at;
	((struct ibvd_cq_client *)c->ring.client_page)->head = at;
}

static int push(struct ibvd_cq *c, struct ibvd_qp *qp, uint32_t opcode,
		uint64_t wr_id)
{
	struct ibvd_cqe cqe = {
		.wr_id = wr_id,
		.opcode = opcode,
		.qp_num = qp->qp_num,
	};

	return ibvd_eng_cq_push(c, qp, &cqe, false);
}

static const struct ibvd_cqe *at(const struct ibvd_cq *c, uint32_t counter)
{
	return (const struct ibvd_cqe *)c->ring.slots +
	       (counter & (NSLOTS - 1));
}

static bool purged(const struct ibvd_cq *c, uint32_t counter)
{
	return at(c, counter)->flags & IBVD_CQE_PURGED;
}

/* ---- pushes --------------------------------------------------------------- */

/* Each CQE is in its slot with seq = its counter + 1, the tail published. */
START_TEST(push_publishes)
{
	uint32_t i;

	start_at(&cq, NEAR_WRAP);
	for (i = 0; i < 40; i++)
		ck_assert_int_eq(push(&cq, &qa, IBV_WC_SEND, i), 0);
	for (i = 0; i < 40; i++) {
		ck_assert_uint_eq(at(&cq, NEAR_WRAP + i)->wr_id, i);
		ck_assert_uint_eq(at(&cq, NEAR_WRAP + i)->seq, NEAR_WRAP + i + 1);
	}
	ck_assert_uint_eq(cq.tail, NEAR_WRAP + 40);
	ck_assert_uint_eq(cq_engine.tail, NEAR_WRAP + 40);
	ck_assert_uint_eq(qa.cqe_span[0].lo, NEAR_WRAP);
	ck_assert_uint_eq(qa.cqe_span[0].hi, NEAR_WRAP + 40);
	ck_assert_ptr_eq(qa.cqe_span[0].cq, &cq);
}
END_TEST

/*
 * A full CQ takes nothing: one CQ error, the overflow word set, and
 * every later push refused even after the client polls.
 */
START_TEST(overrun_is_sticky)
{
	uint32_t i;

	start_at(&cq, NEAR_WRAP);
	for (i = 0; i < NSLOTS; i++)
		ck_assert_int_eq(push(&cq, &qa, IBV_WC_SEND, i), 0);
	ck_assert_int_eq(push(&cq, &qa, IBV_WC_SEND, 99), -ENOSPC);
	ck_assert_uint_eq(cq_errors, 1);
	ck_assert_uint_ne(cq_engine.overflow, 0);
	cq_client.head = cq.tail;
	ck_assert_int_eq(push(&cq, &qa, IBV_WC_SEND, 100), -ENOSPC);
	ck_assert_uint_eq(cq_errors, 1);
	ck_assert_uint_eq(cq.tail, NEAR_WRAP + NSLOTS);
}
END_TEST

/* A head past the tail (a client's impossible word) is an overrun too. */
START_TEST(head_past_tail_overruns)
{
	start_at(&cq, 10);
	cq_client.head = 11;
	ck_assert_int_eq(push(&cq, &qa, IBV_WC_SEND, 1), -ENOSPC);
	ck_assert_uint_eq(cq_errors, 1);
}
END_TEST

/* ---- purges --------------------------------------------------------------- */

/*
 * Two QPs' CQEs interleaved across the wrap: a purge of one marks all of
 * its CQEs and none of the other's, looking at its span only.
 */
START_TEST(purge_across_the_wrap)
{
	uint32_t i;

	start_at(&cq, NEAR_WRAP);
	for (i = 0; i < 40; i++)
		push(&cq, i % 2 ? &qb : &qa, IBV_WC_SEND, i);
	ibvd_eng_cq_purge(&cq, &qa);
	for (i = 0; i < 40; i++)
		ck_assert_msg(purged(&cq, NEAR_WRAP + i) == !(i % 2),
			      "CQE %u (qp %s)", i, i % 2 ? "b" : "a");
	/* qa's span: its first CQE to one past its last */
	ck_assert_uint_eq(eng.purge_slots, 39);
	ck_assert_ptr_null(qa.cqe_span[0].cq);
	/* a second purge has nothing to look at */
	ibvd_eng_cq_purge(&cq, &qa);
	ck_assert_uint_eq(eng.purge_slots, 39);
}
END_TEST

/*
 * The client's head a lap back (every slot looks unpolled): a purge
 * still looks at the QP's own span, not the lap.
 */
START_TEST(head_a_lap_back)
{
	uint32_t i;

	start_at(&cq, NEAR_WRAP);
	for (i = 0; i < NSLOTS - 3; i++)
		push(&cq, &qb, IBV_WC_SEND, i);
	for (i = 0; i < 3; i++)
		push(&cq, &qa, IBV_WC_SEND, 100 + i);
	ck_assert_uint_eq(cq.tail - cq_client.head, NSLOTS);
	ibvd_eng_cq_purge(&cq, &qa);
	ck_assert_uint_eq(eng.purge_slots, 3);
	for (i = 0; i < NSLOTS; i++)
		ck_assert(purged(&cq, NEAR_WRAP + i) == (i >= NSLOTS - 3));
}
END_TEST

/* CQEs the client already polled are not looked at: the walk starts at the head. */
START_TEST(polled_part_skipped)
{
	uint32_t i;

	start_at(&cq, NEAR_WRAP);
	for (i = 0; i < 30; i++)
		push(&cq, &qa, IBV_WC_SEND, i);
	cq_client.head = NEAR_WRAP + 25;
	ibvd_eng_cq_purge(&cq, &qa);
	ck_assert_uint_eq(eng.purge_slots, 5);
	for (i = 0; i < 25; i++)
		ck_assert(!purged(&cq, NEAR_WRAP + i));
	for (; i < 30; i++)
		ck_assert(purged(&cq, NEAR_WRAP + i));
}
END_TEST

/*
 * A span that began laps ago (the QP completed once, then nothing while
 * the counters went round): the walk starts at the head, measured back
 * from the span's end, never at a start that wrapped past it.
 */
START_TEST(old_span_start)
{
	uint32_t i;

	start_at(&cq, NEAR_WRAP);
	push(&cq, &qa, IBV_WC_SEND, 1);
	/* 2^32 - 8 CQEs of others later, most polled */
	start_at(&cq, NEAR_WRAP - 8);
	cq_client.head = NEAR_WRAP - 8;
	for (i = 0; i < 4; i++)
		push(&cq, &qb, IBV_WC_SEND, 10 + i);
	push(&cq, &qa, IBV_WC_SEND, 2);
	ck_assert_uint_eq(qa.cqe_span[0].lo, NEAR_WRAP);
	ck_assert_uint_eq(qa.cqe_span[0].hi, NEAR_WRAP - 3);
	ibvd_eng_cq_purge(&cq, &qa);
	ck_assert_uint_eq(eng.purge_slots, 5);
	for (i = 0; i < 4; i++)
		ck_assert(!purged(&cq, NEAR_WRAP - 8 + i));
	ck_assert(purged(&cq, NEAR_WRAP - 4));
}
END_TEST

/*
 * A span's start a lap back that looks near the tail: the QP completed
 * at counter X, then once more 2^32 - 6 CQEs later, and others followed
 * up to just past X again.  Measured from the tail, X looks 2 CQEs old;
 * measured back from the span's end it is a lap away, and the walk
 * starts at the head: one slot, not 2^32 - 5.
 */
START_TEST(span_start_a_lap_back)
{
	uint32_t i;

	start_at(&cq, NEAR_WRAP);
	push(&cq, &qa, IBV_WC_SEND, 1);
	start_at(&cq, NEAR_WRAP - 6);
	push(&cq, &qa, IBV_WC_SEND, 2);
	for (i = 0; i < 7; i++)
		push(&cq, &qb, IBV_WC_SEND, 10 + i);
	ck_assert_uint_eq(cq.tail, NEAR_WRAP + 2);
	ck_assert_uint_eq(qa.cqe_span[0].lo, NEAR_WRAP);
	ibvd_eng_cq_purge(&cq, &qa);
	ck_assert_uint_eq(eng.purge_slots, 1);
	ck_assert(purged(&cq, NEAR_WRAP - 6));
	for (i = 0; i < 7; i++)
		ck_assert(!purged(&cq, NEAR_WRAP - 5 + i));
}
END_TEST

/* An impossible head (past the tail): no walk at all, the span is forgotten. */
START_TEST(impossible_head_no_walk)
{
	uint32_t i;

	start_at(&cq, NEAR_WRAP);
	for (i = 0; i < 10; i++)
		push(&cq, &qa, IBV_WC_SEND, i);
	cq_client.head = cq.tail + 5;
	ibvd_eng_cq_purge(&cq, &qa);
	ck_assert_uint_eq(eng.purge_slots, 0);
	ck_assert_ptr_null(qa.cqe_span[0].cq);
	for (i = 0; i < 10; i++)
		ck_assert(!purged(&cq, NEAR_WRAP + i));
}
END_TEST

/*
 * A span whose counters are another CQ's (an XRC target's receive CQ
 * changes with the SRQ a message names): a purge of this CQ does not
 * walk it.
 */
START_TEST(span_of_another_cq)
{
	uint32_t i;

	qa.qp_type = IBV_QPT_XRC_RECV;
	qa.send_cq = NULL;
	qa.recv_cq = &other_cq;
	/* counters that, read as cq's, would lie between its head and tail */
	start_at(&other_cq, NEAR_WRAP + 2);
	push(&other_cq, &qa, IBV_WC_RECV, 1);
	start_at(&cq, NEAR_WRAP);
	for (i = 0; i < 5; i++)
		push(&cq, &qb, IBV_WC_RECV, i);
	/* now its receive CQ is cq; the span still names other_cq */
	qa.recv_cq = &cq;
	ibvd_eng_cq_purge(&cq, &qa);
	ck_assert_uint_eq(eng.purge_slots, 0);
	ck_assert_ptr_null(qa.cqe_span[1].cq);
	/* nor, once forgotten, the CQ it named */
	ibvd_eng_cq_purge(&other_cq, &qa);
	ck_assert_uint_eq(eng.purge_slots, 0);
	ck_assert(!purged(&other_cq, NEAR_WRAP + 2));
}
END_TEST

/* A QP on an SRQ keeps its receive CQEs: the app's news that a buffer is free. */
START_TEST(srq_receives_stay)
{
	struct ibvd_srq srq;

	memset(&srq, 0, sizeof(srq));
	qa.srq = &srq;
	start_at(&cq, NEAR_WRAP);
	push(&cq, &qa, IBV_WC_RECV, 1);
	push(&cq, &qa, IBV_WC_SEND, 2);
	push(&cq, &qa, IBV_WC_RECV_RDMA_WITH_IMM, 3);
	ibvd_eng_cq_purge(&cq, &qa);
	ck_assert(!purged(&cq, NEAR_WRAP));
	ck_assert(purged(&cq, NEAR_WRAP + 1));
	ck_assert(!purged(&cq, NEAR_WRAP + 2));
}
END_TEST

/* A context being torn down purges nothing: its CQs go after its QPs. */
START_TEST(teardown_skips)
{
	uint32_t i;

	start_at(&cq, NEAR_WRAP);
	for (i = 0; i < 10; i++)
		push(&cq, &qa, IBV_WC_SEND, i);
	ctx.tearing_down = true;
	ibvd_eng_cq_purge(&cq, &qa);
	ck_assert_uint_eq(eng.purge_slots, 0);
	ck_assert(!purged(&cq, NEAR_WRAP));
}
END_TEST

/* A slot pushed again after a purge is no longer marked. */
START_TEST(reused_slot_unmarked)
{
	uint32_t i;

	start_at(&cq, NEAR_WRAP);
	push(&cq, &qa, IBV_WC_SEND, 1);
	ibvd_eng_cq_purge(&cq, &qa);
	ck_assert(purged(&cq, NEAR_WRAP));
	cq_client.head = cq.tail;
	for (i = 0; i < NSLOTS; i++)
		push(&cq, &qb, IBV_WC_SEND, i);
	ck_assert(!purged(&cq, NEAR_WRAP + NSLOTS));
}
END_TEST

static Suite *completion_suite(void)
{
	Suite *s = suite_create("completion");
	TCase *tc = tcase_create("cq");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, push_publishes);
	tcase_add_test(tc, overrun_is_sticky);
	tcase_add_test(tc, head_past_tail_overruns);
	tcase_add_test(tc, purge_across_the_wrap);
	tcase_add_test(tc, head_a_lap_back);
	tcase_add_test(tc, polled_part_skipped);
	tcase_add_test(tc, old_span_start);
	tcase_add_test(tc, span_start_a_lap_back);
	tcase_add_test(tc, impossible_head_no_walk);
	tcase_add_test(tc, span_of_another_cq);
	tcase_add_test(tc, srq_receives_stay);
	tcase_add_test(tc, teardown_skips);
	tcase_add_test(tc, reused_slot_unmarked);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return check_run(completion_suite(), CK_NORMAL);
}
