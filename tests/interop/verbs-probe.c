/*
 * verbs-probe: the verbs API's edge cases, one line each, for comparing
 * two providers: the same binary runs on Linux's rxe (in the guest that
 * tests/interop/rxe boots) and on ibverbsd (through ibverbsd-run), and
 * the two outputs are diffed.  Each line is a call, what it returned and
 * errno; values are printed only where two correct devices agree (states,
 * flags, attributes a QP was given), never a device's limits.
 *
 * After the single calls, the whole QP state table ("table" lines): each
 * (from, to) pair with its usual attributes, each attribute bit added to
 * each transition that requires none, and where taken, the value
 * ibv_query_qp gives back; then values at and past the edges of their
 * fields ("value"), whether the capacities create returns hold that many
 * WRs and no more ("caps"), multicast attach and detach, type-1 binds.
 *
 * usage: verbs-probe [DEVICE]	(default: the first device)
 * tests/interop/verbs-probe builds it, runs it on both and diffs.
 *
 * Linked against libibverbs.so.1 alone, with no test framework, so that
 * it runs in a busybox guest.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <infiniband/verbs.h>

#include "probe-util.h"

#define PORT	1
#define BUFSZ	65536

static struct ibv_context *ctx;
static struct ibv_device_attr dev;
static struct ibv_port_attr port;
static int roce;
static int gid_index;
static char *buf;

/* the name of errno value E (glibc's strerrorname_np is 2.32+) */
static const char *ename(int e)
{
	static char other[16];

	switch (e) {
	case 0: return "0";
	case EINVAL: return "EINVAL";
	case ENOMEM: return "ENOMEM";
	case EBUSY: return "EBUSY";
	case EFAULT: return "EFAULT";
	case EPERM: return "EPERM";
	case EACCES: return "EACCES";
	case ENOSYS: return "ENOSYS";
	case EOPNOTSUPP: return "EOPNOTSUPP";
	case ENOENT: return "ENOENT";
	case ENODATA: return "ENODATA";
	case EAGAIN: return "EAGAIN";
	case EBADF: return "EBADF";
	case ENOSPC: return "ENOSPC";
	case EPROTONOSUPPORT: return "EPROTONOSUPPORT";
	case E2BIG: return "E2BIG";
	case ENODEV: return "ENODEV";
	case EIO: return "EIO";
	case ERANGE: return "ERANGE";
	case ENXIO: return "ENXIO";
	}
	snprintf(other, sizeof(other), "E%d", e);
	return other;
}

/* a call that returns 0 or -1 and errno */
static int rc_errno(const char *what, int rc)
{
	if (rc == 0)
		printf("%s: ok\n", what);
	else
		printf("%s: rc=%d errno=%s\n", what, rc, ename(errno));
	return rc;
}

/* a call that returns 0 or an errno value */
static int rc_val(const char *what, int rc)
{
	if (rc == 0)
		printf("%s: ok\n", what);
	else
		printf("%s: ret=%s\n", what, ename(rc < 0 ? -rc : rc));
	return rc;
}

/* a call that returns an object or NULL and errno */
static void *obj(const char *what, void *p)
{
	if (p)
		printf("%s: ok\n", what);
	else
		printf("%s: NULL errno=%s\n", what, ename(errno));
	return p;
}

static void probe_device(void)
{
	struct ibv_port_attr pa;
	struct ibv_device_attr_ex ex;
	struct ibv_query_device_ex_input in = { .comp_mask = 1 };
	union ibv_gid gid;
	uint16_t pkey;
	struct ibv_gid_entry ge;

	rc_val("query_device_ex(NULL input)", ibv_query_device_ex(ctx, NULL, &ex));
	rc_val("query_device_ex(input comp_mask 1)", ibv_query_device_ex(ctx, &in, &ex));
	{
		struct ibv_qp_attr qa;
		struct ibv_qp_init_attr qia;
		struct ibv_cq *cq = ibv_create_cq(ctx, 4, NULL, NULL, 0);
		struct ibv_pd *pd = ibv_alloc_pd(ctx);
		struct ibv_qp_init_attr ia = { .send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
					       .cap = { 1, 1, 1, 1, 0 } };
		struct ibv_qp *qp = ibv_create_qp(pd, &ia);

		rc_val("query_qp(mask ~0)", ibv_query_qp(qp, &qa, ~0, &qia));
		rc_val("query_qp(mask RATE_LIMIT)", ibv_query_qp(qp, &qa, IBV_QP_RATE_LIMIT, &qia));
		rc_val("query_qp(mask 0)", ibv_query_qp(qp, &qa, 0, &qia));
		ibv_destroy_qp(qp);
		ibv_dealloc_pd(pd);
		ibv_destroy_cq(cq);
	}
	rc_val("query_port(0)", ibv_query_port(ctx, 0, &pa));
	rc_val("query_port(2)", ibv_query_port(ctx, 2, &pa));
	rc_val("query_port(255)", ibv_query_port(ctx, 255, &pa));
	printf("port: state=%d lid=%u sm_lid=%u lmc=%u link_layer=%u max_msg_sz>0=%d\n",
	       port.state, port.lid, port.sm_lid, port.lmc, port.link_layer,
	       port.max_msg_sz > 0);
	rc_errno("query_gid(1, 0)", ibv_query_gid(ctx, PORT, 0, &gid));
	rc_errno("query_gid(1, gid_tbl_len)", ibv_query_gid(ctx, PORT, port.gid_tbl_len, &gid));
	rc_errno("query_gid(1, -1)", ibv_query_gid(ctx, PORT, -1, &gid));
	rc_errno("query_gid(0, 0)", ibv_query_gid(ctx, 0, 0, &gid));
	rc_errno("query_gid(2, 0)", ibv_query_gid(ctx, 2, 0, &gid));
	rc_val("query_gid_ex(1, 0)", ibv_query_gid_ex(ctx, PORT, 0, &ge, 0));
	rc_val("query_gid_ex(1, gid_tbl_len)", ibv_query_gid_ex(ctx, PORT, port.gid_tbl_len, &ge, 0));
	rc_val("query_gid_ex(1, 0, flags 1)", ibv_query_gid_ex(ctx, PORT, 0, &ge, 1));
	rc_val("query_gid_ex(2, 0)", ibv_query_gid_ex(ctx, 2, 0, &ge, 0));
	{
		struct ibv_gid_entry table[64];

		rc_val("query_gid_table(flags 1)", (int)ibv_query_gid_table(ctx, table, 64, 1));
		rc_val("query_gid_table(1 entry)", ibv_query_gid_table(ctx, table, 1, 0) < 0 ?
		       (int)ibv_query_gid_table(ctx, table, 1, 0) : 0);
	}
	if (roce) {
		/* an index past the populated ones: rxe has a hole there */
		rc_val("query_gid_ex(1, 7)", ibv_query_gid_ex(ctx, PORT, 7, &ge, 0));
		rc_errno("query_gid(1, 7)", ibv_query_gid(ctx, PORT, 7, &gid));
		printf("query_gid(1, 7) value zero=%d\n",
		       !gid.global.subnet_prefix && !gid.global.interface_id);
	}
	if (rc_errno("query_pkey(1, 0)", ibv_query_pkey(ctx, PORT, 0, &pkey)) == 0)
		printf("pkey[0]=0x%04x\n", be16toh(pkey));
	rc_errno("query_pkey(1, pkey_tbl_len)", ibv_query_pkey(ctx, PORT, port.pkey_tbl_len, &pkey));
	rc_errno("query_pkey(1, 65535)", ibv_query_pkey(ctx, PORT, 65535, &pkey));
	rc_errno("query_pkey(2, 0)", ibv_query_pkey(ctx, 2, 0, &pkey));
	rc_errno("query_pkey(0, 0)", ibv_query_pkey(ctx, 0, 0, &pkey));
	printf("get_pkey_index(0xffff)=%d\n", ibv_get_pkey_index(ctx, PORT, htobe16(0xffff)));
	printf("get_pkey_index(0x1234)=%d\n", ibv_get_pkey_index(ctx, PORT, htobe16(0x1234)));
}

static void probe_mr(struct ibv_pd *pd)
{
	static const struct { const char *name; int access; } acc[] = {
		{ "0", 0 },
		{ "REMOTE_WRITE", IBV_ACCESS_REMOTE_WRITE },
		{ "REMOTE_ATOMIC", IBV_ACCESS_REMOTE_ATOMIC },
		{ "REMOTE_READ", IBV_ACCESS_REMOTE_READ },
		{ "LOCAL_WRITE|REMOTE_WRITE", IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE },
		{ "LOCAL_WRITE|REMOTE_ATOMIC", IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_ATOMIC },
		{ "MW_BIND", IBV_ACCESS_MW_BIND },
		{ "ZERO_BASED", IBV_ACCESS_ZERO_BASED },
		{ "ON_DEMAND", IBV_ACCESS_ON_DEMAND },
		{ "LOCAL_WRITE|ON_DEMAND", IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_ON_DEMAND },
		{ "HUGETLB", IBV_ACCESS_HUGETLB },
		{ "RELAXED_ORDERING", IBV_ACCESS_RELAXED_ORDERING },
		{ "LOCAL_WRITE|RELAXED_ORDERING", IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_RELAXED_ORDERING },
		{ "1<<21 (optional range)", 1 << 21 },
		{ "1<<29 (optional range)", 1 << 29 },
		{ "1<<9", 1 << 9 },
		{ "1<<15", 1 << 15 },
		{ "1<<19", 1 << 19 },
	};
	char what[128];
	struct ibv_mr *mr, *mr2;
	void *ro;
	size_t i;
	struct ibv_pd *pd2;

	for (i = 0; i < sizeof(acc) / sizeof(acc[0]); i++) {
		snprintf(what, sizeof(what), "reg_mr(4096, %s)", acc[i].name);
		mr = obj(what, ibv_reg_mr_iova2(pd, buf, 4096, (uintptr_t)buf, acc[i].access));
		if (mr)
			ibv_dereg_mr(mr);
	}
	mr = obj("reg_mr(len 0)", ibv_reg_mr(pd, buf, 0, IBV_ACCESS_LOCAL_WRITE));
	if (mr) {
		printf("reg_mr(len 0) length=%zu\n", mr->length);
		ibv_dereg_mr(mr);
	}
	mr = obj("reg_mr(NULL, 4096)", ibv_reg_mr(pd, NULL, 4096, IBV_ACCESS_LOCAL_WRITE));
	if (mr)
		ibv_dereg_mr(mr);
	mr = obj("reg_mr(NULL, 0)", ibv_reg_mr(pd, NULL, 0, 0));
	if (mr)
		ibv_dereg_mr(mr);
	mr = obj("reg_mr(unmapped)", ibv_reg_mr(pd, (void *)0x1000, 4096, 0));
	if (mr)
		ibv_dereg_mr(mr);
	ro = mmap(NULL, 8192, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	mr = obj("reg_mr(read-only, LOCAL_WRITE)", ibv_reg_mr(pd, ro, 8192, IBV_ACCESS_LOCAL_WRITE));
	if (mr)
		ibv_dereg_mr(mr);
	mr = obj("reg_mr(read-only, REMOTE_READ)", ibv_reg_mr(pd, ro, 8192, IBV_ACCESS_REMOTE_READ));
	if (mr)
		ibv_dereg_mr(mr);
	mr = obj("reg_mr(read-only, 0)", ibv_reg_mr(pd, ro, 8192, 0));
	if (mr)
		ibv_dereg_mr(mr);
	munmap(ro, 8192);
	mr = obj("reg_mr(unaligned addr+1, 100)", ibv_reg_mr(pd, buf + 1, 100, IBV_ACCESS_LOCAL_WRITE));
	if (mr) {
		printf("reg_mr(unaligned) addr ok=%d length=%zu\n", mr->addr == buf + 1, mr->length);
		ibv_dereg_mr(mr);
	}
	mr = obj("reg_mr_iova2(iova 0x10000000)", ibv_reg_mr_iova2(pd, buf, 4096, 0x10000000, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ));
	if (mr)
		ibv_dereg_mr(mr);
	mr = obj("reg_mr_iova2(iova 0x10000001, page-aligned addr)", ibv_reg_mr_iova2(pd, buf, 4096, 0x10000001, IBV_ACCESS_LOCAL_WRITE));
	if (mr)
		ibv_dereg_mr(mr);
	mr = obj("reg_mr_iova2(iova 0)", ibv_reg_mr_iova2(pd, buf, 4096, 0, IBV_ACCESS_LOCAL_WRITE));
	if (mr)
		ibv_dereg_mr(mr);
	mr = obj("reg_mr_iova2(iova -4096, wraps)", ibv_reg_mr_iova2(pd, buf, 8192, (uint64_t)-4096, IBV_ACCESS_LOCAL_WRITE));
	if (mr)
		ibv_dereg_mr(mr);
	mr = obj("reg_dmabuf_mr(fd -1)", ibv_reg_dmabuf_mr(pd, 0, 4096, 0, -1, IBV_ACCESS_LOCAL_WRITE));
	if (mr)
		ibv_dereg_mr(mr);
	mr = obj("reg_dmabuf_mr(fd 0)", ibv_reg_dmabuf_mr(pd, 0, 4096, 0, 0, IBV_ACCESS_LOCAL_WRITE));
	if (mr)
		ibv_dereg_mr(mr);

	/* rereg */
	pd2 = ibv_alloc_pd(ctx);
	mr = ibv_reg_mr(pd, buf, 4096, IBV_ACCESS_LOCAL_WRITE);
	if (mr) {
		printf("rereg_mr(flags 0)=%d\n", ibv_rereg_mr(mr, 0, NULL, NULL, 0, 0));
		printf("rereg_mr(flags 1<<3)=%d\n", ibv_rereg_mr(mr, 1 << 3, NULL, NULL, 0, 0));
		errno = 0;
		printf("rereg_mr(ACCESS, REMOTE_READ)=%d errno=%s\n",
		       ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL, 0,
				    IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ), ename(errno));
		errno = 0;
		printf("rereg_mr(ACCESS, REMOTE_WRITE alone)=%d errno=%s\n",
		       ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL, 0,
				    IBV_ACCESS_REMOTE_WRITE), ename(errno));
		errno = 0;
		printf("rereg_mr(PD)=%d errno=%s\n",
		       ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_PD, pd2, NULL, 0, 0), ename(errno));
		errno = 0;
		printf("rereg_mr(PD NULL)=%d errno=%s\n",
		       ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_PD, NULL, NULL, 0, 0), ename(errno));
		errno = 0;
		printf("rereg_mr(TRANSLATION, buf+8192)=%d errno=%s\n",
		       ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_TRANSLATION, NULL, buf + 8192, 4096, 0), ename(errno));
		errno = 0;
		printf("rereg_mr(TRANSLATION, len 0)=%d errno=%s\n",
		       ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_TRANSLATION, NULL, buf, 0, 0), ename(errno));
		printf("rereg_mr after: pd2=%d\n", mr->pd == pd2);
		rc_val("dereg_mr(after rereg)", ibv_dereg_mr(mr));
	}
	/* an MR on pd2 keeps pd2 busy */
	mr2 = ibv_reg_mr(pd2, buf, 4096, 0);
	rc_val("dealloc_pd(with MR)", ibv_dealloc_pd(pd2));
	if (mr2)
		ibv_dereg_mr(mr2);
	rc_val("dealloc_pd(empty)", ibv_dealloc_pd(pd2));
}

static void probe_cq(void)
{
	struct ibv_cq *cq;
	struct ibv_comp_channel *ch;
	struct ibv_cq_init_attr_ex cx = { .cqe = 4 };
	struct ibv_cq_ex *cqx;

	cq = obj("create_cq(0)", ibv_create_cq(ctx, 0, NULL, NULL, 0));
	if (cq)
		ibv_destroy_cq(cq);
	cq = obj("create_cq(-1)", ibv_create_cq(ctx, -1, NULL, NULL, 0));
	if (cq)
		ibv_destroy_cq(cq);
	cq = obj("create_cq(max_cqe)", ibv_create_cq(ctx, dev.max_cqe, NULL, NULL, 0));
	if (cq)
		ibv_destroy_cq(cq);
	cq = obj("create_cq(max_cqe+1)", ibv_create_cq(ctx, dev.max_cqe + 1, NULL, NULL, 0));
	if (cq)
		ibv_destroy_cq(cq);
	cq = obj("create_cq(1, comp_vector num_comp_vectors)", ibv_create_cq(ctx, 1, NULL, NULL, ctx->num_comp_vectors));
	if (cq)
		ibv_destroy_cq(cq);
	cq = obj("create_cq(1, comp_vector -1)", ibv_create_cq(ctx, 1, NULL, NULL, -1));
	if (cq)
		ibv_destroy_cq(cq);
	cq = obj("create_cq(1)", ibv_create_cq(ctx, 1, NULL, NULL, 0));
	if (cq) {
		printf("create_cq(1) cqe>=1=%d\n", cq->cqe >= 1);
		rc_val("resize_cq(0)", ibv_resize_cq(cq, 0));
		rc_val("resize_cq(max_cqe+1)", ibv_resize_cq(cq, dev.max_cqe + 1));
		rc_val("resize_cq(8)", ibv_resize_cq(cq, 8));
		printf("resize_cq(8) cqe>=8=%d\n", cq->cqe >= 8);
		rc_val("resize_cq(1)", ibv_resize_cq(cq, 1));
		ibv_destroy_cq(cq);
	}
	ch = ibv_create_comp_channel(ctx);
	cq = ibv_create_cq(ctx, 1, NULL, ch, 0);
	rc_errno("destroy_comp_channel(with CQ)", ibv_destroy_comp_channel(ch));
	rc_val("req_notify_cq(0)", ibv_req_notify_cq(cq, 0));
	rc_val("req_notify_cq(1)", ibv_req_notify_cq(cq, 1));
	ibv_destroy_cq(cq);
	rc_errno("destroy_comp_channel(empty)", ibv_destroy_comp_channel(ch));

	cx.wc_flags = IBV_WC_EX_WITH_COMPLETION_TIMESTAMP;
	cqx = obj("create_cq_ex(COMPLETION_TIMESTAMP)", ibv_create_cq_ex(ctx, &cx));
	if (cqx)
		ibv_destroy_cq(ibv_cq_ex_to_cq(cqx));
	cx.wc_flags = IBV_WC_EX_WITH_BYTE_LEN | IBV_WC_EX_WITH_IMM | IBV_WC_EX_WITH_QP_NUM |
		      IBV_WC_EX_WITH_SRC_QP | IBV_WC_EX_WITH_SLID | IBV_WC_EX_WITH_SL |
		      IBV_WC_EX_WITH_DLID_PATH_BITS;
	cqx = obj("create_cq_ex(standard flags)", ibv_create_cq_ex(ctx, &cx));
	if (cqx)
		ibv_destroy_cq(ibv_cq_ex_to_cq(cqx));
	cx.wc_flags = 1ull << 40;
	cqx = obj("create_cq_ex(wc_flags 1<<40)", ibv_create_cq_ex(ctx, &cx));
	if (cqx)
		ibv_destroy_cq(ibv_cq_ex_to_cq(cqx));
	cx.wc_flags = 0;
	cx.comp_mask = 1 << 7;
	cqx = obj("create_cq_ex(comp_mask 1<<7)", ibv_create_cq_ex(ctx, &cx));
	if (cqx)
		ibv_destroy_cq(ibv_cq_ex_to_cq(cqx));
	cx.comp_mask = IBV_CQ_INIT_ATTR_MASK_FLAGS;
	cx.flags = IBV_CREATE_CQ_ATTR_SINGLE_THREADED;
	cqx = obj("create_cq_ex(SINGLE_THREADED)", ibv_create_cq_ex(ctx, &cx));
	if (cqx)
		ibv_destroy_cq(ibv_cq_ex_to_cq(cqx));
	cx.flags = IBV_CREATE_CQ_ATTR_IGNORE_OVERRUN;
	cqx = obj("create_cq_ex(IGNORE_OVERRUN)", ibv_create_cq_ex(ctx, &cx));
	if (cqx)
		ibv_destroy_cq(ibv_cq_ex_to_cq(cqx));
}

static unsigned int qp_depth = 4;

static struct ibv_qp *make_qp(struct ibv_pd *pd, struct ibv_cq *cq, enum ibv_qp_type t,
			      struct ibv_srq *srq)
{
	struct ibv_qp_init_attr ia = {
		.send_cq = cq, .recv_cq = cq, .srq = srq, .qp_type = t,
		.cap = { .max_send_wr = qp_depth, .max_recv_wr = 4, .max_send_sge = 1,
			 .max_recv_sge = 1, .max_inline_data = 0 },
	};
	return ibv_create_qp(pd, &ia);
}

static void show_qp(const char *when, struct ibv_qp *qp)
{
	struct ibv_qp_attr a;
	struct ibv_qp_init_attr ia;
	int rc;

	memset(&a, 0x5a, sizeof(a));
	rc = ibv_query_qp(qp, &a, IBV_QP_RATE_LIMIT - 1, &ia);
	if (rc) {
		rc_val(when, rc);
		return;
	}
	printf("%s %s: state=%d cur=%d access=0x%x pkey=%u port=%u qkey=0x%x mtu=%d"
	       " timeout=%u retry=%u rnr_retry=%u min_rnr=%u rd_atomic=%u dest_rd_atomic=%u"
	       " sq_psn=%u rq_psn=%u dest_qp_self=%d sq_draining=%u sqd_notify=%u"
	       " ah.is_global=%u ah.port=%u ah.sgid=%u ah.hop=%u ah.dlid=%u ah.sl=%u"
	       " alt_port=%u mig=%d\n",
	       when, probe_qp_type_name(qp->qp_type), a.qp_state, a.cur_qp_state, a.qp_access_flags,
	       a.pkey_index, a.port_num, a.qkey, a.path_mtu, a.timeout, a.retry_cnt,
	       a.rnr_retry, a.min_rnr_timer, a.max_rd_atomic, a.max_dest_rd_atomic,
	       a.sq_psn, a.rq_psn, a.dest_qp_num == qp->qp_num, a.sq_draining,
	       a.en_sqd_async_notify, a.ah_attr.is_global, a.ah_attr.port_num,
	       a.ah_attr.grh.sgid_index, a.ah_attr.grh.hop_limit, a.ah_attr.dlid,
	       a.ah_attr.sl, a.alt_port_num, a.path_mig_state);
	printf("%s %s: init qp_type=%d sq_sig_all=%d srq=%d cap_eq_attr=%d\n",
	       when, probe_qp_type_name(qp->qp_type), ia.qp_type, ia.sq_sig_all, ia.srq != NULL,
	       !memcmp(&ia.cap, &a.cap, sizeof(a.cap)));
}

static void ah_self(struct ibv_ah_attr *ah)
{
	probe_ah_self(ctx, PORT, &port, gid_index, ah);
}

static int init_mask(enum ibv_qp_type t)
{
	int m = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT;

	return m | (t == IBV_QPT_UD ? IBV_QP_QKEY : IBV_QP_ACCESS_FLAGS);
}

static int rtr_mask(enum ibv_qp_type t)
{
	if (t == IBV_QPT_UD)
		return IBV_QP_STATE;
	if (t == IBV_QPT_UC)
		return IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN;
	return IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
	       IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
}

static int rts_mask(enum ibv_qp_type t)
{
	if (t == IBV_QPT_RC)
		return IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
		       IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC;
	return IBV_QP_STATE | IBV_QP_SQ_PSN;
}

static void full_attr(struct ibv_qp *qp, struct ibv_qp_attr *a)
{
	memset(a, 0, sizeof(*a));
	a->pkey_index = 0;
	a->port_num = PORT;
	a->qkey = 0x11111111;
	a->qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
	ah_self(&a->ah_attr);
	a->path_mtu = IBV_MTU_1024;
	a->dest_qp_num = qp->qp_num;
	a->rq_psn = 0x123;
	a->sq_psn = 0x123;
	a->max_dest_rd_atomic = 1;
	a->min_rnr_timer = 12;
	a->timeout = 14;
	a->retry_cnt = 7;
	a->rnr_retry = 7;
	a->max_rd_atomic = 1;
}

static int to_state(struct ibv_qp *qp, enum ibv_qp_state s);

/* modify QP with ATTR and MASK, reported as LABEL */
static int mod(const char *label, struct ibv_qp *qp, enum ibv_qp_state s,
	       struct ibv_qp_attr *a, int mask)
{
	char what[160];

	a->qp_state = s;
	snprintf(what, sizeof(what), "modify_qp %s %s", probe_qp_type_name(qp->qp_type), label);
	return rc_val(what, ibv_modify_qp(qp, a, mask));
}

/* a modify that should fail: if it did not, QP goes back to state BACK */
static void bad(const char *label, struct ibv_qp *qp, enum ibv_qp_state s,
		struct ibv_qp_attr *a, int mask, enum ibv_qp_state back)
{
	struct ibv_qp_attr saved = *a;

	if (mod(label, qp, s, a, mask) == 0)
		to_state(qp, back);
	*a = saved;
}

/* QP from RESET to S (INIT, RTR or RTS) with the usual attributes */
static int to_state(struct ibv_qp *qp, enum ibv_qp_state s)
{
	struct ibv_qp_attr a;
	enum ibv_qp_type t = qp->qp_type;

	full_attr(qp, &a);
	a.qp_state = IBV_QPS_RESET;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE))
		return -1;
	if (s == IBV_QPS_RESET)
		return 0;
	a.qp_state = IBV_QPS_INIT;
	if (ibv_modify_qp(qp, &a, init_mask(t)))
		return -1;
	if (s == IBV_QPS_INIT)
		return 0;
	a.qp_state = IBV_QPS_RTR;
	if (ibv_modify_qp(qp, &a, rtr_mask(t)))
		return -1;
	if (s == IBV_QPS_RTR)
		return 0;
	a.qp_state = IBV_QPS_RTS;
	return ibv_modify_qp(qp, &a, rts_mask(t)) ? -1 : 0;
}

static int to_rts(struct ibv_qp *qp)
{
	struct ibv_qp_attr a;
	enum ibv_qp_type t = qp->qp_type;

	full_attr(qp, &a);
	a.qp_state = IBV_QPS_INIT;
	if (ibv_modify_qp(qp, &a, init_mask(t)))
		return -1;
	a.qp_state = IBV_QPS_RTR;
	if (ibv_modify_qp(qp, &a, rtr_mask(t)))
		return -1;
	a.qp_state = IBV_QPS_RTS;
	return ibv_modify_qp(qp, &a, rts_mask(t)) ? -1 : 0;
}

static void probe_transitions(struct ibv_pd *pd, struct ibv_cq *cq, enum ibv_qp_type t)
{
	struct ibv_qp *qp;
	struct ibv_qp_attr a;
	int bit;
	char what[96];
	static const struct { int bit; const char *name; } opt[] = {
		{ IBV_QP_QKEY, "QKEY" }, { IBV_QP_ACCESS_FLAGS, "ACCESS" },
		{ IBV_QP_AV, "AV" }, { IBV_QP_PATH_MTU, "PATH_MTU" },
		{ IBV_QP_TIMEOUT, "TIMEOUT" }, { IBV_QP_MAX_QP_RD_ATOMIC, "MAX_QP_RD_ATOMIC" },
		{ IBV_QP_MIN_RNR_TIMER, "MIN_RNR_TIMER" }, { IBV_QP_SQ_PSN, "SQ_PSN" },
		{ IBV_QP_RQ_PSN, "RQ_PSN" }, { IBV_QP_DEST_QPN, "DEST_QPN" },
		{ IBV_QP_PKEY_INDEX, "PKEY_INDEX" }, { IBV_QP_PORT, "PORT" },
		{ IBV_QP_ALT_PATH, "ALT_PATH" }, { IBV_QP_PATH_MIG_STATE, "PATH_MIG_STATE" },
		{ IBV_QP_CAP, "CAP" }, { IBV_QP_RETRY_CNT, "RETRY_CNT" },
		{ IBV_QP_RNR_RETRY, "RNR_RETRY" }, { IBV_QP_MAX_DEST_RD_ATOMIC, "MAX_DEST_RD_ATOMIC" },
		{ IBV_QP_EN_SQD_ASYNC_NOTIFY, "EN_SQD_ASYNC_NOTIFY" },
	};
	size_t i;

	qp = make_qp(pd, cq, t, NULL);
	if (!qp) {
		printf("create_qp %s: NULL errno=%s\n", probe_qp_type_name(t), ename(errno));
		return;
	}
	show_qp("reset", qp);
	full_attr(qp, &a);
	bad("RESET->RTR", qp, IBV_QPS_RTR, &a, rtr_mask(t) | init_mask(t), IBV_QPS_RESET);
	bad("RESET->RTS", qp, IBV_QPS_RTS, &a, IBV_QP_STATE, IBV_QPS_RESET);
	mod("RESET->RESET", qp, IBV_QPS_RESET, &a, IBV_QP_STATE);
	bad("RESET->SQD", qp, IBV_QPS_SQD, &a, IBV_QP_STATE, IBV_QPS_RESET);
	bad("RESET->INIT state only", qp, IBV_QPS_INIT, &a, IBV_QP_STATE, IBV_QPS_RESET);
	for (bit = 1; bit < (1 << 21); bit <<= 1) {
		if (!(init_mask(t) & bit) || bit == IBV_QP_STATE)
			continue;
		snprintf(what, sizeof(what), "RESET->INIT without 0x%x", bit);
		bad(what, qp, IBV_QPS_INIT, &a, init_mask(t) & ~bit, IBV_QPS_RESET);
	}
	for (i = 0; i < sizeof(opt) / sizeof(opt[0]); i++) {
		if (init_mask(t) & opt[i].bit)
			continue;
		snprintf(what, sizeof(what), "RESET->INIT with extra %s", opt[i].name);
		bad(what, qp, IBV_QPS_INIT, &a, init_mask(t) | opt[i].bit, IBV_QPS_RESET);
	}
	a.port_num = 2;
	bad("RESET->INIT port 2", qp, IBV_QPS_INIT, &a, init_mask(t), IBV_QPS_RESET);
	a.port_num = 0;
	bad("RESET->INIT port 0", qp, IBV_QPS_INIT, &a, init_mask(t), IBV_QPS_RESET);
	a.port_num = PORT;
	a.pkey_index = port.pkey_tbl_len;
	bad("RESET->INIT pkey_index tbl_len", qp, IBV_QPS_INIT, &a, init_mask(t), IBV_QPS_RESET);
	a.pkey_index = 0;
	if (t != IBV_QPT_UD) {
		a.qp_access_flags = IBV_ACCESS_REMOTE_ATOMIC | IBV_ACCESS_LOCAL_WRITE | (1 << 12);
		bad("RESET->INIT access with bit 12", qp, IBV_QPS_INIT, &a, init_mask(t), IBV_QPS_RESET);
		a.qp_access_flags = IBV_ACCESS_MW_BIND;
		bad("RESET->INIT access MW_BIND", qp, IBV_QPS_INIT, &a, init_mask(t), IBV_QPS_RESET);
		a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
		mod("RESET->INIT access all remote", qp, IBV_QPS_INIT, &a, init_mask(t));
		show_qp("init(all remote)", qp);
		mod("RESET->RESET", qp, IBV_QPS_RESET, &a, IBV_QP_STATE);
		a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
	}
	a.cur_qp_state = IBV_QPS_INIT;
	bad("RESET->INIT cur_state INIT (wrong)", qp, IBV_QPS_INIT, &a, init_mask(t) | IBV_QP_CUR_STATE, IBV_QPS_RESET);
	a.cur_qp_state = IBV_QPS_RESET;
	mod("RESET->INIT cur_state RESET", qp, IBV_QPS_INIT, &a, init_mask(t) | IBV_QP_CUR_STATE);
	mod("RESET", qp, IBV_QPS_RESET, &a, IBV_QP_STATE);
	mod("RESET->INIT", qp, IBV_QPS_INIT, &a, init_mask(t));
	show_qp("init", qp);
	mod("INIT->INIT state only", qp, IBV_QPS_INIT, &a, IBV_QP_STATE);
	mod("INIT->INIT with PKEY_INDEX|PORT", qp, IBV_QPS_INIT, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT);
	bad("INIT->RTS", qp, IBV_QPS_RTS, &a, rts_mask(t) | rtr_mask(t), IBV_QPS_INIT);
	bad("INIT->SQD", qp, IBV_QPS_SQD, &a, IBV_QP_STATE, IBV_QPS_INIT);
	bad("INIT->SQE", qp, IBV_QPS_SQE, &a, IBV_QP_STATE, IBV_QPS_INIT);
	for (bit = 1; bit < (1 << 21); bit <<= 1) {
		if (!(rtr_mask(t) & bit) || bit == IBV_QP_STATE)
			continue;
		snprintf(what, sizeof(what), "INIT->RTR without 0x%x", bit);
		bad(what, qp, IBV_QPS_RTR, &a, rtr_mask(t) & ~bit, IBV_QPS_INIT);
	}
	for (i = 0; i < sizeof(opt) / sizeof(opt[0]); i++) {
		if (rtr_mask(t) & opt[i].bit)
			continue;
		snprintf(what, sizeof(what), "INIT->RTR with extra %s", opt[i].name);
		if (mod(what, qp, IBV_QPS_RTR, &a, rtr_mask(t) | opt[i].bit) == 0) {
			mod("back to RESET", qp, IBV_QPS_RESET, &a, IBV_QP_STATE);
			mod("back to INIT", qp, IBV_QPS_INIT, &a, init_mask(t));
		}
	}
	if (t != IBV_QPT_UD) {
		a.path_mtu = IBV_MTU_4096;
		if (mod("INIT->RTR path_mtu 4096", qp, IBV_QPS_RTR, &a, rtr_mask(t)) == 0) {
			show_qp("rtr(mtu 4096)", qp);
			mod("back to RESET", qp, IBV_QPS_RESET, &a, IBV_QP_STATE);
			mod("back to INIT", qp, IBV_QPS_INIT, &a, init_mask(t));
		}
		a.path_mtu = 7;
		bad("INIT->RTR path_mtu 7", qp, IBV_QPS_RTR, &a, rtr_mask(t), IBV_QPS_INIT);
		a.path_mtu = IBV_MTU_1024;
		a.ah_attr.port_num = 2;
		bad("INIT->RTR ah port 2", qp, IBV_QPS_RTR, &a, rtr_mask(t), IBV_QPS_INIT);
		a.ah_attr.port_num = PORT;
		if (roce) {
			a.ah_attr.is_global = 0;
			bad("INIT->RTR ah without GRH", qp, IBV_QPS_RTR, &a, rtr_mask(t), IBV_QPS_INIT);
			a.ah_attr.is_global = 1;
			a.ah_attr.grh.sgid_index = port.gid_tbl_len;
			bad("INIT->RTR sgid_index tbl_len", qp, IBV_QPS_RTR, &a, rtr_mask(t), IBV_QPS_INIT);
			a.ah_attr.grh.sgid_index = gid_index;
		}
		a.max_dest_rd_atomic = dev.max_qp_rd_atom + 1;
		if (t == IBV_QPT_RC)
			bad("INIT->RTR max_dest_rd_atomic max+1", qp, IBV_QPS_RTR, &a, rtr_mask(t), IBV_QPS_INIT);
		a.max_dest_rd_atomic = 1;
		a.dest_qp_num = 1 << 24;
		bad("INIT->RTR dest_qpn 1<<24", qp, IBV_QPS_RTR, &a, rtr_mask(t), IBV_QPS_INIT);
		a.dest_qp_num = qp->qp_num;
	}
	mod("INIT->RTR", qp, IBV_QPS_RTR, &a, rtr_mask(t));
	show_qp("rtr", qp);
	mod("RTR->RTR state only", qp, IBV_QPS_RTR, &a, IBV_QP_STATE);
	bad("RTR->INIT", qp, IBV_QPS_INIT, &a, IBV_QP_STATE, IBV_QPS_RTR);
	for (bit = 1; bit < (1 << 21); bit <<= 1) {
		if (!(rts_mask(t) & bit) || bit == IBV_QP_STATE)
			continue;
		snprintf(what, sizeof(what), "RTR->RTS without 0x%x", bit);
		bad(what, qp, IBV_QPS_RTS, &a, rts_mask(t) & ~bit, IBV_QPS_RTR);
	}
	for (i = 0; i < sizeof(opt) / sizeof(opt[0]); i++) {
		if (rts_mask(t) & opt[i].bit)
			continue;
		snprintf(what, sizeof(what), "RTR->RTS with extra %s", opt[i].name);
		if (mod(what, qp, IBV_QPS_RTS, &a, rts_mask(t) | opt[i].bit) == 0) {
			mod("back to RESET", qp, IBV_QPS_RESET, &a, IBV_QP_STATE);
			mod("back to INIT", qp, IBV_QPS_INIT, &a, init_mask(t));
			mod("back to RTR", qp, IBV_QPS_RTR, &a, rtr_mask(t));
		}
	}
	if (t == IBV_QPT_RC) {
		a.max_rd_atomic = dev.max_qp_init_rd_atom + 1;
		bad("RTR->RTS max_rd_atomic max+1", qp, IBV_QPS_RTS, &a, rts_mask(t), IBV_QPS_RTR);
		a.max_rd_atomic = 1;
		a.retry_cnt = 8;
		bad("RTR->RTS retry_cnt 8", qp, IBV_QPS_RTS, &a, rts_mask(t), IBV_QPS_RTR);
		a.retry_cnt = 7;
		a.timeout = 32;
		bad("RTR->RTS timeout 32", qp, IBV_QPS_RTS, &a, rts_mask(t), IBV_QPS_RTR);
		a.timeout = 14;
	}
	if (t == IBV_QPT_RC) {
		struct ibv_qp_attr q;
		struct ibv_qp_init_attr qi;

		a.timeout = 40;
		if (mod("RTR->RTS timeout 40", qp, IBV_QPS_RTS, &a, rts_mask(t)) == 0) {
			ibv_query_qp(qp, &q, IBV_QP_TIMEOUT, &qi);
			printf("timeout 40 queried back: %u\n", q.timeout);
			to_state(qp, IBV_QPS_RTR);
		}
		a.timeout = 14;
	}
	mod("RTR->RTS", qp, IBV_QPS_RTS, &a, rts_mask(t));
	show_qp("rts", qp);
	mod("RTS->RTS state only", qp, IBV_QPS_RTS, &a, IBV_QP_STATE);
	if (t == IBV_QPT_RC) {
		a.min_rnr_timer = 20;
		mod("RTS->RTS MIN_RNR_TIMER", qp, IBV_QPS_RTS, &a, IBV_QP_STATE | IBV_QP_MIN_RNR_TIMER);
		a.qp_access_flags = IBV_ACCESS_REMOTE_READ;
		mod("RTS->RTS ACCESS_FLAGS", qp, IBV_QPS_RTS, &a, IBV_QP_STATE | IBV_QP_ACCESS_FLAGS);
		a.timeout = 3;
		mod("RTS->RTS TIMEOUT", qp, IBV_QPS_RTS, &a, IBV_QP_STATE | IBV_QP_TIMEOUT);
		show_qp("rts(changed)", qp);
	}
	bad("RTS->RTR", qp, IBV_QPS_RTR, &a, IBV_QP_STATE, IBV_QPS_RTS);
	bad("RTS->INIT", qp, IBV_QPS_INIT, &a, IBV_QP_STATE, IBV_QPS_RTS);
	mod("RTS->SQD", qp, IBV_QPS_SQD, &a, IBV_QP_STATE);
	show_qp("sqd", qp);
	mod("SQD->RTS", qp, IBV_QPS_RTS, &a, IBV_QP_STATE);
	show_qp("rts(from sqd)", qp);
	mod("RTS->SQE", qp, IBV_QPS_SQE, &a, IBV_QP_STATE);
	mod("RTS->ERR", qp, IBV_QPS_ERR, &a, IBV_QP_STATE);
	show_qp("err", qp);
	mod("ERR->RTS", qp, IBV_QPS_RTS, &a, IBV_QP_STATE);
	mod("ERR->INIT", qp, IBV_QPS_INIT, &a, init_mask(t));
	mod("ERR->ERR", qp, IBV_QPS_ERR, &a, IBV_QP_STATE);
	mod("ERR->RESET", qp, IBV_QPS_RESET, &a, IBV_QP_STATE);
	show_qp("reset(again)", qp);
	bad("state 42", qp, 42, &a, IBV_QP_STATE, IBV_QPS_RESET);
	bad("mask 0", qp, IBV_QPS_RESET, &a, 0, IBV_QPS_RESET);
	bad("mask without STATE (PKEY_INDEX)", qp, IBV_QPS_RESET, &a, IBV_QP_PKEY_INDEX, IBV_QPS_RESET);
	bad("mask bit 1<<30", qp, IBV_QPS_RESET, &a, IBV_QP_STATE | (1 << 30), IBV_QPS_RESET);
	ibv_destroy_qp(qp);
}

static void probe_qp_create(struct ibv_pd *pd, struct ibv_cq *cq)
{
	struct ibv_qp_init_attr ia;
	struct ibv_qp *qp;
	enum ibv_qp_type types[] = { IBV_QPT_RC, IBV_QPT_UC, IBV_QPT_UD };
	size_t i;
	char what[96];

	for (i = 0; i < 3; i++) {
		const char *n = probe_qp_type_name(types[i]);
#define TRY(label, field, value) do {						\
		memset(&ia, 0, sizeof(ia));					\
		ia.send_cq = cq; ia.recv_cq = cq; ia.qp_type = types[i];	\
		ia.cap.max_send_wr = 1; ia.cap.max_recv_wr = 1;			\
		ia.cap.max_send_sge = 1; ia.cap.max_recv_sge = 1;		\
		field = value;							\
		snprintf(what, sizeof(what), "create_qp %s %s", n, label);	\
		qp = obj(what, ibv_create_qp(pd, &ia));				\
		if (qp) ibv_destroy_qp(qp);					\
	} while (0)
		TRY("max_send_wr max+1", ia.cap.max_send_wr, dev.max_qp_wr + 1);
		TRY("max_recv_wr max+1", ia.cap.max_recv_wr, dev.max_qp_wr + 1);
		TRY("max_send_sge max+1", ia.cap.max_send_sge, dev.max_sge + 1);
		TRY("max_recv_sge max+1", ia.cap.max_recv_sge, dev.max_sge + 1);
		TRY("max_inline 1<<20", ia.cap.max_inline_data, 1 << 20);
		TRY("max_send_wr 0", ia.cap.max_send_wr, 0);
		TRY("max_recv_wr 0", ia.cap.max_recv_wr, 0);
		TRY("max_send_sge 0", ia.cap.max_send_sge, 0);
		TRY("sq_sig_all 2", ia.sq_sig_all, 2);
#undef TRY
		memset(&ia, 0, sizeof(ia));
		ia.send_cq = cq;
		ia.recv_cq = cq;
		ia.qp_type = types[i];
		ia.cap.max_send_wr = 3;
		ia.cap.max_recv_wr = 3;
		ia.cap.max_send_sge = 1;
		ia.cap.max_recv_sge = 1;
		ia.cap.max_inline_data = 20;
		qp = ibv_create_qp(pd, &ia);
		if (qp) {
			printf("create_qp %s caps: send_wr>=3=%d recv_wr>=3=%d sge>=1=%d,%d inline>=20=%d state=%d\n",
			       n, ia.cap.max_send_wr >= 3, ia.cap.max_recv_wr >= 3,
			       ia.cap.max_send_sge >= 1, ia.cap.max_recv_sge >= 1,
			       ia.cap.max_inline_data >= 20, qp->state);
			ibv_destroy_qp(qp);
		}
	}
	memset(&ia, 0, sizeof(ia));
	ia.send_cq = cq;
	ia.recv_cq = cq;
	ia.qp_type = 99;
	ia.cap.max_send_wr = 1;
	ia.cap.max_send_sge = 1;
	obj("create_qp type 99", ibv_create_qp(pd, &ia));
	ia.qp_type = IBV_QPT_XRC_SEND;
	qp = obj("create_qp XRC_SEND (no xrcd)", ibv_create_qp(pd, &ia));
	if (qp)
		ibv_destroy_qp(qp);
}

static void probe_post(struct ibv_pd *pd, struct ibv_mr *mr)
{
	struct ibv_cq *cq;
	enum ibv_qp_type types[] = { IBV_QPT_RC, IBV_QPT_UC, IBV_QPT_UD };
	struct ibv_sge sge[2] = {
		{ .addr = (uintptr_t)buf, .length = 64, .lkey = mr->lkey },
		{ .addr = (uintptr_t)buf + 64, .length = 64, .lkey = mr->lkey },
	};
	struct ibv_send_wr wr, wr2, *bad;
	struct ibv_recv_wr rwr, *rbad;
	struct ibv_qp *qp;
	struct ibv_qp_attr a;
	struct ibv_ah *ah;
	struct ibv_ah_attr aa;
	struct ibv_wc wc[16];
	char what[128];
	size_t i;
	int n;

	ah_self(&aa);
	ah = ibv_create_ah(pd, &aa);
	qp_depth = 64;
	for (i = 0; i < 3; i++) {
		const char *tn = probe_qp_type_name(types[i]);

		/* its own CQ, deep enough for all it flushes */
		cq = ibv_create_cq(ctx, 1024, NULL, NULL, 0);
		qp = make_qp(pd, cq, types[i], NULL);
		if (!qp)
			continue;
#define SEND(label, op, nsge, flags) do {					\
		memset(&wr, 0, sizeof(wr));					\
		wr.wr_id = 1; wr.sg_list = sge; wr.num_sge = nsge;		\
		wr.opcode = op; wr.send_flags = flags;				\
		wr.wr.rdma.remote_addr = (uintptr_t)buf; wr.wr.rdma.rkey = mr->rkey; \
		if (types[i] == IBV_QPT_UD) {					\
			wr.wr.ud.ah = ah; wr.wr.ud.remote_qpn = qp->qp_num;	\
			wr.wr.ud.remote_qkey = 0x11111111;			\
		}								\
		bad = NULL;							\
		snprintf(what, sizeof(what), "post_send %s %s", tn, label);	\
		n = ibv_post_send(qp, &wr, &bad);				\
		printf("%s: ret=%s bad_wr=%s\n", what, ename(n),		\
		       bad == &wr ? "wr" : bad ? "other" : "NULL");		\
		usleep(20000);							\
		while (ibv_poll_cq(cq, 16, wc) > 0)				\
			;							\
	} while (0)
		memset(&rwr, 0, sizeof(rwr));
		rwr.sg_list = sge;
		rwr.num_sge = 1;
		rbad = NULL;
		n = ibv_post_recv(qp, &rwr, &rbad);
		printf("post_recv %s in RESET: ret=%s bad_wr=%s\n", tn, ename(n), rbad ? "set" : "NULL");
		SEND("in RESET", IBV_WR_SEND, 1, IBV_SEND_SIGNALED);
		full_attr(qp, &a);
		a.qp_state = IBV_QPS_INIT;
		ibv_modify_qp(qp, &a, init_mask(types[i]));
		rbad = NULL;
		n = ibv_post_recv(qp, &rwr, &rbad);
		printf("post_recv %s in INIT: ret=%s bad_wr=%s\n", tn, ename(n), rbad ? "set" : "NULL");
		SEND("in INIT", IBV_WR_SEND, 1, IBV_SEND_SIGNALED);
		a.qp_state = IBV_QPS_RTR;
		ibv_modify_qp(qp, &a, rtr_mask(types[i]));
		SEND("in RTR", IBV_WR_SEND, 1, IBV_SEND_SIGNALED);
		a.qp_state = IBV_QPS_RTS;
		ibv_modify_qp(qp, &a, rts_mask(types[i]));
		ibv_poll_cq(cq, 16, wc);
		rwr.num_sge = 2;
		rbad = NULL;
		n = ibv_post_recv(qp, &rwr, &rbad);
		printf("post_recv %s 2 sge (max 1): ret=%s bad_wr=%s\n", tn, ename(n), rbad == &rwr ? "wr" : rbad ? "other" : "NULL");
		SEND("2 sge (max 1)", IBV_WR_SEND, 2, 0);
		SEND("inline 128 (max 0)", IBV_WR_SEND, 1, IBV_SEND_INLINE);
		SEND("RDMA_WRITE", IBV_WR_RDMA_WRITE, 1, 0);
		SEND("RDMA_WRITE_WITH_IMM", IBV_WR_RDMA_WRITE_WITH_IMM, 1, 0);
		SEND("RDMA_READ", IBV_WR_RDMA_READ, 1, 0);
		SEND("ATOMIC_CMP_AND_SWP", IBV_WR_ATOMIC_CMP_AND_SWP, 1, 0);
		SEND("SEND_WITH_INV", IBV_WR_SEND_WITH_INV, 1, 0);
		SEND("LOCAL_INV", IBV_WR_LOCAL_INV, 0, 0);
		SEND("TSO", IBV_WR_TSO, 1, 0);
		SEND("opcode 99", 99, 1, 0);
		SEND("flags 1<<9", IBV_WR_SEND, 1, 1 << 9);
		SEND("SEND_WITH_IMM", IBV_WR_SEND_WITH_IMM, 1, 0);
		ibv_poll_cq(cq, 16, wc);
		/* the second of two is bad: bad_wr points at it */
		memset(&wr, 0, sizeof(wr));
		wr.sg_list = sge;
		wr.num_sge = 1;
		wr.opcode = IBV_WR_SEND;
		wr.next = &wr2;
		wr.wr.ud.ah = ah;
		wr.wr.ud.remote_qpn = qp->qp_num;
		wr2 = wr;
		wr2.next = NULL;
		wr2.num_sge = 2;
		bad = NULL;
		n = ibv_post_send(qp, &wr, &bad);
		printf("post_send %s second bad: ret=%s bad_wr=%s\n", tn, ename(n),
		       bad == &wr2 ? "second" : bad == &wr ? "first" : "other");
		usleep(100000);
		n = ibv_poll_cq(cq, 16, wc);
		printf("post_send %s second bad: first completed=%d\n", tn, n);
		/* past the queue's depth: post until refused */
		memset(&wr, 0, sizeof(wr));
		wr.sg_list = sge;
		wr.num_sge = 1;
		wr.opcode = IBV_WR_SEND;
		wr.wr.ud.ah = ah;
		wr.wr.ud.remote_qpn = qp->qp_num;
		wr.wr.ud.remote_qkey = 0x11111111;
		/* the posts above may have failed the QP: SQD, or where it is */
		n = ibv_modify_qp(qp, &(struct ibv_qp_attr){ .qp_state = IBV_QPS_SQD },
				  IBV_QP_STATE);
		{
			struct ibv_qp_init_attr qi;
			struct ibv_qp_attr qa;

			printf("modify_qp %s to SQD after the posts: ret=%s state=%s\n", tn,
			       ename(n), ibv_query_qp(qp, &qa, IBV_QP_STATE, &qi) ? "?" :
			       probe_qp_state_name(qa.qp_state));
		}
		n = 0;
		for (int k = 0; k < 10000; k++) {
			n = ibv_post_send(qp, &wr, &bad);
			if (n) {
				printf("post_send %s in SQD until full: ret=%s after %s\n", tn,
				       ename(n), k >= 4 ? ">=4" : "<4");
				break;
			}
		}
		if (!n)
			printf("post_send %s in SQD: 10000 accepted\n", tn);
		a.qp_state = IBV_QPS_ERR;
		ibv_modify_qp(qp, &a, IBV_QP_STATE);
		SEND("in ERR", IBV_WR_SEND, 1, IBV_SEND_SIGNALED);
		rbad = NULL;
		rwr.num_sge = 1;
		n = ibv_post_recv(qp, &rwr, &rbad);
		printf("post_recv %s in ERR: ret=%s\n", tn, ename(n));
		usleep(100000);
		n = ibv_poll_cq(cq, 16, wc);
		printf("poll after ERR %s: n>0=%d status0=%d\n", tn, n > 0, n > 0 ? (int)wc[0].status : -1);
		while (ibv_poll_cq(cq, 16, wc) > 0)
			;
		ibv_destroy_qp(qp);
		ibv_destroy_cq(cq);
#undef SEND
	}
	qp_depth = 4;
	if (ah)
		ibv_destroy_ah(ah);
}

static void probe_srq(struct ibv_pd *pd, struct ibv_cq *cq)
{
	struct ibv_srq_init_attr si;
	struct ibv_srq *srq;
	struct ibv_srq_attr sa;
	struct ibv_qp *qp;
	struct ibv_recv_wr rwr, *rbad;
	struct ibv_sge sge[2] = { { (uintptr_t)buf, 8, 0 }, { (uintptr_t)buf, 8, 0 } };

#define TRY(label, wr, sgel, lim) do {						\
	memset(&si, 0, sizeof(si));						\
	si.attr.max_wr = wr; si.attr.max_sge = sgel; si.attr.srq_limit = lim;	\
	srq = obj("create_srq " label, ibv_create_srq(pd, &si));		\
	if (srq) ibv_destroy_srq(srq);						\
} while (0)
	TRY("max_wr 0", 0, 1, 0);
	TRY("max_wr max+1", dev.max_srq_wr + 1, 1, 0);
	TRY("max_sge max+1", 4, dev.max_srq_sge + 1, 0);
	TRY("max_sge 0", 4, 0, 0);
	TRY("srq_limit 5 > max_wr 4", 4, 1, 5);
#undef TRY
	memset(&si, 0, sizeof(si));
	si.attr.max_wr = 4;
	si.attr.max_sge = 1;
	srq = obj("create_srq 4", ibv_create_srq(pd, &si));
	if (!srq)
		return;
	printf("create_srq 4: max_wr>=4=%d max_sge>=1=%d\n", si.attr.max_wr >= 4, si.attr.max_sge >= 1);
	if (rc_val("query_srq", ibv_query_srq(srq, &sa)) == 0)
		printf("query_srq: srq_limit=%u max_wr>=4=%d\n", sa.srq_limit, sa.max_wr >= 4);
	sa.srq_limit = 1000000;
	rc_val("modify_srq LIMIT above max_wr", ibv_modify_srq(srq, &sa, IBV_SRQ_LIMIT));
	sa.srq_limit = 2;
	rc_val("modify_srq LIMIT 2", ibv_modify_srq(srq, &sa, IBV_SRQ_LIMIT));
	sa.max_wr = 16;
	rc_val("modify_srq MAX_WR 16", ibv_modify_srq(srq, &sa, IBV_SRQ_MAX_WR));
	sa.max_wr = 1;
	rc_val("modify_srq MAX_WR 1 (shrink)", ibv_modify_srq(srq, &sa, IBV_SRQ_MAX_WR));
	sa.max_wr = dev.max_srq_wr + 1;
	rc_val("modify_srq MAX_WR max+1", ibv_modify_srq(srq, &sa, IBV_SRQ_MAX_WR));
	rc_val("modify_srq mask 0", ibv_modify_srq(srq, &sa, 0));
	rc_val("modify_srq mask 1<<5", ibv_modify_srq(srq, &sa, 1 << 5));
	if (rc_val("query_srq after", ibv_query_srq(srq, &sa)) == 0)
		printf("query_srq after: srq_limit=%u\n", sa.srq_limit);
	memset(&rwr, 0, sizeof(rwr));
	rwr.sg_list = sge;
	rwr.num_sge = 2;
	rbad = NULL;
	printf("post_srq_recv 2 sge: ret=%s bad_wr=%s\n", ename(ibv_post_srq_recv(srq, &rwr, &rbad)),
	       rbad == &rwr ? "wr" : rbad ? "other" : "NULL");
	qp = obj("create_qp RC on srq", make_qp(pd, cq, IBV_QPT_RC, srq));
	if (qp) {
		struct ibv_qp_init_attr ia;
		struct ibv_qp_attr qa;

		ibv_query_qp(qp, &qa, IBV_QP_CAP, &ia);
		printf("qp on srq: cap.max_recv_wr=%u srq=%d\n", qa.cap.max_recv_wr, ia.srq == srq);
		rwr.num_sge = 1;
		printf("post_recv on srq qp: ret=%s\n", ename(ibv_post_recv(qp, &rwr, &rbad)));
		rc_val("destroy_srq(with QP)", ibv_destroy_srq(srq));
		ibv_destroy_qp(qp);
	}
	qp = obj("create_qp UD on srq", make_qp(pd, cq, IBV_QPT_UD, srq));
	if (qp)
		ibv_destroy_qp(qp);
	qp = obj("create_qp UC on srq", make_qp(pd, cq, IBV_QPT_UC, srq));
	if (qp)
		ibv_destroy_qp(qp);
	rc_val("destroy_srq", ibv_destroy_srq(srq));
}

static void probe_ah(struct ibv_pd *pd)
{
	struct ibv_ah_attr aa;
	struct ibv_ah *ah;

#define TRY(label, stmt) do {					\
	ah_self(&aa);						\
	stmt;							\
	ah = obj("create_ah " label, ibv_create_ah(pd, &aa));	\
	if (ah) ibv_destroy_ah(ah);				\
} while (0)
	TRY("self", (void)0);
	TRY("port 0", aa.port_num = 0);
	TRY("port 2", aa.port_num = 2);
	TRY("sgid_index tbl_len", (aa.is_global = 1, aa.grh.sgid_index = port.gid_tbl_len));
	TRY("sgid_index 7", (aa.is_global = 1, aa.grh.sgid_index = 7));
	TRY("no GRH", aa.is_global = 0);
	TRY("dlid 0, no GRH", (aa.is_global = 0, aa.dlid = 0));
	TRY("GRH dgid zero", (aa.is_global = 1, memset(&aa.grh.dgid, 0, 16)));
	TRY("GRH dgid multicast", (aa.is_global = 1, aa.grh.dgid.raw[0] = 0xff));
	TRY("GRH dgid ff0e::1", (aa.is_global = 1, memset(&aa.grh.dgid, 0, 16),
				 aa.grh.dgid.raw[0] = 0xff, aa.grh.dgid.raw[1] = 0x0e,
				 aa.grh.dgid.raw[15] = 1));
	TRY("GRH dgid ::ffff:224.0.0.1", (aa.is_global = 1, memset(&aa.grh.dgid, 0, 16),
				 aa.grh.dgid.raw[10] = 0xff, aa.grh.dgid.raw[11] = 0xff,
				 aa.grh.dgid.raw[12] = 224, aa.grh.dgid.raw[15] = 1));
	TRY("sl 16", aa.sl = 16);
	TRY("static_rate 99", aa.static_rate = 99);
	TRY("hop_limit 0", (aa.is_global = 1, aa.grh.hop_limit = 0));
	TRY("dlid 0xc000 (multicast LID)", (aa.dlid = 0xc000));
#undef TRY
}

static void probe_mw(struct ibv_pd *pd)
{
	struct ibv_cq *cq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
	struct ibv_mw *mw;
	struct ibv_mr *mr, *mr_nobind;
	struct ibv_qp *qp;
	struct ibv_mw_bind bind;
	struct ibv_wc wc;
	int n, k;

	mw = obj("alloc_mw(99)", ibv_alloc_mw(pd, 99));
	if (mw)
		ibv_dealloc_mw(mw);
	mw = obj("alloc_mw(TYPE_1)", ibv_alloc_mw(pd, IBV_MW_TYPE_1));
	if (mw) {
		printf("alloc_mw(TYPE_1) type=%d\n", mw->type);
	}
	mr = ibv_reg_mr(pd, buf, BUFSZ, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_MW_BIND | IBV_ACCESS_REMOTE_READ);
	mr_nobind = ibv_reg_mr(pd, buf, BUFSZ, IBV_ACCESS_LOCAL_WRITE);
	qp = make_qp(pd, cq, IBV_QPT_RC, NULL);
	if (mw && mr && qp && to_rts(qp) == 0) {
		memset(&bind, 0, sizeof(bind));
		bind.wr_id = 7;
		bind.send_flags = IBV_SEND_SIGNALED;
		bind.bind_info.mr = mr;
		bind.bind_info.addr = (uintptr_t)buf;
		bind.bind_info.length = 4096;
		bind.bind_info.mw_access_flags = IBV_ACCESS_REMOTE_READ;
		n = ibv_bind_mw(qp, mw, &bind);
		printf("bind_mw type1: ret=%s\n", ename(n));
		for (k = 0; k < 100 && (n = ibv_poll_cq(cq, 1, &wc)) == 0; k++)
			usleep(10000);
		printf("bind_mw type1 completion: n=%d status=%d opcode=%d\n",
		       n, n > 0 ? (int)wc.status : -1, n > 0 ? (int)wc.opcode : -1);
		if (mr_nobind) {
			bind.bind_info.mr = mr_nobind;
			n = ibv_bind_mw(qp, mw, &bind);
			printf("bind_mw type1 on MR without MW_BIND: ret=%s\n", ename(n));
			for (k = 0; k < 100 && (n = ibv_poll_cq(cq, 1, &wc)) == 0; k++)
				usleep(10000);
			printf("bind_mw type1 on MR without MW_BIND completion: n=%d status=%d\n",
			       n, n > 0 ? (int)wc.status : -1);
		}
	}
	if (qp)
		ibv_destroy_qp(qp);
	if (mw)
		rc_val("dealloc_mw(TYPE_1)", ibv_dealloc_mw(mw));
	mw = obj("alloc_mw(TYPE_2)", ibv_alloc_mw(pd, IBV_MW_TYPE_2));
	if (mw) {
		qp = make_qp(pd, cq, IBV_QPT_UD, NULL);
		if (qp && mr) {
			memset(&bind, 0, sizeof(bind));
			bind.bind_info.mr = mr;
			bind.bind_info.length = 4096;
			bind.bind_info.addr = (uintptr_t)buf;
			printf("bind_mw type2 with ibv_bind_mw: ret=%s\n", ename(ibv_bind_mw(qp, mw, &bind)));
		}
		if (qp)
			ibv_destroy_qp(qp);
		ibv_dealloc_mw(mw);
	}
	if (mr)
		ibv_dereg_mr(mr);
	if (mr_nobind)
		ibv_dereg_mr(mr_nobind);
	ibv_destroy_cq(cq);
}

static void probe_busy(void)
{
	struct ibv_cq *cq = ibv_create_cq(ctx, 4, NULL, NULL, 0);
	struct ibv_pd *pd2 = ibv_alloc_pd(ctx);
	struct ibv_qp *qp = make_qp(pd2, cq, IBV_QPT_RC, NULL);
	struct ibv_srq_init_attr si = { .attr = { .max_wr = 4, .max_sge = 1 } };
	struct ibv_srq *srq;
	struct ibv_ah_attr aa;
	struct ibv_ah *ah;
	struct ibv_mw *mw;

	rc_val("destroy_cq(with QP)", ibv_destroy_cq(cq));
	rc_val("dealloc_pd(with QP)", ibv_dealloc_pd(pd2));
	ibv_destroy_qp(qp);
	srq = ibv_create_srq(pd2, &si);
	rc_val("dealloc_pd(with SRQ)", ibv_dealloc_pd(pd2));
	ibv_destroy_srq(srq);
	ah_self(&aa);
	ah = ibv_create_ah(pd2, &aa);
	rc_val("dealloc_pd(with AH)", ibv_dealloc_pd(pd2));
	if (ah)
		ibv_destroy_ah(ah);
	mw = ibv_alloc_mw(pd2, IBV_MW_TYPE_1);
	rc_val("dealloc_pd(with MW)", ibv_dealloc_pd(pd2));
	if (mw)
		ibv_dealloc_mw(mw);
	rc_val("dealloc_pd(empty)", ibv_dealloc_pd(pd2));
	rc_val("destroy_cq(empty)", ibv_destroy_cq(cq));
}

/* a CQ holding 3 completions cannot shrink below them */
static void probe_resize(struct ibv_pd *pd, struct ibv_mr *mr)
{
	struct ibv_cq *cq = ibv_create_cq(ctx, 8, NULL, NULL, 0);
	struct ibv_qp *qp = make_qp(pd, cq, IBV_QPT_RC, NULL);
	struct ibv_sge sge = { (uintptr_t)buf, 8, mr->lkey };
	struct ibv_send_wr wr = { .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_RDMA_WRITE,
				  .send_flags = IBV_SEND_SIGNALED }, *bad;
	struct ibv_wc wc[8];
	int i, n;

	wr.wr.rdma.remote_addr = (uintptr_t)buf + 4096;
	wr.wr.rdma.rkey = mr->rkey;
	if (!qp || to_rts(qp)) {
		printf("resize: no QP\n");
		return;
	}
	for (i = 0; i < 3; i++)
		ibv_post_send(qp, &wr, &bad);
	usleep(300000);
	rc_val("resize_cq(1) with 3 completions", ibv_resize_cq(cq, 1));
	rc_val("resize_cq(3) with 3 completions", ibv_resize_cq(cq, 3));
	n = ibv_poll_cq(cq, 8, wc);
	printf("resize: polled %d status0=%d opcode0=%d\n", n, n > 0 ? (int)wc[0].status : -1,
	       n > 0 ? (int)wc[0].opcode : -1);
	rc_val("destroy_cq(with QP, resize)", ibv_destroy_cq(cq));
	ibv_destroy_qp(qp);
	ibv_destroy_cq(cq);
}

/* ---- the whole transition table: every (from, to), every attribute --- */

/* every attribute bit but STATE, in the order of enum ibv_qp_attr_mask,
 * then an unnamed one and the first of the _ex path's */
static const struct { int bit; const char *name; } qp_bits[] = {
	{ IBV_QP_CUR_STATE, "CUR_STATE" }, { IBV_QP_EN_SQD_ASYNC_NOTIFY, "EN_SQD_ASYNC_NOTIFY" },
	{ IBV_QP_ACCESS_FLAGS, "ACCESS" }, { IBV_QP_PKEY_INDEX, "PKEY_INDEX" },
	{ IBV_QP_PORT, "PORT" }, { IBV_QP_QKEY, "QKEY" }, { IBV_QP_AV, "AV" },
	{ IBV_QP_PATH_MTU, "PATH_MTU" }, { IBV_QP_TIMEOUT, "TIMEOUT" },
	{ IBV_QP_RETRY_CNT, "RETRY_CNT" }, { IBV_QP_RNR_RETRY, "RNR_RETRY" },
	{ IBV_QP_RQ_PSN, "RQ_PSN" }, { IBV_QP_MAX_QP_RD_ATOMIC, "MAX_QP_RD_ATOMIC" },
	{ IBV_QP_ALT_PATH, "ALT_PATH" }, { IBV_QP_MIN_RNR_TIMER, "MIN_RNR_TIMER" },
	{ IBV_QP_SQ_PSN, "SQ_PSN" }, { IBV_QP_MAX_DEST_RD_ATOMIC, "MAX_DEST_RD_ATOMIC" },
	{ IBV_QP_PATH_MIG_STATE, "PATH_MIG_STATE" }, { IBV_QP_CAP, "CAP" },
	{ IBV_QP_DEST_QPN, "DEST_QPN" }, { 1 << 21, "1<<21" },
	{ IBV_QP_RATE_LIMIT, "RATE_LIMIT" },
};
#define NBITS	(sizeof(qp_bits) / sizeof(qp_bits[0]))

/* QP from wherever it is to S: RESET, INIT, RTR, RTS, SQD (from RTS) or ERR (from RTS) */
static int reach(struct ibv_qp *qp, enum ibv_qp_state s)
{
	struct ibv_qp_attr a = { .qp_state = s };

	if (s != IBV_QPS_SQD && s != IBV_QPS_ERR)
		return to_state(qp, s);
	if (to_state(qp, IBV_QPS_RTS))
		return -1;
	return ibv_modify_qp(qp, &a, IBV_QP_STATE);
}

/* the mask the table probe asks FROM -> TO with: what the usual path gives */
static int base_mask(enum ibv_qp_type t, enum ibv_qp_state from, enum ibv_qp_state to)
{
	if (to == IBV_QPS_INIT && from == IBV_QPS_RESET)
		return init_mask(t);
	if (to == IBV_QPS_RTR)
		return rtr_mask(t);
	if (to == IBV_QPS_RTS && from <= IBV_QPS_RTR)
		return rts_mask(t);
	return IBV_QP_STATE;
}

/* attributes other than full_attr's, so that a queried value shows it took */
static void other_attr(struct ibv_qp *qp, enum ibv_qp_state from, struct ibv_qp_attr *a)
{
	full_attr(qp, a);
	a->cur_qp_state = from;
	a->en_sqd_async_notify = 1;
	a->qp_access_flags = IBV_ACCESS_REMOTE_READ;
	a->qkey = 0x22222222;
	a->ah_attr.sl = 2;
	a->path_mtu = IBV_MTU_512;
	a->timeout = 10;
	a->retry_cnt = 5;
	a->rnr_retry = 4;
	a->rq_psn = 0x456;
	a->max_rd_atomic = 0;
	ah_self(&a->alt_ah_attr);
	a->alt_port_num = PORT;
	a->alt_timeout = 14;
	a->min_rnr_timer = 7;
	a->sq_psn = 0x456;
	a->max_dest_rd_atomic = 0;
	a->path_mig_state = IBV_MIG_REARM;
	a->cap = (struct ibv_qp_cap){ 4, 4, 1, 1, 0 };
	a->dest_qp_num = 0x42;
}

/* the queried value of the attribute BIT stands for, after an accepted modify */
static void show_bit(struct ibv_qp *qp, int bit)
{
	struct ibv_qp_attr q;
	struct ibv_qp_init_attr qi;

	memset(&q, 0x5a, sizeof(q));
	if (ibv_query_qp(qp, &q, IBV_QP_RATE_LIMIT - 1, &qi)) {
		printf(" query failed\n");
		return;
	}
	printf(" state=%s", probe_qp_state_name(q.qp_state));
	switch (bit) {
	case IBV_QP_EN_SQD_ASYNC_NOTIFY: printf(" sqd_notify=%u", q.en_sqd_async_notify); break;
	case IBV_QP_ACCESS_FLAGS: printf(" access=0x%x", q.qp_access_flags); break;
	case IBV_QP_PKEY_INDEX: printf(" pkey=%u", q.pkey_index); break;
	case IBV_QP_PORT: printf(" port=%u", q.port_num); break;
	case IBV_QP_QKEY: printf(" qkey=0x%x", q.qkey); break;
	case IBV_QP_AV: printf(" ah.sl=%u", q.ah_attr.sl); break;
	case IBV_QP_PATH_MTU: printf(" mtu=%d", q.path_mtu); break;
	case IBV_QP_TIMEOUT: printf(" timeout=%u", q.timeout); break;
	case IBV_QP_RETRY_CNT: printf(" retry=%u", q.retry_cnt); break;
	case IBV_QP_RNR_RETRY: printf(" rnr_retry=%u", q.rnr_retry); break;
	case IBV_QP_RQ_PSN: printf(" rq_psn=0x%x", q.rq_psn); break;
	case IBV_QP_MAX_QP_RD_ATOMIC: printf(" rd_atomic=%u", q.max_rd_atomic); break;
	case IBV_QP_ALT_PATH: printf(" alt_port=%u", q.alt_port_num); break;
	case IBV_QP_MIN_RNR_TIMER: printf(" min_rnr=%u", q.min_rnr_timer); break;
	case IBV_QP_SQ_PSN: printf(" sq_psn=0x%x", q.sq_psn); break;
	case IBV_QP_MAX_DEST_RD_ATOMIC: printf(" dest_rd_atomic=%u", q.max_dest_rd_atomic); break;
	case IBV_QP_PATH_MIG_STATE: printf(" mig=%d", q.path_mig_state); break;
	case IBV_QP_CAP: printf(" cap.send_wr>=4=%d", q.cap.max_send_wr >= 4); break;
	case IBV_QP_DEST_QPN: printf(" dest_qpn=0x%x", q.dest_qp_num); break;
	}
	printf("\n");
}

static const enum ibv_qp_state from_states[] = {
	IBV_QPS_RESET, IBV_QPS_INIT, IBV_QPS_RTR, IBV_QPS_RTS, IBV_QPS_SQD, IBV_QPS_ERR,
};
#define NFROM	(sizeof(from_states) / sizeof(from_states[0]))

/* every (from, to): its usual mask; where taken, the state queried */
static void table_matrix(struct ibv_qp *qp, const char *tn)
{
	struct ibv_qp_attr a;
	size_t i;
	int to, n;

	for (i = 0; i < NFROM; i++) {
		for (to = IBV_QPS_RESET; to <= IBV_QPS_ERR; to++) {
			enum ibv_qp_state from = from_states[i];

			if (reach(qp, from)) {
				printf("table %s %s: cannot reach\n", tn, probe_qp_state_name(from));
				continue;
			}
			full_attr(qp, &a);
			a.qp_state = to;
			errno = 0;
			n = ibv_modify_qp(qp, &a, base_mask(qp->qp_type, from, to));
			printf("table %s %s->%s: %s", tn, probe_qp_state_name(from),
			       probe_qp_state_name(to), n ? "ret=" : "ok");
			if (n) {
				printf("%s\n", ename(n));
				continue;
			}
			show_bit(qp, 0);
		}
	}
}

/* the transitions that take no required attributes */
static const struct { enum ibv_qp_state from, to; } free_moves[] = {
	{ IBV_QPS_RESET, IBV_QPS_RESET }, { IBV_QPS_INIT, IBV_QPS_INIT },
	{ IBV_QPS_INIT, IBV_QPS_RESET }, { IBV_QPS_INIT, IBV_QPS_ERR },
	{ IBV_QPS_RTR, IBV_QPS_RESET }, { IBV_QPS_RTR, IBV_QPS_ERR },
	{ IBV_QPS_RTS, IBV_QPS_RTS }, { IBV_QPS_RTS, IBV_QPS_SQD },
	{ IBV_QPS_RTS, IBV_QPS_ERR }, { IBV_QPS_SQD, IBV_QPS_SQD },
	{ IBV_QPS_SQD, IBV_QPS_RTS }, { IBV_QPS_SQD, IBV_QPS_ERR },
	{ IBV_QPS_ERR, IBV_QPS_ERR }, { IBV_QPS_ERR, IBV_QPS_RESET },
};

/* each attribute on each of those: refused, or taken and queried back */
static void table_bits(struct ibv_qp *qp, const char *tn)
{
	struct ibv_qp_attr a;
	size_t i, b;
	int n;

	for (i = 0; i < sizeof(free_moves) / sizeof(free_moves[0]); i++) {
		for (b = 0; b < NBITS; b++) {
			enum ibv_qp_state from = free_moves[i].from, to = free_moves[i].to;

			printf("table %s %s->%s +%s:", tn, probe_qp_state_name(from),
			       probe_qp_state_name(to), qp_bits[b].name);
			if (reach(qp, from)) {
				printf(" cannot reach\n");
				continue;
			}
			other_attr(qp, from, &a);
			a.qp_state = to;
			n = ibv_modify_qp(qp, &a, IBV_QP_STATE | qp_bits[b].bit);
			if (n) {
				printf(" ret=%s\n", ename(n));
				continue;
			}
			printf(" ok");
			show_bit(qp, qp_bits[b].bit);
		}
	}
}

/* a value out of range, or at its edge, on the transition that takes it */
static void table_values(struct ibv_qp *qp, const char *tn)
{
	enum ibv_qp_type t = qp->qp_type;
	struct ibv_qp_attr a;
	int n;

/* through VAL_, so that RTR, RTS and RTS2 below give it three arguments */
#define VAL(...)	VAL_(__VA_ARGS__)
#define VAL_(from, to, mask, bit, label, stmt) do {				\
	printf("value %s %s->%s %s:", tn, probe_qp_state_name(from),		\
	       probe_qp_state_name(to), label);				\
	if (reach(qp, from)) {							\
		printf(" cannot reach\n");					\
		break;								\
	}									\
	full_attr(qp, &a);							\
	a.qp_state = to;							\
	stmt;									\
	n = ibv_modify_qp(qp, &a, mask);					\
	if (n)									\
		printf(" ret=%s\n", ename(n));				\
	else {									\
		printf(" ok");							\
		show_bit(qp, bit);						\
	}									\
} while (0)
#define RTR	IBV_QPS_INIT, IBV_QPS_RTR, rtr_mask(t)
#define RTS	IBV_QPS_RTR, IBV_QPS_RTS, rts_mask(t)
#define RTS2	IBV_QPS_RTS, IBV_QPS_RTS, IBV_QP_STATE
	if (t != IBV_QPT_UD) {
		VAL(RTR, IBV_QP_PATH_MTU, "path_mtu 0", a.path_mtu = 0);
		VAL(RTR, IBV_QP_PATH_MTU, "path_mtu 6", a.path_mtu = 6);
		VAL(RTR, IBV_QP_PATH_MTU, "path_mtu 256", a.path_mtu = IBV_MTU_256);
		VAL(RTR, IBV_QP_RQ_PSN, "rq_psn 1<<24", a.rq_psn = 1 << 24);
		VAL(RTR, IBV_QP_RQ_PSN, "rq_psn 0xffffffff", a.rq_psn = 0xffffffff);
		VAL(RTR, IBV_QP_DEST_QPN, "dest_qpn 0", a.dest_qp_num = 0);
		VAL(RTR, IBV_QP_DEST_QPN, "dest_qpn 1", a.dest_qp_num = 1);
		VAL(RTR, IBV_QP_DEST_QPN, "dest_qpn 0xffffff", a.dest_qp_num = 0xffffff);
		VAL(RTR, IBV_QP_AV, "ah sl 15", a.ah_attr.sl = 15);
		VAL(RTR, IBV_QP_AV, "ah static_rate 99", a.ah_attr.static_rate = 99);
		VAL(RTS, IBV_QP_SQ_PSN, "sq_psn 1<<24", a.sq_psn = 1 << 24);
		VAL(RTS, IBV_QP_SQ_PSN, "sq_psn 0xffffffff", a.sq_psn = 0xffffffff);
		VAL(RTS2 | IBV_QP_PATH_MIG_STATE, IBV_QP_PATH_MIG_STATE, "path_mig_state 3",
		    a.path_mig_state = 3);
		VAL(RTS2 | IBV_QP_PATH_MIG_STATE, IBV_QP_PATH_MIG_STATE, "path_mig_state ARMED",
		    a.path_mig_state = IBV_MIG_ARMED);
		VAL(RTS2 | IBV_QP_CUR_STATE, IBV_QP_CUR_STATE, "cur_state SQD (it is RTS)",
		    a.cur_qp_state = IBV_QPS_SQD);
		VAL(IBV_QPS_SQD, IBV_QPS_RTS, IBV_QP_STATE | IBV_QP_CUR_STATE, IBV_QP_CUR_STATE,
		    "cur_state RTS (it is SQD)", a.cur_qp_state = IBV_QPS_RTS);
		VAL(RTS2 | IBV_QP_CUR_STATE, IBV_QP_CUR_STATE, "cur_state SQE (it is RTS)",
		    a.cur_qp_state = IBV_QPS_SQE);
		VAL(RTS2 | IBV_QP_ACCESS_FLAGS, IBV_QP_ACCESS_FLAGS, "access 0", a.qp_access_flags = 0);
		VAL(RTS2 | IBV_QP_ACCESS_FLAGS, IBV_QP_ACCESS_FLAGS, "access LOCAL_WRITE|MW_BIND",
		    a.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_MW_BIND);
	}
	if (t == IBV_QPT_RC) {
		VAL(RTR, IBV_QP_MIN_RNR_TIMER, "min_rnr_timer 31", a.min_rnr_timer = 31);
		VAL(RTR, IBV_QP_MIN_RNR_TIMER, "min_rnr_timer 32", a.min_rnr_timer = 32);
		VAL(RTR, IBV_QP_MAX_DEST_RD_ATOMIC, "max_dest_rd_atomic 0", a.max_dest_rd_atomic = 0);
		VAL(RTR, IBV_QP_MAX_DEST_RD_ATOMIC, "max_dest_rd_atomic max", a.max_dest_rd_atomic = dev.max_qp_rd_atom);
		VAL(RTS, IBV_QP_RNR_RETRY, "rnr_retry 8", a.rnr_retry = 8);
		VAL(RTS, IBV_QP_RNR_RETRY, "rnr_retry 0", a.rnr_retry = 0);
		VAL(RTS, IBV_QP_RETRY_CNT, "retry_cnt 0", a.retry_cnt = 0);
		VAL(RTS, IBV_QP_TIMEOUT, "timeout 0", a.timeout = 0);
		VAL(RTS, IBV_QP_TIMEOUT, "timeout 31", a.timeout = 31);
		VAL(RTS, IBV_QP_MAX_QP_RD_ATOMIC, "max_rd_atomic 0", a.max_rd_atomic = 0);
		VAL(RTS, IBV_QP_MAX_QP_RD_ATOMIC, "max_rd_atomic max", a.max_rd_atomic = dev.max_qp_init_rd_atom);
		VAL(RTS2 | IBV_QP_MIN_RNR_TIMER, IBV_QP_MIN_RNR_TIMER, "min_rnr_timer 32",
		    a.min_rnr_timer = 32);
		VAL(IBV_QPS_SQD, IBV_QPS_SQD, IBV_QP_STATE | IBV_QP_RETRY_CNT, IBV_QP_RETRY_CNT,
		    "retry_cnt 8", a.retry_cnt = 8);
		VAL(IBV_QPS_SQD, IBV_QPS_SQD, IBV_QP_STATE | IBV_QP_MAX_QP_RD_ATOMIC,
		    IBV_QP_MAX_QP_RD_ATOMIC, "max_rd_atomic max+1",
		    a.max_rd_atomic = dev.max_qp_init_rd_atom + 1);
		VAL(IBV_QPS_SQD, IBV_QPS_SQD, IBV_QP_STATE | IBV_QP_PORT, IBV_QP_PORT, "port 2",
		    a.port_num = 2);
	}
	if (t == IBV_QPT_UD) {
		VAL(RTS, IBV_QP_SQ_PSN, "sq_psn 1<<24", a.sq_psn = 1 << 24);
		VAL(IBV_QPS_RESET, IBV_QPS_INIT, init_mask(t), IBV_QP_QKEY, "qkey 0", a.qkey = 0);
		VAL(IBV_QPS_RESET, IBV_QPS_INIT, init_mask(t), IBV_QP_QKEY, "qkey 0x7fffffff", a.qkey = 0x7fffffff);
		VAL(RTS2 | IBV_QP_QKEY, IBV_QP_QKEY, "qkey 0x33333333", a.qkey = 0x33333333);
		VAL(IBV_QPS_SQD, IBV_QPS_SQD, IBV_QP_STATE | IBV_QP_PKEY_INDEX, IBV_QP_PKEY_INDEX,
		    "pkey_index tbl_len", a.pkey_index = port.pkey_tbl_len);
	}
#undef RTR
#undef RTS
#undef RTS2
#undef VAL
#undef VAL_
}

/*
 * What a QP's, an SRQ's and a CQ's returned capacities hold: every one of
 * the WRs they say, and whether one more is refused (a limit, so only
 * whether, never how many).
 */
static int fill_recv(struct ibv_qp *qp, struct ibv_srq *srq, unsigned int n)
{
	struct ibv_sge sge = { (uintptr_t)buf, 8, 0 };
	struct ibv_recv_wr wr = { .sg_list = &sge, .num_sge = 1 }, *bad;
	unsigned int i;

	for (i = 0; i < n; i++)
		if (srq ? ibv_post_srq_recv(srq, &wr, &bad) : ibv_post_recv(qp, &wr, &bad))
			break;
	return i;
}

/* N unsignaled SENDs (to the QP itself); how many were taken */
static int fill_send(struct ibv_qp *qp, unsigned int n)
{
	struct ibv_sge sge = { (uintptr_t)buf, 8, 0 };
	struct ibv_send_wr wr = { .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_SEND }, *bad;
	struct ibv_ah_attr aa;
	struct ibv_ah *ah = NULL;
	unsigned int i;

	if (qp->qp_type == IBV_QPT_UD) {
		ah_self(&aa);
		ah = ibv_create_ah(qp->pd, &aa);
		wr.wr.ud.ah = ah;
		wr.wr.ud.remote_qpn = qp->qp_num;
		wr.wr.ud.remote_qkey = 0x11111111;
	}
	for (i = 0; i < n; i++)
		if (ibv_post_send(qp, &wr, &bad))
			break;
	/* the QP goes first: its SQ may still hold the AH */
	to_state(qp, IBV_QPS_RESET);
	if (ah)
		ibv_destroy_ah(ah);
	return i;
}

static void probe_caps(struct ibv_pd *pd, struct ibv_cq *cq)
{
	enum ibv_qp_type types[] = { IBV_QPT_RC, IBV_QPT_UC, IBV_QPT_UD };
	struct ibv_qp_init_attr ia, qi;
	struct ibv_qp_attr qa;
	struct ibv_srq_init_attr si;
	struct ibv_srq_attr sa;
	struct ibv_srq *srq;
	struct ibv_qp *qp;
	struct ibv_cq *c;
	unsigned int want[] = { 1, 3, 4, 5, 17 };
	size_t i, k;
	int got;

	for (i = 0; i < 3; i++) {
		for (k = 0; k < sizeof(want) / sizeof(want[0]); k++) {
			const char *tn = probe_qp_type_name(types[i]);

			memset(&ia, 0, sizeof(ia));
			ia.send_cq = cq;
			ia.recv_cq = cq;
			ia.qp_type = types[i];
			ia.cap = (struct ibv_qp_cap){ want[k], want[k], 1, 1, 0 };
			qp = ibv_create_qp(pd, &ia);
			if (!qp) {
				printf("caps %s %u: create_qp NULL errno=%s\n", tn, want[k], ename(errno));
				continue;
			}
			ibv_query_qp(qp, &qa, IBV_QP_CAP, &qi);
			printf("caps %s %u: >=asked=%d,%d query=create %d,%d", tn, want[k],
			       ia.cap.max_send_wr >= want[k], ia.cap.max_recv_wr >= want[k],
			       !memcmp(&qi.cap, &ia.cap, sizeof(ia.cap)),
			       !memcmp(&qa.cap, &ia.cap, sizeof(ia.cap)));
			to_state(qp, IBV_QPS_INIT);
			got = fill_recv(qp, NULL, ia.cap.max_recv_wr + 1);
			printf(" recv: all=%d one_more=%d", got >= (int)ia.cap.max_recv_wr,
			       got > (int)ia.cap.max_recv_wr);
			/* in SQD nothing the send queue holds goes out */
			got = reach(qp, IBV_QPS_SQD) ? -1 : fill_send(qp, ia.cap.max_send_wr + 1);
			printf(" send: all=%d one_more=%d\n", got >= (int)ia.cap.max_send_wr,
			       got > (int)ia.cap.max_send_wr);
			ibv_destroy_qp(qp);
		}
	}
	for (k = 0; k < sizeof(want) / sizeof(want[0]); k++) {
		memset(&si, 0, sizeof(si));
		si.attr.max_wr = want[k];
		si.attr.max_sge = 1;
		srq = ibv_create_srq(pd, &si);
		if (!srq) {
			printf("caps SRQ %u: NULL errno=%s\n", want[k], ename(errno));
			continue;
		}
		ibv_query_srq(srq, &sa);
		got = fill_recv(NULL, srq, si.attr.max_wr + 1);
		printf("caps SRQ %u: >=asked=%d query=create %d recv: all=%d one_more=%d\n",
		       want[k], si.attr.max_wr >= want[k], sa.max_wr == si.attr.max_wr,
		       got >= (int)si.attr.max_wr, got > (int)si.attr.max_wr);
		sa.srq_limit = si.attr.max_wr;
		rc_val("caps SRQ limit = max_wr", ibv_modify_srq(srq, &sa, IBV_SRQ_LIMIT));
		sa.srq_limit = si.attr.max_wr + 1;
		rc_val("caps SRQ limit = max_wr+1", ibv_modify_srq(srq, &sa, IBV_SRQ_LIMIT));
		sa.srq_limit = 0;
		rc_val("caps SRQ limit 0", ibv_modify_srq(srq, &sa, IBV_SRQ_LIMIT));
		sa.max_wr = si.attr.max_wr + 8;
		sa.srq_limit = 1;
		rc_val("caps SRQ MAX_WR|LIMIT", ibv_modify_srq(srq, &sa, IBV_SRQ_MAX_WR | IBV_SRQ_LIMIT));
		if (ibv_query_srq(srq, &sa) == 0)
			printf("caps SRQ after MAX_WR|LIMIT: max_wr>=asked=%d limit=%u\n",
			       sa.max_wr >= si.attr.max_wr + 8, sa.srq_limit);
		ibv_destroy_srq(srq);
	}
	for (k = 0; k < sizeof(want) / sizeof(want[0]); k++) {
		c = ibv_create_cq(ctx, want[k], NULL, NULL, 0);
		if (!c) {
			printf("caps CQ %u: NULL errno=%s\n", want[k], ename(errno));
			continue;
		}
		printf("caps CQ %u: cqe>=asked=%d", want[k], c->cqe >= (int)want[k]);
		got = ibv_resize_cq(c, want[k] + 8);
		printf(" resize(+8)=%s cqe>=asked=%d", ename(got), c->cqe >= (int)want[k] + 8);
		got = ibv_resize_cq(c, c->cqe);
		printf(" resize(cqe)=%s\n", ename(got));
		ibv_destroy_cq(c);
	}
}

/* multicast attach and detach: types, addresses, twice, a QP still attached */
static void probe_mcast(struct ibv_pd *pd, struct ibv_cq *cq)
{
	union ibv_gid mgid = { .raw = { 0xff, 0x0e, [15] = 1 } };
	union ibv_gid mgid2 = { .raw = { 0xff, 0x0e, [15] = 2 } };
	union ibv_gid ucast = { .raw = { 0xfe, 0x80, [15] = 1 } };
	struct ibv_qp *ud = make_qp(pd, cq, IBV_QPT_UD, NULL);
	struct ibv_qp *rc = make_qp(pd, cq, IBV_QPT_RC, NULL);
	uint16_t mlid = roce ? 0 : 0xc001;

	if (!ud || !rc) {
		printf("mcast: no QPs\n");
		return;
	}
	rc_val("attach_mcast UD in RESET", ibv_attach_mcast(ud, &mgid, mlid));
	rc_val("attach_mcast UD again", ibv_attach_mcast(ud, &mgid, mlid));
	rc_val("attach_mcast UD second group", ibv_attach_mcast(ud, &mgid2, mlid));
	rc_val("attach_mcast UD unicast gid", ibv_attach_mcast(ud, &ucast, mlid));
	rc_val("attach_mcast RC", ibv_attach_mcast(rc, &mgid, mlid));
	rc_val("detach_mcast UD", ibv_detach_mcast(ud, &mgid, mlid));
	rc_val("detach_mcast UD again", ibv_detach_mcast(ud, &mgid, mlid));
	rc_val("detach_mcast UD never attached", ibv_detach_mcast(ud, &ucast, mlid));
	rc_val("detach_mcast RC", ibv_detach_mcast(rc, &mgid, mlid));
	if (rc_val("destroy_qp UD attached", ibv_destroy_qp(ud)) != 0) {
		ibv_detach_mcast(ud, &mgid2, mlid);
		rc_val("destroy_qp UD detached", ibv_destroy_qp(ud));
	}
	ibv_destroy_qp(rc);
}

/* type-1 windows bound through ibv_bind_mw: where they may not be */
static void probe_bind(struct ibv_pd *pd)
{
	struct ibv_cq *cq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
	struct ibv_pd *pd2 = ibv_alloc_pd(ctx);
	struct ibv_mw *mw = ibv_alloc_mw(pd, IBV_MW_TYPE_1);
	struct ibv_mw *mw2 = ibv_alloc_mw(pd2, IBV_MW_TYPE_1);
	struct ibv_mr *mr = ibv_reg_mr(pd, buf, 8192, IBV_ACCESS_LOCAL_WRITE |
				       IBV_ACCESS_MW_BIND | IBV_ACCESS_REMOTE_READ);
	struct ibv_mr *ro = ibv_reg_mr(pd, buf, 8192, IBV_ACCESS_MW_BIND);
	struct ibv_qp *qp = make_qp(pd, cq, IBV_QPT_RC, NULL);
	struct ibv_mw_bind bind;
	struct ibv_wc wc;
	uint32_t rkey0;
	int n, k, got;

	if (!cq || !mw || !mw2 || !mr || !ro || !qp) {
		printf("bind: setup failed\n");
		goto out;
	}
#define BIND(label, m, stmt) do {						\
	memset(&bind, 0, sizeof(bind));						\
	bind.wr_id = 9;								\
	bind.send_flags = IBV_SEND_SIGNALED;					\
	bind.bind_info.mr = mr;							\
	bind.bind_info.addr = (uintptr_t)buf;					\
	bind.bind_info.length = 4096;						\
	bind.bind_info.mw_access_flags = IBV_ACCESS_REMOTE_READ;		\
	stmt;									\
	n = ibv_bind_mw(qp, m, &bind);						\
	printf("bind %s: ret=%s", label, ename(n));				\
	for (k = 0, got = 0; !n && k < 100 && !(got = ibv_poll_cq(cq, 1, &wc)); k++) \
		usleep(10000);							\
	if (got > 0)								\
		printf(" status=%s", ibv_wc_status_str(wc.status));		\
	printf("\n");								\
} while (0)
	BIND("in RESET", mw, (void)0);
	to_rts(qp);
	rkey0 = mw->rkey;
	BIND("ok", mw, (void)0);
	printf("bind ok: rkey changed=%d\n", mw->rkey != rkey0);
	BIND("length 0 (unbind)", mw, bind.bind_info.length = 0);
	BIND("past the MR", mw, bind.bind_info.length = 8192 + 1);
	to_state(qp, IBV_QPS_RTS);
	BIND("REMOTE_WRITE on an MR without LOCAL_WRITE", mw,
	     (bind.bind_info.mr = ro, bind.bind_info.mw_access_flags = IBV_ACCESS_REMOTE_WRITE));
	to_state(qp, IBV_QPS_RTS);
	BIND("MW of another PD", mw2, (void)0);
	to_state(qp, IBV_QPS_RTS);
	BIND("mw_access ZERO_BASED", mw, bind.bind_info.mw_access_flags |= IBV_ACCESS_ZERO_BASED);
	to_state(qp, IBV_QPS_RTS);
	BIND("unsignaled", mw, bind.send_flags = 0);
	BIND("NULL mr, length 0", mw, (bind.bind_info.mr = NULL, bind.bind_info.length = 0));
#undef BIND
out:
	if (qp)
		ibv_destroy_qp(qp);
	if (mw)
		rc_val("dealloc_mw(bound)", ibv_dealloc_mw(mw));
	if (mw2)
		ibv_dealloc_mw(mw2);
	if (mr)
		ibv_dereg_mr(mr);
	if (ro)
		ibv_dereg_mr(ro);
	if (pd2)
		ibv_dealloc_pd(pd2);
	if (cq)
		ibv_destroy_cq(cq);
}

/* a QP on an SRQ: what its receive capacity says (rdma-core's providers
 * crash on a NULL CQ, so no case has one) */
static void probe_qp_parts(struct ibv_pd *pd, struct ibv_cq *cq)
{
	struct ibv_srq_init_attr si = { .attr = { .max_wr = 4, .max_sge = 1 } };
	struct ibv_srq *srq = ibv_create_srq(pd, &si);
	struct ibv_qp_init_attr ia;
	struct ibv_qp *qp;

#define TRY(label, stmt) do {							\
	memset(&ia, 0, sizeof(ia));						\
	ia.send_cq = cq; ia.recv_cq = cq; ia.qp_type = IBV_QPT_RC;		\
	ia.cap = (struct ibv_qp_cap){ 1, 1, 1, 1, 0 };				\
	stmt;									\
	qp = obj("create_qp " label, ibv_create_qp(pd, &ia));			\
	if (qp) {								\
		printf("create_qp " label ": recv_wr=%u\n", ia.cap.max_recv_wr); \
		ibv_destroy_qp(qp);						\
	}									\
} while (0)
	TRY("srq, max_recv_wr 0", (ia.srq = srq, ia.cap.max_recv_wr = 0));
	TRY("srq, max_recv_wr 1", ia.srq = srq);
	TRY("UC srq, max_recv_wr 1", (ia.srq = srq, ia.qp_type = IBV_QPT_UC));
#undef TRY
	if (srq)
		ibv_destroy_srq(srq);
}

static void probe_table(struct ibv_pd *pd, struct ibv_cq *cq, enum ibv_qp_type t)
{
	struct ibv_qp *qp = make_qp(pd, cq, t, NULL);
	const char *tn = probe_qp_type_name(t);

	if (!qp) {
		printf("table %s: create_qp NULL errno=%s\n", tn, ename(errno));
		return;
	}
	table_matrix(qp, tn);
	table_bits(qp, tn);
	table_values(qp, tn);
	ibv_destroy_qp(qp);
}

int main(int argc, char **argv)
{
	struct ibv_device **list;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_mr *mr;

	setvbuf(stdout, NULL, _IOLBF, 0);
	ctx = probe_open("verbs-probe", argc > 1 ? argv[1] : NULL, PORT, &port, &list);
	if (!ctx)
		return 1;
	if (ibv_query_device(ctx, &dev)) {
		fprintf(stderr, "verbs-probe: cannot query %s\n", ibv_get_device_name(ctx->device));
		return 1;
	}
	roce = port.link_layer == IBV_LINK_LAYER_ETHERNET;
	gid_index = roce ? probe_ipv4_gid(ctx, PORT, &port) : 0;
	buf = aligned_alloc(4096, BUFSZ);
	memset(buf, 0, BUFSZ);

	probe_device();
	pd = ibv_alloc_pd(ctx);
	probe_mr(pd);
	probe_cq();
	cq = ibv_create_cq(ctx, 64, NULL, NULL, 0);
	mr = ibv_reg_mr(pd, buf, BUFSZ, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
			IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC);
	probe_qp_create(pd, cq);
	probe_transitions(pd, cq, IBV_QPT_RC);
	probe_transitions(pd, cq, IBV_QPT_UC);
	probe_transitions(pd, cq, IBV_QPT_UD);
	probe_post(pd, mr);
	probe_srq(pd, cq);
	probe_ah(pd);
	probe_mw(pd);
	probe_busy();
	probe_resize(pd, mr);
	probe_table(pd, cq, IBV_QPT_RC);
	probe_table(pd, cq, IBV_QPT_UC);
	probe_table(pd, cq, IBV_QPT_UD);
	probe_caps(pd, cq);
	probe_mcast(pd, cq);
	probe_bind(pd);
	probe_qp_parts(pd, cq);
	ibv_dereg_mr(mr);
	ibv_destroy_cq(cq);
	rc_val("dealloc_pd(end)", ibv_dealloc_pd(pd));
	ibv_close_device(ctx);
	ibv_free_device_list(list);
	printf("done\n");
	return 0;
}
