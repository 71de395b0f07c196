/*
 * Shared receive queues: CREATE_SRQ, MODIFY_SRQ, QUERY_SRQ, DESTROY_SRQ.
 *
 * An SRQ is one work-queue ring (ring.h) of receive WQEs; MODIFY_SRQ with
 * IBV_SRQ_MAX_WR gives it new slots.  Its limit is one-shot: MODIFY_SRQ
 * with IBV_SRQ_LIMIT arms it, the engine disarms it when it sends
 * IBV_EVENT_SRQ_LIMIT_REACHED.
 *
 * An XRC SRQ also belongs to an XRC domain, completes on a CQ of its own
 * and has a daemon-wide number, which XRC senders name (xrc/qp.c and the
 * engine's responder find it by that number).
 */
#include <config.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <infiniband/verbs.h>

#include "barrier.h"
#include "context.h"
#include "engine/engine.h"
#include "ibverbsd.pb-c.h"
#include "server/call.h"
#include "verbs.h"

struct srq_geom {
	uint32_t nslots, stride, max_sge;
};

static int srq_geometry(struct ibvd_call *call, const Ibvd__CreateSrq *req,
			struct srq_geom *g)
{
	struct ibvd_limits lim;
	uint32_t sge;

	ibvd_ctx_limits(ibvd_call_ctx(call), &lim);
	if (req->max_wr < 1 || req->max_wr > lim.max_srq_wr)
		return ibvd_call_error(call, -EINVAL, "max_wr %u outside 1..%u",
				       req->max_wr, lim.max_srq_wr);
	if (req->max_sge > lim.max_srq_sge)
		return ibvd_call_error(call, -EINVAL, "max_sge %u above %u",
				       req->max_sge, lim.max_srq_sge);
	sge = req->max_sge ? req->max_sge : 1;
	g->nslots = ibvd_roundup_pow2(req->max_wr);
	g->stride = ibvd_roundup_pow2(IBVD_RECV_WQE_HDR +
				      sge * (uint32_t)sizeof(struct ibvd_sge));
	/* Whatever fits the slot is usable, up to the device's limit. */
	g->max_sge = (g->stride - IBVD_RECV_WQE_HDR) / sizeof(struct ibvd_sge);
	if (g->max_sge > lim.max_srq_sge)
		g->max_sge = lim.max_srq_sge;
	return 0;
}

static int reply_srq(struct ibvd_call *call, const struct ibvd_srq *srq)
{
	Ibvd__CreateSrqReply reply = IBVD__CREATE_SRQ_REPLY__INIT;
	Ibvd__RingPlace place;

	reply.handle = srq->handle;
	reply.max_wr = srq->max_wr;
	reply.max_sge = srq->max_sge;
	reply.nslots = srq->ring.nslots;
	reply.stride = srq->ring.stride;
	reply.srq_num = srq->srq_num;
	ibvd_ring_place(&srq->ring, &place);
	reply.ring = &place;
	return ibvd_call_reply(call, &reply.base, NULL, 0);
}

static int srq_new(struct ibvd_context *ctx, struct ibvd_pd *pd,
		   const struct srq_geom *g, struct ibvd_srq **ret_srq)
{
	struct ibvd_srq *srq = calloc(1, sizeof(*srq));
	int ret;

	if (!srq)
		return -ENOMEM;
	ret = ibvd_ring_alloc(ctx, &srq->ring, g->nslots, g->stride, false);
	if (ret < 0) {
		free(srq);
		return ret;
	}
	srq->ctx = ctx;
	srq->pd = pd;
	srq->max_wr = g->nslots;
	srq->max_sge = g->max_sge;
	pthread_mutex_init(&srq->lock, NULL);
	*ret_srq = srq;
	return 0;
}

/* What an XRC SRQ names besides its PD: its domain and CQ. */
struct srq_xrc_refs {
	struct ibvd_xrcd *xrcd;
	struct ibvd_cq *cq;
};

static int lookup_xrc(struct ibvd_call *call, const Ibvd__CreateSrq *req,
		      struct srq_xrc_refs *x)
{
	struct ibvd_context *ctx = ibvd_call_ctx(call);

	x->xrcd = NULL;
	x->cq = NULL;
	if (req->srq_type == IBV_SRQT_BASIC)
		return req->xrcd || req->cq ?
		       ibvd_call_error(call, -EINVAL,
				       "a basic SRQ has no domain or CQ") : 0;
	if (req->srq_type != IBV_SRQT_XRC)
		return ibvd_call_error(call, -EOPNOTSUPP, "SRQ type %u",
				       req->srq_type);
	x->xrcd = ibvd_call_xrcd(call, req->xrcd);
	if (!x->xrcd)
		return -EINVAL;
	x->cq = ibvd_handle_lookup(&ctx->handles, req->cq, IBVD_OBJ_CQ);
	if (!x->cq)
		return ibvd_call_error(call, -EINVAL, "no CQ %#x", req->cq);
	return 0;
}

/* Undo srq_new. */
static void srq_free(struct ibvd_srq *srq)
{
	ibvd_ring_free(srq->ctx, &srq->ring);
	pthread_mutex_destroy(&srq->lock);
	free(srq);
}

/* XRC: take the domain and CQ, and a number senders can name. */
static int srq_join_xrc(struct ibvd_srq *srq, const struct srq_xrc_refs *x)
{
	int ret;

	srq->srq_type = x->xrcd ? IBV_SRQT_XRC : IBV_SRQT_BASIC;
	if (!x->xrcd)
		return 0;
	/* set before the engine can find it by number */
	srq->xrcd = x->xrcd;
	srq->cq = x->cq;
	ibvd_objects_write_lock();
	ret = ibvd_srq_register(srq);
	ibvd_objects_write_unlock();
	if (ret < 0) {
		srq->xrcd = NULL;
		srq->cq = NULL;
		return ret;
	}
	x->cq->users++;
	ibvd_xrcd_use(x->xrcd, 1);
	return 0;
}

int ibvd_req_create_srq(struct ibvd_call *call)
{
	const Ibvd__CreateSrq *req = (const Ibvd__CreateSrq *)call->msg;
	struct ibvd_context *ctx = ibvd_call_ctx(call);
	struct ibvd_pd *pd = ibvd_handle_lookup(&ctx->handles, req->pd, IBVD_OBJ_PD);
	struct srq_xrc_refs x;
	struct ibvd_srq *srq;
	struct srq_geom g = { 0 };
	int ret;

	if (!pd)
		return ibvd_call_error(call, -EINVAL, "no PD %#x", req->pd);
	ret = lookup_xrc(call, req, &x);
	if (ret < 0)
		return ret;
	ret = srq_geometry(call, req, &g);
	if (ret < 0)
		return ret;
	/* req->srq_limit is ignored, as ibv_create_srq(3) says. */
	ret = srq_new(ctx, pd, &g, &srq);
	if (ret < 0)
		return ibvd_call_error(call, ret, "cannot create the SRQ ring");
	ret = ibvd_obj_add(ctx, IBVD_OBJ_SRQ, srq, &srq->handle);
	if (ret < 0) {
		srq_free(srq);
		return ibvd_call_error(call, ret, "too many SRQs");
	}
	pd->users++;
	ret = srq_join_xrc(srq, &x);
	if (ret < 0) {
		ibvd_objects_write_lock();
		ibvd_srq_destroy(srq);
		ibvd_objects_write_unlock();
		return ibvd_call_error(call, ret, "cannot number the XRC SRQ");
	}
	ret = reply_srq(call, srq);
	if (ret < 0 && ibvd_call_ctx(call)) {
		ibvd_objects_write_lock();
		ibvd_srq_destroy(srq);
		ibvd_objects_write_unlock();
	}
	return ret;
}

static struct ibvd_srq *call_srq(struct ibvd_call *call, uint32_t handle)
{
	struct ibvd_srq *srq = ibvd_handle_lookup(&ibvd_call_ctx(call)->handles,
						  handle, IBVD_OBJ_SRQ);

	if (!srq)
		ibvd_call_error(call, -EINVAL, "no SRQ %#x", handle);
	return srq;
}

/*
 * The WQEs posted and not taken yet, [*head, *tail).  The tail is the
 * library's, which holds its posting lock while it resizes; the head the
 * engine's, unless the libraries of the SRQ's direct QPs take from it too
 * (ibvd_engine_srq_claimed): then theirs, in the client header, which the
 * engine only learns when it next takes the claim.  -EPROTO for counters
 * a library could not have left.
 */
static int srq_posted(const struct ibvd_srq *srq, uint32_t *head,
		      uint32_t *tail)
{
	const struct ibvd_wq_client *c = srq->ring.client_page;

	*head = srq->head;
	*tail = ibvd_observe(&c->tail);
	if (ibvd_engine_srq_claimed(srq)) {
		uint32_t taken = ibvd_read_once(&c->direct_head);

		if ((int32_t)(taken - *head) < 0)
			return -EPROTO;
		*head = taken;
	}
	return *tail - *head > srq->ring.nslots ? -EPROTO : 0;
}

/*
 * The bulk of a resize, without the objects lock (ibvd_ring_precopy):
 * the posted WQEs as they are now.  Only the control thread changes an SRQ's slots; the engine
 * and the claims' holders only read them, and the library that asks
 * holds its posting lock.  So what is copied here stays valid, and
 * srq_move under the lock adds only what was posted meanwhile, which
 * takes a client that moves its tail itself.  Its head need only be no
 * later than srq_move's: an engine step may be moving the engine's and
 * the claim's heads right now, so the earlier of the two is taken, and
 * srq_move judges the counters at rest.
 */
static void srq_precopy(struct ibvd_srq *srq, const struct ibvd_ring *to,
			struct ibvd_ring_copied *done)
{
	const struct ibvd_wq_client *c = srq->ring.client_page;
	uint32_t head, taken, tail, n;

	pthread_mutex_lock(&srq->lock);
	head = srq->head;
	if (ibvd_engine_srq_claimed(srq)) {
		taken = ibvd_read_once(&c->direct_head);
		if ((int32_t)(taken - head) < 0)
			head = taken;
	}
	pthread_mutex_unlock(&srq->lock);
	/* Acquire: the WQEs below the tail are written. */
	tail = ibvd_observe(&c->tail);
	n = tail - head;
	/*
	 * The engine's head lags the claim's while libraries place (it
	 * catches up when the engine next takes the claim), by more than a
	 * lap if a receiver polls without ringing: the WQEs posted are at
	 * most a ring's worth below the tail, and each of those slots holds
	 * its counter's WQE, or one already taken.
	 */
	if (n > srq->ring.nslots)
		n = srq->ring.nslots;
	/* more than fits: srq_move refuses, unless the engine takes some */
	if (n > to->nslots)
		n = to->nslots;
	done->lo = done->hi = tail - n;
	ibvd_ring_precopy(&srq->ring, to, &c->tail, tail, done);
}

/* Is counter x in [lo, hi], a range of at most 2^31? */
static bool between(uint32_t x, uint32_t lo, uint32_t hi)
{
	return x - lo <= hi - lo;
}

/*
 * Copy to `to`, at the same counter values, the posted WQEs the precopy
 * did not, so that the engine's head, the claim's and the library's tail
 * stay valid in the headers both rings share.  -EINVAL if they do not
 * fit; -EBUSY if more than IBVD_RING_PRECOPY_LEFT are left to copy, which only a
 * client moving its own tail makes: no client makes the copy under the
 * lock large.  Objects lock held for writing (no
 * engine pass runs), and srq->lock.
 */
static int srq_move(struct ibvd_srq *srq, const struct ibvd_ring *to,
		    const struct ibvd_ring_copied *done)
{
	uint32_t head, tail, from;
	int ret;

	ret = srq_posted(srq, &head, &tail);
	if (ret < 0)
		return ret;
	if (tail - head > to->nslots)
		return -EINVAL;
	from = head;
	if (between(head, done->lo, done->hi))
		from = between(tail, head, done->hi) ? tail : done->hi;
	if (tail - from > IBVD_RING_PRECOPY_LEFT)
		return -EBUSY;
	ibvd_ring_slots_copy(&srq->ring, to, from, tail);
	return 0;
}

/*
 * IBV_SRQ_MAX_WR: new slots, nslots of them; the headers stay (verbs.h's
 * ibvd_ring_new_slots).  The library asking keeps its threads from
 * posting to or placing into the old slots meanwhile, and points its SRQ
 * at the new ones from the reply; the objects lock keeps the engine out
 * while they move (no engine step keeps a claim past its end).
 */
static int srq_resize(struct ibvd_call *call, struct ibvd_srq *srq,
		      uint32_t nslots)
{
	struct ibvd_ring fresh, old;
	struct ibvd_ring_copied copied;
	int ret;

	if (nslots == srq->ring.nslots)
		return 0;
	ret = ibvd_ring_new_slots(srq->ctx, &srq->ring, nslots, &fresh);
	if (ret < 0)
		return ibvd_call_error(call, ret, "no room for %u WQEs", nslots);
	srq_precopy(srq, &fresh, &copied);
	ibvd_objects_write_lock();
	pthread_mutex_lock(&srq->lock);
	ret = srq_move(srq, &fresh, &copied);
	if (ret == 0) {
		old = srq->ring;
		srq->ring = fresh;
		srq->max_wr = nslots;
	}
	pthread_mutex_unlock(&srq->lock);
	ibvd_objects_write_unlock();
	ibvd_ring_free_slots(srq->ctx, ret == 0 ? &old : &fresh);
	if (ret == -EPROTO)
		return ibvd_call_error(call, ret, "SRQ %#x: its counters are broken",
				       srq->handle);
	if (ret == -EBUSY)
		return ibvd_call_error(call, ret,
				       "SRQ %#x: WQEs were posted while it was resized",
				       srq->handle);
	if (ret < 0)
		return ibvd_call_error(call, ret,
				       "max_wr %u is less than the WQEs posted",
				       nslots);
	return 0;
}

/*
 * The checks rxe makes, all against the SRQ as it is before the call: not
 * in error; max_wr within the device's and not below an armed limit;
 * a new limit not above max_wr.  *nslots: the slots for the new max_wr.
 */
static int modify_args(struct ibvd_call *call, const Ibvd__ModifySrq *req,
		       struct ibvd_srq *srq, uint32_t *nslots)
{
	const struct ibvd_wq_engine *ep = srq->ring.engine_page;
	struct ibvd_limits lim;
	uint32_t armed;

	*nslots = srq->ring.nslots;
	if (req->attr_mask & ~(uint32_t)(IBV_SRQ_MAX_WR | IBV_SRQ_LIMIT))
		return ibvd_call_error(call, -EINVAL, "unknown attr_mask bits %#x",
				       req->attr_mask);
	if (ibvd_read_once(&ep->error))
		return ibvd_call_error(call, -EINVAL, "SRQ %#x is in error",
				       srq->handle);
	pthread_mutex_lock(&srq->lock);
	armed = srq->srq_limit;
	pthread_mutex_unlock(&srq->lock);
	if (req->attr_mask & IBV_SRQ_MAX_WR) {
		ibvd_ctx_limits(srq->ctx, &lim);
		if (req->max_wr < 1 || req->max_wr > lim.max_srq_wr)
			return ibvd_call_error(call, -EINVAL,
					       "max_wr %u outside 1..%u",
					       req->max_wr, lim.max_srq_wr);
		if (armed && req->max_wr < armed)
			return ibvd_call_error(call, -EINVAL,
					       "max_wr %u below the armed limit %u",
					       req->max_wr, armed);
		*nslots = ibvd_roundup_pow2(req->max_wr);
	}
	if ((req->attr_mask & IBV_SRQ_LIMIT) && req->srq_limit > srq->max_wr)
		return ibvd_call_error(call, -EINVAL, "srq_limit %u above max_wr %u",
				       req->srq_limit, srq->max_wr);
	return 0;
}

/*
 * The reply is CREATE_SRQ's: after IBV_SRQ_MAX_WR the library takes the
 * new slots from it.  Nothing changes on an error.
 */
int ibvd_req_modify_srq(struct ibvd_call *call)
{
	const Ibvd__ModifySrq *req = (const Ibvd__ModifySrq *)call->msg;
	struct ibvd_srq *srq = call_srq(call, req->handle);
	struct ibvd_wq_engine *ep;
	uint32_t nslots = 0;
	int ret;

	if (!srq)
		return -EINVAL;
	ret = modify_args(call, req, srq, &nslots);
	if (ret < 0)
		return ret;
	ret = srq_resize(call, srq, nslots);
	if (ret < 0)
		return ret;
	if (req->attr_mask & IBV_SRQ_LIMIT) {
		ep = srq->ring.engine_page;
		pthread_mutex_lock(&srq->lock);
		srq->srq_limit = req->srq_limit;
		ibvd_write_once(&ep->srq_limit, req->srq_limit);
		pthread_mutex_unlock(&srq->lock);
	}
	return reply_srq(call, srq);
}

int ibvd_req_query_srq(struct ibvd_call *call)
{
	const Ibvd__Handle *req = (const Ibvd__Handle *)call->msg;
	struct ibvd_srq *srq = call_srq(call, req->handle);
	Ibvd__SrqAttr attr = IBVD__SRQ_ATTR__INIT;
	Ibvd__RingPlace place;

	if (!srq)
		return -EINVAL;
	attr.max_wr = srq->max_wr;
	attr.max_sge = srq->max_sge;
	attr.nslots = srq->ring.nslots;
	attr.stride = srq->ring.stride;
	ibvd_ring_place(&srq->ring, &place);
	attr.ring = &place;
	pthread_mutex_lock(&srq->lock);
	attr.srq_limit = srq->srq_limit;	/* 0 once the event fired */
	pthread_mutex_unlock(&srq->lock);
	return ibvd_call_reply(call, &attr.base, NULL, 0);
}

/* The objects lock is held for writing: the engine finds XRC SRQs by number. */
void ibvd_srq_destroy(struct ibvd_srq *srq)
{
	ibvd_handle_remove(&srq->ctx->handles, srq->handle, IBVD_OBJ_SRQ);
	srq->pd->users--;
	if (srq->xrcd) {
		ibvd_srq_unregister(srq);
		ibvd_xrc_srq_gone(srq);
		srq->cq->users--;
		ibvd_xrcd_use(srq->xrcd, -1);
	}
	srq_free(srq);
}

int ibvd_req_destroy_srq(struct ibvd_call *call)
{
	const Ibvd__Handle *req = (const Ibvd__Handle *)call->msg;
	struct ibvd_srq *srq = call_srq(call, req->handle);

	if (!srq)
		return -EINVAL;
	if (srq->users)
		return ibvd_call_error(call, -EBUSY, "SRQ %#x is used by %u QPs",
				       req->handle, srq->users);
	ibvd_objects_write_lock();
	ibvd_srq_destroy(srq);
	ibvd_objects_write_unlock();
	return 0;
}
