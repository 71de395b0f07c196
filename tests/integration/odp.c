/*
 * odp-helper: on-demand paging against a real daemon (odp.sh), one
 * process, loopback RC QPs.
 *
 * - ibv_query_device_ex reports ODP and implicit ODP, and per transport
 *   what the engine does;
 * - an explicit ODP MR over memory mapped only after the registration
 *   serves SEND, RDMA WRITE, READ and atomics; an unmapped page of it
 *   fails the operation that touches it, and nothing else;
 * - an implicit ODP MR (NULL, SIZE_MAX) reaches any address: the stack,
 *   the heap, a fresh mmap, as lkey and as rkey; iova must be 0;
 * - ODP MRs charge no RLIMIT_MEMLOCK: 64 MiB under a 1 MiB limit (the
 *   helper lowers its own soft limit), while a plain MR of 2 MiB fails;
 * - ibv_advise_mr: prefetch and prefetch-write populate the pages, FLUSH
 *   waits; bad advice, flags, empty lists, lkeys of other PDs, of plain
 *   MRs, ranges outside the MR: EINVAL, and nothing changes.
 */
#include <check.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/resource.h>

#include <infiniband/verbs.h>

#include "vt.h"
#include "tests/common/check_run.h"

#define ODP_ACCESS	(VT_ACCESS_ALL | IBV_ACCESS_ON_DEMAND)

static struct vt_dev D;
static long PSZ;

static void setup(void)
{
	vt_open(&D);
	PSZ = sysconf(_SC_PAGESIZE);
}

static void teardown(void)
{
	vt_close(&D);
}

static void *map_anon(size_t len)
{
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	ck_assert_ptr_ne(p, MAP_FAILED);
	return p;
}

START_TEST(caps)
{
	struct ibv_device_attr_ex ex;
	const uint32_t all = IBV_ODP_SUPPORT_SEND | IBV_ODP_SUPPORT_RECV |
			     IBV_ODP_SUPPORT_WRITE | IBV_ODP_SUPPORT_READ |
			     IBV_ODP_SUPPORT_ATOMIC | IBV_ODP_SUPPORT_SRQ_RECV;

	memset(&ex, 0xa5, sizeof(ex));
	ck_assert_int_eq(ibv_query_device_ex(D.ctx, NULL, &ex), 0);
	ck_assert_uint_eq(ex.odp_caps.general_caps,
			  IBV_ODP_SUPPORT | IBV_ODP_SUPPORT_IMPLICIT);
	ck_assert_uint_eq(ex.odp_caps.per_transport_caps.rc_odp_caps, all);
	ck_assert_uint_eq(ex.odp_caps.per_transport_caps.uc_odp_caps,
			  all & ~(IBV_ODP_SUPPORT_READ | IBV_ODP_SUPPORT_ATOMIC));
	ck_assert_uint_eq(ex.odp_caps.per_transport_caps.ud_odp_caps,
			  IBV_ODP_SUPPORT_SEND | IBV_ODP_SUPPORT_RECV |
			  IBV_ODP_SUPPORT_SRQ_RECV);
	ck_assert_uint_eq(ex.xrc_odp_caps, 0);
}
END_TEST

/*
 * Registered before it is mapped: a range reserved PROT_NONE, then made
 * readable and writable after ibv_reg_mr, serves every operation.
 */
START_TEST(explicit_mapped_later)
{
	size_t len = 16 * (size_t)PSZ;
	struct vt_pair p;
	struct ibv_mr *mr, *src;
	uint8_t *buf;
	uint64_t *word;

	buf = mmap(NULL, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ck_assert_ptr_ne(buf, MAP_FAILED);
	/* a plain MR must be mapped with the access it asks for */
	ck_assert_ptr_null(ibv_reg_mr(D.pd, buf, len, VT_ACCESS_ALL));
	mr = ibv_reg_mr(D.pd, buf, len, ODP_ACCESS);
	ck_assert_msg(mr != NULL, "ODP MR over PROT_NONE: %s", strerror(errno));
	ck_assert_int_eq(mprotect(buf, len, PROT_READ | PROT_WRITE), 0);

	vt_pair(&p, &D, NULL, 16);
	src = vt_reg(D.pd, len, VT_ACCESS_ALL);
	vt_fill(src->addr, len, 0, 7);
	/* WRITE into it, READ back out of it, an atomic on it */
	vt_send(p.qp[0], 1, IBV_WR_RDMA_WRITE, IBV_SEND_SIGNALED, src->addr,
		(uint32_t)len, src->lkey, (uintptr_t)buf, mr->rkey);
	vt_expect_ok(p.scq[0], NULL, 1, IBV_WC_RDMA_WRITE, "WRITE into the ODP MR");
	vt_expect_pat(buf, len, 0, 7, "the ODP MR after the WRITE");
	memset(src->addr, 0, len);
	vt_send(p.qp[0], 2, IBV_WR_RDMA_READ, IBV_SEND_SIGNALED, src->addr,
		(uint32_t)len, src->lkey, (uintptr_t)buf, mr->rkey);
	vt_expect_ok(p.scq[0], NULL, 2, IBV_WC_RDMA_READ, "READ from the ODP MR");
	vt_expect_pat(src->addr, len, 0, 7, "what the READ brought");
	word = (uint64_t *)(void *)buf;
	*word = 40;
	vt_atomic(p.qp[0], 3, IBV_WR_ATOMIC_FETCH_AND_ADD, src->addr, src->lkey,
		  (uintptr_t)word, mr->rkey, 2, 0);
	vt_expect_ok(p.scq[0], NULL, 3, IBV_WC_FETCH_ADD, "FETCH_ADD on the ODP MR");
	ck_assert_uint_eq(*word, 42);
	/* and as the local side of a SEND and of a RECV */
	vt_recv(p.qp[1], 4, src->addr, (uint32_t)len, src->lkey);
	vt_send(p.qp[0], 5, IBV_WR_SEND, IBV_SEND_SIGNALED, buf, 100, mr->lkey,
		0, 0);
	vt_expect_ok(p.scq[0], NULL, 5, IBV_WC_SEND, "SEND from the ODP MR");
	vt_expect_ok(p.rcq[1], NULL, 4, IBV_WC_RECV, "its RECV");

	ck_assert_int_eq(ibv_dereg_mr(mr), 0);
	vt_dereg(src);
	vt_pair_free(&p);
	munmap(buf, len);
}
END_TEST

/* A page unmapped under an ODP MR fails what touches it, nothing else. */
START_TEST(explicit_hole)
{
	size_t len = 4 * (size_t)PSZ;
	struct vt_pair p;
	struct ibv_mr *mr, *src;
	uint8_t *buf = map_anon(len);

	mr = ibv_reg_mr(D.pd, buf, len, ODP_ACCESS);
	ck_assert_ptr_nonnull(mr);
	vt_pair(&p, &D, NULL, 16);
	src = vt_reg(D.pd, (size_t)PSZ, VT_ACCESS_ALL);
	vt_fill(src->addr, (size_t)PSZ, 0, 3);
	vt_send(p.qp[0], 1, IBV_WR_RDMA_WRITE, IBV_SEND_SIGNALED, src->addr,
		(uint32_t)PSZ, src->lkey, (uintptr_t)buf, mr->rkey);
	vt_expect_ok(p.scq[0], NULL, 1, IBV_WC_RDMA_WRITE, "WRITE to a mapped page");
	vt_expect_pat(buf, (size_t)PSZ, 0, 3, "the mapped page");
	/*
	 * The hole is made last: a page the kernel just freed is where it puts
	 * the next small mapping, and under the sanitizers the allocations
	 * above were such mappings, which the WRITE then landed in.
	 */
	ck_assert_int_eq(munmap(buf + 2 * PSZ, (size_t)PSZ), 0);
	vt_send(p.qp[0], 2, IBV_WR_RDMA_WRITE, IBV_SEND_SIGNALED, src->addr,
		(uint32_t)PSZ, src->lkey, (uintptr_t)buf + 2 * PSZ, mr->rkey);
	vt_expect_wc(p.scq[0], NULL, 2, IBV_WC_REM_ACCESS_ERR, "WRITE to the hole");
	vt_expect_byte(buf + PSZ, (size_t)PSZ, 0, "the page before the hole");

	ck_assert_int_eq(ibv_dereg_mr(mr), 0);
	vt_dereg(src);
	vt_pair_free(&p);
	munmap(buf, 2 * (size_t)PSZ);
	munmap(buf + 3 * PSZ, (size_t)PSZ);
}
END_TEST

START_TEST(implicit)
{
	size_t len = 3 * (size_t)PSZ;
	uint8_t stack_buf[256];
	uint8_t *heap = malloc(5000), *fresh;
	struct ibv_mr *all, *src;
	struct vt_pair p;

	ck_assert_ptr_nonnull(heap);
	/* iova 0 and length SIZE_MAX, or nothing */
	ck_assert_ptr_null(ibv_reg_mr_iova(D.pd, NULL, SIZE_MAX, 4096, ODP_ACCESS));
	ck_assert_ptr_null(ibv_reg_mr(D.pd, NULL, SIZE_MAX, VT_ACCESS_ALL));
	all = ibv_reg_mr(D.pd, NULL, SIZE_MAX, ODP_ACCESS);
	ck_assert_msg(all != NULL, "implicit ODP MR: %s", strerror(errno));
	ck_assert_ptr_null(all->addr);
	ck_assert_uint_eq(all->length, SIZE_MAX);
	/* mapped only now */
	fresh = map_anon(len);

	vt_pair(&p, &D, NULL, 16);
	src = vt_reg(D.pd, len, VT_ACCESS_ALL);
	vt_fill(src->addr, len, 0, 9);
	vt_send(p.qp[0], 1, IBV_WR_RDMA_WRITE, IBV_SEND_SIGNALED, src->addr,
		(uint32_t)len, src->lkey, (uintptr_t)fresh, all->rkey);
	vt_expect_ok(p.scq[0], NULL, 1, IBV_WC_RDMA_WRITE, "WRITE to a fresh mapping");
	vt_expect_pat(fresh, len, 0, 9, "the fresh mapping");
	vt_send(p.qp[0], 2, IBV_WR_RDMA_WRITE, IBV_SEND_SIGNALED, src->addr,
		5000, src->lkey, (uintptr_t)heap, all->rkey);
	vt_expect_ok(p.scq[0], NULL, 2, IBV_WC_RDMA_WRITE, "WRITE to the heap");
	vt_expect_pat(heap, 5000, 0, 9, "the heap");
	/* the implicit MR as lkey: READ into the stack */
	vt_send(p.qp[0], 3, IBV_WR_RDMA_READ, IBV_SEND_SIGNALED, stack_buf,
		sizeof(stack_buf), all->lkey, (uintptr_t)src->addr, src->rkey);
	vt_expect_ok(p.scq[0], NULL, 3, IBV_WC_RDMA_READ, "READ into the stack");
	vt_expect_pat(stack_buf, sizeof(stack_buf), 0, 9, "the stack");
	/* an address nothing maps: that operation fails */
	vt_send(p.qp[0], 4, IBV_WR_RDMA_WRITE, IBV_SEND_SIGNALED, src->addr,
		64, src->lkey, 4096, all->rkey);
	vt_expect_wc(p.scq[0], NULL, 4, IBV_WC_REM_ACCESS_ERR, "WRITE to page 1");

	ck_assert_int_eq(ibv_dereg_mr(all), 0);
	vt_dereg(src);
	vt_pair_free(&p);
	munmap(fresh, len);
	free(heap);
}
END_TEST

/* ODP pins nothing, so charges nothing (run under a lowered rlimit). */
START_TEST(no_memlock)
{
	size_t big = 64u << 20, plain = 2u << 20;
	struct rlimit rl = { .rlim_cur = 1u << 20 };
	struct ibv_mr *odp, *mr;
	void *a = map_anon(big), *b = map_anon(plain);

	ck_assert_int_eq(getrlimit(RLIMIT_MEMLOCK, &rl), 0);
	rl.rlim_cur = 1u << 20;
	ck_assert_int_eq(setrlimit(RLIMIT_MEMLOCK, &rl), 0);
	mr = ibv_reg_mr(D.pd, b, plain, VT_ACCESS_ALL);
	ck_assert_msg(mr == NULL && errno == ENOMEM,
		      "a plain 2 MiB MR under a 1 MiB RLIMIT_MEMLOCK");
	odp = ibv_reg_mr(D.pd, a, big, ODP_ACCESS);
	ck_assert_msg(odp != NULL, "64 MiB on demand: %s", strerror(errno));
	ck_assert_int_eq(ibv_dereg_mr(odp), 0);
	munmap(a, big);
	munmap(b, plain);
}
END_TEST

static int advise(struct ibv_pd *pd, int advice, uint32_t flags, void *addr,
		  uint32_t len, uint32_t lkey)
{
	struct ibv_sge sge = { .addr = (uintptr_t)addr, .length = len,
			       .lkey = lkey };

	return ibv_advise_mr(pd, advice, flags, &sge, 1);
}

/* Resident pages of [p, p + len). */
static int resident(void *p, size_t len)
{
	unsigned char vec[64];
	size_t n = len / (size_t)PSZ, i;
	int count = 0;

	ck_assert_uint_le(n, sizeof(vec));
	ck_assert_int_eq(mincore(p, len, vec), 0);
	for (i = 0; i < n; i++)
		count += vec[i] & 1;
	return count;
}

START_TEST(advise_prefetch)
{
	size_t len = 8 * (size_t)PSZ;
	uint8_t *buf = map_anon(len);
	struct ibv_mr *mr = ibv_reg_mr(D.pd, buf, len, ODP_ACCESS);

	ck_assert_ptr_nonnull(mr);
	ck_assert_int_eq(resident(buf, len), 0);
	ck_assert_int_eq(advise(D.pd, IBV_ADVISE_MR_ADVICE_PREFETCH_NO_FAULT, 0,
				buf, (uint32_t)len, mr->lkey), 0);
	ck_assert_int_eq(resident(buf, len), 0);
	ck_assert_int_eq(advise(D.pd, IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE,
				IBV_ADVISE_MR_FLAG_FLUSH, buf, (uint32_t)(4 * PSZ),
				mr->lkey), 0);
	ck_assert_int_eq(resident(buf, len), 4);
	ck_assert_int_eq(advise(D.pd, IBV_ADVISE_MR_ADVICE_PREFETCH, 0, buf,
				(uint32_t)len, mr->lkey), 0);
	ck_assert_int_eq(ibv_dereg_mr(mr), 0);
	munmap(buf, len);
}
END_TEST

START_TEST(advise_refused)
{
	size_t len = 4 * (size_t)PSZ;
	uint8_t *buf = map_anon(len);
	struct ibv_pd *pd2 = ibv_alloc_pd(D.ctx);
	struct ibv_mr *mr = ibv_reg_mr(D.pd, buf, len, ODP_ACCESS);
	struct ibv_mr *plain = vt_reg(D.pd, len, VT_ACCESS_ALL);
	struct ibv_sge sge = { .addr = (uintptr_t)buf, .length = 64,
			       .lkey = mr->lkey };

	ck_assert_ptr_nonnull(pd2);
	ck_assert_int_eq(advise(D.pd, 7, 0, buf, 64, mr->lkey), EINVAL);
	ck_assert_int_eq(advise(D.pd, IBV_ADVISE_MR_ADVICE_PREFETCH, 2, buf, 64,
				mr->lkey), EINVAL);
	ck_assert_int_eq(ibv_advise_mr(D.pd, IBV_ADVISE_MR_ADVICE_PREFETCH, 0,
				       &sge, 0), EINVAL);
	/* an lkey invalid here, a range out of the MR: EFAULT (the man page) */
	ck_assert_int_eq(advise(pd2, IBV_ADVISE_MR_ADVICE_PREFETCH, 0, buf, 64,
				mr->lkey), EFAULT);
	ck_assert_int_eq(advise(D.pd, IBV_ADVISE_MR_ADVICE_PREFETCH, 0,
				plain->addr, 64, plain->lkey), EFAULT);
	ck_assert_int_eq(advise(D.pd, IBV_ADVISE_MR_ADVICE_PREFETCH, 0,
				buf + len - 32, 64, mr->lkey), EFAULT);
	ck_assert_int_eq(advise(D.pd, IBV_ADVISE_MR_ADVICE_PREFETCH, 0, buf, 64,
				0xdeadbeef), EFAULT);
	/* nothing was touched, and the MR still works */
	ck_assert_int_eq(resident(buf, len), 0);
	ck_assert_int_eq(advise(D.pd, IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE, 0,
				buf, 64, mr->lkey), 0);
	/* an MR nobody may write: prefetching it for writing is EPERM */
	{
		struct ibv_mr *ro = ibv_reg_mr(D.pd, buf, len, IBV_ACCESS_ON_DEMAND);

		ck_assert_ptr_nonnull(ro);
		ck_assert_int_eq(advise(D.pd, IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE,
					0, buf, 64, ro->lkey), EPERM);
		ck_assert_int_eq(advise(D.pd, IBV_ADVISE_MR_ADVICE_PREFETCH, 0,
					buf, 64, ro->lkey), 0);
		ck_assert_int_eq(ibv_dereg_mr(ro), 0);
	}

	ck_assert_int_eq(ibv_dereg_mr(mr), 0);
	vt_dereg(plain);
	ck_assert_int_eq(ibv_dealloc_pd(pd2), 0);
	munmap(buf, len);
}
END_TEST

static Suite *odp_suite(void)
{
	Suite *s = suite_create("odp");
	TCase *tc = tcase_create("odp");

	tcase_set_timeout(tc, 30.0 * vt_tmul());
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, caps);
	tcase_add_test(tc, explicit_mapped_later);
	tcase_add_test(tc, explicit_hole);
	tcase_add_test(tc, implicit);
	tcase_add_test(tc, no_memlock);
	tcase_add_test(tc, advise_prefetch);
	tcase_add_test(tc, advise_refused);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return check_run(odp_suite(), CK_NORMAL);
}
