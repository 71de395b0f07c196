/*
 * Unit tests: the engine's copy-then-validate of staged send WQEs
 * (daemon/engine/wqe.c, common/ring.h "Staging"), compiled with the
 * engine's private-buffer helpers (memory.c) and stubs for the registries:
 * a staged WRITE names its payload inside the QP's staging block, and
 * anything else a client may write there is refused with the status the
 * verbs give it.
 */
#include "config.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/engine/internal.h"
#include "tests/common/check_run.h"

#define SLOTS	4u
#define STRIDE	256u
#define BLOCK	(64u * 1024)

/* The registries: one MR at most (known_mr), no window. */
static struct ibvd_mr *known_mr;

struct ibvd_mr *ibvd_mr_by_lkey(uint32_t key)
{
	return known_mr && known_mr->lkey == key ? known_mr : NULL;
}

struct ibvd_mr *ibvd_mr_by_rkey(uint32_t key)
{
	(void)key;
	return NULL;
}

const struct ibvd_mr *ibvd_eng_mw_resolve(const struct ibvd_qp *target,
					  uint32_t rkey, uint64_t *raddr,
					  uint64_t len, uint32_t access)
{
	(void)target, (void)rkey, (void)raddr, (void)len, (void)access;
	return NULL;
}

int ibvd_eng_scratch(struct ibvd_engine *e, size_t len)
{
	(void)e, (void)len;
	return 0;
}

static struct ibvd_engine eng;
static struct ibvd_qp qp;
static uint8_t slots[SLOTS * STRIDE];
static uint8_t block[BLOCK];

static void setup(void)
{
	memset(&qp, 0, sizeof(qp));
	qp.qp_type = IBV_QPT_RC;
	qp.cap.max_send_sge = 4;
	qp.cap.max_inline_data = 64;
	qp.sq.nslots = SLOTS;
	qp.sq.stride = STRIDE;
	qp.sq.slots = slots;
	qp.staging.base = block;
	qp.staging.bytes = BLOCK;
}

/* Write a staged WQE into slot 0 as a client may, and take it. */
static enum ibv_wc_status take(uint32_t opcode, uint32_t offset,
			       uint32_t length, struct eng_req *req)
{
	struct ibvd_send_wqe w = {
		.wr_id = 7,
		.opcode = opcode,
		.send_flags = IBV_SEND_SIGNALED | IBVD_SEND_STAGED,
	};
	struct ibvd_staged st = { .offset = offset, .length = length };

	memcpy(slots, &w, sizeof(w));
	memcpy(slots + IBVD_SEND_WQE_HDR, &st, sizeof(st));
	return ibvd_eng_send_take(&eng, &qp, 0, req);
}

START_TEST(in_the_block)
{
	static const struct { uint32_t off, len; } ok[] = {
		{ 0, 1 }, { 4096, 65536 - 4096 }, { 0, BLOCK }, { BLOCK - 1, 1 },
	};
	struct eng_req req;
	unsigned int i;

	for (i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		ck_assert_int_eq(take(IBV_WR_RDMA_WRITE, ok[i].off, ok[i].len, &req),
				 IBV_WC_SUCCESS);
		ck_assert_uint_eq(req.length, ok[i].len);
		ck_assert_uint_eq(req.local.n, 1);
		ck_assert_int_lt(req.local.seg[0].fd, 0);
		ck_assert_ptr_eq((void *)(uintptr_t)req.local.seg[0].addr,
				 block + ok[i].off);
		ck_assert_uint_eq(req.local.seg[0].len, ok[i].len);
	}
	ck_assert_int_eq(take(IBV_WR_RDMA_WRITE_WITH_IMM, 100, 200, &req),
			 IBV_WC_SUCCESS);
	ck_assert_uint_eq(req.length, 200);
	/* nothing to read: no segment at all */
	ck_assert_int_eq(take(IBV_WR_RDMA_WRITE, 0, 0, &req), IBV_WC_SUCCESS);
	ck_assert_uint_eq(req.local.n, 0);
	ck_assert_uint_eq(req.length, 0);
}
END_TEST

START_TEST(outside_the_block)
{
	static const struct { uint32_t off, len; } bad[] = {
		{ 0, BLOCK + 1 }, { BLOCK, 1 }, { BLOCK - 1, 2 },
		{ 0xffffffffu, 2 }, { 2, 0xffffffffu }, { 0xffffffffu, 0xffffffffu },
	};
	struct eng_req req;
	unsigned int i;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		ck_assert_int_eq(take(IBV_WR_RDMA_WRITE, bad[i].off, bad[i].len, &req),
				 IBV_WC_LOC_PROT_ERR);
}
END_TEST

START_TEST(no_block_or_wrong_opcode)
{
	static const uint32_t not_staged[] = {
		IBV_WR_SEND, IBV_WR_SEND_WITH_IMM, IBV_WR_RDMA_READ,
		IBV_WR_ATOMIC_CMP_AND_SWP, IBV_WR_ATOMIC_FETCH_AND_ADD,
		IBV_WR_SEND_WITH_INV,
	};
	struct eng_req req;
	unsigned int i;

	for (i = 0; i < sizeof(not_staged) / sizeof(not_staged[0]); i++)
		ck_assert_int_eq(take(not_staged[i], 0, 16, &req),
				 IBV_WC_LOC_QP_OP_ERR);
	/* a QP the daemon gave no block: the same bytes name nothing */
	qp.staging.base = NULL;
	qp.staging.bytes = 0;
	ck_assert_int_eq(take(IBV_WR_RDMA_WRITE, 0, 16, &req), IBV_WC_LOC_PROT_ERR);
}
END_TEST

/*
 * What a transport keeps past the turn that resolved it is checked again
 * before each use (ibvd_eng_sgl_current): the same MR, memory, range and
 * rights, or nothing.
 */
START_TEST(kept_segments_checked_again)
{
	struct ibvd_mem mem = { .fd = 5 }, other_mem = { .fd = 6 };
	struct ibvd_pd pd = { 0 }, other_pd = { 0 };
	struct ibvd_mr mr = {
		.pd = &pd, .lkey = 0x1234, .access = IBV_ACCESS_LOCAL_WRITE,
		.addr = 0x700000, .length = 8192, .iova = 0x10000, .mem = &mem,
	}, again;
	struct ibvd_sge sge = { .addr = 0x11000, .length = 100, .lkey = 0x1234 };
	struct eng_sgl sgl;

	known_mr = &mr;
	ck_assert_int_eq(ibvd_eng_sges_resolve(&sge, 1, &pd, true, &sgl),
			 IBV_WC_SUCCESS);
	ibvd_eng_sgl_private(&sgl, block, 16);	/* the engine's: not looked at */
	ck_assert(ibvd_eng_sgl_current(&sgl, &pd, true));
	ck_assert(!ibvd_eng_sgl_current(&sgl, &other_pd, false));
	known_mr = NULL;			/* deregistered */
	ck_assert(!ibvd_eng_sgl_current(&sgl, &pd, false));
	/* the same key again, over another process's memory */
	again = mr;
	again.mem = &other_mem;
	known_mr = &again;
	ck_assert(!ibvd_eng_sgl_current(&sgl, &pd, false));
	/* ... over a range that no longer holds the segment */
	again.mem = &mem;
	again.length = 4096 + 50;
	ck_assert(!ibvd_eng_sgl_current(&sgl, &pd, false));
	/* ... without the right to be written */
	again.length = 8192;
	again.access = 0;
	ck_assert(ibvd_eng_sgl_current(&sgl, &pd, false));
	ck_assert(!ibvd_eng_sgl_current(&sgl, &pd, true));
	known_mr = NULL;
}
END_TEST

int main(void)
{
	Suite *s = suite_create("wqe");
	TCase *tc = tcase_create("staged");

	tcase_add_checked_fixture(tc, setup, NULL);
	tcase_add_test(tc, in_the_block);
	tcase_add_test(tc, outside_the_block);
	tcase_add_test(tc, no_block_or_wrong_opcode);
	tcase_add_test(tc, kept_segments_checked_again);
	suite_add_tcase(s, tc);
	return check_run(s, CK_NORMAL);
}
