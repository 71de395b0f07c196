/*
 * Memory windows: ALLOC_MW, DEALLOC_MW.  Only the window's lifetime is a
 * control-path matter; binding and invalidating run on the data path
 * (engine/mw.c), in order with the QP's other work requests.
 */
#include <config.h>

#include <errno.h>
#include <stdlib.h>

#include <infiniband/verbs.h>

#include "context.h"
#include "ibverbsd.pb-c.h"
#include "server/call.h"
#include "verbs.h"

static struct ibvd_mw *mw_new(struct ibvd_context *ctx, struct ibvd_pd *pd,
			      uint32_t type)
{
	struct ibvd_mw *mw = calloc(1, sizeof(*mw));

	if (!mw)
		return NULL;
	mw->ctx = ctx;
	mw->pd = pd;
	mw->type = type;
	pthread_mutex_init(&mw->lock, NULL);
	return mw;
}

static void mw_free(struct ibvd_mw *mw)
{
	pthread_mutex_destroy(&mw->lock);
	free(mw);
}

/* Make mw visible: handle, then key (under the write lock). */
static int mw_publish(struct ibvd_context *ctx, struct ibvd_mw *mw)
{
	int ret;

	ret = ibvd_obj_add(ctx, IBVD_OBJ_MW, mw, &mw->handle);
	if (ret < 0)
		return ret;
	ibvd_objects_write_lock();
	ret = ibvd_mw_register(mw);
	ibvd_objects_write_unlock();
	if (ret < 0) {
		ibvd_handle_remove(&ctx->handles, mw->handle, IBVD_OBJ_MW);
		return ret;
	}
	mw->pd->users++;
	return 0;
}

int ibvd_req_alloc_mw(struct ibvd_call *call)
{
	const Ibvd__AllocMw *req = (const Ibvd__AllocMw *)call->msg;
	struct ibvd_context *ctx = ibvd_call_ctx(call);
	Ibvd__AllocMwReply reply = IBVD__ALLOC_MW_REPLY__INIT;
	struct ibvd_pd *pd;
	struct ibvd_mw *mw;
	int ret;

	pd = ibvd_handle_lookup(&ctx->handles, req->pd, IBVD_OBJ_PD);
	if (!pd)
		return ibvd_call_error(call, -EINVAL, "no PD %#x", req->pd);
	if (req->type != IBV_MW_TYPE_1 && req->type != IBV_MW_TYPE_2)
		return ibvd_call_error(call, -EINVAL, "bad window type %u",
				       req->type);
	mw = mw_new(ctx, pd, req->type);
	ret = mw ? mw_publish(ctx, mw) : -ENOMEM;
	if (ret < 0) {
		if (mw)
			mw_free(mw);
		return ibvd_call_error(call, ret, "cannot create the window");
	}
	reply.handle = mw->handle;
	reply.rkey = mw->rkey;
	ret = ibvd_call_reply(call, &reply.base, NULL, 0);
	/* A failed send closed the session and its context, window included. */
	if (ret < 0 && ibvd_call_ctx(call)) {
		ibvd_objects_write_lock();
		ibvd_mw_destroy(mw);
		ibvd_objects_write_unlock();
	}
	return ret;
}

/*
 * The objects lock is held for writing: no engine thread is binding,
 * invalidating or reading the window, so its binding needs no lock here.
 * A bound window lets go of its MR.
 */
void ibvd_mw_destroy(struct ibvd_mw *mw)
{
	if (mw->mr)
		__atomic_fetch_sub(&mw->mr->mw_binds, 1, __ATOMIC_RELAXED);
	ibvd_mw_unregister(mw);
	ibvd_handle_remove(&mw->ctx->handles, mw->handle, IBVD_OBJ_MW);
	mw->pd->users--;
	mw_free(mw);
}

static int unbind_if_on(uint32_t handle, enum ibvd_obj_kind kind, void *obj,
			void *arg)
{
	struct ibvd_mw *mw = obj;
	const struct ibvd_qp *qp = arg;

	(void)handle;
	(void)kind;
	if (mw->type == IBV_MW_TYPE_2 && mw->mr && mw->qp_num == qp->qp_num) {
		__atomic_fetch_sub(&mw->mr->mw_binds, 1, __ATOMIC_RELAXED);
		mw->mr = NULL;
	}
	return 0;
}

/*
 * The write lock is held.  Type-2 windows live with the QP they are bound
 * to: invalidated with it, so a later QP that draws the same number never
 * inherits them, and their MRs can go.  Only a QP that bound one has any
 * to look for.
 */
void ibvd_mw_qp_gone(struct ibvd_qp *qp)
{
	/* no engine pass runs now: what it marked is seen */
	if (__atomic_load_n(&qp->mw2_bound, __ATOMIC_RELAXED))
		ibvd_handle_foreach(&qp->ctx->handles, IBVD_OBJ_MW,
				    unbind_if_on, qp);
}

int ibvd_req_dealloc_mw(struct ibvd_call *call)
{
	const Ibvd__Handle *req = (const Ibvd__Handle *)call->msg;
	struct ibvd_context *ctx = ibvd_call_ctx(call);
	struct ibvd_mw *mw = ibvd_handle_lookup(&ctx->handles, req->handle,
						IBVD_OBJ_MW);

	if (!mw)
		return ibvd_call_error(call, -EINVAL, "no MW %#x", req->handle);
	ibvd_objects_write_lock();
	ibvd_mw_destroy(mw);
	ibvd_objects_write_unlock();
	return 0;
}
