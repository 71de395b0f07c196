/*
 * Queue pairs: CREATE_QP, QUERY_QP, DESTROY_QP.  MODIFY_QP and the state
 * machine are in qp_modify.c.
 *
 * A QP has an SQ ring and, without an SRQ, an RQ ring, both carved from
 * its context's ring arena as ring.h says.
 * Capacities are rounded up to what the rings really hold and reported:
 * max_send_wr is the SQ's slot count, max_inline_data and max_send_sge
 * what fits the slot after the WQE header.
 */
#include <config.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <infiniband/verbs.h>

#include "context.h"
#include "core/device.h"
#include "engine/engine.h"
#include "ibverbsd.pb-c.h"
#include "server/call.h"
#include "verbs.h"
#include "verbs_msg.h"

#define SGE_BYTES	((uint32_t)sizeof(struct ibvd_sge))

/* What CREATE_QP names, looked up in the caller's context. */
struct qp_refs {
	struct ibvd_pd *pd;
	struct ibvd_cq *send_cq, *recv_cq;
	struct ibvd_srq *srq;
	struct ibvd_xrcd *xrcd;		/* XRC_RECV only */
};

static bool is_xrc(uint32_t type)
{
	return type == IBV_QPT_XRC_SEND || type == IBV_QPT_XRC_RECV;
}

/* Does a QP of this type have a receive queue of its own (or an SRQ)? */
static bool has_recv_side(uint32_t type)
{
	return !is_xrc(type);
}

/* Ring geometry and the capacities it gives. */
struct qp_geom {
	uint32_t sq_nslots, sq_stride, rq_nslots, rq_stride;
	struct ibv_qp_cap cap;
};

static int check_type(struct ibvd_call *call, uint32_t type)
{
	switch (type) {
	case IBV_QPT_RC:
	case IBV_QPT_UC:
	case IBV_QPT_UD:
	case IBV_QPT_XRC_SEND:
	case IBV_QPT_XRC_RECV:
		return 0;
	case IBV_QPT_RAW_PACKET:
	case IBV_QPT_DRIVER:
		return ibvd_call_error(call, -EOPNOTSUPP, "QP type %u is not supported",
				       type);
	default:
		return ibvd_call_error(call, -EINVAL, "unknown QP type %u", type);
	}
}

/* XRC_RECV: its domain only; nothing else is its own. */
static int lookup_tgt_refs(struct ibvd_call *call, const Ibvd__CreateQp *req,
			   struct qp_refs *r)
{
	memset(r, 0, sizeof(*r));
	if (req->pd || req->send_cq || req->recv_cq || req->srq)
		return ibvd_call_error(call, -EINVAL,
				       "an XRC target QP has no PD, CQs or SRQ");
	r->xrcd = ibvd_call_xrcd(call, req->xrcd);
	return r->xrcd ? 0 : -EINVAL;
}

/* XRC_SEND: a PD and a send CQ, no receive side. */
static int lookup_ini_refs(struct ibvd_call *call, const Ibvd__CreateQp *req,
			   struct qp_refs *r)
{
	struct ibvd_handle_table *h = &ibvd_call_ctx(call)->handles;

	memset(r, 0, sizeof(*r));
	if (req->srq || req->xrcd)
		return ibvd_call_error(call, -EINVAL,
				       "an XRC initiator QP has no SRQ or domain");
	r->pd = ibvd_handle_lookup(h, req->pd, IBVD_OBJ_PD);
	r->send_cq = ibvd_handle_lookup(h, req->send_cq, IBVD_OBJ_CQ);
	if (!r->pd)
		return ibvd_call_error(call, -EINVAL, "no PD %#x", req->pd);
	if (!r->send_cq)
		return ibvd_call_error(call, -EINVAL, "no CQ %#x", req->send_cq);
	return 0;
}

static int lookup_refs(struct ibvd_call *call, const Ibvd__CreateQp *req,
		       struct qp_refs *r)
{
	struct ibvd_handle_table *h = &ibvd_call_ctx(call)->handles;

	/* Loopback is a multicast matter: UD's only. */
	if (req->create_flags & ~(uint32_t)IBV_QP_CREATE_BLOCK_SELF_MCAST_LB)
		return ibvd_call_error(call, -EOPNOTSUPP,
				       "QP creation flags %#x",
				       req->create_flags);
	if (req->create_flags && req->qp_type != IBV_QPT_UD)
		return ibvd_call_error(call, -EINVAL,
				       "only UD QPs block multicast loopback");

	if (req->qp_type == IBV_QPT_XRC_RECV)
		return lookup_tgt_refs(call, req, r);
	if (req->qp_type == IBV_QPT_XRC_SEND)
		return lookup_ini_refs(call, req, r);
	r->xrcd = NULL;
	if (req->xrcd)
		return ibvd_call_error(call, -EINVAL, "only XRC QPs have a domain");
	r->pd = ibvd_handle_lookup(h, req->pd, IBVD_OBJ_PD);
	r->send_cq = ibvd_handle_lookup(h, req->send_cq, IBVD_OBJ_CQ);
	r->recv_cq = ibvd_handle_lookup(h, req->recv_cq, IBVD_OBJ_CQ);
	r->srq = req->srq ? ibvd_handle_lookup(h, req->srq, IBVD_OBJ_SRQ) : NULL;
	if (!r->pd)
		return ibvd_call_error(call, -EINVAL, "no PD %#x", req->pd);
	if (!r->send_cq || !r->recv_cq)
		return ibvd_call_error(call, -EINVAL, "no CQ %#x",
				       r->send_cq ? req->recv_cq : req->send_cq);
	if (req->srq && !r->srq)
		return ibvd_call_error(call, -EINVAL, "no SRQ %#x", req->srq);
	/* an XRC SRQ takes its domain's messages only (XRC_RECV QPs') */
	if (r->srq && r->srq->srq_type != IBV_SRQT_BASIC)
		return ibvd_call_error(call, -EINVAL, "SRQ %#x is an XRC SRQ",
				       req->srq);
	return 0;
}

static uint32_t min_u32(uint32_t a, uint32_t b)
{
	return a < b ? a : b;
}

static uint32_t max1(uint32_t v)
{
	return v ? v : 1;
}

static int check_caps(struct ibvd_call *call, const struct ibv_qp_cap *c,
		      bool has_rq)
{
	struct ibvd_limits lim;

	ibvd_ctx_limits(ibvd_call_ctx(call), &lim);
	if (c->max_send_wr > lim.max_qp_wr ||
	    (has_rq && c->max_recv_wr > lim.max_qp_wr))
		return ibvd_call_error(call, -EINVAL, "more than %u WRs", lim.max_qp_wr);
	if (c->max_send_sge > lim.max_sge || (has_rq && c->max_recv_sge > lim.max_sge))
		return ibvd_call_error(call, -EINVAL, "more than %u SGEs", lim.max_sge);
	if (c->max_inline_data > IBVD_MAX_INLINE)
		return ibvd_call_error(call, -EINVAL, "max_inline_data above %u",
				       IBVD_MAX_INLINE);
	return 0;
}

/* Round the requested caps up to rings, and report what those hold. */
static void qp_geometry(const struct ibvd_context *ctx,
			const struct ibv_qp_cap *want, bool has_rq,
			struct qp_geom *g)
{
	struct ibvd_limits lim;
	uint32_t room;

	ibvd_ctx_limits(ctx, &lim);
	memset(g, 0, sizeof(*g));
	room = max1(want->max_send_sge) * SGE_BYTES;
	if (want->max_inline_data > room)
		room = want->max_inline_data;
	g->sq_nslots = ibvd_roundup_pow2(max1(want->max_send_wr));
	g->sq_stride = ibvd_roundup_pow2(IBVD_SEND_WQE_HDR + room);
	room = g->sq_stride - IBVD_SEND_WQE_HDR;
	g->cap.max_send_wr = g->sq_nslots;
	g->cap.max_send_sge = min_u32(room / SGE_BYTES, lim.max_sge);
	g->cap.max_inline_data = min_u32(room, IBVD_MAX_INLINE);
	if (!has_rq)
		return;
	g->rq_nslots = ibvd_roundup_pow2(max1(want->max_recv_wr));
	g->rq_stride = ibvd_roundup_pow2(IBVD_RECV_WQE_HDR +
					 max1(want->max_recv_sge) * SGE_BYTES);
	g->cap.max_recv_wr = g->rq_nslots;
	g->cap.max_recv_sge = min_u32((g->rq_stride - IBVD_RECV_WQE_HDR) / SGE_BYTES,
				      lim.max_sge);
}

static struct ibvd_qp *qp_alloc(struct ibvd_context *ctx,
				const Ibvd__CreateQp *req,
				const struct qp_refs *r, const struct qp_geom *g)
{
	struct ibvd_qp *qp = calloc(1, sizeof(*qp));

	if (!qp)
		return NULL;
	qp->ctx = ctx;
	qp->pd = r->pd;
	qp->send_cq = r->send_cq;
	qp->recv_cq = r->recv_cq;
	qp->srq = r->srq;
	qp->qp_type = req->qp_type;
	qp->state = IBV_QPS_RESET;
	qp->sq_sig_all = req->sq_sig_all;
	qp->block_self_mcast =
		req->create_flags & IBV_QP_CREATE_BLOCK_SELF_MCAST_LB;
	qp->cap = g->cap;
	LIST_INIT(&qp->mcast);
	pthread_mutex_init(&qp->recv_lock, NULL);
	return qp;
}

/* The QP's SQ and (without an SRQ) RQ rings. */
static int qp_rings(struct ibvd_qp *qp, const struct qp_geom *g)
{
	int ret;

	ret = ibvd_ring_alloc(qp->ctx, &qp->sq, g->sq_nslots, g->sq_stride, false);
	if (ret < 0 || !g->rq_nslots)
		return ret;
	ret = ibvd_ring_alloc(qp->ctx, &qp->rq, g->rq_nslots, g->rq_stride, false);
	if (ret < 0)
		ibvd_ring_free(qp->ctx, &qp->sq);
	return ret;
}

/* Give the rings back to whichever context holds the QP now. */
static void qp_rings_free(struct ibvd_qp *qp)
{
	ibvd_ring_free(qp->ctx, &qp->rq);
	ibvd_ring_free(qp->ctx, &qp->sq);
}

/* Make qp reachable: doorbell bit and QP number, under the lock. */
static int qp_publish(struct ibvd_qp *qp)
{
	int ret;

	ibvd_objects_write_lock();
	ret = ibvd_doorbell_alloc(qp->ctx, qp);
	if (ret == 0) {
		ret = ibvd_qp_register(qp);
		if (ret < 0)
			ibvd_doorbell_free(qp->ctx, qp);
	}
	ibvd_objects_write_unlock();
	return ret;
}

/* A target's pd, CQ and SRQ are the engine's of the moment: none counted. */
static void users_add(struct ibvd_qp *qp, int d)
{
	if (qp->qp_type == IBV_QPT_XRC_RECV)
		return;
	qp->pd->users += d;
	qp->send_cq->users += d;
	if (qp->recv_cq)
		qp->recv_cq->users += d;
	if (qp->srq)
		qp->srq->users += d;
}

static int reply_qp(struct ibvd_call *call, const struct ibvd_qp *qp,
		    const struct qp_geom *g, struct ibvd_qp_bundle *b)
{
	Ibvd__CreateQpReply reply = IBVD__CREATE_QP_REPLY__INIT;
	Ibvd__QpCap cap = IBVD__QP_CAP__INIT;
	Ibvd__RingPlace sq, rq;

	cap.max_send_wr = qp->cap.max_send_wr;
	cap.max_recv_wr = qp->cap.max_recv_wr;
	cap.max_send_sge = qp->cap.max_send_sge;
	cap.max_recv_sge = qp->cap.max_recv_sge;
	cap.max_inline_data = qp->cap.max_inline_data;
	reply.handle = qp->handle;
	reply.qp_num = qp->qp_num;
	reply.cap = &cap;
	reply.sq_nslots = g->sq_nslots;
	reply.sq_stride = g->sq_stride;
	reply.rq_nslots = g->rq_nslots;
	reply.rq_stride = g->rq_stride;
	reply.doorbell = qp->doorbell;
	ibvd_ring_place(&qp->sq, &sq);
	reply.sq = &sq;
	if (qp->rq.arena) {
		ibvd_ring_place(&qp->rq, &rq);
		reply.rq = &rq;
	}
	ibvd_qp_bundle_to_msg(b, &reply);
	return ibvd_call_reply(call, &reply.base, b->fds, b->nfds);
}

/* Build a QP from a checked request: 0 with *ret_qp published. */
static int qp_create(struct ibvd_call *call, const Ibvd__CreateQp *req,
		     const struct qp_refs *r, struct ibvd_qp **ret_qp,
		     struct qp_geom *g)
{
	struct ibvd_context *ctx = ibvd_call_ctx(call);
	struct ibv_qp_cap want;
	struct ibvd_qp *qp;
	int ret;

	bool has_rq = !r->srq && has_recv_side(req->qp_type);

	ibvd_qp_cap_from_msg(req->cap, &want);
	/* A target sends nothing: its one-slot SQ only lets it flush. */
	if (req->qp_type == IBV_QPT_XRC_RECV)
		memset(&want, 0, sizeof(want));
	ret = check_caps(call, &want, has_rq);
	if (ret < 0)
		return ret;
	qp_geometry(ctx, &want, has_rq, g);
	qp = qp_alloc(ctx, req, r, g);
	if (!qp)
		return -ENOMEM;
	ret = ibvd_obj_add(ctx, IBVD_OBJ_QP, qp, &qp->handle);
	if (ret < 0)
		goto fail_free;
	ret = qp_rings(qp, g);
	if (ret < 0)
		goto fail_handle;
	ret = qp_publish(qp);
	if (ret < 0)
		goto fail_rings;
	if (r->xrcd) {
		ret = ibvd_xrc_tgt_init(qp, r->xrcd);
		if (ret < 0)
			goto fail_publish;
	}
	users_add(qp, 1);
	*ret_qp = qp;
	return 0;
fail_publish:
	ibvd_objects_write_lock();
	ibvd_qp_unregister(qp);
	ibvd_doorbell_free(ctx, qp);
	ibvd_objects_write_unlock();
fail_rings:
	qp_rings_free(qp);
fail_handle:
	ibvd_handle_remove(&ctx->handles, qp->handle, IBVD_OBJ_QP);
fail_free:
	pthread_mutex_destroy(&qp->recv_lock);
	free(qp);
	return ibvd_call_error(call, ret, "cannot create the QP");
}

/* Undo a QP made in this request, then the bundle's CQs and channels. */
static void create_undo(struct ibvd_qp *qp, struct ibvd_qp_bundle *b)
{
	if (!qp) {
		ibvd_qp_bundle_undo(b);
		return;
	}
	/* The QP used the CQs: they go under the lock too. */
	ibvd_objects_write_lock();
	ibvd_qp_destroy(qp);
	ibvd_qp_bundle_undo(b);
	ibvd_objects_write_unlock();
}

int ibvd_req_create_qp(struct ibvd_call *call)
{
	const Ibvd__CreateQp *asked = (const Ibvd__CreateQp *)call->msg;
	struct ibvd_qp_bundle b;
	struct ibvd_qp *qp = NULL;
	Ibvd__CreateQp req;
	struct qp_refs r;
	struct qp_geom g;
	int ret;

	ret = check_type(call, asked->qp_type);
	if (ret < 0)
		return ret;
	ret = ibvd_qp_bundle_make(call, asked, &b, &req);
	if (ret < 0)
		return ret;
	ret = lookup_refs(call, &req, &r);
	if (ret == 0)
		ret = qp_create(call, &req, &r, &qp, &g);
	if (ret == 0)
		ret = ibvd_qp_bundle_init(call, &req, qp, &b);
	if (ret < 0) {
		create_undo(qp, &b);
		return ret;
	}
	ret = reply_qp(call, qp, &g, &b);
	ibvd_qp_bundle_sent(&b);
	if (ret < 0 && ibvd_call_ctx(call))
		create_undo(qp, &b);
	return ret;
}

/*
 * The objects lock is held for writing: once it is released no engine
 * pass can reach qp (registry, doorbell map, multicast groups; the engine's
 * timers look QPs up by number again).
 */
void ibvd_qp_destroy(struct ibvd_qp *qp)
{
	struct ibvd_context *ctx = qp->ctx;

	ibvd_direct_leave(qp);
	ibvd_engine_qp_destroy(qp);
	ibvd_qp_wire_uncharge(qp);
	ibvd_mw_qp_gone(qp);
	ibvd_qp_unregister(qp);
	ibvd_doorbell_free(ctx, qp);
	ibvd_mcast_detach_all(qp);
	ibvd_handle_remove(&ctx->handles, qp->handle, IBVD_OBJ_QP);
	users_add(qp, -1);
	if (qp->qp_type == IBV_QPT_XRC_RECV && qp->xrc.xrcd)
		ibvd_xrc_tgt_fini(qp);
	ibvd_staging_free(qp);
	qp_rings_free(qp);
	pthread_mutex_destroy(&qp->recv_lock);
	free(qp);
}

struct ibvd_qp *ibvd_call_qp(struct ibvd_call *call, uint32_t handle)
{
	struct ibvd_qp *qp = ibvd_handle_lookup(&ibvd_call_ctx(call)->handles,
						handle, IBVD_OBJ_QP);

	if (!qp)
		ibvd_call_error(call, -EINVAL, "no QP %#x", handle);
	return qp;
}

void ibvd_qp_release(struct ibvd_context *ctx, uint32_t handle,
		     struct ibvd_qp *qp)
{
	/* Another context still holds a target: it lives on. */
	if (qp->qp_type == IBV_QPT_XRC_RECV &&
	    ibvd_xrc_tgt_release(qp, ctx, handle))
		return;
	ibvd_qp_destroy(qp);
}

int ibvd_req_destroy_qp(struct ibvd_call *call)
{
	const Ibvd__Handle *req = (const Ibvd__Handle *)call->msg;
	struct ibvd_qp *qp = ibvd_call_qp(call, req->handle);

	if (!qp)
		return -EINVAL;
	/* as the kernel's: a member leaves its groups first (ibv_detach_mcast) */
	if (!LIST_EMPTY(&qp->mcast))
		return ibvd_call_error(call, -EBUSY,
				       "QP %u is still attached to a multicast group",
				       qp->qp_num);
	ibvd_objects_write_lock();
	ibvd_engine_qp_finish_sends(qp);
	ibvd_qp_release(ibvd_call_ctx(call), req->handle, qp);
	ibvd_objects_write_unlock();
	return 0;
}

/* ---- QUERY_QP --------------------------------------------------------- */

static void av_to_msg(const struct ibvd_av *av, uint8_t static_rate,
		      uint8_t src_path_bits, Ibvd__AhAttr *m)
{
	ibvd__ah_attr__init(m);
	m->dgid.data = (uint8_t *)av->dgid;
	m->dgid.len = sizeof(av->dgid);
	m->flow_label = av->flow_label;
	m->sgid_index = av->sgid_index;
	m->hop_limit = av->hop_limit;
	m->traffic_class = av->traffic_class;
	m->dlid = av->dlid;
	m->sl = av->sl;
	m->src_path_bits = src_path_bits;
	m->static_rate = static_rate;
	m->is_global = av->is_global;
	m->port_num = av->port_num;
}

static void cap_to_msg(const struct ibv_qp_cap *c, Ibvd__QpCap *m)
{
	ibvd__qp_cap__init(m);
	m->max_send_wr = c->max_send_wr;
	m->max_recv_wr = c->max_recv_wr;
	m->max_send_sge = c->max_send_sge;
	m->max_recv_sge = c->max_recv_sge;
	m->max_inline_data = c->max_inline_data;
}

/* Everything, whatever attr_mask asks: what ibv_query_qp(3) allows. */
static void attr_to_msg(const struct ibvd_qp *qp, Ibvd__QpAttr *m)
{
	const struct ibvd_qp_attr *a = &qp->attr;
	uint32_t state, sq_psn, rq_psn;
	bool drained;

	/* `state` and drained_sent are the engine's too: read them alone. */
	ibvd_objects_write_lock();
	state = qp->state;
	drained = qp->drained_sent;
	ibvd_engine_qp_psns(qp, &sq_psn, &rq_psn);
	ibvd_objects_write_unlock();

	m->qp_state = state;
	m->cur_qp_state = state;
	m->path_mtu = a->path_mtu;
	m->path_mig_state = qp->ctl.path_mig_state;
	m->qkey = a->qkey;
	m->rq_psn = rq_psn;
	m->sq_psn = sq_psn;
	m->dest_qp_num = a->dest_qp_num;
	m->qp_access_flags = a->access;
	m->pkey_index = a->pkey_index;
	m->alt_pkey_index = qp->ctl.alt_pkey_index;
	m->en_sqd_async_notify = a->en_sqd_async_notify;
	/* Draining until the engine found nothing left in flight. */
	m->sq_draining = state == IBV_QPS_SQD && !drained;
	m->max_rd_atomic = a->max_rd_atomic;
	m->max_dest_rd_atomic = a->max_dest_rd_atomic;
	m->min_rnr_timer = a->min_rnr_timer;
	m->port_num = a->port_num;
	m->timeout = a->timeout;
	m->retry_cnt = a->retry_cnt;
	m->rnr_retry = a->rnr_retry;
	m->alt_port_num = qp->ctl.alt_port_num;
	m->alt_timeout = qp->ctl.alt_timeout;
}

static void init_to_msg(const struct ibvd_qp *qp, Ibvd__CreateQp *m)
{
	/* A target's are the engine's (objects.h): it reports none. */
	if (qp->qp_type != IBV_QPT_XRC_RECV) {
		m->pd = qp->pd->handle;
		m->send_cq = qp->send_cq->handle;
		m->recv_cq = qp->recv_cq ? qp->recv_cq->handle : 0;
		m->srq = qp->srq ? qp->srq->handle : 0;
	}
	m->qp_type = qp->qp_type;
	m->sq_sig_all = qp->sq_sig_all;
}

int ibvd_req_query_qp(struct ibvd_call *call)
{
	const Ibvd__QueryQp *req = (const Ibvd__QueryQp *)call->msg;
	struct ibvd_qp *qp = ibvd_call_qp(call, req->handle);
	Ibvd__QueryQpReply reply = IBVD__QUERY_QP_REPLY__INIT;
	Ibvd__QpAttr attr = IBVD__QP_ATTR__INIT;
	Ibvd__CreateQp init = IBVD__CREATE_QP__INIT;
	Ibvd__AhAttr ah, alt_ah;
	Ibvd__QpCap cap;

	if (!qp)
		return -EINVAL;
	attr_to_msg(qp, &attr);
	av_to_msg(&qp->attr.av, qp->ctl.static_rate, qp->ctl.src_path_bits, &ah);
	av_to_msg(&qp->ctl.alt_av, qp->ctl.alt_static_rate,
		  qp->ctl.alt_src_path_bits, &alt_ah);
	cap_to_msg(&qp->cap, &cap);
	attr.ah_attr = &ah;
	attr.alt_ah_attr = &alt_ah;
	attr.cap = &cap;
	init_to_msg(qp, &init);
	init.cap = &cap;
	reply.attr = &attr;
	reply.init = &init;
	return ibvd_call_reply(call, &reply.base, NULL, 0);
}
