/*
 * Copy, then validate (DESIGN.md §3.4): every work request is copied out
 * of the client-writable ring into engine memory before any field is
 * looked at, and only the private copy is checked and used.  The copy is
 * bounded by the queue's private stride, never by anything the client
 * wrote; sizes are checked in 64-bit arithmetic; keys are resolved through
 * the daemon's registries and must belong to the QP's protection domain.
 *
 * A WQE that fails a check is not executed: its completion carries the
 * status returned here and the caller moves the QP to the error state.
 */
#include <config.h>

#include <errno.h>
#include <stddef.h>
#include <string.h>

#include "internal.h"
#include "util.h"

/* Largest message (the port's max_msg_sz, query.c). */
#define ENG_MAX_MSG		(1ull << 30)

static const uint8_t *ring_slot(const struct ibvd_ring *r, uint32_t counter)
{
	return r->slots + (size_t)(counter & (r->nslots - 1)) * r->stride;
}

static bool opcode_ok(uint32_t qp_type, uint32_t opcode)
{
	/* An XRC initiator is an RC requester; a target never sends. */
	if (qp_type == IBV_QPT_XRC_SEND)
		qp_type = IBV_QPT_RC;
	switch (opcode) {
	case IBV_WR_SEND:
	case IBV_WR_SEND_WITH_IMM:
		return qp_type == IBV_QPT_RC || qp_type == IBV_QPT_UC ||
		       qp_type == IBV_QPT_UD;
	case IBV_WR_RDMA_WRITE:
	case IBV_WR_RDMA_WRITE_WITH_IMM:
		return qp_type == IBV_QPT_RC || qp_type == IBV_QPT_UC;
	case IBV_WR_RDMA_READ:
	case IBV_WR_ATOMIC_CMP_AND_SWP:
	case IBV_WR_ATOMIC_FETCH_AND_ADD:
		return qp_type == IBV_QPT_RC;
	case IBV_WR_SEND_WITH_INV:
	case IBV_WR_BIND_MW:
	case IBV_WR_LOCAL_INV:
		return qp_type == IBV_QPT_RC || qp_type == IBV_QPT_UC;
	default:
		return false;
	}
}

/* Operations whose local buffers the engine writes into. */
static bool writes_local(uint32_t opcode)
{
	return opcode == IBV_WR_RDMA_READ ||
	       opcode == IBV_WR_ATOMIC_CMP_AND_SWP ||
	       opcode == IBV_WR_ATOMIC_FETCH_AND_ADD;
}

static bool is_atomic(uint32_t opcode)
{
	return opcode == IBV_WR_ATOMIC_CMP_AND_SWP ||
	       opcode == IBV_WR_ATOMIC_FETCH_AND_ADD;
}

/*
 * The segment of [iova, iova + len) of mr (checked in range): through its
 * mapping too if it has one that allows what will be done.
 */
void ibvd_eng_seg_of(const struct ibvd_mr *mr, uint64_t iova, uint64_t len,
		     bool write, struct eng_seg *s)
{
	uint64_t off = iova - mr->iova;

	s->fd = mr->mem->fd;
	s->key = mr->lkey;
	s->addr = mr->addr + off;
	s->len = len;
	s->map = mr->map_base && (!write || mr->map_writable) ?
		 mr->map_base + off : NULL;
}

bool ibvd_eng_sgl_current(const struct eng_sgl *sgl, const struct ibvd_pd *pd,
			  bool write)
{
	unsigned int i;

	for (i = 0; i < sgl->n; i++) {
		const struct eng_seg *s = &sgl->seg[i];
		const struct ibvd_mr *mr;

		if (s->fd < 0)		/* the engine's own memory */
			continue;
		mr = ibvd_mr_by_lkey(s->key);
		if (!mr || mr->pd != pd || !mr->mem || mr->mem->fd != s->fd ||
		    (write && !(mr->access & IBV_ACCESS_LOCAL_WRITE)) ||
		    !ibvd_in_range(mr->addr, mr->length, s->addr, s->len))
			return false;
	}
	return true;
}

/*
 * Resolve n local SGEs (already private) against pd.  Zero-length SGEs
 * carry no data and are skipped, keys included, as NICs do.
 */
enum ibv_wc_status ibvd_eng_sges_resolve(const struct ibvd_sge *sge,
					 unsigned int n,
					 const struct ibvd_pd *pd, bool write,
					 struct eng_sgl *out)
{
	unsigned int i;

	out->n = 0;
	out->total = 0;
	for (i = 0; i < n; i++) {
		const struct ibvd_mr *mr;
		struct eng_seg *s;

		if (!sge[i].length)
			continue;
		mr = ibvd_mr_by_lkey(sge[i].lkey);
		if (!mr || mr->pd != pd || !mr->mem)
			return IBV_WC_LOC_PROT_ERR;
		if (write && !(mr->access & IBV_ACCESS_LOCAL_WRITE))
			return IBV_WC_LOC_PROT_ERR;
		/*
		 * Local addresses are in the MR's iova space, as remote ones
		 * (ibv_reg_mr_iova2(3)); zero-based MRs have iova 0.
		 */
		if (!ibvd_in_range(mr->iova, mr->length, sge[i].addr, sge[i].length))
			return IBV_WC_LOC_PROT_ERR;
		s = &out->seg[out->n++];
		ibvd_eng_seg_of(mr, sge[i].addr, sge[i].length, write, s);
		/* At most 32 lengths below 2^32 each: no overflow in 64 bits. */
		out->total += sge[i].length;
	}
	return IBV_WC_SUCCESS;
}

/* Inline data: bounded by the QP's cap and by the slot it sits in. */
static enum ibv_wc_status take_inline(struct ibvd_engine *eng,
				      const struct ibvd_qp *qp,
				      const uint8_t *slot, struct eng_req *req)
{
	uint32_t len = req->w.inline_len;

	if (len > qp->cap.max_inline_data || len > qp->sq.stride - IBVD_SEND_WQE_HDR)
		return IBV_WC_LOC_LEN_ERR;
	if (ibvd_eng_scratch(eng, len) < 0)
		return IBV_WC_GENERAL_ERR;
	memcpy(eng->wqe_buf, slot + IBVD_SEND_WQE_HDR, len);
	req->local.n = 0;
	req->local.total = 0;
	if (len)
		ibvd_eng_sgl_private(&req->local, eng->wqe_buf, len);
	return IBV_WC_SUCCESS;
}

static enum ibv_wc_status take_sges(const struct ibvd_qp *qp,
				    const uint8_t *slot, struct eng_req *req)
{
	struct ibvd_sge sge[ENG_MAX_SGE];
	uint32_t n = req->w.num_sge;

	if (n > qp->cap.max_send_sge || n > ENG_MAX_SGE ||
	    (uint64_t)n * sizeof(sge[0]) > qp->sq.stride - IBVD_SEND_WQE_HDR)
		return IBV_WC_LOC_QP_OP_ERR;
	memcpy(sge, slot + IBVD_SEND_WQE_HDR, n * sizeof(sge[0]));
	return ibvd_eng_sges_resolve(sge, n, qp->pd, writes_local(req->w.opcode),
				     &req->local);
}

/*
 * A WRITE whose payload the library copied into the QP's staging block
 * (ring.h, "Staging"): read from there, which the engine maps, within the
 * block it granted.  The block's content is the client's own to spoil.
 */
static enum ibv_wc_status take_staged(const struct ibvd_qp *qp,
				      const uint8_t *slot, struct eng_req *req)
{
	struct ibvd_staged st;

	if (req->w.opcode != IBV_WR_RDMA_WRITE &&
	    req->w.opcode != IBV_WR_RDMA_WRITE_WITH_IMM)
		return IBV_WC_LOC_QP_OP_ERR;
	if (!qp->staging.bytes)
		return IBV_WC_LOC_PROT_ERR;
	memcpy(&st, slot + IBVD_SEND_WQE_HDR, sizeof(st));
	if (!ibvd_in_range(0, qp->staging.bytes, st.offset, st.length))
		return IBV_WC_LOC_PROT_ERR;
	if (st.length)
		ibvd_eng_sgl_private(&req->local, qp->staging.base + st.offset,
				     st.length);
	return IBV_WC_SUCCESS;
}

enum ibv_wc_status ibvd_eng_send_take(struct ibvd_engine *eng,
				      struct ibvd_qp *qp, uint32_t counter,
				      struct eng_req *req)
{
	const uint8_t *slot = ring_slot(&qp->sq, counter);
	enum ibv_wc_status st;

	req->local.n = 0;
	req->local.total = 0;
	req->length = 0;
	/* The queue's private geometry always has room for a header. */
	if (qp->sq.stride < IBVD_SEND_WQE_HDR) {
		memset(&req->w, 0, sizeof(req->w));
		req->signaled = true;
		return IBV_WC_LOC_QP_OP_ERR;
	}
	/* The one read of the slot's header; everything below uses req->w. */
	memcpy(&req->w, slot, IBVD_SEND_WQE_HDR);
	req->signaled = (req->w.send_flags & IBV_SEND_SIGNALED) || qp->sq_sig_all;
	if (!opcode_ok(qp->qp_type, req->w.opcode))
		return IBV_WC_LOC_QP_OP_ERR;
	if (qp->qp_type == IBV_QPT_UD &&
	    (req->w.send_flags & IBVD_SEND_FOREIGN_AH))
		return IBV_WC_LOC_QP_OP_ERR;
	/* INLINE means something only for operations that carry data out. */
	if (req->w.send_flags & IBVD_SEND_STAGED)
		st = take_staged(qp, slot, req);
	else if ((req->w.send_flags & IBV_SEND_INLINE) && !writes_local(req->w.opcode))
		st = take_inline(eng, qp, slot, req);
	else
		st = take_sges(qp, slot, req);
	if (st != IBV_WC_SUCCESS)
		return st;
	req->length = req->local.total;
	if (req->length > ENG_MAX_MSG)
		return IBV_WC_LOC_LEN_ERR;
	/* The atomic's result lands in the first 8 bytes of the buffer. */
	if (is_atomic(req->w.opcode) && req->length < sizeof(uint64_t))
		return IBV_WC_LOC_LEN_ERR;
	return IBV_WC_SUCCESS;
}

const uint8_t *ibvd_eng_send_inline(const struct ibvd_qp *qp, uint32_t counter)
{
	return ring_slot(&qp->sq, counter) + IBVD_SEND_WQE_HDR;
}

void ibvd_eng_send_peek(const struct ibvd_qp *qp, uint32_t counter,
			uint64_t *wr_id, uint32_t *opcode)
{
	struct ibvd_send_wqe w;

	if (qp->sq.stride < IBVD_SEND_WQE_HDR) {
		*wr_id = 0;
		*opcode = 0;
		return;
	}
	memcpy(&w, ring_slot(&qp->sq, counter), offsetof(struct ibvd_send_wqe, send_flags));
	*wr_id = w.wr_id;
	*opcode = w.opcode;
}

void ibvd_eng_recv_take(const struct ibvd_ring *ring, uint32_t counter,
			uint32_t max_sge, const struct ibvd_pd *pd,
			struct eng_recv *out)
{
	const uint8_t *slot = ring_slot(ring, counter);
	struct ibvd_recv_wqe w;

	out->sgl.n = 0;
	out->sgl.total = 0;
	out->nsge = 0;
	if (ring->stride < IBVD_RECV_WQE_HDR) {
		out->wr_id = 0;
		out->status = IBV_WC_LOC_QP_OP_ERR;
		return;
	}
	memcpy(&w, slot, IBVD_RECV_WQE_HDR);
	out->wr_id = w.wr_id;
	if (w.num_sge > max_sge || w.num_sge > ENG_MAX_SGE ||
	    (uint64_t)w.num_sge * sizeof(out->sge[0]) > ring->stride - IBVD_RECV_WQE_HDR) {
		out->status = IBV_WC_LOC_QP_OP_ERR;
		return;
	}
	out->nsge = w.num_sge;
	memcpy(out->sge, slot + IBVD_RECV_WQE_HDR, w.num_sge * sizeof(out->sge[0]));
	out->status = ibvd_eng_sges_resolve(out->sge, out->nsge, pd, true, &out->sgl);
}

int ibvd_eng_rkey_resolve(const struct ibvd_qp *target, uint32_t rkey,
			  uint64_t raddr, uint64_t len, uint32_t access,
			  struct eng_sgl *out)
{
	const struct ibvd_mr *mr;
	struct eng_seg *s;

	/* The QP's own rights first, whatever the length (as rxe does). */
	if (!(target->attr.access & access))
		return -EACCES;
	/* A zero-length RDMA touches nothing and checks no key (IB 9.4.5). */
	if (!len)
		return 0;
	/*
	 * Not an MR's key: a window's, whose rights were checked there and
	 * stand for the MR's own remote rights (mw.c); its MR's range here.
	 */
	mr = ibvd_mr_by_rkey(rkey);
	if (mr && !(mr->access & access))
		return -EACCES;
	if (!mr)
		mr = ibvd_eng_mw_resolve(target, rkey, &raddr, len, access);
	if (!mr || mr->pd != target->pd || !mr->mem)
		return -EACCES;
	if (!ibvd_in_range(mr->iova, mr->length, raddr, len))
		return -EACCES;
	s = &out->seg[out->n++];
	ibvd_eng_seg_of(mr, raddr, len,
			access & (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC),
			s);
	out->total += len;
	return 0;
}
