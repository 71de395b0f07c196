/*
 * XRC target QPs: OPEN_QP, and how a target outlives the context that
 * made it.  A target belongs to its XRC domain; every context that made or
 * opened it holds a handle on it (struct ibvd_xrc_hold), and one of them
 * owns it (qp->ctx: its engine thread serves the QP, its client gets the
 * QP's events).  When the owner lets go, another holder takes over; the
 * QP is destroyed with the last hold (objects.h, struct ibvd_qp_xrc).
 */
#include <config.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <infiniband/verbs.h>

#include "engine/engine.h"
#include "log.h"
#include "server/call.h"
#include "util.h"
#include "verbs/context.h"
#include "verbs/verbs.h"

#define HOLD_INDEX_MIN_BITS	2

static int hold_add(struct ibvd_qp *qp, struct ibvd_context *ctx,
		    uint32_t handle)
{
	struct ibvd_xrc_hold *h = calloc(1, sizeof(*h));

	if (!h)
		return -ENOMEM;
	h->ctx = ctx;
	h->handle = handle;
	if (ibvd_keyed_insert(&qp->xrc.hold_index, &h->node, handle) < 0) {
		free(h);
		return -ENOMEM;
	}
	LIST_INSERT_HEAD(&qp->xrc.holds, h, link);
	return 0;
}

static void hold_free(struct ibvd_qp *qp, struct ibvd_xrc_hold *h)
{
	LIST_REMOVE(h, link);
	ibvd_keyed_remove(&qp->xrc.hold_index, &h->node);
	free(h);
}

static struct ibvd_xrc_hold *hold_find(struct ibvd_qp *qp,
				       const struct ibvd_context *ctx,
				       uint32_t handle)
{
	struct ibvd_keyed *n;

	/* handles are per context: several holders may use the same one */
	for (n = ibvd_keyed_find(&qp->xrc.hold_index, handle); n;
	     n = ibvd_keyed_next(n)) {
		struct ibvd_xrc_hold *h = container_of(n, struct ibvd_xrc_hold,
						       node);

		if (h->ctx == ctx)
			return h;
	}
	return NULL;
}

int ibvd_xrc_tgt_init(struct ibvd_qp *qp, struct ibvd_xrcd *x)
{
	int ret;

	LIST_INIT(&qp->xrc.holds);
	qp->xrc.hold_index = (struct ibvd_keyed_table){
		.min_bits = HOLD_INDEX_MIN_BITS };
	ret = hold_add(qp, qp->ctx, qp->handle);
	if (ret < 0)
		return ret;
	qp->xrc.xrcd = x;
	LIST_INSERT_HEAD(&x->tgts, qp, xrc.link);
	ibvd_xrcd_use(x, 1);
	return 0;
}

void ibvd_xrc_tgt_fini(struct ibvd_qp *qp)
{
	struct ibvd_xrc_hold *h;

	/*
	 * Holds left here are a creation undone (the request failed after
	 * the QP was made); a released QP has none.  Their handles went
	 * with the QP's.
	 */
	while ((h = LIST_FIRST(&qp->xrc.holds)))
		hold_free(qp, h);
	ibvd_keyed_free(&qp->xrc.hold_index);
	LIST_REMOVE(qp, xrc.link);
	ibvd_xrcd_use(qp->xrc.xrcd, -1);
}

/*
 * Move what the owner keeps for qp (doorbell, rings) to h's context.  The
 * rings move too: each holds a reference on the arena it sits in, and a
 * context's arena (its whole address range in the daemon, its memfd) must
 * go with the context, not live on uncharged under a holder that took
 * over.  The charge for its wire transport's state (qp->wire_bytes) moves
 * with them: the holder's reset or destroy gives it back.
 */
static size_t rings_charge(const struct ibvd_qp *qp)
{
	size_t n = 0;

	if (qp->sq.arena)
		n += ibvd_ring_charge(qp->sq.nslots, qp->sq.stride);
	if (qp->rq.arena)
		n += ibvd_ring_charge(qp->rq.nslots, qp->rq.stride);
	return n;
}

static int move_owner(struct ibvd_qp *qp, const struct ibvd_xrc_hold *h)
{
	struct ibvd_context *old = qp->ctx;
	size_t charge = rings_charge(qp);
	size_t wire = qp->wire_bytes;
	struct ibvd_ring sq, rq;
	int ret;

	/* A second handle of the same context: nothing moves. */
	if (h->ctx == old) {
		qp->handle = h->handle;
		return 0;
	}
	/*
	 * The rings' bytes are counted once while they move: a holder at its
	 * budget, or of the same uid, can take them as long as the old
	 * context's count leaves room.
	 */
	ibvd_ctx_ring_uncharge(old, charge + wire);
	ret = ibvd_ring_copy(h->ctx, &qp->sq, &sq);
	if (ret < 0)
		goto fail;
	ret = ibvd_ring_copy(h->ctx, &qp->rq, &rq);
	if (ret < 0)
		goto fail_sq;
	ret = ibvd_ctx_ring_charge(h->ctx, wire);
	if (ret < 0)
		goto fail_rq;
	ibvd_doorbell_free(old, qp);
	ret = ibvd_doorbell_alloc(h->ctx, qp);
	if (ret < 0) {
		/* Keep the old bit until a holder has room. */
		ibvd_doorbell_alloc(old, qp);
		goto fail_wire;
	}
	ibvd_ctx_ring_recharge(old, charge);
	ibvd_ring_free(old, &qp->sq);
	ibvd_ring_free(old, &qp->rq);
	qp->sq = sq;
	qp->rq = rq;
	ibvd_engine_xrc_owner_leaves(qp);
	qp->ctx = h->ctx;
	qp->handle = h->handle;
	ibvd_engine_xrc_owner_came(qp);
	return 0;
fail_wire:
	ibvd_ctx_ring_uncharge(h->ctx, wire);
fail_rq:
	ibvd_ring_free(h->ctx, &rq);
fail_sq:
	ibvd_ring_free(h->ctx, &sq);
fail:
	ibvd_ctx_ring_recharge(old, charge + wire);
	return ret;
}

/*
 * Only if no holder can take a doorbell: the QP cannot be served, so it
 * goes, and the holders' handles with it (their next use is EINVAL).
 */
static void drop_all_holds(struct ibvd_qp *qp)
{
	struct ibvd_xrc_hold *h;

	while ((h = LIST_FIRST(&qp->xrc.holds))) {
		if (h->ctx != qp->ctx || h->handle != qp->handle)
			ibvd_handle_remove(&h->ctx->handles, h->handle,
					   IBVD_OBJ_QP);
		hold_free(qp, h);
	}
}

bool ibvd_xrc_tgt_release(struct ibvd_qp *qp, struct ibvd_context *ctx,
			  uint32_t handle)
{
	struct ibvd_xrc_hold *h = hold_find(qp, ctx, handle);
	int ret = -ENOMEM;

	if (h)
		hold_free(qp, h);
	if (LIST_EMPTY(&qp->xrc.holds))
		return false;
	ibvd_handle_remove(&ctx->handles, handle, IBVD_OBJ_QP);
	if (qp->ctx != ctx || qp->handle != handle)
		return true;
	LIST_FOREACH(h, &qp->xrc.holds, link) {
		ret = move_owner(qp, h);
		if (ret == 0)
			return true;
	}
	log_err("XRC target QP %#x: no holder has room for its doorbell and rings (%s); destroyed",
		qp->qp_num, strerror(-ret));
	/* The caller destroys it; removing the owner's handle twice is harmless. */
	drop_all_holds(qp);
	return false;
}

void ibvd_xrc_srq_gone(struct ibvd_srq *srq)
{
	struct ibvd_qp *qp;

	LIST_FOREACH(qp, &srq->xrcd->tgts, xrc.link)
		if (qp->srq == srq) {
			ibvd_engine_xrc_srq_gone(qp);
			qp->srq = NULL;
			qp->pd = NULL;
			qp->recv_cq = NULL;
		}
}

/* ---- OPEN_QP ------------------------------------------------------------ */

static int reply_open(struct ibvd_call *call, const struct ibvd_qp *qp,
		      uint32_t handle)
{
	Ibvd__CreateQpReply reply = IBVD__CREATE_QP_REPLY__INIT;
	Ibvd__QpCap cap = IBVD__QP_CAP__INIT;

	reply.handle = handle;
	reply.qp_num = qp->qp_num;
	reply.cap = &cap;
	return ibvd_call_reply(call, &reply.base, NULL, 0);
}

int ibvd_req_open_qp(struct ibvd_call *call)
{
	const Ibvd__OpenQp *req = (const Ibvd__OpenQp *)call->msg;
	struct ibvd_context *ctx = ibvd_call_ctx(call);
	struct ibvd_xrcd *x = ibvd_call_xrcd(call, req->xrcd);
	struct ibvd_qp *qp;
	uint32_t handle;
	int ret;

	if (!x)
		return -EINVAL;
	if (req->qp_type != IBV_QPT_XRC_RECV)
		return ibvd_call_error(call, -EINVAL,
				       "only XRC target QPs can be opened");
	qp = ibvd_qp_by_num(req->qp_num & 0xFFFFFFu);
	if (!qp || qp->qp_type != IBV_QPT_XRC_RECV || qp->xrc.xrcd != x)
		return ibvd_call_error(call, -ENOENT,
				       "no XRC target QP %#x in that domain",
				       req->qp_num);
	ret = ibvd_obj_add(ctx, IBVD_OBJ_QP, qp, &handle);
	if (ret < 0)
		return ibvd_call_error(call, ret, "too many QPs");
	ret = hold_add(qp, ctx, handle);
	if (ret < 0) {
		ibvd_handle_remove(&ctx->handles, handle, IBVD_OBJ_QP);
		return ret;
	}
	ret = reply_open(call, qp, handle);
	/* A failed send tore the context down, our hold with it. */
	return ret;
}
