/*
 * domain-helper: thread and parent domains against a real daemon
 * (domain.sh): what ibv_alloc_td and ibv_alloc_parent_domain accept and
 * refuse, a parent domain standing in for its PD (an MR, a CQ on it), and
 * the lifetimes verbs gives them: nothing in use is freed (EBUSY).
 */
#include <check.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <infiniband/verbs.h>

#include "vt.h"
#include "tests/common/check_run.h"

static struct vt_dev D;

static void setup(void)
{
	vt_open(&D);
}

static void teardown(void)
{
	vt_close(&D);
}

static void *my_alloc(struct ibv_pd *pd, void *pd_context, size_t size,
		      size_t alignment, uint64_t resource_type)
{
	(void)pd; (void)pd_context; (void)size; (void)alignment;
	(void)resource_type;
	return IBV_ALLOCATOR_USE_DEFAULT;
}

static void my_free(struct ibv_pd *pd, void *pd_context, void *ptr,
		    uint64_t resource_type)
{
	(void)pd; (void)pd_context; (void)ptr; (void)resource_type;
}

START_TEST(refused)
{
	struct ibv_td_init_attr ta = { .comp_mask = 1 };
	struct ibv_parent_domain_init_attr pa = { .pd = NULL };
	struct ibv_td *td;
	struct ibv_pd *parent;

	ck_assert_ptr_null(ibv_alloc_td(D.ctx, &ta));
	ck_assert_int_eq(errno, EINVAL);
	ta.comp_mask = 0;
	td = ibv_alloc_td(D.ctx, &ta);
	ck_assert_ptr_nonnull(td);
	ck_assert_ptr_null(ibv_alloc_parent_domain(D.ctx, &pa));
	ck_assert_int_eq(errno, EINVAL);
	pa.pd = D.pd;
	pa.comp_mask = 1u << 5;
	ck_assert_ptr_null(ibv_alloc_parent_domain(D.ctx, &pa));
	ck_assert_int_eq(errno, EINVAL);
	pa.comp_mask = IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS;	/* no functions */
	ck_assert_ptr_null(ibv_alloc_parent_domain(D.ctx, &pa));
	ck_assert_int_eq(errno, EINVAL);
	pa.comp_mask = 0;
	pa.td = td;
	parent = ibv_alloc_parent_domain(D.ctx, &pa);
	ck_assert_ptr_nonnull(parent);
	/* a parent domain's PD must be a PD */
	pa.pd = parent;
	ck_assert_ptr_null(ibv_alloc_parent_domain(D.ctx, &pa));
	ck_assert_int_eq(errno, EINVAL);
	ck_assert_int_eq(ibv_dealloc_pd(parent), 0);
	ck_assert_int_eq(ibv_dealloc_td(td), 0);
}
END_TEST

START_TEST(stands_for_its_pd)
{
	struct ibv_td_init_attr ta = { 0 };
	struct ibv_td *td = ibv_alloc_td(D.ctx, &ta);
	struct ibv_parent_domain_init_attr pa = {
		.pd = D.pd, .td = td,
		.comp_mask = IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS |
			     IBV_PARENT_DOMAIN_INIT_ATTR_PD_CONTEXT,
		.alloc = my_alloc, .free = my_free, .pd_context = &D,
	};
	struct ibv_cq_init_attr_ex ca = {
		.cqe = 16, .comp_mask = IBV_CQ_INIT_ATTR_MASK_PD,
		.wc_flags = IBV_WC_STANDARD_FLAGS,
	};
	struct ibv_pd *parent;
	struct ibv_cq_ex *cq;
	struct ibv_mr *mr;
	void *buf = calloc(1, 4096);

	ck_assert_ptr_nonnull(td);
	parent = ibv_alloc_parent_domain(D.ctx, &pa);
	ck_assert_ptr_nonnull(parent);
	ck_assert_ptr_eq(parent->context, D.ctx);

	mr = ibv_reg_mr(parent, buf, 4096, VT_ACCESS_ALL);
	ck_assert_msg(mr != NULL, "MR on a parent domain: %s", strerror(errno));
	ck_assert_ptr_eq(mr->pd, parent);
	/* a CQ takes a parent domain, not a plain PD */
	ca.parent_domain = D.pd;
	ck_assert_ptr_null(ibv_create_cq_ex(D.ctx, &ca));
	ck_assert_int_eq(errno, EINVAL);
	ca.parent_domain = parent;
	cq = ibv_create_cq_ex(D.ctx, &ca);
	ck_assert_msg(cq != NULL, "CQ on a parent domain: %s", strerror(errno));

	{
		struct ibv_qp_init_attr qa = {
			.send_cq = ibv_cq_ex_to_cq(cq), .recv_cq = ibv_cq_ex_to_cq(cq),
			.cap = { .max_send_wr = 4, .max_recv_wr = 4,
				 .max_send_sge = 1, .max_recv_sge = 1 },
			.qp_type = IBV_QPT_RC,
		};
		struct ibv_qp *qp = ibv_create_qp(parent, &qa);

		ck_assert_msg(qp != NULL, "QP on a parent domain: %s",
			      strerror(errno));
		ck_assert_ptr_eq(qp->pd, parent);
		ck_assert_int_eq(ibv_dealloc_pd(parent), EBUSY);
		ck_assert_int_eq(ibv_destroy_qp(qp), 0);
	}
	/* in use: nothing goes */
	ck_assert_int_eq(ibv_dealloc_td(td), EBUSY);
	ck_assert_int_eq(ibv_dealloc_pd(D.pd), EBUSY);
	ck_assert_int_eq(ibv_dealloc_pd(parent), EBUSY);
	ck_assert_int_eq(ibv_dereg_mr(mr), 0);
	ck_assert_int_eq(ibv_dealloc_pd(parent), EBUSY);
	ck_assert_int_eq(ibv_destroy_cq(ibv_cq_ex_to_cq(cq)), 0);
	ck_assert_int_eq(ibv_dealloc_pd(parent), 0);
	ck_assert_int_eq(ibv_dealloc_td(td), 0);
	free(buf);
}
END_TEST

/* QPs on a parent domain with a thread domain post without locking. */
START_TEST(thread_domain_traffic)
{
	struct ibv_td_init_attr ta = { 0 };
	struct ibv_td *td = ibv_alloc_td(D.ctx, &ta);
	struct ibv_parent_domain_init_attr pa = { .pd = D.pd, .td = td };
	struct vt_dev P = D;
	struct ibv_mr *a, *b;
	struct vt_pair p;
	int i;

	ck_assert_ptr_nonnull(td);
	P.pd = ibv_alloc_parent_domain(D.ctx, &pa);
	ck_assert_ptr_nonnull(P.pd);
	vt_pair(&p, &P, NULL, 64);
	ck_assert_ptr_eq(p.qp[0]->pd, P.pd);
	a = vt_reg(P.pd, 4096, VT_ACCESS_ALL);
	b = vt_reg(P.pd, 4096, VT_ACCESS_ALL);
	vt_fill(a->addr, 4096, 0, 55);
	for (i = 0; i < 16; i++) {
		vt_recv(p.qp[1], 100 + (uint64_t)i, b->addr, 4096, b->lkey);
		vt_send(p.qp[0], (uint64_t)i, IBV_WR_SEND, IBV_SEND_SIGNALED,
			a->addr, 4096, a->lkey, 0, 0);
		vt_expect_ok(p.scq[0], NULL, (uint64_t)i, IBV_WC_SEND, "SEND");
		vt_expect_ok(p.rcq[1], NULL, 100 + (uint64_t)i, IBV_WC_RECV, "RECV");
		vt_expect_pat(b->addr, 4096, 0, 55, "what arrived");
	}
	vt_dereg(a);
	vt_dereg(b);
	vt_pair_free(&p);
	ck_assert_int_eq(ibv_dealloc_pd(P.pd), 0);
	ck_assert_int_eq(ibv_dealloc_td(td), 0);
}
END_TEST

static Suite *domain_suite(void)
{
	Suite *s = suite_create("domain");
	TCase *tc = tcase_create("domain");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, refused);
	tcase_add_test(tc, stands_for_its_pd);
	tcase_add_test(tc, thread_domain_traffic);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return check_run(domain_suite(), CK_NORMAL);
}
