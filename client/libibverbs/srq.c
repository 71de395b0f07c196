/*
 * Shared receive queues: one receive ring (ring.h) in the context's ring
 * arena, posted to by ibv_post_srq_recv (post.c) and consumed by the
 * engine for every QP attached.  The limit event (IBV_EVENT_SRQ_LIMIT_REACHED) is the
 * engine's: it knows the ring's fill level when it takes a WQE.
 */
#include "config.h"

#include <stdlib.h>
#include <sched.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ibvd_verbs.h"

static int take_srq_ring(struct ibvc_srq *srq, const Ibvd__CreateSrqReply *r)
{
	if (!ibvc_wq_geometry_ok(r->nslots, r->stride, IBVD_RECV_WQE_HDR) ||
	    (uint64_t)r->max_sge * sizeof(struct ibvd_sge) >
	    r->stride - IBVD_RECV_WQE_HDR)
		return -EPROTO;
	return ibvc_wq_setup(&srq->rq, to_ibvc_context(srq->srq.context),
			     r->ring, r->nslots, r->stride, r->max_wr);
}

static int create_on_daemon(struct ibvc_srq *srq, struct ibv_srq_attr *attr)
{
	Ibvd__CreateSrq req = IBVD__CREATE_SRQ__INIT;
	Ibvd__CreateSrqReply *reply = NULL;
	struct ibv_context *ctx = srq->srq.context;
	int ret;

	req.pd = srq->srq.pd->handle;
	req.srq_type = srq->srq_type;
	if (srq->xrcd) {
		req.xrcd = srq->xrcd->handle;
		req.cq = srq->cq->handle;
	}
	req.max_wr = attr->max_wr;
	req.max_sge = attr->max_sge;
	req.srq_limit = attr->srq_limit;
	ret = ibvd_conn_call(ibvc_conn_of(ctx), IBVD_MSG_CREATE_SRQ, &req.base,
			     &ibvd__create_srq_reply__descriptor,
			     (ProtobufCMessage **)&reply, NULL, NULL);
	if (ret < 0)
		return ret;
	srq->srq.handle = reply->handle;
	srq->srq_num = reply->srq_num;
	srq->max_sge = reply->max_sge;
	ret = take_srq_ring(srq, reply);
	if (ret < 0)
		ibvc_destroy_handle(ctx, IBVD_MSG_DESTROY_SRQ, reply->handle);
	/* Callers learn what they got (ibv_create_srq(3)). */
	if (ret == 0) {
		attr->max_wr = reply->max_wr;
		attr->max_sge = reply->max_sge;
	}
	ibvd__create_srq_reply__free_unpacked(reply, NULL);
	return ret;
}

static void srq_free(struct ibvc_srq *srq)
{
	ibvc_wq_destroy(&srq->rq);
	if (srq->srq.pd)
		ibvc_pd_release(srq->srq.pd);
	pthread_cond_destroy(&srq->srq.cond);
	pthread_mutex_destroy(&srq->srq.mutex);
	free(srq);
}

/* What an XRC SRQ adds to a basic one: its domain and CQ. */
struct srq_xrc {
	struct ibvc_xrcd *xrcd;
	struct ibv_cq *cq;
};

static int create_srq(struct ibv_pd *pd, void *srq_context,
		      struct ibv_srq_attr *attr, const struct srq_xrc *xrc,
		      struct ibvc_srq **ret_srq)
{
	struct ibvc_srq *srq;
	int ret;

	srq = calloc(1, sizeof(*srq));
	if (!srq)
		return -ENOMEM;
	srq->srq.context = pd->context;
	srq->srq.srq_context = srq_context;
	srq->srq.pd = pd;
	ibvc_pd_hold(pd);	/* released by srq_free */
	srq->srq_type = xrc ? IBV_SRQT_XRC : IBV_SRQT_BASIC;
	if (xrc) {
		srq->xrcd = xrc->xrcd;
		srq->cq = xrc->cq;
	}
	pthread_mutex_init(&srq->srq.mutex, NULL);
	pthread_cond_init(&srq->srq.cond, NULL);
	ret = create_on_daemon(srq, attr);
	if (ret < 0)
		goto fail;
	ret = ibvc_obj_add(to_ibvc_context(pd->context), srq->srq.handle,
			   IBVC_OBJ_SRQ, srq);
	if (ret < 0) {
		ibvc_destroy_handle(pd->context, IBVD_MSG_DESTROY_SRQ,
				    srq->srq.handle);
		goto fail;
	}
	*ret_srq = srq;
	return 0;
fail:
	srq_free(srq);
	return ret;
}

struct ibv_srq *ibv_create_srq(struct ibv_pd *pd,
			       struct ibv_srq_init_attr *srq_init_attr)
{
	struct ibvc_srq *srq;
	int ret;

	if (!pd || !srq_init_attr)
		return ibvc_null_ret(-EINVAL);
	ret = create_srq(pd, srq_init_attr->srq_context, &srq_init_attr->attr,
			 NULL, &srq);
	return ret < 0 ? ibvc_null_ret(ret) : &srq->srq;
}

/* XRC SRQs name their domain and CQ, both of ctx. */
static int xrc_attr(struct ibv_context *ctx,
		    const struct ibv_srq_init_attr_ex *attr, struct srq_xrc *x)
{
	uint32_t need = IBV_SRQ_INIT_ATTR_XRCD | IBV_SRQ_INIT_ATTR_CQ;

	if ((attr->comp_mask & need) != need || !attr->xrcd || !attr->cq ||
	    attr->xrcd->context != ctx || attr->cq->context != ctx)
		return -EINVAL;
	x->xrcd = to_ibvc_xrcd(attr->xrcd);
	x->cq = attr->cq;
	return 0;
}

/*
 * The header inline sends basic SRQs with a PD to ibv_create_srq itself;
 * what reaches this op is the rest: XRC SRQs, tag-matching SRQs, which we
 * do not have, or a basic one described with more attributes.
 */
static int create_srq_ex(struct ibv_context *ctx,
			 struct ibv_srq_init_attr_ex *attr,
			 struct ibvc_srq **ret_srq)
{
	uint32_t known = IBV_SRQ_INIT_ATTR_PD | IBV_SRQ_INIT_ATTR_TYPE |
			 IBV_SRQ_INIT_ATTR_XRCD | IBV_SRQ_INIT_ATTR_CQ;
	enum ibv_srq_type type = IBV_SRQT_BASIC;
	struct srq_xrc x;
	int ret;

	if (attr->comp_mask & ~known)
		return -EOPNOTSUPP;
	if (attr->comp_mask & IBV_SRQ_INIT_ATTR_TYPE)
		type = attr->srq_type;
	if (type != IBV_SRQT_BASIC && type != IBV_SRQT_XRC)
		return -EOPNOTSUPP;
	if (!(attr->comp_mask & IBV_SRQ_INIT_ATTR_PD) || !attr->pd ||
	    attr->pd->context != ctx)
		return -EINVAL;
	if (type == IBV_SRQT_BASIC)
		return create_srq(attr->pd, attr->srq_context, &attr->attr,
				  NULL, ret_srq);
	ret = xrc_attr(ctx, attr, &x);
	if (ret < 0)
		return ret;
	return create_srq(attr->pd, attr->srq_context, &attr->attr, &x,
			  ret_srq);
}

int ibvc_get_srq_num_op(struct ibv_srq *ibsrq, uint32_t *srq_num)
{
	struct ibvc_srq *srq;

	if (!ibsrq || !srq_num)
		return EINVAL;
	srq = to_ibvc_srq(ibsrq);
	/* Only XRC SRQs have a number senders can name. */
	if (srq->srq_type != IBV_SRQT_XRC)
		return EOPNOTSUPP;
	*srq_num = srq->srq_num;
	return 0;
}

struct ibv_srq *ibvc_create_srq_ex_op(struct ibv_context *ctx,
				      struct ibv_srq_init_attr_ex *attr)
{
	struct ibvc_srq *srq;
	int ret;

	if (!attr)
		return ibvc_null_ret(-EINVAL);
	ret = create_srq_ex(ctx, attr, &srq);
	return ret < 0 ? ibvc_null_ret(ret) : &srq->srq;
}

/*
 * A resize moves the SRQ's slots (the daemon's verbs/srq.c) while its
 * posting lock keeps our posters out, the objects lock the engine's
 * passes, and `resizing` the placers of its direct QPs on any of our
 * threads (direct_recv.c, srq_resizing): set, then the claim word (ring.h)
 * seen free once, so that no placer is still inside.  Each holds it for
 * one placing at a time; one that does not let go within a second is
 * not waited for (EBUSY, nothing done).
 */
#define SRQ_CLAIM_WAIT_NS	1000000000ull

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int placers_out(struct ibvc_srq *srq)
{
	const uint32_t *claim = &srq->rq.client->claim;
	uint64_t until = 0;

	__atomic_store_n(&srq->resizing, true, __ATOMIC_SEQ_CST);
	while (__atomic_load_n(claim, __ATOMIC_SEQ_CST) == IBVD_WQ_CLAIM_LIBRARY) {
		if (!until)
			until = now_ns() + SRQ_CLAIM_WAIT_NS;
		else if (now_ns() > until)
			return -EBUSY;
		sched_yield();
	}
	return 0;
}

/* Release: a placer that sees the flag clear sees the new slots. */
static void placers_in(struct ibvc_srq *srq)
{
	__atomic_store_n(&srq->resizing, false, __ATOMIC_RELEASE);
}

static int modify_on_daemon(struct ibvc_srq *srq,
			    const struct ibv_srq_attr *attr, int mask)
{
	Ibvd__ModifySrq req = IBVD__MODIFY_SRQ__INIT;
	Ibvd__CreateSrqReply *reply = NULL;
	struct ibv_context *ctx = srq->srq.context;
	int ret;

	req.handle = srq->srq.handle;
	req.attr_mask = (uint32_t)mask;
	req.max_wr = attr->max_wr;
	req.srq_limit = attr->srq_limit;
	ret = ibvd_conn_call(ibvc_conn_of(ctx), IBVD_MSG_MODIFY_SRQ, &req.base,
			     &ibvd__create_srq_reply__descriptor,
			     (ProtobufCMessage **)&reply, NULL, NULL);
	if (ret < 0)
		return ret;
	if (mask & IBV_SRQ_MAX_WR)
		ret = ibvc_wq_move_slots(&srq->rq, to_ibvc_context(ctx),
					 reply->ring, reply->nslots,
					 reply->stride, reply->max_wr);
	ibvd__create_srq_reply__free_unpacked(reply, NULL);
	return ret;
}

/* QUERY_SRQ: its attributes, and where its slots are. */
static int query_on_daemon(struct ibv_srq *srq, Ibvd__SrqAttr **reply)
{
	Ibvd__Handle req = IBVD__HANDLE__INIT;

	req.handle = srq->handle;
	return ibvd_conn_call(ibvc_conn_of(srq->context), IBVD_MSG_QUERY_SRQ,
			      &req.base, &ibvd__srq_attr__descriptor,
			      (ProtobufCMessage **)reply, NULL, NULL);
}

/*
 * A resize that failed after it was sent may still have been done (its
 * answer lost, late, or not one we could follow): go where the daemon
 * says the slots are now.
 */
static int follow_slots(struct ibvc_srq *srq)
{
	Ibvd__SrqAttr *a = NULL;
	int ret;

	ret = query_on_daemon(&srq->srq, &a);
	if (ret < 0)
		return ret;
	ret = ibvc_wq_move_slots(&srq->rq, to_ibvc_context(srq->srq.context),
				 a->ring, a->nslots, a->stride, a->max_wr);
	ibvd__srq_attr__free_unpacked(a, NULL);
	return ret;
}

static int resize_srq(struct ibvc_srq *srq, const struct ibv_srq_attr *attr,
		      int mask)
{
	int ret;

	pthread_mutex_lock(&srq->rq.lock);
	ret = placers_out(srq);
	if (ret == 0) {
		ret = modify_on_daemon(srq, attr, mask);
		/*
		 * Not knowing where its slots are, the SRQ is left to the
		 * engine: no more posts, and the placers kept out for good.
		 */
		if (ret < 0 && follow_slots(srq) < 0) {
			srq->rq.limit = 0;
			goto out;
		}
	}
	placers_in(srq);
out:
	pthread_mutex_unlock(&srq->rq.lock);
	return ret;
}

int ibv_modify_srq(struct ibv_srq *srq, struct ibv_srq_attr *srq_attr,
		   int srq_attr_mask)
{
	int ret;

	if (!srq || !srq_attr)
		return EINVAL;
	if (srq_attr_mask & IBV_SRQ_MAX_WR)
		ret = resize_srq(to_ibvc_srq(srq), srq_attr, srq_attr_mask);
	else
		ret = modify_on_daemon(to_ibvc_srq(srq), srq_attr,
				       srq_attr_mask);
	return ibvc_errno_ret(ret);
}

static int query_srq(struct ibv_srq *srq, struct ibv_srq_attr *srq_attr)
{
	Ibvd__SrqAttr *reply = NULL;
	int ret;

	ret = query_on_daemon(srq, &reply);
	if (ret < 0)
		return ret;
	srq_attr->max_wr = reply->max_wr;
	srq_attr->max_sge = reply->max_sge;
	srq_attr->srq_limit = reply->srq_limit;
	ibvd__srq_attr__free_unpacked(reply, NULL);
	return 0;
}

int ibv_query_srq(struct ibv_srq *srq, struct ibv_srq_attr *srq_attr)
{
	if (!srq || !srq_attr)
		return EINVAL;
	return ibvc_errno_ret(query_srq(srq, srq_attr));
}

int ibv_destroy_srq(struct ibv_srq *ibsrq)
{
	struct ibvc_srq *srq;
	int ret;

	if (!ibsrq)
		return EINVAL;
	srq = to_ibvc_srq(ibsrq);
	ret = ibvc_destroy_handle(ibsrq->context, IBVD_MSG_DESTROY_SRQ,
				  ibsrq->handle);
	if (ret < 0)
		return ibvc_errno_ret(ret);
	/* No event can name it from now on; wait for those handed out. */
	ibvc_obj_remove(to_ibvc_context(ibsrq->context), ibsrq->handle);
	ibvc_wait_acked(&ibsrq->mutex, &ibsrq->cond, &ibsrq->events_completed,
			&srq->async_delivered);
	srq_free(srq);
	return 0;
}
