/*
 * Protection domains: ALLOC_PD, DEALLOC_PD.  A PD only groups objects;
 * the engine compares PD pointers to keep keys within their domain.
 */
#include <config.h>

#include <errno.h>
#include <stdlib.h>

#include "context.h"
#include "ibverbsd.pb-c.h"
#include "server/call.h"
#include "verbs.h"

int ibvd_req_alloc_pd(struct ibvd_call *call)
{
	struct ibvd_context *ctx = ibvd_call_ctx(call);
	Ibvd__Handle reply = IBVD__HANDLE__INIT;
	struct ibvd_pd *pd = calloc(1, sizeof(*pd));
	int ret;

	if (!pd)
		return -ENOMEM;
	pd->ctx = ctx;
	ret = ibvd_obj_add(ctx, IBVD_OBJ_PD, pd, &pd->handle);
	if (ret < 0) {
		free(pd);
		return ibvd_call_error(call, ret, "too many PDs");
	}
	reply.handle = pd->handle;
	ret = ibvd_call_reply(call, &reply.base, NULL, 0);
	/* A failed send closed the session and its context, PD included. */
	if (ret < 0 && ibvd_call_ctx(call))
		ibvd_pd_destroy(pd);
	return ret;
}

/* Also the context teardown's; no lock needed: the engine never sees PDs
 * except through their users, which are gone. */
void ibvd_pd_destroy(struct ibvd_pd *pd)
{
	ibvd_handle_remove(&pd->ctx->handles, pd->handle, IBVD_OBJ_PD);
	free(pd);
}

int ibvd_req_dealloc_pd(struct ibvd_call *call)
{
	const Ibvd__Handle *req = (const Ibvd__Handle *)call->msg;
	struct ibvd_context *ctx = ibvd_call_ctx(call);
	struct ibvd_pd *pd = ibvd_handle_lookup(&ctx->handles, req->handle,
						IBVD_OBJ_PD);

	if (!pd)
		return ibvd_call_error(call, -EINVAL, "no PD %#x", req->handle);
	if (pd->users)
		return ibvd_call_error(call, -EBUSY, "PD %#x is in use by %u objects",
				       req->handle, pd->users);
	ibvd_pd_destroy(pd);
	return 0;
}
