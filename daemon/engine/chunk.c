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
 * a later step fails the WQE as it would have in one go.  Its length and
 * opcode are fixed at the first step, and the XRC SRQ it names: a client
 * that rewrites them in the ring meanwhile gets LOC_LEN_ERR or
 * LOC_QP_OP_ERR, its own error.
 *
 * The first step also fixes the responder: the QP it reached, in the
 * incarnation it found (struct ibvd_qp's `incarnation`, bumped by every
 * RESET).  A later step that finds another QP, or the same one reset
 * since, finds a responder that knows nothing of the message, as the
 * fresh responder context of a NIC would: RC hears nothing back (the
 * requester retries, then fails with RETRY_EXC_ERR, as for a responder in
 * ERR), UC's rest of the message is dropped.  So an old message never
 * writes into a new incarnation.
 *
 * A SEND (or WRITE_WITH_IMM) consumes its receive WQE at the first step,
 * once the first chunk has landed in it, and the WQE is then held by the
 * receiving QP (struct eng_inbound: the responder's state, as a NIC keeps
 * it in its responder context), under the receive queue's lock, until the
 * last step writes the receive completion: a receive never completes
 * before all its bytes landed.  Whoever ends the message early completes
 * or releases it:
 *  - the receiver: its ERR flush completes it with WR_FLUSH_ERR before the
 *    rest of its receive queue; a RESET or destroy forgets it with the
 *    rest of its RQ, or, taken from an SRQ (which the client still
 *    accounts for), completes it with WR_FLUSH_ERR;
 *  - the sender (its WQE failed or was flushed, it was reset or
 *    destroyed; ibvd_eng_held_abort): RC completes the WQE with
 *    REM_ABORT_ERR and takes the receiver to ERR, as nothing can follow
 *    on the connection in order (WR_FLUSH_ERR if the receiver is in ERR
 *    already); UC has no one to tell: the receiver keeps the WQE, and the
 *    next message takes it before the rest of the queue, as a UC
 *    responder that sees a new message start over a partial one does.
 * A sender whose own memory faults in the first step never consumes the
 * WQE: the receiver is untouched, as with an unchunked message.
 */
#include <config.h>

#include <errno.h>
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

/* Does the message carry imm_data (or an invalidated key in its place)? */
static bool has_imm(uint32_t opcode)
{
	return opcode == IBV_WR_SEND_WITH_IMM ||
	       opcode == IBV_WR_RDMA_WRITE_WITH_IMM ||
	       opcode == IBV_WR_SEND_WITH_INV;
}

/*
 * The WQE in front as the client may have rewritten it since its first
 * step.  Its immediate data is pinned too: the responder's completion,
 * built at the last step, must report what the first step acted on (the
 * window SEND_WITH_INV invalidates, recv.c).
 */
static enum ibv_wc_status rewritten(const struct ibvd_qp *src,
				    const struct eng_req *req)
{
	if (req->w.opcode != src->chunked.opcode)
		return IBV_WC_LOC_QP_OP_ERR;
	if (has_imm(req->w.opcode) && req->w.imm_data != src->chunked.imm_data)
		return IBV_WC_LOC_QP_OP_ERR;
	/* the rest of a SEND must land where its first step did */
	if (req->w.xrc_srqn != src->chunked.xrc_srqn)
		return IBV_WC_LOC_QP_OP_ERR;
	if (req->length != src->chunked.length)
		return IBV_WC_LOC_LEN_ERR;
	return IBV_WC_SUCCESS;
}

enum ibv_wc_status ibvd_eng_chunk_plan(struct ibvd_qp *src,
				       struct eng_req *req)
{
	enum ibv_wc_status st;
	uint64_t left;

	req->off = 0;
	req->step = req->length;
	if (src->wqe_done) {
		st = rewritten(src, req);
		if (st != IBV_WC_SUCCESS)
			return st;
	}
	if (!chunkable(src, req))
		return IBV_WC_SUCCESS;
	if (!src->wqe_done) {
		src->chunked.length = req->length;
		src->chunked.opcode = req->w.opcode;
		src->chunked.imm_data = req->w.imm_data;
		src->chunked.xrc_srqn = req->w.xrc_srqn;
	}
	req->off = src->wqe_done;
	left = req->length - req->off;
	req->step = left < ibvd_eng_chunk_bytes ? left : ibvd_eng_chunk_bytes;
	return IBV_WC_SUCCESS;
}

bool ibvd_eng_chunk_responder(struct ibvd_qp *src, const struct ibvd_qp *peer,
			      const struct eng_req *req)
{
	__typeof__(src->chunked) *c = &src->chunked;

	if (req->off == 0) {
		/* Each attempt is a new message to its responder. */
		c->seq++;
		c->target = peer;
		c->target_qpn = peer ? peer->qp_num : 0;
		c->target_gen = peer ? peer->incarnation : 0;
		return peer != NULL;
	}
	return peer && peer == c->target && peer->qp_num == c->target_qpn &&
	       peer->incarnation == c->target_gen;
}

enum eng_resp ibvd_eng_hold(struct ibvd_qp *src, struct ibvd_qp *target,
			    const struct eng_rq *rq, const struct eng_recv *rwqe)
{
	struct eng_inbound *in = target->inbound;

	/* Kept for the QP's life once it received one chunked message. */
	if (!in && !(in = target->inbound = calloc(1, sizeof(*in))))
		return src->qp_type == IBV_QPT_UC ? RESP_OK : RESP_NO_ACK;
	/*
	 * Nothing else is held here: only the QP target is connected to sends
	 * to it, one message at a time, and each gives its WQE back (held_*)
	 * before the next starts; a WQE kept from a cut UC message is the one
	 * just peeked, and consuming it frees the slot.
	 */
	ibvd_eng_rq_consume(rq);
	in->active = true;
	in->src = src;
	in->seq = src->chunked.seq;
	in->wr_id = rwqe->wr_id;
	in->nsge = rwqe->nsge;
	memcpy(in->sge, rwqe->sge, rwqe->nsge * sizeof(in->sge[0]));
	src->chunked.holds_recv = true;
	return RESP_OK;
}

struct eng_inbound *ibvd_eng_held(const struct ibvd_qp *src,
				  const struct ibvd_qp *target)
{
	struct eng_inbound *in = target->inbound;

	if (!in || !in->active || in->src != src || in->seq != src->chunked.seq)
		return NULL;
	return in;
}

void ibvd_eng_held_complete(struct ibvd_qp *src, struct ibvd_qp *target,
			    const struct eng_req *req,
			    const struct eng_rcv_info *info)
{
	target->inbound->active = false;
	src->chunked.holds_recv = false;
	ibvd_eng_recv_cqe(target, target->inbound->wr_id, src, req, info);
}

void ibvd_eng_held_fail(struct ibvd_qp *src, struct ibvd_qp *target,
			enum ibv_wc_status status)
{
	target->inbound->active = false;
	src->chunked.holds_recv = false;
	ibvd_eng_recv_err(target, target->inbound->wr_id, status);
	ibvd_eng_responder_error(target, 0);
}

/* Under t's receive lock: half of src's message arrived, the rest never will. */
static void cut_short(const struct ibvd_qp *src, struct ibvd_qp *t)
{
	struct eng_inbound *in = t->inbound;

	if (src->qp_type == IBV_QPT_UC) {
		in->src = NULL;		/* kept for the next message */
		return;
	}
	in->active = false;
	if (eng_qp_state(t) == IBV_QPS_ERR) {
		ibvd_eng_recv_err(t, in->wr_id, IBV_WC_WR_FLUSH_ERR);
		return;
	}
	ibvd_eng_recv_err(t, in->wr_id, IBV_WC_REM_ABORT_ERR);
	ibvd_eng_responder_error(t, 0);
}

void ibvd_eng_held_abort(struct ibvd_qp *src)
{
	struct ibvd_qp *t;
	struct eng_rq rq;

	if (!src->chunked.holds_recv)
		return;
	src->chunked.holds_recv = false;
	/* A destroyed receiver took the WQE with it. */
	t = ibvd_qp_by_num(src->chunked.target_qpn);
	if (!t || t != src->chunked.target)
		return;
	ibvd_eng_rq_of(t, &rq);
	pthread_mutex_lock(rq.lock);
	/* Not held any more if the receiver flushed or was reset since. */
	if (ibvd_eng_held(src, t))
		cut_short(src, t);
	pthread_mutex_unlock(rq.lock);
}

void ibvd_engine_xrc_srq_gone(struct ibvd_qp *tgt)
{
	struct eng_rq rq;

	ibvd_eng_rq_of(tgt, &rq);
	pthread_mutex_lock(rq.lock);
	ibvd_eng_inbound_flush(tgt, false);
	pthread_mutex_unlock(rq.lock);
}

void ibvd_eng_inbound_flush(struct ibvd_qp *qp, bool flush)
{
	struct eng_inbound *in = qp->inbound;

	if (!in || !in->active)
		return;
	in->active = false;
	if (flush)
		ibvd_eng_recv_err(qp, in->wr_id, IBV_WC_WR_FLUSH_ERR);
}

/* The held WQE as posted, its SGEs resolved again against pd. */
static void inbound_wqe(const struct eng_inbound *in, const struct ibvd_pd *pd,
			struct eng_recv *out)
{
	out->wr_id = in->wr_id;
	out->nsge = in->nsge;
	memcpy(out->sge, in->sge, in->nsge * sizeof(out->sge[0]));
	out->sgl.n = 0;
	out->sgl.total = 0;
	out->status = ibvd_eng_sges_resolve(out->sge, out->nsge, pd, true,
					    &out->sgl);
}

bool ibvd_eng_kept_peek(const struct ibvd_qp *qp, const struct ibvd_pd *pd,
			struct eng_recv *out)
{
	const struct eng_inbound *in = qp->inbound;

	if (!in || !in->active || in->src)
		return false;
	inbound_wqe(in, pd, out);
	return true;
}

/*
 * A wire transport's responder holds its WQE in the same place, marked
 * as its own by src == qp: every flush, reset and destroy above then
 * completes or forgets it as the engine's own.
 */
int ibvd_eng_wire_hold(struct ibvd_qp *qp, const struct eng_rq *rq,
		       const struct eng_recv *rwqe)
{
	struct eng_inbound *in = qp->inbound;

	if (!in && !(in = qp->inbound = calloc(1, sizeof(*in))))
		return -ENOMEM;
	/* first: a WQE a cut UC message left is taken back from here */
	ibvd_eng_rq_consume(rq);
	in->active = true;
	in->src = qp;
	in->src_qpn = 0;
	in->seq = 0;
	in->wr_id = rwqe->wr_id;
	in->nsge = rwqe->nsge;
	memcpy(in->sge, rwqe->sge, rwqe->nsge * sizeof(in->sge[0]));
	return 0;
}

bool ibvd_eng_wire_held(const struct ibvd_qp *qp, const struct ibvd_pd *pd,
			struct eng_recv *out)
{
	const struct eng_inbound *in = qp->inbound;

	if (!in || !in->active || in->src != qp)
		return false;
	inbound_wqe(in, pd, out);
	return true;
}

void ibvd_eng_wire_release(struct ibvd_qp *qp)
{
	struct eng_inbound *in = qp->inbound;

	if (in && in->active && in->src == qp)
		in->active = false;
}

void ibvd_eng_wire_keep(struct ibvd_qp *qp)
{
	struct eng_inbound *in = qp->inbound;

	if (in && in->active && in->src == qp)
		in->src = NULL;
}

bool ibvd_eng_kept_take(struct ibvd_qp *qp)
{
	struct eng_inbound *in = qp->inbound;

	if (!in || !in->active || in->src)
		return false;
	in->active = false;
	return true;
}

void ibvd_eng_chunk_forget(struct ibvd_qp *qp)
{
	struct eng_rq rq;

	ibvd_eng_held_abort(qp);
	qp->wqe_done = 0;
	qp->step_paid = 0;
	qp->chunked.target = NULL;
	ibvd_eng_rq_of(qp, &rq);
	pthread_mutex_lock(rq.lock);
	/*
	 * A WQE of the QP's own RQ goes the way of the rest of that queue,
	 * without a completion; one taken from an SRQ is still the SRQ's
	 * client's, who must hear of it.
	 */
	ibvd_eng_inbound_flush(qp, qp->srq != NULL);
	pthread_mutex_unlock(rq.lock);
}
