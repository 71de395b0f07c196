/*
 * QPs and SRQs on a cm_id: the CM creates them on id->verbs, with the
 * device's default PD and a completion channel + CQ per direction
 * (cq_context = the id, as the rdma_verbs.h helpers assert) when the
 * caller gives none, and drives the QP's states itself: a connected QP
 * goes to INIT at once and to RTR/RTS inside rdma_accept() or when the
 * connection reply arrives; a UD QP is ready to send right away.  The
 * attributes come from the daemon (CM_INIT_QP_ATTR), which knows the peer.
 *
 * An RC, UC or UD QP is made in one request (common/cm_qp.h): the daemon
 * makes the CQs and channels with it and moves it to INIT with the id's
 * attributes, and the id remembers that the daemon may move it on
 * (cid->qp_bundled: RTR and RTS inside CM_ACCEPT, and on the reply to
 * CM_CONNECT, where the daemon also sends the RTU).
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h>

#include "cm_qp.h"
#include "cma.h"

/* ---- states ------------------------------------------------------------------- */

static bool qp_connected(enum ibv_qp_type type)
{
	return type == IBV_QPT_RC || type == IBV_QPT_UC ||
	       type == IBV_QPT_XRC_SEND || type == IBV_QPT_XRC_RECV;
}

int cma_init_qp_attr(struct cma_id *cid, enum ibv_qp_state state,
		     struct ibv_qp_attr *attr, int *mask)
{
	Ibvd__CmInitQpAttr req = IBVD__CM_INIT_QP_ATTR__INIT;
	Ibvd__CmInitQpAttrReply *reply = NULL;
	int ret;

	req.id = cid->handle;
	req.qp_state = state;
	ret = cma_call(cid, IBVD_MSG_CM_INIT_QP_ATTR, &req.base,
		       &ibvd__cm_init_qp_attr_reply__descriptor,
		       (ProtobufCMessage **)&reply);
	if (ret < 0)
		return ret;
	ibvd_qp_attr_from_msg(reply->attr, attr);
	*mask = (int)reply->attr_mask;
	ibvd__cm_init_qp_attr_reply__free_unpacked(reply, NULL);
	return 0;
}

static int modify(struct ibv_qp *qp, struct ibv_qp_attr *attr, int mask)
{
	return -ibv_modify_qp(qp, attr, mask);
}

int cma_qp_to(struct cma_id *cid, enum ibv_qp_state state, uint8_t rd_atomic)
{
	struct ibv_qp_attr attr;
	int mask, ret;

	/*
	 * A QP made before the connection existed got INIT attributes that
	 * let no remote access in; RTR's attributes repeat the access flags
	 * the connection allows (PROTOCOL.md §10.6).
	 */
	ret = cma_init_qp_attr(cid, state, &attr, &mask);
	if (ret < 0)
		return ret;
	/*
	 * The passive side moves its QP before the daemon hears its accept,
	 * so the resources it accepts with override what was asked for.
	 */
	if (rd_atomic != 0xff) {
		if (state == IBV_QPS_RTR && (mask & IBV_QP_MAX_DEST_RD_ATOMIC))
			attr.max_dest_rd_atomic = rd_atomic;
		if (state == IBV_QPS_RTS && (mask & IBV_QP_MAX_QP_RD_ATOMIC))
			attr.max_rd_atomic = rd_atomic;
	}
	if (state == IBV_QPS_INIT && (mask & IBV_QP_QKEY))
		cid->qkey = attr.qkey;
	return modify(cid->id.qp, &attr, mask);
}

void cma_qp_at_rts(struct cma_id *cid)
{
	/* Apps read it; posters check it without a lock (libibverbs). */
	__atomic_store_n(&cid->id.qp->state, IBV_QPS_RTS, __ATOMIC_RELAXED);
}

void cma_qp_reached_rts(struct cma_id *cid)
{
	enum ibv_qp_state *state = &cid->id.qp->state;
	enum ibv_qp_state seen = __atomic_load_n(state, __ATOMIC_RELAXED);

	/* Not over an ERR (rdma_disconnect) or RESET the app got to first. */
	while (seen == IBV_QPS_INIT || seen == IBV_QPS_RTR)
		if (__atomic_compare_exchange_n(state, &seen, IBV_QPS_RTS, false,
						__ATOMIC_RELAXED, __ATOMIC_RELAXED))
			break;
}

void cma_qp_at_err(struct cma_id *cid)
{
	__atomic_store_n(&cid->id.qp->state, IBV_QPS_ERR, __ATOMIC_RELAXED);
}

int cma_qp_to_err(struct cma_id *cid)
{
	struct ibv_qp_attr attr = { .qp_state = IBV_QPS_ERR };

	if (!cid->id.qp)
		return 0;
	return modify(cid->id.qp, &attr, IBV_QP_STATE);
}

/* ---- default PD and CQs -------------------------------------------------------- */

static int default_pd(struct cma_id *cid, struct ibv_pd **pd)
{
	if (cid->id.pd) {
		*pd = cid->id.pd;
		return 0;
	}
	return cma_device_pd(cid->id.verbs, pd);
}

/*
 * An XRC target QP or SRQ lives in an XRC domain: the caller's if it
 * names one (bit `named` of *comp_mask), else the device's own.
 */
static int xrc_domain(struct cma_id *cid, uint32_t *comp_mask, uint32_t named,
		      struct ibv_xrcd **xrcd)
{
	int ret;

	if ((*comp_mask & named) && *xrcd)
		return 0;
	ret = cma_device_xrcd(cid->id.verbs, xrcd);
	if (ret == 0)
		*comp_mask |= named;
	return ret;
}

static int create_cq(struct cma_id *cid, uint32_t size,
		     struct ibv_comp_channel **ret_channel,
		     struct ibv_cq **ret_cq)
{
	struct ibv_comp_channel *channel;
	struct ibv_cq *cq;
	int ret;

	channel = ibv_create_comp_channel(cid->id.verbs);
	if (!channel)
		return -errno;
	/* cq_context = the id: rdma_get_send/recv_comp() assert it. */
	cq = ibv_create_cq(cid->id.verbs, size ? (int)size : 1, &cid->id,
			   channel, 0);
	if (!cq) {
		ret = -errno;
		ibv_destroy_comp_channel(channel);
		return ret;
	}
	*ret_channel = channel;
	*ret_cq = cq;
	return 0;
}

static void destroy_cq(struct ibv_comp_channel **channel, struct ibv_cq **cq)
{
	if (*cq)
		ibv_destroy_cq(*cq);
	if (*channel)
		ibv_destroy_comp_channel(*channel);
	*cq = NULL;
	*channel = NULL;
}

/*
 * The CQs we made for the id (the app's own are never in these fields);
 * an XRC target's are its SRQ's, and go with it (rdma_destroy_srq).
 */
static void destroy_cqs(struct cma_id *cid)
{
	if (cid->id.qp_type == IBV_QPT_XRC_RECV && cid->id.srq)
		return;
	destroy_cq(&cid->id.send_cq_channel, &cid->id.send_cq);
	destroy_cq(&cid->id.recv_cq_channel, &cid->id.recv_cq);
}

/* ---- QPs ------------------------------------------------------------------------- */

static bool bundle_type(enum ibv_qp_type type)
{
	return type == IBV_QPT_RC || type == IBV_QPT_UC || type == IBV_QPT_UD;
}

/*
 * The QP, the CQs the id lacks (each with a channel; cq_context = the
 * id, as rdma_get_send/recv_comp() assert) and INIT, in one request.
 */
static int create_bundled(struct cma_id *cid, struct ibv_qp_init_attr_ex *attr)
{
	struct rdma_cm_id *id = &cid->id;
	struct ibvd_cm_qp_init ci;
	struct ibv_qp *qp;

	memset(&ci, 0, sizeof(ci));
	ci.ex = *attr;
	ci.ex.comp_mask |= IBVD_QP_INIT_ATTR_CM;
	ci.ex.xrcd = (struct ibv_xrcd *)&ci;
	ci.magic = IBVD_CM_QP_INIT_MAGIC;
	if (cid->ch->token_len > sizeof(ci.token))
		return -EPROTO;
	memcpy(ci.token, cid->ch->token, cid->ch->token_len);
	ci.token_len = (uint32_t)cid->ch->token_len;
	ci.id = cid->handle;
	ci.cq_context = id;
	if (!ci.ex.send_cq)
		ci.send_cqe = attr->cap.max_send_wr ? attr->cap.max_send_wr : 1;
	if (!ci.ex.recv_cq)
		ci.recv_cqe = attr->cap.max_recv_wr ? attr->cap.max_recv_wr : 1;
	qp = ibv_create_qp_ex(id->verbs, &ci.ex);
	if (!qp)
		return -errno;
	if (ci.send_cq) {
		id->send_cq = ci.send_cq;
		id->send_cq_channel = ci.send_channel;
	}
	if (ci.recv_cq) {
		id->recv_cq = ci.recv_cq;
		id->recv_cq_channel = ci.recv_channel;
	}
	if (ci.init_mask & IBV_QP_QKEY)
		cid->qkey = ci.init_attr.qkey;
	attr->send_cq = qp->send_cq;
	attr->recv_cq = qp->recv_cq;
	attr->cap = ci.ex.cap;
	id->qp = qp;
	cid->qp_bundled = true;
	return 0;
}

/* A UD QP from INIT to RTS: it needs nothing from a peer. */
static int ud_init_to_rts(struct ibv_qp *qp)
{
	struct ibv_qp_attr attr = { .qp_state = IBV_QPS_RTR };
	int ret;

	ret = modify(qp, &attr, IBV_QP_STATE);
	if (ret < 0)
		return ret;
	attr.qp_state = IBV_QPS_RTS;
	attr.sq_psn = 0;
	return modify(qp, &attr, IBV_QP_STATE | IBV_QP_SQ_PSN);
}

static int create_qp_ex(struct cma_id *cid, struct ibv_qp_init_attr_ex *attr)
{
	struct rdma_cm_id *id = &cid->id;
	bool made_send = false, made_recv = false;
	struct ibv_pd *pd;
	struct ibv_qp *qp;
	int ret;

	if (!id->verbs || id->qp)
		return -EINVAL;
	if (!(attr->comp_mask & IBV_QP_INIT_ATTR_PD) || !attr->pd) {
		ret = default_pd(cid, &pd);
		if (ret < 0)
			return ret;
		attr->pd = pd;
		attr->comp_mask |= IBV_QP_INIT_ATTR_PD;
	}
	/* rdma_create_qp(3): the PD must be for the id's device. */
	if (attr->pd->context != id->verbs)
		return -EINVAL;
	if (!attr->srq && id->srq)
		attr->srq = id->srq;
	if (attr->qp_type == IBV_QPT_XRC_RECV) {
		ret = xrc_domain(cid, &attr->comp_mask, IBV_QP_INIT_ATTR_XRCD,
				 &attr->xrcd);
		if (ret < 0)
			return ret;
	}
	if (!attr->send_cq)
		attr->send_cq = id->send_cq;
	if (!attr->recv_cq)
		attr->recv_cq = id->recv_cq;
	if (bundle_type(attr->qp_type)) {
		ret = create_bundled(cid, attr);
		if (ret == 0 && attr->qp_type == IBV_QPT_UD) {
			ret = ud_init_to_rts(id->qp);
			if (ret < 0)
				rdma_destroy_qp(id);
		}
		if (ret == 0)
			id->pd = attr->pd;
		return ret;
	}

	if (!attr->send_cq && !id->send_cq &&
	    attr->qp_type != IBV_QPT_XRC_RECV) {
		ret = create_cq(cid, attr->cap.max_send_wr,
				&id->send_cq_channel, &id->send_cq);
		if (ret < 0)
			goto fail;
		made_send = true;
	}
	if (!attr->recv_cq && !id->recv_cq &&
	    attr->qp_type != IBV_QPT_XRC_RECV &&
	    attr->qp_type != IBV_QPT_XRC_SEND) {
		ret = create_cq(cid, attr->cap.max_recv_wr,
				&id->recv_cq_channel, &id->recv_cq);
		if (ret < 0)
			goto fail;
		made_recv = true;
	}
	if (!attr->send_cq)
		attr->send_cq = id->send_cq;
	if (!attr->recv_cq)
		attr->recv_cq = id->recv_cq;

	qp = ibv_create_qp_ex(id->verbs, attr);
	if (!qp) {
		ret = -errno;
		goto fail;
	}
	id->qp = qp;
	ret = 0;
	/* XRC QPs, the ones made without the bundle, are all connected. */
	if (qp_connected(attr->qp_type))
		ret = cma_qp_to(cid, IBV_QPS_INIT, 0xff);
	if (ret < 0) {
		id->qp = NULL;
		ibv_destroy_qp(qp);
		goto fail;
	}
	id->pd = attr->pd;
	return 0;
fail:
	if (made_send)
		destroy_cq(&id->send_cq_channel, &id->send_cq);
	if (made_recv)
		destroy_cq(&id->recv_cq_channel, &id->recv_cq);
	return ret;
}

int rdma_create_qp_ex(struct rdma_cm_id *id,
		      struct ibv_qp_init_attr_ex *qp_init_attr)
{
	if (!cma_id_live(id) || !qp_init_attr)
		return cma_ret(-EINVAL);
	return cma_ret(create_qp_ex(to_cma_id(id), qp_init_attr));
}

int cma_create_qp(struct cma_id *cid, struct ibv_pd *pd,
		  struct ibv_qp_init_attr *attr)
{
	struct ibv_qp_init_attr_ex ex;
	int ret;

	memset(&ex, 0, sizeof(ex));
	ex.qp_context = attr->qp_context;
	ex.send_cq = attr->send_cq;
	ex.recv_cq = attr->recv_cq;
	ex.srq = attr->srq;
	ex.cap = attr->cap;
	ex.qp_type = attr->qp_type;
	ex.sq_sig_all = attr->sq_sig_all;
	ex.comp_mask = IBV_QP_INIT_ATTR_PD;
	ex.pd = pd;
	ret = create_qp_ex(cid, &ex);
	/*
	 * The actual capabilities go back to the caller, not the CQs we may
	 * have made: callers (cmtime) reuse one attr for many ids.
	 */
	if (ret == 0)
		attr->cap = ex.cap;
	return ret;
}

int rdma_create_qp(struct rdma_cm_id *id, struct ibv_pd *pd,
		   struct ibv_qp_init_attr *qp_init_attr)
{
	if (!cma_id_live(id) || !qp_init_attr)
		return cma_ret(-EINVAL);
	return cma_ret(cma_create_qp(to_cma_id(id), pd, qp_init_attr));
}

void rdma_destroy_qp(struct rdma_cm_id *id)
{
	struct cma_id *cid;

	if (!cma_id_live(id) || !id->qp)
		return;
	cid = to_cma_id(id);
	pthread_mutex_lock(&cid->op_lock);
	cma_mcast_qp_gone(cid);
	ibv_destroy_qp(id->qp);
	id->qp = NULL;
	cid->qp_bundled = false;
	pthread_mutex_unlock(&cid->op_lock);
	destroy_cqs(cid);
}

/* ---- SRQs --------------------------------------------------------------------------- */

static int create_srq_ex(struct cma_id *cid, struct ibv_srq_init_attr_ex *attr)
{
	struct rdma_cm_id *id = &cid->id;
	bool xrc = (attr->comp_mask & IBV_SRQ_INIT_ATTR_TYPE) &&
		   attr->srq_type == IBV_SRQT_XRC;
	bool made_cq = false;
	struct ibv_srq *srq;
	struct ibv_pd *pd;
	int ret;

	if (!id->verbs || id->srq)
		return -EINVAL;
	if (!(attr->comp_mask & IBV_SRQ_INIT_ATTR_PD) || !attr->pd) {
		ret = default_pd(cid, &pd);
		if (ret < 0)
			return ret;
		attr->pd = pd;
		attr->comp_mask |= IBV_SRQ_INIT_ATTR_PD;
	}
	if (attr->pd->context != id->verbs)
		return -EINVAL;
	if (xrc) {
		ret = xrc_domain(cid, &attr->comp_mask, IBV_SRQ_INIT_ATTR_XRCD,
				 &attr->xrcd);
		if (ret < 0)
			return ret;
	}
	/* An XRC SRQ completes on a CQ of its own. */
	if (xrc && (!(attr->comp_mask & IBV_SRQ_INIT_ATTR_CQ) || !attr->cq)) {
		if (!id->recv_cq) {
			ret = create_cq(cid, attr->attr.max_wr,
					&id->recv_cq_channel, &id->recv_cq);
			if (ret < 0)
				return ret;
			made_cq = true;
		}
		attr->cq = id->recv_cq;
		attr->comp_mask |= IBV_SRQ_INIT_ATTR_CQ;
	}
	srq = ibv_create_srq_ex(id->verbs, attr);
	if (!srq) {
		ret = -errno;
		if (made_cq)
			destroy_cq(&id->recv_cq_channel, &id->recv_cq);
		return ret;
	}
	id->pd = attr->pd;
	id->srq = srq;
	return 0;
}

int rdma_create_srq_ex(struct rdma_cm_id *id, struct ibv_srq_init_attr_ex *attr)
{
	if (!cma_id_live(id) || !attr)
		return cma_ret(-EINVAL);
	return cma_ret(create_srq_ex(to_cma_id(id), attr));
}

int rdma_create_srq(struct rdma_cm_id *id, struct ibv_pd *pd,
		    struct ibv_srq_init_attr *attr)
{
	struct ibv_srq_init_attr_ex ex;
	int ret;

	if (!cma_id_live(id) || !attr)
		return cma_ret(-EINVAL);
	memset(&ex, 0, sizeof(ex));
	ex.srq_context = attr->srq_context;
	ex.attr = attr->attr;
	ex.comp_mask = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD;
	/* An XRC target's id gets an XRC SRQ, as librdmacm makes it. */
	ex.srq_type = id->qp_type == IBV_QPT_XRC_RECV ? IBV_SRQT_XRC :
							IBV_SRQT_BASIC;
	ex.pd = pd;
	ret = create_srq_ex(to_cma_id(id), &ex);
	if (ret == 0)
		attr->attr = ex.attr;
	return cma_ret(ret);
}

void rdma_destroy_srq(struct rdma_cm_id *id)
{
	if (!cma_id_live(id) || !id->srq)
		return;
	ibv_destroy_srq(id->srq);
	id->srq = NULL;
	/* CQs made for an XRC SRQ; a QP still using ours keeps them. */
	if (!id->qp)
		destroy_cqs(to_cma_id(id));
}
