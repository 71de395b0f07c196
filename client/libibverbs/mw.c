/*
 * Memory windows: ALLOC_MW/DEALLOC_MW round trips.  Binding and
 * invalidating are work requests (post.c, qp_ex.c) the engine executes in
 * order with the QP's other work.  The daemon picks the key; its upper 24
 * bits name the window for good, binds change only the low byte.
 */
#include "config.h"

#include <stdlib.h>

#include "ibverbsd.pb-c.h"
#include "ibvd_verbs.h"

static int alloc_mw(struct ibv_pd *pd, enum ibv_mw_type type,
		    struct ibv_mw *mw)
{
	Ibvd__AllocMw req = IBVD__ALLOC_MW__INIT;
	Ibvd__AllocMwReply *reply = NULL;
	int ret;

	req.pd = pd->handle;
	req.type = type;
	ret = ibvd_conn_call(ibvc_conn_of(pd->context), IBVD_MSG_ALLOC_MW,
			     &req.base, &ibvd__alloc_mw_reply__descriptor,
			     (ProtobufCMessage **)&reply, NULL, NULL);
	if (ret < 0)
		return ret;
	mw->context = pd->context;
	mw->pd = pd;
	mw->type = type;
	mw->handle = reply->handle;
	mw->rkey = reply->rkey;
	ibvc_pd_hold(pd);
	ibvd__alloc_mw_reply__free_unpacked(reply, NULL);
	return 0;
}

struct ibv_mw *ibvc_alloc_mw_op(struct ibv_pd *pd, enum ibv_mw_type type)
{
	struct ibv_mw *mw;
	int ret;

	if (type != IBV_MW_TYPE_1 && type != IBV_MW_TYPE_2)
		return ibvc_null_ret(-EINVAL);
	mw = calloc(1, sizeof(*mw));
	if (!mw)
		return ibvc_null_ret(-ENOMEM);
	ret = alloc_mw(pd, type, mw);
	if (ret < 0) {
		free(mw);
		return ibvc_null_ret(ret);
	}
	return mw;
}

int ibvc_dealloc_mw_op(struct ibv_mw *mw)
{
	int ret;

	ret = ibvc_destroy_handle(mw->context, IBVD_MSG_DEALLOC_MW, mw->handle);
	if (ret < 0)
		return ibvc_errno_ret(ret);
	ibvc_pd_release(mw->pd);
	free(mw);
	return 0;
}
