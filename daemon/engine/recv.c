/*
 * The responder's receive side: taking receive WQEs from a QP's RQ or its
 * SRQ, completing them, and delivering SEND messages of RC and UC QPs.
 *
 * The receive queue's lock (recv_lock or srq->lock) is held from the peek
 * of a WQE through the data copy to its CQE, so receive completions of one
 * queue come out in the order the WQEs were posted even when senders on
 * several engine threads target it at once.  A WQE is consumed only once
 * the message (or the first chunk of a long one, chunk.c) has landed: if
 * the sender's own memory fails before, the WQE stays posted, as it would
 * on a NIC that never sent the message.
 */
#include <config.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "barrier.h"
#include "internal.h"
#include "transit.h"

void ibvd_eng_rq_of(struct ibvd_qp *qp, struct eng_rq *rq)
{
	rq->qp = qp;
	if (qp->srq) {
		rq->lock = &qp->srq->lock;
		rq->ring = &qp->srq->ring;
		rq->head = &qp->srq->head;
		rq->max_sge = qp->srq->max_sge;
		rq->pd = qp->srq->pd;
		rq->srq = qp->srq;
	} else {
		rq->lock = &qp->recv_lock;
		rq->ring = &qp->rq;
		rq->head = &qp->rq_head;
		rq->max_sge = qp->cap.max_recv_sge;
		rq->pd = qp->pd;
		rq->srq = NULL;
	}
}

int ibvd_eng_rq_peek(const struct eng_rq *rq, struct eng_recv *out)
{
	const struct ibvd_wq_client *cp = rq->ring->client_page;
	uint32_t tail, n;

	/* Taken before the rest, the WQE a cut UC message left is the oldest. */
	if (ibvd_eng_kept_peek(rq->qp, rq->pd, out))
		return 1;
	if (!rq->ring->slots)
		return 0;
	/* Acquire: the WQEs below the tail are written. */
	tail = ibvd_observe(&cp->tail);
	n = tail - *rq->head;
	if (n > rq->ring->nslots)
		return -EPROTO;
	if (!n)
		return 0;
	ibvd_eng_recv_take(rq->ring, *rq->head, rq->max_sge, rq->pd, out);
	return 1;
}

void ibvd_eng_srq_limit_check(struct ibvd_srq *srq)
{
	const struct ibvd_wq_client *cp = srq->ring.client_page;
	uint32_t posted;

	if (!srq->srq_limit)
		return;
	posted = ibvd_read_once(&cp->tail) - srq->head;
	if (posted > srq->ring.nslots || posted >= srq->srq_limit)
		return;
	srq->srq_limit = 0;		/* disarmed until ibv_modify_srq arms it */
	ibvd_publish(&((struct ibvd_wq_engine *)srq->ring.engine_page)->srq_limit, 0);
	ibvd_eng_async(srq->ctx, IBV_EVENT_SRQ_LIMIT_REACHED, srq->handle);
}

void ibvd_eng_rq_consume(const struct eng_rq *rq)
{
	if (ibvd_eng_kept_take(rq->qp))
		return;
	(*rq->head)++;
	/* The client reuses the slot once it sees this. */
	ibvd_publish(&((struct ibvd_wq_engine *)rq->ring->engine_page)->head, *rq->head);
	if (rq->srq)
		ibvd_eng_srq_limit_check(rq->srq);
}

void ibvd_eng_rq_broken(struct ibvd_qp *target, const struct eng_rq *rq)
{
	struct ibvd_wq_engine *ep = rq->ring->engine_page;

	if (!rq->srq) {
		ibvd_eng_responder_error(target, IBV_EVENT_QP_FATAL);
		return;
	}
	if (ibvd_read_once(&ep->error))
		return;
	ibvd_publish(&ep->error, 1);
	ibvd_eng_async(rq->srq->ctx, IBV_EVENT_SRQ_ERR, rq->srq->handle);
}

static void push_now(struct ibvd_qp *target, struct ibvd_cqe *cqe,
		     bool solicited)
{
	/* A receive CQ that overran takes the QP down with it. */
	if (ibvd_eng_cq_push(target->recv_cq, target, cqe, solicited) < 0)
		ibvd_eng_qp_error(target);
}

/*
 * Receive completions deferred.  A message's receive CQE goes out after
 * its sender's completion, not before: on a NIC the responder's ACK
 * reaches the requester long before the responder's app can answer, and
 * apps count on it: perftest's -e polls the send CQ once per event, on a
 * channel it shares with the receive CQ, and fails if the answer's event
 * comes first.  With the engine preempted between the two pushes (a busy
 * host), an answer through the transit rings did.  So the engine thread
 * carrying an RC or UC message holds its receive CQE until the sender's
 * side is written (ibvd_eng_recv_defer_begin/end).  The order of a
 * queue's CQEs stays that of its WQEs: a QP's own RQ has one sender, and
 * the claim of an SRQ that takes one for every message (soft basic SRQs)
 * is kept until its CQE is out, so no other engine thread or library
 * takes from it meanwhile; other SRQs, fed by several threads at once
 * without a claim, push at once.  The RQ is not flushed while one waits
 * (ibvd_eng_flush_rq): its flushed WQEs would complete before it.
 */
#define DEFERRED_MAX	2

struct deferred_cqe {
	struct ibvd_qp *target;
	struct ibvd_cqe cqe;
	bool solicited;
};

/* Engine threads' own: a deferral ends within the step that began it. */
static __thread struct {
	unsigned int depth;		/* begin without end */
	unsigned int n;
	struct deferred_cqe cqes[DEFERRED_MAX];
	/* RQ claims kept until the CQEs are out (ibvd_eng_recv_keep_claim) */
	unsigned int nclaims;
	struct ibvd_qp *claims[DEFERRED_MAX];
} deferred;

static void deferred_flush(void)
{
	unsigned int i;

	for (i = 0; i < deferred.n; i++) {
		struct deferred_cqe *d = &deferred.cqes[i];

		push_now(d->target, &d->cqe, d->solicited);
		/* Release: the CQE is out before a flush may follow it. */
		__atomic_sub_fetch(&d->target->recv_cqes_deferred, 1,
				   __ATOMIC_RELEASE);
	}
	deferred.n = 0;
	for (i = 0; i < deferred.nclaims; i++)
		ibvd_eng_claim_give(deferred.claims[i]);
	deferred.nclaims = 0;
}

/*
 * A library that takes t's RQ claim counts on the engine's CQEs made
 * under it being in the CQ (ring.h): a claim whose CQE waits is given
 * back after it (true), not now.
 */
bool ibvd_eng_recv_keep_claim(struct ibvd_qp *t)
{
	unsigned int i;

	if (deferred.nclaims == DEFERRED_MAX)
		return false;
	for (i = 0; i < deferred.n; i++)
		if (deferred.cqes[i].target == t) {
			deferred.claims[deferred.nclaims++] = t;
			return true;
		}
	return false;
}

/*
 * A connected sender's message: one answer may follow it.  Datagrams
 * through the engine are not held (their receive CQE may come before the
 * sender's completion: with "direct" off, 0 to 8,375 of direct-helper's
 * 20,000 UD ping-pongs under load; through the rings, none).  Holding
 * them needs a UD QP's RQ taken under its claim for every datagram, as a
 * soft basic SRQ's is, for the CQEs to keep the WQEs' order; tried
 * (17337c5, reverted), that lost multicast copies: a member's claim
 * kept for its held CQE made the next member on the same SRQ wait for
 * its own thread and be dropped, and two engine threads multicasting to
 * the same QPs dropped copies that the receive lock used to serialise.
 */
static bool defers_for(const struct ibvd_qp *src)
{
	return src->qp_type == IBV_QPT_RC || src->qp_type == IBV_QPT_UC;
}

void ibvd_eng_recv_defer_begin(const struct ibvd_qp *src)
{
	if (defers_for(src))
		deferred.depth++;
}

void ibvd_eng_recv_defer_end(const struct ibvd_qp *src)
{
	if (defers_for(src) && --deferred.depth == 0)
		deferred_flush();
}

/* Can target's CQE wait without passing another of its queue's? */
static bool may_wait(const struct ibvd_qp *target)
{
	return !target->srq || ibvd_eng_srq_claimed(target);
}

static void push_recv_cqe(struct ibvd_qp *target, struct ibvd_cqe *cqe,
			  bool solicited)
{
	struct deferred_cqe *d;

	if (!deferred.depth || !may_wait(target) || deferred.n == DEFERRED_MAX) {
		/* this thread's earlier ones first: a queue's order holds */
		deferred_flush();
		push_now(target, cqe, solicited);
		return;
	}
	d = &deferred.cqes[deferred.n++];
	d->target = target;
	d->cqe = *cqe;
	d->solicited = solicited;
	__atomic_add_fetch(&target->recv_cqes_deferred, 1, __ATOMIC_RELAXED);
}

bool ibvd_eng_recv_deferred(struct ibvd_qp *qp)
{
	return __atomic_load_n(&qp->recv_cqes_deferred, __ATOMIC_ACQUIRE) != 0;
}

void ibvd_eng_recv_complete(struct ibvd_qp *target, const struct eng_rq *rq,
			    const struct eng_recv *rwqe,
			    const struct ibvd_qp *src, const struct eng_req *req,
			    const struct eng_rcv_info *info)
{
	ibvd_eng_rq_consume(rq);
	ibvd_eng_recv_cqe(target, rwqe->wr_id, src, req, info);
}

void ibvd_eng_recv_cqe(struct ibvd_qp *target, uint64_t wr_id,
		       const struct ibvd_qp *src, const struct eng_req *req,
		       const struct eng_rcv_info *info)
{
	struct eng_rcv_done d = {
		.opcode = info->opcode,
		.byte_len = info->byte_len,
		.wc_flags = info->wc_flags,
		.src_qp = src->qp_num,
		.slid = ibvd_eng_port_lid(src),
		.sl = src->qp_type == IBV_QPT_UD ? req->w.av.sl : src->attr.av.sl,
		.solicited = info->solicited,
	};

	/*
	 * On RoCE every packet carries its IP header, and rxe (as RoCE NICs)
	 * says so on every receive completion, RC and UC ones too.
	 */
	if (target->ctx->dev->kind == IBVD_DEV_ROCE)
		d.wc_flags |= IBV_WC_GRH;
	if (req->w.opcode == IBV_WR_SEND_WITH_IMM ||
	    req->w.opcode == IBV_WR_RDMA_WRITE_WITH_IMM) {
		d.imm = req->w.imm_data;
		d.wc_flags |= IBV_WC_WITH_IMM;
	}
	/* verbs.h: the invalidated key shares imm_data's place. */
	if (req->w.opcode == IBV_WR_SEND_WITH_INV) {
		d.imm = req->w.imm_data;
		d.wc_flags |= IBV_WC_WITH_INV;
	}
	ibvd_eng_recv_done(target, wr_id, &d);
}

void ibvd_eng_recv_err(struct ibvd_qp *target, uint64_t wr_id,
		       enum ibv_wc_status status)
{
	struct ibvd_cqe cqe;

	memset(&cqe, 0, sizeof(cqe));
	cqe.wr_id = wr_id;
	cqe.status = status;
	cqe.opcode = IBV_WC_RECV;
	cqe.qp_num = target->qp_num;
	push_recv_cqe(target, &cqe, false);
}

void ibvd_eng_recv_fail(struct ibvd_qp *target, const struct eng_rq *rq,
			const struct eng_recv *rwqe, enum ibv_wc_status status)
{
	ibvd_eng_rq_consume(rq);
	ibvd_eng_recv_err(target, rwqe->wr_id, status);
	ibvd_eng_responder_error(target, 0);
}

static bool with_inv(const struct eng_req *req)
{
	return req->w.opcode == IBV_WR_SEND_WITH_INV;
}

/*
 * A UC message or a UD datagram longer than the receive WQE it would
 * take: as rxe's responder does (class D; E on an SRQ), it is dropped
 * and the WQE stays posted, or, taken from an SRQ, the WQE completes
 * with REM_INV_REQ_ERR.  The QP goes on: neither has acknowledgements
 * to tell its sender, and any sender that knows a UD QP's Q_Key may
 * send one.
 */
static void too_long_dropped(struct ibvd_qp *target, const struct eng_rq *rq,
			     const struct eng_recv *rwqe)
{
	if (!target->srq)
		return;
	ibvd_eng_rq_consume(rq);
	ibvd_eng_recv_err(target, rwqe->wr_id, IBV_WC_REM_INV_REQ_ERR);
}

/*
 * Under the receive lock, with a WQE peeked: place the message, or the
 * first step of a chunked one, which then holds the WQE (chunk.c).  The
 * WQE is consumed only once the bytes landed: a sender whose own memory
 * fails leaves the receiver as it was.
 */
static enum eng_resp place_send(struct ibvd_engine *eng, struct ibvd_qp *src,
				struct ibvd_qp *target, const struct eng_rq *rq,
				const struct eng_recv *rwqe,
				const struct eng_req *req)
{
	/* UC has no acknowledgements: the sender never hears of our errors. */
	bool uc = src->qp_type == IBV_QPT_UC;
	struct eng_rcv_info info = {
		.opcode = IBV_WC_RECV,
		.byte_len = (uint32_t)req->length,
		.solicited = req->w.send_flags & IBV_SEND_SOLICITED,
	};

	if (rwqe->status != IBV_WC_SUCCESS) {
		ibvd_eng_recv_fail(target, rq, rwqe, rwqe->status);
		return uc ? RESP_OK : RESP_OP_ERR;
	}
	if (req->length > rwqe->sgl.total && uc) {
		too_long_dropped(target, rq, rwqe);
		return RESP_OK;
	}
	if (req->length > rwqe->sgl.total) {
		ibvd_eng_recv_fail(target, rq, rwqe, IBV_WC_LOC_LEN_ERR);
		return RESP_INV_REQ;
	}
	/*
	 * A key that cannot be invalidated fails the message as an invalid
	 * request, and the receive completes with the memory management
	 * error.  It is checked before any byte lands, and the window goes
	 * only with the message's completion: here once the bytes landed,
	 * or at the last step of a chunked message (place_next).
	 */
	if (with_inv(req) && ibvd_eng_remote_inv(target, req->w.imm_data,
						 false) < 0) {
		ibvd_eng_recv_fail(target, rq, rwqe, IBV_WC_MW_BIND_ERR);
		return uc ? RESP_OK : RESP_INV_REQ;
	}
	switch (ibvd_eng_copy_at(eng, &rwqe->sgl, 0, &req->local, 0, req->step)) {
	case ENG_COPY_SRC_FAULT:
	case ENG_COPY_SRC_GONE:
		return RESP_LOCAL_FAULT;
	case ENG_COPY_DST_FAULT:
		ibvd_eng_recv_fail(target, rq, rwqe, IBV_WC_LOC_PROT_ERR);
		return uc ? RESP_OK : RESP_OP_ERR;
	case ENG_COPY_DST_GONE:
		return uc ? RESP_OK : RESP_NO_ACK;
	case ENG_COPY_OK:
		break;
	}
	if (!eng_req_last(req))
		return ibvd_eng_hold(src, target, rq, rwqe);
	/* Invalidated by another since the check: the message fails. */
	if (with_inv(req) && ibvd_eng_remote_inv(target, req->w.imm_data,
						 true) < 0) {
		ibvd_eng_recv_fail(target, rq, rwqe, IBV_WC_MW_BIND_ERR);
		return uc ? RESP_OK : RESP_INV_REQ;
	}
	ibvd_eng_recv_complete(target, rq, rwqe, src, req, &info);
	return RESP_OK;
}

enum eng_resp ibvd_eng_no_recv(struct ibvd_qp *src, struct ibvd_qp *target,
			       struct eng_rq *rq, int peek_ret)
{
	bool uc = src->qp_type == IBV_QPT_UC;

	if (peek_ret < 0) {
		ibvd_eng_rq_broken(target, rq);
		return uc ? RESP_OK : RESP_OP_ERR;
	}
	/* No receive WQE: RC sends an RNR NAK, UC drops the message. */
	if (!uc)
		ibvd_eng_count_rnr(src, target);
	return uc ? RESP_OK : RESP_RNR;
}

/*
 * Under the receive lock, a later step of a chunked SEND: its bytes into
 * the WQE target holds for the message.  The lock is kept over the copy:
 * once a flush completed the WQE, nothing writes into its buffers.
 */
static enum eng_resp place_next(struct ibvd_engine *eng, struct ibvd_qp *src,
				struct ibvd_qp *target, const struct eng_rq *rq,
				const struct eng_req *req)
{
	bool uc = src->qp_type == IBV_QPT_UC;
	struct eng_rcv_info info = {
		.opcode = IBV_WC_RECV,
		.byte_len = (uint32_t)req->length,
		.solicited = req->w.send_flags & IBV_SEND_SOLICITED,
	};
	struct eng_inbound *in = ibvd_eng_held(src, target);
	struct eng_sgl sgl = { .n = 0, .total = 0 };

	/* Nothing to continue (UC dropped the start): as for no responder. */
	if (!in)
		return uc ? RESP_OK : RESP_NO_ACK;
	if (ibvd_eng_sges_resolve(in->sge, in->nsge, rq->pd, true, &sgl) !=
	    IBV_WC_SUCCESS) {
		ibvd_eng_held_fail(src, target, IBV_WC_LOC_PROT_ERR);
		return uc ? RESP_OK : RESP_OP_ERR;
	}
	switch (ibvd_eng_copy_at(eng, &sgl, req->off, &req->local, req->off,
				 req->step)) {
	case ENG_COPY_SRC_FAULT:
	case ENG_COPY_SRC_GONE:
		return RESP_LOCAL_FAULT;	/* the WQE fails: held_abort */
	case ENG_COPY_DST_FAULT:
		ibvd_eng_held_fail(src, target, IBV_WC_LOC_PROT_ERR);
		return uc ? RESP_OK : RESP_OP_ERR;
	case ENG_COPY_DST_GONE:
		return uc ? RESP_OK : RESP_NO_ACK;
	case ENG_COPY_OK:
		break;
	}
	if (!eng_req_last(req))
		return RESP_OK;
	/* The key is the first step's (chunk.c pins it). */
	if (with_inv(req) && ibvd_eng_remote_inv(target, req->w.imm_data,
						 true) < 0) {
		ibvd_eng_held_fail(src, target, IBV_WC_MW_BIND_ERR);
		return uc ? RESP_OK : RESP_INV_REQ;
	}
	ibvd_eng_held_complete(src, target, req, &info);
	return RESP_OK;
}

enum eng_resp ibvd_eng_deliver_send(struct ibvd_engine *eng,
				    struct ibvd_qp *src, struct ibvd_qp *target,
				    const struct eng_req *req)
{
	return ibvd_eng_rq_claimed(ibvd_eng_deliver_send_claimed, eng, src,
				   target, req);
}

enum eng_resp ibvd_eng_deliver_send_claimed(struct ibvd_engine *eng,
					    struct ibvd_qp *src,
					    struct ibvd_qp *target,
					    const struct eng_req *req)
{
	struct eng_recv rwqe;
	struct eng_rq rq;
	enum eng_resp r;
	int ret;

	ibvd_eng_count_arrival(src, target, req);
	ibvd_eng_rq_of(target, &rq);
	pthread_mutex_lock(rq.lock);
	if (req->off) {
		r = place_next(eng, src, target, &rq, req);
	} else {
		ret = ibvd_eng_rq_peek(&rq, &rwqe);
		if (ret <= 0)
			r = ibvd_eng_no_recv(src, target, &rq, ret);
		else
			r = place_send(eng, src, target, &rq, &rwqe, req);
	}
	pthread_mutex_unlock(rq.lock);
	return r;
}

/* ---- XRC ------------------------------------------------------------------- */

/*
 * Only the requester connected to target sends to it, on its own engine
 * thread, so setting target's receive side here races with no other
 * delivery; the control thread changes it only under the write lock
 * (objects.h, struct ibvd_qp_xrc).
 */
bool ibvd_eng_xrc_take(struct ibvd_qp *target, uint32_t srqn)
{
	struct ibvd_srq *srq = ibvd_srq_by_num(srqn & 0xFFFFFFu);

	if (!srq || srq->xrcd != target->xrc.xrcd)
		return false;
	target->srq = srq;
	target->pd = srq->pd;
	target->recv_cq = srq->cq;
	return true;
}

bool ibvd_eng_xrc_enter(struct ibvd_qp *target, const struct eng_req *req)
{
	if (ibvd_eng_xrc_take(target, req->w.xrc_srqn))
		return true;
	ibvd_eng_responder_error(target, IBV_EVENT_QP_REQ_ERR);
	return false;
}

/* ---- UD datagrams --------------------------------------------------------- */

/*
 * Unreliable datagrams: SENDs of at most one MTU to (address vector, QPN,
 * Q_Key), unicast or to every member of a multicast group.
 *
 * A UD sender never learns what became of its message: no such QP, a Q_Key
 * mismatch, no receive WQE or a receive error all drop it silently, and
 * the sender completes successfully.  Only its own faults (lengths, keys,
 * memory) complete in error.
 *
 * The receiver's buffer starts with a 40-byte GRH slot: filled (and
 * IBV_WC_GRH set) when the sender used a global address, left untouched
 * otherwise; byte_len counts it either way.
 */
#define GRH_NEXT_HDR_BTH	0x1B
#define GRH_IP_VERSION		6u

static void put_be32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}

static void build_grh(uint8_t grh[ENG_GRH_BYTES], const struct ibvd_qp *src,
		      const struct eng_req *req)
{
	const struct ibvd_av *av = &req->w.av;
	uint16_t paylen = ibvd_ud_grh_paylen((uint32_t)req->length,
					     req->w.opcode == IBV_WR_SEND_WITH_IMM);

	put_be32(grh, GRH_IP_VERSION << 28 | (uint32_t)av->traffic_class << 20 |
		 (av->flow_label & 0xFFFFFu));
	grh[4] = (uint8_t)(paylen >> 8);
	grh[5] = (uint8_t)paylen;
	grh[6] = GRH_NEXT_HDR_BTH;
	grh[7] = av->hop_limit;
	ibvd_eng_port_gid(src, av->sgid_index, grh + 8);
	memcpy(grh + 24, av->dgid, 16);
}

/*
 * Does target take a datagram with this Q_Key?  One it refuses for its
 * Q_Key counts on its port (qkey_viol_cntr).
 */
static bool accepts(struct ibvd_qp *target, uint32_t qkey)
{
	if (target->qp_type != IBV_QPT_UD ||
	    !ibvd_eng_can_receive(eng_qp_state(target)))
		return false;
	if (target->attr.qkey == qkey)
		return true;
	ibvd_eng_qkey_violation(target);
	return false;
}

/* Under the receive lock, with a valid WQE peeked: GRH slot, then data. */
static enum ibv_wc_status place(struct ibvd_engine *eng, struct ibvd_qp *src,
				struct ibvd_qp *target, const struct eng_rq *rq,
				const struct eng_recv *rwqe,
				const struct eng_req *req)
{
	const struct ibvd_av *av = &req->w.av;
	struct eng_rcv_info info = {
		.opcode = IBV_WC_RECV,
		.byte_len = (uint32_t)(ENG_GRH_BYTES + req->length),
		.wc_flags = av->is_global ? IBV_WC_GRH : 0,
		.solicited = req->w.send_flags & IBV_SEND_SOLICITED,
	};
	uint8_t grh[ENG_GRH_BYTES];
	struct eng_sgl hdr;
	enum eng_copy_result c = ENG_COPY_OK;

	if (av->is_global) {
		build_grh(grh, src, req);
		hdr.n = 0;
		hdr.total = 0;
		ibvd_eng_sgl_private(&hdr, grh, sizeof(grh));
		c = ibvd_eng_copy(eng, &rwqe->sgl, 0, &hdr, sizeof(grh));
	}
	if (c == ENG_COPY_OK)
		c = ibvd_eng_copy(eng, &rwqe->sgl, ENG_GRH_BYTES, &req->local,
				  req->length);
	if (c == ENG_COPY_SRC_FAULT || c == ENG_COPY_SRC_GONE)
		return IBV_WC_LOC_PROT_ERR;	/* the WQE stays posted */
	if (c == ENG_COPY_DST_GONE)
		return IBV_WC_SUCCESS;		/* dropped, as by a dead host */
	if (c == ENG_COPY_DST_FAULT)
		ibvd_eng_recv_fail(target, rq, rwqe, IBV_WC_LOC_PROT_ERR);
	else
		ibvd_eng_recv_complete(target, rq, rwqe, src, req, &info);
	return IBV_WC_SUCCESS;
}

/*
 * Under the receive lock: the WQE a datagram of len bytes lands in, true
 * with *rwqe peeked; false when it cannot land: no WQE or one too small
 * (dropped), a broken queue, a bad WQE (it completes in error).
 */
static bool ud_take(struct ibvd_qp *target, const struct eng_rq *rq,
		    struct eng_recv *rwqe, uint64_t len)
{
	int ret = ibvd_eng_rq_peek(rq, rwqe);

	if (ret < 0)
		ibvd_eng_rq_broken(target, rq);
	else if (ret > 0 && rwqe->status != IBV_WC_SUCCESS)
		ibvd_eng_recv_fail(target, rq, rwqe, rwqe->status);
	else if (ret > 0 && ENG_GRH_BYTES + len > rwqe->sgl.total)
		too_long_dropped(target, rq, rwqe);
	return ret > 0 && rwqe->status == IBV_WC_SUCCESS &&
	       ENG_GRH_BYTES + len <= rwqe->sgl.total;
}

enum ibv_wc_status ibvd_eng_ud_deliver_claimed(struct ibvd_engine *eng,
					       struct ibvd_qp *src,
					       struct ibvd_qp *target,
					       const struct eng_req *req,
					       uint32_t qkey)
{
	enum ibv_wc_status st = IBV_WC_SUCCESS;
	struct eng_recv rwqe;
	struct eng_rq rq;

	if (!accepts(target, qkey))
		return IBV_WC_SUCCESS;
	ibvd_eng_count_arrival(src, target, req);
	ibvd_eng_rq_of(target, &rq);
	pthread_mutex_lock(rq.lock);
	if (ud_take(target, &rq, &rwqe, req->length))
		st = place(eng, src, target, &rq, &rwqe, req);
	pthread_mutex_unlock(rq.lock);
	return st;
}

/*
 * The RQ of a UD QP with transit rings is also its library's (the claim,
 * ring.h), which holds it for one message's copy at a time.  A unicast
 * datagram that finds it busy past a short spin (a copy's microseconds)
 * is parked (direct/ud_park.c): copied out of its sender, whose WQE
 * completes, and placed when the claim is next free, as a NIC's buffer
 * holds a packet while the host is slow.  Dropping it instead lost datagrams to
 * receivers merely preempted mid-copy (on a 2-vCPU host, one run in about
 * fifteen of perftest's 500-datagram ib_send_bw, which then waits for
 * ever); having its sender's SQ wait for the claim let a receiver that
 * let go just before each bound hold up everything its senders sent.
 * Only past the park's bounds does a datagram wait in its sender's SQ,
 * and is dropped after UD_CLAIM_DEFER_NS.
 *
 * After a datagram was dropped so, or expired in the park, the queue is
 * held out: until its claim is next found free, datagrams that find it
 * busy are dropped at once, so that a library holding its claim for ever
 * costs its senders one wait, not one per datagram.
 *
 * A member's copy of a multicast datagram is parked only behind
 * datagrams parked for that QP already, to keep their order; else it
 * spins for the claim, within the thread's allowance:
 * ENG_CLAIM_WAIT_NS of spinning in all per pass (or per destroy,
 * ibvd_engine_qp_finish_sends), then a busy claim loses its copy at once.
 * Only a datagram the QP would accept waits.
 */
#define UD_CLAIM_SPIN_NS	5000u		/* unicast, before it is parked */
#define UD_CLAIM_DEFER_NS	10000000u	/* unicast, in its SQ, in all */
#define UD_CLAIM_WAIT_NS	ENG_CLAIM_WAIT_NS	/* multicast: all a pass may */

/* Per receive queue: an SRQ's many QPs share one claim. */
static bool *held_out_of(struct ibvd_qp *target)
{
	return target->srq ? &target->srq->ud_claim_held_out :
			     &target->ud_claim_held_out;
}

static void claim_held_out(struct ibvd_engine *eng, struct ibvd_qp *target)
{
	__atomic_store_n(held_out_of(target), true, __ATOMIC_RELAXED);
	eng_count(&eng->claim_timeouts, 1);
}

/* Does target's busy claim drop datagrams rather than have them wait? */
static bool claim_drops(struct ibvd_qp *target)
{
	return __atomic_load_n(held_out_of(target), __ATOMIC_RELAXED);
}

/*
 * Spin for target's receive claim up to limit ns of this thread's
 * allowance: what ibvd_eng_rq_claim gave, or -EBUSY (*whole: the whole
 * limit was spun).  Found free, a held-out queue is trusted again.
 */
static int ud_claim_spin(struct ibvd_engine *eng, struct ibvd_qp *target,
			 uint64_t limit, bool *whole)
{
	uint64_t start = 0, wait = 0, now = 0;
	int held;

	*whole = false;
	while ((held = ibvd_eng_rq_claim(target)) == -EBUSY) {
		now = ibvd_eng_now();
		if (!start) {
			start = now;
			wait = eng->claim_wait_left < limit ? eng->claim_wait_left :
							      limit;
		} else if (now - start >= wait) {
			eng->claim_wait_left -= wait;
			*whole = wait == limit;
			return -EBUSY;
		}
		cpu_relax();
	}
	if (start)
		eng->claim_wait_left -= now - start < wait ? now - start : wait;
	if (claim_drops(target))
		__atomic_store_n(held_out_of(target), false, __ATOMIC_RELAXED);
	return held;
}

/*
 * A unicast datagram from src that cannot be parked (no room) found
 * target's claim busy: src waits (UD_WAIT) unless its datagram has waited
 * UD_CLAIM_DEFER_NS already; then it is dropped (UD_SENT).
 */
static enum eng_ud ud_claim_busy(struct ibvd_engine *eng, struct ibvd_qp *src,
				 struct ibvd_qp *target)
{
	uint64_t now = ibvd_eng_now();

	if (!src->busy_since_ns)
		src->busy_since_ns = now;
	if (now - src->busy_since_ns < UD_CLAIM_DEFER_NS)
		return UD_WAIT;
	claim_held_out(eng, target);
	return UD_SENT;
}

/* What target's receive will say of src's datagram, fixed now. */
static void parked_done(struct eng_parked *p, const struct ibvd_qp *src,
			const struct eng_req *req)
{
	const struct ibvd_av *av = &req->w.av;

	p->done.opcode = IBV_WC_RECV;
	p->done.byte_len = (uint32_t)(ENG_GRH_BYTES + req->length);
	p->done.wc_flags = av->is_global ? IBV_WC_GRH : 0;
	p->done.src_qp = src->qp_num;
	p->done.slid = ibvd_eng_port_lid(src);
	p->done.sl = av->sl;
	p->done.solicited = req->w.send_flags & IBV_SEND_SOLICITED;
	if (req->w.opcode == IBV_WR_SEND_WITH_IMM) {
		p->done.imm = req->w.imm_data;
		p->done.wc_flags |= IBV_WC_WITH_IMM;
	}
	p->global = av->is_global;
	if (p->global)
		build_grh(p->grh, src, req);
}

/*
 * Is target src's peer on transit rings?  Its datagrams must not be
 * parked: the libraries' ring, which does not know the park, would pass
 * the ones after them (a peer's datagram comes this way when the ring
 * was full), so those wait in src's SQ as before.
 */
static bool ring_peer(const struct ibvd_qp *src, const struct ibvd_qp *target)
{
	const struct ibvd_direct *d = src->direct;

	return d && d->qp[!src->direct_side] == target &&
	       !__atomic_load_n(&d->ud_broken, __ATOMIC_RELAXED);
}

/*
 * Park src's datagram for target (direct/ud_park.c): UD_SENT, src's WQE
 * is done; UD_FAILED if src's own memory failed; else (no room, target is
 * src's ring peer) what ud_claim_busy says, or for a member's copy of a
 * multicast datagram, which cannot wait in src's SQ, UD_SENT: lost.
 */
/*
 * Whose share of the park a datagram to target takes: the account its
 * context charges (a uid on a device), so that a uid's many contexts get
 * one share, not one each.
 */
static const void *park_owner(const struct ibvd_qp *target)
{
	const void *account = target->ctx->handles.charge_owner;

	return account ? account : target->ctx;
}

static enum eng_ud ud_park(struct ibvd_engine *eng, struct ibvd_qp *src,
			   struct ibvd_qp *target, const struct eng_req *req,
			   uint32_t qkey, bool member, enum ibv_wc_status *status)
{
	uint32_t len = (uint32_t)req->length;
	struct eng_sgl dst = { .n = 0 };
	struct eng_parked *p = NULL;
	enum eng_copy_result c;

	if (!ring_peer(src, target) &&
	    ibvd_eng_park_room(eng, park_owner(target), len))
		p = calloc(1, sizeof(*p) + len);
	if (!p)
		return member ? UD_SENT : ud_claim_busy(eng, src, target);
	ibvd_eng_sgl_private(&dst, p->payload, len);
	c = ibvd_eng_copy(eng, &dst, 0, &req->local, len);
	if (c == ENG_COPY_SRC_FAULT || c == ENG_COPY_SRC_GONE) {
		free(p);
		*status = IBV_WC_LOC_PROT_ERR;
		return UD_FAILED;
	}
	p->since = ibvd_eng_now();
	p->target_qpn = target->qp_num;
	p->target_gen = target->incarnation;
	p->qkey = qkey;
	p->len = len;
	parked_done(p, src, req);
	ibvd_eng_count_arrival(src, target, req);
	ibvd_eng_park_push(eng, p, park_owner(target));
	return UD_SENT;
}

enum eng_ud ibvd_eng_ud_deliver(struct ibvd_engine *eng, struct ibvd_qp *src,
				struct ibvd_qp *target, const struct eng_req *req,
				uint32_t qkey, bool member,
				enum ibv_wc_status *status)
{
	bool whole;
	int held;

	/* a Q_Key violation is counted here, and waits for nothing */
	if (!accepts(target, qkey))
		return UD_SENT;
	/* behind the datagrams parked for it, in order: a group's copy too */
	if (ibvd_eng_park_holds(eng, target->qp_num))
		return claim_drops(target) ? UD_SENT :
		       ud_park(eng, src, target, req, qkey, member, status);
	held = ud_claim_spin(eng, target,
			     member ? UD_CLAIM_WAIT_NS : UD_CLAIM_SPIN_NS, &whole);
	if (held == -EBUSY && !member)
		return claim_drops(target) ? UD_SENT :
		       ud_park(eng, src, target, req, qkey, false, status);
	/* only a whole wait says the queue holds its claim (and counts) */
	if (held == -EBUSY && whole)
		claim_held_out(eng, target);
	if (held < 0)
		return UD_SENT;
	*status = ibvd_eng_ud_deliver_claimed(eng, src, target, req, qkey);
	ibvd_eng_rq_unclaim(target, held);
	return *status == IBV_WC_SUCCESS ? UD_SENT : UD_FAILED;
}

/* Under the receive lock, with a valid WQE peeked: a parked datagram. */
static void parked_place(struct ibvd_engine *eng, struct ibvd_qp *target,
			 const struct eng_rq *rq, const struct eng_recv *rwqe,
			 const struct eng_parked *p)
{
	enum eng_copy_result c = ENG_COPY_OK;
	struct eng_sgl src = { .n = 0 };

	if (p->global) {
		ibvd_eng_sgl_private(&src, p->grh, sizeof(p->grh));
		c = ibvd_eng_copy(eng, &rwqe->sgl, 0, &src, sizeof(p->grh));
		src.n = 0;
		src.total = 0;
	}
	ibvd_eng_sgl_private(&src, p->payload, p->len);
	if (c == ENG_COPY_OK)
		c = ibvd_eng_copy(eng, &rwqe->sgl, ENG_GRH_BYTES, &src, p->len);
	if (c == ENG_COPY_DST_FAULT) {
		ibvd_eng_recv_fail(target, rq, rwqe, IBV_WC_LOC_PROT_ERR);
	} else if (c == ENG_COPY_OK) {
		ibvd_eng_rq_consume(rq);
		ibvd_eng_recv_done(target, rwqe->wr_id, &p->done);
	}
	/* else its receiver is gone: dropped */
}

enum eng_unpark ibvd_eng_ud_unpark(struct ibvd_engine *eng, struct ibvd_qp *t,
				   const struct eng_parked *p)
{
	struct eng_recv rwqe;
	struct eng_rq rq;
	int held;

	/* a state or Q_Key that takes it no more (its Q_Key counted once) */
	if (!ibvd_eng_can_receive(eng_qp_state(t)) || t->attr.qkey != p->qkey)
		return PARK_GONE;
	held = ibvd_eng_rq_claim(t);
	if (held == -EBUSY)
		return PARK_BUSY;
	if (held < 0)
		return PARK_GONE;
	if (claim_drops(t))
		__atomic_store_n(held_out_of(t), false, __ATOMIC_RELAXED);
	ibvd_eng_rq_of(t, &rq);
	pthread_mutex_lock(rq.lock);
	if (ud_take(t, &rq, &rwqe, p->len))
		parked_place(eng, t, &rq, &rwqe, p);
	pthread_mutex_unlock(rq.lock);
	ibvd_eng_rq_unclaim(t, held);
	return PARK_GONE;
}

void ibvd_eng_ud_park_expired(struct ibvd_engine *eng, struct ibvd_qp *t)
{
	claim_held_out(eng, t);
}

/* ---- datagrams from outside --------------------------------------------- */

void ibvd_eng_recv_done(struct ibvd_qp *target, uint64_t wr_id,
			const struct eng_rcv_done *d)
{
	struct ibvd_cqe cqe;

	memset(&cqe, 0, sizeof(cqe));
	cqe.wr_id = wr_id;
	cqe.status = IBV_WC_SUCCESS;
	cqe.opcode = d->opcode;
	cqe.byte_len = d->byte_len;
	cqe.wc_flags = d->wc_flags;
	cqe.imm_data = d->imm;
	cqe.qp_num = target->qp_num;
	cqe.src_qp = d->src_qp;
	cqe.slid = d->slid;
	/*
	 * A UD sender's SL is the vector its library copied into the WQE,
	 * which a hostile sender can write as it likes: the receiver (of
	 * another tenant, maybe) gets the 4 bits a packet can carry.
	 */
	cqe.sl = d->sl & 0xF;
	push_recv_cqe(target, &cqe, d->solicited);
}

static void wire_cqe(struct ibvd_qp *target, uint64_t wr_id,
		     const struct eng_datagram *dg)
{
	struct eng_rcv_done d = {
		.opcode = IBV_WC_RECV,
		.byte_len = ENG_GRH_BYTES + dg->len,
		/* Every RoCE packet has an IP header: the GRH slot counts. */
		.wc_flags = IBV_WC_GRH | (dg->has_imm ? IBV_WC_WITH_IMM : 0),
		.imm = dg->imm,
		.src_qp = dg->src_qp,
		.sl = dg->sl,
		.solicited = dg->solicited,
	};

	ibvd_eng_recv_done(target, wr_id, &d);
}

/* Under the receive lock, with a valid WQE peeked: GRH slot, then data. */
static void wire_place(struct ibvd_qp *target, const struct eng_rq *rq,
		       const struct eng_recv *rwqe,
		       const struct eng_datagram *dg)
{
	if (ibvd_eng_copy_in(&rwqe->sgl, 0, dg->grh, ENG_GRH_BYTES) < 0 ||
	    ibvd_eng_copy_in(&rwqe->sgl, ENG_GRH_BYTES, dg->payload, dg->len) < 0) {
		ibvd_eng_recv_fail(target, rq, rwqe, IBV_WC_LOC_PROT_ERR);
		return;
	}
	ibvd_eng_rq_consume(rq);
	wire_cqe(target, rwqe->wr_id, dg);
}

void ibvd_eng_ud_receive(struct ibvd_qp *target, const struct eng_datagram *dg)
{
	struct eng_recv rwqe;
	struct eng_rq rq;

	if (!accepts(target, dg->qkey))
		return;
	ibvd_eng_port_count(target, IBVD_PC_RCVD_PKTS, 1);
	ibvd_eng_rq_of(target, &rq);
	pthread_mutex_lock(rq.lock);
	if (ud_take(target, &rq, &rwqe, dg->len))
		wire_place(target, &rq, &rwqe, dg);
	pthread_mutex_unlock(rq.lock);
}
