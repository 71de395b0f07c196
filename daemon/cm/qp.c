/*
 * The QP of a connection: the attributes each state needs (CM_INIT_QP_ATTR)
 * and, for a QP made with its id (CREATE_QP naming it, verbs/qp_bundle.c),
 * its moves done here: INIT at creation, RTR and RTS inside CM_ACCEPT, on
 * the reply to a CM_CONNECT that asked (conn.c's confirm_reply) or inside
 * CM_ESTABLISH, where the CM knows the attributes already, ERR inside
 * CM_DISCONNECT.  Each move is a round trip fewer for the library, and
 * fails as its MODIFY_QP would.
 */
#include <config.h>

#include <errno.h>
#include <string.h>

#include <infiniband/verbs.h>

#include "cma_hdr.h"
#include "core/device.h"
#include "engine/engine.h"
#include "internal.h"
#include "server/call.h"
#include "server/session.h"
#include "verbs/verbs.h"

/* What a remote end may do to the QP: the IB CM's rule. */
static uint32_t conn_access(const struct ibvd_cm_id *id)
{
	uint32_t access;

	/* Before a request exists nothing remote may touch the QP. */
	if (id->phase == CM_PH_NONE)
		return 0;
	access = IBV_ACCESS_REMOTE_WRITE;
	if (id->local.responder_resources)
		access |= IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
	return access;
}

static void qp_attr_init(const struct ibvd_cm_id *id, Ibvd__QpAttr *a,
			 uint32_t *mask)
{
	a->pkey_index = 0;
	a->port_num = id->port_num;
	*mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT;
	if (cm_is_ud(id)) {
		a->qkey = id->qkey;
		*mask |= IBV_QP_QKEY;
		return;
	}
	a->qp_access_flags = conn_access(id);
	*mask |= IBV_QP_ACCESS_FLAGS;
}

/*
 * On a RoCE device a path is a pair of GIDs made of the two addresses:
 * the address vector carries them (a GRH), as rdma_cm's does for RoCE.
 */
void cm_path_grh(const struct ibvd_cm_id *id, Ibvd__AhAttr *ah,
		 uint8_t dgid[16])
{
	uint8_t sgid[16];
	int index;

	if (!id->dev || !cm_dev_is_roce(id->dev))
		return;
	cm_path_gids(id, sgid, dgid);
	index = cm_gid_index(id, sgid);
	ah->is_global = true;
	ah->dgid.data = dgid;
	ah->dgid.len = 16;
	ah->sgid_index = index < 0 ? 0 : (uint32_t)index;
	ah->hop_limit = cm_route_hop_limit(id);
	ah->traffic_class = id->tos;
	ah->flow_label = cma_flow_label(cm_addr_port(id->active ? &id->src :
						     &id->dst),
					cm_addr_port(id->active ? &id->dst :
						     &id->src));
}

static void qp_attr_rtr(const struct ibvd_cm_id *id, Ibvd__QpAttr *a,
			Ibvd__AhAttr *ah, uint8_t dgid[16], uint32_t *mask)
{
	const struct ibvd_cm_id *p = id->peer;
	uint32_t far_mtu = cm_wire_mtu(id);

	*mask = IBV_QP_STATE;
	if (cm_is_ud(id))
		return;
	/* The peer's port now, if it is still there; else the route's. */
	ah->dlid = p ? cm_port_lid(p) : id->dlid;
	ah->port_num = id->port_num;
	cm_path_grh(id, ah, dgid);
	a->ah_attr = ah;
	a->path_mtu = far_mtu ? far_mtu : cm_port_mtu(id);
	a->dest_qp_num = id->remote.qp_num;
	/*
	 * The IB CM's "starting PSN" (REQ and REP) is the PSN its sender
	 * expects to receive, as Linux's ib_cm reads it: ours is where our
	 * receive queue starts, the peer's where our send queue does.
	 */
	a->rq_psn = id->local.psn;
	/*
	 * A QP made before the request went out reached INIT with no remote
	 * access; librdmacm repeats INIT before RTR to fix that, and RTR
	 * takes the flags too, so a caller that goes straight on is right.
	 */
	a->qp_access_flags = conn_access(id);
	*mask |= IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
		 IBV_QP_ACCESS_FLAGS;
	if (!cm_is_reliable(id))
		return;
	a->max_dest_rd_atomic = id->local.responder_resources;
	a->min_rnr_timer = CM_MIN_RNR_TIMER;
	*mask |= IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
}

static void qp_attr_rts(const struct ibvd_cm_id *id, Ibvd__QpAttr *a,
			uint32_t *mask)
{
	a->sq_psn = id->remote.psn;
	*mask = IBV_QP_STATE | IBV_QP_SQ_PSN;
	if (!cm_is_reliable(id))
		return;
	a->timeout = id->timeout_set ? id->timeout : CM_DEFAULT_TIMEOUT;
	/* Both ends use the requester's retry count, each the other's RNR. */
	a->retry_cnt = id->active ? id->local.retry_count :
				    id->remote.retry_count;
	a->rnr_retry = id->remote.rnr_retry_count;
	a->max_rd_atomic = id->local.initiator_depth;
	*mask |= IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
		 IBV_QP_MAX_QP_RD_ATOMIC;
}

/*
 * A connection that ended (rejected, disconnected, given up) leaves the
 * kernel's IB CM id in DREQ_SENT, DREQ_RCVD, TIMEWAIT or IDLE, states for
 * which ib_cm_init_qp_attr answers nothing, not even INIT.  SIDR has no
 * such id: a UD id keeps its answers.
 */
static bool conn_ended(const struct ibvd_cm_id *id)
{
	return id->phase == CM_PH_CLOSED && !cm_is_ud(id);
}

/* The attributes for a->qp_state, as the kernel's RDMA CM gives them. */
static int qp_attr_for(struct ibvd_call *call, const struct ibvd_cm_id *id,
		       Ibvd__QpAttr *a, Ibvd__AhAttr *ah, uint8_t dgid[16],
		       uint32_t *mask)
{
	uint32_t state = a->qp_state;

	/*
	 * Before a request it has no IB CM id to ask: any state gets INIT's
	 * attributes, the state left as asked (cma_ib_init_qp_attr).  UD
	 * ids keep the answers below, which a QP can take.
	 */
	if (id->phase == CM_PH_NONE && !cm_is_ud(id)) {
		qp_attr_init(id, a, mask);
		return 0;
	}
	if (state != IBV_QPS_INIT && state != IBV_QPS_RTR &&
	    state != IBV_QPS_RTS)
		return ibvd_call_error(call, -EINVAL, "no attributes for QP state %u",
				       state);
	if (conn_ended(id))
		return ibvd_call_error(call, -EINVAL, "the connection has ended");
	/* RTR and RTS need the other end's QP and PSN (a REP or a REQ). */
	if (state != IBV_QPS_INIT && !cm_is_ud(id) && !id->remote_valid)
		return ibvd_call_error(call, -EINVAL, "the id has no peer yet");
	if (state == IBV_QPS_INIT)
		qp_attr_init(id, a, mask);
	else if (state == IBV_QPS_RTR)
		qp_attr_rtr(id, a, ah, dgid, mask);
	else
		qp_attr_rts(id, a, mask);
	return 0;
}

int ibvd_req_cm_init_qp_attr(struct ibvd_call *call)
{
	const Ibvd__CmInitQpAttr *req = (const Ibvd__CmInitQpAttr *)call->msg;
	struct ibvd_cm_id *id = cm_id_get(call, req->id);
	Ibvd__CmInitQpAttrReply reply = IBVD__CM_INIT_QP_ATTR_REPLY__INIT;
	Ibvd__QpAttr attr = IBVD__QP_ATTR__INIT;
	Ibvd__AhAttr ah = IBVD__AH_ATTR__INIT;
	uint8_t dgid[16];
	uint32_t mask = 0;
	int ret;

	if (!id)
		return -EINVAL;
	if (!id->dev)
		return ibvd_call_error(call, -EINVAL, "the id has no device");
	/*
	 * An RC/UC listener's IB CM id listens, a state with no QP
	 * attributes; a UD id has none to ask and answers as any UD id.
	 */
	if (id->state == CM_LISTEN && !cm_is_ud(id))
		return ibvd_call_error(call, -EINVAL, "a listener has no QP attributes");
	attr.qp_state = req->qp_state;
	ret = qp_attr_for(call, id, &attr, &ah, dgid, &mask);
	if (ret < 0)
		return ret;
	reply.attr_mask = mask;
	reply.attr = &attr;
	return ibvd_call_reply(call, &reply.base, NULL, 0);
}

/* ---- the id's own QP ------------------------------------------------ */

/* id under its QP's context, for that context's teardown (conn.c). */
static int index_own_qp(struct ibvd_cm_id *id, uint32_t ctx)
{
	if (id->by_qp_ctx.pprev && id->by_qp_ctx.key == ctx)
		return 0;
	cm_own_qp_forget(id);
	return ibvd_keyed_insert(&cm_world.by_qp_ctx, &id->by_qp_ctx, ctx);
}

int ibvd_cm_qp_init(struct ibvd_call *call, const Ibvd__CmQpRef *ref,
		    const struct ibvd_qp *qp, Ibvd__QpAttr *attr, uint32_t *mask)
{
	struct ibvd_cm *cm = NULL;
	struct ibvd_cm_id *id = NULL;
	int ret;

	/*
	 * The token proves the caller holds the CM session, and the session
	 * must be the caller's uid's, as migration asks: a token that leaked
	 * to another uid gives it nothing.
	 */
	if (ref->token.len == CM_TOKEN_LEN)
		cm = cm_session_by_token(ref->token.data);
	if (cm && cm->session->cred.uid == call->session->cred.uid)
		id = ibvd_handle_lookup(&cm->ids, ref->id, IBVD_OBJ_CM_ID);
	if (!id)
		return ibvd_call_error(call, -EINVAL, "no CM id %#x of that channel",
				       ref->id);
	if (id->dev != qp->ctx->dev)
		return ibvd_call_error(call, -EINVAL,
				       "the CM id is not on the QP's device");
	/* rdma_create_qp asks rdma_init_qp_attr for INIT: see qp_attr_for. */
	if (conn_ended(id))
		return ibvd_call_error(call, -EINVAL, "the connection has ended");
	ret = index_own_qp(id, qp->ctx->id);
	if (ret < 0)
		return ibvd_call_error(call, ret, "no memory for the CM id's QP");
	qp_attr_init(id, attr, mask);
	id->own_qp.ctx = qp->ctx->id;
	id->own_qp.handle = qp->handle;
	id->own_qp.num = qp->qp_num;
	return 0;
}

void cm_own_qp_forget(struct ibvd_cm_id *id)
{
	if (id->by_qp_ctx.pprev)
		ibvd_keyed_remove(&cm_world.by_qp_ctx, &id->by_qp_ctx);
}

/*
 * The QP made with id, if it still is: numbers and handles are reused, so
 * all three must match.  The control thread alone changes the registry.
 */
static struct ibvd_qp *find_own_qp(const struct ibvd_cm_id *id)
{
	struct ibvd_qp *qp = NULL;

	if (id->own_qp.num)
		qp = ibvd_qp_by_num(id->own_qp.num);
	if (!qp || qp->ctx->id != id->own_qp.ctx ||
	    qp->handle != id->own_qp.handle)
		return NULL;
	return qp;
}

static struct ibvd_qp *own_qp(struct ibvd_call *call,
			      const struct ibvd_cm_id *id)
{
	struct ibvd_qp *qp = find_own_qp(id);

	if (!qp)
		ibvd_call_error(call, -EINVAL, "the id has no QP made with it");
	return qp;
}

bool cm_own_qp_alive(const struct ibvd_cm_id *id)
{
	return find_own_qp(id) != NULL;
}

uint32_t cm_own_qp_num(const struct ibvd_cm_id *id)
{
	return id->own_qp.num;
}

int cm_qp_move(struct ibvd_call *call, const struct ibvd_cm_id *id,
	       const struct cm_conn_param *accept)
{
	Ibvd__QpAttr attr = IBVD__QP_ATTR__INIT;
	Ibvd__AhAttr ah = IBVD__AH_ATTR__INIT;
	struct ibvd_qp *qp = own_qp(call, id);
	uint8_t dgid[16];
	uint32_t mask;
	int ret;

	if (!qp)
		return -EINVAL;
	if (cm_is_ud(id) || !id->remote_valid)
		return ibvd_call_error(call, -EINVAL,
				       "the id has no connection for its QP");
	/*
	 * As the kernel's RDMA CM does: the attributes of the request (its
	 * access flags too), with the resources the accept grants.
	 */
	attr.qp_state = IBV_QPS_RTR;
	qp_attr_rtr(id, &attr, &ah, dgid, &mask);
	if (accept && (mask & IBV_QP_MAX_DEST_RD_ATOMIC))
		attr.max_dest_rd_atomic = accept->responder_resources;
	ret = ibvd_qp_modify_first(call, qp, &attr, mask);
	if (ret < 0)
		return ret;
	attr = (Ibvd__QpAttr)IBVD__QP_ATTR__INIT;
	attr.qp_state = IBV_QPS_RTS;
	qp_attr_rts(id, &attr, &mask);
	if (accept && (mask & IBV_QP_MAX_QP_RD_ATOMIC))
		attr.max_rd_atomic = accept->initiator_depth;
	ret = ibvd_qp_modify(call, qp, &attr, mask);
	/* Left in RTR: the engine must still hear of that move. */
	if (ret < 0)
		ibvd_engine_qp_kick(qp);
	return ret;
}

int cm_qp_to_err(struct ibvd_call *call, const struct ibvd_cm_id *id)
{
	Ibvd__QpAttr attr = IBVD__QP_ATTR__INIT;
	struct ibvd_qp *qp = own_qp(call, id);

	if (!qp)
		return -EINVAL;
	attr.qp_state = IBV_QPS_ERR;
	return ibvd_qp_modify(call, qp, &attr, IBV_QP_STATE);
}
