/*
 * Messages that take several turns (fair sharing, issue 5).
 *
 * A WQE whose transfer is longer than a chunk (ENG_CHUNK_BYTES) is run one
 * chunk per turn of its QP: the serving thread records the bytes done in
 * the QP (wqe_done), serves the other QPs, and resumes at the QP's next
 * turn.  So a 1 GiB RDMA WRITE holds the thread for one chunk at a time,
 * not for the whole copy, and another QP's small message waits at most
 * about one chunk's copy.
 *
 * The WQE stays in front of its send queue meanwhile: later WQEs of the
 * QP wait, completions keep posting order, and the send completion is
 * written after the last step.  Like every retry, each step copies the
 * WQE out of the ring and checks it again, and resolves its keys again:
 * between turns the objects lock is released, and a step must not use
 * anything the client may have deregistered since.  A key that fails in
 * a later step fails the WQE as it would have in one go.
 *
 * A SEND (or WRITE_WITH_IMM) consumes its receive WQE at the first step,
 * as soon as the message is known to have a place, and holds it (struct
 * eng_held, the sender's) until the last step writes the receive
 * completion: a receive never completes before all its bytes landed.
 * Whatever ends the message early -- an error in a later step, a flush
 * (ERR, SQE), RESET, destroy -- goes through ibvd_eng_held_abort, so a
 * held WQE is always completed at its receiver, in error.
 */
#include <config.h>

#include <stdlib.h>
#include <string.h>

#include "engine.h"
#include "internal.h"

uint64_t ibvd_eng_chunk_bytes = ENG_CHUNK_BYTES;
uint64_t ibvd_eng_turn_bytes = ENG_QP_BUDGET_BYTES;

static bool chunkable(const struct ibvd_qp *src, const struct eng_req *req)
{
	/* UD is one MTU at most; atomics are 8 bytes. */
	return src->qp_type != IBV_QPT_UD &&
	       req->w.opcode != IBV_WR_ATOMIC_CMP_AND_SWP &&
	       req->w.opcode != IBV_WR_ATOMIC_FETCH_AND_ADD;
}

enum ibv_wc_status ibvd_eng_chunk_plan(const struct ibvd_qp *src,
				       struct eng_req *req)
{
	uint64_t left;

	req->off = 0;
	req->step = req->length;
	if (!chunkable(src, req))
		return IBV_WC_SUCCESS;
	/* The client rewrote the WQE in front shorter than what moved. */
	if (src->wqe_done > req->length)
		return IBV_WC_LOC_LEN_ERR;
	req->off = src->wqe_done;
	left = req->length - req->off;
	req->step = left < ibvd_eng_chunk_bytes ? left : ibvd_eng_chunk_bytes;
	return IBV_WC_SUCCESS;
}

bool ibvd_eng_holding(const struct ibvd_qp *src)
{
	return src->held && src->held->active;
}

static void hold(struct ibvd_qp *src, const struct ibvd_qp *target,
		 const struct eng_recv *rwqe)
{
	struct eng_held *h = src->held;

	h->active = true;
	h->target = target;
	h->target_qpn = target->qp_num;
	h->wr_id = rwqe->wr_id;
	h->nsge = rwqe->nsge;
	memcpy(h->sge, rwqe->sge, rwqe->nsge * sizeof(h->sge[0]));
}

enum eng_resp ibvd_eng_hold_recv(struct ibvd_qp *src, struct ibvd_qp *target,
				 const struct eng_req *req, bool data)
{
	bool uc = src->qp_type == IBV_QPT_UC;
	enum eng_resp r = RESP_OK;
	struct eng_recv rwqe;
	struct eng_rq rq;
	int ret;

	ibvd_eng_held_abort(src);
	/* Kept for the QP's life once it sent one chunked message. */
	if (!src->held && !(src->held = calloc(1, sizeof(*src->held))))
		return RESP_NO_ACK;	/* a NIC out of resources: retried */
	ibvd_eng_rq_of(target, &rq);
	pthread_mutex_lock(rq.lock);
	ret = ibvd_eng_rq_peek(&rq, &rwqe);
	if (ret <= 0) {
		r = ibvd_eng_no_recv(src, target, &rq, ret);
	} else if (data && rwqe.status != IBV_WC_SUCCESS) {
		ibvd_eng_recv_fail(target, &rq, &rwqe, rwqe.status);
		r = uc ? RESP_OK : RESP_OP_ERR;
	} else if (data && req->length > rwqe.sgl.total) {
		ibvd_eng_recv_fail(target, &rq, &rwqe, IBV_WC_LOC_LEN_ERR);
		r = uc ? RESP_OK : RESP_INV_REQ;
	} else {
		ibvd_eng_rq_consume(&rq);
		hold(src, target, &rwqe);
	}
	pthread_mutex_unlock(rq.lock);
	return r;
}

enum eng_resp ibvd_eng_held_get(struct ibvd_qp *src, struct ibvd_qp *target,
				struct eng_sgl *sgl)
{
	bool uc = src->qp_type == IBV_QPT_UC;
	struct eng_held *h = src->held;
	struct eng_rq rq;

	/* UC drops what it cannot place; RC says the responder lost track. */
	if (!ibvd_eng_holding(src))
		return uc ? RESP_OK : RESP_INV_REQ;
	if (h->target != target || h->target_qpn != target->qp_num) {
		ibvd_eng_held_abort(src);
		return uc ? RESP_OK : RESP_INV_REQ;
	}
	if (!sgl)
		return RESP_OK;
	ibvd_eng_rq_of(target, &rq);
	if (ibvd_eng_sges_resolve(h->sge, h->nsge, rq.pd, true, sgl) !=
	    IBV_WC_SUCCESS) {
		ibvd_eng_held_fail(src, target, IBV_WC_LOC_PROT_ERR);
		return uc ? RESP_OK : RESP_OP_ERR;
	}
	return RESP_OK;
}

void ibvd_eng_held_complete(struct ibvd_qp *src, struct ibvd_qp *target,
			    const struct eng_req *req,
			    const struct eng_rcv_info *info)
{
	src->held->active = false;
	ibvd_eng_recv_cqe(target, src->held->wr_id, src, req, info);
}

void ibvd_eng_held_fail(struct ibvd_qp *src, struct ibvd_qp *target,
			enum ibv_wc_status status)
{
	src->held->active = false;
	ibvd_eng_recv_err(target, src->held->wr_id, status);
	ibvd_eng_responder_error(target, 0);
}

void ibvd_eng_held_abort(struct ibvd_qp *src)
{
	struct eng_held *h = src->held;
	struct ibvd_qp *t;
	uint32_t state;

	if (!h || !h->active)
		return;
	h->active = false;
	/* A destroyed receiver completes nothing; a reset one starts anew. */
	t = ibvd_qp_by_num(h->target_qpn);
	if (!t || t != h->target)
		return;
	state = eng_qp_state(t);
	if (state == IBV_QPS_RESET || state == IBV_QPS_INIT)
		return;
	if (state == IBV_QPS_ERR) {
		ibvd_eng_recv_err(t, h->wr_id, IBV_WC_WR_FLUSH_ERR);
		return;
	}
	/* Half a message arrived and the rest never will. */
	ibvd_eng_recv_err(t, h->wr_id, IBV_WC_REM_ABORT_ERR);
	ibvd_eng_responder_error(t, 0);
}

void ibvd_engine_qp_destroy(struct ibvd_qp *qp)
{
	ibvd_eng_held_abort(qp);
	free(qp->held);
	qp->held = NULL;
}
