/*
 * The synchronous endpoint API (rdma_server/rdma_client style): an id
 * made, bound or resolved, and given its QP in one call from an
 * rdma_getaddrinfo() result, and blocking retrieval of connection
 * requests on a listener made that way.  Such ids are synchronous: each
 * call waits on the id's private channel for the event it produces.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include <rdma/rdma_verbs.h>

#include "cma.h"

/* How long the active side resolves for, as librdmacm gives it. */
#define EP_RESOLVE_TIMEOUT_MS	2000

static int ep_passive(struct cma_id *cid, struct rdma_addrinfo *res,
		      struct ibv_pd *pd, struct ibv_qp_init_attr *attr)
{
	int ret;

	if (!res->ai_src_addr)
		return -EINVAL;
	ret = cma_bind_addr(cid, res->ai_src_addr);
	if (ret < 0)
		return ret;
	/* What rdma_get_request() makes the QPs of new ids with. */
	if (attr) {
		cid->ep_qp_attr = malloc(sizeof(*attr));
		if (!cid->ep_qp_attr)
			return -ENOMEM;
		*cid->ep_qp_attr = *attr;
		cid->ep_qp_attr->qp_type = cid->id.qp_type;
	}
	cid->ep_pd = pd;
	/* as rdma-core's passive endpoint: the id names its PD, if given */
	if (pd)
		cid->id.pd = pd;
	return 0;
}

/*
 * res->ai_connect: private data rdma_getaddrinfo's resolver may give for
 * the connect; the id's first rdma_connect() sends it before the app's,
 * as rdma-core does.
 */
static int ep_connect_data(struct cma_id *cid, const struct rdma_addrinfo *res)
{
	if (!res->ai_connect_len)
		return 0;
	if (!res->ai_connect)
		return -EINVAL;
	cid->ep_connect = malloc(res->ai_connect_len);
	if (!cid->ep_connect)
		return -ENOMEM;
	memcpy(cid->ep_connect, res->ai_connect, res->ai_connect_len);
	cid->ep_connect_len = res->ai_connect_len;
	return 0;
}

static int ep_active(struct cma_id *cid, struct rdma_addrinfo *res,
		     struct ibv_pd *pd, struct ibv_qp_init_attr *attr)
{
	int ret;

	if (!res->ai_dst_addr)
		return -EINVAL;
	ret = cma_resolve_addr(cid, res->ai_src_addr, res->ai_dst_addr,
			       EP_RESOLVE_TIMEOUT_MS);
	if (ret < 0)
		return ret;
	/* Path records res came with are the route, as the option makes one. */
	if (res->ai_route_len)
		ret = cma_set_ib_path(cid, res->ai_route, res->ai_route_len);
	else
		ret = cma_resolve_route(cid, EP_RESOLVE_TIMEOUT_MS);
	if (ret == 0 && attr) {
		/* The QP is of the type res asked for (callers leave it 0). */
		attr->qp_type = cid->id.qp_type;
		ret = cma_create_qp(cid, pd, attr);
	}
	if (ret == 0)
		ret = ep_connect_data(cid, res);
	return ret;
}

static int create_ep(struct rdma_addrinfo *res, struct ibv_pd *pd,
		     struct ibv_qp_init_attr *attr, struct cma_id **ret_id)
{
	enum rdma_port_space ps = (enum rdma_port_space)res->ai_port_space;
	enum ibv_qp_type qp_type = (enum ibv_qp_type)res->ai_qp_type;
	struct cma_id *cid;
	int ret;

	/* Either of the two names the other (rdma_getaddrinfo(3)). */
	if (!ps)
		ps = qp_type == IBV_QPT_UD ? RDMA_PS_UDP : RDMA_PS_TCP;
	if (!qp_type) {
		ret = cma_ps_qp_type(ps, &qp_type);
		if (ret < 0)
			return ret;
	}
	ret = cma_create_id(NULL, NULL, ps, qp_type, &cid);
	if (ret < 0)
		return ret;
	if (res->ai_flags & RAI_PASSIVE)
		ret = ep_passive(cid, res, pd, attr);
	else
		ret = ep_active(cid, res, pd, attr);
	if (ret < 0) {
		if (cid->id.qp)
			rdma_destroy_qp(&cid->id);
		cma_destroy_id(cid);
		return ret;
	}
	*ret_id = cid;
	return 0;
}

int rdma_create_ep(struct rdma_cm_id **id, struct rdma_addrinfo *res,
		   struct ibv_pd *pd, struct ibv_qp_init_attr *qp_init_attr)
{
	struct cma_id *cid;
	int ret;

	if (!id || !res)
		return cma_ret(-EINVAL);
	ret = create_ep(res, pd, qp_init_attr, &cid);
	if (ret < 0)
		return cma_ret(ret);
	*id = &cid->id;
	return 0;
}

void rdma_destroy_ep(struct rdma_cm_id *id)
{
	if (!cma_id_live(id))
		return;
	rdma_destroy_qp(id);
	rdma_destroy_srq(id);
	cma_destroy_id(to_cma_id(id));
}

static int get_request(struct cma_id *listen, struct cma_id **ret_id)
{
	struct ibv_qp_init_attr attr;
	struct rdma_cm_event *e;
	struct cma_id *cid;
	int ret;

	/*
	 * rdma_get_request(3): synchronous listeners only.  As rdma-core: an
	 * event that is no request (an error, a rejection) is the answer,
	 * and stays on the listener (listen->event) for the app to look at.
	 */
	if (!listen->sync)
		return -EINVAL;
	ret = cma_sync_wait(listen);
	if (ret < 0)
		return ret;
	e = listen->id.event;
	if (e->event != RDMA_CM_EVENT_CONNECT_REQUEST)
		return -EINVAL;

	/* The request's event goes with the new id until accept/reject. */
	listen->id.event = NULL;
	cid = to_cma_id(e->id);
	cid->id.event = e;
	if (listen->ep_qp_attr) {
		attr = *listen->ep_qp_attr;
		ret = cma_create_qp(cid, listen->ep_pd, &attr);
		if (ret < 0) {
			(void)rdma_reject(&cid->id, NULL, 0);
			cma_destroy_id(cid);
			return ret;
		}
	}
	*ret_id = cid;
	return 0;
}

int rdma_get_request(struct rdma_cm_id *listen, struct rdma_cm_id **id)
{
	struct cma_id *cid;
	int ret;

	if (!cma_id_live(listen) || !id)
		return cma_ret(-EINVAL);
	ret = get_request(to_cma_id(listen), &cid);
	if (ret < 0)
		return cma_ret(ret);
	*id = &cid->id;
	return 0;
}
