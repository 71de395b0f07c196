/*
 * dm-helper: device memory against a real daemon (dm.sh), one process,
 * loopback RC QPs: ibv_alloc_dm and its limits, ibv_memcpy_to/from_dm,
 * zero-based MRs on it (ibv_reg_dm_mr) as RDMA targets and sources and as
 * a local buffer, ibv_free_dm refusing while an MR is on it, and
 * ibv_import_dm by handle (import.sh imports it in another process).
 */
#include <check.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <infiniband/verbs.h>

#include "vt.h"
#include "tests/common/check_run.h"

#define DM_ACCESS	(VT_ACCESS_ALL | IBV_ACCESS_ZERO_BASED)

static struct vt_dev D;
static uint64_t max_dm;

static void setup(void)
{
	struct ibv_device_attr_ex ex;

	vt_open(&D);
	ck_assert_int_eq(ibv_query_device_ex(D.ctx, NULL, &ex), 0);
	max_dm = ex.max_dm_size;
}

static void teardown(void)
{
	vt_close(&D);
}

static struct ibv_dm *dm_alloc(size_t len)
{
	struct ibv_alloc_dm_attr a = { .length = len };
	struct ibv_dm *dm = ibv_alloc_dm(D.ctx, &a);

	ck_assert_msg(dm != NULL, "ibv_alloc_dm(%zu): %s", len, strerror(errno));
	return dm;
}

START_TEST(limits)
{
	struct ibv_alloc_dm_attr a = { .length = 4096 };
	struct ibv_dm *dm;
	uint8_t buf[16] = { 0 };

	ck_assert_uint_eq(max_dm, 256 * 1024);
	a.comp_mask = 1;
	ck_assert_ptr_null(ibv_alloc_dm(D.ctx, &a));
	ck_assert_int_eq(errno, EINVAL);
	a.comp_mask = 0;
	a.length = 0;
	ck_assert_ptr_null(ibv_alloc_dm(D.ctx, &a));
	ck_assert_int_eq(errno, EINVAL);
	a.length = max_dm + 1;
	ck_assert_ptr_null(ibv_alloc_dm(D.ctx, &a));
	ck_assert_int_eq(errno, ENOMEM);
	a.length = 4096;
	a.log_align_req = 13;
	ck_assert_ptr_null(ibv_alloc_dm(D.ctx, &a));
	ck_assert_int_eq(errno, EINVAL);

	dm = dm_alloc(max_dm);
	ck_assert_int_eq(ibv_memcpy_to_dm(dm, max_dm - 8, buf, 16), EINVAL);
	ck_assert_int_eq(ibv_memcpy_from_dm(buf, dm, max_dm + 1, 0), EINVAL);
	ck_assert_int_eq(ibv_memcpy_to_dm(dm, max_dm - 16, buf, 16), 0);
	ck_assert_int_eq(ibv_free_dm(dm), 0);
}
END_TEST

/* A context holds 32 allocations at most: each keeps a daemon fd. */
START_TEST(per_context)
{
	struct ibv_alloc_dm_attr a = { .length = 4096 };
	struct ibv_dm *dms[40];
	int n, err, i;

	for (n = 0; n < 40 && (dms[n] = ibv_alloc_dm(D.ctx, &a)); n++)
		;
	err = errno;
	ck_assert_msg(n == 32, "%d allocations, want 32 (then %s)", n, strerror(err));
	for (i = 0; i < n; i++)
		ck_assert_int_eq(ibv_free_dm(dms[i]), 0);
	dms[0] = dm_alloc(4096);	/* freed ones count no more */
	ck_assert_int_eq(ibv_free_dm(dms[0]), 0);
}
END_TEST

START_TEST(copy)
{
	struct ibv_dm *dm = dm_alloc(8192);
	uint8_t in[3000], out[3000];

	vt_fill(in, sizeof(in), 0, 21);
	ck_assert_int_eq(ibv_memcpy_to_dm(dm, 1001, in, sizeof(in)), 0);
	memset(out, 0, sizeof(out));
	ck_assert_int_eq(ibv_memcpy_from_dm(out, dm, 1001, sizeof(out)), 0);
	vt_expect_pat(out, sizeof(out), 0, 21, "read back from device memory");
	ck_assert_int_eq(ibv_free_dm(dm), 0);
}
END_TEST

START_TEST(zero_based_mr)
{
	const size_t len = 8192, off = 100;
	struct ibv_dm *dm = dm_alloc(len);
	struct ibv_mr *mr, *host;
	struct vt_pair p;
	uint8_t *out = calloc(1, len);

	ck_assert_ptr_nonnull(out);
	/* zero-based only, and inside the allocation */
	ck_assert_ptr_null(ibv_reg_dm_mr(D.pd, dm, 0, len, VT_ACCESS_ALL));
	ck_assert_int_eq(errno, EINVAL);
	ck_assert_ptr_null(ibv_reg_dm_mr(D.pd, dm, off, len, DM_ACCESS));
	ck_assert_int_eq(errno, EINVAL);
	mr = ibv_reg_dm_mr(D.pd, dm, off, len - off, DM_ACCESS);
	ck_assert_msg(mr != NULL, "ibv_reg_dm_mr: %s", strerror(errno));
	ck_assert_ptr_null(mr->addr);
	ck_assert_int_eq(ibv_free_dm(dm), EBUSY);
	/* not to be registered again, as the kernel says (EINVAL) */
	ck_assert_int_eq(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_TRANSLATION, NULL,
				      out, len, 0), IBV_REREG_MR_ERR_INPUT);
	ck_assert_int_eq(errno, EINVAL);
	ck_assert_int_eq(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL,
				      0, DM_ACCESS), IBV_REREG_MR_ERR_INPUT);

	vt_pair(&p, &D, NULL, 16);
	host = vt_reg(D.pd, len, VT_ACCESS_ALL);
	vt_fill(host->addr, len, 0, 33);
	/* remote addresses are offsets into the MR: 0 is dm byte `off` */
	vt_send(p.qp[0], 1, IBV_WR_RDMA_WRITE, IBV_SEND_SIGNALED, host->addr,
		4000, host->lkey, 50, mr->rkey);
	vt_expect_ok(p.scq[0], NULL, 1, IBV_WC_RDMA_WRITE, "WRITE into device memory");
	ck_assert_int_eq(ibv_memcpy_from_dm(out, dm, off + 50, 4000), 0);
	vt_expect_pat(out, 4000, 0, 33, "device memory after the WRITE");
	/* past its end: refused */
	vt_send(p.qp[0], 2, IBV_WR_RDMA_WRITE, IBV_SEND_SIGNALED, host->addr,
		64, host->lkey, len - off - 32, mr->rkey);
	vt_expect_wc(p.scq[0], NULL, 2, IBV_WC_REM_ACCESS_ERR, "WRITE past its end");
	vt_pair_free(&p);

	/* a local buffer too, by offset: SEND from it */
	vt_pair(&p, &D, NULL, 16);
	memset(host->addr, 0, len);
	vt_recv(p.qp[1], 3, host->addr, (uint32_t)len, host->lkey);
	vt_send(p.qp[0], 4, IBV_WR_SEND, IBV_SEND_SIGNALED, (void *)50, 4000,
		mr->lkey, 0, 0);
	vt_expect_ok(p.scq[0], NULL, 4, IBV_WC_SEND, "SEND from device memory");
	vt_expect_ok(p.rcq[1], NULL, 3, IBV_WC_RECV, "its RECV");
	vt_expect_pat(host->addr, 4000, 0, 33, "what the SEND carried");

	ck_assert_int_eq(ibv_dereg_mr(mr), 0);
	ck_assert_int_eq(ibv_free_dm(dm), 0);
	vt_dereg(host);
	vt_pair_free(&p);
	free(out);
}
END_TEST

/*
 * An import is the same memory by another mapping: what one side writes
 * the other reads.  Bad and freed handles are refused; an unimport with
 * an MR still on the import leaves that MR working until it goes.
 */
START_TEST(import_by_handle)
{
	struct ibv_dm *dm = dm_alloc(5000), *imp;
	uint8_t in[5000], out[5000];
	struct ibv_mr *mr, *host;
	struct vt_pair p;
	uint32_t handle = dm->handle;

	ck_assert_uint_ne(handle, 0);
	imp = ibv_import_dm(D.ctx, handle);
	ck_assert_msg(imp != NULL, "ibv_import_dm: %s", strerror(errno));
	ck_assert_uint_eq(imp->handle, handle);
	ck_assert_ptr_eq(imp->context, D.ctx);
	vt_fill(in, sizeof(in), 0, 44);
	ck_assert_int_eq(ibv_memcpy_to_dm(dm, 0, in, sizeof(in)), 0);
	ck_assert_int_eq(ibv_memcpy_from_dm(out, imp, 0, sizeof(out)), 0);
	vt_expect_pat(out, sizeof(out), 0, 44, "the import reads the allocation");
	vt_fill(in, 100, 0, 45);
	ck_assert_int_eq(ibv_memcpy_to_dm(imp, 4900, in, 100), 0);
	ck_assert_int_eq(ibv_memcpy_from_dm(out, dm, 4900, 100), 0);
	vt_expect_pat(out, 100, 0, 45, "the allocation reads the import");
	/* the import is as long as the allocation, not its pages */
	ck_assert_int_eq(ibv_memcpy_to_dm(imp, 4990, in, 11), EINVAL);

	errno = 0;
	ck_assert_ptr_null(ibv_import_dm(D.ctx, handle + 1000));
	ck_assert_int_eq(errno, EINVAL);

	/* an MR on the import outlives the unimport */
	mr = ibv_reg_dm_mr(D.pd, imp, 0, 5000, DM_ACCESS);
	ck_assert_msg(mr != NULL, "ibv_reg_dm_mr on the import: %s", strerror(errno));
	ibv_unimport_dm(imp);
	vt_pair(&p, &D, NULL, 16);
	host = vt_reg(D.pd, 5000, VT_ACCESS_ALL);
	vt_send(p.qp[0], 1, IBV_WR_RDMA_READ, IBV_SEND_SIGNALED, host->addr,
		4000, host->lkey, 0, mr->rkey);
	vt_expect_ok(p.scq[0], NULL, 1, IBV_WC_RDMA_READ, "READ of the unimported DM's MR");
	vt_expect_pat(host->addr, 4000, 0, 44, "what the READ brought");
	ck_assert_int_eq(ibv_dereg_mr(mr), 0);
	vt_pair_free(&p);
	vt_dereg(host);

	ck_assert_int_eq(ibv_free_dm(dm), 0);
	errno = 0;
	ck_assert_ptr_null(ibv_import_dm(D.ctx, handle));
	ck_assert_int_eq(errno, EINVAL);
}
END_TEST

static Suite *dm_suite(void)
{
	Suite *s = suite_create("dm");
	TCase *tc = tcase_create("dm");

	tcase_set_timeout(tc, 30.0 * vt_tmul());
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, limits);
	tcase_add_test(tc, per_context);
	tcase_add_test(tc, copy);
	tcase_add_test(tc, zero_based_mr);
	tcase_add_test(tc, import_by_handle);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return check_run(dm_suite(), CK_NORMAL);
}
