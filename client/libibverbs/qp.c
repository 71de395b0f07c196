/*
 * Queue pairs.  CREATE_QP answers with where the SQ ring and the RQ ring
 * (none with an SRQ) lie in the context's ring arena, which is mapped with
 * only the client headers and WQE slots writable (queue.c).  The state
 * machine and attribute checks of ibv_modify_qp live in the daemon; we keep
 * qp->state, which apps read, and the posting checks need (post.c).
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cm_qp.h"
#include "ibvd_verbs.h"

/* ---- creation ----------------------------------------------------------- */

static void cap_to_msg(const struct ibv_qp_cap *cap, Ibvd__QpCap *m)
{
	m->max_send_wr = cap->max_send_wr;
	m->max_recv_wr = cap->max_recv_wr;
	m->max_send_sge = cap->max_send_sge;
	m->max_recv_sge = cap->max_recv_sge;
	m->max_inline_data = cap->max_inline_data;
}

/* Does the daemon's geometry hold what the reported caps promise? */
static bool sq_fits(const Ibvd__CreateQpReply *r, const struct ibv_qp_cap *cap)
{
	uint64_t room = (uint64_t)r->sq_stride - IBVD_SEND_WQE_HDR;

	return ibvc_wq_geometry_ok(r->sq_nslots, r->sq_stride, IBVD_SEND_WQE_HDR) &&
	       (uint64_t)cap->max_send_sge * sizeof(struct ibvd_sge) <= room &&
	       cap->max_inline_data <= room;
}

static bool rq_fits(const Ibvd__CreateQpReply *r, const struct ibv_qp_cap *cap)
{
	uint64_t room = (uint64_t)r->rq_stride - IBVD_RECV_WQE_HDR;

	return ibvc_wq_geometry_ok(r->rq_nslots, r->rq_stride, IBVD_RECV_WQE_HDR) &&
	       (uint64_t)cap->max_recv_sge * sizeof(struct ibvd_sge) <= room;
}

static bool is_xrc(enum ibv_qp_type type)
{
	return type == IBV_QPT_XRC_SEND || type == IBV_QPT_XRC_RECV;
}

static int take_qp_rings(struct ibvc_qp *qp, const Ibvd__CreateQpReply *r)
{
	struct ibvc_context *ictx = to_ibvc_context(qp->qp.context);
	bool has_rq = !qp->qp.srq && !is_xrc(qp->qp.qp_type);
	int ret;

	if (!sq_fits(r, &qp->cap) || (has_rq && !rq_fits(r, &qp->cap)) ||
	    r->doorbell >= IBVD_DOORBELL_BITS)
		return -EPROTO;
	ret = ibvc_wq_setup(&qp->sq, ictx, r->sq, r->sq_nslots, r->sq_stride,
			    qp->cap.max_send_wr);
	if (ret == 0 && has_rq)
		ret = ibvc_wq_setup(&qp->rq, ictx, r->rq, r->rq_nslots,
				    r->rq_stride, qp->cap.max_recv_wr);
	return ret;
}

static void qp_free(struct ibvc_qp *qp)
{
	ibvc_direct_detach(qp);
	pthread_mutex_destroy(&qp->direct_lock);
	ibvc_stage_free(qp);
	ibvc_wq_destroy(&qp->sq);
	ibvc_wq_destroy(&qp->rq);
	if (qp->qp.pd)
		ibvc_pd_release(qp->qp.pd);
	pthread_cond_destroy(&qp->qp.cond);
	pthread_mutex_destroy(&qp->qp.mutex);
	free(qp);
}

/* pd is NULL for an XRC target, which belongs to its domain. */
static struct ibvc_qp *qp_new(struct ibv_context *ctx, struct ibv_pd *pd,
			      const struct ibv_qp_init_attr *attr)
{
	struct ibvc_qp *qp = calloc(1, sizeof(*qp));

	if (!qp)
		return NULL;
	qp->qp.context = ctx;
	ibvc_direct_qp_init(qp);
	qp->qp.qp_context = attr->qp_context;
	qp->qp.pd = pd;
	if (pd)
		ibvc_pd_hold(pd);	/* released by qp_free */
	/* a thread domain's promise: one thread at a time posts */
	qp->single_threaded = ibvc_pd_single_threaded(pd);
	qp->qp.send_cq = attr->send_cq;
	qp->qp.recv_cq = attr->recv_cq;
	qp->qp.srq = attr->srq;
	qp->qp.state = IBV_QPS_RESET;
	qp->qp.qp_type = attr->qp_type;
	qp->sq_sig_all = attr->sq_sig_all;
	pthread_mutex_init(&qp->qp.mutex, NULL);
	pthread_cond_init(&qp->qp.cond, NULL);
	return qp;
}

static void create_req(Ibvd__CreateQp *req, Ibvd__QpCap *cap,
		       const struct ibvc_qp *qp, const struct ibv_qp_init_attr *attr)
{
	/* An XRC target names its domain only; an initiator no receive side. */
	if (qp->xrcd) {
		req->xrcd = qp->xrcd->handle;
	} else {
		req->pd = qp->qp.pd->handle;
		/* none: a CQ the bundle makes (qp_bundle.c) */
		req->send_cq = attr->send_cq ? attr->send_cq->handle : 0;
		if (attr->qp_type != IBV_QPT_XRC_SEND && attr->recv_cq)
			req->recv_cq = attr->recv_cq->handle;
	}
	req->srq = attr->srq ? attr->srq->handle : 0;
	req->qp_type = attr->qp_type;
	req->sq_sig_all = attr->sq_sig_all != 0;
	req->create_flags = qp->create_flags;
	cap_to_msg(&attr->cap, cap);
	req->cap = cap;
}

/* The reply's rings, and the bundle's CQs and channels if ci asked. */
static int take_reply(struct ibvc_qp *qp, const Ibvd__CreateQpReply *reply,
		      struct ibvd_cm_qp_init *ci, int fds[2])
{
	int ret;

	qp->qp.handle = reply->handle;
	qp->qp.qp_num = reply->qp_num;
	qp->doorbell = reply->doorbell;
	ibvd_qp_cap_from_msg(reply->cap, &qp->cap);
	ret = reply->cap ? take_qp_rings(qp, reply) : -EPROTO;
	if (ret == 0 && ci)
		ret = ibvc_bundle_take(qp->qp.context, ci, reply, fds);
	/* the bundle took the QP to INIT: its Q_Key, as a modify would */
	if (ret == 0 && ci && (ci->init_mask & IBV_QP_QKEY))
		__atomic_store_n(&qp->qkey, ci->init_attr.qkey,
				 __ATOMIC_RELAXED);
	return ret;
}

static int create_on_daemon(struct ibvc_qp *qp,
			    const struct ibv_qp_init_attr *attr,
			    struct ibvd_cm_qp_init *ci)
{
	Ibvd__CreateQp req = IBVD__CREATE_QP__INIT;
	Ibvd__QpCap cap = IBVD__QP_CAP__INIT;
	Ibvd__CreateQpReply *reply = NULL;
	struct ibv_context *ctx = qp->qp.context;
	struct ibvc_bundle_msgs bundle;
	int got[2], fds[2] = { -1, -1 };
	unsigned int ngot = 2;
	int ret;

	create_req(&req, &cap, qp, attr);
	if (ci)
		ibvc_bundle_req(ci, &bundle, &req);
	ret = ibvd_conn_call(ibvc_conn_of(ctx), IBVD_MSG_CREATE_QP, &req.base,
			     &ibvd__create_qp_reply__descriptor,
			     (ProtobufCMessage **)&reply, got, &ngot);
	if (ret < 0)
		return ret;
	ibvc_bundle_fds(reply, got, ngot, fds);
	ret = take_reply(qp, reply, ci, fds);
	if (ret < 0) {
		ibvc_destroy_handle(ctx, IBVD_MSG_DESTROY_QP, reply->handle);
		if (ci)
			ibvc_bundle_drop(ctx, ci, reply, fds);
	}
	ibvd__create_qp_reply__free_unpacked(reply, NULL);
	return ret;
}

/*
 * An XRC initiator has a send CQ only (its recv_cq is ignored).  A bundle
 * (ci) makes the CQs it has a cqe for, of RC, UC and UD QPs.
 */
static int check_init_attr(struct ibv_pd *pd, const struct ibv_qp_init_attr *a,
			   const struct ibvd_cm_qp_init *ci)
{
	struct ibv_context *ctx = pd->context;
	bool ini = a->qp_type == IBV_QPT_XRC_SEND;
	bool make_send = ci && ci->send_cqe, make_recv = ci && ci->recv_cqe;

	if (a->qp_type == IBV_QPT_XRC_RECV)
		return -EINVAL;		/* ibv_create_qp_ex with a domain */
	if (ci && (ini || (make_send && a->send_cq) || (make_recv && a->recv_cq)))
		return -EINVAL;
	if ((!a->send_cq && !make_send) || (!ini && !a->recv_cq && !make_recv) ||
	    (ini && a->srq))
		return -EINVAL;
	if ((a->send_cq && a->send_cq->context != ctx) ||
	    (!ini && a->recv_cq && a->recv_cq->context != ctx) ||
	    (a->srq && a->srq->context != ctx))
		return -EINVAL;
	return 0;
}

/*
 * Make qp on the daemon and register it for events.  With a bundle (ci)
 * the QP has its new CQs and is in INIT already.
 */
static int qp_make(struct ibvc_qp *qp, const struct ibv_qp_init_attr *attr,
		   struct ibvd_cm_qp_init *ci)
{
	struct ibv_context *ctx = qp->qp.context;
	int fds[2] = { -1, -1 };
	int ret;

	ret = create_on_daemon(qp, attr, ci);
	if (ret < 0)
		return ret;
	ret = ibvc_obj_add(to_ibvc_context(ctx), qp->qp.handle, IBVC_OBJ_QP, qp);
	if (ret < 0) {
		ibvc_destroy_handle(ctx, IBVD_MSG_DESTROY_QP, qp->qp.handle);
		if (ci)
			ibvc_bundle_drop(ctx, ci, NULL, fds);
		return ret;
	}
	if (!ci)
		return 0;
	if (ci->send_cq)
		qp->qp.send_cq = ci->send_cq;
	if (ci->recv_cq)
		qp->qp.recv_cq = ci->recv_cq;
	__atomic_store_n(&qp->qp.state, IBV_QPS_INIT, __ATOMIC_RELAXED);
	return 0;
}

static int create_qp(struct ibv_pd *pd, struct ibv_qp_init_attr *attr,
		     struct ibvd_cm_qp_init *ci, uint32_t create_flags,
		     struct ibvc_qp **ret_qp)
{
	struct ibvc_qp *qp;
	int ret;

	ret = check_init_attr(pd, attr, ci);
	if (ret < 0)
		return ret;
	qp = qp_new(pd->context, pd, attr);
	if (!qp)
		return -ENOMEM;
	qp->create_flags = create_flags;
	ret = qp_make(qp, attr, ci);
	if (ret < 0)
		goto fail;
	/* Callers learn the caps they got, rounded up (ibv_create_qp(3)). */
	attr->cap = qp->cap;
	*ret_qp = qp;
	return 0;
fail:
	qp_free(qp);
	return ret;
}

struct ibv_qp *ibv_create_qp(struct ibv_pd *pd,
			     struct ibv_qp_init_attr *qp_init_attr)
{
	struct ibvc_qp *qp;
	int ret;

	if (!pd || !qp_init_attr)
		return ibvc_null_ret(-EINVAL);
	ret = create_qp(pd, qp_init_attr, NULL, 0, &qp);
	return ret < 0 ? ibvc_null_ret(ret) : &qp->qp;
}

/*
 * The extended attributes we support: a PD (an XRC domain for an XRC
 * target), IBV_QP_CREATE_BLOCK_SELF_MCAST_LB (the daemon checks it is for
 * a UD QP), and the ibv_qp_ex posting API (qp_ex.c).
 */
static int check_init_attr_ex(struct ibv_context *ctx,
			      const struct ibv_qp_init_attr_ex *attr,
			      const struct ibvd_cm_qp_init *ci)
{
	uint32_t known = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_XRCD |
			 IBV_QP_INIT_ATTR_CREATE_FLAGS |
			 IBV_QP_INIT_ATTR_SEND_OPS_FLAGS |
			 (ci ? IBVD_QP_INIT_ATTR_CM : 0);

	if (attr->comp_mask & ~known)
		return -EOPNOTSUPP;
	if ((attr->comp_mask & IBV_QP_INIT_ATTR_CREATE_FLAGS) &&
	    (attr->create_flags & ~(uint32_t)IBV_QP_CREATE_BLOCK_SELF_MCAST_LB))
		return -EOPNOTSUPP;
	/* before anything is made: a refusal leaves nothing to undo */
	/* an XRC target has no send queue to post to, even with no ops */
	if ((attr->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS) &&
	    (attr->qp_type == IBV_QPT_XRC_RECV ||
	     !ibvc_send_ops_supported(attr->qp_type, attr->send_ops_flags)))
		return -EOPNOTSUPP;
	if (attr->qp_type == IBV_QPT_XRC_RECV)
		return (attr->comp_mask & IBV_QP_INIT_ATTR_XRCD) && attr->xrcd &&
		       attr->xrcd->context == ctx ? 0 : -EINVAL;
	if (!(attr->comp_mask & IBV_QP_INIT_ATTR_PD) || !attr->pd ||
	    attr->pd->context != ctx)
		return -EINVAL;
	return 0;
}

/* An XRC target: made in its domain, with no PD, CQs or SRQ of its own. */
static int create_tgt(struct ibv_context *ctx, struct ibv_qp_init_attr *attr,
		      struct ibv_xrcd *xrcd, struct ibvc_qp **ret_qp)
{
	struct ibvc_qp *qp;
	int ret;

	attr->send_cq = attr->recv_cq = NULL;
	attr->srq = NULL;
	qp = qp_new(ctx, NULL, attr);
	if (!qp)
		return -ENOMEM;
	qp->xrcd = to_ibvc_xrcd(xrcd);
	ret = qp_make(qp, attr, NULL);
	if (ret < 0) {
		qp_free(qp);
		return ret;
	}
	attr->cap = qp->cap;
	*ret_qp = qp;
	return 0;
}

static int create_qp_ex(struct ibv_context *ctx,
			struct ibv_qp_init_attr_ex *attr_ex,
			struct ibvc_qp **ret_qp)
{
	struct ibvd_cm_qp_init *ci = ibvc_bundle_of(attr_ex);
	struct ibv_qp_init_attr attr;
	int ret;

	ret = check_init_attr_ex(ctx, attr_ex, ci);
	if (ret < 0)
		return ret;
	memset(&attr, 0, sizeof(attr));
	attr.qp_context = attr_ex->qp_context;
	attr.send_cq = attr_ex->send_cq;
	attr.recv_cq = attr_ex->recv_cq;
	attr.srq = attr_ex->srq;
	attr.cap = attr_ex->cap;
	attr.qp_type = attr_ex->qp_type;
	attr.sq_sig_all = attr_ex->sq_sig_all;
	if (attr.qp_type == IBV_QPT_XRC_RECV)
		ret = ci ? -EINVAL : create_tgt(ctx, &attr, attr_ex->xrcd, ret_qp);
	else
		ret = create_qp(attr_ex->pd, &attr, ci,
				(attr_ex->comp_mask & IBV_QP_INIT_ATTR_CREATE_FLAGS) ?
				attr_ex->create_flags : 0, ret_qp);
	if (ret < 0)
		return ret;
	if (attr_ex->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS)
		ibvc_qp_ex_init(*ret_qp);
	attr_ex->cap = attr.cap;
	return 0;
}

struct ibv_qp *ibvc_create_qp_ex_op(struct ibv_context *ctx,
				    struct ibv_qp_init_attr_ex *attr)
{
	struct ibvc_qp *qp;
	int ret;

	if (!attr)
		return ibvc_null_ret(-EINVAL);
	ret = create_qp_ex(ctx, attr, &qp);
	return ret < 0 ? ibvc_null_ret(ret) : &qp->qp;
}

/* ---- ibv_open_qp ----------------------------------------------------------- */

static int check_open_attr(struct ibv_context *ctx,
			   const struct ibv_qp_open_attr *attr)
{
	uint32_t need = IBV_QP_OPEN_ATTR_NUM | IBV_QP_OPEN_ATTR_XRCD |
			IBV_QP_OPEN_ATTR_TYPE;

	if (attr->comp_mask & ~(need | IBV_QP_OPEN_ATTR_CONTEXT))
		return -EINVAL;
	if ((attr->comp_mask & need) != need || !attr->xrcd ||
	    attr->xrcd->context != ctx)
		return -EINVAL;
	/* Only XRC targets live in a domain to be opened from. */
	return attr->qp_type == IBV_QPT_XRC_RECV ? 0 : -EINVAL;
}

static int open_on_daemon(struct ibvc_qp *qp, const struct ibv_qp_open_attr *a)
{
	Ibvd__OpenQp req = IBVD__OPEN_QP__INIT;
	Ibvd__CreateQpReply *reply = NULL;
	int ret;

	req.xrcd = qp->xrcd->handle;
	req.qp_num = a->qp_num;
	req.qp_type = a->qp_type;
	ret = ibvd_conn_call(ibvc_conn_of(qp->qp.context), IBVD_MSG_OPEN_QP,
			     &req.base, &ibvd__create_qp_reply__descriptor,
			     (ProtobufCMessage **)&reply, NULL, NULL);
	if (ret < 0)
		return ret;
	qp->qp.handle = reply->handle;
	qp->qp.qp_num = reply->qp_num;
	ibvd__create_qp_reply__free_unpacked(reply, NULL);
	return 0;
}

/* A handle on a target QP of the domain: no rings, nothing to post. */
static int open_qp(struct ibv_context *ctx, struct ibv_qp_open_attr *attr,
		   struct ibvc_qp **ret_qp)
{
	struct ibv_qp_init_attr init = { .qp_type = IBV_QPT_XRC_RECV };
	struct ibvc_qp *qp;
	int ret;

	ret = check_open_attr(ctx, attr);
	if (ret < 0)
		return ret;
	if (attr->comp_mask & IBV_QP_OPEN_ATTR_CONTEXT)
		init.qp_context = attr->qp_context;
	qp = qp_new(ctx, NULL, &init);
	if (!qp)
		return -ENOMEM;
	/* its creator moves it: ibv_query_qp tells where it is */
	qp->qp.state = IBV_QPS_UNKNOWN;
	qp->xrcd = to_ibvc_xrcd(attr->xrcd);
	ret = open_on_daemon(qp, attr);
	if (ret == 0) {
		ret = ibvc_obj_add(to_ibvc_context(ctx), qp->qp.handle,
				   IBVC_OBJ_QP, qp);
		if (ret < 0)
			ibvc_destroy_handle(ctx, IBVD_MSG_DESTROY_QP,
					    qp->qp.handle);
	}
	if (ret < 0) {
		qp_free(qp);
		return ret;
	}
	*ret_qp = qp;
	return 0;
}

struct ibv_qp *ibvc_open_qp_op(struct ibv_context *ctx,
			       struct ibv_qp_open_attr *attr)
{
	struct ibvc_qp *qp;
	int ret;

	if (!ctx || !attr)
		return ibvc_null_ret(-EINVAL);
	ret = open_qp(ctx, attr, &qp);
	return ret < 0 ? ibvc_null_ret(ret) : &qp->qp;
}

/* Only QPs created with IBV_QP_INIT_ATTR_SEND_OPS_FLAGS have the ex API. */
struct ibv_qp_ex *ibv_qp_to_qp_ex(struct ibv_qp *qp)
{
	struct ibvc_qp *iqp;

	if (!qp)
		return NULL;
	iqp = to_ibvc_qp(qp);
	return iqp->has_qp_ex ? &iqp->qp_ex : NULL;
}

/* ---- modify, query ------------------------------------------------------ */

/*
 * The completions of qp our library placed leave its CQs, as the
 * engine's do (the daemon purges them), and as a NIC's provider cleans
 * its CQs of a QP it resets or destroys.
 */
static void forget_completions(struct ibv_qp *ibqp)
{
	if (ibqp->send_cq)
		ibvc_direct_cq_forget(to_ibvc_cq(ibqp->send_cq), ibqp->qp_num);
	if (ibqp->recv_cq && ibqp->recv_cq != ibqp->send_cq)
		ibvc_direct_cq_forget(to_ibvc_cq(ibqp->recv_cq), ibqp->qp_num);
}

/*
 * Record a state the daemon accepted.  Atomic: posters read it without the
 * QP's locks.  Back in RESET the daemon emptied the queues and may have
 * rewound their counters, so the rings' private tails follow.
 */
static void set_state(struct ibvc_qp *qp, enum ibv_qp_state state)
{
	__atomic_store_n(&qp->qp.state, state, __ATOMIC_RELAXED);
	if (state == IBV_QPS_RESET) {
		ibvc_wq_resync(&qp->sq);
		ibvc_wq_resync(&qp->rq);
		ibvc_stage_reset(qp);
	}
}

static int modify_qp(struct ibvc_qp *qp, const struct ibv_qp_attr *attr,
		     int attr_mask)
{
	Ibvd__ModifyQp req = IBVD__MODIFY_QP__INIT;
	Ibvd__QpAttr m = IBVD__QP_ATTR__INIT;
	Ibvd__QpCap cap = IBVD__QP_CAP__INIT;
	Ibvd__AhAttr ah = IBVD__AH_ATTR__INIT, alt_ah = IBVD__AH_ATTR__INIT;
	int ret;

	ibvd_qp_attr_to_msg(attr, &m);
	cap_to_msg(&attr->cap, &cap);
	ibvd_ah_attr_to_msg(&attr->ah_attr, &ah);
	ibvd_ah_attr_to_msg(&attr->alt_ah_attr, &alt_ah);
	m.cap = &cap;
	m.ah_attr = &ah;
	m.alt_ah_attr = &alt_ah;
	req.handle = qp->qp.handle;
	req.attr_mask = (uint32_t)attr_mask;
	req.attr = &m;
	ret = ibvd_conn_call(ibvc_conn_of(qp->qp.context), IBVD_MSG_MODIFY_QP,
			     &req.base, NULL, NULL, NULL, NULL);
	if (ret == 0 && (attr_mask & IBV_QP_STATE))
		set_state(qp, attr->qp_state);
	if (ret == 0 && (attr_mask & IBV_QP_QKEY))
		__atomic_store_n(&qp->qkey, attr->qkey, __ATOMIC_RELAXED);
	if (ret < 0)
		return ret;
	/* RESET forgets the peer; RTR and RTS may have found it */
	if ((attr_mask & IBV_QP_STATE) && attr->qp_state == IBV_QPS_RESET) {
		ibvc_direct_detach(qp);
		forget_completions(&qp->qp);
	} else {
		ibvc_direct_refresh(qp);
	}
	return 0;
}

int ibv_modify_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr, int attr_mask)
{
	if (!qp || !attr)
		return EINVAL;
	/*
	 * Any bit past IBV_QP_DEST_QPN (IBV_QP_RATE_LIMIT, and the unnamed
	 * ones before it): as rdma-core's ibv_cmd_modify_qp, which the
	 * providers without the _ex path use (rxe's).
	 */
	if (attr_mask & ~((IBV_QP_DEST_QPN << 1) - 1))
		return EOPNOTSUPP;
	return ibvc_errno_ret(modify_qp(to_ibvc_qp(qp), attr, attr_mask));
}

static void init_attr_from_reply(const struct ibvc_qp *qp,
				 const Ibvd__QueryQpReply *r,
				 struct ibv_qp_init_attr *init)
{
	memset(init, 0, sizeof(*init));
	init->qp_context = qp->qp.qp_context;
	init->send_cq = qp->qp.send_cq;
	init->recv_cq = qp->qp.recv_cq;
	init->srq = qp->qp.srq;
	init->qp_type = qp->qp.qp_type;
	init->sq_sig_all = qp->sq_sig_all;
	if (r->init)
		ibvd_qp_cap_from_msg(r->init->cap, &init->cap);
	else
		init->cap = qp->cap;
}

static int query_qp(struct ibvc_qp *qp, struct ibv_qp_attr *attr,
		    int attr_mask, struct ibv_qp_init_attr *init)
{
	Ibvd__QueryQp req = IBVD__QUERY_QP__INIT;
	Ibvd__QueryQpReply *reply = NULL;
	int ret;

	req.handle = qp->qp.handle;
	req.attr_mask = (uint32_t)attr_mask;
	ret = ibvd_conn_call(ibvc_conn_of(qp->qp.context), IBVD_MSG_QUERY_QP,
			     &req.base, &ibvd__query_qp_reply__descriptor,
			     (ProtobufCMessage **)&reply, NULL, NULL);
	if (ret < 0)
		return ret;
	if (!reply->attr) {
		ret = -EPROTO;
		goto out;
	}
	ibvd_qp_attr_from_msg(reply->attr, attr);
	init_attr_from_reply(qp, reply, init);
	/* The engine may have moved the QP (to ERR, SQE): apps read qp->state. */
	if (attr_mask & IBV_QP_STATE)
		__atomic_store_n(&qp->qp.state, attr->qp_state,
				 __ATOMIC_RELAXED);
out:
	ibvd__query_qp_reply__free_unpacked(reply, NULL);
	return ret;
}

int ibv_query_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr, int attr_mask,
		 struct ibv_qp_init_attr *init_attr)
{
	if (!qp || !attr || !init_attr)
		return EINVAL;
	/* as rdma-core's ibv_cmd_query_qp: those go by the _ex path */
	if (attr_mask & ~(IBV_QP_RATE_LIMIT - 1))
		return EOPNOTSUPP;
	return ibvc_errno_ret(query_qp(to_ibvc_qp(qp), attr, attr_mask,
				       init_attr));
}

/* ---- destroy ------------------------------------------------------------ */

int ibv_destroy_qp(struct ibv_qp *ibqp)
{
	struct ibvc_qp *qp;
	int ret;

	if (!ibqp)
		return EINVAL;
	qp = to_ibvc_qp(ibqp);
	ret = ibvc_destroy_handle(ibqp->context, IBVD_MSG_DESTROY_QP,
				  ibqp->handle);
	if (ret < 0)
		return ibvc_errno_ret(ret);
	/*
	 * Off its CQs' direct lists first, as a reset does: a poller could
	 * otherwise harvest its sends after the purge, and hand out
	 * completions of a QP already destroyed.
	 */
	ibvc_direct_detach(qp);
	forget_completions(ibqp);
	/* No event can name it from now on; wait for those handed out. */
	ibvc_obj_remove(to_ibvc_context(ibqp->context), ibqp->handle);
	ibvc_wait_acked(&ibqp->mutex, &ibqp->cond, &ibqp->events_completed,
			&qp->async_delivered);
	qp_free(qp);
	return 0;
}
