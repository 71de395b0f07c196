/*
 * Connections (CM.md "Connections" and "UD"): listen, connect, accept,
 * reject, establish, disconnect, the QP attributes of rdma_init_qp_attr(),
 * and ECE, which we never negotiate.  The handshake itself runs in the
 * daemon; here the parameters are checked against the device, and a QP
 * made with rdma_create_qp() is moved along: to RTR/RTS before accepting,
 * to ERR on disconnect.  Synchronous ids wait for the call's event.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/random.h>

#include "cma.h"

/* A random 24-bit starting PSN, as an IB CM picks one. */
static uint32_t random_psn(void)
{
	static __thread unsigned int seed;
	uint32_t psn;

	if (getrandom(&psn, sizeof(psn), GRND_NONBLOCK) != sizeof(psn)) {
		if (!seed)
			seed = (unsigned int)time(NULL) ^ (unsigned int)getpid();
		psn = (uint32_t)rand_r(&seed);
	}
	return psn & 0xffffff;
}

/* ---- listening ------------------------------------------------------------------- */

static int listen_id(struct cma_id *cid, int backlog)
{
	Ibvd__CmListen req = IBVD__CM_LISTEN__INIT;
	int ret;

	req.id = cid->handle;
	req.backlog = backlog;
	ret = cma_call(cid, IBVD_MSG_CM_LISTEN, &req.base, NULL, NULL);
	if (ret < 0)
		return ret;
	/*
	 * Listening may have bound the id (to the wildcard); show where.
	 * The listen itself succeeded whatever the query says.
	 */
	(void)cma_query(cid);
	return 0;
}

int rdma_listen(struct rdma_cm_id *id, int backlog)
{
	if (!cma_id_live(id))
		return cma_ret(-EINVAL);
	return cma_ret(listen_id(to_cma_id(id), backlog));
}

/* ---- parameters ------------------------------------------------------------------------ */

/*
 * The RDMA read resources to ask for or grant: RDMA_MAX_* (and no
 * parameters at all) mean "what we have", dflt_* otherwise; more than the
 * device has is EINVAL (rdma_connect(3), rdma_accept(3)).
 */
static int resources(struct cma_id *cid, const struct rdma_conn_param *p,
		     uint8_t dflt_resp, uint8_t dflt_init, uint8_t *resp,
		     uint8_t *init)
{
	uint8_t max_resp, max_init;
	int ret;

	ret = cma_device_rd_atom(cid->id.verbs, &max_resp, &max_init);
	if (ret < 0)
		return ret;
	if (dflt_resp > max_resp)
		dflt_resp = max_resp;
	if (dflt_init > max_init)
		dflt_init = max_init;
	*resp = p && p->responder_resources != RDMA_MAX_RESP_RES ?
		p->responder_resources : dflt_resp;
	*init = p && p->initiator_depth != RDMA_MAX_INIT_DEPTH ?
		p->initiator_depth : dflt_init;
	if (*resp > max_resp || *init > max_init)
		return -EINVAL;
	return 0;
}

static uint32_t min7(uint8_t v)
{
	return v > 7 ? 7 : v;	/* 3-bit fields of the IB CM */
}

/*
 * The wire form of p; private data over max_pdata is EINVAL.  A length
 * with no data sends none, as rdma-core copies only when it has both.
 */
static int param_msg(struct cma_id *cid, const struct rdma_conn_param *p,
		     bool active, size_t max_pdata, Ibvd__CmConnParam *m)
{
	if (p && p->private_data && p->private_data_len) {
		if (p->private_data_len > max_pdata)
			return -EINVAL;
		m->private_data.data = (uint8_t *)p->private_data;
		m->private_data.len = p->private_data_len;
	}
	m->flow_control = p ? p->flow_control : 0;	/* as rdma-core's zeroed command */
	/*
	 * A REP has no retry count (the passive QP takes the REQ's), so an
	 * rdma_accept caller may leave it unset (libfabric's verbs does):
	 * only a connect reads it.
	 */
	m->retry_count = !p || !active ? 7 : min7(p->retry_count);
	m->rnr_retry_count = p ? min7(p->rnr_retry_count) : 7;
	/* A QP made on the id speaks for itself (rdma_connect(3)). */
	if (cid->id.qp) {
		m->qp_num = cid->id.qp->qp_num;
		m->srq = cid->id.qp->srq != NULL;
	} else if (p) {
		m->qp_num = p->qp_num;
		m->srq = p->srq;
	}
	m->qkey = cid->qkey ? cid->qkey : RDMA_UDP_QKEY;
	m->psn = random_psn();
	return 0;
}

/*
 * A connected TCP-space id with neither a QP nor parameters says nothing
 * of the QP the peer is to talk to: EINVAL, as librdmacm's.
 */
static int params_needed(const struct cma_id *cid,
			 const struct rdma_conn_param *p)
{
	return cid->id.ps == RDMA_PS_TCP && !cid->id.qp && !p ? -EINVAL : 0;
}

/* ---- the active side ------------------------------------------------------------------ */

/*
 * rdma_create_ep's res->ai_connect goes first, the app's private data
 * after it, in buf (max bytes, as much as a request carries): as
 * rdma-core sends them.  Both together must fit.
 */
static int with_ep_connect(const struct cma_id *cid, uint8_t *buf, size_t max,
			   Ibvd__CmConnParam *m)
{
	size_t len = cid->ep_connect_len + m->private_data.len;

	if (!cid->ep_connect_len)
		return 0;
	if (len > max)
		return -EINVAL;
	memcpy(buf, cid->ep_connect, cid->ep_connect_len);
	if (m->private_data.len)
		memcpy(buf + cid->ep_connect_len, m->private_data.data,
		       m->private_data.len);
	m->private_data.data = buf;
	m->private_data.len = len;
	return 0;
}

static int connect_id(struct cma_id *cid, struct rdma_conn_param *p)
{
	Ibvd__CmConnParam param = IBVD__CM_CONN_PARAM__INIT;
	Ibvd__CmConnect req = IBVD__CM_CONNECT__INIT;
	uint8_t resp = 0, init = 0, pdata[CMA_PDATA_MAX];
	size_t max_pdata = cma_req_pdata(cid);
	bool ud = cma_is_ud(cid);
	int ret;

	/* Not resolved yet: no device to connect from. */
	if (!cid->id.verbs || params_needed(cid, p) < 0)
		return -EINVAL;
	if (!ud) {
		ret = resources(cid, p, 0xff, 0xff, &resp, &init);
		if (ret < 0)
			return ret;
	}
	ret = param_msg(cid, p, true, max_pdata, &param);
	if (ret == 0)
		ret = with_ep_connect(cid, pdata, max_pdata, &param);
	if (ret < 0)
		return ret;
	param.responder_resources = resp;
	param.initiator_depth = init;
	req.id = cid->handle;
	req.param = &param;
	/* The daemon finishes a QP made with the id when the reply comes. */
	req.move_qp = cid->id.qp && !ud && cid->qp_bundled;
	ret = cma_call(cid, IBVD_MSG_CM_CONNECT, &req.base, NULL, NULL);
	if (ret < 0)
		return ret;
	/* sent: a later connect of the id's has only its own data */
	free(cid->ep_connect);
	cid->ep_connect = NULL;
	cid->ep_connect_len = 0;
	return cma_sync_wait(cid);
}

int rdma_connect(struct rdma_cm_id *id, struct rdma_conn_param *conn_param)
{
	if (!cma_id_live(id))
		return cma_ret(-EINVAL);
	return cma_ret(connect_id(to_cma_id(id), conn_param));
}

/* The RTU of an id without a QP, after CONNECT_RESPONSE. */
int rdma_establish(struct rdma_cm_id *id)
{
	Ibvd__CmEstablish req = IBVD__CM_ESTABLISH__INIT;

	if (!cma_id_live(id))
		return cma_ret(-EINVAL);
	req.id = to_cma_id(id)->handle;
	return cma_ret(cma_call(to_cma_id(id), IBVD_MSG_CM_ESTABLISH,
				&req.base, NULL, NULL));
}

/* ---- the passive side ----------------------------------------------------------------- */

static int accept_id(struct cma_id *cid, struct rdma_conn_param *p)
{
	Ibvd__CmConnParam param = IBVD__CM_CONN_PARAM__INIT;
	Ibvd__CmConnect req = IBVD__CM_CONNECT__INIT;
	uint8_t resp = 0, init = 0;
	bool ud = cma_is_ud(cid);
	int ret;

	if (!cid->id.verbs || params_needed(cid, p) < 0)
		return -EINVAL;
	if (!ud) {
		ret = resources(cid, p, cid->responder_resources,
				cid->initiator_depth, &resp, &init);
		if (ret < 0)
			return ret;
	}
	/*
	 * Private data longer than the reply carries is the daemon's to
	 * refuse: as the kernel's rdma_accept, it rejects the request too.
	 */
	ret = param_msg(cid, p, false, UINT8_MAX, &param);
	if (ret < 0)
		return ret;
	param.responder_resources = resp;
	param.initiator_depth = init;
	/*
	 * A UD QP is ready already; a connected one must be before the REP:
	 * the daemon moves one made with the id inside CM_ACCEPT.
	 */
	req.move_qp = cid->id.qp && !ud && cid->qp_bundled;
	if (cid->id.qp && !ud && !req.move_qp) {
		ret = cma_qp_to(cid, IBV_QPS_RTR, resp);
		if (ret == 0)
			ret = cma_qp_to(cid, IBV_QPS_RTS, init);
		if (ret < 0)
			goto fail;
	}
	req.id = cid->handle;
	req.param = &param;
	ret = cma_call(cid, IBVD_MSG_CM_ACCEPT, &req.base, NULL, NULL);
	if (ret < 0)
		goto fail;
	if (req.move_qp)
		cma_qp_at_rts(cid);
	if (!ud)
		return cma_sync_wait(cid);
	/*
	 * A SIDR reply completes nothing on this side to wait for.  The
	 * request's event (rdma_get_request) stays in id->event, as
	 * rdma-core leaves it: a UD server reads its peer's address (the
	 * event's param.ud) there after the accept.  The id's destroy acks it.
	 */
	return 0;
fail:
	if (!ud)
		cma_qp_to_err(cid);
	return ret;
}

int rdma_accept(struct rdma_cm_id *id, struct rdma_conn_param *conn_param)
{
	if (!cma_id_live(id))
		return cma_ret(-EINVAL);
	return cma_ret(accept_id(to_cma_id(id), conn_param));
}

static int reject_id(struct cma_id *cid, const void *pdata, uint8_t len,
		     uint32_t reason)
{
	Ibvd__CmReject req = IBVD__CM_REJECT__INIT;
	size_t max = cma_is_ud(cid) ? CMA_PDATA_SIDR_REP : CMA_PDATA_REJ;
	int ret;

	if (!pdata)
		len = 0;	/* a length with no data sends none: rdma-core's */
	if (len > max)
		return -EINVAL;
	req.id = cid->handle;
	req.private_data.data = (uint8_t *)pdata;
	req.private_data.len = len;
	req.reason = reason;
	ret = cma_call(cid, IBVD_MSG_CM_REJECT, &req.base, NULL, NULL);
	/* rdma_get_request(3): the request's event lives until rejected. */
	if (ret == 0)
		cma_put_event(cid);
	return ret;
}

int rdma_reject(struct rdma_cm_id *id, const void *private_data,
		uint8_t private_data_len)
{
	if (!cma_id_live(id))
		return cma_ret(-EINVAL);
	return cma_ret(reject_id(to_cma_id(id), private_data,
				 private_data_len, 0));
}

/*
 * The ECE flavour of reject tells the peer its ECE options were refused:
 * the REJ's reason is 35 (vendor option not supported), which the peer
 * reads as its REJECTED event's status to retry without them.
 */
int rdma_reject_ece(struct rdma_cm_id *id, const void *private_data,
		    uint8_t private_data_len)
{
	if (!cma_id_live(id))
		return cma_ret(-EINVAL);
	return cma_ret(reject_id(to_cma_id(id), private_data,
				 private_data_len, CMA_REJ_ECE));
}

/* ---- teardown -------------------------------------------------------------------------- */

static int disconnect_id(struct cma_id *cid)
{
	Ibvd__CmDisconnect req = IBVD__CM_DISCONNECT__INIT;
	bool wait;
	int ret;

	/*
	 * Flush what is posted, as a DREQ would on the wire: the daemon moves
	 * a QP made with the id to ERR inside CM_DISCONNECT.
	 */
	req.move_qp = cid->id.qp && cid->qp_bundled;
	if (!req.move_qp) {
		ret = cma_qp_to_err(cid);
		if (ret < 0)
			return ret;
	}
	/*
	 * A synchronous id sees every one of its events here, so it knows
	 * whether a DISCONNECTED is still to come: only for a connection
	 * that was established and not yet torn down (by either side).
	 */
	pthread_mutex_lock(&cid->mut);
	wait = cid->established && !cid->disconnected;
	pthread_mutex_unlock(&cid->mut);
	req.id = cid->handle;
	ret = cma_call(cid, IBVD_MSG_CM_DISCONNECT, &req.base, NULL, NULL);
	/* Refused (never connected): the QP goes to ERR all the same. */
	if (req.move_qp && ret == 0)
		cma_qp_at_err(cid);
	else if (req.move_qp)
		(void)cma_qp_to_err(cid);
	if (ret < 0)
		return ret;
	return wait ? cma_sync_wait(cid) : 0;
}

int rdma_disconnect(struct rdma_cm_id *id)
{
	if (!cma_id_live(id))
		return cma_ret(-EINVAL);
	return cma_ret(disconnect_id(to_cma_id(id)));
}

/* ---- QP attributes, notifications ----------------------------------------------------- */

int rdma_init_qp_attr(struct rdma_cm_id *id, struct ibv_qp_attr *qp_attr,
		      int *qp_attr_mask)
{
	if (!cma_id_live(id) || !qp_attr || !qp_attr_mask)
		return cma_ret(-EINVAL);
	return cma_ret(cma_init_qp_attr(to_cma_id(id), qp_attr->qp_state,
					qp_attr, qp_attr_mask));
}

int rdma_notify(struct rdma_cm_id *id, enum ibv_event_type event)
{
	Ibvd__CmNotify req = IBVD__CM_NOTIFY__INIT;

	if (!cma_id_live(id))
		return cma_ret(-EINVAL);
	req.id = to_cma_id(id)->handle;
	req.event = event;
	return cma_ret(cma_call(to_cma_id(id), IBVD_MSG_CM_NOTIFY, &req.base,
				NULL, NULL));
}

/* ---- ECE ------------------------------------------------------------------------------ */

/*
 * Enhanced Connection Establishment is for ids whose QP the app manages
 * (none on the id).  Our devices have no ECE options: the local ones are
 * kept and never sent, and the peer's are always none.
 */
int rdma_set_local_ece(struct rdma_cm_id *id, struct ibv_ece *ece)
{
	if (!cma_id_live(id) || id->qp || !ece)
		return cma_ret(-EINVAL);
	to_cma_id(id)->local_ece = *ece;
	return 0;
}

int rdma_get_remote_ece(struct rdma_cm_id *id, struct ibv_ece *ece)
{
	if (!cma_id_live(id) || id->qp || !ece)
		return cma_ret(-EINVAL);
	memset(ece, 0, sizeof(*ece));
	return 0;
}
