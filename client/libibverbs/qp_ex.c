/*
 * The ibv_qp_ex posting API (ibv_wr_post(3)): wr_start, one wr_<opcode>
 * per work request followed by its wr_set_* calls, then wr_complete or
 * wr_abort.  QPs created with IBV_QP_INIT_ATTR_SEND_OPS_FLAGS get it
 * (ibv_qp_to_qp_ex); ibv_rc_pingpong -N and pyverbs use it.
 *
 * The batch holds the send queue's lock from wr_start to wr_complete and
 * writes each WQE straight into its slot; nothing is visible to the engine
 * until wr_complete publishes the tail.  The wr_* calls return nothing, so
 * the first error is kept and wr_complete returns it having posted none of
 * the batch (the tail is simply not published).
 */
#include "config.h"

#include <string.h>

#include "barrier.h"
#include "ibvd_verbs.h"

#define SEND_FLAGS_KEPT							\
	(IBV_SEND_FENCE | IBV_SEND_SIGNALED | IBV_SEND_SOLICITED |	\
	 IBV_SEND_INLINE)

/* What each IBV_QP_EX_WITH_* bit asks for. */
static const struct {
	uint64_t flag;
	enum ibv_wr_opcode op;
} send_ops[] = {
	{ IBV_QP_EX_WITH_RDMA_WRITE, IBV_WR_RDMA_WRITE },
	{ IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM, IBV_WR_RDMA_WRITE_WITH_IMM },
	{ IBV_QP_EX_WITH_SEND, IBV_WR_SEND },
	{ IBV_QP_EX_WITH_SEND_WITH_IMM, IBV_WR_SEND_WITH_IMM },
	{ IBV_QP_EX_WITH_RDMA_READ, IBV_WR_RDMA_READ },
	{ IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP, IBV_WR_ATOMIC_CMP_AND_SWP },
	{ IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD, IBV_WR_ATOMIC_FETCH_AND_ADD },
	{ IBV_QP_EX_WITH_BIND_MW, IBV_WR_BIND_MW },
	{ IBV_QP_EX_WITH_LOCAL_INV, IBV_WR_LOCAL_INV },
	{ IBV_QP_EX_WITH_SEND_WITH_INV, IBV_WR_SEND_WITH_INV },
};

static struct ibvc_qp *qpx_to_qp(struct ibv_qp_ex *qpx)
{
	return container_of(qpx, struct ibvc_qp, qp_ex);
}

static void batch_fail(struct ibvc_qp *qp, int err)
{
	if (!qp->batch.err)
		qp->batch.err = err;
	qp->batch.cur = NULL;
}

/* Start a WQE of opcode op in the next slot; NULL if the batch failed. */
static struct ibvd_send_wqe *begin(struct ibv_qp_ex *qpx, enum ibv_wr_opcode op)
{
	struct ibvc_qp *qp = qpx_to_qp(qpx);
	struct ibvd_send_wqe *w;

	if (qp->batch.err)
		return NULL;
	if (!ibvc_sq_state_ok(qp) ||
	    !ibvc_send_opcode_valid(qp->qp.qp_type, op)) {
		batch_fail(qp, EINVAL);
		return NULL;
	}
	if (!ibvc_wq_room(qp, &qp->sq, &qp->batch.head, qp->batch.tail)) {
		batch_fail(qp, ENOMEM);
		return NULL;
	}
	/* its staging and marks wait for wr_complete (stage_batch) */
	w = ibvc_wq_slot(&qp->sq, qp->batch.tail++);
	memset(w, 0, sizeof(*w));
	w->wr_id = qpx->wr_id;
	w->opcode = op;
	/* INLINE is set by wr_set_inline_data*, not by the app's flags. */
	w->send_flags = qpx->wr_flags & SEND_FLAGS_KEPT & ~IBV_SEND_INLINE;
	qp->batch.cur = w;
	return w;
}

static void wr_rdma(struct ibv_qp_ex *qpx, enum ibv_wr_opcode op, uint32_t rkey,
		    uint64_t remote_addr, __be32 imm)
{
	struct ibvd_send_wqe *w = begin(qpx, op);

	if (!w)
		return;
	w->rkey = rkey;
	w->remote_addr = remote_addr;
	w->imm_data = imm;
}

static void wr_rdma_write(struct ibv_qp_ex *qpx, uint32_t rkey,
			  uint64_t remote_addr)
{
	wr_rdma(qpx, IBV_WR_RDMA_WRITE, rkey, remote_addr, 0);
}

static void wr_rdma_write_imm(struct ibv_qp_ex *qpx, uint32_t rkey,
			      uint64_t remote_addr, __be32 imm)
{
	wr_rdma(qpx, IBV_WR_RDMA_WRITE_WITH_IMM, rkey, remote_addr, imm);
}

static void wr_rdma_read(struct ibv_qp_ex *qpx, uint32_t rkey,
			 uint64_t remote_addr)
{
	wr_rdma(qpx, IBV_WR_RDMA_READ, rkey, remote_addr, 0);
}

static void wr_send(struct ibv_qp_ex *qpx)
{
	begin(qpx, IBV_WR_SEND);
}

static void wr_send_imm(struct ibv_qp_ex *qpx, __be32 imm)
{
	struct ibvd_send_wqe *w = begin(qpx, IBV_WR_SEND_WITH_IMM);

	if (w)
		w->imm_data = imm;
}

static void wr_atomic(struct ibv_qp_ex *qpx, enum ibv_wr_opcode op,
		      uint32_t rkey, uint64_t remote_addr, uint64_t compare_add,
		      uint64_t swap)
{
	struct ibvd_send_wqe *w = begin(qpx, op);

	if (!w)
		return;
	w->rkey = rkey;
	w->remote_addr = remote_addr;
	w->compare_add = compare_add;
	w->swap = swap;
}

static void wr_atomic_cmp_swp(struct ibv_qp_ex *qpx, uint32_t rkey,
			      uint64_t remote_addr, uint64_t compare,
			      uint64_t swap)
{
	wr_atomic(qpx, IBV_WR_ATOMIC_CMP_AND_SWP, rkey, remote_addr, compare,
		  swap);
}

static void wr_atomic_fetch_add(struct ibv_qp_ex *qpx, uint32_t rkey,
				uint64_t remote_addr, uint64_t add)
{
	wr_atomic(qpx, IBV_WR_ATOMIC_FETCH_AND_ADD, rkey, remote_addr, add, 0);
}

/* Type-2 windows only, as ibv_post_send (type 1 is ibv_bind_mw's). */
static void wr_bind_mw(struct ibv_qp_ex *qpx, struct ibv_mw *mw, uint32_t rkey,
		       const struct ibv_mw_bind_info *bind_info)
{
	struct ibvd_send_wqe *w;

	if (!mw || mw->type != IBV_MW_TYPE_2 || !bind_info) {
		batch_fail(qpx_to_qp(qpx), EINVAL);
		return;
	}
	w = begin(qpx, IBV_WR_BIND_MW);
	if (w)
		ibvc_fill_bind(w, mw, rkey, bind_info);
}

static void wr_local_inv(struct ibv_qp_ex *qpx, uint32_t rkey)
{
	struct ibvd_send_wqe *w = begin(qpx, IBV_WR_LOCAL_INV);

	if (w)
		w->rkey = rkey;
}

/* The key travels where the immediate would (ring.h). */
static void wr_send_inv(struct ibv_qp_ex *qpx, uint32_t rkey)
{
	struct ibvd_send_wqe *w = begin(qpx, IBV_WR_SEND_WITH_INV);

	if (w)
		w->imm_data = rkey;
}

/* Operations we do not have (TSO, atomic write): fail the batch. */

static void wr_send_tso(struct ibv_qp_ex *qpx, void *hdr, uint16_t hdr_sz,
			uint16_t mss)
{
	batch_fail(qpx_to_qp(qpx), EOPNOTSUPP);
}


static void wr_atomic_write(struct ibv_qp_ex *qpx, uint32_t rkey,
			    uint64_t remote_addr, const void *atomic_wr)
{
	batch_fail(qpx_to_qp(qpx), EOPNOTSUPP);
}

/* ---- completing the current WQE ----------------------------------------- */

static void wr_set_ud_addr(struct ibv_qp_ex *qpx, struct ibv_ah *ah,
			   uint32_t remote_qpn, uint32_t remote_qkey)
{
	struct ibvc_qp *qp = qpx_to_qp(qpx);
	struct ibvd_send_wqe *w = qp->batch.cur;

	if (!w)
		return;
	if (qp->qp.qp_type != IBV_QPT_UD || !ah) {
		batch_fail(qp, EINVAL);
		return;
	}
	w->remote_qpn = remote_qpn;
	w->remote_qkey = remote_qkey;
	w->av = to_ibvc_ah(ah)->av;
	if (!ibvc_ah_pd_ok(qp, ah))
		w->send_flags |= IBVD_SEND_FOREIGN_AH;
}

/* XRC: the SRQ at the target that the current WQE lands in. */
static void wr_set_xrc_srqn(struct ibv_qp_ex *qpx, uint32_t remote_srqn)
{
	struct ibvc_qp *qp = qpx_to_qp(qpx);
	struct ibvd_send_wqe *w = qp->batch.cur;

	if (!w)
		return;
	if (qp->qp.qp_type != IBV_QPT_XRC_SEND) {
		batch_fail(qp, EINVAL);
		return;
	}
	w->xrc_srqn = remote_srqn;
}

static void wr_set_sge_list(struct ibv_qp_ex *qpx, size_t num_sge,
			    const struct ibv_sge *sg_list)
{
	struct ibvc_qp *qp = qpx_to_qp(qpx);
	struct ibvd_send_wqe *w = qp->batch.cur;
	struct ibvd_sge *dst;
	size_t i;

	if (!w)
		return;
	if (num_sge > qp->cap.max_send_sge || (num_sge && !sg_list)) {
		batch_fail(qp, EINVAL);
		return;
	}
	dst = (struct ibvd_sge *)((uint8_t *)w + IBVD_SEND_WQE_HDR);
	for (i = 0; i < num_sge; i++) {
		dst[i].addr = sg_list[i].addr;
		dst[i].length = sg_list[i].length;
		dst[i].lkey = sg_list[i].lkey;
	}
	w->num_sge = (uint32_t)num_sge;
	w->inline_len = 0;
	w->send_flags &= ~(uint32_t)IBV_SEND_INLINE;
}

static void wr_set_sge(struct ibv_qp_ex *qpx, uint32_t lkey, uint64_t addr,
		       uint32_t length)
{
	struct ibv_sge sge = { .addr = addr, .length = length, .lkey = lkey };

	wr_set_sge_list(qpx, 1, &sge);
}

static void wr_set_inline_data_list(struct ibv_qp_ex *qpx, size_t num_buf,
				    const struct ibv_data_buf *buf_list)
{
	struct ibvc_qp *qp = qpx_to_qp(qpx);
	struct ibvd_send_wqe *w = qp->batch.cur;
	uint8_t *dst;
	uint64_t total = 0;
	size_t i;

	if (!w)
		return;
	/* Added only while within the limit: lengths near SIZE_MAX wrap. */
	for (i = 0; i < num_buf; i++) {
		if (buf_list[i].length > qp->cap.max_inline_data - total) {
			batch_fail(qp, EINVAL);
			return;
		}
		total += buf_list[i].length;
	}
	dst = (uint8_t *)w + IBVD_SEND_WQE_HDR;
	for (i = 0; i < num_buf; i++) {
		memcpy(dst, buf_list[i].addr, buf_list[i].length);
		dst += buf_list[i].length;
	}
	w->inline_len = (uint32_t)total;
	w->num_sge = 0;
	w->send_flags |= IBV_SEND_INLINE;
}

static void wr_set_inline_data(struct ibv_qp_ex *qpx, void *addr, size_t length)
{
	struct ibv_data_buf buf = { .addr = addr, .length = length };

	wr_set_inline_data_list(qpx, 1, &buf);
}

/* ---- the batch ----------------------------------------------------------- */

/* w's SGEs copied to the staging block, if it may go that way. */
static void stage_wqe(struct ibvc_qp *qp, struct ibvd_send_wqe *w)
{
	const struct ibvd_sge *src =
		(const void *)((const uint8_t *)w + IBVD_SEND_WQE_HDR);
	struct ibv_sge sge[IBVD_MAX_SGE];
	uint32_t i;

	if (!w->num_sge || w->num_sge > IBVD_MAX_SGE ||
	    (w->send_flags & (IBV_SEND_INLINE | IBVD_SEND_STAGED)))
		return;
	for (i = 0; i < w->num_sge; i++) {
		sge[i].addr = src[i].addr;
		sge[i].length = src[i].length;
		sge[i].lkey = src[i].lkey;
	}
	ibvc_stage(qp, w, sge, (int)w->num_sge);
}

/*
 * Staging copies the app's data, so it waits for wr_complete: until then
 * the app may still be filling the buffers the SGEs name (ibv_wr_post(3):
 * no work is executed before it), as ibv_post_send's caller cannot.  In
 * order, each WQE marked once staged or not, so that a READ marks only
 * the WRITEs after it as not to be read early.
 */
static void stage_batch(struct ibvc_qp *qp)
{
	uint32_t c;

	for (c = qp->sq.tail; c != qp->batch.tail; c++) {
		struct ibvd_send_wqe *w = ibvc_wq_slot(&qp->sq, c);

		stage_wqe(qp, w);
		ibvc_stage_mark(qp, c, w->opcode);
	}
}

static void wr_start(struct ibv_qp_ex *qpx)
{
	struct ibvc_qp *qp = qpx_to_qp(qpx);

	pthread_mutex_lock(&qp->sq.lock);
	qp->batch.tail = qp->sq.tail;
	/* "Full" until the engine's head is read once, by the first WQE. */
	qp->batch.head = qp->sq.tail - qp->sq.limit;
	qp->batch.cur = NULL;
	qp->batch.err = 0;
}

static int wr_complete(struct ibv_qp_ex *qpx)
{
	struct ibvc_qp *qp = qpx_to_qp(qpx);
	int err = qp->batch.err;

	qp->batch.cur = NULL;
	if (!err)
		stage_batch(qp);
	ibvc_stage_published(qp);
	if (!err && qp->batch.tail != qp->sq.tail) {
		qp->sq.tail = qp->batch.tail;
		/* Release: the WQEs are written before the engine sees tail. */
		ibvd_publish(&qp->sq.client->tail, qp->sq.tail);
		ibvc_ring_doorbell(to_ibvc_context(qp->qp.context), qp->doorbell);
	}
	pthread_mutex_unlock(&qp->sq.lock);
	return err;
}

/* The slots written stay unpublished: the next batch overwrites them. */
static void wr_abort(struct ibv_qp_ex *qpx)
{
	struct ibvc_qp *qp = qpx_to_qp(qpx);

	qp->batch.cur = NULL;
	ibvc_stage_published(qp);
	pthread_mutex_unlock(&qp->sq.lock);
}

bool ibvc_send_ops_supported(enum ibv_qp_type type, uint64_t flags)
{
	size_t i;

	for (i = 0; i < ARRAY_SIZE(send_ops); i++) {
		if (!(flags & send_ops[i].flag))
			continue;
		if (!ibvc_send_opcode_valid(type, send_ops[i].op))
			return false;
		flags &= ~send_ops[i].flag;
	}
	return flags == 0;
}

void ibvc_qp_ex_init(struct ibvc_qp *qp)
{
	struct ibv_qp_ex *qpx = &qp->qp_ex;

	qpx->comp_mask = 0;
	qpx->wr_atomic_cmp_swp = wr_atomic_cmp_swp;
	qpx->wr_atomic_fetch_add = wr_atomic_fetch_add;
	qpx->wr_bind_mw = wr_bind_mw;
	qpx->wr_local_inv = wr_local_inv;
	qpx->wr_rdma_read = wr_rdma_read;
	qpx->wr_rdma_write = wr_rdma_write;
	qpx->wr_rdma_write_imm = wr_rdma_write_imm;
	qpx->wr_send = wr_send;
	qpx->wr_send_imm = wr_send_imm;
	qpx->wr_send_inv = wr_send_inv;
	qpx->wr_send_tso = wr_send_tso;
	qpx->wr_set_ud_addr = wr_set_ud_addr;
	qpx->wr_set_xrc_srqn = wr_set_xrc_srqn;
	qpx->wr_set_inline_data = wr_set_inline_data;
	qpx->wr_set_inline_data_list = wr_set_inline_data_list;
	qpx->wr_set_sge = wr_set_sge;
	qpx->wr_set_sge_list = wr_set_sge_list;
	qpx->wr_start = wr_start;
	qpx->wr_complete = wr_complete;
	qpx->wr_abort = wr_abort;
	qpx->wr_atomic_write = wr_atomic_write;
	qp->has_qp_ex = true;
}
